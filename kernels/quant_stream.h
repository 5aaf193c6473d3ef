/* Quantization family, streamed kernel (plain HIP through hip_port.h; part
 * of the fast instances, launched by quant_launch.h): one persistent launch
 * per operand that reads its input from DRAM once, K and V included, for
 * the cases the lean encode kernel takes (d 64 / 128, fp16 / bf16 input,
 * int8 / int4 / e4m3 codes, token-local groups whose blocks tile 128 tokens
 * or token-uniform ones, smoothing over the sequence, V^T).
 *
 * Work: a unit is one (head, sequence); its tiles of QATTN_QS_TT tokens are
 * cut into nrank slices of tpr tiles, and a group of nrank blocks takes the
 * units g, g + ngroup, ... (group g), block `rank` of it always the slice
 * `rank`. Per unit and block:
 *   phase 1 (operands with statistics: smoothing over the sequence, or
 *           token-uniform groups): the slice's tiles -> per-channel double
 *           sums (mean), minima and maxima (or, unsmoothed, the largest
 *           16-bit magnitude: the channel amax exactly); the block's
 *           partials go to p.work (the same [heads, nseq, nchunk, d] layout
 *           as the statistics kernel, chunk = rank), then the block counts
 *           itself in (p.work counter 2 unit) and waits for the other
 *           nrank - 1 blocks of its group, then counts itself out (counter
 *           2 unit + 1; the last block out sets both counters back to zero,
 *           so a plan clears them once, not before every launch); every
 *           block combines the nrank partials in rank order (the combine
 *           kernel's arithmetic), rank 0 writes the means and the uniform
 *           scales;
 *   phase 2: the slice's tiles again -> codes (and token-local scales).
 * The second read of a slice follows the first by one slice, so it hits L2:
 * about (blocks on the device) x (slice bytes) = 132 x 128 KB stay live at
 * d = 128 whatever N is, since nrank grows with N (QATTN_QS_TPR tiles per
 * slice). Blocks wait only for blocks of their own group, which the host
 * makes resident together (grid = multiprocessors x occupancy at most).
 *
 * Loads: every thread copies its own 8 rows x 8 channels of every tile into
 * its own place in a ring of qattn_qs_stages(...) tiles of shared memory with
 * 16-byte asynchronous copies (qattn_port_cp16): before it reads tile i it
 * issues tile i + stages - 1, across the phases and units (the
 * statistics wait and combine run while the next tiles arrive); a thread
 * reads back only what it copied, so the ring needs no block barrier. The
 * codes are stored with the streaming hint (qattn_port_st_stream): they are
 * not read again, and the slices waiting for their second read stay in L2.
 *
 * Codes without a division: qattn_qs_code8 (quant_codes.h; the lean kernel
 * takes them too).
 *
 * The body (qattn_qs_body) runs named stages: the ring (qattn_qs_ring_init,
 * _produce, _take); phase 1 (qattn_qs_phase1: qattn_qs_stats_tile,
 * _stats_reduce, _stats_partials, qattn_grid_group_wait, qattn_qs_combine,
 * qattn_grid_group_reset, qattn_qs_channel_scales); phase 2
 * (qattn_qs_codes_tile: qattn_qs_tile_scales, then qattn_qs_put_codes or
 * qattn_qs_put_vt).
 *
 * K and V can share one grid (qattn_qs_kv_kernel, launched by
 * quant_launch.h's launch_quant_kv): K's grid on the first blocks, V's on the
 * rest, each sized to half of the device's block slots (params share).
 *
 * Launched with params overlap (the plan: K and V after Q), the kernel may
 * start while the previous kernel in the stream ends (qattn_port_launch_overlap):
 * its first blocks take the slots that the previous kernel's last blocks
 * leave, instead of waiting for all of them. That is safe because its
 * blocks wait only for blocks of their own launch, all of which start once
 * the previous kernel's blocks exit (they wait for nothing of this one).
 *
 * Its tiles, slices, shared-memory layout and input ring are in
 * quant_stream_ring.h; its host side (instance, grid, shared memory) in
 * quant_stream_plan.h. */
