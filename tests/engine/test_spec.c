/* test_spec: speculative decoding by prompt lookup (engine/spec.h). The proposer on hand-made
 * histories, then the scheduler on the real CPU backend and models/tiny: with drafts the
 * requests give the same tokens, text, logprobs and finish as without, greedy and seeded
 * sampling (on the host and through a backend's sampler), batched, preempted, with stop strings
 * and short max_tokens, constrained output (JSON mode, a schema) too; drafts are made and accepted on
 * repetitive text, and every KV block goes back at the end. */
#include "engine/jsonc.h"
#include "engine/jthink.h"
#include "engine/kv.h"
#include "engine/spec.h"
#include "engine/spec_draft.h"

#include "tests/engine/sched_sample.h"
#include "tests/engine/twin_backend.h"

/* ---- the proposer ---- */

static int32_t propose(const int32_t *h, int32_t n, int gmin, int gmax, int32_t max_out, int32_t *out)
{
    return sd_spec_ngram(h, n, gmin, gmax, max_out, out);
}

static void test_ngram(void)
{
    int32_t out[8];
    /* 1 2 3 9 | 1 2 3 7 | 1 2 3: the suffix "1 2 3" last occurred before 7 */
    const int32_t h1[] = {1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 3};
    CHECK(propose(h1, 11, 1, 4, 2, out) == 2 && out[0] == 7 && out[1] == 1);
    /* a longer match beats a more recent shorter one: "5 1 2 3" occurs only at the start */
    const int32_t h2[] = {5, 1, 2, 3, 8, 8, 1, 2, 3, 6, 5, 1, 2, 3};
    CHECK(propose(h2, 14, 1, 4, 3, out) == 3 && out[0] == 8 && out[1] == 8 && out[2] == 1);
    /* with ngram_max 3 both match 3 tokens: the most recent wins */
    CHECK(propose(h2, 14, 1, 3, 1, out) == 1 && out[0] == 6);
    /* nothing repeats */
    const int32_t h3[] = {1, 2, 3, 4, 5};
    CHECK(propose(h3, 5, 1, 4, 4, out) == 0);
    /* a match shorter than ngram_min is not used: "4" repeats, "3 4" does not */
    const int32_t h4[] = {4, 7, 3, 4};
    CHECK(propose(h4, 4, 2, 4, 4, out) == 0);
    CHECK(propose(h4, 4, 1, 4, 4, out) == 3 && out[0] == 7 && out[1] == 3 && out[2] == 4);
    /* the continuation stops at the end of the history; a run of one token proposes itself */
    const int32_t h5[] = {2, 2, 2, 2};
    CHECK(propose(h5, 4, 1, 2, 8, out) == 1 && out[0] == 2);
    /* max_out 0, a history too short, bad sizes */
    CHECK(propose(h1, 11, 1, 4, 0, out) == 0);
    CHECK(propose(h1, 1, 1, 4, 4, out) == 0);
    CHECK(propose(h1, 11, 0, 4, 4, out) == 0 && propose(h1, 11, 3, 2, 4, out) == 0);

    sd_spec_opts o = {99, 0, 50, 1000, NULL, NULL};
    sd_spec_opts_clamp(&o);
    CHECK(o.tokens == SD_SPEC_MAX_TOKENS && o.ngram_min == 1 && o.ngram_max == SD_SPEC_MAX_NGRAM);
    CHECK(o.max_seqs * (1 + o.tokens) <= SD_SPEC_MAX_ROWS && o.max_seqs >= 1);
}

