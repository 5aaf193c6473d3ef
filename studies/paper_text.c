/* qattn paper-tables: text utilities (paper_text.h). */
#include "paper_text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- text */

void qattn_text_add(qattn_text *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void qattn_text_puts(qattn_text *b, const char *s) { qattn_text_add(b, s, strlen(s)); }

void qattn_text_printf(qattn_text *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        qattn_text_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    qattn_text_add(b, big, (size_t)n);
    free(big);
}

const char *qattn_text_str(const qattn_text *b) { return b->p ? b->p : ""; }
void qattn_text_clear(qattn_text *b)
{
    b->n = 0;
    if (b->p)
        b->p[0] = '\0';
}
void qattn_text_free(qattn_text *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* s with LaTeX's special characters escaped */
void qattn_text_tex(qattn_text *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': qattn_text_puts(b, "\\&"); break;
        case '%': qattn_text_puts(b, "\\%"); break;
        case '$': qattn_text_puts(b, "\\$"); break;
        case '#': qattn_text_puts(b, "\\#"); break;
        case '_': qattn_text_puts(b, "\\_"); break;
        case '{': qattn_text_puts(b, "\\{"); break;
        case '}': qattn_text_puts(b, "\\}"); break;
        case '~': qattn_text_puts(b, "\\textasciitilde{}"); break;
        case '^': qattn_text_puts(b, "\\textasciicircum{}"); break;
        case '\\': qattn_text_puts(b, "\\textbackslash{}"); break;
        case '<': qattn_text_puts(b, "\\textless{}"); break;
        case '>': qattn_text_puts(b, "\\textgreater{}"); break;
        case '|': qattn_text_puts(b, "\\textbar{}"); break;
        case '"': qattn_text_puts(b, "\\textquotedbl{}"); break;
        case '-': qattn_text_puts(b, "-{}"); break; /* no -- ligatures */
        case '\n': case '\r': case '\t': qattn_text_puts(b, " "); break;
        default: qattn_text_add(b, s, 1);
        }
    }
}

/* a path or name, escaped, with line breaks allowed after '/', '_' and '-' */
void qattn_text_tex_path(qattn_text *b, const char *s)
{
    for (; *s; s++) {
        char one[2] = {*s, '\0'};
        qattn_text_tex(b, one);
        if (*s == '/' || *s == '_' || *s == '-')
            qattn_text_puts(b, "\\allowbreak{}");
    }
}

/* ------------------------------------------------------------- numbers */

/* decimals for cos values shown in percent: enough to show the distance to
 * 100% of the value closest to it (2 to 4) */
int qattn_num_pct_decimals(const double *v, int n)
{
    double gap = INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]) && 100.0 * (1.0 - v[i]) < gap)
            gap = 100.0 * (1.0 - v[i]);
    if (gap >= 0.1)
        return 2;
    if (gap >= 0.01)
        return 3;
    return 4;
}

qattn_num qattn_num_fixed(double x, int dec)
{
    qattn_num r;
    if (!isfinite(x))
        snprintf(r.s, sizeof r.s, QATTN_PAPER_NA);
    else
        snprintf(r.s, sizeof r.s, "%.*f", dec, x);
    return r;
}

qattn_num qattn_num_pct(double cos, int dec) { return qattn_num_fixed(100.0 * cos, dec); }

qattn_num qattn_num_pct1(double cos) { return qattn_num_pct(cos, qattn_num_pct_decimals(&cos, 1)); }

/* three significant digits; small or large magnitudes as m x 10^e */
qattn_num qattn_num_g3(double x)
{
    qattn_num r;
    if (!isfinite(x)) {
        snprintf(r.s, sizeof r.s, QATTN_PAPER_NA);
        return r;
    }
    if (x == 0) {
        snprintf(r.s, sizeof r.s, "0");
        return r;
    }
    int e = (int)floor(log10(fabs(x)));
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.2e", x);
    char *ep = strchr(tmp, 'e');
    int e2 = ep ? atoi(ep + 1) : e; /* exponent after rounding */
    if (e2 >= -2 && e2 <= 3) {
        int dec = 2 - e2 < 0 ? 0 : 2 - e2;
        snprintf(r.s, sizeof r.s, "%.*f", dec, x);
    } else {
        if (ep)
            *ep = '\0';
        snprintf(r.s, sizeof r.s, "\\ensuremath{%s\\times10^{%d}}", tmp, e2);
    }
    return r;
}

qattn_num qattn_num_int(double x)
{
    qattn_num r;
    if (!isfinite(x))
        snprintf(r.s, sizeof r.s, QATTN_PAPER_NA);
    else
        snprintf(r.s, sizeof r.s, "%.0f", x);
    return r;
}

