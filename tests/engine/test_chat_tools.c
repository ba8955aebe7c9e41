/* test_chat_tools: what a chat template teaches about tools and thinking (sd_chat_template_tools,
 * sd_chat_template_thinks), read from its source: short excerpts in each family's own words, the
 * fixture templates, and the shared Qwen3 and Llama 3 configs. */
#include "engine/chat_template.h"
#include "tests/harness.h"

static sd_chat_tools tools_of_source(const char *src, int *thinks)
{
    sd_chat_template *t = NULL;
    sd_diag d = {0};
    int rc = sd_chat_template_init(&t, src, &d);
    CHECK_MSG(rc == 0, "%s: %s", src, sd_diag_str(&d, rc));
    sd_chat_tools k = t ? sd_chat_template_tools(t) : SD_CHAT_TOOLS_IGNORED;
    *thinks = t ? sd_chat_template_thinks(t) : -1;
    sd_chat_template_free(t);
    return k;
}

static void test_excerpts(void)
{
    static const struct {
        const char *src;
        sd_chat_tools want;
        int thinks;
    } cases[] = {
        {"{% for m in messages %}{{ m.content }}{% endfor %}", SD_CHAT_TOOLS_IGNORED, 0},
        /* Qwen2.5 / Qwen3 (Hermes): the tools in <tools>, calls in <tool_call>; Qwen3 thinks */
        {"{% if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools> Return "
         "<tool_call>{\"name\": ...}</tool_call>{% endif %}{% if '</think>' in x %}{% endif %}",
         SD_CHAT_TOOLS_HERMES, 1},
        /* Llama 3.1 / 3.3: the python tag; Llama 3.2: only the JSON it teaches */
        {"{% if tools %}{{ '<|python_tag|>' }}{% endif %}", SD_CHAT_TOOLS_LLAMA, 0},
        {"{% if tools %}Respond as {\"name\": function name, \"parameters\": dictionary}{% endif %}",
         SD_CHAT_TOOLS_LLAMA, 0},
        /* Mistral, Granite / Phi-4, DeepSeek V3: their own tags, even beside a "parameters" */
        {"{% if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
         "{{ '[TOOL_CALLS] [{\"name\": \"f\", \"parameters\": {}}]' }}",
         SD_CHAT_TOOLS_OTHER, 0},
        {"{% if tools %}{{ '<|tool_call|>' }}{\"name\": \"f\", \"parameters\": {}}{% endif %}",
         SD_CHAT_TOOLS_OTHER, 0},
        {"{% if tools %}{{ '<\xef\xbd\x9ctool\xe2\x96\x81"
         "calls\xe2\x96\x81"
         "begin\xef\xbd\x9c>' }}{% endif %}"
         "\"parameters\"",
         SD_CHAT_TOOLS_OTHER, 0},
        /* shows the tools in no markup of its own */
        {"{% if tools %}Tools: {{ tools | tojson }}{% endif %}", SD_CHAT_TOOLS_OTHER, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int thinks = 0;
        sd_chat_tools k = tools_of_source(cases[i].src, &thinks);
        CHECK_MSG(k == cases[i].want && thinks == cases[i].thinks, "case %zu: tools %d (want %d), thinks %d",
                  i, k, cases[i].want, thinks);
    }
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* The fixtures the server's tests serve the tiny model with. */
static void test_fixtures(void)
{
    static const struct {
        const char *name;
        sd_chat_tools want;
        int thinks;
    } cases[] = {
        {"hermes_tools", SD_CHAT_TOOLS_HERMES, 0}, {"llama_tools", SD_CHAT_TOOLS_LLAMA, 0},
        {"features", SD_CHAT_TOOLS_OTHER, 0},      {"mistral", SD_CHAT_TOOLS_IGNORED, 0},
        {"think", SD_CHAT_TOOLS_IGNORED, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[128];
        snprintf(path, sizeof path, "tests/fixtures/templates/%s.jinja", cases[i].name);
        const char *src = read_file(path);
        if (!src)
            SKIP("%s not readable (run from the repo root)", path);
        int thinks = 0;
        sd_chat_tools k = tools_of_source(src, &thinks);
        CHECK_MSG(k == cases[i].want && thinks == cases[i].thinks, "%s: tools %d (want %d), thinks %d",
                  cases[i].name, k, cases[i].want, thinks);
    }
}

/* Real configs: Qwen3's teaches <tool_call> and thinks; Llama 3's (before 3.1) has no tools. */
static void test_shared_configs(void)
{
    static const struct {
        const char *sub;
        sd_chat_tools want;
        int thinks;
    } cases[] = {
        {"tokenizers/qwen3/tokenizer_config.json", SD_CHAT_TOOLS_HERMES, 1},
        {"tokenizers/llama3/tokenizer_config.json", SD_CHAT_TOOLS_IGNORED, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *path = sd_test_shared(cases[i].sub);
        if (!path)
            SKIP("../shared/%s absent", cases[i].sub);
        sd_chat_template *t = NULL;
        sd_diag d = {0};
        int rc = sd_chat_template_load(&t, path, &d);
        CHECK_MSG(rc == 0, "%s: %s", path, sd_diag_str(&d, rc));
        if (rc < 0)
            continue;
        CHECK_MSG(sd_chat_template_tools(t) == cases[i].want && sd_chat_template_thinks(t) == cases[i].thinks,
                  "%s: tools %d, thinks %d", cases[i].sub, sd_chat_template_tools(t),
                  sd_chat_template_thinks(t));
        sd_chat_template_free(t);
    }
}

int main(void)
{
    RUN(test_excerpts);
    RUN(test_fixtures);
    RUN(test_shared_configs);
    return sd_test_done();
}