static void test_kv_truncate(void)
{
    sd_kv *kv = NULL;
    REQUIRE(sd_kv_init(&kv, 8, 4, NULL) == 0);
    sd_kv_seq q;
    sd_kv_seq_init(&q);
    REQUIRE(sd_kv_seq_append(kv, &q, 13) == 0); /* 4 blocks */
    CHECK(q.n_blocks == 4 && sd_kv_available(kv) == 4);
    CHECK(sd_kv_seq_truncate(kv, &q, 14) == SD_EINVAL && sd_kv_seq_truncate(kv, &q, -1) == SD_EINVAL);
    CHECK(sd_kv_seq_truncate(kv, &q, 9) == 0 && q.n_blocks == 3 && q.n_tokens == 9);
    CHECK(sd_kv_available(kv) == 5);
    CHECK(sd_kv_seq_truncate(kv, &q, 8) == 0 && q.n_blocks == 2 && sd_kv_available(kv) == 6);
    REQUIRE(sd_kv_seq_append(kv, &q, 1) == 0); /* grows again from 8 */
    CHECK(q.n_blocks == 3 && q.n_tokens == 9);
    CHECK(sd_kv_seq_truncate(kv, &q, 0) == 0 && q.n_blocks == 0 && sd_kv_available(kv) == 8);
    sd_kv_seq_release(kv, &q);
    sd_kv_free(kv);
}

/* ---- the scheduler ---- */

/* Prompts whose continuations repeat (the tiny model copies code it has seen), and plain ones. */
static const char *TEXTS[] = {
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef add(a, b):\n",
    "import os\nimport sys\nimport json\nimport os\nimport sys\n",
    "for i in range(10):\n    print(i)\nfor i in range(10):\n",
    "The quick brown fox jumps over the lazy dog, and then",
    "class Config:\n    def __init__(self, name):\n        self.name = name\n\n    def",
};
#define N_TEXTS 5
#define GEN 48

static int32_t *IDS[N_TEXTS], NIDS[N_TEXTS];

static int ids_ready(void)
{
    for (int i = 0; i < N_TEXTS; i++)
        if (!IDS[i] && !(IDS[i] = encode(TEXTS[i], &NIDS[i])))
            return 0;
    return 1;
}

static void spec_opts(sd_engine_opts *o, int max_seqs, int tokens)
{
    opts(o, max_seqs, 512);
    o->spec.tokens = tokens;
    o->spec.ngram_min = 1;
    o->spec.ngram_max = 4;
    o->spec.max_seqs = max_seqs;
}

/* Same tokens, text, finish and counts for each of n requests (gen tokens, or any when < 0). */
static void same_runs(const res *a, const res *b, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        CHECK_MSG(a[i].n_final == 1 && b[i].n_final == 1 && !a[i].n_error && !b[i].n_error,
                  "%s req %d: finals %d / %d", what, i, a[i].n_final, b[i].n_final);
        int k = 0;
        while (k < a[i].n && k < b[i].n && a[i].tok[k] == b[i].tok[k])
            k++;
        CHECK_MSG(k == a[i].n && k == b[i].n, "%s req %d: %d / %d tokens, first difference at %d", what, i,
                  a[i].n, b[i].n, k);
        CHECK_MSG(strcmp(a[i].text, b[i].text) == 0, "%s req %d: texts differ", what, i);
        CHECK(a[i].finish == b[i].finish && a[i].done_gen == b[i].done_gen);
        for (int j = 0; j < k; j++)
            CHECK(a[i].tok_text_len[j] == b[i].tok_text_len[j]);
    }
}

static void reset_all(res *r, int n)
{
    for (int i = 0; i < n; i++)
        res_reset(&r[i]);
}

