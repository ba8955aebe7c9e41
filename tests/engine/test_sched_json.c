/* test_sched_json: json_object and json_schema requests (response_format) through the
 * scheduler on the CPU backend and the bundled tiny model. Greedy and sampled requests end
 * with EOS after a text that jansson parses as one object (or, cut by max_tokens, that the
 * validator still takes as a prefix); a plain request beside them is unchanged; a schema the
 * engine cannot enforce is refused at submit; forced tool calls (tool_spec) end with EOS after
 * one call or an array of them; lazy ones (tool_mode SD_TCALL_HERMES) leave free text, each call in it whole;
 * in Llama's markup a reply that opens with '{' is whole calls, then EOS. */
#include <jansson.h>

#include "engine/jschema.h"
#include "engine/jsonc.h"
#include "engine/jthink.h"
#include "engine/sched.h"
#include "engine/toolcall.h"

#include "tests/engine/sched_util.h"

#define JGEN 200

/* What a finished json_object request must look like: a parseable object when it stopped on
 * EOS, a valid JSON prefix when max_tokens cut it. */
static void check_json(const res *r, const char *what)
{
    CHECK_MSG(r->n_final == 1 && r->n_error == 0, "%s: final %d error %d", what, r->n_final, r->n_error);
    sd_jfsm m;
    sd_jfsm_init(&m);
    int prefix_ok = sd_jfsm_feed(&m, r->text, r->text_len) == 0;
    CHECK_MSG(prefix_ok, "%s: not a JSON prefix: %s", what, r->text);
    if (r->finish == SD_FINISH_STOP) {
        json_error_t je;
        json_t *v = json_loadb(r->text, r->text_len, 0, &je);
        CHECK_MSG(v && json_is_object(v), "%s: stopped but does not parse (%s): %s", what, je.text, r->text);
        CHECK(sd_jfsm_complete(&m));
        json_decref(v);
    } else {
        CHECK_MSG(r->finish == SD_FINISH_LENGTH && r->n == JGEN, "%s: finish %d after %d tokens", what,
                  r->finish, r->n);
    }
}

static void json_params(sd_request_params *p, const int32_t *ids, int32_t n, int sampled, uint64_t seed)
{
    greedy_params(p, ids, n, JGEN);
    p->ignore_eos = 0;
    p->json_object = 1;
    if (sampled) {
        p->sampling.temperature = 0.8f;
        p->sampling.top_p = 0.95f;
        p->sampling.seed = seed;
    }
}

static void test_json_requests(void)
{
    /* the third primes a short object: its greedy request closes it (the tiny model, trained on
     * Python, otherwise tends to repeat keys until max_tokens) */
    static const char *prompts[] = {"config = ", "data = {\"a\": 1, \"b\": [1, 2]}\nother = ",
                                    "headers = {\"Content-Type\": \"application/json\"}\nparams = "};
    int32_t *ids[3], n[3];
    for (int i = 0; i < 3; i++)
        REQUIRE((ids[i] = encode(prompts[i], &n[i])) != NULL);
    sd_backend *b = backend_new(128, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 8, 512);

    /* the plain request alone, then beside six JSON requests: the same tokens */
    res solo = {0}, rs[7] = {0};
    sd_request_params p[7];
    greedy_params(&p[0], ids[0], n[0], 24);
    REQUIRE(run_all(b, &o, p, &solo, 1, NULL) == 0);
    for (int i = 1; i < 7; i++) /* 1-3 greedy, 4-6 sampled */
        json_params(&p[i], ids[(i - 1) % 3], n[(i - 1) % 3], i > 3, 100 + (uint64_t)i);
    REQUIRE(run_all(b, &o, p, rs, 7, NULL) == 0);
    CHECK(rs[0].n == solo.n && memcmp(rs[0].tok, solo.tok, sizeof(int32_t) * (size_t)solo.n) == 0);
    int stopped = 0;
    for (int i = 1; i < 7; i++) {
        char what[32];
        snprintf(what, sizeof what, "request %d", i);
        check_json(&rs[i], what);
        stopped += rs[i].finish == SD_FINISH_STOP;
        fprintf(stderr, "  %s (%s, %d tokens): %.*s\n", what,
                rs[i].finish == SD_FINISH_STOP ? "stop" : "length", rs[i].n,
                rs[i].text_len < 60 ? (int)rs[i].text_len : 60, rs[i].text);
    }
    CHECK_MSG(rs[3].finish == SD_FINISH_STOP, "the primed greedy request did not close its object: %s",
              rs[3].text);
    fprintf(stderr, "  %d of 6 JSON requests ended with EOS\n", stopped);
    /* greedy JSON is deterministic: the same request alone gives the same text */
    res again = {0};
    REQUIRE(run_all(b, &o, &p[3], &again, 1, NULL) == 0);
    CHECK(again.n == rs[3].n && strcmp(again.text, rs[3].text) == 0);
    res_reset(&solo);
    res_reset(&again);
    for (int i = 0; i < 7; i++)
        res_reset(&rs[i]);
    sd_backend_free(b);
    for (int i = 0; i < 3; i++)
        free(ids[i]);
}

