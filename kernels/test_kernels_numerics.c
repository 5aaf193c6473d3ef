/* The kernels' number formats, group map and mask ranges (numerics.h,
 * compiled here as host C) against quant/: every fp8 / fp16 / bf16 code,
 * every float around each rounding boundary, random bit patterns. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/check.h"
#include "numerics.h"

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

/* same bits, or both NaN */
static int same(float a, float b)
{
    return f2u(a) == f2u(b) || (a != a && b != b);
}

static void check_float(float x)
{
    CHECK(qattn_kfmt_fp16_encode(x) == qattn_fp16_encode(x), "fp16 encode %a", (double)x);
    CHECK(qattn_kfmt_bf16_encode(x) == qattn_bf16_encode(x), "bf16 encode %a", (double)x);
    CHECK(qattn_kfmt_e4m3_encode(x) == qattn_e4m3_encode(x), "e4m3 encode %a", (double)x);
    CHECK(qattn_kfmt_e5m2_encode(x) == qattn_e5m2_encode(x), "e5m2 encode %a", (double)x);
    CHECK(qattn_kfmt_e8m0_encode_ceil(x) == qattn_e8m0_encode_ceil(x), "e8m0 encode %a", (double)x);
    CHECK(qattn_kfmt_rne_int_clamp(x, 127.0f) == qattn_int8_encode(x), "int8 encode %a", (double)x);
    CHECK(qattn_kfmt_rne_int_clamp(x, 7.0f) == qattn_int4_encode(x), "int4 encode %a", (double)x);
    static const qattn_fmt fmts[] = {QATTN_FMT_FP32, QATTN_FMT_FP16, QATTN_FMT_BF16, QATTN_FMT_E4M3,
                                     QATTN_FMT_E5M2, QATTN_FMT_INT8, QATTN_FMT_INT4};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        CHECK(same(qattn_kfmt_round(fmts[i], x), qattn_fmt_round(fmts[i], x)), "round %s %a",
              qattn_fmt_name(fmts[i]), (double)x);
        if (x == x && x >= 0.0f)
            for (int e8 = 0; e8 < 2; e8++)
                CHECK(same(qattn_kfmt_scale_for(fmts[i], x, e8), qattn_scale_for(fmts[i], x, e8)),
                      "scale_for %s %a e8m0 %d", qattn_fmt_name(fmts[i]), (double)x, e8);
    }
    if ((f2u(x) & 0x7f800000u) != 0x7f800000u)
        CHECK(same(qattn_kfmt_cut22(x), qattn_fp22_cut(x)), "cut22 %a", (double)x);
}

/* the correction step's quotients (qattn_kfmt_quot): the e4m3 code of y is
 * that of fl(v / s), for every finite fp16 (bf16) v with |v| <= amax and
 * s = fl(amax / 448), amax every 37th positive finite fp16 (bf16) value with
 * s >= 2^-80 (qattn_kfmt_quot_ok); for fp16 also y = fl(v / s) bit for bit.
 * QATTN_TEST_ALL=1 in the environment: every amax (about 1e9 pairs per
 * format, 10 s each; none differed on 2026-11-25). */
