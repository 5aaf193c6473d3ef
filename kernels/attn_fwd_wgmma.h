/* Attention forward, Hopper (sm_90a) warpgroup-MMA implementation of the
 * sage2-8b-sm90 scheme for head dims 64 and 128 (int8 Q.K with per-thread
 * scale groups, e4m3 P and V, fp22 + fp32:128 accumulation): its own instance
 * (path wgmma), with the same params, scheme and checks as the mma.sync
 * instance of attn_fwd_mma.h. The dispatcher takes it on sm_90
 * (QATTN_MMA_SYNC=1 in the environment: the mma.sync instance, for
 * comparison).
 *
 * Tiling: a block of 3 warpgroups (384 threads) owns BM = 128 query rows
 * of one (sequence, head). Warp-specialized, with one copy of each key
 * block in shared memory:
 *   warpgroup 0 (producer, 24 registers after setmaxnreg): loads the Q tile
 *     (int8, 128 x 128, kept for the whole loop), then key block after key
 *     block (KB = 128) into QATTN_WGMMA_STAGES stages, cp.async; each
 *     thread's copies arrive on the stage's "full" mbarrier when they land
 *     (cp.async.mbarrier.arrive.noinc, 128 arrivals), and a stage is refilled
 *     once its "empty" mbarrier saw all 8 consumer warps done with it.
 *   warpgroups 1, 2 (consumers, 240 registers): warpgroup w rows
 *     64(w-1)..64(w-1)+63, warp v of it rows 16v..16v+15, lane 4g+i rows g
 *     and g+8 (the wgmma accumulator layout); they wait on the full
 *     barriers only, so the two drift apart and one's softmax overlaps the
 *     other's MMAs; P.V of block j and Q.K of block j + 1 are issued back to
 *     back, so the tensor core computes Q.K(j + 1) during the O update.
 * Q and K rows of d bytes (128- or 64-byte swizzle), V^T rows of 128 keys
 * (128-byte swizzle), for the wgmma descriptors; d = 64: two k-steps of
 * Q.K, P.V by m64n64k32.
 *
 *   Q.K  wgmma m64n128k32 s8 (A = Q, B = K from shared memory), 4 k-steps;
 *        S = float(acc) * (sq sk c2), fused into the exponent
 *        (qattn_wgmma_softmax).
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

#include <limits.h>
#include <string.h>

#include "attn_fwd_mma.h" /* the checks, key-block range, masks and epilogue of the mma path */

#define QATTN_WGMMA_BM 128
#define QATTN_WGMMA_THREADS 384 /* a producer warpgroup and two consumer warpgroups */
#define QATTN_WGMMA_STAGES 4     /* key blocks in flight (K and V^T, d x 128 bytes each) */
/* shared memory for head dim d and key blocks of kb keys: the Q tile (128 x d
 * bytes), the stages (K and V^T) and 1 KB to align to 1024 */
#define QATTN_WGMMA_SMEM(d, kb) (QATTN_WGMMA_BM * (d) + QATTN_WGMMA_STAGES * 2 * (kb) * (d) + 1024)

static __device__ __forceinline__ uint32_t qattn_wgmma_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* byte offset of 16-byte chunk ch of row r in a 128-byte-swizzled tile */
static __device__ __forceinline__ int qattn_sw128(int r, int ch) { return r * 128 + ((ch ^ (r & 7)) << 4); }
/* ... in a tile of D-byte rows (Q, K: D = head dim), swizzled by the row
 * length: 128 bytes, or 64 */
