/* Attention: masks, smoothing, group quantization, the float64 reference
 * and the emulation. Known answers are derived in the comments; property
 * tests run on random inputs. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "qattn/attn.h"
#include "qattn/metrics.h"

static uint64_t rs = 12345;
static void fill(float *x, size_t n, double sd, double mean)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(mean + sd * check_gauss(&rs));
}

static qattn_scheme scheme(const char *spec)
{
    qattn_scheme s;
    qattn_err err;
    if (qattn_scheme_parse(spec, &s, &err)) {
        fprintf(stderr, "bad scheme in test: %s: %s\n", spec, err.msg);
        exit(2);
    }
    return s;
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

/* naive float64 attention, straight from the definition */
static void naive(const float *q, const float *k, const float *v, size_t sq, size_t sk, size_t d, const qattn_mask *m,
                  double scale, double *o, double *lse)
{
    for (size_t i = 0; i < sq; i++) {
        double mx = -INFINITY, l = 0;
        for (size_t j = 0; j < sk; j++)
            if (qattn_mask_allows(m, i, j, sq, sk)) {
                double s = 0;
                for (size_t c = 0; c < d; c++)
                    s += (double)q[i * d + c] * k[j * d + c];
                mx = fmax(mx, s * scale);
            }
        for (size_t c = 0; c < d; c++)
            o[i * d + c] = 0;
        if (mx == -INFINITY) {
            lse[i] = -INFINITY;
            continue;
        }
        for (size_t j = 0; j < sk; j++)
            if (qattn_mask_allows(m, i, j, sq, sk)) {
                double s = 0;
                for (size_t c = 0; c < d; c++)
                    s += (double)q[i * d + c] * k[j * d + c];
                double p = exp(s * scale - mx);
                l += p;
                for (size_t c = 0; c < d; c++)
                    o[i * d + c] += p * v[j * d + c];
            }
        for (size_t c = 0; c < d; c++)
            o[i * d + c] /= l;
        lse[i] = mx + log(l);
    }
}

static double max_rel(const double *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return den > 0 ? num / den : num;
}

static double emu_vs_ref(const char *spec, const qattn_head *h, const char *maskspec, qattn_metrics *mt)
{
    size_t n = h->sq * h->d;
    double *r = malloc(n * sizeof *r), *of = malloc(n * sizeof *of);
    float *o = malloc(n * sizeof *o);
    qattn_mask m = mask(maskspec);
    qattn_scheme s = scheme(spec);
    qattn_err err;
    CHECK(qattn_ref_head(h, &m, 0, r, NULL, &err) == 0, "%s", err.msg);
    CHECK(qattn_emu_head(&s, h, &m, 0, o, NULL, &err) == 0, "%s: %s", spec, err.msg);
    for (size_t i = 0; i < n; i++)
        of[i] = o[i];
    double e = max_rel(of, r, n);
    if (mt)
        qattn_metrics_compute(o, r, h->sq, h->d, mt);
    free(r);
    free(of);
    free(o);
    return e;
}

static void test_masks(void)
{
    qattn_mask m;
    qattn_err err;
    size_t lo, hi;
    m = mask("causal");
    qattn_mask_range(&m, 0, 2, 4, &lo, &hi);
    CHECK(lo == 0 && hi == 1, "causal row 0 of 2x4 sees key 0 only");
    m = mask("causal-br");
    qattn_mask_range(&m, 0, 2, 4, &lo, &hi);
    CHECK(lo == 0 && hi == 3, "causal-br row 0 of 2x4 sees keys 0..2");
    qattn_mask_range(&m, 0, 3, 1, &lo, &hi);
    CHECK(lo >= hi, "causal-br row 0 of 3x1 sees nothing");
    m = mask("window:2,1");
    qattn_mask_range(&m, 5, 10, 10, &lo, &hi);
    CHECK(lo == 3 && hi == 7, "window:2,1 row 5 sees 3..6, got %zu..%zu", lo, hi);
    qattn_mask_range(&m, 0, 10, 10, &lo, &hi);
    CHECK(lo == 0 && hi == 2, "window clipped at 0");
    char buf[32];
    CHECK(!strcmp(qattn_mask_format(&m, buf, sizeof buf), "window:2,1"), "format");
    CHECK(qattn_mask_parse("window:2", &m, &err) == QATTN_ERR_ARG, "window needs L,R");
    CHECK(qattn_mask_parse("diagonal", &m, &err) == QATTN_ERR_ARG, "unknown mask");
    CHECK_STR_CONTAINS(err.msg, "diagonal");
    /* a message quoting its input stays one line (found by fuzz_parsers) */
    CHECK(qattn_mask_parse("causal\nx\r\ty", &m, &err) == QATTN_ERR_ARG, "mask with a newline");
    CHECK_STR_CONTAINS(err.msg, "'causal?x??y'");
}

