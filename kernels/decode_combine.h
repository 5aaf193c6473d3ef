/* Decode family, NVIDIA path: the combine of split-KV's partials (fp32 o
 * normalized, lse in natural log), as two kernels launched after the split
 * kernel (a warp or a block per output row, by the splits), and as the
 * in-cluster combine of the split kernel when a row tile's splits run as one
 * thread-block cluster (sm_90). All weigh the splits as the emulation does
 * (qattn_kv_combine: a split without a key has weight 0). */
#ifndef QATTN_KERNELS_DECODE_COMBINE_H
#define QATTN_KERNELS_DECODE_COMBINE_H

#include "decode_portable.h"
#include "grid_group.h" /* the split kernel's own combine (params spin) */
#include "mma_nvidia.h"
/* a lane's CPL channels of the partials of splits s0 + step u (u < U) into x (split 0's
 * for those past ns: read, never weighed); orow: split 0's, pstride floats a split; through
 * L2 (ld.cg: the split kernel's own combine reads what other blocks of its launch wrote) */
template <int U, int CPL>
static __device__ __forceinline__ void qattn_decode_combine_load(float (&x)[U][CPL], const float *orow, int s0, int step,
                                                                 int ns, int64_t pstride)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int s = s0 + u * step;
        const float *op = orow + (int64_t)(s < ns ? s : 0) * pstride;
        if (CPL == 4) {
            const float4 v = __ldcg((const float4 *)op);
            x[u][0] = v.x, x[u][1] = v.y, x[u][2] = v.z, x[u][3] = v.w;
        } else {
#pragma unroll
            for (int k = 0; k < CPL; k++)
                x[u][k] = __ldcg(op + k);
        }
    }
}

/* The combine's two forms, by the splits (NVIDIA H200, 2026-11-28, kernels/LOG.md):
 * up to QATTN_DECODE_COMBINE_WARP splits a warp per output row, 8 rows a block (batch
 * 8 x 64 q heads, 2 splits: a decode step 1-4% faster than with a block a row); past
 * that a block per row, whose 8 warps load 8 x 16 splits' partials at once (4 splits:
 * the same at 256 rows, 1 us faster at 8; 16 and 128 splits: up to 2.3x faster) */
#define QATTN_DECODE_COMBINE_WARP 2

/* one split's term of the combine, as qattn_kv_combine: weight exp(lse - lm),
 * exactly 0 for a split without a key (its partial not used) */
template <int C>
static __device__ __forceinline__ void qattn_decode_combine_add(float ls, float lm, const float (&x)[C], float (&acc)[C],
                                                                float &sum)
{
    if (ls != -INFINITY) {
        const float w = expf(ls - lm);
        sum = sum + w;
#pragma unroll
        for (int k = 0; k < C; k++)
            acc[k] = acc[k] + w * x[k];
    }
}
/* channels c0 .. c0 + C - 1 of the combined row (zeros where no split had a key) */
template <int C>
static __device__ __forceinline__ void qattn_decode_combine_put(const qattn_kernels_decode_params &p, int b, int64_t t,
                                                                int h, int c0, const float (&acc)[C], float sum,
                                                                float lm)
{
#pragma unroll
    for (int k = 0; k < C; k++)
        qattn_decode_put(p, b, t, h, c0 + k, lm == -INFINITY ? 0.0f : acc[k] / sum);
}

/* the combine, a warp per output row, 8 rows a block and no block barrier;
 * each lane sums its D / 32 channels over the splits in split order, as the
 * emulation does (qattn_kv_combine: a split without a key skipped, weights
 * summed in order), with the partials of U splits loaded ahead: the first U
 * before the weights are known, so that their latency and the lse's overlap */
