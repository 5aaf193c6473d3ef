/* Probe: what sum does one Hopper f16 wgmma (m64n64k16, fp16 A and B) compute
 * into an fp16 accumulator (sage1-b's P.V: acc=fp16) and into an fp32 one?
 * Runs cases of A (64 x 16 or 64 x 32 fp16), B (64 keys x the same), C (64 x
 * 64, fp16 values) through one or two k-steps and writes A, B, C and D = the
 * tensor core's C + A B^T to a binary file for kernels/probes/wgmma_f16_sum.py,
 * which fits models of the sum. Research tool, not part of the build:
 *   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a '-DQATTN_KERNELS_ARCHS="sm_90a"' \
 *        -I kernels -I quant/include \
 *        kernels/probes/wgmma_f16_sum.cu -o probe16 && ./probe16 out.bin */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_fwd_wgmma.h"

/* d (16 registers of f16x2: row g / g + 8 of n-tile t in d[2t] / d[2t + 1]) += A B^T, one k-step */
static __device__ __forceinline__ void wgmma_f16acc(uint32_t *d, uint64_t da, uint64_t db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, 1, 1, 1, 0, 0;\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
                   "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]),
                   "+r"(d[15])
                 : "l"(da), "l"(db));
}
static __device__ __forceinline__ void wgmma_f32acc(float *d, uint64_t da, uint64_t db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " QATTN_WG_S32 ", %32, %33, 1, 1, 1, 0, 0;\n"
                 : QATTN_WG_F32(d)
                 : "l"(da), "l"(db));
}

__global__ void __launch_bounds__(128) probe(const uint16_t *a, const uint16_t *b, const float *c, float *d, int nsteps,
                                             int f16acc)
{
    __shared__ __align__(1024) uint8_t sA[64 * 64], sB[64 * 64]; /* 64 rows of 32 halves, 64-byte swizzle */
    const int tid = (int)threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, i = lane & 3;
    for (int e = tid; e < 64 * 4; e += 128) {
        const int r = e / 4, ch = e % 4;
        *(uint4 *)(sA + qattn_wg_off<64, 64>(r, ch)) = *(const uint4 *)((const uint8_t *)a + r * 64 + ch * 16);
        *(uint4 *)(sB + qattn_wg_off<64, 64>(r, ch)) = *(const uint4 *)((const uint8_t *)b + r * 64 + ch * 16);
    }
    __syncthreads();
    qattn_fence_proxy_async_smem();
    __syncthreads();
    const uint32_t aa = qattn_wgmma_smem_addr(sA), ab = qattn_wgmma_smem_addr(sB);
    /* element (row g + 8 h, column 8 t + 2 i + e) of the warp's 16 rows */
    auto at = [&](int t, int hh, int e) { return (16 * w + g + 8 * hh) * 64 + 8 * t + 2 * i + e; };
    if (f16acc) {
        uint32_t acc[16];
        for (int t = 0; t < 8; t++)
            for (int hh = 0; hh < 2; hh++)
                acc[2 * t + hh] = qattn_cvt_f16x2_f32(c[at(t, hh, 0)], c[at(t, hh, 1)]);
        for (int x = 0; x < 16; x++)
            qattn_wgmma_fence_reg(*(int *)&acc[x]);
        qattn_wgmma_fence();
        for (int s = 0; s < nsteps; s++)
            wgmma_f16acc(acc, qattn_wg_desc_k<64, 64>(aa, 0, 32 * s), qattn_wg_desc_k<64, 64>(ab, 0, 32 * s));
        qattn_wgmma_commit();
        qattn_wgmma_wait<0>();
        for (int x = 0; x < 16; x++)
            qattn_wgmma_fence_reg(*(int *)&acc[x]);
        for (int t = 0; t < 8; t++)
            for (int hh = 0; hh < 2; hh++) {
                const __half2 v = *(const __half2 *)&acc[2 * t + hh];
                d[at(t, hh, 0)] = __low2float(v);
                d[at(t, hh, 1)] = __high2float(v);
            }
    } else {
        float acc[32];
        for (int t = 0; t < 8; t++)
            for (int e = 0; e < 4; e++)
                acc[4 * t + e] = c[at(t, e >> 1, e & 1)];
        for (int x = 0; x < 32; x++)
            qattn_wgmma_fence_reg(acc[x]);
        qattn_wgmma_fence();
        for (int s = 0; s < nsteps; s++)
            wgmma_f32acc(acc, qattn_wg_desc_k<64, 64>(aa, 0, 32 * s), qattn_wg_desc_k<64, 64>(ab, 0, 32 * s));
        qattn_wgmma_commit();
        qattn_wgmma_wait<0>();
        for (int x = 0; x < 32; x++)
            qattn_wgmma_fence_reg(acc[x]);
        for (int t = 0; t < 8; t++)
            for (int e = 0; e < 4; e++)
                d[at(t, e >> 1, e & 1)] = acc[4 * t + e];
    }
}

