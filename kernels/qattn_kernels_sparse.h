/* qattn GPU kernels, sparse family: the DeepSeek-V4 sparse prefill (issue
 * 30). Each query token attends to its own list of cache positions; one KV
 * row a position serves as key and value; the cache is a paged prefix plus
 * an extend part; a per-head sink adds a logit to the denominator only. The
 * emulation is qattn_emu_sparse (quant/include/qattn/sparse.h), with the
 * scheme qattn_kernels_sparse_scheme names for each variant.
 *
 * The cache on the device (qattn_kernels_sparse_kv), per part (pool, ext):
 *   bf16 rows  val  [rows, hkv, d] bf16;
 *   fp8 rows   val  [rows, hkv, d - rope] e4m3 codes of the "nope" channels,
 *              sc   [rows, hkv, SC_ROW] e8m0 scale codes (one per 64
 *                   channels and token; rows padded to 8 bytes),
 *              rope [rows, hkv, rope] bf16 (the last rope channels);
 * position p of kv head g: p < prefix at pool row table[p / page] * page +
 * p % page, else ext row p - prefix. */
#ifndef QATTN_KERNELS_SPARSE_H
#define QATTN_KERNELS_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/sparse.h"
#include "qattn_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the three ways to run it (the bench's variant column) */
typedef enum qattn_kernels_sparse_variant {
    QATTN_KERNELS_SPARSE_BF16 = 0, /* bf16 cache; Q.K and P.V in bf16 */
    QATTN_KERNELS_SPARSE_PREPASS,  /* fp8 cache dequantized into a bf16 scratch, then the bf16 kernel */
    QATTN_KERNELS_SPARSE_FUSED,    /* fp8 cache as stored: Q quantized like the cache, e4m3 Q.K on the
                                    * nope channels, bf16 on the rope ones, V dequantized on chip */
    QATTN_KERNELS_SPARSE_COUNT
} qattn_kernels_sparse_variant;

#define QATTN_KERNELS_SPARSE_SCALE_CH 64 /* channels per e8m0 scale of the fp8 rows */
#define QATTN_KERNELS_SPARSE_D_MAX 512   /* widest head of the portable path */
/* bytes of a row's scale codes: one per 64 of the dn nope channels, padded to 8 */
#define QATTN_KERNELS_SPARSE_SC_ROW(dn) (((dn) / QATTN_KERNELS_SPARSE_SCALE_CH + 7) / 8 * 8)

/* "bf16", "prepass", "fused"; NULL for others */
const char *qattn_kernels_sparse_variant_name(qattn_kernels_sparse_variant v);
/* the emulation's scheme of variant v (kblock keys a block, rope bf16 channels) into buf */
char *qattn_kernels_sparse_scheme(qattn_kernels_sparse_variant v, int kblock, int rope, char *buf, size_t len);

typedef struct qattn_kernels_kvrows {
    void *val;      /* bf16 [rows, hkv, d] or e4m3 [rows, hkv, d - rope], device */
    uint8_t *sc;    /* fp8: [rows, hkv, SC_ROW(d - rope)] e8m0, device; bf16: NULL */
    uint16_t *rope; /* fp8: [rows, hkv, rope] bf16, device; bf16: NULL */
    int64_t rows;
} qattn_kernels_kvrows;

typedef struct qattn_kernels_sparse_kv {
    int fp8;                        /* 0: bf16 rows; 1: the DeepSeek-V4 fp8 rows */
    int d, rope, hkv, page;         /* page 1..256 with a prefix (0: none) */
    int64_t prefix, sk;             /* positions 0..sk-1; the first prefix in the pool */
    qattn_kernels_kvrows pool, ext; /* pool: npool * page rows; ext: sk - prefix rows */
    int32_t *table;                 /* [ceil(prefix / page)] device pool pages */
    int owned;                      /* 1: qattn_kernels_sparse_kv_free frees rows and table, 2: the rows */
} qattn_kernels_sparse_kv;

