/* Sparse family, NVIDIA wgmma path (sm_90a): the bf16 sparse prefill at
 * d = 512, one CTA a (query token, kv head, tile of 64 of the group's q
 * heads) item (F8: items in turn). Rows are heads: every head of a token
 * reads the same listed keys.
 *
 *   warpgroup 0 (producer): gathers the Q tile, then the listed KV rows 64
 *     list entries a stage (2 stages of 64 KiB) by cp.async, a row found
 *     through the page table, holes and entries past the length zero-filled;
 *   warpgroups 1, 2 (consumers c = 0, 1): S_c = Q K^T over keys 32c..32c+31
 *     of the stage (m64n32k16, both operands in shared memory: a 512-wide Q
 *     does not fit registers beside O), the row maxima exchanged between the
 *     two (named barrier), P = exp2(S c2 - m) in bf16 into a shared 64 x 64
 *     tile, then O_c += P V over all 64 keys for channels 256c..256c+255
 *     (m64n128k16, V read as rows of keys from the same stage as K).
 * Each consumer keeps its own partial l; both hold the same row maxima, so
 * the two sums add at the end, with the sink's term. A stage's layout: 8
 * slabs of 64 channels, 64 rows of 128 bytes each, 128-byte swizzle, read
 * K-major for Q.K and N-major for P.V.
 *
 * F8 = 1 (the fused variant): the cache's fp8 rows as stored. Two producer
 * warpgroups; warp w owns rows 16 qq + 2w, 2w + 1 of every block (qq = 0..3,
 * the block's quarters): its lanes load the rows' codes and scale bytes into
 * registers a block ahead (while the block before is consumed), then, once
 * the stage is free, widen them into the stage's bf16 tile (codes times scale
 * are bf16 values: exact), with no barrier between warps; the rope channels
 * go by cp.async straight into the tile. The producers quantize the Q tile
 * once as the scheme does (e4m3 with an e8m0 scale per 64 channels, exact in
 * bf16). Q.K and P.V then run as for bf16 rows on those exact values: the
 * e4m3 products and their fp32 sums are the ones e4m3 Q.K with the scales
 * applied per 64 channels would form, in another order. Its CTAs are
 * persistent (one a multiprocessor, items from a counter): the next item's Q
 * tile is copied and quantized, and its first blocks made, while the
 * consumers finish the item before (its last P.V and the epilogue). */
#ifndef QATTN_KERNELS_SPARSE_WGMMA_H
#define QATTN_KERNELS_SPARSE_WGMMA_H

#include "sparse_portable.h"
#include "wgmma_tile.h"

#define QATTN_SPW_D 512
#define QATTN_SPW_ROWS 64 /* q heads a CTA */
#define QATTN_SPW_KEYS 64 /* list entries a stage */
#define QATTN_SPW_THREADS(F8) ((F8) ? 512 : 384) /* F8: a second producer warpgroup (warpgroup 3) */
#define QATTN_SPW_TILE (QATTN_SPW_ROWS * QATTN_SPW_D * 2) /* bytes of the Q tile and of a stage: 64 KiB */
#define QATTN_SPW_OFF_KV QATTN_SPW_TILE                      /* stage s at OFF_KV + s * TILE */
#define QATTN_SPW_OFF_P (3 * QATTN_SPW_TILE) /* P of stage s at OFF_P + s * 8 KiB */
#define QATTN_SPW_OFF_RED (QATTN_SPW_OFF_P + 2 * 8192) /* row maxima [2 stages][2][64], sums [2][64] */
#define QATTN_SPW_DN (QATTN_SPW_D - 64)                       /* F8: e4m3 channels a row */
#define QATTN_SPW_SCR QATTN_KERNELS_SPARSE_SC_ROW(QATTN_SPW_DN) /* F8: scale bytes a row */
#define QATTN_SPW_SMEM (QATTN_SPW_OFF_RED + 6 * 64 * 4 + 1024) /* + alignment */

/* qattn_sparse_page_row of position pos >= 0, kv head g, with tab the pool page table's entry of pos
 * (read by the caller; unused in the extend part), the offset in the page by qattn_fastdiv */
static __device__ __forceinline__ int64_t qattn_spw_page_row(const qattn_kernels_sparse_params &p, uint32_t pos, int32_t tab,
                                                             int g, int *ext)
{
    return qattn_sparse_page_row(p.kv, pos, tab, pos - qattn_fastdiv(p.div_page, pos) * p.div_page.d, g, ext);
}
/* the pool page table's entry of position pos >= 0 (0 outside the pool) */
static __device__ __forceinline__ int32_t qattn_spw_page_of(const qattn_kernels_sparse_params &p, int32_t pos)
{
    return (int64_t)pos < p.kv.prefix ? p.kv.table[qattn_fastdiv(p.div_page, (uint32_t)pos)] : 0;
}
/* the bf16 row of position pos >= 0, kv head g */
static __device__ __forceinline__ const uint16_t *qattn_spw_row(const qattn_kernels_sparse_params &p, int32_t pos, int g)
{
    int ext;
    const int64_t row = qattn_spw_page_row(p, (uint32_t)pos, qattn_spw_page_of(p, pos), g, &ext);
    return (const uint16_t *)(ext ? p.kv.ext.val : p.kv.pool.val) + row * QATTN_SPW_D;
}

/* F8: the exact float path of qattn_spw_widen16, for the pieces it leaves */
struct qattn_spw_pair {
    uint4 lo, hi;
};
static __device__ __forceinline__ qattn_spw_pair qattn_spw_widen16_slow(uint4 w, uint32_t sc)
{
    const uint32_t in[4] = {w.x, w.y, w.z, w.w};
    const float s = qattn_num_e8m0_decode((uint8_t)sc);
    uint32_t o[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
        float lo, hi;
        qattn_f16x2_unpack(qattn_cvt_f16x2_e4m3x2(in[k >> 1] >> (16 * (k & 1))), lo, hi);
        o[k] = qattn_cvt_bf16x2_f32(lo * s, hi * s);
    }
    return {make_uint4(o[0], o[1], o[2], o[3]), make_uint4(o[4], o[5], o[6], o[7])};
}

