/* Blocks of one launch that wait for each other through a pair of counters
 * in global memory (arrivals, departures), as a grid barrier does: the
 * caller makes sure that every block of the group is resident at once (an
 * occupancy check, or clusters), and the plan zeroes the counters once; the
 * last block out leaves them zero for the next launch. Used by the
 * streamed quantization (quant_stream.h) and the decode split kernel's own
 * combine (decode_combine.h). */
#ifndef QATTN_KERNELS_GRID_GROUP_H
#define QATTN_KERNELS_GRID_GROUP_H

#include "hip_port.h"

/* The block's global writes before the call visible to every block of
 * group u after it: the block barrier, one thread's (cumulative)
 * device-scope fence and count at cnt[2u], its wait until all n have
 * counted, and its departure count at cnt[2u + 1], whose old value (to
 * thread 0: the blocks out before it) goes to qattn_grid_group_reset.
 * Every thread calls it. n by reference: read where it is used (the
 * streamed quantization's machine code as before the helper). */
static __device__ __forceinline__ unsigned qattn_grid_group_wait(unsigned *cnt, int u, const int &n, int tid)
{
    __syncthreads();
    unsigned left_n = 0u;
    if (tid == 0) {
        __threadfence();
        atomicAdd(&cnt[2 * u], 1u);
        while (((volatile unsigned *)cnt)[2 * u] < (unsigned)n)
            qattn_port_pause();
        __threadfence();
        left_n = atomicAdd(&cnt[2 * u + 1], 1u); /* read later, its latency hidden behind the caller's work */
    }
    __syncthreads();
    return left_n;
}

/* the last block out of group u (left_n = n - 1, from qattn_grid_group_wait) zeroes its counters;
 * every block had passed its wait when it counted itself out */
static __device__ __forceinline__ void qattn_grid_group_reset(unsigned *cnt, int u, unsigned left_n, const int &n,
                                                              int tid)
{
    if (tid == 0 && left_n == (unsigned)n - 1u) {
        cnt[2 * u] = 0u;
        cnt[2 * u + 1] = 0u;
    }
}

#endif
