/* warmup: the forward passes a GPU backend runs once before it serves, so that no request
 * waits for first-use work. The CUDA backend tunes each linear's kernel the first time it sees
 * a (shape, batch bucket), and captures (and refines) the decode graph of a batch bucket the
 * first time a step of that many sequences runs: hundreds of milliseconds on an 8B model, paid
 * by whichever requests are in flight when the server first reaches that batch size or prompt
 * length (results/2026-12-04-s22). The warm-up walks every such bucket the engine can send
 * with dummy tokens, in scratch KV blocks nothing else holds yet.
 *
 * Threading: call before the engine owns the backend (one thread uses a backend at a time). */
#ifndef SD_WARMUP_H
#define SD_WARMUP_H

#include <stdint.h>

#include "backend.h"
#include "diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_warmup_opts {
    int max_seqs;          /* decode batch sizes 1..max_seqs (the engine's limit) */
    int max_batch_tokens;  /* tokens of one step at most (the engine's limit) */
    int32_t max_len;       /* positions a sequence may reach (the engine's max_model_len) */
    int (*stop)(void *ud); /* optional: checked between steps; non-zero ends the warm-up with SD_ECANCEL */
    void *stop_ud;
    int spec_tokens, spec_max_seqs; /* speculative decoding (engine/spec.h): its steps of 1..spec_max_seqs
                                       sequences of 1 + spec_tokens tokens; 0: off */
} sd_warmup_opts;

/* One warm-up step: n_seqs sequences from position 0, the first with first_tokens tokens and
 * the others with one each (a decode step when first_tokens is 1); or, with each_tokens > 1,
 * every sequence with each_tokens tokens and a logits row for each (a speculative step). */
typedef struct sd_warmup_step {
    int n_seqs, first_tokens, each_tokens;
} sd_warmup_step;

/* Upper bound on the steps of a plan. */
#define SD_WARMUP_MAX_STEPS 96

/* The steps the warm-up runs, in order, into steps[SD_WARMUP_MAX_STEPS]; returns their count.
 * Every step fits the limits of o and the pool (kv_blocks blocks of block_size tokens; a step
 * uses one block per sequence, and the first sequence's blocks): decode steps of 1, 2, 4, ...
 * sequences up to max_seqs (and max_seqs itself), one sequence of each tuned row count 2..256
 * (sd_nm_tune_bucket's buckets: prefill chunks), steps of each tuned bucket up to 64 of sequences
 * with one of them prefilling (logits rows of mixed steps), one step of max_batch_tokens
 * tokens (the largest prefill chunk, through cuBLAS), then, with row_step > 0 and while the plan has
 * room, one sequence of each multiple of row_step between 256 and that (the backend's
 * gemm_row_step: cuSPARSELt's plans, engine/cuda_cslt.h), and with spec_tokens the speculative
 * steps of 1, 2, 4, ... sequences up to spec_max_seqs (graphs of their own shape). No step twice. */
int sd_warmup_plan(const sd_warmup_opts *o, int32_t kv_blocks, int block_size, int row_step,
                   sd_warmup_step *steps);

typedef struct sd_warmup_stats {
    int steps;      /* forward passes run */
    double seconds; /* wall time, tuning and graph capture included */
} sd_warmup_stats;

/* Runs the plan on b (its sampler too, where it has one: greedy and sampled rows, with
 * logprobs). Writes only KV blocks that no sequence holds before serving starts. A step that
 * fails fails the warm-up: the configured limits then cannot be served (GPU memory, say), and
 * the error names the step. */
int sd_backend_warmup(sd_backend *b, const sd_warmup_opts *o, sd_warmup_stats *st, sd_diag *d);

/* Whether b does first-use work that the warm-up pays in advance (the GPU backends); the CPU
 * backend has none. */
int sd_backend_wants_warmup(const sd_backend *b);

#ifdef __cplusplus
}
#endif

#endif