#ifndef QATTN_KERNELS_QUANT_STREAM_H
#define QATTN_KERNELS_QUANT_STREAM_H

#include "quant_stream_ring.h" /* tiles, slices, shared-memory layout, the input ring */
#include "grid_group.h"       /* the groups' wait for their partials */

/* phase 1, one tile: the thread's nv rows into its channels' sums s, minima mn and maxima mx, or magnitudes m16 */
template <int IN, int SM, int UNI, int LC>
static __device__ __forceinline__ void qattn_qs_stats_tile(const uint4 *src, int nv, double (&s)[8], float (&mn)[8],
                                                           float (&mx)[8], unsigned (&m16)[4])
{
    enum { D = 8 << LC };
    auto row = [&](int r) {
        const uint4 v = src[r * D / 8];
        if (UNI && !SM) { /* the largest 16-bit magnitudes, two channels a word: the channel amax exactly */
            m16[0] = qattn_port_vmaxu2(m16[0], v.x & 0x7fff7fffu);
            m16[1] = qattn_port_vmaxu2(m16[1], v.y & 0x7fff7fffu);
            m16[2] = qattn_port_vmaxu2(m16[2], v.z & 0x7fff7fffu);
            m16[3] = qattn_port_vmaxu2(m16[3], v.w & 0x7fff7fffu);
        } else {
            QATTN_UNROLL
            for (int j = 0; j < 8; j++) {
                const float f = qattn_qf_dec<IN>(v, j);
                if (SM && !UNI && IN == QATTN_FMT_FP16) /* one conversion, not two */
                    s[j] += qattn_port_f16_to_f64(
                        (unsigned short)((j < 2 ? v.x : j < 4 ? v.y : j < 6 ? v.z : v.w) >> (16 * (j & 1))));
                else if (SM)
                    s[j] += (double)f;
                if (UNI) {
                    mn[j] = fminf(mn[j], f);
                    mx[j] = fmaxf(mx[j], f);
                }
            }
        }
    };
    qattn_qs_rows(nv, row); /* whole tiles: the conversions of the 8 rows overlap */
}

/* the block's statistics: over the lanes that hold the same channels, then a row per warp into sh.red* ([NW][D]) */
template <int IN, int SM, int UNI, int LC>
static __device__ __forceinline__ void qattn_qs_stats_reduce(const qattn_qs_shared &sh, const qattn_qs_thread &th,
                                                             double (&s)[8], float (&mn)[8], float (&mx)[8],
                                                             unsigned (&m16)[4])
{
    enum { L = 1 << LC, D = 8 << LC };
    QATTN_UNROLL
    for (int o = L; o < 32; o <<= 1)
        QATTN_UNROLL
        for (int j = 0; j < 8; j++) {
            if (SM)
                s[j] += __shfl_xor(s[j], o);
            if (UNI && SM) {
                mn[j] = fminf(mn[j], __shfl_xor(mn[j], o));
                mx[j] = fmaxf(mx[j], __shfl_xor(mx[j], o));
            }
            if (UNI && !SM && j < 4)
                m16[j] = qattn_port_vmaxu2(m16[j], __shfl_xor(m16[j], o));
        }
    __syncthreads(); /* red shares the V^T stages: their last reads are done */
    if (th.k == 0)
        QATTN_UNROLL
        for (int j = 0; j < 8; j++) {
            const int e = th.w * D + th.c * 8 + j;
            if (SM)
                sh.red[e] = s[j];
            if (UNI && SM) {
                sh.redmn[e] = mn[j];
                sh.redmx[e] = mx[j];
            } else if (UNI) { /* the largest magnitude of the channel: exact as a float */
                const unsigned hbits = j & 1 ? m16[j >> 1] >> 16 : m16[j >> 1] & 0xffffu;
                const float f = IN == QATTN_FMT_BF16 ? qattn_num_u2f(hbits << 16)
                                                     : qattn_port_f16_to_f32((unsigned short)hbits);
                sh.redmn[e] = -f;
                sh.redmx[e] = f;
            }
        }
    __syncthreads();
}

