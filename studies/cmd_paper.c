/* qattn paper-tables: turn the studies' CSV files (studies/CSV.md) into the
 * paper's generated LaTeX: one table per study, the anchors table (our
 * paired comparisons next to the published findings) and numbers.tex, the
 * \newcommand macros for every number the text cites.
 *
 * Every input is optional: a missing file gives a table saying "not run" and
 * macros that expand to "n/a", so the paper always builds. A malformed file
 * or a missing required column is an input error (exit 2, nothing written).
 * All output is built in memory first and then written through temporary
 * files renamed into place.
 *
 * Macro names (letters only):
 *   \QA<study><Model><factor words><Metric>
 *     study: gran, smooth, pv, acc, kbias; Model: ModelA, ModelB, ... in the
 *     order of results/models.csv (models found only elsewhere follow,
 *     sorted by name); factor words: each factor value spelled in letters
 *     (int4 -> IntFour, e4m3 -> EFourMThree, q+k -> QK, 64 -> SixtyFour),
 *     preceded by a tag for some factors (smooth -> Smooth, pv_fmt and the
 *     accumulator's pv -> Pv, chunk -> Chunk, r -> R); Metric: N, CosMean,
 *     CosLo, CosHi, CosCi ("[lo, hi]"), CosWorstHead, CosWorstLayer,
 *     WorstLayer, RelLOneMean, RelLOneCi, RmseMean. Cosines in percent.
 *     e.g. \QAgranModelAIntFourThreadSmoothKCosMean,
 *          \QAaccModelAPvEFourMThreeFpTwentyTwoFpThirtyTwoChunkSixtyFourCosMean
 *   \QAout<Model><Q|K|V><Metric>      channel statistics over the model's layers
 *   \QA<Model><Field>, \QAmodelCount  results/models.csv (Name, Layers, Heads, ...)
 *   \QApareto{Points,Measured,Unmeasured,Devices}, \QApareto<Model>...
 *   \QAcmp<Claim><Model><One|Two|...><Field>  one row of comparisons.csv:
 *     A, B, Metric, MeanA, MeanB, Diff, Lo, Hi, Ci, N, Verdict, Word
 *     (agrees / disagrees / inconclusive), Sentence
 *   \QAclaim<Claim>Word, \QAclaim<Claim>Summary  over all rows of a claim
 *   \QAanchors{Rows,Agree,Disagree,Inconclusive,NoAnchor}, \QAinputsMissing
 *   \QApub...  published values (constants below, from shared/ANCHORS.md)
 * Whether a comparison agrees with the published finding is derived from its
 * verdict and the claim's direction (see expectation()), never typed in.
 * Macros for the expected grid of each study (studies/CSV.md) and for at
 * least two models are always defined, as "n/a" where there is no data. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "csvread.h"

#define NA "n/a"

/* ---------------------------------------------------------------- text */

typedef struct sbuf {
    char *p; /* [cap] NUL-terminated text of n bytes */
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
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

static void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        sb_add(b, tmp, (size_t)n);
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
    sb_add(b, big, (size_t)n);
    free(big);
}

static const char *sb_str(const sbuf *b) { return b->p ? b->p : ""; }
static void sb_clear(sbuf *b)
{
    b->n = 0;
    if (b->p)
        b->p[0] = '\0';
}
static void sb_free(sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* s with LaTeX's special characters escaped */
static void sb_tex(sbuf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': sb_puts(b, "\\&"); break;
        case '%': sb_puts(b, "\\%"); break;
        case '$': sb_puts(b, "\\$"); break;
        case '#': sb_puts(b, "\\#"); break;
        case '_': sb_puts(b, "\\_"); break;
        case '{': sb_puts(b, "\\{"); break;
        case '}': sb_puts(b, "\\}"); break;
        case '~': sb_puts(b, "\\textasciitilde{}"); break;
        case '^': sb_puts(b, "\\textasciicircum{}"); break;
        case '\\': sb_puts(b, "\\textbackslash{}"); break;
        case '<': sb_puts(b, "\\textless{}"); break;
        case '>': sb_puts(b, "\\textgreater{}"); break;
        case '|': sb_puts(b, "\\textbar{}"); break;
        case '"': sb_puts(b, "\\textquotedbl{}"); break;
        case '-': sb_puts(b, "-{}"); break; /* no -- ligatures */
        case '\n': case '\r': case '\t': sb_puts(b, " "); break;
        default: sb_add(b, s, 1);
        }
    }
}

/* a path or name, escaped, with line breaks allowed after '/', '_' and '-' */
static void sb_tex_path(sbuf *b, const char *s)
{
    for (; *s; s++) {
        char one[2] = {*s, '\0'};
        sb_tex(b, one);
        if (*s == '/' || *s == '_' || *s == '-')
            sb_puts(b, "\\allowbreak{}");
    }
}

/* ------------------------------------------------------------- numbers */

typedef struct num {
    char s[160];
} num;

/* decimals for cos values shown in percent: enough to show the distance to
 * 100% of the value closest to it (2 to 4) */
static int pct_decimals(const double *v, int n)
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

static num f_pct(double cos, int dec)
{
    num r;
    if (!isfinite(cos))
        snprintf(r.s, sizeof r.s, NA);
    else
        snprintf(r.s, sizeof r.s, "%.*f", dec, 100.0 * cos);
    return r;
}

static num f_pct1(double cos) { return f_pct(cos, pct_decimals(&cos, 1)); }

/* three significant digits; small or large magnitudes as m x 10^e */
static num f_g3(double x)
{
    num r;
    if (!isfinite(x)) {
        snprintf(r.s, sizeof r.s, NA);
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

static num f_int(double x)
{
    num r;
    if (!isfinite(x))
        snprintf(r.s, sizeof r.s, NA);
    else
        snprintf(r.s, sizeof r.s, "%.0f", x);
    return r;
}

static num f_ci(const char *lo, const char *hi)
{
    num r;
    if (!strcmp(lo, NA) && !strcmp(hi, NA))
        snprintf(r.s, sizeof r.s, NA);
    else
        snprintf(r.s, sizeof r.s, "[%.60s, %.60s]", lo, hi);
    return r;
}

/* decimals for a signed difference and its interval [lo, hi]: two
 * significant digits of the interval's width (of the largest magnitude if
 * the width is 0), 2 to 5 decimals */
static int diff_decimals(double d, double lo, double hi)
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

static num f_signed(double x, int dec)
{
    num r;
    if (!isfinite(x))
        snprintf(r.s, sizeof r.s, NA);
    else
        snprintf(r.s, sizeof r.s, "%+.*f", dec, x);
    if (r.s[0] == '-') { /* a real minus sign */
        num m;
        snprintf(m.s, sizeof m.s, "\\ensuremath{-}%.60s", r.s + 1);
        return m;
    }
    return r;
}

/* ------------------------------------------------------ macro names */

typedef struct mname {
    char s[256];
} mname;

static void nm_cat(mname *m, const char *s)
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

static void nm_number(mname *m, unsigned long v)
{
    if (v >= 1000000) {
        nm_number(m, v / 1000000);
        nm_cat(m, "Million");
        v %= 1000000;
        if (!v)
            return;
    }
    if (v >= 1000) {
        nm_number(m, v / 1000);
        nm_cat(m, "Thousand");
        v %= 1000;
        if (!v)
            return;
    }
    if (v >= 100) {
        nm_cat(m, ones_[v / 100]);
        nm_cat(m, "Hundred");
        v %= 100;
        if (!v)
            return;
    }
    if (v < 20) {
        nm_cat(m, ones_[v]);
    } else {
        nm_cat(m, tens_[v / 10]);
        if (v % 10)
            nm_cat(m, ones_[v % 10]);
    }
}

/* append s spelled in letters: letter runs capitalized, digit runs as
 * number words, everything else dropped */
static void nm_word(mname *m, const char *s)
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
            nm_cat(m, run);
        } else if (*s >= '0' && *s <= '9') {
            const char *d0 = s;
            while (*s >= '0' && *s <= '9')
                s++;
            if (s - d0 <= 9) {
                nm_number(m, strtoul(d0, NULL, 10));
            } else {
                for (const char *d = d0; d < s; d++)
                    nm_cat(m, ones_[*d - '0']);
            }
        } else {
            s++;
        }
    }
}

static mname nm_make(const char *prefix)
{
    mname m;
    snprintf(m.s, sizeof m.s, "%s", prefix);
    return m;
}

/* Model tag of the i-th model: ModelA .. ModelZ, ModelAA .. */
static void model_tag(char *buf, size_t n, size_t i)
{
    if (i < 26)
        snprintf(buf, n, "Model%c", (char)('A' + i));
    else
        snprintf(buf, n, "Model%c%c", (char)('A' + (i / 26 - 1) % 26), (char)('A' + i % 26));
}

static const char *const index_words[] = {"One",   "Two",   "Three", "Four", "Five",
                                          "Six",   "Seven", "Eight", "Nine", "Ten",
                                          "Eleven", "Twelve"};

/* ------------------------------------------------------------ context */

enum { IN_GRAN, IN_SMOOTH, IN_PV, IN_ACC, IN_KBIAS, IN_OUT, IN_PARETO, IN_CMP, IN_MODELS, IN_N };

static const char *const input_rel[IN_N] = {
    "granularity/summary.csv", "smoothing/summary.csv", "pv/summary.csv",
    "accumulator/summary.csv", "kbias/summary.csv",     "outliers/summary.csv",
    "pareto/pareto.csv",       "comparisons.csv",       "models.csv",
};

typedef struct input {
    char path[1024];
    int present;
    qattn_csv t;
} input;

typedef struct ctx {
    input in[IN_N];
    char **models; /* [nmodels] model names, in table order */
    size_t nmodels;
    size_t ntags; /* max(2, nmodels): model tags that always get macros */
    /* macro names defined so far: open-addressing hash set */
    char **set; /* [setcap] */
    size_t setn, setcap;
    sbuf numbers;
    int dups_warned;
    qattn_err err;
} ctx;

static unsigned long hash_str(const char *s)
{
    unsigned long h = 1469598103UL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211UL;
    return h;
}

