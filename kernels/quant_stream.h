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
 * Codes without a division: qattn_qs_code8 (quant_fast.h; the lean kernel
 * takes them too).
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
 * the previous kernel's blocks exit (they wait for nothing of this one). */
#ifndef QATTN_KERNELS_QUANT_STREAM_H
#define QATTN_KERNELS_QUANT_STREAM_H

#include "quant_fast.h" /* the code helpers, the lean kernel's group tables and V^T stage */

#define QATTN_QS_TT 128    /* tokens per tile (= QATTN_QF_LTT: the lean kernel's group tables) */
#define QATTN_QS_TPR 4     /* tiles per slice aimed for (params stream_tpr: another number) */
#define QATTN_QS_FLUSH 8   /* partials read in flight per thread in the combine */
static_assert(QATTN_QS_TT == QATTN_QF_LTT, "the streamed kernel uses the lean kernel's group tables and V^T stage");

typedef struct qattn_qs_args {
    qattn_qf_lean_args g;             /* group tables and channel shift (qattn_qf_lean_args_of) */
    unsigned first[QATTN_QS_TT / 32]; /* token-local groups: bit r set when tile row r is its group's first */
    int nrank;                        /* blocks per unit (one group) */
    int ngroup;                       /* groups */
    int tpr;                          /* tiles per slice */
} qattn_qs_args;

/* Dynamic shared memory (all of it dynamic: the host simulation runs these
 * blocks side by side), in bytes from the start:
 *   ring   [stages][TT][d] 16-bit input rows
 *   tstage TR: [d][TT] codes (V^T; each group of warps that covers 32
 *          tokens writes and flushes its own columns between two barriers
 *          of its own); the statistics rows share it (used at the end of
 *          phase 1 only, between block barriers)
 *   red    statistics rows [d / 16 warps][d]: double sums (smoothing), float
 *          minima and float maxima (uniform groups) (at tstage with TR)
 *   cscale [d] floats, cmax [d] amax bits (per channel / group); with TR
 *          in the tstage region after red (used from the count to the
 *          start of phase 2 only: cmax zeroed for each unit, a block
 *          barrier before the first stage write), else here
 *   cmean  [d] floats (smoothing only)
 *   gmax   [3][TT] token-group amax bits (token-local groups only;
 *          triple-buffered: one barrier per tile)
 *   wsc    [d / 16 warps][rows of a warp] float4: scale, lo, hi of each row's
 *          group (token-local groups only)
 * sm: smoothing over the sequence; uni: token-uniform groups; s: ring
 * stages. */
#define QATTN_QS_SM_BYTES 233472 /* shared memory of an sm_90 multiprocessor (228 KB): the stage count */
static __host__ __device__ constexpr size_t qattn_qs_smem_red(int d, int sm, int uni)
{ /* the bytes of red */
    return (size_t)d / 16 * d * ((sm ? 8 : 0) + (uni ? 8 : 0));
}
static __host__ __device__ constexpr size_t qattn_qs_smem_mid(int d, int tr, int sm, int uni)
{ /* the bytes of the region that tstage, red (and with TR cscale, cmax) share */
    return !tr ? qattn_qs_smem_red(d, sm, uni)
           : (size_t)d * QATTN_QS_TT > qattn_qs_smem_red(d, sm, uni) + (size_t)d * 8
               ? (size_t)d * QATTN_QS_TT
               : qattn_qs_smem_red(d, sm, uni) + (size_t)d * 8;
}
static __host__ __device__ constexpr size_t qattn_qs_smem_s(int s, int d, int tr, int sm, int uni)
{
    return (size_t)s * QATTN_QS_TT * d * 2 + qattn_qs_smem_mid(d, tr, sm, uni) + (size_t)d * 4 * (sm ? 1 : 0) +
           (tr ? 0 : (size_t)d * 8) + (uni ? 0 : 3 * (size_t)QATTN_QS_TT * 4 + (size_t)QATTN_QS_TT * 16);
}
/* Tiles in the shared-memory ring: 3 where two blocks (d = 128; four at
 * d = 64) still fit on an sm_90 multiprocessor with them (1 KB per block
 * reserved), else 2: 3 for everything at d = 128 but smoothing with
 * uniform groups (two statistics row sets); the same at d = 64.
 * One tile in flight left phase 1 waiting on DRAM (H100 profile: 7-15% of
 * the stall samples at the wait; kernels/LOG.md, 2026-11-24). */