/* A request whose max_tokens cuts the object still gets only JSON-prefix text. */
static void test_json_cut_by_max_tokens(void)
{
    int32_t n, *ids = encode("data = ", &n);
    REQUIRE(ids);
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 2, 512);
    res r = {0};
    sd_request_params p;
    json_params(&p, ids, n, 1, 7);
    p.max_tokens = 3;
    REQUIRE(run_all(b, &o, &p, &r, 1, NULL) == 0);
    sd_jfsm m;
    sd_jfsm_init(&m);
    CHECK(r.n == 3 && r.finish == SD_FINISH_LENGTH);
    CHECK_MSG(r.text[0] == '{' || r.text[0] == ' ' || r.text[0] == '\n', "text: %s", r.text);
    CHECK(sd_jfsm_feed(&m, r.text, r.text_len) == 0);
    res_reset(&r);
    sd_backend_free(b);
    free(ids);
}

/* json_schema: every request's text is a prefix the schema's validator takes, and one that
 * stopped is an object with a string "name" and an integer "age" (checked with jansson); a schema
 * with a keyword sparsed cannot enforce is refused at submit, naming it. */
static void test_json_schema(void)
{
    static const char *schema = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", "
                                "\"maxLength\": 12}, \"age\": {\"type\": \"integer\"}}, \"required\": "
                                "[\"name\", \"age\"], \"additionalProperties\": false}";
    int32_t n, *ids = encode("person = {\"name\": \"Ada\", \"age\": 36}\nother = ", &n);
    REQUIRE(ids);
    sd_backend *b = backend_new(128, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 4, 512);
    res rs[4] = {0};
    sd_request_params p[4];
    for (int i = 0; i < 4; i++) {
        json_params(&p[i], ids, n, i > 0, 40 + (uint64_t)i);
        p[i].json_object = 0;
        p[i].json_schema = schema;
        p[i].max_tokens = 60;
    }
    REQUIRE(run_all(b, &o, p, rs, 4, NULL) == 0);
    sd_jschema *js = NULL;
    REQUIRE(sd_jschema_compile(&js, schema, strlen(schema), NULL) == 0);
    uint64_t st[SD_JVAL_MAX_STATE / 8];
    int stopped = 0;
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(rs[i].n_final == 1 && rs[i].n_error == 0, "request %d: error", i);
        sd_jschema_init(js, st);
        CHECK_MSG(sd_jschema_feed(js, st, rs[i].text, rs[i].text_len) == 0, "request %d: %s", i, rs[i].text);
        fprintf(stderr, "  request %d (%s): %s\n", i, rs[i].finish == SD_FINISH_STOP ? "stop" : "length",
                rs[i].text);
        if (rs[i].finish != SD_FINISH_STOP)
            continue;
        stopped++;
        CHECK(sd_jschema_complete(js, st));
        json_t *v = json_loadb(rs[i].text, rs[i].text_len, 0, NULL);
        CHECK_MSG(v && json_is_string(json_object_get(v, "name")) &&
                      json_is_integer(json_object_get(v, "age")) && json_object_size(v) == 2,
                  "request %d: %s", i, rs[i].text);
        json_decref(v);
    }
    /* the tiny model may run an integer's digits on to max_tokens (numbers are unbounded), so
     * only some requests close the object: the seeded ones here do */
    CHECK_MSG(stopped >= 1, "none of 4 schema requests finished its object");
    sd_jschema_free(js);
    for (int i = 0; i < 4; i++)
        res_reset(&rs[i]);

    sd_sched *s = NULL;
    sd_diag d = {0};
    REQUIRE(sd_sched_init(&s, M, b, &o, NULL) == 0);
    sd_sched_req *r = NULL;
    p[0].json_schema = "{\"type\": \"string\", \"pattern\": \"^(?=a)\"}";
    CHECK(sd_sched_req_new(s, &p[0], on_event, NULL, 1, &r, &d) == SD_EINVAL);
    CHECK_MSG(strstr(d.msg, "response_format") && strstr(d.msg, "pattern"), "message: %s", d.msg);
    p[0].json_schema = "{\"type\": ";
    CHECK(sd_sched_req_new(s, &p[0], on_event, NULL, 1, &r, &d) == SD_EINVAL);
    sd_sched_free(s);
    sd_backend_free(b);
    free(ids);
}

