/* Sparse family, portable path (plain HIP): the DeepSeek-V4 sparse prefill
 * step by step as qattn_emu_sparse runs it.
 *
 * One block of 128 threads per (query token, q head). Q is rounded as the
 * scheme stores it (bf16, or with q_fp8 e4m3 codes times an e8m0 scale per
 * 64 channels, the rope channels in bf16). The token's list is compacted
 * (holes and entries past its length dropped) kblock keys at a time by
 * thread 0, in list order; each key's S = exact dot product in double,
 * rounded to fp32, times c2; the base-2 online softmax by thread 0 in key
 * order; P rounded to bf16; P.V key by key in fp32, a thread per channel;
 * the sink added to l after the last block at the running maximum. The
 * prepass (fp8 rows to bf16 rows) is in sparse_prepass.hip. */
#ifndef QATTN_KERNELS_SPARSE_PORTABLE_H
#define QATTN_KERNELS_SPARSE_PORTABLE_H

#include "decode_portable.h" /* qattn_decode_ld, QATTN_DECODE_EXP2, QATTN_DECODE_CHECK */
#include "qattn_kernels_sparse.h"

#define QATTN_SPARSE_THREADS 128
#define QATTN_SPARSE_KBMAX 128 /* largest kblock of the portable kernel */

/* the row index (in [rows, hkv]) of position pos, kv head g, in the pool
 * (*ext = 0; page = kv.table[pos / kv.page] and off = pos % kv.page, from
 * the caller: read ahead, divided as it likes) or the extend part (*ext = 1;
 * page and off unused) */
static __device__ __forceinline__ int64_t qattn_sparse_page_row(const qattn_kernels_sparse_kv &kv, int64_t pos,
                                                                int64_t page, int64_t off, int g, int *ext)
{
    *ext = pos >= kv.prefix;
    if (!*ext)
        return (page * kv.page + off) * kv.hkv + g;
    return (pos - kv.prefix) * kv.hkv + g;
}
/* ... with the page read and the division here (kv.page is 0 without a pool) */
static __device__ __forceinline__ int64_t qattn_sparse_at(const qattn_kernels_sparse_kv &kv, int64_t pos, int g,
                                                          int *ext)
{
    const int pool = pos < kv.prefix;
    return qattn_sparse_page_row(kv, pos, pool ? kv.table[pos / kv.page] : 0, pool ? pos % kv.page : 0, g, ext);
}

/* channel c of stored row r (an index into [rows, hkv]) as its value */
static __device__ __forceinline__ float qattn_sparse_val(const qattn_kernels_sparse_kv &kv,
                                                         const qattn_kernels_kvrows &rows, int64_t r, int c)
{
    if (!kv.fp8)
        return qattn_num_bf16_decode(((const uint16_t *)rows.val)[r * kv.d + c]);
    const int dn = kv.d - kv.rope;
    if (c >= dn)
        return qattn_num_bf16_decode(rows.rope[r * kv.rope + (c - dn)]);
    return qattn_num_e4m3_decode(((const uint8_t *)rows.val)[r * dn + c]) *
           qattn_num_e8m0_decode(rows.sc[r * QATTN_KERNELS_SPARSE_SC_ROW(dn) + c / QATTN_KERNELS_SPARSE_SCALE_CH]);
}

static __device__ __forceinline__ void qattn_sparse_put(const qattn_kernels_sparse_params &p, int t, int h, int c,
                                                        float x)
{
    const int64_t at = (int64_t)t * p.o_st + (int64_t)h * p.o_sh + c;
    if (p.out == QATTN_FMT_FP16)
        ((uint16_t *)p.o)[at] = qattn_num_fp16_encode(x);
    else if (p.out == QATTN_FMT_BF16)
        ((uint16_t *)p.o)[at] = qattn_num_bf16_encode(x);
    else
        ((float *)p.o)[at] = x;
}

