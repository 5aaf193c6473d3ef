/* NVIDIA matrix-instruction wrappers (inline PTX), named by shape and type.
 * Built only by the NVIDIA backend (nvcc): the AMD build and the host
 * simulation never include this header.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k32 with 8-bit A/B, row.col), lane
 * l = 4 g + i (g = l / 4 the group, i = l % 4):
 *   A [16 x 32] row-major, 4 x b32: a0 = A[g][4i..4i+3], a1 = A[g+8][4i..4i+3],
 *                                   a2 = A[g][16+4i..], a3 = A[g+8][16+4i..]
 *                                   (byte 0 of a register = the lowest column)
 *   B [32 x 8] column-major, 2 x b32: b0 = B[4i..4i+3][g], b1 = B[16+4i..][g]
 *   C/D [16 x 8], 4 x (s32 | f32): c0, c1 = C[g][2i, 2i+1], c2, c3 = C[g+8][2i, 2i+1]
 * The e4m3 shape (sm_89+) has the same layouts as the s8 one. On sm_90 the
 * e4m3 mma.sync is not native: ptxas turns it into F2FP e4m3 -> f16 unpacks of
 * both operands and two HMMA.16816.F32 (seen in the SASS), so the attention
 * kernel converts V to f16 once per block and calls m16n8k16 f16 itself.
 *
 * Every wrapper compiles to nothing on targets that lack the instruction
 * (__CUDA_ARCH__ below the guard); the kernels that call them check the
 * architecture themselves (qattn_mma_has_fp8). */
#ifndef QATTN_KERNELS_MMA_NVIDIA_H
#define QATTN_KERNELS_MMA_NVIDIA_H

#include <stdint.h>

#if !defined(__CUDACC__)
#error "mma_nvidia.h is for nvcc only (NVIDIA backend)"
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define QATTN_MMA_FP8 1 /* e4m3 mma and cvt to e4m3 exist */
#else
#define QATTN_MMA_FP8 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define QATTN_MMA_SM80 1 /* s8 m16n8k32, ldmatrix, cp.async */
#else
#define QATTN_MMA_SM80 0
#endif

/* d[4] (s32) = a[4] (s8, 16 x 32) * b[2] (s8, 32 x 8) + c[4] */
static __device__ __forceinline__ void qattn_mma_m16n8k32_s8(int *d, const uint32_t *a, const uint32_t *b, const int *c)
{
#if QATTN_MMA_SM80
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%10, %11, %12, %13};\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]),
                   "r"(c[2]), "r"(c[3]));
#else
    (void)a, (void)b;
    d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3];
#endif
}

/* d[4] (f32) = a[4] (e4m3, 16 x 32) * b[2] (e4m3, 32 x 8) + c[4]; the tensor
 * core keeps about 22 bits of the sum (acc=fp22) */
static __device__ __forceinline__ void qattn_mma_m16n8k32_e4m3_f32(float *d, const uint32_t *a, const uint32_t *b,
                                                                   const float *c)
{
#if QATTN_MMA_FP8
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                   "f"(c[2]), "f"(c[3]));
#else
    (void)a, (void)b;
    d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3];
#endif
}

/* d[4] (f32) = a[4] (f16x2, 16 x 16) * b[2] (f16x2, 16 x 8) + c[4]; layouts:
 * a0 = A[g][2i, 2i+1], a1 = A[g+8][2i, 2i+1], a2 = A[g][8+2i, 9+2i],
 * a3 = A[g+8][8+2i, 9+2i]; b0 = B[2i, 2i+1][g], b1 = B[8+2i, 9+2i][g];
 * C as for m16n8k32 */
static __device__ __forceinline__ void qattn_mma_m16n8k16_f16_f32(float *d, const uint32_t *a, const uint32_t *b,
                                                                  const float *c)
{
#if QATTN_MMA_SM80
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
#else
    (void)a, (void)b;
    d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3];
#endif
}

/* two e4m3 codes (bits 0..7, 8..15) to two fp16 (exact: every e4m3 value is an fp16 value) */
static __device__ __forceinline__ uint32_t qattn_cvt_f16x2_e4m3x2(uint32_t x)
{
#if QATTN_MMA_FP8
    uint32_t r;
    asm("{\n.reg .b16 t;\ncvt.u16.u32 t, %1;\ncvt.rn.f16x2.e4m3x2 %0, t;\n}\n" : "=r"(r) : "r"(x));
    return r;
#else
    (void)x;
    return 0u;
#endif
}

/* two floats to two e4m3 codes (round to nearest even, saturating at 448):
 * lo in bits 0..7, hi in bits 8..15 */
static __device__ __forceinline__ uint32_t qattn_cvt_e4m3x2_f32(float lo, float hi)
{
#if QATTN_MMA_FP8
    uint16_t r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
    return (uint32_t)r;
#else
    (void)lo, (void)hi;
    return 0u;
#endif
}

/* an int32 of magnitude below 2^22 to float, exactly, on the FMA pipe
 * (integer add into the mantissa of 1.5 * 2^23, then a float subtract)
 * instead of I2F on the quarter-rate pipe that ex2 needs */
static __device__ __forceinline__ float qattn_i2f_small(int x)
{
    return __fsub_rn(__int_as_float(x + 0x4B400000), 12582912.0f);
}

/* ldmatrix .x4 of 8-bit data: four 8 x 16-byte matrices; lanes 8m..8m+7 give
 * the row addresses of matrix m; register m of lane 4g + i = bytes 4i..4i+3
 * of row g of matrix m (the B fragment layout of m16n8k32 for rows = n) */
static __device__ __forceinline__ void qattn_ldmatrix_x4(uint32_t *r, const void *smem_row)
{
#if QATTN_MMA_SM80
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    (void)smem_row;
    r[0] = r[1] = r[2] = r[3] = 0u;
#endif
}

/* 16 bytes global -> shared, asynchronously; src_bytes 0 fills zeros */
static __device__ __forceinline__ void qattn_cp_async16(void *smem_dst, const void *gsrc, int src_bytes)
{
#if QATTN_MMA_SM80
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(gsrc), "r"(src_bytes));
#else
    (void)smem_dst, (void)gsrc, (void)src_bytes;
#endif
}

static __device__ __forceinline__ void qattn_cp_async_commit(void)
{
#if QATTN_MMA_SM80
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* wait until at most N groups are pending */
template <int N>
static __device__ __forceinline__ void qattn_cp_async_wait(void)
{
#if QATTN_MMA_SM80
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* 2^x, ex2.approx.ftz (what exp2f compiles to with fast math) */
static __device__ __forceinline__ float qattn_ex2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

#endif
