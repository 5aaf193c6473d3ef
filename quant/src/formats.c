/* Number formats: plain C11 reference encoders and decoders.
 *
 * Everything works on the IEEE-754 binary32 bit pattern of the input (read
 * with memcpy), so the results do not depend on the compiler, on _Float16
 * support or on the FPU rounding mode. The only float arithmetic used is exact
 * (small integer times a power of two) or explicitly specified (the division
 * x / scale in qattn_fmt_quantize, amax / qmax in qattn_scale_for).
 *
 * binary32 layout:  s | eeeeeeee (bias 127) | mmm...m (23 bits)
 *
 * Narrow float formats (all sign | exponent | mantissa, subnormals at e = 0):
 *   fp16  1|5|10  bias 15   max 65504  = 0x7bff, inf 0x7c00, NaN 0x7e00
 *   bf16  1|8|7   bias 127  max 0x7f7f = 0x1.fep127, inf 0x7f80, NaN 0x7fc0
 *   e4m3  1|4|3   bias 7    max 448    = 0x7e, no inf, NaN 0x7f (S.1111.111)
 *   e5m2  1|5|2   bias 15   max 57344  = 0x7b, inf 0x7c, NaN 0x7d..0x7f
 *   e8m0  8 exponent bits, no sign/mantissa: 2^(c-127), 0xff = NaN
 *
 * Rounding: round to nearest, ties to even, then saturate to the largest
 * finite magnitude (so +-Inf also saturates). NaN goes to the format's NaN
 * code (0 for the integer formats); the NaN code is always the positive
 * one, whatever the input NaN's sign, so results do not depend on the
 * platform's default NaN. -0.0 keeps its sign. */
#include <float.h>
#include <string.h>

#include "qattn/formats.h"

/* ---- bit helpers ---- */

static inline uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#define F32_SIGN 0x80000000u
#define F32_ABS 0x7fffffffu
#define F32_INF 0x7f800000u
#define F32_QNAN 0x7fc00000u

/* v >> s rounded to nearest, ties to even, for 1 <= s <= 31 with
 * v + 2^(s-1) < 2^32 (callers: v <= 0x7f7fffff with s <= 21, or v < 2^24
 * with any s, which gives 0 for s >= 25). Adding (half - 1) rounds up
 * everything strictly above the midpoint; adding the kept lsb on top rounds
 * an exact tie up only when the truncated result is odd. Carries propagate
 * into higher bits, which is what a mantissa overflow into the exponent
 * needs. */
static inline uint32_t rne_shift(uint32_t v, unsigned s)
{
    uint32_t half_m1 = (1u << (s - 1u)) - 1u;
    return (v + half_m1 + ((v >> s) & 1u)) >> s;
}

/* Magnitude code of a narrow float format with M mantissa bits and exponent
 * bias B, for a finite |x| with binary32 bits u (sign cleared). maxcode is the
 * largest finite magnitude code; anything rounding above it saturates.
 *
 * Normal target (target exponent et = e - 127 + B >= 1): the exponent and
 * mantissa fields of u are contiguous, so shifting out the 23 - M low
 * mantissa bits with RNE and rebiasing the exponent (subtract 127 - B in the
 * exponent field) gives the code directly; a rounding carry bumps the
 * exponent.
 * Subnormal target (et <= 0): the code is the significand 1.m scaled to units
 * of the minimum subnormal 2^(1 - B - M), i.e. (2^23 | m) >> s with
 * s = 24 - M - et >= 24 - M; a carry into bit M yields the smallest normal,
 * which is again correct. For s > 24 the value is below half the minimum
 * subnormal and rounds to 0 (this also covers binary32 subnormals). */
static inline uint32_t enc_mag(uint32_t u, unsigned M, int B, uint32_t maxcode)
{
    int e = (int)(u >> 23);
    uint32_t code;
    if (e >= 128 - B) {
        code = rne_shift(u, 23u - M) - ((uint32_t)(127 - B) << M);
    } else {
        int s = 151 - (int)M - B - e;
        if (s > 24)
            return 0;
        code = rne_shift((u & 0x7fffffu) | 0x800000u, (unsigned)s);
    }
    return code > maxcode ? maxcode : code;
}

