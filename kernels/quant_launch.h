/* Quantization family, fast path: the launches (plain HIP through
 * hip_port.h). An operand runs as its params' route says (or as the
 * dispatcher would choose when the route is left at auto): the streamed
 * kernel (quant_stream.h), the statistics and combine kernels followed by
 * the lean or the tiled encode kernel (quant_fast.h: quant_stats.h,
 * quant_lean.h, quant_tiled.h), or the portable kernels (quant_portable.h);
 * K and V at once in one grid, side by side on two streams, or one after
 * the other. QATTN_QUANT_FAST_INSTANCE defines an instance. */
#ifndef QATTN_KERNELS_QUANT_LAUNCH_H
#define QATTN_KERNELS_QUANT_LAUNCH_H

#include <stdlib.h>
#include <string.h>

#include "quant_cast.h"
#include "quant_fast.h"
#include "quant_stream_plan.h"

#define QATTN_QR_BIT(r) (1u << QATTN_KERNELS_QROUTE_##r)

/* the routes the fast path can take for p (the dispatcher's choice among
 * them: qattn_kernels_quant_route): the portable kernels always; the cast
 * kernel for the unscaled casts it takes; the fused ones where qattn_qf_plan
 * takes p, the lean encode kernel and the streamed kernel where their plans do */
template <int IN>
static unsigned qattn_quant_fast_routes(const qattn_kernels_quant_params &p)
{
    unsigned r = QATTN_QR_BIT(PORTABLE);
    int tt = 0, ni = 1, grid = 0;
    size_t smem = 0;
    if (p.in == IN && qattn_qc_takes(p))
        r |= QATTN_QR_BIT(CAST);
    if (p.in != IN || !qattn_qf_plan(p, &tt, &smem, &ni))
        return r;
    r |= QATTN_QR_BIT(TILED);
    if (qattn_qf_lean_takes(p))
        r |= QATTN_QR_BIT(LEAN);
    qattn_qs_fn f;
    qattn_qs_args a;
    if (qattn_qs_plan<IN>(p, &f, &grid, &smem, &a))
        r |= QATTN_QR_BIT(STREAMED);
    return r;
}

/* p's route: its params' (which must be one the instance can take), or the
 * dispatcher's choice for AUTO; 0 or an error */
template <int IN>
static int qattn_quant_fast_route(qattn_kernels_quant_params &p, qattn_err *err)
{
    const unsigned routes = qattn_quant_fast_routes<IN>(p);
    if (p.route == QATTN_KERNELS_QROUTE_AUTO) {
        p.route = qattn_kernels_quant_route(routes, &p);
        if (p.stream_tpr == 0)
            p.stream_tpr = qattn_kernels_quant_tpr_override();
    }
    if ((unsigned)p.route >= QATTN_KERNELS_QROUTE_COUNT || !((routes >> p.route) & 1u))
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED, "quant: the %s route cannot run this operand",
                             qattn_kernels_qroute_name(p.route));
    return QATTN_OK;
}

