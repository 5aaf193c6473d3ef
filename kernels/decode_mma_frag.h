/* Decode family, NVIDIA mma.sync path: the split kernel's register fragments
 * (decode_mma.h): P packed to the MMA type, the m16n8k16 MMA by type, 8-bit
 * and int4 K and V codes widened exactly to fp16 in registers, a chunk's
 * Q.K and P.V by cache format (the rows' swizzle in shared memory), and Q's
 * A fragments (fetched from global memory or staged in shared memory,
 * channels permuted for 8-bit and int4 caches). */
#ifndef QATTN_KERNELS_DECODE_MMA_FRAG_H
#define QATTN_KERNELS_DECODE_MMA_FRAG_H

#include "decode_portable.h"
#include "mma_nvidia.h"

/* a compile-time flag as a value, for generic lambdas (if constexpr on decltype(flag)::value) */
template <int V>
struct qattn_dmma_flag {
    static const int value = V;
};

/* f16x2 / bf16x2 of two floats, low half first */
template <int QT>
static __device__ __forceinline__ uint32_t qattn_dmma_pack(float lo, float hi)
{
    return QT == QATTN_FMT_BF16 ? qattn_cvt_bf16x2_f32(lo, hi) : qattn_cvt_f16x2_f32(lo, hi);
}

template <int QT>
static __device__ __forceinline__ void qattn_dmma_mma(float *d, const uint32_t *a, const uint32_t *b)
{
    if (QT == QATTN_FMT_BF16)
        qattn_mma_m16n8k16_bf16_f32(d, a, b, d);
    else
        qattn_mma_m16n8k16_f16_f32(d, a, b, d);
}

/* int8 codes x are widened to x + QATTN_DMMA_I8_BIAS in fp16 (exact), int4 K codes to
 * x + QATTN_DMMA_I4K_BIAS and int4 V codes to x + QATTN_DMMA_I4_BIAS: the MMAs' sums carry the
 * bias times the other operand's sum, taken off per row (S: the accumulators start at -bias x
 * the row's Q sum; O: bias x the row's P sum, from an MMA by a column of ones). K's bias is
 * what decides S's rounding: int4 K with V's 1032 (bias / code 129, int8's 9) missed LSE by
 * 1-3.5e-4 (H200, 2026-12-03; tolerance 1e-4), hence 24 for K (bias / code 3) */
#define QATTN_DMMA_I8_BIAS 1152.0f
#define QATTN_DMMA_I4_BIAS 1032.0f
#define QATTN_DMMA_I4K_BIAS 24.0f
/* the bias of a cache format's widened K (KB) and V (VB) codes (0: unbiased) */
template <int CF>
struct qattn_dmma_bias {
    static constexpr float KB = CF == QATTN_FMT_INT8 ? QATTN_DMMA_I8_BIAS : CF == QATTN_FMT_INT4 ? QATTN_DMMA_I4K_BIAS : 0.0f;
    static constexpr float VB = CF == QATTN_FMT_INT8 ? QATTN_DMMA_I8_BIAS : CF == QATTN_FMT_INT4 ? QATTN_DMMA_I4_BIAS : 0.0f;
};
/* Q's channel order for the cache's K fragments: 16-bit caches natural (0), 8-bit caches
 * 16 ks + 4 t4 .. + 3 (1), int4 the pairs qattn_dmma_widen_i4k gives (2) */
template <int CF>
struct qattn_dmma_qperm {
    static const int value = (CF == QATTN_FMT_FP16 || CF == QATTN_FMT_BF16) ? 0 : CF == QATTN_FMT_INT4 ? 2 : 1;
};
/* int4 V: the fp16 pair of nibbles i and i + 4 of w (low half first), code + 1032 exactly: a
 * nibble u ^ 8 = code + 8 under 0x64 is 1024 + code + 8 (one LOP3 after the shift); from
 * ldmatrix .trans of b16 = 4 channels, keys 2 t4 and 2 t4 + 1 of channel 4 g + i */
static __device__ __forceinline__ uint32_t qattn_dmma_widen_i4(uint32_t w, int i)
{
    return ((w >> (4 * i)) & 0x000f000fu) ^ 0x64086408u;
}
/* int4 K: nibbles I and I + 4 of w as code + 24 (QATTN_DMMA_I4K_BIAS), moved to bits 6-9 and
 * 22-25 under 0x4c (16.0, whose ulp there is 1); one shift and one LOP3. A word of 8 channels
 * c .. c + 7 gives the pairs (c + I, c + I + 4) */
