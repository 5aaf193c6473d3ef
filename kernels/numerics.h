/* Number formats, scale groups and masks for the kernels: the bit-exact
 * encoders of quant/src/formats.c, the group map of quant/src/group.c and the
 * mask ranges of quant/src/mask.c, as inline functions that compile for the
 * host (plain C11 or C++) and for the device (nvcc, hipcc). They must round
 * exactly where the CPU emulation rounds: kernels/test_numerics.c checks them
 * against quant/ over every fp8/fp16/bf16 code and random floats.
 *
 * Only bit operations and exactly specified float operations are used (the
 * division amax / qmax, small integer times a power of two), so the results do
 * not depend on the compiler's rounding mode; the kernels are compiled without
 * multiply-add contraction (nvcc --fmad=false, clang -ffp-contract=off). */
#ifndef QATTN_KERNELS_NUMERICS_H
#define QATTN_KERNELS_NUMERICS_H

#include <math.h> /* fmaf */
#include <stdint.h>

#include "qattn/attn.h"    /* qattn_mask */
#include "qattn/formats.h" /* qattn_fmt */
#include "qattn/group.h"   /* qattn_group */

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__) || defined(QATTN_HIP_SIM)
#define QATTN_HD __host__ __device__
#else
#define QATTN_HD
#endif
#define QATTN_KFN static inline QATTN_HD

/* ---- bits ---- */

QATTN_KFN uint32_t qattn_kfmt_f2u(float x)
{
    uint32_t u;
    __builtin_memcpy(&u, &x, sizeof u);
    return u;
}

QATTN_KFN float qattn_kfmt_u2f(uint32_t u)
{
    float x;
    __builtin_memcpy(&x, &u, sizeof x);
    return x;
}

#define QATTN_KFMT_ABS 0x7fffffffu
#define QATTN_KFMT_INF 0x7f800000u
#define QATTN_KFMT_QNAN 0x7fc00000u

/* v >> s rounded to nearest even, 1 <= s <= 31 (formats.c rne_shift) */
QATTN_KFN uint32_t qattn_kfmt_rne_shift(uint32_t v, unsigned s)
{
    uint32_t half_m1 = (1u << (s - 1u)) - 1u;
    return (v + half_m1 + ((v >> s) & 1u)) >> s;
}

/* magnitude code of a narrow float (M mantissa bits, bias B) for finite |x|
 * with bits u, saturating at maxcode (formats.c enc_mag) */
QATTN_KFN uint32_t qattn_kfmt_enc_mag(uint32_t u, unsigned M, int B, uint32_t maxcode)
{
    int e = (int)(u >> 23);
    uint32_t code;
    if (e >= 128 - B) {
        code = qattn_kfmt_rne_shift(u, 23u - M) - ((uint32_t)(127 - B) << M);
    } else {
        int s = 151 - (int)M - B - e;
        if (s > 24)
            return 0;
        code = qattn_kfmt_rne_shift((u & 0x7fffffu) | 0x800000u, (unsigned)s);
    }
    return code > maxcode ? maxcode : code;
}

/* binary32 bits of a finite magnitude code (formats.c dec_mag) */
QATTN_KFN uint32_t qattn_kfmt_dec_mag(uint32_t mag, unsigned M, int B, float min_sub)
{
    if (mag < (1u << M))
        return qattn_kfmt_f2u((float)mag * min_sub);
    return (mag << (23u - M)) + ((uint32_t)(127 - B) << 23);
}

/* ---- fp16 ---- */