/* 1 if name was added, 0 if it was there, -1 out of memory */
static int set_add(ctx *c, const char *name)
{
    if (2 * (c->setn + 1) > c->setcap) {
        size_t cap = c->setcap ? 2 * c->setcap : 4096;
        char **t = calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < c->setcap; i++)
            if (c->set[i]) {
                size_t j = hash_str(c->set[i]) & (cap - 1);
                while (t[j])
                    j = (j + 1) & (cap - 1);
                t[j] = c->set[i];
            }
        free(c->set);
        c->set = t;
        c->setcap = cap;
    }
    size_t j = hash_str(name) & (c->setcap - 1);
    while (c->set[j]) {
        if (!strcmp(c->set[j], name))
            return 0;
        j = (j + 1) & (c->setcap - 1);
    }
    size_t n = strlen(name);
    c->set[j] = malloc(n + 1);
    if (!c->set[j])
        return -1;
    memcpy(c->set[j], name, n + 1);
    c->setn++;
    return 1;
}

/* \newcommand{\NAME}{VALUE}, unless NAME is defined already (the first
 * definition wins; a data row defining it twice gets a warning) */
static void def_macro(ctx *c, const char *name, const char *value, int from_data)
{
    int r = set_add(c, name);
    if (r < 0) {
        c->numbers.oom = 1;
        return;
    }
    if (r == 0) {
        if (from_data && c->dups_warned++ < 5)
            fprintf(stderr, "qattn paper-tables: warning: \\%s defined by two rows; the first is kept\n",
                    name);
        return;
    }
    sb_printf(&c->numbers, "\\newcommand{\\%s}{%s}\n", name, value);
}

static void def_metric(ctx *c, const mname *base, const char *metric, const char *value,
                       int from_data)
{
    mname m = *base;
    nm_cat(&m, metric);
    def_macro(c, m.s, value, from_data);
}

static size_t model_index(const ctx *c, const char *model)
{
    for (size_t i = 0; i < c->nmodels; i++)
        if (!strcmp(c->models[i], model))
            return i;
    return (size_t)-1;
}

