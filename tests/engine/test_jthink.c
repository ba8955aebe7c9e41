/* test_jthink: the validator that lets a reasoning model think before a constraint holds
 * (engine/jthink.h) — around JSON mode, a forced tool call and free text: an optional or an
 * already open <think> block, "</think>" found across near misses, at most 4 whitespace bytes
 * after it, the end never inside the block, a forced close that admits only the rest of the tag,
 * canonical states, and, on the bundled tokenizer's vocabulary, the mask inside the block and
 * after a forced close. */
#include "engine/jthink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/tokenizer.h"
#include "engine/toolcall.h"
#include "tests/harness.h"

#define TINY "models/tiny"

typedef struct wrapped {
    sd_jval in, jv;
    uint64_t st[SD_JVAL_MAX_STATE / 8];
} wrapped;

/* w wraps inner (init: its inner state's initialiser, NULL for zeros), started per `start`. */
static void wrap(wrapped *w, const sd_jval *inner, sd_think start)
{
    w->in = *inner;
    REQUIRE(sd_jthink_wrap(&w->in, &w->jv) == 0);
    memset(w->st, 0, sizeof w->st);
    sd_jthink_init(w->st, start);
    if (inner->step == sd_jval_json.step)
        sd_jfsm_init(sd_jthink_inner(w->st));
}

/* Feeds n bytes one by one: 0, or -1 at the first rejected byte. */
static int feed_n(wrapped *w, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (w->jv.step(w->jv.ctx, w->st, (unsigned char)b[i]) < 0)
            return -1;
    return 0;
}

static int feed(wrapped *w, const char *text)
{
    return feed_n(w, text, strlen(text));
}

static int complete(const wrapped *w)
{
    return w->jv.complete(w->jv.ctx, w->st);
}

static int can_end(const wrapped *w)
{
    return w->jv.can_end(w->jv.ctx, w->st);
}

/* Whether text, from the start, is a whole text (JSON mode: the object closed). */
static int whole(const sd_jval *inner, sd_think start, const char *text)
{
    wrapped w;
    wrap(&w, inner, start);
    return feed(&w, text) == 0 && complete(&w);
}

static void test_json_mode(void)
{
    const sd_jval *j = &sd_jval_json;
    CHECK(whole(j, SD_THINK_MAY, "{\"a\": 1}")); /* no block at all */
    CHECK(
        whole(j, SD_THINK_MAY, "<think>plan: {\"b\"</think>\n\n{\"a\": 1}")); /* braces inside are thoughts */
    CHECK(whole(j, SD_THINK_OPEN, "step 1 </thin </think>{}"));               /* a near miss, then the tag */
    CHECK(whole(j, SD_THINK_OPEN, "x<</think>{}"));                           /* '<' restarts the tag */
    CHECK(!whole(j, SD_THINK_OPEN, "{}"));                                    /* inside the block: thoughts */
    wrapped w;
    wrap(&w, j, SD_THINK_MAY);
    CHECK(feed(&w, "<thx") == -1); /* not the tag, and JSON never opens with '<' */
    wrap(&w, j, SD_THINK_MAY);
    CHECK(feed(&w, "<think>a</think>") == 0 && !can_end(&w) && !complete(&w));
    CHECK(feed(&w, " \n\t\n") == 0 && feed(&w, "{\"k\": [1]}") == 0 && complete(&w));
    /* the end is never allowed inside the block */
    wrap(&w, j, SD_THINK_OPEN);
    CHECK(!can_end(&w) && sd_jthink_thinking(w.st) && w.jv.in_plain_string(w.jv.ctx, w.st));
    CHECK(feed(&w, "\"quotes\" and \\ escapes\n") == 0 && sd_jthink_thinking(w.st));
    CHECK(feed(&w, "</think>") == 0 && !sd_jthink_thinking(w.st) && !w.jv.in_plain_string(w.jv.ctx, w.st));
    CHECK(w.jv.id == ((uint64_t)1 << 63) && w.jv.size == sizeof(sd_jfsm) + SD_JTHINK_HEADER);
}

/* A forced tool list's sd_jval, as engine/jv_cache.c builds it. */
static int tc_step(const void *ctx, void *state, unsigned byte)
{
    return sd_tcall_step(ctx, state, byte);
}

