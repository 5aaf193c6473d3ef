/* Decode family, NVIDIA mma.sync path (code sm_80+, e4m3 caches sm_89+; registered for sm_90,
 * whose 227 KiB of shared memory the rings need): split-KV
 * over a paged cache on the tensor cores, for decode's memory-bound shapes.
 *
 * A block (8 warps) owns one kv head of one sequence, 16 packed query rows
 * (row r = token (r / grp), q head hk * grp + r % grp: GQA packing, so a
 * decode step's 8 heads share one read of the cache) and one split. The
 * split's keys go in chunks (16 keys, 32 for 8-bit caches) round robin to
 * the warps; each warp keeps its own online softmax over its chunks and its
 * own cp.async ring (3 chunks deep) of K and V rows, found through the
 * block table key by key. Per chunk:
 * S = Q K^T (m16n8k16, B fragments by ldmatrix from the K rows), times c2
 * (and the key's scale for 8-bit caches), masked, base-2 online softmax
 * with ex2.approx, P rounded to the MMA type (V's per-token scale folded
 * into P), O += P V (ldmatrix .trans of the V rows). The warps' states
 * merge through shared memory at the end; o and lse go out as the portable
 * kernel writes them (num_splits = 1), or as partials for the combine.
 *
 * Types: a 16-bit cache runs in its dtype (the query's); an 8-bit cache
 * (int8, e4m3; scales per token) runs in fp16: codes widened exactly in
 * registers (K as words of 4 codes, V from ldmatrix .trans of code pairs,
 * O's columns permuted; int4 at d = 128 the same way, words of 8 codes and
 * code quads), bf16 queries converted to fp16 (exact in
 * fp16's normal range, |q| in [2^-14, 65504]). Differs from the emulation by
 * P's rounding (2^-9 bf16, 2^-12 fp16 relative) and ex2.approx. */
#ifndef QATTN_KERNELS_DECODE_MMA_H
#define QATTN_KERNELS_DECODE_MMA_H

#include <limits.h> /* INT_MIN, INT_MAX: the rows past a tile */

#include "decode_combine.h"
#include "decode_mma_frag.h" /* packing, widening, Q's fragments */
#include "decode_portable.h"
#include "mma_nvidia.h"

#define QATTN_DMMA_ROWS 16  /* packed query rows per block */

/* shared memory of one warp: ST x (K, V) chunks as loaded, rows of RAW_ROW bytes whose 16-byte
 * pieces are swizzled (qattn_dmma_swz) so that ldmatrix's eight rows fall in distinct banks. Rows
 * padded by 16 bytes instead (before 2026-11-29) left the copies' shared-memory lines across
 * 128-byte boundaries: the L2 then saw 2.6x the requests and 1.5x the sectors of the loads
 * (the extra ones hits; ncu, H200, bf16 131072:4:8) */
template <int D, int CF, int W8 = 0>
struct qattn_dmma_layout {
    static const int ELT = (CF == QATTN_FMT_FP16 || CF == QATTN_FMT_BF16) ? 2 : 1; /* 16-bit (2) or coded (1) */
    static const int I4 = CF == QATTN_FMT_INT4;      /* int4 codes, two a byte */
    static const int QP = qattn_dmma_qperm<CF>::value; /* Q's channel order (decode_mma_frag.h) */
    /* warps a block (two per scheduler at least: one warp alone stalls on its own latencies);
     * keys per chunk and chunks in flight per warp, the rings within 227 KiB at d = 128: 16-bit
     * caches 8 warps, 16 x 3; 8-bit ones 12 warps, 32 x 2 (their widening's dependent chains
     * want a third warp a scheduler more than a third chunk: 1.02-1.09x 8 warps of 32 x 3 at
     * the plan's splits, 1.10-1.22x with one split, 0.95x at batch 1 with 128 splits; H200,
     * 2026-11-28, kernels/LOG.md); W8: 8-bit caches in 8 warps of 32 x 3, for splits whose keys
     * would leave 12 warps at most a chunk each. int4 (half the bytes a chunk): 4 chunks in flight
     * in 12 warps, 3 in 8, so that a block keeps about as many bytes in flight as the others */
    static const int NW = ELT == 2 || W8 ? 8 : 12;
    static const int KC = ELT == 2 ? 16 : 32;
    static const int ST = I4 ? (W8 ? 3 : 4) : ELT == 2 || W8 ? 3 : 2;
    static const int RAW_ROW = I4 ? D / 2 : D * ELT; /* bytes per loaded row (64, or a multiple of 128) */
    static const int RAW_CHUNK = KC * RAW_ROW;
    static const int SCALES = ELT == 2 ? 0 : 2 * KC * 4; /* the chunk's K and V scales */
    static const int STAGE = 2 * RAW_CHUNK + SCALES;
    static const int WARP = ST * STAGE; /* 8-bit K and V are widened in registers */
    /* the merge, per warp: O, m, l of 16 rows in fp32, rows 16-byte aligned, padded so that
     * the stores of O's fragments fall in distinct banks (16-bit: float2 of rows g at 8 g words;
     * 8-bit: float4 of 4 channels, rows g and g + 1 of a quarter warp 16 words apart; int4: float4 at
     * 8 t4 words, rows g and g + 1 4 words apart) */
    static const int MERGE_ROW = D + (ELT == 2 ? 8 : I4 ? 4 : 16);
    static const int MERGE_ALL = NW * QATTN_DMMA_ROWS * MERGE_ROW * 4;
    static const int RINGS = NW * WARP;
    static const int QROW = D * 2 + 16; /* a staged 16-bit Q row, padded by 16 bytes (read once) */
    static const int RESULT = QATTN_DMMA_ROWS * (D + 1) * 4; /* a split's o and lse, for a cluster's combine */
    /* the rings and staged Q start at the first 128-byte boundary of the dynamic shared memory */
    static const int BYTES = (RINGS + QATTN_DMMA_ROWS * QROW > MERGE_ALL + RESULT ? RINGS + QATTN_DMMA_ROWS * QROW
                                                                               : MERGE_ALL + RESULT) +
                             128;
};

