/* Number formats: the public encoders and decoders, the format table and
 * the array quantizers, on the one definition of each format in
 * qattn/numerics.h (shared with the GPU kernels; its header comment states
 * the formats and the rounding rules). */
#include <float.h>
#include <string.h>

#include "qattn/formats.h"
#include "qattn/numerics.h"

uint16_t qattn_fp16_encode(float x) { return qattn_num_fp16_encode(x); }
float qattn_fp16_decode(uint16_t h) { return qattn_num_fp16_decode(h); }
uint16_t qattn_bf16_encode(float x) { return qattn_num_bf16_encode(x); }
float qattn_bf16_decode(uint16_t b) { return qattn_num_bf16_decode(b); }
uint8_t qattn_e4m3_encode(float x) { return qattn_num_e4m3_encode(x); }
float qattn_e4m3_decode(uint8_t c) { return qattn_num_e4m3_decode(c); }
uint8_t qattn_e5m2_encode(float x) { return qattn_num_e5m2_encode(x); }
float qattn_e5m2_decode(uint8_t c) { return qattn_num_e5m2_decode(c); }
uint8_t qattn_e8m0_encode_ceil(float x) { return qattn_num_e8m0_encode_ceil(x); }
float qattn_e8m0_decode(uint8_t c) { return qattn_num_e8m0_decode(c); }
int8_t qattn_int8_encode(float x) { return (int8_t)qattn_num_rne_int_clamp(x, 127.0f); }
int8_t qattn_int4_encode(float x) { return (int8_t)qattn_num_rne_int_clamp(x, 7.0f); }

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
    return qattn_num_qmax((int)f);
}

int qattn_fmt_is_int(qattn_fmt f)
{
    return f == QATTN_FMT_INT8 || f == QATTN_FMT_INT4;
}

int qattn_fmt_is_scaled(qattn_fmt f)
{
    return qattn_num_is_scaled((int)f);
}

/* ---- rounding ---- */

float qattn_fmt_round(qattn_fmt f, float x)
{
    return qattn_num_round((int)f, x);
}

float qattn_fp22_cut(float x)
{
    return qattn_num_cut22(x);
}

float qattn_scale_for(qattn_fmt f, float amax, int e8m0)
{
    return qattn_num_scale_for((int)f, amax, e8m0);
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
        uint32_t u = qattn_num_f2u(x[i]) & QATTN_NUM_ABS;
        if (u >= QATTN_NUM_INF)
            return qattn_err_set(err, QATTN_ERR_NAN, "element %zu is %s", i,
                                 u == QATTN_NUM_INF ? "Inf" : "NaN");
    }

    if (!qattn_fmt_is_scaled(f)) { /* fp32 / fp16 / bf16 / e8m0: no scale */
        switch (f) {
        case QATTN_FMT_FP16: QUANT_LOOP(x[i], qattn_num_fp16_decode(qattn_num_fp16_encode(v_))); break;
        case QATTN_FMT_BF16: QUANT_LOOP(x[i], qattn_num_bf16_decode(qattn_num_bf16_encode(v_))); break;
        default: QUANT_LOOP(x[i], qattn_fmt_round(f, v_)); break;
        }
        return QATTN_OK;
    }
    if (!(scale >= 0.0f) || (qattn_num_f2u(scale) & QATTN_NUM_ABS) == QATTN_NUM_INF)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "scale %g is not finite and >= 0", (double)scale);
    if (scale == 0.0f) { /* zero group */
        for (size_t i = 0; i < n; i++)
            y[i] = 0.0f;
        return QATTN_OK;
    }
    switch (f) {
    case QATTN_FMT_E4M3:
        QUANT_LOOP(x[i] / scale, qattn_num_e4m3_decode(qattn_num_e4m3_encode(v_)));
        break;
    case QATTN_FMT_E5M2:
        QUANT_LOOP(x[i] / scale, qattn_num_e5m2_decode(qattn_num_e5m2_encode(v_)));
        break;
    case QATTN_FMT_INT8:
        QUANT_LOOP(x[i] / scale, (float)qattn_num_rne_int_clamp(v_, 127.0f));
        break;
    default: /* int4 */
        QUANT_LOOP(x[i] / scale, (float)qattn_num_rne_int_clamp(v_, 7.0f));
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
    uint32_t u = qattn_num_f2u(x), sign = u & 0x80000000u, a = u & QATTN_NUM_ABS;
    float ax = qattn_num_u2f(a);
    float rn = qattn_num_u2f((a + 0x7ffffu + ((a >> 20) & 1u)) & 0xfff00000u);
    float rs = (ax + 24576.0f) - 24576.0f;
    float r = a < 0x3c800000u ? rs : rn; /* 0x3c800000 = 2^-6 */
    r = r < 448.0f ? r : 448.0f;
    return qattn_num_u2f(qattn_num_f2u(r) | sign);
}

void qattn_fmt_round_mul(qattn_fmt f, const float *x, size_t n, float mul, float *y)
{
    switch (f) {
    case QATTN_FMT_FP32: QUANT_LOOP(x[i] * mul, v_); break;
    case QATTN_FMT_FP16: QUANT_LOOP(x[i] * mul, qattn_num_fp16_decode(qattn_num_fp16_encode(v_))); break;
    case QATTN_FMT_BF16: QUANT_LOOP(x[i] * mul, qattn_num_bf16_decode(qattn_num_bf16_encode(v_))); break;
    case QATTN_FMT_E4M3: QUANT_LOOP(x[i] * mul, e4m3_round_fast(v_)); break;
    case QATTN_FMT_E5M2: QUANT_LOOP(x[i] * mul, qattn_num_e5m2_decode(qattn_num_e5m2_encode(v_))); break;
    case QATTN_FMT_INT8: QUANT_LOOP(x[i] * mul, (float)qattn_num_rne_int_clamp(v_, 127.0f)); break;
    case QATTN_FMT_INT4: QUANT_LOOP(x[i] * mul, (float)qattn_num_rne_int_clamp(v_, 7.0f)); break;
    default: QUANT_LOOP(x[i] * mul, qattn_fmt_round(f, v_)); break;
    }
}
