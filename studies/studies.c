/* The studies of the paper, one record each (registry.h): grid, claims,
 * published values, figure and table. CSV contracts: studies/CSV.md;
 * published values as printed in the papers (docs/ANCHORS.md):
 * SageAttention, arXiv 2410.02367 (\cite{sageattn}); SageAttention2, arXiv
 * 2411.10958 (\cite{sageattn2}); cosines in percent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "paper.h"
#include "registry.h"

/* the cell at point v of r's factors: label the levels joined by '/' */
static void add(qattn_study *st, int nf, const char *const *v, const char *spec, double kbias_r)
{
    char label[96] = "", factors[160] = "";
    for (int f = 0; f < nf; f++) {
        snprintf(label + strlen(label), sizeof label - strlen(label), "%s%s", f ? "/" : "", v[f]);
        snprintf(factors + strlen(factors), sizeof factors - strlen(factors), "%s%s", f ? "," : "", v[f]);
    }
    qattn_study_add(st, label, factors, spec, kbias_r);
}

/* ---------------------------------------------------------- granularity */

static const char *const fmt4[] = {"int4", "int8", "e4m3", "e5m2", NULL};
static const char *const groups[] = {"tensor", "block", "warp", "thread", "token", NULL};
static const char *const smooth2[] = {"none", "k", NULL};

/* Q and K groups for one granularity name, as the kernels tile: per-block
 * Q 128 / K 64, per-warp Q 32 / K 64, per-thread on mma.m16n8k32 Q
 * thread:32/8/1 / K thread:64/8/2. */
static void granularity_cell(qattn_study *st, const char *const *v)
{
    static const char *const qk[][3] = {{"tensor", "tensor", "tensor"},  {"block", "block:128", "block:64"},
                                        {"warp", "warp:32", "warp:64"},  {"thread", "thread:32/8/1", "thread:64/8/2"},
                                        {"token", "token", "token"}};
    size_t g = 0;
    while (strcmp(qk[g][0], v[1]) && g < 4)
        g++;
    char spec[512];
    snprintf(spec, sizeof spec, "q=%s@%s k=%s@%s p=fp16 v=fp16 smooth=%s acc=fp32 out=fp32", v[0], qk[g][1], v[0],
             qk[g][2], v[2]);
    add(st, 3, v, spec, 0);
}

static const qattn_claim granularity_claims[] = {
    {"smooth_k_helps", "Smoothing K helps", "subtracting K's channel mean raises cos",
     "SageAttention~\\cite{sageattn}, INT8 Q,K, worst layer without $\\to$ with smoothing: per-token "
     "@SaOneSmoothTokenWithout $\\to$ @SaOneSmoothTokenWith\\%, per-block @SaOneSmoothBlockWithout $\\to$ "
     "@SaOneSmoothBlockWith\\%, per-tensor @SaOneSmoothTensorWithout $\\to$ @SaOneSmoothTensorWith\\%. "
     "SageAttention2~\\cite{sageattn2}, INT4 Q,K: none @SaTwoSmoothNoneCos\\%, K only @SaTwoSmoothKCos\\%.",
     NULL,
     {{"int8/block/k", "int8/block/none"},
      {"int4/block/k", "int4/block/none"},
      {"int8/token/k", "int8/token/none"},
      {"int8/tensor/k", "int8/tensor/none"},
      {NULL, NULL}}},
    {"finer_groups_help", "Finer scale groups help", "finer Q/K scale groups raise cos",
     "SageAttention2~\\cite{sageattn2}, INT4 Q,K, average (worst layer): per-token @SaTwoGranTokenCos "
     "(@SaTwoGranTokenWorst)\\%, per-warp @SaTwoGranWarpCos (@SaTwoGranWarpWorst)\\%, per-block "
     "@SaTwoGranBlockCos (@SaTwoGranBlockWorst)\\%, per-tensor @SaTwoGranTensorCos (@SaTwoGranTensorWorst)\\%.",
     NULL,
     {{"int4/thread/k", "int4/block/k"}, {"int4/thread/k", "int4/tensor/k"}, {"int4/token/k", "int4/thread/k"}, {NULL, NULL}}},
    {NULL, NULL, NULL, NULL, NULL, {{NULL, NULL}}}};

