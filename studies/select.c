#include "select.h"

#include <stdlib.h>
#include <string.h>

static int parse_index(const char *s, const char *end, size_t *out)
{
    if (s == end || end - s > 9)
        return -1;
    size_t v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (size_t)(*p - '0');
    }
    *out = v;
    return 0;
}

int qattn_select_parse(const char *sel, size_t n, size_t *idx, size_t *count, qattn_err *err)
{
    *count = 0;
    if (!sel || !strcmp(sel, "all")) {
        for (size_t i = 0; i < n; i++)
            idx[i] = i;
        *count = n;
        if (n == 0)
            return qattn_err_set(err, QATTN_ERR_ARG, "empty selection");
        return QATTN_OK;
    }
    unsigned char *on = calloc(n ? n : 1, 1);
    if (!on)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory");
    const char *p = sel;
    int rc = QATTN_OK;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *dash = memchr(p, '-', (size_t)(end - p));
        size_t a, b;
        if (dash ? (parse_index(p, dash, &a) || parse_index(dash + 1, end, &b)) : parse_index(p, end, &a)) {
            rc = qattn_err_set(err, QATTN_ERR_ARG, "bad selection word '%.*s' in '%s' (use all, 3, 0,2 or 4-7)",
                               (int)(end - p), p, sel);
            break;
        }
        if (!dash)
            b = a;
        if (b < a || b >= n) {
            rc = qattn_err_set(err, QATTN_ERR_ARG, "selection '%.*s' is outside 0..%zu", (int)(end - p), p,
                               n ? n - 1 : 0);
            break;
        }
        for (size_t i = a; i <= b; i++)
            on[i] = 1;
        p = *end ? end + 1 : end;
        if (*end && !*p) {
            rc = qattn_err_set(err, QATTN_ERR_ARG, "selection '%s' ends with a comma", sel);
            break;
        }
    }
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            if (on[i])
                idx[(*count)++] = i;
        if (*count == 0)
            rc = qattn_err_set(err, QATTN_ERR_ARG, "empty selection '%s'", sel);
    }
    free(on);
    return rc;
}
