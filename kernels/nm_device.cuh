// nm_device: the small device helpers every SpMV/GEMV kernel file uses — streamed loads,
// bf16 conversions, warp sums, the bfind/bmsk bit walk over a mask word and the gather of one
// word against x in shared memory, cp.async. Header-only, force-inlined.
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

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Adds BT consecutive fp32 of shared memory (x of one column for every vector), times w.
template <int BT> __device__ __forceinline__ void fma_col(float (&acc)[BT], float w, const float *xp)
{
    if constexpr (BT == 1) {
        acc[0] = fmaf(w, xp[0], acc[0]);
    } else if constexpr (BT == 2) {
        float2 t = *reinterpret_cast<const float2 *>(xp);
        acc[0] = fmaf(w, t.x, acc[0]);
        acc[1] = fmaf(w, t.y, acc[1]);
    } else {
#pragma unroll
        for (int q = 0; q < BT / 4; q++) {
            float4 t = *reinterpret_cast<const float4 *>(xp + 4 * q);
            acc[4 * q + 0] = fmaf(w, t.x, acc[4 * q + 0]);
            acc[4 * q + 1] = fmaf(w, t.y, acc[4 * q + 1]);
            acc[4 * q + 2] = fmaf(w, t.z, acc[4 * q + 2]);
            acc[4 * q + 3] = fmaf(w, t.w, acc[4 * q + 3]);
        }
    }
}

// One N:M mask word (exactly 16 bits) against its 16 values, highest column first: a fixed
// 16-step scan (find the top bit, keep the bits below), the column's x gathered from shared
// memory at xw + p*BT (xw: slot of column 0 of this word).
template <int BT>
__device__ __forceinline__ void nm_word(uint32_t bits, const uint4 &v0, const uint4 &v1, const float *xw,
                                        float (&acc)[BT])
{
    const uint32_t u[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
    for (int k = 0; k < 16; k++) {
        const int p = top_bit(bits);
        bits &= bits_below(p);
        const int i = 15 - k; // value index of this column in the word
        float w = (i & 1) ? bf16_hi(u[i >> 1]) : bf16_lo(u[i >> 1]);
        fma_col<BT>(acc, w, xw + p * BT);
    }
}

// Asynchronous global -> shared copies (dst: a shared-state-space address) of 16 bytes (4 for
// cp_async4, 8 for cp_async8_zfill: both through L1). The zero-filling forms copy src_bytes (0 or the full size) and
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
__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async8_zfill(uint32_t dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}

} // namespace sd_nm_dev

#endif
