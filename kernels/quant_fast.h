/* Quantization family, fast path (plain HIP, no inline assembly): the same
 * params, buffers and results as quant_portable.h, bit for bit, in at most
 * three launches per operand, each reading its input with 16-byte loads:
 *
 *   stats    (only for smoothing over a sequence, or scale groups that span
 *            all tokens: tensor, channel, tensor,ch:C) grid (nchunk, heads,
 *            nseq): per chunk of QATTN_KERNELS_QUANT_CHUNK tokens and per
 *            channel the double sum, the minimum and the maximum of x, into
 *            p.work;
 *   combine  grid (heads, nseq): per channel the chunk sums added in chunk
 *            order -> mean (double, rounded to fp32 as smooth.c does); the
 *            amax of x - mean per channel is max(fl(max - mean), fl(mean -
 *            min)) (rounding is monotonic, so this equals the max of
 *            |fl(x - mean)| exactly); group scales for token-uniform groups;
 *   encode   grid (tiles, heads, nseq), 512 threads: one tile of tt tokens
 *            (whole scale-group blocks and Q smoothing blocks) x all d
 *            channels; each thread holds 16 channels of a token per item
 *            (two 16-byte loads), subtracts the mean (Q block means computed
 *            in the tile, in token order, in double), reduces the group amax
 *            in shared memory (order-free bit max), and writes 16 codes with
 *            one 16-byte store (8 for int4) plus the group scales; or, for
 *            LAYOUT_TRANSPOSED, stages the codes as [d][tt] in shared memory
 *            and writes 16-byte runs along tokens (zero past the sequence).
 *
 * The mean equals the emulation's whenever the double sums are exact, which
 * they are for fp16 input whenever every partial sum stays below 2^29 in
 * magnitude (fp16 values are multiples of 2^-24), and for bf16 when the
 * values of a channel span less than 2^45 in magnitude; otherwise the order
 * of the double additions differs from the emulation's (token order) and the
 * fp32 mean may differ in its last bit.
 *
 * Anything else (fp32 input, unscaled formats, d not a multiple of 16, Q/K
 * groups split along channels, unaligned strides, Q block smoothing with
 * token-uniform groups, tiles that do not fit, no p.work where it is
 * needed) runs the portable kernels. */
#ifndef QATTN_KERNELS_QUANT_FAST_H
#define QATTN_KERNELS_QUANT_FAST_H

#include "quant_portable.h"

#define QATTN_QF_THREADS 512
#define QATTN_QF_ITEMS 2 /* 16-channel items per thread at most (template NI: 1 or 2) */
#define QATTN_QF_TILE(ni) (QATTN_QF_THREADS * (ni) * 16) /* elements per tile */
#define QATTN_QF_MAXTT 256                                      /* tokens per tile at most */
#define QATTN_QF_MAXD 1024
#define QATTN_QF_STAT_THREADS 256
#define QATTN_QF_SMEM 49152 /* dynamic shared memory at most (no opt-in) */

/* element j (0..7) of 8 fp16 / bf16 values in a 16-byte vector */
template <int IN>
static __device__ __forceinline__ float qattn_qf_dec(const uint4 &v, int j)
{
    const unsigned w = j < 2 ? v.x : j < 4 ? v.y : j < 6 ? v.z : v.w;
    if (IN == QATTN_FMT_BF16)
        return qattn_kfmt_u2f(j & 1 ? w & 0xffff0000u : w << 16);
    return qattn_port_f16_to_f32((unsigned short)(j & 1 ? w >> 16 : w & 0xffffu));
}

/* rounded to nearest even and clamped to [-qmax, qmax], NaN -> 0: the
 * integer encoder of numerics.h (qattn_kfmt_rne_int_clamp) */
static __device__ __forceinline__ int qattn_qf_int(float y, float qmax)
{
    if (y != y)
        return 0;
    y = y < -qmax ? -qmax : y;
    y = y > qmax ? qmax : y;
    return qattn_port_rint(y);
}

