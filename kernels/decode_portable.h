/* Decode family, portable path (plain HIP): split-KV attention over a paged,
 * optionally quantized KV cache, and the fp32 combine of the splits that
 * every decode path shares.
 *
 * The split kernel is qattn_kv_emu step by step, so the host simulation
 * matches it bit for bit: per (row, q head, sequence, split) one block of
 * 128 threads; S = exact dot product of the fp32 query row and the
 * dequantized key (double), rounded to fp32, times c2; online softmax in
 * base 2 over kblock keys aligned at the split's first key (only the blocks
 * the row's mask touches), the row max and sum by one thread in key order;
 * P.V key by key in fp32, one thread per channel; o_s = acc / l, lse_s in
 * natural log. num_splits = 1 writes o and lse directly (the combine of one
 * split is the identity); else the partials, then the combine kernel:
 * w_s = exp(lse_s - lse_max), o = sum w_s o_s / sum w_s in split order. */
#ifndef QATTN_KERNELS_DECODE_PORTABLE_H
#define QATTN_KERNELS_DECODE_PORTABLE_H

#include "hip_port.h"
#include "attn_common.h"
#include "qattn/numerics.h"
#include "qattn_kernels.h"

#define QATTN_DECODE_THREADS 128
#define QATTN_DECODE_KBMAX 128 /* largest kblock of the portable split kernel */

#if defined(QATTN_HIP_SIM) && defined(QATTN_SIM_EMU_EXP2)
#define QATTN_DECODE_EXP2(x) qattn_emu_exp2(x)
#else
#define QATTN_DECODE_EXP2(x) exp2f(x)
#endif

#define QATTN_DECODE_CHECK(call, what)                                                                          \
    do {                                                                                                        \
        hipError_t e_ = (call);                                                                                 \
        if (e_ != hipSuccess)                                                                                   \
            return qattn_err_set(err, QATTN_KERNELS_ERR_DEVICE, "%s: %s (%s:%d)", what, hipGetErrorString(e_), \
                                 __FILE__, __LINE__);                                                           \
    } while (0)

/* element c of a stored row starting at element `at` of format f (int4: bytes) */
static __device__ __forceinline__ float qattn_decode_ld(qattn_fmt f, const void *x, int64_t at, int c)
{
    switch (f) {
    case QATTN_FMT_INT8:
        return (float)((const int8_t *)x)[at + c];
    case QATTN_FMT_INT4: {
        unsigned byte = ((const uint8_t *)x)[at + (c >> 1)];
        unsigned nib = (c & 1) ? byte >> 4 : byte & 0xfu;
        return (float)((int)(nib ^ 8u) - 8);
    }
    case QATTN_FMT_E4M3:
        return qattn_num_e4m3_decode(((const uint8_t *)x)[at + c]);
    case QATTN_FMT_E5M2:
        return qattn_num_e5m2_decode(((const uint8_t *)x)[at + c]);
    case QATTN_FMT_FP16:
        return qattn_num_fp16_decode(((const uint16_t *)x)[at + c]);
    case QATTN_FMT_BF16:
        return qattn_num_bf16_decode(((const uint16_t *)x)[at + c]);
    default:
        return ((const float *)x)[at + c];
    }
}

/* tokens per scale group of a cache operand (token: 1) */
static __device__ __forceinline__ int qattn_decode_gtok(const qattn_operand &op)
{
    return op.group.tok == QATTN_TOK_TOKEN ? 1 : op.group.b;
}

/* the stored row of (sequence b, position pos, kv head hk): element index */
static __device__ __forceinline__ int64_t qattn_decode_row(const qattn_kernels_kvcache_dev &c, int b, int64_t pos,
                                                           int hk)
{
    const int32_t page = c.table[(int64_t)b * c.max_pages + pos / c.page_size];
    return qattn_kernels_kv_row(c.layout, page, c.page_size, c.hkv, (int)(pos % c.page_size), hk);
}

/* the value of (b, hk, pos, ch) of K (t = 0) or V (t = 1), as
 * qattn_kvcache_gather forms it */
static __device__ __forceinline__ float qattn_decode_val(const qattn_kernels_kvcache_dev &c, int t, int b, int hk,
                                                         int64_t pos, int ch)
{
    const qattn_operand &op = t ? c.vop : c.kop;
    const float *open = t ? c.v_open : c.k_open;
    const float *scale = t ? c.v_scale : c.k_scale;
    const int g = qattn_decode_gtok(op);
    if (open) {
        const int64_t len = c.len[b], closed = len - len % g;
        if (pos >= closed)
            return open[(((int64_t)b * c.hkv + hk) * g + pos % g) * c.d + ch];
    }
    const int64_t row = QATTN_KERNELS_ROW(op.fmt, c.d);
    float x = qattn_decode_ld(op.fmt, t ? c.v : c.k, qattn_decode_row(c, b, pos, hk) * row, ch);
    if (scale) {
        const int ntok = t ? c.v_ntok : c.k_ntok, nch = t ? c.v_nch : c.k_nch;
        x = x * scale[(((int64_t)b * c.hkv + hk) * ntok + pos / g) * nch + qattn_num_group_ch_index(op.group, ch)];
    }
    return x;
}

