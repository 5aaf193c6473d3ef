/* Attention: masks, smoothing, group quantization, the float64 reference and
 * the tile-by-tile emulation of a scheme. */
#ifndef QATTN_ATTN_H
#define QATTN_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/error.h"
#include "qattn/scheme.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- masks ---- */
typedef enum qattn_mask_kind {
    QATTN_MASK_NONE = 0,
    QATTN_MASK_CAUSAL,    /* top-left: key j <= query i */
    QATTN_MASK_CAUSAL_BR, /* bottom-right: j <= i + sk - sq */
    QATTN_MASK_WINDOW     /* i' - left <= j <= i' + right, i' = i + sk - sq */
} qattn_mask_kind;

typedef struct qattn_mask {
    qattn_mask_kind kind;
    long left, right; /* WINDOW only, >= 0 */
} qattn_mask;

/* "none", "causal", "causal-br", "window:L,R" */
int qattn_mask_parse(const char *spec, qattn_mask *m, qattn_err *err);
char *qattn_mask_format(const qattn_mask *m, char *buf, size_t len);
/* 1 if query i may see key j (sq queries, sk keys in the sequence) */
int qattn_mask_allows(const qattn_mask *m, size_t i, size_t j, size_t sq,
                      size_t sk);
/* Range of keys [*lo, *hi) query i may see; empty when *lo >= *hi. */
void qattn_mask_range(const qattn_mask *m, size_t i, size_t sq, size_t sk,
                      size_t *lo, size_t *hi);
/* Keys [*klo, *khi) that any of the query rows i0 .. i0 + rows - 1 may see;
 * empty (*klo = sk, *khi = 0) when every one is fully masked. */
void qattn_mask_tile_range(const qattn_mask *m, size_t i0, size_t rows,
                           size_t sq, size_t sk, size_t *klo, size_t *khi);

/* ---- smoothing ---- */
/* mean over rows of x [n, d] per channel: mean [d] (accumulated in double) */
void qattn_smooth_mean(const float *x, size_t n, size_t d, float *mean);
/* y [n, d] = x [n, d] - mean [d] (fp32); y may alias x */
void qattn_smooth_sub(const float *x, size_t n, size_t d, const float *mean,
                      float *y);
/* Q smoothing: per block of `block` rows, mean [ceil(n/block), d] of x
 * [n, d], and y [n, d] = x - mean of its block (y may alias x). */
void qattn_smooth_blocks(const float *x, size_t n, size_t d, size_t block,
                         float *mean, float *y);

/* K-bias augmentation (augmented real data): per channel c of k [n, d],
 * b_c = r * std_c * sign(mean_c) (sign(0) = +1), std and mean over the n
 * tokens, rounded to fp16 precision; b [d]. Adding b to every key shifts each
 * row of S = q.k by the constant q.b, so exact attention is unchanged while K
 * gets per-channel offsets of r standard deviations along its own mean
 * direction. */
void qattn_kbias_offsets(const float *k, size_t n, size_t d, double r, float *b);

/* ---- a tensor quantized by scale groups ---- */
typedef struct qattn_qtensor {
    qattn_fmt fmt;
    qattn_group group;
    size_t n, d;
    float *val;   /* [n, d] row-major: the stored code's value (an integer for
                   * int8/int4, the fp8 value before scaling); for fp16/bf16/
                   * fp32 the rounded element itself */
    float *scale; /* [qattn_group_count(group, n, d)]; NULL for unscaled */
} qattn_qtensor;

/* Quantize x [n, d] (row-major) with fmt at group. Errors: NaN/Inf input. */
int qattn_qtensor_init(qattn_qtensor *t, qattn_fmt fmt, const qattn_group *g,
                       const float *x, size_t n, size_t d, qattn_err *err);
void qattn_qtensor_free(qattn_qtensor *t);
/* dequantized element (t, c) */
float qattn_qtensor_at(const qattn_qtensor *t, size_t i, size_t c);

/* ---- one head of attention ---- */
typedef struct qattn_head {
    const float *q;         /* [sq, d] row-major: one query head */
    const float *k;         /* [sk, d] row-major: the kv head it reads */
    const float *v;         /* [sk, d] row-major */
    size_t sq, sk, d;
    const int64_t *seqlens; /* [nseq] packed sequences (sq == sk), or NULL */
    size_t nseq;
} qattn_head;

/* float64 reference attention. o [sq, d]; lse [sq] natural log, or NULL.
 * scale <= 0 means 1/sqrt(d). Fully masked rows: o = 0, lse = -inf. */
int qattn_ref_head(const qattn_head *h, const qattn_mask *m, double scale,
                   double *o, double *lse, qattn_err *err);

/* Emulation of scheme s, tile by tile, as the kernel computes it
 * (docs/DESIGN.md "Emulation"). o [sq, d] already rounded to s->out and held
 * in float; lse [sq] natural log, or NULL. */
int qattn_emu_head(const qattn_scheme *s, const qattn_head *h,
                   const qattn_mask *m, double scale, float *o, float *lse,
                   qattn_err *err);

/* The emulation's 2^x: a few ulp from exact, independent of the C library,
 * results below 2^-126 flushed to 0 (as ex2.approx.ftz on the GPU). */
float qattn_emu_exp2(float x);

/* 0 when x [n] is all finite; else QATTN_ERR_NAN with "WHO: WHAT has a
 * non-finite value (V) at element I" (the attention calls' input check) */
int qattn_finite_check(const float *x, size_t n, const char *who, const char *what, qattn_err *err);

/* ---- the rows of float64 attention ---- */
/* What each query row of the float64 softmax looks like, with the scores,
 * mask and scale of qattn_ref_head; any output may be NULL. A row that sees
 * no key gets 0 everywhere. */
typedef struct qattn_ref_rows {
    double *entropy; /* [sq] -sum p ln p, in nats (0 .. ln nkeys) */
    double *pmax;    /* [sq] the largest p */
    double *tail;    /* [sq] the sum of the p below tail_frac x pmax */
    size_t *nkeys;   /* [sq] keys the row sees */
    double tail_frac;
} qattn_ref_rows;

int qattn_ref_head_rows(const qattn_head *h, const qattn_mask *m, double scale,
                        const qattn_ref_rows *rows, qattn_err *err);

/* ---- multi-head with GQA: q head h reads kv head h / (hq / hkv) ---- */
typedef struct qattn_mha {
    const float *q; /* [hq, sq, d] */
    const float *k; /* [hkv, sk, d] */
    const float *v; /* [hkv, sk, d] */
    size_t hq, hkv, sq, sk, d;
    const int64_t *seqlens; /* [nseq] or NULL */
    size_t nseq;
} qattn_mha;

/* view of q head h (checks hq % hkv == 0) */
int qattn_mha_head(const qattn_mha *a, size_t h, qattn_head *out,
                   qattn_err *err);
int qattn_ref_mha(const qattn_mha *a, const qattn_mask *m, double scale,
                  double *o /* [hq, sq, d] */, double *lse /* [hq, sq] or NULL */,
                  qattn_err *err);
int qattn_emu_mha(const qattn_scheme *s, const qattn_mha *a,
                  const qattn_mask *m, double scale,
                  float *o /* [hq, sq, d] */, float *lse /* [hq, sq] or NULL */,
                  qattn_err *err);

#ifdef __cplusplus
}
#endif
#endif
