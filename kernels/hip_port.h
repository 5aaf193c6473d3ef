/* HIP spelling for every backend.
 *
 * The kernels and their host code are written in HIP. This header makes that
 * one source build three ways:
 *
 *   nvcc (__CUDACC__ / __NVCC__)   HIP names mapped to the CUDA runtime. Debian's
 *                                  HIP 5.2 NVIDIA headers do not compile with
 *                                  CUDA 13, so the project owns this mapping.
 *   hipcc / clang -x hip (__HIP__) the real <hip/hip_runtime.h> (AMD).
 *   QATTN_HIP_SIM (a C++ host compiler, no GPU): a small simulator that runs
 *                                  each thread block on the CPU, one fiber per
 *                                  thread, one block at a time, so the portable
 *                                  kernels can be checked against the CPU
 *                                  emulation on a machine without a GPU.
 *
 * Only what the kernels use is mapped; add names here, never #ifdef a kernel.
 * Kernels are launched with hipLaunchKernelGGL(kernel, grid, block, smem,
 * stream, args...), where kernel is a plain name or a function pointer (take
 * the address of a template instance first: commas in template arguments
 * would split the macro's arguments). */
#ifndef QATTN_HIP_PORT_H
#define QATTN_HIP_PORT_H

#if defined(QATTN_HIP_SIM)
/* ------------------------------------------------------------------ */
/* host simulation                                                     */
/* ------------------------------------------------------------------ */
#ifndef __cplusplus
#error "QATTN_HIP_SIM needs a C++ compiler (the kernels are HIP C++)"
#endif
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define QATTN_HIP_BACKEND "host-sim"
#define QATTN_WARP_SIZE 32

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static thread_local

typedef int hipError_t;
enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorLaunchFailure = 3
};
typedef int hipMemcpyKind;
enum {
    hipMemcpyHostToHost = 0,
    hipMemcpyHostToDevice = 1,
    hipMemcpyDeviceToHost = 2,
    hipMemcpyDeviceToDevice = 3,
    hipMemcpyDefault = 4
};
typedef struct qattn_sim_stream *hipStream_t;
typedef struct qattn_sim_event {
    double t;
} *hipEvent_t;
typedef int hipFuncAttribute;
enum { hipFuncAttributeMaxDynamicSharedMemorySize = 8 };
typedef int hipDeviceAttribute_t;
enum {
    hipDeviceAttributeSharedMemPerBlockOptin = 97,
    hipDeviceAttributeMultiprocessorCount = 16,
    hipDeviceAttributeL2CacheSize = 38
};

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* Blocks run in slots: one at a time for hipLaunchKernelGGL, up to
 * QATTN_SIM_SLOTS at once for qattn_port_launch_resident (kernels whose
 * blocks wait for each other; they must keep all their shared memory in
 * the dynamic buffer: a static __shared__ variable is one per host thread,
 * shared by the slots). Every thread is a fiber; fibers switch at barriers
 * and at qattn_port_pause, round robin over all slots; a finished block's
 * slot takes the next block in launch order. */
#define QATTN_SIM_SLOTS 8
struct qattn_sim_slot {
    dim3 bid;
    int busy = 0, nalive = 0, arrived = 0;
    unsigned long gen = 0;
    std::vector<unsigned char> smem;
    std::vector<unsigned long long> shfl; /* a word per thread for the shuffles */
    std::vector<unsigned long long> xchg; /* two words per thread for the emulated matrix instructions */
};
struct qattn_sim_state {
    dim3 grid, block;
    int nthreads = 0, cur = 0;
    std::vector<ucontext_t> ctx;        /* [slots * nthreads] */
    std::vector<dim3> tid;              /* [slots * nthreads] */
    std::vector<char> alive;            /* [slots * nthreads] */
    std::vector<char *> stacks;         /* malloc'ed, untouched pages cost nothing */
    std::vector<qattn_sim_slot> slots;
    /* asynchronous copies per fiber: committed groups, oldest first, then the open group */
    std::vector<std::vector<std::vector<std::pair<void *, const void *>>>> cpq;
    ucontext_t sched;
    const std::function<void()> *body = nullptr;
    hipError_t last = hipSuccess;
};

