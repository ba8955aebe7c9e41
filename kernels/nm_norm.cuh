// nm_norm: the RMSNorm's arithmetic, shared by the engine's norm kernel (engine/cuda_ops.cu
// add_rmsnorm4_kernel) and the linears that compute the norm while staging x
// (sd_nm_spmv_args.norm_x), so that both give the same bits: out = bf16(x * r * w) with
// r = rsqrt(sum(x^2) / hidden + eps), the sum in one fixed order.
//
// The order is the norm kernel's own: V = rms_threads(hidden) threads, thread v owning the
// float4s v and v + V of the row; each thread's two float4 summed by rms_ss, each warp's 32 sums
// by a butterfly, then the V / 32 warp sums by another. A block of any multiple of 32 threads
// reproduces it by playing those V threads in rounds (rms_block_r).
#ifndef SD_NM_NORM_CUH
#define SD_NM_NORM_CUH

#include <stdint.h>

#include "kernels/nm_device.cuh"

namespace sd_norm
{

// Rows the fused path takes: hidden % 8 == 0, at most this long (the norm kernel's two float4 a
// thread at 1024 threads).
constexpr int kMaxHidden = 8192;

// Threads of the norm kernel for a row of `hidden` (hidden % 4 == 0, <= kMaxHidden): two float4
// each, in whole warps.
__host__ __device__ constexpr int rms_threads(int hidden)
{
    return ((hidden / 4 + 1) / 2 + 31) / 32 * 32;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One thread's sum of squares of its two float4, spelled out with explicit roundings so that no
// caller's inlining can contract it differently.
__device__ __forceinline__ float rms_ss(float4 a, float4 b)
{
    float s = __fmaf_rn(a.y, a.y, __fmul_rn(a.x, a.x));
    s = __fmaf_rn(a.z, a.z, s);
    s = __fmaf_rn(a.w, a.w, s);
    float t = __fmaf_rn(b.y, b.y, __fmul_rn(b.x, b.x));
    t = __fmaf_rn(b.z, b.z, t);
    t = __fmaf_rn(b.w, b.w, t);
    return __fadd_rn(s, t);
}

// r from the sum of the V / 32 warp sums.
__device__ __forceinline__ float rms_r(float sum, int hidden, float eps)
{
    return rsqrtf(__fadd_rn(__fdiv_rn(sum, (float)hidden), eps));
}

// bf16(x * r * w) of two columns, packed low column first.
__device__ __forceinline__ uint32_t rms_apply2(float x0, float x1, float r, float w0, float w1)
{
    using sd_nm_dev::f32_to_bf16;
    return (uint32_t)f32_to_bf16(__fmul_rn(__fmul_rn(x0, r), w0)) |
           (uint32_t)f32_to_bf16(__fmul_rn(__fmul_rn(x1, r), w1)) << 16;
}

// Four columns (a float4 of x and of w) as two packed pairs.
__device__ __forceinline__ uint2 rms_apply4(float4 x, float r, float4 w)
{
    return make_uint2(rms_apply2(x.x, x.y, r, w.x, w.y), rms_apply2(x.z, x.w, r, w.z, w.w));
}

// r of the row x (fp32, 16-byte aligned) as the norm kernel computes it, by a block of NT threads
// (a multiple of 32) playing its V threads in rounds of NT, every load of a round pair issued
// before the first sum (one L2 round trip at hidden <= 8 * NT). Every thread of the block must
// call it, after the row is written (the PDL wait); red: 32 floats of shared memory, not written
// again before the block's next barrier. Every thread gets r.
template <int NT>
__device__ __forceinline__ float rms_block_r(const float *x, int hidden, float eps, float *red)
{
    constexpr int kRounds = (rms_threads(kMaxHidden) + NT - 1) / NT;
    const int n4 = hidden >> 2, V = rms_threads(hidden), lane = threadIdx.x & 31;
    const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 *row = reinterpret_cast<const float4 *>(x);
#pragma unroll
    for (int k0 = 0; k0 < kRounds; k0 += 2) {
        if (k0 * NT >= V)
            break;
        float4 a[2], b[2];
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const int v = (k0 + k) * NT + (int)threadIdx.x;
            a[k] = v < V && v < n4 ? row[v] : z;
            b[k] = v < V && v + V < n4 ? row[v + V] : z;
        }
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const int v = (k0 + k) * NT + (int)threadIdx.x;
            if ((k0 + k) * NT + (int)(threadIdx.x & ~31u) >= V) // warp-uniform: V is a multiple of 32
                break;
            const float s = warp_sum(rms_ss(a[k], b[k]));
            if (lane == 0)
                red[v >> 5] = s;
        }
    }
    __syncthreads();
    return rms_r(warp_sum(lane < V / 32 ? red[lane] : 0.f), hidden, eps);
}

} // namespace sd_norm

#endif
