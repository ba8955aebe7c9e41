/* test_api_tools: chat tools (server/api_tools.c) — the request fields and their 400s, the
 * engine's constraint built for "required" / a named function, what of a reply streams as
 * content, the calls split from finished replies in each markup, and the response shapes. */
#include "server/api.h"

#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define WEATHER                                                                                              \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":"    \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}"
#define TIME "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}"
#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static int parse(sd_api_req *r, const char *body, sd_api_err *e)
{
    memset(e, 0, sizeof *e);
    return sd_api_parse(r, SD_API_CHAT, body, strlen(body), e);
}

static void test_choices(void)
{
    sd_api_req r;
    sd_api_err e;
    REQUIRE(parse(&r, "{" MSGS ",\"tools\":[" WEATHER "," TIME "]}", &e) == 0);
    CHECK(r.tool_choice == SD_TOOLS_AUTO && json_array_size(r.tools) == 2 && strstr(r.tool_spec, "get_time"));
    CHECK(r.parallel_tool_calls == 1);
    sd_api_req_free(&r);
    REQUIRE(parse(&r, "{" MSGS ",\"tools\":[" WEATHER "],\"tool_choice\":\"none\"}", &e) == 0);
    CHECK(r.tool_choice == SD_TOOLS_OFF && !r.tools && !r.tool_spec);
    sd_api_req_free(&r);
    REQUIRE(parse(&r, "{" MSGS ",\"tools\":[]}", &e) == 0);
    CHECK(r.tool_choice == SD_TOOLS_OFF && !r.tools);
    sd_api_req_free(&r);
    /* required: every tool in the constraint, parameters as given, none for get_time */
    REQUIRE(parse(&r,
                  "{" MSGS ",\"tools\":[" WEATHER "," TIME "],\"tool_choice\":\"required\","
                  "\"parallel_tool_calls\":false}",
                  &e) == 0);
    CHECK(r.tool_choice == SD_TOOLS_REQUIRED && r.parallel_tool_calls == 0);
    json_t *spec = json_loads(r.tool_spec, 0, NULL);
    CHECK(json_array_size(spec) == 2);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(spec, 0), "name")), "get_weather"));
    CHECK(json_is_object(json_object_get(json_array_get(spec, 0), "parameters")));
    CHECK(json_object_size(json_array_get(spec, 1)) == 2 &&
          !json_object_get(json_array_get(spec, 1), "parameters"));
    CHECK(json_is_false(json_object_get(json_array_get(spec, 0), "strict"))); /* "strict" absent: lenient */
    json_decref(spec);
    sd_api_req_free(&r);
    /* named: only that tool */
    REQUIRE(parse(&r,
                  "{" MSGS ",\"tools\":[" WEATHER "," TIME "],\"tool_choice\":{\"type\":\"function\","
                  "\"function\":{\"name\":\"get_time\"}}}",
                  &e) == 0);
    CHECK(r.tool_choice == SD_TOOLS_NAMED && strstr(r.tool_spec, "get_time") &&
          !strstr(r.tool_spec, "get_weather"));
    sd_api_req_free(&r);
}

