/* qattn entropy: how peaked the float64 attention rows of each head are
 * (entropy in nats, and divided by ln of the keys a row sees), joined with
 * the pv study's accuracy of the same head with e4m3 and with int8 P and V:
 * which heads favour which P.V format. Contracts: studies/CSV.md. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "cli.h"
#include "commands.h"
#include "csvread.h"
#include "qattn/attn.h"
#include "qattn/h5io.h"
#include "select.h"

/* int8 P with the static scale 1/127 stores p < pmax / 254 as 0 (the
 * emulation scales against the running maximum of the row, at most pmax) */
#define ZERO_FRAC (1.0 / 254)

typedef struct head_row {
    size_t model, layer, head, kv_head, rows;
    double entropy, entropy_norm, pmax, zero_mass;
} head_row;

/* the pv study's cos of one head per qk_fmt x pv_fmt */
enum { PV_FP16, PV_E4M3, PV_INT8, PV_N };
static const char *const pv_fmts[PV_N] = {"fp16", "e4m3", "int8"};

typedef struct pv_cells {
    qattn_csv t;
    int model, layer, head, qk, pv, cos;
    char qk_fmts[8][32]; /* the Q.K formats, in order of first appearance */
    size_t nqk;
} pv_cells;

static int pv_load(const char *path, pv_cells *p, qattn_err *err)
{
    memset(p, 0, sizeof *p);
    int rc = qattn_csv_load(path, &p->t, err);
    if (rc)
        return rc;
    if ((p->model = qattn_csv_need(&p->t, "model", err)) < 0 || (p->layer = qattn_csv_need(&p->t, "layer", err)) < 0 ||
        (p->head = qattn_csv_need(&p->t, "head", err)) < 0 || (p->qk = qattn_csv_need(&p->t, "qk_fmt", err)) < 0 ||
        (p->pv = qattn_csv_need(&p->t, "pv_fmt", err)) < 0 || (p->cos = qattn_csv_need(&p->t, "cos", err)) < 0)
        return QATTN_ERR_SCHEMA;
    for (size_t r = 0; r < p->t.nrows; r++) {
        long x;
        double c;
        if ((rc = qattn_csv_long(&p->t, r, p->layer, &x, err)) || (rc = qattn_csv_long(&p->t, r, p->head, &x, err)) ||
            (rc = qattn_csv_num(&p->t, r, p->cos, &c, err)))
            return rc;
        const char *qk = qattn_csv_str(&p->t, r, p->qk);
        int seen = !strcmp(qk, "custom");
        for (size_t i = 0; i < p->nqk && !seen; i++)
            seen = !strcmp(p->qk_fmts[i], qk);
        if (!seen && p->nqk < 8)
            snprintf(p->qk_fmts[p->nqk++], sizeof p->qk_fmts[0], "%s", qk);
    }
    return QATTN_OK;
}

/* cos of (model, layer, head, qk, pv), or NaN */
static double pv_cos(const pv_cells *p, const char *model, size_t layer, size_t head, const char *qk, const char *pv)
{
    char l[32], h[32];
    snprintf(l, sizeof l, "%zu", layer);
    snprintf(h, sizeof h, "%zu", head);
    for (size_t r = 0; r < p->t.nrows; r++)
        if (!strcmp(qattn_csv_str(&p->t, r, p->layer), l) && !strcmp(qattn_csv_str(&p->t, r, p->head), h) &&
            !strcmp(qattn_csv_str(&p->t, r, p->pv), pv) && !strcmp(qattn_csv_str(&p->t, r, p->qk), qk) &&
            !strcmp(qattn_csv_str(&p->t, r, p->model), model)) {
            double c;
            qattn_err e;
            qattn_csv_num(&p->t, r, p->cos, &c, &e);
            return c;
        }
    return NAN;
}

/* one head of the layer: its rows described (w [4 n] scratch) */
static int head_stats(const qattn_mha *a, size_t h, const qattn_mask *m, double scale, double *w, head_row *o,
                      qattn_err *err)
{
    size_t n = a->sq;
    qattn_head hv;
    qattn_ref_rows rs = {w, w + n, w + 2 * n, (size_t *)(w + 3 * n), ZERO_FRAC};
    int rc = qattn_mha_head(a, h, &hv, err);
    if (!rc)
        rc = qattn_ref_head_rows(&hv, m, scale, &rs, err);
    if (rc)
        return rc;
    double se = 0, sn = 0, sp = 0, sz = 0;
    size_t rows = 0, rows2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (rs.nkeys[i] == 0)
            continue;
        rows++;
        se += rs.entropy[i];
        sp += rs.pmax[i];
        sz += rs.tail[i];
        if (rs.nkeys[i] > 1) {
            rows2++;
            sn += rs.entropy[i] / log((double)rs.nkeys[i]);
        }
    }
    o->head = h;
    o->kv_head = h / (a->hq / a->hkv);
    o->rows = rows;
    o->entropy = rows ? se / (double)rows : NAN;
    o->pmax = rows ? sp / (double)rows : NAN;
    o->zero_mass = rows ? sz / (double)rows : NAN;
    o->entropy_norm = rows2 ? sn / (double)rows2 : NAN;
    return QATTN_OK;
}

