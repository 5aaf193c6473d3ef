/* The quantization family against quant/: for every scale group kind the
 * fast path fuses (tensor, token, block, warp, thread, channel,
 * tensor,ch:C, e8m0), fp16 and bf16 input, int8 / int4 / e4m3 / e5m2,
 * smoothing by sequence (K, V) and by Q block, equal lengths and varlen,
 * tails (N not a multiple of the tile or the group block), strided inputs,
 * and V^T (LAYOUT_TRANSPOSED, zero past each sequence): codes, scales and
 * means must equal qattn_smooth_* + qattn_qtensor_init's bit for bit, per
 * head and sequence. The same cases also run through the portable instance
 * (its transposed writer included), and the fast instance must offer the
 * fused kernels where expected (its quant_routes); fused cases run every
 * route the instance offers, set in the params (tiled, lean, streamed with
 * the default tiles per slice and with one), and the dispatcher's choice
 * under its environment overrides: the default (the streamed kernel for
 * operands with statistics, the lean encode kernel for the others),
 * QATTN_QUANT_STREAM=1 (the streamed kernel wherever it applies; also with
 * one tile per slice, QATTN_QUANT_STREAM_TPR=1), QATTN_QUANT_STREAM=0
 * (statistics, combine and the lean encode kernel), and the same with
 * QATTN_QUANT_LEAN=0 (the tiled encode). Unscaled casts (fp16 / bf16 / fp32
 * codes) must take the cast kernel where it applies, and flag an Inf in
 * the input with codes and without (the check alone).
 *
 * Built twice from this source: test_kernels_quant (host simulation, CPU)
 * and test_kernels_quant_gpu (kernels/test_kernels_quant_gpu.c, NVIDIA:
 * larger shapes, plus --bench: the sage2-8b-sm90 quantization of B=4, H=32,
 * N=8192, d=128 fp16 against a device-to-device copy, timed with events). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/check.h"
#include "qattn/numerics.h"
#include "qattn_kernels.h"

/* the route and the K, V mode the dispatcher takes for an instance (the
 * registry's quant_routes / quant_kv_modes and its policy, environment
 * overrides included) */
static qattn_kernels_qroute route_of(const qattn_kernels_sig *sig, const qattn_kernels_quant_params *p)
{
    return qattn_kernels_quant_route(sig->quant_routes ? sig->quant_routes(p) : 1u << QATTN_KERNELS_QROUTE_PORTABLE,
                                     p);
}

static qattn_kernels_qroute forced; /* a route set in the params, or AUTO: the dispatcher's */
static int n_cast; /* cases the cast kernel ran */
static int n_forced[QATTN_KERNELS_QROUTE_COUNT]; /* cases run with each route set in the params */
static int n_lean;     /* cases the lean encode kernel ran */
static int n_stream;   /* cases the streamed kernel ran */
static int n_kv[3];    /* K and V pairs run one after the other, in one grid, side by side */
static int want_fast;  /* 1: the case must run the streamed kernel (operands with statistics, or
                        * QATTN_QUANT_STREAM=1), else the lean encode kernel (unless
                        * QATTN_QUANT_LEAN=0) */

static uint64_t rs = 4242; /* the cases' input stream (check_gauss) */

typedef struct qcase {
    const char *fmt, *group;
    int smooth, mblock; /* QATTN_KERNELS_SMOOTH_*, Q block */
    qattn_fmt in;
    int d, heads, nseq;
    int lens[4];
    int varlen, thd, transposed; /* thd: input [T, H, d] (token stride H*d), else [H, T, d] */
    int fused;                   /* 1: the fast instance must take it */
    int ties;                    /* values on rounding boundaries of the codes (tie_value) */
} qcase;

/* 1: an unscaled cast that the fast instance's cast kernel must take (no smoothing, 8-channel pieces;
 * the test's buffers are aligned) */
static int expect_cast(const qcase *qc)
{
    return (!strcmp(qc->fmt, "fp16") || !strcmp(qc->fmt, "bf16") || !strcmp(qc->fmt, "fp32")) &&
           qc->smooth == QATTN_KERNELS_SMOOTH_NONE && qc->d % 8 == 0 && !qc->transposed;
}

static const qattn_kernels_sig *find_sig(const char *name)
{
    for (size_t i = 0; i < qattn_kernels_count(); i++)
        if (!strcmp(qattn_kernels_get(i)->name, name))
            return qattn_kernels_get(i);
    return NULL;
}

/* bytes of a stored element (int4: a pair's byte) */
static size_t code_bytes(qattn_fmt f)
{
    return f == QATTN_FMT_FP32 ? 4 : f == QATTN_FMT_FP16 || f == QATTN_FMT_BF16 ? 2 : 1;
}

static float code_value(qattn_fmt f, const uint8_t *row, size_t c)
{
    if (f == QATTN_FMT_FP32 || f == QATTN_FMT_FP16 || f == QATTN_FMT_BF16) { /* unscaled: the values */
        float x;
        uint16_t u;
        if (f == QATTN_FMT_FP32) {
            memcpy(&x, row + 4 * c, 4);
            return x;
        }
        memcpy(&u, row + 2 * c, 2);
        return f == QATTN_FMT_BF16 ? qattn_num_bf16_decode(u) : qattn_num_fp16_decode(u);
    }
    if (f == QATTN_FMT_INT4) {
        unsigned byte = row[c / 2], nib = c & 1 ? byte >> 4 : byte & 0xfu;
        return (float)((int)(nib ^ 8u) - 8);
    }
    if (f == QATTN_FMT_INT8)
        return (float)(int8_t)row[c];
    if (f == QATTN_FMT_E4M3)
        return qattn_num_e4m3_decode(row[c]);
    return qattn_num_e5m2_decode(row[c]);
}

/* random values with per-channel offsets and an outlier channel, never 0 */
static float make_value(size_t c, double offs)
{
    double v = check_gauss(&rs) * (0.5 + (double)(c % 7) * 0.3) + offs * (double)((c * 37) % 11 - 5);
    if (c % 29 == 3)
        v *= 8.0;
    if (v == 0.0)
        v = 0.25;
    return (float)v;
}

