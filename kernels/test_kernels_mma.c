/* The NVIDIA mma.sync attention instances (attn_fwd_mma.h) on a GPU against
 * the CPU emulation of the same scheme (qattn_emu_mha) and the float64
 * reference (qattn_ref_mha). Registered for the NVIDIA backend only, CTest
 * label gpu.
 *
 * Q, K, V are quantized on the host by quant/ (qattn_smooth_*,
 * qattn_qtensor_init: the very codes and scales the emulation uses), uploaded
 * (V transposed: [hkv, nseq, d, npad]), and the instance the dispatcher picks
 * for the scheme (it must be the mma one) runs on them.
 *
 * Tolerances against the emulation (what differs: ex2.approx vs the
 * emulation's polynomial, a few ulp in P, which can flip the e4m3 rounding of
 * an element of P now and then (one e4m3 step is 1/8 to 1/16 of it); the
 * order the tensor core sums the Q.K and P.V products and its fp22
 * truncation vs the emulation's key-by-key cut; the row sum's order; bf16
 * output rounding then flips by one bf16 ulp, 2^-8 relative):
 *   cosine(O_gpu, O_emu) >= 0.99999 (one flipped P element in a row of
 *   hundreds of keys moves that row by ~1e-3 relative, rare);
 *   max |O_gpu - O_emu| <= 2e-2 * max |O_emu| (a flip in a causal row that
 *   sees few keys, plus a bf16 ulp);
 *   max |LSE_gpu - LSE_emu| <= 1e-4 (l differs by a few ulp; LSE ~ 1..10).
 * The emulation's and the GPU's cosine against the float64 reference are
 * printed side by side; they must agree to 1e-4.
 *
 *   test_kernels_mma            the cases, then plans (the quantization
 *                               kernels write V transposed; Q fused into
 *                               the wgmma kernel equals the unfused plan)
 *   test_kernels_mma --quick    the small ones (for compute-sanitizer)
 * Speed: qattn bench (events, torch beside it). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/check.h"
#include "qattn/formats.h" /* qattn_int4_pack */
#include "qattn/numerics.h"
#include "qattn_kernels.h"
#include "wgmma_form.h" /* qattn_wg_nc */

static uint64_t rs = 12345; /* the cases' input stream (check_gauss) */

/* [h, T, d] normal values rounded to fp16, with a per-channel offset */
static void make_input(float *x, size_t n, size_t d, double offs)
{
    for (size_t i = 0; i < n; i++) {
        size_t c = i % d;
        double v = check_gauss(&rs) * (0.5 + (double)(c % 7) * 0.2) + offs * (double)((int)((c * 37) % 11) - 5);
        x[i] = qattn_num_fp16_decode(qattn_num_fp16_encode((float)v));
    }
}

typedef struct tcase {
    const char *scheme;
    int d, hq, hkv, nseq;
    int lens[3];
    int varlen;
    const char *mask;
} tcase;

/* device buffers of one problem, filled from host codes */
typedef struct dev_problem {
    void *q, *k, *v, *o;
    float *qs, *ks, *vs, *lse;
    int *cu;
} dev_problem;

static void dev_problem_free(dev_problem *dp)
{
    void *ps[] = {dp->q, dp->k, dp->v, dp->o, dp->qs, dp->ks, dp->vs, dp->lse, dp->cu};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        qattn_kernels_dev_free(ps[i]);
    memset(dp, 0, sizeof *dp);
}

/* the quant params the attention fill reads, for codes laid out as uploaded */
static void fake_qp(qattn_kernels_quant_params *qp, void *codes, float *scale, const qattn_operand *op, int heads,
                    int nseq, int seqlen, int64_t tokens, int d, const int *cu, int ntok, int nch, int transposed)
{
    memset(qp, 0, sizeof *qp);
    qp->codes = codes;
    qp->scale = scale;
    qp->fmt = op->fmt;
    qp->group = op->group;
    qp->heads = heads;
    qp->nseq = nseq;
    qp->seqlen = seqlen;
    qp->tokens = tokens;
    qp->d = d;
    qp->row = d;
    qp->cu_seqlens = cu;
    qp->ntok = ntok;
    qp->nch = nch;
    qp->layout = transposed ? QATTN_KERNELS_LAYOUT_TRANSPOSED : QATTN_KERNELS_LAYOUT_ROWS;
    qp->npad = transposed ? ((int64_t)seqlen + 127) / 128 * 128 : 0;
}

/* the byte of a stored Q / K / V value: an int8 code, or e4m3 bits */
static uint8_t code8(qattn_fmt f, float val)
{
    return f == QATTN_FMT_E4M3 ? qattn_num_e4m3_encode(val) : (uint8_t)(int8_t)val;
}

