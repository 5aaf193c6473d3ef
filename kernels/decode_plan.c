/* Decode family, host side (qattn_kernels_decode.h): the cache upload, the
 * params fill, the instance choice, the split rule and the plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/formats.h"
#include "qattn/group.h"
#include "qattn_kernels.h"
#include "registry.h"

/* ---- the cache on the device ---- */

static int op_gtok(const qattn_operand *op)
{
    return op->group.tok == QATTN_TOK_TOKEN ? 1 : op->group.b;
}

size_t qattn_kernels_kv_row_bytes(qattn_fmt f, int d)
{
    size_t elem = f == QATTN_FMT_FP32 ? 4 : (f == QATTN_FMT_FP16 || f == QATTN_FMT_BF16) ? 2 : 1;
    return (size_t)QATTN_KERNELS_ROW(f, d) * elem;
}

/* encode the emulation's fp32 pool (codes or rounded values) to storage */
static void encode_pool(qattn_fmt f, const float *val, size_t rows, int d, void *out)
{
    for (size_t r = 0; r < rows; r++) {
        const float *x = val + r * (size_t)d;
        switch (f) {
        case QATTN_FMT_INT8:
            for (int c = 0; c < d; c++)
                ((int8_t *)out)[r * (size_t)d + (size_t)c] = (int8_t)x[c];
            break;
        case QATTN_FMT_INT4: {
            uint8_t *o = (uint8_t *)out + r * (size_t)((d + 1) / 2);
            for (int c = 0; c < d; c += 2) {
                unsigned lo = (unsigned)((int)x[c] & 0xf), hi = c + 1 < d ? (unsigned)((int)x[c + 1] & 0xf) : 0u;
                o[c / 2] = (uint8_t)(lo | hi << 4);
            }
            break;
        }
        case QATTN_FMT_E4M3:
            for (int c = 0; c < d; c++)
                ((uint8_t *)out)[r * (size_t)d + (size_t)c] = qattn_e4m3_encode(x[c]);
            break;
        case QATTN_FMT_E5M2:
            for (int c = 0; c < d; c++)
                ((uint8_t *)out)[r * (size_t)d + (size_t)c] = qattn_e5m2_encode(x[c]);
            break;
        case QATTN_FMT_FP16:
            for (int c = 0; c < d; c++)
                ((uint16_t *)out)[r * (size_t)d + (size_t)c] = qattn_fp16_encode(x[c]);
            break;
        case QATTN_FMT_BF16:
            for (int c = 0; c < d; c++)
                ((uint16_t *)out)[r * (size_t)d + (size_t)c] = qattn_bf16_encode(x[c]);
            break;
        default:
            memcpy((float *)out + r * (size_t)d, x, (size_t)d * sizeof *x);
        }
    }
}

static int upload(void **dst, const void *src, size_t bytes, qattn_err *err)
{
    int rc = qattn_kernels_dev_alloc(dst, bytes, err);
    if (!rc)
        rc = qattn_kernels_dev_to(*dst, src, bytes, err);
    return rc;
}

int qattn_kernels_kvcache_upload(qattn_kernels_kvcache_dev *dev, const qattn_kvcache *c, qattn_err *err)
{
    return qattn_kernels_kvcache_upload_as(dev, c, QATTN_KERNELS_KV_NHD, err);
}

