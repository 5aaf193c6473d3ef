/* qattn gpu-check: every GPU kernel instance against the CPU emulation of
 * the same scheme.
 *
 * Attention instances: each runs the scheme qattn_gpu_scheme_for gives it,
 * through a plan (the quantization kernels on fp16 input, then the
 * attention instance), on fresh random inputs of several shapes (tails,
 * GQA / MQA, varlen, every mask, Sq != Sk) and, with --data, on layers of
 * activation files. Quantization instances: each is put into the plans of a
 * few schemes in place of the dispatcher's choice (inputs of a dtype it
 * reads), the attention instance the dispatcher picks runs after it.
 * Outputs and LSE are poisoned (all bits set: NaN) before every run.
 *
 * Tolerance against the emulation, and why: the GPU's exp2 (exp2f, or
 * ex2.approx on the mma path) differs from the emulation's by a few ulp,
 * which now and then moves an element of P across an e4m3 / fp16 rounding
 * boundary (one e4m3 step is 1/16 to 1/8 of the element); the mma path
 * also sums in the tensor core's order and truncation rather than key by
 * key; the row sum's order differs; the output rounding then flips by an
 * ulp. Required per case:
 *   cos(O_gpu, O_emu) >= 0.99999,
 *   max |O_gpu - O_emu| <= 0.02 max |O_emu|,
 *   max |LSE_gpu - LSE_emu| <= 1e-4 (both -inf for rows that see no key),
 *   no non-finite output,
 *   |cos(O_gpu, O_ref) - cos(O_emu, O_ref)| <= 1e-4 (O_ref: float64
 *   attention): the GPU is as accurate as the scheme, no more, no less.
 * CSV (--out): device,date,instance,cases,max_err,pass,path,head_dim,scheme,
 * min_cos,max_dlse,max_cos_gap,skipped — max_err is the largest
 * max |O_gpu - O_emu| / max |O_emu| over the instance's cases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "gpu_util.h"

#ifdef QATTN_HAVE_GPU
#include "qattn/formats.h"
#include "qattn/h5io.h"
#include "qattn_kernels_sparse.h"

#define TOL_GAP 1e-4

typedef struct gcase {
    const char *name;
    int hq, hkv, nseq;
    int lens[3];  /* query lengths (and key lengths unless sk) */
    int sk;       /* key length (nseq 1) when it differs, else 0 */
    int varlen;
    const char *mask;
    int quick;    /* in --quick */
} gcase;

