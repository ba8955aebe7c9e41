// nm_device: the small device helpers every SpMV/GEMV kernel file uses — streamed loads,
// bf16 conversions and the bfind/bmsk bit walk over a mask word. Header-only, force-inlined.
#ifndef SD_NM_DEVICE_CUH
#define SD_NM_DEVICE_CUH

#include <stdint.h>

namespace sd_nm_dev
{

// A 4-byte load that bypasses L1, for masks (each is used once per launch). The gather kernel's
// values take the L1-allocating non-coherent path instead: a lane reads its 32-byte word in two
// 16-byte halves.
__device__ __forceinline__ uint32_t ld_stream_u32(const uint32_t *p)
{
    uint32_t v;
    asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ float bf16_lo(uint32_t u)
{
    return __uint_as_float(u << 16);
}
__device__ __forceinline__ float bf16_hi(uint32_t u)
{
    return __uint_as_float(u & 0xffff0000u);
}

// Round to nearest even, NaN kept quiet (as engine/dtype.h's sd_f32_to_bf16).
__device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// The SwiGLU epilogue (sd_nm_spmv_args.swiglu: W = [gate; up], `half` rows each): a block takes P
// pairs, rows k < P are gate rows i0 + k and rows k >= P the matching up rows (i0 = blockIdx.x *
// P), and writes bf16(silu(gate) * up) for them. Rows past the end are clamped (loaded, never
// stored), as the plain kernels clamp theirs.
__device__ __forceinline__ int64_t swiglu_row(int64_t half, int P, int k)
{
    const int64_t i = min((int64_t)blockIdx.x * P + (k < P ? k : k - P), half - 1);
    return k < P ? i : half + i;
}
// silu(g) * u as engine/cuda_ops.cu's swiglu_kernel computes it (the same bits).
__device__ __forceinline__ float silu_mul(float g, float u)
{
    return g / (1.f + expf(-g)) * u;
}

// y[o] = v, or += v (accumulate), or atomically += v (split-K partial sums: fp32 only), with y
// fp32 or bf16: how every SpMV / GEMV kernel writes its outputs.
__device__ __forceinline__ void store_out(void *y, int64_t o, float v, int atomic, int y_bf16, int accumulate)
{
    if (atomic) {
        atomicAdd(static_cast<float *>(y) + o, v);
    } else if (y_bf16) {
        uint16_t *yb = static_cast<uint16_t *>(y);
        yb[o] = f32_to_bf16(accumulate ? v + __uint_as_float((uint32_t)yb[o] << 16) : v);
    } else {
        float *yf = static_cast<float *>(y);
        yf[o] = accumulate ? yf[o] + v : v;
    }
}

// Position of the highest set bit (bfind; 0xffffffff when none) and the mask of the bits below
// it (bmsk, clamped: all ones for an empty word, which then stays empty). One FLO + one BMSK.
__device__ __forceinline__ int top_bit(uint32_t bits)
{
    int p;
    asm("bfind.u32 %0, %1;" : "=r"(p) : "r"(bits));
    return p;
}
__device__ __forceinline__ uint32_t bits_below(int p)
{
    uint32_t m;
    asm("bmsk.clamp.b32 %0, %1, %2;" : "=r"(m) : "r"(0), "r"(p));
    return m;
}

// Asynchronous global -> shared copies (dst: a shared-state-space address) of 16 bytes (8 for
// cp_async8_zfill, through L1). The zero-filling forms copy src_bytes (0 or the full size) and
// fill the rest with zeros.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async8_zfill(uint32_t dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}

} // namespace sd_nm_dev

#endif
