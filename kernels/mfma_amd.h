/* AMD matrix-instruction wrappers (MFMA of CDNA2 gfx90a and CDNA3 gfx942),
 * named by shape and type, and their emulation in the host simulation
 * (QATTN_HIP_SIM), so that the kernels that call them run on the CPU.
 *
 * Operand layouts of the 16x16xK instructions (wave of 64 lanes; lane
 * l = 16 g + r, g = l / 16, r = l % 16; AMD's matrix instruction calculator
 * for v_mfma_*_16x16x16* and _16x16x32*), KL values per lane, K = 4 KL:
 *   A [16 x K]: lane l holds A[r][KL g .. KL g + KL - 1] (value e in byte /
 *               half e of the register pair)
 *   B [K x 16]: lane l holds B[KL g .. KL g + KL - 1][r]
 *   C/D [16 x 16], 4 x 32-bit: lane l holds D[4 g + v][r], v = 0..3
 * The sum over k does not care which k a lane pair holds as long as A and B
 * agree; the kernels use that to feed their own key order (attn_fwd_mfma.h).
 *
 * The wrappers take 8 bytes of A and of B per lane (K = 32 8-bit values):
 *   qattn_mfma_16x16x32_i8    D (int32) += A B, int8; exact.
 *       gfx942: v_mfma_i32_16x16x32_i8. gfx90a has no K = 32 int8 shape:
 *       two v_mfma_i32_16x16x16i8, the low then the high 4 bytes of every
 *       lane (each a K = 16 product over half of the k; the sums are exact).
 *   qattn_mfma_16x16x32_e4m3  D (fp32) += A B / qattn_mfma_e4m3_unit(), e4m3
 *       codes (OCP, bias 7, as qattn/numerics.h). Products are exact; the order of
 *       the fp32 adds is the hardware's.
 *       gfx942: v_mfma_f32_16x16x32_fp8_fp8 reads its bytes as e4m3fnuz
 *       (bias 8: every OCP value halves, so every product is a quarter:
 *       unit 4; 0x80 is NaN there, -0 in OCP: clear it first with
 *       qattn_mfma_e4m3_fix; 0x7f / 0xff, NaN in OCP, never occur in codes
 *       of finite values). gfx90a has no fp8: the codes become f16 exactly
 *       (qattn_mfma_e4m3_f16) and go through two v_mfma_f32_16x16x16f16
 *       (unit 1).
 * In the host simulation the instructions are emulated wave-wide through
 * the block's lane exchange (hip_port.h): every thread of the block must
 * call them, the block being whole waves of 64 threads. The simulated target
 * is gfx942, or gfx90a's instruction pairs with QATTN_SIM_MFMA=gfx90a in the
 * environment (read at each launch by qattn_mfma_sim_target). The
 * emulation adds the products one by one in k order. */
#ifndef QATTN_KERNELS_MFMA_AMD_H
#define QATTN_KERNELS_MFMA_AMD_H

#include <stdint.h>

#include "hip_port.h"
#include "qattn/numerics.h"

#if defined(QATTN_HIP_SIM)
#define QATTN_MFMA_GFX94 0
#define QATTN_MFMA_GFX90A 0
#elif defined(__HIP_DEVICE_COMPILE__) && (defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__))
#define QATTN_MFMA_GFX94 1
#define QATTN_MFMA_GFX90A 0
#elif defined(__HIP_DEVICE_COMPILE__) && defined(__gfx90a__)
#define QATTN_MFMA_GFX94 0
#define QATTN_MFMA_GFX90A 1
#else /* the host pass of hipcc: the wrappers are never called there */
#define QATTN_MFMA_GFX94 0
#define QATTN_MFMA_GFX90A 0
#endif

/* bytes 0x80 (OCP e4m3 -0, e4m3fnuz NaN) of 4 codes -> 0x00 (+0) */
static __device__ __forceinline__ uint32_t qattn_mfma_e4m3_fix(uint32_t x)
{
    const uint32_t t = x ^ 0x80808080u; /* 0 where x has 0x80 */
    const uint32_t z = ~(((t & 0x7f7f7f7fu) + 0x7f7f7f7fu) | t) & 0x80808080u;
    return x & ~((z >> 7) * 0xffu);
}
static __device__ __forceinline__ uint64_t qattn_mfma_e4m3_fix64(uint64_t x)
{
    return (uint64_t)qattn_mfma_e4m3_fix((uint32_t)x) | (uint64_t)qattn_mfma_e4m3_fix((uint32_t)(x >> 32)) << 32;
}

/* an e4m3 code (OCP) as f16 bits, exactly (all e4m3 values are f16 values;
 * the NaN codes become +-480) */
