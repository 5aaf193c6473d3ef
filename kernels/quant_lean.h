/* Quantization, fast path: the lean encode kernel (route `lean`; d 64 /
 * 128, no Q block smoothing), its arguments and the V^T stage it shares with
 * the streamed kernel (quant_stream.h). */
#ifndef QATTN_KERNELS_QUANT_LEAN_H
#define QATTN_KERNELS_QUANT_LEAN_H

#include "quant_groups.h"

/* Row maxima of the 8 rows a lane holds, over the L = 2^LC lanes of each
 * row (lane bits 0 .. LC - 1): a reduce-scatter, 4 + 2 + 1 shuffles that
 * halve the rows each step (and one more for L = 16), instead of 8 x LC.
 * Lane c ends with the maximum of row qattn_qs_rowmax_row<LC>(c) (for
 * L = 16, lanes c and c ^ 1 with the same row). */
template <int LC>
static __device__ __forceinline__ int qattn_qs_rowmax_row(int c)
{
    return ((c >> (LC - 1)) & 1) * 4 + ((c >> (LC - 2)) & 1) * 2 + ((c >> (LC - 3)) & 1);
}
template <int LC>
static __device__ __forceinline__ float qattn_qs_rowmax(const float (&am)[8], int c)
{
    const bool b2 = (c >> (LC - 1)) & 1, b1 = (c >> (LC - 2)) & 1, b0 = (c >> (LC - 3)) & 1;
    float a4[4], a2[2];
    QATTN_UNROLL
    for (int i = 0; i < 4; i++)
        a4[i] = fmaxf(b2 ? am[4 + i] : am[i], __shfl_xor(b2 ? am[i] : am[4 + i], 1 << (LC - 1)));
    QATTN_UNROLL
    for (int i = 0; i < 2; i++)
        a2[i] = fmaxf(b1 ? a4[2 + i] : a4[i], __shfl_xor(b1 ? a4[i] : a4[2 + i], 1 << (LC - 2)));
    float a1 = fmaxf(b0 ? a2[1] : a2[0], __shfl_xor(b0 ? a2[0] : a2[1], 1 << (LC - 3)));
    QATTN_UNROLL
    for (int o = 1; o < (1 << (LC - 3)); o <<= 1)
        a1 = fmaxf(a1, __shfl_xor(a1, o));
    return a1;
}

/* ---- lean encode, d = 8 << LC (64 or 128), no Q block smoothing: grid
 * (tiles of QATTN_QF_LTT tokens, heads, nseq), 16 << LC threads (d / 16
 * warps). Lane (k, c) of a warp (k = lane >> LC, c = lane & (2^LC - 1))
 * holds channels 8 c .. 8 c + 7 of the rows r0 + u, u = 0..7, r0 = warp * 8
 * * RPI + 8 k (RPI = 32 >> LC rows per load, so every warp load reads whole
 * rows): one 16-byte load per row, all eight in flight at once, and no
 * integer division (the rows' groups and the channel groups come from the
 * host, qattn_qf_lean_args).
 * The same codes, scales, means and flags as qattn_qf_encode_tile:
 *   TR 0 (rows layout): token-local groups (UNI 0: the rows' amax, on
 *        16-bit magnitudes when unsmoothed, reduced over their 2^LC lanes
 *        by the reduce-scatter butterfly qattn_qs_rowmax, one shared
 *        atomicMax per row) or
 *        token-uniform ones (UNI 1: a lane's 8 channel scales in
 *        registers); 8 codes of a row per lane in one 8-byte store (4 for
 *        int4); int8 / e4m3 codes by brackets (qattn_qs_code8), the other
 *        formats by qattn_qf_code8;
 *   TR 1 (LAYOUT_TRANSPOSED, UNI 1, 8-bit codes): a channel's codes of the
 *        lane's 8 rows packed along tokens into 8 bytes (zero past the
 *        sequence), staged [d][QATTN_QF_LTT] in shared memory in 8-byte
 *        slots swizzled by channel (slot ^ c: no bank conflicts at d = 128)
 *        and written in 16-byte runs along tokens. ---- */
