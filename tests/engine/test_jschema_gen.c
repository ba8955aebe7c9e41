/* test_jschema_gen: the JSON Schema validator (engine/jschema.h) on random documents generated
 * from each schema by the test's own reading of it; random edits, where whatever the validator
 * accepts must parse with jansson and pass an independent recursive checker (jschema_ref.h);
 * canonical state bytes; the plain-string fast path. */
#include "tests/engine/jschema_ref.h"

/* ---- random documents and random edits ------------------------------------------------------- */

/* One of the test's schemas, compiled and parsed (for the generator and the checker). */
static int fixture(size_t k, sd_jschema **s, struct gen *g)
{
    *s = compile_ok(all_schemas[k]);
    g->root = json_loads(q(all_schemas[k]), 0, NULL);
    CHECK_MSG(g->root, "schema %zu does not parse", k);
    return *s && g->root ? 0 : -1;
}

static void fixture_free(sd_jschema *s, struct gen *g)
{
    sd_jschema_free(s);
    json_decref(g->root);
}

/* Bytes of the state past what is live (frames beyond depth, the tail to state_size) are 0. */
static int unused_zero(const sd_jschema *s, const tstate *st)
{
    const unsigned char *b = (const unsigned char *)st;
    size_t idx = sizeof st->h + 2u * s->depth;
    for (size_t i = sizeof st->h + 2u * st->h.depth; i < idx; i++)
        if (b[i])
            return 0;
    for (size_t i = idx + st->h.depth; i < sd_jschema_state_size(s); i++)
        if (b[i])
            return 0;
    return st->h.zero == 0;
}

static void test_random_documents(void)
{
    static struct gen g;
    uint64_t rng = 11;
    for (size_t k = 0; k < N_SCHEMAS; k++) {
        sd_jschema *s;
        if (fixture(k, &s, &g))
            return fixture_free(s, &g);
        for (uint64_t seed = 1; seed <= 1500; seed++) {
            size_t n = gen_doc(&g, seed);
            CHECK_MSG(ref_valid(g.root, g.b, n) == 1, "schema %zu seed %llu: the checker rejects %.*s", k,
                      (unsigned long long)seed, (int)n, g.b);
            CHECK_MSG(accepts(s, g.b, n, &rng, 1), "schema %zu seed %llu byte by byte: %.*s", k,
                      (unsigned long long)seed, (int)n, g.b);
            CHECK_MSG(accepts(s, g.b, n, &rng, 9), "schema %zu seed %llu in pieces", k,
                      (unsigned long long)seed);
            tstate st;
            sd_jschema_init(s, &st);
            for (size_t i = 0; i < n && sd_jschema_step(s, &st, (unsigned char)g.b[i]) == 0; i++)
                CHECK_MSG(unused_zero(s, &st), "schema %zu seed %llu: stale bytes after %zu", k,
                          (unsigned long long)seed, i);
        }
        fixture_free(s, &g);
    }
}

/* Random byte edits of valid documents: whatever the validator reads as a whole document is valid
 * JSON that passes the checker; enough edits must still be accepted for this to mean something. */
static void test_random_edits(void)
{
    static struct gen g;
    static const char alphabet[] = "{}[]\",:\\ 0123456789-+.eEtrufalsnxyzabkpq\x01\x7f\x80\xc3\xa9\xf0";
    uint64_t rng = 99;
    for (size_t k = 0; k < N_SCHEMAS; k++) {
        sd_jschema *s;
        if (fixture(k, &s, &g))
            return fixture_free(s, &g);
        int n_accepted = 0, n_unreadable = 0, n_tries = 6000;
        for (int seed = 1; seed <= n_tries; seed++) {
            size_t n = gen_doc(&g, (uint64_t)seed + 7777);
            n = mutate_text(g.b, n, sizeof g.b, alphabet, sizeof alphabet - 1, &rng);
            if (!accepts(s, g.b, n, &rng, 0))
                continue;
            int ref = ref_valid(g.root, g.b, n);
            n_accepted += ref == 1;
            n_unreadable += ref == -1;
            CHECK_MSG(ref != 0, "schema %zu: accepted but invalid: %.*s", k, (int)n, g.b);
        }
        CHECK_MSG(n_accepted > n_tries / 50 && n_accepted < n_tries, "schema %zu: %d of %d edits accepted", k,
                  n_accepted, n_tries);
        CHECK_MSG(n_unreadable < n_accepted / 4, "schema %zu: %d numbers too large to check", k,
                  n_unreadable);
        fixture_free(s, &g);
    }
}