template <int IN>
static int qattn_quant_fast_launch(const qattn_kernels_quant_params *pp, void *stream, qattn_err *err)
{
    qattn_kernels_quant_params p = *pp;
    hipStream_t st = (hipStream_t)stream;
    int rc = qattn_quant_fast_route<IN>(p, err);
    if (rc)
        return rc;
    if (p.route == QATTN_KERNELS_QROUTE_PORTABLE)
        return qattn_quant_portable_launch<IN>(&p, stream, err);
    if (p.heads <= 0 || p.nseq <= 0 || p.seqlen < 0 || p.heads > 65535 || p.nseq > 65535)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: bad shape (heads %d, nseq %d, d %d, seqlen %d)", p.heads,
                             p.nseq, p.d, p.seqlen);
    if (p.seqlen == 0)
        return QATTN_OK;
    if (p.route == QATTN_KERNELS_QROUTE_CAST)
        return qattn_qc_launch<IN>(p, st, err);
    const int stats = qattn_qf_uniform(p.group) || p.smooth == QATTN_KERNELS_SMOOTH_TOKENS;
    if (p.route == QATTN_KERNELS_QROUTE_STREAMED) {
        qattn_qs_fn sf = (qattn_qs_fn)0;
        qattn_qs_args sa;
        int sgrid = 0;
        size_t ssm = 0;
        (void)qattn_qs_plan<IN>(p, &sf, &sgrid, &ssm, &sa); /* succeeds: the route is one it can take */
        if (stats)
            QATTN_QUANT_CHECK(qattn_qf_clear_counters(p, st), "quant stream counters");
        /* overlapped only right after the previous kernel (no clearing between); its blocks wait for
         * blocks of their own group only, which all start */
        qattn_port_launch_resident_overlap(p.overlap && (!stats || p.counters_zero), sf, dim3((unsigned)sgrid),
                                           dim3(2 * p.d), ssm, st, p, sa);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant stream kernel launch");
        return QATTN_OK;
    }
    if (stats) {
        const int sums = p.smooth == QATTN_KERNELS_SMOOTH_TOKENS, minmax = qattn_qf_uniform(p.group);
        void (*ks)(qattn_kernels_quant_params) = sums && minmax ? &qattn_qf_stats_kernel<IN, 1, 1>
                                                 : sums         ? &qattn_qf_stats_kernel<IN, 1, 0>
                                                                : &qattn_qf_stats_kernel<IN, 0, 1>;
        hipLaunchKernelGGL(ks, dim3((unsigned)qattn_qf_nchunk(p), (unsigned)p.heads, (unsigned)p.nseq),
                           dim3(QATTN_QF_STAT_THREADS), qattn_qf_stats_scratch(p.d), st, p);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant stats kernel launch");
        void (*kc)(qattn_kernels_quant_params) = &qattn_qf_combine_kernel<IN>;
        hipLaunchKernelGGL(kc, dim3((unsigned)p.heads, (unsigned)p.nseq), dim3(QATTN_QF_STAT_THREADS), 0, st, p);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant combine kernel launch");
    }
    const int64_t span = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED ? p.npad : p.seqlen;
    if (p.route == QATTN_KERNELS_QROUTE_LEAN) {
        const qattn_qf_lean_fn lf = qattn_qf_ladder<qattn_qf_lean_family, IN>(p);
        const dim3 lg((unsigned)((span + QATTN_QF_LTT - 1) / QATTN_QF_LTT), (unsigned)p.heads, (unsigned)p.nseq);
        qattn_port_launch_overlap(p.overlap, lf, lg, dim3(2 * p.d), 0, st, p, qattn_qf_lean_args_of(p));
        QATTN_QUANT_CHECK(hipGetLastError(), "quant lean encode kernel launch");
        return QATTN_OK;
    }
    int tt = 0, ni = 1;
    size_t smem = 0;
    (void)qattn_qf_plan(p, &tt, &smem, &ni); /* succeeds: the tiled route is one it can take */
    const qattn_qf_encode_fn ke = ni == 1 ? qattn_qf_pick_fmt<IN, 1>(p) : qattn_qf_pick_fmt<IN, 2>(p);
    hipLaunchKernelGGL(ke, dim3((unsigned)((span + tt - 1) / tt), (unsigned)p.heads, (unsigned)p.nseq),
                       dim3(QATTN_QF_THREADS), smem, st, p, tt);
    QATTN_QUANT_CHECK(hipGetLastError(), "quant encode kernel launch");
    return QATTN_OK;
}

/* p, with share 2, run by the streamed kernel on half of its block slots
 * (not the portable kernels): the kernel, its grid, shared memory,
 * arguments and capacity (blocks on the device at once) */
template <int IN>
static int qattn_quant_fast_half(const qattn_kernels_quant_params &p, qattn_qs_fn *f, int *grid, size_t *smem,
                                 qattn_qs_args *a, int *cap)
{
    int tt = 0, ni = 1;
    size_t sm = 0;
    if (p.share != 2 || !qattn_qf_plan(p, &tt, &sm, &ni) || p.heads <= 0 || p.nseq <= 0 || p.seqlen <= 0 ||
        p.heads > 65535 || p.nseq > 65535 || !qattn_qs_plan<IN>(p, f, grid, smem, a))
        return 0;
    *cap = qattn_qs_capacity(*f, 2 * p.d, *smem);
    return *cap > 0;
}

/* K (k) and V (v) at once, each streamed kernel on half of the device's
 * block slots, in one of two ways:
 *   one grid (qattn_quant_fast_kv_grid, where an instance of
 *     qattn_qs_kv_kernel exists: K int8 / int4 with token-local groups
 *     smoothed over the sequence, V e4m3 with token-uniform groups,
 *     unsmoothed, transposed; the same input and d): blocks [0, nk) run
 *     K's grid and the rest V's;
 *   side by side (qattn_quant_fast_kv_sides, for any two operands of the
 *     streamed kernel): K on the caller's stream, V on a second one, forked
 *     and joined by events. On the H100 1-1.4% faster than one after the
 *     other; on the H200 by turns 3% faster or 3% slower between processes
 *     (kernels/LOG.md).
 * Each needs both operands' kernels (and the one-grid kernel) to fit as
 * many blocks on a multiprocessor: then every block holds at most
 * 1 / occupancy of each resource, any mix of blocks packs, and both halves
 * are resident together whichever starts first, so no group waits for a
 * block that cannot start (two full-device persistent grids could
 * deadlock each other). The dispatcher picks one of the modes the pair
 * allows (qattn_kernels_quant_kv_mode), else one after the other. */