/* tool_spec: sampled at temperature 1, every request ends with EOS (not max_tokens) after a whole
 * call (or an array of calls) that the validator completes and jansson parses, naming one of the
 * two tools with the arguments its schema asks for. Bounded arguments (a short string, an enum)
 * keep the calls short whatever the model samples. */
static const char tool_spec[] =
    "[{\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
    "{\"type\": \"string\", \"maxLength\": 8}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": "
    "[\"city\", \"unit\"]}}, {\"name\": \"get_time\"}]";

/* A tool-call request of the tool list below: sampled at temperature 1 (top_p 1), seed `seed`. */
static void tool_params(sd_request_params *p, const int32_t *ids, int32_t n, uint64_t seed, int parallel,
                        sd_tcall_mode mode)
{
    json_params(p, ids, n, 1, seed);
    p->json_object = 0;
    p->sampling.temperature = 1.0f;
    p->sampling.top_p = 1.0f;
    p->tool_spec = tool_spec;
    p->tool_parallel = parallel;
    p->tool_mode = mode;
}

/* Runs the 8 tool requests p[] into rs[] on a fresh backend (256 KV blocks of 16; o: 8 sequences,
 * 512 tokens a step) and compiles tool_spec in `mode` for one call and parallel ones into tc[0],
 * tc[1]. The backend, for more requests; NULL (a failed check) on error. */
static sd_backend *run_tools(sd_request_params *p, res *rs, sd_engine_opts *o, sd_tcall_mode mode,
                             sd_tcall *tc[2])
{
    sd_backend *b = backend_new(256, 16);
    opts(o, 8, 512);
    int ok = b && run_all(b, o, p, rs, 8, NULL) == 0;
    for (int k = 0; ok && k < 2; k++)
        ok = sd_tcall_compile(&tc[k], tool_spec, strlen(tool_spec), k, mode, NULL) == 0;
    CHECK_MSG(ok, "backend %p: the requests or the validators failed", (void *)b);
    if (!ok) {
        sd_backend_free(b);
        return NULL;
    }
    return b;
}

/* argkey: "arguments", or Llama's "parameters" */
static void check_call(const json_t *c, const char *argkey, const char *text)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    const json_t *args = json_object_get(c, argkey);
    CHECK_MSG(json_object_size(c) == 2 && name && json_is_object(args), "call: %s", text);
    if (!name || !json_is_object(args))
        return;
    if (strcmp(name, "get_time") == 0)
        CHECK_MSG(json_object_size(args) == 0, "get_time: %s", text);
    else
        CHECK_MSG(strcmp(name, "get_weather") == 0 && json_is_string(json_object_get(args, "city")) &&
                      json_is_string(json_object_get(args, "unit")),
                  "get_weather: %s", text);
}

static void check_tool_text(const sd_tcall *tc, const res *r, int parallel)
{
    CHECK_MSG(r->n_final == 1 && r->n_error == 0 && r->finish == SD_FINISH_STOP,
              "finish %d after %d tokens: %s", r->finish, r->n, r->text);
    uint64_t st[SD_JVAL_MAX_STATE / 8];
    sd_tcall_init(tc, st);
    CHECK_MSG(sd_tcall_feed(tc, st, r->text, r->text_len) == 0 && sd_tcall_complete(tc, st), "text: %s",
              r->text);
    json_t *v = json_loadb(r->text, r->text_len, 0, NULL);
    CHECK_MSG(v && (parallel ? json_is_array(v) : json_is_object(v)), "parse: %s", r->text);
    for (size_t i = 0; parallel && i < json_array_size(v); i++)
        check_call(json_array_get(v, i), "arguments", r->text);
    if (v && !parallel)
        check_call(v, "arguments", r->text);
    json_decref(v);
}

