/* The decode family against the split-KV emulation (qattn_kv_emu) on paged,
 * quantized caches built by the emulation (qattn_kvcache) and uploaded in
 * storage form.
 *
 * Built against the host simulation (CTest test_kernels_decode, CPU): the
 * portable instance must give the emulation's bits (o, lse) for every case.
 * Built against a GPU backend (test_kernels_decode_gpu, label gpu): every
 * decode instance that takes a case, on the device, within tolerances:
 *   portable  max |O - O_emu| <= 1e-5 max |V|, |dLSE| <= 1e-5 (exp2f / expf
 *             against the emulation's: a few ulp);
 *   fast      max |O - O_emu| <= 3e-3 max |V| (P in the 16-bit MMA type:
 *             2^-9 relative per element), |dLSE| <= 1e-4.
 * Also the split rule on a table of shapes and the dispatcher's messages. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/check.h"
#include "qattn/kvcache.h"
#include "qattn/scheme.h"
#include "qattn_kernels.h"

#ifdef QATTN_TEST_SIM /* built against the host simulation */
#define EXACT 1
#else
#define EXACT 0
#endif

static uint64_t rs = 4242;

typedef struct dcase {
    int d, hq, hkv, nseq;
    int sq[4], sk[4];      /* rows and cache length per sequence */
    int page;              /* page size */
    int num_splits;
    const char *k, *v;     /* cache operands, "fmt[@group]" */
    const char *mask;      /* none, causal-br, window:L,R */
    qattn_fmt in, out;
    int kblock;
    int varlen;            /* 1: rows through cu_q */
} dcase;

static qattn_mask parse_mask(const char *m)
{
    qattn_mask mk;
    memset(&mk, 0, sizeof mk);
    if (!strcmp(m, "causal-br"))
        mk.kind = QATTN_MASK_CAUSAL_BR;
    else if (!strcmp(m, "causal"))
        mk.kind = QATTN_MASK_CAUSAL;
    else if (!strncmp(m, "window:", 7)) {
        mk.kind = QATTN_MASK_WINDOW;
        long long l = 0, r = 0;
        sscanf(m + 7, "%lld,%lld", &l, &r);
        mk.left = l;
        mk.right = r;
    }
    return mk;
}

/* float value v rounded to dtype f, and its stored bits */
static float round_to(qattn_fmt f, float v)
{
    return f == QATTN_FMT_FP32 ? v : qattn_fmt_round(f, v);
}