/* the block's partials (chunk `rank` of p.work's [heads, nseq, nchunk, D]) from the rows of sh.red*, warps in order */
template <int SM, int UNI, int TR, int LC>
static __device__ __forceinline__ void qattn_qs_stats_partials(const qattn_kernels_quant_params &p,
                                                               const qattn_qs_shared &sh, const qattn_qs_thread &th,
                                                               int64_t hb, int64_t nchunk, unsigned &nonfin)
{
    enum { NT = 16 << LC, NW = NT / 32, D = 8 << LC };
    const int64_t all = (int64_t)p.heads * p.nseq * nchunk * D;
    const int64_t o = (hb * nchunk + th.rank) * D;
    double *wsum = (double *)p.work;
    float *wmn = (float *)(wsum + all), *wmx = wmn + all;
    for (int ch = th.tid; ch < D; ch += NT) {
        double sum = 0.0;
        float lo1 = qattn_num_u2f(QATTN_NUM_INF), hi1 = -lo1;
        for (int ww = 0; ww < NW; ww++) { /* warps in order */
            if (SM)
                sum += sh.red[ww * D + ch];
            if (UNI) {
                lo1 = fminf(lo1, sh.redmn[ww * D + ch]);
                hi1 = fmaxf(hi1, sh.redmx[ww * D + ch]);
            }
        }
        /* a NaN or Inf input makes the sum non-finite (smoothing) or the magnitude Inf / NaN */
        if (SM ? !(fabs(sum) <= 1.79769313486231570e308) : UNI && !(hi1 <= 3.40282347e38f))
            nonfin = 1u;
        wsum[o + ch] = sum;
        wmn[o + ch] = lo1;
        wmx[o + ch] = hi1;
    }
    if (TR) /* cmax in the stage region, which phase 2 wrote */
        for (int i = th.tid; i < D; i += NT)
            sh.cmax[i] = 0u;
}

/* the combine: the group's partials in rank order (qattn_qf_combine_body's arithmetic) -> sh.cmean, sh.cmax */
template <int SM, int UNI, int LC>
static __device__ __forceinline__ void qattn_qs_combine(const qattn_kernels_quant_params &p, const qattn_qs_args &a,
                                                        const qattn_qs_shared &sh, const qattn_qs_thread &th,
                                                        const qattn_qs_unit &un, int64_t hb, int64_t nchunk)
{
    enum { NT = 16 << LC, D = 8 << LC };
    const int64_t all = (int64_t)p.heads * p.nseq * nchunk * D;
    const int64_t o = hb * nchunk * D;
    const volatile double *wsum = (const volatile double *)p.work;
    const volatile float *wmn = (const volatile float *)(wsum + all), *wmx = wmn + all;
    for (int ch = th.tid; ch < D; ch += NT) {
        double sum = 0.0;
        float lo1 = qattn_num_u2f(QATTN_NUM_INF), hi1 = -lo1;
        for (int r1 = 0; r1 < a.nrank; r1 += QATTN_QS_FLUSH) {
            double ps[QATTN_QS_FLUSH];
            float pn[QATTN_QS_FLUSH], px1[QATTN_QS_FLUSH];
            QATTN_UNROLL
            for (int q = 0; q < QATTN_QS_FLUSH; q++) {
                const int64_t e = o + (int64_t)(r1 + q < a.nrank ? r1 + q : r1) * D + ch;
                ps[q] = SM ? wsum[e] : 0.0;
                pn[q] = UNI ? wmn[e] : 0.0f;
                px1[q] = UNI ? wmx[e] : 0.0f;
            }
            QATTN_UNROLL
            for (int q = 0; q < QATTN_QS_FLUSH; q++)
                if (r1 + q < a.nrank) {
                    sum += ps[q];
                    lo1 = pn[q] < lo1 ? pn[q] : lo1;
                    hi1 = px1[q] > hi1 ? px1[q] : hi1;
                }
        }
        float m = 0.0f;
        if (SM) {
            m = un.n > 0 ? (float)(sum / (double)un.n) : 0.0f;
            sh.cmean[ch] = m;
            if (th.rank == 0)
                p.mean[hb * D + ch] = m;
        }
        if (UNI) {
            const float up = hi1 - m, down = m - lo1;
            float am = up > down ? up : down;
            am = am > 0.0f ? am : 0.0f;
            if (am > 0.0f)
                atomicMax(&sh.cmax[a.g.chshift >= 0 ? ch >> a.g.chshift : ch / p.group.ch], qattn_num_f2u(am));
        }
    }
}

