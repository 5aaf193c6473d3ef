/* Number formats: plain C reference encoders and decoders.
 *
 * All encoders round to nearest, ties to even, and saturate to the largest
 * finite value of the format (E5M2 included: values beyond its max give
 * +-57344, not inf). NaN input is an error for the checked array encoders
 * (qattn_fmt_quantize); the scalar encoders map NaN to the format's NaN code
 * (or 0 for integers) and are meant for inputs already checked. */
#ifndef QATTN_FORMATS_H
#define QATTN_FORMATS_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qattn_fmt {
    QATTN_FMT_FP32 = 0,
    QATTN_FMT_FP16,
    QATTN_FMT_BF16,
    QATTN_FMT_E4M3, /* fp8 "fn": max 448, no inf, NaN = 0x7f / 0xff */
    QATTN_FMT_E5M2, /* fp8 IEEE-like: max 57344, inf 0x7c, NaN 0x7d..0x7f */
    QATTN_FMT_INT8, /* symmetric [-127, 127] */
    QATTN_FMT_INT4, /* symmetric [-7, 7], two per byte when packed */
    QATTN_FMT_E8M0, /* power-of-two scale (OCP MX): 2^(code-127), 0xff = NaN */
    QATTN_FMT_COUNT
} qattn_fmt;

/* "fp32", "fp16", "bf16", "e4m3", "e5m2", "int8", "int4", "e8m0" */
const char *qattn_fmt_name(qattn_fmt f);
/* returns 0 and sets *f, or QATTN_ERR_ARG for an unknown name */
int qattn_fmt_parse(const char *name, qattn_fmt *f);
/* largest magnitude a scaled element may take: 127, 7, 448, 57344; 65504 for
 * fp16, ~3.39e38 for bf16 and fp32 */
float qattn_fmt_qmax(qattn_fmt f);
/* 1 for int8/int4, 0 otherwise */
int qattn_fmt_is_int(qattn_fmt f);
/* 1 for formats that are stored with a scale (int8, int4, e4m3, e5m2) */
int qattn_fmt_is_scaled(qattn_fmt f);

/* ---- scalar encoders / decoders ---- */
uint16_t qattn_fp16_encode(float x);
float qattn_fp16_decode(uint16_t h);
uint16_t qattn_bf16_encode(float x);
float qattn_bf16_decode(uint16_t b);
uint8_t qattn_e4m3_encode(float x);
float qattn_e4m3_decode(uint8_t c);
uint8_t qattn_e5m2_encode(float x);
float qattn_e5m2_decode(uint8_t c);
/* E8M0 scale: smallest power of two >= x (x > 0 finite); 2^-127..2^127.
 * x == 0 encodes to code 0 only as "zero group" marker: see qattn_scale_e8m0. */
uint8_t qattn_e8m0_encode_ceil(float x);
float qattn_e8m0_decode(uint8_t c);
int8_t qattn_int8_encode(float x); /* RNE, saturate to [-127, 127] */
int8_t qattn_int4_encode(float x); /* RNE, saturate to [-7, 7] */
/* int4 packing: element 2i in the low nibble of byte i, 2i+1 in the high one,
 * two's complement nibbles */
void qattn_int4_pack(const int8_t *v, size_t n, uint8_t *packed); /* v [n], packed [(n+1)/2] */
int8_t qattn_int4_unpack(const uint8_t *packed, size_t i);

/* Round x to the nearest value representable in f (unscaled; saturating),
 * i.e. decode(encode(x)). For int formats: RNE to an integer, clamped. */
float qattn_fmt_round(qattn_fmt f, float x);

/* fp22: fp32 with the mantissa cut (truncated toward zero) to 13 bits, as the
 * Hopper/Ada FP8 tensor cores keep their accumulators. */
float qattn_fp22_cut(float x);

/* Scale for a group with max |x| = amax: amax / qmax(f). With e8m0 != 0 the
 * scale is rounded up to a power of two so nothing saturates. amax == 0 gives
 * scale 0 (the group encodes to zeros; never divide by it). */
float qattn_scale_for(qattn_fmt f, float amax, int e8m0);

/* Checked array quantizer: y[i] = round_f(x[i] / scale) (the code's value, not
 * multiplied back). scale == 0 writes zeros. Returns QATTN_ERR_NAN (naming the
 * index) if any x[i] is NaN or Inf. */
int qattn_fmt_quantize(qattn_fmt f, const float *x, size_t n, float scale,
                       float *y, qattn_err *err); /* x [n], y [n] */

/* Unchecked hot-loop form: y[i] = qattn_fmt_round(f, x[i] * mul) for finite
 * x (the caller has checked); y may alias x. */
void qattn_fmt_round_mul(qattn_fmt f, const float *x, size_t n, float mul,
                         float *y); /* x [n], y [n] */

#ifdef __cplusplus
}
#endif
#endif