inline qattn_sim_state &qattn_sim_state_get()
{
    static thread_local qattn_sim_state s;
    return s;
}
inline qattn_sim_slot &qattn_sim_slot_get()
{
    qattn_sim_state &s = qattn_sim_state_get();
    return s.slots[(size_t)(s.cur / s.nthreads)];
}

#define threadIdx (qattn_sim_state_get().tid[qattn_sim_state_get().cur])
#define blockIdx (qattn_sim_slot_get().bid)
#define blockDim (qattn_sim_state_get().block)
#define gridDim (qattn_sim_state_get().grid)
#define QATTN_DYNAMIC_SHARED(type, name) type *name = (type *)qattn_sim_slot_get().smem.data()

inline void qattn_sim_yield()
{
    qattn_sim_state &s = qattn_sim_state_get();
    swapcontext(&s.ctx[(size_t)s.cur], &s.sched);
}

/* A barrier over the live threads of the block (threads that returned no
 * longer take part, as on the GPU). */
inline void __syncthreads()
{
    qattn_sim_slot &k = qattn_sim_slot_get();
    unsigned long g = k.gen;
    if (++k.arrived >= k.nalive) {
        k.arrived = 0;
        k.gen++;
        return;
    }
    while (k.gen == g)
        qattn_sim_yield();
}

inline void qattn_sim_fiber_entry()
{
    qattn_sim_state &s = qattn_sim_state_get();
    (*s.body)();
    qattn_sim_slot &k = qattn_sim_slot_get();
    s.alive[(size_t)s.cur] = 0;
    k.nalive--;
    if (k.arrived > 0 && k.arrived >= k.nalive) { /* the others wait for us no more */
        k.arrived = 0;
        k.gen++;
    }
}

inline hipError_t qattn_sim_launch(dim3 grid, dim3 block, size_t smem, const std::function<void()> &body, int nslot)
{
    qattn_sim_state &s = qattn_sim_state_get();
    int n = (int)(block.x * block.y * block.z);
    if (n <= 0 || n > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0)
        return s.last = hipErrorInvalidValue;
    const size_t stack = 256 * 1024;
    const size_t nf = (size_t)nslot * (size_t)n;
    s.grid = grid;
    s.block = block;
    s.nthreads = n;
    s.body = &body;
    s.ctx.assign(nf, ucontext_t());
    s.tid.assign(nf, dim3(0, 0, 0));
    s.alive.assign(nf, 0);
    s.cpq.assign(nf, std::vector<std::vector<std::pair<void *, const void *>>>(1));
    while (s.stacks.size() < nf) {
        char *st = (char *)malloc(stack);
        if (!st)
            return s.last = hipErrorOutOfMemory;
        s.stacks.push_back(st);
    }
    s.slots.assign((size_t)nslot, qattn_sim_slot());
    const unsigned long total = (unsigned long)grid.x * grid.y * grid.z;
    unsigned long next = 0, round = 0;
    for (;;) {
        int busy = 0;
        for (int k = 0; k < nslot; k++) {
            qattn_sim_slot &sl = s.slots[(size_t)k];
            if (sl.busy && sl.nalive == 0)
                sl.busy = 0;
            if (!sl.busy && next < total) { /* the next block, x fastest */
                const unsigned long lin = next++;
                sl.bid = dim3((unsigned)(lin % grid.x), (unsigned)(lin / grid.x % grid.y),
                              (unsigned)(lin / ((unsigned long)grid.x * grid.y)));
                sl.smem.assign(smem ? smem : 1, 0xff); /* uninitialized shared memory reads as NaN */
                sl.shfl.assign((size_t)n, 0ull);
                sl.xchg.assign(2 * (size_t)n, 0ull);
                sl.busy = 1;
                sl.nalive = n;
                sl.arrived = 0;
                for (int t = 0; t < n; t++) {
                    const size_t f = (size_t)k * n + t;
                    s.tid[f] = dim3((unsigned)t % block.x, (unsigned)t / block.x % block.y,
                                    (unsigned)t / (block.x * block.y));
                    getcontext(&s.ctx[f]);
                    s.ctx[f].uc_stack.ss_sp = s.stacks[f];
                    s.ctx[f].uc_stack.ss_size = stack;
                    s.ctx[f].uc_link = &s.sched;
                    makecontext(&s.ctx[f], qattn_sim_fiber_entry, 0);
                    s.alive[f] = 1;
                    s.cpq[f].assign(1, {});
                }
            }
            busy |= sl.busy;
        }
        if (!busy)
            break;
        /* slot k runs every (1 + k % 3)-th round: the blocks of a resident launch drift apart, as
         * on a GPU, so a block that reads another's result without waiting for it reads too early */
        for (size_t f = 0; f < nf; f++)
            if (s.alive[f] && round % (1 + f / (size_t)n % 3) == 0) {
                s.cur = (int)f;
                swapcontext(&s.sched, &s.ctx[f]);
            }
        round++;
    }
    return hipSuccess;
}

