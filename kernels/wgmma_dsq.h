/* smooth=q's dS plane for the int4 wgmma instances (attn_fwd_wgmma.h): for
 * every Q block l and key j of a sequence, dS c2 = (mean of Q block l) .
 * (K_j - kmean) x c2, written by one pass before the attention kernel, so
 * that the attention producer copies a few rows of floats a key block
 * instead of the block's fp16 input K (4x the packed K's bytes) and an mma.
 * NVIDIA only (mma.sync f16, sm_80+). Compiled in dsq_pass.hip. */
#ifndef QATTN_KERNELS_WGMMA_DSQ_H
#define QATTN_KERNELS_WGMMA_DSQ_H

#include <cuda_fp16.h>

#include "attn_common.h"   /* qattn_kseq */
#include "attn_fwd_mma.h"  /* QATTN_MMA_CHECK */
#include "mma_nvidia.h"    /* cp.async, ldmatrix, mma.sync */
#include "qattn_kernels.h" /* qattn_kernels_attn_params */

#define QATTN_DSQ_KEYS QATTN_KERNELS_DS_KEYS /* keys a tile (the plane's row multiple, params ds_ld) */
#define QATTN_DSQ_QB 64 /* Q blocks a block (4 warps of 16: an m16 A tile's rows a warp) */
#define QATTN_DSQ_RANGE 2048 /* keys a block (several blocks a row of the plane: enough blocks to fill the GPU) */
#define QATTN_DSQ_ROWB(d) (2 * (d) + 16) /* bytes of a K row in shared memory (padded: ldmatrix without conflicts) */

/* blocks along a row of the plane (key ranges of QATTN_DSQ_RANGE) */
static __host__ __device__ inline int qattn_dsq_ranges(int64_t ds_ld)
{
    return (int)((ds_ld + QATTN_DSQ_RANGE - 1) / QATTN_DSQ_RANGE);
}

/* Block (64 Q blocks x a range of keys, head h, sequence b), 4 warps of 16 Q blocks: the
 * warp's two m16n8k16 A tiles once, row r = the fp16 high part (low part)
 * of block r's mean times 2^(14 - e) (e: the exponent of the block's
 * largest |mean|, so |.| < 2^14; hi + lo: about 22 bits), in registers
 * (lane 4g + i: channels 16kk + 2i, +1, +8, +9 of blocks g and g + 8);
 * then the range's keys in tiles of 128 fp16 input K rows, double
 * buffered in shared memory (zero past the sequence), B = the K rows, both
 * A tiles into one fp32 accumulator per B fragment. Row r's sum minus C_r
 * = (hi + lo) . kmean, times c2 2^(e - 14). The keys of the last tile past
 * the sequence get finite values; the plane's rows past the sequence's Q
 * blocks are not written (the attention kernel reads neither). */
