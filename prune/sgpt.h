/* sgpt: the SparseGPT solver (Frantar & Alistarh 2023) for one linear — Hessian clean-up, damped
 * inverse-Cholesky factor with retries, and the column-blocked prune-and-update sweep for N:M
 * and unstructured 50% — plus the LAPACK-free fp64 Cholesky pieces it needs.
 *
 * Rows are independent once Hinv is known, so the sweep runs row ranges on the CPU pool; a GPU
 * path would implement the same sd_sgpt_prune contract (cuSOLVER potrf + batched row sweeps). */
#ifndef SD_SGPT_H
#define SD_SGPT_H

#include <stdint.h>

#include "engine/cpu_pool.h"
#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_sgpt_opts {
    int n, m;        /* N:M kept per group; 0, 0 = unstructured 50% per row (see below) */
    double damping;  /* fraction of mean(diag H) added to the diagonal (default 0.01) */
    int block_size;  /* columns per lazy-update block, a multiple of 32 (default 128) */
    int max_retries; /* damping retries after a failed Cholesky, x10 each (default 6) */
} sd_sgpt_opts;

void sd_sgpt_opts_default(sd_sgpt_opts *o);

typedef struct sd_sgpt_stats {
    double loss;      /* sum over pruned weights of (w - q)^2 / Hinv_ii^2 / 2 (OBS error) */
    int dead_cols;    /* columns with H_jj == 0 (zeroed) */
    int retries;      /* extra Cholesky attempts needed */
    double damp_used; /* the lambda that succeeded */
    int sanitized;    /* NaN/Inf entries of H replaced by 0 */
} sd_sgpt_stats;

/* Upper-triangular U with U^T U = (H + lambda I)^{-1}, where lambda = damping * mean(diag H)
 * grows x10 per retry when the factorisation fails. H: fp64 [n, n], modified in place
 * (symmetrised, NaN/Inf -> 0, dead columns H_jj = 0 -> 1 and reported in dead[n] if non-NULL).
 * U: fp64 [n, n] (lower part zero). SD_ERANGE if every retry failed. */
int sd_sgpt_hinv(sd_cpu_pool *pool, double *H, int64_t n, const sd_sgpt_opts *o, double *U, uint8_t *dead,
                 sd_sgpt_stats *st, sd_diag *d);

/* Prunes W (fp32 [rows, cols], row-major, replaced by the pruned and updated weights) with
 * Hessian H (fp64 [cols, cols], modified in place). keep (u32 [rows, cols/32]) receives the
 * mask of kept columns. Dead columns of H are zeroed in W first, as the reference does.
 * Unstructured: within every block each row keeps the half of the block's columns with the
 * largest w^2 / Hinv_jj^2 (scored at the start of the block), so every row keeps exactly
 * cols/2 — the bitmask format needs that; the reference's block-wide threshold does not
 * guarantee it. cols % 32 == 0, block_size % 32 == 0. */
int sd_sgpt_prune(sd_cpu_pool *pool, float *W, int64_t rows, int64_t cols, double *H, const sd_sgpt_opts *o,
                  uint32_t *keep, sd_sgpt_stats *st, sd_diag *d);

/* The sweep alone, for linears that share one input (q/k/v, gate/up): U and dead from one
 * sd_sgpt_hinv of their Hessian. Fills st->loss; other fields untouched. */
int sd_sgpt_sweep(sd_cpu_pool *pool, float *W, int64_t rows, int64_t cols, const double *U,
                  const uint8_t *dead, const sd_sgpt_opts *o, uint32_t *keep, sd_sgpt_stats *st, sd_diag *d);

/* SD_EINVAL unless cols % 32 == 0 and the options are valid. */
int sd_sgpt_check(int64_t cols, const sd_sgpt_opts *o, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