/* Spearman's rho of x and y [n] and its percentile-bootstrap 95% interval
 * over the n pairs (fixed seed); NaN below 3 pairs */
static void spearman(const double *x, const double *y, size_t n, size_t nboot, unsigned long seed, double *rho,
                     double *lo, double *hi)
{
    *rho = *lo = *hi = NAN;
    if (n < 3)
        return;
    double *w = malloc(2 * n * sizeof *w), *bx = malloc(n * sizeof *bx), *by = malloc(n * sizeof *by);
    double *bs = malloc((nboot + 1) * sizeof *bs);
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    if (w && bx && by && bs && g) {
        *rho = gsl_stats_spearman(x, 1, y, 1, n, w);
        gsl_rng_set(g, seed);
        size_t nb = 0;
        for (size_t b = 0; b < nboot; b++) {
            for (size_t i = 0; i < n; i++) {
                size_t k = gsl_rng_uniform_int(g, n);
                bx[i] = x[k];
                by[i] = y[k];
            }
            double r = gsl_stats_spearman(bx, 1, by, 1, n, w);
            if (isfinite(r))
                bs[nb++] = r;
        }
        if (nb) {
            gsl_sort(bs, 1, nb);
            *lo = gsl_stats_quantile_from_sorted_data(bs, 1, nb, 0.025);
            *hi = gsl_stats_quantile_from_sorted_data(bs, 1, nb, 0.975);
        }
    }
    free(w);
    free(bx);
    free(by);
    free(bs);
    if (g)
        gsl_rng_free(g);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn entropy --data F.h5 [--data G.h5 ...] --out DIR --pv CELLS.csv [options]\n\n"
            "How peaked the attention of each head is: the float64 softmax of every query row, its\n"
            "entropy in nats (mean over rows), the same divided by ln of the keys the row sees\n"
            "(0: one key takes all, 1: uniform), the largest p, and the mass of the p below\n"
            "pmax/254 that int8 P with a static scale stores as 0. Joined with the pv study's\n"
            "cells (CELLS.csv: results/pv/cells.csv) of the same heads: cos with P and V in fp16,\n"
            "e4m3 and int8 per Q.K format, and which of e4m3 and int8 is better there. Writes\n"
            "DIR/heads.csv, DIR/pv.csv and DIR/summary.csv (studies/CSV.md).\n\n"
            "  --data F.h5       activation file (repeatable)\n"
            "  --out DIR         output directory\n"
            "  --pv CELLS.csv    the pv study's cells.csv\n");
    qattn_cli_run_opts_usage(f);
    qattn_cli_files_usage(f);
}

