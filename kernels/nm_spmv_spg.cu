// nm_spmv_spg: 2:4 weights on the sparse tensor cores for many vectors (up to 64): a block of 8
// warps over 128 or 256 rows, each warp its own 16 or 32 rows across the block's whole K share,
// weights and x staged in shared memory once per block and read back with ldmatrix.
//
// The 16/32-row kernels of nm_spmv_sp.cu let every block read all of x from L2 and every warp
// fetch its x fragments itself: at B = 8 that is 59-117 MB of x a gate_up launch beside 132 MB of
// weights (kernels/NOTES.md v21), and it grows with B. Here x is read from L2 once per 128-256
// rows and each warp's fragments come from shared memory, so the ratio of x to weight bytes is that
// of a GEMM tile. No K permutation is needed: with the values and x in shared memory, ldmatrix
// gives both operands in the mma's own order (compressed column 2s, 2s + 1 = 2:4 group s), and the
// metadata is the mask's nibbles as they are (nm_sp24.h layout 1, selector = chunk & 1).
#include "kernels/nm_sp24.cuh"
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_tc.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_tc;
using namespace sd_nm_sp24;
using namespace sd_pdl;

constexpr int kCols = 128; // columns a stage: 4 mask words, 128 B of values a row

// A stage's shared memory: values [R rows][8 units of 16 B], masks [R][16 B], x [8 NT vectors][16
// units]. Unit u of a values row r sits at u ^ (r & 7), of an x row v at u ^ (v & 7): the 8 rows
// an ldmatrix reads (one 16-byte unit each) then hit 8 distinct bank groups.
template <int NT, int MW> struct Spg {
    static constexpr int kRows = kWarps * 16 * MW;
    static constexpr int kVals = kRows * 128;
    static constexpr int kMasks = kRows * 16;
    static constexpr int kX = 8 * NT * 256;
    static constexpr int kStage = kVals + kMasks + kX;
    // MW = 1: two blocks an SM (~113 KB each); MW = 2: one (~227 KB). 2-4 stages.
    static constexpr int kBudget = MW == 1 ? 113 * 1024 : 227 * 1024;
    static constexpr int kStages = kBudget / kStage >= 4 ? 4 : kBudget / kStage >= 3 ? 3 : 2;
    static constexpr int kSmem = kStages * kStage;
};

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Starts the copies of the block's weights of stage column c0: values and masks of its rows (past
// the last row: the last row again, never stored). Loops of fixed trip count over the thread's own
// units, so that the row arithmetic is the same every stage and leaves the stage loop (a first
// version with loops from threadIdx.x issued ~450 instructions a thread a stage, results/
// 2026-12-02-s16/r2).
template <int NT, int MW>
__device__ __forceinline__ void spg_issue_w(const TcParams &p, uint32_t st, int64_t row0, int64_t c0)
{
    using S = Spg<NT, MW>;
    const int64_t words = p.cols >> 5;
    const int tid = threadIdx.x, u = tid & 7;
    const uint16_t *vals = p.values + (c0 >> 1) + 8 * u;
#pragma unroll
    for (int j = 0; j < S::kRows * 8 / kThreads; j++) { // row (tid >> 3) + 32 j, unit u
        const int r = (tid >> 3) + 32 * j;
        const int64_t row = min(row0 + r, p.rows - 1);
        cp_async16(st + 16 * (r * 8 + (u ^ (r & 7))), vals + row * (p.cols >> 1));
    }
#pragma unroll
    for (int j = 0; j < (S::kRows + kThreads - 1) / kThreads; j++) {
        const int r = tid + kThreads * j;
        if (S::kRows % kThreads == 0 || r < S::kRows)
            cp_async16(st + S::kVals + 16 * r, p.mask + min(row0 + r, p.rows - 1) * words + (c0 >> 5));
    }
}

// Starts the copies of x's stage at column c0 (vectors past B: zeros).
template <int NT, int MW>
__device__ __forceinline__ void spg_issue_x(const TcParams &p, uint32_t st, int64_t c0)
{
    using S = Spg<NT, MW>;
    constexpr int kUnits = 8 * NT * 16;
    const int tid = threadIdx.x, u = tid & 15;
#pragma unroll
    for (int j = 0; j < (kUnits + kThreads - 1) / kThreads; j++) { // vector (tid >> 4) + 16 j, unit u
        const int v = (tid >> 4) + 16 * j;
        if (kUnits % kThreads != 0 && v >= 8 * NT)
            continue;
        const bool ok = v < p.B;
        cp_async16_zfill(st + S::kVals + S::kMasks + 16 * (v * 16 + (u ^ (v & 7))),
                         ok ? p.x + (int64_t)v * p.ldx + c0 + 8 * u : p.x, ok ? 16u : 0u);
    }
}

