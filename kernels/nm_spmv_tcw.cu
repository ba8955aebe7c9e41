// nm_spmv_tcw: the wide register-expanding tensor-core SpMV (rows_per_warp SD_NM_RW_TCXW): 2:4 to
// 16:32 for batches up to 64, a block of 8 warps over 128 rows with its weights and x staged in
// shared memory (kernels/NOTES.md v9, v19). Split out of nm_spmv_tc.cu, whose launcher runs it.
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_tc.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_tc;
using namespace sd_pdl;

// The wide kernel's output: each warp stores its own C fragments (one 16-row tile).
template <int NT>
__device__ __forceinline__ void store_frags(const TcParams &p, const float (&c)[NT][4], int64_t row0)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int h = 0; h < 2; h++) // C fragment: c0,c1 = row g; c2,c3 = row g+8; vectors 2t, 2t+1
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int b = 8 * n + 2 * t + e;
                const int64_t row = row0 + g + 8 * h;
                if (b < p.B && row < p.rows)
                    store_y(p, (int64_t)b * p.ldy + row, c[n][2 * h + e]);
            }
}

// x tile of one step: [8*NT vectors][128 columns] bf16, rows padded to 272 bytes so that a lane's
// 16-byte fragment loads are conflict-free (a phase of 8 lanes: rows g, g+1 x t = 0..3 hits 32
// distinct banks).
constexpr int kXStride = 128 + 8;

// Starts the copies of x columns [32 cw, 32 cw + 128) of every vector into xs; vectors past B and
// columns past the end are zero-filled.
// Loops of fixed trip count over the thread's own units (here and in stage_w), so that their
// arithmetic is the same every step and leaves the step loop: loops from threadIdx.x cost the GEMM-
// shaped 2:4 kernel ~450 instructions a thread a step (results/2026-12-02-s16/r2, r3).
template <int NT> __device__ __forceinline__ void stage_x(const TcParams &p, uint16_t *xs, int64_t cw)
{
    constexpr int kUnits = 8 * NT * 16;
    const int ch = threadIdx.x & 15;
    const int64_t c = cw * 32 + 8 * ch;
#pragma unroll
    for (int j = 0; j < (kUnits + kThreads - 1) / kThreads; j++) {
        const int r = (threadIdx.x >> 4) + 16 * j;
        if (kUnits % kThreads != 0 && r >= 8 * NT)
            continue;
        const bool ok = r < p.B && c < p.cols;
        cp_async16_zfill((uint32_t)__cvta_generic_to_shared(xs + r * kXStride + 8 * ch),
                         ok ? p.x + (int64_t)r * p.ldx + c : p.x, ok ? 16u : 0u);
    }
}

constexpr int kWRow = 128; // bytes of a row's values per step (128 columns at 50%)

// One step's shared memory with NT n-tiles and MW 16-row tiles a warp: values [kRows rows][8 chunks
// of 16 B] (swizzled: wide_chunk), masks [kRows][4 words], then x as stage_x writes it. MW = 1
// (128 rows a block): two blocks an SM; MW = 2 (256 rows): one block an SM (x read from L2 once per
// 256 rows, and each warp's x fragments serve two row tiles). Deep: 4 steps in flight where they
// fit, else 3. At 128 rows 4:8 and 8:16 measured faster deep (8B gate_up at 16 vectors, split 1:
// 1533 -> 2312 GB/s; decode at batch 16 -4.5%), 16:32 slower (its whole-word expansion holds more
// registers; 4096-row shapes -2 to -6%), so 16:32 keeps 3 there (results/2026-12-03-s17/r2).
template <int NT, int MW, bool Deep = true> struct WideStage {
    static constexpr int kRows = 16 * kWarps * MW;
    static constexpr int kVals = kRows * kWRow;
    static constexpr int kMasks = kRows * 16;
    static constexpr int kBytes = kVals + kMasks + 8 * NT * kXStride * 2;
    static constexpr int kBudget = MW == 1 ? 113 * 1024 : 227 * 1024;
    static constexpr int kStages = Deep && kBudget / kBytes >= 4 ? 4 : 3;
    static constexpr int kSmem = kStages * kBytes;
};
// The stages the kernel of pattern E runs with; its launch sizes shared memory from the same type.
template <class E, int NT, int MW> using WideStageOf = WideStage<NT, MW, MW == 2 || !E::kWhole>;

// Value chunk c (16 B, 0..7) of block row r: rows of odd index swap their halves, so that the 8
// lanes of a 16-byte phase (rows g, g+1 x chunks t) hit 8 distinct bank groups.
__device__ __forceinline__ int wide_chunk(int r, int c)
{
    return r * kWRow + ((c ^ ((r & 1) << 2)) << 4);
}

