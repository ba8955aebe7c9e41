/* tp_impl: what a CUDA backend rank needs from the tensor-parallel runtime — its place in the
 * group (shard plan, NCCL communicator) and collectives that never hang: every NCCL call runs
 * on a non-blocking communicator and every wait has a deadline, after which the communicator
 * is aborted (ncclCommAbort) and the step fails with SD_ENCCL. Not a public header. */
#ifndef SD_TP_IMPL_CUH
#define SD_TP_IMPL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "engine/backend.h"
#include "engine/diag.h"
#include "engine/shard.h"
#include "engine/tp_bg.h"

/* One rank's membership; comm == NULL means a single GPU (every collective is a no-op). */
typedef struct sd_tp_rank {
    sd_shard_plan plan;
    ncclComm_t comm;
    int timeout_ms; /* for every wait on the group */
    int aborted;    /* the communicator was aborted: every later call fails at once */
    /* multi-process mode: the control connections to the peers ([n_watch], -1 entries
     * skipped; owned by engine/tp.cu). Every wait also watches them, so that a peer process
     * that died ends the wait at once instead of at the deadline. NULL in the threads mode. */
    const int *watch_fds;
    int n_watch;
    int watch_unread_too; /* sd_tp_chan_closed's: 1 on rank 0 (a follower's close is its death) */
    /* runs ncclCommAbort on its own thread (engine/tp_bg.h): with CUDA graphs that captured
     * collectives still alive the abort does not return until they are destroyed (NCCL >=
     * 2.26), so a failing step waits for it only SD_TP_ABORT_WAIT_MS. Owned by engine/tp.cu
     * and shared by every copy of the rank's sd_tp_rank (one abort per communicator). NULL:
     * the abort runs inline, as before (SD_TP_ABORT_INLINE=1). */
    sd_tp_bg *aborter;
} sd_tp_rank;

/* How long a failing step waits for its ncclCommAbort to return before it fails anyway (the
 * abort flags are set at once: the rank's pending collectives end; the rest of the abort
 * finishes when the backend, and with it its graphs, is freed). */
#define SD_TP_ABORT_WAIT_MS 2000

/* Waits for a non-blocking communicator's pending call (ncclInProgress) to finish. Like every
 * wait below: an NCCL error, a closed peer connection (watch_fds) or the deadline aborts the
 * communicator and returns SD_ENCCL. */
int sd__tp_wait_comm(sd_tp_rank *t, const char *what, sd_diag *d);
/* buf [n] fp32 summed over the ranks, in place, on stream st (capturable in a CUDA graph). */
int sd__tp_allreduce_sum(sd_tp_rank *t, float *buf, size_t n, cudaStream_t st, sd_diag *d);
/* out [ranks, n] = every rank's in [n], on stream st (capturable). */
int sd__tp_allgather(sd_tp_rank *t, const float *in, float *out, size_t n, cudaStream_t st, sd_diag *d);
/* dev [n] int32 of rank 0 copied to every rank, on stream st. */
int sd__tp_bcast_i32(sd_tp_rank *t, int32_t *dev, size_t n, cudaStream_t st, sd_diag *d);
/* Waits for stream st to drain while watching the communicator: an asynchronous NCCL error or
 * the deadline aborts the communicator and returns SD_ENCCL. Plain cudaStreamSynchronize when
 * comm is NULL. */
int sd__tp_sync(sd_tp_rank *t, cudaStream_t st, sd_diag *d);
/* Aborts the communicator (idempotent; through t->aborter when set, waiting at most
 * SD_TP_ABORT_WAIT_MS): pending collectives of the peers fail instead of waiting for this
 * rank. */
void sd__tp_abort(sd_tp_rank *t);

/* engine/tp_embed.cu: x [T, hidden] fp32 = the embedding rows of tokens [T] (device), where
 * this rank's table embed [vocab_pad, hidden] bf16 holds vocabulary rows [vocab0, vocab0 +
 * n_vocab) of the plan: a masked lookup, then an all-reduce over the ranks (capturable). */
int sd__tp_embed(sd_tp_rank *t, const __nv_bfloat16 *embed, const int32_t *tokens, float *x, int T,
                 int hidden, cudaStream_t st, sd_diag *d);

/* engine/cuda_backend.cu: the CUDA backend of one rank, over the rank's slices of m, or (m
 * NULL) over synthetic weights of synth_cfg's shapes in `pattern`. Its forward runs the step
 * with all-reduces after o and down and an all-gather of the logits; only the rank given a
 * logits buffer copies them out ([rows, full vocab]). The caller owns tp->comm. */
int sd__cu_backend_init_rank(sd_backend **ret, const sd_model *m, const sd_model_config *synth_cfg,
                             const char *pattern, uint64_t seed, const sd_backend_opts *o,
                             const sd_tp_rank *tp, sd_diag *d);
/* Aborts the rank's communicator (a peer failed): its pending and later collectives fail. */
void sd__cu_backend_abort(sd_backend *b);
/* Whether the rank's communicator was aborted (then it must not be finalized or destroyed). */
int sd__cu_backend_aborted(const sd_backend *b);

#endif
