/* Scale groups: parser, printer and the (token, channel) -> group map (the
 * map is qattn/numerics.h's, shared with the GPU kernels). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/group.h"
#include "qattn/numerics.h"

/* Parse a positive decimal integer occupying exactly [s, end). */
static int parse_pos(const char *s, const char *end, int *out)
{
    if (s == end || end - s > 9)
        return -1;
    long v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v <= 0 || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* Parse "A/B/C" (exactly three positive integers) in [s, end). */
static int parse_triple(const char *s, const char *end, int v[3])
{
    const char *p = s;
    for (int i = 0; i < 3; i++) {
        const char *q = p;
        while (q < end && *q != '/')
            q++;
        if ((i < 2 && q == end) || (i == 2 && q != end))
            return -1;
        if (parse_pos(p, q, &v[i]))
            return -1;
        p = q + 1;
    }
    return 0;
}

int qattn_group_parse(const char *spec, qattn_group *g, qattn_err *err)
{
    memset(g, 0, sizeof *g);
    if (!spec || !*spec)
        return qattn_err_set(err, QATTN_ERR_ARG, "empty scale group");
    char buf[128];
    if (strlen(spec) >= sizeof buf)
        return qattn_err_set(err, QATTN_ERR_ARG, "scale group '%.40s...' is too long", spec);
    strcpy(buf, spec);

    int first = 1, have_ch = 0;
    char *save = NULL;
    for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save), first = 0) {
        char *colon = strchr(w, ':');
        size_t keylen = colon ? (size_t)(colon - w) : strlen(w);
        const char *arg = colon ? colon + 1 : NULL;
        const char *argend = arg ? arg + strlen(arg) : NULL;
#define KEY(name) (keylen == strlen(name) && !strncmp(w, name, keylen))
        if (first) {
            if (KEY("tensor") && !arg) {
                g->tok = QATTN_TOK_TENSOR;
            } else if (KEY("token") && !arg) {
                g->tok = QATTN_TOK_TOKEN;
            } else if (KEY("channel") && !arg) {
                g->tok = QATTN_TOK_CHANNEL;
                g->ch = 1;
            } else if (KEY("block") || KEY("warp")) {
                g->tok = KEY("block") ? QATTN_TOK_BLOCK : QATTN_TOK_WARP;
                if (!arg || parse_pos(arg, argend, &g->b))
                    return qattn_err_set(err, QATTN_ERR_ARG,
                                         "scale group '%s': '%s' needs a positive block size, as in %.*s:64",
                                         spec, w, (int)keylen, w);
            } else if (KEY("thread")) {
                int v[3];
                if (!arg || parse_triple(arg, argend, v))
                    return qattn_err_set(err, QATTN_ERR_ARG,
                                         "scale group '%s': '%s' must be thread:B/S/W with positive integers",
                                         spec, w);
                if (v[0] % v[1] || v[1] % v[2])
                    return qattn_err_set(err, QATTN_ERR_ARG,
                                         "scale group '%s': in '%s' S must divide B and W must divide S",
                                         spec, w);
                g->tok = QATTN_TOK_THREAD;
                g->b = v[0];
                g->s = v[1];
                g->w = v[2];
            } else {
                return qattn_err_set(err, QATTN_ERR_ARG,
                                     "scale group '%s': unknown granularity '%s' (tensor, token, block:B, "
                                     "warp:B, thread:B/S/W, channel)",
                                     spec, w);
            }
        } else if (KEY("ch")) {
            if (g->tok == QATTN_TOK_CHANNEL)
                return qattn_err_set(err, QATTN_ERR_ARG,
                                     "scale group '%s': 'channel' already has one channel per group; '%s' is not allowed",
                                     spec, w);
            if (have_ch)
                return qattn_err_set(err, QATTN_ERR_ARG, "scale group '%s': '%s' given twice", spec, w);
            if (!arg || parse_pos(arg, argend, &g->ch))
                return qattn_err_set(err, QATTN_ERR_ARG,
                                     "scale group '%s': '%s' needs a positive channel count, as in ch:64",
                                     spec, w);
            have_ch = 1;
        } else if (KEY("e8m0") && !arg) {
            if (g->e8m0)
                return qattn_err_set(err, QATTN_ERR_ARG, "scale group '%s': 'e8m0' given twice", spec);
            g->e8m0 = 1;
        } else {
            return qattn_err_set(err, QATTN_ERR_ARG,
                                 "scale group '%s': unknown suffix '%s' (ch:C or e8m0)", spec, w);
        }
#undef KEY
    }
    if (spec[strlen(spec) - 1] == ',' || strstr(spec, ",,") || spec[0] == ',')
        return qattn_err_set(err, QATTN_ERR_ARG, "scale group '%s': empty word between commas", spec);
    return QATTN_OK;
}

char *qattn_group_format(const qattn_group *g, char *buf, size_t len)
{
    int n = 0;
    switch (g->tok) {
    case QATTN_TOK_TENSOR: n = snprintf(buf, len, "tensor"); break;
    case QATTN_TOK_TOKEN: n = snprintf(buf, len, "token"); break;
    case QATTN_TOK_BLOCK: n = snprintf(buf, len, "block:%d", g->b); break;
    case QATTN_TOK_WARP: n = snprintf(buf, len, "warp:%d", g->b); break;
    case QATTN_TOK_THREAD: n = snprintf(buf, len, "thread:%d/%d/%d", g->b, g->s, g->w); break;
    case QATTN_TOK_CHANNEL: n = snprintf(buf, len, "channel"); break;
    }
    if (n < 0 || (size_t)n >= len)
        return buf;
    if (g->ch > 0 && g->tok != QATTN_TOK_CHANNEL)
        n += snprintf(buf + n, len - (size_t)n, ",ch:%d", g->ch);
    if (g->e8m0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ",e8m0");
    return buf;
}

size_t qattn_group_ntok(const qattn_group *g, size_t n)
{
    return (size_t)qattn_num_group_ntok(*g, (int64_t)n);
}

size_t qattn_group_nch(const qattn_group *g, size_t d)
{
    return (size_t)qattn_num_group_nch(*g, (int)d);
}

size_t qattn_group_count(const qattn_group *g, size_t n, size_t d)
{
    return qattn_group_ntok(g, n) * qattn_group_nch(g, d);
}

size_t qattn_group_tok_index(const qattn_group *g, size_t t)
{
    return (size_t)qattn_num_group_tok_index(*g, (int64_t)t);
}

size_t qattn_group_ch_index(const qattn_group *g, size_t c)
{
    return (size_t)qattn_num_group_ch_index(*g, (int)c);
}

size_t qattn_group_index(const qattn_group *g, size_t n, size_t d, size_t t, size_t c)
{
    (void)n;
    return qattn_group_tok_index(g, t) * qattn_group_nch(g, d) + qattn_group_ch_index(g, c);
}

int qattn_group_token_uniform(const qattn_group *g)
{
    return g->tok == QATTN_TOK_TENSOR || g->tok == QATTN_TOK_CHANNEL;
}

int qattn_group_block(const qattn_group *g)
{
    switch (g->tok) {
    case QATTN_TOK_BLOCK:
    case QATTN_TOK_WARP:
    case QATTN_TOK_THREAD:
        return g->b;
    default:
        return 0;
    }
}
