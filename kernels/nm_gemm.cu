// nm_gemm: the N:M bitmask GEMM of nm_gemm.h. A block: 8 warps over 128 weight rows (2 along M,
// 64 rows each) and 64 or 128 vectors (4 along N, 16 or 32 each). Per stage of 64 columns:
//   - the stage's raw weights (values and masks) and x arrive through cp.async, four stages
//     deep: two are in flight while one is expanded and one multiplied (at 65-256 vectors the
//     kernel is bound by the weights' bytes, and one stage in flight would leave it waiting on
//     DRAM latency);
//   - each thread expands one mask word (a row's 32 columns) into the dense tile (two tiles,
//     alternating: stage k + 1 is expanded while the mma reads stage k's);
//   - ldmatrix gives both operands in the mma's own order: A rows are weight rows (row-major), B
//     rows are vectors (x row-major is B column-major), as the wide kernels do (nm_spmv_spg.cu).
// Unit u (16 bytes) of a tile row r sits at u ^ (r & 7): the 8 rows an ldmatrix reads, and the 8
// units a phase of the expansion stores, hit 8 distinct bank groups. Every index is computed by
// nm_gemm_layout.h, which tests/kernels/test_nm_gemm_layout.c checks on the CPU.
#include "kernels/nm_gemm.h"

#include "kernels/nm_expand.h"
#include "kernels/nm_gemm_layout.h"
#include "kernels/nm_spmv_impl.h"
#include "kernels/nm_tc.cuh"
#include "kernels/pdl.cuh"

#include <stdint.h>

namespace
{
using namespace sd_nm_tc;
using namespace sd_pdl;

constexpr int kCols = 64;             // columns a stage: two mask words a row
constexpr int kRows = 128;            // weight rows a block
constexpr int kStages = SD_GM_STAGES; // stages of raw weights and x in shared memory (4)

struct GmParams {
    const uint16_t *values; // bf16 [rows, cols/2]
    const uint32_t *mask;   // u32 [rows, cols/32]
    const uint16_t *x;      // bf16 [B, ldx]
    float *y;               // fp32 [B, ldy]
    int64_t rows, cols, ldx, ldy;
    int B, accumulate;
};

// WN: n8 tiles a warp; a block's vectors are 4 warps x 8 WN. Shared memory: the two dense tiles,
// then kStages stages of [raw weights | x] (nm_gemm_layout.h, whose test runs the same map).
template <int WN> struct Gm {
    static constexpr int kVec = 32 * WN;
    static constexpr int kA = SD_GM_TILE_BYTES;            // a dense tile, bytes
    static constexpr int kStage = SD_GM_STAGE_BYTES(kVec); // 17 KB (WN 2) or 25 KB (WN 4)
    static constexpr int kSmem = SD_GM_SMEM_BYTES(kVec);   // 100 KB (two blocks an SM) or 132 KB
    static_assert(kA == kRows * kCols * 2 && kSmem == 2 * kA + kStages * kStage, "nm_gemm_layout.h's map");
};

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Starts the copies of stage s's raw weights into the stage at st: 512 16-byte units of values, two
// a thread, and the 128 rows' 8 bytes of mask (past the last row: zeros, which expand to zeros).
__device__ __forceinline__ void issue_w(const GmParams &p, uint32_t st, int64_t row0, int s)
{
    const int t = threadIdx.x;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        int r, u;
        sd_gm_raw_unit(t + kThreads * j, &r, &u);
        const int64_t row = row0 + r;
        const bool ok = row < p.rows;
        cp_async16_zfill(st + sd_gm_raw_val_off(r, u),
                         ok ? p.values + sd_gm_val_src(row, p.cols, s, u) : p.values, ok ? 16u : 0u);
    }
    if (t < kRows) {
        const int64_t row = row0 + t;
        const bool ok = row < p.rows;
        cp_async8_zfill(st + sd_gm_raw_mask_off(t), ok ? p.mask + sd_gm_mask_src(row, p.cols, s) : p.mask,
                        ok ? 8u : 0u);
    }
}

