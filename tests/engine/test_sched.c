/* test_sched: the continuous-batching scheduler driven step by step (no engine thread) on the
 * real CPU backend and the bundled tiny model: batching, preemption and chunked prefill give
 * the tokens of solo runs, stop strings with hold-back, cancel, seeded sampling, prompt
 * logprobs against a direct forward pass, logit_bias, EOS, limits. */
#include "engine/sched.h"

#include "tests/engine/sched_util.h"

static const char *PROMPTS[] = {
    "import numpy as np\n\ndef",
    "The quick brown fox jumps over the lazy dog, and then",
    "class Config:\n    \"\"\"Settings for the server.\"\"\"\n\n    def __init__(self,",
    "# Installation\n\nTo install the package, run",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
};
#define N_PROMPTS 5

/* Solo greedy runs of every prompt: the reference for the batched runs. */
static res SOLO[N_PROMPTS];
static int32_t *IDS[N_PROMPTS], NIDS[N_PROMPTS];
#define GEN 40

static int solo_ready(void)
{
    static int done = 0, ok = 0;
    if (done)
        return ok;
    done = 1;
    sd_backend *b = backend_new(64, 16);
    if (!b)
        return 0;
    sd_engine_opts o;
    opts(&o, 1, 512);
    ok = 1;
    for (int i = 0; i < N_PROMPTS; i++) {
        IDS[i] = encode(PROMPTS[i], &NIDS[i]);
        sd_request_params p;
        greedy_params(&p, IDS[i], NIDS[i], GEN);
        if (!IDS[i] || run_all(b, &o, &p, &SOLO[i], 1, NULL) < 0 || SOLO[i].n != GEN)
            ok = 0;
    }
    sd_backend_free(b);
    return ok;
}

static void check_same_as_solo(res *rs, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        CHECK_MSG(rs[i].n_final == 1 && rs[i].n_error == 0, "%s: request %d final events %d errors %d", what,
                  i, rs[i].n_final, rs[i].n_error);
        CHECK_MSG(rs[i].n == SOLO[i].n, "%s: request %d made %d tokens, solo %d", what, i, rs[i].n,
                  SOLO[i].n);
        int first_diff = -1;
        for (int k = 0; k < rs[i].n && k < SOLO[i].n; k++)
            if (rs[i].tok[k] != SOLO[i].tok[k] && first_diff < 0)
                first_diff = k;
        CHECK_MSG(first_diff < 0, "%s: request %d differs from its solo run at token %d", what, i,
                  first_diff);
        CHECK_MSG(rs[i].finish == SD_FINISH_LENGTH, "%s: finish %d", what, rs[i].finish);
        CHECK(rs[i].done_gen == GEN && rs[i].done_prompt == NIDS[i]);
        CHECK(strcmp(rs[i].text, SOLO[i].text) == 0);
    }
}

static void test_batch_equals_solo(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    sd_request_params ps[N_PROMPTS];
    res rs[N_PROMPTS] = {0};
    for (int i = 0; i < N_PROMPTS; i++)
        greedy_params(&ps[i], IDS[i], NIDS[i], GEN);
    sd_engine_opts o;
    opts(&o, 8, 512);
    sd_engine_stats st;
    CHECK(run_all(b, &o, ps, rs, N_PROMPTS, &st) == 0);
    check_same_as_solo(rs, N_PROMPTS, "batched");
    CHECK(st.preemptions == 0);
    CHECK(st.kv_blocks_used == 0);
    CHECK(st.generation_tokens == (uint64_t)N_PROMPTS * GEN);
    /* one step per generated token, prefill included: everything ran side by side */
    CHECK_MSG(st.steps == GEN, "steps %llu", (unsigned long long)st.steps);
    for (int i = 0; i < N_PROMPTS; i++)
        res_reset(&rs[i]);
    sd_backend_free(b);
}

