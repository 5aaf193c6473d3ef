/* Attention forward, Hopper (sm_90a) warpgroup-MMA implementation of the
 * mma instance for head dim 128 (sage2-8b-sm90: int8 Q.K with per-thread
 * scale groups, e4m3 P and V, fp22 + fp32:128 accumulation). Same params,
 * same scheme, same checks as attn_fwd_mma.h, which calls it on sm_90 GPUs
 * (QATTN_MMA_SYNC=1 in the environment keeps the mma.sync kernel, for
 * comparison and for validating both).
 *
 * Tiling: a block of 2 warpgroups (256 threads) owns BM = 128 query rows of
 * one (sequence, head); warpgroup w rows 64w..64w+63, warp v of it rows
 * 16v..16v+15, lane 4g+i rows g and g+8 (the wgmma accumulator layout).
 * Q (int8, 128 x 128) stays in shared memory; keys go in blocks of KB = 128
 * through three shared-memory stages per warpgroup (cp.async; each warpgroup
 * loads its own copy and synchronizes only its own 128 threads, so the two
 * drift apart and one's softmax overlaps the other's MMAs): K rows and V^T
 * rows of 128 bytes, 128-byte swizzled for the wgmma descriptors.
 *
 *   Q.K  wgmma m64n128k32 s8 (A = Q, B = K from shared memory), 4 k-steps;
 *        S = float(acc) * (sq sk c2) (one multiply per score).
 *   key order  the S accumulator layout (columns 8t+2i, 8t+2i+1) is not the
 *        register A layout of the P.V wgmma (bytes 4i..4i+3, 16+4i..); so
 *        K row c of each 32-key chunk holds key sigma(c) (c = 16h + 8u + 2i
 *        + e -> 16h + 4i + 2u + e), and the P registers are the A fragment
 *        of keys in natural order, which V^T has. Masks and K scales use
 *        sigma: for thread:128/8/2 the thread's keys of odd / even tiles
 *        have groups 2(i mod 2) + 1 / 2(i mod 2).
 *   P.V  wgmma m64n128k32 e4m3 (A = P from registers, B = V^T from shared
 *        memory), f32 accumulator from 0 each key block (the tensor core's
 *        fp22), added into the fp32 O (the +fp32:128 level).
 * Softmax and masks as in attn_fwd_mma.h; the key-block range and the
 * epilogue are its functions (qattn_mma_key_blocks, qattn_mma_epilogue). */
#ifndef QATTN_KERNELS_ATTN_FWD_WGMMA_H
#define QATTN_KERNELS_ATTN_FWD_WGMMA_H

#include "hip_port.h"
#include "mma_nvidia.h"
#include "numerics.h"
#include "qattn_kernels.h"

#define QATTN_WGMMA_KB 128
#define QATTN_WGMMA_BM 128
#define QATTN_WGMMA_THREADS 256
#define QATTN_WGMMA_STAGES 3
/* Q tile + per warpgroup three stages of K and V^T (16 KB each) + 1 KB to
 * align to 1024 */
#define QATTN_WGMMA_SMEM (16384 + 2 * QATTN_WGMMA_STAGES * 32768 + 1024)

static __device__ __forceinline__ uint32_t qattn_wgmma_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* barrier of the 128 threads of warpgroup wg (named barrier 1 + wg) */
static __device__ __forceinline__ void qattn_bar_sync_wg(int wg)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
}

/* byte offset of 16-byte chunk ch of row r in a 128-byte-swizzled tile */
static __device__ __forceinline__ int qattn_sw128(int r, int ch) { return r * 128 + ((ch ^ (r & 7)) << 4); }

