// nm_spmv: the bitmask N:M SpMV kernels (N:M fast path, unstructured path), the dense bf16 GEMV
// twin, and their launchers. See kernels/NOTES.md for the design and the measurements.
//
// Shared structure: a block of kWarps warps; each warp owns RW consecutive rows; grid.y splits K.
// The block stages a K-tile of x (all B vectors, fp32) in shared memory once, then every warp
// streams its rows' weights for that tile. Weights and masks are read once (streamed); x is
// re-read from shared memory. Per-row partial sums are reduced across the warp at the end and
// written (or atomically added for split-K).
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_device.cuh"
#include "kernels/nm_gather.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_dev;
using namespace sd_nm_gather;
using namespace sd_pdl;

// Adds BT consecutive fp32 of shared memory at byte address a (x of one column for every
// vector), times w. The gather kernels compute a as their word's address plus the column times
// the row stride: one IMAD, where pointer arithmetic on the tile left ptxas three a value
// (r1 SASS, kernels/NOTES.md v25). volatile: the loads must stay between the staging barriers.
__device__ __forceinline__ float lds_f32(uint32_t a)
{
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ float2 lds_f32x2(uint32_t a)
{
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(a));
    return v;
}
__device__ __forceinline__ float4 lds_f32x4(uint32_t a)
{
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(a));
    return v;
}
template <int BT> __device__ __forceinline__ void fma_col(float (&acc)[BT], float w, uint32_t a)
{
    if constexpr (BT == 1) {
        acc[0] = fmaf(w, lds_f32(a), acc[0]);
    } else if constexpr (BT == 2) {
        const float2 t = lds_f32x2(a);
        acc[0] = fmaf(w, t.x, acc[0]);
        acc[1] = fmaf(w, t.y, acc[1]);
    } else {
#pragma unroll
        for (int q = 0; q < BT / 4; q++) {
            const float4 t = lds_f32x4(a + 16 * q);
            acc[4 * q + 0] = fmaf(w, t.x, acc[4 * q + 0]);
            acc[4 * q + 1] = fmaf(w, t.y, acc[4 * q + 1]);
            acc[4 * q + 2] = fmaf(w, t.z, acc[4 * q + 2]);
            acc[4 * q + 3] = fmaf(w, t.w, acc[4 * q + 3]);
        }
    }
}

// Sparse x tile layout, lane-major: the tile's words in groups of 32 (a warp step: lane l takes
// word 32g + l), each group 33 rows of 32 lane slots of BT floats (padded to an odd number of
// 16-byte units from BT = 8: lane_floats), row 1 + j holding column j of the group's words:
// x[b, 32*(t0 + w) + j] at xs[(33g + 1 + j) * 32 * LF + (w & 31) * LF + b]. A lane's gathers then
// all land in its own bank (BT = 1; its own BT consecutive floats otherwise), whatever columns the
// lanes' masks pick: one wavefront a warp gather, where the word-major layout before (a 33-float
// word stride) left the 32 lanes on random banks, ~2.6-way conflicts (kernels/NOTES.md v25).
// Row 0 of a group is padding, so that a corrupt mask (an empty word: bfind = -1) still reads
// inside the buffer.
constexpr int kRowsPerGroup = 33;
__host__ __device__ constexpr int lane_floats(int BT)
{
    return BT + (BT >= 8 ? 4 : 0);
}
__host__ __device__ constexpr int row_floats(int BT)
{
    return 32 * lane_floats(BT);
}
__host__ __device__ constexpr int group_floats(int BT) // also what the launcher sizes the tile by
{
    return kRowsPerGroup * row_floats(BT);
}

// Where word w's column 0 lives in the tile, in floats (its column j at + j * row_floats).
template <int BT> __device__ __forceinline__ int x_word(int w)
{
    return (w >> 5) * group_floats(BT) + row_floats(BT) + (w & 31) * lane_floats(BT);
}
// The same as a shared-memory byte address (for fma_col).
template <int BT> __device__ __forceinline__ uint32_t x_word_addr(const float *xs, int w)
{
    return (uint32_t)__cvta_generic_to_shared(xs + x_word<BT>(w));
}

// 8 columns from col (even) of vector b: one 16-byte load where x allows it, else four 4-byte ones.
__device__ __forceinline__ uint4 load_x8(const uint16_t *x, bool al16)
{
    if (al16)
        return __ldg(reinterpret_cast<const uint4 *>(x));
    const uint32_t *u = reinterpret_cast<const uint32_t *>(x);
    return make_uint4(__ldg(u), __ldg(u + 1), __ldg(u + 2), __ldg(u + 3));
}