/* values whose quotients by the scale fall exactly on the codes' rounding
 * boundaries (the kernels' division-free path must round these exactly):
 * 1: int8 k + 0.5 with 127 in channel 0 (token scales 1); 3: int4, 7 in
 * channel 0; 2: e4m3 midpoints in [1, 2) with 448 every 50th token (channel
 * scales 1); 4: the same with 448 in channel 0 (token scales 1); 5: int8
 * (k + 0.5) * 0.4375 with 55.5625 in channel 0 (token scales 0.4375, whose
 * fp32 reciprocal moves some quotients off their ties); 6: mode 2's values
 * with signed zeros (+0 in even, -0 in odd channels) in every token t % 5 == 2
 * and every channel c % 9 == 4, so that token and channel groups of zeros
 * (scale 0) hold -0 (code 0, as quant/ writes +0 for a zero group); 7:
 * mode 2's midpoints times 0.4375 with 196 every 50th token (channel scales
 * 0.4375: fl(v fl(1 / s)) misses the tie in about half of the values, so
 * codes from the product alone fail) */
static float tie_value(int mode, size_t t, size_t c)
{
    float sign = (t + c) & 1 ? -1.0f : 1.0f;
    if (mode == 1)
        return c == 0 ? 127.0f : sign * ((float)((c * 7 + t) % 100) + 0.5f);
    if (mode == 5)
        return c == 0 ? 55.5625f : sign * ((float)((c * 7 + t) % 127) + 0.5f) * 0.4375f;
    if (mode == 3)
        return c == 0 ? 7.0f : sign * ((float)((c + t) % 7) + 0.5f);
    if (mode == 6 && (t % 5 == 2 || c % 9 == 4))
        return c & 1 ? -0.0f : 0.0f;
    if ((mode == 2 && t % 50 == 0) || (mode == 4 && c == 0))
        return 448.0f;
    const float mid = sign * (1.0f + (float)(2 * ((t + c) % 8) + 1) / 16.0f); /* an e4m3 midpoint in [1, 2) */
    if (mode == 7)
        return t % 50 == 0 ? 196.0f : mid * 0.4375f;
    return mid;
}

/* one operand of a case on the device: input, poisoned outputs, params */
typedef struct qrun {
    const qcase *qc;
    qattn_operand op;
    int cu[5], seqlen;
    size_t T, d, H, bc, bs, bm;
    int64_t npad;
    float *x;     /* [H, T, d] the input's values */
    uint16_t *x16; /* the input in the device layout */
    void *dx, *dcodes, *dscale, *dmean, *dwork, *dflag, *dcu;
    qattn_kernels_quant_params p;
} qrun;

static void qrun_free(qrun *r)
{
    free(r->x);
    free(r->x16);
    qattn_kernels_dev_free(r->dx);
    qattn_kernels_dev_free(r->dcodes);
    qattn_kernels_dev_free(r->dscale);
    qattn_kernels_dev_free(r->dmean);
    qattn_kernels_dev_free(r->dwork);
    qattn_kernels_dev_free(r->dflag);
    qattn_kernels_dev_free(r->dcu);
    memset(r, 0, sizeof *r);
}

/* r's outputs poisoned (before a launch); 0 on success */
static int qrun_poison(qrun *r)
{
    qattn_err err;
    int rc = qattn_kernels_dev_fill(r->dcodes, 0xa5, r->bc, &err) ||
             qattn_kernels_dev_fill(r->dscale, 0xa5, r->bs, &err) ||
             qattn_kernels_dev_fill(r->dmean, 0xa5, r->bm ? r->bm : 4, &err);
    CHECK(rc == 0, "poisoning the outputs: %s", err.msg);
    return rc;
}

/* the case's input on the device, its outputs poisoned, its params; 0 on success */
static int qrun_init(qrun *r, const qcase *qc)
{
    qattn_err err;
    memset(r, 0, sizeof *r);
    r->qc = qc;
    if (qattn_fmt_parse(qc->fmt, &r->op.fmt) || qattn_group_parse(qc->group, &r->op.group, &err)) {
        CHECK(0, "case %s@%s does not parse", qc->fmt, qc->group);
        return 1;
    }
    for (int b = 0; b < qc->nseq; b++) {
        r->cu[b + 1] = r->cu[b] + qc->lens[b];
        r->seqlen = qc->lens[b] > r->seqlen ? qc->lens[b] : r->seqlen;
    }
    if (!qc->varlen)
        for (int b = 0; b < qc->nseq; b++)
            CHECK(qc->lens[b] == r->seqlen, "test setup: equal lengths");
    const size_t T = (size_t)r->cu[qc->nseq], d = (size_t)qc->d, H = (size_t)qc->heads;
    r->T = T;
    r->d = d;
    r->H = H;
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = qc->nseq;
    pb.hq = pb.hkv = qc->heads;
    pb.d = qc->d;
    pb.seqlen_q = pb.seqlen_k = r->seqlen;
    pb.varlen = qc->varlen;
    pb.in = qc->in;
    /* host input: x [H, T, d] as the kernels read it, x16 in the device layout */
    r->x = malloc(H * T * d * 4);
    r->x16 = malloc(H * T * d * 2);
    int64_t s_tok = qc->thd ? (int64_t)(H * d) : (int64_t)d, s_head = qc->thd ? (int64_t)d : (int64_t)(T * d);
    int64_t s_batch = qc->varlen ? 0 : (int64_t)r->seqlen * s_tok;
    for (size_t h = 0; h < H; h++)
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < d; c++) {
                float f = qc->ties ? tie_value(qc->ties, t, c) : make_value(c, 1.5);
                uint16_t e = qc->in == QATTN_FMT_BF16 ? qattn_num_bf16_encode(f) : qattn_num_fp16_encode(f);
                r->x[(h * T + t) * d + c] =
                    qc->in == QATTN_FMT_BF16 ? qattn_num_bf16_decode(e) : qattn_num_fp16_decode(e);
                r->x16[(size_t)(t * (size_t)s_tok + h * (size_t)s_head) + c] = e;
            }
    qattn_kernels_quant_sizes(&r->op, qc->heads, qc->nseq, r->seqlen, (int64_t)T, qc->d, qc->smooth, qc->mblock,
                              &r->bc, &r->bs, &r->bm);
    r->npad = ((int64_t)r->seqlen + 127) / 128 * 128;
    if (qc->transposed)
        r->bc = H * (size_t)qc->nseq * d * (size_t)r->npad;
    const size_t bm4 = r->bm ? r->bm : 4;
    int rc = qattn_kernels_dev_alloc(&r->dx, H * T * d * 2, &err) ||
             qattn_kernels_dev_alloc(&r->dcodes, r->bc, &err) || qattn_kernels_dev_alloc(&r->dscale, r->bs, &err) ||
             qattn_kernels_dev_alloc(&r->dmean, bm4, &err) || qattn_kernels_dev_alloc(&r->dflag, 4, &err) ||
             qattn_kernels_dev_alloc(&r->dcu, sizeof r->cu, &err) ||
             qattn_kernels_dev_to(r->dx, r->x16, H * T * d * 2, &err) ||
             qattn_kernels_dev_to(r->dcu, r->cu, sizeof r->cu, &err) || qattn_kernels_dev_fill(r->dflag, 0, 4, &err);
    CHECK(rc == 0, "device setup: %s", err.msg);
    rc = rc || qrun_poison(r);
    rc = rc || qattn_kernels_quant_fill(&r->p, &pb, r->dx, s_batch, s_head, s_tok, qc->heads, r->seqlen, (int64_t)T,
                                        qc->varlen ? (const int *)r->dcu : NULL, &r->op, qc->smooth, qc->mblock,
                                        r->dcodes, (float *)r->dscale, qc->smooth ? (float *)r->dmean : NULL,
                                        (int *)r->dflag, &err);
    if (!rc && qc->transposed)
        rc = qattn_kernels_quant_set_layout(&r->p, QATTN_KERNELS_LAYOUT_TRANSPOSED, &err);
    size_t ws = rc ? 0 : qattn_kernels_quant_work_size(&r->p);
    if (!rc && ws) {
        rc = qattn_kernels_dev_alloc(&r->dwork, ws, &err) || qattn_kernels_dev_fill(r->dwork, 0xa5, ws, &err);
        r->p.work = r->dwork;
    }
    CHECK(rc == 0, "fill: %s", err.msg);
    return rc;
}

