/* KV caches and split-KV decode (qattn/kvcache.h, docs/DESIGN.md "KV caches
 * and split-KV"): the paged, quantized cache; the fp32 split-KV emulation
 * and its combine; the float64 reference through qattn_ref_head. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "qattn/kvcache.h"

#ifndef M_LOG2E
#define M_LOG2E 1.4426950408889634074
#endif
#ifndef M_LN2
#define M_LN2 0.69314718055994530942
#endif

static const char *const tname[2] = {"K", "V"};

/* ---- the cache ---- */

/* tokens per scale group of a scaled operand (token: 1, block:G: G) */
static size_t op_tokens(const qattn_operand *op)
{
    return op->group.tok == QATTN_TOK_TOKEN ? 1 : (size_t)op->group.b;
}

static int op_check(const qattn_operand *op, const char *name, qattn_err *err)
{
    if ((unsigned)op->fmt >= (unsigned)QATTN_FMT_COUNT || op->fmt == QATTN_FMT_E8M0)
        return qattn_err_set(err, QATTN_ERR_ARG, "KV cache %s: format %s cannot hold elements", name,
                             qattn_fmt_name(op->fmt));
    if (!qattn_fmt_is_scaled(op->fmt))
        return QATTN_OK;
    qattn_tok t = op->group.tok;
    if (t != QATTN_TOK_TOKEN && t != QATTN_TOK_BLOCK && t != QATTN_TOK_WARP) {
        char buf[64];
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "KV cache %s: group '%s' cannot grow token by token (token or block:G)", name,
                             qattn_group_format(&op->group, buf, sizeof buf));
    }
    if (t != QATTN_TOK_TOKEN && op->group.b <= 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "KV cache %s: block size %d", name, op->group.b);
    return QATTN_OK;
}

int qattn_kvcache_init(qattn_kvcache *c, const qattn_kvcache_cfg *cfg, qattn_err *err)
{
    memset(c, 0, sizeof *c);
    if (cfg->page_size == 0 || cfg->page_size > QATTN_KV_PAGE_MAX)
        return qattn_err_set(err, QATTN_ERR_ARG, "page size %zu outside 1 .. %d", cfg->page_size,
                             QATTN_KV_PAGE_MAX);
    if (cfg->num_pages == 0 || cfg->num_pages > INT32_MAX || cfg->hkv == 0 || cfg->d == 0 || cfg->nseq == 0 ||
        cfg->max_pages == 0)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "KV cache needs pages, kv heads, a head dim and sequences (num_pages %zu, hkv %zu, "
                             "d %zu, nseq %zu, max_pages %zu)",
                             cfg->num_pages, cfg->hkv, cfg->d, cfg->nseq, cfg->max_pages);
    if (!cfg->table)
        return qattn_err_set(err, QATTN_ERR_ARG, "KV cache without a block table");
    int rc;
    if ((rc = op_check(&cfg->k, "K", err)) || (rc = op_check(&cfg->v, "V", err)))
        return rc;
    size_t nt = cfg->nseq * cfg->max_pages;
    for (size_t i = 0; i < nt; i++)
        if (cfg->table[i] < -1 || cfg->table[i] >= (int64_t)cfg->num_pages)
            return qattn_err_set(err, QATTN_ERR_RANGE,
                                 "block table of sequence %zu, entry %zu: page id %d out of range (0 .. %zu, or -1)",
                                 i / cfg->max_pages, i % cfg->max_pages, (int)cfg->table[i], cfg->num_pages - 1);
    c->cfg = *cfg;
    c->table = malloc(nt * sizeof *c->table);
    c->len = calloc(cfg->nseq, sizeof *c->len);
    size_t pool = cfg->num_pages * cfg->page_size * cfg->hkv * cfg->d, cap = cfg->max_pages * cfg->page_size;
    int ok = c->table && c->len;
    for (int t = 0; t < 2 && ok; t++) {
        const qattn_operand *op = t ? &cfg->v : &cfg->k;
        c->closed[t] = calloc(cfg->nseq, sizeof *c->closed[t]);
        c->val[t] = calloc(pool, sizeof *c->val[t]);
        ok = c->closed[t] && c->val[t];
        if (ok && qattn_fmt_is_scaled(op->fmt)) {
            c->ntok[t] = (cap + op_tokens(op) - 1) / op_tokens(op);
            c->nch[t] = qattn_group_nch(&op->group, cfg->d);
            c->scale[t] = calloc(cfg->nseq * cfg->hkv * c->ntok[t] * c->nch[t], sizeof *c->scale[t]);
            ok = c->scale[t] != NULL;
        }
    }
    if (!ok) {
        qattn_kvcache_free(c);
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory for a KV cache of %zu pages of %zu tokens",
                             cfg->num_pages, cfg->page_size);
    }
    memcpy(c->table, cfg->table, nt * sizeof *c->table);
    c->cfg.table = c->table;
    return QATTN_OK;
}