// Starts the copies of the block's weights of the step at mask word cw: values and masks of its
// rows (past the last row: the last row again, never stored; past w_end: zeros).
template <int NT, int MW>
__device__ __forceinline__ void stage_w(const TcParams &p, char *st, int64_t blk_row0, int64_t cw,
                                        int64_t w_end)
{
    using S = WideStage<NT, MW>;
    static_assert(S::kRows * 8 % kThreads == 0 && S::kRows * 2 % kThreads == 0, "whole units a thread");
    const int64_t words = p.cols >> 5;
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(st);
    const int c = threadIdx.x & 7;
    const bool ok = cw + 2 * (c >> 2) < w_end; // piece c/4 inside the split
#pragma unroll
    for (int j = 0; j < S::kRows * 8 / kThreads; j++) {
        const int r = (threadIdx.x >> 3) + kThreads / 8 * j;
        const int64_t row = min(blk_row0 + r, p.rows - 1);
        cp_async16_zfill(base + wide_chunk(r, c),
                         ok ? p.values + row * (p.cols >> 1) + cw * 16 + c * 8 : p.values, ok ? 16u : 0u);
    }
    const int h = threadIdx.x & 1;
    const bool okm = cw + 2 * h < w_end;
#pragma unroll
    for (int j = 0; j < S::kRows * 2 / kThreads; j++) {
        const int r = (threadIdx.x >> 1) + kThreads / 2 * j;
        const int64_t row = min(blk_row0 + r, p.rows - 1);
        cp_async8_zfill(base + S::kVals + r * 16 + h * 8, okm ? p.mask + row * words + cw + 2 * h : p.mask,
                        okm ? 8u : 0u);
    }
}

// Piece s of the staged step st as the A fragments of rows rg (ag) and rg + 8 (ag8): the v8 layout
// (lane t: 16-byte chunk 4s + t and its half of mask word 2s + t/2), or the whole-word one (16:32:
// chunks 2t and 2t + 1, mask word t; nm_tcx.h).
template <class E, class S>
__device__ __forceinline__ void wide_expand(const char *st, int rg, int s, int t, int shift,
                                            const uint32_t *tab, uint32_t (&ag)[8], uint32_t (&ag8)[8])
{
    const uint32_t *mk = reinterpret_cast<const uint32_t *>(st + S::kVals);
    if constexpr (E::kWhole) {
        const auto unit = [&](int r, int c) {
            return *reinterpret_cast<const uint4 *>(st + wide_chunk(r, c));
        };
        E::expand_word(unit(rg, 2 * t), unit(rg, 2 * t + 1), mk[4 * rg + t], s, tab, ag);
        E::expand_word(unit(rg + 8, 2 * t), unit(rg + 8, 2 * t + 1), mk[4 * (rg + 8) + t], s, tab, ag8);
    } else {
        const uint4 v0 = *reinterpret_cast<const uint4 *>(st + wide_chunk(rg, 4 * s + t));
        const uint4 v8 = *reinterpret_cast<const uint4 *>(st + wide_chunk(rg + 8, 4 * s + t));
        const uint32_t *m = mk + 2 * s + (t >> 1);
        const uint32_t va[4] = {v0.x, v0.y, v0.z, v0.w}, vb[4] = {v8.x, v8.y, v8.z, v8.w};
        E::expand(va, (m[4 * rg] >> shift) & 0xffffu, tab, ag);
        E::expand(vb, (m[4 * (rg + 8)] >> shift) & 0xffffu, tab, ag8);
    }
}

