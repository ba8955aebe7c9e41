/* cuda_attn_fused: the switch for the CUDA backend's fused q/k/v post-processing + decode
 * attention kernel (sd__cu_attn_fused, engine/cuda_attn_decode.cu), and a C entry that runs it or
 * the two kernels it replaces, for tests (engine/cuda_impl.cuh cannot be included from C). */
#ifndef SD_CUDA_ATTN_FUSED_H
#define SD_CUDA_ATTN_FUSED_H

#include <stdint.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 unless SD_ATTN_FUSED=0: the backend reads it once when created. */
int sd_cu_attn_fused_enabled(void);
/* How decode attention merges its key splits: through global memory (the last block to finish
 * reads the others' partials), or in a thread-block cluster's distributed shared memory (compute
 * capability 9.0; at most 8 splits). PAYS: in a cluster when the grid fits two blocks per SM,
 * where it measured faster (kernels/NOTES.md v17: Llama-3.1-8B batch 1 and 4 ~1% faster; larger
 * grids up to 10% slower). */
enum { SD_ATTN_CLUSTER_NEVER = 0, SD_ATTN_CLUSTER_PAYS = 1, SD_ATTN_CLUSTER_ALWAYS = 2 };
/* SD_ATTN_CLUSTER=0 / 1 / 2 (default 1); the backend reads it once when created. */
int sd_cu_attn_cluster_mode(void);
/* 1 unless SD_ATTN_EARLY=0: in steps of 1-2 tokens the fused kernel's warps load their first tile
 * of K and V rows into registers before the PDL wait (every key but the token's own was written by
 * earlier steps), so that the tile's round trip overlaps the qkv projection's tail instead of
 * following the q/k/v post-processing; 0: an L2 prefetch of the same rows. Measured on
 * Llama-3.1-8B (kernels/NOTES.md v18): batch 1 ~1% faster, batch 2 of 8:16 3%. */
int sd_cu_attn_early(void);

/* One decode step of single-token sequences (token t is sequence tok_seq[t]'s only one, at
 * position tok_pos[t]). Device pointers; the same meaning as sd_cu_qkv_args / sd_cu_attn_args. */
typedef struct sd_cu_fused_test {
    const float *qkv;             /* [T, (n_heads + 2*n_kv)*head_dim] the qkv linear's output */
    const float *bias;            /* [(n_heads + 2*n_kv)*head_dim] or NULL */
    const float *q_norm, *k_norm; /* [head_dim] or NULL */
    const float *inv_freq;        /* [head_dim/2] */
    float eps;
    const int32_t *tok_pos, *tok_seq; /* [T] */
    const int32_t *block_tables;      /* [n_seqs, max_bt] */
    int max_bt, block_size;
    int T, n_heads, n_kv, head_dim;
    uint16_t *k_cache, *v_cache; /* bf16 bits, [n_blocks, n_kv, block_size, head_dim]: keys read,
                                    and each token's own row written */
    uint16_t *k_write, *v_write; /* fused only: where the own rows go instead (same layout); NULL:
                                    k_cache, v_cache as the backend does */
    float *q;                    /* unfused only: [T, n_heads*head_dim] scratch */
    int n_splits;                /* sd__cu_attn_splits (engine/cuda_attn_prefill.h) */
    float *part_acc, *part_ml;   /* [T, n_heads, n_splits, head_dim] / [.., 2] */
    int *counters;               /* [T, n_heads] ints, zeroed before the first run */
    int min_chunk;               /* keys per split at least this (0: none) */
    uint16_t *out;               /* bf16 bits, [T, n_heads*head_dim] */
    int window;                  /* sliding window: keys (pos - window, pos]; 0: [0, pos] */
    int cluster;                 /* SD_ATTN_CLUSTER_NEVER or _ALWAYS: sd_cu_attn_args.cluster */
    int early;                   /* sd_cu_attn_args.early (fused only) */
} sd_cu_fused_test;

/* fused = 0: sd__cu_qkv_post into q, then sd__cu_attention (what the backend launches without
 * the fusion); 1: sd__cu_attn_fused. Default stream; does not wait. */
int sd_cu_attn_fused_test_run(int fused, const sd_cu_fused_test *t, sd_diag *d);

#ifdef __cplusplus
}
#endif

#endif
