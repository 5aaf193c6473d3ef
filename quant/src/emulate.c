/* Emulation of a quantized attention kernel, tile by tile (docs/DESIGN.md
 * "Emulation"):
 *
 *   1. smoothing: K minus its channel mean; Q minus the mean of its block
 *      (the product of that mean with the smoothed K, dS, is added back to S);
 *      V minus its channel mean (added back to O);
 *   2. Q, K, V quantized by their scale groups;
 *   3. S = dot products of the stored values, computed exactly (integers in
 *      an sgemm, exact while d <= 1024; float formats in a dgemm, exact for
 *      fp8) and rounded once to fp32, times sq[i] * sk[j] when the groups
 *      let the scales factor out of the dot product; e4m3 Q.K with acc=fp22
 *      (the fp8 tensor core) summed as that tensor core sums, 32 channels
 *      a step (qattn_num_fp8_kstep);
 *   4. online softmax in base 2 over blocks of `kblock` keys aligned at key 0,
 *      P = exp2(S - m) quantized per p=, row sum l from the unquantized P;
 *   5. O accumulated per acc= (fp32; fp22 on e4m3 P and V codes as the fp8
 *      tensor core sums, 32 keys a step, qattn_num_fp8_ksteps, else cut after
 *      every key; fp16 as the f16 tensor core sums, 16 keys a step,
 *      qattn_num_f16_kstep; two-level with an fp32 buffer flushed every N
 *      keys), rescaled by
 *      exp2(m_old - m_new) at each block (fp16: qattn_num_rescale16);
 *   6. O / l, times 1/qmax(p) for a static P scale, times V's per-channel
 *      scale, plus V's mean, rounded to out=.
 *
 * Not bit-exact against a GPU in exp2 (ex2.approx there, exp2_soft here) and in
 * the order the tensor cores sum products; everything else rounds where the
 * kernel rounds. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "emu_pv.h"
#include "qattn/attn.h"
#include "qattn/sparse.h"
#include "qattn/numerics.h"
#include "segments.h"

#ifndef M_LOG2E
#define M_LOG2E 1.4426950408889634074
#endif
#ifndef M_LN2
#define M_LN2 0.69314718055994530942
#endif

#define EMU_TILE 64

/* 2^x for the softmax, branch-free so the loop vectorizes, and independent
 * of the C library's exp2f: x = n + f with f in [-1/2, 1/2], 2^f by its
 * degree-7 Taylor polynomial in f ln 2 (truncation error 5e-9 relative,
 * below half an fp32 ulp; Horner adds a few ulp of rounding), and 2^n built
 * in the exponent bits. Results below 2^-126 flush to 0, as the GPU's
 * ex2.approx.ftz does; -inf gives 0. */
static inline float exp2_soft(float x)
{
    x = x < -127.0f ? -127.0f : x; /* also maps -inf */
    x = x > 127.0f ? 127.0f : x;
    float n = (x + 12582912.0f) - 12582912.0f; /* nearest integer (1.5 * 2^23) */
    float f = (x - n) * 0.693147180559945309f;
    float p = 1.0f / 5040.0f;
    p = p * f + 1.0f / 720.0f;
    p = p * f + 1.0f / 120.0f;
    p = p * f + 1.0f / 24.0f;
    p = p * f + 1.0f / 6.0f;
    p = p * f + 0.5f;
    p = p * f + 1.0f;
    p = p * f + 1.0f;
    int32_t e = (int32_t)n + 127;
    uint32_t bits = (uint32_t)(e > 0 ? e : 0) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return p * scale;
}

float qattn_emu_exp2(float x) { return exp2_soft(x); }


static int group_splits_channels(const qattn_operand *op, size_t d)
{
    return qattn_fmt_is_scaled(op->fmt) && qattn_group_nch(&op->group, d) > 1;
}

