/* Sparse attention over per-query key lists: the float64 reference
 * (qattn/sparse.h). */
#include "qattn/sparse.h"

#include <math.h>
#include <stdlib.h>

static int sparse_finite(const float *x, size_t n, const char *what, qattn_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return qattn_err_set(err, QATTN_ERR_NAN, "sparse attention: %s has a non-finite value (%g) at element %zu",
                                 what, (double)x[i], i);
    return QATTN_OK;
}

int qattn_sparse_check(const qattn_sparse *a, qattn_err *err)
{
    if (!a || !a->q || !a->k || !a->v || !a->idx)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse attention: q, k, v and the index lists are required");
    if (!a->hq || !a->hkv || !a->sq || !a->sk || !a->d || !a->topk)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "sparse attention: empty shape (hq %zu, hkv %zu, sq %zu, sk %zu, d %zu, topk %zu)", a->hq,
                             a->hkv, a->sq, a->sk, a->d, a->topk);
    if (a->hq % a->hkv)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse attention: %zu query heads is not a multiple of %zu kv heads",
                             a->hq, a->hkv);
    if (a->sk > (size_t)INT32_MAX)
        return qattn_err_set(err, QATTN_ERR_RANGE, "sparse attention: %zu keys, over the int32 index range", a->sk);
    for (size_t i = 0; i < a->sq; i++) {
        if (a->len && (a->len[i] < 0 || (size_t)a->len[i] > a->topk))
            return qattn_err_set(err, QATTN_ERR_RANGE, "sparse attention: row %zu's list length %d is outside 0..%zu",
                                 i, (int)a->len[i], a->topk);
        for (size_t t = 0; t < a->topk; t++) {
            const int32_t j = a->idx[i * a->topk + t];
            if (j < -1 || (j >= 0 && (size_t)j >= a->sk))
                return qattn_err_set(err, QATTN_ERR_RANGE,
                                     "sparse attention: row %zu, entry %zu: key %d is outside -1..%zu", i, t, (int)j,
                                     a->sk - 1);
        }
    }
    int rc = sparse_finite(a->q, a->hq * a->sq * a->d, "q", err);
    if (!rc)
        rc = sparse_finite(a->k, a->hkv * a->sk * a->d, "k", err);
    if (!rc)
        rc = sparse_finite(a->v, a->hkv * a->sk * a->d, "v", err);
    if (!rc && a->sink)
        rc = sparse_finite(a->sink, a->hq, "sink", err);
    return rc;
}

int qattn_ref_sparse(const qattn_sparse *a, double scale, double *o, double *lse, qattn_err *err)
{
    int rc = qattn_sparse_check(a, err);
    if (rc)
        return rc;
    if (!o)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse attention: no output buffer");
    const size_t d = a->d, topk = a->topk, grp = a->hq / a->hkv;
    if (scale <= 0.0)
        scale = 1.0 / sqrt((double)d);
    double *s = malloc(topk * sizeof *s); /* the row's scores, list order */
    if (!s)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "sparse attention: out of memory");
    for (size_t h = 0; h < a->hq; h++) {
        const float *kh = a->k + (h / grp) * a->sk * d, *vh = a->v + (h / grp) * a->sk * d;
        const double sink = a->sink ? (double)a->sink[h] : -INFINITY;
        for (size_t i = 0; i < a->sq; i++) {
            const float *qi = a->q + (h * a->sq + i) * d;
            const int32_t *list = a->idx + i * topk;
            const size_t n = a->len ? (size_t)a->len[i] : topk;
            double m = sink;
            for (size_t t = 0; t < n; t++) {
                if (list[t] < 0)
                    continue;
                const float *kj = kh + (size_t)list[t] * d;
                double dot = 0.0;
                for (size_t c = 0; c < d; c++)
                    dot += (double)qi[c] * (double)kj[c];
                s[t] = scale * dot;
                if (s[t] > m)
                    m = s[t];
            }
            double *oi = o + (h * a->sq + i) * d;
            for (size_t c = 0; c < d; c++)
                oi[c] = 0.0;
            if (m == -INFINITY) { /* nothing listed, no sink */
                if (lse)
                    lse[h * a->sq + i] = -INFINITY;
                continue;
            }
            double l = a->sink ? exp(sink - m) : 0.0;
            for (size_t t = 0; t < n; t++) {
                if (list[t] < 0)
                    continue;
                const double p = exp(s[t] - m);
                const float *vj = vh + (size_t)list[t] * d;
                l += p;
                for (size_t c = 0; c < d; c++)
                    oi[c] += p * (double)vj[c];
            }
            for (size_t c = 0; c < d; c++)
                oi[c] /= l;
            if (lse)
                lse[h * a->sq + i] = m + log(l);
        }
    }
    free(s);
    return QATTN_OK;
}