static void test_preemption_equals_solo(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    /* 8 blocks of 8 tokens = 64 positions for 5 sequences of ~60: preemption is unavoidable */
    sd_backend *b = backend_new(8, 8);
    REQUIRE(b);
    sd_request_params ps[N_PROMPTS];
    res rs[N_PROMPTS] = {0};
    for (int i = 0; i < N_PROMPTS; i++)
        greedy_params(&ps[i], IDS[i], NIDS[i], GEN);
    sd_engine_opts o;
    opts(&o, 8, 512);
    sd_engine_stats st;
    CHECK(run_all(b, &o, ps, rs, N_PROMPTS, &st) == 0);
    check_same_as_solo(rs, N_PROMPTS, "preempted");
    CHECK_MSG(st.preemptions > 0, "no preemption happened");
    CHECK(st.kv_blocks_used == 0 && st.kv_blocks_total == 8);
    CHECK(st.running == 0 && st.waiting == 0);
    for (int i = 0; i < N_PROMPTS; i++)
        res_reset(&rs[i]);
    sd_backend_free(b);
}

static void test_chunked_prefill_equals_solo(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    int budgets[] = {5, 7, 16};
    for (int t = 0; t < 3; t++) {
        sd_request_params ps[N_PROMPTS];
        res rs[N_PROMPTS] = {0};
        for (int i = 0; i < N_PROMPTS; i++)
            greedy_params(&ps[i], IDS[i], NIDS[i], GEN);
        sd_engine_opts o;
        opts(&o, 4, budgets[t]);
        sd_engine_stats st;
        CHECK(run_all(b, &o, ps, rs, N_PROMPTS, &st) == 0);
        char what[64];
        snprintf(what, sizeof what, "max_batch_tokens %d", budgets[t]);
        check_same_as_solo(rs, N_PROMPTS, what);
        CHECK(st.steps > GEN); /* prompts longer than the budget took several steps */
        for (int i = 0; i < N_PROMPTS; i++)
            res_reset(&rs[i]);
    }
    sd_backend_free(b);
}

/* Lower priority values run first; equal priorities keep their arrival order. */
static int ORDER[8], N_ORDER;
static void on_order(void *ud, const sd_event *ev)
{
    if (ev->type == SD_EV_DONE)
        ORDER[N_ORDER++] = (int)ev->req_id;
    (void)ud;
}

static void test_priority_order(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 1, 512);
    sd_sched *s = NULL;
    REQUIRE(sd_sched_init(&s, M, b, &o, NULL) == 0);
    uint64_t prio[4] = {5, 0, 5, 1};
    for (int i = 0; i < 4; i++) {
        sd_request_params p;
        greedy_params(&p, IDS[0], NIDS[0], 2);
        p.priority = prio[i];
        sd_sched_req *r = NULL;
        REQUIRE(sd_sched_req_new(s, &p, on_order, NULL, (uint64_t)i + 1, &r, NULL) == 0);
        sd_sched_add(s, r);
    }
    N_ORDER = 0;
    while (sd_sched_has_work(s))
        REQUIRE(sd_sched_step(s, NULL) == 0);
    CHECK(N_ORDER == 4);
    CHECK(ORDER[0] == 2 && ORDER[1] == 4 && ORDER[2] == 1 && ORDER[3] == 3);
    sd_sched_free(s);
    sd_backend_free(b);
}

