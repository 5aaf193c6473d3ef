/* Tests for quant/src/formats.c: exhaustive over the fp8 and fp16 code
 * spaces, all bf16 rounding midpoints, sampled sweeps against an independent
 * brute-force nearest-value encoder, integer formats, e8m0, fp22, scales and
 * the checked array quantizer.
 *
 * The references here use only double arithmetic and ldexp, never the bit
 * tricks of the implementation. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "qattn/formats.h"

/* ---- independent reference: formula decoder of a 1|E|M float format ---- */

typedef struct fmt_desc {
    const char *name;
    int E, M, bias;
    int ieee;      /* 1: top exponent is inf/NaN (fp16, bf16, e5m2) */
    int bits;      /* total width: 8 or 16 */
    unsigned maxc; /* largest finite positive code */
    unsigned (*enc)(float);
    float (*dec)(unsigned);
} fmt_desc;

/* value of code c, NaN for NaN codes, +-inf for inf codes */
static double ref_decode(const fmt_desc *d, unsigned c)
{
    unsigned sign = (c >> (d->bits - 1)) & 1u;
    unsigned e = (c >> d->M) & ((1u << d->E) - 1u);
    unsigned m = c & ((1u << d->M) - 1u);
    unsigned emax = (1u << d->E) - 1u;
    double v;
    if (d->ieee && e == emax)
        v = m ? NAN : INFINITY;
    else if (!d->ieee && e == emax && m == (1u << d->M) - 1u) /* e4m3 fn */
        v = NAN;
    else if (e == 0)
        v = ldexp((double)m, 1 - d->bias - d->M);
    else
        v = ldexp((double)((1u << d->M) + m), (int)e - d->bias - d->M);
    return sign ? -v : v;
}

static unsigned enc_fp16(float x) { return qattn_fp16_encode(x); }
static float dec_fp16(unsigned c) { return qattn_fp16_decode((uint16_t)c); }
static unsigned enc_bf16(float x) { return qattn_bf16_encode(x); }
static float dec_bf16(unsigned c) { return qattn_bf16_decode((uint16_t)c); }
static unsigned enc_e4m3(float x) { return qattn_e4m3_encode(x); }
static float dec_e4m3(unsigned c) { return qattn_e4m3_decode((uint8_t)c); }
static unsigned enc_e5m2(float x) { return qattn_e5m2_encode(x); }
static float dec_e5m2(unsigned c) { return qattn_e5m2_decode((uint8_t)c); }

static const fmt_desc F_FP16 = {"fp16", 5, 10, 15, 1, 16, 0x7bff, enc_fp16, dec_fp16};
static const fmt_desc F_BF16 = {"bf16", 8, 7, 127, 1, 16, 0x7f7f, enc_bf16, dec_bf16};
static const fmt_desc F_E4M3 = {"e4m3", 4, 3, 7, 0, 8, 0x7e, enc_e4m3, dec_e4m3};
static const fmt_desc F_E5M2 = {"e5m2", 5, 2, 15, 1, 8, 0x7b, enc_e5m2, dec_e5m2};

/* ---- independent reference: brute-force nearest-value encoder ----
 * The positive finite values of a format, in code order (which is value
 * order), searched by bisection; ties go to the even code; beyond the max
 * value everything saturates; NaN gives the positive NaN code. */
typedef struct ref_table {
    const fmt_desc *d;
    double *v; /* v[c] for c = 0 .. maxc */
} ref_table;

static ref_table ref_table_make(const fmt_desc *d)
{
    ref_table t = {d, malloc((d->maxc + 1) * sizeof(double))};
    for (unsigned c = 0; c <= d->maxc; c++)
        t.v[c] = ref_decode(d, c);
    return t;
}

