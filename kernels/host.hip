/* Host side that talks to the device: plans (buffers + filled params for
 * quantize-then-attend) and small device helpers for C callers. Every HIP
 * call is checked; errors name the call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hip_port.h"
#include "qattn_kernels.h"

#define QATTN_HOST_CHECK(call, what)                                                                            \
    do {                                                                                                        \
        hipError_t e_ = (call);                                                                                 \
        if (e_ != hipSuccess)                                                                                   \
            return qattn_err_set(err, QATTN_KERNELS_ERR_DEVICE, "%s: %s (%s:%d)", what, hipGetErrorString(e_), \
                                 __FILE__, __LINE__);                                                           \
    } while (0)

extern "C" {

int qattn_kernels_dev_count(int *n, qattn_err *err)
{
    *n = 0;
    QATTN_HOST_CHECK(hipGetDeviceCount(n), "hipGetDeviceCount");
    return QATTN_OK;
}

int qattn_kernels_dev_name(char *buf, size_t len, qattn_err *err)
{
#if defined(QATTN_HIP_SIM)
    (void)err;
    snprintf(buf, len, "host simulation (no GPU)");
#else
    int dev = 0;
    hipDeviceProp_t prop;
    QATTN_HOST_CHECK(hipGetDevice(&dev), "hipGetDevice");
    QATTN_HOST_CHECK(hipGetDeviceProperties(&prop, dev), "hipGetDeviceProperties");
    snprintf(buf, len, "%s", prop.name);
#endif
    return QATTN_OK;
}

int qattn_kernels_dev_cc(void)
{
#if defined(__CUDACC__) && !defined(QATTN_HIP_SIM)
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major * 10 + minor;
#else
    return 0;
#endif
}

int qattn_kernels_dev_sm_count(void)
{
    int dev = 0, n = 0;
    if (hipGetDevice(&dev) != hipSuccess ||
        hipDeviceGetAttribute(&n, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess || n <= 0) {
        (void)hipGetLastError();
        return 1;
    }
    return n;
}

int qattn_kernels_dev_alloc(void **p, size_t bytes, qattn_err *err)
{
    *p = NULL;
    hipError_t e = hipMalloc(p, bytes ? bytes : 1);
    if (e != hipSuccess) {
        *p = NULL;
        return qattn_err_set(err, e == hipErrorOutOfMemory ? (int)QATTN_ERR_NOMEM : (int)QATTN_KERNELS_ERR_DEVICE,
                             "hipMalloc(%zu bytes): %s", bytes, hipGetErrorString(e));
    }
    return QATTN_OK;
}

void qattn_kernels_dev_free(void *p)
{
    if (p)
        (void)hipFree(p);
}

int qattn_kernels_dev_to(void *dst, const void *src, size_t bytes, qattn_err *err)
{
    QATTN_HOST_CHECK(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice), "hipMemcpy to the device");
    return QATTN_OK;
}

int qattn_kernels_dev_from(void *dst, const void *src, size_t bytes, qattn_err *err)
{
    QATTN_HOST_CHECK(hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost), "hipMemcpy from the device");
    return QATTN_OK;
}

int qattn_kernels_dev_fill(void *p, int byte, size_t bytes, qattn_err *err)
{
    QATTN_HOST_CHECK(hipMemset(p, byte, bytes), "hipMemset");
    return QATTN_OK;
}

int qattn_kernels_stream_create(void **stream, qattn_err *err)
{
    hipStream_t st = NULL;
    *stream = NULL;
    QATTN_HOST_CHECK(hipStreamCreateWithFlags(&st, hipStreamNonBlocking), "creating a stream");
    *stream = (void *)st;
    return QATTN_OK;
}

void qattn_kernels_stream_free(void *stream)
{
    if (stream)
        (void)hipStreamDestroy((hipStream_t)stream);
}

int qattn_kernels_dev_sync(qattn_err *err)
{
    QATTN_HOST_CHECK(hipDeviceSynchronize(), "hipDeviceSynchronize (an earlier kernel failed)");
    QATTN_HOST_CHECK(hipGetLastError(), "last error");
    return QATTN_OK;
}

int qattn_kernels_dev_copy(void *dst, const void *src, size_t bytes, qattn_err *err)
{
    QATTN_HOST_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, (hipStream_t)0),
                     "hipMemcpyAsync device to device");
    return QATTN_OK;
}

#if !defined(QATTN_HIP_SIM)
/* One thread spinning for about 1 ms, enqueued before a timed run's start
 * event: the host enqueues the run's calls behind it, so that the events hold
 * the GPU's work and none of the host's launch latency (the first call's
 * launch would otherwise fall between the events). */