/* binary32 bits of the magnitude code mag (sign stripped) of a narrow float
 * with M mantissa bits and bias B; finite codes only (callers patch inf/NaN).
 * Normal codes: the exponent|mantissa fields move up by 23 - M bits and the
 * exponent is rebiased by 127 - B. Subnormal codes (exponent field 0): the
 * value is m * 2^(1 - B - M) = m * min_sub, an exact product whose result is
 * a normal binary32 for all formats here (the only float arithmetic). */
static inline uint32_t dec_mag(uint32_t mag, unsigned M, int B, float min_sub)
{
    if (mag < (1u << M))
        return f2u((float)mag * min_sub);
    return (mag << (23u - M)) + ((uint32_t)(127 - B) << 23);
}

/* ---- fp16 ---- */

static inline uint16_t fp16_encode(float x)
{
    uint32_t u = f2u(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= F32_ABS;
    if (u > F32_INF)
        return 0x7e00u;
    if (u == F32_INF)
        return (uint16_t)(sign | 0x7bffu);
    return (uint16_t)(sign | enc_mag(u, 10, 15, 0x7bffu));
}

uint16_t qattn_fp16_encode(float x)
{
    return fp16_encode(x);
}

static inline float fp16_decode(uint16_t h)
{
    uint32_t mag = h & 0x7fffu;
    uint32_t bits = dec_mag(mag, 10, 15, 0x1p-24f);
    if (mag >= 0x7c00u) /* inf, or NaN (made quiet, payload kept) */
        bits = F32_INF | ((mag & 0x3ffu) << 13) | ((mag & 0x3ffu) ? 0x400000u : 0u);
    return u2f(((uint32_t)(h & 0x8000u) << 16) | bits);
}

float qattn_fp16_decode(uint16_t h)
{
    return fp16_decode(h);
}

/* ---- bf16: the top half of a binary32, so RNE on the bits is the whole
 * conversion (subnormals included); overflow to 0x7f80 saturates ---- */

static inline uint16_t bf16_encode(float x)
{
    uint32_t u = f2u(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= F32_ABS;
    if (u > F32_INF)
        return 0x7fc0u;
    uint32_t r = rne_shift(u, 16);
    return (uint16_t)(sign | (r > 0x7f7fu ? 0x7f7fu : r));
}

uint16_t qattn_bf16_encode(float x)
{
    return bf16_encode(x);
}

static inline float bf16_decode(uint16_t b)
{
    return u2f((uint32_t)b << 16);
}

float qattn_bf16_decode(uint16_t b)
{
    return bf16_decode(b);
}

/* ---- fp8 e4m3 ("fn") ---- */

static inline uint8_t e4m3_encode(float x)
{
    uint32_t u = f2u(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    u &= F32_ABS;
    if (u > F32_INF)
        return 0x7fu;
    if (u == F32_INF)
        return (uint8_t)(sign | 0x7eu);
    return (uint8_t)(sign | enc_mag(u, 3, 7, 0x7eu));
}

uint8_t qattn_e4m3_encode(float x)
{
    return e4m3_encode(x);
}

static inline float e4m3_decode(uint8_t c)
{
    uint32_t mag = c & 0x7fu;
    uint32_t bits = dec_mag(mag, 3, 7, 0x1p-9f);
    bits = mag == 0x7fu ? F32_QNAN : bits; /* S.1111.111 is NaN */
    return u2f(((uint32_t)(c & 0x80u) << 24) | bits);
}

float qattn_e4m3_decode(uint8_t c)
{
    return e4m3_decode(c);
}

/* ---- fp8 e5m2 ---- */

static inline uint8_t e5m2_encode(float x)
{
    uint32_t u = f2u(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    u &= F32_ABS;
    if (u > F32_INF)
        return 0x7eu;
    if (u == F32_INF)
        return (uint8_t)(sign | 0x7bu);
    return (uint8_t)(sign | enc_mag(u, 2, 15, 0x7bu));
}

uint8_t qattn_e5m2_encode(float x)
{
    return e5m2_encode(x);
}

static inline float e5m2_decode(uint8_t c)
{
    uint32_t mag = c & 0x7fu;
    uint32_t bits = dec_mag(mag, 2, 15, 0x1p-16f);
    if (mag >= 0x7cu) /* 0x7c inf, 0x7d..0x7f NaN */
        bits = mag == 0x7cu ? F32_INF : F32_QNAN;
    return u2f(((uint32_t)(c & 0x80u) << 24) | bits);
}

float qattn_e5m2_decode(uint8_t c)
{
    return e5m2_decode(c);
}

/* ---- e8m0 ---- */

/* Code c means 2^(c - 127); that is exactly the binary32 exponent field, so
 * for a normal x > 0 the code is its biased exponent, plus one unless x is
 * an exact power of two (non-zero mantissa). Binary32 subnormals lie below
 * 2^-126: ceil is 2^-126 (code 1) above 2^-127, else clamped to code 0. */
uint8_t qattn_e8m0_encode_ceil(float x)
{
    uint32_t u = f2u(x);
    if ((u & F32_ABS) > F32_INF)
        return 0xffu;
    if ((u & F32_SIGN) || u == 0)
        return 0; /* x <= 0: "zero group" marker, never a scale */
    uint32_t e = u >> 23;
    if (e == 0)
        return u > 0x00400000u ? 1u : 0u;
    e += (u & 0x7fffffu) != 0;
    return (uint8_t)(e > 254u ? 254u : e); /* 255 and +Inf clamp to 2^127 */
}

float qattn_e8m0_decode(uint8_t c)
{
    if (c == 0xffu)
        return u2f(F32_QNAN);
    if (c == 0)
        return u2f(0x00400000u); /* 2^-127, a binary32 subnormal */
    return u2f((uint32_t)c << 23);
}

/* ---- integers ---- */

/* RNE of x to an integer, clamped to [-qmax, qmax]; NaN -> 0.
 * |x| is first clamped to qmax (|x| in [qmax, qmax + 0.5] would round to qmax
 * or qmax + 1, both -> qmax). Then with a = 1.m * 2^e, the integer is
 * (2^23 | m) >> (23 - e) rounded to nearest even; for a < 0.5 the shift
 * exceeds 24 and the result is 0 (the shift is capped at 31, which still
 * gives 0, so zero and tiny inputs need no branch). Needs qmax < 2^23. */
static inline int rne_int_clamp(float x, float qmax)
{
    uint32_t u = f2u(x);
    uint32_t a = u & F32_ABS;
    if (a > F32_INF)
        return 0;
    uint32_t qbits = f2u(qmax); /* non-negative floats order like their bits */
    a = a < qbits ? a : qbits;
    int s = 150 - (int)(a >> 23); /* 23 - (unbiased exponent) */
    s = s > 31 ? 31 : s;
    int v = (int)rne_shift((a & 0x7fffffu) | 0x800000u, (unsigned)s);
    int neg = -(int)(u >> 31); /* 0 or -1: conditional negate without a branch */
    return (v ^ neg) - neg;
}

int8_t qattn_int8_encode(float x)
{
    return (int8_t)rne_int_clamp(x, 127.0f);
}

int8_t qattn_int4_encode(float x)
{
    return (int8_t)rne_int_clamp(x, 7.0f);
}

void qattn_int4_pack(const int8_t *v, size_t n, uint8_t *packed)
{
    size_t i;
    for (i = 0; i + 1 < n; i += 2)
        packed[i / 2] = (uint8_t)(((unsigned)v[i] & 0xfu) |
                                  (((unsigned)v[i + 1] & 0xfu) << 4));
    if (n & 1u) /* odd n: the last high nibble is 0 */
        packed[n / 2] = (uint8_t)((unsigned)v[n - 1] & 0xfu);
}

int8_t qattn_int4_unpack(const uint8_t *packed, size_t i)
{
    unsigned nib = (i & 1u) ? (unsigned)packed[i / 2] >> 4
                            : (unsigned)packed[i / 2] & 0xfu;
    return (int8_t)((int)(nib ^ 8u) - 8); /* sign-extend the 4-bit value */
}

/* ---- format table ---- */

static const char *const fmt_names[QATTN_FMT_COUNT] = {
    "fp32", "fp16", "bf16", "e4m3", "e5m2", "int8", "int4", "e8m0",
};

const char *qattn_fmt_name(qattn_fmt f)
{
    if ((unsigned)f >= (unsigned)QATTN_FMT_COUNT)
        return "?";
    return fmt_names[f];
}

int qattn_fmt_parse(const char *name, qattn_fmt *f)
{
    if (!name)
        return QATTN_ERR_ARG;
    for (int i = 0; i < (int)QATTN_FMT_COUNT; i++) {
        if (strcmp(name, fmt_names[i]) == 0) {
            if (f)
                *f = (qattn_fmt)i;
            return QATTN_OK;
        }
    }
    return QATTN_ERR_ARG;
}

float qattn_fmt_qmax(qattn_fmt f)
{
    switch (f) {
    case QATTN_FMT_FP32: return FLT_MAX;
    case QATTN_FMT_FP16: return 65504.0f;
    case QATTN_FMT_BF16: return 0x1.fep127f; /* bf16 code 0x7f7f */
    case QATTN_FMT_E4M3: return 448.0f;
    case QATTN_FMT_E5M2: return 57344.0f;
    case QATTN_FMT_INT8: return 127.0f;
    case QATTN_FMT_INT4: return 7.0f;
    case QATTN_FMT_E8M0: return 0x1p127f;
    default: return 0.0f;
    }
}

int qattn_fmt_is_int(qattn_fmt f)
{
    return f == QATTN_FMT_INT8 || f == QATTN_FMT_INT4;
}

int qattn_fmt_is_scaled(qattn_fmt f)
{
    return f == QATTN_FMT_INT8 || f == QATTN_FMT_INT4 || f == QATTN_FMT_E4M3 ||
           f == QATTN_FMT_E5M2;
}

/* ---- rounding ---- */

static inline float round_e8m0(float x)
{
    /* x > 0: the power of two >= x (clamped to [2^-127, 2^127]); NaN stays
     * NaN; x <= 0 (no representation: e8m0 is unsigned, non-zero) -> 0. */
    if (x > 0.0f || x != x)
        return qattn_e8m0_decode(qattn_e8m0_encode_ceil(x));
    return 0.0f;
}

float qattn_fmt_round(qattn_fmt f, float x)
{
    switch (f) {
    case QATTN_FMT_FP32: return x;
    case QATTN_FMT_FP16: return fp16_decode(fp16_encode(x));
    case QATTN_FMT_BF16: return bf16_decode(bf16_encode(x));
    case QATTN_FMT_E4M3: return e4m3_decode(e4m3_encode(x));
    case QATTN_FMT_E5M2: return e5m2_decode(e5m2_encode(x));
    case QATTN_FMT_INT8: return (float)rne_int_clamp(x, 127.0f);
    case QATTN_FMT_INT4: return (float)rne_int_clamp(x, 7.0f);
    case QATTN_FMT_E8M0: return round_e8m0(x);
    default: return u2f(F32_QNAN);
    }
}

/* fp22 = 1 | 8 | 13: keep the top 13 of the 23 mantissa bits (clear the low
 * 10), which truncates the magnitude, i.e. rounds toward zero. */
float qattn_fp22_cut(float x)
{
    uint32_t u = f2u(x);
    if ((u & F32_INF) == F32_INF) /* Inf / NaN unchanged */
        return x;
    return u2f(u & ~0x3ffu);
}

float qattn_scale_for(qattn_fmt f, float amax, int e8m0)
{
    if (!qattn_fmt_is_scaled(f))
        return 1.0f;
    if (!(amax > 0.0f))
        return 0.0f;
    float s = amax / qattn_fmt_qmax(f);
    if (e8m0)
        return qattn_e8m0_decode(qattn_e8m0_encode_ceil(s));
    /* A tiny non-zero amax whose quotient underflows must not look like a
     * zero group: use the smallest positive float (amax / s < qmax then). */
    return s > 0.0f ? s : FLT_TRUE_MIN;
}

/* ---- checked array quantizer ---- */

/* The per-element loop, specialised per format so the switch is outside;
 * v_ is the element to round (x[i] / scale, or x[i] for unscaled formats). */
#define QUANT_LOOP(val, expr)                                                 \
    do {                                                                      \
        for (size_t i = 0; i < n; i++) {                                      \
            float v_ = (val);                                                 \
            y[i] = (expr);                                                    \
        }                                                                     \
    } while (0)

int qattn_fmt_quantize(qattn_fmt f, const float *x, size_t n, float scale,
                       float *y, qattn_err *err)
{
    if ((unsigned)f >= (unsigned)QATTN_FMT_COUNT)
        return qattn_err_set(err, QATTN_ERR_ARG, "unknown format %d", (int)f);
    if (n == 0)
        return QATTN_OK;
    if (!x || !y)
        return qattn_err_set(err, QATTN_ERR_ARG, "NULL array");
    for (size_t i = 0; i < n; i++) {
        uint32_t u = f2u(x[i]) & F32_ABS;
        if (u >= F32_INF)
            return qattn_err_set(err, QATTN_ERR_NAN, "element %zu is %s", i,
                                 u == F32_INF ? "Inf" : "NaN");
    }

    if (!qattn_fmt_is_scaled(f)) { /* fp32 / fp16 / bf16 / e8m0: no scale */
        switch (f) {
        case QATTN_FMT_FP16: QUANT_LOOP(x[i], fp16_decode(fp16_encode(v_))); break;
        case QATTN_FMT_BF16: QUANT_LOOP(x[i], bf16_decode(bf16_encode(v_))); break;
        default: QUANT_LOOP(x[i], qattn_fmt_round(f, v_)); break;
        }
        return QATTN_OK;
    }
    if (!(scale >= 0.0f) || (f2u(scale) & F32_ABS) == F32_INF)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "scale %g is not finite and >= 0", (double)scale);
    if (scale == 0.0f) { /* zero group */
        for (size_t i = 0; i < n; i++)
            y[i] = 0.0f;
        return QATTN_OK;
    }
    switch (f) {
    case QATTN_FMT_E4M3:
        QUANT_LOOP(x[i] / scale, e4m3_decode(e4m3_encode(v_)));
        break;
    case QATTN_FMT_E5M2:
        QUANT_LOOP(x[i] / scale, e5m2_decode(e5m2_encode(v_)));
        break;
    case QATTN_FMT_INT8:
        QUANT_LOOP(x[i] / scale, (float)rne_int_clamp(v_, 127.0f));
        break;
    default: /* int4 */
        QUANT_LOOP(x[i] / scale, (float)rne_int_clamp(v_, 7.0f));
        break;
    }
    return QATTN_OK;
}

/* ---- unchecked array rounding for hot loops ---- */

/* decode(encode(x)) for finite x without branches, so loops vectorize:
 * normal range (|x| >= 2^-6): round the mantissa to 3 bits, ties to even,
 * on the bits; subnormal range: add and subtract 1.5 * 2^14, whose ulp is
 * the e4m3 quantum 2^-9; saturate at 448. Tested against the encoder. */
static inline float e4m3_round_fast(float x)
{
    uint32_t u = f2u(x), sign = u & 0x80000000u, a = u & F32_ABS;
    float ax = u2f(a);
    float rn = u2f((a + 0x7ffffu + ((a >> 20) & 1u)) & 0xfff00000u);
    float rs = (ax + 24576.0f) - 24576.0f;
    float r = a < 0x3c800000u ? rs : rn; /* 0x3c800000 = 2^-6 */
    r = r < 448.0f ? r : 448.0f;
    return u2f(f2u(r) | sign);
}

void qattn_fmt_round_mul(qattn_fmt f, const float *x, size_t n, float mul, float *y)
{
    switch (f) {
    case QATTN_FMT_FP32: QUANT_LOOP(x[i] * mul, v_); break;
    case QATTN_FMT_FP16: QUANT_LOOP(x[i] * mul, fp16_decode(fp16_encode(v_))); break;
    case QATTN_FMT_BF16: QUANT_LOOP(x[i] * mul, bf16_decode(bf16_encode(v_))); break;
    case QATTN_FMT_E4M3: QUANT_LOOP(x[i] * mul, e4m3_round_fast(v_)); break;
    case QATTN_FMT_E5M2: QUANT_LOOP(x[i] * mul, e5m2_decode(e5m2_encode(v_))); break;
    case QATTN_FMT_INT8: QUANT_LOOP(x[i] * mul, (float)rne_int_clamp(v_, 127.0f)); break;
    case QATTN_FMT_INT4: QUANT_LOOP(x[i] * mul, (float)rne_int_clamp(v_, 7.0f)); break;
    default: QUANT_LOOP(x[i] * mul, qattn_fmt_round(f, v_)); break;
    }
}
