/* The one definition of qattn's number formats, scale-group map and mask
 * ranges, as inline functions that compile for the host (C11, C++) and for
 * the GPU kernels (nvcc, hipcc, the host simulation). quant/src/formats.c,
 * group.c, mask.c and emulate.c are built on these, and so are the kernels,
 * so the emulation and the kernels round alike by construction.
 *
 * Everything works on the IEEE-754 binary32 bit pattern of the input, so the
 * results do not depend on the compiler, on half-precision support or on the
 * rounding mode. The only float arithmetic is exact (small integer times a
 * power of two) or explicitly specified (amax / qmax in qattn_num_scale_for,
 * the fma steps of qattn_num_quot); callers compile without multiply-add
 * contraction (gcc -ffp-contract=off, nvcc --fmad=false).
 *
 * binary32:  s | eeeeeeee (bias 127) | mmm...m (23 bits)
 * Narrow floats (sign | exponent | mantissa, subnormals at e = 0):
 *   fp16  1|5|10  bias 15   max 65504  = 0x7bff, inf 0x7c00, NaN 0x7e00
 *   bf16  1|8|7   bias 127  max 0x7f7f = 0x1.fep127, inf 0x7f80, NaN 0x7fc0
 *   e4m3  1|4|3   bias 7    max 448    = 0x7e, no inf, NaN 0x7f (S.1111.111)
 *   e5m2  1|5|2   bias 15   max 57344  = 0x7b, inf 0x7c, NaN 0x7d..0x7f
 *   e8m0  8 exponent bits, no sign / mantissa: 2^(c - 127), 0xff = NaN
 * Rounding: to nearest, ties to even, then saturation to the largest finite
 * magnitude (+-Inf saturates too). NaN goes to the format's positive NaN
 * code (0 for the integer formats); -0 keeps its sign. */
#ifndef QATTN_NUMERICS_H
#define QATTN_NUMERICS_H

#include <math.h> /* fmaf */
#include <stdint.h>

#include "qattn/attn.h"    /* qattn_mask */
#include "qattn/formats.h" /* qattn_fmt */
#include "qattn/group.h"   /* qattn_group */

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__) || (defined(QATTN_HIP_SIM) && defined(__cplusplus))
#define QATTN_HD __host__ __device__
#else
#define QATTN_HD
#endif
#define QATTN_NUM_FN static inline QATTN_HD

/* ---- bits ---- */

QATTN_NUM_FN uint32_t qattn_num_f2u(float x)
{
    uint32_t u;
    __builtin_memcpy(&u, &x, sizeof u);
    return u;
}

QATTN_NUM_FN float qattn_num_u2f(uint32_t u)
{
    float x;
    __builtin_memcpy(&x, &u, sizeof x);
    return x;
}

#define QATTN_NUM_SIGN 0x80000000u
#define QATTN_NUM_ABS 0x7fffffffu
#define QATTN_NUM_INF 0x7f800000u
#define QATTN_NUM_QNAN 0x7fc00000u

/* v >> s rounded to nearest, ties to even, for 1 <= s <= 31 with
 * v + 2^(s-1) < 2^32. Adding (half - 1) rounds up everything strictly above
 * the midpoint; adding the kept lsb on top rounds an exact tie up only when
 * the truncated result is odd. A carry into the exponent field is what a
 * mantissa overflow needs. */
QATTN_NUM_FN uint32_t qattn_num_rne_shift(uint32_t v, unsigned s)
{
    uint32_t half_m1 = (1u << (s - 1u)) - 1u;
    return (v + half_m1 + ((v >> s) & 1u)) >> s;
}

/* Magnitude code of a narrow float with M mantissa bits and bias B for a
 * finite |x| with bits u, saturating at maxcode. Normal target: shift out
 * 23 - M mantissa bits with RNE and rebias the exponent field. Subnormal
 * target: the significand 1.m in units of the minimum subnormal,
 * (2^23 | m) >> s; for s > 24 the value is below half of it and gives 0. */
