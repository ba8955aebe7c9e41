/* api_build: OpenAI response bodies, SSE chunks, logprobs shapes and error objects. */
#include "server/api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t sd_api_utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static int utf8_seq(const unsigned char *s, size_t len)
{
    unsigned c = s[0];
    int n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        n = 2, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        n = 3, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        n = 4, min = 0x10000;
    else
        return 0;
    if ((size_t)n > len)
        return 0;
    unsigned cp = c & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

char *sd_api_utf8_sanitize(const char *s, size_t len, size_t *ret_len)
{
    char *out = malloc(len * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        int n = utf8_seq((const unsigned char *)s + i, len - i);
        if (n) {
            memcpy(out + o, s + i, (size_t)n);
            o += (size_t)n;
            i += (size_t)n;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = 0;
    if (ret_len)
        *ret_len = o;
    return out;
}

/* The token's text as a JSON string (raw bytes, invalid UTF-8 replaced). */
static json_t *tok_string(const sd_tokenizer *t, int32_t id, size_t *ret_chars)
{
    size_t blen = 0, slen = 0;
    const char *b = t ? sd_tok_token_bytes(t, id, &blen) : NULL;
    char *s = sd_api_utf8_sanitize(b ? b : "", b ? blen : 0, &slen);
    if (!s)
        return NULL;
    json_t *j = json_stringn(s, slen);
    if (ret_chars)
        *ret_chars = sd_api_utf8_chars(s, slen);
    free(s);
    return j;
}

static json_t *tok_bytes(const sd_tokenizer *t, int32_t id)
{
    size_t blen = 0;
    const char *b = t ? sd_tok_token_bytes(t, id, &blen) : NULL;
    json_t *a = json_array();
    for (size_t i = 0; b && i < blen; i++)
        json_array_append_new(a, json_integer((unsigned char)b[i]));
    return a;
}

static json_t *lp_value(float lp)
{
    /* -inf (a token the sampler could never pick) is not JSON: clamp like vLLM does. */
    if (isnan(lp))
        return json_null();
    return json_real(isinf(lp) ? -9999.0 : (double)lp);
}

/* Legacy completions shape {tokens, token_logprobs, top_logprobs, text_offset}. */
static json_t *legacy_logprobs(const sd_api_meta *m, const sd_api_choice_out *c)
{
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = c->text_offset0;
    for (int i = 0; i < c->n_toks; i++) {
        const sd_api_tok *t = &c->toks[i];
        size_t chars = 0;
        json_array_append_new(toks, tok_string(m->tok, t->id, &chars));
        json_array_append_new(lps, lp_value(t->lp));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += chars;
        if (isnan(t->lp)) {
            json_array_append_new(tops, json_null());
            continue;
        }
        json_t *top = json_object();
        for (int k = 0; k < t->n_top; k++) {
            json_t *ks = tok_string(m->tok, t->top_ids[k], NULL);
            if (ks && !json_object_get(top, json_string_value(ks)))
                json_object_set_new(top, json_string_value(ks), lp_value(t->top_lps[k]));
            json_decref(ks);
        }
        json_array_append_new(tops, top);
    }
    json_t *o = json_object();
    json_object_set_new(o, "tokens", toks);
    json_object_set_new(o, "token_logprobs", lps);
    json_object_set_new(o, "top_logprobs", tops);
    json_object_set_new(o, "text_offset", offs);
    return o;
}

static json_t *chat_tok(const sd_tokenizer *tk, int32_t id, float lp)
{
    json_t *o = json_object();
    json_object_set_new(o, "token", tok_string(tk, id, NULL));
    json_object_set_new(o, "logprob", lp_value(lp));
    json_object_set_new(o, "bytes", tok_bytes(tk, id));
    return o;
}

/* Chat shape {"content": [{token, logprob, bytes, top_logprobs: [...]}]}. */
static json_t *chat_logprobs(const sd_api_meta *m, const sd_api_choice_out *c)
{
    json_t *content = json_array();
    for (int i = 0; i < c->n_toks; i++) {
        const sd_api_tok *t = &c->toks[i];
        json_t *e = chat_tok(m->tok, t->id, t->lp), *top = json_array();
        for (int k = 0; k < t->n_top; k++)
            json_array_append_new(top, chat_tok(m->tok, t->top_ids[k], t->top_lps[k]));
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(content, e);
    }
    json_t *o = json_object();
    json_object_set_new(o, "content", content);
    return o;
}

static json_t *choice_logprobs(const sd_api_meta *m, const sd_api_choice_out *c)
{
    if (m->logprobs < 0)
        return json_null();
    return m->kind == SD_API_CHAT ? chat_logprobs(m, c) : legacy_logprobs(m, c);
}

static json_t *finish_value(const char *f)
{
    return f ? json_string(f) : json_null();
}

static json_t *head(const sd_api_meta *m, int chunk)
{
    json_t *o = json_object();
    const char *object =
        m->kind == SD_API_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    json_object_set_new(o, "id", json_string(m->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(m->created));
    json_object_set_new(o, "model", json_string(m->model));
    if (m->kind == SD_API_CHAT)
        json_object_set_new(o, "system_fingerprint", json_null());
    return o;
}

static json_t *usage_obj(const sd_api_usage *u)
{
    json_t *o = json_object();
    json_object_set_new(o, "prompt_tokens", json_integer(u->prompt));
    json_object_set_new(o, "completion_tokens", json_integer(u->completion));
    json_object_set_new(o, "total_tokens", json_integer(u->prompt + u->completion));
    json_object_set_new(o, "prompt_tokens_details",
                        json_pack("{s:I}", "cached_tokens", (json_int_t)u->cached));
    return o;
}

static char *dump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

/* "data: <json>\n\n" */
static char *sse(char *json)
{
    if (!json)
        return NULL;
    size_t n = strlen(json);
    char *s = malloc(n + 9);
    if (s) {
        memcpy(s, "data: ", 6);
        memcpy(s + 6, json, n);
        memcpy(s + 6 + n, "\n\n", 3);
    }
    free(json);
    return s;
}

/* "call_" + 24 letters and digits, a hash of the response id, the choice and the call: unique
 * across responses as their ids are, and the same when a stream's chunk is rebuilt. */
static void call_id(const sd_api_meta *m, int choice, int k, char out[32])
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = m->id; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h ^= ((uint64_t)(uint32_t)choice << 32) | (uint32_t)k;
    memcpy(out, "call_", 5);
    for (int i = 0; i < 24; i++) {
        h ^= h >> 31; /* splitmix's finalizer, a round per character */
        h *= 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
        out[5 + i] = digits[h % 62];
    }
    out[29] = 0;
}

/* message.tool_calls / delta.tool_calls ("index" only in deltas, as OpenAI sends them). */
static json_t *tool_calls(const sd_api_meta *m, const sd_api_choice_out *c, int delta)
{
    json_t *a = json_array();
    for (int k = 0; k < c->n_calls; k++) {
        const sd_api_tool_call *tc = &c->calls[k];
        json_t *t = json_object(), *f = json_object();
        if (delta)
            json_object_set_new(t, "index", json_integer(tc->index));
        if (tc->name) { /* a stream's later pieces of a call carry only arguments */
            char id[32];
            call_id(m, c->index, tc->index, id);
            json_object_set_new(t, "id", json_string(id));
            json_object_set_new(t, "type", json_string("function"));
            json_object_set_new(f, "name", json_string(tc->name));
        }
        json_object_set_new(f, "arguments", json_string(tc->arguments));
        json_object_set_new(t, "function", f);
        json_array_append_new(a, t);
    }
    return a;
}

char *sd_api_response(const sd_api_meta *m, const sd_api_choice_out *c, int n, const sd_api_usage *u)
{
    json_t *o = head(m, 0), *choices = json_array();
    for (int i = 0; i < n; i++) {
        json_t *ch = json_object();
        json_object_set_new(ch, "index", json_integer(c[i].index));
        if (m->kind == SD_API_CHAT) {
            json_t *msg = json_object();
            json_object_set_new(msg, "role", json_string("assistant"));
            json_object_set_new(msg, "content",
                                c[i].content_null ? json_null() : json_stringn(c[i].text, c[i].text_len));
            if (c[i].has_reasoning)
                json_object_set_new(msg, "reasoning_content",
                                    json_stringn(c[i].reasoning ? c[i].reasoning : "", c[i].reasoning_len));
            if (c[i].n_calls)
                json_object_set_new(msg, "tool_calls", tool_calls(m, &c[i], 0));
            json_object_set_new(ch, "message", msg);
        } else {
            json_object_set_new(ch, "text", json_stringn(c[i].text, c[i].text_len));
        }
        json_object_set_new(ch, "logprobs", choice_logprobs(m, &c[i]));
        json_object_set_new(ch, "finish_reason", finish_value(c[i].finish));
        json_array_append_new(choices, ch);
    }
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage_obj(u));
    return dump(o);
}

char *sd_api_chunk(const sd_api_meta *m, const sd_api_choice_out *c, int role_only, int with_usage)
{
    json_t *o = head(m, 1), *choices = json_array(), *ch = json_object();
    json_object_set_new(ch, "index", json_integer(c->index));
    if (m->kind == SD_API_CHAT) {
        json_t *delta = json_object();
        if (role_only) {
            json_object_set_new(delta, "role", json_string("assistant"));
            json_object_set_new(delta, "content", json_string(""));
        } else if (c->text_len) {
            json_object_set_new(delta, "content", json_stringn(c->text, c->text_len));
        }
        if (!role_only && c->reasoning_len)
            json_object_set_new(delta, "reasoning_content", json_stringn(c->reasoning, c->reasoning_len));
        if (!role_only && c->n_calls)
            json_object_set_new(delta, "tool_calls", tool_calls(m, c, 1));
        json_object_set_new(ch, "delta", delta);
        json_object_set_new(ch, "logprobs", role_only || !c->n_toks ? json_null() : choice_logprobs(m, c));
    } else {
        json_object_set_new(ch, "text", json_stringn(c->text, c->text_len));
        json_object_set_new(ch, "logprobs", c->n_toks ? choice_logprobs(m, c) : json_null());
    }
    json_object_set_new(ch, "finish_reason", role_only ? json_null() : finish_value(c->finish));
    json_array_append_new(choices, ch);
    json_object_set_new(o, "choices", choices);
    if (with_usage)
        json_object_set_new(o, "usage", json_null());
    return sse(dump(o));
}

char *sd_api_usage_chunk(const sd_api_meta *m, const sd_api_usage *u)
{
    json_t *o = head(m, 1);
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", usage_obj(u));
    return sse(dump(o));
}

static json_t *error_obj(const sd_api_err *e)
{
    json_t *err = json_object(), *o = json_object();
    json_object_set_new(err, "message", json_string(e->message[0] ? e->message : "error"));
    json_object_set_new(err, "type", json_string(e->type ? e->type : "invalid_request_error"));
    json_object_set_new(err, "param", e->param ? json_string(e->param) : json_null());
    json_object_set_new(err, "code", e->code ? json_string(e->code) : json_null());
    json_object_set_new(o, "error", err);
    return o;
}

char *sd_api_error_json(const sd_api_err *e)
{
    return dump(error_obj(e));
}

char *sd_api_error_event(const sd_api_err *e)
{
    return sse(dump(error_obj(e)));
}

char *sd_api_models(const char *model_id, int64_t created, int32_t max_model_len)
{
    json_t *m = json_object(), *o = json_object(), *data = json_array();
    json_object_set_new(m, "id", json_string(model_id));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(created));
    json_object_set_new(m, "owned_by", json_string("sparsed"));
    json_object_set_new(m, "max_model_len", json_integer(max_model_len));
    json_array_append_new(data, m);
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    return dump(o);
}
