/* test_toolcall_lazy: the tool-call validator's lazy mode (engine/toolcall.h): free text, then calls
 * in Hermes markup with only whitespace between and after them, accepted or rejected at the right
 * byte, the call limits, can_end exactly outside calls and triggers, no trigger inside <think>
 * blocks, canonical states, random walks, and its vocabulary mask on the shared Qwen3 tokenizer
 * against brute force, with timings. */
#include "tests/engine/toolcall_vocab.h"

/* ---- lazy mode ---------------------------------------------------------------------------------- */

/* Whether the first i bytes of text end inside a call: from a trigger's '>' to the end of the
 * "\n</tool_call>" after it (which no JSON string can hold: a raw newline ends it). */
static int in_call(const char *text, size_t i)
{
    static const char open[] = SD_TCALL_LAZY_OPEN, close[] = "\n" SD_TCALL_LAZY_CLOSE;
    size_t at = 0;
    for (;;) {
        const char *o = strstr(text + at, open);
        if (!o || (size_t)(o - text) + strlen(open) > i)
            return 0;
        const char *c = strstr(o + strlen(open), close);
        if (!c || (size_t)(c - text) + strlen(close) > i)
            return 1;
        at = (size_t)(c - text) + strlen(close);
    }
}

/* Whether the first i bytes of text may end there: outside a call, and, once a call has closed,
 * not inside the next one's trigger (only whitespace and calls follow a call). */
static int may_end(const char *text, size_t i)
{
    static const char open[] = SD_TCALL_LAZY_OPEN, close[] = "\n" SD_TCALL_LAZY_CLOSE;
    if (in_call(text, i))
        return 0;
    const char *c = NULL;
    for (const char *p = strstr(text, close); p && (size_t)(p - text) + strlen(close) <= i;
         p = strstr(p + 1, close))
        c = p + strlen(close);
    if (!c)
        return 1;
    while ((size_t)(c - text) < i && strchr(" \n\t\r", *c))
        c++;
    return (size_t)(c - text) == i || strncmp(c, open, i - (size_t)(c - text)) != 0;
}

/* The index of the first byte a lazy validator rejects, or -1 when it takes the whole text; checks
 * on the way that can_end is 1 exactly where may_end says, and that complete comes only after a
 * call's closing tag (the last that may come: test_lazy_limits). *ret_end: can_end after the
 * whole text. */
static long lazy_reject(const sd_tcall *t, const char *text, int *ret_end)
{
    tstate st;
    sd_tcall_init(t, &st);
    size_t n = strlen(text);
    for (size_t i = 0;; i++) {
        CHECK_MSG(!sd_tcall_complete(t, &st) || (i >= 12 && !memcmp(text + i - 12, "</tool_call>", 12)),
                  "complete after %zu bytes of %s", i, text);
        CHECK_MSG(sd_tcall_can_end(t, &st) == may_end(text, i), "can_end after %zu bytes of %s", i, text);
        if (i == n)
            break;
        if (sd_tcall_step(t, &st, (unsigned char)text[i]) < 0)
            return (long)i;
    }
    *ret_end = sd_tcall_can_end(t, &st);
    return -1;
}

/* want: the index of the first byte rejected, DOC (all taken, may end there) or PREFIX (all taken,
 * inside a call). */
static void check_lazy(const sd_tcall *t, const char *const *texts, const long *want, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int end = 0;
        const char *text = q(texts[k]);
        long at = lazy_reject(t, text, &end);
        long got = at >= 0 ? at : end ? DOC : PREFIX;
        CHECK_MSG(got == want[k], "text %zu (%s): got %ld, want %ld", k, text, got, want[k]);
    }
}

#define TC_PING "<tool_call>\n{'name': 'ping', 'arguments': {}}\n</tool_call>"
#define TC_GET "<tool_call>\n{'name': 'get', 'arguments': {'id': 7}}\n</tool_call>"

