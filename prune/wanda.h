/* wanda: the Wanda (Sun et al. 2024) and magnitude pruning criteria for one linear — scores
 * |W_ij| * ||X_j||_2 (Wanda) or |W_ij| (magnitude), the N:M / per-row 50% mask, no update. */
#ifndef SD_WANDA_H
#define SD_WANDA_H

#include <stdint.h>

#include "engine/cpu_pool.h"
#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Prunes W (fp32 [rows, cols], pruned entries set to 0) in place and writes the kept-column mask
 * keep (u32 [rows, cols/32]). xsq: fp64 [cols], sum over calibration rows of x_j^2 (any
 * positive multiple of it, e.g. diag H, ranks the same), or NULL for magnitude pruning.
 * n, m: N:M kept per group, or 0, 0 for the top cols/2 of every row. Ties: lower column kept. */
int sd_wanda_prune(float *W, int64_t rows, int64_t cols, const double *xsq, int n, int m, uint32_t *keep,
                   sd_diag *d);

/* The same, rows in blocks over `pool` (NULL: the calling thread); the same output for any
 * thread count. */
int sd_wanda_prune_pool(sd_cpu_pool *pool, float *W, int64_t rows, int64_t cols, const double *xsq, int n,
                        int m, uint32_t *keep, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
