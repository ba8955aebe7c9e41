/* test_warmup: engine/warmup.h — the plan covers every batch size and row count the GPU backend
 * tunes or captures for, within the engine's limits and the KV pool; the driver runs exactly
 * the plan through a recording backend (scratch blocks, no two sequences sharing one, sampling
 * with and without filters), names a failing step, stops when asked; and on the CPU backend a
 * request after the warm-up gets the logits of a fresh backend (the warm-up's K/V leave nothing
 * behind). */
#include "engine/warmup.h"

#include "engine/model.h"
#include "kernels/nm_spmv.h"
#include "tests/harness.h"

#define MODEL "models/tiny"

/* ---- the plan ---- */

static int count_spec(const sd_warmup_step *s, int n, int n_seqs, int each)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += s[i].n_seqs == n_seqs && s[i].each_tokens == each;
    return c;
}

static int count_steps(const sd_warmup_step *s, int n, int n_seqs, int first)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += s[i].n_seqs == n_seqs && s[i].first_tokens == first && s[i].each_tokens == 0;
    return c;
}

static void check_fits(const sd_warmup_opts *o, int32_t kv, int bs, const sd_warmup_step *s, int n)
{
    for (int i = 0; i < n; i++) {
        const int e = s[i].each_tokens;
        const int tokens = e > 1 ? s[i].n_seqs * e : s[i].first_tokens + s[i].n_seqs - 1;
        const int blocks =
            e > 1 ? s[i].n_seqs * ((e + bs - 1) / bs) : (s[i].first_tokens + bs - 1) / bs + s[i].n_seqs - 1;
        CHECK_MSG(s[i].n_seqs >= 1 && s[i].n_seqs <= o->max_seqs && tokens <= o->max_batch_tokens &&
                      s[i].first_tokens <= o->max_len && blocks <= kv,
                  "step %d (%d seqs, first %d) outside max_seqs %d, tokens %d, len %d, blocks %d", i,
                  s[i].n_seqs, s[i].first_tokens, o->max_seqs, o->max_batch_tokens, o->max_len, kv);
    }
}

static void test_plan_covers_every_bucket(void)
{
    const sd_warmup_opts o = {64, 512, 2048, NULL, NULL, 0, 0};
    sd_warmup_step s[SD_WARMUP_MAX_STEPS];
    const int n = sd_warmup_plan(&o, 10000, 16, 64, s);
    check_fits(&o, 10000, 16, s, n);
    for (int b = 1; b <= 64; b *= 2) /* every decode graph bucket */
        CHECK_MSG(count_steps(s, n, b, 1) == 1, "decode of %d sequences", b);
    int buckets = 0, tiled = 0;
    for (int t = 2; t <= SD_NM_MAX_B_TILED;
         t++) { /* every tuned row count as a chunk, up to 64 as logits rows */
        if (sd_nm_tune_bucket(t) != t)
            continue;
        CHECK_MSG(count_steps(s, n, 1, t) == 1, "a prefill chunk of %d tokens", t);
        if (t > SD_NM_MAX_B_WIDE) {
            tiled++;
            continue;
        }
        buckets++;
        CHECK_MSG(count_steps(s, n, t, 2) == 1, "a mixed step of %d sequences", t);
    }
    CHECK(buckets == 21 && tiled == 3); /* 2..16, 24..64 by 8; 128, 192, 256 */
    CHECK_MSG(count_steps(s, n, 1, 512) == 1, "the largest chunk");
    for (int t = 320; t < 512; t += 64) /* cuSPARSELt's padded row counts in between */
        CHECK_MSG(count_steps(s, n, 1, t) == 1, "a prefill chunk of %d tokens", t);
    CHECK_MSG(n == 7 + 2 * buckets + tiled + 1 + 3, "%d steps", n);
    for (int i = 0; i < n; i++) /* no step twice */
        CHECK_MSG(count_steps(s, n, s[i].n_seqs, s[i].first_tokens) == 1, "step %d (%d seqs, first %d) twice",
                  i, s[i].n_seqs, s[i].first_tokens);
    /* a backend that plans no GEMMs per row count (gemm_row_step 0) gets none of those chunks */
    sd_warmup_step s0[SD_WARMUP_MAX_STEPS];
    const int n0 = sd_warmup_plan(&o, 10000, 16, 0, s0);
    CHECK_MSG(n0 == n - 3 && count_steps(s0, n0, 1, 320) == 0 && count_steps(s0, n0, 1, 512) == 1, "%d steps",
              n0);
    /* a largest chunk that is itself a bucket is planned once */
    const sd_warmup_opts o2 = {8, 256, 2048, NULL, NULL, 0, 0};
    const int n2 = sd_warmup_plan(&o2, 10000, 16, 0, s);
    CHECK(count_steps(s, n2, 1, 256) == 1 && count_steps(s, n2, 1, 192) == 1);
}