/* F8: the bf16 values of 16 e4m3 codes (w) times 2^k (scale code sc, k =
 * sc - 127) as 32 bytes (lo: codes 0-7, hi: 8-15). A code s eeee mmm placed
 * as the bf16 s 0000eeee mmm0000 is its value times 2^-120, zero and
 * subnormal codes included (bf16 subnormals); one bf16x2 multiply by
 * 2^(120 + k) makes it the exact product. Per pair of codes: a
 * sign-filling prmt spreads them to 16-bit lanes, a shift and a mask place
 * them, the multiply scales (kernels/probes/e4m3_bf16_widen.cu: every code
 * exact for every scale code up to 134 on the H200; the exponent-add form it
 * replaced needed a zero test a word). Larger scales overflow 2^(120 + k):
 * the float path (QATTN_SPW_SC_FAST). Zero codes (a hole's) give +0. */
#define QATTN_SPW_SC_FAST 134u /* the largest scale code qattn_spw_widen16 takes */
/* 2^(120 + k) for scale code sc (at most QATTN_SPW_SC_FAST) as a bf16x2 multiplier */
static __device__ __forceinline__ uint32_t qattn_spw_mul(uint32_t sc)
{
    const uint32_t m16 = (sc + 120u) << 7;
    return m16 | m16 << 16;
}
/* the codes in bytes b, b + 1 of w (sel 0x9180: bytes 0, 1; 0xb3a2: 2, 3) times the scale of mul, bf16x2 */
static __device__ __forceinline__ uint32_t qattn_spw_pair_bf16(uint32_t w, uint32_t sel, uint32_t mul)
{
    uint32_t t;
    asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(t) : "r"(w), "r"(sel)); /* [sign fill][code] lanes */
    t = (t << 4) & 0x87f087f0u;
    asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(t) : "r"(t), "r"(mul));
    return t;
}
static __device__ __forceinline__ qattn_spw_pair qattn_spw_widen16(uint4 w, uint32_t sc)
{
    const uint32_t in[4] = {w.x, w.y, w.z, w.w};
    const uint32_t mul = qattn_spw_mul(sc);
    uint32_t o[8];
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            o[2 * k + h] = qattn_spw_pair_bf16(in[k], h ? 0xb3a2u : 0x9180u, mul);
    return {make_uint4(o[0], o[1], o[2], o[3]), make_uint4(o[4], o[5], o[6], o[7])};
}

/* F8: scale code x of the bytes packed in sw (byte x & 3 of sw[x >> 2]) */
static __device__ __forceinline__ uint32_t qattn_spw_scale_code(const uint32_t *sw, int x)
{
    return sw[x >> 2] >> (8 * (x & 3)) & 255u;
}
/* F8: N pieces of 16 codes (cw[x], scale code byte x & 3 of sw[x >> 2]) widened and handed to
 * put(x, v); where a lane of the warp has a scale above the fast path's, the warp takes the form
 * with the float path for those pieces together (rare) */
template <int SLOW, int N, class Put>
static __device__ __forceinline__ void qattn_spw_widen_each(const uint4 *cw, const uint32_t *sw, Put put)
{
#pragma unroll
    for (int x = 0; x < N; x++) {
        const uint32_t sc = qattn_spw_scale_code(sw, x);
        qattn_spw_pair v = qattn_spw_widen16(cw[x], sc);
        if (SLOW && sc > QATTN_SPW_SC_FAST)
            v = qattn_spw_widen16_slow(cw[x], sc);
        put(x, v);
    }
}
template <int N, class Put>
static __device__ __forceinline__ void qattn_spw_widen_pieces(const uint4 *cw, const uint32_t *sw, Put put)
{
    int big = 0;
#pragma unroll
    for (int x = 0; x < N; x++)
        big |= qattn_spw_scale_code(sw, x) > QATTN_SPW_SC_FAST;
    if (__any_sync(0xffffffffu, big))
        qattn_spw_widen_each<1, N>(cw, sw, put);
    else
        qattn_spw_widen_each<0, N>(cw, sw, put);
}

/* test (params widen_table): every e4m3 code (piece lane & 15, codes 16 (lane & 15) ..) times every
 * scale code (block sc) by the producer's widening, [256 scale codes][256 codes] bf16 */
static __global__ void qattn_sparse_widen_table_kernel(uint16_t *out)
{
#if QATTN_WGMMA
    const unsigned lane = threadIdx.x & 31u, sc = blockIdx.x, c0 = 16u * (lane & 15u);
    uint32_t wd[4];
    for (int k = 0; k < 4; k++)
        wd[k] = (c0 + 4 * k) | (c0 + 4 * k + 1) << 8 | (c0 + 4 * k + 2) << 16 | (c0 + 4 * k + 3) << 24;
    const uint4 cw[1] = {make_uint4(wd[0], wd[1], wd[2], wd[3])};
    const uint32_t sw[1] = {sc};
    qattn_spw_widen_pieces<1>(cw, sw, [&](int, const qattn_spw_pair &v) {
        if (lane < 16) {
            *(uint4 *)(out + sc * 256 + c0) = v.lo;
            *(uint4 *)(out + sc * 256 + c0 + 8) = v.hi;
        }
    });
#else
    (void)out;
#endif
}

/* F8: the scheme's Q on one row's 64-channel slab u (bf16 pairs: value 2k in the low half of u[k]) in
 * place: e4m3 codes with an e8m0 scale s from the slab's amax (on the bf16 magnitudes: their integer
 * order), by the conversion unit (x * (1 / s) is x / s exactly; saturating, as qattn_num_round), as bf16
 * values code times s. Integer rounding of the bf16 mantissas where no code is subnormal ran 2% slower
 * (its ALU operations compete with the producers' widening; H200 2026-11-29) */
