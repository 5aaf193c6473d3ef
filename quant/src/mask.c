/* Attention masks: parser, printer; the key ranges are qattn/numerics.h's
 * (shared with the GPU kernels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/attn.h"
#include "qattn/numerics.h"

static int parse_long_nonneg(const char *s, const char *end, long *out)
{
    if (s == end || end - s > 12)
        return -1;
    long v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 0;
}

int qattn_mask_parse(const char *spec, qattn_mask *m, qattn_err *err)
{
    memset(m, 0, sizeof *m);
    if (!spec)
        spec = "";
    if (!strcmp(spec, "none")) {
        m->kind = QATTN_MASK_NONE;
    } else if (!strcmp(spec, "causal")) {
        m->kind = QATTN_MASK_CAUSAL;
    } else if (!strcmp(spec, "causal-br")) {
        m->kind = QATTN_MASK_CAUSAL_BR;
    } else if (!strncmp(spec, "window:", 7)) {
        const char *a = spec + 7, *comma = strchr(a, ',');
        if (!comma || parse_long_nonneg(a, comma, &m->left) ||
            parse_long_nonneg(comma + 1, comma + 1 + strlen(comma + 1), &m->right))
            return qattn_err_set(err, QATTN_ERR_ARG,
                                 "mask '%s': window needs two non-negative integers, as in window:128,0", spec);
        m->kind = QATTN_MASK_WINDOW;
    } else {
        return qattn_err_set(err, QATTN_ERR_ARG, "unknown mask '%s' (none, causal, causal-br, window:L,R)", spec);
    }
    return QATTN_OK;
}

char *qattn_mask_format(const qattn_mask *m, char *buf, size_t len)
{
    switch (m->kind) {
    case QATTN_MASK_NONE: snprintf(buf, len, "none"); break;
    case QATTN_MASK_CAUSAL: snprintf(buf, len, "causal"); break;
    case QATTN_MASK_CAUSAL_BR: snprintf(buf, len, "causal-br"); break;
    case QATTN_MASK_WINDOW: snprintf(buf, len, "window:%ld,%ld", m->left, m->right); break;
    }
    return buf;
}

void qattn_mask_range(const qattn_mask *m, size_t i, size_t sq, size_t sk, size_t *lo, size_t *hi)
{
    int64_t a, b;
    qattn_num_mask_range(*m, (int64_t)i, (int64_t)sq, (int64_t)sk, &a, &b);
    *lo = (size_t)a;
    *hi = (size_t)b;
}

void qattn_mask_tile_range(const qattn_mask *m, size_t i0, size_t rows, size_t sq, size_t sk, size_t *klo,
                           size_t *khi)
{
    *klo = sk;
    *khi = 0;
    for (size_t i = i0; i < i0 + rows; i++) {
        size_t lo, hi;
        qattn_mask_range(m, i, sq, sk, &lo, &hi);
        if (lo < hi) {
            *klo = lo < *klo ? lo : *klo;
            *khi = hi > *khi ? hi : *khi;
        }
    }
}

int qattn_mask_allows(const qattn_mask *m, size_t i, size_t j, size_t sq, size_t sk)
{
    size_t lo, hi;
    qattn_mask_range(m, i, sq, sk, &lo, &hi);
    return j >= lo && j < hi;
}
