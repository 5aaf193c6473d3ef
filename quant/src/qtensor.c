/* Quantization of a [n, d] tensor by scale groups. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/attn.h"

int qattn_qtensor_init(qattn_qtensor *t, qattn_fmt fmt, const qattn_group *g, const float *x, size_t n, size_t d,
                       qattn_err *err)
{
    memset(t, 0, sizeof *t);
    t->fmt = fmt;
    t->n = n;
    t->d = d;
    if (g)
        t->group = *g;
    for (size_t i = 0; i < n * d; i++)
        if (!isfinite(x[i]))
            return qattn_err_set(err, QATTN_ERR_NAN, "element [%zu, %zu] is %s", i / d, i % d,
                                 isnan(x[i]) ? "NaN" : "Inf");
    t->val = malloc((n > 0 && d > 0 ? n * d : 1) * sizeof *t->val);
    if (!t->val)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory quantizing a [%zu, %zu] tensor", n, d);
    if (!qattn_fmt_is_scaled(fmt)) {
        for (size_t i = 0; i < n * d; i++)
            t->val[i] = qattn_fmt_round(fmt, x[i]);
        return QATTN_OK;
    }
    size_t ng = qattn_group_count(&t->group, n, d), nch = qattn_group_nch(&t->group, d);
    t->scale = calloc(ng ? ng : 1, sizeof *t->scale);
    size_t *chg = malloc((d ? d : 1) * sizeof *chg);
    if (!t->scale || !chg) {
        free(chg);
        qattn_qtensor_free(t);
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory for %zu scale groups", ng);
    }
    for (size_t c = 0; c < d; c++)
        chg[c] = qattn_group_ch_index(&t->group, c);
    /* pass 1: amax per group, kept in scale[] */
    for (size_t i = 0; i < n; i++) {
        float *sg = t->scale + qattn_group_tok_index(&t->group, i) * nch;
        const float *row = x + i * d;
        for (size_t c = 0; c < d; c++) {
            float a = fabsf(row[c]);
            if (a > sg[chg[c]])
                sg[chg[c]] = a;
        }
    }
    for (size_t gi = 0; gi < ng; gi++)
        t->scale[gi] = qattn_scale_for(fmt, t->scale[gi], t->group.e8m0);
    /* pass 2: codes; a zero scale (all-zero group) encodes to zeros */
    for (size_t i = 0; i < n; i++) {
        const float *sg = t->scale + qattn_group_tok_index(&t->group, i) * nch;
        const float *row = x + i * d;
        float *out = t->val + i * d;
        for (size_t c = 0; c < d; c++) {
            float s = sg[chg[c]];
            out[c] = s > 0.0f ? qattn_fmt_round(fmt, row[c] / s) : 0.0f;
        }
    }
    free(chg);
    return QATTN_OK;
}

void qattn_qtensor_free(qattn_qtensor *t)
{
    free(t->val);
    free(t->scale);
    t->val = NULL;
    t->scale = NULL;
}

float qattn_qtensor_at(const qattn_qtensor *t, size_t i, size_t c)
{
    float v = t->val[i * t->d + c];
    if (!t->scale)
        return v;
    return v * t->scale[qattn_group_index(&t->group, t->n, t->d, i, c)];
}
