// nm_spmv_c24: the batch-1 (and batch-2) 2:4 SpMV that compacts x beside the values instead of
// gathering it, and its batch-1 4:8 twin.
//
// Why: the word-per-lane gather kernel (nm_spmv.cu) spends per kept value a bit scan (FLO, BMSK,
// LOP3), an address, one shared-memory gather of x, the bf16 unpack and an FMA: 7 instructions
// (its gathers land on random banks, ~2.6-way conflicts, until kernels/NOTES.md v25 made its x
// tile lane-major). On the large 8B shapes that kept the L1 pipe ~80% busy at 80% of the DRAM
// rate (v10). Under 2:4 every 4-column nibble of a mask
// word holds exactly two values, stored side by side in one u32. So a lane loads its word's 32
// columns of x once (four conflict-free LDS.128, shared by the warp's rows) and, per nibble, one
// byte permute picks the two x values the pair needs out of the nibble's two x pairs. The
// permute's selector comes from the nibble by two more permutes on constants (no table load, no
// bit scan): nibble & 7 tells the six two-bit nibbles apart. ~10 instructions per two values,
// and ~1/8 of the gather kernel's shared-memory wavefronts for x. Two vectors share each nibble's
// selector (kernels/NOTES.md v12); at 3 and 4 the x loads bind the L1 pipe and the tensor-core
// kernel is faster.
//
// Everything else is the gather kernel's: a lane owns one mask word per step (cursor over the
// (K-tile, word) steps), RW rows per warp, the first step's weights loaded before the PDL wait,
// the next step's while this one computes, split-K over grid.y with fp32 atomics. The per-word
// math lives in nm_c24.h (host and device: tests/kernels/test_nm_c24.c runs it on the CPU).
//
// 4:8 (nm_c48.h): each mask byte keeps four columns, so two permutes per stored value pair pick
// its x out of three of the byte's four x pairs, with selectors from a 256-entry table in shared
// memory. Batch 1 only (kernels/NOTES.md v19).
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_c24.h"
#include "kernels/nm_c48.h"
#include "kernels/nm_device.cuh"
#include "kernels/nm_gather.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_dev;
using namespace sd_nm_gather;
using namespace sd_pdl;

// The 4:8 selector table (nm_c48.h), computed by the compiler; each block copies it into shared
// memory before its PDL wait (1 KB from L2).
struct C48Tab {
    uint32_t e[256];
};
constexpr C48Tab c48_make_tab()
{
    C48Tab t{};
    for (int i = 0; i < 256; i++)
        t.e[i] = sd_c48_entry32((uint32_t)i);
    return t;
}
__device__ const C48Tab kC48Tab = c48_make_tab();

// Staged x: one word (32 bf16 = four 16-byte units) per 5 units. The odd stride puts the 8
// lanes of an LDS.128 phase (consecutive words) on 8 distinct bank groups.
constexpr int kUnitsPerWord = 5;

// sd_c24_word on the two 16-byte halves of a lane's word as loaded.
__device__ __forceinline__ sd_c24_acc c24_word(uint32_t bits, const uint4 &v0, const uint4 &v1,
                                               const uint32_t (&xv)[16], sd_c24_acc acc)
{
    const uint32_t u[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
    return sd_c24_word(bits, u, xv, acc);
}

// x of words [t0, t0 + kt) as bf16, for each of the BT vectors: vector b's word wl at units
// [(b * kt + wl) * kUnitsPerWord, + 4).
template <int BT> __device__ void stage_x_c24(uint4 *xs, const KParams &p, int64_t t0, int kt)
{
#pragma unroll
    for (int b = 0; b < BT; b++) {
        const uint4 *src = reinterpret_cast<const uint4 *>(p.x + b * p.ldx + t0 * 32);
        uint4 *dst = xs + b * kt * kUnitsPerWord;
        for (int i = threadIdx.x; i < kt * 4; i += kThreads)
            dst[(i >> 2) * kUnitsPerWord + (i & 3)] = __ldg(src + i);
    }
}

// The word's x of vector b (staged by stage_x_c24) as 16 bf16 pairs.
__device__ __forceinline__ void load_xv(uint32_t (&xv)[16], const uint4 *xw)
{
    const uint4 x0 = xw[0], x1 = xw[1], x2 = xw[2], x3 = xw[3];
    const uint32_t v[16] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w,
                            x2.x, x2.y, x2.z, x2.w, x3.x, x3.y, x3.z, x3.w};
#pragma unroll
    for (int i = 0; i < 16; i++)
        xv[i] = v[i];
}