/* Speculative decoding's steps: every graph bucket of drafting sequences up to spec_max_seqs (and
 * spec_max_seqs itself), each sequence 1 + spec_tokens tokens, within the limits; none when off. */
static void test_plan_spec_steps(void)
{
    sd_warmup_step s[SD_WARMUP_MAX_STEPS];
    const sd_warmup_opts off = {16, 512, 2048, NULL, NULL, 0, 4};
    int n = sd_warmup_plan(&off, 10000, 16, 0, s);
    for (int i = 0; i < n; i++)
        CHECK(s[i].each_tokens == 0);
    const sd_warmup_opts o = {16, 512, 2048, NULL, NULL, 5, 6};
    const int n_on = sd_warmup_plan(&o, 10000, 16, 0, s);
    check_fits(&o, 10000, 16, s, n_on);
    CHECK(count_spec(s, n_on, 1, 6) == 1 && count_spec(s, n_on, 2, 6) == 1 && count_spec(s, n_on, 4, 6) == 1);
    CHECK(count_spec(s, n_on, 6, 6) == 1 && count_spec(s, n_on, 8, 6) == 0);
    CHECK_MSG(n_on == n + 4, "%d steps with drafts, %d without", n_on, n);
    /* the limits hold: 20 tokens a step leave 3 sequences of 6 */
    const sd_warmup_opts small = {16, 20, 2048, NULL, NULL, 5, 6};
    n = sd_warmup_plan(&small, 10000, 16, 0, s);
    check_fits(&small, 10000, 16, s, n);
    CHECK(count_spec(s, n, 2, 6) == 1 && count_spec(s, n, 4, 6) == 0);
}

/* The tune buckets above SD_NM_MAX_B_WIDE and the tiles of the wide kernels (kernels/nm_spmv.h):
 * every row count maps to the bucket above it; tiles cover the vectors once, each at most
 * SD_NM_MAX_B_WIDE, starting at multiples of 8, as few as the limit allows and within 8 of even. */
static void test_tune_buckets_and_tiles(void)
{
    CHECK(sd_nm_tune_bucket(16) == 16 && sd_nm_tune_bucket(17) == 24 && sd_nm_tune_bucket(64) == 64);
    CHECK(sd_nm_tune_bucket(65) == 128 && sd_nm_tune_bucket(128) == 128 && sd_nm_tune_bucket(129) == 192);
    CHECK(sd_nm_tune_bucket(SD_NM_MAX_B_TILED) == SD_NM_MAX_B_TILED);
    for (int B = SD_NM_MAX_B_WIDE + 1; B <= SD_NM_MAX_B_TILED; B++) {
        CHECK_MSG(sd_nm_tune_bucket(B) >= B && sd_nm_tune_bucket(B) - B < 64, "bucket of %d", B);
        const int step = sd_nm_tile_step(B), want = (B + SD_NM_MAX_B_WIDE - 1) / SD_NM_MAX_B_WIDE;
        int tiles = 0, covered = 0, lo = 1 << 30, hi = 0;
        for (int b0 = 0; b0 < B; b0 += step, tiles++) {
            const int len = B - b0 < step ? B - b0 : step;
            CHECK_MSG(b0 % 8 == 0 && len >= 1 && len <= SD_NM_MAX_B_WIDE, "B %d: tile at %d of %d", B, b0,
                      len);
            covered += len;
            lo = len < lo ? len : lo, hi = len > hi ? len : hi;
        }
        CHECK_MSG(covered == B && tiles == want, "B %d: %d tiles cover %d", B, tiles, covered);
        CHECK_MSG(hi - lo < 8 * tiles, "B %d: tiles of %d..%d", B, lo, hi);
    }
    CHECK(sd_nm_tile_step(130) == 48 && sd_nm_tile_step(256) == 64 && sd_nm_tile_step(65) == 40);
}

