/* Study engine: see study.h and studies/CSV.md. */
#define _POSIX_C_SOURCE 200809L
#include "study.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "csvread.h"
#include "qattn/attn.h"
#include "qattn/h5io.h"
#include "qattn/metrics.h"
#include "schemelist.h"
#include "select.h"

void qattn_study_add(qattn_study *st, const char *label, const char *factors, const char *spec, double kbias_r)
{
    qattn_cell *cells = realloc(st->cells, (st->ncells + 1) * sizeof *cells);
    if (!cells) {
        fprintf(stderr, "qattn %s: out of memory\n", st->name);
        exit(QATTN_EXIT_FAIL);
    }
    st->cells = cells;
    qattn_cell *c = &cells[st->ncells++];
    memset(c, 0, sizeof *c);
    snprintf(c->label, sizeof c->label, "%s", label);
    snprintf(c->factors, sizeof c->factors, "%s", factors);
    qattn_err err;
    if (qattn_scheme_parse(spec, &c->scheme, &err)) {
        fprintf(stderr, "qattn %s: internal: cell %s: %s\n", st->name, label, err.msg);
        exit(QATTN_EXIT_FAIL);
    }
    qattn_scheme_format(&c->scheme, c->spec, sizeof c->spec);
    c->kbias_r = kbias_r;
}

void qattn_study_free(qattn_study *st)
{
    free(st->cells);
    st->cells = NULL;
    st->ncells = 0;
}

typedef struct study_row {
    size_t model;  /* index into the run's model names */
    size_t layer, head, cell;
    qattn_metrics m;
} study_row;

typedef struct study_run {
    qattn_study *st;     /* grows when a resumed run brings custom cells */
    char (*models)[256]; /* [nmodels] */
    size_t nmodels;
    study_row *rows;
    size_t nrows, cap;
} study_run;

static int add_row(study_run *r, const study_row *row)
{
    if (r->nrows == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 1024;
        study_row *rows = realloc(r->rows, cap * sizeof *rows);
        if (!rows)
            return -1;
        r->rows = rows;
        r->cap = cap;
    }
    r->rows[r->nrows++] = *row;
    return 0;
}

static size_t model_index(study_run *r, const char *name)
{
    for (size_t i = 0; i < r->nmodels; i++)
        if (!strcmp(r->models[i], name))
            return i;
    char(*m)[256] = realloc(r->models, (r->nmodels + 1) * sizeof *m);
    if (!m) {
        fprintf(stderr, "qattn: out of memory\n");
        exit(QATTN_EXIT_FAIL);
    }
    r->models = m;
    snprintf(r->models[r->nmodels], sizeof r->models[0], "%s", name);
    return r->nmodels++;
}

static int have_row(const study_run *r, size_t model, size_t layer, size_t head, size_t cell)
{
    for (size_t i = 0; i < r->nrows; i++) {
        const study_row *w = &r->rows[i];
        if (w->model == model && w->layer == layer && w->head == head && w->cell == cell)
            return 1;
    }
    return 0;
}

/* the factor values of a cell added with --schemes: 'custom' in every factor
 * column (a static buffer, copied by qattn_study_add) */
static const char *custom_factors(const qattn_study *st)
{
    static char factors[160];
    snprintf(factors, sizeof factors, "custom");
    for (const char *p = st->factor_header; *p; p++)
        if (*p == ',')
            strncat(factors, ",custom", sizeof factors - strlen(factors) - 1);
    return factors;
}

static int row_cmp(const void *a, const void *b)
{
    const study_row *x = a, *y = b;
    if (x->model != y->model)
        return x->model < y->model ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->head != y->head)
        return x->head < y->head ? -1 : 1;
    return x->cell < y->cell ? -1 : x->cell > y->cell;
}

/* Load rows of a previous run whose label and spec match a cell of this
 * study; others (a changed grid) are dropped and recomputed. */
