/* cuda_gemm_bench: one linear's GEMM of T rows timed every way the CUDA backend can run it above
 * the bitmask kernels' rows (the prompt-chunk path), for `sparsed bench gemm` (engine/bench_gemm.c).
 * Built only with CUDA. */
#ifndef SD_CUDA_GEMM_BENCH_H
#define SD_CUDA_GEMM_BENCH_H

#include <stdint.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Median microseconds of each path (0 where it did not run; cslt_err says why for cuSPARSELt). */
typedef struct sd_gemm_times {
    double dense_us;       /* cuBLAS bf16 GEMM on a dense weight, fp32 out (the dense model's path) */
    double expand_us;      /* the bitmask expanded into a dense scratch alone */
    double expand_warp_us; /* the same by the warp kernel (SD_EXPAND_WARP) */
    int expand_same;       /* 1: both kernels wrote the same bits */
    double expand_blas_us; /* expansion, then the same GEMM on the scratch (2:4 without cuSPARSELt) */
    double nm_gemm_us[2];  /* kernels/nm_gemm.h on the bitmask, 64 / 128 vectors a block */
    double cslt_us;        /* cuSPARSELt on its copy, default config (SD_CUSPARSELT=1), fp32 out */
    double cslt_search_us; /* the same with the config cusparseLtMatmulSearch picked (the default) */
    char cslt_err[200];
} sd_gemm_times;

/* y [T, rows] fp32 = x [T, cols] bf16 W^T for random W (dense, and 2:4 bitmask for the rest) on
 * `device`: `reps` timed runs of each path after two warm-ups, each run after a 128 MB write that
 * evicts the weights from L2 (as the layers before evict them in a prefill step). rows, cols:
 * multiples of 64. Returns 0 or an error (a cuSPARSELt failure only fills cslt_err). */
int sd_cuda_gemm_bench(int device, int64_t rows, int64_t cols, int T, int reps, sd_gemm_times *t, sd_diag *d);

/* Random n:m bitmask weights [rows, cols] (cols a multiple of 32) expanded on `device` by both
 * expansion kernels (sd__cu_expand_bitmask) and by the CPU's sd_nm_expand: diff[0] and diff[1] get
 * how many bf16 of the one-thread-a-word and of the warp kernel differ from the CPU's (for
 * tests/engine/test_expand_gpu.c). */
int sd_cuda_expand_check(int device, int64_t rows, int64_t cols, int n, int m, uint64_t seed, size_t diff[2],
                         sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