static __device__ __forceinline__ void qattn_spw_quant_slab(uint32_t (&u)[32])
{
    uint32_t mag = 0;
#pragma unroll
    for (int k = 0; k < 32; k++)
        mag = __vmaxu2(mag, u[k] & 0x7fff7fffu);
    const uint32_t m16 = (mag & 0xffffu) > (mag >> 16) ? mag & 0xffffu : mag >> 16;
    const float sc = qattn_num_scale_for(QATTN_FMT_E4M3, qattn_num_bf16_decode((uint16_t)m16), 1);
    const float inv = sc > 0.0f ? 1.0f / sc : 0.0f;
#pragma unroll
    for (int k = 0; k < 32; k++) {
        const float lo = __uint_as_float(u[k] << 16), hi = __uint_as_float(u[k] & 0xffff0000u);
        float a, b;
        qattn_f16x2_unpack(qattn_cvt_f16x2_e4m3x2(qattn_cvt_e4m3x2_f32(lo * inv, hi * inv)), a, b);
        u[k] = qattn_cvt_bf16x2_f32(a * sc, b * sc);
    }
}

/* test (params qquant_table): n slabs [n][64] bf16 quantized in place by qattn_spw_quant_slab, a thread a slab */
static __global__ void qattn_sparse_qquant_table_kernel(uint16_t *slabs, int n)
{
#if QATTN_WGMMA
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n)
        return;
    uint4 *x = (uint4 *)(slabs + (int64_t)i * 64);
    uint32_t u[32];
#pragma unroll
    for (int ch = 0; ch < 8; ch++) {
        const uint4 w = x[ch];
        u[4 * ch] = w.x, u[4 * ch + 1] = w.y, u[4 * ch + 2] = w.z, u[4 * ch + 3] = w.w;
    }
    qattn_spw_quant_slab(u);
#pragma unroll
    for (int ch = 0; ch < 8; ch++)
        x[ch] = make_uint4(u[4 * ch], u[4 * ch + 1], u[4 * ch + 2], u[4 * ch + 3]);
#else
    (void)slabs, (void)n;
#endif
}

template <int F8>
static __global__ void __launch_bounds__(QATTN_SPW_THREADS(F8), 1) qattn_sparse_wgmma_kernel(qattn_kernels_sparse_params p)
{
#if QATTN_WGMMA
    const int D = QATTN_SPW_D, KEYS = QATTN_SPW_KEYS, SLAB = QATTN_SPW_ROWS * 128; /* bytes of a 64-channel slab */
    QATTN_DYNAMIC_SHARED(uint8_t, smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (qattn_wgmma_smem_addr(smem_raw) & 1023)) & 1023);
    float *red = (float *)(smem + QATTN_SPW_OFF_RED);
    __shared__ __align__(8) uint64_t s_bar[7]; /* full[2], empty[2], Q full, Q empty, Q landed (F8) */
    __shared__ const uint16_t *sRow[F8 ? 1 : 2][F8 ? 1 : QATTN_SPW_KEYS]; /* bf16: each stage's rows (NULL: a hole) */
    __shared__ uint32_t sHole[2][8]; /* each stage's holes: F8 producer warp w's row kr at bit 4 kr of [w]; bf16 key k at bit k % 32 of [k / 32] */
    __shared__ int sItem[2]; /* item ii's index at [ii % 2] (nitems or more: none left), for the consumers */
    const uint32_t bar0 = qattn_wgmma_smem_addr(s_bar);