/* Codes without a division per element. r = qattn_qf_rcp(s) = fl(1 / s) is
 * one division per group; y = fl(v * r) is within 1.5 * 2^-23 |y| of the
 * quotient fl(v / s) that quant/ encodes (v / s rounded once directly, once
 * through r). |v| <= amax and s >= fl(amax / qmax), so |y| <= qmax (1 + 2^-22)
 * and the distance is below 2.3e-5 for qmax <= 127 (int) and 3 ulp of y
 * (e4m3). y and fl(v / s) get the same code unless a rounding boundary of the
 * code lies within that distance of y: then the exact quotient is encoded.
 * Sentinels keep the per-element test to one comparison: r = 0 for a zero
 * scale (int: y = 0, code 0; e4m3: y = 0 takes the exact path, which gives 0
 * for a zero scale), r = NaN (int) / 0 (e4m3) for scales below 2^-126
 * (where 1 / s would overflow): the exact path. */
static __device__ __forceinline__ float qattn_qf_rcp(int fmt, float s)
{
    if (!(s > 0.0f))
        return 0.0f;
    if (s < 0x1p-126f)
        return fmt == QATTN_FMT_E4M3 ? 0.0f : qattn_kfmt_u2f(QATTN_KFMT_QNAN);
    return 1.0f / s;
}

/* int8 / int4 code bits of v (low 8 / 4 bits): RNE(clamp(fl(v / s))). t = y +
 * 1.5 * 2^23 rounds y to an integer n (RNE) in its low mantissa bits; ties of
 * the integers are at k + 0.5, so |y - n| must stay below 0.5 - 2^-15 (a NaN
 * y fails the test too); |n| <= qmax needs no clamp (|y| < qmax + 0.5) */
static __device__ __forceinline__ unsigned qattn_qf_int_rcp(float v, float s, float r, float qmax)
{
    const float y = v * r;
    const float t = y + 12582912.0f;
    const float diff = y - (t - 12582912.0f);
    if (!(fabsf(diff) < 0.49996948f))
        return (unsigned)qattn_qf_int(s > 0.0f ? v / s : 0.0f, qmax);
    return qattn_kfmt_f2u(t);
}

/* a value with the e4m3 code of fl(v / s): y, unless y lies within 4 ulp
 * (fp32) of an e4m3 rounding boundary (low 20 mantissa bits 0x80000 in the
 * normal range) or below 2^-6 (e4m3 subnormals; also y = 0 from r = 0) */
static __device__ __forceinline__ float qattn_qf_div_e4m3(float v, float s, float r)
{
    const float y = v * r;
    const uint32_t a = qattn_kfmt_f2u(y) & QATTN_KFMT_ABS;
    if (a < 0x3C800000u || (a & 0xFFFFFu) - 0x7FFFCu <= 8u)
        return s > 0.0f ? v / s : 0.0f;
    return y;
}

/* the 8-bit code of y (already divided by its scale); int4 in the low nibble */
static __device__ __forceinline__ unsigned qattn_qf_code(int fmt, float y)
{
    switch (fmt) {
    case QATTN_FMT_INT8: return (unsigned)qattn_qf_int(y, 127.0f) & 0xffu;
    case QATTN_FMT_INT4: return (unsigned)qattn_qf_int(y, 7.0f) & 0xfu;
    case QATTN_FMT_E4M3: return qattn_port_e4m3x2(y, 0.0f) & 0xffu;
    default: return qattn_kfmt_e5m2_encode(y);
    }
}

/* qattn_kgroup_tok_index in 32-bit arithmetic (t < 2^31) */
static __device__ __forceinline__ int qattn_qf_tok_index(const qattn_group &g, int t)
{
    switch (g.tok) {
    case QATTN_TOK_TOKEN: return t;
    case QATTN_TOK_BLOCK:
    case QATTN_TOK_WARP: return t / g.b;
    case QATTN_TOK_THREAD: {
        const int blk = t / g.b, in = t - blk * g.b;
        return blk * (g.s / g.w) + (in % g.s) / g.w;
    }
    default: return 0;
    }
}

/* groups whose scale is shared by all tokens of a sequence */
static __host__ __device__ __forceinline__ int qattn_qf_uniform(qattn_group g)
{
    return g.tok == QATTN_TOK_TENSOR || g.tok == QATTN_TOK_CHANNEL;
}

static __host__ __device__ __forceinline__ int64_t qattn_qf_nchunk(const qattn_kernels_quant_params &p)
{
    return ((int64_t)p.seqlen + QATTN_KERNELS_QUANT_CHUNK - 1) / QATTN_KERNELS_QUANT_CHUNK;
}

/* ---- stats: grid (nchunk, heads, nseq), QATTN_QF_STAT_THREADS threads;
 * thread (r, cc) sums 8 channels over tokens r, r + R, ... of the chunk;
 * dynamic shared memory R * d * 16 bytes ---- */
