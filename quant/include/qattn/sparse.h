/* Sparse attention (the DeepSeek-V4 sparse prefill, issue 30): each query row
 * attends to its own list of key positions, with an optional per-head
 * attention sink (a logit added to the softmax denominator only). This
 * header holds the float64 reference and the scheme's emulation.
 *
 * Conventions: scores s_j = scale * q . k_j over the row's listed keys (a
 * position listed twice counts twice); p_j = exp(s_j - m) over
 * m = max(s_j, sink); o = sum p_j v_j / (sum p_j + exp(sink - m));
 * lse = m + ln(sum p_j + exp(sink - m)) (natural log, scale applied). A row
 * whose list is empty gets o = 0 and lse = -inf, or lse = sink with a sink. */
#ifndef QATTN_SPARSE_H
#define QATTN_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/error.h"
#include "qattn/scheme.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qattn_sparse {
    const float *q;      /* [hq, sq, d] row-major */
    const float *k;      /* [hkv, sk, d]: query head h reads kv head h / (hq / hkv) */
    const float *v;      /* [hkv, sk, d] (may be k itself: one row as key and value) */
    size_t hq, hkv, sq, sk, d;
    const int32_t *idx;  /* [sq, topk] key positions in 0..sk-1; -1 pads */
    size_t topk;
    const int32_t *len;  /* [sq] entries of each row's list that count (<= topk), or NULL: all */
    const float *sink;   /* [hq] sink logits, or NULL */
    /* paged prefix + extend (page 0: k and v hold all sk positions as above). Positions below
     * prefix are read from a pool of pages, k and v as [hkv, npool * page, d]: position p at pool
     * row table[p / page] * page + p % page of its kv head; positions prefix..sk-1 from k_ext and
     * v_ext, [hkv, sk - prefix, d]. */
    size_t page, prefix, npool;  /* page 1..256 tokens */
    const int32_t *table;        /* [ceil(prefix / page)] pool pages */
    const float *k_ext, *v_ext;
} qattn_sparse;

/* row `pos` (a position 0..sk-1) of kv head g of k (which = 0) or v (1) */
const float *qattn_sparse_row(const qattn_sparse *a, int which, size_t g, size_t pos);

/* float64 sparse attention: o [hq, sq, d], lse [hq, sq] or NULL. scale <= 0
 * means 1 / sqrt(d). Errors: missing pointers, hq % hkv, an index outside
 * -1..sk-1 or a length over topk (QATTN_ERR_RANGE), NaN / Inf in q, k, v or
 * sink (QATTN_ERR_NAN). */
int qattn_ref_sparse(const qattn_sparse *a, double scale, double *o, double *lse, qattn_err *err);

/* The checks both calls make (shapes, pointers, indices, lengths, finite values). */
int qattn_sparse_check(const qattn_sparse *a, qattn_err *err);

/* Emulation of scheme s (quant/src/emulate.c): one tile a (query token, kv
 * head) with the group's query heads as rows and the token's listed keys, in
 * list order, as the key blocks; the sink added into l after the last block
 * at the running maximum. o [hq, sq, d] rounded to s->out, lse [hq, sq] or
 * NULL. Q, K and V need per-token scale groups (token, with ch: or e8m0) or
 * no scales, so that gathered rows keep the cache's scales, and smooth=none
 * (a mean over a list is not a cache's); otherwise QATTN_ERR_ARG. */
int qattn_emu_sparse(const qattn_scheme *s, const qattn_sparse *a, double scale, float *o, float *lse,
                     qattn_err *err);

#ifdef __cplusplus
}
#endif

#endif
