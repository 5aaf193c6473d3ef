/* NVIDIA sm_90a (Hopper) wrappers (inline PTX): warpgroup MMA (wgmma) and
 * its matrix descriptors, mbarriers, TMA loads, named barriers and register
 * budgets, for the wgmma kernels (attn_fwd_wgmma.h, attn_fwd_wgsolo.h,
 * sparse_wgmma.h). nvcc only, like mma_nvidia.h. */
#ifndef QATTN_KERNELS_WGMMA_NVIDIA_H
#define QATTN_KERNELS_WGMMA_NVIDIA_H

#include "mma_nvidia.h" /* nvcc only; stdint */

/* ---- Hopper (sm_90a) warpgroup MMA: wgmma.mma_async ----
 * A warpgroup (4 consecutive warps, the first at a warp index divisible by
 * 4) computes a 64 x N tile; warp w of the group owns rows 16w..16w+15 with
 * the mma.sync m16n8 accumulator layout per 8-column tile t:
 *   d[4t], d[4t+1] = D[16w+g][8t+2i, 8t+2i+1], d[4t+2], d[4t+3] = D[16w+g+8][...].
 * Operands in shared memory are given by 64-bit matrix descriptors
 * (qattn_wgmma_desc); an 8-bit A in registers has the m16n8k32 A layout per
 * warp. Calls are asynchronous: qattn_wgmma_fence before (registers written
 * by other instructions), qattn_wgmma_commit after, qattn_wgmma_wait<N>
 * before reading the accumulators. Compiled only for sm_90a
 * (QATTN_WGMMA); elsewhere the wrappers are empty and the kernels that
 * use them trap. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QATTN_WGMMA 1
#else
#define QATTN_WGMMA 0
#endif

/* descriptor of a K-major operand with the 128-byte swizzle: rows of 128
 * bytes in 1024-byte atoms of 8 rows (16-byte chunk c of row r stored at
 * chunk c ^ (r % 8)), atoms 1024 bytes apart along M / N; smem_addr is the
 * shared-window address of the first row plus the k offset in bytes (the
 * atoms themselves 1024-byte aligned) */
static __device__ __forceinline__ uint64_t qattn_wgmma_desc_sw128(uint32_t smem_addr)
{
    uint64_t d = 0;
    d |= (uint64_t)((smem_addr & 0x3FFFFu) >> 4);      /* start address, bits 0-13 */
    d |= (uint64_t)1 << 16;                            /* leading byte offset (unused for swizzled K-major) */
    d |= (uint64_t)(1024 >> 4) << 32;                  /* stride byte offset: 8-row atoms 1024 B apart */
    d |= (uint64_t)1 << 62;                            /* layout: 128-byte swizzle */
    return d;
}

/* the same with the 64-byte swizzle: rows of 64 bytes in 512-byte atoms of
 * 8 rows (16-byte chunk c of row r stored at chunk c ^ ((r / 2) % 4)) */
static __device__ __forceinline__ uint64_t qattn_wgmma_desc_sw64(uint32_t smem_addr)
{
    uint64_t d = 0;
    d |= (uint64_t)((smem_addr & 0x3FFFFu) >> 4); /* start address, bits 0-13 */
    d |= (uint64_t)1 << 16;                       /* leading byte offset (unused for swizzled K-major) */
    d |= (uint64_t)(512 >> 4) << 32;              /* stride byte offset: 8-row atoms 512 B apart */
    d |= (uint64_t)2 << 62;                       /* layout: 64-byte swizzle */
    return d;
}

