/* warmup: first-use work of a GPU backend paid before serving (engine/warmup.h). */
#include "engine/warmup.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/nm_spmv.h" /* sd_nm_tune_bucket, SD_NM_MAX_B, SD_NM_MAX_B_WIDE, SD_NM_MAX_B_TILED */

static int imin(int a, int b)
{
    return a < b ? a : b;
}

static int blocks_for(int tokens, int block_size)
{
    return (tokens + block_size - 1) / block_size;
}

/* Whether a step fits the limits: tokens, sequences, positions and KV blocks. */
/* Tokens and KV blocks of a step (engine/warmup.h sd_warmup_step). */
static int step_tokens(sd_warmup_step s)
{
    return s.each_tokens > 1 ? s.n_seqs * s.each_tokens : s.first_tokens + s.n_seqs - 1;
}
static int step_blocks(sd_warmup_step s, int block_size)
{
    return s.each_tokens > 1 ? s.n_seqs * blocks_for(s.each_tokens, block_size)
                             : blocks_for(s.first_tokens, block_size) + s.n_seqs - 1;
}

static int step_fits(const sd_warmup_opts *o, int32_t kv_blocks, int block_size, sd_warmup_step s)
{
    const int longest = s.each_tokens > 1 ? s.each_tokens : s.first_tokens;
    return s.n_seqs >= 1 && s.first_tokens >= 1 && s.n_seqs <= o->max_seqs &&
           step_tokens(s) <= o->max_batch_tokens && longest <= o->max_len &&
           step_blocks(s, block_size) <= kv_blocks;
}

/* The row counts the kernels' tuning keeps apart, from 2: 2..SD_NM_MAX_B, then multiples of 8 up
 * to SD_NM_MAX_B_WIDE, then of 64 (sd_nm_tune_bucket). */
static int next_bucket(int n)
{
    return n < SD_NM_MAX_B ? n + 1 : sd_nm_tune_bucket(n + 1);
}

static int planned(const sd_warmup_step *steps, int n, sd_warmup_step s)
{
    for (int i = 0; i < n; i++)
        if (steps[i].n_seqs == s.n_seqs && steps[i].first_tokens == s.first_tokens &&
            steps[i].each_tokens == s.each_tokens)
            return 1;
    return 0;
}

