/* eval: perplexity and decode-distribution fidelity (KL, arg-max agreement) on the CPU backend,
 * one sequence at a time through each model. */
#include "prune/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/model.h"
#include "prune/calib.h"
#include "prune/cancel.h"

void sd_eval_spec_default(sd_eval_spec *s)
{
    *s = (sd_eval_spec){.seq_len = 512, .gen_tokens = 128};
}

typedef struct eval_model {
    sd_model *m;
    sd_backend *b;
    float *logits; /* [max_batch_tokens, vocab] */
    int32_t *blocks;
} eval_model;

static int em_open(eval_model *e, const char *dir, int threads, int32_t max_tokens, sd_diag *d)
{
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = threads;
    bo.max_batch_tokens = max_tokens;
    int rc = sd_model_open(&e->m, dir, d);
    if (rc == 0)
        rc = sd_backend_cpu_init(&e->b, e->m, &bo, d);
    if (rc != 0)
        return rc;
    e->logits = malloc((size_t)max_tokens * e->b->vocab * sizeof *e->logits);
    e->blocks = malloc((size_t)e->b->kv_blocks * sizeof *e->blocks);
    if (!e->logits || !e->blocks)
        return sd_diag_set(d, SD_ENOMEM, "eval: out of memory");
    for (int32_t i = 0; i < e->b->kv_blocks; i++)
        e->blocks[i] = i;
    return 0;
}

static void em_close(eval_model *e)
{
    free(e->logits);
    free(e->blocks);
    sd_backend_free(e->b);
    sd_model_free(e->m);
}

/* logits [n, vocab] for every position of one sequence */
static int em_forward(eval_model *e, const sd_calib_seq *q, sd_diag *d)
{
    if (q->n > e->b->max_batch_tokens)
        return sd_diag_set(d, SD_EINVAL, "eval: sequence of %d tokens longer than %d", q->n,
                           e->b->max_batch_tokens);
    sd_batch_seq s = {
        .pos = 0, .n_tokens = q->n, .tokens = q->tokens, .block_table = e->blocks, .all_logits = 1};
    return sd_backend_forward(e->b, &s, 1, e->logits, d);
}

/* log-softmax of row into out (fp64 sums), returns the arg-max */
static int32_t log_softmax(const float *row, int32_t v, double *out)
{
    int32_t am = 0;
    for (int32_t i = 1; i < v; i++)
        if (row[i] > row[am])
            am = i;
    double s = 0;
    for (int32_t i = 0; i < v; i++)
        s += exp((double)row[i] - row[am]);
    double lse = row[am] + log(s);
    for (int32_t i = 0; i < v; i++)
        out[i] = row[i] - lse;
    return am;
}

static int perplexity(eval_model *e, const sd_calib_set *text, double *ppl, int64_t *count,
                      sd_eval_progress_fn progress, void *ud, const char *name, const volatile int *cancel,
                      sd_diag *d)
{
    int32_t v = e->b->vocab;
    double *lp = malloc((size_t)v * sizeof *lp), nll = 0;
    int64_t n = 0;
    int rc = lp ? 0 : sd_diag_set(d, SD_ENOMEM, "eval: out of memory");
    for (int32_t i = 0; i < text->n && rc == 0; i++) {
        if (sd_cancel_requested(cancel)) {
            rc = sd_diag_set(d, SD_ECANCEL, "eval: cancelled");
            break;
        }
        const sd_calib_seq *q = &text->seqs[i];
        if ((rc = em_forward(e, q, d)) != 0)
            break;
        for (int32_t t = 0; t + 1 < q->n; t++, n++) {
            log_softmax(e->logits + (size_t)t * v, v, lp);
            nll -= lp[q->tokens[t + 1]];
        }
        if (progress)
            progress(ud, name, i + 1, text->n);
    }
    free(lp);
    *ppl = n ? exp(nll / (double)n) : 0;
    *count = n;
    return rc;
}

