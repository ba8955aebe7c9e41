/* test_jsonc: the JSON-object validator of JSON mode (engine/jsonc.h) against hand-written
 * and random documents (whole, byte by byte, in random splits) and an independent
 * recursive-descent checker (jsonc_ref.h); the byte at which invalid text is rejected; the
 * depth and whitespace limits; equal positions giving equal bytes (the mask's cache key). */
#include "tests/engine/jsonc_ref.h"

/* ---- the validator ----------------------------------------------------------------------- */

/* Feeds text in random pieces; checks every piece is accepted and completion comes only with
 * the last byte. */
static int feed_split(const char *s, size_t n, uint64_t *rng, int max_piece)
{
    sd_jfsm m;
    sd_jfsm_init(&m);
    for (size_t i = 0; i < n;) {
        size_t k = 1 + rnd(rng, (unsigned)max_piece);
        k = k > n - i ? n - i : k;
        if (sd_jfsm_complete(&m) || sd_jfsm_feed(&m, s + i, k))
            return 0;
        i += k;
    }
    return sd_jfsm_complete(&m);
}

static const char *const valid_docs[] = {
    "{}",
    " \t\r\n{ }",
    "{\"a\":1}",
    "{\"\":\"\"}",
    "{\"a\":[1,2,3],\"b\":{\"c\":[[],{}],\"d\":[{\"e\":null}]}}",
    "{\"n\":[0,-0,1,-1,10,0.5,-0.5,1.25e10,1E+2,1e-2,0e0,-0.0E-0,123456789012345678901234567890]}",
    "{\"t\":true,\"f\":false,\"z\":null}",
    "{\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0000\\u00e9\\u20AC\\uD83D\\uDE00\\uFFFF\"}",
    "{\"\xc3\xa9\":"
    "\"\xe2\x82\xac\xf0\x9f\x98\x80\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\xc2\x80\xe0\xa0\x80\"}",
    "{ \"a\" : [ 1 , 2 ] , \"b\" : { } }",
    "{\"a\":1 ,\"b\":-2\t}",
    "{\"a\":[1]\n}",
    "{\"deep\":[[[[[[[[[[{\"x\":[[[[1]]]]}]]]]]]]]]]}",
    "{\"sp\":\"                                                  many spaces in a string\"}",
};

static void test_jfsm_accepts_valid(void)
{
    uint64_t rng = 42;
    for (size_t k = 0; k < sizeof valid_docs / sizeof *valid_docs; k++) {
        const char *s = valid_docs[k];
        size_t n = strlen(s);
        CHECK_MSG(ref_valid(s, n), "the reference rejects doc %zu", k);
        sd_jfsm m;
        sd_jfsm_init(&m);
        CHECK_MSG(sd_jfsm_feed(&m, s, n) == 0 && sd_jfsm_complete(&m), "doc %zu whole", k);
        CHECK_MSG(feed_split(s, n, &rng, 1), "doc %zu byte by byte", k);
        for (int rep = 0; rep < 50; rep++)
            CHECK_MSG(feed_split(s, n, &rng, 7), "doc %zu in random pieces", k);
    }
}

/* Random documents with every construct, UTF-8 split anywhere across feeds. */
static void test_jfsm_accepts_random(void)
{
    static struct gen g;
    uint64_t rng = 7;
    for (uint64_t seed = 1; seed <= 2000; seed++) {
        size_t n = gen_doc(&g, seed);
        REQUIRE(!g.overflow);
        CHECK_MSG(ref_valid(g.b, n), "the reference rejects seed %llu: %.*s", (unsigned long long)seed,
                  (int)n, g.b);
        CHECK_MSG(feed_split(g.b, n, &rng, 1), "seed %llu byte by byte", (unsigned long long)seed);
        CHECK_MSG(feed_split(g.b, n, &rng, 9), "seed %llu: %.*s", (unsigned long long)seed, (int)n, g.b);
    }
}

/* Index of the first byte rejected, fed one at a time, or -1; a rejected feed leaves m as it
 * was. */
static long reject_at(const char *s, size_t n)
{
    sd_jfsm m, before;
    sd_jfsm_init(&m);
    for (size_t i = 0; i < n; i++) {
        before = m;
        if (sd_jfsm_feed(&m, s + i, 1)) {
            CHECK_MSG(memcmp(&m, &before, sizeof m) == 0, "a rejected feed changed the state");
            return (long)i;
        }
    }
    return -1;
}

