/* The decode family against the split-KV emulation (qattn_kernels_decode.h,
 * "checks"): one case builds a paged cache with the emulation
 * (qattn_kvcache: shuffled pages, tokens appended in chunks so that groups
 * close as a server's would), uploads it in storage form, runs the plan the
 * dispatcher makes for the allowed paths and compares o and lse with
 * qattn_kv_emu at the plan's num_splits. Shared by test_kernels_decode and
 * `qattn gpu-check`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/formats.h"
#include "qattn/kvcache.h"
#include "qattn/scheme.h"
#include "qattn_kernels.h"

#define B16 QATTN_FMT_BF16
#define F16 QATTN_FMT_FP16
#define F32 QATTN_FMT_FP32

/* decode shapes (sq 1, 4, 16), page sizes 1..256 (7: none of the tile's),
 * splits 1..64 with splits that see no key, sk off the page and the tile,
 * every cache format and group, varlen, masks; quick: a case for every
 * instance (compute-sanitizer) */
static const qattn_kernels_decode_case cases[] = {
    /* d, hq, hkv, nseq, sq[], sk[], page, splits, K, V, mask, in, out, kblock, varlen, quick, q_offset, layout */
    {64, 4, 1, 1, {1}, {100}, 16, 1, "bf16", "bf16", "causal-br", B16, B16, 64, 0, 1, 0, 0},
    {64, 4, 1, 2, {1, 1}, {100, 37}, 16, 3, "bf16", "bf16", "causal-br", B16, F32, 16, 0, 0, 0, 0},
    {64, 8, 2, 2, {4, 4}, {131, 70}, 1, 7, "fp16", "fp16", "causal-br", F16, F16, 32, 0,1, 0, 0},
    {64, 4, 2, 2, {16, 3}, {150, 20}, 64, 5, "int8@token", "int8@token", "causal-br", B16, F32, 64, 1, 1, 0, 0},
    {64, 2, 1, 1, {1}, {40}, 256, 64, "e4m3@token", "e4m3@token", "causal-br", F16, F32, 64, 0,1, 0, 0},
    {128, 4, 1, 2, {2, 1}, {77, 300}, 16, 4, "int8@block:32,ch:1", "int8@token", "causal-br", B16, F32, 64, 1, 0, 0, 0},
    {64, 4, 4, 1, {3}, {90}, 7, 2, "int4@token,ch:16", "e5m2@block:16,e8m0", "window:20,0", F32, F32, 16, 0, 1, 0, 0},
    {128, 2, 1, 1, {1}, {260}, 16, 3, "e4m3@token", "int8@block:64", "none", B16, B16, 128, 0, 0, 0, 0},
    {128, 16, 2, 1, {1}, {513}, 64, 0, "bf16", "bf16", "causal-br", B16, B16, 64, 0, 1, 0, 0},
    {128, 8, 1, 2, {4, 1}, {200, 33}, 16, 0, "int8@token", "int8@token", "causal-br", F16, F16, 64, 1,1, 0, 0},
    {64, 8, 1, 1, {5}, {64}, 16, 2, "fp32", "fp32", "causal", F32, F32, 64, 0, 0, 0, 0},
    {128, 8, 1, 3, {16, 1, 4}, {1000, 1, 257}, 256, 64, "bf16", "bf16", "causal-br", B16, B16, 64, 1, 0, 0, 0},
    {128, 8, 1, 2, {1, 1}, {2049, 700}, 1, 9, "fp16", "fp16", "causal-br", F16, B16, 64, 0,1, 0, 0},
    {128, 16, 2, 2, {4, 16}, {777, 333}, 64, 16, "e4m3@token", "e4m3@token", "causal-br", B16, B16, 64, 1, 1, 0, 0},
    {128, 8, 8, 1, {1}, {4000}, 16, 0, "int8@token", "int8@token", "causal-br", B16, B16, 64, 0, 0, 0, 0},
    {64, 16, 2, 2, {1, 1}, {1500, 3}, 16, 32, "int8@token", "int8@token", "causal-br", F16, F16, 64, 0, 0, 0, 0},
    /* 16-bit caches with long splits (one of 4000 keys; two of 1500 in HND): a warp's chunks in
     * its steady state, past its first lookups */
    {128, 8, 1, 1, {1}, {4000}, 16, 1, "bf16", "bf16", "causal-br", B16, B16, 64, 0, 0, 0, 0},
    {64, 8, 2, 2, {1, 3}, {3001, 1200}, 16, 2, "fp16", "fp16", "causal-br", F16, F16, 64, 0, 0, 0, 1},
    /* Q not 16-byte aligned: the mma path's fragments loaded element by element (1) or as words (2) */
    {128, 8, 1, 2, {1, 4}, {300, 90}, 16, 3, "bf16", "bf16", "causal-br", B16, B16, 64, 0, 0, 1, 0},
    {128, 8, 2, 1, {2}, {200}, 16, 2, "int8@token", "int8@token", "causal-br", F16, F32, 64, 0, 0, 2, 0},
    /* the pool in the HND layout (a head's rows of a page together): pages of 1, 7, 16, 64, 256 tokens,
     * several kv heads, every mma cache format, the plan's splits and given ones */
    {64, 8, 2, 2, {4, 4}, {131, 70}, 1, 7, "fp16", "fp16", "causal-br", F16, F16, 32, 0, 1, 0, 1},
    {64, 4, 4, 1, {3}, {90}, 7, 2, "int4@token,ch:16", "e5m2@block:16,e8m0", "window:20,0", F32, F32, 16, 0, 1, 0, 1},
    {128, 16, 2, 1, {1}, {513}, 64, 0, "bf16", "bf16", "causal-br", B16, B16, 64, 0, 1, 0, 1},
    {128, 8, 8, 1, {1}, {4000}, 16, 0, "int8@token", "int8@token", "causal-br", B16, B16, 64, 0, 1, 0, 1},
    {128, 16, 2, 2, {4, 16}, {777, 333}, 256, 16, "e4m3@token", "e4m3@token", "causal-br", B16, B16, 64, 1, 0, 0, 1},
    {64, 16, 4, 2, {1, 1}, {1500, 3}, 16, 32, "int8@token", "int8@token", "causal-br", F16, F16, 64, 0, 0, 0, 1},
    /* int4 caches (the mma path at d = 128): splits given and the rule's, GQA, varlen, pages of 1 and
     * 256 (HND), a window, Q element by element, splits without a key */
    {128, 8, 1, 2, {1, 1}, {300, 77}, 16, 3, "int4@token", "int4@token", "causal-br", B16, F32, 64, 0, 1, 0, 0},
    {128, 16, 2, 2, {4, 16}, {777, 333}, 64, 16, "int4@token", "int4@token", "causal-br", F16, F16, 64, 1, 0, 0, 0},
    {128, 8, 8, 1, {1}, {4000}, 16, 0, "int4@token", "int4@token", "causal-br", B16, B16, 64, 0, 0, 0, 0},
    {128, 8, 2, 1, {2}, {200}, 1, 2, "int4@token", "int4@token", "window:50,0", B16, F32, 64, 0, 0, 1, 0},
    {128, 8, 1, 3, {16, 1, 4}, {1000, 1, 257}, 256, 64, "int4@token", "int4@token", "causal-br", F16, B16, 64, 1, 0, 0, 1},
};