#define QATTN_QF_LTT 128
/* what a lean encode block would otherwise derive with integer divisions
 * (qattn_qf_lean_args_of; the tiles start on group blocks) */
typedef struct qattn_qf_lean_args {
    int gpt;     /* token-local groups: group indices per tile (the tile's first row: tile * gpt) */
    int ngt;     /* token-local groups: the tile's rows touch groups [0, ngt) of it */
    int chshift; /* uniform groups: channel c in group c >> chshift (31: one group), -1: c / group.ch */
    unsigned char grp[QATTN_QF_LTT]; /* token-local groups: group of tile row r, in the tile */
} qattn_qf_lean_args;

/* A staged tile of V^T codes to global memory: stage holds D channels x
 * QATTN_QF_LTT tokens as 8-byte slots [D][SL] (SL = QATTN_QF_LTT / 8), the
 * slot of tokens 8s .. 8s + 7 of channel ch at s ^ (c & (SL - 1)) (c = ch >> 3);
 * so slots 2m, 2m + 1 of channel ch are the 16-byte unit m ^ (f >> 1)
 * (f = c & (SL - 1)), halves swapped when f is odd. Channel ch goes to
 * dst + ch * npad in 16-byte runs; ST_STREAM: with the streaming store hint. */
template <int D, int NT, int ST_STREAM>
static __device__ __forceinline__ void qattn_qf_vt_flush(const uint4 *stage, uint8_t *dst, int64_t npad, int tid)
{
    enum { SL = QATTN_QF_LTT / 8 };
    for (int q = tid; q < D * SL / 2; q += NT) {
        const int ch = q / (SL / 2), m = q % (SL / 2), f = (ch >> 3) & (SL - 1);
        const uint4 v = stage[ch * (SL / 2) + (m ^ (f >> 1))];
        uint4 *to = (uint4 *)(dst + (int64_t)ch * npad + 16 * m);
        const uint4 w = f & 1 ? uint4{v.z, v.w, v.x, v.y} : v;
        if (ST_STREAM)
            qattn_port_st_stream(to, w);
        else
            *to = w;
    }
}

/* V^T (the lean and the streamed kernel): a lane's codes of its 8 rows
 * (tokens) in its 8 channels, channel c * 8 + j's packed along tokens into
 * its 8-byte slot of the stage, zero past the sequence (nv rows inside), by
 * qattn_qf_code8_of (per channel: scale sc, rcp or lower bracket r, upper
 * bracket h); the rare channels whose brackets disagree again from the
 * exact quotients. e4m3: every value by the correction step
 * (qattn_num_quot), when all 8 scales allow it (qattn_num_quot_ok), else every
 * value by the exact path. On the benchmark's V and on the shipped
 * activations, 21% and 13% of the warps' rows had a bracket pair that
 * disagreed, which sent the whole warp through the exact path
 * (kernels/LOG.md, 2026-11-25). val(u, j): row u's smoothed value of channel j. */