static void test_tool_calls(void)
{
    /* two prompts, each priming one of the tools */
    int32_t n[2], *ids[2];
    ids[0] = encode("call = {\"name\": \"get_time\", \"arguments\": {}}\ncall = ", &n[0]);
    ids[1] = encode("w = {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
                    "\"c\"}}\nw = [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": "
                    "\"f\"}}, {\"name\": \"get_time\", \"arguments\": {}}]\nw = ",
                    &n[1]);
    REQUIRE(ids[0] && ids[1]);
    res rs[8] = {0};
    sd_request_params p[8];
    for (int i = 0; i < 8; i++) { /* 0-3 one call, 4-7 parallel */
        tool_params(&p[i], ids[i & 1], n[i & 1], 300 + (uint64_t)i, i >= 4, SD_TCALL_FORCED);
        p[i].max_tokens = 400; /* up to 16 calls of ~13-35 tokens (the model may well make 16) */
    }
    sd_engine_opts o;
    sd_tcall *tc[2] = {NULL, NULL};
    sd_backend *b = run_tools(p, rs, &o, SD_TCALL_FORCED, tc);
    REQUIRE(b);
    int weather = 0;
    for (int i = 0; i < 8; i++) {
        fprintf(stderr, "  request %d (%d tokens): %s\n", i, rs[i].n, rs[i].text);
        check_tool_text(tc[i >= 4], &rs[i], i >= 4);
        weather += strstr(rs[i].text, "get_weather") != NULL;
        res_reset(&rs[i]);
    }
    CHECK_MSG(weather > 0 && weather < 8, "%d of 8 requests called get_weather: both tools should appear",
              weather);
    for (int k = 0; k < 2; k++)
        sd_tcall_free(tc[k]);

    /* refused at submit: a bad tool list, naming the tool; tools beside response_format */
    sd_sched *s = NULL;
    sd_diag d = {0};
    REQUIRE(sd_sched_init(&s, M, b, &o, NULL) == 0);
    sd_sched_req *r = NULL;
    p[0].tool_spec =
        "[{\"name\": \"f\"}, {\"name\": \"g\", \"strict\": true, \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"x\": {\"type\": \"integer\", \"multipleOf\": 2}}}}]";
    CHECK(sd_sched_req_new(s, &p[0], on_event, NULL, 1, &r, &d) == SD_EINVAL);
    CHECK_MSG(strcmp(d.msg, "tools[1] (g): parameters/properties/x: 'multipleOf' is not supported") == 0,
              "message: %s", d.msg);
    p[0].tool_spec = tool_spec;
    p[0].json_object = 1;
    CHECK(sd_sched_req_new(s, &p[0], on_event, NULL, 1, &r, &d) == SD_EINVAL);
    CHECK_MSG(strstr(d.msg, "tools: ") == d.msg && strstr(d.msg, "response_format"), "message: %s", d.msg);
    sd_sched_free(s);
    sd_backend_free(b);
    free(ids[0]);
    free(ids[1]);
}

/* SD_TCALL_HERMES: free text sampled at temperature 1, primed with Hermes markup so that the model writes
 * calls; the lazy validator takes every text (one that ended with EOS ends outside a call), each
 * whole <tool_call> block in it is a call of one of the tools that jansson parses, and only
 * whitespace and calls follow the first. */
