/* test_sample_req: the host side of sampling on a backend — penalty lists against a brute
 * count, the uniform drawn exactly where sd_sample draws it — and the CUDA sampler's method
 * run on the CPU (sd_sample_twin) against sd_sample / sd_logprob_of / sd_logprobs_top on
 * random rows up to a 151936-token vocabulary; then the scheduler sampling through a backend's
 * `sample` (the CPU backend wrapped with the twin) against host sampling on models/tiny. */
#include "engine/jsonc.h"
#include "engine/sample_req.h"

#include "tests/engine/sched_sample.h"
#include "tests/engine/twin_backend.h"

/* ---- penalty lists and the uniform ---- */

/* The bias sc_case gives token t (0 if none). */
static float bias_of(const sc_case *k, int32_t t, int *listed)
{
    for (int32_t j = 0; j < k->s.n_bias; j++)
        if (k->bias[j].token == t) {
            *listed = 1;
            return k->bias[j].bias;
        }
    *listed = 0;
    return 0.0f;
}

static void check_pen(const sc_case *k, const sd_sample_req *q)
{
    int rep = k->s.repetition_penalty > 0 && k->s.repetition_penalty != 1.0f;
    int pf = (k->s.presence_penalty != 0 || k->s.frequency_penalty != 0) && k->n_hist > k->n_prompt;
    CHECK(q->rep_on == rep && q->pf_on == pf);
    /* the history tokens a penalty needs: all for repetition, the generated for presence */
    int32_t start = rep ? 0 : pf ? k->n_prompt : k->n_hist, expect = 0;
    for (int32_t i = start; i < k->n_hist; i++) {
        int seen = 0, gen = 0, listed;
        for (int32_t j = start; j < i; j++)
            seen |= k->hist[j] == k->hist[i];
        for (int32_t j = k->n_prompt; j < k->n_hist; j++)
            gen += k->hist[j] == k->hist[i];
        if (seen)
            continue;
        expect++;
        int found = 0;
        float b = bias_of(k, k->hist[i], &listed);
        for (int32_t e = 0; e < q->n_pen; e++)
            if (q->pen[e].token == k->hist[i]) {
                found++;
                CHECK_MSG(q->pen[e].n_gen == gen && q->pen[e].bias == b,
                          "token %d: n_gen %d bias %g, want %d %g", (int)k->hist[i], (int)q->pen[e].n_gen,
                          q->pen[e].bias, gen, b);
            }
        CHECK_MSG(found == 1, "token %d appears %d times in the penalty list", (int)k->hist[i], found);
    }
    /* then each biased token not among them, as an entry of its own */
    for (int32_t j = 0; j < k->s.n_bias; j++) {
        int32_t t = k->bias[j].token, in_hist = 0, found = 0;
        for (int32_t i = start; i < k->n_hist; i++)
            in_hist |= k->hist[i] == t;
        if (in_hist)
            continue;
        expect++;
        for (int32_t e = 0; e < q->n_pen; e++)
            if (q->pen[e].token == t) {
                found++;
                CHECK_MSG(q->pen[e].n_gen == -1 && q->pen[e].bias == k->bias[j].bias,
                          "biased token %d: n_gen %d bias %g", (int)t, (int)q->pen[e].n_gen, q->pen[e].bias);
            }
        CHECK_MSG(found == 1, "biased token %d appears %d times", (int)t, (int)found);
    }
    CHECK_MSG(q->n_pen == expect, "%d entries, %d distinct tokens", (int)q->n_pen, (int)expect);
}