static __device__ __forceinline__ uint32_t qattn_mfma_e4m3_f16(uint32_t c)
{
    const uint32_t m = c & 0x7fu, s = (c & 0x80u) << 8;
    const uint32_t h = m >= 8u   ? (m << 7) + 0x2000u        /* normal: the exponent + 15 - 7 */
                       : m >= 4u ? 0x2000u | (m & 3u) << 8   /* 4..7 x 2^-9 = (1 + (m - 4) / 4) 2^-7 */
                       : m >= 2u ? 0x1c00u | (m & 1u) << 9   /* 2, 3 x 2^-9 */
                                 : m * 0x1800u;              /* 0, 2^-9 */
    return s | h;
}
/* 4 e4m3 codes -> 4 f16 (code e in half e) */
static __device__ __forceinline__ uint64_t qattn_mfma_e4m3x4_f16x4(uint32_t x)
{
    return (uint64_t)qattn_mfma_e4m3_f16(x & 0xffu) | (uint64_t)qattn_mfma_e4m3_f16((x >> 8) & 0xffu) << 16 |
           (uint64_t)qattn_mfma_e4m3_f16((x >> 16) & 0xffu) << 32 | (uint64_t)qattn_mfma_e4m3_f16(x >> 24) << 48;
}

#if defined(QATTN_HIP_SIM)
/* ---- the emulation ---- */
enum { QATTN_SIM_MFMA_I8_K32, QATTN_SIM_MFMA_I8_K16, QATTN_SIM_MFMA_FP8_K32, QATTN_SIM_MFMA_F16_K16 };
/* 1: gfx90a's instruction pairs, 0: gfx942 */
inline int &qattn_mfma_sim_gfx90a()
{
    static thread_local int v = 0;
    return v;
}
/* the simulated target from QATTN_SIM_MFMA (gfx942 when unset) */
inline void qattn_mfma_sim_target()
{
    const char *e = getenv("QATTN_SIM_MFMA");
    qattn_mfma_sim_gfx90a() = e && strcmp(e, "gfx90a") == 0;
}
/* an e4m3fnuz byte (gfx942's fp8: bias 8, 0x80 NaN, no -0, no infinity) */
inline float qattn_sim_e4m3fnuz(unsigned c)
{
    if (c == 0x80u)
        return NAN;
    const int e = (int)(c >> 3 & 15u), m = (int)(c & 7u);
    const float v = e ? std::ldexp(1.0f + (float)m / 8.0f, e - 8) : std::ldexp((float)m, -10);
    return c & 0x80u ? -v : v;
}
/* one 16x16xK instruction of the wave: d (4 x int32 or fp32) += A B; a, b:
 * this lane's operand words (KL = 8 bytes, 4 bytes or 4 halves) */
inline void qattn_sim_mfma(int kind, void *d, uint64_t a, uint64_t b)
{
    if (qattn_sim_state_get().nthreads % 64) {
        fprintf(stderr, "mfma emulation: the block must be whole waves of 64 threads\n");
        abort();
    }
    const unsigned long long *x = qattn_sim_xchg_begin(a, b);
    const int t = qattn_sim_thread(), w0 = t & ~63, l = t & 63, r = l & 15, g = l >> 4;
    const int kl = kind == QATTN_SIM_MFMA_I8_K32 || kind == QATTN_SIM_MFMA_FP8_K32 ? 8 : 4, K = 4 * kl;
    for (int v = 0; v < 4; v++) {
        const int i = 4 * g + v, j = r;
        if (kind == QATTN_SIM_MFMA_I8_K32 || kind == QATTN_SIM_MFMA_I8_K16) {
            int32_t acc = ((int32_t *)d)[v];
            for (int k = 0; k < K; k++) {
                const int la = w0 + i + 16 * (k / kl), lb = w0 + j + 16 * (k / kl), e = k % kl;
                acc += (int32_t)(int8_t)(x[2 * la] >> (8 * e)) * (int32_t)(int8_t)(x[2 * lb + 1] >> (8 * e));
            }
            ((int32_t *)d)[v] = acc;
        } else {
            float acc = ((float *)d)[v];
            for (int k = 0; k < K; k++) {
                const int la = w0 + i + 16 * (k / kl), lb = w0 + j + 16 * (k / kl), e = k % kl;
                float av, bv;
                if (kind == QATTN_SIM_MFMA_FP8_K32) {
                    av = qattn_sim_e4m3fnuz((unsigned)(x[2 * la] >> (8 * e)) & 0xffu);
                    bv = qattn_sim_e4m3fnuz((unsigned)(x[2 * lb + 1] >> (8 * e)) & 0xffu);
                } else {
                    av = qattn_num_fp16_decode((uint16_t)(x[2 * la] >> (16 * e)));
                    bv = qattn_num_fp16_decode((uint16_t)(x[2 * lb + 1] >> (16 * e)));
                }
                acc = acc + av * bv; /* the product is exact */
            }
            ((float *)d)[v] = acc;
        }
    }
    qattn_sim_xchg_end();
}
#else
typedef int qattn_v4i __attribute__((ext_vector_type(4)));
typedef float qattn_v4f __attribute__((ext_vector_type(4)));
typedef _Float16 qattn_v4h __attribute__((ext_vector_type(4)));
#endif