// Stages words [t0, t0 + kt) of x. Threads take b fastest, then the word: a thread loads its
// word's four 8-column chunks at once (one L2 round trip), and a warp's stores fill consecutive
// floats of a row (no conflicts).
template <int BT> __device__ void stage_x_words(float *xs, const KParams &p, int64_t t0, int kt)
{
    const bool al16 = ((reinterpret_cast<uintptr_t>(p.x) | (uintptr_t)p.ldx * 2) & 15) == 0;
    const int b = threadIdx.x & (BT - 1);
    const uint16_t *xb = p.x + (int64_t)b * p.ldx + t0 * 32;
    for (int wl = threadIdx.x / BT; wl < kt; wl += kThreads / BT) {
        uint4 u[4];
#pragma unroll
        for (int c = 0; c < 4; c++)
            u[c] = b < p.B ? load_x8(xb + wl * 32 + 8 * c, al16) : make_uint4(0, 0, 0, 0);
        float *dst = xs + x_word<BT>(wl) + b;
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const uint32_t v[4] = {u[c].x, u[c].y, u[c].z, u[c].w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                dst[(8 * c + 2 * k) * row_floats(BT)] = bf16_lo(v[k]);
                dst[(8 * c + 2 * k + 1) * row_floats(BT)] = bf16_hi(v[k]);
            }
        }
    }
}

// One N:M mask word (exactly 16 bits) against its 16 values, highest column first: a fixed
// 16-step scan (find the top bit, keep the bits below), the column's x gathered from shared
// memory at xw + p * row_floats floats (xw = x_word_addr: column 0 of this word, in bytes).
template <int BT>
__device__ __forceinline__ void nm_word(uint32_t bits, const uint4 &v0, const uint4 &v1, uint32_t xw,
                                        float (&acc)[BT])
{
    const uint32_t u[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
    for (int k = 0; k < 16; k++) {
        const int p = top_bit(bits);
        bits &= bits_below(p);
        const int i = 15 - k; // value index of this column in the word
        float w = (i & 1) ? bf16_hi(u[i >> 1]) : bf16_lo(u[i >> 1]);
        fma_col<BT>(acc, w, xw + (uint32_t)p * (4 * row_floats(BT)));
    }
}

template <int BT, int RW, bool SW = false>
__global__ void __launch_bounds__(kThreads) nm_spmv_kernel(KParams p)
{
    extern __shared__ float4 smem4[];
    float *xs = reinterpret_cast<float *>(smem4);
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
    // U words per lane in flight (two when the accumulators leave room in registers).
    constexpr int U = RW * BT >= 32 || RW >= 2 ? 1 : 2; // the next step prefetched: in flight too
    Cursor cur = cursor_first(w_begin, w_end, p.kt, lane);
    WordLoads<RW, U> w;
    if (cur.valid) // the first step's weights, while the grid before may still run
        load_words<RW, U>(w, mrow, vrow, cur);
    pdl_wait(); // x is written by the grid before (pdl.cuh)
    pdl_trigger();
    float acc[RW][BT] = {};
    for (int64_t t0 = w_begin; t0 < w_end; t0 += p.kt) {
        const int kt = (int)min((int64_t)p.kt, w_end - t0);
        __syncthreads();
        stage_x_words<BT>(xs, p, t0, kt);
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
                const uint32_t xw = x_word_addr<BT>(xs, wl);
#pragma unroll
                for (int r = 0; r < RW; r++)
                    nm_word<BT>(w.mk[u][r], w.v0[u][r], w.v1[u][r], xw, acc[r]);
            }
            cur = nxt;
            w = wn;
        }
    }
    store_out_rows<BT, RW, SW>(p, acc, row0, warp, lane);
}