#define QATTN_TIMING_STALL_CYCLES 2000000ll
__global__ void qattn_timing_stall_kernel(long long cycles)
{
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}
#endif

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

int qattn_kernels_dev_time(qattn_kernels_timed_fn fn, void *ctx, int warmup, int reps, double *median_ms,
                           double *min_ms, qattn_err *err)
{
    if (reps < 1 || reps > 1000 || warmup < 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "timing: %d repetitions, %d warm-up runs (1..1000, >= 0)", reps,
                             warmup);
    float t[1000];
    for (int i = 0; i < warmup; i++) {
        int rc = fn(ctx, err);
        if (rc)
            return rc;
    }
    QATTN_HOST_CHECK(hipDeviceSynchronize(), "timing: warm-up runs");
#if defined(QATTN_HIP_SIM)
    for (int i = 0; i < reps; i++) { /* no device events: the host clock */
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int rc = fn(ctx, err);
        if (rc)
            return rc;
        clock_gettime(CLOCK_MONOTONIC, &b);
        t[i] = (float)(1e3 * (double)(b.tv_sec - a.tv_sec) + 1e-6 * (double)(b.tv_nsec - a.tv_nsec));
    }
#else
    hipEvent_t ev[2];
    QATTN_HOST_CHECK(hipEventCreate(&ev[0]), "hipEventCreate");
    if (hipEventCreate(&ev[1]) != hipSuccess) {
        (void)hipEventDestroy(ev[0]);
        return qattn_err_set(err, QATTN_KERNELS_ERR_DEVICE, "hipEventCreate failed");
    }
    int rc = QATTN_OK;
    for (int i = 0; i < reps && !rc; i++) {
        hipLaunchKernelGGL(qattn_timing_stall_kernel, dim3(1), dim3(1), 0, (hipStream_t)0, QATTN_TIMING_STALL_CYCLES);
        hipError_t e = hipGetLastError();
        if (e == hipSuccess)
            e = hipEventRecord(ev[0], (hipStream_t)0);
        if (e == hipSuccess && !(rc = fn(ctx, err)))
            e = hipEventRecord(ev[1], (hipStream_t)0);
        if (!rc && e == hipSuccess)
            e = hipEventSynchronize(ev[1]);
        if (!rc && e == hipSuccess)
            e = hipEventElapsedTime(&t[i], ev[0], ev[1]);
        if (!rc && e == hipSuccess)
            e = hipGetLastError();
        if (!rc && e != hipSuccess)
            rc = qattn_err_set(err, QATTN_KERNELS_ERR_DEVICE, "timing: %s", hipGetErrorString(e));
    }
    (void)hipEventDestroy(ev[0]);
    (void)hipEventDestroy(ev[1]);
    if (rc)
        return rc;
#endif
    qsort(t, (size_t)reps, sizeof t[0], cmp_float);
    *median_ms = reps % 2 ? (double)t[reps / 2] : 0.5 * ((double)t[reps / 2 - 1] + (double)t[reps / 2]);
    if (min_ms)
        *min_ms = (double)t[0];
    return QATTN_OK;
}

/* ---- plans ---- */

/* QATTN_PLAN_MEASURE: the plan's buffers laid out from this address, nothing allocated, to size a
 * workspace (fill functions store the pointers without touching them) */
#define QATTN_PLAN_MEASURE ((void *)(uintptr_t)4096)

static int plan_alloc(qattn_kernels_plan *pl, void **p, size_t bytes, qattn_err *err)
{
    *p = NULL;
    if (bytes == 0)
        return QATTN_OK;
    if (pl->ws_mode) { /* carved from the caller's workspace, 256-byte aligned */
        const size_t at = (pl->ws_used + 255) / 256 * 256;
        if (pl->ws_base != QATTN_PLAN_MEASURE && at + bytes > pl->ws_cap)
            return qattn_err_set(err, QATTN_ERR_ARG, "plan: workspace of %zu bytes, %zu needed", pl->ws_cap,
                                 at + bytes);
        *p = (char *)pl->ws_base + at;
        pl->ws_used = at + bytes;
        return QATTN_OK;
    }
    if (pl->ndev >= (int)(sizeof pl->dev / sizeof pl->dev[0]))
        return qattn_err_set(err, QATTN_ERR_ARG, "plan: too many buffers");
    int rc = qattn_kernels_dev_alloc(p, bytes, err);
    if (!rc)
        pl->dev[pl->ndev++] = *p;
    return rc;
}