void qattn_kvcache_free(qattn_kvcache *c)
{
    free(c->table);
    free(c->len);
    for (int t = 0; t < 2; t++) {
        free(c->closed[t]);
        free(c->val[t]);
        free(c->scale[t]);
    }
    memset(c, 0, sizeof *c);
}

/* the pool row of (seq, pos, kv head h) in tensor t; NULL without a page */
static float *slot(const qattn_kvcache *c, int t, size_t seq, size_t pos, size_t h)
{
    size_t ps = c->cfg.page_size, pi = pos / ps;
    if (pi >= c->cfg.max_pages)
        return NULL;
    int32_t page = c->table[seq * c->cfg.max_pages + pi];
    if (page < 0)
        return NULL;
    return c->val[t] + (((size_t)page * ps + pos % ps) * c->cfg.hkv + h) * c->cfg.d;
}

/* quantize the group of tokens [p0, p0 + G) of every kv head of seq, in place */
static int close_group(qattn_kvcache *c, int t, size_t seq, size_t p0, float *buf, qattn_err *err)
{
    const qattn_operand *op = t ? &c->cfg.v : &c->cfg.k;
    size_t g = op_tokens(op), d = c->cfg.d, hkv = c->cfg.hkv;
    for (size_t h = 0; h < hkv; h++) {
        for (size_t i = 0; i < g; i++)
            memcpy(buf + i * d, slot(c, t, seq, p0 + i, h), d * sizeof *buf);
        qattn_qtensor qt;
        int rc = qattn_qtensor_init(&qt, op->fmt, &op->group, buf, g, d, err);
        if (rc)
            return rc;
        for (size_t i = 0; i < g; i++)
            memcpy(slot(c, t, seq, p0 + i, h), qt.val + i * d, d * sizeof *buf);
        float *sc = c->scale[t] + ((seq * hkv + h) * c->ntok[t] + p0 / g) * c->nch[t];
        memcpy(sc, qt.scale, c->nch[t] * sizeof *sc);
        qattn_qtensor_free(&qt);
    }
    return QATTN_OK;
}

int qattn_kvcache_append(qattn_kvcache *c, size_t seq, const float *k, const float *v, size_t n, qattn_err *err)
{
    const qattn_kvcache_cfg *cf = &c->cfg;
    if (seq >= cf->nseq)
        return qattn_err_set(err, QATTN_ERR_ARG, "sequence %zu out of range (%zu sequences)", seq, cf->nseq);
    if (n == 0)
        return QATTN_OK;
    if (!k || !v)
        return qattn_err_set(err, QATTN_ERR_ARG, "append with a NULL tensor");
    size_t len = c->len[seq], cap = cf->max_pages * cf->page_size, row = cf->hkv * cf->d;
    if (n > cap - len)
        return qattn_err_set(err, QATTN_ERR_RANGE,
                             "sequence %zu: %zu + %zu tokens exceed its %zu pages of %zu tokens", seq, len, n,
                             cf->max_pages, cf->page_size);
    for (size_t pos = len; pos < len + n; pos++)
        if (!slot(c, 0, seq, pos, 0))
            return qattn_err_set(err, QATTN_ERR_ARG, "sequence %zu: position %zu has no page (block table entry %zu)",
                                 seq, pos, pos / cf->page_size);
    for (int t = 0; t < 2; t++) {
        const float *x = t ? v : k;
        for (size_t i = 0; i < n * row; i++)
            if (!isfinite(x[i]))
                return qattn_err_set(err, QATTN_ERR_NAN, "%s token %zu, head %zu, channel %zu is %s", tname[t],
                                     i / row, i % row / cf->d, i % cf->d, isnan(x[i]) ? "NaN" : "Inf");
    }
    for (int t = 0; t < 2; t++) {
        const qattn_operand *op = t ? &cf->v : &cf->k;
        const float *x = t ? v : k;
        int scaled = qattn_fmt_is_scaled(op->fmt);
        for (size_t i = 0; i < n; i++)
            for (size_t h = 0; h < cf->hkv; h++) {
                float *dst = slot(c, t, seq, len + i, h);
                const float *src = x + i * row + h * cf->d;
                for (size_t ch = 0; ch < cf->d; ch++)
                    dst[ch] = scaled ? src[ch] : qattn_fmt_round(op->fmt, src[ch]);
            }
    }
    c->len[seq] = len + n;
    for (int t = 0; t < 2; t++) {
        const qattn_operand *op = t ? &cf->v : &cf->k;
        if (!qattn_fmt_is_scaled(op->fmt)) {
            c->closed[t][seq] = c->len[seq];
            continue;
        }
        size_t g = op_tokens(op);
        float *buf = malloc(g * cf->d * sizeof *buf);
        if (!buf)
            return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory closing a group of %zu tokens", g);
        int rc = QATTN_OK;
        while (!rc && c->closed[t][seq] + g <= c->len[seq]) {
            rc = close_group(c, t, seq, c->closed[t][seq], buf, err);
            if (!rc)
                c->closed[t][seq] += g;
        }
        free(buf);
        if (rc)
            return rc;
    }
    return QATTN_OK;
}

