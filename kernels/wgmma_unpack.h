/* The unpacking producer warpgroup of the wgmma instances (attn_fwd_wgmma.h):
 * packed int4 Q/K codes unpacked to int8 in shared memory (Hopper has no
 * int4 MMA) with smooth=q's dS rows, and e4m3 V codes (and with an e4m3
 * Q.K, Q's and K's) widened to fp16 for the f16 MMA with an fp32
 * accumulator (the fp8 MMA keeps 22 bits). NVIDIA only (sm_90a). */
#ifndef QATTN_KERNELS_WGMMA_UNPACK_H
#define QATTN_KERNELS_WGMMA_UNPACK_H

#include <cuda_fp16.h>

#include "mma_nvidia.h"    /* cp.async, ldmatrix, mma.sync */
#include "wgmma_nvidia.h"  /* mbarriers, named barriers */
#include "qattn_kernels.h" /* qattn_kernels_attn_params */
#include "wgmma_keys.h"    /* sigma, the unpacking */
#include "wgmma_tile.h"    /* the tile layout */

/* 16 bytes of packed int4 codes at src (32 channels) unpacked to int8 (16 x
 * the codes) as 16-byte chunks 2 pc and 2 pc + 1 of row r of a swizzled
 * tile of R rows */
template <int RB, int R>
static __device__ __forceinline__ void qattn_wgmma_unpack_chunk(const uint8_t *src, uint8_t *tile, int r, int pc)
{
    const uint4 w = *(const uint4 *)src;
    uint4 a, c;
    qattn_wg_unpack_i4(w.x, &a.x, &a.y);
    qattn_wg_unpack_i4(w.y, &a.z, &a.w);
    qattn_wg_unpack_i4(w.z, &c.x, &c.y);
    qattn_wg_unpack_i4(w.w, &c.z, &c.w);
    *(uint4 *)(tile + qattn_wg_off<RB, R>(r, 2 * pc)) = a;
    *(uint4 *)(tile + qattn_wg_off<RB, R>(r, 2 * pc + 1)) = c;
}

/* 16 e4m3 codes at src widened to fp16 (exact) as 16-byte chunks 2 pc
 * and 2 pc + 1 of row r of a swizzled tile of R rows */
template <int RB, int R>
static __device__ __forceinline__ void qattn_wgmma_widen_chunk(const uint8_t *src, uint8_t *tile, int r, int pc)
{
    const uint4 w = *(const uint4 *)src;
    const uint4 a = make_uint4(qattn_cvt_f16x2_e4m3x2(w.x & 0xffffu), qattn_cvt_f16x2_e4m3x2(w.x >> 16),
                               qattn_cvt_f16x2_e4m3x2(w.y & 0xffffu), qattn_cvt_f16x2_e4m3x2(w.y >> 16));
    const uint4 c = make_uint4(qattn_cvt_f16x2_e4m3x2(w.z & 0xffffu), qattn_cvt_f16x2_e4m3x2(w.z >> 16),
                               qattn_cvt_f16x2_e4m3x2(w.w & 0xffffu), qattn_cvt_f16x2_e4m3x2(w.w >> 16));
    *(uint4 *)(tile + qattn_wg_off<RB, R>(r, 2 * pc)) = a;
    *(uint4 *)(tile + qattn_wg_off<RB, R>(r, 2 * pc + 1)) = c;
}