template <int IN, int SUMS, int MINMAX> /* SUMS: smoothing over the sequence; MINMAX: uniform groups */
__global__ void __launch_bounds__(QATTN_QF_STAT_THREADS) qattn_qf_stats_kernel(qattn_kernels_quant_params p)
{
    QATTN_DYNAMIC_SHARED(double, qf_ssum);
    const int chunk = (int)blockIdx.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const int cols = p.d / 8, R = QATTN_QF_STAT_THREADS / cols;
    const int tid = (int)threadIdx.x, r = tid / cols, cc = tid % cols;
    float *smn = (float *)(qf_ssum + (size_t)R * p.d), *smx = smn + (size_t)R * p.d;
    const int64_t c0 = (int64_t)chunk * QATTN_KERNELS_QUANT_CHUNK;
    const int64_t c1 = c0 + QATTN_KERNELS_QUANT_CHUNK < n ? c0 + QATTN_KERNELS_QUANT_CHUNK : n;
    double s[8];
    float mn[8], mx[8];
    QATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        s[j] = 0.0;
        mn[j] = qattn_kfmt_u2f(QATTN_KFMT_INF);
        mx[j] = -qattn_kfmt_u2f(QATTN_KFMT_INF);
    }
    if (r < R) {
        const uint16_t *x = (const uint16_t *)p.x + (int64_t)b * p.x_stride_batch + t0 * p.x_stride_tok +
                            (int64_t)h * p.x_stride_head + cc * 8;
        int64_t t = c0 + r;
        for (; t + 3 * (int64_t)R < c1; t += 4 * (int64_t)R) { /* four loads in flight */
            uint4 v[4];
            QATTN_UNROLL
            for (int u = 0; u < 4; u++)
                v[u] = *(const uint4 *)(x + (t + u * (int64_t)R) * p.x_stride_tok);
            QATTN_UNROLL
            for (int u = 0; u < 4; u++)
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
            const uint4 v = *(const uint4 *)(x + t * p.x_stride_tok);
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
            qf_ssum[(size_t)r * p.d + cc * 8 + j] = s[j];
            smn[(size_t)r * p.d + cc * 8 + j] = mn[j];
            smx[(size_t)r * p.d + cc * 8 + j] = mx[j];
        }
    }
    __syncthreads();
    const int64_t nchunk = qattn_qf_nchunk(p);
    const int64_t o = (((int64_t)h * p.nseq + b) * nchunk + chunk) * p.d;
    const int64_t all = (int64_t)p.heads * p.nseq * nchunk * p.d;
    double *wsum = (double *)p.work;
    float *wmn = (float *)(wsum + all), *wmx = wmn + all;
    for (int c = tid; c < p.d; c += QATTN_QF_STAT_THREADS) {
        double a = 0.0;
        float lo = qattn_kfmt_u2f(QATTN_KFMT_INF), hi = -lo;
        for (int k = 0; k < R; k++) { /* rows in order */
            a += qf_ssum[(size_t)k * p.d + c];
            lo = smn[(size_t)k * p.d + c] < lo ? smn[(size_t)k * p.d + c] : lo;
            hi = smx[(size_t)k * p.d + c] > hi ? smx[(size_t)k * p.d + c] : hi;
        }
        wsum[o + c] = a;
        wmn[o + c] = lo;
        wmx[o + c] = hi;
    }
}

/* ---- combine: grid (heads, nseq), threads over channels ---- */
template <int IN>
__global__ void __launch_bounds__(QATTN_QF_STAT_THREADS) qattn_qf_combine_kernel(qattn_kernels_quant_params p)
{
    __shared__ unsigned qf_cmax[QATTN_QF_MAXD];
    const int h = (int)blockIdx.x, b = (int)blockIdx.y, tid = (int)threadIdx.x;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const int uniform = p.scale && qattn_qf_uniform(p.group);
    for (int g = tid; g < p.nch; g += QATTN_QF_STAT_THREADS)
        qf_cmax[g] = 0u;
    __syncthreads();
    const int64_t nchunk = qattn_qf_nchunk(p);
    const int64_t all = (int64_t)p.heads * p.nseq * nchunk * p.d;
    const int64_t o = ((int64_t)h * p.nseq + b) * nchunk * p.d;
    const double *wsum = (const double *)p.work;
    const float *wmn = (const float *)(wsum + all), *wmx = wmn + all;
    for (int c = tid; c < p.d; c += QATTN_QF_STAT_THREADS) {
        double a = 0.0;
        float lo = qattn_kfmt_u2f(QATTN_KFMT_INF), hi = -lo;
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
                atomicMax(&qf_cmax[qattn_kgroup_ch_index(p.group, c)], qattn_kfmt_f2u(am));
        }
    }
    __syncthreads();
    if (uniform)
        for (int g = tid; g < p.nch; g += QATTN_QF_STAT_THREADS)
            p.scale[((int64_t)h * p.nseq + b) * p.nch + g] =
                qattn_kfmt_scale_for(p.fmt, qattn_kfmt_u2f(qf_cmax[g]), p.group.e8m0);
}

