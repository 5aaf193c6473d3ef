/* qattn paper-tables: the study tables (one per emulation study, from its
 * summary.csv), and those of the models, the channel outliers and the
 * accuracy-throughput points. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paper.h"

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
_Static_assert(NSTUDIES == QATTN_PAPER_NSTUDIES, "paper.h: QATTN_PAPER_NSTUDIES");

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

static qattn_mname cell_base(const study_def *sd, const char *tag, const char *const *v)
{
    qattn_mname m = qattn_mname_make("QA");
    qattn_mname_cat(&m, sd->abbrev);
    qattn_mname_cat(&m, tag);
    for (int i = 0; i < sd->nf; i++) {
        qattn_mname_cat(&m, sd->tag[i]);
        qattn_mname_word(&m, v[i]);
    }
    return m;
}

static const char *const cell_metrics[] = {"N",           "CosMean",       "CosLo",
                                           "CosHi",       "CosCi",         "CosWorstHead",
                                           "CosWorstLayer", "WorstLayer",  "RelLOneMean",
                                           "RelLOneCi",   "RmseMean"};
#define NCELLM (sizeof cell_metrics / sizeof cell_metrics[0])

static void def_grid_na(qattn_paper *c, const study_def *sd)
{
    size_t idx[MAXF] = {0};
    for (size_t mi = 0; mi < c->ntags; mi++) {
        char tag[16];
        qattn_mname_model(tag, sizeof tag, mi);
        memset(idx, 0, sizeof idx);
        for (;;) {
            const char *v[MAXF];
            for (int f = 0; f < sd->nf; f++)
                v[f] = sd->grid[f][idx[f]];
            if (grid_valid(sd, v)) {
                qattn_mname base = cell_base(sd, tag, v);
                for (size_t k = 0; k < NCELLM; k++)
                    qattn_paper_def_metric(c, &base, cell_metrics[k], QATTN_PAPER_NA, 0);
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

static int study_table(qattn_paper *c, const study_def *sd, qattn_text *tab)
{
    qattn_paper_input *in = &c->in[sd->in];
    char label[64];
    snprintf(label, sizeof label, "tab:%s", sd->name);
    if (!in->present) {
        qattn_paper_not_run(tab, sd->title, label, in->path);
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
    int e = qattn_paper_need_cols(c, t, req, C_NREQ, col);
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

    qattn_text_printf(tab, "%% generated by qattn paper-tables from %s\n", in->path);
    int first = 1;
    for (size_t mi = 0; mi < c->nmodels; mi++) {
        const char *model = c->models[mi];
        size_t nrows = 0;
        for (size_t r = 0; r < t->nrows; r++)
            nrows += !strcmp(qattn_csv_str(t, r, col[C_MODEL]), model);
        if (!nrows)
            continue;
        char tag[16];
        qattn_mname_model(tag, sizeof tag, mi);
        qattn_text_puts(tab, "\\begin{table}[tbp]\n\\centering\\footnotesize\\setlength{\\tabcolsep}{4pt}\n\\caption{");
        qattn_text_puts(tab, sd->title);
        qattn_text_puts(tab, ", model \\texttt{");
        qattn_text_tex(tab, model);
        qattn_text_puts(tab, "}.");
        if (sd->augmented)
            qattn_text_puts(tab, " Augmented real data: the model's real activations with a per-channel "
                                 "offset of $r$ channel standard deviations added to K ($r=0$: unmodified).");
        qattn_text_puts(tab, " Cos in percent: mean over the $n$ heads, its 95\\% bootstrap interval, "
                             "the worst head, and the worst layer's mean (layer index); relative L1 "
                             "and RMSE are means over heads.}\n");
        if (first)
            qattn_text_printf(tab, "\\label{%s}", label);
        qattn_text_printf(tab, "\\label{%s-%s}\n", label, tag);
        qattn_text_puts(tab, "\\begin{tabular}{");
        for (int f = 0; f < sd->nf; f++)
            qattn_text_puts(tab, "l");
        qattn_text_puts(tab, "rrcrrrr}\n\\toprule\n");
        for (int f = 0; f < sd->nf; f++)
            qattn_text_printf(tab, "%s & ", sd->head[f]);
        qattn_text_puts(tab, "$n$ & cos (\\%) & 95\\% interval & worst head & worst layer & rel.\\ L1 & "
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
                    qattn_text_puts(tab, shown);
                else
                    qattn_text_tex(tab, fv[f]);
                qattn_text_puts(tab, " & ");
            }
            /* decimals for the mean, more (up to 4) if the interval would
             * otherwise print as one number */
            int dec = qattn_num_pct_decimals(&v[C_COS], 1);
            while (dec < 4 && v[C_LO] != v[C_HI] &&
                   !strcmp(qattn_num_pct(v[C_LO], dec).s, qattn_num_pct(v[C_HI], dec).s))
                dec++;
            qattn_num mean = qattn_num_pct(v[C_COS], dec), lo = qattn_num_pct(v[C_LO], dec),
                      hi = qattn_num_pct(v[C_HI], dec);
            qattn_num ci = qattn_num_ci(lo.s, hi.s), wh = qattn_num_pct1(v[C_WH]), wl = qattn_num_pct1(v[C_WL]);
            qattn_num wli = qattn_num_int(v[C_WLI]), nn = qattn_num_int(v[C_N]);
            qattn_num l1 = qattn_num_g3(v[C_L1]), l1lo = qattn_num_g3(v[C_L1LO]), l1hi = qattn_num_g3(v[C_L1HI]);
            qattn_num l1ci = qattn_num_ci(l1lo.s, l1hi.s), rmse = qattn_num_g3(v[C_RMSE]);
            qattn_text_printf(tab, "%s & %s & %s & %s & %s", nn.s, mean.s, ci.s, wh.s, wl.s);
            if (strcmp(wli.s, QATTN_PAPER_NA))
                qattn_text_printf(tab, " (%s)", wli.s);
            qattn_text_printf(tab, " & %s & %s \\\\\n", l1.s, rmse.s);

            qattn_mname base = cell_base(sd, tag, fv);
            qattn_paper_def_metric(c, &base, "N", nn.s, 1);
            qattn_paper_def_metric(c, &base, "CosMean", mean.s, 0);
            qattn_paper_def_metric(c, &base, "CosLo", lo.s, 0);
            qattn_paper_def_metric(c, &base, "CosHi", hi.s, 0);
            qattn_paper_def_metric(c, &base, "CosCi", ci.s, 0);
            qattn_paper_def_metric(c, &base, "CosWorstHead", wh.s, 0);
            qattn_paper_def_metric(c, &base, "CosWorstLayer", wl.s, 0);
            qattn_paper_def_metric(c, &base, "WorstLayer", wli.s, 0);
            qattn_paper_def_metric(c, &base, "RelLOneMean", l1.s, 0);
            qattn_paper_def_metric(c, &base, "RelLOneCi", l1ci.s, 0);
            qattn_paper_def_metric(c, &base, "RmseMean", rmse.s, 0);
        }
        qattn_text_puts(tab, "\\bottomrule\n\\end{tabular}\n\\end{table}\n");
        first = 0;
    }
    def_grid_na(c, sd);
    e = 0;