int qattn_kernels_kvcache_upload_as(qattn_kernels_kvcache_dev *dev, const qattn_kvcache *c, int layout,
                                    qattn_err *err)
{
    memset(dev, 0, sizeof *dev);
    if (!qattn_kernels_kv_layout_ok(layout))
        return qattn_err_set(err, QATTN_ERR_ARG, "KV cache: unknown pool layout %d", layout);
    const qattn_kvcache_cfg *cf = &c->cfg;
    for (int t = 0; t < 2; t++) {
        const qattn_operand *op = t ? &cf->v : &cf->k;
        if (op->fmt == QATTN_FMT_E8M0 || (unsigned)op->fmt >= (unsigned)QATTN_FMT_COUNT)
            return qattn_err_set(err, QATTN_ERR_ARG, "KV cache %s: format %s cannot be stored", t ? "V" : "K",
                                 qattn_fmt_name(op->fmt));
    }
    dev->num_pages = (int64_t)cf->num_pages;
    dev->page_size = (int)cf->page_size;
    dev->max_pages = (int)cf->max_pages;
    dev->nseq = (int)cf->nseq;
    dev->hkv = (int)cf->hkv;
    dev->d = (int)cf->d;
    dev->kop = cf->k;
    dev->vop = cf->v;
    dev->layout = layout;
    dev->owned = 1;
    size_t rows = cf->num_pages * cf->page_size * cf->hkv;
    int rc = QATTN_OK;
    int *len = malloc(cf->nseq * sizeof *len);
    if (!len)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory for %zu sequence lengths", cf->nseq);
    for (size_t s = 0; s < cf->nseq; s++)
        len[s] = (int)c->len[s];
    rc = upload((void **)&dev->len, len, cf->nseq * sizeof *len, err);
    free(len);
    if (!rc)
        rc = upload((void **)&dev->table, c->table, cf->nseq * cf->max_pages * sizeof *c->table, err);
    for (int t = 0; t < 2 && !rc; t++) {
        const qattn_operand *op = t ? &cf->v : &cf->k;
        size_t bytes = rows * qattn_kernels_kv_row_bytes(op->fmt, dev->d);
        void *host = malloc(bytes);
        if (!host) {
            rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory for a %zu-byte cache pool", bytes);
            break;
        }
        if (layout == QATTN_KERNELS_KV_NHD) /* the emulation's order */
            encode_pool(op->fmt, c->val[t], rows, dev->d, host);
        else /* emulation row (page, off, h) to the pool row the layout gives it */
            for (size_t r = 0; r < rows; r++) {
                const size_t h = r % cf->hkv, off = r / cf->hkv % cf->page_size, pg = r / cf->hkv / cf->page_size;
                const int64_t at = qattn_kernels_kv_row(layout, (int64_t)pg, dev->page_size, dev->hkv, (int)off, (int)h);
                encode_pool(op->fmt, c->val[t] + r * cf->d, 1, dev->d,
                            (unsigned char *)host + (size_t)at * qattn_kernels_kv_row_bytes(op->fmt, dev->d));
            }
        rc = upload(t ? &dev->v : &dev->k, host, bytes, err);
        free(host);
        if (rc || !c->scale[t])
            continue;
        if (t) {
            dev->v_ntok = (int)c->ntok[1];
            dev->v_nch = (int)c->nch[1];
        } else {
            dev->k_ntok = (int)c->ntok[0];
            dev->k_nch = (int)c->nch[0];
        }
        rc = upload((void **)(t ? &dev->v_scale : &dev->k_scale), c->scale[t],
                    cf->nseq * cf->hkv * c->ntok[t] * c->nch[t] * sizeof(float), err);
        int g = op_gtok(op);
        if (rc || g == 1)
            continue;
        /* the open groups: positions closed .. len - 1 at row pos % G */
        size_t n = cf->nseq * cf->hkv * (size_t)g * cf->d;
        float *open = calloc(n, sizeof *open);
        if (!open) {
            rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory for the open groups");
            break;
        }
        for (size_t s = 0; s < cf->nseq && !rc; s++)
            for (size_t h = 0; h < cf->hkv && !rc; h++) {
                size_t closed = c->closed[t][s];
                if (closed < c->len[s])
                    rc = qattn_kvcache_gather(c, t ? QATTN_KV_TENSOR_V : QATTN_KV_TENSOR_K, s, h, closed, c->len[s],
                                              open + ((s * cf->hkv + h) * (size_t)g + closed % (size_t)g) * cf->d,
                                              err);
            }
        if (!rc)
            rc = upload((void **)(t ? &dev->v_open : &dev->k_open), open, n * sizeof *open, err);
        free(open);
    }
    if (rc)
        qattn_kernels_kvcache_dev_free(dev);
    return rc;
}

