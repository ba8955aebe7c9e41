// pdl: programmatic dependent launch (Hopper) for the decode step's chain of kernels.
//
// A decode step is a chain of ~10 kernels per layer, each a few microseconds long, each
// depending on the one before. Launched normally, every boundary costs the drain of one grid,
// the launch of the next and its first DRAM round trip (~1-2 µs), a large share of a 4-8 µs
// GEMV. Launched with the programmatic-serialization attribute, the next grid may start as soon
// as every block of the running one has called pdl_trigger(); its blocks then do what does not
// depend on the running grid (issue their weights' loads: weights never change during a step)
// and stop in pdl_wait() until the running grid has finished and its writes are visible.
//
// Rules for a kernel launched with sd_launch(..., pdl = 1):
//   - it calls pdl_wait() before it reads anything an earlier kernel writes, and before it
//     writes anything at all (an earlier kernel may still read it);
//   - it calls pdl_trigger() after pdl_wait(), so that at most one grid runs ahead (a deeper
//     chain of early grids would only fill L2 with prefetches that evict each other).
// Both are no-ops in a grid launched without the attribute, so kernels stay correct either way;
// a kernel that breaks the rules must be launched with pdl = 0.
#ifndef SD_PDL_CUH
#define SD_PDL_CUH

#include <stdint.h>

#include <cuda_runtime.h>

namespace sd_pdl
{

__device__ __forceinline__ void pdl_wait()
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

__device__ __forceinline__ void pdl_trigger()
{
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Launches k<<<grid, block, smem, s>>>(args...), with programmatic stream serialization when
// pdl is set (see the rules above) and, with cluster > 1, in thread-block clusters of cluster
// blocks along x (gridDim.x a multiple of it; compute capability 9.0).
template <typename... KArgs, typename... Args>
cudaError_t sd_launch_cl(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, int pdl,
                         int cluster, Args &&...args)
{
    cudaLaunchConfig_t c = {};
    cudaLaunchAttribute at[2];
    unsigned n = 0;
    if (pdl) {
        at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster > 1) {
        at[n].id = cudaLaunchAttributeClusterDimension;
        at[n].val.clusterDim.x = (unsigned)cluster;
        at[n].val.clusterDim.y = 1;
        at[n++].val.clusterDim.z = 1;
    }
    c.gridDim = grid;
    c.blockDim = block;
    c.dynamicSmemBytes = smem;
    c.stream = s;
    c.attrs = n ? at : nullptr;
    c.numAttrs = n;
    return cudaLaunchKernelEx(&c, k, static_cast<Args &&>(args)...);
}

// sd_launch_cl without clusters.
template <typename... KArgs, typename... Args>
cudaError_t sd_launch(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, int pdl,
                      Args &&...args)
{
    return sd_launch_cl(k, grid, block, smem, s, pdl, 1, static_cast<Args &&>(args)...);
}

} // namespace sd_pdl

#endif
