/* qattn accuracy: every selected (layer, head) x scheme against float64
 * attention on the file's own values. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "qattn/attn.h"
#include "qattn/h5io.h"
#include "qattn/metrics.h"
#include "schemelist.h"
#include "select.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn accuracy --data F.h5 --schemes LIST --out DIR [options]\n\n"
            "Runs every selected layer x head x scheme and compares it with float64 attention\n"
            "on the file's values. Writes DIR/accuracy.csv (one row per layer, head, scheme) and\n"
            "DIR/summary.csv (per scheme and metric: mean, worst, 95%% bootstrap interval).\n\n"
            "  --data F.h5       activation file (qattn-activations/1)\n"
            "  --schemes LIST    comma-separated preset names and/or scheme strings\n"
            "                    (e.g. 'sage2-8b,fp16,q=int8@token k=int8@token smooth=k'); limits:\n"
            "                    qattn scheme-check --help\n"
            "  --out DIR         output directory (created if missing)\n");
    qattn_cli_run_opts_usage(f);
    qattn_cli_files_usage(f);
}

/* what a run writes into --out */
static const char *const outputs[2] = {"summary.csv", "accuracy.csv"};

typedef struct acc_row {
    size_t layer, head, scheme;
    qattn_metrics m;
} acc_row;

static void write_accuracy(FILE *f, const acc_row *rows, size_t nrows, const qattn_scheme_list *sl, size_t hq,
                           size_t hkv)
{
    fprintf(f, "layer,head,scheme,cos,rel_l1,rmse,max_abs,row_cos_min,kv_head,spec\n");
    for (size_t i = 0; i < nrows; i++) {
        const acc_row *r = &rows[i];
        fprintf(f, "%zu,%zu,", r->layer, r->head);
        qattn_cli_csv_quote(f, sl->items[r->scheme].label);
        fprintf(f, ",%.10g,%.10g,%.10g,%.10g,%.10g,%zu,", r->m.cos, r->m.rel_l1, r->m.rmse, r->m.max_abs,
                r->m.row_cos_min, r->head / (hq / hkv));
        qattn_cli_csv_quote(f, sl->items[r->scheme].spec);
        fputc('\n', f);
    }
}

static const char *metric_names[] = {"cos", "rel_l1", "rmse", "max_abs", "row_cos_min"};
#define NMETRICS 5

static double metric_of(const qattn_metrics *m, int k)
{
    switch (k) {
    case 0: return m->cos;
    case 1: return m->rel_l1;
    case 2: return m->rmse;
    case 3: return m->max_abs;
    default: return m->row_cos_min;
    }
}

/* cos-like metrics: larger is better, so the worst is the minimum */
static int higher_is_better(int k) { return k == 0 || k == 4; }

/* 0, or -1 when out of memory */
static int write_summary(FILE *f, const acc_row *rows, size_t nrows, const qattn_scheme_list *sl, size_t nboot,
                         unsigned long seed)
{
    fprintf(f, "scheme,metric,n,mean,worst,ci_lo,ci_hi,sd,q05,q50,q95,spec\n");
    double *x = malloc((nrows ? nrows : 1) * sizeof *x);
    if (!x)
        return -1;
    for (size_t s = 0; s < sl->n; s++) {
        for (int k = 0; k < NMETRICS; k++) {
            size_t n = 0;
            for (size_t i = 0; i < nrows; i++)
                if (rows[i].scheme == s)
                    x[n++] = metric_of(&rows[i].m, k);
            qattn_stats st;
            qattn_err err;
            qattn_cli_csv_quote(f, sl->items[s].label);
            if (qattn_stats_compute(x, n, nboot, seed, &st, &err)) {
                /* a NaN metric (a scheme that produced NaN) is reported, not hidden */
                fprintf(f, ",%s,%zu,nan,nan,nan,nan,nan,nan,nan,nan,", metric_names[k], n);
            } else {
                fprintf(f, ",%s,%zu,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,", metric_names[k], st.n,
                        st.mean, higher_is_better(k) ? st.min : st.max, st.ci_lo, st.ci_hi, st.sd, st.q05, st.q50,
                        st.q95);
            }
            qattn_cli_csv_quote(f, sl->items[s].spec);
            fputc('\n', f);
        }
    }
    free(x);
    return 0;
}

