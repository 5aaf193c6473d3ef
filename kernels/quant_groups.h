/* Quantization, fast path: params as the fast kernels see them: scale
 * groups (kind, period, token index, the scales of token-local groups from
 * their amax) and sequences (first row, 16-byte row loads, statistics
 * chunks). */
#ifndef QATTN_KERNELS_QUANT_GROUPS_H
#define QATTN_KERNELS_QUANT_GROUPS_H

#include "quant_codes.h"
#include "quant_portable.h"

#define QATTN_QF_MAXD 1024 /* head dim at most */

/* qattn_num_group_tok_index in 32-bit arithmetic (t < 2^31) */
static __device__ __forceinline__ int qattn_qf_tok_index(const qattn_group &g, int t)
{
    switch (g.tok) {
    case QATTN_TOK_TOKEN: return t;
    case QATTN_TOK_BLOCK:
    case QATTN_TOK_WARP: return t / g.b;
    case QATTN_TOK_THREAD: {
        const int blk = t / g.b, in = t - blk * g.b;
        return blk * (g.s / g.w) + (in % g.s) / g.w;
    }
    default: return 0;
    }
}

/* token-local groups g0 + g, g < ngt, of head and sequence hb: scale and
 * rcp (hi NULL) or the brackets rcp = lo, hi of 1 / s (qattn_qs_brk) from
 * the amax bits gmax[g] into shared memory, scales to p.scale */
static __device__ __forceinline__ void qattn_qf_group_scales(const qattn_kernels_quant_params &p, int fmt,
                                                             const unsigned *gmax, float *scale, float *rcp, int ngt,
                                                             int64_t g0, int64_t hb, int nthr, float *hi = NULL)
{
    for (int g = (int)threadIdx.x; g < ngt; g += nthr) {
        const float s = qattn_num_scale_for(fmt, qattn_num_u2f(gmax[g]), p.group.e8m0);
        scale[g] = s;
        if (hi)
            qattn_qs_brk(s, rcp[g], hi[g]);
        else
            rcp[g] = qattn_qf_rcp(fmt, s);
        if (g0 + g < p.ntok)
            p.scale[hb * p.ntok + g0 + g] = s;
    }
}

/* tokens of one block of token groups: the block of block / warp / thread
 * groups, 1 for the others */
static __host__ __device__ __forceinline__ int qattn_qf_period(qattn_group g)
{
    return g.tok == QATTN_TOK_BLOCK || g.tok == QATTN_TOK_WARP || g.tok == QATTN_TOK_THREAD ? g.b : 1;
}

/* groups whose scale is shared by all tokens of a sequence */
static __host__ __device__ __forceinline__ int qattn_qf_uniform(qattn_group g)
{
    return g.tok == QATTN_TOK_TENSOR || g.tok == QATTN_TOK_CHANNEL;
}

static __host__ __device__ __forceinline__ int64_t qattn_qf_nchunk(const qattn_kernels_quant_params &p)
{
    return ((int64_t)p.seqlen + QATTN_KERNELS_QUANT_CHUNK - 1) / QATTN_KERNELS_QUANT_CHUNK;
}

/* the first token of sequence b (which starts at token t0) in head h of p.x */
static __device__ __forceinline__ const uint16_t *qattn_qf_seq_x(const qattn_kernels_quant_params &p, int b, int64_t t0,
                                                                int h)
{
    return (const uint16_t *)p.x + (int64_t)b * p.x_stride_batch + t0 * p.x_stride_tok + (int64_t)h * p.x_stride_head;
}

/* 16-byte unit `unit` of token row t (x: the sequence's first token of the
 * head, stride: p.x_stride_tok) */
static __device__ __forceinline__ uint4 qattn_qf_ld(const uint16_t *x, int64_t stride, int64_t t, int unit)
{
    return *(const uint4 *)(x + t * stride + unit * 8);
}

#endif