static void test_rejections(void)
{
    static const struct {
        const char *body, *param, *msg;
    } cases[] = {
        {"{" MSGS ",\"tools\":{\"a\":1}}", "tools", "list"},
        {"{" MSGS ",\"tools\":[{\"type\":\"retrieval\"}]}", "tools", "tools[0]"},
        {"{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}", "tools", "name"},
        {"{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]}",
         "tools", "'parameters' an object"},
        {"{" MSGS ",\"tools\":[" TIME "," TIME "]}", "tools", "twice"},
        {"{" MSGS ",\"tools\":[" TIME "],\"tool_choice\":\"sometimes\"}", "tool_choice", "sometimes"},
        {"{" MSGS ",\"tool_choice\":\"required\"}", "tool_choice", "non-empty"},
        {"{" MSGS ",\"tools\":[" TIME
         "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"x\"}}}",
         "tool_choice", "not in 'tools'"},
        {"{" MSGS ",\"tools\":[" TIME "],\"tool_choice\":{\"function\":1}}", "tool_choice", "as an object"},
        {"{" MSGS ",\"tools\":[" TIME "],\"parallel_tool_calls\":1}", "parallel_tool_calls", "boolean"},
        {"{" MSGS ",\"functions\":[{\"name\":\"f\"}]}", "functions", "deprecated"},
        {"{" MSGS ",\"tools\":[" TIME "],\"response_format\":{\"type\":\"json_object\"}}", "response_format",
         "combined"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sd_api_req r;
        sd_api_err e;
        CHECK_MSG(parse(&r, cases[i].body, &e) < 0, "case %zu accepted", i);
        CHECK_MSG(e.status == 400 && e.param && !strcmp(e.param, cases[i].param), "case %zu: %d %s", i,
                  e.status, e.param ? e.param : "(null)");
        CHECK_MSG(strstr(e.message, cases[i].msg), "case %zu: %s", i, e.message);
    }
    /* tools on the completions endpoint */
    sd_api_req r;
    sd_api_err e;
    const char *body = "{\"prompt\":\"x\",\"tools\":[" TIME "]}";
    CHECK(sd_api_parse(&r, SD_API_COMPLETION, body, strlen(body), &e) < 0 && !strcmp(e.param, "tools"));
}

/* A request of `choice` over get_weather and get_time, for the reply functions. */
static void req_of(sd_api_req *r, const char *choice)
{
    char body[1024];
    sd_api_err e;
    snprintf(body, sizeof body, "{" MSGS ",\"tools\":[" WEATHER "," TIME "],\"tool_choice\":%s}", choice);
    if (parse(r, body, &e) < 0)
        fprintf(stderr, "  parse: %s\n", e.message);
}

/* Splits text; returns the call count (-1 on error) with the content length in *content. */
static int split(const sd_api_req *r, sd_api_tool_fmt fmt, const char *text, size_t *content,
                 sd_api_tool_call **calls)
{
    int n = -1;
    if (sd_api_tools_split(r, fmt, text, strlen(text), content, calls, &n) < 0)
        return -1;
    return n;
}

static void test_scan_constrained(void)
{
    sd_api_call_span sp[4];
    const char *one =
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P}a\\\"ris\", \"t\": [1, {}]}}";
    REQUIRE(sd_api_tools_scan(one, strlen(one), 0, sp, 4, NULL) == 1);
    CHECK(sp[0].named && sp[0].done && sp[0].name_len == 11 && !strncmp(one + sp[0].name, "get_weather", 11));
    CHECK(sp[0].args_len == strlen(one) - sp[0].args - 1 && one[sp[0].args] == '{');
    const char *two =
        "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"ci";
    REQUIRE(sd_api_tools_scan(two, strlen(two), 1, sp, 4, NULL) == 2);
    CHECK(sp[0].done && sp[0].args_len == 2 && sp[1].named && !sp[1].done);
    CHECK(!strcmp(two + sp[1].args, "{\"ci") && sp[1].args_len == 4);
    /* a name not yet ended; a literal not yet whole; the wrong form for the mode */
    const char *part[] = {"{\"name\": \"get_ti", "{\"name\": \"get_time\", \"argu", "{\"na"};
    CHECK(sd_api_tools_scan(part[0], strlen(part[0]), 0, sp, 4, NULL) == 1 && !sp[0].named &&
          sp[0].name_len == 6);
    CHECK(sd_api_tools_scan(part[1], strlen(part[1]), 0, sp, 4, NULL) == 1 && sp[0].named && !sp[0].args_len);
    CHECK(sd_api_tools_scan(part[2], strlen(part[2]), 0, sp, 4, NULL) == 0);
    CHECK(sd_api_tools_scan(one, strlen(one), 1, sp, 4, NULL) == 0);
    int closed = -1;
    CHECK(sd_api_tools_scan(one, strlen(one), 0, sp, 4, &closed) == 1 && closed == 1);
    CHECK(sd_api_tools_scan(two, strlen(two), 1, sp, 4, &closed) == 2 && closed == 0);
    const char *shut = "[{\"name\": \"get_time\", \"arguments\": {}}]";
    CHECK(sd_api_tools_scan(shut, strlen(shut), 1, sp, 4, &closed) == 1 && closed == 1);
    CHECK(sd_api_tools_scan(shut, strlen(shut) - 1, 1, sp, 4, &closed) == 1 && closed == 0);
    /* at most max calls */
    CHECK(sd_api_tools_scan(two, strlen(two), 1, sp, 1, NULL) == 1);
}

