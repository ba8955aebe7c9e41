/* test_swiglu_fuse_gpu: the CUDA backend with the MLP's SwiGLU in the gate_up kernel's epilogue
 * (sd__cu_linear_swiglu) gives the same logits, bit for bit, as with the SwiGLU as its own kernel,
 * on synthetic weights of the bundled tiny model's shapes (dense, 2:4, 4:8, 16:32), one and two
 * sequences per step, eager and from a captured CUDA graph: with the fusion wherever the tuned
 * kernel takes it (mode 2, so that every kind of kernel the tuner picks is exercised) and where it
 * pays (mode 1, the default). One backend per pattern with every mode, so that all run the kernels
 * its autotuner chose (deterministic mode: no split-K). Skips without a GPU. */
#include "tests/harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/model_config.h"
#include "engine/synthetic.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"

#define TINY_CONFIG "models/tiny/config.json"
#define KV_BLOCKS 64
#define BS 16
#define PROMPT 21
#define STEPS 6

static void rand_tokens(int32_t *t, int n, int32_t vocab, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = 1 + (int32_t)((seed >> 8) % (uint32_t)(vocab - 1));
    }
}

/* A prompt, then STEPS decode steps, for n_seq sequences (each its own KV blocks from
 * first_block); the logits of every decode step: [STEPS, n_seq, vocab]. */
static int run(sd_backend *b, int n_seq, int first_block, int32_t V, const int32_t *toks, float *out)
{
    int32_t bt[2][KV_BLOCKS / 4];
    for (int s = 0; s < n_seq; s++)
        for (int i = 0; i < KV_BLOCKS / 4; i++)
            bt[s][i] = first_block + s * (KV_BLOCKS / 4) + i;
    sd_diag d = {0};
    float *scratch = malloc((size_t)n_seq * V * 4);
    int rc = scratch ? 0 : SD_ENOMEM;
    for (int s = 0; s < n_seq && !rc; s++) { /* prefill each alone */
        sd_batch_seq q = {0, PROMPT, toks + s * 50, bt[s], 0};
        rc = sd_backend_forward(b, &q, 1, scratch, &d);
    }
    for (int st = 0; st < STEPS && !rc; st++) {
        sd_batch_seq q[2];
        for (int s = 0; s < n_seq; s++)
            q[s] = (sd_batch_seq){PROMPT + st, 1, toks + s * 50 + PROMPT + st, bt[s], 0};
        rc = sd_backend_forward(b, q, n_seq, out + (size_t)st * n_seq * V, &d);
    }
    if (rc)
        fprintf(stderr, "  forward: %s\n", sd_diag_str(&d, rc));
    free(scratch);
    return rc;
}

static void test_fused_same_bits(void)
{
    if (sd_cuda_device_count() < 1)
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model_config cfg;
    REQUIRE(sd_model_config_load(&cfg, TINY_CONFIG, &d) == 0);
    sd_backend_opts o;
    sd_backend_opts_default(&o);
    o.kv_blocks = KV_BLOCKS;
    o.block_size = BS;
    o.max_batch_tokens = 256;
    o.deterministic = 1;
    const int32_t V = cfg.vocab;
    int32_t toks[100];
    rand_tokens(toks, 100, V, 17);
    const char *pats[] = {"dense", "2:4", "4:8", "16:32"};
    int64_t fused_total = 0;
    for (int p = 0; p < 4; p++)
        for (int n_seq = 1; n_seq <= 2; n_seq++) {
            sd_backend *b = NULL;
            int rc = sd_backend_cuda_init_synthetic(&b, &cfg, pats[p], 7 + p, &o, &d);
            CHECK_MSG(rc == 0, "%s: %s", pats[p], sd_diag_str(&d, rc));
            if (rc)
                continue;
            const size_t n = (size_t)STEPS * n_seq * V;
            float *plain = malloc(n * 4), *fused = malloc(n * 4), *graph = malloc(n * 4),
                  *dflt = malloc(n * 4);
            REQUIRE(plain && fused && graph && dflt);
            sd_backend_cuda_set_graphs(b, 0);
            sd_backend_cuda_set_swiglu_fuse(b, 0);
            rc = run(b, n_seq, 0, V, toks, plain);
            const int64_t before = sd_backend_cuda_swiglu_fused(b);
            sd_backend_cuda_set_swiglu_fuse(b, 2);
            if (!rc)
                rc = run(b, n_seq, 0, V, toks, fused);
            const int64_t eager_fused = sd_backend_cuda_swiglu_fused(b) - before;
            sd_backend_cuda_set_graphs(b, 1);
            if (!rc)
                rc = run(b, n_seq, 0, V, toks, graph);
            sd_backend_cuda_set_graphs(b, 0);
            sd_backend_cuda_set_swiglu_fuse(b, 1);
            if (!rc)
                rc = run(b, n_seq, 0, V, toks, dflt);
            CHECK(rc == 0);
            CHECK_MSG(before == 0, "%s: %lld fused launches with the fusion off", pats[p], (long long)before);
            if (!rc) {
                CHECK_MSG(!memcmp(plain, fused, n * 4), "%s, %d sequences: fused logits differ", pats[p],
                          n_seq);
                CHECK_MSG(!memcmp(plain, graph, n * 4), "%s, %d sequences: fused graph logits differ",
                          pats[p], n_seq);
                CHECK_MSG(!memcmp(plain, dflt, n * 4), "%s, %d sequences: default-mode logits differ",
                          pats[p], n_seq);
            }
            /* every gate_up launch of a step takes it, or none (one tuned config per shape) */
            CHECK_MSG(eager_fused % cfg.n_layers == 0, "%s: %lld fused launches", pats[p],
                      (long long)eager_fused);
            fprintf(stderr, "  %s, %d sequences: %lld of the gate_up launches fused\n", pats[p], n_seq,
                    (long long)eager_fused);
            fused_total += eager_fused;
            free(plain), free(fused), free(graph), free(dflt);
            sd_backend_free(b);
        }
    /* the tuned kernels are the autotuner's choice; on these shapes most take the epilogue */
    CHECK_MSG(fused_total > 0, "no gate_up launch took the fused SwiGLU");
}
#else
static void test_fused_same_bits(void)
{
    SKIP("built without CUDA (SD_HAVE_CUDA unset)");
}
#endif

int main(void)
{
    RUN(test_fused_same_bits);
    return sd_test_done();
}