static const gcase cases[] = {
    {"gqa4:1-n128", 4, 1, 1, {128}, 0, 0, "none", 1},
    {"2seq-n1000-causal", 2, 2, 2, {1000, 1000}, 0, 0, "causal", 0},
    {"varlen-1000/77/300-causal", 4, 2, 3, {1000, 77, 300}, 0, 1, "causal", 1},
    {"n700-window:300,50", 2, 1, 1, {700}, 0, 0, "window:300,50", 0},
    {"sq300-sk1000-causal-br", 2, 2, 1, {300}, 1000, 0, "causal-br", 0},
    {"mqa8:1-n2048", 8, 1, 1, {2048}, 0, 0, "none", 0},
    /* sequences of whole 16-row groups: the one-warpgroup wgmma form loads K and V^T by TMA */
    {"3seq-n512-gqa2:1-causal", 4, 2, 3, {512, 512, 512}, 0, 0, "causal", 0},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* one problem's host data: inputs [h, T, d] float, and what was measured */
typedef struct problem {
    int hq, hkv, nseq, d, sq, sk, varlen;
    int cu_q[4], cu_k[4];
    int64_t seqlens[3];
    size_t tq, tk;
    qattn_mask mask;
    const float *q, *k, *v;
    double softmax_scale; /* <= 0: 1/sqrt(d) */
} problem;

typedef struct result {
    double cos, err, dlse, gap;
    size_t nonfinite;
} result;

typedef struct row {
    const qattn_kernels_sig *sig;
    char scheme[512];
    int cases, skipped, failed;
    double min_cos, max_err, max_dlse, max_gap;
    char why[256];
} row;

static void row_add(row *r, const result *x)
{
    r->cases++;
    if (x->cos < r->min_cos || x->cos != x->cos)
        r->min_cos = x->cos;
    if (x->err > r->max_err || x->err != x->err)
        r->max_err = x->err;
    if (x->dlse > r->max_dlse || x->dlse != x->dlse)
        r->max_dlse = x->dlse;
    if (x->gap > r->max_gap || x->gap != x->gap)
        r->max_gap = x->gap;
    if (!(x->cos >= QATTN_KERNELS_TOL_COS && x->err <= QATTN_KERNELS_TOL_ERR && x->dlse <= QATTN_KERNELS_TOL_LSE &&
          x->gap <= TOL_GAP && x->nonfinite == 0))
        r->failed++;
}

/* a family case (decode, sparse) checked by its own harness: its errors and
 * verdict into r; what = the case's label for the reason */
static void row_add_case(row *r, double cos, double err, double dlse, int pass, double tol, double lse_tol,
                         const char *what)
{
    r->cases++;
    r->min_cos = cos < r->min_cos ? cos : r->min_cos;
    r->max_err = err > r->max_err || err != err ? err : r->max_err;
    r->max_dlse = dlse > r->max_dlse || dlse != dlse ? dlse : r->max_dlse;
    if (!pass) {
        r->failed++;
        snprintf(r->why, sizeof r->why, "%s: err %.2e (tolerance %.0e), dLSE %.1e (%.0e)", what, err, tol, dlse,
                 lse_tol);
    }
}

/* word appended to r's scheme column once */
static void row_scheme_add(row *r, const char *word)
{
    if (!strstr(r->scheme, word) && strlen(r->scheme) + strlen(word) + 2 < sizeof r->scheme)
        snprintf(r->scheme + strlen(r->scheme), sizeof r->scheme - strlen(r->scheme), "%s%s", r->scheme[0] ? " " : "",
                 word);
}

static size_t fmt_bytes(qattn_fmt f) { return f == QATTN_FMT_FP32 ? 4 : 2; }

static void to_dtype(const float *x, size_t n, qattn_fmt f, void *out)
{
    for (size_t i = 0; i < n; i++) {
        if (f == QATTN_FMT_FP32)
            ((float *)out)[i] = x[i];
        else if (f == QATTN_FMT_BF16)
            ((uint16_t *)out)[i] = qattn_bf16_encode(x[i]);
        else
            ((uint16_t *)out)[i] = qattn_fp16_encode(x[i]);
    }
}

static double from_dtype(const void *o, size_t i, qattn_fmt f)
{
    if (f == QATTN_FMT_FP32)
        return ((const float *)o)[i];
    if (f == QATTN_FMT_BF16)
        return qattn_bf16_decode(((const uint16_t *)o)[i]);
    return qattn_fp16_decode(((const uint16_t *)o)[i]);
}

/* emulation (float) and reference (double) of s on pr, heads in parallel */
static int emulate(const qattn_scheme *s, const problem *pr, float *oe, float *lse_e, double *orf, qattn_err *err)
{
    const int g = pr->hq / pr->hkv, d = pr->d;
    int rc = 0;
    qattn_err errs[64];
#pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < pr->hq; h++) {
        qattn_mha a;
        memset(&a, 0, sizeof a);
        a.q = pr->q + (size_t)h * pr->tq * d;
        a.k = pr->k + (size_t)(h / g) * pr->tk * d;
        a.v = pr->v + (size_t)(h / g) * pr->tk * d;
        a.hq = a.hkv = 1;
        a.sq = pr->tq;
        a.sk = pr->tk;
        a.d = (size_t)d;
        a.seqlens = pr->nseq > 1 ? pr->seqlens : NULL;
        a.nseq = pr->nseq > 1 ? (size_t)pr->nseq : 0;
        const double sc = pr->softmax_scale > 0 ? pr->softmax_scale : 0.0;
        int e = qattn_emu_mha(s, &a, &pr->mask, sc, oe + (size_t)h * pr->tq * d, lse_e + (size_t)h * pr->tq,
                              &errs[h % 64]);
        if (!e)
            e = qattn_ref_mha(&a, &pr->mask, sc, orf + (size_t)h * pr->tq * d, NULL, &errs[h % 64]);
        if (e) {
#pragma omp critical
            {
                if (!rc) {
                    rc = e;
                    *err = errs[h % 64];
                }
            }
        }
    }
    return rc;
}

static int verbose_plan; /* --verbose: each plan's instances and routes on stderr */
static int wg_form;      /* the wgmma blocks asked of the plans (problem wg_form) */

/* run s through a plan on pr (quant instance forced to qsig when not NULL);
 * 1 = the dispatcher gave the attention to another instance than want
 * (want NULL: any), 0 = measured into x, < 0 = error */