static __host__ __device__ constexpr int qattn_qs_stages(int d, int tr, int sm, int uni)
{
    return qattn_qs_smem_s(3, d, tr, sm, uni) + 1024 <= QATTN_QS_SM_BYTES / (d == 64 ? 4 : 2) ? 3 : 2;
}
static __host__ __device__ constexpr size_t qattn_qs_smem(int d, int tr, int sm, int uni)
{
    return qattn_qs_smem_s(qattn_qs_stages(d, tr, sm, uni), d, tr, sm, uni);
}
static_assert(qattn_qs_stages(128, 1, 0, 1) == 3 && qattn_qs_stages(128, 0, 1, 0) == 3 &&
                  qattn_qs_stages(128, 0, 1, 1) == 2 && qattn_qs_stages(64, 1, 0, 1) == 3 &&
                  qattn_qs_stages(64, 0, 1, 0) == 3,
              "ring stages of the sage2 operands (kernels/DESIGN.md)");

/* Tokens 32 P .. 32 P + 31 of a staged V^T tile (qattn_qf_vt_flush's
 * layout: channel ch's 8-byte slot of tokens 8s .. 8s + 7 at s ^ (c & 15),
 * c = ch >> 3) to dst + ch * npad by the ntg threads of their warps (gt =
 * 0 .. ntg - 1): per channel one 32-byte run (a sector) with the streaming
 * hint. Item q: its low bits pick the channel's block of 16, the next bit
 * the 16-byte unit, the rest the channel in the block; so the 8 lanes of a
 * quarter warp read 8 different 16-byte bank groups at d = 128 (2-way at
 * d = 64) and each warp store writes 16 whole sectors. */
template <int D>
static __device__ __forceinline__ void qattn_qs_vt_flush32(const uint4 *stage, uint8_t *dst, int64_t npad, int P,
                                                           int gt, int ntg)
{
    enum { SL = QATTN_QS_TT / 8, CB = D / 16, LCB = D == 128 ? 3 : 2 };
    static_assert(D == 64 || D == 128, "d = 64 or 128");
    for (int q = gt; q < 2 * D; q += ntg) {
        const int ch = (q & (CB - 1)) * 16 + (q >> (LCB + 1)), mm = 2 * P + ((q >> LCB) & 1), f = (ch >> 3) & (SL - 1);
        const uint4 v = stage[ch * (SL / 2) + (mm ^ (f >> 1))];
        qattn_port_st_stream((uint4 *)(dst + (int64_t)ch * npad + 16 * mm), f & 1 ? uint4{v.z, v.w, v.x, v.y} : v);
    }
}

/* a compile-time flag as an argument (qattn_qs_kernel's tile2) */
template <bool B>
struct qattn_qs_bool {
    static constexpr bool value = B;
};

/* f(r) for the thread's rows r < nv (of 8): unrolled, with no branch
 * between the rows, for whole tiles (nv = 8); a loop for the tail */
template <typename F>
static __device__ __forceinline__ void qattn_qs_rows(int nv, F f)
{
    if (nv == 8) {
        QATTN_UNROLL
        for (int r = 0; r < 8; r++)
            f(r);
    } else {
        for (int r = 0; r < nv; r++)
            f(r);
    }
}

/* one unit (head, sequence) as the producer and the consumer see it */
typedef struct qattn_qs_unit {
    int u, h, b;        /* unit u = h * nseq + b */
    int64_t t0, n, toff; /* qattn_quant_seq */
    int nt1, nt2;       /* tiles of phase 1 (the sequence's n tokens) and phase 2 (see qattn_qs_range) */
} qattn_qs_unit;

