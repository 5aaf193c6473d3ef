/* Quantization family, portable path (plain HIP): smoothing means, group
 * amax, codes, scales, for one operand; instances are generated per input
 * dtype (kernels/gen_instances.sh).
 *
 * It computes exactly what quant/src (smooth.c, qtensor.c) computes:
 *   1. mean: per channel, over all tokens of a sequence (K, V) or over blocks
 *      of mblock tokens (Q), accumulated in double in token order, then
 *      rounded to fp32 (one thread per channel walks the tokens in order);
 *   2. amax: max |x - mean| per scale group (order-free, so atomics are exact);
 *   3. codes: x - mean divided by the group scale amax / qmax, rounded to
 *      nearest even and saturated by the shared encoders (qattn/numerics.h);
 *   4. scales: amax replaced in place by amax / qmax (e8m0: rounded up).
 * Four launches, stream-ordered (a fifth clears LAYOUT_TRANSPOSED codes:
 * [heads, nseq, d, npad], zero past each sequence). The fast path
 * (quant_fast.h) fuses them per tile and falls back to these kernels for
 * what it does not take. */
#ifndef QATTN_KERNELS_QUANT_PORTABLE_H
#define QATTN_KERNELS_QUANT_PORTABLE_H

#include "hip_port.h"
#include "qattn/numerics.h"
#include "qattn_kernels.h"

#define QATTN_QUANT_THREADS 256

/* element (b, h, t, c) of the input, as fp32 (exact for fp16 / bf16) */
template <int IN>
static __device__ __forceinline__ float qattn_quant_load(const qattn_kernels_quant_params &p, int64_t base,
                                                         int64_t t, int c)
{
    int64_t e = base + t * p.x_stride_tok + c;
    if (IN == QATTN_FMT_FP16)
        return qattn_num_fp16_decode(((const uint16_t *)p.x)[e]);
    if (IN == QATTN_FMT_BF16)
        return qattn_num_bf16_decode(((const uint16_t *)p.x)[e]);
    return ((const float *)p.x)[e];
}

/* sequence b: first token t0 in the input, length n, token offset in codes */
static __device__ __forceinline__ void qattn_quant_seq(const qattn_kernels_quant_params &p, int b, int64_t *t0,
                                                       int64_t *n, int64_t *toff)
{
    if (p.cu_seqlens) {
        *t0 = p.cu_seqlens[b];
        *n = p.cu_seqlens[b + 1] - *t0;
        *toff = *t0;
    } else {
        *t0 = 0;
        *n = p.seqlen;
        *toff = (int64_t)b * p.seqlen;
    }
}

/* grid (nmean, heads, nseq), threads over channels */
template <int IN>
__global__ void __launch_bounds__(QATTN_QUANT_THREADS) qattn_quant_mean_kernel(qattn_kernels_quant_params p)
{
    const int mb = (int)blockIdx.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const int64_t base = (int64_t)b * p.x_stride_batch + t0 * p.x_stride_tok + (int64_t)h * p.x_stride_head;
    int64_t r0 = 0, r1 = n;
    if (p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS) {
        r0 = (int64_t)mb * p.mblock;
        r1 = r0 + p.mblock < n ? r0 + p.mblock : n;
    }
    float *mean = p.mean + (((int64_t)h * p.nseq + b) * p.nmean + mb) * p.d;
    for (int c = (int)threadIdx.x; c < p.d; c += (int)blockDim.x) {
        double acc = 0.0;
        for (int64_t t = r0; t < r1; t++)
            acc += (double)qattn_quant_load<IN>(p, base, t, c);
        mean[c] = r1 > r0 ? (float)(acc / (double)(r1 - r0)) : 0.0f;
    }
}

/* the smoothed element: x - mean (fp32), as smooth.c computes it */
template <int IN>
static __device__ __forceinline__ float qattn_quant_smoothed(const qattn_kernels_quant_params &p, int64_t base,
                                                             const float *mean, int64_t t, int c)
{
    float x = qattn_quant_load<IN>(p, base, t, c);
    if (mean) {
        const float *m = mean;
        if (p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS)
            m += (t / p.mblock) * p.d;
        x = x - m[c];
    }
    return x;
}

/* grid (ceil(seqlen * nch / threads), heads, nseq): one thread per (token,
 * channel group), max over the group's channels, one atomic per thread */
