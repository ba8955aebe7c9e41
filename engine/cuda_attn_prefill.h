/* cuda_attn_prefill: a C entry to the CUDA backend's attention kernels for tests (the launchers
 * themselves are declared in engine/cuda_impl.cuh, which C cannot include). */
#ifndef SD_CUDA_ATTN_PREFILL_H
#define SD_CUDA_ATTN_PREFILL_H

#include <stdint.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs of at least this many tokens of one sequence take the tiled kernel in the backend. */
#define SD_ATTN_PREFILL_MIN_RUN 16

enum {
    SD_ATTN_PATH_SPLIT = 0, /* sd__cu_attention: the decode kernel, key range split (cuda_attn_decode.cu) */
    SD_ATTN_PATH_TILED = 1, /* sd__cu_attn_prefill: all T tokens are one sequence's */
    SD_ATTN_PATH_STEP = 2   /* sd__cu_attn_step: runs of one sequence each (run_len) */
};

/* Device pointers except run_len; the same meaning as sd_cu_attn_args (engine/cuda_impl.cuh). */
typedef struct sd_cu_attn_test {
    const float *q;                    /* [T, n_heads*head_dim], RoPE applied */
    const uint16_t *k_cache, *v_cache; /* bf16 bits, [n_blocks, n_kv, block_size, head_dim] */
    const int32_t *tok_pos, *tok_seq;  /* [T] */
    const int32_t *block_tables;       /* [n_seqs, max_bt] */
    int max_bt, block_size;
    int T, n_heads, n_kv, head_dim;
    int n_splits;              /* split path: splits of each query's key range */
    float *part_acc, *part_ml; /* [T, n_heads, n_splits, head_dim] / [.., 2] */
    uint16_t *out;             /* bf16 bits, [T, n_heads*head_dim] */
    const int *run_len;        /* host, [n_runs]: tokens of each sequence in order */
    int n_runs, min_run;       /* step path: runs of >= min_run tokens go tiled */
    int *counters;             /* [T, n_heads] ints, zeroed before the first run */
    int min_chunk;             /* split path: keys per split at least this (0: none) */
    int window;                /* sliding window: keys (pos - window, pos]; 0: [0, pos] */
} sd_cu_attn_test;

/* The backend's key-range splits for T query tokens on a device with `sms` SMs. */
int sd__cu_attn_splits(int sms, int T, int n_heads, int n_kv);

/* The backend's min_run: SD_ATTN_PREFILL=1 gives SD_ATTN_PREFILL_MIN_RUN, SD_ATTN_PREFILL=0 gives
 * 0 (the split kernel only); unset or empty: the built-in default (see cuda_attn_prefill.cu). */
int sd_cu_attn_prefill_min_run(void);

/* Launches path (SD_ATTN_PATH_*) on the default stream; does not wait. */
int sd_cu_attn_test_run(int path, const sd_cu_attn_test *t, sd_diag *d);

#ifdef __cplusplus
}
#endif

#endif