/* KL(ref || model) and arg-max agreement at the positions that predict generated tokens. */
static int fidelity(eval_model *ref, eval_model *e, const sd_calib_set *gen, sd_eval_result *res,
                    sd_eval_progress_fn progress, void *ud, const volatile int *cancel, sd_diag *d)
{
    int32_t v = e->b->vocab;
    double *lr = malloc((size_t)v * sizeof *lr), *lm = malloc((size_t)v * sizeof *lm);
    float *rl = malloc((size_t)ref->b->max_batch_tokens * v * sizeof *rl);
    double kl = 0;
    int64_t n = 0, agree = 0;
    int rc = lr && lm && rl ? 0 : sd_diag_set(d, SD_ENOMEM, "eval: out of memory");
    for (int32_t i = 0; i < gen->n && rc == 0; i++) {
        if (sd_cancel_requested(cancel)) {
            rc = sd_diag_set(d, SD_ECANCEL, "eval: cancelled");
            break;
        }
        const sd_calib_seq *q = &gen->seqs[i];
        if ((rc = em_forward(ref, q, d)) != 0)
            break;
        memcpy(rl, ref->logits, (size_t)q->n * v * sizeof *rl);
        if ((rc = em_forward(e, q, d)) != 0)
            break;
        for (int32_t t = q->prefill_len - 1; t + 1 < q->n; t++, n++) {
            int32_t ar = log_softmax(rl + (size_t)t * v, v, lr);
            int32_t am = log_softmax(e->logits + (size_t)t * v, v, lm);
            double s = 0;
            for (int32_t k = 0; k < v; k++)
                s += exp(lr[k]) * (lr[k] - lm[k]);
            kl += s;
            agree += ar == am;
        }
        if (progress)
            progress(ud, "fidelity", i + 1, gen->n);
    }
    free(lr);
    free(lm);
    free(rl);
    res->kl = n ? kl / (double)n : 0;
    res->agree = n ? (double)agree / (double)n : 0;
    res->kl_tokens = n;
    return rc;
}

static void gen_tick(void *ud, int64_t done, int64_t target)
{
    void **p = ud;
    sd_eval_progress_fn fn = (sd_eval_progress_fn)(uintptr_t)p[0];
    if (fn)
        fn(p[1], "generate", done, target);
}

int sd_eval_run(const sd_eval_spec *spec, sd_eval_progress_fn progress, void *ud, const volatile int *cancel,
                sd_eval_result *res, sd_diag *d)
{
    eval_model a = {0}, r = {0};
    sd_calib_set text = {0}, prompts = {0}, gen = {0};
    *res = (sd_eval_result){0};
    int32_t maxt = spec->seq_len > 2048 ? spec->seq_len : 2048;
    int rc = em_open(&a, spec->model_dir, spec->threads, maxt, d);
    if (rc == 0 && spec->ref_dir)
        rc = em_open(&r, spec->ref_dir, spec->threads, maxt, d);
    if (rc == 0 && spec->text) {
        rc = sd_calib_load_text(a.m, spec->text, spec->seq_len, spec->max_tokens, &text, d);
        if (rc == 0)
            rc = perplexity(&a, &text, &res->ppl, &res->ppl_tokens, progress, ud, "perplexity", cancel, d);
        int64_t cnt = 0;
        if (rc == 0 && r.m && spec->ref_ppl)
            rc = perplexity(&r, &text, &res->ref_ppl, &cnt, progress, ud, "perplexity (ref)", cancel, d);
    }
    if (rc == 0 && spec->prompts && r.m) {
        sd_calib_gen_opts go;
        sd_calib_gen_opts_default(&go);
        go.max_new_tokens = spec->gen_tokens;
        void *tick_ud[2] = {(void *)(uintptr_t)progress, ud};
        rc = sd_calib_load_prompts(r.m, spec->ref_dir, spec->prompts, &prompts, d);
        if (rc == 0)
            rc = sd_calib_generate(r.b, r.m, &prompts, &go, gen_tick, tick_ud, cancel, &gen, d);
        if (rc == 0)
            rc = fidelity(&r, &a, &gen, res, progress, ud, cancel, d);
    }
    sd_calib_set_clear(&text);
    sd_calib_set_clear(&prompts);
    sd_calib_set_clear(&gen);
    em_close(&a);
    em_close(&r);
    return rc;
}
