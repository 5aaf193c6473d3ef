/* qattn compare: paired comparisons behind every claim of the paper
 * (results/comparisons.csv): the pairs of cells in the study records'
 * claims (registry.h), compared on the same heads; qattn pareto: accuracy of the kernel schemes
 * joined with measured GPU throughput (results/pareto/pareto.csv).
 * Contracts: studies/CSV.md. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "csvread.h"
#include "qattn/metrics.h"
#include "registry.h"

typedef struct cells_tab {
    qattn_csv t;
    int loaded;
    int model, layer, head, label, cos, rel_l1;
} cells_tab;

static int load_cells(const char *results, const char *study, cells_tab *ct, qattn_err *err)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s/cells.csv", results, study);
    memset(ct, 0, sizeof *ct);
    if (access(path, F_OK) != 0)
        return QATTN_OK; /* study not run: its claims are skipped */
    int rc = qattn_csv_load(path, &ct->t, err);
    if (rc)
        return rc;
    if ((ct->model = qattn_csv_need(&ct->t, "model", err)) < 0 || (ct->layer = qattn_csv_need(&ct->t, "layer", err)) < 0 ||
        (ct->head = qattn_csv_need(&ct->t, "head", err)) < 0 || (ct->label = qattn_csv_need(&ct->t, "label", err)) < 0 ||
        (ct->cos = qattn_csv_need(&ct->t, "cos", err)) < 0 || (ct->rel_l1 = qattn_csv_need(&ct->t, "rel_l1", err)) < 0) {
        qattn_csv_free(&ct->t);
        return QATTN_ERR_SCHEMA;
    }
    ct->loaded = 1;
    return QATTN_OK;
}

/* paired values of metric column col for labels a and b of one model,
 * matched on (layer, head) */
static size_t pair_up(const cells_tab *ct, const char *model, const char *a, const char *b, int col, double *xa,
                      double *xb, qattn_err *err, int *rc)
{
    const qattn_csv *t = &ct->t;
    size_t n = 0;
    *rc = 0;
    for (size_t i = 0; i < t->nrows && !*rc; i++) {
        if (strcmp(qattn_csv_str(t, i, ct->model), model) || strcmp(qattn_csv_str(t, i, ct->label), a))
            continue;
        const char *li = qattn_csv_str(t, i, ct->layer), *hi = qattn_csv_str(t, i, ct->head);
        for (size_t j = 0; j < t->nrows; j++) {
            if (strcmp(qattn_csv_str(t, j, ct->model), model) || strcmp(qattn_csv_str(t, j, ct->label), b) ||
                strcmp(qattn_csv_str(t, j, ct->layer), li) || strcmp(qattn_csv_str(t, j, ct->head), hi))
                continue;
            if ((*rc = qattn_csv_num(t, i, col, &xa[n], err)) || (*rc = qattn_csv_num(t, j, col, &xb[n], err)))
                break;
            n++;
            break;
        }
    }
    return n;
}

/* the rows of cells a and b of claim in study, for every model of the
 * study and both metrics; 0 or QATTN_EXIT_INPUT after a message */
static int compare_pair(FILE *f, const cells_tab *ct, const char *study, const char *claim, const char *a,
                        const char *b, size_t nboot, unsigned long seed)
{
    int rc = 0;
    qattn_err err;
    for (size_t i = 0; i < ct->t.nrows && !rc; i++) {
        const char *model = qattn_csv_str(&ct->t, i, ct->model);
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp(qattn_csv_str(&ct->t, j, ct->model), model);
        if (seen)
            continue;
        for (int m = 0; m < 2 && !rc; m++) {
            double *xa = malloc(ct->t.nrows * sizeof *xa), *xb = malloc(ct->t.nrows * sizeof *xb);
            int prc = 0;
            size_t n = xa && xb ? pair_up(ct, model, a, b, m ? ct->rel_l1 : ct->cos, xa, xb, &err, &prc) : 0;
            double md = 0, lo = 0, hi = 0;
            if (prc || (n && qattn_stats_paired(xa, xb, n, nboot, seed, &md, &lo, &hi, &err))) {
                fprintf(stderr, "qattn compare: %s\n", err.msg);
                rc = QATTN_EXIT_INPUT;
            } else if (n) {
                double ma = 0, mb = 0;
                for (size_t k = 0; k < n; k++) {
                    ma += xa[k] / (double)n;
                    mb += xb[k] / (double)n;
                }
                /* cos: higher is better; rel_l1: lower is better */
                int a_better = m ? hi < 0 : lo > 0, b_better = m ? lo > 0 : hi < 0;
                fprintf(f, "%s,%s,%s,\"%s\",\"%s\",%s,%zu,%.10g,%.10g,%.10g,%.10g,%.10g,%s\n", claim, study, model,
                        a, b, m ? "rel_l1" : "cos", n, ma, mb, md, lo, hi,
                        a_better ? "a better" : b_better ? "b better" : "inconclusive");
            }
            free(xa);
            free(xb);
        }
    }
    return rc;
}

