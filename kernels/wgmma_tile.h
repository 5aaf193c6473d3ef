/* The wgmma attention tile (attn_fwd_wgmma.h): block shape, shared-memory
 * budget, the swizzled layouts of Q, K and V^T tiles and their wgmma
 * descriptors. NVIDIA only (sm_90a). */
#ifndef QATTN_KERNELS_WGMMA_TILE_H
#define QATTN_KERNELS_WGMMA_TILE_H

#include "wgmma_nvidia.h" /* the wgmma descriptors */
#include "qattn/numerics.h" /* QATTN_FMT_* */

/* query rows and threads of a block with nc consumer warpgroups (64 rows each) and one producer */
#define QATTN_WGMMA_BMN(nc) (64 * (nc))
#define QATTN_WGMMA_BM QATTN_WGMMA_BMN(2) /* with two (the unpacking producer, a fused Q) */
#define QATTN_WGMMA_THREADSN(nc) (128 * ((nc) + 1))
/* keys a shared stage holds (Q/K format qf, V's format in shared memory vf, key blocks of
 * kb), stages in flight (4, or 2 where 4 do not fit: 16-bit d = 128) and
 * the shared memory: the Q tile (128 x d), the stages (K and V) and 1 KB
 * to align */
/* 8-bit codes: int8, e4m3, and int4 (unpacked to int8 by the producer) */
#define QATTN_WGMMA_8BIT(qf) ((qf) == QATTN_FMT_INT8 || (qf) == QATTN_FMT_E4M3 || (qf) == QATTN_FMT_INT4)
/* V in 16-bit rows of keys (the baselines, and fp16 P.V after 8-bit Q.K: fp16 V, or e4m3 V widened), else 8-bit V^T */
#define QATTN_WGMMA_V16(qf, vf) (!QATTN_WGMMA_8BIT(qf) || (vf) == QATTN_FMT_FP16)
/* e4m3 P.V with acc=fp32 (the CK presets) after 8-bit Q.K: P's and V's e4m3 values widened to fp16
 * (exact) for the f16 MMA into the fp32 O (the fp8 MMA keeps about 22 bits of its sum) */
#define QATTN_WGMMA_WIDEN(qf, pf, acc) (QATTN_WGMMA_8BIT(qf) && (pf) == QATTN_FMT_E4M3 && (acc) == QATTN_ACC_FP32)
/* V's format in shared memory */
#define QATTN_WGMMA_VF(qf, pf, acc) (QATTN_WGMMA_WIDEN(qf, pf, acc) ? QATTN_FMT_FP16 : (pf))
/* e4m3 Q.K with acc=fp32 (ck-fp8bf16, V widened too): Q's and K's codes widened to fp16 by the
 * producer for an f16 Q.K (25 bits a k-step of 16 channels) */
#define QATTN_WGMMA_WQK(qf, vf) ((qf) == QATTN_FMT_E4M3 && (vf) == QATTN_FMT_FP16)
/* bytes of a Q / K element in shared memory */
#define QATTN_WGMMA_ES(qf, vf) (QATTN_WGMMA_8BIT(qf) && !QATTN_WGMMA_WQK(qf, vf) ? 1 : 2)
/* fp16 P.V after 8-bit Q.K (sage1-b: V in fp16 rows, not widened by the producer, wv 0) */
#define QATTN_WGMMA_P16(qf, vf, wv) (QATTN_WGMMA_8BIT(qf) && (vf) == QATTN_FMT_FP16 && !(wv))
/* 16-bit: stages of 128 keys with two consumer warpgroups (bm 128: one key block of 128 or two of
 * 64), of one key block with three (their S registers); fp16 P.V after 8-bit Q.K at d = 64: 128
 * keys (one Q.K, the softmax and P.V a key block at a time: 1.06-1.09x at N >= 8192 on the H200;
 * at d = 128 0.93-1.02x, ptxas -O3 / -O1), else a key block */