static void test_prep(void)
{
    sc_rng r = {11};
    sd_sample_prep p;
    REQUIRE(sd_sample_prep_init(&p, 1000, NULL) == 0);
    static float row[1000];
    sc_case ks[8] = {0};
    sd_sample_req qs[8];
    for (int round = 0; round < 40; round++) {
        REQUIRE(sd_sample_prep_begin(&p, 8 * (96 + 8), NULL) == 0);
        for (int c = 0; c < 8; c++) {
            sc_make(&r, &ks[c], 1000, round * 8 + c, row);
            sd_rng a, b;
            sd_rng_seed(&a, ks[c].s.seed);
            sd_rng_seed(&b, ks[c].s.seed);
            REQUIRE(sd_sample_prep_add(&p, &qs[c], c, &ks[c].s, ks[c].hist, ks[c].n_hist, ks[c].n_prompt, &a,
                                       ks[c].n_top) == 0);
            int greedy = ks[c].s.temperature <= 0 || ks[c].s.top_k == 1;
            CHECK(qs[c].greedy == greedy && qs[c].row == c && qs[c].n_top == ks[c].n_top);
            /* one draw per sampled token, none for greedy, the value sd_sample would use */
            CHECK(a.counter == (uint64_t)!greedy);
            if (!greedy)
                CHECK(qs[c].u == sd_rng_uniform(&b));
        }
        for (int c = 0; c < 8; c++) /* entries of earlier requests stay put */
            check_pen(&ks[c], &qs[c]);
    }
    for (int c = 0; c < 8; c++)
        sc_free(&ks[c]);
    /* a history longer than reserved is refused, not truncated silently */
    sd_sampling s;
    sd_sampling_default(&s);
    s.repetition_penalty = 1.2f;
    int32_t hist[4] = {1, 2, 3, 4};
    sd_rng a;
    sd_rng_seed(&a, 1);
    REQUIRE(sd_sample_prep_begin(&p, 3, NULL) == 0);
    CHECK(sd_sample_prep_add(&p, &qs[0], 0, &s, hist, 4, 2, &a, -1) == SD_ERANGE);
    /* and so is a bias list, which needs its own entries even without penalties */
    const sd_logit_bias bias[2] = {{7, 1.0f}, {8, -2.0f}};
    sd_sampling_default(&s);
    s.bias = bias, s.n_bias = 2;
    REQUIRE(sd_sample_prep_begin(&p, 1, NULL) == 0);
    CHECK(sd_sample_prep_add(&p, &qs[0], 0, &s, hist, 4, 2, &a, -1) == SD_ERANGE);
    REQUIRE(sd_sample_prep_begin(&p, 2, NULL) == 0);
    CHECK(sd_sample_prep_add(&p, &qs[0], 0, &s, hist, 4, 2, &a, -1) == 0 && qs[0].n_pen == 2);
    sd_sample_prep_free(&p);
    sd_sample_prep_free(&p);
    sd_sample_prep_free(NULL);
}

/* ---- the twin against sd_sample ---- */

static void run_vocab(int32_t vocab, int n_cases, sc_stats *st)
{
    sc_rng r = {(uint64_t)vocab * 7919u};
    float *buf = malloc(sizeof *buf * (size_t)vocab), *work = malloc(sizeof *work * (size_t)vocab);
    sd_sample_prep p;
    REQUIRE(buf && work && sd_sample_prep_init(&p, vocab, NULL) == 0);
    sc_case k = {0};
    for (int c = 0; c < n_cases; c++) {
        sd_sample_req q;
        sd_sample_out o;
        sc_make(&r, &k, vocab, c, buf);
        sd_rng rng;
        sd_rng_seed(&rng, k.s.seed);
        REQUIRE(sd_sample_prep_begin(&p, (size_t)(k.n_hist + k.s.n_bias), NULL) == 0);
        REQUIRE(sd_sample_prep_add(&p, &q, 0, &k.s, k.hist, k.n_hist, k.n_prompt, &rng, k.n_top) == 0);
        q.allow = k.allow;
        memcpy(work, buf, sizeof *work * (size_t)vocab);
        REQUIRE(sd_sample_twin(work, vocab, &q, &o) == 0);
        sc_check(&k, &q, &o, st);
    }
    sc_free(&k);
    sd_sample_prep_free(&p);
    free(buf);
    free(work);
}

static void test_twin_matches_sd_sample(void)
{
    static const int32_t vocabs[] = {1, 2, 7, 33, 1000, 4099, 32000, 151936};
    static const int cases[] = {64, 64, 160, 160, 160, 96, 48, 24};
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        sc_stats st = {0};
        run_vocab(vocabs[i], cases[i], &st);
        fprintf(stderr, "  vocab %d: %d cases, %d near-boundary disagreements, logprobs within %.2g\n",
                (int)vocabs[i], st.cases, st.near, st.worst_lp);
        CHECK_MSG(st.near * 50 <= st.cases, "vocab %d: %d of %d cases disagree near a boundary",
                  (int)vocabs[i], st.near, st.cases);
    }
}

/* ---- the scheduler through a backend's sample ---- */

#define N_SREQ 6
#define SGEN 24
_Static_assert(N_SREQ <= SS_N_TEXTS, "a prompt per request");

/* Greedy with logprobs, seeded temperature / top-p / top-k / min-p with penalties, and one
 * request with prompt logprobs (its prefill steps sample on the host). */
static void sched_params(sd_request_params *ps, int32_t **ids, int32_t *n_ids)
{
    for (int i = 0; i < N_SREQ; i++) {
        greedy_params(&ps[i], ids[i], n_ids[i], SGEN);
        sd_sampling *s = &ps[i].sampling;
        s->seed = 1000 + (uint64_t)i;
        ps[i].logprobs = i % 2 ? 3 : -1;
        if (i == 0)
            ps[i].logprobs = 2;
        else
            ss_sampling(&ps[i], i);
    }
}

