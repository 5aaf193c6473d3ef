/* KV caches and split-KV decode: known answers by hand, the page map, paged
 * = contiguous bit for bit, split-KV against one pass within the stated
 * bound, quantized caches against qattn_qtensor, appends token by token =
 * at once, prefill + decode steps = one causal pass, bad inputs. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "qattn/kvcache.h"
#include "qattn/metrics.h"

static uint64_t rs = 20291;
static void fill(float *x, size_t n, double sd, double mean)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(mean + sd * check_gauss(&rs));
}

static size_t urand(size_t n)
{
    return (size_t)((check_gauss(&rs) + 10.0) * 1e6) % n;
}

static qattn_mask mask(const char *spec)
{
    qattn_mask m;
    qattn_err err;
    if (qattn_mask_parse(spec, &m, &err)) {
        fprintf(stderr, "bad mask in test: %s\n", spec);
        exit(2);
    }
    return m;
}

static qattn_operand operand(const char *fmt, const char *group)
{
    qattn_operand op = {QATTN_FMT_FP32, {0}};
    qattn_err err;
    if (qattn_fmt_parse(fmt, &op.fmt) || (group && qattn_group_parse(group, &op.group, &err))) {
        fprintf(stderr, "bad operand in test: %s@%s\n", fmt, group ? group : "");
        exit(2);
    }
    return op;
}

static qattn_kv_opts opts(const char *m, int splits)
{
    qattn_kv_opts o = {mask(m), 0.0, 0, splits};
    return o;
}

/* ---- a random varlen problem with contiguous K, V ---- */
typedef struct prob {
    size_t nseq, hq, hkv, d, tq, tk;
    int64_t sq[8], sk[8];
    float *q; /* [hq, tq, d] */
    float *k; /* [hkv, tk, d] */
    float *v; /* [hkv, tk, d] */
} prob;

static prob prob_make(size_t nseq, const int64_t *sq, const int64_t *sk, size_t hq, size_t hkv, size_t d)
{
    prob p = {nseq, hq, hkv, d, 0, 0, {0}, {0}, NULL, NULL, NULL};
    for (size_t s = 0; s < nseq; s++) {
        p.sq[s] = sq[s];
        p.sk[s] = sk[s];
        p.tq += (size_t)sq[s];
        p.tk += (size_t)sk[s];
    }
    p.q = malloc(hq * p.tq * d * 4);
    p.k = malloc(hkv * p.tk * d * 4);
    p.v = malloc(hkv * p.tk * d * 4);
    fill(p.q, hq * p.tq * d, 1.5, 0);
    fill(p.k, hkv * p.tk * d, 1, 0.2);
    fill(p.v, hkv * p.tk * d, 1, 0);
    return p;
}

static void prob_free(prob *p)
{
    free(p->q);
    free(p->k);
    free(p->v);
}

static qattn_kv_batch batch_of(const prob *p)
{
    qattn_kv_batch b = {p->nseq, p->hq, p->hkv, p->d, p->sq, p->sk, p->q, p->k, p->v, NULL};
    return b;
}

/* tokens [j0, j1) of sequence s of x [hkv, tk, d] in append layout [n, hkv, d] */
static void tokens_of(const prob *p, const float *x, size_t s, size_t j0, size_t j1, float *out)
{
    size_t koff = 0;
    for (size_t i = 0; i < s; i++)
        koff += (size_t)p->sk[i];
    for (size_t j = j0; j < j1; j++)
        for (size_t h = 0; h < p->hkv; h++)
            memcpy(out + ((j - j0) * p->hkv + h) * p->d, x + (h * p->tk + koff + j) * p->d, p->d * 4);
}

/* A cache of page size ps holding the problem's K, V, the pages of all
 * sequences shuffled over the pool; tokens appended in chunks of `chunk`
 * (0: one append per sequence). */