/* ---- encode: grid (tiles, heads, nseq), QATTN_QF_THREADS threads; dynamic
 * shared memory: BLOCKS smoothing: the raw tile [tt][d] (16-bit) and the
 * block means [tt / mblock][d] (fp32); TRANSPOSED: codes [d][tt] ---- */
/* FMT 0: p.fmt at run time; SM: p.smooth; UNI: uniform groups; NI: items per
 * thread (1: tiles of 8192 elements, three blocks per multiprocessor, two
 * with Q block smoothing; 2: tiles of 16384 elements, two blocks) */
template <int IN, int FMT, int SM, int UNI, int NI>
__global__ void __launch_bounds__(QATTN_QF_THREADS, NI == 1 && SM != QATTN_KERNELS_SMOOTH_BLOCKS ? 3 : 2)
    qattn_qf_encode_kernel(qattn_kernels_quant_params p, int tt)
{
    QATTN_DYNAMIC_SHARED(uint4, qf_dyn4);
    unsigned char *qf_dyn = (unsigned char *)qf_dyn4;
    __shared__ float qf_scale[QATTN_QF_MAXD]; /* token-local: per group of the tile; uniform: per channel */
    __shared__ float qf_rcp[QATTN_QF_MAXD];   /* 1 / qf_scale (0 for a zero scale) */
    __shared__ float qf_mean[QATTN_QF_MAXD];  /* TOKENS smoothing: per channel */
    __shared__ unsigned qf_gmax[QATTN_QF_MAXTT];
    /* blocks in the reverse order of the stats kernel's: the first to run
     * read what the statistics read last, still in L2 */
    const int tile = (int)(gridDim.x - 1 - blockIdx.x), h = (int)(gridDim.y - 1 - blockIdx.y);
    const int b = (int)(gridDim.z - 1 - blockIdx.z), tid = (int)threadIdx.x;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const int d = p.d, cpr = d / 16, nitems = tt * cpr;
    const int uniform = UNI, fmt = FMT ? FMT : p.fmt;
    const int transposed = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED;
    const int blocks = SM == QATTN_KERNELS_SMOOTH_BLOCKS;
    const int64_t tb = (int64_t)tile * tt; /* first token of the tile, in the sequence */
    const int64_t hb = (int64_t)h * p.nseq + b;
    /* token-local groups of this tile: [g0, g0 + ngt) (tb is a multiple of the group's block) */
    const int64_t g0 = uniform ? 0 : qattn_kgroup_tok_index(p.group, tb);
    const int ngt = uniform ? 0 : (int)(qattn_kgroup_tok_index(p.group, tb + tt - 1) - g0 + 1);
    if (uniform)
        for (int c = tid; c < d; c += QATTN_QF_THREADS) {
            const float sc = p.scale[hb * p.nch + qattn_kgroup_ch_index(p.group, c)];
            qf_scale[c] = sc;
            qf_rcp[c] = qattn_qf_rcp(fmt, sc);
        }
    else
        for (int g = tid; g < ngt; g += QATTN_QF_THREADS)
            qf_gmax[g] = 0u;
    if (SM == QATTN_KERNELS_SMOOTH_TOKENS)
        for (int c = tid; c < d; c += QATTN_QF_THREADS)
            qf_mean[c] = p.mean[hb * d + c];

    /* item i: token tl, channels 16 * ch .. 16 * ch + 15; tokens run fastest
     * across lanes for the transposed store, channels otherwise */
    const uint16_t *x = (const uint16_t *)p.x + (int64_t)b * p.x_stride_batch + t0 * p.x_stride_tok +
                        (int64_t)h * p.x_stride_head;
    uint4 raw[NI][2];
    int tl[NI], ch[NI], ok[NI], gi[NI];
    QATTN_UNROLL
    for (int k = 0; k < NI; k++) {
        const int i = tid + k * QATTN_QF_THREADS;
        tl[k] = transposed ? i % tt : i / cpr;
        ch[k] = transposed ? i / tt : i % cpr;
        ok[k] = i < nitems && tb + tl[k] < n;
        gi[k] = uniform ? 0 : qattn_qf_tok_index(p.group, (int)tb + tl[k]) - (int)g0; /* group in the tile */
        if (ok[k]) {
            const uint16_t *src = x + (tb + tl[k]) * p.x_stride_tok + ch[k] * 16;
            raw[k][0] = *(const uint4 *)src;
            raw[k][1] = *(const uint4 *)(src + 8);
        } else {
            raw[k][0] = raw[k][1] = uint4{0u, 0u, 0u, 0u};
        }
    }
    float *bmean = (float *)0;
    if (blocks) { /* Q block means over the tile's blocks, each channel in token order */
        uint16_t *rt = (uint16_t *)qf_dyn;
        bmean = (float *)(qf_dyn + (size_t)tt * d * 2);
        QATTN_UNROLL
        for (int k = 0; k < NI; k++)
            if (tid + k * QATTN_QF_THREADS < nitems) {
                *(uint4 *)(rt + (size_t)tl[k] * d + ch[k] * 16) = raw[k][0];
                *(uint4 *)(rt + (size_t)tl[k] * d + ch[k] * 16 + 8) = raw[k][1];
            }
        __syncthreads();
        const int nbl = tt / p.mblock;
        for (int u = tid; u < nbl * d; u += QATTN_QF_THREADS) {
            const int bl = u / d, c = u % d;
            const int64_t mb = tb / p.mblock + bl, r0 = mb * p.mblock;
            const int64_t r1 = r0 + p.mblock < n ? r0 + p.mblock : n;
            double acc = 0.0;
            for (int64_t t = r0; t < r1; t++) {
                const uint16_t hv = rt[(size_t)(t - tb) * d + c];
                acc += (double)(IN == QATTN_FMT_BF16 ? qattn_kfmt_u2f((uint32_t)hv << 16) : qattn_port_f16_to_f32(hv));
            }
            const float m = r1 > r0 ? (float)(acc / (double)(r1 - r0)) : 0.0f;
            bmean[u] = m;
            if (mb < p.nmean)
                p.mean[(hb * p.nmean + mb) * d + c] = m;
        }
    }
    __syncthreads();

    /* x - mean (computed again for the codes: fewer registers), the
     * non-finite check, the group amax */
#define QATTN_QF_VALUE(k, j, f, out)                                                        \
    do {                                                                                   \
        float m_ = 0.0f;                                                                   \
        if (SM == QATTN_KERNELS_SMOOTH_TOKENS)                                             \
            m_ = qf_mean[ch[k] * 16 + (j)];                                                \
        else if (blocks)                                                                   \
            m_ = bmean[mrow[k] + ch[k] * 16 + (j)];                                        \
        out = SM ? (f) - m_ : (f);                                                         \
    } while (0)
    /* non-finite inputs: a 16-bit exponent field of all ones, two per word
     * (adding the field's lowest bit carries into the sign bit only then) */
    const unsigned emask = IN == QATTN_FMT_BF16 ? 0x7f807f80u : 0x7c007c00u;
    const unsigned elow = IN == QATTN_FMT_BF16 ? 0x00800080u : 0x04000400u;
    unsigned nonfin = 0u;
    QATTN_UNROLL
    for (int k = 0; k < NI; k++) {
        const uint4 *rw = raw[k];
        nonfin |= ((rw[0].x & emask) + elow) | ((rw[0].y & emask) + elow) | ((rw[0].z & emask) + elow) |
                  ((rw[0].w & emask) + elow) | ((rw[1].x & emask) + elow) | ((rw[1].y & emask) + elow) |
                  ((rw[1].z & emask) + elow) | ((rw[1].w & emask) + elow);
    }
    const int bad = (nonfin & 0x80008000u) != 0u;
    int mrow[NI];
    QATTN_UNROLL
    for (int k = 0; k < NI; k++)
        mrow[k] = blocks ? tl[k] / p.mblock * d : 0;
    QATTN_UNROLL
    for (int k = 0; k < NI; k++) {
        float am = 0.0f;
        QATTN_UNROLL
        for (int j = 0; j < 16; j++) {
            const float f = qattn_qf_dec<IN>(raw[k][j >> 3], j & 7);
            float vj;
            QATTN_QF_VALUE(k, j, f, vj);
            am = fmaxf(am, fabsf(vj)); /* NaN input: flagged below */
        }
        if (!uniform && ok[k] && am > 0.0f)
            atomicMax(&qf_gmax[gi[k]], qattn_kfmt_f2u(am));
    }
    if (bad && p.nonfinite)
        atomicOr(p.nonfinite, 1);
    if (!uniform) {
        __syncthreads();
        for (int g = tid; g < ngt; g += QATTN_QF_THREADS) {
            const float s = qattn_kfmt_scale_for(fmt, qattn_kfmt_u2f(qf_gmax[g]), p.group.e8m0);
            qf_scale[g] = s;
            qf_rcp[g] = qattn_qf_rcp(fmt, s);
            if (g0 + g < p.ntok)
                p.scale[hb * p.ntok + g0 + g] = s;
        }
    }
    __syncthreads();

    /* codes */
    uint8_t *stage = (uint8_t *)qf_dyn; /* TRANSPOSED: [d][tt] */
    QATTN_UNROLL
    for (int k = 0; k < NI; k++) {
        const int i = tid + k * QATTN_QF_THREADS;
        if (i >= nitems)
            continue;
        unsigned w[4] = {0u, 0u, 0u, 0u};
        if (ok[k]) {
            const float sg = uniform ? 0.0f : qf_scale[gi[k]], rg = uniform ? 0.0f : qf_rcp[gi[k]];
            QATTN_UNROLL
            for (int j = 0; j < 16; j += 2) {
                const float s0 = uniform ? qf_scale[ch[k] * 16 + j] : sg;
                const float s1 = uniform ? qf_scale[ch[k] * 16 + j + 1] : sg;
                const float r0 = uniform ? qf_rcp[ch[k] * 16 + j] : rg;
                const float r1 = uniform ? qf_rcp[ch[k] * 16 + j + 1] : rg;
                float v0, v1;
                QATTN_QF_VALUE(k, j, qattn_qf_dec<IN>(raw[k][j >> 3], j & 7), v0);
                QATTN_QF_VALUE(k, j + 1, qattn_qf_dec<IN>(raw[k][j >> 3], (j + 1) & 7), v1);
                unsigned c0, c1;
                if (fmt == QATTN_FMT_E4M3) { /* both at once */
                    const unsigned pr =
                        qattn_port_e4m3x2(qattn_qf_div_e4m3(v0, s0, r0), qattn_qf_div_e4m3(v1, s1, r1));
                    c0 = pr & 0xffu;
                    c1 = pr >> 8;
                } else if (fmt == QATTN_FMT_INT8 || fmt == QATTN_FMT_INT4) {
                    const float q = fmt == QATTN_FMT_INT8 ? 127.0f : 7.0f;
                    const unsigned mask = fmt == QATTN_FMT_INT8 ? 0xffu : 0xfu;
                    c0 = qattn_qf_int_rcp(v0, s0, r0, q) & mask;
                    c1 = qattn_qf_int_rcp(v1, s1, r1, q) & mask;
                } else {
                    c0 = s0 > 0.0f ? qattn_qf_code(fmt, v0 / s0) : 0u;
                    c1 = s1 > 0.0f ? qattn_qf_code(fmt, v1 / s1) : 0u;
                }
                if (fmt == QATTN_FMT_INT4)
                    w[j >> 3] |= (c0 | (c1 << 4)) << ((j & 7) * 4);
                else
                    w[j >> 2] |= (c0 | (c1 << 8)) << ((j & 3) * 8);
            }
        }
        if (transposed) {
            QATTN_UNROLL
            for (int j = 0; j < 16; j++)
                stage[(size_t)(ch[k] * 16 + j) * tt + tl[k]] = (uint8_t)(w[j >> 2] >> ((j & 3) * 8));
        } else if (ok[k]) {
            uint8_t *dst = (uint8_t *)p.codes + ((int64_t)h * p.tokens + toff + tb + tl[k]) * p.row;
            if (fmt == QATTN_FMT_INT4)
                *(uint2 *)(dst + ch[k] * 8) = uint2{w[0], w[1]};
            else
                *(uint4 *)(dst + ch[k] * 16) = uint4{w[0], w[1], w[2], w[3]};
        }
    }
    if (transposed) {
        __syncthreads();
        const int segs = tt / 16;
        uint8_t *dst = (uint8_t *)p.codes + hb * d * p.npad + tb;
        for (int u = tid; u < d * segs; u += QATTN_QF_THREADS) {
            const int c = u / segs, sg = u % segs;
            *(uint4 *)(dst + (int64_t)c * p.npad + sg * 16) = *(const uint4 *)(stage + (size_t)c * tt + sg * 16);
        }
    }
}
#undef QATTN_QF_VALUE