#define QATTN_SIM_LAUNCH(nslot, kernel, grid, block, smem, stream, ...)                         \
    do {                                                                                        \
        (void)(stream);                                                                         \
        std::function<void()> qattn_sim_body_ = [=]() { kernel(__VA_ARGS__); };                \
        qattn_sim_state_get().last = qattn_sim_launch(dim3(grid), dim3(block), (size_t)(smem), \
                                                      qattn_sim_body_, (nslot));                \
    } while (0)
#define hipLaunchKernelGGL(kernel, grid, block, smem, stream, ...) \
    QATTN_SIM_LAUNCH(1, kernel, grid, block, smem, stream, __VA_ARGS__)
/* blocks that wait for other blocks of the same launch (see the slots) */
#define qattn_port_launch_resident(kernel, grid, block, smem, stream, ...) \
    QATTN_SIM_LAUNCH(QATTN_SIM_SLOTS, kernel, grid, block, smem, stream, __VA_ARGS__)
/* a launch that, when ov is nonzero, may start while the previous kernel
 * in the stream finishes (programmatic dependent launch on sm_90; here a
 * launch after it either way), and the same for blocks that wait for each
 * other (the slots of qattn_port_launch_resident) */
#define qattn_port_launch_overlap(ov, kernel, grid, block, smem, stream, ...) \
    QATTN_SIM_LAUNCH(1, kernel, grid, block, smem, stream, __VA_ARGS__)
#define qattn_port_launch_resident_overlap(ov, kernel, grid, block, smem, stream, ...) \
    QATTN_SIM_LAUNCH(QATTN_SIM_SLOTS, kernel, grid, block, smem, stream, __VA_ARGS__)
/* the next kernel, if launched by qattn_port_launch_overlap, may start */
#define qattn_port_dependents_go() ((void)0)
/* in a kernel launched overlapping: wait until the previous kernel has finished and its writes are visible */
#define qattn_port_wait_prior() ((void)0)
/* inside a spin loop on another block's flag: let the other fibers run */
#define qattn_port_pause() qattn_sim_yield()
#define __threadfence() ((void)0)
template <typename F>
inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int *n, F, int, size_t)
{
    *n = QATTN_SIM_SLOTS; /* one "multiprocessor" (hipDeviceAttributeMultiprocessorCount) */
    return hipSuccess;
}

/* atomics: fibers switch only at barriers and pauses, so plain updates */
template <typename T, typename F>
inline T qattn_sim_rmw(T *a, F f)
{
    const T old = *a;
    *a = f(old);
    return old;
}
inline unsigned atomicAdd(unsigned *a, unsigned v) { return qattn_sim_rmw(a, [v](unsigned o) { return o + v; }); }
inline unsigned atomicExch(unsigned *a, unsigned v) { return qattn_sim_rmw(a, [v](unsigned) { return v; }); }
inline unsigned atomicMax(unsigned *a, unsigned v) { return qattn_sim_rmw(a, [v](unsigned o) { return o > v ? o : v; }); }
inline int atomicOr(int *a, int v) { return qattn_sim_rmw(a, [v](int o) { return o | v; }); }