/* the channel-group scales from sh.cmax into sh.cscale (and p.scale), then the thread's 8 channels' into registers */
template <int FMT, int SM, int UNI, int TR, int LC>
static __device__ __forceinline__ void qattn_qs_channel_scales(const qattn_kernels_quant_params &p,
                                                               const qattn_qs_args &a, const qattn_qs_shared &sh,
                                                               const qattn_qs_thread &th, int64_t hb, float (&mean)[8],
                                                               float (&sc)[8], float (&lo)[8], float (&hi)[8])
{
    enum { NT = 16 << LC };
    __syncthreads();
    if (UNI)
        for (int gi = th.tid; gi < p.nch; gi += NT) {
            const float sg = qattn_num_scale_for(FMT, qattn_num_u2f(sh.cmax[gi]), p.group.e8m0);
            sh.cscale[gi] = sg;
            sh.cmax[gi] = 0u;
            if (th.rank == 0)
                p.scale[hb * p.nch + gi] = sg;
        }
    __syncthreads();
    QATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        const int ch = th.c * 8 + j;
        if (SM)
            mean[j] = sh.cmean[ch];
        if (UNI) {
            sc[j] = sh.cscale[a.g.chshift >= 0 ? ch >> a.g.chshift : ch / p.group.ch];
            qattn_qs_brk(sc[j], lo[j], hi[j]);
        }
    }
    if (TR) /* every thread has read cscale before the stage, which holds it, is written */
        __syncthreads();
}

/* phase 1 of unit un: tiles -> partials -> the group's wait -> combine -> the thread's means, scales, brackets */
template <int IN, int FMT, int SM, int UNI, int TR, int LC>
static __device__ __forceinline__ void qattn_qs_phase1(const qattn_kernels_quant_params &p, const qattn_qs_args &a,
                                                       const qattn_qs_shared &sh, const qattn_qs_thread &th,
                                                       qattn_qs_ring &rg, int units, const qattn_qs_unit &un,
                                                       int64_t hb, unsigned *cnt, int64_t nchunk, unsigned &nonfin,
                                                       float (&mean)[8], float (&sc)[8], float (&lo)[8],
                                                       float (&hi)[8])
{
    enum {
        D = 8 << LC, TT = QATTN_QS_TT, SMT = SM == QATTN_KERNELS_SMOOTH_TOKENS, STATS = SMT || UNI,
        S = qattn_qs_stages(D, TR, SMT, UNI)
    };
    double s[8];
    float mn[8], mx[8];
    unsigned m16[4] = {0u, 0u, 0u, 0u};
    QATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        s[j] = 0.0;
        mn[j] = qattn_num_u2f(QATTN_NUM_INF);
        mx[j] = -mn[j];
    }
    int t, t1;
    qattn_qs_slice(a, th.rank, un.nt1, t, t1);
    for (; t < t1; t++) {
        const uint4 *src = qattn_qs_ring_take<STATS, S, LC>(rg, sh.ring, p, a, th, units);
        qattn_qs_stats_tile<IN, SM, UNI, LC>(src, qattn_qs_nv(un.n, (int64_t)t * TT + th.r0), s, mn, mx, m16);
        rg.consumed++;
    }
    qattn_qs_stats_reduce<IN, SM, UNI, LC>(sh, th, s, mn, mx, m16);
    qattn_qs_stats_partials<SM, UNI, TR, LC>(p, sh, th, hb, nchunk, nonfin);
    const unsigned left_n = qattn_grid_group_wait(cnt, un.u, a.nrank, th.tid); /* unit u's group */
    qattn_qs_combine<SM, UNI, LC>(p, a, sh, th, un, hb, nchunk);
    qattn_grid_group_reset(cnt, un.u, left_n, a.nrank, th.tid);
    qattn_qs_channel_scales<FMT, SM, UNI, TR, LC>(p, a, sh, th, hb, mean, sc, lo, hi);
}