template <int IN>
static int qattn_quant_fast_kv_sides(const qattn_kernels_quant_params &k, const qattn_kernels_quant_params &v,
                                     qattn_kernels_quant_params *k2, qattn_kernels_quant_params *v2)
{
    *k2 = k;
    *v2 = v;
    k2->share = v2->share = 2;
    k2->route = v2->route = QATTN_KERNELS_QROUTE_STREAMED;
    qattn_qs_fn f;
    int grid, cap[2];
    size_t sm;
    qattn_qs_args a;
    return qattn_quant_fast_half<IN>(*k2, &f, &grid, &sm, &a, &cap[0]) &&
           qattn_quant_fast_half<IN>(*v2, &f, &grid, &sm, &a, &cap[1]) && cap[0] == cap[1];
}
template <int IN>
static int qattn_quant_fast_kv_grid(const qattn_kernels_quant_params &k, const qattn_kernels_quant_params &v,
                                    qattn_qs_kv_fn *fn, int *nk, int *grid, size_t *smem, qattn_qs_args *ak,
                                    qattn_qs_args *av)
{
    if (k.in != IN || v.in != IN || k.d != v.d || qattn_qf_uniform(k.group) ||
        k.smooth != QATTN_KERNELS_SMOOTH_TOKENS || k.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED ||
        v.fmt != QATTN_FMT_E4M3 || !qattn_qf_uniform(v.group) || v.smooth != QATTN_KERNELS_SMOOTH_NONE ||
        v.layout != QATTN_KERNELS_LAYOUT_TRANSPOSED)
        return 0;
    const qattn_qs_kv_fn f = qattn_qs_kv_of<IN>(k);
    qattn_kernels_quant_params k2 = k, v2 = v;
    k2.share = v2.share = 2;
    qattn_qs_fn fk, fv;
    int gk, gv, ck, cv;
    size_t sk, sv;
    if (!f || !qattn_quant_fast_half<IN>(k2, &fk, &gk, &sk, ak, &ck) ||
        !qattn_quant_fast_half<IN>(v2, &fv, &gv, &sv, av, &cv))
        return 0;
    const size_t sm = sk > sv ? sk : sv;
    const int cap = qattn_qs_capacity(f, 2 * k.d, sm);
    if (cap <= 0 || cap != ck || cap != cv || gk + gv > cap)
        return 0;
    *nk = gk;
    *grid = gk + gv;
    *fn = f;
    *smem = sm;
    return 1;
}

/* a second stream and the fork and join events of the current device
 * (made once); 0 if the device cannot give them */
static int qattn_quant_side(hipStream_t *side, hipEvent_t *fork, hipEvent_t *join)
{
    static struct {
        int made;
        hipStream_t s;
        hipEvent_t a, b;
    } dev[16];
    int d = 0;
    if (hipGetDevice(&d) != hipSuccess || d < 0 || d >= 16)
        return 0;
    if (!dev[d].made) {
        if (hipStreamCreateWithFlags(&dev[d].s, hipStreamNonBlocking) != hipSuccess ||
            hipEventCreateWithFlags(&dev[d].a, hipEventDisableTiming) != hipSuccess ||
            hipEventCreateWithFlags(&dev[d].b, hipEventDisableTiming) != hipSuccess) {
            (void)hipGetLastError();
            return 0;
        }
        dev[d].made = 1;
    }
    *side = dev[d].s;
    *fork = dev[d].a;
    *join = dev[d].b;
    return 1;
}

/* the K, V modes the fast path can take for k and v (bit set of
 * qattn_kernels_kvmode): one after the other always; one grid, side by
 * side where the kernels fit (qattn_quant_fast_kv_grid, _sides) */
template <int IN>
static unsigned qattn_quant_fast_kv_modes(const qattn_kernels_quant_params &k, const qattn_kernels_quant_params &v)
{
    unsigned m = 1u << QATTN_KERNELS_KV_SERIAL;
    qattn_qs_kv_fn f;
    int nk, grid;
    size_t sm;
    qattn_qs_args ak, av;
    qattn_kernels_quant_params k2, v2;
    if (qattn_quant_fast_kv_grid<IN>(k, v, &f, &nk, &grid, &sm, &ak, &av))
        m |= 1u << QATTN_KERNELS_KV_ONE_GRID;
    if (qattn_quant_fast_kv_sides<IN>(k, v, &k2, &v2))
        m |= 1u << QATTN_KERNELS_KV_STREAMS;
    return m;
}

/* K (k) and V (v) by their params' kv mode (the dispatcher's choice for
 * AUTO; the routes of AUTO operands likewise) */
