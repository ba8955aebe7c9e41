/* test_shard: the tensor-parallel plan and slicing — every tensor kind sharded for TP = 2, 4, 8
 * and reassembled gives back the original bit for bit; bitmask slices are valid bitmask
 * tensors; configs that cannot be split give errors naming the constraint and tensor. */
#include "engine/shard.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "../kernels/nm_test_util.h"
#include "engine/dtype.h"
#include "kernels/nm_format.h"

/* A linear with owned buffers: dense bf16 (n = m = -1) or bitmask (n:m, 0:0 unstructured). */
typedef struct tlin {
    sd_linear l;
    uint16_t *dense; /* [rows, cols]: the weights, zeros where pruned */
    uint16_t *values;
    uint32_t *mask;
    uint16_t *bias; /* bf16 [rows] */
} tlin;

static int tlin_make(tlin *t, const char *name, int64_t rows, int64_t cols, int n, int m, int bias,
                     uint64_t *s)
{
    memset(t, 0, sizeof *t);
    t->dense = malloc((size_t)(rows * cols) * 2);
    if (!t->dense)
        return SD_ENOMEM;
    nmt_fill_bf16(t->dense, rows * cols, s);
    t->l = (sd_linear){.rows = rows, .cols = cols, .dtype = SD_DT_BF16, .name = name};
    if (bias) {
        t->bias = malloc((size_t)rows * 2);
        nmt_fill_bf16(t->bias, rows, s);
        t->l.bias = t->bias;
        t->l.bias_dtype = SD_DT_BF16;
    }
    if (n < 0) {
        t->l.kind = SD_LINEAR_DENSE;
        t->l.w = t->dense;
        return 0;
    }
    t->values = malloc((size_t)(rows * cols / 2) * 2);
    t->mask = malloc((size_t)(rows * cols / 32) * 4);
    int rc = nmt_random_mask(t->mask, rows, cols, n, m, s);
    if (!rc)
        rc = sd_nm_pack(t->dense, t->mask, rows, cols, t->values, t->mask, NULL);
    if (!rc)
        rc = sd_nm_expand(t->values, t->mask, rows, cols, t->dense);
    t->l.kind = SD_LINEAR_BITMASK;
    t->l.values = t->values;
    t->l.mask = t->mask;
    t->l.nm_n = n;
    t->l.nm_m = m;
    return rc;
}

static void tlin_free(tlin *t)
{
    free(t->dense);
    free(t->values);
    free(t->mask);
    free(t->bias);
}

static sd_model_config test_cfg(int32_t heads, int32_t kv, int32_t hd, int32_t inter, int32_t vocab)
{
    sd_model_config c = {0};
    c.hidden = 64;
    c.n_layers = 1;
    c.n_heads = heads;
    c.n_kv_heads = kv;
    c.head_dim = hd;
    c.intermediate = inter;
    c.vocab = vocab;
    return c;
}

/* The bitmask slice is a valid bitmask tensor: N:M and row slices pass sd_nm_validate;
 * unstructured column slices keep at most values_stride per row. */
static void check_slice_valid(const sd_shard_linear *s, int col_slice)
{
    const sd_linear *l = &s->l;
    if (l->kind != SD_LINEAR_BITMASK)
        return;
    if (l->nm_m > 0 || !col_slice) {
        sd_diag d = {0};
        int rc = sd_nm_validate(l->mask, l->rows, l->cols, l->nm_n, l->nm_m, &d);
        CHECK_MSG(rc == 0, "%s: %s", l->name, d.msg);
        CHECK(s->values_stride == l->cols / 2);
        return;
    }
    for (int64_t r = 0; r < l->rows; r++) {
        int64_t c = 0;
        for (int64_t w = 0; w < l->cols / 32; w++)
            c += __builtin_popcount(l->mask[r * (l->cols / 32) + w]);
        CHECK_MSG(c <= s->values_stride, "row %lld keeps %lld > %lld", (long long)r, (long long)c,
                  (long long)s->values_stride);
    }
}

/* Expanded slice of rank r, as dense bf16 [rows, cols] (malloc'd). */
static uint16_t *expand(const sd_shard_linear *s)
{
    uint16_t *out = malloc((size_t)(s->l.rows * s->l.cols) * 2 + 2);
    sd_diag d = {0};
    if (out && sd_shard_linear_expand(s, out, &d)) {
        fprintf(stderr, "  expand: %s\n", d.msg);
        free(out);
        return NULL;
    }
    return out;
}

/* Shards t in `role` for every rank of `ranks` and reassembles it; checks the result equals
 * the original (weights, mask words and bias bits). */