static int check_lazy_text(const sd_tcall *tc, const res *r, int parallel)
{
    static const char open[] = SD_TCALL_LAZY_OPEN "\n", close[] = "\n" SD_TCALL_LAZY_CLOSE;
    CHECK_MSG(r->n_final == 1 && r->n_error == 0, "finish %d error %d", r->finish, r->n_error);
    uint64_t st[SD_JVAL_MAX_STATE / 8];
    sd_tcall_init(tc, st);
    CHECK_MSG(sd_tcall_feed(tc, st, r->text, r->text_len) == 0, "text: %s", r->text);
    CHECK_MSG(r->finish != SD_FINISH_STOP || sd_tcall_can_end(tc, st), "EOS inside a call: %s", r->text);
    int calls = 0;
    for (const char *p = strstr(r->text, open); p; p = strstr(p, open)) {
        p += strlen(open);
        const char *e = strstr(p, close);
        if (!e) /* cut by max_tokens */
            break;
        json_t *v = json_loadb(p, (size_t)(e - p), 0, NULL);
        CHECK_MSG(v && json_is_object(v), "call %d does not parse: %.*s", calls, (int)(e - p), p);
        if (v)
            check_call(v, "arguments", r->text);
        json_decref(v);
        calls++;
        p = e + strlen(close);
        /* after a call only whitespace, then another call (or a cut one) or the end */
        const char *q = p + strspn(p, " \n\t\r");
        CHECK_MSG(!*q || !strncmp(q, open, strlen(q) < strlen(open) ? strlen(q) : strlen(open)),
                  "text after call %d: %s", calls, r->text);
    }
    CHECK_MSG(parallel || calls <= 1, "%d calls with parallel 0: %s", calls, r->text);
    return calls;
}

static void test_lazy_tool_calls(void)
{
    /* the tiny model (4 layers, trained on code) copies markup it has just seen several times, when
     * top_k keeps it from wandering off: without it no call appears in 8 requests */
    static const char *const blocks[] = {
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}",
        "{\"name\": \"get_time\", \"arguments\": {}}",
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"f\"}}",
    };
    char prompt[2048];
    size_t len = 0;
    for (int i = 0; i < 6; i++)
        len += (size_t)snprintf(prompt + len, sizeof prompt - len, "<tool_call>\n%s\n</tool_call>\n",
                                blocks[i % 3]);
    int32_t n, *ids = encode(prompt, &n);
    REQUIRE(ids);
    res rs[8] = {0};
    sd_request_params p[8];
    for (int i = 0; i < 8; i++) { /* 0-3 one call at most, 4-7 up to 16 */
        tool_params(&p[i], ids, n, 500 + (uint64_t)i, i >= 4, SD_TCALL_HERMES);
        p[i].sampling.top_k = 3; /* see the prompt */
        p[i].max_tokens = 160;
    }
    sd_engine_opts o;
    sd_tcall *tc[2] = {NULL, NULL};
    sd_backend *b = run_tools(p, rs, &o, SD_TCALL_HERMES, tc);
    REQUIRE(b);
    int calls = 0;
    for (int i = 0; i < 8; i++) {
        int c = check_lazy_text(tc[i >= 4], &rs[i], i >= 4);
        calls += c;
        fprintf(stderr, "  request %d (%s, %d tokens, %d calls): %.*s\n", i,
                rs[i].finish == SD_FINISH_STOP ? "stop" : "length", rs[i].n, c,
                rs[i].text_len < 160 ? (int)rs[i].text_len : 160, rs[i].text);
        res_reset(&rs[i]);
    }
    CHECK_MSG(calls > 0, "no request wrote a call: the prompt should prime them");
    for (int k = 0; k < 2; k++)
        sd_tcall_free(tc[k]);
    /* one validator per request: lazy calls cannot be combined with response_format either */
    sd_sched *s = NULL;
    sd_sched_req *r = NULL;
    sd_diag d = {0};
    REQUIRE(sd_sched_init(&s, M, b, &o, NULL) == 0);
    p[0].json_object = 1;
    CHECK(sd_sched_req_new(s, &p[0], on_event, NULL, 1, &r, &d) == SD_EINVAL);
    CHECK_MSG(strcmp(d.msg, "tools: constrained tool calls cannot be combined with response_format") == 0,
              "message: %s", d.msg);
    sd_sched_free(s);
    sd_backend_free(b);
    free(ids);
}

/* SD_TCALL_LLAMA: a reply that opens with '{' is calls in Llama's form, ending with EOS after
 * the last; one that opens otherwise is free text. Primed with such calls, the tiny model opens
 * most replies with '{'; primed with prose, none. */
