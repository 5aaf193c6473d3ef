/* The emulation studies of the paper: each defines its grid of cells and
 * hands it to the engine (study.c). CSV contracts: studies/CSV.md. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "study.h"

static int run_study(qattn_study *st, int argc, char **argv)
{
    int rc = qattn_study_main(st, argc, argv);
    qattn_study_free(st);
    return rc;
}

/* Q and K groups for one granularity name, as the kernels tile: per-block
 * Q 128 / K 64, per-warp Q 32 / K 64, per-thread on mma.m16n8k32 Q
 * thread:32/8/1 / K thread:64/8/2. */
static void groups(const char *g, const char **qg, const char **kg)
{
    if (!strcmp(g, "tensor")) {
        *qg = "tensor";
        *kg = "tensor";
    } else if (!strcmp(g, "block")) {
        *qg = "block:128";
        *kg = "block:64";
    } else if (!strcmp(g, "warp")) {
        *qg = "warp:32";
        *kg = "warp:64";
    } else if (!strcmp(g, "thread")) {
        *qg = "thread:32/8/1";
        *kg = "thread:64/8/2";
    } else {
        *qg = "token";
        *kg = "token";
    }
}

int qattn_cmd_granularity(int argc, char **argv)
{
    qattn_study st = {"granularity",
                      "Q and K in int4, int8, e4m3 and e5m2 at per-tensor, per-block, per-warp, per-thread and\n"
                      "per-token scale groups, with and without smoothing K; P and V in fp16, fp32 accumulator,\n"
                      "so only the Q.K quantization differs between cells.",
                      "qk_fmt,group,smooth", NULL, 0};
    const char *fmts[] = {"int4", "int8", "e4m3", "e5m2"};
    const char *gs[] = {"tensor", "block", "warp", "thread", "token"};
    const char *sm[] = {"none", "k"};
    for (int f = 0; f < 4; f++)
        for (int g = 0; g < 5; g++)
            for (int s = 0; s < 2; s++) {
                const char *qg, *kg;
                groups(gs[g], &qg, &kg);
                char label[96], factors[160], spec[512];
                snprintf(label, sizeof label, "%s/%s/%s", fmts[f], gs[g], sm[s]);
                snprintf(factors, sizeof factors, "%s,%s,%s", fmts[f], gs[g], sm[s]);
                snprintf(spec, sizeof spec, "q=%s@%s k=%s@%s p=fp16 v=fp16 smooth=%s acc=fp32 out=fp32", fmts[f], qg,
                         fmts[f], kg, sm[s]);
                qattn_study_add(&st, label, factors, spec, 0);
            }
    return run_study(&st, argc, argv);
}

int qattn_cmd_smoothing(int argc, char **argv)
{
    qattn_study st = {"smoothing",
                      "Smoothing ablation: none, K, Q, Q+K and Q+K+V for int4 and int8 per-thread Q/K, with\n"
                      "P e4m3 (static scale) and V e4m3 per-channel, fp32 accumulator.",
                      "qk_fmt,smooth", NULL, 0};
    const char *fmts[] = {"int4", "int8"};
    const char *sm[] = {"none", "k", "q", "q+k", "q+k+v"};
    for (int f = 0; f < 2; f++)
        for (int s = 0; s < 5; s++) {
            char label[96], factors[160], spec[512];
            snprintf(label, sizeof label, "%s/%s", fmts[f], sm[s]);
            snprintf(factors, sizeof factors, "%s,%s", fmts[f], sm[s]);
            snprintf(spec, sizeof spec,
                     "q=%s@thread:32/8/1 k=%s@thread:64/8/2 p=e4m3@static v=e4m3@channel smooth=%s acc=fp32 out=fp32",
                     fmts[f], fmts[f], sm[s]);
            qattn_study_add(&st, label, factors, spec, 0);
        }
    return run_study(&st, argc, argv);
}

int qattn_cmd_pv(int argc, char **argv)
{
    qattn_study st = {"pv",
                      "P and V types: fp16, e4m3, e5m2 and int8 (P with a static scale, V per-channel) after int8\n"
                      "(smooth k) or int4 (smooth q+k) per-thread Q.K; fp32 accumulator.",
                      "qk_fmt,pv_fmt", NULL, 0};
    const char *qk[] = {"int8", "int4"};
    const char *pv[] = {"fp16", "e4m3", "e5m2", "int8"};
    for (int f = 0; f < 2; f++)
        for (int p = 0; p < 4; p++) {
            char label[96], factors[160], spec[512], pvspec[96];
            if (p == 0)
                snprintf(pvspec, sizeof pvspec, "p=fp16 v=fp16");
            else
                snprintf(pvspec, sizeof pvspec, "p=%s@static v=%s@channel", pv[p], pv[p]);
            snprintf(label, sizeof label, "%s/%s", qk[f], pv[p]);
            snprintf(factors, sizeof factors, "%s,%s", qk[f], pv[p]);
            snprintf(spec, sizeof spec, "q=%s@thread:32/8/1 k=%s@thread:64/8/2 %s smooth=%s acc=fp32 out=fp32",
                     qk[f], qk[f], pvspec, f ? "q+k" : "k");
            qattn_study_add(&st, label, factors, spec, 0);
        }
    return run_study(&st, argc, argv);
}