// Unstructured 50%: a word holds any number of bits, so each lane finds its word's first value
// by an exclusive warp scan of popcounts plus the running count of the words before. One row
// per warp, no split-K (the running count starts at column 0).
template <int BT> __global__ void __launch_bounds__(kThreads) un_spmv_kernel(KParams p)
{
    extern __shared__ float4 smem4[];
    float *xs = reinterpret_cast<float *>(smem4);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t words = p.cols >> 5, row0 = (int64_t)blockIdx.x * kWarps + warp;
    const int64_t row = min(row0, p.rows - 1);
    const uint32_t *mrow = p.mask + row * words;
    const uint16_t *vrow = p.values + row * (p.cols >> 1);
    pdl_wait();
    pdl_trigger();
    float acc[1][BT] = {};
    int64_t running = 0; // values used by the words before this step
    for (int64_t t0 = 0; t0 < words; t0 += p.kt) {
        const int kt = (int)min((int64_t)p.kt, words - t0);
        __syncthreads();
        stage_x_words<BT>(xs, p, t0, kt);
        __syncthreads();
        for (int ws = 0; ws < kt; ws += 32) {
            const int wl = ws + lane;
            uint32_t bits = wl < kt ? ld_stream_u32(mrow + t0 + wl) : 0u;
            const int cnt = __popc(bits);
            int incl = cnt;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                int t = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o)
                    incl += t;
            }
            const uint16_t *vw = vrow + running + incl - 1; // this word's last value
            const uint32_t xw = x_word_addr<BT>(xs, wl);
            for (int k = 0; k < cnt; k++) {
                const int p = top_bit(bits);
                bits &= bits_below(p);
                float w = __uint_as_float((uint32_t)__ldg(vw - k) << 16);
                fma_col<BT>(acc[0], w, xw + (uint32_t)p * (4 * row_floats(BT)));
            }
            running += __shfl_sync(0xffffffffu, incl, 31);
        }
    }
    store_rows<BT, 1>(p, acc, row0, lane);
}

// Dense x tile layout: xs[b * stride + swz(col)], col relative to the tile; within each 8-column
// chunk c the two 4-column halves swap when bit 2 of c is set, so that the 8 lanes of a
// 16-byte shared-memory phase hit 8 distinct bank groups.
__device__ __forceinline__ int dense_swz(int col)
{
    int c = col >> 3, h = (col >> 2) & 1;
    return c * 8 + ((h ^ ((c >> 2) & 1)) << 2) + (col & 3);
}

template <int BT>
__device__ void stage_x_dense(float *xs, const KParams &p, int64_t col0, int ncols, int stride)
{
    for (int b = 0; b < BT; b++)
        for (int i = threadIdx.x; i < ncols / 2; i += kThreads) {
            uint32_t u = 0;
            if (b < p.B && col0 + 2 * i < p.cols)
                u = __ldg(reinterpret_cast<const uint32_t *>(p.x + (int64_t)b * p.ldx + col0 + 2 * i));
            float *dst = xs + b * stride + dense_swz(2 * i);
            dst[0] = bf16_lo(u);
            dst[1] = bf16_hi(u);
        }
}

// One 8-column chunk of RW rows against the B vectors: weights unpacked once, each vector's
// 8 x values read once from shared memory (two LDS.128, halves swapped by `sw`).
template <int BT, int RW>
__device__ __forceinline__ void gemv_chunk(const uint4 (&wv)[RW], const float *xc, int stride, int sw,
                                           float (&acc)[RW][BT])
{
    float wf[RW][8];
#pragma unroll
    for (int r = 0; r < RW; r++) {
        const uint32_t u[4] = {wv[r].x, wv[r].y, wv[r].z, wv[r].w};
#pragma unroll
        for (int q = 0; q < 4; q++) {
            wf[r][2 * q] = bf16_lo(u[q]);
            wf[r][2 * q + 1] = bf16_hi(u[q]);
        }
    }
#pragma unroll
    for (int b = 0; b < BT; b++) {
        const float *xp = xc + b * stride;
        float4 lo = *reinterpret_cast<const float4 *>(xp + sw);
        float4 hi = *reinterpret_cast<const float4 *>(xp + (4 ^ sw));
        const float xv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int r = 0; r < RW; r++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[r][b] = fmaf(wf[r][j], xv[j], acc[r][b]);
    }
}

// The weights of U 8-column chunks of RW rows for one lane step.
template <int RW, int U>
__device__ __forceinline__ void load_chunks(uint4 (&wv)[U][RW], const uint4 *const (&wrow)[RW],
                                            const Cursor &c)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int cl = c.u0 + 32 * u;
        const int64_t chunk = c.t0 + (u == 0 || cl < c.kt ? cl : c.u0);
#pragma unroll
        for (int r = 0; r < RW; r++)
            wv[u][r] = __ldg(wrow[r] + chunk);
    }
}