// Thread t's word of the stage at st (generic pointer), expanded: its 32 dense columns into units
// 4 (t % 2) .. + 3 of row t / 2 of the tile at a.
__device__ __forceinline__ void store_w(const uint8_t *st, uint8_t *a)
{
    int vo, mo;
    sd_gm_raw_word(threadIdx.x, &vo, &mo);
    const uint4 v0 = *reinterpret_cast<const uint4 *>(st + vo),
                v1 = *reinterpret_cast<const uint4 *>(st + vo + 16);
    const uint32_t v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
    uint32_t o[16];
    sd_nm_expand_word(*reinterpret_cast<const uint32_t *>(st + mo), v, o);
#pragma unroll
    for (int q = 0; q < 4; q++) {
        int r, u;
        sd_gm_w_unit(threadIdx.x, q, &r, &u);
        *reinterpret_cast<uint4 *>(a + sd_gm_unit_off(r, u)) =
            make_uint4(o[4 * q], o[4 * q + 1], o[4 * q + 2], o[4 * q + 3]);
    }
}

// Starts the copies of x's stage s for the block's vectors from v0 (past B: zeros).
template <int WN> __device__ __forceinline__ void issue_x(const GmParams &p, uint32_t xs, int64_t v0, int s)
{
#pragma unroll
    for (int j = 0; j < Gm<WN>::kVec / 32; j++) { // 8 units a vector, kThreads copies a j
        int v, u;
        sd_gm_x_unit(threadIdx.x, j, &v, &u);
        const int64_t vec = v0 + v;
        const bool ok = vec < p.B;
        cp_async16_zfill(xs + sd_gm_unit_off(v, u), ok ? p.x + sd_gm_x_src(vec, p.ldx, s, u) : p.x,
                         ok ? 16u : 0u);
    }
}

// A stage's mma: warp (wm, wn) takes rows 64 wm .. + 63 of the tile at as against vectors
// 8 WN wn .. + 8 WN - 1 of the x stage at xs, four k16 steps.
template <int WN>
__device__ __forceinline__ void mma_stage(float (&c)[4][WN][4], uint32_t as, uint32_t xs, int warp, int lane)
{
    const int wm = warp & 1, v0 = 8 * WN * (warp >> 1);
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t a[4][4];
#pragma unroll
        for (int m = 0; m < 4; m++) {
            int r, u;
            sd_gm_a_src(wm, m, kk, lane, &r, &u);
            ldsm_x4(as + sd_gm_unit_off(r, u), a[m]);
        }
#pragma unroll
        for (int np = 0; np < WN / 2; np++) {
            uint32_t b[4];
            int v, u;
            sd_gm_b_src(v0, np, kk, lane, &v, &u);
            ldsm_x4(xs + sd_gm_unit_off(v, u), b);
#pragma unroll
            for (int m = 0; m < 4; m++) {
                mma_bf16(c[m][2 * np], a[m][0], a[m][1], a[m][2], a[m][3], b[0], b[1]);
                mma_bf16(c[m][2 * np + 1], a[m][0], a[m][1], a[m][2], a[m][3], b[2], b[3]);
            }
        }
    }
}

// Each warp stores its own C fragments: c0, c1 row g, vectors 2t, 2t + 1; c2, c3 row g + 8.
template <int WN>
__device__ __forceinline__ void store_c(const GmParams &p, const float (&c)[4][WN][4], int64_t row0,
                                        int64_t v0, int warp, int lane)
{
    const int wm = warp & 1, wv0 = 8 * WN * (warp >> 1);
#pragma unroll
    for (int m = 0; m < 4; m++)
#pragma unroll
        for (int n = 0; n < WN; n++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                int r, v;
                sd_gm_c_dst(wm, wv0, m, n, k, lane, &r, &v);
                const int64_t row = row0 + r, vec = v0 + v;
                if (row < p.rows && vec < p.B) {
                    float *o = p.y + vec * p.ldy + row;
                    *o = p.accumulate ? *o + c[m][n][k] : c[m][n][k];
                }
            }
}

// Starts stage s's copies (raw weights and x) into its slot; one commit group a stage (empty past
// the last, so that the waits' counts hold to the end).
template <int WN>
__device__ __forceinline__ void issue_stage(const GmParams &p, uint32_t sm_s, int64_t row0, int64_t v0, int s,
                                            int n)
{
    if (s < n) {
        const uint32_t st = sm_s + sd_gm_slot_off(s, Gm<WN>::kVec);
        issue_w(p, st, row0, s);
        issue_x<WN>(p, st + SD_GM_RAW_BYTES, v0, s);
    }
    cp_async_commit();
}

