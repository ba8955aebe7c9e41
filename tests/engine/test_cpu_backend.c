/* test_cpu_backend: the CPU forward pass is consistent with itself — a batch equals the
 * sequences run one by one, chunked prefill equals one-shot prefill, all_logits rows equal
 * per-prefix runs, paged block order and thread count do not matter; bad batches are
 * refused. (Agreement with transformers is test_logits_hf.py's job.) */
#include "engine/backend.h"

#include "engine/kv.h"
#include "engine/model.h"
#include "tests/harness.h"

#define MODEL "models/tiny"

typedef struct ctx {
    sd_model *m;
    sd_backend *b;
    int32_t vocab;
} ctx;

static int open_ctx(ctx *c, int threads, int32_t kv_blocks)
{
    memset(c, 0, sizeof *c);
    sd_diag d = {0};
    FILE *f = fopen(MODEL "/config.json", "r");
    if (!f)
        return 1;
    fclose(f);
    if (sd_model_open(&c->m, MODEL, &d) != 0) {
        fprintf(stderr, "  model: %s\n", d.msg);
        return -1;
    }
    sd_backend_opts o;
    sd_backend_opts_default(&o);
    o.n_threads = threads;
    o.kv_blocks = kv_blocks;
    o.max_batch_tokens = 256;
    if (sd_backend_cpu_init(&c->b, c->m, &o, &d) != 0) {
        fprintf(stderr, "  backend: %s\n", d.msg);
        sd_model_free(c->m);
        return -1;
    }
    c->vocab = c->b->vocab;
    return 0;
}

static void close_ctx(ctx *c)
{
    sd_backend_free(c->b);
    sd_model_free(c->m);
}

#define OPEN(c, threads, blocks)                                                                             \
    do {                                                                                                     \
        int orc_ = open_ctx(c, threads, blocks);                                                             \
        if (orc_ > 0)                                                                                        \
            SKIP("%s absent (run from the repository root)", MODEL);                                         \
        REQUIRE(orc_ == 0);                                                                                  \
    } while (0)

/* deterministic pseudo-random tokens */
static void make_tokens(int32_t *t, int n, uint32_t seed, int32_t vocab)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % (uint32_t)vocab);
    }
}

/* max |a-b| / max |b| over n floats */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double md = 0, mb = 1e-30;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)a[i] - b[i]));
        mb = fmax(mb, fabs((double)b[i]));
    }
    return md / mb;
}

#define TIGHT 1e-6

/* Runs a whole prompt through a fresh table (blocks 0.. in order) and returns last logits. */
static int run_alone(ctx *c, const int32_t *toks, int n, float *out, const int32_t *table)
{
    sd_batch_seq s = {.pos = 0, .n_tokens = n, .tokens = toks, .block_table = table, .all_logits = 0};
    return sd_backend_forward(c->b, &s, 1, out, NULL);
}

