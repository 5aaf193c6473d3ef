/* The streamed quantization kernel's host side (quant_stream.h): the
 * instance that runs p, its grid by the device's resident blocks, its
 * shared memory, and the kernel that runs K and V in one grid; used by
 * quant_launch.h. */
#ifndef QATTN_KERNELS_QUANT_STREAM_PLAN_H
#define QATTN_KERNELS_QUANT_STREAM_PLAN_H

#include "quant_stream.h" /* the kernels */

/* the streamed kernel of p (qattn_qs_takes) */
typedef void (*qattn_qs_fn)(qattn_kernels_quant_params, qattn_qs_args);
struct qattn_qs_family {
    typedef qattn_qs_fn fn;
    enum { INT4 = QATTN_FMT_INT4 };
    template <int IN, int FMT, int SM, int UNI, int TR, int LC>
    static fn of()
    {
        return &qattn_qs_kernel<IN, FMT, SM, UNI, TR, LC>;
    }
};

/* K and V in one grid (qattn_qs_kv_kernel): the instance for K's format
 * (int8, int4) and d, 0 where there is none */
typedef void (*qattn_qs_kv_fn)(qattn_kernels_quant_params, qattn_qs_args, qattn_kernels_quant_params, qattn_qs_args,
                               int);
template <int IN>
static qattn_qs_kv_fn qattn_qs_kv_of(const qattn_kernels_quant_params &k)
{
    if (k.d != 64 && k.d != 128)
        return (qattn_qs_kv_fn)0;
    if (k.fmt == QATTN_FMT_INT8)
        return k.d == 64 ? &qattn_qs_kv_kernel<IN, QATTN_FMT_INT8, 3> : &qattn_qs_kv_kernel<IN, QATTN_FMT_INT8, 4>;
    if (k.fmt == QATTN_FMT_INT4)
        return k.d == 64 ? &qattn_qs_kv_kernel<IN, QATTN_FMT_INT4, 3> : &qattn_qs_kv_kernel<IN, QATTN_FMT_INT4, 4>;
    return (qattn_qs_kv_fn)0;
}

/* blocks of fn that fit on the device at once (multiprocessors x
 * occupancy), remembered per kernel; 0 if the device cannot say */
template <class FN>
static int qattn_qs_capacity(FN fn, int nt, size_t smem)
{
    static struct {
        const void *fn;
        int dev, cap;
    } memo[16];
    static int nmemo;
    int dev = 0;
    if (hipGetDevice(&dev) != hipSuccess)
        return 0;
    for (int i = 0; i < nmemo; i++)
        if (memo[i].fn == (const void *)fn && memo[i].dev == dev)
            return memo[i].cap;
    int nsm = 0, occ = 0, optin = 0;
    if (hipDeviceGetAttribute(&optin, hipDeviceAttributeSharedMemPerBlockOptin, dev) != hipSuccess ||
        hipDeviceGetAttribute(&nsm, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess || smem > (size_t)optin ||
        hipFuncSetAttribute((const void *)fn, hipFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != hipSuccess ||
        hipOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, nt, smem) != hipSuccess) {
        (void)hipGetLastError(); /* a refusal only means: not this kernel */
        return 0;
    }
    const int cap = occ * nsm;
    if (nmemo < 16) {
        memo[nmemo].fn = (const void *)fn;
        memo[nmemo].dev = dev;
        memo[nmemo].cap = cap;
        nmemo++;
    }
    return cap;
}

/* whether the streamed kernel can run p (which qattn_qf_plan takes): the
 * lean kernel's cases with int8 / int4 / e4m3 codes (the dispatcher takes it
 * for those with statistics: token-uniform groups or smoothing over the
 * sequence, where three launches would read the input twice; without
 * statistics the lean kernel is faster, H100, kernels/LOG.md). On success:
 * the kernel, its grid (p.stream_tpr tiles per slice aimed for, or
 * QATTN_QS_TPR), shared memory and arguments. */
template <int IN>
static int qattn_qs_plan(const qattn_kernels_quant_params &p, qattn_qs_fn *fn, int *grid, size_t *smem,
                         qattn_qs_args *a)
{
    if (!qattn_qf_lean_takes(p) || (p.fmt != QATTN_FMT_INT8 && p.fmt != QATTN_FMT_INT4 && p.fmt != QATTN_FMT_E4M3) ||
        p.seqlen <= 0)
        return 0;
    const int uniform = qattn_qf_uniform(p.group);
    const int transposed = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED;
    const int stats = uniform || p.smooth == QATTN_KERNELS_SMOOTH_TOKENS;
    if (stats && !p.work)
        return 0;
    const int64_t units = (int64_t)p.heads * p.nseq;
    const int64_t span = transposed ? p.npad : p.seqlen;
    const int64_t tspan = (span + QATTN_QS_TT - 1) / QATTN_QS_TT;
    if (units > 0x7fffffff / 2 || tspan > 0x7fffffff)
        return 0;
    const qattn_qs_fn f = qattn_qf_ladder<qattn_qs_family, IN>(p);
    const size_t sm = qattn_qs_smem(p.d, transposed, p.smooth == QATTN_KERNELS_SMOOTH_TOKENS, uniform);
    const int nt = 2 * p.d;
    const int cap = qattn_qs_capacity(f, nt, sm) / (p.share > 1 ? p.share : 1); /* p.share: launch_quant_kv */
    if (cap <= 0)
        return 0;
    const int64_t tpr = p.stream_tpr > 0 ? p.stream_tpr : QATTN_QS_TPR;
    int64_t nrank = (tspan + tpr - 1) / tpr;
    nrank = nrank < cap ? nrank : cap;
    if (stats && nrank > qattn_qf_nchunk(p)) /* a partial per rank in p.work */
        nrank = qattn_qf_nchunk(p);
    nrank = nrank > 0 ? nrank : 1;
    int64_t ngroup = cap / nrank;
    ngroup = ngroup < units ? ngroup : units;
    a->g = qattn_qf_lean_args_of(p);
    memset(a->first, 0, sizeof a->first);
    if (!uniform) /* the first row of each token group in a tile */
        for (int r = 0; r < QATTN_QS_TT; r++) {
            int seen = 0;
            for (int q = 0; q < r && !seen; q++)
                seen = a->g.grp[q] == a->g.grp[r];
            if (!seen)
                a->first[r >> 5] |= 1u << (r & 31);
        }
    a->nrank = (int)nrank;
    a->ngroup = (int)ngroup;
    a->tpr = (int)((tspan + nrank - 1) / nrank);
    *fn = f;
    *grid = (int)(nrank * ngroup);
    *smem = sm;
    return 1;
}

#endif