// Dense GEMV: lane l owns 8 consecutive columns (one 16-byte load per row); the x of those 8
// columns is read once from shared memory and reused for the warp's RW rows.
template <int BT, int RW, bool SW = false> __global__ void __launch_bounds__(kThreads) gemv_kernel(KParams p)
{
    extern __shared__ float4 smem4[];
    float *xs = reinterpret_cast<float *>(smem4);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t chunks = p.cols >> 3, row0 = ((int64_t)blockIdx.x * kWarps + warp) * RW;
    const int64_t c_begin = blockIdx.y * p.units_per_split;
    const int64_t c_end = min(chunks, c_begin + p.units_per_split);
    const int stride = p.kt * 8;
    const uint4 *wrow[RW];
#pragma unroll
    for (int r = 0; r < RW; r++)
        wrow[r] = reinterpret_cast<const uint4 *>(p.values + warp_row<RW, SW>(p, row0, warp, r) * p.cols);
    constexpr int U = RW * BT >= 32 || RW >= 2 ? 1 : 2; // chunks per lane in flight (and the next step)
    Cursor cur = cursor_first(c_begin, c_end, p.kt, lane);
    uint4 wv[U][RW];
    if (cur.valid) // the first step's weights, while the grid before may still run
        load_chunks<RW, U>(wv, wrow, cur);
    pdl_wait(); // x is written by the grid before (pdl.cuh)
    pdl_trigger();
    float acc[RW][BT] = {};
    for (int64_t t0 = c_begin; t0 < c_end; t0 += p.kt) {
        const int kt = (int)min((int64_t)p.kt, c_end - t0);
        __syncthreads();
        stage_x_dense<BT>(xs, p, t0 * 8, kt * 8, stride);
        __syncthreads();
        for (; cur.valid && cur.t0 == t0;) {
            const Cursor nxt = cursor_next<U>(cur, p.kt, lane);
            uint4 wn[U][RW];
            if (nxt.valid) // the next step's weights in flight while this one computes
                load_chunks<RW, U>(wn, wrow, nxt);
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int cl = cur.u0 + 32 * u;
                if (u > 0 && cl >= kt)
                    break;
                gemv_chunk<BT, RW>(wv[u], xs + cl * 8, stride, ((cl >> 2) & 1) << 2, acc);
            }
            cur = nxt;
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int r = 0; r < RW; r++)
                    wv[u][r] = wn[u][r];
        }
    }
    store_out_rows<BT, RW, SW>(p, acc, row0, warp, lane);
}

#define SD_NM_RW_ROW(K, BT)                                                                                  \
    {                                                                                                        \
        K<BT, 1>, K<BT, 2>, K<BT, 4>                                                                         \
    }
const kernel_fn k_nm[5][3] = {SD_NM_RW_ROW(nm_spmv_kernel, 1), SD_NM_RW_ROW(nm_spmv_kernel, 2),
                              SD_NM_RW_ROW(nm_spmv_kernel, 4), SD_NM_RW_ROW(nm_spmv_kernel, 8),
                              SD_NM_RW_ROW(nm_spmv_kernel, 16)};
const kernel_fn k_gemv[5][3] = {SD_NM_RW_ROW(gemv_kernel, 1), SD_NM_RW_ROW(gemv_kernel, 2),
                                SD_NM_RW_ROW(gemv_kernel, 4), SD_NM_RW_ROW(gemv_kernel, 8),
                                SD_NM_RW_ROW(gemv_kernel, 16)};
// With the SwiGLU epilogue: batches of 1 and 2 (decode), where the word-per-lane kernels run.
const kernel_fn k_nm_sw[2][3] = {
    {nm_spmv_kernel<1, 1, true>, nm_spmv_kernel<1, 2, true>, nm_spmv_kernel<1, 4, true>},
    {nm_spmv_kernel<2, 1, true>, nm_spmv_kernel<2, 2, true>, nm_spmv_kernel<2, 4, true>}};
const kernel_fn k_gemv_sw[2][3] = {
    {gemv_kernel<1, 1, true>, gemv_kernel<1, 2, true>, gemv_kernel<1, 4, true>},
    {gemv_kernel<2, 1, true>, gemv_kernel<2, 2, true>, gemv_kernel<2, 4, true>}};