static int tc_complete(const void *ctx, const void *state)
{
    return sd_tcall_complete(ctx, state);
}

static int tc_can_end(const void *ctx, const void *state)
{
    return sd_tcall_can_end(ctx, state);
}

static int tc_never(const void *ctx, const void *state)
{
    (void)ctx, (void)state;
    return 0;
}

static void test_forced_call(void)
{
    static const char spec[] = "[{\"name\": \"f\"}]";
    sd_tcall *tc = NULL;
    REQUIRE(sd_tcall_compile(&tc, spec, strlen(spec), 0, SD_TCALL_FORCED, NULL) == 0);
    const sd_jval in = {tc, 7, sd_tcall_state_size(tc), tc_step, tc_complete, tc_can_end, tc_never};
    static const char call[] = "{\"name\": \"f\", \"arguments\": {}}";
    for (int gap = 0; gap <= SD_JTHINK_MAX_GAP + 1; gap++) {
        wrapped w;
        wrap(&w, &in, SD_THINK_MAY);
        sd_tcall_init(tc, sd_jthink_inner(w.st));
        char text[128];
        snprintf(text, sizeof text, "<think>which tool?</think>%.*s%s", gap, "\n\n\n\n\n\n", call);
        int ok = feed(&w, text) == 0 && complete(&w);
        CHECK_MSG(ok == (gap <= SD_JTHINK_MAX_GAP), "%d whitespace bytes after the block: %d", gap, ok);
    }
    CHECK((sd_jthink_wrap(&in, &(sd_jval){0}) == 0));
    sd_jval big = in;
    big.size = SD_JVAL_MAX_STATE - SD_JTHINK_HEADER + 8;
    sd_jval out;
    CHECK(sd_jthink_wrap(&big, &out) == SD_EINVAL);
    sd_tcall_free(tc);
}

/* The forced close: inside the block only the rest of "</think>" may follow, also when part of it
 * was written; outside the block it changes nothing. */
static void test_close(void)
{
    wrapped w;
    wrap(&w, &sd_jval_free, SD_THINK_OPEN);
    CHECK(feed(&w, "so far </th") == 0);
    sd_jthink_close(w.st);
    CHECK(sd_jthink_thinking(w.st) && !can_end(&w) && !w.jv.in_plain_string(w.jv.ctx, w.st));
    wrapped c = w;
    CHECK(feed(&c, "x") == -1);
    c = w;
    CHECK(feed(&c, "</think>") == -1); /* the tag goes on where it was, not again */
    CHECK(feed(&w, "ink>") == 0 && !sd_jthink_thinking(w.st) && can_end(&w));
    CHECK(feed(&w, "\n\nanything <think> at all") == 0 && can_end(&w)); /* free text after the block */
    unsigned char before[sizeof w.st];
    memcpy(before, w.st, sizeof before);
    sd_jthink_close(w.st);
    CHECK(memcmp(before, w.st, sizeof before) == 0);
    /* a reply that may think, closed before it opened the block: unchanged */
    wrap(&w, &sd_jval_json, SD_THINK_MAY);
    sd_jthink_close(w.st);
    CHECK(feed(&w, "{}") == 0 && complete(&w));
}

/* Free text may begin like the tag and turn away: what was matched is the text's. */
static void test_free(void)
{
    wrapped w;
    wrap(&w, &sd_jval_free, SD_THINK_MAY);
    CHECK(can_end(&w)); /* an empty answer */
    CHECK(feed(&w, "<thin") == 0 && !can_end(&w) && !sd_jthink_past(w.st));
    CHECK(feed(&w, "g is free") == 0 && can_end(&w) && !sd_jthink_thinking(w.st) && sd_jthink_past(w.st));
    wrap(&w, &sd_jval_free, SD_THINK_OPEN); /* past the block once its tag has closed */
    CHECK(feed(&w, "plan </think") == 0 && !sd_jthink_past(w.st) && feed(&w, ">") == 0 &&
          sd_jthink_past(w.st));
    CHECK(sd_jval_free.id == SD_JVAL_FREE_ID && w.jv.id == (SD_JVAL_FREE_ID | (uint64_t)1 << 63));
}

