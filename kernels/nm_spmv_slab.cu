// nm_spmv_slab: the batch-1 N:M SpMV that asks for all of its weights at launch.
//
// At batch 1 the small linears of a decode step (8B: o 4096x4096, qkv 6144x4096; 19 and 28 MB
// under 2:4) run at 55-60% of the read ceiling: each warp keeps one or two steps of weights in
// flight in registers, so the DRAM fills up only after the previous kernel has finished and every
// warp has made a few round trips (kernels/NOTES.md v4-v6). Under 50% sparsity those matrices
// nearly fit in the GPU's shared memory (228 KB x 132 SMs), so this kernel copies each lane's
// whole share of the weights into shared memory with cp.async as soon as its block is resident,
// before the PDL wait: with programmatic launch that is while the kernel before (RMSNorm,
// attention) still runs, and the DRAM streams the weights in the meantime. After the wait the
// block stages x and each lane walks its words as the gather kernel does (nm_word), waiting only
// for its own copies (one cp.async group per word: no barrier for the weights).
//
// Shape: a warp owns one row, its lanes words lane, lane + 32, ... of the block's K share
// (kSlabNW words each, 4096 columns), 8 rows a block; longer rows split K over grid.y (fp32
// output, atomics). 53 KB of shared memory a block: 4 blocks (32 rows) per SM, so the 4096 rows
// of an 8B o projection are all in flight at once.
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_device.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_dev;
using namespace sd_pdl;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kNW = 4;              // words per lane
constexpr int kWords = 32 * kNW;    // a block's K share, in mask words
constexpr int kXStride = 33;        // floats per staged word (nm_word's layout: slot 0 unused)
constexpr size_t kValBytes = (size_t)kWarps * kNW * 2 * 32 * 16;
constexpr size_t kMaskBytes = (size_t)kWarps * kNW * 32 * 4;
constexpr size_t kSmem = kValBytes + kMaskBytes + (size_t)kWords * kXStride * 4;

struct SlabParams {
    const uint16_t *values; // bf16 [rows, cols/2]
    const uint32_t *mask;   // u32 [rows, cols/32]
    const uint16_t *x;      // bf16 [cols], 16-byte aligned
    void *y;                // [rows] fp32 or bf16
    int64_t rows, cols;
    int64_t words_per_split; // <= kWords
    int y_bf16, accumulate, atomic;
};

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

// x columns of words [w0, w0 + kt) as fp32 at xs[w * kXStride + 1 + j] (16-byte loads).
__device__ __forceinline__ void stage_x(float *xs, const uint16_t *x, int64_t w0, int kt)
{
    const uint4 *src = reinterpret_cast<const uint4 *>(x + w0 * 32);
    for (int i = threadIdx.x; i < kt * 4; i += kThreads) {
        const uint4 u = __ldg(src + i);
        float *d = xs + (i >> 2) * kXStride + 1 + 8 * (i & 3);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            d[2 * k] = bf16_lo(w[k]);
            d[2 * k + 1] = bf16_hi(w[k]);
        }
    }
}

// Word K of every lane (then K + 1, ...): cp.async groups complete in order, so word K's copies
// are in once at most kNW - 1 - K groups are pending.
template <int K>
__device__ __forceinline__ void walk_words(const uint4 *vs, const uint32_t *ms, const float *xs, int lane, int kt,
                                           float (&acc)[1])
{
    cp_async_wait<kNW - 1 - K>();
    const int wl = lane + 32 * K;
    if (wl < kt)
        nm_word<1>(ms[K * 32 + lane], vs[(2 * K) * 32 + lane], vs[(2 * K + 1) * 32 + lane], xs + wl * kXStride + 1,
                   acc);
    if constexpr (K + 1 < kNW)
        walk_words<K + 1>(vs, ms, xs, lane, kt, acc);
}

