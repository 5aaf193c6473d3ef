/* Quantization, fast path: the statistics and combine kernels (operands
 * smoothed over a sequence, or with scale groups that span all its tokens):
 * per chunk of QATTN_KERNELS_QUANT_CHUNK tokens the per-channel double sums,
 * minima and maxima into p.work, then per (head, sequence) the means and
 * the token-uniform scales; p.work's layout, which the streamed kernel
 * shares (its partials, then its counters). */
#ifndef QATTN_KERNELS_QUANT_STATS_H
#define QATTN_KERNELS_QUANT_STATS_H

#include "quant_groups.h"

#define QATTN_QF_STAT_THREADS 256
#define QATTN_QF_STAT_ILP 8 /* 16-byte loads in flight per thread in the statistics */

/* bytes of the statistics scratch (qattn_qf_stats_body) */
static __host__ __device__ __forceinline__ size_t qattn_qf_stats_scratch(int d)
{
    return (size_t)(QATTN_QF_STAT_THREADS / (d / 8)) * (d / 8) * 9 * 16;
}

/* ---- stats of one chunk, by threads 0 .. QATTN_QF_STAT_THREADS - 1 of nthr:
 * thread (r, cc) sums 8 channels over tokens r, r + R, ... of the chunk
 * (row t of x, see qattn_qf_ld); shared scratch qf_ssum of R * d / 8 * 9 *
 * 16 bytes; the chunk's partials into p.work ---- */
template <int IN, int SUMS, int MINMAX> /* SUMS: smoothing over the sequence; MINMAX: uniform groups */
static __device__ __forceinline__ void qattn_qf_stats_body(const qattn_kernels_quant_params &p, int chunk, int h, int b,
                                                           int64_t n, const uint16_t *x, int64_t stride,
                                                           double *qf_ssum, int nthr)
{
    const int cols = p.d / 8, R = QATTN_QF_STAT_THREADS / cols;
    const int tid = (int)threadIdx.x, r = tid / cols, cc = tid % cols;
    const int P = cols * 9; /* scratch row pitch: channel 8 cc + j at 9 cc + j (no bank conflicts) */
    float *smn = (float *)(qf_ssum + (size_t)R * P), *smx = smn + (size_t)R * P;
    const int64_t c0 = (int64_t)chunk * QATTN_KERNELS_QUANT_CHUNK;
    const int64_t c1 = c0 + QATTN_KERNELS_QUANT_CHUNK < n ? c0 + QATTN_KERNELS_QUANT_CHUNK : n;
    double s[8];
    float mn[8], mx[8];
    QATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        s[j] = 0.0;
        mn[j] = qattn_num_u2f(QATTN_NUM_INF);
        mx[j] = -qattn_num_u2f(QATTN_NUM_INF);
    }
    if (r < R) {
        int64_t t = c0 + r;
        for (; t + (QATTN_QF_STAT_ILP - 1) * (int64_t)R < c1; t += QATTN_QF_STAT_ILP * (int64_t)R) {
            uint4 v[QATTN_QF_STAT_ILP];
            QATTN_UNROLL
            for (int u = 0; u < QATTN_QF_STAT_ILP; u++)
                v[u] = qattn_qf_ld(x, stride, t + u * (int64_t)R, cc);
            QATTN_UNROLL
            for (int u = 0; u < QATTN_QF_STAT_ILP; u++)
                QATTN_UNROLL
                for (int j = 0; j < 8; j++) {
                    const float f = qattn_qf_dec<IN>(v[u], j);
                    if (SUMS)
                        s[j] += (double)f;
                    if (MINMAX) {
                        mn[j] = f < mn[j] ? f : mn[j];
                        mx[j] = f > mx[j] ? f : mx[j];
                    }
                }
        }
        for (; t < c1; t += R) {
            const uint4 v = qattn_qf_ld(x, stride, t, cc);
            QATTN_UNROLL
            for (int j = 0; j < 8; j++) {
                const float f = qattn_qf_dec<IN>(v, j);
                if (SUMS)
                    s[j] += (double)f;
                if (MINMAX) {
                    mn[j] = f < mn[j] ? f : mn[j];
                    mx[j] = f > mx[j] ? f : mx[j];
                }
            }
        }
        QATTN_UNROLL
        for (int j = 0; j < 8; j++) {
            qf_ssum[(size_t)r * P + cc * 9 + j] = s[j];
            smn[(size_t)r * P + cc * 9 + j] = mn[j];
            smx[(size_t)r * P + cc * 9 + j] = mx[j];
        }
    }
    __syncthreads();
    const int64_t nchunk = qattn_qf_nchunk(p);
    const int64_t o = (((int64_t)h * p.nseq + b) * nchunk + chunk) * p.d;
    const int64_t all = (int64_t)p.heads * p.nseq * nchunk * p.d;
    double *wsum = (double *)p.work;
    float *wmn = (float *)(wsum + all), *wmx = wmn + all;
    for (int c = tid; c < p.d; c += nthr) {
        double a = 0.0;
        float lo = qattn_num_u2f(QATTN_NUM_INF), hi = -lo;
        for (int k = 0; k < R; k++) { /* rows in order */
            const size_t e = (size_t)k * P + (c >> 3) * 9 + (c & 7);
            a += qf_ssum[e];
            lo = smn[e] < lo ? smn[e] : lo;
            hi = smx[e] > hi ? smx[e] : hi;
        }
        wsum[o + c] = a;
        wmn[o + c] = lo;
        wmx[o + c] = hi;
    }
}