typedef struct emu_seg {
    size_t sq, sk, d;
    qattn_qtensor qt, kt, vt;
    int factored;      /* S = dot(values) * sq * sk */
    int int_qk;        /* both Q and K integer: sgemm is exact */
    int qk_fp8tc;      /* e4m3 Q and K on the fp22 tensor core: S by its k-step sum (qattn_num_fp8_kstep) */
    int qk_groups;     /* qk=fp22 with channel groups or rope: per group k-steps from 0, times sq sk, in order */
    size_t qk_ch;      /* channels a group (qk_groups) */
    float *qrope, *krope; /* [sq, rope], [sk, rope] the rope channels in bf16 (qk_groups) */
    double *qd, *kd;   /* [sq, d], [sk, d] double copies for the dgemm path */
    float *qsc;        /* [sq] per-row Q scale (factored path) */
    float *ksc;        /* [sk] per-key K scale (factored path) */
    float *ds;         /* [nqb, sk] Q-smoothing correction, or NULL */
    size_t qblock;
    float *vmean;      /* [d] V mean, or NULL */
    float *vval;       /* [sk, d] values entering P.V (codes or dequantized) */
    float *vsc;        /* [d] per-channel V scale factored out, or NULL */
    int int_pv;        /* P and V both integer: exact block partial sums */
    int pv_fp8tc;      /* P and V e4m3 codes (V scale factored out): acc=fp22 in the fp8 tensor core's k-steps */
} emu_seg;

static void emu_seg_free(emu_seg *e)
{
    qattn_qtensor_free(&e->qt);
    qattn_qtensor_free(&e->kt);
    qattn_qtensor_free(&e->vt);
    free(e->qd);
    free(e->kd);
    free(e->qsc);
    free(e->ksc);
    free(e->qrope);
    free(e->krope);
    free(e->ds);
    free(e->vmean);
    free(e->vval);
    free(e->vsc);
}

/* the last d - dn channels of n rows of d, rounded to bf16: [n, d - dn], or NULL */
static float *rope_bf16(const float *x, size_t n, size_t d, size_t dn)
{
    float *r = malloc(n * (d - dn) * sizeof *r);
    if (r)
        for (size_t i = 0; i < n; i++)
            for (size_t c = dn; c < d; c++)
                r[i * (d - dn) + c - dn] = qattn_fmt_round(QATTN_FMT_BF16, x[i * d + c]);
    return r;
}

