/* http_tok: POST /tokenize and /detokenize, in vLLM's shapes — for clients that count tokens
 * against the context or the bill before they send a request.
 *
 *   /tokenize   {"prompt": "..."} (BOS etc. added as /v1/completions adds them; "add_special_tokens":
 *               false leaves them out) or a chat body {"messages": [...], "tools"?, ...} (rendered
 *               through the chat template as /v1/chat/completions renders it)
 *               -> {"count", "max_model_len", "tokens": [...], "token_strs"?: [...] with
 *               "return_token_strs": true}
 *   /detokenize {"tokens": [...]} -> {"prompt": "..."} (special tokens kept, as vLLM's) */
#include "server/http_impl.h"

#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer.h"

static enum MHD_Result fail(struct MHD_Connection *conn, sd_http__conn *c, sd_api_err *e)
{
    return sd_http__send_error(conn, c, e);
}

static char *dump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

/* One token's text (sanitized UTF-8: a token may hold part of a character). */
static json_t *token_str(const sd_tokenizer *t, int32_t id)
{
    size_t n = 0, clean_n = 0;
    const char *b = sd_tok_token_bytes(t, id, &n);
    char *clean = sd_api_utf8_sanitize(b ? b : "", b ? n : 0, &clean_n);
    json_t *s = clean ? json_stringn(clean, clean_n) : NULL;
    free(clean);
    return s;
}

static enum MHD_Result tokenize(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c, json_t *body)
{
    sd_api_err e;
    int strs = json_is_true(json_object_get(body, "return_token_strs"));
    json_t *ast = json_object_get(body, "add_special_tokens");
    if (ast && !json_is_boolean(ast) && !json_is_null(ast))
        return sd_api_fail(&e, 400, "add_special_tokens", "invalid_type",
                           "'add_special_tokens' must be a boolean"),
               fail(conn, c, &e);
    sd_http__gen *g = sd_http__gen_new(h, conn, c);
    if (!g)
        return sd_api_fail(&e, 500, NULL, NULL, "out of memory"), fail(conn, c, &e);
    c->gen = g; /* released by on_completed, as a generation's (nothing was submitted) */
    enum MHD_Result ret;
    /* a chat body has "messages"; "add_special_tokens": false: a text prompt without BOS and the like */
    sd_api_kind kind = json_object_get(body, "messages") ? SD_API_CHAT : SD_API_COMPLETION;
    if (sd_http__gen_tokenize(h, g, c, kind, !json_is_false(ast), &e) < 0) {
        ret = fail(conn, c, &e);
    } else {
        const sd_tokenizer *tok = sd_model_tokenizer(g->slot->m.model);
        const int32_t *ids = g->pids[0];
        const int32_t n = g->plen[0];
        json_t *a = json_array(), *ts = strs ? json_array() : NULL;
        for (int32_t i = 0; i < n; i++) {
            json_array_append_new(a, json_integer(ids[i]));
            if (ts)
                json_array_append_new(ts, tok ? token_str(tok, ids[i]) : json_null());
        }
        json_t *o = json_pack("{s:i,s:i,s:o}", "count", (int)n, "max_model_len",
                              (int)g->slot->m.max_model_len, "tokens", a);
        if (o && ts)
            json_object_set_new(o, "token_strs", ts);
        char *s = dump(o);
        ret = sd_http__send(conn, c, 200, "application/json", s, s ? strlen(s) : 0);
    }
    return ret;
}

static enum MHD_Result detokenize(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c, json_t *body)
{
    sd_api_err e;
    json_t *toks = json_object_get(body, "tokens");
    if (!json_is_array(toks))
        return sd_api_fail(&e, 400, "tokens", "invalid_type", "'tokens' must be a list of token ids"),
               fail(conn, c, &e);
    sd_http__slot *slot = sd_http__slot_get(h);
    if (!slot)
        return sd_api_fail(&e, 503, NULL, "model_loading", "the model is still loading"), fail(conn, c, &e);
    const sd_tokenizer *tok = sd_model_tokenizer(slot->m.model);
    size_t n = json_array_size(toks);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    char *text = NULL;
    size_t tlen = 0;
    sd_diag d = {0};
    if (!tok)
        sd_api_fail(&e, 400, "tokens", "no_tokenizer", "the model has no tokenizer");
    else if (!ids)
        sd_api_fail(&e, 500, NULL, NULL, "out of memory");
    for (size_t i = 0; tok && ids && i < n; i++) {
        json_t *v = json_array_get(toks, i);
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= sd_tok_vocab_size(tok)) {
            sd_api_fail(&e, 400, "tokens", "invalid_value",
                        "tokens[%zu] is not a token id of this model (0..%d)", i,
                        (int)sd_tok_vocab_size(tok) - 1);
            free(ids);
            ids = NULL;
            tok = NULL;
            break;
        }
        ids[i] = (int32_t)id;
    }
    enum MHD_Result ret;
    if (tok && ids && sd_tok_decode(tok, ids, n, 0, &text, &tlen, &d) == 0) {
        size_t clean_n = 0;
        char *clean = sd_api_utf8_sanitize(text, tlen, &clean_n);
        char *s = clean ? dump(json_pack("{s:s%}", "prompt", clean, clean_n)) : NULL;
        free(clean);
        ret = sd_http__send(conn, c, 200, "application/json", s, s ? strlen(s) : 0);
    } else {
        if (tok && ids)
            sd_api_fail(&e, 500, NULL, NULL, "tokenizer: %s", sd_diag_str(&d, SD_EIO));
        ret = fail(conn, c, &e);
    }
    free(text);
    free(ids);
    sd_http__slot_put(slot);
    return ret;
}

enum MHD_Result sd_http__tok_handle(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c)
{
    sd_api_err e;
    json_error_t je;
    json_t *body = json_loadb(c->body ? c->body : "", c->len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(body)) {
        if (body)
            sd_api_fail(&e, 400, NULL, "invalid_json", "the request body must be a JSON object");
        else
            sd_api_fail(&e, 400, NULL, "invalid_json", "invalid JSON body: %s (line %d, column %d)", je.text,
                        je.line, je.column);
        json_decref(body);
        return fail(conn, c, &e);
    }
    enum MHD_Result ret =
        c->route == SD_ROUTE_TOKENIZE ? tokenize(h, conn, c, body) : detokenize(h, conn, c, body);
    json_decref(body);
    return ret;
}