/* Equal places give equal states: the mask's cache depends on it. */
static void test_canonical(void)
{
    static const char *const pairs[][2] = {
        {"abc", "de f"},                               /* inside the block */
        {"a </th", "bcd </th"},                        /* inside, "</th" matched */
        {"x</think>\n", "yy</think>\n"},               /* after it, one whitespace byte */
        {"x</think>\n {", "yyy</thinks </think>\n {"}, /* in the JSON */
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        wrapped a, b;
        wrap(&a, &sd_jval_json, SD_THINK_OPEN);
        wrap(&b, &sd_jval_json, SD_THINK_OPEN);
        CHECK(feed(&a, pairs[i][0]) == 0 && feed(&b, pairs[i][1]) == 0);
        CHECK_MSG(memcmp(a.st, b.st, a.jv.size) == 0, "'%s' / '%s'", pairs[i][0], pairs[i][1]);
    }
    wrapped a, b;
    wrap(&a, &sd_jval_json, SD_THINK_OPEN);
    wrap(&b, &sd_jval_json, SD_THINK_OPEN);
    CHECK(feed(&a, "a </th") == 0 && feed(&b, "a </t") == 0 && memcmp(a.st, b.st, a.jv.size) != 0);
}

/* On a real vocabulary: inside the block every non-special token but end-of-sequence is allowed;
 * after a forced close, exactly the tokens that go on with "</think>" (one is the whole tag's
 * first byte, at least). */
static void test_mask(void)
{
    if (access(TINY "/tokenizer.json", R_OK) != 0)
        SKIP(TINY "/tokenizer.json absent");
    sd_tokenizer *t = NULL;
    sd_jmask *jm = NULL;
    REQUIRE(sd_tok_load(&t, TINY, NULL) == 0);
    REQUIRE(sd_jmask_init(&jm, t, NULL) == 0);
    const int32_t n = sd_tok_vocab_size(t), eos = sd_tok_eos_id(t);
    uint64_t *bits = calloc(((size_t)n + 63) / 64, 8);
    REQUIRE(bits);
    wrapped w;
    wrap(&w, &sd_jval_json, SD_THINK_OPEN);
    int32_t allowed = sd_jmask_allowed_v(jm, &w.jv, w.st, &eos, 1, n, bits);
    int32_t want = 0;
    for (int32_t id = 0; id < n; id++) { /* by brute force: every token's bytes through the validator */
        size_t len = 0;
        const char *b = sd_tok_token_bytes(t, id, &len);
        wrapped c = w;
        int ok = id != eos && !sd_tok_is_special(t, id) && b && len > 0 && feed_n(&c, b, len) == 0;
        want += ok;
        if (ok != (int)(bits[id >> 6] >> (id & 63) & 1)) {
            CHECK_MSG(0, "token %d inside the block: allowed %d", id, !ok);
            break;
        }
    }
    CHECK_MSG(allowed == want && want > n / 2, "%d allowed of %d (want %d)", allowed, n, want);
    CHECK(feed(&w, "done </") == 0);
    sd_jthink_close(w.st);
    allowed = sd_jmask_allowed_v(jm, &w.jv, w.st, &eos, 1, n, bits);
    int bad = 0;
    for (int32_t id = 0; id < n; id++) {
        if (!(bits[id >> 6] >> (id & 63) & 1))
            continue;
        size_t len = 0;
        const char *b = sd_tok_token_bytes(t, id, &len);
        wrapped c = w; /* the rest of the tag first; after it, whitespace or the JSON may follow */
        bad += !b || len == 0 || memcmp(b, "think>", len < 6 ? len : 6) != 0 || feed_n(&c, b, len) != 0;
    }
    CHECK_MSG(allowed > 0 && bad == 0, "%d allowed after the close, %d not a piece of \"think>\"", allowed,
              bad);
    free(bits);
    sd_jmask_free(jm);
    sd_tok_free(t);
}

int main(void)
{
    RUN(test_json_mode);
    RUN(test_forced_call);
    RUN(test_close);
    RUN(test_free);
    RUN(test_canonical);
    RUN(test_mask);
    return sd_test_done();
}
