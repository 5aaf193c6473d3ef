/* Schemes: parser, printer, presets. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/scheme.h"

typedef struct preset {
    const char *name;
    const char *spec;
} preset;

/* The presets of docs/DESIGN.md "Schemes". Where the papers leave a detail open, the choice
 * is written here and in the README (e.g. the CK per-thread layouts are our
 * reading of an MFMA 16x16 tile computing S^T = K Q^T: a lane holds 4
 * consecutive K rows of each 16-row tile and one Q column). */
static const preset presets[] = {
    {"fp16", "q=fp16 k=fp16 p=fp16 v=fp16 smooth=none acc=fp32 kblock=128 out=fp16"},
    {"bf16", "q=bf16 k=bf16 p=bf16 v=bf16 smooth=none acc=fp32 kblock=128 out=bf16"},
    {"sage1-b", "q=int8@block:128 k=int8@block:64 p=fp16 v=fp16 smooth=k acc=fp16 kblock=64 out=fp16"},
    {"sage1-vb", "q=int8@block:128 k=int8@block:64 p=int8@static v=int8@channel smooth=k acc=fp32 kblock=64 out=fp16"},
    {"sage2-8b", "q=int8@thread:32/8/1 k=int8@thread:64/8/2 p=e4m3@static v=e4m3@channel smooth=k "
                 "acc=fp22+fp32:64 kblock=64 out=bf16"},
    {"sage2-8b-sm90", "q=int8@thread:16/8/1 k=int8@thread:128/8/2 p=e4m3@static v=e4m3@channel smooth=k "
                      "acc=fp22+fp32:128 kblock=128 out=bf16"},
    {"sage2-4b", "q=int4@thread:32/8/1 k=int4@thread:64/8/2 p=e4m3@static v=e4m3@channel smooth=q+k "
                 "acc=fp22+fp32:64 kblock=64 out=bf16"},
    {"fa3-fp8", "q=e4m3@tensor k=e4m3@tensor p=e4m3 v=e4m3@tensor smooth=none acc=fp22 kblock=128 out=bf16"},
    {"ck-i8fp8bf16", "q=int8@thread:64/16/1 k=int8@thread:64/16/4 p=e4m3@static v=e4m3@channel smooth=k "
                     "acc=fp32 kblock=64 out=bf16"},
    {"ck-i4fp8bf16", "q=int4@thread:64/16/1 k=int4@thread:64/16/4 p=e4m3@static v=e4m3@channel smooth=q+k "
                     "acc=fp32 kblock=64 out=bf16"},
    {"ck-fp8bf16", "q=e4m3@thread:64/16/1 k=e4m3@thread:64/16/4 p=e4m3@static v=e4m3@channel smooth=k "
                   "acc=fp32 kblock=64 out=bf16"},
};
static const size_t npresets = sizeof presets / sizeof presets[0];

size_t qattn_scheme_preset_count(void) { return npresets; }
const char *qattn_scheme_preset_name(size_t i) { return i < npresets ? presets[i].name : NULL; }
const char *qattn_scheme_preset_spec(size_t i) { return i < npresets ? presets[i].spec : NULL; }

const char *qattn_scheme_preset_find(const char *name)
{
    for (size_t i = 0; i < npresets; i++)
        if (!strcmp(presets[i].name, name))
            return presets[i].spec;
    return NULL;
}

static void scheme_defaults(qattn_scheme *s)
{
    memset(s, 0, sizeof *s);
    s->q.fmt = s->k.fmt = s->v.fmt = QATTN_FMT_FP32;
    s->p = QATTN_FMT_FP32;
    s->acc = QATTN_ACC_FP32;
    s->kblock = 64;
    s->out = QATTN_FMT_FP32;
}