/* the device's codes, scales and means of a run operand against quant/'s,
 * bit for bit, and its NaN flag 0; tag: what ran it */
static void qrun_check(const qrun *r, const char *name, const char *tag)
{
    qattn_err err;
    const qcase *qc = r->qc;
    const size_t T = r->T, d = r->d, H = r->H, bc = r->bc, bs = r->bs, bm = r->bm;
    const int64_t npad = r->npad;
    const qattn_kernels_quant_params p = r->p;
    uint8_t *codes = malloc(bc);
    float *sc = malloc(bs), *mn = malloc(bm ? bm : 4);
    int flag = -1;
    int rc = qattn_kernels_dev_from(codes, r->dcodes, bc, &err) || qattn_kernels_dev_from(sc, r->dscale, bs, &err) ||
             qattn_kernels_dev_from(mn, r->dmean, bm ? bm : 4, &err) ||
             qattn_kernels_dev_from(&flag, r->dflag, 4, &err);
    CHECK(rc == 0 && flag == 0, "copy back / non-finite flag %d", flag);
    size_t bad = 0, badsc = 0, badmean = 0, badpad = 0;
    const size_t row = (size_t)p.row, ntok = (size_t)p.ntok, nch = (size_t)p.nch;
    float *xs = malloc((size_t)r->seqlen * d * 4 + 4), *mref = malloc(((size_t)r->seqlen + 1) * d * 4);
    for (size_t h = 0; h < H && !rc; h++)
        for (int b = 0; b < qc->nseq; b++) {
            const size_t n = (size_t)qc->lens[b], t0 = (size_t)r->cu[b], hb = h * (size_t)qc->nseq + (size_t)b;
            memcpy(xs, r->x + (h * T + t0) * d, n * d * 4);
            size_t nmref = 0;
            if (qc->smooth == QATTN_KERNELS_SMOOTH_TOKENS) {
                qattn_smooth_mean(xs, n, d, mref);
                qattn_smooth_sub(xs, n, d, mref, xs);
                nmref = 1;
            } else if (qc->smooth == QATTN_KERNELS_SMOOTH_BLOCKS) {
                qattn_smooth_blocks(xs, n, d, (size_t)qc->mblock, mref, xs);
                nmref = (n + (size_t)qc->mblock - 1) / (size_t)qc->mblock;
            }
            for (size_t i = 0; i < (size_t)p.nmean * d; i++) {
                float want = i < nmref * d ? mref[i] : 0.0f;
                badmean += qattn_num_f2u(mn[hb * (size_t)p.nmean * d + i]) != qattn_num_f2u(want);
            }
            qattn_qtensor t;
            if (qattn_qtensor_init(&t, r->op.fmt, &r->op.group, xs, n, d, &err)) {
                CHECK(0, "qtensor: %s", err.msg);
                continue;
            }
            for (size_t tk = 0; tk < n; tk++)
                for (size_t c = 0; c < d; c++) {
                    float val;
                    if (qc->transposed)
                        val = code_value(r->op.fmt, codes + (hb * d + c) * (size_t)npad, tk);
                    else
                        val = code_value(r->op.fmt, codes + (h * T + t0 + tk) * row * code_bytes(r->op.fmt), c);
                    bad += qattn_num_f2u(val) != qattn_num_f2u(t.val[tk * d + c]);
                }
            if (qc->transposed)
                for (size_t c = 0; c < d; c++)
                    for (size_t j = n; j < (size_t)npad; j++)
                        badpad += codes[(hb * d + c) * (size_t)npad + j] != 0;
            const size_t ng = qattn_group_count(&r->op.group, n, d);
            for (size_t g = 0; g < ntok * nch; g++) {
                float want = g < ng ? t.scale[g] : 0.0f;
                badsc += qattn_num_f2u(sc[hb * ntok * nch + g]) != qattn_num_f2u(want);
            }
            qattn_qtensor_free(&t);
        }
    CHECK(bad == 0 && badsc == 0 && badmean == 0 && badpad == 0,
          "%s %s@%s smooth %d in %s d=%d heads %d nseq %d%s%s%s%s: %zu codes, %zu scales, %zu means, %zu padding "
          "bytes differ",
          name, qc->fmt, qc->group, qc->smooth, qattn_fmt_name(qc->in), qc->d, qc->heads, qc->nseq,
          qc->varlen ? " varlen" : "", qc->thd ? " [T,H,d]" : "", qc->transposed ? " transposed" : "", tag, bad, badsc,
          badmean, badpad);
    if (!rc && bad == 0 && badsc == 0 && badmean == 0 && badpad == 0)
        printf("ok %-22s %s@%-16s smooth %d %s d=%-3d N=%-5d nseq %d%s%s%s%s\n", name, qc->fmt, qc->group,
               qc->smooth, qattn_fmt_name(qc->in), qc->d, r->seqlen, qc->nseq, qc->varlen ? " varlen" : "",
               qc->thd ? " [T,H,d]" : "", qc->transposed ? " transposed" : "", tag);
    free(xs);
    free(mref);
    free(codes);
    free(sc);
    free(mn);
}

