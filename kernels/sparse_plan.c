/* Sparse family, host side (qattn_kernels_sparse.h): the cache upload, the
 * instance choice and the plan. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/formats.h"
#include "qattn/numerics.h"
#include "qattn_kernels_sparse.h"
#include "registry.h"

const char *qattn_kernels_sparse_variant_name(qattn_kernels_sparse_variant v)
{
    switch (v) {
    case QATTN_KERNELS_SPARSE_BF16:
        return "bf16";
    case QATTN_KERNELS_SPARSE_PREPASS:
        return "prepass";
    case QATTN_KERNELS_SPARSE_FUSED:
        return "fused";
    default:
        return NULL;
    }
}

char *qattn_kernels_sparse_scheme(qattn_kernels_sparse_variant v, int kblock, int rope, char *buf, size_t len)
{
    const char *fp8 = "e4m3@token,ch:64,e8m0";
    if (v == QATTN_KERNELS_SPARSE_BF16)
        snprintf(buf, len, "q=bf16 k=bf16 p=bf16 v=bf16 smooth=none acc=fp32 kblock=%d out=bf16", kblock);
    else
        snprintf(buf, len, "q=%s k=%s p=bf16 v=%s smooth=none acc=fp32 kblock=%d rope=%d out=bf16",
                 v == QATTN_KERNELS_SPARSE_FUSED ? fp8 : "bf16", fp8, fp8, kblock, rope);
    return buf;
}

/* ---- the cache on the device ---- */

/* one row of d values in storage form: bf16, or the fp8 row's codes, scale codes and rope part */
static void encode_row(const float *x, int d, int fp8, int rope, uint16_t *b16, uint8_t *codes, uint8_t *sc,
                       uint16_t *rp)
{
    if (!fp8) {
        for (int c = 0; c < d; c++)
            b16[c] = qattn_num_bf16_encode(x[c]);
        return;
    }
    const int CH = QATTN_KERNELS_SPARSE_SCALE_CH, dn = d - rope;
    for (int g0 = 0; g0 < dn; g0 += CH) {
        float amax = 0.0f;
        for (int c = g0; c < g0 + CH; c++)
            amax = fabsf(x[c]) > amax ? fabsf(x[c]) : amax;
        const float s = qattn_num_scale_for(QATTN_FMT_E4M3, amax, 1); /* qattn_qtensor_init's scale */
        sc[g0 / CH] = s > 0.0f ? qattn_num_e8m0_encode_ceil(s) : 0; /* a zero group: zero codes, any scale */
        for (int c = g0; c < g0 + CH; c++)
            codes[c] = s > 0.0f ? qattn_num_e4m3_encode(x[c] / s) : 0;
    }
    for (int c = 0; c < rope; c++)
        rp[c] = qattn_num_bf16_encode(x[dn + c]);
}

static int rows_alloc(qattn_kernels_kvrows *r, int64_t rows, int hkv, int d, int fp8, int rope, qattn_err *err)
{
    memset(r, 0, sizeof *r);
    r->rows = rows;
    if (rows == 0)
        return QATTN_OK;
    const size_t n = (size_t)rows * (size_t)hkv;
    const int dn = d - rope;
    int rc = qattn_kernels_dev_alloc(&r->val, n * (fp8 ? (size_t)dn : (size_t)d * 2), err);
    if (!rc && fp8)
        rc = qattn_kernels_dev_alloc((void **)&r->sc, n * (size_t)QATTN_KERNELS_SPARSE_SC_ROW(dn), err);
    if (!rc && fp8 && rope)
        rc = qattn_kernels_dev_alloc((void **)&r->rope, n * (size_t)rope * 2, err);
    return rc;
}

static void rows_free(qattn_kernels_kvrows *r)
{
    qattn_kernels_dev_free(r->val);
    qattn_kernels_dev_free(r->sc);
    qattn_kernels_dev_free(r->rope);
    memset(r, 0, sizeof *r);
}

