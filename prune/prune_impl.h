/* prune_impl: internals shared by prune.c (the job) and prune_layer.c (capture and solving of
 * one decoder layer). */
#ifndef SD_PRUNE_IMPL_H
#define SD_PRUNE_IMPL_H

#include <time.h>

#include "engine/backend.h"
#include "engine/cpu_capture.h"
#include "engine/cpu_pool.h"
#include "engine/cuda_capture.h"
#include "engine/model.h"
#include "prune/calib.h"
#include "prune/cancel.h"
#include "prune/ckptw.h"
#include "prune/hess.h"
#include <pthread.h>

#include "prune/prune.h"
#include "prune/prune_cuda.h"

/* The source checkpoint's SHA-256 for the provenance, computed on a thread of its own while the
 * job runs (16 GB take over a minute to hash; the solve hides it). */
typedef struct sd__hash_job {
    pthread_t th;
    int started;
    volatile int stop; /* the job ends without writing: give up */
    const char *dir;
    const volatile int *cancel;
    int rc;
    char hex[65];
    sd_diag d;
} sd__hash_job;

typedef struct sd__job {
    const sd_prune_spec *spec;
    sd_prune_progress_fn progress;
    void *ud;
    const volatile int *cancel;
    sd_diag *d;
    sd_model *model;
    const sd_model_config *cfg;
    sd_backend *backend;
    sd_cpu_pool *pool;
    int nm_n, nm_m;
    char pattern[32];
    sd_calib_set calib;
    sd_hess *(*hess)[SD_CAP_N]; /* [n_layers][site], NULL where not collected */
    sd_ckptw *w;                /* the output, started before solving: each pruned linear is
                                   written in place as it is packed, not held to the end */
    const int32_t *batch_ids;   /* capture: set indices of the current forward's sequences */
    struct timespec t0;
    double frac_lo, frac_hi; /* the current phase's share of the progress bar */
    double total_loss;
    int32_t linears;
    int live;          /* one-shot decode: Hessians were filled during generation, no replay */
    int64_t rows;      /* calibration rows that entered the Hessians */
    sd_prune_gpu *gpu; /* SparseGPT on the GPU (spec->device == CUDA), else NULL */
    int gpu_site;      /* layer * SD_CAP_N + site whose factor the GPU holds, or -1 */
    int cuda_cap;      /* the backend is CUDA: generation and capture run on the GPU, rows go
                          device to device into the GPU Hessians (SparseGPT on CUDA) */
    sd__hash_job hash; /* the source checkpoint's hash, in the background */
} sd__job;

/* Capture state: the layers to collect and the prompt length of each sequence of the forward
 * in flight (replay: from the set; live generation: from the generator). */
#define SD__CAP_MAX_SEQS SD_CALIB_REPLAY_MAX_SEQS /* >= generation slots (256) too */
typedef struct sd__cap {
    sd__job *j;
    int32_t lo, hi;
    int32_t prefill[SD__CAP_MAX_SEQS];
} sd__cap;

/* The generator's begin callback for live capture (one-shot decode). */
void sd__prune_cap_begin_live(void *ud, const int32_t *prefill_len, int n);

/* Installs the capture hook with state c on the job's backend (CPU, or CUDA when j->cuda_cap),
 * the forward stopping after layer stop (-1: none); c == NULL removes it. */
int sd__prune_cap_install(sd__job *j, sd__cap *c, int32_t stop);

/* Progress report at fraction frac_lo + f * (frac_hi - frac_lo) of the job. */
void sd__prune_report(sd__job *j, sd_prune_phase ph, int32_t layer, int64_t tokens, int64_t target, double f,
                      const char *detail);

/* Drops the pages of [p, p + n) of the read-only checkpoint mapping from this process (they come
 * back from the file if read again): a large prune reads every byte once, and without this the
 * whole checkpoint would count as resident by the end. */
void sd__prune_drop_pages(const void *p, size_t n);

/* Replays the calibration set with the capture hook feeding hess[layer][site] for layers in
 * [lo, hi] (one-shot: all layers; sequential: one), stopping the forward after layer hi. */
int sd__prune_capture(sd__job *j, int32_t lo, int32_t hi);

/* Prunes the selected linears of `layer` with its Hessians (freed afterwards), storing values
 * and masks in j->out; sequential mode also loads the pruned weights into the backend. */
int sd__prune_layer(sd__job *j, int32_t layer);

#endif
