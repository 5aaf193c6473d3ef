/* qattn/numerics.h beyond the formats test: the fp16 rounding's bit form
 * against the encoder and fp22's Inf / NaN rule (every fp16 code and its
 * midpoints, random bit patterns; the vector form emulate.c uses), and the
 * correction-step quotients of the kernels' V^T codes. The encoders, the
 * group map and the mask ranges are tested through their public wrappers in
 * test_formats, test_group and test_attn. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "qattn/numerics.h"

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint32_t rnd32(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}

static float u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* qattn_num_round16's bit form in the normal fp16 range against the encoder,
 * and fp22's sum form (scalar, and on a GCC vector as emulate.c uses it)
 * against qattn_num_cut22 on sums with x, for one float x */
typedef uint32_t vu4 __attribute__((vector_size(16)));

/* same bits, or both NaN */
static int same(float a, float b)
{
    return f2u(a) == f2u(b) || (a != a && b != b);
}

static void check_float(float x)
{
    const float r = qattn_num_fp16_decode(qattn_num_fp16_encode(x)), y = qattn_num_round16(x);
    CHECK(f2u(y) == f2u(r) || (x != x && y != y), "round16 %a: %a, encoder %a", (double)x, (double)y, (double)r);
    volatile float other = u2f(rnd32()); /* any bits: signalling NaNs, Inf, subnormals */
    const float sums[4] = {x + other, x * 0.5f + 1.0f, x - x, x * other};
    vu4 u = {f2u(sums[0]), f2u(sums[1]), f2u(sums[2]), f2u(sums[3])};
    vu4 c = QATTN_NUM_CUT22_SUM_BITS(u);
    for (int i = 0; i < 4; i++) {
        const float want = qattn_num_cut22(sums[i]);
        CHECK(same(u2f(c[i]), want) && same(qattn_num_cut22_sum(sums[i]), want),
              "cut22 of a sum, lane %d of %a: %08x, %08x", i, (double)x, (unsigned)c[i], (unsigned)f2u(want));
    }
}

/* fp22's Inf / NaN rule and its truncation, by hand */
static void check_cut22(void)
{
    CHECK(f2u(qattn_num_cut22(u2f(0x4049ffffu))) == 0x4049fc00u, "cut22 clears the low 10 bits");
    CHECK(f2u(qattn_num_cut22(u2f(0xc049ffffu))) == 0xc049fc00u, "cut22 truncates toward zero");
    CHECK(f2u(qattn_num_cut22(u2f(0x7f800000u))) == 0x7f800000u, "cut22(+Inf)");
    CHECK(f2u(qattn_num_cut22(u2f(0xff800000u))) == 0xff800000u, "cut22(-Inf)");
    /* a NaN whose payload lies in the cleared bits stays that NaN (clearing
     * them would make it Inf) */
    CHECK(f2u(qattn_num_cut22(u2f(0x7f800001u))) == 0x7f800001u, "cut22(NaN 0x7f800001)");
    CHECK(f2u(qattn_num_cut22(u2f(0xffc003ffu))) == 0xffc003ffu, "cut22(NaN 0xffc003ff)");
    CHECK(f2u(qattn_num_cut22(u2f(0x7f7fffffu))) == 0x7f7ffc00u, "cut22(FLT_MAX)");
    CHECK(f2u(qattn_num_cut22(u2f(0x000003ffu))) == 0u, "cut22 of a small subnormal");
    CHECK(f2u(qattn_num_cut22(u2f(0x80000000u))) == 0x80000000u, "cut22(-0)");
}

/* the correction step's quotients (qattn_num_quot): the e4m3 code of y is
 * that of fl(v / s), for every finite fp16 (bf16) v with |v| <= amax and
 * s = fl(amax / 448), amax every 37th positive finite fp16 (bf16) value with
 * s >= 2^-80 (qattn_num_quot_ok); for fp16 also y = fl(v / s) bit for bit.
 * QATTN_TEST_ALL=1 in the environment: every amax (about 1e9 pairs per
 * format, 10 s each; none differed on 2026-11-25). */