static void test_llama_tool_calls(void)
{
    /* Python assignments of such calls: the tiny model (trained on code) opens the next right after
     * "w = "; before a bare call on a line of its own it writes blank lines */
    static const char calls[] =
        "w = {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n"
        "w = {\"name\": \"get_time\", \"parameters\": {}}\n"
        "w = {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"f\"}}\nw = ";
    int32_t n[2], *ids[2] = {encode(calls, &n[0]), encode("# read the file and count the lines\n", &n[1])};
    REQUIRE(ids[0] && ids[1]);
    res rs[8] = {0};
    sd_request_params p[8];
    for (int i = 0; i < 8; i++) { /* 0-5 primed with calls (3-5 parallel), 6-7 with prose */
        tool_params(&p[i], ids[i >= 6], n[i >= 6], 700 + (uint64_t)i, i >= 3 && i < 6, SD_TCALL_LLAMA);
        p[i].sampling.top_k = 3;
        p[i].max_tokens = p[i].tool_parallel ? 560 : 120; /* room for 16 calls of ~31 tokens */
    }
    sd_engine_opts o;
    sd_tcall *tc[2] = {NULL, NULL};
    sd_backend *b = run_tools(p, rs, &o, SD_TCALL_LLAMA, tc);
    REQUIRE(b);
    int called = 0;
    for (int i = 0; i < 8; i++) {
        const res *r = &rs[i];
        int par = i >= 3 && i < 6;
        uint64_t st[SD_JVAL_MAX_STATE / 8];
        sd_tcall_init(tc[par], st);
        CHECK_MSG(r->n_final == 1 && r->n_error == 0 && sd_tcall_feed(tc[par], st, r->text, r->text_len) == 0,
                  "request %d: %s", i, r->text);
        size_t at = strspn(r->text, " \n");
        int is_call = r->text[at] == '{';
        called += is_call;
        fprintf(stderr, "  request %d (%s, %d tokens): %.*s\n", i,
                r->finish == SD_FINISH_STOP ? "stop" : "length", r->n,
                r->text_len < 160 ? (int)r->text_len : 160, r->text);
        CHECK_MSG(!is_call || i < 6, "prose prompt, call reply: %s", r->text);
        if (!is_call || r->finish != SD_FINISH_STOP) /* free text, or a call cut by max_tokens */
            continue;
        CHECK_MSG(sd_tcall_can_end(tc[par], st) && (par || sd_tcall_complete(tc[par], st)), "EOS inside: %s",
                  r->text);
        for (size_t k = 0; at < r->text_len; k++) { /* "; " between parallel calls */
            json_error_t je;
            json_t *v = json_loadb(r->text + at, r->text_len - at, JSON_DISABLE_EOF_CHECK, &je);
            CHECK_MSG(v, "call %zu does not parse: %s", k, r->text);
            if (!v)
                break;
            check_call(v, "parameters", r->text);
            json_decref(v);
            at += (size_t)je.position + 2;
        }
    }
    CHECK_MSG(called >= 3, "%d of 6 primed requests opened with a call", called);
    for (int k = 0; k < 2; k++)
        sd_tcall_free(tc[k]);
    for (int i = 0; i < 8; i++)
        res_reset(&rs[i]);
    sd_backend_free(b);
    free(ids[0]);
    free(ids[1]);
}

/* ---- thinking first (engine/jthink.h) ---------------------------------------------------- */

/* Where r's answer begins, after its thinking was cut at `budget` tokens: the text must be those
 * tokens' bytes (not holding the whole tag), then the rest of "</think>" (what they had begun of
 * it counts), then at most SD_JTHINK_MAX_GAP whitespace bytes. -1 when it is not. */
static long answer_after_budget(const sd_tokenizer *t, const res *r, int budget)
{
    static const char tag[] = "</think>";
    char head[4096];
    size_t h = 0;
    for (int i = 0; i < budget && i < r->n; i++) {
        size_t n = 0;
        const char *b = sd_tok_token_bytes(t, r->tok[i], &n);
        if (!b || h + n > sizeof head)
            return -1;
        memcpy(head + h, b, n);
        h += n;
    }
    if (r->text_len < h || memcmp(r->text, head, h) != 0 || memmem(head, h, tag, 8))
        return -1;
    size_t k = 7; /* the longest end of the thinking that begins the tag */
    while (k > 0 && (h < k || memcmp(head + h - k, tag, k) != 0))
        k--;
    if (r->text_len - h < 8 - k || memcmp(r->text + h, tag + k, 8 - k) != 0)
        return -1;
    size_t at = h + 8 - k, ws = 0;
    while (at < r->text_len && ws < SD_JTHINK_MAX_GAP && strchr(" \n\t\r", r->text[at]))
        at++, ws++;
    return (long)at;
}