static int run_gpu(const qattn_scheme *s, const problem *pr, qattn_fmt in, const qattn_kernels_sig *want,
                   const qattn_kernels_sig *qsig, const float *oe, const float *lse_e, const double *orf, result *x,
                   qattn_err *err)
{
    const int d = pr->d;
    const size_t nq = (size_t)pr->hq * pr->tq * d, nk = (size_t)pr->hkv * pr->tk * d, nl = (size_t)pr->hq * pr->tq;
    const size_t eb = fmt_bytes(in), ob = fmt_bytes(s->out);
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = pr->nseq;
    pb.hq = pr->hq;
    pb.hkv = pr->hkv;
    pb.d = d;
    pb.seqlen_q = pr->sq;
    pb.seqlen_k = pr->sk;
    pb.varlen = pr->varlen;
    pb.mask = pr->mask;
    pb.lse = 1;
    pb.in = in;
    pb.scale = pr->softmax_scale;
    pb.paths = want ? 1u << want->path : 0; /* the instance under test, not a more preferred path's */
    pb.wg_form = wg_form;
    const qattn_kernels_sig *a = NULL;
    int rc = qattn_kernels_find(s, &pb, &a, NULL, err);
    if (rc)
        return rc;
    if (want && a != want)
        return 1;
    void *hq = malloc(nq * eb), *hk = malloc(nk * eb), *hv = malloc(nk * eb), *og = malloc(nq * ob);
    float *lse_g = malloc(nl * 4);
    void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL, *dlse = NULL;
    qattn_kernels_plan pl;
    memset(&pl, 0, sizeof pl);
    if (!hq || !hk || !hv || !og || !lse_g) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of host memory");
        goto done;
    }
    to_dtype(pr->q, nq, in, hq);
    to_dtype(pr->k, nk, in, hk);
    to_dtype(pr->v, nk, in, hv);
    if ((rc = qattn_kernels_dev_alloc(&dq, nq * eb, err)) || (rc = qattn_kernels_dev_alloc(&dk, nk * eb, err)) ||
        (rc = qattn_kernels_dev_alloc(&dv, nk * eb, err)) || (rc = qattn_kernels_dev_alloc(&dout, nq * ob, err)) ||
        (rc = qattn_kernels_dev_alloc(&dlse, nl * 4, err)) || (rc = qattn_kernels_dev_to(dq, hq, nq * eb, err)) ||
        (rc = qattn_kernels_dev_to(dk, hk, nk * eb, err)) || (rc = qattn_kernels_dev_to(dv, hv, nk * eb, err)) ||
        (rc = qattn_kernels_dev_fill(dout, 0xff, nq * ob, err)) || (rc = qattn_kernels_dev_fill(dlse, 0xff, nl * 4, err)))
        goto done;
    qattn_kernels_io io;
    memset(&io, 0, sizeof io);
    /* [h, T, d]: sequence b at token cu[b] (varlen) or b * seqlen */
    io.q = (qattn_kernels_tensor){dq, pr->varlen ? 0 : (int64_t)pr->sq * d, (int64_t)pr->tq * d, d};
    io.k = (qattn_kernels_tensor){dk, pr->varlen ? 0 : (int64_t)pr->sk * d, (int64_t)pr->tk * d, d};
    io.v = (qattn_kernels_tensor){dv, pr->varlen ? 0 : (int64_t)pr->sk * d, (int64_t)pr->tk * d, d};
    io.o = (qattn_kernels_tensor){dout, pr->varlen ? 0 : (int64_t)pr->sq * d, (int64_t)pr->tq * d, d};
    io.lse = (float *)dlse;
    io.cu_seqlens_q = pr->varlen ? pr->cu_q : NULL;
    io.cu_seqlens_k = pr->varlen ? pr->cu_k : NULL;
    if ((rc = qattn_kernels_plan_init(&pl, s, &pb, &io, err)))
        goto done;
    if (qsig) { /* the quantization instance under test: its own routes, the dispatcher's choice */
        pl.quant_sig = qsig;
        for (int i = 0; i < 3; i++) {
            pl.qp[i].route = QATTN_KERNELS_QROUTE_AUTO;
            pl.qp[i].kv = QATTN_KERNELS_KV_AUTO;
        }
    }
    if (verbose_plan) {
        char line[512];
        fprintf(stderr, "  plan: %s\n", qattn_kernels_plan_describe(&pl, line, sizeof line));
    }
    if ((rc = qattn_kernels_plan_quantize(&pl, NULL, 1, err)) || (rc = qattn_kernels_plan_attend(&pl, NULL, err)) ||
        (rc = qattn_kernels_dev_sync(err)) || (rc = qattn_kernels_dev_from(og, dout, nq * ob, err)) ||
        (rc = qattn_kernels_dev_from(lse_g, dlse, nl * 4, err)))
        goto done;
    {
        double maxo = 0, maxe = 0, dot = 0, ng = 0, ne = 0, nr = 0, dgr = 0, der = 0, dl = 0;
        size_t nf = 0;
        for (size_t i = 0; i < nq; i++) {
            const double y = from_dtype(og, i, s->out), e = oe[i], r = orf[i];
            if (!isfinite(y))
                nf++;
            maxo = fmax(maxo, fabs(e));
            if (fabs(y - e) > maxe || y != y)
                maxe = fabs(y - e);
            dot += y * e, ng += y * y, ne += e * e, nr += r * r, dgr += y * r, der += e * r;
        }
        for (size_t i = 0; i < nl; i++) {
            const double df = isinf(lse_e[i]) && lse_g[i] == lse_e[i] ? 0.0 : fabs((double)lse_g[i] - lse_e[i]);
            if (df > dl || df != df)
                dl = df;
        }
        x->cos = ng > 0 && ne > 0 ? dot / sqrt(ng * ne) : (ng == ne ? 1.0 : 0.0);
        x->err = maxo > 0 ? maxe / maxo : maxe;
        x->dlse = dl;
        const double cg = ng > 0 && nr > 0 ? dgr / sqrt(ng * nr) : 1.0, ce = ne > 0 && nr > 0 ? der / sqrt(ne * nr) : 1.0;
        x->gap = fabs(cg - ce);
        x->nonfinite = nf;
        if (nf)
            x->cos = NAN;
    }
