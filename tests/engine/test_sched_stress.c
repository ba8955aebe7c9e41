/* test_sched_stress: a pseudo-random mix of requests (greedy and seeded sampling with
 * penalties, stop strings, logprobs, prompt logprobs, priorities, EOS on or off) run together
 * under tight KV pools, small token budgets and few sequences must give, event for event,
 * what each request gives alone on a roomy scheduler: without speculative decoding, with the
 * prompt lookup's drafts and with a draft model's. */
#include "engine/sched.h"

#include "tests/engine/sched_util.h"

#define N_REQ 12

static const char *TEXTS[] = {
    "import numpy as np\n\ndef",
    "The quick brown fox jumps over the lazy dog, and then",
    "class Config:\n    \"\"\"Settings for the server.\"\"\"\n\n    def __init__(self,",
    "# Installation\n\nTo install the package, run",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "from typing import Any, Dict, List, Optional\n\n\n",
};

static unsigned RNG = 2024;
static int rnd(int n)
{
    RNG = RNG * 1103515245u + 12345u;
    return (int)((RNG >> 16) % (unsigned)n);
}

static int32_t *PROMPT[N_REQ], NPROMPT[N_REQ];
static char STOP[N_REQ][8];
static sd_request_params P[N_REQ];
static res SOLO[N_REQ];

/* Random params for request i (prompt of 5..45 tokens, at most 40 new tokens). */
static int make_params(int i)
{
    int32_t n = 0, *ids = encode(TEXTS[i % 6], &n);
    if (!ids)
        return -1;
    int32_t want = 5 + rnd(41);
    PROMPT[i] = malloc(sizeof(int32_t) * (size_t)want);
    for (int32_t k = 0; k < want; k++) /* the text, then its tokens again, shuffled a little */
        PROMPT[i][k] = k < n ? ids[k] : ids[1 + rnd(n - 1)];
    NPROMPT[i] = want;
    free(ids);
    sd_request_params *p = &P[i];
    greedy_params(p, PROMPT[i], want, 1 + rnd(40));
    if (i % 3 != 0) {
        p->sampling.temperature = 0.8f;
        p->sampling.top_k = 40;
        p->sampling.top_p = 0.9f;
        p->sampling.seed = (uint64_t)i * 7 + 1;
        p->sampling.presence_penalty = rnd(2) ? 0.5f : 0.0f;
        p->sampling.repetition_penalty = rnd(2) ? 1.1f : 1.0f;
    }
    p->ignore_eos = rnd(2);
    int lps[] = {-1, 0, 2, 4};
    p->logprobs = lps[rnd(4)];
    p->prompt_logprobs = rnd(3) == 0;
    p->priority = (uint64_t)rnd(3);
    return 0;
}

static sd_engine_opts roomy(void)
{
    sd_engine_opts o;
    opts(&o, 16, 512);
    return o;
}

/* Solo runs; for some requests a stop string is taken from the middle of their solo text and
 * the solo run is redone with it. */
static int prepare(sd_backend *b)
{
    sd_engine_opts o = roomy();
    for (int i = 0; i < N_REQ; i++) {
        if (make_params(i) < 0 || run_all(b, &o, &P[i], &SOLO[i], 1, NULL) < 0)
            return -1;
        if (rnd(5) < 2 && SOLO[i].text_len >= 8) {
            size_t at = SOLO[i].text_len / 2;
            memcpy(STOP[i], SOLO[i].text + at, 2);
            if (memchr(STOP[i], '\0', 2) == NULL) {
                P[i].stop[0] = STOP[i];
                P[i].n_stop = 1;
                res_reset(&SOLO[i]);
                if (run_all(b, &o, &P[i], &SOLO[i], 1, NULL) < 0)
                    return -1;
            }
        }
    }
    return 0;
}

static int close_enough(const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > 1e-4f)
            return 0;
    return 1;
}

static void compare(const res *got, const res *want, int i, const char *cfg)
{
    CHECK_MSG(got->n_final == 1 && got->events_after_final == 0 && got->n_error == 0, "%s req %d: %d finals",
              cfg, i, got->n_final);
    CHECK_MSG(got->n == want->n && memcmp(got->tok, want->tok, sizeof(int32_t) * (size_t)got->n) == 0,
              "%s req %d: tokens differ (%d vs %d)", cfg, i, got->n, want->n);
    CHECK_MSG(got->text_len == want->text_len && memcmp(got->text, want->text, got->text_len) == 0,
              "%s req %d: text differs", cfg, i);
    CHECK_MSG(got->finish == want->finish, "%s req %d: finish %d vs %d", cfg, i, got->finish, want->finish);
    CHECK(got->done_gen == want->done_gen && got->done_prompt == NPROMPT[i]);
    CHECK(got->n_prompt_ev == want->n_prompt_ev && got->prompt_after == 0);
    if (P[i].prompt_logprobs && got->plp && want->plp)
        CHECK_MSG(close_enough(got->plp, want->plp, NPROMPT[i] - 1), "%s req %d: prompt logprobs differ", cfg,
                  i);
    if (P[i].logprobs >= 0 && got->n == want->n) {
        CHECK_MSG(close_enough(got->lp, want->lp, got->n), "%s req %d: logprobs differ", cfg, i);
        for (int k = 0; k < got->n; k++)
            for (int j = 0; j < P[i].logprobs && j < 4; j++)
                CHECK(got->top_id[k][j] == want->top_id[k][j]);
    }
}

