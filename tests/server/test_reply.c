/* test_reply: chat replies split into reasoning, content and tool calls (server/reply.c) —
 * whole replies of each shape, and the same texts streamed byte by byte: the increments add up
 * to the whole split, and nothing handed out is ever taken back (no partial tag as reasoning or
 * content). */
#include "server/reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define TIME_TOOL "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}"

static void append(char *dst, const char *s, size_t n)
{
    size_t l = strlen(dst);
    memcpy(dst + l, s, n);
    dst[l + n] = 0;
}

/* Calls by index: the name (given once, in the first piece) and the arguments' pieces joined. */
typedef struct calls {
    char name[4][32], args[4][256];
    int n, named_twice;
} calls;

static void take_calls(calls *c, const sd_reply_delta *d)
{
    for (int k = 0; k < d->n_calls; k++) {
        const sd_api_tool_call *t = &d->calls[k];
        if (t->index < 0 || t->index >= 4)
            continue;
        if (t->name) {
            c->named_twice |= c->name[t->index][0] != 0;
            snprintf(c->name[t->index], sizeof c->name[0], "%s", t->name);
        }
        append(c->args[t->index], t->arguments, strlen(t->arguments));
        c->n = t->index + 1 > c->n ? t->index + 1 : c->n;
    }
    sd_api_tool_calls_free(d->calls, d->n_calls);
}

typedef struct split {
    char reasoning[512], content[512];
    int n_calls, content_null, had_reasoning, called;
    calls c; /* the calls, joined by index */
} split;

static void take(split *sp, const sd_reply_delta *d)
{
    if (d->reasoning_len)
        append(sp->reasoning, d->reasoning, d->reasoning_len);
    if (d->content_len)
        append(sp->content, d->content, d->content_len);
    sp->content_null |= d->content_null;
    sp->had_reasoning |= d->had_reasoning;
    sp->called |= d->called;
    take_calls(&sp->c, d); /* frees them */
    sp->n_calls = sp->c.n;
}

static split whole_split(const sd_reply_cfg *cfg, const char *t)
{
    split sp = {0};
    sd_reply_pos pos = {0};
    sd_reply_delta d;
    CHECK(sd_reply_next(cfg, t, strlen(t), 1, &pos, &d) == 0);
    take(&sp, &d);
    return sp;
}

/* Streams t a byte at a time (then final) and checks the increments match the whole split: the
 * same parts, the same calls joined (a call's pieces may come before the end), never a name twice. */
static void check_stream(const sd_reply_cfg *cfg, const char *t)
{
    split want = whole_split(cfg, t), got = {0};
    sd_reply_pos pos = {0};
    size_t n = strlen(t);
    for (size_t i = 1; i <= n; i++) {
        sd_reply_delta d;
        CHECK(sd_reply_next(cfg, t, i, 0, &pos, &d) == 0);
        CHECK_MSG(!d.called, "called before the end at %zu of %s", i, t);
        take(&got, &d);
        /* what went out is a prefix of the final parts: never taken back */
        CHECK_MSG(!strncmp(want.reasoning, got.reasoning, strlen(got.reasoning)), "%s: reasoning '%s' at %zu",
                  t, got.reasoning, i);
        CHECK_MSG(!strncmp(want.content, got.content, strlen(got.content)), "%s: content '%s' at %zu", t,
                  got.content, i);
    }
    sd_reply_delta d;
    CHECK(sd_reply_next(cfg, t, n, 1, &pos, &d) == 0);
    take(&got, &d);
    CHECK_MSG(!strcmp(want.reasoning, got.reasoning) && !strcmp(want.content, got.content), "%s: '%s' '%s'",
              t, got.reasoning, got.content);
    CHECK(want.n_calls == got.n_calls && want.content_null == got.content_null && want.called == got.called);
    CHECK(!got.c.named_twice && !want.c.named_twice);
    for (int k = 0; k < want.n_calls; k++)
        CHECK_MSG(!strcmp(want.c.name[k], got.c.name[k]) && !strcmp(want.c.args[k], got.c.args[k]),
                  "%s: call %d", t, k);
}

