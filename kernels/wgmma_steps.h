/* Attention forward, wgmma path: the consumer warpgroups' steps of one key
 * block (attn_fwd_wgmma.h): the Q.K and P.V wgmma issues, the online
 * softmax with the P codes (8-bit, fp16, or e4m3 widened to fp16) and the
 * 16-bit baseline's, the O updates and rescales. */
#ifndef QATTN_KERNELS_WGMMA_STEPS_H
#define QATTN_KERNELS_WGMMA_STEPS_H

#include <limits.h>

#include "attn_fwd_mma.h" /* qattn_mma_mask_frag */
#include "quant_groups.h" /* qattn_qf_tok_index */
#include "wgmma_form.h"   /* qattn_wg_s2f */
#include "wgmma_keys.h"   /* qattn_wg_key */
#include "wgmma_tile.h"   /* the wgmma wrappers and descriptors */

/* Q.K of 32 channels: S (64 x KB; int32 of int8 codes, fp32 of e4m3) (+)=
 * Q (descriptor) * K^T (descriptor) */
template <int KB>
static __device__ __forceinline__ void qattn_wgmma_qk(int *acc, uint64_t da, uint64_t db, int accumulate)
{
    if (KB == 128)
        qattn_wgmma_m64n128k32_s8(acc, da, db, accumulate);
    else
        qattn_wgmma_m64n64k32_s8(acc, da, db, accumulate);
}
template <int KB>
static __device__ __forceinline__ void qattn_wgmma_qk(float *acc, uint64_t da, uint64_t db, int accumulate)
{
    qattn_wgmma_m64k32_e4m3_ss<KB>(acc, da, db, accumulate);
}
/* an S accumulator as float (int32 of int8 codes: |acc| <= 127^2 d < 2^22) */
static __device__ __forceinline__ float qattn_wgmma_s2f(int a) { return qattn_i2f_small(a); }
static __device__ __forceinline__ float qattn_wgmma_s2f(float a) { return a; }
/* the same by cvt.rn.f32.s32 (one issue slot on another pipe than the pair's; both exact) */
static __device__ __forceinline__ float qattn_wgmma_s2f_cvt(int a) { return qattn_i2f_cvt(a); }
static __device__ __forceinline__ float qattn_wgmma_s2f_cvt(float a) { return a; }
/* a block's P.V accumulator as float (int32 of int8 codes: |P.V| <= 127^2 KB < 2^22) */
static __device__ __forceinline__ float qattn_wgmma_pv2f(int a) { return qattn_i2f_cvt(a); }
static __device__ __forceinline__ float qattn_wgmma_pv2f(float a) { return a; }
/* P.V of 32 keys: O (64 x D) (+)= P (registers) * V^T (descriptor); e4m3
 * into f32 (fp22), int8 into s32 (exact) */
template <int D>
static __device__ __forceinline__ void qattn_wgmma_pv(float *d, const uint32_t *a, uint64_t db, int accumulate)
{
    if (D == 128)
        qattn_wgmma_m64n128k32_e4m3_rs(d, a, db, accumulate);
    else
        qattn_wgmma_m64n64k32_e4m3_rs(d, a, db, accumulate);
}
template <int D>
static __device__ __forceinline__ void qattn_wgmma_pv(int *d, const uint32_t *a, uint64_t db, int accumulate)
{
    qattn_wgmma_m64k32_s8_rs<D>(d, a, db, accumulate);
}
/* two P values (P * pmul) as codes of the P.V operand, the first in the low byte */
template <int PF>
static __device__ __forceinline__ uint32_t qattn_wgmma_pcode2(float p0, float p1)
{
    if (PF == QATTN_FMT_INT8) { /* P * 127 in [0, 127], rounded to nearest even (as the emulation) by
                                 * adding 1.5 * 2^23: the integer lands in the low bits, no F2I on the XU */
        const uint32_t u0 = __float_as_uint(p0 + 12582912.0f), u1 = __float_as_uint(p1 + 12582912.0f);
        return (u0 & 0xffu) | ((u1 & 0xffu) << 8);
    }
    return qattn_cvt_e4m3x2_f32(p0, p1);
}