qattn_num qattn_num_ci(const char *lo, const char *hi)
{
    qattn_num r;
    if (!strcmp(lo, QATTN_PAPER_NA) && !strcmp(hi, QATTN_PAPER_NA))
        snprintf(r.s, sizeof r.s, QATTN_PAPER_NA);
    else
        snprintf(r.s, sizeof r.s, "[%.60s, %.60s]", lo, hi);
    return r;
}

/* decimals for a signed difference and its interval [lo, hi]: two
 * significant digits of the interval's width (of the largest magnitude if
 * the width is 0), 2 to 5 decimals */
int qattn_num_diff_decimals(double d, double lo, double hi)
{
    double ref = isfinite(lo) && isfinite(hi) ? fabs(hi - lo) : 0;
    if (!(ref > 0)) {
        ref = 0;
        if (isfinite(d) && fabs(d) > ref)
            ref = fabs(d);
        if (isfinite(lo) && fabs(lo) > ref)
            ref = fabs(lo);
        if (isfinite(hi) && fabs(hi) > ref)
            ref = fabs(hi);
    }
    if (ref == 0)
        return 2;
    int n = (int)ceil(-log10(ref)) + 1;
    return n < 2 ? 2 : n > 5 ? 5 : n;
}

qattn_num qattn_num_signed(double x, int dec)
{
    qattn_num r;
    if (!isfinite(x))
        snprintf(r.s, sizeof r.s, QATTN_PAPER_NA);
    else
        snprintf(r.s, sizeof r.s, "%+.*f", dec, x);
    if (r.s[0] == '-') { /* a real minus sign */
        qattn_num m;
        snprintf(m.s, sizeof m.s, "\\ensuremath{-}%.60s", r.s + 1);
        return m;
    }
    return r;
}

/* ------------------------------------------------------ macro names */

void qattn_mname_cat(qattn_mname *m, const char *s)
{
    size_t n = strlen(m->s);
    snprintf(m->s + n, sizeof m->s - n, "%s", s);
}

static const char *const ones_[] = {"Zero",    "One",     "Two",       "Three",    "Four",
                                    "Five",    "Six",     "Seven",     "Eight",    "Nine",
                                    "Ten",     "Eleven",  "Twelve",    "Thirteen", "Fourteen",
                                    "Fifteen", "Sixteen", "Seventeen", "Eighteen", "Nineteen"};
static const char *const tens_[] = {"",      "",      "Twenty",  "Thirty", "Forty",
                                    "Fifty", "Sixty", "Seventy", "Eighty", "Ninety"};

static void nm_number(qattn_mname *m, unsigned long v)
{
    if (v >= 1000000) {
        nm_number(m, v / 1000000);
        qattn_mname_cat(m, "Million");
        v %= 1000000;
        if (!v)
            return;
    }
    if (v >= 1000) {
        nm_number(m, v / 1000);
        qattn_mname_cat(m, "Thousand");
        v %= 1000;
        if (!v)
            return;
    }
    if (v >= 100) {
        qattn_mname_cat(m, ones_[v / 100]);
        qattn_mname_cat(m, "Hundred");
        v %= 100;
        if (!v)
            return;
    }
    if (v < 20) {
        qattn_mname_cat(m, ones_[v]);
    } else {
        qattn_mname_cat(m, tens_[v / 10]);
        if (v % 10)
            qattn_mname_cat(m, ones_[v % 10]);
    }
}

/* append s spelled in letters: letter runs capitalized, digit runs as
 * number words, everything else dropped */
void qattn_mname_word(qattn_mname *m, const char *s)
{
    while (*s) {
        if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')) {
            char run[128];
            size_t k = 0;
            while (((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')) && k < sizeof run - 1)
                run[k++] = *s++;
            run[k] = '\0';
            if (run[0] >= 'a' && run[0] <= 'z')
                run[0] = (char)(run[0] - 'a' + 'A');
            qattn_mname_cat(m, run);
        } else if (*s >= '0' && *s <= '9') {
            const char *d0 = s;
            while (*s >= '0' && *s <= '9')
                s++;
            if (s - d0 <= 9) {
                nm_number(m, strtoul(d0, NULL, 10));
            } else {
                for (const char *d = d0; d < s; d++)
                    qattn_mname_cat(m, ones_[*d - '0']);
            }
        } else {
            s++;
        }
    }
}

qattn_mname qattn_mname_make(const char *prefix)
{
    qattn_mname m;
    snprintf(m.s, sizeof m.s, "%s", prefix);
    return m;
}

/* Model tag of the i-th model: ModelA .. ModelZ, ModelAA .. */
void qattn_mname_model(char *buf, size_t n, size_t i)
{
    if (i < 26)
        snprintf(buf, n, "Model%c", (char)('A' + i));
    else
        snprintf(buf, n, "Model%c%c", (char)('A' + (i / 26 - 1) % 26), (char)('A' + i % 26));
}
