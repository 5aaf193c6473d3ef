/* Decode and KV caches (docs/DESIGN.md "KV caches and split-KV"): a paged,
 * optionally quantized KV cache that grows token by token, and attention of
 * varlen batches with sq != sk (decode, chunked prefill) over it or over
 * contiguous K/V, split along the keys (split-KV) and combined in fp32, with
 * its float64 reference.
 *
 * LSE convention, here and in every partial: natural log with the softmax
 * scale applied, lse = scale * m + ln(l) = ln sum_j exp(scale * q.k_j) over
 * the keys the row (or the split) sees; -inf when it sees none. */
#ifndef QATTN_KVCACHE_H
#define QATTN_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/attn.h"
#include "qattn/error.h"
#include "qattn/scheme.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QATTN_KV_PAGE_MAX 256    /* largest page size, in tokens */
#define QATTN_KV_SPLITS_MAX 1024 /* most splits per (sequence, head) */

typedef enum qattn_kv_tensor {
    QATTN_KV_TENSOR_K = 0,
    QATTN_KV_TENSOR_V
} qattn_kv_tensor;

/* ---- the cache ----
 * Pool layout [num_pages, page_size, hkv, d]: the token at position pos of
 * sequence s is row pos % page_size of page table[s][pos / page_size].
 * Each of K and V is stored per its qattn_operand:
 *   fp32, fp16, bf16   rounded on append, no scale;
 *   int8, int4, e4m3, e5m2 with group
 *     token[,ch:C][,e8m0]      one scale per token (and channel run): closed
 *                              as soon as it is appended;
 *     block:G[,ch:C][,e8m0]    one scale per G tokens from position 0 (and
 *                              channel run; block:G,ch:1 is KIVI's per-channel
 *                              K): the open group, positions G*floor(len/G)
 *                              .. len - 1, stays in fp32 (KIVI's residual) until
 *                              G tokens fill it; then it is quantized by
 *                              qattn_qtensor_init, codes in place, scales in
 *                              the sequence's scale table.
 * Dequantized (code * scale, as qattn_qtensor_at) when read. */
typedef struct qattn_kvcache_cfg {
    size_t num_pages, page_size; /* page_size 1 .. QATTN_KV_PAGE_MAX */
    size_t hkv, d;
    size_t nseq, max_pages;      /* block table: max_pages entries per sequence */
    const int32_t *table;        /* [nseq, max_pages] page ids, -1 = no page */
    qattn_operand k, v;
} qattn_kvcache_cfg;

typedef struct qattn_kvcache {
    qattn_kvcache_cfg cfg;        /* cfg.table points at table below */
    int32_t *table;               /* [nseq, max_pages] copy */
    size_t *len;                  /* [nseq] tokens appended */
    size_t *closed[2];            /* [nseq] tokens quantized, per K / V */
    float *val[2];                /* [num_pages, page_size, hkv, d] codes of
                                   * closed groups, fp32 of the open one */
    float *scale[2];              /* [nseq, hkv, ntok, nch] (ntok groups of
                                   * max_pages * page_size tokens), or NULL */
    size_t ntok[2], nch[2];
} qattn_kvcache;

/* Errors: page size 0 or > 256, a page id outside [0, num_pages) other than
 * -1, a group a cache cannot append to (tensor, channel, thread), e8m0 as an
 * element format. */
int qattn_kvcache_init(qattn_kvcache *c, const qattn_kvcache_cfg *cfg, qattn_err *err);
void qattn_kvcache_free(qattn_kvcache *c);
/* Append n tokens to sequence seq: k, v [n, hkv, d] row-major, at positions
 * len .. len + n - 1. Errors (nothing appended): NaN/Inf, no page for a
 * position, beyond max_pages * page_size. */
int qattn_kvcache_append(qattn_kvcache *c, size_t seq, const float *k, const float *v, size_t n,
                         qattn_err *err);
/* Dequantized rows of positions [j0, j1) of kv head h: out [j1 - j0, d].
 * Errors: positions beyond len, no page. */
int qattn_kvcache_gather(const qattn_kvcache *c, qattn_kv_tensor t, size_t seq, size_t h, size_t j0,
                         size_t j1, float *out, qattn_err *err);

