/* Attention forward, Hopper (sm_90a) warpgroup-MMA implementation of the
 * sage2-8b-sm90 scheme for head dims 64 and 128 (int8 Q.K with per-thread
 * scale groups, e4m3 P and V, fp22 + fp32:128 accumulation): its own instance
 * (path wgmma), with the same params, scheme and checks as the mma.sync
 * instance of attn_fwd_mma.h, except that K may have any scale groups that
 * are one scale on a lane's keys of each n-tile parity (qattn_wg_kgroup_ok).
 * The dispatcher takes it on sm_90 (QATTN_MMA_SYNC=1 in the environment:
 * the mma.sync instance, for comparison).
 *
 * Tiling: a block of 1 + NC warpgroups (NC = 2 or 3 consumers, qattn_wg_nc)
 * owns BM = 64 NC query rows of one (sequence, head). Warp-specialized,
 * with one copy of each key block in shared memory:
 *   warpgroup 0 (producer, 24 registers after setmaxnreg): loads the Q tile
 *     (int8, BM x 128, kept for the whole loop), then key block after key
 *     block (KB = 128) into QATTN_WGMMA_NSTAGES stages, cp.async; each
 *     thread's copies arrive on the stage's "full" mbarrier when they land
 *     (cp.async.mbarrier.arrive.noinc, 128 arrivals), and a stage is refilled
 *     once its "empty" mbarrier saw all 4 NC consumer warps done with it
 *     (int4: qattn_wgmma_produce_i4, and the warps' lanes).
 *   warpgroups 1..NC (consumers, 240 registers with two, 160 with three):
 *     warpgroup w rows 64(w-1)..64(w-1)+63, warp v of it rows 16v..16v+15,
 *     lane 4g+i rows g and g+8 (the wgmma accumulator layout); they wait on
 *     the full barriers only, so they drift apart and one's softmax overlaps
 *     the others' MMAs; with two, P.V of block j and Q.K of block j + 1 are
 *     issued back to back, so the tensor core computes Q.K(j + 1) during the
 *     O update; with three, Q.K(j + 1) waits for the P.V (SER, registers).
 * Q and K rows of d bytes (128- or 64-byte swizzle), V^T rows of 128 keys
 * (128-byte swizzle), for the wgmma descriptors; d = 64: two k-steps of
 * Q.K, P.V by m64n64k32.
 *
 *   Q.K  wgmma m64n128k32 s8 (A = Q, B = K from shared memory), 4 k-steps;
 *        S = float(acc) * (sq sk c2), fused into the exponent
 *        (qattn_wgmma_softmax).
 *   key order  the S accumulator layout (columns 8t+2i, 8t+2i+1) is not the
 *        register A layout of the P.V wgmma (bytes 4i..4i+3, 16+4i..); so
 *        K row c of each 32-key chunk holds key sigma(c) (c = 16h + 8u + 2i
 *        + e -> 16h + 4i + 2u + e), and the P registers are the A fragment
 *        of keys in natural order, which V^T has. Masks and K scales use
 *        sigma: for thread:128/8/2 the thread's keys of odd / even tiles
 *        have groups 2(i mod 2) + 1 / 2(i mod 2).
 *   P.V  wgmma m64n128k32 e4m3 (A = P from registers, B = V^T from shared
 *        memory), f32 accumulator from 0 each key block (the tensor core's
 *        fp22), added into the fp32 O (the +fp32:128 level).
 * QF = e4m3 (fa3-fp8): the same tile with Q.K by the e4m3 wgmma (fp32 S,
 * the tensor core's fp22 sum) and one accumulation level: O rescaled, then
 * P.V accumulated into it by the tensor core (acc=fp22).
 * Softmax and masks as in attn_fwd_mma.h; the key-block range and the
 * epilogue are its functions (qattn_mma_key_blocks, qattn_mma_epilogue).
 *
 * QF = e4m3 with acc=fp32 (ck-fp8bf16): Q's and K's codes widened to fp16
 * by the unpacking producer, Q.K by m64nKBk16 from shared memory (the f16
 * MMA's 25-bit k-steps, where the e4m3 one keeps 22 bits), S and P.V as for
 * the other CK presets (W16).
 *
 * QF = fp16 / bf16: the baseline schemes on the same skeleton: Q, K, V
 * rows of 2d bytes from the user's tensors, stages of 128 keys, Q.K by
 * m64n128k16 with Q's fragments in registers, the softmax and P.V
 * (m64nDk16, V N-major) one key block at a time into the fp32 O (the
 * presets' 128-key blocks: one a stage). */
#ifndef QATTN_KERNELS_ATTN_FWD_WGMMA_H
#define QATTN_KERNELS_ATTN_FWD_WGMMA_H

#include <limits.h>
#include <string.h>

#include "attn_fwd_mma.h" /* the checks, key-block range, masks and epilogue of the mma path */
#include "quant_groups.h" /* qattn_qf_tok_index */
#include "wgmma_qfuse.h"  /* Q quantized by the consumers (params q_fuse) */
#include "wgmma_steps.h"  /* the consumers' steps of a key block: MMA issues, softmax, O updates */
#include "wgmma_dsq.h"    /* smooth=q's dS plane (int4) */
#include "wgmma_unpack.h" /* the producer that unpacks int4 K / widens e4m3 V */
#include "wgmma_produce.h" /* the producer that copies Q and the key blocks by cp.async */
#include "wgmma_tile.h"   /* block shape, shared memory, swizzled tiles, descriptors */
#include "attn_fwd_wgsolo.h" /* blocks of one warpgroup, no producer (8-bit Q.K, e4m3 P.V) */

/* The consumers' order of a key block's steps, chosen per instance by
 * measurement (H100, 2026-11-27, kernels/LOG.md): EARLY waits for the next
 * stage before the softmax, so that its Q.K issues right behind this
 * block's P.V (fa3-fp8 +8%, sage1-vb +13%, d = 64 +6-11%; sage2-8b at
 * d = 64 -8% and the unpacking producer's instances -2%, so they wait after
 * the P.V); DEFER (two-level O) adds block j's P.V into O at the start of
 * block j + 1's softmax instead of under the tensor core's next Q.K (sage2-8b
 * d = 128 +7%, sage2-8b-sm90 d = 64 +5%; the d = 128, 128-key instances
 * lose 2-3%). */
