/* model_config: the architecture of a checkpoint, parsed from its Hugging Face config.json. */
#ifndef SD_MODEL_CONFIG_H
#define SD_MODEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sd_arch {
    SD_ARCH_LLAMA = 1, /* LlamaForCausalLM (Llama 2/3/3.1/3.2/3.3) */
    SD_ARCH_MISTRAL,   /* MistralForCausalLM */
    SD_ARCH_QWEN2,     /* Qwen2ForCausalLM: q/k/v bias */
    SD_ARCH_QWEN3,     /* Qwen3ForCausalLM: per-head RMSNorm on q and k */
} sd_arch;

typedef enum sd_rope_kind {
    SD_ROPE_DEFAULT = 0,
    SD_ROPE_LLAMA3, /* rope_scaling.rope_type == "llama3" */
} sd_rope_kind;

#define SD_MAX_EOS 8

typedef struct sd_model_config {
    sd_arch arch;
    char arch_name[64];     /* as in config.json "architectures"[0] */
    int32_t hidden;         /* hidden_size */
    int32_t n_layers;       /* num_hidden_layers */
    int32_t n_heads;        /* num_attention_heads */
    int32_t n_kv_heads;     /* num_key_value_heads (defaults to n_heads) */
    int32_t head_dim;       /* head_dim (defaults to hidden / n_heads) */
    int32_t intermediate;   /* intermediate_size */
    int32_t vocab;          /* vocab_size */
    int32_t max_pos;        /* max_position_embeddings */
    float rms_eps;          /* rms_norm_eps */
    double rope_theta;      /* rope_theta or rope_parameters.rope_theta (default 10000) */
    sd_rope_kind rope_kind; /* from rope_scaling / rope_parameters */
    double rope_factor;     /* llama3: factor */
    double rope_low_freq_factor, rope_high_freq_factor;
    int32_t rope_orig_max_pos;   /* llama3: original_max_position_embeddings */
    int tie_embeddings;          /* tie_word_embeddings (default 0; Qwen2 small models set it) */
    int qkv_bias;                /* attention_bias, or implied by Qwen2 */
    int qk_norm;                 /* Qwen3 */
    int32_t sliding_window;      /* attention window (Mistral sliding_window, Qwen's when use_sliding_window
                                    is true), 0 if none: a query at p attends keys k, p - window < k <= p */
    int32_t window_layer0;       /* layers >= this one use the window (Qwen: max_window_layers or
                                    layer_types; 0 otherwise); 0 when sliding_window is 0 */
    int32_t bos_id;              /* -1 if absent */
    int32_t eos_ids[SD_MAX_EOS]; /* eos_token_id may be an int or a list */
    int n_eos;
} sd_model_config;

/* Layer `layer`'s attention window (0: full causal attention), as transformers applies it. */
static inline int32_t sd_model_config_window(const sd_model_config *c, int32_t layer)
{
    return layer >= c->window_layer0 ? c->sliding_window : 0;
}

/* Parses config.json at `path`. Unknown architectures, missing or out-of-range required
 * fields and malformed JSON are SD_EFORMAT/SD_ENOTSUP with a message naming the key. */
int sd_model_config_load(sd_model_config *ret, const char *path, sd_diag *d);

/* The same from a JSON text in memory (`name` is used in messages). */
int sd_model_config_parse(sd_model_config *ret, const char *json, size_t len, const char *name, sd_diag *d);

/* Internal to the loader (config, checkpoint, model): reads a whole file into a malloc'd,
 * NUL-terminated buffer; files over `max` bytes are SD_EFORMAT. */
/* Internal to the loader files: "dir/name" malloc'd, NULL when out of memory. */
char *sd__path_join(const char *dir, const char *name);
int sd__file_read(const char *path, size_t max, char **ret, size_t *ret_len, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