static void check_quotients(int bf16)
{
    const char *all = getenv("QATTN_TEST_ALL");
    const unsigned step = all && !strcmp(all, "1") ? 1u : 37u;
    long long pairs = 0, badcode = 0, bady = 0;
    for (unsigned a = 1; a < (bf16 ? 0x7f80u : 0x7c00u); a += step) { /* positive finite */
        const float amax = bf16 ? qattn_num_bf16_decode((uint16_t)a) : qattn_num_fp16_decode((uint16_t)a);
        const float s = qattn_num_scale_for(QATTN_FMT_E4M3, amax, 0), r = 1.0f / s;
        if (!qattn_num_quot_ok(s))
            continue;
        for (unsigned h = 0; h < 0x10000u; h++) {
            const float v = bf16 ? qattn_num_bf16_decode((uint16_t)h) : qattn_num_fp16_decode((uint16_t)h);
            if (!(fabsf(v) <= amax))
                continue;
            const float y = qattn_num_quot(v, s, r), z = v / s;
            pairs++;
            if (qattn_num_e4m3_encode(y) != qattn_num_e4m3_encode(z)) {
                if (badcode++ < 5)
                    fprintf(stderr, "quot %s v %a s %a: y %a, v / s %a\n", bf16 ? "bf16" : "fp16", (double)v,
                            (double)s, (double)y, (double)z);
            }
            bady += f2u(y) != f2u(z);
        }
    }
    printf("quotients %s: %lld pairs, %lld e4m3 codes differ, %lld y differ from fl(v / s)\n", bf16 ? "bf16" : "fp16",
           pairs, badcode, bady);
    CHECK(pairs > 1000000 && badcode == 0, "quotients %s: %lld of %lld codes differ", bf16 ? "bf16" : "fp16", badcode,
          pairs);
    if (!bf16)
        CHECK(bady == 0, "quotients fp16: %lld of %lld y differ from fl(v / s)", bady, pairs);
}

/* the fp8 tensor core's k-step sum (qattn_num_fp8_kstep): hand-worked
 * cases, and two sums an H100's e4m3 wgmma computed
 * (kernels/probes/wgmma_fp8_sum.cu, 2026-11-26) where a model aligning to
 * the products' value exponents gives other bits */
static void check_fp8_kstep(void)
{
    const float one = 1.0f, tiny = 0.001953125f; /* 2^-9: the least e4m3 subnormal */
    /* acc 18000 in [2^14, 2^15): the unit is 2^(14 - 13) = 2, so + 1 is dropped; 8000: 2^-1, kept */
    CHECK(qattn_num_fp8_kstep(18000.0f, &one, &one, 1) == 18000.0f, "18000 + 1");
    CHECK(qattn_num_fp8_kstep(-18000.0f, &one, &one, 1) == -18000.0f, "-18000 + 1: the product truncated to 0");
    CHECK(qattn_num_fp8_kstep(8000.0f, &one, &one, 1) == 8001.0f, "8000 + 1");
    const float a2[2] = {1.0f, tiny}, b2[2] = {1.0f, 1.0f};
    CHECK(qattn_num_fp8_kstep(0.0f, a2, b2, 2) == 1.0f + tiny, "1 + 2^-9 (E = 0, unit 2^-13)");
    CHECK(qattn_num_fp8_kstep(0.0f, a2, b2, 0) == 0.0f, "no products");
    static const uint8_t qa[32] = {0xc2, 0x53, 0xd0, 0x38, 0x67, 0x21, 0xe3, 0x15, 0x0d, 0xb9, 0xa6,
                                   0x87, 0xdd, 0xf4, 0xf9, 0x8d, 0x5a, 0x5e, 0xfe, 0x73, 0x5f, 0x4d,
                                   0xec, 0x6b, 0x79, 0x13, 0xb7, 0x63, 0x54, 0xf5, 0xf1, 0x9b};
    static const uint8_t qb[2][32] = {
        {0x13, 0xba, 0x0c, 0x9f, 0xba, 0x23, 0xa6, 0x87, 0x92, 0x22, 0xb6, 0xba, 0xd3, 0x7b, 0x84, 0x35,
         0x38, 0x54, 0x47, 0x17, 0x4a, 0x8f, 0xc1, 0x76, 0xc8, 0x6b, 0xa8, 0x11, 0xda, 0xc2, 0x01, 0x74},
        {0xfe, 0x4c, 0xf3, 0x76, 0xfa, 0x3c, 0x33, 0xbf, 0x3e, 0x35, 0x54, 0xfd, 0xdb, 0xf4, 0x1b, 0xb7,
         0xba, 0xbb, 0xd2, 0x94, 0x95, 0x0a, 0x84, 0x29, 0xe2, 0x24, 0xc0, 0x5c, 0x43, 0x2c, 0x6b, 0xc0}};
    static const float hw[2] = {-0x1.82cp+15f, 0x1.19cp+11f}; /* exact sums -49494.349..., 2254.740... */
    float a[32], b[32];
    for (int c = 0; c < 32; c++)
        a[c] = qattn_num_e4m3_decode(qa[c]);
    for (int t = 0; t < 2; t++) {
        for (int c = 0; c < 32; c++)
            b[c] = qattn_num_e4m3_decode(qb[t][c]);
        const float got = qattn_num_fp8_kstep(0.0f, a, b, 32);
        CHECK(got == hw[t], "H100 sum %d: %a, the tensor core gave %a", t, (double)got, (double)hw[t]);
    }
}

