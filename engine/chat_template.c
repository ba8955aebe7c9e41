/* chat_template: loading a model's chat template and special tokens from tokenizer_config.json
 * and rendering conversations with them as transformers does. */
#include "chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

static const char *const special_names[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                            "pad_token", "cls_token", "mask_token"};
#define N_SPECIAL (sizeof special_names / sizeof special_names[0])

struct sd_chat_template {
    sd_jinja_tmpl *dflt;     /* the default template */
    sd_jinja_tmpl *tool_use; /* used when tools are given, or NULL */
    json_t *vars;            /* special tokens: {"bos_token": "...", ...} */
    sd_chat_tools tools;     /* of the tool_use template if any, else of the default */
    int thinks;              /* either template speaks of </think> */
};

/* Other markups' own words for a call, which rule out Llama's bare JSON even where the template
 * also writes "parameters" (a tool's schema spelt out): Mistral's, Granite's and Phi-4's tags,
 * DeepSeek's (its "▁" is U+2581). */
static const char *const other_markups[] = {"[TOOL_CALLS]", "<|tool_call|>",
                                            "tool\xe2\x96\x81"
                                            "call"};

/* The markup a template source teaches for calls: its own words for it, not its structure. */
static sd_chat_tools tools_of(const char *src)
{
    if (!strstr(src, "tools"))
        return SD_CHAT_TOOLS_IGNORED;
    if (strstr(src, "<tool_call>"))
        return SD_CHAT_TOOLS_HERMES;
    for (size_t i = 0; i < sizeof other_markups / sizeof *other_markups; i++)
        if (strstr(src, other_markups[i]))
            return SD_CHAT_TOOLS_OTHER;
    /* Llama 3.1 / 3.3 name the python tag; 3.2 only teaches {"name": ..., "parameters": ...} */
    if (strstr(src, "<|python_tag|>") || strstr(src, "\"parameters\""))
        return SD_CHAT_TOOLS_LLAMA;
    return SD_CHAT_TOOLS_OTHER;
}

static int parse_source(sd_chat_template *t, sd_jinja_tmpl **ret, const char *src, const char *what,
                        sd_diag *d)
{
    int rc = sd_jinja_parse(ret, src, strlen(src), NULL, d);
    if (rc < 0)
        sd_diag_wrap(d, rc, "chat template %s", what);
    else if (ret == &t->tool_use || !t->tool_use)
        t->tools = tools_of(src);
    if (rc == 0 && strstr(src, "</think>"))
        t->thinks = 1;
    return rc;
}

sd_chat_tools sd_chat_template_tools(const sd_chat_template *t)
{
    return t ? t->tools : SD_CHAT_TOOLS_IGNORED;
}

int sd_chat_template_thinks(const sd_chat_template *t)
{
    return t ? t->thinks : 0;
}

int sd_chat_template_init(sd_chat_template **ret, const char *source, sd_diag *d)
{
    if (!ret || !source)
        return sd_diag_set(d, SD_EINVAL, "chat template: no source");
    sd_chat_template *t = calloc(1, sizeof *t);
    if (!t || !(t->vars = json_object())) {
        free(t);
        return sd_diag_set(d, SD_ENOMEM, "chat template: out of memory");
    }
    int rc = parse_source(t, &t->dflt, source, "(default)", d);
    if (rc < 0) {
        sd_chat_template_free(t);
        return rc;
    }
    *ret = t;
    return 0;
}

void sd_chat_template_free(sd_chat_template *t)
{
    if (!t)
        return;
    sd_jinja_free(t->dflt);
    sd_jinja_free(t->tool_use);
    json_decref(t->vars);
    free(t);
}

