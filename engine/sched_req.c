/* sched_req: one request's life outside batching — validation at submit, prompt logprobs,
 * sampling, EOS / max_tokens / stop-string detection, incremental text and its events. */
#include "sched_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* logit_bias: in-vocabulary, distinct tokens with finite biases (the samplers add each entry
 * to its token; a token twice would count twice on one path and be refused on none). */
static int check_bias(const sd_sched *s, const sd_sampling *sp, sd_diag *d)
{
    if (sp->n_bias < 0 || sp->n_bias > SD_MAX_LOGIT_BIAS || (sp->n_bias > 0 && !sp->bias))
        return sd_diag_set(d, SD_EINVAL, "logit_bias: %d entries, at most %d allowed", (int)sp->n_bias,
                           SD_MAX_LOGIT_BIAS);
    for (int32_t i = 0; i < sp->n_bias; i++) {
        const sd_logit_bias *b = &sp->bias[i];
        if (b->token < 0 || b->token >= s->vocab)
            return sd_diag_set(d, SD_EINVAL, "logit_bias: token id %d is outside the vocabulary (%d)",
                               (int)b->token, (int)s->vocab);
        if (!isfinite(b->bias))
            return sd_diag_set(d, SD_EINVAL, "logit_bias: the bias of token %d is not a finite number",
                               (int)b->token);
        for (int32_t j = 0; j < i; j++)
            if (sp->bias[j].token == b->token)
                return sd_diag_set(d, SD_EINVAL, "logit_bias: token id %d appears twice", (int)b->token);
    }
    return 0;
}

static int check_params(const sd_sched *s, const sd_request_params *p, sd_diag *d)
{
    if (!p->prompt || p->n_prompt < 1)
        return sd_diag_set(d, SD_EINVAL, "prompt: at least one token is required");
    if (p->max_tokens < 0)
        return sd_diag_set(d, SD_EINVAL, "max_tokens: %d is negative", (int)p->max_tokens);
    if (p->n_prompt > s->max_model_len)
        return sd_diag_set(d, SD_EINVAL, "prompt: %d tokens exceed the maximum context length of %d tokens",
                           (int)p->n_prompt, (int)s->max_model_len);
    if ((int64_t)p->n_prompt + p->max_tokens > s->max_model_len)
        return sd_diag_set(d, SD_EINVAL,
                           "max_tokens: %d tokens requested but the prompt has %d and the maximum context "
                           "length is %d tokens",
                           (int)p->max_tokens, (int)p->n_prompt, (int)s->max_model_len);
    for (int32_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= s->vocab)
            return sd_diag_set(d, SD_EINVAL,
                               "prompt: token id %d at position %d is outside the vocabulary (%d)",
                               (int)p->prompt[i], (int)i, (int)s->vocab);
    if (p->logprobs < -1 || p->logprobs > SD_MAX_TOP_LOGPROBS)
        return sd_diag_set(d, SD_EINVAL, "logprobs: %d is outside [0, %d]", p->logprobs, SD_MAX_TOP_LOGPROBS);
    if (p->n_stop < 0 || p->n_stop > SD_MAX_STOP)
        return sd_diag_set(d, SD_EINVAL, "stop: %d strings, at most %d allowed", p->n_stop, SD_MAX_STOP);
    if (p->n_stop > 0 && !s->tok)
        return sd_diag_set(d, SD_EINVAL, "stop: the model has no tokenizer to match stop strings with");
    for (int i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0])
            return sd_diag_set(d, SD_EINVAL, "stop: string %d is empty", i);
    return check_bias(s, &p->sampling, d);
}