/* one case on instance sig (NULL: the dispatcher's choice); returns 0 when run */
static int run_case(const dcase *tc, unsigned paths, const char *label)
{
    qattn_err err = {{0}};
    const int d = tc->d, hq = tc->hq, hkv = tc->hkv, nseq = tc->nseq, ps = tc->page;
    qattn_operand ko, vo;
    if (qattn_operand_parse("k", tc->k, &ko, &err) || qattn_operand_parse("v", tc->v, &vo, &err)) {
        CHECK(0, "%s", err.msg);
        return 1;
    }
    /* the block table: pages in a shuffled order, some sequences given spare ones */
    int max_len = 0, max_sq = 0;
    for (int s = 0; s < nseq; s++) {
        max_len = tc->sk[s] > max_len ? tc->sk[s] : max_len;
        max_sq = tc->sq[s] > max_sq ? tc->sq[s] : max_sq;
    }
    int max_pages = (max_len + ps - 1) / ps + 1, num_pages = nseq * max_pages;
    int32_t *table = malloc((size_t)num_pages * sizeof *table);
    int *perm = malloc((size_t)num_pages * sizeof *perm);
    for (int i = 0; i < num_pages; i++)
        perm[i] = i;
    for (int i = num_pages - 1; i > 0; i--) {
        int j = (int)((rs = rs * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (i + 1);
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < num_pages; i++)
        table[i] = perm[i];
    qattn_kvcache_cfg cfg = {(size_t)num_pages, (size_t)ps, (size_t)hkv, (size_t)d, (size_t)nseq,
                             (size_t)max_pages, table, ko, vo};
    qattn_kvcache cache;
    if (qattn_kvcache_init(&cache, &cfg, &err)) {
        CHECK(0, "kvcache_init: %s", err.msg);
        free(table);
        free(perm);
        return 1;
    }
    /* tokens appended in chunks (groups close as they fill), channel offsets
     * so that per-channel and per-token scales differ */
    float *buf_k = malloc((size_t)max_len * hkv * d * sizeof(float)), *buf_v = malloc((size_t)max_len * hkv * d * sizeof(float));
    for (int s = 0; s < nseq; s++) {
        for (int i = 0; i < tc->sk[s] * hkv * d; i++) {
            buf_k[i] = (float)(check_gauss(&rs) + (i % d == 3 ? 4.0 : 0.0));
            buf_v[i] = (float)check_gauss(&rs);
        }
        int done = 0;
        while (done < tc->sk[s]) {
            int n = tc->sk[s] - done < 37 ? tc->sk[s] - done : 37;
            if (qattn_kvcache_append(&cache, (size_t)s, buf_k + (size_t)done * hkv * d, buf_v + (size_t)done * hkv * d,
                                     (size_t)n, &err))
                CHECK(0, "append: %s", err.msg);
            done += n;
        }
    }
    /* queries [hq, Tq, d] for the emulation; [Tq, hq, d] in dtype in for the device */
    int cu[5] = {0};
    for (int s = 0; s < nseq; s++)
        cu[s + 1] = cu[s] + (tc->varlen ? tc->sq[s] : max_sq);
    const int tq = cu[nseq];
    float *q = malloc((size_t)hq * tq * d * sizeof *q);
    size_t esz = tc->in == QATTN_FMT_FP32 ? 4 : 2;
    unsigned char *qdev_h = malloc((size_t)tq * hq * d * esz);
    for (int t = 0; t < tq; t++)
        for (int h = 0; h < hq; h++)
            for (int c = 0; c < d; c++) {
                float x = round_to(tc->in, (float)check_gauss(&rs));
                q[((size_t)h * tq + t) * d + c] = x;
                size_t at = ((size_t)t * hq + h) * d + c;
                if (tc->in == QATTN_FMT_FP32)
                    ((float *)qdev_h)[at] = x;
                else if (tc->in == QATTN_FMT_FP16)
                    ((uint16_t *)qdev_h)[at] = qattn_fp16_encode(x);
                else
                    ((uint16_t *)qdev_h)[at] = qattn_bf16_encode(x);
            }
    int64_t sq64[4], sk64[4];
    for (int s = 0; s < nseq; s++) {
        sq64[s] = cu[s + 1] - cu[s];
        sk64[s] = tc->sk[s];
    }
    qattn_kv_batch kb = {(size_t)nseq, (size_t)hq, (size_t)hkv, (size_t)d, sq64, sk64, q, NULL, NULL, &cache};
    qattn_kv_opts opt;
    memset(&opt, 0, sizeof opt);
    opt.mask = parse_mask(tc->mask);
    opt.kblock = tc->kblock;
    opt.num_splits = tc->num_splits;
    float *o_emu = malloc((size_t)hq * tq * d * sizeof *o_emu), *lse_emu = malloc((size_t)hq * tq * sizeof *lse_emu);
    int rc = 0;

    /* the device side */
    qattn_kernels_kvcache_dev dc;
    void *qd = NULL, *od = NULL, *lsed = NULL;
    size_t osz = tc->out == QATTN_FMT_FP32 ? 4 : 2;
    qattn_kernels_decode_plan pl;
    memset(&pl, 0, sizeof pl);
    int ran = 0;
    if (!rc && !(rc = qattn_kernels_kvcache_upload(&dc, &cache, &err))) {
        rc = qattn_kernels_dev_alloc(&qd, (size_t)tq * hq * d * esz, &err) ||
             qattn_kernels_dev_to(qd, qdev_h, (size_t)tq * hq * d * esz, &err) ||
             qattn_kernels_dev_alloc(&od, (size_t)tq * hq * d * osz, &err) ||
             qattn_kernels_dev_fill(od, 0x7f, (size_t)tq * hq * d * osz, &err) ||
             qattn_kernels_dev_alloc(&lsed, (size_t)hq * tq * sizeof(float), &err);
        qattn_kernels_decode_problem pb;
        memset(&pb, 0, sizeof pb);
        pb.nseq = nseq;
        pb.hq = hq;
        pb.hkv = hkv;
        pb.d = d;
        pb.seqlen_q = max_sq;
        pb.max_seqlen_k = max_len;
        pb.mask = opt.mask;
        pb.lse = 1;
        pb.in = tc->in;
        pb.out = tc->out;
        pb.k = ko;
        pb.v = vo;
        pb.num_splits = tc->num_splits;
        pb.kblock = tc->kblock;
        pb.paths = paths;
        /* user tensors [Tq, hq, d]: batch stride 0 with cu_q, else max_sq rows */
        qattn_kernels_tensor qt = {qd, tc->varlen ? 0 : (int64_t)max_sq * hq * d, d, (int64_t)hq * d};
        qattn_kernels_tensor ot = {od, qt.stride_batch, d, (int64_t)hq * d};
        if (!rc)
            rc = qattn_kernels_decode_plan_init(&pl, &pb, &qt, &ot, (float *)lsed, tc->varlen ? cu : NULL, &dc, &err);
        if (rc == QATTN_KERNELS_ERR_UNSUPPORTED && paths) {
            rc = 0; /* this path does not take the case */
            goto out;
        }
        if (!rc) { /* the emulation with the plan's number of splits */
            opt.num_splits = pl.num_splits;
            rc = qattn_kv_emu(&kb, &opt, o_emu, lse_emu, NULL, NULL, &err);
        }
        if (!rc)
            rc = qattn_kernels_decode_plan_run(&pl, NULL, &err);
        if (!rc)
            rc = qattn_kernels_dev_sync(&err);
        CHECK(rc == 0, "%s: %s", label, err.msg);
        if (!rc) {
            ran = 1;
            unsigned char *oh = malloc((size_t)tq * hq * d * osz);
            float *lh = malloc((size_t)hq * tq * sizeof *lh);
            qattn_kernels_dev_from(oh, od, (size_t)tq * hq * d * osz, &err);
            qattn_kernels_dev_from(lh, lsed, (size_t)hq * tq * sizeof *lh, &err);
            double vmax = 0.0, maxe = 0.0, dl = 0.0;
            for (int i = 0; i < max_len * hkv * d; i++)
                vmax = fabs(buf_v[i]) > vmax ? fabs(buf_v[i]) : vmax;
            long bitdiff = 0, lsediff = 0;
            for (int h = 0; h < hq; h++)
                for (int t = 0; t < tq; t++) {
                    size_t r = (size_t)h * tq + t;
                    float le = lse_emu[r], lg = lh[r];
                    if (!(le == lg || (isinf(le) && isinf(lg) && le < 0 && lg < 0))) {
                        lsediff++;
                        double e = fabs((double)le - (double)lg);
                        dl = (isnan(e) || e > dl) ? (isnan(e) ? INFINITY : e) : dl;
                    }
                    for (int c = 0; c < d; c++) {
                        float oe = round_to(tc->out, o_emu[r * d + c]);
                        size_t at = ((size_t)t * hq + h) * d + c;
                        float og = tc->out == QATTN_FMT_FP32   ? ((float *)oh)[at]
                                   : tc->out == QATTN_FMT_FP16 ? qattn_fp16_decode(((uint16_t *)oh)[at])
                                                               : qattn_bf16_decode(((uint16_t *)oh)[at]);
                        if (memcmp(&oe, &og, sizeof oe))
                            bitdiff++;
                        double e = fabs((double)oe - (double)og);
                        maxe = (isnan(e) || e > maxe) ? (isnan(e) ? INFINITY : e) : maxe;
                    }
                }
            const int fast = pl.sig->path != QATTN_KERNELS_PATH_PORTABLE;
            printf("%-26s %-22s d=%-3d h=%d/%d nseq=%d page=%-3d splits=%-2d(%s) K %-18s V %-14s %-11s: "
                   "max|dO|/max|V| %.2e, max|dLSE| %.1e, differing %ld O / %ld LSE\n",
                   label, pl.sig->name, d, hq, hkv, nseq, ps, pl.num_splits, tc->num_splits ? "given" : "rule", tc->k,
                   tc->v, tc->mask, maxe / vmax, dl, bitdiff, lsediff);
            if (EXACT && !fast) {
                CHECK(bitdiff == 0 && lsediff == 0, "%s: %ld outputs and %ld LSEs differ from the emulation", label,
                      bitdiff, lsediff);
            } else {
                double tol = fast ? 3e-3 : 1e-5, ltol = fast ? 1e-4 : 1e-5;
                if (tc->out != QATTN_FMT_FP32)
                    tol += tc->out == QATTN_FMT_BF16 ? 8e-3 : 1e-3; /* one output rounding step apart */
                CHECK(maxe <= tol * vmax, "%s: max |O - O_emu| %.3g > %.1g max|V| (%.3g)", label, maxe, tol, vmax);
                CHECK(dl <= ltol, "%s: max |LSE - LSE_emu| %.3g > %.1g", label, dl, ltol);
            }
            free(oh);
            free(lh);
        }
    out:
        qattn_kernels_decode_plan_free(&pl);
        qattn_kernels_kvcache_dev_free(&dc);
    } else if (rc) {
        CHECK(0, "%s: %s", label, err.msg);
    }
    qattn_kernels_dev_free(qd);
    qattn_kernels_dev_free(od);
    qattn_kernels_dev_free(lsed);
    qattn_kvcache_free(&cache);
    free(o_emu);
    free(lse_emu);
    free(q);
    free(qdev_h);
    free(buf_k);
    free(buf_v);
    free(table);
    free(perm);
    return ran ? 0 : 1;
}

/* the split rule on a table of shapes, answers worked by hand for 132
 * multiprocessors holding 1 block each (B = batch x hkv blocks at sq = 1) */
static void split_rule(void)
{
    qattn_kernels_decode_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.d = 128;
    pb.seqlen_q = 1;
    const struct {
        int nseq, hq, hkv, sk, want;
    } t[] = {
        {1, 8, 1, 32768, 128}, /* B = 1: no n <= 128 (the 256-key cap) reaches 132 blocks: the cap */
        {1, 8, 1, 65536, 132}, /* B = 1: 132 splits are one full wave */
        {8, 64, 8, 32768, 4},  /* B = 64: 2 -> 128 < 132; 3 -> 192 in 2 waves, 0.73; 4 -> 256, 0.97 */
        {4, 64, 8, 131072, 8}, /* B = 32: 5..7 -> 0.61, 0.73, 0.85-; 8 -> 256, 0.97 */
        {64, 64, 8, 8192, 1},  /* B = 512 fills the chip */
        {1, 8, 1, 200, 1},     /* one split's worth of keys */
        {1, 8, 1, 1024, 4},    /* the cap ceil(1024 / 256) */
        {1, 128, 1, 32768, 29}, /* B = 8 (128 rows in tiles of 16): 17..28 -> 136..224 in 2 waves, < 0.85;
                                 * 29 -> 232, 0.88 */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        pb.nseq = t[i].nseq;
        pb.hq = t[i].hq;
        pb.hkv = t[i].hkv;
        pb.max_seqlen_k = t[i].sk;
        int n = qattn_kernels_decode_splits(&pb, 132, 1);
        CHECK(n == t[i].want, "batch %d, hq %d, hkv %d, sk %d: %d splits, want %d", t[i].nseq, t[i].hq, t[i].hkv,
                  t[i].sk, n, t[i].want);
        printf("split rule (132 SMs x 1 block): batch %-2d hq %-3d hkv %d sk %-6d -> %d splits\n", t[i].nseq, t[i].hq,
               t[i].hkv, t[i].sk, n);
    }
    /* two blocks per multiprocessor: 264 slots */
    pb.nseq = 8, pb.hq = 64, pb.hkv = 8, pb.max_seqlen_k = 32768;
    CHECK(qattn_kernels_decode_splits(&pb, 132, 2) == 8, "B = 64 on 264 slots: 5..7 -> 0.61, 0.73, 0.85-; 8 -> "
          "512, 0.97; got %d", qattn_kernels_decode_splits(&pb, 132, 2));
}

/* the dispatcher names what no instance takes */
static void messages(void)
{
    qattn_kernels_decode_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = 1, pb.hq = 8, pb.hkv = 1, pb.d = 96, pb.seqlen_q = 1, pb.max_seqlen_k = 100;
    pb.in = pb.out = QATTN_FMT_BF16;
    pb.k.fmt = pb.v.fmt = QATTN_FMT_BF16;
    pb.cc = -1;
    qattn_err err = {{0}};
    const qattn_kernels_sig *sig = NULL;
    int rc = qattn_kernels_decode_find(&pb, &sig, &err);
    CHECK(rc == QATTN_KERNELS_ERR_UNSUPPORTED, "d = 96: rc %d", rc);
    CHECK_STR_CONTAINS(err.msg, "head dim");
    pb.d = 128;
    pb.hq = 6, pb.hkv = 4;
    rc = qattn_kernels_decode_find(&pb, &sig, &err);
    CHECK(rc == QATTN_ERR_ARG, "6 q heads on 4 kv heads: rc %d", rc);
    pb.hq = 8, pb.hkv = 1;
    rc = qattn_kernels_decode_find(&pb, &sig, &err);
    CHECK(rc == 0 && sig && sig->family == QATTN_KERNELS_FAMILY_DECODE, "bf16 cache, d 128: %s", rc ? err.msg : "");
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc > 1 && !quick) {
        fprintf(stderr, "test_kernels_decode: unknown option '%s' (--quick)\n", argv[1]);
        return 2;
    }
    int ndev = 0;
    qattn_err err;
    if (qattn_kernels_dev_count(&ndev, &err) || ndev == 0) {
        fprintf(stderr, "test_kernels_decode: no GPU (%s)\n", ndev ? err.msg : "none found");
        return 1;
    }
    split_rule();
    messages();
    const qattn_fmt B16 = QATTN_FMT_BF16, F16 = QATTN_FMT_FP16, F32 = QATTN_FMT_FP32;
    /* d, hq, hkv, nseq, sq[], sk[], page, splits, K, V, mask, in, out, kblock, varlen */
    const dcase cases[] = {
        {64, 4, 1, 1, {1}, {100}, 16, 1, "bf16", "bf16", "causal-br", B16, B16, 64, 0},
        {64, 4, 1, 2, {1, 1}, {100, 37}, 16, 3, "bf16", "bf16", "causal-br", B16, F32, 16, 0},
        {64, 8, 2, 2, {4, 4}, {131, 70}, 1, 7, "fp16", "fp16", "causal-br", F16, F16, 32, 0},
        {64, 4, 2, 2, {16, 3}, {150, 20}, 64, 5, "int8@token", "int8@token", "causal-br", B16, F32, 64, 1},
        {64, 2, 1, 1, {1}, {40}, 256, 64, "e4m3@token", "e4m3@token", "causal-br", F16, F32, 64, 0}, /* splits with no key */
        {128, 4, 1, 2, {2, 1}, {77, 300}, 16, 4, "int8@block:32,ch:1", "int8@token", "causal-br", B16, F32, 64, 1},
        {64, 4, 4, 1, {3}, {90}, 7, 2, "int4@token,ch:16", "e5m2@block:16,e8m0", "window:20,0", F32, F32, 16, 0},
        {128, 2, 1, 1, {1}, {260}, 16, 3, "e4m3@token", "int8@block:64", "none", B16, B16, 128, 0},
        {128, 16, 2, 1, {1}, {513}, 64, 0, "bf16", "bf16", "causal-br", B16, B16, 64, 0}, /* the rule */
        {128, 8, 1, 2, {4, 1}, {200, 33}, 16, 0, "int8@token", "int8@token", "causal-br", F16, F16, 64, 1},
        {64, 8, 1, 1, {5}, {64}, 16, 2, "fp32", "fp32", "causal", F32, F32, 64, 0}, /* top-left causal */
    };
    const size_t ncase = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < ncase; i++) {
        if (quick && i % 3)
            continue;
        char label[32];
        snprintf(label, sizeof label, "case %zu", i);
        run_case(&cases[i], 0, label); /* the dispatcher's choice */
#ifndef QATTN_TEST_SIM
        snprintf(label, sizeof label, "case %zu portable", i);
        run_case(&cases[i], 1u << QATTN_KERNELS_PATH_PORTABLE, label);
#endif
    }
    return check_done();
}