static int load_previous(study_run *r, const char *path, qattn_err *err)
{
    if (access(path, F_OK) != 0)
        return QATTN_OK;
    qattn_csv t;
    int rc = qattn_csv_load(path, &t, err);
    if (rc)
        return rc;
    const char *need[] = {"model", "layer", "head", "label", "cos", "rel_l1", "rmse", "max_abs", "row_cos_min", "spec"};
    int col[10];
    for (int i = 0; i < 10; i++)
        if ((col[i] = qattn_csv_col(&t, need[i])) < 0) {
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: no column '%s' (rerun with --force)", path, need[i]);
            qattn_csv_free(&t);
            return rc;
        }
    /* the first factor column tells custom cells (qattn_study_main --schemes) */
    char first[64];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(r->st->factor_header, ","), r->st->factor_header);
    int custom_col = qattn_csv_col(&t, first);
    for (size_t i = 0; i < t.nrows; i++) {
        const char *label = qattn_csv_str(&t, i, col[3]), *spec = qattn_csv_str(&t, i, col[9]);
        size_t c = r->st->ncells;
        for (size_t j = 0; j < r->st->ncells; j++)
            if (!strcmp(r->st->cells[j].label, label) && !strcmp(r->st->cells[j].spec, spec))
                c = j;
        if (c == r->st->ncells && custom_col >= 0 && !strcmp(qattn_csv_str(&t, i, custom_col), "custom")) {
            /* a cell added with --schemes in an earlier run: keep it in the grid */
            qattn_scheme sch;
            qattn_err e2;
            if (!qattn_scheme_parse(spec, &sch, &e2)) {
                qattn_study_add(r->st, label, custom_factors(r->st), spec, 0);
                if (strcmp(r->st->cells[c].spec, spec))
                    c = r->st->ncells; /* stored spec not in normal form: recompute the cell */
            }
        }
        if (c == r->st->ncells)
            continue;
        long layer, head;
        double m[5];
        if ((rc = qattn_csv_long(&t, i, col[1], &layer, err)) || (rc = qattn_csv_long(&t, i, col[2], &head, err)))
            break;
        for (int k = 0; k < 5 && !rc; k++)
            rc = qattn_csv_num(&t, i, col[4 + k], &m[k], err);
        if (rc)
            break;
        if (layer < 0 || head < 0) {
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s:%zu: negative layer or head", path, t.line[i]);
            break;
        }
        study_row w = {model_index(r, qattn_csv_str(&t, i, col[0])), (size_t)layer, (size_t)head, c,
                       {m[0], m[1], m[2], m[3], m[4]}};
        if (add_row(r, &w)) {
            rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory");
            break;
        }
    }
    qattn_csv_free(&t);
    return rc;
}

/* cells.csv keeps 10 significant digits; a fresh metric is rounded to what
 * is written so that the summaries of a fresh run and of a resumed one
 * (which reads cells.csv back) are computed from the same values */
#define CELL_FMT "%.10g"
static double as_stored(double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, CELL_FMT, x);
    return strtod(buf, NULL);
}

/* what a study writes into --out */
static const char *const outputs[3] = {"cells.csv", "summary.csv", "layers.csv"};

static void cells_write(const study_run *r, FILE *f)
{
    fprintf(f, "model,layer,head,label,%s,cos,rel_l1,rmse,max_abs,row_cos_min,spec\n", r->st->factor_header);
    for (size_t i = 0; i < r->nrows; i++) {
        const study_row *w = &r->rows[i];
        const qattn_cell *c = &r->st->cells[w->cell];
        fprintf(f, "%s,%zu,%zu,", r->models[w->model], w->layer, w->head);
        qattn_cli_csv_quote(f, c->label);
        fprintf(f, ",%s," CELL_FMT "," CELL_FMT "," CELL_FMT "," CELL_FMT "," CELL_FMT ",", c->factors, w->m.cos,
                w->m.rel_l1, w->m.rmse, w->m.max_abs, w->m.row_cos_min);
        qattn_cli_csv_quote(f, c->spec);
        fputc('\n', f);
    }
}