/* the heads of every file and selected layer; models[] their names */
static int run_files(const char *const *data, size_t ndata, const qattn_run_opts *ro, head_row **out, size_t *nout,
                     char (*models)[256])
{
    qattn_err err;
    qattn_mask maskopt;
    if (ro->mask && qattn_mask_parse(ro->mask, &maskopt, &err)) {
        fprintf(stderr, "qattn entropy: %s\n", err.msg);
        return QATTN_EXIT_INPUT;
    }
    /* every file and selection checked before any work */
    for (size_t fi = 0; fi < ndata; fi++) {
        qattn_act_file f;
        size_t lsel[1024], hsel[1024], nl, nh;
        int rc = qattn_cli_open_selected("entropy", data[fi], ro->layers, ro->heads, &f, lsel, &nl, hsel, &nh);
        if (rc)
            return rc;
        const qattn_act_meta *mt = &f.meta;
        snprintf(models[fi], 256, "%s", mt->model);
        double nd = (double)mt->n * (double)mt->d;
        rc = qattn_cli_memory_check("entropy", data[fi],
                                    (double)(mt->hq + 2 * mt->hkv) * nd * 4 +
                                        omp_get_max_threads() * ((double)mt->n * 32 + 2 * nd * 8));
        if (!rc)
            rc = qattn_cli_distinct_model("entropy", data, models, fi);
        qattn_act_close(&f);
        if (rc)
            return rc;
    }
    qattn_cli_threads_apply(ro->threads);
    int nthreads = omp_get_max_threads();
    for (size_t fi = 0; fi < ndata; fi++) {
        qattn_act_file f;
        if (qattn_act_open(data[fi], &f, &err)) {
            fprintf(stderr, "qattn entropy: %s\n", err.msg);
            return QATTN_EXIT_INPUT;
        }
        const qattn_act_meta *mt = &f.meta;
        size_t n = mt->n, d = mt->d, lsel[1024], hsel[1024], nl, nh;
        qattn_select_parse(ro->layers, mt->nlayers, lsel, &nl, &err);
        qattn_select_parse(ro->heads, mt->hq, hsel, &nh, &err);
        qattn_mask mask = maskopt;
        if (!ro->mask)
            qattn_mask_parse(mt->causal ? "causal" : "none", &mask, &err);
        double scale = mt->has_softmax_scale ? mt->softmax_scale : 1.0 / sqrt((double)d);
        float *q = malloc(mt->hq * n * d * sizeof *q), *k = malloc(mt->hkv * n * d * sizeof *k),
              *v = malloc(mt->hkv * n * d * sizeof *v);
        double *w = malloc((size_t)nthreads * 4 * n * sizeof *w);
        head_row *rows = realloc(*out, (*nout + nl * nh) * sizeof *rows);
        int rc = !q || !k || !v || !w || !rows ? QATTN_EXIT_FAIL : 0;
        if (rows)
            *out = rows;
        if (rc)
            fprintf(stderr, "qattn entropy: %s: out of memory\n", data[fi]);
        for (size_t li = 0; li < nl && !rc; li++) {
            if (qattn_act_read_layer(&f, lsel[li], q, k, v, &err)) {
                fprintf(stderr, "qattn entropy: %s\n", err.msg);
                rc = QATTN_EXIT_INPUT;
                break;
            }
            qattn_mha a = {q, k, v, mt->hq, mt->hkv, n, n, d, mt->seqlens, mt->nseq};
            head_row *lr = rows + *nout + li * nh;
            char failmsg[600] = "";
#pragma omp parallel for schedule(dynamic)
            for (size_t hi = 0; hi < nh; hi++) {
                qattn_err e2;
                lr[hi].model = fi;
                lr[hi].layer = lsel[li];
                if (head_stats(&a, hsel[hi], &mask, scale, w + (size_t)omp_get_thread_num() * 4 * n, &lr[hi], &e2)) {
#pragma omp critical
                    snprintf(failmsg, sizeof failmsg, "%s layer %zu head %zu: %s", data[fi], lsel[li], hsel[hi],
                             e2.msg);
                }
            }
            if (failmsg[0]) {
                fprintf(stderr, "qattn entropy: %s\n", failmsg);
                rc = QATTN_EXIT_FAIL;
            }
            fprintf(stderr, "qattn entropy: %s layer %zu done (%zu/%zu)\n", mt->model, lsel[li], li + 1, nl);
        }
        if (!rc)
            *nout += nl * nh;
        free(q);
        free(k);
        free(v);
        free(w);
        qattn_act_close(&f);
        if (rc)
            return rc;
    }
    return QATTN_EXIT_OK;
}

static void write_heads(FILE *f, const head_row *h, size_t n, char (*models)[256])
{
    fprintf(f, "model,layer,head,kv_head,rows,entropy,entropy_norm,pmax,int8_zero_mass\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s,%zu,%zu,%zu,%zu,%.10g,%.10g,%.10g,%.10g\n", models[h[i].model], h[i].layer, h[i].head,
                h[i].kv_head, h[i].rows, h[i].entropy, h[i].entropy_norm, h[i].pmax, h[i].zero_mass);
}

/* mean of y over the pairs whose x is below (upper 0) or above (upper 1)
 * the median of x [n] */
static double half_mean(const double *x, const double *y, size_t n, int upper, double *work)
{
    memcpy(work, x, n * sizeof *work);
    gsl_sort(work, 1, n);
    double med = gsl_stats_median_from_sorted_data(work, 1, n), s = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (upper ? x[i] > med : x[i] < med) {
            s += y[i];
            k++;
        }
    return k ? s / (double)k : NAN;
}

