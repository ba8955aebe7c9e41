// nm_spmv_rows: the N:M bitmask SpMV for B = 1..4 with conflict-free x gathers ("row per lane").
//
// Why: in nm_spmv.cu each lane owns one 32-column mask word and consecutive lanes own consecutive
// words, so with a word-major x tile a warp's 32 gathers hit random banks (~3.5-way conflicts) and
// the L1/shared pipe, not DRAM, bound it (its tile is lane-major since kernels/NOTES.md v25, which
// makes those gathers conflict-free too). Here lane l owns row l of a 32-row group and all lanes
// work on the SAME mask word at the same time: every gather of a warp lies inside one 32-column
// slice of x (distinct columns -> distinct banks, equal columns -> broadcast), one wavefront per
// LDS.
//
// The weights of 32 different rows would be uncoalesced loads, so each warp stages a tile of
// [32 rows x kT words] (values + masks) into shared memory with cp.async 16-byte copies (4 whole
// 128-byte lines per warp instruction), S stages deep, then each lane reads its own row's words
// from shared memory (row stride 144 B = 16 mod 128: the 8 lanes of an LDS.128 phase hit 8
// distinct bank groups). A block is 8 warps on the same 32 rows, each a contiguous K-chunk; their
// partial sums meet in shared memory at the end (atomics only for split-K over grid.y).
//
// Shared-memory wavefronts per 512 kept values (one word of 32 rows): 8 staging writes + 8 reads
// of values, ~2 for masks, 16 gathers, against ~65 for the word-per-lane kernel.
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_device.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_dev;
using namespace sd_pdl;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kT = 4;                                // mask words per tile (128 columns)
constexpr int kRowBytes = kT * 32 + 16;              // one row's values in a stage, padded
constexpr int kValBytes = 32 * kRowBytes;            // values of one stage: 4608 B
constexpr int kStageBytes = kValBytes + 32 * kT * 4; // + masks [32 rows][kT words]: 5120 B
constexpr int kSmemMax = 227 * 1024;                 // per-block opt-in limit on sm_90

struct RParams {
    const uint16_t *values; // bf16 [rows, cols/2]
    const uint32_t *mask;   // u32 [rows, cols/32]
    const uint16_t *x;      // bf16 [B, ldx]
    void *y;                // [B, ldy] fp32 or bf16
    int64_t rows, cols, ldx, ldy;
    int64_t words_per_split; // K range of one grid.y slice, in mask words; a multiple of kT
    int B, y_bf16, accumulate, atomic;
    int64_t half; // > 0: the SwiGLU epilogue (rows_kernel SW): W = [gate; up], y bf16 [B, ldy >= half]
};

template <int BT> __host__ __device__ constexpr int red_bytes()
{
    return kWarps * BT * 32 * 4;
}
// x slice bytes per column: fp32 for B=1; bf16 pairs (one u32 per column and pair of vectors)
// otherwise, so that every gather stays a conflict-free 32-bit LDS.
template <int BT> __host__ __device__ constexpr int x_col_bytes()
{
    return BT == 4 ? 8 : 4;
}

// Per-lane copy sources: the 8 value rows this lane copies (rows rr, rr+4, ..., clamped to the
// last row for a partial group) and the mask row it copies (row `lane`).
struct CopySrc {
    const uint16_t *v[8];
    const uint32_t *m;
};

// Row r of the block's 32-row group from row0, clamped; SW: the group is 16 gate rows and their 16
// up rows (nm_device.cuh swiglu_row).
template <bool SW> __device__ __forceinline__ int64_t group_row(const RParams &p, int64_t row0, int r)
{
    if constexpr (SW)
        return swiglu_row(p.half, 16, r);
    return min(row0 + r, p.rows - 1);
}