#define QATTN_SPW_FULL(s) (bar0 + 8u * (uint32_t)(s))
#define QATTN_SPW_EMPTY(s) (bar0 + 16u + 8u * (uint32_t)(s))
#define QATTN_SPW_QFULL (bar0 + 32u)
#define QATTN_SPW_QEMPTY (bar0 + 40u)
#define QATTN_SPW_QLAND (bar0 + 48u)
    const int tid = (int)threadIdx.x, wg = tid >> 7, wt = tid & 127;
    const int grp = p.hq / p.hkv, tiles = (grp + QATTN_SPW_ROWS - 1) / QATTN_SPW_ROWS;
    /* items (token, kv head, tile) in that order (a token's tiles side by side: they read the same
     * rows). F8 persistent: CTA b takes item b, then the next from the counter p.work (a static
     * stride measured about 2% slower: multiprocessors that run slower then hold the kernel up), the
     * next item's Q tile quantized and its first blocks made under the last blocks and epilogue of
     * the one before; stage use counts on over items. bf16: a CTA an item (grid x: kv head and tile,
     * y: token; persistent it ran 3-5% slower at top-k 2048, H200 2026-11-29) */
    const int per_tok = p.hkv * tiles, nitems = per_tok * p.sq;
    if (tid == 0) {
        for (int s = 0; s < 2; s++) {
            /* the producers' threads (F8: and their rope copies; bf16: and the two hole-mask writers) */
            qattn_mbar_init(QATTN_SPW_FULL(s), F8 ? 512 : 130);
            /* F8: consumer threads (each reads the hole bits; compute-sanitizer's racecheck does not
             * follow one lane's arrival after __syncwarp across items); bf16: consumer warps */
            qattn_mbar_init(QATTN_SPW_EMPTY(s), F8 ? 256 : 8);
        }
        qattn_mbar_init(QATTN_SPW_QFULL, F8 ? 256 : 128); /* F8: the producers, having quantized it; bf16: its copies */
        qattn_mbar_init(QATTN_SPW_QEMPTY, 256); /* consumer threads, past their last Q.K of the item (and sItem) */
        qattn_mbar_init(QATTN_SPW_QLAND, 128);            /* F8: the Q tile's copies */
    }
    __syncthreads();

    if (wg == 0 || wg == 3) {
        /* ================= producers (warpgroup 0; F8: and 3) ================= */
        /* F8: 2 x 128 x 80 + 256 x 176 = 65536 registers */
        qattn_setmaxnreg_dec<F8 ? 80 : 40>();
        /* each warp copies 512 contiguous bytes of one row per instruction (pieces wt % 64 of rows
         * wt / 64, + 2, ...): scattered 16-byte pieces would cost the L1 a line each */
        const int pc = wt & 63, rh = wt >> 6;
        uint32_t jg = 0; /* blocks of the CTA's items before this one: block j uses stage (jg + j) % 2 */
        /* thread 0 takes the item after the next from the counter while the CTA works on this one */
        int nxt = (int)(blockIdx.x + gridDim.x);
        if (F8 && tid == 0)
            nxt = (int)gridDim.x < nitems ? (int)(gridDim.x + atomicAdd(p.work, 1u)) : nitems;
        for (int ii = 0;; ii++) {
            int item = F8 ? (int)blockIdx.x : (int)(blockIdx.y * gridDim.x + blockIdx.x);
            if constexpr (F8) {
                /* the consumers are done with the Q tile of item ii - 1 and with sItem[ii % 2] */
                qattn_mbar_wait(QATTN_SPW_QEMPTY, (uint32_t)(ii & 1) ^ 1u);
                if (ii > 0) {
                    if (tid == 0) {
                        sItem[ii & 1] = nxt;
                        if (nxt < nitems)
                            nxt = (int)(gridDim.x + atomicAdd(p.work, 1u));
                    }
                    qattn_bar_sync<3, 256>();
                    item = sItem[ii & 1];
                } else if (tid == 0) {
                    sItem[0] = item;
                }
                if (item >= nitems) { /* none left: the consumers learn it from sItem */
                    qattn_mbar_arrive(QATTN_SPW_QFULL);
                    if (tid == 0) { /* the last CTA out zeroes the counter for the next launch */
                        __threadfence();
                        if (atomicAdd(p.work + 1, 1u) == gridDim.x - 1)
                            p.work[0] = 0u, p.work[1] = 0u;
                    }
                    break;
                }
            }
            const int t = item / per_tok, g = item % per_tok / tiles, r0 = item % tiles * QATTN_SPW_ROWS;
            const int32_t *list = p.idx + (int64_t)t * p.topk;
            const int len = p.len ? (p.len[t] < p.topk ? p.len[t] : p.topk) : p.topk;
            const int nblk = (len + KEYS - 1) / KEYS;
            /* the Q tile (the consumers' last blocks and epilogue of the item before hide its copy, and
             * for F8 its quantization) */
            if (wg == 0) {
                const uint16_t *qt = (const uint16_t *)p.q + (int64_t)t * p.q_st;
#pragma unroll 8
                for (int i = 0; i < QATTN_SPW_ROWS / 2; i++) {
                    const int r = 2 * i + rh, ok = r0 + r < grp;
                    qattn_cp_async16(smem + qattn_wg_off<1024, 64>(r, pc),
                                     qt + (ok ? (int64_t)(g * grp + r0 + r) * p.q_sh : 0) + pc * 8, ok ? 16 : 0);
                }
                qattn_cp_async_mbar_arrive(F8 ? QATTN_SPW_QLAND : QATTN_SPW_QFULL);
            }
            if constexpr (F8) {
                /* fp8 rows, two producer warpgroups (8 warps), each warp on its own rows with no barrier
                 * between warps: warp w owns rows 16 qq + 2w, 2w + 1 of every block (qq = 0..3), four
                 * lanes a row. Lane l takes row l / 4 of the warp's eight and of that row the pieces of
                 * 16 codes 4k + l % 4 (k = 0..6: one in each 64-channel group, whose scale is byte k of
                 * the row's 8), so a block's 224 pieces are 7 a lane with no lane idle. Each lane finds
                 * its row's key (list, page table) two blocks ahead, in registers; loads the block's
                 * codes and scale bytes while the block before is consumed; once the stage is free,
                 * sends two of its row's rope pieces by cp.async straight into the tile's last slab
                 * (arriving on the stage's full barrier as they land) and widens its codes into the
                 * tile. A quarter warp's rows 2m, 2m + 1 swizzle by different low bits, so its 16-byte
                 * stores fill 8 distinct bank groups. */
                const int pt = (wg ? 128 : 0) + wt, lane = wt & 31, w = pt >> 5, kr = lane >> 2, pq = lane & 3;
                const int krow = 16 * (kr >> 1) + 2 * w + (kr & 1); /* this lane's row of a block */
                auto entry = [&](int jb) { /* the list entry of this lane's row of block jb (-1: none) */
                    const int e = jb * KEYS + krow;
                    return jb < nblk && e < len ? list[e] : -1;
                };
                auto page_of = [&](int pos) { /* the pool page of position pos (0 outside the pool) */
                    return pos >= 0 ? qattn_spw_page_of(p, pos) : 0;
                };
                auto key_of = [&](int pos, int page) { /* row index << 1 | ext (32 bits: checked at launch), -1: none */
                    int ext = 0;
                    return pos < 0 ? -1 : (int)(qattn_spw_page_row(p, (uint32_t)pos, page, g, &ext) << 1) | ext;
                };
                const uint8_t *const val0 = (const uint8_t *)p.kv.pool.val, *const val1 = (const uint8_t *)p.kv.ext.val;
                const uint8_t *const sc0 = p.kv.pool.sc, *const sc1 = p.kv.ext.sc;
                auto addr_of = [&](int key, uint64_t &ca, uint64_t &sa) { /* 0: a hole */
                    const uint64_t ri = (uint32_t)(key >> 1);
                    ca = key < 0 ? 0 : (uint64_t)(key & 1 ? val1 : val0) + ri * QATTN_SPW_DN;
                    sa = key < 0 ? 0 : (uint64_t)(key & 1 ? sc1 : sc0) + ri * QATTN_SPW_SCR;
                };
                /* this lane's row of blocks j + 1 and j + 2 (keys, code and scale addresses); kb0: block j's */
                int kb0 = -1, kb1, kb2;
                uint64_t cb1, cb2, sb1, sb2;
                {
                    const int e0 = entry(0), e1 = entry(1);
                    kb1 = key_of(e0, page_of(e0));
                    kb2 = key_of(e1, page_of(e1));
                    addr_of(kb1, cb1, sb1);
                    addr_of(kb2, cb2, sb2);
                }
                int pos_next = entry(2);
                /* the scheme's Q (e4m3 codes with an e8m0 scale per 64 nope channels) in place, per (row,
                 * 64-channel slab); 8 threads: 8 rows of a slab, 8 distinct bank groups. The lookups
                 * above pass under the tile's copy */
                qattn_mbar_wait(QATTN_SPW_QLAND, (uint32_t)ii & 1u);
                for (int it = pt; it < QATTN_SPW_ROWS * 7; it += 256) {
                    const int r = it & 63, sl = it >> 6;
                    uint32_t u[32];
#pragma unroll
                    for (int ch = 0; ch < 8; ch++) {
                        const uint4 q = *(const uint4 *)(smem + qattn_wg_off<1024, 64>(r, 8 * sl + ch));
                        u[4 * ch] = q.x, u[4 * ch + 1] = q.y, u[4 * ch + 2] = q.z, u[4 * ch + 3] = q.w;
                    }
                    qattn_spw_quant_slab(u);
#pragma unroll
                    for (int ch = 0; ch < 8; ch++)
                        *(uint4 *)(smem + qattn_wg_off<1024, 64>(r, 8 * sl + ch)) =
                            make_uint4(u[4 * ch], u[4 * ch + 1], u[4 * ch + 2], u[4 * ch + 3]);
                }
                qattn_fence_proxy_async_smem(); /* read by wgmma */
                qattn_mbar_arrive(QATTN_SPW_QFULL);
                const int dst_off = qattn_wg_off<1024, 64>(krow, 2 * pq); /* piece k: + k slabs; its second half ^ 16 */
                uint4 cw[7];    /* the codes of piece 4k + pq at k */
                uint32_t sw[2]; /* the row's scale codes: k's is byte k & 3 of sw[k >> 2] */
                auto load = [&]() { /* block j + 1's pieces, from cb1 / sb1 (a hole's: zero codes, scale 1) */
                    const uint2 s8 = sb1 ? __ldg((const uint2 *)sb1) : make_uint2(0x7f7f7f7fu, 0x7f7f7f7fu);
                    sw[0] = s8.x, sw[1] = s8.y;
#pragma unroll
                    for (int k = 0; k < 7; k++)
                        cw[k] = cb1 ? __ldg((const uint4 *)(cb1 + 16 * (4 * k + pq))) : make_uint4(0u, 0u, 0u, 0u);
                };
                load();
                for (int j = 0; j < nblk; j++) {
                    const uint32_t jj = jg + (uint32_t)j, s = jj & 1u;
                    uint8_t *dst = smem + QATTN_SPW_OFF_KV + s * QATTN_SPW_TILE;
                    kb0 = kb1, kb1 = kb2, cb1 = cb2, sb1 = sb2;
                    qattn_mbar_wait(QATTN_SPW_EMPTY(s), ((jj >> 1) & 1u) ^ 1u); /* the stage is free */
#pragma unroll
                    for (int i = 0; i < 2; i++) { /* rope pieces pq, pq + 4 of this lane's row */
                        const int pc8 = pq + 4 * i;
                        const uint16_t *src = (kb0 & 1 ? p.kv.ext.rope : p.kv.pool.rope) + (uint64_t)(uint32_t)(kb0 >> 1) * 64 + pc8 * 8;
                        qattn_cp_async16(dst + qattn_wg_off<1024, 64>(krow, 56 + pc8), kb0 >= 0 ? src : (const uint16_t *)p.q,
                                         kb0 >= 0 ? 16 : 0);
                    }
                    qattn_cp_async_mbar_arrive(QATTN_SPW_FULL(s));
                    const int page_next = page_of(pos_next); /* block j + 3's lookups: their latency passes under the widening */
                    qattn_spw_widen_pieces<7>(cw, sw, [&](int k, const qattn_spw_pair &v) {
                        *(uint4 *)(dst + k * SLAB + dst_off) = v.lo;
                        *(uint4 *)(dst + k * SLAB + (dst_off ^ 16)) = v.hi;
                    });
                    qattn_fence_proxy_async_smem(); /* the widened values, read by wgmma */
                    const uint32_t holes = __ballot_sync(0xffffffffu, pq == 0 && kb0 < 0);
                    if (lane == 0)
                        sHole[s][w] = holes; /* read by the consumers after the full barrier (it releases) */
                    qattn_mbar_arrive(QATTN_SPW_FULL(s));
                    kb2 = key_of(pos_next, page_next);
                    addr_of(kb2, cb2, sb2);
                    pos_next = entry(j + 3);
                    if (j + 1 < nblk)
                        load();
                }
            } else {
                /* a stage: the first 64 threads find their key's row (list, page table) into sRow, then
                 * the copies as for Q */
                for (int j = 0; j < nblk; j++) {
                    const uint32_t jj = jg + (uint32_t)j, s = jj & 1u;
                    uint32_t holes = 0; /* warps 0, 1: their keys' holes */
                    if (wt < KEYS) {
                        const int e = j * KEYS + wt;
                        const int pos = e < len ? list[e] : -1;
                        const uint16_t *src = NULL;
                        if (pos >= 0)
                            src = qattn_spw_row(p, pos, g);
                        sRow[s][wt] = src;
                        holes = __ballot_sync(0xffffffffu, src == NULL);
                    }
                    qattn_bar_sync<3, 128>(); /* also: every thread is done with sRow[s] of block jj - 2 */
                    qattn_mbar_wait(QATTN_SPW_EMPTY(s), ((jj >> 1) & 1u) ^ 1u);
                    if (wt == 0 || wt == 32) { /* the consumers of block jj - 2 are done with sHole[s] */
                        sHole[s][wt >> 5] = holes;
                        qattn_mbar_arrive(QATTN_SPW_FULL(s)); /* releases the store */
                    }
                    uint8_t *dst = smem + QATTN_SPW_OFF_KV + s * QATTN_SPW_TILE;
#pragma unroll 8
                    for (int i = 0; i < KEYS / 2; i++) {
                        const int r = 2 * i + rh;
                        const uint16_t *src = sRow[s][r];
                        qattn_cp_async16(dst + qattn_wg_off<1024, 64>(r, pc), src ? src + pc * 8 : (const uint16_t *)p.q,
                                         src ? 16 : 0);
                    }
                    qattn_cp_async_mbar_arrive(QATTN_SPW_FULL(s));
                }
            }
            jg += (uint32_t)nblk;
            if (!F8 || (int)gridDim.x >= nitems)
                break; /* a CTA an item: nothing to hand on */
        }
        return;
    }

    /* ================= consumers ================= */
    qattn_setmaxnreg_inc<F8 ? 176 : 232>();
    const int c = wg - 1, lane = tid & 31, wv = (tid >> 5) & 3, q4 = lane & 3;
    const int rowA = 16 * wv + (lane >> 2), rowB = rowA + 8;
    const float NEG = -INFINITY;
    const uint32_t aQ = qattn_wgmma_smem_addr(smem);
    uint32_t jg = 0; /* as the producers' */
    for (int ii = 0;; ii++) {
        qattn_mbar_wait(QATTN_SPW_QFULL, (uint32_t)ii & 1u); /* F8: quantized by the producers */
        const int item = F8 ? sItem[ii & 1] : (int)(blockIdx.y * gridDim.x + blockIdx.x);
        if (F8 && item >= nitems)
            break;
        const int t = item / per_tok, g = item % per_tok / tiles, r0 = item % tiles * QATTN_SPW_ROWS;
        const int len = p.len ? (p.len[t] < p.topk ? p.len[t] : p.topk) : p.topk;
        const int nblk = (len + KEYS - 1) / KEYS;
        float o[2][64];
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int e = 0; e < 64; e++)
                o[n][e] = 0.0f;
        float mA = NEG, mB = NEG, lA = 0.0f, lB = 0.0f;
        if (F8 && nblk == 0)
            qattn_mbar_arrive(QATTN_SPW_QEMPTY);
        for (int j = 0; j < nblk; j++) {
            const uint32_t jj = jg + (uint32_t)j, s = jj & 1u;
            const uint32_t aKV = aQ + QATTN_SPW_OFF_KV + (uint32_t)s * QATTN_SPW_TILE;
            uint8_t *sP = smem + QATTN_SPW_OFF_P + s * 8192;
            /* this thread's 8 columns of S (keys of the stage): 32c + 8i + 2 q4 + {0, 1} */
            qattn_mbar_wait(QATTN_SPW_FULL(s), (jj >> 1) & 1u);
            /* the producers' hole bits, in shared memory (the consumers' own list reads, on their path,
             * cost the fused kernel 6%): F8 key k is row 2 (k / 16) + k % 2 of warp k % 16 / 2. Read by
             * every lane (one lane reading and shuffling, after the Q.K's issue, ran 3% slower) */
            int valid[4][2];
            const uint32_t hw[2] = {sHole[s][F8 ? q4 : c], F8 ? sHole[s][4 + q4] : 0u};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int x = 0; x < 2; x++)
                    valid[i][x] = F8 ? !(hw[i & 1] >> (16 * c + 8 * (i >> 1) + 4 * x) & 1u)
                                     : !(hw[0] >> (8 * i + 2 * q4 + x) & 1u);
            qattn_fence_proxy_async_smem(); /* cp.async (generic proxy) data read by wgmma (async proxy) */
            float sc[16];
