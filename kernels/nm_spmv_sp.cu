// nm_spmv_sp: 2:4 weights on the sparse tensor cores (mma.sp m16n8k32, bf16 in, fp32 out) for
// 1-16 vectors, straight from the bitmask format: no expansion, no shared tile. The register-
// expanding kernel (nm_spmv_tc.cu) spends ~11 instructions a kept value turning values and mask
// bits into dense fragments; here the hardware takes the 2:4 values as they are stored and a
// 2-bit index per value, which a lane computes from the mask for 16 values at once (nm_sp24.h,
// which also has the K permutation). Blocks of 16 or 32 rows whose 8 warps split K, split-K across
// blocks, and the reduction of the 16-row tensor-core kernels (nm_tc.cuh); x comes from global
// memory per lane (kernels/NOTES.md v21: a wide variant staging x once per 128 rows was slower).
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

// x of vector v (zero for v >= B), 8 bf16 from column c.
__device__ __forceinline__ uint4 load_x8(const TcParams &p, int v, int64_t c)
{
    if (v < p.B && c < p.cols)
        return __ldg(reinterpret_cast<const uint4 *>(p.x + (int64_t)v * p.ldx + c));
    return make_uint4(0, 0, 0, 0);
}

// The B fragments of the 16-column run from column c0 of vector v (sp_b_frags).
__device__ __forceinline__ void sp_x_run(const TcParams &p, int v, int64_t c0, int t, uint32_t (&e)[4])
{
    sp_b_frags(load_x8(p, v, c0 + 8 * (t & 1)), t, e);
}

// A warp's weights come through its own ring of shared-memory steps (cp.async), each step two
// 64-column pieces of its MT x 16 rows: per 16-row tile 2 KB of values (16-byte unit (piece * 16 +
// row) * 4 + t: what lane (g, t) reads for rows g and g + 8) and, after all tiles' values, 256
// bytes of masks (row r's words at 16 r, 8 bytes a piece). With the copies kStages - 1 steps
// ahead a warp keeps ~7 KB (MT = 1) of weights in flight without registers for them: gate_up at B
// = 1 41.8 µs against 46.6 with one register-prefetched step (results/2026-12-02-s15/r1, r2).
// At B >= 4 x binds instead: every block reads all of x from L2 per 16 x MT rows, and a warp loads
// x fragments per 16 x MT rows; MT = 2 halves both (the dense tensor-core GEMV's ratio of x to
// weight bytes, which runs at ~90% of the read ceiling).
template <int MT> struct SpRing {
    static constexpr int kStages = MT == 1 ? 4 : 3; // MT = 2: two blocks an SM still fit
    static constexpr int kVals = MT * 2048;
    static constexpr int kStep = MT * (2048 + 256);
};

// Issues lane (g, t)'s copies of the step at mask word cw: per tile m its 16 bytes of values of
// rows g and g + 8 in both pieces, and one piece's two mask words of one of the rows (t & 1:
// piece, t >> 1: row g + 8). Zero-filled past w_end (a piece is all in or all out: pieces and
// splits are whole multiples of 64 columns).
template <int MT>
__device__ __forceinline__ void sp_issue(uint32_t st, const uint16_t *const (&vrow)[MT][2],
                                         const uint32_t *const (&mrow)[MT], int64_t cw, int64_t w_end,
                                         int lane)
{
    const int t = lane & 3;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int64_t w = cw + 2 * (k >> 1);
            const bool ok = w < w_end;
            cp_async16_zfill(st + 2048 * m + 16 * (lane + 32 * k), vrow[m][k & 1] + (ok ? w : 0) * 16 + 8 * t,
                             ok ? 16u : 0u);
        }
    const int64_t w = cw + 2 * (t & 1);
    const bool ok = w < w_end;
#pragma unroll
    for (int m = 0; m < MT; m++)
        cp_async8_zfill(st + SpRing<MT>::kVals + 256 * m + 16 * ((lane >> 2) + 8 * (t >> 1)) + 8 * (t & 1),
                        mrow[m] + (ok ? w : 0), ok ? 8u : 0u);
    cp_async_commit();
}

