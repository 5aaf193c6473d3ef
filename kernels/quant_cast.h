/* Quantization, fast path: the unscaled casts (route `cast`): fp16 / bf16
 * input to fp16 / bf16 / fp32 rows, no smoothing: the operands of the
 * baseline schemes when the input is of another dtype (bf16 from fp16
 * input). The same values and NaN flag as the portable encode kernel (the
 * input decoded exactly, then qattn_num_*_encode), but 8 channels a thread
 * by one 16-byte load and one 16-byte store (fp32: two), where the portable
 * kernel moves 2 bytes a thread through an integer division. */
#ifndef QATTN_KERNELS_QUANT_CAST_H
#define QATTN_KERNELS_QUANT_CAST_H

#include <limits.h>

#include "quant_portable.h" /* qattn_quant_seq */

#define QATTN_QC_THREADS 256

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

/* grid (pieces of a (sequence, head) / QATTN_QC_THREADS, heads, nseq): thread i casts channels
 * 8 (i % (d / 8)) .. + 7 of token i / (d / 8); codes NULL: the NaN check alone */
template <int IN, int FMT>
__global__ void __launch_bounds__(QATTN_QC_THREADS) qattn_qc_cast_kernel(qattn_kernels_quant_params p)
{
    qattn_port_dependents_go(); /* a kernel launched to overlap this one may start its blocks */
    const int h = (int)blockIdx.y, b = (int)blockIdx.z;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const unsigned per_tok = (unsigned)p.d / 8u, i = blockIdx.x * QATTN_QC_THREADS + threadIdx.x;
    const unsigned t = i / per_tok, c = (i - t * per_tok) * 8u;
    if ((int64_t)t >= n)
        return;
    const uint16_t *x = (const uint16_t *)p.x + (int64_t)b * p.x_stride_batch + (int64_t)h * p.x_stride_head +
                        (t0 + t) * p.x_stride_tok + c;
    const uint4 raw = *(const uint4 *)x;
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    float v[8];
    unsigned bad = 0u;
    QATTN_UNROLL
    for (int e = 0; e < 8; e++) {
        const uint16_t u = (uint16_t)(w[e >> 1] >> (16 * (e & 1)));
        v[e] = IN == QATTN_FMT_BF16 ? qattn_num_bf16_decode(u) : qattn_num_fp16_decode(u);
        bad |= (qattn_num_f2u(v[e]) & QATTN_NUM_INF) == QATTN_NUM_INF;
    }
    if (bad && p.nonfinite)
        atomicOr(p.nonfinite, 1);
    if (!p.codes)
        return;
    const int64_t out = ((int64_t)h * p.tokens + toff + t) * p.row + c;
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
            const uint32_t lo = FMT == QATTN_FMT_BF16 ? qattn_num_bf16_encode(v[2 * e]) : qattn_num_fp16_encode(v[2 * e]);
            const uint32_t hi =
                FMT == QATTN_FMT_BF16 ? qattn_num_bf16_encode(v[2 * e + 1]) : qattn_num_fp16_encode(v[2 * e + 1]);
            pk[e] = lo | hi << 16;
        }
        uint4 q;
        q.x = pk[0], q.y = pk[1], q.z = pk[2], q.w = pk[3];
        *(uint4 *)((uint16_t *)p.codes + out) = q;
    }
}

template <int IN>
static int qattn_qc_launch(const qattn_kernels_quant_params &p, hipStream_t st, qattn_err *err)
{
    const int64_t pieces = (int64_t)p.seqlen * (p.d / 8);
    void (*k)(qattn_kernels_quant_params) = p.fmt == QATTN_FMT_BF16   ? &qattn_qc_cast_kernel<IN, QATTN_FMT_BF16>
                                            : p.fmt == QATTN_FMT_FP16 ? &qattn_qc_cast_kernel<IN, QATTN_FMT_FP16>
                                                                      : &qattn_qc_cast_kernel<IN, QATTN_FMT_FP32>;
    qattn_port_launch_overlap(p.overlap, k,
                              dim3((unsigned)((pieces + QATTN_QC_THREADS - 1) / QATTN_QC_THREADS), (unsigned)p.heads,
                                   (unsigned)p.nseq),
                              dim3(QATTN_QC_THREADS), 0, st, p);
    QATTN_QUANT_CHECK(hipGetLastError(), "quant cast kernel launch");
    return QATTN_OK;
}

#endif