static int parse_int_word(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v <= 0 || v > QATTN_SCHEME_SIZE_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* q/k/v operand: FMT[@GROUP] */
static int parse_operand(const char *key, const char *val, qattn_operand *op, qattn_err *err)
{
    char fmtname[32];
    const char *at = strchr(val, '@');
    size_t flen = at ? (size_t)(at - val) : strlen(val);
    if (flen >= sizeof fmtname)
        flen = sizeof fmtname - 1;
    memcpy(fmtname, val, flen);
    fmtname[flen] = '\0';
    qattn_fmt f;
    if (qattn_fmt_parse(fmtname, &f) || f == QATTN_FMT_E8M0)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "%s=%s: unknown format '%s' (fp32, fp16, bf16, e4m3, e5m2, int8, int4)", key, val,
                             fmtname);
    op->fmt = f;
    memset(&op->group, 0, sizeof op->group);
    if (qattn_fmt_is_scaled(f)) {
        if (!at)
            return qattn_err_set(err, QATTN_ERR_ARG, "%s=%s: '%s' needs a scale group, as in %s=%s@block:64", key,
                                 val, fmtname, key, fmtname);
        qattn_err e2;
        if (qattn_group_parse(at + 1, &op->group, &e2))
            return qattn_err_set(err, QATTN_ERR_ARG, "%s=%s: %s", key, val, e2.msg);
        /* S and W divide B, so bounding B and C bounds them all */
        if (op->group.b > QATTN_SCHEME_SIZE_MAX || op->group.ch > QATTN_SCHEME_SIZE_MAX)
            return qattn_err_set(err, QATTN_ERR_ARG, "%s=%s: group size %d is larger than %d", key, val,
                                 op->group.b > op->group.ch ? op->group.b : op->group.ch, QATTN_SCHEME_SIZE_MAX);
    } else if (at) {
        return qattn_err_set(err, QATTN_ERR_ARG, "%s=%s: '%s' is not scaled and takes no '@%s'", key, val, fmtname,
                             at + 1);
    }
    return QATTN_OK;
}

int qattn_operand_parse(const char *what, const char *spec, qattn_operand *op, qattn_err *err)
{
    return parse_operand(what, spec, op, err);
}

static int parse_p(const char *val, qattn_scheme *s, qattn_err *err)
{
    char fmtname[32];
    const char *at = strchr(val, '@');
    size_t flen = at ? (size_t)(at - val) : strlen(val);
    if (flen >= sizeof fmtname)
        flen = sizeof fmtname - 1;
    memcpy(fmtname, val, flen);
    fmtname[flen] = '\0';
    qattn_fmt f;
    if (qattn_fmt_parse(fmtname, &f) || f == QATTN_FMT_E8M0 || f == QATTN_FMT_INT4)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "p=%s: unknown P format '%s' (fp32, fp16, bf16, e4m3, e5m2, int8@static)", val,
                             fmtname);
    if (at && strcmp(at + 1, "static"))
        return qattn_err_set(err, QATTN_ERR_ARG, "p=%s: unknown P scaling '%s' (only @static)", val, at + 1);
    if (at && !qattn_fmt_is_scaled(f))
        return qattn_err_set(err, QATTN_ERR_ARG, "p=%s: '%s' is not scaled and takes no '@static'", val, fmtname);
    if (f == QATTN_FMT_INT8 && !at)
        return qattn_err_set(err, QATTN_ERR_ARG, "p=%s: int8 P needs a scale: p=int8@static", val);
    s->p = f;
    s->p_static = at != NULL;
    return QATTN_OK;
}

static int parse_smooth(const char *val, qattn_scheme *s, qattn_err *err)
{
    s->smooth = 0;
    if (!strcmp(val, "none"))
        return QATTN_OK;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", val);
    if (!*val || val[strlen(val) - 1] == '+' || val[0] == '+' || strstr(val, "++"))
        return qattn_err_set(err, QATTN_ERR_ARG, "smooth=%s: empty word (use none, or q, k, v joined by +)", val);
    char *save = NULL;
    for (char *w = strtok_r(buf, "+", &save); w; w = strtok_r(NULL, "+", &save)) {
        unsigned bit = !strcmp(w, "q") ? QATTN_SMOOTH_Q
                       : !strcmp(w, "k") ? QATTN_SMOOTH_K
                       : !strcmp(w, "v") ? QATTN_SMOOTH_V
                                         : 0;
        if (!bit)
            return qattn_err_set(err, QATTN_ERR_ARG, "smooth=%s: unknown operand '%s' (none, or q, k, v joined by +)",
                                 val, w);
        if (s->smooth & bit)
            return qattn_err_set(err, QATTN_ERR_ARG, "smooth=%s: '%s' given twice", val, w);
        s->smooth |= bit;
    }
    return QATTN_OK;
}