/* Greedy, solo and batched: the drafts change the number of steps, not one token. */
static void test_greedy_same_tokens(void)
{
    if (!ids_ready())
        SKIP("cannot encode the prompts");
    sd_backend *b = backend_new(128, 16);
    REQUIRE(b);
    sd_request_params ps[N_TEXTS];
    static res off[N_TEXTS], on[N_TEXTS], solo[N_TEXTS];
    for (int i = 0; i < N_TEXTS; i++)
        greedy_params(&ps[i], IDS[i], NIDS[i], GEN);
    sd_engine_opts o;
    sd_engine_stats s_off, s_on, s_solo;
    spec_opts(&o, 8, 0);
    REQUIRE(run_all(b, &o, ps, off, N_TEXTS, &s_off) == 0);
    spec_opts(&o, 8, 6);
    REQUIRE(run_all(b, &o, ps, on, N_TEXTS, &s_on) == 0);
    same_runs(off, on, N_TEXTS, "batched, drafts on/off");
    CHECK(s_off.spec_draft_tokens == 0 && s_off.spec_accepted_tokens == 0);
    fprintf(stderr, "  batched: %llu steps without drafts, %llu with; %llu drafted, %llu accepted\n",
            (unsigned long long)s_off.steps, (unsigned long long)s_on.steps,
            (unsigned long long)s_on.spec_draft_tokens, (unsigned long long)s_on.spec_accepted_tokens);
    CHECK(s_on.spec_draft_tokens > 0 && s_on.spec_accepted_tokens > 0);
    CHECK(s_on.spec_accepted_tokens <= s_on.spec_draft_tokens);
    CHECK_MSG(s_on.steps < s_off.steps, "drafts saved no step: %llu vs %llu", (unsigned long long)s_on.steps,
              (unsigned long long)s_off.steps);
    CHECK(s_on.generation_tokens == (uint64_t)N_TEXTS * GEN && s_on.kv_blocks_used == 0);
    for (int i = 0; i < N_TEXTS; i++) { /* one at a time: every sequence drafts alone */
        REQUIRE(run_all(b, &o, &ps[i], &solo[i], 1, &s_solo) == 0);
        CHECK(s_solo.kv_blocks_used == 0);
    }
    same_runs(off, solo, N_TEXTS, "solo with drafts");
    reset_all(off, N_TEXTS);
    reset_all(on, N_TEXTS);
    reset_all(solo, N_TEXTS);
    sd_backend_free(b);
}

/* A pool too small for the batch: sequences are preempted and recomputed while they draft. */
static void test_preemption(void)
{
    if (!ids_ready())
        SKIP("cannot encode the prompts");
    sd_backend *b = backend_new(14, 8); /* 112 tokens for five sequences of ~70 */
    REQUIRE(b);
    sd_request_params ps[N_TEXTS];
    static res off[N_TEXTS], on[N_TEXTS];
    for (int i = 0; i < N_TEXTS; i++)
        greedy_params(&ps[i], IDS[i], NIDS[i], 32);
    sd_engine_opts o;
    sd_engine_stats s_off, s_on;
    spec_opts(&o, 8, 0);
    o.prefix_caching = 0;
    REQUIRE(run_all(b, &o, ps, off, N_TEXTS, &s_off) == 0);
    spec_opts(&o, 8, 8);
    o.prefix_caching = 0;
    REQUIRE(run_all(b, &o, ps, on, N_TEXTS, &s_on) == 0);
    same_runs(off, on, N_TEXTS, "preempted, drafts on/off");
    CHECK_MSG(s_on.preemptions > 0, "no preemption: the test lost its point");
    CHECK(s_on.spec_accepted_tokens > 0 && s_on.kv_blocks_used == 0);
    reset_all(off, N_TEXTS);
    reset_all(on, N_TEXTS);
    sd_backend_free(b);
}

/* Stop strings that end inside a draft, max_tokens shorter than a draft, EOS honoured. */
static void test_stops_and_limits(void)
{
    if (!ids_ready())
        SKIP("cannot encode the prompts");
    sd_backend *b = backend_new(128, 16);
    REQUIRE(b);
    sd_request_params ps[4];
    static res off[4], on[4];
    const char *stop_ret[] = {"return"}, *stop_nl[] = {"\n\n", "print"};
    greedy_params(&ps[0], IDS[0], NIDS[0], GEN);
    ps[0].stop[0] = stop_ret[0], ps[0].n_stop = 1;
    greedy_params(&ps[1], IDS[2], NIDS[2], GEN);
    ps[1].stop[0] = stop_nl[0], ps[1].stop[1] = stop_nl[1], ps[1].n_stop = 2;
    greedy_params(&ps[2], IDS[1], NIDS[1], 2); /* the bonus token alone would pass max_tokens */
    greedy_params(&ps[3], IDS[4], NIDS[4], GEN);
    ps[3].ignore_eos = 0;
    sd_engine_opts o;
    sd_engine_stats st;
    spec_opts(&o, 4, 0);
    REQUIRE(run_all(b, &o, ps, off, 4, NULL) == 0);
    spec_opts(&o, 4, 8);
    REQUIRE(run_all(b, &o, ps, on, 4, &st) == 0);
    same_runs(off, on, 4, "stops and limits, drafts on/off");
    CHECK(on[0].finish == SD_FINISH_STOP && on[1].finish == SD_FINISH_STOP);
    CHECK(on[2].n == 2 && on[2].finish == SD_FINISH_LENGTH);
    CHECK(st.kv_blocks_used == 0);
    reset_all(off, 4);
    reset_all(on, 4);
    sd_backend_free(b);
}