/* Reads a whole file into a malloc'd NUL-terminated string, or NULL. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* The chat_template.jinja beside a tokenizer_config.json (transformers >= 4.43 layout). */
static char *read_sibling_template(const char *config_path)
{
    const char *slash = strrchr(config_path, '/');
    size_t dir = slash ? (size_t)(slash - config_path + 1) : 0;
    char *p = malloc(dir + sizeof "chat_template.jinja");
    if (!p)
        return NULL;
    memcpy(p, config_path, dir);
    strcpy(p + dir, "chat_template.jinja");
    char *src = read_file(p);
    free(p);
    return src;
}

static int load_templates(sd_chat_template *t, const json_t *ct, const char *path, sd_diag *d)
{
    if (json_is_string(ct))
        return parse_source(t, &t->dflt, json_string_value(ct), path, d);
    if (json_is_array(ct)) {
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e)
        {
            const char *name = json_string_value(json_object_get(e, "name"));
            const char *src = json_string_value(json_object_get(e, "template"));
            if (!name || !src)
                return sd_diag_set(d, SD_EFORMAT, "%s: chat_template[%zu] needs \"name\" and \"template\"",
                                   path, i);
            sd_jinja_tmpl **slot = !strcmp(name, "default")    ? &t->dflt
                                   : !strcmp(name, "tool_use") ? &t->tool_use
                                                               : NULL;
            if (!slot || *slot)
                continue;
            int rc = parse_source(t, slot, src, name, d);
            if (rc < 0)
                return rc;
        }
        if (!t->dflt)
            return sd_diag_set(d, SD_ENOTFOUND, "%s: chat_template list has no \"default\" entry", path);
        return 0;
    }
    char *src = read_sibling_template(path);
    if (!src)
        return sd_diag_set(d, SD_ENOTFOUND, "%s: no chat_template (nor chat_template.jinja beside it)", path);
    int rc = parse_source(t, &t->dflt, src, "chat_template.jinja", d);
    free(src);
    return rc;
}

int sd_chat_template_load(sd_chat_template **ret, const char *path, sd_diag *d)
{
    if (!ret || !path)
        return sd_diag_set(d, SD_EINVAL, "chat template: no path");
    json_error_t jerr;
    /* ints as reals: configs hold values like model_max_length = 1e30 */
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, &jerr);
    if (!cfg)
        return sd_diag_set(d, SD_EFORMAT, "%s: line %d: %s", path, jerr.line, jerr.text);
    int rc = 0;
    sd_chat_template *t = calloc(1, sizeof *t);
    if (!t || !(t->vars = json_object())) {
        rc = sd_diag_set(d, SD_ENOMEM, "chat template: out of memory");
        goto cleanup;
    }
    if (!json_is_object(cfg)) {
        rc = sd_diag_set(d, SD_EFORMAT, "%s: not a JSON object", path);
        goto cleanup;
    }
    rc = load_templates(t, json_object_get(cfg, "chat_template"), path, d);
    if (rc < 0)
        goto cleanup;
    for (size_t k = 0; k < N_SPECIAL; k++) {
        json_t *v = json_object_get(cfg, special_names[k]);
        if (json_is_object(v))
            v = json_object_get(v, "content"); /* an AddedToken */
        if (json_is_string(v))
            json_object_set_new(t->vars, special_names[k], json_string(json_string_value(v)));
    }
    *ret = t;
    t = NULL;
cleanup:
    sd_chat_template_free(t);
    json_decref(cfg);
    return rc;
}