template <int FMT, int SL, class VAL>
static __device__ __forceinline__ void qattn_qf_vt_codes(int fmt, uint2 *stage, int slot, int c, int nv,
                                                         const float (&sc)[8], const float (&r)[8],
                                                         const float (&h)[8], VAL val)
{
    enum { BRK = FMT == QATTN_FMT_INT8 || FMT == QATTN_FMT_INT4 || FMT == QATTN_FMT_E4M3 };
    const unsigned keep0 = nv >= 4 ? 0xffffffffu : nv > 0 ? 0xffffffffu >> (32 - 8 * nv) : 0u;
    const unsigned keep1 = nv >= 8 ? 0xffffffffu : nv > 4 ? 0xffffffffu >> (64 - 8 * nv) : 0u;
    uint2 *sp = stage + c * 8 * SL + slot; /* channel c * 8 + j's slot: sp[j * SL] */
    auto col = [&](int j, float (&v)[8], float (&s8)[8], float (&r8)[8]) { /* channel j: values, scale, r */
        QATTN_UNROLL
        for (int u = 0; u < 8; u++) {
            v[u] = val(u, j);
            s8[u] = sc[j];
            r8[u] = r[j];
        }
    };
    auto put = [&](int j, uint2 w) { sp[j * SL] = uint2{w.x & keep0, w.y & keep1}; };
    auto exact = [&](int j) {
        float v[8], s8[8], r8[8];
        col(j, v, s8, r8);
        put(j, qattn_qs_code8_exact<FMT>(v, s8, r8));
    };
    if (FMT == QATTN_FMT_E4M3) { /* no brackets: every value by the correction step (qattn_num_quot) */
        bool mk = true;
        QATTN_UNROLL
        for (int j = 0; j < 8; j++)
            mk = mk && qattn_num_quot_ok(sc[j]) != 0;
        if (mk) {
            QATTN_UNROLL
            for (int j = 0; j < 8; j++) {
                float v[8], s8[8], r8[8];
                col(j, v, s8, r8);
                const float rr = qattn_qs_brk_rcp(r[j]); /* r: the lower bracket */
                unsigned a[4];
                QATTN_UNROLL
                for (int u = 0; u < 4; u++)
                    a[u] = qattn_port_e4m3x2(qattn_num_quot(v[2 * u], sc[j], rr),
                                             qattn_num_quot(v[2 * u + 1], sc[j], rr));
                put(j, uint2{a[0] | a[1] << 16, a[2] | a[3] << 16});
            }
        } else { /* a scale out of range (zero, tiny, non-finite): every value by the exact path */
            QATTN_UNROLL
            for (int j = 0; j < 8; j++)
                exact(j);
        }
        return;
    }
    unsigned dm = 0u;
    QATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        float v[8], s8[8], r8[8], h8[8];
        col(j, v, s8, r8);
        QATTN_UNROLL
        for (int u = 0; u < 8; u++)
            h8[u] = h[j];
        unsigned dd;
        put(j, qattn_qf_code8_of<FMT>(fmt, v, s8, r8, h8, dd));
        dm |= dd ? 1u << j : 0u;
    }
    if (BRK && dm)
        QATTN_UNROLL
        for (int j = 0; j < 8; j++)
            if (dm >> j & 1u)
                exact(j);
}

template <int IN, int FMT, int SM, int UNI, int TR, int LC>
__global__ void __launch_bounds__(16 << LC, 48 >> LC) /* 85 registers: 6 warps per scheduler */
    qattn_qf_lean_kernel(qattn_kernels_quant_params p, qattn_qf_lean_args la)
{
    enum {
        L = 1 << LC, RPI = 32 >> LC, NT = 16 << LC, D = 8 << LC, TT = QATTN_QF_LTT, SL = QATTN_QF_LTT / 8,
        BRK = FMT == QATTN_FMT_INT8 || FMT == QATTN_FMT_E4M3, /* codes by brackets (qattn_qs_code8) */
        M16 = !UNI && !SM                                     /* row maxima of the 16-bit magnitudes */
    };
    __shared__ float ls_scale[TT], ls_rcp[TT], ls_hi[BRK ? TT : 1]; /* BRK: ls_rcp, ls_hi the brackets */
    __shared__ unsigned ls_gmax[TT];
    __shared__ uint4 ls_stage[TR ? D * SL / 2 : 1]; /* TR: [D][SL] 8-byte slots */
    qattn_port_dependents_go(); /* a kernel launched to overlap this one may start its blocks */
    const int tid = (int)threadIdx.x, lane = tid & 31, c = lane & (L - 1), k = lane >> LC;
    const int r0 = (tid >> 5) * 8 * RPI + 8 * k;
    /* blocks in the reverse order of the stats kernel's: the first to run
     * read what the statistics read last, still in L2 */
    const int tile = (int)(gridDim.x - 1 - blockIdx.x), h = (int)(gridDim.y - 1 - blockIdx.y);
    const int b = (int)(gridDim.z - 1 - blockIdx.z);
    const int fmt = FMT ? FMT : p.fmt;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const int64_t hb = (int64_t)h * p.nseq + b, tb = (int64_t)tile * TT, left = n - tb - r0;
    const int nv = left < 0 ? 0 : left > 8 ? 8 : (int)left; /* the lane's rows inside the sequence */
    const uint16_t *x = qattn_qf_seq_x(p, b, t0, h) + (tb + r0) * p.x_stride_tok + c * 8;
    uint4 raw[8];
    QATTN_UNROLL
    for (int u = 0; u < 8; u++)
        raw[u] = u < nv ? *(const uint4 *)(x + u * p.x_stride_tok) : uint4{0u, 0u, 0u, 0u};
    /* per channel: mean, scale, and rcp (first form) or the brackets rc, hi (BRK) */
    float mean[8], sc[8], rc[8], hi[8];
    QATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        mean[j] = SM == QATTN_KERNELS_SMOOTH_TOKENS ? p.mean[hb * D + c * 8 + j] : 0.0f;
        const int cg = la.chshift >= 0 ? (c * 8 + j) >> la.chshift : (c * 8 + j) / p.group.ch;
        sc[j] = UNI ? p.scale[hb * p.nch + cg] : 0.0f;
        rc[j] = hi[j] = 0.0f;
        if (UNI && BRK)
            qattn_qs_brk(sc[j], rc[j], hi[j]);
        else if (UNI)
            rc[j] = qattn_qf_rcp(fmt, sc[j]);
    }
    unsigned nonfin = 0u;
    if (!M16) { /* M16: from the row maxima below */
        QATTN_UNROLL
        for (int u = 0; u < 8; u++)
            nonfin |= qattn_qf_nonfin<IN>(raw[u]) & QATTN_QF_NONFIN_BITS;
    }