static void test_smooth_and_qtensor(void)
{
    /* means by hand: columns of [[1, 2], [3, 6]] -> [2, 4] */
    float x[4] = {1, 2, 3, 6}, mean[2], y[4];
    qattn_smooth_mean(x, 2, 2, mean);
    CHECK(mean[0] == 2.0f && mean[1] == 4.0f, "channel means");
    qattn_smooth_sub(x, 2, 2, mean, y);
    CHECK(y[0] == -1 && y[1] == -2 && y[2] == 1 && y[3] == 2, "subtracted");
    /* blocks of 1 row: every row becomes 0, means are the rows */
    float mb[4];
    qattn_smooth_blocks(x, 2, 2, 1, mb, y);
    CHECK(mb[2] == 3 && mb[3] == 6 && y[2] == 0 && y[3] == 0, "block means");

    /* int8 per token, by hand: row 0 amax 254 -> scale 254/127 = 2; codes
     * 1/2 = 0.5 -> 0 (ties to even), -2/2 = -1, 0.5/2 = 0.25 -> 0, 254/2 = 127.
     * Row 1 is all zero: scale 0 and codes 0 (never divide by it). */
    float a[8] = {1, -2, 0.5f, 254, 0, 0, 0, 0};
    qattn_group g;
    qattn_err err;
    qattn_qtensor t;
    qattn_group_parse("token", &g, &err);
    CHECK(qattn_qtensor_init(&t, QATTN_FMT_INT8, &g, a, 2, 4, &err) == 0, "%s", err.msg);
    CHECK(t.scale[0] == 2.0f && t.scale[1] == 0.0f, "scales 2 and 0");
    CHECK(t.val[0] == 0 && t.val[1] == -1 && t.val[2] == 0 && t.val[3] == 127, "codes %g %g %g %g", t.val[0],
          t.val[1], t.val[2], t.val[3]);
    CHECK(t.val[4] == 0 && t.val[7] == 0, "zero group encodes to 0");
    CHECK(qattn_qtensor_at(&t, 0, 3) == 254.0f && qattn_qtensor_at(&t, 0, 1) == -2.0f, "dequantized");
    qattn_qtensor_free(&t);
    /* e4m3 per tensor: amax 448 -> scale 1; 1.1 lies between 1 and 1.125
     * (spacing 1/8 in [1, 2)) and is nearer 1.125 */
    float b[2] = {448, 1.1f};
    qattn_group_parse("tensor", &g, &err);
    CHECK(qattn_qtensor_init(&t, QATTN_FMT_E4M3, &g, b, 1, 2, &err) == 0, "%s", err.msg);
    CHECK(t.scale[0] == 1.0f && t.val[0] == 448 && t.val[1] == 1.125f, "e4m3 codes %g %g", t.val[0], t.val[1]);
    qattn_qtensor_free(&t);
    /* NaN is an error naming the element */
    float c[2] = {1, NAN};
    CHECK(qattn_qtensor_init(&t, QATTN_FMT_INT8, &g, c, 1, 2, &err) == QATTN_ERR_NAN, "NaN rejected");
    CHECK_STR_CONTAINS(err.msg, "[0, 1]");
    qattn_qtensor_free(&t);
}

static void test_reference_known(void)
{
    /* d = 1, scale 1: logits [0, ln 3] -> P = [1, 3] / 4, O = (4 + 3 * 8) / 4 = 7,
     * LSE = ln 4 */
    float q[1] = {1}, k[2] = {0, (float)log(3.0)}, v[2] = {4, 8};
    qattn_head h = {q, k, v, 1, 2, 1, NULL, 0};
    qattn_mask m = mask("none");
    double o[1], lse[1];
    qattn_err err;
    CHECK(qattn_ref_head(&h, &m, 1.0, o, lse, &err) == 0, "%s", err.msg);
    CHECK_NEAR(o[0], 7.0, 1e-6);
    CHECK_NEAR(lse[0], log(4.0), 1e-6);
    /* causal-br with 3 queries, 1 key: rows 0 and 1 are fully masked
     * (O = 0, LSE = -inf); row 2 sees key 0 only (O = v0 = 4, LSE = q.k = 0) */
    float q3[3] = {1, 2, 3};
    qattn_head h3 = {q3, k, v, 3, 1, 1, NULL, 0};
    m = mask("causal-br");
    double o3[3], l3[3];
    CHECK(qattn_ref_head(&h3, &m, 1.0, o3, l3, &err) == 0, "%s", err.msg);
    CHECK(o3[0] == 0 && o3[1] == 0 && isinf(l3[0]) && l3[0] < 0, "fully masked rows");
    CHECK(o3[2] == 4.0 && l3[2] == 0.0, "row 2 = v0");
    /* emulation agrees on the masked rows */
    float oe[3], le[3];
    qattn_scheme s = scheme("sage2-8b");
    CHECK(qattn_emu_head(&s, &h3, &m, 1.0, oe, le, &err) == 0, "%s", err.msg);
    CHECK(oe[0] == 0 && oe[1] == 0 && isinf(le[1]) && le[1] < 0, "emulation: fully masked rows");
}