const kernel_fn k_un[5] = {un_spmv_kernel<1>, un_spmv_kernel<2>, un_spmv_kernel<4>, un_spmv_kernel<8>,
                           un_spmv_kernel<16>};
#undef SD_NM_RW_ROW

int bt_index(int B)
{
    return B <= 1 ? 0 : B <= 2 ? 1 : B <= 4 ? 2 : B <= 8 ? 3 : 4;
}

int rw_index(int rw)
{
    return rw <= 1 ? 0 : rw == 2 ? 1 : 2;
}

// Largest K-tile (in units, a multiple of 32) whose x fits the shared-memory budget.
int kt_max(int dense, int BT)
{
    if (dense)
        return (kSmemBudget / (BT * 8 * 4)) & ~31;
    return kSmemBudget / (group_floats(BT) * 4) * 32;
}

int check_args(const sd_nm_spmv_args *a, int dense)
{
    if (!a || !a->values || !a->x || !a->y || a->rows <= 0 || a->cols <= 0 || a->B < 1 ||
        a->B > SD_NM_MAX_B_TILED) // more than SD_NM_MAX_B: the wide kernels only (launch_cfg)
        return SD_EINVAL;
    if (a->cols % (dense ? 8 : 32) != 0 || a->ldx < a->cols || a->ldx % 2 != 0 ||
        a->ldy < (a->swiglu ? a->rows / 2 : a->rows))
        return SD_EINVAL;
    if (((uintptr_t)a->values & 15) != 0 || ((uintptr_t)a->x & 3) != 0)
        return SD_EINVAL;
    if (!dense && !a->mask)
        return SD_EINVAL;
    if (!dense && !(a->n == 0 && a->m == 0) &&
        !(a->m >= 2 && a->m <= 32 && 32 % a->m == 0 && 2 * a->n == a->m))
        return SD_EINVAL;
    return 0;
}

// The terms of nm_spmv.h's swiglu field beyond check_args's (y holds rows / 2 columns): bf16
// output, no accumulate, gate/up pairs.
int swiglu_terms(const sd_nm_spmv_args *a)
{
    return a->y_bf16 && !a->accumulate && a->rows % 2 == 0;
}

} // namespace

// More than SD_NM_MAX_B_WIDE vectors of an N:M pattern: tiles (sd_nm_tile_step), each one launch of a
// wide kernel with the same config. rw names one (else the register-expanding one, which takes every
// such problem the tiles' launches are given).
static int launch_tiles(const sd_nm_spmv_args *a, int rw, int split, cudaStream_t s)
{
    if (!sd_nm_tcx_pattern(a->n, a->m))
        return SD_EINVAL; // unstructured: SD_NM_MAX_B at most
    if (!sd__nm_rw_tcxw(rw) && !sd__nm_rw_spg(rw))
        rw = SD_NM_RW_TCXW;
    const int step = sd_nm_tile_step(a->B);
    const size_t y_elem = a->y_bf16 ? 2 : 4;
    for (int b0 = 0; b0 < a->B; b0 += step) {
        sd_nm_spmv_args t = *a;
        t.B = a->B - b0 < step ? a->B - b0 : step;
        t.x = a->x + (int64_t)b0 * a->ldx;
        t.y = static_cast<char *>(a->y) + (size_t)b0 * (size_t)a->ldy * y_elem;
        const int rc = sd__nm_launch_cfg(&t, 0, rw, split, s);
        if (rc)
            return rc;
    }
    return 0;
}