const qattn_kernels_decode_case *qattn_kernels_decode_cases(size_t *n)
{
    *n = sizeof cases / sizeof cases[0];
    return cases;
}

static qattn_mask parse_mask(const char *m)
{
    qattn_mask mk;
    memset(&mk, 0, sizeof mk);
    if (!strcmp(m, "causal-br"))
        mk.kind = QATTN_MASK_CAUSAL_BR;
    else if (!strcmp(m, "causal"))
        mk.kind = QATTN_MASK_CAUSAL;
    else if (!strncmp(m, "window:", 7)) {
        long long l = 0, r = 0;
        sscanf(m + 7, "%lld,%lld", &l, &r);
        mk.kind = QATTN_MASK_WINDOW;
        mk.left = l;
        mk.right = r;
    }
    return mk;
}

static float round_to(qattn_fmt f, float v)
{
    return f == QATTN_FMT_FP32 ? v : qattn_fmt_round(f, v);
}

static double gauss(uint64_t *state)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        u[i] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* the host buffers of one case */
typedef struct bufs {
    int32_t *table;
    float *k, *v, *q, *o_emu, *lse_emu, *lse_dev;
    unsigned char *q_dev, *o_dev;
} bufs;

static void bufs_free(bufs *h)
{
    free(h->table), free(h->k), free(h->v), free(h->q), free(h->o_emu), free(h->lse_emu), free(h->lse_dev);
    free(h->q_dev), free(h->o_dev);
}

