/* test_api: OpenAI request parsing/validation (server/api_parse.c) and response building
 * (server/api_build.c): valid forms, rejected forms naming the field, a mutation fuzz of
 * bodies, and the built JSON read back with jansson. */
#include "server/api.h"

#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

static int parse(sd_api_req *r, sd_api_kind k, const char *body, sd_api_err *e)
{
    memset(e, 0, sizeof *e);
    return sd_api_parse(r, k, body, strlen(body), e);
}

static void test_completion_fields(void)
{
    sd_api_req r;
    sd_api_err e;
    const char *body =
        "{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,"
        "\"top_k\":40,\"min_p\":0.1,\"n\":3,\"seed\":-2,\"stop\":[\"a\",\"bc\"],\"logprobs\":5,"
        "\"echo\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"presence_penalty\":1.5,\"frequency_penalty\":-1,\"repetition_penalty\":1.2,"
        "\"ignore_eos\":true,\"user\":\"u\",\"unknown\":{\"x\":[1]}}";
    REQUIRE(parse(&r, SD_API_COMPLETION, body, &e) == 0);
    CHECK(!strcmp(r.model, "m") && r.n_prompts == 1 && !strcmp(r.prompts[0].text, "hi"));
    CHECK(r.max_tokens == 7 && r.n == 3 && r.logprobs == 5 && r.echo && r.stream && r.include_usage);
    CHECK(r.sampling.temperature == 0.5f && r.sampling.top_p == 0.9f && r.sampling.top_k == 40);
    CHECK(r.sampling.min_p == 0.1f && r.sampling.presence_penalty == 1.5f &&
          r.sampling.frequency_penalty == -1.f);
    CHECK(r.sampling.repetition_penalty == 1.2f && r.has_seed && r.sampling.seed == (uint64_t)-2);
    CHECK(r.n_stop == 2 && !strcmp(r.stop[1], "bc") && r.ignore_eos);
    sd_api_req_free(&r);
    /* defaults (null is "not given") */
    REQUIRE(parse(&r, SD_API_COMPLETION, "{\"prompt\":\"x\",\"temperature\":null,\"stop\":null}", &e) == 0);
    sd_sampling def;
    sd_sampling_default(&def);
    CHECK(r.max_tokens == 16 && r.n == 1 && r.logprobs == -1 && !r.stream && !r.has_seed);
    CHECK(r.sampling.temperature == def.temperature && r.n_stop == 0);
    sd_api_req_free(&r);
}

