/* cuda_backend: the extra entry points of the CUDA backend — a constructor over synthetic
 * weights (benchmarks at real shapes without a checkpoint), test hooks, and the numbers
 * the decode benchmark needs. sd_backend_cuda_init itself is declared in backend.h. */
#ifndef SD_CUDA_BACKEND_H
#define SD_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/model_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Also in backend.h under SD_HAVE_CUDA (which nvcc builds do not define). Its forward
 * accepts logits == NULL: the step runs and its logits stay on the GPU (benchmarks). */
int sd_backend_cuda_init(sd_backend **ret, const sd_model *m, const sd_backend_opts *o, sd_diag *d);

/* Sequences one forward call of the CUDA backend takes at most (the daemon's max_seqs with it). */
#define SD_CUDA_MAX_SEQS 256

/* Number of usable CUDA devices; 0 when there is no driver or no GPU (never an error). */
int sd_cuda_device_count(void);

/* A CUDA backend over random weights of cfg's shapes generated on the GPU. pattern:
 * "dense" or "N:M" with 2N == M and M | 32 ("2:4", "8:16" ...): every linear of every layer
 * is then a bitmask with random valid N:M masks; embeddings, lm_head and norms stay dense. */
int sd_backend_cuda_init_synthetic(sd_backend **ret, const sd_model_config *cfg, const char *pattern,
                                   uint64_t seed, const sd_backend_opts *o, sd_diag *d);

/* How many 2:4 linears have a cuSPARSELt copy (on where they fit, SD_CUSPARSELT; cuda_cslt.h), and their
 * device bytes. */
int sd_backend_cuda_cslt(const sd_backend *b, size_t *bytes);
/* How many cuSPARSELt GEMMs have been captured into decode graphs (for tests). */
int64_t sd_backend_cuda_cslt_captured(const sd_backend *b);

/* CUDA graphs for all-decode steps (on by default); off runs every step eagerly. */
void sd_backend_cuda_set_graphs(sd_backend *b, int enable);
/* How many decode steps were replayed from a captured graph (for tests and benchmarks). */
int64_t sd_backend_cuda_graph_replays(const sd_backend *b);
/* Benchmarks: with on, each replay's host time in cudaGraphLaunch and the graph's time on the GPU
 * (events before and after the launch, so it includes any wait of the GPU for the launch) are
 * summed (off by default, so the serving step does no timing). sd_backend_cuda_launch_times
 * returns the sums: microseconds on the host, milliseconds on the GPU. */
void sd_backend_cuda_time_launches(sd_backend *b, int on);
int sd_backend_cuda_launch_times(sd_backend *b, double *host_us, double *gpu_ms, sd_diag *d);
/* The decode graph of n_seqs sequences' bucket replayed back to back (the fastest of three rounds
 * of ten, after two warm-ups; the refine pass's timing), in ms a replay: the step's GPU time
 * without the host's part of a step (meta upload, launch, synchronisation). It repeats the last
 * step (same inputs, same KV rows). SD_ENOTFOUND before that bucket's first capture or under
 * tensor parallelism. For benchmarks. */
int sd_backend_cuda_graph_replay_ms(sd_backend *b, int n_seqs, double *ret_ms, sd_diag *d);

/* The SwiGLU in the gate_up kernel's epilogue: mode 0 never, 1 where the tuned kernel takes it
 * and that measured faster (the default; SD_SWIGLU_FUSE at creation sets the mode), 2 wherever the
 * tuned kernel takes it; and how many gate_up launches took it so far (a graph capture counts
 * once, its replays not): for tests. Any mode gives the same bits. */
void sd_backend_cuda_set_swiglu_fuse(sd_backend *b, int mode);
int64_t sd_backend_cuda_swiglu_fused(const sd_backend *b);

/* How many linear problems the backend has timed at first use itself, not counting those a
 * tuning cache (sd_backend_opts.tune_cache) supplied: for tests. */
int sd_backend_cuda_tuned_here(const sd_backend *b);
/* How many runner-up kernel configs the refine pass (on unless SD_TUNE_REFINE=0) has tried inside decode
 * steps, how many it kept, and (failed, may be NULL) whether it failed and was turned off: for tests. */
void sd_backend_cuda_refined(const sd_backend *b, int *tried, int *kept, int *failed);

/* Logits rows sampled on the GPU so far (the `sample` operation; for tests). */
int64_t sd_backend_cuda_sampled_rows(const sd_backend *b);

/* Bytes of weights one decode step reads (every linear, lm_head, norms; embedding rows not
 * counted) and the KV bytes per cached token (all layers, K and V). */
size_t sd_backend_cuda_step_weight_bytes(const sd_backend *b);
size_t sd_backend_cuda_kv_bytes_per_token(const sd_backend *b);

/* Read-only bandwidth of `device` in GB/s: median of timed passes of a streaming kernel over
 * `bytes` of device memory (the ceiling a memory-bound decode step is compared with). */
int sd_cuda_read_bandwidth(int device, size_t bytes, double *ret_gbps, sd_diag *d);
/* "NVIDIA H200" etc.; "unknown" on failure. */
void sd_cuda_device_name(int device, char *buf, size_t len);
/* The device's PCI bus id ("0000:19:00.0", NVML's key for it); SD_ENODEV if there is none. */
int sd_cuda_device_pci_id(int device, char *buf, int len);

#ifdef __cplusplus
}
#endif
#endif
