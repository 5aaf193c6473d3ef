/* Sparse attention (qattn/sparse.h). The float64 reference: a hand-computed
 * case with and without a sink, dense lists against qattn_ref_mha, list
 * order and padding, the sink against its closed form, empty lists, GQA, and
 * every bad input's message. The emulation: a dense list bit for bit
 * qattn_emu_mha's, e4m3 per-64 storage with sinks near float64, empty rows,
 * the schemes it refuses. A paged prefix + extend equal to the contiguous
 * layout, both ways, and its bad inputs. rope=R, the bf16 part of the head; qk=fp22, the fp8
 * tensor core's Q.K per channel group. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "qattn/attn.h"
#include "qattn/scheme.h"
#include "qattn/sparse.h"

static void fill(float *x, size_t n, uint64_t *st)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)check_gauss(st);
}

static void test_hand(void)
{
    /* d = 1, scale 1: q = 1, keys 1, 5, 0 with values 2, 7, 4; the list {0, 2} scores 1 and 0 */
    const float q[1] = {1.0f}, k[3] = {1.0f, 5.0f, 0.0f}, v[3] = {2.0f, 7.0f, 4.0f};
    const int32_t idx[3] = {0, -1, 2};
    qattn_sparse a = {q, k, v, 1, 1, 1, 3, 1, idx, 3, NULL, NULL, 0, 0, 0, NULL, NULL, NULL};
    double o, lse;
    qattn_err err;
    const double e = exp(1.0);
    CHECK(qattn_ref_sparse(&a, 1.0, &o, &lse, &err) == 0, "%s", err.msg);
    CHECK_NEAR(o, (2.0 * e + 4.0) / (e + 1.0), 1e-15);
    CHECK_NEAR(lse, log(e + 1.0), 1e-15);
    const float sink = 0.0f; /* one more exp(0) in the denominator */
    a.sink = &sink;
    CHECK(qattn_ref_sparse(&a, 1.0, &o, &lse, &err) == 0, "%s", err.msg);
    CHECK_NEAR(o, (2.0 * e + 4.0) / (e + 2.0), 1e-15);
    CHECK_NEAR(lse, log(e + 2.0), 1e-15);
    const int32_t len = 1; /* only key 0 counts */
    a.len = &len, a.sink = NULL;
    CHECK(qattn_ref_sparse(&a, 1.0, &o, &lse, &err) == 0, "%s", err.msg);
    CHECK_NEAR(o, 2.0, 1e-15);
    CHECK_NEAR(lse, 1.0, 1e-15);
}

/* random heads: hq = 4 reading hkv = 2, sq = 9 rows, sk = 23 keys, d = 16 */
enum { HQ = 4, HKV = 2, SQ = 9, SK = 23, D = 16 };

