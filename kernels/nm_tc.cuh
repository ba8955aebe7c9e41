// nm_tc: what the tensor-core SpMV / GEMV kernels share (nm_spmv_tc.cu: the 16-row kernels and
// their launcher; nm_spmv_tcw.cu: the wide register-expanding kernel): block shape, parameters,
// the mma, the output store, and the patterns' register expansions (nm_tcx.h). Device-only; not
// for use outside kernels/.
#ifndef SD_NM_TC_CUH
#define SD_NM_TC_CUH

#include <stddef.h>
#include <stdint.h>

#include "kernels/nm_device.cuh"
#include "kernels/nm_spmv.h"
#include "kernels/nm_tcx.h"

namespace sd_nm_tc
{
using namespace sd_nm_dev;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

struct TcParams {
    const uint16_t *values; // bf16 [rows, cols/2] (dense: [rows, cols])
    const uint32_t *mask;   // u32 [rows, cols/32]
    const uint16_t *x;      // bf16 [B, ldx]
    void *y;                // [B, ldy]
    int64_t rows, cols, ldx, ldy;
    int64_t words_per_split; // multiple of 4
    int B, y_bf16, accumulate, atomic;
    int64_t half; // > 0: the SwiGLU epilogue (16-row kernels; nm_device.cuh swiglu_row), y bf16
};

__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The parameters of a 16-row tensor-core launch of a with split-K factor `split` (a split is a
// whole number of 128-column steps); returns the number of splits. Host side.
inline int64_t tc_params(const sd_nm_spmv_args *a, int split, TcParams *p)
{
    const int64_t words = a->cols / 32;
    int64_t wps = (words + split - 1) / split;
    wps = (wps + 3) / 4 * 4;
    const int64_t nsplit = (words + wps - 1) / wps;
    p->values = a->values, p->mask = a->mask, p->x = a->x, p->y = a->y;
    p->rows = a->rows, p->cols = a->cols, p->ldx = a->ldx, p->ldy = a->ldy;
    p->words_per_split = wps;
    p->B = a->B, p->y_bf16 = a->y_bf16, p->accumulate = a->accumulate, p->atomic = nsplit > 1;
    p->half = a->swiglu ? a->rows / 2 : 0;
    return nsplit;
}

// Zeroes y where split-K adds its partial sums atomically into it (and nothing is accumulated).
inline cudaError_t tc_zero_for_split(const sd_nm_spmv_args *a, const TcParams &p, cudaStream_t s)
{
    if (!p.atomic || a->accumulate)
        return cudaSuccess;
    return cudaMemset2DAsync(a->y, (size_t)a->ldy * 4, 0, (size_t)a->rows * 4, (size_t)a->B, s);
}

__device__ __forceinline__ void store_y(const TcParams &p, int64_t o, float v)
{
    store_out(p.y, o, v, p.atomic, p.y_bf16, p.accumulate);
}

// Row k (0..15) of a 16-row block from row0, clamped; with the SwiGLU epilogue (SW: a template
// flag, so that the plain kernels keep their registers) rows 0-7 are the block's 8 gate rows and
// 8-15 their up rows.
template <bool SW> __device__ __forceinline__ int64_t tc_row(const TcParams &p, int64_t row0, int k)
{
    if constexpr (SW)
        return swiglu_row(p.half, 8, k);
    return min(row0 + k, p.rows - 1);
}

// Sums the 8 warps' 16 x (8*NT) tiles and writes y for the block's rows (SW: the SwiGLU of each
// gate row and its up row).
template <int NT, bool SW>
__device__ void reduce_store(const TcParams &p, float *red, const float (&c)[NT][4], int64_t row0)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    __syncthreads(); // red may alias what the warps kept in shared memory (A tiles)
    float *rw = red + warp * 16 * 8 * NT;
#pragma unroll
    for (int n = 0; n < NT; n++) {
        const int b = n * 8 + 2 * t;
        rw[g * 8 * NT + b] = c[n][0];
        rw[g * 8 * NT + b + 1] = c[n][1];
        rw[(g + 8) * 8 * NT + b] = c[n][2];
        rw[(g + 8) * 8 * NT + b + 1] = c[n][3];
    }
    __syncthreads();
    if constexpr (SW) { // thread (pair j, vector b) sums gate row j and up row j + 8
        for (int i = threadIdx.x; i < 8 * 8 * NT; i += kThreads) {
            const int j = i / (8 * NT), b = i % (8 * NT);
            const int64_t o = (int64_t)blockIdx.x * 8 + j;
            if (b >= p.B || o >= p.half)
                continue;
            float g = 0.0f, u = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarps; w++) {
                g += red[w * 16 * 8 * NT + i];
                u += red[w * 16 * 8 * NT + 8 * 8 * NT + i];
            }
            static_cast<uint16_t *>(p.y)[(int64_t)b * p.ldy + o] = f32_to_bf16(silu_mul(g, u));
        }
    } else {
        for (int i = threadIdx.x; i < 16 * 8 * NT; i += kThreads) {
            const int r = i / (8 * NT), b = i % (8 * NT);
            const int64_t row = row0 + r;
            if (b >= p.B || row >= p.rows)
                continue;
            float v = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarps; w++)
                v += red[w * 16 * 8 * NT + i];
            store_y(p, (int64_t)b * p.ldy + row, v);
        }
    }
}