template <int D>
__global__ void __launch_bounds__(QATTN_WGMMA_THREADS, 1) qattn_attn_fwd_wgmma_kernel(qattn_kernels_attn_params p)
{
    static_assert(D == 128, "the wgmma kernel is written for head dim 128 (one 128-byte swizzled row)");
#if QATTN_WGMMA
    constexpr int KB = QATTN_WGMMA_KB, BM = QATTN_WGMMA_BM;
    constexpr int NT = KB / 8; /* n-tiles of S */
    constexpr int NO = D / 8;  /* n-tiles of O */
    QATTN_DYNAMIC_SHARED(uint8_t, smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (qattn_wgmma_smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t *sQ = smem; /* [128 rows][128 B] swizzled */

    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp >> 2, wv = warp & 3, g = lane >> 2, qi = lane & 3, wt = tid & 127;
    /* this warpgroup's stages (K at s * 32768, V^T 16384 further): the
     * warpgroups load their own K / V^T copies and never wait for each
     * other, so that one's softmax overlaps the other's MMAs */
    uint8_t *sStage = smem + 16384 + wg * (QATTN_WGMMA_STAGES * 32768);
    const int b = (int)blockIdx.z, h = (int)blockIdx.y;
    const int i0 = ((int)gridDim.x - 1 - (int)blockIdx.x) * BM; /* longest causal rows first */
    int64_t tq0 = 0, tk0 = 0;
    int sq = p.seqlen_q, sk = p.seqlen_k;
    if (p.cu_q) {
        tq0 = p.cu_q[b];
        sq = p.cu_q[b + 1] - p.cu_q[b];
    }
    if (p.cu_k) {
        tk0 = p.cu_k[b];
        sk = p.cu_k[b + 1] - p.cu_k[b];
    }
    if (i0 >= sq)
        return;
    const int hk = h / (p.hq / p.hkv);
    const uint8_t *qg = (const uint8_t *)p.q + (int64_t)b * p.q_sb + tq0 * p.q_st + (int64_t)h * p.q_sh;
    const uint8_t *kg = (const uint8_t *)p.k + (int64_t)b * p.k_sb + tk0 * p.k_st + (int64_t)hk * p.k_sh;
    const uint8_t *vg = (const uint8_t *)p.v + (int64_t)b * p.v_sb + (int64_t)hk * p.v_sh; /* V^T */
    const float *ksc = p.k_scale + ((int64_t)hk * p.nseq + b) * p.k_ntok;

    /* ---- this thread's two rows ---- */
    const int rA = i0 + 64 * wg + 16 * wv + g, rB = rA + 8;
    int loA = 0, hiA = 0, loB = 0, hiB = 0;
    {
        int64_t lo, hi;
        if (rA < sq) {
            qattn_kmask_range(p.mask, rA, sq, sk, &lo, &hi);
            loA = (int)lo, hiA = (int)hi;
        }
        if (rB < sq) {
            qattn_kmask_range(p.mask, rB, sq, sk, &lo, &hi);
            loB = (int)lo, hiB = (int)hi;
        }
    }
    const float *qsc = p.q_scale + ((int64_t)h * p.nseq + b) * p.q_ntok;
    const float qsA = rA < sq ? qsc[qattn_kgroup_tok_index(p.q_group, rA)] : 0.0f;
    const float qsB = rB < sq ? qsc[qattn_kgroup_tok_index(p.q_group, rB)] : 0.0f;

    /* ---- key blocks the tile touches ---- */
    __shared__ int s_range[2];
    int J0, J1;
    qattn_mma_key_blocks(loA, hiA, loB, hiB, KB, s_range, &J0, &J1);

    /* ---- Q tile (rows past the end: zeros) ---- */
    const int qst = (int)p.q_st, kst = (int)p.k_st, vst = (int)p.v_st;
#pragma unroll
    for (int e = wt; e < 64 * 8; e += 128) { /* this warpgroup's 64 rows */
        const int r = 64 * wg + (e >> 3), ch = e & 7, ok = i0 + r < sq;
        qattn_cp_async16(sQ + qattn_sw128(r, ch), qg + (ok ? (int64_t)(i0 + r) * qst + ch * 16 : 0), ok ? 16 : 0);
    }
    /* K row c of a block holds key j0 + sigma(c); V^T row = channel, natural key order */
    auto load_block = [&](int j0, int stage) {
        uint8_t *sK = sStage + stage * 32768, *sV = sK + 16384;
#pragma unroll
        for (int e = wt; e < KB * 8; e += 128) {
            const int c = e >> 3, ch = e & 7;
            const int cc = c & 31, hh = cc >> 4, u = (cc >> 3) & 1, ii = (cc >> 1) & 3, ee = cc & 1;
            const int j = j0 + (c & ~31) + 16 * hh + 4 * ii + 2 * u + ee;
            const int ok = j < sk;
            qattn_cp_async16(sK + qattn_sw128(c, ch), kg + (ok ? j * kst + ch * 16 : 0), ok ? 16 : 0);
        }
#pragma unroll
        for (int e = wt; e < D * 8; e += 128) {
            const int c = e >> 3, ch = e & 7;
            qattn_cp_async16(sV + qattn_sw128(c, ch), vg + (c * vst + j0 + ch * 16), 16);
        }
    };

    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    const float c2 = p.c2, pmul = p.pmul;
    const uint32_t aQ = qattn_wgmma_smem_addr(sQ) + (uint32_t)(wg * 64 * 128);

    /* Pipeline (three stages per warpgroup): P.V of block j and Q.K of block
     * j + 1 are issued back to back, so the tensor core computes Q.K(j + 1)
     * while the O update of block j runs; block j + 2 is loaded into the
     * stage block j - 1 used (every warp of the group finished it: the
     * barrier below comes after each warp's last wait of block j - 1). */
    int acc[NT * 4]; /* S, written by the first k-step (accumulate = 0) */
    auto issue_qk = [&](int stg) {
        const uint32_t aK = qattn_wgmma_smem_addr(sStage + stg * 32768);
#pragma unroll
        for (int x = 0; x < NT * 4; x++)
            qattn_wgmma_fence_reg(acc[x]);
        qattn_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 32; kk++)
            qattn_wgmma_m64n128k32_s8(acc, qattn_wgmma_desc_sw128(aQ + 32 * kk), qattn_wgmma_desc_sw128(aK + 32 * kk),
                                      kk > 0);
        qattn_wgmma_commit();
    };
    if (J0 < J1) {
        load_block(J0, 0);
        qattn_cp_async_commit(); /* with the Q tile */
        if (J0 + KB < J1)
            load_block(J0 + KB, 1);
        qattn_cp_async_commit();
        qattn_cp_async_wait<1>();
        qattn_fence_proxy_async_smem();
        qattn_bar_sync_wg(wg);
        issue_qk(0);
    }
    int stage = 0;
    for (int j0 = J0; j0 < J1; j0 += KB) {
        const int nstg = stage == QATTN_WGMMA_STAGES - 1 ? 0 : stage + 1;
        const uint32_t aV = qattn_wgmma_smem_addr(sStage + stage * 32768) + 16384;
        qattn_wgmma_wait<0>(); /* S of this block */
#pragma unroll
        for (int x = 0; x < NT * 4; x++)
            qattn_wgmma_fence_reg(acc[x]);

        /* K scales: thread:128/8/2, groups 2(i mod 2) + (t mod 2) of this block */
        const float ks0 = ksc[(j0 >> 7) * 4 + 2 * (qi & 1)], ks1 = ksc[(j0 >> 7) * 4 + 2 * (qi & 1) + 1];
        const float fA0 = qsA * ks0 * c2, fA1 = qsA * ks1 * c2, fB0 = qsB * ks0 * c2, fB1 = qsB * ks1 * c2;
        float s[NT][4];
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float fA = (t & 1) ? fA1 : fA0, fB = (t & 1) ? fB1 : fB0;
            s[t][0] = qattn_i2f_small(acc[4 * t]) * fA; /* |acc| <= 127^2 d < 2^22 */
            s[t][1] = qattn_i2f_small(acc[4 * t + 1]) * fA;
            s[t][2] = qattn_i2f_small(acc[4 * t + 2]) * fB;
            s[t][3] = qattn_i2f_small(acc[4 * t + 3]) * fB;
        }
        /* masked keys and keys past the end (key of tile t, element e: sigma) */
        if (j0 < loA || j0 + KB > hiA || j0 < loB || j0 + KB > hiB) {
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const int j = j0 + 32 * (t >> 2) + 16 * ((t >> 1) & 1) + 4 * qi + 2 * (t & 1);
                if (j < loA || j >= hiA)
                    s[t][0] = -INFINITY;
                if (j + 1 < loA || j + 1 >= hiA)
                    s[t][1] = -INFINITY;
                if (j < loB || j >= hiB)
                    s[t][2] = -INFINITY;
                if (j + 1 < loB || j + 1 >= hiB)
                    s[t][3] = -INFINITY;
            }
        }
        /* ---- online softmax ---- */
        float mxA, mxB;
        {
            float ma[NT / 2], mb[NT / 2];
#pragma unroll
            for (int t = 0; t < NT / 2; t++) {
                ma[t] = fmaxf(fmaxf(s[2 * t][0], s[2 * t][1]), fmaxf(s[2 * t + 1][0], s[2 * t + 1][1]));
                mb[t] = fmaxf(fmaxf(s[2 * t][2], s[2 * t][3]), fmaxf(s[2 * t + 1][2], s[2 * t + 1][3]));
            }
#pragma unroll
            for (int w = NT / 4; w > 0; w >>= 1)
#pragma unroll
                for (int t = 0; t < w; t++) {
                    ma[t] = fmaxf(ma[t], ma[t + w]);
                    mb[t] = fmaxf(mb[t], mb[t + w]);
                }
            mxA = fmaxf(mA, ma[0]);
            mxB = fmaxf(mB, mb[0]);
        }
        mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
        mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
        mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
        mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
        const float baseA = mxA == -INFINITY ? 0.0f : mxA, baseB = mxB == -INFINITY ? 0.0f : mxB;
        const float alA = qattn_ex2_approx(mA - baseA), alB = qattn_ex2_approx(mB - baseB);
        mA = mxA;
        mB = mxB;
        float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        uint32_t pf[KB / 32][4]; /* A fragments (e4m3) of keys 32q..32q+31 */
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float p0 = qattn_ex2_approx(s[t][0] - baseA), p1 = qattn_ex2_approx(s[t][1] - baseA);
            const float p2 = qattn_ex2_approx(s[t][2] - baseB), p3 = qattn_ex2_approx(s[t][3] - baseB);
            sa[t & 3] = sa[t & 3] + (p0 + p1);
            sb[t & 3] = sb[t & 3] + (p2 + p3);
            const uint32_t ca = qattn_cvt_e4m3x2_f32(p0 * pmul, p1 * pmul);
            const uint32_t cb = qattn_cvt_e4m3x2_f32(p2 * pmul, p3 * pmul);
            /* tiles 4q, 4q+1 -> a0 (row g) / a1 (row g+8); tiles 4q+2, 4q+3 -> a2 / a3 */
            const int q = t >> 2, hi = (t >> 1) & 1, sh = (t & 1) * 16;
            if (sh == 0) {
                pf[q][2 * hi] = ca;
                pf[q][2 * hi + 1] = cb;
            } else {
                pf[q][2 * hi] |= ca << 16;
                pf[q][2 * hi + 1] |= cb << 16;
            }
        }
        lA = lA * alA + ((sa[0] + sa[1]) + (sa[2] + sa[3]));
        lB = lB * alB + ((sb[0] + sb[1]) + (sb[2] + sb[3]));

        /* ---- P.V of this block, then Q.K of the next ---- */
        float pv[NO * 4]; /* written by the first k-step (accumulate = 0) */