template <int D>
__global__ void __launch_bounds__(256) qattn_decode_combine_warp_kernel(qattn_kernels_decode_params p)
{
    const int NW = 8, CPL = D / 32; /* rows a block, channels a lane */
    const int U = 16;               /* splits a lane has in flight */
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5, b = (int)blockIdx.z;
    qattn_port_dependents_go(); /* the next step's split kernel may be set up beside this one */
    qattn_port_wait_prior();    /* launched overlapping the split kernel: its partials first */
    int64_t tq0, tu0;
    int sq;
    qattn_decode_rows(p, b, &tq0, &tu0, &sq);
    const int64_t r = (int64_t)blockIdx.x * NW + warp; /* token r / hq, q head r % hq of the sequence */
    if (r >= (int64_t)sq * p.hq)
        return;
    const int i = (int)(r / p.hq), h = (int)(r - (int64_t)i * p.hq);
    const int64_t row = (int64_t)h * p.lse_sh + tq0 + i, plane = (int64_t)p.hq * p.lse_sh;
    const int ns = p.num_splits;
    const float *orow = p.o_part + row * D + lane * CPL; /* split s's part: orow + s * plane * D */
    const float *lrow = p.lse_part + row;                /* split s's lse: lrow[s * plane] */
    float x[U][CPL];
    auto load = [&](int s0) { qattn_decode_combine_load<U, CPL>(x, orow, s0, 1, ns, plane * D); };
    load(0);
    float lm = -INFINITY;
    for (int s = lane; s < ns; s += 32)
        lm = fmaxf(lm, lrow[(int64_t)s * plane]);
    for (int o = 16; o; o >>= 1)
        lm = fmaxf(lm, __shfl_xor_sync(0xffffffffu, lm, o));
    float acc[CPL], sum = 0.0f;
#pragma unroll
    for (int k = 0; k < CPL; k++)
        acc[k] = 0.0f;
    if (lm != -INFINITY)
        for (int s0 = 0;;) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                /* the same weight in every lane (one address: a broadcast, an L1 hit) */
                const float ls = s0 + u < ns ? lrow[(int64_t)(s0 + u) * plane] : -INFINITY;
                qattn_decode_combine_add<CPL>(ls, lm, x[u], acc, sum);
            }
            s0 += U;
            if (s0 >= ns)
                break;
            load(s0);
        }
    qattn_decode_combine_put<CPL>(p, b, tu0 + i, h, lane * CPL, acc, sum, lm);
    if (lane == 0 && p.lse)
        p.lse[row] = lm == -INFINITY ? -INFINITY : lm + logf(sum);
}

/* One output row's combine by a block of NW warps (every thread calls it): warp w sums
 * splits w, w + NW, ... of the partials at o_part + (s plane + row) D (lse at lse_part
 * + s plane + row), U at a time, the first NW x U splits' partials loaded before the weights are known,
 * so that their latency and the lse's overlap (one round trip up to NW x U splits), read
 * through L2 (ld.cg: written by other blocks of the same launch with params spin); the
 * row's o goes to token t, head h of sequence b and its lse to p.lse[row]. Scratch in
 * shared memory: sW [QATTN_DECODE_COMBINE_SMAX], sPart [NW][D], sRed [NW], free again
 * when it returns. */
