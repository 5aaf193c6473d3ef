/* The portable kernels, run by the host simulation (kernels/hip_port.h,
 * QATTN_HIP_SIM, with the emulation's own exp2), against the CPU emulation
 * of the same scheme: quantization, smoothing, online softmax and P.V
 * accumulation must give the same output bits. Also: the dispatcher's
 * errors name what is unsupported.
 *
 * The same driver, built against the real backend, is how qattn gpu-check
 * compares a GPU with the emulation (where only exp2 differs). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/check.h"
#include "qattn/numerics.h"
#include "qattn_kernels.h"

static uint64_t rs = 777; /* the cases' input stream (check_gauss) */

typedef struct tcase {
    const char *scheme;
    int d, hq, hkv;
    int nseq;
    int lens_q[4], lens_k[4]; /* per sequence */
    int varlen;
    const char *mask;
    qattn_fmt in;
    int lse;
    const char *path; /* the dispatcher must pick an instance whose name contains this, or NULL */
} tcase;

/* random [h, T, d] with per-channel offsets (so smoothing matters), stored in
 * dtype in; x holds the values as the kernels read them */
static void make_input(float *x, uint16_t *h16, size_t h, size_t t, size_t d, qattn_fmt in, double offs)
{
    for (size_t i = 0; i < h * t * d; i++) {
        size_t c = i % d;
        double v = check_gauss(&rs) * (0.5 + (double)(c % 7) * 0.3) + offs * (double)((c * 37) % 11 - 5);
        if (c % 29 == 3)
            v *= 8.0; /* an outlier channel */
        float f = (float)v;
        if (in == QATTN_FMT_FP16)
            h16[i] = qattn_num_fp16_encode(f), x[i] = qattn_num_fp16_decode(h16[i]);
        else if (in == QATTN_FMT_BF16)
            h16[i] = qattn_num_bf16_encode(f), x[i] = qattn_num_bf16_decode(h16[i]);
        else
            x[i] = f;
    }
}

static float out_value(const void *o, size_t i, qattn_fmt f)
{
    if (f == QATTN_FMT_FP16)
        return qattn_num_fp16_decode(((const uint16_t *)o)[i]);
    if (f == QATTN_FMT_BF16)
        return qattn_num_bf16_decode(((const uint16_t *)o)[i]);
    return ((const float *)o)[i];
}

static int dim_built(int d)
{
    for (size_t i = 0; i < qattn_kernels_count(); i++)
        if (qattn_kernels_get(i)->head_dim == d)
            return 1;
    return 0;
}

/* the codes and scales of one quantized operand against quant/'s
 * qattn_qtensor_init on the same smoothed values (one sequence) */
static void check_quant(const qattn_kernels_quant_params *qp, const float *x, const char *what)
{
    size_t n = (size_t)qp->seqlen, d = (size_t)qp->d, row = (size_t)qp->row;
    size_t ng = qattn_group_count(&qp->group, n, d);
    float *xs = malloc(n * d * 4), *mean = malloc(((n + 1) * d + 1) * 4), *sc = malloc((ng + 1) * 4);
    /* V for the MFMA path: [heads, 1, d, npad] (the codes of token t, channel c at c * npad + t) */
    const int tr = qp->layout == QATTN_KERNELS_LAYOUT_TRANSPOSED;
    const size_t hbytes = tr ? d * (size_t)qp->npad : n * row;
    uint8_t *codes = malloc(hbytes + 1);
    size_t bad = 0, badsc = 0;
    for (int h = 0; h < qp->heads; h++) {
        qattn_err err;
        memcpy(xs, x + (size_t)h * n * d, n * d * 4);
        if (qp->smooth == QATTN_KERNELS_SMOOTH_TOKENS) {
            qattn_smooth_mean(xs, n, d, mean);
            qattn_smooth_sub(xs, n, d, mean, xs);
        } else if (qp->smooth == QATTN_KERNELS_SMOOTH_BLOCKS) {
            qattn_smooth_blocks(xs, n, d, (size_t)qp->mblock, mean, xs);
        }
        qattn_qtensor t;
        if (qattn_qtensor_init(&t, qp->fmt, &qp->group, xs, n, d, &err)) {
            CHECK(0, "qtensor %s: %s", what, err.msg);
            break;
        }
        int rc = qattn_kernels_dev_from(codes, (const uint8_t *)qp->codes + (size_t)h * hbytes, hbytes, &err) ||
                 qattn_kernels_dev_from(sc, qp->scale + (size_t)h * ng, ng * 4, &err);
        CHECK(rc == 0, "copy %s", what);
        for (size_t i = 0; i < n * d && !rc; i++) {
            size_t t_ = i / d, c = i % d, at = tr ? c * (size_t)qp->npad + t_ : t_ * row + c; /* 8-bit codes */
            float val;
            if (qp->fmt == QATTN_FMT_INT4) {
                unsigned byte = codes[t_ * row + c / 2], nib = c & 1 ? byte >> 4 : byte & 0xfu;
                val = (float)((int)(nib ^ 8u) - 8);
            } else if (qp->fmt == QATTN_FMT_INT8) {
                val = (float)(int8_t)codes[at];
            } else if (qp->fmt == QATTN_FMT_E4M3) {
                val = qattn_num_e4m3_decode(codes[at]);
            } else {
                val = qattn_num_e5m2_decode(codes[at]);
            }
            bad += qattn_num_f2u(val) != qattn_num_f2u(t.val[i]);
        }
        for (size_t g = 0; g < ng && !rc; g++)
            badsc += qattn_num_f2u(sc[g]) != qattn_num_f2u(t.scale[g]);
        qattn_qtensor_free(&t);
    }
    CHECK(bad == 0 && badsc == 0, "%s (%s): %zu codes and %zu scales differ from qattn_qtensor_init", what,
          qattn_fmt_name(qp->fmt), bad, badsc);
    free(xs);
    free(mean);
    free(sc);
    free(codes);
}