// One piece from the staged step: both mma of every tile and n-tile, x loaded once for all tiles
// (a piece past the end: kSpDeadMask).
template <int NT, int META, int MT>
__device__ __forceinline__ void sp_piece(const TcParams &p, float (&c)[MT][NT][4], const uint8_t *st, int s,
                                         int64_t col, bool live, int g, int t)
{
    uint4 vg[MT], vg8[MT];
    uint32_t e[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) {
        vg[m] = *reinterpret_cast<const uint4 *>(st + 2048 * m + 16 * ((s * 16 + g) * 4 + t));
        vg8[m] = *reinterpret_cast<const uint4 *>(st + 2048 * m + 16 * ((s * 16 + g + 8) * 4 + t));
        const uint8_t *mk = st + SpRing<MT>::kVals + 256 * m;
        uint2 mg = *reinterpret_cast<const uint2 *>(mk + 16 * g + 8 * s);
        uint2 mg8 = *reinterpret_cast<const uint2 *>(mk + 16 * (g + 8) + 8 * s);
        if (!live)
            mg = mg8 = make_uint2(kSpDeadMask, kSpDeadMask);
        e[m] = sp_meta<META>(mg, mg8, t);
    }
    const int64_t c0 = col + 16 * (t >> 1);
#pragma unroll
    for (int n = 0; n < NT; n++) {
        uint32_t x0[4], x1[4]; // the runs at c0 and c0 + 32
        sp_x_run(p, 8 * n + g, c0, t, x0);
        sp_x_run(p, 8 * n + g, c0 + 32, t, x1);
#pragma unroll
        for (int m = 0; m < MT; m++)
            sp_mma_piece(c[m][n], vg[m], vg8[m], e[m], x0, x1);
    }
}

// A block owns 16 x MT rows (SW: MT = 1), its 8 warps split K. The first kStages - 1 steps'
// weights are in flight before the PDL wait. Shared memory: the warps' rings, then reused by the
// reduction (one tile after the other).
template <int NT, bool SW, int META, int MT>
__global__ void __launch_bounds__(kThreads) sp24_kernel(TcParams p)
{
    using R = SpRing<MT>;
    extern __shared__ uint4 smem_tc[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t words = p.cols >> 5, row0 = (int64_t)blockIdx.x * 16 * MT;
    const int64_t w_begin = blockIdx.y * p.words_per_split;
    const int64_t w_end = min(words, w_begin + p.words_per_split);
    const uint16_t *vrow[MT][2];
    const uint32_t *mrow[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) {
        const int64_t rg = tc_row<SW>(p, row0 + 16 * m, g), rg8 = tc_row<SW>(p, row0 + 16 * m, g + 8);
        vrow[m][0] = p.values + rg * (p.cols >> 1), vrow[m][1] = p.values + rg8 * (p.cols >> 1);
        mrow[m] = p.mask + ((t >> 1) ? rg8 : rg) * words;
    }
    uint8_t *ring = reinterpret_cast<uint8_t *>(smem_tc) + warp * R::kStages * R::kStep;
    const uint32_t ring_s = (uint32_t)__cvta_generic_to_shared(ring);
    const int64_t step = 4 * kWarps, cw0 = w_begin + 4 * warp;
#pragma unroll
    for (int k = 0; k < R::kStages - 1; k++)
        sp_issue<MT>(ring_s + k * R::kStep, vrow, mrow, cw0 + k * step, w_end, lane);
    float c[MT][NT][4] = {};
    pdl_wait();
    pdl_trigger();
    int k = 0;
    for (int64_t cw = cw0; cw < w_end; cw += step, k = k + 1 == R::kStages ? 0 : k + 1) {
        const int kn = k == 0 ? R::kStages - 1 : k - 1; // the slot freed last step
        sp_issue<MT>(ring_s + kn * R::kStep, vrow, mrow, cw + (R::kStages - 1) * step, w_end, lane);
        cp_async_wait<R::kStages - 1>();
        __syncwarp();
        const uint8_t *st = ring + k * R::kStep;
#pragma unroll
        for (int s = 0; s < 2; s++)
            sp_piece<NT, META, MT>(p, c, st, s, cw * 32 + 64 * s, cw + 2 * s < w_end, g, t);
        __syncwarp(); // the slot is refilled next step
    }
    cp_async_wait<0>(); // the copies past the end, before the rings turn into the reduction's tiles
#pragma unroll
    for (int m = 0; m < MT; m++)
        reduce_store<NT, SW>(p, reinterpret_cast<float *>(smem_tc), c[m], row0 + 16 * m);
}

// The kernel for B vectors: MT = 1 with the SwiGLU epilogue (its 8 gate / up pairs a block) or
// either metadata layout (the test's), else mt.
template <bool SW, int META> tc_kernel_fn sp24_kernel_for(int B, int mt)
{
    if (mt == 2 && !SW && META == SD_SP24_META)
        return B <= 8 ? sp24_kernel<1, false, SD_SP24_META, 2> : sp24_kernel<2, false, SD_SP24_META, 2>;
    return B <= 8 ? sp24_kernel<1, SW, META, 1> : sp24_kernel<2, SW, META, 1>;
}

size_t sp24_smem(int mt)
{
    return mt == 2 ? (size_t)kWarps * SpRing<2>::kStages * SpRing<2>::kStep
                   : (size_t)kWarps * SpRing<1>::kStages * SpRing<1>::kStep; // > the reduction's tiles
}

} // namespace