/* ---- canonical states and the plain-string fast path ----------------------------------------- */

/* Different texts that leave the validator in the same place give equal bytes; places that
 * differ give different bytes. */
static void test_canonical(void)
{
    static const struct {
        const char *schema, *a, *b;
        int equal;
    } pairs[] = {
        {person, "{'name':'abc", "{'name':'x\\u00e9\\ud83d\\ude00\xc3\xa9", 1},
        {person, "{'name':'a','age':1,'tags':['a'", "{'name':'bb','age':-20,'tags':['ab'", 1},
        {person, "{'name':'a','age':1,'tags':['a','b'", "{'name':'a','age':1,'tags':['b','ab'", 1},
        {person, "{'name':'a','age':1,'tags':['a'", "{'name':'a','age':1,'tags':['a','b'", 0},
        {person, "{'name':'a','age':1,'tags':['a'],'address':{'city':'x'}",
         "{'name':'a','age':12,'email':null,'tags':['ab'],'address':{'city':'yy','zip':'1'}", 1},
        {person, "{'name':'a','age':0", "{'name':'a','age':1", 0},
        {person, "{'name':'a','age':1", "{'name':'a','age':-120", 1},
        {person, "{'name':'a','age':1,'tags':['a'],'score':1.5",
         "{'name':'a','age':1,'tags':['b'],'score':-0.25", 1},
        {person, "{'name':'a','age':1,'tags':['a'],'address':{'city':'ab",
         "{'name':'a','age':1,'tags':['a'],'address':{'city':'\\u0041b", 1},
        {tree, "{'value':1,'children':[{'value':2,'children':[]}",
         "{'value':1,'children':[{'value':3,'children':[{'value':4,'children':[]}]}", 1},
        {nums, "[1,2", "[3", 0},
        {nums, "[1,2.5", "[3,4,5.5", 1},
        {"{'type':'string','minLength':2}", "'abc", "'abcdef", 1},
        {"{'type':'string','minLength':2}", "'a", "'ab", 0},
        {lits, "-3", "-3.", 0},
        {anyof, "[null", "['ab'", 1},
        {anyof, "[null,{'kind':'pt','x':1}", "[{'kind':'pt','x':-2.5,'y':1},'xyz'", 1},
        {keys, "{'a':null,'abc':null", "{'abc':null", 1},
        {keys, "{'req':[1", "{'req':[12", 0},
        {keys, "{'req':[12", "{'req':[-3", 1},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        sd_jschema *s = compile_ok(pairs[k].schema);
        tstate a, b;
        REQUIRE(s);
        CHECK_MSG(feed_from_start(s, &a, pairs[k].a) == 0, "pair %zu: a rejected", k);
        CHECK_MSG(feed_from_start(s, &b, pairs[k].b) == 0, "pair %zu: b rejected", k);
        int eq = memcmp(&a, &b, sd_jschema_state_size(s)) == 0;
        CHECK_MSG(eq == pairs[k].equal, "pair %zu: equal %d, want %d", k, eq, pairs[k].equal);
        sd_jschema_free(s);
    }
}

/* Whether a state claimed plain stays plain through every plain character: printable ASCII but
 * '"' and '\', and UTF-8 of each length including the edges of the special second-byte ranges
 * (in a string between their bytes). */
