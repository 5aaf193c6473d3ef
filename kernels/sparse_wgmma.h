/* Sparse family, NVIDIA wgmma path (sm_90a): the bf16 sparse prefill at
 * d = 512, one CTA a (query token, kv head, tile of 64 of the group's q
 * heads). Rows are heads: every head of a token reads the same listed keys.
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
 * K-major for Q.K and N-major for P.V. */
#ifndef QATTN_KERNELS_SPARSE_WGMMA_H
#define QATTN_KERNELS_SPARSE_WGMMA_H

#include "sparse_portable.h"
#include "wgmma_tile.h"

#define QATTN_SPW_D 512
#define QATTN_SPW_ROWS 64 /* q heads a CTA */
#define QATTN_SPW_KEYS 64 /* list entries a stage */
#define QATTN_SPW_THREADS 384
#define QATTN_SPW_TILE (QATTN_SPW_ROWS * QATTN_SPW_D * 2) /* bytes of the Q tile and of a stage: 64 KiB */
#define QATTN_SPW_OFF_KV QATTN_SPW_TILE                      /* stage s at OFF_KV + s * TILE */
#define QATTN_SPW_OFF_P (3 * QATTN_SPW_TILE)                  /* P of stage s at OFF_P + s * 8 KiB */
#define QATTN_SPW_OFF_RED (QATTN_SPW_OFF_P + 2 * 8192)        /* row maxima [2 stages][2][64], sums [2][64] */
#define QATTN_SPW_SMEM (QATTN_SPW_OFF_RED + 6 * 64 * 4 + 1024) /* + the 1024-byte alignment */

static __global__ void __launch_bounds__(QATTN_SPW_THREADS, 1) qattn_sparse_wgmma_kernel(qattn_kernels_sparse_params p)
{
#if QATTN_WGMMA
    const int D = QATTN_SPW_D, KEYS = QATTN_SPW_KEYS, SLAB = QATTN_SPW_ROWS * 128; /* bytes of a 64-channel slab */
    QATTN_DYNAMIC_SHARED(uint8_t, smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (qattn_wgmma_smem_addr(smem_raw) & 1023)) & 1023);
    float *red = (float *)(smem + QATTN_SPW_OFF_RED);
    __shared__ __align__(8) uint64_t s_bar[5]; /* full[2], empty[2], Q */
    const uint32_t bar0 = qattn_wgmma_smem_addr(s_bar);