static void run_case(const tcase *tc)
{
    qattn_scheme s;
    qattn_err err;
    if (qattn_scheme_parse(tc->scheme, &s, &err)) {
        CHECK(0, "scheme %s: %s", tc->scheme, err.msg);
        return;
    }
    const int d = tc->d, hq = tc->hq, hkv = tc->hkv, nseq = tc->nseq;
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = nseq;
    pb.hq = hq;
    pb.hkv = hkv;
    pb.d = d;
    pb.varlen = tc->varlen;
    pb.lse = 1;
    pb.in = QATTN_FMT_FP16;
    if (qattn_mask_parse(tc->mask, &pb.mask, &err)) {
        CHECK(0, "mask %s", tc->mask);
        return;
    }
    int cu[4] = {0};
    int maxlen = 0;
    for (int b = 0; b < nseq; b++) {
        cu[b + 1] = cu[b] + tc->lens[b];
        maxlen = tc->lens[b] > maxlen ? tc->lens[b] : maxlen;
        if (!tc->varlen && tc->lens[b] != tc->lens[0]) {
            CHECK(0, "test setup: equal lengths expected");
            return;
        }
    }
    pb.seqlen_q = pb.seqlen_k = maxlen;
    const qattn_kernels_sig *sig = NULL;
    int rc = qattn_kernels_find(&s, &pb, &sig, NULL, &err);
    CHECK(rc == 0, "find %s: %s", tc->scheme, err.msg);
    if (rc)
        return;
    CHECK(sig->path == QATTN_KERNELS_PATH_MMA || sig->path == QATTN_KERNELS_PATH_WGMMA,
          "%s d=%d: the dispatcher chose %s, not an mma or wgmma instance", tc->scheme, d, sig->name);
    const size_t T = (size_t)cu[nseq];
    const int64_t npad = ((int64_t)maxlen + 127) / 128 * 128;
    const size_t q_ntok = qattn_group_ntok(&s.q.group, (size_t)maxlen);
    const size_t k_ntok = qattn_group_ntok(&s.k.group, (size_t)maxlen);
    const size_t v_nch = qattn_group_nch(&s.v.group, (size_t)d);
    /* V in rows of keys (fp16 P.V, or e4m3 widened by the wgmma producer: the sig's v_layout), else V^T */
    const int vrows = sig->v_layout == QATTN_KERNELS_LAYOUT_ROWS, ves = s.v.fmt == QATTN_FMT_FP16 ? 2 : 1;
    const size_t vbytes = vrows ? (size_t)hkv * T * d * ves : (size_t)hkv * nseq * d * npad;
    float *q = malloc((size_t)hq * T * d * 4), *k = malloc((size_t)hkv * T * d * 4), *v = malloc((size_t)hkv * T * d * 4);
    make_input(q, (size_t)hq * T * d, (size_t)d, 0.3);
    make_input(k, (size_t)hkv * T * d, (size_t)d, 1.5);
    make_input(v, (size_t)hkv * T * d, (size_t)d, 0.7);
    int8_t *qc = calloc((size_t)hq * T * d, 1), *kc = calloc((size_t)hkv * T * d, 1);
    uint8_t *vt = calloc(vbytes, 1);
    float *qsc = calloc((size_t)hq * nseq * q_ntok + 1, 4), *ksc = calloc((size_t)hkv * nseq * k_ntok + 1, 4);
    float *vsc = calloc((size_t)hkv * nseq * v_nch + 1, 4), *tmp = malloc((size_t)maxlen * d * 4 + 4),
          *mean = malloc((size_t)d * 4);
    /* smooth=q: Q block means [hq, nseq, nqb, d] (the quantization kernels' layout) */
    const int qblock = (s.smooth & QATTN_SMOOTH_Q) ? qattn_scheme_qblock(&s) : 0;
    const size_t nqb = qblock ? ((size_t)maxlen + (size_t)qblock - 1) / (size_t)qblock : 0;
    float *qmean = calloc((size_t)hq * nseq * nqb * d + 1, 4);
    float *kmean = calloc((size_t)hkv * nseq * d, 4); /* [hkv, nseq, d] (smooth=k; dS subtracts mean(Q) . kmean) */
    float *vmean = calloc((size_t)hkv * nseq * d, 4); /* [hkv, nseq, d] (smooth=v) */
    /* host quantization, per head and sequence, as the emulation does it */
    for (int h = 0; h < hq; h++)
        for (int b = 0; b < nseq; b++) {
            const size_t n = (size_t)tc->lens[b], off = (size_t)h * T * d + (size_t)cu[b] * d;
            qattn_qtensor t;
            const float *qin = q + off;
            if (qblock) {
                qattn_smooth_blocks(q + off, n, (size_t)d, (size_t)qblock, qmean + ((size_t)h * nseq + b) * nqb * d,
                                    tmp);
                qin = tmp;
            }
            if (qattn_qtensor_init(&t, s.q.fmt, &s.q.group, qin, n, (size_t)d, &err)) {
                CHECK(0, "qtensor q: %s", err.msg);
                continue;
            }
            for (size_t i = 0; i < n * d; i++)
                qc[off + i] = (int8_t)code8(s.q.fmt, t.val[i]);
            memcpy(qsc + ((size_t)h * nseq + b) * q_ntok, t.scale, qattn_group_ntok(&s.q.group, n) * 4);
            qattn_qtensor_free(&t);
        }
    for (int h = 0; h < hkv; h++)
        for (int b = 0; b < nseq; b++) {
            const size_t n = (size_t)tc->lens[b], off = (size_t)h * T * d + (size_t)cu[b] * d;
            qattn_qtensor t;
            memcpy(tmp, k + off, n * d * 4);
            if (s.smooth & QATTN_SMOOTH_K) {
                qattn_smooth_mean(tmp, n, (size_t)d, mean);
                qattn_smooth_sub(tmp, n, (size_t)d, mean, tmp);
                memcpy(kmean + ((size_t)h * nseq + b) * d, mean, (size_t)d * 4);
            }
            if (qattn_qtensor_init(&t, s.k.fmt, &s.k.group, tmp, n, (size_t)d, &err)) {
                CHECK(0, "qtensor k: %s", err.msg);
                continue;
            }
            for (size_t i = 0; i < n * d; i++)
                kc[off + i] = (int8_t)code8(s.k.fmt, t.val[i]);
            memcpy(ksc + ((size_t)h * nseq + b) * k_ntok, t.scale, qattn_group_ntok(&s.k.group, n) * 4);
            qattn_qtensor_free(&t);
            const float *vin = v + off;
            if (s.smooth & QATTN_SMOOTH_V) { /* V - mean, the mean added back after P.V by the kernel */
                qattn_smooth_mean(v + off, n, (size_t)d, mean);
                qattn_smooth_sub(v + off, n, (size_t)d, mean, tmp);
                memcpy(vmean + ((size_t)h * nseq + b) * d, mean, (size_t)d * 4);
                vin = tmp;
            }
            if (qattn_qtensor_init(&t, s.v.fmt, &s.v.group, vin, n, (size_t)d, &err)) {
                CHECK(0, "qtensor v: %s", err.msg);
                continue;
            }
            if (vrows && ves == 2) { /* fp16 rows [hkv, T, d] */
                for (size_t i = 0; i < n * d; i++)
                    ((uint16_t *)vt)[off + i] = qattn_num_fp16_encode(t.val[i]);
            } else if (vrows) { /* e4m3 rows */
                for (size_t i = 0; i < n * d; i++)
                    vt[off + i] = code8(s.v.fmt, t.val[i]);
            } else {
                uint8_t *dst = vt + ((size_t)h * nseq + b) * (size_t)d * (size_t)npad;
                for (size_t j = 0; j < n; j++)
                    for (int c = 0; c < d; c++)
                        dst[(size_t)c * npad + j] = code8(s.v.fmt, t.val[j * d + c]);
            }
            if (t.scale) /* unscaled fp16 V has none */
                memcpy(vsc + ((size_t)h * nseq + b) * v_nch, t.scale, v_nch * 4);
            qattn_qtensor_free(&t);
        }

    /* emulation and reference */
    float *oe = malloc((size_t)hq * T * d * 4), *lse_e = malloc((size_t)hq * T * 4);
    double *orf = malloc((size_t)hq * T * d * 8);
    int64_t seqlens[3];
    for (int b = 0; b < nseq; b++)
        seqlens[b] = tc->lens[b];
    qattn_mha a;
    memset(&a, 0, sizeof a);
    a.q = q;
    a.k = k;
    a.v = v;
    a.hq = (size_t)hq;
    a.hkv = (size_t)hkv;
    a.sq = a.sk = T;
    a.d = (size_t)d;
    a.seqlens = nseq > 1 ? seqlens : NULL;
    a.nseq = nseq > 1 ? (size_t)nseq : 0;
    rc = qattn_emu_mha(&s, &a, &pb.mask, 0.0, oe, lse_e, &err);
    CHECK(rc == 0, "emulation: %s", err.msg);
    rc = rc || qattn_ref_mha(&a, &pb.mask, 0.0, orf, NULL, &err);
    CHECK(rc == 0, "reference: %s", err.msg);

    /* device */
    dev_problem dp;
    memset(&dp, 0, sizeof dp);
    uint16_t *og = malloc((size_t)hq * T * d * 2);
    float *lse_g = malloc((size_t)hq * T * 4);
    /* int4: rows of d / 2 bytes (quant/'s packing; in place: byte i / 2 is written after codes i, i + 1 are read) */
    const int i4 = s.q.fmt == QATTN_FMT_INT4, row = i4 ? d / 2 : d;
    if (i4) {
        qattn_int4_pack(qc, (size_t)hq * T * d, (uint8_t *)qc);
        qattn_int4_pack(kc, (size_t)hkv * T * d, (uint8_t *)kc);
    }
    uint16_t *kin = NULL; /* the fp16 input K (smooth=q: dS) */
    void *dkin = NULL, *dqmean = NULL, *dkmean = NULL, *dvmean = NULL, *dds = NULL;
    if (s.smooth & QATTN_SMOOTH_V)
        rc = rc || qattn_kernels_dev_alloc(&dvmean, (size_t)hkv * nseq * d * 4, &err) ||
             qattn_kernels_dev_to(dvmean, vmean, (size_t)hkv * nseq * d * 4, &err);
    if (qblock) {
        kin = malloc((size_t)hkv * T * d * 2);
        for (size_t i = 0; i < (size_t)hkv * T * d; i++)
            kin[i] = qattn_num_fp16_encode(k[i]);
        rc = rc || qattn_kernels_dev_alloc(&dkmean, (size_t)hkv * nseq * d * 4, &err) ||
             qattn_kernels_dev_to(dkmean, kmean, (size_t)hkv * nseq * d * 4, &err) ||
             qattn_kernels_dev_alloc(&dkin, (size_t)hkv * T * d * 2, &err) ||
             qattn_kernels_dev_to(dkin, kin, (size_t)hkv * T * d * 2, &err) ||
             qattn_kernels_dev_alloc(&dqmean, (size_t)hq * nseq * nqb * d * 4, &err) ||
             qattn_kernels_dev_to(dqmean, qmean, (size_t)hq * nseq * nqb * d * 4, &err);
    }
    rc = rc || qattn_kernels_dev_alloc(&dp.q, (size_t)hq * T * d, &err) ||
         qattn_kernels_dev_alloc(&dp.k, (size_t)hkv * T * d, &err) ||
         qattn_kernels_dev_alloc(&dp.v, vbytes, &err) ||
         qattn_kernels_dev_alloc(&dp.o, (size_t)hq * T * d * 2, &err) ||
         qattn_kernels_dev_alloc((void **)&dp.qs, (size_t)hq * nseq * q_ntok * 4, &err) ||
         qattn_kernels_dev_alloc((void **)&dp.ks, (size_t)hkv * nseq * k_ntok * 4, &err) ||
         qattn_kernels_dev_alloc((void **)&dp.vs, (size_t)hkv * nseq * v_nch * 4, &err) ||
         qattn_kernels_dev_alloc((void **)&dp.lse, (size_t)hq * T * 4, &err) ||
         qattn_kernels_dev_alloc((void **)&dp.cu, sizeof cu, &err) ||
         qattn_kernels_dev_to(dp.q, qc, (size_t)hq * T * d, &err) ||
         qattn_kernels_dev_to(dp.k, kc, (size_t)hkv * T * d, &err) ||
         qattn_kernels_dev_to(dp.v, vt, vbytes, &err) ||
         qattn_kernels_dev_to(dp.qs, qsc, (size_t)hq * nseq * q_ntok * 4, &err) ||
         qattn_kernels_dev_to(dp.ks, ksc, (size_t)hkv * nseq * k_ntok * 4, &err) ||
         qattn_kernels_dev_to(dp.vs, vsc, (size_t)hkv * nseq * v_nch * 4, &err) ||
         qattn_kernels_dev_to(dp.cu, cu, sizeof cu, &err) ||
         qattn_kernels_dev_fill(dp.o, 0xff, (size_t)hq * T * d * 2, &err) ||
         qattn_kernels_dev_fill(dp.lse, 0xff, (size_t)hq * T * 4, &err);
    CHECK(rc == 0, "device buffers: %s", err.msg);
    if (rc == 0) {
        const int *dcu = tc->varlen ? dp.cu : NULL;
        qattn_kernels_quant_params qq, qk, qv;
        fake_qp(&qq, dp.q, dp.qs, &s.q, hq, nseq, maxlen, (int64_t)T, d, dcu, (int)q_ntok, 1, 0);
        fake_qp(&qk, dp.k, dp.ks, &s.k, hkv, nseq, maxlen, (int64_t)T, d, dcu, (int)k_ntok, 1, 0);
        fake_qp(&qv, dp.v, qattn_fmt_is_scaled(s.v.fmt) ? dp.vs : NULL, &s.v, hkv, nseq, maxlen, (int64_t)T, d, dcu, 1,
                (int)v_nch, !vrows);
        qq.row = qk.row = row;
        qq.mean = (float *)dqmean;
        qq.mblock = qblock;
        qq.nmean = (int)nqb;
        qk.mean = (float *)dkmean; /* NULL without smooth=q: the kernels read it for dS only */
        qv.mean = (float *)dvmean;
        qattn_kernels_tensor ot = {dp.o, tc->varlen ? 0 : (int64_t)maxlen * d, (int64_t)T * d, d};
        qattn_kernels_tensor kt = {dkin, tc->varlen ? 0 : (int64_t)maxlen * d, (int64_t)T * d, d};
        qattn_kernels_attn_params p;
        rc = qattn_kernels_attn_fill(&p, &s, &pb, &qq, &qk, &qv, NULL, &kt, NULL, &ot, dp.lse, (int64_t)T, dcu, dcu,
                                     &err);
        const size_t dsb = rc ? 0 : qattn_kernels_attn_ds_bytes(sig, &p); /* smooth=q's dS plane (int4 wgmma) */
        rc = rc || (dsb && qattn_kernels_dev_alloc(&dds, dsb, &err));
        p.ds = (float *)dds;
        rc = rc || sig->launch_attn(&p, NULL, &err) || qattn_kernels_dev_sync(&err) ||
             qattn_kernels_dev_from(og, dp.o, (size_t)hq * T * d * 2, &err) ||
             qattn_kernels_dev_from(lse_g, dp.lse, (size_t)hq * T * 4, &err);
        CHECK(rc == 0, "run %s: %s", tc->scheme, err.msg);
        if (rc == 0 && dds) { /* the dS plane against a double sum over the same fp16 K */
            float *plane = malloc(dsb);
            rc = qattn_kernels_dev_from(plane, dds, dsb, &err);
            CHECK(rc == 0, "reading the dS plane: %s", err.msg);
            double worst = 0.0;
            for (int h = 0; h < hq && rc == 0; h++)
                for (int b = 0; b < nseq; b++)
                    for (int l = 0; l < (tc->lens[b] + qblock - 1) / qblock; l++)
                        for (int j = 0; j < tc->lens[b]; j++) {
                            const int hk = h / (hq / hkv);
                            const float *m = qmean + (((size_t)h * nseq + b) * nqb + (size_t)l) * d;
                            const uint16_t *kr = kin + (size_t)hk * T * d + (size_t)(cu[b] + j) * d;
                            const float *km = kmean + ((size_t)hk * nseq + b) * d;
                            double ref = 0.0, mag = 0.0;
                            for (int c = 0; c < d; c++) {
                                const double kv = qattn_num_fp16_decode(kr[c]);
                                ref += (double)m[c] * (kv - km[c]);
                                mag += fabs(m[c]) * (fabs(kv) + fabs(km[c]));
                            }
                            const double got = plane[(((size_t)h * nseq + b) * nqb + (size_t)l) * (size_t)p.ds_ld + j];
                            const double e = fabs(got - ref * p.c2) / (mag * p.c2 + 1e-30);
                            worst = e > worst || e != e ? e : worst;
                        }
            CHECK(worst <= 1.0 / 65536, "%s: dS plane off by %.3g of sum |mean| (|K| + |kmean|) (bound 2^-16)",
                  tc->scheme, worst);
            free(plane);
        }
        /* int4 on wgmma, lengths of whole 16-row groups: the widened form too (a pass widens the codes
         * to 16 x their values, the kernel reads them as int8 codes by TMA): its codes, and its O and LSE
         * equal to the unpacking producer's bit for bit (the same sums in the same order) */
        qattn_kernels_attn_params pw = p;
        pw.wg_i4w = 1;
        const size_t wb = rc ? 0 : qattn_kernels_attn_i4w_bytes(sig, &pw);
        if (wb && !tc->varlen && maxlen % 16 == 0) {
            void *dw = NULL;
            uint8_t *wide = malloc(wb);
            uint16_t *og2 = malloc((size_t)hq * T * d * 2);
            float *lse2 = malloc((size_t)hq * T * 4);
            int rw = qattn_kernels_dev_alloc(&dw, wb, &err) || qattn_kernels_dev_fill(dw, 0, wb, &err) ||
                     qattn_kernels_dev_fill(dp.o, 0xff, (size_t)hq * T * d * 2, &err) ||
                     qattn_kernels_dev_fill(dp.lse, 0xff, (size_t)hq * T * 4, &err);
            pw.i4w = dw;
            rw = rw || sig->launch_attn(&pw, NULL, &err) || qattn_kernels_dev_sync(&err) ||
                 qattn_kernels_dev_from(og2, dp.o, (size_t)hq * T * d * 2, &err) ||
                 qattn_kernels_dev_from(lse2, dp.lse, (size_t)hq * T * 4, &err) ||
                 qattn_kernels_dev_from(wide, dw, wb, &err);
            CHECK(rw == 0, "run %s widened: %s", tc->scheme, err.msg);
            if (rw == 0) {
                const size_t nq = (size_t)hq * T * d, nk = (size_t)hkv * T * d;
                size_t bad = 0;
                for (size_t i = 0; i < nq + nk; i++) {
                    const uint8_t pk = i < nq ? ((const uint8_t *)qc)[i / 2] : ((const uint8_t *)kc)[(i - nq) / 2];
                    bad += wide[i] != (uint8_t)((pk >> (4 * (i & 1)) & 0xfu) << 4);
                }
                CHECK(bad == 0, "%s: %zu of %zu widened codes wrong", tc->scheme, bad, nq + nk);
                CHECK(!memcmp(og2, og, (size_t)hq * T * d * 2) && !memcmp(lse2, lse_g, (size_t)hq * T * 4),
                      "%s d=%d: the widened form's O / LSE differ from the unpacking producer's", tc->scheme, d);
                printf("%-14s d=%-3d widened int4 codes: O and LSE equal to the unpacked form's\n", tc->scheme, d);
            }
            qattn_kernels_dev_free(dw);
            free(wide), free(og2), free(lse2);
        }
    }
    if (rc == 0) {
        const size_t ne = (size_t)hq * T * d;
        double maxo = 0.0, maxe = 0.0, dot = 0.0, ng = 0.0, nem = 0.0, dge = 0.0, nr = 0.0, dre = 0.0, dlse = 0.0;
        size_t nbits = 0, nonfinite = 0;
        for (size_t i = 0; i < ne; i++) {
            const double x = s.out == QATTN_FMT_FP16 ? qattn_num_fp16_decode(og[i]) : qattn_num_bf16_decode(og[i]);
            const double e = oe[i], r = orf[i];
            if (!isfinite(x))
                nonfinite++;
            maxo = fabs(e) > maxo ? fabs(e) : maxo;
            maxe = fabs(x - e) > maxe || x != x ? fabs(x - e) : maxe;
            nbits += (float)x != (float)e;
            dot += x * e;
            ng += x * x;
            nem += e * e;
            dge += x * r;
            dre += e * r;
            nr += r * r;
        }
        for (size_t i = 0; i < (size_t)hq * T; i++) {
            const double df = isinf(lse_e[i]) && lse_g[i] == lse_e[i] ? 0.0 : fabs((double)lse_g[i] - lse_e[i]);
            dlse = df > dlse || df != df ? df : dlse;
        }
        const double cos_ge = dot / sqrt(ng * nem), cos_gr = dge / sqrt(ng * nr), cos_er = dre / sqrt(nem * nr);
        printf("%-14s d=%-3d h=%d/%d nseq=%d N=%-5d %-7s %-14s: cos(gpu,emu) %.7f  max|err|/max|O| %.2e  "
               "out differ %.3f%%  max|dLSE| %.1e  cos vs fp64: gpu %.6f emu %.6f\n",
               tc->scheme, d, hq, hkv, nseq, maxlen, tc->varlen ? "varlen" : "fixed", tc->mask, cos_ge, maxe / maxo,
               100.0 * (double)nbits / (double)ne, dlse, cos_gr, cos_er);
        CHECK(nonfinite == 0, "%zu non-finite outputs", nonfinite);
        CHECK(cos_ge >= QATTN_KERNELS_TOL_COS, "cos(gpu, emu) %.8f < %.5f", cos_ge, QATTN_KERNELS_TOL_COS);
        CHECK(maxe <= QATTN_KERNELS_TOL_ERR * maxo, "max |O_gpu - O_emu| %.3g > %.0e * max|O| (%.3g)", maxe,
              QATTN_KERNELS_TOL_ERR, maxo);
        CHECK(dlse <= QATTN_KERNELS_TOL_LSE, "max |LSE_gpu - LSE_emu| %.3g > %.0e", dlse, QATTN_KERNELS_TOL_LSE);
        CHECK(fabs(cos_gr - cos_er) <= 1e-4, "cos vs reference: gpu %.7f, emu %.7f", cos_gr, cos_er);
    }
    dev_problem_free(&dp);
    qattn_kernels_dev_free(dkin);
    qattn_kernels_dev_free(dqmean);
    qattn_kernels_dev_free(dds);
    qattn_kernels_dev_free(dkmean);
    qattn_kernels_dev_free(dvmean);
    free(q), free(k), free(v), free(qc), free(kc), free(vt), free(qsc), free(ksc), free(vsc), free(tmp), free(mean);
    free(oe), free(lse_e), free(orf), free(og), free(lse_g), free(qmean), free(kmean), free(vmean), free(kin);
}

