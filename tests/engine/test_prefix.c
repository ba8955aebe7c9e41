/* test_prefix: automatic prefix caching (engine/prefix.c) — the cache on its own over a KV pool
 * (matches, partial matches, references, LRU eviction order, table deletions), its recency list
 * (engine/hlru.c), the adaptive insertion rule on simulated request streams (engine/prefix_sim.c:
 * what it gains where LRU thrashes, what it keeps where LRU is right), then through the
 * scheduler on the CPU backend and the bundled tiny model: a request whose prompt starts like an
 * earlier one reuses its blocks and gives exactly the tokens and logprobs of a run without the
 * cache; a full pool evicts cached blocks instead of refusing work. */
#include "engine/hlru.h"
#include "engine/prefix.h"
#include "engine/prefix_sim.h"

#include "tests/engine/sched_util.h"

#define BS 4

static void fill(int32_t *t, int n, int32_t base)
{
    for (int i = 0; i < n; i++)
        t[i] = base + i;
}

/* Takes a fresh table of n tokens from the pool (the sequence's own blocks). */
static int take(sd_kv *kv, sd_kv_seq *s, int32_t n)
{
    sd_kv_seq_init(s);
    return sd_kv_seq_append(kv, s, n);
}

static void test_match_and_refs(void)
{
    sd_kv *kv = NULL;
    sd_prefix *p = NULL;
    REQUIRE(sd_kv_init(&kv, 16, BS, NULL) == 0 && sd_prefix_init(&p, kv, SD_PREFIX_LRU, NULL) == 0);
    int32_t a[14], out[8];
    fill(a, 14, 100);
    sd_kv_seq s;
    REQUIRE(take(kv, &s, 14) == 0); /* 4 blocks, the last partial */
    sd_prefix_insert(p, a, 14, s.blocks);
    sd_prefix_stats st;
    sd_prefix_stats_get(p, &st);
    CHECK(st.blocks == 3); /* full blocks only */
    CHECK(sd_kv_refcount(kv, s.blocks[0]) == 2 && sd_kv_refcount(kv, s.blocks[3]) == 1);
    sd_kv_seq_release(kv, &s);
    CHECK(sd_kv_idle_cached(kv) == 3 && sd_kv_available(kv) == 13);

    /* same first 9 tokens, then different: two blocks match */
    int32_t b[12];
    fill(b, 12, 100);
    b[9] = 7;
    int32_t k = sd_prefix_match(p, b, 12, 8, out);
    CHECK_MSG(k == 2, "matched %d blocks", k);
    CHECK(sd_kv_refcount(kv, out[0]) == 2 && sd_kv_idle_cached(kv) == 1);
    /* max_blocks caps it; a different first token matches nothing */
    CHECK(sd_prefix_match(p, a, 14, 1, out + 2) == 1);
    b[0] = 5;
    CHECK(sd_prefix_match(p, b, 12, 8, out + 3) == 0);
    /* a block's tokens at another position (another parent) do not match */
    CHECK(sd_prefix_match(p, a + 4, 8, 8, out + 3) == 0);
    for (int i = 0; i < 3; i++)
        sd_kv_release(kv, out[i]);
    CHECK(sd_kv_idle_cached(kv) == 3);
    sd_prefix_stats_get(p, &st);
    CHECK(st.hit_tokens == 3 * BS);
    sd_prefix_free(p);
    CHECK(sd_kv_available(kv) == 16 && sd_kv_idle_cached(kv) == 0);
    sd_kv_free(kv);
}

/* Eviction frees idle blocks only, a chain's later blocks before its first ones, the least
 * recently used chain first; lookups of what is left still work after the deletions. */
