/* qattn dsv4: the accuracy of DeepSeek-V4's FP8 KV layout on the
 * activations of a model with that attention (data/sparse/): one 512-wide
 * KV row per token as key and value, 448 "nope" channels in e4m3 with an
 * e8m0 scale per 64 and 64 RoPE channels in bf16, against a bf16 cache,
 * plain per-token e4m3 of all 512 values, and the steps between (fp32
 * scales per 64, the rope part in e4m3); dense causal lists and top-k lists
 * chosen by the exact attention (an oracle indexer). Each cell through
 * qattn_emu_sparse, against the float64 attention of the file's values.
 * Contracts: studies/CSV.md. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qattn/h5io.h"
#include "qattn/metrics.h"
#include "qattn/scheme.h"
#include "qattn/sparse.h"

/* one cell: the cache format of the KV row, Q's format, the bf16 rope part */
typedef struct dsv4_cell {
    const char *name, *kv, *q;
    int rope; /* 1: the file's rope_dim channels kept in bf16 */
} dsv4_cell;

#define FP8_64 "e4m3@token,ch:64,e8m0"
static const dsv4_cell cells[] = {
    {"bf16", "bf16", "bf16", 0},
    {"e4m3-token", "e4m3@token", "bf16", 0},
    {"e4m3-token+rope", "e4m3@token", "bf16", 1},
    {"e4m3-ch64", "e4m3@token,ch:64", "bf16", 0},
    {"e4m3-ch64+rope", "e4m3@token,ch:64", "bf16", 1},
    {"e4m3-ch64-e8m0", FP8_64, "bf16", 0},
    {"v4", FP8_64, "bf16", 1},   /* DeepSeek-V4's cache: the prepass kernel's scheme */
    {"v4-q", FP8_64, FP8_64, 1}, /* and Q in the same layout: the fused kernel's */
};
#define NCELLS (sizeof cells / sizeof cells[0])

/* index lists: every key up to the row (dense), or the top-k keys of the exact attention */
static const long lists[] = {0, 512, 64};
#define NLISTS (sizeof lists / sizeof lists[0])

static void list_name(size_t li, char *buf, size_t n)
{
    if (lists[li])
        snprintf(buf, n, "top%ld", lists[li]);
    else
        snprintf(buf, n, "dense");
}

static void cell_spec(const dsv4_cell *c, int rope_dim, char *buf, size_t n)
{
    snprintf(buf, n, "q=%s k=%s v=%s p=fp32 smooth=none acc=fp32 kblock=64 rope=%d out=fp32", c->q, c->kv, c->kv,
             c->rope ? rope_dim : 0);
}

typedef struct head_res {
    size_t model, layer, head, rows;
    qattn_metrics m[NLISTS][NCELLS];
} head_res;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn dsv4 --data F.h5 [--data G.h5 ...] --out DIR [options]\n\n"
            "Accuracy of DeepSeek-V4's FP8 KV layout. F.h5 holds one KV row per token serving as key\n"
            "and value (one kv head, v equal to k), the rotary part in its last rope_dim channels\n"
            "(root attribute), and the query rows of the last positions (q_offset; data/README.md).\n"
            "Each sampled query row attends to the keys up to its position (dense) or to the top-k of\n"
            "them by the exact attention summed over heads (top512, top64), through the sparse\n"
            "emulation (qattn/sparse.h) with the cache row as: bf16; e4m3 with one fp32 scale per\n"
            "token; e4m3 with an fp32 scale or an e8m0 scale per 64 channels; each with the rope part\n"
            "in e4m3 or kept in bf16 (+rope; 'v4' is DeepSeek-V4's layout, 'v4-q' with Q in the same\n"
            "layout). P and the accumulator in fp32. Against the float64 attention of the file's\n"
            "values: cos and rel-L1 per model x layer x query head. Writes DIR/cells.csv and\n"
            "DIR/summary.csv (studies/CSV.md).\n\n"
            "  --data F.h5       activation file in this layout (repeatable)\n"
            "  --out DIR         output directory\n"
            "  --stride S        query rows sampled: S-1, 2S-1, ... and the last (default 4)\n"
            "  --threads N       worker threads (default: all cores)\n"
            "  --boot N          bootstrap resamples for the 95%% intervals (default 2000)\n"
            "  --seed N          bootstrap seed (default 1)\n");
}