static void test_cancel_frees_blocks(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 2, 512);
    sd_sched *s = NULL;
    REQUIRE(sd_sched_init(&s, M, b, &o, NULL) == 0);
    res rs[3] = {0};
    for (int i = 0; i < 3; i++) {
        sd_request_params p;
        greedy_params(&p, IDS[i], NIDS[i], GEN);
        sd_sched_req *r = NULL;
        REQUIRE(sd_sched_req_new(s, &p, on_event, &rs[i], (uint64_t)i + 1, &r, NULL) == 0);
        sd_sched_add(s, r);
    }
    for (int k = 0; k < 5; k++)
        REQUIRE(sd_sched_step(s, NULL) == 0);
    sd_engine_stats st;
    sd_sched_stats(s, &st);
    CHECK(st.running == 2 && st.waiting == 1 && st.kv_blocks_used > 0);
    int32_t used_before = st.kv_blocks_used;
    sd_sched_cancel(s, 1);     /* running */
    sd_sched_cancel(s, 3);     /* waiting */
    sd_sched_cancel(s, 99);    /* unknown: ignored */
    CHECK(rs[0].n_final == 0); /* nothing happens until the next step */
    REQUIRE(sd_sched_step(s, NULL) == 0);
    CHECK_MSG(rs[0].n_final == 1 && rs[0].finish == SD_FINISH_ABORT && rs[0].n == 5,
              "final %d finish %d n %d", rs[0].n_final, rs[0].finish, rs[0].n);
    CHECK(rs[2].n_final == 1 && rs[2].finish == SD_FINISH_ABORT && rs[2].n == 0);
    sd_sched_stats(s, &st);
    CHECK(st.running == 1 && st.waiting == 0 && st.kv_blocks_used < used_before);
    while (sd_sched_has_work(s))
        REQUIRE(sd_sched_step(s, NULL) == 0);
    CHECK(rs[1].n_final == 1 && rs[1].finish == SD_FINISH_LENGTH && rs[1].n == GEN);
    for (int k = 0; k < GEN; k++)
        CHECK(rs[1].tok[k] == SOLO[1].tok[k]);
    sd_sched_stats(s, &st);
    CHECK(st.kv_blocks_used == 0);
    for (int i = 0; i < 3; i++) {
        CHECK(rs[i].events_after_final == 0);
        res_reset(&rs[i]);
    }
    sd_sched_free(s);
    sd_backend_free(b);
}

/* ---- stop strings ---- */

/* Byte offset of token k's text in the solo run's text. */
static size_t tok_off(const res *r, int k)
{
    size_t off = 0;
    for (int i = 0; i < k; i++)
        off += r->tok_text_len[i];
    return off;
}

static int printable(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] >= 0x7f)
            return 0;
    return 1;
}

/* Runs SOLO[which]'s prompt greedily with the given stop strings. */
static void run_with_stops(int which, const char **stops, int n_stop, res *out)
{
    sd_backend *b = backend_new(64, 16);
    if (!b)
        return;
    sd_request_params p;
    greedy_params(&p, IDS[which], NIDS[which], GEN);
    for (int i = 0; i < n_stop; i++)
        p.stop[i] = stops[i];
    p.n_stop = n_stop;
    sd_engine_opts o;
    opts(&o, 4, 512);
    run_all(b, &o, &p, out, 1, NULL);
    sd_backend_free(b);
}

/* The output is the solo text up to the first occurrence of the stop string, finish STOP. */
static void check_stopped(const res *r, const res *solo, const char *stop)
{
    const char *at = strstr(solo->text, stop);
    REQUIRE(at);
    size_t want = (size_t)(at - solo->text);
    CHECK_MSG(r->text_len == want && memcmp(r->text, solo->text, want) == 0,
              "stop \"%s\": got %zu bytes, want %zu", stop, r->text_len, want);
    CHECK(r->n_final == 1 && r->finish == SD_FINISH_STOP);
    CHECK(r->n < solo->n);
    for (int k = 0; k < r->n; k++)
        CHECK(r->tok[k] == solo->tok[k]);
}

static void test_stop_string_in_continuation(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    const res *solo = &SOLO[1];
    /* a 3-byte printable piece from the middle of the greedy continuation */
    size_t at = solo->text_len / 2;
    while (at + 3 < solo->text_len && !printable(solo->text + at, 3))
        at++;
    REQUIRE(at + 3 < solo->text_len);
    char stop[4] = {0};
    memcpy(stop, solo->text + at, 3);
    res r = {0};
    const char *stops[] = {"\x01never", stop};
    run_with_stops(1, stops, 2, &r);
    check_stopped(&r, solo, stop);
    res_reset(&r);
}

static void test_stop_string_spanning_tokens(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    const res *solo = &SOLO[2];
    /* the end of token k and the start of token k+1, first occurring exactly there */
    for (int k = solo->n / 3; k + 2 < solo->n; k++) {
        size_t a = solo->tok_text_len[k], c = solo->tok_text_len[k + 1];
        if (a < 1 || c < 1)
            continue;
        size_t la = a < 2 ? a : 2, lc = c < 2 ? c : 2;
        size_t start = tok_off(solo, k + 1) - la;
        char stop[8] = {0};
        memcpy(stop, solo->text + start, la + lc);
        if (!printable(stop, la + lc) || strstr(solo->text, stop) != solo->text + start)
            continue;
        res r = {0};
        const char *stops[] = {stop};
        run_with_stops(2, stops, 1, &r);
        check_stopped(&r, solo, stop);
        CHECK_MSG(r.n == k + 2, "stopped after %d tokens, the match ends in token %d", r.n, k + 1);
        res_reset(&r);
        return;
    }
    SKIP("no token boundary with a unique printable 2+2-byte window");
}

