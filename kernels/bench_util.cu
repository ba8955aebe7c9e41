// bench_util: random fills, random N:M masks and the read-only stream kernel for bench kernels.
#include "kernels/bench_util.h"

#include "engine/diag.h"

namespace
{

__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__global__ void fill_bf16_kernel(uint16_t *p, int64_t n, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t r = mix64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)i);
        float f = (float)(r >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
        p[i] = (uint16_t)(__float_as_uint(f) >> 16);
    }
}

// Each group of m bits keeps m/2: a partial Fisher-Yates draw of m/2 of the m positions.
__global__ void fill_mask_kernel(uint32_t *w, int64_t n, int m, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t r = mix64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)i);
        uint32_t word = 0;
        for (int g = 0; g < 32; g += m) {
            uint8_t pos[32];
            for (int j = 0; j < m; j++)
                pos[j] = (uint8_t)j;
            for (int j = 0; j < m / 2; j++) {
                r = mix64(r + 0x632be59bd9b4e019ull);
                int k = j + (int)(r % (uint64_t)(m - j));
                uint8_t t = pos[j];
                pos[j] = pos[k];
                pos[k] = t;
                word |= 1u << (g + pos[j]);
            }
        }
        w[i] = word;
    }
}

__device__ __forceinline__ uint4 ld_stream16(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// Four independent 16-byte loads in flight per thread per iteration.
__global__ void read_kernel(const uint4 *__restrict__ p, int64_t n, float *sink)
{
    uint32_t acc = 0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = ld_stream16(p + i), b = ld_stream16(p + i + stride);
        uint4 c = ld_stream16(p + i + 2 * stride), d = ld_stream16(p + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        uint4 a = ld_stream16(p + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x12345678u) // practically never: keeps the loads alive
        sink[blockIdx.x] = (float)acc;
}

int grid_for(int64_t n)
{
    int64_t g = (n + 255) / 256;
    return (int)(g < 65536 ? (g > 0 ? g : 1) : 65536);
}

} // namespace

extern "C" int sd_bench_fill_bf16(uint16_t *p, int64_t n, uint64_t seed, cudaStream_t s)
{
    fill_bf16_kernel<<<grid_for(n), 256, 0, s>>>(p, n, seed);
    return cudaGetLastError() == cudaSuccess ? 0 : SD_ECUDA;
}

extern "C" int sd_bench_fill_nm_mask(uint32_t *words, int64_t n, int m, uint64_t seed, cudaStream_t s)
{
    if (m < 2 || m > 32 || 32 % m)
        return SD_EINVAL;
    fill_mask_kernel<<<grid_for(n), 256, 0, s>>>(words, n, m, seed);
    return cudaGetLastError() == cudaSuccess ? 0 : SD_ECUDA;
}

extern "C" int sd_bench_read_launch(const void *p, int64_t n16, float *sink, cudaStream_t s)
{
    int sms = 132;
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess)
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    read_kernel<<<sms * 8, 256, 0, s>>>(static_cast<const uint4 *>(p), n16, sink);
    return cudaGetLastError() == cudaSuccess ? 0 : SD_ECUDA;
}