static void test_reference_property(void)
{
    const char *masks[] = {"none", "causal", "causal-br", "window:5,3"};
    for (int mi = 0; mi < 4; mi++) {
        size_t sq = 37, sk = mi == 2 ? 53 : 37, d = 16;
        float *q = malloc(sq * d * 4), *k = malloc(sk * d * 4), *v = malloc(sk * d * 4);
        double *o = malloc(sq * d * 8), *o2 = malloc(sq * d * 8), l[64], l2[64];
        fill(q, sq * d, 1, 0);
        fill(k, sk * d, 1, 0.3);
        fill(v, sk * d, 1, 0);
        qattn_mask m = mask(masks[mi]);
        qattn_head h = {q, k, v, sq, sk, d, NULL, 0};
        qattn_err err;
        CHECK(qattn_ref_head(&h, &m, 0, o, l, &err) == 0, "%s", err.msg);
        naive(q, k, v, sq, sk, d, &m, 1 / sqrt((double)d), o2, l2);
        CHECK(max_rel(o, o2, sq * d) < 1e-12, "reference = naive (%s): %g", masks[mi], max_rel(o, o2, sq * d));
        CHECK(max_rel(l, l2, sq) < 1e-12, "LSE (%s)", masks[mi]);
        free(q);
        free(k);
        free(v);
        free(o);
        free(o2);
    }
    /* GQA: 4 query heads on 2 kv heads; packed sequences [5, 11] with causal
     * masks inside each, checked head by head and sequence by sequence */
    size_t hq = 4, hkv = 2, n = 16, d = 8;
    int64_t seqlens[2] = {5, 11};
    float *q = malloc(hq * n * d * 4), *k = malloc(hkv * n * d * 4), *v = malloc(hkv * n * d * 4);
    double *o = malloc(hq * n * d * 8), o2[16 * 8], l2[16];
    fill(q, hq * n * d, 1, 0);
    fill(k, hkv * n * d, 1, 0);
    fill(v, hkv * n * d, 1, 0);
    qattn_mha a = {q, k, v, hq, hkv, n, n, d, seqlens, 2};
    qattn_mask m = mask("causal");
    qattn_err err;
    CHECK(qattn_ref_mha(&a, &m, 0, o, NULL, &err) == 0, "%s", err.msg);
    double worst = 0;
    for (size_t h = 0; h < hq; h++) {
        size_t kvh = h / 2, off = 0;
        for (int sgi = 0; sgi < 2; sgi++) {
            size_t len = (size_t)seqlens[sgi];
            naive(q + (h * n + off) * d, k + (kvh * n + off) * d, v + (kvh * n + off) * d, len, len, d, &m,
                  1 / sqrt((double)d), o2, l2);
            worst = fmax(worst, max_rel(o + (h * n + off) * d, o2, len * d));
            off += len;
        }
    }
    CHECK(worst < 1e-12, "GQA + packed sequences = naive per head and sequence (%g)", worst);
    qattn_head hv;
    CHECK(qattn_mha_head(&a, 3, &hv, &err) == 0 && hv.k == k + 1 * n * d, "q head 3 reads kv head 1");
    int64_t badlens[2] = {5, 10};
    a.seqlens = badlens;
    CHECK(qattn_ref_mha(&a, &m, 0, o, NULL, &err) == QATTN_ERR_ARG, "seqlens must sum to n");
    CHECK_STR_CONTAINS(err.msg, "sum to 15");
    a.seqlens = seqlens;
    a.hkv = 3;
    CHECK(qattn_ref_mha(&a, &m, 0, o, NULL, &err) == QATTN_ERR_ARG, "4 heads on 3 kv heads");
    qattn_head h0 = {q, k, v, n, n, 0, NULL, 0};
    CHECK(qattn_ref_head(&h0, &m, 0, o, NULL, &err) == QATTN_ERR_ARG, "d = 0");
    CHECK_STR_CONTAINS(err.msg, "head dim is 0");
    free(q);
    free(k);
    free(v);
    free(o);
}

