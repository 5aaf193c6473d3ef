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
 * architecture themselves (qattn_mma_has_fp8). The sm_90a wrappers (wgmma,
 * mbarriers, TMA, named barriers) are in wgmma_nvidia.h. */
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

/* integer mma.sync with 4 A, 2 B and 4 s32 C / D registers; SHAPE: the
 * instruction's shape and types, e.g. "m16n8k32.row.col.s32.s8.s8.s32" */
#if QATTN_MMA_SM80
#define QATTN_MMA_INT(SHAPE, d, a, b, c)                                                                   \
    asm("mma.sync.aligned." SHAPE " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n" \
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                                   \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), \
          "r"(c[3]))
#else
#define QATTN_MMA_INT(SHAPE, d, a, b, c) ((void)(a), (void)(b), d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3])
#endif

/* d[4] (s32) = a[4] (s8, 16 x 32) * b[2] (s8, 32 x 8) + c[4] */
static __device__ __forceinline__ void qattn_mma_m16n8k32_s8(int *d, const uint32_t *a, const uint32_t *b, const int *c)
{
    QATTN_MMA_INT("m16n8k32.row.col.s32.s8.s8.s32", d, a, b, c);
}

/* d[4] (s32) = a[4] (s4, 16 x 64) * b[2] (s4, 64 x 8) + c[4]: the fragments
 * of m16n8k32 s8 with 8 nibbles per register in place of 4 bytes (the lower
 * k index in the lower bits), so int4 rows packed low nibble first load as
 * the int8 rows of half the width (sm_90 has no int4 tensor cores: ptxas
 * emulates it there) */
static __device__ __forceinline__ void qattn_mma_m16n8k64_s4(int *d, const uint32_t *a, const uint32_t *b, const int *c)
{
    QATTN_MMA_INT("m16n8k64.row.col.s32.s4.s4.s32", d, a, b, c);
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

/* as qattn_mma_m16n8k16_f16_f32 with bf16 A and B */
static __device__ __forceinline__ void qattn_mma_m16n8k16_bf16_f32(float *d, const uint32_t *a, const uint32_t *b,
                                                                   const float *c)
{
#if QATTN_MMA_SM80
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
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

/* two floats to bf16 / fp16 (lo in the low half), rounded to nearest even,
 * overflow to the largest finite value: qattn/numerics.h's qattn_num_bf16_encode
 * / qattn_num_fp16_encode for finite inputs (NaN gives the canonical NaN
 * 0x7fff / 0x7fff where those give 0x7fc0 / 0x7e00; the kernels never write
 * one: non-finite inputs are rejected before) */
static __device__ __forceinline__ uint32_t qattn_cvt_bf16x2_f32(float lo, float hi)
{
#if QATTN_MMA_SM80
    uint32_t r;
    asm("cvt.rn.satfinite.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    (void)lo, (void)hi;
    return 0u;
#endif
}
/* the two fp16 halves of x as floats (exact) */
static __device__ __forceinline__ void qattn_f16x2_unpack(uint32_t x, float &lo, float &hi)
{
#if QATTN_MMA_SM80
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}\n"
        : "=f"(lo), "=f"(hi)
        : "r"(x));
#else
    (void)x;
    lo = hi = 0.0f;
#endif
}

static __device__ __forceinline__ uint32_t qattn_cvt_f16x2_f32(float lo, float hi)
{
#if QATTN_MMA_SM80
    uint32_t r;
    asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    (void)lo, (void)hi;
    return 0u;
#endif
}
/* the f16 products of x's and y's halves, each rounded once to nearest even (__hmul2) */
static __device__ __forceinline__ uint32_t qattn_mul_f16x2(uint32_t x, uint32_t y)
{
#if QATTN_MMA_SM80
    uint32_t r;
    asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(x), "r"(y));
    return r;
#else
    (void)x, (void)y;
    return 0u;
#endif
}

/* an int32 of magnitude below 2^22 to float, exactly, two ways with the
 * same rate on the H100 (kernels/probes/cvt_rate.cu: 1.85-1.87 a clock a
 * multiprocessor, half of fma's; neither on ex2's XU): an integer add into
 * the mantissa of 1.5 * 2^23 and a float subtract (two issue slots), or
 * one cvt.rn.f32.s32. Which is faster depends on the code around it:
 * the scores half one way and half the other, or all by cvt, where that
 * measured faster (qattn_wg_s2f), and qattn_i2f_cvt for sage1-vb's int32
 * P.V into O (7% faster) */