template <int D, int NW, int U>
static __device__ __forceinline__ void qattn_decode_combine_row(const qattn_kernels_decode_params &p, int b, int64_t t,
                                                                int h, int64_t row, float *sW, float *sPart, float *sRed)
{
    const int CPL = D / 32; /* channels per lane */
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t plane = (int64_t)p.hq * p.lse_sh;
    const int ns = p.num_splits;
    const float *orow = p.o_part + row * D + lane * CPL; /* split s's part: orow + s * plane * D */
    float x[U][CPL];
    auto load = [&](int s0) { qattn_decode_combine_load<U, CPL>(x, orow, s0, NW, ns, plane * D); };
    load(warp);
    float lm = -INFINITY;
    for (int s = tid; s < ns; s += NW * 32) {
        sW[s] = __ldcg(p.lse_part + s * plane + row);
        lm = fmaxf(lm, sW[s]);
    }
    for (int o = 16; o; o >>= 1)
        lm = fmaxf(lm, __shfl_xor_sync(0xffffffffu, lm, o));
    if (lane == 0)
        sRed[warp] = lm;
    __syncthreads();
    float lmax = sRed[0];
    for (int w = 1; w < NW; w++)
        lmax = fmaxf(lmax, sRed[w]);
    __syncthreads();
    float ws = 0.f;
    for (int s = tid; s < ns; s += NW * 32) {
        sW[s] = sW[s] == -INFINITY ? 0.f : expf(sW[s] - lmax);
        ws += sW[s];
    }
    for (int o = 16; o; o >>= 1)
        ws += __shfl_xor_sync(0xffffffffu, ws, o);
    if (lane == 0)
        sRed[warp] = ws;
    __syncthreads();
    float acc[CPL];
    for (int k = 0; k < CPL; k++)
        acc[k] = 0.f;
    if (lmax != -INFINITY)
        for (int s0 = warp;;) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int s = s0 + u * NW;
                const float w = s < ns ? sW[s] : 0.f;
#pragma unroll
                for (int k = 0; k < CPL; k++)
                    acc[k] += w * x[u][k];
            }
            s0 += NW * U;
            if (s0 >= ns)
                break;
            load(s0);
        }
    for (int k = 0; k < CPL; k++)
        sPart[warp * D + lane * CPL + k] = acc[k];
    __syncthreads();
    float sum = 0.f;
    for (int w = 0; w < NW; w++)
        sum += sRed[w];
    for (int c = tid; c < D; c += NW * 32) {
        float o = 0.f;
        if (lmax != -INFINITY) {
            for (int w = 0; w < NW; w++)
                o += sPart[w * D + c];
            o = o / sum;
        }
        qattn_decode_put(p, b, t, h, c, o);
    }
    if (tid == 0 && p.lse)
        p.lse[row] = lmax == -INFINITY ? -INFINITY : lmax + logf(sum);
    __syncthreads(); /* the scratch is free again */
}

/* the combine for more than QATTN_DECODE_COMBINE_WARP splits: one block per output row */
template <int D>
__global__ void __launch_bounds__(256) qattn_decode_combine_block_kernel(qattn_kernels_decode_params p)
{
    const int NW = 8;
    __shared__ float sW[QATTN_DECODE_COMBINE_SMAX];
    __shared__ float sPart[NW * D];
    __shared__ float sRed[NW];
    const int i = (int)blockIdx.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
    qattn_port_dependents_go(); /* the next step's split kernel may be set up beside this one */
    qattn_port_wait_prior();    /* launched overlapping the split kernel: its partials first */
    int64_t tq0, tu0;
    int sq;
    qattn_decode_rows(p, b, &tq0, &tu0, &sq);
    if (i >= sq)
        return;
    qattn_decode_combine_row<D, NW, 16>(p, b, tu0 + i, h, (int64_t)h * p.lse_sh + tq0 + i, sW, sPart, sRed);
}

/* The combine by the split kernel's own blocks (params spin; every block of the
 * grid resident at once, the launcher's check): each block has written its
 * split's partials of the row tile; it counts itself on the tile's words
 * (tile = the block's x, y) and waits for the tile's ns blocks, then block s
 * combines rows s, s + ns, ... of the tile's nrows - r0 live ones
 * (qattn_decode_combine_row, its NW warps, 6 splits a warp in flight: the
 * split kernel's registers), the scratch in the block's
 * shared memory (free: the warps' merge is done). No combine kernel, no
 * kernel boundary; the last block out leaves the words zero. */