static const qattn_pub granularity_pubs[] = {
    /* SageAttention: smoothing K, worst layer, without -> with */
    {"SaOneSmoothTokenWithout", "62.24"},
    {"SaOneSmoothTokenWith", "99.47"},
    {"SaOneSmoothBlockWithout", "30.60"},
    {"SaOneSmoothBlockWith", "99.31"},
    {"SaOneSmoothTensorWithout", "41.40"},
    {"SaOneSmoothTensorWith", "98.06"},
    {"SaOneFaThreeFpEightWorst", "26.76"},
    /* SageAttention2: granularity with INT4 Q,K */
    {"SaTwoGranTokenCos", "99.45"},
    {"SaTwoGranTokenRelLOne", "0.0649"},
    {"SaTwoGranTokenRmse", "0.0335"},
    {"SaTwoGranWarpCos", "99.45"},
    {"SaTwoGranWarpRelLOne", "0.0648"},
    {"SaTwoGranWarpRmse", "0.0334"},
    {"SaTwoGranBlockCos", "98.03"},
    {"SaTwoGranBlockRelLOne", "0.1492"},
    {"SaTwoGranBlockRmse", "0.0744"},
    {"SaTwoGranTensorCos", "97.15"},
    {"SaTwoGranTensorRelLOne", "0.1800"},
    {"SaTwoGranTensorRmse", "0.0865"},
    {"SaTwoGranTokenWorst", "96.76"},
    {"SaTwoGranWarpWorst", "96.71"},
    {"SaTwoGranBlockWorst", "90.68"},
    {"SaTwoGranTensorWorst", "85.85"},
    {"SaTwoOverheadThread", "0.35"},
    {NULL, NULL}};

static const qattn_study_rec granularity = {
    .name = "granularity",
    .summary = "study: Q/K formats x scale groups, with and without smoothing K",
    .about = "Q and K in int4, int8, e4m3 and e5m2 at per-tensor, per-block, per-warp, per-thread and\n"
             "per-token scale groups, with and without smoothing K; P and V in fp16, fp32 accumulator,\n"
             "so only the Q.K quantization differs between cells.",
    .nf = 3,
    .factor = {{"qk_fmt", fmt4, "Q/K", "", NULL, NULL},
               {"group", groups, "group", "", NULL, NULL},
               {"smooth", smooth2, "smooth", "Smooth", NULL, NULL}},
    .cell = granularity_cell,
    .threads = 1,
    .resumable = 1,
    .table_name = "granularity",
    .input = "granularity/summary.csv",
    .abbrev = "gran",
    .title = "Scale granularity of Q and K",
    .figure = "granularity",
    .figure_in = "granularity/summary.csv",
    .claims = granularity_claims,
    .pubs = granularity_pubs,
};

/* ------------------------------------------------------------ smoothing */

static const char *const fmt_i4i8[] = {"int4", "int8", NULL};
static const char *const smooth5[] = {"none", "k", "q", "q+k", "q+k+v", NULL};

static void smoothing_cell(qattn_study *st, const char *const *v)
{
    char spec[512];
    snprintf(spec, sizeof spec,
             "q=%s@thread:32/8/1 k=%s@thread:64/8/2 p=e4m3@static v=e4m3@channel smooth=%s acc=fp32 out=fp32", v[0],
             v[0], v[1]);
    add(st, 2, v, spec, 0);
}

static const qattn_claim smoothing_claims[] = {
    {"smoothing_qk_helps", "Smoothing Q and K together helps",
     "smoothing both Q and K beats no smoothing and smoothing K alone",
     "SageAttention2~\\cite{sageattn2}, INT4 Q,K: no smoothing @SaTwoSmoothNoneCos\\%, K only "
     "@SaTwoSmoothKCos\\%, Q only @SaTwoSmoothQCos\\%, Q and K @SaTwoSmoothQKCos\\%.",
     NULL,
     {{"int4/q+k", "int4/none"}, {"int4/q+k", "int4/k"}, {NULL, NULL}}},
    {NULL, NULL, NULL, NULL, NULL, {{NULL, NULL}}}};

static const qattn_pub smoothing_pubs[] = {
    /* SageAttention2: smoothing ablation, overhead of smoothing Q */
    {"SaTwoSmoothNoneCos", "80.04"},
    {"SaTwoSmoothKCos", "98.07"},
    {"SaTwoSmoothQCos", "98.30"},
    {"SaTwoSmoothQKCos", "99.46"},
    {"SaTwoOverheadSmoothQ", "3.7"},
    {NULL, NULL}};