/* "auto" calls in the forms the engine constrains them to: Llama's ("; " between calls, whole
 * after any call unless another begins) and Hermes' (blocks with whitespace between, whole once
 * the last block's closing tag is in). */
static void test_scan_auto(void)
{
    sd_api_call_span sp[4];
    int closed = -1;
    const char *ll = "{\"name\": \"get_time\", \"parameters\": {}}; {\"name\": \"get_weather\", "
                     "\"parameters\": {\"city\": \"a; {\"}}";
    REQUIRE(sd_api_tools_scan_llama(ll, strlen(ll), sp, 4, &closed) == 2);
    CHECK(closed == 1 && sp[0].done && sp[1].done && !strncmp(ll + sp[1].name, "get_weather", 11));
    CHECK(sd_api_tools_scan_llama(ll, 45, sp, 4, &closed) == 1 && closed == 1); /* the first call and "; " */
    CHECK(sd_api_tools_scan_llama(ll, strlen(ll) - 2, sp, 4, &closed) == 2 && closed == 0);
    CHECK(sd_api_tools_scan_llama(ll, strlen(ll), sp, 1, &closed) == 1); /* at most max */
    const char *arg_key = "{\"name\": \"get_time\", \"arguments\": {}}"; /* Hermes' key, not Llama's */
    CHECK(sd_api_tools_scan_llama(arg_key, strlen(arg_key), sp, 4, &closed) == 1 && !sp[0].done &&
          closed == 0);
    const char *he =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"</tool_call>\"}}\n"
        "</tool_call>\n \t<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    REQUIRE(sd_api_tools_scan_hermes(he, strlen(he), sp, 4, &closed) == 2);
    CHECK(closed == 1 && sp[0].done && sp[1].done && !strcmp(he + sp[1].args, "{}}\n</tool_call>") &&
          sp[1].args_len == 2);
    CHECK(sd_api_tools_scan_hermes(he, strlen(he) - 1, sp, 4, &closed) == 2 &&
          closed == 0); /* tag not whole */
    const char *cut = strstr(he, "\n \t<tool_c");
    REQUIRE(cut);
    size_t at = (size_t)(cut - he) + 8; /* a partial next tag: one call, whole */
    CHECK(sd_api_tools_scan_hermes(he, at, sp, 4, &closed) == 1 && closed == 1);
    const char *loose =
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>"; /* no newlines */
    CHECK(sd_api_tools_scan_hermes(loose, strlen(loose), sp, 4, &closed) == 0 && closed == 0);
}

