/* cuda_sample: sampling on the GPU (engine/cuda_sample.cu) — the staging buffers and the
 * launcher the CUDA backend's `sample` operation calls. Not a public header (the kernel test,
 * tests/engine/test_cuda_sample.c, calls the launcher directly). */
#ifndef SD_CUDA_SAMPLE_CUH
#define SD_CUDA_SAMPLE_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Buffers reused from step to step (grown on demand; zero-initialised = empty). */
typedef struct sd_cu_sampler {
    void *h_buf, *d_buf; /* pinned host / device: row descriptors | penalties | raw values | outputs */
    size_t cap;
    float *stage; /* TP: contiguous copies of the sampled rows, [stage_rows, vocab] */
    size_t stage_rows;
    int64_t rows_sampled; /* for tests */
} sd_cu_sampler;

void sd__cu_sampler_free(sd_cu_sampler *sm);

/* A device buffer of at least rows x vocab floats for rows gathered from elsewhere. */
int sd__cu_sampler_stage(sd_cu_sampler *sm, int rows, int32_t vocab, float **ret, sd_diag *d);

/* Samples reqs[i] from the device row rows[i] (vocab floats, edited in place by penalties)
 * into out[i], one block per row, on stream st; returns when out is filled. reqs[i].row is
 * not used here (the caller resolved it into rows[i]). */
int sd__cu_sample(sd_cu_sampler *sm, float *const *rows, int32_t vocab, const sd_sample_req *reqs, int n,
                  sd_sample_out *out, cudaStream_t st, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