/* top-k lists by the exact attention: idx [R, topk] (every key up to the row when k = 0 or
 * k > the row's keys), len [R]; mass [R, n] holds each row's exact probabilities summed over heads;
 * taken [n] scratch */
static void make_lists(long k, const double *mass, const size_t *pos, size_t R, size_t n, size_t topk,
                       int32_t *idx, int32_t *len, char *taken)
{
    for (size_t r = 0; r < R; r++) {
        size_t keys = pos[r] + 1, m = k && (size_t)k < keys ? (size_t)k : keys;
        int32_t *row = idx + r * topk;
        if (m == keys) {
            for (size_t j = 0; j < keys; j++)
                row[j] = (int32_t)j;
        } else { /* selection by repeated maxima: k <= 512, keys <= n */
            memset(taken, 0, keys);
            for (size_t j = 0; j < m; j++) {
                size_t best = 0;
                double bv = -1;
                for (size_t t = 0; t < keys; t++)
                    if (!taken[t] && mass[r * n + t] > bv) {
                        bv = mass[r * n + t];
                        best = t;
                    }
                taken[best] = 1;
                row[j] = (int32_t)best;
            }
        }
        for (size_t j = m; j < topk; j++)
            row[j] = -1;
        len[r] = (int32_t)m;
    }
}

/* the exact probabilities of each sampled row summed over heads: mass [R, n]; scores [R, n] scratch */
static void exact_mass(const float *q, const float *kv, size_t hq, size_t R, size_t n, size_t d,
                       const size_t *pos, double scale, double *mass, double *scores)
{
#pragma omp parallel for schedule(dynamic)
    for (size_t r = 0; r < R; r++) {
        double *s = scores + r * n;
        memset(mass + r * n, 0, n * sizeof *mass);
        for (size_t h = 0; h < hq; h++) {
            const float *qr = q + (h * R + r) * d;
            double mx = -INFINITY, l = 0;
            for (size_t t = 0; t <= pos[r]; t++) {
                double a = 0;
                for (size_t c = 0; c < d; c++)
                    a += (double)qr[c] * kv[t * d + c];
                s[t] = a * scale;
                mx = s[t] > mx ? s[t] : mx;
            }
            for (size_t t = 0; t <= pos[r]; t++)
                l += (s[t] = exp(s[t] - mx));
            for (size_t t = 0; t <= pos[r]; t++)
                mass[r * n + t] += s[t] / l;
        }
    }
}

/* the sparse problem of R query rows qs [hq, R, d] over the one kv row k [n, d] (key and value),
 * with the given list */
static qattn_sparse list_problem(const float *qs, const float *k, size_t hq, size_t R, size_t n, size_t d,
                                 const int32_t *idx, const int32_t *len)
{
    qattn_sparse a = {qs, k, k, hq, 1, R, n, d, idx, n, len, NULL, 0, 0, 0, NULL, NULL, NULL};
    return a;
}