#define QATTN_QF_LVAL(u, j) (SM ? qattn_qf_dec<IN>(raw[u], j) - mean[j] : qattn_qf_dec<IN>(raw[u], j))

    if (!UNI) { /* token-local groups: the tile starts on a group block (qattn_qf_lean_takes) */
        const int64_t g0 = (int64_t)tile * la.gpt;
        const int ngt = la.ngt;
        for (int g = tid; g < ngt; g += NT)
            ls_gmax[g] = 0u;
        __syncthreads();
        float am[8]; /* the lane's part of each row's amax */
        QATTN_UNROLL
        for (int u = 0; u < 8; u++) {
            if (M16) { /* the largest 16-bit magnitude (exact as a float; Inf / NaN flagged) */
                am[u] = qattn_qf_amax16<IN>(raw[u], nonfin);
            } else {
                am[u] = 0.0f;
                QATTN_UNROLL
                for (int j = 0; j < 8; j++)
                    am[u] = fmaxf(am[u], fabsf(QATTN_QF_LVAL(u, j))); /* NaN input: flagged above */
            }
        }
        { /* row maxima over the row's lanes (reduce-scatter), one shared atomicMax per row */
            const float rm = qattn_qs_rowmax<LC>(am, c);
            const int rr = qattn_qs_rowmax_row<LC>(c);
            if ((LC == 3 || !(c & 1)) && rr < nv && rm > 0.0f)
                atomicMax(&ls_gmax[la.grp[r0 + rr]], qattn_num_f2u(rm));
        }
        __syncthreads();
        qattn_qf_group_scales(p, fmt, ls_gmax, ls_scale, ls_rcp, ngt, g0, hb, NT, BRK ? ls_hi : NULL);
        __syncthreads();
    }
    if (nonfin && p.nonfinite)
        atomicOr(p.nonfinite, 1);

    if (!TR) {
        const int rowb = QATTN_KERNELS_ROW(fmt, D); /* = p.row (qattn_qf_lean_takes): bytes of a code row */
        uint8_t *dst = (uint8_t *)p.codes + ((int64_t)h * p.tokens + toff + tb + r0) * rowb;
        /* row u's values, scales, and rcps or brackets */
        auto row8 = [&](int u, float (&v)[8], float (&sg)[8], float (&rg)[8], float (&hg)[8]) {
            const int gi = UNI ? 0 : la.grp[r0 + u];
            QATTN_UNROLL
            for (int j = 0; j < 8; j++) {
                v[j] = QATTN_QF_LVAL(u, j);
                sg[j] = UNI ? sc[j] : ls_scale[gi];
                rg[j] = UNI ? rc[j] : ls_rcp[gi];
                hg[j] = UNI ? hi[j] : BRK ? ls_hi[gi] : 0.0f;
            }
        };
        unsigned dm = 0u; /* BRK: rows whose brackets disagree */
        QATTN_UNROLL
        for (int u = 0; u < 8; u++) {
            if (u >= nv)
                continue;
            float v[8], sg[8], rg[8], hg[8];
            row8(u, v, sg, rg, hg);
            unsigned dd;
            const uint2 w = qattn_qf_code8_of<FMT>(fmt, v, sg, rg, hg, dd);
            dm |= dd ? 1u << u : 0u;
            if (fmt == QATTN_FMT_INT4)
                *(unsigned *)(dst + u * rowb + c * 4) = w.x;
            else
                *(uint2 *)(dst + u * rowb + c * 8) = w;
        }
        if (BRK && dm) /* the rare rows whose brackets disagree, again from the exact quotients */
            QATTN_UNROLL
            for (int u = 0; u < 8; u++)
                if (dm >> u & 1u) {
                    float v[8], sg[8], rg[8], hg[8];
                    row8(u, v, sg, rg, hg);
                    *(uint2 *)(dst + u * rowb + c * 8) = qattn_qs_code8_exact<FMT>(v, sg, rg);
                }
    } else {
        qattn_qf_vt_codes<FMT, SL>(fmt, (uint2 *)ls_stage, (r0 >> 3) ^ (c & (SL - 1)), c, nv, sc, rc, hi,
                                   [&](int u, int j) { return QATTN_QF_LVAL(u, j); });
        __syncthreads();
        qattn_qf_vt_flush<D, NT, 0>(ls_stage, (uint8_t *)p.codes + hb * D * p.npad + tb, p.npad, tid);
    }