template <bool SW> __device__ __forceinline__ CopySrc copy_src(const RParams &p, int64_t row0, int lane)
{
    CopySrc c;
    const int64_t words = p.cols >> 5;
#pragma unroll
    for (int k = 0; k < 8; k++)
        c.v[k] = p.values + group_row<SW>(p, row0, (lane >> 3) + 4 * k) * (p.cols >> 1) + (lane & 7) * 8;
    c.m = p.mask + group_row<SW>(p, row0, lane) * words;
    return c;
}

// Copies tile word w (kT words of the 32 rows) into the stage at shared address st.
__device__ __forceinline__ void issue_tile(const CopySrc &c, uint32_t st, int64_t w, int lane)
{
    const uint32_t dv = st + (lane >> 3) * kRowBytes + (lane & 7) * 16;
#pragma unroll
    for (int k = 0; k < 8; k++)
        cp_async16(dv + 4 * k * kRowBytes, c.v[k] + w * 16);
    cp_async16(st + kValBytes + lane * 16, c.m + w);
}

// acc += w * x[col] for the BT vectors; xs: the block's x slice, plane: u32 offset of vectors 2-3.
template <int BT>
__device__ __forceinline__ void gather_fma(float (&acc)[BT], float w, const uint32_t *xs, int col, int plane)
{
    const uint32_t u = xs[col];
    if constexpr (BT == 1) {
        acc[0] = fmaf(w, __uint_as_float(u), acc[0]);
    } else {
        acc[0] = fmaf(w, bf16_lo(u), acc[0]);
        acc[1] = fmaf(w, bf16_hi(u), acc[1]);
        if constexpr (BT == 4) {
            const uint32_t u2 = xs[plane + col];
            acc[2] = fmaf(w, bf16_lo(u2), acc[2]);
            acc[3] = fmaf(w, bf16_hi(u2), acc[3]);
        }
    }
}

// This lane's row of one staged tile: kT words, their 16-step bit scans interleaved (four
// independent bfind -> bmsk -> and chains per lane). col0: slice column of the tile's word 0.
template <int BT>
__device__ __forceinline__ void compute_tile(const char *st, const uint32_t *xs, int col0, int plane,
                                             int lane, float (&acc)[BT])
{
    const uint4 mk = *reinterpret_cast<const uint4 *>(st + kValBytes + lane * 16);
    const uint4 *vr = reinterpret_cast<const uint4 *>(st + lane * kRowBytes);
    uint32_t u[kT][8];
#pragma unroll
    for (int q = 0; q < kT; q++) {
        const uint4 a = vr[2 * q], b = vr[2 * q + 1];
        u[q][0] = a.x, u[q][1] = a.y, u[q][2] = a.z, u[q][3] = a.w;
        u[q][4] = b.x, u[q][5] = b.y, u[q][6] = b.z, u[q][7] = b.w;
    }
    uint32_t bits[kT] = {mk.x, mk.y, mk.z, mk.w};
#pragma unroll
    for (int k = 0; k < 16; k++) {
        const int i = 15 - k; // value index of this step's column within its word
#pragma unroll
        for (int q = 0; q < kT; q++) {
            const int p = top_bit(bits[q]);
            bits[q] &= bits_below(p);
            const float w = (i & 1) ? bf16_hi(u[q][i >> 1]) : bf16_lo(u[q][i >> 1]);
            gather_fma<BT>(acc, w, xs, col0 + 32 * q + p, plane);
        }
    }
}