void qattn_kernels_kvcache_dev_free(qattn_kernels_kvcache_dev *dev)
{
    if (dev->owned) {
        void *bufs[] = {dev->k, dev->v, dev->k_scale, dev->v_scale, dev->k_open, dev->v_open, dev->table, dev->len};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            qattn_kernels_dev_free(bufs[i]);
    }
    memset(dev, 0, sizeof *dev);
}

/* ---- params ---- */

void qattn_kernels_decode_part_sizes(const qattn_kernels_decode_problem *pb, int64_t tokens_q, int num_splits,
                                     size_t *o_part, size_t *lse_part)
{
    size_t rows = num_splits > 1 ? (size_t)num_splits * (size_t)pb->hq * (size_t)tokens_q : 0;
    if (o_part)
        *o_part = rows * (size_t)pb->d * sizeof(float);
    if (lse_part)
        *lse_part = rows * sizeof(float);
}

int qattn_kernels_decode_fill(qattn_kernels_decode_params *p, const qattn_kernels_decode_problem *pb,
                              const qattn_kernels_tensor *q, const qattn_kernels_tensor *o, float *lse,
                              int64_t tokens_q, const int *cu_q, const qattn_kernels_kvcache_dev *cache,
                              int num_splits, float *o_part, float *lse_part, qattn_err *err)
{
    memset(p, 0, sizeof *p);
    if (num_splits < 1 || num_splits > QATTN_KERNELS_DECODE_SPLITS_MAX)
        return qattn_err_set(err, QATTN_ERR_ARG, "num_splits %d outside 1 .. %d", num_splits,
                             QATTN_KERNELS_DECODE_SPLITS_MAX);
    if (num_splits > 1 && (!o_part || !lse_part))
        return qattn_err_set(err, QATTN_ERR_ARG, "num_splits %d without partial buffers", num_splits);
    if (cache->hkv != pb->hkv || cache->d != pb->d || cache->nseq < pb->nseq)
        return qattn_err_set(err, QATTN_ERR_ARG, "cache of %d kv heads, d %d, %d sequences for a batch of %d, %d, %d",
                             cache->hkv, cache->d, cache->nseq, pb->hkv, pb->d, pb->nseq);
    if (!qattn_kernels_kv_layout_ok(cache->layout))
        return qattn_err_set(err, QATTN_ERR_ARG, "cache: unknown pool layout %d", cache->layout);
    p->q = q->data;
    p->in = pb->in;
    qattn_kernels_tensor_strides(q, &p->q_sb, &p->q_sh, &p->q_st);
    p->o = o->data;
    p->out = pb->out;
    qattn_kernels_tensor_strides(o, &p->o_sb, &p->o_sh, &p->o_st);
    p->lse = lse;
    p->lse_sh = tokens_q;
    p->cu_q = cu_q;
    p->nseq = pb->nseq;
    p->hq = pb->hq;
    p->hkv = pb->hkv;
    p->d = pb->d;
    p->seqlen_q = pb->seqlen_q;
    p->cache = *cache;
    p->cache.owned = 0;
    p->mask = pb->mask;
    p->c2 = qattn_kernels_softmax_c2(pb->scale, pb->d);
    p->kblock = pb->kblock > 0 ? pb->kblock : 64;
    p->num_splits = num_splits;
    p->o_part = num_splits > 1 ? o_part : NULL;
    p->lse_part = num_splits > 1 ? lse_part : NULL;
    qattn_kernels_fastdiv_init(&p->div_grp, (uint32_t)(pb->hkv > 0 ? pb->hq / pb->hkv : 1));
    qattn_kernels_fastdiv_init(&p->div_hkv, (uint32_t)(pb->hkv > 0 ? pb->hkv : 1));
    qattn_kernels_fastdiv_init(&p->div_splits, (uint32_t)num_splits);
    qattn_kernels_fastdiv_init(&p->div_page, (uint32_t)(cache->page_size > 0 ? cache->page_size : 1));
    qattn_kernels_decode_switches(p);
    return QATTN_OK;
}

int qattn_kernels_decode_stamps_built(void)
{
#ifdef QATTN_DECODE_STAMPS
    return 1;
#else
    return 0;
#endif
}