static void test_evict_order(void)
{
    sd_kv *kv = NULL;
    sd_prefix *p = NULL;
    REQUIRE(sd_kv_init(&kv, 12, BS, NULL) == 0 && sd_prefix_init(&p, kv, SD_PREFIX_LRU, NULL) == 0);
    int32_t x[12], y[12], out[3];
    fill(x, 12, 0);
    fill(y, 12, 1000);
    sd_kv_seq sx, sy;
    REQUIRE(take(kv, &sx, 12) == 0 && take(kv, &sy, 12) == 0);
    sd_prefix_insert(p, x, 12, sx.blocks);
    sd_prefix_insert(p, y, 12, sy.blocks);
    int32_t x0 = sx.blocks[0], x2 = sx.blocks[2], y0 = sy.blocks[0];
    sd_kv_seq_release(kv, &sx);
    /* y's blocks are still held by its sequence: not evictable */
    CHECK(sd_kv_idle_cached(kv) == 3 && sd_kv_available(kv) == 6);
    CHECK(sd_prefix_evict(p, 7) == 1); /* x is older: its last block goes first */
    CHECK(sd_kv_refcount(kv, x2) == 0 && sd_kv_refcount(kv, x0) == 1);
    CHECK(sd_prefix_match(p, x, 12, 3, out) == 2); /* x's first two blocks still match */
    sd_kv_release(kv, out[0]);
    sd_kv_release(kv, out[1]);
    CHECK(sd_prefix_evict(p, 100) == 2); /* every idle block; y's stay */
    CHECK(sd_kv_available(kv) == 9 && sd_kv_refcount(kv, y0) == 2);
    CHECK(sd_prefix_match(p, y, 12, 3, out) == 3);
    for (int i = 0; i < 3; i++)
        sd_kv_release(kv, out[i]);
    sd_kv_seq_release(kv, &sy);
    CHECK(sd_prefix_evict(p, 100) == 3 && sd_kv_available(kv) == 12);
    sd_prefix_free(p);
    sd_kv_free(kv);
}

/* Many chains in a small table: deletions (backward shift) keep every other entry findable. */
static void test_table_churn(void)
{
    sd_kv *kv = NULL;
    sd_prefix *p = NULL;
    REQUIRE(sd_kv_init(&kv, 64, BS, NULL) == 0 && sd_prefix_init(&p, kv, SD_PREFIX_LRU, NULL) == 0);
    int32_t t[64][BS], out[1];
    int live[64] = {0}, errors = 0;
    uint64_t rng = 1;
    for (int round = 0; round < 2000; round++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int i = (int)(rng >> 33) % 64;
        if (!live[i]) {
            sd_kv_seq s;
            fill(t[i], BS, 10 * (round + 1));
            if (take(kv, &s, BS) == 0) {
                sd_prefix_insert(p, t[i], BS, s.blocks);
                sd_kv_seq_release(kv, &s);
                live[i] = 1;
            } else {
                sd_prefix_evict(p, 1);
            }
        } else if (rng & (1ull << 20)) {
            errors += sd_prefix_match(p, t[i], BS, 1, out) != 1;
            if (out[0] >= 0)
                sd_kv_release(kv, out[0]);
        } else {
            sd_prefix_evict(p, sd_kv_available(kv) + 1); /* drops the least recent idle block */
            for (int j = 0; j < 64; j++)
                if (live[j] && sd_prefix_match(p, t[j], BS, 1, out) == 1)
                    sd_kv_release(kv, out[0]);
                else
                    live[j] = 0;
        }
    }
    CHECK_MSG(errors == 0, "%d cached chains not found", errors);
    sd_prefix_free(p);
    CHECK(sd_kv_available(kv) == 64);
    sd_kv_free(kv);
}

/* The recency list: head and tail insertion, touch, removal from the middle, and ids sharing a
 * key found one by one (also after a removal shifted the probe run back). */
static void test_hlru(void)
{
    sd_hlru l;
    REQUIRE(sd_hlru_init(&l, 8) == 0);
    sd_hlru_insert(&l, 0, 42, 0);
    sd_hlru_insert(&l, 1, 42, 0); /* head: 1 0 */
    sd_hlru_insert(&l, 2, 7, 1);  /* tail: 1 0 2 */
    sd_hlru_insert(&l, 3, 42 + 32, 0);
    CHECK(l.head == 3 && l.tail == 2 && l.count == 4);
    sd_hlru_touch(&l, 2); /* 2 3 1 0 */
    CHECK(l.head == 2 && l.tail == 0 && l.next[2] == 3 && l.prev[0] == 1);
    uint32_t it = 0;
    int seen = 0;
    for (int32_t id; (id = sd_hlru_find(&l, 42, &it)) != SD_HLRU_NONE;)
        seen |= 1 << id;
    CHECK_MSG(seen == 3, "ids under key 42: mask %d", seen);
    CHECK(sd_hlru_find(&l, 42, &it) == SD_HLRU_NONE); /* stays at the end */
    sd_hlru_remove(&l, 0);
    it = 0;
    CHECK(sd_hlru_find(&l, 42, &it) == 1 && sd_hlru_find(&l, 42, &it) == SD_HLRU_NONE);
    it = 0;
    CHECK(sd_hlru_find(&l, 42 + 32, &it) == 3 && !sd_hlru_listed(&l, 0) && l.tail == 1);
    sd_hlru_remove(&l, 2);
    CHECK(l.head == 3 && l.count == 2);
    sd_hlru_free(&l);
}