/* the checkpoint after each layer: cells.csv alone */
static int write_cells(const study_run *r, const char *dir)
{
    qattn_out o;
    if (qattn_out_open_all(&o, dir, outputs, 1))
        return -1;
    cells_write(r, o.f);
    return qattn_out_commit(&o);
}

/* mean over values, or nan when empty */
static double mean_of(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return n ? s / (double)n : NAN;
}

static void fmt_stat(FILE *f, const double *x, size_t n, size_t nboot, unsigned long seed)
{
    qattn_stats st;
    qattn_err err;
    if (qattn_stats_compute(x, n, nboot, seed, &st, &err))
        fprintf(f, ",nan,nan,nan");
    else
        fprintf(f, ",%.10g,%.10g,%.10g", st.mean, st.ci_lo, st.ci_hi);
}

/* the end of a run: cells.csv, summary.csv and layers.csv, all three
 * complete before any is renamed into place */
static int write_all(const study_run *r, const char *dir, size_t nboot, unsigned long seed)
{
    qattn_out out[3];
    if (qattn_out_open_all(out, dir, outputs, 3))
        return -1;
    cells_write(r, out[0].f);
    FILE *of = out[1].f, *olf = out[2].f;
    fprintf(of, "model,label,%s,n,cos_mean,cos_ci_lo,cos_ci_hi,cos_worst_head,cos_worst_layer,worst_layer,"
                "rel_l1_mean,rel_l1_ci_lo,rel_l1_ci_hi,rel_l1_worst_layer,rmse_mean,rmse_ci_lo,rmse_ci_hi,spec\n",
            r->st->factor_header);
    fprintf(olf, "model,layer,label,%s,cos_mean,rel_l1_mean,rmse_mean\n", r->st->factor_header);
    size_t cap = r->nrows ? r->nrows : 1;
    double *cs = malloc(cap * sizeof *cs), *l1 = malloc(cap * sizeof *l1), *rm = malloc(cap * sizeof *rm);
    size_t *ly = malloc(cap * sizeof *ly);
    double *lc = malloc(cap * sizeof *lc), *ll = malloc(cap * sizeof *ll), *lr = malloc(cap * sizeof *lr);
    int rc = (cs && l1 && rm && ly && lc && ll && lr) ? 0 : -1;
    for (size_t mi = 0; mi < r->nmodels && !rc; mi++) {
        for (size_t ci = 0; ci < r->st->ncells; ci++) {
            const qattn_cell *c = &r->st->cells[ci];
            size_t n = 0;
            double worst_head = INFINITY;
            for (size_t i = 0; i < r->nrows; i++) {
                const study_row *w = &r->rows[i];
                if (w->model != mi || w->cell != ci)
                    continue;
                cs[n] = w->m.cos;
                l1[n] = w->m.rel_l1;
                rm[n] = w->m.rmse;
                ly[n] = w->layer;
                worst_head = fmin(worst_head, w->m.cos);
                n++;
            }
            if (n == 0)
                continue;
            /* per-layer means (rows are sorted by layer) */
            size_t nl = 0, worst = 0;
            for (size_t i = 0; i < n;) {
                size_t j = i;
                while (j < n && ly[j] == ly[i])
                    j++;
                lc[nl] = mean_of(cs + i, j - i);
                ll[nl] = mean_of(l1 + i, j - i);
                lr[nl] = mean_of(rm + i, j - i);
                fprintf(olf, "%s,%zu,", r->models[mi], ly[i]);
                qattn_cli_csv_quote(olf, c->label);
                fprintf(olf, ",%s,%.10g,%.10g,%.10g\n", c->factors, lc[nl], ll[nl], lr[nl]);
                if (lc[nl] < lc[worst])
                    worst = nl;
                ly[nl] = ly[i]; /* safe: nl <= i */
                nl++;
                i = j;
            }
            fprintf(of, "%s,", r->models[mi]);
            qattn_cli_csv_quote(of, c->label);
            fprintf(of, ",%s,%zu", c->factors, n);
            fmt_stat(of, cs, n, nboot, seed);
            fprintf(of, ",%.10g,%.10g,%zu", worst_head, lc[worst], ly[worst]);
            fmt_stat(of, l1, n, nboot, seed);
            fprintf(of, ",%.10g", ll[worst]);
            fmt_stat(of, rm, n, nboot, seed);
            fputc(',', of);
            qattn_cli_csv_quote(of, c->spec);
            fputc('\n', of);
        }
    }
    free(cs);
    free(l1);
    free(rm);
    free(ly);
    free(lc);
    free(ll);
    free(lr);
    if (rc) {
        for (int i = 0; i < 3; i++)
            qattn_out_abort(&out[i]);
        errno = ENOMEM;
        return -1;
    }
    return qattn_out_commit_all(out, 3);
}