void qattn_kernels_decode_switches(qattn_kernels_decode_params *p)
{
    p->mma_off = (qattn_kernels_env_is("QATTN_DECODE_CLUSTER", "0") ? QATTN_KERNELS_DECODE_OFF_CLUSTER : 0u) |
                 (qattn_kernels_env_is("QATTN_DECODE_SHARE", "0") ? QATTN_KERNELS_DECODE_OFF_SHARE : 0u) |
                 (qattn_kernels_env_is("QATTN_DECODE_SPIN", "0") ? QATTN_KERNELS_DECODE_OFF_SPIN : 0u) |
                 (qattn_kernels_env_is("QATTN_DECODE_PREFETCH", "0") ? QATTN_KERNELS_DECODE_OFF_PREFETCH : 0u) |
                 (qattn_kernels_env_is("QATTN_DECODE_PREFETCH", "one") ? QATTN_KERNELS_DECODE_OFF_PREFETCH_MULTI : 0u) |
                 (qattn_kernels_env_is("QATTN_DECODE_SHARE", "1") ? QATTN_KERNELS_DECODE_ON_SHARE : 0u);
    p->mma_spec = qattn_kernels_env_is("QATTN_DECODE_SPEC", "spoil-len")    ? 2
                  : qattn_kernels_env_is("QATTN_DECODE_SPEC", "spoil-rows") ? 3
                  : qattn_kernels_env_is("QATTN_DECODE_SPEC", "0")          ? -1
                  : qattn_kernels_env_is("QATTN_DECODE_SPEC", "1")          ? 1
                                                              : 0;
    p->mma_warps = qattn_kernels_env_is("QATTN_DECODE_WARPS", "8")    ? 8
                   : qattn_kernels_env_is("QATTN_DECODE_WARPS", "12") ? 12
                                                                      : 0;
}

void qattn_kernels_fastdiv_init(qattn_kernels_fastdiv *f, uint32_t d)
{
    f->d = d;
    f->mul = 0;
    f->shift = 0;
    if (d <= 1)
        return;
    unsigned l = 0;
    while (l < 32 && ((uint64_t)1 << l) < d)
        l++;
    const uint64_t two_p = (uint64_t)1 << (31 + l);
    f->mul = (uint32_t)((two_p + d - 1) / d);
    f->shift = l - 1;
}

/* ---- the instance ---- */

static unsigned op_groups(const qattn_operand *op)
{
    if (!qattn_fmt_is_scaled(op->fmt))
        return 0;
    unsigned g = op->group.tok == QATTN_TOK_TOKEN ? QATTN_KERNELS_CACHE_TOKEN : QATTN_KERNELS_CACHE_BLOCK;
    return g | (op->group.ch > 0 ? QATTN_KERNELS_CACHE_CHANNELS : 0u);
}

static int is16(qattn_fmt f) { return f == QATTN_FMT_FP16 || f == QATTN_FMT_BF16; }

/* 0, or the property of pb that g does not take, in words */
static const char *decode_misfit(const qattn_kernels_sig *g, const void *problem, int cc, unsigned paths)
{
    const qattn_kernels_decode_problem *pb = (const qattn_kernels_decode_problem *)problem;
    if (!g->launch_decode)
        return "no decode launcher";
    if (g->head_dim != pb->d)
        return "head dim";
    if (!((g->in_fmts >> pb->in) & 1u))
        return "query dtype";
    if (!((g->out_fmts >> pb->out) & 1u))
        return "output dtype";
    if (!((g->cache_fmts >> pb->k.fmt) & 1u) || !((g->cache_fmts >> pb->v.fmt) & 1u))
        return "cache format";
    if ((op_groups(&pb->k) | op_groups(&pb->v)) & ~g->cache_groups)
        return "cache scale group";
    if (g->cache_is_in && ((is16(pb->k.fmt) && pb->k.fmt != pb->in) || (is16(pb->v.fmt) && pb->v.fmt != pb->in)))
        return "a 16-bit cache of another dtype than the query";
    if (!((g->masks >> pb->mask.kind) & 1u))
        return "mask";
    if (pb->kblock > g->kblock_max)
        return "kblock";
    if (!((paths >> g->path) & 1u))
        return "path";
    if (cc > 0 && ((g->cc_min && cc < g->cc_min) || (g->cc_max && cc > g->cc_max)))
        return "device";
    return NULL;
}

