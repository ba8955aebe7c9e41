/* cpu_capture: calibration hooks into the CPU backend (used by prune/) — a callback that sees
 * the inputs of every linear during a forward pass, an early stop after a given layer, and the
 * replacement of one linear's fp32 weights (sequential pruning feeds later layers the outputs
 * of already-pruned ones). Only valid on a backend made by sd_backend_cpu_init. */
#ifndef SD_CPU_CAPTURE_H
#define SD_CPU_CAPTURE_H

#include <stdint.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The four distinct linear inputs of a decoder layer. */
typedef enum sd_capture_site {
    SD_CAP_QKV = 0, /* attention-norm output -> q, k, v:  [T, hidden] */
    SD_CAP_O,       /* attention output -> o:             [T, n_heads*head_dim] */
    SD_CAP_GATEUP,  /* mlp-norm output -> gate, up:       [T, hidden] */
    SD_CAP_DOWN,    /* SwiGLU output -> down:             [T, intermediate] */
    SD_CAP_N
} sd_capture_site;

/* Called synchronously inside forward with the T rows of the batch (row t = token t in batch
 * order, x + t*cols, cols = the linear's input width), their positions pos[T] and sequence
 * indices seq[T] (into the forward's seqs array). A negative return aborts the forward with
 * that code (e.g. SD_ECANCEL). */
typedef int (*sd_capture_fn)(void *ud, int32_t layer, sd_capture_site site, const float *x, int64_t cols,
                             int T, const int32_t *pos, const int32_t *seq);

/* Installs (fn != NULL) or removes the hook. stop_after_layer >= 0 makes forward return 0 right
 * after that layer, leaving the logits unwritten (replays that only need early layers' inputs);
 * -1 runs the whole model. */
void sd_backend_cpu_set_capture(sd_backend *b, sd_capture_fn fn, void *ud, int32_t stop_after_layer);

/* Linear ids within a layer, in the order q, k, v, o, gate, up, down. */
enum { SD_LIN_Q = 0, SD_LIN_K, SD_LIN_V, SD_LIN_O, SD_LIN_GATE, SD_LIN_UP, SD_LIN_DOWN, SD_LIN_N };

/* Copies w (fp32 [rows, cols] of that linear) over the backend's weights of linear `which` of
 * `layer`; the linear then always runs as a dense matmul. SD_EINVAL on bad ids. */
int sd_backend_cpu_set_linear(sd_backend *b, int32_t layer, int which, const float *w, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
