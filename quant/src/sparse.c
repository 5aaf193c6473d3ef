/* Sparse attention over per-query key lists: the float64 reference
 * (qattn/sparse.h). */
#include "qattn/sparse.h"

#include <math.h>
#include <stdlib.h>

#include "qattn/attn.h" /* qattn_finite_check */

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
    size_t kv_rows = a->sk; /* rows of k and v a head */
    if (a->page) {
        if (a->page > 256)
            return qattn_err_set(err, QATTN_ERR_RANGE, "sparse attention: pages of %zu tokens (1..256)", a->page);
        if (a->prefix > a->sk)
            return qattn_err_set(err, QATTN_ERR_RANGE, "sparse attention: a prefix of %zu of %zu positions", a->prefix,
                                 a->sk);
        if (a->prefix && (!a->table || !a->npool))
            return qattn_err_set(err, QATTN_ERR_ARG, "sparse attention: a paged prefix needs a page table and a pool");
        if (a->prefix < a->sk && (!a->k_ext || !a->v_ext))
            return qattn_err_set(err, QATTN_ERR_ARG, "sparse attention: positions %zu..%zu need k_ext and v_ext",
                                 a->prefix, a->sk - 1);
        for (size_t x = 0; x < (a->prefix + a->page - 1) / a->page; x++)
            if (a->table[x] < 0 || (size_t)a->table[x] >= a->npool)
                return qattn_err_set(err, QATTN_ERR_RANGE, "sparse attention: page %zu maps to pool page %d of %zu", x,
                                     (int)a->table[x], a->npool);
        kv_rows = a->npool * a->page;
    }
    int rc = qattn_finite_check(a->q, a->hq * a->sq * a->d, "sparse attention", "q", err);
    if (!rc)
        rc = qattn_finite_check(a->k, a->hkv * kv_rows * a->d, "sparse attention", "k", err);
    if (!rc)
        rc = qattn_finite_check(a->v, a->hkv * kv_rows * a->d, "sparse attention", "v", err);
    if (!rc && a->page && a->prefix < a->sk)
        rc = qattn_finite_check(a->k_ext, a->hkv * (a->sk - a->prefix) * a->d, "sparse attention", "k_ext", err);
    if (!rc && a->page && a->prefix < a->sk)
        rc = qattn_finite_check(a->v_ext, a->hkv * (a->sk - a->prefix) * a->d, "sparse attention", "v_ext", err);
    if (!rc && a->sink)
        rc = qattn_finite_check(a->sink, a->hq, "sparse attention", "sink", err);
    return rc;
}

const float *qattn_sparse_row(const qattn_sparse *a, int which, size_t g, size_t pos)
{
    const size_t d = a->d;
    if (!a->page)
        return (which ? a->v : a->k) + (g * a->sk + pos) * d;
    if (pos >= a->prefix)
        return (which ? a->v_ext : a->k_ext) + (g * (a->sk - a->prefix) + pos - a->prefix) * d;
    const size_t row = (size_t)a->table[pos / a->page] * a->page + pos % a->page;
    return (which ? a->v : a->k) + (g * a->npool * a->page + row) * d;
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
        const size_t g = h / grp;
        const double sink = a->sink ? (double)a->sink[h] : -INFINITY;
        for (size_t i = 0; i < a->sq; i++) {
            const float *qi = a->q + (h * a->sq + i) * d;
            const int32_t *list = a->idx + i * topk;
            const size_t n = a->len ? (size_t)a->len[i] : topk;
            double m = sink;
            for (size_t t = 0; t < n; t++) {
                if (list[t] < 0)
                    continue;
                const float *kj = qattn_sparse_row(a, 0, g, (size_t)list[t]);
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
                const float *vj = qattn_sparse_row(a, 1, g, (size_t)list[t]);
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
