/* api_tools: OpenAI chat tools — the request fields ("tools", "tool_choice",
 * "parallel_tool_calls") and the tool calls found in a reply.
 *
 * Two ways a reply carries calls:
 *  - "required" or a named function: the engine constrains the output to calls written as
 *    {"name": ..., "arguments": {...}} (an array of them with parallel calls; engine/toolcall.h),
 *    so nothing of it is content and it always parses unless cut short by max_tokens;
 *  - "auto": the model writes its own markup, which its chat template taught it
 *    (sd_api_tool_fmt); text before the first call is content, streamed as it comes. */
#include "server/api.h"
#include "server/textscan.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOOLS 128
#define MAX_CALLS 64
#define MAX_NAME 64

static const char TAG_OPEN[] = "<tool_call>", TAG_CLOSE[] = "</tool_call>";
static const char PYTHON_TAG[] = "<|python_tag|>";

/* A field's value, NULL when absent or JSON null (OpenAI treats null as "not given"). */
static json_t *given(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

/* OpenAI's rule for function names: 1-64 of [A-Za-z0-9_-]. */
static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MAX_NAME)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

static const char *tool_name(json_t *tool)
{
    return json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
}

/* tools[i]: {"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}} */
static int check_tool(json_t *tools, size_t i, sd_api_err *e)
{
    json_t *t = json_array_get(tools, i), *f = json_object_get(t, "function");
    json_t *type = json_object_get(t, "type");
    if (!json_is_object(t) || !json_is_string(type) || strcmp(json_string_value(type), "function"))
        return sd_api_fail(e, 400, "tools", "invalid_value",
                           "tools[%zu] must be {\"type\": \"function\", \"function\": {...}}", i);
    const char *name = json_string_value(json_object_get(f, "name"));
    if (!json_is_object(f) || !name || !valid_name(name))
        return sd_api_fail(e, 400, "tools", "invalid_value",
                           "tools[%zu].function.name must be 1-64 letters, digits, '_' or '-'", i);
    json_t *desc = given(f, "description"), *params = given(f, "parameters"), *strict = given(f, "strict");
    if ((desc && !json_is_string(desc)) || (params && !json_is_object(params)) ||
        (strict && !json_is_boolean(strict)))
        return sd_api_fail(e, 400, "tools", "invalid_type",
                           "tools[%zu] (%s): 'description' must be a string, 'parameters' an object, "
                           "'strict' a boolean",
                           i, name);
    for (size_t j = 0; j < i; j++)
        if (!strcmp(tool_name(json_array_get(tools, j)), name))
            return sd_api_fail(e, 400, "tools", "invalid_value", "tools[%zu]: function '%s' is given twice",
                               i, name);
    return 0;
}

/* The index of the tool named `name`, or -1. */
static int find_tool(json_t *tools, const char *name)
{
    for (size_t i = 0; name && i < json_array_size(tools); i++)
        if (!strcmp(tool_name(json_array_get(tools, i)), name))
            return (int)i;
    return -1;
}

/* tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name": ...}} */
static int parse_choice(sd_api_req *r, json_t *tc, json_t *tools, int *named, sd_api_err *e)
{
    size_t n = json_array_size(tools);
    const char *s = json_string_value(tc);
    if (!tc || (s && !strcmp(s, "auto"))) {
        r->tool_choice = n ? SD_TOOLS_AUTO : SD_TOOLS_OFF;
        return 0;
    }
    if (s && !strcmp(s, "none")) {
        r->tool_choice = SD_TOOLS_OFF;
        return 0;
    }
    if (s && strcmp(s, "required"))
        return sd_api_fail(e, 400, "tool_choice", "invalid_value",
                           "'tool_choice' must be 'none', 'auto', 'required' or "
                           "{\"type\": \"function\", \"function\": {\"name\": ...}}; got '%.40s'",
                           s);
    const char *name = s ? NULL : json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
    if (!s && (!json_is_object(tc) || !name))
        return sd_api_fail(e, 400, "tool_choice", "invalid_type",
                           "'tool_choice' as an object must be {\"type\": \"function\", \"function\": "
                           "{\"name\": ...}}");
    if (!n)
        return sd_api_fail(e, 400, "tool_choice", "invalid_value",
                           "'tool_choice' '%s' needs a non-empty 'tools' list", s ? s : name);
    if (!s && (*named = find_tool(tools, name)) < 0)
        return sd_api_fail(e, 400, "tool_choice", "invalid_value",
                           "'tool_choice' names function '%.64s', which is not in 'tools'", name);
    r->tool_choice = s ? SD_TOOLS_REQUIRED : SD_TOOLS_NAMED;
    return 0;
}