/* one file: res grows by layers x heads */
static int run_file(const char *path, size_t fi, long long stride, head_res **out, size_t *nout, char *model)
{
    qattn_err err;
    qattn_act_file f;
    if (qattn_act_open_rows(path, &f, &err)) {
        fprintf(stderr, "qattn dsv4: %s\n", err.msg);
        return QATTN_EXIT_INPUT;
    }
    const qattn_act_meta *mt = &f.meta;
    snprintf(model, 256, "%s", mt->model);
    size_t hq = mt->hq, n = mt->n, d = mt->d, nq = n - mt->q_offset;
    if (mt->hkv != 1 || mt->rope_dim <= 0 || (mt->nseq > 1)) {
        fprintf(stderr, "qattn dsv4: %s: not in the layout (needs one kv head, a rope_dim attribute and one "
                        "sequence; has %zu kv heads, rope_dim %d, %zu sequences)\n",
                path, mt->hkv, mt->rope_dim, mt->nseq);
        qattn_act_close(&f);
        return QATTN_EXIT_INPUT;
    }
    double nd = (double)n * (double)d;
    int rc = qattn_cli_memory_check("dsv4", path,
                                    ((double)hq * nq * d * 4 + 3 * nd * 4) +
                                        (double)nq * n * 8 * 2 + (double)NCELLS * NLISTS * hq * nq * d * 4);
    if (rc) {
        qattn_act_close(&f);
        return rc;
    }
    double scale = mt->has_softmax_scale ? mt->softmax_scale : 1.0 / sqrt((double)d);
    /* sampled rows by position; query row pos - q_offset of the file */
    size_t R = 0, *pos = malloc((nq + 1) * sizeof *pos);
    for (size_t i = (size_t)stride - 1; pos && i < nq; i += (size_t)stride)
        pos[R++] = mt->q_offset + i;
    if (pos && (!R || pos[R - 1] != n - 1))
        pos[R++] = n - 1;
    float *q = malloc(hq * nq * d * sizeof *q), *k = malloc(nd * sizeof *k), *v = malloc(nd * sizeof *v);
    float *qs = malloc(hq * R * d * sizeof *qs + 1);
    double *mass = malloc(R * n * sizeof *mass + 1), *scores = malloc(R * n * sizeof *scores + 1);
    double *ref = malloc(NLISTS * hq * R * d * sizeof *ref + 1);
    char *taken = malloc(n);
    float *o = malloc(NCELLS * NLISTS * hq * R * d * sizeof *o + 1);
    int32_t *idx = malloc(NLISTS * R * n * sizeof *idx + 1), *len = malloc(NLISTS * R * sizeof *len + 1);
    head_res *res = realloc(*out, (*nout + mt->nlayers * hq) * sizeof *res);
    rc = !pos || !q || !k || !v || !qs || !mass || !scores || !ref || !o || !idx || !len || !taken || !res
             ? QATTN_EXIT_FAIL
             : 0;
    if (res)
        *out = res;
    if (rc)
        fprintf(stderr, "qattn dsv4: %s: out of memory\n", path);
    for (size_t l = 0; l < mt->nlayers && !rc; l++) {
        if (qattn_act_read_layer(&f, l, q, k, v, &err)) {
            fprintf(stderr, "qattn dsv4: %s\n", err.msg);
            rc = QATTN_EXIT_INPUT;
            break;
        }
        if (memcmp(k, v, nd * sizeof *k)) {
            fprintf(stderr, "qattn dsv4: %s layer %zu: v differs from k (the layout has one row as both)\n", path, l);
            rc = QATTN_EXIT_INPUT;
            break;
        }
        for (size_t h = 0; h < hq; h++)
            for (size_t r = 0; r < R; r++)
                memcpy(qs + (h * R + r) * d, q + (h * nq + pos[r] - mt->q_offset) * d, d * sizeof *qs);
        exact_mass(qs, k, hq, R, n, d, pos, scale, mass, scores);
        char failmsg[600] = "";
        for (size_t li = 0; li < NLISTS && !failmsg[0]; li++) {
            make_lists(lists[li], mass, pos, R, n, n, idx + li * R * n, len + li * R, taken);
            qattn_sparse a = list_problem(qs, k, hq, R, n, d, idx + li * R * n, len + li * R);
            if (qattn_ref_sparse(&a, scale, ref + li * hq * R * d, NULL, &err))
                snprintf(failmsg, sizeof failmsg, "%s layer %zu: %s", path, l, err.msg);
        }
#pragma omp parallel for schedule(dynamic)
        for (size_t j = 0; j < NCELLS * NLISTS; j++) {
            size_t c = j % NCELLS, li = j / NCELLS;
            char spec[256];
            cell_spec(&cells[c], mt->rope_dim, spec, sizeof spec);
            qattn_scheme s;
            qattn_err e2;
            qattn_sparse a = list_problem(qs, k, hq, R, n, d, idx + li * R * n, len + li * R);
            if (!failmsg[0] && (qattn_scheme_parse(spec, &s, &e2) ||
                                qattn_emu_sparse(&s, &a, scale, o + (li * NCELLS + c) * hq * R * d, NULL, &e2))) {
#pragma omp critical
                snprintf(failmsg, sizeof failmsg, "%s layer %zu cell %s: %s", path, l, cells[c].name, e2.msg);
            }
        }
        if (failmsg[0]) {
            fprintf(stderr, "qattn dsv4: %s\n", failmsg);
            rc = QATTN_EXIT_FAIL;
            break;
        }
        for (size_t h = 0; h < hq; h++) {
            head_res *hr = &res[*nout + l * hq + h];
            hr->model = fi;
            hr->layer = l;
            hr->head = h;
            hr->rows = R;
            for (size_t li = 0; li < NLISTS; li++)
                for (size_t c = 0; c < NCELLS; c++)
                    qattn_metrics_compute(o + ((li * NCELLS + c) * hq + h) * R * d, ref + (li * hq + h) * R * d, R,
                                          d, &hr->m[li][c]);
        }
        fprintf(stderr, "qattn dsv4: %s layer %zu done (%zu/%zu)\n", mt->model, l, l + 1, mt->nlayers);
    }
    if (!rc)
        *nout += mt->nlayers * hq;
    free(pos);
    free(taken);
    free(scores);
    free(q);
    free(k);
    free(v);
    free(qs);
    free(mass);
    free(ref);
    free(o);
    free(idx);
    free(len);
    qattn_act_close(&f);
    return rc;
}