#define QATTN_WGMMA_KS(d, qf, vf, wv, kb, bm)                                                                       \
    (QATTN_WGMMA_P16(qf, vf, wv) && (d) == 64 ? 128 : QATTN_WGMMA_8BIT(qf) || (bm) > 128 ? (kb) : 128)
#define QATTN_WGMMA_STAGEB(d, qf, vf, wv, kb, bm)                                                                    \
    (QATTN_WGMMA_KS(d, qf, vf, wv, kb, bm) * (d) * (QATTN_WGMMA_ES(qf, vf) + (QATTN_WGMMA_V16(qf, vf) ? 2 : 1)))
/* 4 stages; 3 where 4 do not fit (16-bit d = 128: 3 x 64 KB beside the 32 KB Q tile), 2 for e4m3 Q / K
 * widened at d = 128 with their staging */
#define QATTN_WGMMA_NSTAGES(d, qf, vf, wv, kb, bm)                                                                  \
    (QATTN_WGMMA_WQK(qf, vf) && (d) > 64 ? 2 : QATTN_WGMMA_STAGEB(d, qf, vf, wv, kb, bm) > 32768 ? 3 : 4)
/* the unpacking producer (wgmma_unpack.h; int4 Q/K, e4m3 V widened to fp16: wv, e4m3 Q/K widened
 * too: wk): its staging ring (slots of packed / e4m3 K, and of e4m3 V rows), dS ([stages][bm / 16][keys]
 * floats, smooth=q's rows of the plane: Q blocks of a multiple of 16 rows) and Q's packed / e4m3 rows */
#define QATTN_WGMMA_DSROWS(bm) ((bm) / 16)
#define QATTN_WGMMA_USLOT(d, ks, i4, wk, wv) (((i4) ? (ks) * (d) / 2 : (wk) ? (ks) * (d) : 0) + ((wv) ? (ks) * (d) : 0))
/* slots of the staging ring (3 with both int4 K and e4m3 V rows: 4 exceed shared memory at d = 128) */
#define QATTN_WGMMA_UNSLOT(i4, wv) ((i4) && (wv) ? 3 : 4)
#define QATTN_WGMMA_USTG(d, qf, vf, kb, wv, bm)                                                                     \
    ((qf) == QATTN_FMT_INT4 || (wv) ? QATTN_WGMMA_UNSLOT((qf) == QATTN_FMT_INT4, wv) *                                \
                                          QATTN_WGMMA_USLOT(d, QATTN_WGMMA_KS(d, qf, vf, wv, kb, bm), (qf) == QATTN_FMT_INT4, \
                                                            QATTN_WGMMA_WQK(qf, vf), wv)                             \
                                    : 0) +                                                                          \
        ((qf) == QATTN_FMT_INT4 ? QATTN_WGMMA_NSTAGES(d, qf, vf, wv, kb, bm) * QATTN_WGMMA_DSROWS(bm) *               \
                                          QATTN_WGMMA_KS(d, qf, vf, wv, kb, bm) * 4 +                                    \
                                      (bm) * (d) / 2                                                                \
                                : QATTN_WGMMA_WQK(qf, vf) ? (bm) * (d) : 0)
#define QATTN_WGMMA_SMEM(d, qf, vf, kb, wv, bm)                                                                     \
    ((bm) * (d) * QATTN_WGMMA_ES(qf, vf) +                                                                          \
     QATTN_WGMMA_NSTAGES(d, qf, vf, wv, kb, bm) * QATTN_WGMMA_STAGEB(d, qf, vf, wv, kb, bm) +                       \
     QATTN_WGMMA_USTG(d, qf, vf, kb, wv, bm) + 1024)

/* rows of the dS plane a tile of bm rows (its first row a multiple of bm) reads with Q blocks of qblock
 * rows (a multiple of 16): the TMA box of the widened int4 form */
