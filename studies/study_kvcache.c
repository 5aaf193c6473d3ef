/* qattn kvcache: the accuracy of quantized KV caches in decode. Every
 * sampled query row attends to the cache of the tokens before it (keys 0 ..
 * i for row i of its sequence), the cache grown token by token
 * (qattn/kvcache.h), with Q and P in fp32 so that only the cache is
 * quantized: K in int8 / int4 / e4m3 per token or per channel over groups
 * of G tokens (KIVI), with and without smoothing K, V per token, against the
 * float64 attention of the unquantized K and V. Contracts: studies/CSV.md. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qattn/formats.h"
#include "qattn/group.h"
#include "qattn/h5io.h"
#include "qattn/kvcache.h"
#include "qattn/metrics.h"
#include "select.h"

#define PAGE 16

/* one cell: K cache (format-granularity), smoothing of K, V cache */
typedef struct kv_cell {
    const char *k, *smooth, *v;
} kv_cell;

static const kv_cell cells[] = {
    {"fp16", "none", "fp16"},
    /* K alone (V fp16) */
    {"int8-token", "none", "fp16"},   {"int8-token", "k", "fp16"},   {"int8-channel", "none", "fp16"},
    {"int8-channel", "k", "fp16"},    {"int4-token", "none", "fp16"},   {"int4-token", "k", "fp16"},
    {"int4-channel", "none", "fp16"}, {"int4-channel", "k", "fp16"},    {"e4m3-token", "none", "fp16"},
    {"e4m3-token", "k", "fp16"},      {"e4m3-channel", "none", "fp16"}, {"e4m3-channel", "k", "fp16"},
    /* control for KIVI's fp32 residual: one scale per G tokens x all
     * channels, the same open group as per channel, coarser than per token */
    {"int8-block", "none", "fp16"},   {"int4-block", "none", "fp16"},   {"e4m3-block", "none", "fp16"},
    /* V alone (K fp16) */
    {"fp16", "none", "int8"},         {"fp16", "none", "int4"},         {"fp16", "none", "e4m3"},
    /* both, the same format: K per token or per channel, V per token */
    {"int8-token", "none", "int8"},   {"int8-channel", "none", "int8"}, {"int4-token", "none", "int4"},
    {"int4-channel", "none", "int4"}, {"e4m3-token", "none", "e4m3"},   {"e4m3-channel", "none", "e4m3"},
};
#define NCELLS (sizeof cells / sizeof cells[0])

/* the operand and its text ("int4@block:32,ch:1") of a cache level */
static int operand(const char *level, long group, qattn_operand *op, char *spec, size_t n)
{
    char fmt[16];
    const char *dash = strchr(level, '-');
    size_t fl = dash ? (size_t)(dash - level) : strlen(level);
    snprintf(fmt, sizeof fmt, "%.*s", (int)fl, level);
    memset(op, 0, sizeof *op);
    if (qattn_fmt_parse(fmt, &op->fmt))
        return -1;
    int plain = op->fmt == QATTN_FMT_FP32 || op->fmt == QATTN_FMT_FP16 || op->fmt == QATTN_FMT_BF16;
    if (plain) {
        snprintf(spec, n, "%s", fmt);
        return 0;
    }
    char g[40];
    if (!dash || !strcmp(dash + 1, "token")) /* V levels are per token */
        snprintf(g, sizeof g, "token");
    else if (!strcmp(dash + 1, "block"))
        snprintf(g, sizeof g, "block:%ld", group);
    else
        snprintf(g, sizeof g, "block:%ld,ch:1", group);
    qattn_err err;
    if (qattn_group_parse(g, &op->group, &err))
        return -1;
    snprintf(spec, n, "%s@%s", fmt, g);
    return 0;
}

