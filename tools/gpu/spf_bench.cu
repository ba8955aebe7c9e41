// spf_bench: an experiment for kernels/NOTES.md v43. A 2:4 SpMV on the sparse tensor cores shaped
// like the dense tensor-core GEMV (16-row blocks, 8 warps over K, weights straight into the A
// registers), with the mma.sp metadata computed once from the masks into each lane's register
// order (the mask's bytes), against the 2:4 compacting kernel (rows_per_warp 103), back to back,
// weights rotated over copies larger than L2. Checks both against the fp64 CPU reference first.
//
//   spf_bench ROWS COLS B SPLIT [LAUNCHES]     (cols % 256 == 0, B <= 8)
//
// Not part of the daemon: a measurement (kernels/NOTES.md v44). The Makefile builds it with the
// CUDA objects (`make BUILD=build/gpu build/gpu/tools/spf_bench`; SPF_FLAGS="-DSPF_MINB=4" or
// "-DSPF_PREF=1" for the variants r6 and r7 timed).
#include "kernels/bench_util.h"
#include "kernels/nm_sp24.cuh"
#include "kernels/nm_spmv.h"
#include "kernels/nm_spmv_cpu.h"
#include "kernels/nm_tc.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

using namespace sd_nm_tc;
using namespace sd_nm_sp24;

#define CK(x)                                                                                                \
    do {                                                                                                     \
        cudaError_t e_ = (x);                                                                                \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "spf_bench: %s: %s\n", #x, cudaGetErrorString(e_));                              \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

// 64-column pieces a warp step (SPF_PP 4 or 2): 4 x 32 bytes of values a lane and one 16-byte
// metadata load, or half of each.
#ifndef SPF_PP
#define SPF_PP 4
#endif
constexpr int kPP = SPF_PP;
static_assert(kPP == 4 || kPP == 2, "four or two pieces a step");

// meta[((tile * pieces / 4 + piece / 4) * 32 + lane) * 4 + piece % 4]: lane (g, t)'s metadata
// register of the piece for rows 16 tile + g and + 8 (nm_sp24.h layout 1), rows clamped.
__global__ void spf_meta_kernel(const uint32_t *mask, uint32_t *meta, int64_t rows, int64_t cols)
{
    const int64_t pieces = cols / 64, words = cols / 32, tiles = (rows + 15) / 16;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= tiles * pieces * 32)
        return;
    const int lane = (int)(i % 32), g = lane >> 2, t = lane & 3;
    const int64_t piece = i / 32 % pieces, tile = i / 32 / pieces;
    const int64_t r0 = min(tile * 16 + g, rows - 1), r8 = min(tile * 16 + g + 8, rows - 1);
    const uint32_t *m0 = mask + r0 * words + 2 * piece, *m8 = mask + r8 * words + 2 * piece;
    meta[((tile * (pieces / 4) + piece / 4) * 32 + lane) * 4 + piece % 4] =
        sd_sp24_lane_meta(m0[0], m0[1], m8[0], m8[1], t, SD_SP24_META);
}