int qattn_cmd_compare(int argc, char **argv)
{
    const char *results = NULL, *out = NULL;
    long long nboot = 5000, seed = 1;
    const qattn_opt opts[] = {
        {"results", QATTN_OPT_STR, &results, NULL, 0, 0},
        {"out", QATTN_OPT_STR, &out, NULL, 0, 0},
        {"boot", QATTN_OPT_INT, &nboot, NULL, 0, 100000000},
        {"seed", QATTN_OPT_INT, &seed, NULL, 0, 100000000},
        {NULL, 0, NULL, NULL, 0, 0}};
    int parsed = qattn_cli_parse(argc, argv, opts, NULL);
    if (parsed == QATTN_CLI_HELP)
        printf("usage: qattn compare --results DIR --out FILE.csv [--boot N] [--seed S]\n\n"
               "For every claim of the paper (studies/CSV.md), pairs the two cells' metrics on the\n"
               "same model, layer and head and writes the mean difference with its paired-bootstrap\n"
               "95%% interval and a verdict: 'a better', 'b better' or 'inconclusive'. Studies not run\n"
               "are skipped.\n");
    if (parsed)
        return parsed == QATTN_CLI_HELP ? QATTN_EXIT_OK : parsed;
    if (!results || !out) {
        fprintf(stderr, "qattn compare: --results and --out are required (qattn compare --help)\n");
        return QATTN_EXIT_INPUT;
    }
    if ((parsed = qattn_cli_check_out_file("compare", "--out", out)))
        return parsed;
    /* the studies with claims, in record order */
    const qattn_study_rec *studies[64];
    int ns = 0;
    for (size_t i = 0; qattn_studies[i] && ns < 64; i++)
        if (qattn_studies[i]->claims && qattn_studies[i]->claims[0].name)
            studies[ns++] = qattn_studies[i];
    cells_tab tabs[64];
    qattn_err err;
    int rc = QATTN_EXIT_OK;
    memset(tabs, 0, sizeof tabs);
    for (int s = 0; s < ns; s++)
        if (load_cells(results, studies[s]->name, &tabs[s], &err)) {
            fprintf(stderr, "qattn compare: %s\n", err.msg);
            for (int j = 0; j < s; j++)
                if (tabs[j].loaded)
                    qattn_csv_free(&tabs[j].t);
            return QATTN_EXIT_INPUT;
        }
    qattn_out o;
    if (qattn_out_open(&o, out)) {
        fprintf(stderr, "qattn compare: cannot write %s: %s\n", out, strerror(errno));
        rc = QATTN_EXIT_INPUT;
        goto done;
    }
    fprintf(o.f, "claim,study,model,a,b,metric,n,mean_a,mean_b,mean_diff,ci_lo,ci_hi,verdict\n");
    for (int s = 0; s < ns && rc == QATTN_EXIT_OK; s++)
        for (const qattn_claim *cl = studies[s]->claims; cl->name && rc == QATTN_EXIT_OK; cl++)
            for (size_t pi = 0; cl->pairs[pi][0] && rc == QATTN_EXIT_OK; pi++)
                if (tabs[s].loaded)
                    rc = compare_pair(o.f, &tabs[s], studies[s]->name, cl->name, cl->pairs[pi][0], cl->pairs[pi][1],
                                      (size_t)nboot, (unsigned long)seed);
    if (rc != QATTN_EXIT_OK)
        qattn_out_abort(&o);
    else if (qattn_out_commit(&o)) {
        fprintf(stderr, "qattn compare: cannot write %s: %s\n", out, strerror(errno));
        qattn_out_abort(&o);
        rc = QATTN_EXIT_FAIL;
    }
done:
    for (int s = 0; s < ns; s++)
        if (tabs[s].loaded)
            qattn_csv_free(&tabs[s].t);
    return rc;
}

/* ---- pareto ---- */