/* row statistics of float64 attention against the naive softmax per row */
static void test_reference_rows(void)
{
    /* known: d = 1, logits [0, ln 3]: P = [1/4, 3/4] */
    float q[1] = {1}, k[2] = {0, (float)log(3.0)}, v[2] = {0, 0};
    qattn_head h = {q, k, v, 1, 2, 1, NULL, 0};
    qattn_mask m = mask("none");
    double ent[40], pmax[40], tail[40];
    size_t nk[40];
    qattn_ref_rows rows = {ent, pmax, tail, nk, 0.5};
    qattn_err err;
    CHECK(qattn_ref_head_rows(&h, &m, 1.0, &rows, &err) == 0, "%s", err.msg);
    CHECK_NEAR(ent[0], -(0.25 * log(0.25) + 0.75 * log(0.75)), 1e-7);
    CHECK_NEAR(pmax[0], 0.75, 1e-7);
    CHECK_NEAR(tail[0], 0.25, 1e-7); /* 1/4 < 0.5 x 3/4 */
    CHECK(nk[0] == 2, "2 keys");
    /* equal scores: ln n and 1 / n; causal-br rows that see nothing: zeros */
    float qz[4] = {0, 0, 0, 0}, kz[3] = {1, 2, 3};
    qattn_head hz = {qz, kz, kz, 4, 3, 1, NULL, 0};
    m = mask("causal-br");
    CHECK(qattn_ref_head_rows(&hz, &m, 1.0, &rows, &err) == 0, "%s", err.msg);
    CHECK(ent[0] == 0 && pmax[0] == 0 && tail[0] == 0 && nk[0] == 0, "fully masked row: zeros");
    for (size_t i = 1; i < 4; i++) {
        CHECK(nk[i] == i, "row %zu sees %zu keys", i, nk[i]);
        CHECK_NEAR(ent[i], log((double)i), 1e-12);
        CHECK_NEAR(pmax[i], 1.0 / (double)i, 1e-12);
        CHECK(tail[i] == 0, "no tail");
    }
    /* random rows, packed sequences [13, 27] with causal masks: the naive
     * softmax of every row */
    size_t n = 40, d = 8;
    int64_t seqlens[2] = {13, 27};
    float *qr = malloc(n * d * 4), *kr = malloc(n * d * 4);
    fill(qr, n * d, 2, 0);
    fill(kr, n * d, 2, 0.3);
    qattn_head hr = {qr, kr, kr, n, n, d, seqlens, 2};
    m = mask("causal");
    rows.tail_frac = 1.0 / 254;
    CHECK(qattn_ref_head_rows(&hr, &m, 0, &rows, &err) == 0, "%s", err.msg);
    double worst = 0;
    for (size_t i = 0, off = 0, sgi = 0; i < n; i++) {
        if (i == off + (size_t)seqlens[sgi])
            off += (size_t)seqlens[sgi++];
        double sc[40], mx = -INFINITY, l = 0, e = 0, pm = 0, tl = 0;
        for (size_t j = off; j <= i; j++) {
            sc[j] = 0;
            for (size_t c = 0; c < d; c++)
                sc[j] += (double)qr[i * d + c] * kr[j * d + c];
            sc[j] /= sqrt((double)d);
            mx = fmax(mx, sc[j]);
        }
        for (size_t j = off; j <= i; j++)
            l += exp(sc[j] - mx);
        for (size_t j = off; j <= i; j++) {
            double p = exp(sc[j] - mx) / l;
            e -= p * log(p);
            pm = fmax(pm, p);
        }
        for (size_t j = off; j <= i; j++)
            tl += exp(sc[j] - mx) / l < pm / 254 ? exp(sc[j] - mx) / l : 0;
        CHECK(nk[i] == i - off + 1, "row %zu: %zu keys", i, nk[i]);
        worst = fmax(worst, fmax(fabs(ent[i] - e), fmax(fabs(pmax[i] - pm), fabs(tail[i] - tl))));
    }
    CHECK(worst < 1e-12, "rows = naive softmax per row (%g)", worst);
    rows.entropy = rows.pmax = rows.tail = NULL;
    rows.nkeys = NULL;
    CHECK(qattn_ref_head_rows(&hr, &m, 0, &rows, &err) == 0, "no outputs asked for");
    free(qr);
    free(kr);
}

static void emu_one(const char *spec, const float *q, const float *k, const float *v, size_t sk, size_t d,
                    double scale, float *o)
{
    qattn_head h = {q, k, v, 1, sk, d, NULL, 0};
    qattn_mask m = mask("none");
    qattn_scheme s = scheme(spec);
    qattn_err err;
    CHECK(qattn_emu_head(&s, &h, &m, scale, o, NULL, &err) == 0, "%s: %s", spec, err.msg);
}