template <int IN>
__global__ void __launch_bounds__(QATTN_QUANT_THREADS) qattn_quant_amax_kernel(qattn_kernels_quant_params p)
{
    const int h = (int)blockIdx.y, b = (int)blockIdx.z;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t t = idx / p.nch;
    const int cg = (int)(idx % p.nch);
    if (t >= n)
        return;
    const int64_t base = (int64_t)b * p.x_stride_batch + t0 * p.x_stride_tok + (int64_t)h * p.x_stride_head;
    const float *mean = p.mean ? p.mean + ((int64_t)h * p.nseq + b) * p.nmean * p.d : (const float *)0;
    const int c0 = p.group.ch > 0 ? cg * p.group.ch : 0;
    const int c1 = p.group.ch > 0 && c0 + p.group.ch < p.d ? c0 + p.group.ch : p.d;
    float amax = 0.0f;
    for (int c = c0; c < c1; c++) {
        float a = fabsf(qattn_quant_smoothed<IN>(p, base, mean, t, c));
        amax = a > amax ? a : amax;
    }
    if (amax > 0.0f) {
        /* non-negative floats order like their bits */
        int64_t g = (((int64_t)h * p.nseq + b) * p.ntok + qattn_num_group_tok_index(p.group, t)) * p.nch + cg;
        atomicMax((unsigned *)p.scale + g, qattn_num_f2u(amax));
    }
}

/* the code of element (t, c): scaled formats against the group scale
 * (a zero scale gives 0); unscaled ones are written by the caller */
template <int IN>
static __device__ __forceinline__ int qattn_quant_code(const qattn_kernels_quant_params &p, int64_t base,
                                                       const float *mean, const float *sg, int64_t t, int c)
{
    const float x = qattn_quant_smoothed<IN>(p, base, mean, t, c);
    if (p.nonfinite && (qattn_num_f2u(qattn_quant_load<IN>(p, base, t, c)) & QATTN_NUM_INF) == QATTN_NUM_INF)
        atomicOr(p.nonfinite, 1);
    const float s = qattn_num_scale_for(p.fmt, sg[qattn_num_group_ch_index(p.group, c)], p.group.e8m0);
    if (!(s > 0.0f))
        return 0;
    const float y = x / s;
    switch (p.fmt) {
    case QATTN_FMT_INT8: return qattn_num_rne_int_clamp(y, 127.0f);
    case QATTN_FMT_INT4: return qattn_num_rne_int_clamp(y, 7.0f);
    case QATTN_FMT_E4M3: return qattn_num_e4m3_encode(y);
    default: return qattn_num_e5m2_encode(y);
    }
}

/* grid (ceil(seqlen * row / threads), heads, nseq): one thread per stored
 * element (an int4 byte holds two) */
template <int IN>
__global__ void __launch_bounds__(QATTN_QUANT_THREADS) qattn_quant_encode_kernel(qattn_kernels_quant_params p)
{
    const int h = (int)blockIdx.y, b = (int)blockIdx.z;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t t = idx / p.row;
    const int e = (int)(idx % p.row);
    if (t >= n)
        return;
    const int64_t base = (int64_t)b * p.x_stride_batch + t0 * p.x_stride_tok + (int64_t)h * p.x_stride_head;
    const float *mean = p.mean ? p.mean + ((int64_t)h * p.nseq + b) * p.nmean * p.d : (const float *)0;
    const int64_t out = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED
                            ? (((int64_t)h * p.nseq + b) * p.d + e) * p.npad + t /* 8-bit codes, row == d */
                            : ((int64_t)h * p.tokens + toff + t) * p.row + e;
    if (p.scale) {
        const float *sg =
            p.scale + (((int64_t)h * p.nseq + b) * p.ntok + qattn_num_group_tok_index(p.group, t)) * p.nch;
        if (p.fmt == QATTN_FMT_INT4) {
            const unsigned lo = (unsigned)qattn_quant_code<IN>(p, base, mean, sg, t, 2 * e);
            const unsigned hi = 2 * e + 1 < p.d ? (unsigned)qattn_quant_code<IN>(p, base, mean, sg, t, 2 * e + 1) : 0u;
            ((uint8_t *)p.codes)[out] = (uint8_t)((lo & 0xfu) | ((hi & 0xfu) << 4));
        } else {
            ((uint8_t *)p.codes)[out] = (uint8_t)qattn_quant_code<IN>(p, base, mean, sg, t, e);
        }
        return;
    }
    const float x = qattn_quant_smoothed<IN>(p, base, mean, t, e);
    if (p.nonfinite && (qattn_num_f2u(qattn_quant_load<IN>(p, base, t, e)) & QATTN_NUM_INF) == QATTN_NUM_INF)
        atomicOr(p.nonfinite, 1);
    if (!p.codes) /* the check alone (a Q that the attention kernel quantizes: qattn_kernels_plan_init) */
        return;
    switch (p.fmt) {
    case QATTN_FMT_FP16: ((uint16_t *)p.codes)[out] = qattn_num_fp16_encode(x); break;
    case QATTN_FMT_BF16: ((uint16_t *)p.codes)[out] = qattn_num_bf16_encode(x); break;
    default: ((float *)p.codes)[out] = x; break;
    }
}