#undef QATTN_QF_LVAL
}

/* the lean encode kernel of p (qattn_qf_lean_takes) */
typedef void (*qattn_qf_lean_fn)(qattn_kernels_quant_params, qattn_qf_lean_args);
struct qattn_qf_lean_family {
    typedef qattn_qf_lean_fn fn;
    enum { INT4 = 0 };
    template <int IN, int FMT, int SM, int UNI, int TR, int LC>
    static fn of()
    {
        return &qattn_qf_lean_kernel<IN, FMT, SM, UNI, TR, LC>;
    }
};

/* whether the lean encode kernel can run p, which qattn_qf_plan takes: d 64
 * or 128, no Q block smoothing, transposed codes only with token-uniform
 * groups, token-local groups whose blocks tile QATTN_QF_LTT tokens (at most
 * QATTN_QF_LTT groups per tile) */
static int qattn_qf_lean_takes(const qattn_kernels_quant_params &p)
{
    if ((p.d != 64 && p.d != 128) || p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS ||
        p.row != QATTN_KERNELS_ROW(p.fmt, p.d)) /* the 8 rows of a lane at immediate offsets (p.row a constant) */
        return 0;
    const int uniform = qattn_qf_uniform(p.group);
    if (p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED || uniform)
        return uniform;
    const int period = qattn_qf_period(p.group); /* token-local here: token, block, warp, thread */
    return period > 0 && QATTN_QF_LTT % period == 0 && qattn_num_group_tok_index(p.group, QATTN_QF_LTT - 1) < QATTN_QF_LTT;
}

/* the lean kernel's arguments for p (qattn_qf_lean_takes(p)) */
static qattn_qf_lean_args qattn_qf_lean_args_of(const qattn_kernels_quant_params &p)
{
    qattn_qf_lean_args a;
    memset(&a, 0, sizeof a);
    if (!qattn_qf_uniform(p.group)) {
        a.gpt = (int)qattn_num_group_tok_index(p.group, QATTN_QF_LTT);
        a.ngt = (int)qattn_num_group_tok_index(p.group, QATTN_QF_LTT - 1) + 1;
        for (int r = 0; r < QATTN_QF_LTT; r++)
            a.grp[r] = (unsigned char)qattn_num_group_tok_index(p.group, r);
    }
    a.chshift = p.group.ch <= 0 ? 31 : -1;
    for (int k = 0; k < 31 && a.chshift < 0; k++)
        if (p.group.ch == 1 << k)
            a.chshift = k;
    return a;
}

#endif