static void test_jfsm_rejects(void)
{
    static const struct {
        const char *s;
        long at;
    } cases[] = {
        {"{\"a\":01}", 6},
        {"{\"a\":-01}", 7},
        {"{\"a\":1.}", 7},
        {"{\"a\":-}", 6},
        {"{\"a\":1e}", 7},
        {"{\"a\":1.5e+}", 10},
        {"{\"a\":.5}", 5},
        {"{\"a\":+1}", 5},
        {"{\"a\":1.e5}", 7},
        {"{\"a\":\"\\x\"}", 7},
        {"{\"a\":\"\\u12G4\"}", 10},
        {"{\"a\":\"\x01\"}", 6},
        {"{\"a\":\"\n\"}", 6},
        {"{\"a\":\"\t\"}", 6},
        {"{\"a\":\"\xc0\x80\"}", 6},
        {"{\"a\":\"\xc1\xbf\"}", 6},
        {"{\"a\":\"\xed\xa0\x80\"}", 7},
        {"{\"a\":\"\xf5\x80\"}", 6},
        {"{\"a\":\"\xff\"}", 6},
        {"{\"a\":\"\xe0\x80\x80\"}", 7},
        {"{\"a\":\"\xf0\x80\x80\x80\"}", 7},
        {"{\"a\":\"\xf4\x90\x80\x80\"}", 7},
        {"{\"a\":\"\xc3\"}", 7},
        {"{\"a\":\"\x80\"}", 6},
        {"{\"a\":\"\xe2\x82\"}", 8},
        {"{\"a\":1,}", 7},
        {"{\"a\":[1,]}", 8},
        {"{\"a\":[,1]}", 6},
        {"{\"a\" 1}", 5},
        {"{\"a\":1 \"b\":2}", 7},
        {"{a:1}", 1},
        {"{,}", 1},
        {"{\"a\":1,,}", 7},
        {"{\"a\"}", 4},
        {"[1]", 0},
        {"\"x\"", 0},
        {"1", 0},
        {"true", 0},
        {"x{}", 0},
        {"\xef\xbb\xbf{}", 0},
        {"{\"a\":tru}", 8},
        {"{\"a\":nul1}", 8},
        {"{\"a\":True}", 5},
        {"{\"a\":1}}", 7},
        {"{\"a\":1} ", 7},
        {"{} {}", 2},
        {"{\"a\":1]", 6},
        {"{\"a\":[1}", 7},
        {"{\"a\":\"\\uDC00\"}", 9},
        {"{\"a\":\"\\uD800x\"}", 12},
        {"{\"a\":\"\\uD800\\u0041\"}", 14},
        {"{\"a\":\"\\uD800\\uD800\"}", 15},
        {"{\"a\":1\xc2\xa0}", 6},
        {"{\"a\":\x01}", 5},
        {"{\"a\":1\f}", 6},
        {"{\"a\":\"\\U0041\"}", 7},
        {"{\"a\":00}", 6},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        size_t n = strlen(cases[k].s);
        long at = reject_at(cases[k].s, n);
        CHECK_MSG(at == cases[k].at, "case %zu (%s): rejected at %ld, want %ld", k, cases[k].s, at,
                  cases[k].at);
        CHECK_MSG(!ref_valid(cases[k].s, n), "the reference accepts case %zu", k);
        sd_jfsm m;
        sd_jfsm_init(&m);
        CHECK(sd_jfsm_feed(&m, cases[k].s, n) == -1);
    }
}

/* Random byte edits of valid documents: the validator (whole text, then complete) agrees with
 * the reference checker on every one. */
static void test_jfsm_matches_reference(void)
{
    static struct gen g;
    static const char alphabet[] =
        "{}[]\",:\\ 0123456789-+.eEtrufalsn\x01\x7f\x80\xbf\xc3\xe0\xed\xf0\xf4\xff";
    uint64_t rng = 99;
    int n_valid = 0;
    for (uint64_t seed = 1; seed <= 20000; seed++) {
        size_t n = gen_doc(&g, seed);
        n = mutate_text(g.b, n, sizeof g.b, alphabet, sizeof alphabet - 1, &rng);
        sd_jfsm m;
        sd_jfsm_init(&m);
        int fsm = sd_jfsm_feed(&m, g.b, n) == 0 && sd_jfsm_complete(&m);
        int ref = ref_valid(g.b, n);
        n_valid += ref;
        CHECK_MSG(fsm == ref, "seed %llu: fsm %d, reference %d: %.*s", (unsigned long long)seed, fsm, ref,
                  (int)n, g.b);
    }
    CHECK_MSG(n_valid > 100 && n_valid < 19000, "%d of the edits stayed valid: a weak test", n_valid);
}

static void test_jfsm_depth_limit(void)
{
    /* {"k":{"k":{... and {"k":[[[...: the top-level object is level 1 */
    for (int obj = 0; obj < 2; obj++) {
        char s[1024];
        size_t n = (size_t)sprintf(s, obj ? "{" : "{\"k\":");
        for (int d = 1; d < SD_JFSM_MAX_DEPTH; d++)
            n += (size_t)sprintf(s + n, obj ? "\"k\":{" : "[");
        sd_jfsm m;
        sd_jfsm_init(&m);
        CHECK(sd_jfsm_feed(&m, s, n) == 0 && m.depth == SD_JFSM_MAX_DEPTH);
        sd_jfsm deep = m;
        const char *const deeper[] = {obj ? "\"k\":{" : "[", obj ? "\"k\":[" : "{", obj ? "\"k\":1" : "1"};
        for (int k = 0; k < 3; k++)
            CHECK_MSG(sd_jfsm_feed(&deep, deeper[k], strlen(deeper[k])) == (k < 2 ? -1 : 0), "%s", deeper[k]);
        for (int d = 1; d < SD_JFSM_MAX_DEPTH; d++)
            CHECK(sd_jfsm_feed(&m, obj ? "}" : "]", 1) == 0 && !sd_jfsm_complete(&m));
        CHECK(sd_jfsm_feed(&m, "}", 1) == 0 && sd_jfsm_complete(&m));
    }
}