/* token count and longest sequence from host cu_seqlens [nseq + 1] */
static int seq_tokens(const int *cu, int nseq, int seqlen, int64_t *tokens, const char *which, qattn_err *err)
{
    if (!cu) {
        *tokens = (int64_t)nseq * seqlen;
        return QATTN_OK;
    }
    if (cu[0] != 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "cu_seqlens_%s[0] is %d, not 0", which, cu[0]);
    for (int b = 0; b < nseq; b++) {
        int len = cu[b + 1] - cu[b];
        if (len < 0 || len > seqlen)
            return qattn_err_set(err, QATTN_ERR_ARG,
                                 "cu_seqlens_%s: sequence %d has length %d (must be 0..%d, the longest)", which, b,
                                 len, seqlen);
    }
    *tokens = cu[nseq];
    return QATTN_OK;
}

/* 1 when the plan's qp[i] is in use: operand i quantized, or Q's input check of a fused Q */
static int qp_in_use(const qattn_kernels_plan *pl, int i)
{
    return pl->quantize[i] || (i == 0 && pl->fuse_q);
}

int qattn_kernels_plan_init(qattn_kernels_plan *pl, const qattn_scheme *s, const qattn_kernels_problem *pb,
                            const qattn_kernels_io *io, qattn_err *err)
{
    memset(pl, 0, sizeof *pl);
    pl->scheme = *s;
    pl->pb = *pb;
    if (pl->pb.cc == 0)
        pl->pb.cc = qattn_kernels_dev_cc();
    int rc = qattn_kernels_find(s, &pl->pb, &pl->attn_sig, &pl->quant_sig, err);
    if (rc)
        return rc;
    pl->ws_mode = io->ws_mode;
    pl->ws_base = io->workspace;
    pl->ws_cap = io->ws_bytes;
    if (pl->ws_mode && !pl->ws_base)
        return qattn_err_set(err, QATTN_ERR_ARG, "plan: workspace mode without a workspace");
    const int *cuq = pl->ws_mode ? io->cu_seqlens_q_dev : io->cu_seqlens_q;
    const int *cuk = pl->ws_mode ? io->cu_seqlens_k_dev : io->cu_seqlens_k;
    if (pb->varlen != (cuq != NULL) || pb->varlen != (cuk != NULL))
        return qattn_err_set(err, QATTN_ERR_ARG, "plan: varlen problems need both cu_seqlens, others neither");
    int64_t tq, tk;
    if (pl->ws_mode && pb->varlen) { /* the offsets stay on the device: the caller gives the totals */
        tq = io->tokens_q, tk = io->tokens_k;
        pl->cu_q = (int *)cuq, pl->cu_k = (int *)cuk;
    } else if ((rc = seq_tokens(io->cu_seqlens_q, pb->nseq, pb->seqlen_q, &tq, "q", err)) ||
               (rc = seq_tokens(io->cu_seqlens_k, pb->nseq, pb->seqlen_k, &tk, "k", err)))
        return rc;
    size_t cub = (size_t)(pb->nseq + 1) * sizeof(int);
    if (pb->varlen && !pl->ws_mode) {
        if ((rc = plan_alloc(pl, (void **)&pl->cu_q, cub, err)) ||
            (rc = qattn_kernels_dev_to(pl->cu_q, io->cu_seqlens_q, cub, err)) ||
            (rc = plan_alloc(pl, (void **)&pl->cu_k, cub, err)) ||
            (rc = qattn_kernels_dev_to(pl->cu_k, io->cu_seqlens_k, cub, err)))
            goto fail;
    }
    if ((rc = plan_alloc(pl, (void **)&pl->nonfinite, 3 * sizeof(int), err)))
        goto fail;
    {
        const qattn_operand *ops[3] = {&s->q, &s->k, &s->v};
        const qattn_kernels_tensor *ts[3] = {&io->q, &io->k, &io->v};
        const unsigned bits[3] = {QATTN_SMOOTH_Q, QATTN_SMOOTH_K, QATTN_SMOOTH_V};
        const int heads[3] = {pb->hq, pb->hkv, pb->hkv};
        const int seqlen[3] = {pb->seqlen_q, pb->seqlen_k, pb->seqlen_k};
        const int64_t tokens[3] = {tq, tk, tk};
        const int *cu[3] = {pl->cu_q, pl->cu_k, pl->cu_k};
        /* Q quantized by the attention kernel where it can: qp[0] is then the check of the input
         * alone (an unscaled cast with no codes written) */
        pl->fuse_q = qattn_kernels_fuse_q_ok(pl->attn_sig, s, &pl->pb);
        if (pl->fuse_q) {
            qattn_operand check = s->q;
            memset(&check.group, 0, sizeof check.group);
            check.fmt = pb->in;
            if ((rc = qattn_kernels_quant_fill(&pl->qp[0], pb, io->q.data, io->q.stride_batch, io->q.stride_head,
                                               io->q.stride_tok, pb->hq, pb->seqlen_q, tq, pl->cu_q, &check,
                                               QATTN_KERNELS_SMOOTH_NONE, 0, NULL, NULL, NULL, pl->nonfinite, err)))
                goto fail;
        }
        for (int i = pl->fuse_q; i < 3; i++) {
            int smooth = !(s->smooth & bits[i]) ? QATTN_KERNELS_SMOOTH_NONE
                         : i == 0               ? QATTN_KERNELS_SMOOTH_BLOCKS
                                                : QATTN_KERNELS_SMOOTH_TOKENS;
            int mblock = i == 0 ? qattn_scheme_qblock(s) : 0;
            pl->quantize[i] = qattn_fmt_is_scaled(ops[i]->fmt) || smooth || ops[i]->fmt != pb->in;
            if (!pl->quantize[i])
                continue;
            size_t bc, bs, bm;
            qattn_kernels_quant_sizes(ops[i], heads[i], pb->nseq, seqlen[i], tokens[i], pb->d, smooth, mblock, &bc,
                                      &bs, &bm);
            /* V^T for instances that read it: [hkv, nseq, d, npad] codes */
            const int vt = i == 2 && pl->attn_sig->v_layout == QATTN_KERNELS_LAYOUT_TRANSPOSED;
            if (vt)
                bc = (size_t)heads[i] * (size_t)pb->nseq * (size_t)pb->d * (size_t)((seqlen[i] + 127) / 128 * 128);
            void *codes = NULL, *scale = NULL, *mean = NULL, *work = NULL;
            if ((rc = plan_alloc(pl, &codes, bc, err)) || (rc = plan_alloc(pl, &scale, bs, err)) ||
                (rc = plan_alloc(pl, &mean, bm, err)))
                goto fail;
            if ((rc = qattn_kernels_quant_fill(&pl->qp[i], pb, ts[i]->data, ts[i]->stride_batch, ts[i]->stride_head,
                                               ts[i]->stride_tok, heads[i], seqlen[i], tokens[i], cu[i], ops[i],
                                               smooth, mblock, codes, (float *)scale, (float *)mean, pl->nonfinite + i,
                                               err)))
                goto fail;
            if (vt && (rc = qattn_kernels_quant_set_layout(&pl->qp[i], QATTN_KERNELS_LAYOUT_TRANSPOSED, err)))
                goto fail;
            const size_t wbytes = qattn_kernels_quant_work_size(&pl->qp[i]);
            if ((rc = plan_alloc(pl, &work, wbytes, err)))
                goto fail;
            if (work) { /* the counters zero once: the streamed kernels leave them zero (no clearing launches);
                         * in a caller's workspace, cleared on the stream at each run */
                if (!pl->ws_mode)
                    QATTN_HOST_CHECK(hipMemset(work, 0, wbytes), "clearing the quantization scratch");
                pl->qp[i].counters_zero = 1;
            }
            pl->qp[i].work = work;
        }
    }
    /* the routes: by the dispatcher, now, so that the plan shows them */
    for (int i = 0; i < 3 && !rc; i++)
        if (qp_in_use(pl, i))
            rc = qattn_kernels_quant_choose(pl->quant_sig, &pl->qp[i], err);
    if (!rc && pl->quantize[1] && pl->quantize[2] && pl->quant_sig->launch_quant_kv)
        rc = qattn_kernels_quant_choose_kv(pl->quant_sig, &pl->qp[1], &pl->qp[2], err);
    if (rc)
        goto fail;
    /* a fused Q: filled from the check's params, then switched (qattn_kernels_attn_fuse_q) */
    rc = qattn_kernels_attn_fill(&pl->ap, s, pb, qp_in_use(pl, 0) ? &pl->qp[0] : NULL,
                                 pl->quantize[1] ? &pl->qp[1] : NULL, pl->quantize[2] ? &pl->qp[2] : NULL, &io->q,
                                 &io->k, &io->v, &io->o, io->lse, tq, pl->cu_q, pl->cu_k, err);
    if (rc)
        goto fail;
    if (pl->fuse_q)
        qattn_kernels_attn_fuse_q(&pl->ap, s, &pl->pb, &io->q);
    qattn_kernels_wg_choose(pl->attn_sig, &pl->pb, pl->fuse_q, &pl->ap); /* the launch follows them */
    { /* smooth=q's dS plane, where the instance reads one (its launch writes it) */
        const size_t dsb = qattn_kernels_attn_ds_bytes(pl->attn_sig, &pl->ap);
        void *ds = NULL;
        if (dsb && (rc = plan_alloc(pl, &ds, dsb, err)))
            goto fail;
        pl->ap.ds = (float *)ds;
    }
    { /* the widened int4 codes, where the plan chose that form (its launch writes them) */
        const size_t wb = qattn_kernels_attn_i4w_bytes(pl->attn_sig, &pl->ap);
        void *w = NULL;
        if (wb && (rc = plan_alloc(pl, &w, wb, err)))
            goto fail;
        pl->ap.i4w = w;
    }
    if (qattn_kernels_wg_persist(pl->attn_sig, &pl->pb, pl->fuse_q, &pl->ap)) { /* the persistent kernel's tile counter, zero */
        void *w = NULL;
        if ((rc = plan_alloc(pl, &w, 2 * sizeof(unsigned), err)))
            goto fail;
        if (!pl->ws_mode)
            QATTN_HOST_CHECK(hipMemset(w, 0, 2 * sizeof(unsigned)), "clearing the tile counter");
        pl->ap.work = (unsigned *)w;
    }
    return QATTN_OK;
fail:
    qattn_kernels_plan_free(pl);
    return rc;
}