static void test_mix_under_pressure(void)
{
    sd_backend *big = backend_new(128, 16);
    REQUIRE(big);
    REQUIRE(prepare(big) == 0);
    sd_backend_free(big);
    int n_stopped = 0, n_plp = 0, n_lp = 0;
    for (int i = 0; i < N_REQ; i++) {
        n_stopped += P[i].n_stop && SOLO[i].finish == SD_FINISH_STOP;
        n_plp += P[i].prompt_logprobs;
        n_lp += P[i].logprobs > 0;
    }
    /* the mix covers what it claims to */
    CHECK_MSG(n_stopped > 0 && n_plp > 0 && n_lp > 0, "stopped %d, prompt logprobs %d, logprobs %d",
              n_stopped, n_plp, n_lp);
    struct {
        int32_t blocks;
        int block_size, max_seqs, budget;
        int want_preempt;
    } cfgs[] = {{12, 8, 4, 7, 1}, {24, 4, 8, 32, 1}, {48, 16, 16, 512, 0}, {32, 16, 3, 5, 0}};
    /* each pool without drafts, with the prompt lookup's and with a draft model's (the tiny model
     * drafting for itself on a backend of its own) */
    sd_backend *draft = backend_new(128, 8);
    REQUIRE(draft);
    static const char *const modes[] = {"", ", lookup drafts", ", draft model"};
    for (int c = 0; c < 12; c++) {
        const int mode = c / 4;
        sd_backend *b = backend_new(cfgs[c % 4].blocks, cfgs[c % 4].block_size);
        REQUIRE(b);
        sd_engine_opts o;
        opts(&o, cfgs[c % 4].max_seqs, cfgs[c % 4].budget);
        if (mode)
            o.spec =
                (sd_spec_opts){4, 1, 4, cfgs[c % 4].max_seqs, mode == 2 ? M : NULL, mode == 2 ? draft : NULL};
        static res rs[N_REQ];
        memset(rs, 0, sizeof rs);
        sd_engine_stats st;
        char name[96];
        snprintf(name, sizeof name, "pool %dx%d seqs %d budget %d%s", cfgs[c % 4].blocks,
                 cfgs[c % 4].block_size, cfgs[c % 4].max_seqs, cfgs[c % 4].budget, modes[mode]);
        CHECK(run_all(b, &o, P, rs, N_REQ, &st) == 0);
        for (int i = 0; i < N_REQ; i++)
            compare(&rs[i], &SOLO[i], i, name);
        if (cfgs[c % 4].want_preempt && (!mode || c % 4 == 1)) /* drafts move preemptions about */
            CHECK_MSG(st.preemptions > 0, "%s: no preemption", name);
        CHECK(st.kv_blocks_used == 0 && st.running == 0 && st.waiting == 0 && st.spec_draft_blocks_used == 0);
        CHECK_MSG(!mode || st.spec_accepted_tokens > 0, "%s: no draft kept", name);
        fprintf(stderr, "  %s: %llu steps, %llu preemptions, %llu / %llu drafts kept\n", name,
                (unsigned long long)st.steps, (unsigned long long)st.preemptions,
                (unsigned long long)st.spec_accepted_tokens, (unsigned long long)st.spec_draft_tokens);
        for (int i = 0; i < N_REQ; i++)
            res_reset(&rs[i]);
        sd_backend_free(b);
    }
    sd_backend_free(draft);
}

int main(void)
{
    sd_diag d = {0};
    int rc = sd_model_open(&M, MODEL_DIR, &d);
    if (rc < 0 || !sd_model_tokenizer(M)) {
        fprintf(stderr, "  SKIP: %s: %s\n", MODEL_DIR, sd_diag_str(&d, rc));
        sd_model_free(M);
        return sd_test_done();
    }
    RUN(test_mix_under_pressure);
    for (int i = 0; i < N_REQ; i++) {
        free(PROMPT[i]);
        res_reset(&SOLO[i]);
    }
    sd_model_free(M);
    return sd_test_done();
}
