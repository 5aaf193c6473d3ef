/* qattn inspect: validate an activation file (every layer is read, so NaN
 * and Inf are caught) and print its attributes, shape and per-layer channel
 * statistics of Q, K and V.
 *
 * Statistics of one tensor [H, N, d] of one layer, per head h and channel c
 * over all tokens: mean m_hc, population std s_hc, amax_hc = max_t |x|.
 *   mean_abs_mean     mean over (h, c) of |m_hc|
 *   max_mean_over_std max over (h, c) of |m_hc| / s_hc  (channel-outlier
 *                     ratio; large for K in real models)
 *   max_abs           max |x| over the whole tensor
 *   amax_ratio        max over heads of (max_c amax_hc / median_c amax_hc)
 *   top_channel       c of the (h, c) with the largest |m| / s */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qattn/h5io.h"

typedef struct chan_stats {
    double mean_abs_mean, max_mean_over_std, max_abs, amax_ratio;
    size_t top_channel, top_head;
} chan_stats;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* x [heads, n, d]; work: sum [d], amax [d], sorted [d] doubles */
static void tensor_stats(const float *x, size_t heads, size_t n, size_t d, double *sum,
                         double *amax, double *sorted, chan_stats *st)
{
    memset(st, 0, sizeof *st);
    double abs_mean_total = 0;
    for (size_t h = 0; h < heads; h++) {
        const float *xh = x + h * n * d;
        for (size_t c = 0; c < d; c++)
            sum[c] = 0, amax[c] = 0;
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < d; c++) {
                double v = xh[t * d + c];
                sum[c] += v;
                if (fabs(v) > amax[c])
                    amax[c] = fabs(v);
            }
        for (size_t c = 0; c < d; c++) {
            double m = sum[c] / (double)n, ss = 0;
            for (size_t t = 0; t < n; t++) {
                double dv = xh[t * d + c] - m;
                ss += dv * dv;
            }
            double s = sqrt(ss / (double)n);
            double ratio = s > 0 ? fabs(m) / s : (m != 0 ? INFINITY : 0);
            abs_mean_total += fabs(m);
            if (ratio > st->max_mean_over_std || (h == 0 && c == 0)) {
                st->max_mean_over_std = ratio;
                st->top_channel = c;
                st->top_head = h;
            }
            if (amax[c] > st->max_abs)
                st->max_abs = amax[c];
        }
        memcpy(sorted, amax, d * sizeof *sorted);
        qsort(sorted, d, sizeof *sorted, cmp_double);
        double med = d % 2 ? sorted[d / 2] : 0.5 * (sorted[d / 2 - 1] + sorted[d / 2]);
        double top = sorted[d - 1];
        double r = med > 0 ? top / med : (top > 0 ? INFINITY : 0);
        if (r > st->amax_ratio)
            st->amax_ratio = r;
    }
    st->mean_abs_mean = abs_mean_total / (double)(heads * d);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn inspect F.h5 [--csv]\n"
            "\n"
            "Validate an activation file (every layer is read) and print its attributes and,\n"
            "per layer and tensor (q, k, v), channel statistics over tokens, per head:\n"
            "  mean|mean|     mean over heads and channels of |channel mean|\n"
            "  max|mean|/std  largest |channel mean| / channel std (channel-outlier ratio)\n"
            "  max|x|         largest magnitude\n"
            "  amax ratio     largest channel max|x| over the median channel max|x| (max over heads)\n"
            "  top channel    channel (and head) with the largest |mean|/std\n"
            "\n"
            "  --csv          print only the per-layer rows as CSV on stdout:\n"
            "                 layer,tensor,mean_abs_mean,max_mean_over_std,max_abs,amax_ratio,top_channel\n");
    qattn_cli_files_usage(f);
}

static void print_header(const qattn_act_file *f)
{
    const qattn_act_meta *m = &f->meta;
    printf("file          %s\n", f->path);
    printf("model         %s\n", m->model);
    printf("source        %s\n", m->source);
    printf("license       %s\n", m->license);
    printf("text_source   %s\n", m->text_source);
    printf("rope_applied  %d\n", m->rope_applied);
    printf("causal        %d\n", m->causal);
    if (m->has_eval_loss)
        printf("eval_loss     %.6g\n", m->eval_loss);
    if (m->has_vocab_size)
        printf("vocab_size    %ld\n", m->vocab_size);
    if (m->has_softmax_scale)
        printf("softmax_scale %.6g\n", m->softmax_scale);
    printf("layers        %zu\n", m->nlayers);
    printf("heads (q)     %zu\n", m->hq);
    printf("heads (kv)    %zu\n", m->hkv);
    printf("tokens        %zu\n", m->n);
    if (m->nseq) {
        printf("seqlens       %zu sequences:", m->nseq);
        size_t show = m->nseq <= 16 ? m->nseq : 12;
        for (size_t i = 0; i < show; i++)
            printf(" %lld", (long long)m->seqlens[i]);
        if (show < m->nseq)
            printf(" ... %lld", (long long)m->seqlens[m->nseq - 1]);
        printf("\n");
    } else {
        printf("seqlens       none (one sequence)\n");
    }
    printf("head dim      %zu\n", m->d);
    printf("dtype         %s\n", m->f16 ? "float16" : "float32");
    printf("\n%-6s %-6s %12s %14s %12s %11s %12s\n", "layer", "tensor", "mean|mean|",
           "max|mean|/std", "max|x|", "amax ratio", "top channel");
}