static void roundtrip(const sd_model_config *cfg, int ranks, sd_shard_role role, const tlin *t)
{
    int64_t rows = t->l.rows, cols = t->l.cols;
    int col_split = role == SD_SHARD_O || role == SD_SHARD_DOWN;
    uint16_t *re = calloc((size_t)(rows * cols), 2);
    uint32_t *mre = t->mask ? calloc((size_t)(rows * cols / 32), 4) : NULL;
    uint16_t *bre = calloc((size_t)rows, 2);
    char *seen = calloc((size_t)rows, 1);
    REQUIRE(re && bre && seen);
    for (int r = 0; r < ranks; r++) {
        sd_shard_plan p;
        sd_diag d = {0};
        REQUIRE(sd_shard_plan_init(&p, cfg, ranks, r, &d) == 0);
        sd_shard_linear s;
        int rc = sd_shard_linear_init(&s, &p, role, &t->l, &d);
        CHECK_MSG(rc == 0, "%s rank %d/%d: %s", t->l.name, r, ranks, d.msg);
        if (rc)
            break;
        check_slice_valid(&s, col_split);
        uint16_t *e = expand(&s);
        CHECK(e != NULL);
        int64_t r0 = 0, c0 = 0, nr = rows, real = s.l.rows;
        if (role == SD_SHARD_Q)
            r0 = (int64_t)p.q_head0 * p.head_dim;
        else if (role == SD_SHARD_K || role == SD_SHARD_V)
            r0 = (int64_t)p.kv_head0 * p.head_dim;
        else if (role == SD_SHARD_GATE || role == SD_SHARD_UP)
            r0 = p.inter0;
        else if (role == SD_SHARD_LM_HEAD)
            r0 = p.vocab0, real = p.n_vocab;
        else if (role == SD_SHARD_O)
            c0 = (int64_t)p.q_head0 * p.head_dim;
        else
            c0 = p.inter0;
        if (col_split) {
            CHECK(s.l.rows == rows);
            for (int64_t i = 0; e && i < rows; i++)
                memcpy(re + i * cols + c0, e + i * s.l.cols, (size_t)s.l.cols * 2);
            for (int64_t i = 0; mre && i < rows; i++)
                memcpy(mre + i * (cols / 32) + c0 / 32, s.l.mask + i * (s.l.cols / 32), (size_t)s.l.cols / 8);
            if (t->bias)
                CHECK_MSG((s.l.bias != NULL) == (r == 0), "row-parallel bias must be on rank 0 only");
            if (s.l.bias)
                memcpy(bre, s.l.bias, (size_t)rows * 2);
        } else {
            nr = real;
            CHECK(s.l.cols == cols);
            if (role == SD_SHARD_LM_HEAD) {
                CHECK(s.l.rows == p.vocab_pad);
                for (int64_t i = real * cols; e && i < s.l.rows * cols; i++)
                    CHECK_MSG(e[i] == 0, "padding row of %s is not zero", t->l.name);
            }
            for (int64_t i = 0; i < nr; i++) {
                /* Replicated KV heads must be identical copies. */
                if (seen[r0 + i] && e)
                    CHECK(memcmp(re + (r0 + i) * cols, e + i * cols, (size_t)cols * 2) == 0);
                seen[r0 + i] = 1;
                if (e)
                    memcpy(re + (r0 + i) * cols, e + i * cols, (size_t)cols * 2);
                if (mre)
                    memcpy(mre + (r0 + i) * (cols / 32), s.l.mask + i * (cols / 32), (size_t)cols / 8);
                if (s.l.bias)
                    bre[r0 + i] = ((const uint16_t *)s.l.bias)[i];
            }
        }
        free(e);
        sd_shard_linear_free(&s);
    }
    for (int64_t i = 0; !col_split && i < rows; i++)
        CHECK_MSG(seen[i], "row %lld of %s is on no rank", (long long)i, t->l.name);
    CHECK_MSG(memcmp(re, t->dense, (size_t)(rows * cols) * 2) == 0, "%s TP=%d: weights differ", t->l.name,
              ranks);
    if (mre)
        CHECK_MSG(memcmp(mre, t->mask, (size_t)(rows * cols / 8)) == 0, "%s TP=%d: masks differ", t->l.name,
                  ranks);
    if (t->bias)
        CHECK_MSG(memcmp(bre, t->bias, (size_t)rows * 2) == 0, "%s TP=%d: bias differs", t->l.name, ranks);
    free(re);
    free(mre);
    free(bre);
    free(seen);
}

static const int patterns[][2] = {{-1, -1}, {2, 4}, {4, 8}, {8, 16}, {16, 32}, {0, 0}};

