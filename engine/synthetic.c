/* synthetic: sparsity pattern names and decode-step byte counts for synthetic-weight runs. */
#include "engine/synthetic.h"

#include <stdio.h>
#include <string.h>

int sd_synth_pattern_parse(const char *s, int *ret_n, int *ret_m)
{
    int n, m, used = 0;
    if (!s)
        return SD_EINVAL;
    if (!strcmp(s, "dense")) {
        *ret_n = *ret_m = 0;
        return 0;
    }
    if (sscanf(s, "%d:%d%n", &n, &m, &used) != 2 || s[used] || m <= 0 || 2 * n != m || 32 % m)
        return SD_EINVAL;
    *ret_n = n;
    *ret_m = m;
    return 0;
}

/* Bytes of one [rows, cols] linear stored dense (bf16) or as a 50% bitmask. */
static size_t linear_bytes(size_t rows, size_t cols, int m)
{
    return m ? rows * cols + rows * cols / 8 : rows * cols * 2;
}

size_t sd_synth_step_weight_bytes(const sd_model_config *cfg, int n, int m)
{
    (void)n;
    size_t H = (size_t)cfg->hidden, hd = (size_t)cfg->head_dim, I = (size_t)cfg->intermediate;
    size_t qkv = ((size_t)cfg->n_heads + 2 * (size_t)cfg->n_kv_heads) * hd;
    size_t per_layer = linear_bytes(qkv, H, m) + linear_bytes(H, (size_t)cfg->n_heads * hd, m) +
                       linear_bytes(2 * I, H, m) + linear_bytes(H, I, m) + 2 * H * 4;
    if (cfg->qk_norm)
        per_layer += 2 * hd * 4;
    return per_layer * (size_t)cfg->n_layers + (size_t)cfg->vocab * H * 2 + H * 4;
}

size_t sd_synth_kv_bytes_per_token(const sd_model_config *cfg)
{
    return (size_t)cfg->n_layers * (size_t)cfg->n_kv_heads * (size_t)cfg->head_dim * 2 * 2;
}
