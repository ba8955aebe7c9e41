// nm_sp24: what the 2:4 kernels on the sparse tensor cores share (nm_spmv_sp.cu: 16 rows a block,
// nm_spmv_tcw.cu: the wide one): mma.sp m16n8k32, the metadata computed from the bitmask, and the
// B fragments. The K permutation both use: in each 64-column piece, lane (g, t) holds the 16 bytes
// of values of columns [16t, 16t + 16) of rows g and g + 8, i.e. the groups of four columns 4t ..
// 4t + 3 (two values each). mma j (0, 1) of the piece takes group 4t + 2j as its compressed
// columns {2t, 2t + 1} and group 4t + 2j + 1 as {2t + 8, 2t + 9}, so its K slot group s holds
// column group 4s + 2j (s < 4) or 4(s - 4) + 2j + 1 (s >= 4). x (the B operand) follows the same
// map: a lane's slots lie in two 16-column runs of the piece (from 16 (t >> 1) and 32 + 16 (t >> 1)),
// of which it needs every other bf16 pair; it loads half of each run and swaps the rest with lane ^
// 1 (sp_b_frags). Device-only; not for use outside kernels/.
#ifndef SD_NM_SP24_CUH
#define SD_NM_SP24_CUH

#include <stdint.h>

namespace sd_nm_sp24
{

// The metadata operand's layout for m16n8k32 bf16 (sparsity selector j: lanes 4g + 2j and
// 4g + 2j + 1 supply it). META 1: lane 4g + 2j + h holds the indices of K slots [16h, 16h + 16)
// of row g in its low half and of row g + 8 in its high half. META 0: it holds all 32 slots of row
// g (h = 0) or of row g + 8 (h = 1). test_spmv_gpu's sp24 test runs both: the H200 implements 1
// (results/2026-12-02-s15/r1); SD_SP24_META is the one launched.
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

// Each nibble of x a 2:4 group's mask (two bits set) -> the group's metadata nibble: the lower
// set bit's index in bits 1:0, the higher one's in bits 3:2. idx0 is 0 if b0, 1 if b1, else 2;
// idx1 is 3 if b3, 2 if b2, else 1; so bit 0 = ~b0 & b1, bit 1 = ~b0 & ~b1, bit 2 = b3 | ~b2,
// bit 3 = b3 | b2, for eight groups at once.
__device__ __forceinline__ uint32_t meta_nibbles(uint32_t x)
{
    return (~x & (x >> 1) & 0x11111111u) | (~(x | (x << 1)) & 0x22222222u) | (((x >> 1) | ~x) & 0x44444444u) |
           ((x | (x << 1)) & 0x88888888u);
}

// The 16 bits of nibbles 0, 2, 4, 6 of m (low half) and of nibbles 1, 3, 5, 7 (high half).
__device__ __forceinline__ uint32_t deinterleave_nibbles(uint32_t m)
{
    uint32_t lo = m & 0x0f0f0f0fu, hi = (m >> 4) & 0x0f0f0f0fu;
    lo |= lo >> 4, hi |= hi >> 4;
    return __byte_perm(lo, hi, 0x6420);
}

// This lane's metadata register for the piece whose row-g and row-(g + 8) masks are mg, mg8 (64
// bits each, columns 0-31 in .x): for mma j = t >> 1, half h = t & 1 (see SD_SP24_META). Slot
// group s of mma j is column group 4s + 2j (s < 4), i.e. the low nibble of mask byte 2s + j, or
// 4(s - 4) + 2j + 1, the high nibble of byte 2(s - 4) + j.
template <int META> __device__ __forceinline__ uint32_t sp_meta(uint2 mg, uint2 mg8, int t)
{
    const uint32_t sel = (t >> 1) ? 0x7531u : 0x6420u; // bytes j, 2 + j, 4 + j, 6 + j
    const uint32_t eg = __byte_perm(mg.x, mg.y, sel), eg8 = __byte_perm(mg8.x, mg8.y, sel);
    uint32_t x;
    if constexpr (META == 1) { // the lane's slot half of both rows, row g in the even nibbles
        const int sh = 4 * (t & 1);
        x = ((eg >> sh) & 0x0f0f0f0fu) | (((eg8 >> sh) & 0x0f0f0f0fu) << 4);
    } else { // all slots of one row: low nibbles slots 0-15, high nibbles 16-31
        x = (t & 1) ? eg8 : eg;
    }
    return deinterleave_nibbles(meta_nibbles(x));
}

// The lane's B fragments of one 16-column run of its vector: u = the run's bf16 pairs 4(t & 1) ..
// 4(t & 1) + 3 as loaded; it needs pairs 2k + (t & 1), k = 0..3, and swaps two with lane ^ 1.
// e[k] = pair 2k + (t & 1). Every lane of the warp must call it.
__device__ __forceinline__ void sp_b_frags(const uint4 &u, int t, uint32_t (&e)[4])
{
    const int odd = t & 1;
    const uint32_t r0 = __shfl_xor_sync(0xffffffffu, odd ? u.x : u.y, 1);
    const uint32_t r1 = __shfl_xor_sync(0xffffffffu, odd ? u.z : u.w, 1);
    e[0] = odd ? r0 : u.x, e[1] = odd ? r1 : u.z;
    e[2] = odd ? u.y : r0, e[3] = odd ? u.w : r1;
}

// The two mma.sp of one piece and n-tile: A from the values of rows g (vg) and g + 8 (vg8), the
// metadata e (sp_meta), x's two runs (sp_b_frags).
__device__ __forceinline__ void sp_mma_piece(float (&c)[4], const uint4 &vg, const uint4 &vg8, uint32_t e,
                                             const uint32_t (&x0)[4], const uint32_t (&x1)[4])
{
    const uint32_t a0[4] = {vg.x, vg8.x, vg.y, vg8.y}, a1[4] = {vg.z, vg8.z, vg.w, vg8.w};
    const uint32_t b0[4] = {x0[0], x1[0], x0[1], x1[1]}, b1[4] = {x0[2], x1[2], x0[3], x1[3]};
    mma_sp<0>(c, a0, b0, e);
    mma_sp<1>(c, a1, b1, e);
}

// A piece past the end of the split: zero values, and a valid mask (0x3 in every group: the
// metadata must name two distinct slots in order).
constexpr uint32_t kSpDeadMask = 0x33333333u;

} // namespace sd_nm_sp24

#endif
