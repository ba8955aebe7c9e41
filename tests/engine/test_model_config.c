/* Tests for engine/model_config.c: every field against the same JSON read here with jansson,
 * on the bundled models and on config variants of each supported family; and the refusals. */
#include "engine/model_config.h"

#include <jansson.h>

#include "tests/harness.h"

static double num_or(json_t *o, const char *k, double def)
{
    json_t *v = o ? json_object_get(o, k) : NULL;
    return json_is_number(v) ? json_number_value(v) : def;
}

static json_int_t int_or(json_t *o, const char *k, json_int_t def)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : def;
}

/* Compares the parsed config with what the JSON says, field by field. */
static void check_against_json(const sd_model_config *c, const char *text)
{
    json_t *r = json_loads(text, 0, NULL);
    REQUIRE(r);
    CHECK(strcmp(c->arch_name, json_string_value(json_array_get(json_object_get(r, "architectures"), 0))) ==
          0);
    CHECK(c->hidden == int_or(r, "hidden_size", -1));
    CHECK(c->n_layers == int_or(r, "num_hidden_layers", -1));
    CHECK(c->n_heads == int_or(r, "num_attention_heads", -1));
    CHECK(c->n_kv_heads == int_or(r, "num_key_value_heads", c->n_heads));
    CHECK(c->head_dim ==
          int_or(r, "head_dim", int_or(r, "hidden_size", 0) / int_or(r, "num_attention_heads", 1)));
    CHECK(c->intermediate == int_or(r, "intermediate_size", -1));
    CHECK(c->vocab == int_or(r, "vocab_size", -1));
    CHECK(c->max_pos == int_or(r, "max_position_embeddings", -1));
    CHECK(c->rms_eps == (float)num_or(r, "rms_norm_eps", -1));
    json_t *rp = json_object_get(r, "rope_parameters"), *rs = json_object_get(r, "rope_scaling");
    json_t *src = json_is_object(rp) ? rp : json_is_object(rs) ? rs : NULL;
    CHECK(c->rope_theta == num_or(rp, "rope_theta", num_or(r, "rope_theta", 10000.0)));
    const char *ty = src ? json_string_value(json_object_get(src, "rope_type")) : NULL;
    if (!ty && src)
        ty = json_string_value(json_object_get(src, "type"));
    int llama3 = ty && strcmp(ty, "llama3") == 0;
    CHECK(c->rope_kind == (llama3 ? SD_ROPE_LLAMA3 : SD_ROPE_DEFAULT));
    if (llama3) {
        CHECK(c->rope_factor == num_or(src, "factor", -1));
        CHECK(c->rope_low_freq_factor == num_or(src, "low_freq_factor", -1));
        CHECK(c->rope_high_freq_factor == num_or(src, "high_freq_factor", -1));
        CHECK(c->rope_orig_max_pos == int_or(src, "original_max_position_embeddings", -1));
    }
    CHECK(c->tie_embeddings == json_is_true(json_object_get(r, "tie_word_embeddings")));
    CHECK(c->bos_id == int_or(r, "bos_token_id", -1));
    json_t *e = json_object_get(r, "eos_token_id");
    if (json_is_integer(e)) {
        CHECK(c->n_eos == 1 && c->eos_ids[0] == json_integer_value(e));
    } else if (json_is_array(e)) {
        CHECK(c->n_eos == (int)json_array_size(e));
        for (int i = 0; i < c->n_eos; i++)
            CHECK(c->eos_ids[i] == json_integer_value(json_array_get(e, (size_t)i)));
    } else {
        CHECK(c->n_eos == 0);
    }
    json_decref(r);
}