/* The KV rows of a (its k, which must be its v: one row as key and value)
 * on the device in storage form: bf16 rows, or (fp8 = 1) the fp8 rows of
 * the scheme's quantization (e4m3 codes with e8m0 scales per 64 channels and
 * token, exactly as qattn_emu_sparse forms them, the last rope channels in
 * bf16). Errors: v != k, d - rope not a multiple of 64 with fp8, device
 * errors. */
int qattn_kernels_sparse_kv_upload(qattn_kernels_sparse_kv *dev, const qattn_sparse *a, int fp8, int rope,
                                   qattn_err *err);
/* bf16 rows of the same shape and pages (the prepass's scratch), uninitialized */
int qattn_kernels_sparse_kv_alloc_bf16(qattn_kernels_sparse_kv *dev, const qattn_kernels_sparse_kv *like,
                                       qattn_err *err);
void qattn_kernels_sparse_kv_free(qattn_kernels_sparse_kv *dev);

typedef struct qattn_kernels_sparse_problem {
    int sq, hq, hkv, d, rope; /* query tokens, heads (hq % hkv == 0), head dim, bf16 tail channels */
    int topk;                 /* entries of each token's list */
    qattn_kernels_sparse_variant variant;
    qattn_fmt in, out;        /* query dtype (bf16, fp16, fp32), output dtype */
    double scale;             /* <= 0: 1 / sqrt(d) */
    int kblock;               /* portable path: the emulation's kblock (1..128); 0: 64 */
    int cc;                   /* as qattn_kernels_problem's */
    unsigned paths;           /* paths the dispatcher may take; 0: all */
} qattn_kernels_sparse_problem;

struct qattn_kernels_sparse_params {
    const void *q;          /* dtype in; element (t, h, c) at q[t * q_st + h * q_sh + c] */
    int64_t q_st, q_sh;
    qattn_fmt in;
    void *o;                /* dtype out; the same element rule with o_st, o_sh */
    int64_t o_st, o_sh;
    qattn_fmt out;
    float *lse;             /* [hq, sq] natural log, or NULL */
    const int32_t *idx;     /* [sq, topk] positions, -1 pads (device) */
    const int32_t *len;     /* [sq] entries that count, or NULL (device) */
    const float *sink;      /* [hq] sink logits, or NULL (device) */
    int topk;
    qattn_kernels_sparse_kv kv;
    int sq, hq, hkv, d, rope;
    int q_fp8;              /* 1: Q.K on Q quantized per 64 channels (the fused variant) */
    float c2;               /* softmax scale * log2(e) */
    int kblock;             /* portable: listed keys a softmax block */
    qattn_kernels_fastdiv div_page; /* by kv.page (1 without a pool): the wgmma producers' page lookups */
    uint32_t *work;         /* fp8 wgmma: [2] device, zero between launches: the next item's counter, the CTAs
                             * finished (the last zeroes both); the plan's (the launcher refuses NULL) */
    uint16_t *widen_table;  /* test, fp8 wgmma instance: [256 scale codes][256 e4m3 codes] device bf16, the
                             * producer's widening of each (written instead of attention; NULL: attention) */
    uint16_t *qquant_table; /* test, fp8 wgmma instance: [qquant_n][64] device bf16 slabs, quantized in place as
                             * the kernel quantizes Q (instead of attention; NULL: attention) */
    int qquant_n;
};

/* The instance for pb (the most preferred path that fits), or a message
 * naming what none takes. The prepass variant finds the bf16 instance. */
int qattn_kernels_sparse_find(const qattn_kernels_sparse_problem *pb, const qattn_kernels_sig **sig, qattn_err *err);

typedef struct qattn_kernels_sparse_plan {
    qattn_kernels_sparse_problem pb;
    const qattn_kernels_sig *sig;
    qattn_kernels_sparse_params p;  /* the attention kernel's (the scratch's rows for the prepass) */
    qattn_kernels_sparse_kv src;    /* the cache as given */
    qattn_kernels_sparse_kv scratch;/* prepass: the bf16 copy */
} qattn_kernels_sparse_plan;

