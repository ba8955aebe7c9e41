/* model: a loaded model directory — checkpoint, config, tokenizer, chat template and
 * generation defaults — plus typed views of every weight a backend needs. */
#ifndef SD_MODEL_H
#define SD_MODEL_H

#include "checkpoint.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_tokenizer sd_tokenizer;
typedef struct sd_model sd_model;

typedef enum sd_linear_kind {
    SD_LINEAR_DENSE = 0, /* w: [rows, cols] of dtype */
    SD_LINEAR_BITMASK,   /* nm_values: bf16 [rows, cols/2], nm_mask: u32 [rows, cols/32] */
} sd_linear_kind;

typedef struct sd_linear {
    sd_linear_kind kind;
    int64_t rows, cols;
    sd_dtype dtype;         /* dense: element type of w */
    const void *w;          /* dense: [rows, cols] */
    const uint16_t *values; /* bitmask: bf16 [rows, cols/2] */
    const uint32_t *mask;   /* bitmask: [rows, cols/32] */
    int nm_n, nm_m;         /* bitmask pattern, 0/0 for unstructured 50% */
    const void *bias;       /* [rows] or NULL; any non-NULL bias (q/k/v, Llama o) is added */
    sd_dtype bias_dtype;
    const char *name; /* "model.layers.3.self_attn.q_proj" */
} sd_linear;

typedef struct sd_vec {
    const void *data; /* [n] or NULL */
    int64_t n;
    sd_dtype dtype;
} sd_vec;

typedef struct sd_layer_weights {
    sd_vec attn_norm, mlp_norm; /* [hidden] */
    sd_vec q_norm, k_norm;      /* Qwen3: [head_dim], else NULL data */
    sd_linear q, k, v, o;       /* q: [n_heads*head_dim, hidden] ... o: [hidden, n_heads*head_dim] */
    sd_linear gate, up, down;   /* gate/up: [intermediate, hidden], down: [hidden, intermediate] */
} sd_layer_weights;

typedef struct sd_model_weights {
    sd_vec embed;             /* data: [vocab, hidden], n = vocab*hidden */
    sd_vec final_norm;        /* [hidden] */
    sd_linear lm_head;        /* [vocab, hidden]; the embedding when tied */
    sd_layer_weights *layers; /* [n_layers] */
} sd_model_weights;

/* Opens a model directory: checkpoint (dense or bitmask), tokenizer.json (+ _config),
 * generation_config.json. Every tensor the architecture needs is checked for presence,
 * dtype and shape here, so backends can trust the views. */
int sd_model_open(sd_model **ret, const char *dir, sd_diag *d);
void sd_model_free(sd_model *m);

const sd_model_config *sd_model_cfg(const sd_model *m);
const sd_model_weights *sd_model_w(const sd_model *m);
const sd_ckpt *sd_model_ckpt(const sd_model *m);
/* NULL if the directory has no tokenizer.json. */
const sd_tokenizer *sd_model_tokenizer(const sd_model *m);
/* The chat_template string of tokenizer_config.json, or NULL. */
const char *sd_model_chat_template(const sd_model *m);
/* "dense", "2:4", "8:16", "unstructured", or "mixed". */
const char *sd_model_sparsity(const sd_model *m);
/* Directory name used as the model id in the API. */
const char *sd_model_name(const sd_model *m);

/* The token ids that end generation: eos_token_id of generation_config.json (or of
 * config.json when that file has none), plus the tokenizer's eos token, deduplicated.
 * Returns the count (0..SD_MAX_EOS+1); *ret_ids stays valid while the model lives. */
int sd_model_eos_ids(const sd_model *m, const int32_t **ret_ids);

/* Sampling defaults from generation_config.json; fields absent there are < 0. */
typedef struct sd_gen_defaults {
    double temperature, top_p, min_p, repetition_penalty;
    int32_t top_k;
    int do_sample; /* -1 absent, 0 greedy, 1 sample */
} sd_gen_defaults;
const sd_gen_defaults *sd_model_gen_defaults(const sd_model *m);

#ifdef __cplusplus
}
#endif
#endif