/* the counters at the end of r's scratch (2 heads nseq unsigned): the
 * streamed kernels must leave them zero, so that a plan clears them once
 * (params counters_zero); 1 if they are */
static int counters_left_zero(const qrun *r, const char *name, const char *tag)
{
    qattn_err err;
    const size_t ws = qattn_kernels_quant_work_size(&r->p), n = 2 * r->H * (size_t)r->qc->nseq;
    if (!r->dwork || ws < n * 4)
        return 1;
    unsigned *cnt = malloc(n * 4);
    size_t nz = 0;
    int rc = qattn_kernels_dev_from(cnt, (const unsigned char *)r->dwork + ws - n * 4, n * 4, &err);
    for (size_t i = 0; i < n && !rc; i++)
        nz += cnt[i] != 0u;
    free(cnt);
    CHECK(rc == 0 && nz == 0, "%s %s@%s d=%d N=%d%s: %zu of %zu counters not zero after the launch", name,
          r->qc->fmt, r->qc->group, r->qc->d, r->seqlen, tag, nz, n);
    return rc == 0 && nz == 0;
}

/* one case through the instance `name` */
static void run_case(const qcase *qc, const char *name)
{
    qattn_err err;
    const qattn_kernels_sig *sig = find_sig(name);
    CHECK(sig != NULL, "instance %s is not in the registry", name);
    if (!sig)
        return;
    qrun r;
    int rc = qrun_init(&r, qc);
    qattn_kernels_quant_params p = r.p;
    int stream = 0;
    if (!rc && strstr(name, "quant_fast_")) {
        const unsigned routes = sig->quant_routes(&p);
        const int takes = (routes >> QATTN_KERNELS_QROUTE_TILED) & 1u;
        CHECK(takes == qc->fused, "%s %s@%s d=%d: fused kernels %s, expected %s", name, qc->fmt, qc->group, qc->d,
              takes ? "taken" : "not taken", qc->fused ? "taken" : "not taken");
        const int casts = (routes >> QATTN_KERNELS_QROUTE_CAST) & 1u;
        CHECK(casts == expect_cast(qc) && (!casts || route_of(sig, &p) == QATTN_KERNELS_QROUTE_CAST),
              "%s %s@%s d=%d: the cast kernel %s, expected %s", name, qc->fmt, qc->group, qc->d,
              casts ? "offered" : "not offered", expect_cast(qc) ? "chosen" : "not offered");
        const char *off = getenv("QATTN_QUANT_LEAN"), *soff = getenv("QATTN_QUANT_STREAM");
        const int stats = qc->smooth == QATTN_KERNELS_SMOOTH_TOKENS || !strncmp(qc->group, "tensor", 6) ||
                          !strncmp(qc->group, "channel", 7);
        const int no_stream = (soff && !strcmp(soff, "0")) || (!stats && !(soff && !strcmp(soff, "1")));
        const qattn_kernels_qroute route = route_of(sig, &p);
        stream = route == QATTN_KERNELS_QROUTE_STREAMED;
        const int lean = route == QATTN_KERNELS_QROUTE_LEAN;
        if (forced == QATTN_KERNELS_QROUTE_AUTO) {
            n_lean += lean;
            n_stream += stream;
        }
        CHECK(!stream || (qc->fused && !no_stream), "%s: streamed kernel for a case it must not run", name);
        CHECK(!lean || (qc->fused && !stream), "%s: lean kernel for a case it must not run", name);
        CHECK(!lean || !off || strcmp(off, "0"), "%s: lean kernel with QATTN_QUANT_LEAN=0", name);
        if (want_fast && !no_stream)
            CHECK(stream, "%s %s@%s d=%d: the streamed kernel must run this case", name, qc->fmt, qc->group, qc->d);
        if (want_fast && no_stream && !(off && !strcmp(off, "0")))
            CHECK(lean, "%s %s@%s d=%d: the lean encode kernel must run this case", name, qc->fmt, qc->group, qc->d);
    }
    char tag[48] = "";
    if (!rc && forced != QATTN_KERNELS_QROUTE_AUTO) { /* the route set, not the dispatcher's */
        p.route = forced;
        stream = forced == QATTN_KERNELS_QROUTE_STREAMED;
        n_forced[forced]++;
        snprintf(tag, sizeof tag, " route %s", qattn_kernels_qroute_name(forced));
    } else if (stream) {
        snprintf(tag, sizeof tag, " stream");
    }
    rc = rc || sig->launch_quant(&p, NULL, &err) || qattn_kernels_dev_sync(&err);
    CHECK(rc == 0, "%s%s: %s", name, tag, err.msg);
    if (!rc)
        qrun_check(&r, name, tag);
    /* the streamed kernel leaves its counters zero, and runs again without clearing them; any kernel
     * launched to overlap the previous one in the stream computes the same */
    if (!rc && stream && counters_left_zero(&r, name, " stream")) {
        p.counters_zero = 1;
        p.overlap = 1;
        rc = qrun_poison(&r) || sig->launch_quant(&p, NULL, &err) || qattn_kernels_dev_sync(&err);
        CHECK(rc == 0, "%s, second launch: %s", name, err.msg);
        if (!rc)
            qrun_check(&r, name, " stream, again on the counters it left");
        if (!rc)
            counters_left_zero(&r, name, " stream, again");
    } else if (!rc && strstr(name, "quant_fast_")) {
        p.overlap = 1;
        rc = qrun_poison(&r) || sig->launch_quant(&p, NULL, &err) || qattn_kernels_dev_sync(&err);
        CHECK(rc == 0, "%s, overlapped launch: %s", name, err.msg);
        if (!rc)
            qrun_check(&r, name, " overlapped launch");
    }
    qrun_free(&r);
}

/* an unscaled cast with an Inf in the middle of its input through the fast instance `name` (the cast
 * kernel): the NaN flag set, the other values cast; then with no codes (the check alone, as for a Q
 * that the attention kernel quantizes): the flag set again */
