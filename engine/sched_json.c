/* sched_json: the scheduler's side of constrained decoding — JSON mode (response_format
 * json_object, the validator of engine/jsonc.h), JSON schemas (json_schema, a compiled
 * engine/jschema.h) and tool calls (tool_spec, a compiled engine/toolcall.h: forced, or with
 * "auto" only the calls the model opens in its free text), each after a reasoning model's
 * thinking where the request lets it think first (engine/jthink.h, which also caps the thinking
 * at think_budget tokens, constrained or not). A request carries a validator and
 * its state; before each token the vocabulary mask (engine/jsonc_mask.c, one per scheduler, built
 * at the first such request) removes what cannot come next, on the host row (sd_sched__json_mask)
 * or as the backend sampler's allow bitset (sd_sched__json_allow); the chosen token's bytes then
 * advance the state (sd_sched__json_take). */
#include "sched_impl.h"

#include <stdlib.h>
#include <string.h>

#include "jthink.h"

_Static_assert(SD_JSCHEMA_STATE_MAX + SD_JTHINK_HEADER <= SD_JVAL_MAX_STATE &&
                   SD_TCALL_STATE_MAX + SD_JTHINK_HEADER <= SD_JVAL_MAX_STATE,
               "every validator's state fits the mask's walk, also wrapped for thinking");

/* A schema's or a tool list's validator, shared with the requests that asked for the same
 * (engine/jv_cache.h: the mask's cache then serves them all), into r->jv. Submit runs on any
 * thread: the cache locks, the id counter is atomic; const: they are the only things written. */
static int get_shared(const sd_sched *s, sd_sched_req *r, sd_jvc_kind kind, sd_tcall_mode mode, int parallel,
                      const char *text, sd_diag *d)
{
    sd_diag cd = {0};
    int rc = sd_jvc_get(s->jvc, kind, mode, parallel, text, (atomic_ullong *)&s->next_jv_id, &r->jvc, &cd);
    if (rc < 0) /* tool-list messages name their place from "tools" on ("tools[2] (f): ...") */
        return kind == SD_JVC_SCHEMA ? sd_diag_set(d, rc, "response_format: %s", sd_diag_str(&cd, rc))
                                     : sd_diag_set(d, rc, "%s", sd_diag_str(&cd, rc));
    r->jv = *sd_jvc_jval(r->jvc);
    return 0;
}

/* The validator of what p constrains (the free one when only the thinking is), into r->jv. */
static int get_inner(const sd_sched *s, sd_sched_req *r, const sd_request_params *p, sd_diag *d)
{
    if (p->tool_spec)
        return get_shared(s, r, SD_JVC_TOOLS, (sd_tcall_mode)p->tool_mode, p->tool_parallel, p->tool_spec, d);
    if (p->json_schema)
        return get_shared(s, r, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, p->json_schema, d);
    r->jv = p->json_object ? sd_jval_json : sd_jval_free;
    return 0;
}

int sd_sched__json_init(const sd_sched *s, sd_sched_req *r, const sd_request_params *p, sd_diag *d)
{
    const int constrained = p->json_object || p->json_schema || p->tool_spec;
    const int think = p->think == SD_THINK_MAY || p->think == SD_THINK_OPEN;
    if (!constrained && !(think && p->think_budget >= 0))
        return 0;
    if (p->tool_spec && (p->json_object || p->json_schema))
        return sd_diag_set(d, SD_EINVAL, "tools: %s cannot be combined with response_format",
                           p->tool_mode != SD_TCALL_FORCED ? "constrained tool calls" : "a forced tool call");
    if (!s->tok)
        return sd_diag_set(d, SD_EINVAL, "%s: the model has no tokenizer to constrain %s with",
                           p->tool_spec  ? "tools"
                           : constrained ? "response_format"
                                         : "thinking_token_budget",
                           constrained ? "JSON" : "the thinking");
    int rc = get_inner(s, r, p, d);
    if (rc < 0)
        return rc;
    r->json = 1;
    if (think) { /* the thinking first: jthink wraps what constrains the answer */
        r->jv_in = r->jv;
        if (sd_jthink_wrap(&r->jv_in, &r->jv) < 0)
            return sd_diag_set(d, SD_EINVAL,
                               "the constraint needs a %zu-byte state (at most %d with thinking)",
                               r->jv_in.size, SD_JVAL_MAX_STATE - SD_JTHINK_HEADER);
        r->think = 1;
        r->think_budget = p->think_budget;
    }
    if (!(r->jst = calloc(1, r->jv.size)))
        return sd_diag_set(d, SD_ENOMEM, "request: out of memory");
    void *in = r->jst;
    if (think) {
        sd_jthink_init(r->jst, (sd_think)p->think);
        in = sd_jthink_inner(r->jst);
        if (r->think_budget == 0) /* no thinking at all: a block the prompt opened closes at once */
            sd_jthink_close(r->jst);
    }
    if (r->jvc)
        sd_jvc_state_init(r->jvc, in);
    else if (p->json_object)
        sd_jfsm_init(in);
    return 0; /* the free validator's state is its zeros */
}