/* Runs of 32 whitespace bytes pass wherever whitespace may go; the 33rd byte is rejected; any
 * other byte starts a new run; whitespace inside strings is text, not counted. */
static void test_jfsm_whitespace_limit(void)
{
    static const char *const before[] = {
        "",          "{",          "{\"a\"",       "{\"a\":",     "{\"a\":1",    "{\"a\":[",
        "{\"a\":[1", "{\"a\":[1,", "{\"a\":1.5e3", "{\"a\":true", "{\"a\":\"x\""};
    char ws[SD_JFSM_MAX_WS + 2];
    for (int i = 0; i < SD_JFSM_MAX_WS + 1; i++)
        ws[i] = " \t\n\r"[i % 4];
    for (size_t k = 0; k < sizeof before / sizeof *before; k++) {
        sd_jfsm m;
        sd_jfsm_init(&m);
        REQUIRE(sd_jfsm_feed(&m, before[k], strlen(before[k])) == 0);
        sd_jfsm ok = m;
        CHECK_MSG(sd_jfsm_feed(&ok, ws, SD_JFSM_MAX_WS) == 0, "after '%s'", before[k]);
        CHECK_MSG(sd_jfsm_feed(&ok, " ", 1) == -1, "33 bytes after '%s'", before[k]);
        CHECK_MSG(sd_jfsm_feed(&m, ws, SD_JFSM_MAX_WS + 1) == -1, "after '%s'", before[k]);
    }
    sd_jfsm m;
    sd_jfsm_init(&m);
    CHECK(sd_jfsm_feed(&m, ws, SD_JFSM_MAX_WS) == 0 && sd_jfsm_feed(&m, "{", 1) == 0);
    CHECK(sd_jfsm_feed(&m, ws, SD_JFSM_MAX_WS) == 0 && sd_jfsm_feed(&m, "\"", 1) == 0);
    char sp[200];
    memset(sp, ' ', sizeof sp);
    CHECK(sd_jfsm_feed(&m, sp, sizeof sp) == 0 && sd_jfsm_feed(&m, "\"", 1) == 0);
    CHECK(sd_jfsm_feed(&m, ws, SD_JFSM_MAX_WS) == 0 && sd_jfsm_feed(&m, ":", 1) == 0);
}

/* After the closing brace nothing is accepted, not even whitespace: the sequence must end. */
static void test_jfsm_complete(void)
{
    sd_jfsm m;
    sd_jfsm_init(&m);
    CHECK(!sd_jfsm_complete(&m));
    CHECK(sd_jfsm_feed(&m, "{\"a\":{}", 7) == 0 && !sd_jfsm_complete(&m));
    CHECK(sd_jfsm_feed(&m, "}", 1) == 0 && sd_jfsm_complete(&m));
    for (int c = 0; c < 256; c++) {
        char b = (char)c;
        CHECK_MSG(sd_jfsm_feed(&m, &b, 1) == -1, "byte %d after completion", c);
    }
    CHECK(sd_jfsm_feed(&m, "", 0) == 0 && sd_jfsm_complete(&m));
}

/* The struct is small, and states reached by different texts are equal byte for byte when
 * they accept the same continuations (the mask's cache relies on it). */
static void test_jfsm_canonical(void)
{
    static const char *const pairs[][2] = {
        {"{\"a\":1,", "{\"bb\":[true,{\"x\":[]}],"},
        {"{\"a\":\"x", "{\"b\":\"\\u00e9\\uD83D\\uDE00\xc3\xa9y"},
        {"{\"a\":[1,2", "{\"z\":[-3"},
        {"{\"a\":[1],\"b\":{\"c\":2}", "{\"x\":true"},
        {"{\"a\":[{\"b\":null}", "{\"q\":[\"s\""},
        {"{\"a\":1.5", "{\"a\":-0.25"},
        {"{\"a\":\"\xe2\x82", "{\"a\":\"\xe4\xb8"},
    };
    CHECK(sizeof(sd_jfsm) <= 32);
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        sd_jfsm a, b;
        sd_jfsm_init(&a);
        sd_jfsm_init(&b);
        REQUIRE(sd_jfsm_feed(&a, pairs[k][0], strlen(pairs[k][0])) == 0);
        REQUIRE(sd_jfsm_feed(&b, pairs[k][1], strlen(pairs[k][1])) == 0);
        CHECK_MSG(memcmp(&a, &b, sizeof a) == 0, "pair %zu differs", k);
    }
}

int main(void)
{
    RUN(test_jfsm_accepts_valid);
    RUN(test_jfsm_accepts_random);
    RUN(test_jfsm_rejects);
    RUN(test_jfsm_matches_reference);
    RUN(test_jfsm_depth_limit);
    RUN(test_jfsm_whitespace_limit);
    RUN(test_jfsm_complete);
    RUN(test_jfsm_canonical);
    return sd_test_done();
}