#pragma unroll
        for (int x = 0; x < NO * 4; x++)
            qattn_wgmma_fence_reg(pv[x]);
        qattn_wgmma_fence();
#pragma unroll
        for (int q = 0; q < KB / 32; q++)
            qattn_wgmma_m64n128k32_e4m3_rs(pv, pf[q], qattn_wgmma_desc_sw128(aV + 32 * q), q > 0);
        qattn_wgmma_commit();
        if (j0 + KB < J1) {
            qattn_cp_async_wait<0>(); /* the next block's data */
            qattn_fence_proxy_async_smem();
            qattn_bar_sync_wg(wg);
            if (j0 + 2 * KB < J1)
                load_block(j0 + 2 * KB, nstg == QATTN_WGMMA_STAGES - 1 ? 0 : nstg + 1);
            qattn_cp_async_commit();
            issue_qk(nstg);
            qattn_wgmma_wait<1>(); /* P.V done, Q.K of the next block may run on */
        } else {
            qattn_wgmma_wait<0>();
        }
#pragma unroll
        for (int x = 0; x < NO * 4; x++)
            qattn_wgmma_fence_reg(pv[x]);
        /* ---- O = O * alpha + P.V (a block accumulator from 0, then fp32) ---- */
#pragma unroll
        for (int n = 0; n < NO; n++) {
            o[n][0] = __fmaf_rn(o[n][0], alA, pv[4 * n]);
            o[n][1] = __fmaf_rn(o[n][1], alA, pv[4 * n + 1]);
            o[n][2] = __fmaf_rn(o[n][2], alB, pv[4 * n + 2]);
            o[n][3] = __fmaf_rn(o[n][3], alB, pv[4 * n + 3]);
        }
        stage = nstg;
    }
    qattn_cp_async_wait<0>();

    qattn_mma_epilogue<D>(p, o, lA, lB, mA, mB, rA, rB, loA, hiA, loB, hiB, sq, tq0, b, h, hk);
#elif defined(__CUDA_ARCH__)
    (void)p;
    __trap(); /* built without sm_90a: never launched (the host checks), trap if it is */
#else
    (void)p;
#endif
}

#endif