// Stages x columns [32*ws, 32*ws + ncols) of the B vectors (see x_col_bytes).
template <int BT> __device__ void stage_x(uint32_t *xs, const RParams &p, int64_t ws, int ncols, int plane)
{
    const int64_t c0 = ws * 32;
    // U column pairs per thread and batch, all loads issued before any store: x comes from L2,
    // and one round trip per pair would cost microseconds on the wide shapes.
    constexpr int U = 8 / BT;
    for (int i0 = threadIdx.x; i0 < ncols / 2; i0 += U * kThreads) {
        uint32_t v[U][BT];
#pragma unroll
        for (int k = 0; k < U; k++)
#pragma unroll
            for (int b = 0; b < BT; b++) {
                const int i = i0 + k * kThreads;
                v[k][b] = b < p.B && i < ncols / 2
                              ? __ldg(reinterpret_cast<const uint32_t *>(p.x + (int64_t)b * p.ldx + c0) + i)
                              : 0u;
            }
#pragma unroll
        for (int k = 0; k < U; k++) {
            const int i = i0 + k * kThreads;
            if (i >= ncols / 2)
                break;
            if constexpr (BT == 1) {
                *reinterpret_cast<uint2 *>(xs + 2 * i) = make_uint2(v[k][0] << 16, v[k][0] & 0xffff0000u);
            } else {
#pragma unroll
                for (int h = 0; h < BT / 2; h++) // columns 2i, 2i+1 of vectors (2h, 2h+1)
                    *reinterpret_cast<uint2 *>(xs + h * plane + 2 * i) =
                        make_uint2(__byte_perm(v[k][2 * h], v[k][2 * h + 1], 0x5410),
                                   __byte_perm(v[k][2 * h], v[k][2 * h + 1], 0x7632));
            }
        }
    }
}

template <int BT> __device__ __forceinline__ void store_y(const RParams &p, int b, int64_t row, float v)
{
    store_out(p.y, (int64_t)b * p.ldy + row, v, p.atomic, p.y_bf16, p.accumulate);
}

// SW: the SwiGLU epilogue: the block's rows are 16 gate / up pairs (group_row), and it writes
// bf16(silu(gate) * up) of each, the bits the fp32 outputs and the engine's SwiGLU kernel give.
template <int BT, int S, bool SW> __global__ void __launch_bounds__(kThreads) rows_kernel(RParams p)
{
    extern __shared__ float4 smem4[];
    char *smem = reinterpret_cast<char *>(smem4);
    // Layout: red [kWarps][BT][32] fp32 | x slice | tiles [kWarps][S][kStageBytes]. The x slice
    // is not first, so the stray gather of a corrupt (empty) mask word (bfind = -1) stays inside.
    float *red = reinterpret_cast<float *>(smem);
    uint32_t *xs = reinterpret_cast<uint32_t *>(smem + red_bytes<BT>());
    const int plane = (int)(p.words_per_split * 32); // u32 offset of vectors 2-3 (BT = 4)
    char *tiles = smem + red_bytes<BT>() + (size_t)plane * x_col_bytes<BT>();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t words = p.cols >> 5, row0 = (int64_t)blockIdx.x * 32;
    const int64_t ws = blockIdx.y * p.words_per_split, we = min(words, ws + p.words_per_split);
    const int nt = (int)((we - ws) / kT); // tiles of this block; warp w takes a contiguous share
    const int tb = warp * nt / kWarps, n = (warp + 1) * nt / kWarps - tb;
    char *mine = tiles + warp * S * kStageBytes;
    const uint32_t mine_s = (uint32_t)__cvta_generic_to_shared(mine);
    const CopySrc src = copy_src<SW>(p, row0, lane);

    // The first S-1 tiles are in flight while the block stages x; they do not depend on the
    // grid before this one, x does (pdl.cuh).
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < n)
            issue_tile(src, mine_s + s * kStageBytes, ws + (int64_t)(tb + s) * kT, lane);
        cp_async_commit();
    }
    pdl_wait();
    pdl_trigger();
    stage_x<BT>(xs, p, ws, (int)(we - ws) * 32, plane);
    __syncthreads();

    float acc[BT] = {};
    for (int i = 0; i < n; i++) {
        if (i + S - 1 < n)
            issue_tile(src, mine_s + ((i + S - 1) % S) * kStageBytes, ws + (int64_t)(tb + i + S - 1) * kT,
                       lane);
        cp_async_commit(); // possibly empty: keeps one group per iteration
        cp_async_wait<S - 1>();
        __syncwarp(); // every lane's copies of tile i have landed
        compute_tile<BT>(mine + (i % S) * kStageBytes, xs, (tb + i) * kT * 32, plane, lane, acc);
        __syncwarp(); // stage i % S is refilled by the next iteration's copy
    }

