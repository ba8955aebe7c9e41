// nm_spmv_sp: 2:4 weights on the sparse tensor cores (mma.sp m16n8k32, bf16 in, fp32 out) for
// 1-16 vectors, straight from the bitmask format: no expansion, no shared tile. The register-
// expanding kernel (nm_spmv_tc.cu) spends ~11 instructions a kept value turning values and mask
// bits into dense fragments; here the hardware takes the 2:4 values as they are stored and a
// 2-bit index per value, which a lane computes from the mask for 16 values at once (sp_meta).
//
// Block shape, K split across the 8 warps, split-K across blocks and the reduction are those of
// the 16-row tensor-core kernels (nm_tc.cuh). K permutation: in each 64-column piece, lane (g, t)
// loads the 16 bytes of values of columns [16t, 16t + 16) of rows g and g + 8, i.e. the groups of
// four columns 4t .. 4t + 3 (two values each). mma j (0, 1) of the piece takes group 4t + 2j as
// its compressed columns {2t, 2t + 1} and group 4t + 2j + 1 as {2t + 8, 2t + 9}, so its K slot
// group s holds column group 4s + 2j (s < 4) or 4(s - 4) + 2j + 1 (s >= 4). x (the B operand)
// follows the same map: a lane's slots lie in two 16-column runs of the piece, of which it needs
// every other bf16 pair; it loads half of each run and swaps the rest with lane ^ 1 (sp_x).
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_tc.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_tc;
using namespace sd_pdl;

// The metadata operand's layout for m16n8k32 bf16 (sparsity selector j: lanes 4g + 2j and
// 4g + 2j + 1 supply it). META 1: lane 4g + 2j + h holds the indices of K slots [16h, 16h + 16)
// of row g in its low half and of row g + 8 in its high half. META 0: it holds all 32 slots of row
// g (h = 0) or of row g + 8 (h = 1). test_spmv_gpu's sp24 test runs both and names the one the
// hardware implements; SD_SP24_META is the one launched.
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

// x of vector v (zero for v >= B), 8 bf16 from column c.
__device__ __forceinline__ uint4 load_x8(const TcParams &p, int v, int64_t c)
{
    if (v < p.B && c < p.cols)
        return __ldg(reinterpret_cast<const uint4 *>(p.x + (int64_t)v * p.ldx + c));
    return make_uint4(0, 0, 0, 0);
}

// The B fragments of one 16-column run: lane (g, t) needs the bf16 pairs 2k + (t & 1), k = 0..3, of
// columns [c0, c0 + 16) of vector g; it loads pairs 4(t & 1) .. 4(t & 1) + 3 and swaps two of them
// with its partner lane ^ 1. e[k] = pair 2k + (t & 1).
__device__ __forceinline__ void sp_x_run(const TcParams &p, int v, int64_t c0, int t, uint32_t (&e)[4])
{
    const int odd = t & 1;
    const uint4 u = load_x8(p, v, c0 + 8 * odd);
    const uint32_t r0 = __shfl_xor_sync(0xffffffffu, odd ? u.x : u.y, 1);
    const uint32_t r1 = __shfl_xor_sync(0xffffffffu, odd ? u.z : u.w, 1);
    e[0] = odd ? r0 : u.x, e[1] = odd ? r1 : u.z;
    e[2] = odd ? u.y : r0, e[3] = odd ? u.w : r1;
}

// What a lane loads per piece: values of rows g, g + 8 (16 bytes each) and their 64 mask bits.
struct SpRegs {
    uint4 v[2][2]; // [piece][row g, g + 8]
    uint2 m[2][2];
};

// The step at mask word cw (two 64-column pieces) of the split [w_begin, w_end). A piece past the
// end gets zero values and a valid mask (0x3 in every group: metadata must name two distinct
// slots in order); words_per_split and cols are multiples of 64 columns.
__device__ __forceinline__ void sp_load(SpRegs &r, const uint4 *vg, const uint4 *vg8, const uint2 *mg,
                                        const uint2 *mg8, int64_t cw, int64_t w_end, int t)
{
#pragma unroll
    for (int s = 0; s < 2; s++) {
        const int64_t w = cw + 2 * s;
        if (w < w_end) {
            r.v[s][0] = __ldg(vg + 2 * w + t), r.v[s][1] = __ldg(vg8 + 2 * w + t);
            r.m[s][0] = __ldg(mg + w / 2), r.m[s][1] = __ldg(mg8 + w / 2);
        } else {
            r.v[s][0] = r.v[s][1] = make_uint4(0, 0, 0, 0);
            r.m[s][0] = r.m[s][1] = make_uint2(0x33333333u, 0x33333333u);
        }
    }
}

// One piece: both mma of every n-tile.
template <int NT, int META>
__device__ __forceinline__ void sp_piece(const TcParams &p, float (&c)[NT][4], const SpRegs &r, int s,
                                         int64_t col, int g, int t)
{
    const uint32_t e = sp_meta<META>(r.m[s][0], r.m[s][1], t);
    const uint4 vg = r.v[s][0], vg8 = r.v[s][1];
    const uint32_t a0[4] = {vg.x, vg8.x, vg.y, vg8.y}, a1[4] = {vg.z, vg8.z, vg.w, vg8.w};
    const int64_t c0 = col + 16 * (t >> 1);
#pragma unroll
    for (int n = 0; n < NT; n++) {
        uint32_t x0[4], x1[4]; // the runs at c0 and c0 + 32
        sp_x_run(p, 8 * n + g, c0, t, x0);
        sp_x_run(p, 8 * n + g, c0 + 32, t, x1);
        const uint32_t b0[4] = {x0[0], x1[0], x0[1], x1[1]}, b1[4] = {x0[2], x1[2], x0[3], x1[3]};
        mma_sp<0>(c[n], a0, b0, e);
        mma_sp<1>(c[n], a1, b1, e);
    }
}

