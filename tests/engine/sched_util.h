/* sched_util: helpers shared by the scheduler tests — a recorder of one request's events,
 * the tiny model's backend, and a synchronous run of a set of requests to completion. */
#ifndef SD_TEST_SCHED_UTIL_H
#define SD_TEST_SCHED_UTIL_H

#include "engine/model.h"
#include "engine/sched.h"
#include "engine/tokenizer.h"
#include "tests/harness.h"

#define MODEL_DIR "models/tiny"
#define MAXT 256

static sd_model *M;

typedef struct res {
    int32_t tok[MAXT];
    size_t tok_text_len[MAXT]; /* bytes released by each TOKEN event */
    float lp[MAXT];
    int n_top;
    int32_t top_id[MAXT][4];
    float top_lp[MAXT][4];
    int n;
    char text[16384];
    size_t text_len;
    float *plp; /* prompt logprobs, [n_prompt-1] */
    int32_t *ptop;
    int n_prompt_ev, n_final, events_after_final, n_error;
    int prompt_after; /* TOKEN events seen before SD_EV_PROMPT */
    sd_finish finish;
    int32_t done_prompt, done_gen;
} res;

static void on_event(void *ud, const sd_event *ev)
{
    res *r = ud;
    if (r->n_final)
        r->events_after_final++;
    switch (ev->type) {
    case SD_EV_PROMPT: {
        r->n_prompt_ev++;
        r->prompt_after = r->n;
        size_t n = (size_t)(ev->n_prompt - 1);
        free(r->plp);
        free(r->ptop);
        r->plp = malloc(sizeof *r->plp * (n ? n : 1));
        r->ptop = malloc(sizeof *r->ptop * (n ? n : 1));
        for (size_t i = 0; i < n; i++) {
            r->plp[i] = ev->prompt_logprobs[i];
            r->ptop[i] = ev->n_top ? ev->prompt_top_ids[i * (size_t)ev->n_top] : -1;
        }
        break;
    }
    case SD_EV_TOKEN:
        if (r->n < MAXT) {
            r->tok[r->n] = ev->token;
            r->tok_text_len[r->n] = ev->text_len;
            r->lp[r->n] = ev->logprob;
            r->n_top = ev->n_top;
            for (int k = 0; k < ev->n_top && k < 4; k++) {
                r->top_id[r->n][k] = ev->top_ids[k];
                r->top_lp[r->n][k] = ev->top_logprobs[k];
            }
            r->n++;
        }
        if (r->text_len + ev->text_len < sizeof r->text) {
            memcpy(r->text + r->text_len, ev->text, ev->text_len);
            r->text_len += ev->text_len;
            r->text[r->text_len] = '\0';
        }
        break;
    case SD_EV_DONE:
        r->n_final++;
        r->finish = ev->finish;
        r->done_prompt = ev->n_prompt;
        r->done_gen = ev->n_generated;
        break;
    case SD_EV_ERROR:
        r->n_final++;
        r->n_error++;
        break;
    }
}

static void res_reset(res *r)
{
    free(r->plp);
    free(r->ptop);
    memset(r, 0, sizeof *r);
}

static sd_backend *backend_new(int32_t kv_blocks, int block_size)
{
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = 2;
    bo.kv_blocks = kv_blocks;
    bo.block_size = block_size;
    sd_backend *b = NULL;
    sd_diag d = {0};
    int rc = sd_backend_cpu_init(&b, M, &bo, &d);
    if (rc < 0)
        fprintf(stderr, "backend: %s\n", sd_diag_str(&d, rc));
    return b;
}

/* Token ids of a text with the model's BOS, malloc'd. */
static int32_t *encode(const char *text, int32_t *ret_n)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (sd_tok_encode(sd_model_tokenizer(M), text, strlen(text), 1, &ids, &n, NULL) < 0)
        return NULL;
    *ret_n = (int32_t)n;
    return ids;
}

static void greedy_params(sd_request_params *p, const int32_t *ids, int32_t n, int32_t max_tokens)
{
    sd_request_params_default(p);
    p->prompt = ids;
    p->n_prompt = n;
    p->max_tokens = max_tokens;
    p->sampling.temperature = 0;
    p->ignore_eos = 1;
}

/* Runs the requests to completion on a fresh scheduler; returns the final stats. */
static inline int run_all(sd_backend *b, const sd_engine_opts *o, sd_request_params *ps, res *rs, int n,
                          sd_engine_stats *st)
{
    sd_sched *s = NULL;
    sd_diag d = {0};
    int rc = sd_sched_init(&s, M, b, o, &d);
    if (rc < 0) {
        fprintf(stderr, "sched_init: %s\n", sd_diag_str(&d, rc));
        return rc;
    }
    for (int i = 0; i < n; i++) {
        sd_sched_req *r = NULL;
        rc = sd_sched_req_new(s, &ps[i], on_event, &rs[i], (uint64_t)i + 1, &r, &d);
        if (rc < 0) {
            fprintf(stderr, "req_new: %s\n", sd_diag_str(&d, rc));
            sd_sched_free(s);
            return rc;
        }
        sd_sched_add(s, r);
    }
    for (int guard = 0; sd_sched_has_work(s) && guard < 100000; guard++) {
        rc = sd_sched_step(s, &d);
        if (rc < 0) {
            fprintf(stderr, "step: %s\n", sd_diag_str(&d, rc));
            break;
        }
    }
    if (st)
        sd_sched_stats(s, st);
    sd_sched_free(s);
    return rc;
}

static void opts(sd_engine_opts *o, int max_seqs, int max_batch_tokens)
{
    sd_engine_opts_default(o);
    o->max_seqs = max_seqs;
    o->max_batch_tokens = max_batch_tokens;
}

#endif