static int emu_prepare(const qattn_scheme *s, const float *q, const float *k, const float *v, size_t sq, size_t sk,
                       size_t d, emu_seg *e, qattn_err *err)
{
    memset(e, 0, sizeof *e);
    e->sq = sq;
    e->sk = sk;
    e->d = d;
    int rc = QATTN_OK;
    float *qs = malloc(sq * d * sizeof *qs), *ks = malloc(sk * d * sizeof *ks), *vs = malloc(sk * d * sizeof *vs);
    float *mean = NULL;
    if (!qs || !ks || !vs) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory preparing a %zu x %zu head", sq, d);
        goto done;
    }
    memcpy(qs, q, sq * d * sizeof *qs);
    memcpy(ks, k, sk * d * sizeof *ks);
    memcpy(vs, v, sk * d * sizeof *vs);
    if (s->smooth & QATTN_SMOOTH_K) {
        mean = malloc(d * sizeof *mean);
        if (!mean)
            goto nomem;
        qattn_smooth_mean(ks, sk, d, mean);
        qattn_smooth_sub(ks, sk, d, mean, ks);
        free(mean);
        mean = NULL;
    }
    if (s->smooth & QATTN_SMOOTH_V) {
        e->vmean = malloc(d * sizeof *e->vmean);
        if (!e->vmean)
            goto nomem;
        qattn_smooth_mean(vs, sk, d, e->vmean);
        qattn_smooth_sub(vs, sk, d, e->vmean, vs);
    }
    if (s->smooth & QATTN_SMOOTH_Q) {
        e->qblock = (size_t)qattn_scheme_qblock(s);
        size_t nqb = (sq + e->qblock - 1) / e->qblock;
        mean = malloc(nqb * d * sizeof *mean);
        double *md = malloc(nqb * d * sizeof *md), *kd = malloc(sk * d * sizeof *kd),
               *dsd = malloc(nqb * sk * sizeof *dsd);
        e->ds = malloc(nqb * sk * sizeof *e->ds);
        if (!mean || !md || !kd || !dsd || !e->ds) {
            free(md);
            free(kd);
            free(dsd);
            goto nomem;
        }
        qattn_smooth_blocks(qs, sq, d, e->qblock, mean, qs);
        for (size_t i = 0; i < nqb * d; i++)
            md[i] = mean[i];
        for (size_t i = 0; i < sk * d; i++)
            kd[i] = ks[i];
        /* dS = mean(Q block) . K_smoothed, in high precision, kept in fp32 */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nqb, (int)sk, (int)d, 1.0, md, (int)d, kd, (int)d,
                    0.0, dsd, (int)sk);
        for (size_t i = 0; i < nqb * sk; i++)
            e->ds[i] = (float)dsd[i];
        free(md);
        free(kd);
        free(dsd);
        free(mean);
        mean = NULL;
    }
    /* rope: the last channels stay bf16 (qattn_scheme.rope); the formats and groups cover the
     * first dn channels, their own tensors */
    const size_t rope = s->rope > 0 ? (size_t)s->rope : 0, dn = d - rope;
    if (rope) {
        if (rope >= d) {
            rc = qattn_err_set(err, QATTN_ERR_ARG, "rope=%d needs a head dim above it (d = %zu)", s->rope, d);
            goto done;
        }
        float *xn[3] = {NULL, NULL, NULL};
        const float *src[3] = {qs, ks, vs};
        const size_t rows[3] = {sq, sk, sk};
        for (int x = 0; x < 3; x++) {
            xn[x] = malloc(rows[x] * dn * sizeof *xn[x]);
            if (xn[x])
                for (size_t i = 0; i < rows[x]; i++)
                    memcpy(xn[x] + i * dn, src[x] + i * d, dn * sizeof *xn[x]);
        }
        if (!xn[0] || !xn[1] || !xn[2])
            rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory preparing a %zu x %zu head", sq, d);
        else if (!(rc = qattn_qtensor_init(&e->qt, s->q.fmt, &s->q.group, xn[0], sq, dn, err)) &&
                 !(rc = qattn_qtensor_init(&e->kt, s->k.fmt, &s->k.group, xn[1], sk, dn, err)))
            rc = qattn_qtensor_init(&e->vt, s->v.fmt, &s->v.group, xn[2], sk, dn, err);
        for (int x = 0; x < 3; x++)
            free(xn[x]);
        if (rc)
            goto done;
    } else if ((rc = qattn_qtensor_init(&e->qt, s->q.fmt, &s->q.group, qs, sq, d, err)) ||
               (rc = qattn_qtensor_init(&e->kt, s->k.fmt, &s->k.group, ks, sk, d, err)) ||
               (rc = qattn_qtensor_init(&e->vt, s->v.fmt, &s->v.group, vs, sk, d, err))) {
        goto done;
    }

    /* ---- S path (rope: dequantized values and the bf16 part, in double) ---- */
    e->factored = !rope && !group_splits_channels(&s->q, d) && !group_splits_channels(&s->k, d);
    e->int_qk = e->factored && qattn_fmt_is_int(s->q.fmt) && qattn_fmt_is_int(s->k.fmt);
    e->qk_fp8tc = e->factored && (s->acc == QATTN_ACC_FP22 || s->qk_fp22) && s->q.fmt == QATTN_FMT_E4M3 &&
                  s->k.fmt == QATTN_FMT_E4M3;
    if (s->qk_fp22 && (s->q.fmt != QATTN_FMT_E4M3 || s->k.fmt != QATTN_FMT_E4M3)) {
        rc = qattn_err_set(err, QATTN_ERR_ARG, "qk=fp22 is the fp8 tensor core's Q.K: it needs e4m3 Q and K");
        goto done;
    }
    if (s->qk_fp22 && !e->factored) {
        if (s->q.group.ch != s->k.group.ch) {
            rc = qattn_err_set(err, QATTN_ERR_ARG, "qk=fp22: Q's and K's channel groups must be equal (ch:%d, ch:%d)",
                               s->q.group.ch, s->k.group.ch);
            goto done;
        }
        e->qk_groups = 1;
        e->qk_ch = s->q.group.ch > 0 ? (size_t)s->q.group.ch : dn;
        if (rope && (!(e->qrope = rope_bf16(qs, sq, d, dn)) || !(e->krope = rope_bf16(ks, sk, d, dn))))
            goto nomem;
    }
    if (e->factored) {
        e->qsc = malloc(sq * sizeof *e->qsc);
        e->ksc = malloc(sk * sizeof *e->ksc);
        if (!e->qsc || !e->ksc)
            goto nomem;
        for (size_t i = 0; i < sq; i++)
            e->qsc[i] = e->qt.scale ? e->qt.scale[qattn_group_tok_index(&e->qt.group, i)] : 1.0f;
        for (size_t j = 0; j < sk; j++)
            e->ksc[j] = e->kt.scale ? e->kt.scale[qattn_group_tok_index(&e->kt.group, j)] : 1.0f;
    }
    if (!e->int_qk && !e->qk_fp8tc && !e->qk_groups) { /* the dgemm path's copies */
        e->qd = malloc(sq * d * sizeof *e->qd);
        e->kd = malloc(sk * d * sizeof *e->kd);
        if (!e->qd || !e->kd)
            goto nomem;
        for (size_t i = 0; i < sq; i++)
            for (size_t c = 0; c < d; c++)
                e->qd[i * d + c] = e->factored ? e->qt.val[i * d + c]
                                   : c < dn    ? qattn_qtensor_at(&e->qt, i, c)
                                               : qattn_fmt_round(QATTN_FMT_BF16, qs[i * d + c]);
        for (size_t j = 0; j < sk; j++)
            for (size_t c = 0; c < d; c++)
                e->kd[j * d + c] = e->factored ? e->kt.val[j * d + c]
                                   : c < dn    ? qattn_qtensor_at(&e->kt, j, c)
                                               : qattn_fmt_round(QATTN_FMT_BF16, ks[j * d + c]);
    }

    /* ---- V as it enters P.V ---- */
    e->vval = malloc(sk * d * sizeof *e->vval);
    if (!e->vval)
        goto nomem;
    if (!rope && qattn_fmt_is_scaled(s->v.fmt) && qattn_group_token_uniform(&s->v.group)) {
        /* one scale per channel group over all keys: it factors out of the
         * sum over keys and is applied once to O, as the kernel does */
        memcpy(e->vval, e->vt.val, sk * d * sizeof *e->vval);
        e->vsc = malloc(d * sizeof *e->vsc);
        if (!e->vsc)
            goto nomem;
        for (size_t c = 0; c < d; c++)
            e->vsc[c] = e->vt.scale[qattn_group_ch_index(&e->vt.group, c)];
    } else {
        for (size_t j = 0; j < sk; j++)
            for (size_t c = 0; c < d; c++)
                e->vval[j * d + c] =
                    c < dn ? qattn_qtensor_at(&e->vt, j, c) : qattn_fmt_round(QATTN_FMT_BF16, vs[j * d + c]);
    }
    e->int_pv = e->vsc && qattn_fmt_is_int(s->v.fmt) && qattn_fmt_is_int(s->p) && s->p_static;
    e->pv_fp8tc = e->vsc && s->v.fmt == QATTN_FMT_E4M3 && s->p == QATTN_FMT_E4M3;
    goto done;