/* amax -> scale in place, for every group (a template only so that each
 * instance file owns its copy) */
template <int IN>
__global__ void __launch_bounds__(QATTN_QUANT_THREADS) qattn_quant_scale_kernel(qattn_kernels_quant_params p,
                                                                                 int64_t ngroups)
{
    const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g < ngroups)
        p.scale[g] = qattn_num_scale_for(p.fmt, p.scale[g], p.group.e8m0);
}

#define QATTN_QUANT_CHECK(call, what)                                                                           \
    do {                                                                                                        \
        hipError_t e_ = (call);                                                                                 \
        if (e_ != hipSuccess)                                                                                   \
            return qattn_err_set(err, QATTN_KERNELS_ERR_DEVICE, "%s: %s (%s:%d)", what, hipGetErrorString(e_), \
                                 __FILE__, __LINE__);                                                           \
    } while (0)

template <int IN>
static int qattn_quant_portable_launch(const qattn_kernels_quant_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_quant_params p = *pp;
    hipStream_t st = (hipStream_t)stream;
    const unsigned T = QATTN_QUANT_THREADS;
    if (p.heads <= 0 || p.nseq <= 0 || p.d <= 0 || p.seqlen < 0 || p.heads > 65535 || p.nseq > 65535)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: bad shape (heads %d, nseq %d, d %d, seqlen %d)", p.heads,
                             p.nseq, p.d, p.seqlen);
    if (p.seqlen == 0)
        return QATTN_OK;
    if (p.mean) {
        void (*k)(qattn_kernels_quant_params) = &qattn_quant_mean_kernel<IN>;
        hipLaunchKernelGGL(k, dim3((unsigned)p.nmean, (unsigned)p.heads, (unsigned)p.nseq),
                           dim3(p.d < (int)T ? (unsigned)p.d : T), 0, st, p);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant mean kernel launch");
    }
    int64_t ngroups = (int64_t)p.heads * p.nseq * p.ntok * p.nch;
    if (p.scale) {
        QATTN_QUANT_CHECK(hipMemsetAsync(p.scale, 0, (size_t)ngroups * sizeof(float), st), "quant: clearing amax");
        int64_t nb = ((int64_t)p.seqlen * p.nch + T - 1) / T;
        void (*k)(qattn_kernels_quant_params) = &qattn_quant_amax_kernel<IN>;
        hipLaunchKernelGGL(k, dim3((unsigned)nb, (unsigned)p.heads, (unsigned)p.nseq), dim3(T), 0, st, p);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant amax kernel launch");
    }
    if (p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED) /* columns past each sequence hold 0 */
        QATTN_QUANT_CHECK(hipMemsetAsync(p.codes, 0, (size_t)p.heads * p.nseq * p.d * p.npad, st),
                          "quant: clearing the transposed codes");
    {
        int64_t nb = ((int64_t)p.seqlen * p.row + T - 1) / T;
        void (*k)(qattn_kernels_quant_params) = &qattn_quant_encode_kernel<IN>;
        hipLaunchKernelGGL(k, dim3((unsigned)nb, (unsigned)p.heads, (unsigned)p.nseq), dim3(T), 0, st, p);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant encode kernel launch");
    }
    if (p.scale) {
        int64_t nb = (ngroups + T - 1) / T;
        void (*k)(qattn_kernels_quant_params, int64_t) = &qattn_quant_scale_kernel<IN>;
        hipLaunchKernelGGL(k, dim3((unsigned)nb), dim3(T), 0, st, p, ngroups);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant scale kernel launch");
    }
    return QATTN_OK;
}

/* one instance: extern "C" launch function NAME for input dtype IN */
#define QATTN_QUANT_PORTABLE_INSTANCE(IN, NAME)                                                       \
    extern "C" int NAME(const qattn_kernels_quant_params *p, void *stream, qattn_err *err)           \
    {                                                                                                 \
        return qattn_quant_portable_launch<IN>(p, stream, err);                                      \
    }

#endif