/* compare the device's o (dtype out, [Tq, hq, d]) and lse with the emulation's */
static void compare(const qattn_kernels_decode_case *tc, const bufs *h, int hq, int tq, int d, double vmax,
                    qattn_kernels_decode_result *res)
{
    double dot = 0.0, n1 = 0.0, n2 = 0.0;
    for (int hh = 0; hh < hq; hh++)
        for (int t = 0; t < tq; t++) {
            size_t r = (size_t)hh * tq + t;
            float le = h->lse_emu[r], lg = h->lse_dev[r];
            if (!(le == lg || (isinf(le) && isinf(lg) && le < 0 && lg < 0))) {
                res->diff_lse++;
                double e = fabs((double)le - (double)lg);
                res->max_dlse = (isnan(e) || e > res->max_dlse) ? (isnan(e) ? INFINITY : e) : res->max_dlse;
            }
            for (int c = 0; c < d; c++) {
                float oe = round_to(tc->out, h->o_emu[r * d + c]);
                size_t at = ((size_t)t * hq + hh) * d + c;
                float og = tc->out == QATTN_FMT_FP32   ? ((float *)h->o_dev)[at]
                           : tc->out == QATTN_FMT_FP16 ? qattn_fp16_decode(((uint16_t *)h->o_dev)[at])
                                                       : qattn_bf16_decode(((uint16_t *)h->o_dev)[at]);
                if (memcmp(&oe, &og, sizeof oe))
                    res->diff_o++;
                double e = fabs((double)oe - (double)og);
                if (isnan(e) || e / vmax > res->err)
                    res->err = isnan(e) ? INFINITY : e / vmax;
                dot += (double)oe * og, n1 += (double)oe * oe, n2 += (double)og * og;
            }
        }
    res->cos = n1 > 0.0 && n2 > 0.0 ? dot / sqrt(n1 * n2) : (n1 == n2 ? 1.0 : 0.0);
}

/* A second plan of the case (its own output, partials and counters) run beside pl on two streams, 4
 * times each: a split kernel whose blocks wait for each other (params spin) must not hold the
 * multiprocessors the other grid's blocks wait for; the second plan's output must equal o_ref (pl's,
 * obytes) bit for bit. Sets res->streams_diff (bytes that differ) and clears res->pass on a difference. */