/* Seeded sampling with penalties, bias and logprobs: the RNG advances once per kept token, so
 * a seed gives the same text with drafts as without, on the host and on a sampling backend. */
static void test_sampled_same_tokens(void)
{
    if (!ids_ready())
        SKIP("cannot encode the prompts");
#define NS (N_TEXTS + 1)
    int32_t n_extra = 0, *extra = encode(SS_TEXTS[4], &n_extra); /* a loop header: repeats its names */
    REQUIRE(extra);
    sd_request_params ps[NS];
    static res off[NS], on[NS], twin[NS];
    for (int i = 0; i < NS; i++) {
        greedy_params(&ps[i], i < N_TEXTS ? IDS[i] : extra, i < N_TEXTS ? NIDS[i] : n_extra, 32);
        ss_sampling(&ps[i], i % 4 == 3 ? 0 : i % 4 + 1); /* kinds 1-3 and "all"; 4 asks prompt logprobs */
        ps[i].sampling.temperature *= 0.5f;              /* cooler, so the drafts get taken now and then */
        ps[i].sampling.seed = 77 + (uint64_t)i;
        ps[i].logprobs = i % 2 ? 3 : -1;
    }
    twin_backend *t = twin_new();
    REQUIRE(t);
    sd_engine_opts o;
    sd_engine_stats s_on, s_twin;
    spec_opts(&o, 8, 0);
    REQUIRE(run_all(t->cpu, &o, ps, off, NS, NULL) == 0);
    spec_opts(&o, 8, 6);
    REQUIRE(run_all(t->cpu, &o, ps, on, NS, &s_on) == 0);
    ss_compare_runs(on, off, NS, 32, "host sampling, drafts on/off");
    int calls = t->calls;
    REQUIRE(run_all(&t->base, &o, ps, twin, NS, &s_twin) == 0);
    CHECK_MSG(t->calls > calls, "the twin backend never sampled");
    ss_compare_runs(twin, off, NS, 32, "backend sampling with drafts vs host without");
    fprintf(stderr, "  sampled: host %llu / %llu drafted / accepted, backend %llu / %llu\n",
            (unsigned long long)s_on.spec_draft_tokens, (unsigned long long)s_on.spec_accepted_tokens,
            (unsigned long long)s_twin.spec_draft_tokens, (unsigned long long)s_twin.spec_accepted_tokens);
    CHECK(s_on.spec_accepted_tokens > 0 && s_twin.spec_accepted_tokens > 0);
    CHECK(s_on.kv_blocks_used == 0 && s_twin.kv_blocks_used == 0);
    reset_all(off, NS);
    reset_all(on, NS);
    reset_all(twin, NS);
    free(extra);
    tw_free(&t->base);
#undef NS
}

/* Constrained output drafts too: each row is masked by the validator's state after the drafts
 * before it (on the host, and as a sampling backend's allow bitsets), and a request's drafts stop
 * at the first its validator rejects. JSON mode, a schema and plain text in one batch give the
 * texts of decoding without drafts, the JSON valid; a request that thinks first never drafts. */