/* the encode kernel for p: int8 and e4m3 compiled for their format, the
 * others (int4, e5m2) with the format read at run time */
typedef void (*qattn_qf_encode_fn)(qattn_kernels_quant_params, int);
template <int IN, int FMT, int SM, int NI>
static qattn_qf_encode_fn qattn_qf_pick_uni(const qattn_kernels_quant_params &p)
{
    return qattn_qf_uniform(p.group) ? &qattn_qf_encode_kernel<IN, FMT, SM, 1, NI>
                                     : &qattn_qf_encode_kernel<IN, FMT, SM, 0, NI>;
}
template <int IN, int FMT, int NI>
static qattn_qf_encode_fn qattn_qf_pick_smooth(const qattn_kernels_quant_params &p)
{
    if (p.smooth == QATTN_KERNELS_SMOOTH_TOKENS)
        return qattn_qf_pick_uni<IN, FMT, QATTN_KERNELS_SMOOTH_TOKENS, NI>(p);
    if (p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS) /* token-local groups only (qattn_qf_plan) */
        return &qattn_qf_encode_kernel<IN, FMT, QATTN_KERNELS_SMOOTH_BLOCKS, 0, NI>;
    return qattn_qf_pick_uni<IN, FMT, QATTN_KERNELS_SMOOTH_NONE, NI>(p);
}
template <int IN, int NI>
static qattn_qf_encode_fn qattn_qf_pick_fmt(const qattn_kernels_quant_params &p)
{
    if (p.fmt == QATTN_FMT_INT8)
        return qattn_qf_pick_smooth<IN, QATTN_FMT_INT8, NI>(p);
    if (p.fmt == QATTN_FMT_E4M3)
        return qattn_qf_pick_smooth<IN, QATTN_FMT_E4M3, NI>(p);
    return qattn_qf_pick_smooth<IN, 0, NI>(p);
}