#pragma unroll
    for (int b = 0; b < BT; b++)
        red[(warp * BT + b) * 32 + lane] = acc[b];
    __syncthreads();
    for (int t = threadIdx.x; t < BT * 32; t += kThreads) {
        const int b = t >> 5, l = t & 31;
        float v = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; w++)
            v += red[(w * BT + b) * 32 + l];
        if constexpr (SW)
            red[b * 32 + l] = v; // warp 0's slots: this thread alone read them (kThreads >= BT * 32)
        else if (b < p.B && row0 + l < p.rows)
            store_y<BT>(p, b, row0 + l, v);
    }
    if constexpr (SW) {
        __syncthreads();
        for (int t = threadIdx.x; t < BT * 16; t += kThreads) {
            const int b = t >> 4, j = t & 15;
            const int64_t i = (int64_t)blockIdx.x * 16 + j;
            if (b < p.B && i < p.half)
                static_cast<uint16_t *>(p.y)[(int64_t)b * p.ldy + i] =
                    f32_to_bf16(silu_mul(red[b * 32 + j], red[b * 32 + 16 + j]));
        }
    }
}

// Stream-K twin: a persistent grid; the (row group, tile) space, group-major, is cut into equal
// contiguous shares, one per warp, so every warp (and SM) ends at the same time whatever the
// number of row groups. A lane owns one row, so a warp needs no reduction: it adds its partial
// sums to y atomically whenever its share leaves a row group (y zeroed first unless accumulating).
// Every block stages the whole of x. fp32 output only.
template <int BT, int S> __global__ void __launch_bounds__(kThreads) rows_sk_kernel(RParams p)
{
    extern __shared__ float4 smem4[];
    char *smem = reinterpret_cast<char *>(smem4);
    uint32_t *xs = reinterpret_cast<uint32_t *>(smem + red_bytes<BT>()); // red: only a guard here
    const int plane = (int)(p.cols);
    char *mine = smem + red_bytes<BT>() + (size_t)plane * x_col_bytes<BT>() +
                 (size_t)(threadIdx.x >> 5) * S * kStageBytes;
    const uint32_t mine_s = (uint32_t)__cvta_generic_to_shared(mine);
    const int lane = threadIdx.x & 31;
    const int64_t tpr = (p.cols >> 5) / kT, total = (p.rows + 31) / 32 * tpr;
    const int64_t nw = (int64_t)gridDim.x * kWarps, gw = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
    const int64_t ib = gw * total / nw, n = (gw + 1) * total / nw - ib;

    // Two cursors walk the share as (row group, tile in row): one for the copies, S-1 tiles
    // ahead, one for the compute; a 64-bit division only at the start.
    int64_t src_g = ib / tpr, src_t = ib - src_g * tpr;
    CopySrc src = copy_src<false>(p, src_g * 32, lane);
    int64_t issued = 0;
    auto issue_next = [&](int stage) {
        issue_tile(src, mine_s + stage * kStageBytes, src_t * kT, lane);
        if (++src_t == tpr) {
            src_t = 0, src_g++;
            src = copy_src<false>(p, src_g * 32, lane);
        }
        issued++;
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < n)
            issue_next(s);
        cp_async_commit();
    }
    pdl_wait();
    pdl_trigger();
    stage_x<BT>(xs, p, 0, (int)p.cols, plane);
    __syncthreads();

    float acc[BT] = {};
    int64_t cur_g = ib / tpr, cur_t = ib - cur_g * tpr;
    int stage = 0; // stage of tile i; tile i + S - 1 goes to the stage before it
    for (int64_t i = 0; i < n; i++) {
        if (issued < n)
            issue_next(stage == 0 ? S - 1 : stage - 1);
        cp_async_commit();
        cp_async_wait<S - 1>();
        __syncwarp();
        compute_tile<BT>(mine + stage * kStageBytes, xs, (int)cur_t * kT * 32, plane, lane, acc);
        __syncwarp();
        stage = stage == S - 1 ? 0 : stage + 1;
        if (++cur_t == tpr || i == n - 1) { // the share leaves row group cur_g: flush its sums
            const int64_t row = cur_g * 32 + lane;
#pragma unroll
            for (int b = 0; b < BT; b++) {
                if (b < p.B && row < p.rows)
                    atomicAdd(static_cast<float *>(p.y) + (int64_t)b * p.ldy + row, acc[b]);
                acc[b] = 0.0f;
            }
            cur_t = 0, cur_g++;
        }
    }
}