int sd_sched_req_new(const sd_sched *s, const sd_request_params *p, sd_event_cb cb, void *ud, uint64_t id,
                     sd_sched_req **ret, sd_diag *d)
{
    int rc = check_params(s, p, d);
    if (rc < 0)
        return rc;
    sd_sched_req *r = calloc(1, sizeof *r);
    if (!r)
        return sd_diag_set(d, SD_ENOMEM, "request: out of memory");
    r->id = id;
    r->cb = cb;
    r->ud = ud;
    r->priority = p->priority;
    r->sampling = p->sampling;
    r->sampling.bias = NULL;
    if (p->sampling.n_bias > 0) {
        r->bias = malloc(sizeof *r->bias * (size_t)p->sampling.n_bias);
        if (!r->bias) {
            free(r);
            return sd_diag_set(d, SD_ENOMEM, "request: out of memory");
        }
        memcpy(r->bias, p->sampling.bias, sizeof *r->bias * (size_t)p->sampling.n_bias);
        r->sampling.bias = r->bias;
    }
    r->max_tokens = p->max_tokens;
    r->ignore_eos = p->ignore_eos;
    r->logprobs = p->logprobs;
    r->prompt_logprobs = p->prompt_logprobs != 0;
    r->n_top = p->logprobs > 0 ? p->logprobs : 0;
    r->n_prompt = r->n_tokens = p->n_prompt;
    r->cap_tokens = p->n_prompt + p->max_tokens;
    r->tokens = malloc(sizeof *r->tokens * (size_t)r->cap_tokens);
    sd_kv_seq_init(&r->kv);
    rc = sd_stopstr_init(&r->stop, p->stop, p->n_stop);
    if (!r->tokens || rc < 0)
        goto fail;
    if (r->prompt_logprobs && p->n_prompt > 1) {
        size_t n = (size_t)(p->n_prompt - 1);
        r->plp = malloc(sizeof *r->plp * n);
        r->ptop_id = malloc(sizeof *r->ptop_id * n * (size_t)(r->n_top ? r->n_top : 1));
        r->ptop_lp = malloc(sizeof *r->ptop_lp * n * (size_t)(r->n_top ? r->n_top : 1));
        if (!r->plp || !r->ptop_id || !r->ptop_lp)
            goto fail;
    }
    memcpy(r->tokens, p->prompt, sizeof *r->tokens * (size_t)p->n_prompt);
    sd_rng_seed(&r->rng, p->sampling.seed);
    if ((rc = sd_sched__json_init(s, r, p, d)) < 0) {
        sd_sched_req_free(r);
        return rc;
    }
    if (s->tok) {
        /* special tokens (EOS, chat markers) are not part of the text, as OpenAI servers do */
        sd_tok_stream_init(&r->stream, s->tok, 1);
        r->has_stream = 1;
    }
    *ret = r;
    return 0;
fail:
    sd_sched_req_free(r);
    return sd_diag_set(d, SD_ENOMEM, "request: out of memory");
}

void sd_sched_req_free(sd_sched_req *r)
{
    if (!r)
        return;
    sd_stopstr_free(&r->stop);
    sd_sched__json_free(r);
    free(r->bias);
    free(r->tokens);
    free(r->kv.blocks); /* the blocks themselves went back to the pool already */
    free(r->plp);
    free(r->ptop_id);
    free(r->ptop_lp);
    free(r);
}

void sd_sched__emit_done(sd_sched_req *r, sd_finish f)
{
    sd_event ev = {0};
    ev.type = SD_EV_DONE;
    ev.req_id = r->id;
    ev.finish = f;
    ev.n_prompt = r->n_prompt;
    ev.n_generated = r->n_tokens - r->n_prompt;
    ev.n_cached = r->n_cached;
    if (r->cb)
        r->cb(r->ud, &ev);
}

void sd_sched__emit_error(sd_sched_req *r, int code, const char *msg)
{
    sd_event ev = {0};
    ev.type = SD_EV_ERROR;
    ev.req_id = r->id;
    ev.code = code;
    ev.message = msg ? msg : sd_strerror(code);
    ev.n_prompt = r->n_prompt;
    ev.n_generated = r->n_tokens - r->n_prompt;
    if (r->cb)
        r->cb(r->ud, &ev);
}

void sd_sched__prompt_rows(sd_sched *s, sd_sched_req *r, int32_t pos, int32_t n, const float *rows)
{
    for (int32_t i = 0; i < n; i++) {
        int32_t p = pos + i; /* row i predicts token p + 1 */
        if (p + 1 >= r->n_prompt)
            break;
        const float *row = rows + (size_t)i * (size_t)s->vocab;
        r->plp[p] = sd_logprob_of(row, s->vocab, r->tokens[p + 1]);
        if (r->n_top)
            sd_logprobs_top(row, s->vocab, r->n_top, r->ptop_id + (size_t)p * (size_t)r->n_top,
                            r->ptop_lp + (size_t)p * (size_t)r->n_top);
    }
}

static void emit_prompt(sd_sched_req *r)
{
    sd_event ev = {0};
    ev.type = SD_EV_PROMPT;
    ev.req_id = r->id;
    ev.n_prompt = r->n_prompt;
    ev.n_top = r->n_top;
    ev.prompt_logprobs = r->plp;
    ev.prompt_top_ids = r->ptop_id;
    ev.prompt_top_logprobs = r->ptop_lp;
    if (r->cb)
        r->cb(r->ud, &ev);
}

static int is_eos(const sd_sched *s, int32_t tok)
{
    for (int i = 0; i < s->n_eos; i++)
        if (s->eos[i] == tok)
            return 1;
    return 0;
}

static int text_reserve(sd_sched *s, size_t need)
{
    if (need <= s->cap_text)
        return 0;
    char *p = realloc(s->text, need);
    if (!p)
        return SD_ENOMEM;
    s->text = p;
    s->cap_text = need;
    return 0;
}