done:
    qattn_kernels_plan_free(&pl);
    qattn_kernels_dev_free(dq), qattn_kernels_dev_free(dk), qattn_kernels_dev_free(dv);
    qattn_kernels_dev_free(dout), qattn_kernels_dev_free(dlse);
    free(hq), free(hk), free(hv), free(og), free(lse_g);
    return rc;
}

/* emulate and run one (scheme, problem) for row r */
static int check_one(row *r, const qattn_scheme *s, const problem *pr, qattn_fmt in, const qattn_kernels_sig *want,
                     const qattn_kernels_sig *qsig, const char *label, int verbose, qattn_err *err)
{
    const size_t nq = (size_t)pr->hq * pr->tq * pr->d, nk = (size_t)pr->hkv * pr->tk * pr->d;
    float *oe = malloc(nq * 4), *lse_e = malloc((size_t)pr->hq * pr->tq * 4);
    double *orf = malloc(nq * 8);
    float *rounded = NULL;
    problem pb16 = *pr;
    int rc = 0;
    if (in == QATTN_FMT_BF16) { /* the emulation sees the values the GPU reads */
        rounded = malloc((nq + 2 * nk) * 4);
        if (rounded) {
            for (size_t i = 0; i < nq; i++)
                rounded[i] = qattn_bf16_decode(qattn_bf16_encode(pr->q[i]));
            for (size_t i = 0; i < nk; i++) {
                rounded[nq + i] = qattn_bf16_decode(qattn_bf16_encode(pr->k[i]));
                rounded[nq + nk + i] = qattn_bf16_decode(qattn_bf16_encode(pr->v[i]));
            }
            pb16.q = rounded, pb16.k = rounded + nq, pb16.v = rounded + nq + nk;
            pr = &pb16;
        }
    }
    if (!oe || !lse_e || !orf || (in == QATTN_FMT_BF16 && !rounded))
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of host memory");
    else if (!(rc = emulate(s, pr, oe, lse_e, orf, err))) {
        result x;
        memset(&x, 0, sizeof x);
        rc = run_gpu(s, pr, in, want, qsig, oe, lse_e, orf, &x, err);
        if (rc == 1 || rc == QATTN_KERNELS_ERR_UNSUPPORTED) { /* another instance's, or not supported */
            r->skipped++;
            if (rc != 1)
                snprintf(r->why, sizeof r->why, "skipped %.60s: %.170s", label, err->msg);
            rc = 0;
        }
        else if (rc == 0) {
            row_add(r, &x);
            if (verbose)
                fprintf(stderr, "  %-44s %-28s cos %.7f err %.2e dLSE %.1e gap %.1e%s\n", r->sig->name, label, x.cos,
                        x.err, x.dlse, x.gap, x.nonfinite ? " NON-FINITE" : "");
        }
    }
    free(oe), free(lse_e), free(orf), free(rounded);
    return rc < 0 ? rc : 0;
}