/* L2 prefetch (sm_90 bulk prefetches) of the K and V pages of split sp of sequence b, before the
 * previous kernel is done: page ids clamped into the pool, so that a stale length or table entry
 * only prefetches another page (griddepcontrol.wait makes the previous grid's writes visible to
 * the loads after it). A page's rows of every kv head are contiguous: the blocks of kv heads
 * hk = 0 .. hkv - 1 (row tile 0) prefetch whole pages hk, hk + hkv, ... of their split, so that
 * their union is the split's first pages once. Reading them with ld.cg measured slower (H100) */
template <int ROWB>
static __device__ __forceinline__ void qattn_dmma_prefetch_split(const qattn_kernels_decode_params &p, int b, int sp,
                                                                 int hk, int rt)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (!p.l2_prefetch || rt != 0 || p.cache.num_pages <= 0)
        return;
    const int cap = p.cache.max_pages * p.cache.page_size, len = p.cache.len[b], sk = len < cap ? len : cap;
    if (sk <= 0)
        return;
    unsigned a, e;
    qattn_decode_split_keys(p, (unsigned)sk, (unsigned)sp, &a, &e);
    if (e <= a)
        return;
    const unsigned pg0 = qattn_fastdiv(p.div_page, a), pg1 = qattn_fastdiv(p.div_page, e - 1);
    const unsigned ps = (unsigned)p.cache.page_size, rowb = (unsigned)ROWB, hkv = (unsigned)p.hkv;
    const int32_t *table = p.cache.table + (int64_t)b * p.cache.max_pages;
    /* one bulk prefetch a page and operand: the first l2_prefetch x hkv bytes (K and V) of the
     * split over the hkv blocks (l2_prefetch: a block's share of half the L2) */
    const unsigned n = min(pg1 - pg0 + 1, p.l2_prefetch / (2 * rowb * ps));
    const unsigned bytes = ps * rowb * hkv;
    for (unsigned j = (unsigned)hk + threadIdx.x * hkv; j < n; j += blockDim.x * hkv) {
        int64_t id = table[pg0 + j];
        id = id < 0 ? 0 : id >= p.cache.num_pages ? p.cache.num_pages - 1 : id;
        const int64_t off = id * (int64_t)bytes;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"((const char *)p.cache.k + off), "r"(bytes)
                     : "memory");
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"((const char *)p.cache.v + off), "r"(bytes)
                     : "memory");
    }
#else
    (void)p, (void)b, (void)sp, (void)hk, (void)rt;
#endif
}

#ifdef QATTN_DECODE_STAMPS
/* the timeline's clocks (params stamps): the global nanosecond timer, the multiprocessor's cycle counter
 * and its id; zeros in the host simulation */
static __device__ __forceinline__ unsigned long long qattn_dmma_now_ns(void)
{
    unsigned long long t = 0;
#ifdef __CUDA_ARCH__
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
#endif
    return t;
}
static __device__ __forceinline__ unsigned long long qattn_dmma_now_clock(void)
{
#ifdef __CUDA_ARCH__
    return (unsigned long long)clock64();
#else
    return 0ull;
#endif
}
static __device__ __forceinline__ unsigned qattn_dmma_smid(void)
{
    unsigned id = 0;
#ifdef __CUDA_ARCH__
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
#endif
    return id;
}
#endif

/* SPEC: the speculative prologue compiled in (p.spec; a second instance, so that the other one's code
 * stays as it was: the spec path's mere presence cost 1-3% at full grids) */