/* the row's first token in [hq, Tq] (lse, partials) and in the user tensors */
/* x / f.d for 0 <= x < 2^31 (qattn_kernels_fastdiv) */
static __device__ __forceinline__ uint32_t qattn_fastdiv(const qattn_kernels_fastdiv &f, uint32_t x)
{
    return f.mul ? (uint32_t)(((uint64_t)x * f.mul) >> 32) >> f.shift : x;
}

/* split sp's keys [a, e) = [sp sk / ns, (sp + 1) sk / ns) of a cache of sk < 2^31 keys, in 32 bits:
 * sk = qd ns + rd, so sp sk / ns = sp qd + sp rd / ns with sp rd < 2^16 */
static __device__ __forceinline__ void qattn_decode_split_keys(const qattn_kernels_decode_params &p, unsigned sk,
                                                               unsigned sp, unsigned *a, unsigned *e)
{
    const unsigned qd = qattn_fastdiv(p.div_splits, sk), rd = sk - qd * (unsigned)p.num_splits;
    *a = sp * qd + qattn_fastdiv(p.div_splits, sp * rd);
    *e = (sp + 1) * qd + qattn_fastdiv(p.div_splits, (sp + 1) * rd);
}

static __device__ __forceinline__ void qattn_decode_rows(const qattn_kernels_decode_params &p, int b, int64_t *tq0,
                                                         int64_t *tu0, int *sq)
{
    int64_t t0;
    qattn_kseq(p.cu_q, b, p.seqlen_q, &t0, sq);
    *tu0 = t0;
    *tq0 = p.cu_q ? t0 : (int64_t)b * p.seqlen_q;
}

/* channel c of output row (b, token t from the sequence's first, q head h), rounded to p.out */
static __device__ __forceinline__ void qattn_decode_put(const qattn_kernels_decode_params &p, int b, int64_t t, int h,
                                                        int c, float x)
{
    const int64_t at = (int64_t)b * p.o_sb + t * p.o_st + (int64_t)h * p.o_sh + c;
    if (p.out == QATTN_FMT_FP16)
        ((uint16_t *)p.o)[at] = qattn_num_fp16_encode(x);
    else if (p.out == QATTN_FMT_BF16)
        ((uint16_t *)p.o)[at] = qattn_num_bf16_encode(x);
    else
        ((float *)p.o)[at] = x;
}

/* split sp's result for a row (row: its index in [hq, Tq]): with one split
 * o and lse are the output, else the partials the combine reads */
static __device__ __forceinline__ void qattn_decode_put_split(const qattn_kernels_decode_params &p, int b, int64_t t,
                                                              int h, int64_t row, int sp, int c, float o)
{
    if (p.num_splits == 1)
        qattn_decode_put(p, b, t, h, c, o);
    else
        p.o_part[((int64_t)sp * p.hq * p.lse_sh + row) * p.d + c] = o;
}
static __device__ __forceinline__ void qattn_decode_put_split_lse(const qattn_kernels_decode_params &p, int64_t row,
                                                                  int sp, float lse)
{
    if (p.num_splits > 1)
        p.lse_part[(int64_t)sp * p.hq * p.lse_sh + row] = lse;
    else if (p.lse)
        p.lse[row] = lse;
}