int qattn_kernels_decode_find(const qattn_kernels_decode_problem *pb, const qattn_kernels_sig **sig, qattn_err *err)
{
    *sig = NULL;
    if (pb->nseq <= 0 || pb->hq <= 0 || pb->hkv <= 0 || pb->d <= 0 || pb->seqlen_q < 0 || pb->hq % pb->hkv)
        return qattn_err_set(err, QATTN_ERR_ARG, "bad decode problem: nseq %d, heads %d/%d, d %d, rows %d", pb->nseq,
                             pb->hq, pb->hkv, pb->d, pb->seqlen_q);
    const char *why;
    *sig = qattn_kernels_pick(QATTN_KERNELS_FAMILY_DECODE, decode_misfit, pb, pb->cc, pb->paths,
                              "no decode instance was built", &why);
    if (!*sig) {
        char kg[64], vg[64];
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "no decode instance takes this problem (%s): d=%d, q %s, out %s, K %s %s, V %s %s",
                             why, pb->d, qattn_fmt_name(pb->in), qattn_fmt_name(pb->out), qattn_fmt_name(pb->k.fmt),
                             qattn_fmt_is_scaled(pb->k.fmt) ? qattn_group_format(&pb->k.group, kg, sizeof kg) : "",
                             qattn_fmt_name(pb->v.fmt),
                             qattn_fmt_is_scaled(pb->v.fmt) ? qattn_group_format(&pb->v.group, vg, sizeof vg) : "");
    }
    return QATTN_OK;
}

/* ---- the split rule ---- */

static int64_t split_rounds(int64_t sk, int64_t n, int64_t r) { return ((sk + n - 1) / n + r - 1) / r; }

/* n (from the fill rule) grown within its waves to even out the warps' rounds */
static int split_even(int64_t n, int64_t blocks, int64_t slots, int64_t nmax, int64_t sk, int keys_per_round)
{
    if (keys_per_round <= 0 || n <= 1)
        return (int)n;
    const int64_t waves = (n * blocks + slots - 1) / slots;
    const int64_t top = waves * slots / blocks < nmax ? waves * slots / blocks : nmax;
    int64_t best = n, rb = split_rounds(sk, n, keys_per_round);
    for (int64_t m = n + 1; m <= top; m++)
        if (split_rounds(sk, m, keys_per_round) < rb)
            best = m, rb = split_rounds(sk, m, keys_per_round);
    return (int)best;
}

int64_t qattn_kernels_decode_tiles(const qattn_kernels_decode_problem *pb)
{
    const int64_t rows = (int64_t)pb->seqlen_q * (pb->hq / (pb->hkv > 0 ? pb->hkv : 1));
    return (int64_t)pb->nseq * pb->hkv * ((rows + 15) / 16);
}

int qattn_kernels_decode_splits(const qattn_kernels_decode_problem *pb, int sm_count, int blocks_per_sm,
                                int keys_per_round)
{
    const int64_t blocks = qattn_kernels_decode_tiles(pb);
    const int64_t slots = (int64_t)(sm_count > 0 ? sm_count : 1) * (blocks_per_sm > 0 ? blocks_per_sm : 1);
    int64_t nmax = ((int64_t)pb->max_seqlen_k + 255) / 256;
    if (nmax > QATTN_KERNELS_DECODE_SPLITS_MAX)
        nmax = QATTN_KERNELS_DECODE_SPLITS_MAX;
    if (blocks >= slots || nmax <= 1)
        return 1;
    const int64_t sk = pb->max_seqlen_k;
    for (int64_t n = 2; n <= nmax; n++) {
        int64_t t = n * blocks, waves = (t + slots - 1) / slots;
        if ((double)t / (double)(waves * slots) >= 0.85)
            return split_even(n, blocks, slots, nmax, sk, keys_per_round);
    }
    return (int)nmax;
}

/* ---- the plan ---- */