/* Every role, every pattern, TP = 2, 4, 8 (8 heads, 2 KV heads: replication at 4 and 8). */
static void test_roundtrip_all(void)
{
    sd_model_config cfg = test_cfg(8, 2, 32, 256, 1001);
    uint64_t seed = 1234;
    struct {
        sd_shard_role role;
        const char *name;
        int64_t rows, cols;
        int bias;
    } t[] = {
        {SD_SHARD_Q, "q_proj", 8 * 32, 64, 1},    {SD_SHARD_K, "k_proj", 2 * 32, 64, 1},
        {SD_SHARD_V, "v_proj", 2 * 32, 64, 1},    {SD_SHARD_O, "o_proj", 64, 8 * 32, 1},
        {SD_SHARD_GATE, "gate_proj", 256, 64, 0}, {SD_SHARD_UP, "up_proj", 256, 64, 0},
        {SD_SHARD_DOWN, "down_proj", 64, 256, 0}, {SD_SHARD_LM_HEAD, "lm_head", 1001, 64, 0},
    };
    for (size_t p = 0; p < sizeof patterns / sizeof *patterns; p++)
        for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
            tlin l;
            REQUIRE(tlin_make(&l, t[i].name, t[i].rows, t[i].cols, patterns[p][0], patterns[p][1], t[i].bias,
                              &seed) == 0);
            for (int ranks = 2; ranks <= 8; ranks *= 2)
                roundtrip(&cfg, ranks, t[i].role, &l);
            tlin_free(&l);
        }
}

/* Dense weights of another dtype keep their dtype and bits. */
static void test_roundtrip_f32(void)
{
    sd_model_config cfg = test_cfg(4, 4, 16, 96, 50);
    uint64_t seed = 99;
    float *w = malloc(64 * 96 * sizeof *w);
    REQUIRE(w);
    nmt_fill_f32(w, 64 * 96, &seed);
    sd_linear l = {
        .kind = SD_LINEAR_DENSE, .rows = 64, .cols = 96, .dtype = SD_DT_F32, .w = w, .name = "down"};
    float *re = calloc(64 * 96, sizeof *re);
    for (int r = 0; r < 2; r++) {
        sd_shard_plan p;
        sd_shard_linear s;
        REQUIRE(sd_shard_plan_init(&p, &cfg, 2, r, NULL) == 0);
        REQUIRE(sd_shard_linear_init(&s, &p, SD_SHARD_DOWN, &l, NULL) == 0);
        CHECK(s.l.dtype == SD_DT_F32 && s.l.cols == 48);
        for (int i = 0; i < 64; i++)
            memcpy(re + i * 96 + p.inter0, (const float *)s.l.w + i * 48, 48 * sizeof(float));
        sd_shard_linear_free(&s);
    }
    CHECK(memcmp(re, w, 64 * 96 * sizeof *re) == 0);
    free(re);
    free(w);
}

static void test_embed(void)
{
    sd_model_config cfg = test_cfg(8, 8, 8, 64, 1001);
    uint64_t seed = 7;
    int hidden = 16;
    uint16_t *e = malloc((size_t)1001 * hidden * 2);
    REQUIRE(e);
    nmt_fill_bf16(e, 1001 * hidden, &seed);
    sd_vec v = {.data = e, .n = 1001 * hidden, .dtype = SD_DT_BF16};
    for (int ranks = 2; ranks <= 8; ranks *= 2) {
        int64_t covered = 0;
        for (int r = 0; r < ranks; r++) {
            sd_shard_plan p;
            void *out = NULL;
            REQUIRE(sd_shard_plan_init(&p, &cfg, ranks, r, NULL) == 0);
            REQUIRE(sd_shard_embed(&out, &p, &v, hidden, NULL) == 0);
            CHECK(p.vocab0 == covered || p.n_vocab == 0);
            CHECK(memcmp(out, e + (size_t)p.vocab0 * hidden, (size_t)p.n_vocab * hidden * 2) == 0);
            for (int64_t i = (int64_t)p.n_vocab * hidden; i < (int64_t)p.vocab_pad * hidden; i++)
                CHECK(((uint16_t *)out)[i] == 0);
            covered += p.n_vocab;
            free(out);
        }
        CHECK(covered == 1001);
    }
    free(e);
}

