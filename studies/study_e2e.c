/* qattn e2e: the end-to-end study's table. The held-out losses come from a
 * GPU run (data/e2e_loss.py, committed as LOSS/<device>/e2e_loss.csv); this
 * joins them with each scheme's per-layer accuracy on the shipped
 * activations (the pareto-cells study) and measures, per model, how well
 * 1 - cos orders the loss changes (Spearman's rank correlation). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "csvread.h"

enum { E2E_MAXROWS = 4096, E2E_MAXDIRS = 64 };

static const char *const loss_cols[] = {"device",   "date",     "model",    "scheme", "loss", "loss_lo",
                                        "loss_hi",  "delta",    "delta_lo", "delta_hi", "kbias", NULL};
enum { L_DEVICE, L_DATE, L_MODEL, L_SCHEME, L_LOSS, L_LO, L_HI, L_DELTA, L_DLO, L_DHI, L_KBIAS, L_N };

typedef struct e2e_row {
    const qattn_csv *t; /* the file it came from */
    size_t r;
    int col[L_N];
    double one_minus_cos; /* NaN: no cell of that scheme */
} e2e_row;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* ranks 1..n of x (ties: their mean rank) */
static void ranks(const double *x, size_t n, double *rk)
{
    for (size_t i = 0; i < n; i++) {
        double below = 0, equal = 0;
        for (size_t j = 0; j < n; j++) {
            below += x[j] < x[i];
            equal += x[j] == x[i];
        }
        rk[i] = below + (equal + 1) / 2;
    }
}

