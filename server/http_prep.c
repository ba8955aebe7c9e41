/* http_prep: turning a /v1 request body into engine requests — parsing, the model check,
 * chat template rendering, tokenization, choices and echo, context checks, submission. */
#include "server/http_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/jthink.h"
#include "engine/tokenizer.h"
#include "engine/toolcall.h"

#if __has_include("engine/chat_template.h")
#include "engine/chat_template.h"
#define SD_HAVE_CHAT_TEMPLATE 1
#endif

int sd_http__status_of(int code)
{
    switch (code) {
    case SD_EFULL:
        return 429;
    case SD_EINVAL:
    case SD_ERANGE:
    case SD_ENOTSUP:
        return 400;
    case SD_ECANCEL:
        return 503;
    default:
        return 500;
    }
}

static int render_chat(sd_http *h, sd_http__gen *g, char **ret, size_t *ret_len, sd_api_err *e)
{
#ifdef SD_HAVE_CHAT_TEMPLATE
    const sd_chat_template *ct = g->slot->m.chat_template;
    if (!ct)
        return sd_api_fail(e, 400, "messages", "no_chat_template", "the model has no chat template");
    /* chat_template_kwargs first: the request's own fields (add_generation_prompt, tools) win. The
     * messages were normalised when the body was parsed (api_parse.c). */
    json_t *extra = g->req.template_kwargs ? json_copy(g->req.template_kwargs) : json_object();
    sd_diag d = {0};
    int rc = extra ? 0 : sd_diag_set(&d, SD_ENOMEM, "out of memory");
    if (rc == 0) {
        json_object_set_new(extra, "add_generation_prompt", json_boolean(g->req.add_generation_prompt));
        if (g->req.tools)
            json_object_set(extra, "tools", g->req.tools);
        rc = sd_chat_template_render(ct, g->req.messages, extra, ret, ret_len, &d);
    }
    json_decref(extra);
    if (rc < 0)
        return sd_api_fail(e, 400, "messages", "template_error", "chat template: %s", sd_diag_str(&d, rc));
    g->reply.req = &g->req;
    /* a constrained reply thinks first too, its constraint from "</think>" on (engine/jthink.h) */
    g->thinks = sd_chat_template_thinks(ct);
    g->reply.think = h->o.split_reasoning && g->thinks;
    /* whether the prompt opened a <think> block: the reply's split, and the constraints, which
     * start after it, need it (the latter even when split_reasoning is off) */
    g->prompt_thinks = g->thinks && sd_reply_think_open(*ret, *ret_len);
    g->reply.think_open = g->reply.think && g->prompt_thinks;
    return 0;
#else
    (void)h, (void)g, (void)ret, (void)ret_len;
    return sd_api_fail(e, 400, "messages", "no_chat_template",
                       "chat templates are not supported by this build");
#endif
}

/* The markup of "auto" tool calls, from the model's chat template. "auto" needs one we parse:
 * a template that never shows the model its tools, or teaches a markup we cannot read, would
 * turn every call into free text. "required" and named calls are constrained, so any model
 * writes them (it sees the tools only if its template shows them). */
static int tool_format(sd_http__gen *g, sd_api_err *e)
{
    if (g->req.tool_choice != SD_TOOLS_AUTO)
        return 0;
#ifdef SD_HAVE_CHAT_TEMPLATE
    sd_chat_tools t = sd_chat_template_tools(g->slot->m.chat_template);
    g->reply.fmt = t == SD_CHAT_TOOLS_HERMES  ? SD_TOOL_FMT_HERMES
                   : t == SD_CHAT_TOOLS_LLAMA ? SD_TOOL_FMT_LLAMA
                                              : SD_TOOL_FMT_NONE;
    if (g->reply.fmt != SD_TOOL_FMT_NONE)
        return 0;
    return sd_api_fail(e, 400, "tool_choice", "unsupported_value",
                       t == SD_CHAT_TOOLS_IGNORED
                           ? "'tool_choice' 'auto': this model's chat template does not show tools to the "
                             "model; send 'tool_choice': 'required' or name a function (the output is then "
                             "constrained to calls)"
                           : "'tool_choice' 'auto': this model's chat template teaches a tool-call markup "
                             "sparsed does not parse (it reads <tool_call> and Llama 3's JSON); send "
                             "'tool_choice': 'required' or name a function");
#else
    return sd_api_fail(e, 400, "tool_choice", "unsupported_value",
                       "chat templates are not supported by this build");
#endif
}