void sd_sched__json_free(sd_sched_req *r)
{
    free(r->jst);
    sd_jvc_put(r->jvc);
    r->jst = NULL;
    r->jvc = NULL;
}

static int ensure_mask(sd_sched *s, sd_diag *d)
{
    return s->jm ? 0 : sd_jmask_init(&s->jm, s->tok, d);
}

int sd_sched__json_mask(sd_sched *s, sd_sched_req *r, float *row)
{
    if (!r->json)
        return 0;
    sd_diag d = {0};
    int rc = ensure_mask(s, &d);
    if (rc < 0)
        return rc;
    return sd_jmask_apply_v(s->jm, &r->jv, r->jst, s->eos, s->n_eos, row, s->vocab) > 0 ? 0 : SD_FINISH_STOP;
}

int sd_sched__json_allow_at(sd_sched *s, const sd_sched_req *r, const void *state, uint64_t *out, sd_diag *d)
{
    int rc = ensure_mask(s, d);
    if (rc < 0)
        return rc;
    return sd_jmask_allowed_v(s->jm, &r->jv, state, s->eos, s->n_eos, s->vocab, out) > 0 ? 0 : 1;
}

int sd_sched__json_allow(sd_sched *s, sd_sched_req *r, uint64_t *out, sd_diag *d)
{
    int rc = sd_sched__json_allow_at(s, r, r->jst, out, d);
    if (rc > 0)
        r->json_end = 1;
    return rc;
}

/* Token tok's bytes into state (any state of r's validator; unspecified after a rejection). */
static int feed_bytes(const sd_sched *s, const sd_sched_req *r, void *state, int32_t tok)
{
    size_t n = 0;
    const char *b = sd_tok_token_bytes(s->tok, tok, &n);
    if (!b)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (r->jv.step(r->jv.ctx, state, (unsigned char)b[i]) < 0)
            return -1;
    return 0;
}

int sd_sched__json_feed(const sd_sched *s, const sd_sched_req *r, void *state, int32_t tok)
{
    if (sd_tok_is_special(s->tok, tok))
        return -1; /* EOS ends the text; the others are never allowed inside it */
    return feed_bytes(s, r, state, tok);
}

int sd_sched__json_take(const sd_sched *s, sd_sched_req *r, int32_t tok)
{
    for (int i = 0; i < s->n_eos; i++)
        if (s->eos[i] == tok)
            return 0;                    /* EOS ends the text: no bytes */
    uint64_t tmp[SD_JVAL_MAX_STATE / 8]; /* all or nothing, as sd_jfsm_feed; aligned as states must be */
    memcpy(tmp, r->jst, r->jv.size);
    if (feed_bytes(s, r, tmp, tok) < 0)
        return -1;
    memcpy(r->jst, tmp, r->jv.size);
    if (r->think && r->think_budget >= 0 && sd_jthink_thinking(r->jst) &&
        ++r->think_tokens >= r->think_budget)
        sd_jthink_close(r->jst); /* the budget is spent: "</think>" is all that may come */
    /* a budget without a constraint: once the thinking is over nothing is constrained, so the
     * rest of the reply samples unmasked like any other request (no mask a token, special tokens
     * as usual) */
    if (r->think && r->jv_in.id == SD_JVAL_FREE_ID && sd_jthink_past(r->jst))
        r->json = 0;
    return 0;
}

/* s->allow holds a row of vocab bits for every sampling request a step may make (cap_srows). */
int sd_sched__json_allow_row(sd_sched *s, sd_sched_req *r, const void *state, sd_sample_req *q, int m,
                             sd_diag *d)
{
    const size_t words = ((size_t)s->vocab + 63) / 64;
    if (!s->allow && !(s->allow = malloc(sizeof *s->allow * words * (size_t)s->cap_srows)))
        return sd_diag_set(d, SD_ENOMEM, "engine: out of memory for JSON masks");
    uint64_t *a = s->allow + words * (size_t)m;
    int rc = state ? sd_sched__json_allow_at(s, r, state, a, d) : sd_sched__json_allow(s, r, a, d);
    if (rc == 0)
        q->allow = a;
    return rc;
}