/* token-local groups, the same in every tile (registers, not indexed loads from the arguments in the tile loop) */
typedef struct qattn_qs_rowgroups {
    int rm;     /* the group of the row whose maximum the lane ends with (qattn_qs_rowmax) */
    int row;    /* lanes < WR: the group of the warp's row `lane` */
    bool first; /* lanes < WR: whether that row is its group's first */
} qattn_qs_rowgroups;

template <int UNI, int LC>
static __device__ __forceinline__ void qattn_qs_rowgroups_of(const qattn_qs_args &a, const qattn_qs_thread &th,
                                                             qattn_qs_rowgroups &gr)
{
    enum { WR = 8 * (32 >> LC) };
    const int srow = th.w * WR + (th.lane < WR ? th.lane : 0);
    gr.rm = UNI ? 0 : a.g.grp[th.r0 + qattn_qs_rowmax_row<LC>(th.c)];
    gr.row = UNI ? 0 : a.g.grp[srow];
    gr.first = !UNI && (a.first[srow >> 5] >> (srow & 31) & 1u);
}

/* row r's value of the thread's channel j, less the channel mean when smoothed */
template <int IN, int SM>
static __device__ __forceinline__ float qattn_qs_val(const uint4 (&raw)[8], const float (&mean)[8], int r, int j)
{
    return SM ? qattn_qf_dec<IN>(raw[r], j) - mean[j] : qattn_qf_dec<IN>(raw[r], j);
}

/* phase 2, token-local groups: rows' amax -> group amax (sh.gmax third gsel, a barrier) -> sh.wsc and p.scale */
template <int IN, int FMT, int SM, int LC>
static __device__ __forceinline__ void qattn_qs_tile_scales(const qattn_kernels_quant_params &p, const qattn_qs_args &a,
                                                            const qattn_qs_shared &sh, const qattn_qs_thread &th,
                                                            const qattn_qs_rowgroups &gr, int t, int64_t hb, int gsel,
                                                            int nv, const uint4 (&raw)[8], const float (&mean)[8],
                                                            float (&xv)[8][8], unsigned &nonfin)
{
    enum { NT = 16 << LC, TT = QATTN_QS_TT, WR = 8 * (32 >> LC) };
    unsigned *gm = sh.gmax + gsel * TT;
    float am[8];
    QATTN_UNROLL
    for (int r = 0; r < 8; r++) {
        am[r] = 0.0f;
        if (SM) { /* the smoothed values, kept in xv for the codes */
            QATTN_UNROLL
            for (int j = 0; j < 8; j++) {
                xv[r][j] = qattn_qs_val<IN, SM>(raw, mean, r, j);
                am[r] = fmaxf(am[r], fabsf(xv[r][j]));
            }
        } else { /* the largest 16-bit magnitude, Inf / NaN included */
            am[r] = qattn_qf_amax16<IN>(raw[r], nonfin);
        }
    }
    {
        const float rm = qattn_qs_rowmax<LC>(am, th.c);
        const int rr = qattn_qs_rowmax_row<LC>(th.c);
        if ((LC == 3 || !(th.c & 1)) && rr < nv && rm > 0.0f)
            atomicMax(&gm[gr.rm], qattn_num_f2u(rm));
    }
    __syncthreads();
    /* gmax of two tiles back: read before this barrier, next written after the next one */
    unsigned *gm2 = sh.gmax + (gsel == 0 ? 2 : gsel - 1) * TT;
    if (NT >= TT) {
        if (th.tid < TT)
            gm2[th.tid] = 0u;
    } else {
        for (int i = th.tid; i < TT; i += NT)
            gm2[i] = 0u;
    }
    if (th.lane < WR) {
        float4 e;
        e.x = qattn_num_scale_for(FMT, qattn_num_u2f(gm[gr.row]), p.group.e8m0);
        qattn_qs_brk(e.x, e.y, e.z);
        e.w = 0.0f;
        sh.wsc[th.w * WR + th.lane] = e;
        const int64_t gg = (int64_t)t * a.g.gpt + gr.row;
        if (gr.first && gg < p.ntok)
            p.scale[hb * p.ntok + gg] = e.x;
    }
    qattn_port_syncwarp();
}

