/* Attention forward, wgmma path: Q quantized inside the kernel (params
 * q_fuse). The two consumer warpgroups read the block's 128 x D tile of the
 * user's fp16 / bf16 Q once, take the amax of each Q scale group (groups
 * that lie inside the tile: qattn_wg_qfuse_group_ok), and write the int8
 * codes (swizzled, where the producer would have copied stored codes) and
 * each group's scale into shared memory, while the producer warpgroup
 * already loads the first key blocks. The scales and codes are the
 * quantization kernels' bit for bit (quant_codes.h, qattn_num_scale_for),
 * so a fused plan computes what the unfused one does. */
#ifndef QATTN_KERNELS_WGMMA_QFUSE_H
#define QATTN_KERNELS_WGMMA_QFUSE_H

#include "quant_groups.h" /* qattn_qf_tok_index, qattn_qf_ld; quant_codes.h */
#include "wgmma_tile.h"   /* QATTN_WGMMA_BM, qattn_wg_off */

#define QATTN_WGMMA_QFUSE_THREADS 256 /* the consumer warpgroups */
#define QATTN_WGMMA_QFUSE_BAR 3       /* their named barrier (1, 2: the unpacking producer's) */

/* the 8 int8 codes of raw's values from the exact quotients (a rounding tie
 * between the brackets; out of line: rarely taken) */
template <int IN>
static __device__ __noinline__ uint2 qattn_wgmma_qfuse_exact(uint4 raw, float s, float l)
{
    float v[8];
    for (int j = 0; j < 8; j++)
        v[j] = qattn_qf_dec<IN>(raw, j);
    const float s8[8] = {s, s, s, s, s, s, s, s}, l8[8] = {l, l, l, l, l, l, l, l};
    return qattn_qs_code8_exact<QATTN_FMT_INT8>(v, s8, l8);
}

/* Q rows i0..i0 + 127 of (sequence b at token tq0, head h) quantized to int8
 * by consumer thread ct (0..255): codes into sQ ([128][D] bytes, 128- or
 * 64-byte swizzle), group scales into sc ([128]; amax bits while running),
 * the brackets of their reciprocals into lo, hi ([128]: qattn_qs_brk, the
 * codes by qattn_qs_code8 as the lean quantization kernel's) and each
 * row's group (from the tile's first) into rowg ([128]); rows past sq hold
 * code 0. Ends with the codes visible to the async proxy (wgmma) of both
 * warpgroups. */
template <int D, int IN>
static __device__ __forceinline__ void qattn_wgmma_fuse_q(const qattn_kernels_attn_params &p, uint8_t *sQ, float *sc,
                                                          float *lo, float *hi, int *rowg, int ct, int i0, int sq,
                                                          int64_t tq0, int b, int h)
{
    constexpr int BM = QATTN_WGMMA_BM, NTH = QATTN_WGMMA_QFUSE_THREADS;
    /* 8-channel vectors (16 bytes of input): vector e = row e / VPR, channels 8 (e % VPR)..; consecutive
     * lanes read consecutive vectors (a row's VPR vectors in adjacent lanes of one warp) */
    constexpr int VPR = D / 8, NV = BM * VPR / NTH;
    static_assert(BM * VPR % NTH == 0 && 32 % VPR == 0, "whole vectors a thread, a row's vectors in one warp");
    unsigned *gmax = (unsigned *)sc;
    if (ct < BM) { /* the tile's groups: [0, rowg[BM - 1]] (qattn_wg_qfuse_group_ok: at most BM) */
        rowg[ct] = qattn_qf_tok_index(p.q_group, i0 + ct) - qattn_qf_tok_index(p.q_group, i0);
        gmax[ct] = 0u;
    }
    const uint16_t *x = (const uint16_t *)p.q + (int64_t)b * p.q_sb + tq0 * p.q_st + (int64_t)h * p.q_sh;
    uint4 raw[NV];
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int e = ct + j * NTH, r = e / VPR;
        raw[j] = i0 + r < sq ? qattn_qf_ld(x, p.q_st, i0 + r, e % VPR) : uint4{0u, 0u, 0u, 0u};
    }
    qattn_bar_sync<QATTN_WGMMA_QFUSE_BAR, NTH>(); /* gmax cleared, rowg written */
    unsigned nonfin = 0u; /* NaN / Inf input: the plan's check runs apart (qattn_kernels_plan_quantize) */
#pragma unroll
    for (int j = 0; j < NV; j++) {
        /* the row's amax over its VPR lanes, then one atomic a row (rows past sq are zero) */
        unsigned am = qattn_num_f2u(qattn_qf_amax16<IN>(raw[j], nonfin));
#pragma unroll
        for (int w = 1; w < VPR; w <<= 1)
            am = max(am, __shfl_xor_sync(0xffffffffu, am, w));
        const int e = ct + j * NTH;
        if (e % VPR == 0 && am > 0u)
            atomicMax(&gmax[rowg[e / VPR]], am);
    }
    (void)nonfin;
    qattn_bar_sync<QATTN_WGMMA_QFUSE_BAR, NTH>();
    const int ngt = rowg[BM - 1] + 1;
    for (int g = ct; g < ngt; g += NTH) {
        const float s = qattn_num_scale_for(QATTN_FMT_INT8, qattn_num_u2f(gmax[g]), p.q_group.e8m0);
        sc[g] = s;
        qattn_qs_brk(s, lo[g], hi[g]);
    }
    qattn_bar_sync<QATTN_WGMMA_QFUSE_BAR, NTH>();
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int e = ct + j * NTH, r = e / VPR, c8 = e % VPR, gi = rowg[r];
        const float l = lo[gi], u = hi[gi];
        const float l8[8] = {l, l, l, l, l, l, l, l}, u8[8] = {u, u, u, u, u, u, u, u};
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[i] = qattn_qf_dec<IN>(raw[j], i);
        unsigned diff;
        uint2 w = qattn_qs_code8<QATTN_FMT_INT8>(v, l8, u8, diff);
        if (diff) /* a rounding tie between the brackets: the exact quotients */
            w = qattn_wgmma_qfuse_exact<IN>(raw[j], sc[gi], l);
        *(uint2 *)(sQ + qattn_wg_off<D, BM>(r, c8 >> 1) + 8 * (c8 & 1)) = w;
    }
    qattn_fence_proxy_async_smem(); /* generic-proxy stores read by wgmma */
    qattn_bar_sync<QATTN_WGMMA_QFUSE_BAR, NTH>();
}

#endif