static void test_constrained_drafts(void)
{
    static const char *const texts[] = {
        "rows = [\n    {\"name\": \"ada\", \"age\": 36},\n    {\"name\": \"bob\", \"age\": 41},\n    ",
        "config = {\"host\": \"localhost\", \"port\": 8080, \"debug\": true}\nbackup = ",
    };
    const char *schema = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, "
                         "\"age\": {\"type\": \"integer\"}}, \"required\": [\"name\", \"age\"]}";
    if (!ids_ready())
        SKIP("cannot encode the prompts");
    int32_t *ids[2], n_ids[2];
    for (int i = 0; i < 2; i++)
        REQUIRE((ids[i] = encode(texts[i], &n_ids[i])) != NULL);
    sd_request_params ps[4];
    static res off[4], on[4], twin[4];
    greedy_params(&ps[0], ids[0], n_ids[0], 40);
    ps[0].json_schema = schema;
    greedy_params(&ps[1], ids[1], n_ids[1], 40);
    ps[1].json_object = 1;
    greedy_params(&ps[2], IDS[2], NIDS[2], 40);
    greedy_params(&ps[3], ids[1], n_ids[1], 40); /* JSON mode after a thinking block: no drafts */
    ps[3].json_object = 1;
    ps[3].think = SD_THINK_MAY;
    for (int i = 0; i < 4; i++)
        ps[i].ignore_eos = 0;
    twin_backend *t = twin_new();
    REQUIRE(t);
    sd_engine_opts o;
    sd_engine_stats s_host, s_twin, s_think;
    spec_opts(&o, 4, 0);
    REQUIRE(run_all(t->cpu, &o, ps, off, 4, NULL) == 0);
    spec_opts(&o, 4, 6);
    REQUIRE(run_all(t->cpu, &o, ps, on, 4, &s_host) == 0);
    same_runs(off, on, 4, "constrained, host sampling, drafts on/off");
    REQUIRE(run_all(&t->base, &o, ps, twin, 4, &s_twin) == 0);
    same_runs(off, twin, 4, "constrained, backend sampling with drafts vs host without");
    for (int i = 0; i < 2; i++) {
        sd_jfsm m;
        sd_jfsm_init(&m);
        CHECK_MSG(sd_jfsm_feed(&m, on[i].text, on[i].text_len) == 0, "req %d not JSON: %s", i, on[i].text);
    }
    fprintf(stderr, "  constrained: host %llu / %llu drafted / kept, backend %llu / %llu\n",
            (unsigned long long)s_host.spec_draft_tokens, (unsigned long long)s_host.spec_accepted_tokens,
            (unsigned long long)s_twin.spec_draft_tokens, (unsigned long long)s_twin.spec_accepted_tokens);
    CHECK(s_host.spec_accepted_tokens > 0 && s_twin.spec_accepted_tokens > 0);
    for (int i = 0; i < 2; i++) /* the constrained requests alone draft and keep some */
        res_reset(&on[i]);
    sd_engine_stats s_json;
    REQUIRE(run_all(t->cpu, &o, ps, on, 2, &s_json) == 0);
    fprintf(stderr, "  JSON alone: %llu / %llu drafted / kept: %s | %s\n",
            (unsigned long long)s_json.spec_draft_tokens, (unsigned long long)s_json.spec_accepted_tokens,
            on[0].text, on[1].text);
    CHECK(s_json.spec_accepted_tokens > 0);
    res_reset(&on[3]);
    REQUIRE(run_all(t->cpu, &o, ps + 3, on + 3, 1, &s_think) == 0);
    CHECK(s_think.spec_draft_tokens == 0);
    reset_all(off, 4);
    reset_all(on, 4);
    reset_all(twin, 4);
    for (int i = 0; i < 2; i++)
        free(ids[i]);
    tw_free(&t->base);
}

/* A backend that replays fixed shapes (uniform_spec, as the CUDA backend): every step of decodes
 * with drafts carries spec.tokens drafts a sequence (fillers where the lookup found fewer), a JSON
 * request's too (its rows stop at the first filler its validator rejects). The outputs stay those
 * of decoding without drafts. */