extern "C" int sd__nm_launch_cfg(const sd_nm_spmv_args *a, int dense, int rw, int split, cudaStream_t s)
{
    int rc = check_args(a, dense);
    if (rc)
        return rc;
    const int unstructured = !dense && a->n == 0;
    if (unstructured)
        rw = 1, split = 1; // the running value offset starts at column 0
    const int rows_kernel = sd__nm_rw_rows(rw);
    const int tcx_kernel = rw == SD_NM_RW_TCX || sd__nm_rw_tcxw(rw);
    const int c24_rw = rw - SD_NM_RW_C24; // rows per warp of the 2:4 compacting kernel, if asked for
    const int c24_asked = c24_rw >= 1 && c24_rw <= 3;
    if (!sd__nm_rw_word(rw) && rw != SD_NM_RW_TC && !sd__nm_rw_sp24(rw) && !sd__nm_rw_spg(rw) &&
        !tcx_kernel && !rows_kernel && !c24_asked)
        return SD_EINVAL;
    if (split < 1)
        return SD_EINVAL;
    if (a->swiglu && !swiglu_terms(a))
        return SD_EINVAL;
    // The SwiGLU epilogue needs a row's whole sum in one block: no split-K, no stream-K, and not the
    // wide kernel (nor the unstructured one, whose rows stay plain). Refused before anything runs.
    if (a->swiglu && (split > 1 || unstructured || sd__nm_rw_stream_k(rw) || a->B > SD_NM_MAX_B ||
                      sd__nm_rw_tcxw(rw) || sd__nm_rw_spg(rw)))
        return SD_ENOTSUP;
    if (split > 1 && a->y_bf16)
        return SD_EINVAL; // split-K adds partial sums atomically: fp32 output only
    if (a->B > SD_NM_MAX_B_WIDE)
        return dense ? SD_EINVAL : launch_tiles(a, rw, split, s);
    if (sd__nm_rw_spg(rw)) {
        if (!dense && sd__nm_spg_supported(a))
            return sd__nm_spg_launch(a, rw == SD_NM_RW_SPG2 ? 2 : 1, split, s);
        rw = rw == SD_NM_RW_SPG2 ? SD_NM_RW_TCXW2 : SD_NM_RW_TCXW; // a hint: the same block shapes
    }
    if (sd__nm_rw_sp24(rw)) {
        if (!dense && sd__nm_sp24_supported(a))
            return sd__nm_sp24_launch(a, rw == SD_NM_RW_SP24_32 ? 2 : 1, split, s);
        rw = SD_NM_RW_TCX; // a hint: the register-expanding kernel has the same block shape
    }
    if (rw == SD_NM_RW_TCX || sd__nm_rw_tcxw(rw) || a->B > SD_NM_MAX_B) {
        const int wide = rw == SD_NM_RW_TCXW2 ? 2 : rw != SD_NM_RW_TCX || a->B > SD_NM_MAX_B;
        if (!dense && sd__nm_tcx_supported(a))
            return sd__nm_tcx_launch(a, wide, split, s);
        if (a->B > SD_NM_MAX_B)
            return SD_EINVAL; // no other kernel takes more than SD_NM_MAX_B vectors
        rw = SD_NM_RW_TC;     // a hint: the shared-tile tensor-core kernel takes every N:M pattern
    }
    if (rw == SD_NM_RW_TC) {
        if (sd__nm_tc_supported(a, dense))
            return sd__nm_tc_launch(a, dense, split, s);
        rw = 4; // a hint, not a contract: the gather kernels take every shape
    }
    if (rows_kernel) {
        if (!dense && sd__nm_rows_supported(a, rw))
            return sd__nm_rows_launch(a, rw, split, s);
        rw = 2; // likewise a hint
    }
    if (a->swiglu && a->B > 2) // the word-per-lane kernels have the epilogue for 1 and 2 vectors
        return SD_ENOTSUP;
    const int c24 = c24_asked && !dense && sd__nm_c24_supported(a, c24_rw);
    const int c24_cfg = c24_rw; // which compacting kernel (c24_kernel)
    if (c24_asked)              // its rows per warp (or, as a hint, the gather kernel's)
        rw = c24_rw == 2 ? 2 : 1;
    const int bi = bt_index(a->B), BT = 1 << bi;
    const int64_t units = dense ? a->cols / 8 : a->cols / 32;
    int64_t ups = (units + split - 1) / split;
    ups = (ups + 31) / 32 * 32;
    const int64_t nsplit = (units + ups - 1) / ups;
    KParams p;
    p.values = a->values;
    p.mask = a->mask;
    p.x = a->x;
    p.y = a->y;
    p.rows = a->rows, p.cols = a->cols, p.ldx = a->ldx, p.ldy = a->ldy;
    p.units_per_split = ups;
    p.B = a->B;
    const int ktm = c24 ? c24_kt_max(a->B) : kt_max(dense, BT);
    p.kt = (int)((ups + 31) / 32 * 32 < ktm ? (ups + 31) / 32 * 32 : ktm);
    p.y_bf16 = a->y_bf16, p.accumulate = a->accumulate, p.atomic = nsplit > 1;
    p.half = a->swiglu ? a->rows / 2 : 0;
    // Split-K zeroes y first: a memset node, after which a programmatic launch has nothing to
    // overlap with, so those launches stay plain.
    const int zero_first = p.atomic && !a->accumulate;
    if (zero_first &&
        cudaMemset2DAsync(a->y, (size_t)a->ldy * 4, 0, (size_t)a->rows * 4, (size_t)a->B, s) != cudaSuccess)
        return SD_ECUDA;
    const int sw = a->swiglu != 0;
    kernel_fn k = c24            ? c24_kernel(c24_cfg, a->B, a->m, sw)
                  : dense        ? (sw ? k_gemv_sw : k_gemv)[bi][rw_index(rw)]
                  : unstructured ? k_un[bi]
                                 : (sw ? k_nm_sw : k_nm)[bi][rw_index(rw)];
    size_t smem = c24     ? c24_smem(p.kt, a->B)
                  : dense ? (size_t)BT * p.kt * 8 * 4
                          : (size_t)group_floats(BT) * 4 * ((p.kt + 31) / 32);
    if (smem > 48 * 1024 && cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem) != cudaSuccess)
        return SD_ECUDA;
    const int64_t rows_per_block = (int64_t)kWarps * rw; // with SwiGLU: half of them gate, half up rows
    const int64_t grid_rows = a->swiglu ? a->rows / 2 : a->rows,
                  per_block = a->swiglu ? rows_per_block / 2 : rows_per_block;
    dim3 grid((unsigned)((grid_rows + per_block - 1) / per_block), (unsigned)nsplit);
    const int pdl = (a->ctx ? a->ctx->pdl : 1) && !zero_first;
    return sd_launch(k, grid, dim3(kThreads), smem, s, pdl, p) == cudaSuccess ? 0 : SD_ECUDA;
}