/* Spearman's rho: Pearson's correlation of the ranks; NaN below 3 points */
static double spearman(const double *x, const double *y, size_t n)
{
    if (n < 3)
        return NAN;
    double *rx = malloc(2 * n * sizeof *rx);
    if (!rx)
        return NAN;
    double *ry = rx + n, mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    ranks(x, n, rx);
    ranks(y, n, ry);
    for (size_t i = 0; i < n; i++) {
        mx += rx[i] / (double)n;
        my += ry[i] / (double)n;
    }
    for (size_t i = 0; i < n; i++) {
        sxy += (rx[i] - mx) * (ry[i] - my);
        sxx += (rx[i] - mx) * (rx[i] - mx);
        syy += (ry[i] - my) * (ry[i] - my);
    }
    free(rx);
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

/* the device folders of dir holding e2e_loss.csv, sorted */
static int loss_files(const char *dir, char (*paths)[1100], size_t *n)
{
    *n = 0;
    DIR *dd = opendir(dir);
    if (!dd)
        return 0; /* nothing committed yet */
    char *names[E2E_MAXDIRS];
    size_t nn = 0;
    struct dirent *de;
    while ((de = readdir(dd)) && nn < E2E_MAXDIRS) {
        char p[1100];
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s/e2e_loss.csv", dir, de->d_name);
        if (access(p, F_OK) == 0 && (names[nn] = strdup(de->d_name)))
            nn++;
    }
    closedir(dd);
    qsort(names, nn, sizeof *names, cmp_str);
    for (size_t i = 0; i < nn; i++) {
        snprintf(paths[(*n)++], 1100, "%s/%s/e2e_loss.csv", dir, names[i]);
        free(names[i]);
    }
    return 0;
}

typedef struct e2e_out {
    const qattn_csv *s; /* the cells file */
    int sm;             /* its model column */
    const e2e_row *rows;
    size_t nrows;
} e2e_out;

/* summary.csv and corr.csv */
static int write_outputs(FILE *const *f, void *ctx)
{
    const e2e_out *w = ctx;
    FILE *fs = f[0], *fc = f[1];
    fprintf(fs, "model,scheme,device,date,kbias,loss,loss_lo,loss_hi,delta,delta_lo,delta_hi,one_minus_cos\n");
    fprintf(fc, "model,n,spearman\n");
    /* the models of the cells file, in its order */
    for (size_t i = 0; i < w->s->nrows; i++) {
        const char *model = qattn_csv_str(w->s, i, w->sm);
        size_t k = 0;
        while (k < i && strcmp(qattn_csv_str(w->s, k, w->sm), model))
            k++;
        if (k < i)
            continue;
        double x[E2E_MAXROWS], y[E2E_MAXROWS];
        size_t n = 0, nm = 0;
        for (size_t j = 0; j < w->nrows; j++) {
            const e2e_row *e = &w->rows[j];
            if (strcmp(qattn_csv_str(e->t, e->r, e->col[L_MODEL]), model))
                continue;
            nm++;
            fprintf(fs, "%s,", model);
            qattn_cli_csv_quote(fs, qattn_csv_str(e->t, e->r, e->col[L_SCHEME]));
            fputc(',', fs);
            qattn_cli_csv_quote(fs, qattn_csv_str(e->t, e->r, e->col[L_DEVICE]));
            fprintf(fs, ",%s,%s", qattn_csv_str(e->t, e->r, e->col[L_DATE]), qattn_csv_str(e->t, e->r, e->col[L_KBIAS]));
            for (int c = L_LOSS; c <= L_DHI; c++)
                fprintf(fs, ",%s", qattn_csv_str(e->t, e->r, e->col[c]));
            if (isfinite(e->one_minus_cos))
                fprintf(fs, ",%.6g\n", e->one_minus_cos);
            else
                fputs(",\n", fs);
            double kb, d;
            qattn_err err;
            qattn_csv_num(e->t, e->r, e->col[L_KBIAS], &kb, &err);
            qattn_csv_num(e->t, e->r, e->col[L_DELTA], &d, &err);
            if (kb == 0 && isfinite(e->one_minus_cos) && strcmp(qattn_csv_str(e->t, e->r, e->col[L_SCHEME]), "none")) {
                x[n] = e->one_minus_cos;
                y[n++] = d;
            }
        }
        if (!nm)
            continue;
        double rho = spearman(x, y, n);
        fprintf(fc, "%s,%zu,", model, n);
        if (isfinite(rho))
            fprintf(fc, "%.4f\n", rho);
        else
            fputs("\n", fc);
    }
    return 0;
}

static void usage(void)
{
    printf("usage: qattn e2e --cells FILE --loss DIR --out DIR [--data FILE ...]\n\n"
           "The end-to-end study's table: the held-out loss of the trained models with each scheme,\n"
           "measured on a GPU by data/e2e_loss.py (`bash data/gpu_run.sh e2e`) and committed as\n"
           "DIR/<device>/e2e_loss.csv, next to the scheme's 1 - cos on the shipped activations (FILE:\n"
           "the pareto-cells study's summary.csv). Of several files with the same model and scheme\n"
           "the newest date wins. Keeps the models of FILE; --data (what qattn studies --run passes)\n"
           "is not read. Writes OUT/summary.csv (model, scheme, device, date, kbias, loss and its\n"
           "95%% interval, delta from the unquantized model and its paired interval, one_minus_cos)\n"
           "and OUT/corr.csv (per model: the Spearman rank correlation of one_minus_cos with delta\n"
           "over the schemes that have both, K-bias rows left out).\n");
}

int qattn_cmd_e2e(int argc, char **argv)
{
    const char *cells = NULL, *lossdir = NULL, *outdir = NULL, *data[64];
    size_t ndata = 0;
    const qattn_opt opts[] = {
        {"cells", QATTN_OPT_STR, &cells, NULL, 0, 0},  {"loss", QATTN_OPT_STR, &lossdir, NULL, 0, 0},
        {"out", QATTN_OPT_STR, &outdir, NULL, 0, 0},   {"data", QATTN_OPT_LIST, data, &ndata, 0, 64},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc == QATTN_CLI_HELP)
        usage();
    if (prc)
        return prc == QATTN_CLI_HELP ? QATTN_EXIT_OK : prc;
    if (!cells || !lossdir || !outdir) {
        fprintf(stderr, "qattn e2e: --cells, --loss and --out are required\n");
        return QATTN_EXIT_INPUT;
    }
    static const char *const outs[2] = {"summary.csv", "corr.csv"};
    if ((prc = qattn_cli_check_out_dir("e2e", outdir, outs, 2)))
        return prc;
    qattn_err err;
    qattn_csv s, lt[E2E_MAXDIRS];
    char(*paths)[1100] = calloc(E2E_MAXDIRS, sizeof *paths);
    e2e_row *rows = calloc(E2E_MAXROWS, sizeof *rows);
    size_t npaths = 0, nloaded = 0, nrows = 0;
    int rc = QATTN_EXIT_INPUT, have_s = 0;
    if (!paths || !rows) {
        fprintf(stderr, "qattn e2e: out of memory\n");
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    if (qattn_csv_load(cells, &s, &err)) {
        fprintf(stderr, "qattn e2e: %s\n", err.msg);
        goto done;
    }
    have_s = 1;
    int sm = qattn_csv_need(&s, "model", &err), sl = qattn_csv_need(&s, "label", &err),
        sc = qattn_csv_need(&s, "cos_mean", &err);
    if (sm < 0 || sl < 0 || sc < 0) {
        fprintf(stderr, "qattn e2e: %s\n", err.msg);
        goto done;
    }
    loss_files(lossdir, paths, &npaths);
    for (size_t f = 0; f < npaths; f++) {
        if (qattn_csv_load(paths[f], &lt[f], &err)) {
            fprintf(stderr, "qattn e2e: %s\n", err.msg);
            goto done;
        }
        nloaded++;
        int col[L_N];
        for (int k = 0; k < L_N; k++)
            if ((col[k] = qattn_csv_need(&lt[f], loss_cols[k], &err)) < 0) {
                fprintf(stderr, "qattn e2e: %s\n", err.msg);
                goto done;
            }
        for (size_t r = 0; r < lt[f].nrows; r++) {
            double v;
            for (int k = L_LOSS; k < L_N; k++) {
                if (qattn_csv_num(&lt[f], r, col[k], &v, &err)) {
                    fprintf(stderr, "qattn e2e: %s\n", err.msg);
                    goto done;
                }
                if (!isfinite(v)) {
                    fprintf(stderr, "qattn e2e: %s: row %zu: %s is not a finite number\n", paths[f], r + 2,
                            loss_cols[k]);
                    goto done;
                }
            }
            const char *model = qattn_csv_str(&lt[f], r, col[L_MODEL]),
                       *scheme = qattn_csv_str(&lt[f], r, col[L_SCHEME]),
                       *date = qattn_csv_str(&lt[f], r, col[L_DATE]);
            size_t j = 0; /* the same model and scheme from an earlier file: the newer date wins */
            while (j < nrows && (strcmp(qattn_csv_str(rows[j].t, rows[j].r, rows[j].col[L_MODEL]), model) ||
                                 strcmp(qattn_csv_str(rows[j].t, rows[j].r, rows[j].col[L_SCHEME]), scheme)))
                j++;
            if (j < nrows && strcmp(date, qattn_csv_str(rows[j].t, rows[j].r, rows[j].col[L_DATE])) <= 0)
                continue;
            if (j == nrows && nrows == E2E_MAXROWS) {
                fprintf(stderr, "qattn e2e: more than %d rows in %s\n", E2E_MAXROWS, lossdir);
                goto done;
            }
            rows[j].t = &lt[f];
            rows[j].r = r;
            memcpy(rows[j].col, col, sizeof col);
            rows[j].one_minus_cos = NAN;
            for (size_t i = 0; i < s.nrows; i++) {
                double cm;
                if (!strcmp(qattn_csv_str(&s, i, sm), model) && !strcmp(qattn_csv_str(&s, i, sl), scheme) &&
                    !qattn_csv_num(&s, i, sc, &cm, &err))
                    rows[j].one_minus_cos = 1.0 - cm;
            }
            nrows += j == nrows;
        }
    }
    e2e_out w = {&s, sm, rows, nrows};
    if (!(rc = qattn_cli_write_outputs("e2e", outdir, outs, 2, write_outputs, &w)))
        fprintf(stderr, "qattn e2e: %zu loss rows from %zu file(s) -> %s\n", nrows, npaths, outdir);
done:
    for (size_t f = 0; f < nloaded; f++)
        qattn_csv_free(&lt[f]);
    if (have_s)
        qattn_csv_free(&s);
    free(paths);
    free(rows);
    return rc;
}
