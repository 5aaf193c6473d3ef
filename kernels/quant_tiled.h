/* Quantization, fast path: the tiled encode kernel (route `tiled`, for any
 * operand the fast path takes): a block per tile of tt tokens x d channels,
 * 512 threads, 16 channels of a token per item; and the fast path's plan
 * (qattn_qf_plan: whether it takes p at all, and the tile). */
#ifndef QATTN_KERNELS_QUANT_TILED_H
#define QATTN_KERNELS_QUANT_TILED_H

#include "quant_groups.h"

#define QATTN_QF_THREADS 512
#define QATTN_QF_ITEMS 2 /* 16-channel items per thread at most (template NI: 1 or 2) */
#define QATTN_QF_TILE(ni) (QATTN_QF_THREADS * (ni) * 16) /* elements per tile */
#define QATTN_QF_MAXTT 256                                      /* tokens per tile at most */
#define QATTN_QF_SMEM 49152 /* dynamic shared memory at most (no opt-in) */

/* shared memory of the encode: scale and rcp [max(d, QATTN_QF_MAXTT)]
 * (token-local groups: per group of the tile; uniform: per channel), mean
 * [d] (TOKENS smoothing); the per-channel arrays as [16][d / 16] (channel
 * 16 ch + j at j * d / 16 + ch: the lanes of a warp that read channel j of
 * their items ch, ch + 1, ... hit consecutive words, not one bank in 16), gmax [QATTN_QF_MAXTT] (group amax bits), dyn (the
 * dynamic part: BLOCKS: raw tile and block means; TRANSPOSED: codes) */
typedef struct qattn_qf_shared {
    float *scale, *rcp, *mean;
    unsigned *gmax;
    unsigned char *dyn;
} qattn_qf_shared;

/* the scales of token-uniform groups and the TOKENS means of (h, b) into
 * shared memory, read through L2 (volatile: another block wrote them) */
template <int SM, int UNI>
static __device__ __forceinline__ void qattn_qf_encode_prep(const qattn_kernels_quant_params &p, int64_t hb, int fmt,
                                                            const qattn_qf_shared &sh, int nthr)
{
    const int tid = (int)threadIdx.x;
    if (UNI)
        for (int c = tid; c < p.d; c += nthr) {
            const float sc = ((const volatile float *)p.scale)[hb * p.nch + qattn_num_group_ch_index(p.group, c)];
            sh.scale[(c & 15) * (p.d / 16) + (c >> 4)] = sc; /* [16][d / 16]: see qattn_qf_shared */
            sh.rcp[(c & 15) * (p.d / 16) + (c >> 4)] = qattn_qf_rcp(fmt, sc);
        }
    if (SM == QATTN_KERNELS_SMOOTH_TOKENS)
        for (int c = tid; c < p.d; c += nthr)
            sh.mean[(c & 15) * (p.d / 16) + (c >> 4)] = ((const volatile float *)p.mean)[hb * p.d + c];
}

/* ---- encode one tile of tt tokens (tile `tile` of sequence b, head h) by
 * QATTN_QF_THREADS threads, input rows from global memory (qattn_qf_ld) ---- */
