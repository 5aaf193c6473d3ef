/* Probe: what sum does one Hopper e4m3 wgmma (m64n64k32, f32 accumulator)
 * compute? Runs cases of A (64 x 32 or 64 x 64 e4m3), B (64 keys x the same),
 * C (64 x 64 fp32 accumulator in) through one or two k-steps and writes
 * A, B, C and D = the tensor core's C + A B^T to a binary file for
 * kernels/probes/wgmma_fp8_sum.py, which fits models of the sum. Research
 * tool (kernels/DESIGN.md "fp8 Q.K"), not part of the build:
 *   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a '-DQATTN_KERNELS_ARCHS="sm_90a"' \
 *        -I kernels -I quant/include \
 *        kernels/probes/wgmma_fp8_sum.cu -o probe && ./probe out.bin */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_fwd_wgmma.h"

__global__ void __launch_bounds__(128) probe(const uint8_t *a, const uint8_t *b, const float *c, float *d, int nsteps)
{
    __shared__ __align__(1024) uint8_t sA[64 * 64], sB[64 * 64]; /* 64 rows of 64 bytes, 64-byte swizzle */
    const int tid = (int)threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, i = lane & 3;
    for (int e = tid; e < 64 * 4; e += 128) {
        const int r = e / 4, ch = e % 4;
        *(uint4 *)(sA + qattn_wg_off<64, 64>(r, ch)) = *(const uint4 *)(a + r * 64 + ch * 16);
        *(uint4 *)(sB + qattn_wg_off<64, 64>(r, ch)) = *(const uint4 *)(b + r * 64 + ch * 16);
    }
    __syncthreads();
    qattn_fence_proxy_async_smem();
    __syncthreads();
    float acc[32];
    for (int t = 0; t < 8; t++)
        for (int e = 0; e < 4; e++)
            acc[4 * t + e] = c[(16 * w + g + 8 * (e >> 1)) * 64 + 8 * t + 2 * i + (e & 1)];
    for (int x = 0; x < 32; x++)
        qattn_wgmma_fence_reg(acc[x]);
    qattn_wgmma_fence();
    const uint32_t aa = qattn_wgmma_smem_addr(sA), ab = qattn_wgmma_smem_addr(sB);
    qattn_wgmma_m64k32_e4m3_ss<64>(acc, qattn_wg_desc_k<64, 64>(aa, 0, 0), qattn_wg_desc_k<64, 64>(ab, 0, 0), 1);
    if (nsteps > 1)
        qattn_wgmma_m64k32_e4m3_ss<64>(acc, qattn_wg_desc_k<64, 64>(aa, 0, 32), qattn_wg_desc_k<64, 64>(ab, 0, 32), 1);
    qattn_wgmma_commit();
    qattn_wgmma_wait<0>();
    for (int x = 0; x < 32; x++)
        qattn_wgmma_fence_reg(acc[x]);
    for (int t = 0; t < 8; t++)
        for (int e = 0; e < 4; e++)
            d[(16 * w + g + 8 * (e >> 1)) * 64 + 8 * t + 2 * i + (e & 1)] = acc[4 * t + e];
}

static uint64_t st = 88172645463325252ull;
static uint32_t rnd(void)
{
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    return (uint32_t)(st >> 11);
}
static uint8_t rcode(void) /* any finite e4m3 code */
{
    uint8_t x;
    do
        x = (uint8_t)rnd();
    while ((x & 0x7f) == 0x7f);
    return x;
}
/* e4m3 code of +-2^e, e in -9..8 */
static uint8_t pow2(int e, int neg)
{
    uint8_t x = e >= -6 ? (uint8_t)((e + 7) << 3) : (uint8_t)(1u << (e + 9));
    return (uint8_t)(x | (neg ? 0x80 : 0));
}

int main(int argc, char **argv)
{
    FILE *f = fopen(argc > 1 ? argv[1] : "probe.bin", "wb");
    if (!f)
        return 2;
    uint8_t *a, *b;
    float *c, *d;
    cudaMalloc(&a, 4096), cudaMalloc(&b, 4096), cudaMalloc(&c, 16384), cudaMalloc(&d, 16384);
    static uint8_t ha[4096], hb[4096];
    static float hc[4096], hd[4096];
    const int ncase = 10;
    for (int cs = 0; cs < ncase; cs++) {
        int nsteps = cs >= 8 ? 2 : 1;
        memset(ha, 0, sizeof ha), memset(hb, 0, sizeof hb), memset(hc, 0, sizeof hc);
        const int kk = 32 * nsteps;
        for (int r = 0; r < 64; r++)
            for (int k = 0; k < kk; k++) {
                switch (cs) {
                case 0: case 1: case 8: case 9: /* random codes, C 0 or random */
                    ha[r * 64 + k] = rcode(), hb[r * 64 + k] = rcode();
                    break;
                case 2: case 3: /* positive, exponents within 4 octaves */
                    ha[r * 64 + k] = (uint8_t)(0x30 + rnd() % 32), hb[r * 64 + k] = (uint8_t)(0x30 + rnd() % 32);
                    break;
                case 4: case 5: /* two products: 1 and +-2^-(m + n'), exponent gap 0..~34 */
                    if (k == 0)
                        ha[r * 64] = pow2(0, 0), hb[r * 64] = pow2(0, 0);
                    if (k == 1)
                        ha[r * 64 + 1] = pow2(-(r % 18), 0), hb[r * 64 + 1] = pow2(-((r / 2) % 18), cs == 5 && (r & 1));
                    break;
                case 6: case 7: /* one product 1 or -1 (k 0), the rest 0; C carries the range */
                    if (k == 0)
                        ha[r * 64] = pow2(0, 0), hb[r * 64] = pow2(0, cs == 7 && (r & 1));
                    break;
                }
            }
        for (int r = 0; r < 64; r++)
            for (int n = 0; n < 64; n++) {
                float cv = 0.0f;
                if (cs == 1 || cs == 3 || cs == 9)
                    cv = (float)((int)(rnd() % 2000001) - 1000000) * (cs == 3 ? 1e-3f : 1e-1f);
                if (cs == 6 || cs == 7)
                    cv = ldexpf(1.0f + (float)(rnd() % 1024) / 1024.0f, r % 32) * ((n & 1) ? -1.0f : 1.0f);
                hc[r * 64 + n] = cv;
            }
        cudaMemcpy(a, ha, 4096, cudaMemcpyHostToDevice);
        cudaMemcpy(b, hb, 4096, cudaMemcpyHostToDevice);
        cudaMemcpy(c, hc, 16384, cudaMemcpyHostToDevice);
        probe<<<1, 128>>>(a, b, c, d, nsteps);
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            fprintf(stderr, "probe: %s\n", cudaGetErrorString(e));
            return 1;
        }
        cudaMemcpy(hd, d, 16384, cudaMemcpyDeviceToHost);
        int32_t hdr[2] = {cs, nsteps};
        fwrite(hdr, 4, 2, f), fwrite(ha, 1, 4096, f), fwrite(hb, 1, 4096, f), fwrite(hc, 4, 4096, f), fwrite(hd, 4, 4096, f);
    }
    fclose(f);
    printf("probe: %d cases written\n", ncase);
    return 0;
}
