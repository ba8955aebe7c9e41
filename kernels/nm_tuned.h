/* nm_tuned: one entry of the kernels' autotune cache (kernels/nm_autotune.cu) as plain data, with
 * no CUDA types, so that the engine can keep the cache across processes (engine/tune_cache.c). */
#ifndef SD_NM_TUNED_H
#define SD_NM_TUNED_H

#include <stdint.h>

/* Bumped whenever a rows_per_warp code changes meaning or a kernel changes enough that earlier
 * choices no longer hold (kernels/NOTES.md version): tune caches of another revision are not used. */
#define SD_NM_KERNELS_REV 29 /* v29: the faster expansion moves kernel-vs-cuBLAS choices */

typedef struct sd_nm_tuned {
    int dense, n, m;        /* the problem's kind and pattern (dense: n = m = 0) */
    int B;                  /* sd_nm_tune_bucket of the vector count */
    int y_bf16, accumulate; /* output type, y += W x */
    int64_t rows, cols;
    int rows_per_warp, split; /* the config the autotuner picked */
} sd_nm_tuned;

#endif