/* rows [rows, hkv] of src ([hkv, rows, d] fp32, head stride hs rows) encoded and uploaded */
static int rows_upload(qattn_kernels_kvrows *r, const float *src, size_t hs, int hkv, int d, int fp8, int rope,
                       qattn_err *err)
{
    if (r->rows == 0)
        return QATTN_OK;
    const size_t n = (size_t)r->rows * (size_t)hkv;
    const int dn = d - rope, nsc = QATTN_KERNELS_SPARSE_SC_ROW(dn);
    uint16_t *b16 = fp8 ? NULL : malloc(n * (size_t)d * 2);
    /* the scale rows' padding bytes stay 0 */
    uint8_t *codes = fp8 ? malloc(n * (size_t)dn) : NULL, *sc = fp8 ? calloc(n * (size_t)nsc + 1, 1) : NULL;
    uint16_t *rp = fp8 ? malloc(n * (size_t)rope * 2 + 2) : NULL;
    int rc = QATTN_OK;
    if (fp8 ? !codes || !sc || !rp : !b16) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "sparse cache: out of memory for %zu rows", n);
        goto done;
    }
    for (int64_t i = 0; i < r->rows; i++)
        for (int g = 0; g < hkv; g++) {
            const size_t at = (size_t)i * (size_t)hkv + (size_t)g;
            encode_row(src + ((size_t)g * hs + (size_t)i) * (size_t)d, d, fp8, rope,
                       b16 ? b16 + at * (size_t)d : NULL, codes ? codes + at * (size_t)dn : NULL,
                       sc ? sc + at * (size_t)nsc : NULL, rp ? rp + at * (size_t)rope : NULL);
        }
    if (!fp8)
        rc = qattn_kernels_dev_to(r->val, b16, n * (size_t)d * 2, err);
    else if (!(rc = qattn_kernels_dev_to(r->val, codes, n * (size_t)dn, err)) &&
             !(rc = qattn_kernels_dev_to(r->sc, sc, n * (size_t)nsc, err)) && rope)
        rc = qattn_kernels_dev_to(r->rope, rp, n * (size_t)rope * 2, err);
done:
    free(b16);
    free(codes);
    free(sc);
    free(rp);
    return rc;
}

static int kv_shape(qattn_kernels_sparse_kv *dev, int d, int rope, int hkv, int fp8, qattn_err *err)
{
    if (fp8 && (rope < 0 || rope >= d || (d - rope) % QATTN_KERNELS_SPARSE_SCALE_CH || rope % 16))
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "sparse cache: fp8 rows need d - rope a multiple of %d and rope a multiple of 16 "
                             "(d %d, rope %d)",
                             QATTN_KERNELS_SPARSE_SCALE_CH, d, rope);
    if (d <= 0 || d % 16)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse cache: d %d is not a positive multiple of 16", d);
    dev->fp8 = fp8, dev->d = d, dev->rope = fp8 ? rope : 0, dev->hkv = hkv;
    return QATTN_OK;
}

int qattn_kernels_sparse_kv_upload(qattn_kernels_sparse_kv *dev, const qattn_sparse *a, int fp8, int rope,
                                   qattn_err *err)
{
    memset(dev, 0, sizeof *dev);
    int rc = qattn_sparse_check(a, err);
    if (rc)
        return rc;
    if (a->v != a->k || a->v_ext != a->k_ext)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse cache: the kernels read one row as key and value (v = k)");
    if ((rc = kv_shape(dev, (int)a->d, rope, (int)a->hkv, fp8, err)))
        return rc;
    dev->owned = 1;
    const int paged = a->page > 0;
    dev->page = paged ? (int)a->page : 0;
    dev->prefix = paged ? (int64_t)a->prefix : 0;
    dev->sk = (int64_t)a->sk;
    const int hkv = (int)a->hkv, d = (int)a->d;
    const int64_t npool_rows = paged && a->prefix ? (int64_t)(a->npool * a->page) : 0;
    const int64_t ext_rows = dev->sk - dev->prefix;
    const size_t ntab = paged ? (a->prefix + a->page - 1) / a->page : 0;
    if ((rc = rows_alloc(&dev->pool, npool_rows, hkv, d, fp8, dev->rope, err)) ||
        (rc = rows_alloc(&dev->ext, ext_rows, hkv, d, fp8, dev->rope, err)) ||
        (rc = rows_upload(&dev->pool, a->k, (size_t)npool_rows, hkv, d, fp8, dev->rope, err)) ||
        (rc = rows_upload(&dev->ext, paged ? a->k_ext : a->k, paged ? (size_t)ext_rows : a->sk, hkv, d, fp8,
                          dev->rope, err)))
        goto fail;
    if (ntab) {
        if ((rc = qattn_kernels_dev_alloc((void **)&dev->table, ntab * sizeof *dev->table, err)) ||
            (rc = qattn_kernels_dev_to(dev->table, a->table, ntab * sizeof *dev->table, err)))
            goto fail;
    }
    return QATTN_OK;
fail:
    qattn_kernels_sparse_kv_free(dev);
    return rc;
}

