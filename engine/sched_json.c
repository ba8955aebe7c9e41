/* sched_json: the scheduler's side of constrained decoding — JSON mode (response_format
 * json_object, the validator of engine/jsonc.h), JSON schemas (json_schema, a compiled
 * engine/jschema.h) and forced tool calls (tool_spec, a compiled engine/toolcall.h). A request
 * carries a validator and its state; before each token the vocabulary mask (engine/jsonc_mask.c,
 * one per scheduler, built at the first such request) removes what cannot come next, on the host
 * row (sd_sched__json_mask) or as the backend sampler's allow bitset (sd_sched__json_allow); the
 * chosen token's bytes then advance the state (sd_sched__json_take). */
#include "sched_impl.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(SD_JSCHEMA_STATE_MAX <= SD_JVAL_MAX_STATE && SD_TCALL_STATE_MAX <= SD_JVAL_MAX_STATE,
               "every validator's state fits the mask's walk");

/* jschema as an sd_jval (jsonc.h): the schema is the constant context. */
static int js_step(const void *ctx, void *state, unsigned byte)
{
    return sd_jschema_step((const sd_jschema *)ctx, state, byte);
}

static int js_complete(const void *ctx, const void *state)
{
    return sd_jschema_complete((const sd_jschema *)ctx, state);
}

static int js_can_end(const void *ctx, const void *state)
{
    return sd_jschema_can_end((const sd_jschema *)ctx, state);
}

static int js_plain(const void *ctx, const void *state)
{
    return sd_jschema_in_plain_string((const sd_jschema *)ctx, state);
}

/* The tool-call validator as an sd_jval: the compiled tool list is the constant context. */
static int tc_step(const void *ctx, void *state, unsigned byte)
{
    return sd_tcall_step((const sd_tcall *)ctx, state, byte);
}

static int tc_complete(const void *ctx, const void *state)
{
    return sd_tcall_complete((const sd_tcall *)ctx, state);
}

static int tc_can_end(const void *ctx, const void *state)
{
    return sd_tcall_can_end((const sd_tcall *)ctx, state);
}

static int tc_plain(const void *ctx, const void *state)
{
    return sd_tcall_in_plain_string((const sd_tcall *)ctx, state);
}

/* A fresh validator id (sd_jval.id) for the mask's cache. Submit runs on any thread, so the
 * counter is atomic; const: it is the only thing written. */
static uint64_t next_jv_id(const sd_sched *s)
{
    return 1 + atomic_fetch_add((atomic_ullong *)&s->next_jv_id, 1);
}

static int init_schema(const sd_sched *s, sd_sched_req *r, const char *schema, sd_diag *d)
{
    sd_diag cd = {0};
    int rc = sd_jschema_compile(&r->schema, schema, strlen(schema), &cd);
    if (rc < 0)
        return sd_diag_set(d, rc, "response_format: %s", sd_diag_str(&cd, rc));
    size_t size = sd_jschema_state_size(r->schema);
    if (size == 0 || size > SD_JVAL_MAX_STATE)
        return sd_diag_set(d, SD_EINVAL, "response_format: the schema needs a %zu-byte state (at most %d)",
                           size, SD_JVAL_MAX_STATE);
    if (!(r->jst = calloc(1, size)))
        return sd_diag_set(d, SD_ENOMEM, "request: out of memory");
    sd_jschema_init(r->schema, r->jst);
    r->jv = (sd_jval){r->schema, next_jv_id(s), size, js_step, js_complete, js_can_end, js_plain};
    return 0;
}

/* The compile messages name their place from "tools" on ("tools[2] (get_weather): parameters/...")
 * and go to the caller as they are. */
static int init_tools(const sd_sched *s, sd_sched_req *r, const sd_request_params *p, sd_diag *d)
{
    int rc = sd_tcall_compile(&r->tcall, p->tool_spec, strlen(p->tool_spec), p->tool_parallel, d);
    if (rc < 0)
        return rc;
    size_t size = sd_tcall_state_size(r->tcall); /* <= SD_TCALL_STATE_MAX: the assert above */
    if (!(r->jst = calloc(1, size)))
        return sd_diag_set(d, SD_ENOMEM, "request: out of memory");
    sd_tcall_init(r->tcall, r->jst);
    r->jv = (sd_jval){r->tcall, next_jv_id(s), size, tc_step, tc_complete, tc_can_end, tc_plain};
    return 0;
}

int sd_sched__json_init(const sd_sched *s, sd_sched_req *r, const sd_request_params *p, sd_diag *d)
{
    if (!p->json_object && !p->json_schema && !p->tool_spec)
        return 0;
    if (p->tool_spec && (p->json_object || p->json_schema))
        return sd_diag_set(d, SD_EINVAL, "tools: a forced tool call cannot be combined with response_format");
    if (!s->tok)
        return sd_diag_set(d, SD_EINVAL, "%s: the model has no tokenizer to constrain JSON with",
                           p->tool_spec ? "tools" : "response_format");
    r->json = 1;
    if (p->tool_spec)
        return init_tools(s, r, p, d);
    if (p->json_schema)
        return init_schema(s, r, p->json_schema, d);
    r->jv = sd_jval_json;
    sd_jfsm_init(&r->jfsm);
    r->jst = &r->jfsm;
    return 0;
}

void sd_sched__json_free(sd_sched_req *r)
{
    if (r->jst != &r->jfsm)
        free(r->jst);
    sd_jschema_free(r->schema);
    sd_tcall_free(r->tcall);
    r->jst = NULL;
    r->schema = NULL;
    r->tcall = NULL;
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

int sd_sched__json_allow(sd_sched *s, sd_sched_req *r, uint64_t *out, sd_diag *d)
{
    int rc = ensure_mask(s, d);
    if (rc < 0)
        return rc;
    if (sd_jmask_allowed_v(s->jm, &r->jv, r->jst, s->eos, s->n_eos, s->vocab, out) > 0)
        return 0;
    r->json_end = 1;
    return 1;
}

int sd_sched__json_take(const sd_sched *s, sd_sched_req *r, int32_t tok)
{
    for (int i = 0; i < s->n_eos; i++)
        if (s->eos[i] == tok)
            return 0; /* EOS ends the text: no bytes */
    size_t n = 0;
    const char *b = sd_tok_token_bytes(s->tok, tok, &n);
    if (!b)
        return -1;
    uint64_t tmp[SD_JVAL_MAX_STATE / 8]; /* all or nothing, as sd_jfsm_feed; aligned as states must be */
    memcpy(tmp, r->jst, r->jv.size);
    for (size_t i = 0; i < n; i++)
        if (r->jv.step(r->jv.ctx, tmp, (unsigned char)b[i]) < 0)
            return -1;
    memcpy(r->jst, tmp, r->jv.size);
    return 0;
}
