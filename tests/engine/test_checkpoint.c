/* Tests for engine/checkpoint.c and engine/model.c: the bundled models (single file and
 * sharded), and model directories written here for each architecture, dtype, tying, sharding
 * and bitmask variant, with the errors each broken variant must give. */
#include "engine/checkpoint.h"

#include <sys/stat.h>

#include "engine/model.h"
#include "engine/tokenizer.h"
#include "tests/harness.h"
#include "tests/engine/ckpt_writer.h"

static const char *small_dir(void)
{
    static char buf[4096];
    if (!sd_test_shared("models/small/config.json"))
        return NULL;
    snprintf(buf, sizeof buf, "%s/models/small",
             getenv("SD_SHARED_DIR") ? getenv("SD_SHARED_DIR") : "../shared");
    return buf;
}

static json_t *load_json(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return json_load_file(p, 0, NULL);
}

/* ---- bundled models ------------------------------------------------------------------- */

static void test_tiny_ckpt(void)
{
    sd_ckpt *c = NULL;
    sd_diag d = {0};
    int rc = sd_ckpt_open(&c, "models/tiny", &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    REQUIRE(rc == 0);
    const sd_model_config *cfg = sd_ckpt_config(c);
    CHECK(sd_ckpt_count(c) == 2 + 9 * (size_t)cfg->n_layers); /* embed, norm, 9 per layer */
    CHECK(strcmp(sd_ckpt_dir(c), "models/tiny") == 0);
    for (size_t i = 0; i < sd_ckpt_count(c); i++)
        CHECK(sd_ckpt_find(c, sd_ckpt_at(c, i)->name) == sd_ckpt_at(c, i));
    const sd_tensor_view *t = NULL;
    int64_t ok[2] = {256, 256}, bad[2] = {256, 255}, any[2] = {-1, 256};
    const char *q = "model.layers.0.self_attn.q_proj.weight";
    CHECK(sd_ckpt_get(c, q, 1u << SD_DT_BF16, 2, ok, &t, &d) == 0 && t && t->nbytes == 256 * 256 * 2);
    CHECK(sd_ckpt_get(c, q, 1u << SD_DT_BF16, 2, any, &t, &d) == 0);
    t = NULL;
    CHECK(sd_ckpt_get(c, q, 1u << SD_DT_BF16, 2, bad, &t, &d) == SD_EFORMAT && t == NULL);
    CHECK_MSG(strcmp(d.msg, "model.safetensors: tensor 'model.layers.0.self_attn.q_proj.weight' has shape "
                            "[256, 256], expected [256, 255]") == 0,
              "%s", d.msg);
    CHECK(sd_ckpt_get(c, q, 1u << SD_DT_BF16, 1, ok, &t, &d) == SD_EFORMAT);
    CHECK(sd_ckpt_get(c, q, (1u << SD_DT_F32) | (1u << SD_DT_F16), 2, ok, &t, &d) == SD_EFORMAT);
    CHECK_MSG(strstr(d.msg, "dtype BF16, expected F16|F32") != NULL, "%s", d.msg);
    CHECK(sd_ckpt_get(c, "nope", 1u << SD_DT_BF16, 2, ok, &t, &d) == SD_ENOTFOUND);
    CHECK(strstr(d.msg, "'nope'") != NULL);
    sd_ckpt_free(c);
    sd_ckpt_free(NULL);
}

static void test_small_sharded(void)
{
    const char *dir = small_dir();
    if (!dir)
        SKIP("../shared/models/small is absent");
    sd_ckpt *c = NULL;
    sd_diag d = {0};
    int rc = sd_ckpt_open(&c, dir, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    REQUIRE(rc == 0);
    json_t *idx = load_json(dir, "model.safetensors.index.json");
    REQUIRE(idx);
    json_t *wm = json_object_get(idx, "weight_map");
    CHECK(sd_ckpt_count(c) == json_object_size(wm));
    const char *k;
    json_t *v;
    json_object_foreach(wm, k, v)
    {
        const sd_tensor_view *t = sd_ckpt_find(c, k);
        CHECK_MSG(t, "%s missing", k);
        if (!t)
            continue;
        const char *base = strrchr(t->file, '/');
        CHECK_MSG(base && strcmp(base + 1, json_string_value(v)) == 0, "%s in %s, index says %s", k, t->file,
                  json_string_value(v));
        /* the first 16 bytes, read from the shard with stdio at the offset its header gives */
        FILE *f = fopen(t->file, "rb");
        unsigned char b8[8], buf[16];
        size_t got = f ? fread(b8, 1, 8, f) : 0;
        REQUIRE(got == 8);
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = (n << 8) | b8[i];
        char *h = malloc(n + 1);
        got = fread(h, 1, n, f);
        json_t *hj = json_loadb(h, got, 0, NULL);
        json_int_t b =
            json_integer_value(json_array_get(json_object_get(json_object_get(hj, k), "data_offsets"), 0));
        fseek(f, (long)(8 + n + (uint64_t)b), SEEK_SET);
        size_t m = t->nbytes < 16 ? t->nbytes : 16;
        got = fread(buf, 1, m, f);
        CHECK(got == m && memcmp(buf, t->data, m) == 0);
        json_decref(hj);
        free(h);
        fclose(f);
    }
    json_decref(idx);
    sd_ckpt_free(c);
}

/* Checks the model's views against its config and checkpoint. */
static void check_model_views(const sd_model *m)
{
    const sd_model_config *c = sd_model_cfg(m);
    const sd_model_weights *w = sd_model_w(m);
    const sd_ckpt *ck = sd_model_ckpt(m);
    CHECK(w->embed.data == sd_ckpt_find(ck, "model.embed_tokens.weight")->data);
    CHECK(w->embed.n == (int64_t)c->vocab * c->hidden);
    CHECK(w->final_norm.data == sd_ckpt_find(ck, "model.norm.weight")->data && w->final_norm.n == c->hidden);
    if (c->tie_embeddings)
        CHECK(w->lm_head.w == w->embed.data);
    else
        CHECK(w->lm_head.w == sd_ckpt_find(ck, "lm_head.weight")->data);
    CHECK(w->lm_head.rows == c->vocab && w->lm_head.cols == c->hidden);
    for (int i = 0; i < c->n_layers; i++) {
        const sd_layer_weights *L = &w->layers[i];
        char nm[128];
        snprintf(nm, sizeof nm, "model.layers.%d.input_layernorm.weight", i);
        CHECK(L->attn_norm.data == sd_ckpt_find(ck, nm)->data && L->attn_norm.n == c->hidden);
        const sd_linear *ls[] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
        int64_t rows[] = {(int64_t)c->n_heads * c->head_dim,
                          (int64_t)c->n_kv_heads * c->head_dim,
                          (int64_t)c->n_kv_heads * c->head_dim,
                          c->hidden,
                          c->intermediate,
                          c->intermediate,
                          c->hidden};
        int64_t cols[] = {c->hidden, c->hidden, c->hidden,      (int64_t)c->n_heads * c->head_dim,
                          c->hidden, c->hidden, c->intermediate};
        for (int j = 0; j < 7; j++) {
            CHECK(ls[j]->rows == rows[j] && ls[j]->cols == cols[j]);
            snprintf(nm, sizeof nm, "%s.%s", ls[j]->name,
                     ls[j]->kind == SD_LINEAR_DENSE ? "weight" : "nm_values");
            const sd_tensor_view *t = sd_ckpt_find(ck, nm);
            CHECK_MSG(t && (ls[j]->kind == SD_LINEAR_DENSE ? ls[j]->w : (const void *)ls[j]->values) ==
                               t->data,
                      "%s", nm);
            CHECK((ls[j]->bias != NULL) == (j < 3 && c->qkv_bias));
        }
        CHECK((L->q_norm.data != NULL) == c->qk_norm && (L->k_norm.data != NULL) == c->qk_norm);
    }
}

static void test_tiny_model(void)
{
    sd_model *m = NULL;
    sd_diag d = {0};
    int rc = sd_model_open(&m, "models/tiny/", &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    REQUIRE(rc == 0);
    check_model_views(m);
    CHECK(strcmp(sd_model_name(m), "tiny") == 0);
    CHECK(strcmp(sd_model_sparsity(m), "dense") == 0);
    CHECK(sd_model_tokenizer(m) != NULL);
    json_t *tc = load_json("models/tiny", "tokenizer_config.json");
    REQUIRE(tc);
    CHECK(sd_model_chat_template(m) &&
          strcmp(sd_model_chat_template(m), json_string_value(json_object_get(tc, "chat_template"))) == 0);
    json_decref(tc);
    json_t *gc = load_json("models/tiny", "generation_config.json");
    const int32_t *eos;
    int n = sd_model_eos_ids(m, &eos);
    CHECK(n >= 1 && eos[0] == json_integer_value(json_object_get(gc, "eos_token_id")));
    json_decref(gc);
    sd_model_free(m);
    sd_model_free(NULL);
}

static void test_small_model(void)
{
    const char *dir = small_dir();
    if (!dir)
        SKIP("../shared/models/small is absent");
    sd_model *m = NULL;
    sd_diag d = {0};
    int rc = sd_model_open(&m, dir, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    REQUIRE(rc == 0);
    check_model_views(m);
    CHECK(strcmp(sd_model_name(m), "small") == 0);
    sd_model_free(m);
}

/* ---- written model directories ---------------------------------------------------------- */

/* Writes the spec into a fresh temp dir and opens it; returns rc, message in d. */
static int open_spec(const tw_spec *sp, sd_model **m, char *dir, size_t cap, sd_diag *d)
{
    memset(d, 0, sizeof *d);
    *m = NULL;
    if (tw_mkdtemp(dir, cap) || tw_write_model(dir, sp))
        return 99;
    return sd_model_open(m, dir, d);
}

/* Opens the spec, checks the views and the dense bytes, and the sparsity summary. */
static void check_spec_ok(const tw_spec *sp, const char *sparsity)
{
    sd_model *m;
    char dir[64];
    sd_diag d;
    int rc = open_spec(sp, &m, dir, sizeof dir, &d);
    CHECK_MSG(rc == 0, "%s %s: %s", sp->arch, sp->pattern ? sp->pattern : "dense", d.msg);
    if (rc == 0) {
        check_model_views(m);
        CHECK_MSG(strcmp(sd_model_sparsity(m), sparsity) == 0, "sparsity %s, expected %s",
                  sd_model_sparsity(m), sparsity);
        const sd_ckpt *ck = sd_model_ckpt(m);
        for (size_t i = 0; i < sd_ckpt_count(ck); i++) {
            const sd_tensor_view *t = sd_ckpt_at(ck, i);
            if (!strstr(t->name, "nm_mask"))
                CHECK_MSG(tw_expect(t->name, t->data, t->nbytes), "bytes of %s", t->name);
        }
        const sd_layer_weights *L = &sd_model_w(m)->layers[0];
        CHECK(L->q.dtype == (sp->pattern ? SD_DT_BF16 : sd_dtype_parse(sp->dtype, strlen(sp->dtype))));
        if (sp->pattern) {
            int n = 0, mm = 0;
            sscanf(sp->pattern, "%d:%d", &n, &mm);
            CHECK(L->q.kind == SD_LINEAR_BITMASK && L->q.nm_n == n && L->q.nm_m == mm && L->q.mask);
        }
        CHECK(strcmp(sd_model_name(m), strrchr(dir, '/') + 1) == 0);
    }
    sd_model_free(m);
    tw_rmdir(dir);
}

static void test_variants(void)
{
    tw_spec s = tw_spec_default();
    check_spec_ok(&s, "dense");
    s.dtype = "F16", s.tie = 0;
    check_spec_ok(&s, "dense");
    s.dtype = "F32", s.n_shards = 3;
    check_spec_ok(&s, "dense");
    s = tw_spec_default();
    s.arch = "Qwen2ForCausalLM", s.bias = 1;
    check_spec_ok(&s, "dense");
    s = tw_spec_default();
    s.arch = "Qwen3ForCausalLM", s.qk_norm = 1, s.head_dim = 32, s.tie = 0; /* heads*head_dim != hidden */
    check_spec_ok(&s, "dense");
    s = tw_spec_default();
    s.arch = "MistralForCausalLM", s.extra = "\"sliding_window\": 4096, \"rope_theta\": 1e6";
    check_spec_ok(&s, "dense");
    s = tw_spec_default();
    s.extra = "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
              "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}";
    check_spec_ok(&s, "dense");
    s.extra =
        "\"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": \"llama3\", \"factor\": 32.0, "
        "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 128}";
    check_spec_ok(&s, "dense");
}

/* Llama 3's tokenizer_config.json carries model_max_length = 1e30 as an integer, wider than
 * jansson's json_int_t: the model must still open, with its chat template. */
static void test_tokenizer_config_big_int(void)
{
    tw_spec s = tw_spec_default();
    char dir[64];
    sd_model *m = NULL;
    sd_diag d = {0};
    REQUIRE(tw_mkdtemp(dir, sizeof dir) == 0 && tw_write_model(dir, &s) == 0);
    REQUIRE(tw_write_str(dir, "tokenizer_config.json",
                         "{\"model_max_length\": 1000000000000000019884624838656,\n"
                         " \"chat_template\": \"{{ messages[0].content }}\"}") == 0);
    int rc = sd_model_open(&m, dir, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    if (!rc)
        CHECK(sd_model_chat_template(m) && !strcmp(sd_model_chat_template(m), "{{ messages[0].content }}"));
    sd_model_free(m);
    tw_rmdir(dir);
}

static void test_bitmask(void)
{
    tw_spec s = tw_spec_default();
    s.pattern = "2:4";
    check_spec_ok(&s, "2:4");
    s.pattern = "4:8", s.pattern_in_json = 1;
    check_spec_ok(&s, "4:8");
    s.pattern = "8:16";
    check_spec_ok(&s, "8:16");
    s.pattern = "16:32", s.n_shards = 2;
    check_spec_ok(&s, "16:32");
    s.pattern = "unstructured", s.pattern_in_json = 0;
    check_spec_ok(&s, "unstructured");
}

/* A bitmask model whose mask bits do not match its declared pattern, or overflow a row. */
static void test_bitmask_broken(void)
{
    tw_spec s = tw_spec_default();
    s.pattern = "4:8"; /* written as 4:8, declared 2:4 through sparsity.json below */
    char dir[64], p[128];
    sd_model *m;
    sd_diag d = {0};
    int made = tw_mkdtemp(dir, sizeof dir);
    REQUIRE(made == 0);
    s.pattern_in_json = 1;
    int wr = tw_write_model(dir, &s);
    REQUIRE(wr == 0);
    snprintf(p, sizeof p, "%s/sparsity.json", dir);
    size_t len;
    char *txt = (char *)tw_read(p, &len);
    REQUIRE(txt);
    for (char *q = strstr(txt, "4:8"); q; q = strstr(q, "4:8"))
        memcpy(q, "2:4", 3);
    tw_write_str(dir, "sparsity.json", txt);
    free(txt);
    int rc = sd_model_open(&m, dir, &d);
    /* a random 4:8 row is almost surely not 2:4; the first word of q_proj decides */
    CHECK_MSG(rc == SD_EFORMAT && strstr(d.msg, "2:4"), "rc %d: %s", rc, d.msg);
    tw_write_str(dir, "sparsity.json",
                 "{\"format\": \"nm-bitmask-v1\", \"tensors\": {"
                 "\"model.layers.0.self_attn.q_proj\": \"3:4\"}}");
    CHECK(sd_model_open(&m, dir, &d) == SD_ENOTSUP && strstr(d.msg, "3:4"));
    tw_write_str(dir, "sparsity.json", "{\"format\": \"other\"}");
    CHECK(sd_model_open(&m, dir, &d) == SD_ENOTSUP && strstr(d.msg, "sparsity.json"));
    tw_rmdir(dir);
}

/* Overwrites the first mask word of layer 0's q_proj with all ones (offset from the header). */
static int set_first_mask_word(const char *dir)
{
    char p[128];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    FILE *f = fopen(p, "r+b");
    unsigned char b8[8];
    if (!f || fread(b8, 1, 8, f) != 8)
        return -1;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | b8[i];
    char *h = malloc(n + 1);
    size_t got = fread(h, 1, n, f);
    json_t *hj = json_loadb(h, got, 0, NULL);
    json_t *e = json_object_get(hj, "model.layers.0.self_attn.q_proj.nm_mask");
    json_int_t b = json_integer_value(json_array_get(json_object_get(e, "data_offsets"), 0));
    uint32_t ones = 0xffffffffu;
    int rc =
        e && fseek(f, (long)(8 + n + (uint64_t)b), SEEK_SET) == 0 && fwrite(&ones, 4, 1, f) == 1 ? 0 : -1;
    json_decref(hj);
    free(h);
    return fclose(f) == 0 ? rc : -1;
}

/* A row keeping more columns than it has values is refused, whatever the pattern says. */
static void test_bitmask_overfull(void)
{
    static const char *pats[] = {"unstructured", "2:4"};
    for (int i = 0; i < 2; i++) {
        tw_spec s = tw_spec_default();
        s.pattern = pats[i];
        char dir[64];
        sd_model *m = NULL;
        sd_diag d = {0};
        int made = tw_mkdtemp(dir, sizeof dir);
        REQUIRE(made == 0);
        int wr = tw_write_model(dir, &s) || set_first_mask_word(dir);
        REQUIRE(wr == 0);
        int rc = sd_model_open(&m, dir, &d);
        CHECK_MSG(rc == SD_EFORMAT && strstr(d.msg, "model.layers.0.self_attn.q_proj.nm_mask") &&
                      strstr(d.msg, i == 0 ? "stored values" : "2:4 pattern"),
                  "rc %d: %s", rc, d.msg);
        CHECK(m == NULL);
        tw_rmdir(dir);
    }
}

/* Each broken variant fails with a code and a message naming what is wrong. */
static void test_model_refusals(void)
{
    sd_model *m;
    char dir[64];
    sd_diag d;
    tw_spec s = tw_spec_default();
    s.tie = 0, s.skip_lm_head = 1;
    CHECK(open_spec(&s, &m, dir, sizeof dir, &d) == SD_EFORMAT && strstr(d.msg, "lm_head.weight"));
    tw_rmdir(dir);
    s = tw_spec_default();
    s.arch = "Qwen3ForCausalLM"; /* config implies q_norm/k_norm, the files lack them */
    CHECK(open_spec(&s, &m, dir, sizeof dir, &d) == SD_ENOTFOUND && strstr(d.msg, "q_norm"));
    tw_rmdir(dir);
    s = tw_spec_default();
    s.arch = "Qwen2ForCausalLM"; /* config implies q/k/v bias */
    CHECK(open_spec(&s, &m, dir, sizeof dir, &d) == SD_ENOTFOUND && strstr(d.msg, "q_proj.bias"));
    tw_rmdir(dir);
    s = tw_spec_default();
    s.pattern = "2:4", s.inter = 80; /* down_proj cols % 32 != 0 */
    CHECK(open_spec(&s, &m, dir, sizeof dir, &d) == SD_EFORMAT && strstr(d.msg, "down_proj"));
    tw_rmdir(dir);
    s = tw_spec_default();
    s.extra = "\"intermediate_size\": 95"; /* duplicate key: the writer puts 96 first */
    CHECK(open_spec(&s, &m, dir, sizeof dir, &d) == SD_EFORMAT);
    tw_rmdir(dir);
    s = tw_spec_default();
    s.dtype = "F64";
    CHECK(open_spec(&s, &m, dir, sizeof dir, &d) == SD_EFORMAT && strstr(d.msg, "dtype F64"));
    tw_rmdir(dir);
}

/* Sharded index lies: a tensor in the wrong shard, a shard outside the folder, a missing shard. */
static void test_index_refusals(void)
{
    sd_model *m;
    char dir[64];
    sd_diag d;
    tw_spec s = tw_spec_default();
    s.n_shards = 2;
    int rc0 = open_spec(&s, &m, dir, sizeof dir, &d);
    REQUIRE(rc0 == 0);
    sd_model_free(m);
    char p[128];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    size_t len;
    char *orig = (char *)tw_read(p, &len);
    REQUIRE(orig);
    static const struct {
        const char *from, *to;
        int code;
        const char *needle;
    } cases[] = {
        {"\"model.norm.weight\": \"model-00002-of-00002", "\"model.norm.weight\": \"model-00001-of-00002",
         SD_EFORMAT, "model.norm.weight"},
        {"\"model.norm.weight\": \"model-00002", "\"model.norm.weight\": \"../x/model-00002", SD_EFORMAT,
         "../x"},
        {"\"model.norm.weight\": \"model-00002-of-00002", "\"model.norm.weight\": \"model-00003-of-00002",
         SD_ENOTFOUND, "model-00003-of-00002"},
        {"\"weight_map\"", "\"weight_mop\"", SD_EFORMAT, "weight_map"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *at = strstr(orig, cases[i].from);
        CHECK_MSG(at, "case %zu: '%s' not in the index", i, cases[i].from);
        if (!at)
            continue;
        char *txt = malloc(len + 64);
        snprintf(txt, len + 64, "%.*s%s%s", (int)(at - orig), orig, cases[i].to, at + strlen(cases[i].from));
        tw_write_str(dir, "model.safetensors.index.json", txt);
        free(txt);
        int rc = sd_model_open(&m, dir, &d);
        CHECK_MSG(rc == cases[i].code && strstr(d.msg, cases[i].needle), "case %zu: rc %d: %s", i, rc, d.msg);
        if (i == 0)
            CHECK(strstr(d.msg, "model-00001-of-00002.safetensors"));
    }
    free(orig);
    tw_rmdir(dir);
}

int main(void)
{
    RUN(test_tiny_ckpt);
    RUN(test_small_sharded);
    RUN(test_tiny_model);
    RUN(test_small_model);
    RUN(test_variants);
    RUN(test_tokenizer_config_big_int);
    RUN(test_bitmask);
    RUN(test_bitmask_broken);
    RUN(test_bitmask_overfull);
    RUN(test_model_refusals);
    RUN(test_index_refusals);
    return sd_test_done();
}
