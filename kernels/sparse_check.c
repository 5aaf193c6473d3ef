/* The sparse family against qattn_emu_sparse (qattn_kernels_sparse.h,
 * "checks"): one case builds random queries, one KV row a position (a paged
 * pool with unmapped rows of noise, shuffled pages, and an extend part),
 * per-token lists (sparse, dense or empty) and sinks, runs the plan the
 * dispatcher makes for the allowed paths, and compares o and lse with the
 * emulation of the variant's scheme. Shared by test_kernels_sparse and
 * `qattn gpu-check`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/formats.h"
#include "qattn/scheme.h"
#include "qattn_kernels_sparse.h"

#define SP QATTN_KERNELS_SPARSE_LISTS_SPARSE
#define DN QATTN_KERNELS_SPARSE_LISTS_DENSE
#define EM QATTN_KERNELS_SPARSE_LISTS_EMPTY
#define BF QATTN_KERNELS_SPARSE_BF16
#define PP QATTN_KERNELS_SPARSE_PREPASS
#define FU QATTN_KERNELS_SPARSE_FUSED

/* sparse / dense / empty lists x H 16..128 x top-k 64, 512, 2048, ragged
 * prefix and extend lengths, pages 1..256 (7 and 1 off every tile), MQA and
 * GQA, sinks on and off; every variant */
static const qattn_kernels_sparse_case cases[] = {
    /* d, rope, hq, hkv, sq, topk, sk, prefix, page, lists, sink, variant, quick */
    {512, 64, 16, 1, 12, 64, 300, 200, 16, SP, 1, BF, 1},
    {512, 64, 16, 1, 12, 64, 300, 200, 16, SP, 1, PP, 1},
    {512, 64, 16, 1, 12, 64, 300, 200, 16, SP, 1, FU, 1},
    {512, 64, 32, 1, 8, 512, 1500, 1001, 64, SP, 0, BF, 0},
    {512, 64, 32, 1, 8, 512, 1500, 1001, 64, SP, 0, PP, 0},
    {512, 64, 32, 1, 8, 512, 1500, 1001, 64, SP, 0, FU, 0},
    {512, 64, 64, 1, 6, 512, 700, 0, 0, DN, 1, BF, 0},
    {512, 64, 64, 1, 6, 512, 700, 0, 0, DN, 1, FU, 0},
    {512, 64, 128, 1, 4, 2048, 5000, 3333, 256, SP, 1, BF, 0},
    {512, 64, 128, 1, 4, 2048, 5000, 3333, 256, SP, 1, PP, 0},
    {512, 64, 128, 1, 4, 2048, 5000, 3333, 256, SP, 1, FU, 0},
    {512, 64, 128, 1, 3, 2048, 2100, 1024, 1, DN, 0, BF, 0},
    {512, 64, 64, 1, 5, 512, 1000, 500, 7, EM, 1, BF, 1},
    {512, 64, 64, 1, 5, 512, 1000, 500, 7, EM, 0, FU, 0},
    {128, 64, 8, 2, 10, 100, 400, 150, 7, SP, 1, FU, 1},
    {128, 0, 8, 2, 10, 100, 400, 150, 16, SP, 1, BF, 0},
    {256, 64, 96, 1, 4, 300, 900, 899, 32, SP, 1, PP, 0},
    {512, 64, 256, 2, 3, 128, 700, 400, 32, SP, 1, FU, 1}, /* two tiles a kv head */
    {512, 64, 64, 1, 5, 512, 1000, 500, 7, SP, 0, FU, 0},  /* pages of 7 and of 1 on the fused producers */
    {512, 64, 128, 1, 3, 2048, 2100, 1024, 1, DN, 1, FU, 0},
    {512, 64, 64, 1, 4, 512, 1200, 1100, 3, SP, 1, BF, 0}, /* and on the bf16 one */
    {512, 64, 16, 2, 200, 64, 400, 200, 16, SP, 1, FU, 1}, /* 400 items: a wgmma CTA takes several in turn */
    {512, 64, 16, 2, 200, 64, 400, 200, 16, SP, 0, BF, 1},
    {512, 64, 16, 2, 200, 64, 300, 100, 16, EM, 1, FU, 0},
};

