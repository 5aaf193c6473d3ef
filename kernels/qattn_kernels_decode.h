/* qattn GPU kernels, decode family: split-KV attention of a varlen batch of
 * query rows (decode sq = 1..16, chunked prefill) over a paged, optionally
 * quantized KV cache, GQA packed, with an fp32 LSE combine of the splits
 * (docs/DESIGN.md "KV caches and split-KV"; the emulation is qattn_kv_emu).
 *
 * The cache on the device (qattn_kernels_kvcache_dev) is the emulation's
 * qattn_kvcache in storage form:
 *   k, v       pages of page_size tokens x hkv heads of stored rows (row =
 *              QATTN_KERNELS_ROW(fmt, d); fp32 / fp16 / bf16 values, or
 *              int8 / int4 / e4m3 / e5m2 codes), [num_pages, page_size, hkv,
 *              row] (layout NHD, the emulation's) or [num_pages, hkv,
 *              page_size, row] (HND: a head's rows of a page contiguous): the
 *              token at position pos of sequence s is in-page row pos %
 *              page_size of page table[s][pos / page_size] (qattn_kernels_kv_row);
 *   k_scale, v_scale  [nseq, hkv, ntok, nch] fp32 (scaled formats): the
 *              scale of position pos, channel c is at token group pos / G
 *              (G = 1 for group token) and channel group c / C;
 *   k_open, v_open    [nseq, hkv, G, d] fp32 (block:G / warp:G groups): the
 *              values of the open group, positions G * floor(len / G) ..
 *              len - 1 (KIVI's residual), at row pos % G;
 *   len        [nseq] tokens in the cache; a batch attends to all of them.
 * Value of (s, h, pos, c): the open group's fp32 value, else code * scale. */
#ifndef QATTN_KERNELS_DECODE_H
#define QATTN_KERNELS_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/kvcache.h"
#include "qattn/numerics.h" /* QATTN_HD */
#include "qattn_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QATTN_KERNELS_DECODE_SPLITS_MAX 256 /* most splits the plan takes */
#define QATTN_DECODE_CLUSTER_MAX 8 /* most splits a row tile runs as one cluster (the portable size) */
#define QATTN_DECODE_SHARE_MIN_KEYS 8192 /* fewest keys a split (by the cache's capacity) whose cluster's
                                         * blocks share chunks (4096: 0.97x int8's time without sharing,
                                         * bf16 equal; 8192: int8 equal, bf16 1.01x with; H200 2026-12-01) */
#define QATTN_DECODE_SPIN_MAX 64   /* most splits the split kernel combines itself (params spin; at 128 a
                                    * combining block reads 128 partials a row: 0.98-1.02x, H200 2026-12-01) */

/* the order of a page's rows in the pool */
typedef enum qattn_kernels_kv_layout {
    QATTN_KERNELS_KV_NHD = 0, /* [num_pages, page_size, hkv, row]: a token's heads together */
    QATTN_KERNELS_KV_HND      /* [num_pages, hkv, page_size, row]: a head's tokens of a page together */
} qattn_kernels_kv_layout;

/* 1 for a pool layout the kernels know (qattn_kernels_kv_layout), else 0 */
static inline QATTN_HD int qattn_kernels_kv_layout_ok(int layout)
{
    return layout == QATTN_KERNELS_KV_NHD || layout == QATTN_KERNELS_KV_HND;
}

/* the pool row (rows of QATTN_KERNELS_ROW(fmt, d) elements) of in-page row off of page `page`, kv
 * head hk; a page is page_size * hkv rows in either layout */
static inline QATTN_HD int64_t qattn_kernels_kv_row(int layout, int64_t page, int page_size, int hkv, int off, int hk)
{
    return page * page_size * hkv +
           (layout == QATTN_KERNELS_KV_HND ? (int64_t)hk * page_size + off : (int64_t)off * hkv + hk);
}

