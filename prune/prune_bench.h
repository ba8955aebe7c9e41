/* prune_bench: wall-clock timing of the SparseGPT solver for one linear shape on a synthetic
 * Hessian, on the CPU or the GPU (`sparsed prune --bench-solver`, tools/gpu/prune.sh). */
#ifndef SD_PRUNE_BENCH_H
#define SD_PRUNE_BENCH_H

#include <stdint.h>

#include "engine/diag.h"
#include "prune/prune.h"
#include "prune/sgpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_prune_bench {
    double factor_s;    /* clean-up + damped inverse factor (GPU: with H's upload) */
    double sweep_s;     /* the prune-and-update sweep (GPU: with W's upload and download) */
    double loss;        /* the OBS error, to compare the devices */
    uint64_t mask_hash; /* FNV-1a of the mask words, to compare the devices */
} sd_prune_bench;

/* W [rows, cols] ~ N(0, 0.02^2) and H = S K S (K_ij = 0.9^|i-j|, S = diag of log-normal feature
 * scales, a few dead columns), both from `seed`; then the solver on `device` with `threads` CPU
 * threads (0 = all cores). */
int sd_prune_bench_solver(int64_t rows, int64_t cols, const sd_sgpt_opts *o, sd_prune_device device,
                          int threads, uint64_t seed, sd_prune_bench *out, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