static void test_split_hermes(void)
{
    sd_api_req r;
    req_of(&r, "\"auto\"");
    size_t content = 0;
    sd_api_tool_call *c = NULL;
    const char *t =
        "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
        "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{}\"}\n</tool_call>";
    REQUIRE(split(&r, SD_TOOL_FMT_HERMES, t, &content, &c) == 2);
    CHECK(content == strlen("Let me check.") && !strcmp(c[1].name, "get_time") &&
          !strcmp(c[1].arguments, "{}"));
    sd_api_tool_calls_free(c, 2);
    /* the last closing tag may be missing */
    const char *open = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}";
    REQUIRE(split(&r, SD_TOOL_FMT_HERMES, open, &content, &c) == 1);
    CHECK(content == 0);
    sd_api_tool_calls_free(c, 1);
    const char *bad[] = {"plain answer", "<tool_call>{\"name\": \"get_time\"}</tool_call>",
                         "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call> and more",
                         "<tool_call>not json</tool_call>"};
    for (size_t i = 0; i < 4; i++)
        CHECK_MSG(split(&r, SD_TOOL_FMT_HERMES, bad[i], &content, &c) == 0 && content == strlen(bad[i]), "%s",
                  bad[i]);
    /* streaming: content up to the tag, never a partial tag or the whitespace before it */
    static const struct {
        const char *text;
        size_t safe;
    } s[] = {{"Hello", 5}, {"Hello <tool", 5}, {"Hello\n<tool_call>{", 5}, {"a <b>", 5}, {"x <tool_cal", 1}};
    for (size_t i = 0; i < sizeof s / sizeof *s; i++)
        CHECK_MSG(sd_api_tools_safe(&r, SD_TOOL_FMT_HERMES, s[i].text, strlen(s[i].text), 0) == s[i].safe,
                  "%s", s[i].text);
    sd_api_req_free(&r);
}

static void test_split_llama(void)
{
    sd_api_req r;
    req_of(&r, "\"auto\"");
    size_t content = 0;
    sd_api_tool_call *c = NULL;
    const char *t =
        " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}; {\"name\": \"get_time\", "
        "\"parameters\": {}}";
    REQUIRE(split(&r, SD_TOOL_FMT_LLAMA, t, &content, &c) == 2);
    CHECK(content == 0 && !strcmp(c[0].arguments, "{\"city\": \"Rome\"}"));
    sd_api_tool_calls_free(c, 2);
    const char *tagged = "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}";
    REQUIRE(split(&r, SD_TOOL_FMT_LLAMA, tagged, &content, &c) == 1);
    sd_api_tool_calls_free(c, 1);
    CHECK(split(&r, SD_TOOL_FMT_LLAMA, "{\"a\": 1}", &content, &c) == 0 && content == 8);
    CHECK(sd_api_tools_safe(&r, SD_TOOL_FMT_LLAMA, "  ", 2, 0) == 0);
    CHECK(sd_api_tools_safe(&r, SD_TOOL_FMT_LLAMA, " {\"na", 5, 0) == 0);
    CHECK(sd_api_tools_safe(&r, SD_TOOL_FMT_LLAMA, "<|pyth", 6, 0) == 0);
    CHECK(sd_api_tools_safe(&r, SD_TOOL_FMT_LLAMA, "Sure", 4, 0) == 4);
    sd_api_req_free(&r);
    /* without tools everything is content */
    const char *body = "{" MSGS "}";
    sd_api_err e;
    REQUIRE(sd_api_parse(&r, SD_API_CHAT, body, strlen(body), &e) == 0);
    CHECK(sd_api_tools_safe(&r, SD_TOOL_FMT_NONE, "<tool_call>", 11, 0) == 11);
    sd_api_req_free(&r);
}

/* Arguments go out as the model wrote them (jansson would print 0.1 as 0.10000000000000001 and
 * refuse a 20-digit id); parallel_tool_calls false keeps the first call only. */
static void test_arguments_verbatim(void)
{
    sd_api_req r;
    req_of(&r, "\"auto\"");
    size_t content = 0;
    sd_api_tool_call *c = NULL;
    const char *t = "<tool_call>{\"arguments\": {\"t\": 0.1, \"n\": 1e2, \"id\": 12345678901234567890, "
                    "\"s\": \"a,}\\\"b\"}, \"name\": \"get_time\"}</tool_call>";
    REQUIRE(split(&r, SD_TOOL_FMT_HERMES, t, &content, &c) == 1);
    CHECK_MSG(!strcmp(c[0].arguments,
                      "{\"t\": 0.1, \"n\": 1e2, \"id\": 12345678901234567890, \"s\": \"a,}\\\"b\"}"),
              "%s", c[0].arguments);
    sd_api_tool_calls_free(c, 1);
    sd_api_req_free(&r);
    sd_api_err e;
    const char *body = "{" MSGS ",\"tools\":[" WEATHER "," TIME "],\"parallel_tool_calls\":false}";
    REQUIRE(parse(&r, body, &e) == 0);
    const char *two =
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": "
        "\"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>";
    REQUIRE(split(&r, SD_TOOL_FMT_HERMES, two, &content, &c) == 1);
    CHECK(!strcmp(c[0].name, "get_time") && content == 0);
    sd_api_tool_calls_free(c, 1);
    sd_api_req_free(&r);
}

