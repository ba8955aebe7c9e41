/* test_jv_cache: compiled validators shared by requests asking for the same constraint
 * (engine/jv_cache.h) — one entry and one id for the same text, apart for another text, kind,
 * tool mode (forced, Hermes, Llama) or parallel flag; least recently used dropped past capacity while a
 * holder keeps using it; compile errors not cached; many threads getting and putting at once. */
#include "engine/jv_cache.h"

#include <pthread.h>
#include <string.h>

#include "tests/harness.h"

static const char *const schemas[] = {
    "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}",
    "{\"type\": \"string\", \"maxLength\": 4}",
    "{\"enum\": [\"x\", \"y\"]}",
    "{\"type\": \"array\", \"items\": {\"type\": \"boolean\"}}",
};
static const char tools[] = "[{\"name\": \"f\"}, {\"name\": \"g\"}]";

static sd_jvc_entry *get(sd_jvc *c, sd_jvc_kind k, sd_tcall_mode mode, int parallel, const char *text,
                         atomic_ullong *ids)
{
    sd_jvc_entry *e = NULL;
    sd_diag d = {0};
    int rc = sd_jvc_get(c, k, mode, parallel, text, ids, &e, &d);
    CHECK_MSG(rc == 0, "%s: %s", text, d.msg);
    return e;
}

/* Feeds text to a fresh state of e: 1 when it is a whole document. */
static int accepts(const sd_jvc_entry *e, const char *text)
{
    const sd_jval *v = sd_jvc_jval(e);
    uint64_t st[SD_JVAL_MAX_STATE / 8];
    sd_jvc_state_init(e, st);
    for (const char *p = text; *p; p++)
        if (v->step(v->ctx, st, (unsigned char)*p) < 0)
            return 0;
    return v->complete(v->ctx, st) || (v->can_end && v->can_end(v->ctx, st));
}

static void test_shared_and_apart(void)
{
    sd_jvc *c = NULL;
    atomic_ullong ids = 0;
    REQUIRE(sd_jvc_init(&c, 8, NULL) == 0);
    sd_jvc_entry *a = get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[0], &ids),
                 *b = get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 1, schemas[0], &ids);
    REQUIRE(a && b);
    CHECK(a == b && sd_jvc_jval(a)->id == sd_jvc_jval(b)->id &&
          sd_jvc_hits(c) == 1); /* parallel: schemas ignore it */
    sd_jvc_entry *o = get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[1], &ids);
    sd_jvc_entry *t0 = get(c, SD_JVC_TOOLS, SD_TCALL_FORCED, 0, tools, &ids),
                 *t1 = get(c, SD_JVC_TOOLS, SD_TCALL_FORCED, 1, tools, &ids);
    REQUIRE(o && t0 && t1);
    CHECK(o != a && sd_jvc_jval(o)->id != sd_jvc_jval(a)->id);
    CHECK(t0 != t1 && sd_jvc_jval(t0)->id != sd_jvc_jval(t1)->id && sd_jvc_hits(c) == 1);
    CHECK(accepts(a, "{\"a\": 12}") && !accepts(a, "{\"b\": 1}") && accepts(o, "\"abcd\""));
    CHECK(accepts(t0, "{\"name\": \"g\", \"arguments\": {}}") &&
          !accepts(t0, "[{\"name\": \"g\", \"arguments\": {}}]"));
    CHECK(accepts(t1, "[{\"name\": \"g\", \"arguments\": {}}]"));
    /* errors come back as the compiler's and are not cached */
    sd_jvc_entry *bad = NULL;
    sd_diag d = {0};
    CHECK(sd_jvc_get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, "{\"type\": \"string\", \"pattern\": \"(?=a)\"}",
                     &ids, &bad, &d) == SD_EINVAL);
    CHECK_MSG(strstr(d.msg, "pattern") && !bad, "%s", d.msg);
    CHECK(sd_jvc_get(c, SD_JVC_TOOLS, SD_TCALL_FORCED, 0, "[{\"name\": \"a b\"}]", &ids, &bad, &d) ==
              SD_EINVAL &&
          !bad);
    sd_jvc_put(a);
    sd_jvc_put(b);
    sd_jvc_put(o);
    sd_jvc_put(t0);
    sd_jvc_free(c); /* t1 outlives the cache */
    CHECK(accepts(t1, "[{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {}}]"));
    sd_jvc_put(t1);
}

/* Lazy tool calls (free text, then calls in Hermes markup), Llama-mode and forced ones of the same tools:
 * three entries with their own ids, each accepting its own texts; a second lazy get is a hit. */