int qattn_cmd_inspect(int argc, char **argv)
{
    int csv = 0;
    const qattn_opt opts[] = {{"csv", QATTN_OPT_FLAG, &csv, NULL, 0, 0}, {NULL, 0, NULL, NULL, 0, 0}};
    int first = 0, prc = qattn_cli_parse(argc, argv, opts, &first);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    if (argc - first != 1) {
        fprintf(stderr, "qattn inspect: %s (usage: qattn inspect F.h5 [--csv])\n",
                argc - first ? "expected exactly one file" : "missing the activation file");
        return QATTN_EXIT_INPUT;
    }
    const char *path = argv[first];

    qattn_act_file f;
    qattn_err err = {""};
    int e = qattn_act_open(path, &f, &err);
    if (e) {
        fprintf(stderr, "qattn inspect: %s\n", err.msg);
        return e == QATTN_ERR_NOMEM ? QATTN_EXIT_FAIL : QATTN_EXIT_INPUT;
    }
    const qattn_act_meta *m = &f.meta;
    size_t nd = m->n * m->d;
    int mrc = qattn_cli_memory_check("inspect", path, (double)(m->hq + 2 * m->hkv) * (double)nd * 4);
    if (mrc) {
        qattn_act_close(&f);
        return mrc;
    }
    float *q = malloc(m->hq * nd * sizeof *q);
    float *k = malloc(m->hkv * nd * sizeof *k);
    float *v = malloc(m->hkv * nd * sizeof *v);
    double *work = malloc(3 * m->d * sizeof *work);
    int rc = QATTN_EXIT_OK;
    if (!q || !k || !v || !work) {
        fprintf(stderr, "qattn inspect: %s: out of memory for one layer (%zu values)\n", path,
                (m->hq + 2 * m->hkv) * nd);
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    /* rows are collected first so that a bad layer gives only the error */
    chan_stats *rows = calloc(m->nlayers * 3, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "qattn inspect: %s: out of memory\n", path);
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    for (size_t l = 0; l < m->nlayers; l++) {
        e = qattn_act_read_layer(&f, l, q, k, v, &err);
        if (e) {
            fprintf(stderr, "qattn inspect: %s\n", err.msg);
            rc = e == QATTN_ERR_NOMEM ? QATTN_EXIT_FAIL : QATTN_EXIT_INPUT;
            free(rows);
            goto done;
        }
        tensor_stats(q, m->hq, m->n, m->d, work, work + m->d, work + 2 * m->d, &rows[3 * l]);
        tensor_stats(k, m->hkv, m->n, m->d, work, work + m->d, work + 2 * m->d,
                     &rows[3 * l + 1]);
        tensor_stats(v, m->hkv, m->n, m->d, work, work + m->d, work + 2 * m->d,
                     &rows[3 * l + 2]);
        qattn_cli_progress("inspect: layer", l + 1, m->nlayers);
    }
    static const char *tn[3] = {"q", "k", "v"};
    if (csv)
        printf("layer,tensor,mean_abs_mean,max_mean_over_std,max_abs,amax_ratio,top_channel\n");
    else
        print_header(&f);
    for (size_t l = 0; l < m->nlayers; l++)
        for (int t = 0; t < 3; t++) {
            const chan_stats *s = &rows[3 * l + t];
            if (csv)
                printf("%zu,%s,%.6g,%.6g,%.6g,%.6g,%zu\n", l, tn[t], s->mean_abs_mean,
                       s->max_mean_over_std, s->max_abs, s->amax_ratio, s->top_channel);
            else
                printf("%-6zu %-6s %12.4g %14.4g %12.4g %11.4g %5zu (h%zu)\n", l, tn[t],
                       s->mean_abs_mean, s->max_mean_over_std, s->max_abs, s->amax_ratio,
                       s->top_channel, s->top_head);
        }
    free(rows);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "qattn inspect: cannot write the output\n");
        rc = QATTN_EXIT_FAIL;
    }
done:
    free(q), free(k), free(v), free(work);
    qattn_act_close(&f);
    return rc;
}