/* The engine's constraint: [{"name", "parameters"}] of every tool, or of the named one. */
static int build_spec(sd_api_req *r, json_t *tools, int named, sd_api_err *e)
{
    json_t *spec = json_array();
    for (size_t i = 0; spec && i < json_array_size(tools); i++) {
        if (named >= 0 && (size_t)named != i)
            continue;
        json_t *f = json_object_get(json_array_get(tools, i), "function");
        json_t *params = given(f, "parameters");
        if (json_is_object(params) && !json_object_size(params))
            params = NULL; /* {}: a function without arguments, as OpenAI reads it */
        json_t *one = json_pack("{s:s,s:b}", "name", tool_name(json_array_get(tools, i)), "strict",
                                json_is_true(given(f, "strict")));
        if (!one || (params && json_object_set(one, "parameters", params)) ||
            json_array_append_new(spec, one)) {
            json_decref(spec);
            spec = NULL;
        }
    }
    r->tool_spec = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
    json_decref(spec);
    return r->tool_spec ? 0 : sd_api_fail(e, 500, NULL, NULL, "out of memory");
}

int sd_api_parse_tools(sd_api_req *r, json_t *o, sd_api_err *e)
{
    r->parallel_tool_calls = 1;
    static const char *const legacy[] = {"functions", "function_call"};
    for (size_t i = 0; i < 2; i++)
        if (given(o, legacy[i]))
            return sd_api_fail(e, 400, legacy[i], "unsupported_value",
                               "'%s' (deprecated by OpenAI) is not supported: send 'tools' and 'tool_choice'",
                               legacy[i]);
    json_t *ptc = given(o, "parallel_tool_calls");
    if (ptc && !json_is_boolean(ptc))
        return sd_api_fail(e, 400, "parallel_tool_calls", "invalid_type",
                           "'parallel_tool_calls' must be a boolean");
    r->parallel_tool_calls = !ptc || json_is_true(ptc);
    json_t *tools = given(o, "tools");
    if (tools && (!json_is_array(tools) || json_array_size(tools) > MAX_TOOLS))
        return sd_api_fail(e, 400, "tools", "invalid_type", "'tools' must be a list of at most %d functions",
                           MAX_TOOLS);
    for (size_t i = 0; i < json_array_size(tools); i++)
        if (check_tool(tools, i, e))
            return -1;
    int named = -1;
    if (parse_choice(r, given(o, "tool_choice"), tools, &named, e))
        return -1;
    if (r->tool_choice == SD_TOOLS_OFF)
        return 0;
    if (r->json_object || r->json_schema)
        return sd_api_fail(e, 400, "response_format", "invalid_value",
                           "'response_format' json_object / json_schema cannot be combined with tools; send "
                           "'tool_choice': 'none' or no 'response_format'");
    r->tools = json_incref(tools);
    return build_spec(r, tools, named, e); /* "auto" too: its calls are constrained once begun */
}

/* ---- replies ---- */

/* Llama: a reply that opens with '{' or the python tag (or may yet: a prefix of it) is held. */
static int llama_may_call(const char *s, size_t i, size_t len)
{
    size_t m = strlen(PYTHON_TAG), k = len - i < m ? len - i : m;
    return i == len || s[i] == '{' || !memcmp(s + i, PYTHON_TAG, k);
}

