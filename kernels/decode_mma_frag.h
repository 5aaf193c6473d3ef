/* Decode family, NVIDIA mma.sync path: the split kernel's register fragments
 * (decode_mma.h): P packed to the MMA type, the m16n8k16 MMA by type, 8-bit
 * K and V codes widened exactly to fp16 in registers, and Q's A fragments
 * (fetched from global memory or staged in shared memory, channels permuted
 * for 8-bit caches). */
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

/* int8 codes x are widened to x + QATTN_DMMA_I8_BIAS in fp16 (exact): the MMAs' sums carry
 * the bias times the other operand's sum, taken off per row (S: the accumulators start at
 * -bias x the row's Q sum; O: bias x the row's P sum, from an MMA by a column of ones) */
#define QATTN_DMMA_I8_BIAS 1152.0f
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

/* Q's raw elements (16-bit patterns or fp32 bits) for the A fragments of rows
 * g (at qa_at, valid va) and g + 8 (qb_at, vb): loads only, converted by
 * qattn_dmma_pack_q after the cache's first copies are issued, so that Q's
 * latency is not ahead of theirs. 8-bit caches: lane t4 reads K's channels
 * 16 ks + 4 t4 .. + 3 as one word, so Q's channels are permuted to match (a
 * dot product is the same under a permutation both operands take) */
template <int D, int ELT, int IN>
static __device__ __forceinline__ void qattn_dmma_fetch_q(uint32_t (*x)[2][4], const void *q, int64_t qa_at,
                                                          int64_t qb_at, int va, int vb, int t4, int words)
{
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int c = ELT == 2 ? ks * 16 + half * 8 + 2 * t4 : ks * 16 + 4 * t4 + 2 * half;
            if (IN != QATTN_FMT_FP32 && !words) { /* odd strides or a 2-byte-aligned tensor */
                const uint16_t *qh = (const uint16_t *)q;
                x[ks][half][0] = va ? qh[qa_at + c] | (uint32_t)qh[qa_at + c + 1] << 16 : 0u;
                x[ks][half][2] = vb ? qh[qb_at + c] | (uint32_t)qh[qb_at + c + 1] << 16 : 0u;
            } else if (IN == QATTN_FMT_FP32) {
                const uint32_t *qw = (const uint32_t *)q;
                x[ks][half][0] = va ? qw[qa_at + c] : 0u;
                x[ks][half][1] = va ? qw[qa_at + c + 1] : 0u;
                x[ks][half][2] = vb ? qw[qb_at + c] : 0u;
                x[ks][half][3] = vb ? qw[qb_at + c + 1] : 0u;
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
template <int D, int ELT, int QT, int IN, int QR>
static __device__ __forceinline__ void qattn_dmma_load_q(uint32_t (*qa)[4], const unsigned char *qsm, int lane)
{
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        if (ELT == 2) {
            qattn_ldmatrix_x4(qa[ks], qsm + (lane & 15) * QR + (ks * 16 + 8 * (lane >> 4)) * 2);
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
