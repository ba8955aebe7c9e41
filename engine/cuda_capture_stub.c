/* cuda_capture_stub: the CUDA capture entry points of builds without CUDA (engine/cuda_backend.cu
 * has the real ones): there is no CUDA backend to hook. */
#include "engine/cuda_capture.h"

#ifndef SD_HAVE_CUDA
int sd_backend_cuda_set_capture(sd_backend *b, sd_cuda_capture_fn fn, void *ud, int32_t stop_after_layer,
                                sd_diag *d)
{
    return sd_diag_set(d, SD_ENOTSUP, "cuda capture: this build has no CUDA");
}

int sd_backend_cuda_set_linear(sd_backend *b, int32_t layer, int which, const float *w, sd_diag *d)
{
    return sd_diag_set(d, SD_ENOTSUP, "cuda capture: this build has no CUDA");
}

int sd_backend_cuda_device(const sd_backend *b)
{
    return -1;
}
#else
/* ISO C forbids an empty translation unit. */
typedef int sd__cuda_capture_stub_unused;
#endif
