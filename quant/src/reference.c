/* float64 reference attention: exact softmax per row, in double, through
 * dgemm for Q K^T and P V, tile by tile over query rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "qattn/attn.h"
#include "segments.h"

#define REF_TILE 64

int qattn_head_check(const qattn_head *h, size_t *nseg, qattn_err *err)
{
    if (!h->q || !h->k || !h->v)
        return qattn_err_set(err, QATTN_ERR_ARG, "attention head with a NULL tensor");
    if (h->d == 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "head dim is 0");
    if (h->sq == 0 || h->sk == 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "no tokens (sq = %zu, sk = %zu)", h->sq, h->sk);
    if (!h->seqlens) {
        *nseg = 1;
        return QATTN_OK;
    }
    if (h->sq != h->sk)
        return qattn_err_set(err, QATTN_ERR_ARG, "packed sequences need sq == sk (got %zu and %zu)", h->sq, h->sk);
    if (h->nseq == 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "seqlens is empty");
    size_t sum = 0;
    for (size_t s = 0; s < h->nseq; s++) {
        if (h->seqlens[s] <= 0)
            return qattn_err_set(err, QATTN_ERR_ARG, "seqlens[%zu] = %lld is not positive", s,
                                 (long long)h->seqlens[s]);
        sum += (size_t)h->seqlens[s];
    }
    if (sum != h->sq)
        return qattn_err_set(err, QATTN_ERR_ARG, "seqlens sum to %zu, not to the %zu tokens", sum, h->sq);
    *nseg = h->nseq;
    return QATTN_OK;
}

void qattn_head_segment(const qattn_head *h, size_t s, size_t *off, size_t *sq, size_t *sk)
{
    if (!h->seqlens) {
        *off = 0;
        *sq = h->sq;
        *sk = h->sk;
        return;
    }
    size_t o = 0;
    for (size_t i = 0; i < s; i++)
        o += (size_t)h->seqlens[i];
    *off = o;
    *sq = *sk = (size_t)h->seqlens[s];
}

static int ref_segment(const float *q, const float *k, const float *v, size_t sq, size_t sk, size_t d,
                       const qattn_mask *m, double scale, double *o, double *lse, qattn_err *err)
{
    double *qd = malloc(sq * d * sizeof *qd), *kd = malloc(sk * d * sizeof *kd), *vd = malloc(sk * d * sizeof *vd);
    double *s = malloc(REF_TILE * sk * sizeof *s);
    int rc = QATTN_OK;
    if (!qd || !kd || !vd || !s) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory in reference attention (%zu x %zu)", sq, sk);
        goto done;
    }
    for (size_t i = 0; i < sq * d; i++)
        qd[i] = q[i];
    for (size_t i = 0; i < sk * d; i++) {
        kd[i] = k[i];
        vd[i] = v[i];
    }
    for (size_t i0 = 0; i0 < sq; i0 += REF_TILE) {
        size_t rows = sq - i0 < REF_TILE ? sq - i0 : REF_TILE;
        /* keys any row of the tile may see */
        size_t klo, khi;
        qattn_mask_tile_range(m, i0, rows, sq, sk, &klo, &khi);
        if (klo >= khi) { /* every row fully masked */
            memset(o + i0 * d, 0, rows * d * sizeof *o);
            if (lse)
                for (size_t i = 0; i < rows; i++)
                    lse[i0 + i] = -INFINITY;
            continue;
        }
        size_t nk = khi - klo;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)nk, (int)d, scale, qd + i0 * d, (int)d,
                    kd + klo * d, (int)d, 0.0, s, (int)nk);
        for (size_t r = 0; r < rows; r++) {
            double *srow = s + r * nk;
            size_t lo, hi;
            qattn_mask_range(m, i0 + r, sq, sk, &lo, &hi);
            if (lo >= hi) {
                for (size_t j = 0; j < nk; j++)
                    srow[j] = 0.0;
                if (lse)
                    lse[i0 + r] = -INFINITY;
                continue;
            }
            double mx = -INFINITY;
            for (size_t j = lo; j < hi; j++)
                if (srow[j - klo] > mx)
                    mx = srow[j - klo];
            double l = 0.0;
            for (size_t j = 0; j < nk; j++) {
                size_t jj = j + klo;
                double p = (jj >= lo && jj < hi) ? exp(srow[j] - mx) : 0.0;
                srow[j] = p;
                l += p;
            }
            for (size_t j = 0; j < nk; j++)
                srow[j] /= l;
            if (lse)
                lse[i0 + r] = mx + log(l);
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)d, (int)nk, 1.0, s, (int)nk,
                    vd + klo * d, (int)d, 0.0, o + i0 * d, (int)d);
    }
done:
    free(qd);
    free(kd);
    free(vd);
    free(s);
    return rc;
}

int qattn_head_begin(const qattn_head *h, double *scale, size_t *nseg, qattn_err *err)
{
    int rc = qattn_head_check(h, nseg, err);
    if (rc)
        return rc;
    qattn_blas_init();
    if (!(*scale > 0.0))
        *scale = 1.0 / sqrt((double)h->d);
    return QATTN_OK;
}

int qattn_finite_check(const float *x, size_t n, const char *who, const char *what, qattn_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return qattn_err_set(err, QATTN_ERR_NAN, "%s: %s has a non-finite value (%g) at element %zu", who, what,
                                 (double)x[i], i);
    return QATTN_OK;
}

int qattn_ref_head(const qattn_head *h, const qattn_mask *m, double scale, double *o, double *lse, qattn_err *err)
{
    size_t nseg;
    int rc = qattn_head_begin(h, &scale, &nseg, err);
    if (rc)
        return rc;
    for (size_t s = 0; s < nseg; s++) {
        size_t off, sq, sk;
        qattn_head_segment(h, s, &off, &sq, &sk);
        size_t koff = h->seqlens ? off : 0;
        rc = ref_segment(h->q + off * h->d, h->k + koff * h->d, h->v + koff * h->d, sq, sk, h->d, m, scale,
                         o + off * h->d, lse ? lse + off : NULL, err);
        if (rc)
            return rc;
    }
    return QATTN_OK;
}

int qattn_mha_head(const qattn_mha *a, size_t h, qattn_head *out, qattn_err *err)
{
    if (a->hq == 0 || a->hkv == 0 || a->hq % a->hkv)
        return qattn_err_set(err, QATTN_ERR_ARG, "%zu query heads cannot share %zu kv heads", a->hq, a->hkv);
    if (h >= a->hq)
        return qattn_err_set(err, QATTN_ERR_ARG, "head %zu out of range (%zu heads)", h, a->hq);
    size_t kvh = h / (a->hq / a->hkv);
    out->q = a->q + h * a->sq * a->d;
    out->k = a->k + kvh * a->sk * a->d;
    out->v = a->v + kvh * a->sk * a->d;
    out->sq = a->sq;
    out->sk = a->sk;
    out->d = a->d;
    out->seqlens = a->seqlens;
    out->nseq = a->nseq;
    return QATTN_OK;
}

int qattn_ref_mha(const qattn_mha *a, const qattn_mask *m, double scale, double *o, double *lse, qattn_err *err)
{
    for (size_t h = 0; h < a->hq; h++) {
        qattn_head hv;
        int rc = qattn_mha_head(a, h, &hv, err);
        if (!rc)
            rc = qattn_ref_head(&hv, m, scale, o + h * a->sq * a->d, lse ? lse + h * a->sq : NULL, err);
        if (rc)
            return rc;
    }
    return QATTN_OK;
}