typedef struct qattn_kernels_kvcache_dev {
    void *k, *v;                 /* pool pages as `layout` orders them, device */
    float *k_scale, *v_scale;    /* [nseq, hkv, ntok, nch] device, or NULL (unscaled) */
    float *k_open, *v_open;      /* [nseq, hkv, G, d] device, or NULL (no open group) */
    int32_t *table;              /* [nseq, max_pages] device page ids (-1: none) */
    int *len;                    /* [nseq] device */
    int64_t num_pages;
    int page_size, max_pages, nseq, hkv, d;
    qattn_operand kop, vop;      /* storage formats and scale groups */
    int layout;                  /* qattn_kernels_kv_layout */
    int k_ntok, k_nch, v_ntok, v_nch;
    int owned;                   /* 1: qattn_kernels_kvcache_dev_free frees the buffers */
} qattn_kernels_kvcache_dev;

/* Copy an emulated cache c to the device in storage form (codes, scales,
 * open groups, table, lengths). Errors: a format the device cannot store
 * (e8m0 elements), device errors. */
int qattn_kernels_kvcache_upload(qattn_kernels_kvcache_dev *dev, const qattn_kvcache *c, qattn_err *err);
/* the stored bytes of one pool row of d values in format f (int4: (d + 1) / 2) */
size_t qattn_kernels_kv_row_bytes(qattn_fmt f, int d);
/* the same as qattn_kernels_kvcache_upload with the pool in `layout` (qattn_kernels_kv_layout; upload:
 * NHD). Errors: an unknown layout */
int qattn_kernels_kvcache_upload_as(qattn_kernels_kvcache_dev *dev, const qattn_kvcache *c, int layout,
                                    qattn_err *err);
void qattn_kernels_kvcache_dev_free(qattn_kernels_kvcache_dev *dev);

/* one problem: nseq sequences, sq rows each (the longest with varlen), over
 * the whole cache of each sequence */
typedef struct qattn_kernels_decode_problem {
    int nseq, hq, hkv, d;
    int seqlen_q;          /* rows per sequence; with cu_q, the longest */
    int max_seqlen_k;      /* longest cache length (sizes the split rule) */
    qattn_mask mask;       /* on (sq, len) of each sequence: causal-br for decode / chunked prefill */
    double scale;          /* softmax scale; <= 0: 1/sqrt(d) (the plan's lse pointer says whether LSE is wanted) */
    qattn_fmt in, out;     /* query dtype (fp16, bf16, fp32), output dtype */
    qattn_operand k, v;    /* the cache's storage (qattn_kvcache_cfg's) */
    int num_splits;        /* 0: the plan's rule (qattn_kernels_decode_splits), else 1 .. SPLITS_MAX */
    int kblock;            /* portable path: online-softmax block (the emulation's kblock); 0: 64 */
    int cc;                /* as qattn_kernels_problem's: 0 asks the device, -1 no device check */
    unsigned paths;        /* bit set of paths the dispatcher may take; 0: all */
} qattn_kernels_decode_problem;