typedef void (*kernel_fn)(RParams);

int bt_of(int B)
{
    return B <= 1 ? 1 : B <= 2 ? 2 : 4;
}

size_t smem_bytes(int BT, int stages, int64_t words_per_split)
{
    const int red = kWarps * BT * 32 * 4, xcol = BT == 4 ? 8 : 4;
    return (size_t)red + (size_t)words_per_split * 32 * xcol + (size_t)kWarps * stages * kStageBytes;
}

// Words per grid.y slice for a requested split (a multiple of kT), and the smallest split whose
// x slice fits the shared-memory limit.
int64_t words_per_split(int64_t words, int split)
{
    int64_t wps = (words + split - 1) / split;
    return (wps + kT - 1) / kT * kT;
}

int min_split(const sd_nm_spmv_args *a, int stages)
{
    const int64_t words = a->cols / 32;
    for (int split = 1; split <= 64; split++)
        if (smem_bytes(bt_of(a->B), stages, words_per_split(words, split)) <= (size_t)kSmemMax)
            return split;
    return 0;
}

kernel_fn pick_sk(int BT, int stages)
{
    if (BT == 1)
        return stages == 2 ? rows_sk_kernel<1, 2> : rows_sk_kernel<1, 3>;
    if (BT == 2)
        return stages == 2 ? rows_sk_kernel<2, 2> : rows_sk_kernel<2, 3>;
    return stages == 2 ? rows_sk_kernel<4, 2> : rows_sk_kernel<4, 3>;
}

template <bool SW> kernel_fn pick_sw(int BT, int stages)
{
    if (BT == 1)
        return stages == 2 ? rows_kernel<1, 2, SW> : rows_kernel<1, 3, SW>;
    if (BT == 2)
        return stages == 2 ? rows_kernel<2, 2, SW> : rows_kernel<2, 3, SW>;
    return stages == 2 ? rows_kernel<4, 2, SW> : rows_kernel<4, 3, SW>;
}

kernel_fn pick(int BT, int stages, bool swiglu)
{
    return swiglu ? pick_sw<true>(BT, stages) : pick_sw<false>(BT, stages);
}

int stages_of(int rw)
{
    return rw == SD_NM_RW_ROWS3 || rw == SD_NM_RW_ROWS_SK3 ? 3 : 2;
}

// Stream-K: x whole in every block, a persistent grid of as many blocks as fit on the SMs.
int sk_launch(const sd_nm_spmv_args *a, int rw, cudaStream_t s)
{
    const int BT = bt_of(a->B), stages = stages_of(rw);
    RParams p;
    p.values = a->values, p.mask = a->mask, p.x = a->x, p.y = a->y;
    p.rows = a->rows, p.cols = a->cols, p.ldx = a->ldx, p.ldy = a->ldy;
    p.words_per_split = a->cols / 32;
    p.B = a->B, p.y_bf16 = 0, p.accumulate = a->accumulate, p.atomic = 1, p.half = 0;
    kernel_fn k = pick_sk(BT, stages);
    const size_t smem = smem_bytes(BT, stages, a->cols / 32);
    int dev = 0, n_sm = 0, per_sm = 0;
    if (cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
            cudaSuccess ||
        cudaFuncSetAttribute((const void *)k, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared) != cudaSuccess ||
        cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads, smem) != cudaSuccess ||
        per_sm < 1)
        return SD_ECUDA;
    if (!a->accumulate &&
        cudaMemset2DAsync(a->y, (size_t)a->ldy * 4, 0, (size_t)a->rows * 4, (size_t)a->B, s) != cudaSuccess)
        return SD_ECUDA;
    const int64_t tiles = (a->rows + 31) / 32 * (a->cols / 128);
    int64_t blocks = (int64_t)n_sm * per_sm;
    blocks = blocks < (tiles + kWarps - 1) / kWarps ? blocks : (tiles + kWarps - 1) / kWarps;
    const int pdl = (a->ctx ? a->ctx->pdl : 1) && a->accumulate; // else after a memset (pdl.cuh)
    return sd_launch(k, dim3((unsigned)blocks), dim3(kThreads), smem, s, pdl, p) == cudaSuccess ? 0
                                                                                                : SD_ECUDA;
}

} // namespace