#define QATTN_SPW_FULL(s) (bar0 + 8u * (uint32_t)(s))
#define QATTN_SPW_EMPTY(s) (bar0 + 16u + 8u * (uint32_t)(s))
#define QATTN_SPW_QBAR (bar0 + 32u)
    const int tid = (int)threadIdx.x, wg = tid >> 7, wt = tid & 127;
    const int grp = p.hq / p.hkv, tiles = (grp + QATTN_SPW_ROWS - 1) / QATTN_SPW_ROWS;
    const int g = (int)blockIdx.x / tiles, r0 = ((int)blockIdx.x % tiles) * QATTN_SPW_ROWS, t = (int)blockIdx.y;
    const int32_t *list = p.idx + (int64_t)t * p.topk;
    const int len = p.len ? (p.len[t] < p.topk ? p.len[t] : p.topk) : p.topk;
    const int nblk = (len + KEYS - 1) / KEYS;
    if (tid == 0) {
        for (int s = 0; s < 2; s++) {
            qattn_mbar_init(QATTN_SPW_FULL(s), 128);
            qattn_mbar_init(QATTN_SPW_EMPTY(s), 8); /* consumer warps */
        }
        qattn_mbar_init(QATTN_SPW_QBAR, 128);
    }
    __syncthreads();

    if (wg == 0) {
        /* ================= producer: two threads a row, 32 pieces of 16 bytes each ================= */
        qattn_setmaxnreg_dec<40>();
        const int r = wt >> 1, pc0 = (wt & 1) * 32;
        {
            const int ok = r0 + r < grp;
            const uint16_t *src = (const uint16_t *)p.q + (int64_t)t * p.q_st +
                                  (int64_t)(g * grp + (ok ? r0 + r : 0)) * p.q_sh;
#pragma unroll 8
            for (int i = 0; i < 32; i++)
                qattn_cp_async16(smem + qattn_wg_off<1024, 64>(r, pc0 + i), src + (pc0 + i) * 8, ok ? 16 : 0);
            qattn_cp_async_mbar_arrive(QATTN_SPW_QBAR);
        }
        for (int j = 0; j < nblk; j++) {
            const int s = j & 1;
            qattn_mbar_wait(QATTN_SPW_EMPTY(s), ((j >> 1) & 1) ^ 1);
            const int e = j * KEYS + r;
            const int pos = e < len ? list[e] : -1;
            const uint16_t *src = (const uint16_t *)p.q; /* any mapped address for a zero fill */
            if (pos >= 0) {
                const qattn_kernels_kvrows *part;
                const int64_t row = qattn_sparse_at(p.kv, pos, g, &part);
                src = (const uint16_t *)part->val + row * D;
            }
            uint8_t *dst = smem + QATTN_SPW_OFF_KV + s * QATTN_SPW_TILE;
#pragma unroll 8
            for (int i = 0; i < 32; i++)
                qattn_cp_async16(dst + qattn_wg_off<1024, 64>(r, pc0 + i), src + (pc0 + i) * 8, pos >= 0 ? 16 : 0);
            qattn_cp_async_mbar_arrive(QATTN_SPW_FULL(s));
        }
        return;
    }

    /* ================= consumers ================= */
    qattn_setmaxnreg_inc<232>();
    const int c = wg - 1, lane = tid & 31, wv = (tid >> 5) & 3, q4 = lane & 3;
    const int rowA = 16 * wv + (lane >> 2), rowB = rowA + 8;
    const float NEG = -INFINITY;
    float o[2][64];
#pragma unroll
    for (int n = 0; n < 2; n++)
#pragma unroll
        for (int e = 0; e < 64; e++)
            o[n][e] = 0.0f;
    float mA = NEG, mB = NEG, lA = 0.0f, lB = 0.0f;
    const uint32_t aQ = qattn_wgmma_smem_addr(smem);
    qattn_mbar_wait(QATTN_SPW_QBAR, 0);
    for (int j = 0; j < nblk; j++) {
        const int s = j & 1;
        const uint32_t aKV = aQ + QATTN_SPW_OFF_KV + (uint32_t)s * QATTN_SPW_TILE;
        const uint32_t aP = aQ + QATTN_SPW_OFF_P + (uint32_t)s * 8192u;
        uint8_t *sP = smem + QATTN_SPW_OFF_P + s * 8192;
        /* this thread's 8 columns of S (keys of the stage): 32c + 8i + 2 q4 + {0, 1} */
        int valid[4][2];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int x = 0; x < 2; x++) {
                const int e = j * KEYS + 32 * c + 8 * i + 2 * q4 + x;
                valid[i][x] = e < len && list[e] >= 0;
            }
        qattn_mbar_wait(QATTN_SPW_FULL(s), (uint32_t)(j >> 1) & 1u);
        qattn_fence_proxy_async_smem(); /* cp.async (generic proxy) data read by wgmma (async proxy) */
        float sc[16];
#pragma unroll
        for (int e = 0; e < 16; e++)
            sc[e] = 0.0f;
        qattn_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const uint32_t k0 = (uint32_t)(kk >> 2) * SLAB + (uint32_t)(kk & 3) * 32u;
            qattn_wgmma_m64n32k16_bf16_ss(sc, qattn_wgmma_desc_sw128(aQ + k0),
                                          qattn_wgmma_desc_sw128(aKV + k0 + (uint32_t)c * 32u * 128u), kk > 0);
        }
        qattn_wgmma_commit();
        qattn_wgmma_wait<0>();
#pragma unroll
        for (int e = 0; e < 16; e++)
            qattn_wgmma_fence_reg(sc[e]);
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
#pragma unroll
        for (int kk = 0; kk < KEYS / 16; kk++)