const qattn_kernels_sparse_case *qattn_kernels_sparse_cases(size_t *n)
{
    *n = sizeof cases / sizeof cases[0];
    return cases;
}

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double gauss(uint64_t *s)
{
    const double u0 = ((double)(next(s) >> 11) + 0.5) / 9007199254740992.0;
    const double u1 = ((double)(next(s) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u0)) * cos(6.283185307179586 * u1);
}

/* random rows [n, d] (a head's): gaussian, channel 5 large, each row scaled so that e8m0 scales vary */
static void fill_rows(float *x, size_t n, int d, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        const double row = 0.25 + (double)(next(s) % 8) * 0.5;
        for (int c = 0; c < d; c++)
            x[i * (size_t)d + (size_t)c] = (float)(row * (gauss(s) + (c == 5 ? 3.0 : 0.0)));
    }
}

typedef struct bufs {
    float *q, *k, *pool, *ext, *o_emu, *lse_emu, *lse_dev, *sink;
    int32_t *idx, *len, *table;
    uint16_t *q_dev, *o_dev;
} bufs;

static void bufs_free(bufs *h)
{
    free(h->q), free(h->k), free(h->pool), free(h->ext), free(h->o_emu), free(h->lse_emu), free(h->lse_dev);
    free(h->sink), free(h->idx), free(h->len), free(h->table), free(h->q_dev), free(h->o_dev);
}

/* the lists: sparse (distinct random positions in a random order, -1 holes, a ragged length), dense
 * (0..topk-1) or empty */
static void make_lists(const qattn_kernels_sparse_case *c, bufs *h, uint64_t *s)
{
    for (int t = 0; t < c->sq; t++) {
        int32_t *l = h->idx + (size_t)t * (size_t)c->topk;
        h->len[t] = c->topk;
        for (int x = 0; x < c->topk; x++)
            l[x] = c->lists == DN ? x : -1;
        if (c->lists != SP)
            continue;
        for (int x = 0; x < c->topk; x++) { /* Floyd's sample of topk distinct positions */
            int32_t p = (int32_t)(next(s) % (uint64_t)c->sk);
            for (int y = 0; y < x; y++)
                if (l[y] == p) {
                    p = (int32_t)((p + 1 + (int)(next(s) % 7)) % c->sk);
                    y = -1;
                }
            l[x] = p;
        }
        for (int x = 0; x < c->topk / 9; x++)
            l[next(s) % (uint64_t)c->topk] = -1;
        h->len[t] = t % 3 == 1 ? (int32_t)(next(s) % (uint64_t)(c->topk + 1)) : c->topk;
    }
}

static void compare(const qattn_kernels_sparse_case *c, const bufs *h, double vmax, qattn_kernels_sparse_result *res)
{
    const int hq = c->hq, sq = c->sq, d = c->d;
    double dot = 0.0, n1 = 0.0, n2 = 0.0;
    for (int hh = 0; hh < hq; hh++)
        for (int t = 0; t < sq; t++) {
            const size_t r = (size_t)hh * sq + t;
            const float le = h->lse_emu[r], lg = h->lse_dev[r];
            if (!(le == lg || (isinf(le) && isinf(lg) && le < 0 && lg < 0))) {
                const double e = fabs((double)le - (double)lg);
                res->max_dlse = isnan(e) ? INFINITY : e > res->max_dlse ? e : res->max_dlse;
            }
            for (int ch = 0; ch < d; ch++) {
                const float oe = h->o_emu[r * d + ch];
                const float og = qattn_bf16_decode(h->o_dev[((size_t)t * hq + hh) * d + ch]);
                if (memcmp(&oe, &og, sizeof oe))
                    res->diff_o++;
                const double e = fabs((double)oe - (double)og);
                if (isnan(e) || e / vmax > res->err)
                    res->err = isnan(e) ? INFINITY : e / vmax;
                dot += (double)oe * og, n1 += (double)oe * oe, n2 += (double)og * og;
            }
        }
    res->cos = n1 > 0.0 && n2 > 0.0 ? dot / sqrt(n1 * n2) : (n1 == n2 ? 1.0 : 0.0);
}