int qattn_kernels_sparse_kv_alloc_bf16(qattn_kernels_sparse_kv *dev, const qattn_kernels_sparse_kv *like,
                                       qattn_err *err)
{
    memset(dev, 0, sizeof *dev);
    int rc = kv_shape(dev, like->d, 0, like->hkv, 0, err);
    if (rc)
        return rc;
    dev->owned = 2; /* the rows; the table is borrowed */
    dev->page = like->page, dev->prefix = like->prefix, dev->sk = like->sk;
    dev->table = like->table;
    if ((rc = rows_alloc(&dev->pool, like->pool.rows, like->hkv, like->d, 0, 0, err)) ||
        (rc = rows_alloc(&dev->ext, like->ext.rows, like->hkv, like->d, 0, 0, err)))
        qattn_kernels_sparse_kv_free(dev);
    return rc;
}

void qattn_kernels_sparse_kv_free(qattn_kernels_sparse_kv *dev)
{
    if (dev->owned) {
        rows_free(&dev->pool);
        rows_free(&dev->ext);
        if (dev->owned == 1)
            qattn_kernels_dev_free(dev->table);
    }
    memset(dev, 0, sizeof *dev);
}

/* ---- the instance ---- */

static const char *sparse_misfit(const qattn_kernels_sig *g, const void *problem, int cc, unsigned paths)
{
    const qattn_kernels_sparse_problem *pb = (const qattn_kernels_sparse_problem *)problem;
    if (!g->launch_sparse)
        return "no sparse launcher";
    const qattn_kernels_sparse_variant run = pb->variant == QATTN_KERNELS_SPARSE_PREPASS ? QATTN_KERNELS_SPARSE_BF16
                                                                                         : pb->variant;
    if (g->head_dim ? pb->d != g->head_dim : pb->d > QATTN_KERNELS_SPARSE_D_MAX)
        return "head dim";
    if (!((g->sparse_variants >> run) & 1u))
        return "variant";
    if (!((g->in_fmts >> pb->in) & 1u))
        return "query dtype";
    if (!((g->out_fmts >> pb->out) & 1u))
        return "output dtype";
    if (pb->kblock > g->kblock_max)
        return "kblock";
    if (!((paths >> g->path) & 1u))
        return "path";
    if (cc > 0 && ((g->cc_min && cc < g->cc_min) || (g->cc_max && cc > g->cc_max)))
        return "device";
    return NULL;
}

int qattn_kernels_sparse_find(const qattn_kernels_sparse_problem *pb, const qattn_kernels_sig **sig, qattn_err *err)
{
    *sig = NULL;
    if (pb->sq < 0 || pb->hq <= 0 || pb->hkv <= 0 || pb->hq % pb->hkv || pb->d <= 0 || pb->topk < 0 ||
        (unsigned)pb->variant >= QATTN_KERNELS_SPARSE_COUNT)
        return qattn_err_set(err, QATTN_ERR_ARG, "bad sparse problem: tokens %d, heads %d/%d, d %d, top-k %d", pb->sq,
                             pb->hq, pb->hkv, pb->d, pb->topk);
    const char *why;
    *sig = qattn_kernels_pick(QATTN_KERNELS_FAMILY_SPARSE, sparse_misfit, pb, pb->cc, pb->paths,
                              "no sparse instance was built", &why);
    if (!*sig)
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "no sparse instance takes this problem (%s): d=%d, variant %s, q %s, out %s", why, pb->d,
                             qattn_kernels_sparse_variant_name(pb->variant), qattn_fmt_name(pb->in),
                             qattn_fmt_name(pb->out));
    return QATTN_OK;
}