static void test_plan_respects_limits(void)
{
    sd_warmup_step s[SD_WARMUP_MAX_STEPS];
    /* 3 sequences, 20 tokens a step, 4 blocks of 16 */
    sd_warmup_opts o = {3, 20, 30, NULL, NULL, 0, 0};
    int n = sd_warmup_plan(&o, 4, 16, 0, s);
    check_fits(&o, 4, 16, s, n);
    CHECK(count_steps(s, n, 1, 1) == 1 && count_steps(s, n, 2, 1) == 1 && count_steps(s, n, 3, 1) == 1);
    CHECK(count_steps(s, n, 1, 16) == 1 && count_steps(s, n, 1, 24) == 0); /* 24 > 20 tokens */
    CHECK(count_steps(s, n, 3, 2) == 1 && count_steps(s, n, 4, 2) == 0);   /* 4 > 3 sequences */
    CHECK(count_steps(s, n, 1, 20) == 1); /* the largest chunk: bucket 24's only step */
    CHECK_MSG(n == 3 + 15 + 2 + 1, "%d steps", n);
    /* one sequence of one token at a time: decode only */
    o = (sd_warmup_opts){1, 1, 1, NULL, NULL, 0, 0};
    n = sd_warmup_plan(&o, 1, 16, 0, s);
    CHECK(n == 1 && s[0].n_seqs == 1 && s[0].first_tokens == 1);
    /* a pool of 10 one-token blocks bounds the sequences and the largest chunk */
    o = (sd_warmup_opts){100, 4096, 4096, NULL, NULL, 0, 0};
    n = sd_warmup_plan(&o, 10, 1, 0, s);
    check_fits(&o, 10, 1, s, n);
    CHECK(count_steps(s, n, 8, 1) == 1 && count_steps(s, n, 16, 1) == 0 && count_steps(s, n, 1, 10) == 1);
    /* max_len below the chunk size: the largest chunk is max_len long */
    o = (sd_warmup_opts){16, 2048, 300, NULL, NULL, 0, 0};
    n = sd_warmup_plan(&o, 100000, 16, 0, s);
    check_fits(&o, 100000, 16, s, n);
    CHECK(count_steps(s, n, 1, 300) == 1 && count_steps(s, n, 16, 1) == 1 && count_steps(s, n, 24, 2) == 0);
    /* a budget of 8192 tokens: the largest chunk still planned, the padded chunks up to the plan's room */
    o = (sd_warmup_opts){64, 8192, 8192, NULL, NULL, 0, 0};
    n = sd_warmup_plan(&o, 100000, 16, 64, s);
    check_fits(&o, 100000, 16, s, n);
    CHECK_MSG(n == SD_WARMUP_MAX_STEPS && count_steps(s, n, 1, 8192) == 1 && count_steps(s, n, 1, 320) == 1,
              "%d steps", n);
}

/* ---- the driver, through a recording backend ---- */

typedef struct rec_backend {
    sd_backend base;
    int forwards, samples, greedy, filtered, logprobs, fail_at, rows, logits_seen;
    sd_warmup_step got[SD_WARMUP_MAX_STEPS];
    int bad; /* a check inside the callbacks failed */
} rec_backend;