static const qattn_study_rec smoothing = {
    .name = "smoothing",
    .summary = "study: smoothing none / K / Q / Q+K / Q+K+V, int4 and int8",
    .about = "Smoothing ablation: none, K, Q, Q+K and Q+K+V for int4 and int8 per-thread Q/K, with\n"
             "P e4m3 (static scale) and V e4m3 per-channel, fp32 accumulator.",
    .nf = 2,
    .factor = {{"qk_fmt", fmt_i4i8, "Q/K", "", NULL, NULL}, {"smooth", smooth5, "smooth", "Smooth", NULL, NULL}},
    .cell = smoothing_cell,
    .threads = 1,
    .resumable = 1,
    .table_name = "smoothing",
    .input = "smoothing/summary.csv",
    .abbrev = "smooth",
    .title = "Smoothing ablation (per-thread Q/K groups)",
    .figure = "smoothing",
    .figure_in = "smoothing/summary.csv",
    .claims = smoothing_claims,
    .pubs = smoothing_pubs,
};

/* ------------------------------------------------------------------- pv */

static const char *const fmt_i8i4[] = {"int8", "int4", NULL};
static const char *const pv_fmts[] = {"fp16", "e4m3", "e5m2", "int8", NULL};

/* int8 Q.K with smooth k, int4 with smooth q+k; P static, V per channel */
static void pv_cell(qattn_study *st, const char *const *v)
{
    char spec[512], pv[96];
    if (!strcmp(v[1], "fp16"))
        snprintf(pv, sizeof pv, "p=fp16 v=fp16");
    else
        snprintf(pv, sizeof pv, "p=%s@static v=%s@channel", v[1], v[1]);
    snprintf(spec, sizeof spec, "q=%s@thread:32/8/1 k=%s@thread:64/8/2 %s smooth=%s acc=fp32 out=fp32", v[0], v[0],
             pv, strcmp(v[0], "int4") ? "k" : "q+k");
    add(st, 2, v, spec, 0);
}

static const qattn_claim pv_claims[] = {
    {"e4m3_beats_e5m2_pv", "E4M3 beats E5M2 for P and V", "E4M3 storage of P and V is more accurate than E5M2",
     "SageAttention~\\cite{sageattn}, INT8 Q,K: E4M3 @SaOnePvEFourMThreeCos\\% vs E5M2 @SaOnePvEFiveMTwoCos\\% on "
     "average, but @SaOnePvEFourMThreeWorst vs @SaOnePvEFiveMTwoWorst\\% in the worst layer. "
     "SageAttention2~\\cite{sageattn2}, INT4 Q,K: @SaTwoPvEFourMThreeCos vs @SaTwoPvEFiveMTwoCos\\%.",
     NULL,
     {{"int8/e4m3", "int8/e5m2"}, {"int4/e4m3", "int4/e5m2"}, {NULL, NULL}}},
    {"e4m3_beats_int8_pv", "E4M3 beats INT8 for P and V", "E4M3 storage of P and V is more accurate than INT8",
     "SageAttention~\\cite{sageattn}, INT8 Q,K: E4M3 @SaOnePvEFourMThreeCos\\% vs INT8 @SaOnePvIntEightCos\\% on "
     "average (worst layer @SaOnePvEFourMThreeWorst vs @SaOnePvIntEightWorst\\%). SageAttention2~\\cite{sageattn2}, "
     "INT4 Q,K: @SaTwoPvEFourMThreeCos vs @SaTwoPvIntEightCos\\%.",
     NULL,
     {{"int8/e4m3", "int8/int8"}, {"int4/e4m3", "int4/int8"}, {NULL, NULL}}},
    {NULL, NULL, NULL, NULL, NULL, {{NULL, NULL}}}};