/* the index of the running thread in its block */
inline int qattn_sim_thread() { return qattn_sim_state_get().cur % qattn_sim_state_get().nthreads; }

/* HIP's shuffle: value of lane ^ lane_mask (within groups of width lanes).
 * Every thread of the block must take part (it is two block barriers
 * here), which the kernels that shuffle guarantee: no shuffle under a
 * branch that differs between threads. */
template <typename T>
inline T __shfl_xor(T v, int lane_mask, int width = 32)
{
    static_assert(sizeof(T) <= sizeof(unsigned long long), "__shfl_xor: at most 8 bytes");
    qattn_sim_state &s = qattn_sim_state_get();
    qattn_sim_slot &k = qattn_sim_slot_get();
    const int t = qattn_sim_thread(), src = (t & ~(width - 1)) | ((t ^ lane_mask) & (width - 1));
    memcpy(&k.shfl[(size_t)t], &v, sizeof v);
    __syncthreads();
    T r;
    memcpy(&r, &k.shfl[(size_t)(src < s.nthreads ? src : t)], sizeof r);
    __syncthreads();
    return r;
}

/* The lane exchange of the emulated wave-wide matrix instructions
 * (mfma_amd.h): every thread of the block stores two words, a block barrier,
 * then the words of every thread [2 * thread + 0..1] can be read until
 * qattn_sim_xchg_end (a second barrier). As for the shuffles, every thread of
 * the block must take part. */
inline const unsigned long long *qattn_sim_xchg_begin(unsigned long long a, unsigned long long b)
{
    qattn_sim_slot &k = qattn_sim_slot_get();
    const size_t t = (size_t)qattn_sim_thread();
    k.xchg[2 * t] = a;
    k.xchg[2 * t + 1] = b;
    __syncthreads();
    return k.xchg.data();
}
inline void qattn_sim_xchg_end() { __syncthreads(); }

/* 16- and 8-byte vectors (CUDA / HIP vector types) */
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};

/* exact conversions that the GPU backends do in hardware (qattn/numerics.h here) */
#define qattn_port_f16_to_f32(h) qattn_num_fp16_decode(h)
#define qattn_port_f16_to_f64(h) ((double)qattn_num_fp16_decode(h))
#define qattn_port_e4m3x2(lo, hi) \
    ((unsigned short)(qattn_num_e4m3_encode(lo) | ((unsigned)qattn_num_e4m3_encode(hi) << 8)))
inline int qattn_port_rint(float x) { return (int)std::nearbyint(x); } /* round to nearest even */
/* asynchronous 16-byte copies global -> shared (cp.async on NVIDIA): a
 * thread's copies since its last commit form a group; here a copy lands only
 * when qattn_port_cp_wait(n) retires its group (all but the n newest
 * committed groups), so a kernel that reads a tile before waiting for it
 * reads what was there before (shared memory starts as 0xff bytes) */
inline void qattn_port_cp16(void *smem, const void *g)
{
    qattn_sim_state &s = qattn_sim_state_get();
    s.cpq[(size_t)s.cur].back().emplace_back(smem, g);
}
inline void qattn_port_cp_commit()
{
    qattn_sim_state &s = qattn_sim_state_get();
    s.cpq[(size_t)s.cur].emplace_back();
}
inline void qattn_port_cp_wait(int n)
{
    qattn_sim_state &s = qattn_sim_state_get();
    auto &q = s.cpq[(size_t)s.cur];
    while ((int)q.size() - 1 > n) { /* committed groups beyond n: the oldest lands */
        for (auto &c : q.front())
            memcpy(c.first, c.second, 16);
        q.erase(q.begin());
    }
}
/* a store of data that is not read again soon (NVIDIA: evict-first in the caches) */
template <typename T>
inline void qattn_port_st_stream(T *p, T v) { *p = v; }
/* the threads of a 32-thread warp see each other's shared-memory writes (here: a block barrier; call it where the whole block does) */
#define qattn_port_syncwarp() __syncthreads()
/* a barrier of the n threads (whole warps) that name barrier id (1..15)
 * (here: a block barrier; call it where every thread calls one) */