QATTN_KFN uint16_t qattn_kfmt_fp16_encode(float x)
{
    uint32_t u = qattn_kfmt_f2u(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= QATTN_KFMT_ABS;
    if (u > QATTN_KFMT_INF)
        return 0x7e00u;
    if (u == QATTN_KFMT_INF)
        return (uint16_t)(sign | 0x7bffu);
    return (uint16_t)(sign | qattn_kfmt_enc_mag(u, 10, 15, 0x7bffu));
}

QATTN_KFN float qattn_kfmt_fp16_decode(uint16_t h)
{
    uint32_t mag = h & 0x7fffu;
    uint32_t bits = qattn_kfmt_dec_mag(mag, 10, 15, 0x1p-24f);
    if (mag >= 0x7c00u)
        bits = QATTN_KFMT_INF | ((mag & 0x3ffu) << 13) | ((mag & 0x3ffu) ? 0x400000u : 0u);
    return qattn_kfmt_u2f(((uint32_t)(h & 0x8000u) << 16) | bits);
}

/* ---- bf16 ---- */

QATTN_KFN uint16_t qattn_kfmt_bf16_encode(float x)
{
    uint32_t u = qattn_kfmt_f2u(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= QATTN_KFMT_ABS;
    if (u > QATTN_KFMT_INF)
        return 0x7fc0u;
    uint32_t r = qattn_kfmt_rne_shift(u, 16);
    return (uint16_t)(sign | (r > 0x7f7fu ? 0x7f7fu : r));
}

QATTN_KFN float qattn_kfmt_bf16_decode(uint16_t b)
{
    return qattn_kfmt_u2f((uint32_t)b << 16);
}

/* ---- fp8 e4m3 ("fn") ---- */

QATTN_KFN uint8_t qattn_kfmt_e4m3_encode(float x)
{
    uint32_t u = qattn_kfmt_f2u(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    u &= QATTN_KFMT_ABS;
    if (u > QATTN_KFMT_INF)
        return 0x7fu;
    if (u == QATTN_KFMT_INF)
        return (uint8_t)(sign | 0x7eu);
    return (uint8_t)(sign | qattn_kfmt_enc_mag(u, 3, 7, 0x7eu));
}

QATTN_KFN float qattn_kfmt_e4m3_decode(uint8_t c)
{
    uint32_t mag = c & 0x7fu;
    uint32_t bits = qattn_kfmt_dec_mag(mag, 3, 7, 0x1p-9f);
    bits = mag == 0x7fu ? QATTN_KFMT_QNAN : bits;
    return qattn_kfmt_u2f(((uint32_t)(c & 0x80u) << 24) | bits);
}

/* ---- fp8 e5m2 ---- */

QATTN_KFN uint8_t qattn_kfmt_e5m2_encode(float x)
{
    uint32_t u = qattn_kfmt_f2u(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    u &= QATTN_KFMT_ABS;
    if (u > QATTN_KFMT_INF)
        return 0x7eu;
    if (u == QATTN_KFMT_INF)
        return (uint8_t)(sign | 0x7bu);
    return (uint8_t)(sign | qattn_kfmt_enc_mag(u, 2, 15, 0x7bu));
}

QATTN_KFN float qattn_kfmt_e5m2_decode(uint8_t c)
{
    uint32_t mag = c & 0x7fu;
    uint32_t bits = qattn_kfmt_dec_mag(mag, 2, 15, 0x1p-16f);
    if (mag >= 0x7cu)
        bits = mag == 0x7cu ? QATTN_KFMT_INF : QATTN_KFMT_QNAN;
    return qattn_kfmt_u2f(((uint32_t)(c & 0x80u) << 24) | bits);
}

/* ---- e8m0 (power-of-two scales) ---- */

QATTN_KFN uint8_t qattn_kfmt_e8m0_encode_ceil(float x)
{
    uint32_t u = qattn_kfmt_f2u(x);
    if ((u & QATTN_KFMT_ABS) > QATTN_KFMT_INF)
        return 0xffu;
    if ((u & 0x80000000u) || u == 0)
        return 0;
    uint32_t e = u >> 23;
    if (e == 0)
        return u > 0x00400000u ? 1u : 0u;
    e += (u & 0x7fffffu) != 0;
    return (uint8_t)(e > 254u ? 254u : e);
}

QATTN_KFN float qattn_kfmt_e8m0_decode(uint8_t c)
{
    if (c == 0xffu)
        return qattn_kfmt_u2f(QATTN_KFMT_QNAN);
    if (c == 0)
        return qattn_kfmt_u2f(0x00400000u);
    return qattn_kfmt_u2f((uint32_t)c << 23);
}

/* ---- integers: RNE, clamped to [-qmax, qmax], NaN -> 0 ---- */

QATTN_KFN int qattn_kfmt_rne_int_clamp(float x, float qmax)
{
    uint32_t u = qattn_kfmt_f2u(x);
    uint32_t a = u & QATTN_KFMT_ABS;
    if (a > QATTN_KFMT_INF)
        return 0;
    uint32_t qbits = qattn_kfmt_f2u(qmax);
    a = a < qbits ? a : qbits;
    int s = 150 - (int)(a >> 23);
    s = s > 31 ? 31 : s;
    int v = (int)qattn_kfmt_rne_shift((a & 0x7fffffu) | 0x800000u, (unsigned)s);
    int neg = -(int)(u >> 31);
    return (v ^ neg) - neg;
}

/* ---- accumulator roundings of the emulation (emulate.c cut22, round16) ---- */

/* fp22: the low 10 mantissa bits cleared (toward zero) */
QATTN_KFN float qattn_kfmt_cut22(float x)
{
    return qattn_kfmt_u2f(qattn_kfmt_f2u(x) & 0xFFFFFC00u);
}

QATTN_KFN float qattn_kfmt_round16(float x)
{
    return qattn_kfmt_fp16_decode(qattn_kfmt_fp16_encode(x));
}

/* ---- format table ---- */

QATTN_KFN float qattn_kfmt_qmax(int f)
{
    switch (f) {
    case QATTN_FMT_FP16: return 65504.0f;
    case QATTN_FMT_E4M3: return 448.0f;
    case QATTN_FMT_E5M2: return 57344.0f;
    case QATTN_FMT_INT8: return 127.0f;
    case QATTN_FMT_INT4: return 7.0f;
    default: return 1.0f; /* not used for unscaled formats */
    }
}

QATTN_KFN int qattn_kfmt_is_scaled(int f)
{
    return f == QATTN_FMT_INT8 || f == QATTN_FMT_INT4 || f == QATTN_FMT_E4M3 || f == QATTN_FMT_E5M2;
}

/* decode(encode(x)) for f (formats.c qattn_fmt_round), e8m0 excluded */
QATTN_KFN float qattn_kfmt_round(int f, float x)
{
    switch (f) {
    case QATTN_FMT_FP16: return qattn_kfmt_fp16_decode(qattn_kfmt_fp16_encode(x));
    case QATTN_FMT_BF16: return qattn_kfmt_bf16_decode(qattn_kfmt_bf16_encode(x));
    case QATTN_FMT_E4M3: return qattn_kfmt_e4m3_decode(qattn_kfmt_e4m3_encode(x));
    case QATTN_FMT_E5M2: return qattn_kfmt_e5m2_decode(qattn_kfmt_e5m2_encode(x));
    case QATTN_FMT_INT8: return (float)qattn_kfmt_rne_int_clamp(x, 127.0f);
    case QATTN_FMT_INT4: return (float)qattn_kfmt_rne_int_clamp(x, 7.0f);
    default: return x; /* fp32 */
    }
}

/* group scale for max |x| = amax (formats.c qattn_scale_for) */
QATTN_KFN float qattn_kfmt_scale_for(int f, float amax, int e8m0)
{
    if (!qattn_kfmt_is_scaled(f))
        return 1.0f;
    if (!(amax > 0.0f))
        return 0.0f;
    float s = amax / qattn_kfmt_qmax(f);
    if (e8m0)
        return qattn_kfmt_e8m0_decode(qattn_kfmt_e8m0_encode_ceil(s));
    return s > 0.0f ? s : 0x1p-149f; /* FLT_TRUE_MIN */
}

/* fl(v / s) without a division (the V^T e4m3 codes of the lean and the
 * streamed kernel), by the correction step for every value: with
 * r = fl(1 / s), q = fl(v r) and e = fl(q s - v) (exact by one fma),
 * y = fl(q + e (-r)) is fl(v / s) while |v| >= 2^-100. Below that, with
 * s >= 2^-80, |v / s| < 2^-20: y keeps v's sign and an 8-bit float code of
 * y is that of fl(v / s) (+-0). Zeros keep their sign because e is q s - v,
 * not v - q s, and the sign goes on r: for v = -0, e = +0 and
 * y = +0 (-r) + -0 = -0 (g++ -O3 turned -fma(q, s, -v) r into a form that
 * gives +0). qattn_kfmt_quot_ok(s): s in [2^-80, FLT_MAX], where this holds
 * (a zero scale is out: quant/ writes +0 for a zero group).
 * test_kernels_numerics checks the e4m3 codes against fl(v / s). */
QATTN_KFN int qattn_kfmt_quot_ok(float s)
{
    return s >= 0x1p-80f && s <= 3.40282347e38f;
}

QATTN_KFN float qattn_kfmt_quot(float v, float s, float r)
{
    const float q = v * r;
    return fmaf(fmaf(q, s, -v), -r, q);
}

/* ---- scale groups (group.c) ---- */

QATTN_KFN int64_t qattn_kgroup_ntok(qattn_group g, int64_t n)
{
    switch (g.tok) {
    case QATTN_TOK_TOKEN: return n;
    case QATTN_TOK_BLOCK:
    case QATTN_TOK_WARP: return (n + g.b - 1) / g.b;
    case QATTN_TOK_THREAD: return (n + g.b - 1) / g.b * (int64_t)(g.s / g.w);
    default: return 1; /* tensor, channel */
    }
}

QATTN_KFN int qattn_kgroup_nch(qattn_group g, int d)
{
    return g.ch > 0 ? (d + g.ch - 1) / g.ch : 1;
}

QATTN_KFN int64_t qattn_kgroup_tok_index(qattn_group g, int64_t t)
{
    switch (g.tok) {
    case QATTN_TOK_TOKEN: return t;
    case QATTN_TOK_BLOCK:
    case QATTN_TOK_WARP: return t / g.b;
    case QATTN_TOK_THREAD: {
        int64_t blk = t / g.b, in = t % g.b;
        return blk * (int64_t)(g.s / g.w) + (in % g.s) / g.w;
    }
    default: return 0;
    }
}

QATTN_KFN int qattn_kgroup_ch_index(qattn_group g, int c)
{
    return g.ch > 0 ? c / g.ch : 0;
}

/* ---- sequences: sequence b's first token and length, from cu (the
 * [nseq + 1] offsets of variable lengths) or, for cu == NULL, equal
 * lengths n (the first token then counted by the batch stride) ---- */

QATTN_KFN void qattn_kseq(const int *cu, int b, int n, int64_t *t0, int *len)
{
    *t0 = cu ? cu[b] : 0;
    *len = cu ? cu[b + 1] - cu[b] : n;
}

/* ---- masks (mask.c qattn_mask_range): keys [*lo, *hi) query i may see ---- */

QATTN_KFN void qattn_kmask_range(qattn_mask m, int64_t i, int64_t sq, int64_t sk, int64_t *lo, int64_t *hi)
{
    int64_t a = 0, b = sk, shift = sk - sq;
    switch (m.kind) {
    case QATTN_MASK_CAUSAL: b = i + 1; break;
    case QATTN_MASK_CAUSAL_BR: b = i + shift + 1; break;
    case QATTN_MASK_WINDOW:
        a = i + shift - m.left;
        b = i + shift + m.right + 1;
        break;
    default: break;
    }
    if (a < 0)
        a = 0;
    if (b > sk)
        b = sk;
    if (b < a)
        b = a;
    *lo = a;
    *hi = b;
}

#endif