static double sim_hits(const char *stream, int32_t pool, int policy)
{
    sd_prefix_sim_opts o;
    sd_prefix_sim_defaults(&o);
    o.stream = stream;
    o.pool = pool;
    sd_prefix_sim_result r;
    sd_diag d = {0};
    if (sd_prefix_sim_run(&o, policy, &r, &d) != 0) {
        fprintf(stderr, "sim %s: %s\n", stream, d.msg);
        return -1;
    }
    return r.hit_rate;
}

/* Prompts that cycle through more than the pool holds: LRU never hits, the adaptive rule keeps
 * part of them. Where LRU is right (conversations, popular prompts), the adaptive rule stays
 * within a point and a half of it; where long prompts seen once push shared ones out, it gains. */
static void test_adaptive_streams(void)
{
    double lru = sim_hits("cycle", 1000, SD_PREFIX_LRU), ad = sim_hits("cycle", 1000, SD_PREFIX_ADAPTIVE);
    CHECK_MSG(lru >= 0 && lru < 0.01 && ad > 0.5, "cycle: LRU %.3f, adaptive %.3f", lru, ad);
    static const char *keep[] = {"chat", "chat-zipf", "zipf", "system+docs"};
    for (int i = 0; i < 4; i++)
        for (int32_t pool = 500; pool <= 1500; pool += 500) {
            lru = sim_hits(keep[i], pool, SD_PREFIX_LRU);
            ad = sim_hits(keep[i], pool, SD_PREFIX_ADAPTIVE);
            CHECK_MSG(lru > 0 && ad >= lru - 0.015, "%s at %d blocks: LRU %.3f, adaptive %.3f", keep[i], pool,
                      lru, ad);
        }
    lru = sim_hits("mixed", 1500, SD_PREFIX_LRU);
    ad = sim_hits("mixed", 1500, SD_PREFIX_ADAPTIVE);
    CHECK_MSG(ad > lru + 0.05, "mixed: LRU %.3f, adaptive %.3f", lru, ad);
    sd_prefix_sim_opts o;
    sd_prefix_sim_defaults(&o);
    o.stream = "nope";
    sd_prefix_sim_result r;
    CHECK(sd_prefix_sim_run(&o, SD_PREFIX_ADAPTIVE, &r, NULL) == SD_EINVAL);
}

/* Under the cold rule the cache's own blocks: a 3-block chain inserted cold sits at the tail,
 * its end first, and a hit moves it back into recency order. Driven by the rule's shadows: a
 * pool of 8 blocks, chains of 3 that cycle through 4 prompts (12 blocks) until the cold
 * shadow has hit more. */
/* 400 requests of 3 full blocks and a partial one, cycling through 4 prompts in a pool of 8
 * blocks, each looked up `retries` times first as a head that cannot be admitted is (its matched
 * blocks released again); returns the blocks the admitted lookups hit. */
