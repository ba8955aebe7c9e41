/* twin_backend: the CPU backend whose logits stay "on the backend" when forward gets NULL,
 * sampled there by sd_sample_twin (the CUDA sampler's method): the scheduler's path for a
 * backend that samples, on any machine. Shared by test_sample_req and test_spec. */
#ifndef SD_TEST_TWIN_BACKEND_H
#define SD_TEST_TWIN_BACKEND_H

#include "engine/sample_req.h"

#include "tests/engine/sched_util.h"

typedef struct twin_backend {
    sd_backend base;
    sd_backend *cpu;
    float *logits; /* [cap_rows, vocab] */
    int32_t cap_rows, rows;
    int calls, sampled;
    /* forward calls by shape: steps with drafts (sequences of several tokens, each a logits row)
     * and no prefill chunk, whose sequences all carry as many tokens / not */
    int uniform_draft_steps, mixed_draft_steps;
} twin_backend;

static void tw_count_shape(twin_backend *t, const sd_batch_seq *seqs, int n)
{
    int drafts = 0, prefill = 0, same = 1;
    for (int i = 0; i < n; i++) {
        drafts |= seqs[i].all_logits && seqs[i].n_tokens > 1;
        prefill |= !seqs[i].all_logits && seqs[i].n_tokens > 1;
        same &= seqs[i].n_tokens == seqs[0].n_tokens;
    }
    if (drafts && !prefill)
        *(same ? &t->uniform_draft_steps : &t->mixed_draft_steps) += 1;
}

static int tw_forward(sd_backend *b, const sd_batch_seq *seqs, int n, float *logits, sd_diag *d)
{
    twin_backend *t = (twin_backend *)b;
    t->rows = 0;
    tw_count_shape(t, seqs, n);
    if (logits)
        return sd_backend_forward(t->cpu, seqs, n, logits, d);
    int32_t rows = 0;
    for (int i = 0; i < n; i++)
        rows += seqs[i].all_logits ? seqs[i].n_tokens : 1;
    if (rows > t->cap_rows) {
        float *p = realloc(t->logits, sizeof *p * (size_t)rows * (size_t)b->vocab);
        if (!p)
            return SD_ENOMEM;
        t->logits = p;
        t->cap_rows = rows;
    }
    int rc = sd_backend_forward(t->cpu, seqs, n, t->logits, d);
    t->rows = rc == 0 ? rows : 0;
    return rc;
}

static int tw_sample(sd_backend *b, const sd_sample_req *reqs, int n, sd_sample_out *out, sd_diag *d)
{
    twin_backend *t = (twin_backend *)b;
    t->calls++;
    for (int i = 0; i < n; i++) {
        if (reqs[i].row < 0 || reqs[i].row >= t->rows)
            return sd_diag_set(d, SD_EINVAL, "twin: row %d of %d", (int)reqs[i].row, (int)t->rows);
        int rc =
            sd_sample_twin(t->logits + (size_t)reqs[i].row * (size_t)b->vocab, b->vocab, &reqs[i], &out[i]);
        if (rc < 0)
            return rc;
        t->sampled++;
    }
    return 0;
}

static void tw_free(sd_backend *b)
{
    twin_backend *t = (twin_backend *)b;
    if (!t)
        return;
    sd_backend_free(t->cpu);
    free(t->logits);
    free(t);
}

static const sd_backend_vtbl twin_vtbl = {"twin", tw_forward, tw_free, tw_sample, 0};

static twin_backend *twin_new(void)
{
    twin_backend *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->cpu = backend_new(256, 16);
    if (!t->cpu) {
        free(t);
        return NULL;
    }
    t->base = *t->cpu;
    t->base.vt = &twin_vtbl;
    return t;
}

#endif