nomem:
    rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory preparing a %zu x %zu head", sq, d);
done:
    free(qs);
    free(ks);
    free(vs);
    free(mean);
    if (rc)
        emu_seg_free(e);
    return rc;
}

/* dot tile: rows [i0, i0 + rows) x keys [j0, j0 + nk) of stored values */
static void emu_dots(const emu_seg *e, size_t i0, size_t rows, size_t j0, size_t nk, float *dot, double *dotd)
{
    size_t d = e->d;
    if (e->qk_fp8tc) { /* k-steps of 32 channels in order, as the tensor core sums them */
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < nk; j++) {
                const float *qr = e->qt.val + (i0 + i) * d, *kr = e->kt.val + (j0 + j) * d;
                float acc = 0.0f;
                for (size_t c0 = 0; c0 < d; c0 += 32)
                    acc = qattn_num_fp8_kstep(acc, qr + c0, kr + c0, (int)(d - c0 < 32 ? d - c0 : 32));
                dot[i * nk + j] = acc;
            }
        return;
    }
    if (e->qk_groups) { /* per channel group: k-steps of 32 from 0, times sq sk, added in group order; rope last */
        const size_t dn = e->qt.d, ch = e->qk_ch;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < nk; j++) {
                const float *qr = e->qt.val + (i0 + i) * dn, *kr = e->kt.val + (j0 + j) * dn;
                float acc = 0.0f;
                for (size_t g0 = 0; g0 < dn; g0 += ch) {
                    const size_t g1 = g0 + ch < dn ? g0 + ch : dn;
                    float t = 0.0f;
                    for (size_t c0 = g0; c0 < g1; c0 += 32)
                        t = qattn_num_fp8_kstep(t, qr + c0, kr + c0, (int)(g1 - c0 < 32 ? g1 - c0 : 32));
                    const float w = e->qt.scale[qattn_group_index(&e->qt.group, e->qt.n, dn, i0 + i, g0)] *
                                    e->kt.scale[qattn_group_index(&e->kt.group, e->kt.n, dn, j0 + j, g0)];
                    acc = fmaf(t, w, acc);
                }
                if (d > dn) {
                    double r = 0.0;
                    for (size_t c = dn; c < d; c++)
                        r += (double)e->qrope[(i0 + i) * (d - dn) + c - dn] * (double)e->krope[(j0 + j) * (d - dn) + c - dn];
                    acc += (float)r;
                }
                dot[i * nk + j] = acc;
            }
        return;
    }
    if (e->int_qk) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)nk, (int)d, 1.0f, e->qt.val + i0 * d,
                    (int)d, e->kt.val + j0 * d, (int)d, 0.0f, dot, (int)nk);
    } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)nk, (int)d, 1.0, e->qd + i0 * d, (int)d,
                    e->kd + j0 * d, (int)d, 0.0, dotd, (int)nk);
        for (size_t i = 0; i < rows * nk; i++)
            dot[i] = (float)dotd[i];
    }
}