static int cycle_rounds(sd_prefix *p, sd_kv *kv, int32_t (*t)[3 * BS + 1], int retries)
{
    int hits = 0;
    for (int round = 0; round < 400; round++) {
        int32_t *tok = t[round % 4];
        sd_kv_seq s;
        sd_kv_seq_init(&s);
        if (sd_kv_seq_reserve(&s, 3) != 0)
            return -1;
        for (int r = 0; r < retries; r++) {
            int32_t k = sd_prefix_match(p, tok, 3 * BS + 1, 3, s.blocks);
            for (int32_t i = 0; i < k; i++)
                sd_kv_release(kv, s.blocks[i]);
        }
        int32_t k = sd_prefix_match(p, tok, 3 * BS + 1, 3, s.blocks);
        hits += k;
        s.n_blocks = k;
        s.n_tokens = k * BS;
        int32_t need = sd_kv_seq_needed(kv, &s, 3 * BS + 1 - s.n_tokens);
        if (need > sd_kv_available(kv))
            sd_prefix_evict(p, need);
        if (sd_kv_seq_append(kv, &s, 3 * BS + 1 - s.n_tokens) != 0)
            return -1;
        sd_prefix_insert(p, tok, 3 * BS + 1, s.blocks);
        sd_kv_seq_release(kv, &s);
    }
    return hits;
}

static void test_cold_entry(void)
{
    sd_kv *kv = NULL;
    sd_prefix *p = NULL;
    REQUIRE(sd_kv_init(&kv, 8, BS, NULL) == 0 && sd_prefix_init(&p, kv, SD_PREFIX_ADAPTIVE, NULL) == 0);
    int32_t t[4][3 * BS + 1], out[3];
    for (int i = 0; i < 4; i++)
        fill(t[i], 3 * BS + 1, 1000 * (i + 1));
    sd_prefix_stats st;
    int hits = cycle_rounds(p, kv, t, 0);
    sd_prefix_stats_get(p, &st);
    CHECK_MSG(st.cold_rule == 1 && st.cold_inserted_blocks > 0, "cold rule %d, %llu cold", st.cold_rule,
              (unsigned long long)st.cold_inserted_blocks);
    CHECK_MSG(hits > 300, "%d blocks hit in 400 lookups of 3", hits); /* LRU: none */
    /* a chain inserted on a cold turn (7 of 8) goes to the tail in chain order */
    int32_t fresh[3 * BS];
    fill(fresh, 3 * BS, 99000);
    sd_kv_seq s;
    sd_kv_seq_init(&s);
    sd_prefix_evict(p, 3);
    REQUIRE(sd_kv_seq_append(kv, &s, 3 * BS) == 0);
    uint64_t cold0 = st.cold_inserted_blocks;
    sd_prefix_insert(p, fresh, 3 * BS, s.blocks);
    sd_prefix_stats_get(p, &st);
    const int32_t b1 = s.blocks[1], b2 = s.blocks[2];
    /* deterministic: this insertion is a cold turn (the rule's counter is the cache's own) */
    CHECK_MSG(st.cold_inserted_blocks == cold0 + 3, "%llu entered cold, want 3",
              (unsigned long long)(st.cold_inserted_blocks - cold0));
    sd_kv_seq_release(kv, &s);
    CHECK(sd_prefix_evict(p, sd_kv_available(kv) + 1) == 1);
    CHECK(sd_kv_refcount(kv, b2) == 0 && sd_kv_refcount(kv, b1) == 1);
    CHECK(sd_prefix_match(p, fresh, 3 * BS, 3, out) == 2); /* the rest still found */
    sd_kv_release(kv, out[0]);
    sd_kv_release(kv, out[1]);
    sd_prefix_free(p);
    CHECK(sd_kv_available(kv) == 8);
    sd_kv_free(kv);
}

/* A head that waits is looked up again at every step: the shadows count it once, so the retries
 * do not tip the rule back to LRU (with them counted, it stays at LRU and hits nothing here). */
static void test_retries_count_once(void)
{
    sd_kv *kv = NULL;
    sd_prefix *p = NULL;
    REQUIRE(sd_kv_init(&kv, 8, BS, NULL) == 0 && sd_prefix_init(&p, kv, SD_PREFIX_ADAPTIVE, NULL) == 0);
    int32_t t[4][3 * BS + 1];
    for (int i = 0; i < 4; i++)
        fill(t[i], 3 * BS + 1, 1000 * (i + 1));
    int hits = cycle_rounds(p, kv, t, 3);
    sd_prefix_stats st;
    sd_prefix_stats_get(p, &st);
    CHECK_MSG(st.cold_rule == 1 && hits > 300, "cold rule %d, %d blocks hit", st.cold_rule, hits);
    sd_prefix_free(p);
    CHECK(sd_kv_available(kv) == 8);
    sd_kv_free(kv);
}