char *qattn_kernels_plan_describe(const qattn_kernels_plan *pl, char *buf, size_t len)
{
    static const char *names[3] = {"q", "k", "v"};
    /* the wgmma choices as the launch reads them from the params (qattn_kernels_wg_choose; the tile
     * counter only where the plan took persistent CTAs; fill copies the problem's form for any path) */
    const int form = pl->attn_sig->path == QATTN_KERNELS_PATH_WGMMA ? pl->ap.wg_form : 0;
    int n = snprintf(buf, len, "%s (%s)%s%s%s%s%s%s", pl->attn_sig->name, qattn_kernels_path_name(pl->attn_sig->path),
                     pl->fuse_q ? "; q fused" : "", form ? "; blocks of " : "", qattn_kernels_wg_form_name(form),
                     pl->ap.work ? ", persistent" : "", pl->ap.wg_pingpong > 0 ? ", ping-pong" : "",
                     pl->ap.i4w ? ", int4 codes widened" : "");
    for (int i = 0; i < 3 && n >= 0 && (size_t)n < len; i++)
        if (pl->quantize[i])
            n += snprintf(buf + n, len - (size_t)n, "; %s %s", names[i], qattn_kernels_qroute_name(pl->qp[i].route));
    if (n >= 0 && (size_t)n < len && pl->quantize[1] && pl->quantize[2] && pl->qp[1].kv != QATTN_KERNELS_KV_AUTO)
        snprintf(buf + n, len - (size_t)n, "; k+v %s", qattn_kernels_kvmode_name(pl->qp[1].kv));
    return buf;
}