template <int D>
static __device__ __forceinline__ int qattn_swd(int r, int ch)
{
    return D == 128 ? qattn_sw128(r, ch) : r * 64 + ((ch ^ ((r >> 1) & 3)) << 4);
}
template <int D>
static __device__ __forceinline__ uint64_t qattn_wgmma_desc_d(uint32_t smem_addr)
{
    return D == 128 ? qattn_wgmma_desc_sw128(smem_addr) : qattn_wgmma_desc_sw64(smem_addr);
}
/* Q.K of 32 channels: S (64 x KB, int32) (+)= Q (descriptor) * K^T (descriptor) */
template <int KB>
static __device__ __forceinline__ void qattn_wgmma_qk(int *acc, uint64_t da, uint64_t db, int accumulate)
{
    if (KB == 128)
        qattn_wgmma_m64n128k32_s8(acc, da, db, accumulate);
    else
        qattn_wgmma_m64n64k32_s8(acc, da, db, accumulate);
}
/* P.V of 32 keys: O (64 x D) (+)= P (registers) * V^T (descriptor) */
template <int D>
static __device__ __forceinline__ void qattn_wgmma_pv(float *d, const uint32_t *a, uint64_t db, int accumulate)
{
    if (D == 128)
        qattn_wgmma_m64n128k32_e4m3_rs(d, a, db, accumulate);
    else
        qattn_wgmma_m64n64k32_e4m3_rs(d, a, db, accumulate);
}

/* Online softmax of one key block for a thread's rows A (g) and B (g + 8):
 * acc = the int32 S accumulators (tile t, columns in the sigma key order),
 * fX0 / fX1 = sq sk c2 of the keys of even / odd tiles (thread:128/8/2),
 * keys outside [loX, hiX) masked. Updates the running maximum m and sum l,
 * returns alpha = 2^(m_old - m_new) and the e4m3 codes of P * pmul as the
 * A fragments of the P.V wgmma (pf[q] = keys 32q..32q+31 in natural order).
 *
 * The scheme's S = float(acc) f, P = 2^(S - m), codes of P * pmul, in fewer
 * instructions per score (the same quantities up to the rounding of the
 * exponent argument): u = float(acc); the row maximum is taken on u per
 * tile parity and scaled once (rounding is monotonic and f >= 0, so
 * max(u f) = (max u) f exactly); the scale is fused into the exponent,
 * P' = 2^(fma(u, f, log2(pmul) - m)) = P * pmul is the value coded, and l
 * accumulates P' (the caller divides l by pmul before the epilogue). Masked
 * keys have u = -inf; f is raised to 1e-30 at least so that -inf f stays
 * -inf (f = 0 only when the Q row's or the K group's codes are all 0, where
 * acc = 0 and the result is the same). */
