/* prune_cuda_impl: the GPU pruning context shared by prune_cuda.cu (factor, accumulators) and
 * prune_cuda_sweep.cu (the SparseGPT sweep), and its error-check macros. Not a public header. */
#ifndef SD_PRUNE_CUDA_IMPL_CUH
#define SD_PRUNE_CUDA_IMPL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <stdint.h>

#include "prune/prune_cuda.h"

struct sd_prune_gpu {
    int device;
    cudaStream_t st;
    cublasHandle_t blas;
    cusolverDnHandle_t sol;
    double *U;     /* [n, n] upper factor of the last hinv (device), lower part zero */
    uint8_t *dead; /* [n] its dead columns (device) */
    int64_t n;     /* its size; 0 = none yet */
    int64_t cap;   /* elements U can hold */
};

#define SD_PG_CU(d, call)                                                                                    \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess)                                                                               \
            return sd_diag_set((d), e_ == cudaErrorMemoryAllocation ? SD_ENOMEM : SD_ECUDA,                  \
                               "prune gpu: %s:%d: %s: %s", __FILE__, __LINE__, #call,                        \
                               cudaGetErrorString(e_));                                                      \
    } while (0)

#define SD_PG_BLAS(d, call)                                                                                  \
    do {                                                                                                     \
        cublasStatus_t s_ = (call);                                                                          \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                     \
            return sd_diag_set((d), SD_ECUDA, "prune gpu: %s:%d: %s: cuBLAS status %d", __FILE__, __LINE__,  \
                               #call, (int)s_);                                                              \
    } while (0)

#define SD_PG_SOLVER(d, call)                                                                                \
    do {                                                                                                     \
        cusolverStatus_t s_ = (call);                                                                        \
        if (s_ != CUSOLVER_STATUS_SUCCESS)                                                                   \
            return sd_diag_set((d), SD_ECUDA, "prune gpu: %s:%d: %s: cuSOLVER status %d", __FILE__,          \
                               __LINE__, #call, (int)s_);                                                    \
    } while (0)

/* Grid size for a grid-stride loop over `n` items with 256 threads per block. */
static inline unsigned sd__pg_grid(int64_t n)
{
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

#endif
