/* hess: accumulation of a linear's calibration Hessian H = (2/n) sum x x^T from captured input
 * rows — staged in fp32 chunks, multiplied with the CPU matmul, summed in fp64 — or only its
 * diagonal (sum x_j^2) when the solver needs no more (Wanda); or, for the CUDA path, folded on
 * the GPU with cuBLAS DSYRK in fp64. */
#ifndef SD_HESS_H
#define SD_HESS_H

#include <stdint.h>

#include "engine/cpu_pool.h"
#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_hess sd_hess;

/* A zeroed accumulator for inputs of width `cols`; diag_only keeps just sum x_j^2. */
int sd_hess_init(sd_hess **ret, int64_t cols, int diag_only, sd_diag *d);

typedef struct sd_prune_gpu sd_prune_gpu;
/* A full accumulator whose sum lives on the GPU of g (prune/prune_cuda.h): every staged chunk is
 * folded with cuBLAS DSYRK in fp64 (no host [cols, cols] buffers). g must outlive it. The other
 * calls are the same; `pool` is unused for it. SD_ENOTSUP without CUDA. */
int sd_hess_init_gpu(sd_hess **ret, int64_t cols, sd_prune_gpu *g, sd_diag *d);
void sd_hess_free(sd_hess *h);

/* Adds n rows x (fp32 [n, ld], the first cols of each row used). Rows are staged and folded
 * in chunks with `pool` (which must outlive the accumulator's use). */
int sd_hess_add(sd_hess *h, sd_cpu_pool *pool, const float *x, int64_t ld, int64_t n, sd_diag *d);

/* Adds n rows already in GPU memory (bf16 [n, ld], the first cols of each row used; the CUDA
 * backend's capture hook) to a GPU accumulator, device to device. SD_EINVAL for a CPU one. */
int sd_hess_add_dev(sd_hess *h, const void *x_bf16, int64_t ld, int64_t n, sd_diag *d);

/* Rows added so far. */
int64_t sd_hess_rows(const sd_hess *h);
int64_t sd_hess_cols(const sd_hess *h);

/* Folds what is staged and returns H = (2/n) sum x x^T (fp64 [cols, cols], malloc'd, caller
 * frees); diag_only accumulators give the [cols] diagonal instead. n = 0 gives zeros. */
int sd_hess_finish(sd_hess *h, sd_cpu_pool *pool, double **ret, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