typedef struct emu_row_buf {
    float *s2;    /* [kblock-aligned span] base-2 logits */
    float *p;     /* [kblock] P as computed (fp32) */
    float *pq;    /* [kblock] P as stored */
    float *o;     /* [d] accumulator (single level) or fp32 buffer */
    float *inner; /* [d] inner accumulator (two-level) */
    double *part; /* [d] exact integer partial sums */
    float *tmp;   /* [d] */
} emu_row_buf;

/* sink2: the row's sink logit in base 2 (scale applied), a term of l only,
 * added after the last block at the running maximum; -inf: none */
static void emu_row(const qattn_scheme *s, const emu_seg *e, const qattn_mask *m, float c2, size_t i,
                    const float *dotrow, size_t jt0, emu_row_buf *b, float sink2, float *o, float *lse)
{
    size_t d = e->d, sk = e->sk, kb = (size_t)s->kblock;
    size_t lo, hi;
    qattn_mask_range(m, i, e->sq, sk, &lo, &hi);
    if (lo >= hi) {
        for (size_t c = 0; c < d; c++)
            o[c] = 0.0f;
        if (lse)
            *lse = sink2 == -INFINITY ? -INFINITY : (float)((double)sink2 * M_LN2);
        return;
    }
    size_t jb0 = lo / kb * kb;
    size_t jb1 = (hi + kb - 1) / kb * kb;
    if (jb1 > sk)
        jb1 = sk;
    /* logits of every key of the touched blocks, masked ones -inf */
    const float *dsrow = e->ds ? e->ds + (i / e->qblock) * sk : NULL;
    float qs = e->factored ? e->qsc[i] : 1.0f;
    const float *dr = dotrow + (jb0 - jt0);
    float *s2w = b->s2;
    size_t nb = jb1 - jb0;
    if (e->factored && dsrow) {
        const float *ks = e->ksc + jb0, *dsr = dsrow + jb0;
        for (size_t j = 0; j < nb; j++)
            s2w[j] = (dr[j] * (qs * ks[j]) + dsr[j]) * c2;
    } else if (e->factored) {
        const float *ks = e->ksc + jb0;
        for (size_t j = 0; j < nb; j++)
            s2w[j] = (dr[j] * (qs * ks[j])) * c2;
    } else if (dsrow) {
        const float *dsr = dsrow + jb0;
        for (size_t j = 0; j < nb; j++)
            s2w[j] = (dr[j] + dsr[j]) * c2;
    } else {
        for (size_t j = 0; j < nb; j++)
            s2w[j] = dr[j] * c2;
    }
    for (size_t j = jb0; j < lo; j++)
        s2w[j - jb0] = -INFINITY;
    for (size_t j = hi; j < jb1; j++)
        s2w[j - jb0] = -INFINITY;
    int two = s->acc_chunk > 0;
    size_t chunk = (size_t)s->acc_chunk;
    qattn_acc acc = s->acc;
    memset(b->o, 0, d * sizeof *b->o);
    memset(b->inner, 0, d * sizeof *b->inner);
    float *a = two ? b->inner : b->o; /* where products land */
    float pmul = s->p_static ? qattn_fmt_qmax(s->p) : 1.0f;
    float mrow = -INFINITY, l = 0.0f;
    for (size_t j0 = jb0; j0 < jb1; j0 += kb) {
        size_t j1 = j0 + kb < sk ? j0 + kb : sk, n = j1 - j0;
        const float *s2 = b->s2 + (j0 - jb0);
        float mb = -INFINITY;
        for (size_t j = 0; j < n; j++)
            mb = s2[j] > mb ? s2[j] : mb;
        float mnew = mb > mrow ? mb : mrow;
        float alpha = exp2_soft(mrow - mnew);
        for (size_t j = 0; j < n; j++)
            b->p[j] = exp2_soft(s2[j] - mnew); /* masked: exp2(-inf) = 0 */
        float sum = 0.0f;
        for (size_t j = 0; j < n; j++)
            sum = sum + b->p[j];
        l = l * alpha + sum;
        if (two) {
            qattn_emu_vec_scale(QATTN_ACC_FP32, b->o, alpha, d);
            qattn_emu_vec_scale(acc, b->inner, alpha, d);
        } else {
            qattn_emu_vec_scale(acc, b->o, alpha, d);
        }
        mrow = mnew;
        qattn_fmt_round_mul(s->p, b->p, n, pmul, b->pq);
        if (e->int_pv) {
            /* integer P x integer V: exact in the int32 mma accumulator for
             * the whole block, added to the accumulator once */
            memset(b->part, 0, d * sizeof *b->part);
            for (size_t j = 0; j < n; j++) {
                float pj = b->pq[j];
                const float *vr = e->vval + (j0 + j) * d;
                for (size_t c = 0; c < d; c++)
                    b->part[c] += (double)pj * vr[c];
            }
            for (size_t c = 0; c < d; c++)
                b->tmp[c] = (float)b->part[c];
            qattn_emu_vec_add(acc, a, b->tmp, d);
            if (two && j1 / chunk != j0 / chunk) {
                qattn_emu_vec_add(QATTN_ACC_FP32, b->o, b->inner, d);
                memset(b->inner, 0, d * sizeof *b->inner);
            }
        } else {
            qattn_emu_pv_block(acc, e->pv_fp8tc, a, two ? b->o : NULL, e->vval + j0 * d, d, b->pq, n, j0,
                               two ? chunk : 0, d);
        }
    }
    if (two)
        qattn_emu_vec_add(QATTN_ACC_FP32, b->o, b->inner, d);
    if (sink2 != -INFINITY)
        l = l + exp2_soft(sink2 - mrow);
    for (size_t c = 0; c < d; c++) {
        float x = b->o[c] / l;
        if (s->p_static)
            x = x / pmul;
        if (e->vsc)
            x = x * e->vsc[c];
        if (e->vmean)
            x = x + e->vmean[c];
        o[c] = qattn_fmt_round(s->out, x);
    }
    if (lse)
        *lse = (float)(((double)mrow + log2((double)l)) * M_LN2);
}