static void test_thinking(void)
{
    sd_api_req r = {.tool_choice = SD_TOOLS_OFF};
    sd_reply_cfg cfg = {.req = &r, .think = 1};
    static const struct {
        int open;
        const char *text, *reasoning, *content;
    } cases[] = {
        {0, "<think>\nLet me see.\n</think>\n\nHello!", "\nLet me see.\n", "Hello!"},
        {0, "  <think>a</think>b", "a", "b"},
        {0, "Hello <think> there", "", "Hello <think> there"},
        {0, "<thi", "", "<thi"},                      /* ended before it could open */
        {0, "<think>still going", "still going", ""}, /* cut by max_tokens: all reasoning */
        {0, "", "", ""},
        {1, "a plan</think>\n\nThe answer.", "a plan", "The answer."},
        {1, "<</think>x</", "<", "x</"},
        {1, "no close yet </thin", "no close yet </thin", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cfg.think_open = cases[i].open;
        split s = whole_split(&cfg, cases[i].text);
        CHECK_MSG(!strcmp(s.reasoning, cases[i].reasoning) && !strcmp(s.content, cases[i].content),
                  "case %zu: '%s' / '%s'", i, s.reasoning, s.content);
        int reasoned =
            cases[i].open || strstr(cases[i].text, "<think>") == cases[i].text + strspn(cases[i].text, " ");
        CHECK_MSG(s.had_reasoning == reasoned, "case %zu", i);
        check_stream(&cfg, cases[i].text);
    }
    /* off: all content, tags and all */
    cfg.think = 0;
    split s = whole_split(&cfg, "<think>a</think>b");
    CHECK(!strcmp(s.content, "<think>a</think>b") && !s.had_reasoning);
}

/* A chat request offering get_time, with `extra` members (",\"tool_choice\": ..."). */
static int tools_req(sd_api_req *r, const char *extra)
{
    char body[512];
    sd_api_err e;
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"t\"}],\"tools\":[%s]%s}",
             TIME_TOOL, extra);
    return sd_api_parse(r, SD_API_CHAT, body, strlen(body), &e);
}

static void test_thinking_then_calls(void)
{
    sd_api_req r;
    REQUIRE(tools_req(&r, "") == 0);
    sd_reply_cfg cfg = {.req = &r, .fmt = SD_TOOL_FMT_HERMES, .think = 1};
    const char *t =
        "<think>\nI need the time.\n</think>\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
        "</tool_call>";
    split s = whole_split(&cfg, t);
    CHECK(!strcmp(s.reasoning, "\nI need the time.\n") && s.n_calls == 1 && s.content_null && !s.content[0]);
    check_stream(&cfg, t);
    const char *t2 =
        "<think>x</think>Sure. <tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
    s = whole_split(&cfg, t2);
    CHECK(!strcmp(s.content, "Sure.") && s.n_calls == 1 && !s.content_null);
    check_stream(&cfg, t2);
    sd_api_req_free(&r);
}

static void test_constrained_stream(void)
{
    sd_api_req r;
    REQUIRE(tools_req(&r, ",\"tool_choice\":\"required\"") == 0);
    sd_reply_cfg cfg = {.req = &r, .think = 1};
    const char *t =
        "[{\"name\": \"get_time\", \"arguments\": {\"tz\": \"a}\\\"b\"}}, {\"name\": \"get_time\", "
        "\"arguments\": {}}]";
    size_t n = strlen(t);
    for (size_t cut = n; cut > n - 30; cut -= 29) { /* whole, then cut inside the second call's head */
        calls whole = {0}, got = {0};
        sd_reply_pos pos = {0};
        sd_reply_delta d;
        REQUIRE(sd_reply_next(&cfg, t, cut, 1, &pos, &d) == 0);
        CHECK(d.called == (cut == n) && d.content_null && !d.content_len); /* a cut call: no "tool_calls" */
        take_calls(&whole, &d);
        memset(&pos, 0, sizeof pos);
        for (size_t i = 1; i <= cut; i++) {
            REQUIRE(sd_reply_next(&cfg, t, i, 0, &pos, &d) == 0);
            CHECK(!d.content_len && !d.reasoning_len && !d.called);
            take_calls(&got, &d);
        }
        REQUIRE(sd_reply_next(&cfg, t, cut, 1, &pos, &d) == 0);
        take_calls(&got, &d);
        CHECK_MSG(got.n == whole.n && !got.named_twice && !whole.named_twice, "cut %zu: %d %d", cut, got.n,
                  whole.n);
        for (int k = 0; k < whole.n; k++)
            CHECK_MSG(!strcmp(got.name[k], whole.name[k]) && !strcmp(got.args[k], whole.args[k]),
                      "cut %zu call %d", cut, k);
        if (cut == n) {
            CHECK(whole.n == 2 && !strcmp(whole.name[1], "get_time") && !strcmp(whole.args[1], "{}"));
            CHECK(!strcmp(whole.args[0], "{\"tz\": \"a}\\\"b\"}"));
        } else {
            CHECK_MSG(whole.n == 1, "cut %zu: %d calls", cut, whole.n);
        }
    }
    /* cut before any name ended: no call at all */
    sd_reply_pos pos = {0};
    sd_reply_delta d;
    REQUIRE(sd_reply_next(&cfg, "[{\"name\": \"get_t", 16, 1, &pos, &d) == 0);
    CHECK(!d.n_calls && !d.called && !d.content_len);
    sd_api_req_free(&r);
}

