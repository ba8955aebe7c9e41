/* sched_sample: the scheduler-level sampling fixture shared by test_sample_req (a CPU backend
 * that samples with the twin) and test_cuda_sample (the CUDA backend) — the prompts, the
 * seeded sampling settings, and the comparison of two runs that saw the same logits. */
#ifndef SD_TEST_SCHED_SAMPLE_H
#define SD_TEST_SCHED_SAMPLE_H

#include "tests/engine/sample_cases.h"
#include "tests/engine/sched_util.h"

#define SS_N_TEXTS 8

static const char *SS_TEXTS[SS_N_TEXTS] = {
    "import numpy as np\n\ndef",
    "def fibonacci(n):\n    if n < 2:\n",
    "class Config:\n    def __init__(self,",
    "# Installation\n\nRun",
    "for key, value in items:\n",
    "if __name__ == \"__main__\":\n",
    "from typing import Any\n\n",
    "The quick brown fox",
};

/* logit_bias of the sampled kinds: a ban, a push and a mild one (token ids of models/tiny) */
static const sd_logit_bias SS_BIAS[] = {{220, -100.0f}, {13, 4.0f}, {7, 1.5f}};

/* Sampling settings by kind: 1 top-p, 2 top-k with presence/frequency penalties and a logit
 * bias, 3 min-p with a repetition penalty, 4 prompt logprobs (its prefill steps sample on the
 * host), any other kind every option at once. The caller sets greedy requests, seeds and
 * logprobs. */
static void ss_sampling(sd_request_params *p, int kind)
{
    sd_sampling *s = &p->sampling;
    switch (kind) {
    case 1:
        s->temperature = 0.9f;
        s->top_p = 0.95f;
        break;
    case 2:
        s->temperature = 1.2f;
        s->top_k = 20;
        s->presence_penalty = 0.4f;
        s->frequency_penalty = 0.3f;
        s->bias = SS_BIAS, s->n_bias = 3;
        break;
    case 3:
        s->temperature = 0.7f;
        s->min_p = 0.1f;
        s->repetition_penalty = 1.2f;
        break;
    case 4:
        s->temperature = 1.0f;
        p->prompt_logprobs = 1;
        break;
    default:
        s->temperature = 0.8f;
        s->top_k = 50;
        s->top_p = 0.9f;
        s->min_p = 0.02f;
        s->repetition_penalty = 1.1f;
        s->bias = SS_BIAS + 1, s->n_bias = 2;
    }
}

/* Same tokens, text and logprobs for each of the n requests, `gen` tokens each. Both runs see
 * the same logits, so a difference can only come from a near-tie of the cumulative mass
 * (about 1e-6 of a token's chance): none is expected in a few hundred tokens. */
static void ss_compare_runs(const res *a, const res *b, int n, int gen, const char *what)
{
    for (int i = 0; i < n; i++) {
        CHECK_MSG(a[i].n == gen && b[i].n == gen && a[i].n_error == 0 && b[i].n_error == 0,
                  "%s req %d: %d / %d tokens", what, i, a[i].n, b[i].n);
        int k = 0;
        while (k < a[i].n && k < b[i].n && a[i].tok[k] == b[i].tok[k])
            k++;
        CHECK_MSG(k == a[i].n && k == b[i].n, "%s req %d: tokens differ from position %d (%d vs %d)", what, i,
                  k, k < a[i].n ? a[i].tok[k] : -1, k < b[i].n ? b[i].tok[k] : -1);
        CHECK(strcmp(a[i].text, b[i].text) == 0);
        for (int j = 0; j < k; j++) {
            CHECK_MSG(sc_diff(a[i].lp[j], b[i].lp[j]) <= 1e-4, "%s req %d token %d: logprob %g vs %g", what,
                      i, j, a[i].lp[j], b[i].lp[j]);
            for (int t = 0; t < a[i].n_top && t < 4; t++)
                CHECK(a[i].top_id[j][t] == b[i].top_id[j][t] &&
                      sc_diff(a[i].top_lp[j][t], b[i].top_lp[j][t]) <= 1e-4);
        }
    }
}

#endif