template <int D, int CF, int QT, int SPEC, int W8, int SHARE>
__global__ void __launch_bounds__(qattn_dmma_layout<D, CF, W8>::NW * 32) qattn_decode_mma_kernel(qattn_kernels_decode_params p)
{
    typedef qattn_dmma_layout<D, CF, W8> L;
    const int KC = L::KC, ST = L::ST, NW = L::NW;
    const int NJ = KC / 8, NK = KC / 16; /* n-tiles of S, k-blocks of P */
    const int PPR = L::RAW_ROW / 16; /* 16-byte pieces per loaded row */
    const int NT = D / 8;            /* n-tiles of O */
    extern __shared__ __align__(16) unsigned char qattn_dmma_smem[];
    qattn_port_dependents_go(); /* the combine may launch now; it waits for this grid before reading */
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const int grp = (int)p.div_grp.d;
    const int rt = (int)qattn_fastdiv(p.div_hkv, blockIdx.x), hk = (int)blockIdx.x - rt * p.hkv;
    /* packed row r: token r / grp, q head hk grp + r % grp */
    auto tok_of = [&](int r) -> int { return (int)qattn_fastdiv(p.div_grp, (unsigned)r); };
    const int b = (int)blockIdx.y, sp = (int)blockIdx.z;
    /* the timeline (p.stamps), in builds with QATTN_DECODE_STAMPS only (in every build the stores cost
     * the kernels 2-4%, H200 2026-12-01): thread 0 stamps phase i */
#ifdef QATTN_DECODE_STAMPS
    unsigned long long *const stamps =
        p.stamps ? p.stamps + ((int64_t)blockIdx.x + (int64_t)gridDim.x * (blockIdx.y + (int64_t)gridDim.y * blockIdx.z)) *
                                  QATTN_KERNELS_DECODE_STAMPS
                 : 0;
    auto stamp = [&](int i) {
        if (stamps && threadIdx.x == 0) {
            stamps[i] = qattn_dmma_now_ns();
            stamps[QATTN_KERNELS_DECODE_STAMP_CLOCK + i] = qattn_dmma_now_clock();
        }
    };
#else
    auto stamp = [](int) {};
#endif
    stamp(0);
    /* launched overlapping the previous kernel of the stream (a decode step's combine): its
     * blocks are resident and set up; nothing global is used before it is done, but the
     * split's cache pages are prefetched into L2 meanwhile (addresses from the lengths and
     * table as they are now: a stale value only prefetches another page) */
    qattn_dmma_prefetch_split<L::RAW_ROW>(p, b, sp, hk, rt);
    /* speculation (p.spec, fixed query rows): the length and the first chunks' table entries are
     * read before the wait too, so that the first copies issue right after it; the values they came
     * from are read again after it, beside the copies, and a warp whose values changed waits for its
     * copies and issues them again (p.spec 2 / 3: the length / rows spoiled, to test that path) */
    const int spec = SPEC && p.spec && !p.cu_q && rt * QATTN_DMMA_ROWS < p.seqlen_q * grp;
    /* SHARE (no speculation; p.share = sn, the splits of a cluster: all the tile's with the cluster's
     * combine, else 2): a cluster's blocks take their splits' chunks, each warp its first ST + 1 by
     * a fixed rule and the rest from a counter in rank 0's shared memory, so that a block that
     * streams faster takes more (a combine weighs whatever keys each block saw) */
    const int sn = SHARE ? p.share : 1, srank = SHARE ? sp % sn : 0;
    __shared__ uint32_t shared_next; /* SHARE, rank 0's: the tile's chunks taken from the counter */
    const int cap = p.cache.max_pages * p.cache.page_size;
    int sk32 = 0;
    if (spec) {
        const int len = p.cache.len[b] + (p.spec == 2);
        sk32 = len < cap ? len : cap;
    }
    if (!spec) {
        qattn_port_wait_prior();
        stamp(1);
    }
    int64_t tq0, tu0;
    int sq;
    qattn_decode_rows(p, b, &tq0, &tu0, &sq);
    const int nrows = sq * grp, r0 = rt * QATTN_DMMA_ROWS;
    if (r0 >= nrows)
        return;
    if constexpr (SHARE) { /* the counter at 0 before any block of the cluster takes from it */
        if (threadIdx.x == 0 && qattn_cluster_rank() == 0)
            shared_next = 0u;
        qattn_cluster_arrive();
    }
    if (!spec)
        sk32 = p.cache.len[b];
    auto q_at = [&](int r) -> int64_t {
        const int i = tok_of(r);
        return (int64_t)b * p.q_sb + (tu0 + i) * p.q_st + (int64_t)(hk * grp + r - i * grp) * p.q_sh;
    };
    /* Q of the 16 rows first (zeros for rows past the sequence): their latency runs under the
     * prologue and the cache's first lookups and copies. A 16-bit Q with 16-byte rows is
     * copied into shared memory by one cp.async a thread (its own commit group, the first);
     * else each lane loads its fragments' raw elements */
    const int qstage = p.in != QATTN_FMT_FP32 && (L::ELT == 1 || p.in == QT) &&
                       !(((uintptr_t)p.q & 15) | ((p.q_sb | p.q_st | p.q_sh) & 7));
    unsigned char *const rings = qattn_dmma_smem + ((128 - (unsigned)(uintptr_t)qattn_dmma_smem) & 127);
    unsigned char *qsm = rings + L::RINGS; /* [16][QROW] staged Q */
    uint32_t qx[D / 16][2][4];
    auto load_q = [&]() {
        if (qstage) {
            const int PR = D * 2 / 16, r = (int)threadIdx.x / PR, part = (int)threadIdx.x % PR;
            if (r < QATTN_DMMA_ROWS) {
                const int ok = r0 + r < nrows;
                const unsigned char *src = (const unsigned char *)p.q + (ok ? q_at(r0 + r) * 2 : 0) + part * 16;
                qattn_cp_async16(qsm + r * L::QROW + part * 16, src, ok ? 16 : 0);
            }
            qattn_cp_async_commit();
        } else {
            const int ra = r0 + g, rb = r0 + g + 8;
            const int64_t qa_at = ra < nrows ? q_at(ra) : 0, qb_at = rb < nrows ? q_at(rb) : 0;
            const int words = !(((uintptr_t)p.q & 3) | ((p.q_sb | p.q_st | p.q_sh) & 1));
            if (p.in == QATTN_FMT_BF16)
                qattn_dmma_fetch_q<D, L::QP, QATTN_FMT_BF16>(qx, p.q, qa_at, qb_at, ra < nrows, rb < nrows, t4, words);
            else if (p.in == QATTN_FMT_FP16)
                qattn_dmma_fetch_q<D, L::QP, QATTN_FMT_FP16>(qx, p.q, qa_at, qb_at, ra < nrows, rb < nrows, t4, words);
            else
                qattn_dmma_fetch_q<D, L::QP, QATTN_FMT_FP32>(qx, p.q, qa_at, qb_at, ra < nrows, rb < nrows, t4, words);
        }
    };
    if (!spec)
        load_q();
    /* the split's geometry for a length: the block's keys [kbeg, kend), its chunks, this lane's rows'
     * keys relative to kbeg (a row without keys: [0, 0); a row past the tile's: [INT_MIN, INT_MAX)) */
    int64_t kbeg = 0, kend = 0;
    int nchunk = 0, rlo32[2] = {0, 0}, rhi32[2] = {0, 0}, mine = 0; /* mine: chunks of this warp */
    unsigned kb32 = 0, ke32 = 0;                                     /* kbeg, kend: positions < 2^31 */
    auto geometry = [&](int len) {
        const int64_t sk = len;
        unsigned a32, e32;
        if constexpr (SHARE) { /* the keys of the cluster's splits, shared */
            unsigned a2, e2;
            qattn_decode_split_keys(p, (unsigned)len, (unsigned)(sp - srank), &a32, &e2);
            qattn_decode_split_keys(p, (unsigned)len, (unsigned)(sp - srank + sn - 1), &a2, &e32);
        } else {
            qattn_decode_split_keys(p, (unsigned)len, (unsigned)sp, &a32, &e32);
        }
        const int64_t a = a32, e = e32;
        int64_t rlo[2], rhi[2]; /* this lane's rows g and g + 8: their keys [lo, hi) within the split */
        for (int i = 0; i < 2; i++) {
            const int r = r0 + g + 8 * i;
            rlo[i] = 0, rhi[i] = 0;
            if (r < nrows) {
                qattn_num_mask_range(p.mask, tok_of(r), sq, sk, &rlo[i], &rhi[i]);
                rlo[i] = rlo[i] > a ? rlo[i] : a;
                rhi[i] = rhi[i] < e ? rhi[i] : e;
            }
        }
        /* the block's keys: the union over its tokens (masks are monotone in the token) */
        int64_t lo1, hi1;
        const int i0 = tok_of(r0), i1 = tok_of(r0 + QATTN_DMMA_ROWS - 1 < nrows ? r0 + QATTN_DMMA_ROWS - 1 : nrows - 1);
        qattn_num_mask_range(p.mask, i0, sq, sk, &kbeg, &hi1);
        qattn_num_mask_range(p.mask, i1, sq, sk, &lo1, &kend);
        kbeg = kbeg > a ? kbeg : a;
        kend = kend < e ? kend : e;
        nchunk = kend > kbeg ? (int)((kend - kbeg + KC - 1) / KC) : 0;
        mine = nchunk > warp ? (nchunk - warp + NW - 1) / NW : 0;
        kb32 = (unsigned)kbeg, ke32 = (unsigned)kend;
        for (int i = 0; i < 2; i++) { /* a row past the tile's: every key (its finite values never go out) */
            const int dead = r0 + g + 8 * i >= nrows;
            rlo32[i] = dead ? INT_MIN : rhi[i] > rlo[i] ? (int)(rlo[i] - kbeg) : 0;
            rhi32[i] = dead ? INT_MAX : rhi[i] > rlo[i] ? (int)(rhi[i] - kbeg) : 0;
        }
    };
    geometry(sk32);

    unsigned char *wsm = rings + warp * L::WARP;
    const unsigned rowb = (unsigned)L::RAW_ROW; /* bytes per stored row (a token's head) */
    const int part = lane % PPR;                   /* the 16-byte piece lane copies of each row */
    const unsigned char *kbase = (const unsigned char *)p.cache.k + part * 16;
    const unsigned char *vbase = (const unsigned char *)p.cache.v + part * 16;
    /* the pool row of (page, in-page row, hk): qattn_kernels_kv_row is linear in them, so its
     * strides, in 32 bits (pools of < 2^32 rows, the launch checks) */
    const int layout = p.cache.layout;
    const unsigned row_page = (unsigned)qattn_kernels_kv_row(layout, 1, p.cache.page_size, p.hkv, 0, 0),
                   row_off = (unsigned)qattn_kernels_kv_row(layout, 0, p.cache.page_size, p.hkv, 1, 0),
                   row_hk = (unsigned)qattn_kernels_kv_row(layout, 0, p.cache.page_size, p.hkv, 0, hk);
    const float *ksc = p.cache.k_scale ? p.cache.k_scale + ((int64_t)b * p.hkv + hk) * p.cache.k_ntok : 0;
    const float *vsc = p.cache.v_scale ? p.cache.v_scale + ((int64_t)b * p.hkv + hk) * p.cache.v_ntok : 0;
    const int32_t *table = p.cache.table + (int64_t)b * p.cache.max_pages;
    const unsigned ps = (unsigned)p.cache.page_size;

    /* lane's key of chunk c (and this block's kv head) through the block table in two steps: its
     * table entry and row within the page (~0 past the split), a chunk ahead of the copies, and the
     * pool row from them (~0 past the split; pools of < 2^32 rows, the launch checks) where the
     * copies issue. A pool row computed at the load waited there for the table's latency, once a
     * cache line of the table (ncu, H200, bf16 8192:8:8 with one split: 18% of the stall samples
     * with pages of 16, 2% with pages of 256; kernels/logs/h200_decode_table_2026-12-03.txt) */
    struct entry_t {
        unsigned page, off; /* the table entry; the row within the page (~0 past the split) */
    };
    auto entry = [&](int c) -> entry_t {
        const unsigned x = kb32 + (unsigned)c * KC + lane;
        if (x >= ke32)
            return {~0u, ~0u};
        const unsigned pg = qattn_fastdiv(p.div_page, x);
        return {(unsigned)table[pg], (x - pg * ps) * row_off + row_hk};
    };
    auto row_of = [&](entry_t e) -> unsigned { return e.off == ~0u ? ~0u : e.page * row_page + e.off; };
    /* issue the loads of chunk c (this warp's) into stage st; row from row_of(entry(c)). Lane copies
     * piece `part` of the rows of keys (32 i + lane) / PPR; only a split's last chunk has keys
     * past it (zero-filled) */
    auto issue = [&](int c, int st, unsigned row) {
        unsigned char *ks = wsm + st * L::STAGE, *vs = ks + L::RAW_CHUNK;
        const unsigned x = kb32 + (unsigned)c * KC + lane;
        if (L::SCALES && lane < KC) { /* lane's key's scales, 4 bytes each */
            const int ok = x < ke32;
            float *ss = (float *)(vs + L::RAW_CHUNK);
            qattn_cp_async4(ss + lane, ksc + (ok ? x : 0), ok ? 4 : 0);
            qattn_cp_async4(ss + KC + lane, vsc + (ok ? x : 0), ok ? 4 : 0);
        }
        if (kb32 + (unsigned)(c + 1) * KC <= ke32) {
#pragma unroll
            for (int i = 0; i < KC * PPR / 32; i++) {
                const int key = (i * 32 + lane) / PPR;
                const unsigned rr = __shfl_sync(0xffffffffu, row, key);
                const int at = key * L::RAW_ROW + qattn_dmma_swz<L::RAW_ROW>(key, part * 16);
                qattn_cp_async16(ks + at, kbase + (uint64_t)rr * rowb, 16);
                qattn_cp_async16(vs + at, vbase + (uint64_t)rr * rowb, 16);
            }
        } else {
#pragma unroll
            for (int i = 0; i < KC * PPR / 32; i++) {
                const int key = (i * 32 + lane) / PPR;
                unsigned rr = __shfl_sync(0xffffffffu, row, key);
                const int v = rr != ~0u;
                rr = v ? rr : 0u;
                const int at = key * L::RAW_ROW + qattn_dmma_swz<L::RAW_ROW>(key, part * 16);
                qattn_cp_async16(ks + at, kbase + (uint64_t)rr * rowb, v ? 16 : 0);
                qattn_cp_async16(vs + at, vbase + (uint64_t)rr * rowb, v ? 16 : 0);
            }
        }
    };

    float o[NT][4];
    for (int n = 0; n < NT; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    /* SHARE: the chunks of iterations it .. it + ST, (i sn + rank) NW + warp for i <= ST, then from
     * the counter (taken an iteration before its entry); a chunk past nchunk ends the warp's */
    int cq[ST + 1];
#pragma unroll
    for (int s = 0; s <= ST; s++)
        cq[s] = (s * sn + srank) * NW + warp;
    const entry_t none = {~0u, ~0u};
    entry_t pre[ST]; /* the first ST chunks' table entries, in flight together */
#pragma unroll
    for (int s = 0; s < ST; s++)
        pre[s] = (SHARE ? cq[s] < nchunk : s < mine) ? entry(SHARE ? cq[s] : warp + s * NW) : none;
    if constexpr (SPEC) {
        if (spec) {
            if (p.spec == 3) /* test: rows spoiled (page 0 exists in every pool) */
#pragma unroll
                for (int s = 0; s < ST; s++)
                    pre[s].page = pre[s].off == ~0u ? ~0u : 0u;
            qattn_port_wait_prior();
            stamp(1);
            load_q();
        }
    }
    auto first_copies = [&]() {
#pragma unroll
        for (int s = 0; s < ST - 1; s++) {
            if (SHARE ? cq[s] < nchunk : s < mine)
                issue(SHARE ? cq[s] : warp + s * NW, s, row_of(pre[s]));
            qattn_cp_async_commit();
        }
    };
    first_copies();
    if constexpr (SPEC) {
        if (spec) { /* the values the copies came from, again: a warp that sees a change redoes them */
            const int len = p.cache.len[b];
            int same = len == sk32;
#pragma unroll
            for (int s = 0; s < ST; s++)
                same &= (s < mine ? entry(warp + s * NW) : none).page == pre[s].page;
            if (!__all_sync(0xffffffffu, same)) {
                qattn_cp_async_wait<0>(); /* the stale copies land before their stages are written again */
                __syncwarp();
                sk32 = len;
                geometry(sk32);
#pragma unroll
                for (int s = 0; s < ST; s++)
                    pre[s] = s < mine ? entry(warp + s * NW) : none;
                first_copies();
            }
        }
    }
    stamp(2);
    /* chunk it + ST - 1's table entry at iteration it; SHARE: its pool row at once (with chunks from the
     * counter, rows computed where the copies issue ran 1.6-2.4% slower at 131072:4:8, 4 splits) */
    entry_t next = pre[ST - 1];
    unsigned next_row = SHARE ? row_of(pre[ST - 1]) : 0u;
    uint32_t qa[D / 16][4];
    if (qstage) { /* Q's group is the oldest of the ST it waits past; every thread's piece */
        qattn_cp_async_wait<ST - 1>();
        __syncthreads();
        if (p.in == QATTN_FMT_BF16)
            qattn_dmma_load_q<D, L::QP, QT, QATTN_FMT_BF16, L::QROW>(qa, qsm, lane);
        else
            qattn_dmma_load_q<D, L::QP, QT, QATTN_FMT_FP16, L::QROW>(qa, qsm, lane);
    } else if (p.in == QATTN_FMT_BF16)
        qattn_dmma_pack_q<D, QT, QATTN_FMT_BF16>(qa, qx);
    else if (p.in == QATTN_FMT_FP16)
        qattn_dmma_pack_q<D, QT, QATTN_FMT_FP16>(qa, qx);
    else
        qattn_dmma_pack_q<D, QT, QATTN_FMT_FP32>(qa, qx);
    /* int8 / int4: -bias x the Q sums of rows g and g + 8 (fp16 Q as the MMA reads it; a sum is the
     * same under the channel permutation) */
    constexpr float KBIAS = qattn_dmma_bias<CF>::KB, BIAS = qattn_dmma_bias<CF>::VB; /* K's, V's */
    float qb[2] = {0.f, 0.f};
    float pb[4] = {0.f, 0.f, 0.f, 0.f}; /* int8 / int4: rows g, g + 8's P sums (all columns alike), as O's */
    if constexpr (KBIAS != 0.0f) {
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float lo, hi;
                qattn_f16x2_unpack(qa[ks][i], lo, hi);
                qb[i & 1] += lo + hi;
            }
        for (int ri = 0; ri < 2; ri++) {
            qb[ri] += __shfl_xor_sync(0xffffffffu, qb[ri], 1);
            qb[ri] += __shfl_xor_sync(0xffffffffu, qb[ri], 2);
            qb[ri] *= -KBIAS;
        }
    }
    uint32_t next_at = 0u, taken = 0u; /* SHARE: rank 0's counter; lane 0: its value for iteration it + ST + 1 */
    if constexpr (SHARE) {
        next_at = qattn_cluster_map(&shared_next, 0u);
        qattn_cluster_wait();
        if (lane == 0)
            taken = qattn_cluster_atom_add(next_at, 1u);
    }
    for (int it = 0; SHARE ? cq[0] < nchunk : it < mine; it++) {
        const int c = SHARE ? cq[0] : warp + it * NW;
        if (SHARE ? cq[ST - 1] < nchunk : it + ST - 1 < mine)
            issue(SHARE ? cq[ST - 1] : warp + (it + ST - 1) * NW, (it + ST - 1) % ST, SHARE ? next_row : row_of(next));
        qattn_cp_async_commit();
        next = (SHARE ? cq[ST] < nchunk : it + ST < mine) ? entry(SHARE ? cq[ST] : warp + (it + ST) * NW) : none;
        if constexpr (SHARE)
            next_row = row_of(next);
        if constexpr (SHARE) { /* the chunk of iteration it + ST + 1, after those the rule gave */
            const int after = (ST + 1) * sn * NW + (int)__shfl_sync(0xffffffffu, taken, 0);
            if (lane == 0 && after < nchunk)
                taken = qattn_cluster_atom_add(next_at, 1u);
#pragma unroll
            for (int s = 0; s < ST; s++)
                cq[s] = cq[s + 1];
            cq[ST] = after;
        }
        qattn_cp_async_wait<ST - 1>();
        __syncwarp();
        if (it == 0)
            stamp(3);
        const unsigned char *kt = wsm + (it % ST) * L::STAGE, *vt = kt + L::RAW_CHUNK;
        const float *kss = (const float *)(vt + L::RAW_CHUNK), *vss = kss + KC; /* 8-bit: the chunk's scales */
        /* S = Q K^T over the chunk's KC keys: n-tiles of 8 keys */
        float s[NJ][4];
        for (int j = 0; j < NJ; j++)
            s[j][0] = s[j][1] = qb[0], s[j][2] = s[j][3] = qb[1];
        qattn_dmma_chunk_qk<D, CF, QT, KC, L::RAW_ROW>(s, qa, kt, lane);
        /* scale, mask, online softmax (rows g: s[j][0..1], g + 8: s[j][2..3]); keys as offsets from
         * kbeg. Rows g + 8 only where the tile has them (hi: a decode step's 8 heads of one token fill
         * rows 0-7 alone), the mask only in chunks that cross a live row's range (ins) */
        const int xc = c * KC;
        float mx[2] = {m[0], m[1]};
        const int hi = __any_sync(0xffffffffu, rlo32[1] >= 0); /* the tile has rows g + 8 (of its 16) */
        const int ins = __all_sync(0xffffffffu, xc >= rlo32[0] && xc <= rhi32[0] - KC &&
                                                    (!hi || (xc >= rlo32[1] && xc <= rhi32[1] - KC)));
        auto scale_row = [&](auto masked, int ri) {
#pragma unroll
            for (int j = 0; j < NJ; j++)
#pragma unroll
                for (int x = 0; x < 2; x++) {
                    float v = s[j][2 * ri + x] * p.c2;
                    if (L::SCALES)
                        v = v * kss[8 * j + 2 * t4 + x];
                    if constexpr (decltype(masked)::value) {
                        const int xo = xc + 8 * j + 2 * t4 + x;
                        v = (xo >= rlo32[ri] && xo < rhi32[ri]) ? v : -INFINITY;
                    }
                    s[j][2 * ri + x] = v;
                    mx[ri] = fmaxf(mx[ri], v);
                }
        };
        auto scale_rows = [&](auto masked) {
            scale_row(masked, 0);
            if (hi)
                scale_row(masked, 1);
        };
        if (ins)
            scale_rows(qattn_dmma_flag<0>());
        else
            scale_rows(qattn_dmma_flag<1>());
        /* alpha 1 for a row without a key so far (its O and l are 0): else such a row (past the
         * sequence) would have every chunk rescale O */
        float alpha[2] = {1.f, 1.f}, base[2] = {0.f, 0.f};
#pragma unroll
        for (int ri = 0; ri < 2; ri++) {
            if (ri == 1 && !hi)
                break;
            mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 1));
            mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 2));
            base[ri] = mx[ri] == -INFINITY ? 0.f : mx[ri];
            alpha[ri] = mx[ri] == -INFINITY ? 1.f : qattn_ex2_approx(m[ri] - base[ri]);
            m[ri] = mx[ri];
            l[ri] *= alpha[ri];
        }
        uint32_t pa[NK][4]; /* P as the A fragments: rows g in registers 0 and 2, g + 8 in 1 and 3 */
        auto exp_row = [&](int ri) {
#pragma unroll
            for (int j = 0; j < NJ; j++) {
                float pv[2];
#pragma unroll
                for (int x = 0; x < 2; x++) {
                    const float pe = qattn_ex2_approx(s[j][2 * ri + x] - base[ri]);
                    l[ri] += pe;
                    pv[x] = L::SCALES ? pe * vss[8 * j + 2 * t4 + x] : pe;
                }
                pa[j >> 1][(j & 1) * 2 + ri] = qattn_dmma_pack<QT>(pv[0], pv[1]);
            }
        };
        exp_row(0);
        if (hi)
            exp_row(1);
        else
