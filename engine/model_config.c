/* model_config: parsing and validation of Hugging Face config.json (Llama, Mistral, Qwen2, Qwen3). */
#include "model_config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CFG_MAX_FILE (16u << 20) /* config.json beyond this is not a config */
#define CFG_MAX_DIM (1 << 24)    /* any single dimension above this is a lie */

static const struct {
    const char *arch, *model_type;
    sd_arch id;
} arch_table[] = {
    {"LlamaForCausalLM", "llama", SD_ARCH_LLAMA},
    {"MistralForCausalLM", "mistral", SD_ARCH_MISTRAL},
    {"Qwen2ForCausalLM", "qwen2", SD_ARCH_QWEN2},
    {"Qwen3ForCausalLM", "qwen3", SD_ARCH_QWEN3},
};
#define N_ARCH (sizeof arch_table / sizeof arch_table[0])

/* Reads an integer key. Absent or null: *ret = def and returns 0 when def_ok, else error. */
static int get_int(json_t *o, const char *key, int32_t lo, int32_t hi, int def_ok, int32_t def, int32_t *ret,
                   const char *name, sd_diag *d)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (!def_ok)
            return sd_diag_set(d, SD_EFORMAT, "%s: missing required key \"%s\"", name, key);
        *ret = def;
        return 0;
    }
    if (!json_is_integer(v))
        return sd_diag_set(d, SD_EFORMAT, "%s: \"%s\" is not an integer", name, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return sd_diag_set(d, SD_EFORMAT, "%s: \"%s\" = %lld is out of range [%d, %d]", name, key,
                           (long long)x, lo, hi);
    *ret = (int32_t)x;
    return 0;
}

/* Reads a finite number key (> 0 when positive is set); absent or null gives def. */
static int get_num(json_t *o, const char *key, double def, int positive, double *ret, const char *name,
                   sd_diag *d)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *ret = def;
        return 0;
    }
    if (!json_is_number(v))
        return sd_diag_set(d, SD_EFORMAT, "%s: \"%s\" is not a number", name, key);
    double x = json_number_value(v);
    if (!isfinite(x) || (positive && x <= 0))
        return sd_diag_set(d, SD_EFORMAT, "%s: \"%s\" = %g is out of range", name, key, x);
    *ret = x;
    return 0;
}

static int get_bool(json_t *o, const char *key, int def, int *ret, const char *name, sd_diag *d)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *ret = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return sd_diag_set(d, SD_EFORMAT, "%s: \"%s\" is not a boolean", name, key);
    *ret = json_is_true(v);
    return 0;
}

static int parse_arch(sd_model_config *c, json_t *root, const char *name, sd_diag *d)
{
    json_t *archs = json_object_get(root, "architectures");
    const char *a = NULL, *mt = json_string_value(json_object_get(root, "model_type"));
    if (archs && !json_is_null(archs)) {
        if (!json_is_array(archs) || json_array_size(archs) == 0 || !json_is_string(json_array_get(archs, 0)))
            return sd_diag_set(d, SD_EFORMAT, "%s: \"architectures\" is not a non-empty list of strings",
                               name);
        a = json_string_value(json_array_get(archs, 0));
    }
    if (!a && !mt)
        return sd_diag_set(d, SD_EFORMAT, "%s: neither \"architectures\" nor \"model_type\" is given", name);
    for (size_t i = 0; i < N_ARCH; i++) {
        if (a ? strcmp(a, arch_table[i].arch) == 0 : strcmp(mt, arch_table[i].model_type) == 0) {
            c->arch = arch_table[i].id;
            snprintf(c->arch_name, sizeof c->arch_name, "%s", arch_table[i].arch);
            return 0;
        }
    }
    return sd_diag_set(d, SD_ENOTSUP,
                       "%s: architecture '%.64s' is not supported (LlamaForCausalLM, MistralForCausalLM, "
                       "Qwen2ForCausalLM, Qwen3ForCausalLM are)",
                       name, a ? a : mt);
}