/* ---- a varlen batch of attention problems ----
 * Sequence s has sq[s] query rows and sk[s] keys; rows and keys of the
 * sequences are packed one after another (Tq = sum sq, Tk = sum sk). Query
 * head h reads kv head h / (hq / hkv). Masks are qattn_mask's on (sq[s],
 * sk[s]): causal-br lets row i see keys 0 .. sk - sq + i (needs sk >= sq). */
typedef struct qattn_kv_batch {
    size_t nseq, hq, hkv, d;
    const int64_t *sq;           /* [nseq] >= 1 */
    const int64_t *sk;           /* [nseq] >= 1 */
    const float *q;              /* [hq, Tq, d] row-major */
    const float *k, *v;          /* [hkv, Tk, d] contiguous, or NULL with cache */
    const qattn_kvcache *cache;  /* keys 0 .. sk[s] - 1 of cache sequence s, or NULL */
} qattn_kv_batch;

typedef struct qattn_kv_opts {
    qattn_mask mask;
    double scale;   /* <= 0: 1/sqrt(d) */
    int kblock;     /* online-softmax block, aligned at the split's first key; 0: 64 */
    int num_splits; /* 1 .. QATTN_KV_SPLITS_MAX */
} qattn_kv_opts;

/* Keys [*a, *b) of split s of sk keys cut into n parts: a = s * sk / n
 * (integer division); empty when n > sk leaves it nothing. */
void qattn_kv_split_range(size_t sk, size_t n, size_t s, size_t *a, size_t *b);

/* fp32 combine of ns partials of one row: o_s = o_part + s * stride [d],
 * lse_part[s * lse_stride]. w_s = expf(lse_s - lse_max) (exactly 0 for
 * lse_s = -inf, whose o_s is not read), o = sum_s w_s o_s / sum_s w_s,
 * lse = lse_max + logf(sum_s w_s), sums in s order. No split with a key:
 * o = 0, lse = -inf. */
void qattn_kv_combine(const float *o_part, size_t stride, const float *lse_part, size_t lse_stride, size_t ns,
                      size_t d, float *o /* [d] */, float *lse);

/* Emulation in fp32 of a split-KV decode kernel reading dequantized K and V:
 * per (sequence, q head, row, split) S = q.k exactly then rounded to fp32,
 * times scale * log2(e); online softmax in base 2 with qattn_emu_exp2 over
 * blocks of kblock keys from the split's start; P.V in fp32 key by key;
 * o_s = acc / l, lse_s (natural log); then qattn_kv_combine. With one split
 * and contiguous K/V it is qattn_emu_head of "q=fp32" bit for bit.
 * o [hq, Tq, d]; lse [hq, Tq] or NULL; o_part [num_splits, hq, Tq, d] and
 * lse_part [num_splits, hq, Tq] or NULL (both or neither). */
int qattn_kv_emu(const qattn_kv_batch *b, const qattn_kv_opts *opt, float *o, float *lse, float *o_part,
                 float *lse_part, qattn_err *err);

/* float64 reference (qattn_ref_head per sequence and head on the same
 * dequantized K, V): o [hq, Tq, d], lse [hq, Tq] or NULL. */
int qattn_kv_ref(const qattn_kv_batch *b, const qattn_mask *m, double scale, double *o, double *lse,
                 qattn_err *err);

/* The bound by which split-KV differs from one pass (both qattn_kv_emu), for
 * a row that sees n keys, with u = 2^-24, S = num_splits, nb = ceil(n /
 * kblock) + S (online-softmax blocks of both runs), L = max(1, |lse|) and
 * V = max |v_j[c]| over the keys the row sees:
 *   |o_split[c] - o_one[c]| <= u * V * (4 n + 32 nb + 4 S + 4 L + 32)  (*o_bound)
 *   |lse_split - lse_one|   <= u * (2 n + 16 nb + 4 S + 4 L + 16)      (*lse_bound, V = 1)
 * Both runs see the same fp32 logits; they differ in the maxima they
 * subtract, the rescales, the order of the sums and the combine. */
void qattn_kv_split_bound(size_t n, int kblock, int num_splits, double lse, double *o_bound, double *lse_bound);

#ifdef __cplusplus
}
#endif
#endif