// A block: rows blockIdx.x * kRows, vectors blockIdx.y * kVec, all columns. Iteration k waits for
// stage k + 1 (stages up to k + kStages - 2 have been started), starts stage k + kStages - 1 in the
// slot of stage k - 1 (free: the barrier orders it after every warp's iteration k - 1), expands
// stage k + 1 into the tile iteration k - 1 read, and multiplies stage k's tile (expanded in
// iteration k - 1, or before the loop) by stage k's x. test_nm_gemm_layout runs this schedule on
// the CPU (sd_gm_* of nm_gemm_layout.h) and checks that no shared byte is read while a copy into
// it may be in flight or written by another thread between the same two barriers.
template <int WN> __global__ void __launch_bounds__(kThreads, WN == 2 ? 2 : 1) gm_kernel(GmParams p)
{
    using G = Gm<WN>;
    extern __shared__ uint4 smem_gm[];
    uint8_t *sm = reinterpret_cast<uint8_t *>(smem_gm);
    const uint32_t sm_s = (uint32_t)__cvta_generic_to_shared(sm);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t row0 = (int64_t)blockIdx.x * kRows, v0 = (int64_t)blockIdx.y * G::kVec;
    const int n = (int)(p.cols / kCols);
    pdl_wait(); // x is written by the kernel before; the weights could start earlier, but in one group
    pdl_trigger();
#pragma unroll
    for (int s = 0; s < kStages - 1; s++)
        issue_stage<WN>(p, sm_s, row0, v0, s, n);
    cp_async_wait<SD_GM_WAIT + 1>(); // stage 0
    __syncthreads();
    store_w(sm + sd_gm_slot_off(0, G::kVec), sm + sd_gm_tile_off(0));
    float c[4][WN][4] = {};
    for (int k = 0; k < n; k++) {
        cp_async_wait<SD_GM_WAIT>(); // stage k + 1 has landed (this thread's copies)
        __syncthreads();             // everyone's; tile k & 1 is expanded; slot (k - 1) % kStages is free
        issue_stage<WN>(p, sm_s, row0, v0, sd_gm_issue_stage(k), n);
        if (k + 1 < n) // the next tile, while this one is multiplied
            store_w(sm + sd_gm_slot_off(k + 1, G::kVec), sm + sd_gm_tile_off(k + 1));
        mma_stage<WN>(c, sm_s + sd_gm_tile_off(k), sm_s + sd_gm_slot_off(k, G::kVec) + SD_GM_RAW_BYTES, warp,
                      lane);
    }
    cp_async_wait<0>();
    store_c<WN>(p, c, row0, v0, warp, lane);
}

template <int WN> int launch(const sd_nm_spmv_args *a, cudaStream_t s)
{
    using G = Gm<WN>;
    const GmParams p = {a->values, a->mask, a->x,   (float *)a->y, a->rows,
                        a->cols,   a->ldx,  a->ldy, a->B,          a->accumulate};
    if (cudaFuncSetAttribute((const void *)gm_kernel<WN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             G::kSmem) != cudaSuccess)
        return SD_ECUDA;
    const dim3 grid((unsigned)((a->rows + kRows - 1) / kRows), (unsigned)((a->B + G::kVec - 1) / G::kVec));
    const int pdl = a->ctx ? a->ctx->pdl : 1;
    return sd_launch(gm_kernel<WN>, grid, dim3(kThreads), (size_t)G::kSmem, s, pdl, p) == cudaSuccess
               ? 0
               : SD_ECUDA;
}

} // namespace

extern "C" int sd_nm_gemm_supported(const sd_nm_spmv_args *a)
{
    return sd_gm_shape_ok(a->n, a->m, a->cols, a->ldx) && a->rows > 0 && a->B > 0 && a->ldy >= a->rows &&
           !a->y_bf16 && !a->swiglu && ((uintptr_t)a->x & 15) == 0 && ((uintptr_t)a->values & 15) == 0 &&
           ((uintptr_t)a->mask & 7) == 0;
}

extern "C" int sd_nm_gemm_launch(const sd_nm_spmv_args *a, int vec_tile, cudaStream_t s)
{
    if (!sd_nm_gemm_supported(a) || (vec_tile != 0 && vec_tile != 64 && vec_tile != 128))
        return SD_EINVAL;
    if (!vec_tile)
        vec_tile = a->B <= 128 ? 64 : 128;
    return vec_tile == 64 ? launch<2>(a, s) : launch<4>(a, s);
}