static __host__ __device__ constexpr int qattn_wg_early_wait(int d, int kb, int qf, int pf, int unpack)
{
    return !unpack && !(d == 64 && kb == 64 && qf == QATTN_FMT_INT8 && pf == QATTN_FMT_E4M3);
}
static __host__ __device__ constexpr int qattn_wg_defer_o(int d, int kb, int qf, int pf)
{
    return qf == QATTN_FMT_INT8 && pf == QATTN_FMT_E4M3 && (d == 64) != (kb == 64);
}
/* SER with three consumer warpgroups (below, in the kernel), except for e4m3 Q.K at d = 64, whose
 * registers allow the two-warpgroup order (+8-10%; sage2-8b-sm90 there -2%, sage1-vb -6%: H100,
 * 2026-11-28) */
static __host__ __device__ constexpr bool qattn_wg_ser(int d, int qf) { return !(d == 64 && qf == QATTN_FMT_E4M3); }

/* tma: the producer loads each key block by one thread's TMA (maps: qattn_wg_maps_fill, wgmma_tma.h), else by
 * its warpgroup's cp.async; I4W: int4 Q.K on codes widened by a pass (wgmma_i4w.h), read as int8 codes by TMA,
 * 1 without smooth=q, 2 with its dS rows (a kernel each, so that the main loop holds one softmax) */
