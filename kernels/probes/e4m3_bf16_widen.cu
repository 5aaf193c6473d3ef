/* Probe: e4m3 codes times an e8m0 scale 2^k to bf16 by bit placement and one
 * bf16x2 multiply: a code s eeee mmm placed as bf16 s 0000eeee mmm0000 is the
 * code's value times 2^-120, subnormal codes included (bf16 subnormals), so
 * that mul.rn.bf16x2 by 2^(120 + k) gives the exact bf16 value if the
 * multiply keeps subnormal inputs. Checks every code and scale byte against
 * the float reference (value x 2^k rounded to bf16) and prints the scale
 * bytes where all 256 codes agree (NVIDIA H200, 2026-11-29: 0 .. 134, the
 * multiply keeping subnormal inputs and outputs; kernels/logs/h200_sparse_widen_ab.txt).
 * Research tool, not part of the build:
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a kernels/probes/e4m3_bf16_widen.cu -o e4m3_bf16_widen
 *   ./e4m3_bf16_widen */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

__global__ void widen(uint16_t *out) /* [256 scales][256 codes] */
{
    const unsigned sc = blockIdx.x, c = threadIdx.x * 4; /* 64 threads x 4 codes */
    const uint32_t w = c | (c + 1) << 8 | (c + 2) << 16 | (c + 3) << 24;
    /* 2^(120 + k) = 2^(sc - 7) as bf16: exponent field sc - 7 + 127 = sc + 120 (finite for sc <= 134) */
    const uint32_t m16 = sc + 120u <= 254u ? (sc + 120u) << 7 : 0x7f80u;
    const uint32_t mul = m16 | m16 << 16;
    uint32_t o[2];
    for (int h = 0; h < 2; h++) {
        uint32_t t;
        /* lanes [sign-fill(b)][b]: b = code 2h (low lane), 2h + 1 (high lane) */
        asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(t) : "r"(w), "r"(h ? 0xb3a2u : 0x9180u));
        t = (t << 4) & 0x87f087f0u;
        asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(o[h]) : "r"(t), "r"(mul));
    }
    for (int k = 0; k < 4; k++)
        out[sc * 256 + c + k] = (uint16_t)(o[k >> 1] >> (16 * (k & 1)));
}

static float e4m3(unsigned c)
{
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    float v = e ? ldexpf(1.f + m / 8.f, e - 7) : ldexpf(m / 8.f, -6);
    return s ? -v : v;
}

static uint16_t bf16_rne(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

int main(void)
{
    uint16_t *d, h[256 * 256];
    cudaMalloc(&d, sizeof h);
    widen<<<256, 64>>>(d);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int lo = -1, hi = -1, bad_in = 0;
    for (unsigned sc = 0; sc < 256; sc++) {
        int bad = 0;
        for (unsigned c = 0; c < 256; c++) {
            if ((c & 0x7f) == 0x7f)
                continue; /* NaN codes */
            const uint16_t ref = bf16_rne(e4m3(c) * ldexpf(1.f, (int)sc - 127));
            bad += h[sc * 256 + c] != ref;
        }
        if (!bad && lo < 0)
            lo = (int)sc;
        if (!bad)
            hi = (int)sc;
        if (sc >= 10 && sc <= 134)
            bad_in += bad;
    }
    int dev;
    cudaDeviceProp pr;
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(&pr, dev);
    printf("%s: every code exact for scale bytes %d .. %d; mismatches with scale bytes 10 .. 134: %d\n", pr.name, lo,
           hi, bad_in);
    /* the subnormal codes at scale byte 127 (k = 0), as read back */
    printf("code 0x01 -> 0x%04x (ref 0x%04x), 0x81 -> 0x%04x, 0x07 -> 0x%04x, 0x08 -> 0x%04x\n", h[127 * 256 + 1],
           bf16_rne(e4m3(1)), h[127 * 256 + 0x81], h[127 * 256 + 7], h[127 * 256 + 8]);
    return bad_in != 0;
}
