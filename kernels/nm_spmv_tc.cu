// nm_spmv_tc: the batched (B = 2..16) paths on tensor cores. A block owns 16 rows; its 8 warps
// split K. Sparse: each warp expands a 16-row x 128-column chunk of bitmask weights into a
// zeroed shared-memory tile (the same fixed 16-step bit scan as the B=1 kernel, but scattering
// values instead of gathering x), then multiplies it by x with mma.m16n8k16 (bf16 in, fp32
// accumulate); the cost per kept weight no longer grows with B. Dense: the weights go straight
// from global memory into the A fragments. 2:4 to 16:32 can skip the shared tile: tcx_spmv_kernel
// expands the bitmask weights into the A fragments in registers (kernels/nm_tcx.h), and its wide
// twin (nm_spmv_tcw.cu, launched from here) takes up to 64 vectors. The 8 warps' partial tiles are
// summed in shared memory.
//
// K permutation: within a 64-column piece, lane (g = lane/4, t = lane%4) holds columns
// [16t, 16t+16) of rows g and g+8, and mma j (0..3) takes columns 16t + 4j + {0,1} as its k-slots
// {2t, 2t+1} and 16t + 4j + {2,3} as {2t+8, 2t+9}. A and B use the same mapping, so the sum is
// unchanged while every lane reads 32 contiguous bytes (two 16-byte loads) of A and of x.
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_tc.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_tc;
using namespace sd_pdl;

constexpr int kAStride = 128 + 8; // bf16 per row of a warp's A tile (16-byte pad: no conflicts)

// x of vector g (zero for g >= B), columns [c, c+16) of the permuted piece, as 8 bf16x2.
__device__ __forceinline__ void load_x16(const TcParams &p, int g, int64_t c, uint32_t (&xr)[8])
{
    uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
    if (g < p.B && c < p.cols) {
        const uint4 *xp = reinterpret_cast<const uint4 *>(p.x + (int64_t)g * p.ldx + c);
        lo = __ldg(xp);
        hi = __ldg(xp + 1);
    }
    xr[0] = lo.x, xr[1] = lo.y, xr[2] = lo.z, xr[3] = lo.w, xr[4] = hi.x, xr[5] = hi.y, xr[6] = hi.z,
    xr[7] = hi.w;
}

// Four mma over one 64-column piece: ag/ag8 = rows g, g+8 (8 bf16x2 each), xr per n-tile.
template <int NT>
__device__ __forceinline__ void mma_piece(float (&c)[NT][4], const uint32_t (&ag)[8],
                                          const uint32_t (&ag8)[8], const uint32_t (&xr)[NT][8])
{
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int n = 0; n < NT; n++)
            mma_bf16(c[n], ag[2 * j], ag8[2 * j], ag[2 * j + 1], ag8[2 * j + 1], xr[n][2 * j],
                     xr[n][2 * j + 1]);
}