static void test_stop_holdback_released(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    const res *solo = &SOLO[3];
    int k = solo->n / 2;
    while (k + 1 < solo->n && !(solo->tok_text_len[k] > 0 && printable(solo->text + tok_off(solo, k), 1)))
        k++;
    REQUIRE(k + 1 < solo->n);
    /* token k's text, then a byte the model never writes: matches partially, then fails */
    char stop1[64] = {0}, stop2[64] = {0};
    size_t lk = solo->tok_text_len[k] < 60 ? solo->tok_text_len[k] : 60;
    memcpy(stop1, solo->text + tok_off(solo, k), lk);
    stop1[lk] = '\x01';
    /* the same for the last token: its hold-back must be flushed at the end */
    int last = solo->n - 1;
    size_t ll = solo->tok_text_len[last] < 60 ? solo->tok_text_len[last] : 60;
    memcpy(stop2, solo->text + tok_off(solo, last), ll);
    stop2[ll] = '\x01';
    res r = {0};
    const char *stops[] = {stop1, stop2};
    run_with_stops(3, stops, ll ? 2 : 1, &r);
    CHECK(r.n_final == 1 && r.finish == SD_FINISH_LENGTH && r.n == solo->n);
    CHECK_MSG(r.text_len == solo->text_len && memcmp(r.text, solo->text, r.text_len) == 0,
              "text differs from the run without stop strings");
    /* released text is always a prefix of the full text, and token k's text was held back */
    size_t got = 0;
    for (int i = 0; i < r.n; i++) {
        got += r.tok_text_len[i];
        CHECK(got <= tok_off(solo, i + 1));
    }
    CHECK_MSG(tok_off(&r, k + 1) < tok_off(solo, k + 1), "token %d's text was not held back", k);
    if (ll)
        CHECK(r.tok_text_len[last] > solo->tok_text_len[last] || tok_off(&r, last) == tok_off(solo, last));
    res_reset(&r);
}

/* ---- sampling and logprobs ---- */

static void test_seeded_sampling(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 4, 512);
    res a = {0}, c = {0}, other = {0};
    res batch[3] = {0};
    sd_request_params p[3];
    greedy_params(&p[0], IDS[0], NIDS[0], 30);
    p[0].sampling.temperature = 1.0f;
    p[0].sampling.top_p = 0.95f;
    p[0].sampling.seed = 1234;
    CHECK(run_all(b, &o, p, &a, 1, NULL) == 0);
    /* the same request next to others gives the same tokens */
    greedy_params(&p[1], IDS[1], NIDS[1], 30);
    p[2] = p[0];
    p[2].sampling.seed = 99;
    CHECK(run_all(b, &o, p, batch, 3, NULL) == 0);
    CHECK(run_all(b, &o, p, &c, 1, NULL) == 0);
    CHECK(a.n == 30 && batch[0].n == 30 && c.n == 30);
    int same_batch = 1, same_again = 1, same_other = 1;
    for (int k = 0; k < 30; k++) {
        same_batch &= a.tok[k] == batch[0].tok[k];
        same_again &= a.tok[k] == c.tok[k];
        same_other &= a.tok[k] == batch[2].tok[k];
    }
    CHECK(same_batch && same_again);
    CHECK_MSG(!same_other, "another seed gave the same 30 sampled tokens");
    res_reset(&a);
    res_reset(&c);
    res_reset(&other);
    for (int i = 0; i < 3; i++)
        res_reset(&batch[i]);
    sd_backend_free(b);
}

/* logit_bias through the scheduler: the request keeps its own copy (the caller's array is
 * scribbled over before the first step), +100 forces a token, -100 bans the greedy choice, and
 * a batch mixes biased and unbiased requests without leaking one into the other. */