struct qattn_kernels_decode_params {
    const void *q;         /* dtype in; element (b, h, t, c) at q[b*q_sb + (t0 + t)*q_st + h*q_sh + c],
                            * t0 = cu_q[b] or 0 */
    qattn_fmt in;
    int64_t q_sb, q_sh, q_st;
    void *o;               /* dtype out, the same element rule */
    qattn_fmt out;
    int64_t o_sb, o_sh, o_st;
    float *lse;            /* [hq, Tq] natural log, or NULL; (b, h, t) at h*lse_sh + t0'(b) + t,
                            * t0'(b) = cu_q[b] or b * seqlen_q */
    int64_t lse_sh;        /* Tq */
    const int *cu_q;       /* [nseq + 1] device, or NULL (seqlen_q rows each) */
    int nseq, hq, hkv, d, seqlen_q;
    qattn_kernels_kvcache_dev cache; /* device pointers of the cache */
    qattn_mask mask;
    float c2;              /* softmax scale * log2(e) */
    int kblock;            /* portable: online-softmax block */
    int num_splits;        /* 1: o and lse written directly; else partials, then the combine */
    float *o_part;         /* [num_splits, hq, Tq, d] fp32 normalized partial outputs (num_splits > 1) */
    float *lse_part;       /* [num_splits, hq, Tq] natural-log LSE of each split, -inf without a key */
    int stages;            /* 0: split kernel, then the combine; timing: 1 the split kernel alone, 2 the
                            * combine alone (on the partials a previous run left) */
    qattn_kernels_fastdiv div_grp, div_hkv, div_splits, div_page; /* hq / hkv, hkv, num_splits, page size */
    /* the mma path's comparison switches (the environment's QATTN_DECODE_*, read once by
     * qattn_kernels_decode_fill: a launch reads none); zero: the launcher's rules */
    unsigned mma_off;      /* QATTN_KERNELS_DECODE_OFF_* bits: choices the launcher must not take */
    int mma_spec;          /* speculation: 0 the rule, -1 never (QATTN_DECODE_SPEC=0), 1 wherever the rows are
                            * fixed (=1), 2 / 3 the tests' spoiling modes (=spoil-len / =spoil-rows) */
    int mma_warps;         /* 8-bit and int4 caches' block form: 0 the rule, 8 or 12 warps (QATTN_DECODE_WARPS=8 / 12) */
    unsigned l2_prefetch;  /* mma path, set by its launcher (OFF_PREFETCH: 0; OFF_PREFETCH_MULTI: 0 with several kv
                            * heads): a block's share of the bytes of its split prefetched into L2 while the
                            * previous kernel finishes (half the L2 over the grid's blocks; whole pages, a
                            * split's pages over its kv heads' blocks) */
    int spec;              /* mma path, set by its launcher: 1 read the length and the first table entries before
                            * waiting for the previous kernel and check them after it (fixed query rows, grids
                            * of at most half the multiprocessors; mma_spec -1: 0); tests: 2 / 3 spoil the
                            * length / the rows read first (mma_spec 2 / 3) */
    int cluster;           /* mma path, set by its launcher: a row tile's num_splits (2 .. 8) blocks run as one
                            * thread-block cluster that combines in shared memory (no partials, no combine
                            * kernel; sm_90 on, stages 0, OFF_CLUSTER: never) */
    int share;             /* mma path, set by its launcher, without speculation: the splits of a thread-block
                            * cluster whose blocks share their chunks through a counter in it (num_splits with
                            * cluster, else 2 for an even count; 0: none; splits of QATTN_DECODE_SHARE_MIN_KEYS
                            * keys or more by the capacity, or ON_SHARE; OFF_SHARE: never) */
    unsigned *spin_cnt;    /* [grid tiles][2] device, zero between launches (the plan's: it zeroes them once, the
                            * kernel leaves them zero), or NULL: a row tile's arrival / departure counts for spin */
    int spin;              /* mma path, set by its launcher: the split kernel's blocks combine the partials
                            * themselves (2 .. QATTN_DECODE_SPIN_MAX splits, every block resident at once,
                            * stages 0, not in a cluster, spin_cnt;
                            * OFF_SPIN: never): each writes its partial, counts itself on its tile's
                            * word and waits for the tile's num_splits, then block s combines rows s, s + ns, ...
                            * of the tile (no combine kernel, no kernel boundary). A plain launch: it needs
                            * a grid's blocks to start before a later grid's (two grids on two streams are
                            * checked); with stream priorities set QATTN_DECODE_SPIN=0 */
    unsigned long long *stamps; /* [grid blocks][QATTN_KERNELS_DECODE_STAMPS] device, or NULL: the mma split
                            * kernel's timeline (qattn decode-bench --stamps; layout at the enum below; only
                            * builds with QATTN_DECODE_STAMPS write it) */
};

/* 1 where the kernels were built with -DQATTN_DECODE_STAMPS=ON (params stamps are written), else 0 */
int qattn_kernels_decode_stamps_built(void);

/* params stamps, per block (linear index x + gridDim.x (y + gridDim.y z)): the globaltimer (ns) at
 * phases 0-6 (entry; the previous kernel waited for; first copies issued; warp 0's first chunk
 * landed; every warp's loop done; the merge written; the end), clock64 at the same phases, the
 * multiprocessor | cluster rank << 16 | the block's chunks << 32, and each warp's loop end (ns) */