static void make_problem(problem *pr, const gcase *c, int d, float **bufs, uint64_t *st, qattn_err *err)
{
    memset(pr, 0, sizeof *pr);
    pr->hq = c->hq, pr->hkv = c->hkv, pr->nseq = c->nseq, pr->d = d, pr->varlen = c->varlen;
    int maxq = 0, maxk = 0;
    for (int b = 0; b < c->nseq; b++) {
        const int lq = c->lens[b], lk = c->sk ? c->sk : c->lens[b];
        pr->cu_q[b + 1] = pr->cu_q[b] + lq;
        pr->cu_k[b + 1] = pr->cu_k[b] + lk;
        pr->seqlens[b] = lq;
        maxq = lq > maxq ? lq : maxq;
        maxk = lk > maxk ? lk : maxk;
    }
    pr->sq = maxq, pr->sk = maxk;
    pr->tq = (size_t)pr->cu_q[c->nseq], pr->tk = (size_t)pr->cu_k[c->nseq];
    (void)qattn_mask_parse(c->mask, &pr->mask, err);
    bufs[0] = malloc((size_t)pr->hq * pr->tq * d * 4);
    bufs[1] = malloc((size_t)pr->hkv * pr->tk * d * 4);
    bufs[2] = malloc((size_t)pr->hkv * pr->tk * d * 4);
    if (bufs[0] && bufs[1] && bufs[2]) {
        qattn_gpu_make_input(bufs[0], (size_t)pr->hq * pr->tq * d, (size_t)d, 0.3, st);
        qattn_gpu_make_input(bufs[1], (size_t)pr->hkv * pr->tk * d, (size_t)d, 1.5, st);
        qattn_gpu_make_input(bufs[2], (size_t)pr->hkv * pr->tk * d, (size_t)d, 0.7, st);
    }
    pr->q = bufs[0], pr->k = bufs[1], pr->v = bufs[2];
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn gpu-check [--out FILE.csv] [--data F.h5]... [--layers N] [--instance TEXT]\n"
            "                       [--quick] [--seed S] [--verbose]\n\n"
            "Runs every GPU kernel instance against the CPU emulation of the same scheme:\n"
            "attention instances through the quantization kernels on random fp16 inputs\n"
            "(tails, GQA/MQA, varlen, masks none / causal / causal-br / window, Sq != Sk)\n"
            "and, with --data, on --layers layers (first, middle, last: default 3) of each\n"
            "activation file of matching head dim; quantization instances in the plans of\n"
            "sage2-8b-sm90, sage2-4b, sage1-b and fa3-fp8. Outputs are poisoned before\n"
            "each run. Tolerances: cos(gpu, emu) >= 0.99999, max|err| <= 0.02 max|O|,\n"
            "|dLSE| <= 1e-4, cos against float64 within 1e-4 of the emulation's.\n\n"
            "  --out FILE.csv   the table (device,date,instance,cases,max_err,pass,...)\n"
            "  --instance TEXT  only instances whose name contains TEXT\n"
            "  --list           print the scheme each instance is checked with, and stop\n"
            "  --quick          two small cases per instance (for compute-sanitizer)\n"
            "Exit status: 0 all pass, 1 a failure, 2 bad usage / no GPU.\n");
}

