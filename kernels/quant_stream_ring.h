/* The streamed quantization kernel's parts (quant_stream.h): its tile and
 * slice constants and arguments, the shared-memory layout and stage count,
 * the work units and slices, each thread's rows and channels, and the ring
 * of 16-bit input tiles every thread fills and reads back itself. */
#ifndef QATTN_KERNELS_QUANT_STREAM_RING_H
#define QATTN_KERNELS_QUANT_STREAM_RING_H

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

/* the thread's rows (of 8) from token `row` on that lie among a sequence's n tokens */
static __device__ __forceinline__ int qattn_qs_nv(int64_t n, int64_t row)
{
    const int64_t left = n - row;
    return left < 0 ? 0 : left > 8 ? 8 : (int)left;
}

/* one unit (head, sequence) as the producer and the consumer see it */
typedef struct qattn_qs_unit {
    int u, h, b;        /* unit u = h * nseq + b */
    int64_t t0, n, toff; /* qattn_quant_seq */
    int nt1, nt2;       /* tiles of phase 1 (the sequence's n tokens) and phase 2 (qattn_qs_unit_of) */
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

/* ---- the stages of qattn_qs_body. They fill their results through
 * references (a struct returned by value, or the shared-memory base passed
 * in, changes the kernels' PTX) ---- */

/* a thread's place: lane (k, c) of warp w holds channels 8c .. 8c + 7 of tile rows r0 .. r0 + 7 */
typedef struct qattn_qs_thread {
    int tid, lane, w, c, k, r0;
    int rank, g; /* the block: slice `rank` of group g */
} qattn_qs_thread;

template <int LC>
static __device__ __forceinline__ void qattn_qs_thread_of(const qattn_qs_args &a, int bid, qattn_qs_thread &th)
{
    enum { L = 1 << LC, WR = 8 * (32 >> LC) /* rows of a warp */ };
    th.tid = (int)threadIdx.x;
    th.lane = th.tid & 31;
    th.w = th.tid >> 5;
    th.c = th.lane & (L - 1);
    th.k = th.lane >> LC;
    th.r0 = th.w * WR + 8 * th.k;
    th.rank = (int)((unsigned)bid % (unsigned)a.nrank);
    th.g = (int)((unsigned)bid / (unsigned)a.nrank);
}

/* the block's dynamic shared memory, laid out as qattn_qs_smem_s says */
typedef struct qattn_qs_shared {
    unsigned char *ring;   /* [S][TT][D] 16-bit input rows */
    unsigned char *tstage; /* TR: [D][TT] codes */
    double *red;           /* statistics, smoothing: [NW][D] sums (at tstage) */
    float *redmn, *redmx;  /* statistics, uniform groups: [NW][D] minima, maxima */
    float *cmean;          /* smoothing: [D] channel means */
    float *cscale;         /* uniform groups: [D] scales of the channel groups */
    unsigned *cmax;        /* [D] amax bits of the channel groups */
    unsigned *gmax;        /* token-local groups: [3][TT] amax bits of the token groups */
    float4 *wsc;           /* token-local groups: [NW][WR] scale, lo, hi of each row's group */
} qattn_qs_shared;

template <int SM, int UNI, int TR, int LC>
static __device__ __forceinline__ void qattn_qs_shared_of(qattn_qs_shared &sh)
{
    enum {
        NW = (16 << LC) / 32, D = 8 << LC, TT = QATTN_QS_TT, SMT = SM == QATTN_KERNELS_SMOOTH_TOKENS,
        S = qattn_qs_stages(D, TR, SMT, UNI)
    };
    QATTN_DYNAMIC_SHARED(uint4, qs_smem);
    sh.ring = (unsigned char *)qs_smem;
    sh.tstage = sh.ring + (size_t)S * TT * D * 2;
    sh.red = (double *)sh.tstage;
    sh.redmn = (float *)(sh.red + (SM ? NW * D : 0));
    sh.redmx = sh.redmn + NW * D;
    sh.cmean = (float *)(sh.tstage + qattn_qs_smem_mid(D, TR, SMT, UNI));
    sh.cscale = TR ? (float *)(sh.tstage + qattn_qs_smem_red(D, SMT, UNI)) : sh.cmean + (SMT ? D : 0);
    sh.cmax = (unsigned *)(sh.cscale + D);
    sh.gmax = sh.cmax + D;
    sh.wsc = (float4 *)(sh.gmax + 3 * TT);
}

/* The ring of S tiles: its producer copies the thread's 8 rows of the next
 * tile of the block's work (the phase 1 and 2 slices of its units in turn)
 * S - 1 tiles ahead of its consumer. The field order is not arbitrary:
 * with it the kernels' PTX is the uncut body's up to register numbers. */
typedef struct qattn_qs_ring {
    int t1, t;            /* the producer's tiles [t, t1) of its slice left */
    qattn_qs_unit un;     /* its unit (un.u = units: no tiles left) */
    int ph;               /* its phase (1, 2) */
    const uint16_t *x;    /* the unit's row r0 of tile 0, the thread's channels */
    int issued, consumed; /* tiles copied, tiles read (a tile's stage: its number % S) */
} qattn_qs_ring;

/* the thread's first row and channel of unit un in p.x */
static __device__ __forceinline__ const uint16_t *qattn_qs_unit_x(const qattn_kernels_quant_params &p,
                                                                 const qattn_qs_unit &un, const qattn_qs_thread &th)
{
    return qattn_qf_seq_x(p, un.b, un.t0, un.h) + (int64_t)th.r0 * p.x_stride_tok + th.c * 8;
}

/* the producer at the next non-empty slice from its (unit, phase) on */
template <int STATS>
static __device__ __forceinline__ void qattn_qs_ring_next(qattn_qs_ring &rg, const qattn_kernels_quant_params &p,
                                                          const qattn_qs_args &a, const qattn_qs_thread &th,
                                                          int units)
{
    while (rg.un.u < units) {
        if (rg.t < rg.t1)
            return;
        if (rg.ph == 1) {
            rg.ph = 2;
        } else {
            if (rg.un.u + a.ngroup >= units) {
                rg.un.u = units;
                return;
            }
            qattn_qs_unit_of(p, rg.un.u + a.ngroup, rg.un);
            rg.x = qattn_qs_unit_x(p, rg.un, th);
            rg.ph = STATS ? 1 : 2;
        }
        qattn_qs_slice(a, th.rank, rg.ph == 1 ? rg.un.nt1 : rg.un.nt2, rg.t, rg.t1);
    }
}

/* the producer's next tile, if any, into its stage of ring ([S][TT][D] rows; 16-byte async copies), then a commit */
template <int STATS, int S, int LC>
static __device__ __forceinline__ void qattn_qs_ring_produce(qattn_qs_ring &rg, unsigned char *ring,
                                                             const qattn_kernels_quant_params &p,
                                                             const qattn_qs_args &a, const qattn_qs_thread &th,
                                                             int units)
{
    enum { D = 8 << LC, TT = QATTN_QS_TT };
    if (rg.un.u < units) {
        const int nv = qattn_qs_nv(rg.un.n, (int64_t)rg.t * TT + th.r0);
        const uint16_t *x = rg.x + (int64_t)rg.t * TT * p.x_stride_tok;
        unsigned char *dst = ring + ((size_t)(rg.issued % S) * TT + th.r0) * D * 2 + th.c * 16;
        qattn_qs_rows(nv, [&](int j) { qattn_port_cp16(dst + j * D * 2, x + j * p.x_stride_tok); });
        rg.issued++;
        rg.t++;
        qattn_qs_ring_next<STATS>(rg, p, a, th, units);
    }
    qattn_port_cp_commit();
}

/* the ring of the block's units g, g + ngroup, ...: the producer at its first slice, S - 1 tiles issued */
template <int STATS, int S, int LC>
static __device__ __forceinline__ void qattn_qs_ring_init(qattn_qs_ring &rg, unsigned char *ring,
                                                          const qattn_kernels_quant_params &p, const qattn_qs_args &a,
                                                          const qattn_qs_thread &th, int units)
{
    rg.ph = STATS ? 1 : 2;
    qattn_qs_unit_of(p, th.g, rg.un);
    rg.x = qattn_qs_unit_x(p, rg.un, th);
    qattn_qs_slice(a, th.rank, rg.ph == 1 ? rg.un.nt1 : rg.un.nt2, rg.t, rg.t1);
    qattn_qs_ring_next<STATS>(rg, p, a, th, units);
    for (int i = 0; i < S - 1; i++) /* tiles 0 .. S - 2; each tile t read issues tile t + S - 1 first */
        qattn_qs_ring_produce<STATS, S, LC>(rg, ring, p, a, th, units);
}

/* the consumer's next tile: tile + S - 1 issued (into the stage read last), this tile's copies waited for; the
 * thread's rows of it ([8][D / 8] uint4 apart), channels 8c .. 8c + 7 (the caller counts it consumed when done) */
template <int STATS, int S, int LC>
static __device__ __forceinline__ const uint4 *qattn_qs_ring_take(qattn_qs_ring &rg, unsigned char *ring,
                                                                 const qattn_kernels_quant_params &p,
                                                                 const qattn_qs_args &a, const qattn_qs_thread &th,
                                                                 int units)
{
    enum { D = 8 << LC, TT = QATTN_QS_TT };
    qattn_qs_ring_produce<STATS, S, LC>(rg, ring, p, a, th, units);
    qattn_port_cp_wait(S - 1);
    return (const uint4 *)(ring + ((size_t)(rg.consumed % S) * TT + th.r0) * D * 2 + th.c * 16);
}

#endif
