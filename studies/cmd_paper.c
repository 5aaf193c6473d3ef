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
 * The tables and their inputs come from the study records (registry.h):
 * tab_<table>.tex for each study with a table, then tab_models.tex and
 * tab_anchors.tex (the claims of every record), and numbers.tex.
 *
 * Macro names (letters only):
 *   \QA<study><Model><factor words><Metric>   a grid study's summary table
 *     study: the record's abbrev (gran, smooth, ...); Model: ModelA, ModelB, ... in the
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
 *   \QApub...  published values (the records' pubs, from docs/ANCHORS.md)
 * Whether a comparison agrees with the published finding is derived from its
 * verdict and the claim's direction (see expectation()), never typed in.
 * Macros for the grid of each study (its record) and for at least three
 * models are always defined, as "n/a" where there is no data. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "paper.h"

/* ------------------------------------------------------------ context */

#define MAXOUT 64 /* output files */

static unsigned long hash_str(const char *s)
{
    unsigned long h = 1469598103UL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211UL;
    return h;
}

/* 1 if name was added, 0 if it was there, -1 out of memory */
static int set_add(qattn_paper *c, const char *name)
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
void qattn_paper_def(qattn_paper *c, const char *name, const char *value, int from_data)
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
    qattn_text_printf(&c->numbers, "\\newcommand{\\%s}{%s}\n", name, value);
}

void qattn_paper_def_metric(qattn_paper *c, const qattn_mname *base, const char *metric, const char *value,
                            int from_data)
{
    qattn_mname m = *base;
    qattn_mname_cat(&m, metric);
    qattn_paper_def(c, m.s, value, from_data);
}

size_t qattn_paper_model_index(const qattn_paper *c, const char *model)
{
    for (size_t i = 0; i < c->nmodels; i++)
        if (!strcmp(c->models[i], model))
            return i;
    return (size_t)-1;
}

