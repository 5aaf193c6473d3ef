/* qattn outliers: per-layer channel statistics of Q, K and V (mean, std,
 * |mean|/std, max |x|, excess kurtosis over tokens) and which channels are
 * outliers; and qattn models: the activation files' provenance as CSV.
 * Contracts: studies/CSV.md. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "cli.h"
#include "commands.h"
#include "qattn/h5io.h"

#define OUTLIER_MEAN_OVER_STD 3.0 /* |mean| / std above this: an offset channel */
#define OUTLIER_AMAX_RATIO 6.0    /* max |x| above this x the median channel's */

typedef struct chan_stat {
    double mean, sd, mos, amax, kurt;
} chan_stat;

/* statistics of every channel of x [n, d] over its n tokens; col [n] scratch */
static void channel_stats(const float *x, size_t n, size_t d, double *col, chan_stat *cs)
{
    for (size_t c = 0; c < d; c++) {
        double amax = 0;
        for (size_t t = 0; t < n; t++) {
            col[t] = x[t * d + c];
            amax = fmax(amax, fabs(col[t]));
        }
        double mean = gsl_stats_mean(col, 1, n);
        double sd = n > 1 ? gsl_stats_sd_m(col, 1, n, mean) : 0.0;
        cs[c].mean = mean;
        cs[c].sd = sd;
        cs[c].mos = sd > 0 ? fabs(mean) / sd : (mean != 0 ? INFINITY : 0.0);
        cs[c].amax = amax;
        cs[c].kurt = (n > 3 && sd > 0) ? gsl_stats_kurtosis_m_sd(col, 1, n, mean, sd) : 0.0;
    }
}

static double median_of(double *x, size_t n)
{
    gsl_sort(x, 1, n);
    return gsl_stats_median_from_sorted_data(x, 1, n);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: qattn outliers --data F.h5 [--data G.h5 ...] --out DIR\n\n"
               "Channel statistics of Q, K and V per model, layer, tensor and head, over all tokens:\n"
               "mean, std, |mean|/std, max |x| and excess kurtosis; a channel is an outlier when\n"
               "|mean|/std > 3 or its max |x| exceeds 6x the median channel's. Writes\n"
               "DIR/channels.csv and DIR/summary.csv (studies/CSV.md).\n");
    qattn_cli_files_usage(f);
}