static int add_model(ctx *c, const char *model)
{
    if (model_index(c, model) != (size_t)-1)
        return 0;
    char **m = realloc(c->models, (c->nmodels + 1) * sizeof *m);
    if (!m)
        return -1;
    c->models = m;
    size_t n = strlen(model);
    m[c->nmodels] = malloc(n + 1);
    if (!m[c->nmodels])
        return -1;
    memcpy(m[c->nmodels], model, n + 1);
    c->nmodels++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* models.csv order first, then the models named only by other files, sorted */
static int collect_models(ctx *c)
{
    if (c->in[IN_MODELS].present) {
        const qattn_csv *t = &c->in[IN_MODELS].t;
        int col = qattn_csv_col(t, "model");
        for (size_t r = 0; r < t->nrows; r++)
            if (add_model(c, qattn_csv_str(t, r, col)))
                return QATTN_ERR_NOMEM;
    }
    size_t first_other = c->nmodels;
    for (int i = 0; i < IN_N; i++) {
        if (i == IN_MODELS || !c->in[i].present)
            continue;
        const qattn_csv *t = &c->in[i].t;
        int col = qattn_csv_col(t, "model");
        for (size_t r = 0; r < t->nrows; r++)
            if (add_model(c, qattn_csv_str(t, r, col)))
                return QATTN_ERR_NOMEM;
    }
    if (c->nmodels > first_other)
        qsort(c->models + first_other, c->nmodels - first_other, sizeof *c->models, cmp_str);
    c->ntags = c->nmodels > 2 ? c->nmodels : 2;
    return 0;
}

/* look up required columns: cols[i] = index of names[i]; an error names the
 * file and the first missing column */
static int need_cols(ctx *c, const qattn_csv *t, const char *const *names, int n, int *cols)
{
    for (int i = 0; i < n; i++) {
        cols[i] = qattn_csv_need(t, names[i], &c->err);
        if (cols[i] < 0)
            return cols[i];
    }
    return 0;
}

static void not_run_table(sbuf *tab, const char *title, const char *label, const char *path)
{
    sb_printf(tab, "%% generated by qattn paper-tables: %s not found\n", path);
    sb_printf(tab, "\\begin{table}[tbp]\n\\centering\n\\caption{%s: not run.}\\label{%s}\n", title,
              label);
    sb_puts(tab, "\\small Study not run: \\texttt{");
    sb_tex(tab, path);
    sb_puts(tab, "} was not found when the tables were generated.\n\\end{table}\n");
}

/* ------------------------------------------------ emulation studies */

#define MAXF 3

typedef struct study_def {
    const char *name;   /* directory under results/, and the table label */
    const char *abbrev; /* macro prefix after QA */
    const char *title;  /* caption */
    int in;             /* IN_* */
    int nf;
    const char *factor[MAXF];     /* CSV column names */
    const char *head[MAXF];       /* LaTeX column headers */
    const char *tag[MAXF];        /* macro tag before the value */
    const char *const *grid[MAXF]; /* expected values (NULL-terminated) */
    int augmented;                /* kbias: augmented real data */
    const char *deflt[MAXF];      /* value of a factor whose column is absent (NULL: required) */
} study_def;

static const char *const g_fmt4[] = {"int4", "int8", "e4m3", "e5m2", NULL};
static const char *const g_group[] = {"tensor", "block", "warp", "thread", "token", NULL};
static const char *const g_smooth2[] = {"none", "k", NULL};
static const char *const g_fmt_i4i8[] = {"int4", "int8", NULL};
static const char *const g_smooth5[] = {"none", "k", "q", "q+k", "q+k+v", NULL};
static const char *const g_fmt_i8i4[] = {"int8", "int4", NULL};
static const char *const g_pv[] = {"fp16", "e4m3", "e5m2", "int8", NULL};
static const char *const g_accpv[] = {"e4m3", "fp16", NULL};
static const char *const g_acc[] = {"fp32", "fp16", "fp22", "fp22+fp32", NULL};
static const char *const g_chunk[] = {"0", "16", "32", "64", "128", "256", "512", NULL};
static const char *const g_r[] = {"0", "1", "2", "4", "8", "16", "32", NULL};
static const char *const g_fmt_kb[] = {"int8", "int4", "e4m3", NULL};

static const study_def studies[] = {
    {"granularity", "gran", "Scale granularity of Q and K", IN_GRAN, 3,
     {"qk_fmt", "group", "smooth"}, {"Q/K", "group", "smooth"}, {"", "", "Smooth"},
     {g_fmt4, g_group, g_smooth2}, 0, {NULL, NULL, NULL}},
    {"smoothing", "smooth", "Smoothing ablation (per-thread Q/K groups)", IN_SMOOTH, 2,
     {"qk_fmt", "smooth"}, {"Q/K", "smooth"}, {"", "Smooth"}, {g_fmt_i4i8, g_smooth5, NULL}, 0,
     {NULL, NULL, NULL}},
    {"pv", "pv", "Storage type of P and V", IN_PV, 2, {"qk_fmt", "pv_fmt"}, {"Q/K", "P/V"},
     {"", "Pv"}, {g_fmt_i8i4, g_pv, NULL}, 0, {NULL, NULL, NULL}},
    {"accumulator", "acc", "P$\\cdot$V accumulator", IN_ACC, 3, {"pv", "acc", "chunk"},
     {"P/V", "accumulator", "chunk $N$"}, {"Pv", "", "Chunk"}, {g_accpv, g_acc, g_chunk}, 0,
     {"e4m3", NULL, NULL}},
    {"kbias", "kbias", "K bias sweep (augmented real data)", IN_KBIAS, 3,
     {"r", "qk_fmt", "smooth"}, {"$r$", "Q/K", "smooth"}, {"R", "", "Smooth"},
     {g_r, g_fmt_kb, g_smooth2}, 1, {NULL, NULL, NULL}},
};
#define NSTUDIES (sizeof studies / sizeof studies[0])

/* accumulator grid (studies/CSV.md): chunk 0 exactly for the single-level
 * accumulators; with fp16 P/V only fp32 and fp16 */
static int grid_valid(const study_def *sd, const char *const *v)
{
    if (!strcmp(sd->abbrev, "acc")) {
        int two = !strcmp(v[1], "fp22+fp32");
        if (two == !strcmp(v[2], "0"))
            return 0;
        return strcmp(v[0], "fp16") || !strcmp(v[1], "fp32") || !strcmp(v[1], "fp16");
    }
    return 1;
}

static mname cell_base(const study_def *sd, const char *tag, const char *const *v)
{
    mname m = nm_make("QA");
    nm_cat(&m, sd->abbrev);
    nm_cat(&m, tag);
    for (int i = 0; i < sd->nf; i++) {
        nm_cat(&m, sd->tag[i]);
        nm_word(&m, v[i]);
    }
    return m;
}

static const char *const cell_metrics[] = {"N",           "CosMean",       "CosLo",
                                           "CosHi",       "CosCi",         "CosWorstHead",
                                           "CosWorstLayer", "WorstLayer",  "RelLOneMean",
                                           "RelLOneCi",   "RmseMean"};
#define NCELLM (sizeof cell_metrics / sizeof cell_metrics[0])

static void def_grid_na(ctx *c, const study_def *sd)
{
    size_t idx[MAXF] = {0};
    for (size_t mi = 0; mi < c->ntags; mi++) {
        char tag[16];
        model_tag(tag, sizeof tag, mi);
        memset(idx, 0, sizeof idx);
        for (;;) {
            const char *v[MAXF];
            for (int f = 0; f < sd->nf; f++)
                v[f] = sd->grid[f][idx[f]];
            if (grid_valid(sd, v)) {
                mname base = cell_base(sd, tag, v);
                for (size_t k = 0; k < NCELLM; k++)
                    def_metric(c, &base, cell_metrics[k], NA, 0);
            }
            int f = sd->nf - 1;
            while (f >= 0) {
                if (sd->grid[f][++idx[f]])
                    break;
                idx[f] = 0;
                f--;
            }
            if (f < 0)
                break;
        }
    }
}

static const char *factor_cell(const study_def *sd, int f, const char *v)
{
    if (!strcmp(sd->factor[f], "chunk") && !strcmp(v, "0"))
        return "--";
    return NULL;
}

static int gen_study(ctx *c, const study_def *sd, sbuf *tab)
{
    input *in = &c->in[sd->in];
    char label[64];
    snprintf(label, sizeof label, "tab:%s", sd->name);
    if (!in->present) {
        not_run_table(tab, sd->title, label, in->path);
        def_grid_na(c, sd);
        return 0;
    }
    const qattn_csv *t = &in->t;
    static const char *const req[] = {"model",          "label",           "n",
                                      "cos_mean",       "cos_ci_lo",       "cos_ci_hi",
                                      "cos_worst_head", "cos_worst_layer", "worst_layer",
                                      "rel_l1_mean",    "rel_l1_ci_lo",    "rel_l1_ci_hi",
                                      "rmse_mean"};
    enum { C_MODEL, C_LABEL, C_N, C_COS, C_LO, C_HI, C_WH, C_WL, C_WLI, C_L1, C_L1LO, C_L1HI,
           C_RMSE, C_NREQ };
    int col[C_NREQ], fcol[MAXF];
    int e = need_cols(c, t, req, C_NREQ, col);
    if (e)
        return e;
    for (int f = 0; f < sd->nf; f++) {
        fcol[f] = qattn_csv_col(t, sd->factor[f]);
        if (fcol[f] < 0 && !sd->deflt[f])
            return qattn_csv_need(t, sd->factor[f], &c->err);
    }
    /* parse every number first: a bad field is an input error */
    double *vals = calloc(t->nrows * C_NREQ + 1, sizeof *vals);
    if (!vals)
        return qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
    for (size_t r = 0; r < t->nrows; r++) {
        long n;
        if ((e = qattn_csv_long(t, r, col[C_N], &n, &c->err)))
            goto out;
        vals[r * C_NREQ + C_N] = (double)n;
        for (int k = C_COS; k < C_NREQ; k++)
            if ((e = qattn_csv_num(t, r, col[k], &vals[r * C_NREQ + k], &c->err)))
                goto out;
    }

    sb_printf(tab, "%% generated by qattn paper-tables from %s\n", in->path);
    int first = 1;
    for (size_t mi = 0; mi < c->nmodels; mi++) {
        const char *model = c->models[mi];
        size_t nrows = 0;
        for (size_t r = 0; r < t->nrows; r++)
            nrows += !strcmp(qattn_csv_str(t, r, col[C_MODEL]), model);
        if (!nrows)
            continue;
        char tag[16];
        model_tag(tag, sizeof tag, mi);
        sb_puts(tab, "\\begin{table}[tbp]\n\\centering\\footnotesize\\setlength{\\tabcolsep}{4pt}\n\\caption{");
        sb_puts(tab, sd->title);
        sb_puts(tab, ", model \\texttt{");
        sb_tex(tab, model);
        sb_puts(tab, "}.");
        if (sd->augmented)
            sb_puts(tab, " Augmented real data: the model's real activations with a per-channel "
                         "offset of $r$ channel standard deviations added to K ($r=0$: unmodified).");
        sb_puts(tab, " Cos in percent: mean over the $n$ heads, its 95\\% bootstrap interval, "
                     "the worst head, and the worst layer's mean (layer index); relative L1 "
                     "and RMSE are means over heads.}\n");
        if (first)
            sb_printf(tab, "\\label{%s}", label);
        sb_printf(tab, "\\label{%s-%s}\n", label, tag);
        sb_puts(tab, "\\begin{tabular}{");
        for (int f = 0; f < sd->nf; f++)
            sb_puts(tab, "l");
        sb_puts(tab, "rrcrrrr}\n\\toprule\n");
        for (int f = 0; f < sd->nf; f++)
            sb_printf(tab, "%s & ", sd->head[f]);
        sb_puts(tab, "$n$ & cos (\\%) & 95\\% interval & worst head & worst layer & rel.\\ L1 & "
                     "RMSE \\\\\n\\midrule\n");
        for (size_t r = 0; r < t->nrows; r++) {
            if (strcmp(qattn_csv_str(t, r, col[C_MODEL]), model))
                continue;
            const double *v = &vals[r * C_NREQ];
            const char *fv[MAXF];
            for (int f = 0; f < sd->nf; f++) {
                fv[f] = fcol[f] >= 0 ? qattn_csv_str(t, r, fcol[f]) : sd->deflt[f];
                const char *shown = factor_cell(sd, f, fv[f]);
                if (shown)
                    sb_puts(tab, shown);
                else
                    sb_tex(tab, fv[f]);
                sb_puts(tab, " & ");
            }
            /* decimals for the mean, more (up to 4) if the interval would
             * otherwise print as one number */
            int dec = pct_decimals(&v[C_COS], 1);
            while (dec < 4 && v[C_LO] != v[C_HI] &&
                   !strcmp(f_pct(v[C_LO], dec).s, f_pct(v[C_HI], dec).s))
                dec++;
            num mean = f_pct(v[C_COS], dec), lo = f_pct(v[C_LO], dec), hi = f_pct(v[C_HI], dec);
            num ci = f_ci(lo.s, hi.s), wh = f_pct1(v[C_WH]), wl = f_pct1(v[C_WL]);
            num wli = f_int(v[C_WLI]), nn = f_int(v[C_N]);
            num l1 = f_g3(v[C_L1]), l1lo = f_g3(v[C_L1LO]), l1hi = f_g3(v[C_L1HI]);
            num l1ci = f_ci(l1lo.s, l1hi.s), rmse = f_g3(v[C_RMSE]);
            sb_printf(tab, "%s & %s & %s & %s & %s", nn.s, mean.s, ci.s, wh.s, wl.s);
            if (strcmp(wli.s, NA))
                sb_printf(tab, " (%s)", wli.s);
            sb_printf(tab, " & %s & %s \\\\\n", l1.s, rmse.s);

            mname base = cell_base(sd, tag, fv);
            def_metric(c, &base, "N", nn.s, 1);
            def_metric(c, &base, "CosMean", mean.s, 0);
            def_metric(c, &base, "CosLo", lo.s, 0);
            def_metric(c, &base, "CosHi", hi.s, 0);
            def_metric(c, &base, "CosCi", ci.s, 0);
            def_metric(c, &base, "CosWorstHead", wh.s, 0);
            def_metric(c, &base, "CosWorstLayer", wl.s, 0);
            def_metric(c, &base, "WorstLayer", wli.s, 0);
            def_metric(c, &base, "RelLOneMean", l1.s, 0);
            def_metric(c, &base, "RelLOneCi", l1ci.s, 0);
            def_metric(c, &base, "RmseMean", rmse.s, 0);
        }
        sb_puts(tab, "\\bottomrule\n\\end{tabular}\n\\end{table}\n");
        first = 0;
    }
    def_grid_na(c, sd);
    e = 0;
out:
    free(vals);
    return e;
}

/* ------------------------------------------------------------ models */

static int gen_models(ctx *c, sbuf *tab)
{
    input *in = &c->in[IN_MODELS];
    static const char *const fields[] = {"Name",   "File",      "Layers",    "Heads",
                                         "KvHeads", "Tokens",   "HeadDim",   "EvalLoss",
                                         "VocabSize", "Source", "TextSource", "License"};
    const size_t nfields = sizeof fields / sizeof fields[0];
    sbuf v = {0};
    char name[64];
    snprintf(name, sizeof name, "%zu", c->nmodels);
    def_macro(c, "QAmodelCount", in->present || c->nmodels ? name : NA, 0);
    if (!in->present) {
        not_run_table(tab, "Models and activation files", "tab:models", in->path);
    } else {
        const qattn_csv *t = &in->t;
        static const char *const req[] = {"model",    "file",      "layers",    "heads",
                                          "kv_heads", "tokens",    "head_dim",  "eval_loss",
                                          "vocab_size", "source", "text_source", "license"};
        int col[12];
        int e = need_cols(c, t, req, 12, col);
        if (e) {
            sb_free(&v);
            return e;
        }
        for (size_t r = 0; r < t->nrows; r++) {
            long x;
            double d;
            for (int k = 2; k <= 6; k++)
                if ((e = qattn_csv_long(t, r, col[k], &x, &c->err))) {
                    sb_free(&v);
                    return e;
                }
            if ((e = qattn_csv_num(t, r, col[7], &d, &c->err)) ||
                (e = qattn_csv_num(t, r, col[8], &d, &c->err))) {
                sb_free(&v);
                return e;
            }
        }
        sb_printf(tab, "%% generated by qattn paper-tables from %s\n", in->path);
        sb_puts(tab, "\\begin{table}[tbp]\n\\centering\\footnotesize\n"
                     "\\caption{Models and activation files: layers, query and key/value heads, "
                     "tokens, head dimension, evaluation loss and vocabulary of each trained "
                     "model; where its weights and text come from.}\\label{tab:models}\n"
                     "\\begin{tabular}{lrrrrrrp{5.4cm}}\n\\toprule\n"
                     "model & layers & heads & kv heads & tokens & $d$ & eval loss & source, "
                     "text, license \\\\\n\\midrule\n");
        for (size_t r = 0; r < t->nrows; r++) {
            double loss;
            qattn_csv_num(t, r, col[7], &loss, &c->err);
            num l = f_g3(loss);
            sb_puts(tab, "\\texttt{");
            sb_tex(tab, qattn_csv_str(t, r, col[0]));
            sb_puts(tab, "}");
            for (int k = 2; k <= 6; k++)
                sb_printf(tab, " & %s", qattn_csv_str(t, r, col[k]));
            sb_printf(tab, " & %s & \\raggedright ", l.s);
            sb_tex(tab, qattn_csv_str(t, r, col[9]));
            sb_puts(tab, "; text: ");
            sb_tex(tab, qattn_csv_str(t, r, col[10]));
            sb_puts(tab, "; license: ");
            sb_tex(tab, qattn_csv_str(t, r, col[11]));
            sb_puts(tab, "\\tabularnewline\n");

            size_t mi = model_index(c, qattn_csv_str(t, r, col[0]));
            model_tag(name, sizeof name, mi);
            for (size_t k = 0; k < nfields; k++) {
                mname m = nm_make("QA");
                nm_cat(&m, name);
                nm_cat(&m, fields[k]);
                sb_clear(&v);
                if (k == 7)
                    sb_puts(&v, l.s);
                else
                    sb_tex(&v, qattn_csv_str(t, r, col[k]));
                def_macro(c, m.s, sb_str(&v), 1);
            }
        }
        sb_puts(tab, "\\bottomrule\n\\end{tabular}\n\\end{table}\n");
    }
    /* models named only by the study files still get their name */
    for (size_t mi = 0; mi < c->nmodels; mi++) {
        model_tag(name, sizeof name, mi);
        mname m = nm_make("QA");
        nm_cat(&m, name);
        nm_cat(&m, "Name");
        sb_clear(&v);
        sb_tex(&v, c->models[mi]);
        def_macro(c, m.s, sb_str(&v), 0);
    }
    for (size_t mi = 0; mi < c->ntags; mi++) {
        model_tag(name, sizeof name, mi);
        for (size_t k = 0; k < nfields; k++) {
            mname m = nm_make("QA");
            nm_cat(&m, name);
            nm_cat(&m, fields[k]);
            def_macro(c, m.s, NA, 0);
        }
    }
    int oom = v.oom;
    sb_free(&v);
    return oom ? qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory") : 0;
}

/* ---------------------------------------------------------- outliers */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *const out_metrics[] = {"MaxMeanOverStd", "MaxMeanOverStdLayer",
                                          "MedianMeanOverStd", "MaxKurtosis", "MaxAmaxRatio",
                                          "OutlierChannels", "Channels", "OutlierPercent",
                                          "Layers"};

static int gen_outliers(ctx *c, sbuf *tab)
{
    input *in = &c->in[IN_OUT];
    static const char *const tensors[3] = {"q", "k", "v"};
    static const char *const tnames[3] = {"Q", "K", "V"};
    int e = 0;
    double *vals = NULL, *tmp = NULL;
    if (in->present) {
        const qattn_csv *t = &in->t;
        static const char *const req[] = {"model",         "layer",
                                          "tensor",        "max_mean_over_std",
                                          "median_mean_over_std", "max_kurtosis",
                                          "amax_ratio",    "n_outlier_channels",
                                          "n_channels"};
        enum { O_MODEL, O_LAYER, O_TENSOR, O_MAX, O_MED, O_KURT, O_AMAX, O_NOUT, O_NCH, O_N };
        int col[O_N];
        if ((e = need_cols(c, t, req, O_N, col)))
            return e;
        vals = calloc(t->nrows * O_N + 1, sizeof *vals);
        tmp = calloc(t->nrows + 1, sizeof *tmp);
        if (!vals || !tmp) {
            e = qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t r = 0; r < t->nrows; r++) {
            long x;
            const char *ts = qattn_csv_str(t, r, col[O_TENSOR]);
            if (strcmp(ts, "q") && strcmp(ts, "k") && strcmp(ts, "v")) {
                e = qattn_err_set(&c->err, QATTN_ERR_SCHEMA,
                                  "%s:%zu: column 'tensor': '%s' is not q, k or v", t->path,
                                  t->line[r], ts);
                goto done;
            }
            for (int k = O_LAYER; k < O_N; k++) {
                if (k == O_TENSOR)
                    continue;
                if (k == O_LAYER || k == O_NOUT || k == O_NCH) {
                    if ((e = qattn_csv_long(t, r, col[k], &x, &c->err)))
                        goto done;
                    vals[r * O_N + k] = (double)x;
                } else if ((e = qattn_csv_num(t, r, col[k], &vals[r * O_N + k], &c->err))) {
                    goto done;
                }
            }
        }
        sb_printf(tab, "%% generated by qattn paper-tables from %s\n", in->path);
        int first = 1;
        for (size_t mi = 0; mi < c->nmodels; mi++) {
            const char *model = c->models[mi];
            char tag[16];
            model_tag(tag, sizeof tag, mi);
            /* layers of this model, sorted */
            size_t nl = 0;
            for (size_t r = 0; r < t->nrows; r++)
                if (!strcmp(qattn_csv_str(t, r, col[O_MODEL]), model)) {
                    double l = vals[r * O_N + O_LAYER];
                    int seen = 0;
                    for (size_t i = 0; i < nl; i++)
                        seen |= tmp[i] == l;
                    if (!seen)
                        tmp[nl++] = l;
                }
            if (!nl)
                continue;
            qsort(tmp, nl, sizeof *tmp, cmp_double);
            sb_puts(tab, "\\begin{table}[tbp]\n\\centering\\footnotesize\n\\caption{Channel "
                         "statistics per layer, model \\texttt{");
            sb_tex(tab, model);
            sb_puts(tab, "}: the largest $|\\text{channel mean}|/\\text{std}$ over heads and "
                         "channels, and the number of outlier channels ($|$mean$|$/std $> 3$ or "
                         "max$|x|$ above 6 times the median channel's) out of all channels, "
                         "for Q, K and V; and K's largest channel max$|x|$ over the median "
                         "channel's.}\n");
            if (first)
                sb_puts(tab, "\\label{tab:outliers}");
            sb_printf(tab, "\\label{tab:outliers-%s}\n", tag);
            sb_puts(tab, "\\begin{tabular}{rrrrrrrr}\n\\toprule\n"
                         " & \\multicolumn{2}{c}{Q} & \\multicolumn{2}{c}{K} & "
                         "\\multicolumn{2}{c}{V} & K \\\\\n"
                         "layer & $|m|/s$ & outliers & $|m|/s$ & outliers & $|m|/s$ & outliers & "
                         "amax ratio \\\\\n\\midrule\n");
            for (size_t li = 0; li < nl; li++) {
                sb_printf(tab, "%.0f", tmp[li]);
                double kamax = NAN;
                for (int ti = 0; ti < 3; ti++) {
                    size_t hit = (size_t)-1;
                    for (size_t r = 0; r < t->nrows && hit == (size_t)-1; r++)
                        if (vals[r * O_N + O_LAYER] == tmp[li] &&
                            !strcmp(qattn_csv_str(t, r, col[O_TENSOR]), tensors[ti]) &&
                            !strcmp(qattn_csv_str(t, r, col[O_MODEL]), model))
                            hit = r;
                    if (hit == (size_t)-1) {
                        sb_puts(tab, " & -- & --");
                        continue;
                    }
                    const double *v = &vals[hit * O_N];
                    num m = f_g3(v[O_MAX]);
                    sb_printf(tab, " & %s & %.0f/%.0f", m.s, v[O_NOUT], v[O_NCH]);
                    if (ti == 1)
                        kamax = v[O_AMAX];
                }
                num ka = f_g3(kamax);
                sb_printf(tab, " & %s \\\\\n", ka.s);
            }
            sb_puts(tab, "\\bottomrule\n\\end{tabular}\n\\end{table}\n");
            first = 0;

            /* macros: per tensor, over the model's layers */
            for (int ti = 0; ti < 3; ti++) {
                double mx = NAN, mxl = NAN, kurt = NAN, amax = NAN, nout = 0, nch = 0;
                size_t nmed = 0, nlayers = 0;
                for (size_t r = 0; r < t->nrows; r++) {
                    if (strcmp(qattn_csv_str(t, r, col[O_MODEL]), model) ||
                        strcmp(qattn_csv_str(t, r, col[O_TENSOR]), tensors[ti]))
                        continue;
                    const double *v = &vals[r * O_N];
                    nlayers++;
                    if (isfinite(v[O_MAX]) && !(v[O_MAX] <= mx)) {
                        mx = v[O_MAX];
                        mxl = v[O_LAYER];
                    }
                    if (isfinite(v[O_KURT]) && !(v[O_KURT] <= kurt))
                        kurt = v[O_KURT];
                    if (isfinite(v[O_AMAX]) && !(v[O_AMAX] <= amax))
                        amax = v[O_AMAX];
                    nout += v[O_NOUT];
                    nch += v[O_NCH];
                }
                /* median over layers of the per-layer median |mean|/std */
                double *med = tmp + nl;
                for (size_t r = 0; r < t->nrows && nl + nmed < t->nrows; r++)
                    if (!strcmp(qattn_csv_str(t, r, col[O_MODEL]), model) &&
                        !strcmp(qattn_csv_str(t, r, col[O_TENSOR]), tensors[ti]) &&
                        isfinite(vals[r * O_N + O_MED]))
                        med[nmed++] = vals[r * O_N + O_MED];
                double median = NAN;
                if (nmed) {
                    qsort(med, nmed, sizeof *med, cmp_double);
                    median = nmed % 2 ? med[nmed / 2] : 0.5 * (med[nmed / 2 - 1] + med[nmed / 2]);
                }
                num s[9];
                s[0] = f_g3(mx);
                s[1] = f_int(mxl);
                s[2] = f_g3(median);
                s[3] = f_g3(kurt);
                s[4] = f_g3(amax);
                s[5] = f_int(nlayers ? nout : NAN);
                s[6] = f_int(nlayers ? nch : NAN);
                s[7] = nch > 0 ? f_g3(100.0 * nout / nch) : f_g3(NAN);
                if (nch > 0 && nout == 0)
                    snprintf(s[7].s, sizeof s[7].s, "0");
                s[8] = f_int((double)nlayers);
                mname base = nm_make("QAout");
                nm_cat(&base, tag);
                nm_cat(&base, tnames[ti]);
                for (int k = 0; k < 9; k++)
                    def_metric(c, &base, out_metrics[k], s[k].s, 0);
            }
        }
    } else {
        not_run_table(tab, "Channel statistics", "tab:outliers", in->path);
    }
    for (size_t mi = 0; mi < c->ntags; mi++) {
        char tag[16];
        model_tag(tag, sizeof tag, mi);
        for (int ti = 0; ti < 3; ti++) {
            mname base = nm_make("QAout");
            nm_cat(&base, tag);
            nm_cat(&base, tnames[ti]);
            for (int k = 0; k < 9; k++)
                def_metric(c, &base, out_metrics[k], NA, 0);
        }
    }
done:
    free(vals);
    free(tmp);
    return e;
}

/* ------------------------------------------------------------ pareto */

static int gen_pareto(ctx *c, sbuf *tab)
{
    input *in = &c->in[IN_PARETO];
    char buf[64];
    size_t tot = 0, meas = 0;
    if (in->present) {
        const qattn_csv *t = &in->t;
        static const char *const req[] = {"model",  "label", "cos_mean",   "cos_worst_layer",
                                          "device", "tops",  "tops_source"};
        int col[7], e;
        if ((e = need_cols(c, t, req, 7, col)))
            return e;
        for (size_t r = 0; r < t->nrows; r++) {
            double x;
            for (int k = 2; k <= 5; k++)
                if (k != 4 && (e = qattn_csv_num(t, r, col[k], &x, &c->err)))
                    return e;
        }
        sb_printf(tab, "%% generated by qattn paper-tables from %s\n", in->path);
        sb_puts(tab, "\\begin{table}[tbp]\n\\centering\\footnotesize\n\\caption{Accuracy and "
                     "measured GPU throughput of the schemes that have (or will have) a kernel. "
                     "TOPS is the kernel-only throughput from a committed benchmark file; "
                     "``no GPU measurement yet'' marks schemes without one.}"
                     "\\label{tab:pareto}\n"
                     "\\begin{tabular}{llrrrp{5.4cm}}\n\\toprule\n"
                     "model & scheme & cos (\\%) & worst layer & TOPS & device, source of TOPS "
                     "\\\\\n\\midrule\n");
        sbuf devs = {0};
        for (size_t mi = 0; mi < c->nmodels; mi++) {
            size_t mt = 0, mm = 0;
            for (size_t r = 0; r < t->nrows; r++) {
                if (strcmp(qattn_csv_str(t, r, col[0]), c->models[mi]))
                    continue;
                double cm, cw, tops;
                qattn_csv_num(t, r, col[2], &cm, &c->err);
                qattn_csv_num(t, r, col[3], &cw, &c->err);
                qattn_csv_num(t, r, col[5], &tops, &c->err);
                const char *src = qattn_csv_str(t, r, col[6]);
                int measured = isfinite(tops) && strcmp(src, "none") && src[0];
                mt++;
                mm += measured;
                num a = f_pct1(cm), w = f_pct1(cw), tp = f_g3(tops);
                sb_puts(tab, "\\texttt{");
                sb_tex(tab, c->models[mi]);
                sb_puts(tab, "} & \\texttt{");
                sb_tex(tab, qattn_csv_str(t, r, col[1]));
                sb_printf(tab, "} & %s & %s & ", a.s, w.s);
                if (measured) {
                    const char *dev = qattn_csv_str(t, r, col[4]);
                    sb_printf(tab, "%s & \\raggedright ", tp.s);
                    sb_tex(tab, dev);
                    sb_puts(tab, ", \\texttt{");
                    sb_tex_path(tab, src);
                    sb_puts(tab, "}\\tabularnewline\n");
                    sbuf esc = {0};
                    sb_tex(&esc, dev);
                    if (!devs.p || !strstr(devs.p, sb_str(&esc))) {
                        if (devs.n)
                            sb_puts(&devs, ", ");
                        sb_puts(&devs, sb_str(&esc));
                    }
                    sb_free(&esc);
                } else {
                    sb_puts(tab, "-- & \\raggedright no GPU measurement yet\\tabularnewline\n");
                }
            }
            char tag[16];
            model_tag(tag, sizeof tag, mi);
            mname m = nm_make("QApareto");
            nm_cat(&m, tag);
            snprintf(buf, sizeof buf, "%zu", mt);
            def_metric(c, &m, "Points", buf, 0);
            snprintf(buf, sizeof buf, "%zu", mm);
            def_metric(c, &m, "Measured", buf, 0);
            snprintf(buf, sizeof buf, "%zu", mt - mm);
            def_metric(c, &m, "Unmeasured", buf, 0);
            tot += mt;
            meas += mm;
        }
        sb_puts(tab, "\\bottomrule\n\\end{tabular}\n\\end{table}\n");
        snprintf(buf, sizeof buf, "%zu", tot);
        def_macro(c, "QAparetoPoints", buf, 0);
        snprintf(buf, sizeof buf, "%zu", meas);
        def_macro(c, "QAparetoMeasured", buf, 0);
        snprintf(buf, sizeof buf, "%zu", tot - meas);
        def_macro(c, "QAparetoUnmeasured", buf, 0);
        def_macro(c, "QAparetoDevices", devs.n ? sb_str(&devs) : "none", 0);
        int oom = devs.oom;
        sb_free(&devs);
        if (oom)
            return qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
    } else {
        not_run_table(tab, "Accuracy and throughput", "tab:pareto", in->path);
    }
    def_macro(c, "QAparetoPoints", NA, 0);
    def_macro(c, "QAparetoMeasured", NA, 0);
    def_macro(c, "QAparetoUnmeasured", NA, 0);
    def_macro(c, "QAparetoDevices", NA, 0);
    for (size_t mi = 0; mi < c->ntags; mi++) {
        char tag[16];
        model_tag(tag, sizeof tag, mi);
        mname m = nm_make("QApareto");
        nm_cat(&m, tag);
        def_metric(c, &m, "Points", NA, 0);
        def_metric(c, &m, "Measured", NA, 0);
        def_metric(c, &m, "Unmeasured", NA, 0);
    }
    return 0;
}

/* --------------------------------------------- published numbers */

/* Published values, as printed in the papers (shared/ANCHORS.md):
 * SageAttention, arXiv 2410.02367 (\cite{sageattn}); SageAttention2, arXiv
 * 2411.10958 (\cite{sageattn2}). Cosines in percent. */
typedef struct pubval {
    const char *name; /* macro name after QApub */
    const char *tex;  /* the value as printed */
} pubval;

static const pubval pubs[] = {
    /* SageAttention: Q,K INT8, P,V in E4M3 / E5M2 / INT8 / FP16, average over layers */
    {"SaOnePvEFourMThreeCos", "99.94"},
    {"SaOnePvEFourMThreeRelLOne", "0.0345"},
    {"SaOnePvEFourMThreeRmse", "\\ensuremath{3.53\\times10^{-3}}"},
    {"SaOnePvEFiveMTwoCos", "99.81"},
    {"SaOnePvEFiveMTwoRelLOne", "0.0572"},
    {"SaOnePvEFiveMTwoRmse", "\\ensuremath{6.11\\times10^{-3}}"},
    {"SaOnePvIntEightCos", "99.70"},
    {"SaOnePvIntEightRelLOne", "0.1035"},
    {"SaOnePvIntEightRmse", "\\ensuremath{6.82\\times10^{-3}}"},
    {"SaOnePvEFourMThreeWorst", "76.36"},
    {"SaOnePvEFiveMTwoWorst", "78.98"},
    {"SaOnePvIntEightWorst", "56.40"},
    {"SaOnePvFpSixteenCos", "99.99"},
    /* SageAttention: smoothing K, worst layer, without -> with */
    {"SaOneSmoothTokenWithout", "62.24"},
    {"SaOneSmoothTokenWith", "99.47"},
    {"SaOneSmoothBlockWithout", "30.60"},
    {"SaOneSmoothBlockWith", "99.31"},
    {"SaOneSmoothTensorWithout", "41.40"},
    {"SaOneSmoothTensorWith", "98.06"},
    {"SaOneFaThreeFpEightWorst", "26.76"},
    /* SageAttention: FP16 vs FP32 accumulator for P.V */
    {"SaOneAccFpSixteenCos", "99.98"},
    {"SaOneAccFpSixteenWorst", "99.84"},
    {"SaOneTopsRtx", "341"},
    {"SaOneTopsFaTwoRtx", "165"},
    /* SageAttention2: granularity with INT4 Q,K */
    {"SaTwoGranTokenCos", "99.45"},
    {"SaTwoGranTokenRelLOne", "0.0649"},
    {"SaTwoGranTokenRmse", "0.0335"},
    {"SaTwoGranWarpCos", "99.45"},
    {"SaTwoGranWarpRelLOne", "0.0648"},
    {"SaTwoGranWarpRmse", "0.0334"},
    {"SaTwoGranBlockCos", "98.03"},
    {"SaTwoGranBlockRelLOne", "0.1492"},
    {"SaTwoGranBlockRmse", "0.0744"},
    {"SaTwoGranTensorCos", "97.15"},
    {"SaTwoGranTensorRelLOne", "0.1800"},
    {"SaTwoGranTensorRmse", "0.0865"},
    {"SaTwoGranTokenWorst", "96.76"},
    {"SaTwoGranWarpWorst", "96.71"},
    {"SaTwoGranBlockWorst", "90.68"},
    {"SaTwoGranTensorWorst", "85.85"},
    /* SageAttention2: P,V type with INT4 Q,K */
    {"SaTwoPvIntEightCos", "77.05"},
    {"SaTwoPvEFiveMTwoCos", "99.20"},
    {"SaTwoPvEFourMThreeCos", "99.44"},
    {"SaTwoPvFpSixteenCos", "99.45"},
    /* SageAttention2: smoothing ablation */
    {"SaTwoSmoothNoneCos", "80.04"},
    {"SaTwoSmoothKCos", "98.07"},
    {"SaTwoSmoothQCos", "98.30"},
    {"SaTwoSmoothQKCos", "99.46"},
    {"SaTwoOverheadThread", "0.35"},
    {"SaTwoOverheadSmoothQ", "3.7"},
    {"SaTwoTopsHopper", "900"},
    {"SaTwoTopsFaThreeFpEight", "892"},
    {"SaTwoTopsFaTwoHopper", "339"},
};

static const char *pub(const char *name)
{
    for (size_t i = 0; i < sizeof pubs / sizeof pubs[0]; i++)
        if (!strcmp(pubs[i].name, name))
            return pubs[i].tex;
    return "??";
}

static void def_pubs(ctx *c)
{
    for (size_t i = 0; i < sizeof pubs / sizeof pubs[0]; i++) {
        mname m = nm_make("QApub");
        nm_cat(&m, pubs[i].name);
        def_macro(c, m.s, pubs[i].tex, 0);
    }
}

/* ------------------------------------------------- anchors table */

typedef struct claim_def {
    const char *claim;     /* comparisons.csv claim */
    const char *title;     /* bold heading */
    const char *direction; /* the published direction */
} claim_def;

static const claim_def claims[] = {
    {"smooth_k_helps", "Smoothing K helps", "subtracting K's channel mean raises cos"},
    {"finer_groups_help", "Finer scale groups help", "finer Q/K scale groups raise cos"},
    {"smoothing_qk_helps", "Smoothing Q and K together helps",
     "smoothing both Q and K beats no smoothing and smoothing K alone"},
    {"e4m3_beats_e5m2_pv", "E4M3 beats E5M2 for P and V",
     "E4M3 storage of P and V is more accurate than E5M2"},
    {"e4m3_beats_int8_pv", "E4M3 beats INT8 for P and V",
     "E4M3 storage of P and V is more accurate than INT8"},
    {"two_level_fixes_fp22", "Two-level accumulation removes the FP22 loss",
     "accumulating chunks in FP22 and adding them into FP32 beats plain FP22 and loses nothing "
     "against FP32"},
    {"fp16_acc_ok", "An FP16 accumulator is enough",
     "an FP16 P$\\cdot$V accumulator is indistinguishable from FP32"},
};
#define NCLAIMS (sizeof claims / sizeof claims[0])

static void published_text(sbuf *b, const char *claim)
{
    if (!strcmp(claim, "smooth_k_helps"))
        sb_printf(b,
                  "SageAttention~\\cite{sageattn}, INT8 Q,K, worst layer without $\\to$ with "
                  "smoothing: per-token %s $\\to$ %s\\%%, per-block %s $\\to$ %s\\%%, per-tensor "
                  "%s $\\to$ %s\\%%. SageAttention2~\\cite{sageattn2}, INT4 Q,K: none %s\\%%, "
                  "K only %s\\%%.",
                  pub("SaOneSmoothTokenWithout"), pub("SaOneSmoothTokenWith"),
                  pub("SaOneSmoothBlockWithout"), pub("SaOneSmoothBlockWith"),
                  pub("SaOneSmoothTensorWithout"), pub("SaOneSmoothTensorWith"),
                  pub("SaTwoSmoothNoneCos"), pub("SaTwoSmoothKCos"));
    else if (!strcmp(claim, "smoothing_qk_helps"))
        sb_printf(b,
                  "SageAttention2~\\cite{sageattn2}, INT4 Q,K: no smoothing %s\\%%, K only %s\\%%, "
                  "Q only %s\\%%, Q and K %s\\%%.",
                  pub("SaTwoSmoothNoneCos"), pub("SaTwoSmoothKCos"), pub("SaTwoSmoothQCos"),
                  pub("SaTwoSmoothQKCos"));
    else if (!strcmp(claim, "finer_groups_help"))
        sb_printf(b,
                  "SageAttention2~\\cite{sageattn2}, INT4 Q,K, average (worst layer): per-token "
                  "%s (%s)\\%%, per-warp %s (%s)\\%%, per-block %s (%s)\\%%, per-tensor %s "
                  "(%s)\\%%.",
                  pub("SaTwoGranTokenCos"), pub("SaTwoGranTokenWorst"), pub("SaTwoGranWarpCos"),
                  pub("SaTwoGranWarpWorst"), pub("SaTwoGranBlockCos"), pub("SaTwoGranBlockWorst"),
                  pub("SaTwoGranTensorCos"), pub("SaTwoGranTensorWorst"));
    else if (!strcmp(claim, "e4m3_beats_e5m2_pv"))
        sb_printf(b,
                  "SageAttention~\\cite{sageattn}, INT8 Q,K: E4M3 %s\\%% vs E5M2 %s\\%% on "
                  "average, but %s vs %s\\%% in the worst layer. SageAttention2~\\cite{sageattn2}, "
                  "INT4 Q,K: %s vs %s\\%%.",
                  pub("SaOnePvEFourMThreeCos"), pub("SaOnePvEFiveMTwoCos"),
                  pub("SaOnePvEFourMThreeWorst"), pub("SaOnePvEFiveMTwoWorst"),
                  pub("SaTwoPvEFourMThreeCos"), pub("SaTwoPvEFiveMTwoCos"));
    else if (!strcmp(claim, "e4m3_beats_int8_pv"))
        sb_printf(b,
                  "SageAttention~\\cite{sageattn}, INT8 Q,K: E4M3 %s\\%% vs INT8 %s\\%% on "
                  "average (worst layer %s vs %s\\%%). SageAttention2~\\cite{sageattn2}, INT4 "
                  "Q,K: %s vs %s\\%%.",
                  pub("SaOnePvEFourMThreeCos"), pub("SaOnePvIntEightCos"),
                  pub("SaOnePvEFourMThreeWorst"), pub("SaOnePvIntEightWorst"),
                  pub("SaTwoPvEFourMThreeCos"), pub("SaTwoPvIntEightCos"));
    else if (!strcmp(claim, "two_level_fixes_fp22"))
        sb_puts(b, "SageAttention2~\\cite{sageattn2}: FP8 P$\\cdot$V on Ada and Hopper tensor "
                   "cores accumulates in FP22 (1+8+13 bits); two-level accumulation fixes the "
                   "loss (no accuracy numbers published).");
    else if (!strcmp(claim, "fp16_acc_ok"))
        sb_printf(b,
                  "SageAttention~\\cite{sageattn}: FP16 and FP32 accumulators indistinguishable "
                  "(average %s\\%%, worst layer %s\\%%).",
                  pub("SaOneAccFpSixteenCos"), pub("SaOneAccFpSixteenWorst"));
}

/* What the published finding predicts for one comparison: that one side
 * (0: a, 1: b) is better, or that it loses nothing against the other. */
enum { EXPECT_BETTER, EXPECT_NO_LOSS, EXPECT_NONE };
typedef struct expect {
    int kind, side;
} expect;

static int count_str(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static expect expectation(const char *claim, const char *a, const char *b)
{
    expect e = {EXPECT_NONE, 0};
    if (!strcmp(claim, "two_level_fixes_fp22")) {
        /* the two-level side beats plain fp22, and loses nothing against fp32 */
        int a2 = strstr(a, "fp22+") != NULL, b2 = strstr(b, "fp22+") != NULL;
        if (a2 != b2) {
            const char *other = a2 ? b : a;
            e.side = a2 ? 0 : 1;
            e.kind = strstr(other, "fp22") ? EXPECT_BETTER : EXPECT_NO_LOSS;
        }
        return e;
    }
    if (!strcmp(claim, "fp16_acc_ok")) {
        /* the side with the fp16 accumulator (fewer fp32s) loses nothing */
        int na = count_str(a, "fp32"), nb = count_str(b, "fp32");
        if (na != nb) {
            e.kind = EXPECT_NO_LOSS;
            e.side = na < nb ? 0 : 1;
        }
        return e;
    }
    for (size_t i = 0; i < NCLAIMS; i++)
        if (!strcmp(claims[i].claim, claim))
            e.kind = EXPECT_BETTER; /* a is the side the claim names first */
    return e;
}

enum { V_A, V_B, V_INC };
enum { W_AGREES, W_DISAGREES, W_INCONCLUSIVE, W_NOANCHOR };
static const char *const word_text[] = {"agrees", "disagrees", "inconclusive", "no anchor"};
static const char *const word_cap[] = {"Agrees", "Disagrees", "Inconclusive",
                                       "No published anchor"};

static int agreement(expect e, int verdict)
{
    int winner = verdict == V_A ? 0 : verdict == V_B ? 1 : -1;
    switch (e.kind) {
    case EXPECT_BETTER:
        return winner < 0 ? W_INCONCLUSIVE : winner == e.side ? W_AGREES : W_DISAGREES;
    case EXPECT_NO_LOSS:
        return winner >= 0 && winner != e.side ? W_DISAGREES : W_AGREES;
    default:
        return W_NOANCHOR;
    }
}

/* The generated sentence for one comparison (or several metrics of it with
 * the same outcome), after its word ("Agrees: "); a and b already escaped. */
static void sentence(sbuf *o, expect e, int verdict, int word, const char *a, const char *b,
                     const char *metric)
{
    const char *side = e.side ? b : a, *other = e.side ? a : b;
    int winner = verdict == V_A ? 0 : verdict == V_B ? 1 : -1;
    switch (word) {
    case W_AGREES:
        if (e.kind == EXPECT_BETTER)
            sb_printf(o, "%s is better than %s on %s, as published.", side, other, metric);
        else if (winner < 0)
            sb_printf(o,
                      "no measurable difference between %s and %s on %s (the interval contains "
                      "zero), as published.",
                      side, other, metric);
        else
            sb_printf(o,
                      "%s is not worse than %s on %s (it is measurably better); the published "
                      "finding is that nothing is lost.",
                      side, other, metric);
        break;
    case W_DISAGREES:
        if (e.kind == EXPECT_BETTER)
            sb_printf(o, "%s is better than %s on %s, the opposite of the published finding.",
                      other, side, metric);
        else
            sb_printf(o,
                      "%s is measurably better than %s on %s, where the published finding is "
                      "that %s loses nothing.",
                      other, side, metric, side);
        break;
    case W_INCONCLUSIVE:
        sb_printf(o,
                  "the 95\\%% interval of the difference contains zero, so our data neither "
                  "confirm nor contradict that %s is better than %s on %s.",
                  side, other, metric);
        break;
    default:
        sb_printf(o, "verdict on %s: %s.", metric,
                  verdict == V_A ? "a better" : verdict == V_B ? "b better" : "inconclusive");
    }
}

static void claim_macro(mname *m, const char *prefix, const char *claim)
{
    *m = nm_make(prefix);
    nm_word(m, claim);
}

static const char *const cmp_fields[] = {"A",  "B",  "Metric",  "MeanA", "MeanB",   "Diff",
                                         "Lo", "Hi", "Ci",      "N",     "Verdict", "Word",
                                         "Sentence"};
#define NCMPF (sizeof cmp_fields / sizeof cmp_fields[0])

enum { K_CLAIM, K_STUDY, K_MODEL, K_A, K_B, K_METRIC, K_N, K_MA, K_MB, K_D, K_LO, K_HI,
       K_VERDICT, K_NREQ };

/* one comparison row, formatted */
typedef struct cmp_row {
    size_t r;
    int verdict, word, is_cos;
    expect e;
    num d, lo, hi, ci, ma, mb;
    char metric[64]; /* TeX */
} cmp_row;

static void format_row(const qattn_csv *t, const int *col, const double *vals,
                       const int *verdicts, size_t r, const char *claim, cmp_row *o)
{
    const double *v = &vals[r * K_NREQ];
    const char *metric = qattn_csv_str(t, r, col[K_METRIC]);
    o->r = r;
    o->verdict = verdicts[r];
    o->is_cos = !strcmp(metric, "cos");
    double scale = o->is_cos ? 100.0 : 1.0;
    int dd = diff_decimals(scale * v[K_D], scale * v[K_LO], scale * v[K_HI]);
    o->d = f_signed(scale * v[K_D], dd);
    o->lo = f_signed(scale * v[K_LO], dd);
    o->hi = f_signed(scale * v[K_HI], dd);
    o->ci = f_ci(o->lo.s, o->hi.s);
    o->ma = o->is_cos ? f_pct1(v[K_MA]) : f_g3(v[K_MA]);
    o->mb = o->is_cos ? f_pct1(v[K_MB]) : f_g3(v[K_MB]);
    if (o->is_cos)
        snprintf(o->metric, sizeof o->metric, "cos");
    else if (!strcmp(metric, "rel_l1"))
        snprintf(o->metric, sizeof o->metric, "relative L1");
    else {
        sbuf m = {0};
        sb_tex(&m, metric);
        snprintf(o->metric, sizeof o->metric, "%.60s", sb_str(&m));
        sb_free(&m);
    }
    o->e = expectation(claim, qattn_csv_str(t, r, col[K_A]), qattn_csv_str(t, r, col[K_B]));
    o->word = agreement(o->e, o->verdict);
}

static int gen_anchors(ctx *c, sbuf *tab)
{
    input *in = &c->in[IN_CMP];
    sbuf tmp = {0}, sa = {0}, sbb = {0}, mets = {0};
    int e = 0;
    size_t counts[4] = {0}, rows_total = 0;
    sb_puts(tab, "% generated by qattn paper-tables");
    if (in->present)
        sb_printf(tab, " from %s", in->path);
    static const char *const head =
        "\\toprule\nmodel & ours: $a$ vs $b$ & means of $a$ and $b$; $a-b$ [95\\% interval] "
        "& assessment \\\\\n\\midrule\n";
    sb_puts(tab, "\n{\\footnotesize\\setlength{\\LTcapwidth}{\\linewidth}\n"
                 "\\begin{longtable}{p{2.1cm}p{3.3cm}p{4.5cm}p{4.7cm}}\n"
                 "\\caption{Published findings next to ours. For each finding: the published "
                 "direction and values; then, per model, our paired comparisons on the same "
                 "heads: the means of $a$ and $b$, the mean of $a-b$ over heads with its 95\\% "
                 "paired-bootstrap interval (cos in percentage points), and whether the verdict "
                 "of the interval agrees with the published direction.}\\label{tab:anchors}\\\\\n");
    sb_printf(tab, "%s\\endfirsthead\n%s\\endhead\n\\bottomrule\n\\endfoot\n", head, head);
    const qattn_csv *t = in->present ? &in->t : NULL;
    static const char *const req[] = {"claim",  "study",  "model",  "a",     "b",
                                      "metric", "n",      "mean_a", "mean_b", "mean_diff",
                                      "ci_lo",  "ci_hi",  "verdict"};
    int col[K_NREQ];
    double *vals = NULL;
    int *verdicts = NULL;
    unsigned char *used = NULL;
    cmp_row *grp = NULL;
    if (t) {
        if ((e = need_cols(c, t, req, K_NREQ, col)))
            goto done;
        vals = calloc(t->nrows * K_NREQ + 1, sizeof *vals);
        verdicts = calloc(t->nrows + 1, sizeof *verdicts);
        used = calloc(t->nrows + 1, 1);
        grp = calloc(t->nrows + 1, sizeof *grp);
        if (!vals || !verdicts || !used || !grp) {
            e = qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t r = 0; r < t->nrows; r++) {
            long n;
            if ((e = qattn_csv_long(t, r, col[K_N], &n, &c->err)))
                goto done;
            vals[r * K_NREQ + K_N] = (double)n;
            for (int k = K_MA; k <= K_HI; k++)
                if ((e = qattn_csv_num(t, r, col[k], &vals[r * K_NREQ + k], &c->err)))
                    goto done;
            const char *v = qattn_csv_str(t, r, col[K_VERDICT]);
            if (!strcmp(v, "a better"))
                verdicts[r] = V_A;
            else if (!strcmp(v, "b better"))
                verdicts[r] = V_B;
            else if (!strcmp(v, "inconclusive"))
                verdicts[r] = V_INC;
            else {
                e = qattn_err_set(&c->err, QATTN_ERR_SCHEMA,
                                  "%s:%zu: column 'verdict': '%s' is not 'a better', 'b better' "
                                  "or 'inconclusive'",
                                  t->path, t->line[r], v);
                goto done;
            }
        }
    }

    /* known claims in a fixed order, then any others ("no published anchor") */
    for (size_t ci = 0; ci <= NCLAIMS; ci++) {
        const char *claim = ci < NCLAIMS ? claims[ci].claim : NULL;
        size_t nrows = 0;
        if (t)
            for (size_t r = 0; r < t->nrows; r++)
                if (claim ? !strcmp(qattn_csv_str(t, r, col[K_CLAIM]), claim) : !used[r])
                    nrows++;
        if (!claim && !nrows)
            break;
        if (claim) {
            sb_printf(tab, "\\multicolumn{4}{p{15.6cm}}{\\textbf{%s.} Published: %s. ",
                      claims[ci].title, claims[ci].direction);
            published_text(tab, claim);
            sb_puts(tab, "}\\\\\n");
        } else {
            sb_puts(tab, "\\multicolumn{4}{p{15.6cm}}{\\textbf{Other comparisons} (no published "
                         "anchor).}\\\\\n");
        }
        if (!nrows)
            sb_printf(tab, "\\multicolumn{4}{p{15.6cm}}{\\emph{%s}}\\\\\n",
                      t ? "Not tested: no row for this claim in \\texttt{comparisons.csv}."
                        : "Not run: \\texttt{comparisons.csv} was not found.");
        size_t cw[4] = {0};
        /* per model (table order), rows grouped by (a, b): one table row with
         * every metric of that pair */
        for (size_t mi = 0; t && mi < c->nmodels; mi++) {
            char tag[16];
            model_tag(tag, sizeof tag, mi);
            size_t idx = 0;
            for (size_t r = 0; r < t->nrows; r++) {
                const char *rc = qattn_csv_str(t, r, col[K_CLAIM]);
                if (used[r] || (claim && strcmp(rc, claim)) ||
                    strcmp(qattn_csv_str(t, r, col[K_MODEL]), c->models[mi]))
                    continue;
                const char *a = qattn_csv_str(t, r, col[K_A]), *b = qattn_csv_str(t, r, col[K_B]);
                size_t ng = 0;
                for (size_t r2 = r; r2 < t->nrows; r2++)
                    if (!used[r2] && !strcmp(qattn_csv_str(t, r2, col[K_CLAIM]), rc) &&
                        !strcmp(qattn_csv_str(t, r2, col[K_MODEL]), c->models[mi]) &&
                        !strcmp(qattn_csv_str(t, r2, col[K_A]), a) &&
                        !strcmp(qattn_csv_str(t, r2, col[K_B]), b)) {
                        used[r2] = 1;
                        format_row(t, col, vals, verdicts, r2, rc, &grp[ng++]);
                    }
                sb_clear(&sa);
                sb_clear(&sbb);
                sb_puts(&sa, "\\texttt{");
                sb_tex(&sa, a);
                sb_puts(&sa, "}");
                sb_puts(&sbb, "\\texttt{");
                sb_tex(&sbb, b);
                sb_puts(&sbb, "}");

                /* model, pair */
                sb_puts(tab, "\\raggedright\\texttt{");
                sb_tex_path(tab, c->models[mi]);
                sb_puts(tab, "}");
                if (!strcmp(qattn_csv_str(t, r, col[K_STUDY]), "kbias"))
                    sb_puts(tab, " (augmented real data)");
                sb_printf(tab, " & \\raggedright %s vs %s ($n=%.0f$) & \\raggedright ", sb_str(&sa),
                          sb_str(&sbb), vals[r * K_NREQ + K_N]);
                /* numbers, one line per metric */
                for (size_t g = 0; g < ng; g++) {
                    const cmp_row *w = &grp[g];
                    sb_printf(tab, "%s%s: %s%s vs %s%s; %s %s%s", g ? "\\newline " : "", w->metric,
                              w->ma.s, w->is_cos ? "\\%" : "", w->mb.s, w->is_cos ? "\\%" : "",
                              w->d.s, w->ci.s, w->is_cos ? " pts" : "");
                }
                /* assessment: one sentence when every metric has the same outcome */
                int same = 1;
                for (size_t g = 1; g < ng; g++)
                    same &= grp[g].word == grp[0].word && grp[g].verdict == grp[0].verdict;
                sb_puts(tab, " & \\raggedright ");
                if (same) {
                    sb_clear(&mets);
                    for (size_t g = 0; g < ng; g++)
                        sb_printf(&mets, "%s%s", g == 0 ? "" : g + 1 == ng ? " and " : ", ",
                                  grp[g].metric);
                    sb_clear(&tmp);
                    sentence(&tmp, grp[0].e, grp[0].verdict, grp[0].word, sb_str(&sa), sb_str(&sbb),
                             sb_str(&mets));
                    sb_printf(tab, "\\textbf{%s:} %s", word_cap[grp[0].word], sb_str(&tmp));
                } else {
                    for (size_t g = 0; g < ng; g++) {
                        sb_clear(&tmp);
                        sentence(&tmp, grp[g].e, grp[g].verdict, grp[g].word, sb_str(&sa),
                                 sb_str(&sbb), grp[g].metric);
                        sb_printf(tab, "%s\\textbf{%s:} %s", g ? " " : "", word_cap[grp[g].word],
                                  sb_str(&tmp));
                    }
                }
                sb_puts(tab, "\\tabularnewline\n");

                /* counts and macros, one set per metric row */
                for (size_t g = 0; g < ng; g++) {
                    const cmp_row *w = &grp[g];
                    cw[w->word]++;
                    counts[w->word]++;
                    rows_total++;
                    if (!claim || idx >= sizeof index_words / sizeof index_words[0]) {
                        idx++;
                        continue;
                    }
                    mname base;
                    claim_macro(&base, "QAcmp", claim);
                    nm_cat(&base, tag);
                    nm_cat(&base, index_words[idx++]);
                    char nbuf[32];
                    snprintf(nbuf, sizeof nbuf, "%.0f", vals[w->r * K_NREQ + K_N]);
                    sb_clear(&tmp);
                    sentence(&tmp, w->e, w->verdict, w->word, sb_str(&sa), sb_str(&sbb), w->metric);
                    sb_clear(&mets);
                    sb_printf(&mets, "%s: %s", word_cap[w->word], sb_str(&tmp));
                    const char *vals_f[NCMPF] = {sb_str(&sa), sb_str(&sbb), w->metric, w->ma.s,
                                                 w->mb.s,     w->d.s,      w->lo.s,   w->hi.s,
                                                 w->ci.s,     nbuf,
                                                 qattn_csv_str(t, w->r, col[K_VERDICT]),
                                                 word_text[w->word], sb_str(&mets)};
                    for (size_t k = 0; k < NCMPF; k++)
                        def_metric(c, &base, cmp_fields[k], vals_f[k], k == 0);
                }
            }
        }
        if (claim) {
            /* per-claim summary over all its rows */
            mname w, s2;
            claim_macro(&w, "QAclaim", claim);
            s2 = w;
            nm_cat(&w, "Word");
            nm_cat(&s2, "Summary");
            size_t tot = cw[0] + cw[1] + cw[2];
            sb_clear(&tmp);
            if (!t) {
                def_macro(c, w.s, NA, 0);
                def_macro(c, s2.s, NA, 0);
            } else if (!tot) {
                def_macro(c, w.s, "not tested", 0);
                def_macro(c, s2.s, "not tested", 0);
            } else {
                int all = -1;
                for (int k = 0; k < 3; k++)
                    if (cw[k] == tot)
                        all = k;
                def_macro(c, w.s, all >= 0 ? word_text[all] : "mixed", 0);
                const char *sep = "";
                for (int k = 0; k < 3; k++)
                    if (cw[k]) {
                        sb_printf(&tmp, "%s%s in %zu of %zu comparison%s", sep, word_text[k],
                                  cw[k], tot, tot == 1 ? "" : "s");
                        sep = ", ";
                    }
                def_macro(c, s2.s, sb_str(&tmp), 0);
            }
            /* n/a for the first two rows of the first models */
            for (size_t mi = 0; mi < c->ntags; mi++) {
                char tag[16];
                model_tag(tag, sizeof tag, mi);
                for (int i = 0; i < 2; i++) {
                    mname base;
                    claim_macro(&base, "QAcmp", claim);
                    nm_cat(&base, tag);
                    nm_cat(&base, index_words[i]);
                    for (size_t k = 0; k < NCMPF; k++)
                        def_metric(c, &base, cmp_fields[k], NA, 0);
                }
            }
        }
        sb_puts(tab, "\\midrule\n");
    }
    sb_puts(tab, "\\end{longtable}\n}\n");
    char buf[32];
    static const char *const cnames[] = {"QAanchorsAgree", "QAanchorsDisagree",
                                         "QAanchorsInconclusive", "QAanchorsNoAnchor"};
    for (int k = 0; k < 4; k++) {
        snprintf(buf, sizeof buf, "%zu", counts[k]);
        def_macro(c, cnames[k], t ? buf : NA, 0);
    }
    snprintf(buf, sizeof buf, "%zu", rows_total);
    def_macro(c, "QAanchorsRows", t ? buf : NA, 0);
    if (tmp.oom || sa.oom || sbb.oom || mets.oom)
        e = qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
done:
    free(vals);
    free(verdicts);
    free(used);
    free(grp);
    sb_free(&tmp);
    sb_free(&sa);
    sb_free(&sbb);
    sb_free(&mets);
    return e;
}

/* ------------------------------------------------------------ command */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn paper-tables [--results DIR] [--out DIR]\n"
            "\n"
            "Write the paper's generated LaTeX from the study CSV files (studies/CSV.md) found\n"
            "under --results (default results):\n"
            "  tab_granularity.tex tab_smoothing.tex tab_pv.tex tab_accumulator.tex\n"
            "  tab_kbias.tex tab_outliers.tex tab_models.tex tab_pareto.tex\n"
            "  tab_anchors.tex   our paired comparisons (comparisons.csv) next to the\n"
            "                    published findings, with a generated verdict sentence\n"
            "  numbers.tex       \\newcommand macros for every number the text cites\n"
            "into --out (default paper/generated). A study whose CSV is missing gives a\n"
            "table saying \"not run\" and macros expanding to \"n/a\". A malformed CSV or a\n"
            "missing required column exits with status 2 and writes nothing.\n");
}