template <int D>
__global__ void __launch_bounds__(QATTN_DECODE_THREADS) qattn_decode_portable_kernel(qattn_kernels_decode_params p)
{
    const int NT = QATTN_DECODE_THREADS, NC = (D + NT - 1) / NT;
    __shared__ float sQ[D];
    __shared__ float sS[QATTN_DECODE_KBMAX];
    __shared__ float sState[2]; /* alpha, l */
    const int tid = (int)threadIdx.x, i = (int)blockIdx.x, h = (int)blockIdx.y;
    const int b = (int)(blockIdx.z % (unsigned)p.nseq), sp = (int)(blockIdx.z / (unsigned)p.nseq);
    int64_t tq0, tu0;
    int sq;
    qattn_decode_rows(p, b, &tq0, &tu0, &sq);
    if (i >= sq)
        return;
    const int hk = h / (p.hq / p.hkv);
    const int64_t sk = p.cache.len[b], ns = p.num_splits;
    int64_t lo, hi;
    qattn_num_mask_range(p.mask, i, sq, sk, &lo, &hi);
    const int64_t a = sp * sk / ns, e = (sp + 1) * sk / ns;
    const int64_t va = lo > a ? lo : a, vb = hi < e ? hi : e;
    const int64_t row = (int64_t)h * p.lse_sh + tq0 + i;
    const int64_t qat = (int64_t)b * p.q_sb + (tu0 + i) * p.q_st + (int64_t)h * p.q_sh;
    for (int c = tid; c < D; c += NT)
        sQ[c] = qattn_decode_ld(p.in, p.q, qat, c);
    float acc[NC];
    for (int k = 0; k < NC; k++)
        acc[k] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int64_t kb = p.kblock;
    __syncthreads();
    for (int64_t j = a + (va > a ? (va - a) / kb * kb : 0); j < vb; j += kb) {
        const int64_t x0 = j > va ? j : va, x1 = j + kb < vb ? j + kb : vb;
        for (int64_t x = x0 + tid; x < x1; x += NT) {
            double dot = 0.0;
            for (int c = 0; c < D; c++)
                dot += (double)sQ[c] * (double)qattn_decode_val(p.cache, 0, b, hk, x, c);
            sS[x - x0] = (float)dot * p.c2;
        }
        __syncthreads();
        if (tid == 0) {
            float mb = -INFINITY;
            for (int64_t x = x0; x < x1; x++)
                mb = sS[x - x0] > mb ? sS[x - x0] : mb;
            const float mnew = mb > m ? mb : m;
            const float alpha = QATTN_DECODE_EXP2(m - mnew);
            float sum = 0.0f;
            for (int64_t x = x0; x < x1; x++) {
                sS[x - x0] = QATTN_DECODE_EXP2(sS[x - x0] - mnew);
                sum = sum + sS[x - x0];
            }
            sState[0] = alpha;
            sState[1] = l * alpha + sum;
            m = mnew;
        }
        __syncthreads();
        const float alpha = sState[0];
        l = sState[1];
        for (int k = 0; k < NC; k++) {
            const int c = tid + k * NT;
            if (c >= D)
                break;
            float s = alpha != 1.0f ? acc[k] * alpha : acc[k];
            for (int64_t x = x0; x < x1; x++)
                s = s + sS[x - x0] * qattn_decode_val(p.cache, 1, b, hk, x, c);
            acc[k] = s;
        }
        __syncthreads();
    }
    if (tid == 0 && va < vb)
        sState[0] = m; /* only thread 0 tracked the max */
    __syncthreads();
    const int empty = va >= vb;
    const float lse = empty ? -INFINITY : (float)(((double)sState[0] + log2((double)l)) * 0.69314718055994530942);
    for (int k = 0; k < NC; k++) {
        const int c = tid + k * NT;
        if (c >= D)
            break;
        const float o = empty ? 0.0f : acc[k] / l;
        qattn_decode_put_split(p, b, tu0 + i, h, row, sp, c, o);
    }
    if (tid == 0)
        qattn_decode_put_split_lse(p, row, sp, lse);
}

/* the combine of qattn_kv_combine: one block per (row, q head), one thread
 * per channel; o_part [ns, hq, Tq, d] with Tq = lse_sh. The weights are
 * formed in parallel, summed by one thread in split order, and each
 * channel's sum runs in split order too (the emulation's bits) with its
 * loads issued ahead. */