static int add_model(qattn_paper *c, const char *model)
{
    if (qattn_paper_model_index(c, model) != (size_t)-1)
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
static int collect_models(qattn_paper *c)
{
    if (c->mod->present) {
        const qattn_csv *t = &c->mod->t;
        int col = qattn_csv_col(t, "model");
        for (size_t r = 0; r < t->nrows; r++)
            if (add_model(c, qattn_csv_str(t, r, col)))
                return QATTN_ERR_NOMEM;
    }
    size_t first_other = c->nmodels;
    for (size_t i = 0; i < c->nin; i++) {
        if (&c->in[i] == c->mod || !c->in[i].present)
            continue;
        const qattn_csv *t = &c->in[i].t;
        int col = qattn_csv_col(t, "model");
        for (size_t r = 0; r < t->nrows; r++)
            if (add_model(c, qattn_csv_str(t, r, col)))
                return QATTN_ERR_NOMEM;
    }
    if (c->nmodels > first_other)
        qsort(c->models + first_other, c->nmodels - first_other, sizeof *c->models, cmp_str);
    /* the paper names three models: the Qwen2 pair and the MQA-512 model (dsv4) */
    c->ntags = c->nmodels > 3 ? c->nmodels : 3;
    return 0;
}

/* look up required columns: cols[i] = index of names[i]; an error names the
 * file and the first missing column */
int qattn_paper_need_cols(qattn_paper *c, const qattn_csv *t, const char *const *names, int n, int *cols)
{
    for (int i = 0; i < n; i++) {
        cols[i] = qattn_csv_need(t, names[i], &c->err);
        if (cols[i] < 0)
            return cols[i];
    }
    return 0;
}

void qattn_paper_not_run(qattn_text *tab, const char *title, const char *label, const char *path)
{
    qattn_text_printf(tab, "%% generated by qattn paper-tables: %s not found\n", path);
    qattn_text_printf(tab, "\\begin{table}[tbp]\n\\centering\n\\caption{%s: not run.}\\label{%s}\n", title,
                      label);
    qattn_text_puts(tab, "\\small Study not run: \\texttt{");
    qattn_text_tex(tab, path);
    qattn_text_puts(tab, "} was not found when the tables were generated.\n\\end{table}\n");
}

/* ------------------------------------------------------------ command */

qattn_paper_input *qattn_paper_in(qattn_paper *c, const qattn_study_rec *r)
{
    for (size_t i = 0; i < c->nin; i++)
        if (c->in[i].rec == r)
            return &c->in[i];
    return NULL;
}

qattn_paper_input *qattn_paper_open(qattn_paper *c, const qattn_study_rec *r, qattn_text *tab, char *label, size_t n)
{
    qattn_paper_input *in = qattn_paper_in(c, r);
    snprintf(label, n, "tab:%s", r->table_name);
    if (in->present)
        return in;
    qattn_paper_not_run(tab, r->title, label, in->path);
    return NULL;
}

/* the output files: tab_<table>.tex of each study with a table, then the
 * paper's own; names[] point into buf; returns their number */
static int out_names(char (*buf)[64], const char **names)
{
    int n = 0;
    for (size_t i = 0; qattn_studies[i] && n < MAXOUT - 3; i++)
        if (qattn_studies[i]->input) {
            snprintf(buf[n], sizeof buf[n], "tab_%s.tex", qattn_studies[i]->table_name);
            names[n] = buf[n];
            n++;
        }
    names[n++] = "tab_models.tex";
    names[n++] = "tab_anchors.tex";
    names[n++] = "numbers.tex";
    return n;
}

static void usage(FILE *f)
{
    char buf[MAXOUT][64];
    const char *names[MAXOUT];
    int n = out_names(buf, names), col = 2;
    fprintf(f,
            "usage: qattn paper-tables [--results DIR] [--out DIR]\n"
            "\n"
            "Write the paper's generated LaTeX from the study CSV files (studies/CSV.md) found\n"
            "under --results (default results):\n"
            " ");
    for (int i = 0; i < n - 2; i++) {
        if (col + 1 + strlen(names[i]) > 80) {
            fprintf(f, "\n ");
            col = 2;
        }
        col += fprintf(f, " %s", names[i]);
    }
    fprintf(f,
            "\n"
            "  tab_anchors.tex   our paired comparisons (comparisons.csv) next to the\n"
            "                    published findings, with a generated verdict sentence\n"
            "  numbers.tex       \\newcommand macros for every number the text cites\n"
            "into --out (default paper/generated). A study whose CSV is missing gives a\n"
            "table saying \"not run\" and macros expanding to \"n/a\". A malformed CSV or a\n"
            "missing required column exits with status 2 and writes nothing. The studies and\n"
            "their tables: qattn studies --list.\n");
}

/* out[0..n-1] in the order of out_names() */
static int generate(qattn_paper *c, qattn_text *out, int n)
{
    int e = 0, k = 0;
    qattn_text_puts(&c->numbers, "% generated by qattn paper-tables: macros for every number the "
                                 "text cites (do not edit)\n");
    for (size_t i = 0; qattn_studies[i] && !e; i++) {
        const qattn_study_rec *r = qattn_studies[i];
        if (r->input)
            e = (r->table ? r->table : qattn_paper_summary_table)(c, r, &out[k++]);
    }
    if (e || (e = qattn_paper_models_table(c, &out[k])) || (e = qattn_paper_anchors_table(c, &out[k + 1])))
        return e;
    qattn_paper_def_pubs(c);
    /* which inputs were there */
    qattn_text missing = {0};
    for (size_t i = 0; i < c->nin; i++)
        if (!c->in[i].present) {
            if (missing.n)
                qattn_text_puts(&missing, ", ");
            qattn_text_puts(&missing, "\\texttt{");
            qattn_text_tex_path(&missing, c->in[i].rel);
            qattn_text_puts(&missing, "}");
        }
    qattn_paper_def(c, "QAinputsMissing", missing.n ? qattn_text_str(&missing) : "none", 0);
    qattn_text_free(&missing);
    qattn_text_puts(&out[n - 1], qattn_text_str(&c->numbers));
    for (int i = 0; i < n; i++)
        if (out[i].oom || c->numbers.oom)
            return qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
    return 0;
}

/* one input per study with a table, in record order, then comparisons.csv
 * and models.csv */
static int inputs_init(qattn_paper *c)
{
    size_t n = 2;
    for (size_t i = 0; qattn_studies[i]; i++)
        n += qattn_studies[i]->input != NULL;
    c->in = calloc(n, sizeof *c->in);
    if (!c->in)
        return QATTN_ERR_NOMEM;
    for (size_t i = 0; qattn_studies[i]; i++)
        if (qattn_studies[i]->input) {
            c->in[c->nin].rec = qattn_studies[i];
            c->in[c->nin++].rel = qattn_studies[i]->input;
        }
    c->cmp = &c->in[c->nin];
    c->in[c->nin++].rel = "comparisons.csv";
    c->mod = &c->in[c->nin];
    c->in[c->nin++].rel = "models.csv";
    return 0;
}

static void ctx_free(qattn_paper *c)
{
    for (size_t i = 0; i < c->nin; i++)
        qattn_csv_free(&c->in[i].t);
    free(c->in);
    for (size_t i = 0; i < c->nmodels; i++)
        free(c->models[i]);
    free(c->models);
    for (size_t i = 0; i < c->setcap; i++)
        free(c->set[i]);
    free(c->set);
    qattn_text_free(&c->numbers);
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
    char namebuf[MAXOUT][64];
    const char *out_name[MAXOUT];
    int nout = out_names(namebuf, out_name);
    if ((prc = qattn_cli_check_out_dir("paper-tables", outdir, out_name, (size_t)nout)))
        return prc;
    struct stat st;
    if (stat(results, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "qattn paper-tables: %s: not a directory\n", results);
        return QATTN_EXIT_INPUT;
    }

    qattn_paper *c = calloc(1, sizeof *c);
    qattn_text out[MAXOUT];
    memset(out, 0, sizeof out);
    if (!c || inputs_init(c)) {
        if (c)
            ctx_free(c);
        free(c);
        fprintf(stderr, "qattn paper-tables: out of memory\n");
        return QATTN_EXIT_FAIL;
    }
    int rc = QATTN_EXIT_OK, e = 0;
    for (size_t i = 0; i < c->nin && !e; i++) {
        qattn_paper_input *in = &c->in[i];
        snprintf(in->path, sizeof in->path, "%s/%s", results, in->rel);
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
        e = generate(c, out, nout);
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
    qattn_out files[MAXOUT];
    if (qattn_out_open_all(files, outdir, out_name, (size_t)nout)) {
        fprintf(stderr, "qattn paper-tables: cannot write into %s: %s\n", outdir, strerror(errno));
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    for (int i = 0; i < nout; i++)
        fwrite(qattn_text_str(&out[i]), 1, out[i].n, files[i].f); /* errors: ferror at commit */
    if (qattn_out_commit_all(files, (size_t)nout)) {
        fprintf(stderr, "qattn paper-tables: cannot write into %s: %s\n", outdir, strerror(errno));
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    int nmissing = 0;
    for (size_t i = 0; i < c->nin; i++)
        nmissing += !c->in[i].present;
    printf("qattn paper-tables: wrote %d files to %s (%zu model%s", nout, outdir, c->nmodels,
           c->nmodels == 1 ? "" : "s");
    if (nmissing) {
        printf("; not run:");
        for (size_t i = 0; i < c->nin; i++)
            if (!c->in[i].present)
                printf(" %s", c->in[i].rel);
    }
    printf(")\n");
done:
    for (int i = 0; i < nout; i++)
        qattn_text_free(&out[i]);
    if (c)
        ctx_free(c);
    free(c);
    return rc;
}