__global__ void __launch_bounds__(kThreads, 4) slab_spmv_kernel(SlabParams p)
{
    extern __shared__ uint4 smem_slab[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t words = p.cols >> 5, row = (int64_t)blockIdx.x * kWarps + warp;
    const int64_t rowc = row < p.rows ? row : p.rows - 1; // a tail warp copies a valid row, stores nothing
    const int64_t w0 = blockIdx.y * p.words_per_split;
    const int kt = (int)min(p.words_per_split, words - w0);
    uint4 *vs = smem_slab + warp * kNW * 2 * 32;                                       // [word][half][lane]
    uint32_t *ms = reinterpret_cast<uint32_t *>(smem_slab + kWarps * kNW * 2 * 32) + warp * kNW * 32; // [word][lane]
    float *xs = reinterpret_cast<float *>(reinterpret_cast<char *>(smem_slab) + kValBytes + kMaskBytes);
    const uint4 *vrow = reinterpret_cast<const uint4 *>(p.values + rowc * (p.cols >> 1)) + 2 * w0;
    const uint32_t *mrow = p.mask + rowc * words + w0;
    // Every weight this lane will use, now: the kernel before may still be running (pdl.cuh).
#pragma unroll
    for (int k = 0; k < kNW; k++) {
        const int wl = lane + 32 * k;
        if (wl < kt) {
            cp_async16(smem_addr(vs + (2 * k) * 32 + lane), vrow + 2 * wl);
            cp_async16(smem_addr(vs + (2 * k + 1) * 32 + lane), vrow + 2 * wl + 1);
            cp_async4(smem_addr(ms + k * 32 + lane), mrow + wl);
        }
        cp_async_commit();
    }
    pdl_wait(); // x is written by the grid before
    pdl_trigger();
    stage_x(xs, p.x, w0, kt);
    __syncthreads();
    float acc[1] = {0.0f};
    walk_words<0>(vs, ms, xs, lane, kt, acc);
    const float v = warp_sum(acc[0]);
    if (lane == 0 && row < p.rows)
        store_out(p.y, row, v, p.atomic, p.y_bf16, p.accumulate);
}

} // namespace

extern "C" int sd__nm_slab_supported(const sd_nm_spmv_args *a)
{
    // bf16 output cannot take split-K's atomics: only rows that fit one block's K share
    return a->B == 1 && a->n > 0 && 2 * a->n == a->m && a->cols % 32 == 0 && ((uintptr_t)a->x & 15) == 0 &&
           ((uintptr_t)a->values & 15) == 0 && ((uintptr_t)a->mask & 3) == 0 &&
           (!a->y_bf16 || a->cols <= 32 * kWords);
}

extern "C" int sd__nm_slab_launch(const sd_nm_spmv_args *a, int split, cudaStream_t s)
{
    if (!sd__nm_slab_supported(a))
        return SD_EINVAL;
    const int64_t words = a->cols / 32;
    int64_t wps = (words + split - 1) / split;
    if (wps > kWords) // a hint: as many splits as the block's K share needs
        wps = kWords;
    if (a->y_bf16) // split-K adds partial sums atomically: fp32 output only (bf16 rows fit a block)
        wps = words;
    const int64_t nsplit = (words + wps - 1) / wps;
    SlabParams p;
    p.values = a->values;
    p.mask = a->mask;
    p.x = a->x;
    p.y = a->y;
    p.rows = a->rows, p.cols = a->cols;
    p.words_per_split = wps;
    p.y_bf16 = a->y_bf16, p.accumulate = a->accumulate, p.atomic = nsplit > 1;
    const int zero_first = p.atomic && !a->accumulate; // a memset node: the launch stays plain
    if (zero_first && cudaMemsetAsync(a->y, 0, (size_t)a->rows * 4, s) != cudaSuccess)
        return SD_ECUDA;
    if (cudaFuncSetAttribute((const void *)slab_spmv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)kSmem) != cudaSuccess)
        return SD_ECUDA;
    dim3 grid((unsigned)((a->rows + kWarps - 1) / kWarps), (unsigned)nsplit);
    const int pdl = (a->ctx ? a->ctx->pdl : 1) && !zero_first;
    return sd_launch(slab_spmv_kernel, grid, dim3(kThreads), kSmem, s, pdl, p) == cudaSuccess ? 0 : SD_ECUDA;
}