/* pv.csv, and summary.csv per model x Q.K format */
static int write_joined(FILE *fj, FILE *fs, const head_row *h, size_t n, char (*models)[256], size_t nmodels,
                        const pv_cells *pv, size_t nboot, unsigned long seed)
{
    fprintf(fj, "model,layer,head,qk_fmt,entropy_norm,int8_zero_mass,cos_fp16,cos_e4m3,cos_int8,e4m3_minus_int8,"
                "better\n");
    fprintf(fs, "model,qk_fmt,n,entropy_norm_mean,e4m3_minus_int8_mean,diff_low_entropy,diff_high_entropy,"
                "spearman,spearman_ci_lo,spearman_ci_hi,zero_mass_spearman,e4m3_better,int8_better\n");
    double *x = malloc((n + 1) * sizeof *x), *z = malloc((n + 1) * sizeof *z), *y = malloc((n + 1) * sizeof *y);
    double *work = malloc((n + 1) * sizeof *work);
    int rc = x && y && z && work ? 0 : -1;
    for (size_t mi = 0; mi < nmodels && !rc; mi++)
        for (size_t qi = 0; qi < pv->nqk; qi++) {
            const char *qk = pv->qk_fmts[qi];
            size_t m = 0, ne = 0, ni = 0;
            for (size_t i = 0; i < n; i++) {
                if (h[i].model != mi)
                    continue;
                double c[PV_N];
                for (int p = 0; p < PV_N; p++)
                    c[p] = pv_cos(pv, models[mi], h[i].layer, h[i].head, qk, pv_fmts[p]);
                if (!isfinite(c[PV_E4M3]) || !isfinite(c[PV_INT8]))
                    continue;
                double diff = c[PV_E4M3] - c[PV_INT8];
                ne += diff > 0;
                ni += diff < 0;
                fprintf(fj, "%s,%zu,%zu,%s,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%s\n", models[mi], h[i].layer,
                        h[i].head, qk, h[i].entropy_norm, h[i].zero_mass, c[PV_FP16], c[PV_E4M3], c[PV_INT8], diff,
                        diff > 0 ? "e4m3" : diff < 0 ? "int8" : "tie");
                x[m] = h[i].entropy_norm;
                z[m] = h[i].zero_mass;
                y[m++] = diff;
            }
            if (!m)
                continue;
            double mx = 0, my = 0, rho, lo, hi, zrho, zlo, zhi;
            for (size_t i = 0; i < m; i++) {
                mx += x[i] / (double)m;
                my += y[i] / (double)m;
            }
            spearman(x, y, m, nboot, seed, &rho, &lo, &hi);
            spearman(z, y, m, 0, seed, &zrho, &zlo, &zhi);
            fprintf(fs, "%s,%s,%zu,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%zu,%zu\n", models[mi], qk, m, mx,
                    my, half_mean(x, y, m, 0, work), half_mean(x, y, m, 1, work), rho, lo, hi, zrho, ne, ni);
        }
    free(x);
    free(y);
    free(z);
    free(work);
    return rc;
}

typedef struct ent_out {
    const head_row *heads;
    size_t nheads;
    char (*models)[256];
    size_t nmodels;
    const pv_cells *pv;
    size_t nboot;
    unsigned long seed;
} ent_out;

/* heads.csv, pv.csv and summary.csv; nonzero: out of memory */
static int write_outputs(FILE *const *f, void *ctx)
{
    const ent_out *w = ctx;
    write_heads(f[0], w->heads, w->nheads, w->models);
    return write_joined(f[1], f[2], w->heads, w->nheads, w->models, w->nmodels, w->pv, w->nboot, w->seed);
}

int qattn_cmd_entropy(int argc, char **argv)
{
    const char *data[64], *outdir = NULL, *pvpath = NULL;
    size_t ndata = 0;
    qattn_run_opts ro = QATTN_RUN_OPTS_INIT;
    const qattn_opt opts[] = {
        {"data", QATTN_OPT_LIST, data, &ndata, 0, 64},
        {"out", QATTN_OPT_STR, &outdir, NULL, 0, 0},
        {"pv", QATTN_OPT_STR, &pvpath, NULL, 0, 0},
        QATTN_RUN_OPTS(&ro),
        {NULL, 0, NULL, NULL, 0, 0}};
    int rc = qattn_cli_parse(argc, argv, opts, NULL);
    if (rc)
        return rc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : rc;
    if (!ndata || !outdir || !pvpath) {
        fprintf(stderr, "qattn entropy: --data, --out and --pv are required (qattn entropy --help)\n");
        return QATTN_EXIT_INPUT;
    }
    static const char *const outputs[3] = {"heads.csv", "pv.csv", "summary.csv"};
    if ((rc = qattn_cli_check_out_dir("entropy", outdir, outputs, 3)))
        return rc;
    pv_cells pv;
    qattn_err err;
    if (pv_load(pvpath, &pv, &err)) {
        fprintf(stderr, "qattn entropy: %s\n", err.msg);
        qattn_csv_free(&pv.t);
        return QATTN_EXIT_INPUT;
    }
    char(*models)[256] = calloc(ndata, sizeof *models);
    head_row *heads = NULL;
    size_t nheads = 0;
    rc = models ? run_files(data, ndata, &ro, &heads, &nheads, models) : QATTN_EXIT_FAIL;
    ent_out w = {heads, nheads, models, ndata, &pv, (size_t)ro.boot, (unsigned long)ro.seed};
    if (!rc && !(rc = qattn_cli_write_outputs("entropy", outdir, outputs, 3, write_outputs, &w)))
        fprintf(stderr, "qattn entropy: %zu heads in %s\n", nheads, outdir);
    free(heads);
    free(models);
    qattn_csv_free(&pv.t);
    return rc;
}