#pragma unroll
            for (int e = 0; e < 16; e++)
                sc[e] = 0.0f;
            qattn_wgmma_fence();
            /* each product's descriptors made once, just before it (in the loop they were a quarter of
             * the bf16 kernel's instructions); a k-step adds its offset to the low word */
            const qattn_wgmma_desc_words dq = qattn_wgmma_desc_split(qattn_wgmma_desc_sw128(aQ));
            const qattn_wgmma_desc_words dk = qattn_wgmma_desc_split(qattn_wgmma_desc_sw128(aKV + (uint32_t)c * 32u * 128u));
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                const uint32_t k0 = ((uint32_t)(kk >> 2) * SLAB + (uint32_t)(kk & 3) * 32u) >> 4;
                qattn_wgmma_m64n32k16_bf16_ss(sc, qattn_wgmma_desc_at(dq, k0), qattn_wgmma_desc_at(dk, k0), kk > 0);
            }
            qattn_wgmma_commit();
            qattn_wgmma_wait<0>();
#pragma unroll
            for (int e = 0; e < 16; e++)
                qattn_wgmma_fence_reg(sc[e]);
            if (F8 && j == nblk - 1) /* the item's last Q.K: the producers may load the next Q tile */
                qattn_mbar_arrive(QATTN_SPW_QEMPTY);
            /* scores in base 2, holes -inf; this half's row maxima */
            float xA = NEG, xB = NEG;
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int x = 0; x < 2; x++) {
                    sc[4 * i + x] = valid[i][x] ? sc[4 * i + x] * p.c2 : NEG;
                    sc[4 * i + 2 + x] = valid[i][x] ? sc[4 * i + 2 + x] * p.c2 : NEG;
                    xA = fmaxf(xA, sc[4 * i + x]);
                    xB = fmaxf(xB, sc[4 * i + 2 + x]);
                }
            xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 1));
            xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 2));
            xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 1));
            xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 2));
            float *mx = red + s * 128; /* [2 halves][64 rows] of this stage */
            if (q4 == 0)
                mx[64 * c + rowA] = xA, mx[64 * c + rowB] = xB;
            qattn_bar_sync<1, 256>();
            const float nA = fmaxf(mA, fmaxf(xA, mx[64 * (1 - c) + rowA]));
            const float nB = fmaxf(mB, fmaxf(xB, mx[64 * (1 - c) + rowB]));
            const float uA = nA == NEG ? 0.0f : nA, uB = nB == NEG ? 0.0f : nB; /* no key yet: exp2(-inf) = 0 */
            const float alA = qattn_ex2_approx(mA - uA), alB = qattn_ex2_approx(mB - uB);
            float sA = 0.0f, sB = 0.0f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float p0 = qattn_ex2_approx(sc[4 * i] - uA), p1 = qattn_ex2_approx(sc[4 * i + 1] - uA);
                const float p2 = qattn_ex2_approx(sc[4 * i + 2] - uB), p3 = qattn_ex2_approx(sc[4 * i + 3] - uB);
                sA += p0 + p1, sB += p2 + p3;
                const int col = 32 * c + 8 * i + 2 * q4;
                *(uint32_t *)(sP + qattn_sw128(rowA, col >> 3) + (col & 7) * 2) = qattn_cvt_bf16x2_f32(p0, p1);
                *(uint32_t *)(sP + qattn_sw128(rowB, col >> 3) + (col & 7) * 2) = qattn_cvt_bf16x2_f32(p2, p3);
            }
            lA = lA * alA + sA, lB = lB * alB + sB;
            mA = nA, mB = nB;
            qattn_fence_proxy_async_smem(); /* P's stores read by wgmma */
            qattn_bar_sync<2, 256>();
            if (!__all_sync(0xffffffffu, alA == 1.0f && alB == 1.0f)) /* the warp's rows kept their maxima: O stays */
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int i = 0; i < 16; i++) {
                        o[n][4 * i] *= alA, o[n][4 * i + 1] *= alA;
                        o[n][4 * i + 2] *= alB, o[n][4 * i + 3] *= alB;
                    }
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 64; e++)
                    qattn_wgmma_fence_reg(o[n][e]);
            qattn_wgmma_fence();
            const qattn_wgmma_desc_words dp = qattn_wgmma_desc_split(qattn_wgmma_desc_sw128(aQ + QATTN_SPW_OFF_P + (uint32_t)s * 8192u));
            const qattn_wgmma_desc_words dv = qattn_wgmma_desc_split(qattn_wgmma_desc_sw128_mn(aKV + (uint32_t)(4 * c) * SLAB, SLAB));