/* A text from `at` on that jansson parses as one object. */
static int object_from(const res *r, long at)
{
    json_t *v = at < 0 ? NULL : json_loadb(r->text + at, r->text_len - (size_t)at, 0, NULL);
    int ok = v && json_is_object(v);
    json_decref(v);
    return ok;
}

/* Thinking before a JSON schema: a block the prompt opened, capped at 4 tokens or at none, then
 * the object; a budget with no constraint (free text after the forced tag, sampled); a reply that
 * may open a block, whose answer is the object either way. */
static void test_think_first(void)
{
    int32_t n, *ids = encode("headers = {\"Content-Type\": \"application/json\"}\nparams = ", &n);
    REQUIRE(ids);
    const sd_tokenizer *t = sd_model_tokenizer(M);
    sd_backend *b = backend_new(128, 16);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 4, 512);
    sd_request_params p[4];
    res rs[4] = {0};
    static const int budget[4] = {4, 0, 3, 2};
    /* a schema that the object closes soon under (the tiny model repeats keys until max_tokens) */
    static const char schema[] = "{\"type\": \"object\", \"properties\": {\"a\": {\"enum\": [1, 2]}}, "
                                 "\"required\": [\"a\"], \"additionalProperties\": false}";
    for (int i = 0; i < 4; i++) {
        json_params(&p[i], ids, n, 0, 0);
        p[i].json_object = 0;
        p[i].json_schema = i == 2 ? NULL : schema; /* 2: the budget alone */
        p[i].think = i < 3 ? SD_THINK_OPEN : SD_THINK_MAY;
        p[i].think_budget = budget[i];
    }
    p[2].max_tokens = 40;
    p[2].sampling.temperature = 1.0f;
    p[2].sampling.seed = 11;
    REQUIRE(run_all(b, &o, p, rs, 4, NULL) == 0);
    for (int i = 0; i < 4; i++)
        fprintf(stderr, "  think %d (budget %d, %s, %d tokens): %.*s\n", i, budget[i],
                rs[i].finish == SD_FINISH_STOP ? "stop" : "length", rs[i].n,
                rs[i].text_len < 80 ? (int)rs[i].text_len : 80, rs[i].text);
    for (int i = 0; i < 2; i++) {
        long at = answer_after_budget(t, &rs[i], budget[i]);
        CHECK_MSG(rs[i].finish == SD_FINISH_STOP && at >= 0 && object_from(&rs[i], at), "request %d: %s", i,
                  rs[i].text);
    }
    CHECK_MSG(!strncmp(rs[1].text, "</think>", 8), "no thinking at all: %s", rs[1].text);
    CHECK_MSG(answer_after_budget(t, &rs[2], budget[2]) >= 0 && rs[2].n_error == 0, "free: %s", rs[2].text);
    /* may think: JSON at once, or a block of at most 2 tokens' thoughts and then JSON */
    const char *close = strstr(rs[3].text, "</think>");
    long at = !strncmp(rs[3].text, "<think>", 7) && close ? (long)(close - rs[3].text) + 8 : 0;
    while (at > 0 && strchr(" \n\t\r", rs[3].text[at]) && rs[3].text[at])
        at++;
    CHECK_MSG(rs[3].finish == SD_FINISH_STOP && object_from(&rs[3], at), "may think: %s", rs[3].text);
    for (int i = 0; i < 4; i++)
        res_reset(&rs[i]);
    sd_backend_free(b);
    free(ids);
}

int main(void)
{
    sd_diag d = {0};
    int rc = sd_model_open(&M, MODEL_DIR, &d);
    if (rc < 0 || !sd_model_tokenizer(M)) {
        fprintf(stderr, "  SKIP: %s: %s\n", MODEL_DIR, sd_diag_str(&d, rc));
        return sd_test_done();
    }
    RUN(test_json_requests);
    RUN(test_json_cut_by_max_tokens);
    RUN(test_json_schema);
    RUN(test_tool_calls);
    RUN(test_lazy_tool_calls);
    RUN(test_llama_tool_calls);
    RUN(test_think_first);
    sd_model_free(M);
    return sd_test_done();
}