enum { OUT_GRAN, OUT_SMOOTH, OUT_PV, OUT_ACC, OUT_KBIAS, OUT_OUT, OUT_MODELS, OUT_PARETO,
       OUT_ANCHORS, OUT_NUMBERS, OUT_N };
static const char *const out_name[OUT_N] = {
    "tab_granularity.tex", "tab_smoothing.tex", "tab_pv.tex",     "tab_accumulator.tex",
    "tab_kbias.tex",       "tab_outliers.tex",  "tab_models.tex", "tab_pareto.tex",
    "tab_anchors.tex",     "numbers.tex"};

static int generate(ctx *c, sbuf *out)
{
    int e;
    sb_puts(&c->numbers, "% generated by qattn paper-tables: macros for every number the "
                         "text cites (do not edit)\n");
    for (size_t i = 0; i < NSTUDIES; i++)
        if ((e = gen_study(c, &studies[i], &out[OUT_GRAN + i])))
            return e;
    if ((e = gen_outliers(c, &out[OUT_OUT])) || (e = gen_models(c, &out[OUT_MODELS])) ||
        (e = gen_pareto(c, &out[OUT_PARETO])) || (e = gen_anchors(c, &out[OUT_ANCHORS])))
        return e;
    def_pubs(c);
    /* which inputs were there */
    sbuf missing = {0};
    for (int i = 0; i < IN_N; i++)
        if (!c->in[i].present) {
            if (missing.n)
                sb_puts(&missing, ", ");
            sb_puts(&missing, "\\texttt{");
            sb_tex_path(&missing, input_rel[i]);
            sb_puts(&missing, "}");
        }
    def_macro(c, "QAinputsMissing", missing.n ? sb_str(&missing) : "none", 0);
    sb_free(&missing);
    sbuf *nb = &out[OUT_NUMBERS];
    sb_puts(nb, sb_str(&c->numbers));
    for (int i = 0; i < OUT_N; i++)
        if (out[i].oom || c->numbers.oom)
            return qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
    return 0;
}