// RW rows per warp; MINB: blocks per SM the registers must leave room for (0: no cap); BT:
// vectors (1 or 2; the selectors of a word serve both); M: the pattern's group (4: 2:4, 8: 4:8).
// SW: the SwiGLU epilogue (nm_gather.cuh store_swiglu).
template <int M, int RW, int MINB, int BT, bool SW>
__global__ void __launch_bounds__(kThreads, MINB) c24_spmv_kernel(KParams p)
{
    extern __shared__ uint4 xs[];
    __shared__ uint32_t tab[M == 8 ? 256 : 1]; // 4:8: the selector table, read after the first barrier
    if constexpr (M == 8)
        for (int i = threadIdx.x; i < 256; i += kThreads)
            tab[i] = kC48Tab.e[i];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t words = p.cols >> 5, row0 = ((int64_t)blockIdx.x * kWarps + warp) * RW;
    const int64_t w_begin = blockIdx.y * p.units_per_split;
    const int64_t w_end = min(words, w_begin + p.units_per_split);
    const uint32_t *mrow[RW];
    const uint4 *vrow[RW];
#pragma unroll
    for (int r = 0; r < RW; r++) {
        int64_t row = warp_row<RW, SW>(p, row0, warp, r); // tail rows recompute the last row, not stored
        mrow[r] = p.mask + row * words;
        vrow[r] = reinterpret_cast<const uint4 *>(p.values + row * (p.cols >> 1));
    }
    constexpr int U = 2; // words per lane in flight (and the next step's): 1 was slower everywhere
    Cursor cur = cursor_first(w_begin, w_end, p.kt, lane);
    WordLoads<RW, U> w;
    if (cur.valid) // the first step's weights, while the grid before may still run
        load_words<RW, U>(w, mrow, vrow, cur);
    pdl_wait(); // x is written by the grid before (pdl.cuh)
    pdl_trigger();
    sd_c24_acc acc[RW][BT] = {};
    for (int64_t t0 = w_begin; t0 < w_end; t0 += p.kt) {
        const int kt = (int)min((int64_t)p.kt, w_end - t0);
        __syncthreads();
        stage_x_c24<BT>(xs, p, t0, kt);
        __syncthreads();
        for (; cur.valid && cur.t0 == t0;) {
            const Cursor nxt = cursor_next<U>(cur, p.kt, lane);
            WordLoads<RW, U> wn;
            if (nxt.valid) // the next step's weights in flight while this one computes
                load_words<RW, U>(wn, mrow, vrow, nxt);
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int wl = cur.u0 + 32 * u;
                if (u > 0 && wl >= kt)
                    break;
                if constexpr (BT == 1) { // as measured (v11); load_xv here changes the PTX
                    const uint4 *xw = xs + wl * kUnitsPerWord;
                    const uint4 x0 = xw[0], x1 = xw[1], x2 = xw[2], x3 = xw[3];
                    const uint32_t xv[16] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w,
                                             x2.x, x2.y, x2.z, x2.w, x3.x, x3.y, x3.z, x3.w};
#pragma unroll
                    for (int r = 0; r < RW; r++) {
                        if constexpr (M == 8) {
                            const uint4 &v0 = w.v0[u][r], &v1 = w.v1[u][r];
                            const uint32_t uv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
                            acc[r][0] = sd_c48_word(w.mk[u][r], uv, xv, tab, acc[r][0]);
                        } else {
                            acc[r][0] = c24_word(w.mk[u][r], w.v0[u][r], w.v1[u][r], xv, acc[r][0]);
                        }
                    }
                } else {
                    uint32_t xv[BT][16];
                    const uint32_t *xp[BT];
#pragma unroll
                    for (int b = 0; b < BT; b++) {
                        load_xv(xv[b], xs + (b * kt + wl) * kUnitsPerWord);
                        xp[b] = xv[b];
                    }
#pragma unroll
                    for (int r = 0; r < RW; r++) {
                        const uint4 &v0 = w.v0[u][r], &v1 = w.v1[u][r];
                        const uint32_t uv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
                        sd_c24_word_batch(w.mk[u][r], uv, xp, BT, acc[r]);
                    }
                }
            }
            cur = nxt;
            w = wn;
        }
    }
    float sum[RW][BT];