template <int D, int KB, int QF, int PF, int ACC, int NC, bool PERSIST, int I4W = 0>
__global__ void __launch_bounds__(QATTN_WGMMA_THREADSN(NC), 1)
    qattn_attn_fwd_wgmma_kernel(qattn_kernels_attn_params p, const __grid_constant__ qattn_wg_maps maps, int tma,
                                int pingpong)
{
    static_assert(D == 128 || D == 64, "the wgmma kernel is written for head dims 64 and 128 (swizzled rows)");
    static_assert(KB == 128 || KB == 64, "key blocks of 64 or 128 keys (swizzled rows)");
    static_assert(QATTN_WGMMA_8BIT(QF) || QF == QATTN_FMT_FP16 || QF == QATTN_FMT_BF16, "int8, e4m3, fp16 or bf16 Q/K");
    static_assert(QATTN_WGMMA_8BIT(QF) ? (PF == QATTN_FMT_E4M3 && (ACC == QATTN_ACC_FP22 || ACC == QATTN_ACC_FP32)) ||
                                             (PF == QATTN_FMT_INT8 && QF == QATTN_FMT_INT8 && ACC == QATTN_ACC_FP32) ||
                                             (PF == QATTN_FMT_FP16 && QF == QATTN_FMT_INT8 && ACC == QATTN_ACC_FP16)
                                       : PF == QF && ACC == QATTN_ACC_FP32,
                  "P.V: e4m3 (acc fp22, or fp32 widened), int8 (fp32) or fp16 (fp16) after 8-bit Q.K, or the "
                  "baseline's 16-bit type (fp32)");
    /* dynamic shared memory, the fused Q's scales (int8 Q.K) and the barriers within sm_90's 227 KB */
    static_assert(NC == 2 || NC == 3, "2 or 3 consumer warpgroups");
    static_assert(!PERSIST || qattn_wg_persist_can(D, QF, PF, ACC), "the persistent form is compiled for the baselines");
    static_assert(!I4W || (qattn_wg_i4w_can(QF, PF, ACC) && !PERSIST), "the widened form is int4 Q.K with e4m3 P.V");
    static_assert(QATTN_WGMMA_SMEM(D, QF, QATTN_WGMMA_VF(QF, PF, ACC), KB, QATTN_WGMMA_WIDEN(QF, PF, ACC), QATTN_WGMMA_BMN(NC)) +
                          (QF == QATTN_FMT_INT8 ? 4 * QATTN_WGMMA_BMN(NC) * 4 : 0) + 256 <=
                      232448,
                  "shared memory over sm_90's 227 KB");

#if QATTN_WGMMA
    /* Q8: 8-bit Q/K codes (int8 or e4m3); O accumulated in two levels (int8: acc=fp22+fp32:KB, each
     * block's P.V from 0 then added into the fp32 O) or in one (e4m3: acc=fp22, P.V into O) */
    constexpr int Q8 = QATTN_WGMMA_8BIT(QF), I4 = QF == QATTN_FMT_INT4, BF = QF == QATTN_FMT_BF16;
    /* W16: e4m3 P.V with acc=fp32 (ck-*): P's e4m3 codes as fp16 A fragments like P16, V's e4m3 rows
     * widened to fp16 by the producer, the f16 MMA into the fp32 O */
    constexpr int W16 = QATTN_WGMMA_WIDEN(QF, PF, ACC);
    constexpr int VF = QATTN_WGMMA_VF(QF, PF, ACC), V16 = QATTN_WGMMA_V16(QF, VF);
    /* WQK: e4m3 Q.K with acc=fp32 (ck-fp8bf16): Q's and K's codes widened to fp16 by the producer, the
     * f16 Q.K (m64nKBk16 from shared memory) into S */
    constexpr int WQK = QATTN_WGMMA_WQK(QF, VF);
    /* the codes the tensor core reads (int4: unpacked to int8; WQK: fp16) */
    constexpr int QC = I4 ? QATTN_FMT_INT8 : WQK ? QATTN_FMT_FP16 : QF;
    /* P16: fp16 P.V after 8-bit Q.K (sage1-b): V in fp16 rows of keys in the sigma key order like K,
     * P's fp16 A fragments straight from the S layout, O in an f16 accumulator (acc=fp16) */
    constexpr int P16 = Q8 && PF == QATTN_FMT_FP16;
    constexpr int F16A = P16 || W16;
    constexpr int TWO = QC == QATTN_FMT_INT8 && !F16A;
    constexpr int U = (I4 && !I4W) || W16; /* the unpacking producer (wgmma_unpack.h) */
    /* the format whose measured choices the consumers follow (the widened int4 form: int8's) */
    constexpr int QR = I4W ? QATTN_FMT_INT8 : QF;
    /* registers a producer / consumer thread (setmaxnreg; 128 x PREG + 128 NC x CREG <= the block's
     * 64512): the unpacking producer keeps more where it can (int4 K with widened V, two consumer
     * warpgroups: 72, 128 x 72 + 256 x 216 = 64512) */
    constexpr int PREG = NC == 3 ? (W16 ? 48 : 24) : I4 && W16 ? 72 : U ? 64 : 24;
    constexpr int CREG = NC == 3 ? (W16 ? 152 : 160) : U ? 216 : 240;
    constexpr int ES = QATTN_WGMMA_ES(QF, VF); /* bytes a Q / K element in shared memory */
    /* keys a stage holds: the key block (8-bit), 128 (16-bit with two consumer warpgroups: Q.K by
     * m64n128k16, the softmax and P.V a key block of 64 or 128 at a time; fp16 P.V at d = 64: two
     * 64-key blocks under one m64n128k32 Q.K) */
    constexpr int BM = QATTN_WGMMA_BMN(NC), KS = QATTN_WGMMA_KS(D, QF, VF, W16, KB, BM),
                  S = QATTN_WGMMA_NSTAGES(D, QF, VF, W16, KB, BM);
    constexpr int NT = KB / 8;      /* n-tiles of S (int8) */
    constexpr int NO = D / 8;       /* n-tiles of O */
    constexpr int RB = D * ES;      /* bytes of a Q / K row */
    /* a stage: the K tile (KS rows of RB bytes), then V (8-bit codes as V^T: D rows of KS bytes; 16-bit
     * V as rows of keys: KS rows of 2 D bytes) */
    constexpr int KBYTES = KS * RB, STAGE = QATTN_WGMMA_STAGEB(D, QF, VF, W16, KB, BM);
    QATTN_DYNAMIC_SHARED(uint8_t, smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (qattn_wgmma_smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t *sQ = smem;               /* [128 rows][RB] swizzled */
    uint8_t *sStage = smem + BM * RB; /* stage s at s * STAGE */
    /* the unpacking producer's staging ring; int4: dS [S][BM / 16 Q blocks][KS keys] (smooth=q), Q packed */
    uint8_t *sStg = sStage + S * STAGE;
    float *sDs = (float *)(sStg + (U ? QATTN_WGMMA_UNSLOT(I4, W16) * QATTN_WGMMA_USLOT(D, KS, I4, WQK, W16) : 0));
    uint8_t *sQstg = (uint8_t *)(sDs + (I4 ? S * QATTN_WGMMA_DSROWS(BM) * KS : 0)); /* Q's packed / e4m3 rows */
    __shared__ __align__(8) uint64_t s_bar[QATTN_WGMMA_NBAR(S)]; /* qattn_wgmma_bar_*: full[S], empty[S], Q, Q released */
    __shared__ int s_tile[PERSIST ? 2 : 1];            /* PERSIST: the CTA's tile qn at [qn % 2] */
    /* fused Q (int8 Q.K from the user's Q, QFUSE): the tile's group scales and their reciprocals' brackets */
    constexpr int QFUSE = QC == QATTN_FMT_INT8 && !I4 && NC == 2; /* wgmma_qfuse.h: two consumer warpgroups */
    __shared__ float s_qsc[QFUSE ? 3 * BM : 1];
    __shared__ int s_qrowg[QFUSE ? BM : 1]; /* each row's group, from the tile's first */
    const uint32_t bar0 = qattn_wgmma_smem_addr(s_bar);
#define QATTN_WS_FULL(s) qattn_wgmma_bar_full<S>(bar0, s)
#define QATTN_WS_EMPTY(s) qattn_wgmma_bar_empty<S>(bar0, s)
#define QATTN_WS_QBAR qattn_wgmma_bar_q<S>(bar0)
#define QATTN_WS_QEMPTY qattn_wgmma_bar_qempty<S>(bar0)

    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp >> 2, wv = warp & 3, g = lane >> 2, qi = lane & 3, wt = tid & 127;
    if (tid == 0) {
        for (int s = 0; s < S; s++) {
            qattn_mbar_init(QATTN_WS_FULL(s), tma ? 1 : U ? 64 : 128); /* TMA: one arrival and the bytes */
            /* consumer warps (unpacked, or dS read: their lanes) */
            qattn_mbar_init(QATTN_WS_EMPTY(s), U || (I4 && p.q_mean) ? 128 * NC : 4 * NC);
        }
        /* int4: the unpackers arrive, else the copiers (PERSIST: warp 0's lanes) */
        qattn_mbar_init(QATTN_WS_QBAR, U ? 64 : PERSIST ? 33 : 128); /* PERSIST: and lane 0's tile index */
        qattn_mbar_init(QATTN_WS_QEMPTY, 128 * NC);  /* consumer threads (racecheck follows each one's own reads) */
    }
    __syncthreads();
    /* tiles (Q tile x, head, sequence), x fastest, longest causal rows first: a CTA a tile, or
     * PERSIST (no mask, equal lengths, TMA loads; a CTA a multiprocessor taking tiles in order from
     * the counter p.work, stage and Q uses counted on over tiles, so that the next tile's Q and first
     * key blocks load under this tile's last blocks and epilogue; the launcher's choice,
     * qattn_wg_persist). With no mask every row sees keys [0, sk): a key-block range the compiler
     * knows to be the same in every thread, so that the stage offsets carried from tile to tile stay
     * in uniform registers (a range found by the warps' shuffles put the loop's descriptor arithmetic
     * into vector registers: about -12%) */
    const int nqt = PERSIST ? (p.seqlen_q + BM - 1) / BM : (int)gridDim.x;
    const int ntiles = PERSIST ? nqt * p.hq * p.nseq : (int)blockIdx.x + 1;
    /* tile t's sequence, head, kv head, first row, and the sequence's first tokens and lengths (a CTA a
     * tile: the grid's z, y, x; PERSIST: equal lengths) */
    struct tile_pos {
        int b, h, hk, i0, sq, sk;
        int64_t tq0, tk0;
    };
    auto tile_at = [&](int t) {
        tile_pos w;
        w.b = PERSIST ? t / (nqt * p.hq) : (int)blockIdx.z;
        w.h = PERSIST ? t / nqt % p.hq : (int)blockIdx.y;
        w.hk = w.h / (p.hq / p.hkv);
        w.i0 = (nqt - 1 - (PERSIST ? t % nqt : (int)blockIdx.x)) * BM;
        qattn_kseq(PERSIST ? nullptr : p.cu_q, w.b, p.seqlen_q, &w.tq0, &w.sq);
        qattn_kseq(PERSIST ? nullptr : p.cu_k, w.b, p.seqlen_k, &w.tk0, &w.sk);
        return w;
    };
    const int cw = wg - 1;
    /* a CTA a tile (!PERSIST): its key blocks found by the whole block (the code of before the loop) */
    int Jt0 = 0, Jt1 = 0;
    if constexpr (!PERSIST) {
        const tile_pos w = tile_at(0);
        const int i0 = w.i0, sq = w.sq, sk = w.sk;
        if (i0 >= sq)
            return;
        const int rA = i0 + 64 * cw + 16 * wv + g, rB = rA + 8;
        int loA = 0, hiA = 0, loB = 0, hiB = 0;
        if (wg > 0)
            qattn_mma_row_ranges(p.mask, rA, rB, sq, sk, &loA, &hiA, &loB, &hiB);
        __shared__ int s_range[2];
        qattn_mma_key_blocks(loA, hiA, loB, hiB, KS, s_range, &Jt0, &Jt1);
    }
    if (wg == 0) {
        /* ================= producer ================= */
        qattn_setmaxnreg_dec<PREG>();
        /* PERSIST (TMA loads): warp 0 alone, its lanes copying Q and lane 0 issuing the stages, the
         * warp converged at each tile's end; tiles from the counter p.work (lane 0 takes the next
         * while this one's stages load), each published to the consumers in s_tile beside its Q */
        if (PERSIST && wv > 0)
            return;
        constexpr int pthreads = PERSIST ? 32 : 128;
        int it = 0;       /* key blocks loaded over the CTA's tiles: block it uses stage it % S */
        uint32_t qn = 0u; /* Q tiles loaded before this one */
        int nxt = ntiles;
#pragma unroll 1
        for (int t = (int)blockIdx.x; t < ntiles; t = PERSIST ? __shfl_sync(0xffffffffu, nxt, 0) : ntiles) {
            const tile_pos w = tile_at(t);
            const int b = w.b, h = w.h, hk = w.hk, i0 = w.i0, sq = w.sq, sk = w.sk;
            const int64_t tq0 = w.tq0, tk0 = w.tk0;
            if (i0 >= sq)
                continue;
            const int J0 = PERSIST ? 0 : Jt0, J1 = PERSIST ? (sk + KS - 1) / KS * KS : Jt1;
            if (J0 >= J1)
                continue;
            if constexpr (U) { /* one tile a CTA (the launcher's grid) */
                qattn_wgmma_produce_unpack<D, KS, S, I4, WQK, W16, BM>(p, sQ, sStage, sStg, sQstg, sDs, bar0, J0, J1, b, h,
                                                                       hk, i0, sq, sk, tq0, tk0);
                continue;
            } else {
                if (!(QFUSE && p.q_fuse)) { /* stored codes (or the baseline's Q) into sQ */
                    if (qn > 0u) /* the consumers are done with the tile before's */
                        qattn_mbar_wait(QATTN_WS_QEMPTY, (qn - 1u) & 1u);
                    if (PERSIST && wt == 0) {
                        s_tile[qn & 1u] = t;
                        qattn_mbar_arrive(QATTN_WS_QBAR); /* publishes s_tile */
                        nxt = (int)gridDim.x + (int)atomicAdd(p.work, 1u);
                    }
                    qattn_wgmma_copy_q<D, ES, BM, pthreads>(p, sQ, QATTN_WS_QBAR, b, h, i0, sq, tq0, wt);
                }
                qn++;
                /* key block i of the CTA (keys j0..): its stage's release awaited (completion i / S - 1),
                 * then, where issue, the stage's boxes by TMA (generic: compiled only where called) */
                /* I4W with smooth=q: the tile's rows of the dS plane (row dsr0 on: its Q blocks) a stage too */
                constexpr int DSR = QATTN_WGMMA_DSROWS(BM), dsq = I4W == 2;
                const int dsb = dsq ? qattn_wg_dsrows(BM, p.qblock) * KS * 4 : 0; /* the map's box (qattn_wg_map_ds) */
                const int dsr0 = dsq ? (h * p.nseq + b) * p.nqb + i0 / p.qblock : 0;
                auto tma_block = [&](auto i, int j0, bool issue) {
                    const int stage = i % S;
                    if (i >= S)
                        qattn_mbar_wait(QATTN_WS_EMPTY(stage), (uint32_t)((i / S - 1) & 1));
                    if (issue) {
                        qattn_mbar_arrive_expect_tx(QATTN_WS_FULL(stage), STAGE + (dsq ? dsb : 0));
                        qattn_wg_tma_stage<D, KS, qattn_wg_tma_mode(QF)>(
                            qattn_wgmma_smem_addr(sStage + stage * STAGE), maps, QATTN_WS_FULL(stage), j0, b, hk);
                        if (dsq)
                            qattn_tma_load2(qattn_wgmma_smem_addr(sDs + stage * DSR * KS), &maps.ds, QATTN_WS_FULL(stage),
                                            j0, dsr0);
                    }
                };
                if constexpr (qattn_wg_tma_can(QR, PF, ACC) && !PERSIST) {
                    if (tma || I4W) { /* one thread: each stage's boxes once its consumers released it (I4W: the
                                       * launch made the maps) */
                        if (wt == 0)
                            for (int j0 = J0, i = it; j0 < J1; j0 += KS, i++)
                                tma_block(i, j0, true);
                        it += (J1 - J0) / KS;
                        continue;
                    }
                }
                if constexpr (I4W)
                    continue;
                if constexpr (PERSIST) { /* the warp awaits each stage's release, lane 0 issues its boxes */
                    for (int j0 = J0; j0 < J1; j0 += KS, it++) {
                        tma_block(it, j0, wt == 0);
                        __syncwarp();
                    }
                    continue;
                }
                qattn_wgmma_copy_blocks<D, KS, S, STAGE, ES, Q8, V16, P16>(p, sStage, bar0, it, J0, J1, b, hk, sk, tk0, wt);
            }
        }
        if constexpr (PERSIST) { /* none left: the consumers learn it from s_tile; the last CTA out clears the counter */
            if (qn > 0u)
                qattn_mbar_wait(QATTN_WS_QEMPTY, (qn - 1u) & 1u);
            if (wt == 0)
                s_tile[qn & 1u] = ntiles;
            qattn_mbar_arrive(QATTN_WS_QBAR);
            if (wt == 0) {
                qattn_mbar_arrive(QATTN_WS_QBAR);
                __threadfence();
                if (atomicAdd(p.work + 1, 1u) == gridDim.x - 1u)
                    p.work[0] = 0u, p.work[1] = 0u;
            }
        }
        qattn_cp_async_commit();
        qattn_cp_async_wait<0>();
        return;
    }

    /* ================= consumers ================= */
    qattn_setmaxnreg_inc<CREG>();
    /* ping-pong (pingpong, the launcher's rule; the 16-bit path with one key block a stage): the
     * consumer warpgroups issue a block's P.V and the next Q.K in turn (named barrier TURN + cw: this
     * warpgroup's turn), so that one's softmax runs under the others' MMAs. Every warpgroup runs the
     * tile's key blocks J0..J1; the last opens the first turn of a tile and passes none after its last
     * block, so that each barrier sees as many arrivals as waits */
    constexpr int TURN = 4; /* 1, 2: the unpacking producer's; 3: the fused Q's */
    auto turn_open = [&](int pp) {
        if (pp && cw == NC - 1)
            qattn_bar_arrive_id(TURN, 256);
    };
    auto turn_wait = [&](int pp) {
        if (pp)
            qattn_bar_sync_id(TURN + cw, 256);
    };
    auto turn_pass = [&](int pp, int more) {
        if (pp && (more || cw < NC - 1))
            qattn_bar_arrive_id(TURN + (cw + 1) % NC, 256);
    };
    int stage = 0;
    uint32_t phase = 0, so = 0u; /* parity of the full barriers' current completion; stage * STAGE */
    uint32_t qn = 0u;            /* Q tiles used before this one */
#pragma unroll 1
    for (int t = (int)blockIdx.x;; t = ntiles) {
        if constexpr (PERSIST) { /* the producer's next tile (ntiles: none) */
            qattn_mbar_wait(QATTN_WS_QBAR, qn & 1u);
            t = s_tile[qn & 1u];
        }
        if (t >= ntiles)
            break;
        const tile_pos w = tile_at(t);
        const int b = w.b, h = w.h, hk = w.hk, i0 = w.i0, sq = w.sq, sk = w.sk;
        const int64_t tq0 = w.tq0;
        if (i0 >= sq)
            continue;
        /* this thread's two rows, the key blocks any row of the tile sees */
        const int rA = i0 + 64 * cw + 16 * wv + g, rB = rA + 8;
        int loA = 0, hiA = 0, loB = 0, hiB = 0;
        qattn_mma_row_ranges(p.mask, rA, rB, sq, sk, &loA, &hiA, &loB, &hiB);
        const int J0 = PERSIST ? 0 : Jt0, J1 = PERSIST ? (sk + KS - 1) / KS * KS : Jt1;
        float qsA = 1.0f, qsB = 1.0f;
        const float *ksc = (const float *)0;
        const int qfused = QFUSE && p.q_fuse;
        if constexpr (QFUSE) {
            if (qfused && J0 < J1) { /* the Q tile quantized here while the producer loads the first key blocks */
                if (p.q_fuse_in == QATTN_FMT_BF16)
                    qattn_wgmma_fuse_q<D, QATTN_FMT_BF16>(p, sQ, s_qsc, s_qsc + BM, s_qsc + 2 * BM, s_qrowg, tid - 128, i0, sq, tq0,
                                                          b, h);
                else
                    qattn_wgmma_fuse_q<D, QATTN_FMT_FP16>(p, sQ, s_qsc, s_qsc + BM, s_qsc + 2 * BM, s_qrowg, tid - 128, i0, sq, tq0,
                                                          b, h);
            }
        }
        if (Q8) {
            ksc = p.k_scale + ((int64_t)hk * p.nseq + b) * p.k_ntok;
            /* int4: the tile holds 16 x the codes (qattn_wg_unpack_i4), S is 256 x theirs */
            const float unit = I4 ? 0.00390625f : 1.0f;
            if (qfused) {
                qsA = rA < sq && J0 < J1 ? s_qsc[s_qrowg[rA - i0]] : 0.0f;
                qsB = rB < sq && J0 < J1 ? s_qsc[s_qrowg[rB - i0]] : 0.0f;
            } else {
                const float *qsc = p.q_scale + ((int64_t)h * p.nseq + b) * p.q_ntok;
                qsA = rA < sq ? qsc[qattn_num_group_tok_index(p.q_group, rA)] * unit : 0.0f;
                qsB = rB < sq ? qsc[qattn_num_group_tok_index(p.q_group, rB)] * unit : 0.0f;
            }
        }

        float o[NO][4];
#pragma unroll
        for (int n = 0; n < NO; n++)
            o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
        float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
        const float c2 = p.c2, pmul = p.pmul, lpmul = log2f(pmul);
        const uint32_t aQ = qattn_wgmma_smem_addr(sQ);

        if constexpr (!Q8) {
            /* 16-bit: Q.K of a stage's KS keys (m64nKSk16; two consumer warpgroups: 128 keys, Q's
             * fragments in registers, shared memory carrying only K and V); the softmax and P.V (into O,
             * fp32) one key block at a time (with 64-key blocks the second block's softmax waits for
             * the first block's P.V: run under it, ptxas serialized the wgmmas, C7515) */
            constexpr int NH = KS / KB; /* key blocks a stage */
            float acc[KS / 2];          /* S of the stage, written by the first k-step (accumulate = 0) */
            /* QSS (three consumer warpgroups, 160 registers): stages of one key block and Q.K with Q from
             * shared memory (S of 128 keys with P's fragments over it: ptxas serialized the wgmmas,
             * C7511) */
            constexpr bool QSS = NC == 3;
            static_assert(!QSS || NH == 1, "one key block a stage exactly with three consumer warpgroups");
            uint32_t qf[QSS ? 1 : RB / 32][4]; /* A fragments of Q, channels 16kk..16kk+15 */
            const uint64_t dq0 = qattn_wg_desc_k<RB, BM>(aQ, 64 * cw, 0);
            /* K's descriptors made once (k-step kk at dk0 + its constant offset + the stage's, in 16-byte
             * units, as the 8-bit path does) */
            const uint32_t aStg0 = qattn_wgmma_smem_addr(sStage);
            const uint64_t dk0 = qattn_wg_desc_k<RB, KS>(aStg0, 0, 0);
            auto issue_qk = [&](uint32_t so) {
#pragma unroll
                for (int x = 0; x < KS / 2; x++)
                    qattn_wgmma_fence_reg(acc[x]);
                qattn_wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < RB / 32; kk++) {
                    const uint64_t dk = dk0 + ((so + qattn_wg_slab_off<KS>(32 * kk)) >> 4);
                    if constexpr (QSS)
                        qattn_wgmma_m64k16_ss<KS, BF>(acc, dq0 + (qattn_wg_slab_off<BM>(32 * kk) >> 4), dk, kk > 0);
                    else
                        qattn_wgmma_m64k16_rs<KS, BF, 0>(acc, qf[kk], dk, kk > 0);
                }
                qattn_wgmma_commit();
            };
            /* O = O alpha + P.V of key block h of the stage */
            auto issue_pv = [&](const uint32_t (&pf)[KB / 16][4], uint32_t aV, int h, float alA, float alB) {
                qattn_wgmma_pv16_issue<D, KB, KS, BF>(o, alA, alB, pf, aV, KB / 16 * h);
                qattn_wgmma_commit();
            };
            const int pp = NH == 1 && !QSS && pingpong && J0 < J1;
            turn_open(pp);
            if (J0 < J1) {
                if (!PERSIST)
                    qattn_mbar_wait(QATTN_WS_QBAR, qn & 1u);
                /* ldmatrix x4: lanes 8m..8m+7 address matrix m = rows (l & 15) of chunk 2kk + (l >> 4) */
                if constexpr (!QSS) {
#pragma unroll
                    for (int kk = 0; kk < RB / 32; kk++)
                        qattn_ldmatrix_x4(qf[kk], sQ + qattn_wg_off<RB, BM>(64 * cw + 16 * wv + (lane & 15), 2 * kk + (lane >> 4)));
                    if (PERSIST) /* Q is in registers: the producer may load the next tile's */
                        qattn_mbar_arrive(QATTN_WS_QEMPTY);
                } else {
                    qattn_fence_proxy_async_smem(); /* cp.async (generic proxy) Q read by wgmma (async proxy) */
                }
                qattn_mbar_wait(QATTN_WS_FULL(stage), phase);
                qattn_fence_proxy_async_smem();
                issue_qk(so);
            }
            for (int j0 = J0; j0 < J1; j0 += KS) {
                const int nstg = stage == S - 1 ? 0 : stage + 1, more = j0 + KS < J1;
                const uint32_t nphase = stage == S - 1 ? phase ^ 1u : phase, nso = stage == S - 1 ? 0u : so + STAGE;
                const uint32_t aV = aStg0 + so + KBYTES;
                qattn_wgmma_wait<0>(); /* S of this stage, P.V of the previous */
#pragma unroll
                for (int x = 0; x < KS / 2; x++)
                    qattn_wgmma_fence_reg(acc[x]);
                /* with 4 stages (d = 64) the next one awaited before the softmax, so that its Q.K issues
                 * right behind the P.V (+5-6%); with 3 (d = 128) after the P.V (with 2, before it cost
                 * 24%: the load of the next stage was then in series) */
                if (S >= 4 && more) {
                    qattn_mbar_wait(QATTN_WS_FULL(nstg), nphase);
                    qattn_fence_proxy_async_smem();
                }
                float alA, alB;
                uint32_t pf[NH][KB / 16][4]; /* A fragments (16-bit) of keys 16q..16q+15 of each key block */
#pragma unroll
                for (int hb = 0; hb < NH; hb++) {
                    float (&sh)[KB / 2] = *reinterpret_cast<float (*)[KB / 2]>(&acc[KB / 2 * hb]);
                    if (hb > 0)
                        qattn_wgmma_wait<0>(); /* the block before's P.V (the softmax under it: C7515) */
                    qattn_wgmma_softmax16<KB>(sh, j0 + KB * hb, loA, hiA, loB, hiB, c2, mA, mB, lA, lB, alA, alB);
                    qattn_wgmma_pack16<KB, BF>(sh, pf[hb]);
                    turn_wait(pp);
                    issue_pv(pf[hb], aV, hb, alA, alB);
                }
                if (more) {
                    if (S < 4) {
                        qattn_mbar_wait(QATTN_WS_FULL(nstg), nphase);
                        qattn_fence_proxy_async_smem();
                    }
                    issue_qk(nso);
                    turn_pass(pp, 1);
                    qattn_wgmma_wait<1>(); /* the P.V done, the next Q.K may run on */
                } else {
                    turn_pass(pp, 0);
                    qattn_wgmma_wait<0>();
                }
                if (lane == 0)
                    qattn_mbar_arrive(QATTN_WS_EMPTY(stage)); /* this warp is done with the stage */
#pragma unroll
                for (int n = 0; n < NO; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        qattn_wgmma_fence_reg(o[n][e]);
                stage = nstg;
                phase = nphase;
                so = nso;
            }
            qattn_wgmma_wait<0>(); /* nothing in flight; said for ptxas (C7517 otherwise) */
            if (PERSIST && QSS && J0 < J1)
                qattn_mbar_arrive(QATTN_WS_QEMPTY);
        } else {
            typedef typename qattn_cond<QC == QATTN_FMT_INT8, int, float>::type s_t; /* S's accumulator */
            /* NH: key blocks a stage (fp16 P.V at d = 64, sage1-b: two of 64 under one m64n128 Q.K, their
             * softmax and P.V in turn) */
            constexpr int NH = KS / KB;
            static_assert(NH == 1 || (P16 && NH == 2), "stages of two key blocks for the fp16 P.V only");
            s_t acc[KS / 2]; /* S of the stage, written by the first k-step */
            uint32_t oh[P16 ? NO * 2 : 1]; /* P16: O in the f16 accumulator (the fp32 layout's pairs) */
#pragma unroll
            for (int x = 0; x < (P16 ? NO * 2 : 1); x++)
                oh[x] = 0u;
            /* descriptors made once: k-step kk of Q at dq0 + 2 kk, of the K tile of the stage at byte
             * offset so at dk0 + so / 16 + 2 kk, of V^T at dv0 + so / 16 + 2 q (16-byte units in the
             * start-address field; shared addresses stay under 256 KB, so nothing carries out of it) */
            const uint32_t aStg0 = qattn_wgmma_smem_addr(sStage);
            const uint64_t dq0 = qattn_wg_desc_k<RB, BM>(aQ, 64 * cw, 0), dk0 = qattn_wg_desc_k<RB, KS>(aStg0, 0, 0);
            const uint64_t dv0 = qattn_wg_desc_k<KS, D>(aStg0 + KBYTES, 0, 0);
            auto issue_qk = [&](uint32_t so) {
#pragma unroll
                for (int x = 0; x < KS / 2; x++)
                    qattn_wgmma_fence_reg(acc[x]);
                qattn_wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < RB / 32; kk++) {
                    if constexpr (WQK) /* k-steps of 16 channels (32 bytes) in column slabs of 128 bytes */
                        qattn_wgmma_m64k16_ss<KS, 0>(acc, dq0 + (qattn_wg_slab_off<BM>(32 * kk) >> 4),
                                                     dk0 + ((so + qattn_wg_slab_off<KS>(32 * kk)) >> 4), kk > 0);
                    else
                        qattn_wgmma_qk<KS>(acc, dq0 + 2u * kk, dk0 + ((so >> 4) + 2u * kk), kk > 0);
                }
                qattn_wgmma_commit();
            };
            if (J0 < J1) {
                if (!qfused)
                    qattn_mbar_wait(QATTN_WS_QBAR, qn & 1u);
                qattn_mbar_wait(QATTN_WS_FULL(stage), phase);
                qattn_fence_proxy_async_smem(); /* cp.async (generic proxy) data read by wgmma (async proxy) */
                issue_qk(so);
            }
            /* the K scales of the thread's keys as qattn_wg_kscales does (inline here: as that struct, ptxas
             * spilled 4 bytes more in the three-consumer d = 128 form) */
            const int ktens = p.k_group.tok == QATTN_TOK_TENSOR;
            const int kq = ktens ? INT_MAX : p.k_group.b / KB; /* key blocks in a B-block */
            const int kper = p.k_group.tok == QATTN_TOK_THREAD ? p.k_group.s / p.k_group.w : 1; /* groups a B-block */
            const int kin0 = qattn_qf_tok_index(p.k_group, qattn_wg_key(0, qi, 0));
            const int kin1 = qattn_qf_tok_index(p.k_group, qattn_wg_key(1, qi, 0));
            int kleft = ktens ? INT_MAX : kq - (J0 / KB) % kq; /* blocks left in this B-block */
            const float *kcur = ksc + (ktens ? 0 : (J0 / KB) / kq * kper);
            /* int4, smooth=q: the dS row of the rows' Q block (qblock % 16 == 0: one a warp) */
            const int dsq = I4W ? I4W == 2 : I4 && p.q_mean != 0;
            const int lq = dsq ? min(max(rA / p.qblock - i0 / p.qblock, 0), QATTN_WGMMA_DSROWS(BM) - 1) : 0;
            const float *dsrow = sDs + lq * KB;
            /* two levels (TWO): each block's P.V from 0 into pvbuf, added into O; with DEFER the addition
             * of block j runs at the start of block j + 1's softmax, and a stage is released after the
             * next block's wait */
            constexpr int EARLY = qattn_wg_early_wait(D, KB, QR, PF, U);
            constexpr int S2F = qattn_wg_s2f(D, KB, false);
            constexpr int DEFER = TWO && NC == 2 && qattn_wg_defer_o(D, KB, QR, PF);
            /* SER (three consumer warpgroups, 160 registers): a block's P.V is waited (and added into
             * O) before the next Q.K issues, so that its S and the P.V's registers are never live
             * together; the other warpgroups keep the tensor core busy meanwhile. PVACC: a two-level
             * block's P.V in the S accumulator's registers (ptxas keeps them for the wgmma: a separate
             * buffer is 32 or 64 registers more); HALF (D > KB, where they are too few): in two halves
             * of D / 2 channels, each waited and added into O, so that pvbuf holds one half */
            constexpr int SER = NC == 3 && !P16 && qattn_wg_ser(D, QF), PVACC = SER && TWO && D <= KB, HALF = SER && TWO && !PVACC;
            /* PIN (one level): P's codes written into the S accumulator's registers too, as the
             * scores they replace are read (P.V accumulates into O there) */
            constexpr bool PIN = SER && !TWO && !F16A;
            typedef typename qattn_cond<PF == QATTN_FMT_INT8, int, float>::type pv_t; /* P.V's accumulator */
            pv_t pvbuf[TWO && !PVACC ? (HALF ? NO * 2 : NO * 4) : 1];
            float palA = 1.0f, palB = 1.0f; /* DEFER: alpha of the block whose P.V is in pvbuf */
            int pstage = 0;                 /* DEFER: that block's stage */
            for (int j0 = J0; j0 < J1; j0 += KS) {
                const int nstg = stage == S - 1 ? 0 : stage + 1, more = j0 + KS < J1;
                const uint32_t nphase = stage == S - 1 ? phase ^ 1u : phase, nso = stage == S - 1 ? 0u : so + STAGE;
                const uint32_t aV = aStg0 + so + KBYTES;
                qattn_wgmma_wait<0>(); /* S of this stage (DEFER: and the previous block's P.V) */
#pragma unroll
                for (int x = 0; x < KS / 2; x++)
                    qattn_wgmma_fence_reg(acc[x]);
                if constexpr (DEFER) {
#pragma unroll
                    for (int x = 0; x < NO * 4; x++)
                        qattn_wgmma_fence_reg(pvbuf[x]);
                    if (j0 > J0 && (U || dsq || lane == 0))
                        qattn_mbar_arrive(QATTN_WS_EMPTY(pstage));
                }
                /* EARLY: the next stage's arrival awaited here, before the softmax, so that its Q.K issues
                 * right behind this block's P.V */
                if (EARLY && more) {
                    qattn_mbar_wait(QATTN_WS_FULL(nstg), nphase);
                    qattn_fence_proxy_async_smem(); /* cp.async (generic proxy) data read by wgmma (async proxy) */
                }

                float alA, alB;
                /* A fragments of each key block (e4m3 / int8 codes of 32 keys, fp16 of 16; both blocks' live
                 * until the second's P.V, as the first's is read by the tensor core meanwhile) */
                uint32_t pfs[NH][KB / (F16A ? 16 : 32)][4];
                /* where the block's P.V accumulates */
                pv_t *const pv = PVACC ? reinterpret_cast<pv_t *>(&acc[0]) : TWO ? pvbuf : reinterpret_cast<pv_t *>(&o[0][0]);
                auto pv_done = [&] { /* P16: the P.V in flight done, O's registers readable */
                    qattn_wgmma_wait<0>();
#pragma unroll
                    for (int x = 0; x < (P16 ? NO * 2 : 0); x++)
                        qattn_wgmma_fence_reg(oh[x]);
                };
#pragma unroll
                for (int hb = 0; hb < NH; hb++) {
                    s_t (&sh)[KB / 2] = *reinterpret_cast<s_t (*)[KB / 2]>(&acc[KB / 2 * hb]);
                    uint32_t (&pf)[KB / (F16A ? 16 : 32)][4] = pfs[hb];
                    /* the block before's P.V awaited before O is rescaled; with the scores in S's own
                     * registers (three consumer warpgroups) before this block's softmax writes them, since
                     * under a wgmma in flight ptxas serialized the wgmmas (C7515) */
                    if (P16 && hb > 0 && NC == 3)
                        pv_done();
                    const int jb = j0 + KB * hb; /* this key block's first key */
                    /* the K scales of this thread's keys of even / odd tiles (one group each, qattn_wg_kgroup_ok);
                     * none for a stage's second block past the sequence's keys (its groups end there; the
                     * keys are masked) */
                    const bool kin = NH == 1 || jb < sk;
                    const float ks0 = kin ? kcur[kin0] : 0.0f, ks1 = kin ? kcur[kin1] : 0.0f;
                    auto beside = [&] {
                        if constexpr (DEFER)
                            if (j0 > J0)
                                qattn_wgmma_o_update<NO>(o, pvbuf, palA, palB);
                    };
                    if (dsq) { /* int4, smooth=q: S c2 + dS c2 of the thread's keys of each tile */
                        /* sage2-4b at d = 128 (its unit at ptxas -O3): each tile's pair read where the softmax
                         * adds it, 1.012-1.024x its TOPS; elsewhere all read first (the other way 0.989x at -O1,
                         * H200 2026-12-02, kernels/logs/h200_dsrow_ab.txt; not measured for acc=fp32) */
                        const qattn_wg_dsrow<KB> row{dsrow + stage * QATTN_WGMMA_DSROWS(BM) * KB, qi};
                        auto softmax_ds = [&](const auto &dsv) {
                            qattn_wgmma_softmax<KB, PF, true, W16, S2F, NC == 3, PIN, false>(sh, dsv, jb, loA, hiA, loB, hiB, qsA * ks0 * c2,
                                                              qsA * ks1 * c2, qsB * ks0 * c2, qsB * ks1 * c2, lpmul, mA, mB,
                                                              lA, lB, alA, alB, pf, beside);
                        };
                        if constexpr (D == 128 && ACC == QATTN_ACC_FP22) {
                            softmax_ds(row);
                        } else {
                            float2 dsv[NT];
#pragma unroll
                            for (int t = 0; t < NT; t++)
                                dsv[t] = row[t];
                            softmax_ds(dsv);
                        }
                    } else {
                        const float2 none[1] = {make_float2(0.0f, 0.0f)};
                        qattn_wgmma_softmax<KB, PF, false, W16, S2F, NC == 3, PIN, false>(sh, none, jb, loA, hiA, loB, hiB, qsA * ks0 * c2, qsA * ks1 * c2,
                                                           qsB * ks0 * c2, qsB * ks1 * c2, lpmul, mA, mB, lA, lB, alA, alB,
                                                           pf, beside);
                    }

                    /* ---- P.V of this block (from 0, or into O rescaled), then Q.K of the next ---- */
                    if constexpr (P16) {
                        if (hb > 0 && NC == 2)
                            pv_done();
                        /* the block's V rows: KB keys of 128-byte slab rows on */
                        qattn_wgmma_pvh_issue<D, KB, KS>(oh, alA, alB, pf, aV + (uint32_t)(128 * KB * hb));
                    } else if constexpr (W16) {
                        qattn_wgmma_pv16_issue<D, KB, KS, 0>(o, alA, alB, pf, aV, 0);
                    } else if constexpr (HALF) {
                        qattn_wgmma_pv_halves<D, KB>(o, pvbuf, pf, dv0 + (so >> 4), alA, alB);
                    } else {
                        qattn_wgmma_pv_issue<D, KB, TWO, PIN>(pv, o, alA, alB, sh, pf, dv0, so);
                    }
                    if constexpr (!HALF)
                        qattn_wgmma_commit();
                    if (hb + 1 < NH && --kleft == 0) { /* the next block's groups (after a stage's last: below) */
                        kleft = kq;
                        kcur += kper;
                    }
                }
                if constexpr (SER) {
                    if constexpr (!HALF)
                        qattn_wgmma_pv_finish<NO, TWO>(o, pv, alA, alB);
                    if (U || dsq || lane == 0)
                        qattn_mbar_arrive(QATTN_WS_EMPTY(stage));
                }
                /* the next block's Q.K right behind this P.V; this stage released once the P.V is done
                 * (by every lane where the lanes read it with plain loads too, int4's dS: each orders its
                 * own reads before the release) */
                if (more) {
                    if (!EARLY) {
                        qattn_mbar_wait(QATTN_WS_FULL(nstg), nphase);
                        qattn_fence_proxy_async_smem();
                    }
                    issue_qk(nso);
                }
                if constexpr (DEFER) {
                    palA = alA, palB = alB, pstage = stage;
                } else if constexpr (!SER) {
                    if (more)
                        qattn_wgmma_wait<1>();
                    else
                        qattn_wgmma_wait<0>();
                    if (U || dsq || lane == 0)
                        qattn_mbar_arrive(QATTN_WS_EMPTY(stage));
                }
                if constexpr (P16) {
#pragma unroll
                    for (int x = 0; x < NO * 2; x++)
                        qattn_wgmma_fence_reg(oh[x]);
                } else if constexpr (!SER) {
#pragma unroll
                    for (int x = 0; x < NO * 4; x++)
                        qattn_wgmma_fence_reg(pv[x]);
                }
                if constexpr (TWO && !DEFER && !SER)
                    qattn_wgmma_o_update<NO>(o, pvbuf, alA, alB);
                if (--kleft == 0) { /* to the next key block's groups */
                    kleft = kq;
                    kcur += kper;
                }
                stage = nstg;
                phase = nphase;
                so = nso;
            }
            lA = lA / pmul, lB = lB / pmul; /* l summed P * pmul (qattn_wgmma_softmax) */
            /* nothing is in flight here (the last block's stage end waited for 0), but ptxas cannot tie the
             * loop's exit to that wait and would inject one (C7517) */
            qattn_wgmma_wait<0>();
            if constexpr (DEFER) { /* the last block's P.V */
#pragma unroll
                for (int x = 0; x < NO * 4; x++)
                    qattn_wgmma_fence_reg(pvbuf[x]);
                qattn_wgmma_o_update<NO>(o, pvbuf, palA, palB);
                if (PERSIST && J0 < J1 && (U || dsq || lane == 0)) /* its stage, released here for the next tile */
                    qattn_mbar_arrive(QATTN_WS_EMPTY(pstage));
            }
            if (PERSIST && J0 < J1) /* the tile's last Q.K is done: the producer may load the next Q */
                qattn_mbar_arrive(QATTN_WS_QEMPTY);
            if constexpr (P16) {
                qattn_wgmma_oh_unpack<NO>(oh, o);
            }
        }
        qattn_mma_epilogue<D, D == 128 && NC == 3>(p, o, lA, lB, mA, mB, rA, rB, loA, hiA, loB, hiB, sq, tq0, b, h, hk);
        if (PERSIST || J0 < J1)
            qn++;
    }
#undef QATTN_WS_FULL
#undef QATTN_WS_EMPTY
#undef QATTN_WS_QBAR
#undef QATTN_WS_QEMPTY
#elif defined(__CUDA_ARCH__)
    (void)p;
    __trap(); /* built without sm_90a: never launched (the host checks), trap if it is */
#else
    (void)p;
#endif
}

#endif
