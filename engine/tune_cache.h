/* tune_cache: the CUDA backend's first-use tuning decisions kept in a JSON file, so that a process
 * started later on the same GPU (a restarted daemon, the other side of an A/B benchmark) runs the
 * same kernels without timing them again: no first-use stalls, and the same roundings as before.
 *
 * The file holds a key (GPU, driver, kernels revision: a cache for another one is not used), the
 * kernels' autotune entries (kernels/nm_tuned.h) and the engine's kernel-or-cuBLAS choices. It is
 * written whole, to a temporary file first, fsynced and renamed over the old one, so a crash
 * leaves the old or the new file, never a torn one. */
#ifndef SD_TUNE_CACHE_H
#define SD_TUNE_CACHE_H

#include <stdint.h>

#include "engine/diag.h"
#include "kernels/nm_tuned.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_TUNE_CACHE_FORMAT 1
#define SD_TUNE_KEY_MAX 256

/* One linear problem's path: the engine's SpMV/GEMV, cuBLAS, (a 2:4 linear with a copy in its
 * layout) cuSPARSELt or (SD_NM_GEMM=2) the N:M GEMM of kernels/nm_gemm.h, and the times that chose
 * it. */
typedef struct sd_tune_path {
    int64_t rows, cols;
    int B, dense, m, acc; /* B: sd_nm_tune_bucket of the rows */
    int use_blas;         /* 1: cuBLAS measured faster than the SpMV/GEMV for this problem */
    float ms_kernel, ms_blas;
    int use_cslt;     /* 1: cuSPARSELt measured fastest (taken where its copy exists) */
    float ms_cslt;    /* 0: not timed (no copy when the problem was tuned); optional in the file */
    int use_nm_gemm;  /* 1: the N:M GEMM measured fastest (taken where SD_NM_GEMM=2) */
    float ms_nm_gemm; /* 0: not timed; optional in the file */
} sd_tune_path;

typedef struct sd_tune_cache {
    char key[SD_TUNE_KEY_MAX];
    sd_nm_tuned *kernels;
    int n_kernels;
    sd_tune_path *paths;
    int n_paths;
} sd_tune_cache;

/* Writes c to path (atomically, as above). SD_EIO with the path and the reason. */
int sd_tune_cache_save(const char *path, const sd_tune_cache *c, sd_diag *d);
/* Reads path into *c (which then owns its arrays: sd_tune_cache_free). SD_ENOTFOUND when there
 * is no such file, SD_EFORMAT naming the field at fault, SD_EIO otherwise. */
int sd_tune_cache_load(const char *path, sd_tune_cache *c, sd_diag *d);
void sd_tune_cache_free(sd_tune_cache *c);

#ifdef __cplusplus
}
#endif

#endif