static int plain_holds(const sd_jschema *s, const tstate *st)
{
    static const char *const seqs[] = {"\xc2\x80",         "\xdf\xbf",         "\xe0\xa0\x80",
                                       "\xed\x9f\xbf",     "\xee\x80\x80",     "\xef\xbf\xbf",
                                       "\xf0\x90\x80\x80", "\xf3\xbf\xbf\xbf", "\xf4\x8f\xbf\xbf"};
    tstate c;
    for (unsigned b = 0x20; b < 0x80; b++) {
        c = *st;
        if (b != '"' && b != '\\' &&
            (sd_jschema_step(s, &c, b) || !sd_jschema_in_plain_string(s, &c) || !sd_jschema_in_string(s, &c)))
            return 0;
    }
    for (size_t k = 0; k < sizeof seqs / sizeof *seqs; k++) {
        c = *st;
        for (const char *p = seqs[k]; *p; p++)
            if (sd_jschema_step(s, &c, (unsigned char)*p) || !sd_jschema_in_string(s, &c))
                return 0;
        if (!sd_jschema_in_plain_string(s, &c))
            return 0;
    }
    return 1;
}

/* Every prefix of random documents: plain states keep their promise; strings with limits, enum
 * strings and keys are never claimed plain; person's free strings are. */
static void test_plain_string(void)
{
    static struct gen g;
    for (size_t k = 0; k < N_SCHEMAS; k++) {
        sd_jschema *s;
        if (fixture(k, &s, &g))
            return fixture_free(s, &g);
        int n_plain = 0;
        for (uint64_t seed = 1; seed <= 200; seed++) {
            size_t n = gen_doc(&g, seed + 1000);
            tstate st;
            sd_jschema_init(s, &st);
            for (size_t i = 0; i < n && sd_jschema_step(s, &st, (unsigned char)g.b[i]) == 0; i++) {
                int plain = sd_jschema_in_plain_string(s, &st);
                n_plain += plain;
                CHECK_MSG(!plain || plain_holds(s, &st), "schema %zu seed %llu: plain after %zu bytes is not",
                          k, (unsigned long long)seed, i);
            }
        }
        if (all_schemas[k] == person)
            CHECK_MSG(n_plain > 100, "person: %d plain states", n_plain);
        if (all_schemas[k] == anyof || all_schemas[k] == str13 || all_schemas[k] == lits ||
            all_schemas[k] == keys)
            CHECK_MSG(n_plain == 0, "schema %zu: %d plain states in strings with limits or enums", k,
                      n_plain);
        fixture_free(s, &g);
    }
    static const struct {
        const char *schema, *text;
        int in_string, plain;
    } cases[] = {
        {person, "{'na", 1, 0},
        {person, "{'name'", 0, 0},
        {person, "{'name':'x", 1, 1},
        {person, "{'name':'x\\", 1, 0},
        {person, "{'name':'x\\u00", 1, 0},
        {person, "{'name':'\xe2\x82", 1, 0},
        {person, "{'name':'x'", 0, 0},
        {str13, "'a", 1, 0},
        {lits, "'x", 1, 0},
        {lits, "1", 0, 0},
        {person, "{'name':'x','age':1,'tags':['a", 1, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        sd_jschema *s = compile_ok(cases[k].schema);
        tstate st;
        REQUIRE(s && feed_from_start(s, &st, cases[k].text) == 0);
        CHECK_MSG(sd_jschema_in_string(s, &st) == cases[k].in_string, "case %zu in_string", k);
        CHECK_MSG(sd_jschema_in_plain_string(s, &st) == cases[k].plain, "case %zu plain", k);
        sd_jschema_free(s);
    }
}

int main(void)
{
    RUN(test_random_documents);
    RUN(test_random_edits);
    RUN(test_canonical);
    RUN(test_plain_string);
    return sd_test_done();
}