static __device__ __forceinline__ void qattn_wgmma_fence(void)
{
#if QATTN_WGMMA
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void qattn_wgmma_commit(void)
{
#if QATTN_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
static __device__ __forceinline__ void qattn_wgmma_wait(void)
{
#if QATTN_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
/* shared memory written by the generic proxy (st.shared, cp.async) made
 * visible to the async proxy that wgmma reads through */
static __device__ __forceinline__ void qattn_fence_proxy_async_smem(void)
{
#if QATTN_WGMMA
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
/* keep the compiler from moving accesses of an accumulator register across
 * the asynchronous wgmma window */
static __device__ __forceinline__ void qattn_wgmma_fence_reg(int &r) { asm volatile("" : "+r"(r)::"memory"); }
static __device__ __forceinline__ void qattn_wgmma_fence_reg(float &r) { asm volatile("" : "+f"(r)::"memory"); }
static __device__ __forceinline__ void qattn_wgmma_fence_reg(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }

/* ---- mbarriers (sm_90a kernels: producer / consumer stages) ----
 * A 64-bit barrier in shared memory (bar = its shared-window address):
 * init with the number of arrivals that complete a phase; waiting on parity
 * P returns once the phase of parity P has completed (a fresh barrier counts
 * its phase "-1", parity 1, as completed). */
static __device__ __forceinline__ void qattn_mbar_init(uint32_t bar, int count)
{
#if QATTN_WGMMA
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
    (void)bar, (void)count;
#endif
}
static __device__ __forceinline__ void qattn_mbar_arrive(uint32_t bar)
{
#if QATTN_WGMMA
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
    (void)bar;
#endif
}
/* one arrival on bar once every cp.async this thread issued so far has
 * landed (.noinc: the arrival is one of the count given to init) */
static __device__ __forceinline__ void qattn_cp_async_mbar_arrive(uint32_t bar)
{
#if QATTN_WGMMA
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#else
    (void)bar;
#endif
}
/* one arrival on bar that also expects bytes more of asynchronous copies (TMA) to complete the phase */
static __device__ __forceinline__ void qattn_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
#if QATTN_WGMMA
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#else
    (void)bar, (void)bytes;
#endif
}
/* TMA: the box of tensor map tmap (the generic address of a __grid_constant__ CUtensorMap) at
 * coordinates c (innermost first; 4 or 5 of them) into shared memory at dst, its bytes completing
 * on mbarrier bar; coordinates past the tensor read zeros */
static __device__ __forceinline__ void qattn_tma_load2(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1)
{
#if QATTN_WGMMA
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
                 "[%2];\n" ::"r"(dst),
                 "l"(tmap), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
#else
    (void)dst, (void)tmap, (void)bar, (void)c0, (void)c1;
#endif
}
static __device__ __forceinline__ void qattn_tma_load4(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1,
                                                       int c2, int c3)
{
#if QATTN_WGMMA
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
                 "%5, %6}], [%2];\n" ::"r"(dst),
                 "l"(tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
#else
    (void)dst, (void)tmap, (void)bar, (void)c0, (void)c1, (void)c2, (void)c3;
#endif
}
static __device__ __forceinline__ void qattn_tma_load5(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1,
                                                       int c2, int c3, int c4)
{
#if QATTN_WGMMA
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
                 "%5, %6, %7}], [%2];\n" ::"r"(dst),
                 "l"(tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
                 : "memory");
#else
    (void)dst, (void)tmap, (void)bar, (void)c0, (void)c1, (void)c2, (void)c3, (void)c4;
#endif
}
static __device__ __forceinline__ void qattn_mbar_wait(uint32_t bar, uint32_t parity)
{
#if QATTN_WGMMA
    uint32_t done = 0;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
#else
    (void)bar, (void)parity;
#endif
}
/* named barrier ID among NT threads (a wgmma kernel's producer warpgroup, or
 * a role within it; ID 0 is __syncthreads') */
template <int ID, int NT>
static __device__ __forceinline__ void qattn_bar_sync(void)
{
#if QATTN_WGMMA
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(NT) : "memory");
#endif
}
/* named barrier id (a register) among nt threads: this thread waits for the
 * rest / only counts itself (ping-pong between consumer warpgroups) */
static __device__ __forceinline__ void qattn_bar_sync_id(int id, int nt)
{
#if QATTN_WGMMA
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nt) : "memory");
#else
    (void)id, (void)nt;
#endif
}
static __device__ __forceinline__ void qattn_bar_arrive_id(int id, int nt)
{
#if QATTN_WGMMA
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(nt) : "memory");
#else
    (void)id, (void)nt;
#endif
}
/* warpgroup register budget (every warp of the warpgroup executes it) */
template <int N>
static __device__ __forceinline__ void qattn_setmaxnreg_inc(void)
{
#if QATTN_WGMMA
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
static __device__ __forceinline__ void qattn_setmaxnreg_dec(void)
{
#if QATTN_WGMMA
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

/* d[64] (s32) (+)= A (s8, 64 x 32, descriptor) * B (s8, 32 x 128, descriptor, K-major);
 * accumulate = 0: d = A B */
static __device__ __forceinline__ void qattn_wgmma_m64n128k32_s8(int *d, uint64_t da, uint64_t db, int accumulate)
{
#if QATTN_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p;\n}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
                   "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
                   "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
                   "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
                   "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
                   "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
                   "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
                   "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
                 : "l"(da), "l"(db), "r"(accumulate));
#else
    (void)d, (void)da, (void)db, (void)accumulate;
#endif
}

/* d[32] (s32) (+)= A (s8, 64 x 32, descriptor) * B (s8, 32 x 64, descriptor),
 * both K-major: Q.K of 64 keys */
static __device__ __forceinline__ void qattn_wgmma_m64n64k32_s8(int *d, uint64_t da, uint64_t db, int accumulate)
{
#if QATTN_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
                   "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
                   "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
                   "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
                 : "l"(da), "l"(db), "r"(accumulate));
#else
    (void)d, (void)da, (void)db, (void)accumulate;
#endif
}