static void test_emulation_known(void)
{
    /* 1. int8 per-tensor Q and K. q = [100, 1.3]: scale 100/127, codes
     * [127, round(1.3 * 127 / 100 = 1.651) = 2], so the kernel sees
     * q^ = [100, 200/127]. k = identity rows: scale 1/127, codes 127.
     * Logits 0.01 * q^.k_j = [1, 2/127]; r = exp(2/127 - 1);
     * O = [1, r] / (1 + r) with v = identity. Unquantized q would give
     * r' = exp(0.013 - 1), different in the 4th digit. */
    {
        float q[2] = {100, 1.3f}, k[4] = {1, 0, 0, 1}, v[4] = {1, 0, 0, 1}, o[2];
        emu_one("q=int8@tensor k=int8@tensor p=fp32 v=fp32 acc=fp32 out=fp32", q, k, v, 2, 2, 0.01, o);
        double r = exp(0.01 * (200.0 / 127.0) - 1.0), rx = exp(0.013 - 1.0);
        CHECK_NEAR(o[0], 1 / (1 + r), 2e-6);
        CHECK_NEAR(o[1], r / (1 + r), 2e-6);
        CHECK(fabs(o[1] - rx / (1 + rx)) > 1e-4, "quantization of q is visible (%g vs %g)", o[1], rx / (1 + rx));
    }
    /* 2. P in e4m3 with the static scale 1/448. d = 1, scale 1, logits
     * [0, ln 0.3] -> P = [1, 0.3], l = 1.3. Stored: 448 * 1 = 448 (exact),
     * 448 * 0.3 = 134.4 -> 128 (e4m3 spacing is 16 in [128, 256)).
     * v = [0, 1] per-channel e4m3: scale 1/448, codes [0, 448].
     * O = 128 * 448 / 1.3 / 448 * (1/448) = 128 / (1.3 * 448) = 0.21978,
     * where exact attention gives 0.3 / 1.3 = 0.23077. */
    {
        float q[1] = {1}, k[2] = {0, (float)log(0.3)}, v[2] = {0, 1}, o[1];
        emu_one("q=fp32 k=fp32 p=e4m3@static v=e4m3@channel acc=fp32 out=fp32", q, k, v, 2, 1, 1.0, o);
        CHECK_NEAR(o[0], 128.0 / (1.3 * 448.0), 1e-6);
        /* e5m2 static: 57344 * 0.3 = 17203.2 -> 16384 (spacing 4096 in
         * [16384, 32768)) */
        emu_one("q=fp32 k=fp32 p=e5m2@static v=fp32 acc=fp32 out=fp32", q, k, v, 2, 1, 1.0, o);
        CHECK_NEAR(o[0], 16384.0 / 57344.0 / 1.3, 1e-6);
        /* int8 static: 127 * 0.3 = 38.1 -> 38 */
        emu_one("q=fp32 k=fp32 p=int8@static v=fp32 acc=fp32 out=fp32", q, k, v, 2, 1, 1.0, o);
        CHECK_NEAR(o[0], 38.0 / 127.0 / 1.3, 1e-6);
    }
    /* 3. fp22 accumulator. q = 0: all logits 0, P = [1, 1], l = 2.
     * v = [1, 2^-14]. fp32: O = 1 + 2^-14 -> 0.500030517578125.
     * fp22 keeps 13 mantissa bits: 1 + 2^-14 is cut to 1 -> 0.5 exactly.
     * fp22+fp32:1 flushes every key into fp32 -> exact again. */
    {
        float q[1] = {0}, k[2] = {1, 1}, v[2] = {1, 0x1p-14f}, o[1];
        emu_one("acc=fp32", q, k, v, 2, 1, 1.0, o);
        CHECK(o[0] == 0.500030517578125f, "fp32: %.17g", o[0]);
        emu_one("acc=fp22", q, k, v, 2, 1, 1.0, o);
        CHECK(o[0] == 0.5f, "fp22 cuts 1 + 2^-14 to 1: %.17g", o[0]);
        emu_one("acc=fp22+fp32:1", q, k, v, 2, 1, 1.0, o);
        CHECK(o[0] == 0.500030517578125f, "two-level restores it: %.17g", o[0]);
        emu_one("acc=fp22+fp32:2", q, k, v, 2, 1, 1.0, o);
        CHECK(o[0] == 0.5f, "a chunk of 2 keys still cuts: %.17g", o[0]);
        /* 3b. fp22 on e4m3 P and V codes: the fp8 tensor core's 32-key k-step (qattn_num_fp8_ksteps).
         * P = [1, 1, 1] stored as 448 (static scale); v = [448, 0.140625, 0.140625] per-channel e4m3
         * (scale 1, codes exact). Products 200704 (exponents 8 + 8: E = 16, unit 2^3) and 63 (8 - 3),
         * each truncated to a multiple of 8: 200704 + 56 + 56 = 200816, cut to 13 bits (unit 16 in
         * [2^17, 2^18)): 200816. A cut after every key keeps 200752, then 200800. Two-level with
         * chunks of 2: the first step ends at key 2 (200760, cut to 200752), key 3 alone (E = 5) adds 63
         * exactly: 200815. O = sum / l / 448 with l = 3. */
        float q3b[1] = {0}, k3b[3] = {1, 1, 1}, v3b[3] = {448.0f, 0.140625f, 0.140625f};
        const char *f8 = "q=fp32 k=fp32 p=e4m3@static v=e4m3@channel acc=fp22 out=fp32";
        emu_one(f8, q3b, k3b, v3b, 3, 1, 1.0, o);
        CHECK(o[0] == 200816.0f / 3.0f / 448.0f, "fp8 k-step: %.17g, want %.17g (a cut a key: %.17g)", o[0],
              200816.0f / 3.0f / 448.0f, 200800.0f / 3.0f / 448.0f);
        emu_one("q=fp32 k=fp32 p=e4m3@static v=e4m3@channel acc=fp22+fp32:2 out=fp32", q3b, k3b, v3b, 3, 1, 1.0, o);
        CHECK(o[0] == 200815.0f / 3.0f / 448.0f, "fp8 k-steps cut at a chunk: %.17g", o[0]);
        /* 4. fp16 accumulator: 2048 + 1 = 2049 is a tie between 2048 and 2050
         * in fp16 and rounds to the even 2048: O = 2048 / 2 = 1024 */
        float v2[2] = {2048, 1};
        emu_one("acc=fp16", q, k, v2, 2, 1, 1.0, o);
        CHECK(o[0] == 1024.0f, "fp16: %.17g", o[0]);
        emu_one("acc=fp32", q, k, v2, 2, 1, 1.0, o);
        CHECK(o[0] == 1024.5f, "fp32: %.17g", o[0]);
        /* 5. the fp16 accumulator rounds once per 16-key k-step, as the f16
         * tensor core sums: v = [2048, 1, 1] in one step is 2050 exactly
         * (2050 / 3), where rounding after every add would keep 2048. A
         * kblock of 2 puts key 2 in a step of its own: 2048 + 1 ties to 2048,
         * then 2048 + 1 again, so 2048 / 3. */
        float q3[1] = {0}, k3[3] = {1, 1, 1}, v3[3] = {2048, 1, 1};
        emu_one("acc=fp16", q3, k3, v3, 3, 1, 1.0, o);
        CHECK(o[0] == 2050.0f / 3.0f, "fp16 k-step: %.17g", o[0]);
        emu_one("acc=fp16 kblock=2", q3, k3, v3, 3, 1, 1.0, o);
        CHECK(o[0] == 2048.0f / 3.0f, "fp16, steps of 2 and 1 keys: %.17g", o[0]);
        /* output rounding: 1024.5 in bf16 (8 bits of mantissa) -> 1024 */
        emu_one("acc=fp32 out=bf16", q, k, v2, 2, 1, 1.0, o);
        CHECK(o[0] == 1024.0f, "bf16 out: %.17g", o[0]);
    }
    /* 5. V smoothing: v = [10, 10.5] per tensor int4 without smoothing:
     * scale 10.5/7 = 1.5, codes [round(6.67) = 7, 7] -> O = 10.5 for
     * P = [1, 1]. With smooth=v: mean 10.25, residuals [-0.25, 0.25] are
     * exact in int4 (codes -7, 7): O = 0 + 10.25 = 10.25 = exact. */
    {
        float q[1] = {0}, k[2] = {1, 1}, v[2] = {10, 10.5f}, o[1];
        emu_one("v=int4@tensor", q, k, v, 2, 1, 1.0, o);
        CHECK(o[0] == 10.5f, "int4 V without smoothing: %.9g", o[0]);
        emu_one("v=int4@tensor smooth=v", q, k, v, 2, 1, 1.0, o);
        CHECK(o[0] == 10.25f, "int4 V with smoothing: %.9g", o[0]);
    }
}

