/* cuda_capture: the calibration hook of the CUDA backend (used by prune/ with --device cuda) —
 * a callback that sees the bf16 inputs of every linear, in device memory, during eager forward
 * steps, and an early stop after a given layer. The CUDA twin of engine/cpu_capture.h: the same
 * four sites, rows, positions and sequence indices. Only valid on a single-GPU backend made by
 * sd_backend_cuda_init. */
#ifndef SD_CUDA_CAPTURE_H
#define SD_CUDA_CAPTURE_H

#include <stdint.h>

#include "engine/backend.h"
#include "engine/cpu_capture.h"
#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called synchronously inside forward, after the backend's stream has finished forming the
 * input: x is device memory, bf16 [T, cols] (row t = token t in batch order, x + t*cols
 * elements, cols = the linear's input width), pos[T] and seq[T] are host arrays as for
 * sd_capture_fn. x is overwritten by the next kernels of the step once the callback returns,
 * so the callback must be done reading it (e.g. synchronize its own stream) before returning.
 * A negative return aborts the forward with that code. */
typedef int (*sd_cuda_capture_fn)(void *ud, int32_t layer, sd_capture_site site, const void *x, int64_t cols,
                                  int T, const int32_t *pos, const int32_t *seq);

/* Installs (fn != NULL) or removes the hook. While it is installed every step runs eagerly
 * (CUDA graphs are bypassed, never captured). stop_after_layer >= 0 ends the forward right
 * after that layer with the logits unwritten (their buffer then holds stale values); -1 runs the
 * whole model. SD_ENOTSUP on a tensor-parallel rank (its inputs are shards), SD_EINVAL on a
 * backend that is not CUDA. */
int sd_backend_cuda_set_capture(sd_backend *b, sd_cuda_capture_fn fn, void *ud, int32_t stop_after_layer,
                                sd_diag *d);

/* Copies w (fp32 [rows, cols] of linear `which` of `layer`, in the SD_LIN_* order of
 * engine/cpu_capture.h) over the backend's dense bf16 weights of that linear (q/k/v and gate/up
 * are rows of fused matrices), rounded to bf16 — exact for the bf16-rounded weights sequential
 * pruning writes. SD_EINVAL on bad ids, SD_ENOTSUP for a bitmask linear or a tensor-parallel
 * rank. */
int sd_backend_cuda_set_linear(sd_backend *b, int32_t layer, int which, const float *w, sd_diag *d);

/* The CUDA device the backend runs on. */
int sd_backend_cuda_device(const sd_backend *b);

#ifdef __cplusplus
}
#endif
#endif