/* d[64] (f32) (+)= A (e4m3, 64 x 32, registers a[4]: the m16n8k32 A layout per
 * warp) * B (e4m3, 32 x 128, descriptor, K-major); the tensor core keeps
 * about 22 bits of the sum (acc=fp22) */
static __device__ __forceinline__ void qattn_wgmma_m64n128k32_e4m3_rs(float *d, const uint32_t *a, uint64_t db,
                                                                     int accumulate)
{
#if QATTN_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
#else
    (void)d, (void)a, (void)db, (void)accumulate;
#endif
}

/* d[32] (f32) (+)= A (e4m3, 64 x 32, registers a[4]) * B (e4m3, 32 x 64,
 * descriptor, K-major): P.V for head dim 64 */
static __device__ __forceinline__ void qattn_wgmma_m64n64k32_e4m3_rs(float *d, const uint32_t *a, uint64_t db,
                                                                    int accumulate)
{
#if QATTN_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
#else
    (void)d, (void)a, (void)db, (void)accumulate;
#endif
}

/* ---- 16-bit (fp16 / bf16) wgmma for the baseline instances, e4m3 Q.K ----
 * A from registers (the m16n8k16 A layout per warp: a0 row g, k 2i, 2i+1;
 * a1 row g+8; a2, a3 k + 8): Q for Q.K with B = K K-major, P for P.V with
 * B = V in rows of keys (N-major: imm-trans-b = 1).
 * The accumulator is fp32 (products of 16-bit values are exact).
 * e4m3 Q.K: A and B from shared memory (descriptors), both K-major. */
#define QATTN_WG_F8(d, o)                                                                                     \
    "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), \
        "+f"(d[o + 7])
#define QATTN_WG_F32(d) QATTN_WG_F8(d, 0), QATTN_WG_F8(d, 8), QATTN_WG_F8(d, 16), QATTN_WG_F8(d, 24)
#define QATTN_WG_F64(d) QATTN_WG_F32(d), QATTN_WG_F8(d, 32), QATTN_WG_F8(d, 40), QATTN_WG_F8(d, 48), QATTN_WG_F8(d, 56)
#define QATTN_WG_S32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define QATTN_WG_S64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

/* descriptor of an MN-major operand with the 128-byte swizzle: rows (one
 * per k) of 64 16-bit elements = 128 bytes, 8-row atoms 1024 bytes apart
 * along k, blocks of 64 elements along M / N lbo bytes apart */
static __device__ __forceinline__ uint64_t qattn_wgmma_desc_sw128_mn(uint32_t smem_addr, uint32_t lbo)
{
    uint64_t d = 0;
    d |= (uint64_t)((smem_addr & 0x3FFFFu) >> 4); /* start address, bits 0-13 */
    d |= (uint64_t)((lbo & 0x3FFFFu) >> 4) << 16; /* leading byte offset: the next 64 elements of M / N */
    d |= (uint64_t)(1024 >> 4) << 32;             /* stride byte offset: 8 rows of k */
    d |= (uint64_t)1 << 62;                       /* layout: 128-byte swizzle */
    return d;
}