out:
    free(vals);
    return e;
}


int qattn_paper_study_tables(qattn_paper *c, qattn_text *tab)
{
    int e = 0;
    for (size_t i = 0; i < NSTUDIES && !e; i++)
        e = study_table(c, &studies[i], &tab[i]);
    return e;
}

/* ------------------------------------------------------------ models */

int qattn_paper_models_table(qattn_paper *c, qattn_text *tab)
{
    qattn_paper_input *in = &c->in[IN_MODELS];
    static const char *const fields[] = {"Name",   "File",      "Layers",    "Heads",
                                         "KvHeads", "Tokens",   "HeadDim",   "EvalLoss",
                                         "VocabSize", "Source", "TextSource", "License"};
    const size_t nfields = sizeof fields / sizeof fields[0];
    qattn_text v = {0};
    char name[64];
    snprintf(name, sizeof name, "%zu", c->nmodels);
    qattn_paper_def(c, "QAmodelCount", in->present || c->nmodels ? name : QATTN_PAPER_NA, 0);
    if (!in->present) {
        qattn_paper_not_run(tab, "Models and activation files", "tab:models", in->path);
    } else {
        const qattn_csv *t = &in->t;
        static const char *const req[] = {"model",    "file",      "layers",    "heads",
                                          "kv_heads", "tokens",    "head_dim",  "eval_loss",
                                          "vocab_size", "source", "text_source", "license"};
        int col[12];
        int e = qattn_paper_need_cols(c, t, req, 12, col);
        if (e) {
            qattn_text_free(&v);
            return e;
        }
        for (size_t r = 0; r < t->nrows; r++) {
            long x;
            double d;
            for (int k = 2; k <= 6; k++)
                if ((e = qattn_csv_long(t, r, col[k], &x, &c->err))) {
                    qattn_text_free(&v);
                    return e;
                }
            if ((e = qattn_csv_num(t, r, col[7], &d, &c->err)) ||
                (e = qattn_csv_num(t, r, col[8], &d, &c->err))) {
                qattn_text_free(&v);
                return e;
            }
        }
        qattn_text_printf(tab, "%% generated by qattn paper-tables from %s\n", in->path);
        qattn_text_puts(tab, "\\begin{table}[tbp]\n\\centering\\footnotesize\n"
                             "\\caption{Models and activation files: layers, query and key/value heads, "
                             "tokens, head dimension, evaluation loss and vocabulary of each trained "
                             "model; where its weights and text come from.}\\label{tab:models}\n"
                             "\\begin{tabular}{lrrrrrrp{5.4cm}}\n\\toprule\n"
                             "model & layers & heads & kv heads & tokens & $d$ & eval loss & source, "
                             "text, license \\\\\n\\midrule\n");
        for (size_t r = 0; r < t->nrows; r++) {
            double loss;
            qattn_csv_num(t, r, col[7], &loss, &c->err);
            qattn_num l = qattn_num_g3(loss);
            qattn_text_puts(tab, "\\texttt{");
            qattn_text_tex(tab, qattn_csv_str(t, r, col[0]));
            qattn_text_puts(tab, "}");
            for (int k = 2; k <= 6; k++)
                qattn_text_printf(tab, " & %s", qattn_csv_str(t, r, col[k]));
            qattn_text_printf(tab, " & %s & \\raggedright ", l.s);
            qattn_text_tex(tab, qattn_csv_str(t, r, col[9]));
            qattn_text_puts(tab, "; text: ");
            qattn_text_tex(tab, qattn_csv_str(t, r, col[10]));
            qattn_text_puts(tab, "; license: ");
            qattn_text_tex(tab, qattn_csv_str(t, r, col[11]));
            qattn_text_puts(tab, "\\tabularnewline\n");

            size_t mi = qattn_paper_model_index(c, qattn_csv_str(t, r, col[0]));
            qattn_mname_model(name, sizeof name, mi);
            for (size_t k = 0; k < nfields; k++) {
                qattn_mname m = qattn_mname_make("QA");
                qattn_mname_cat(&m, name);
                qattn_mname_cat(&m, fields[k]);
                qattn_text_clear(&v);
                if (k == 7)
                    qattn_text_puts(&v, l.s);
                else
                    qattn_text_tex(&v, qattn_csv_str(t, r, col[k]));
                qattn_paper_def(c, m.s, qattn_text_str(&v), 1);
            }
        }
        qattn_text_puts(tab, "\\bottomrule\n\\end{tabular}\n\\end{table}\n");
    }
    /* models named only by the study files still get their name */
    for (size_t mi = 0; mi < c->nmodels; mi++) {
        qattn_mname_model(name, sizeof name, mi);
        qattn_mname m = qattn_mname_make("QA");
        qattn_mname_cat(&m, name);
        qattn_mname_cat(&m, "Name");
        qattn_text_clear(&v);
        qattn_text_tex(&v, c->models[mi]);
        qattn_paper_def(c, m.s, qattn_text_str(&v), 0);
    }
    for (size_t mi = 0; mi < c->ntags; mi++) {
        qattn_mname_model(name, sizeof name, mi);
        for (size_t k = 0; k < nfields; k++) {
            qattn_mname m = qattn_mname_make("QA");
            qattn_mname_cat(&m, name);
            qattn_mname_cat(&m, fields[k]);
            qattn_paper_def(c, m.s, QATTN_PAPER_NA, 0);
        }
    }
    int oom = v.oom;
    qattn_text_free(&v);
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

int qattn_paper_outliers_table(qattn_paper *c, qattn_text *tab)
{
    qattn_paper_input *in = &c->in[IN_OUT];
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
        if ((e = qattn_paper_need_cols(c, t, req, O_N, col)))
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
        qattn_text_printf(tab, "%% generated by qattn paper-tables from %s\n", in->path);
        int first = 1;
        for (size_t mi = 0; mi < c->nmodels; mi++) {
            const char *model = c->models[mi];
            char tag[16];
            qattn_mname_model(tag, sizeof tag, mi);
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
            qattn_text_puts(tab, "\\begin{table}[tbp]\n\\centering\\footnotesize\n\\caption{Channel "
                                 "statistics per layer, model \\texttt{");
            qattn_text_tex(tab, model);
            qattn_text_puts(tab, "}: the largest $|\\text{channel mean}|/\\text{std}$ over heads and "
                                 "channels, and the number of outlier channels ($|$mean$|$/std $> 3$ or "
                                 "max$|x|$ above 6 times the median channel's) out of all channels, "
                                 "for Q, K and V; and K's largest channel max$|x|$ over the median "
                                 "channel's.}\n");
            if (first)
                qattn_text_puts(tab, "\\label{tab:outliers}");
            qattn_text_printf(tab, "\\label{tab:outliers-%s}\n", tag);
            qattn_text_puts(tab, "\\begin{tabular}{rrrrrrrr}\n\\toprule\n"
                                 " & \\multicolumn{2}{c}{Q} & \\multicolumn{2}{c}{K} & "
                                 "\\multicolumn{2}{c}{V} & K \\\\\n"
                                 "layer & $|m|/s$ & outliers & $|m|/s$ & outliers & $|m|/s$ & outliers & "
                                 "amax ratio \\\\\n\\midrule\n");
            for (size_t li = 0; li < nl; li++) {
                qattn_text_printf(tab, "%.0f", tmp[li]);
                double kamax = NAN;
                for (int ti = 0; ti < 3; ti++) {
                    size_t hit = (size_t)-1;
                    for (size_t r = 0; r < t->nrows && hit == (size_t)-1; r++)
                        if (vals[r * O_N + O_LAYER] == tmp[li] &&
                            !strcmp(qattn_csv_str(t, r, col[O_TENSOR]), tensors[ti]) &&
                            !strcmp(qattn_csv_str(t, r, col[O_MODEL]), model))
                            hit = r;
                    if (hit == (size_t)-1) {
                        qattn_text_puts(tab, " & -- & --");
                        continue;
                    }
                    const double *v = &vals[hit * O_N];
                    qattn_num m = qattn_num_g3(v[O_MAX]);
                    qattn_text_printf(tab, " & %s & %.0f/%.0f", m.s, v[O_NOUT], v[O_NCH]);
                    if (ti == 1)
                        kamax = v[O_AMAX];
                }
                qattn_num ka = qattn_num_g3(kamax);
                qattn_text_printf(tab, " & %s \\\\\n", ka.s);
            }
            qattn_text_puts(tab, "\\bottomrule\n\\end{tabular}\n\\end{table}\n");
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
                qattn_num s[9];
                s[0] = qattn_num_g3(mx);
                s[1] = qattn_num_int(mxl);
                s[2] = qattn_num_g3(median);
                s[3] = qattn_num_g3(kurt);
                s[4] = qattn_num_g3(amax);
                s[5] = qattn_num_int(nlayers ? nout : NAN);
                s[6] = qattn_num_int(nlayers ? nch : NAN);
                s[7] = nch > 0 ? qattn_num_g3(100.0 * nout / nch) : qattn_num_g3(NAN);
                if (nch > 0 && nout == 0)
                    snprintf(s[7].s, sizeof s[7].s, "0");
                s[8] = qattn_num_int((double)nlayers);
                qattn_mname base = qattn_mname_make("QAout");
                qattn_mname_cat(&base, tag);
                qattn_mname_cat(&base, tnames[ti]);
                for (int k = 0; k < 9; k++)
                    qattn_paper_def_metric(c, &base, out_metrics[k], s[k].s, 0);
            }
        }
    } else {
        qattn_paper_not_run(tab, "Channel statistics", "tab:outliers", in->path);
    }
    for (size_t mi = 0; mi < c->ntags; mi++) {
        char tag[16];
        qattn_mname_model(tag, sizeof tag, mi);
        for (int ti = 0; ti < 3; ti++) {
            qattn_mname base = qattn_mname_make("QAout");
            qattn_mname_cat(&base, tag);
            qattn_mname_cat(&base, tnames[ti]);
            for (int k = 0; k < 9; k++)
                qattn_paper_def_metric(c, &base, out_metrics[k], QATTN_PAPER_NA, 0);
        }
    }