extern "C" int sd__nm_rows_supported(const sd_nm_spmv_args *a, int rw)
{
    if ((a->n == 0 && a->m == 0) || a->B > 4 || a->cols % (32 * kT) != 0 || ((uintptr_t)a->mask & 15) != 0 ||
        ((uintptr_t)a->values & 15) != 0)
        return 0;
    const int ms = min_split(a, stages_of(rw));
    if (sd__nm_rw_stream_k(rw)) // the whole of x in one block, fp32 output (atomics)
        return ms == 1 && !a->y_bf16;
    return ms == 1 || (ms > 1 && !a->y_bf16);
}

extern "C" int sd__nm_rows_launch(const sd_nm_spmv_args *a, int rw, int split, cudaStream_t s)
{
    if (!sd__nm_rows_supported(a, rw))
        return SD_EINVAL;
    const int stages = stages_of(rw), BT = bt_of(a->B);
    const int ms = min_split(a, stages);
    // The SwiGLU epilogue needs a row's whole sum in one block: no stream-K, no split-K.
    if (a->swiglu && (sd__nm_rw_stream_k(rw) || split > 1 || ms > 1))
        return SD_ENOTSUP;
    if (sd__nm_rw_stream_k(rw))
        return sk_launch(a, rw, s);
    split = split < ms ? ms : split;
    const int64_t words = a->cols / 32, wps = words_per_split(words, split);
    const int64_t nsplit = (words + wps - 1) / wps;
    RParams p;
    p.values = a->values, p.mask = a->mask, p.x = a->x, p.y = a->y;
    p.rows = a->rows, p.cols = a->cols, p.ldx = a->ldx, p.ldy = a->ldy;
    p.words_per_split = wps;
    p.B = a->B, p.y_bf16 = a->y_bf16, p.accumulate = a->accumulate, p.atomic = nsplit > 1;
    p.half = a->swiglu ? a->rows / 2 : 0;
    if (p.atomic && a->y_bf16)
        return SD_EINVAL;
    if (p.atomic && !a->accumulate &&
        cudaMemset2DAsync(a->y, (size_t)a->ldy * 4, 0, (size_t)a->rows * 4, (size_t)a->B, s) != cudaSuccess)
        return SD_ECUDA;
    kernel_fn k = pick(BT, stages, a->swiglu != 0);
    const size_t smem = smem_bytes(BT, stages, wps);
    // All the shared memory the SM has: the loads bypass L1 (cp.async.cg), so L1 needs little.
    if (cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
            cudaSuccess ||
        cudaFuncSetAttribute((const void *)k, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared) != cudaSuccess)
        return SD_ECUDA;
    const int64_t grid_rows = a->swiglu ? (a->rows / 2 + 15) / 16 * 32 : a->rows; // SW: 16 pairs a block
    dim3 grid((unsigned)((grid_rows + 31) / 32), (unsigned)nsplit);
    const int pdl = (a->ctx ? a->ctx->pdl : 1) && !(p.atomic && !a->accumulate); // not after a memset
    return sd_launch(k, grid, dim3(kThreads), smem, s, pdl, p) == cudaSuccess ? 0 : SD_ECUDA;
}