/* A constrained reply of a reasoning model: its thinking first (the prompt opened the block, or
 * the reply does), then the calls, found after "</think>" and streamed as they are written. */
static void test_constrained_after_thinking(void)
{
    sd_api_req r;
    REQUIRE(tools_req(&r, ",\"tool_choice\":\"required\"") == 0);
    sd_reply_cfg cfg = {.req = &r, .think = 1};
    static const char *const texts[2] = {
        "<think>which one? [{\"name\": \"x\"</think>\n\n[{\"name\": \"get_time\", \"arguments\": {}}]",
        "which one? [{\"name\": \"x\"</think>\n\n[{\"name\": \"get_time\", \"arguments\": {}}]",
    };
    for (int open = 0; open < 2; open++) {
        cfg.think_open = open;
        const char *t = texts[open];
        split w = whole_split(&cfg, t);
        CHECK_MSG(!strcmp(w.reasoning, "which one? [{\"name\": \"x\""), "open %d: %s", open, w.reasoning);
        CHECK(w.n_calls == 1 && w.called && w.content_null && !w.content[0]);
        CHECK(!strcmp(w.c.name[0], "get_time") && !strcmp(w.c.args[0], "{}"));
        check_stream(&cfg, t); /* byte by byte, the same parts */
        size_t tag = (size_t)(strstr(t, "</think>") - t);
        sd_reply_pos pos = {0};
        for (size_t i = 1; i <= tag; i++) { /* the thoughts' brackets are no call */
            sd_reply_delta d;
            REQUIRE(sd_reply_next(&cfg, t, i, 0, &pos, &d) == 0);
            CHECK_MSG(!d.n_calls && !d.content_len, "open %d: a call or content at %zu", open, i);
            sd_api_tool_calls_free(d.calls, d.n_calls);
        }
    }
    sd_api_req_free(&r);
}

/* "auto" in Llama's markup: a reply that opens with '{' streams as constrained calls do (names
 * once, arguments piece by piece, no content); prose streams as content; a reply cut before its
 * first name ended is content, as the split reads it. */
static void test_llama_stream(void)
{
    sd_api_req r;
    REQUIRE(tools_req(&r, "") == 0);
    sd_reply_cfg cfg = {.req = &r, .fmt = SD_TOOL_FMT_LLAMA};
    const char *t = " \n{\"name\": \"get_time\", \"parameters\": {\"tz\": \"a; {\\\"\"}}; {\"name\": "
                    "\"get_time\", \"parameters\": {}}";
    size_t n = strlen(t);
    calls whole = {0}, got = {0};
    sd_reply_pos pos = {0};
    sd_reply_delta d;
    REQUIRE(sd_reply_next(&cfg, t, n, 1, &pos, &d) == 0);
    CHECK(d.called && d.content_null && !d.content_len);
    take_calls(&whole, &d);
    memset(&pos, 0, sizeof pos);
    int pieces = 0;
    for (size_t i = 1; i <= n; i++) {
        REQUIRE(sd_reply_next(&cfg, t, i, 0, &pos, &d) == 0);
        CHECK(!d.content_len && !d.reasoning_len && !d.called);
        pieces += d.n_calls;
        take_calls(&got, &d);
    }
    REQUIRE(sd_reply_next(&cfg, t, n, 1, &pos, &d) == 0);
    CHECK(d.called);
    take_calls(&got, &d);
    CHECK_MSG(whole.n == 2 && got.n == 2 && !got.named_twice && pieces > 4, "%d / %d calls, %d pieces",
              whole.n, got.n, pieces);
    for (int k = 0; k < 2; k++)
        CHECK_MSG(!strcmp(got.name[k], "get_time") && !strcmp(got.args[k], whole.args[k]), "call %d", k);
    CHECK_MSG(!strcmp(whole.args[0], "{\"tz\": \"a; {\\\"\"}") && !strcmp(whole.args[1], "{}"), "%s",
              whole.args[0]);
    /* cut inside the second call's arguments (max_tokens): two calls, no "tool_calls" */
    memset(&pos, 0, sizeof pos);
    REQUIRE(sd_reply_next(&cfg, t, n - 2, 1, &pos, &d) == 0);
    CHECK(d.n_calls == 2 && !d.called && d.content_null);
    sd_api_tool_calls_free(d.calls, d.n_calls);
    /* cut before the first name ended: content */
    split s = whole_split(&cfg, "{\"name\": \"get_t");
    CHECK(!strcmp(s.content, "{\"name\": \"get_t") && !s.n_calls && !s.content_null);
    check_stream(&cfg, "The time is not known to me.");
    sd_api_req_free(&r);
}

