/* fuse_run: what the GPU tests of the step's fusions share (test_swiglu_fuse_gpu,
 * test_norm_fuse_gpu): the bundled tiny model's shapes, the backend options (deterministic: no
 * split-K), and a run of a prompt then a few decode steps whose logits a test compares across
 * settings of one backend. */
#ifndef SD_TEST_FUSE_RUN_H
#define SD_TEST_FUSE_RUN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/backend.h"

#define TINY_CONFIG "models/tiny/config.json"
#define KV_BLOCKS 64
#define BS 16
#define PROMPT 21
#define STEPS 6

static void fuse_opts(sd_backend_opts *o)
{
    sd_backend_opts_default(o);
    o->kv_blocks = KV_BLOCKS;
    o->block_size = BS;
    o->max_batch_tokens = 256;
    o->deterministic = 1;
}

static void rand_tokens(int32_t *t, int n, int32_t vocab, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = 1 + (int32_t)((seed >> 8) % (uint32_t)(vocab - 1));
    }
}

/* A prompt, then STEPS decode steps, for n_seq (1 or 2) sequences (each its own KV blocks from
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

#endif