static void run_cast_inf(const qcase *qc, const char *name)
{
    qattn_err err;
    const qattn_kernels_sig *sig = find_sig(name);
    qrun r;
    if (!sig || qrun_init(&r, qc))
        return;
    const size_t at = r.H * r.T * r.d / 2 + 3;
    const uint16_t v = qc->in == QATTN_FMT_BF16 ? 0x7f80u : 0x7c00u;
    int flag[2] = {-1, -1};
    int rc = qattn_kernels_dev_to((uint16_t *)r.dx + at, &v, 2, &err) || sig->launch_quant(&r.p, NULL, &err) ||
             qattn_kernels_dev_sync(&err) || qattn_kernels_dev_from(&flag[0], r.dflag, 4, &err);
    qattn_kernels_quant_params p = r.p;
    p.codes = NULL;
    rc = rc || qattn_kernels_dev_fill(r.dflag, 0, 4, &err) || sig->launch_quant(&p, NULL, &err) ||
         qattn_kernels_dev_sync(&err) || qattn_kernels_dev_from(&flag[1], r.dflag, 4, &err);
    CHECK(rc == 0 && flag[0] == 1 && flag[1] == 1, "%s %s from %s, Inf in the input: rc %d, NaN flags %d, %d (codes "
          "NULL)", name, qc->fmt, qattn_fmt_name(qc->in), rc, flag[0], flag[1]);
    if (rc == 0 && flag[0] == 1 && flag[1] == 1)
        printf("ok %-22s %s from %s: Inf flagged, with and without codes\n", name, qc->fmt, qattn_fmt_name(qc->in));
    qrun_free(&r);
}

/* K (kc) and V (vc) of one problem through the instance's launch_quant_kv,
 * each checked against quant/ as run_case does; how: the way they must run
 * (the dispatcher's mode: 1 in one grid, 2 side by side on two streams, 0
 * one after the other; -1 any); inf 1 / 2: an Inf in K's / V's input, and then only
 * that operand's NaN flag must be set */
static void run_kv(const qcase *kc, const qcase *vc, int want, int inf)
{
    static const char *hows[3] = {"one after the other", "in one grid", "side by side"};
    qattn_err err;
    const char *name = kc->in == QATTN_FMT_BF16 ? "quant_fast_in_bf16" : "quant_fast_in_fp16";
    const qattn_kernels_sig *sig = find_sig(name);
    CHECK(sig != NULL && sig->launch_quant_kv != NULL, "instance %s with launch_quant_kv", name);
    if (!sig || !sig->launch_quant_kv)
        return;
    qrun rk, rv;
    int rc = qrun_init(&rk, kc), how = 0;
    rc = qrun_init(&rv, vc) || rc;
    if (!rc) {
        const qattn_kernels_kvmode mode =
            qattn_kernels_quant_kv_mode(sig->quant_kv_modes(&rk.p, &rv.p), route_of(sig, &rk.p), route_of(sig, &rv.p));
        how = mode == QATTN_KERNELS_KV_ONE_GRID ? 1 : mode == QATTN_KERNELS_KV_STREAMS ? 2 : 0;
        CHECK(want < 0 || how == want, "%s K %s@%s, V %s@%s d=%d N=%d: %s, expected %s", name, kc->fmt, kc->group,
              vc->fmt, vc->group, kc->d, rk.seqlen, hows[how], hows[want < 0 ? 0 : want]);
        n_kv[how]++;
    }
    if (!rc && inf) { /* an Inf in the middle of one operand's input */
        qrun *r = inf == 1 ? &rk : &rv;
        const uint16_t v = r->qc->in == QATTN_FMT_BF16 ? 0x7f80u : 0x7c00u;
        rc = qattn_kernels_dev_to((uint16_t *)r->dx + r->H * r->T * r->d / 2 + 3, &v, 2, &err);
    }
    rc = rc || sig->launch_quant_kv(&rk.p, &rv.p, NULL, &err) || qattn_kernels_dev_sync(&err);
    CHECK(rc == 0, "%s kv: %s", name, err.msg);
    if (!rc && inf) {
        int fk = -1, fv = -1;
        rc = qattn_kernels_dev_from(&fk, rk.dflag, 4, &err) || qattn_kernels_dev_from(&fv, rv.dflag, 4, &err);
        CHECK(rc == 0 && fk == (inf == 1) && fv == (inf == 2), "%s kv, Inf in %s: NaN flags K %d, V %d", name,
              inf == 1 ? "K" : "V", fk, fv);
        if (rc == 0 && fk == (inf == 1) && fv == (inf == 2))
            printf("ok %-22s kv %s: Inf in %s flagged for %s only\n", name, hows[how], inf == 1 ? "K" : "V",
                   inf == 1 ? "K" : "V");
    } else if (!rc) {
        char tag[64];
        snprintf(tag, sizeof tag, " K of kv, %s", hows[how]);
        qrun_check(&rk, name, tag);
        snprintf(tag, sizeof tag, " V of kv, %s", hows[how]);
        qrun_check(&rv, name, tag);
        /* in one grid or side by side, the streamed kernels leave their counters zero: again without
         * clearing them, launched to overlap the previous kernel */
        if ((how == 1 || how == 2) && counters_left_zero(&rk, name, " K of kv") &&
            counters_left_zero(&rv, name, " V of kv")) {
            rk.p.counters_zero = rv.p.counters_zero = 1;
            rk.p.overlap = rv.p.overlap = 1;
            rc = qrun_poison(&rk) || qrun_poison(&rv) || sig->launch_quant_kv(&rk.p, &rv.p, NULL, &err) ||
                 qattn_kernels_dev_sync(&err);
            CHECK(rc == 0, "%s kv, second launch: %s", name, err.msg);
            if (!rc) {
                snprintf(tag, sizeof tag, " K of kv, %s, again", hows[how]);
                qrun_check(&rk, name, tag);
                snprintf(tag, sizeof tag, " V of kv, %s, again", hows[how]);
                qrun_check(&rv, name, tag);
                counters_left_zero(&rk, name, " K of kv, again");
                counters_left_zero(&rv, name, " V of kv, again");
            }
        }
    }
    qrun_free(&rk);
    qrun_free(&rv);
}