template <int D, int ROWS, int NW>
static __device__ __forceinline__ void qattn_decode_spin_combine(const qattn_kernels_decode_params &p, float *scratch,
                                                                 int r0, int nrows, int b, int hk, int64_t tq0,
                                                                 int64_t tu0, int sp)
{
    const int grp = (int)p.div_grp.d, ns = p.num_splits;
    const int tile = (int)(blockIdx.y * gridDim.x + blockIdx.x);
    const unsigned left_n = qattn_grid_group_wait(p.spin_cnt, tile, ns, (int)threadIdx.x);
    float *sW = scratch, *sPart = sW + QATTN_DECODE_COMBINE_SMAX, *sRed = sPart + NW * D;
    for (int r = sp; r < ROWS && r0 + r < nrows; r += ns) {
        const int pr = r0 + r, i = (int)qattn_fastdiv(p.div_grp, (unsigned)pr), h = hk * grp + pr - i * grp;
        qattn_decode_combine_row<D, NW, 6>(p, b, tu0 + i, h, (int64_t)h * p.lse_sh + tq0 + i, sW, sPart, sRed);
    }
    qattn_grid_group_reset(p.spin_cnt, tile, left_n, ns, (int)threadIdx.x);
}

/* The combine inside a cluster of a row tile's ns split blocks (launched with
 * p.cluster): block s holds split s's normalized o ([ROWS][D]) and lse ([ROWS],
 * after o) of the tile's rows in res, its shared memory. After a cluster
 * barrier block s combines rows s, s + ns, ... from its peers' shared memory,
 * a thread per 4 channels of a row (at most ROWS / 2 x D / 4 = 256 of them),
 * weights in split order (as the warp combine). Each thread arrives on a
 * second barrier once it has read its peers' values and waits on it at the
 * end, so that no block's results go before its peers have read them. Every
 * thread of the block calls it. */
template <int D, int ROWS>
static __device__ __forceinline__ void qattn_decode_cluster_combine(const qattn_kernels_decode_params &p, const float *res,
                                                                    int r0, int nrows, int b, int hk, int64_t tq0,
                                                                    int64_t tu0)
{
    static_assert(ROWS / 2 * D / 4 <= 256, "one item a thread of a block of 256 or more");
    const int NS = QATTN_DECODE_CLUSTER_MAX, grp = (int)p.div_grp.d;
    qattn_cluster_sync();
    const int ns = p.num_splits, me = (int)qattn_cluster_rank();
    const int mine = (ROWS - me + ns - 1) / ns; /* rows me, me + ns, ... of the tile */
    const int idx = (int)threadIdx.x;
    const int r = me + idx / (D / 4) * ns, c = 4 * (idx % (D / 4)), pr = r0 + r;
    const int live = idx < mine * (D / 4) && pr < nrows;
    float ls[NS], x[NS][4];
#pragma unroll
    for (int s = 0; s < NS; s++) /* every split's first, then the weights */
        if (live && s < ns) {
            ls[s] = qattn_cluster_ld(qattn_cluster_map(res + ROWS * D + r, (unsigned)s));
            const float4 v = qattn_cluster_ld4(qattn_cluster_map(res + r * D + c, (unsigned)s));
            x[s][0] = v.x, x[s][1] = v.y, x[s][2] = v.z, x[s][3] = v.w;
        }
    qattn_cluster_arrive(); /* this thread's reads of its peers are done */
    if (live) {
        float lm = -INFINITY;
#pragma unroll
        for (int s = 0; s < NS; s++)
            if (s < ns)
                lm = fmaxf(lm, ls[s]);
        float sum = 0.0f, acc[4] = {0.f, 0.f, 0.f, 0.f};
        if (lm != -INFINITY)
#pragma unroll
            for (int s = 0; s < NS; s++)
                if (s < ns)
                    qattn_decode_combine_add<4>(ls[s], lm, x[s], acc, sum);
        const int i = (int)qattn_fastdiv(p.div_grp, (unsigned)pr), h = hk * grp + pr - i * grp;
        qattn_decode_combine_put<4>(p, b, tu0 + i, h, c, acc, sum, lm);
        if (c == 0 && p.lse)
            p.lse[(int64_t)h * p.lse_sh + tq0 + i] = lm == -INFINITY ? -INFINITY : lm + logf(sum);
    }
    qattn_cluster_wait(); /* every peer has read this block's results */
}

#endif