/* The KV heads of each rank, as vLLM assigns them, and the query heads they serve. */
static void test_plan_gqa(void)
{
    sd_model_config cfg = test_cfg(32, 8, 128, 14336, 128256);
    for (int ranks = 1; ranks <= 32; ranks *= 2) {
        for (int r = 0; r < ranks; r++) {
            sd_shard_plan p;
            REQUIRE(sd_shard_plan_init(&p, &cfg, ranks, r, NULL) == 0);
            CHECK(p.n_q_heads * ranks == 32);
            CHECK(p.n_kv_heads == (ranks <= 8 ? 8 / ranks : 1));
            CHECK(p.kv_replicas == (ranks <= 8 ? 1 : ranks / 8));
            /* every local query head's KV head (in the full model) is held by this rank */
            for (int h = p.q_head0; h < p.q_head0 + p.n_q_heads; h++) {
                int kv = h / (32 / 8);
                CHECK_MSG(kv >= p.kv_head0 && kv < p.kv_head0 + p.n_kv_heads, "TP=%d rank %d head %d", ranks,
                          r, h);
            }
        }
    }
}

static void expect_err(const sd_model_config *cfg, int ranks, int code, const char *needle)
{
    sd_shard_plan p;
    sd_diag d = {0};
    int rc = sd_shard_plan_init(&p, cfg, ranks, 0, &d);
    CHECK_MSG(rc == code, "TP=%d: rc %d", ranks, rc);
    CHECK_MSG(strstr(d.msg, needle) != NULL, "message '%s' lacks '%s'", d.msg, needle);
}

static void test_bad_plans(void)
{
    sd_model_config c = test_cfg(6, 6, 32, 256, 100);
    expect_err(&c, 4, SD_EINVAL, "num_attention_heads");
    c = test_cfg(12, 3, 32, 256, 100);
    expect_err(&c, 2, SD_EINVAL, "num_key_value_heads");
    expect_err(&c, 4, SD_EINVAL, "num_key_value_heads");
    c = test_cfg(8, 8, 32, 100, 100);
    expect_err(&c, 8, SD_EINVAL, "intermediate_size");
    expect_err(&c, 0, SD_EINVAL, "out of range");
}

/* A bitmask down_proj whose per-rank columns are not whole mask words cannot be split (dense
 * can); a tensor whose shape disagrees with the config is named. */
static void test_bad_slices(void)
{
    sd_model_config cfg = test_cfg(8, 8, 32, 192, 100); /* 192 / 8 = 24 columns per rank */
    uint64_t seed = 5;
    tlin t;
    REQUIRE(tlin_make(&t, "model.layers.0.mlp.down_proj", 64, 192, 2, 4, 0, &seed) == 0);
    sd_shard_plan p;
    sd_shard_linear s;
    sd_diag d = {0};
    REQUIRE(sd_shard_plan_init(&p, &cfg, 8, 1, NULL) == 0);
    CHECK(sd_shard_linear_init(&s, &p, SD_SHARD_DOWN, &t.l, &d) == SD_ENOTSUP);
    CHECK(strstr(d.msg, "down_proj") && strstr(d.msg, "32-column"));
    t.l.kind = SD_LINEAR_DENSE;
    t.l.w = t.dense;
    REQUIRE(sd_shard_linear_init(&s, &p, SD_SHARD_DOWN, &t.l, &d) == 0);
    CHECK(s.l.cols == 24);
    sd_shard_linear_free(&s);
    memset(&d, 0, sizeof d);
    CHECK(sd_shard_linear_init(&s, &p, SD_SHARD_Q, &t.l, &d) == SD_EINVAL);
    CHECK(strstr(d.msg, "down_proj") && strstr(d.msg, "rows"));
    sd_shard_linear_free(NULL);
    tlin_free(&t);
}

/* A corrupted N:M mask (a word with 17 bits) is caught when its columns are sliced. */
static void test_bad_mask(void)
{
    sd_model_config cfg = test_cfg(2, 2, 32, 64, 100);
    uint64_t seed = 11;
    tlin t;
    REQUIRE(tlin_make(&t, "o_proj", 8, 64, 2, 4, 0, &seed) == 0);
    for (int b = 0; b < 32; b++)
        if (!(t.mask[3 * 2 + 1] & (1u << b))) {
            t.mask[3 * 2 + 1] |= 1u << b;
            break;
        }
    sd_shard_plan p;
    sd_shard_linear s;
    sd_diag d = {0};
    REQUIRE(sd_shard_plan_init(&p, &cfg, 2, 1, NULL) == 0);
    CHECK(sd_shard_linear_init(&s, &p, SD_SHARD_O, &t.l, &d) == SD_EFORMAT);
    CHECK(strstr(d.msg, "row 3") && strstr(d.msg, "o_proj"));
    tlin_free(&t);
}

int main(void)
{
    RUN(test_roundtrip_all);
    RUN(test_roundtrip_f32);
    RUN(test_embed);
    RUN(test_plan_gqa);
    RUN(test_bad_plans);
    RUN(test_bad_slices);
    RUN(test_bad_mask);
    return sd_test_done();
}