static void test_lazy_accepts(void)
{
    static const char *const texts[] = {
        "",
        "Just text, no call.\n\n",
        "I will call it.\n" TC_PING,
        TC_GET "\n\n" TC_PING,              /* a second call: parallel only */
        "<" TC_PING,                        /* "<<tool_call>" still opens a call */
        "<tool_call" TC_PING " <tool_call", /* a partial trigger, a call, a partial one (parallel) */
        "<tool <tool_ <tool_cal <tool_callx </tool_call> <TOOL_CALL>", /* none completes */
        "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': '</tool_call>', 'unit': "
        "'c'}}\n</tool_call>",
        "x <tool_call>\n{'name': 'get_", /* inside a call */
        "<tool_call>",
        "<tool_call>\n{'name': 'ping', 'arguments': {}}\n</tool_cal",
        TC_PING " and more text",    /* nothing but whitespace and calls after a call */
        TC_PING "\n<tool_call>\n x", /* a second call's opening, then not it */
    };
    const long ping = (long)strlen(q(TC_PING)), get = (long)strlen(q(TC_GET)),
               ping2 = (long)strlen(q("<tool_call" TC_PING));
    /* want[k][parallel]: with parallel 0 the text ends after the call (the next byte rejected) */
    const long want[][2] = {{DOC, DOC},       {DOC, DOC},       {DOC, DOC},       {get, DOC},
                            {DOC, DOC},       {ping2, PREFIX},  {DOC, DOC},       {DOC, DOC},
                            {PREFIX, PREFIX}, {PREFIX, PREFIX}, {PREFIX, PREFIX}, {ping, ping + 1},
                            {ping, ping + 13}};
    REQUIRE(sizeof want / sizeof *want == sizeof texts / sizeof *texts);
    for (int parallel = 0; parallel < 2; parallel++) {
        sd_tcall *t = compile_lazy_ok(tools, parallel);
        REQUIRE(t);
        size_t size = sd_tcall_state_size(t);
        CHECK_MSG(size % 8 == 0 && size <= SD_TCALL_STATE_MAX && size <= SD_JVAL_MAX_STATE, "size %zu", size);
        long w[sizeof texts / sizeof *texts];
        for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
            w[k] = want[k][parallel];
        check_lazy(t, texts, w, sizeof texts / sizeof *texts);
        sd_tcall_free(t);
    }
}

/* Inside <think> ... </think> the trigger opens nothing: a thinking model writes about the markup
 * as it plans, then calls after the block. */
static void test_lazy_think(void)
{
    sd_tcall *t = compile_lazy_ok(tools, 0); /* one call at most: the one in the block must not count */
    REQUIRE(t);
    tstate st;
    const char *ok = q("<think>I'll answer within <tool_call> tags, then </tool_call>.</think>\n" TC_PING);
    sd_tcall_init(t, &st);
    CHECK(sd_tcall_feed(t, &st, ok, strlen(ok)) == 0 && sd_tcall_can_end(t, &st));
    const char *again = q(TC_GET);
    CHECK(sd_tcall_feed(t, &st, again, strlen(again)) == -1); /* the call made was the real one */
    const char *bare = q("I'll answer within <tool_call> tags");
    sd_tcall_init(t, &st);
    CHECK(sd_tcall_feed(t, &st, bare, strlen(bare)) == -1); /* outside a block the trigger opens a call */
    const char *partial = q("<think>abc <tool_call");
    sd_tcall_init(t, &st);
    CHECK(sd_tcall_feed(t, &st, partial, strlen(partial)) == 0 && sd_tcall_can_end(t, &st));
    /* a reply that begins inside the block the prompt opened is engine/jthink.h's (test_jthink.c): here the
     * trigger in it opens a call */
    const char *inside = q("plan: <tool_call> tags </think>\n" TC_PING);
    sd_tcall_init(t, &st);
    CHECK(sd_tcall_feed(t, &st, inside, strlen(inside)) == -1);
    static const char *const pairs[][2] = {
        {"<think>abc</think>", ""},              /* out of the block: as fresh */
        {"<think>a", "x<think>bcd <tool_call>"}, /* inside, nothing of its end matched */
        {"<think>x</thi", "<think></thi"},       /* inside, "</thi" matched */
        {"<thi", "<think"},                      /* outside, different parts of "<think>" */
        {"<think", "y<think"},                   /* the same part */
    };
    static const int equal[] = {1, 1, 1, 0, 1};
    check_pairs(t, pairs, equal, NULL, sizeof pairs / sizeof *pairs, 9);
    sd_tcall_free(t);
}