/* one plan run: quantization (NaN check on) and attention; O and LSE to the host */
static int plan_run(const qattn_scheme *s, const qattn_kernels_problem *pb, const qattn_kernels_io *io, void *og,
                    size_t obytes, float *lse_g, size_t nlse, char *desc, size_t dlen, int *fused, qattn_err *err)
{
    qattn_kernels_plan pl;
    int rc = qattn_kernels_plan_init(&pl, s, pb, io, err);
    if (rc)
        return rc;
    qattn_kernels_plan_describe(&pl, desc, dlen);
    *fused = pl.fuse_q;
    if (pl.attn_sig->path != QATTN_KERNELS_PATH_MMA && pl.attn_sig->path != QATTN_KERNELS_PATH_WGMMA)
        rc = qattn_err_set(err, QATTN_ERR_ARG, "the plan chose %s", pl.attn_sig->name);
    rc = rc || qattn_kernels_dev_fill(io->o.data, 0xff, obytes, err) ||
         qattn_kernels_plan_quantize(&pl, NULL, 1, err) || qattn_kernels_plan_attend(&pl, NULL, err) ||
         qattn_kernels_dev_sync(err) || qattn_kernels_dev_from(og, io->o.data, obytes, err) ||
         qattn_kernels_dev_from(lse_g, io->lse, nlse * 4, err);
    qattn_kernels_plan_free(&pl);
    return rc;
}