int qattn_kvcache_gather(const qattn_kvcache *c, qattn_kv_tensor t, size_t seq, size_t h, size_t j0, size_t j1,
                         float *out, qattn_err *err)
{
    const qattn_kvcache_cfg *cf = &c->cfg;
    int ti = t == QATTN_KV_TENSOR_V;
    if (seq >= cf->nseq || h >= cf->hkv)
        return qattn_err_set(err, QATTN_ERR_ARG, "sequence %zu, kv head %zu out of range (%zu, %zu)", seq, h,
                             cf->nseq, cf->hkv);
    if (j0 > j1 || j1 > c->len[seq])
        return qattn_err_set(err, QATTN_ERR_RANGE, "sequence %zu: positions %zu .. %zu, but the cache holds %zu",
                             seq, j0, j1, c->len[seq]);
    const qattn_operand *op = ti ? &cf->v : &cf->k;
    size_t d = cf->d, closed = c->closed[ti][seq], g = qattn_fmt_is_scaled(op->fmt) ? op_tokens(op) : 1;
    for (size_t pos = j0; pos < j1; pos++) {
        const float *src = slot(c, ti, seq, pos, h);
        float *dst = out + (pos - j0) * d;
        if (!src)
            return qattn_err_set(err, QATTN_ERR_ARG, "sequence %zu: position %zu has no page", seq, pos);
        if (!c->scale[ti] || pos >= closed) {
            memcpy(dst, src, d * sizeof *dst);
            continue;
        }
        const float *sc = c->scale[ti] + ((seq * cf->hkv + h) * c->ntok[ti] + pos / g) * c->nch[ti];
        for (size_t ch = 0; ch < d; ch++)
            dst[ch] = src[ch] * sc[qattn_group_ch_index(&op->group, ch)];
    }
    return QATTN_OK;
}

/* ---- batches ---- */