#pragma unroll
            for (int kk = 0; kk < KEYS / 16; kk++)
#pragma unroll
                for (int n = 0; n < 2; n++)
                    qattn_wgmma_m64n128k16_bf16_ss_tb(o[n], qattn_wgmma_desc_at(dp, 2u * kk),
                                                      qattn_wgmma_desc_at(dv, ((uint32_t)(2 * n) * SLAB + (uint32_t)kk * 2048u) >> 4));
            qattn_wgmma_commit();
            qattn_wgmma_wait<0>();
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 64; e++)
                    qattn_wgmma_fence_reg(o[n][e]);
            if (!F8)
                __syncwarp();
            if (F8 || lane == 0)
                qattn_mbar_arrive(QATTN_SPW_EMPTY(s));
        }
        jg += (uint32_t)nblk;
        /* the two halves' sums, the sink, the output */
        lA += __shfl_xor_sync(0xffffffffu, lA, 1);
        lA += __shfl_xor_sync(0xffffffffu, lA, 2);
        lB += __shfl_xor_sync(0xffffffffu, lB, 1);
        lB += __shfl_xor_sync(0xffffffffu, lB, 2);
        float *ls = red + 256;
        if (F8)
            qattn_bar_sync<1, 256>(); /* both halves have read the item before's sums */
        if (q4 == 0)
            ls[64 * c + rowA] = lA, ls[64 * c + rowB] = lB;
        qattn_bar_sync<1, 256>();
        lA = ls[rowA] + ls[64 + rowA];
        lB = ls[rowB] + ls[64 + rowB];