static __device__ __forceinline__ float qattn_i2f_small(int x)
{
    return __fsub_rn(__int_as_float(x + 0x4B400000), 12582912.0f);
}
static __device__ __forceinline__ float qattn_i2f_cvt(int x)
{
    return __int2float_rn(x);
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

/* ldmatrix .x2 of 8-bit data: as qattn_ldmatrix_x4 for matrices 0 and 1 (lanes 0..15 give
 * the row addresses, the others' are not read) */
static __device__ __forceinline__ void qattn_ldmatrix_x2(uint32_t *r, const void *smem_row)
{
#if QATTN_MMA_SM80
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
#else
    (void)smem_row;
    r[0] = r[1] = 0u;
#endif
}

/* ldmatrix .x4 .trans of 16-bit data: lanes 8m..8m+7 give the addresses of
 * rows 0..7 (8 elements each) of matrix m; register m of lane 4g + i holds
 * elements (rows 2i, 2i+1; column g) of matrix m (a B fragment of m16n8k16
 * from a k-major tile) */
static __device__ __forceinline__ void qattn_ldmatrix_x4_trans(uint32_t *r, const void *smem_row)
{
#if QATTN_MMA_SM80
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
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

/* 4 bytes global -> shared, asynchronously (through L1); src_bytes 0 fills zeros */
static __device__ __forceinline__ void qattn_cp_async4(void *smem_dst, const void *gsrc, int src_bytes)
{
#if QATTN_MMA_SM80
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(a), "l"(gsrc), "r"(src_bytes));
#else
    (void)smem_dst, (void)gsrc, (void)src_bytes;
#endif
}

/* 8 bytes global -> shared, asynchronously (through L1); src_bytes 0 fills zeros */
static __device__ __forceinline__ void qattn_cp_async8(void *smem_dst, const void *gsrc, int src_bytes)
{
#if QATTN_MMA_SM80
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(a), "l"(gsrc), "r"(src_bytes));
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

/* ---- thread-block clusters (sm_90): a block's shared memory read by the other blocks of its
 * cluster ---- */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define QATTN_CLUSTER 1
#else
#define QATTN_CLUSTER 0
#endif
/* every thread of every block of the cluster arrives, then waits for all: shared memory that any
 * of them wrote before is visible to all after (release / acquire); every thread calls it */
static __device__ __forceinline__ void qattn_cluster_sync(void)
{
#if QATTN_CLUSTER
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::
                     : "memory");
#endif
}
/* the two halves of qattn_cluster_sync: arrive (what this thread did before, reads included,
 * complete), then, later, wait for every thread of the cluster to have arrived */
static __device__ __forceinline__ void qattn_cluster_arrive(void)
{
#if QATTN_CLUSTER
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void qattn_cluster_wait(void)
{
#if QATTN_CLUSTER
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
/* atomically add v to the word at a shared::cluster address (qattn_cluster_map); the old value */
static __device__ __forceinline__ uint32_t qattn_cluster_atom_add(uint32_t at, uint32_t v)
{
    uint32_t old = 0u;
#if QATTN_CLUSTER
    asm volatile("atom.relaxed.cluster.shared::cluster.add.u32 %0, [%1], %2;\n" : "=r"(old) : "r"(at), "r"(v));
#else
    (void)at, (void)v;
#endif
    return old;
}
/* this block's rank in its cluster */
static __device__ __forceinline__ unsigned qattn_cluster_rank(void)
{
    unsigned r = 0;
#if QATTN_CLUSTER
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
    return r;
}
/* the address in block rank's shared memory of what smem (this block's shared memory) is in this block's */
static __device__ __forceinline__ uint32_t qattn_cluster_map(const void *smem, unsigned rank)
{
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem), r = 0;
#if QATTN_CLUSTER
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
#else
    (void)a, (void)rank;
#endif
    return r;
}
static __device__ __forceinline__ float qattn_cluster_ld(uint32_t at)
{
    float x = 0.f;
#if QATTN_CLUSTER
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(x) : "r"(at) : "memory");
#else
    (void)at;
#endif
    return x;
}
static __device__ __forceinline__ float4 qattn_cluster_ld4(uint32_t at)
{
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
#if QATTN_CLUSTER
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w)
                 : "r"(at)
                 : "memory");
#else
    (void)at;
#endif
    return x;
}

/* 2^x, ex2.approx.ftz (what exp2f compiles to with fast math) */
static __device__ __forceinline__ float qattn_ex2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

#endif