/* the whole pipeline through a plan: fp16 / bf16 input, the quantization
 * kernels (V written transposed for the mma instance), the attention;
 * against the emulation with the same tolerances. Where the plan quantizes
 * Q inside the attention kernel (int8 Q on the wgmma path), the output
 * must equal the unfused plan's bit for bit (fuse_q 0, the default), and a NaN in
 * Q must still be reported by the quantization step. */
static void run_plan_case(const char *scheme, qattn_fmt in, int d, int hq, int hkv, int n, const char *mask)
{
    qattn_scheme s;
    qattn_err err;
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = 1;
    pb.hq = hq;
    pb.hkv = hkv;
    pb.d = d;
    pb.seqlen_q = pb.seqlen_k = n;
    pb.lse = 1;
    pb.in = in;
    if (qattn_scheme_parse(scheme, &s, &err) || qattn_mask_parse(mask, &pb.mask, &err)) {
        CHECK(0, "plan case setup: %s", err.msg);
        return;
    }
    qattn_kernels_problem pbf = pb; /* Q quantized by the attention kernel where it can */
    pbf.fuse_q = 1;
    const size_t nq = (size_t)hq * n * d, nk = (size_t)hkv * n * d, nl = (size_t)hq * n;
    const size_t ob = nq * (s.out == QATTN_FMT_FP32 ? 4 : 2);
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *oe = malloc(nq * 4);
    float *lse_e = malloc(nl * 4), *lse_g = malloc(nl * 4), *lse_u = malloc(nl * 4);
    uint16_t *q16 = malloc(nq * 2), *k16 = malloc(nk * 2), *v16 = malloc(nk * 2);
    unsigned char *og = malloc(ob), *ou = malloc(ob);
    make_input(q, nq, (size_t)d, 0.3);
    make_input(k, nk, (size_t)d, 1.5);
    make_input(v, nk, (size_t)d, 0.7);
    /* the emulation sees the input as rounded to its dtype */
#define ENC(x) (in == QATTN_FMT_BF16 ? qattn_num_bf16_encode(x) : qattn_num_fp16_encode(x))
#define DEC(h) (in == QATTN_FMT_BF16 ? qattn_num_bf16_decode(h) : qattn_num_fp16_decode(h))
    for (size_t i = 0; i < nq; i++)
        q16[i] = ENC(q[i]), q[i] = DEC(q16[i]);
    for (size_t i = 0; i < nk; i++) {
        k16[i] = ENC(k[i]), k[i] = DEC(k16[i]);
        v16[i] = ENC(v[i]), v[i] = DEC(v16[i]);
    }
    qattn_mha a;
    memset(&a, 0, sizeof a);
    a.q = q, a.k = k, a.v = v;
    a.hq = (size_t)hq, a.hkv = (size_t)hkv, a.sq = a.sk = (size_t)n, a.d = (size_t)d;
    int rc = qattn_emu_mha(&s, &a, &pb.mask, 0.0, oe, lse_e, &err);
    CHECK(rc == 0, "emulation: %s", err.msg);
    void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL, *dlse = NULL;
    rc = rc || qattn_kernels_dev_alloc(&dq, nq * 2, &err) || qattn_kernels_dev_alloc(&dk, nk * 2, &err) ||
         qattn_kernels_dev_alloc(&dv, nk * 2, &err) || qattn_kernels_dev_alloc(&dout, ob, &err) ||
         qattn_kernels_dev_alloc(&dlse, nl * 4, &err) || qattn_kernels_dev_to(dq, q16, nq * 2, &err) ||
         qattn_kernels_dev_to(dk, k16, nk * 2, &err) || qattn_kernels_dev_to(dv, v16, nk * 2, &err);
    qattn_kernels_io io;
    memset(&io, 0, sizeof io);
    io.q = (qattn_kernels_tensor){dq, (int64_t)n * d, (int64_t)n * d, d};
    io.k = (qattn_kernels_tensor){dk, (int64_t)n * d, (int64_t)n * d, d};
    io.v = (qattn_kernels_tensor){dv, (int64_t)n * d, (int64_t)n * d, d};
    io.o = (qattn_kernels_tensor){dout, (int64_t)n * d, (int64_t)n * d, d};
    io.lse = (float *)dlse;
    char desc[512] = "", udesc[512] = "";
    int fused = 0, ufused = 0;
    rc = rc || plan_run(&s, &pbf, &io, og, ob, lse_g, nl, desc, sizeof desc, &fused, &err);
    CHECK(rc == 0, "plan run (%s, %s): %s", scheme, desc, err.msg);
    if (rc == 0) {
        double maxo = 0.0, maxe = 0.0, dot = 0.0, ng = 0.0, ne = 0.0, dlse_max = 0.0;
        for (size_t i = 0; i < nq; i++) {
            const uint16_t h = ((const uint16_t *)og)[i];
            const double x = s.out == QATTN_FMT_FP32   ? ((const float *)og)[i]
                             : s.out == QATTN_FMT_BF16 ? qattn_num_bf16_decode(h)
                                                       : qattn_num_fp16_decode(h),
                         e = oe[i];
            maxo = fabs(e) > maxo ? fabs(e) : maxo;
            maxe = fabs(x - e) > maxe || x != x ? fabs(x - e) : maxe;
            dot += x * e, ng += x * x, ne += e * e;
        }
        for (size_t i = 0; i < nl; i++) {
            const double df = fabs((double)lse_g[i] - lse_e[i]);
            dlse_max = df > dlse_max || df != df ? df : dlse_max;
        }
        const double c = dot / sqrt(ng * ne);
        printf("plan %s in=%s d=%d h=%d/%d N=%d %s [%s]: cos(gpu,emu) %.7f  max|err|/max|O| %.2e  max|dLSE| %.1e\n",
               scheme, qattn_fmt_name(in), d, hq, hkv, n, mask, desc, c, maxe / maxo, dlse_max);
        CHECK(c >= QATTN_KERNELS_TOL_COS, "plan: cos(gpu, emu) %.8f < %.5f", c, QATTN_KERNELS_TOL_COS);
        CHECK(maxe <= QATTN_KERNELS_TOL_ERR * maxo, "plan: max |O_gpu - O_emu| %.3g > %.0e * max|O| (%.3g)", maxe,
              QATTN_KERNELS_TOL_ERR, maxo);
        CHECK(dlse_max <= QATTN_KERNELS_TOL_LSE, "plan: max |LSE_gpu - LSE_emu| %.3g > %.0e", dlse_max,
              QATTN_KERNELS_TOL_LSE);
    }
    if (rc == 0 && strstr(desc, "; blocks of ") && qattn_wg_solo_can(d, s.kblock, s.q.fmt, s.p, s.acc)) {
        /* a wgmma instance with both block forms (the plan names the form of every wgmma plan): one
         * warpgroup and two or three consumer warpgroups give identical bits (unfused, each asked for) */
        qattn_kernels_problem p1 = pb, p3 = pb;
        const int nc = qattn_wg_nc(s.q.fmt);
        p1.wg_form = QATTN_WG_FORM_SOLO, p3.wg_form = nc;
        char d1[512] = "", d3[512] = "";
        int f1 = 0, f3 = 0, frc = 0;
        unsigned char *o1 = malloc(ob), *o3 = malloc(ob);
        float *l1 = malloc(nl * 4), *l3 = malloc(nl * 4);
        frc = !o1 || !o3 || !l1 || !l3 || plan_run(&s, &p1, &io, o1, ob, l1, nl, d1, sizeof d1, &f1, &err) ||
              plan_run(&s, &p3, &io, o3, ob, l3, nl, d3, sizeof d3, &f3, &err);
        CHECK(frc == 0, "block forms (%s): %s", scheme, err.msg);
        size_t diff = 0;
        for (size_t i = 0; frc == 0 && i < ob; i++)
            diff += o1[i] != o3[i];
        for (size_t i = 0; frc == 0 && i < nl; i++)
            diff += memcmp(&l1[i], &l3[i], 4) != 0;
        printf("plan %s in=%s d=%d %s: [%s] against [%s]: %zu bytes differ\n", scheme, qattn_fmt_name(in), d, mask, d1,
               d3, diff);
        CHECK(frc != 0 || (strstr(d1, "one warpgroup") && strstr(d3, nc == QATTN_WG_FORM_NC3 ? "three consumer" : "two consumer")),
              "block forms not as asked: [%s], [%s]", d1, d3);
        CHECK(frc != 0 || diff == 0, "block forms: %zu output bytes differ", diff);
        free(o1), free(o3), free(l1), free(l3);
    }
    if (rc == 0 && fused) {
        /* the same plan with Q quantized by its own kernel: identical bits */
        rc = plan_run(&s, &pb, &io, ou, ob, lse_u, nl, udesc, sizeof udesc, &ufused, &err);
        CHECK(rc == 0 && !ufused, "unfused plan run (%s): %s", udesc, rc ? err.msg : "still fused");
        size_t diff = 0;
        for (size_t i = 0; rc == 0 && i < ob; i++)
            diff += og[i] != ou[i];
        for (size_t i = 0; rc == 0 && i < nl; i++)
            diff += memcmp(&lse_g[i], &lse_u[i], 4) != 0;
        printf("plan %s in=%s d=%d: fused Q against [%s]: %zu bytes differ\n", scheme, qattn_fmt_name(in), d, udesc,
               diff);
        CHECK(rc != 0 || diff == 0, "fused Q: %zu output bytes differ from the unfused plan", diff);
        /* a NaN in Q: reported by the quantization step although no Q kernel runs */
        const uint16_t nan16 = in == QATTN_FMT_BF16 ? 0x7fc0u : 0x7e00u;
        qattn_kernels_plan pl;
        if (qattn_kernels_dev_to((uint16_t *)dq + nq / 2 + 3, &nan16, 2, &err) == 0 &&
            qattn_kernels_plan_init(&pl, &s, &pbf, &io, &err) == 0) {
            const int qrc = qattn_kernels_plan_quantize(&pl, NULL, 1, &err);
            CHECK(qrc == QATTN_ERR_NAN && strstr(err.msg, "the q input"), "NaN in a fused Q: rc %d (%s)", qrc,
                  qrc ? err.msg : "no error");
            qattn_kernels_plan_free(&pl);
        } else {
            CHECK(0, "NaN case setup: %s", err.msg);
        }
    }
#undef ENC
#undef DEC
    qattn_kernels_dev_free(dq), qattn_kernels_dev_free(dk), qattn_kernels_dev_free(dv);
    qattn_kernels_dev_free(dout), qattn_kernels_dev_free(dlse);
    free(q), free(k), free(v), free(oe), free(lse_e), free(lse_g), free(lse_u), free(q16), free(k16), free(v16);
    free(og), free(ou);
}