/* shapes, masks and the cache against sk; offsets qoff, koff [nseq + 1] */
static int batch_check(const qattn_kv_batch *b, const qattn_mask *m, size_t *qoff, size_t *koff, qattn_err *err)
{
    if (b->nseq == 0 || b->hq == 0 || b->hkv == 0 || b->d == 0 || !b->sq || !b->sk || !b->q)
        return qattn_err_set(err, QATTN_ERR_ARG, "empty batch (nseq %zu, hq %zu, hkv %zu, d %zu) or NULL arrays",
                             b->nseq, b->hq, b->hkv, b->d);
    if (b->hq % b->hkv)
        return qattn_err_set(err, QATTN_ERR_ARG, "%zu query heads cannot share %zu kv heads", b->hq, b->hkv);
    if (!b->cache == !(b->k && b->v))
        return qattn_err_set(err, QATTN_ERR_ARG, "give either contiguous K and V or a cache");
    if (b->cache && (b->cache->cfg.hkv != b->hkv || b->cache->cfg.d != b->d || b->nseq > b->cache->cfg.nseq))
        return qattn_err_set(err, QATTN_ERR_ARG, "cache of %zu kv heads, d %zu, %zu sequences for a batch of %zu, %zu, %zu",
                             b->cache->cfg.hkv, b->cache->cfg.d, b->cache->cfg.nseq, b->hkv, b->d, b->nseq);
    qoff[0] = koff[0] = 0;
    for (size_t s = 0; s < b->nseq; s++) {
        if (b->sq[s] < 1 || b->sk[s] < 1)
            return qattn_err_set(err, QATTN_ERR_ARG, "sequence %zu: sq = %lld, sk = %lld (both must be >= 1)", s,
                                 (long long)b->sq[s], (long long)b->sk[s]);
        if (m->kind == QATTN_MASK_CAUSAL_BR && b->sk[s] < b->sq[s])
            return qattn_err_set(err, QATTN_ERR_ARG,
                                 "sequence %zu: causal-br needs sk >= sq (sk = %lld < sq = %lld: rows would see no key)",
                                 s, (long long)b->sk[s], (long long)b->sq[s]);
        if (b->cache && (size_t)b->sk[s] > b->cache->len[s])
            return qattn_err_set(err, QATTN_ERR_RANGE, "sequence %zu: sk = %lld, but the cache holds %zu tokens", s,
                                 (long long)b->sk[s], b->cache->len[s]);
        qoff[s + 1] = qoff[s] + (size_t)b->sq[s];
        koff[s + 1] = koff[s] + (size_t)b->sk[s];
    }
    return QATTN_OK;
}

/* K and V rows of (sequence s, kv head h): views of contiguous tensors, or
 * gathered from the cache into kbuf, vbuf [sk, d] */
static int kv_rows(const qattn_kv_batch *b, const size_t *koff, size_t s, size_t h, float *kbuf, float *vbuf,
                   const float **k, const float **v, qattn_err *err)
{
    size_t sk = (size_t)b->sk[s], tk = koff[b->nseq];
    if (!b->cache) {
        *k = b->k + (h * tk + koff[s]) * b->d;
        *v = b->v + (h * tk + koff[s]) * b->d;
        return QATTN_OK;
    }
    int rc = qattn_kvcache_gather(b->cache, QATTN_KV_TENSOR_K, s, h, 0, sk, kbuf, err);
    if (!rc)
        rc = qattn_kvcache_gather(b->cache, QATTN_KV_TENSOR_V, s, h, 0, sk, vbuf, err);
    *k = kbuf;
    *v = vbuf;
    return rc;
}

static size_t max_sk(const qattn_kv_batch *b)
{
    size_t m = 0;
    for (size_t s = 0; s < b->nseq; s++)
        m = (size_t)b->sk[s] > m ? (size_t)b->sk[s] : m;
    return m;
}

void qattn_kv_split_range(size_t sk, size_t n, size_t s, size_t *a, size_t *b)
{
    *a = s * sk / n;
    *b = (s + 1) * sk / n;
}

void qattn_kv_combine(const float *o_part, size_t stride, const float *lse_part, size_t lse_stride, size_t ns,
                      size_t d, float *o, float *lse)
{
    float lmax = -INFINITY;
    for (size_t s = 0; s < ns; s++)
        lmax = lse_part[s * lse_stride] > lmax ? lse_part[s * lse_stride] : lmax;
    for (size_t c = 0; c < d; c++)
        o[c] = 0.0f;
    if (lmax == -INFINITY) {
        if (lse)
            *lse = -INFINITY;
        return;
    }
    float sum = 0.0f;
    for (size_t s = 0; s < ns; s++) {
        float ls = lse_part[s * lse_stride];
        if (ls == -INFINITY)
            continue; /* weight exactly 0; o_s is not read */
        float w = expf(ls - lmax);
        sum = sum + w;
        const float *os = o_part + s * stride;
        for (size_t c = 0; c < d; c++)
            o[c] = o[c] + w * os[c];
    }
    for (size_t c = 0; c < d; c++)
        o[c] = o[c] / sum;
    if (lse)
        *lse = lmax + logf(sum);
}

/* One split [a, b) of one row: s2 [sk] base-2 logits (read on [lo, hi)),
 * v [sk, d]; o [d] = acc / l, *lse natural log; p [kb], acc [d] scratch.
 * The steps and roundings of emulate.c's emu_row for an fp32 scheme. */