int qattn_kernels_plan_quantize(const qattn_kernels_plan *pl, void *stream, int check_finite, qattn_err *err)
{
    static const char *names[3] = {"q", "k", "v"};
    hipStream_t st = (hipStream_t)stream;
    qattn_kernels_quant_params p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = pl->qp[i];
        if (!check_finite)
            p[i].nonfinite = NULL;
    }
    if (check_finite)
        QATTN_HOST_CHECK(hipMemsetAsync(pl->nonfinite, 0, 3 * sizeof(int), st), "clearing the NaN flags");
    for (int i = 0; i < 3 && pl->ws_mode; i++)
        if (pl->quantize[i] && pl->qp[i].work)
            QATTN_HOST_CHECK(hipMemsetAsync(pl->qp[i].work, 0, qattn_kernels_quant_work_size(&pl->qp[i]), st),
                             "clearing the quantization scratch");
    /* K and V read nothing that Q's kernel writes: their kernel may start while Q's ends
     * (QATTN_QUANT_OVERLAP=0 in the environment: after it) */
    const char *ov = getenv("QATTN_QUANT_OVERLAP");
    const int overlap = pl->quantize[0] && !(ov && !strcmp(ov, "0"));
    /* a fused Q: its input checked when asked (the attention kernel quantizes it) */
    const int q_run = pl->quantize[0] || (pl->fuse_q && check_finite);
    int rc = q_run ? pl->quant_sig->launch_quant(&p[0], stream, err) : QATTN_OK;
    if (!rc && pl->quantize[1] && pl->quantize[2] && pl->quant_sig->launch_quant_kv) { /* one launch where it can */
        p[1].overlap = p[2].overlap = overlap;
        rc = pl->quant_sig->launch_quant_kv(&p[1], &p[2], stream, err);
    } else
        for (int i = 1; i < 3 && !rc; i++)
            if (pl->quantize[i]) {
                p[i].overlap = i == 1 && overlap;
                rc = pl->quant_sig->launch_quant(&p[i], stream, err);
            }
    if (rc)
        return rc;
    if (check_finite) {
        int flag[3] = {0, 0, 0};
        QATTN_HOST_CHECK(hipStreamSynchronize(st), "quantization kernels");
        QATTN_HOST_CHECK(hipMemcpy(flag, pl->nonfinite, sizeof flag, hipMemcpyDeviceToHost), "reading the NaN flags");
        for (int i = 0; i < 3; i++)
            if (qp_in_use(pl, i) && flag[i])
                return qattn_err_set(err, QATTN_ERR_NAN, "the %s input holds NaN or Inf", names[i]);
    }
    return QATTN_OK;
}