done:
    free(vals);
    free(tmp);
    return e;
}


/* ------------------------------------------------------------ pareto */

int qattn_paper_pareto_table(qattn_paper *c, qattn_text *tab)
{
    qattn_paper_input *in = &c->in[IN_PARETO];
    char buf[64];
    size_t tot = 0, meas = 0;
    if (in->present) {
        const qattn_csv *t = &in->t;
        static const char *const req[] = {"model",  "label", "cos_mean",   "cos_worst_layer",
                                          "device", "tops",  "tops_source"};
        int col[7], e;
        if ((e = qattn_paper_need_cols(c, t, req, 7, col)))
            return e;
        for (size_t r = 0; r < t->nrows; r++) {
            double x;
            for (int k = 2; k <= 5; k++)
                if (k != 4 && (e = qattn_csv_num(t, r, col[k], &x, &c->err)))
                    return e;
        }
        qattn_text_printf(tab, "%% generated by qattn paper-tables from %s\n", in->path);
        qattn_text_puts(tab, "\\begin{table}[tbp]\n\\centering\\footnotesize\n\\caption{Accuracy and "
                             "measured GPU throughput of the schemes that have (or will have) a kernel. "
                             "TOPS is the kernel-only throughput from a committed benchmark file; "
                             "``no GPU measurement yet'' marks schemes without one.}"
                             "\\label{tab:pareto}\n"
                             "\\begin{tabular}{llrrrp{5.4cm}}\n\\toprule\n"
                             "model & scheme & cos (\\%) & worst layer & TOPS & device, source of TOPS "
                             "\\\\\n\\midrule\n");
        qattn_text devs = {0};
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
                qattn_num a = qattn_num_pct1(cm), w = qattn_num_pct1(cw), tp = qattn_num_g3(tops);
                qattn_text_puts(tab, "\\texttt{");
                qattn_text_tex(tab, c->models[mi]);
                qattn_text_puts(tab, "} & \\texttt{");
                qattn_text_tex(tab, qattn_csv_str(t, r, col[1]));
                qattn_text_printf(tab, "} & %s & %s & ", a.s, w.s);
                if (measured) {
                    const char *dev = qattn_csv_str(t, r, col[4]);
                    qattn_text_printf(tab, "%s & \\raggedright ", tp.s);
                    qattn_text_tex(tab, dev);
                    qattn_text_puts(tab, ", \\texttt{");
                    qattn_text_tex_path(tab, src);
                    qattn_text_puts(tab, "}\\tabularnewline\n");
                    qattn_text esc = {0};
                    qattn_text_tex(&esc, dev);
                    if (!devs.p || !strstr(devs.p, qattn_text_str(&esc))) {
                        if (devs.n)
                            qattn_text_puts(&devs, ", ");
                        qattn_text_puts(&devs, qattn_text_str(&esc));
                    }
                    qattn_text_free(&esc);
                } else {
                    qattn_text_puts(tab, "-- & \\raggedright no GPU measurement yet\\tabularnewline\n");
                }
            }
            char tag[16];
            qattn_mname_model(tag, sizeof tag, mi);
            qattn_mname m = qattn_mname_make("QApareto");
            qattn_mname_cat(&m, tag);
            snprintf(buf, sizeof buf, "%zu", mt);
            qattn_paper_def_metric(c, &m, "Points", buf, 0);
            snprintf(buf, sizeof buf, "%zu", mm);
            qattn_paper_def_metric(c, &m, "Measured", buf, 0);
            snprintf(buf, sizeof buf, "%zu", mt - mm);
            qattn_paper_def_metric(c, &m, "Unmeasured", buf, 0);
            tot += mt;
            meas += mm;
        }
        qattn_text_puts(tab, "\\bottomrule\n\\end{tabular}\n\\end{table}\n");
        snprintf(buf, sizeof buf, "%zu", tot);
        qattn_paper_def(c, "QAparetoPoints", buf, 0);
        snprintf(buf, sizeof buf, "%zu", meas);
        qattn_paper_def(c, "QAparetoMeasured", buf, 0);
        snprintf(buf, sizeof buf, "%zu", tot - meas);
        qattn_paper_def(c, "QAparetoUnmeasured", buf, 0);
        qattn_paper_def(c, "QAparetoDevices", devs.n ? qattn_text_str(&devs) : "none", 0);
        int oom = devs.oom;
        qattn_text_free(&devs);
        if (oom)
            return qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
    } else {
        qattn_paper_not_run(tab, "Accuracy and throughput", "tab:pareto", in->path);
    }
    qattn_paper_def(c, "QAparetoPoints", QATTN_PAPER_NA, 0);
    qattn_paper_def(c, "QAparetoMeasured", QATTN_PAPER_NA, 0);
    qattn_paper_def(c, "QAparetoUnmeasured", QATTN_PAPER_NA, 0);
    qattn_paper_def(c, "QAparetoDevices", QATTN_PAPER_NA, 0);
    for (size_t mi = 0; mi < c->ntags; mi++) {
        char tag[16];
        qattn_mname_model(tag, sizeof tag, mi);
        qattn_mname m = qattn_mname_make("QApareto");
        qattn_mname_cat(&m, tag);
        qattn_paper_def_metric(c, &m, "Points", QATTN_PAPER_NA, 0);
        qattn_paper_def_metric(c, &m, "Measured", QATTN_PAPER_NA, 0);
        qattn_paper_def_metric(c, &m, "Unmeasured", QATTN_PAPER_NA, 0);
    }
    return 0;
}