static int qattn_qf_gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* the tile (tokens) and dynamic shared memory of the encode kernel, or 0 if
 * the fast path does not take p */
static int qattn_qf_plan(const qattn_kernels_quant_params &p, int *tt, size_t *smem, int *ni)
{
    const int uniform = qattn_qf_uniform(p.group);
    const int transposed = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED;
    if (!qattn_kfmt_is_scaled(p.fmt) || !p.scale || p.d % 16 || p.d > QATTN_QF_MAXD)
        return 0;
    if ((p.in != QATTN_FMT_FP16 && p.in != QATTN_FMT_BF16) || ((uintptr_t)p.x & 15) || ((uintptr_t)p.codes & 15) ||
        (p.x_stride_tok | p.x_stride_head | p.x_stride_batch) & 7)
        return 0;
    if (!uniform && p.group.ch > 0) /* token-local groups split along channels */
        return 0;
    if (uniform && p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS)
        return 0;
    if ((uniform || p.smooth == QATTN_KERNELS_SMOOTH_TOKENS) && !p.work)
        return 0;
    if (transposed && (p.fmt == QATTN_FMT_INT4 || p.npad % 128))
        return 0;
    int period = 1; /* tokens of one block of token groups */
    if (p.group.tok == QATTN_TOK_BLOCK || p.group.tok == QATTN_TOK_WARP || p.group.tok == QATTN_TOK_THREAD)
        period = p.group.b;
    if (period <= 0)
        return 0;
    if (p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS)
        period = period / qattn_qf_gcd(period, p.mblock) * p.mblock;
    int t = 0, n_i = 1;
    for (; n_i <= QATTN_QF_ITEMS && !t; n_i++) { /* one item per thread if the tile allows */
        const int cap = QATTN_QF_TILE(n_i) / p.d < QATTN_QF_MAXTT ? QATTN_QF_TILE(n_i) / p.d : QATTN_QF_MAXTT;
        if (transposed) { /* a power of two that divides 128 (and so npad) */
            for (int c = 128; c >= 16 && !t; c /= 2)
                if (c <= cap && c % period == 0)
                    t = c;
        } else {
            t = period > cap ? 0 : cap / period * period;
        }
    }
    n_i--;
    if (t <= 0)
        return 0;
    size_t sm = 0;
    if (p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS)
        sm = (size_t)t * p.d * 2 + (size_t)(t / p.mblock) * p.d * 4;
    if (transposed)
        sm = (size_t)t * p.d > sm ? (size_t)t * p.d : sm;
    if (sm > QATTN_QF_SMEM)
        return 0;
    *tt = t;
    *smem = sm;
    *ni = n_i;
    return 1;
}