static int two_streams(const qattn_kernels_decode_plan *pl, const qattn_kernels_decode_problem *pb,
                       const qattn_kernels_tensor *qt, const qattn_kernels_tensor *ot, const int *cu,
                       const qattn_kernels_kvcache_dev *dc, const void *o_ref, size_t obytes,
                       qattn_kernels_decode_result *res, qattn_err *err)
{
    qattn_kernels_decode_plan pl2;
    memset(&pl2, 0, sizeof pl2);
    void *od2 = NULL, *s1 = NULL, *s2 = NULL;
    unsigned char *o2 = malloc(obytes ? obytes : 1);
    int rc = o2 ? 0 : qattn_err_set(err, QATTN_ERR_NOMEM, "decode check: %zu bytes", obytes);
    if (!rc)
        rc = qattn_kernels_dev_alloc(&od2, obytes, err);
    qattn_kernels_tensor ot2 = *ot;
    ot2.data = od2;
    if (!rc)
        rc = qattn_kernels_decode_plan_init(&pl2, pb, qt, &ot2, NULL, cu, dc, err);
    if (!rc)
        rc = qattn_kernels_stream_create(&s1, err) || qattn_kernels_stream_create(&s2, err);
    for (int it = 0; !rc && it < 4; it++)
        rc = qattn_kernels_decode_plan_run(pl, s1, err) || qattn_kernels_decode_plan_run(&pl2, s2, err);
    if (!rc)
        rc = qattn_kernels_dev_sync(err) || qattn_kernels_dev_from(o2, od2, obytes, err);
    if (!rc) {
        for (size_t i = 0; i < obytes; i++)
            res->streams_diff += o2[i] != ((const unsigned char *)o_ref)[i];
        res->pass = res->pass && res->streams_diff == 0;
    }
    qattn_kernels_stream_free(s1);
    qattn_kernels_stream_free(s2);
    qattn_kernels_decode_plan_free(&pl2);
    qattn_kernels_dev_free(od2);
    free(o2);
    return rc;
}