static void test_dense_equals_reference(void)
{
    uint64_t st = 7;
    static float q[HQ * SQ * D], k[HKV * SK * D], v[HKV * SK * D];
    fill(q, HQ * SQ * D, &st), fill(k, HKV * SK * D, &st), fill(v, HKV * SK * D, &st);
    static int32_t idx[SQ * (SK + 3)], perm[SQ * (SK + 3)];
    for (int i = 0; i < SQ; i++) {
        for (int t = 0; t < SK + 3; t++)
            idx[i * (SK + 3) + t] = t < SK ? t : -1;
        /* the same keys reversed, the padding first */
        for (int t = 0; t < SK + 3; t++)
            perm[i * (SK + 3) + t] = t < 3 ? -1 : SK + 2 - t;
    }
    qattn_sparse a = {q, k, v, HQ, HKV, SQ, SK, D, idx, SK + 3, NULL, NULL, 0, 0, 0, NULL, NULL, NULL};
    static double o[HQ * SQ * D], lse[HQ * SQ], o2[HQ * SQ * D], lse2[HQ * SQ];
    qattn_err err;
    CHECK(qattn_ref_sparse(&a, 0.0, o, lse, &err) == 0, "%s", err.msg);
    qattn_mha m = {q, k, v, HQ, HKV, SQ, SK, D, NULL, 0};
    qattn_mask none = {QATTN_MASK_NONE, 0, 0};
    CHECK(qattn_ref_mha(&m, &none, 0.0, o2, lse2, &err) == 0, "%s", err.msg);
    double worst = 0.0, worst_lse = 0.0;
    for (int i = 0; i < HQ * SQ * D; i++)
        worst = fmax(worst, fabs(o[i] - o2[i]));
    for (int i = 0; i < HQ * SQ; i++)
        worst_lse = fmax(worst_lse, fabs(lse[i] - lse2[i]));
    CHECK(worst <= 1e-12, "dense list vs qattn_ref_mha: max |do| %.3g", worst);
    CHECK(worst_lse <= 1e-12, "dense list vs qattn_ref_mha: max |dlse| %.3g", worst_lse);
    a.idx = perm;
    CHECK(qattn_ref_sparse(&a, 0.0, o2, lse2, &err) == 0, "%s", err.msg);
    worst = 0.0;
    for (int i = 0; i < HQ * SQ * D; i++)
        worst = fmax(worst, fabs(o[i] - o2[i]));
    CHECK(worst <= 1e-12, "reversed list with padding first: max |do| %.3g", worst);

    /* the sink's closed form: o' = o e^lse / (e^lse + e^s), lse' = ln(e^lse + e^s) */
    const float sink[HQ] = {-1.0f, 0.5f, 2.0f, 30.0f};
    a.idx = idx, a.sink = sink;
    CHECK(qattn_ref_sparse(&a, 0.0, o2, lse2, &err) == 0, "%s", err.msg);
    worst = worst_lse = 0.0;
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < SQ; i++) {
            const double l = lse[h * SQ + i], s = sink[h], mx = fmax(l, s);
            const double den = exp(l - mx) + exp(s - mx), w = exp(l - mx) / den;
            worst_lse = fmax(worst_lse, fabs(lse2[h * SQ + i] - (mx + log(den))));
            for (int c = 0; c < D; c++)
                worst = fmax(worst, fabs(o2[(h * SQ + i) * D + c] - w * o[(h * SQ + i) * D + c]));
        }
    CHECK(worst <= 1e-12, "sink vs its closed form: max |do| %.3g", worst);
    CHECK(worst_lse <= 1e-12, "sink vs its closed form: max |dlse| %.3g", worst_lse);

    /* GQA: heads 0 and 1 read kv head 0, so equal queries give equal rows */
    static float q2[HQ * SQ * D];
    for (int i = 0; i < HQ * SQ * D; i++)
        q2[i] = q[i % (SQ * D)];
    a.q = q2, a.sink = NULL;
    CHECK(qattn_ref_sparse(&a, 0.0, o2, NULL, &err) == 0, "%s", err.msg);
    CHECK(memcmp(o2, o2 + SQ * D, SQ * D * sizeof(double)) == 0, "heads 0 and 1 share kv head 0");
    CHECK(memcmp(o2, o2 + 2 * SQ * D, SQ * D * sizeof(double)) != 0, "head 2 reads kv head 1");
}

static void test_empty_lists(void)
{
    const float q[2] = {1.0f, 2.0f}, k[2] = {3.0f, 4.0f};
    const int32_t idx[2] = {-1, -1};
    qattn_sparse a = {q, k, k, 1, 1, 1, 1, 2, idx, 2, NULL, NULL, 0, 0, 0, NULL, NULL, NULL};
    double o[2] = {5.0, 5.0}, lse = 0.0;
    qattn_err err;
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == 0, "%s", err.msg);
    CHECK(o[0] == 0.0 && o[1] == 0.0 && lse == -INFINITY, "empty list: o %g %g lse %g", o[0], o[1], lse);
    const float sink = 1.5f;
    a.sink = &sink;
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == 0, "%s", err.msg);
    CHECK(o[0] == 0.0 && o[1] == 0.0 && lse == 1.5, "empty list with a sink: o %g %g lse %g", o[0], o[1], lse);
}

