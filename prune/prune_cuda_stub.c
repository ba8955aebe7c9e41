/* prune_cuda_stub: the GPU pruning entry points of builds without CUDA (prune/prune_cuda.cu and
 * prune_cuda_sweep.cu are the real ones): the context cannot be made, so nothing else runs. */
#include "prune/prune_cuda.h"

#ifndef SD_HAVE_CUDA
int sd_prune_gpu_init(sd_prune_gpu **ret, int device, sd_diag *d)
{
    return sd_diag_set(d, SD_ENOTSUP, "prune: --device cuda: this build has no CUDA (rebuild with nvcc)");
}

void sd_prune_gpu_free(sd_prune_gpu *g) {}

static int no_cuda(sd_diag *d)
{
    return sd_diag_set(d, SD_ENOTSUP, "prune: this build has no CUDA");
}

int sd_prune_gpu_hinv(sd_prune_gpu *g, const double *H, int64_t n, const sd_sgpt_opts *o, double *U,
                      uint8_t *dead, sd_sgpt_stats *st, sd_diag *d)
{
    return no_cuda(d);
}

int sd_prune_gpu_sweep(sd_prune_gpu *g, float *W, int64_t rows, int64_t cols, const sd_sgpt_opts *o,
                       uint32_t *keep, sd_sgpt_stats *st, sd_diag *d)
{
    return no_cuda(d);
}

int sd_prune_gpu_prune(sd_prune_gpu *g, float *W, int64_t rows, int64_t cols, const double *H,
                       const sd_sgpt_opts *o, uint32_t *keep, sd_sgpt_stats *st, sd_diag *d)
{
    return no_cuda(d);
}

int sd_prune_gpu_acc_init(sd_prune_gpu *g, sd_prune_gpu_acc **ret, int64_t cols, sd_diag *d)
{
    return no_cuda(d);
}

void sd_prune_gpu_acc_free(sd_prune_gpu_acc *a) {}

int sd_prune_gpu_acc_add(sd_prune_gpu_acc *a, const float *xt, int64_t ld, int64_t k, sd_diag *d)
{
    return no_cuda(d);
}

int sd_prune_gpu_acc_add_dev(sd_prune_gpu_acc *a, const void *x, int64_t ld, int64_t n, sd_diag *d)
{
    return no_cuda(d);
}

int sd_prune_gpu_acc_get(sd_prune_gpu_acc *a, double scale, double *out, sd_diag *d)
{
    return no_cuda(d);
}
#else
/* ISO C forbids an empty translation unit. */
typedef int sd__prune_cuda_stub_unused;
#endif