static void test_lazy_apart(void)
{
    sd_jvc *c = NULL;
    atomic_ullong ids = 0;
    REQUIRE(sd_jvc_init(&c, 8, NULL) == 0);
    sd_jvc_entry *f = get(c, SD_JVC_TOOLS, SD_TCALL_FORCED, 1, tools, &ids),
                 *l = get(c, SD_JVC_TOOLS, SD_TCALL_HERMES, 1, tools, &ids);
    REQUIRE(f && l);
    CHECK(f != l && sd_jvc_jval(f)->id != sd_jvc_jval(l)->id && sd_jvc_hits(c) == 0);
    sd_jvc_entry *l2 = get(c, SD_JVC_TOOLS, SD_TCALL_HERMES, 1, tools, &ids),
                 *l0 = get(c, SD_JVC_TOOLS, SD_TCALL_HERMES, 0, tools, &ids);
    REQUIRE(l2 && l0);
    CHECK(l2 == l && l0 != l && sd_jvc_hits(c) == 1);
    sd_jvc_entry *ll = get(c, SD_JVC_TOOLS, SD_TCALL_LLAMA, 1, tools, &ids); /* a third mode, a third entry */
    REQUIRE(ll);
    CHECK(ll != l && ll != f && sd_jvc_jval(ll)->id != sd_jvc_jval(l)->id && sd_jvc_hits(c) == 1);
    const char *llama = "{\"name\": \"g\", \"parameters\": {}}";
    CHECK(accepts(ll, llama) && !accepts(f, llama) && !accepts(ll, "{\"name\": \"g\", \"arguments\": {}}"));
    sd_jvc_put(ll);
    const char *markup = "Sure. <tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>\n";
    CHECK(accepts(l, markup) && accepts(l, "no call") && !accepts(f, markup));
    CHECK(!accepts(l, "Sure. <tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call> Done."));
    /* a bare call is a forced call's whole text, and lazy mode's free text */
    CHECK(accepts(f, "[{\"name\": \"g\", \"arguments\": {}}]") && accepts(l, "[{\"name\": \"g\""));
    CHECK(!accepts(l, "<tool_call>\n{\"name\": \"h\"") && !accepts(l, "<tool_call>\n{\"name\": \"g\""));
    sd_jvc_put(f);
    sd_jvc_put(l);
    sd_jvc_put(l2);
    sd_jvc_put(l0);
    sd_jvc_free(c);
}

static void test_lru(void)
{
    sd_jvc *c = NULL;
    atomic_ullong ids = 0;
    REQUIRE(sd_jvc_init(&c, 2, NULL) == 0);
    sd_jvc_entry *e0 =
        get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[0], &ids); /* held past its eviction */
    sd_jvc_put(get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[1], &ids));
    sd_jvc_put(
        get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[1], &ids)); /* schemas[1] is now the most recent */
    sd_jvc_put(get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[2], &ids)); /* evicts schemas[0] */
    REQUIRE(e0);
    uint64_t h = sd_jvc_hits(c);
    sd_jvc_entry *again = get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[0], &ids);
    REQUIRE(again);
    CHECK(again != e0 && sd_jvc_jval(again)->id != sd_jvc_jval(e0)->id && sd_jvc_hits(c) == h);
    CHECK(accepts(e0, "{\"a\": 1}") && accepts(again, "{\"a\": 1}"));
    /* schemas[0] came back in place of the least recently used, [1] (used before [2]) */
    sd_jvc_put(get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[2], &ids));
    CHECK(sd_jvc_hits(c) == h + 1);
    sd_jvc_put(get(c, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[1], &ids));
    CHECK(sd_jvc_hits(c) == h + 1);
    sd_jvc_put(e0);
    sd_jvc_put(again);
    sd_jvc_free(c);
}

static sd_jvc *shared;
static atomic_ullong shared_ids;

static void *churn(void *arg)
{
    unsigned x = (unsigned)(size_t)arg * 2654435761u + 1;
    for (int i = 0; i < 2000; i++) {
        x = x * 1664525u + 1013904223u;
        sd_jvc_entry *e = NULL;
        if (sd_jvc_get(shared, SD_JVC_SCHEMA, SD_TCALL_FORCED, 0, schemas[(x >> 16) % 4], &shared_ids, &e,
                       NULL) < 0)
            return (void *)1;
        int ok = sd_jvc_jval(e)->size > 0;
        sd_jvc_put(e);
        if (!ok)
            return (void *)1;
    }
    return NULL;
}

static void test_threads(void)
{
    REQUIRE(sd_jvc_init(&shared, 2, NULL) == 0); /* fewer slots than texts: evictions race with gets */
    pthread_t th[8];
    for (size_t i = 0; i < 8; i++)
        REQUIRE(pthread_create(&th[i], NULL, churn, (void *)i) == 0);
    int bad = 0;
    for (int i = 0; i < 8; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        bad |= r != NULL;
    }
    CHECK(!bad && sd_jvc_hits(shared) > 0);
    sd_jvc_free(shared);
}

int main(void)
{
    RUN(test_shared_and_apart);
    RUN(test_lazy_apart);
    RUN(test_lru);
    RUN(test_threads);
    return sd_test_done();
}