typedef struct head_res {
    size_t model, layer, head, rows;
    qattn_metrics m[NCELLS];
} head_res;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn kvcache --data F.h5 [--data G.h5 ...] --out DIR [options]\n\n"
            "Accuracy of quantized KV caches in decode. Each sampled query row i of a sequence attends\n"
            "to the keys 0..i of its sequence read from a paged KV cache grown token by token\n"
            "(qattn/kvcache.h): K in int8, int4 or e4m3 per token or per channel over groups of G\n"
            "tokens (KIVI: the newest, unfilled group stays in fp32), with and without smoothing K\n"
            "(K minus its per-channel mean over the sequence; exact attention is unchanged by it),\n"
            "and per block of G tokens x all channels (the same fp32 residual; a control); V\n"
            "per token, and the fp16 cache as the baseline. Q and P stay in fp32 (split-KV decode\n"
            "emulation, one split), so only the cache is quantized. Each cell against the float64\n"
            "attention of the file's K and V: cos and rel-L1 per model x layer x query head. Writes\n"
            "DIR/cells.csv and DIR/summary.csv (studies/CSV.md).\n\n"
            "  --data F.h5       activation file (repeatable)\n"
            "  --out DIR         output directory\n"
            "  --stride S        query rows sampled: S-1, 2S-1, ... and the last row of each\n"
            "                    sequence (default 16; 1: every row)\n"
            "  --group G         tokens per K scale group of the per-channel and per-block cells\n"
            "                    (default 32)\n"
            "  --layers SEL      layers, e.g. all, 3, 0,2,5-7 (default all)\n"
            "  --heads SEL       query heads (default all)\n"
            "  --threads N       worker threads (default: all cores)\n"
            "  --boot N          bootstrap resamples for the 95%% intervals (default 2000)\n"
            "  --seed N          bootstrap seed (default 1)\n");
    qattn_cli_files_usage(f);
}

typedef struct run_cfg {
    long long stride, group, threads, boot, seed;
    const char *layers, *heads;
} run_cfg;

/* sampled rows of a sequence of len tokens: positions into rows[], count */
static size_t sample_rows(size_t len, size_t stride, size_t *rows)
{
    size_t n = 0;
    for (size_t i = stride - 1; i < len; i += stride)
        rows[n++] = i;
    if (!n || rows[n - 1] != len - 1)
        rows[n++] = len - 1;
    return n;
}

/* one cell over every sequence of a layer: o [hq, R, d] for the R sampled
 * rows (sequence order) */
static int run_cell(const kv_cell *cl, const run_cfg *rc, const qattn_act_meta *mt, const float *q, const float *k,
                    const float *v, const int64_t *seql, size_t nseq, const size_t *rows, const size_t *rseq,
                    size_t nrows, double scale, float *o, qattn_err *err)
{
    size_t hq = mt->hq, hkv = mt->hkv, n = mt->n, d = mt->d;
    qattn_operand ko, vo;
    char ks[64], vs[64];
    if (operand(cl->k, (long)rc->group, &ko, ks, sizeof ks) || operand(cl->v, (long)rc->group, &vo, vs, sizeof vs))
        return qattn_err_set(err, QATTN_ERR_ARG, "bad cache level %s / %s", cl->k, cl->v);
    int smooth = !strcmp(cl->smooth, "k");
    size_t maxlen = 0;
    for (size_t s = 0; s < nseq; s++)
        maxlen = (size_t)seql[s] > maxlen ? (size_t)seql[s] : maxlen;
    size_t npages = (maxlen + PAGE - 1) / PAGE;
    int32_t *table = malloc(npages * sizeof *table);
    float *kt = malloc(maxlen * hkv * d * sizeof *kt), *vt = malloc(maxlen * hkv * d * sizeof *vt);
    float *qr = malloc(hq * d * sizeof *qr), *orow = malloc(hq * d * sizeof *orow);
    int e = table && kt && vt && qr && orow ? 0 : qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory");
    for (size_t p = 0; p < npages && !e; p++)
        table[p] = (int32_t)p;
    size_t start = 0, r = 0;
    for (size_t s = 0; s < nseq && !e; s++) {
        size_t len = (size_t)seql[s];
        /* the sequence token-major [len, hkv, d], K smoothed */
        for (size_t h = 0; h < hkv; h++) {
            for (size_t c = 0; c < d; c++) {
                float mean = 0;
                if (smooth) {
                    double acc = 0;
                    for (size_t t = 0; t < len; t++)
                        acc += k[(h * n + start + t) * d + c];
                    mean = (float)(acc / (double)len);
                }
                for (size_t t = 0; t < len; t++) {
                    kt[(t * hkv + h) * d + c] = k[(h * n + start + t) * d + c] - mean;
                    vt[(t * hkv + h) * d + c] = v[(h * n + start + t) * d + c];
                }
            }
        }
        qattn_kvcache_cfg cfg = {npages, PAGE, hkv, d, 1, npages, table, ko, vo};
        qattn_kvcache cache;
        if ((e = qattn_kvcache_init(&cache, &cfg, err)))
            break;
        size_t have = 0;
        for (; r < nrows && rseq[r] == s && !e; r++) {
            size_t i = rows[r];
            if (i + 1 > have) {
                e = qattn_kvcache_append(&cache, 0, kt + have * hkv * d, vt + have * hkv * d, i + 1 - have, err);
                have = i + 1;
            }
            if (e)
                break;
            for (size_t h = 0; h < hq; h++)
                memcpy(qr + h * d, q + (h * n + start + i) * d, d * sizeof *qr);
            int64_t sq = 1, sk = (int64_t)(i + 1);
            qattn_kv_batch b = {1, hq, hkv, d, &sq, &sk, qr, NULL, NULL, &cache};
            qattn_kv_opts opt = {{QATTN_MASK_NONE, 0, 0}, scale, 64, 1};
            if ((e = qattn_kv_emu(&b, &opt, orow, NULL, NULL, NULL, err)))
                break;
            for (size_t h = 0; h < hq; h++)
                memcpy(o + (h * nrows + r) * d, orow + h * d, d * sizeof *o);
        }
        qattn_kvcache_free(&cache);
        start += len;
    }
    free(table);
    free(kt);
    free(vt);
    free(qr);
    free(orow);
    return e;
}

