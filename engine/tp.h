/* tp: the tensor-parallel CUDA backend — one model sharded over N GPUs (engine/shard.h), one
 * NCCL communicator per rank, all-reduce after o_proj and down_proj, logits gathered for
 * sampling. Two modes:
 *   - one process, one thread per GPU (devices 0..N-1): sd_tp_backend_init with rank = -1;
 *   - one process per GPU: rank 0 listens on `addr` and hands out the NCCL id
 *     (engine/tp_boot.h), ranks 1..N-1 join; rank 0's backend drives the steps (its step plan
 *     goes to the others over the bootstrap connections), the others run sd_tp_follow.
 * Every wait on the group has a deadline; an NCCL error or a dead rank aborts the
 * communicators (ncclCommAbort) and the backend then fails every call with SD_ENCCL.
 * NCCL_NVLS_ENABLE=0 is set (unless already set) before the first communicator is made.
 *
 * Threading: like every backend, one caller thread at a time. Builds without CUDA return
 * SD_ENOTSUP from every constructor (engine/tp_stub.c). */
#ifndef SD_TP_H
#define SD_TP_H

#include <stdint.h>

#include "backend.h"
#include "diag.h"
#include "model_config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_tp_opts {
    int world;        /* ranks (GPUs) in the group, >= 1 */
    int rank;         /* -1: this process runs every rank, one thread each; else its rank */
    const char *addr; /* multi-process: rank 0's bootstrap address "host:port" */
    int timeout_ms;   /* every wait on the group: bootstrap, NCCL init, a step (0: 120000) */
} sd_tp_opts;

void sd_tp_opts_default(sd_tp_opts *o);

/* The backend over the model's slices. In multi-process mode the device is bo->device and
 * the call returns once the whole group is up (or failed: every rank gets an error). */
int sd_tp_backend_init(sd_backend **ret, const sd_model *m, const sd_backend_opts *bo, const sd_tp_opts *o,
                       sd_diag *d);

/* The same over random weights of cfg's shapes ("dense" or "N:M"), for benchmarks. */
int sd_tp_backend_init_synthetic(sd_backend **ret, const sd_model_config *cfg, const char *pattern,
                                 uint64_t seed, const sd_backend_opts *bo, const sd_tp_opts *o, sd_diag *d);

/* Multi-process ranks 1..N-1: runs the steps rank 0 sends until rank 0 frees its backend
 * (returns 0) or the group fails (an error; rank 0 gone counts). */
int sd_tp_follow(sd_backend *b, sd_diag *d);

/* True when b is a tensor-parallel backend. */
int sd_tp_is_tp(const sd_backend *b);

/* True when b is a tensor-parallel backend whose group has failed (a step failed with a
 * group error, or — rank 0 of the multi-process mode — a follower's connection closed, even
 * while idle): every later step fails, so the owner should stop (and be restarted). Any
 * thread, never blocks. 0 for other backends. */
int sd_tp_failed(const sd_backend *b);

/* The CUDA backend of the first rank this process runs (for per-rank numbers such as
 * sd_backend_cuda_step_weight_bytes); NULL when b is not a TP backend. Ranks hold equal
 * shares, so its numbers are each GPU's. */
const sd_backend *sd_tp_local_rank(const sd_backend *b);

#ifdef __cplusplus
}
#endif
#endif