// One staged stage: a warp's MW tiles of 16 rows against all 8 NT vectors, 4 chunks of 32
// columns. Lane (g, t) supplies the metadata of chunk 2h + (t >> 1) (selector (t >> 1)), K slots
// [16 (t & 1), +16) of rows g (low half) and g + 8 (high half): nm_sp24.h layout 1.
template <int NT, int MW>
__device__ __forceinline__ void spg_stage(float (&c)[MW][NT][4], const uint8_t *st, uint32_t st_s, int warp,
                                          int lane)
{
    using S = Spg<NT, MW>;
    const int g = lane >> 2, t = lane & 3, rl = lane & 7, mi = lane >> 3;
    const int wr0 = warp * 16 * MW;
#pragma unroll
    for (int h = 0; h < 2; h++) { // a 64-column piece: chunks 2h, 2h + 1
        uint32_t e[MW];
#pragma unroll
        for (int m = 0; m < MW; m++) {
            const uint32_t *mk = reinterpret_cast<const uint32_t *>(st + S::kVals);
            const uint32_t w0 = mk[4 * (wr0 + 16 * m + g) + 2 * h + (t >> 1)];
            const uint32_t w8 = mk[4 * (wr0 + 16 * m + g + 8) + 2 * h + (t >> 1)];
            const int sh = 16 * (t & 1);
            e[m] = sd_sp24_meta_nibbles(((w0 >> sh) & 0xffffu) | ((w8 >> sh) << 16));
        }
#pragma unroll
        for (int q = 2 * h; q < 2 * h + 2; q++) {
            uint32_t a[MW][4];
#pragma unroll
            for (int m = 0; m < MW; m++) { // matrices: rows 0-7 / 8-15 x compressed columns 0-7 / 8-15
                const int r = wr0 + 16 * m + rl + 8 * (mi & 1), u = 2 * q + (mi >> 1);
                ldsm_x4(st_s + 16 * (r * 8 + (u ^ (r & 7))), a[m]);
            }
#pragma unroll
            for (int n = 0; n < NT; n++) {
                uint32_t b[4]; // matrices: columns 32q + 8 mi of vectors 8n .. 8n + 7
                const int v = 8 * n + rl, u = 4 * q + mi;
                ldsm_x4(st_s + S::kVals + S::kMasks + 16 * (v * 16 + (u ^ (v & 7))), b);
#pragma unroll
                for (int m = 0; m < MW; m++) {
                    if (q & 1)
                        mma_sp<1>(c[m][n], a[m], b, e[m]);
                    else
                        mma_sp<0>(c[m][n], a[m], b, e[m]);
                }
            }
        }
    }
}

// Each warp stores its own C fragments: c0, c1 row g, vectors 2t, 2t + 1; c2, c3 row g + 8.
template <int NT, int MW>
__device__ __forceinline__ void spg_store(const TcParams &p, const float (&c)[MW][NT][4], int64_t row0)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int m = 0; m < MW; m++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int b = 8 * n + 2 * t + (k & 1);
                const int64_t row = row0 + 16 * m + g + 8 * (k >> 1);
                if (b < p.B && row < p.rows)
                    store_y(p, (int64_t)b * p.ldy + row, c[m][n][k]);
            }
}