/* phase 2, rows layout: the thread's 8 rows' codes without a branch; rows whose brackets disagree again, exactly */
template <int IN, int FMT, int SM, int UNI, int LC>
static __device__ __forceinline__ void qattn_qs_put_codes(const qattn_kernels_quant_params &p,
                                                          const qattn_qs_shared &sh, const qattn_qs_thread &th,
                                                          const qattn_qs_unit &un, int64_t tb, int nv,
                                                          const uint4 (&raw)[8], const float (&xv)[8][8],
                                                          const float (&mean)[8], const float (&sc)[8],
                                                          const float (&lo)[8], const float (&hi)[8])
{
    enum { D = 8 << LC, ROWB = QATTN_KERNELS_ROW(FMT, D) }; /* = p.row (qattn_qf_lean_takes): immediate offsets */
    const int r0 = th.r0, c = th.c;
    uint8_t *dst = (uint8_t *)p.codes + ((int64_t)un.h * p.tokens + un.toff + tb + r0) * ROWB;
    auto put = [&](int r, uint2 cw) {
        if (FMT == QATTN_FMT_INT4)
            qattn_port_st_stream((unsigned *)(dst + r * ROWB + c * 4), cw.x);
        else
            qattn_port_st_stream((uint2 *)(dst + r * ROWB + c * 8), cw);
    };
    /* row r's values, scales and brackets (per channel, or its group's from wsc) */
    auto row_in = [&](int r, float(&v)[8], float(&s8)[8], float(&lo8)[8], float(&hi8)[8]) {
        const float4 e = UNI ? float4{0.0f, 0.0f, 0.0f, 0.0f} : sh.wsc[r0 + r];
        QATTN_UNROLL
        for (int j = 0; j < 8; j++) {
            v[j] = !UNI && SM ? xv[r][j] : qattn_qs_val<IN, SM>(raw, mean, r, j);
            s8[j] = UNI ? sc[j] : e.x;
            lo8[j] = UNI ? lo[j] : e.y;
            hi8[j] = UNI ? hi[j] : e.z;
        }
    };
    unsigned dm = 0u;
    QATTN_UNROLL
    for (int r = 0; r < 8; r++) {
        float v[8], s8[8], lo8[8], hi8[8];
        row_in(r, v, s8, lo8, hi8);
        unsigned d;
        const uint2 cw = qattn_qs_code8<FMT>(v, lo8, hi8, d);
        if (r < nv)
            put(r, cw);
        dm |= d && r < nv ? 1u << r : 0u;
    }
    if (dm)
        QATTN_UNROLL
        for (int r = 0; r < 8; r++)
            if (dm >> r & 1u) {
                float v[8], s8[8], lo8[8], hi8[8];
                row_in(r, v, s8, lo8, hi8);
                put(r, qattn_qs_code8_exact<FMT>(v, s8, lo8));
            }
}