#ifdef QATTN_TEST_GPU
static int bench(void); /* test_kernels_quant_gpu.c */
#endif

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "--bench") && strcmp(argv[1], "--small"))) {
        fprintf(stderr, "usage: %s [--small | --bench]\n", argv[0]);
        return 2;
    }
#ifdef QATTN_TEST_GPU
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        return bench();
    const int big = argc == 1; /* GPU: longer sequences too, unless --small */
#else
    const int big = 0;
#endif
    const qattn_fmt F16 = QATTN_FMT_FP16, B16 = QATTN_FMT_BF16;
    const int NO = QATTN_KERNELS_SMOOTH_NONE, TOK = QATTN_KERNELS_SMOOTH_TOKENS, BLK = QATTN_KERNELS_SMOOTH_BLOCKS;
    const qcase cases[] = {
        /* the sage2-8b-sm90 operands: Q, K (smooth=k), V^T per channel */
        {"int8", "thread:16/8/1", NO, 0, F16, 128, 2, 1, {150}, 0, 0, 0, 1, 0},
        {"int8", "thread:128/8/2", TOK, 0, F16, 128, 2, 2, {300, 300}, 0, 0, 0, 1, 0},
        {"e4m3", "channel", NO, 0, F16, 128, 2, 2, {200, 200}, 0, 0, 1, 1, 0},
        /* sage2-8b, bf16, varlen, [T, H, d] */
        {"int8", "thread:32/8/1", NO, 0, B16, 128, 3, 3, {37, 100, 1}, 1, 1, 0, 1, 0},
        {"int8", "thread:64/8/2", TOK, 0, B16, 64, 2, 3, {37, 600, 5}, 1, 0, 0, 1, 0},
        {"e4m3", "channel", NO, 0, B16, 64, 2, 3, {37, 260, 1}, 1, 1, 1, 1, 0},
        {"e4m3", "channel", TOK, 0, F16, 128, 2, 2, {130, 7}, 1, 0, 1, 1, 0}, /* smooth=v, V^T */
        /* every group kind, int4 / e4m3 / e5m2, e8m0, Q block smoothing */
        {"int8", "tensor", NO, 0, F16, 64, 2, 1, {77}, 0, 0, 0, 1, 0},
        {"int8", "tensor", TOK, 0, B16, 128, 2, 2, {513, 513}, 0, 0, 0, 1, 0},
        {"e4m3", "tensor,ch:16", TOK, 0, F16, 64, 2, 1, {90}, 0, 0, 0, 1, 0},
        {"int8", "token", TOK, 0, F16, 128, 2, 1, {70}, 0, 0, 0, 1, 0},
        {"int4", "block:64", TOK, 0, F16, 128, 2, 1, {70}, 0, 0, 0, 1, 0},
        {"e4m3", "warp:32", BLK, 32, F16, 128, 2, 1, {75}, 0, 0, 0, 1, 0},
        {"int8", "block:32,e8m0", BLK, 64, B16, 64, 2, 2, {50, 130}, 1, 0, 0, 1, 0},
        {"int4", "thread:32/8/1", BLK, 16, F16, 64, 2, 1, {45}, 0, 0, 0, 1, 0},
        {"e5m2", "thread:64/16/4", NO, 0, B16, 128, 1, 1, {99}, 0, 1, 0, 1, 0},
        {"int8", "channel,e8m0", TOK, 0, F16, 64, 2, 1, {33}, 0, 0, 0, 1, 0},
        {"int8", "thread:128/8/2", TOK, 0, F16, 128, 1, 1, {1}, 0, 0, 1, 1, 0}, /* one token, V^T of K-style groups */
        /* exact ties of the codes' rounding */
        {"int8", "token", NO, 0, F16, 64, 1, 1, {40}, 0, 0, 0, 1, 1},
        {"int8", "token", NO, 0, F16, 128, 1, 1, {64}, 0, 0, 0, 1, 5},
        {"int4", "thread:32/8/1", NO, 0, F16, 64, 1, 1, {64}, 0, 0, 0, 1, 3},
        {"e4m3", "channel", NO, 0, F16, 64, 1, 1, {100}, 0, 0, 1, 1, 2},
        {"e4m3", "token", NO, 0, B16, 64, 1, 1, {40}, 0, 0, 0, 1, 4},
        {"e4m3", "channel", NO, 0, F16, 128, 1, 1, {100}, 0, 0, 1, 1, 7},
        {"e4m3", "channel", NO, 0, B16, 64, 1, 1, {70}, 0, 0, 1, 1, 7},
        /* groups of signed zeros (scale 0) */
        {"e4m3", "token", NO, 0, F16, 64, 1, 1, {40}, 0, 0, 0, 1, 6},
        {"e4m3", "channel", NO, 0, F16, 128, 1, 1, {100}, 0, 0, 1, 1, 6},
        {"e4m3", "channel", TOK, 0, B16, 64, 1, 1, {70}, 0, 0, 0, 1, 6},
        {"int8", "token", NO, 0, B16, 128, 1, 1, {40}, 0, 0, 0, 1, 6},
        /* not fused (the portable kernels run): split Q/K groups, d % 16, tile too large, fp16 casts */
        {"int8", "token,ch:32", NO, 0, F16, 64, 2, 1, {40}, 0, 0, 0, 0, 0},
        {"int8", "token", NO, 0, F16, 72, 2, 1, {40}, 0, 0, 0, 0, 0},
        {"int8", "thread:512/8/1", NO, 0, F16, 128, 1, 1, {40}, 0, 0, 0, 0, 0},
        {"int8", "tensor", BLK, 32, F16, 64, 2, 1, {70}, 0, 0, 0, 0, 0},
        /* unscaled casts (the baselines' operands from another dtype): the cast kernel; varlen, [T, H, d],
         * d = 72, the dtype itself; not taken: d % 8, smoothing */
        {"bf16", "token", NO, 0, F16, 128, 2, 2, {300, 300}, 0, 0, 0, 0, 0},
        {"fp16", "token", NO, 0, B16, 64, 3, 3, {37, 100, 1}, 1, 1, 0, 0, 0},
        {"fp32", "token", NO, 0, F16, 72, 2, 1, {45}, 0, 0, 0, 0, 0},
        {"bf16", "token", NO, 0, B16, 128, 1, 1, {10}, 0, 0, 0, 0, 0},
        {"bf16", "token", NO, 0, F16, 68, 1, 1, {20}, 0, 0, 0, 0, 0},
        {"fp16", "token", TOK, 0, B16, 64, 2, 1, {50}, 0, 0, 0, 0, 0},
        {"bf16", "token", NO, 0, F16, 128, 4, 2, {4099, 4097}, 1, 0, 0, 0, 0},
        /* longer (GPU only): many tiles and chunks */
        {"int8", "thread:128/8/2", TOK, 0, F16, 128, 4, 2, {4099, 4099}, 0, 0, 0, 1, 0},
        {"e4m3", "channel", NO, 0, B16, 128, 4, 3, {3000, 1029, 2050}, 1, 0, 1, 1, 0},
        {"int8", "thread:16/8/1", NO, 0, F16, 64, 4, 2, {2047, 2047}, 0, 1, 0, 1, 0},
    };
    const size_t ncase = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < ncase; i++) {
        if (!big && cases[i].lens[0] + cases[i].lens[1] + cases[i].lens[2] > 2000)
            continue;
        const char *fast = cases[i].in == QATTN_FMT_BF16 ? "quant_fast_in_bf16" : "quant_fast_in_fp16";
        want_fast = i < 3; /* the sage2-8b-sm90 operands */
        run_case(&cases[i], fast);
        if (cases[i].fused) { /* the streamed kernel for every operand, with one tile per slice: many blocks per unit */
            setenv("QATTN_QUANT_STREAM", "1", 1);
            run_case(&cases[i], fast);
            setenv("QATTN_QUANT_STREAM_TPR", "1", 1);
            run_case(&cases[i], fast);
            unsetenv("QATTN_QUANT_STREAM_TPR");
            unsetenv("QATTN_QUANT_STREAM");
        }
        if (cases[i].fused) { /* every route the instance offers, set in the params */
            const qattn_kernels_sig *fs = find_sig(fast);
            qrun r;
            unsigned routes = 0;
            if (fs && !qrun_init(&r, &cases[i])) {
                routes = fs->quant_routes(&r.p);
                qrun_free(&r);
            }
            for (int rt = QATTN_KERNELS_QROUTE_PORTABLE; rt < QATTN_KERNELS_QROUTE_COUNT; rt++)
                if ((routes >> rt) & 1u) {
                    forced = (qattn_kernels_qroute)rt;
                    run_case(&cases[i], fast);
                    if (rt == QATTN_KERNELS_QROUTE_STREAMED) { /* one tile per slice: many blocks per unit */
                        setenv("QATTN_QUANT_STREAM_TPR", "1", 1);
                        run_case(&cases[i], fast);
                        unsetenv("QATTN_QUANT_STREAM_TPR");
                    }
                }
            forced = QATTN_KERNELS_QROUTE_AUTO;
        }
        if (cases[i].fused) { /* the same through the three launches (statistics, combine, lean encode) */
            setenv("QATTN_QUANT_STREAM", "0", 1);
            run_case(&cases[i], fast);
            /* and through the general encode kernel in place of the lean one */
            setenv("QATTN_QUANT_LEAN", "0", 1);
            run_case(&cases[i], fast);
            unsetenv("QATTN_QUANT_LEAN");
            unsetenv("QATTN_QUANT_STREAM");
        }
        want_fast = 0;
        run_case(&cases[i], cases[i].in == QATTN_FMT_BF16 ? "quant_portable_in_bf16" : "quant_portable_in_fp16");
        if (expect_cast(&cases[i])) {
            n_cast++;
            run_cast_inf(&cases[i], fast);
        }
    }
    CHECK(n_cast >= 4, "the cast kernel ran %d cases, expected at least 4", n_cast);
    /* K and V by launch_quant_kv (sage2 K with int8 / int4 codes, V^T e4m3 per channel): in one grid (the
     * default), side by side on two streams (QATTN_QUANT_KV=streams) and one after the other (=0); equal
     * and varlen sequences, [T, H, d] input, tails, one token, one tile per slice; an Inf in either
     * operand; V operands the one-grid kernel does not take */
    {
        const qcase kv[][2] = {
            {{"int8", "thread:128/8/2", TOK, 0, F16, 128, 2, 2, {300, 300}, 0, 0, 0, 1, 0},
             {"e4m3", "channel", NO, 0, F16, 128, 2, 2, {300, 300}, 0, 0, 1, 1, 0}},
            {{"int8", "thread:64/8/2", TOK, 0, B16, 64, 2, 3, {37, 600, 5}, 1, 0, 0, 1, 0},
             {"e4m3", "channel", NO, 0, B16, 64, 2, 3, {37, 600, 5}, 1, 1, 1, 1, 0}},
            {{"int4", "thread:32/8/1", TOK, 0, F16, 128, 1, 1, {130}, 0, 0, 0, 1, 0},
             {"e4m3", "channel", NO, 0, F16, 128, 1, 1, {130}, 0, 0, 1, 1, 0}},
            {{"int8", "thread:128/8/2", TOK, 0, F16, 64, 3, 1, {1}, 0, 0, 0, 1, 0},
             {"e4m3", "channel", NO, 0, F16, 64, 3, 1, {1}, 0, 0, 1, 1, 0}},
            {{"int8", "thread:128/8/2", TOK, 0, F16, 128, 4, 2, {4099, 4099}, 0, 0, 0, 1, 0},
             {"e4m3", "channel", NO, 0, F16, 128, 4, 2, {4099, 4099}, 0, 0, 1, 1, 0}},
            {{"int8", "thread:128/8/2", TOK, 0, B16, 128, 4, 3, {3000, 1029, 2050}, 1, 1, 0, 1, 0},
             {"e4m3", "channel", NO, 0, B16, 128, 4, 3, {3000, 1029, 2050}, 1, 0, 1, 1, 0}},
        };
        for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
            if (!big && kv[i][0].lens[0] + kv[i][0].lens[1] + kv[i][0].lens[2] > 2000)
                continue;
            run_kv(&kv[i][0], &kv[i][1], 1, 0);
            setenv("QATTN_QUANT_STREAM_TPR", "1", 1);
            run_kv(&kv[i][0], &kv[i][1], 1, 0);
            setenv("QATTN_QUANT_KV", "streams", 1);
            run_kv(&kv[i][0], &kv[i][1], 2, 0);
            unsetenv("QATTN_QUANT_STREAM_TPR");
            run_kv(&kv[i][0], &kv[i][1], 2, 0);
            setenv("QATTN_QUANT_KV", "0", 1);
            run_kv(&kv[i][0], &kv[i][1], 0, 0);
            unsetenv("QATTN_QUANT_KV");
        }
        const qcase vsm = {"e4m3", "channel", TOK, 0, F16, 128, 2, 2, {300, 300}, 0, 0, 1, 1, 0};
        const qcase vrows = {"e4m3", "channel", NO, 0, F16, 128, 2, 2, {300, 300}, 0, 0, 0, 1, 0};
        const qcase vtok = {"e4m3", "token", NO, 0, F16, 128, 2, 2, {300, 300}, 0, 0, 0, 1, 0};
        for (int m = 0; m < 2; m++) { /* one grid, then side by side */
            if (m)
                setenv("QATTN_QUANT_KV", "streams", 1);
            run_kv(&kv[0][0], &kv[0][1], 1 + m, 1);
            run_kv(&kv[0][0], &kv[0][1], 1 + m, 2);
            /* V pairs the one-grid kernel does not take: one after the other; side by side where both
             * kernels fit alike */
            run_kv(&kv[0][0], &vsm, m ? -1 : 0, 0);
            run_kv(&kv[0][0], &vrows, m ? -1 : 0, 0);
            run_kv(&kv[0][0], &vtok, 0, 0); /* V by the lean kernel: one after the other */
        }
        unsetenv("QATTN_QUANT_KV");
        CHECK(n_kv[1] >= 9 && n_kv[2] >= 9, "K and V ran in one grid %d times, side by side %d times, expected at "
              "least 9 each", n_kv[1], n_kv[2]);
    }
    /* every fused case offered the tiled and the portable route; the lean and streamed routes the cases
     * they fit */
    CHECK(n_forced[QATTN_KERNELS_QROUTE_TILED] >= 20 && n_forced[QATTN_KERNELS_QROUTE_PORTABLE] >= 20 &&
              n_forced[QATTN_KERNELS_QROUTE_LEAN] >= 15 && n_forced[QATTN_KERNELS_QROUTE_STREAMED] >= 30,
          "routes set in the params: portable %d, tiled %d, lean %d, streamed %d",
          n_forced[QATTN_KERNELS_QROUTE_PORTABLE], n_forced[QATTN_KERNELS_QROUTE_TILED],
          n_forced[QATTN_KERNELS_QROUTE_LEAN], n_forced[QATTN_KERNELS_QROUTE_STREAMED]);
    /* a route the instance does not offer is refused, naming it */
    {
        const qcase split = {"int8", "token,ch:32", QATTN_KERNELS_SMOOTH_NONE, 0, QATTN_FMT_FP16, 64, 2, 1, {40}, 0, 0, 0, 0, 0};
        const qattn_kernels_sig *fs = find_sig("quant_fast_in_fp16");
        qrun r;
        if (fs && !qrun_init(&r, &split)) {
            qattn_err err;
            r.p.route = QATTN_KERNELS_QROUTE_STREAMED;
            const int rc = fs->launch_quant(&r.p, NULL, &err);
            CHECK(rc == QATTN_KERNELS_ERR_UNSUPPORTED, "streamed route for split groups: rc %d", rc);
            if (rc)
                CHECK_STR_CONTAINS(err.msg, "streamed route");
            qrun_free(&r);
        }
    }
    /* the lean and streamed kernels ran the cases they can take (a plan that refuses them everywhere fails this) */
    CHECK(n_lean >= 15, "the lean encode kernel ran %d cases, expected at least 15", n_lean);
    CHECK(n_stream >= 30, "the streamed kernel ran %d cases, expected at least 30", n_stream);
    /* the layout setter refuses int4 codes */
    {
        qattn_kernels_quant_params p;
        qattn_err err;
        memset(&p, 0, sizeof p);
        p.fmt = QATTN_FMT_INT4;
        p.seqlen = 10;
        CHECK(qattn_kernels_quant_set_layout(&p, QATTN_KERNELS_LAYOUT_TRANSPOSED, &err) ==
                  QATTN_KERNELS_ERR_UNSUPPORTED,
              "int4 V^T refused");
        p.fmt = QATTN_FMT_E4M3;
        CHECK(qattn_kernels_quant_set_layout(&p, QATTN_KERNELS_LAYOUT_TRANSPOSED, &err) == 0 && p.npad == 128,
              "npad %lld", (long long)p.npad);
    }
    /* the attention params read V^T with v_st = npad (channel stride), keys contiguous */
    {
        qattn_scheme sc;
        qattn_err err;
        qattn_kernels_problem pb;
        memset(&pb, 0, sizeof pb);
        pb.nseq = 2;
        pb.hq = 4;
        pb.hkv = 2;
        pb.d = 64;
        pb.seqlen_q = pb.seqlen_k = 130;
        pb.in = QATTN_FMT_FP16;
        int rc = qattn_scheme_parse("sage2-8b-sm90", &sc, &err);
        qattn_kernels_quant_params qp[3];
        const qattn_operand *ops[3] = {&sc.q, &sc.k, &sc.v};
        static float dummy[64];
        for (int i = 0; i < 3 && !rc; i++)
            rc = qattn_kernels_quant_fill(&qp[i], &pb, dummy, 130 * 64, 260 * 64, 64, i ? 2 : 4, 130, 260, NULL, ops[i],
                                          i == 1 ? QATTN_KERNELS_SMOOTH_TOKENS : 0, 0, dummy, dummy,
                                          i == 1 ? dummy : NULL, NULL, &err);
        rc = rc || qattn_kernels_quant_set_layout(&qp[2], QATTN_KERNELS_LAYOUT_TRANSPOSED, &err);
        qattn_kernels_tensor t = {dummy, 130 * 64, 260 * 64, 64};
        qattn_kernels_attn_params ap;
        rc = rc || qattn_kernels_attn_fill(&ap, &sc, &pb, &qp[0], &qp[1], &qp[2], &t, &t, &t, &t, NULL, 260, NULL,
                                           NULL, &err);
        CHECK(rc == 0 && qp[2].npad == 256 && ap.v_st == 256 && ap.v_sb == 64 * 256 && ap.v_sh == 2 * 64 * 256 &&
                  ap.k_st == 64,
              "V^T strides: rc %d, npad %lld, v_st %lld, v_sb %lld, v_sh %lld", rc, (long long)qp[2].npad,
              (long long)ap.v_st, (long long)ap.v_sb, (long long)ap.v_sh);
    }
    return check_done();
}