int sd_warmup_plan(const sd_warmup_opts *o, int32_t kv_blocks, int block_size, int row_step,
                   sd_warmup_step *steps)
{
    int n = 0;
#define ADD(ns, ft) ADD3(ns, ft, 0)
#define ADD3(ns, ft, et)                                                                                     \
    do {                                                                                                     \
        const sd_warmup_step s_ = {(ns), (ft), (et)};                                                        \
        if (n < SD_WARMUP_MAX_STEPS && step_fits(o, kv_blocks, block_size, s_) && !planned(steps, n, s_))    \
            steps[n++] = s_;                                                                                 \
    } while (0)
    /* decode: each graph bucket (powers of two), and the largest batch */
    for (int b = 1; b < o->max_seqs; b *= 2)
        ADD(b, 1);
    ADD(o->max_seqs, 1);
    /* prefill chunks of one sequence: each tuned row count of the linears (above SD_NM_MAX_B_WIDE,
     * those of the tiled wide kernels, engine/cuda_linear.cu) */
    for (int t = 2; t <= SD_NM_MAX_B_TILED; t = next_bucket(t))
        ADD(1, t);
    /* mixed steps: r logits rows (the lm_head's tuned row counts), r + 1 tokens */
    for (int r = 2; r <= SD_NM_MAX_B_WIDE; r = next_bucket(r))
        ADD(r, 2);
    /* the largest chunk (cuBLAS on expanded weights, the tiled prefill attention) */
    int big = imin(o->max_batch_tokens, o->max_len);
    big = imin(big, kv_blocks * block_size);
    ADD(1, big);
    /* room allowing, the chunks between, where the backend plans its GEMMs per row_step rows
     * (cuSPARSELt: engine/cuda_cslt.h) */
    for (int t = SD_NM_MAX_B_TILED + row_step; row_step > 0 && t < big; t += row_step)
        ADD(1, t);
    /* speculative steps: each graph bucket of drafting sequences, and the largest */
    const int spec_seqs = imin(o->spec_max_seqs, o->max_seqs);
    for (int b = 1; o->spec_tokens > 0 && b < spec_seqs; b *= 2)
        ADD3(b, 1, 1 + o->spec_tokens);
    if (o->spec_tokens > 0)
        ADD3(spec_seqs, 1, 1 + o->spec_tokens);
#undef ADD3
#undef ADD
    return n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Samples up to 8 of the step's rows: greedy ones, and ones with every filter, a biased penalty and
 * logprobs, so that each sampling kernel has run once. */
static int warm_sampler(sd_backend *b, int rows, sd_diag *d)
{
    sd_sample_req reqs[8];
    sd_sample_out out[8];
    const sd_sample_pen pen = {0, 1, 0.5f};
    const int n = imin(rows, 8);
    for (int i = 0; i < n; i++) {
        sd_sample_req *q = &reqs[i];
        memset(q, 0, sizeof *q);
        q->row = i;
        sd_sampling_default(&q->s);
        q->greedy = i % 2 == 0;
        q->n_top = q->greedy ? -1 : 5;
        q->u = 0.5;
        if (!q->greedy) {
            q->s.temperature = 0.7f, q->s.top_k = 40, q->s.top_p = 0.9f, q->s.min_p = 0.05f;
            q->s.presence_penalty = 0.1f, q->s.repetition_penalty = 1.1f;
            q->rep_on = q->pf_on = 1;
            q->pen = &pen, q->n_pen = 1;
        }
    }
    return sd_backend_sample(b, reqs, n, out, d);
}

/* One step of the plan: block tables from the scratch blocks 0, 1, ... (the first sequence's
 * run, then one block each). */
static int run_step(sd_backend *b, sd_warmup_step s, const int32_t *tokens, const int32_t *blocks,
                    sd_batch_seq *seqs, float *logits, sd_diag *d)
{
    const int nb0 = blocks_for(s.first_tokens, b->block_size), nbe = blocks_for(s.each_tokens, b->block_size);
    for (int i = 0; i < s.n_seqs; i++)
        if (s.each_tokens > 1)
            seqs[i] = (sd_batch_seq){0, s.each_tokens, tokens, blocks + i * nbe, 1};
        else
            seqs[i] = (sd_batch_seq){0, i ? 1 : s.first_tokens, tokens, blocks + (i ? nb0 + i - 1 : 0), 0};
    int rc = sd_backend_forward(b, seqs, s.n_seqs, logits, d);
    if (rc == 0 && !logits)
        rc = warm_sampler(b, s.each_tokens > 1 ? s.n_seqs * s.each_tokens : s.n_seqs, d);
    return rc;
}

int sd_backend_warmup(sd_backend *b, const sd_warmup_opts *o, sd_warmup_stats *st, sd_diag *d)
{
    sd_warmup_step steps[SD_WARMUP_MAX_STEPS];
    const int n = sd_warmup_plan(o, b->kv_blocks, b->block_size, b->gemm_row_step, steps);
    int max_tokens = 1, max_seqs = 1, max_rows = 1, n_blocks = 1;
    for (int i = 0; i < n; i++) {
        const sd_warmup_step *s = &steps[i];
        const int rows = s->each_tokens > 1 ? step_tokens(*s) : s->n_seqs;
        max_tokens = step_tokens(*s) > max_tokens ? step_tokens(*s) : max_tokens;
        max_seqs = s->n_seqs > max_seqs ? s->n_seqs : max_seqs;
        max_rows = rows > max_rows ? rows : max_rows;
        n_blocks = step_blocks(*s, b->block_size) > n_blocks ? step_blocks(*s, b->block_size) : n_blocks;
    }
    int32_t *tokens = malloc((size_t)max_tokens * sizeof *tokens);
    int32_t *blocks = malloc((size_t)n_blocks * sizeof *blocks);
    sd_batch_seq *seqs = malloc((size_t)max_seqs * sizeof *seqs);
    /* the logits stay on a backend that samples; otherwise they come back to the host */
    float *logits = b->vt->sample ? NULL : malloc((size_t)max_rows * b->vocab * sizeof *logits);
    int rc = 0;
    if (!tokens || !blocks || !seqs || (!b->vt->sample && !logits))
        rc = sd_diag_set(d, SD_ENOMEM, "warm-up: out of memory");
    for (int i = 0; !rc && i < max_tokens; i++) /* any valid ids: the outputs are thrown away */
        tokens[i] = (int32_t)((7 * i + 1) % b->vocab);
    for (int i = 0; !rc && i < n_blocks; i++)
        blocks[i] = i;
    const double t0 = now_s();
    int done = 0;
    while (!rc && done < n) {
        const sd_warmup_step s = steps[done];
        sd_diag sd = {0};
        if (o->stop && o->stop(o->stop_ud))
            rc = sd_diag_set(d, SD_ECANCEL, "warm-up: stopped");
        else if ((rc = run_step(b, s, tokens, blocks, seqs, logits, &sd)) != 0)
            sd_diag_set(d, rc, "warm-up step %d of %d (%d sequences, %d tokens): %s", done + 1, n, s.n_seqs,
                        step_tokens(s), sd.msg);
        else
            done++;
    }
    if (st)
        *st = (sd_warmup_stats){done, now_s() - t0};
    free(tokens);
    free(blocks);
    free(seqs);
    free(logits);
    return rc;
}

int sd_backend_wants_warmup(const sd_backend *b)
{
    return b && b->vt->warms_up;
}