static void run_case(const tcase *tc)
{
    qattn_scheme s;
    qattn_err err;
    if (!dim_built(tc->d)) { /* QATTN_GPU_HEAD_DIMS left it out */
        printf("skip %s: no d=%d instances built\n", tc->scheme, tc->d);
        return;
    }
    if (qattn_scheme_parse(tc->scheme, &s, &err)) {
        CHECK(0, "scheme %s: %s", tc->scheme, err.msg);
        return;
    }
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = tc->nseq;
    pb.hq = tc->hq;
    pb.hkv = tc->hkv;
    pb.d = tc->d;
    pb.varlen = tc->varlen;
    pb.lse = tc->lse;
    pb.in = tc->in;
    if (qattn_mask_parse(tc->mask, &pb.mask, &err)) {
        CHECK(0, "mask %s", tc->mask);
        return;
    }
    int cu_q[5] = {0}, cu_k[5] = {0};
    for (int b = 0; b < tc->nseq; b++) {
        cu_q[b + 1] = cu_q[b] + tc->lens_q[b];
        cu_k[b + 1] = cu_k[b] + tc->lens_k[b];
        pb.seqlen_q = tc->lens_q[b] > pb.seqlen_q ? tc->lens_q[b] : pb.seqlen_q;
        pb.seqlen_k = tc->lens_k[b] > pb.seqlen_k ? tc->lens_k[b] : pb.seqlen_k;
    }
    size_t tq = (size_t)cu_q[tc->nseq], tk = (size_t)cu_k[tc->nseq], d = (size_t)tc->d;
    size_t hq = (size_t)tc->hq, hkv = (size_t)tc->hkv;
    size_t es = tc->in == QATTN_FMT_FP32 ? 4 : 2, os = s.out == QATTN_FMT_FP32 ? 4 : 2;
    float *q = malloc(hq * tq * d * 4), *k = malloc(hkv * tk * d * 4), *v = malloc(hkv * tk * d * 4);
    uint16_t *q16 = malloc(hq * tq * d * 2), *k16 = malloc(hkv * tk * d * 2), *v16 = malloc(hkv * tk * d * 2);
    float *oe = malloc(hq * tq * d * 4), *lse_e = malloc(hq * tq * 4), *lse_k = malloc(hq * tq * 4);
    void *ok = malloc(hq * tq * d * os);
    make_input(q, q16, hq, tq, d, tc->in, 0.3);
    make_input(k, k16, hkv, tk, d, tc->in, 1.5);
    make_input(v, v16, hkv, tk, d, tc->in, 0.7);

    /* emulation: one packed head set per sequence unless sq == sk packing applies */
    qattn_mha a;
    memset(&a, 0, sizeof a);
    int64_t seqlens[4];
    int rc = 0;
    int packed = tc->nseq > 1;
    for (int b = 0; b < tc->nseq && packed; b++) {
        seqlens[b] = tc->lens_q[b];
        if (tc->lens_q[b] != tc->lens_k[b]) {
            CHECK(0, "test setup: packed sequences need sq == sk");
            packed = 0;
        }
    }
    a.q = q;
    a.k = k;
    a.v = v;
    a.hq = hq;
    a.hkv = hkv;
    a.sq = tq;
    a.sk = tk;
    a.d = d;
    a.seqlens = packed ? seqlens : NULL;
    a.nseq = packed ? (size_t)tc->nseq : 0;
    rc = qattn_emu_mha(&s, &a, &pb.mask, 0.0, oe, tc->lse ? lse_e : NULL, &err);
    CHECK(rc == 0, "emulation of %s: %s", tc->scheme, err.msg);

    /* kernels */
    void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL, *dlse = NULL;
    qattn_kernels_plan pl;
    memset(&pl, 0, sizeof pl);
    rc = qattn_kernels_dev_alloc(&dq, hq * tq * d * es, &err) || qattn_kernels_dev_alloc(&dk, hkv * tk * d * es, &err) ||
         qattn_kernels_dev_alloc(&dv, hkv * tk * d * es, &err) ||
         qattn_kernels_dev_alloc(&dout, hq * tq * d * os, &err) || qattn_kernels_dev_alloc(&dlse, hq * tq * 4, &err);
    CHECK(rc == 0, "alloc: %s", err.msg);
    if (rc)
        goto done;
    if (es == 2)
        rc = qattn_kernels_dev_to(dq, q16, hq * tq * d * 2, &err) || qattn_kernels_dev_to(dk, k16, hkv * tk * d * 2, &err) ||
             qattn_kernels_dev_to(dv, v16, hkv * tk * d * 2, &err);
    else
        rc = qattn_kernels_dev_to(dq, q, hq * tq * d * 4, &err) || qattn_kernels_dev_to(dk, k, hkv * tk * d * 4, &err) ||
             qattn_kernels_dev_to(dv, v, hkv * tk * d * 4, &err);
    /* poison the outputs */
    rc = rc || qattn_kernels_dev_fill(dout, 0xff, hq * tq * d * os, &err) ||
         qattn_kernels_dev_fill(dlse, 0xff, hq * tq * 4, &err);
    CHECK(rc == 0, "copy: %s", err.msg);
    qattn_kernels_io io;
    memset(&io, 0, sizeof io);
    /* [H, T, d]; with equal lengths and no cu_seqlens, sequence b starts at token b * N */
    int equal = !tc->varlen;
    io.q = (qattn_kernels_tensor){dq, equal ? (int64_t)pb.seqlen_q * (int64_t)d : 0, (int64_t)(tq * d), (int64_t)d};
    io.k = (qattn_kernels_tensor){dk, equal ? (int64_t)pb.seqlen_k * (int64_t)d : 0, (int64_t)(tk * d), (int64_t)d};
    io.v = (qattn_kernels_tensor){dv, equal ? (int64_t)pb.seqlen_k * (int64_t)d : 0, (int64_t)(tk * d), (int64_t)d};
    io.o = (qattn_kernels_tensor){dout, equal ? (int64_t)pb.seqlen_q * (int64_t)d : 0, (int64_t)(tq * d), (int64_t)d};
    io.lse = tc->lse ? (float *)dlse : NULL;
    io.cu_seqlens_q = tc->varlen ? cu_q : NULL;
    io.cu_seqlens_k = tc->varlen ? cu_k : NULL;
    rc = qattn_kernels_plan_init(&pl, &s, &pb, &io, &err);
    CHECK(rc == 0, "plan %s: %s", tc->scheme, err.msg);
    if (rc)
        goto done;
    rc = qattn_kernels_plan_quantize(&pl, NULL, 1, &err);
    CHECK(rc == 0, "quantize %s: %s", tc->scheme, err.msg);
    if (rc == 0 && tc->nseq == 1)
        for (int i = 0; i < 3; i++)
            if (pl.quantize[i] && qattn_fmt_is_scaled(pl.qp[i].fmt))
                check_quant(&pl.qp[i], i == 0 ? q : i == 1 ? k : v, i == 0 ? "q" : i == 1 ? "k" : "v");
    rc = rc || qattn_kernels_plan_attend(&pl, NULL, &err);
    CHECK(rc == 0, "attend %s: %s", tc->scheme, err.msg);
    rc = rc || qattn_kernels_dev_sync(&err) || qattn_kernels_dev_from(ok, dout, hq * tq * d * os, &err) ||
         qattn_kernels_dev_from(lse_k, dlse, hq * tq * 4, &err);
    CHECK(rc == 0, "run %s: %s", tc->scheme, err.msg);
    if (rc)
        goto done;
    { /* the plan again on its own buffers (the counters its first run left zero; K and V launched to
       * overlap Q): the same output bits */
        unsigned char *again = malloc(hq * tq * d * os);
        rc = qattn_kernels_dev_fill(dout, 0xff, hq * tq * d * os, &err) ||
             qattn_kernels_plan_quantize(&pl, NULL, 0, &err) || qattn_kernels_plan_attend(&pl, NULL, &err) ||
             qattn_kernels_dev_sync(&err) || qattn_kernels_dev_from(again, dout, hq * tq * d * os, &err);
        CHECK(rc == 0, "second run %s: %s", tc->scheme, err.msg);
        CHECK(rc != 0 || memcmp(again, ok, hq * tq * d * os) == 0, "%s d=%d: the second run of the plan differs",
              tc->scheme, tc->d);
        /* the same plan in a caller's workspace (PyTorch's way: nothing allocated or copied by the
         * plan, varlen offsets on the device, the scratch cleared on the stream): the same bits */
        qattn_kernels_io wio = io;
        size_t wsb = 0;
        void *ws = NULL, *dcu = NULL;
        qattn_kernels_plan wpl;
        memset(&wpl, 0, sizeof wpl);
        wio.ws_mode = 1;
        if (tc->varlen) {
            rc = rc || qattn_kernels_dev_alloc(&dcu, 2 * (size_t)(tc->nseq + 1) * sizeof(int), &err) ||
                 qattn_kernels_dev_to(dcu, cu_q, (size_t)(tc->nseq + 1) * sizeof(int), &err) ||
                 qattn_kernels_dev_to((int *)dcu + tc->nseq + 1, cu_k, (size_t)(tc->nseq + 1) * sizeof(int), &err);
            wio.cu_seqlens_q = wio.cu_seqlens_k = NULL;
            wio.cu_seqlens_q_dev = (const int *)dcu, wio.cu_seqlens_k_dev = (const int *)dcu + tc->nseq + 1;
            wio.tokens_q = (int64_t)tq, wio.tokens_k = (int64_t)tk;
        }
        rc = rc || qattn_kernels_plan_workspace(&s, &pb, &wio, &wsb, &err) ||
             qattn_kernels_dev_alloc(&ws, wsb, &err) || qattn_kernels_dev_fill(ws, 0x5a, wsb, &err);
        wio.workspace = ws, wio.ws_bytes = wsb;
        again = malloc(hq * tq * d * os);
        rc = rc || qattn_kernels_dev_fill(dout, 0xff, hq * tq * d * os, &err) ||
             qattn_kernels_plan_init(&wpl, &s, &pb, &wio, &err) || qattn_kernels_plan_quantize(&wpl, NULL, 0, &err) ||
             qattn_kernels_plan_attend(&wpl, NULL, &err) || qattn_kernels_dev_sync(&err) ||
             qattn_kernels_dev_from(again, dout, hq * tq * d * os, &err);
        CHECK(rc == 0, "workspace run %s: %s", tc->scheme, err.msg);
        CHECK(rc != 0 || memcmp(again, ok, hq * tq * d * os) == 0, "%s d=%d: the plan in a workspace differs",
              tc->scheme, tc->d);
        CHECK(rc != 0 || wpl.ndev == 0, "%s: the workspace plan allocated %d buffers", tc->scheme, wpl.ndev);
        if (!rc) { /* the plan moved onto copies of every buffer (a cached plan's call): the same bits */
            const size_t qb = hq * tq * d * es, kb = hkv * tk * d * es, ob = hq * tq * d * os;
            void *q2 = NULL, *k2 = NULL, *v2 = NULL, *o2 = NULL, *l2 = NULL, *ws2 = NULL, *cu2 = NULL;
            unsigned char *h = malloc(qb > kb ? qb : kb);
            rc = !h || qattn_kernels_dev_alloc(&q2, qb, &err) || qattn_kernels_dev_alloc(&k2, kb, &err) ||
                 qattn_kernels_dev_alloc(&v2, kb, &err) || qattn_kernels_dev_alloc(&o2, ob, &err) ||
                 qattn_kernels_dev_alloc(&l2, hq * tq * 4, &err) || qattn_kernels_dev_alloc(&ws2, wsb, &err) ||
                 qattn_kernels_dev_fill(ws2, 0xa5, wsb, &err) || qattn_kernels_dev_fill(o2, 0xff, ob, &err) ||
                 qattn_kernels_dev_from(h, dq, qb, &err) || qattn_kernels_dev_to(q2, h, qb, &err) ||
                 qattn_kernels_dev_from(h, dk, kb, &err) || qattn_kernels_dev_to(k2, h, kb, &err) ||
                 qattn_kernels_dev_from(h, dv, kb, &err) || qattn_kernels_dev_to(v2, h, kb, &err);
            qattn_kernels_io io2 = wio;
            if (!rc && tc->varlen) {
                rc = qattn_kernels_dev_alloc(&cu2, 2 * (size_t)(tc->nseq + 1) * sizeof(int), &err) ||
                     qattn_kernels_dev_from(h, dcu, 2 * (size_t)(tc->nseq + 1) * sizeof(int), &err) ||
                     qattn_kernels_dev_to(cu2, h, 2 * (size_t)(tc->nseq + 1) * sizeof(int), &err);
                io2.cu_seqlens_q_dev = (const int *)cu2, io2.cu_seqlens_k_dev = (const int *)cu2 + tc->nseq + 1;
            }
            io2.q.data = q2, io2.k.data = k2, io2.v.data = v2, io2.o.data = o2;
            io2.lse = io.lse ? (float *)l2 : NULL;
            io2.workspace = ws2;
            qattn_kernels_plan moved = wpl;
            /* the old buffers poisoned: the moved plan must read and write the new ones only */
            rc = rc || qattn_kernels_dev_fill(dq, 0x7f, qb, &err) || qattn_kernels_dev_fill(dk, 0x7f, kb, &err) ||
                 qattn_kernels_dev_fill(dv, 0x7f, kb, &err) || qattn_kernels_dev_fill(ws, 0x7f, wsb, &err);
            rc = rc || qattn_kernels_plan_rebase(&moved, &wio, &io2, &err) ||
                 qattn_kernels_plan_quantize(&moved, NULL, 0, &err) || qattn_kernels_plan_attend(&moved, NULL, &err) ||
                 qattn_kernels_dev_sync(&err) || qattn_kernels_dev_from(again, o2, ob, &err);
            CHECK(rc == 0, "rebased run %s: %s", tc->scheme, err.msg);
            CHECK(rc != 0 || memcmp(again, ok, ob) == 0, "%s d=%d: the rebased plan differs", tc->scheme, tc->d);
            rc = rc || qattn_kernels_dev_from(h, q2, qb, &err) || qattn_kernels_dev_to(dq, h, qb, &err) ||
                 qattn_kernels_dev_from(h, k2, kb, &err) || qattn_kernels_dev_to(dk, h, kb, &err) ||
                 qattn_kernels_dev_from(h, v2, kb, &err) || qattn_kernels_dev_to(dv, h, kb, &err);
            qattn_kernels_dev_free(q2), qattn_kernels_dev_free(k2), qattn_kernels_dev_free(v2);
            qattn_kernels_dev_free(o2), qattn_kernels_dev_free(l2), qattn_kernels_dev_free(ws2);
            qattn_kernels_dev_free(cu2);
            free(h);
        }
        if (!rc && wsb > 256) { /* one byte short: refused, with the sizes */
            wio.ws_bytes = wsb - 1;
            CHECK(qattn_kernels_plan_init(&wpl, &s, &pb, &wio, &err) == QATTN_ERR_ARG, "%s: a short workspace",
                  tc->scheme);
            CHECK_STR_CONTAINS(err.msg, "workspace of");
        }
        qattn_kernels_plan_free(&wpl);
        qattn_kernels_dev_free(ws);
        qattn_kernels_dev_free(dcu);
        free(again);
        if (rc)
            goto done;
    }
    size_t diff = 0, first = (size_t)-1;
    double maxd = 0.0;
    for (size_t i = 0; i < hq * tq * d; i++) {
        float x = out_value(ok, i, s.out);
        if (qattn_num_f2u(x) != qattn_num_f2u(oe[i])) {
            if (first == (size_t)-1)
                first = i;
            diff++;
            double e = fabs((double)x - (double)oe[i]);
            maxd = e > maxd || e != e ? e : maxd;
        }
    }
    size_t ldiff = 0;
    double maxl = 0.0;
    if (tc->lse)
        for (size_t i = 0; i < hq * tq; i++)
            if (qattn_num_f2u(lse_k[i]) != qattn_num_f2u(lse_e[i])) {
                ldiff++;
                double e = fabs((double)lse_k[i] - (double)lse_e[i]);
                maxl = e > maxl || e != e ? e : maxl;
            }
    if (tc->path && !strstr(pl.attn_sig->name, tc->path))
        CHECK(0, "%s d=%d: the dispatcher picked %s, expected a %s instance", tc->scheme, tc->d, pl.attn_sig->name,
              tc->path);
    if (pl.attn_sig->path != QATTN_KERNELS_PATH_PORTABLE) {
        /* a vendor path (the MFMA kernels, emulated): the matrix instruction
         * adds in its own order (P.V, e4m3 Q.K) and the row sum is formed per
         * lane, so outputs may differ by rounding: a few fp32 ulp before the
         * output rounding (one output ulp after it), now and then a P element
         * one e4m3 step off (a fraction of a percent of the row's scale) */
        double omax = 0.0, dot = 0.0, nk = 0.0, ne = 0.0;
        for (size_t i = 0; i < hq * tq * d; i++) {
            double x = out_value(ok, i, s.out), e = oe[i];
            omax = fabs(e) > omax ? fabs(e) : omax;
            dot += x * e, nk += x * x, ne += e * e;
        }
        double cosv = nk > 0 && ne > 0 ? dot / sqrt(nk * ne) : (nk == ne ? 1.0 : 0.0);
        CHECK(maxd <= 2e-2 * omax && cosv >= 0.99999 && maxl <= 1e-4,
              "%s (%s, d=%d, %s, mask %s): max |diff| %g (max |O| %g), cos %.8f, max |dLSE| %g", tc->scheme,
              pl.attn_sig->name, tc->d, tc->varlen ? "varlen" : "fixed", tc->mask, maxd, omax, cosv, maxl);
        printf("ok %-60.60s %-55s %s (%s; %zu of %zu outputs, %zu LSE differ from the emulation)\n", tc->scheme,
               pl.attn_sig->name, tc->mask, getenv("QATTN_SIM_MFMA") ? getenv("QATTN_SIM_MFMA") : "gfx942", diff,
               hq * tq * d, ldiff);
        goto done;
    }
    CHECK(diff == 0 && ldiff == 0,
          "%s (%s, d=%d, %s, mask %s): %zu of %zu outputs differ (max |diff| %g; first [%zu]: %g vs %g), %zu LSE",
          tc->scheme, pl.attn_sig->name, tc->d, tc->varlen ? "varlen" : "fixed", tc->mask, diff, hq * tq * d, maxd,
          first == (size_t)-1 ? 0 : first, first == (size_t)-1 ? 0.0 : (double)out_value(ok, first, s.out),
          first == (size_t)-1 ? 0.0 : (double)oe[first], ldiff);
    printf("ok %-60.60s %-55s %s\n", tc->scheme, pl.attn_sig->name, tc->mask);
done:
    qattn_kernels_plan_free(&pl);
    qattn_kernels_dev_free(dq);
    qattn_kernels_dev_free(dk);
    qattn_kernels_dev_free(dv);
    qattn_kernels_dev_free(dout);
    qattn_kernels_dev_free(dlse);
    free(q);
    free(k);
    free(v);
    free(q16);
    free(k16);
    free(v16);
    free(oe);
    free(lse_e);
    free(lse_k);
    free(ok);
}