static __host__ __device__ constexpr int qattn_wg_dsrows(int bm, int qblock)
{
    return bm % qblock == 0 ? bm / qblock : (bm - 1) / qblock + 2 < bm / 16 ? (bm - 1) / qblock + 2 : bm / 16;
}
/* the widened int4 form (wgmma_i4w.h): the 8-bit tile with e4m3 V^T and smooth=q's dS rows a stage */
#define QATTN_WGMMA_SMEM_I4W(d, kb, bm)                                                                             \
    (QATTN_WGMMA_SMEM(d, QATTN_FMT_INT8, QATTN_FMT_E4M3, kb, 0, bm) +                                                \
     QATTN_WGMMA_NSTAGES(d, QATTN_FMT_INT8, QATTN_FMT_E4M3, 0, kb, bm) * QATTN_WGMMA_DSROWS(bm) * (kb) * 4)

template <bool C, typename A, typename B>
struct qattn_cond {
    typedef A type;
};
template <typename A, typename B>
struct qattn_cond<false, A, B> {
    typedef B type;
};

static __device__ __forceinline__ uint32_t qattn_wgmma_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* the kernel's mbarriers (attn_fwd_wgmma.h's s_bar, QATTN_WGMMA_NBAR(S) of them) from the first's shared
 * address bar0, with S stages: full[S] (a stage's copies landed), empty[S] (its consumers released it),
 * Q landed, Q released */
#define QATTN_WGMMA_NBAR(S) (2 * (S) + 2)
template <int S>
static __device__ __forceinline__ uint32_t qattn_wgmma_bar_full(uint32_t bar0, int s) { return bar0 + 8u * (uint32_t)s; }
template <int S>
static __device__ __forceinline__ uint32_t qattn_wgmma_bar_empty(uint32_t bar0, int s)
{
    return bar0 + 8u * (uint32_t)(S + s);
}
template <int S>
static __device__ __forceinline__ uint32_t qattn_wgmma_bar_q(uint32_t bar0) { return bar0 + 8u * (uint32_t)(2 * S); }
template <int S>
static __device__ __forceinline__ uint32_t qattn_wgmma_bar_qempty(uint32_t bar0)
{
    return bar0 + 8u * (uint32_t)(2 * S + 1);
}

/* byte offset of 16-byte chunk ch of row r in a 128-byte-swizzled tile */
static __device__ __forceinline__ int qattn_sw128(int r, int ch) { return r * 128 + ((ch ^ (r & 7)) << 4); }
/* ... in a tile of R rows of RB bytes as the descriptors read it: rows of
 * 128 bytes or more in column slabs of 128 bytes (slab x at x * R * 128),
 * 128-byte swizzle; rows of 64 bytes with the 64-byte swizzle */
template <int RB, int R>
static __device__ __forceinline__ int qattn_wg_off(int r, int ch)
{
    return RB == 64 ? r * 64 + ((ch ^ ((r >> 1) & 3)) << 4) : (ch >> 3) * R * 128 + qattn_sw128(r, ch & 7);
}
/* byte offset of byte kb of row 0 in such a tile of R rows of 128 bytes or more (its column slab,
 * then the byte within the slab's row) */
template <int R>
static __host__ __device__ constexpr uint32_t qattn_wg_slab_off(int kb)
{
    return (uint32_t)((kb >> 7) * R * 128 + (kb & 127));
}
/* descriptor of the K-major k-step at byte kb of the rows r0.. of such a
 * tile (at shared address tile) */
template <int RB, int R>
static __device__ __forceinline__ uint64_t qattn_wg_desc_k(uint32_t tile, int r0, int kb)
{
    return RB == 64 ? qattn_wgmma_desc_sw64(tile + (uint32_t)(r0 * 64 + kb))
                    : qattn_wgmma_desc_sw128(tile + qattn_wg_slab_off<R>(kb) + (uint32_t)(r0 * 128));
}

#endif