/* what a study holds for one file: a layer in float32, the float64
 * reference of its nh selected heads, and each thread's buffers */
static double study_bytes(const qattn_act_meta *mt, size_t nh, int nthreads)
{
    double nd = (double)mt->n * (double)mt->d;
    return (double)(mt->hq + 2 * mt->hkv) * nd * 4 + (double)nh * nd * 8 +
           nthreads * ((2 * nd + (double)mt->d) * 4 + qattn_cli_head_bytes(mt->n, mt->d));
}

/* Everything that can be wrong with file `path`, found before any work: it
 * opens, the selections fit it, the run fits in memory, and every selected
 * layer reads back finite (a NaN in a later layer used to stop a run with
 * the first layer's rows already in cells.csv). Its model name goes to
 * model[size]. Returns 0, or the exit status after one line on stderr. */
static int validate_file(const qattn_study *st, const char *path, const qattn_run_opts *ro, char *model,
                         size_t size)
{
    qattn_act_file f;
    qattn_err err;
    size_t lsel[1024], hsel[1024], nl = 0, nh = 0;
    int rc = qattn_cli_open_selected(st->name, path, ro->layers, ro->heads, &f, lsel, &nl, hsel, &nh);
    if (rc)
        return rc;
    const qattn_act_meta *mt = &f.meta;
    snprintf(model, size, "%s", mt->model);
    rc = qattn_cli_memory_check(st->name, path, study_bytes(mt, nh, omp_get_max_threads()));
    size_t nd = mt->n * mt->d;
    float *q = NULL, *k = NULL, *v = NULL;
    if (!rc && (!(q = malloc(mt->hq * nd * sizeof *q)) || !(k = malloc(mt->hkv * nd * sizeof *k)) ||
                !(v = malloc(mt->hkv * nd * sizeof *v)))) {
        fprintf(stderr, "qattn %s: %s: out of memory for one layer\n", st->name, path);
        rc = QATTN_EXIT_FAIL;
    }
    for (size_t li = 0; li < nl && !rc; li++)
        if (qattn_act_read_layer(&f, lsel[li], q, k, v, &err)) {
            fprintf(stderr, "qattn %s: %s\n", st->name, err.msg);
            rc = QATTN_EXIT_INPUT;
        }
    free(q);
    free(k);
    free(v);
    qattn_act_close(&f);
    return rc;
}