#define qattn_port_bar_sync(id, n) __syncthreads()
inline float qattn_port_fma(float a, float b, float c) { return std::fma(a, b, c); } /* one rounding */
/* per 16-bit half, the unsigned maximum */
inline unsigned qattn_port_vmaxu2(unsigned a, unsigned b)
{
    const unsigned lo = (a & 0xffffu) > (b & 0xffffu) ? a & 0xffffu : b & 0xffffu;
    return lo | ((a >> 16) > (b >> 16) ? a >> 16 : b >> 16) << 16;
}
/* bytes of {y, x} (x the low word) picked by the low 4-bit fields of s */
inline unsigned qattn_port_byte_perm(unsigned x, unsigned y, unsigned s)
{
    const unsigned long long v = (unsigned long long)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++)
        r |= (unsigned)(v >> (8 * ((s >> (4 * i)) & 7)) & 0xffu) << (8 * i);
    return r;
}
#define QATTN_UNROLL /* loops over register arrays: fully unrolled on the GPUs */

inline hipError_t hipMalloc(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    if (!*p)
        return hipErrorOutOfMemory;
    memset(*p, 0xa5, n); /* device memory starts as garbage */
    return hipSuccess;
}
inline hipError_t hipFree(void *p)
{
    free(p);
    return hipSuccess;
}
inline hipError_t hipMemcpy(void *d, const void *s, size_t n, hipMemcpyKind)
{
    if (n)
        memcpy(d, s, n);
    return hipSuccess;
}
inline hipError_t hipMemcpyAsync(void *d, const void *s, size_t n, hipMemcpyKind k, hipStream_t)
{
    return hipMemcpy(d, s, n, k);
}
inline hipError_t hipMemset(void *d, int v, size_t n)
{
    if (n)
        memset(d, v, n);
    return hipSuccess;
}
inline hipError_t hipMemsetAsync(void *d, int v, size_t n, hipStream_t) { return hipMemset(d, v, n); }
inline hipError_t hipDeviceSynchronize() { return hipSuccess; }
inline hipError_t hipStreamSynchronize(hipStream_t) { return hipSuccess; }
/* streams and events: launches run in order, at once, so a second stream
 * and the events that order it are tokens only */
enum { hipStreamNonBlocking = 1, hipEventDisableTiming = 2 };
inline hipError_t hipStreamCreateWithFlags(hipStream_t *s, unsigned)
{
    static char token;
    *s = (hipStream_t)(void *)&token;
    return hipSuccess;
}
inline hipError_t hipStreamDestroy(hipStream_t) { return hipSuccess; }
inline hipError_t hipEventCreateWithFlags(hipEvent_t *e, unsigned)
{
    static qattn_sim_event token;
    *e = &token;
    return hipSuccess;
}
inline hipError_t hipEventRecord(hipEvent_t, hipStream_t) { return hipSuccess; }
inline hipError_t hipStreamWaitEvent(hipStream_t, hipEvent_t, unsigned) { return hipSuccess; }
inline hipError_t hipGetLastError()
{
    hipError_t e = qattn_sim_state_get().last;
    qattn_sim_state_get().last = hipSuccess;
    return e;
}
inline hipError_t hipPeekAtLastError() { return qattn_sim_state_get().last; }
inline const char *hipGetErrorString(hipError_t e)
{
    switch (e) {
    case hipSuccess: return "no error";
    case hipErrorInvalidValue: return "invalid argument";
    case hipErrorOutOfMemory: return "out of memory";
    default: return "launch failure";
    }
}
inline hipError_t hipFuncSetAttribute(const void *, hipFuncAttribute, int) { return hipSuccess; }
inline hipError_t hipGetDeviceCount(int *n)
{
    *n = 1;
    return hipSuccess;
}
inline hipError_t hipGetDevice(int *d)
{
    *d = 0;
    return hipSuccess;
}
/* one "multiprocessor" of QATTN_SIM_SLOTS resident blocks, 227 KiB of shared memory per block */
inline hipError_t hipDeviceGetAttribute(int *v, hipDeviceAttribute_t a, int)
{
    *v = a == hipDeviceAttributeMultiprocessorCount ? 1 : 232448;
    return hipSuccess;
}

