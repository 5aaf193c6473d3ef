/* Smoothing: channel means subtracted before quantization (docs/DESIGN.md
 * "Smoothing"). */
#include <math.h>
#include <stdlib.h>

#include "qattn/attn.h"

void qattn_smooth_mean(const float *x, size_t n, size_t d, float *mean)
{
    double *acc = calloc(d ? d : 1, sizeof *acc);
    if (!acc) {
        for (size_t c = 0; c < d; c++)
            mean[c] = 0.0f;
        return;
    }
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < d; c++)
            acc[c] += x[t * d + c];
    for (size_t c = 0; c < d; c++)
        mean[c] = n ? (float)(acc[c] / (double)n) : 0.0f;
    free(acc);
}

void qattn_smooth_sub(const float *x, size_t n, size_t d, const float *mean, float *y)
{
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < d; c++)
            y[t * d + c] = x[t * d + c] - mean[c];
}

void qattn_smooth_blocks(const float *x, size_t n, size_t d, size_t block, float *mean, float *y)
{
    if (block == 0)
        block = n ? n : 1;
    for (size_t b0 = 0, bi = 0; b0 < n; b0 += block, bi++) {
        size_t rows = n - b0 < block ? n - b0 : block;
        qattn_smooth_mean(x + b0 * d, rows, d, mean + bi * d);
        qattn_smooth_sub(x + b0 * d, rows, d, mean + bi * d, y + b0 * d);
    }
}

void qattn_kbias_offsets(const float *k, size_t n, size_t d, double r, float *b)
{
    for (size_t c = 0; c < d; c++) {
        double s = 0, ss = 0;
        for (size_t t = 0; t < n; t++)
            s += k[t * d + c];
        double mean = n ? s / (double)n : 0.0;
        for (size_t t = 0; t < n; t++) {
            double e = k[t * d + c] - mean;
            ss += e * e;
        }
        double sd = n > 1 ? sqrt(ss / (double)(n - 1)) : 0.0;
        b[c] = qattn_fmt_round(QATTN_FMT_FP16, (float)(r * sd * (mean < 0 ? -1.0 : 1.0)));
    }
}