#pragma unroll
        for (int x = 0; x < 2; x++) {
            const int hr = r0 + (x ? rowB : rowA);
            if (hr >= grp)
                continue;
            const int h = g * grp + hr;
            const float m = x ? mB : mA;
            float l = x ? lB : lA;
            const int empty = m == NEG;
            const float sink = p.sink ? p.sink[h] : NEG;
            if (p.sink && !empty)
                l += qattn_ex2_approx(sink * 1.44269504088896340736f - m);
            const float inv = empty ? 0.0f : 1.0f / l;
            if (p.out == QATTN_FMT_BF16) { /* the row's address once: the stores then differ by constants */
                uint16_t *orow = (uint16_t *)p.o + (int64_t)t * p.o_st + (int64_t)h * p.o_sh + 256 * c + 2 * q4;
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int i = 0; i < 16; i++)
                        *(uint32_t *)(orow + 128 * n + 8 * i) =
                            qattn_cvt_bf16x2_f32(o[n][4 * i + 2 * x] * inv, o[n][4 * i + 2 * x + 1] * inv);
            } else {
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int i = 0; i < 16; i++) {
                        const int col = 256 * c + 128 * n + 8 * i + 2 * q4;
                        qattn_sparse_put(p, t, h, col, o[n][4 * i + 2 * x] * inv);
                        qattn_sparse_put(p, t, h, col + 1, o[n][4 * i + 2 * x + 1] * inv);
                    }
            }
            if (c == 0 && q4 == 0 && p.lse)
                p.lse[(int64_t)h * p.sq + t] = empty ? sink : (m + log2f(l)) * 0.69314718055994530942f;
        }
        if (!F8 || (int)gridDim.x >= nitems)
            break;
    }