#elif defined(__CUDACC__) || defined(__NVCC__)
/* ------------------------------------------------------------------ */
/* NVIDIA: HIP names on the CUDA runtime                               */
/* ------------------------------------------------------------------ */
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#define QATTN_HIP_BACKEND "nvidia"
#define QATTN_WARP_SIZE 32
#define QATTN_DYNAMIC_SHARED(type, name) extern __shared__ type name[]

#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipGetErrorString cudaGetErrorString
#define hipGetErrorName cudaGetErrorName
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError

#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyKind cudaMemcpyKind
#define hipMemcpyHostToHost cudaMemcpyHostToHost
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyDefault cudaMemcpyDefault

#define hipStream_t cudaStream_t
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipEvent_t cudaEvent_t
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDisableTiming cudaEventDisableTiming
#define hipStreamWaitEvent cudaStreamWaitEvent

#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipGetDeviceCount cudaGetDeviceCount
#define hipDeviceProp_t cudaDeviceProp
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeSharedMemPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeL2CacheSize cudaDevAttrL2CacheSize
#define hipFuncAttribute cudaFuncAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipFuncSetAttribute cudaFuncSetAttribute

#define hipLaunchKernelGGL(kernel, grid, block, smem, stream, ...) \
    kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
/* blocks that wait for other blocks of the same launch: the caller makes
 * sure that enough of them are resident (hipOccupancyMaxActiveBlocksPerMultiprocessor) */
#define qattn_port_launch_resident hipLaunchKernelGGL
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define qattn_port_pause() __nanosleep(64)

/* A launch that, when ov is nonzero, may start while the previous kernel in
 * the stream finishes (programmatic dependent launch, compute capability 9.0
 * on; otherwise a plain launch): for a kernel that reads nothing the
 * previous one writes, or that calls qattn_port_wait_prior before it does.
 * Its blocks start once every block of the previous kernel has called
 * qattn_port_dependents_go or exited. Work after it in the stream still
 * waits for both. */
static inline int qattn_port_overlap_ok(void)
{
    /* remembered per device (a host may mix compute capabilities): 0 not
     * asked yet, 1 no, 2 yes */
    static unsigned char memo[64];
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) {
        (void)cudaGetLastError();
        return 0;
    }
    if (dev >= 64)
        return 0; /* beyond the table: plain launches, never wrong */
    if (!memo[dev]) {
        const int yes =
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
        memo[dev] = yes ? 2 : 1;
        (void)cudaGetLastError();
    }
    return memo[dev] == 2;
}
/* the launch attribute of thread-block clusters of cz blocks along z */
static inline void qattn_port_cluster_attr(cudaLaunchAttribute *a, unsigned cz)
{
    a->id = cudaLaunchAttributeClusterDimension;
    a->val.clusterDim.x = 1;
    a->val.clusterDim.y = 1;
    a->val.clusterDim.z = cz;
}
/* a launch with, when ov is nonzero, programmatic dependent launch and, when cz > 1, thread-block
 * clusters of cz blocks along z (grid.z a multiple of cz); compute capability 9.0 on */