QATTN_NUM_FN uint32_t qattn_num_enc_mag(uint32_t u, unsigned M, int B, uint32_t maxcode)
{
    int e = (int)(u >> 23);
    uint32_t code;
    if (e >= 128 - B) {
        code = qattn_num_rne_shift(u, 23u - M) - ((uint32_t)(127 - B) << M);
    } else {
        int s = 151 - (int)M - B - e;
        if (s > 24)
            return 0;
        code = qattn_num_rne_shift((u & 0x7fffffu) | 0x800000u, (unsigned)s);
    }
    return code > maxcode ? maxcode : code;
}

/* binary32 bits of a finite magnitude code (callers patch Inf / NaN); a
 * subnormal code is m * min_sub, an exact product */
QATTN_NUM_FN uint32_t qattn_num_dec_mag(uint32_t mag, unsigned M, int B, float min_sub)
{
    if (mag < (1u << M))
        return qattn_num_f2u((float)mag * min_sub);
    return (mag << (23u - M)) + ((uint32_t)(127 - B) << 23);
}

/* ---- fp16 ---- */

QATTN_NUM_FN uint16_t qattn_num_fp16_encode(float x)
{
    uint32_t u = qattn_num_f2u(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= QATTN_NUM_ABS;
    if (u > QATTN_NUM_INF)
        return 0x7e00u;
    if (u == QATTN_NUM_INF)
        return (uint16_t)(sign | 0x7bffu);
    return (uint16_t)(sign | qattn_num_enc_mag(u, 10, 15, 0x7bffu));
}

QATTN_NUM_FN float qattn_num_fp16_decode(uint16_t h)
{
    uint32_t mag = h & 0x7fffu;
    uint32_t bits = qattn_num_dec_mag(mag, 10, 15, 0x1p-24f);
    if (mag >= 0x7c00u) /* Inf, or NaN (made quiet, payload kept) */
        bits = QATTN_NUM_INF | ((mag & 0x3ffu) << 13) | ((mag & 0x3ffu) ? 0x400000u : 0u);
    return qattn_num_u2f(((uint32_t)(h & 0x8000u) << 16) | bits);
}

/* ---- bf16: the top half of a binary32 ---- */

QATTN_NUM_FN uint16_t qattn_num_bf16_encode(float x)
{
    uint32_t u = qattn_num_f2u(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= QATTN_NUM_ABS;
    if (u > QATTN_NUM_INF)
        return 0x7fc0u;
    uint32_t r = qattn_num_rne_shift(u, 16);
    return (uint16_t)(sign | (r > 0x7f7fu ? 0x7f7fu : r));
}

QATTN_NUM_FN float qattn_num_bf16_decode(uint16_t b)
{
    return qattn_num_u2f((uint32_t)b << 16);
}

/* ---- fp8 e4m3 ("fn") ---- */

QATTN_NUM_FN uint8_t qattn_num_e4m3_encode(float x)
{
    uint32_t u = qattn_num_f2u(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    u &= QATTN_NUM_ABS;
    if (u > QATTN_NUM_INF)
        return 0x7fu;
    if (u == QATTN_NUM_INF)
        return (uint8_t)(sign | 0x7eu);
    return (uint8_t)(sign | qattn_num_enc_mag(u, 3, 7, 0x7eu));
}

QATTN_NUM_FN float qattn_num_e4m3_decode(uint8_t c)
{
    uint32_t mag = c & 0x7fu;
    uint32_t bits = qattn_num_dec_mag(mag, 3, 7, 0x1p-9f);
    bits = mag == 0x7fu ? QATTN_NUM_QNAN : bits;
    return qattn_num_u2f(((uint32_t)(c & 0x80u) << 24) | bits);
}

/* ---- fp8 e5m2 ---- */

QATTN_NUM_FN uint8_t qattn_num_e5m2_encode(float x)
{
    uint32_t u = qattn_num_f2u(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    u &= QATTN_NUM_ABS;
    if (u > QATTN_NUM_INF)
        return 0x7eu;
    if (u == QATTN_NUM_INF)
        return (uint8_t)(sign | 0x7bu);
    return (uint8_t)(sign | qattn_num_enc_mag(u, 2, 15, 0x7bu));
}

QATTN_NUM_FN float qattn_num_e5m2_decode(uint8_t c)
{
    uint32_t mag = c & 0x7fu;
    uint32_t bits = qattn_num_dec_mag(mag, 2, 15, 0x1p-16f);
    if (mag >= 0x7cu) /* 0x7c Inf, 0x7d..0x7f NaN */
        bits = mag == 0x7cu ? QATTN_NUM_INF : QATTN_NUM_QNAN;
    return qattn_num_u2f(((uint32_t)(c & 0x80u) << 24) | bits);
}

/* ---- e8m0: code c means 2^(c - 127), the binary32 exponent field ---- */

/* the power of two >= x for x > 0 (2^-127..2^127); x <= 0 gives code 0, the
 * "zero group" marker, never a scale; NaN gives 0xff */
QATTN_NUM_FN uint8_t qattn_num_e8m0_encode_ceil(float x)
{
    uint32_t u = qattn_num_f2u(x);
    if ((u & QATTN_NUM_ABS) > QATTN_NUM_INF)
        return 0xffu;
    if ((u & QATTN_NUM_SIGN) || u == 0)
        return 0;
    uint32_t e = u >> 23;
    if (e == 0) /* binary32 subnormal: ceil is 2^-126 above 2^-127 */
        return u > 0x00400000u ? 1u : 0u;
    e += (u & 0x7fffffu) != 0;
    return (uint8_t)(e > 254u ? 254u : e); /* 255 and +Inf clamp to 2^127 */
}

QATTN_NUM_FN float qattn_num_e8m0_decode(uint8_t c)
{
    if (c == 0xffu)
        return qattn_num_u2f(QATTN_NUM_QNAN);
    if (c == 0)
        return qattn_num_u2f(0x00400000u); /* 2^-127, a binary32 subnormal */
    return qattn_num_u2f((uint32_t)c << 23);
}

/* ---- integers ---- */

/* RNE of x to an integer, clamped to [-qmax, qmax] (qmax < 2^23); NaN -> 0.
 * |x| is clamped to qmax first; then (2^23 | m) >> (23 - e) with RNE, the
 * shift capped at 31 so that zero and tiny inputs need no branch. */
QATTN_NUM_FN int qattn_num_rne_int_clamp(float x, float qmax)
{
    uint32_t u = qattn_num_f2u(x);
    uint32_t a = u & QATTN_NUM_ABS;
    if (a > QATTN_NUM_INF)
        return 0;
    uint32_t qbits = qattn_num_f2u(qmax); /* non-negative floats order like their bits */
    a = a < qbits ? a : qbits;
    int s = 150 - (int)(a >> 23);
    s = s > 31 ? 31 : s;
    int v = (int)qattn_num_rne_shift((a & 0x7fffffu) | 0x800000u, (unsigned)s);
    int neg = -(int)(u >> 31); /* conditional negate without a branch */
    return (v ^ neg) - neg;
}

/* ---- accumulator roundings ---- */

/* fp22 = 1 | 8 | 13, as the Hopper / Ada fp8 tensor cores keep their
 * accumulators: the low 10 mantissa bits of a finite value cleared
 * (truncation toward zero); Inf and NaN unchanged (a NaN whose payload lies
 * only in those bits stays NaN rather than turning into Inf). */
QATTN_NUM_FN float qattn_num_cut22(float x)
{
    uint32_t u = qattn_num_f2u(x);
    return (u & QATTN_NUM_INF) == QATTN_NUM_INF ? x : qattn_num_u2f(u & 0xFFFFFC00u);
}

/* The same function on the bits u of an arithmetic result, such as the
 * accumulator's sum a + p v, in one operation (the emulation's and the
 * kernels' accumulation chains; a macro, so that GCC vector code shares it):
 * IEEE 754 operations deliver only quiet NaNs, whose bit 22 survives the
 * mask, and Inf has no low bits, so Inf stays Inf and NaN stays NaN (only
 * its payload's low bits, which carry no meaning, may go). tests/test_numerics
 * checks the two against each other on sums and products of random bit
 * patterns, signalling NaNs among them. */
#define QATTN_NUM_CUT22_SUM_BITS(u) ((u) & 0xFFFFFC00u)

QATTN_NUM_FN float qattn_num_cut22_sum(float x)
{
    return qattn_num_u2f(QATTN_NUM_CUT22_SUM_BITS(qattn_num_f2u(x)));
}

/* One k-step of the NVIDIA fp8 tensor core (Hopper e4m3 wgmma, f32
 * accumulator): acc plus the n <= 32 products a[c] b[c] of e4m3 values, as
 * the hardware sums them (kernels/probes/wgmma_fp8_sum.*: bit-exact on 40960
 * H100 sums): E = the largest of acc's exponent and, over the nonzero
 * products, the sum of the factors' exponent fields (subnormals -6); acc and
 * each product truncated toward zero to a multiple of 2^(E - 13); the sum
 * (exact) cut to 13 mantissa bits. Every term is a multiple of 2^(E - 13)
 * below 2^(E + 2), so the float arithmetic here is exact. */
QATTN_NUM_FN int qattn_num_fp8_exp(float x)
{
    const int e = (int)((qattn_num_f2u(x) >> 23) & 0xFFu) - 127;
    return e < -6 ? -6 : e;
}
/* m <= 16 accumulators of qattn_num_fp8_ksteps (device code, the host simulation and the host's
 * tail of fewer than 16 channels) */
QATTN_NUM_FN void qattn_num_fp8_ksteps_m(float *acc, int m, const float *a, const float *b, int bstride, int n)
{
    int e[16]; /* E; -1000: no nonzero term */
    float s[16], up[16];
    for (int c = 0; c < m; c++)
        e[c] = acc[c] != 0.0f ? (int)((qattn_num_f2u(acc[c]) >> 23) & 0xFFu) - 127 : -1000;
    for (int j = 0; j < n; j++) {
        if (a[j] == 0.0f)
            continue;
        const int ea = qattn_num_fp8_exp(a[j]);
        const float *bj = b + (int64_t)j * bstride;
        for (int c = 0; c < m; c++) {
            const int ep = bj[c] != 0.0f ? ea + qattn_num_fp8_exp(bj[c]) : -1000;
            e[c] = ep > e[c] ? ep : e[c];
        }
    }
    for (int c = 0; c < m; c++) { /* 2^(13 - E) in the exponent bits (E >= -100: 13 - E <= 113) */
        const int ec = e[c] < -100 ? -100 : e[c]; /* a subnormal acc alone (not met in attention) */
        up[c] = qattn_num_u2f((uint32_t)(127 + 13 - ec) << 23);
        s[c] = truncf(acc[c] * up[c]);
    }
    for (int j = 0; j < n; j++) {
        const float *bj = b + (int64_t)j * bstride;
        for (int c = 0; c < m; c++)
            s[c] += truncf(a[j] * bj[c] * up[c]);
    }
    for (int c = 0; c < m; c++) { /* times 2^(E - 13) (>= 2^-113), cut; no term at all: acc unchanged */
        const int ec = e[c] < -100 ? -100 : e[c];
        const float x = qattn_num_cut22(s[c] * qattn_num_u2f((uint32_t)(127 - 13 + ec) << 23));
        acc[c] = e[c] != -1000 ? x : acc[c];
    }
}
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(QATTN_HIP_SIM)
#include <string.h> /* memcpy */
#define QATTN_NUM_FP8_KSTEPS_V16 1
/* the same for 16 accumulators as GCC vectors (host code: GCC left the scalar loops unvectorized,
 * 1.5 ns a product); the same operations lane by lane on finite values, so the same bits
 * (tests/test_numerics), truncation by the conversion to int32 */
typedef float qattn_num_v16f __attribute__((vector_size(64)));
typedef int32_t qattn_num_v16i __attribute__((vector_size(64)));
typedef uint32_t qattn_num_v16u __attribute__((vector_size(64)));
static inline qattn_num_v16i qattn_num_v16_sel(qattn_num_v16i m, qattn_num_v16i x, qattn_num_v16i y)
{
    return (m & x) | (~m & y);
}
static inline void qattn_num_fp8_ksteps16(float *acc, const float *a, const float *b, int bstride, int n)
{
    qattn_num_v16f av, bv;
    memcpy(&av, acc, sizeof av);
    const qattn_num_v16i none = (qattn_num_v16i){0} - 1000, lo = (qattn_num_v16i){0} - 6;
    qattn_num_v16i e = (qattn_num_v16i)(((qattn_num_v16u)av >> 23) & 0xFFu) - 127;
    e = qattn_num_v16_sel(av != 0.0f, e, none);
    for (int j = 0; j < n; j++) {
        if (a[j] == 0.0f)
            continue;
        memcpy(&bv, b + (int64_t)j * bstride, sizeof bv);
        qattn_num_v16i eb = (qattn_num_v16i)(((qattn_num_v16u)bv >> 23) & 0xFFu) - 127;
        eb = qattn_num_v16_sel(eb < lo, lo, eb) + qattn_num_fp8_exp(a[j]);
        eb = qattn_num_v16_sel(bv != 0.0f, eb, none);
        e = qattn_num_v16_sel(eb > e, eb, e);
    }
    const qattn_num_v16i ec = qattn_num_v16_sel(e < -100, (qattn_num_v16i){0} - 100, e);
    const qattn_num_v16f up = (qattn_num_v16f)((qattn_num_v16u)(127 + 13 - ec) << 23),
                         down = (qattn_num_v16f)((qattn_num_v16u)(127 - 13 + ec) << 23);
    /* toward zero by the conversion to int32 (every |term| here < 2^15) */
    qattn_num_v16f sum = __builtin_convertvector(__builtin_convertvector(av * up, qattn_num_v16i), qattn_num_v16f);
    for (int j = 0; j < n; j++) {
        memcpy(&bv, b + (int64_t)j * bstride, sizeof bv);
        sum += __builtin_convertvector(__builtin_convertvector(a[j] * bv * up, qattn_num_v16i), qattn_num_v16f);
    }
    const qattn_num_v16u xu = (qattn_num_v16u)(sum * down);
    av = (qattn_num_v16f)qattn_num_v16_sel(e != -1000, (qattn_num_v16i)QATTN_NUM_CUT22_SUM_BITS(xu), (qattn_num_v16i)av);
    memcpy(acc, &av, sizeof av);
}
#endif
/* nc accumulators at once (channels of a P.V: acc[c] plus a[j] b[j bstride + c] over the n <= 32
 * keys j of one k-step), each as qattn_num_fp8_kstep sums; in blocks of 16 channels; finite
 * values (the host's vector form truncates by a conversion to int32) */
QATTN_NUM_FN void qattn_num_fp8_ksteps(float *acc, int nc, const float *a, const float *b, int bstride, int n)
{
    int c0 = 0;
    for (; c0 + 16 <= nc; c0 += 16)
#ifdef QATTN_NUM_FP8_KSTEPS_V16
        qattn_num_fp8_ksteps16(acc + c0, a, b + c0, bstride, n);
#else
        qattn_num_fp8_ksteps_m(acc + c0, 16, a, b + c0, bstride, n);
#endif
    if (c0 < nc)
        qattn_num_fp8_ksteps_m(acc + c0, nc - c0, a, b + c0, bstride, n);
}
QATTN_NUM_FN float qattn_num_fp8_kstep(float acc, const float *a, const float *b, int n)
{
    qattn_num_fp8_ksteps(&acc, 1, a, b, 1, n);
    return acc;
}

/* fp16 rounding of the bits u of x with 2^-14 <= |x| < 2^15 (the range in
 * which the result is a normal fp16; exponent field 113..141): RNE of the
 * low 13 mantissa bits. Scalar and GCC vector code share it. */
#define QATTN_NUM_ROUND16_NORMAL_BITS(u) (((u) + 0x0FFFu + (((u) >> 13) & 1u)) & 0xFFFFE000u)

/* decode(encode(x)) for fp16: the bit form in the normal range, the encoder
 * elsewhere */
QATTN_NUM_FN float qattn_num_round16(float x)
{
    uint32_t u = qattn_num_f2u(x), e = (u >> 23) & 0xffu;
    if (e >= 113u && e <= 141u)
        return qattn_num_u2f(QATTN_NUM_ROUND16_NORMAL_BITS(u));
    return qattn_num_fp16_decode(qattn_num_fp16_encode(x));
}

/* An fp16 accumulator o rescaled by the online softmax's alpha as
 * SageAttention's fp16-accumulator kernels do it (update_mdo with
 * use_half_o_scale: alpha rounded to fp16, then one f16 multiply,
 * __hmul2): round16(o round16(alpha)). The product of two fp16 values is
 * exact in fp32, so the one rounding is the f16 multiply's. */
QATTN_NUM_FN float qattn_num_rescale16(float o, float alpha)
{
    return qattn_num_round16(o * qattn_num_round16(alpha));
}

/* One k-step of the NVIDIA f16 tensor core with an fp16 accumulator (f16
 * mma.sync / wgmma, .f16 D): acc (an fp16 value) plus the n <= 16 products
 * a[c] b[c * bstride] of fp16 values, as the hardware sums them
 * (kernels/probes/wgmma_f16_sum.*: 16896 of 16896 H100 sums): E = the
 * largest of acc's exponent and, over the nonzero products, the sum of the
 * factors' exponent fields (subnormals -14); acc and each product truncated
 * toward zero to a multiple of 2^(E - 25); the exact sum rounded once to
 * fp16 (to nearest even, saturating like qattn_num_round16). The terms are
 * integers below 2^27 times 2^(E - 25), so their sum is exact in int64;
 * the fp32 step before the fp16 rounding rounds to odd, which keeps the
 * one rounding correct. */
QATTN_NUM_FN int qattn_num_f16_exp(float x)
{
    const int e = (int)((qattn_num_f2u(x) >> 23) & 0xFFu) - 127;
    return e < -14 ? -14 : e;
}
/* The k-step for nc independent accumulators acc[c] (channels of one row)
 * at once: acc[c] plus the products a[j] b[j * bstride + c], j < n <= 16.
 * Terms as integers (|t| < 2^27: int32, sums in int64), so that a
 * compiler vectorizes the channel loops; 16 channels a pass. */
QATTN_NUM_FN void qattn_num_f16_ksteps(float *acc, int nc, const float *a, const float *b, int bstride, int n)
{
    for (int c0 = 0; c0 < nc; c0 += 16) {
        const int m = nc - c0 < 16 ? nc - c0 : 16;
        int e[16]; /* E; below -999: no nonzero term */
        int64_t s[16];
        float up[16], odd[16]; /* 2^(25 - E); the sum rounded to odd in fp32 (the encoder's input) */
        uint32_t r[16];
        for (int c = 0; c < m; c++)
            e[c] = acc[c0 + c] != 0.0f ? (int)((qattn_num_f2u(acc[c0 + c]) >> 23) & 0xFFu) - 127 : -1000;
        for (int j = 0; j < n; j++) {
            const int ea = a[j] != 0.0f ? qattn_num_f16_exp(a[j]) : -2000;
            const float *bj = b + (int64_t)j * bstride + c0;
            for (int c = 0; c < m; c++) {
                const int ep = bj[c] != 0.0f ? ea + qattn_num_f16_exp(bj[c]) : -2000;
                e[c] = ep > e[c] ? ep : e[c];
            }
        }
        for (int c = 0; c < m; c++) { /* 2^(25 - E) in the exponent bits (E >= -28 for fp16 products, acc >= 2^-24) */
            up[c] = qattn_num_u2f((uint32_t)(127 + 25 - (e[c] < -999 ? 0 : e[c])) << 23);
            s[c] = (int32_t)(acc[c0 + c] * up[c]); /* toward zero */
        }
        for (int j = 0; j < n; j++) {
            const float *bj = b + (int64_t)j * bstride + c0;
            for (int c = 0; c < m; c++)
                s[c] += (int32_t)(a[j] * bj[c] * up[c]);
        }
        /* x = s 2^(E - 25) to fp32 by rounding to odd (truncate, set the lsb if inexact), then fp16 RNE:
         * the bit form where the result is a normal fp16, the encoder elsewhere (second loop) */
        for (int c = 0; c < m; c++) {
            const double x = (double)s[c] * (double)qattn_num_u2f((uint32_t)(127 - 25 + (e[c] < -999 ? 0 : e[c])) << 23);
            const float f = (float)x;
            const double fd = (double)f;
            const uint32_t inexact = fd != x, over = (fd < 0.0 ? -fd : fd) > (x < 0.0 ? -x : x);
            const uint32_t u = (qattn_num_f2u(f) - over) | inexact;
            r[c] = QATTN_NUM_ROUND16_NORMAL_BITS(u);
            odd[c] = qattn_num_u2f(u);
        }
        for (int c = 0; c < m; c++) {
            const uint32_t ex = (qattn_num_f2u(odd[c]) >> 23) & 0xffu;
            if (e[c] < -999)
                continue; /* no nonzero term: acc stays */
            acc[c0 + c] = ex >= 113u && ex <= 141u ? qattn_num_u2f(r[c]) : qattn_num_round16(odd[c]);
        }
    }
}
QATTN_NUM_FN float qattn_num_f16_kstep(float acc, const float *a, const float *b, int bstride, int n)
{
    qattn_num_f16_ksteps(&acc, 1, a, b, bstride, n);
    return acc;
}

/* ---- the format table ---- */

/* largest magnitude an element of a scaled format may take (1 for the
 * others, which scale_for never divides by) */
QATTN_NUM_FN float qattn_num_scaled_qmax(int f)
{
    switch (f) {
    case QATTN_FMT_FP16: return 65504.0f;
    case QATTN_FMT_E4M3: return 448.0f;
    case QATTN_FMT_E5M2: return 57344.0f;
    case QATTN_FMT_INT8: return 127.0f;
    case QATTN_FMT_INT4: return 7.0f;
    default: return 1.0f;
    }
}

/* the largest finite value of f; of the scaled formats, the largest
 * magnitude a code may take */
QATTN_NUM_FN float qattn_num_qmax(int f)
{
    switch (f) {
    case QATTN_FMT_FP32: return 3.40282347e38f; /* FLT_MAX */
    case QATTN_FMT_BF16: return 0x1.fep127f;    /* code 0x7f7f */
    case QATTN_FMT_E8M0: return 0x1p127f;
    case QATTN_FMT_FP16:
    case QATTN_FMT_E4M3:
    case QATTN_FMT_E5M2:
    case QATTN_FMT_INT8:
    case QATTN_FMT_INT4: return qattn_num_scaled_qmax(f);
    default: return 0.0f;
    }
}

QATTN_NUM_FN int qattn_num_is_scaled(int f)
{
    return f == QATTN_FMT_INT8 || f == QATTN_FMT_INT4 || f == QATTN_FMT_E4M3 || f == QATTN_FMT_E5M2;
}

/* decode(encode(x)) for f; e8m0: the power of two >= x for x > 0 (NaN stays
 * NaN, x <= 0 has no code and gives 0); an unknown f gives NaN */
QATTN_NUM_FN float qattn_num_round(int f, float x)
{
    switch (f) {
    case QATTN_FMT_FP32: return x;
    case QATTN_FMT_FP16: return qattn_num_fp16_decode(qattn_num_fp16_encode(x));
    case QATTN_FMT_BF16: return qattn_num_bf16_decode(qattn_num_bf16_encode(x));
    case QATTN_FMT_E4M3: return qattn_num_e4m3_decode(qattn_num_e4m3_encode(x));
    case QATTN_FMT_E5M2: return qattn_num_e5m2_decode(qattn_num_e5m2_encode(x));
    case QATTN_FMT_INT8: return (float)qattn_num_rne_int_clamp(x, 127.0f);
    case QATTN_FMT_INT4: return (float)qattn_num_rne_int_clamp(x, 7.0f);
    case QATTN_FMT_E8M0:
        return x > 0.0f || x != x ? qattn_num_e8m0_decode(qattn_num_e8m0_encode_ceil(x)) : 0.0f;
    default: return qattn_num_u2f(QATTN_NUM_QNAN);
    }
}

/* Scale of a group with max |x| = amax: amax / qmax(f), rounded up to a
 * power of two with e8m0; 0 for amax == 0 (the group encodes to zeros, never
 * divide by it); a tiny amax whose quotient underflows gets the smallest
 * positive float, so it does not look like a zero group. 1 for unscaled f. */
QATTN_NUM_FN float qattn_num_scale_for(int f, float amax, int e8m0)
{
    if (!qattn_num_is_scaled(f))
        return 1.0f;
    if (!(amax > 0.0f))
        return 0.0f;
    float s = amax / qattn_num_scaled_qmax(f);
    if (e8m0)
        return qattn_num_e8m0_decode(qattn_num_e8m0_encode_ceil(s));
    return s > 0.0f ? s : 0x1p-149f; /* FLT_TRUE_MIN */
}

/* fl(v / s) without a division (the V^T e4m3 codes of the fast quantization
 * kernels), by the correction step for every value: with r = fl(1 / s),
 * q = fl(v r) and e = fl(q s - v) (exact by one fma), y = fl(q + e (-r)) is
 * fl(v / s) while |v| >= 2^-100. Below that, with s >= 2^-80, |v / s| <
 * 2^-20: y keeps v's sign and an 8-bit float code of y is that of fl(v / s)
 * (+-0). Zeros keep their sign because e is q s - v, not v - q s, and the
 * sign goes on r: for v = -0, e = +0 and y = +0 (-r) + -0 = -0.
 * qattn_num_quot_ok(s): s in [2^-80, FLT_MAX], where this holds (a zero
 * scale is out: quant/ writes +0 for a zero group). tests/test_numerics
 * checks the e4m3 codes against fl(v / s). */
QATTN_NUM_FN int qattn_num_quot_ok(float s)
{
    return s >= 0x1p-80f && s <= 3.40282347e38f;
}

QATTN_NUM_FN float qattn_num_quot(float v, float s, float r)
{
    const float q = v * r;
    return fmaf(fmaf(q, s, -v), -r, q);
}

/* ---- scale groups: token t -> token group, channel c -> channel group ---- */

/* token groups in a head (or sequence) of n tokens */
QATTN_NUM_FN int64_t qattn_num_group_ntok(qattn_group g, int64_t n)
{
    switch (g.tok) {
    case QATTN_TOK_TOKEN: return n;
    case QATTN_TOK_BLOCK:
    case QATTN_TOK_WARP: return (n + g.b - 1) / g.b;
    case QATTN_TOK_THREAD: return (n + g.b - 1) / g.b * (int64_t)(g.s / g.w);
    default: return 1; /* tensor, channel */
    }
}

/* channel groups of d channels (a head dim: int) */
QATTN_NUM_FN int qattn_num_group_nch(qattn_group g, int d)
{
    return g.ch > 0 ? (d + g.ch - 1) / g.ch : 1;
}

/* thread:B/S/W: token t of a block of B is in slot (t mod S) div W */
QATTN_NUM_FN int64_t qattn_num_group_tok_index(qattn_group g, int64_t t)
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

QATTN_NUM_FN int qattn_num_group_ch_index(qattn_group g, int c)
{
    return g.ch > 0 ? c / g.ch : 0;
}

/* ---- masks: the keys [*lo, *hi) that query i of sq may see among sk keys
 * (bottom-right alignment for causal-br and window); empty when lo == hi ---- */

QATTN_NUM_FN void qattn_num_mask_range(qattn_mask m, int64_t i, int64_t sq, int64_t sk, int64_t *lo, int64_t *hi)
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