static __global__ void __launch_bounds__(QATTN_SPARSE_THREADS) qattn_sparse_portable_kernel(qattn_kernels_sparse_params p)
{
    const int NT = QATTN_SPARSE_THREADS, NC = QATTN_KERNELS_SPARSE_D_MAX / QATTN_SPARSE_THREADS;
    const int CH = QATTN_KERNELS_SPARSE_SCALE_CH;
    __shared__ float sQ[QATTN_KERNELS_SPARSE_D_MAX];
    __shared__ float sS[QATTN_SPARSE_KBMAX];
    __shared__ int64_t sRow[QATTN_SPARSE_KBMAX]; /* the block's keys: row in its part */
    __shared__ int sPart[QATTN_SPARSE_KBMAX];    /* 0 pool, 1 ext */
    __shared__ float sScale[QATTN_KERNELS_SPARSE_D_MAX / QATTN_KERNELS_SPARSE_SCALE_CH];
    __shared__ float sState[3]; /* alpha, l, m */
    __shared__ int sN, sCursor;
    const int tid = (int)threadIdx.x, t = (int)blockIdx.x, h = (int)blockIdx.y;
    const int d = p.d, dn = d - p.rope, g = h / (p.hq / p.hkv);
    const int64_t qat = (int64_t)t * p.q_st + (int64_t)h * p.q_sh;
    for (int c = tid; c < d; c += NT)
        sQ[c] = qattn_decode_ld(p.in, p.q, qat, c);
    __syncthreads();
    if (p.q_fp8) { /* the scheme's Q: e4m3 codes, an e8m0 scale per 64 channels; rope in bf16 */
        if (tid < dn / CH) {
            float amax = 0.0f;
            for (int c = tid * CH; c < tid * CH + CH; c++)
                amax = fabsf(sQ[c]) > amax ? fabsf(sQ[c]) : amax;
            sScale[tid] = qattn_num_scale_for(QATTN_FMT_E4M3, amax, 1);
        }
        __syncthreads();
        for (int c = tid; c < d; c += NT) {
            if (c < dn) {
                const float s = sScale[c / CH];
                sQ[c] = s > 0.0f ? qattn_num_round(QATTN_FMT_E4M3, sQ[c] / s) * s : 0.0f;
            } else {
                sQ[c] = qattn_num_round(QATTN_FMT_BF16, sQ[c]);
            }
        }
    } else {
        for (int c = tid; c < d; c += NT)
            sQ[c] = qattn_num_round(QATTN_FMT_BF16, sQ[c]);
    }
    if (tid == 0)
        sCursor = 0;
    float acc[NC];
    for (int k = 0; k < NC; k++)
        acc[k] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int kb = p.kblock;
    const int32_t *list = p.idx + (int64_t)t * p.topk;
    const int len = p.len ? p.len[t] : p.topk;
    int any = 0;
    __syncthreads();
    for (;;) {
        if (tid == 0) { /* the next kblock listed keys, in list order */
            int n = 0, x = sCursor;
            for (; x < len && n < kb; x++)
                if (list[x] >= 0) {
                    sRow[n] = qattn_sparse_at(p.kv, list[x], g, &sPart[n]);
                    n++;
                }
            sCursor = x;
            sN = n;
        }
        __syncthreads();
        const int n = sN;
        if (n == 0)
            break;
        any = 1;
        for (int x = tid; x < n; x += NT) {
            const qattn_kernels_kvrows &rows = sPart[x] ? p.kv.ext : p.kv.pool;
            double dot = 0.0;
            for (int c = 0; c < d; c++)
                dot += (double)sQ[c] * (double)qattn_sparse_val(p.kv, rows, sRow[x], c);
            sS[x] = (float)dot * p.c2;
        }
        __syncthreads();
        if (tid == 0) {
            float mb = -INFINITY;
            for (int x = 0; x < n; x++)
                mb = sS[x] > mb ? sS[x] : mb;
            const float mnew = mb > m ? mb : m;
            const float alpha = QATTN_DECODE_EXP2(m - mnew);
            float sum = 0.0f;
            for (int x = 0; x < n; x++) {
                const float e = QATTN_DECODE_EXP2(sS[x] - mnew);
                sum = sum + e;
                sS[x] = qattn_num_round(QATTN_FMT_BF16, e); /* P as stored */
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
            if (c >= d)
                break;
            float s = alpha != 1.0f ? acc[k] * alpha : acc[k];
            for (int x = 0; x < n; x++)
                s = s + sS[x] * qattn_sparse_val(p.kv, sPart[x] ? p.kv.ext : p.kv.pool, sRow[x], c);
            acc[k] = s;
        }
        __syncthreads();
    }
    if (tid == 0)
        sState[2] = m; /* only thread 0 tracked the max */
    __syncthreads();
    const float sink = p.sink ? p.sink[h] : -INFINITY;
    float lse;
    if (!any) { /* nothing listed: o = 0, lse = -inf (the sink's logit with one) */
        lse = sink;
    } else {
        const float mrow = sState[2];
        if (p.sink)
            l = l + QATTN_DECODE_EXP2((float)((double)sink * 1.44269504088896340736) - mrow);
        lse = (float)(((double)mrow + log2((double)l)) * 0.69314718055994530942);
    }
    for (int k = 0; k < NC; k++) {
        const int c = tid + k * NT;
        if (c >= d)
            break;
        qattn_sparse_put(p, t, h, c, any ? acc[k] / l : 0.0f);
    }
    if (tid == 0 && p.lse)
        p.lse[(int64_t)h * p.sq + t] = lse;
}

static inline int qattn_sparse_check_params(const qattn_kernels_sparse_params &p, int d_inst, qattn_err *err)
{
    if ((d_inst && p.d != d_inst) || p.d <= 0 || p.d > QATTN_KERNELS_SPARSE_D_MAX)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse: head dim %d (instance: %d)", p.d, d_inst);
    if (p.hkv <= 0 || p.hq % p.hkv || p.hq > 65535 || p.sq < 0 || p.topk < 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse: bad heads %d / %d, tokens %d or top-k %d", p.hq, p.hkv,
                             p.sq, p.topk);
    if (p.kv.d != p.d || p.kv.hkv != p.hkv || (p.kv.fp8 && p.kv.rope != p.rope))
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse: the cache's rows (d %d, %d kv heads) do not fit the query's",
                             p.kv.d, p.kv.hkv);
    return QATTN_OK;
}

static inline int qattn_sparse_portable_launch(const qattn_kernels_sparse_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_sparse_params p = *pp;
    int rc = qattn_sparse_check_params(p, 0, err);
    if (rc)
        return rc;
    if (p.kblock < 1 || p.kblock > QATTN_SPARSE_KBMAX)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse: kblock %d outside 1..%d", p.kblock, QATTN_SPARSE_KBMAX);
    if (p.sq == 0)
        return QATTN_OK;
    hipLaunchKernelGGL(qattn_sparse_portable_kernel, dim3((unsigned)p.sq, (unsigned)p.hq), dim3(QATTN_SPARSE_THREADS),
                       0, (hipStream_t)stream, p);
    QATTN_DECODE_CHECK(hipGetLastError(), "sparse portable kernel launch");
    return QATTN_OK;
}

#define QATTN_SPARSE_PORTABLE_INSTANCE(NAME)                                                \
    extern "C" int NAME(const qattn_kernels_sparse_params *p, void *stream, qattn_err *err) \
    {                                                                                       \
        return qattn_sparse_portable_launch(p, stream, err);                                \
    }

#endif
