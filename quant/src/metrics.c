/* Accuracy metrics and their aggregation (GSL statistics, bootstrap). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "qattn/metrics.h"

void qattn_metrics_compute(const float *o, const double *r, size_t rows, size_t cols, qattn_metrics *m)
{
    double dot = 0, oo = 0, rr = 0, l1 = 0, rl1 = 0, se = 0, mx = 0, rowmin = 1.0;
    for (size_t i = 0; i < rows; i++) {
        double rdot = 0, roo = 0, rrr = 0;
        for (size_t c = 0; c < cols; c++) {
            double a = o[i * cols + c], b = r[i * cols + c], e = a - b;
            rdot += a * b;
            roo += a * a;
            rrr += b * b;
            l1 += fabs(e);
            rl1 += fabs(b);
            se += e * e;
            if (fabs(e) > mx || isnan(e))
                mx = isnan(e) ? NAN : fabs(e);
        }
        dot += rdot;
        oo += roo;
        rr += rrr;
        double rc;
        if (roo == 0.0 && rrr == 0.0)
            continue;
        rc = (roo == 0.0 || rrr == 0.0) ? 0.0 : rdot / (sqrt(roo) * sqrt(rrr));
        if (rc < rowmin || isnan(rc))
            rowmin = rc;
    }
    m->cos = (oo == 0.0 && rr == 0.0) ? 1.0 : (oo == 0.0 || rr == 0.0) ? 0.0 : dot / (sqrt(oo) * sqrt(rr));
    m->rel_l1 = rl1 > 0.0 ? l1 / rl1 : (l1 > 0.0 ? INFINITY : 0.0);
    m->rmse = rows > 0 && cols > 0 ? sqrt(se / (double)(rows * cols)) : 0.0;
    m->max_abs = mx;
    m->row_cos_min = rowmin;
}

static int check_finite(const double *x, size_t n, qattn_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return qattn_err_set(err, QATTN_ERR_NAN, "value %zu is %s", i, isnan(x[i]) ? "NaN" : "Inf");
    return QATTN_OK;
}

/* percentile bootstrap of the mean of x [n] */
static void bootstrap_mean(const double *x, size_t n, size_t nboot, unsigned long seed, double *lo, double *hi)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    double *means = malloc(nboot * sizeof *means);
    if (!rng || !means) {
        *lo = *hi = NAN;
        gsl_rng_free(rng);
        free(means);
        return;
    }
    gsl_rng_set(rng, seed);
    for (size_t b = 0; b < nboot; b++) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += x[gsl_rng_uniform_int(rng, n)];
        means[b] = s / (double)n;
    }
    gsl_sort(means, 1, nboot);
    *lo = gsl_stats_quantile_from_sorted_data(means, 1, nboot, 0.025);
    *hi = gsl_stats_quantile_from_sorted_data(means, 1, nboot, 0.975);
    free(means);
    gsl_rng_free(rng);
}

int qattn_stats_compute(const double *x, size_t n, size_t nboot, unsigned long seed, qattn_stats *st,
                        qattn_err *err)
{
    memset(st, 0, sizeof *st);
    if (n == 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "no values to summarize");
    int rc = check_finite(x, n, err);
    if (rc)
        return rc;
    double *sorted = malloc(n * sizeof *sorted);
    if (!sorted)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory");
    memcpy(sorted, x, n * sizeof *sorted);
    gsl_sort(sorted, 1, n);
    st->n = n;
    st->mean = gsl_stats_mean(x, 1, n);
    st->sd = n > 1 ? gsl_stats_sd_m(x, 1, n, st->mean) : 0.0;
    st->min = sorted[0];
    st->max = sorted[n - 1];
    st->q05 = gsl_stats_quantile_from_sorted_data(sorted, 1, n, 0.05);
    st->q50 = gsl_stats_quantile_from_sorted_data(sorted, 1, n, 0.50);
    st->q95 = gsl_stats_quantile_from_sorted_data(sorted, 1, n, 0.95);
    free(sorted);
    if (nboot > 0 && n > 1) {
        bootstrap_mean(x, n, nboot, seed, &st->ci_lo, &st->ci_hi);
    } else {
        st->ci_lo = st->ci_hi = st->mean;
    }
    return QATTN_OK;
}

int qattn_stats_paired(const double *a, const double *b, size_t n, size_t nboot, unsigned long seed,
                       double *mean_diff, double *lo, double *hi, qattn_err *err)
{
    if (n == 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "no pairs to compare");
    int rc = check_finite(a, n, err);
    if (!rc)
        rc = check_finite(b, n, err);
    if (rc)
        return rc;
    double *diff = malloc(n * sizeof *diff);
    if (!diff)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        diff[i] = a[i] - b[i];
    *mean_diff = gsl_stats_mean(diff, 1, n);
    if (nboot > 0 && n > 1)
        bootstrap_mean(diff, n, nboot, seed, lo, hi);
    else
        *lo = *hi = *mean_diff;
    free(diff);
    return QATTN_OK;
}
