// Clusters of 2, 4, 8 blocks (along z) resident at once for a block of 256 or 384
// threads with the decode split kernel's shared memory (one block a multiprocessor).
// nvcc -arch=sm_90 -o /tmp/co kernels/probes/cluster_occupancy.cu && /tmp/co
#include <cstdio>
#include <cuda_runtime.h>

__global__ void probe(int *x)
{
    extern __shared__ int s[];
    s[threadIdx.x] = threadIdx.x;
    if (x)
        x[0] = s[0];
}

int main()
{
    cudaDeviceProp pr;
    cudaGetDeviceProperties(&pr, 0);
    const size_t smem[] = {100 * 1024, 213 * 1024, 226 * 1024};
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
    for (int t = 256; t <= 384; t += 128)
        for (size_t m : smem) {
            printf("%s, %d SMs, %d threads, %zu KB smem:", pr.name, pr.multiProcessorCount, t, m / 1024);
            for (int cz = 1; cz <= 16; cz *= 2) {
                cudaLaunchConfig_t cfg = {};
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeClusterDimension;
                at[0].val.clusterDim.x = 1, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = cz;
                cfg.gridDim = dim3(1, 1, cz), cfg.blockDim = dim3(t), cfg.dynamicSmemBytes = m;
                cfg.attrs = at, cfg.numAttrs = 1;
                int n = -1;
                cudaError_t e = cudaOccupancyMaxActiveClusters(&n, (const void *)probe, &cfg);
                printf("  %d: %d clusters (%d blocks)%s", cz, n, n * cz, e ? " (error)" : "");
                cudaGetLastError();
            }
            printf("\n");
        }
    return 0;
}