template <int IN>
static int qattn_quant_fast_launch(const qattn_kernels_quant_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_quant_params p = *pp;
    hipStream_t st = (hipStream_t)stream;
    int tt = 0, ni = 1;
    size_t smem = 0;
    if (!qattn_qf_plan(p, &tt, &smem, &ni))
        return qattn_quant_portable_launch<IN>(pp, stream, err);
    if (p.heads <= 0 || p.nseq <= 0 || p.seqlen < 0 || p.heads > 65535 || p.nseq > 65535)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: bad shape (heads %d, nseq %d, d %d, seqlen %d)", p.heads,
                             p.nseq, p.d, p.seqlen);
    if (p.seqlen == 0)
        return QATTN_OK;
    if (qattn_qf_uniform(p.group) || p.smooth == QATTN_KERNELS_SMOOTH_TOKENS) {
        const int R = QATTN_QF_STAT_THREADS / (p.d / 8);
        const int sums = p.smooth == QATTN_KERNELS_SMOOTH_TOKENS, minmax = qattn_qf_uniform(p.group);
        void (*ks)(qattn_kernels_quant_params) = sums && minmax ? &qattn_qf_stats_kernel<IN, 1, 1>
                                                 : sums         ? &qattn_qf_stats_kernel<IN, 1, 0>
                                                                : &qattn_qf_stats_kernel<IN, 0, 1>;
        hipLaunchKernelGGL(ks, dim3((unsigned)qattn_qf_nchunk(p), (unsigned)p.heads, (unsigned)p.nseq),
                           dim3(QATTN_QF_STAT_THREADS), (size_t)R * p.d * 16, st, p);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant stats kernel launch");
        void (*kc)(qattn_kernels_quant_params) = &qattn_qf_combine_kernel<IN>;
        hipLaunchKernelGGL(kc, dim3((unsigned)p.heads, (unsigned)p.nseq), dim3(QATTN_QF_STAT_THREADS), 0, st, p);
        QATTN_QUANT_CHECK(hipGetLastError(), "quant combine kernel launch");
    }
    const int64_t span = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED ? p.npad : p.seqlen;
    void (*ke)(qattn_kernels_quant_params, int) = ni == 1 ? qattn_qf_pick_fmt<IN, 1>(p) : qattn_qf_pick_fmt<IN, 2>(p);
    hipLaunchKernelGGL(ke, dim3((unsigned)((span + tt - 1) / tt), (unsigned)p.heads, (unsigned)p.nseq),
                       dim3(QATTN_QF_THREADS), smem, st, p, tt);
    QATTN_QUANT_CHECK(hipGetLastError(), "quant encode kernel launch");
    return QATTN_OK;
}

/* one instance: extern "C" launch function NAME for input dtype IN (fp16,
 * bf16), and NAME_takes(p): 1 when the fused kernels run p (0: the portable
 * ones do), for the tests */
#define QATTN_QUANT_FAST_INSTANCE(IN, NAME)                                                           \
    extern "C" int NAME(const qattn_kernels_quant_params *p, void *stream, qattn_err *err)           \
    {                                                                                                 \
        return qattn_quant_fast_launch<IN>(p, stream, err);                                          \
    }                                                                                                 \
    extern "C" int NAME##_takes(const qattn_kernels_quant_params *p)                                 \
    {                                                                                                 \
        int tt, ni;                                                                                   \
        size_t smem;                                                                                  \
        return p->in == IN && qattn_qf_plan(*p, &tt, &smem, &ni);                                     \
    }

#endif