int qattn_kernels_sparse_run_case(const qattn_kernels_sparse_case *c, unsigned paths, uint64_t *seed,
                                  qattn_kernels_sparse_result *res, qattn_err *err)
{
    memset(res, 0, sizeof *res);
    const int d = c->d, hq = c->hq, hkv = c->hkv, sq = c->sq, topk = c->topk, page = c->page;
    const int paged = page > 0;
    const int npage = paged ? (c->prefix + page - 1) / page : 0, npool = paged ? npage + 3 : 0;
    const size_t pool_rows = (size_t)npool * (size_t)(paged ? page : 0);
    const size_t ext_rows = (size_t)(c->sk - (paged ? c->prefix : 0));
    bufs h;
    memset(&h, 0, sizeof h);
    h.q = malloc((size_t)hq * sq * d * sizeof *h.q);
    h.k = malloc((size_t)hkv * c->sk * d * sizeof *h.k);
    h.pool = malloc(((size_t)hkv * pool_rows * d + 1) * sizeof *h.pool);
    h.ext = malloc(((size_t)hkv * ext_rows * d + 1) * sizeof *h.ext);
    h.o_emu = malloc((size_t)hq * sq * d * sizeof *h.o_emu);
    h.lse_emu = malloc((size_t)hq * sq * sizeof *h.lse_emu);
    h.lse_dev = malloc((size_t)hq * sq * sizeof *h.lse_dev);
    h.sink = malloc((size_t)hq * sizeof *h.sink);
    h.idx = malloc(((size_t)sq * topk + 1) * sizeof *h.idx);
    h.len = malloc(((size_t)sq + 1) * sizeof *h.len);
    h.table = malloc(((size_t)npage + 1) * sizeof *h.table);
    h.q_dev = malloc((size_t)sq * hq * d * sizeof *h.q_dev);
    h.o_dev = malloc((size_t)sq * hq * d * sizeof *h.o_dev);
    if (!h.q || !h.k || !h.pool || !h.ext || !h.o_emu || !h.lse_emu || !h.lse_dev || !h.sink || !h.idx || !h.len ||
        !h.table || !h.q_dev || !h.o_dev) {
        bufs_free(&h);
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of host memory for a sparse case");
    }
    /* queries (bf16 values), [hq, sq, d] for the emulation and [sq, hq, d] bf16 for the device */
    for (int hh = 0; hh < hq; hh++)
        for (int t = 0; t < sq; t++)
            for (int ch = 0; ch < d; ch++) {
                const float x = qattn_fmt_round(QATTN_FMT_BF16, (float)(1.5 * gauss(seed)));
                h.q[((size_t)hh * sq + t) * d + ch] = x;
                h.q_dev[((size_t)t * hq + hh) * d + ch] = qattn_bf16_encode(x);
            }
    /* the prefix's pages: npage of the pool's npool in a shuffled order (3 left unmapped: noise) */
    int32_t *perm = malloc(((size_t)npool + 1) * sizeof *perm);
    if (!perm) {
        bufs_free(&h);
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of host memory for a sparse case");
    }
    for (int x = 0; x < npool; x++)
        perm[x] = x;
    for (int x = npool - 1; x > 0; x--) {
        const int y = (int)(next(seed) % (uint64_t)(x + 1));
        const int32_t tmp = perm[x];
        perm[x] = perm[y], perm[y] = tmp;
    }
    for (int x = 0; x < npage; x++)
        h.table[x] = perm[x];
    free(perm);
    fill_rows(h.pool, (size_t)hkv * pool_rows, d, seed);
    fill_rows(h.ext, (size_t)hkv * ext_rows, d, seed);
    fill_rows(h.k, (size_t)hkv * c->sk, d, seed);
    double vmax = 0.0;
    const float *src = paged ? h.ext : h.k;
    for (size_t i = 0; i < (size_t)hkv * ext_rows * d; i++)
        vmax = fabs(src[i]) > vmax ? fabs(src[i]) : vmax;
    for (size_t i = 0; paged && i < (size_t)hkv * pool_rows * d; i++)
        vmax = fabs(h.pool[i]) > vmax ? fabs(h.pool[i]) : vmax;
    for (int hh = 0; hh < hq; hh++)
        h.sink[hh] = (float)(gauss(seed) * 2.0);
    make_lists(c, &h, seed);

    qattn_sparse a = {h.q, paged ? h.pool : h.k, paged ? h.pool : h.k, (size_t)hq, (size_t)hkv, (size_t)sq,
                      (size_t)c->sk, (size_t)d, h.idx, (size_t)topk, c->lists == SP ? h.len : NULL,
                      c->sink ? h.sink : NULL, (size_t)page, (size_t)(paged ? c->prefix : 0), (size_t)npool,
                      paged ? h.table : NULL, paged ? h.ext : NULL, paged ? h.ext : NULL};
    char spec[256];
    qattn_kernels_sparse_scheme(c->variant, 64, c->rope, spec, sizeof spec);
    qattn_scheme sch;
    int rc = qattn_scheme_parse(spec, &sch, err);
    qattn_kernels_sparse_kv kv;
    memset(&kv, 0, sizeof kv);
    qattn_kernels_sparse_plan pl;
    memset(&pl, 0, sizeof pl);
    void *qd = NULL, *od = NULL, *lsed = NULL, *idxd = NULL, *lend = NULL, *sinkd = NULL;
    const size_t qbytes = (size_t)sq * hq * d * 2;
    if (!rc)
        rc = qattn_kernels_sparse_kv_upload(&kv, &a, c->variant != BF, c->rope, err);
    if (!rc)
        rc = qattn_kernels_dev_alloc(&qd, qbytes, err) || qattn_kernels_dev_to(qd, h.q_dev, qbytes, err) ||
             qattn_kernels_dev_alloc(&od, qbytes, err) || qattn_kernels_dev_fill(od, 0x7f, qbytes, err) ||
             qattn_kernels_dev_alloc(&lsed, (size_t)hq * sq * 4, err) ||
             qattn_kernels_dev_alloc(&idxd, (size_t)sq * topk * 4 + 4, err) ||
             qattn_kernels_dev_to(idxd, h.idx, (size_t)sq * topk * 4, err) ||
             qattn_kernels_dev_alloc(&lend, (size_t)sq * 4 + 4, err) ||
             qattn_kernels_dev_to(lend, h.len, (size_t)sq * 4, err) ||
             qattn_kernels_dev_alloc(&sinkd, (size_t)hq * 4, err) ||
             qattn_kernels_dev_to(sinkd, h.sink, (size_t)hq * 4, err);
    qattn_kernels_sparse_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.sq = sq, pb.hq = hq, pb.hkv = hkv, pb.d = d, pb.rope = c->rope, pb.topk = topk;
    pb.variant = c->variant, pb.in = QATTN_FMT_BF16, pb.out = QATTN_FMT_BF16, pb.kblock = 64, pb.paths = paths;
    const qattn_kernels_tensor qt = {qd, 0, d, (int64_t)hq * d}, ot = {od, 0, d, (int64_t)hq * d};
    if (!rc) {
        rc = qattn_kernels_sparse_plan_init(&pl, &pb, &qt, &ot, (float *)lsed, (const int32_t *)idxd,
                                            c->lists == SP ? (const int32_t *)lend : NULL,
                                            c->sink ? (const float *)sinkd : NULL, &kv, err);
        if (rc == QATTN_KERNELS_ERR_UNSUPPORTED && paths)
            rc = 0; /* not this path's case: res->ran stays 0 */
        else if (!rc && !(rc = qattn_emu_sparse(&sch, &a, 0.0, h.o_emu, h.lse_emu, err))) {
            rc = qattn_kernels_sparse_plan_run(&pl, 0, NULL, err) || qattn_kernels_dev_sync(err) ||
                 qattn_kernels_dev_from(h.o_dev, od, qbytes, err) ||
                 qattn_kernels_dev_from(h.lse_dev, lsed, (size_t)hq * sq * 4, err);
            if (!rc) {
                res->ran = 1;
                res->sig = pl.sig;
                compare(c, &h, vmax, res);
                const int fast = pl.sig->path != QATTN_KERNELS_PATH_PORTABLE;
                /* bf16 output: one rounding step of 2^-8 apart at most where the kernel is not bit-equal */
                res->tol = (fast ? QATTN_KERNELS_SPARSE_TOL_FAST : QATTN_KERNELS_SPARSE_TOL_PORTABLE) + 8e-3;
                res->lse_tol = fast ? QATTN_KERNELS_SPARSE_LSE_TOL_FAST : QATTN_KERNELS_SPARSE_LSE_TOL_PORTABLE;
                res->pass = res->err <= res->tol && res->max_dlse <= res->lse_tol;
            }
        }
    }
    qattn_kernels_sparse_plan_free(&pl);
    qattn_kernels_sparse_kv_free(&kv);
    qattn_kernels_dev_free(qd), qattn_kernels_dev_free(od), qattn_kernels_dev_free(lsed);
    qattn_kernels_dev_free(idxd), qattn_kernels_dev_free(lend), qattn_kernels_dev_free(sinkd);
    bufs_free(&h);
    return rc;
}