typedef struct bench_pt {
    char device[128], scheme[128];
    size_t file; /* index into the bench files read (tops_source) */
    long head_dim, causal, n;
    double tops;
} bench_pt;

/* read every BENCH/<device>/attn_fwd_bench.csv; (*files)[i] is the path of
 * file i */
static int load_bench(const char *dir, bench_pt **pts, size_t *npts, char (**files)[1400], size_t *nfiles,
                      qattn_err *err)
{
    *pts = NULL;
    *npts = 0;
    *files = NULL;
    *nfiles = 0;
    DIR *dd = opendir(dir);
    if (!dd)
        return QATTN_OK; /* no GPU results committed yet */
    struct dirent *de;
    int rc = QATTN_OK;
    while ((de = readdir(dd)) && !rc) {
        if (de->d_name[0] == '.')
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s/attn_fwd_bench.csv", dir, de->d_name);
        if (access(path, F_OK) != 0)
            continue;
        char(*fs)[1400] = realloc(*files, (*nfiles + 1) * sizeof *fs);
        if (!fs) {
            rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory");
            break;
        }
        *files = fs;
        snprintf(fs[*nfiles], sizeof fs[0], "%s", path);
        qattn_csv t;
        if ((rc = qattn_csv_load(path, &t, err)))
            break;
        int cd = qattn_csv_need(&t, "device", err), cs = qattn_csv_need(&t, "scheme", err),
            ch = qattn_csv_need(&t, "head_dim", err), cc = qattn_csv_need(&t, "causal", err),
            cn = qattn_csv_need(&t, "n", err), ct = qattn_csv_need(&t, "tops_kernel", err);
        if (cd < 0 || cs < 0 || ch < 0 || cc < 0 || cn < 0 || ct < 0) {
            rc = QATTN_ERR_SCHEMA;
            qattn_csv_free(&t);
            break;
        }
        /* optional: the kernel instance; the portable path (plain HIP, no
         * matrix instructions) is the correctness reference, not a speed */
        int ck = -1;
        for (size_t j = 0; j < t.ncols; j++)
            if (!strcmp(t.header[j], "kernel"))
                ck = (int)j;
        bench_pt *p = realloc(*pts, (*npts + t.nrows) * sizeof *p);
        if (!p) {
            rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory");
            qattn_csv_free(&t);
            break;
        }
        *pts = p;
        for (size_t i = 0; i < t.nrows && !rc; i++) {
            bench_pt *b = &p[*npts];
            if (ck >= 0 && strstr(qattn_csv_str(&t, i, ck), "_portable_"))
                continue;
            snprintf(b->device, sizeof b->device, "%s", qattn_csv_str(&t, i, cd));
            snprintf(b->scheme, sizeof b->scheme, "%s", qattn_csv_str(&t, i, cs));
            b->file = *nfiles;
            if (!(rc = qattn_csv_long(&t, i, ch, &b->head_dim, err)) &&
                !(rc = qattn_csv_long(&t, i, cc, &b->causal, err)) && !(rc = qattn_csv_long(&t, i, cn, &b->n, err)) &&
                !(rc = qattn_csv_num(&t, i, ct, &b->tops, err)))
                (*npts)++;
        }
        qattn_csv_free(&t);
        (*nfiles)++;
    }
    closedir(dd);
    return rc;
}