static int parse_acc(const char *val, qattn_scheme *s, qattn_err *err)
{
    char base[16];
    const char *plus = strchr(val, '+');
    size_t blen = plus ? (size_t)(plus - val) : strlen(val);
    if (blen >= sizeof base)
        blen = sizeof base - 1;
    memcpy(base, val, blen);
    base[blen] = '\0';
    if (!strcmp(base, "fp32"))
        s->acc = QATTN_ACC_FP32;
    else if (!strcmp(base, "fp16"))
        s->acc = QATTN_ACC_FP16;
    else if (!strcmp(base, "fp22"))
        s->acc = QATTN_ACC_FP22;
    else
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "acc=%s: unknown accumulator '%s' (fp32, fp16, fp22, fp16+fp32:N, fp22+fp32:N)", val,
                             base);
    s->acc_chunk = 0;
    if (plus) {
        if (strncmp(plus + 1, "fp32:", 5) || parse_int_word(plus + 6, &s->acc_chunk))
            return qattn_err_set(err, QATTN_ERR_ARG,
                                 "acc=%s: two-level accumulator must read %s+fp32:N with N from 1 to %d, not '%s'", val,
                                 base, QATTN_SCHEME_SIZE_MAX,
                                 plus + 1);
        if (s->acc == QATTN_ACC_FP32)
            return qattn_err_set(err, QATTN_ERR_ARG, "acc=%s: an fp32 accumulator needs no fp32 buffer", val);
    }
    return QATTN_OK;
}

static int parse_word(const char *w, qattn_scheme *s, qattn_err *err)
{
    const char *eq = strchr(w, '=');
    char key[16];
    size_t klen = (size_t)(eq - w);
    if (klen >= sizeof key)
        klen = sizeof key - 1;
    memcpy(key, w, klen);
    key[klen] = '\0';
    const char *val = eq + 1;
    if (!*val)
        return qattn_err_set(err, QATTN_ERR_ARG, "'%s': missing value for key '%s'", w, key);
    if (!strcmp(key, "q"))
        return parse_operand("q", val, &s->q, err);
    if (!strcmp(key, "k"))
        return parse_operand("k", val, &s->k, err);
    if (!strcmp(key, "v"))
        return parse_operand("v", val, &s->v, err);
    if (!strcmp(key, "p"))
        return parse_p(val, s, err);
    if (!strcmp(key, "smooth"))
        return parse_smooth(val, s, err);
    if (!strcmp(key, "acc"))
        return parse_acc(val, s, err);
    if (!strcmp(key, "qk")) {
        if (strcmp(val, "exact") && strcmp(val, "fp22"))
            return qattn_err_set(err, QATTN_ERR_ARG, "qk=%s: unknown Q.K sum '%s' (exact, fp22)", val, val);
        s->qk_fp22 = !strcmp(val, "fp22");
        return QATTN_OK;
    }
    if (!strcmp(key, "rope")) {
        int v;
        if (!strcmp(val, "0")) {
            s->rope = 0;
            return QATTN_OK;
        }
        if (parse_int_word(val, &v))
            return qattn_err_set(err, QATTN_ERR_ARG, "rope=%s: '%s' is not an integer from 0 to %d", val, val,
                                 QATTN_SCHEME_SIZE_MAX);
        s->rope = v;
        return QATTN_OK;
    }
    if (!strcmp(key, "kblock") || !strcmp(key, "qblock")) {
        int v;
        if (parse_int_word(val, &v))
            return qattn_err_set(err, QATTN_ERR_ARG, "%s=%s: '%s' is not an integer from 1 to %d", key, val, val,
                                 QATTN_SCHEME_SIZE_MAX);
        if (key[0] == 'k')
            s->kblock = v;
        else
            s->qblock = v;
        return QATTN_OK;
    }
    if (!strcmp(key, "out")) {
        qattn_fmt f;
        if (qattn_fmt_parse(val, &f) || (f != QATTN_FMT_FP32 && f != QATTN_FMT_FP16 && f != QATTN_FMT_BF16))
            return qattn_err_set(err, QATTN_ERR_ARG, "out=%s: unknown output format '%s' (fp32, fp16, bf16)", val,
                                 val);
        s->out = f;
        return QATTN_OK;
    }
    return qattn_err_set(err, QATTN_ERR_ARG,
                         "unknown key '%s' in '%s' (keys: q k p v smooth acc kblock qblock qk rope out)", key, w);
}

/* index of the key of word w (text before '='), or -1 when unknown */
static int key_index(const char *w)
{
    static const char *keys[] = {"q", "k", "v", "p", "smooth", "acc", "kblock", "qblock", "out", "rope", "qk"};
    size_t klen = strcspn(w, "=");
    for (int i = 0; i < (int)(sizeof keys / sizeof keys[0]); i++)
        if (strlen(keys[i]) == klen && !strncmp(keys[i], w, klen))
            return i;
    return -1;
}