// A block: kRows rows from blockIdx.x * kRows over the K share blockIdx.y (words_per_split mask
// words, a multiple of 4). The weights of the first kStages - 1 stages are in flight before the PDL
// wait, x's after it (an earlier kernel writes x).
template <int NT, int MW> __global__ void __launch_bounds__(kThreads, MW == 1 ? 2 : 1) spg_kernel(TcParams p)
{
    using S = Spg<NT, MW>;
    extern __shared__ uint4 smem_spg[];
    uint8_t *sm = reinterpret_cast<uint8_t *>(smem_spg);
    const uint32_t sm_s = (uint32_t)__cvta_generic_to_shared(sm);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t row0 = (int64_t)blockIdx.x * S::kRows, words = p.cols >> 5;
    const int64_t w_begin = blockIdx.y * p.words_per_split;
    const int64_t w_end = min(words, w_begin + p.words_per_split);
    const int n = (int)((w_end - w_begin) >> 2); // stages of this split
    const int64_t c_begin = w_begin * 32;
#pragma unroll
    for (int k = 0; k < S::kStages - 1; k++) {
        if (k < n)
            spg_issue_w<NT, MW>(p, sm_s + k * S::kStage, row0, c_begin + k * kCols);
        cp_async_commit();
    }
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int k = 0; k < S::kStages - 1; k++) {
        if (k < n)
            spg_issue_x<NT, MW>(p, sm_s + k * S::kStage, c_begin + k * kCols);
        cp_async_commit();
    }
    float c[MW][NT][4] = {};
    for (int k = 0; k < n; k++) {
        cp_async_wait<S::kStages - 2>(); // stage k has landed (this thread's copies)
        __syncthreads();                 // everyone's, and stage k - 1's slot is free
        const int kn = k + S::kStages - 1, slot_n = kn % S::kStages;
        if (kn < n) {
            spg_issue_w<NT, MW>(p, sm_s + slot_n * S::kStage, row0, c_begin + (int64_t)kn * kCols);
            spg_issue_x<NT, MW>(p, sm_s + slot_n * S::kStage, c_begin + (int64_t)kn * kCols);
        }
        cp_async_commit();
        const int slot = k % S::kStages;
        spg_stage<NT, MW>(c, sm + slot * S::kStage, sm_s + slot * S::kStage, warp, lane);
    }
    cp_async_wait<0>();
    spg_store<NT, MW>(p, c, row0 + warp * 16 * MW);
}

template <int MW> tc_kernel_fn spg_kernel_for(int nt)
{
    switch (nt) {
    case 1:
        return spg_kernel<1, MW>;
    case 2:
        return spg_kernel<2, MW>;
    case 3:
        return spg_kernel<3, MW>;
    case 4:
        return spg_kernel<4, MW>;
    case 5:
    case 6:
        return spg_kernel<6, MW>;
    default:
        return spg_kernel<8, MW>;
    }
}

template <int MW> size_t spg_smem(int nt)
{
    switch (nt) {
    case 1:
        return Spg<1, MW>::kSmem;
    case 2:
        return Spg<2, MW>::kSmem;
    case 3:
        return Spg<3, MW>::kSmem;
    case 4:
        return Spg<4, MW>::kSmem;
    case 5:
    case 6:
        return Spg<6, MW>::kSmem;
    default:
        return Spg<8, MW>::kSmem;
    }
}

} // namespace

extern "C" int sd__nm_spg_supported(const sd_nm_spmv_args *a)
{
    return a->n == 2 && a->m == 4 && a->B <= SD_NM_MAX_B_TILED && a->cols % kCols == 0 && a->ldx % 8 == 0 &&
           ((uintptr_t)a->x & 15) == 0 && ((uintptr_t)a->mask & 15) == 0 && ((uintptr_t)a->values & 15) == 0;
}

extern "C" int sd__nm_spg_launch(const sd_nm_spmv_args *a, int mw, int split, cudaStream_t s)
{
    // more than SD_NM_MAX_B_WIDE vectors come in tiles (sd__nm_launch_cfg)
    if (!sd__nm_spg_supported(a) || a->B > SD_NM_MAX_B_WIDE || split < 1 || (mw != 1 && mw != 2))
        return SD_EINVAL;
    if (a->swiglu) // the epilogue lives in the 16-row kernels
        return SD_ENOTSUP;
    TcParams p;
    const int64_t nsplit = tc_params(a, split, &p); // splits of whole 128-column stages
    if (tc_zero_for_split(a, p, s) != cudaSuccess)
        return SD_ECUDA;
    const int nt = (a->B + 7) / 8;
    const tc_kernel_fn k = mw == 2 ? spg_kernel_for<2>(nt) : spg_kernel_for<1>(nt);
    const size_t smem = mw == 2 ? spg_smem<2>(nt) : spg_smem<1>(nt);
    const int64_t rows = (int64_t)kWarps * 16 * mw;
    dim3 grid((unsigned)((a->rows + rows - 1) / rows), (unsigned)nsplit);
    const int pdl = (a->ctx ? a->ctx->pdl : 1) && !(p.atomic && !a->accumulate); // not after a memset
    if (cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
        cudaSuccess)
        return SD_ECUDA;
    return sd_launch(k, grid, dim3(kThreads), smem, s, pdl, p) == cudaSuccess ? 0 : SD_ECUDA;
}