static unsigned ref_encode(const ref_table *t, float x, unsigned nan_code)
{
    const fmt_desc *d = t->d;
    unsigned sign = signbit(x) ? 1u << (d->bits - 1) : 0u;
    double a = fabs((double)x);
    if (isnan(x))
        return nan_code;
    if (a >= t->v[d->maxc])
        return sign | d->maxc;
    unsigned lo = 0, hi = d->maxc; /* v[lo] <= a < v[hi] */
    while (hi - lo > 1) {
        unsigned mid = lo + (hi - lo) / 2;
        if (t->v[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    double midv = 0.5 * (t->v[lo] + t->v[hi]); /* exact in double */
    unsigned c = a < midv ? lo : a > midv ? hi : (lo & 1u) ? hi : lo;
    return sign | c;
}

static float f_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* decode matches the formula; encode(decode(c)) == c for finite codes */
static void test_codes_exhaustive(const fmt_desc *d)
{
    unsigned ncodes = 1u << d->bits;
    unsigned signbit_c = 1u << (d->bits - 1);
    int bad_dec = 0, bad_rt = 0, bad_nan = 0;
    unsigned first_dec = 0, first_rt = 0, first_nan = 0;
    for (unsigned c = 0; c < ncodes; c++) {
        double r = ref_decode(d, c);
        float v = d->dec(c);
        if (isnan(r)) {
            if (!isnan(v) && !bad_nan++)
                first_nan = c;
            continue;
        }
        if (((double)v != r || !!signbit(v) != !!signbit(r)) && !bad_dec++)
            first_dec = c;
        if (isinf(r)) { /* encode saturates: inf -> max finite */
            CHECK(d->enc(v) == ((c & signbit_c) | d->maxc),
                  "%s enc(dec(0x%x)) = 0x%x", d->name, c, d->enc(v));
            continue;
        }
        if (d->enc(v) != c && !bad_rt++)
            first_rt = c;
    }
    CHECK(bad_dec == 0, "%s: %d codes decode wrong, first 0x%x", d->name,
          bad_dec, first_dec);
    CHECK(bad_rt == 0, "%s: %d codes fail enc(dec(c)) == c, first 0x%x",
          d->name, bad_rt, first_rt);
    CHECK(bad_nan == 0, "%s: %d NaN codes decode non-NaN, first 0x%x",
          d->name, bad_nan, first_nan);
}

/* RNE at every midpoint between adjacent finite positive values (and their
 * negatives); one float ulp either side goes to the nearer code. */
static void test_midpoints(const fmt_desc *d)
{
    unsigned sb = 1u << (d->bits - 1);
    int bad = 0;
    unsigned first = 0;
    for (unsigned c = 0; c < d->maxc; c++) {
        double lo = ref_decode(d, c), hi = ref_decode(d, c + 1);
        float mid = (float)(0.5 * (lo + hi));
        CHECK((double)mid == 0.5 * (lo + hi), "%s midpoint 0x%x not exact",
              d->name, c);
        unsigned even = (c & 1u) ? c + 1 : c;
        float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
        int ok = d->enc(mid) == even && d->enc(below) == c &&
                 d->enc(above) == c + 1 && d->enc(-mid) == (sb | even) &&
                 d->enc(-below) == (sb | c) && d->enc(-above) == (sb | (c + 1));
        if (!ok && !bad++)
            first = c;
    }
    CHECK(bad == 0, "%s: %d midpoints round wrong, first between 0x%x and +1",
          d->name, bad, first);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

/* every 'stride'-th positive float bit pattern (odd stride, so not aligned
 * to the format's grid), plus random patterns, both signs, against the
 * brute-force encoder */
static void test_sweep(const fmt_desc *d, unsigned nan_code, uint32_t stride)
{
    ref_table t = ref_table_make(d);
    int bad = 0;
    uint32_t first = 0;
    uint64_t n = 0;
    for (uint64_t u = 0; u <= 0x7f800000u; u += stride) {
        for (int s = 0; s < 2; s++) {
            float x = f_from_bits((uint32_t)u | (s ? 0x80000000u : 0u));
            if (d->enc(x) != ref_encode(&t, x, nan_code) && !bad++)
                first = bits_of(x);
            n++;
        }
    }
    for (int i = 0; i < 1000000; i++) {
        float x = f_from_bits(rng32());
        if (isnan(x))
            continue;
        if (d->enc(x) != ref_encode(&t, x, nan_code) && !bad++)
            first = bits_of(x);
        n++;
    }
    CHECK(bad == 0, "%s sweep: %d of %llu wrong, first x bits 0x%08x -> 0x%x"
          " (want 0x%x)", d->name, bad, (unsigned long long)n, first,
          d->enc(f_from_bits(first)), ref_encode(&t, f_from_bits(first), nan_code));
    free(t.v);
}

static void test_fp8_fp16(void)
{
    test_codes_exhaustive(&F_E4M3);
    test_codes_exhaustive(&F_E5M2);
    test_codes_exhaustive(&F_FP16);
    test_midpoints(&F_E4M3);
    test_midpoints(&F_E5M2);
    test_midpoints(&F_FP16);
    test_sweep(&F_E4M3, 0x7f, 4099);
    test_sweep(&F_E5M2, 0x7e, 4099);
    test_sweep(&F_FP16, 0x7e00, 4099);

    /* NaN codes */
    CHECK(isnan(qattn_e4m3_decode(0x7f)) && isnan(qattn_e4m3_decode(0xff)), "e4m3 NaN");
    for (unsigned c = 0x7d; c <= 0x7f; c++)
        CHECK(isnan(qattn_e5m2_decode((uint8_t)c)) &&
              isnan(qattn_e5m2_decode((uint8_t)(c | 0x80))), "e5m2 0x%x", c);
    CHECK(qattn_e5m2_decode(0x7c) == INFINITY && qattn_e5m2_decode(0xfc) == -INFINITY,
          "e5m2 inf");
    CHECK(qattn_e4m3_encode(NAN) == 0x7f, "e4m3(NaN)");
    CHECK(qattn_e4m3_encode(-NAN) == 0x7f, "e4m3(-NaN) canonical");
    CHECK(qattn_e5m2_encode(NAN) == 0x7e, "e5m2(NaN)");
    CHECK(qattn_fp16_encode(NAN) == 0x7e00, "fp16(NaN)");
    CHECK(qattn_fp16_encode(-NAN) == 0x7e00, "fp16(-NaN) canonical");
    CHECK(isnan(qattn_fp16_decode(0x7e00)) && isnan(qattn_fp16_decode(0xfc01)), "fp16 NaN");
    CHECK(qattn_fp16_decode(0x7c00) == INFINITY, "fp16 inf");

    /* signed zero and tiny values */
    CHECK(qattn_e4m3_encode(-0.0f) == 0x80, "e4m3(-0)");
    CHECK(qattn_e4m3_encode(0.0f) == 0x00, "e4m3(+0)");
    CHECK(qattn_e5m2_encode(-0.0f) == 0x80, "e5m2(-0)");
    CHECK(qattn_fp16_encode(-0.0f) == 0x8000, "fp16(-0)");
    CHECK(signbit(qattn_e4m3_decode(0x80)) && qattn_e4m3_decode(0x80) == 0.0f, "dec -0");
    CHECK(qattn_e4m3_decode(0x01) == 0x1p-9f, "e4m3 min subnormal");
    CHECK(qattn_e4m3_encode(0x1p-10f) == 0x00, "e4m3 2^-10 tie -> 0");
    CHECK(qattn_e4m3_encode(0x1.8p-10f) == 0x01, "e4m3 1.5*2^-10 -> 1");
    CHECK(qattn_e4m3_encode(0x1.8p-9f) == 0x02, "e4m3 1.5*2^-9 tie -> 2");
    CHECK(qattn_e4m3_encode(-FLT_TRUE_MIN) == 0x80, "e4m3 -denorm -> -0");
    CHECK(qattn_e5m2_decode(0x01) == 0x1p-16f, "e5m2 min subnormal");
    CHECK(qattn_fp16_decode(0x0001) == 0x1p-24f, "fp16 min subnormal");
    CHECK(qattn_fp16_encode(0x1p-25f) == 0x0000, "fp16 2^-25 tie -> 0");
    CHECK(qattn_fp16_encode(0x1.000002p-25f) == 0x0001, "fp16 just above -> 1");
    /* largest subnormal rounding up into the smallest normal */
    CHECK(qattn_fp16_encode(0x1.ffcp-15f + 0x1p-26f) == 0x0400, "fp16 subnormal carry");
    CHECK(qattn_e4m3_encode(0x1.fp-7f) == 0x08, "e4m3 subnormal carry"); /* 7.75*2^-9 */

    /* saturation */
    CHECK(qattn_e4m3_encode(500.0f) == 0x7e, "e4m3(500)");
    CHECK(qattn_e4m3_decode(qattn_e4m3_encode(500.0f)) == 448.0f, "e4m3(500) = 448");
    CHECK(qattn_e4m3_encode(-1e9f) == 0xfe, "e4m3(-1e9)");
    CHECK(qattn_e4m3_decode(qattn_e4m3_encode(-1e9f)) == -448.0f, "e4m3(-1e9) = -448");
    /* between 448 and the would-be next code 480 (its midpoint 464 included) */
    CHECK(qattn_e4m3_encode(449.0f) == 0x7e, "e4m3(449)");
    CHECK(qattn_e4m3_encode(464.0f) == 0x7e, "e4m3(464)");
    CHECK(qattn_e4m3_encode(470.0f) == 0x7e, "e4m3(470)");
    CHECK(qattn_e4m3_encode(480.0f) == 0x7e, "e4m3(480)");
    CHECK(qattn_e4m3_encode(INFINITY) == 0x7e && qattn_e4m3_encode(-INFINITY) == 0xfe,
          "e4m3(+-inf)");
    CHECK(qattn_e4m3_encode(FLT_MAX) == 0x7e, "e4m3(FLT_MAX)");
    CHECK(qattn_e5m2_encode(1e6f) == 0x7b, "e5m2(1e6)");
    CHECK(qattn_e5m2_decode(qattn_e5m2_encode(1e6f)) == 57344.0f, "e5m2(1e6) = 57344");
    CHECK(qattn_e5m2_encode(61440.0f) == 0x7b, "e5m2 midpoint to inf saturates");
    CHECK(qattn_e5m2_encode(-INFINITY) == 0xfb, "e5m2(-inf)");
    CHECK(qattn_fp16_encode(70000.0f) == 0x7bff, "fp16(70000)");
    CHECK(qattn_fp16_decode(qattn_fp16_encode(70000.0f)) == 65504.0f, "fp16(70000)");
    CHECK(qattn_fp16_encode(65519.0f) == 0x7bff && qattn_fp16_encode(65520.0f) == 0x7bff,
          "fp16 near max");
    CHECK(qattn_fp16_encode(-INFINITY) == 0xfbff, "fp16(-inf)");
}

/* ---- bf16 ---- */

static void test_bf16(void)
{
    int bad = 0;
    uint32_t first = 0;
    /* every midpoint between adjacent positive finite bf16 values is the bit
     * pattern (h << 16) | 0x8000; check it and one float ulp either side */
    for (uint32_t h = 0; h < 0x7f7f; h++) {
        uint32_t mid = (h << 16) | 0x8000u;
        uint32_t even = (h & 1u) ? h + 1 : h;
        int ok = qattn_bf16_encode(f_from_bits(mid)) == even &&
                 qattn_bf16_encode(f_from_bits(mid - 1)) == h &&
                 qattn_bf16_encode(f_from_bits(mid + 1)) == h + 1 &&
                 qattn_bf16_encode(f_from_bits(mid | 0x80000000u)) == (even | 0x8000u);
        if (!ok && !bad++)
            first = h;
    }
    CHECK(bad == 0, "bf16: %d midpoints wrong, first after 0x%x", bad, first);
    /* and the midpoints really are midpoints (independent formula) */
    CHECK((double)f_from_bits(0x3f808000u) ==
              0.5 * (ref_decode(&F_BF16, 0x3f80) + ref_decode(&F_BF16, 0x3f81)),
          "bf16 midpoint formula");

    test_codes_exhaustive(&F_BF16);
    test_sweep(&F_BF16, 0x7fc0, 65537);

    volatile double big = 1e39; /* beyond FLT_MAX: the float conversion is inf */
    CHECK(qattn_bf16_encode((float)big) == 0x7f7f, "bf16(1e39) sat");
    CHECK(qattn_bf16_encode(INFINITY) == 0x7f7f, "bf16(inf)");
    CHECK(qattn_bf16_encode(-INFINITY) == 0xff7f, "bf16(-inf)");
    CHECK(qattn_bf16_encode(FLT_MAX) == 0x7f7f, "bf16(FLT_MAX)");
    CHECK(qattn_bf16_decode(0x7f7f) == 0x1.fep127f, "bf16 max");
    CHECK(qattn_bf16_encode(NAN) == 0x7fc0, "bf16(NaN)");
    CHECK(isnan(qattn_bf16_decode(0x7fc0)) && isnan(qattn_bf16_decode(0xff81)), "bf16 NaN");
    CHECK(qattn_bf16_encode(-0.0f) == 0x8000, "bf16(-0)");
    CHECK(qattn_bf16_encode(1.00390625f) == 0x3f80, "bf16 1+2^-8 tie -> even 1.0");
    CHECK(qattn_bf16_encode(1.01171875f) == 0x3f82, "bf16 1+3*2^-8 tie -> even");
    CHECK(qattn_bf16_encode(FLT_TRUE_MIN) == 0x0000, "bf16 tiny");
    CHECK(qattn_bf16_encode(0x1p-133f) == 0x0001, "bf16 min subnormal");
}

/* ---- integers ---- */

static void test_int(void)
{
    static const struct { float x; int q8; } c8[] = {
        {2.5f, 2}, {3.5f, 4}, {-2.5f, -2}, {-0.5f, 0}, {0.5f, 0}, {1.5f, 2},
        {0.49999997f, 0}, {0.50000006f, 1}, {-3.5f, -4}, {126.5f, 126},
        {125.5f, 126}, {127.5f, 127}, {127.0f, 127}, {126.9f, 127},
        {1000.0f, 127}, {-1000.0f, -127}, {-127.5f, -127}, {0.0f, 0},
        {-0.0f, 0}, {1e-30f, 0}, {INFINITY, 127}, {-INFINITY, -127}, {NAN, 0},
        {FLT_MAX, 127}, {42.0f, 42}, {-42.49f, -42}, {-42.51f, -43},
    };
    for (size_t i = 0; i < sizeof c8 / sizeof c8[0]; i++) {
        CHECK(qattn_int8_encode(c8[i].x) == c8[i].q8, "int8(%g) = %d, want %d",
              (double)c8[i].x, qattn_int8_encode(c8[i].x), c8[i].q8);
        CHECK(qattn_fmt_round(QATTN_FMT_INT8, c8[i].x) == (float)c8[i].q8,
              "round int8(%g)", (double)c8[i].x);
    }
    static const struct { float x; int q4; } c4[] = {
        {7.5f, 7}, {-8.0f, -7}, {6.5f, 6}, {5.5f, 6}, {-6.5f, -6}, {7.0f, 7},
        {100.0f, 7}, {-0.5f, 0}, {2.5f, 2}, {NAN, 0}, {-INFINITY, -7},
    };
    for (size_t i = 0; i < sizeof c4 / sizeof c4[0]; i++) {
        CHECK(qattn_int4_encode(c4[i].x) == c4[i].q4, "int4(%g) = %d, want %d",
              (double)c4[i].x, qattn_int4_encode(c4[i].x), c4[i].q4);
        CHECK(qattn_fmt_round(QATTN_FMT_INT4, c4[i].x) == (float)c4[i].q4,
              "round int4(%g)", (double)c4[i].x);
    }
    /* sweep against the nearbyint reference (default mode: RNE) */
    int bad = 0;
    float firstx = 0;
    for (int i = -140000; i <= 140000; i++) {
        float x = (float)i / 1024.0f;
        double r = nearbyint((double)x);
        int w8 = r > 127 ? 127 : r < -127 ? -127 : (int)r;
        int w4 = r > 7 ? 7 : r < -7 ? -7 : (int)r;
        if ((qattn_int8_encode(x) != w8 || qattn_int4_encode(x) != w4) && !bad++)
            firstx = x;
    }
    CHECK(bad == 0, "int sweep: %d wrong, first %g", bad, (double)firstx);

    /* int4 pack / unpack: every pair of nibble values */
    int badp = 0;
    for (int a = -8; a <= 7; a++) {
        for (int b = -8; b <= 7; b++) {
            int8_t v[2] = {(int8_t)a, (int8_t)b};
            uint8_t p = 0xaa;
            qattn_int4_pack(v, 2, &p);
            if (p != (uint8_t)((a & 0xf) | ((b & 0xf) << 4)) ||
                qattn_int4_unpack(&p, 0) != a || qattn_int4_unpack(&p, 1) != b)
                badp++;
        }
    }
    CHECK(badp == 0, "int4 pair round trip: %d bad", badp);
    int8_t v5[5] = {-7, 7, 3, -1, -5};
    uint8_t p3[3] = {0xff, 0xff, 0xff};
    qattn_int4_pack(v5, 5, p3);
    CHECK(p3[0] == 0x79 && p3[1] == 0xf3 && p3[2] == 0x0b,
          "odd pack: %02x %02x %02x", p3[0], p3[1], p3[2]);
    for (size_t i = 0; i < 5; i++)
        CHECK(qattn_int4_unpack(p3, i) == v5[i], "odd unpack %zu", i);
}

/* ---- e8m0 ---- */

static void test_e8m0(void)
{
    for (int k = -127; k <= 127; k++) {
        float p = (float)ldexp(1.0, k);
        CHECK(qattn_e8m0_encode_ceil(p) == k + 127, "ceil(2^%d) = %d", k,
              qattn_e8m0_encode_ceil(p));
        CHECK(qattn_e8m0_decode((uint8_t)(k + 127)) == p, "decode(%d)", k + 127);
        if (k > -127 && k < 127) /* just above a power of two -> next one */
            CHECK(qattn_e8m0_encode_ceil(nextafterf(p, INFINITY)) == k + 128,
                  "ceil(2^%d+)", k);
    }
    CHECK(qattn_e8m0_encode_ceil(3.0f) == 129, "ceil(3)");
    CHECK(qattn_e8m0_decode(qattn_e8m0_encode_ceil(3.0f)) == 4.0f, "ceil(3) = 4");
    CHECK(qattn_e8m0_encode_ceil(0.75f) == 127, "ceil(0.75) = 1");
    CHECK(qattn_e8m0_decode(127) == 1.0f, "decode(127)");
    CHECK(isnan(qattn_e8m0_decode(255)), "decode(255) NaN");
    CHECK(qattn_e8m0_encode_ceil(NAN) == 255, "ceil(NaN)");
    /* clamping to [2^-127, 2^127] */
    CHECK(qattn_e8m0_encode_ceil(1e-40f) == 0, "ceil(1e-40) clamps to 2^-127");
    CHECK(qattn_e8m0_encode_ceil(FLT_TRUE_MIN) == 0, "ceil(denorm min)");
    CHECK(qattn_e8m0_encode_ceil(0x1.8p-127f) == 1, "ceil(1.5*2^-127) = 2^-126");
    CHECK(qattn_e8m0_encode_ceil(FLT_MAX) == 254, "ceil(FLT_MAX) clamps");
    CHECK(qattn_e8m0_encode_ceil(INFINITY) == 254, "ceil(inf) clamps");
    CHECK(qattn_e8m0_encode_ceil(0.0f) == 0 && qattn_e8m0_encode_ceil(-1.0f) == 0 &&
              qattn_e8m0_encode_ceil(-0.0f) == 0, "ceil(<= 0) = 0");
    CHECK(qattn_fmt_round(QATTN_FMT_E8M0, 5.0f) == 8.0f, "round e8m0(5)");
    CHECK(qattn_fmt_round(QATTN_FMT_E8M0, -5.0f) == 0.0f, "round e8m0(-5)");
    CHECK(isnan(qattn_fmt_round(QATTN_FMT_E8M0, NAN)), "round e8m0(NaN)");
}

/* ---- fp22 ---- */

static void test_fp22(void)
{
    /* mantissa bit k (from the top, 1-based) weighs 2^-k; 13 are kept */
    float x = 1.0f + 0x1p-13f + 0x1p-14f;
    CHECK(qattn_fp22_cut(x) == 1.0f + 0x1p-13f, "cut(1+2^-13+2^-14)");
    CHECK(qattn_fp22_cut(-x) == -(1.0f + 0x1p-13f), "cut toward zero");
    CHECK(qattn_fp22_cut(1.0f + 0x1p-23f) == 1.0f, "cut(1+ulp)");
    /* subnormals: the same 10 low field bits go (3 * 2^-140 = field 0x600) */
    CHECK(qattn_fp22_cut(3.0f * 0x1p-139f) == 3.0f * 0x1p-139f, "cut subnormal kept");
    CHECK(qattn_fp22_cut(3.0f * 0x1p-140f) == 0x1p-139f, "cut subnormal truncated");
    CHECK(bits_of(qattn_fp22_cut(f_from_bits(0x4049ffffu))) == 0x4049fc00u, "cut bits");
    CHECK(isnan(qattn_fp22_cut(NAN)), "cut(NaN)");
    CHECK(qattn_fp22_cut(INFINITY) == INFINITY, "cut(inf)");
    CHECK(signbit(qattn_fp22_cut(-0.0f)), "cut(-0)");
    int bad = 0;
    for (int i = 0; i < 100000; i++) {
        float y = f_from_bits(rng32());
        if (isnan(y))
            continue;
        float c = qattn_fp22_cut(y);
        if (qattn_fp22_cut(c) != c || fabsf(c) > fabsf(y) ||
            (bits_of(c) & 0x3ffu) != 0 ||
            (isnormal(y) && fabs((double)y - (double)c) >= ldexp(fabs((double)y), -13)))
            bad++;
    }
    CHECK(bad == 0, "fp22 idempotence / truncation: %d bad", bad);
}

/* ---- names, qmax, classes ---- */

static void test_names(void)
{
    static const char *const names[] = {"fp32", "fp16", "bf16", "e4m3",
                                        "e5m2", "int8", "int4", "e8m0"};
    for (int i = 0; i < (int)QATTN_FMT_COUNT; i++) {
        qattn_fmt f = QATTN_FMT_COUNT;
        CHECK(qattn_fmt_parse(names[i], &f) == 0 && f == (qattn_fmt)i, "parse %s", names[i]);
        CHECK(strcmp(qattn_fmt_name((qattn_fmt)i), names[i]) == 0, "name %d", i);
        CHECK(qattn_fmt_parse(qattn_fmt_name((qattn_fmt)i), &f) == 0 && f == (qattn_fmt)i,
              "round trip %d", i);
    }
    qattn_fmt f = QATTN_FMT_FP16;
    CHECK(qattn_fmt_parse("int9", &f) == QATTN_ERR_ARG, "int9");
    CHECK(qattn_fmt_parse("", &f) == QATTN_ERR_ARG, "empty");
    CHECK(qattn_fmt_parse("E4M3", &f) == QATTN_ERR_ARG, "case");
    CHECK(qattn_fmt_parse("e4m3 ", &f) == QATTN_ERR_ARG, "trailing space");
    CHECK(f == QATTN_FMT_FP16, "failed parse leaves f");

    CHECK(qattn_fmt_qmax(QATTN_FMT_INT8) == 127.0f, "qmax int8");
    CHECK(qattn_fmt_qmax(QATTN_FMT_INT4) == 7.0f, "qmax int4");
    CHECK(qattn_fmt_qmax(QATTN_FMT_E4M3) == 448.0f, "qmax e4m3");
    CHECK(qattn_fmt_qmax(QATTN_FMT_E5M2) == 57344.0f, "qmax e5m2");
    CHECK(qattn_fmt_qmax(QATTN_FMT_FP16) == 65504.0f, "qmax fp16");
    CHECK(qattn_fmt_qmax(QATTN_FMT_BF16) == qattn_bf16_decode(0x7f7f), "qmax bf16");
    CHECK(qattn_fmt_qmax(QATTN_FMT_FP32) == FLT_MAX, "qmax fp32");
    CHECK(qattn_fmt_qmax(QATTN_FMT_E8M0) == 0x1p127f, "qmax e8m0");
    for (int i = 0; i < (int)QATTN_FMT_COUNT; i++) {
        qattn_fmt g = (qattn_fmt)i;
        int is_int = g == QATTN_FMT_INT8 || g == QATTN_FMT_INT4;
        int scaled = is_int || g == QATTN_FMT_E4M3 || g == QATTN_FMT_E5M2;
        CHECK(qattn_fmt_is_int(g) == is_int, "is_int %d", i);
        CHECK(qattn_fmt_is_scaled(g) == scaled, "is_scaled %d", i);
        /* every format's qmax is a fixed point of its rounding */
        CHECK(qattn_fmt_round(g, qattn_fmt_qmax(g)) == qattn_fmt_qmax(g), "round qmax %d", i);
    }
    CHECK(qattn_fmt_round(QATTN_FMT_FP32, 0.1f) == 0.1f, "round fp32");
    CHECK(qattn_fmt_round(QATTN_FMT_FP16, 0.1f) == qattn_fp16_decode(0x2e66), "round fp16");
    CHECK(qattn_fmt_round(QATTN_FMT_BF16, 0.1f) == qattn_bf16_decode(0x3dcd), "round bf16");
    CHECK(qattn_fmt_round(QATTN_FMT_E4M3, 0.1f) == 0.1015625f, "round e4m3");
    CHECK(qattn_fmt_round(QATTN_FMT_E5M2, 0.1f) == 0.09375f, "round e5m2");
}

/* ---- scales and the checked quantizer ---- */

static void test_scale_quantize(void)
{
    CHECK(qattn_scale_for(QATTN_FMT_INT8, 0.0f, 0) == 0.0f, "zero amax");
    CHECK(qattn_scale_for(QATTN_FMT_INT8, 0.0f, 1) == 0.0f, "zero amax e8m0");
    CHECK(qattn_scale_for(QATTN_FMT_E4M3, NAN, 0) == 0.0f, "NaN amax");
    CHECK(qattn_scale_for(QATTN_FMT_INT8, 254.0f, 0) == 2.0f, "int8 254");
    CHECK(qattn_scale_for(QATTN_FMT_INT8, 254.0f, 1) == 2.0f, "int8 254 e8m0");
    CHECK(qattn_scale_for(QATTN_FMT_INT8, 300.0f, 1) == 4.0f, "int8 300 e8m0");
    CHECK(qattn_scale_for(QATTN_FMT_INT8, 300.0f, 0) == 300.0f / 127.0f, "int8 300");
    CHECK(qattn_scale_for(QATTN_FMT_E4M3, 448.0f, 0) == 1.0f, "e4m3 448");
    CHECK(qattn_scale_for(QATTN_FMT_E4M3, 448.0f, 1) == 1.0f, "e4m3 448 e8m0");
    CHECK(qattn_scale_for(QATTN_FMT_E4M3, 449.0f, 1) == 2.0f, "e4m3 449 e8m0");
    CHECK(qattn_scale_for(QATTN_FMT_INT4, 1.0f, 1) == 0.25f, "int4 1 e8m0");
    CHECK(qattn_scale_for(QATTN_FMT_FP16, 1000.0f, 0) == 1.0f, "fp16 unscaled");
    CHECK(qattn_scale_for(QATTN_FMT_BF16, 0.0f, 1) == 1.0f, "bf16 unscaled");
    CHECK(qattn_scale_for(QATTN_FMT_INT8, FLT_TRUE_MIN, 0) > 0.0f, "tiny amax > 0");

    qattn_err err;
    float x[20], y[20];
    for (int i = 0; i < 20; i++)
        x[i] = (float)i - 9.5f;
    x[17] = NAN;
    err.msg[0] = 0;
    CHECK(qattn_fmt_quantize(QATTN_FMT_INT8, x, 20, 1.0f, y, &err) == QATTN_ERR_NAN, "NaN");
    CHECK_STR_CONTAINS(err.msg, "element 17");
    CHECK_STR_CONTAINS(err.msg, "NaN");
    x[17] = 0.0f;
    x[3] = -INFINITY;
    err.msg[0] = 0;
    CHECK(qattn_fmt_quantize(QATTN_FMT_FP16, x, 20, 1.0f, y, &err) == QATTN_ERR_NAN, "Inf");
    CHECK_STR_CONTAINS(err.msg, "element 3");
    CHECK_STR_CONTAINS(err.msg, "Inf");
    CHECK(qattn_fmt_quantize(QATTN_FMT_E4M3, x, 20, 0.0f, y, NULL) == QATTN_ERR_NAN,
          "Inf even with scale 0, err NULL");
    x[3] = 1.0f;

    for (int i = 0; i < 20; i++)
        y[i] = 99.0f;
    CHECK(qattn_fmt_quantize(QATTN_FMT_INT8, x, 20, 0.0f, y, &err) == 0, "scale 0");
    int nz = 0;
    for (int i = 0; i < 20; i++)
        nz += y[i] != 0.0f;
    CHECK(nz == 0, "scale 0 gives zeros (%d non-zero)", nz);
    CHECK(qattn_fmt_quantize(QATTN_FMT_INT8, x, 20, -1.0f, y, &err) == QATTN_ERR_ARG,
          "negative scale");

    /* int8, scale 0.5: x / 0.5 = {2, -2.5, 1.5, 127, 200, -0.4, 126.5}
     * -> RNE {2, -2, 2, 127, 127 (clamped), 0, 126} */
    {
        const float xi[7] = {1.0f, -1.25f, 0.75f, 63.5f, 100.0f, -0.2f, 63.25f};
        const float want[7] = {2, -2, 2, 127, 127, 0, 126};
        float yi[7];
        CHECK(qattn_fmt_quantize(QATTN_FMT_INT8, xi, 7, 0.5f, yi, &err) == 0, "int8 ex");
        for (int i = 0; i < 7; i++)
            CHECK(yi[i] == want[i], "int8 ex[%d] = %g, want %g", i, (double)yi[i],
                  (double)want[i]);
    }
    /* e4m3, scale 2: x / 2 =
     *   1.5     exact (1.100b * 2^0)
     *   3.5     exact (1.110b * 2^1)
     *   500     > 448 -> saturates to 448 (0x7e)
     *  -0.005   subnormal: 0.005 / 2^-9 = 2.56 -> 3 -> -3 * 2^-9 = -0.005859375
     *   0.15    = 1.2 * 2^-3, step 2^-6: 9.6 -> 10 -> 10 * 2^-6 = 0.15625
     *   1.0625  midpoint of 1.000b and 1.001b -> even 1.0
     *   1.1875  midpoint of 1.001b and 1.010b -> even 1.25
     *   0.3     = 1.2 * 2^-2, step 2^-5: 9.6 -> 10 -> 0.3125 */
    {
        const float xi[8] = {3.0f, 7.0f, 1000.0f, -0.01f, 0.3f, 2.125f, 2.375f, 0.6f};
        const float want[8] = {1.5f, 3.5f, 448.0f, -0.005859375f, 0.15625f,
                               1.0f, 1.25f, 0.3125f};
        float yi[8];
        CHECK(qattn_fmt_quantize(QATTN_FMT_E4M3, xi, 8, 2.0f, yi, &err) == 0, "e4m3 ex");
        for (int i = 0; i < 8; i++)
            CHECK(yi[i] == want[i], "e4m3 ex[%d] = %.9g, want %.9g", i,
                  (double)yi[i], (double)want[i]);
    }
    /* true division, not multiplication by the reciprocal: with s = 7,
     * 45.5 / 7 = 6.5 and 87.5 / 7 = 12.5 exactly (ties -> 6 and 12), while
     * 45.5 * fl(1/7) = 6.5000005 and 87.5 * fl(1/7) = 12.500001 (-> 7, 13) */
    {
        const float xi[2] = {45.5f, 87.5f};
        float yi[2];
        CHECK(qattn_fmt_quantize(QATTN_FMT_INT8, xi, 2, 7.0f, yi, &err) == 0, "div");
        CHECK(yi[0] == 6.0f && yi[1] == 12.0f, "true division: %g %g",
              (double)yi[0], (double)yi[1]);
    }
    /* and every scaled format matches qattn_fmt_round(f, x / s) */
    {
        float xs[256], ys[256];
        const float s = 0.3f;
        for (int i = 0; i < 256; i++)
            xs[i] = f_from_bits(0x3f000000u + rng32() % 0x03000000u) *
                    ((i & 1) ? -1.0f : 1.0f);
        for (int f = QATTN_FMT_E4M3; f <= QATTN_FMT_INT4; f++) {
            int badq = 0;
            CHECK(qattn_fmt_quantize((qattn_fmt)f, xs, 256, s, ys, &err) == 0, "q %d", f);
            for (int i = 0; i < 256; i++)
                badq += ys[i] != qattn_fmt_round((qattn_fmt)f, xs[i] / s);
            CHECK(badq == 0, "quantize fmt %d != round(x / s): %d", f, badq);
        }
    }
    /* unscaled formats ignore the scale (even 0) */
    {
        const float xi[3] = {0.1f, -70000.0f, 1.0f};
        float yi[3];
        CHECK(qattn_fmt_quantize(QATTN_FMT_FP16, xi, 3, 0.0f, yi, &err) == 0, "fp16 q");
        CHECK(yi[0] == qattn_fp16_decode(0x2e66) && yi[1] == -65504.0f && yi[2] == 1.0f,
              "fp16 quantize ignores scale");
        CHECK(qattn_fmt_quantize(QATTN_FMT_FP32, xi, 3, 5.0f, yi, &err) == 0 &&
                  yi[0] == 0.1f && yi[1] == -70000.0f, "fp32 quantize identity");
    }
    CHECK(qattn_fmt_quantize(QATTN_FMT_INT8, x, 0, 1.0f, y, &err) == 0, "n = 0");
}

int main(void)
{
    test_fp8_fp16();
    test_bf16();
    test_int();
    test_e8m0();
    test_fp22();
    test_names();
    test_scale_quantize();
    /* qattn_fmt_round_mul = qattn_fmt_round(f, x * mul), element by element;
     * and for e4m3 (a separate branch-free path) over every 64th float bit
     * pattern of either sign */
    {
        static float xs[1 << 16], ys[1 << 16];
        int bad = 0;
        for (uint64_t base = 0; base < (1ull << 32); base += (uint64_t)64 << 16) {
            size_t m = 0;
            for (uint64_t u = base; u < base + ((uint64_t)64 << 16); u += 64) {
                uint32_t w = (uint32_t)u;
                float f;
                memcpy(&f, &w, 4);
                if (isfinite(f))
                    xs[m++] = f;
            }
            qattn_fmt_round_mul(QATTN_FMT_E4M3, xs, m, 1.0f, ys);
            for (size_t i = 0; i < m; i++) {
                float want = qattn_fmt_round(QATTN_FMT_E4M3, xs[i]);
                if (memcmp(&want, &ys[i], 4))
                    bad++;
            }
        }
        CHECK(bad == 0, "e4m3 fast path: %d mismatches", bad);
    }
    {
        static float xs[4096], ys[4096];
        uint32_t st = 99;
        for (int f = 0; f < QATTN_FMT_COUNT; f++) {
            int bad = 0;
            for (int i = 0; i < 4096; i++) {
                st = st * 1664525u + 1013904223u;
                /* half uniform in +-150, half log-uniform over 2^-30..2^20 */
                if (i % 2)
                    xs[i] = ((float)(st >> 8) / 16777216.0f - 0.5f) * 300.0f;
                else
                    xs[i] = (st & 1 ? -1.0f : 1.0f) * ldexpf(1.0f + (float)(st >> 12) / 1048576.0f,
                                                             (int)(st >> 26) % 50 - 30);
            }
            qattn_fmt_round_mul((qattn_fmt)f, xs, 4096, 1.75f, ys);
            for (int i = 0; i < 4096; i++) {
                float want = qattn_fmt_round((qattn_fmt)f, xs[i] * 1.75f);
                if (!(ys[i] == want || (ys[i] != ys[i] && want != want)))
                    bad++;
            }
            CHECK(bad == 0, "round_mul %s: %d mismatches", qattn_fmt_name((qattn_fmt)f), bad);
        }
    }
    return check_done();
}