/* Random traffic under the adaptive rule, checked against what each block holds: prompts built
 * from 6 shared openings and fresh tokens, up to 3 sequences alive at once, lookups retried as a
 * waiting head's are, evictions of every size. Every block a lookup returns holds the tokens it
 * was matched for (the test records what each sequence wrote into its blocks), no block is
 * listed twice, and at the end every block is back in the pool. */
static void test_adaptive_random(void)
{
    enum { POOL = 48, MAXB = 12, LIVE = 3 };
    sd_kv *kv = NULL;
    sd_prefix *p = NULL;
    REQUIRE(sd_kv_init(&kv, POOL, BS, NULL) == 0 && sd_prefix_init(&p, kv, SD_PREFIX_ADAPTIVE, NULL) == 0);
    static int32_t content[POOL][BS]; /* what the sequence that computed a block wrote */
    int32_t tok[LIVE][MAXB * BS + 1], n_tok[LIVE] = {0};
    sd_kv_seq seq[LIVE];
    int alive[LIVE] = {0}, bad = 0;
    uint64_t rng = 12345, fresh = 1000000;
    for (int step = 0; step < 3000; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        const uint32_t u = (uint32_t)(rng >> 33);
        const int i = (int)(u % LIVE);
        if (alive[i]) { /* finish it: its blocks stay cached */
            sd_prefix_insert(p, tok[i], n_tok[i], seq[i].blocks);
            sd_kv_seq_release(kv, &seq[i]);
            alive[i] = 0;
            continue;
        }
        const int open = (int)(u >> 8) % 6, n_open = 1 + open % 4, n_own = (int)(u >> 12) % 5;
        n_tok[i] = (n_open + n_own) * BS + (int)(u >> 16) % BS;
        for (int t = 0; t < n_open * BS; t++)
            tok[i][t] = 100 * (open + 1) + t;
        for (int t = n_open * BS; t < n_tok[i]; t++)
            tok[i][t] = (int32_t)fresh++;
        const int32_t max = (n_tok[i] - 1) / BS;
        sd_kv_seq_init(&seq[i]);
        REQUIRE(sd_kv_seq_reserve(&seq[i], MAXB + 1) == 0);
        int32_t k = 0;
        for (int r = 0; r <= (int)(u >> 20) % 3; r++) { /* retries, then the lookup that stays */
            for (int32_t j = 0; j < k; j++)
                sd_kv_release(kv, seq[i].blocks[j]);
            k = max > 0 ? sd_prefix_match(p, tok[i], n_tok[i], max, seq[i].blocks) : 0;
        }
        for (int32_t j = 0; j < k; j++)
            bad += memcmp(content[seq[i].blocks[j]], tok[i] + j * BS, sizeof content[0]) != 0;
        seq[i].n_blocks = k;
        seq[i].n_tokens = k * BS;
        const int32_t need = sd_kv_seq_needed(kv, &seq[i], n_tok[i] - seq[i].n_tokens);
        if (need > sd_kv_available(kv))
            sd_prefix_evict(p, need);
        if ((u >> 24) % 7 == 0)
            sd_prefix_evict(p, sd_kv_available(kv) + (int32_t)(u >> 27) % 8); /* pressure from elsewhere */
        if (sd_kv_seq_append(kv, &seq[i], n_tok[i] - seq[i].n_tokens) != 0) {
            sd_kv_seq_release(kv, &seq[i]);
            continue;
        }
        for (int32_t j = k; j < n_tok[i] / BS; j++)
            memcpy(content[seq[i].blocks[j]], tok[i] + j * BS, sizeof content[0]);
        sd_prefix_insert(p, tok[i], n_tok[i], seq[i].blocks); /* the prompt is in */
        alive[i] = 1;
    }
    CHECK_MSG(bad == 0, "%d matched blocks held other tokens", bad);
    sd_prefix_stats st;
    sd_prefix_stats_get(p, &st);
    CHECK_MSG(st.hit_tokens > 0 && st.evicted_blocks > 0 && st.cold_inserted_blocks > 0,
              "hits %llu, evicted %llu, cold %llu", (unsigned long long)st.hit_tokens,
              (unsigned long long)st.evicted_blocks, (unsigned long long)st.cold_inserted_blocks);
    for (int i = 0; i < LIVE; i++)
        if (alive[i])
            sd_kv_seq_release(kv, &seq[i]);
    CHECK(sd_kv_used(kv) == st.blocks); /* only the cache holds blocks now, each once */
    sd_prefix_free(p);
    CHECK(sd_kv_available(kv) == POOL);
    sd_kv_free(kv);
}