/* float64 attention of the sampled rows on the file's K, V: ref [hq, R, d] */
static int run_ref(const qattn_act_meta *mt, const float *q, const float *k, const float *v, const int64_t *seql,
                   size_t nseq, const size_t *rows, const size_t *rseq, size_t nrows, double scale, double *ref,
                   qattn_err *err)
{
    size_t hq = mt->hq, hkv = mt->hkv, n = mt->n, d = mt->d;
    size_t *starts = malloc((nseq + 1) * sizeof *starts);
    if (!starts)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory");
    starts[0] = 0;
    for (size_t s = 0; s < nseq; s++)
        starts[s + 1] = starts[s] + (size_t)seql[s];
    int e = 0;
#pragma omp parallel
    {
        float *kb = malloc(hkv * n * d * sizeof *kb), *vb = malloc(hkv * n * d * sizeof *vb);
        float *qr = malloc(hq * d * sizeof *qr);
        double *orow = malloc(hq * d * sizeof *orow);
        qattn_err e2;
        int mine = kb && vb && qr && orow ? 0 : qattn_err_set(&e2, QATTN_ERR_NOMEM, "out of memory");
#pragma omp for schedule(dynamic)
        for (size_t r = 0; r < nrows; r++) {
            if (mine)
                continue;
            size_t i = rows[r], st = starts[rseq[r]], sk = i + 1;
            for (size_t h = 0; h < hkv; h++) {
                memcpy(kb + h * sk * d, k + (h * n + st) * d, sk * d * sizeof *kb);
                memcpy(vb + h * sk * d, v + (h * n + st) * d, sk * d * sizeof *vb);
            }
            for (size_t h = 0; h < hq; h++)
                memcpy(qr + h * d, q + (h * n + st + i) * d, d * sizeof *qr);
            int64_t sq1 = 1, sk1 = (int64_t)sk;
            qattn_kv_batch b = {1, hq, hkv, d, &sq1, &sk1, qr, kb, vb, NULL};
            qattn_mask m = {QATTN_MASK_NONE, 0, 0};
            if ((mine = qattn_kv_ref(&b, &m, scale, orow, NULL, &e2)))
                continue;
            for (size_t h = 0; h < hq; h++)
                memcpy(ref + (h * nrows + r) * d, orow + h * d, d * sizeof *ref);
        }
        if (mine) {
#pragma omp critical
            if (!e) {
                e = mine;
                *err = e2;
            }
        }
        free(kb);
        free(vb);
        free(qr);
        free(orow);
    }
    free(starts);
    return e;
}

