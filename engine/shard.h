/* shard: the tensor-parallel sharding plan (which heads, rows, columns and vocabulary rows
 * each rank owns) and the slicing of every tensor kind from the one canonical checkpoint.
 * See docs/tensor-parallel.md for the layout and its constraints.
 *
 * Column-parallel (q, k, v, gate, up): rows split. Row-parallel (o, down): columns split on
 * 32-column mask-word boundaries, so a bitmask slice is itself a bitmask tensor. Embedding
 * and lm_head: vocabulary rows split (padded to equal counts). Norms: replicated.
 * GQA with fewer KV heads than ranks replicates KV heads as vLLM does. */
#ifndef SD_SHARD_H
#define SD_SHARD_H

#include <stdint.h>

#include "diag.h"
#include "model.h"
#include "model_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one rank of a tensor-parallel group owns. All counts are per rank. */
typedef struct sd_shard_plan {
    int ranks, rank;
    int32_t head_dim;
    int32_t heads_total, kv_total, inter_total, vocab_total; /* of the whole model */
    int32_t q_head0, n_q_heads;                              /* query heads [q_head0, q_head0 + n_q_heads) */
    int32_t kv_head0, n_kv_heads;                            /* KV heads [kv_head0, kv_head0 + n_kv_heads) */
    int32_t kv_replicas;     /* ranks holding each KV head (1 unless n_kv < ranks) */
    int32_t inter0, n_inter; /* intermediate rows of gate/up, columns of down */
    int32_t vocab0, n_vocab; /* real vocabulary rows [vocab0, vocab0 + n_vocab) */
    int32_t vocab_pad;       /* rows of every rank's embed/lm_head slice (>= n_vocab) */
} sd_shard_plan;

/* The plan of `rank` of `ranks` for cfg. SD_EINVAL naming the constraint when cfg cannot be
 * split: ranks < 1 or rank out of range, n_heads % ranks, n_kv_heads % ranks when
 * n_kv_heads >= ranks (else ranks % n_kv_heads), intermediate % ranks. */
int sd_shard_plan_init(sd_shard_plan *ret, const sd_model_config *cfg, int ranks, int rank, sd_diag *d);

/* The config one rank computes with: full's with n_heads, n_kv_heads, intermediate and vocab
 * replaced by the rank's counts (vocab by vocab_pad). hidden, head_dim and the rest stay. */
void sd_shard_local_config(const sd_shard_plan *p, const sd_model_config *full, sd_model_config *out);

/* Which role a tensor has, hence how it is split. */
typedef enum sd_shard_role {
    SD_SHARD_Q = 0,   /* rows: this rank's query heads */
    SD_SHARD_K,       /* rows: this rank's KV heads */
    SD_SHARD_V,       /* rows: this rank's KV heads */
    SD_SHARD_O,       /* columns: this rank's query heads; bias on rank 0 only */
    SD_SHARD_GATE,    /* rows: this rank's intermediate range */
    SD_SHARD_UP,      /* rows: this rank's intermediate range */
    SD_SHARD_DOWN,    /* columns: this rank's intermediate range; bias on rank 0 only */
    SD_SHARD_LM_HEAD, /* rows: this rank's vocabulary range, zero rows up to vocab_pad */
} sd_shard_role;

/* One rank's slice of a linear. `l` is a view into the buffers this struct owns (its name
 * points at the source's name). values_stride is the bf16 values per row: cols/2 for every
 * slice except a column slice of an unstructured tensor, whose rows keep a varying count:
 * there it is the largest count of the slice, each row zero-padded to it (so the slice's
 * `l` must not be read with the cols/2 layout: use sd_shard_linear_expand). */
typedef struct sd_shard_linear {
    sd_linear l;
    int64_t values_stride;
    void *w_own;     /* dense: [rows, cols] of l.dtype */
    uint16_t *v_own; /* bitmask: bf16 [rows, values_stride] */
    uint32_t *m_own; /* bitmask: u32 [rows, cols/32] */
    void *b_own;     /* [rows] of l.bias_dtype, or NULL */
} sd_shard_linear;

/* Slices src for the plan's rank in the given role. Fails (out untouched) with SD_EINVAL
 * naming the tensor when its shape does not match the plan, SD_ENOTSUP for a bitmask column
 * slice not on a 32-column boundary, SD_EFORMAT for a row whose mask keeps more than cols/2,
 * SD_ENOMEM. */
int sd_shard_linear_init(sd_shard_linear *out, const sd_shard_plan *p, sd_shard_role role,
                         const sd_linear *src, sd_diag *d);

/* The same for explicit ranges (the primitives under the roles): rows [r0, r0 + n) with
 * `pad` zero rows appended, or columns [c0, c0 + n). */
int sd_shard_linear_rows(sd_shard_linear *out, const sd_linear *src, int64_t r0, int64_t n, int64_t pad,
                         sd_diag *d);
int sd_shard_linear_cols(sd_shard_linear *out, const sd_linear *src, int64_t c0, int64_t n, sd_diag *d);
void sd_shard_linear_free(sd_shard_linear *s);

/* Expands a slice to dense bf16 [rows, cols] (dense slices converted from their dtype). */
int sd_shard_linear_expand(const sd_shard_linear *s, uint16_t *dense_out, sd_diag *d);

/* Vocabulary rows of the embedding ([vocab, hidden] in src) for the plan's rank:
 * *ret = malloc'd [vocab_pad, hidden] of src->dtype, zero rows past the real vocabulary. */
int sd_shard_embed(void **ret, const sd_shard_plan *p, const sd_vec *src, int32_t hidden, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