static void split_row(const float *s2, const float *v, size_t d, size_t a, size_t b, size_t lo, size_t hi,
                      size_t kb, float *p, float *acc, float *o, float *lse)
{
    size_t va = lo > a ? lo : a, vb = hi < b ? hi : b;
    if (va >= vb) {
        for (size_t c = 0; c < d; c++)
            o[c] = 0.0f;
        *lse = -INFINITY;
        return;
    }
    for (size_t c = 0; c < d; c++)
        acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (size_t j = a + (va - a) / kb * kb; j < vb; j += kb) {
        size_t x0 = j > va ? j : va, x1 = j + kb < vb ? j + kb : vb;
        float mb = -INFINITY;
        for (size_t x = x0; x < x1; x++)
            mb = s2[x] > mb ? s2[x] : mb;
        float mnew = mb > m ? mb : m;
        float alpha = qattn_emu_exp2(m - mnew);
        float sum = 0.0f;
        for (size_t x = x0; x < x1; x++) {
            p[x - x0] = qattn_emu_exp2(s2[x] - mnew);
            sum = sum + p[x - x0];
        }
        l = l * alpha + sum;
        if (alpha != 1.0f)
            for (size_t c = 0; c < d; c++)
                acc[c] = acc[c] * alpha;
        m = mnew;
        for (size_t x = x0; x < x1; x++) {
            const float *vr = v + x * d;
            float px = p[x - x0];
            for (size_t c = 0; c < d; c++)
                acc[c] = acc[c] + px * vr[c];
        }
    }
    for (size_t c = 0; c < d; c++)
        o[c] = acc[c] / l;
    *lse = (float)(((double)m + log2((double)l)) * M_LN2);
}

int qattn_kv_emu(const qattn_kv_batch *b, const qattn_kv_opts *opt, float *o, float *lse, float *o_part,
                 float *lse_part, qattn_err *err)
{
    if (opt->num_splits < 1 || opt->num_splits > QATTN_KV_SPLITS_MAX)
        return qattn_err_set(err, QATTN_ERR_ARG, "num_splits = %d outside 1 .. %d", opt->num_splits,
                             QATTN_KV_SPLITS_MAX);
    if (opt->kblock < 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "kblock = %d is negative", opt->kblock);
    if (!o || !o_part != !lse_part)
        return qattn_err_set(err, QATTN_ERR_ARG, "o is NULL, or only one of o_part and lse_part is given");
    size_t *qoff = malloc((b->nseq + 1) * sizeof *qoff), *koff = malloc((b->nseq + 1) * sizeof *koff);
    if (!qoff || !koff) {
        free(qoff);
        free(koff);
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory for %zu sequences", b->nseq);
    }
    int rc = batch_check(b, &opt->mask, qoff, koff, err);
    if (rc) {
        free(qoff);
        free(koff);
        return rc;
    }
    qattn_blas_init();
    size_t d = b->d, ns = (size_t)opt->num_splits, kb = opt->kblock ? (size_t)opt->kblock : 64;
    size_t hq = b->hq, tq = qoff[b->nseq], skm = max_sk(b), sqm = 0, grp = b->hq / b->hkv;
    for (size_t s = 0; s < b->nseq; s++)
        sqm = (size_t)b->sq[s] > sqm ? (size_t)b->sq[s] : sqm;
    double scale = opt->scale > 0.0 ? opt->scale : 1.0 / sqrt((double)d);
    float c2 = (float)(scale * M_LOG2E);
    float *kbuf = malloc(skm * d * sizeof *kbuf), *vbuf = malloc(skm * d * sizeof *vbuf);
    double *qd = malloc(sqm * d * sizeof *qd), *kd = malloc(skm * d * sizeof *kd), *dd = malloc(sqm * skm * sizeof *dd);
    float *s2 = malloc(skm * sizeof *s2), *p = malloc(kb * sizeof *p), *acc = malloc(d * sizeof *acc);
    float *op = o_part ? NULL : malloc(ns * d * sizeof *op), *lp = lse_part ? NULL : malloc(ns * sizeof *lp);
    if (!kbuf || !vbuf || !qd || !kd || !dd || !s2 || !p || !acc || (!o_part && (!op || !lp))) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory in the split-KV emulation (sk %zu)", skm);
        goto done;
    }
    for (size_t s = 0; s < b->nseq && !rc; s++) {
        size_t sq = (size_t)b->sq[s], sk = (size_t)b->sk[s];
        for (size_t kh = 0; kh < b->hkv && !rc; kh++) {
            const float *k, *v;
            if ((rc = kv_rows(b, koff, s, kh, kbuf, vbuf, &k, &v, err)))
                break;
            for (size_t j = 0; j < sk * d; j++)
                kd[j] = k[j];
            for (size_t h = kh * grp; h < (kh + 1) * grp; h++) {
                const float *q = b->q + (h * tq + qoff[s]) * d;
                for (size_t j = 0; j < sq * d; j++)
                    qd[j] = q[j];
                /* S exactly (fp32 products are exact in double), rounded once */
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)sq, (int)sk, (int)d, 1.0, qd, (int)d, kd,
                            (int)d, 0.0, dd, (int)sk);
                for (size_t i = 0; i < sq; i++) {
                    size_t lo, hi, row = h * tq + qoff[s] + i;
                    qattn_mask_range(&opt->mask, i, sq, sk, &lo, &hi);
                    for (size_t j = lo; j < hi; j++)
                        s2[j] = (float)dd[i * sk + j] * c2;
                    float *o_s = o_part ? o_part + row * d : op;
                    float *l_s = lse_part ? lse_part + row : lp;
                    size_t st = o_part ? hq * tq * d : d, lst = lse_part ? hq * tq : 1;
                    for (size_t sp = 0; sp < ns; sp++) {
                        size_t a, e;
                        qattn_kv_split_range(sk, ns, sp, &a, &e);
                        split_row(s2, v, d, a, e, lo, hi, kb, p, acc, o_s + sp * st, l_s + sp * lst);
                    }
                    qattn_kv_combine(o_s, st, l_s, lst, ns, d, o + row * d, lse ? lse + row : NULL);
                }
            }
        }
    }