#pragma unroll
            for (int j = 0; j < NJ; j++)
                pa[j >> 1][(j & 1) * 2 + 1] = 0u;
        if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) { /* a row's max moved */
            for (int n = 0; n < NT; n++)
                o[n][0] *= alpha[0], o[n][1] *= alpha[0];
            if (hi) /* rows g + 8 where the tile has them (a decode step's are past it) */
                for (int n = 0; n < NT; n++)
                    o[n][2] *= alpha[1], o[n][3] *= alpha[1];
            if constexpr (BIAS != 0.0f)
                pb[0] *= alpha[0], pb[1] *= alpha[0], pb[2] *= alpha[1], pb[3] *= alpha[1];
        }
        /* O += P V: k-blocks of 16 keys, n-tiles of 8 channels in pairs */
        qattn_dmma_chunk_pv<D, CF, QT, KC, L::RAW_ROW>(o, pb, pa, vt, lane);
        __syncwarp();
    }
    qattn_cp_async_wait<0>();
#ifdef QATTN_DECODE_STAMPS
    if (stamps && lane == 0) {
        stamps[QATTN_KERNELS_DECODE_STAMP_WARP + warp] = qattn_dmma_now_ns();
        if (warp == 0)
            stamps[QATTN_KERNELS_DECODE_STAMP_WHERE] = qattn_dmma_smid() | (unsigned long long)srank << 16 |
                                                       (unsigned long long)(unsigned)nchunk << 32;
    }