static void test_uniform_drafts(void)
{
    if (!ids_ready())
        SKIP("cannot encode the prompts");
    twin_backend *t = twin_new();
    REQUIRE(t);
    t->base.uniform_spec = 1;
    sd_request_params ps[N_TEXTS + 1];
    static res off[N_TEXTS + 1], on[N_TEXTS + 1];
    for (int i = 0; i < N_TEXTS; i++)
        greedy_params(&ps[i], IDS[i], NIDS[i], 40);
    sd_engine_opts o;
    sd_engine_stats st;
    spec_opts(&o, 8, 0);
    REQUIRE(run_all(t->cpu, &o, ps, off, N_TEXTS, NULL) == 0);
    spec_opts(&o, 8, 5);
    REQUIRE(run_all(&t->base, &o, ps, on, N_TEXTS, &st) == 0);
    same_runs(off, on, N_TEXTS, "uniform drafts");
    fprintf(stderr, "  uniform: %d draft steps of one shape, %d mixed; %llu drafted, %llu kept\n",
            t->uniform_draft_steps, t->mixed_draft_steps, (unsigned long long)st.spec_draft_tokens,
            (unsigned long long)st.spec_accepted_tokens);
    CHECK(t->uniform_draft_steps > 0 && t->mixed_draft_steps == 0);
    CHECK(st.spec_draft_tokens % 5 == 0 && st.spec_accepted_tokens > 0 && st.kv_blocks_used == 0);
    reset_all(on, N_TEXTS);

    /* a JSON request beside them: filled up like the others */
    greedy_params(&ps[N_TEXTS], IDS[1], NIDS[1], 40);
    ps[N_TEXTS].json_object = 1;
    ps[N_TEXTS].ignore_eos = 0;
    spec_opts(&o, 8, 0);
    REQUIRE(run_all(t->cpu, &o, ps + N_TEXTS, off + N_TEXTS, 1, NULL) == 0);
    spec_opts(&o, 8, 5);
    t->uniform_draft_steps = t->mixed_draft_steps = 0;
    REQUIRE(run_all(&t->base, &o, ps, on, N_TEXTS + 1, &st) == 0);
    same_runs(off, on, N_TEXTS + 1, "uniform drafts beside JSON");
    CHECK(t->mixed_draft_steps == 0 && t->uniform_draft_steps > 0);
    CHECK(st.kv_blocks_used == 0);
    reset_all(off, N_TEXTS + 1);
    reset_all(on, N_TEXTS + 1);
    tw_free(&t->base);
}

/* ---- the draft model (engine/spec_draft.h) ---- */

/* Options with the draft model on backend db: tiny drafting for itself, so its greedy drafts are
 * the served model's own picks (both CPU backends compute the same logits), and every draft of a
 * greedy request should stay. */
static void draft_opts(sd_engine_opts *o, int max_seqs, int tokens, sd_backend *db)
{
    spec_opts(o, max_seqs, tokens);
    o->spec.draft_model = M;
    o->spec.draft_backend = db;
}

/* Greedy and seeded sampling, batched, on the host and through a sampling backend with drafts of
 * one length (uniform_spec): the texts of decoding without drafts; greedy keeps every draft; the
 * draft cache is empty at the end. */
static void test_draft_model(void)
{
    if (!ids_ready())
        SKIP("cannot encode the prompts");
    sd_backend *b = backend_new(128, 16), *db = backend_new(128, 16);
    twin_backend *t = twin_new();
    REQUIRE(b && db && t);
    sd_request_params ps[N_TEXTS];
    static res off[N_TEXTS], on[N_TEXTS];
    for (int i = 0; i < N_TEXTS; i++)
        greedy_params(&ps[i], IDS[i], NIDS[i], 40);
    sd_engine_opts o;
    sd_engine_stats st;
    spec_opts(&o, 8, 0);
    REQUIRE(run_all(b, &o, ps, off, N_TEXTS, NULL) == 0);
    draft_opts(&o, 8, 4, db);
    REQUIRE(run_all(b, &o, ps, on, N_TEXTS, &st) == 0);
    same_runs(off, on, N_TEXTS, "greedy, draft model");
    fprintf(stderr, "  draft model, greedy: %llu steps, %llu drafted, %llu kept\n",
            (unsigned long long)st.steps, (unsigned long long)st.spec_draft_tokens,
            (unsigned long long)st.spec_accepted_tokens);
    CHECK(st.spec_draft_tokens > 0 && st.spec_accepted_tokens == st.spec_draft_tokens);
    CHECK(st.spec_draft_blocks_used == 0 && st.kv_blocks_used == 0);
    reset_all(on, N_TEXTS);
    t->base.uniform_spec = 1; /* the CUDA backend's shape rules, on the twin and on the draft's */
    db->uniform_spec = 1;     /* backend: short unread runs a token a round */
    REQUIRE(run_all(&t->base, &o, ps, on, N_TEXTS, &st) == 0);
    CHECK(st.spec_accepted_tokens == st.spec_draft_tokens);
    db->uniform_spec = 0;
    same_runs(off, on, N_TEXTS, "greedy, draft model, sampling backend, one draft length");
    CHECK(t->mixed_draft_steps == 0 && st.spec_draft_blocks_used == 0);
    reset_all(off, N_TEXTS);
    reset_all(on, N_TEXTS);

    for (int i = 0; i < N_TEXTS; i++) { /* seeded sampling: fewer drafts stay, the same texts */
        ss_sampling(&ps[i], i % 4 == 3 ? 0 : i % 4 + 1);
        ps[i].sampling.seed = 500 + (uint64_t)i;
        ps[i].logprobs = i % 2 ? 2 : -1;
    }
    spec_opts(&o, 8, 0);
    REQUIRE(run_all(b, &o, ps, off, N_TEXTS, NULL) == 0);
    draft_opts(&o, 8, 4, db);
    REQUIRE(run_all(&t->base, &o, ps, on, N_TEXTS, &st) == 0);
    ss_compare_runs(on, off, N_TEXTS, 40, "sampled, draft model, sampling backend");
    CHECK(st.spec_accepted_tokens > 0 && st.spec_accepted_tokens < st.spec_draft_tokens);
    CHECK(st.spec_draft_blocks_used == 0);
    reset_all(off, N_TEXTS);
    reset_all(on, N_TEXTS);
    tw_free(&t->base);
    sd_backend_free(b);
    sd_backend_free(db);
}