// The expansion of a pattern (nm_tcx.h): its shared table (kTab words) and its expand function.
struct Tcx24 {
    static constexpr int kTab = 32;       // words of the shared table
    static constexpr bool kWhole = false; // the nm_tcx.h layout (a lane: 16 columns a piece)
    __device__ static uint32_t entry(int i)
    {
        return i < 16 ? sd_tcx_sel((uint32_t)i) : 0u;
    }
    __device__ static void expand(const uint32_t (&v)[4], uint32_t m16, const uint32_t *tab, uint32_t (&a)[8])
    {
        sd_tcx_expand(v, m16, tab, a);
    }
};
struct Tcx48 {
    static constexpr int kTab = 32;
    static constexpr bool kWhole = false;
    __device__ static uint32_t entry(int i)
    {
        return sd_tcx48_entry((uint32_t)i >> 1, i & 1);
    }
    __device__ static void expand(const uint32_t (&v)[4], uint32_t m16, const uint32_t *tab, uint32_t (&a)[8])
    {
        sd_tcx48_expand(v, m16, tab, a);
    }
};

struct Tcx816 {
    static constexpr int kTab = 32;
    static constexpr bool kWhole = false;
    __device__ static uint32_t entry(int i)
    {
        return sd_tcx816_entry((uint32_t)i >> 1, i & 1);
    }
    __device__ static void expand(const uint32_t (&v)[4], uint32_t m16, const uint32_t *tab, uint32_t (&a)[8])
    {
        sd_tcx816_expand(v, m16, tab, a);
    }
};

// 16:32: the whole-word layout (nm_tcx.h sd_tcx1632_expand), a lane's word expanded per piece
// from both of its 16-byte value units (lo, hi) and its whole mask word.
struct Tcx1632 {
    static constexpr int kTab = SD_TCX1632_TAB;
    static constexpr bool kWhole = true;
    __device__ static uint32_t entry(int i)
    {
        return sd_tcx1632_entry((uint32_t)i / 3, i % 3);
    }
    __device__ static void expand_word(const uint4 &lo, const uint4 &hi, uint32_t m32, int s,
                                       const uint32_t *tab, uint32_t (&a)[8])
    {
        const uint32_t v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        sd_tcx1632_expand(v, m32, s, tab, a);
    }
};

// The first x column of lane t's piece s in the step at word cw (the K permutation A and x share;
// cw 0: the column within a step, as the wide kernel's staged x holds it).
template <class E> __device__ __forceinline__ int64_t tcx_col(int64_t cw, int s, int t)
{
    if constexpr (E::kWhole)
        return sd_tcx_w_col(cw, s, t);
    return cw * 32 + 64 * s + 16 * t;
}

// The block's selector table (nm_tcx.h); the caller syncs before use.
template <class E> __device__ __forceinline__ void tcx_table(uint32_t *tab)
{
    if (threadIdx.x < E::kTab)
        tab[threadIdx.x] = E::entry(threadIdx.x);
}

typedef void (*tc_kernel_fn)(TcParams);

// The wide register-expanding kernel (nm_spmv_tcw.cu) of pattern group m (4: 2:4 ... 32: 16:32)
// for B <= SD_NM_MAX_B_WIDE vectors with mw (1, 2) 16-row tiles a warp (128 or 256 rows a block),
// and the dynamic shared memory it takes (from the same stage layout the kernel uses).
struct WideKernel {
    tc_kernel_fn fn;
    size_t smem;
};
WideKernel tcxw_kernel(int m, int B, int mw);

} // namespace sd_nm_tc

#endif
