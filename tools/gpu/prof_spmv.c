/* prof_spmv: launches one SpMV / GEMV problem with one explicit kernel config, for Nsight
 * Compute (ncu profiles each launch) and for quick timings of a config the autotuner would not
 * pick. Random bf16 weights and x, random valid N:M masks; weights rotated over enough copies
 * to exceed L2, as in `sparsed bench kernels`.
 *
 *   prof_spmv PATTERN ROWS COLS B RW SPLIT [LAUNCHES]
 *     PATTERN  dense | 2:4 | 4:8 | 8:16 | 16:32
 *     RW       rows_per_warp (kernels/nm_spmv_impl.h: 1, 2, 4, 16, 24, 25, 27, 29, 30, 128, 256,
 *              32, 48, 64, 96, 101, 102, 103)
 *     SPLIT    split-K factor
 *   prints the mean time of LAUNCHES (default 50) back-to-back launches (no PDL overlap, launch gaps
 *   included: use `bench kernels` for the numbers of record), and GB/s on the bytes moved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/bench_util.h"
#include "kernels/nm_spmv.h"

#define CK(x)                                                                                                \
    do {                                                                                                     \
        cudaError_t e_ = (x);                                                                                \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "prof_spmv: %s: %s\n", #x, cudaGetErrorString(e_));                              \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: prof_spmv dense|N:M ROWS COLS B RW SPLIT [LAUNCHES]\n");
        return 2;
    }
    int dense = !strcmp(argv[1], "dense"), n = 0, m = 0;
    if (!dense && sscanf(argv[1], "%d:%d", &n, &m) != 2)
        return fprintf(stderr, "prof_spmv: bad pattern %s\n", argv[1]), 2;
    long long rows = atoll(argv[2]), cols = atoll(argv[3]);
    int B = atoi(argv[4]), rw = atoi(argv[5]), split = atoi(argv[6]);
    int launches = argc > 7 ? atoi(argv[7]) : 50;
    if (rows < 1 || cols < 32 || B < 1 || launches < 1 || launches > 10000)
        return fprintf(stderr, "prof_spmv: bad sizes\n"), 2;
    size_t wbytes = (size_t)rows * (size_t)cols * (dense ? 2 : 1),
           mbytes = dense ? 0 : (size_t)rows * cols / 8;
    int copies = (int)(3 * 60e6 / (double)(wbytes + mbytes)) + 1;
    uint16_t *vals = NULL, *x = NULL;
    uint32_t *mask = NULL;
    float *y = NULL;
    CK(cudaMalloc((void **)&vals, wbytes * copies));
    if (!dense)
        CK(cudaMalloc((void **)&mask, mbytes * copies));
    CK(cudaMalloc((void **)&x, (size_t)B * cols * 2));
    CK(cudaMalloc((void **)&y, (size_t)B * rows * 4));
    if (sd_bench_fill_bf16(vals, (int64_t)(wbytes * copies / 2), 1, 0) ||
        sd_bench_fill_bf16(x, (int64_t)B * cols, 2, 0) ||
        (!dense && sd_bench_fill_nm_mask(mask, (int64_t)(mbytes * copies / 4), m, 3, 0)))
        return fprintf(stderr, "prof_spmv: fill failed\n"), 1;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = -3; i < launches; i++) { /* 3 untimed warm-up launches, then back to back */
        if (i == 0)
            CK(cudaEventRecord(e0, 0));
        int c = (i + 3) % copies;
        sd_nm_spmv_args a = {0};
        a.n = n, a.m = m, a.rows = rows, a.cols = cols, a.B = B;
        a.values = (const uint16_t *)((const char *)vals + wbytes * c);
        a.mask = dense ? NULL : (const uint32_t *)((const char *)mask + mbytes * c);
        a.x = x, a.ldx = cols, a.y = y, a.ldy = rows;
        a.rows_per_warp = rw, a.split = split;
        int rc = dense ? sd_gemv_bf16_launch(&a, 0) : sd_nm_spmv_launch(&a, 0);
        if (rc)
            return fprintf(stderr, "prof_spmv: launch failed (%d)\n", rc), 1;
    }
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    double us = ms * 1e3 / launches,
           bytes = (double)(wbytes + mbytes) + (double)B * cols * 2 + (double)B * rows * 4;
    printf("%s %lldx%lld B=%d rw=%d split=%d: %.2f us per launch (mean of %d, launch gaps included), %.0f "
           "GB/s\n",
           argv[1], rows, cols, B, rw, split, us, launches, bytes / (us * 1e-6) / 1e9);
    return 0;
}