int qattn_cmd_gpu_check(int argc, char **argv)
{
    const char *out = NULL, *filter = NULL, *data[8];
    size_t ndata_v = 0;
    int quick = 0, verbose = 0, list = 0;
    long long nlayers_v = 3;
    unsigned long long seed = 1;
    const qattn_opt opts[] = {
        {"out", QATTN_OPT_STR, &out, NULL, 0, 0},
        {"data", QATTN_OPT_LIST, data, &ndata_v, 0, 8},
        {"layers", QATTN_OPT_INT, &nlayers_v, NULL, 1, 1000000},
        {"instance", QATTN_OPT_STR, &filter, NULL, 0, 0},
        {"quick", QATTN_OPT_FLAG, &quick, NULL, 0, 0},
        {"seed", QATTN_OPT_U64, &seed, NULL, 0, 0},
        {"verbose", QATTN_OPT_FLAG, &verbose, NULL, 0, 0},
        {"list", QATTN_OPT_FLAG, &list, NULL, 0, 0},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    if (out && (prc = qattn_cli_check_out_file("gpu-check", "--out", out)))
        return prc;
    const int ndata = (int)ndata_v, nlayers = (int)nlayers_v;
    verbose_plan = verbose;
    qattn_err err;
    if (list) { /* the scheme each instance is checked with; no GPU needed */
        int bad = 0;
        for (size_t i = 0; i < qattn_kernels_count(); i++) {
            const qattn_kernels_sig *g = qattn_kernels_get(i);
            if (filter && !strstr(g->name, filter))
                continue;
            qattn_scheme s;
            char spec[512];
            if (g->family == QATTN_KERNELS_FAMILY_DECODE)
                snprintf(spec, sizeof spec, "(decode: the split-KV cases of kernels/decode_check.c)");
            else if (g->family == QATTN_KERNELS_FAMILY_SPARSE)
                snprintf(spec, sizeof spec, "(sparse: the sparse prefill cases of kernels/sparse_check.c)");
            else if (g->family != QATTN_KERNELS_FAMILY_ATTN_FWD)
                snprintf(spec, sizeof spec, "(quantization: inside sage2-8b-sm90, sage2-4b, sage1-b, fa3-fp8)");
            else if (qattn_gpu_scheme_for(g, &s, spec, sizeof spec)) {
                snprintf(spec, sizeof spec, "NO SCHEME reaches this instance");
                bad = 1;
            }
            printf("%-48s %s\n", g->name, spec);
        }
        return bad ? QATTN_EXIT_FAIL : QATTN_EXIT_OK;
    }
    int ndev = 0;
    if (qattn_kernels_dev_count(&ndev, &err) || ndev == 0) {
        fprintf(stderr, "qattn gpu-check: no GPU found (%s)\n", ndev ? err.msg : "device count 0");
        return QATTN_EXIT_INPUT;
    }
    char devname[256], dev[64], date[16];
    if (qattn_kernels_dev_name(devname, sizeof devname, &err)) {
        fprintf(stderr, "qattn gpu-check: %s\n", err.msg);
        return QATTN_EXIT_FAIL;
    }
    qattn_gpu_device_slug(devname, dev, sizeof dev);
    qattn_gpu_date(date, sizeof date);
    /* open the data files first: a bad file is an input error before any work */
    qattn_act_file files[8];
    for (int i = 0; i < ndata; i++)
        if (qattn_act_open(data[i], &files[i], &err)) {
            fprintf(stderr, "qattn gpu-check: %s\n", err.msg);
            for (int j = 0; j < i; j++)
                qattn_act_close(&files[j]);
            return QATTN_EXIT_INPUT;
        }

    const size_t nk = qattn_kernels_count();
    row *rows = calloc(nk, sizeof *rows);
    size_t nrows = 0;
    for (size_t i = 0; i < nk; i++) {
        const qattn_kernels_sig *g = qattn_kernels_get(i);
        if (filter && !strstr(g->name, filter))
            continue;
        rows[nrows].sig = g;
        rows[nrows].min_cos = 1.0;
        nrows++;
    }
    if (nrows == 0) {
        fprintf(stderr, "qattn gpu-check: no instance matches '%s' (see qattn kernels)\n", filter ? filter : "");
        free(rows);
        return QATTN_EXIT_INPUT;
    }
    fprintf(stderr, "qattn gpu-check: %s, %zu instances%s\n", devname, nrows, quick ? " (quick)" : "");
    uint64_t st = (uint64_t)seed * 0x2545F4914F6CDD1Dull + 7;
    int rc = 0;
    for (size_t ri = 0; ri < nrows && rc == 0; ri++) {
        row *r = &rows[ri];
        const qattn_kernels_sig *g = r->sig;
        qattn_cli_progress("gpu-check", ri, nrows);
        if (g->family == QATTN_KERNELS_FAMILY_ATTN_FWD) {
            qattn_scheme s;
            if (qattn_gpu_scheme_for(g, &s, r->scheme, sizeof r->scheme)) {
                snprintf(r->why, sizeof r->why, "no scheme reaches this instance through the dispatcher");
                r->failed++;
                continue;
            }
            const qattn_fmt in = s.q.fmt == QATTN_FMT_BF16 ? QATTN_FMT_BF16 : QATTN_FMT_FP16;
            /* the random cases in each block form of a wgmma instance that has two */
            const int forms[2] = {qattn_kernels_wg_solo_keys(g, 0) ? QATTN_WG_FORM_SOLO : QATTN_WG_FORM_RULE,
                                  qattn_kernels_wg_multi(g)};
            for (int fi = 0; fi < (forms[0] ? 2 : 1) && rc == 0; fi++) {
                wg_form = forms[fi];
                for (size_t ci = 0; ci < NCASES && rc == 0; ci++) {
                    if (quick && !cases[ci].quick)
                        continue;
                    problem pr;
                    float *bufs[3] = {NULL, NULL, NULL};
                    char label[96];
                    snprintf(label, sizeof label, "%s%s%s", cases[ci].name, forms[0] ? ", " : "",
                             forms[0] ? qattn_kernels_wg_form_name(wg_form) : "");
                    make_problem(&pr, &cases[ci], g->head_dim, bufs, &st, &err);
                    if (!bufs[0] || !bufs[1] || !bufs[2])
                        rc = qattn_err_set(&err, QATTN_ERR_NOMEM, "out of host memory");
                    else
                        rc = check_one(r, &s, &pr, in, g, NULL, label, verbose, &err);
                    free(bufs[0]), free(bufs[1]), free(bufs[2]);
                }
            }
            wg_form = QATTN_WG_FORM_RULE;
            /* the activation files of this head dim */
            for (int fi = 0; fi < ndata && rc == 0 && !quick; fi++) {
                const qattn_act_meta *m = &files[fi].meta;
                if ((int)m->d != g->head_dim)
                    continue;
                float *q = malloc(m->hq * m->n * m->d * 4), *k = malloc(m->hkv * m->n * m->d * 4),
                      *v = malloc(m->hkv * m->n * m->d * 4);
                const int nl = nlayers < (int)m->nlayers ? nlayers : (int)m->nlayers;
                for (int li = 0; li < nl && rc == 0 && q && k && v; li++) {
                    const size_t layer = nl == 1 ? 0 : (size_t)li * (m->nlayers - 1) / (size_t)(nl - 1);
                    if ((rc = qattn_act_read_layer(&files[fi], layer, q, k, v, &err)))
                        break;
                    problem pr;
                    memset(&pr, 0, sizeof pr);
                    pr.hq = (int)m->hq, pr.hkv = (int)m->hkv, pr.d = (int)m->d;
                    pr.nseq = m->seqlens ? (int)m->nseq : 1;
                    if (pr.nseq > 3) {
                        pr.nseq = 1; /* more sequences than a problem here holds: one, causal over all */
                    }
                    int maxl = 0;
                    for (int b = 0; b < pr.nseq; b++) {
                        const int l = m->seqlens && pr.nseq > 1 ? (int)m->seqlens[b] : (int)m->n;
                        pr.cu_q[b + 1] = pr.cu_k[b + 1] = pr.cu_q[b] + l;
                        pr.seqlens[b] = l;
                        maxl = l > maxl ? l : maxl;
                    }
                    pr.varlen = pr.nseq > 1;
                    pr.sq = pr.sk = maxl;
                    pr.tq = pr.tk = m->n;
                    pr.mask.kind = m->causal ? QATTN_MASK_CAUSAL : QATTN_MASK_NONE;
                    pr.softmax_scale = m->has_softmax_scale ? m->softmax_scale : 0.0;
                    pr.q = q, pr.k = k, pr.v = v;
                    char label[64];
                    snprintf(label, sizeof label, "%.40s layer %zu", m->model, layer);
                    rc = check_one(r, &s, &pr, in, g, NULL, label, verbose, &err);
                }
                if (!q || !k || !v)
                    rc = qattn_err_set(&err, QATTN_ERR_NOMEM, "out of host memory");
                free(q), free(k), free(v);
            }
        } else if (g->family == QATTN_KERNELS_FAMILY_DECODE) {
            /* the decode cases this instance takes (the dispatcher on its path picks it) against
             * qattn_kv_emu; the cache formats of the cases it ran go in the scheme column */
            size_t nc;
            const qattn_kernels_decode_case *dcs = qattn_kernels_decode_cases(&nc);
            for (size_t ci = 0; ci < nc && rc == 0; ci++) {
                if (quick && !dcs[ci].quick)
                    continue;
                qattn_kernels_decode_result dr;
                if ((rc = qattn_kernels_decode_run_case(&dcs[ci], 1u << g->path, 0u, &st, &dr, &err)))
                    break;
                if (!dr.ran || dr.sig != g)
                    continue;
                char what[32], kv[64];
                snprintf(what, sizeof what, "case %zu", ci);
                row_add_case(r, dr.cos, dr.err, dr.max_dlse, dr.pass, dr.tol, dr.lse_tol, what);
                snprintf(kv, sizeof kv, "%s/%s", dcs[ci].k, dcs[ci].v);
                row_scheme_add(r, kv);
                if (verbose)
                    fprintf(stderr, "  %-28s decode case %2zu splits %-3d: err %.2e dLSE %.1e cos %.8f %s\n", g->name, ci,
                            dr.num_splits, dr.err, dr.max_dlse, dr.cos, dr.pass ? "ok" : "FAIL");
            }
        } else if (g->family == QATTN_KERNELS_FAMILY_SPARSE) {
            /* the sparse prefill cases this instance takes against qattn_emu_sparse; the variants
             * it ran go in the scheme column */
            size_t nc;
            const qattn_kernels_sparse_case *scs = qattn_kernels_sparse_cases(&nc);
            for (size_t ci = 0; ci < nc && rc == 0; ci++) {
                if (quick && !scs[ci].quick)
                    continue;
                qattn_kernels_sparse_result sr;
                if ((rc = qattn_kernels_sparse_run_case(&scs[ci], 1u << g->path, &st, &sr, &err)))
                    break;
                if (!sr.ran || sr.sig != g)
                    continue;
                char what[32];
                snprintf(what, sizeof what, "case %zu", ci);
                row_add_case(r, sr.cos, sr.err, sr.max_dlse, sr.pass, sr.tol, sr.lse_tol, what);
                row_scheme_add(r, qattn_kernels_sparse_variant_name(scs[ci].variant));
                if (verbose)
                    fprintf(stderr, "  %-28s sparse case %2zu %-7s h=%-3d topk=%-4d: err %.2e dLSE %.1e cos %.8f %s\n",
                            g->name, ci, qattn_kernels_sparse_variant_name(scs[ci].variant), scs[ci].hq, scs[ci].topk,
                            sr.err, sr.max_dlse, sr.cos, sr.pass ? "ok" : "FAIL");
            }
        } else {
            /* a quantization instance inside the plans of a few schemes */
            static const char *qs[] = {"sage2-8b-sm90", "sage2-4b", "sage1-b", "fa3-fp8"};
            static const qattn_fmt ins[] = {QATTN_FMT_FP16, QATTN_FMT_BF16, QATTN_FMT_FP32};
            snprintf(r->scheme, sizeof r->scheme, "sage2-8b-sm90,sage2-4b,sage1-b,fa3-fp8");
            for (size_t si = 0; si < sizeof qs / sizeof qs[0] && rc == 0; si++)
                for (size_t ii = 0; ii < 3 && rc == 0; ii++) {
                    if (!(g->in_fmts & (1u << ins[ii])))
                        continue;
                    qattn_scheme s;
                    if (qattn_scheme_parse(qs[si], &s, &err)) {
                        rc = -1;
                        break;
                    }
                    for (size_t ci = 0; ci < NCASES && rc == 0; ci++) {
                        if (!cases[ci].quick || (quick && ci > 0))
                            continue;
                        problem pr;
                        float *bufs[3] = {NULL, NULL, NULL};
                        make_problem(&pr, &cases[ci], 128, bufs, &st, &err);
                        char label[96];
                        snprintf(label, sizeof label, "%s %s %s", qs[si], qattn_fmt_name(ins[ii]), cases[ci].name);
                        if (!bufs[0] || !bufs[1] || !bufs[2])
                            rc = qattn_err_set(&err, QATTN_ERR_NOMEM, "out of host memory");
                        else {
                            rc = check_one(r, &s, &pr, ins[ii], NULL, g, label, verbose, &err);
                        }
                        free(bufs[0]), free(bufs[1]), free(bufs[2]);
                    }
                }
        }
    }
    qattn_cli_progress("gpu-check", nrows, nrows);
    for (int i = 0; i < ndata; i++)
        qattn_act_close(&files[i]);
    if (rc) {
        fprintf(stderr, "qattn gpu-check: %s\n", err.msg);
        free(rows);
        return QATTN_EXIT_FAIL;
    }
    qattn_out o;
    FILE *f = stdout;
    if (out) {
        if (qattn_out_open(&o, out)) {
            fprintf(stderr, "qattn gpu-check: cannot write %s\n", out);
            free(rows);
            return QATTN_EXIT_INPUT;
        }
        f = o.f;
    }
    int nfail = 0;
    fprintf(f, "device,date,instance,cases,max_err,pass,path,head_dim,scheme,min_cos,max_dlse,max_cos_gap,skipped\n");
    for (size_t ri = 0; ri < nrows; ri++) {
        const row *r = &rows[ri];
        const int pass = r->failed == 0 && r->cases > 0;
        nfail += !pass;
        const char *path = qattn_kernels_path_name(r->sig->path);
        fprintf(f, "%s,%s,%s,%d,%.3e,%d,%s,%d,\"%s\",%.8f,%.2e,%.2e,%d\n", dev, date, r->sig->name, r->cases,
                r->max_err, pass, path, r->sig->head_dim, r->scheme, r->min_cos, r->max_dlse, r->max_gap, r->skipped);
        if (out)
            printf("%-48s %-5s cases %2d  max_err %.2e  min_cos %.7f  dLSE %.1e%s%s\n", r->sig->name,
                   pass ? "pass" : "FAIL", r->cases, r->max_err, r->min_cos, r->max_dlse, r->why[0] ? "  " : "",
                   r->why);
    }
    if (out && qattn_out_commit(&o)) {
        fprintf(stderr, "qattn gpu-check: cannot write %s\n", out);
        free(rows);
        return QATTN_EXIT_FAIL;
    }
    fprintf(stderr, "qattn gpu-check: %zu instances, %d failed\n", nrows, nfail);
    free(rows);
    return nfail ? QATTN_EXIT_FAIL : QATTN_EXIT_OK;
}
#else
int qattn_cmd_gpu_check(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: qattn gpu-check ... (this qattn was built without GPU kernels: QATTN_GPU=off)\n");
            return QATTN_EXIT_OK;
        }
    fprintf(stderr, "qattn gpu-check: this qattn was built without GPU kernels (configure with -DQATTN_GPU=nvidia or amd)\n");
    return QATTN_EXIT_INPUT;
}
#endif