#pragma unroll
    for (int r = 0; r < RW; r++)
#pragma unroll
        for (int b = 0; b < BT; b++)
            sum[r][b] = acc[r][b].a + acc[r][b].b;
    store_out_rows<BT, RW, SW>(p, sum, row0, warp, lane);
}

} // namespace

extern "C" int sd__nm_c24_supported(const sd_nm_spmv_args *a, int cfg)
{
    return ((a->n == 2 && a->m == 4) || (a->n == 4 && a->m == 8 && a->B == 1)) && a->B >= 1 &&
           a->B <= SD_NM_C24_MAX_B && (a->B == 1 || cfg != 2) && a->cols % 32 == 0 &&
           ((uintptr_t)a->x & 15) == 0 && (a->B == 1 || a->ldx % 8 == 0);
}

namespace sd_nm_gather
{
template <int M, int BT, bool SW> static kernel_fn c24_batch_kernel(int cfg)
{
    return cfg == 3 ? c24_spmv_kernel<M, 1, 3, BT, SW> : c24_spmv_kernel<M, 1, 0, BT, SW>;
}

template <int M, bool SW> static kernel_fn c24_kernel_sw(int cfg, int B)
{
    // Batch 1: 1 row per warp (78 registers, 3 blocks per SM), 2 rows (127, 2 blocks), 1 row
    // capped at 64 registers (4 blocks): each wins somewhere (kernels/NOTES.md v11). Batch 2:
    // one row per warp, uncapped (97 registers) or capped for 3 blocks per SM (78); at 3 and 4
    // vectors the staged x's loads bind and the tensor-core kernel was faster everywhere (v12).
    // 4:8: batch 1 only (sd__nm_c24_supported): at 2 the row-per-lane kernel was faster on the 8B
    // shapes (NOTES.md v19), so no batch instance is built
    if constexpr (M == 4)
        if (B == 2)
            return c24_batch_kernel<M, 2, SW>(cfg);
    return cfg == 2   ? c24_spmv_kernel<M, 2, 0, 1, SW>
           : cfg == 3 ? c24_spmv_kernel<M, 1, 4, 1, SW>
                      : c24_spmv_kernel<M, 1, 0, 1, SW>;
}

kernel_fn c24_kernel(int cfg, int B, int m, bool swiglu)
{
    if (m == 8)
        return swiglu ? c24_kernel_sw<8, true>(cfg, B) : c24_kernel_sw<8, false>(cfg, B);
    return swiglu ? c24_kernel_sw<4, true>(cfg, B) : c24_kernel_sw<4, false>(cfg, B);
}
int c24_kt_max(int B)
{
    return (kSmemBudget / (B * kUnitsPerWord * 16)) & ~31;
}
size_t c24_smem(int kt, int B)
{
    return (size_t)B * kt * kUnitsPerWord * 16;
}
} // namespace sd_nm_gather