static void load_and_check(const char *path)
{
    sd_model_config c;
    sd_diag d = {0};
    int rc = sd_model_config_load(&c, path, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    REQUIRE(rc == 0);
    FILE *f = fopen(path, "rb");
    REQUIRE(f);
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    check_against_json(&c, buf);
    CHECK(c.arch == SD_ARCH_LLAMA && !c.qkv_bias && !c.qk_norm);
}

static void test_tiny(void)
{
    load_and_check("models/tiny/config.json");
}

static void test_small(void)
{
    const char *p = sd_test_shared("models/small/config.json");
    if (!p)
        SKIP("../shared/models/small is absent");
    load_and_check(p);
}

/* Abridged config.json files of each family, as published (plus the transformers 5 form). */
static const char *llama31 =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"attention_bias\":false,\"bos_token_id\":128000,"
    "\"eos_token_id\":[128001,128008,128009],\"hidden_act\":\"silu\",\"hidden_size\":4096,"
    "\"intermediate_size\":14336,\"max_position_embeddings\":131072,\"mlp_bias\":false,\"model_type\":"
    "\"llama\","
    "\"num_attention_heads\":32,\"num_hidden_layers\":32,\"num_key_value_heads\":8,\"rms_norm_eps\":1e-05,"
    "\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
    "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},\"rope_theta\":500000.0,"
    "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\",\"vocab_size\":128256}";
static const char *llama32_v5 =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"bos_token_id\":128000,\"eos_token_id\":128001,"
    "\"head_dim\":64,\"hidden_size\":2048,\"intermediate_size\":8192,\"max_position_embeddings\":131072,"
    "\"num_attention_heads\":32,\"num_hidden_layers\":16,\"num_key_value_heads\":8,\"rms_norm_eps\":1e-05,"
    "\"rope_parameters\":{\"rope_theta\":500000.0,\"rope_type\":\"llama3\",\"factor\":32.0,"
    "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192},"
    "\"tie_word_embeddings\":true,\"vocab_size\":128256}";
static const char *llama2 =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"bos_token_id\":1,\"eos_token_id\":2,\"hidden_act\":\"silu\","
    "\"hidden_size\":4096,\"intermediate_size\":11008,\"max_position_embeddings\":4096,"
    "\"num_attention_heads\":32,\"num_hidden_layers\":32,\"rms_norm_eps\":1e-05,\"rope_scaling\":null,"
    "\"tie_word_embeddings\":false,\"vocab_size\":32000}";
static const char *qwen25 =
    "{\"architectures\":[\"Qwen2ForCausalLM\"],\"bos_token_id\":151643,\"eos_token_id\":151645,"
    "\"hidden_act\":\"silu\",\"hidden_size\":896,\"intermediate_size\":4864,\"max_position_embeddings\":"
    "32768,"
    "\"max_window_layers\":21,\"model_type\":\"qwen2\",\"num_attention_heads\":14,\"num_hidden_layers\":24,"
    "\"num_key_value_heads\":2,\"rms_norm_eps\":1e-06,\"rope_theta\":1000000.0,\"sliding_window\":32768,"
    "\"tie_word_embeddings\":true,\"use_sliding_window\":false,\"vocab_size\":151936}";
static const char *qwen3 =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,\"bos_token_id\":151643,"
    "\"eos_token_id\":151645,\"head_dim\":128,\"hidden_act\":\"silu\",\"hidden_size\":5120,"
    "\"intermediate_size\":25600,\"max_position_embeddings\":40960,\"model_type\":\"qwen3\","
    "\"num_attention_heads\":64,\"num_hidden_layers\":64,\"num_key_value_heads\":8,\"rms_norm_eps\":1e-06,"
    "\"rope_scaling\":null,\"rope_theta\":1000000,\"sliding_window\":null,\"tie_word_embeddings\":false,"
    "\"use_sliding_window\":false,\"vocab_size\":151936}";
static const char *mistral =
    "{\"architectures\":[\"MistralForCausalLM\"],\"bos_token_id\":1,\"eos_token_id\":2,\"hidden_act\":"
    "\"silu\","
    "\"hidden_size\":4096,\"intermediate_size\":14336,\"max_position_embeddings\":32768,"
    "\"model_type\":\"mistral\",\"num_attention_heads\":32,\"num_hidden_layers\":32,\"num_key_value_heads\":"
    "8,"
    "\"rms_norm_eps\":1e-05,\"rope_theta\":10000.0,\"sliding_window\":4096,\"tie_word_embeddings\":false,"
    "\"vocab_size\":32000}";

static int parse(sd_model_config *c, const char *text, sd_diag *d)
{
    memset(d, 0, sizeof *d);
    return sd_model_config_parse(c, text, strlen(text), "config.json", d);
}

static void test_families(void)
{
    const char *all[] = {llama31, llama32_v5, llama2, qwen25, qwen3, mistral};
    sd_model_config c[6];
    sd_diag d;
    for (int i = 0; i < 6; i++) {
        int rc = parse(&c[i], all[i], &d);
        CHECK_MSG(rc == 0, "config %d: %s", i, d.msg);
        if (rc == 0)
            check_against_json(&c[i], all[i]);
    }
    /* architecture-implied features, which the JSON does not spell out */
    CHECK(c[0].arch == SD_ARCH_LLAMA && !c[0].qkv_bias && !c[0].qk_norm);
    CHECK(c[3].arch == SD_ARCH_QWEN2 && c[3].qkv_bias && !c[3].qk_norm && c[3].sliding_window == 0);
    CHECK(c[4].arch == SD_ARCH_QWEN3 && !c[4].qkv_bias && c[4].qk_norm);
    CHECK(c[4].head_dim * c[4].n_heads != c[4].hidden); /* explicit head_dim honoured */
    CHECK(c[5].arch == SD_ARCH_MISTRAL && !c[5].qkv_bias && c[5].sliding_window == 4096);
}

/* model_type alone (no "architectures") is enough; attention_bias turns on Llama's q/k/v bias. */
static void test_model_type_and_bias(void)
{
    sd_model_config c;
    sd_diag d;
    const char *t =
        "{\"model_type\":\"llama\",\"hidden_size\":64,\"num_hidden_layers\":1,\"num_attention_heads\":4,"
        "\"intermediate_size\":128,\"vocab_size\":10,\"max_position_embeddings\":64,"
        "\"attention_bias\":true,\"bos_token_id\":null}";
    int rc = parse(&c, t, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    REQUIRE(rc == 0);
    CHECK(c.arch == SD_ARCH_LLAMA && c.qkv_bias == 1 && c.bos_id == -1 && c.n_eos == 0);
    CHECK(c.head_dim == 16 && c.n_kv_heads == 4);
}

/* Each refusal comes with the code and a message naming the key at fault. */
static void test_refusals(void)
{
    static const struct {
        const char *from, *to; /* replace `from` in llama31 by `to` */
        int code;
        const char *needle;
    } cases[] = {
        {"\"LlamaForCausalLM\"", "\"GPT2LMHeadModel\"", SD_ENOTSUP, "GPT2LMHeadModel"},
        {"\"num_key_value_heads\":8", "\"num_key_value_heads\":5", SD_EFORMAT, "num_key_value_heads"},
        {"\"hidden_size\":4096", "\"hidden_size\":-4096", SD_EFORMAT, "hidden_size"},
        {"\"hidden_size\":4096", "\"hidden_size\":4096.5", SD_EFORMAT, "hidden_size"},
        {"\"hidden_size\":4096,", "", SD_EFORMAT, "hidden_size"},
        {"\"num_hidden_layers\":32", "\"num_hidden_layers\":0", SD_EFORMAT, "num_hidden_layers"},
        {"\"vocab_size\":128256", "\"vocab_size\":\"big\"", SD_EFORMAT, "vocab_size"},
        {"\"rope_type\":\"llama3\"", "\"rope_type\":\"yarn\"", SD_ENOTSUP, "yarn"},
        {"\"factor\":8.0,", "", SD_EFORMAT, "factor"},
        {"\"high_freq_factor\":4.0", "\"high_freq_factor\":0.5", SD_EFORMAT, "high_freq_factor"},
        {"\"rms_norm_eps\":1e-05", "\"rms_norm_eps\":-1", SD_EFORMAT, "rms_norm_eps"},
        {"\"eos_token_id\":[128001,128008,128009]", "\"eos_token_id\":[1,\"x\"]", SD_EFORMAT, "eos_token_id"},
        {"\"hidden_act\":\"silu\"", "\"hidden_act\":\"gelu\"", SD_ENOTSUP, "gelu"},
        {"\"mlp_bias\":false", "\"mlp_bias\":true", SD_ENOTSUP, "mlp_bias"},
        {"\"tie_word_embeddings\":false", "\"tie_word_embeddings\":7", SD_EFORMAT, "tie_word_embeddings"},
        {"{\"architectures\"", "[{\"architectures\"", SD_EFORMAT, "JSON"},
        {"\"vocab_size\":128256}", "\"vocab_size\":128256", SD_EFORMAT, "JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[4096];
        const char *at = strstr(llama31, cases[i].from);
        REQUIRE(at);
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - llama31), llama31, cases[i].to,
                 at + strlen(cases[i].from));
        sd_model_config c;
        memset(&c, 0x5a, sizeof c);
        sd_diag d;
        int rc = parse(&c, buf, &d);
        CHECK_MSG(rc == cases[i].code, "case %zu: rc %d (%s)", i, rc, d.msg);
        CHECK_MSG(strstr(d.msg, cases[i].needle) && strstr(d.msg, "config.json"), "case %zu: message '%s'", i,
                  d.msg);
        CHECK(c.hidden == 0x5a5a5a5a); /* output untouched on failure */
    }
    sd_model_config c;
    sd_diag d = {0};
    CHECK(sd_model_config_load(&c, "/nonexistent/config.json", &d) == SD_ENOTFOUND);
    CHECK(strstr(d.msg, "/nonexistent/config.json") != NULL);
}

/* The attention window as transformers 5 reads it (configuration_mistral.py, configuration_qwen2.py,
 * configuration_qwen3.py): Mistral always (absent: its default 4096, null: none, use_sliding_window
 * ignored); Qwen only with use_sliding_window, on layers >= max_window_layers (default 28) or as
 * layer_types lists them; Llama never. The HF model tests are test_sliding_window_hf.py. */
static void test_sliding_window(void)
{
#define QW(extra)                                                                                            \
    "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":4,"                  \
    "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":10,\"max_position_embeddings\":"     \
    "64" extra "}"
#define MI(extra)                                                                                            \
    "{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":4,"                \
    "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":10,\"max_position_embeddings\":"     \
    "64" extra "}"
    static const struct {
        const char *json;
        int32_t window, layer0;
    } ok[] = {
        {MI(""), 4096, 0},
        {MI(",\"sliding_window\":null"), 0, 0},
        {MI(",\"sliding_window\":8,\"use_sliding_window\":false"), 8, 0},
        {MI(",\"sliding_window\":8,\"max_window_layers\":3"), 8, 0},
        {QW(",\"sliding_window\":8,\"max_window_layers\":2"), 0, 0},
        {QW(",\"use_sliding_window\":true,\"sliding_window\":8,\"max_window_layers\":2"), 8, 2},
        {QW(",\"use_sliding_window\":true,\"max_window_layers\":0"), 4096, 0},
        {QW(",\"use_sliding_window\":true,\"sliding_window\":8"), 0, 0}, /* default 28 >= 4 layers */
        {QW(",\"use_sliding_window\":true,\"sliding_window\":null,\"max_window_layers\":0"), 0, 0},
        {QW(",\"use_sliding_window\":true,\"sliding_window\":8,\"max_window_layers\":0,\"layer_types\":"
            "[\"full_attention\",\"full_attention\",\"full_attention\",\"sliding_attention\"]"),
         8, 3},
        {QW(",\"use_sliding_window\":false,\"sliding_window\":8,\"layer_types\":"
            "[\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\"]"),
         0, 0},
        {"{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":4,"
         "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":10,\"max_position_embeddings\":"
         "64,"
         "\"use_sliding_window\":true,\"sliding_window\":8}",
         0, 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        sd_model_config c;
        sd_diag d;
        int rc = parse(&c, ok[i].json, &d);
        CHECK_MSG(rc == 0, "case %zu: %s", i, d.msg);
        if (rc)
            continue;
        CHECK_MSG(c.sliding_window == ok[i].window && c.window_layer0 == ok[i].layer0, "case %zu: %d from %d",
                  i, c.sliding_window, c.window_layer0);
        for (int32_t l = 0; l < c.n_layers; l++)
            CHECK(sd_model_config_window(&c, l) == (l >= ok[i].layer0 ? ok[i].window : 0));
    }
    static const struct {
        const char *json;
        int code;
    } bad[] = {
        {QW(",\"use_sliding_window\":true,\"layer_types\":[\"full_attention\"]"), SD_EFORMAT},
        {QW(",\"use_sliding_window\":true,\"layer_types\":[\"sliding_attention\",\"full_attention\","
            "\"full_attention\",\"full_attention\"]"),
         SD_ENOTSUP},
        {QW(",\"use_sliding_window\":true,\"layer_types\":[\"full_attention\",\"full_attention\","
            "\"full_attention\",\"chunked_attention\"]"),
         SD_ENOTSUP},
        {QW(",\"use_sliding_window\":true,\"sliding_window\":-1"), SD_EFORMAT},
        {QW(",\"use_sliding_window\":1"), SD_EFORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sd_model_config c;
        sd_diag d;
        int rc = parse(&c, bad[i].json, &d);
        CHECK_MSG(rc == bad[i].code, "bad case %zu: rc %d (%s)", i, rc, d.msg);
    }
#undef QW
#undef MI
}

int main(void)
{
    RUN(test_tiny);
    RUN(test_small);
    RUN(test_families);
    RUN(test_model_type_and_bias);
    RUN(test_refusals);
    RUN(test_sliding_window);
    return sd_test_done();
}
