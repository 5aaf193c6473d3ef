/* Accuracy metrics (SageAttention's definitions over the flattened output)
 * and their aggregation over heads and layers with GSL. */
#ifndef QATTN_METRICS_H
#define QATTN_METRICS_H

#include <stddef.h>

#include "qattn/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qattn_metrics {
    double cos;      /* sum o.r / (|o| |r|) over all elements */
    double rel_l1;   /* sum |o - r| / sum |r| */
    double rmse;     /* sqrt(mean (o - r)^2) */
    double max_abs;  /* max |o - r| */
    double row_cos_min; /* worst cosine of one row (rows with |r| = 0 and
                         * |o| = 0 skipped; |r| = 0 != |o| counts as 0) */
} qattn_metrics;

/* o [rows, cols] against reference r [rows, cols] */
void qattn_metrics_compute(const float *o, const double *r, size_t rows,
                           size_t cols, qattn_metrics *m);

typedef struct qattn_stats {
    size_t n;
    double mean, sd, min, max;
    double q05, q50, q95;
    double ci_lo, ci_hi; /* bootstrap 95% interval of the mean (percentile) */
} qattn_stats;

/* Summary of x [n]; nboot resamples (0 = no interval: ci = mean) with a
 * fixed seed so the result is reproducible. */
int qattn_stats_compute(const double *x, size_t n, size_t nboot,
                        unsigned long seed, qattn_stats *st, qattn_err *err);

/* Paired bootstrap of mean(a - b): interval [lo, hi] at 95%. */
int qattn_stats_paired(const double *a, const double *b, size_t n,
                       size_t nboot, unsigned long seed, double *mean_diff,
                       double *lo, double *hi, qattn_err *err);

#ifdef __cplusplus
}
#endif
#endif
