/* test_sched_cuda: the scheduler driving the CUDA backend on the bundled tiny model — mixed
 * prefill chunks and decodes, preemption, prompt logprobs — against the CPU backend's solo
 * runs. bf16 on the GPU is not bit-equal to fp32 on the CPU, nor across batch shapes (logprobs
 * moved by up to ~0.04 between batched and solo runs on an H200), so greedy tokens must agree
 * up to the first near-tie of the reference's top two logprobs (gap < 0.1 GPU vs GPU, 0.2 GPU
 * vs CPU), and prompt logprobs within 0.1. Then the same with speculative decoding's drafts (their
 * steps as graphs of their own shape), from the prompt lookup and from a draft model. Skips without CUDA or a
 * GPU; runs in its own process, as GPU tests must. */
#include "engine/sched.h"

#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"
#include "tests/engine/sched_util.h"

#define N_REQ 8
#define GEN 16

static const char *TEXTS[N_REQ] = {
    "import numpy as np\n\ndef",
    "The quick brown fox jumps over the lazy dog, and then",
    "class Config:\n    \"\"\"Settings for the server.\"\"\"\n\n    def __init__(self,",
    "# Installation\n\nTo install the package, run",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "from typing import Any, Dict, List, Optional\n\n\n",
    "    for key, value in sorted(items.items()):\n",
    "if __name__ == \"__main__\":\n",
};

static int32_t *IDS[N_REQ], NIDS[N_REQ];
static sd_request_params P[N_REQ];
static res CPU[N_REQ], GPU_SOLO[N_REQ];

static sd_backend *cuda_new(int32_t kv_blocks)
{
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.kv_blocks = kv_blocks;
    bo.block_size = 16;
    bo.max_batch_tokens = 256;
    sd_backend *b = NULL;
    sd_diag d = {0};
    int rc = sd_backend_cuda_init(&b, M, &bo, &d);
    if (rc < 0)
        fprintf(stderr, "  cuda backend: %s\n", sd_diag_str(&d, rc));
    return b;
}

/* Tokens agree until the reference's top two logprobs come within eps (a near-tie, where
 * either pick is right); returns the first disagreeing position, or -1. *ret_upto gets the
 * positions compared (where the two runs still follow the same path). */
static int disagree(const res *a, const res *ref, float eps, int *ret_upto)
{
    int k = 0;
    for (; k < a->n && k < ref->n; k++) {
        if (ref->top_lp[k][0] - ref->top_lp[k][1] < eps)
            break;
        if (a->tok[k] != ref->tok[k]) {
            *ret_upto = k;
            return k;
        }
    }
    *ret_upto = k;
    return k == a->n && a->n != ref->n ? k : -1;
}

static void check_run(const res *rs, const res *ref, float eps, float lp_tol, const char *what)
{
    for (int i = 0; i < N_REQ; i++) {
        const res *r = &rs[i];
        CHECK_MSG(r->n_final == 1 && r->n_error == 0 && r->events_after_final == 0,
                  "%s req %d: final %d err %d", what, i, r->n_final, r->n_error);
        CHECK(r->finish == SD_FINISH_LENGTH && r->n == GEN && r->n_prompt_ev == 1 && r->prompt_after == 0);
        int upto = 0, k = disagree(r, &ref[i], eps, &upto);
        float lp_diff = 0; /* chosen-token logprobs while both runs follow the same path */
        for (int j = 0; j < upto; j++)
            lp_diff = fmaxf(lp_diff, fabsf(r->lp[j] - ref[i].lp[j]));
        CHECK_MSG(k < 0,
                  "%s req %d: token %d differs (%d vs %d) away from a near-tie: top2 %.4f %.4f vs %.4f %.4f; "
                  "logprobs before differ by up to %.4f",
                  what, i, k, k >= 0 ? r->tok[k] : -1, k >= 0 ? ref[i].tok[k] : -1,
                  k >= 0 ? r->top_lp[k][0] : 0, k >= 0 ? r->top_lp[k][1] : 0,
                  k >= 0 ? ref[i].top_lp[k][0] : 0, k >= 0 ? ref[i].top_lp[k][1] : 0, lp_diff);
        if (k < 0)
            fprintf(stderr, "  %s req %d: %d tokens compared, logprobs differ by up to %.4f\n", what, i, upto,
                    lp_diff);
        float worst = 0;
        for (int32_t j = 0; j + 1 < NIDS[i] && r->plp && ref[i].plp; j++) {
            float e = fabsf(r->plp[j] - ref[i].plp[j]);
            worst = e > worst ? e : worst;
        }
        CHECK_MSG(worst <= lp_tol, "%s req %d: prompt logprobs differ by %.3g", what, i, worst);
    }
}