/* the k-step as its comment states it, in double: E, each term truncated toward zero to a
 * multiple of 2^(E - 13), the sum cut to 13 mantissa bits (an independent model for the
 * property test below) */
static float fp8_kstep_ref(float acc, const float *a, const float *b, int bstride, int n)
{
    int e = -1000, any = 0;
    if (acc != 0.0f) {
        e = (int)((f2u(acc) >> 23) & 0xffu) - 127;
        any = 1;
    }
    for (int j = 0; j < n; j++) {
        const float x = a[j], y = b[(size_t)j * bstride];
        if (x == 0.0f || y == 0.0f)
            continue;
        int ex, ey;
        frexpf(fabsf(x), &ex), frexpf(fabsf(y), &ey); /* value exponents + 1; e4m3 subnormals count as -6 */
        ex = ex - 1 < -6 ? -6 : ex - 1, ey = ey - 1 < -6 ? -6 : ey - 1;
        e = ex + ey > e ? ex + ey : e;
        any = 1;
    }
    if (!any)
        return acc;
    const double unit = ldexp(1.0, (e < -100 ? -100 : e) - 13);
    double sum = trunc((double)acc / unit) * unit;
    for (int j = 0; j < n; j++)
        sum += trunc((double)a[j] * b[(size_t)j * bstride] / unit) * unit;
    return u2f(f2u((float)sum) & 0xFFFFFC00u);
}

/* qattn_num_fp8_ksteps: 20 channels (a block of 16 and a tail of 4) of rows bstride apart against
 * the double model one channel at a time; hand-worked channels with different E in one call */
