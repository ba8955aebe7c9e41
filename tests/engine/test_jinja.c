/* test_jinja: the Jinja interpreter against outputs Python jinja2 rendered for the same
 * templates (tests/fixtures/templates/cases.json, produced by gen_cases.py and checked against
 * jinja2 by test_chat_template.py), plus errors, limits, thread safety, chat message
 * normalisation and robustness on mutated templates. */
#include <pthread.h>
#include <stdint.h>

#include "engine/chat_template.h"
#include "engine/jinja.h"
#include "tests/harness.h"

#define CASES "tests/fixtures/templates/cases.json"

static int render(const char *src, const json_t *vars, const sd_jinja_limits *lim, char **out, sd_diag *d)
{
    sd_jinja_tmpl *t = NULL;
    int rc = sd_jinja_parse(&t, src, strlen(src), NULL, d);
    if (rc == 0)
        rc = sd_jinja_render(t, vars, lim, out, NULL, d);
    sd_jinja_free(t);
    return rc;
}

static void test_cases_match_jinja2(void)
{
    json_error_t jerr;
    json_t *cases = json_load_file(CASES, 0, &jerr);
    if (!cases)
        SKIP("%s not readable (run from the repo root): %s", CASES, jerr.text);
    REQUIRE(json_is_array(cases) && json_array_size(cases) > 50);
    size_t i, bad = 0;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        const char *src = json_string_value(json_object_get(c, "template"));
        json_t *expect = json_object_get(c, "expect");
        sd_diag d = {0};
        char *out = NULL;
        int rc = render(src, json_object_get(c, "vars"), NULL, &out, &d);
        if (expect) {
            int ok = rc == 0 && strlen(out) == json_string_length(expect) &&
                     !strcmp(out, json_string_value(expect));
            CHECK_MSG(ok, "case %zu %s\n    template: %s\n    jinja2:   [%s]\n    ours:     [%s]", i,
                      rc ? d.msg : "differs", src, json_string_value(expect), rc ? "(error)" : out);
            bad += !ok;
        } else {
            CHECK_MSG(rc < 0, "case %zu: jinja2 raises but we rendered [%s] for %s", i, out ? out : "", src);
            CHECK_MSG(rc >= 0 || d.msg[0], "case %zu: error without message", i);
            bad += rc >= 0;
        }
        free(out);
    }
    CHECK_MSG(bad == 0, "%zu of %zu cases differ", bad, json_array_size(cases));
    json_decref(cases);
}

static void test_syntax_error_has_line(void)
{
    sd_jinja_tmpl *t = (sd_jinja_tmpl *)0x1;
    sd_diag d = {0};
    const char *src = "line one\n{{ ok }}\n{% if x %}\n{{ 1 + }}\n";
    int rc = sd_jinja_parse(&t, src, strlen(src), NULL, &d);
    CHECK(rc == SD_EFORMAT);
    CHECK_MSG(strstr(d.msg, "line 4") != NULL, "msg: %s", d.msg); /* the '}}' after '+' is on line 4 */
    CHECK(t == (sd_jinja_tmpl *)0x1);                             /* untouched on failure */
}

static void test_runtime_error_keeps_output_untouched(void)
{
    char *out = (char *)"sentinel";
    size_t len = 12345;
    sd_diag d = {0};
    sd_jinja_tmpl *t = NULL;
    const char *src = "before {{ raise_exception('stop here') }} after";
    REQUIRE(sd_jinja_parse(&t, src, strlen(src), NULL, &d) == 0);
    int rc = sd_jinja_render(t, NULL, NULL, &out, &len, &d);
    CHECK(rc == SD_EINVAL);
    CHECK_MSG(!strcmp(d.msg, "stop here"), "msg: %s", d.msg);
    CHECK(!strcmp(out, "sentinel") && len == 12345);
    sd_jinja_free(t);
    sd_jinja_free(NULL);
    sd_chat_template_free(NULL);
}

static void test_limits(void)
{
    sd_jinja_limits lim = sd_jinja_limits_default();
    sd_diag d = {0};
    char *out = NULL;
    lim.max_output = 1000;
    CHECK(render("{% for i in range(100) %}0123456789abcdef{% endfor %}", NULL, &lim, &out, &d) == SD_EFULL);
    CHECK(render("{{ 'x' * 5000 }}", NULL, &lim, &out, &d) == SD_EFULL);
    lim = sd_jinja_limits_default();
    lim.max_steps = 100000;
    CHECK(render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", NULL, &lim,
                 &out, &d) == SD_EFULL);
    CHECK_MSG(strstr(d.msg, "step limit") != NULL, "msg: %s", d.msg);
    lim = sd_jinja_limits_default();
    CHECK(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &lim, &out, &d) == SD_EFULL);
    lim.max_memory = 1 << 20;
    CHECK(
        render(
            "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
            NULL, &lim, &out, &d) == SD_EFULL);
    CHECK(out == NULL);
}