static void usage(const qattn_study *st, FILE *f)
{
    fprintf(f,
            "usage: qattn %s --data F.h5 [--data G.h5 ...] --out DIR [options]\n\n%s\n\n"
            "Writes DIR/cells.csv (one row per model, layer, head and cell), DIR/summary.csv\n"
            "and DIR/layers.csv (studies/CSV.md). Resumable: cells already in DIR/cells.csv with\n"
            "the same label and spec are kept, unless --force.\n\n"
            "  --data F.h5       activation file (repeatable)\n"
            "  --out DIR         output directory\n",
            st->name, st->about);
    qattn_cli_run_opts_usage(f);
    fprintf(f,
            "  --force           recompute every cell\n"
            "  --schemes LIST    add your own schemes to the grid (preset names and/or scheme\n"
            "                    strings, comma-separated as in qattn accuracy); their rows carry\n"
            "                    'custom' in every factor column and the scheme string as label\n"
            "                    (limits: qattn scheme-check --help)\n"
            "  --list            print the grid (label, factors, spec) and exit\n");
    qattn_cli_files_usage(f);
}

int qattn_study_main(qattn_study *st, int argc, char **argv)
{
    const char *data[64], *custom[64];
    size_t ndata = 0, ncustom = 0;
    const char *outdir = NULL;
    qattn_run_opts ro = QATTN_RUN_OPTS_INIT;
    int force = 0, list = 0;
    const qattn_opt opts[] = {
        {"data", QATTN_OPT_LIST, data, &ndata, 0, 64},
        {"out", QATTN_OPT_STR, &outdir, NULL, 0, 0},
        QATTN_RUN_OPTS(&ro),
        {"force", QATTN_OPT_FLAG, &force, NULL, 0, 0},
        {"list", QATTN_OPT_FLAG, &list, NULL, 0, 0},
        {"schemes", QATTN_OPT_LIST, custom, &ncustom, 0, 64},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(st, stdout), QATTN_EXIT_OK) : prc;
    for (size_t ci = 0; ci < ncustom; ci++) {
        qattn_scheme_list sl;
        qattn_err e2;
        if (qattn_scheme_list_parse(custom[ci], &sl, &e2)) {
            fprintf(stderr, "qattn %s: %s\n", st->name, e2.msg);
            return QATTN_EXIT_INPUT;
        }
        for (size_t i = 0; i < sl.n; i++) {
            for (size_t j = 0; j < st->ncells; j++)
                if (!strcmp(st->cells[j].label, sl.items[i].label)) {
                    fprintf(stderr, "qattn %s: scheme '%s' is already in the grid\n", st->name, sl.items[i].label);
                    qattn_scheme_list_free(&sl);
                    return QATTN_EXIT_INPUT;
                }
            qattn_study_add(st, sl.items[i].label, custom_factors(st), sl.items[i].spec, 0);
        }
        qattn_scheme_list_free(&sl);
    }
    if (list) {
        for (size_t i = 0; i < st->ncells; i++)
            printf("%-28s %-24s %s%s\n", st->cells[i].label, st->cells[i].factors, st->cells[i].spec,
                   st->cells[i].kbias_r > 0 ? "  (K augmented)" : "");
        return QATTN_EXIT_OK;
    }
    if (ndata == 0 || !outdir) {
        fprintf(stderr, "qattn %s: --data and --out are required (qattn %s --help)\n", st->name, st->name);
        return QATTN_EXIT_INPUT;
    }
    if ((prc = qattn_cli_check_out_dir(st->name, outdir, outputs, 3)))
        return prc;
    qattn_err err;
    qattn_mask maskopt;
    if (ro.mask && qattn_mask_parse(ro.mask, &maskopt, &err)) {
        fprintf(stderr, "qattn %s: %s\n", st->name, err.msg);
        return QATTN_EXIT_INPUT;
    }
    /* validate every file before any work; rows are keyed by the model
     * attribute, so two files of one model would be merged (the second one
     * silently skipped as already done) */
    qattn_cli_threads_apply(ro.threads);
    char (*names)[256] = malloc(ndata * sizeof *names);
    if (!names) {
        fprintf(stderr, "qattn %s: out of memory\n", st->name);
        return QATTN_EXIT_FAIL;
    }
    for (size_t fi = 0; fi < ndata; fi++) {
        int vrc = validate_file(st, data[fi], &ro, names[fi], sizeof names[fi]);
        if (!vrc)
            vrc = qattn_cli_distinct_model(st->name, data, names, fi);
        if (vrc) {
            free(names);
            return vrc;
        }
    }
    free(names);
    study_run run = {st, NULL, 0, NULL, 0, 0};
    int rc = QATTN_EXIT_FAIL;
    char cells_path[1100];
    snprintf(cells_path, sizeof cells_path, "%s/cells.csv", outdir);
    if (!force && load_previous(&run, cells_path, &err)) {
        fprintf(stderr, "qattn %s: %s\n", st->name, err.msg);
        rc = QATTN_EXIT_INPUT;
        goto out;
    }
    size_t resumed = run.nrows;
    if (qattn_cli_mkdirs(outdir)) {
        fprintf(stderr, "qattn %s: cannot create %s: %s\n", st->name, outdir, strerror(errno));
        rc = QATTN_EXIT_INPUT;
        goto out;
    }
    int nthreads = omp_get_max_threads();
    for (size_t fi = 0; fi < ndata; fi++) {
        qattn_act_file f;
        if (qattn_act_open(data[fi], &f, &err)) {
            fprintf(stderr, "qattn %s: %s\n", st->name, err.msg);
            rc = QATTN_EXIT_INPUT;
            goto out;
        }
        const qattn_act_meta *mt = &f.meta;
        size_t model = model_index(&run, mt->model);
        size_t n = mt->n, d = mt->d, hq = mt->hq, hkv = mt->hkv, lsel[1024], hsel[1024], nl, nh;
        qattn_select_parse(ro.layers, mt->nlayers, lsel, &nl, &err);
        qattn_select_parse(ro.heads, hq, hsel, &nh, &err);
        qattn_mask mask;
        if (ro.mask)
            mask = maskopt;
        else
            qattn_mask_parse(mt->causal ? "causal" : "none", &mask, &err);
        double scale = mt->has_softmax_scale ? mt->softmax_scale : 1.0 / sqrt((double)d);
        float *q = malloc(hq * n * d * sizeof *q), *k = malloc(hkv * n * d * sizeof *k),
              *v = malloc(hkv * n * d * sizeof *v);
        double *ref = malloc(nh * n * d * sizeof *ref);
        float *work = malloc((size_t)nthreads * (2 * n * d + d) * sizeof *work);
        int failed = 0;
        char failmsg[1200] = "";
        if (!q || !k || !v || !ref || !work) {
            snprintf(failmsg, sizeof failmsg, "%s: out of memory", data[fi]);
            failed = 1;
        }
        for (size_t li = 0; li < nl && !failed; li++) {
            size_t todo = 0;
            for (size_t hi = 0; hi < nh; hi++)
                for (size_t ci = 0; ci < st->ncells; ci++)
                    todo += !have_row(&run, model, lsel[li], hsel[hi], ci);
            if (todo == 0)
                continue;
            if (qattn_act_read_layer(&f, lsel[li], q, k, v, &err)) {
                /* read well when validated: the file changed under the run */
                snprintf(failmsg, sizeof failmsg, "%s", err.msg);
                failed = 1;
                rc = QATTN_EXIT_INPUT;
                break;
            }
            qattn_mha a = {q, k, v, hq, hkv, n, n, d, mt->seqlens, mt->nseq};
#pragma omp parallel for schedule(dynamic)
            for (size_t hi = 0; hi < nh; hi++) {
                qattn_head hv;
                qattn_err e2;
                if (failed)
                    continue;
                if (qattn_mha_head(&a, hsel[hi], &hv, &e2) ||
                    qattn_ref_head(&hv, &mask, scale, ref + hi * n * d, NULL, &e2)) {
#pragma omp critical
                    {
                        failed = 1;
                        snprintf(failmsg, sizeof failmsg, "%s layer %zu head %zu: %s", data[fi], lsel[li], hsel[hi],
                                 e2.msg);
                    }
                }
            }
            size_t ntask = nh * st->ncells;
            study_row *fresh = calloc(ntask, sizeof *fresh);
            unsigned char *done = calloc(ntask, 1);
            if (!fresh || !done) {
                failed = 1;
                snprintf(failmsg, sizeof failmsg, "%s: out of memory", data[fi]);
            }
#pragma omp parallel for schedule(dynamic)
            for (size_t t = 0; t < ntask; t++) {
                size_t hi = t / st->ncells, ci = t % st->ncells;
                const qattn_cell *cell = &st->cells[ci];
                if (failed || have_row(&run, model, lsel[li], hsel[hi], ci))
                    continue;
                float *o = work + (size_t)omp_get_thread_num() * (2 * n * d + d);
                float *kaug = o + n * d, *b = kaug + n * d;
                qattn_head hv;
                qattn_err e2;
                int bad = qattn_mha_head(&a, hsel[hi], &hv, &e2);
                if (!bad && cell->kbias_r > 0) {
                    qattn_kbias_offsets(hv.k, n, d, cell->kbias_r, b);
                    for (size_t tt = 0; tt < n; tt++)
                        for (size_t cc = 0; cc < d; cc++)
                            kaug[tt * d + cc] = hv.k[tt * d + cc] + b[cc];
                    hv.k = kaug;
                }
                if (!bad)
                    bad = qattn_emu_head(&cell->scheme, &hv, &mask, scale, o, NULL, &e2);
                if (bad) {
#pragma omp critical
                    {
                        failed = 1;
                        snprintf(failmsg, sizeof failmsg, "%s layer %zu head %zu cell %s: %s", data[fi], lsel[li],
                                 hsel[hi], cell->label, e2.msg);
                    }
                    continue;
                }
                study_row *w = &fresh[t];
                w->model = model;
                w->layer = lsel[li];
                w->head = hsel[hi];
                w->cell = ci;
                qattn_metrics_compute(o, ref + hi * n * d, n, d, &w->m);
                w->m.cos = as_stored(w->m.cos);
                w->m.rel_l1 = as_stored(w->m.rel_l1);
                w->m.rmse = as_stored(w->m.rmse);
                w->m.max_abs = as_stored(w->m.max_abs);
                w->m.row_cos_min = as_stored(w->m.row_cos_min);
                done[t] = 1;
            }
            for (size_t t = 0; t < ntask && !failed; t++)
                if (done[t] && add_row(&run, &fresh[t])) {
                    failed = 1;
                    snprintf(failmsg, sizeof failmsg, "%s: out of memory", data[fi]);
                }
            free(fresh);
            free(done);
            if (!failed) {
                /* checkpoint: an interrupted run resumes after this layer */
                qsort(run.rows, run.nrows, sizeof *run.rows, row_cmp);
                if (write_cells(&run, outdir)) {
                    failed = 1;
                    snprintf(failmsg, sizeof failmsg, "cannot write %s: %s", cells_path, strerror(errno));
                }
            }
            fprintf(stderr, "qattn %s: %s layer %zu done (%zu/%zu)\n", st->name, mt->model, lsel[li], li + 1, nl);
        }
        free(q);
        free(k);
        free(v);
        free(ref);
        free(work);
        qattn_act_close(&f);
        if (failed) {
            fprintf(stderr, "qattn %s: %s\n", st->name, failmsg);
            goto out;
        }
    }
    qsort(run.rows, run.nrows, sizeof *run.rows, row_cmp);
    if (write_all(&run, outdir, (size_t)ro.boot, (unsigned long)ro.seed)) {
        fprintf(stderr, "qattn %s: cannot write into %s: %s\n", st->name, outdir, strerror(errno));
        goto out;
    }
    fprintf(stderr, "qattn %s: %zu cells (%zu reused) in %s\n", st->name, run.nrows, resumed, outdir);
    rc = QATTN_EXIT_OK;
out:
    free(run.rows);
    free(run.models);
    return rc;
}