static int rec_forward(sd_backend *b, const sd_batch_seq *seqs, int n, float *logits, sd_diag *d)
{
    rec_backend *r = (rec_backend *)b;
    if (++r->forwards == r->fail_at)
        return sd_diag_set(d, SD_ENOMEM, "out of device memory (recorded)");
    unsigned char used[4096] = {0};
    const int spec = seqs[0].all_logits && seqs[0].n_tokens > 1; /* a speculative step: all alike */
    int rows = 0;
    for (int i = 0; i < n; i++) {
        const sd_batch_seq *q = &seqs[i];
        r->bad |= q->pos != 0 || q->n_tokens < 1 || (i > 0 && !spec && q->n_tokens != 1);
        r->bad |= spec && (!q->all_logits || q->n_tokens != seqs[0].n_tokens);
        rows += q->all_logits ? q->n_tokens : 1;
        for (int k = 0; k < q->n_tokens; k++)
            r->bad |= q->tokens[k] < 0 || q->tokens[k] >= b->vocab;
        for (int k = 0; k < (q->n_tokens + b->block_size - 1) / b->block_size; k++) {
            const int32_t blk = q->block_table[k];
            r->bad |= blk < 0 || blk >= b->kv_blocks || used[blk]; /* in the pool, one sequence's */
            if (blk >= 0 && blk < 4096)
                used[blk] = 1;
        }
    }
    if (r->forwards - 1 < SD_WARMUP_MAX_STEPS)
        r->got[r->forwards - 1] =
            spec ? (sd_warmup_step){n, 1, seqs[0].n_tokens} : (sd_warmup_step){n, seqs[0].n_tokens, 0};
    r->rows = rows;
    if (logits) { /* a host-sampling backend: the buffer must hold every row */
        for (size_t i = 0; i < (size_t)rows * (size_t)b->vocab; i++)
            logits[i] = 0.f;
        r->logits_seen++;
    }
    return 0;
}

static int rec_sample(sd_backend *b, const sd_sample_req *reqs, int n, sd_sample_out *out, sd_diag *d)
{
    rec_backend *r = (rec_backend *)b;
    r->samples++;
    for (int i = 0; i < n; i++) {
        r->bad |= reqs[i].row < 0 || reqs[i].row >= r->rows;
        r->greedy += reqs[i].greedy;
        r->filtered += !reqs[i].greedy && reqs[i].s.top_k > 0 && reqs[i].s.top_p < 1 && reqs[i].rep_on;
        r->logprobs += reqs[i].n_top > 0;
        out[i].token = 0;
    }
    return 0;
}

static void rec_free(sd_backend *b)
{
    (void)b;
}

static const sd_backend_vtbl rec_vtbl = {"rec", rec_forward, rec_free, rec_sample, 1};
static const sd_backend_vtbl rec_host_vtbl = {"rec-host", rec_forward, rec_free, NULL, 1};

static rec_backend rec_new(const sd_backend_vtbl *vt)
{
    rec_backend r;
    memset(&r, 0, sizeof r);
    r.base = (sd_backend){vt, 100, 16, 2000, 512, 0, 0};
    return r;
}

static void test_driver_runs_the_plan(void)
{
    rec_backend r = rec_new(&rec_vtbl);
    const sd_warmup_opts o = {32, 256, 1024, NULL, NULL, 4, 3}; /* with speculative steps */
    sd_warmup_step plan[SD_WARMUP_MAX_STEPS];
    const int n = sd_warmup_plan(&o, r.base.kv_blocks, r.base.block_size, r.base.gemm_row_step, plan);
    CHECK(count_spec(plan, n, 2, 5) == 1 && count_spec(plan, n, 3, 5) == 1);
    sd_warmup_stats st;
    sd_diag d = {0};
    CHECK(sd_backend_wants_warmup(&r.base));
    REQUIRE(sd_backend_warmup(&r.base, &o, &st, &d) == 0);
    CHECK(!r.bad);
    CHECK_MSG(st.steps == n && r.forwards == n && st.seconds >= 0, "%d steps, %d forwards", st.steps,
              r.forwards);
    for (int i = 0; i < n; i++)
        CHECK_MSG(r.got[i].n_seqs == plan[i].n_seqs && r.got[i].first_tokens == plan[i].first_tokens &&
                      r.got[i].each_tokens == plan[i].each_tokens,
                  "step %d", i);
    CHECK(r.samples == n && r.logits_seen == 0); /* the rows stay on a backend that samples */
    CHECK(r.greedy > 0 && r.filtered > 0 && r.logprobs > 0);
}

static void test_driver_without_sampler(void)
{
    rec_backend r = rec_new(&rec_host_vtbl);
    const sd_warmup_opts o = {16,   128, 512, NULL,
                              NULL, 6,   4}; /* the buffer holds a speculative step's rows */
    sd_warmup_stats st;
    sd_diag d = {0};
    REQUIRE(sd_backend_warmup(&r.base, &o, &st, &d) == 0);
    CHECK(!r.bad && r.samples == 0 && r.logits_seen == r.forwards && st.steps == r.forwards);
}