#define QATTN_DECODE_COMBINE_SMAX 256 /* splits staged in shared memory */
template <int D>
__global__ void __launch_bounds__(QATTN_DECODE_THREADS) qattn_decode_combine_kernel(qattn_kernels_decode_params p)
{
    const int NT = QATTN_DECODE_THREADS;
    __shared__ float sW[QATTN_DECODE_COMBINE_SMAX];
    __shared__ float sRed[QATTN_DECODE_THREADS];
    __shared__ float sSum;
    const int tid = (int)threadIdx.x, i = (int)blockIdx.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
    int64_t tq0, tu0;
    int sq;
    qattn_decode_rows(p, b, &tq0, &tu0, &sq);
    if (i >= sq)
        return;
    const int64_t row = (int64_t)h * p.lse_sh + tq0 + i, plane = (int64_t)p.hq * p.lse_sh;
    const int ns = p.num_splits < QATTN_DECODE_COMBINE_SMAX ? p.num_splits : QATTN_DECODE_COMBINE_SMAX;
    float lm = -INFINITY;
    for (int s = tid; s < ns; s += NT) {
        sW[s] = p.lse_part[s * plane + row];
        lm = sW[s] > lm ? sW[s] : lm;
    }
    sRed[tid] = lm;
    __syncthreads();
    if (tid == 0) {
        float m = -INFINITY;
        for (int k = 0; k < NT; k++)
            m = sRed[k] > m ? sRed[k] : m;
        sRed[0] = m;
    }
    __syncthreads();
    const float lmax = sRed[0];
    for (int s = tid; s < ns; s += NT)
        sW[s] = sW[s] == -INFINITY ? 0.0f : expf(sW[s] - lmax); /* exactly 0 for a split without a key */
    __syncthreads();
    if (tid == 0) {
        float sum = 0.0f;
        for (int s = 0; s < ns; s++)
            sum = sum + sW[s]; /* adding a weight of 0 changes nothing */
        sSum = sum;
        if (p.lse)
            p.lse[row] = lmax == -INFINITY ? -INFINITY : lmax + logf(sum);
    }
    __syncthreads();
    const float sum = sSum;
    const int R = 16; /* splits whose partials are loaded at once (one latency per round) */
    for (int c = tid; c < D; c += NT) {
        float o = 0.0f;
        if (lmax != -INFINITY) {
            const float *op = p.o_part + row * D + c;
            for (int s0 = 0; s0 < ns; s0 += R) {
                float x[R];
                QATTN_UNROLL
                for (int k = 0; k < R; k++)
                    x[k] = s0 + k < ns && sW[s0 + k] != 0.0f ? op[(int64_t)(s0 + k) * plane * D] : 0.0f;
                QATTN_UNROLL
                for (int k = 0; k < R; k++)
                    if (s0 + k < ns && sW[s0 + k] != 0.0f)
                        o = o + sW[s0 + k] * x[k];
            }
            o = o / sum;
        }
        qattn_decode_put(p, b, tu0 + i, h, c, o);
    }
}

/* checks every decode launcher makes */
static inline int qattn_decode_check(const qattn_kernels_decode_params &p, int d, qattn_err *err)
{
    if (p.d != d)
        return qattn_err_set(err, QATTN_ERR_ARG, "decode: instance for head dim %d called with d = %d", d, p.d);
    if (p.hkv <= 0 || p.hq % p.hkv || p.hq > 65535 || p.nseq <= 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "decode: bad heads %d / %d or batch %d", p.hq, p.hkv, p.nseq);
    if (p.num_splits < 1 || p.num_splits > QATTN_DECODE_COMBINE_SMAX || (int64_t)p.num_splits * p.nseq > 65535 ||
        (p.num_splits > 1 && (!p.o_part || !p.lse_part)))
        return qattn_err_set(err, QATTN_ERR_ARG, "decode: num_splits %d (batch %d) without partial buffers or too many",
                             p.num_splits, p.nseq);
    return QATTN_OK;
}

/* the combine after a split kernel (num_splits > 1) */
template <int D>
static inline int qattn_decode_combine_launch(const qattn_kernels_decode_params &p, hipStream_t stream,
                                              qattn_err *err)
{
    if (p.num_splits == 1 || p.stages == 1)
        return QATTN_OK;
    const dim3 grid((unsigned)p.seqlen_q, (unsigned)p.hq, (unsigned)p.nseq);
    void (*k)(qattn_kernels_decode_params) = &qattn_decode_combine_kernel<D>;
    hipLaunchKernelGGL(k, grid, dim3(QATTN_DECODE_THREADS), 0, stream, p);
    QATTN_DECODE_CHECK(hipGetLastError(), "decode combine launch");
    return QATTN_OK;
}

template <int D>
static int qattn_decode_portable_launch(const qattn_kernels_decode_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_decode_params p = *pp;
    int rc = qattn_decode_check(p, D, err);
    if (rc)
        return rc;
    if (p.kblock < 1 || p.kblock > QATTN_DECODE_KBMAX)
        return qattn_err_set(err, QATTN_ERR_ARG, "decode: kblock %d outside 1..%d", p.kblock, QATTN_DECODE_KBMAX);
    if (p.seqlen_q <= 0)
        return QATTN_OK;
    void (*k)(qattn_kernels_decode_params) = &qattn_decode_portable_kernel<D>;
    const dim3 grid((unsigned)p.seqlen_q, (unsigned)p.hq, (unsigned)(p.nseq * p.num_splits));
    if (p.stages != 2) {
        hipLaunchKernelGGL(k, grid, dim3(QATTN_DECODE_THREADS), 0, (hipStream_t)stream, p);
        QATTN_DECODE_CHECK(hipGetLastError(), "decode split kernel launch");
    }
    return qattn_decode_combine_launch<D>(p, (hipStream_t)stream, err);
}

#define QATTN_DECODE_PORTABLE_INSTANCE(D, NAME)                                             \
    extern "C" int NAME(const qattn_kernels_decode_params *p, void *stream, qattn_err *err) \
    {                                                                                       \
        return qattn_decode_portable_launch<D>(p, stream, err);                             \
    }

#endif