template <int IN, int FMT, int SM, int UNI, int NI>
static __device__ __forceinline__ void qattn_qf_encode_tile(const qattn_kernels_quant_params &p, int tt, int tile,
                                                            int h, int b, int64_t t0, int64_t n, int64_t toff,
                                                            const qattn_qf_shared &sh)
{
    float *qf_scale = sh.scale, *qf_rcp = sh.rcp, *qf_mean = sh.mean;
    unsigned *qf_gmax = sh.gmax;
    unsigned char *qf_dyn = sh.dyn;
    const int tid = (int)threadIdx.x;
    const int d = p.d, cpr = d / 16, nitems = tt * cpr;
    const int uniform = UNI, fmt = FMT ? FMT : p.fmt;
    const int transposed = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED;
    const int blocks = SM == QATTN_KERNELS_SMOOTH_BLOCKS;
    const int64_t tb = (int64_t)tile * tt; /* first token of the tile, in the sequence */
    const int64_t hb = (int64_t)h * p.nseq + b;
    /* token-local groups of this tile: [g0, g0 + ngt) (tb is a multiple of the group's block) */
    const int64_t g0 = uniform ? 0 : qattn_num_group_tok_index(p.group, tb);
    const int ngt = uniform ? 0 : (int)(qattn_num_group_tok_index(p.group, tb + tt - 1) - g0 + 1);
    if (!uniform)
        for (int g = tid; g < ngt; g += QATTN_QF_THREADS)
            qf_gmax[g] = 0u;

    /* item i: token tl, channels 16 * ch .. 16 * ch + 15; tokens run fastest
     * across lanes for the transposed store, channels otherwise */
    const uint16_t *x = qattn_qf_seq_x(p, b, t0, h);
    const int64_t stride = p.x_stride_tok;
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
            raw[k][0] = qattn_qf_ld(x, stride, tb + tl[k], 2 * ch[k]);
            raw[k][1] = qattn_qf_ld(x, stride, tb + tl[k], 2 * ch[k] + 1);
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
                acc += (double)(IN == QATTN_FMT_BF16 ? qattn_num_u2f((uint32_t)hv << 16) : qattn_port_f16_to_f32(hv));
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
            m_ = qf_mean[(j) * cpr + ch[k]];                                               \
        else if (blocks)                                                                   \
            m_ = bmean[mrow[k] + ch[k] * 16 + (j)];                                        \
        out = SM ? (f) - m_ : (f);                                                         \
    } while (0)
    unsigned nonfin = 0u;
    QATTN_UNROLL
    for (int k = 0; k < NI; k++)
        nonfin |= qattn_qf_nonfin<IN>(raw[k][0]) | qattn_qf_nonfin<IN>(raw[k][1]);
    const int bad = (nonfin & QATTN_QF_NONFIN_BITS) != 0u;
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
            atomicMax(&qf_gmax[gi[k]], qattn_num_f2u(am));
    }
    if (bad && p.nonfinite)
        atomicOr(p.nonfinite, 1);
    if (!uniform) {
        __syncthreads();
        qattn_qf_group_scales(p, fmt, qf_gmax, qf_scale, qf_rcp, ngt, g0, hb, QATTN_QF_THREADS);
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
                const float s0 = uniform ? qf_scale[j * cpr + ch[k]] : sg;
                const float s1 = uniform ? qf_scale[(j + 1) * cpr + ch[k]] : sg;
                const float r0 = uniform ? qf_rcp[j * cpr + ch[k]] : rg;
                const float r1 = uniform ? qf_rcp[(j + 1) * cpr + ch[k]] : rg;
                float v0, v1;
                QATTN_QF_VALUE(k, j, qattn_qf_dec<IN>(raw[k][j >> 3], j & 7), v0);
                QATTN_QF_VALUE(k, j + 1, qattn_qf_dec<IN>(raw[k][j >> 3], (j + 1) & 7), v1);
                const unsigned pr = qattn_qf_code2(fmt, v0, s0, r0, v1, s1, r1);
                if (fmt == QATTN_FMT_INT4)
                    w[j >> 3] |= pr << ((j & 7) * 4);
                else
                    w[j >> 2] |= pr << ((j & 3) * 8);
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
    __shared__ float qf_scale[QATTN_QF_MAXD];
    __shared__ float qf_rcp[QATTN_QF_MAXD];
    __shared__ float qf_mean[QATTN_QF_MAXD];
    __shared__ unsigned qf_gmax[QATTN_QF_MAXTT];
    const qattn_qf_shared sh = {qf_scale, qf_rcp, qf_mean, qf_gmax, (unsigned char *)qf_dyn4};
    /* blocks in the reverse order of the stats kernel's: the first to run
     * read what the statistics read last, still in L2 */
    const int tile = (int)(gridDim.x - 1 - blockIdx.x), h = (int)(gridDim.y - 1 - blockIdx.y);
    const int b = (int)(gridDim.z - 1 - blockIdx.z);
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    qattn_qf_encode_prep<SM, UNI>(p, (int64_t)h * p.nseq + b, FMT ? FMT : p.fmt, sh, QATTN_QF_THREADS);
    qattn_qf_encode_tile<IN, FMT, SM, UNI, NI>(p, tt, tile, h, b, t0, n, toff, sh);
}

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
    if (!qattn_num_is_scaled(p.fmt) || !p.scale || p.d % 16 || p.d > QATTN_QF_MAXD)
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
    int period = qattn_qf_period(p.group);
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

#endif