// The next step's weights are loaded while this one multiplies, the first step's before the PDL
// wait (as the register-expanding kernel does).
template <int NT, bool SW, int META> __global__ void __launch_bounds__(kThreads) sp24_kernel(TcParams p)
{
    extern __shared__ uint4 smem_tc[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t words = p.cols >> 5, row0 = (int64_t)blockIdx.x * 16;
    const int64_t w_begin = blockIdx.y * p.words_per_split;
    const int64_t w_end = min(words, w_begin + p.words_per_split);
    const int64_t rg = tc_row<SW>(p, row0, g), rg8 = tc_row<SW>(p, row0, g + 8);
    const uint4 *vg = reinterpret_cast<const uint4 *>(p.values + rg * (p.cols >> 1));
    const uint4 *vg8 = reinterpret_cast<const uint4 *>(p.values + rg8 * (p.cols >> 1));
    const uint2 *mg = reinterpret_cast<const uint2 *>(p.mask + rg * words);
    const uint2 *mg8 = reinterpret_cast<const uint2 *>(p.mask + rg8 * words);
    const int64_t step = 4 * kWarps;
    int64_t cw = w_begin + 4 * warp;
    SpRegs cur;
    if (cw < w_end)
        sp_load(cur, vg, vg8, mg, mg8, cw, w_end, t);
    float c[NT][4] = {};
    pdl_wait();
    pdl_trigger();
    for (; cw < w_end; cw += step) {
        SpRegs nxt;
        if (cw + step < w_end)
            sp_load(nxt, vg, vg8, mg, mg8, cw + step, w_end, t);
#pragma unroll
        for (int s = 0; s < 2; s++)
            sp_piece<NT, META>(p, c, cur, s, cw * 32 + 64 * s, g, t);
        cur = nxt;
    }
    reduce_store<NT, SW>(p, reinterpret_cast<float *>(smem_tc), c, row0);
}

template <bool SW, int META> tc_kernel_fn sp24_kernel_for(int B)
{
    return B <= 8 ? sp24_kernel<1, SW, META> : sp24_kernel<2, SW, META>;
}

} // namespace

extern "C" int sd__nm_sp24_supported(const sd_nm_spmv_args *a)
{
    return a->n == 2 && a->m == 4 && a->B <= SD_NM_MAX_B && a->cols % 64 == 0 && a->ldx % 8 == 0 &&
           ((uintptr_t)a->x & 15) == 0 && ((uintptr_t)a->mask & 7) == 0;
}

extern "C" int sd__nm_sp24_launch_meta(const sd_nm_spmv_args *a, int split, int meta, cudaStream_t s)
{
    if (!sd__nm_sp24_supported(a) || split < 1 || (meta != 0 && meta != 1))
        return SD_EINVAL;
    const int64_t words = a->cols / 32;
    int64_t wps = (words + split - 1) / split;
    wps = (wps + 3) / 4 * 4;
    const int64_t nsplit = (words + wps - 1) / wps;
    if (a->swiglu && nsplit > 1) // a row's whole sum in one block
        return SD_ENOTSUP;
    TcParams p;
    p.values = a->values, p.mask = a->mask, p.x = a->x, p.y = a->y;
    p.rows = a->rows, p.cols = a->cols, p.ldx = a->ldx, p.ldy = a->ldy;
    p.words_per_split = wps;
    p.B = a->B, p.y_bf16 = a->y_bf16, p.accumulate = a->accumulate, p.atomic = nsplit > 1;
    p.half = a->swiglu ? a->rows / 2 : 0;
    if (p.atomic && !a->accumulate &&
        cudaMemset2DAsync(a->y, (size_t)a->ldy * 4, 0, (size_t)a->rows * 4, (size_t)a->B, s) != cudaSuccess)
        return SD_ECUDA;
    const int NT = a->B > 8 ? 2 : 1;
    const size_t smem = (size_t)kWarps * 16 * 8 * NT * 4; // the reduction's tiles
    const int64_t grid_rows = a->swiglu ? a->rows / 2 : a->rows, per_block = a->swiglu ? 8 : 16;
    dim3 grid((unsigned)((grid_rows + per_block - 1) / per_block), (unsigned)nsplit);
    tc_kernel_fn k = a->swiglu ? (meta ? sp24_kernel_for<true, 1>(a->B) : sp24_kernel_for<true, 0>(a->B))
                               : (meta ? sp24_kernel_for<false, 1>(a->B) : sp24_kernel_for<false, 0>(a->B));
    const int pdl = (a->ctx ? a->ctx->pdl : 1) && !(p.atomic && !a->accumulate); // not after a memset
    return sd_launch(k, grid, dim3(kThreads), smem, s, pdl, p) == cudaSuccess ? 0 : SD_ECUDA;
}

extern "C" int sd__nm_sp24_launch(const sd_nm_spmv_args *a, int split, cudaStream_t s)
{
    return sd__nm_sp24_launch_meta(a, split, SD_SP24_META, s);
}