static void test_batch_equals_single_runs(void)
{
    ctx c;
    OPEN(&c, 0, 64);
    enum { N = 4 };
    int lens[N] = {5, 19, 33, 1};
    int32_t toks[N][40];
    sd_kv *kv = NULL;
    REQUIRE(sd_kv_init(&kv, c.b->kv_blocks, c.b->block_size, NULL) == 0);
    sd_kv_seq seqs[N];
    float *single = malloc((size_t)N * 2 * c.vocab * sizeof(float));
    float *batch = malloc((size_t)N * c.vocab * sizeof(float));
    REQUIRE(single && batch);
    int32_t next[N];
    /* one by one: prefill, then one decode token */
    for (int i = 0; i < N; i++) {
        make_tokens(toks[i], lens[i] + 1, 11u + i, c.vocab);
        next[i] = toks[i][lens[i]];
        sd_kv_seq_init(&seqs[i]);
        REQUIRE(sd_kv_seq_append(kv, &seqs[i], lens[i] + 1) == 0);
        REQUIRE(run_alone(&c, toks[i], lens[i], single + (size_t)(2 * i) * c.vocab, seqs[i].blocks) == 0);
        sd_batch_seq s = {lens[i], 1, &next[i], seqs[i].blocks, 0};
        REQUIRE(sd_backend_forward(c.b, &s, 1, single + (size_t)(2 * i + 1) * c.vocab, NULL) == 0);
    }
    /* batched prefill of all four (their blocks interleave in the pool) */
    sd_batch_seq bs[N];
    for (int i = 0; i < N; i++)
        bs[i] = (sd_batch_seq){0, lens[i], toks[i], seqs[i].blocks, 0};
    REQUIRE(sd_backend_forward(c.b, bs, N, batch, NULL) == 0);
    for (int i = 0; i < N; i++)
        CHECK_MSG(rel_diff(batch + (size_t)i * c.vocab, single + (size_t)(2 * i) * c.vocab, c.vocab) < TIGHT,
                  "prefill of sequence %d differs in a batch", i);
    /* batched decode of all four */
    for (int i = 0; i < N; i++)
        bs[i] = (sd_batch_seq){lens[i], 1, &next[i], seqs[i].blocks, 0};
    REQUIRE(sd_backend_forward(c.b, bs, N, batch, NULL) == 0);
    for (int i = 0; i < N; i++)
        CHECK_MSG(rel_diff(batch + (size_t)i * c.vocab, single + (size_t)(2 * i + 1) * c.vocab, c.vocab) <
                      TIGHT,
                  "decode of sequence %d differs in a batch", i);
    for (int i = 0; i < N; i++)
        sd_kv_seq_release(kv, &seqs[i]);
    sd_kv_free(kv);
    free(single);
    free(batch);
    close_ctx(&c);
}

static void test_mixed_prefill_and_decode_batch(void)
{
    ctx c;
    OPEN(&c, 2, 16);
    int32_t a[30], b[21];
    make_tokens(a, 30, 5, c.vocab);
    make_tokens(b, 21, 6, c.vocab);
    int32_t ta[2] = {0, 1}, tb[2] = {2, 3};
    float *ref = malloc(2 * (size_t)c.vocab * sizeof(float)),
          *out = malloc(2 * (size_t)c.vocab * sizeof(float));
    REQUIRE(ref && out);
    /* references: a's last token decoded after a 29-token prefill; b in one shot */
    REQUIRE(run_alone(&c, a, 29, ref, ta) == 0);
    sd_batch_seq s = {29, 1, a + 29, ta, 0};
    REQUIRE(sd_backend_forward(c.b, &s, 1, ref, NULL) == 0);
    REQUIRE(run_alone(&c, b, 21, ref + c.vocab, tb) == 0);
    /* a decodes while b prefills, in one step (a's cache from above is still there) */
    sd_batch_seq two[2] = {{29, 1, a + 29, ta, 0}, {0, 21, b, tb, 0}};
    REQUIRE(sd_backend_forward(c.b, two, 2, out, NULL) == 0);
    CHECK(rel_diff(out, ref, c.vocab) < TIGHT);
    CHECK(rel_diff(out + c.vocab, ref + c.vocab, c.vocab) < TIGHT);
    free(ref);
    free(out);
    close_ctx(&c);
}

static void test_chunked_prefill_equals_one_shot(void)
{
    ctx c;
    OPEN(&c, 0, 8);
    enum { N = 45 };
    int32_t toks[N + 1];
    make_tokens(toks, N + 1, 99, c.vocab);
    int32_t table[3] = {0, 1, 2};
    float *one = malloc((size_t)c.vocab * sizeof(float)), *chunked = malloc((size_t)c.vocab * sizeof(float));
    REQUIRE(one && chunked);
    REQUIRE(run_alone(&c, toks, N, one, table) == 0);
    int cuts[][4] = {{7, 16, 17, N}, {1, 2, 40, N}, {16, 32, N, N}, {15, 33, 44, N}};
    for (int k = 0; k < 4; k++) {
        int pos = 0;
        for (int j = 0; j < 4 && pos < N; j++) {
            sd_batch_seq s = {pos, cuts[k][j] - pos, toks + pos, table, 0};
            REQUIRE(sd_backend_forward(c.b, &s, 1, chunked, NULL) == 0);
            pos = cuts[k][j];
        }
        CHECK_MSG(rel_diff(chunked, one, c.vocab) < TIGHT, "chunking %d %d %d differs", cuts[k][0],
                  cuts[k][1], cuts[k][2]);
    }
    free(one);
    free(chunked);
    close_ctx(&c);
}