int qattn_kernels_decode_run_case(const qattn_kernels_decode_case *tc, unsigned paths, unsigned checks, uint64_t *seed,
                                  qattn_kernels_decode_result *res, qattn_err *err)
{
    memset(res, 0, sizeof *res);
    const int d = tc->d, hq = tc->hq, hkv = tc->hkv, nseq = tc->nseq, ps = tc->page;
    qattn_operand ko, vo;
    int rc = qattn_operand_parse("k", tc->k, &ko, err);
    if (rc || (rc = qattn_operand_parse("v", tc->v, &vo, err)))
        return rc;
    int max_len = 0, max_sq = 0;
    for (int s = 0; s < nseq; s++) {
        max_len = tc->sk[s] > max_len ? tc->sk[s] : max_len;
        max_sq = tc->sq[s] > max_sq ? tc->sq[s] : max_sq;
    }
    /* the block table: every page of the pool in a shuffled order, one spare per sequence */
    const int max_pages = (max_len + ps - 1) / ps + 1, num_pages = nseq * max_pages;
    bufs h;
    memset(&h, 0, sizeof h);
    h.table = malloc((size_t)num_pages * sizeof *h.table);
    h.k = malloc((size_t)max_len * hkv * d * sizeof(float));
    h.v = malloc((size_t)max_len * hkv * d * sizeof(float));
    int cu[5] = {0};
    for (int s = 0; s < nseq; s++)
        cu[s + 1] = cu[s] + (tc->varlen ? tc->sq[s] : max_sq);
    const int tq = cu[nseq];
    const size_t esz = tc->in == QATTN_FMT_FP32 ? 4 : 2, osz = tc->out == QATTN_FMT_FP32 ? 4 : 2;
    h.q = malloc((size_t)hq * tq * d * sizeof(float));
    h.q_dev = malloc((size_t)tq * hq * d * esz);
    h.o_dev = malloc((size_t)tq * hq * d * osz);
    h.o_emu = malloc((size_t)hq * tq * d * sizeof(float));
    h.lse_emu = malloc((size_t)hq * tq * sizeof(float));
    h.lse_dev = malloc((size_t)hq * tq * sizeof(float));
    if (!h.table || !h.k || !h.v || !h.q || !h.q_dev || !h.o_dev || !h.o_emu || !h.lse_emu || !h.lse_dev) {
        bufs_free(&h);
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of host memory for a decode case");
    }
    for (int i = 0; i < num_pages; i++)
        h.table[i] = i;
    for (int i = num_pages - 1; i > 0; i--) {
        int j = (int)((*seed = *seed * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (i + 1);
        int32_t t = h.table[i];
        h.table[i] = h.table[j], h.table[j] = t;
    }
    qattn_kvcache_cfg cfg = {(size_t)num_pages, (size_t)ps, (size_t)hkv, (size_t)d, (size_t)nseq,
                             (size_t)max_pages, h.table, ko, vo};
    qattn_kvcache cache;
    if ((rc = qattn_kvcache_init(&cache, &cfg, err))) {
        bufs_free(&h);
        return rc;
    }
    /* K with a large channel (per-channel and per-token scales differ), appended 37 tokens at a time */
    double vmax = 0.0;
    for (int s = 0; s < nseq && !rc; s++) {
        for (int i = 0; i < tc->sk[s] * hkv * d; i++) {
            h.k[i] = (float)(gauss(seed) + (i % d == 3 ? 4.0 : 0.0));
            h.v[i] = (float)gauss(seed);
            vmax = fabs(h.v[i]) > vmax ? fabs(h.v[i]) : vmax;
        }
        for (int done = 0; done < tc->sk[s] && !rc; done += 37) {
            int n = tc->sk[s] - done < 37 ? tc->sk[s] - done : 37;
            rc = qattn_kvcache_append(&cache, (size_t)s, h.k + (size_t)done * hkv * d, h.v + (size_t)done * hkv * d,
                                      (size_t)n, err);
        }
    }
    for (int t = 0; t < tq; t++)
        for (int hh = 0; hh < hq; hh++)
            for (int c = 0; c < d; c++) {
                float x = round_to(tc->in, (float)gauss(seed));
                h.q[((size_t)hh * tq + t) * d + c] = x;
                size_t at = ((size_t)t * hq + hh) * d + c;
                if (tc->in == QATTN_FMT_FP32)
                    ((float *)h.q_dev)[at] = x;
                else if (tc->in == QATTN_FMT_FP16)
                    ((uint16_t *)h.q_dev)[at] = qattn_fp16_encode(x);
                else
                    ((uint16_t *)h.q_dev)[at] = qattn_bf16_encode(x);
            }
    qattn_kernels_kvcache_dev dc;
    memset(&dc, 0, sizeof dc);
    void *qd = NULL, *od = NULL, *lsed = NULL;
    qattn_kernels_decode_plan pl;
    memset(&pl, 0, sizeof pl);
    if (!rc)
        rc = qattn_kernels_kvcache_upload_as(&dc, &cache, tc->layout, err);
    if (!rc)
        rc = qattn_kernels_dev_alloc(&qd, ((size_t)tq * hq * d + (size_t)tc->q_offset) * esz, err) ||
             qattn_kernels_dev_to((char *)qd + (size_t)tc->q_offset * esz, h.q_dev, (size_t)tq * hq * d * esz, err) ||
             qattn_kernels_dev_alloc(&od, (size_t)tq * hq * d * osz, err) ||
             qattn_kernels_dev_fill(od, 0x7f, (size_t)tq * hq * d * osz, err) ||
             qattn_kernels_dev_alloc(&lsed, (size_t)hq * tq * sizeof(float), err);
    qattn_kernels_decode_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = nseq, pb.hq = hq, pb.hkv = hkv, pb.d = d, pb.seqlen_q = max_sq, pb.max_seqlen_k = max_len;
    pb.mask = parse_mask(tc->mask);
    pb.in = tc->in, pb.out = tc->out;
    pb.k = ko, pb.v = vo;
    pb.num_splits = tc->num_splits;
    pb.kblock = tc->kblock;
    pb.paths = paths;
    /* user tensors [Tq, hq, d]: batch stride 0 with cu_q, else max_sq rows a sequence */
    qattn_kernels_tensor qt = {qd ? (char *)qd + (size_t)tc->q_offset * esz : NULL,
                               tc->varlen ? 0 : (int64_t)max_sq * hq * d, d, (int64_t)hq * d};
    qattn_kernels_tensor ot = {od, qt.stride_batch, d, (int64_t)hq * d};
    if (!rc) {
        rc = qattn_kernels_decode_plan_init(&pl, &pb, &qt, &ot, (float *)lsed, tc->varlen ? cu : NULL, &dc, err);
        if (rc == QATTN_KERNELS_ERR_UNSUPPORTED && paths)
            rc = 0; /* not this path's case: res->ran stays 0 */
        else if (!rc) {
            int64_t sq64[4], sk64[4];
            for (int s = 0; s < nseq; s++)
                sq64[s] = cu[s + 1] - cu[s], sk64[s] = tc->sk[s];
            qattn_kv_batch kb = {(size_t)nseq, (size_t)hq, (size_t)hkv, (size_t)d, sq64, sk64, h.q, NULL, NULL, &cache};
            qattn_kv_opts opt;
            memset(&opt, 0, sizeof opt);
            opt.mask = pb.mask;
            opt.kblock = tc->kblock;
            opt.num_splits = pl.num_splits; /* the plan's, which the rule may have chosen */
            rc = qattn_kv_emu(&kb, &opt, h.o_emu, h.lse_emu, NULL, NULL, err);
            /* with splits the plan runs twice, the second run checked: a launch must leave the spin
             * counters (params spin) zero for the next */
            for (int run = 0; !rc && run < (pl.num_splits > 1 ? 2 : 1); run++)
                rc = qattn_kernels_decode_plan_run(&pl, NULL, err) || qattn_kernels_dev_sync(err);
            if (!rc)
                rc = qattn_kernels_dev_from(h.o_dev, od, (size_t)tq * hq * d * osz, err) ||
                     qattn_kernels_dev_from(h.lse_dev, lsed, (size_t)hq * tq * sizeof(float), err);
            if (!rc && pl.p.spin_cnt) {
                const size_t nc = (size_t)qattn_kernels_decode_tiles(&pb) * 2;
                unsigned *cnt = (unsigned *)malloc(nc * sizeof *cnt);
                if (!cnt)
                    rc = qattn_err_set(err, QATTN_ERR_NOMEM, "decode check: %zu counters", nc);
                else if (!(rc = qattn_kernels_dev_from(cnt, pl.p.spin_cnt, nc * sizeof *cnt, err)))
                    for (size_t k = 0; k < nc; k++)
                        res->counters_left += cnt[k] != 0u;
                free(cnt);
            }
            if (!rc) {
                res->ran = 1;
                res->sig = pl.sig;
                res->num_splits = pl.num_splits;
                compare(tc, &h, hq, tq, d, vmax, res);
                const int fast = pl.sig->path != QATTN_KERNELS_PATH_PORTABLE;
                res->tol = fast ? QATTN_KERNELS_DECODE_TOL_FAST : QATTN_KERNELS_DECODE_TOL_PORTABLE;
                if (tc->out != QATTN_FMT_FP32)
                    res->tol += tc->out == QATTN_FMT_BF16 ? 8e-3 : 1e-3; /* one output rounding step apart */
                res->lse_tol = fast ? QATTN_KERNELS_DECODE_LSE_TOL_FAST : QATTN_KERNELS_DECODE_LSE_TOL_PORTABLE;
                res->pass = res->err <= res->tol && res->max_dlse <= res->lse_tol && res->counters_left == 0;
                if (fast && pl.num_splits > 1 && (checks & QATTN_KERNELS_DECODE_CHECK_STREAMS))
                    rc = two_streams(&pl, &pb, &qt, &ot, tc->varlen ? cu : NULL, &dc, h.o_dev, (size_t)tq * hq * d * osz,
                                     res, err);
            }
        }
    }
    qattn_kernels_decode_plan_free(&pl);
    qattn_kernels_kvcache_dev_free(&dc);
    qattn_kernels_dev_free(qd);
    qattn_kernels_dev_free(od);
    qattn_kernels_dev_free(lsed);
    qattn_kvcache_free(&cache);
    bufs_free(&h);
    return rc;
}