/* Decodes `tok` (and, when `final`, whatever the stream still holds) into s->text. */
static int decode_token(sd_sched *s, sd_sched_req *r, int32_t tok, int final, size_t *ret_len)
{
    *ret_len = 0;
    if (!r->has_stream)
        return 0;
    size_t tok_len = 0;
    if (!sd_tok_token_bytes(s->tok, tok, &tok_len))
        tok_len = 0;
    /* every byte may become U+FFFD (3 bytes); room for the pending bytes and the flush */
    size_t cap = 3 * (tok_len + 16) + 128;
    if (text_reserve(s, cap) < 0)
        return SD_ENOMEM;
    size_t n = 0, m = 0;
    int rc = sd_tok_stream_push(&r->stream, tok, s->text, s->cap_text, &n);
    for (int tries = 0; rc == SD_EFULL && tries < 8; tries++) /* nothing consumed: retry bigger */
        if ((rc = text_reserve(s, 2 * s->cap_text)) == 0)
            rc = sd_tok_stream_push(&r->stream, tok, s->text, s->cap_text, &n);
    if (rc < 0)
        return rc;
    if (final && text_reserve(s, n + 128) < 0)
        return SD_ENOMEM;
    if (final) {
        rc = sd_tok_stream_flush(&r->stream, s->text + n, s->cap_text - n, &m);
        if (rc < 0)
            return rc;
    }
    *ret_len = n + m;
    return 0;
}

static void emit_token(sd_sched *s, sd_sched_req *r, int32_t tok, const char *text, size_t len,
                       const sd_sample_out *o)
{
    int32_t top_id[SD_MAX_TOP_LOGPROBS];
    float top_lp[SD_MAX_TOP_LOGPROBS];
    sd_event ev = {0};
    ev.type = SD_EV_TOKEN;
    ev.req_id = r->id;
    ev.token = tok;
    ev.text = text;
    ev.text_len = len;
    if (r->logprobs >= 0 && o) {
        ev.logprob = o->logprob;
        ev.n_top = r->logprobs;
        ev.top_ids = o->top_ids;
        ev.top_logprobs = o->top_lps;
    } else if (r->logprobs >= 0) {
        ev.logprob = sd_logprob_of(s->raw, s->vocab, tok);
        ev.n_top = r->logprobs;
        sd_logprobs_top(s->raw, s->vocab, r->logprobs, top_id, top_lp);
        ev.top_ids = top_id;
        ev.top_logprobs = top_lp;
    }
    if (r->cb)
        r->cb(r->ud, &ev);
}

int sd_sched__wants_token(const sd_sched_req *r)
{
    return r->n_tokens - r->n_prompt < r->max_tokens;
}

int sd_sched__advance(sd_sched *s, sd_sched_req *r, float *row, const sd_sample_out *o)
{
    if (!r->prompt_done) {
        r->prompt_done = 1;
        atomic_fetch_add(&s->st_prompt_tokens, (unsigned long long)r->n_prompt);
        if (r->prompt_logprobs)
            emit_prompt(r);
    }
    if (!sd_sched__wants_token(r)) /* max_tokens 0: prompt logprobs only */
        return SD_FINISH_LENGTH;
    if (r->json_end) /* the backend's JSON mask left no token */
        return SD_FINISH_STOP;
    int32_t tok = o ? o->token : -1;
    if (!o) {
        if (r->logprobs >= 0)
            memcpy(s->raw, row, sizeof *s->raw * (size_t)s->vocab);
        int rc = sd_sched__json_mask(s, r, row);
        if (rc != 0)
            return rc;
        tok = sd_sample(row, s->vocab, &r->sampling, r->tokens, r->n_tokens, r->n_prompt, &r->rng,
                        s->sampler_scratch);
    }
    if (tok < 0 || tok >= s->vocab)
        return SD_ERANGE; /* a backend's sampler answered nonsense */
    if (r->json && sd_sched__json_take(s, r, tok) < 0)
        return SD_ERANGE; /* the mask let through a token the JSON cannot take */
    r->tokens[r->n_tokens++] = tok;
    atomic_fetch_add(&s->st_gen_tokens, 1ULL);

    sd_finish fin = 0;
    if (!r->ignore_eos && is_eos(s, tok))
        fin = SD_FINISH_STOP;
    else if (r->n_tokens - r->n_prompt >= r->max_tokens)
        fin = SD_FINISH_LENGTH;
    size_t len = 0;
    const char *out = "";
    size_t out_len = 0;
    int rc = decode_token(s, r, tok, fin != 0, &len);
    if (rc >= 0)
        rc = sd_stopstr_push(&r->stop, s->text, len, fin != 0, &out, &out_len);
    if (rc < 0)
        return rc;
    if (rc == 1) /* the text before the stop string was released; the rest is dropped */
        fin = SD_FINISH_STOP;
    emit_token(s, r, tok, out, out_len, o);
    return (int)fin;
}