static void test_bad_input(void)
{
    float q[2] = {1.0f, 2.0f}, k[4] = {3.0f, 4.0f, 5.0f, 6.0f}, sink = NAN;
    int32_t idx[2] = {0, 2}, len = 3;
    double o[2], lse;
    qattn_err err;
    qattn_sparse a = {q, k, k, 1, 1, 1, 2, 2, idx, 2, NULL, NULL, 0, 0, 0, NULL, NULL, NULL};
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == QATTN_ERR_RANGE, "index 2 of 2 keys");
    CHECK_STR_CONTAINS(err.msg, "row 0, entry 1: key 2 is outside -1..1");
    idx[1] = -2;
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == QATTN_ERR_RANGE, "index -2");
    CHECK_STR_CONTAINS(err.msg, "key -2 is outside");
    idx[1] = 1;
    a.len = &len;
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == QATTN_ERR_RANGE, "length 3 of 2");
    CHECK_STR_CONTAINS(err.msg, "list length 3 is outside 0..2");
    a.len = NULL, a.sink = &sink;
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == QATTN_ERR_NAN, "NaN sink");
    CHECK_STR_CONTAINS(err.msg, "sink has a non-finite value");
    a.sink = NULL, q[1] = INFINITY;
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == QATTN_ERR_NAN, "Inf in q");
    CHECK_STR_CONTAINS(err.msg, "q has a non-finite value (inf) at element 1");
    q[1] = 2.0f, a.hq = 3, a.hkv = 2;
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == QATTN_ERR_ARG, "3 heads over 2");
    CHECK_STR_CONTAINS(err.msg, "3 query heads is not a multiple of 2 kv heads");
    a.hq = a.hkv = 1, a.idx = NULL;
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == QATTN_ERR_ARG, "no lists");
    CHECK_STR_CONTAINS(err.msg, "index lists are required");
    a.idx = idx, a.topk = 0;
    CHECK(qattn_ref_sparse(&a, 0.0, o, &lse, &err) == QATTN_ERR_ARG, "topk 0");
    CHECK_STR_CONTAINS(err.msg, "empty shape");
    a.topk = 2;
    CHECK(qattn_ref_sparse(&a, 0.0, NULL, &lse, &err) == QATTN_ERR_ARG, "no output");
    CHECK_STR_CONTAINS(err.msg, "no output buffer");
}

/* the emulation: a dense list equals qattn_emu_mha bit for bit (per-token groups: the same
 * rows, scales and key blocks); the sink within the scheme's error of the reference's; empty
 * lists; the schemes it refuses */