static void write_cells(FILE *f, const head_res *h, size_t n, char (*models)[256])
{
    fprintf(f, "model,layer,head,cell,list,rows,cos,rel_l1,rmse,max_abs,row_cos_min,kv_spec,q_spec,rope\n");
    for (size_t i = 0; i < n; i++)
        for (size_t li = 0; li < NLISTS; li++)
            for (size_t c = 0; c < NCELLS; c++) {
                char ln[16];
                list_name(li, ln, sizeof ln);
                const qattn_metrics *m = &h[i].m[li][c];
                fprintf(f, "%s,%zu,%zu,%s,%s,%zu,%.10g,%.10g,%.10g,%.10g,%.10g,", models[h[i].model], h[i].layer,
                        h[i].head, cells[c].name, ln, h[i].rows, m->cos, m->rel_l1, m->rmse, m->max_abs,
                        m->row_cos_min);
                qattn_cli_csv_quote(f, cells[c].kv);
                fputc(',', f);
                qattn_cli_csv_quote(f, cells[c].q);
                fprintf(f, ",%s\n", cells[c].rope ? "bf16" : "none");
            }
}

static int write_summary(FILE *f, const head_res *h, size_t n, char (*models)[256], size_t nmodels, size_t nboot,
                         unsigned long seed)
{
    fprintf(f, "model,cell,list,n,cos_mean,cos_ci_lo,cos_ci_hi,cos_worst_head,one_minus_cos_mean,"
               "one_minus_cos_ci_lo,one_minus_cos_ci_hi,one_minus_cos_worst_head,rel_l1_mean,rel_l1_ci_lo,"
               "rel_l1_ci_hi,rel_l1_worst_head\n");
    double *x = malloc((n + 1) * sizeof *x), *y = malloc((n + 1) * sizeof *y), *z = malloc((n + 1) * sizeof *z);
    int rc = x && y && z ? 0 : -1;
    for (size_t mi = 0; mi < nmodels && !rc; mi++)
        for (size_t li = 0; li < NLISTS && !rc; li++)
            for (size_t c = 0; c < NCELLS; c++) {
                size_t m = 0;
                for (size_t i = 0; i < n; i++)
                    if (h[i].model == mi) {
                        x[m] = h[i].m[li][c].cos;
                        y[m] = 1 - h[i].m[li][c].cos;
                        z[m++] = h[i].m[li][c].rel_l1;
                    }
                if (!m)
                    continue;
                qattn_stats sc, s1, sl;
                qattn_err err;
                if (qattn_stats_compute(x, m, nboot, seed, &sc, &err) ||
                    qattn_stats_compute(y, m, nboot, seed, &s1, &err) ||
                    qattn_stats_compute(z, m, nboot, seed, &sl, &err)) {
                    rc = -1;
                    break;
                }
                char ln[16];
                list_name(li, ln, sizeof ln);
                fprintf(f, "%s,%s,%s,%zu,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g\n",
                        models[mi], cells[c].name, ln, m, sc.mean, sc.ci_lo, sc.ci_hi, sc.min, s1.mean, s1.ci_lo,
                        s1.ci_hi, s1.max, sl.mean, sl.ci_lo, sl.ci_hi, sl.max);
            }
    free(x);
    free(y);
    free(z);
    return rc;
}