static void test_logit_bias(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 4, 512);
    sd_sched *s = NULL;
    sd_diag d = {0};
    REQUIRE(sd_sched_init(&s, M, b, &o, NULL) == 0);
    const int32_t forced = 300, banned = SOLO[1].tok[0];
    sd_logit_bias *bias = malloc(sizeof *bias * 2);
    REQUIRE(bias);
    bias[0] = (sd_logit_bias){forced, 100.0f};
    bias[1] = (sd_logit_bias){banned, -100.0f};
    res rs[3] = {0};
    sd_request_params p[3];
    greedy_params(&p[0], IDS[0], NIDS[0], 12);
    p[0].sampling.bias = bias, p[0].sampling.n_bias = 1;
    greedy_params(&p[1], IDS[1], NIDS[1], 12);
    p[1].sampling.bias = bias + 1, p[1].sampling.n_bias = 1;
    greedy_params(&p[2], IDS[2], NIDS[2], 12);
    for (int i = 0; i < 3; i++) {
        sd_sched_req *r = NULL;
        REQUIRE(sd_sched_req_new(s, &p[i], on_event, &rs[i], (uint64_t)i + 1, &r, &d) == 0);
        sd_sched_add(s, r);
    }
    bias[0] = bias[1] = (sd_logit_bias){0, 0.0f};
    free(bias);
    for (int guard = 0; sd_sched_has_work(s) && guard < 10000; guard++)
        REQUIRE(sd_sched_step(s, &d) == 0);
    CHECK(rs[0].n == 12 && rs[1].n == 12 && rs[2].n == 12);
    for (int k = 0; k < rs[0].n; k++)
        CHECK_MSG(rs[0].tok[k] == forced, "step %d: token %d, forced %d", k, (int)rs[0].tok[k], (int)forced);
    for (int k = 0; k < rs[1].n; k++)
        CHECK_MSG(rs[1].tok[k] != banned, "step %d: the banned token %d", k, (int)banned);
    CHECK_MSG(rs[1].tok[0] != SOLO[1].tok[0], "banning the greedy first token left it first");
    for (int k = 0; k < rs[2].n; k++)
        CHECK(rs[2].tok[k] == SOLO[2].tok[k]);
    for (int i = 0; i < 3; i++)
        res_reset(&rs[i]);

    /* refused at submit: out of the vocabulary, twice the same token, not finite */
    sd_sched_req *r = NULL;
    sd_logit_bias bad[2] = {{1 << 30, 1.0f}, {5, 1.0f}};
    greedy_params(&p[0], IDS[0], NIDS[0], 4);
    p[0].sampling.bias = bad, p[0].sampling.n_bias = 1;
    CHECK(sd_sched_req_new(s, &p[0], on_event, NULL, 9, &r, &d) == SD_EINVAL && strstr(d.msg, "logit_bias"));
    bad[0] = (sd_logit_bias){5, 2.0f};
    p[0].sampling.n_bias = 2;
    CHECK(sd_sched_req_new(s, &p[0], on_event, NULL, 9, &r, &d) == SD_EINVAL && strstr(d.msg, "twice"));
    bad[0] = (sd_logit_bias){4, NAN};
    CHECK(sd_sched_req_new(s, &p[0], on_event, NULL, 9, &r, &d) == SD_EINVAL && strstr(d.msg, "finite"));
    sd_sched_free(s);
    sd_backend_free(b);
}