static const qattn_pub pv_pubs[] = {
    /* SageAttention: Q,K INT8, P,V in E4M3 / E5M2 / INT8 / FP16, average over layers */
    {"SaOnePvEFourMThreeCos", "99.94"},
    {"SaOnePvEFourMThreeRelLOne", "0.0345"},
    {"SaOnePvEFourMThreeRmse", "\\ensuremath{3.53\\times10^{-3}}"},
    {"SaOnePvEFiveMTwoCos", "99.81"},
    {"SaOnePvEFiveMTwoRelLOne", "0.0572"},
    {"SaOnePvEFiveMTwoRmse", "\\ensuremath{6.11\\times10^{-3}}"},
    {"SaOnePvIntEightCos", "99.70"},
    {"SaOnePvIntEightRelLOne", "0.1035"},
    {"SaOnePvIntEightRmse", "\\ensuremath{6.82\\times10^{-3}}"},
    {"SaOnePvEFourMThreeWorst", "76.36"},
    {"SaOnePvEFiveMTwoWorst", "78.98"},
    {"SaOnePvIntEightWorst", "56.40"},
    {"SaOnePvFpSixteenCos", "99.99"},
    /* SageAttention2: P,V type with INT4 Q,K */
    {"SaTwoPvIntEightCos", "77.05"},
    {"SaTwoPvEFiveMTwoCos", "99.20"},
    {"SaTwoPvEFourMThreeCos", "99.44"},
    {"SaTwoPvFpSixteenCos", "99.45"},
    {NULL, NULL}};

static const qattn_study_rec pv = {
    .name = "pv",
    .summary = "study: P and V types after int8 or int4 Q.K",
    .about = "P and V types: fp16, e4m3, e5m2 and int8 (P with a static scale, V per-channel) after int8\n"
             "(smooth k) or int4 (smooth q+k) per-thread Q.K; fp32 accumulator.",
    .nf = 2,
    .factor = {{"qk_fmt", fmt_i8i4, "Q/K", "", NULL, NULL}, {"pv_fmt", pv_fmts, "P/V", "Pv", NULL, NULL}},
    .cell = pv_cell,
    .threads = 1,
    .resumable = 1,
    .table_name = "pv",
    .input = "pv/summary.csv",
    .abbrev = "pv",
    .title = "Storage type of P and V",
    .figure = "pv",
    .figure_in = "pv/summary.csv",
    .claims = pv_claims,
    .pubs = pv_pubs,
};

/* ---------------------------------------------------------- accumulator */

static const char *const acc_pv[] = {"e4m3", "fp16", NULL};
static const char *const accs[] = {"fp32", "fp16", "fp22", "fp22+fp32", NULL};
static const char *const chunks[] = {"0", "16", "32", "64", "128", "256", "512", NULL};

/* single-level accumulators first, then two-level by chunk, then fp16 P/V */
static void accumulator_cells(qattn_study *st)
{
    const char *base = "q=int8@thread:32/8/1 k=int8@thread:64/8/2 p=e4m3@static v=e4m3@channel smooth=k kblock=64 "
                       "out=fp32";
    char spec[512], label[96], factors[160];
    const char *single[] = {"fp32", "fp22", "fp16"};
    for (int i = 0; i < 3; i++) {
        snprintf(spec, sizeof spec, "%s acc=%s", base, single[i]);
        snprintf(label, sizeof label, "e4m3/%s", single[i]);
        snprintf(factors, sizeof factors, "e4m3,%s,0", single[i]);
        qattn_study_add(st, label, factors, spec, 0);
    }
    for (int nch = 16; nch <= 512; nch *= 2) {
        snprintf(spec, sizeof spec, "%s acc=fp22+fp32:%d", base, nch);
        snprintf(label, sizeof label, "e4m3/fp22+fp32:%d", nch);
        snprintf(factors, sizeof factors, "e4m3,fp22+fp32,%d", nch);
        qattn_study_add(st, label, factors, spec, 0);
    }
    const char *fp16pv = "q=int8@block:128 k=int8@block:64 p=fp16 v=fp16 smooth=k kblock=64 out=fp32";
    for (int i = 0; i < 2; i++) {
        snprintf(spec, sizeof spec, "%s acc=%s", fp16pv, i ? "fp16" : "fp32");
        snprintf(label, sizeof label, "fp16/%s", i ? "fp16" : "fp32");
        snprintf(factors, sizeof factors, "fp16,%s,0", i ? "fp16" : "fp32");
        qattn_study_add(st, label, factors, spec, 0);
    }
}

/* the two-level side beats plain fp22, and loses nothing against fp32 */
static qattn_expect two_level_expect(const char *a, const char *b)
{
    qattn_expect e = {QATTN_EXPECT_NONE, 0};
    int a2 = strstr(a, "fp22+") != NULL, b2 = strstr(b, "fp22+") != NULL;
    if (a2 != b2) {
        const char *other = a2 ? b : a;
        e.side = a2 ? 0 : 1;
        e.kind = strstr(other, "fp22") ? QATTN_EXPECT_BETTER : QATTN_EXPECT_NO_LOSS;
    }
    return e;
}