static void test_sched_backend_sampling(void)
{
    if (!M)
        SKIP("%s not found", MODEL_DIR);
    int32_t *ids[N_SREQ], n_ids[N_SREQ];
    for (int i = 0; i < N_SREQ; i++) {
        ids[i] = encode(SS_TEXTS[i], &n_ids[i]);
        REQUIRE(ids[i]);
    }
    sd_request_params ps[N_SREQ];
    sched_params(ps, ids, n_ids);
    sd_engine_opts o;
    opts(&o, 8, 64);
    static res host[N_SREQ], twin[N_SREQ], forced[N_SREQ];

    twin_backend *t = twin_new();
    REQUIRE(t);
    REQUIRE(run_all(t->cpu, &o, ps, host, N_SREQ, NULL) == 0); /* the CPU backend, host sampling */
    REQUIRE(run_all(&t->base, &o, ps, twin, N_SREQ, NULL) == 0);
    fprintf(stderr, "  backend sampling: %d calls, %d rows\n", t->calls, t->sampled);
    CHECK(t->calls > 0 && t->sampled >= N_SREQ * (SGEN - 1));
    ss_compare_runs(twin, host, N_SREQ, SGEN, "twin vs host");
    CHECK(twin[4].n_prompt_ev == 1 && twin[4].plp != NULL);

    setenv("SD_CPU_SAMPLING", "1", 1);
    int calls = t->calls;
    REQUIRE(run_all(&t->base, &o, ps, forced, N_SREQ, NULL) == 0);
    unsetenv("SD_CPU_SAMPLING");
    CHECK_MSG(t->calls == calls, "SD_CPU_SAMPLING=1 still sampled on the backend");
    ss_compare_runs(forced, host, N_SREQ, SGEN, "SD_CPU_SAMPLING vs host");

    for (int i = 0; i < N_SREQ; i++) {
        res_reset(&host[i]);
        res_reset(&twin[i]);
        res_reset(&forced[i]);
        free(ids[i]);
    }
    tw_free(&t->base);
}

/* A json_object request on a backend that samples: the scheduler hands it the JSON mask
 * (sd_sample_req.allow) and the backend's sampler (the twin here, the CUDA kernel on a GPU) gives
 * the tokens host sampling with the mask applied to the row gives, the JSON valid. */
static void test_sched_json_on_backend(void)
{
    if (!M)
        SKIP("%s not found", MODEL_DIR);
    int32_t *ids[2], n_ids[2];
    sd_request_params ps[2];
    for (int i = 0; i < 2; i++) {
        REQUIRE((ids[i] = encode(SS_TEXTS[i], &n_ids[i])) != NULL);
        greedy_params(&ps[i], ids[i], n_ids[i], SGEN);
        ps[i].sampling.seed = 5 + (uint64_t)i;
    }
    ps[0].json_object = 1; /* ignore_eos: after the object, EOS until SGEN tokens */
    ss_sampling(&ps[1], 2);
    sd_engine_opts o;
    opts(&o, 8, 64);
    static res host[2], twin[2];
    twin_backend *t = twin_new();
    REQUIRE(t);
    REQUIRE(run_all(t->cpu, &o, ps, host, 2, NULL) == 0);
    REQUIRE(run_all(&t->base, &o, ps, twin, 2, NULL) == 0);
    CHECK_MSG(t->calls >= SGEN - 1, "%d of %d steps sampled on the backend", t->calls, SGEN);
    ss_compare_runs(twin, host, 2, SGEN, "JSON batch: twin vs host");
    sd_jfsm m;
    sd_jfsm_init(&m);
    CHECK_MSG(sd_jfsm_feed(&m, host[0].text, host[0].text_len) == 0, "not JSON: %s", host[0].text);
    for (int i = 0; i < 2; i++) {
        res_reset(&host[i]);
        res_reset(&twin[i]);
        free(ids[i]);
    }
    tw_free(&t->base);
}

int main(void)
{
    RUN(test_prep);
    RUN(test_twin_matches_sd_sample);
    sd_diag d = {0};
    int rc = sd_model_open(&M, MODEL_DIR, &d);
    if (rc < 0 || !sd_model_tokenizer(M)) {
        fprintf(stderr, "  %s: %s\n", MODEL_DIR, sd_diag_str(&d, rc));
        sd_model_free(M);
        M = NULL;
    }
    RUN(test_sched_backend_sampling);
    RUN(test_sched_json_on_backend);
    sd_model_free(M);
    return sd_test_done();
}