static int parse_dims(sd_model_config *c, json_t *r, const char *name, sd_diag *d)
{
    int rc;
    if ((rc = get_int(r, "hidden_size", 1, CFG_MAX_DIM, 0, 0, &c->hidden, name, d)) ||
        (rc = get_int(r, "num_hidden_layers", 1, 4096, 0, 0, &c->n_layers, name, d)) ||
        (rc = get_int(r, "num_attention_heads", 1, 4096, 0, 0, &c->n_heads, name, d)) ||
        (rc = get_int(r, "num_key_value_heads", 1, 4096, 1, c->n_heads, &c->n_kv_heads, name, d)) ||
        (rc = get_int(r, "intermediate_size", 1, CFG_MAX_DIM, 0, 0, &c->intermediate, name, d)) ||
        (rc = get_int(r, "vocab_size", 1, CFG_MAX_DIM, 0, 0, &c->vocab, name, d)) ||
        (rc = get_int(r, "max_position_embeddings", 1, INT32_MAX, 0, 0, &c->max_pos, name, d)))
        return rc;
    if (c->n_heads % c->n_kv_heads != 0)
        return sd_diag_set(d, SD_EFORMAT,
                           "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", name,
                           c->n_heads, c->n_kv_heads);
    json_t *hd = json_object_get(r, "head_dim");
    if ((!hd || json_is_null(hd)) && c->hidden % c->n_heads != 0)
        return sd_diag_set(d, SD_EFORMAT, "%s: no head_dim and hidden_size %d is not a multiple of %d heads",
                           name, c->hidden, c->n_heads);
    if ((rc = get_int(r, "head_dim", 1, 65536, 1, c->hidden / c->n_heads, &c->head_dim, name, d)))
        return rc;
    if (c->head_dim % 2 != 0)
        return sd_diag_set(d, SD_EFORMAT, "%s: head_dim %d is odd (RoPE rotates pairs)", name, c->head_dim);
    if ((int64_t)c->n_heads * c->head_dim > CFG_MAX_DIM)
        return sd_diag_set(d, SD_EFORMAT, "%s: num_attention_heads x head_dim is too large", name);
    double eps;
    if ((rc = get_num(r, "rms_norm_eps", 1e-6, 1, &eps, name, d)))
        return rc;
    c->rms_eps = (float)eps;
    return 0;
}

/* llama3 frequency scaling: the four keys live in rope_scaling or rope_parameters. */
static int parse_rope_llama3(sd_model_config *c, json_t *rs, const char *name, sd_diag *d)
{
    int rc;
    if ((rc = get_num(rs, "factor", NAN, 1, &c->rope_factor, name, d)) ||
        (rc = get_num(rs, "low_freq_factor", NAN, 1, &c->rope_low_freq_factor, name, d)) ||
        (rc = get_num(rs, "high_freq_factor", NAN, 1, &c->rope_high_freq_factor, name, d)) ||
        (rc = get_int(rs, "original_max_position_embeddings", 1, INT32_MAX, 0, 0, &c->rope_orig_max_pos, name,
                      d)))
        return rc;
    if (isnan(c->rope_factor) || isnan(c->rope_low_freq_factor) || isnan(c->rope_high_freq_factor))
        return sd_diag_set(d, SD_EFORMAT,
                           "%s: llama3 rope scaling needs factor, low_freq_factor, high_freq_factor", name);
    if (c->rope_high_freq_factor <= c->rope_low_freq_factor)
        return sd_diag_set(d, SD_EFORMAT,
                           "%s: llama3 rope high_freq_factor %g must exceed low_freq_factor %g", name,
                           c->rope_high_freq_factor, c->rope_low_freq_factor);
    c->rope_kind = SD_ROPE_LLAMA3;
    return 0;
}

/* transformers 4.x: rope_theta + rope_scaling {rope_type|type, ...}; 5.x: rope_parameters
 * {rope_theta, rope_type, ...}, possibly beside the 4.x keys. rope_parameters wins. */