enum {
    QATTN_KERNELS_DECODE_STAMP_PHASES = 7,
    QATTN_KERNELS_DECODE_STAMP_CLOCK = 7,  /* first clock64 slot */
    QATTN_KERNELS_DECODE_STAMP_WHERE = 14, /* smid, rank, chunks */
    QATTN_KERNELS_DECODE_STAMP_WARP = 15,  /* first warp's loop end */
    QATTN_KERNELS_DECODE_STAMPS = 28       /* slots a block (15 + up to 12 warps, padded) */
};

/* params mma_off: the environment's QATTN_DECODE_CLUSTER=0, _SHARE=0, _SPIN=0, _PREFETCH=0,
 * _PREFETCH=one and _SHARE=1 (sharing at any split length: the tests) */
enum {
    QATTN_KERNELS_DECODE_OFF_CLUSTER = 1u,
    QATTN_KERNELS_DECODE_OFF_SHARE = 2u,
    QATTN_KERNELS_DECODE_OFF_SPIN = 4u,
    QATTN_KERNELS_DECODE_OFF_PREFETCH = 8u,
    QATTN_KERNELS_DECODE_OFF_PREFETCH_MULTI = 16u,
    QATTN_KERNELS_DECODE_ON_SHARE = 32u
};
/* the comparison switches of the environment into p (mma_off, mma_spec, mma_warps; qattn_kernels_decode_fill
 * calls it) */
void qattn_kernels_decode_switches(qattn_kernels_decode_params *p);

/* Fill p for pb from the query and output tensors (strides in elements), lse
 * ([hq, tokens_q] device or NULL), cu_q (device or NULL), tokens_q (Tq), the
 * device cache and the partial buffers (sized by qattn_kernels_decode_part_sizes
 * for p's num_splits, NULL when it is 1). num_splits must be set (>= 1). */
int qattn_kernels_decode_fill(qattn_kernels_decode_params *p, const qattn_kernels_decode_problem *pb,
                              const qattn_kernels_tensor *q, const qattn_kernels_tensor *o, float *lse,
                              int64_t tokens_q, const int *cu_q, const qattn_kernels_kvcache_dev *cache,
                              int num_splits, float *o_part, float *lse_part, qattn_err *err);
void qattn_kernels_decode_part_sizes(const qattn_kernels_decode_problem *pb, int64_t tokens_q, int num_splits,
                                     size_t *o_part, size_t *lse_part);

/* The decode instance for pb (the most preferred path the device runs), or
 * a message naming what no instance takes. */
int qattn_kernels_decode_find(const qattn_kernels_decode_problem *pb, const qattn_kernels_sig **sig, qattn_err *err);

/* The split rule (docs/DESIGN.md "KV caches and split-KV"): with B = blocks
 * one split needs (nseq x hkv x row tiles of 16 packed rows) and slots =
 * the device's multiprocessors x blocks each holds, the smallest n in
 * 1 .. max whose blocks fill their waves to 0.85, n B / (ceil(n B / slots)
 * slots) >= 0.85 (a first partial wave counts as a wave), where max =
 * min(SPLITS_MAX, ceil(max_seqlen_k / 256)) (a split keeps at least 256
 * keys), else max; n = 1 when B alone fills the chip. With keys_per_round
 * R > 0 (the instance's), n then grows within the same waves (up to
 * waves x slots / B and max) to the smallest n with the fewest rounds
 * ceil(ceil(max_seqlen_k / n) / R): every warp of a block gets the same
 * number of chunks. */
int qattn_kernels_decode_splits(const qattn_kernels_decode_problem *pb, int sm_count, int blocks_per_sm,
                                int keys_per_round);
/* B above: the row tiles of pb's split grid (16 packed query rows of one kv head and sequence), each
 * also a pair of the plan's spin counters */
int64_t qattn_kernels_decode_tiles(const qattn_kernels_decode_problem *pb);

typedef struct qattn_kernels_decode_plan {
    qattn_kernels_decode_problem pb;
    const qattn_kernels_sig *sig;
    qattn_kernels_decode_params p;
    int num_splits;
    void *dev[4];          /* owned device buffers (partials, cu_q, spin counters) */
    int ndev;
} qattn_kernels_decode_plan;