extern "C" void sd_nm_config(const sd_nm_spmv_args *a, int dense, int *ret_rw, int *ret_split)
{
    int rw = a->rows_per_warp, split = a->split;
    if (rw <= 0 || split <= 0) {
        int crw, csplit;
        if (sd__nm_cache_lookup(a->ctx, a, dense, &crw, &csplit) == 0) {
            rw = rw > 0 ? rw : crw;
            split = split > 0 ? split : csplit;
        }
    }
    // Single vectors go to the word-per-lane gather kernel (2:4: the compacting one, below), B = 2..4
    // (1.05-1.6x the tensor-core kernel on the 8B shapes, kernels/NOTES.md v4), larger batches
    // to the tensor cores.
    if (rw <= 0 && !dense && a->B >= 2 && a->B <= 4 && sd__nm_rows_supported(a, SD_NM_RW_ROWS)) {
        rw = SD_NM_RW_ROWS;
        split = split > 0 ? split : 1; // one block per 32 rows already fills the GPU
    }
    if (rw <= 0 && a->B > SD_NM_MAX_B)
        rw = SD_NM_RW_TCXW; // the only kernel for that many vectors (2:4, 4:8, 8:16, 16:32)
    // Single 2:4 vectors: the compacting kernel (1.1-1.3x the gather kernel on the 8B shapes,
    // kernels/NOTES.md v11), unless the ctx turns it off.
    if (rw <= 0 && !dense && a->B == 1 && a->n == 2 && (!a->ctx || a->ctx->c24) && sd__nm_c24_supported(a, 3))
        rw = SD_NM_RW_C24 + 3;
    if (rw <= 0)
        rw = a->B >= 2 && sd__nm_tc_supported(a, dense) ? SD_NM_RW_TC : 2;
    if (split <= 0) {
        // Fill the GPU: at least ~2 blocks per SM, else split K (fp32 output only).
        int n_sm = a->ctx ? a->ctx->n_sm : 132;
        int64_t rows_per_block = rw == SD_NM_RW_TC || rw == SD_NM_RW_TCX || rw == SD_NM_RW_SP24 ? 16
                                 : rw == SD_NM_RW_SP24_32                                       ? 32
                                 : rw == SD_NM_RW_TCXW || rw == SD_NM_RW_SPG                    ? 16 * kWarps
                                 : rw == SD_NM_RW_SPG2 || rw == SD_NM_RW_TCXW2                  ? 32 * kWarps
                                 : rw == SD_NM_RW_C24 + 2                                       ? kWarps * 2
                                 : rw > SD_NM_RW_C24                                            ? kWarps
                                                                                                : kWarps * rw;
        int64_t blocks = (a->rows + rows_per_block - 1) / rows_per_block;
        int64_t units = dense ? a->cols / 8 : a->cols / 32;
        split = 1;
        while (!a->y_bf16 && !(a->ctx && a->ctx->deterministic) && blocks * split < 2 * n_sm && split < 8 &&
               units / (split * 2) >= 64)
            split *= 2;
    }
    *ret_rw = rw;
    *ret_split = split;
}