typedef struct dsv4_out {
    const head_res *heads;
    size_t nheads;
    char (*models)[256];
    size_t nmodels, nboot;
    unsigned long seed;
} dsv4_out;

/* cells.csv and summary.csv; nonzero: out of memory */
static int write_outputs(FILE *const *f, void *ctx)
{
    const dsv4_out *w = ctx;
    write_cells(f[0], w->heads, w->nheads, w->models);
    return write_summary(f[1], w->heads, w->nheads, w->models, w->nmodels, w->nboot, w->seed);
}

int qattn_cmd_dsv4(int argc, char **argv)
{
    const char *data[64], *outdir = NULL;
    size_t ndata = 0;
    long long stride = 4, threads = 0, boot = 2000, seed = 1;
    const qattn_opt opts[] = {{"data", QATTN_OPT_LIST, data, &ndata, 0, 64},
                              {"out", QATTN_OPT_STR, &outdir, NULL, 0, 0},
                              {"stride", QATTN_OPT_INT, &stride, NULL, 1, 1000000},
                              {"threads", QATTN_OPT_INT, &threads, NULL, 1, qattn_cli_threads_max()},
                              {"boot", QATTN_OPT_INT, &boot, NULL, 0, 100000000},
                              {"seed", QATTN_OPT_INT, &seed, NULL, 0, 100000000},
                              {NULL, 0, NULL, NULL, 0, 0}};
    int rc = qattn_cli_parse(argc, argv, opts, NULL);
    if (rc)
        return rc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : rc;
    if (!ndata || !outdir) {
        fprintf(stderr, "qattn dsv4: --data and --out are required (qattn dsv4 --help)\n");
        return QATTN_EXIT_INPUT;
    }
    static const char *const outputs[2] = {"cells.csv", "summary.csv"};
    if ((rc = qattn_cli_check_out_dir("dsv4", outdir, outputs, 2)))
        return rc;
    qattn_cli_threads_apply(threads);
    char(*models)[256] = calloc(ndata, sizeof *models);
    head_res *heads = NULL;
    size_t nheads = 0;
    rc = models ? 0 : QATTN_EXIT_FAIL;
    for (size_t fi = 0; fi < ndata && !rc; fi++)
        if (!(rc = run_file(data[fi], fi, stride, &heads, &nheads, models[fi])))
            rc = qattn_cli_distinct_model("dsv4", data, models, fi);
    dsv4_out w = {heads, nheads, models, ndata, (size_t)boot, (unsigned long)seed};
    if (!rc && !(rc = qattn_cli_write_outputs("dsv4", outdir, outputs, 2, write_outputs, &w)))
        fprintf(stderr, "qattn dsv4: %zu heads x %zu cells x %zu lists in %s\n", nheads, NCELLS, NLISTS, outdir);
    free(heads);
    free(models);
    return rc;
}