/* A served pool that preempts and a draft pool too small for every sequence (those get fillers):
 * the same texts; both caches empty at the end. A draft model of another vocabulary is refused. */
static void test_draft_model_tight(void)
{
    if (!ids_ready())
        SKIP("cannot encode the prompts");
    sd_backend *b = backend_new(14, 8), *db = backend_new(12, 8);
    REQUIRE(b && db);
    sd_request_params ps[N_TEXTS];
    static res off[N_TEXTS], on[N_TEXTS];
    for (int i = 0; i < N_TEXTS; i++)
        greedy_params(&ps[i], IDS[i], NIDS[i], 32);
    sd_engine_opts o;
    sd_engine_stats st;
    spec_opts(&o, 8, 0);
    o.prefix_caching = 0;
    REQUIRE(run_all(b, &o, ps, off, N_TEXTS, NULL) == 0);
    draft_opts(&o, 8, 4, db);
    o.prefix_caching = 0;
    REQUIRE(run_all(b, &o, ps, on, N_TEXTS, &st) == 0);
    same_runs(off, on, N_TEXTS, "tight pools, draft model");
    CHECK(st.preemptions > 0 && st.spec_accepted_tokens > 0);
    CHECK(st.spec_draft_blocks_used == 0 && st.kv_blocks_used == 0);
    reset_all(off, N_TEXTS);
    reset_all(on, N_TEXTS);
    sd_spec_draft *dr = NULL;
    sd_diag d = {0};
    CHECK(sd_spec_draft_init(&dr, M, db, db->vocab + 1, 4, &d) == SD_EINVAL && dr == NULL);
    CHECK_MSG(strstr(d.msg, "vocabulary") != NULL, "%s", d.msg);
    sd_backend_free(b);
    sd_backend_free(db);
}

int main(void)
{
    RUN(test_ngram);
    RUN(test_kv_truncate);
    sd_diag d = {0};
    int rc = sd_model_open(&M, MODEL_DIR, &d);
    if (rc < 0 || !sd_model_tokenizer(M)) {
        fprintf(stderr, "  SKIP: %s: %s\n", MODEL_DIR, sd_diag_str(&d, rc));
        return sd_test_done();
    }
    RUN(test_greedy_same_tokens);
    RUN(test_preemption);
    RUN(test_stops_and_limits);
    RUN(test_sampled_same_tokens);
    RUN(test_constrained_drafts);
    RUN(test_uniform_drafts);
    RUN(test_draft_model);
    RUN(test_draft_model_tight);
    for (int i = 0; i < N_TEXTS; i++)
        free(IDS[i]);
    sd_model_free(M);
    return sd_test_done();
}