int qattn_cmd_accumulator(int argc, char **argv)
{
    qattn_study st = {"accumulator",
                      "P.V accumulation: with int8 per-thread Q.K and e4m3 P/V (the FP22 case of Ada/Hopper),\n"
                      "fp32 vs fp22 vs two-level fp22+fp32:N (N = 16..512) vs fp16; with fp16 P/V, fp16 vs fp32.",
                      "pv,acc,chunk", NULL, 0};
    const char *base = "q=int8@thread:32/8/1 k=int8@thread:64/8/2 p=e4m3@static v=e4m3@channel smooth=k kblock=64 "
                       "out=fp32";
    char spec[512], label[96], factors[160];
    const char *single[] = {"fp32", "fp22", "fp16"};
    for (int i = 0; i < 3; i++) {
        snprintf(spec, sizeof spec, "%s acc=%s", base, single[i]);
        snprintf(label, sizeof label, "e4m3/%s", single[i]);
        snprintf(factors, sizeof factors, "e4m3,%s,0", single[i]);
        qattn_study_add(&st, label, factors, spec, 0);
    }
    for (int nch = 16; nch <= 512; nch *= 2) {
        snprintf(spec, sizeof spec, "%s acc=fp22+fp32:%d", base, nch);
        snprintf(label, sizeof label, "e4m3/fp22+fp32:%d", nch);
        snprintf(factors, sizeof factors, "e4m3,fp22+fp32,%d", nch);
        qattn_study_add(&st, label, factors, spec, 0);
    }
    const char *fp16pv = "q=int8@block:128 k=int8@block:64 p=fp16 v=fp16 smooth=k kblock=64 out=fp32";
    for (int i = 0; i < 2; i++) {
        snprintf(spec, sizeof spec, "%s acc=%s", fp16pv, i ? "fp16" : "fp32");
        snprintf(label, sizeof label, "fp16/%s", i ? "fp16" : "fp32");
        snprintf(factors, sizeof factors, "fp16,%s,0", i ? "fp16" : "fp32");
        qattn_study_add(&st, label, factors, spec, 0);
    }
    return run_study(&st, argc, argv);
}

int qattn_cmd_kbias(int argc, char **argv)
{
    qattn_study st = {"kbias",
                      "AUGMENTED REAL DATA. Every key gets b = r x (channel std of K) along its channel mean's\n"
                      "sign, r in {0, 1, 2, 4, 8, 16, 32}: exact attention is unchanged (q.b shifts a whole row\n"
                      "of S), only K gets harder to quantize. int8, int4 and e4m3 per-block Q/K (Q 128, K 64),\n"
                      "with and without smoothing K; P and V fp16, fp32 accumulator. The reference is float64\n"
                      "attention on the unaugmented file.",
                      "r,qk_fmt,smooth", NULL, 0};
    const int rs[] = {0, 1, 2, 4, 8, 16, 32};
    const char *fmts[] = {"int8", "int4", "e4m3"};
    const char *sm[] = {"none", "k"};
    for (int ri = 0; ri < 7; ri++)
        for (int f = 0; f < 3; f++)
            for (int s = 0; s < 2; s++) {
                char label[96], factors[160], spec[512];
                snprintf(label, sizeof label, "r%d/%s/%s", rs[ri], fmts[f], sm[s]);
                snprintf(factors, sizeof factors, "%d,%s,%s", rs[ri], fmts[f], sm[s]);
                snprintf(spec, sizeof spec, "q=%s@block:128 k=%s@block:64 p=fp16 v=fp16 smooth=%s acc=fp32 out=fp32",
                         fmts[f], fmts[f], sm[s]);
                qattn_study_add(&st, label, factors, spec, (double)rs[ri]);
            }
    return run_study(&st, argc, argv);
}

int qattn_cmd_pareto_cells(int argc, char **argv)
{
    qattn_study st = {"pareto-cells",
                      "Accuracy of every scheme that has (or is planned to have) a GPU kernel, for the\n"
                      "accuracy-vs-throughput Pareto figure (qattn pareto joins it with GPU benchmarks).",
                      "kernel", NULL, 0};
    const char *kernels[] = {"fp16", "bf16", "sage1-b", "sage2-8b", "sage2-8b-sm90", "sage2-4b", "fa3-fp8",
                             "ck-i8fp8bf16", "ck-i4fp8bf16", "ck-fp8bf16"};
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++)
        qattn_study_add(&st, kernels[i], kernels[i], kernels[i], 0);
    return run_study(&st, argc, argv);
}
