// results/2026-12-03-s18/nm_spmv_tcg-v1.cu: the first form of the warpgroup-MMA wide kernel as r1
// ran it (kernels/nm_spmv_tcg.cu then; the plumbing is wgmma-v2.patch's, with tcxg_kernel(int m)).
// Not built: kept for the record (kernels/NOTES.md v24).
//
// The product taken the other way round, y^T = x^T W^T: x is wgmma's A (64 vectors by K, from
// shared memory as staged), the expanded weights its B: each warp expands its 16 rows as the wide
// kernel does (nm_tcw.cuh) and stores the dense columns into a shared tile; each warpgroup (64
// rows) multiplies that tile by x with eight m64n64k16 wgmmas a step, asynchronously, while the
// warps expand the next step. Both operands K-major with the 128-byte swizzle (unit u of row r at
// u ^ (r & 7), 1024-byte aligned atoms of 64 columns). 4 slots of staged weights and x (2 steps
// ahead), 2 expanded tiles; 201 KB of shared memory: one block an SM.
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_tc.cuh"
#include "kernels/nm_tcw.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_tc;
using namespace sd_pdl;

constexpr int kRows = 128;
constexpr int kM = 64;
constexpr int kVals = kRows * kWRow;
constexpr int kMasks = kRows * 16;
constexpr int kXAtom = kM * 128;
constexpr int kSlot = kVals + kMasks + 2 * kXAtom;
constexpr int kSlots = 4;
constexpr int kEAtom = kRows * 128;
constexpr int kSmem = kSlots * kSlot + 2 * 2 * kEAtom + 1024;
static_assert((kVals + kMasks) % 1024 == 0 && kSlot % 1024 == 0, "x atoms 1024-byte aligned");

__device__ __forceinline__ uint32_t atom_unit(int r, int u, int atom)
{
    return (uint32_t)((u >> 3) * atom + r * 128 + (((u & 7) ^ (r & 7)) << 4));
}

__device__ __forceinline__ void stage_x(const TcParams &p, uint32_t xs, int64_t cw)
{
    const int u = threadIdx.x & 15;
    const int64_t c = cw * 32 + 8 * u;
#pragma unroll
    for (int j = 0; j < kM * 16 / kThreads; j++) {
        const int v = (threadIdx.x >> 4) + kThreads / 16 * j;
        const bool ok = v < p.B && c < p.cols;
        cp_async16_zfill(xs + atom_unit(v, u, kXAtom), ok ? p.x + (int64_t)v * p.ldx + c : p.x,
                         ok ? 16u : 0u);
    }
}

__device__ __forceinline__ uint64_t wg_desc(uint32_t a)
{
    return (uint64_t)((a & 0x3ffff) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 |
           (uint64_t)1 << 62;
}

__device__ __forceinline__ void wg_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void proxy_fence()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void wgmma_64x64(float (&d)[32], uint64_t da, uint64_t db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db));
}

__device__ __forceinline__ void st_shared_v4(uint32_t a, uint32_t x, uint32_t y, uint32_t z, uint32_t w)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(x), "r"(y), "r"(z), "r"(w)
                 : "memory");
}

template <class E>
__device__ __forceinline__ void expand_step(const char *st, uint32_t et, int rg, int t, int shift,
                                            const uint32_t *tab)
{
#pragma unroll
    for (int s = 0; s < 2; s++) {
        uint32_t ag[8], ag8[8];
        wide_expand<E, kVals>(st, rg, s, t, shift, tab, ag, ag8);
        const int u0 = (int)(tcx_col<E>(0, s, t) >> 3);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            st_shared_v4(et + atom_unit(rg, u0 + h, kEAtom), ag[4 * h], ag[4 * h + 1], ag[4 * h + 2],
                         ag[4 * h + 3]);
            st_shared_v4(et + atom_unit(rg + 8, u0 + h, kEAtom), ag8[4 * h], ag8[4 * h + 1], ag8[4 * h + 2],
                         ag8[4 * h + 3]);
        }
    }
}

__device__ __forceinline__ void fence_d(float (&d)[32])
{
#pragma unroll
    for (int i = 0; i < 32; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void mma_step(float (&d)[32], uint32_t xs, uint32_t et)
{
    fence_d(d);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 8; kk++) {
        const uint32_t off = (uint32_t)(kk & 3) * 32;
        wgmma_64x64(d, wg_desc(xs + (kk >> 2) * kXAtom + off), wg_desc(et + (kk >> 2) * kEAtom + off));
    }
    wg_commit();
    fence_d(d);
}

__device__ __forceinline__ void store_d(const TcParams &p, const float (&d)[32], int64_t row0)
{
    const int w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int b = 16 * w + g + 8 * (e >> 1);
            const int64_t row = row0 + 8 * i + 2 * t + (e & 1);
            if (b < p.B && row < p.rows)
                store_y(p, (int64_t)b * p.ldy + row, d[4 * i + e]);
        }
}

template <class E> __global__ void __launch_bounds__(kThreads, 1) tcxg_spmv_kernel(TcParams p)
{
    extern __shared__ uint4 smem_tg[];
    __shared__ uint32_t tab[E::kTab];
    tcx_table<E>(tab);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem_tg);
    const uint32_t pad = (1024 - (sbase & 1023)) & 1023;
    char *smem = reinterpret_cast<char *>(smem_tg) + pad;
    const uint32_t s0 = sbase + pad;
    const uint32_t e0 = s0 + kSlots * kSlot;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int q = warp >> 2;
    const int64_t words = p.cols >> 5, blk_row0 = (int64_t)blockIdx.x * kRows;
    const int64_t w_begin = blockIdx.y * p.words_per_split;
    const int64_t w_end = min(words, w_begin + p.words_per_split);
    const int nsteps = (int)((w_end - w_begin + 3) / 4);
    const int rg = 16 * warp + g, shift = sd_tcx_mask_shift(t);
#pragma unroll
    for (int k = 0; k < 2; k++)
        if (k < nsteps)
            stage_w<kRows, kVals>(p, smem + k * kSlot, blk_row0, w_begin + 4 * k, w_end);
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int k = 0; k < 2; k++) {
        if (k < nsteps)
            stage_x(p, s0 + k * kSlot + kVals + kMasks, w_begin + 4 * k);
        cp_async_commit();
    }
    float d[32] = {};
    int k = 0;
    do {
        cp_async_wait<1>();
        proxy_fence();
        __syncthreads();
        const int kn = k + 2;
        if (kn < nsteps) {
            char *sn = smem + kn % kSlots * kSlot;
            stage_w<kRows, kVals>(p, sn, blk_row0, w_begin + 4 * (int64_t)kn, w_end);
            stage_x(p, s0 + kn % kSlots * kSlot + kVals + kMasks, w_begin + 4 * (int64_t)kn);
        }
        cp_async_commit();
        const uint32_t et = e0 + (k & 1) * 2 * kEAtom;
        expand_step<E>(smem + k % kSlots * kSlot, et, rg, t, shift, tab);
        proxy_fence();
        asm volatile("bar.sync %0, 128;" ::"r"(1 + q) : "memory");
        mma_step(d, s0 + k % kSlots * kSlot + kVals + kMasks, et + q * 64 * 128);
        wg_wait<1>();
    } while (++k < nsteps);
    wg_wait<0>();
    cp_async_wait<0>();
    store_d(p, d, blk_row0 + 64 * q);
}
} // namespace