template <int I>
static __device__ __forceinline__ uint32_t qattn_dmma_widen_i4k(uint32_t w)
{
    const uint32_t x = I < 2 ? w << (6 - 4 * I) : w >> (4 * I - 6);
    return (x & 0x03c003c0u) ^ 0x4e004e00u;
}
/* bytes (A0, A1) and (B0, B1) of the word w, 8-bit codes, as two fp16 pairs
 * (low half first), exactly (int8: biased) */
template <int CF, int A0, int A1, int B0, int B1>
static __device__ __forceinline__ void qattn_dmma_widen_sel(uint32_t w, uint32_t *a, uint32_t *b)
{
    if (CF == QATTN_FMT_INT8) {
        /* 0x64XX is 1024 + XX in fp16: (x + 128) as a byte under 0x64 */
        const uint32_t u = w ^ 0x80808080u;
        asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(*a) : "r"(u), "r"(0x64646464u), "n"(0x4040 | A0 | A1 << 8));
        asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(*b) : "r"(u), "r"(0x64646464u), "n"(0x4040 | B0 | B1 << 8));
    } else {
        uint32_t x, y;
        asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(x) : "r"(w), "n"(0x4400 | A0 | A1 << 4));
        asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(y) : "r"(w), "n"(0x4400 | B0 | B1 << 4));
        *a = qattn_cvt_f16x2_e4m3x2(x);
        *b = qattn_cvt_f16x2_e4m3x2(y);
    }
}
/* four 8-bit codes to four fp16 (two f16x2 words, codes 0-1 and 2-3; int8: biased) */
template <int CF>
static __device__ __forceinline__ void qattn_dmma_widen4(uint32_t w, uint32_t *lo, uint32_t *hi)
{
    qattn_dmma_widen_sel<CF, 0, 1, 2, 3>(w, lo, hi);
}
/* the word w = bytes (a0, a1, b0, b1) of two keys' channels c, c + 1 (as
 * ldmatrix .trans gives them) into the fp16 pairs (a0, b0) and (a1, b1) */
template <int CF>
static __device__ __forceinline__ void qattn_dmma_widen_pairs(uint32_t w, uint32_t *even, uint32_t *odd)
{
    qattn_dmma_widen_sel<CF, 0, 2, 1, 3>(w, even, odd);
}

/* byte offset x of key `key`'s loaded row (ROWB bytes) within the row as stored: rows of 128
 * bytes or more, 16-byte piece p at p ^ (key & 7) (within the piece's 128 bytes); rows of 64 (two
 * a 128-byte line), p ^ ((key >> 1) & 3). Eight consecutive keys' piece p: eight distinct 16-byte
 * slots of the banks */
template <int ROWB>
static __device__ __forceinline__ int qattn_dmma_swz(int key, int x)
{
    static_assert(ROWB % 128 == 0 || ROWB == 64, "rows of 64 bytes or a multiple of 128");
    return ROWB == 64 ? x ^ (((key >> 1) & 3) << 4) : x ^ ((key & 7) << 4);
}

/* S += Q K^T over one chunk of KC keys (n-tiles of 8 keys; s starts at the rows' K bias): K's rows
 * at kt as loaded (ROWB bytes, swizzled), Q's A fragments qa in the cache's channel order
 * (qattn_dmma_qperm); 16-bit caches by ldmatrix, the coded ones widened in registers */