static void test_prompt_forms(void)
{
    sd_api_req r;
    sd_api_err e;
    REQUIRE(parse(&r, SD_API_COMPLETION, "{\"prompt\":[1,2,3]}", &e) == 0);
    CHECK(r.n_prompts == 1 && r.prompts[0].n_ids == 3 && r.prompts[0].ids[2] == 3);
    sd_api_req_free(&r);
    REQUIRE(parse(&r, SD_API_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", &e) == 0);
    CHECK(r.n_prompts == 2 && !strcmp(r.prompts[1].text, "b"));
    sd_api_req_free(&r);
    REQUIRE(parse(&r, SD_API_COMPLETION, "{\"prompt\":[[1],[4,5]]}", &e) == 0);
    CHECK(r.n_prompts == 2 && r.prompts[1].n_ids == 2 && r.prompts[1].ids[1] == 5);
    sd_api_req_free(&r);
}

static void test_chat_fields(void)
{
    sd_api_req r;
    sd_api_err e;
    const char *body =
        "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":"
        "[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
        "\"max_tokens\":3,\"max_completion_tokens\":9,\"logprobs\":true,\"top_logprobs\":2}";
    REQUIRE(parse(&r, SD_API_CHAT, body, &e) == 0);
    CHECK(r.max_tokens == 9 && r.logprobs == 2 && r.add_generation_prompt == 1);
    json_t *c = json_object_get(json_array_get(r.messages, 1), "content");
    CHECK(json_is_string(c) && !strcmp(json_string_value(c), "ab"));
    sd_api_req_free(&r);
    REQUIRE(parse(&r, SD_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &e) == 0);
    CHECK(r.max_tokens == -1 && r.logprobs == -1);
    sd_api_req_free(&r);
}

static void test_rejections(void)
{
    static const struct {
        sd_api_kind k;
        const char *body, *param;
    } bad[] = {
        {SD_API_COMPLETION, "{\"prompt\":\"a\",\"temperature\":\"x\"}", "temperature"},
        {SD_API_COMPLETION, "{\"prompt\":\"a\",\"temperature\":3}", "temperature"},
        {SD_API_COMPLETION, "{\"prompt\":\"a\",\"top_p\":0}", "top_p"},
        {SD_API_COMPLETION, "{\"prompt\":\"a\",\"max_tokens\":-1}", "max_tokens"},
        {SD_API_COMPLETION, "{\"prompt\":\"a\",\"n\":0}", "n"},
        {SD_API_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":21}", "logprobs"},
        {SD_API_COMPLETION, "{\"prompt\":\"a\",\"stop\":[1]}", "stop"},
        {SD_API_COMPLETION, "{\"prompt\":\"a\",\"echo\":\"yes\"}", "echo"},
        {SD_API_COMPLETION, "{\"prompt\":[]}", "prompt"},
        {SD_API_COMPLETION, "{\"prompt\":[-1]}", "prompt"},
        {SD_API_COMPLETION, "{\"prompt\":[\"a\",1]}", "prompt"},
        {SD_API_COMPLETION, "{}", "prompt"},
        {SD_API_CHAT, "{\"messages\":[]}", "messages"},
        {SD_API_CHAT, "{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}", "messages"},
        {SD_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}",
         "top_logprobs"},
        {SD_API_COMPLETION, "[1]", NULL},
        {SD_API_COMPLETION, "{\"prompt\":\"a\"", NULL},
        {SD_API_COMPLETION, "{\"prompt\":\"\xff\"}", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sd_api_req r;
        sd_api_err e;
        int rc = parse(&r, bad[i].k, bad[i].body, &e);
        CHECK_MSG(rc == -1 && e.status == 400 && e.message[0], "body %zu accepted", i);
        if (bad[i].param)
            CHECK_MSG(e.param && !strcmp(e.param, bad[i].param), "body %zu: param %s", i,
                      e.param ? e.param : "-");
        sd_api_req_free(&r);
    }
}

/* Mutated and truncated bodies: parsing either succeeds or fails with 400; never crashes
 * (the ASan build runs this too). */
static void test_fuzz_bodies(void)
{
    static const char *seeds[] = {
        "{\"prompt\":[[1,2],[3]],\"max_tokens\":5,\"stop\":[\"x\"],\"logprobs\":2,\"n\":2,\"echo\":true}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}],\"stream\":"
        "true}",
    };
    unsigned seed = 12345;
    int ok = 0, rejected = 0;
    for (int it = 0; it < 4000; it++) {
        const char *src = seeds[it % 2];
        size_t n = strlen(src);
        char buf[256];
        memcpy(buf, src, n);
        int muts = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 4;
        for (int m = 0; m < muts; m++) {
            seed = seed * 1103515245u + 12345u;
            buf[(seed >> 8) % n] = (char)(seed >> 20);
        }
        size_t len = it % 7 == 0 ? (seed >> 4) % n : n;
        sd_api_req r;
        sd_api_err e = {0};
        int rc = sd_api_parse(&r, it % 2 ? SD_API_CHAT : SD_API_COMPLETION, buf, len, &e);
        if (rc == 0)
            ok++;
        else {
            rejected++;
            CHECK(e.status == 400 || e.status == 500);
        }
        sd_api_req_free(&r);
    }
    CHECK(ok > 0 && rejected > 0);
}

static json_t *load_sse(const char *ev)
{
    size_t n = strlen(ev);
    if (n < 8 || strncmp(ev, "data: ", 6) || strcmp(ev + n - 2, "\n\n"))
        return NULL;
    return json_loadb(ev + 6, n - 8, 0, NULL);
}

static void test_build_shapes(void)
{
    sd_api_tok toks[2] = {{.id = 1, .lp = -0.5f, .n_top = 1, .top_ids = {1}, .top_lps = {-0.5f}},
                          {.id = 2, .lp = -1.5f}};
    sd_api_choice_out c = {
        .index = 0, .text = "ab", .text_len = 2, .toks = toks, .n_toks = 2, .finish = "length"};
    sd_api_meta m = {.kind = SD_API_COMPLETION, .id = "cmpl-1", .created = 5, .model = "tiny", .logprobs = 1};
    sd_api_usage u = {.prompt = 3, .completion = 2};
    char *s = sd_api_response(&m, &c, 1, &u);
    json_t *o = json_loads(s, 0, NULL);
    REQUIRE(o);
    CHECK(!strcmp(json_string_value(json_object_get(o, "object")), "text_completion"));
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(ch, "text")), "ab"));
    json_t *lp = json_object_get(ch, "logprobs");
    CHECK(json_array_size(json_object_get(lp, "token_logprobs")) == 2 &&
          json_array_size(json_object_get(lp, "text_offset")) == 2);
    CHECK(json_integer_value(json_object_get(json_object_get(o, "usage"), "total_tokens")) == 5);
    json_decref(o);
    free(s);

    m.kind = SD_API_CHAT;
    s = sd_api_chunk(&m, &c, 1, 1);
    o = load_sse(s);
    REQUIRE(o);
    json_t *delta = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "delta");
    CHECK(!strcmp(json_string_value(json_object_get(delta, "role")), "assistant"));
    CHECK(json_is_null(json_object_get(o, "usage")));
    json_decref(o);
    free(s);
    s = sd_api_usage_chunk(&m, &u);
    o = load_sse(s);
    REQUIRE(o);
    CHECK(json_array_size(json_object_get(o, "choices")) == 0 && json_object_get(o, "usage"));
    json_decref(o);
    free(s);

    sd_api_err e;
    sd_api_fail(&e, 429, NULL, "queue_full", "busy %d", 3);
    s = sd_api_error_json(&e);
    o = json_loads(s, 0, NULL);
    json_t *err = json_object_get(o, "error");
    CHECK(!strcmp(json_string_value(json_object_get(err, "message")), "busy 3"));
    CHECK(json_is_null(json_object_get(err, "param")) && json_is_string(json_object_get(err, "type")));
    json_decref(o);
    free(s);
}

static void test_utf8_sanitize(void)
{
    static const char *in[] = {"ok",       "\xff",        "a\xe2\x82", "\xed\xa0\x80", "\xf0\x9f\x98\x80",
                               "\xc0\xaf", "\xe2\x82\xac"};
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
        size_t n = 0;
        char *s = sd_api_utf8_sanitize(in[i], strlen(in[i]), &n);
        json_t *j = json_stringn(s, n); /* jansson validates UTF-8: the reference */
        CHECK_MSG(j != NULL, "input %zu not sanitised", i);
        json_t *orig = json_stringn(in[i], strlen(in[i]));
        if (orig) /* valid input passes unchanged */
            CHECK(n == strlen(in[i]) && !memcmp(s, in[i], n));
        json_decref(j);
        json_decref(orig);
        free(s);
    }
    CHECK(sd_api_utf8_chars("a\xe2\x82\xac", 4) == 2);
}

int main(void)
{
    RUN(test_completion_fields);
    RUN(test_prompt_forms);
    RUN(test_chat_fields);
    RUN(test_rejections);
    RUN(test_fuzz_bodies);
    RUN(test_build_shapes);
    RUN(test_utf8_sanitize);
    return sd_test_done();
}