static void check_prompt_logprobs(sd_backend *b, int budget)
{
    int which = 2;
    int32_t n = NIDS[which];
    /* reference: one forward pass with a row per position on a fresh block table */
    int32_t nb = (n + 15) / 16;
    int32_t table[64];
    for (int32_t i = 0; i < nb; i++)
        table[i] = i;
    float *rows = malloc(sizeof *rows * (size_t)n * (size_t)b->vocab);
    REQUIRE(rows);
    sd_batch_seq q = {.pos = 0, .n_tokens = n, .tokens = IDS[which], .block_table = table, .all_logits = 1};
    REQUIRE(sd_backend_forward(b, &q, 1, rows, NULL) == 0);

    res r = {0};
    sd_request_params p;
    greedy_params(&p, IDS[which], n, 3);
    p.prompt_logprobs = 1;
    p.logprobs = 2;
    sd_engine_opts o;
    opts(&o, 4, budget);
    CHECK(run_all(b, &o, &p, &r, 1, NULL) == 0);
    CHECK(r.n_prompt_ev == 1 && r.n == 3 && r.n_top == 2);
    REQUIRE(r.plp);
    float worst = 0;
    for (int32_t i = 0; i + 1 < n; i++) {
        const float *row = rows + (size_t)i * (size_t)b->vocab;
        float want = sd_logprob_of(row, b->vocab, IDS[which][i + 1]);
        float diff = fabsf(r.plp[i] - want);
        worst = diff > worst ? diff : worst;
        int32_t top;
        float top_lp;
        sd_logprobs_top(row, b->vocab, 1, &top, &top_lp);
        CHECK_MSG(r.ptop[i] == top, "position %d: top %d, want %d", i, r.ptop[i], top);
    }
    CHECK_MSG(worst < 1e-4f, "budget %d: prompt logprobs differ by %g", budget, worst);
    /* the first generated token is the last row's argmax, with its logprob */
    const float *last = rows + (size_t)(n - 1) * (size_t)b->vocab;
    int32_t top[2];
    float top_lp[2];
    sd_logprobs_top(last, b->vocab, 2, top, top_lp);
    CHECK(r.tok[0] == top[0] && r.top_id[0][0] == top[0] && r.top_id[0][1] == top[1]);
    CHECK(fabsf(r.lp[0] - top_lp[0]) < 1e-4f);
    free(rows);
    res_reset(&r);
}

static void test_prompt_logprobs(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    check_prompt_logprobs(b, 512);
    check_prompt_logprobs(b, 6); /* chunked prefill */
    sd_backend_free(b);
}

static void test_max_tokens_zero_prompt_logprobs(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    res r = {0};
    sd_request_params p;
    greedy_params(&p, IDS[0], NIDS[0], 0);
    p.prompt_logprobs = 1;
    sd_engine_opts o;
    opts(&o, 4, 512);
    CHECK(run_all(b, &o, &p, &r, 1, NULL) == 0);
    CHECK(r.n_prompt_ev == 1 && r.n == 0 && r.n_final == 1 && r.finish == SD_FINISH_LENGTH);
    CHECK(r.done_gen == 0 && r.done_prompt == NIDS[0]);
    res_reset(&r);
    sd_backend_free(b);
}

/* ---- EOS ---- */

/* Greedy continuations that contain an EOS id (found with ignore_eos) stop right there when
 * EOS is honoured: the EOS token is the last TOKEN event, its text is empty, finish STOP. */
static void test_eos_stops(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    const int32_t *eos = NULL;
    int n_eos = sd_model_eos_ids(M, &eos);
    REQUIRE(n_eos > 0);
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 8, 512);
    static const char *texts[] = {"\n", "import sys\n\n\nif __name__ == \"__main__\":\n    main()\n",
                                  "    return result\n", "# end of file\n", "pass\n"};
    int found = 0;
    for (int t = 0; t < 5 && !found; t++) {
        int32_t n = 0, *ids = encode(texts[t], &n);
        REQUIRE(ids);
        res full = {0}, r = {0};
        sd_request_params p;
        greedy_params(&p, ids, n, 120);
        CHECK(run_all(b, &o, &p, &full, 1, NULL) == 0);
        int at = -1;
        for (int k = 0; k < full.n && at < 0; k++)
            for (int j = 0; j < n_eos; j++)
                if (full.tok[k] == eos[j])
                    at = k;
        if (at >= 0) {
            found = 1;
            p.ignore_eos = 0;
            CHECK(run_all(b, &o, &p, &r, 1, NULL) == 0);
            CHECK_MSG(r.n == at + 1 && r.finish == SD_FINISH_STOP && r.n_final == 1,
                      "n %d, EOS at %d, finish %d", r.n, at, r.finish);
            CHECK(memcmp(r.tok, full.tok, sizeof(int32_t) * (size_t)(at + 1)) == 0);
            CHECK(r.tok_text_len[at] == 0 && r.done_gen == at + 1);
            CHECK(r.text_len == tok_off(&full, at) && memcmp(r.text, full.text, r.text_len) == 0);
        }
        res_reset(&full);
        res_reset(&r);
        free(ids);
    }
    sd_backend_free(b);
    if (!found)
        SKIP("no greedy continuation of the test prompts reaches EOS");
}