/* "auto" in the Hermes markup: the content before the first <tool_call> streams as content, then
 * the calls stream as constrained ones do (names once, arguments in pieces, before the end); a
 * reply cut inside a call keeps it, without "tool_calls". */
static void test_hermes_stream(void)
{
    sd_api_req r;
    REQUIRE(tools_req(&r, "") == 0);
    sd_reply_cfg cfg = {.req = &r, .fmt = SD_TOOL_FMT_HERMES, .think = 1};
    const char *t =
        "<think>plan</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
        "{\"tz\": \"</tool_call>\"}}\n</tool_call>\n \n<tool_call>\n{\"name\": \"get_time\", "
        "\"arguments\": {}}\n</tool_call>\n";
    split w = whole_split(&cfg, t);
    CHECK_MSG(!strcmp(w.content, "Let me check.") && w.n_calls == 2 && w.called && !w.content_null &&
                  !strcmp(w.reasoning, "plan") && !strcmp(w.c.args[0], "{\"tz\": \"</tool_call>\"}") &&
                  !strcmp(w.c.args[1], "{}"),
              "'%s' %d calls: %s", w.content, w.n_calls, w.c.args[0]);
    check_stream(&cfg, t);
    /* the calls' pieces come before the end */
    sd_reply_pos pos = {0};
    int early = 0;
    for (size_t i = 1; i <= strlen(t); i++) {
        sd_reply_delta d;
        REQUIRE(sd_reply_next(&cfg, t, i, 0, &pos, &d) == 0);
        early += d.n_calls;
        sd_api_tool_calls_free(d.calls, d.n_calls);
    }
    CHECK_MSG(early > 4, "%d call pieces before the end", early);
    /* cut inside the second call's arguments: both calls, no "tool_calls" */
    const char *cut = strstr(t, "{}}");
    REQUIRE(cut);
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(cut - t) + 1, t);
    w = whole_split(&cfg, buf);
    CHECK_MSG(w.n_calls == 2 && !w.called && !strcmp(w.c.args[1], "{"), "%d calls, '%s'", w.n_calls,
              w.c.args[1]);
    check_stream(&cfg, buf);
    /* only calls: content null */
    w = whole_split(&cfg, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");
    CHECK(w.n_calls == 1 && w.called && w.content_null && !w.content[0]);
    sd_api_req_free(&r);
}

static void test_think_open(void)
{
    CHECK(sd_reply_think_open("<|im_start|>assistant\n<think>\n", 29));
    const char *closed = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    CHECK(!sd_reply_think_open(closed, strlen(closed)));
    const char *again = "<think>a</think> then <think>";
    CHECK(sd_reply_think_open(again, strlen(again)));
    CHECK(!sd_reply_think_open("plain", 5));
    /* a <think> in the conversation opens nothing */
    const char *asked = "<|im_start|>user\nWhat does the <think> tag do?<|im_end|>\n<|im_start|>assistant\n";
    CHECK(!sd_reply_think_open(asked, strlen(asked)));
}

int main(void)
{
    RUN(test_thinking);
    RUN(test_thinking_then_calls);
    RUN(test_constrained_stream);
    RUN(test_llama_stream);
    RUN(test_hermes_stream);
    RUN(test_constrained_after_thinking);
    RUN(test_think_open);
    return sd_test_done();
}