done:
    free(qoff);
    free(koff);
    free(kbuf);
    free(vbuf);
    free(qd);
    free(kd);
    free(dd);
    free(s2);
    free(p);
    free(acc);
    free(op);
    free(lp);
    return rc;
}

int qattn_kv_ref(const qattn_kv_batch *b, const qattn_mask *m, double scale, double *o, double *lse, qattn_err *err)
{
    if (!o)
        return qattn_err_set(err, QATTN_ERR_ARG, "o is NULL");
    size_t *qoff = malloc((b->nseq + 1) * sizeof *qoff), *koff = malloc((b->nseq + 1) * sizeof *koff);
    if (!qoff || !koff) {
        free(qoff);
        free(koff);
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory for %zu sequences", b->nseq);
    }
    int rc = batch_check(b, m, qoff, koff, err);
    size_t skm = rc ? 0 : max_sk(b), d = b->d, tq = rc ? 0 : qoff[b->nseq], grp = b->hq / b->hkv;
    float *kbuf = NULL, *vbuf = NULL;
    if (!rc) {
        kbuf = malloc(skm * d * sizeof *kbuf);
        vbuf = malloc(skm * d * sizeof *vbuf);
        if (!kbuf || !vbuf)
            rc = qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory in the KV reference (sk %zu)", skm);
    }
    for (size_t s = 0; s < b->nseq && !rc; s++)
        for (size_t kh = 0; kh < b->hkv && !rc; kh++) {
            const float *k, *v;
            if ((rc = kv_rows(b, koff, s, kh, kbuf, vbuf, &k, &v, err)))
                break;
            for (size_t h = kh * grp; h < (kh + 1) * grp && !rc; h++) {
                size_t row = h * tq + qoff[s];
                qattn_head hd = {b->q + row * d, k, v, (size_t)b->sq[s], (size_t)b->sk[s], d, NULL, 0};
                rc = qattn_ref_head(&hd, m, scale, o + row * d, lse ? lse + row : NULL, err);
            }
        }
    free(qoff);
    free(koff);
    free(kbuf);
    free(vbuf);
    return rc;
}

void qattn_kv_split_bound(size_t n, int kblock, int num_splits, double lse, double *o_bound, double *lse_bound)
{
    const double u = 0x1p-24;
    double kb = kblock > 0 ? kblock : 64, S = num_splits, L = fabs(lse) > 1.0 ? fabs(lse) : 1.0;
    double nb = ceil((double)n / kb) + S;
    if (o_bound)
        *o_bound = u * (4.0 * (double)n + 32.0 * nb + 4.0 * S + 4.0 * L + 32.0);
    if (lse_bound)
        *lse_bound = u * (2.0 * (double)n + 16.0 * nb + 4.0 * S + 4.0 * L + 16.0);
}