static void test_limits(void)
{
    if (!solo_ready())
        SKIP("solo runs failed");
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 4, 512);
    o.max_model_len = 64;
    sd_sched *s = NULL;
    REQUIRE(sd_sched_init(&s, M, b, &o, NULL) == 0);
    CHECK(sd_sched_max_model_len(s) == 64);
    int32_t ids[100] = {0};
    for (int i = 0; i < 100; i++)
        ids[i] = IDS[0][i % NIDS[0]];
    sd_request_params p;
    sd_sched_req *r = NULL;
    sd_diag d = {0};
    greedy_params(&p, ids, 10, 55);
    CHECK(sd_sched_req_new(s, &p, on_event, NULL, 1, &r, &d) == SD_EINVAL);
    CHECK_MSG(strstr(d.msg, "max_tokens") != NULL, "message: %s", d.msg);
    greedy_params(&p, ids, 70, 1);
    CHECK(sd_sched_req_new(s, &p, on_event, NULL, 1, &r, &d) == SD_EINVAL);
    CHECK_MSG(strstr(d.msg, "prompt") != NULL && strstr(d.msg, "70") != NULL, "message: %s", d.msg);
    greedy_params(&p, ids, 10, 54); /* exactly the limit */
    CHECK(sd_sched_req_new(s, &p, on_event, NULL, 1, &r, &d) == 0);
    sd_sched_req_free(r);
    greedy_params(&p, ids, 10, 5);
    p.logprobs = SD_MAX_TOP_LOGPROBS + 1;
    CHECK(sd_sched_req_new(s, &p, on_event, NULL, 1, &r, &d) == SD_EINVAL && strstr(d.msg, "logprobs"));
    p.logprobs = -1;
    ids[3] = 1 << 30;
    CHECK(sd_sched_req_new(s, &p, on_event, NULL, 1, &r, &d) == SD_EINVAL && strstr(d.msg, "position 3"));
    ids[3] = 0;
    p.n_stop = 1;
    p.stop[0] = "";
    CHECK(sd_sched_req_new(s, &p, on_event, NULL, 1, &r, &d) == SD_EINVAL && strstr(d.msg, "stop"));
    sd_sched_free(s);

    /* the KV pool caps the context too: 4 blocks of 16 tokens */
    sd_backend *small = backend_new(4, 16);
    REQUIRE(small);
    o.max_model_len = 0;
    REQUIRE(sd_sched_init(&s, M, small, &o, NULL) == 0);
    CHECK(sd_sched_max_model_len(s) == 64);
    greedy_params(&p, ids, 10, 60);
    CHECK(sd_sched_req_new(s, &p, on_event, NULL, 1, &r, &d) == SD_EINVAL);
    sd_sched_free(s);
    sd_backend_free(small);
    sd_backend_free(b);
}

int main(void)
{
    sd_diag d = {0};
    int rc = sd_model_open(&M, MODEL_DIR, &d);
    if (rc < 0 || !sd_model_tokenizer(M)) {
        fprintf(stderr, "  SKIP: %s: %s\n", MODEL_DIR, sd_diag_str(&d, rc));
        return sd_test_done();
    }
    RUN(test_batch_equals_solo);
    RUN(test_preemption_equals_solo);
    RUN(test_chunked_prefill_equals_solo);
    RUN(test_priority_order);
    RUN(test_cancel_frees_blocks);
    RUN(test_stop_string_in_continuation);
    RUN(test_stop_string_spanning_tokens);
    RUN(test_stop_holdback_released);
    RUN(test_seeded_sampling);
    RUN(test_logit_bias);
    RUN(test_prompt_logprobs);
    RUN(test_max_tokens_zero_prompt_logprobs);
    RUN(test_eos_stops);
    RUN(test_limits);
    for (int i = 0; i < N_PROMPTS; i++) {
        free(IDS[i]);
        res_reset(&SOLO[i]);
    }
    sd_model_free(M);
    return sd_test_done();
}