size_t sd_api_tools_safe(const sd_api_req *r, sd_api_tool_fmt fmt, const char *text, size_t len, size_t from)
{
    if (r->tool_choice == SD_TOOLS_OFF)
        return len;
    if (r->tool_choice != SD_TOOLS_AUTO)
        return 0;
    if (fmt == SD_TOOL_FMT_HERMES) {
        from = from < len ? from : len;
        const char *p = sd_scan_find(text + from, len - from, TAG_OPEN);
        /* whitespace before a call is not content: hold it until something else follows */
        return sd_scan_trim_end(text,
                                p ? (size_t)(p - text) : len - sd_scan_partial_tail(text, len, TAG_OPEN));
    }
    if (fmt == SD_TOOL_FMT_LLAMA)
        return llama_may_call(text, sd_scan_ws(text, 0, len), len) ? 0 : len;
    return len;
}

void sd_api_tool_calls_free(sd_api_tool_call *calls, int n)
{
    for (int i = 0; calls && i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
    }
    free(calls);
}

/* Consumes the literal `lit` at s[*i, len): 1 when all of it is there. */
static int literal(const char *s, size_t len, size_t *i, const char *lit)
{
    size_t m = strlen(lit);
    if (len - *i < m || memcmp(s + *i, lit, m))
        return 0;
    *i += m;
    return 1;
}

/* The arguments' bytes from s[*i]: their opening brace to the matching close (strings and
 * escapes followed). 1 once they have ended. */
static int args_end(const char *s, size_t len, size_t *i)
{
    int depth = 0, str = 0, esc = 0;
    for (; *i < len; (*i)++) {
        char c = s[*i];
        if (str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                str = 0;
            continue;
        }
        if (c == '"')
            str = 1;
        else if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0) {
            (*i)++;
            return 1;
        }
    }
    return 0;
}

typedef struct calls_buf {
    sd_api_tool_call *v;
    int n;
    int oom;
} calls_buf;

/* The end of the well-formed JSON value at s[i] (jansson has read it): strings and nesting
 * followed. */
static size_t value_end(const char *s, size_t i, size_t len)
{
    if (s[i] == '"') {
        for (i++; i < len && s[i] != '"'; i += s[i] == '\\' ? 2 : 1)
            ;
        return i + 1 < len ? i + 1 : len;
    }
    if (s[i] == '{' || s[i] == '[') {
        args_end(s, len, &i);
        return i;
    }
    while (i < len && !strchr(",}] \t\r\n", s[i]))
        i++;
    return i;
}

/* The bytes [*vb, *ve) of member `key`'s value in the well-formed object at s[from, to). 0: found;
 * -1: not there (or its key written with escapes). */
static int member_span(const char *s, size_t from, size_t to, const char *key, size_t *vb, size_t *ve)
{
    size_t i = sd_scan_ws(s, from, to) + 1, m = strlen(key); /* past '{' */
    for (;;) {
        i = sd_scan_ws(s, i, to);
        if (i >= to || s[i] != '"')
            return -1;
        size_t kb = i + 1, ke = value_end(s, i, to) - 1;
        i = sd_scan_ws(s, ke + 1, to);
        if (i >= to || s[i] != ':')
            return -1;
        *vb = sd_scan_ws(s, i + 1, to);
        *ve = value_end(s, *vb, to);
        if (ke - kb == m && !memcmp(s + kb, key, m))
            return 0;
        i = sd_scan_ws(s, *ve, to);
        if (i >= to || s[i++] != ',')
            return -1;
    }
}

/* A call object o, read from s[from, to): {"name": s, <argkey>: {...}} (arguments as an object,
 * or a string holding one) naming an offered tool, appended to b with the arguments as the model
 * wrote them (jansson would rewrite numbers: 0.1 as 0.10000000000000001). 0: taken; -1: not a
 * call. */