template <int D, int CF, int QT, int KC, int ROWB>
static __device__ __forceinline__ void qattn_dmma_chunk_qk(float (*s)[4], const uint32_t (*qa)[4],
                                                           const unsigned char *kt, int lane)
{
    constexpr int NJ = KC / 8;
    constexpr bool ELT2 = CF == QATTN_FMT_FP16 || CF == QATTN_FMT_BF16, I4 = CF == QATTN_FMT_INT4;
    if (ELT2) {
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
            for (int j = 0; j < NJ; j += 2) {
                uint32_t bf[4];
                const int key = 8 * (j + (lane >> 4)) + (lane & 7), ch = 16 * ks + 8 * ((lane >> 3) & 1);
                qattn_ldmatrix_x4(bf, kt + key * ROWB + qattn_dmma_swz<ROWB>(key, ch * 2));
                qattn_dmma_mma<QT>(s[j], qa[ks], bf);
                qattn_dmma_mma<QT>(s[j + 1], qa[ks], bf + 2);
            }
    } else if constexpr (I4) {
        /* one word of 8 codes per two k-steps: key 8 j + g, channels 32 m + 8 t4 .. + 7, by
         * ldmatrix .x4 of piece m of the four n-tiles' keys (the tiles' MMA chains interleaved);
         * k-step 2 m + h takes the nibble pairs 2 h, 2 h + 1 */
        static_assert(D == 128 && NJ == 4, "int4 rows of 64 bytes, 32-key chunks: d = 128");
#pragma unroll
        for (int m = 0; m < 4; m++) {
            uint32_t w[4];
            const int key = lane; /* matrix j = lane / 8: keys 8 j .. 8 j + 7 */
            qattn_ldmatrix_x4(w, kt + key * ROWB + qattn_dmma_swz<ROWB>(key, 16 * m));
#pragma unroll
            for (int j = 0; j < NJ; j++) {
                const uint32_t b0[2] = {qattn_dmma_widen_i4k<0>(w[j]), qattn_dmma_widen_i4k<1>(w[j])};
                qattn_dmma_mma<QT>(s[j], qa[2 * m], b0);
            }
#pragma unroll
            for (int j = 0; j < NJ; j++) {
                const uint32_t b1[2] = {qattn_dmma_widen_i4k<2>(w[j]), qattn_dmma_widen_i4k<3>(w[j])};
                qattn_dmma_mma<QT>(s[j], qa[2 * m + 1], b1);
            }
        }
    } else { /* one word of 4 codes per k-step: key 8 j + g, channels 16 ks + 4 t4 .. + 3, by
              * ldmatrix .x2 of two k-steps' pieces (lanes 8m .. 8m + 7, m < 2: k-step ks0 + m's
              * piece of keys 8 j .. 8 j + 7; register m of lane 4 g + t4 = that word; .x4 of four
              * k-steps spilled at d = 128 in 12 warps) */
#pragma unroll
        for (int ks0 = 0; ks0 < D / 16; ks0 += 2)
#pragma unroll
            for (int j = 0; j < NJ; j++) {
                uint32_t w[2];
                const int key = 8 * j + (lane & 7);
                qattn_ldmatrix_x2(w, kt + key * ROWB +
                                         qattn_dmma_swz<ROWB>(key, 16 * (ks0 + ((lane >> 3) & 1))));
#pragma unroll
                for (int m = 0; m < 2; m++) {
                    uint32_t bf[2];
                    qattn_dmma_widen4<CF>(w[m], &bf[0], &bf[1]);
                    qattn_dmma_mma<QT>(s[j], qa[ks0 + m], bf);
                }
            }
    }}

/* O += P V over one chunk (k-blocks of 16 keys; pa: P as the A fragments), V's rows at vt as loaded;
 * pb += P's row sums where V's codes are biased (qattn_dmma_bias) */