/* float values kept in an S accumulator's registers (int32 ones hold the float's bits) */
template <typename SA, int N>
struct qattn_wg_fview {
    static constexpr bool INT = SA(1) / 2 == 0; /* int32 (of int8 codes), else float */
    SA (&a)[N];
    __device__ __forceinline__ explicit qattn_wg_fview(SA (&acc)[N]) : a(acc) {}
    __device__ __forceinline__ float operator()(int i) const
    {
        if constexpr (INT)
            return __int_as_float(a[i]);
        else
            return a[i];
    }
    __device__ __forceinline__ void set(int i, float v) const
    {
        if constexpr (INT)
            a[i] = __float_as_int(v);
        else
            a[i] = v;
    }
    __device__ __forceinline__ uint32_t bits(int i) const
    {
        if constexpr (INT)
            return (uint32_t)a[i];
        else
            return __float_as_uint(a[i]);
    }
    __device__ __forceinline__ void set_bits(int i, uint32_t v) const
    {
        if constexpr (INT)
            a[i] = (int)v;
        else
            a[i] = __uint_as_float(v);
    }
};

/* a softmax's scores as float: in the S accumulator's registers (INPL, where registers are short:
 * three consumer warpgroups), or in an array of their own (measured faster with two) */
template <bool INPL, typename SA, int N>
struct qattn_wg_scores : qattn_wg_fview<SA, N> {
    __device__ __forceinline__ explicit qattn_wg_scores(SA (&acc)[N]) : qattn_wg_fview<SA, N>(acc) {}
};
template <typename SA, int N>
struct qattn_wg_scores<false, SA, N> {
    float v[N];
    __device__ __forceinline__ explicit qattn_wg_scores(SA (&)[N]) {}
    __device__ __forceinline__ float operator()(int i) const { return v[i]; }
    __device__ __forceinline__ void set(int i, float x) { v[i] = x; }
    __device__ __forceinline__ uint32_t bits(int i) const { return __float_as_uint(v[i]); }
    __device__ __forceinline__ void set_bits(int i, uint32_t x) { v[i] = __uint_as_float(x); }
};

/* the new row maxima from the thread's (mxA, mxB, already max'ed with the
 * running mA, mB) over the 4 lanes of a row: alpha = 2^(m_old - m_new), the
 * exponent base (0 for a row that has seen no key), m updated */
static __device__ __forceinline__ void qattn_wgmma_row_max(float mxA, float mxB, float &mA, float &mB, float &alA,
                                                           float &alB, float &baseA, float &baseB)
{
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
    baseA = mxA == -INFINITY ? 0.0f : mxA, baseB = mxB == -INFINITY ? 0.0f : mxB;
    alA = qattn_ex2_approx(mA - baseA);
    alB = qattn_ex2_approx(mB - baseB);
    mA = mxA;
    mB = mxB;
}

/* smooth=q's dS c2 of the thread's keys of tile t, read from the stage's row in shared memory where
 * the softmax uses it (not all tiles' ahead: registers) */
template <int KB>
struct qattn_wg_dsrow {
    const float *row; /* [KB] the Q block's dS row of the stage */
    int qi;
    __device__ __forceinline__ float2 operator[](int t) const { return *(const float2 *)(row + qattn_wg_key(t, qi, 0)); }
};
/* the dS pairs a softmax's ds argument holds: float2[N] (read first) or a qattn_wg_dsrow */
template <typename T>
struct qattn_wg_ds_pairs;
template <size_t N>
struct qattn_wg_ds_pairs<float2[N]> {
    static constexpr int n = (int)N;
};
template <int KB>
struct qattn_wg_ds_pairs<qattn_wg_dsrow<KB>> {
    static constexpr int n = KB / 8;
};