/* a descriptor as its two words, so that a k-step's offset is one 32-bit add
 * to the start address field of the low word (shared addresses < 2^18: no
 * carry out of it); as 64-bit sums ptxas kept descriptors in vector
 * registers (the sparse fp8 consumers spilled 232 bytes) */
struct qattn_wgmma_desc_words {
    uint32_t hi, lo;
};
static __device__ __forceinline__ qattn_wgmma_desc_words qattn_wgmma_desc_split(uint64_t d)
{
    return {(uint32_t)(d >> 32), (uint32_t)d};
}
/* the descriptor off16 (bytes / 16) further on */
static __device__ __forceinline__ uint64_t qattn_wgmma_desc_at(qattn_wgmma_desc_words d, uint32_t off16)
{
    return (uint64_t)d.hi << 32 | (d.lo + off16);
}

/* d[N / 2] (s32) (+)= A (s8, 64 x 32, registers a[4]: the m16n8k32 A layout
 * per warp) * B (s8, 32 x N, descriptor, K-major), N = 64 or 128: int8 P.V
 * (exact in int32) */
#define QATTN_WG_I8(d, o)                                                                                     \
    "+r"(d[o]), "+r"(d[o + 1]), "+r"(d[o + 2]), "+r"(d[o + 3]), "+r"(d[o + 4]), "+r"(d[o + 5]), "+r"(d[o + 6]), \
        "+r"(d[o + 7])
#define QATTN_WG_I32(d) QATTN_WG_I8(d, 0), QATTN_WG_I8(d, 8), QATTN_WG_I8(d, 16), QATTN_WG_I8(d, 24)
#define QATTN_WG_I64(d) QATTN_WG_I32(d), QATTN_WG_I8(d, 32), QATTN_WG_I8(d, 40), QATTN_WG_I8(d, 48), QATTN_WG_I8(d, 56)
template <int N>
static __device__ __forceinline__ void qattn_wgmma_m64k32_s8_rs(int *d, const uint32_t *a, uint64_t db, int accumulate)
{
#if QATTN_WGMMA
    if (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 " QATTN_WG_S64 ", {%64, %65, %66, %67}, %68, p;\n}\n"
                     : QATTN_WG_I64(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 " QATTN_WG_S32 ", {%32, %33, %34, %35}, %36, p;\n}\n"
                     : QATTN_WG_I32(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
#else
    (void)d, (void)a, (void)db, (void)accumulate;
#endif
}

/* d[N / 2] (f32) (+)= A (e4m3, 64 x 32, descriptor) * B (e4m3, 32 x N,
 * descriptor), both K-major, N = 64 or 128: e4m3 Q.K (the tensor core's
 * fp22 sum, as for P.V) */
template <int N>
static __device__ __forceinline__ void qattn_wgmma_m64k32_e4m3_ss(float *d, uint64_t da, uint64_t db, int accumulate)
{
#if QATTN_WGMMA
    if (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " QATTN_WG_S64 ", %64, %65, p, 1, 1;\n}\n"
                     : QATTN_WG_F64(d)
                     : "l"(da), "l"(db), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " QATTN_WG_S32 ", %32, %33, p, 1, 1;\n}\n"
                     : QATTN_WG_F32(d)
                     : "l"(da), "l"(db), "r"(accumulate));
#else
    (void)d, (void)da, (void)db, (void)accumulate;
#endif
}

/* d[N / 2] (f32) (+)= A (64 x 16, registers a[4]) * B (16 x N, descriptor),
 * N = 64 or 128; B K-major (TB = 0: Q.K with Q held in registers) or
 * N-major (TB = 1: P.V with V in rows of keys) */