static int parse_rope(sd_model_config *c, json_t *r, const char *name, sd_diag *d)
{
    json_t *rp = json_object_get(r, "rope_parameters"), *rs = json_object_get(r, "rope_scaling");
    int rc;
    if (rp && json_is_null(rp))
        rp = NULL;
    if (rs && json_is_null(rs))
        rs = NULL;
    if ((rp && !json_is_object(rp)) || (rs && !json_is_object(rs)))
        return sd_diag_set(d, SD_EFORMAT, "%s: \"%s\" is not an object", name,
                           rp && !json_is_object(rp) ? "rope_parameters" : "rope_scaling");
    if ((rc = get_num(r, "rope_theta", 10000.0, 1, &c->rope_theta, name, d)))
        return rc;
    if (rp && (rc = get_num(rp, "rope_theta", c->rope_theta, 1, &c->rope_theta, name, d)))
        return rc;
    json_t *src = rp ? rp : rs;
    c->rope_kind = SD_ROPE_DEFAULT;
    if (!src)
        return 0;
    json_t *ty = json_object_get(src, "rope_type");
    if (!ty || json_is_null(ty))
        ty = json_object_get(src, "type");
    if (!ty || json_is_null(ty))
        return 0;
    if (!json_is_string(ty))
        return sd_diag_set(d, SD_EFORMAT, "%s: rope_type is not a string", name);
    const char *t = json_string_value(ty);
    if (strcmp(t, "default") == 0)
        return 0;
    if (strcmp(t, "llama3") == 0)
        return parse_rope_llama3(c, src, name, d);
    return sd_diag_set(d, SD_ENOTSUP, "%s: rope_type '%.64s' is not supported (default, llama3 are)", name,
                       t);
}