static void test_lazy_rejects(void)
{
    static const char *const texts[] = {
        "a<tool_call>\n{'name': 'pong'",                                 /* no such name */
        "<tool_call>{'name': 'ping'",                                    /* no "\n" after the trigger */
        "<tool_call> \n{'name': 'ping'",                                 /* nor anything else */
        "<tool_call>\n\n{'name': 'ping'",                                /* one newline only */
        "<tool_call>\n{'name': 'get', 'arguments': {'id': 'x'",          /* the arguments' schema */
        "<tool_call>\n[{'name': 'ping'",                                 /* the single-call form only */
        "<tool_call>\n{'name': 'ping', 'arguments': {}} \n</tool_call>", /* exactly "\n</tool_call>" */
        "<tool_call>\n{'name': 'ping', 'arguments': {}}\n<tool_call>",
        "<tool_call>\n{'name': 'ping', 'arguments': {}}</tool_call>",
    };
    static const long want[] = {24, 11, 11, 12, 48, 12, 45, 47, 45};
    _Static_assert(sizeof want / sizeof *want == sizeof texts / sizeof *texts, "one index per text");
    sd_tcall *t = compile_lazy_ok(tools, 1);
    REQUIRE(t);
    check_lazy(t, texts, want, sizeof texts / sizeof *texts);
    sd_tcall_free(t);
}

/* Some text, then n ping calls in markup, a newline between them, then `tail`. */
static const char *ping_markup(int n, const char *tail)
{
    static char buf[4096];
    size_t len = (size_t)snprintf(buf, sizeof buf, "Calling %d.\n", n);
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "\n" : "", q(TC_PING));
    snprintf(buf + len, sizeof buf - len, "%s", tail);
    return buf;
}

/* The call limit: the last call that may come ends the text (complete; its next byte rejected);
 * before it, up to 4 bytes of whitespace between calls, and text after a call is rejected at its
 * first byte. */
static void test_lazy_limits(void)
{
    for (int parallel = 0; parallel < 2; parallel++) {
        sd_tcall *t = compile_lazy_ok(tools, parallel);
        REQUIRE(t);
        int max = parallel ? SD_TCALL_MAX_CALLS : 1, end = 0;
        const char *all = ping_markup(max, "");
        CHECK(lazy_reject(t, all, &end) == -1 && end);
        tstate st;
        sd_tcall_init(t, &st);
        CHECK(sd_tcall_feed(t, &st, all, strlen(all)) == 0 && sd_tcall_complete(t, &st));
        const char *over = ping_markup(max, "\n<tool_call>");
        long at = lazy_reject(t, over, &end);
        CHECK_MSG(at == (long)strlen(over) - 12, "parallel %d: call %d rejected at %ld of %zu", parallel,
                  max + 1, at, strlen(over));
        const char *text = ping_markup(1, parallel ? " done" : "done");
        CHECK(lazy_reject(t, text, &end) == (long)strlen(text) - 4);
        sd_tcall_free(t);
    }
    sd_tcall *t = compile_lazy_ok(tools, 1);
    REQUIRE(t);
    int end = 0;
    const char *four = ping_markup(1, q(" \n\t\n" TC_GET));
    CHECK(lazy_reject(t, four, &end) == -1 && end);
    const char *five = ping_markup(1, q("\n\n\n\n\n" TC_GET));
    CHECK(lazy_reject(t, five, &end) == (long)(strlen(five) - strlen(q(TC_GET)) - 1));
    sd_tcall_free(t);
}

/* Equal places, equal bytes: the mask's cache keys on them. In free text the place is the trigger's
 * bytes matched and the calls made; inside a call, as in the forced form. */