template <int D, int CF, int QT, int KC, int ROWB>
static __device__ __forceinline__ void qattn_dmma_chunk_pv(float (*o)[4], float *pb, const uint32_t (*pa)[4],
                                                           const unsigned char *vt, int lane)
{
    constexpr int NK = KC / 16, NT = D / 8;
    constexpr bool ELT2 = CF == QATTN_FMT_FP16 || CF == QATTN_FMT_BF16, I4 = CF == QATTN_FMT_INT4;
    (void)pb;
    if (ELT2) {
#pragma unroll
        for (int kk = 0; kk < NK; kk++)
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
                uint32_t bf[4];
                const int key = 16 * kk + 8 * ((lane >> 3) & 1) + (lane & 7), ch = 8 * (n + (lane >> 4));
                qattn_ldmatrix_x4_trans(bf, vt + key * ROWB + qattn_dmma_swz<ROWB>(key, ch * 2));
                qattn_dmma_mma<QT>(o[n], pa[kk], bf);
                qattn_dmma_mma<QT>(o[n + 1], pa[kk], bf + 2);
            }
    } else {
        /* coded V straight from the loaded rows, ldmatrix .trans of 8 keys x 8 b16 elements of a
         * 16-byte segment (lanes 16 s .. 16 s + 15: segment 2 s2 + s, keys 0-7 then 8-15).
         * 8-bit: lane (g, t4) gets the channels 2g, 2g + 1 of keys 2 t4, 2 t4 + 1, split by prmt
         * into the B fragments of two n-tiles: tile 2 s + x holds the channels 16 s + 2 c + x
         * (c = 0..7) of segment s. int4: the channels 4 g .. 4 g + 3 of a 32-channel segment;
         * nibble i is the B fragment of n-tile 4 s + i (its column g: channel 32 s + 4 g + i).
         * O's columns permuted so; the merge puts them back */
#pragma unroll
        for (int kk = 0; kk < NK; kk++) {
            if constexpr (qattn_dmma_bias<CF>::VB != 0.0f) {
                const uint32_t ones[2] = {0x3c003c00u, 0x3c003c00u};
                qattn_dmma_mma<QT>(pb, pa[kk], ones);
            }
#pragma unroll
            for (int s2 = 0; s2 < ROWB / 32; s2++) {
                uint32_t r[4];
                const int key = 16 * kk + 8 * ((lane >> 3) & 1) + (lane & 7), seg = 2 * s2 + (lane >> 4);
                qattn_ldmatrix_x4_trans(r, vt + key * ROWB + qattn_dmma_swz<ROWB>(key, seg * 16));
#pragma unroll
                for (int h = 0; h < 2; h++) { /* segment 2 s2 + h: r[2h] keys 0-7, r[2h + 1] keys 8-15 */
                    if constexpr (I4) {
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            const uint32_t bf[2] = {qattn_dmma_widen_i4(r[2 * h], i), qattn_dmma_widen_i4(r[2 * h + 1], i)};
                            qattn_dmma_mma<QT>(o[4 * (2 * s2 + h) + i], pa[kk], bf);
                        }
                    } else {
                        uint32_t even[2], odd[2];
#pragma unroll
                        for (int x = 0; x < 2; x++)
                            qattn_dmma_widen_pairs<CF>(r[2 * h + x], &even[x], &odd[x]);
                        qattn_dmma_mma<QT>(o[4 * s2 + 2 * h], pa[kk], even);
                        qattn_dmma_mma<QT>(o[4 * s2 + 2 * h + 1], pa[kk], odd);
                    }
                }
            }
        }
    }
}

/* Q's raw elements (16-bit patterns or fp32 bits) for the A fragments of rows
 * g (at qa_at, valid va) and g + 8 (qb_at, vb): loads only, converted by
 * qattn_dmma_pack_q after the cache's first copies are issued, so that Q's
 * latency is not ahead of theirs. 8-bit caches: lane t4 reads K's channels
 * 16 ks + 4 t4 .. + 3 as one word, so Q's channels are permuted to match (a
 * dot product is the same under a permutation both operands take) */
template <int D, int QP, int IN>
static __device__ __forceinline__ void qattn_dmma_fetch_q(uint32_t (*x)[2][4], const void *q, int64_t qa_at,
                                                          int64_t qb_at, int va, int vb, int t4, int words)
{
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            /* the pair's channels c and c1 (QP, qattn_dmma_qperm) */
            const int c = QP == 0   ? ks * 16 + half * 8 + 2 * t4
                          : QP == 1 ? ks * 16 + 4 * t4 + 2 * half
                                    : 32 * (ks >> 1) + 8 * t4 + 2 * (ks & 1) + half;
            const int c1 = c + (QP == 2 ? 4 : 1);
            if (IN != QATTN_FMT_FP32 && (!words || QP == 2)) { /* odd strides, a 2-byte-aligned tensor, int4's pairs */
                const uint16_t *qh = (const uint16_t *)q;
                x[ks][half][0] = va ? qh[qa_at + c] | (uint32_t)qh[qa_at + c1] << 16 : 0u;
                x[ks][half][2] = vb ? qh[qb_at + c] | (uint32_t)qh[qb_at + c1] << 16 : 0u;
            } else if (IN == QATTN_FMT_FP32) {
                const uint32_t *qw = (const uint32_t *)q;
                x[ks][half][0] = va ? qw[qa_at + c] : 0u;
                x[ks][half][1] = va ? qw[qa_at + c1] : 0u;
                x[ks][half][2] = vb ? qw[qb_at + c] : 0u;
                x[ks][half][3] = vb ? qw[qb_at + c1] : 0u;
            } else { /* two 16-bit elements as one word (c is even) */
                const uint32_t *qa2 = (const uint32_t *)((const uint16_t *)q + qa_at + c);
                const uint32_t *qb2 = (const uint32_t *)((const uint16_t *)q + qb_at + c);
                x[ks][half][0] = va ? *qa2 : 0u;
                x[ks][half][2] = vb ? *qb2 : 0u;
            }
        }
}