template <int KB>
static __device__ __forceinline__ void qattn_wgmma_softmax(const int (&acc)[KB / 2], int j0, int loA,
                                                           int hiA, int loB, int hiB, float fA0, float fA1, float fB0,
                                                           float fB1, float lpmul, float &mA, float &mB, float &lA,
                                                           float &lB, float &alA, float &alB,
                                                           uint32_t (&pf)[KB / 32][4])
{
    constexpr int NT = KB / 8;
    const int qi = (int)threadIdx.x & 3;
    fA0 = fmaxf(fA0, 1e-30f), fA1 = fmaxf(fA1, 1e-30f), fB0 = fmaxf(fB0, 1e-30f), fB1 = fmaxf(fB1, 1e-30f);
    float u[NT][4];
#pragma unroll
    for (int t = 0; t < NT; t++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            u[t][e] = qattn_i2f_small(acc[4 * t + e]); /* |acc| <= 127^2 d < 2^22 */
    /* masked keys and keys past the end (key of tile t, element e: sigma) */
    if (j0 < loA || j0 + KB > hiA || j0 < loB || j0 + KB > hiB) {
#pragma unroll
        for (int t = 0; t < NT; t++)
            qattn_mma_mask_frag(u[t], j0 + 32 * (t >> 2) + 16 * ((t >> 1) & 1) + 4 * qi + 2 * (t & 1), loA, hiA, loB,
                                hiB);
    }
    /* ---- row maxima per tile parity ---- */
    float mxA, mxB;
    {
        float ma[NT / 2], mb[NT / 2]; /* ma[t]: tiles of parity t mod 2 */
#pragma unroll
        for (int t = 0; t < NT / 2; t++) {
            const int t0 = 4 * (t >> 1) + (t & 1);
            ma[t] = fmaxf(fmaxf(u[t0][0], u[t0][1]), fmaxf(u[t0 + 2][0], u[t0 + 2][1]));
            mb[t] = fmaxf(fmaxf(u[t0][2], u[t0][3]), fmaxf(u[t0 + 2][2], u[t0 + 2][3]));
        }
        /* pairs (t, t + w), w even, keep the parity: down to ma[0] (even tiles), ma[1] (odd) */
#pragma unroll
        for (int w = NT / 4; w >= 2; w >>= 1)
#pragma unroll
            for (int t = 0; t < w; t++) {
                ma[t] = fmaxf(ma[t], ma[t + w]);
                mb[t] = fmaxf(mb[t], mb[t + w]);
            }
        mxA = fmaxf(mA, fmaxf(ma[0] * fA0, ma[1] * fA1));
        mxB = fmaxf(mB, fmaxf(mb[0] * fB0, mb[1] * fB1));
    }
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
    const float baseA = mxA == -INFINITY ? 0.0f : mxA, baseB = mxB == -INFINITY ? 0.0f : mxB;
    alA = qattn_ex2_approx(mA - baseA);
    alB = qattn_ex2_approx(mB - baseB);
    mA = mxA;
    mB = mxB;
    const float nbA = lpmul - baseA, nbB = lpmul - baseB; /* exponent offsets, pmul folded in */
    float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int t = 0; t < NT; t++) {
        const float fA = (t & 1) ? fA1 : fA0, fB = (t & 1) ? fB1 : fB0;
        const float p0 = qattn_ex2_approx(__fmaf_rn(u[t][0], fA, nbA));
        const float p1 = qattn_ex2_approx(__fmaf_rn(u[t][1], fA, nbA));
        const float p2 = qattn_ex2_approx(__fmaf_rn(u[t][2], fB, nbB));
        const float p3 = qattn_ex2_approx(__fmaf_rn(u[t][3], fB, nbB));
        sa[t & 3] = sa[t & 3] + (p0 + p1);
        sb[t & 3] = sb[t & 3] + (p2 + p3);
        const uint32_t ca = qattn_cvt_e4m3x2_f32(p0, p1), cb = qattn_cvt_e4m3x2_f32(p2, p3);
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
}

/* the O update of one key block: O = O * alpha + P.V (the block's P.V
 * accumulated from 0 by the tensor core, fp22, then into fp32) */
template <int NO>
static __device__ __forceinline__ void qattn_wgmma_o_update(float (&o)[NO][4], const float (&pv)[NO * 4], float alA,
                                                            float alB)
{
#pragma unroll
    for (int n = 0; n < NO; n++) {
        o[n][0] = __fmaf_rn(o[n][0], alA, pv[4 * n]);
        o[n][1] = __fmaf_rn(o[n][1], alA, pv[4 * n + 1]);
        o[n][2] = __fmaf_rn(o[n][2], alB, pv[4 * n + 2]);
        o[n][3] = __fmaf_rn(o[n][3], alB, pv[4 * n + 3]);
    }
}

template <int D, int KB>
__global__ void __launch_bounds__(QATTN_WGMMA_THREADS, 1) qattn_attn_fwd_wgmma_kernel(qattn_kernels_attn_params p)
{
    static_assert(D == 128 || D == 64, "the wgmma kernel is written for head dims 64 and 128 (swizzled rows)");
    static_assert(KB == 128 || KB == 64, "key blocks of 64 or 128 keys (V^T rows of KB bytes, swizzled)");
#if QATTN_WGMMA
    constexpr int BM = QATTN_WGMMA_BM, S = QATTN_WGMMA_STAGES;
    constexpr int NT = KB / 8; /* n-tiles of S */
    constexpr int NO = D / 8;  /* n-tiles of O */
    constexpr int CH = D / 16; /* 16-byte chunks of a Q / K row */
    constexpr int KBYTES = KB * D, STAGE = 2 * KB * D; /* a stage: K [KB][D B], then V^T [D][KB B] */
    constexpr int RP = 2048 / D;                       /* K rows the producer's 128 threads copy per pass */
    constexpr int VR = 2048 / KB;                      /* V^T rows (channels) per pass */
    QATTN_DYNAMIC_SHARED(uint8_t, smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (qattn_wgmma_smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t *sQ = smem;               /* [128 rows][D B] swizzled */
    uint8_t *sStage = smem + BM * D; /* stage s at s * STAGE */
    __shared__ __align__(8) uint64_t s_bar[2 * S + 1]; /* full[S], empty[S], Q */
    const uint32_t bar0 = qattn_wgmma_smem_addr(s_bar);
#define QATTN_WS_FULL(s) (bar0 + 8u * (uint32_t)(s))
#define QATTN_WS_EMPTY(s) (bar0 + 8u * (uint32_t)(S + (s)))
#define QATTN_WS_QBAR (bar0 + 8u * (uint32_t)(2 * S))

    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp >> 2, wv = warp & 3, g = lane >> 2, qi = lane & 3, wt = tid & 127;
    const int b = (int)blockIdx.z, h = (int)blockIdx.y;
    const int i0 = ((int)gridDim.x - 1 - (int)blockIdx.x) * BM; /* longest causal rows first */
    int64_t tq0, tk0;
    int sq, sk;
    qattn_kseq(p.cu_q, b, p.seqlen_q, &tq0, &sq);
    qattn_kseq(p.cu_k, b, p.seqlen_k, &tk0, &sk);
    if (i0 >= sq)
        return;
    const int hk = h / (p.hq / p.hkv);

    /* ---- this thread's two rows (consumers; the producer has none) ---- */
    const int cw = wg - 1;
    const int rA = i0 + 64 * cw + 16 * wv + g, rB = rA + 8;
    int loA = 0, hiA = 0, loB = 0, hiB = 0;
    if (wg > 0)
        qattn_mma_row_ranges(p.mask, rA, rB, sq, sk, &loA, &hiA, &loB, &hiB);
    if (tid == 0) {
        for (int s = 0; s < S; s++) {
            qattn_mbar_init(QATTN_WS_FULL(s), 128);
            qattn_mbar_init(QATTN_WS_EMPTY(s), 8);
        }
        qattn_mbar_init(QATTN_WS_QBAR, 128);
    }
    /* ---- key blocks the tile touches (its barriers also publish the mbarrier inits) ---- */
    __shared__ int s_range[2];
    int J0, J1;
    qattn_mma_key_blocks(loA, hiA, loB, hiB, KB, s_range, &J0, &J1);

    if (wg == 0) {
        /* ================= producer ================= */
        qattn_setmaxnreg_dec<24>();
        if (J0 < J1) {
            const uint8_t *qg = (const uint8_t *)p.q + (int64_t)b * p.q_sb + tq0 * p.q_st + (int64_t)h * p.q_sh;
            const int qst = (int)p.q_st;
#pragma unroll
            for (int e = wt; e < BM * CH; e += 128) {
                const int r = e / CH, ch = e % CH, ok = i0 + r < sq;
                qattn_cp_async16(sQ + qattn_swd<D>(r, ch), qg + (ok ? (int64_t)(i0 + r) * qst + ch * 16 : 0),
                                 ok ? 16 : 0);
            }
            qattn_cp_async_mbar_arrive(QATTN_WS_QBAR);
            /* this thread's 16-byte chunk ch of K rows r0 + RP x (x < KB / RP): K row r0 + RP x
             * holds key RP x + sigma(r0) of the block (sigma(c) = 16h + 4i + 2u + e for
             * c = 16h + 8u + 2i + e, within 32 keys); and chunk vch of V^T rows (channels)
             * v0 + VR x (x < D / VR), KB keys a row */
            const int r0 = wt / CH, ch = wt % CH, v0 = wt / (KB / 16), vch = wt % (KB / 16);
            const int kperm = 16 * ((r0 >> 4) & 1) + 4 * ((r0 >> 1) & 3) + 2 * ((r0 >> 3) & 1) + (r0 & 1);
            const int kst = (int)p.k_st, vst = (int)p.v_st;
            const uint8_t *kg = (const uint8_t *)p.k + (int64_t)b * p.k_sb + tk0 * p.k_st + (int64_t)hk * p.k_sh +
                                (int64_t)kperm * kst + ch * 16;
            const uint8_t *vg = (const uint8_t *)p.v + (int64_t)b * p.v_sb + (int64_t)hk * p.v_sh +
                                (int64_t)v0 * vst + vch * 16; /* V^T row v0 */
            const int soff = qattn_swd<D>(r0, ch), voff = qattn_swd<KB>(v0, vch);
            for (int j0 = J0, it = 0; j0 < J1; j0 += KB, it++) {
                const int stage = it % S;
                if (it >= S) /* the consumers' release of this stage's previous block: completion it / S - 1 */
                    qattn_mbar_wait(QATTN_WS_EMPTY(stage), (uint32_t)((it / S - 1) & 1));
                uint8_t *sK = sStage + stage * STAGE + soff, *sV = sStage + stage * STAGE + KBYTES + voff;
                const uint8_t *kp = kg + (int64_t)j0 * kst, *vp = vg + j0;
                /* few registers here (setmaxnreg): pointers stepped, not precomputed */
#pragma unroll 1
                for (int x = 0; x < (KB / RP > D / VR ? KB / RP : D / VR); x++, kp += RP * kst, vp += VR * vst) {
                    if (x < KB / RP) {
                        const int ok = j0 + RP * x + kperm < sk;
                        qattn_cp_async16(sK + 2048 * x, ok ? kp : kg, ok ? 16 : 0);
                    }
                    if (x < D / VR)
                        qattn_cp_async16(sV + 2048 * x, vp, 16);
                }
                qattn_cp_async_mbar_arrive(QATTN_WS_FULL(stage));
            }
        }
        qattn_cp_async_commit();
        qattn_cp_async_wait<0>();
        return;
    }

    /* ================= consumers ================= */
    qattn_setmaxnreg_inc<240>();
    const float *ksc = p.k_scale + ((int64_t)hk * p.nseq + b) * p.k_ntok;
    const float *qsc = p.q_scale + ((int64_t)h * p.nseq + b) * p.q_ntok;
    const float qsA = rA < sq ? qsc[qattn_num_group_tok_index(p.q_group, rA)] : 0.0f;
    const float qsB = rB < sq ? qsc[qattn_num_group_tok_index(p.q_group, rB)] : 0.0f;

    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    const float c2 = p.c2, pmul = p.pmul, lpmul = log2f(pmul);
    const uint32_t aQ = qattn_wgmma_smem_addr(sQ) + (uint32_t)(cw * 64 * D);

    int acc[NT * 4]; /* S, written by the first k-step (accumulate = 0) */
    auto issue_qk = [&](int stg) {
        const uint32_t aK = qattn_wgmma_smem_addr(sStage + stg * STAGE);
#pragma unroll
        for (int x = 0; x < NT * 4; x++)
            qattn_wgmma_fence_reg(acc[x]);
        qattn_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 32; kk++)
            qattn_wgmma_qk<KB>(acc, qattn_wgmma_desc_d<D>(aQ + 32 * kk), qattn_wgmma_desc_d<D>(aK + 32 * kk), kk > 0);
        qattn_wgmma_commit();
    };
    if (J0 < J1) {
        qattn_mbar_wait(QATTN_WS_QBAR, 0);
        qattn_mbar_wait(QATTN_WS_FULL(0), 0);
        qattn_fence_proxy_async_smem(); /* cp.async (generic proxy) data read by wgmma (async proxy) */
        issue_qk(0);
    }
    int stage = 0;
    uint32_t phase = 0; /* parity of the full barriers' current completion */
    for (int j0 = J0; j0 < J1; j0 += KB) {
        const int nstg = stage == S - 1 ? 0 : stage + 1;
        const uint32_t nphase = stage == S - 1 ? phase ^ 1u : phase;
        const uint32_t aV = qattn_wgmma_smem_addr(sStage + stage * STAGE) + KBYTES;
        qattn_wgmma_wait<0>(); /* S of this block */
#pragma unroll
        for (int x = 0; x < NT * 4; x++)
            qattn_wgmma_fence_reg(acc[x]);

        /* K scales: thread:KB/8/2, groups 2(i mod 2) + (t mod 2) of this block */
        const int kblk = (int)((unsigned)j0 / (unsigned)KB); /* j0 >= 0 */
        const float ks0 = ksc[kblk * 4 + 2 * (qi & 1)], ks1 = ksc[kblk * 4 + 2 * (qi & 1) + 1];
        float alA, alB;
        uint32_t pf[KB / 32][4]; /* A fragments (e4m3) of keys 32q..32q+31 */
        qattn_wgmma_softmax<KB>(acc, j0, loA, hiA, loB, hiB, qsA * ks0 * c2, qsA * ks1 * c2, qsB * ks0 * c2,
                            qsB * ks1 * c2, lpmul, mA, mB, lA, lB, alA, alB, pf);

        /* ---- P.V of this block, then Q.K of the next ---- */
        float pv[NO * 4]; /* written by the first k-step (accumulate = 0) */
#pragma unroll
        for (int x = 0; x < NO * 4; x++)
            qattn_wgmma_fence_reg(pv[x]);
        qattn_wgmma_fence();
#pragma unroll
        for (int q = 0; q < KB / 32; q++)
            qattn_wgmma_pv<D>(pv, pf[q], qattn_wgmma_desc_d<KB>(aV + 32 * q), q > 0);
        qattn_wgmma_commit();
        if (j0 + KB < J1) {
            qattn_mbar_wait(QATTN_WS_FULL(nstg), nphase);
            qattn_fence_proxy_async_smem();
            issue_qk(nstg);
            qattn_wgmma_wait<1>(); /* P.V done, Q.K of the next block may run on */
        } else {
            qattn_wgmma_wait<0>();
        }
        if (lane == 0)
            qattn_mbar_arrive(QATTN_WS_EMPTY(stage)); /* this warp is done with the stage */
#pragma unroll
        for (int x = 0; x < NO * 4; x++)
            qattn_wgmma_fence_reg(pv[x]);
        qattn_wgmma_o_update<NO>(o, pv, alA, alB);
        stage = nstg;
        phase = nphase;
    }
    lA = lA / pmul, lB = lB / pmul; /* l summed P * pmul (qattn_wgmma_softmax) */
    qattn_mma_epilogue<D>(p, o, lA, lB, mA, mB, rA, rB, loA, hiA, loB, hiB, sq, tq0, b, h, hk);
#undef QATTN_WS_FULL
#undef QATTN_WS_EMPTY
#undef QATTN_WS_QBAR
#elif defined(__CUDA_ARCH__)
    (void)p;
    __trap(); /* built without sm_90a: never launched (the host checks), trap if it is */
#else
    (void)p;
#endif
}

/* the launch of a wgmma instance (head dim D, key blocks of KB keys, int8 Q /
 * K codes): the mma instance's checks for KB; sm_90 and a build with sm_90a
 * (sig cc 90..90) */
template <int D, int KB>
static int qattn_attn_fwd_wgmma_launch(const qattn_kernels_attn_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_attn_params p = *pp;
    int rc = qattn_attn_fwd_mma_check<D, QATTN_FMT_INT8, KB>(p, err);
    if (rc || p.seqlen_q <= 0)
        return rc;
    const int cc = qattn_kernels_dev_cc();
    if (cc != 90 || !strstr(QATTN_KERNELS_ARCHS, "sm_90a"))
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "attn wgmma: needs an sm_90 GPU and a build for sm_90a (GPU sm_%d, built for %s)", cc,
                             QATTN_KERNELS_ARCHS);
    const size_t smem = QATTN_WGMMA_SMEM(D, KB);
    void (*k)(qattn_kernels_attn_params) = &qattn_attn_fwd_wgmma_kernel<D, KB>;
    QATTN_MMA_CHECK(cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                    "attn wgmma: raising the shared-memory limit");
    const dim3 grid((unsigned)((p.seqlen_q + QATTN_WGMMA_BM - 1) / QATTN_WGMMA_BM), (unsigned)p.hq, (unsigned)p.nseq);
    k<<<grid, dim3(QATTN_WGMMA_THREADS), smem, (cudaStream_t)stream>>>(p);
    QATTN_MMA_CHECK(cudaGetLastError(), "attn wgmma kernel launch");
    return QATTN_OK;
}

/* one instance: extern "C" launch function NAME for head dim D, key blocks
 * of KB keys, int8 Q / K */
#define QATTN_ATTN_FWD_WGMMA_INSTANCE(D, KB, NAME)                                         \
    extern "C" int NAME(const qattn_kernels_attn_params *p, void *stream, qattn_err *err) \
    {                                                                                      \
        return qattn_attn_fwd_wgmma_launch<D, KB>(p, stream, err);                        \
    }

#endif