// The config a launch of a with the SwiGLU epilogue resolves to, or 0 where it would be refused.
static int swiglu_rw(const sd_nm_spmv_args *a, int dense)
{
    if (!a || check_args(a, dense) || !swiglu_terms(a) || a->B > SD_NM_MAX_B || (!dense && a->n == 0))
        return 0;
    int rw, split;
    sd_nm_config(a, dense, &rw, &split);
    const int rows_kernel = sd__nm_rw_rows(rw);
    // sd__nm_launch_cfg's terms: no split-K, not the wide or stream-K kernels; the 16-row
    // tensor-core kernels for B <= 16, the row-per-lane ones (whole x in one block) for B <= 4, the
    // word-per-lane ones (also where another config falls back to them) for B <= 2.
    if (split != 1 || sd__nm_rw_stream_k(rw) || sd__nm_rw_tcxw(rw) || sd__nm_rw_spg(rw))
        return 0;
    if ((rw == SD_NM_RW_TCX && !dense && sd__nm_tcx_supported(a)) ||
        (sd__nm_rw_sp24(rw) && !dense && sd__nm_sp24_supported(a)))
        return rw;
    if ((rw == SD_NM_RW_TCX || sd__nm_rw_sp24(rw) || rw == SD_NM_RW_TC) && sd__nm_tc_supported(a, dense))
        return rw;
    if (rows_kernel && !dense && sd__nm_rows_supported(a, rw))
        return rw; // with y_bf16 that means x whole in one block (no split-K)
    return a->B <= 2 ? rw : 0;
}

extern "C" int sd_nm_swiglu_ok(const sd_nm_spmv_args *a, int dense)
{
    return swiglu_rw(a, dense) != 0;
}

extern "C" int sd_nm_swiglu_pays(const sd_nm_spmv_args *a, int dense)
{
    const int rw = swiglu_rw(a, dense);
    if (!rw)
        return 0;
    // Measured in decode (8B, results/2026-12-02-tcx2/r4): fused, the dense tensor-core GEMV made
    // steps 2-3% faster at batch 1-16, the register-expanding kernels 1-2% at 16, the 2:4
    // compacting kernel ~1% at 1; the gather kernels (4:8, 8:16, 16:32 at batch 1-2) and the
    // shared-tile tensor-core kernel (16:32 at 16) ran 1-4% slower fused. The row-per-lane
    // kernels (8:16 / 16:32 gate_up at batch 1-2): 1.6-2.3% faster (results/2026-12-02-s14/r6).
    // The gather kernels with the lane-major x tile, at batch 1 (4:8, 8:16, 16:32 gate_up): steps
    // 2.8-3.1% faster fused (results/2026-12-03-s19/r4; batch 2 took the row-per-lane kernel).
    if (dense)
        return rw == SD_NM_RW_TC || rw == SD_NM_RW_TCX; // 24 is a hint for the dense tensor-core GEMV
    return (a->B == 1 && sd__nm_rw_word(rw)) || (rw == SD_NM_RW_TCX && sd__nm_tcx_supported(a)) ||
           (sd__nm_rw_sp24(rw) && sd__nm_sp24_supported(a)) ||
           (sd__nm_rw_rows(rw) && sd__nm_rows_supported(a, rw)) || // not stream-K (swiglu_rw)
           (rw > SD_NM_RW_C24 && rw <= SD_NM_RW_C24 + 3 && sd__nm_c24_supported(a, rw - SD_NM_RW_C24));
}

extern "C" int sd_nm_spmv_launch(const sd_nm_spmv_args *a, cudaStream_t s)
{
    if (!a)
        return SD_EINVAL;
    int rw, split;
    sd_nm_config(a, 0, &rw, &split);
    return sd__nm_launch_cfg(a, 0, rw, split, s);
}

extern "C" int sd_gemv_bf16_launch(const sd_nm_spmv_args *a, cudaStream_t s)
{
    if (!a)
        return SD_EINVAL;
    int rw, split;
    sd_nm_config(a, 1, &rw, &split);
    return sd__nm_launch_cfg(a, 1, rw, split, s);
}
