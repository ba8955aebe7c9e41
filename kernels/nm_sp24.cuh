// nm_sp24: the device side of the 2:4 kernels on the sparse tensor cores (nm_spmv_sp.cu): mma.sp
// m16n8k32 and the per-lane fragments, around the bit work of nm_sp24.h (K permutation, metadata
// layout). Device-only; not for use outside kernels/.
#ifndef SD_NM_SP24_CUH
#define SD_NM_SP24_CUH

#include <stdint.h>

#include "kernels/nm_sp24.h"

namespace sd_nm_sp24
{

// The metadata layout launched (nm_sp24.h; test_spmv_gpu's sp24 test checks it against the other).
#ifndef SD_SP24_META
#define SD_SP24_META 1
#endif

template <int SEL>
__device__ __forceinline__ void mma_sp(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[4],
                                       uint32_t e)
{
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, %13;"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]),
                   "r"(e), "n"(SEL));
}

// This lane's metadata register for the piece whose row-g and row-(g + 8) masks are mg, mg8.
template <int META> __device__ __forceinline__ uint32_t sp_meta(uint2 mg, uint2 mg8, int t)
{
    return sd_sp24_lane_meta(mg.x, mg.y, mg8.x, mg8.y, t, META);
}

// The lane's B fragments of one 16-column run of its vector: u = the run's bf16 pairs 4(t & 1) ..
// 4(t & 1) + 3 as loaded; it needs pairs 2k + (t & 1), k = 0..3, and swaps two with lane ^ 1.
// e[k] = pair 2k + (t & 1). Every lane of the warp must call it.
__device__ __forceinline__ void sp_b_frags(const uint4 &u, int t, uint32_t (&e)[4])
{
    const uint32_t v[4] = {u.x, u.y, u.z, u.w};
    const uint32_t r0 = __shfl_xor_sync(0xffffffffu, sd_sp24_b_send(v, t, 0), 1);
    const uint32_t r1 = __shfl_xor_sync(0xffffffffu, sd_sp24_b_send(v, t, 1), 1);
    sd_sp24_b_merge(v, r0, r1, t, e);
}

// The two mma.sp of one piece and n-tile: A from the values of rows g (vg) and g + 8 (vg8), the
// metadata e (sp_meta), x's two runs (sp_b_frags).
__device__ __forceinline__ void sp_mma_piece(float (&c)[4], const uint4 &vg, const uint4 &vg8, uint32_t e,
                                             const uint32_t (&x0)[4], const uint32_t (&x1)[4])
{
    const uint32_t v[4] = {vg.x, vg.y, vg.z, vg.w}, v8[4] = {vg8.x, vg8.y, vg8.z, vg8.w};
    uint32_t a[4], b[4];
    sd_sp24_frags(v, v8, x0, x1, 0, a, b);
    mma_sp<0>(c, a, b, e);
    sd_sp24_frags(v, v8, x0, x1, 1, a, b);
    mma_sp<1>(c, a, b, e);
}

constexpr uint32_t kSpDeadMask = SD_SP24_DEAD_MASK;

} // namespace sd_nm_sp24

#endif