static void test_emulation_property(void)
{
    size_t n = 200, d = 32;
    float *q = malloc(n * d * 4), *k = malloc(n * d * 4), *v = malloc(n * d * 4);
    fill(q, n * d, 1.5, 0);
    fill(k, n * d, 1, 0);
    fill(v, n * d, 1, 0);
    /* K with a large per-channel offset: softmax does not see it, int8 does */
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < d; c++)
            k[t * d + c] += (float)(8.0 * ((double)((c * 7) % 5) - 2.0));
    qattn_head h = {q, k, v, n, n, d, NULL, 0};
    const char *masks[] = {"none", "causal", "window:17,4"};
    for (int mi = 0; mi < 3; mi++) {
        /* fp32 schemes: the online softmax in blocks equals the reference */
        double e = emu_vs_ref("q=fp32", &h, masks[mi], NULL);
        CHECK(e < 1e-5, "fp32 emulation = reference (%s): %g", masks[mi], e);
        e = emu_vs_ref("q=fp32 kblock=16", &h, masks[mi], NULL);
        CHECK(e < 1e-5, "kblock 16 (%s): %g", masks[mi], e);
        e = emu_vs_ref("q=fp32 smooth=q+k+v", &h, masks[mi], NULL);
        CHECK(e < 1e-4, "smoothing Q, K, V with the dS term keeps the function (%s): %g", masks[mi], e);
    }
    /* smoothing K matters once K has offsets */
    qattn_metrics a, b;
    emu_vs_ref("q=int8@block:64 k=int8@block:64 p=fp16 v=fp16", &h, "causal", &a);
    emu_vs_ref("q=int8@block:64 k=int8@block:64 p=fp16 v=fp16 smooth=k", &h, "causal", &b);
    CHECK(b.rel_l1 < a.rel_l1 / 3, "smooth=k: rel L1 %g -> %g", a.rel_l1, b.rel_l1);
    /* error budgets per bit width on gaussian inputs (no offsets); fp16 and
     * bf16 from their unit roundoff (2^-11, 2^-8), int8 from a step of
     * amax/127 */
    fill(k, n * d, 1, 0);
    struct {
        const char *spec;
        double min_cos;
    } budgets[] = {
        {"fp16", 0.99999},
        {"bf16", 0.9999},
        {"q=int8@token k=int8@token p=fp16 v=fp16", 0.9995},
        {"sage1-b", 0.9995},
        {"sage2-8b", 0.999},
        {"q=e4m3@token k=e4m3@token p=fp16 v=fp16", 0.998},
        {"q=e5m2@token k=e5m2@token p=fp16 v=fp16", 0.99},
        /* int4: a step of amax/7 is ~12% of sigma, so logits move by ~0.2 on
         * these peaked rows: cos ~0.98 */
        {"sage2-4b", 0.97},
        {"q=int4@block:64,ch:16,e8m0 k=int4@block:64,ch:16,e8m0 p=fp16 v=fp16 smooth=k", 0.93},
    };
    for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++) {
        qattn_metrics mt;
        emu_vs_ref(budgets[i].spec, &h, "causal", &mt);
        CHECK(mt.cos > budgets[i].min_cos, "%s: cos %.7f below its budget %.5f", budgets[i].spec, mt.cos,
              budgets[i].min_cos);
        CHECK(mt.cos < 1.0 - 1e-12 || i == 0, "%s: a quantized scheme is not exact (cos %.15f)", budgets[i].spec,
              mt.cos);
    }
    /* fewer bits, more error: int4 per-token worse than int8 per-token */
    qattn_metrics m8, m4;
    emu_vs_ref("q=int8@token k=int8@token p=fp16 v=fp16", &h, "none", &m8);
    emu_vs_ref("q=int4@token k=int4@token p=fp16 v=fp16", &h, "none", &m4);
    CHECK(m4.rel_l1 > 4 * m8.rel_l1, "int4 %g vs int8 %g", m4.rel_l1, m8.rel_l1);
    /* packed sequences = the same sequences one by one (bit for bit) */
    int64_t seqlens[3] = {64, 100, 36};
    qattn_head hp = {q, k, v, n, n, d, seqlens, 3};
    qattn_mask m = mask("causal");
    qattn_scheme s = scheme("sage2-8b");
    float *o = malloc(n * d * 4), *o1 = malloc(n * d * 4), *l = malloc(n * 4), *l1 = malloc(n * 4);
    qattn_err err;
    CHECK(qattn_emu_head(&s, &hp, &m, 0, o, l, &err) == 0, "%s", err.msg);
    size_t off = 0;
    int same = 1;
    for (int sgi = 0; sgi < 3; sgi++) {
        size_t len = (size_t)seqlens[sgi];
        qattn_head hs = {q + off * d, k + off * d, v + off * d, len, len, d, NULL, 0};
        CHECK(qattn_emu_head(&s, &hs, &m, 0, o1 + off * d, l1 + off, &err) == 0, "%s", err.msg);
        off += len;
    }
    for (size_t i = 0; i < n * d; i++)
        same &= o[i] == o1[i];
    CHECK(same, "packed = one by one");
    /* LSE of the fp32 emulation = reference LSE */
    double *r = malloc(n * d * 8), *lr = malloc(n * 8);
    s = scheme("q=fp32");
    CHECK(qattn_emu_head(&s, &h, &m, 0, o, l, &err) == 0, "%s", err.msg);
    CHECK(qattn_ref_head(&h, &m, 0, r, lr, &err) == 0, "%s", err.msg);
    double le = 0;
    for (size_t i = 0; i < n; i++)
        le = fmax(le, fabs(l[i] - lr[i]));
    CHECK(le < 1e-5, "LSE %g", le);
    /* NaN input is an error, not a silent result */
    q[5] = NAN;
    CHECK(qattn_emu_head(&s, &h, &m, 0, o, NULL, &err) == QATTN_ERR_NAN, "NaN in Q");
    free(q);
    free(k);
    free(v);
    free(o);
    free(o1);
    free(l);
    free(l1);
    free(r);
    free(lr);
}