static void test_driver_names_the_failing_step(void)
{
    rec_backend r = rec_new(&rec_vtbl);
    r.fail_at = 5;
    const sd_warmup_opts o = {32, 256, 1024, NULL, NULL, 0, 0};
    sd_warmup_stats st;
    sd_diag d = {0};
    CHECK(sd_backend_warmup(&r.base, &o, &st, &d) == SD_ENOMEM);
    CHECK_MSG(strstr(d.msg, "warm-up step 5 of") && strstr(d.msg, "(recorded)"), "%s", d.msg);
    CHECK(st.steps == 4 && r.forwards == 5);
}

static int stop_after_3(void *ud)
{
    return ((rec_backend *)ud)->forwards >= 3;
}

static void test_driver_stops_when_asked(void)
{
    rec_backend r = rec_new(&rec_vtbl);
    const sd_warmup_opts o = {32, 256, 1024, stop_after_3, &r, 0, 0};
    sd_warmup_stats st;
    sd_diag d = {0};
    CHECK(sd_backend_warmup(&r.base, &o, &st, &d) == SD_ECANCEL);
    CHECK(st.steps == 3 && r.forwards == 3);
}

/* ---- the CPU backend: nothing of the warm-up's K/V reaches a request ---- */

static sd_backend *cpu_backend(const sd_model *m)
{
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = 2;
    bo.kv_blocks = 64;
    bo.max_batch_tokens = 128;
    sd_backend *b = NULL;
    sd_diag d = {0};
    return sd_backend_cpu_init(&b, m, &bo, &d) == 0 ? b : NULL;
}

/* Logits of every position of a 40-token prompt in blocks 0-2 (which the warm-up wrote). */
static int prompt_logits(sd_backend *b, float *out)
{
    int32_t tok[40], bt[3] = {0, 1, 2};
    for (int i = 0; i < 40; i++)
        tok[i] = (int32_t)((31 * i + 5) % b->vocab);
    const sd_batch_seq q = {0, 40, tok, bt, 1};
    sd_diag d = {0};
    return sd_backend_forward(b, &q, 1, out, &d);
}

static void test_cpu_request_after_warmup(void)
{
    FILE *f = fopen(MODEL "/config.json", "r");
    if (!f)
        SKIP("%s not found", MODEL);
    fclose(f);
    sd_model *m = NULL;
    sd_diag d = {0};
    REQUIRE(sd_model_open(&m, MODEL, &d) == 0);
    sd_backend *warm = cpu_backend(m), *fresh = cpu_backend(m);
    float *a = warm && fresh ? malloc(sizeof(float) * 40 * (size_t)warm->vocab) : NULL;
    float *b = a ? malloc(sizeof(float) * 40 * (size_t)warm->vocab) : NULL;
    if (b) {
        CHECK(!sd_backend_wants_warmup(warm)); /* the server skips it here; the driver still works */
        const sd_warmup_opts o = {8, 128, 256, NULL, NULL, 0, 0};
        sd_warmup_stats st;
        CHECK(sd_backend_warmup(warm, &o, &st, &d) == 0 && st.steps > 20);
        CHECK(prompt_logits(warm, a) == 0 && prompt_logits(fresh, b) == 0);
        CHECK(!memcmp(a, b, sizeof(float) * 40 * (size_t)warm->vocab));
    } else {
        CHECK(b != NULL);
    }
    free(a);
    free(b);
    sd_backend_free(warm);
    sd_backend_free(fresh);
    sd_model_free(m);
}

int main(void)
{
    RUN(test_plan_covers_every_bucket);
    RUN(test_plan_spec_steps);
    RUN(test_plan_respects_limits);
    RUN(test_tune_buckets_and_tiles);
    RUN(test_driver_runs_the_plan);
    RUN(test_driver_without_sampler);
    RUN(test_driver_names_the_failing_step);
    RUN(test_driver_stops_when_asked);
    RUN(test_cpu_request_after_warmup);
    return sd_test_done();
}