/* max(a, b, c): one three-input integer min/max on sm_90 */
static __device__ __forceinline__ int qattn_imax3(int a, int b, int c) { return max(max(a, b), c); }
/* the maximum of 16 int32 values by three-input maxima (two chains of four) */
static __device__ __forceinline__ int qattn_imax16(const int (&v)[16])
{
    int a = qattn_imax3(v[0], v[1], v[2]), b = qattn_imax3(v[8], v[9], v[10]);
    a = qattn_imax3(a, v[3], v[4]), b = qattn_imax3(b, v[11], v[12]);
    a = qattn_imax3(a, v[5], v[6]), b = qattn_imax3(b, v[13], v[14]);
    return qattn_imax3(a, v[7], max(b, v[15]));
}

/* Online softmax of one key block for a thread's rows A (g) and B (g + 8):
 * acc = the S accumulators (int32 of int8 codes, fp32 of e4m3; tile t,
 * columns in the sigma key order, qattn_wg_key), fX0 / fX1 = sq sk c2 of
 * the keys of even / odd tiles (one K group each: qattn_wg_kgroup_ok),
 * keys outside [loX, hiX) masked (S2F: how the int32 scores are converted,
 * qattn_wg_s2f). Updates the running maximum m and sum l,
 * returns alpha = 2^(m_old - m_new) and the codes of P * pmul as the A
 * fragments of the P.V wgmma: e4m3 / int8, pf[q] = keys 32q..32q+31 in
 * natural order; fp16 (PF, or e4m3 codes widened: WID), pf[q] = S columns
 * 16q..16q+15, keys sigma(16q..16q+15) as V's rows are (the k-step's 16
 * keys kept).
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
template <int KB, int PF, bool DS, bool WID, int S2F, bool INPL, bool PIN, bool IMAX, typename SA, typename DSA, typename F>
static __device__ __forceinline__ void qattn_wgmma_softmax(SA (&acc)[KB / 2], const DSA &ds, int j0,
                                                           int loA, int hiA, int loB, int hiB, float fA0, float fA1,
                                                           float fB0, float fB1, float lpmul, float &mA, float &mB,
                                                           float &lA, float &lB, float &alA, float &alB,
                                                           uint32_t (&pf)[KB / (PF == QATTN_FMT_FP16 || WID ? 16 : 32)][4],
                                                           F &&beside)
{
    constexpr int NT = KB / 8;
    const int qi = (int)threadIdx.x & 3;
    beside(); /* the caller's work that may run beside this block's (issue slots the chains leave) */
    /* u = the scores as float (INPL: in the accumulator's own registers; a separate array doubles
     * the block's live registers, as ptxas keeps the wgmma accumulator where it is) */
    static_assert(INPL || !PIN, "P's codes in the accumulator's registers need the scores there");
    /* IMAX (int32 scores, no dS, KB = 128): the row maxima per tile parity on the integers, before they
     * are converted (float(max acc) = max float(acc)): three-input maxima, half the instructions */
    constexpr bool IM = IMAX && qattn_wg_fview<SA, KB / 2>::INT && !DS && KB == 128;
    int gmax[4] = {0, 0, 0, 0}; /* rows A, B x parity even, odd */
    if constexpr (IM) {
#pragma unroll
        for (int x = 0; x < 4; x++) {
            int v[16];
#pragma unroll
            for (int i = 0; i < 8; i++) /* tiles 2i + parity, elements 0-1 (row A) or 2-3 (row B) */
#pragma unroll
                for (int e = 0; e < 2; e++)
                    v[2 * i + e] = (int)acc[4 * (2 * i + (x & 1)) + 2 * (x >> 1) + e];
            gmax[x] = qattn_imax16(v);
        }
    }
    qattn_wg_scores<INPL, SA, KB / 2> u{acc};
    if constexpr (DS) { /* S c2 = float(acc) f + dS c2 (ds[t]: the keys of tile t), then scaled by 1 */
        static_assert(qattn_wg_ds_pairs<DSA>::n == NT, "one dS pair a tile");
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float fA = (t & 1) ? fA1 : fA0, fB = (t & 1) ? fB1 : fB0;
            u.set(4 * t, __fmaf_rn(qattn_wgmma_s2f(acc[4 * t]), fA, ds[t].x));
            u.set(4 * t + 1, __fmaf_rn(qattn_wgmma_s2f(acc[4 * t + 1]), fA, ds[t].y));
            u.set(4 * t + 2, __fmaf_rn(qattn_wgmma_s2f(acc[4 * t + 2]), fB, ds[t].x));
            u.set(4 * t + 3, __fmaf_rn(qattn_wgmma_s2f(acc[4 * t + 3]), fB, ds[t].y));
        }
        fA0 = fA1 = fB0 = fB1 = 1.0f;
    } else {
        fA0 = fmaxf(fA0, 1e-30f), fA1 = fmaxf(fA1, 1e-30f), fB0 = fmaxf(fB0, 1e-30f), fB1 = fmaxf(fB1, 1e-30f);
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                u.set(4 * t + e, S2F == QATTN_WG_S2F_CVT || (S2F == QATTN_WG_S2F_MIX && (e & 1))
                                     ? qattn_wgmma_s2f_cvt(acc[4 * t + e])
                                     : qattn_wgmma_s2f(acc[4 * t + e]));
    }
    /* masked keys and keys past the end (key of tile t, element e: sigma) */
    const bool edge = j0 < loA || j0 + KB > hiA || j0 < loB || j0 + KB > hiB;
    if (edge) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            float m4[4] = {u(4 * t), u(4 * t + 1), u(4 * t + 2), u(4 * t + 3)};
            qattn_mma_mask_frag(m4, j0 + qattn_wg_key(t, qi, 0), loA, hiA, loB, hiB);
