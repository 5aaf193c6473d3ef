/* Probe: issue rate of the softmax's per-score instructions on one GPU:
 * int32 -> float by cvt.rn.f32.s32 against the integer add into 1.5 * 2^23
 * and a float subtract (qattn_i2f_small), ex2.approx, fma, max, cvt beside
 * ex2 (do they share a pipe?), float -> int32 and the e4m3x2 pack. Each kernel: 8 warps a block, 4 blocks
 * a multiprocessor, 16 independent values a thread, R rounds of asm volatile
 * instructions; prints warp-instructions per clock per multiprocessor.
 * Research tool, not part of the build:
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a kernels/probes/cvt_rate.cu -o cvt_rate && ./cvt_rate */
#include <stdio.h>

#define NV 16
#define R 512

#define BODY(INSTR)                                                            \
    {                                                                          \
        int iv[NV];                                                            \
        float fv[NV];                                                          \
        for (int k = 0; k < NV; k++)                                           \
            iv[k] = (int)threadIdx.x * 7 + k * 131 + seed, fv[k] = 0.001f * (float)iv[k]; \
        for (int r = 0; r < R; r++) {                                          \
            _Pragma("unroll") for (int k = 0; k < NV; k++) { INSTR; }          \
        }                                                                      \
        float acc = 0.0f;                                                      \
        for (int k = 0; k < NV; k++)                                           \
            acc += fv[k] + (float)iv[k];                                       \
        out[blockIdx.x * blockDim.x + threadIdx.x] = acc;                      \
    }

/* each instruction depends on the previous one of its value (a chain), so
 * the 16 values a thread and 32 warps a multiprocessor are the only overlap */
__global__ void k_cvt(float *out, int seed)
BODY(asm volatile("{.reg .f32 t; cvt.rn.f32.s32 t, %0; mov.b32 %0, t;}" : "+r"(iv[k])))
__global__ void k_magic(float *out, int seed)
BODY(asm volatile("{.reg .f32 t; add.s32 %0, %0, 0x4B400000; mov.b32 t, %0; sub.rn.f32 t, t, 0f4B400000; "
                  "mov.b32 %0, t;}" : "+r"(iv[k])))
__global__ void k_ex2(float *out, int seed)
BODY(asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(fv[k])))
__global__ void k_fma(float *out, int seed)
BODY(asm volatile("fma.rn.f32 %0, %0, 0f3F800001, 0f3F000000;" : "+f"(fv[k])))
__global__ void k_max(float *out, int seed)
BODY(asm volatile("max.f32 %0, %0, 0f3F000000;" : "+f"(fv[k])))
__global__ void k_fadd(float *out, int seed)
BODY(asm volatile("add.rn.f32 %0, %0, 0f3F000000;" : "+f"(fv[k])))
__global__ void k_cvt_ex2(float *out, int seed)
BODY(asm volatile("{.reg .f32 t; cvt.rn.f32.s32 t, %0; ex2.approx.ftz.f32 t, t; mov.b32 %0, t;}" : "+r"(iv[k])))
__global__ void k_magic_ex2(float *out, int seed)
BODY(asm volatile("{.reg .f32 t; add.s32 %0, %0, 0x4B400000; mov.b32 t, %0; sub.rn.f32 t, t, 0f4B400000; "
                  "ex2.approx.ftz.f32 t, t; mov.b32 %0, t;}" : "+r"(iv[k])))
__global__ void k_f2i(float *out, int seed)
BODY(asm volatile("{.reg .f32 t; mov.b32 t, %0; cvt.rni.s32.f32 %0, t;}" : "+r"(iv[k])))
__global__ void k_e4m3x2(float *out, int seed)
BODY(asm volatile("{.reg .b16 h; .reg .f32 t; mov.b32 t, %0; cvt.rn.satfinite.e4m3x2.f32 h, t, t; cvt.u32.u16 %0, h;}"
                  : "+r"(iv[k])))

int main(void)
{
    int sms = 0, khz = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    const int blocks = sms * 4, threads = 256;
    float *out;
    cudaMalloc(&out, (size_t)blocks * threads * 4);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    struct {
        const char *name;
        void (*k)(float *, int);
        int per; /* instructions a (round, value) */
    } ks[] = {{"cvt.rn.f32.s32", k_cvt, 1},     {"add.s32 + sub.f32", k_magic, 2}, {"ex2.approx", k_ex2, 1},
              {"fma", k_fma, 1},                {"max", k_max, 1},                 {"add.f32", k_fadd, 1},
              {"cvt + ex2", k_cvt_ex2, 2},      {"add + sub + ex2", k_magic_ex2, 3},
              {"cvt.rni.s32.f32", k_f2i, 1},    {"e4m3x2 pack + u16 widen", k_e4m3x2, 2}};
    printf("%d SMs, %d MHz (nominal)\n", sms, khz / 1000);
    for (auto &x : ks) {
        for (int w = 0; w < 2; w++)
            x.k<<<blocks, threads>>>(out, w);
        cudaEventRecord(e0);
        x.k<<<blocks, threads>>>(out, 3);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        const double warp_instr = (double)blocks * threads / 32 * R * NV * x.per;
        const double clocks = ms * 1e-3 * khz * 1e3;
        printf("%-20s %8.3f ms  %6.2f warp-instr / clk / SM  (%6.2f per (round, value) / clk / SM)\n", x.name, ms,
               warp_instr / clocks / sms, warp_instr / x.per / clocks / sms);
    }
    return cudaGetLastError() != cudaSuccess;
}