// One 16-row block, 8 warps over K; split-K over grid.y (pieces_per_split, a multiple of 4).
// SPF_MINB: blocks an SM the registers must leave room for (0: no cap; 83 registers, 3 blocks).
#ifndef SPF_MINB
#define SPF_MINB 0
#endif
#ifndef SPF_PREF
#define SPF_PREF 0
#endif
__global__ void __launch_bounds__(kThreads, SPF_MINB)
    spf_kernel(TcParams p, const uint32_t *meta, int64_t pps)
{
    __shared__ float red[kWarps * 16 * 8];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t pieces = p.cols / 64, row0 = (int64_t)blockIdx.x * 16, tile = blockIdx.x;
    const int64_t p_begin = blockIdx.y * pps, p_end = min(pieces, p_begin + pps);
    const uint4 *vg = reinterpret_cast<const uint4 *>(p.values + min(row0 + g, p.rows - 1) * (p.cols / 2));
    const uint4 *vg8 =
        reinterpret_cast<const uint4 *>(p.values + min(row0 + g + 8, p.rows - 1) * (p.cols / 2));
    const uint4 *mt = reinterpret_cast<const uint4 *>(meta) + tile * (pieces / 4) * 32 + lane;
    float c[1][4] = {};
    const int64_t step = kPP * kWarps;
    int64_t pc = p_begin + kPP * warp;
    uint4 a[kPP], a8[kPP], e4;
    // SPF_PREF: the next step's weights and metadata in flight while this one computes (two steps
    // a warp in flight, more registers); otherwise one step, loaded then computed.
    auto load = [&](int64_t q, uint4(&va)[kPP], uint4(&va8)[kPP], uint4 &ve) {
#pragma unroll
        for (int s = 0; s < kPP; s++) { // piece q + s: 16 bytes of rows g and g + 8 at columns 16t.. of it
            va[s] = __ldg(vg + (q + s) * 4 + t);
            va8[s] = __ldg(vg8 + (q + s) * 4 + t);
        }
        if constexpr (kPP == 4) {
            ve = __ldg(mt + q / 4 * 32);
        } else { // two pieces: half of the lane's 16 bytes
            const uint2 h = __ldg(reinterpret_cast<const uint2 *>(mt + q / 4 * 32) + (q % 4) / 2);
            ve = make_uint4(h.x, h.y, 0, 0);
        }
    };
    if (SPF_PREF && pc < p_end)
        load(pc, a, a8, e4);
    for (; pc < p_end; pc += step) {
        uint4 na[kPP], na8[kPP], ne4;
        if (SPF_PREF) {
            if (pc + step < p_end)
                load(pc + step, na, na8, ne4);
        } else {
            load(pc, a, a8, e4);
        }
        const uint32_t e[4] = {e4.x, e4.y, e4.z, e4.w};
#pragma unroll
        for (int s = 0; s < kPP; s++) {
            const int64_t c0 = (pc + s) * 64 + 16 * (t >> 1);
            // nm_spmv_sp.cu's sp_x_run without its column bound (cols % 256 == 0 here): with
            // that 64-bit compare ptxas gives this kernel 97 registers instead of 83
            uint32_t x0[4], x1[4];
            sp_b_frags(
                g < p.B ? __ldg(reinterpret_cast<const uint4 *>(p.x + (int64_t)g * p.ldx + c0 + 8 * (t & 1)))
                        : make_uint4(0, 0, 0, 0),
                t, x0);
            sp_b_frags(g < p.B ? __ldg(reinterpret_cast<const uint4 *>(p.x + (int64_t)g * p.ldx + c0 + 32 +
                                                                       8 * (t & 1)))
                               : make_uint4(0, 0, 0, 0),
                       t, x1);
            sp_mma_piece(c[0], a[s], a8[s], e[s], x0, x1);
        }
        if (SPF_PREF) {
#pragma unroll
            for (int s = 0; s < kPP; s++)
                a[s] = na[s], a8[s] = na8[s];
            e4 = ne4;
        }
    }
    reduce_store<1, false>(p, red, c, row0);
}

static double rel_l2(const std::vector<float> &got, const std::vector<double> &want)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); i++)
        num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
    return num != num ? 1e30 : sqrt(num / (den > 0 ? den : 1));
}