/* element k (0, 1) of a fetched pair as float */
template <int IN>
static __device__ __forceinline__ float qattn_dmma_q_float(const uint32_t *w, int k)
{
    if (IN == QATTN_FMT_FP32)
        return __uint_as_float(w[k]);
    const uint16_t h = (uint16_t)(w[0] >> (16 * k));
    return IN == QATTN_FMT_BF16 ? qattn_num_bf16_decode(h) : qattn_num_fp16_decode(h);
}

/* the A fragments from qattn_dmma_fetch_q's elements, rounded to the MMA type
 * (a 16-bit query of the MMA's type as it is) */
template <int D, int QT, int IN>
static __device__ __forceinline__ void qattn_dmma_pack_q(uint32_t (*qa)[4], const uint32_t (*x)[2][4])
{
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
        for (int half = 0; half < 2; half++)
#pragma unroll
            for (int rb = 0; rb < 2; rb++) {
                const uint32_t *w = &x[ks][half][2 * rb];
                qa[ks][half * 2 + rb] = IN == QT ? w[0]
                                                 : qattn_dmma_pack<QT>(qattn_dmma_q_float<IN>(w, 0),
                                                                       qattn_dmma_q_float<IN>(w, 1));
            }
}

/* the A fragments from Q staged in shared memory ([16][QR] bytes, 16-bit elements
 * of type IN): 16-bit caches (IN = QT) by ldmatrix; 8-bit caches (fp16 MMA) with
 * the permuted channels of qattn_dmma_fetch_q, four elements a row and k-step */
template <int D, int QP, int QT, int IN, int QR>
static __device__ __forceinline__ void qattn_dmma_load_q(uint32_t (*qa)[4], const unsigned char *qsm, int lane)
{
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        if (QP == 0) {
            qattn_ldmatrix_x4(qa[ks], qsm + (lane & 15) * QR + (ks * 16 + 8 * (lane >> 4)) * 2);
        } else if (QP == 2) { /* int4: elements c0, c0 + 4 (half 0) and c0 + 1, c0 + 5 (half 1) */
#pragma unroll
            for (int rb = 0; rb < 2; rb++) {
                const int c0 = 32 * (ks >> 1) + 8 * t4 + 2 * (ks & 1);
                const uint32_t w0 = *(const uint32_t *)(qsm + (g + 8 * rb) * QR + c0 * 2);
                const uint32_t w4 = *(const uint32_t *)(qsm + (g + 8 * rb) * QR + (c0 + 4) * 2);
                uint32_t h[2] = {qattn_port_byte_perm(w0, w4, 0x5410u), qattn_port_byte_perm(w0, w4, 0x7632u)};
#pragma unroll
                for (int half = 0; half < 2; half++)
                    qa[ks][2 * half + rb] = IN == QT ? h[half]
                                                     : qattn_dmma_pack<QT>(qattn_dmma_q_float<IN>(&h[half], 0),
                                                                           qattn_dmma_q_float<IN>(&h[half], 1));
            }
        } else {
#pragma unroll
            for (int rb = 0; rb < 2; rb++) {
                const uint2 w = *(const uint2 *)(qsm + (g + 8 * rb) * QR + (ks * 16 + 4 * t4) * 2);
                if (IN == QT) {
                    qa[ks][rb] = w.x, qa[ks][2 + rb] = w.y;
                } else {
                    qa[ks][rb] = qattn_dmma_pack<QT>(qattn_dmma_q_float<IN>(&w.x, 0), qattn_dmma_q_float<IN>(&w.x, 1));
                    qa[ks][2 + rb] = qattn_dmma_pack<QT>(qattn_dmma_q_float<IN>(&w.y, 0), qattn_dmma_q_float<IN>(&w.y, 1));
                }
            }
        }
    }
}

#endif