extern "C" int sd__nm_sp24_supported(const sd_nm_spmv_args *a)
{
    return a->n == 2 && a->m == 4 && a->B <= SD_NM_MAX_B && a->cols % 64 == 0 && a->ldx % 8 == 0 &&
           ((uintptr_t)a->x & 15) == 0 && ((uintptr_t)a->mask & 7) == 0;
}

extern "C" int sd__nm_sp24_launch_meta(const sd_nm_spmv_args *a, int split, int meta, int mt, cudaStream_t s)
{
    if (!sd__nm_sp24_supported(a) || split < 1 || (meta != 0 && meta != 1) || (mt != 1 && mt != 2))
        return SD_EINVAL;
    TcParams p;
    const int64_t nsplit = tc_params(a, split, &p);
    if (a->swiglu && nsplit > 1) // a row's whole sum in one block
        return SD_ENOTSUP;
    if (a->swiglu || meta != SD_SP24_META)
        mt = 1;
    if (tc_zero_for_split(a, p, s) != cudaSuccess)
        return SD_ECUDA;
    const size_t smem = sp24_smem(mt);
    const int64_t grid_rows = a->swiglu ? a->rows / 2 : a->rows, per_block = a->swiglu ? 8 : 16 * mt;
    dim3 grid((unsigned)((grid_rows + per_block - 1) / per_block), (unsigned)nsplit);
    tc_kernel_fn k = a->swiglu
                         ? (meta ? sp24_kernel_for<true, 1>(a->B, mt) : sp24_kernel_for<true, 0>(a->B, mt))
                         : (meta ? sp24_kernel_for<false, 1>(a->B, mt) : sp24_kernel_for<false, 0>(a->B, mt));
    const int pdl = (a->ctx ? a->ctx->pdl : 1) && !(p.atomic && !a->accumulate); // not after a memset
    if (cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
        cudaSuccess)
        return SD_ECUDA;
    return sd_launch(k, grid, dim3(kThreads), smem, s, pdl, p) == cudaSuccess ? 0 : SD_ECUDA;
}

extern "C" int sd__nm_sp24_launch(const sd_nm_spmv_args *a, int mt, int split, cudaStream_t s)
{
    return sd__nm_sp24_launch_meta(a, split, SD_SP24_META, mt, s);
}