/* every file and selected layer: res grows by layers x heads */
static int run_files(const char *const *data, size_t ndata, const run_cfg *rc, head_res **out, size_t *nout,
                     char (*models)[256])
{
    qattn_err err;
    for (size_t fi = 0; fi < ndata; fi++) {
        qattn_act_file f;
        size_t lsel[1024], hsel[1024], nl, nh;
        int rc2 = qattn_cli_open_selected("kvcache", data[fi], rc->layers, rc->heads, &f, lsel, &nl, hsel, &nh);
        if (rc2)
            return rc2;
        const qattn_act_meta *mt = &f.meta;
        snprintf(models[fi], 256, "%s", mt->model);
        double nd = (double)mt->n * (double)mt->d;
        rc2 = qattn_cli_memory_check("kvcache", data[fi],
                                     (double)(mt->hq + 2 * mt->hkv) * nd * 4 * 2 +
                                         omp_get_max_threads() * (double)mt->hkv * nd * 8 +
                                         (double)NCELLS * mt->hq * nd * 4 / (double)rc->stride);
        if (!rc2)
            rc2 = qattn_cli_distinct_model("kvcache", data, models, fi);
        qattn_act_close(&f);
        if (rc2)
            return rc2;
    }
    qattn_cli_threads_apply(rc->threads);
    for (size_t fi = 0; fi < ndata; fi++) {
        qattn_act_file f;
        if (qattn_act_open(data[fi], &f, &err)) {
            fprintf(stderr, "qattn kvcache: %s\n", err.msg);
            return QATTN_EXIT_INPUT;
        }
        const qattn_act_meta *mt = &f.meta;
        size_t n = mt->n, d = mt->d, hq = mt->hq, lsel[1024], hsel[1024], nl, nh;
        qattn_select_parse(rc->layers, mt->nlayers, lsel, &nl, &err);
        qattn_select_parse(rc->heads, hq, hsel, &nh, &err);
        double scale = mt->has_softmax_scale ? mt->softmax_scale : 1.0 / sqrt((double)d);
        int64_t one = (int64_t)n;
        const int64_t *seql = mt->seqlens ? mt->seqlens : &one;
        size_t nseq = mt->seqlens ? mt->nseq : 1, nrows = 0;
        size_t *rows = malloc((n + nseq) * sizeof *rows), *rseq = malloc((n + nseq) * sizeof *rseq);
        for (size_t s = 0; s < nseq && rows && rseq; s++) {
            size_t m = sample_rows((size_t)seql[s], (size_t)rc->stride, rows + nrows);
            for (size_t j = 0; j < m; j++)
                rseq[nrows + j] = s;
            nrows += m;
        }
        float *q = malloc(hq * n * d * sizeof *q), *k = malloc(mt->hkv * n * d * sizeof *k),
              *v = malloc(mt->hkv * n * d * sizeof *v);
        double *ref = malloc(hq * nrows * d * sizeof *ref + 1);
        float *o = malloc(NCELLS * hq * nrows * d * sizeof *o + 1);
        head_res *res = realloc(*out, (*nout + nl * nh) * sizeof *res);
        int rc2 = !rows || !rseq || !q || !k || !v || !ref || !o || !res ? QATTN_EXIT_FAIL : 0;
        if (res)
            *out = res;
        if (rc2)
            fprintf(stderr, "qattn kvcache: %s: out of memory\n", data[fi]);
        for (size_t li = 0; li < nl && !rc2; li++) {
            if (qattn_act_read_layer(&f, lsel[li], q, k, v, &err)) {
                fprintf(stderr, "qattn kvcache: %s\n", err.msg);
                rc2 = QATTN_EXIT_INPUT;
                break;
            }
            if (run_ref(mt, q, k, v, seql, nseq, rows, rseq, nrows, scale, ref, &err)) {
                fprintf(stderr, "qattn kvcache: %s layer %zu: %s\n", data[fi], lsel[li], err.msg);
                rc2 = QATTN_EXIT_FAIL;
                break;
            }
            run_cfg rcc = *rc;
            char failmsg[600] = "";
#pragma omp parallel for schedule(dynamic)
            for (size_t c = 0; c < NCELLS; c++) {
                qattn_err e2;
                if (run_cell(&cells[c], &rcc, mt, q, k, v, seql, nseq, rows, rseq, nrows, scale,
                             o + c * hq * nrows * d, &e2)) {
#pragma omp critical
                    snprintf(failmsg, sizeof failmsg, "%s layer %zu cell %s/%s/%s: %s", data[fi], lsel[li],
                             cells[c].k, cells[c].smooth, cells[c].v, e2.msg);
                }
            }
            if (failmsg[0]) {
                fprintf(stderr, "qattn kvcache: %s\n", failmsg);
                rc2 = QATTN_EXIT_FAIL;
                break;
            }
            for (size_t hi = 0; hi < nh; hi++) {
                head_res *hr = &res[*nout + li * nh + hi];
                size_t h = hsel[hi];
                hr->model = fi;
                hr->layer = lsel[li];
                hr->head = h;
                hr->rows = nrows;
                for (size_t c = 0; c < NCELLS; c++)
                    qattn_metrics_compute(o + (c * hq + h) * nrows * d, ref + h * nrows * d, nrows, d, &hr->m[c]);
            }
            fprintf(stderr, "qattn kvcache: %s layer %zu done (%zu/%zu)\n", mt->model, lsel[li], li + 1, nl);
        }
        if (!rc2)
            *nout += nl * nh;
        free(rows);
        free(rseq);
        free(q);
        free(k);
        free(v);
        free(ref);
        free(o);
        qattn_act_close(&f);
        if (rc2)
            return rc2;
    }
    return QATTN_EXIT_OK;
}