static void test_lazy_canonical(void)
{
    static const char *const pairs[][2] = {
        {"hello", "<tool_cal! \xc3\xa9<tool_callx"},            /* nothing matched */
        {"abc<to", "<<tool_call <to"},                          /* "<to" matched */
        {"<to", "<t"},                                          /* a different place */
        {"a " TC_GET, TC_PING},                                 /* one call made, nothing matched */
        {"", TC_PING},                                          /* no call made, one made */
        {"<tool_call>\n{'name': 'get', 'arguments': {'id': 5}", /* about to close a call */
         "free <tool_call>\n{'name': 'ping', 'arguments': {}"},
        {"x<tool_call>\n{'name': 'get_time', 'arguments': {'tz': 'a", /* inside a plain string */
         "<tool_call>\n{'name': 'get_time', 'arguments': {'tz': 'bcd"},
    };
    static const int equal[] = {1, 1, 0, 1, 0, 1, 1};
    for (int parallel = 0; parallel < 2; parallel++) {
        sd_tcall *t = compile_lazy_ok(tools, parallel);
        REQUIRE(t);
        static const int plain[] = {0, 0, 0, 0, 0, 0, 1}; /* only inside a call's string */
        check_pairs(t, pairs, equal, plain, sizeof pairs / sizeof *pairs, parallel);
        sd_tcall_free(t);
    }
    /* between calls (parallel): the next trigger's bytes matched, whatever the whitespace */
    static const char *const between[][2] = {
        {TC_PING " <tool_c", "y " TC_GET "\n\n<tool_c"}, /* one call, "<tool_c" */
        {TC_PING "<t", TC_PING "<to"},                   /* not the same part */
        {TC_PING TC_GET, TC_GET "\n" TC_PING},           /* two calls */
        {TC_PING " ", TC_GET "\n"},                      /* one call, one byte of whitespace */
        {TC_PING " ", TC_PING},                          /* not as much whitespace */
    };
    static const int same[] = {1, 0, 1, 1, 0};
    sd_tcall *t = compile_lazy_ok(tools, 1);
    REQUIRE(t);
    check_pairs(t, between, same, NULL, sizeof between / sizeof *between, 2);
    sd_tcall_free(t);
}

/* Random replies: free bytes from an alphabet rich in the trigger's (partial triggers, and now and
 * then whole ones by chance), the trigger fed whole at times; once a call has opened, only
 * whitespace and more triggers (other bytes must be rejected; a trigger only while calls remain),
 * the calls walked over their allowed bytes. The text may end at any free byte or between calls;
 * each call in it parses as one of the tools'. */
#define LAZY_ALPHA "<tool_call>/\n x\xc3\xa9"

static size_t lazy_walk(const sd_tcall *t, int max_calls, uint64_t *rng, char *buf, size_t cap,
                        int *ret_calls)
{
    tstate st;
    unsigned char allowed[256];
    sd_tcall_init(t, &st);
    size_t n = 0, free_left = 20 + rnd(rng, 400);
    int calls = 0, ws = 0; /* ws: whitespace bytes since the last call */
    while (n + sizeof SD_TCALL_LAZY_OPEN < cap) {
        if (sd_tcall_complete(t, &st)) /* the last call that may come: the end */
            break;
        int k = allowed_bytes(t, &st, allowed);
        CHECK_MSG(k > 0, "a dead end after %zu bytes", n);
        if (k == 0)
            return 0;
        if (!sd_tcall_can_end(t, &st)) { /* inside a call, or a trigger between calls */
            buf[n] = (char)allowed[rng_next(rng) % (unsigned)k];
            sd_tcall_step(t, &st, (unsigned char)buf[n++]);
            calls += sd_tcall_can_end(t, &st); /* it closed */
            ws = 0;
            continue;
        }
        if (free_left-- == 0)
            break;
        if (rnd(rng, 12) == 0) {
            int ok = sd_tcall_feed(t, &st, SD_TCALL_LAZY_OPEN, strlen(SD_TCALL_LAZY_OPEN)) == 0;
            CHECK_MSG(ok == (calls < max_calls), "the trigger after %d calls: %d", calls, ok);
            if (ok) {
                memcpy(buf + n, SD_TCALL_LAZY_OPEN, strlen(SD_TCALL_LAZY_OPEN));
                n += strlen(SD_TCALL_LAZY_OPEN);
            }
            continue;
        }
        const char *alpha = rnd(rng, 4) ? LAZY_ALPHA : "ab";
        char c = alpha[rnd(rng, (unsigned)strlen(alpha))];
        int ok = sd_tcall_step(t, &st, (unsigned char)c) == 0;
        if (ok)
            buf[n++] = c;
        if (calls > 0) { /* between calls: up to 4 bytes of whitespace, or a trigger's '<' */
            int space = c == ' ' || c == '\n';
            CHECK_MSG(ok == ((space && ws < 4) || c == '<'), "byte %02x after %d calls, %d spaces: %d",
                      (unsigned char)c, calls, ws, ok);
            ws += space && ok;
        } else /* free text before any call (one may open by chance: the '>' of a trigger) */
            CHECK_MSG(ok, "free byte %02x rejected", (unsigned char)c);
    }
    buf[n] = '\0';
    CHECK_MSG(sd_tcall_can_end(t, &st), "inside a call after %zu bytes", n);
    *ret_calls = calls;
    return n;
}