// One staged step of a warp: its MW row tiles (rows rg, rg + 8 of each) against all NT n-tiles of x,
// two 64-column pieces. Each piece's A fragments are expanded once and serve every n-tile; each x
// fragment serves every row tile.
template <class E, int NT, int MW>
__device__ __forceinline__ void wide_step(float (&c)[MW][NT][4], const char *st, int rg, int g, int t,
                                          int shift, const uint32_t *tab)
{
    using S = WideStage<NT, MW>;
    const uint16_t *xs = reinterpret_cast<const uint16_t *>(st + S::kVals + S::kMasks);
#pragma unroll
    for (int s = 0; s < 2; s++) {
        uint32_t ag[MW][8], ag8[MW][8];
#pragma unroll
        for (int m = 0; m < MW; m++)
            wide_expand<E, S>(st, rg + 16 * m, s, t, shift, tab, ag[m], ag8[m]);
#pragma unroll
        for (int n = 0; n < NT; n++) {
            const uint4 *xp =
                reinterpret_cast<const uint4 *>(xs + (8 * n + g) * kXStride + tcx_col<E>(0, s, t));
            const uint4 lo = xp[0], hi = xp[1];
            const uint32_t xr[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
            for (int m = 0; m < MW; m++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    mma_bf16(c[m][n], ag[m][2 * j], ag8[m][2 * j], ag[m][2 * j + 1], ag8[m][2 * j + 1],
                             xr[2 * j], xr[2 * j + 1]);
        }
    }
}

// 2:4 / 4:8 / 8:16 / 16:32, wide (batches up to 64, rows_per_warp SD_NM_RW_TCXW / _TCXW2): a block of 8
// warps owns 128 or 256 rows, 16 or 32 per warp, and every warp walks the block's whole K share in step
// with the others. Per step (128 columns) the block copies its rows' values and masks and x for all
// vectors into shared memory with cp.async, kStages - 1 steps ahead (one copy group per step). At B =
// 64 a warp needs 8 KB of x per 1 KB of its 16-row weights, which per-lane global loads could not feed
// (9% of the DRAM rate, waiting on L1), and one step of weights prefetched in registers left DRAM
// latency uncovered between the per-step barriers (NOTES.md v9). One barrier a step: after it every
// warp is done with the step before, whose slot the next copies then fill. Each warp owns its rows: no
// cross-warp reduction, the fragments are stored directly (store_frags).
template <class E, int NT, int MW>
__global__ void __launch_bounds__(kThreads, MW == 1 ? 2 : 1) tcxw_spmv_kernel(TcParams p)
{
    extern __shared__ uint4 smem_tc[];
    char *smem = reinterpret_cast<char *>(smem_tc);
    __shared__ __align__(8) uint32_t tab[E::kTab]; // 8: nm_tcx.h sd_tcx_entry2
    tcx_table<E>(tab);
    using S = WideStageOf<E, NT, MW>;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t words = p.cols >> 5, blk_row0 = (int64_t)blockIdx.x * S::kRows;
    const int64_t row0 = blk_row0 + 16 * MW * warp;
    const int64_t w_begin = blockIdx.y * p.words_per_split;
    const int64_t w_end = min(words, w_begin + p.words_per_split);
    const int nsteps = (int)((w_end - w_begin + 3) / 4);
    const bool mine = row0 < p.rows; // the last block's warps past the end only copy
    const int rg = 16 * MW * warp + g, shift = sd_tcx_mask_shift(t);
    // The first steps' weights while the grid before may still run; x after it (pdl.cuh). Group
    // k holds step k's copies (group 0 also the weights of steps 1..kStages-2).
#pragma unroll
    for (int k = 0; k < S::kStages - 1; k++)
        if (k < nsteps)
            stage_w<NT, MW>(p, smem + k * S::kBytes, blk_row0, w_begin + 4 * k, w_end);
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int k = 0; k < S::kStages - 1; k++) {
        if (k < nsteps)
            stage_x<NT>(p, reinterpret_cast<uint16_t *>(smem + k * S::kBytes + S::kVals + S::kMasks),
                        w_begin + 4 * k);
        cp_async_commit();
    }
    float c[MW][NT][4] = {};
    for (int k = 0; k < nsteps; k++) {
        cp_async_wait<S::kStages - 2>(); // step k's group (later ones may still be in flight)
        __syncthreads();                 // every thread's copies, tab on the first step, step k - 1 done
        const int kn = k + S::kStages - 1;
        if (kn < nsteps) {
            char *sn = smem + kn % S::kStages * S::kBytes;
            stage_w<NT, MW>(p, sn, blk_row0, w_begin + 4 * (int64_t)kn, w_end);
            stage_x<NT>(p, reinterpret_cast<uint16_t *>(sn + S::kVals + S::kMasks),
                        w_begin + 4 * (int64_t)kn);
        }
        cp_async_commit();
        if (mine)
            wide_step<E, NT, MW>(c, smem + k % S::kStages * S::kBytes, rg, g, t, shift, tab);
    }
    cp_async_wait<0>();
    if (mine)
#pragma unroll
        for (int m = 0; m < MW; m++)
            store_frags<NT>(p, c[m], row0 + 16 * m);
}

// The n-tiles of 8 vectors the wide kernels take for B vectors.
int wide_nt(int B)
{
    return B <= 8 ? 1 : B <= 16 ? 2 : B <= 32 ? 4 : 8;
}

template <class E, int NT, int MW> WideKernel wide_of()
{
    return {tcxw_spmv_kernel<E, NT, MW>, (size_t)WideStageOf<E, NT, MW>::kSmem};
}

template <class E, int MW> WideKernel wide_kernel(int B)
{
    switch (wide_nt(B)) {
    case 1:
        return wide_of<E, 1, MW>();
    case 2:
        return wide_of<E, 2, MW>();
    case 4:
        return wide_of<E, 4, MW>();
    default:
        return wide_of<E, 8, MW>();
    }
}

template <int MW> WideKernel tcxw_kernel_mw(int m, int B)
{
    return m == 4    ? wide_kernel<Tcx24, MW>(B)
           : m == 8  ? wide_kernel<Tcx48, MW>(B)
           : m == 16 ? wide_kernel<Tcx816, MW>(B)
                     : wide_kernel<Tcx1632, MW>(B);
}
} // namespace

namespace sd_nm_tc
{
WideKernel tcxw_kernel(int m, int B, int mw)
{
    return mw == 2 ? tcxw_kernel_mw<2>(m, B) : tcxw_kernel_mw<1>(m, B);
}
} // namespace sd_nm_tc