static int take_call(const sd_api_req *r, calls_buf *b, json_t *o, const char *argkey, const char *s,
                     size_t from, size_t to)
{
    const char *name = json_string_value(json_object_get(o, "name"));
    json_t *args = json_object_get(o, argkey), *parsed = NULL;
    if (json_is_string(args))
        args = parsed = json_loads(json_string_value(args), JSON_DECODE_INT_AS_REAL, NULL);
    int ok = json_is_object(o) && json_object_size(o) == 2 && find_tool(r->tools, name) >= 0 &&
             json_is_object(args) && b->n < MAX_CALLS;
    if (ok) {
        size_t vb, ve;
        char *text = parsed || member_span(s, from, to, argkey, &vb, &ve) < 0 ? json_dumps(args, JSON_COMPACT)
                                                                              : strndup(s + vb, ve - vb);
        sd_api_tool_call *v = realloc(b->v, (size_t)(b->n + 1) * sizeof *v);
        char *nm = strdup(name);
        if (v && text && nm) {
            b->v = v;
            v[b->n] = (sd_api_tool_call){b->n, nm, text};
            b->n++;
        } else {
            b->v = v ? v : b->v;
            b->oom = 1;
            free(text);
            free(nm);
        }
    }
    json_decref(parsed);
    return ok ? 0 : -1;
}

/* Parses one JSON value at s[*i, len) (leading whitespace allowed), advancing *i past it, with
 * *at where it begins. Integers past 64 bits read as reals: a call is not lost for an id. */
static json_t *load_at(const char *s, size_t *i, size_t len, size_t *at)
{
    json_error_t je;
    *at = sd_scan_ws(s, *i, len);
    json_t *v = json_loadb(s + *at, len - *at,
                           JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &je);
    if (v)
        *i = *at + (size_t)je.position;
    return v;
}

/* Hermes: <tool_call> {call} </tool_call>, repeated, with only whitespace between and after (the
 * last closing tag may be missing: the model may stop right after the object). */
static int split_hermes(const sd_api_req *r, calls_buf *b, const char *s, size_t len, size_t *content_len)
{
    const char *p = sd_scan_find(s, len, TAG_OPEN);
    if (!p)
        return -1;
    *content_len = sd_scan_trim_end(s, (size_t)(p - s));
    size_t i = (size_t)(p - s), ot = strlen(TAG_OPEN), ct = strlen(TAG_CLOSE);
    while (i < len) {
        if (len - i < ot || memcmp(s + i, TAG_OPEN, ot))
            return -1;
        i += ot;
        size_t at;
        json_t *v = load_at(s, &i, len, &at);
        int rc = v ? take_call(r, b, v, "arguments", s, at, i) : -1;
        json_decref(v);
        if (rc < 0)
            return -1;
        i = sd_scan_ws(s, i, len);
        if (i < len && (len - i < ct || memcmp(s + i, TAG_CLOSE, ct)))
            return -1;
        i = sd_scan_ws(s, i < len ? i + ct : i, len);
    }
    return 0;
}

/* Llama 3.x: the whole reply is {"name": ..., "parameters": {...}} (after the python tag, if
 * the detokenizer kept it), several separated by ';'. */
static int split_llama(const sd_api_req *r, calls_buf *b, const char *s, size_t len)
{
    size_t i = sd_scan_ws(s, 0, len), m = strlen(PYTHON_TAG);
    if (len - i >= m && !memcmp(s + i, PYTHON_TAG, m))
        i += m;
    for (;;) {
        size_t at;
        json_t *v = load_at(s, &i, len, &at);
        const char *key = json_object_get(v, "parameters") ? "parameters" : "arguments";
        int rc = v ? take_call(r, b, v, key, s, at, i) : -1;
        json_decref(v);
        if (rc < 0)
            return -1;
        i = sd_scan_ws(s, i, len);
        if (i == len)
            return 0;
        if (s[i++] != ';')
            return -1;
    }
}