static void check_fp8_ksteps(void)
{
    enum { NC = 20, LD = 23, NK = 32 };
    float a[NK], b[NK * LD], acc[NC], want[NC];
    long long bad = 0, total = 0;
    for (int t = 0; t < 4000; t++) {
        const int n = 1 + (int)(rnd32() % NK);
        for (int j = 0; j < NK; j++)
            a[j] = (rnd32() & 7) ? qattn_num_e4m3_decode((uint8_t)(rnd32() % 0x7fu)) : 0.0f; /* P >= 0, finite */
        for (int i = 0; i < NK * LD; i++) {
            const uint8_t code = (uint8_t)rnd32();
            b[i] = (code & 0x7f) == 0x7f ? 0.0f : qattn_num_e4m3_decode(code); /* no NaN codes */
        }
        for (int c = 0; c < NC; c++) { /* accumulators of 0 or any magnitude the sums may reach */
            const uint32_t r = rnd32();
            acc[c] = (r & 3) == 0 ? 0.0f : ldexpf((float)(int)(rnd32() % 2001u - 1000), (int)(r >> 8) % 40 - 20);
            acc[c] = qattn_num_cut22(acc[c]);
            want[c] = fp8_kstep_ref(acc[c], a, b + c, LD, n);
        }
        qattn_num_fp8_ksteps(acc, NC, a, b, LD, n);
        for (int c = 0; c < NC; c++, total++)
            bad += f2u(acc[c]) != f2u(want[c]);
    }
    CHECK(bad == 0, "fp8 ksteps: %lld of %lld channel sums differ from the double model", bad, total);
    /* one key of value 1 into 18000 (unit 2: dropped), 8000 (unit 2^-1: kept), 0 and -18000 */
    float h[4] = {18000.0f, 8000.0f, 0.0f, -18000.0f};
    const float one = 1.0f, ones[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    qattn_num_fp8_ksteps(h, 4, &one, ones, 4, 1);
    CHECK(h[0] == 18000.0f && h[1] == 8001.0f && h[2] == 1.0f && h[3] == -18000.0f,
          "fp8 ksteps by hand: %g %g %g %g", (double)h[0], (double)h[1], (double)h[2], (double)h[3]);
}

/* the f16 tensor core's k-step with an fp16 accumulator
 * (qattn_num_f16_kstep): a hand-worked tie, and two sums an H100's f16
 * wgmma computed (kernels/probes/wgmma_f16_sum.cu, 2026-11-26) that the
 * exact sum rounded once to fp16 misses */
static void check_f16_kstep(void)
{
    /* 1 + 2^-10 + 2^-11 - 2^-30: E = 0, unit 2^-25, the last product truncated to 0, so the sum is the
     * midpoint 1 + 3 2^-11 and goes to the even 1 + 2^-9 (the exact sum, just below it, gives 1 + 2^-10) */
    const float a4[4] = {1.0f, 0x1p-10f, 0x1p-11f, -0x1p-15f}, b4[4] = {1.0f, 1.0f, 1.0f, 0x1p-15f};
    CHECK(qattn_num_f16_kstep(0.0f, a4, b4, 1, 4) == 1.0f + 0x1p-9f, "tie after the cut: %a",
          (double)qattn_num_f16_kstep(0.0f, a4, b4, 1, 4));
    CHECK(qattn_num_f16_kstep(0.5f, a4, b4, 1, 0) == 0.5f, "no products");
    const float one = 1.0f;
    CHECK(qattn_num_f16_kstep(2048.0f, &one, &one, 1, 1) == 2048.0f, "2048 + 1: a tie to even");
    CHECK(qattn_num_f16_kstep(2050.0f, &one, &one, 1, 1) == 2052.0f, "2050 + 1: a tie to even");
    static const uint16_t ha[2][16] = {
        {0x2f41, 0x24ec, 0x2089, 0x2093, 0x275c, 0x37b8, 0x1c70, 0x2b2e, 0x2f31, 0x1c40, 0x34bb, 0x290a, 0x1eae,
         0x2615, 0x3084, 0x37d7},
        {0xccf8, 0xb4b6, 0x85b5, 0x1c7b, 0x22d3, 0x4b57, 0x2e30, 0xbfd7, 0xb9b8, 0xd19e, 0x9958, 0x8d52, 0x16c8,
         0x3ae7, 0x0833, 0x20fd}};
    static const uint16_t hb[2][16] = {
        {0xb098, 0xaeee, 0xc7e2, 0xbfac, 0x38de, 0x31b0, 0xc68c, 0xc075, 0xb172, 0xb567, 0x336b, 0xaeef, 0xb49a,
         0xb754, 0xc1ec, 0x43d8},
        {0x530c, 0x2422, 0xbe3c, 0x5310, 0x0613, 0xcd62, 0x336a, 0x0a20, 0x4c73, 0x1794, 0x326c, 0xc1e5, 0x978e,
         0xd791, 0xa91a, 0x3e50}};
    static const float hc[2] = {0.0f, 0x1.d08p-10f}, hw[2] = {0x1.614p+0f, -0x1.844p+10f};
    for (int t = 0; t < 2; t++) {
        float a[16], b[16];
        for (int c = 0; c < 16; c++) {
            a[c] = qattn_num_fp16_decode(ha[t][c]);
            b[c] = qattn_num_fp16_decode(hb[t][c]);
        }
        const float got = qattn_num_f16_kstep(hc[t], a, b, 1, 16);
        CHECK(got == hw[t], "H100 f16 sum %d: %a, the tensor core gave %a", t, (double)got, (double)hw[t]);
    }
    /* b read with a stride: the same sum from every other element */
    float b8[8] = {1.0f, 9.0f, 0x1p-10f, 9.0f, 0x1p-11f, 9.0f, 0x1p-15f, 9.0f};
    const float a1[4] = {1.0f, 1.0f, 1.0f, -0x1p-15f};
    CHECK(qattn_num_f16_kstep(0.0f, a1, b8, 2, 4) == 1.0f + 0x1p-9f, "strided b");
}

/* The acc=fp16 rescale (qattn_num_rescale16): alpha rounded to fp16 first,
 * then one f16 multiply, as SageAttention's fp16-accumulator kernels do.
 * alpha = 1 - 2^-12 - 2^-22 lies below the midpoint of the fp16 values
 * 1 - 2^-11 and 1, so it rounds to 1 - 2^-11: 1536 (1 - 2^-11) = 1535.25,
 * which rounds to 1535 (fp16 steps of 1 there); alpha in fp32 would give
 * 1535.62..., rounded to 1536. */
static void check_rescale16(void)
{
    const float alpha = 1.0f - 0x1p-12f - 0x1p-22f;
    CHECK(qattn_num_rescale16(1536.0f, alpha) == 1535.0f, "1536 x alpha: %a", (double)qattn_num_rescale16(1536.0f, alpha));
    CHECK(qattn_num_round16(1536.0f * alpha) == 1536.0f, "the fp32 alpha's product: %a", (double)qattn_num_round16(1536.0f * alpha));
    CHECK(qattn_num_rescale16(-1536.0f, alpha) == -1535.0f, "sign");
    CHECK(qattn_num_rescale16(3.0f, 0.5f) == 1.5f, "a power of two: exact");
    CHECK(qattn_num_rescale16(1535.0f, 1.0f) == 1535.0f, "alpha 1");
    CHECK(qattn_num_rescale16(7.0f, 0.0f) == 0.0f, "alpha 0 (a row's first block)");
    /* an fp16-subnormal alpha: 2^-20 + 2^-26 is 16.25 steps of 2^-24, rounded to 2^-20, so
     * 1024 alpha = 2^-10 (in fp32 it would keep 2^-10 + 2^-16, an fp16 value there) */
    CHECK(qattn_num_rescale16(1024.0f, 0x1p-20f + 0x1p-26f) == 0x1p-10f, "subnormal alpha: %a",
          (double)qattn_num_rescale16(1024.0f, 0x1p-20f + 0x1p-26f));
    /* 1 - 2^-12 is the midpoint of 1 - 2^-11 and 1: to even, 1 (3 stays 3; 1 - 2^-11 would give 2.998046875) */
    CHECK(qattn_num_rescale16(3.0f, 1.0f - 0x1p-12f) == 3.0f, "alpha at a tie: %a", (double)qattn_num_rescale16(3.0f, 1.0f - 0x1p-12f));
    /* alpha under the smallest fp16 subnormal's half rounds to 0 */
    CHECK(qattn_num_rescale16(1024.0f, 0x1p-26f) == 0.0f, "alpha under 2^-25: %a", (double)qattn_num_rescale16(1024.0f, 0x1p-26f));
}

int main(void)
{
    check_f16_kstep();
    check_rescale16();
    check_fp8_kstep();
    check_fp8_ksteps();
    check_cut22();
    check_quotients(0);
    check_quotients(1);
    for (unsigned c = 0; c < 65536; c++) {
        const uint32_t u = f2u(qattn_num_fp16_decode((uint16_t)c));
        check_float(u2f(u));
        check_float(u2f(u + 0x1000u)); /* the fp16 midpoint */
        check_float(u2f(u + 0x0fffu));
        check_float(u2f(u + 0x1001u));
        check_float(u2f(u | 0x3ffu)); /* fp22's cut bits all set */
        check_float(u2f(0x7f800000u | (u & 0x3ffu))); /* signalling NaNs with low payloads */
    }
    for (int i = 0; i < 2000000; i++)
        check_float(u2f(rnd32()));
    return check_done();
}