/* Each "<tool_call>\n...\n</tool_call>" of text as a call; returns how many. */
static int check_markup(const char *text, const char *const *names, int n_names)
{
    static const char open[] = SD_TCALL_LAZY_OPEN "\n", close[] = "\n" SD_TCALL_LAZY_CLOSE;
    int n = 0;
    for (const char *p = strstr(text, open); p; p = strstr(p, open)) {
        p += strlen(open);
        const char *e = strstr(p, close);
        CHECK_MSG(e, "a call left open: %s", text);
        if (!e)
            break;
        json_error_t je;
        json_t *v = json_loadb(p, (size_t)(e - p), JSON_DECODE_INT_AS_REAL, &je);
        CHECK_MSG(v, "does not parse (%s): %.*s", je.text, (int)(e - p), p);
        if (v)
            check_call(v, names, n_names, text);
        json_decref(v);
        n++;
        p = e + strlen(close);
    }
    return n;
}

static void test_lazy_random_walks(void)
{
    static const char *const names[] = {"get", "get_time", "get_weather", "ping", "Z-9"};
    static char buf[WALK_MAX];
    uint64_t rng = 0xC0FFEEull;
    int total = 0, capped = 0;
    for (int parallel = 0; parallel < 2; parallel++) {
        sd_tcall *t = compile_lazy_ok(tools, parallel);
        REQUIRE(t);
        int max = parallel ? SD_TCALL_MAX_CALLS : 1;
        for (int w = 0; w < 300; w++) {
            int calls = 0;
            size_t n = lazy_walk(t, max, &rng, buf, sizeof buf, &calls);
            if (!n)
                break;
            int end = 0;
            CHECK_MSG(lazy_reject(t, buf, &end) == -1 && end, "walk %d not taken again: %s", w, buf);
            CHECK_MSG(check_markup(buf, names, 5) == calls, "walk %d: %d calls made: %s", w, calls, buf);
            CHECK(calls <= max);
            total += calls;
            capped += calls == max;
        }
        sd_tcall_free(t);
    }
    CHECK(total > 100 && capped > 10);
    fprintf(stderr, "  600 lazy walks: %d calls, %d walks reached their limit\n", total, capped);
}

/* ---- lazy mode over a real vocabulary ----------------------------------------------------------- */