int main(int argc, char **argv)
{
    if (argc < 5)
        return fprintf(stderr, "usage: spf_bench ROWS COLS B SPLIT [LAUNCHES]\n"), 2;
    const long long rows = atoll(argv[1]), cols = atoll(argv[2]);
    const int B = atoi(argv[3]), split = atoi(argv[4]), launches = argc > 5 ? atoi(argv[5]) : 200;
    if (rows < 16 || cols % 256 || B < 1 || B > 8 || split < 1 || launches < 1)
        return fprintf(stderr, "spf_bench: bad sizes\n"), 2;
    const size_t vbytes = (size_t)rows * cols, mbytes = (size_t)rows * cols / 8;
    const int copies = (int)(3 * 60e6 / (double)(vbytes + mbytes)) + 1;
    uint16_t *vals, *x;
    uint32_t *mask, *meta;
    float *y;
    CK(cudaMalloc((void **)&vals, vbytes * copies));
    CK(cudaMalloc((void **)&mask, mbytes * copies));
    CK(cudaMalloc((void **)&meta, mbytes * copies));
    CK(cudaMalloc((void **)&x, (size_t)B * cols * 2));
    CK(cudaMalloc((void **)&y, (size_t)B * rows * 4));
    if (sd_bench_fill_bf16(vals, (int64_t)(vbytes * copies / 2), 1, 0) ||
        sd_bench_fill_bf16(x, (int64_t)B * cols, 2, 0) ||
        sd_bench_fill_nm_mask(mask, (int64_t)(mbytes * copies / 4), 4, 3, 0))
        return fprintf(stderr, "spf_bench: fill failed\n"), 1;
    const int64_t tiles = (rows + 15) / 16, pieces = cols / 64;
    for (int c = 0; c < copies; c++) {
        const int64_t n = tiles * pieces * 32;
        spf_meta_kernel<<<(unsigned)((n + 255) / 256), 256>>>(
            (const uint32_t *)((const char *)mask + mbytes * c), (uint32_t *)((char *)meta + mbytes * c),
            rows, cols);
    }
    CK(cudaGetLastError());
    int64_t pps = (pieces + split - 1) / split;
    pps = (pps + 3) / 4 * 4;
    const int64_t nsplit = (pieces + pps - 1) / pps;
    auto spf = [&](int c, int acc_zero) -> int {
        sd_nm_spmv_args a = {};
        a.n = 2, a.m = 4, a.rows = rows, a.cols = cols, a.B = B;
        a.values = (const uint16_t *)((const char *)vals + vbytes * c);
        a.x = x, a.ldx = cols, a.y = y, a.ldy = rows;
        TcParams p;
        tc_params(&a, 1, &p);
        p.atomic = nsplit > 1;
        if (p.atomic && acc_zero && cudaMemsetAsync(y, 0, (size_t)B * rows * 4, 0) != cudaSuccess)
            return 1;
        spf_kernel<<<dim3((unsigned)tiles, (unsigned)nsplit), kThreads>>>(
            p, (const uint32_t *)((const char *)meta + mbytes * c), pps);
        return cudaGetLastError() != cudaSuccess;
    };
    auto c24 = [&](int c) -> int {
        sd_nm_spmv_args a = {};
        a.n = 2, a.m = 4, a.rows = rows, a.cols = cols, a.B = B;
        a.values = (const uint16_t *)((const char *)vals + vbytes * c);
        a.mask = (const uint32_t *)((const char *)mask + mbytes * c);
        a.x = x, a.ldx = cols, a.y = y, a.ldy = rows;
        a.rows_per_warp = 103, a.split = 1;
        return sd_nm_spmv_launch(&a, 0);
    };
    // the check: copy 0 against the fp64 reference, both kernels
    std::vector<uint16_t> hv(vbytes / 2), hx((size_t)B * cols);
    std::vector<uint32_t> hm(mbytes / 4);
    CK(cudaMemcpy(hv.data(), vals, vbytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hm.data(), mask, mbytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hx.data(), x, (size_t)B * cols * 2, cudaMemcpyDeviceToHost));
    std::vector<float> xf((size_t)B * cols), got((size_t)B * rows);
    for (size_t i = 0; i < xf.size(); i++) {
        uint32_t u = (uint32_t)hx[i] << 16;
        memcpy(&xf[i], &u, 4);
    }
    std::vector<double> ref((size_t)B * rows);
    sd_nm_spmv_cpu_f64(hv.data(), hm.data(), rows, cols, xf.data(), cols, B, ref.data(), rows);
    const char *names[2] = {"spf", "c24 (103)"};
    for (int k = 0; k < 2 && B <= 2; k++) {
        CK(cudaMemset(y, 0xff, (size_t)B * rows * 4)); // NaN
        if (k ? c24(0) : spf(0, 1))
            return fprintf(stderr, "spf_bench: %s launch failed\n", names[k]), 1;
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(got.data(), y, got.size() * 4, cudaMemcpyDeviceToHost));
        const double e = rel_l2(got, ref);
        printf("check %s %lldx%lld B=%d split=%d: rel L2 %.3g against fp64%s\n", names[k], rows, cols, B,
               (int)nsplit, e, e < 1e-3 ? "" : "  FAILED");
        if (!(e < 1e-3))
            return 1;
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int k = 0; k < 2; k++) {
        if (k == 1 && B > 2)
            break; // the compacting kernel takes 1-2 vectors
        for (int i = -3; i < launches; i++) {
            if (i == 0)
                CK(cudaEventRecord(e0, 0));
            const int c = (i + 3) % copies;
            if (k ? c24(c) : spf(c, 0)) // timing: split-K sums add up, unzeroed
                return fprintf(stderr, "spf_bench: launch failed\n"), 1;
        }
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        const double us = ms * 1e3 / launches,
                     bytes = (double)(vbytes + mbytes) + B * cols * 2.0 + B * rows * 4.0;
        printf("%s %lldx%lld B=%d split=%d: %.2f us per launch (mean of %d, back to back), %.0f GB/s\n",
               names[k], rows, cols, B, k ? 1 : (int)nsplit, us, launches, bytes / (us * 1e-6) / 1e9);
    }
    return 0;
}
