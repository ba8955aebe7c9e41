/* api_parse: parsing and validation of OpenAI completions / chat completions bodies. */
#include "server/api.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/chat_template.h"

int sd_api_fail(sd_api_err *e, int status, const char *param, const char *code, const char *fmt, ...)
{
    e->status = status;
    e->param = param;
    e->code = code;
    switch (status) {
    case 401:
        e->type = "authentication_error";
        break;
    case 404:
        e->type = "not_found_error";
        break;
    case 429:
        e->type = "rate_limit_error";
        break;
    case 500:
        e->type = "internal_server_error";
        break;
    case 503:
        e->type = "service_unavailable_error";
        break;
    default:
        e->type = "invalid_request_error";
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

/* A field's value, NULL when absent or JSON null (OpenAI treats null as "not given"). */
static json_t *field(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

static int get_bool(json_t *o, const char *k, int *out, sd_api_err *e)
{
    json_t *v = field(o, k);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return sd_api_fail(e, 400, k, "invalid_type", "'%s' must be a boolean", k);
    *out = json_is_true(v);
    return 0;
}

static int get_num(json_t *o, const char *k, double lo, double hi, int lo_open, float *out, sd_api_err *e)
{
    json_t *v = field(o, k);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return sd_api_fail(e, 400, k, "invalid_type", "'%s' must be a number", k);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
        return sd_api_fail(e, 400, k, "invalid_value", "'%s' must be in %s%g, %g]; got %g", k,
                           lo_open ? "(" : "[", lo, hi, x);
    *out = (float)x;
    return 0;
}

static int get_int(json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *out, sd_api_err *e)
{
    json_t *v = field(o, k);
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return sd_api_fail(e, 400, k, "invalid_type", "'%s' must be an integer", k);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return sd_api_fail(e, 400, k, "invalid_value", "'%s' must be in [%lld, %lld]; got %lld", k,
                           (long long)lo, (long long)hi, (long long)x);
    *out = x;
    return 0;
}

static int parse_stop(sd_api_req *r, json_t *o, sd_api_err *e)
{
    json_t *v = field(o, "stop");
    if (!v)
        return 0;
    if (json_is_string(v)) {
        if (!*json_string_value(v))
            return 0;
        r->stop[r->n_stop++] = strdup(json_string_value(v));
        return r->stop[0] ? 0 : sd_api_fail(e, 500, NULL, NULL, "out of memory");
    }
    if (!json_is_array(v))
        return sd_api_fail(e, 400, "stop", "invalid_type", "'stop' must be a string or a list of strings");
    if (json_array_size(v) > SD_MAX_STOP)
        return sd_api_fail(e, 400, "stop", "invalid_value", "'stop' may hold at most %d strings",
                           SD_MAX_STOP);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s)
    {
        if (!json_is_string(s))
            return sd_api_fail(e, 400, "stop", "invalid_type",
                               "'stop' must be a string or a list of strings");
        if (!*json_string_value(s))
            continue;
        if (!(r->stop[r->n_stop] = strdup(json_string_value(s))))
            return sd_api_fail(e, 500, NULL, NULL, "out of memory");
        r->n_stop++;
    }
    return 0;
}

/* logit_bias: {"token id": bias in [-100, 100], ...} as OpenAI defines it. Whether an id is in
 * the vocabulary is the engine's check (it knows the model). */
static int parse_logit_bias(sd_api_req *r, json_t *o, sd_api_err *e)
{
    json_t *v = field(o, "logit_bias");
    if (!v)
        return 0;
    if (!json_is_object(v))
        return sd_api_fail(e, 400, "logit_bias", "invalid_type",
                           "'logit_bias' must be an object mapping token ids to numbers");
    size_t n = json_object_size(v);
    if (n > SD_MAX_LOGIT_BIAS)
        return sd_api_fail(e, 400, "logit_bias", "invalid_value", "'logit_bias' may hold at most %d tokens",
                           SD_MAX_LOGIT_BIAS);
    if (n == 0)
        return 0;
    if (!(r->bias = malloc(n * sizeof *r->bias)))
        return sd_api_fail(e, 500, NULL, NULL, "out of memory");
    const char *k;
    json_t *b;
    int32_t m = 0;
    json_object_foreach(v, k, b)
    {
        char *end;
        errno = 0;
        long long id = strtoll(k, &end, 10);
        if (end == k || *end || errno || id < 0 || id > INT32_MAX || k[0] == '+' || k[0] == ' ')
            return sd_api_fail(e, 400, "logit_bias", "invalid_value",
                               "'logit_bias' keys must be token ids (non-negative integers); got '%.40s'", k);
        if (!json_is_number(b) || !isfinite(json_number_value(b)) || fabs(json_number_value(b)) > 100)
            return sd_api_fail(e, 400, "logit_bias", "invalid_value",
                               "'logit_bias' values must be numbers in [-100, 100] (token %lld)", id);
        for (int32_t j = 0; j < m; j++)
            if (r->bias[j].token == (int32_t)id)
                return sd_api_fail(e, 400, "logit_bias", "invalid_value",
                                   "'logit_bias' names token %lld twice", id);
        r->bias[m++] = (sd_logit_bias){(int32_t)id, (float)json_number_value(b)};
    }
    r->sampling.bias = r->bias;
    r->sampling.n_bias = m;
    return 0;
}

/* response_format json_schema: {"json_schema": {"name": ..., "schema": {...}, "strict": ...}}.
 * The schema travels as compact JSON text; the engine compiles it at submit and refuses what it
 * cannot enforce (400 naming the keyword). "strict" is accepted either way: what the schema
 * says is always enforced. */
static int parse_json_schema(sd_api_req *r, json_t *v, sd_api_err *e)
{
    json_t *js = json_object_get(v, "json_schema");
    json_t *schema = json_is_object(js) ? json_object_get(js, "schema") : NULL;
    if (!json_is_object(schema))
        return sd_api_fail(e, 400, "response_format", "invalid_value",
                           "'response_format' of type 'json_schema' needs 'json_schema': {'schema': {...}}");
    if (!(r->json_schema = json_dumps(schema, JSON_COMPACT)))
        return sd_api_fail(e, 500, NULL, NULL, "out of memory");
    return 0;
}

/* response_format: "text", "json_object" (the output constrained to one JSON object:
 * engine/jsonc.h) or "json_schema" (to a document the schema accepts: engine/jschema.h). */
static int parse_format(sd_api_req *r, json_t *o, sd_api_err *e)
{
    json_t *v = field(o, "response_format");
    if (!v)
        return 0;
    json_t *t = json_is_object(v) ? json_object_get(v, "type") : NULL;
    if (!json_is_string(t))
        return sd_api_fail(e, 400, "response_format", "invalid_type",
                           "'response_format' must be an object with a string 'type'");
    const char *type = json_string_value(t);
    r->json_object = !strcmp(type, "json_object");
    if (!strcmp(type, "json_schema") && parse_json_schema(r, v, e))
        return -1;
    if (!r->json_object && !r->json_schema && strcmp(type, "text"))
        return sd_api_fail(e, 400, "response_format", "unsupported_value",
                           "'response_format' type '%.40s' is not supported: 'text', 'json_object' and "
                           "'json_schema' are",
                           type);
    return 0;
}

/* Chat tools on the completions endpoint are refused rather than ignored, so that a client
 * asking for a tool call does not receive free text it takes for one. */
static int refuse_tools(json_t *o, sd_api_err *e)
{
    static const char *const keys[] = {"tools", "functions"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = field(o, keys[i]);
        if (v && (!json_is_array(v) || json_array_size(v) > 0))
            return sd_api_fail(e, 400, keys[i], "unsupported_value",
                               "'%s' belongs to /v1/chat/completions, not /v1/completions", keys[i]);
    }
    return 0;
}

/* Fields shared by both endpoints. */
static int parse_common(sd_api_req *r, json_t *o, sd_api_err *e)
{
    json_t *v = field(o, "model");
    if (v && !json_is_string(v))
        return sd_api_fail(e, 400, "model", "invalid_type", "'model' must be a string");
    if (v && !(r->model = strdup(json_string_value(v))))
        return sd_api_fail(e, 500, NULL, NULL, "out of memory");
    int64_t x;
    sd_sampling *s = &r->sampling;
    if (get_num(o, "temperature", 0, 2, 0, &s->temperature, e) ||
        get_num(o, "top_p", 0, 1, 1, &s->top_p, e) || get_num(o, "min_p", 0, 1, 0, &s->min_p, e) ||
        get_num(o, "presence_penalty", -2, 2, 0, &s->presence_penalty, e) ||
        get_num(o, "frequency_penalty", -2, 2, 0, &s->frequency_penalty, e) ||
        get_num(o, "repetition_penalty", 0, 100, 1, &s->repetition_penalty, e))
        return -1;
    x = s->top_k;
    if (get_int(o, "top_k", -1, INT32_MAX, &x, e))
        return -1;
    s->top_k = (int32_t)x;
    x = 1;
    if (get_int(o, "n", 1, SD_API_MAX_N, &x, e))
        return -1;
    r->n = (int)x;
    if (field(o, "seed")) {
        x = 0;
        if (get_int(o, "seed", INT64_MIN, INT64_MAX, &x, e))
            return -1;
        s->seed = (uint64_t)x;
        r->has_seed = 1;
    }
    if (get_bool(o, "stream", &r->stream, e) || get_bool(o, "ignore_eos", &r->ignore_eos, e))
        return -1;
    json_t *so = field(o, "stream_options");
    if (so && !json_is_object(so))
        return sd_api_fail(e, 400, "stream_options", "invalid_type", "'stream_options' must be an object");
    if (so && get_bool(so, "include_usage", &r->include_usage, e))
        return -1;
    v = field(o, "user");
    if (v && !json_is_string(v))
        return sd_api_fail(e, 400, "user", "invalid_type", "'user' must be a string");
    return parse_stop(r, o, e) || parse_logit_bias(r, o, e) || parse_format(r, o, e) ? -1 : 0;
}

static int parse_ids(json_t *a, sd_api_prompt *p, sd_api_err *e)
{
    size_t n = json_array_size(a), i;
    if (!n)
        return sd_api_fail(e, 400, "prompt", "invalid_value", "'prompt' must not be empty");
    if (!(p->ids = malloc(n * sizeof *p->ids)))
        return sd_api_fail(e, 500, NULL, NULL, "out of memory");
    json_t *t;
    json_array_foreach(a, i, t)
    {
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return sd_api_fail(e, 400, "prompt", "invalid_value",
                               "'prompt' token ids must be non-negative integers (item %zu)", i);
        p->ids[i] = (int32_t)json_integer_value(t);
    }
    p->n_ids = n;
    return 0;
}

static int parse_prompt_item(json_t *v, sd_api_prompt *p, sd_api_err *e)
{
    if (json_is_string(v)) {
        p->text = strdup(json_string_value(v));
        return p->text ? 0 : sd_api_fail(e, 500, NULL, NULL, "out of memory");
    }
    if (json_is_array(v))
        return parse_ids(v, p, e);
    return sd_api_fail(
        e, 400, "prompt", "invalid_type",
        "'prompt' must be a string, a list of strings, a list of token ids or a list of those");
}

static int parse_prompts(sd_api_req *r, json_t *o, sd_api_err *e)
{
    json_t *v = field(o, "prompt");
    if (!v)
        return sd_api_fail(e, 400, "prompt", "missing_required_parameter", "'prompt' is required");
    /* A flat list of integers is one token-id prompt; any other list is a batch. */
    int batch = json_is_array(v) && json_array_size(v) > 0 && !json_is_integer(json_array_get(v, 0));
    size_t n = batch ? json_array_size(v) : 1;
    if (n > SD_API_MAX_PROMPTS)
        return sd_api_fail(e, 400, "prompt", "invalid_value", "at most %d prompts per request",
                           SD_API_MAX_PROMPTS);
    if (!(r->prompts = calloc(n, sizeof *r->prompts)))
        return sd_api_fail(e, 500, NULL, NULL, "out of memory");
    r->n_prompts = (int)n;
    if (!batch)
        return parse_prompt_item(v, &r->prompts[0], e);
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(v, i);
        if (json_is_integer(it))
            return sd_api_fail(e, 400, "prompt", "invalid_type", "'prompt' mixes token ids and other items");
        if (parse_prompt_item(it, &r->prompts[i], e))
            return -1;
    }
    return 0;
}

static int parse_completion(sd_api_req *r, json_t *o, sd_api_err *e)
{
    int64_t x = 16;
    if (get_int(o, "max_tokens", 0, INT32_MAX, &x, e))
        return -1;
    r->max_tokens = (int32_t)x;
    x = -1;
    if (get_int(o, "logprobs", 0, SD_MAX_TOP_LOGPROBS, &x, e))
        return -1;
    r->logprobs = (int)x;
    if (get_bool(o, "echo", &r->echo, e) || refuse_tools(o, e))
        return -1;
    return parse_prompts(r, o, e);
}

static int parse_messages(sd_api_req *r, json_t *o, sd_api_err *e)
{
    json_t *v = field(o, "messages");
    if (!v)
        return sd_api_fail(e, 400, "messages", "missing_required_parameter", "'messages' is required");
    if (!json_is_array(v) || !json_array_size(v))
        return sd_api_fail(e, 400, "messages", "invalid_type", "'messages' must be a non-empty list");
    static const char *const roles[] = {"system", "user", "assistant", "developer", "tool"};
    r->messages = json_deep_copy(v);
    if (!r->messages)
        return sd_api_fail(e, 500, NULL, NULL, "out of memory");
    size_t i;
    json_t *m;
    json_array_foreach(r->messages, i, m)
    {
        json_t *role = json_object_get(m, "role");
        if (!json_is_object(m) || !json_is_string(role))
            return sd_api_fail(e, 400, "messages", "invalid_value",
                               "messages[%zu] must be an object with a 'role'", i);
        int ok = 0;
        for (size_t k = 0; k < sizeof roles / sizeof *roles; k++)
            ok |= !strcmp(json_string_value(role), roles[k]);
        if (!ok)
            return sd_api_fail(e, 400, "messages", "invalid_value",
                               "messages[%zu].role '%s' is not supported", i, json_string_value(role));
    }
    /* contents as strings, tool-call arguments as objects: as the template will get them */
    json_t *norm = NULL;
    sd_diag d = {0};
    int rc = sd_chat_messages_normalize(r->messages, &norm, &d);
    if (rc < 0)
        return sd_api_fail(e, rc == SD_ENOMEM ? 500 : 400, "messages",
                           rc == SD_ENOTSUP ? "unsupported_value" : "invalid_value", "%s",
                           sd_diag_str(&d, rc));
    json_decref(r->messages);
    r->messages = norm;
    return 0;
}

static int parse_chat(sd_api_req *r, json_t *o, sd_api_err *e)
{
    int64_t x = -1;
    if (get_int(o, "max_tokens", 0, INT32_MAX, &x, e) ||
        get_int(o, "max_completion_tokens", 0, INT32_MAX, &x, e))
        return -1;
    r->max_tokens = (int32_t)x;
    int lp = 0;
    if (get_bool(o, "logprobs", &lp, e))
        return -1;
    x = 0;
    if (get_int(o, "top_logprobs", 0, SD_MAX_TOP_LOGPROBS, &x, e))
        return -1;
    if (x > 0 && !lp)
        return sd_api_fail(e, 400, "top_logprobs", "invalid_value",
                           "'top_logprobs' requires 'logprobs': true");
    r->logprobs = lp ? (int)x : -1;
    x = -1;
    if (get_int(o, "thinking_token_budget", 0, INT32_MAX, &x, e))
        return -1;
    r->think_budget = (int32_t)x;
    r->add_generation_prompt = 1;
    if (get_bool(o, "add_generation_prompt", &r->add_generation_prompt, e) || sd_api_parse_tools(r, o, e))
        return -1;
    json_t *kw = field(o, "chat_template_kwargs");
    if (kw && !json_is_object(kw))
        return sd_api_fail(e, 400, "chat_template_kwargs", "invalid_type",
                           "'chat_template_kwargs' must be an object (e.g. {\"enable_thinking\": false})");
    r->template_kwargs = json_incref(kw);
    return parse_messages(r, o, e);
}

int sd_api_parse(sd_api_req *r, sd_api_kind kind, const char *body, size_t len, sd_api_err *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    r->logprobs = -1;
    sd_sampling_default(&r->sampling);
    json_error_t je;
    /* jansson rejects invalid UTF-8 and NUL bytes in strings (without JSON_ALLOW_NUL). */
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return sd_api_fail(e, 400, NULL, "invalid_json", "invalid JSON body: %s (line %d, column %d)",
                           je.text, je.line, je.column);
    int rc;
    if (!json_is_object(o))
        rc = sd_api_fail(e, 400, NULL, "invalid_json", "the request body must be a JSON object");
    else
        rc = parse_common(r, o, e) ? -1
             : kind == SD_API_CHAT ? parse_chat(r, o, e)
                                   : parse_completion(r, o, e);
    json_decref(o);
    if (rc < 0) /* a failed parse owns nothing: free what the fields parsed so far allocated */
        sd_api_req_free(r);
    return rc;
}

void sd_api_req_free(sd_api_req *r)
{
    if (!r)
        return;
    free(r->model);
    for (int i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    json_decref(r->messages);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->bias);
    free(r->json_schema);
    json_decref(r->tools);
    json_decref(r->template_kwargs);
    free(r->tool_spec);
    memset(r, 0, sizeof *r);
}