static void expect_unsupported(const char *spec, int d, const char *mask, const char *needle)
{
    qattn_scheme s;
    qattn_err err;
    if (qattn_scheme_parse(spec, &s, &err)) {
        CHECK(0, "scheme %s: %s", spec, err.msg);
        return;
    }
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = 1;
    pb.hq = pb.hkv = 1;
    pb.d = d;
    pb.seqlen_q = pb.seqlen_k = 64;
    pb.in = QATTN_FMT_FP16;
    qattn_mask_parse(mask, &pb.mask, &err);
    const qattn_kernels_sig *a = NULL, *q = NULL;
    int rc = qattn_kernels_find(&s, &pb, &a, &q, &err);
    CHECK(rc == QATTN_KERNELS_ERR_UNSUPPORTED, "%s d=%d: expected unsupported, got %d", spec, d, rc);
    if (rc) {
        CHECK_STR_CONTAINS(err.msg, needle);
        printf("unsupported, as expected: %s\n", err.msg);
    }
}

/* the dispatcher's path choice: ck-i8fp8bf16 (d 64) fits the MFMA and the
 * portable instance; MFMA is preferred, pb.paths restricts the choice, and
 * a path no fitting instance has is named in the error */
static void check_path_choice(void)
{
    qattn_scheme s;
    qattn_err err;
    if (qattn_scheme_parse("ck-i8fp8bf16", &s, &err)) {
        CHECK(0, "parse: %s", err.msg);
        return;
    }
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = 1;
    pb.hq = pb.hkv = 1;
    pb.d = 64;
    pb.seqlen_q = pb.seqlen_k = 64;
    pb.in = QATTN_FMT_FP16;
    pb.cc = -1;
    const qattn_kernels_sig *a = NULL;
    int rc = qattn_kernels_find(&s, &pb, &a, NULL, &err);
    CHECK(rc == 0 && a->path == QATTN_KERNELS_PATH_MFMA, "default: %s", rc ? err.msg : a->name);
    pb.paths = 1u << QATTN_KERNELS_PATH_PORTABLE;
    rc = qattn_kernels_find(&s, &pb, &a, NULL, &err);
    CHECK(rc == 0 && a->path == QATTN_KERNELS_PATH_PORTABLE, "portable asked for: %s", rc ? err.msg : a->name);
    pb.paths = 1u << QATTN_KERNELS_PATH_WGMMA;
    rc = qattn_kernels_find(&s, &pb, &a, NULL, &err);
    CHECK(rc == QATTN_KERNELS_ERR_UNSUPPORTED, "wgmma asked for: rc %d", rc);
    if (rc) {
        CHECK_STR_CONTAINS(err.msg, "paths asked for");
        CHECK_STR_CONTAINS(err.msg, "mfma: any device");
    }
    CHECK(!strcmp(qattn_kernels_path_name(QATTN_KERNELS_PATH_WGMMA), "wgmma"), "path name");
    /* rope=: no instance keeps a bf16 part of the head, and the dispatcher says so */
    qattn_scheme sr;
    CHECK(qattn_scheme_parse("bf16 rope=32", &sr, &err) == 0, "%s", err.msg);
    pb.paths = 0;
    rc = qattn_kernels_find(&sr, &pb, &a, NULL, &err);
    CHECK(rc == QATTN_KERNELS_ERR_UNSUPPORTED, "rope=32: rc %d", rc);
    CHECK_STR_CONTAINS(err.msg, "rope=32: no instance keeps a bf16 part of the head");
    /* qk=fp22 per channel group: the emulation only; with fa3-fp8 (acc=fp22, one scale a row) it changes nothing */
    CHECK(qattn_scheme_parse("q=e4m3@token,ch:64 k=e4m3@token,ch:64 p=e4m3 v=e4m3@tensor acc=fp22 qk=fp22", &sr, &err) == 0,
          "%s", err.msg);
    rc = qattn_kernels_find(&sr, &pb, &a, NULL, &err);
    CHECK(rc == QATTN_KERNELS_ERR_UNSUPPORTED, "qk=fp22 with channel groups: rc %d", rc);
    CHECK_STR_CONTAINS(err.msg, "qk=fp22: no attention instance sums Q.K per channel group");
    CHECK(qattn_scheme_parse("fa3-fp8 qk=fp22", &sr, &err) == 0, "%s", err.msg);
    rc = qattn_kernels_find(&sr, &pb, &a, NULL, &err);
    CHECK(rc == QATTN_OK, "fa3-fp8 qk=fp22: rc %d, %s", rc, err.msg);
}