/* A plan: q, o device tensors ([sq, hq, d] through stride_tok and
 * stride_head), lse [hq, sq] device or NULL, idx / len / sink device arrays
 * (len, sink may be NULL), kv the device cache (bf16 rows for the bf16
 * variant, fp8 rows for the others). The prepass variant allocates its
 * scratch here, the fused variant the persistent kernel's item counter
 * (params work): run a plan on one stream at a time. */
int qattn_kernels_sparse_plan_init(qattn_kernels_sparse_plan *pl, const qattn_kernels_sparse_problem *pb,
                                   const qattn_kernels_tensor *q, const qattn_kernels_tensor *o, float *lse,
                                   const int32_t *idx, const int32_t *len, const float *sink,
                                   const qattn_kernels_sparse_kv *kv, qattn_err *err);
/* stage: 0 everything, 1 the prepass alone, 2 the attention kernel alone */
int qattn_kernels_sparse_plan_run(const qattn_kernels_sparse_plan *pl, int stage, void *stream, qattn_err *err);
void qattn_kernels_sparse_plan_free(qattn_kernels_sparse_plan *pl);

/* the prepass: fp8 rows of src into the bf16 rows of dst (same shape), both parts */
int qattn_kernels_sparse_prepass(const qattn_kernels_sparse_kv *src, const qattn_kernels_sparse_kv *dst,
                                 void *stream, qattn_err *err);

/* ---- checks against the emulation (kernels/sparse_check.c) ----
 * Relative to max |V| for o. The portable path is the emulation step by
 * step (exp2f for its exp2); the fast path sums Q.K in fp32 on the tensor
 * cores, cuts the list into blocks of 64 entries (holes included) and uses
 * ex2.approx, so P rounds to bf16 at other maxima. */
#define QATTN_KERNELS_SPARSE_TOL_PORTABLE 1e-5
#define QATTN_KERNELS_SPARSE_TOL_FAST 4e-3
#define QATTN_KERNELS_SPARSE_LSE_TOL_PORTABLE 1e-5
#define QATTN_KERNELS_SPARSE_LSE_TOL_FAST 2e-4

typedef enum qattn_kernels_sparse_lists {
    QATTN_KERNELS_SPARSE_LISTS_SPARSE = 0, /* random distinct positions, ragged lengths, -1 holes */
    QATTN_KERNELS_SPARSE_LISTS_DENSE,      /* positions 0..topk-1 (every key) */
    QATTN_KERNELS_SPARSE_LISTS_EMPTY       /* every entry -1 */
} qattn_kernels_sparse_lists;

typedef struct qattn_kernels_sparse_case {
    int d, rope, hq, hkv, sq, topk;
    int sk, prefix, page;          /* positions, of them in the paged pool, page size (0: no pool) */
    qattn_kernels_sparse_lists lists;
    int sink;                      /* 1: per-head sinks */
    qattn_kernels_sparse_variant variant;
    int quick;                     /* 1: in the quick set (compute-sanitizer) */
} qattn_kernels_sparse_case;

typedef struct qattn_kernels_sparse_result {
    int ran;                       /* 0: the paths asked for take no instance */
    const qattn_kernels_sig *sig;
    double err, max_dlse, cos;     /* max |o - o_emu| / max |V|; max |lse - lse_emu|; cos(o, o_emu) */
    long diff_o;                   /* elements whose bits differ */
    double tol, lse_tol;
    int pass;
} qattn_kernels_sparse_result;

const qattn_kernels_sparse_case *qattn_kernels_sparse_cases(size_t *n);
int qattn_kernels_sparse_run_case(const qattn_kernels_sparse_case *c, unsigned paths, uint64_t *seed,
                                  qattn_kernels_sparse_result *res, qattn_err *err);

#ifdef __cplusplus
}
#endif
#endif