/* sink: [sq] each row's sink logit (natural units, scale not applied: it
 * is a logit), or NULL */
static int emu_segment(const qattn_scheme *s, const float *q, const float *k, const float *v, size_t sq, size_t sk,
                       size_t d, const qattn_mask *m, double scale, const float *sink, float *o, float *lse,
                       qattn_err *err)
{
    emu_seg e;
    int rc = emu_prepare(s, q, k, v, sq, sk, d, &e, err);
    if (rc)
        return rc;
    size_t kb = (size_t)s->kblock;
    float c2 = (float)(scale * M_LOG2E);
    float *dot = malloc(EMU_TILE * sk * sizeof *dot);
    double *dotd = e.int_qk ? NULL : malloc(EMU_TILE * sk * sizeof *dotd);
    emu_row_buf b;
    b.s2 = malloc((sk + kb) * sizeof *b.s2);
    b.p = malloc(kb * sizeof *b.p);
    b.pq = malloc(kb * sizeof *b.pq);
    b.o = malloc(d * sizeof *b.o);
    b.inner = malloc(d * sizeof *b.inner);
    b.part = malloc(d * sizeof *b.part);
    b.tmp = malloc(d * sizeof *b.tmp);
    if (!dot || (!e.int_qk && !dotd) || !b.s2 || !b.p || !b.pq || !b.o || !b.inner || !b.part || !b.tmp) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory in the emulation (%zu x %zu)", sq, sk);
        goto done;
    }
    for (size_t i0 = 0; i0 < sq; i0 += EMU_TILE) {
        size_t rows = sq - i0 < EMU_TILE ? sq - i0 : EMU_TILE;
        size_t klo, khi;
        qattn_mask_tile_range(m, i0, rows, sq, sk, &klo, &khi);
        size_t jt0 = 0, nk = 0;
        if (klo < khi) {
            jt0 = klo / kb * kb;
            size_t jt1 = (khi + kb - 1) / kb * kb;
            nk = (jt1 < sk ? jt1 : sk) - jt0;
            emu_dots(&e, i0, rows, jt0, nk, dot, dotd);
        }
        for (size_t r = 0; r < rows; r++)
            emu_row(s, &e, m, c2, i0 + r, dot + r * nk, jt0, &b,
                    sink ? (float)((double)sink[i0 + r] * M_LOG2E) : -INFINITY, o + (i0 + r) * d,
                    lse ? lse + i0 + r : NULL);
    }