int sd_chat_template_render(const sd_chat_template *t, const json_t *messages, const json_t *extra,
                            char **ret, size_t *ret_len, sd_diag *d)
{
    if (!t || !ret)
        return sd_diag_set(d, SD_EINVAL, "chat template: nothing to render");
    if (!json_is_array(messages))
        return sd_diag_set(d, SD_EINVAL, "chat template: messages must be a JSON array");
    if (extra && !json_is_object(extra))
        return sd_diag_set(d, SD_EINVAL, "chat template: extra variables must be a JSON object");
    json_t *vars = json_copy(t->vars); /* shallow: the values are shared, not modified */
    if (!vars)
        return sd_diag_set(d, SD_ENOMEM, "chat template: out of memory");
    int rc = 0;
    if (json_object_set(vars, "messages", (json_t *)messages) ||
        json_object_set_new(vars, "tools", json_null()) ||
        json_object_set_new(vars, "documents", json_null()) ||
        json_object_set_new(vars, "add_generation_prompt", json_false()) ||
        (extra && json_object_update(vars, (json_t *)extra))) {
        rc = sd_diag_set(d, SD_ENOMEM, "chat template: out of memory");
        goto cleanup;
    }
    /* extra may not replace the conversation itself */
    json_object_set(vars, "messages", (json_t *)messages);
    const sd_jinja_tmpl *tmpl = t->dflt;
    if (t->tool_use && !json_is_null(json_object_get(vars, "tools")))
        tmpl = t->tool_use;
    rc = sd_jinja_render(tmpl, vars, NULL, ret, ret_len, d);
    if (rc < 0 && d && strncmp(d->msg, "line ", 5) == 0)
        sd_diag_wrap(d, rc, "chat template");
cleanup:
    json_decref(vars);
    return rc;
}

/* content: a string, null (-> ""), or text parts (-> their concatenation) */
static int normalize_content(json_t *msg, size_t idx, sd_diag *d)
{
    json_t *c = json_object_get(msg, "content");
    if (!c || json_is_string(c))
        return 0;
    if (json_is_null(c))
        return json_object_set_new(msg, "content", json_string(""))
                   ? sd_diag_set(d, SD_ENOMEM, "out of memory")
                   : 0;
    if (!json_is_array(c))
        return sd_diag_set(d, SD_EINVAL, "messages[%zu].content must be a string or a list of parts", idx);
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(c, i, part)
    {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (!type || strcmp(type, "text") != 0)
            return sd_diag_set(d, SD_ENOTSUP, "messages[%zu].content[%zu]: part type '%s' is not supported",
                               idx, i, type ? type : "(none)");
        if (!json_is_string(text))
            return sd_diag_set(d, SD_EINVAL, "messages[%zu].content[%zu].text must be a string", idx, i);
        total += json_string_length(text);
    }
    char *buf = malloc(total + 1);
    if (!buf)
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    size_t n = 0;
    json_array_foreach(c, i, part)
    {
        json_t *text = json_object_get(part, "text");
        memcpy(buf + n, json_string_value(text), json_string_length(text));
        n += json_string_length(text);
    }
    json_t *s = json_stringn(buf, n);
    free(buf);
    if (!s || json_object_set_new(msg, "content", s))
        return sd_diag_set(d, SD_EINVAL, "messages[%zu].content is not valid UTF-8", idx);
    return 0;
}

/* tool_calls[].function.arguments: a string holding a JSON object becomes the object. Clients send
 * the string OpenAI returned; templates print arguments with tojson, which would quote it. */
static void normalize_args(json_t *msg)
{
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, call)
    {
        json_t *f = json_object_get(call, "function");
        const char *args = json_string_value(json_object_get(f, "arguments"));
        json_t *o = args ? json_loads(args, 0, NULL) : NULL;
        if (json_is_object(o))
            json_object_set(f, "arguments", o);
        json_decref(o);
    }
}

int sd_chat_messages_normalize(const json_t *messages, json_t **ret, sd_diag *d)
{
    if (!ret || !json_is_array(messages))
        return sd_diag_set(d, SD_EINVAL, "messages must be a JSON array");
    json_t *out = json_deep_copy(messages);
    if (!out)
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    size_t i;
    json_t *msg;
    json_array_foreach(out, i, msg)
    {
        int rc = 0;
        if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "role")))
            rc = sd_diag_set(d, SD_EINVAL, "messages[%zu] must be an object with a string \"role\"", i);
        else
            rc = normalize_content(msg, i, d);
        if (rc == 0)
            normalize_args(msg);
        if (rc < 0) {
            json_decref(out);
            return rc;
        }
    }
    *ret = out;
    return 0;
}