static void test_deep_nesting_is_an_error(void)
{
    size_t n = 5000;
    char *src = malloc(4 * n + 16);
    REQUIRE(src);
    strcpy(src, "{{ ");
    for (size_t i = 0; i < n; i++)
        strcat(src, "(");
    strcat(src, "1");
    for (size_t i = 0; i < n; i++)
        strcat(src, ")");
    strcat(src, " }}");
    sd_jinja_tmpl *t = NULL;
    sd_diag d = {0};
    CHECK(sd_jinja_parse(&t, src, strlen(src), NULL, &d) == SD_EFORMAT);
    memset(src, 0, 4 * n + 16);
    for (size_t i = 0; i < n; i++)
        strcat(src, "not ");
    strcat(src, "x");
    char *expr = malloc(strlen(src) + 16);
    sprintf(expr, "{{ %s }}", src);
    CHECK(sd_jinja_parse(&t, expr, strlen(expr), NULL, &d) == SD_EFORMAT);
    free(expr);
    free(src);
}

typedef struct {
    const sd_jinja_tmpl *t;
    const json_t *vars;
    const char *want;
    int ok;
} thread_arg;

static void *render_many(void *p)
{
    thread_arg *a = p;
    a->ok = 1;
    for (int i = 0; i < 200; i++) {
        char *out = NULL;
        if (sd_jinja_render(a->t, a->vars, NULL, &out, NULL, NULL) != 0 || strcmp(out, a->want) != 0)
            a->ok = 0;
        free(out);
    }
    return NULL;
}

static void test_shared_template_across_threads(void)
{
    const char *src = "{% set ns = namespace(n=0) %}{% for m in msgs %}{% set ns.n = ns.n + 1 %}"
                      "{{ m.role }}:{{ m.content | upper }};{% endfor %}{{ ns.n }}";
    json_t *vars = json_pack("{s[{ssss}{ssss}]}", "msgs", "role", "user", "content", "hi", "role",
                             "assistant", "content", "yo");
    sd_jinja_tmpl *t = NULL;
    REQUIRE(sd_jinja_parse(&t, src, strlen(src), NULL, NULL) == 0);
    char *want = NULL;
    REQUIRE(sd_jinja_render(t, vars, NULL, &want, NULL, NULL) == 0);
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){t, vars, want, 0};
        pthread_create(&th[i], NULL, render_many, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok);
    }
    free(want);
    sd_jinja_free(t);
    json_decref(vars);
}

static void test_messages_normalize(void)
{
    json_t *msgs = json_pack("[{ss s[{ssss}{ssss}]} {ss sn} {ss ss}]", "role", "user", "content", "type",
                             "text", "text", "Hello ", "type", "text", "text", "wörld", "role", "assistant",
                             "content", "role", "user", "content", "plain");
    json_t *out = NULL;
    sd_diag d = {0};
    REQUIRE(sd_chat_messages_normalize(msgs, &out, &d) == 0);
    /* the parts' texts, concatenated */
    json_t *parts = json_object_get(json_array_get(msgs, 0), "content");
    char joined[64];
    snprintf(joined, sizeof joined, "%s%s",
             json_string_value(json_object_get(json_array_get(parts, 0), "text")),
             json_string_value(json_object_get(json_array_get(parts, 1), "text")));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(out, 0), "content")), joined));
    CHECK(json_string_length(json_object_get(json_array_get(out, 1), "content")) == 0);
    CHECK(json_equal(json_array_get(out, 2), json_array_get(msgs, 2)));
    CHECK(json_is_array(json_object_get(json_array_get(msgs, 0), "content"))); /* input untouched */
    json_decref(out);
    json_t *img = json_pack("[{ss s[{ss}]}]", "role", "user", "content", "type", "image_url");
    out = NULL;
    CHECK(sd_chat_messages_normalize(img, &out, &d) == SD_ENOTSUP && out == NULL);
    json_t *norole = json_pack("[{ss}]", "content", "x");
    CHECK(sd_chat_messages_normalize(norole, &out, &d) == SD_EINVAL);
    json_decref(img);
    json_decref(norole);
    json_decref(msgs);
}