done:
    free(dot);
    free(dotd);
    free(b.s2);
    free(b.p);
    free(b.pq);
    free(b.o);
    free(b.inner);
    free(b.part);
    free(b.tmp);
    emu_seg_free(&e);
    return rc;
}

int qattn_emu_head(const qattn_scheme *s, const qattn_head *h, const qattn_mask *m, double scale, float *o,
                   float *lse, qattn_err *err)
{
    size_t nseg;
    int rc = qattn_head_check(h, &nseg, err);
    if (rc)
        return rc;
    if (s->kblock <= 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "kblock must be positive");
    if (qattn_fmt_is_int(s->q.fmt) && qattn_fmt_is_int(s->k.fmt) && h->d > 1024)
        return qattn_err_set(err, QATTN_ERR_RANGE, "integer Q.K dot products are exact only for d <= 1024 (d = %zu)",
                             h->d);
    qattn_blas_init();
    if (!(scale > 0.0))
        scale = 1.0 / sqrt((double)h->d);
    for (size_t sg = 0; sg < nseg; sg++) {
        size_t off, sq, sk;
        qattn_head_segment(h, sg, &off, &sq, &sk);
        size_t koff = h->seqlens ? off : 0;
        rc = emu_segment(s, h->q + off * h->d, h->k + koff * h->d, h->v + koff * h->d, sq, sk, h->d, m, scale, NULL,
                         o + off * h->d, lse ? lse + off : NULL, err);
        if (rc)
            return rc;
    }
    return QATTN_OK;
}