/* phase 2, V^T (uniform groups, 8-bit codes): the codes along tokens into sh.tstage, flushed by each 32-token group */
template <int IN, int FMT, int SM, int LC>
static __device__ __forceinline__ void qattn_qs_put_vt(const qattn_kernels_quant_params &p, const qattn_qs_shared &sh,
                                                       const qattn_qs_thread &th, int64_t hb, int64_t tb, int nv,
                                                       const uint4 (&raw)[8], const float (&mean)[8],
                                                       const float (&sc)[8], const float (&lo)[8],
                                                       const float (&hi)[8])
{
    enum { D = 8 << LC, SL = QATTN_QS_TT / 8, WPG = 32 / (8 * (32 >> LC)) /* warps of a 32-token group */ };
    uint2 *stage = (uint2 *)sh.tstage;
    /* the warps of tokens 32 P .. 32 P + 31 write and flush their columns of the stage alone */
    const int P = th.w / WPG;
    auto gsync = [&]() {
        if (WPG == 1)
            qattn_port_syncwarp();
        else
            qattn_port_bar_sync(1 + P, 32 * WPG);
    };
    gsync(); /* the group's flush of the previous tile has read its columns */
    qattn_qf_vt_codes<FMT, SL>(FMT, stage, (th.r0 >> 3) ^ (th.c & (SL - 1)), th.c, nv, sc, lo, hi,
                               [&](int r, int j) { return qattn_qs_val<IN, SM>(raw, mean, r, j); });
    gsync();
    qattn_qs_vt_flush32<D>((const uint4 *)stage, (uint8_t *)p.codes + hb * D * p.npad + tb, p.npad, P,
                           th.tid - P * 32 * WPG, 32 * WPG);
}

/* phase 2, tile t: the thread's rows (WHOLE: all 8 inside, no row tests) -> token-local scales -> codes or V^T */
template <bool WHOLE, int IN, int FMT, int SM, int UNI, int TR, int LC>
static __device__ __forceinline__ void qattn_qs_codes_tile(const qattn_kernels_quant_params &p, const qattn_qs_args &a,
                                                           const qattn_qs_shared &sh, const qattn_qs_thread &th,
                                                           const qattn_qs_rowgroups &gr, const qattn_qs_unit &un,
                                                           int t, int64_t tb, int64_t hb, int gsel, const uint4 *src,
                                                           int nv_tile, const float (&mean)[8], const float (&sc)[8],
                                                           const float (&lo)[8], const float (&hi)[8],
                                                           unsigned &nonfin)
{
    enum { D = 8 << LC };
    const int nv = WHOLE ? 8 : nv_tile;
    uint4 raw[8];
    QATTN_UNROLL
    for (int r = 0; r < 8; r++)
        raw[r] = r < nv ? src[r * D / 8] : uint4{0u, 0u, 0u, 0u};
    float xv[8][8]; /* token-local groups, smoothed: the values, computed once for the row maxima */
    if (!UNI)
        qattn_qs_tile_scales<IN, FMT, SM, LC>(p, a, sh, th, gr, t, hb, gsel, nv, raw, mean, xv, nonfin);
    if (!TR)
        qattn_qs_put_codes<IN, FMT, SM, UNI, LC>(p, sh, th, un, tb, nv, raw, xv, mean, sc, lo, hi);
    else
        qattn_qs_put_vt<IN, FMT, SM, LC>(p, sh, th, hb, tb, nv, raw, mean, sc, lo, hi);
}