static void check_quotients(int bf16)
{
    const char *all = getenv("QATTN_TEST_ALL");
    const unsigned step = all && !strcmp(all, "1") ? 1u : 37u;
    long long pairs = 0, badcode = 0, bady = 0;
    for (unsigned a = 1; a < (bf16 ? 0x7f80u : 0x7c00u); a += step) { /* positive finite */
        const float amax = bf16 ? qattn_kfmt_bf16_decode((uint16_t)a) : qattn_kfmt_fp16_decode((uint16_t)a);
        const float s = qattn_kfmt_scale_for(QATTN_FMT_E4M3, amax, 0), r = 1.0f / s;
        if (!qattn_kfmt_quot_ok(s))
            continue;
        for (unsigned h = 0; h < 0x10000u; h++) {
            const float v = bf16 ? qattn_kfmt_bf16_decode((uint16_t)h) : qattn_kfmt_fp16_decode((uint16_t)h);
            if (!(fabsf(v) <= amax))
                continue;
            const float y = qattn_kfmt_quot(v, s, r), z = v / s;
            pairs++;
            if (qattn_kfmt_e4m3_encode(y) != qattn_kfmt_e4m3_encode(z)) {
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

int main(void)
{
    check_quotients(0);
    check_quotients(1);
    for (unsigned c = 0; c < 256; c++) {
        CHECK(same(qattn_kfmt_e4m3_decode((uint8_t)c), qattn_e4m3_decode((uint8_t)c)), "e4m3 decode %u", c);
        CHECK(same(qattn_kfmt_e5m2_decode((uint8_t)c), qattn_e5m2_decode((uint8_t)c)), "e5m2 decode %u", c);
        CHECK(same(qattn_kfmt_e8m0_decode((uint8_t)c), qattn_e8m0_decode((uint8_t)c)), "e8m0 decode %u", c);
        float v = qattn_e4m3_decode((uint8_t)c);
        check_float(v);
        check_float(u2f(f2u(v) + 1));
        check_float(u2f(f2u(v) - 1));
        check_float(v * 1.0625f); /* midpoints and around */
    }
    for (unsigned c = 0; c < 65536; c++) {
        CHECK(same(qattn_kfmt_fp16_decode((uint16_t)c), qattn_fp16_decode((uint16_t)c)), "fp16 decode %u", c);
        CHECK(same(qattn_kfmt_bf16_decode((uint16_t)c), qattn_bf16_decode((uint16_t)c)), "bf16 decode %u", c);
        float h = qattn_fp16_decode((uint16_t)c);
        uint32_t u = f2u(h);
        check_float(h);
        check_float(u2f(u + 0x1000u)); /* the fp16 midpoint */
        check_float(u2f(u + 0x0fffu));
        check_float(u2f(u + 0x1001u));
    }
    for (int i = 0; i < 2000000; i++)
        check_float(u2f(rnd32()));
    for (int i = -300; i <= 300; i++) {
        check_float((float)i * 0.5f);
        check_float((float)i * 0.25f + 0.125f);
    }

    /* group map */
    static const char *specs[] = {"tensor", "token", "block:64", "warp:32", "thread:32/8/1", "thread:64/8/2",
                                  "thread:16/8/1", "thread:128/8/2", "thread:64/16/4", "channel", "token,ch:32",
                                  "block:128,ch:16,e8m0"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        qattn_group g;
        qattn_err err;
        if (qattn_group_parse(specs[s], &g, &err)) {
            fprintf(stderr, "bad spec %s\n", specs[s]);
            return 2;
        }
        for (size_t n = 1; n < 300; n += 37)
            CHECK(qattn_kgroup_ntok(g, (int64_t)n) == (int64_t)qattn_group_ntok(&g, n), "ntok %s %zu", specs[s], n);
        CHECK(qattn_kgroup_nch(g, 128) == (int)qattn_group_nch(&g, 128), "nch %s", specs[s]);
        for (size_t t = 0; t < 600; t++)
            CHECK(qattn_kgroup_tok_index(g, (int64_t)t) == (int64_t)qattn_group_tok_index(&g, t), "tok_index %s %zu",
                  specs[s], t);
        for (int c = 0; c < 128; c++)
            CHECK(qattn_kgroup_ch_index(g, c) == (int)qattn_group_ch_index(&g, (size_t)c), "ch_index %s %d",
                  specs[s], c);
    }

    /* mask ranges */
    static const char *masks[] = {"none", "causal", "causal-br", "window:5,0", "window:0,3", "window:17,9"};
    static const size_t lens[][2] = {{1, 1}, {7, 7}, {40, 100}, {100, 40}, {129, 129}};
    for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++) {
        qattn_mask mk;
        qattn_err err;
        if (qattn_mask_parse(masks[m], &mk, &err))
            return 2;
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            for (size_t i = 0; i < lens[l][0]; i++) {
                size_t lo, hi;
                int64_t klo, khi;
                qattn_mask_range(&mk, i, lens[l][0], lens[l][1], &lo, &hi);
                qattn_kmask_range(mk, (int64_t)i, (int64_t)lens[l][0], (int64_t)lens[l][1], &klo, &khi);
                CHECK(klo == (int64_t)lo && khi == (int64_t)hi, "mask %s %zu/%zu row %zu: [%lld, %lld) vs [%zu, %zu)",
                      masks[m], lens[l][0], lens[l][1], i, (long long)klo, (long long)khi, lo, hi);
            }
    }
    return check_done();
}