/* A plan for pb over the device cache: the instance, num_splits (pb's, or
 * the rule's on the current device), the partial buffers. q, o: device
 * tensors; cu_q: [nseq + 1] host offsets or NULL; lse [hq, Tq] device or NULL. */
int qattn_kernels_decode_plan_init(qattn_kernels_decode_plan *pl, const qattn_kernels_decode_problem *pb,
                                   const qattn_kernels_tensor *q, const qattn_kernels_tensor *o, float *lse,
                                   const int *cu_q, const qattn_kernels_kvcache_dev *cache, qattn_err *err);
int qattn_kernels_decode_plan_run(const qattn_kernels_decode_plan *pl, void *stream, qattn_err *err);
void qattn_kernels_decode_plan_free(qattn_kernels_decode_plan *pl);

/* ---- checks against the emulation (kernels/decode_check.c) ----
 * Tolerances, relative to max |V| for o: the portable path differs from
 * qattn_kv_emu only by exp2f / expf (bit-equal in the host simulation); the
 * fast path rounds P to its 16-bit MMA type (2^-9 relative in bf16) and uses
 * ex2.approx. An fp16 / bf16 output adds one rounding step of its own. */
#define QATTN_KERNELS_DECODE_TOL_PORTABLE 1e-5
#define QATTN_KERNELS_DECODE_TOL_FAST 3e-3
#define QATTN_KERNELS_DECODE_LSE_TOL_PORTABLE 1e-5
#define QATTN_KERNELS_DECODE_LSE_TOL_FAST 1e-4

typedef struct qattn_kernels_decode_case {
    int d, hq, hkv, nseq;
    int sq[4], sk[4];      /* rows and cache length per sequence */
    int page;              /* page size */
    int num_splits;        /* 0: the plan's rule */
    const char *k, *v;     /* cache operands, "fmt[@group]" */
    const char *mask;      /* none, causal, causal-br, window:L,R */
    qattn_fmt in, out;
    int kblock;
    int varlen;            /* 1: rows through cu_q (else every sequence has the longest's rows) */
    int quick;             /* 1: in the quick set (compute-sanitizer) */
    int q_offset;          /* elements the query tensor starts past its allocation (0: aligned) */
    int layout;            /* the pool's qattn_kernels_kv_layout */
} qattn_kernels_decode_case;

typedef struct qattn_kernels_decode_result {
    int ran;               /* 0: the paths asked for take no instance for the case */
    const qattn_kernels_sig *sig;
    int num_splits;
    double err;            /* max |o - o_emu| / max |V| (o in the output dtype, o_emu rounded to it) */
    double max_dlse, cos;  /* max |lse - lse_emu|; cos(o, o_emu) */
    long diff_o, diff_lse; /* elements whose bits differ */
    double tol, lse_tol;
    long counters_left;    /* the plan's spin counters not zero after its runs */
    long streams_diff;     /* bytes of a second plan's output beside it on another stream (the checks' option)
                            * that differ from the first's */
    int pass;              /* err <= tol, max_dlse <= lse_tol, no counter left, streams_diff 0 */
} qattn_kernels_decode_result;

/* the case table */
const qattn_kernels_decode_case *qattn_kernels_decode_cases(size_t *n);
/* one case on the device through the dispatcher (paths: as the problem's;
 * 0: all), *seed advanced; 0 with res->ran = 0 when paths take no instance.
 * checks: QATTN_KERNELS_DECODE_CHECK_STREAMS also runs a second plan of a
 * fast-path case with splits beside the first on another stream (res->streams_diff) */
#define QATTN_KERNELS_DECODE_CHECK_STREAMS 1u
int qattn_kernels_decode_run_case(const qattn_kernels_decode_case *c, unsigned paths, unsigned checks, uint64_t *seed,
                                  qattn_kernels_decode_result *res, qattn_err *err);

/* the current device's multiprocessor count (1 in the host simulation) */
int qattn_kernels_dev_sm_count(void);

#ifdef __cplusplus
}
#endif
#endif