/* the work of block `bid` of a grid of the streamed kernel for p */
template <int IN, int FMT, int SM, int UNI, int TR, int LC>
static __device__ __forceinline__ void qattn_qs_body(const qattn_kernels_quant_params &p, const qattn_qs_args &a,
                                                     int bid)
{
    enum {
        NT = 16 << LC, D = 8 << LC, TT = QATTN_QS_TT, SMT = SM == QATTN_KERNELS_SMOOTH_TOKENS, STATS = SMT || UNI,
        S = qattn_qs_stages(D, TR, SMT, UNI)
    };
    qattn_qs_shared sh;
    qattn_qs_shared_of<SM, UNI, TR, LC>(sh);
    qattn_qs_thread th;
    qattn_qs_thread_of<LC>(a, bid, th);
    const int units = p.heads * p.nseq;
    for (int i = th.tid; i < (UNI ? 0 : 3 * TT); i += NT)
        sh.gmax[i] = 0u;
    for (int i = th.tid; i < D; i += NT)
        sh.cmax[i] = 0u;
    __syncthreads();
    if (th.g >= a.ngroup)
        return;
    unsigned *cnt = (unsigned *)((unsigned char *)p.work + (STATS ? qattn_qf_stats_bytes(p) : 0));
    const int64_t nchunk = qattn_qf_nchunk(p);

    qattn_qs_ring rg = {};
    qattn_qs_ring_init<STATS, S, LC>(rg, sh.ring, p, a, th, units);
    int gsel = 0; /* this tile's third of gmax (phase-2 tiles so far, mod 3) */
    unsigned nonfin = 0u;
    qattn_qs_rowgroups gr;
    qattn_qs_rowgroups_of<UNI, LC>(a, th, gr);
    for (int u = th.g; u < units; u += a.ngroup) {
        qattn_qs_unit un;
        qattn_qs_unit_of(p, u, un);
        const int64_t hb = (int64_t)un.h * p.nseq + un.b;
        float mean[8], sc[8], lo[8], hi[8];
        QATTN_UNROLL
        for (int j = 0; j < 8; j++)
            mean[j] = sc[j] = lo[j] = hi[j] = 0.0f;
        if (STATS)
            qattn_qs_phase1<IN, FMT, SM, UNI, TR, LC>(p, a, sh, th, rg, units, un, hb, cnt, nchunk, nonfin, mean, sc,
                                                      lo, hi);
        /* phase 2: codes */
        int t, t1;
        qattn_qs_slice(a, th.rank, un.nt2, t, t1);
        for (; t < t1; t++) {
            const uint4 *src = qattn_qs_ring_take<STATS, S, LC>(rg, sh.ring, p, a, th, units);
            const int64_t tb = (int64_t)t * TT;
            const int nv_tile = qattn_qs_nv(un.n, tb + th.r0);
            if (tb + TT <= un.n) /* the block's choice: the barriers and shuffles inside need every thread */
                qattn_qs_codes_tile<true, IN, FMT, SM, UNI, TR, LC>(p, a, sh, th, gr, un, t, tb, hb, gsel, src,
                                                                    nv_tile, mean, sc, lo, hi, nonfin);
            else
                qattn_qs_codes_tile<false, IN, FMT, SM, UNI, TR, LC>(p, a, sh, th, gr, un, t, tb, hb, gsel, src,
                                                                     nv_tile, mean, sc, lo, hi, nonfin);
            gsel = gsel == 2 ? 0 : gsel + 1;
            rg.consumed++;
        }
    }
    qattn_port_cp_wait(0);
    if (nonfin && p.nonfinite)
        atomicOr(p.nonfinite, 1);
}

template <int IN, int FMT, int SM, int UNI, int TR, int LC>
__global__ void __launch_bounds__(16 << LC, LC == 3 ? 4 : 2) /* 2 d threads; 2 (d = 128) or 4 (d = 64) blocks per SM */
    qattn_qs_kernel(qattn_kernels_quant_params p, qattn_qs_args a)
{
    qattn_port_dependents_go(); /* a kernel launched to overlap this one may start its blocks */
    qattn_qs_body<IN, FMT, SM, UNI, TR, LC>(p, a, (int)blockIdx.x);
}

/* K and V in one grid: blocks [0, nk) run K's grid, the rest V's (each
 * block one operand's for its life). Tried and slower on the H200: one
 * operand per half of the multiprocessors, and alternating groups
 * (kernels/LOG.md, 2026-11-25). */
template <int IN, int FMT, int LC>
__global__ void __launch_bounds__(16 << LC, LC == 3 ? 4 : 2)
    qattn_qs_kv_kernel(qattn_kernels_quant_params pk, qattn_qs_args ak, qattn_kernels_quant_params pv,
                       qattn_qs_args av, int nk)
{
    qattn_port_dependents_go(); /* a kernel launched to overlap this one may start its blocks */
    if ((int)blockIdx.x < nk)
        qattn_qs_body<IN, FMT, QATTN_KERNELS_SMOOTH_TOKENS, 0, 0, LC>(pk, ak, (int)blockIdx.x);
    else
        qattn_qs_body<IN, QATTN_FMT_E4M3, QATTN_KERNELS_SMOOTH_NONE, 1, 1, LC>(pv, av, (int)blockIdx.x - nk);
}

#endif