int qattn_cmd_pareto(int argc, char **argv)
{
    const char *results = NULL, *bench = NULL, *outdir = NULL;
    const qattn_opt opts[] = {
        {"results", QATTN_OPT_STR, &results, NULL, 0, 0},
        {"bench", QATTN_OPT_STR, &bench, NULL, 0, 0},
        {"out", QATTN_OPT_STR, &outdir, NULL, 0, 0},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc == QATTN_CLI_HELP)
        printf("usage: qattn pareto --results DIR --bench DIR --out DIR\n\n"
               "Joins the accuracy of the kernel schemes (DIR/pareto-cells/summary.csv, head dims from\n"
               "DIR/models.csv) with the kernel throughput measured on GPUs (BENCH/<device>/\n"
               "attn_fwd_bench.csv: causal, the model's head dim, the largest N). Writes\n"
               "OUT/pareto.csv; schemes without a measurement get tops_source = none.\n");
    if (prc)
        return prc == QATTN_CLI_HELP ? QATTN_EXIT_OK : prc;
    if (!results || !bench || !outdir) {
        fprintf(stderr, "qattn pareto: --results, --bench and --out are required\n");
        return QATTN_EXIT_INPUT;
    }
    static const char *const pareto_out[1] = {"pareto.csv"};
    if ((prc = qattn_cli_check_out_dir("pareto", outdir, pareto_out, 1)))
        return prc;
    char path[1100], mpath[1100];
    snprintf(path, sizeof path, "%s/pareto-cells/summary.csv", results);
    snprintf(mpath, sizeof mpath, "%s/models.csv", results);
    qattn_csv s, mt;
    qattn_err err;
    bench_pt *pts = NULL;
    size_t npts = 0, nfiles = 0;
    char(*files)[1400] = NULL;
    if (qattn_csv_load(path, &s, &err)) {
        fprintf(stderr, "qattn pareto: %s\n", err.msg);
        return QATTN_EXIT_INPUT;
    }
    if (qattn_csv_load(mpath, &mt, &err)) {
        fprintf(stderr, "qattn pareto: %s\n", err.msg);
        qattn_csv_free(&s);
        return QATTN_EXIT_INPUT;
    }
    int rc = QATTN_EXIT_INPUT;
    int sm = qattn_csv_need(&s, "model", &err), sl = qattn_csv_need(&s, "label", &err),
        sc = qattn_csv_need(&s, "cos_mean", &err), sw = qattn_csv_need(&s, "cos_worst_layer", &err),
        ss = qattn_csv_need(&s, "spec", &err), mm = qattn_csv_need(&mt, "model", &err),
        mh = qattn_csv_need(&mt, "head_dim", &err);
    qattn_out o;
    int opened = 0;
    if (sm < 0 || sl < 0 || sc < 0 || sw < 0 || ss < 0 || mm < 0 || mh < 0 ||
        load_bench(bench, &pts, &npts, &files, &nfiles, &err)) {
        fprintf(stderr, "qattn pareto: %s\n", err.msg);
        goto done;
    }
    if (qattn_cli_mkdirs(outdir)) {
        fprintf(stderr, "qattn pareto: cannot create %s: %s\n", outdir, strerror(errno));
        goto done;
    }
    snprintf(path, sizeof path, "%s/pareto.csv", outdir);
    if (qattn_out_open(&o, path)) {
        fprintf(stderr, "qattn pareto: cannot write %s: %s\n", path, strerror(errno));
        goto done;
    }
    opened = 1;
    fprintf(o.f, "model,label,spec,cos_mean,cos_worst_layer,device,tops,tops_source\n");
    for (size_t i = 0; i < s.nrows; i++) {
        const char *model = qattn_csv_str(&s, i, sm), *label = qattn_csv_str(&s, i, sl);
        long hd = -1;
        for (size_t j = 0; j < mt.nrows; j++)
            if (!strcmp(qattn_csv_str(&mt, j, mm), model) && qattn_csv_long(&mt, j, mh, &hd, &err)) {
                fprintf(stderr, "qattn pareto: %s\n", err.msg);
                goto done;
            }
        const bench_pt *best = NULL;
        for (size_t j = 0; j < npts; j++) {
            const bench_pt *b = &pts[j];
            if (strcmp(b->scheme, label) || b->head_dim != hd || b->causal != 1 || !(b->tops > 0))
                continue;
            if (!best || b->n > best->n || (b->n == best->n && b->tops > best->tops))
                best = b;
        }
        fprintf(o.f, "%s,\"%s\",\"%s\",%s,%s,", model, label, qattn_csv_str(&s, i, ss), qattn_csv_str(&s, i, sc),
                qattn_csv_str(&s, i, sw));
        if (best) {
            /* tops_source: the file the measurement came from (the device
             * column is the GPU's name, e.g. "NVIDIA H100 80GB HBM3", not
             * the directory) */
            qattn_cli_csv_quote(o.f, best->device);
            fprintf(o.f, ",%.6g,", best->tops);
            qattn_cli_csv_quote(o.f, files[best->file]);
            fputc('\n', o.f);
        } else
            fprintf(o.f, ",,none\n");
    }
    if (qattn_out_commit(&o)) {
        fprintf(stderr, "qattn pareto: cannot write %s: %s\n", path, strerror(errno));
        rc = QATTN_EXIT_FAIL;
    } else {
        rc = QATTN_EXIT_OK;
    }
    opened = 0;
done:
    if (opened)
        qattn_out_abort(&o);
    free(pts);
    free(files);
    qattn_csv_free(&s);
    qattn_csv_free(&mt);
    return rc;
}