static void test_chat_template_load_and_render(void)
{
    const char *cfg_path = "models/tiny/tokenizer_config.json";
    json_t *cfg = json_load_file(cfg_path, JSON_DECODE_INT_AS_REAL, NULL);
    if (!cfg)
        SKIP("%s not readable (run from the repo root)", cfg_path);
    sd_chat_template *t = NULL;
    sd_diag d = {0};
    REQUIRE(sd_chat_template_load(&t, cfg_path, &d) == 0);
    /* the same source through sd_chat_template_init, with the config's bos_token passed
     * explicitly, must render the same text as the loaded template */
    sd_chat_template *t2 = NULL;
    REQUIRE(sd_chat_template_init(&t2, json_string_value(json_object_get(cfg, "chat_template")), &d) == 0);
    json_t *msgs = json_pack("[{ssss}]", "role", "user", "content", "hi");
    json_t *extra = json_pack("{sbss}", "add_generation_prompt", 1, "bos_token",
                              json_string_value(json_object_get(cfg, "bos_token")));
    json_t *extra1 = json_pack("{sb}", "add_generation_prompt", 1);
    char *a = NULL, *b = NULL;
    CHECK(sd_chat_template_render(t, msgs, extra1, &a, NULL, &d) == 0);
    CHECK(sd_chat_template_render(t2, msgs, extra, &b, NULL, &d) == 0);
    CHECK(a && b && !strcmp(a, b));
    CHECK(a && strstr(a, json_string_value(json_object_get(cfg, "bos_token"))) == a);
    free(a);
    free(b);
    sd_chat_template *t3 = NULL;
    CHECK(sd_chat_template_load(&t3, "tests/fixtures/templates/no_such_config.json", &d) < 0 && t3 == NULL);
    json_decref(msgs);
    json_decref(extra);
    json_decref(extra1);
    json_decref(cfg);
    sd_chat_template_free(t);
    sd_chat_template_free(t2);
}

/* Deterministic mutations of real template sources: every outcome must be a code, never a
 * crash or a hang (ASan runs this too). */
static void test_mutated_templates_never_crash(void)
{
    static const char *const pieces[] = {
        "{%", "%}", "{{",   "}}",       "{#",   "#}",     "-",  "(",     ")",      "[",    "]",
        "'",  "\"", "|",    ".",        "for",  "endfor", "if", "endif", "set",    "ns.",  "loop",
        "\\", "\n", "\xff", "\xe2\x82", "::-1", "**",     "~",  "raw",   "endraw", "macro"};
    const char *paths[] = {"tests/fixtures/templates/features.jinja",
                           "tests/fixtures/templates/llama2.jinja"};
    json_t *vars = json_pack("{s[{ssss}{ssss}]sb}", "messages", "role", "user", "content", "hi", "role",
                             "assistant", "content", "<think>x</think>y", "add_generation_prompt", 1);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int tried = 0;
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        FILE *f = fopen(paths[p], "rb");
        if (!f)
            SKIP("%s not readable (run from the repo root)", paths[p]);
        char base[16384];
        size_t n = fread(base, 1, sizeof base - 1, f);
        fclose(f);
        base[n] = 0;
        for (int iter = 0; iter < 400; iter++) {
            char buf[20000];
            size_t len = n;
            memcpy(buf, base, n);
            for (int m = 0; m < 1 + iter % 4; m++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                size_t at = (size_t)(seed >> 33) % (len + 1);
                const char *ins = pieces[(seed >> 20) % (sizeof pieces / sizeof pieces[0])];
                size_t il = strlen(ins), del = (seed >> 10) % 4;
                if (at + del > len)
                    del = len - at;
                memmove(buf + at + il, buf + at + del, len - at - del);
                memcpy(buf + at, ins, il);
                len = len - del + il;
            }
            sd_jinja_tmpl *t = NULL;
            char *out = NULL;
            int rc = sd_jinja_parse(&t, buf, len, NULL, NULL);
            if (rc == 0)
                rc = sd_jinja_render(t, vars, NULL, &out, NULL, NULL);
            CHECK(rc <= 0);
            free(out);
            sd_jinja_free(t);
            tried++;
        }
    }
    CHECK(tried == 800);
    json_decref(vars);
}

int main(void)
{
    RUN(test_cases_match_jinja2);
    RUN(test_syntax_error_has_line);
    RUN(test_runtime_error_keeps_output_untouched);
    RUN(test_limits);
    RUN(test_deep_nesting_is_an_error);
    RUN(test_shared_template_across_threads);
    RUN(test_messages_normalize);
    RUN(test_chat_template_load_and_render);
    RUN(test_mutated_templates_never_crash);
    return sd_test_done();
}