#endif
    if constexpr (SHARE)
        if (!p.cluster) /* this block is done with rank 0's counter (waited for at the end) */
            qattn_cluster_arrive();
    for (int ri = 0; ri < 2; ri++) {
        l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 1);
        l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 2);
    }
    if constexpr (BIAS != 0.0f) /* the biased V codes' share of O */
        for (int n = 0; n < NT; n++) {
            o[n][0] -= BIAS * pb[0], o[n][1] -= BIAS * pb[1];
            o[n][2] -= BIAS * pb[2], o[n][3] -= BIAS * pb[3];
        }
    __syncthreads(); /* the rings are free: merge the warps' states */
    stamp(4);
    const int RW = QATTN_DMMA_ROWS, RS = L::MERGE_ROW; /* floats a row: O's D channels, m, l, padding */
    float *ms = (float *)qattn_dmma_smem;              /* [NW][RW][RS] */
    float *mo = ms + warp * RW * RS;
    /* rows past the tile's are never read: a decode step's rows 8-15 (half the stores) skipped */
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        if (r0 + g + 8 * hr >= nrows)
            continue;
        float *mr = mo + (g + 8 * hr) * RS;
        if (L::ELT == 2) {
#pragma unroll
            for (int n = 0; n < NT; n++)
                *(float2 *)&mr[8 * n + 2 * t4] = make_float2(o[n][2 * hr], o[n][2 * hr + 1]);
        } else if (L::I4) { /* tiles 4 seg + i: column 2 t4 (+ 1) is channel 32 seg + 8 t4 (+ 4) + i */
#pragma unroll
            for (int sg = 0; sg < D / 32; sg++)
#pragma unroll
                for (int x = 0; x < 2; x++)
                    *(float4 *)&mr[32 * sg + 8 * t4 + 4 * x] =
                        make_float4(o[4 * sg][2 * hr + x], o[4 * sg + 1][2 * hr + x], o[4 * sg + 2][2 * hr + x],
                                    o[4 * sg + 3][2 * hr + x]);
        } else { /* tile n holds channels 16 (n / 2) + 2 c + n % 2: n-tiles 2 s, 2 s + 1 give 4 channels */
#pragma unroll
            for (int n = 0; n < NT; n += 2)
                *(float4 *)&mr[16 * (n >> 1) + 4 * t4] =
                    make_float4(o[n][2 * hr], o[n + 1][2 * hr], o[n][2 * hr + 1], o[n + 1][2 * hr + 1]);
        }
        if (t4 == 0)
            *(float2 *)&mr[D] = make_float2(m[hr], l[hr]);
    }
    __syncthreads();
    /* a thread per 4 channels of a row: the warps' weights, then O, from shared memory; with
     * p.cluster the split's o and lse go to res for the cluster's combine */
    float *res = (float *)(qattn_dmma_smem + L::MERGE_ALL); /* [RW][D] o, then [RW] lse */
    for (int idx = (int)threadIdx.x; idx < RW * D / 4; idx += NW * 32) {
        const int r = idx / (D / 4), c = 4 * (idx % (D / 4)), pr = r0 + r;
        if (pr >= nrows)
            continue;
        float2 ml[NW];
        float mm = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; w++) {
            ml[w] = *(const float2 *)&ms[(w * RW + r) * RS + D];
            mm = fmaxf(mm, ml[w].x);
        }
        const int empty = mm == -INFINITY;
        float ll = 0.f;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int w = 0; w < NW; w++) {
            const float wt = ml[w].x == -INFINITY ? 0.f : qattn_ex2_approx(ml[w].x - mm);
            ll += wt * ml[w].y;
            const float4 x = *(const float4 *)&ms[(w * RW + r) * RS + c];
            acc.x += wt * x.x, acc.y += wt * x.y, acc.z += wt * x.z, acc.w += wt * x.w;
        }
        const float4 ov = empty ? make_float4(0.f, 0.f, 0.f, 0.f)
                                : make_float4(acc.x / ll, acc.y / ll, acc.z / ll, acc.w / ll);
        const int i = tok_of(pr), h = hk * grp + pr - i * grp;
        const int64_t row = (int64_t)h * p.lse_sh + tq0 + i;
        const float lse = empty ? -INFINITY : (mm + log2f(ll)) * 0.69314718055994530942f;
        if (p.cluster) {
            *(float4 *)&res[r * D + c] = ov;
            if (c == 0)
                res[RW * D + r] = lse;
        } else if (p.num_splits > 1)
            *(float4 *)&p.o_part[((int64_t)sp * p.hq * p.lse_sh + row) * D + c] = ov;
        else {
            qattn_decode_put(p, b, tu0 + i, h, c, ov.x);
            qattn_decode_put(p, b, tu0 + i, h, c + 1, ov.y);
            qattn_decode_put(p, b, tu0 + i, h, c + 2, ov.z);
            qattn_decode_put(p, b, tu0 + i, h, c + 3, ov.w);
        }
        if (c == 0 && !p.cluster)
            qattn_decode_put_split_lse(p, row, sp, lse);
    }
    stamp(5);
    if (p.cluster) {
        qattn_decode_cluster_combine<D, QATTN_DMMA_ROWS>(p, res, r0, nrows, b, hk, tq0, tu0);
    } else {
        static_assert((QATTN_DECODE_COMBINE_SMAX + L::NW * (D + 1)) * 4 <= L::BYTES, "the spin combine's scratch");
        if (p.spin) /* the tile's splits combined by its blocks, the scratch over the merge's */
            qattn_decode_spin_combine<D, QATTN_DMMA_ROWS, L::NW>(p, (float *)qattn_dmma_smem, r0, nrows, b, hk, tq0,
                                                                 tu0, sp);
        if constexpr (SHARE)
            qattn_cluster_wait(); /* no block leaves while its peer may take from its counter */
    }
    stamp(6);
}

#endif