template <typename... KA, typename... AA>
static inline cudaError_t qattn_port_launch_ex(int ov, unsigned cz, void (*kernel)(KA...), dim3 grid, dim3 block,
                                               size_t smem, cudaStream_t st, AA... args)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[2];
    unsigned n = 0;
    if (cz > 1) {
        qattn_port_cluster_attr(&at[n++], cz);
    }
    if (ov) {
        at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[n].val.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = at;
    cfg.numAttrs = n;
    return cudaLaunchKernelEx(&cfg, kernel, args...);
}
template <typename... KA, typename... AA>
static inline cudaError_t qattn_port_overlap_launch(int ov, void (*kernel)(KA...), dim3 grid, dim3 block,
                                                    size_t smem, cudaStream_t st, AA... args)
{
    if (!ov || !qattn_port_overlap_ok()) {
        kernel<<<grid, block, smem, st>>>(args...);
        return cudaGetLastError();
    }
    return qattn_port_launch_ex(1, 1, kernel, grid, block, smem, st, args...);
}
#define qattn_port_launch_overlap(ov, kernel, grid, block, smem, stream, ...) \
    (void)qattn_port_overlap_launch((ov), kernel, dim3(grid), dim3(block), (size_t)(smem), (stream), __VA_ARGS__)
#define qattn_port_launch_resident_overlap qattn_port_launch_overlap
/* clusters of cz blocks (along z) of kernel that can be resident at once (0: unknown) */
template <typename... KA>
static inline int qattn_port_max_clusters(void (*kernel)(KA...), unsigned cz, dim3 block, size_t smem)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    qattn_port_cluster_attr(&at[0], cz);
    cfg.gridDim = dim3(1, 1, cz);
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, (const void *)kernel, &cfg) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}
#ifdef __CUDACC__
static __device__ __forceinline__ void qattn_port_dependents_go(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
/* wait for the previous kernel of the stream to finish, its writes visible (a no-op when this
 * kernel was not launched overlapping) */
static __device__ __forceinline__ void qattn_port_wait_prior(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
#endif

/* HIP's shuffles take no mask; on NVIDIA every lane of the warp takes part */
#ifdef __CUDACC__
template <typename T>
static __device__ __forceinline__ T __shfl_xor(T v, int lane_mask, int width = 32)
{
    return __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
}
template <typename T>
static __device__ __forceinline__ T __shfl(T v, int src_lane, int width = 32)
{
    return __shfl_sync(0xffffffffu, v, src_lane, width);
}
#endif

/* Exact conversions in hardware, bit-identical to qattn/numerics.h for every
 * finite input (fp16 -> fp32; round to nearest even integer; fp32 pair ->
 * e4m3 pair, RNE, saturating to +-448, NaN -> 0x7f; .x in the low byte). */
#ifdef __CUDACC__
static __device__ __forceinline__ float qattn_port_f16_to_f32(unsigned short h)
{
    return __half2float(__ushort_as_half(h));
}
/* fp16 -> fp64 in one conversion (exact) */
static __device__ __forceinline__ double qattn_port_f16_to_f64(unsigned short h)
{
    double d;
    asm("cvt.f64.f16 %0, %1;" : "=d"(d) : "h"(h));
    return d;
}
static __device__ __forceinline__ int qattn_port_rint(float x) { return __float2int_rn(x); }
#define QATTN_UNROLL _Pragma("unroll")
static __device__ __forceinline__ unsigned short qattn_port_e4m3x2(float lo, float hi)
{
    return (unsigned short)__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
}
/* asynchronous 16-byte copies global -> shared (cp.async, sm_80 on): a
 * thread's copies since its last commit form a group; wait(n) returns when
 * at most n of its groups are still in flight */
static __device__ __forceinline__ void qattn_port_cp16(void *smem, const void *g)
{
    __pipeline_memcpy_async(smem, g, 16);
}
static __device__ __forceinline__ void qattn_port_cp_commit(void) { __pipeline_commit(); }
static __device__ __forceinline__ void qattn_port_syncwarp(void) { __syncwarp(); }
/* a barrier of the n threads (whole warps) that name barrier id (1..15; 0 is __syncthreads') */
static __device__ __forceinline__ void qattn_port_bar_sync(int id, int n) { __barrier_sync_count((unsigned)id, (unsigned)n); }
/* a store of data that is not read again soon: evict-first in L1 and L2 (st.global.cs) */
template <typename T>
static __device__ __forceinline__ void qattn_port_st_stream(T *p, T v) { __stcs(p, v); }
#define qattn_port_cp_wait(n) __pipeline_wait_prior(n)
static __device__ __forceinline__ float qattn_port_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
static __device__ __forceinline__ unsigned qattn_port_vmaxu2(unsigned a, unsigned b) { return __vmaxu2(a, b); }
static __device__ __forceinline__ unsigned qattn_port_byte_perm(unsigned x, unsigned y, unsigned s)
{
    return __byte_perm(x, y, s);
}
#endif

#elif defined(__HIP__) || defined(__HIPCC__)
/* ------------------------------------------------------------------ */
/* AMD: the real HIP                                                   */
/* ------------------------------------------------------------------ */
#include <hip/hip_runtime.h>

#define QATTN_HIP_BACKEND "amd"
#define qattn_port_launch_resident hipLaunchKernelGGL
/* no programmatic dependent launch on this path: a plain launch */
#define qattn_port_launch_overlap(ov, ...) hipLaunchKernelGGL(__VA_ARGS__)
#define qattn_port_launch_resident_overlap(ov, ...) hipLaunchKernelGGL(__VA_ARGS__)
#define qattn_port_dependents_go() ((void)0)
#define qattn_port_wait_prior() ((void)0)
#define qattn_port_pause() __builtin_amdgcn_s_sleep(1)
#ifdef __AMDGCN_WAVEFRONT_SIZE
#define QATTN_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define QATTN_WARP_SIZE 64
#endif
#define QATTN_DYNAMIC_SHARED(type, name) extern __shared__ type name[]

/* exact conversions (qattn/numerics.h; gfx942's fp8 conversions are OCP e4m3fn only
 * from gfx950 on, so no hardware path here) */
#define qattn_port_f16_to_f32(h) qattn_num_fp16_decode(h)
#define qattn_port_f16_to_f64(h) ((double)qattn_num_fp16_decode(h))
#define qattn_port_e4m3x2(lo, hi) \
    ((unsigned short)(qattn_num_e4m3_encode(lo) | ((unsigned)qattn_num_e4m3_encode(hi) << 8)))
static __device__ __forceinline__ int qattn_port_rint(float x) { return (int)__builtin_rintf(x); }
/* no asynchronous copies to LDS on this path: plain 16-byte copies */
static __device__ __forceinline__ void qattn_port_cp16(void *smem, const void *g)
{
    *(uint4 *)smem = *(const uint4 *)g;
}
static __device__ __forceinline__ void qattn_port_cp_commit(void) {}
template <typename T>
static __device__ __forceinline__ void qattn_port_st_stream(T *p, T v) { *p = v; }
/* a 32-thread group is half a wave64: a block barrier (call it where the whole block does) */
#define qattn_port_syncwarp() __syncthreads()
/* no named barriers: a block barrier (call it where every thread calls one) */
#define qattn_port_bar_sync(id, n) __syncthreads()
#define qattn_port_cp_wait(n) ((void)0)
static __device__ __forceinline__ float qattn_port_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static __device__ __forceinline__ unsigned qattn_port_vmaxu2(unsigned a, unsigned b)
{
    const unsigned lo = (a & 0xffffu) > (b & 0xffffu) ? a & 0xffffu : b & 0xffffu;
    return lo | ((a >> 16) > (b >> 16) ? a >> 16 : b >> 16) << 16;
}
static __device__ __forceinline__ unsigned qattn_port_byte_perm(unsigned x, unsigned y, unsigned s)
{
    return __byte_perm(x, y, s);
}
#define QATTN_UNROLL _Pragma("unroll")

#else
#error "hip_port.h: compile with nvcc, hipcc / clang -x hip, or define QATTN_HIP_SIM"
#endif

#endif