/* D (int32) += A B: 16x16x32, int8 */
static __device__ __forceinline__ void qattn_mfma_16x16x32_i8(int (&d)[4], uint64_t a, uint64_t b)
{
#if defined(QATTN_HIP_SIM)
    if (qattn_mfma_sim_gfx90a()) {
        qattn_sim_mfma(QATTN_SIM_MFMA_I8_K16, d, a & 0xffffffffu, b & 0xffffffffu);
        qattn_sim_mfma(QATTN_SIM_MFMA_I8_K16, d, a >> 32, b >> 32);
    } else {
        qattn_sim_mfma(QATTN_SIM_MFMA_I8_K32, d, a, b);
    }
#elif QATTN_MFMA_GFX94
    qattn_v4i c = {d[0], d[1], d[2], d[3]};
    c = __builtin_amdgcn_mfma_i32_16x16x32_i8((long)a, (long)b, c, 0, 0, 0);
    d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3];
#elif QATTN_MFMA_GFX90A
    qattn_v4i c = {d[0], d[1], d[2], d[3]};
    c = __builtin_amdgcn_mfma_i32_16x16x16i8((int)(uint32_t)a, (int)(uint32_t)b, c, 0, 0, 0);
    c = __builtin_amdgcn_mfma_i32_16x16x16i8((int)(uint32_t)(a >> 32), (int)(uint32_t)(b >> 32), c, 0, 0, 0);
    d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3];
#else
    (void)d, (void)a, (void)b;
#endif
}

/* the factor that turns qattn_mfma_16x16x32_e4m3's accumulator into the
 * true sum (a power of 2) */
static __device__ __forceinline__ float qattn_mfma_e4m3_unit()
{
#if defined(QATTN_HIP_SIM)
    return qattn_mfma_sim_gfx90a() ? 1.0f : 4.0f;
#elif QATTN_MFMA_GFX94
    return 4.0f;
#else
    return 1.0f;
#endif
}

/* D (fp32) += A B / qattn_mfma_e4m3_unit(): 16x16x32, e4m3 codes without
 * 0x80 (qattn_mfma_e4m3_fix) */
static __device__ __forceinline__ void qattn_mfma_16x16x32_e4m3(float (&d)[4], uint64_t a, uint64_t b)
{
#if defined(QATTN_HIP_SIM)
    if (qattn_mfma_sim_gfx90a()) {
        qattn_sim_mfma(QATTN_SIM_MFMA_F16_K16, d, qattn_mfma_e4m3x4_f16x4((uint32_t)a),
                       qattn_mfma_e4m3x4_f16x4((uint32_t)b));
        qattn_sim_mfma(QATTN_SIM_MFMA_F16_K16, d, qattn_mfma_e4m3x4_f16x4((uint32_t)(a >> 32)),
                       qattn_mfma_e4m3x4_f16x4((uint32_t)(b >> 32)));
    } else {
        qattn_sim_mfma(QATTN_SIM_MFMA_FP8_K32, d, a, b);
    }
#elif QATTN_MFMA_GFX94
    qattn_v4f c = {d[0], d[1], d[2], d[3]};
    c = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8((long)a, (long)b, c, 0, 0, 0);
    d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3];
#elif QATTN_MFMA_GFX90A
    qattn_v4f c = {d[0], d[1], d[2], d[3]};
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(qattn_v4h, qattn_mfma_e4m3x4_f16x4((uint32_t)a)),
                                              __builtin_bit_cast(qattn_v4h, qattn_mfma_e4m3x4_f16x4((uint32_t)b)), c,
                                              0, 0, 0);
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(
        __builtin_bit_cast(qattn_v4h, qattn_mfma_e4m3x4_f16x4((uint32_t)(a >> 32))),
        __builtin_bit_cast(qattn_v4h, qattn_mfma_e4m3x4_f16x4((uint32_t)(b >> 32))), c, 0, 0, 0);
    d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3];
#else
    (void)d, (void)a, (void)b;
#endif
}

#endif