int qattn_cmd_outliers(int argc, char **argv)
{
    const char *data[64], *outdir = NULL;
    size_t ndata = 0;
    const qattn_opt opts[] = {
        {"data", QATTN_OPT_LIST, data, &ndata, 0, 64},
        {"out", QATTN_OPT_STR, &outdir, NULL, 0, 0},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    if (ndata == 0 || !outdir) {
        fprintf(stderr, "qattn outliers: --data and --out are required (qattn outliers --help)\n");
        return QATTN_EXIT_INPUT;
    }
    static const char *const outputs[2] = {"channels.csv", "summary.csv"};
    if ((prc = qattn_cli_check_out_dir("outliers", outdir, outputs, 2)))
        return prc;
    qattn_err err;
    for (size_t fi = 0; fi < ndata; fi++) {
        qattn_act_file f;
        if (qattn_act_open(data[fi], &f, &err)) {
            fprintf(stderr, "qattn outliers: %s\n", err.msg);
            return QATTN_EXIT_INPUT;
        }
        /* one layer in float32 and a column of float64 */
        const qattn_act_meta *mt = &f.meta;
        double need = (double)(mt->hq + 2 * mt->hkv) * (double)mt->n * (double)mt->d * 4 + (double)mt->n * 8;
        int mrc = qattn_cli_memory_check("outliers", data[fi], need);
        qattn_act_close(&f);
        if (mrc)
            return mrc;
    }
    if (qattn_cli_mkdirs(outdir)) {
        fprintf(stderr, "qattn outliers: cannot create %s: %s\n", outdir, strerror(errno));
        return QATTN_EXIT_INPUT;
    }
    qattn_out outs[2];
    if (qattn_out_open_all(outs, outdir, outputs, 2)) {
        fprintf(stderr, "qattn outliers: cannot write into %s: %s\n", outdir, strerror(errno));
        return QATTN_EXIT_FAIL;
    }
    FILE *fc = outs[0].f, *fs = outs[1].f;
    fprintf(fc, "model,layer,tensor,head,channel,mean,std,mean_over_std,max_abs,kurtosis,outlier\n");
    fprintf(fs, "model,layer,tensor,max_mean_over_std,median_mean_over_std,max_kurtosis,amax_ratio,"
                  "n_outlier_channels,n_channels\n");
    int rc = QATTN_EXIT_OK;
    for (size_t fi = 0; fi < ndata && rc == QATTN_EXIT_OK; fi++) {
        qattn_act_file f;
        if (qattn_act_open(data[fi], &f, &err)) {
            fprintf(stderr, "qattn outliers: %s\n", err.msg);
            rc = QATTN_EXIT_INPUT;
            break;
        }
        const qattn_act_meta *mt = &f.meta;
        size_t n = mt->n, d = mt->d;
        float *t3[3] = {malloc(mt->hq * n * d * sizeof(float)), malloc(mt->hkv * n * d * sizeof(float)),
                        malloc(mt->hkv * n * d * sizeof(float))};
        size_t hmax_heads = mt->hq > mt->hkv ? mt->hq : mt->hkv;
        double *col = malloc(n * sizeof *col), *tmp = malloc(d * sizeof *tmp),
               *mos = malloc(hmax_heads * d * sizeof *mos);
        chan_stat *cs = malloc(d * sizeof *cs);
        if (!t3[0] || !t3[1] || !t3[2] || !col || !tmp || !mos || !cs) {
            fprintf(stderr, "qattn outliers: %s: out of memory\n", data[fi]);
            rc = QATTN_EXIT_FAIL;
        }
        for (size_t l = 0; l < mt->nlayers && rc == QATTN_EXIT_OK; l++) {
            if (qattn_act_read_layer(&f, l, t3[0], t3[1], t3[2], &err)) {
                fprintf(stderr, "qattn outliers: %s\n", err.msg);
                rc = QATTN_EXIT_INPUT;
                break;
            }
            const char *names[3] = {"q", "k", "v"};
            for (int ti = 0; ti < 3; ti++) {
                size_t nh = ti == 0 ? mt->hq : mt->hkv, nout = 0, nmos = 0;
                double max_mos = 0, max_kurt = -INFINITY, amax_ratio = 0;
                for (size_t h = 0; h < nh; h++) {
                    channel_stats(t3[ti] + h * n * d, n, d, col, cs);
                    for (size_t ch = 0; ch < d; ch++)
                        tmp[ch] = cs[ch].amax;
                    double med = median_of(tmp, d);
                    double hmax = 0;
                    for (size_t ch = 0; ch < d; ch++) {
                        int out = cs[ch].mos > OUTLIER_MEAN_OVER_STD || cs[ch].amax > OUTLIER_AMAX_RATIO * med;
                        nout += out;
                        max_mos = fmax(max_mos, cs[ch].mos);
                        max_kurt = fmax(max_kurt, cs[ch].kurt);
                        hmax = fmax(hmax, cs[ch].amax);
                        mos[nmos++] = cs[ch].mos;
                        fprintf(fc, "%s,%zu,%s,%zu,%zu,%.6g,%.6g,%.6g,%.6g,%.6g,%d\n", mt->model, l, names[ti], h,
                                ch, cs[ch].mean, cs[ch].sd, cs[ch].mos, cs[ch].amax, cs[ch].kurt, out);
                    }
                    amax_ratio = fmax(amax_ratio, med > 0 ? hmax / med : 0.0);
                }
                /* median |mean|/std over all channels of all heads (as the max and the counts) */
                double med_mos = median_of(mos, nmos);
                fprintf(fs, "%s,%zu,%s,%.6g,%.6g,%.6g,%.6g,%zu,%zu\n", mt->model, l, names[ti], max_mos, med_mos,
                        max_kurt, amax_ratio, nout, nh * d);
            }
        }
        for (int ti = 0; ti < 3; ti++)
            free(t3[ti]);
        free(col);
        free(tmp);
        free(mos);
        free(cs);
        qattn_act_close(&f);
    }
    if (rc != QATTN_EXIT_OK) {
        qattn_out_abort(&outs[0]);
        qattn_out_abort(&outs[1]);
    } else if (qattn_out_commit_all(outs, 2)) {
        fprintf(stderr, "qattn outliers: cannot write into %s: %s\n", outdir, strerror(errno));
        rc = QATTN_EXIT_FAIL;
    }
    return rc;
}

int qattn_cmd_models(int argc, char **argv)
{
    const char *data[64], *out = NULL;
    size_t ndata = 0;
    const qattn_opt opts[] = {
        {"data", QATTN_OPT_LIST, data, &ndata, 0, 64},
        {"out", QATTN_OPT_STR, &out, NULL, 0, 0},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc == QATTN_CLI_HELP)
        printf("usage: qattn models --data F.h5 [--data G.h5 ...] --out FILE.csv\n\n"
               "One CSV row per activation file with its shapes and provenance attributes.\n");
    if (prc)
        return prc == QATTN_CLI_HELP ? QATTN_EXIT_OK : prc;
    if (ndata == 0 || !out) {
        fprintf(stderr, "qattn models: --data and --out are required\n");
        return QATTN_EXIT_INPUT;
    }
    if ((prc = qattn_cli_check_out_file("models", "--out", out)))
        return prc;
    qattn_act_file *fs = calloc(ndata, sizeof *fs);
    qattn_err err;
    size_t opened = 0;
    int rc = QATTN_EXIT_OK;
    for (; opened < ndata; opened++)
        if (qattn_act_open_rows(data[opened], &fs[opened], &err)) { /* the layout files too: meta only */
            fprintf(stderr, "qattn models: %s\n", err.msg);
            rc = QATTN_EXIT_INPUT;
            break;
        }
    qattn_out o;
    if (rc == QATTN_EXIT_OK && qattn_out_open(&o, out)) {
        fprintf(stderr, "qattn models: cannot write %s: %s\n", out, strerror(errno));
        rc = QATTN_EXIT_INPUT;
    }
    if (rc == QATTN_EXIT_OK) {
        fprintf(o.f, "model,file,layers,heads,kv_heads,tokens,head_dim,eval_loss,vocab_size,source,text_source,"
                     "license\n");
        for (size_t i = 0; i < ndata; i++) {
            const qattn_act_meta *m = &fs[i].meta;
            const char *base = strrchr(data[i], '/');
            fprintf(o.f, "%s,%s,%zu,%zu,%zu,%zu,%zu,", m->model, base ? base + 1 : data[i], m->nlayers, m->hq, m->hkv,
                    m->n, m->d);
            if (m->has_eval_loss)
                fprintf(o.f, "%.6g,", m->eval_loss);
            else
                fprintf(o.f, "nan,");
            if (m->has_vocab_size)
                fprintf(o.f, "%ld,", m->vocab_size);
            else
                fprintf(o.f, "nan,");
            qattn_cli_csv_quote(o.f, m->source);
            fputc(',', o.f);
            qattn_cli_csv_quote(o.f, m->text_source);
            fputc(',', o.f);
            qattn_cli_csv_quote(o.f, m->license);
            fputc('\n', o.f);
        }
        if (qattn_out_commit(&o)) {
            fprintf(stderr, "qattn models: cannot write %s: %s\n", out, strerror(errno));
            qattn_out_abort(&o);
            rc = QATTN_EXIT_FAIL;
        }
    }
    for (size_t i = 0; i < opened; i++)
        qattn_act_close(&fs[i]);
    free(fs);
    return rc;
}