template <int IN, int SUMS, int MINMAX>
__global__ void __launch_bounds__(QATTN_QF_STAT_THREADS) qattn_qf_stats_kernel(qattn_kernels_quant_params p)
{
    QATTN_DYNAMIC_SHARED(double, qf_ssum);
    const int chunk = (int)blockIdx.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const uint16_t *x = qattn_qf_seq_x(p, b, t0, h);
    qattn_qf_stats_body<IN, SUMS, MINMAX>(p, chunk, h, b, n, x, p.x_stride_tok, qf_ssum, QATTN_QF_STAT_THREADS);
}

/* ---- combine of one (head, sequence), threads over channels: means and
 * token-uniform scales into p.mean and p.scale; qf_cmax: p.nch words of
 * shared memory. The partials are read through L2 (volatile): other blocks
 * wrote them ---- */
static __device__ __forceinline__ void qattn_qf_combine_body(const qattn_kernels_quant_params &p, int h, int b,
                                                             int64_t n, unsigned *qf_cmax, int nthr)
{
    const int tid = (int)threadIdx.x;
    const int uniform = p.scale && qattn_qf_uniform(p.group);
    for (int g = tid; g < p.nch; g += nthr)
        qf_cmax[g] = 0u;
    __syncthreads();
    const int64_t nchunk = qattn_qf_nchunk(p);
    const int64_t all = (int64_t)p.heads * p.nseq * nchunk * p.d;
    const int64_t o = ((int64_t)h * p.nseq + b) * nchunk * p.d;
    const volatile double *wsum = (const volatile double *)p.work;
    const volatile float *wmn = (const volatile float *)(wsum + all), *wmx = wmn + all;
    for (int c = tid; c < p.d; c += nthr) {
        double a = 0.0;
        float lo = qattn_num_u2f(QATTN_NUM_INF), hi = -lo;
        const int sums = p.smooth == QATTN_KERNELS_SMOOTH_TOKENS;
        for (int64_t k0 = 0; k0 < nchunk; k0 += 4) { /* four chunks' loads in flight, added in order */
            double ps[4];
            float pn[4], px[4];
            QATTN_UNROLL
            for (int u = 0; u < 4; u++) {
                const int64_t e = o + (k0 + u < nchunk ? k0 + u : k0) * p.d + c;
                ps[u] = sums ? wsum[e] : 0.0;
                pn[u] = uniform ? wmn[e] : 0.0f;
                px[u] = uniform ? wmx[e] : 0.0f;
            }
            QATTN_UNROLL
            for (int u = 0; u < 4; u++)
                if (k0 + u < nchunk) {
                    a += ps[u];
                    lo = pn[u] < lo ? pn[u] : lo;
                    hi = px[u] > hi ? px[u] : hi;
                }
        }
        float m = 0.0f;
        if (p.smooth == QATTN_KERNELS_SMOOTH_TOKENS) {
            m = n > 0 ? (float)(a / (double)n) : 0.0f;
            p.mean[((int64_t)h * p.nseq + b) * p.d + c] = m;
        }
        if (uniform) {
            const float up = hi - m, down = m - lo;
            float am = up > down ? up : down;
            am = am > 0.0f ? am : 0.0f; /* also n == 0 (inf - inf is not reached: lo/hi are +-inf only then) */
            if (am > 0.0f)
                atomicMax(&qf_cmax[qattn_num_group_ch_index(p.group, c)], qattn_num_f2u(am));
        }
    }
    __syncthreads();
    if (uniform)
        for (int g = tid; g < p.nch; g += nthr)
            p.scale[((int64_t)h * p.nseq + b) * p.nch + g] =
                qattn_num_scale_for(p.fmt, qattn_num_u2f(qf_cmax[g]), p.group.e8m0);
}

template <int IN>
__global__ void __launch_bounds__(QATTN_QF_STAT_THREADS) qattn_qf_combine_kernel(qattn_kernels_quant_params p)
{
    __shared__ unsigned qf_cmax[QATTN_QF_MAXD];
    const int h = (int)blockIdx.x, b = (int)blockIdx.y;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    qattn_qf_combine_body(p, h, b, n, qf_cmax, QATTN_QF_STAT_THREADS);
}

/* bytes of the partial statistics at the start of p.work; the counters of
 * the streamed kernel follow: [2u] blocks of unit u arrived at its wait,
 * [2u + 1] blocks that left it (the kernel leaves both zero) */
static __host__ __device__ __forceinline__ size_t qattn_qf_stats_bytes(const qattn_kernels_quant_params &p)
{
    return (size_t)p.heads * p.nseq * (size_t)qattn_qf_nchunk(p) * p.d * 16;
}

/* the 2 heads nseq counters after the statistics in p.work cleared on st,
 * before a launch of the streamed kernel, unless p.counters_zero says they
 * are zero already */
static hipError_t qattn_qf_clear_counters(const qattn_kernels_quant_params &p, hipStream_t st)
{
    if (p.counters_zero)
        return hipSuccess;
    return hipMemsetAsync((unsigned char *)p.work + qattn_qf_stats_bytes(p), 0,
                          (size_t)(2 * (int64_t)p.heads * p.nseq) * sizeof(unsigned), st);
}

#endif