static void ctx_free(ctx *c)
{
    for (int i = 0; i < IN_N; i++)
        qattn_csv_free(&c->in[i].t);
    for (size_t i = 0; i < c->nmodels; i++)
        free(c->models[i]);
    free(c->models);
    for (size_t i = 0; i < c->setcap; i++)
        free(c->set[i]);
    free(c->set);
    sb_free(&c->numbers);
}

int qattn_cmd_paper_tables(int argc, char **argv)
{
    const char *results = "results", *outdir = "paper/generated";
    const qattn_opt opts[] = {
        {"results", QATTN_OPT_STR, &results, NULL, 0, 0},
        {"out", QATTN_OPT_STR, &outdir, NULL, 0, 0},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    if ((prc = qattn_cli_check_out_dir("paper-tables", outdir, out_name, OUT_N)))
        return prc;
    struct stat st;
    if (stat(results, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "qattn paper-tables: %s: not a directory\n", results);
        return QATTN_EXIT_INPUT;
    }

    ctx *c = calloc(1, sizeof *c);
    sbuf out[OUT_N];
    memset(out, 0, sizeof out);
    if (!c) {
        fprintf(stderr, "qattn paper-tables: out of memory\n");
        return QATTN_EXIT_FAIL;
    }
    int rc = QATTN_EXIT_OK, e = 0;
    for (int i = 0; i < IN_N && !e; i++) {
        input *in = &c->in[i];
        snprintf(in->path, sizeof in->path, "%s/%s", results, input_rel[i]);
        if (stat(in->path, &st) != 0 && errno == ENOENT)
            continue;
        e = qattn_csv_load(in->path, &in->t, &c->err);
        if (!e && qattn_csv_need(&in->t, "model", &c->err) < 0)
            e = QATTN_ERR_SCHEMA;
        in->present = !e;
    }
    if (!e)
        e = collect_models(c);
    if (e == QATTN_ERR_NOMEM)
        qattn_err_set(&c->err, e, "out of memory");
    if (!e)
        e = generate(c, out);
    if (e) {
        fprintf(stderr, "qattn paper-tables: %s\n", c->err.msg);
        rc = e == QATTN_ERR_NOMEM ? QATTN_EXIT_FAIL : QATTN_EXIT_INPUT;
        goto done;
    }

    /* everything is in memory: write all temporaries, then rename them */
    if (qattn_cli_mkdirs(outdir) != 0) {
        fprintf(stderr, "qattn paper-tables: %s: %s\n", outdir, strerror(errno));
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    qattn_out files[OUT_N];
    if (qattn_out_open_all(files, outdir, out_name, OUT_N)) {
        fprintf(stderr, "qattn paper-tables: cannot write into %s: %s\n", outdir, strerror(errno));
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    for (int i = 0; i < OUT_N; i++)
        fwrite(sb_str(&out[i]), 1, out[i].n, files[i].f); /* errors: ferror at commit */
    if (qattn_out_commit_all(files, OUT_N)) {
        fprintf(stderr, "qattn paper-tables: cannot write into %s: %s\n", outdir, strerror(errno));
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    int nmissing = 0;
    for (int i = 0; i < IN_N; i++)
        nmissing += !c->in[i].present;
    printf("qattn paper-tables: wrote %d files to %s (%zu model%s", OUT_N, outdir, c->nmodels,
           c->nmodels == 1 ? "" : "s");
    if (nmissing) {
        printf("; not run:");
        for (int i = 0; i < IN_N; i++)
            if (!c->in[i].present)
                printf(" %s", input_rel[i]);
    }
    printf(")\n");
done:
    for (int i = 0; i < OUT_N; i++)
        sb_free(&out[i]);
    ctx_free(c);
    free(c);
    return rc;
}