#undef QATTN_SPW_FULL
#undef QATTN_SPW_EMPTY
#undef QATTN_SPW_QFULL
#undef QATTN_SPW_QEMPTY
#undef QATTN_SPW_QLAND
#else
    (void)p;
#endif
}

template <int F8>
static int qattn_sparse_wgmma_launch(const qattn_kernels_sparse_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_sparse_params p = *pp;
    if (F8 && p.qquant_table) { /* test: the in-kernel Q quantization of given slabs */
        if (qattn_kernels_dev_cc() != 90)
            return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED, "sparse wgmma: needs an sm_90 GPU");
        if (p.qquant_n > 0)
            hipLaunchKernelGGL(qattn_sparse_qquant_table_kernel, dim3((unsigned)((p.qquant_n + 127) / 128)), dim3(128), 0,
                               (hipStream_t)stream, p.qquant_table, p.qquant_n);
        QATTN_DECODE_CHECK(hipGetLastError(), "sparse Q quantization table launch");
        return QATTN_OK;
    }
    if (F8 && p.widen_table) { /* test: the producer's widening of every code and scale */
        if (qattn_kernels_dev_cc() != 90)
            return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED, "sparse wgmma: needs an sm_90 GPU");
        hipLaunchKernelGGL(qattn_sparse_widen_table_kernel, dim3(256), dim3(32), 0, (hipStream_t)stream, p.widen_table);
        QATTN_DECODE_CHECK(hipGetLastError(), "sparse widen table launch");
        return QATTN_OK;
    }
    int rc = qattn_sparse_check_params(p, QATTN_SPW_D, err);
    if (rc)
        return rc;
    if (p.kv.fp8 != F8 || p.q_fp8 != F8 || p.in != QATTN_FMT_BF16 || (F8 && p.rope != 64))
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse wgmma: bf16 queries and %s rows only", F8 ? "fp8 (rope 64)" : "bf16");
    if ((p.q_sh | p.q_st | p.o_sh | p.o_st) & 7)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse wgmma: query and output strides must be multiples of 8");
    if (F8 && (((uintptr_t)p.kv.pool.val | (uintptr_t)p.kv.ext.val | (uintptr_t)p.kv.pool.rope | (uintptr_t)p.kv.ext.rope) & 15 ||
               ((uintptr_t)p.kv.pool.sc | (uintptr_t)p.kv.ext.sc) & 7))
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse wgmma: fp8 cache arrays must be 16-byte aligned (scales 8)");
    if (F8 && !p.work)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse wgmma: the fp8 kernel needs its item counter (params work)");
    if (p.kv.prefix > 0 && p.div_page.d != (uint32_t)p.kv.page)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse wgmma: div_page (%u) is not the cache's page size (%d)",
                             p.div_page.d, p.kv.page);
    if (F8 && ((p.kv.pool.rows + p.kv.ext.rows) * p.kv.hkv >= ((int64_t)1 << 30) || p.kv.sk >= ((int64_t)1 << 30)))
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "sparse wgmma: fp8 rows are indexed in 32 bits (at most 2^30 rows x kv heads)");
    const int cc = qattn_kernels_dev_cc();
    if (cc != 90 || !strstr(QATTN_KERNELS_ARCHS, "sm_90a"))
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "sparse wgmma: needs an sm_90 GPU and a build for sm_90a (GPU sm_%d, built for %s)", cc,
                             QATTN_KERNELS_ARCHS);
    if (p.sq == 0)
        return QATTN_OK;
    const int tiles = (p.hq / p.hkv + QATTN_SPW_ROWS - 1) / QATTN_SPW_ROWS;
    const int64_t nitems = (int64_t)p.hkv * tiles * p.sq;
    if (!F8 && p.sq > 65535)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse wgmma: %d query tokens (at most 65535 a call)", p.sq);
    if (nitems > ((int64_t)1 << 30))
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse wgmma: %lld (token, kv head, tile) items (at most 2^30)",
                             (long long)nitems);
    void (*k)(qattn_kernels_sparse_params) = &qattn_sparse_wgmma_kernel<F8>;
    QATTN_DECODE_CHECK(hipFuncSetAttribute((const void *)k, hipFuncAttributeMaxDynamicSharedMemorySize,
                                           QATTN_SPW_SMEM),
                       "sparse wgmma: raising the shared-memory limit");
    /* fused: persistent, a CTA a multiprocessor (one fits); bf16: a CTA an item */
    int dev = 0, sms = 0;
    QATTN_DECODE_CHECK(hipGetDevice(&dev), "sparse wgmma: the current device");
    QATTN_DECODE_CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, dev),
                       "sparse wgmma: the multiprocessor count");
    const dim3 grid = F8 ? dim3((unsigned)(nitems < sms ? nitems : sms > 1 ? sms : 1))
                         : dim3((unsigned)(p.hkv * tiles), (unsigned)p.sq);
    hipLaunchKernelGGL(k, grid, dim3(QATTN_SPW_THREADS(F8)), QATTN_SPW_SMEM, (hipStream_t)stream, p);
    QATTN_DECODE_CHECK(hipGetLastError(), "sparse wgmma kernel launch");
    return QATTN_OK;
}

/* one instance: F8 0 (bf16 rows: the bf16 and prepass variants) or 1 (fp8 rows: fused) */
#define QATTN_SPARSE_WGMMA_INSTANCE(F8, NAME)                                               \
    extern "C" int NAME(const qattn_kernels_sparse_params *p, void *stream, qattn_err *err) \
    {                                                                                       \
        return qattn_sparse_wgmma_launch<F8>(p, stream, err);                               \
    }

#endif