/* ---- the plan ---- */

int qattn_kernels_sparse_plan_init(qattn_kernels_sparse_plan *pl, const qattn_kernels_sparse_problem *pb,
                                   const qattn_kernels_tensor *q, const qattn_kernels_tensor *o, float *lse,
                                   const int32_t *idx, const int32_t *len, const float *sink,
                                   const qattn_kernels_sparse_kv *kv, qattn_err *err)
{
    memset(pl, 0, sizeof *pl);
    pl->pb = *pb;
    int rc = qattn_kernels_sparse_find(pb, &pl->sig, err);
    if (rc)
        return rc;
    const int want_fp8 = pb->variant != QATTN_KERNELS_SPARSE_BF16;
    if (kv->fp8 != want_fp8)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse plan: the %s variant reads %s rows, the cache has %s rows",
                             qattn_kernels_sparse_variant_name(pb->variant), want_fp8 ? "fp8" : "bf16",
                             kv->fp8 ? "fp8" : "bf16");
    if (kv->d != pb->d || kv->hkv != pb->hkv || (kv->fp8 && kv->rope != pb->rope))
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse plan: cache rows (d %d, %d kv heads, rope %d) and problem "
                             "(d %d, %d kv heads, rope %d) differ",
                             kv->d, kv->hkv, kv->rope, pb->d, pb->hkv, pb->rope);
    pl->src = *kv;
    pl->src.owned = 0;
    qattn_kernels_sparse_params *p = &pl->p;
    p->kv = pl->src;
    if (pb->variant == QATTN_KERNELS_SPARSE_PREPASS) {
        if ((rc = qattn_kernels_sparse_kv_alloc_bf16(&pl->scratch, kv, err)))
            return rc;
        p->kv = pl->scratch;
        p->kv.owned = 0;
    }
    int64_t sb;
    p->q = q->data, p->in = pb->in;
    qattn_kernels_tensor_strides(q, &sb, &p->q_sh, &p->q_st);
    p->o = o->data, p->out = pb->out;
    qattn_kernels_tensor_strides(o, &sb, &p->o_sh, &p->o_st);
    p->lse = lse, p->idx = idx, p->len = len, p->sink = sink, p->topk = pb->topk;
    p->sq = pb->sq, p->hq = pb->hq, p->hkv = pb->hkv, p->d = pb->d, p->rope = p->kv.fp8 ? pb->rope : 0;
    p->q_fp8 = pb->variant == QATTN_KERNELS_SPARSE_FUSED;
    p->c2 = qattn_kernels_softmax_c2(pb->scale, pb->d);
    p->kblock = pb->kblock > 0 ? pb->kblock : 64;
    qattn_kernels_fastdiv_init(&p->div_page, (uint32_t)(p->kv.page > 0 ? p->kv.page : 1));
    /* the persistent fused wgmma CTAs' item counter (zero between launches) */
    if (p->q_fp8 && ((rc = qattn_kernels_dev_alloc((void **)&p->work, 2 * sizeof *p->work, err)) ||
                     (rc = qattn_kernels_dev_fill(p->work, 0, 2 * sizeof *p->work, err))))
        return rc;
    return QATTN_OK;
}

int qattn_kernels_sparse_plan_run(const qattn_kernels_sparse_plan *pl, int stage, void *stream, qattn_err *err)
{
    int rc = QATTN_OK;
    if (pl->pb.variant == QATTN_KERNELS_SPARSE_PREPASS && stage != 2)
        rc = qattn_kernels_sparse_prepass(&pl->src, &pl->scratch, stream, err);
    if (!rc && stage != 1)
        rc = pl->sig->launch_sparse(&pl->p, stream, err);
    return rc;
}

void qattn_kernels_sparse_plan_free(qattn_kernels_sparse_plan *pl)
{
    qattn_kernels_sparse_kv_free(&pl->scratch);
    qattn_kernels_dev_free(pl->p.work);
    memset(pl, 0, sizeof *pl);
}