static void test_all_logits_rows_equal_prefix_runs(void)
{
    ctx c;
    OPEN(&c, 0, 8);
    enum { N = 35 };
    int32_t toks[N];
    make_tokens(toks, N, 3, c.vocab);
    int32_t table[3] = {2, 0, 1}; /* the pages need not be in order */
    float *all = malloc((size_t)N * c.vocab * sizeof(float)), *one = malloc((size_t)c.vocab * sizeof(float));
    REQUIRE(all && one);
    sd_batch_seq s = {0, N, toks, table, 1};
    REQUIRE(sd_backend_forward(c.b, &s, 1, all, NULL) == 0);
    int32_t plain[3] = {5, 6, 7};
    for (int i = 0; i < N; i++) {
        REQUIRE(run_alone(&c, toks, i + 1, one, plain) == 0);
        CHECK_MSG(rel_diff(all + (size_t)i * c.vocab, one, c.vocab) < TIGHT, "row %d", i);
    }
    free(all);
    free(one);
    close_ctx(&c);
}

static void test_thread_count_does_not_matter(void)
{
    ctx c1, c3;
    OPEN(&c1, 1, 4);
    if (open_ctx(&c3, 3, 4) != 0) {
        close_ctx(&c1);
        REQUIRE(0);
    }
    int32_t toks[40];
    make_tokens(toks, 40, 17, c1.vocab);
    int32_t table[3] = {0, 1, 2};
    float *a = malloc((size_t)c1.vocab * sizeof(float)), *b = malloc((size_t)c1.vocab * sizeof(float));
    REQUIRE(a && b);
    REQUIRE(run_alone(&c1, toks, 40, a, table) == 0);
    REQUIRE(run_alone(&c3, toks, 40, b, table) == 0);
    CHECK(rel_diff(a, b, c1.vocab) < TIGHT);
    free(a);
    free(b);
    close_ctx(&c1);
    close_ctx(&c3);
}

static void test_bad_batches_are_refused(void)
{
    ctx c;
    OPEN(&c, 1, 4);
    float *out = malloc((size_t)c.vocab * sizeof(float));
    REQUIRE(out);
    int32_t toks[3] = {1, 2, 3}, table[4] = {0, 1, 2, 3}, bad_table[1] = {4};
    sd_diag d = {0};
    int32_t bad_tok[1] = {c.vocab};
    sd_batch_seq s = {0, 1, bad_tok, table, 0};
    CHECK(sd_backend_forward(c.b, &s, 1, out, &d) == SD_EINVAL && strstr(d.msg, "token"));
    s = (sd_batch_seq){0, 3, toks, bad_table, 0};
    CHECK(sd_backend_forward(c.b, &s, 1, out, &d) == SD_EINVAL && strstr(d.msg, "block"));
    s = (sd_batch_seq){sd_model_cfg(c.m)->max_pos, 1, toks, table, 0};
    CHECK(sd_backend_forward(c.b, &s, 1, out, &d) == SD_ERANGE);
    s = (sd_batch_seq){0, 0, toks, table, 0};
    CHECK(sd_backend_forward(c.b, &s, 1, out, &d) == SD_EINVAL);
    s = (sd_batch_seq){0, 300, toks, table, 0}; /* > max_batch_tokens: refused before reading */
    CHECK(sd_backend_forward(c.b, &s, 1, out, &d) == SD_EINVAL && strstr(d.msg, "max_batch_tokens"));
    CHECK(sd_backend_forward(c.b, &s, 0, out, &d) == SD_EINVAL);
    free(out);
    close_ctx(&c);
}

int main(void)
{
    RUN(test_batch_equals_single_runs);
    RUN(test_mixed_prefill_and_decode_batch);
    RUN(test_chunked_prefill_equals_one_shot);
    RUN(test_all_logits_rows_equal_prefix_runs);
    RUN(test_thread_count_does_not_matter);
    RUN(test_bad_batches_are_refused);
    return sd_test_done();
}