// Scatters one N:M word (16 bits, values v0|v1 in column order) into a zeroed A-tile row.
__device__ __forceinline__ void scatter_word(uint16_t *arow, uint32_t bits, const uint4 &v0, const uint4 &v1)
{
    const uint32_t u[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
    for (int k = 0; k < 16; k++) {
        const int p = top_bit(bits);
        bits &= bits_below(p);
        const int i = 15 - k;
        arow[p & 31] =
            (uint16_t)((i & 1) ? u[i >> 1] >> 16 : u[i >> 1]); // & 31: a corrupt word stays in its row
    }
}

// One lane's share of a 128-column chunk: words 2h, 2h+1 of its row (masks and 16 values each).
struct ChunkRegs {
    uint32_t mk[2];
    uint4 v[4];
};

__device__ __forceinline__ void load_chunk(ChunkRegs &c, const uint32_t *mrow, const uint4 *vrow, int64_t w0,
                                           int64_t w_begin, int64_t w_end)
{
#pragma unroll
    for (int q = 0; q < 2; q++) {
        const bool ok = w0 + q < w_end;
        const int64_t w = ok ? w0 + q : w_begin;
        c.mk[q] = ok ? ld_stream_u32(mrow + w) : 0u; // an empty word scatters nothing
        c.v[2 * q] = __ldg(vrow + 2 * w);
        c.v[2 * q + 1] = __ldg(vrow + 2 * w + 1);
    }
}

// Per chunk: scatter (lane = row r, words 2h, 2h+1) into the zeroed tile; then each lane reads its
// A fragments (rows g, g+8) and clears what it read, so the tile is zero again for the next chunk.
// The next chunk's weights are loaded before this chunk's scatter, to keep bytes in flight.
template <int NT, bool SW> __global__ void __launch_bounds__(kThreads) tc_spmv_kernel(TcParams p)
{
    extern __shared__ uint4 smem_tc[];
    uint16_t *atile = reinterpret_cast<uint16_t *>(smem_tc) + (threadIdx.x >> 5) * 16 * kAStride;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int r = lane >> 1, h = lane & 1;
    const int64_t words = p.cols >> 5, row0 = (int64_t)blockIdx.x * 16;
    const int64_t w_begin = blockIdx.y * p.words_per_split;
    const int64_t w_end = min(words, w_begin + p.words_per_split);
    const int64_t srow = tc_row<SW>(p, row0, r);
    const uint32_t *mrow = p.mask + srow * words;
    const uint4 *vrow = reinterpret_cast<const uint4 *>(p.values + srow * (p.cols >> 1));
    for (int i = lane; i < 16 * kAStride / 8; i += 32)
        reinterpret_cast<uint4 *>(atile)[i] = make_uint4(0, 0, 0, 0);
    __syncwarp();
    float c[NT][4] = {};
    const int64_t step = 4 * kWarps;
    int64_t cw = w_begin + 4 * warp;
    ChunkRegs cur;
    if (cw < w_end)
        load_chunk(cur, mrow, vrow, cw + 2 * h, w_begin, w_end);
    // The first chunk's weights are in flight; x comes from the grid before (pdl.cuh).
    pdl_wait();
    pdl_trigger();
    for (; cw < w_end; cw += step) {
        ChunkRegs nxt;
        nxt.mk[0] = nxt.mk[1] = 0u;
        if (cw + step < w_end)
            load_chunk(nxt, mrow, vrow, cw + step + 2 * h, w_begin, w_end);
        uint32_t xr[2][NT][8];
#pragma unroll
        for (int s = 0; s < 2; s++)
#pragma unroll
            for (int n = 0; n < NT; n++)
                load_x16(p, 8 * n + g, cw * 32 + 64 * s + 16 * t, xr[s][n]);
        scatter_word(atile + r * kAStride + 64 * h, cur.mk[0], cur.v[0], cur.v[1]);
        scatter_word(atile + r * kAStride + 64 * h + 32, cur.mk[1], cur.v[2], cur.v[3]);
        __syncwarp();
#pragma unroll
        for (int s = 0; s < 2; s++) {
            uint4 *ap = reinterpret_cast<uint4 *>(atile + g * kAStride + 64 * s + 16 * t);
            uint4 *ap8 = reinterpret_cast<uint4 *>(atile + (g + 8) * kAStride + 64 * s + 16 * t);
            uint4 a0 = ap[0], a1 = ap[1], b0 = ap8[0], b1 = ap8[1];
            ap[0] = ap[1] = ap8[0] = ap8[1] = make_uint4(0, 0, 0, 0);
            const uint32_t ag[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const uint32_t ag8[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            mma_piece<NT>(c, ag, ag8, xr[s]);
        }
        __syncwarp(); // the tile is scattered into again by the next chunk
        cur = nxt;
    }
    reduce_store<NT, SW>(p, reinterpret_cast<float *>(smem_tc), c, row0);
}

// What a lane loads per step: [piece][row g, g+8] values and masks (the nm_tcx.h layout).
struct TcxRegs {
    uint4 v[2][2];
    uint32_t m[2][2];
};

// A warp's 16 rows (g and g+8 per lane; rows past the end clamped: loaded, never stored).
struct TcxRows {
    const uint4 *vg, *vg8;
    const uint32_t *mg, *mg8;
    int t, shift;

    // rg, rg8: the lane's rows g and g + 8 (tc_row)
    __device__ TcxRows(const TcParams &p, int64_t rg, int64_t rg8, int lane)
    {
        const int64_t words = p.cols >> 5;
        vg = reinterpret_cast<const uint4 *>(p.values + rg * (p.cols >> 1));
        vg8 = reinterpret_cast<const uint4 *>(p.values + rg8 * (p.cols >> 1));
        mg = p.mask + rg * words, mg8 = p.mask + rg8 * words;
        t = lane & 3, shift = sd_tcx_mask_shift(t);
    }

    // The step at mask word cw of the split [w_begin, w_end); a piece past its end loads an empty
    // mask (words_per_split and cols are multiples of 64 columns). The whole-word layout: the
    // lane's word, both value units (piece s: unit s), its mask in both pieces; past the end an
    // empty mask.
    template <class E>
    __device__ __forceinline__ void load(TcxRegs &r, int64_t cw, int64_t w_begin, int64_t w_end) const
    {
        if constexpr (E::kWhole) {
            const bool ok = sd_tcx_w_word(cw, t) < w_end;
            const int64_t word = ok ? sd_tcx_w_word(cw, t) : w_begin;
#pragma unroll
            for (int s = 0; s < 2; s++) {
                r.v[s][0] = __ldg(vg + sd_tcx_w_value_unit(word, s));
                r.v[s][1] = __ldg(vg8 + sd_tcx_w_value_unit(word, s));
            }
            r.m[0][0] = r.m[1][0] = ok ? ld_stream_u32(mg + word) : 0u;
            r.m[0][1] = r.m[1][1] = ok ? ld_stream_u32(mg8 + word) : 0u;
        } else {
#pragma unroll
            for (int s = 0; s < 2; s++) {
                const bool ok = cw + 2 * s < w_end;
                const int64_t c = ok ? cw : w_begin;
                const int ss = ok ? s : 0;
                r.v[s][0] = __ldg(vg + sd_tcx_value_unit(c, ss, t));
                r.v[s][1] = __ldg(vg8 + sd_tcx_value_unit(c, ss, t));
                r.m[s][0] = ok ? ld_stream_u32(mg + sd_tcx_mask_word(c, ss, t)) : 0u;
                r.m[s][1] = ok ? ld_stream_u32(mg8 + sd_tcx_mask_word(c, ss, t)) : 0u;
            }
        }
    }

    // Piece s of r as the A fragments of rows g (ag) and g+8 (ag8), in mma_piece's order.
    template <class E>
    __device__ __forceinline__ void expand(const TcxRegs &r, int s, const uint32_t *tab, uint32_t (&ag)[8],
                                           uint32_t (&ag8)[8]) const
    {
        if constexpr (E::kWhole) {
            E::expand_word(r.v[0][0], r.v[1][0], r.m[s][0], s, tab, ag);
            E::expand_word(r.v[0][1], r.v[1][1], r.m[s][1], s, tab, ag8);
        } else {
            const uint32_t v0[4] = {r.v[s][0].x, r.v[s][0].y, r.v[s][0].z, r.v[s][0].w};
            const uint32_t v8[4] = {r.v[s][1].x, r.v[s][1].y, r.v[s][1].z, r.v[s][1].w};
            E::expand(v0, (r.m[s][0] >> shift) & 0xffffu, tab, ag);
            E::expand(v8, (r.m[s][1] >> shift) & 0xffffu, tab, ag8);
        }
    }
};

// 2:4 / 4:8 / 8:16 / 16:32 with the A fragments expanded in registers (kernels/nm_tcx.h): the same block
// shape, K split and x loads as the dense kernel, but each lane loads 16 bytes of values and 16 mask bits per
// row and piece, and byte-permutes them into its fragments. The next step's weights are loaded while this one
// multiplies, the first step's before the PDL wait.
template <class E, int NT, bool SW> __global__ void __launch_bounds__(kThreads) tcx_spmv_kernel(TcParams p)
{
    extern __shared__ uint4 smem_tc[];
    __shared__ __align__(8) uint32_t tab[E::kTab]; // 8: nm_tcx.h sd_tcx_entry2
    tcx_table<E>(tab);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t words = p.cols >> 5, row0 = (int64_t)blockIdx.x * 16;
    const int64_t w_begin = blockIdx.y * p.words_per_split;
    const int64_t w_end = min(words, w_begin + p.words_per_split);
    const TcxRows rows(p, tc_row<SW>(p, row0, g), tc_row<SW>(p, row0, g + 8), lane);
    const int64_t step = 4 * kWarps;
    int64_t cw = w_begin + 4 * warp;
    TcxRegs cur;
    if (cw < w_end)
        rows.load<E>(cur, cw, w_begin, w_end);
    float c[NT][4] = {};
    __syncthreads(); // tab
    pdl_wait();
    pdl_trigger();
    for (; cw < w_end; cw += step) {
        TcxRegs nxt;
        nxt.m[0][0] = nxt.m[0][1] = nxt.m[1][0] = nxt.m[1][1] = 0u;
        if (cw + step < w_end)
            rows.load<E>(nxt, cw + step, w_begin, w_end);
#pragma unroll
        for (int s = 0; s < 2; s++) {
            uint32_t xr[NT][8];
#pragma unroll
            for (int n = 0; n < NT; n++)
                load_x16(p, 8 * n + g, tcx_col<E>(cw, s, t), xr[n]);
            uint32_t ag[8], ag8[8];
            rows.expand<E>(cur, s, tab, ag, ag8);
            mma_piece<NT>(c, ag, ag8, xr);
        }
        cur = nxt;
    }
    reduce_store<NT, SW>(p, reinterpret_cast<float *>(smem_tc), c, row0);
}

// Dense: lane (g, t) loads rows g and g+8, columns [16t, 16t+16) of each 64-column piece.
template <int NT, bool SW> __global__ void __launch_bounds__(kThreads) tc_gemv_kernel(TcParams p)
{
    extern __shared__ uint4 smem_tc[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t words = p.cols >> 5, row0 = (int64_t)blockIdx.x * 16;
    const int64_t w_begin = blockIdx.y * p.words_per_split;
    const int64_t w_end = min(words, w_begin + p.words_per_split);
    const uint4 *wg = reinterpret_cast<const uint4 *>(p.values + tc_row<SW>(p, row0, g) * p.cols);
    const uint4 *wg8 = reinterpret_cast<const uint4 *>(p.values + tc_row<SW>(p, row0, g + 8) * p.cols);
    float c[NT][4] = {};
    pdl_wait();
    pdl_trigger();
    // two 64-column pieces (4 words) per warp step: 8 x 16-byte weight loads in flight per lane
    for (int64_t cw = w_begin + 4 * warp; cw < w_end; cw += 4 * kWarps) {
        uint4 a[2][4];
#pragma unroll
        for (int s = 0; s < 2; s++) {
            const bool ok = cw + 2 * s < w_end; // words_per_split and cols are multiples of 64 columns
            const int64_t q = (ok ? cw * 32 + 64 * s : w_begin * 32) / 8 + 2 * t;
            a[s][0] = __ldg(wg + q), a[s][1] = __ldg(wg + q + 1);
            a[s][2] = __ldg(wg8 + q), a[s][3] = __ldg(wg8 + q + 1);
            if (!ok)
                a[s][0] = a[s][1] = a[s][2] = a[s][3] = make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int s = 0; s < 2; s++) {
            uint32_t xr[NT][8];
#pragma unroll
            for (int n = 0; n < NT; n++)
                load_x16(p, 8 * n + g, cw * 32 + 64 * s + 16 * t, xr[n]);
            const uint32_t ag[8] = {a[s][0].x, a[s][0].y, a[s][0].z, a[s][0].w,
                                    a[s][1].x, a[s][1].y, a[s][1].z, a[s][1].w};
            const uint32_t ag8[8] = {a[s][2].x, a[s][2].y, a[s][2].z, a[s][2].w,
                                     a[s][3].x, a[s][3].y, a[s][3].z, a[s][3].w};
            mma_piece<NT>(c, ag, ag8, xr);
        }
    }
    reduce_store<NT, SW>(p, reinterpret_cast<float *>(smem_tc), c, row0);
}

} // namespace

extern "C" int sd__nm_tc_supported(const sd_nm_spmv_args *a, int dense)
{
    if (dense)
        return a->cols % 64 == 0 && a->ldx % 8 == 0 && ((uintptr_t)a->x & 15) == 0;
    return !(a->n == 0 && a->m == 0) && a->ldx % 8 == 0 && ((uintptr_t)a->x & 15) == 0;
}

extern "C" int sd_nm_tcx_pattern(int n, int m)
{
    return (n == 2 && m == 4) || (n == 4 && m == 8) || (n == 8 && m == 16) || (n == 16 && m == 32);
}

extern "C" int sd__nm_tcx_supported(const sd_nm_spmv_args *a)
{
    return sd_nm_tcx_pattern(a->n, a->m) && a->cols % 64 == 0 && a->ldx % 8 == 0 &&
           ((uintptr_t)a->x & 15) == 0;
}

namespace
{
enum TcKind { kTcSparse, kTcDense, kTcExpand, kTcExpandWide };

// The 16-row expanding kernel of pattern E for B <= 16 vectors (SW: with the SwiGLU epilogue).
template <class E, bool SW> void (*tcx_kernel(int B))(TcParams)
{
    return B <= 8 ? tcx_spmv_kernel<E, 1, SW> : tcx_spmv_kernel<E, 2, SW>;
}

// The 16-row kernel of a kind for B <= 16 vectors (NT n-tiles of 8) and, for the expanding kind,
// pattern m (4: 2:4, 8: 4:8, 16: 8:16, 32: 16:32); SW: the SwiGLU epilogue. The wide kind's kernel
// comes with its shared memory from tcxw_kernel.
template <bool SW> void (*tc_kernel(TcKind kind, int B, int m))(TcParams)
{
    const bool one = B <= 8;
    switch (kind) {
    case kTcExpand:
        return m == 4    ? tcx_kernel<Tcx24, SW>(B)
               : m == 8  ? tcx_kernel<Tcx48, SW>(B)
               : m == 16 ? tcx_kernel<Tcx816, SW>(B)
                         : tcx_kernel<Tcx1632, SW>(B);
    case kTcDense:
        return one ? tc_gemv_kernel<1, SW> : tc_gemv_kernel<2, SW>;
    default:
        return one ? tc_spmv_kernel<1, SW> : tc_spmv_kernel<2, SW>;
    }
}

// mw: the wide kernel's 16-row tiles a warp (1, 2).
int tc_launch(const sd_nm_spmv_args *a, TcKind kind, int split, cudaStream_t s, int mw = 1)
{
    TcParams p;
    const int64_t nsplit = tc_params(a, split, &p);
    if (a->swiglu && (nsplit > 1 || kind == kTcExpandWide)) // a row's whole sum in one block
        return SD_ENOTSUP;
    if (tc_zero_for_split(a, p, s) != cudaSuccess)
        return SD_ECUDA;
    const int NT = a->B > 8 ? 2 : 1;
    const bool wide = kind == kTcExpandWide;
    size_t red = wide ? 0 : (size_t)kWarps * 16 * 8 * NT * 4;
    size_t tiles = kind == kTcSparse ? (size_t)kWarps * 16 * kAStride * 2 : 0;
    const WideKernel wk = wide ? tcxw_kernel(a->m, a->B, mw) : WideKernel{nullptr, 0};
    size_t smem = wide ? wk.smem : red > tiles ? red : tiles;
    const int64_t rows_per_block = wide ? 16 * kWarps * mw : 16;
    const int64_t grid_rows = a->swiglu ? a->rows / 2 : a->rows, per_block = a->swiglu ? 8 : rows_per_block;
    dim3 grid((unsigned)((grid_rows + per_block - 1) / per_block), (unsigned)nsplit);
    void (*k)(TcParams) = wide        ? wk.fn
                          : a->swiglu ? tc_kernel<true>(kind, a->B, a->m)
                                      : tc_kernel<false>(kind, a->B, a->m);
    if (smem > 48 * 1024 && cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem) != cudaSuccess)
        return SD_ECUDA;
    // Not after a memset (pdl.cuh), and not for the shared-tile sparse kernel: its early blocks
    // hold shared memory the running grid's later waves need (B=16 decode 6% slower with it,
    // NOTES.md v5). The expanding kernel holds no more shared memory than the dense one.
    const int pdl = (a->ctx ? a->ctx->pdl : 1) && !(p.atomic && !a->accumulate) && kind != kTcSparse;
    return sd_launch(k, grid, dim3(kThreads), smem, s, pdl, p) == cudaSuccess ? 0 : SD_ECUDA;
}
} // namespace

extern "C" int sd__nm_tc_launch(const sd_nm_spmv_args *a, int dense, int split, cudaStream_t s)
{
    if (!sd__nm_tc_supported(a, dense))
        return SD_EINVAL;
    return tc_launch(a, dense ? kTcDense : kTcSparse, split, s);
}

extern "C" int sd__nm_tcx_launch(const sd_nm_spmv_args *a, int wide, int split, cudaStream_t s)
{
    if (!sd__nm_tcx_supported(a) || (!wide && a->B > SD_NM_MAX_B) || a->B > SD_NM_MAX_B_WIDE || wide < 0 ||
        wide > 2)
        return SD_EINVAL;
    return tc_launch(a, wide ? kTcExpandWide : kTcExpand, split, s, wide ? wide : 1);
}