static void test_shapes(void)
{
    sd_api_tool_call calls[2] = {{0, "get_time", "{}"}, {1, "get_weather", "{\"city\":\"Oslo\"}"}};
    sd_api_meta m = {.kind = SD_API_CHAT, .id = "chatcmpl-1", .model = "m", .logprobs = -1};
    sd_api_choice_out o = {
        .index = 0, .text = "", .finish = "tool_calls", .calls = calls, .n_calls = 2, .content_null = 1};
    sd_api_usage u = {0};
    char *s = sd_api_response(&m, &o, 1, &u);
    json_t *v = json_loads(s, 0, NULL);
    json_t *msg = json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message");
    json_t *tc = json_object_get(msg, "tool_calls");
    CHECK(json_is_null(json_object_get(msg, "content")) && json_array_size(tc) == 2);
    const char *id0 = json_string_value(json_object_get(json_array_get(tc, 0), "id"));
    const char *id1 = json_string_value(json_object_get(json_array_get(tc, 1), "id"));
    CHECK(id0 && id1 && strlen(id0) == 29 && !strncmp(id0, "call_", 5) && strcmp(id0, id1));
    json_t *f = json_object_get(json_array_get(tc, 1), "function");
    CHECK(!strcmp(json_string_value(json_object_get(f, "arguments")), "{\"city\":\"Oslo\"}"));
    CHECK(!json_object_get(json_array_get(tc, 0), "index"));
    char *chunk = sd_api_chunk(&m, &o, 0, 0);
    json_t *cv = json_loads(chunk + 6, 0, NULL); /* after "data: " */
    json_t *ch = json_array_get(json_object_get(cv, "choices"), 0);
    json_t *dtc = json_object_get(json_object_get(ch, "delta"), "tool_calls");
    CHECK(json_array_size(dtc) == 2 &&
          json_integer_value(json_object_get(json_array_get(dtc, 1), "index")) == 1);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(dtc, 0), "id")), id0));
    CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls"));
    json_decref(cv);
    free(chunk);
    /* a later piece of call 1: its index and arguments only */
    sd_api_tool_call piece = {1, NULL, "\"Os"};
    o = (sd_api_choice_out){.index = 0, .text = "", .calls = &piece, .n_calls = 1};
    chunk = sd_api_chunk(&m, &o, 0, 0);
    cv = json_loads(chunk + 6, 0, NULL);
    json_t *p0 = json_array_get(
        json_object_get(json_object_get(json_array_get(json_object_get(cv, "choices"), 0), "delta"),
                        "tool_calls"),
        0);
    CHECK(json_integer_value(json_object_get(p0, "index")) == 1 && !json_object_get(p0, "id"));
    CHECK(json_object_size(json_object_get(p0, "function")) == 1 &&
          !strcmp(json_string_value(json_object_get(json_object_get(p0, "function"), "arguments")), "\"Os"));
    json_decref(cv);
    json_decref(v);
    free(chunk);
    free(s);
}

int main(void)
{
    RUN(test_choices);
    RUN(test_rejections);
    RUN(test_scan_constrained);
    RUN(test_scan_auto);
    RUN(test_split_hermes);
    RUN(test_split_llama);
    RUN(test_arguments_verbatim);
    RUN(test_shapes);
    return sd_test_done();
}
