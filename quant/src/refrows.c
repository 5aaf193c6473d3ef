/* Row statistics of float64 attention (attn.h qattn_ref_head_rows): the
 * scores in double through dgemm, tile by tile, as reference.c computes
 * them; per row its entropy, largest probability and small-probability
 * tail, without forming P * V. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "qattn/attn.h"
#include "segments.h"

#define ROWS_TILE 64

/* one packed sequence; outputs already offset to its first row */
static int rows_segment(const float *q, const float *k, size_t sq, size_t sk, size_t d, const qattn_mask *m,
                        double scale, const qattn_ref_rows *rs, size_t off, qattn_err *err)
{
    double *qd = malloc(sq * d * sizeof *qd), *kd = malloc(sk * d * sizeof *kd);
    double *s = malloc(ROWS_TILE * sk * sizeof *s);
    int rc = QATTN_OK;
    if (!qd || !kd || !s) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory in attention rows (%zu x %zu)", sq, sk);
        goto done;
    }
    for (size_t i = 0; i < sq * d; i++)
        qd[i] = q[i];
    for (size_t i = 0; i < sk * d; i++)
        kd[i] = k[i];
    for (size_t i0 = 0; i0 < sq; i0 += ROWS_TILE) {
        size_t rows = sq - i0 < ROWS_TILE ? sq - i0 : ROWS_TILE;
        size_t klo, khi;
        qattn_mask_tile_range(m, i0, rows, sq, sk, &klo, &khi);
        size_t nk = klo < khi ? khi - klo : 0;
        if (nk)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)nk, (int)d, scale, qd + i0 * d,
                        (int)d, kd + klo * d, (int)d, 0.0, s, (int)nk);
        for (size_t r = 0; r < rows; r++) {
            size_t i = off + i0 + r, lo, hi;
            qattn_mask_range(m, i0 + r, sq, sk, &lo, &hi);
            double ent = 0, pmax = 0, tail = 0;
            if (lo < hi) {
                const double *srow = s + r * nk;
                double mx = -INFINITY, l = 0, sum_es = 0, small = 0;
                for (size_t j = lo - klo; j < hi - klo; j++)
                    mx = srow[j] > mx ? srow[j] : mx;
                /* p_j = e_j / l with e_j = exp(s_j - mx): ln p_j = (s_j - mx) - ln l,
                 * pmax = 1 / l, p_j < f pmax exactly when e_j < f */
                for (size_t j = lo - klo; j < hi - klo; j++) {
                    double e = exp(srow[j] - mx);
                    l += e;
                    sum_es += e * (srow[j] - mx);
                    if (e < rs->tail_frac)
                        small += e;
                }
                ent = log(l) - sum_es / l;
                ent = ent > 0 ? ent : 0; /* one dominant key: rounding below 0 */
                pmax = 1.0 / l;
                tail = small / l;
            }
            if (rs->entropy)
                rs->entropy[i] = ent;
            if (rs->pmax)
                rs->pmax[i] = pmax;
            if (rs->tail)
                rs->tail[i] = tail;
            if (rs->nkeys)
                rs->nkeys[i] = lo < hi ? hi - lo : 0;
        }
    }
done:
    free(qd);
    free(kd);
    free(s);
    return rc;
}

int qattn_ref_head_rows(const qattn_head *h, const qattn_mask *m, double scale, const qattn_ref_rows *rows,
                        qattn_err *err)
{
    size_t nseg = 0;
    int rc = qattn_head_begin(h, &scale, &nseg, err);
    for (size_t s = 0; s < nseg && !rc; s++) {
        size_t off, sq, sk;
        qattn_head_segment(h, s, &off, &sq, &sk);
        size_t koff = h->seqlens ? off : 0;
        rc = rows_segment(h->q + off * h->d, h->k + koff * h->d, sq, sk, h->d, m, scale, rows, off, err);
    }
    return rc;
}