static __device__ __forceinline__ void qattn_qs_unit_of(const qattn_kernels_quant_params &p, int u, qattn_qs_unit &un)
{
    un.u = u;
    un.h = u / p.nseq;
    un.b = u - un.h * p.nseq;
    qattn_quant_seq(p, un.b, &un.t0, &un.n, &un.toff);
    /* phase 2: the padded columns of V^T, or with token-local groups the
     * longest sequence's tokens (every scale up to p.ntok is written, 0 past
     * the sequence) */
    const int64_t rows2 = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED ? p.npad
                          : qattn_qf_uniform(p.group)                  ? un.n
                                                                       : (int64_t)p.seqlen;
    un.nt1 = (int)((un.n + QATTN_QS_TT - 1) / QATTN_QS_TT);
    un.nt2 = (int)((rows2 + QATTN_QS_TT - 1) / QATTN_QS_TT);
}

/* the tiles [t, t1) of `rank`'s slice among nt tiles */
static __device__ __forceinline__ void qattn_qs_slice(const qattn_qs_args &a, int rank, int nt, int &t, int &t1)
{
    t = rank * a.tpr;
    t1 = t + a.tpr < nt ? t + a.tpr : nt;
    t = t < t1 ? t : t1;
}

/* the work of block `bid` of a grid of the streamed kernel for p */
template <int IN, int FMT, int SM, int UNI, int TR, int LC>
static __device__ __forceinline__ void qattn_qs_body(const qattn_kernels_quant_params &p, const qattn_qs_args &a,
                                                     int bid)
{
    enum {
        L = 1 << LC, RPI = 32 >> LC, NT = 16 << LC, NW = NT / 32, D = 8 << LC, TT = QATTN_QS_TT,
        WR = 8 * RPI, /* rows of a warp */
        SL = QATTN_QS_TT / 8, SMT = SM == QATTN_KERNELS_SMOOTH_TOKENS, STATS = SMT || UNI,
        S = qattn_qs_stages(D, TR, SMT, UNI),
        WPG = 32 / WR /* V^T: warps of a 32-token group (its own stage columns and barrier) */
    };
    QATTN_DYNAMIC_SHARED(uint4, qs_smem);
    unsigned char *ring = (unsigned char *)qs_smem;
    unsigned char *tstage = ring + (size_t)S * TT * D * 2;               /* TR: [D][TT] codes */
    double *red = (double *)tstage;                                      /* STATS: [NW][D] sums, minima, maxima */
    float *redmn = (float *)(red + (SM ? NW * D : 0)), *redmx = redmn + NW * D;
    float *cmean = (float *)(tstage + qattn_qs_smem_mid(D, TR, SMT, UNI));
    float *cscale = TR ? (float *)(tstage + qattn_qs_smem_red(D, SMT, UNI)) : cmean + (SMT ? D : 0);
    unsigned *cmax = (unsigned *)(cscale + D), *gmax = cmax + D; /* gmax: [3][TT] (token-local groups, not TR) */
    float4 *wsc = (float4 *)(gmax + 3 * TT);                     /* [NW][WR] (token-local groups) */

    const int tid = (int)threadIdx.x, lane = tid & 31, w = tid >> 5, c = lane & (L - 1), k = lane >> LC;
    const int r0 = w * WR + 8 * k; /* the thread's rows r0 .. r0 + 7 of a tile, channels 8c .. 8c + 7 */
    const int rank = (int)((unsigned)bid % (unsigned)a.nrank), g = (int)((unsigned)bid / (unsigned)a.nrank);
    const int units = p.heads * p.nseq;
    for (int i = tid; i < (UNI ? 0 : 3 * TT); i += NT)
        gmax[i] = 0u;
    for (int i = tid; i < D; i += NT)
        cmax[i] = 0u;
    __syncthreads();
    if (g >= a.ngroup)
        return;
    unsigned *cnt = (unsigned *)((unsigned char *)p.work + (STATS ? qattn_qf_stats_bytes(p) : 0));
    const int64_t nchunk = qattn_qf_nchunk(p);

    /* the producer: the thread's 8 rows of the next tile into the ring, S - 1 tiles ahead */
    qattn_qs_unit pu = {};
    int pph = STATS ? 1 : 2, pt = 0, pt1 = 0;
    const uint16_t *px = (const uint16_t *)0; /* the unit's row r0 of tile 0, the thread's channels */
    auto pnext = [&]() { /* the next non-empty phase from (pu, pph) on */
        while (pu.u < units) {
            if (pt < pt1)
                return;
            if (pph == 1) {
                pph = 2;
            } else {
                if (pu.u + a.ngroup >= units) {
                    pu.u = units;
                    return;
                }
                qattn_qs_unit_of(p, pu.u + a.ngroup, pu);
                px = qattn_qf_seq_x(p, pu.b, pu.t0, pu.h) + (int64_t)r0 * p.x_stride_tok + c * 8;
                pph = STATS ? 1 : 2;
            }
            qattn_qs_slice(a, rank, pph == 1 ? pu.nt1 : pu.nt2, pt, pt1);
        }
    };
    qattn_qs_unit_of(p, g, pu);
    px = qattn_qf_seq_x(p, pu.b, pu.t0, pu.h) + (int64_t)r0 * p.x_stride_tok + c * 8;
    qattn_qs_slice(a, rank, pph == 1 ? pu.nt1 : pu.nt2, pt, pt1);
    pnext();
    int issued = 0, consumed = 0, gsel = 0; /* gsel: this tile's third of gmax (phase-2 tiles so far, mod 3) */
    auto produce = [&]() {
        if (pu.u < units) {
            const int64_t left = pu.n - ((int64_t)pt * TT + r0);
            const int nv = left < 0 ? 0 : left > 8 ? 8 : (int)left;
            const uint16_t *x = px + (int64_t)pt * TT * p.x_stride_tok;
            unsigned char *dst = ring + ((size_t)(issued % S) * TT + r0) * D * 2 + c * 16;
            qattn_qs_rows(nv, [&](int j) { qattn_port_cp16(dst + j * D * 2, x + j * p.x_stride_tok); });
            issued++;
            pt++;
            pnext();
        }
        qattn_port_cp_commit();
    };
    for (int i = 0; i < S - 1; i++) /* tiles 0 .. S - 2; each tile t read issues tile t + S - 1 first */
        produce();

    unsigned nonfin = 0u;
    /* token-local groups, the same in every tile (registers, not indexed
     * loads from the arguments in the tile loop): the group of the row whose
     * maximum the lane ends with; lanes < WR: the group of the warp's row
     * `lane` and whether that row is its group's first */
    const int srow = w * WR + (lane < WR ? lane : 0);
    const int gi_rm = UNI ? 0 : a.g.grp[r0 + qattn_qs_rowmax_row<LC>(c)], gi_row = UNI ? 0 : a.g.grp[srow];
    const bool first_row = !UNI && (a.first[srow >> 5] >> (srow & 31) & 1u);
    for (int u = g; u < units; u += a.ngroup) {
        qattn_qs_unit un;
        qattn_qs_unit_of(p, u, un);
        const int64_t hb = (int64_t)un.h * p.nseq + un.b;
        float mean[8], sc[8], lo[8], hi[8];
        QATTN_UNROLL
        for (int j = 0; j < 8; j++)
            mean[j] = sc[j] = lo[j] = hi[j] = 0.0f;

        if (STATS) { /* ---- phase 1 ---- */
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
            qattn_qs_slice(a, rank, un.nt1, t, t1);
            for (; t < t1; t++) {
                produce();                 /* tile t + S - 1 goes out (into tile t - 1's stage) */
                qattn_port_cp_wait(S - 1); /* then tile t's copies are done */
                const uint4 *src = (const uint4 *)(ring + ((size_t)(consumed % S) * TT + r0) * D * 2 + c * 16);
                const int64_t left = un.n - ((int64_t)t * TT + r0);
                const int nv = left < 0 ? 0 : left > 8 ? 8 : (int)left;
                auto row = [&](int r) {
                    const uint4 v = src[r * D / 8];
                    if (UNI && !SM) {
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
                consumed++;
            }
            /* the block's partials: over the lanes of a warp that hold the same channels, then over the warps */
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
            if (k == 0)
                QATTN_UNROLL
                for (int j = 0; j < 8; j++) {
                    const int e = w * D + c * 8 + j;
                    if (SM)
                        red[e] = s[j];
                    if (UNI && SM) {
                        redmn[e] = mn[j];
                        redmx[e] = mx[j];
                    } else if (UNI) { /* the largest magnitude of the channel: exact as a float */
                        const unsigned hbits = j & 1 ? m16[j >> 1] >> 16 : m16[j >> 1] & 0xffffu;
                        const float f = IN == QATTN_FMT_BF16 ? qattn_num_u2f(hbits << 16)
                                                             : qattn_port_f16_to_f32((unsigned short)hbits);
                        redmn[e] = -f;
                        redmx[e] = f;
                    }
                }
            __syncthreads();
            {
                const int64_t all = (int64_t)p.heads * p.nseq * nchunk * D;
                const int64_t o = (hb * nchunk + rank) * D;
                double *wsum = (double *)p.work;
                float *wmn = (float *)(wsum + all), *wmx = wmn + all;
                for (int ch = tid; ch < D; ch += NT) {
                    double sum = 0.0;
                    float lo1 = qattn_num_u2f(QATTN_NUM_INF), hi1 = -lo1;
                    for (int ww = 0; ww < NW; ww++) { /* warps in order */
                        if (SM)
                            sum += red[ww * D + ch];
                        if (UNI) {
                            lo1 = fminf(lo1, redmn[ww * D + ch]);
                            hi1 = fmaxf(hi1, redmx[ww * D + ch]);
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
                    for (int i = tid; i < D; i += NT)
                        cmax[i] = 0u;
            }
            /* the block's partials before its count: the barrier, then one
             * thread's (cumulative) device-scope fence, as a grid barrier does */
            __syncthreads();
            unsigned left_n = 0u; /* tid 0: blocks of the group that had left the wait before this one */
            if (tid == 0) {
                __threadfence();
                atomicAdd(&cnt[2 * u], 1u);
                while (((volatile unsigned *)cnt)[2 * u] < (unsigned)a.nrank)
                    qattn_port_pause();
                __threadfence();
                left_n = atomicAdd(&cnt[2 * u + 1], 1u); /* read after the combine (its latency hidden) */
            }
            __syncthreads();
            /* combine: the group's partials in rank order (qattn_qf_combine_body's arithmetic) */
            {
                const int64_t all = (int64_t)p.heads * p.nseq * nchunk * D;
                const int64_t o = hb * nchunk * D;
                const volatile double *wsum = (const volatile double *)p.work;
                const volatile float *wmn = (const volatile float *)(wsum + all), *wmx = wmn + all;
                for (int ch = tid; ch < D; ch += NT) {
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
                        cmean[ch] = m;
                        if (rank == 0)
                            p.mean[hb * D + ch] = m;
                    }
                    if (UNI) {
                        const float up = hi1 - m, down = m - lo1;
                        float am = up > down ? up : down;
                        am = am > 0.0f ? am : 0.0f;
                        if (am > 0.0f)
                            atomicMax(&cmax[a.g.chshift >= 0 ? ch >> a.g.chshift : ch / p.group.ch],
                                      qattn_num_f2u(am));
                    }
                }
            }
            /* the last block to leave the wait leaves both counters of the
             * unit zero for the next launch (the plan zeroes them once) */
            if (tid == 0 && left_n == (unsigned)a.nrank - 1u) {
                cnt[2 * u] = 0u;
                cnt[2 * u + 1] = 0u;
            }
            __syncthreads();
            if (UNI)
                for (int gi = tid; gi < p.nch; gi += NT) {
                    const float sg = qattn_num_scale_for(FMT, qattn_num_u2f(cmax[gi]), p.group.e8m0);
                    cscale[gi] = sg;
                    cmax[gi] = 0u;
                    if (rank == 0)
                        p.scale[hb * p.nch + gi] = sg;
                }
            __syncthreads();
            QATTN_UNROLL
            for (int j = 0; j < 8; j++) {
                const int ch = c * 8 + j;
                if (SM)
                    mean[j] = cmean[ch];
                if (UNI) {
                    sc[j] = cscale[a.g.chshift >= 0 ? ch >> a.g.chshift : ch / p.group.ch];
                    qattn_qs_brk(sc[j], lo[j], hi[j]);
                }
            }
            if (TR) /* every thread has read cscale before the stage, which holds it, is written */
                __syncthreads();
        }

        /* ---- phase 2: codes ---- */
        int t, t1;
        qattn_qs_slice(a, rank, un.nt2, t, t1);
        for (; t < t1; t++) {
            produce();
            qattn_port_cp_wait(S - 1);
            const uint4 *src = (const uint4 *)(ring + ((size_t)(consumed % S) * TT + r0) * D * 2 + c * 16);
            const int64_t tb = (int64_t)t * TT, left = un.n - (tb + r0);
            const int nv_tile = left < 0 ? 0 : left > 8 ? 8 : (int)left;
            /* the tile's work, compiled twice: for whole tiles (every thread 8 rows, no row tests) and for
             * the others */
            auto tile2 = [&](auto whole) {
                const int nv = decltype(whole)::value ? 8 : nv_tile;
                uint4 raw[8];
                QATTN_UNROLL
                for (int r = 0; r < 8; r++)
                    raw[r] = r < nv ? src[r * D / 8] : uint4{0u, 0u, 0u, 0u};
#define QATTN_QS_VAL(r, j) (SM ? qattn_qf_dec<IN>(raw[r], j) - mean[j] : qattn_qf_dec<IN>(raw[r], j))
                float xv[8][8]; /* token-local groups, smoothed: the values, computed once for the row maxima */
#define QATTN_QS_XV(r, j) (!UNI && SM ? xv[r][j] : QATTN_QS_VAL(r, j))
                if (!UNI) { /* token-local groups: rows' amax -> group amax (a barrier) -> each warp its rows' scales */
                    unsigned *gm = gmax + gsel * TT;
                    float am[8];
                    QATTN_UNROLL
                    for (int r = 0; r < 8; r++) {
                        am[r] = 0.0f;
                        if (SM) {
                            QATTN_UNROLL
                            for (int j = 0; j < 8; j++) {
                                xv[r][j] = QATTN_QS_VAL(r, j);
                                am[r] = fmaxf(am[r], fabsf(xv[r][j]));
                            }
                        } else { /* the largest 16-bit magnitude, Inf / NaN included */
                            am[r] = qattn_qf_amax16<IN>(raw[r], nonfin);
                        }
                    }
                    {
                        const float rm = qattn_qs_rowmax<LC>(am, c);
                        const int rr = qattn_qs_rowmax_row<LC>(c);
                        if ((LC == 3 || !(c & 1)) && rr < nv && rm > 0.0f)
                            atomicMax(&gm[gi_rm], qattn_num_f2u(rm));
                    }
                    __syncthreads();
                    /* gmax of two tiles back: read before this barrier, next written after the next one */
                    unsigned *gm2 = gmax + (gsel == 0 ? 2 : gsel - 1) * TT;
                    if (NT >= TT) {
                        if (tid < TT)
                            gm2[tid] = 0u;
                    } else {
                        for (int i = tid; i < TT; i += NT)
                            gm2[i] = 0u;
                    }
                    if (lane < WR) {
                        float4 e;
                        e.x = qattn_num_scale_for(FMT, qattn_num_u2f(gm[gi_row]), p.group.e8m0);
                        qattn_qs_brk(e.x, e.y, e.z);
                        e.w = 0.0f;
                        wsc[w * WR + lane] = e;
                        const int64_t gg = (int64_t)t * a.g.gpt + gi_row;
                        if (first_row && gg < p.ntok)
                            p.scale[hb * p.ntok + gg] = e.x;
                    }
                    qattn_port_syncwarp();
                }
                if (!TR) { /* the codes of the 8 rows without a branch; the rare rows whose brackets disagree
                            * are written again afterwards from the exact quotients */
                    enum { ROWB = QATTN_KERNELS_ROW(FMT, D) }; /* = p.row (qattn_qf_lean_takes): immediate offsets */
                    uint8_t *dst = (uint8_t *)p.codes + ((int64_t)un.h * p.tokens + un.toff + tb + r0) * ROWB;
                    auto put = [&](int r, uint2 cw) {
                        if (FMT == QATTN_FMT_INT4)
                            qattn_port_st_stream((unsigned *)(dst + r * ROWB + c * 4), cw.x);
                        else
                            qattn_port_st_stream((uint2 *)(dst + r * ROWB + c * 8), cw);
                    };
                    /* row r's values, scales and brackets (per channel, or its group's from wsc) */
                    auto row_in = [&](int r, float(&v)[8], float(&s8)[8], float(&lo8)[8], float(&hi8)[8]) {
                        const float4 e = UNI ? float4{0.0f, 0.0f, 0.0f, 0.0f} : wsc[r0 + r];
                        QATTN_UNROLL
                        for (int j = 0; j < 8; j++) {
                            v[j] = QATTN_QS_XV(r, j);
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
                } else { /* V^T (UNI, 8-bit codes): channel j's codes of the 8 rows along tokens (lean's stage) */
                    uint2 *stage = (uint2 *)tstage;
                    /* the warps of tokens 32 P .. 32 P + 31 write and flush their columns of the stage alone */
                    const int P = w / WPG;
                    auto gsync = [&]() {
                        if (WPG == 1)
                            qattn_port_syncwarp();
                        else
                            qattn_port_bar_sync(1 + P, 32 * WPG);
                    };
                    gsync(); /* the group's flush of the previous tile has read its columns */
                    qattn_qf_vt_codes<FMT, SL>(FMT, stage, (r0 >> 3) ^ (c & (SL - 1)), c, nv, sc, lo, hi,
                                               [&](int r, int j) { return QATTN_QS_VAL(r, j); });
                    gsync();
                    qattn_qs_vt_flush32<D>((const uint4 *)stage, (uint8_t *)p.codes + hb * D * p.npad + tb, p.npad, P,
                                           tid - P * 32 * WPG, 32 * WPG);
                }
            };
            if (tb + TT <= un.n) /* the block's choice: the barriers and shuffles inside need every thread */
                tile2(qattn_qs_bool<true>());
            else
                tile2(qattn_qs_bool<false>());
#undef QATTN_QS_VAL
#undef QATTN_QS_XV
            gsel = gsel == 2 ? 0 : gsel + 1;
            consumed++;
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

/* the streamed kernel of p (qattn_qs_takes) */
typedef void (*qattn_qs_fn)(qattn_kernels_quant_params, qattn_qs_args);
struct qattn_qs_family {
    typedef qattn_qs_fn fn;
    enum { INT4 = QATTN_FMT_INT4 };
    template <int IN, int FMT, int SM, int UNI, int TR, int LC>
    static fn of()
    {
        return &qattn_qs_kernel<IN, FMT, SM, UNI, TR, LC>;
    }
};

/* K and V in one grid (qattn_qs_kv_kernel): the instance for K's format
 * (int8, int4) and d, 0 where there is none */
typedef void (*qattn_qs_kv_fn)(qattn_kernels_quant_params, qattn_qs_args, qattn_kernels_quant_params, qattn_qs_args,
                               int);
template <int IN>
static qattn_qs_kv_fn qattn_qs_kv_of(const qattn_kernels_quant_params &k)
{
    if (k.d != 64 && k.d != 128)
        return (qattn_qs_kv_fn)0;
    if (k.fmt == QATTN_FMT_INT8)
        return k.d == 64 ? &qattn_qs_kv_kernel<IN, QATTN_FMT_INT8, 3> : &qattn_qs_kv_kernel<IN, QATTN_FMT_INT8, 4>;
    if (k.fmt == QATTN_FMT_INT4)
        return k.d == 64 ? &qattn_qs_kv_kernel<IN, QATTN_FMT_INT4, 3> : &qattn_qs_kv_kernel<IN, QATTN_FMT_INT4, 4>;
    return (qattn_qs_kv_fn)0;
}

/* blocks of fn that fit on the device at once (multiprocessors x
 * occupancy), remembered per kernel; 0 if the device cannot say */
template <class FN>
static int qattn_qs_capacity(FN fn, int nt, size_t smem)
{
    static struct {
        const void *fn;
        int dev, cap;
    } memo[16];
    static int nmemo;
    int dev = 0;
    if (hipGetDevice(&dev) != hipSuccess)
        return 0;
    for (int i = 0; i < nmemo; i++)
        if (memo[i].fn == (const void *)fn && memo[i].dev == dev)
            return memo[i].cap;
    int nsm = 0, occ = 0, optin = 0;
    if (hipDeviceGetAttribute(&optin, hipDeviceAttributeSharedMemPerBlockOptin, dev) != hipSuccess ||
        hipDeviceGetAttribute(&nsm, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess || smem > (size_t)optin ||
        hipFuncSetAttribute((const void *)fn, hipFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != hipSuccess ||
        hipOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, nt, smem) != hipSuccess) {
        (void)hipGetLastError(); /* a refusal only means: not this kernel */
        return 0;
    }
    const int cap = occ * nsm;
    if (nmemo < 16) {
        memo[nmemo].fn = (const void *)fn;
        memo[nmemo].dev = dev;
        memo[nmemo].cap = cap;
        nmemo++;
    }
    return cap;
}

/* whether the streamed kernel can run p (which qattn_qf_plan takes): the
 * lean kernel's cases with int8 / int4 / e4m3 codes (the dispatcher takes it
 * for those with statistics: token-uniform groups or smoothing over the
 * sequence, where three launches would read the input twice; without
 * statistics the lean kernel is faster, H100, kernels/LOG.md). On success:
 * the kernel, its grid (p.stream_tpr tiles per slice aimed for, or
 * QATTN_QS_TPR), shared memory and arguments. */
template <int IN>
static int qattn_qs_plan(const qattn_kernels_quant_params &p, qattn_qs_fn *fn, int *grid, size_t *smem,
                         qattn_qs_args *a)
{
    if (!qattn_qf_lean_takes(p) || (p.fmt != QATTN_FMT_INT8 && p.fmt != QATTN_FMT_INT4 && p.fmt != QATTN_FMT_E4M3) ||
        p.seqlen <= 0)
        return 0;
    const int uniform = qattn_qf_uniform(p.group);
    const int transposed = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED;
    const int stats = uniform || p.smooth == QATTN_KERNELS_SMOOTH_TOKENS;
    if (stats && !p.work)
        return 0;
    const int64_t units = (int64_t)p.heads * p.nseq;
    const int64_t span = transposed ? p.npad : p.seqlen;
    const int64_t tspan = (span + QATTN_QS_TT - 1) / QATTN_QS_TT;
    if (units > 0x7fffffff / 2 || tspan > 0x7fffffff)
        return 0;
    const qattn_qs_fn f = qattn_qf_ladder<qattn_qs_family, IN>(p);
    const size_t sm = qattn_qs_smem(p.d, transposed, p.smooth == QATTN_KERNELS_SMOOTH_TOKENS, uniform);
    const int nt = 2 * p.d;
    const int cap = qattn_qs_capacity(f, nt, sm) / (p.share > 1 ? p.share : 1); /* p.share: launch_quant_kv */
    if (cap <= 0)
        return 0;
    const int64_t tpr = p.stream_tpr > 0 ? p.stream_tpr : QATTN_QS_TPR;
    int64_t nrank = (tspan + tpr - 1) / tpr;
    nrank = nrank < cap ? nrank : cap;
    if (stats && nrank > qattn_qf_nchunk(p)) /* a partial per rank in p.work */
        nrank = qattn_qf_nchunk(p);
    nrank = nrank > 0 ? nrank : 1;
    int64_t ngroup = cap / nrank;
    ngroup = ngroup < units ? ngroup : units;
    a->g = qattn_qf_lean_args_of(p);
    memset(a->first, 0, sizeof a->first);
    if (!uniform) /* the first row of each token group in a tile */
        for (int r = 0; r < QATTN_QS_TT; r++) {
            int seen = 0;
            for (int q = 0; q < r && !seen; q++)
                seen = a->g.grp[q] == a->g.grp[r];
            if (!seen)
                a->first[r >> 5] |= 1u << (r & 31);
        }
    a->nrank = (int)nrank;
    a->ngroup = (int)ngroup;
    a->tpr = (int)((tspan + nrank - 1) / nrank);
    *fn = f;
    *grid = (int)(nrank * ngroup);
    *smem = sm;
    return 1;
}

#endif