static void cache_make(qattn_kvcache *c, const prob *p, size_t ps, qattn_operand ko, qattn_operand vo, size_t chunk)
{
    size_t maxp = 0;
    for (size_t s = 0; s < p->nseq; s++) {
        size_t np = ((size_t)p->sk[s] + ps - 1) / ps;
        maxp = np > maxp ? np : maxp;
    }
    size_t npages = p->nseq * maxp + 3;
    int32_t *perm = malloc(npages * 4), *table = malloc(p->nseq * maxp * 4);
    for (size_t i = 0; i < npages; i++)
        perm[i] = (int32_t)i;
    for (size_t i = npages - 1; i > 0; i--) {
        size_t j = urand(i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < p->nseq * maxp; i++)
        table[i] = perm[i];
    qattn_kvcache_cfg cfg = {npages, ps, p->hkv, p->d, p->nseq, maxp, table, ko, vo};
    qattn_err err;
    CHECK(qattn_kvcache_init(c, &cfg, &err) == 0, "%s", err.msg);
    float *kt = malloc(p->tk * p->hkv * p->d * 4), *vt = malloc(p->tk * p->hkv * p->d * 4);
    for (size_t s = 0; s < p->nseq; s++) {
        size_t sk = (size_t)p->sk[s], step = chunk ? chunk : sk;
        for (size_t j = 0; j < sk; j += step) {
            size_t j1 = j + step < sk ? j + step : sk;
            tokens_of(p, p->k, s, j, j1, kt);
            tokens_of(p, p->v, s, j, j1, vt);
            CHECK(qattn_kvcache_append(c, s, kt, vt, j1 - j, &err) == 0, "%s", err.msg);
        }
    }
    free(kt);
    free(vt);
    free(perm);
    free(table);
}

static int same_floats(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void test_known(void)
{
    /* d = 2, scale 1, q = [1, 0]: logits q.k = [0, ln 3] -> p = [1, 3] / 4,
     * o = (v0 + 3 v1) / 4 = ([4, 0] + [24, 6]) / 4 = [7, 1.5], lse = ln 4.
     * Two splits of one key each: o_0 = v0, lse_0 = 0; o_1 = v1, lse_1 = ln 3;
     * combine: w = [1/3, 1], sum 4/3, o = ([4/3, 0] + [8, 2]) / (4/3) = [7, 1.5],
     * lse = ln 3 + ln(4/3) = ln 4. */
    float q[2] = {1, 0}, k[4] = {0, 0, (float)log(3.0), 0}, v[4] = {4, 0, 8, 2};
    int64_t sq[1] = {1}, sk[1] = {2};
    qattn_kv_batch b = {1, 1, 1, 2, sq, sk, q, k, v, NULL};
    qattn_err err;
    for (int ns = 1; ns <= 3; ns++) {
        qattn_kv_opts op = opts("none", ns);
        op.scale = 1.0;
        float o[2], lse, op_[6], lp[3];
        CHECK(qattn_kv_emu(&b, &op, o, &lse, op_, lp, &err) == 0, "%s", err.msg);
        CHECK_NEAR(o[0], 7.0, 4e-6);
        CHECK_NEAR(o[1], 1.5, 1e-6);
        CHECK_NEAR(lse, log(4.0), 1e-6);
        if (ns == 2) {
            CHECK(op_[0] == 4 && op_[1] == 0 && lp[0] == 0, "split 0 = key 0: o = v0, lse = 0");
            CHECK(op_[2] == 8 && op_[3] == 2, "split 1 = key 1: o = v1");
            CHECK_NEAR(lp[1], log(3.0), 1e-6);
        }
        if (ns == 3) /* keys [0, 0), [0, 1), [1, 2): the first split is empty */
            CHECK(isinf(lp[0]) && lp[0] < 0 && op_[0] == 0 && op_[1] == 0, "empty split: lse -inf, o 0");
    }
    double od[2], ld;
    CHECK(qattn_kv_ref(&b, &(qattn_mask){QATTN_MASK_NONE, 0, 0}, 1.0, od, &ld, &err) == 0, "%s", err.msg);
    /* (float) ln 3 is 3e-8 off: the float64 result is off by as much */
    CHECK_NEAR(od[0], 7.0, 1e-7);
    CHECK_NEAR(od[1], 1.5, 1e-7);
    CHECK_NEAR(ld, log(4.0), 1e-7);
    /* causal-br, sq = sk = 2, same keys: row 0 sees key 0 only (o = v0,
     * lse = 0); row 1 sees both (as above, with q1 = q0). With two splits,
     * split 1 is fully masked for row 0: lse -inf, o 0, weight 0. */
    float q2[4] = {1, 0, 1, 0};
    int64_t sq2[1] = {2};
    qattn_kv_batch b2 = {1, 1, 1, 2, sq2, sk, q2, k, v, NULL};
    qattn_kv_opts op = opts("causal-br", 2);
    op.scale = 1.0;
    float o2[4], l2[2], opart[8], lpart[4];
    CHECK(qattn_kv_emu(&b2, &op, o2, l2, opart, lpart, &err) == 0, "%s", err.msg);
    CHECK(o2[0] == 4 && o2[1] == 0 && l2[0] == 0, "row 0 = v0 exactly: %g %g %g", o2[0], o2[1], l2[0]);
    CHECK_NEAR(o2[2], 7.0, 4e-6);
    CHECK_NEAR(l2[1], log(4.0), 1e-6);
    /* o_part [2 splits, 1 head, 2 rows, 2]: split 1 of row 0 at (1 * 2 + 0) * 2 */
    CHECK(isinf(lpart[2]) && lpart[2] < 0 && opart[4] == 0 && opart[5] == 0, "masked split: -inf and 0");
    /* the combine by hand: lse [ln 2, -inf, 0] with a NaN o_s behind -inf
     * (never read): w = [1, 0, 1/2], o = (1 * 2 + 0.5 * 8) / 1.5 = 4,
     * lse = ln 2 + ln 1.5 = ln 3 */
    float parts[3] = {2, NAN, 8}, lses[3] = {(float)log(2.0), -INFINITY, 0}, oc, lc;
    qattn_kv_combine(parts, 1, lses, 1, 3, 1, &oc, &lc);
    CHECK_NEAR(oc, 4.0, 1e-6);
    CHECK_NEAR(lc, log(3.0), 1e-6);
    float none[2] = {-INFINITY, -INFINITY};
    qattn_kv_combine(parts, 1, none, 1, 2, 1, &oc, &lc);
    CHECK(oc == 0 && isinf(lc) && lc < 0, "no split with a key: o 0, lse -inf");
    /* split ranges: 10 keys in 4 parts start at 0, 2, 5, 7 */
    size_t a, e, starts[4] = {0, 2, 5, 7};
    for (size_t s = 0; s < 4; s++) {
        qattn_kv_split_range(10, 4, s, &a, &e);
        CHECK(a == starts[s] && e == (s < 3 ? starts[s + 1] : 10), "split %zu: %zu .. %zu", s, a, e);
    }
}

static void test_page_map(void)
{
    /* page size 3, sequence 0 on pages [5, 2, 7]: position 4 is row 1 of
     * page 2, position 7 row 1 of page 7; hkv 2, d 1, value = 10 pos + h */
    int32_t table[6] = {5, 2, 7, 0, 1, -1};
    qattn_kvcache_cfg cfg = {8, 3, 2, 1, 2, 3, table, operand("fp32", NULL), operand("fp32", NULL)};
    qattn_kvcache c;
    qattn_err err;
    CHECK(qattn_kvcache_init(&c, &cfg, &err) == 0, "%s", err.msg);
    float kx[18], vx[18];
    for (int i = 0; i < 9; i++)
        for (int h = 0; h < 2; h++) {
            kx[i * 2 + h] = (float)(10 * i + h);
            vx[i * 2 + h] = -(float)(10 * i + h);
        }
    for (int i = 0; i < 9; i++)
        CHECK(qattn_kvcache_append(&c, 0, kx + 2 * i, vx + 2 * i, 1, &err) == 0, "%s", err.msg);
    CHECK(c.val[0][(2 * 3 + 1) * 2 + 1] == 41.0f, "pos 4, head 1 in page 2 row 1");
    CHECK(c.val[0][(7 * 3 + 1) * 2 + 0] == 70.0f, "pos 7, head 0 in page 7 row 1");
    CHECK(c.val[1][(5 * 3 + 0) * 2 + 1] == -1.0f, "V pos 0, head 1 in page 5 row 0");
    float out[5];
    CHECK(qattn_kvcache_gather(&c, QATTN_KV_TENSOR_K, 0, 1, 2, 7, out, &err) == 0, "%s", err.msg);
    CHECK(out[0] == 21 && out[1] == 31 && out[2] == 41 && out[3] == 51 && out[4] == 61, "gather from mid-page");
    /* sequence 1 has two pages: position 6 has none */
    float six[2 * 7] = {0};
    CHECK(qattn_kvcache_append(&c, 1, six, six, 6, &err) == 0, "%s", err.msg);
    CHECK(qattn_kvcache_append(&c, 1, six, six, 1, &err) == QATTN_ERR_ARG, "no page for position 6");
    CHECK_STR_CONTAINS(err.msg, "position 6 has no page");
    CHECK(c.len[1] == 6, "nothing appended on error");
    CHECK(qattn_kvcache_append(&c, 0, kx, vx, 1, &err) == QATTN_ERR_RANGE, "beyond 3 pages of 3");
    CHECK_STR_CONTAINS(err.msg, "exceed");
    CHECK(qattn_kvcache_gather(&c, QATTN_KV_TENSOR_V, 1, 0, 0, 7, out, &err) == QATTN_ERR_RANGE, "beyond len");
    qattn_kvcache_free(&c);
}

static void test_bad_inputs(void)
{
    int32_t table[4] = {0, 1, 2, 3};
    qattn_kvcache_cfg cfg = {4, 0, 1, 4, 2, 2, table, operand("fp32", NULL), operand("fp32", NULL)};
    qattn_kvcache c;
    qattn_err err;
    CHECK(qattn_kvcache_init(&c, &cfg, &err) == QATTN_ERR_ARG, "page size 0");
    CHECK_STR_CONTAINS(err.msg, "page size 0 outside 1 .. 256");
    cfg.page_size = 257;
    CHECK(qattn_kvcache_init(&c, &cfg, &err) == QATTN_ERR_ARG, "page size 257");
    CHECK_STR_CONTAINS(err.msg, "page size 257");
    cfg.page_size = 256;
    table[3] = 4;
    CHECK(qattn_kvcache_init(&c, &cfg, &err) == QATTN_ERR_RANGE, "page id 4 of 4 pages");
    CHECK_STR_CONTAINS(err.msg, "sequence 1, entry 1: page id 4 out of range");
    table[3] = -2;
    CHECK(qattn_kvcache_init(&c, &cfg, &err) == QATTN_ERR_RANGE, "page id -2");
    table[3] = 3;
    cfg.k = operand("int8", "channel");
    CHECK(qattn_kvcache_init(&c, &cfg, &err) == QATTN_ERR_ARG, "per-channel over all tokens cannot grow");
    CHECK_STR_CONTAINS(err.msg, "'channel' cannot grow");
    cfg.k = operand("int8", "thread:32/8/1");
    CHECK(qattn_kvcache_init(&c, &cfg, &err) == QATTN_ERR_ARG, "thread groups");
    cfg.k = operand("e8m0", NULL);
    CHECK(qattn_kvcache_init(&c, &cfg, &err) == QATTN_ERR_ARG, "e8m0 elements");
    CHECK_STR_CONTAINS(err.msg, "e8m0 cannot hold");
    cfg.k = operand("int4", "block:4,ch:1");
    CHECK(qattn_kvcache_init(&c, &cfg, &err) == 0, "%s", err.msg);
    float x[8] = {1, 2, 3, NAN, 0, 0, 0, 0};
    CHECK(qattn_kvcache_append(&c, 0, x, x + 4, 1, &err) == QATTN_ERR_NAN, "NaN appended");
    CHECK_STR_CONTAINS(err.msg, "K token 0, head 0, channel 3 is NaN");
    CHECK(qattn_kvcache_append(&c, 2, x, x, 1, &err) == QATTN_ERR_ARG, "sequence 2 of 2");
    x[3] = 4;
    CHECK(qattn_kvcache_append(&c, 0, x, x + 4, 1, &err) == 0, "%s", err.msg);

    /* batches */
    float q[8] = {0}, kv[16] = {0}, o[8], l[2];
    int64_t sq[1] = {2}, sk[1] = {1};
    qattn_kv_batch b = {1, 1, 1, 4, sq, sk, q, kv, kv, NULL};
    qattn_kv_opts op = opts("causal-br", 1);
    CHECK(qattn_kv_emu(&b, &op, o, l, NULL, NULL, &err) == QATTN_ERR_ARG, "sk < sq with causal-br");
    CHECK_STR_CONTAINS(err.msg, "causal-br needs sk >= sq");
    double od[8];
    CHECK(qattn_kv_ref(&b, &op.mask, 0, od, NULL, &err) == QATTN_ERR_ARG, "reference too");
    op = opts("none", 1);
    CHECK(qattn_kv_emu(&b, &op, o, l, NULL, NULL, &err) == 0, "sk < sq without a mask: %s", err.msg);
    op.num_splits = 0;
    CHECK(qattn_kv_emu(&b, &op, o, l, NULL, NULL, &err) == QATTN_ERR_ARG, "num_splits 0");
    CHECK_STR_CONTAINS(err.msg, "num_splits = 0 outside 1 .. 1024");
    op.num_splits = 1025;
    CHECK(qattn_kv_emu(&b, &op, o, l, NULL, NULL, &err) == QATTN_ERR_ARG, "num_splits 1025");
    op.num_splits = 2;
    CHECK(qattn_kv_emu(&b, &op, o, l, o, NULL, &err) == QATTN_ERR_ARG, "o_part without lse_part");
    b.hq = 3;
    b.hkv = 2;
    CHECK(qattn_kv_emu(&b, &op, o, l, NULL, NULL, &err) == QATTN_ERR_ARG, "3 q heads on 2 kv heads");
    b.hq = b.hkv = 1;
    b.cache = &c;
    CHECK(qattn_kv_emu(&b, &op, o, l, NULL, NULL, &err) == QATTN_ERR_ARG, "K, V and a cache");
    b.k = b.v = NULL;
    sk[0] = 2;
    CHECK(qattn_kv_emu(&b, &op, o, l, NULL, NULL, &err) == QATTN_ERR_RANGE, "sk beyond the cache");
    CHECK_STR_CONTAINS(err.msg, "sk = 2, but the cache holds 1 tokens");
    sk[0] = 1;
    CHECK(qattn_kv_emu(&b, &op, o, l, NULL, NULL, &err) == 0, "%s", err.msg);
    qattn_kvcache_free(&c);
}

/* paged = contiguous, bit for bit, for page sizes 1, 3, 16, 256, splits
 * starting mid-page, GQA up to 16 q heads per kv head, and the reference */
static void test_paged(void)
{
    int64_t sq[4] = {1, 16, 5, 7}, sk[4] = {37, 100, 5, 300};
    size_t heads[3][2] = {{16, 1}, {8, 2}, {4, 4}};
    for (int hi = 0; hi < 3; hi++) {
        prob p = prob_make(4, sq, sk, heads[hi][0], heads[hi][1], 16);
        qattn_kv_batch bc = batch_of(&p);
        size_t no = p.hq * p.tq * p.d, nl = p.hq * p.tq;
        float *o0 = malloc(no * 4), *o1 = malloc(no * 4), *l0 = malloc(nl * 4), *l1 = malloc(nl * 4);
        double *r0 = malloc(no * 8), *r1 = malloc(no * 8);
        qattn_err err;
        size_t pss[4] = {1, 3, 16, 256};
        for (int pi = 0; pi < 4; pi++) {
            qattn_kvcache c;
            cache_make(&c, &p, pss[pi], operand("fp32", NULL), operand("fp32", NULL), pi == 1 ? 7 : 0);
            qattn_kv_batch bp = bc;
            bp.k = bp.v = NULL;
            bp.cache = &c;
            int splits[3] = {1, 3, 7}, same = 1;
            for (int si = 0; si < 3; si++) {
                qattn_kv_opts op = opts("causal-br", splits[si]);
                op.kblock = 32;
                CHECK(qattn_kv_emu(&bc, &op, o0, l0, NULL, NULL, &err) == 0, "%s", err.msg);
                CHECK(qattn_kv_emu(&bp, &op, o1, l1, NULL, NULL, &err) == 0, "%s", err.msg);
                same &= same_floats(o0, o1, no) && same_floats(l0, l1, nl);
            }
            CHECK(same, "paged (page size %zu) = contiguous, %zu/%zu heads", pss[pi], p.hq, p.hkv);
            qattn_mask m = mask("causal-br");
            CHECK(qattn_kv_ref(&bc, &m, 0, r0, NULL, &err) == 0, "%s", err.msg);
            CHECK(qattn_kv_ref(&bp, &m, 0, r1, NULL, &err) == 0, "%s", err.msg);
            CHECK(memcmp(r0, r1, no * 8) == 0, "paged reference = contiguous (page size %zu)", pss[pi]);
            qattn_kvcache_free(&c);
        }
        free(o0);
        free(o1);
        free(l0);
        free(l1);
        free(r0);
        free(r1);
        prob_free(&p);
    }
}

/* split-KV against one pass within qattn_kv_split_bound; fully masked and
 * empty splits: lse -inf, o 0, weight 0; one pass = qattn_emu_head of an
 * fp32 scheme; both near the float64 reference */
static void test_split(void)
{
    int64_t sq[5] = {1, 16, 4, 9, 3}, sk[5] = {1000, 40, 5, 64, 3};
    prob p = prob_make(5, sq, sk, 8, 2, 32);
    qattn_kv_batch b = batch_of(&p);
    size_t no = p.hq * p.tq * p.d, nl = p.hq * p.tq;
    float *o1 = malloc(no * 4), *os = malloc(no * 4), *l1 = malloc(nl * 4), *ls = malloc(nl * 4);
    float *opart = malloc(64 * no * 4), *lpart = malloc(64 * nl * 4), *oc = malloc(p.d * 4);
    double *r = malloc(no * 8), *lr = malloc(nl * 8);
    qattn_err err;
    const char *masks[3] = {"causal-br", "none", "window:20,0"};
    int nsplits[10] = {1, 2, 3, 5, 8, 13, 16, 33, 50, 64};
    for (int mi = 0; mi < 3; mi++) {
        qattn_kv_opts op = opts(masks[mi], 1);
        CHECK(qattn_kv_emu(&b, &op, o1, l1, NULL, NULL, &err) == 0, "%s", err.msg);
        CHECK(qattn_kv_ref(&b, &op.mask, 0, r, lr, &err) == 0, "%s", err.msg);
        double ref_err = 0, ref_lse = 0;
        for (size_t i = 0; i < no; i++)
            ref_err = fmax(ref_err, fabs(o1[i] - r[i]));
        for (size_t i = 0; i < nl; i++)
            ref_lse = fmax(ref_lse, fabs(l1[i] - lr[i]));
        CHECK(ref_err < 2e-5 && ref_lse < 2e-5, "one pass near float64 (%s): o %g, lse %g", masks[mi], ref_err,
              ref_lse);
        double worst = 0, worst_l = 0;
        size_t masked = 0, bad = 0, nan = 0, reweigh = 1;
        for (int si = 1; si < 10; si++) {
            int ns = nsplits[si];
            op.num_splits = ns;
            op.kblock = si % 2 ? 16 : 0;
            CHECK(qattn_kv_emu(&b, &op, os, ls, opart, lpart, &err) == 0, "%s", err.msg);
            size_t koff = 0, qoff = 0;
            for (size_t s = 0; s < p.nseq; s++) {
                size_t nq = (size_t)p.sq[s], nk = (size_t)p.sk[s];
                for (size_t h = 0; h < p.hq; h++) {
                    const float *v = p.v + ((h / (p.hq / p.hkv)) * p.tk + koff) * p.d;
                    for (size_t i = 0; i < nq; i++) {
                        size_t row = h * p.tq + qoff + i, lo, hi;
                        qattn_mask_range(&op.mask, i, nq, nk, &lo, &hi);
                        double bo, bl;
                        qattn_kv_split_bound(hi - lo, op.kblock, ns, l1[row], &bo, &bl);
                        for (size_t c = 0; c < p.d; c++) {
                            double vmax = 0;
                            for (size_t j = lo; j < hi; j++)
                                vmax = fmax(vmax, fabs(v[j * p.d + c]));
                            double dlt = fabs(os[row * p.d + c] - o1[row * p.d + c]);
                            nan += isnan(os[row * p.d + c]);
                            bad += dlt > bo * vmax;
                            worst = fmax(worst, dlt / (bo * vmax));
                        }
                        bad += fabs(ls[row] - l1[row]) > bl;
                        worst_l = fmax(worst_l, fabs(ls[row] - l1[row]) / bl);
                        /* splits without a visible key */
                        int rw = 0;
                        for (int sp = 0; sp < ns; sp++) {
                            size_t a, e;
                            qattn_kv_split_range(nk, (size_t)ns, (size_t)sp, &a, &e);
                            float lsp = lpart[(size_t)sp * nl + row];
                            const float *osp = opart + ((size_t)sp * nl + row) * p.d;
                            if ((a > lo ? a : lo) >= (e < hi ? e : hi)) {
                                masked++;
                                int zero = isinf(lsp) && lsp < 0;
                                for (size_t c = 0; c < p.d; c++)
                                    zero &= osp[c] == 0.0f && !signbit(osp[c]);
                                bad += !zero;
                            } else {
                                rw++;
                                bad += !isfinite(lsp);
                            }
                        }
                        /* weight 0: combining only the splits with keys gives the same bits */
                        if (rw < ns) {
                            float ob[32], lb, lsel[64];
                            float *osel = malloc((size_t)ns * p.d * 4);
                            int k = 0;
                            for (int sp = 0; sp < ns; sp++)
                                if (!isinf(lpart[(size_t)sp * nl + row])) {
                                    memcpy(osel + (size_t)k * p.d, opart + ((size_t)sp * nl + row) * p.d, p.d * 4);
                                    lsel[k++] = lpart[(size_t)sp * nl + row];
                                }
                            qattn_kv_combine(osel, p.d, lsel, 1, (size_t)k, p.d, ob, &lb);
                            reweigh &= same_floats(ob, os + row * p.d, p.d) && lb == ls[row];
                            free(osel);
                        }
                    }
                }
                koff += nk;
                qoff += nq;
            }
        }
        CHECK(bad == 0 && nan == 0, "split-KV within the bound, empty splits -inf / 0 (%s): %zu bad, %zu NaN",
              masks[mi], bad, nan);
        CHECK(masked > 0, "some splits see no key (%s)", masks[mi]);
        CHECK(reweigh, "splits without keys weigh exactly 0 (%s)", masks[mi]);
        printf("split-KV (%s): worst |o_split - o_one| = %.3g of the bound, lse %.3g; %zu splits without keys\n",
               masks[mi], worst, worst_l, masked);
        CHECK(worst > 0, "split-KV is not bit-equal to one pass (%s)", masks[mi]);
    }
    /* one pass = qattn_emu_head("q=fp32"), sequence by sequence (sk != sq) */
    qattn_scheme sch;
    CHECK(qattn_scheme_parse("q=fp32 kblock=64", &sch, &err) == 0, "%s", err.msg);
    qattn_kv_opts op = opts("causal-br", 1);
    CHECK(qattn_kv_emu(&b, &op, o1, l1, NULL, NULL, &err) == 0, "%s", err.msg);
    int same = 1;
    size_t koff = 0, qoff = 0;
    float *oe = malloc(16 * p.d * 4), le[16];
    for (size_t s = 0; s < p.nseq; s++) {
        for (size_t h = 0; h < p.hq; h++) {
            size_t kvh = h / (p.hq / p.hkv), nq = (size_t)p.sq[s];
            qattn_head hd = {p.q + (h * p.tq + qoff) * p.d, p.k + (kvh * p.tk + koff) * p.d,
                             p.v + (kvh * p.tk + koff) * p.d, nq, (size_t)p.sk[s], p.d, NULL, 0};
            CHECK(qattn_emu_head(&sch, &hd, &op.mask, 0, oe, le, &err) == 0, "%s", err.msg);
            same &= same_floats(oe, o1 + (h * p.tq + qoff) * p.d, nq * p.d) &&
                    same_floats(le, l1 + h * p.tq + qoff, nq);
        }
        koff += (size_t)p.sk[s];
        qoff += (size_t)p.sq[s];
    }
    CHECK(same, "one split = qattn_emu_head of q=fp32, bit for bit");
    free(oe);
    free(o1);
    free(os);
    free(l1);
    free(ls);
    free(opart);
    free(lpart);
    free(oc);
    free(r);
    free(lr);
    prob_free(&p);
}

/* quantized caches: appended token by token = at once = qattn_qtensor of
 * the closed groups (the open group in fp32); attention over the cache =
 * attention over the dequantized tensors */
static void test_quantized(void)
{
    struct {
        const char *kf, *kg, *vf, *vg;
        double min_cos;
    } cfgs[] = {
        {"int8", "block:8,ch:1", "int8", "token", 0.9995},        /* KIVI-style int8 */
        {"int4", "block:16,ch:1", "int4", "token", 0.97},         /* KIVI-style int4 */
        {"int4", "block:16", "int8", "block:4,ch:8,e8m0", 0.97},  /* per block */
        {"e4m3", "token,e8m0", "e4m3", "block:32,ch:1,e8m0", 0.998},
        {"e5m2", "token,ch:8", "int8", "block:3,ch:1", 0.99},
        {"fp16", NULL, "bf16", NULL, 0.99999},
    };
    int64_t sq[3] = {1, 6, 3}, sk[3] = {45, 70, 3};
    prob p = prob_make(3, sq, sk, 4, 2, 16);
    size_t no = p.hq * p.tq * p.d, nl = p.hq * p.tq;
    float *oq = malloc(no * 4), *od = malloc(no * 4), *lq = malloc(nl * 4), *ld = malloc(nl * 4);
    float *kdq = malloc(p.hkv * p.tk * p.d * 4), *vdq = malloc(p.hkv * p.tk * p.d * 4);
    float *raw = malloc(100 * p.d * 4), *got = malloc(100 * p.d * 4);
    double *r = malloc(no * 8);
    qattn_err err;
    for (size_t ci = 0; ci < sizeof cfgs / sizeof *cfgs; ci++) {
        qattn_operand ko = operand(cfgs[ci].kf, cfgs[ci].kg), vo = operand(cfgs[ci].vf, cfgs[ci].vg);
        qattn_kvcache a, b1, c3;
        rs = 777; /* the same page tables for a and b1 */
        cache_make(&a, &p, 5, ko, vo, 1);
        rs = 777;
        cache_make(&b1, &p, 5, ko, vo, 0);
        cache_make(&c3, &p, 3, ko, vo, 4);
        size_t pool = a.cfg.num_pages * 5 * p.hkv * p.d;
        int same = same_floats(a.val[0], b1.val[0], pool) && same_floats(a.val[1], b1.val[1], pool);
        for (int t = 0; t < 2; t++)
            if (a.scale[t])
                same &= same_floats(a.scale[t], b1.scale[t], p.nseq * p.hkv * a.ntok[t] * a.nch[t]);
        CHECK(same, "%s/%s: token by token = at once (codes and scales)", cfgs[ci].kf, cfgs[ci].vf);
        /* against qattn_qtensor of each (sequence, kv head) */
        int match = 1, closed_ok = 1;
        size_t koff = 0;
        for (size_t s = 0; s < p.nseq; s++) {
            size_t nk = (size_t)p.sk[s];
            for (int t = 0; t < 2; t++) {
                const qattn_operand *op = t ? &vo : &ko;
                const float *x = t ? p.v : p.k;
                size_t g = !qattn_fmt_is_scaled(op->fmt) ? 1 : op->group.tok == QATTN_TOK_TOKEN ? 1 : (size_t)op->group.b;
                size_t closed = nk / g * g;
                closed_ok &= a.closed[t][s] == closed && c3.closed[t][s] == closed;
                for (size_t h = 0; h < p.hkv; h++) {
                    memcpy(raw, x + (h * p.tk + koff) * p.d, nk * p.d * 4);
                    qattn_qtensor qt;
                    CHECK(qattn_qtensor_init(&qt, op->fmt, &op->group, raw, closed, p.d, &err) == 0, "%s", err.msg);
                    for (int which = 0; which < 2; which++) {
                        CHECK(qattn_kvcache_gather(which ? &c3 : &a, (qattn_kv_tensor)t, s, h, 0, nk, got, &err) == 0,
                              "%s", err.msg);
                        for (size_t j = 0; j < nk; j++)
                            for (size_t c = 0; c < p.d; c++) {
                                float want = j < closed ? qattn_qtensor_at(&qt, j, c) : raw[j * p.d + c];
                                match &= got[j * p.d + c] == want;
                            }
                    }
                    /* the dequantized tensors, contiguous, for the attention below */
                    float *dst = (t ? vdq : kdq) + (h * p.tk + koff) * p.d;
                    memcpy(dst, got, nk * p.d * 4);
                    qattn_qtensor_free(&qt);
                }
            }
            koff += nk;
        }
        CHECK(closed_ok, "%s/%s: groups close when full", cfgs[ci].kf, cfgs[ci].vf);
        CHECK(match, "%s/%s: cache = qtensor of the closed groups + fp32 residual (pages 5 and 3)", cfgs[ci].kf,
              cfgs[ci].vf);
        /* attention over the quantized cache = over the dequantized tensors */
        qattn_kv_batch bq = batch_of(&p), bd = batch_of(&p);
        bq.k = bq.v = NULL;
        bq.cache = &c3;
        bd.k = kdq;
        bd.v = vdq;
        qattn_kv_opts op = opts("causal-br", 4);
        CHECK(qattn_kv_emu(&bq, &op, oq, lq, NULL, NULL, &err) == 0, "%s", err.msg);
        CHECK(qattn_kv_emu(&bd, &op, od, ld, NULL, NULL, &err) == 0, "%s", err.msg);
        CHECK(same_floats(oq, od, no) && same_floats(lq, ld, nl), "%s/%s: dequantized on load", cfgs[ci].kf,
              cfgs[ci].vf);
        /* and near the float64 reference on the unquantized tensors */
        qattn_kv_batch bf = batch_of(&p);
        CHECK(qattn_kv_ref(&bf, &op.mask, 0, r, NULL, &err) == 0, "%s", err.msg);
        qattn_metrics mt;
        qattn_metrics_compute(oq, r, p.tq * p.hq, p.d, &mt);
        CHECK(mt.cos > cfgs[ci].min_cos, "%s/%s: cos %.7f", cfgs[ci].kf, cfgs[ci].vf, mt.cos);
        qattn_kvcache_free(&a);
        qattn_kvcache_free(&b1);
        qattn_kvcache_free(&c3);
    }
    free(oq);
    free(od);
    free(lq);
    free(ld);
    free(kdq);
    free(vdq);
    free(raw);
    free(got);
    free(r);
    prob_free(&p);
}

/* a serving loop: a chunk of prefill, then decode token by token, each
 * step appending to the cache and attending with sq = the new tokens and
 * sk = the cache; every row equals the same row of one causal pass over
 * the whole sequences (an unscaled cache does not change once written) */
static void test_serving(void)
{
    int64_t n[2] = {40, 23}, pre[2] = {12, 7};
    prob p = prob_make(2, n, n, 8, 2, 16);
    size_t no = p.hq * p.tq * p.d, nl = p.hq * p.tq;
    float *of = malloc(no * 4), *lf = malloc(nl * 4);
    float *qs = malloc(16 * p.hq * p.d * 4), *kt = malloc(16 * p.hkv * p.d * 4), *vt = malloc(16 * p.hkv * p.d * 4);
    qattn_err err;
    const char *fmts[2] = {"fp32", "fp16"};
    for (int fi = 0; fi < 2; fi++) {
        /* the whole sequences, rounded as the cache stores them */
        prob r = p;
        r.k = malloc(p.hkv * p.tk * p.d * 4);
        r.v = malloc(p.hkv * p.tk * p.d * 4);
        qattn_fmt f = operand(fmts[fi], NULL).fmt;
        for (size_t i = 0; i < p.hkv * p.tk * p.d; i++) {
            r.k[i] = qattn_fmt_round(f, p.k[i]);
            r.v[i] = qattn_fmt_round(f, p.v[i]);
        }
        qattn_kv_batch bf = batch_of(&r);
        /* one split: split boundaries move with sk */
        qattn_kv_opts op = opts("causal-br", 1);
        CHECK(qattn_kv_emu(&bf, &op, of, lf, NULL, NULL, &err) == 0, "%s", err.msg);
        int32_t table[2 * 8];
        for (int i = 0; i < 16; i++)
            table[i] = (int32_t)((i * 5) % 16);
        qattn_kvcache_cfg cfg = {16, 5, p.hkv, p.d, 2, 8, table, operand(fmts[fi], NULL), operand(fmts[fi], NULL)};
        qattn_kvcache c;
        CHECK(qattn_kvcache_init(&c, &cfg, &err) == 0, "%s", err.msg);
        int same = 1, steps = 0;
        size_t qoff = 0;
        for (size_t s = 0; s < 2; s++) {
            for (size_t j = 0; j < (size_t)n[s];) {
                size_t m = j == 0 ? (size_t)pre[s] : 1;
                tokens_of(&p, p.k, s, j, j + m, kt);
                tokens_of(&p, p.v, s, j, j + m, vt);
                CHECK(qattn_kvcache_append(&c, s, kt, vt, m, &err) == 0, "%s", err.msg);
                for (size_t h = 0; h < p.hq; h++)
                    memcpy(qs + h * m * p.d, p.q + (h * p.tq + qoff + j) * p.d, m * p.d * 4);
                /* sequence s alone: batch of the cache's sequences 0 .. s with
                 * only s's rows (earlier ones given one row each, ignored) */
                int64_t sqb[2] = {1, 1}, skb[2] = {1, 1};
                sqb[s] = (int64_t)m;
                skb[s] = (int64_t)(j + m);
                float *qb = malloc(p.hq * (m + 1) * p.d * 4), *ob = malloc(p.hq * (m + 1) * p.d * 4), lb[17 * 8];
                size_t tq = m + s, off = s; /* sequence 0's dummy row first when s = 1 */
                for (size_t h = 0; h < p.hq; h++) {
                    memset(qb + h * tq * p.d, 0, off * p.d * 4);
                    memcpy(qb + (h * tq + off) * p.d, qs + h * m * p.d, m * p.d * 4);
                }
                qattn_kv_batch bc = {s + 1, p.hq, p.hkv, p.d, sqb, skb, qb, NULL, NULL, &c};
                CHECK(qattn_kv_emu(&bc, &op, ob, lb, NULL, NULL, &err) == 0, "%s", err.msg);
                for (size_t h = 0; h < p.hq; h++) {
                    same &= same_floats(ob + (h * tq + off) * p.d, of + (h * p.tq + qoff + j) * p.d, m * p.d);
                    same &= same_floats(lb + h * tq + off, lf + h * p.tq + qoff + j, m);
                }
                free(qb);
                free(ob);
                j += m;
                steps++;
            }
            qoff += (size_t)n[s];
        }
        CHECK(same, "%s cache: %d prefill and decode steps = one causal pass", fmts[fi], steps);
        qattn_kvcache_free(&c);
        free(r.k);
        free(r.v);
    }
    free(of);
    free(lf);
    free(qs);
    free(kt);
    free(vt);
    prob_free(&p);
}

int main(void)
{
    test_known();
    test_page_map();
    test_bad_inputs();
    test_paged();
    test_split();
    test_quantized();
    test_serving();
    return check_done();
}