/* ---- through the scheduler ---- */

/* Runs the requests one after the other on one scheduler (so later ones may hit the cache). */
static int run_in_turn(sd_backend *b, int caching, sd_request_params *ps, res *rs, int n, sd_engine_stats *st)
{
    sd_engine_opts o;
    opts(&o, 4, 512);
    o.prefix_caching = caching;
    sd_sched *s = NULL;
    sd_diag d = {0};
    int rc = sd_sched_init(&s, M, b, &o, &d);
    for (int i = 0; rc == 0 && i < n; i++) {
        sd_sched_req *r = NULL;
        rc = sd_sched_req_new(s, &ps[i], on_event, &rs[i], (uint64_t)i + 1, &r, &d);
        if (rc == 0)
            sd_sched_add(s, r);
        for (int guard = 0; rc == 0 && sd_sched_has_work(s) && guard < 100000; guard++)
            rc = sd_sched_step(s, &d);
    }
    if (rc < 0)
        fprintf(stderr, "run: %s\n", sd_diag_str(&d, rc));
    if (s && st)
        sd_sched_stats(s, st);
    sd_sched_free(s);
    return rc;
}

static const char *SYS = "You are a careful Python reviewer. Answer briefly and show code.\n\n"
                         "def parse(line):\n    key, _, value = line.partition('=')\n    return key.strip(),";

static void test_reuse_is_exact(void)
{
    if (!M)
        SKIP("models/tiny did not load");
    const char *tails[3] = {" value.strip()\n", " value\n\n# usage", " int(value)\n"};
    int32_t *ids[3], n[3];
    char buf[1024];
    for (int i = 0; i < 3; i++) {
        snprintf(buf, sizeof buf, "%s%s", SYS, tails[i]);
        ids[i] = encode(buf, &n[i]);
        REQUIRE(ids[i]);
    }
    sd_request_params ps[3];
    res on[3] = {0}, off[3] = {0};
    for (int i = 0; i < 3; i++) {
        greedy_params(&ps[i], ids[i], n[i], 24);
        ps[i].logprobs = 2;
    }
    sd_backend *b = backend_new(64, 16);
    REQUIRE(b);
    sd_engine_stats st_on, st_off;
    CHECK(run_in_turn(b, 1, ps, on, 3, &st_on) == 0);
    CHECK(run_in_turn(b, 0, ps, off, 3, &st_off) == 0);
    CHECK_MSG(st_on.prefix_hit_tokens >= 2 * 16, "hit tokens %llu",
              (unsigned long long)st_on.prefix_hit_tokens);
    CHECK(st_off.prefix_hit_tokens == 0);
    CHECK(st_on.kv_blocks_used == 0 && st_on.kv_blocks_cached > 0 && st_off.kv_blocks_cached == 0);
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(on[i].n == off[i].n && on[i].n == 24, "request %d: %d vs %d tokens", i, on[i].n, off[i].n);
        CHECK_MSG(!memcmp(on[i].tok, off[i].tok, sizeof on[i].tok[0] * (size_t)on[i].n), "request %d tokens",
                  i);
        CHECK_MSG(!memcmp(on[i].lp, off[i].lp, sizeof on[i].lp[0] * (size_t)on[i].n), "request %d logprobs",
                  i);
        CHECK(on[i].done_prompt == n[i]); /* usage counts the whole prompt, cached or not */
        res_reset(&on[i]);
        res_reset(&off[i]);
        free(ids[i]);
    }
    sd_backend_free(b);
}

/* A pool of 8 blocks of 8 tokens, requests of 40 tokens (5 blocks): the second must evict what
 * the first left cached (its last blocks first), all complete, and the first prompt asked again
 * still finds its first blocks. */