static void test_sched_on_cuda(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    for (int i = 0; i < N_REQ; i++) {
        IDS[i] = encode(TEXTS[i], &NIDS[i]);
        REQUIRE(IDS[i]);
        greedy_params(&P[i], IDS[i], NIDS[i], GEN);
        P[i].logprobs = 2;
        P[i].prompt_logprobs = 1;
    }
    sd_engine_opts roomy;
    opts(&roomy, 16, 256);
    sd_backend *cpu = backend_new(128, 16);
    REQUIRE(cpu);
    for (int i = 0; i < N_REQ; i++)
        REQUIRE(run_all(cpu, &roomy, &P[i], &CPU[i], 1, NULL) == 0);
    sd_backend_free(cpu);

    sd_backend *gpu = cuda_new(128);
    REQUIRE(gpu);
    for (int i = 0; i < N_REQ; i++)
        REQUIRE(run_all(gpu, &roomy, &P[i], &GPU_SOLO[i], 1, NULL) == 0);
    check_run(GPU_SOLO, CPU, 0.2f, 0.1f, "gpu solo vs cpu");

    static res rs[N_REQ];
    sd_engine_stats st;
    for (int graphs = 1; graphs >= 0; graphs--) {
        sd_backend_cuda_set_graphs(gpu, graphs);
        memset(rs, 0, sizeof rs);
        CHECK(run_all(gpu, &roomy, P, rs, N_REQ, &st) == 0);
        check_run(rs, GPU_SOLO, 0.1f, 0.1f, graphs ? "gpu batched vs gpu solo" : "gpu batched (no graphs)");
        CHECK(st.kv_blocks_used == 0 && st.preemptions == 0);
        for (int i = 0; i < N_REQ; i++)
            res_reset(&rs[i]);
    }
    sd_backend_cuda_set_graphs(gpu, 1);

    /* speculative decoding (engine/spec.h): drafts filled to one length, their steps replayed as
     * graphs of that shape, batched and solo; the tokens those of the solo runs without drafts */
    sd_engine_opts spec = roomy;
    spec.spec = (sd_spec_opts){4, 1, 4, 16, NULL, NULL};
    memset(rs, 0, sizeof rs);
    CHECK(run_all(gpu, &spec, P, rs, N_REQ, &st) == 0);
    check_run(rs, GPU_SOLO, 0.1f, 0.1f, "gpu batched with drafts");
    CHECK(st.spec_accepted_tokens > 0 && st.kv_blocks_used == 0);
    fprintf(stderr, "  drafts, batched: %llu steps, %llu drafted, %llu kept\n", (unsigned long long)st.steps,
            (unsigned long long)st.spec_draft_tokens, (unsigned long long)st.spec_accepted_tokens);
    for (int i = 0; i < N_REQ; i++) {
        res_reset(&rs[i]);
        CHECK(run_all(gpu, &spec, &P[i], &rs[i], 1, &st) == 0 && st.kv_blocks_used == 0);
    }
    check_run(rs, GPU_SOLO, 0.1f, 0.1f, "gpu solo with drafts");
    for (int i = 0; i < N_REQ; i++)
        res_reset(&rs[i]);

    /* a draft model (engine/spec_draft.h): the tiny model drafting for itself on a CUDA backend of
     * its own; greedy drafts are then mostly the served model's picks */
    sd_backend *db = cuda_new(64);
    REQUIRE(db);
    spec.spec.draft_model = M;
    spec.spec.draft_backend = db;
    spec.spec.max_seqs = 8;
    memset(rs, 0, sizeof rs);
    CHECK(run_all(gpu, &spec, P, rs, N_REQ, &st) == 0);
    check_run(rs, GPU_SOLO, 0.1f, 0.1f, "gpu batched, draft model");
    fprintf(stderr, "  draft model, batched: %llu steps, %llu drafted, %llu kept\n",
            (unsigned long long)st.steps, (unsigned long long)st.spec_draft_tokens,
            (unsigned long long)st.spec_accepted_tokens);
    CHECK(st.spec_accepted_tokens * 2 > st.spec_draft_tokens && st.spec_draft_blocks_used == 0);
    for (int i = 0; i < N_REQ; i++)
        res_reset(&rs[i]);
    sd_backend_free(db);
    sd_backend_free(gpu);

    /* 8 blocks of 16 for 8 sequences of ~3 blocks each, 7 tokens a step: chunked prefill
     * and preemption on the GPU */
    gpu = cuda_new(8);
    REQUIRE(gpu);
    sd_engine_opts tight;
    opts(&tight, 4, 7);
    memset(rs, 0, sizeof rs);
    CHECK(run_all(gpu, &tight, P, rs, N_REQ, &st) == 0);
    check_run(rs, GPU_SOLO, 0.1f, 0.1f, "gpu tight vs gpu solo");
    CHECK(st.kv_blocks_used == 0);
    CHECK_MSG(st.preemptions > 0, "no preemption on the tight pool");
    fprintf(stderr, "  tight pool: %llu steps, %llu preemptions\n", (unsigned long long)st.steps,
            (unsigned long long)st.preemptions);
    for (int i = 0; i < N_REQ; i++)
        res_reset(&rs[i]);
    sd_backend_free(gpu);
}

static void cleanup(void)
{
    for (int i = 0; i < N_REQ; i++) {
        free(IDS[i]);
        res_reset(&CPU[i]);
        res_reset(&GPU_SOLO[i]);
    }
}
#endif

#ifndef SD_HAVE_CUDA
#include "tests/harness.h"

static void test_sched_on_cuda(void)
{
    SKIP("built without CUDA");
}

int main(void)
{
    RUN(test_sched_on_cuda);
    return sd_test_done();
}
#else
int main(void)
{
    sd_diag d = {0};
    int rc = sd_model_open(&M, MODEL_DIR, &d);
    if (rc < 0 || !sd_model_tokenizer(M)) {
        fprintf(stderr, "  SKIP: %s: %s\n", MODEL_DIR, sd_diag_str(&d, rc));
        sd_model_free(M);
        return sd_test_done();
    }
    RUN(test_sched_on_cuda);
    cleanup();
    sd_model_free(M);
    return sd_test_done();
}
#endif