template <int IN>
static int qattn_quant_fast_launch_kv(const qattn_kernels_quant_params *kin, const qattn_kernels_quant_params *vin,
                                      void *stream, qattn_err *err)
{
    hipStream_t st = (hipStream_t)stream, side;
    hipEvent_t fork, join;
    qattn_kernels_quant_params k = *kin, v = *vin;
    int rc = qattn_quant_fast_route<IN>(k, err);
    rc = rc ? rc : qattn_quant_fast_route<IN>(v, err);
    if (rc)
        return rc;
    const unsigned modes = qattn_quant_fast_kv_modes<IN>(k, v);
    qattn_kernels_kvmode mode = k.kv;
    if (mode == QATTN_KERNELS_KV_AUTO)
        mode = qattn_kernels_quant_kv_mode(modes, k.route, v.route);
    if ((unsigned)mode >= QATTN_KERNELS_KV_COUNT || !((modes >> mode) & 1u) ||
        (mode != QATTN_KERNELS_KV_SERIAL &&
         (k.route != QATTN_KERNELS_QROUTE_STREAMED || v.route != QATTN_KERNELS_QROUTE_STREAMED)))
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED, "quant: K and V cannot run %s (routes %s, %s)",
                             qattn_kernels_kvmode_name(mode), qattn_kernels_qroute_name(k.route),
                             qattn_kernels_qroute_name(v.route));
    if (mode == QATTN_KERNELS_KV_ONE_GRID) {
        qattn_qs_kv_fn f = NULL;
        int nk = 0, grid = 0;
        size_t sm = 0;
        qattn_qs_args ak, av;
        if (!qattn_quant_fast_kv_grid<IN>(k, v, &f, &nk, &grid, &sm, &ak, &av) || !f) /* in modes: cannot fail */
            return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED, "quant: no one-grid K, V kernel");
        QATTN_QUANT_CHECK(qattn_qf_clear_counters(k, st), "quant stream counters (K)");
        QATTN_QUANT_CHECK(qattn_qf_clear_counters(v, st), "quant stream counters (V)");
        qattn_port_launch_resident_overlap(k.overlap && k.counters_zero && v.counters_zero, f, dim3((unsigned)grid),
                                           dim3(2 * k.d), sm, st, k, ak, v, av, nk);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant stream kernel launch (K and V)");
        return QATTN_OK;
    }
    qattn_kernels_quant_params k2, v2;
    if (mode == QATTN_KERNELS_KV_STREAMS && qattn_quant_fast_kv_sides<IN>(k, v, &k2, &v2) &&
        qattn_quant_side(&side, &fork, &join)) {
        QATTN_QUANT_CHECK(hipEventRecord(fork, st), "quant K, V: fork event");
        QATTN_QUANT_CHECK(hipStreamWaitEvent(side, fork, 0), "quant K, V: side stream wait");
        rc = qattn_quant_fast_launch<IN>(&k2, stream, err);
        rc = rc ? rc : qattn_quant_fast_launch<IN>(&v2, (void *)side, err);
        QATTN_QUANT_CHECK(hipEventRecord(join, side), "quant K, V: join event");
        QATTN_QUANT_CHECK(hipStreamWaitEvent(st, join, 0), "quant K, V: stream wait");
        return rc;
    }
    rc = qattn_quant_fast_launch<IN>(&k, stream, err);
    return rc ? rc : qattn_quant_fast_launch<IN>(&v, stream, err);
}

/* one instance: extern "C" launch function NAME for input dtype IN (fp16,
 * bf16); NAME_routes(p) / NAME_kv_modes(k, v): the routes and K, V modes it
 * can take (the registry's quant_routes / quant_kv_modes); NAME_kv(k, v,
 * ...): K and V by their kv mode */
#define QATTN_QUANT_FAST_INSTANCE(IN, NAME)                                                           \
    extern "C" int NAME(const qattn_kernels_quant_params *p, void *stream, qattn_err *err)           \
    {                                                                                                 \
        return qattn_quant_fast_launch<IN>(p, stream, err);                                          \
    }                                                                                                 \
    extern "C" unsigned NAME##_routes(const qattn_kernels_quant_params *p)                           \
    {                                                                                                 \
        return qattn_quant_fast_routes<IN>(*p);                                                       \
    }                                                                                                 \
    extern "C" unsigned NAME##_kv_modes(const qattn_kernels_quant_params *k,                         \
                                        const qattn_kernels_quant_params *v)                         \
    {                                                                                                 \
        return qattn_quant_fast_kv_modes<IN>(*k, *v);                                                 \
    }                                                                                                 \
    extern "C" int NAME##_kv(const qattn_kernels_quant_params *k, const qattn_kernels_quant_params *v, \
                             void *stream, qattn_err *err)                                           \
    {                                                                                                 \
        return qattn_quant_fast_launch_kv<IN>(k, v, stream, err);                                    \
    }

#endif