int qattn_emu_mha(const qattn_scheme *s, const qattn_mha *a, const qattn_mask *m, double scale, float *o, float *lse,
                  qattn_err *err)
{
    for (size_t h = 0; h < a->hq; h++) {
        qattn_head hv;
        int rc = qattn_mha_head(a, h, &hv, err);
        if (!rc)
            rc = qattn_emu_head(s, &hv, m, scale, o + h * a->sq * a->d, lse ? lse + h * a->sq : NULL, err);
        if (rc)
            return rc;
    }
    return QATTN_OK;
}

/* a group of a scheme operand that gives each row its own scales (or none),
 * so that quantizing gathered rows equals quantizing the cache */
static int sparse_group_ok(const qattn_operand *op)
{
    return !qattn_fmt_is_scaled(op->fmt) || op->group.tok == QATTN_TOK_TOKEN;
}

int qattn_emu_sparse(const qattn_scheme *s, const qattn_sparse *a, double scale, float *o, float *lse, qattn_err *err)
{
    int rc = qattn_sparse_check(a, err);
    if (rc)
        return rc;
    if (!o)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse emulation: no output buffer");
    if (s->smooth != 0)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "sparse emulation: smoothing is not defined over per-query key lists (use smooth=none)");
    if (!sparse_group_ok(&s->q) || !sparse_group_ok(&s->k) || !sparse_group_ok(&s->v))
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "sparse emulation: Q, K and V need per-token scale groups (token, with ch: or e8m0), "
                             "so that gathered rows keep the cache's scales");
    if (s->kblock <= 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "kblock must be positive");
    qattn_blas_init();
    if (!(scale > 0.0))
        scale = 1.0 / sqrt((double)a->d);
    const size_t d = a->d, grp = a->hq / a->hkv, topk = a->topk;
    const qattn_mask none = {QATTN_MASK_NONE, 0, 0};
    float *qg = malloc(grp * d * sizeof *qg), *kg = malloc(topk * d * sizeof *kg), *vg = malloc(topk * d * sizeof *vg);
    float *og = malloc(grp * d * sizeof *og), *lg = malloc(grp * sizeof *lg), *sg = malloc(grp * sizeof *sg);
    if (!qg || !kg || !vg || !og || !lg || !sg) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "sparse emulation: out of memory");
        goto done;
    }
    /* one tile a (query token, kv head): the heads of the group as rows, the
     * token's listed keys in list order */
    for (size_t g = 0; g < a->hkv && !rc; g++) {
        for (size_t r = 0; r < grp; r++)
            sg[r] = a->sink ? a->sink[g * grp + r] : -INFINITY;
        for (size_t i = 0; i < a->sq && !rc; i++) {
            const int32_t *list = a->idx + i * topk;
            const size_t len = a->len ? (size_t)a->len[i] : topk;
            size_t n = 0;
            for (size_t t = 0; t < len; t++)
                if (list[t] >= 0) {
                    memcpy(kg + n * d, qattn_sparse_row(a, 0, g, (size_t)list[t]), d * sizeof *kg);
                    memcpy(vg + n * d, qattn_sparse_row(a, 1, g, (size_t)list[t]), d * sizeof *vg);
                    n++;
                }
            for (size_t r = 0; r < grp; r++)
                memcpy(qg + r * d, a->q + ((g * grp + r) * a->sq + i) * d, d * sizeof *qg);
            if (n == 0) { /* nothing listed: o = 0, lse = -inf (the sink's logit with one) */
                for (size_t r = 0; r < grp; r++) {
                    memset(og + r * d, 0, d * sizeof *og);
                    lg[r] = a->sink ? sg[r] : -INFINITY;
                }
            } else {
                rc = emu_segment(s, qg, kg, vg, grp, n, d, &none, scale, a->sink ? sg : NULL, og, lg, err);
            }
            for (size_t r = 0; r < grp && !rc; r++) {
                memcpy(o + ((g * grp + r) * a->sq + i) * d, og + r * d, d * sizeof *o);
                if (lse)
                    lse[(g * grp + r) * a->sq + i] = lg[r];
            }
        }
    }
done:
    free(qg);
    free(kg);
    free(vg);
    free(og);
    free(lg);
    free(sg);
    return rc;
}