static void test_full_pool_evicts(void)
{
    if (!M)
        SKIP("models/tiny did not load");
    static const char *P[] = {"def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n   ",
                              "The server listens on port 8080 and answers every request with",
                              "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n   "};
    int32_t *ids[3], n[3];
    sd_request_params ps[3];
    res rs[3] = {0};
    for (int i = 0; i < 3; i++) {
        ids[i] = encode(P[i], &n[i]);
        REQUIRE(ids[i]);
        REQUIRE(n[i] >= 17 && n[i] < 40);
        greedy_params(&ps[i], ids[i], n[i], 40 - n[i]);
    }
    sd_backend *b = backend_new(8, 8);
    REQUIRE(b);
    sd_engine_stats st;
    CHECK(run_in_turn(b, 1, ps, rs, 3, &st) == 0);
    for (int i = 0; i < 3; i++)
        CHECK_MSG(rs[i].n_final == 1 && rs[i].n_error == 0 && rs[i].n == 40 - n[i], "request %d: %d tokens",
                  i, rs[i].n);
    CHECK_MSG(!memcmp(rs[0].tok, rs[2].tok, sizeof rs[0].tok[0] * (size_t)rs[0].n),
              "same prompt, other tokens");
    CHECK(st.preemptions == 0 && st.kv_blocks_used == 0);
    CHECK_MSG(st.prefix_hit_tokens == 16, "hit tokens %llu (the repeated prompt's two full blocks)",
              (unsigned long long)st.prefix_hit_tokens);
    for (int i = 0; i < 3; i++) {
        res_reset(&rs[i]);
        free(ids[i]);
    }
    sd_backend_free(b);
}

/* Two requests of the same 33-40-token prompt and 4 tokens out at once in a pool of 8 blocks of
 * 8: the first holds 5-6 blocks until it ends, so the second (5 blocks for its prompt) waits at the
 * head of the queue, looked up at every step meanwhile. The metrics count the lookup that
 * admitted it: the tokens looked up are the two prompts', the hits its full blocks of the first's. */
static void test_waiting_head_counted_once(void)
{
    if (!M)
        SKIP("models/tiny did not load");
    static const char *P = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n"
                           "def mul(a, b):\n   ";
    int32_t n = 0, *ids = encode(P, &n);
    REQUIRE(ids);
    REQUIRE(n > 32 && n <= 40); /* 5 blocks of prompt */
    sd_request_params ps[2];
    res rs[2] = {0};
    for (int i = 0; i < 2; i++)
        greedy_params(&ps[i], ids, n, 4);
    sd_backend *b = backend_new(8, 8);
    REQUIRE(b);
    sd_engine_opts o;
    opts(&o, 4, 512);
    sd_engine_stats st;
    CHECK(run_all(b, &o, ps, rs, 2, &st) == 0);
    CHECK(rs[0].n == 4 && rs[1].n == 4 && st.preemptions == 0);
    CHECK_MSG(st.prefix_query_tokens == 2 * (uint64_t)n, "looked up %llu tokens, prompts of %d",
              (unsigned long long)st.prefix_query_tokens, n);
    /* the second reuses the first's full prompt blocks: the first n/8 blocks, at most (n-1)/8 */
    CHECK_MSG(st.prefix_hit_tokens == (uint64_t)((n - 1) / 8 * 8), "hit %llu tokens",
              (unsigned long long)st.prefix_hit_tokens);
    res_reset(&rs[0]);
    res_reset(&rs[1]);
    free(ids);
    sd_backend_free(b);
}

int main(void)
{
    sd_diag d = {0};
    if (sd_model_open(&M, MODEL_DIR, &d) != 0) {
        fprintf(stderr, "model: %s\n", d.msg);
        M = NULL;
    }
    RUN(test_match_and_refs);
    RUN(test_evict_order);
    RUN(test_table_churn);
    RUN(test_hlru);
    RUN(test_adaptive_streams);
    RUN(test_cold_entry);
    RUN(test_retries_count_once);
    RUN(test_adaptive_random);
    RUN(test_reuse_is_exact);
    RUN(test_full_pool_evicts);
    RUN(test_waiting_head_counted_once);
    sd_model_free(M);
    return sd_test_done();
}