static uint64_t st = 88172645463325252ull;
static uint32_t rnd(void)
{
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    return (uint32_t)(st >> 11);
}
static uint16_t h16(float x) { return __half_as_ushort(__float2half_rn(x)); }
static float f16v(uint16_t h) { return __half2float(__ushort_as_half(h)); }
/* a random fp16 with exponent in [lo, hi], either sign unless pos */
static uint16_t rhalf(int lo, int hi, int pos)
{
    const int e = lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
    const float m = 1.0f + (float)(rnd() % 1024) / 1024.0f;
    return h16(ldexpf(m, e) * (pos || (rnd() & 1) ? 1.0f : -1.0f));
}

int main(int argc, char **argv)
{
    FILE *f = fopen(argc > 1 ? argv[1] : "probe16.bin", "wb");
    if (!f)
        return 2;
    uint16_t *a, *b;
    float *c, *d;
    cudaMalloc(&a, 4096), cudaMalloc(&b, 4096), cudaMalloc(&c, 16384), cudaMalloc(&d, 16384);
    static uint16_t ha[2048], hb[2048];
    static float hc[4096], hd[4096];
    const int ncase = 12;
    int n = 0;
    for (int f16acc = 1; f16acc >= 0; f16acc--)
        for (int cs = 0; cs < ncase; cs++) {
            const int nsteps = cs >= 10 ? 2 : 1, kk = 16 * nsteps;
            memset(ha, 0, sizeof ha), memset(hb, 0, sizeof hb), memset(hc, 0, sizeof hc);
            for (int r = 0; r < 64; r++)
                for (int k = 0; k < kk; k++)
                    switch (cs) {
                    case 0: case 1: case 10: case 11: /* P-like A (0..1) times V-like B, C 0 or random */
                        ha[r * 32 + k] = rhalf(-8, -1, 1), hb[r * 32 + k] = rhalf(-4, 2, 0);
                        break;
                    case 2: case 3: /* positive, a few octaves */
                        ha[r * 32 + k] = rhalf(-2, 1, 1), hb[r * 32 + k] = rhalf(-2, 1, 1);
                        break;
                    case 4: case 5: /* two products: 1 and +-2^-j, gap 0..~40 */
                        if (k == 0)
                            ha[r * 32] = h16(1.0f), hb[r * 32] = h16(1.0f);
                        if (k == 1)
                            ha[r * 32 + 1] = h16(ldexpf(1.0f, -(r % 24))),
                                      hb[r * 32 + 1] = h16(ldexpf((cs == 5 && (r & 1)) ? -1.0f : 1.0f, -((r / 3) % 14)));
                        break;
                    case 6: case 7: /* one product +-1 (k 0); C carries the range */
                        if (k == 0)
                            ha[r * 32] = h16(1.0f), hb[r * 32] = h16((cs == 7 && (r & 1)) ? -1.0f : 1.0f);
                        break;
                    case 8: case 9: /* wide range, either sign */
                        ha[r * 32 + k] = rhalf(-14, 6, 0), hb[r * 32 + k] = rhalf(-14, 6, 0);
                        break;
                    }
            /* B's row n holds key n: the same random pattern per column for the two-product cases */
            for (int r = 0; r < 64; r++)
                for (int m = 0; m < 64; m++) {
                    float cv = 0.0f;
                    if (cs == 1 || cs == 3 || cs == 11)
                        cv = f16v(rhalf(-6, 4, 0));
                    if (cs == 6 || cs == 7)
                        cv = f16v(h16(ldexpf(1.0f + (float)(rnd() % 1024) / 1024.0f, (r % 28) - 12) *
                                      ((m & 1) ? -1.0f : 1.0f)));
                    if (cs == 9)
                        cv = f16v(rhalf(-10, 10, 0));
                    hc[r * 64 + m] = cv;
                }
            cudaMemcpy(a, ha, 4096, cudaMemcpyHostToDevice);
            cudaMemcpy(b, hb, 4096, cudaMemcpyHostToDevice);
            cudaMemcpy(c, hc, 16384, cudaMemcpyHostToDevice);
            probe<<<1, 128>>>(a, b, c, d, nsteps, f16acc);
            cudaError_t e = cudaDeviceSynchronize();
            if (e != cudaSuccess) {
                fprintf(stderr, "probe: %s\n", cudaGetErrorString(e));
                return 1;
            }
            cudaMemcpy(hd, d, 16384, cudaMemcpyDeviceToHost);
            int32_t hdr[3] = {cs, nsteps, f16acc};
            fwrite(hdr, 4, 3, f), fwrite(ha, 2, 2048, f), fwrite(hb, 2, 2048, f), fwrite(hc, 4, 4096, f),
                fwrite(hd, 4, 4096, f);
            n++;
        }
    fclose(f);
    printf("probe: %d cases written\n", n);
    return 0;
}
