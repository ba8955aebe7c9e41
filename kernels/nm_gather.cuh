// nm_gather: what the word-per-lane kernels share (the gather SpMV and dense GEMV in nm_spmv.cu,
// the 2:4 compacting SpMV in nm_spmv_c24.cu): launch shape, kernel parameters, the lane cursor
// over (K-tile, word) steps, the weight loads ahead of use, and the warp-reduced row stores.
#ifndef SD_NM_GATHER_CUH
#define SD_NM_GATHER_CUH

#include <stdint.h>

#include "kernels/nm_device.cuh"

namespace sd_nm_gather
{
using namespace sd_nm_dev;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kSmemBudget = 96 * 1024; // per block; > 48 KB needs the opt-in attribute

struct KParams {
    const uint16_t *values; // bf16 [rows, cols/2] (dense: [rows, cols])
    const uint32_t *mask;   // u32 [rows, cols/32]
    const uint16_t *x;      // bf16 [B, ldx]
    void *y;                // [B, ldy] fp32 or bf16
    int64_t rows, cols, ldx, ldy;
    int64_t units_per_split; // K range of one grid.y slice, in units (words of 32 / chunks of 8 cols)
    int B, kt;               // kt: K-tile in units, a multiple of 32
    int y_bf16, accumulate, atomic;
    int64_t half; // > 0: the SwiGLU epilogue (nm_device.cuh swiglu_row): y bf16 [B, ldy >= half]
};

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The row a warp's r-th accumulator reads (clamped to a valid row): RW consecutive rows per warp
// from row0, or with the SwiGLU epilogue (SW: a template flag, so that the plain kernels keep
// their registers) the block's gate and up rows (swiglu_row).
template <int RW, bool SW>
__device__ __forceinline__ int64_t warp_row(const KParams &p, int64_t row0, int warp, int r)
{
    if constexpr (SW)
        return swiglu_row(p.half, kWarps * RW / 2, warp * RW + r);
    return min(row0 + r, p.rows - 1);
}

// The SwiGLU epilogue: the block's row sums meet in shared memory, then thread (pair j, vector b)
// writes bf16(silu(gate) * up). Every thread of the block must call it.
template <int BT, int RW>
__device__ __forceinline__ void store_swiglu(const KParams &p, float (&acc)[RW][BT], int warp, int lane)
{
    constexpr int P = kWarps * RW / 2;
    __shared__ float sums[kWarps * RW][BT];
#pragma unroll
    for (int r = 0; r < RW; r++)
#pragma unroll
        for (int b = 0; b < BT; b++) {
            const float v = warp_sum(acc[r][b]);
            if (lane == 0)
                sums[warp * RW + r][b] = v;
        }
    __syncthreads();
    uint16_t *y = static_cast<uint16_t *>(p.y);
    for (int k = threadIdx.x; k < P * BT; k += kThreads) {
        const int j = k / BT, b = k % BT;
        const int64_t i = (int64_t)blockIdx.x * P + j;
        if (i < p.half && b < p.B)
            y[(int64_t)b * p.ldy + i] = f32_to_bf16(silu_mul(sums[j][b], sums[P + j][b]));
    }
}

// Warp-reduces acc[r][b], then lane b writes vector b of each valid row.
template <int BT, int RW>
__device__ __forceinline__ void store_rows(const KParams &p, float (&acc)[RW][BT], int64_t row0, int lane)
{
#pragma unroll
    for (int r = 0; r < RW; r++) {
        float mine = 0.0f;
#pragma unroll
        for (int b = 0; b < BT; b++) {
            float v = warp_sum(acc[r][b]);
            if (lane == b)
                mine = v;
        }
        int64_t row = row0 + r;
        if (lane >= p.B || row >= p.rows)
            continue;
        store_out(p.y, (int64_t)lane * p.ldy + row, mine, p.atomic, p.y_bf16, p.accumulate);
    }
}

// The (K-tile, lane word) steps of one lane in a gather/GEMV kernel, in order: K-tiles of p.kt
// units from `begin`, and within a tile the units lane, lane + 32U, ... Weights never change
// during a step, so a lane may load the weights of its next step before the current one's x is
// staged, and those of its first step before the grid it depends on has finished (pdl.cuh).
struct Cursor {
    int64_t t0, end;
    int kt, u0; // the tile's length, the lane's first unit of this step in the tile
    bool valid;
};

__device__ __forceinline__ Cursor cursor_first(int64_t begin, int64_t end, int tile, int lane)
{
    Cursor c;
    c.t0 = begin, c.end = end;
    c.kt = (int)min((int64_t)tile, end - begin);
    c.u0 = lane;
    c.valid = begin < end && lane < c.kt;
    return c;
}

template <int U> __device__ __forceinline__ Cursor cursor_next(Cursor c, int tile, int lane)
{
    c.u0 += 32 * U;
    if (c.u0 < c.kt)
        return c;
    c.t0 += tile;
    c.kt = (int)min((int64_t)tile, c.end - c.t0);
    c.u0 = lane;
    c.valid = c.t0 < c.end && lane < c.kt;
    return c;
}

// The weights of U words of RW rows for one lane step (all loads issued before any use).
template <int RW, int U> struct WordLoads {
    uint32_t mk[U][RW];
    uint4 v0[U][RW], v1[U][RW];
};

template <int RW, int U>
__device__ __forceinline__ void load_words(WordLoads<RW, U> &w, const uint32_t *const (&mrow)[RW],
                                           const uint4 *const (&vrow)[RW], const Cursor &c)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int wl = c.u0 + 32 * u;
        const int64_t word = c.t0 + (u == 0 || wl < c.kt ? wl : c.u0); // a spare copy of a valid word
#pragma unroll
        for (int r = 0; r < RW; r++) {
            w.mk[u][r] = ld_stream_u32(mrow[r] + word);
            w.v0[u][r] = __ldg(vrow[r] + 2 * word);
            w.v1[u][r] = __ldg(vrow[r] + 2 * word + 1);
        }
    }
}

// The end of every word-per-lane kernel but the unstructured one: the plain row stores, or the
// SwiGLU epilogue.
template <int BT, int RW, bool SW>
__device__ __forceinline__ void store_out_rows(const KParams &p, float (&acc)[RW][BT], int64_t row0, int warp,
                                               int lane)
{
    if constexpr (SW)
        store_swiglu<BT, RW>(p, acc, warp, lane);
    else
        store_rows<BT, RW>(p, acc, row0, lane);
}

typedef void (*kernel_fn)(KParams);

// The compacting kernel (nm_spmv_c24.cu) of config 1, 2 or 3 (nm_spmv_impl.h) for B vectors and
// pattern group m (4: 2:4, 8: 4:8), with the SwiGLU epilogue or not;
// the largest K-tile (words, a multiple of 32) its staged x may take, and that x's bytes for kt words.
kernel_fn c24_kernel(int cfg, int B, int m, bool swiglu);
int c24_kt_max(int B);
size_t c24_smem(int kt, int B);

} // namespace sd_nm_gather
#endif