/* The unpacking producer (I4: int4 Q/K; WK: e4m3 Q/K widened; WV: e4m3 V widened), in two roles
 * that meet only at mbarriers, so that copies run as far ahead as the
 * stages allow and the unpacking follows the data:
 *   warps 0, 1 (copiers): Q (I4, WK: packed / e4m3 rows into sQstg; else
 *     into sQ, arriving on the kernel's Q barrier); key block after key
 *     block, its packed / e4m3 K (rows of D / 2 or D bytes, keys in order)
 *     into a slot of a ring of NSLOT (else K's codes straight into the
 *     stage, row c of a 32-key chunk = key sigma(c)), with smooth=q (p.q_mean) the tile's rows of the dS
 *     plane (wgmma_dsq.h) into the stage's dS rows; V^T into the stage (WV:
 *     V's e4m3 rows, keys in order, into the slot), then an arrival on the
 *     slot's "landed" barrier once they land;
 *   warps 2, 3 (unpackers): Q (I4, WK), then each block's K written as int8
 *     (16 x the codes) or fp16 (WK) (K row c of a 32-key chunk = key
 *     sigma(c)) into the stage, V as fp16 rows (row c = key sigma(c), WV),
 *     then the stage's full barrier (64 arrivals, all regular: the
 *     consumers' one source of the stage) and the slot's release ("free").
 * Unpacked codes are generic-proxy stores that the wgmma reads through the
 * async proxy, hence the fence before each arrival. */