int sd_api_tools_split(const sd_api_req *r, sd_api_tool_fmt fmt, const char *text, size_t len,
                       size_t *content_len, sd_api_tool_call **calls, int *n_calls)
{
    calls_buf b = {0};
    size_t content = 0;
    int rc = -1;
    if (r->tool_choice == SD_TOOLS_AUTO && fmt == SD_TOOL_FMT_HERMES)
        rc = split_hermes(r, &b, text, len, &content);
    else if (r->tool_choice == SD_TOOLS_AUTO && fmt == SD_TOOL_FMT_LLAMA)
        rc = split_llama(r, &b, text, len);
    if (rc < 0 || b.oom) { /* no calls: the reply is all content */
        sd_api_tool_calls_free(b.v, b.n);
        b = (calls_buf){.oom = b.oom};
        content = len;
    }
    while (!r->parallel_tool_calls && b.n > 1) { /* at most one, as OpenAI promises: the first */
        b.n--;
        free(b.v[b.n].name);
        free(b.v[b.n].arguments);
    }
    *content_len = content;
    *calls = b.v;
    *n_calls = b.n;
    return b.oom ? -1 : 0;
}

/* The fixed text around constrained calls (engine/toolcall.h): what opens the list, each call's
 * opening (first, then next, after whitespace where ws; NULL: one call only), what leads into its
 * arguments, what follows each call's closing brace (after), what closes the list (NULL: nothing;
 * the text is whole after any call unless another begins). */
typedef struct call_markup {
    const char *open, *first, *next, *args, *after, *close;
    int ws;
} call_markup;

#define NAME_OPEN "{\"name\": \""
static const call_markup FORCED_ONE = {NULL, NAME_OPEN, NULL, "\", \"arguments\": ", NULL, NULL, 0},
                         FORCED_LIST = {"[", NAME_OPEN, ", " NAME_OPEN, "\", \"arguments\": ", NULL, "]", 0},
                         LLAMA = {NULL, NAME_OPEN, "; " NAME_OPEN, "\", \"parameters\": ", NULL, NULL, 0},
                         HERMES = {NULL,
                                   "<tool_call>\n" NAME_OPEN,
                                   "<tool_call>\n" NAME_OPEN,
                                   "\", \"arguments\": ",
                                   "\n</tool_call>",
                                   NULL,
                                   1};

static int scan_calls(const char *s, size_t len, const call_markup *m, sd_api_call_span *spans, int max,
                      int *closed)
{
    size_t i = 0;
    int n = 0, whole = 0;
    if (closed)
        *closed = 0;
    if (m->open && !literal(s, len, &i, m->open))
        return 0;
    while (n < max && (n == 0 || m->next)) {
        size_t j = n && m->ws ? sd_scan_ws(s, i, len) : i;
        if (!literal(s, len, &j, n == 0 ? m->first : m->next))
            break;
        i = j;
        whole = 0;
        sd_api_call_span *c = &spans[n++];
        memset(c, 0, sizeof *c);
        c->name = i;
        while (i < len && s[i] != '"')
            i++;
        c->name_len = i - c->name;
        c->named = i < len;
        c->args = i;
        if (!c->named || !literal(s, len, &i, m->args))
            break;
        c->args = i;
        c->done = args_end(s, len, &i);
        c->args_len = i - c->args;
        if (!c->done || !literal(s, len, &i, "}") || (m->after && !literal(s, len, &i, m->after)))
            break;
        whole = !m->close;
        if (!m->next || (m->close && literal(s, len, &i, m->close))) {
            whole = 1;
            break;
        }
    }
    if (closed)
        *closed = whole;
    return n;
}

int sd_api_tools_scan(const char *s, size_t len, int parallel, sd_api_call_span *spans, int max, int *closed)
{
    return scan_calls(s, len, parallel ? &FORCED_LIST : &FORCED_ONE, spans, max, closed);
}

int sd_api_tools_scan_llama(const char *s, size_t len, sd_api_call_span *spans, int max, int *closed)
{
    return scan_calls(s, len, &LLAMA, spans, max, closed);
}

int sd_api_tools_scan_hermes(const char *s, size_t len, sd_api_call_span *spans, int max, int *closed)
{
    return scan_calls(s, len, &HERMES, spans, max, closed);
}
