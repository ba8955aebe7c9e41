/* test_norm_fuse_gpu: the CUDA backend with the RMSNorms before the qkv, gate_up and lm_head
 * linears computed in the linear's x staging (sd__cu_linear_norm) gives the same logits, bit for
 * bit, as with the norms as their own kernels, on synthetic weights of the bundled tiny model's
 * shapes (dense and every pattern), one and two sequences per step, eager and from a captured CUDA
 * graph, with the SwiGLU fused where it pays (the default) and wherever the kernel takes it (so
 * that the norm meets the epilogue). One backend per pattern with every setting, so that all run
 * the kernels its autotuner chose (deterministic mode: no split-K). Only one sequence a step takes
 * the norm. Skips without a GPU. */
#include "tests/harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/model_config.h"
#include "engine/synthetic.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"

#include "tests/engine/fuse_run.h"

static void test_fused_same_bits(void)
{
    if (sd_cuda_device_count() < 1)
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model_config cfg;
    REQUIRE(sd_model_config_load(&cfg, TINY_CONFIG, &d) == 0);
    sd_backend_opts o;
    fuse_opts(&o);
    const int32_t V = cfg.vocab;
    int32_t toks[100];
    rand_tokens(toks, 100, V, 29);
    const char *pats[] = {"dense", "2:4", "4:8", "8:16", "16:32"};
    int64_t fused_total = 0, dense_fused = 0;
    for (int p = 0; p < 5; p++)
        for (int n_seq = 1; n_seq <= 2; n_seq++) {
            sd_backend *b = NULL;
            int rc = sd_backend_cuda_init_synthetic(&b, &cfg, pats[p], 31 + p, &o, &d);
            CHECK_MSG(rc == 0, "%s: %s", pats[p], sd_diag_str(&d, rc));
            if (rc)
                continue;
            const size_t n = (size_t)STEPS * n_seq * V;
            float *plain = malloc(n * 4), *fused = malloc(n * 4), *graph = malloc(n * 4), *sw = malloc(n * 4);
            REQUIRE(plain && fused && graph && sw);
            sd_backend_cuda_set_graphs(b, 0);
            sd_backend_cuda_set_norm_fuse(b, 0);
            rc = run(b, n_seq, 0, V, toks, plain);
            const int64_t before = sd_backend_cuda_norm_fused(b);
            sd_backend_cuda_set_norm_fuse(b, 1);
            if (!rc)
                rc = run(b, n_seq, 0, V, toks, fused);
            const int64_t eager_fused = sd_backend_cuda_norm_fused(b) - before;
            sd_backend_cuda_set_graphs(b, 1);
            if (!rc)
                rc = run(b, n_seq, 0, V, toks, graph);
            sd_backend_cuda_set_graphs(b, 0);
            sd_backend_cuda_set_swiglu_fuse(b, 2);
            if (!rc)
                rc = run(b, n_seq, 0, V, toks, sw);
            CHECK(rc == 0);
            CHECK_MSG(before == 0, "%s: %lld launches with the norm while it was off", pats[p],
                      (long long)before);
            if (!rc) {
                CHECK_MSG(!memcmp(plain, fused, n * 4), "%s, %d sequences: logits with the norm fused differ",
                          pats[p], n_seq);
                CHECK_MSG(!memcmp(plain, graph, n * 4),
                          "%s, %d sequences: graph logits with the norm fused differ", pats[p], n_seq);
                CHECK_MSG(!memcmp(plain, sw, n * 4),
                          "%s, %d sequences: logits with norm and SwiGLU fused differ", pats[p], n_seq);
            }
            /* one decision per (linear, shape): each decode step fuses every layer's qkv, gate_up,
             * both or neither, and the lm_head or not; never at two sequences a step */
            const int64_t per_step = eager_fused / STEPS;
            CHECK_MSG(eager_fused % STEPS == 0 && per_step % cfg.n_layers <= 1 &&
                          per_step <= 2 * cfg.n_layers + 1,
                      "%s: %lld launches with the norm in %d steps", pats[p], (long long)eager_fused, STEPS);
            if (n_seq == 2)
                CHECK_MSG(eager_fused == 0, "%s, 2 sequences: %lld launches with the norm", pats[p],
                          (long long)eager_fused);
            fprintf(stderr, "  %s, %d sequences: %lld linear launches with the norm in %d steps\n", pats[p],
                    n_seq, (long long)eager_fused, STEPS);
            fused_total += eager_fused;
            dense_fused += p == 0 ? eager_fused : 0;
            free(plain), free(fused), free(graph), free(sw);
            sd_backend_free(b);
        }
    /* which kernels take one row is the tuner's choice (the tensor-core ones do not take the
     * norm); every model's lm_head is a dense GEMV, so some launch should have */
    CHECK_MSG(fused_total > 0, "no linear took the norm");
    if (!dense_fused)
        fprintf(stderr, "  (the dense model's tuned kernels took no norm on this GPU)\n");
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