template <int D, int KS, int S, bool I4, bool WK, bool WV, int BM>
static __device__ __forceinline__ void qattn_wgmma_produce_unpack(const qattn_kernels_attn_params &p, uint8_t *sQ,
                                                              uint8_t *sStage, uint8_t *sStg, uint8_t *sQstg,
                                                              float *sDs, uint32_t bar0, int J0, int J1,
                                                              int b, int h, int hk, int i0, int sq, int sk,
                                                              int64_t tq0, int64_t tk0)
{
    static_assert(!WK || (WV && !I4), "e4m3 Q/K widened with V (acc=fp32)");
    constexpr int NS = QATTN_WGMMA_UNSLOT(I4, WV), DSR = QATTN_WGMMA_DSROWS(BM); /* BM: the tile's rows */
    constexpr int RB = WK ? 2 * D : D, PCH = D / 32, CH = D / 16; /* Q / K row bytes in the tile; packed / 8-bit 16-byte chunks a row */
    constexpr int QCH = I4 ? PCH : CH;                           /* 16-byte chunks of a staged Q row (I4, WK) */
    constexpr int STAGE = QATTN_WGMMA_STAGEB(D, WK ? QATTN_FMT_E4M3 : QATTN_FMT_INT8, WV ? QATTN_FMT_FP16 : QATTN_FMT_INT8, WV, KS, BM);
    constexpr int SLOT = QATTN_WGMMA_USLOT(D, KS, I4, WK, WV);
    constexpr int SV = I4 ? KS * D / 2 : WK ? KS * D : 0; /* V's rows in a slot (WV) */
    constexpr int VCH = KS / 16, VR = 64 / VCH, VSTEP = VR * (KS < 128 ? KS : 128); /* V^T by 64 threads */
    constexpr int DCH = KS / 4;                                                     /* 16-byte chunks of a dS row */
    const int wt = (int)threadIdx.x & 127, rt = wt & 63; /* thread in the warpgroup, in its role */
    const int dsq = I4 && p.q_mean != 0;
    __shared__ __align__(8) uint64_t s_upbar[2 * NS + 1]; /* landed[NS], free[NS], Q landed */
    const uint32_t ib0 = qattn_wgmma_smem_addr(s_upbar);
#define QATTN_UP_LANDED(x) (ib0 + 8u * (uint32_t)(x))
#define QATTN_UP_FREE(x) (ib0 + 8u * (uint32_t)(NS + (x)))
#define QATTN_UP_QLANDED (ib0 + 8u * (uint32_t)(2 * NS))
    if (wt == 0) {
        for (int x = 0; x < NS; x++) {
            qattn_mbar_init(QATTN_UP_LANDED(x), 64);
            qattn_mbar_init(QATTN_UP_FREE(x), 64);
        }
        qattn_mbar_init(QATTN_UP_QLANDED, 64);
    }
    qattn_bar_sync<1, 128>(); /* the producer warpgroup */

    if (wt < 64) {
        /* ================= copiers ================= */
        const uint8_t *qg = (const uint8_t *)p.q + (int64_t)b * p.q_sb + tq0 * p.q_st + (int64_t)h * p.q_sh;
        if constexpr (I4 || WK) {
#pragma unroll 4
            for (int e = rt; e < BM * QCH; e += 64) {
                const int r = e / QCH, pc = e % QCH, ok = i0 + r < sq;
                qattn_cp_async16(sQstg + e * 16, ok ? qg + (int64_t)(i0 + r) * p.q_st + pc * 16 : qg, ok ? 16 : 0);
            }
            qattn_cp_async_mbar_arrive(QATTN_UP_QLANDED);
        } else if (!p.q_fuse) { /* fused: the consumers quantize Q (wgmma_qfuse.h) */
#pragma unroll 4
            for (int e = rt; e < BM * CH; e += 64) {
                const int r = e / CH, ch = e % CH, ok = i0 + r < sq;
                qattn_cp_async16(sQ + qattn_wg_off<RB, BM>(r, ch), ok ? qg + (int64_t)(i0 + r) * p.q_st + ch * 16 : qg,
                                 ok ? 16 : 0);
            }
            qattn_cp_async_mbar_arrive(qattn_wgmma_bar_q<S>(bar0)); /* 64 arrivals */
        }
        const int kst = (int)p.k_st, vst = (int)p.v_st;
        const uint8_t *kg = (const uint8_t *)p.k + (int64_t)b * p.k_sb + tk0 * p.k_st + (int64_t)hk * p.k_sh;
        /* smooth=q: the plane's rows of the tile's Q blocks (qblock % 16 == 0: at most BM / 16) */
        const int qb0 = dsq ? i0 / p.qblock : 0;
        const int nql = dsq ? min(((i0 + BM < sq ? i0 + BM : sq) - 1) / p.qblock - qb0 + 1, DSR) : 0;
        const float *dsg = dsq ? p.ds + ((int64_t)h * p.nseq + b) * p.nqb * p.ds_ld + (int64_t)qb0 * p.ds_ld
                               : (const float *)0;
        const int v0 = rt / VCH, vch = rt % VCH;
        /* V^T row (channel) v0 from the sequence's first key; WV: V's rows from the sequence's first */
        const uint8_t *vg = (const uint8_t *)p.v + (int64_t)b * p.v_sb + (int64_t)hk * p.v_sh +
                            (WV ? tk0 * vst : (int64_t)v0 * vst + vch * 16);
        const int voff = KS * RB + qattn_wg_off<KS, D>(v0, vch);
        int it = 0;
        for (int j0 = J0; j0 < J1; j0 += KS, it++) {
            const int slot = it % NS, stage = it % S;
            if (it >= NS) /* the unpackers are done with the slot's previous block */
                qattn_mbar_wait(QATTN_UP_FREE(slot), (uint32_t)((it / NS - 1) & 1));
            if (it >= S) /* the consumers' release of the stage's previous block */
                qattn_mbar_wait(qattn_wgmma_bar_empty<S>(bar0, stage), (uint32_t)((it / S - 1) & 1));
            uint8_t *stg = sStg + slot * SLOT;
            if constexpr (I4 || WK) {
#pragma unroll
                for (int e = rt; e < KS * QCH; e += 64) {
                    const int r = e / QCH, pc = e % QCH, ok = j0 + r < sk;
                    qattn_cp_async16(stg + e * 16, ok ? kg + (int64_t)(j0 + r) * kst + pc * 16 : kg, ok ? 16 : 0);
                }
            } else {
                uint8_t *sK = sStage + stage * STAGE;
#pragma unroll
                for (int e = rt; e < KS * CH; e += 64) {
                    const int r = e / CH, ch = e % CH, key = qattn_wg_sigma64(r), ok = j0 + key < sk;
                    qattn_cp_async16(sK + qattn_wg_off<RB, KS>(r, ch), ok ? kg + (int64_t)(j0 + key) * kst + ch * 16 : kg,
                                     ok ? 16 : 0);
                }
            }
            if (dsq) /* the plane's rows hold ds_ld >= every key block's end */
                for (int e = rt; e < nql * DCH; e += 64) {
                    const int l = e / DCH, c = e % DCH;
                    qattn_cp_async16(sDs + (stage * DSR + l) * KS + 4 * c, dsg + (int64_t)l * p.ds_ld + j0 + 4 * c, 16);
                }
            if constexpr (WV) { /* V's rows past the sequence's end are zero (P is 0 there, V may not be finite) */
#pragma unroll
                for (int e = rt; e < KS * CH; e += 64) {
                    const int r = e / CH, ch = e % CH, ok = j0 + r < sk;
                    qattn_cp_async16(stg + SV + e * 16, ok ? vg + (int64_t)(j0 + r) * vst + ch * 16 : vg, ok ? 16 : 0);
                }
            } else {
                uint8_t *sV = sStage + stage * STAGE + voff;
                const uint8_t *vp = vg + j0; /* V^T rows are padded to a multiple of 128 keys */
#pragma unroll 1
                for (int x = 0; x < D / VR; x++, vp += VR * vst)
                    qattn_cp_async16(sV + VSTEP * x, vp, 16);
            }
            qattn_cp_async_mbar_arrive(QATTN_UP_LANDED(slot)); /* K, dS rows and V landed */
        }
        qattn_cp_async_wait<0>();
        return;
    }

    /* ================= unpackers ================= */
    if constexpr (I4 || WK) { /* Q */
        qattn_mbar_wait(QATTN_UP_QLANDED, 0);
#pragma unroll 4
        for (int e = rt; e < BM * QCH; e += 64) {
            if constexpr (I4)
                qattn_wgmma_unpack_chunk<RB, BM>(sQstg + e * 16, sQ, e / QCH, e % QCH);
            else
                qattn_wgmma_widen_chunk<RB, BM>(sQstg + e * 16, sQ, e / QCH, e % QCH);
        }
        qattn_fence_proxy_async_smem();
        qattn_mbar_arrive(qattn_wgmma_bar_q<S>(bar0)); /* 64 arrivals */
    }
    int it = 0;
    for (int j0 = J0; j0 < J1; j0 += KS, it++) {
        const int slot = it % NS, stage = it % S;
        qattn_mbar_wait(QATTN_UP_LANDED(slot), (uint32_t)((it / NS) & 1));
        if (it >= S) /* the stage's previous block released: implied by "landed" (the copiers waited for it), but
                      * through an asynchronous arrival; said directly so that the race checker sees it */
            qattn_mbar_wait(qattn_wgmma_bar_empty<S>(bar0, stage), (uint32_t)((it / S - 1) & 1));
        const uint8_t *stg = sStg + slot * SLOT;
        uint8_t *sK = sStage + stage * STAGE;
        if constexpr (I4) {
#pragma unroll
            for (int e = rt; e < KS * PCH; e += 64) {
                const int r = e / PCH, pc = e % PCH; /* tile row r holds key sigma64(r) */
                qattn_wgmma_unpack_chunk<RB, KS>(stg + (qattn_wg_sigma64(r) * PCH + pc) * 16, sK, r, pc);
            }
        } else if constexpr (WK) {
#pragma unroll 2
            for (int e = rt; e < KS * CH; e += 64) {
                const int r = e / CH, pc = e % CH; /* tile row r holds key sigma64(r) */
                qattn_wgmma_widen_chunk<RB, KS>(stg + (qattn_wg_sigma64(r) * CH + pc) * 16, sK, r, pc);
            }
        }
        if constexpr (WV) { /* V's fp16 rows after K's codes: tile row r holds key sigma64(r), like K (2 chunks
                             * at a time) */
#pragma unroll 2
            for (int e = rt; e < KS * CH; e += 64) {
                const int r = e / CH, pc = e % CH;
                qattn_wgmma_widen_chunk<2 * D, KS>(stg + SV + (qattn_wg_sigma64(r) * CH + pc) * 16, sK + KS * RB, r, pc);
            }
        }
        qattn_fence_proxy_async_smem();
        qattn_mbar_arrive(qattn_wgmma_bar_full<S>(bar0, stage)); /* 64 arrivals */
        qattn_mbar_arrive(QATTN_UP_FREE(slot));
    }
#undef QATTN_UP_LANDED
#undef QATTN_UP_FREE
#undef QATTN_UP_QLANDED
}

#endif