static void test_emulation(void)
{
    enum { H = 4, G = 2, N = 150, DD = 64 };
    uint64_t st = 11;
    float *q = malloc(H * N * DD * sizeof *q), *k = malloc(G * N * DD * sizeof *k), *v = malloc(G * N * DD * sizeof *v);
    float *o = malloc(H * N * DD * sizeof *o), *o2 = malloc(H * N * DD * sizeof *o2);
    double *od = malloc(H * N * DD * sizeof *od);
    int32_t *idx = malloc(N * N * sizeof *idx);
    float lse[H * N], lse2[H * N];
    double lsed[H * N];
    fill(q, H * N * DD, &st), fill(k, G * N * DD, &st), fill(v, G * N * DD, &st);
    for (int i = 0; i < N; i++)
        for (int t = 0; t < N; t++)
            idx[i * N + t] = t;
    qattn_scheme sch;
    qattn_err err;
    const char *spec = "q=int8@token k=int8@token p=e4m3@static v=e4m3@token smooth=none acc=fp22+fp32:128 "
                       "kblock=128 out=bf16";
    CHECK(qattn_scheme_parse(spec, &sch, &err) == 0, "%s", err.msg);
    qattn_sparse a = {q, k, v, H, G, N, N, DD, idx, N, NULL, NULL, 0, 0, 0, NULL, NULL, NULL};
    CHECK(qattn_emu_sparse(&sch, &a, 0.0, o, lse, &err) == 0, "%s", err.msg);
    qattn_mha m = {q, k, v, H, G, N, N, DD, NULL, 0};
    qattn_mask none = {QATTN_MASK_NONE, 0, 0};
    CHECK(qattn_emu_mha(&sch, &m, &none, 0.0, o2, lse2, &err) == 0, "%s", err.msg);
    CHECK(memcmp(o, o2, H * N * DD * sizeof *o) == 0, "dense list: o differs from qattn_emu_mha");
    CHECK(memcmp(lse, lse2, sizeof lse) == 0, "dense list: lse differs from qattn_emu_mha");

    /* the DeepSeek-V4-like storage (e4m3, an e8m0 scale per 64 channels and token) with sinks and
     * ragged lists, against float64 */
    for (int i = 0; i < N; i++)
        for (int t = 0; t < N; t++)
            idx[i * N + t] = t <= i ? (int32_t)((i * 37 + t * 11) % N) : -1;
    const float sink[H] = {-2.0f, 0.0f, 1.0f, 3.0f};
    a.sink = sink;
    CHECK(qattn_scheme_parse("q=e4m3@token,ch:64,e8m0 k=e4m3@token,ch:64,e8m0 p=bf16 v=e4m3@token,ch:64,e8m0 "
                             "smooth=none acc=fp32 kblock=64 out=bf16",
                             &sch, &err) == 0,
          "%s", err.msg);
    CHECK(qattn_emu_sparse(&sch, &a, 0.0, o, lse, &err) == 0, "%s", err.msg);
    CHECK(qattn_ref_sparse(&a, 0.0, od, lsed, &err) == 0, "%s", err.msg);
    double num = 0.0, den_e = 0.0, den_r = 0.0, dl = 0.0;
    for (int i = 0; i < H * N * DD; i++)
        num += o[i] * od[i], den_e += (double)o[i] * o[i], den_r += od[i] * od[i];
    for (int i = 0; i < H * N; i++)
        dl = fmax(dl, fabs(lse[i] - lsed[i]));
    const double cosv = num / sqrt(den_e * den_r);
    CHECK(cosv > 0.999 && cosv < 1.0, "e4m3 per-64 storage with sinks: cos %.7f against float64", cosv);
    CHECK(dl < 0.15, "e4m3 per-64 storage with sinks: max |dlse| %.3g (e4m3 scores: about 0.05 here)", dl);
    /* row 0 of every head lists one key: o = that key's V times its weight against the sink */
    a.sink = NULL;
    for (int t = 1; t < N; t++)
        idx[t] = -1;
    for (int t = 0; t < N; t++)
        idx[N + t] = -1; /* row 1: nothing */
    CHECK(qattn_emu_sparse(&sch, &a, 0.0, o, lse, &err) == 0, "%s", err.msg);
    CHECK(o[DD] == 0.0f && lse[1] == -INFINITY, "empty row: o %g lse %g", o[DD], lse[1]);
    a.sink = sink;
    CHECK(qattn_emu_sparse(&sch, &a, 0.0, o, lse, &err) == 0, "%s", err.msg);
    CHECK(o[DD] == 0.0f && lse[1] == -2.0f && lse[3 * N + 1] == 3.0f, "empty row with a sink: lse %g, %g", lse[1],
          lse[3 * N + 1]);

    /* schemes it refuses */
    CHECK(qattn_scheme_parse("sage2-8b-sm90", &sch, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_sparse(&sch, &a, 0.0, o, lse, &err) == QATTN_ERR_ARG, "smooth=k over lists");
    CHECK_STR_CONTAINS(err.msg, "smoothing is not defined over per-query key lists");
    sch.smooth = 0;
    CHECK(qattn_emu_sparse(&sch, &a, 0.0, o, lse, &err) == QATTN_ERR_ARG, "thread groups over lists");
    CHECK_STR_CONTAINS(err.msg, "need per-token scale groups");
    free(q), free(k), free(v), free(o), free(o2), free(od), free(idx);
}

/* a paged prefix + extend layout reads the same rows as the contiguous one: reference and
 * emulation bit for bit; its bad inputs */
static void test_paged(void)
{
    enum { H = 4, G = 2, N = 150, DD = 64, PAGE = 16, PREFIX = 100, NPOOL = 9 };
    uint64_t st = 23;
    float *q = malloc(H * N * DD * sizeof *q), *k = malloc(G * N * DD * sizeof *k), *v = malloc(G * N * DD * sizeof *v);
    float *kp = malloc(G * NPOOL * PAGE * DD * sizeof *kp), *vp = malloc(G * NPOOL * PAGE * DD * sizeof *vp);
    float *ke = malloc(G * (N - PREFIX) * DD * sizeof *ke), *ve = malloc(G * (N - PREFIX) * DD * sizeof *ve);
    float *o = malloc(H * N * DD * sizeof *o), *o2 = malloc(H * N * DD * sizeof *o2);
    double *od = malloc(H * N * DD * sizeof *od), *od2 = malloc(H * N * DD * sizeof *od2);
    int32_t *idx = malloc(N * 64 * sizeof *idx), table[(PREFIX + PAGE - 1) / PAGE];
    float lse[H * N], lse2[H * N], sink[H] = {0.5f, -1.0f, 2.0f, 0.0f};
    fill(q, H * N * DD, &st), fill(k, G * N * DD, &st), fill(v, G * N * DD, &st);
    fill(kp, G * NPOOL * PAGE * DD, &st), fill(vp, G * NPOOL * PAGE * DD, &st); /* unmapped rows stay noise */
    for (int x = 0; x < (PREFIX + PAGE - 1) / PAGE; x++)
        table[x] = (x * 4 + 3) % NPOOL;
    for (int g = 0; g < G; g++)
        for (int p = 0; p < N; p++) {
            float *kd = p < PREFIX ? kp + ((size_t)g * NPOOL * PAGE + (size_t)table[p / PAGE] * PAGE + p % PAGE) * DD
                                   : ke + ((size_t)g * (N - PREFIX) + p - PREFIX) * DD;
            float *vd = p < PREFIX ? vp + ((size_t)g * NPOOL * PAGE + (size_t)table[p / PAGE] * PAGE + p % PAGE) * DD
                                   : ve + ((size_t)g * (N - PREFIX) + p - PREFIX) * DD;
            memcpy(kd, k + ((size_t)g * N + p) * DD, DD * sizeof *kd);
            memcpy(vd, v + ((size_t)g * N + p) * DD, DD * sizeof *vd);
        }
    for (int i = 0; i < N; i++) /* 64 entries a row, crossing pages and the prefix's end */
        for (int t = 0; t < 64; t++)
            idx[i * 64 + t] = t % 9 == 8 ? -1 : (int32_t)((i * 7 + t * 13) % N);
    qattn_scheme sch;
    qattn_err err;
    CHECK(qattn_scheme_parse("q=e4m3@token,ch:64,e8m0 k=e4m3@token,ch:64,e8m0 p=bf16 v=e4m3@token,ch:64,e8m0 "
                             "smooth=none acc=fp32 kblock=64 out=bf16",
                             &sch, &err) == 0,
          "%s", err.msg);
    qattn_sparse flat = {q, k, v, H, G, N, N, DD, idx, 64, NULL, sink, 0, 0, 0, NULL, NULL, NULL};
    qattn_sparse paged = {q, kp, vp, H, G, N, N, DD, idx, 64, NULL, sink, PAGE, PREFIX, NPOOL, table, ke, ve};
    CHECK(qattn_ref_sparse(&flat, 0.0, od, NULL, &err) == 0, "%s", err.msg);
    CHECK(qattn_ref_sparse(&paged, 0.0, od2, NULL, &err) == 0, "%s", err.msg);
    CHECK(memcmp(od, od2, H * N * DD * sizeof *od) == 0, "paged reference differs from the contiguous one");
    CHECK(qattn_emu_sparse(&sch, &flat, 0.0, o, lse, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_sparse(&sch, &paged, 0.0, o2, lse2, &err) == 0, "%s", err.msg);
    CHECK(memcmp(o, o2, H * N * DD * sizeof *o) == 0 && memcmp(lse, lse2, sizeof lse) == 0,
          "paged emulation differs from the contiguous one");

    table[2] = NPOOL;
    CHECK(qattn_ref_sparse(&paged, 0.0, od2, NULL, &err) == QATTN_ERR_RANGE, "pool page 9 of 9");
    CHECK_STR_CONTAINS(err.msg, "page 2 maps to pool page 9 of 9");
    table[2] = 1, paged.page = 300;
    CHECK(qattn_ref_sparse(&paged, 0.0, od2, NULL, &err) == QATTN_ERR_RANGE, "pages of 300");
    CHECK_STR_CONTAINS(err.msg, "pages of 300 tokens");
    paged.page = PAGE, paged.prefix = N + 1;
    CHECK(qattn_ref_sparse(&paged, 0.0, od2, NULL, &err) == QATTN_ERR_RANGE, "prefix past the end");
    CHECK_STR_CONTAINS(err.msg, "a prefix of 151 of 150 positions");
    paged.prefix = PREFIX, paged.v_ext = NULL;
    CHECK(qattn_emu_sparse(&sch, &paged, 0.0, o2, NULL, &err) == QATTN_ERR_ARG, "no v_ext");
    CHECK_STR_CONTAINS(err.msg, "positions 100..149 need k_ext and v_ext");
    paged.v_ext = ve, ke[5] = NAN;
    CHECK(qattn_ref_sparse(&paged, 0.0, od2, NULL, &err) == QATTN_ERR_NAN, "NaN in k_ext");
    CHECK_STR_CONTAINS(err.msg, "k_ext has a non-finite value");
    free(q), free(k), free(v), free(kp), free(vp), free(ke), free(ve), free(o), free(o2), free(od), free(od2);
    free(idx);
}

/* rope=R (the head's last R channels in bf16, outside the formats): no change where everything is
 * bf16 already; with the other channels zero, the bf16 scheme's result bit for bit; closer to
 * float64 than e4m3 on every channel; rope >= d refused */
static void test_rope(void)
{
    enum { H = 2, N = 96, DD = 128, R = 64 };
    uint64_t st = 31;
    float *q = malloc(H * N * DD * sizeof *q), *k = malloc(H * N * DD * sizeof *k), *v = malloc(H * N * DD * sizeof *v);
    float *o = malloc(H * N * DD * sizeof *o), *o2 = malloc(H * N * DD * sizeof *o2);
    double *od = malloc(H * N * DD * sizeof *od);
    fill(q, H * N * DD, &st), fill(k, H * N * DD, &st), fill(v, H * N * DD, &st);
    qattn_mha m = {q, k, v, H, H, N, N, DD, NULL, 0};
    qattn_mask causal = {QATTN_MASK_CAUSAL, 0, 0};
    qattn_scheme s1, s2;
    qattn_err err;
    const char *bf = "q=bf16 k=bf16 p=bf16 v=bf16 smooth=none acc=fp32 kblock=64 out=bf16";
    char spec[256];
    snprintf(spec, sizeof spec, "%s rope=%d", bf, R);
    CHECK(qattn_scheme_parse(bf, &s1, &err) == 0 && qattn_scheme_parse(spec, &s2, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s1, &m, &causal, 0.0, o, NULL, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s2, &m, &causal, 0.0, o2, NULL, &err) == 0, "%s", err.msg);
    CHECK(memcmp(o, o2, H * N * DD * sizeof *o) == 0, "bf16 everywhere: rope=%d changed the result", R);

    const char *fp8 = "q=e4m3@token,ch:64,e8m0 k=e4m3@token,ch:64,e8m0 p=bf16 v=e4m3@token,ch:64,e8m0 smooth=none "
                      "acc=fp32 kblock=64 out=bf16";
    snprintf(spec, sizeof spec, "%s rope=%d", fp8, R);
    CHECK(qattn_scheme_parse(spec, &s2, &err) == 0, "%s", err.msg);
    double e_rope = 0.0, e_all = 0.0;
    CHECK(qattn_ref_mha(&m, &causal, 0.0, od, NULL, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s2, &m, &causal, 0.0, o2, NULL, &err) == 0, "%s", err.msg);
    for (int i = 0; i < H * N * DD; i++)
        e_rope += fabs(o2[i] - od[i]);
    CHECK(qattn_scheme_parse(fp8, &s1, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s1, &m, &causal, 0.0, o, NULL, &err) == 0, "%s", err.msg);
    for (int i = 0; i < H * N * DD; i++)
        e_all += fabs(o[i] - od[i]);
    CHECK(e_rope < 0.9 * e_all, "bf16 rope part: L1 error %.4g, all e4m3 %.4g", e_rope, e_all);

    /* the other channels zero: only the bf16 part is left, as in the bf16 scheme */
    for (int r = 0; r < H * N; r++)
        for (int c = 0; c < DD - R; c++)
            q[r * DD + c] = k[r * DD + c] = v[r * DD + c] = 0.0f;
    CHECK(qattn_scheme_parse(bf, &s1, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s1, &m, &causal, 0.0, o, NULL, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s2, &m, &causal, 0.0, o2, NULL, &err) == 0, "%s", err.msg);
    CHECK(memcmp(o, o2, H * N * DD * sizeof *o) == 0, "zero e4m3 part: not the bf16 scheme's result");

    snprintf(spec, sizeof spec, "%s rope=%d", fp8, DD);
    CHECK(qattn_scheme_parse(spec, &s2, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s2, &m, &causal, 0.0, o2, NULL, &err) == QATTN_ERR_ARG, "rope = d");
    CHECK_STR_CONTAINS(err.msg, "rope=128 needs a head dim above it (d = 128)");
    free(q), free(k), free(v), free(o), free(o2), free(od);
}

/* qk=fp22 (e4m3 Q.K as the fp8 tensor core sums it, per 64-channel group, then the rope part): where
 * every sum is exact (codes of small integers, power-of-two group scales differing by group) the
 * qk=exact result bit for bit; on Gaussian inputs within the tensor core's truncation of it; refused
 * without e4m3 Q and K or with unequal channel groups */
static void test_qk_fp22(void)
{
    enum { H = 2, N = 80, DD = 320, R = 64 }; /* 4 groups of 64 and the rope part */
    uint64_t st = 47;
    float *q = malloc(H * N * DD * sizeof *q), *k = malloc(H * N * DD * sizeof *k), *v = malloc(H * N * DD * sizeof *v);
    float *o = malloc(H * N * DD * sizeof *o), *o2 = malloc(H * N * DD * sizeof *o2);
    float lse[H * N], lse2[H * N];
    fill(v, H * N * DD, &st);
    for (int r = 0; r < H * N; r++)
        for (int c = 0; c < DD; c++) {
            /* integers -8..8 (one of them 8: each group's amax), times 2^(group % 3); rope channels small */
            const float unit = c < DD - R ? (float)(1 << ((c / 64) % 3)) : 0.125f;
            const int iq = c % 64 == 5 ? 8 : (int)floor(check_gauss(&st) * 3.0) % 8;
            const int ik = c % 64 == 9 ? -8 : (int)floor(check_gauss(&st) * 3.0) % 8;
            q[r * DD + c] = (float)iq * unit, k[r * DD + c] = (float)ik * unit * 0.25f;
        }
    qattn_mha m = {q, k, v, H, H, N, N, DD, NULL, 0};
    qattn_mask causal = {QATTN_MASK_CAUSAL, 0, 0};
    const char *fp8 = "q=e4m3@token,ch:64,e8m0 k=e4m3@token,ch:64,e8m0 p=bf16 v=e4m3@token,ch:64,e8m0 smooth=none "
                      "acc=fp32 kblock=64 rope=64 out=bf16";
    char spec[256];
    snprintf(spec, sizeof spec, "%s qk=fp22", fp8);
    qattn_scheme s1, s2;
    qattn_err err;
    CHECK(qattn_scheme_parse(fp8, &s1, &err) == 0 && qattn_scheme_parse(spec, &s2, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s1, &m, &causal, 0.0, o, lse, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s2, &m, &causal, 0.0, o2, lse2, &err) == 0, "%s", err.msg);
    CHECK(memcmp(o, o2, H * N * DD * sizeof *o) == 0 && memcmp(lse, lse2, sizeof lse) == 0,
          "qk=fp22 on exact sums: not the exact Q.K's result");

    fill(q, H * N * DD, &st), fill(k, H * N * DD, &st);
    for (int i = 0; i < H * N * DD; i++)
        q[i] *= 2.0f;
    CHECK(qattn_emu_mha(&s1, &m, &causal, 0.0, o, lse, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s2, &m, &causal, 0.0, o2, lse2, &err) == 0, "%s", err.msg);
    double dl = 0.0, dox = 0.0, omax = 0.0;
    for (int i = 0; i < H * N; i++)
        dl = fmax(dl, fabs((double)lse[i] - lse2[i]));
    for (int i = 0; i < H * N * DD; i++)
        dox = fmax(dox, fabs((double)o[i] - o2[i])), omax = fmax(omax, fabs((double)o[i]));
    CHECK(dl > 0.0 && dl < 2e-3, "Gaussian inputs: |dLSE| %.3g (the tensor core truncates, by at most ~1e-3)", dl);
    CHECK(dox < 1e-2 * omax, "Gaussian inputs: max |dO| %.3g of max |O| %.3g", dox, omax);

    snprintf(spec, sizeof spec, "%s qk=fp22", "q=int8@token k=int8@token p=bf16 v=bf16 smooth=none acc=fp32 kblock=64");
    CHECK(qattn_scheme_parse(spec, &s2, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_mha(&s2, &m, &causal, 0.0, o2, NULL, &err) == QATTN_ERR_ARG, "qk=fp22 with int8");
    CHECK_STR_CONTAINS(err.msg, "qk=fp22 is the fp8 tensor core's Q.K: it needs e4m3 Q and K");
    CHECK(qattn_scheme_parse("q=e4m3@token,ch:64 k=e4m3@token,ch:32 p=bf16 v=bf16 qk=fp22", &s2, &err) == 0, "%s",
          err.msg);
    CHECK(qattn_emu_mha(&s2, &m, &causal, 0.0, o2, NULL, &err) == QATTN_ERR_ARG, "unequal channel groups");
    CHECK_STR_CONTAINS(err.msg, "qk=fp22: Q's and K's channel groups must be equal (ch:64, ch:32)");
    free(q), free(k), free(v), free(o), free(o2);
}

int main(void)
{
    test_hand();
    test_dense_equals_reference();
    test_empty_lists();
    test_bad_input();
    test_emulation();
    test_paged();
    test_rope();
    test_qk_fp22();
    return check_done();
}