/* the dS plane's bytes (smooth=q on instances with ds_plane): heads x sequences x Q blocks x padded keys */
static void check_ds_bytes(void)
{
    qattn_kernels_sig g;
    memset(&g, 0, sizeof g);
    qattn_kernels_attn_params p;
    memset(&p, 0, sizeof p);
    static const float mean = 0.0f;
    p.hq = 4, p.nseq = 2, p.nqb = 3, p.ds_ld = 256;
    CHECK(qattn_kernels_attn_ds_bytes(&g, &p) == 0, "ds bytes without ds_plane");
    g.ds_plane = 1;
    CHECK(qattn_kernels_attn_ds_bytes(&g, &p) == 0, "ds bytes without smooth=q");
    p.q_mean = &mean;
    CHECK(qattn_kernels_attn_ds_bytes(&g, &p) == (size_t)4 * 2 * 3 * 256 * 4, "ds bytes %zu",
          qattn_kernels_attn_ds_bytes(&g, &p));
}

int main(int argc, char **argv)
{
    (void)argv;
    int quick = argc > 1;
    const qattn_fmt F16 = QATTN_FMT_FP16, B16 = QATTN_FMT_BF16, F32 = QATTN_FMT_FP32;
    const tcase cases[] = {
        /* the presets that have instances, both head dims, tails (N not a multiple of anything) */
        {"sage2-8b", 128, 4, 2, 1, {77}, {77}, 0, "none", F16, 1, NULL},
        {"sage2-8b", 64, 2, 1, 3, {37, 100, 1}, {37, 100, 1}, 1, "causal", F16, 1, NULL},
        {"sage2-8b-sm90", 128, 2, 2, 1, {150}, {150}, 0, "causal", B16, 1, NULL},
        {"sage2-4b", 128, 4, 1, 1, {90}, {90}, 0, "none", F16, 1, NULL},
        {"sage2-4b", 64, 2, 2, 2, {70, 33}, {70, 33}, 1, "window:20,5", F16, 0, NULL},
        {"sage1-b", 64, 2, 2, 1, {65}, {65}, 0, "causal", F16, 1, NULL},
        {"sage1-b", 128, 2, 1, 2, {40, 40}, {40, 40}, 0, "none", F32, 1, NULL},
        {"fa3-fp8", 128, 2, 2, 1, {140}, {140}, 0, "causal", F16, 1, NULL},
        {"ck-i8fp8bf16", 128, 2, 2, 1, {64}, {64}, 0, "none", F16, 0, NULL},
        {"ck-i4fp8bf16", 64, 2, 2, 1, {100}, {100}, 0, "causal", B16, 1, NULL},
        {"ck-fp8bf16", 64, 3, 1, 1, {50}, {50}, 0, "none", F16, 1, NULL},
        {"fp16", 128, 2, 1, 1, {70}, {70}, 0, "causal", F16, 1, NULL},
        {"bf16", 64, 2, 2, 2, {45, 19}, {45, 19}, 1, "none", B16, 1, NULL},
        {"fp16", 64, 2, 2, 1, {33}, {33}, 0, "none", B16, 0, NULL}, /* cast bf16 -> fp16 by the quant kernel */
        /* Sq != Sk with bottom-right masks */
        {"sage2-8b", 128, 2, 2, 1, {40}, {100}, 0, "causal-br", F16, 1, NULL},
        {"sage2-8b", 64, 2, 1, 1, {100}, {40}, 0, "window:7,3", F16, 1, NULL},
        {"sage2-8b", 64, 2, 1, 1, {100}, {40}, 0, "causal-br", F16, 1, NULL}, /* rows with no key */
        /* variants: smoothing, accumulators, groups, kblock, output types */
        {"sage2-8b smooth=k+v out=fp16", 64, 2, 2, 1, {80}, {80}, 0, "none", F16, 1, NULL},
        {"sage2-8b acc=fp32", 128, 2, 2, 1, {66}, {66}, 0, "causal", F16, 0, NULL},
        {"sage2-8b acc=fp22 kblock=32", 64, 2, 2, 1, {97}, {97}, 0, "none", F16, 1, NULL},
        {"sage2-8b acc=fp22+fp32:32 kblock=128", 64, 2, 2, 1, {150}, {150}, 0, "causal", F16, 1, NULL},
        {"sage1-b acc=fp16+fp32:64", 64, 2, 2, 1, {130}, {130}, 0, "none", F16, 1, NULL},
        {"sage1-b acc=fp16+fp32:24 kblock=40", 64, 2, 2, 1, {130}, {130}, 0, "causal", F16, 1, NULL},
        {"sage1-b acc=fp32 smooth=q+k qblock=16", 128, 2, 2, 1, {60}, {60}, 0, "none", F16, 1, NULL},
        {"q=int8@token k=int8@block:32,e8m0 p=e4m3@static v=e4m3@tensor smooth=k acc=fp32 out=fp32", 64, 2, 2, 1,
         {50}, {50}, 0, "none", F16, 1, NULL},
        {"q=e4m3@warp:32 k=e4m3@thread:64/8/2 p=e4m3 v=e4m3@tensor,ch:16 smooth=q+k+v acc=fp22 out=bf16", 128, 2,
         1, 1, {75}, {75}, 0, "causal", F32, 1, NULL},
        {"q=int4@block:64 k=int4@token p=fp16 v=fp16 smooth=k acc=fp16 out=fp16", 128, 2, 2, 1, {70}, {70}, 0,
         "none", F16, 1, NULL},
    };
    size_t n = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++)
        if (!quick || i < 3)
            run_case(&cases[i]);

    /* the MFMA path (attn_fwd_mfma.h, its matrix instructions emulated):
     * int8 and e4m3 Q.K, both head dims, tails, GQA, varlen, every mask,
     * LSE, the output types, V smoothing and channel groups; each on the
     * simulated gfx942 and on gfx90a's instruction pairs */
    const tcase mfma[] = {
        {"ck-i8fp8bf16", 128, 4, 2, 1, {77}, {77}, 0, "none", F16, 1, "mfma"},
        {"ck-i8fp8bf16", 64, 4, 1, 3, {37, 130, 1}, {37, 130, 1}, 1, "causal", B16, 1, "mfma"},
        {"ck-fp8bf16", 128, 2, 2, 1, {150}, {150}, 0, "causal", F16, 1, "mfma"},
        {"ck-fp8bf16", 64, 3, 1, 2, {70, 33}, {70, 33}, 1, "window:20,5", F16, 1, "mfma"},
        {"ck-i8fp8bf16 smooth=k+v out=fp16", 64, 2, 2, 1, {100}, {40}, 0, "causal-br", F16, 1, "mfma"},
        {"ck-i8fp8bf16 out=fp32", 128, 2, 1, 1, {40}, {100}, 0, "causal-br", F32, 1, "mfma"},
        {"q=int8@token k=int8@block:32 p=e4m3 v=e4m3@tensor,ch:16 smooth=k acc=fp32 kblock=64 out=bf16", 128, 2, 2, 1,
         {65}, {65}, 0, "window:7,3", F16, 0, "mfma"},
        {"q=e4m3@tensor k=e4m3@tensor p=e4m3@static v=e4m3@channel smooth=none acc=fp32 kblock=64 out=bf16", 64, 2, 2,
         1, {129}, {129}, 0, "none", F16, 1, "mfma"},
    };
    for (int target = 0; target < 2; target++) {
        setenv("QATTN_SIM_MFMA", target ? "gfx90a" : "gfx942", 1);
        for (size_t i = 0; i < sizeof mfma / sizeof mfma[0]; i++)
            if (!quick || i < 2)
                run_case(&mfma[i]);
    }
    unsetenv("QATTN_SIM_MFMA");

    /* the dispatcher names what is unsupported */
    check_path_choice();
    check_ds_bytes();
    expect_unsupported("sage2-8b", 96, "none", "head dim 96");
    expect_unsupported("sage1-vb", 128, "none", "p=int8");
    expect_unsupported("sage2-8b q=int8@token,ch:32", 128, "none", "split along channels");
    expect_unsupported("sage2-8b v=e4m3@block:64", 128, "none", "vary along tokens");
    expect_unsupported("sage2-8b kblock=256", 128, "none", "kblock=256");
    expect_unsupported("sage2-8b q=int4@thread:32/8/1", 128, "none", "q=int4 k=int8");
    expect_unsupported("sage2-8b acc=fp16", 128, "none", "acc=fp16");

    /* every attention instance has a well-formed signature */
    for (size_t i = 0; i < qattn_kernels_count(); i++) {
        const qattn_kernels_sig *g = qattn_kernels_get(i);
        char buf[512];
        qattn_kernels_describe(g, buf, sizeof buf);
        CHECK(g->name && (g->launch_attn || g->launch_quant || g->launch_decode || g->launch_sparse), "instance %zu", i);
    }
    return check_done();
}