template <int D> /* (128, 1): ptxas -O3 schedules it to 0.89x the time of plain (128), H200 2026-12-02 */
__global__ void __launch_bounds__(128, 1) qattn_dsq_kernel(qattn_kernels_attn_params p)
{
#if QATTN_MMA_SM80
    constexpr int KP = QATTN_DSQ_ROWB(D), ICH = D / 8, KK = D / 16, KT = QATTN_DSQ_KEYS, NH = 8; /* n-tiles a half tile */
    extern __shared__ __align__(16) uint8_t sK[]; /* [2][KT keys][KP bytes] fp16 rows, padded */
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, qi = lane & 3;
    const int h = (int)blockIdx.y, b = (int)blockIdx.z;
    const int hk = h / (p.hq / p.hkv);
    int64_t tq0, tk0;
    int sq, sk;
    qattn_kseq(p.cu_q, b, p.seqlen_q, &tq0, &sq);
    qattn_kseq(p.cu_k, b, p.seqlen_k, &tk0, &sk);
    (void)tq0;
    const int nqb = (sq + p.qblock - 1) / p.qblock; /* this sequence's Q blocks (the plane has p.nqb rows) */
    const int nkr = qattn_dsq_ranges(p.ds_ld);
    const int qg = (int)blockIdx.x / nkr, t0 = (int)blockIdx.x % nkr * (QATTN_DSQ_RANGE / KT);
    const int l0 = QATTN_DSQ_QB * qg + 16 * warp, t1 = min((sk + KT - 1) / KT, t0 + QATTN_DSQ_RANGE / KT);
    if (QATTN_DSQ_QB * qg >= nqb || t0 >= t1)
        return;
    const uint16_t *kg = (const uint16_t *)p.k_in + (int64_t)b * p.kin_sb + tk0 * p.kin_st + (int64_t)hk * p.kin_sh;
    auto load_tile = [&](int t) {
        uint8_t *dst = sK + (t & 1) * KT * KP;
#pragma unroll 4
        for (int e = tid; e < KT * ICH; e += 128) {
            const int r = e / ICH, ch = e % ICH, key = t * KT + r, ok = key < sk;
            qattn_cp_async16(dst + r * KP + ch * 16, ok ? kg + (int64_t)key * p.kin_st + ch * 8 : kg, ok ? 16 : 0);
        }
        qattn_cp_async_commit();
    };
    load_tile(t0);

    const float *qm0 = p.q_mean + ((int64_t)h * p.nseq + b) * p.nqb * D;
    const float *km = p.k_mean ? p.k_mean + ((int64_t)hk * p.nseq + b) * D : (const float *)0;
    uint32_t ah[KK][4], al[KK][4]; /* the high and low A tiles */
    float cl[2], dk[2];            /* blocks l0 + g, l0 + g + 8 */
#pragma unroll
    for (int y = 0; y < 2; y++) {  /* block l0 + g + 8y: registers y and 2 + y of each k-step */
        const int l = l0 + g + 8 * y, live = l < nqb; /* past the sequence's Q blocks: mean 0 */
        const float *qm = qm0 + (int64_t)(live ? l : 0) * D + 2 * qi;
        float mx = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KK; kk++)
#pragma unroll
            for (int x = 0; x < 2; x++) {
                const float2 m = live ? *(const float2 *)(qm + 16 * kk + 8 * x) : make_float2(0.0f, 0.0f);
                mx = fmaxf(mx, fmaxf(fabsf(m.x), fabsf(m.y)));
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        int ex = 0;
        (void)frexpf(mx, &ex);
        const float sc = ldexpf(1.0f, 14 - ex);
        float c = 0.0f; /* C in the A tile's units */
#pragma unroll
        for (int kk = 0; kk < KK; kk++)
#pragma unroll
            for (int x = 0; x < 2; x++) { /* channels 16 kk + 2 qi + 8 x, + 1 */
                const float2 m = live ? *(const float2 *)(qm + 16 * kk + 8 * x) : make_float2(0.0f, 0.0f);
                const float m0 = m.x * sc, m1 = m.y * sc;
                const __half h0 = __float2half_rn(m0), h1 = __float2half_rn(m1);
                const __half o0 = __float2half_rn(m0 - __half2float(h0)), o1 = __float2half_rn(m1 - __half2float(h1));
                ah[kk][2 * x + y] = (uint32_t)__half_as_ushort(h0) | (uint32_t)__half_as_ushort(h1) << 16;
                al[kk][2 * x + y] = (uint32_t)__half_as_ushort(o0) | (uint32_t)__half_as_ushort(o1) << 16;
                if (km) {
                    const int ch = 16 * kk + 2 * qi + 8 * x;
                    c += (__half2float(h0) + __half2float(o0)) * km[ch] + (__half2float(h1) + __half2float(o1)) * km[ch + 1];
                }
            }
        c += __shfl_xor_sync(0xffffffffu, c, 1);
        c += __shfl_xor_sync(0xffffffffu, c, 2);
        cl[y] = c;
        dk[y] = ldexpf(p.c2, ex - 14);
    }
    const int rows = min(max(min(nqb, p.nqb) - l0, 0), 16); /* the warp's rows to write */
    float *ds0 = p.ds + (((int64_t)h * p.nseq + b) * p.nqb + l0) * p.ds_ld + 2 * qi;

    for (int t = t0; t < t1; t++) {
        /* the next tile into the other buffer (read in t - 1, released below), else an empty group: one
         * wait for every tile */
        if (t + 1 < t1)
            load_tile(t + 1);
        else
            qattn_cp_async_commit();
        qattn_cp_async_wait<1>();
        __syncthreads();
        const uint8_t *sKt = sK + (t & 1) * KT * KP;
#pragma unroll 1
        for (int hh = 0; hh < 2 && rows > 0; hh++) { /* keys 64 hh.. of the tile */
            float acc[NH][4];
#pragma unroll
            for (int n = 0; n < NH; n++)
                acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KK; kk++)
#pragma unroll
                for (int n = 0; n < NH; n += 2) { /* matrices: n-tile n (channels 16kk.., 16kk + 8..), n-tile n + 1 */
                    uint32_t bf[4];
                    const int key = 64 * hh + 8 * n + 8 * (lane >> 4) + (lane & 7);
                    qattn_ldmatrix_x4(bf, sKt + key * KP + (2 * kk + ((lane >> 3) & 1)) * 16);
                    qattn_mma_m16n8k16_f16_f32(acc[n], ah[kk], bf, acc[n]);
                    qattn_mma_m16n8k16_f16_f32(acc[n], al[kk], bf, acc[n]);
                    qattn_mma_m16n8k16_f16_f32(acc[n + 1], ah[kk], bf + 2, acc[n + 1]);
                    qattn_mma_m16n8k16_f16_f32(acc[n + 1], al[kk], bf + 2, acc[n + 1]);
                }
#pragma unroll
            for (int y = 0; y < 2; y++)
                if (g + 8 * y < rows) {
                    float *d = ds0 + (int64_t)(g + 8 * y) * p.ds_ld + t * KT + 64 * hh;
#pragma unroll
                    for (int n = 0; n < NH; n++)
                        *(float2 *)(d + 8 * n) =
                            make_float2((acc[n][2 * y] - cl[y]) * dk[y], (acc[n][2 * y + 1] - cl[y]) * dk[y]);
                }
        }
        __syncthreads(); /* this buffer is read: the load two tiles on may overwrite it */
    }
#else
    (void)p;
#endif
}

/* the plane of p (params ds, ds_ld), written on stream (dsq_pass.hip: one instance a head dim at ptxas
 * -O3, 0.93x the pass's time at -O1, where the int4 instances that launch it stay) */
int qattn_dsq_run(const qattn_kernels_attn_params *p, int d, void *stream, qattn_err *err);

#endif