/* With q = 0 every logit is 0 and each output channel depends on its own V
 * column only, so a d = 32 head (register-blocked vector path) must equal 32
 * heads of d = 1 (scalar path), bit for bit, for every accumulator. */
static void test_vector_path(void)
{
    size_t n = 300, d = 32;
    float *q = calloc(n * d, 4), *k = malloc(n * d * 4), *v = malloc(n * d * 4), *o = malloc(n * d * 4);
    float q1[300] = {0}, k1[300], v1[300], o1[300];
    fill(k, n * d, 1, 0);
    fill(v, n * d, 30, 100); /* large values: fp16 and fp22 rounding bite */
    const char *specs[] = {"acc=fp16", "acc=fp22", "acc=fp22+fp32:48", "acc=fp16+fp32:16 kblock=32",
                           "p=e4m3@static v=e4m3@channel acc=fp22+fp32:64"};
    for (size_t si = 0; si < sizeof specs / sizeof *specs; si++) {
        qattn_scheme s = scheme(specs[si]);
        qattn_mask m = mask("causal");
        qattn_err err;
        qattn_head h = {q, k, v, n, n, d, NULL, 0};
        CHECK(qattn_emu_head(&s, &h, &m, 0, o, NULL, &err) == 0, "%s", err.msg);
        int same = 1;
        for (size_t c = 0; c < d; c++) {
            for (size_t t = 0; t < n; t++) {
                k1[t] = k[t * d + c];
                v1[t] = v[t * d + c];
            }
            qattn_head h1 = {q1, k1, v1, n, n, 1, NULL, 0};
            CHECK(qattn_emu_head(&s, &h1, &m, 0, o1, NULL, &err) == 0, "%s", err.msg);
            for (size_t t = 0; t < n; t++)
                same &= o1[t] == o[t * d + c];
        }
        CHECK(same, "%s: vector path = scalar path", specs[si]);
    }
    free(q);
    free(k);
    free(v);
    free(o);
}