static int count_str(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* the side with the fp16 accumulator (fewer fp32s) loses nothing */
static qattn_expect fp16_acc_expect(const char *a, const char *b)
{
    qattn_expect e = {QATTN_EXPECT_NONE, 0};
    int na = count_str(a, "fp32"), nb = count_str(b, "fp32");
    if (na != nb) {
        e.kind = QATTN_EXPECT_NO_LOSS;
        e.side = na < nb ? 0 : 1;
    }
    return e;
}

static const qattn_claim accumulator_claims[] = {
    {"two_level_fixes_fp22", "Two-level accumulation removes the FP22 loss",
     "accumulating chunks in FP22 and adding them into FP32 beats plain FP22 and loses nothing against FP32",
     "SageAttention2~\\cite{sageattn2}: FP8 P$\\cdot$V on Ada and Hopper tensor cores accumulates in FP22 "
     "(1+8+13 bits); two-level accumulation fixes the loss (no accuracy numbers published).",
     two_level_expect,
     {{"e4m3/fp22+fp32:64", "e4m3/fp22"}, {"e4m3/fp32", "e4m3/fp22+fp32:64"}, {NULL, NULL}}},
    {"fp16_acc_ok", "An FP16 accumulator is enough", "an FP16 P$\\cdot$V accumulator is indistinguishable from FP32",
     "SageAttention~\\cite{sageattn}: FP16 and FP32 accumulators indistinguishable (average "
     "@SaOneAccFpSixteenCos\\%, worst layer @SaOneAccFpSixteenWorst\\%).",
     fp16_acc_expect,
     {{"fp16/fp32", "fp16/fp16"}, {NULL, NULL}}},
    {NULL, NULL, NULL, NULL, NULL, {{NULL, NULL}}}};

static const qattn_pub accumulator_pubs[] = {
    /* SageAttention: FP16 vs FP32 accumulator for P.V */
    {"SaOneAccFpSixteenCos", "99.98"},
    {"SaOneAccFpSixteenWorst", "99.84"},
    {NULL, NULL}};

static const qattn_study_rec accumulator = {
    .name = "accumulator",
    .summary = "study: fp32 / fp22 / two-level / fp16 P.V accumulators",
    .about = "P.V accumulation: with int8 per-thread Q.K and e4m3 P/V (the FP22 case of Ada/Hopper),\n"
             "fp32 vs fp22 vs two-level fp22+fp32:N (N = 16..512) vs fp16; with fp16 P/V, fp16 vs fp32.",
    .nf = 3,
    /* a summary.csv of the first contract has no pv column: e4m3 P/V */
    .factor = {{"pv", acc_pv, "P/V", "Pv", "e4m3", NULL},
               {"acc", accs, "accumulator", "", NULL, NULL},
               {"chunk", chunks, "chunk $N$", "Chunk", NULL, "0"}},
    .cells = accumulator_cells,
    .threads = 1,
    .resumable = 1,
    .table_name = "accumulator",
    .input = "accumulator/summary.csv",
    .abbrev = "acc",
    .title = "P$\\cdot$V accumulator",
    .figure = "accumulator",
    .figure_in = "accumulator/summary.csv",
    .claims = accumulator_claims,
    .pubs = accumulator_pubs,
};

/* ---------------------------------------------------------------- kbias */

static const char *const kbias_r[] = {"0", "1", "2", "4", "8", "16", "32", NULL};
static const char *const fmt_kb[] = {"int8", "int4", "e4m3", NULL};

static void kbias_cell(qattn_study *st, const char *const *v)
{
    char label[96], factors[160], spec[512];
    snprintf(label, sizeof label, "r%s/%s/%s", v[0], v[1], v[2]);
    snprintf(factors, sizeof factors, "%s,%s,%s", v[0], v[1], v[2]);
    snprintf(spec, sizeof spec, "q=%s@block:128 k=%s@block:64 p=fp16 v=fp16 smooth=%s acc=fp32 out=fp32", v[1], v[1],
             v[2]);
    qattn_study_add(st, label, factors, spec, strtod(v[0], NULL));
}

static const qattn_study_rec kbias = {
    .name = "kbias",
    .summary = "study (augmented real data): K channel offsets of r std, smoothing on/off",
    .about = "AUGMENTED REAL DATA. Every key gets b = r x (channel std of K) along its channel mean's\n"
             "sign, r in {0, 1, 2, 4, 8, 16, 32}: exact attention is unchanged (q.b shifts a whole row\n"
             "of S), only K gets harder to quantize. int8, int4 and e4m3 per-block Q/K (Q 128, K 64),\n"
             "with and without smoothing K; P and V fp16, fp32 accumulator. The reference is float64\n"
             "attention on the unaugmented file.",
    .nf = 3,
    .factor = {{"r", kbias_r, "$r$", "R", NULL, NULL},
               {"qk_fmt", fmt_kb, "Q/K", "", NULL, NULL},
               {"smooth", smooth2, "smooth", "Smooth", NULL, NULL}},
    .cell = kbias_cell,
    .threads = 1,
    .resumable = 1,
    .table_name = "kbias",
    .input = "kbias/summary.csv",
    .abbrev = "kbias",
    .title = "K bias sweep (augmented real data)",
    .note = "Augmented real data: the model's real activations with a per-channel offset of $r$ channel "
            "standard deviations added to K ($r=0$: unmodified).",
    .figure = "kbias",
    .figure_in = "kbias/summary.csv",
};

/* ------------------------------------------------------------- outliers */

static const qattn_study_rec outliers = {
    .name = "outliers",
    .summary = "study: channel statistics of Q, K, V per layer and their outliers",
    .run = qattn_cmd_outliers,
    .table_name = "outliers",
    .input = "outliers/summary.csv",
    .abbrev = "out",
    .title = "Channel statistics",
    .table = qattn_paper_outliers_table,
    .figure = "outliers",
    .figure_in = "outliers/summary.csv",
};

/* --------------------------------------------------------- pareto-cells */

static const char *const kernel_schemes[] = {"fp16",          "bf16",     "sage1-b",      "sage1-vb",     "sage2-8b",
                                             "sage2-8b-sm90", "sage2-4b", "fa3-fp8",      "ck-i8fp8bf16",
                                             "ck-i4fp8bf16",  "ck-fp8bf16", NULL};

static void pareto_cell(qattn_study *st, const char *const *v) { add(st, 1, v, v[0], 0); }

static const qattn_pub pareto_pubs[] = {
    {"SaOneTopsRtx", "341"},    {"SaOneTopsFaTwoRtx", "165"},      {"SaTwoTopsHopper", "900"},
    {"SaTwoTopsFaThreeFpEight", "892"}, {"SaTwoTopsFaTwoHopper", "339"}, {NULL, NULL}};

/* its table and figure read pareto/pareto.csv, which qattn pareto joins
 * from this study and the GPU benchmarks */
static const qattn_study_rec pareto_cells = {
    .name = "pareto-cells",
    .summary = "study: accuracy of the schemes that have GPU kernels",
    .about = "Accuracy of every scheme that has (or is planned to have) a GPU kernel, for the\n"
             "accuracy-vs-throughput Pareto figure (qattn pareto joins it with GPU benchmarks).",
    .nf = 1,
    .factor = {{"kernel", kernel_schemes, "kernel", "", NULL, NULL}},
    .cell = pareto_cell,
    .threads = 1,
    .resumable = 1,
    .table_name = "pareto",
    .input = "pareto/pareto.csv",
    .abbrev = "pareto",
    .title = "Accuracy and throughput",
    .table = qattn_paper_pareto_table,
    .figure = "pareto",
    .figure_in = "pareto/pareto.csv",
    .pubs = pareto_pubs,
};

/* -------------------------------------------------------------- entropy */

/* reads the pv study's cells: runs after it */
static const char *const entropy_args[] = {"--pv", "{results}/pv/cells.csv", NULL};

static const qattn_column entropy_columns[] = {
    {"n", "heads", QATTN_COL_INT, "N", NULL, NULL},
    {"entropy_norm_mean", "$H/\\ln n_k$", QATTN_COL_G3, "EntropyNorm", NULL, NULL},
    {"e4m3_minus_int8_mean", "e4m3 $-$ int8", QATTN_COL_PTS, "Diff", NULL, NULL},
    {"diff_low_entropy", "low $H$", QATTN_COL_PTS, "DiffLow", NULL, NULL},
    {"diff_high_entropy", "high $H$", QATTN_COL_PTS, "DiffHigh", NULL, NULL},
    {"spearman", "$\\rho$ [95\\% interval]", QATTN_COL_SIGNED2, "Rho", "spearman_ci_lo", "spearman_ci_hi"},
    {"e4m3_better", "e4m3 better", QATTN_COL_INT, "EFourMThreeBetter", NULL, NULL},
    {"int8_better", "int8 better", QATTN_COL_INT, "IntEightBetter", NULL, NULL},
    {NULL, NULL, 0, NULL, NULL, NULL}};

static const qattn_study_rec entropy = {
    .name = "entropy",
    .summary = "study: entropy of each head's attention rows, against its e4m3 and int8 P.V accuracy",
    .nf = 1,
    .factor = {{"qk_fmt", fmt_i8i4, "Q/K", "", NULL, NULL}},
    .run = qattn_cmd_entropy,
    .threads = 1,
    .args = entropy_args,
    .table_name = "entropy",
    .input = "entropy/summary.csv",
    .abbrev = "ent",
    .title = "Attention entropy and the P$\\cdot$V format",
    .note = "$H/\\ln n_k$: the entropy of a head's float64 attention rows over the log of the keys each "
            "sees, mean over rows and heads (0: one key takes all; 1: uniform). e4m3 $-$ int8: cos with P and V "
            "in e4m3 minus cos with both in int8 (the pv study), in percentage points, mean over the heads, "
            "and over those below and above the median entropy. $\\rho$: Spearman's rank correlation of the "
            "two over heads, with its 95\\% bootstrap interval. Last: the heads where each format is more "
            "accurate.",
    .table = qattn_paper_columns_table,
    .columns = entropy_columns,
    .figure = "entropy",
    .figure_in = "entropy/pv.csv",
};

/* -------------------------------------------------------------- kvcache */

static const char *const kv_k[] = {"fp16",       "int8-token", "int8-channel", "int8-block", "int4-token",
                                   "int4-channel", "int4-block", "e4m3-token",  "e4m3-channel", "e4m3-block",
                                   NULL};
static const char *const kv_v[] = {"fp16", "int8", "int4", "e4m3", NULL};

static const qattn_column kvcache_columns[] = {
    {"n", "heads", QATTN_COL_INT, "N", NULL, NULL},
    {"one_minus_cos_mean", "$1-\\cos$ [95\\% interval]", QATTN_COL_G3, "OneMinusCos", "one_minus_cos_ci_lo",
     "one_minus_cos_ci_hi"},
    {"one_minus_cos_worst_head", "worst head", QATTN_COL_G3, "OneMinusCosWorstHead", NULL, NULL},
    {"rel_l1_mean", "rel-L1 [95\\% interval]", QATTN_COL_G3, "RelLOne", "rel_l1_ci_lo", "rel_l1_ci_hi"},
    {NULL, NULL, 0, NULL, NULL, NULL}};

static const qattn_study_rec kvcache = {
    .name = "kvcache",
    .summary = "study: quantized KV caches in decode, K per token vs per channel (KIVI), V per token",
    .nf = 3,
    .factor = {{"k_cache", kv_k, "K cache", "K", NULL, NULL},
               {"smooth", smooth2, "smooth", "Smooth", NULL, NULL},
               {"v_cache", kv_v, "V cache", "V", NULL, NULL}},
    .run = qattn_cmd_kvcache,
    .threads = 1,
    .table_name = "kvcache",
    .input = "kvcache/summary.csv",
    .abbrev = "kv",
    .title = "Quantized KV caches in decode",
    .note = "Every query row attends to the cache of the tokens before it (every 16th row and the last of "
            "each sequence); Q and P in fp32. K cache: format and scale group, per token or per channel over "
            "groups of 32 tokens (the newest unfilled group kept in fp32, as KIVI's residual); smooth $k$: K "
            "minus its channel mean over the sequence. $1-\\cos$ and rel-L1 against float64 attention of the "
            "unquantized cache, mean over heads with the 95\\% bootstrap interval.",
    .table = qattn_paper_columns_table,
    .columns = kvcache_columns,
    .figure = "kvcache",
    .figure_in = "kvcache/summary.csv",
};

/* ----------------------------------------------------------------- dsv4 */

static const char *const dsv4_cell_levels[] = {"bf16",           "e4m3-token",     "e4m3-token+rope", "e4m3-ch64",
                                               "e4m3-ch64+rope", "e4m3-ch64-e8m0", "v4",              "v4-q",
                                               NULL};
static const char *const dsv4_list_levels[] = {"dense", "top512", "top64", NULL};

static const qattn_study_rec dsv4 = {
    .name = "dsv4",
    .summary = "study: DeepSeek-V4's FP8 KV layout (e4m3 + e8m0 per 64, bf16 rope) on the MQA-512 model",
    .nf = 2,
    .factor = {{"cell", dsv4_cell_levels, "KV row", "", NULL, NULL},
               {"list", dsv4_list_levels, "keys", "", NULL, NULL}},
    .run = qattn_cmd_dsv4,
    .threads = 1,
    .layout_data = 1,
    .table_name = "dsv4",
    .input = "dsv4/summary.csv",
    .abbrev = "dsv",
    .title = "DeepSeek-V4's FP8 KV layout",
    .note = "The KV row (key and value) of qattn-mqa512: bf16; e4m3 with one fp32 scale per token; e4m3 with an "
            "fp32 or an e8m0 scale per 64 channels; $+$rope: the 64 RoPE channels kept in bf16 (v4: "
            "DeepSeek-V4's layout; v4-q: Q in the same layout). Every 4th of the last 256 query rows; dense: "
            "every key up to the row; top-$k$: the $k$ keys of largest exact attention. P in fp32. "
            "$1-\\cos$ and rel-L1 against float64 attention, mean over 48 heads (3 layers $\\times$ 16) with "
            "the 95\\% bootstrap interval.",
    .table = qattn_paper_columns_table,
    .columns = kvcache_columns,
    .figure = "dsv4",
    .figure_in = "dsv4/summary.csv",
};

/* ------------------------------------------------------------------ e2e */

/* the rows of data/e2e_loss.py: the unquantized model, the presets, then the K-bias rows */
static const char *const e2e_levels[] = {"none",
                                         "fp16",
                                         "bf16",
                                         "sage1-b",
                                         "sage1-vb",
                                         "sage2-8b",
                                         "sage2-8b-sm90",
                                         "sage2-4b",
                                         "fa3-fp8",
                                         "ck-i8fp8bf16",
                                         "ck-i4fp8bf16",
                                         "ck-fp8bf16",
                                         "sage2-8b-sm90-nosmooth",
                                         "kbias8:sage2-8b-sm90",
                                         "kbias8:sage2-8b-sm90-nosmooth",
                                         "kbias8:fa3-fp8",
                                         "kbias8:bf16",
                                         NULL};

static const qattn_column e2e_columns[] = {
    {"loss", "loss [95\\% interval]", QATTN_COL_F4, "Loss", "loss_lo", "loss_hi"},
    {"delta", "$\\Delta$ loss [paired 95\\% interval]", QATTN_COL_G3, "Delta", "delta_lo", "delta_hi"},
    {"one_minus_cos", "$1-\\cos$ (activations)", QATTN_COL_G3, "OneMinusCos", NULL, NULL},
    {NULL, NULL, 0, NULL, NULL, NULL}};

static const char *const e2e_args[] = {"--cells", "{results}/pareto-cells/summary.csv", "--loss", "studies/results",
                                       NULL};

/* reads the pareto-cells summary: runs after it */
static const qattn_study_rec e2e = {
    .name = "e2e",
    .summary = "study: held-out loss of the trained models with each scheme (GPU run), beside 1 - cos",
    .nf = 1,
    .factor = {{"scheme", e2e_levels, "scheme", "", NULL, NULL}},
    .run = qattn_cmd_e2e,
    .args = e2e_args,
    .table_name = "e2e",
    .input = "e2e/summary.csv",
    .abbrev = "etoe",
    .title = "End-to-end held-out loss",
    .note = "Held-out loss (nats per token, 335 windows of 2048 tokens) of the model with its attention run "
            "by each scheme on the GPU, retrained by the recipe that made the shipped activations; none: "
            "unquantized (torch SDPA). $\\Delta$: the change from none, with the 95\\% interval of the "
            "windows resampled in pairs. kbias8: K offset by 8 channel standard deviations (augmented; exact "
            "attention does not change). $1-\\cos$: the scheme on the shipped activations (mean over heads).",
    .table = qattn_paper_e2e_table,
    .columns = e2e_columns,
    .figure = "e2e",
    .figure_in = "e2e/summary.csv",
};

/* ---------------------------------------------------------------------- */

/* in run order: a study runs after those whose outputs it reads */
const qattn_study_rec *const qattn_studies[] = {&granularity, &smoothing,    &pv,      &accumulator, &kbias,
                                                &outliers,    &pareto_cells, &entropy, &kvcache, &dsv4, &e2e, NULL};