static int parse_token_ids(sd_model_config *c, json_t *r, const char *name, sd_diag *d)
{
    int rc = get_int(r, "bos_token_id", 0, INT32_MAX, 1, -1, &c->bos_id, name, d);
    if (rc)
        return rc;
    json_t *e = json_object_get(r, "eos_token_id");
    c->n_eos = 0;
    if (!e || json_is_null(e))
        return 0;
    if (json_is_integer(e))
        return get_int(r, "eos_token_id", 0, INT32_MAX, 0, 0, &c->eos_ids[c->n_eos++], name, d);
    if (!json_is_array(e) || json_array_size(e) > SD_MAX_EOS)
        return sd_diag_set(d, SD_EFORMAT, "%s: \"eos_token_id\" is not an integer or a list of at most %d",
                           name, SD_MAX_EOS);
    for (size_t i = 0; i < json_array_size(e); i++) {
        json_t *v = json_array_get(e, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return sd_diag_set(d, SD_EFORMAT, "%s: \"eos_token_id\"[%zu] is not a token id", name, i);
        c->eos_ids[c->n_eos++] = (int32_t)json_integer_value(v);
    }
    return 0;
}

/* Qwen's layer_types: full_attention layers, then sliding_attention ones (the only pattern
 * max_window_layers can express, so the only one taken); *first = the first sliding layer. */
static int parse_layer_types(json_t *lt, int32_t n_layers, int32_t *first, const char *name, sd_diag *d)
{
    if (!json_is_array(lt) || json_array_size(lt) != (size_t)n_layers)
        return sd_diag_set(d, SD_EFORMAT, "%s: \"layer_types\" is not a list of %d layer types", name,
                           n_layers);
    *first = n_layers;
    for (int32_t i = 0; i < n_layers; i++) {
        const char *t = json_string_value(json_array_get(lt, (size_t)i));
        int sliding = t && !strcmp(t, "sliding_attention");
        if (!sliding && !(t && !strcmp(t, "full_attention")))
            return sd_diag_set(d, SD_ENOTSUP, "%s: \"layer_types\"[%d] '%.32s' is not supported", name, i,
                               t ? t : "?");
        if (sliding && *first == n_layers)
            *first = i;
        if (!sliding && *first < n_layers)
            return sd_diag_set(d, SD_ENOTSUP,
                               "%s: \"layer_types\": full attention at layer %d after sliding at %d "
                               "is not supported",
                               name, i, *first);
    }
    return 0;
}

/* The attention window, as transformers 5 reads it. Mistral: sliding_window for every layer
 * (MistralConfig ignores use_sliding_window; an absent key is its default 4096, null none).
 * Qwen2/Qwen3: only with use_sliding_window, for layers >= max_window_layers (default 28) or
 * as layer_types lists them (configuration_qwen2.py). Llama has none. */
static int parse_window(sd_model_config *c, json_t *r, const char *name, sd_diag *d)
{
    int rc, use_sw = 0;
    c->sliding_window = c->window_layer0 = 0;
    if (c->arch == SD_ARCH_MISTRAL)
        use_sw = 1;
    else if (c->arch == SD_ARCH_QWEN2 || c->arch == SD_ARCH_QWEN3) {
        if ((rc = get_bool(r, "use_sliding_window", 0, &use_sw, name, d)))
            return rc;
    }
    json_t *sw = json_object_get(r, "sliding_window");
    if (!use_sw || (sw && json_is_null(sw)))
        return 0;
    if ((rc = get_int(r, "sliding_window", 0, INT32_MAX, 1, 4096, &c->sliding_window, name, d)))
        return rc;
    json_t *lt = json_object_get(r, "layer_types");
    if (c->arch == SD_ARCH_MISTRAL)
        rc = 0;
    else if (lt && !json_is_null(lt))
        rc = parse_layer_types(lt, c->n_layers, &c->window_layer0, name, d);
    else
        rc = get_int(r, "max_window_layers", 0, INT32_MAX, 1, 28, &c->window_layer0, name, d);
    if (rc)
        return rc;
    if (c->window_layer0 >= c->n_layers || c->sliding_window == 0) /* no layer slides (0: as before, none) */
        c->sliding_window = c->window_layer0 = 0;
    return 0;
}

/* Bias, norm and activation flags that follow from the architecture. */
static int parse_features(sd_model_config *c, json_t *r, const char *name, sd_diag *d)
{
    int rc, attn_bias = 0, mlp_bias = 0;
    if ((rc = get_bool(r, "tie_word_embeddings", 0, &c->tie_embeddings, name, d)) ||
        (rc = get_bool(r, "attention_bias", 0, &attn_bias, name, d)) ||
        (rc = get_bool(r, "mlp_bias", 0, &mlp_bias, name, d)))
        return rc;
    if (mlp_bias)
        return sd_diag_set(d, SD_ENOTSUP, "%s: mlp_bias is not supported", name);
    /* Qwen2 hard-codes q/k/v bias; Qwen3 and Llama follow attention_bias; Mistral has none. */
    c->qkv_bias = c->arch == SD_ARCH_QWEN2 ? 1 : c->arch == SD_ARCH_MISTRAL ? 0 : attn_bias;
    c->qk_norm = c->arch == SD_ARCH_QWEN3;
    json_t *act = json_object_get(r, "hidden_act");
    if (act && !json_is_null(act) && (!json_is_string(act) || strcmp(json_string_value(act), "silu") != 0))
        return sd_diag_set(d, SD_ENOTSUP, "%s: hidden_act '%.32s' is not supported (silu is)", name,
                           json_is_string(act) ? json_string_value(act) : "?");
    if (json_object_get(r, "quantization_config"))
        return sd_diag_set(d, SD_ENOTSUP, "%s: quantized checkpoints (quantization_config) are not supported",
                           name);
    return parse_window(c, r, name, d);
}

int sd_model_config_parse(sd_model_config *ret, const char *json, size_t len, const char *name, sd_diag *d)
{
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return sd_diag_set(d, SD_EFORMAT, "%s: JSON error at line %d: %s", name, err.line, err.text);
    sd_model_config c;
    memset(&c, 0, sizeof c);
    int rc;
    if (!json_is_object(root))
        rc = sd_diag_set(d, SD_EFORMAT, "%s: not a JSON object", name);
    else if (!(rc = parse_arch(&c, root, name, d)) && !(rc = parse_dims(&c, root, name, d)) &&
             !(rc = parse_rope(&c, root, name, d)) && !(rc = parse_token_ids(&c, root, name, d)) &&
             !(rc = parse_features(&c, root, name, d)))
        *ret = c;
    json_decref(root);
    return rc;
}

char *sd__path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int sd__file_read(const char *path, size_t max, char **ret, size_t *ret_len, sd_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sd_diag_set(d, errno == ENOENT ? SD_ENOTFOUND : SD_EIO, "%s: %s", path, strerror(errno));
    int rc = 0;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || ferror(f))
            break;
        if (cap > max)
            break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (!buf)
        rc = sd_diag_set(d, SD_ENOMEM, "%s: out of memory", path);
    else if (ferror(f))
        rc = sd_diag_set(d, SD_EIO, "%s: read error", path);
    else if (n > max)
        rc = sd_diag_set(d, SD_EFORMAT, "%s: larger than %zu bytes", path, max);
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *ret = buf;
    *ret_len = n;
    return 0;
}

int sd_model_config_load(sd_model_config *ret, const char *path, sd_diag *d)
{
    char *buf;
    size_t n;
    int rc = sd__file_read(path, CFG_MAX_FILE, &buf, &n, d);
    if (rc)
        return rc;
    rc = sd_model_config_parse(ret, buf, n, path, d);
    free(buf);
    return rc;
}