#pragma unroll
            for (int n = 0; n < 2; n++)
                qattn_wgmma_m64n128k16_bf16_ss_tb(
                    o[n], qattn_wgmma_desc_sw128(aP + (uint32_t)kk * 32u),
                    qattn_wgmma_desc_sw128_mn(aKV + (uint32_t)(4 * c + 2 * n) * SLAB + (uint32_t)kk * 2048u, SLAB));
        qattn_wgmma_commit();
        qattn_wgmma_wait<0>();
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int e = 0; e < 64; e++)
                qattn_wgmma_fence_reg(o[n][e]);
        __syncwarp();
        if (lane == 0)
            qattn_mbar_arrive(QATTN_SPW_EMPTY(s));
    }
    /* the two halves' sums, the sink, the output */
    lA += __shfl_xor_sync(0xffffffffu, lA, 1);
    lA += __shfl_xor_sync(0xffffffffu, lA, 2);
    lB += __shfl_xor_sync(0xffffffffu, lB, 1);
    lB += __shfl_xor_sync(0xffffffffu, lB, 2);
    float *ls = red + 256;
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
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const int col = 256 * c + 128 * n + 8 * i + 2 * q4;
                const float v0 = o[n][4 * i + 2 * x] * inv, v1 = o[n][4 * i + 2 * x + 1] * inv;
                if (p.out == QATTN_FMT_BF16) {
                    *(uint32_t *)((uint16_t *)p.o + (int64_t)t * p.o_st + (int64_t)h * p.o_sh + col) =
                        qattn_cvt_bf16x2_f32(v0, v1);
                } else {
                    qattn_sparse_put(p, t, h, col, v0);
                    qattn_sparse_put(p, t, h, col + 1, v1);
                }
            }
        if (c == 0 && q4 == 0 && p.lse)
            p.lse[(int64_t)h * p.sq + t] = empty ? sink : (m + log2f(l)) * 0.69314718055994530942f;
    }
#undef QATTN_SPW_FULL
#undef QATTN_SPW_EMPTY
#undef QATTN_SPW_QBAR
#else
    (void)p;
#endif
}

static int qattn_sparse_wgmma_launch(const qattn_kernels_sparse_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_sparse_params p = *pp;
    int rc = qattn_sparse_check_params(p, QATTN_SPW_D, err);
    if (rc)
        return rc;
    if (p.kv.fp8 || p.q_fp8 || p.in != QATTN_FMT_BF16)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse wgmma: bf16 queries and bf16 rows only");
    if ((p.q_sh | p.q_st | p.o_sh | p.o_st) & 7)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse wgmma: query and output strides must be multiples of 8");
    const int cc = qattn_kernels_dev_cc();
    if (cc != 90 || !strstr(QATTN_KERNELS_ARCHS, "sm_90a"))
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "sparse wgmma: needs an sm_90 GPU and a build for sm_90a (GPU sm_%d, built for %s)", cc,
                             QATTN_KERNELS_ARCHS);
    if (p.sq == 0)
        return QATTN_OK;
    const int tiles = (p.hq / p.hkv + QATTN_SPW_ROWS - 1) / QATTN_SPW_ROWS;
    void (*k)(qattn_kernels_sparse_params) = &qattn_sparse_wgmma_kernel;
    QATTN_DECODE_CHECK(hipFuncSetAttribute((const void *)k, hipFuncAttributeMaxDynamicSharedMemorySize, QATTN_SPW_SMEM),
                       "sparse wgmma: raising the shared-memory limit");
    /* the tiles of a token side by side: they read the same rows (the second from L2) */
    hipLaunchKernelGGL(k, dim3((unsigned)(p.hkv * tiles), (unsigned)p.sq), dim3(QATTN_SPW_THREADS), QATTN_SPW_SMEM,
                       (hipStream_t)stream, p);
    QATTN_DECODE_CHECK(hipGetLastError(), "sparse wgmma kernel launch");
    return QATTN_OK;
}

#define QATTN_SPARSE_WGMMA_INSTANCE(NAME)                                                   \
    extern "C" int NAME(const qattn_kernels_sparse_params *p, void *stream, qattn_err *err) \
    {                                                                                       \
        return qattn_sparse_wgmma_launch(p, stream, err);                                   \
    }

#endif