static void test_exp2(void)
{
    /* within 4 ulp of the exact 2^x over the softmax's range, exact at
     * integers, flushed to 0 below 2^-126 and at -inf */
    double worst = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -126.0f + 127.0f * (float)i / 2000000.0f;
        double want = exp2((double)x), got = qattn_emu_exp2(x);
        worst = fmax(worst, fabs(got - want) / want);
    }
    CHECK(worst < 4 * 5.96e-8, "exp2 relative error %g", worst);
    int exact = 1;
    for (int n = -126; n <= 10; n++)
        exact &= qattn_emu_exp2((float)n) == ldexpf(1.0f, n);
    CHECK(exact, "2^n exact");
    CHECK(qattn_emu_exp2(-INFINITY) == 0.0f && qattn_emu_exp2(-130.0f) == 0.0f, "flush to zero");
}

/* The kbias study's premise: adding b to every key leaves float64 attention
 * unchanged. K on a 2^-10 grid with |k| < 8 and b at fp16 precision make
 * k + b exact in fp32, so only the reference's own rounding remains. */
static void test_kbias_invariance(void)
{
    size_t n = 160, d = 32;
    float *q = malloc(n * d * 4), *k = malloc(n * d * 4), *kb = malloc(n * d * 4), *v = malloc(n * d * 4), b[32];
    fill(q, n * d, 1, 0);
    fill(v, n * d, 1, 0);
    for (size_t i = 0; i < n * d; i++) {
        double x = 1.5 * check_gauss(&rs) + 0.5 * ((i % d) % 3);
        x = fmax(-7.9, fmin(7.9, x));
        k[i] = (float)(nearbyint(x * 1024.0) / 1024.0);
    }
    double *r0 = malloc(n * d * 8), *r1 = malloc(n * d * 8);
    int64_t seqlens[2] = {100, 60};
    const char *masks[] = {"none", "causal", "window:9,2"};
    for (int mi = 0; mi < 3; mi++) {
        for (double r = 1; r <= 32; r *= 2) {
            qattn_kbias_offsets(k, n, d, r, b);
            for (size_t t = 0; t < n; t++)
                for (size_t c = 0; c < d; c++)
                    kb[t * d + c] = k[t * d + c] + b[c];
            int exact = 1;
            for (size_t i = 0; i < n * d; i++)
                exact &= (double)kb[i] == (double)k[i] + (double)b[i % d];
            CHECK(exact, "k + b exact in fp32 (r = %g)", r);
            qattn_head h0 = {q, k, v, n, n, d, seqlens, 2}, h1 = {q, kb, v, n, n, d, seqlens, 2};
            qattn_mask m = mask(masks[mi]);
            qattn_err err;
            CHECK(qattn_ref_head(&h0, &m, 0, r0, NULL, &err) == 0, "%s", err.msg);
            CHECK(qattn_ref_head(&h1, &m, 0, r1, NULL, &err) == 0, "%s", err.msg);
            double e = max_rel(r1, r0, n * d);
            CHECK(e < 1e-12, "reference unchanged by b (r = %g, %s): %g", r, masks[mi], e);
        }
    }
    /* the offsets point along each channel's mean: |mean|/std grows by ~r */
    qattn_kbias_offsets(k, n, d, 8, b);
    CHECK(b[1] > 0 && fabsf(b[1]) > 8, "b along the mean, r std long (%g)", b[1]);
    free(q);
    free(k);
    free(kb);
    free(v);
    free(r0);
    free(r1);
}

int main(void)
{
    test_kbias_invariance();
    test_exp2();
    test_vector_path();
    test_masks();
    test_smooth_and_qtensor();
    test_reference_known();
    test_reference_property();
    test_reference_rows();
    test_emulation_known();
    test_emulation_property();
    return check_done();
}