/* 1 when a wgmma instance (key blocks of kb, head dim d; 0: any) is built
 * and the dispatcher gives this GPU wgmma (sm_90, no QATTN_MMA_SYNC=1) */
static int wgmma_runs_here(int kb, int d)
{
    int built = 0;
    for (size_t i = 0; i < qattn_kernels_count(); i++) {
        const qattn_kernels_sig *g = qattn_kernels_get(i);
        built |= g->path == QATTN_KERNELS_PATH_WGMMA && (!kb || g->kblock_max == kb) && (!d || g->head_dim == d);
    }
    const char *sync = getenv("QATTN_MMA_SYNC"); /* the dispatcher's override drops wgmma */
    return built && qattn_kernels_dev_cc() == 90 && !(sync && sync[0] == '1');
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--help")) {
        printf("usage: test_kernels_mma [--quick]\n");
        return 0;
    }
    const int quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc > 1 && !quick) {
        fprintf(stderr, "test_kernels_mma: unknown option '%s' (--quick, --help)\n", argv[1]);
        return 2;
    }
    int ndev = 0;
    qattn_err err;
    if (qattn_kernels_dev_count(&ndev, &err) || ndev == 0) {
        fprintf(stderr, "test_kernels_mma: no GPU (%s)\n", ndev ? err.msg : "none found");
        return 1;
    }
    const tcase cases[] = {
        {"sage2-8b-sm90", 128, 4, 1, 1, {128}, 0, "none"},
        {"sage2-8b-sm90", 128, 4, 1, 2, {1000, 1000}, 0, "causal"},
        {"sage2-8b-sm90", 128, 2, 2, 1, {4096}, 0, "none"},
        {"sage2-8b-sm90", 128, 4, 1, 1, {4096}, 0, "causal"},
        {"sage2-8b-sm90", 64, 4, 1, 1, {1000}, 0, "none"},
        {"sage2-8b-sm90", 64, 4, 1, 1, {4096}, 0, "causal"},
        {"sage2-8b-sm90", 64, 2, 2, 1, {128}, 0, "causal"},
        {"sage2-8b-sm90", 128, 4, 2, 3, {1000, 77, 300}, 1, "causal"},
        {"sage2-8b-sm90", 128, 2, 1, 1, {1000}, 0, "window:300,50"},
        /* e4m3 Q.K, tensor scales, one fp22 level (wgmma only) */
        {"fa3-fp8", 128, 4, 1, 1, {1000}, 0, "causal"},
        {"fa3-fp8", 64, 4, 2, 3, {1000, 77, 300}, 1, "none"},
        /* K groups of the wgmma tile other than thread:KB/8/2: CK's thread:64/16/4, block:256, tensor */
        {"q=int8@thread:32/8/1 k=int8@thread:64/16/4 p=e4m3@static v=e4m3@channel smooth=k acc=fp22+fp32:64 "
         "kblock=64 out=bf16",
         128, 2, 1, 1, {700}, 0, "causal"},
        {"q=int8@token k=int8@block:256 p=e4m3@static v=e4m3@channel smooth=k acc=fp22+fp32:128 kblock=128 out=bf16",
         64, 2, 1, 1, {900}, 0, "none"},
        {"q=e4m3@token k=e4m3@tensor p=e4m3@static v=e4m3@channel smooth=k acc=fp22 kblock=128 out=bf16", 128, 2, 2, 1,
         {600}, 0, "causal"},
        /* int8 P.V (s8 wgmma, exact per block, fp32 O) */
        {"sage1-vb", 128, 4, 1, 1, {1000}, 0, "causal"},
        {"sage1-vb", 64, 2, 2, 3, {1000, 77, 300}, 1, "none"},
        /* int4 Q.K unpacked to int8 by the producer (wgmma only) */
        {"sage2-4b smooth=k", 128, 4, 1, 1, {1000}, 0, "causal"},
        {"sage2-4b smooth=k", 64, 2, 2, 3, {1000, 77, 300}, 1, "none"},
        /* ... with smooth=q: dS from the plane the launch writes first (wgmma_dsq.h), checked itself */
        {"sage2-4b", 128, 4, 2, 3, {1000, 77, 300}, 1, "causal"},
        {"sage2-4b", 64, 4, 1, 1, {1000}, 0, "none"},
        {"sage2-4b qblock=48", 128, 2, 1, 1, {700}, 0, "window:300,50"},
        /* ... lengths of whole 16-row groups: the widened form beside the unpacking one */
        {"sage2-4b", 128, 4, 2, 2, {1024, 1024}, 0, "causal"},
        {"sage2-4b", 64, 4, 1, 1, {768}, 0, "none"},
        {"sage2-4b smooth=k", 128, 2, 2, 1, {512}, 0, "none"},
        {"sage2-4b qblock=48", 128, 2, 1, 1, {768}, 0, "window:300,50"},
        /* fp16 P.V into an f16 accumulator after int8 Q.K (V in fp16 rows, sigma order) */
        {"sage1-b", 128, 4, 1, 1, {1000}, 0, "causal"},
        {"sage1-b", 64, 2, 2, 3, {1000, 77, 300}, 1, "none"},
        {"sage1-b smooth=k+v", 128, 2, 1, 1, {700}, 0, "window:300,50"},
        /* e4m3 P.V with acc=fp32 (the CK presets): P and V widened to fp16, f16 MMA into the fp32 O */
        {"ck-i8fp8bf16", 128, 4, 1, 1, {1000}, 0, "causal"},
        {"ck-i8fp8bf16", 64, 2, 2, 3, {1000, 77, 300}, 1, "none"},
        {"ck-i8fp8bf16 smooth=k+v", 128, 4, 2, 3, {1000, 77, 300}, 1, "window:300,50"},
        {"ck-i8fp8bf16", 64, 2, 1, 1, {4096}, 0, "causal"},
        /* ... after int4 Q.K (K unpacked, smooth=q's dS, V widened by one producer) */
        {"ck-i4fp8bf16", 128, 4, 2, 3, {1000, 77, 300}, 1, "causal"},
        {"ck-i4fp8bf16", 64, 2, 1, 1, {1000}, 0, "none"},
        /* ... after e4m3 Q.K with acc=fp32 (Q and K widened to fp16 too: f16 Q.K) */
        {"ck-fp8bf16", 128, 4, 2, 3, {1000, 77, 300}, 1, "causal"},
        {"ck-fp8bf16", 64, 2, 1, 1, {1000}, 0, "none"},
        {"ck-fp8bf16 smooth=k+v", 128, 2, 1, 1, {700}, 0, "window:300,50"},
    };
    /* sm_90 and a wgmma build: every case; elsewhere the mma.sync instances' scheme only */
    const int wg_any = wgmma_runs_here(0, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!wg_any && strcmp(cases[i].scheme, "sage2-8b-sm90")) {
            printf("skipped (no wgmma instance on this GPU): %s d=%d\n", cases[i].scheme, cases[i].d);
            continue;
        }
        /* --quick: small cases, for compute-sanitizer */
        if (!quick || i == 0 || i == 6 || i == 7 || i == 10 || i == 11 || i == 15 || i == 18 || i == 19 || i == 22 || i == 28 || i == 32 || i == 34 || i == 35)
            run_case(&cases[i]);
    }
    if (!quick) {
        run_plan_case("sage2-8b-sm90", QATTN_FMT_FP16, 128, 4, 1, 1000, "causal");
        run_plan_case("sage2-8b-sm90", QATTN_FMT_FP16, 64, 2, 2, 700, "none");
    }
    /* Q quantized inside the wgmma kernel (each int8 Q group pattern of the presets: thread:16/8/1,
     * thread:32/8/1, thread:64/16/1, block:128; fp16 and bf16 input; tails) */
    if (wg_any) {
        run_plan_case("sage2-8b-sm90", QATTN_FMT_BF16, 128, 4, 2, 1000, "causal");
        run_plan_case("sage2-8b", QATTN_FMT_FP16, 128, 2, 1, 777, "none");
        run_plan_case("ck-i8fp8bf16", QATTN_FMT_FP16, 64, 2, 1, 500, "window:300,50");
        if (!quick)
            run_plan_case("sage1-b", QATTN_FMT_BF16, 128, 2, 2, 1100, "causal");
        run_plan_case("sage1-vb", QATTN_FMT_FP16, 64, 4, 1, 300, "none");
        run_plan_case("sage2-8b-sm90 q=int8@token", QATTN_FMT_FP16, 128, 2, 1, 260, "causal");
        /* e4m3 Q.K's two block forms (the int8 ones: the cases above) */
        run_plan_case("fa3-fp8", QATTN_FMT_FP16, 128, 2, 1, 900, "causal");
        run_plan_case("fa3-fp8", QATTN_FMT_BF16, 64, 4, 2, 333, "window:100,20");
        /* lengths of whole 16-row groups: K and V^T by TMA in the one-warpgroup form */
        run_plan_case("sage2-8b-sm90", QATTN_FMT_FP16, 128, 4, 2, 1024, "causal");
        run_plan_case("sage2-8b", QATTN_FMT_FP16, 128, 2, 1, 768, "none");
        run_plan_case("fa3-fp8", QATTN_FMT_FP16, 64, 2, 1, 512, "window:200,0");
        run_plan_case("sage1-vb", QATTN_FMT_BF16, 128, 2, 2, 512, "causal");
        /* fp16 P.V into the f16 O and the baselines in both forms (cp.async loads, V rows) */
        run_plan_case("sage1-b", QATTN_FMT_FP16, 64, 4, 2, 650, "causal");
        run_plan_case("sage1-b", QATTN_FMT_BF16, 128, 2, 1, 700, "window:150,30");
        run_plan_case("sage1-b", QATTN_FMT_FP16, 128, 4, 1, 512, "causal");
        run_plan_case("bf16", QATTN_FMT_BF16, 64, 4, 2, 1000, "causal");
        run_plan_case("fp16", QATTN_FMT_FP16, 64, 2, 1, 333, "none");
        run_plan_case("fp16", QATTN_FMT_FP16, 64, 2, 2, 512, "window:200,0");
    }
    /* sage2-8b (kblock=64, K thread:64/8/2, fp22+fp32:64) is not the mma.sync
     * instances' scheme: the wgmma kb64 instance runs it where one can (sm_90
     * and a build for sm_90a), else the portable one; with kblock=32 only the
     * portable one */
    {
        qattn_kernels_problem pb;
        memset(&pb, 0, sizeof pb);
        pb.nseq = pb.hq = pb.hkv = 1;
        pb.d = 128;
        pb.seqlen_q = pb.seqlen_k = 256;
        pb.in = QATTN_FMT_FP16;
        const int wgmma = wgmma_runs_here(64, 128);
        const struct {
            const char *spec;
            int path;
        } fb[] = {
            {"sage2-8b", wgmma ? QATTN_KERNELS_PATH_WGMMA : QATTN_KERNELS_PATH_PORTABLE},
            {"q=int8@thread:32/8/1 k=int8@thread:32/8/2 p=e4m3@static v=e4m3@channel smooth=k acc=fp22+fp32:32 "
             "kblock=32 out=bf16",
             QATTN_KERNELS_PATH_PORTABLE},
        };
        for (size_t i = 0; i < sizeof fb / sizeof fb[0]; i++) {
            qattn_scheme s;
            const qattn_kernels_sig *sig = NULL;
            int rc = qattn_scheme_parse(fb[i].spec, &s, &err) || qattn_kernels_find(&s, &pb, &sig, NULL, &err);
            CHECK(rc == 0 && (int)sig->path == fb[i].path, "%s: path %s, expected %s", fb[i].spec,
                  rc == 0 ? qattn_kernels_path_name(sig->path) : "none", qattn_kernels_path_name(fb[i].path));
        }
    }
    return check_done();
}