#pragma unroll
            for (int e = 0; e < 4; e++)
                u.set(4 * t + e, m4[e]);
        }
    }
    /* ---- row maxima per tile parity ---- */
    float mxA, mxB;
    if (IM && !edge) {
        mxA = fmaxf(mA, fmaxf(qattn_wgmma_s2f_cvt(gmax[0]) * fA0, qattn_wgmma_s2f_cvt(gmax[1]) * fA1));
        mxB = fmaxf(mB, fmaxf(qattn_wgmma_s2f_cvt(gmax[2]) * fB0, qattn_wgmma_s2f_cvt(gmax[3]) * fB1));
    } else {
        float ma[NT / 2], mb[NT / 2]; /* ma[t]: tiles of parity t mod 2 */
#pragma unroll
        for (int t = 0; t < NT / 2; t++) {
            const int t0 = 4 * (t >> 1) + (t & 1);
            ma[t] = fmaxf(fmaxf(u(4 * t0), u(4 * t0 + 1)), fmaxf(u(4 * t0 + 8), u(4 * t0 + 9)));
            mb[t] = fmaxf(fmaxf(u(4 * t0 + 2), u(4 * t0 + 3)), fmaxf(u(4 * t0 + 10), u(4 * t0 + 11)));
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
    float baseA, baseB;
    qattn_wgmma_row_max(mxA, mxB, mA, mB, alA, alB, baseA, baseB);
    const float nbA = lpmul - baseA, nbB = lpmul - baseB; /* exponent offsets, pmul folded in */
    float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int t = 0; t < NT; t++) {
        const float fA = (t & 1) ? fA1 : fA0, fB = (t & 1) ? fB1 : fB0;
        const float p0 = qattn_ex2_approx(__fmaf_rn(u(4 * t), fA, nbA));
        const float p1 = qattn_ex2_approx(__fmaf_rn(u(4 * t + 1), fA, nbA));
        const float p2 = qattn_ex2_approx(__fmaf_rn(u(4 * t + 2), fB, nbB));
        const float p3 = qattn_ex2_approx(__fmaf_rn(u(4 * t + 3), fB, nbB));
        sa[t & 3] = sa[t & 3] + (p0 + p1);
        sb[t & 3] = sb[t & 3] + (p2 + p3);
        if constexpr (PF == QATTN_FMT_FP16) { /* tile 2q -> a0 (row g) / a1 (row g+8), tile 2q+1 -> a2 / a3 */
            pf[t >> 1][2 * (t & 1)] = qattn_cvt_f16x2_f32(p0, p1);
            pf[t >> 1][2 * (t & 1) + 1] = qattn_cvt_f16x2_f32(p2, p3);
            continue;
        }
        if constexpr (WID) { /* the e4m3 codes widened to fp16 (exact), laid out as fp16 P */
            pf[t >> 1][2 * (t & 1)] = qattn_cvt_f16x2_e4m3x2(qattn_cvt_e4m3x2_f32(p0, p1));
            pf[t >> 1][2 * (t & 1) + 1] = qattn_cvt_f16x2_e4m3x2(qattn_cvt_e4m3x2_f32(p2, p3));
            continue;
        }
        const uint32_t ca = qattn_wgmma_pcode2<PF>(p0, p1), cb = qattn_wgmma_pcode2<PF>(p2, p3);
        /* tiles 4q, 4q+1 -> a0 (row g) / a1 (row g+8); tiles 4q+2, 4q+3 -> a2 / a3 */
        const int q = t >> 2, hi = (t >> 1) & 1, sh = (t & 1) * 16;
        if constexpr (PIN) { /* into acc[4q + 2hi (+1)]: scores of tiles <= t, already read */
            const int x = 4 * q + 2 * hi;
            u.set_bits(x, sh == 0 ? ca : u.bits(x) | ca << 16);
            u.set_bits(x + 1, sh == 0 ? cb : u.bits(x + 1) | cb << 16);
        } else if (sh == 0) {
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

/* The same for the fp16 / bf16 baseline: acc = S in fp32 from
 * the tensor core (keys in natural order: tile t, element e holds key
 * 8t + 2i + (e & 1)), c2 = softmax scale * log2(e); P = 2^(S c2 - m)
 * written over S (qattn_wgmma_pack16 rounds it for the P.V wgmma), l
 * summed from the unrounded P. */
template <int KB>
static __device__ __forceinline__ void qattn_wgmma_softmax16(float (&acc)[KB / 2], int j0, int loA, int hiA,
                                                             int loB, int hiB, float c2, float &mA, float &mB,
                                                             float &lA, float &lB, float &alA, float &alB)
{
    constexpr int NT = KB / 8;
    const int qi = (int)threadIdx.x & 3;
    if (j0 < loA || j0 + KB > hiA || j0 < loB || j0 + KB > hiB) {
#pragma unroll
        for (int t = 0; t < NT; t++)
            qattn_mma_mask_frag(&acc[4 * t], j0 + 8 * t + 2 * qi, loA, hiA, loB, hiB);
    }
    /* row maxima on S, scaled once (c2 > 0, rounding is monotonic) */
    float ma[4], mb[4];
#pragma unroll
    for (int t = 0; t < 4; t++) {
        ma[t] = fmaxf(acc[4 * t], acc[4 * t + 1]);
        mb[t] = fmaxf(acc[4 * t + 2], acc[4 * t + 3]);
    }
#pragma unroll
    for (int t = 4; t < NT; t++) {
        ma[t & 3] = fmaxf(ma[t & 3], fmaxf(acc[4 * t], acc[4 * t + 1]));
        mb[t & 3] = fmaxf(mb[t & 3], fmaxf(acc[4 * t + 2], acc[4 * t + 3]));
    }
    float mxA = fmaxf(mA, fmaxf(fmaxf(ma[0], ma[1]), fmaxf(ma[2], ma[3])) * c2);
    float mxB = fmaxf(mB, fmaxf(fmaxf(mb[0], mb[1]), fmaxf(mb[2], mb[3])) * c2);
    float baseA, baseB;
    qattn_wgmma_row_max(mxA, mxB, mA, mB, alA, alB, baseA, baseB);
    float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int t = 0; t < NT; t++) {
        const float p0 = qattn_ex2_approx(__fmaf_rn(acc[4 * t], c2, -baseA));
        const float p1 = qattn_ex2_approx(__fmaf_rn(acc[4 * t + 1], c2, -baseA));
        const float p2 = qattn_ex2_approx(__fmaf_rn(acc[4 * t + 2], c2, -baseB));
        const float p3 = qattn_ex2_approx(__fmaf_rn(acc[4 * t + 3], c2, -baseB));
        sa[t & 3] = sa[t & 3] + (p0 + p1);
        sb[t & 3] = sb[t & 3] + (p2 + p3);
        acc[4 * t] = p0, acc[4 * t + 1] = p1, acc[4 * t + 2] = p2, acc[4 * t + 3] = p3;
    }
    lA = lA * alA + ((sa[0] + sa[1]) + (sa[2] + sa[3]));
    lB = lB * alB + ((sb[0] + sb[1]) + (sb[2] + sb[3]));
}
/* P (fp32, the S layout) rounded to the 16-bit type as the A fragments of
 * the P.V wgmma: pf[q] = keys 16q..16q+15 (tile 2q -> a0 (row g) / a1
 * (row g + 8), tile 2q + 1 -> a2 / a3) */
template <int KB, int BF>
static __device__ __forceinline__ void qattn_wgmma_pack16(const float (&p)[KB / 2], uint32_t (&pf)[KB / 16][4])
{
#pragma unroll
    for (int t = 0; t < KB / 8; t++) {
        pf[t >> 1][2 * (t & 1)] = BF ? qattn_cvt_bf16x2_f32(p[4 * t], p[4 * t + 1])
                                     : qattn_cvt_f16x2_f32(p[4 * t], p[4 * t + 1]);
        pf[t >> 1][2 * (t & 1) + 1] = BF ? qattn_cvt_bf16x2_f32(p[4 * t + 2], p[4 * t + 3])
                                         : qattn_cvt_f16x2_f32(p[4 * t + 2], p[4 * t + 3]);
    }
}

/* the O update of one key block: O = O * alpha + P.V (the block's P.V
 * accumulated from 0 by the tensor core: fp22 of e4m3, or int32 of int8
 * codes, |P.V| <= 127^2 KB < 2^22, then into fp32) */
template <int NO, typename PA>
static __device__ __forceinline__ void qattn_wgmma_o_update(float (&o)[NO][4], const PA (&pv)[NO * 4], float alA,
                                                            float alB)
{
#pragma unroll
    for (int n = 0; n < NO; n++) {
        o[n][0] = __fmaf_rn(o[n][0], alA, qattn_wgmma_pv2f(pv[4 * n]));
        o[n][1] = __fmaf_rn(o[n][1], alA, qattn_wgmma_pv2f(pv[4 * n + 1]));
        o[n][2] = __fmaf_rn(o[n][2], alB, qattn_wgmma_pv2f(pv[4 * n + 2]));
        o[n][3] = __fmaf_rn(o[n][3], alB, qattn_wgmma_pv2f(pv[4 * n + 3]));
    }
}

/* a block's P.V (issued and committed into pv) waited, its registers fenced for ptxas, and with two
 * levels (TWO) added into O */
template <int NO, int TWO, typename PA>
static __device__ __forceinline__ void qattn_wgmma_pv_finish(float (&o)[NO][4], PA *pv, float alA, float alB)
{
    qattn_wgmma_wait<0>();
#pragma unroll
    for (int x = 0; x < NO * 4; x++)
        qattn_wgmma_fence_reg(pv[x]);
    if constexpr (TWO)
        qattn_wgmma_o_update<NO>(o, *reinterpret_cast<PA(*)[NO * 4]>(pv), alA, alB);
}

/* O = O alpha, skipped by warps whose rows all kept their maxima (alpha = 1) */
template <int NO>
static __device__ __forceinline__ void qattn_wgmma_o_rescale(float (&o)[NO][4], float alA, float alB)
{
    if (__any_sync(0xffffffffu, alA != 1.0f || alB != 1.0f)) {
#pragma unroll
        for (int n = 0; n < NO; n++)
            o[n][0] *= alA, o[n][1] *= alA, o[n][2] *= alB, o[n][3] *= alB;
    }
}

/* the f16 O (pairs of the fp32 layout) times alpha as the emulation's acc=fp16 rescale
 * (qattn_num_rescale16): alpha rounded to fp16, one f16 multiply a pair; skipped like
 * qattn_wgmma_o_rescale */
template <int NO>
static __device__ __forceinline__ void qattn_wgmma_oh_rescale(uint32_t (&oh)[NO * 2], float alA, float alB)
{
    if (__any_sync(0xffffffffu, alA != 1.0f || alB != 1.0f)) {
        const uint32_t aA = qattn_cvt_f16x2_f32(alA, alA), aB = qattn_cvt_f16x2_f32(alB, alB);
#pragma unroll
        for (int n = 0; n < NO; n++) {
            oh[2 * n] = qattn_mul_f16x2(oh[2 * n], aA);
            oh[2 * n + 1] = qattn_mul_f16x2(oh[2 * n + 1], aB);
        }
    }
}

/* the f16 O (qattn_wgmma_oh_rescale's pairs) as the fp32 layout, for the epilogue */
template <int NO>
static __device__ __forceinline__ void qattn_wgmma_oh_unpack(const uint32_t (&oh)[NO * 2], float (&o)[NO][4])
{
#pragma unroll
    for (int n = 0; n < NO; n++) {
        qattn_f16x2_unpack(oh[2 * n], o[n][0], o[n][1]);
        qattn_f16x2_unpack(oh[2 * n + 1], o[n][2], o[n][3]);
    }
}

/* the P.V k-steps of an 8-bit key block (e4m3 / int8 A fragments of 32 keys, V^T from descriptor
 * dv0 + so / 16 + 2 q, so the stage's byte offset): one level (TWO = 0) into O rescaled first, two from 0 into pv (the block's
 * own accumulator); PIN: P's codes read from S's registers (acc) instead of pf; the caller commits */
template <int D, int KB, bool TWO, bool PIN, typename PA, typename SA, int N>
static __device__ __forceinline__ void qattn_wgmma_pv_issue(PA *pv, float (&o)[D / 8][4], float alA, float alB,
                                                            SA (&acc)[N], const uint32_t (&pf)[KB / 32][4], uint64_t dv0,
                                                            uint32_t so)
{
    if (!TWO)
        qattn_wgmma_o_rescale<D / 8>(o, alA, alB);
#pragma unroll
    for (int x = 0; x < D / 2; x++)
        qattn_wgmma_fence_reg(pv[x]);
    qattn_wgmma_fence();
#pragma unroll
    for (int q = 0; q < KB / 32; q++) {
        if constexpr (PIN) {
            const qattn_wg_fview<SA, N> sv{acc};
            const uint32_t a[4] = {sv.bits(4 * q), sv.bits(4 * q + 1), sv.bits(4 * q + 2), sv.bits(4 * q + 3)};
            qattn_wgmma_pv<D>(pv, a, dv0 + ((so >> 4) + 2u * q), !TWO || q > 0);
        } else {
            qattn_wgmma_pv<D>(pv, pf[q], dv0 + ((so >> 4) + 2u * q), !TWO || q > 0);
        }
    }
}

/* O = O alpha (skipped by warps whose rows kept their maxima) + P.V of KB
 * keys: 16-bit A fragments pf from registers, V's fp16 / bf16 rows of the
 * stage at shared address aV (k-steps q0.., KS keys a 128-byte slab), the
 * f16 / bf16 wgmma into the fp32 O; the caller commits */
template <int D, int KB, int KS, int BF>
static __device__ __forceinline__ void qattn_wgmma_pv16_issue(float (&o)[D / 8][4], float alA, float alB,
                                                              const uint32_t (&pf)[KB / 16][4], uint32_t aV, int q0)
{
    qattn_wgmma_o_rescale<D / 8>(o, alA, alB);
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            qattn_wgmma_fence_reg(o[n][e]);
    qattn_wgmma_fence();
#pragma unroll
    for (int q = 0; q < KB / 16; q++)
        qattn_wgmma_m64k16_rs<D, BF, 1>(&o[0][0], pf[q], qattn_wgmma_desc_sw128_mn(aV + 2048u * (uint32_t)(q0 + q), KS * 128),
                                       1);
}

/* O (f16 accumulator, the fp32 layout's pairs) = O alpha (qattn_wgmma_oh_rescale) + P.V of KB keys:
 * fp16 A fragments pf, V's fp16 rows of the stage at shared address aV (KS keys a 128-byte slab),
 * the f16 MMA (sage1-b); the caller commits. The rescale here, right before the MMAs, measured
 * faster than beside the softmax's exponentials (0.93x there, H200 2026-11-30) */
template <int D, int KB, int KS>
static __device__ __forceinline__ void qattn_wgmma_pvh_issue(uint32_t (&oh)[D / 4], float alA, float alB,
                                                             const uint32_t (&pf)[KB / 16][4], uint32_t aV)
{
    qattn_wgmma_oh_rescale<D / 8>(oh, alA, alB);
#pragma unroll
    for (int x = 0; x < D / 4; x++)
        qattn_wgmma_fence_reg(oh[x]);
    qattn_wgmma_fence();
#pragma unroll
    for (int q = 0; q < KB / 16; q++)
        qattn_wgmma_m64k16_f16acc<D>(oh, pf[q], qattn_wgmma_desc_sw128_mn(aV + 2048u * (uint32_t)q, KS * 128));
}

/* The K scales of a thread's keys, key block after key block (qattn_wg_kgroup_ok: blocks of B keys,
 * B % KB == 0, or the tensor): the scale of its keys of tile parity x in block j0 is cur[in_x], cur =
 * the groups of the B-block of j0, stepped every B / KB blocks (no division in the loop) */
template <int KB>
struct qattn_wg_kscales {
    const float *cur;
    int left, q, per, in0, in1; /* blocks left in this B-block, key blocks a B-block, groups a B-block */
    __device__ __forceinline__ qattn_wg_kscales(const qattn_group &gk, const float *ksc, int J0, int qi)
    {
        const int tens = gk.tok == QATTN_TOK_TENSOR;
        q = tens ? INT_MAX : gk.b / KB;
        per = gk.tok == QATTN_TOK_THREAD ? gk.s / gk.w : 1;
        in0 = qattn_qf_tok_index(gk, qattn_wg_key(0, qi, 0));
        in1 = qattn_qf_tok_index(gk, qattn_wg_key(1, qi, 0));
        left = tens ? INT_MAX : q - (J0 / KB) % q;
        cur = ksc + (tens ? 0 : (J0 / KB) / q * per);
    }
    __device__ __forceinline__ void next()
    {
        if (--left == 0) {
            left = q;
            cur += per;
        }
    }
};

/* a two-level block's P.V in two halves of D / 2 channels (V^T rows 64 hf.. at 64 hf KB bytes from
 * descriptor dv), each from 0 into pvb, waited and added into O: half the P.V registers */
template <int D, int KB, typename PA>
static __device__ __forceinline__ void qattn_wgmma_pv_halves(float (&o)[D / 8][4], PA (&pvb)[D / 4],
                                                             const uint32_t (&pf)[KB / 32][4], uint64_t dv, float alA,
                                                             float alB)
{
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
#pragma unroll
        for (int x = 0; x < D / 4; x++)
            qattn_wgmma_fence_reg(pvb[x]);
        qattn_wgmma_fence();
#pragma unroll
        for (int q = 0; q < KB / 32; q++)
            qattn_wgmma_pv<D / 2>(pvb, pf[q], dv + (uint32_t)(4 * KB * hf) + 2u * q, q > 0);
        qattn_wgmma_commit();
        qattn_wgmma_wait<0>();
#pragma unroll
        for (int x = 0; x < D / 4; x++)
            qattn_wgmma_fence_reg(pvb[x]);
        qattn_wgmma_o_update<D / 16>(*reinterpret_cast<float(*)[D / 16][4]>(&o[D / 16 * hf][0]), pvb, alA, alB);
    }
}

#endif