template <int N, int BF, int TB>
static __device__ __forceinline__ void qattn_wgmma_m64k16_rs(float *d, const uint32_t *a, uint64_t db, int accumulate)
{
#if QATTN_WGMMA
    if (N == 128 && BF)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " QATTN_WG_S64
                     ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : QATTN_WG_F64(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(TB));
    else if (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " QATTN_WG_S64
                     ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : QATTN_WG_F64(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(TB));
    else if (BF)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " QATTN_WG_S32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : QATTN_WG_F32(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " QATTN_WG_S32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : QATTN_WG_F32(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(TB));
#else
    (void)d, (void)a, (void)db, (void)accumulate;
#endif
}

/* d[N / 2] (f32) (+)= A (64 x 16, descriptor, K-major) * B (16 x N, descriptor,
 * K-major), N = 64 or 128, fp16 or bf16 (BF): Q.K with Q in shared memory (the
 * baselines with three consumer warpgroups, whose registers do not hold Q's
 * fragments) */
template <int N, int BF>
static __device__ __forceinline__ void qattn_wgmma_m64k16_ss(float *d, uint64_t da, uint64_t db, int accumulate)
{
#if QATTN_WGMMA
    if (N == 64 && BF)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " QATTN_WG_S32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : QATTN_WG_F32(d)
                     : "l"(da), "l"(db), "r"(accumulate));
    else if (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " QATTN_WG_S32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : QATTN_WG_F32(d)
                     : "l"(da), "l"(db), "r"(accumulate));
    else if (BF)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " QATTN_WG_S64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : QATTN_WG_F64(d)
                     : "l"(da), "l"(db), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " QATTN_WG_S64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : QATTN_WG_F64(d)
                     : "l"(da), "l"(db), "r"(accumulate));
#else
    (void)d, (void)da, (void)db, (void)accumulate;
#endif
}

/* d[N / 4] (f16x2) (+)= A (64 x 16, registers a[4], f16) * B (16 x N, V in
 * rows of keys: N-major), N = 64 or 128: the f16 accumulator (acc=fp16,
 * sage1-b); register x holds the fp32 accumulator's elements 2x, 2x + 1 */
#define QATTN_WG_H8(d, o)                                                                                     \
    "+r"(d[o]), "+r"(d[o + 1]), "+r"(d[o + 2]), "+r"(d[o + 3]), "+r"(d[o + 4]), "+r"(d[o + 5]), "+r"(d[o + 6]), \
        "+r"(d[o + 7])
template <int N>
static __device__ __forceinline__ void qattn_wgmma_m64k16_f16acc(uint32_t *d, const uint32_t *a, uint64_t db)
{
#if QATTN_WGMMA
    if (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16 " QATTN_WG_S32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                     : QATTN_WG_H8(d, 0), QATTN_WG_H8(d, 8), QATTN_WG_H8(d, 16), QATTN_WG_H8(d, 24)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
                     "{%16, %17, %18, %19}, %20, p, 1, 1, 1;\n}\n"
                     : QATTN_WG_H8(d, 0), QATTN_WG_H8(d, 8)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#else
    (void)d, (void)a, (void)db;
#endif
}

/* d[16] (f32) (+)= A (bf16, 64 x 16, descriptor, K-major) * B (bf16, 16 x 32,
 * descriptor, K-major): a 32-key slice of bf16 Q.K with both operands in
 * shared memory (the sparse prefill's 512-wide Q does not fit registers) */
static __device__ __forceinline__ void qattn_wgmma_m64n32k16_bf16_ss(float *d, uint64_t da, uint64_t db, int accumulate)
{
#if QATTN_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : QATTN_WG_F8(d, 0), QATTN_WG_F8(d, 8)
                 : "l"(da), "l"(db), "r"(accumulate));
#else
    (void)d, (void)da, (void)db, (void)accumulate;
#endif
}

/* d[64] (f32) += A (bf16, 64 x 16, descriptor, K-major) * B (bf16, 16 x 128,
 * descriptor, N-major: V in rows of keys): P.V with P from shared memory */
static __device__ __forceinline__ void qattn_wgmma_m64n128k16_bf16_ss_tb(float *d, uint64_t da, uint64_t db)
{
#if QATTN_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " QATTN_WG_S64 ", %64, %65, p, 1, 1, 0, 1;\n}\n"
                 : QATTN_WG_F64(d)
                 : "l"(da), "l"(db));
#else
    (void)d, (void)da, (void)db;
#endif
}

#endif