/* Tokenizes every prompt (or the rendered chat) into g->pids/plen; a text prompt with the
 * tokenizer's special tokens (BOS etc.) where `special`. */
static int tokenize(sd_http *h, sd_http__gen *g, int special, sd_api_err *e)
{
    const sd_tokenizer *tok = sd_model_tokenizer(g->slot->m.model);
    int np = g->req.kind == SD_API_CHAT ? 1 : g->req.n_prompts;
    g->pids = calloc((size_t)np, sizeof *g->pids);
    g->plen = calloc((size_t)np, sizeof *g->plen);
    if (!g->pids || !g->plen)
        return sd_api_fail(e, 500, NULL, NULL, "out of memory");
    g->n_pids = np;
    int32_t vocab = sd_model_cfg(g->slot->m.model)->vocab;
    for (int i = 0; i < np; i++) {
        sd_api_prompt *p = g->req.kind == SD_API_CHAT ? NULL : &g->req.prompts[i];
        if (p && p->ids) {
            for (size_t k = 0; k < p->n_ids; k++)
                if (p->ids[k] >= vocab)
                    return sd_api_fail(e, 400, "prompt", "invalid_value",
                                       "token id %d is outside the vocabulary (%d)", p->ids[k], vocab);
            if (!(g->pids[i] = malloc(p->n_ids * sizeof **g->pids)))
                return sd_api_fail(e, 500, NULL, NULL, "out of memory");
            memcpy(g->pids[i], p->ids, p->n_ids * sizeof **g->pids);
            g->plen[i] = (int32_t)p->n_ids;
            continue;
        }
        if (!tok)
            return sd_api_fail(e, 400, "prompt", "no_tokenizer",
                               "the model has no tokenizer; send token ids");
        char *text = NULL;
        size_t tlen = 0;
        if (p) {
            text = p->text;
            tlen = strlen(text);
        } else if (render_chat(h, g, &text, &tlen, e) < 0) {
            return -1;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        sd_diag d = {0};
        /* Completions: BOS etc. as HF does; chat: the template already holds bos_token. */
        int rc = sd_tok_encode(tok, text, tlen, p != NULL && special, &ids, &n, &d);
        if (!p)
            free(text);
        if (rc < 0)
            return sd_api_fail(e, sd_http__status_of(rc), "prompt", NULL, "tokenizer: %s",
                               sd_diag_str(&d, rc));
        g->pids[i] = ids;
        g->plen[i] = (int32_t)n;
    }
    for (int i = 0; i < np; i++)
        g->prompt_tokens += g->plen[i];
    return 0;
}

/* The echo text of prompt i: the prompt as sent, or the decoded ids. */
static int echo_text(sd_http *h, sd_http__gen *g, int i, gen_choice *c)
{
    sd_api_prompt *p = &g->req.prompts[i];
    if (p->text)
        return sd_http__text_append(c, p->text, strlen(p->text));
    const sd_tokenizer *tok = sd_model_tokenizer(g->slot->m.model);
    char *s = NULL;
    size_t n = 0;
    if (!tok || sd_tok_decode(tok, p->ids, p->n_ids, 0, &s, &n, NULL) < 0)
        return 0;
    int rc = sd_http__text_append(c, s, n);
    free(s);
    return rc;
}

static int max_tokens_for(sd_http *h, sd_http__gen *g, int i, int32_t *ret, sd_api_err *e)
{
    int64_t room = (int64_t)g->slot->m.max_model_len - g->plen[i];
    int32_t mt = g->req.max_tokens;
    if (mt < 0 && g->req.kind == SD_API_CHAT)
        mt = room > 0 ? (int32_t)room : 1;
    if ((int64_t)g->plen[i] + mt > g->slot->m.max_model_len)
        return sd_api_fail(
            e, 400, g->req.kind == SD_API_CHAT ? "messages" : "prompt", "context_length_exceeded",
            "This model's maximum context length is %d tokens. However, you requested %lld tokens "
            "(%d in the prompt, %d for the completion). Please reduce the prompt or max_tokens.",
            (int)g->slot->m.max_model_len, (long long)g->plen[i] + mt, (int)g->plen[i], (int)mt);
    *ret = mt;
    return 0;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The request field an engine validation message names ("stop: ..."), for the error's param. */
static const char *engine_param(const char *msg)
{
    static const char *const fields[] = {
        "prompt", "max_tokens",         "stop",       "logprobs",        "temperature", "top_k", "top_p",
        "min_p",  "repetition_penalty", "logit_bias", "response_format", "tools"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        size_t n = strlen(fields[i]);
        if (!strncmp(msg, fields[i], n) && (msg[n] == ':' || msg[n] == '['))
            return fields[i];
    }
    return "prompt";
}

static int submit_all(sd_http *h, sd_http__gen *g, sd_api_err *e)
{
    /* Retrying cannot help a request larger than the whole queue: 400, not 429. */
    if (g->slot->m.max_waiting > 0 && g->n_ch > g->slot->m.max_waiting)
        return sd_api_fail(e, 400, "n", NULL,
                           "the request asks for %d sequences (n x prompts) but the server queues at most %d",
                           g->n_ch, g->slot->m.max_waiting);
    for (int i = 0; i < g->n_ch; i++) {
        gen_choice *c = &g->ch[i];
        sd_request_params p;
        sd_request_params_default(&p);
        p.prompt = g->pids[c->prompt_idx];
        p.n_prompt = g->plen[c->prompt_idx];
        if (max_tokens_for(h, g, c->prompt_idx, &p.max_tokens, e) < 0)
            return -1;
        p.sampling = g->req.sampling;
        int j = c->index % g->req.n; /* choice number within its prompt */
        p.sampling.seed = g->req.has_seed ? g->req.sampling.seed + (uint64_t)j
                                          : mix64(h->id_key ^ atomic_fetch_add(&h->id_ctr, 1));
        for (int k = 0; k < g->req.n_stop; k++)
            p.stop[k] = g->req.stop[k];
        p.n_stop = g->req.n_stop;
        p.ignore_eos = g->req.ignore_eos;
        p.logprobs = g->req.logprobs;
        p.prompt_logprobs = g->req.echo && g->req.logprobs >= 0;
        p.json_object = g->req.json_object;
        p.json_schema = g->req.json_schema;
        /* "required" / named: the reply is calls; "auto" in Hermes markup: free text in which
         * each <tool_call> opens a constrained call (lazily, as llama.cpp's lazy grammars); in
         * Llama's: a reply that opens with '{' is constrained calls */
        int lazy = g->req.tool_choice == SD_TOOLS_AUTO &&
                   (g->reply.fmt == SD_TOOL_FMT_HERMES || g->reply.fmt == SD_TOOL_FMT_LLAMA);
        if (g->req.tool_choice == SD_TOOLS_REQUIRED || g->req.tool_choice == SD_TOOLS_NAMED || lazy)
            p.tool_spec = g->req.tool_spec;
        p.tool_parallel = g->req.parallel_tool_calls;
        if (lazy)
            p.tool_mode = g->reply.fmt == SD_TOOL_FMT_LLAMA ? SD_TCALL_LLAMA : SD_TCALL_HERMES;
        /* a reasoning model thinks before what constrains its answer (engine/jthink.h) */
        if (g->thinks) {
            p.think = g->prompt_thinks ? SD_THINK_OPEN : SD_THINK_MAY;
            p.think_budget = g->req.think_budget;
        }
        sd_diag d = {0};
        pthread_mutex_lock(&g->mu);
        g->refs++; /* the engine's reference, dropped at the final event */
        pthread_mutex_unlock(&g->mu);
        uint64_t id = 0;
        pthread_rwlock_rdlock(&h->engine_lock);
        int rc = h->engine_gone ? sd_diag_set(&d, SD_ECANCEL, "the server is shutting down")
                                : sd_engine_submit(g->slot->m.engine, &p, sd_http__on_event, c, &id, &d);
        pthread_rwlock_unlock(&h->engine_lock);
        pthread_mutex_lock(&g->mu);
        if (rc < 0) {
            g->refs--;
            pthread_mutex_unlock(&g->mu);
            return sd_api_fail(e, sd_http__status_of(rc), rc == SD_EINVAL ? engine_param(d.msg) : NULL,
                               rc == SD_EFULL    ? "queue_full"
                               : rc == SD_EINVAL ? "invalid_value"
                                                 : NULL,
                               "%s", sd_diag_str(&d, rc));
        }
        c->eng_id = id;
        c->submitted = 1;
        pthread_mutex_unlock(&g->mu);
    }
    return 0;
}

static int setup_choices(sd_http *h, sd_http__gen *g, sd_http__conn *c, sd_api_err *e)
{
    int np = g->req.kind == SD_API_CHAT ? 1 : g->req.n_prompts;
    if (!(g->ch = calloc((size_t)np * (size_t)g->req.n, sizeof *g->ch)))
        return sd_api_fail(e, 500, NULL, NULL, "out of memory");
    g->n_ch = np * g->req.n;
    for (int i = 0; i < g->n_ch; i++) {
        gen_choice *ch = &g->ch[i];
        ch->g = g;
        ch->index = i;
        ch->prompt_idx = i / g->req.n;
        if (g->req.echo && echo_text(h, g, ch->prompt_idx, ch) < 0)
            return sd_api_fail(e, 500, NULL, NULL, "out of memory");
    }
    snprintf(g->id, sizeof g->id, "%s%s", g->req.kind == SD_API_CHAT ? "chatcmpl-" : "cmpl-", c->rid);
    g->meta = (sd_api_meta){.kind = g->req.kind,
                            .id = g->id,
                            .created = (int64_t)time(NULL),
                            .model = g->slot->m.name,
                            .logprobs = g->req.logprobs,
                            .tok = sd_model_tokenizer(g->slot->m.model)};
    return 0;
}

/* ---- responses ---- */

static int check_model(const sd_http_model *m, const sd_api_req *r, sd_api_err *e)
{
    if (!r->model || !strcmp(r->model, m->name) || !strcmp(r->model, sd_model_name(m->model)))
        return 0;
    return sd_api_fail(e, 404, "model", "model_not_found", "The model '%s' does not exist", r->model);
}

/* /tokenize: a chat body or a completion body (one "prompt"), parsed and tokenized as a
 * generation request would be, into g->pids[0]; nothing is submitted. */
int sd_http__gen_tokenize(sd_http *h, sd_http__gen *g, sd_http__conn *c, sd_api_kind kind, int special,
                          sd_api_err *e)
{
    if (!g->slot && !(g->slot = sd_http__slot_get(h)))
        return sd_api_fail(e, 503, NULL, "model_loading", "the model is still loading");
    if (sd_api_parse(&g->req, kind, c->body ? c->body : "", c->len, e) < 0 ||
        check_model(&g->slot->m, &g->req, e) < 0)
        return -1;
    if (kind == SD_API_COMPLETION && g->req.n_prompts != 1)
        return sd_api_fail(e, 400, "prompt", "invalid_value", "/tokenize takes one prompt (a string)");
    return tokenize(h, g, special, e);
}

int sd_http__gen_prepare(sd_http *h, sd_http__gen *g, sd_http__conn *c, sd_api_err *e)
{
    sd_api_kind kind = c->route == SD_ROUTE_CHAT ? SD_API_CHAT : SD_API_COMPLETION;
    /* The request runs on the model current now, to its end, even if a swap comes meanwhile. */
    if (!g->slot && !(g->slot = sd_http__slot_get(h)))
        return sd_api_fail(e, 503, NULL, "model_loading", "the model is still loading");
    if (sd_api_parse(&g->req, kind, c->body ? c->body : "", c->len, e) < 0 ||
        check_model(&g->slot->m, &g->req, e) < 0 || tool_format(g, e) < 0 || tokenize(h, g, 1, e) < 0 ||
        setup_choices(h, g, c, e) < 0)
        return -1;
    return submit_all(h, g, e);
}