static int plan_alloc(qattn_kernels_decode_plan *pl, void **p, size_t bytes, qattn_err *err)
{
    *p = NULL;
    if (bytes == 0)
        return QATTN_OK;
    if (pl->ndev >= (int)(sizeof pl->dev / sizeof pl->dev[0]))
        return qattn_err_set(err, QATTN_ERR_ARG, "decode plan: too many buffers");
    int rc = qattn_kernels_dev_alloc(p, bytes, err);
    if (!rc)
        pl->dev[pl->ndev++] = *p;
    return rc;
}

int qattn_kernels_decode_plan_init(qattn_kernels_decode_plan *pl, const qattn_kernels_decode_problem *pb,
                                   const qattn_kernels_tensor *q, const qattn_kernels_tensor *o, float *lse,
                                   const int *cu_q, const qattn_kernels_kvcache_dev *cache, qattn_err *err)
{
    memset(pl, 0, sizeof *pl);
    pl->pb = *pb;
    int rc = qattn_kernels_decode_find(pb, &pl->sig, err);
    if (rc)
        return rc;
    int64_t tokens_q = (int64_t)pb->nseq * pb->seqlen_q;
    if (cu_q) {
        if (cu_q[0] != 0)
            return qattn_err_set(err, QATTN_ERR_ARG, "cu_seqlens_q[0] is %d, not 0", cu_q[0]);
        for (int b = 0; b < pb->nseq; b++)
            if (cu_q[b + 1] - cu_q[b] < 0 || cu_q[b + 1] - cu_q[b] > pb->seqlen_q)
                return qattn_err_set(err, QATTN_ERR_ARG, "cu_seqlens_q: sequence %d has %d rows (0 .. %d)", b,
                                     cu_q[b + 1] - cu_q[b], pb->seqlen_q);
        tokens_q = cu_q[pb->nseq];
    }
    int ns = pb->num_splits;
    if (ns <= 0)
        ns = qattn_kernels_decode_splits(pb, qattn_kernels_dev_sm_count(), pl->sig->blocks_per_sm,
                                         pl->sig->keys_per_round);
    if (ns > QATTN_KERNELS_DECODE_SPLITS_MAX)
        return qattn_err_set(err, QATTN_ERR_ARG, "num_splits %d outside 1 .. %d", ns, QATTN_KERNELS_DECODE_SPLITS_MAX);
    pl->num_splits = ns;
    size_t ob, lb;
    qattn_kernels_decode_part_sizes(pb, tokens_q, ns, &ob, &lb);
    void *op = NULL, *lp = NULL, *cu = NULL;
    if ((rc = plan_alloc(pl, &op, ob, err)) || (rc = plan_alloc(pl, &lp, lb, err)))
        goto fail;
    if (cu_q) {
        size_t bytes = (size_t)(pb->nseq + 1) * sizeof *cu_q;
        if ((rc = plan_alloc(pl, &cu, bytes, err)) || (rc = qattn_kernels_dev_to(cu, cu_q, bytes, err)))
            goto fail;
    }
    rc = qattn_kernels_decode_fill(&pl->p, pb, q, o, lse, tokens_q, (const int *)cu, cache, ns, (float *)op,
                                   (float *)lp, err);
    if (!rc && ns > 1) { /* a row tile's two counts for the split kernel's own combine (params spin) */
        const size_t bytes = (size_t)qattn_kernels_decode_tiles(pb) * 2 * sizeof(unsigned);
        void *cnt = NULL;
        if (!(rc = plan_alloc(pl, &cnt, bytes, err)) && !(rc = qattn_kernels_dev_fill(cnt, 0, bytes, err)))
            pl->p.spin_cnt = (unsigned *)cnt;
    }
    if (!rc)
        return QATTN_OK;
fail:
    qattn_kernels_decode_plan_free(pl);
    return rc;
}

int qattn_kernels_decode_plan_run(const qattn_kernels_decode_plan *pl, void *stream, qattn_err *err)
{
    return pl->sig->launch_decode(&pl->p, stream, err);
}

void qattn_kernels_decode_plan_free(qattn_kernels_decode_plan *pl)
{
    for (int i = 0; i < pl->ndev; i++)
        qattn_kernels_dev_free(pl->dev[i]);
    memset(pl, 0, sizeof *pl);
}
