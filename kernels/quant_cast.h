/* Quantization, fast path: the unscaled casts (route `cast`): fp16 / bf16
 * input to fp16 / bf16 / fp32 rows, no smoothing: the operands of the
 * baseline schemes when the input is of another dtype (bf16 from fp16
 * input). The same values and NaN flag as the portable encode kernel (the
 * input decoded exactly, then qattn_num_*_encode), but 8 channels a piece
 * by one 16-byte load and one 16-byte store (fp32: two), 4 pieces a thread,
 * where the portable kernel moves 2 bytes a thread through an integer
 * division. */
#ifndef QATTN_KERNELS_QUANT_CAST_H
#define QATTN_KERNELS_QUANT_CAST_H

#include <limits.h>

#include "quant_codes.h"    /* qattn_qf_dec, qattn_qf_nonfin */
#include "quant_portable.h" /* qattn_quant_seq */

#define QATTN_QC_THREADS 256
#define QATTN_QC_PIECES 4 /* 16-byte pieces a thread */

/* whether the cast kernel takes p: an unscaled storage format, no
 * smoothing, rows, 8-channel pieces 16-byte aligned in the input and the
 * codes, and a (sequence, head)'s pieces countable in 31 bits */
static inline int qattn_qc_takes(const qattn_kernels_quant_params &p)
{
    if (p.fmt != QATTN_FMT_FP16 && p.fmt != QATTN_FMT_BF16 && p.fmt != QATTN_FMT_FP32)
        return 0;
    if (p.in != QATTN_FMT_FP16 && p.in != QATTN_FMT_BF16)
        return 0;
    if (p.scale || p.mean || p.smooth != QATTN_KERNELS_SMOOTH_NONE || p.layout != QATTN_KERNELS_LAYOUT_ROWS)
        return 0;
    if (p.d <= 0 || p.d % 8 || p.row != p.d || p.seqlen < 0 || (int64_t)p.seqlen * (p.d / 8) >= INT_MAX)
        return 0;
    return !(((uintptr_t)p.x & 15) | ((uintptr_t)p.codes & 15) | ((p.x_stride_batch | p.x_stride_head | p.x_stride_tok) & 7));
}

/* grid (pieces of a (sequence, head) / (QATTN_QC_THREADS QATTN_QC_PIECES), heads, nseq): thread
 * x of block k casts pieces i = k T P + x + j T (j < P): channels 8 (i % (d / 8)) .. + 7 of token
 * i / (d / 8), all P loads issued before the first store (one 16-byte load in flight a thread left
 * the kernel at 0.42-0.55 of the copy, H200); codes NULL: the NaN check alone */
template <int IN, int FMT>
__global__ void __launch_bounds__(QATTN_QC_THREADS) qattn_qc_cast_kernel(qattn_kernels_quant_params p)
{
    qattn_port_dependents_go(); /* a kernel launched to overlap this one may start its blocks */
    const int h = (int)blockIdx.y, b = (int)blockIdx.z;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const unsigned per_tok = (unsigned)p.d / 8u, i0 = blockIdx.x * (QATTN_QC_THREADS * QATTN_QC_PIECES) + threadIdx.x;
    const uint16_t *xb = (const uint16_t *)p.x + (int64_t)b * p.x_stride_batch + (int64_t)h * p.x_stride_head;
    uint4 raw[QATTN_QC_PIECES];
    unsigned tok[QATTN_QC_PIECES], ch[QATTN_QC_PIECES];
    QATTN_UNROLL
    for (int j = 0; j < QATTN_QC_PIECES; j++) {
        const unsigned i = i0 + (unsigned)j * QATTN_QC_THREADS;
        tok[j] = i / per_tok, ch[j] = (i - tok[j] * per_tok) * 8u;
        if ((int64_t)tok[j] < n)
            raw[j] = *(const uint4 *)(xb + (t0 + tok[j]) * p.x_stride_tok + ch[j]);
        else
            raw[j].x = raw[j].y = raw[j].z = raw[j].w = 0u;
    }
    unsigned bad = 0u;
    QATTN_UNROLL
    for (int j = 0; j < QATTN_QC_PIECES; j++) {
        if ((int64_t)tok[j] >= n)
            break;
        bad |= qattn_qf_nonfin<IN>(raw[j]);
        float v[8];
        QATTN_UNROLL
        for (int e = 0; e < 8; e++)
            v[e] = qattn_qf_dec<IN>(raw[j], e);
        if (!p.codes)
            continue;
        const int64_t out = ((int64_t)h * p.tokens + toff + tok[j]) * p.row + ch[j];
        if (FMT == QATTN_FMT_FP32) {
            float4 *o = (float4 *)((float *)p.codes + out);
            float4 a, z;
            a.x = v[0], a.y = v[1], a.z = v[2], a.w = v[3];
            z.x = v[4], z.y = v[5], z.z = v[6], z.w = v[7];
            o[0] = a;
            o[1] = z;
        } else {
            uint32_t pk[4];
            QATTN_UNROLL
            for (int e = 0; e < 4; e++) {
                const uint32_t lo =
                    FMT == QATTN_FMT_BF16 ? qattn_num_bf16_encode(v[2 * e]) : qattn_num_fp16_encode(v[2 * e]);
                const uint32_t hi =
                    FMT == QATTN_FMT_BF16 ? qattn_num_bf16_encode(v[2 * e + 1]) : qattn_num_fp16_encode(v[2 * e + 1]);
                pk[e] = lo | hi << 16;
            }
            uint4 q;
            q.x = pk[0], q.y = pk[1], q.z = pk[2], q.w = pk[3];
            *(uint4 *)((uint16_t *)p.codes + out) = q;
        }
    }
    if ((bad & QATTN_QF_NONFIN_BITS) && p.nonfinite)
        atomicOr(p.nonfinite, 1);
}

template <int IN>
static int qattn_qc_launch(const qattn_kernels_quant_params &p, hipStream_t st, qattn_err *err)
{
    const int64_t pieces = (int64_t)p.seqlen * (p.d / 8);
    void (*k)(qattn_kernels_quant_params) = p.fmt == QATTN_FMT_BF16   ? &qattn_qc_cast_kernel<IN, QATTN_FMT_BF16>
                                            : p.fmt == QATTN_FMT_FP16 ? &qattn_qc_cast_kernel<IN, QATTN_FMT_FP16>
                                                                      : &qattn_qc_cast_kernel<IN, QATTN_FMT_FP32>;
    qattn_port_launch_overlap(p.overlap, k,
                              dim3((unsigned)((pieces + QATTN_QC_THREADS * QATTN_QC_PIECES - 1) /
                                              (QATTN_QC_THREADS * QATTN_QC_PIECES)),
                                   (unsigned)p.heads, (unsigned)p.nseq),
                              dim3(QATTN_QC_THREADS), 0, st, p);
    QATTN_QUANT_CHECK(hipGetLastError(), "quant cast kernel launch");
    return QATTN_OK;
}

#endif