int qattn_cmd_accuracy(int argc, char **argv)
{
    const char *data = NULL, *schemes = NULL, *outdir = NULL;
    qattn_run_opts ro = QATTN_RUN_OPTS_INIT;
    const qattn_opt opts[] = {
        {"data", QATTN_OPT_STR, &data, NULL, 0, 0},
        {"schemes", QATTN_OPT_STR, &schemes, NULL, 0, 0},
        {"out", QATTN_OPT_STR, &outdir, NULL, 0, 0},
        QATTN_RUN_OPTS(&ro),
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    if (!data || !schemes || !outdir) {
        fprintf(stderr, "qattn accuracy: --data, --schemes and --out are required (qattn accuracy --help)\n");
        return QATTN_EXIT_INPUT;
    }
    if ((prc = qattn_cli_check_out_dir("accuracy", outdir, outputs, 2)))
        return prc;
    qattn_err err;
    qattn_scheme_list sl;
    if (qattn_scheme_list_parse(schemes, &sl, &err)) {
        fprintf(stderr, "qattn accuracy: %s\n", err.msg);
        return QATTN_EXIT_INPUT;
    }
    int rc = QATTN_EXIT_INPUT;
    qattn_act_file f;
    int fopen_ok = 0;
    size_t *lsel = NULL, *hsel = NULL, nl = 0, nh = 0;
    float **qs = NULL, **ks = NULL, **vs = NULL;
    acc_row *rows = NULL;
    double *ref = NULL;
    float *emu = NULL;
    if (qattn_act_open(data, &f, &err)) {
        fprintf(stderr, "qattn accuracy: %s\n", err.msg);
        goto out;
    }
    fopen_ok = 1;
    const qattn_act_meta *mt = &f.meta;
    qattn_mask mask;
    if (qattn_mask_parse(ro.mask ? ro.mask : (mt->causal ? "causal" : "none"), &mask, &err)) {
        fprintf(stderr, "qattn accuracy: %s\n", err.msg);
        goto out;
    }
    lsel = malloc(mt->nlayers * sizeof *lsel);
    hsel = malloc(mt->hq * sizeof *hsel);
    if (!lsel || !hsel) {
        fprintf(stderr, "qattn accuracy: %s: out of memory\n", data);
        rc = QATTN_EXIT_FAIL;
        goto out;
    }
    if (qattn_select_parse(ro.layers, mt->nlayers, lsel, &nl, &err)) {
        fprintf(stderr, "qattn accuracy: --layers: %s\n", err.msg);
        goto out;
    }
    if (qattn_select_parse(ro.heads, mt->hq, hsel, &nh, &err)) {
        fprintf(stderr, "qattn accuracy: --heads: %s\n", err.msg);
        goto out;
    }
    size_t n = mt->n, d = mt->d, hq = mt->hq, hkv = mt->hkv;
    qattn_cli_threads_apply(ro.threads);
    double nd = (double)n * (double)d, nthr = omp_get_max_threads();
    /* the selected layers in float32, the float64 reference of a layer's
     * heads, and each thread's output and working buffers */
    if ((rc = qattn_cli_memory_check("accuracy", data,
                                     (double)nl * (double)(hq + 2 * hkv) * nd * 4 + (double)nh * nd * 8 +
                                         nthr * (nd * 4 + qattn_cli_head_bytes(n, d)))))
        goto out;
    rc = QATTN_EXIT_INPUT;
    /* read every selected layer first: a NaN anywhere fails before any work */
    qs = calloc(nl, sizeof *qs);
    ks = calloc(nl, sizeof *ks);
    vs = calloc(nl, sizeof *vs);
    if (!qs || !ks || !vs) {
        fprintf(stderr, "qattn accuracy: %s: out of memory\n", data);
        rc = QATTN_EXIT_FAIL;
        goto out;
    }
    for (size_t li = 0; li < nl; li++) {
        qs[li] = malloc(hq * n * d * sizeof **qs);
        ks[li] = malloc(hkv * n * d * sizeof **ks);
        vs[li] = malloc(hkv * n * d * sizeof **vs);
        if (!qs[li] || !ks[li] || !vs[li]) {
            fprintf(stderr, "qattn accuracy: %s: out of memory reading layer %zu\n", data, lsel[li]);
            rc = QATTN_EXIT_FAIL;
            goto out;
        }
        if (qattn_act_read_layer(&f, lsel[li], qs[li], ks[li], vs[li], &err)) {
            fprintf(stderr, "qattn accuracy: %s\n", err.msg);
            goto out;
        }
    }
    double scale = mt->has_softmax_scale ? mt->softmax_scale : 1.0 / sqrt((double)d);
    size_t nrows = nl * nh * sl.n;
    rows = calloc(nrows ? nrows : 1, sizeof *rows);
    ref = malloc(nh * n * d * sizeof *ref);
    emu = malloc((size_t)omp_get_max_threads() * n * d * sizeof *emu);
    if (!rows || !ref || !emu) {
        fprintf(stderr, "qattn accuracy: %s: out of memory\n", data);
        rc = QATTN_EXIT_FAIL;
        goto out;
    }
    qattn_cli_progress("accuracy: layers", 0, nl);
    /* the first failure; its code decides the exit status: a scheme the
     * emulation cannot run on this file (e.g. int8 with d > 1024) is an input
     * error (2), running out of memory is not (1) */
    int failed = 0, failcode = 0;
    char failmsg[1200] = "";
    for (size_t li = 0; li < nl && !failed; li++) {
        qattn_mha a = {qs[li], ks[li], vs[li], hq, hkv, n, n, d, mt->seqlens, mt->nseq};
#pragma omp parallel for schedule(dynamic)
        for (size_t hi = 0; hi < nh; hi++) {
            qattn_head hv;
            qattn_err e2;
            int e;
            if (failed)
                continue;
            if ((e = qattn_mha_head(&a, hsel[hi], &hv, &e2)) ||
                (e = qattn_ref_head(&hv, &mask, scale, ref + hi * n * d, NULL, &e2))) {
#pragma omp critical
                if (!failed) {
                    failed = 1;
                    failcode = e;
                    snprintf(failmsg, sizeof failmsg, "%s: layer %zu head %zu: %s", data, lsel[li], hsel[hi],
                             e2.msg);
                }
            }
        }
        size_t ntask = nh * sl.n;
#pragma omp parallel for schedule(dynamic)
        for (size_t t = 0; t < ntask; t++) {
            size_t hi = t / sl.n, si = t % sl.n;
            float *o = emu + (size_t)omp_get_thread_num() * n * d;
            qattn_head hv;
            qattn_err e2;
            int e;
            if (failed)
                continue;
            if ((e = qattn_mha_head(&a, hsel[hi], &hv, &e2)) ||
                (e = qattn_emu_head(&sl.items[si].scheme, &hv, &mask, scale, o, NULL, &e2))) {
#pragma omp critical
                if (!failed) {
                    failed = 1;
                    failcode = e;
                    snprintf(failmsg, sizeof failmsg, "%s: layer %zu head %zu scheme '%s': %s", data, lsel[li],
                             hsel[hi], sl.items[si].label, e2.msg);
                }
                continue;
            }
            acc_row *r = &rows[(li * nh + hi) * sl.n + si];
            r->layer = lsel[li];
            r->head = hsel[hi];
            r->scheme = si;
            qattn_metrics_compute(o, ref + hi * n * d, n, d, &r->m);
        }
        qattn_cli_progress("accuracy: layers", li + 1, nl);
    }
    if (failed) {
        fprintf(stderr, "qattn accuracy: %s\n", failmsg);
        rc = failcode == QATTN_ERR_NOMEM ? QATTN_EXIT_FAIL : QATTN_EXIT_INPUT;
        goto out;
    }
    if (qattn_cli_mkdirs(outdir)) {
        fprintf(stderr, "qattn accuracy: cannot create directory %s: %s\n", outdir, strerror(errno));
        rc = QATTN_EXIT_INPUT;
        goto out;
    }
    /* both files complete before either is renamed into place */
    qattn_out o[2];
    if (qattn_out_open_all(o, outdir, outputs, 2)) {
        fprintf(stderr, "qattn accuracy: cannot write into %s: %s\n", outdir, strerror(errno));
        rc = QATTN_EXIT_FAIL;
        goto out;
    }
    if (write_summary(o[0].f, rows, nrows, &sl, (size_t)ro.boot, (unsigned long)ro.seed)) {
        qattn_out_abort(&o[0]);
        qattn_out_abort(&o[1]);
        fprintf(stderr, "qattn accuracy: %s: out of memory\n", data);
        rc = QATTN_EXIT_FAIL;
        goto out;
    }
    write_accuracy(o[1].f, rows, nrows, &sl, hq, hkv);
    if (qattn_out_commit_all(o, 2)) {
        fprintf(stderr, "qattn accuracy: cannot write into %s: %s\n", outdir, strerror(errno));
        rc = QATTN_EXIT_FAIL;
        goto out;
    }
    /* a short table on stdout: mean and worst cosine per scheme */
    printf("%-24s %12s %12s %12s\n", "scheme", "cos mean", "cos worst", "rel_l1 mean");
    for (size_t s = 0; s < sl.n; s++) {
        double sum = 0, worst = INFINITY, l1 = 0;
        size_t cnt = 0;
        for (size_t i = 0; i < nrows; i++)
            if (rows[i].scheme == s) {
                sum += rows[i].m.cos;
                l1 += rows[i].m.rel_l1;
                worst = rows[i].m.cos < worst ? rows[i].m.cos : worst;
                cnt++;
            }
        printf("%-24.24s %12.8f %12.8f %12.6f\n", sl.items[s].label, sum / (double)cnt, worst, l1 / (double)cnt);
    }
    rc = QATTN_EXIT_OK;
out:
    for (size_t li = 0; qs && li < nl; li++) {
        free(qs[li]);
        free(ks[li]);
        free(vs[li]);
    }
    free(qs);
    free(ks);
    free(vs);
    free(rows);
    free(ref);
    free(emu);
    free(lsel);
    free(hsel);
    if (fopen_ok)
        qattn_act_close(&f);
    qattn_scheme_list_free(&sl);
    return rc;
}
