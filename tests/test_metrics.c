/* Metrics by hand and GSL aggregation. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "qattn/metrics.h"

int main(void)
{
    qattn_metrics m;
    double r[4] = {1, 2, 3, 4};
    float same[4] = {1, 2, 3, 4}, twice[4] = {2, 4, 6, 8};
    qattn_metrics_compute(same, r, 2, 2, &m);
    CHECK(m.rel_l1 == 0 && m.rmse == 0 && m.max_abs == 0, "identical");
    CHECK_NEAR(m.cos, 1.0, 1e-15);
    CHECK_NEAR(m.row_cos_min, 1.0, 1e-15);
    /* o = 2r: cos 1; rel L1 = sum |r| / sum |r| = 1; RMSE = sqrt((1+4+9+16)/4) */
    qattn_metrics_compute(twice, r, 2, 2, &m);
    CHECK_NEAR(m.cos, 1.0, 1e-15);
    CHECK_NEAR(m.rel_l1, 1.0, 1e-15);
    CHECK_NEAR(m.rmse, sqrt(7.5), 1e-15);
    CHECK(m.max_abs == 4.0, "max abs");
    /* orthogonal rows: r = [1, 0], o = [0, 1] -> cos 0, rel L1 2, RMSE 1 */
    double r2[2] = {1, 0};
    float o2[2] = {0, 1};
    qattn_metrics_compute(o2, r2, 1, 2, &m);
    CHECK(m.cos == 0.0 && m.rel_l1 == 2.0 && m.rmse == 1.0 && m.row_cos_min == 0.0, "orthogonal");
    /* per-row worst: row 0 exact, row 1 = [1, 1] against [1, 0] -> 1/sqrt 2;
     * an all-zero row (fully masked) in both is skipped */
    double r3[6] = {1, 2, 1, 0, 0, 0};
    float o3[6] = {1, 2, 1, 1, 0, 0};
    qattn_metrics_compute(o3, r3, 3, 2, &m);
    CHECK_NEAR(m.row_cos_min, 1 / sqrt(2.0), 1e-15);

    /* stats of 1..5: mean 3, sd sqrt(2.5), quantiles by GSL's interpolation */
    double x[5] = {5, 1, 4, 2, 3};
    qattn_stats st;
    qattn_err err;
    CHECK(qattn_stats_compute(x, 5, 2000, 1, &st, &err) == 0, "%s", err.msg);
    CHECK(st.mean == 3 && st.min == 1 && st.max == 5 && st.q50 == 3, "mean/min/max/median");
    CHECK_NEAR(st.sd, sqrt(2.5), 1e-15);
    CHECK_NEAR(st.q05, 1.2, 1e-12);
    CHECK(st.ci_lo < 3 && st.ci_hi > 3 && st.ci_lo >= 1 && st.ci_hi <= 5, "CI [%g, %g]", st.ci_lo, st.ci_hi);
    qattn_stats st2;
    qattn_stats_compute(x, 5, 2000, 1, &st2, &err);
    CHECK(st2.ci_lo == st.ci_lo && st2.ci_hi == st.ci_hi, "reproducible with a seed");
    double nanx[2] = {1, NAN};
    CHECK(qattn_stats_compute(nanx, 2, 10, 1, &st, &err) == QATTN_ERR_NAN, "NaN rejected");
    CHECK(qattn_stats_compute(x, 0, 10, 1, &st, &err) == QATTN_ERR_ARG, "empty rejected");
    /* bootstrap interval of a large sample covers the true mean ~95% */
    srand(3);
    int covered = 0;
    for (int rep = 0; rep < 100; rep++) {
        double y[50];
        for (int i = 0; i < 50; i++)
            y[i] = rand() / (double)RAND_MAX; /* mean 0.5 */
        qattn_stats_compute(y, 50, 500, (unsigned long)rep + 1, &st, &err);
        covered += st.ci_lo <= 0.5 && 0.5 <= st.ci_hi;
    }
    CHECK(covered >= 85 && covered <= 100, "coverage %d/100", covered);
    /* paired: a = b + 0.1 + noise -> interval excludes 0; a = b -> contains 0 */
    double a[40], b[40];
    for (int i = 0; i < 40; i++) {
        b[i] = rand() / (double)RAND_MAX;
        a[i] = b[i] + 0.1 + 0.01 * (rand() / (double)RAND_MAX - 0.5);
    }
    double md, lo, hi;
    CHECK(qattn_stats_paired(a, b, 40, 1000, 1, &md, &lo, &hi, &err) == 0, "%s", err.msg);
    CHECK(lo > 0 && md > 0.09 && md < 0.11, "clear difference [%g, %g]", lo, hi);
    CHECK(qattn_stats_paired(b, b, 40, 1000, 1, &md, &lo, &hi, &err) == 0 && lo <= 0 && hi >= 0, "no difference");
    return check_done();
}