static void cell_specs(size_t c, long group, char *ks, char *vs)
{
    qattn_operand op;
    operand(cells[c].k, group, &op, ks, 64);
    operand(cells[c].v, group, &op, vs, 64);
}

static void write_cells(FILE *f, const head_res *h, size_t n, char (*models)[256], long group)
{
    fprintf(f, "model,layer,head,label,k_cache,smooth,v_cache,rows,cos,rel_l1,rmse,max_abs,row_cos_min,k_spec,"
               "v_spec\n");
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < NCELLS; c++) {
            char ks[64], vs[64];
            cell_specs(c, group, ks, vs);
            const qattn_metrics *m = &h[i].m[c];
            fprintf(f, "%s,%zu,%zu,%s/%s/%s,%s,%s,%s,%zu,%.10g,%.10g,%.10g,%.10g,%.10g,", models[h[i].model],
                    h[i].layer, h[i].head, cells[c].k, cells[c].smooth, cells[c].v, cells[c].k, cells[c].smooth,
                    cells[c].v, h[i].rows, m->cos, m->rel_l1, m->rmse, m->max_abs, m->row_cos_min);
            qattn_cli_csv_quote(f, ks);
            fputc(',', f);
            qattn_cli_csv_quote(f, vs);
            fputc('\n', f);
        }
}