int qattn_kernels_plan_attend(const qattn_kernels_plan *pl, void *stream, qattn_err *err)
{
    if (pl->ws_mode && pl->ap.work) /* in a caller's workspace: the tile counter cleared on the stream */
        QATTN_HOST_CHECK(hipMemsetAsync(pl->ap.work, 0, 2 * sizeof(unsigned), (hipStream_t)stream),
                         "clearing the tile counter");
    return pl->attn_sig->launch_attn(&pl->ap, stream, err);
}

/* p moved from the old workspace to the new one, else from the old tensor to the new one (NULL stays) */
static const void *rebase_ptr(const void *p, const char *ws0, size_t used, const char *ws1, const void *t0,
                              const void *t1)
{
    if (!p)
        return NULL;
    if ((const char *)p >= ws0 && (const char *)p < ws0 + used)
        return ws1 + ((const char *)p - ws0);
    return p == t0 ? t1 : p;
}

int qattn_kernels_plan_rebase(qattn_kernels_plan *pl, const qattn_kernels_io *old_io, const qattn_kernels_io *io,
                              qattn_err *err)
{
    if (!pl->ws_mode || !io->ws_mode || !io->workspace || io->ws_bytes < pl->ws_used)
        return qattn_err_set(err, QATTN_ERR_ARG, "plan rebase: a workspace plan and a workspace of %zu bytes needed",
                             pl->ws_used);
    const char *w0 = (const char *)old_io->workspace, *w1 = (const char *)io->workspace;
    const size_t u = pl->ws_used;
    const qattn_kernels_tensor *t0[3] = {&old_io->q, &old_io->k, &old_io->v}, *t1[3] = {&io->q, &io->k, &io->v};
    for (int i = 0; i < 3; i++) {
        qattn_kernels_quant_params *q = &pl->qp[i];
        q->x = rebase_ptr(q->x, w0, u, w1, t0[i]->data, t1[i]->data);
        q->cu_seqlens = (const int *)rebase_ptr(q->cu_seqlens, w0, u, w1, i ? old_io->cu_seqlens_k_dev
                                                                            : old_io->cu_seqlens_q_dev,
                                                i ? io->cu_seqlens_k_dev : io->cu_seqlens_q_dev);
        q->codes = (void *)rebase_ptr(q->codes, w0, u, w1, NULL, NULL);
        q->work = (void *)rebase_ptr(q->work, w0, u, w1, NULL, NULL);
        q->scale = (float *)rebase_ptr(q->scale, w0, u, w1, NULL, NULL);
        q->mean = (float *)rebase_ptr(q->mean, w0, u, w1, NULL, NULL);
        q->nonfinite = (int *)rebase_ptr(q->nonfinite, w0, u, w1, NULL, NULL);
    }
    qattn_kernels_attn_params *a = &pl->ap;
    a->q = rebase_ptr(a->q, w0, u, w1, old_io->q.data, io->q.data);
    a->k = rebase_ptr(a->k, w0, u, w1, old_io->k.data, io->k.data);
    a->v = rebase_ptr(a->v, w0, u, w1, old_io->v.data, io->v.data);
    a->k_in = rebase_ptr(a->k_in, w0, u, w1, old_io->k.data, io->k.data);
    a->q_scale = (const float *)rebase_ptr(a->q_scale, w0, u, w1, NULL, NULL);
    a->k_scale = (const float *)rebase_ptr(a->k_scale, w0, u, w1, NULL, NULL);
    a->v_scale = (const float *)rebase_ptr(a->v_scale, w0, u, w1, NULL, NULL);
    a->q_mean = (const float *)rebase_ptr(a->q_mean, w0, u, w1, NULL, NULL);
    a->k_mean = (const float *)rebase_ptr(a->k_mean, w0, u, w1, NULL, NULL);
    a->v_mean = (const float *)rebase_ptr(a->v_mean, w0, u, w1, NULL, NULL);
    a->ds = (float *)rebase_ptr(a->ds, w0, u, w1, NULL, NULL);
    a->i4w = (void *)rebase_ptr(a->i4w, w0, u, w1, NULL, NULL);
    a->work = (unsigned *)rebase_ptr(a->work, w0, u, w1, NULL, NULL);
    a->o = (void *)rebase_ptr(a->o, w0, u, w1, old_io->o.data, io->o.data);
    a->lse = (float *)rebase_ptr(a->lse, w0, u, w1, old_io->lse, io->lse);
    a->cu_q = (const int *)rebase_ptr(a->cu_q, w0, u, w1, old_io->cu_seqlens_q_dev, io->cu_seqlens_q_dev);
    a->cu_k = (const int *)rebase_ptr(a->cu_k, w0, u, w1, old_io->cu_seqlens_k_dev, io->cu_seqlens_k_dev);
    pl->cu_q = (int *)a->cu_q, pl->cu_k = (int *)a->cu_k;
    pl->nonfinite = (int *)rebase_ptr(pl->nonfinite, w0, u, w1, NULL, NULL);
    pl->ws_base = io->workspace, pl->ws_cap = io->ws_bytes;
    return QATTN_OK;
}