static void lazy_mask_states(struct qvocab *qv, sd_tcall *const t[2])
{
    const sd_jval v = tcall_jval(t[0], 1), v1 = tcall_jval(t[1], 2);
    int32_t n_plain = 0, n_free = 0, trig = token_of(qv->tok, qv->n, SD_TCALL_LAZY_OPEN);
    for (int32_t id = 0; id < qv->n; id++) {
        size_t len = 0;
        n_plain += sd_tok_token_bytes(qv->tok, id, &len) && len > 0 && !sd_tok_is_special(qv->tok, id);
    }
    CHECK_MSG(trig >= 0 && !sd_tok_is_special(qv->tok, trig), "no non-special token %s", SD_TCALL_LAZY_OPEN);
    tstate st;
    sd_tcall_init(t[0], &st);
    double cold, warm, cold_call, warm_call;
    time_apply(qv, &v, &st, &cold, &warm);
    int32_t n = mask_vs_brute(qv, &v, &st, &n_free);
    CHECK_MSG(n_free > n_plain / 100 * 99 && allowed(qv, qv->eos) && allowed(qv, trig),
              "free text: %d of %d tokens, eos %d", n_free, n_plain, allowed(qv, qv->eos));
    /* after the trigger (as its token): a newline, then the call's bytes */
    const char *after = "Let me check." SD_TCALL_LAZY_OPEN;
    REQUIRE(sd_tcall_feed(t[0], &st, after, strlen(after)) == 0);
    time_apply(qv, &v, &st, &cold_call, &warm_call);
    int32_t n_call = mask_vs_brute(qv, &v, &st, &n_free);
    CHECK_MSG(n_call > 0 && n_call < 100 && !allowed(qv, qv->eos) &&
                  allowed(qv, token_of(qv->tok, qv->n, "\n")),
              "after the trigger: %d tokens", n_call);
    /* inside a string argument (the plain fast path), then at the call's end */
    const char *in_str = "\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/";
    REQUIRE(sd_tcall_feed(t[0], &st, in_str, strlen(in_str)) == 0 && sd_tcall_in_plain_string(t[0], &st));
    CHECK(mask_vs_brute(qv, &v, &st, &n_free) > n_plain / 2 && !allowed(qv, qv->eos));
    REQUIRE(sd_tcall_feed(t[0], &st, "\"}}\n</tool_call", 15) == 0);
    CHECK(mask_vs_brute(qv, &v, &st, &n_free) > 0 && !allowed(qv, qv->eos));
    REQUIRE(sd_tcall_step(t[0], &st, '>') == 0 && sd_tcall_can_end(t[0], &st));
    /* between calls: whitespace, the next trigger (its token, or its start), eos */
    int32_t n_between = mask_vs_brute(qv, &v, &st, &n_free);
    CHECK_MSG(n_between > 1 && n_between < 2000 && allowed(qv, trig) && allowed(qv, qv->eos) &&
                  allowed(qv, token_of(qv->tok, qv->n, "\n")),
              "between calls: %d tokens", n_between);
    /* one call at most: after it only eos */
    sd_tcall_init(t[1], &st);
    const char *one = SD_TCALL_LAZY_OPEN "\n{\"name\": \"ping\", \"arguments\": {}}\n" SD_TCALL_LAZY_CLOSE;
    REQUIRE(sd_tcall_feed(t[1], &st, one, strlen(one)) == 0);
    int32_t n_done = mask_vs_brute(qv, &v1, &st, &n_free);
    CHECK_MSG(n_done == 1 && allowed(qv, qv->eos), "after the last call: %d tokens", n_done);
    fprintf(
        stderr,
        "  qwen3 lazy (%d tokens, %d non-special): free text allows %d (apply cold %.2f ms, cached %.1f us); "
        "after the trigger %d (cold %.2f ms, cached %.1f us); between calls %d; after the last call %d\n",
        qv->n, n_plain, n, cold, 1e3 * warm, n_call, cold_call, 1e3 * warm_call, n_between, n_done);
}

/* The shared Qwen3 tokenizer, where "<tool_call>" is one (non-special) token: from free text
 * almost every token may come, eos too; after the trigger only what continues the call; once the
 * calls are used up, not the trigger's token. Every set equals the brute-force one. */
static void test_lazy_mask_qwen3(void)
{
    const char *path = sd_test_shared("tokenizers/qwen3/tokenizer.json");
    if (!path)
        SKIP("../shared/tokenizers/qwen3 absent");
    struct qvocab qv;
    sd_tcall *t[2] = {compile_lazy_ok(tools, 1), compile_lazy_ok(tools, 0)};
    if (qvocab_open(&qv, path) == 0 && t[0] && t[1])
        lazy_mask_states(&qv, t);
    sd_tcall_free(t[0]);
    sd_tcall_free(t[1]);
    qvocab_close(&qv);
}

int main(void)
{
    RUN(test_lazy_accepts);
    RUN(test_lazy_think);
    RUN(test_lazy_rejects);
    RUN(test_lazy_limits);
    RUN(test_lazy_canonical);
    RUN(test_lazy_random_walks);
    RUN(test_lazy_mask_qwen3);
    return sd_test_done();
}