static int write_summary(FILE *f, const head_res *h, size_t n, char (*models)[256], size_t nmodels, long group,
                         size_t nboot, unsigned long seed)
{
    fprintf(f, "model,label,k_cache,smooth,v_cache,n,cos_mean,cos_ci_lo,cos_ci_hi,cos_worst_head,"
               "one_minus_cos_mean,one_minus_cos_ci_lo,one_minus_cos_ci_hi,one_minus_cos_worst_head,rel_l1_mean,rel_l1_ci_lo,rel_l1_ci_hi,"
               "rel_l1_worst_head,k_spec,v_spec\n");
    double *x = malloc((n + 1) * sizeof *x), *y = malloc((n + 1) * sizeof *y), *z = malloc((n + 1) * sizeof *z);
    int rc = x && y && z ? 0 : -1;
    for (size_t mi = 0; mi < nmodels && !rc; mi++)
        for (size_t c = 0; c < NCELLS; c++) {
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (h[i].model == mi) {
                    x[m] = h[i].m[c].cos;
                    y[m] = 1 - h[i].m[c].cos;
                    z[m++] = h[i].m[c].rel_l1;
                }
            if (!m)
                continue;
            qattn_stats sc, s1, sl;
            qattn_err err;
            if (qattn_stats_compute(x, m, nboot, seed, &sc, &err) || qattn_stats_compute(y, m, nboot, seed, &s1, &err) ||
                qattn_stats_compute(z, m, nboot, seed, &sl, &err)) {
                rc = -1;
                break;
            }
            char ks[64], vs[64];
            cell_specs(c, group, ks, vs);
            fprintf(f,
                    "%s,%s/%s/%s,%s,%s,%s,%zu,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,",
                    models[mi], cells[c].k, cells[c].smooth, cells[c].v, cells[c].k, cells[c].smooth, cells[c].v, m,
                    sc.mean, sc.ci_lo, sc.ci_hi, sc.min, s1.mean, s1.ci_lo, s1.ci_hi, s1.max, sl.mean, sl.ci_lo,
                    sl.ci_hi, sl.max);
            qattn_cli_csv_quote(f, ks);
            fputc(',', f);
            qattn_cli_csv_quote(f, vs);
            fputc('\n', f);
        }
    free(x);
    free(y);
    free(z);
    return rc;
}

typedef struct kv_out {
    const head_res *heads;
    size_t nheads;
    char (*models)[256];
    size_t nmodels;
    long group;
    size_t nboot;
    unsigned long seed;
} kv_out;

/* cells.csv and summary.csv; nonzero: out of memory */
static int write_outputs(FILE *const *f, void *ctx)
{
    const kv_out *w = ctx;
    write_cells(f[0], w->heads, w->nheads, w->models, w->group);
    return write_summary(f[1], w->heads, w->nheads, w->models, w->nmodels, w->group, w->nboot, w->seed);
}

int qattn_cmd_kvcache(int argc, char **argv)
{
    const char *data[64], *outdir = NULL;
    size_t ndata = 0;
    run_cfg rc0 = {16, 32, 0, 2000, 1, "all", "all"};
    const qattn_opt opts[] = {{"data", QATTN_OPT_LIST, data, &ndata, 0, 64},
                              {"out", QATTN_OPT_STR, &outdir, NULL, 0, 0},
                              {"stride", QATTN_OPT_INT, &rc0.stride, NULL, 1, 1000000},
                              {"group", QATTN_OPT_INT, &rc0.group, NULL, 1, 4096},
                              {"layers", QATTN_OPT_STR, &rc0.layers, NULL, 0, 0},
                              {"heads", QATTN_OPT_STR, &rc0.heads, NULL, 0, 0},
                              {"threads", QATTN_OPT_INT, &rc0.threads, NULL, 1, qattn_cli_threads_max()},
                              {"boot", QATTN_OPT_INT, &rc0.boot, NULL, 0, 100000000},
                              {"seed", QATTN_OPT_INT, &rc0.seed, NULL, 0, 100000000},
                              {NULL, 0, NULL, NULL, 0, 0}};
    int rc = qattn_cli_parse(argc, argv, opts, NULL);
    if (rc)
        return rc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : rc;
    if (!ndata || !outdir) {
        fprintf(stderr, "qattn kvcache: --data and --out are required (qattn kvcache --help)\n");
        return QATTN_EXIT_INPUT;
    }
    static const char *const outputs[2] = {"cells.csv", "summary.csv"};
    if ((rc = qattn_cli_check_out_dir("kvcache", outdir, outputs, 2)))
        return rc;
    char(*models)[256] = calloc(ndata, sizeof *models);
    head_res *heads = NULL;
    size_t nheads = 0;
    rc = models ? run_files(data, ndata, &rc0, &heads, &nheads, models) : QATTN_EXIT_FAIL;
    kv_out w = {heads, nheads, models, ndata, (long)rc0.group, (size_t)rc0.boot, (unsigned long)rc0.seed};
    if (!rc && !(rc = qattn_cli_write_outputs("kvcache", outdir, outputs, 2, write_outputs, &w)))
        fprintf(stderr, "qattn kvcache: %zu heads x %zu cells in %s\n", nheads, NCELLS, outdir);
    free(heads);
    free(models);
    return rc;
}