int qattn_kernels_plan_workspace(const qattn_scheme *s, const qattn_kernels_problem *pb, const qattn_kernels_io *io,
                                 size_t *bytes, qattn_err *err)
{
    qattn_kernels_io m = *io;
    m.ws_mode = 1, m.workspace = QATTN_PLAN_MEASURE, m.ws_bytes = 0;
    if (pb->varlen && !m.cu_seqlens_q_dev) /* any device address: measuring reads none */
        m.cu_seqlens_q_dev = m.cu_seqlens_k_dev = (const int *)QATTN_PLAN_MEASURE;
    qattn_kernels_plan pl;
    int rc = qattn_kernels_plan_init(&pl, s, pb, &m, err);
    *bytes = rc ? 0 : pl.ws_used;
    return rc;
}

void qattn_kernels_plan_free(qattn_kernels_plan *pl)
{
    if (pl->ws_mode) { /* nothing of its own */
        pl->cu_q = pl->cu_k = NULL;
        pl->nonfinite = NULL;
        return;
    }
    for (int i = 0; i < pl->ndev; i++)
        qattn_kernels_dev_free(pl->dev[i]);
    pl->ndev = 0;
    pl->cu_q = pl->cu_k = NULL;
    pl->nonfinite = NULL;
}

} /* extern "C" */