static int parse_words(const char *spec, qattn_scheme *s, int allow_preset, qattn_err *err)
{
    char buf[QATTN_SCHEME_LEN_MAX + 1];
    if (strlen(spec) >= sizeof buf)
        return qattn_err_set(err, QATTN_ERR_ARG, "scheme is too long (%zu characters, at most %d)", strlen(spec),
                             QATTN_SCHEME_LEN_MAX);
    strcpy(buf, spec);
    int first = 1;
    unsigned given = 0; /* keys set by this string's own words: each once */
    char *save = NULL;
    for (char *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save), first = 0) {
        if (!strchr(w, '=')) {
            const char *ps = qattn_scheme_preset_find(w);
            if (!ps)
                return qattn_err_set(err, QATTN_ERR_ARG,
                                     "unknown scheme or preset '%s' (qattn schemes lists the presets; keys are "
                                     "written key=value)",
                                     w);
            if (!first || !allow_preset)
                return qattn_err_set(err, QATTN_ERR_ARG, "preset '%s' must be the first word of a scheme", w);
            int rc = parse_words(ps, s, 0, err);
            if (rc)
                return rc;
            continue;
        }
        int key = key_index(w);
        if (key >= 0 && (given & (1u << key)))
            return qattn_err_set(err, QATTN_ERR_ARG, "key '%.*s' is given twice (at '%s'); give each key once",
                                 (int)strcspn(w, "="), w, w);
        if (key >= 0)
            given |= 1u << key;
        int rc = parse_word(w, s, err);
        if (rc)
            return rc;
    }
    if (first)
        return qattn_err_set(err, QATTN_ERR_ARG, "empty scheme");
    return QATTN_OK;
}

int qattn_scheme_parse(const char *spec, qattn_scheme *s, qattn_err *err)
{
    scheme_defaults(s);
    if (!spec)
        return qattn_err_set(err, QATTN_ERR_ARG, "empty scheme");
    return parse_words(spec, s, 1, err);
}

static void format_operand(char *buf, size_t len, const qattn_operand *op)
{
    if (qattn_fmt_is_scaled(op->fmt)) {
        char g[64];
        snprintf(buf, len, "%s@%s", qattn_fmt_name(op->fmt), qattn_group_format(&op->group, g, sizeof g));
    } else {
        snprintf(buf, len, "%s", qattn_fmt_name(op->fmt));
    }
}

char *qattn_scheme_format(const qattn_scheme *s, char *buf, size_t len)
{
    char q[96], k[96], v[96], smooth[16] = "", acc[32];
    format_operand(q, sizeof q, &s->q);
    format_operand(k, sizeof k, &s->k);
    format_operand(v, sizeof v, &s->v);
    if (!s->smooth)
        strcpy(smooth, "none");
    else
        snprintf(smooth, sizeof smooth, "%s%s%s%s%s", s->smooth & QATTN_SMOOTH_Q ? "q" : "",
                 (s->smooth & QATTN_SMOOTH_Q) && (s->smooth & ~QATTN_SMOOTH_Q) ? "+" : "",
                 s->smooth & QATTN_SMOOTH_K ? "k" : "",
                 (s->smooth & QATTN_SMOOTH_K) && (s->smooth & QATTN_SMOOTH_V) ? "+" : "",
                 s->smooth & QATTN_SMOOTH_V ? "v" : "");
    const char *accbase = s->acc == QATTN_ACC_FP16 ? "fp16" : s->acc == QATTN_ACC_FP22 ? "fp22" : "fp32";
    if (s->acc_chunk > 0)
        snprintf(acc, sizeof acc, "%s+fp32:%d", accbase, s->acc_chunk);
    else
        snprintf(acc, sizeof acc, "%s", accbase);
    int n = snprintf(buf, len, "q=%s k=%s p=%s%s v=%s smooth=%s acc=%s kblock=%d", q, k, qattn_fmt_name(s->p),
                     s->p_static ? "@static" : "", v, smooth, acc, s->kblock);
    if (s->qblock > 0 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " qblock=%d", s->qblock);
    if (s->qk_fp22 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " qk=fp22");
    if (s->rope > 0 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " rope=%d", s->rope);
    if (n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " out=%s", qattn_fmt_name(s->out));
    return buf;
}

int qattn_scheme_qblock(const qattn_scheme *s)
{
    if (s->qblock > 0)
        return s->qblock;
    int b = qattn_group_block(&s->q.group);
    return b > 0 ? b : 128;
}
