/* test_jsonc_mask: JSON mode's vocabulary mask (engine/jsonc.h sd_jmask) on the bundled
 * tokenizer (and the shared Qwen3 one, ../shared/tokenizers/qwen3, when present) against a
 * brute-force pass over every token, cached and not; only EOS after the object; greedy
 * generations from random logits that must end in valid JSON. */
#include "tests/engine/jsonc_ref.h"

/* ---- the mask ---------------------------------------------------------------------------- */

struct vocab {
    sd_tokenizer *t;
    sd_jmask *jm;
    int32_t n;
    int32_t eos;
    float *logits; /* [n + 8] */
};

static int vocab_load(struct vocab *v, const char *path)
{
    memset(v, 0, sizeof *v);
    sd_diag d = {0};
    int rc = sd_tok_load(&v->t, path, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    if (rc)
        return rc;
    v->n = sd_tok_vocab_size(v->t);
    v->eos = sd_tok_eos_id(v->t);
    v->logits = malloc(((size_t)v->n + 8) * sizeof *v->logits);
    rc = sd_jmask_init(&v->jm, v->t, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    return rc ? rc : v->logits ? 0 : SD_ENOMEM;
}

static void vocab_free(struct vocab *v)
{
    sd_jmask_free(v->jm);
    sd_tok_free(v->t);
    free(v->logits);
}

/* Whether token id may follow m, decided token by token: not special, not empty, not eos,
 * and every byte accepted. */
/* The bundled tokenizer's vocabulary into v, or the current test skips (absent) or stops
 * (vocab_load failed it). */
#define LOAD_TINY_OR_SKIP(v)                                                                                 \
    do {                                                                                                     \
        if (access(TINY "/tokenizer.json", R_OK) != 0)                                                       \
            SKIP(TINY "/tokenizer.json absent");                                                             \
        if (vocab_load(&(v), TINY)) {                                                                        \
            vocab_free(&(v));                                                                                \
            return;                                                                                          \
        }                                                                                                    \
    } while (0)

static int brute_allows(const struct vocab *v, const sd_jfsm *m, int32_t id)
{
    size_t len = 0;
    const char *b = sd_tok_token_bytes(v->t, id, &len);
    sd_jfsm c = *m;
    return b && len && id != v->eos && !sd_tok_is_special(v->t, id) && sd_jfsm_feed(&c, b, len) == 0;
}

/* Applies the mask to logits i * 0.5 (and 8 padding ids past the vocabulary) and compares
 * with the brute-force set; allowed logits must keep their values. */
static int check_state(struct vocab *v, sd_jmask *jm, const sd_jfsm *m)
{
    int32_t vocab = v->n + 8, want = 0, bad = 0;
    for (int32_t i = 0; i < vocab; i++)
        v->logits[i] = (float)i * 0.5f;
    int32_t got = sd_jmask_apply(jm, m, &v->eos, 1, v->logits, vocab);
    for (int32_t i = 0; i < vocab; i++) {
        int allow = i < v->n && brute_allows(v, m, i);
        want += allow;
        if (allow ? v->logits[i] != (float)i * 0.5f : v->logits[i] != -INFINITY) {
            if (bad++ < 3)
                CHECK_MSG(0, "token %d (%s): allowed %d", i,
                          sd_tok_token_str(v->t, i) ? sd_tok_token_str(v->t, i) : "?", allow);
        }
    }
    CHECK_MSG(got == want, "apply says %d allowed, brute force %d", got, want);
    /* the bitset the backends' samplers take: the same set */
    uint64_t *bits = calloc(((size_t)vocab + 63) / 64, sizeof *bits);
    if (!bits)
        return 0;
    CHECK(sd_jmask_allowed(jm, m, &v->eos, 1, vocab, bits) == want);
    int32_t differ = 0;
    for (int32_t i = 0; i < vocab; i++)
        differ += (int)((bits[i >> 6] >> (i & 63)) & 1) != (v->logits[i] != -INFINITY);
    CHECK_MSG(differ == 0, "sd_jmask_allowed differs from sd_jmask_apply on %d tokens", (int)differ);
    free(bits);
    return !bad && got == want && differ == 0;
}

/* States from random prefixes of random documents (cut anywhere: inside UTF-8, escapes,
 * numbers, literals), each checked uncached, cached, and again after the cache has turned
 * over; plus a second mask that has never seen them. */
static void test_jmask_tiny_brute_force(void)
{
    struct vocab v;
    LOAD_TINY_OR_SKIP(v);
    sd_jmask *fresh = NULL;
    REQUIRE(sd_jmask_init(&fresh, v.t, NULL) == 0);
    static struct gen g;
    static sd_jfsm states[300];
    uint64_t rng = 5;
    for (int k = 0; k < 300; k++) {
        size_t n = gen_doc(&g, 1000 + (uint64_t)k);
        sd_jfsm_init(&states[k]);
        REQUIRE(sd_jfsm_feed(&states[k], g.b, rnd(&rng, (unsigned)n)) == 0);
        CHECK_MSG(check_state(&v, v.jm, &states[k]), "state %d uncached", k);
        CHECK_MSG(check_state(&v, v.jm, &states[k]), "state %d cached", k);
    }
    for (int k = 0; k < 300; k += 7) {
        CHECK_MSG(check_state(&v, v.jm, &states[k]), "state %d after eviction", k);
        CHECK_MSG(check_state(&v, fresh, &states[k]), "state %d on a fresh mask", k);
    }
    /* special tokens never, whatever the state */
    for (int k = 0; k < 300; k += 13) {
        for (int32_t i = 0; i < v.n; i++)
            v.logits[i] = 1;
        sd_jmask_apply(v.jm, &states[k], &v.eos, 1, v.logits, v.n);
        for (int32_t i = 0; i < v.n; i++)
            if (sd_tok_is_special(v.t, i))
                CHECK_MSG(v.logits[i] == -INFINITY, "special token %d allowed in state %d", i, k);
    }
    sd_jmask_free(fresh);
    vocab_free(&v);
}

/* A validator of the digits 0-9 forever (state: one count byte, padded to 8): whole after one
 * digit, never complete. The mask must allow EOS beside the digit tokens exactly when can_end
 * says so, with the same set through sd_jmask_allowed_v, and keep its cache apart from JSON
 * mode's. */
static int dg_step(const void *ctx, void *state, unsigned c)
{
    uint8_t *n = state;
    if (c < '0' || c > '9')
        return -1;
    *n = 1;
    return 0;
}
static int dg_never(const void *ctx, const void *state)
{
    return 0;
}
static int dg_can_end(const void *ctx, const void *state)
{
    return *(const uint8_t *)state != 0;
}

static int lt_step(const void *ctx, void *state, unsigned c)
{
    return c >= 'a' && c <= 'z' ? 0 : -1;
}

static void test_jmask_can_end(void)
{
    struct vocab v;
    LOAD_TINY_OR_SKIP(v);
    REQUIRE(v.eos >= 0);
    const sd_jval dg = {NULL, 1, 8, dg_step, dg_never, dg_can_end, dg_never};
    uint64_t st[1] = {0}, *bits = calloc(((size_t)v.n + 63) / 64, sizeof *bits);
    REQUIRE(bits);
    for (int round = 0; round < 2; round++) { /* before a digit, then after one */
        for (int32_t i = 0; i < v.n; i++)
            v.logits[i] = 1;
        int32_t got = sd_jmask_apply_v(v.jm, &dg, st, &v.eos, 1, v.logits, v.n), want = 0;
        CHECK(sd_jmask_allowed_v(v.jm, &dg, st, &v.eos, 1, v.n, bits) == got);
        for (int32_t i = 0; i < v.n; i++) {
            size_t len = 0;
            const char *b = sd_tok_token_bytes(v.t, i, &len);
            int ok = i == v.eos ? round == 1 : b && len > 0 && !sd_tok_is_special(v.t, i);
            for (size_t k = 0; ok && i != v.eos && k < len; k++)
                ok = b[k] >= '0' && b[k] <= '9';
            want += ok;
            CHECK_MSG((v.logits[i] == 1) == ok && (int)((bits[i >> 6] >> (i & 63)) & 1) == ok,
                      "round %d token %d", round, i);
        }
        CHECK_MSG(got == want && want > 1, "round %d: %d allowed, want %d", round, got, want);
        *(uint8_t *)st = 1;
    }
    /* another validator with the same context, size and state bytes but its own id: its own set
     * (keyed on the context alone, the cache would hand it the digits') */
    const sd_jval lt = {NULL, 2, 8, lt_step, dg_never, NULL, dg_never};
    st[0] = 0;
    int32_t digits = sd_jmask_allowed_v(v.jm, &dg, st, &v.eos, 1, v.n, bits);
    for (int32_t i = 0; i < v.n; i++)
        v.logits[i] = 1;
    sd_jmask_apply_v(v.jm, &lt, st, &v.eos, 1, v.logits, v.n);
    size_t len = 0;
    int32_t a = -1, zero = -1;
    for (int32_t i = 0; i < v.n && (a < 0 || zero < 0); i++) {
        const char *b = sd_tok_token_bytes(v.t, i, &len);
        if (b && len == 1 && b[0] == 'a')
            a = i;
        if (b && len == 1 && b[0] == '0')
            zero = i;
    }
    REQUIRE(a >= 0 && zero >= 0 && digits > 0);
    CHECK(v.logits[a] == 1 && v.logits[zero] == -INFINITY);
    free(bits);
    vocab_free(&v);
}

static void test_jmask_after_complete(void)
{
    struct vocab v;
    LOAD_TINY_OR_SKIP(v);
    REQUIRE(v.eos >= 0);
    sd_jfsm m;
    sd_jfsm_init(&m);
    REQUIRE(sd_jfsm_feed(&m, "{\"a\":[1]}", 9) == 0 && sd_jfsm_complete(&m));
    int32_t eos[] = {v.eos, v.n + 100, v.eos, 5};
    for (int32_t i = 0; i < v.n; i++)
        v.logits[i] = 2;
    CHECK(sd_jmask_apply(v.jm, &m, eos, 4, v.logits, v.n) == 2); /* duplicate and out-of-range ids */
    for (int32_t i = 0; i < v.n; i++)
        CHECK_MSG((i == v.eos || i == 5) ? v.logits[i] == 2 : v.logits[i] == -INFINITY, "token %d", i);
    uint64_t *bits = calloc(((size_t)v.n + 63) / 64, sizeof *bits);
    REQUIRE(bits);
    CHECK(sd_jmask_allowed(v.jm, &m, eos, 4, v.n, bits) == 2);
    for (int32_t i = 0; i < v.n; i++)
        CHECK_MSG((int)((bits[i >> 6] >> (i & 63)) & 1) == (i == v.eos || i == 5), "bit of token %d", i);
    CHECK(sd_jmask_allowed(v.jm, &m, NULL, 0, v.n, bits) == 0);
    free(bits);
    for (int32_t i = 0; i < v.n; i++)
        v.logits[i] = 2;
    CHECK(sd_jmask_apply(v.jm, &m, NULL, 0, v.logits, v.n) == 0);
    for (int32_t i = 0; i < v.n; i++)
        CHECK_MSG(v.logits[i] == -INFINITY, "token %d with no eos", i);
    /* before completion the eos ids are masked, even one the text could take (5 here) */
    sd_jfsm_init(&m);
    REQUIRE(sd_jfsm_feed(&m, "{\"a\":\"", 6) == 0);
    for (int32_t i = 0; i < v.n; i++)
        v.logits[i] = 2;
    int32_t n_free = sd_jmask_apply(v.jm, &m, NULL, 0, v.logits, v.n);
    REQUIRE(v.logits[5] == 2);
    for (int32_t i = 0; i < v.n; i++)
        v.logits[i] = 2;
    int32_t n = sd_jmask_apply(v.jm, &m, eos, 4, v.logits, v.n);
    CHECK(n == n_free - 1 && v.logits[v.eos] == -INFINITY && v.logits[5] == -INFINITY);
    vocab_free(&v);
}

/* Greedy decoding over random logits with the mask: every pick keeps the text valid, and when
 * tokens that close strings and containers get a bias the object completes within a bound, is
 * accepted by the reference checker, and is followed by eos. Returns the steps taken. */
static int generate(struct vocab *v, uint64_t seed, float bias, int max_steps, double *ms)
{
    static char text[1 << 16];
    size_t n_text = 0;
    uint64_t rng = seed;
    float *closes = malloc((size_t)v->n * sizeof *closes);
    if (!closes)
        return -1;
    for (int32_t i = 0; i < v->n; i++) {
        size_t len = 0;
        const char *b = sd_tok_token_bytes(v->t, i, &len);
        closes[i] = b && (memchr(b, '"', len) || memchr(b, '}', len) || memchr(b, ']', len)) ? bias : 0;
    }
    sd_jfsm m;
    sd_jfsm_init(&m);
    int ret = 0;
    for (int step = 0; step < max_steps && ret == 0; step++) {
        for (int32_t i = 0; i < v->n; i++)
            v->logits[i] = (float)(rng_next(&rng) >> 11) * 0x1p-53f + closes[i];
        double t0 = now_ms();
        int32_t n = sd_jmask_apply(v->jm, &m, &v->eos, 1, v->logits, v->n);
        *ms += now_ms() - t0;
        int32_t best = 0;
        for (int32_t i = 1; i < v->n; i++)
            best = v->logits[i] > v->logits[best] ? i : best;
        size_t len = 0;
        const char *b = sd_tok_token_bytes(v->t, best, &len);
        if (n <= 0) {
            CHECK_MSG(0, "no token allowed at step %d", step);
            ret = -1;
        } else if (sd_jfsm_complete(&m)) {
            CHECK_MSG(best == v->eos && n == 1, "after completion: token %d, %d allowed", best, n);
            CHECK_MSG(ref_valid(text, n_text) && text[n_text - 1] == '}', "not an object: %.*s", (int)n_text,
                      text);
            ret = step + 1;
        } else if (!b || sd_jfsm_feed(&m, b, len) != 0 || n_text + len > sizeof text) {
            CHECK_MSG(0, "step %d picked token %d, which the validator rejects", step, best);
            ret = -1;
        } else {
            memcpy(text + n_text, b, len);
            n_text += len;
        }
    }
    free(closes);
    return ret;
}

static void test_jmask_greedy_generation(void)
{
    struct vocab v;
    LOAD_TINY_OR_SKIP(v);
    double ms = 0;
    int total = 0;
    static const float biases[] = {0.5f, 0.05f, 0.01f, 0.002f};
    for (int k = 0; k < 40; k++) {
        int steps = generate(&v, 0x1234 + (uint64_t)k, biases[k % 4], 3000, &ms);
        CHECK_MSG(steps > 0, "seed %d (bias %g) did not complete within 3000 tokens", k, biases[k % 4]);
        total += steps > 0 ? steps : 0;
    }
    /* no bias: no bound on length, but every pick must still be valid */
    for (int k = 0; k < 4; k++)
        CHECK(generate(&v, 0x777 + (uint64_t)k, 0, 400, &ms) >= 0);
    fprintf(stderr, "  greedy generations: %d tokens to completion over 40 runs, apply %.1f us/token\n",
            total, 1e3 * ms / (total + 1600));
    vocab_free(&v);
}

/* The shared Qwen3 tokenizer (151K tokens): brute-force equality for a few states, and the
 * timings the engine thread pays. */
static void test_jmask_qwen3(void)
{
    const char *path = sd_test_shared("tokenizers/qwen3/tokenizer.json");
    if (!path)
        SKIP("../shared/tokenizers/qwen3 absent");
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    sd_diag d = {0};
    struct vocab v;
    memset(&v, 0, sizeof v);
    REQUIRE(sd_tok_load(&v.t, p, &d) == 0);
    v.n = sd_tok_vocab_size(v.t);
    v.eos = sd_tok_eos_id(v.t);
    v.logits = malloc(((size_t)v.n + 8) * sizeof *v.logits);
    double t0 = now_ms();
    int rc = sd_jmask_init(&v.jm, v.t, &d);
    double build = now_ms() - t0;
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    static const char *const prefixes[] = {
        "",
        "{",
        "{\"k",
        "{\"k\":",
        "{\"k\": -1.5e",
        "{\"k\":[tr",
        "{\"k\":\"",
        "{\"k\":\"\xe4\xb8",
        "{\"k\":\"\\u00",
        "{\"k\":{\"a\":[1, ",
        "{\"k\":1",
    };
    size_t n_pre = sizeof prefixes / sizeof *prefixes;
    double cold = 0, cold_max = 0, warm = 0;
    for (size_t k = 0; rc == 0 && v.logits && k < n_pre; k++) {
        sd_jfsm m;
        sd_jfsm_init(&m);
        REQUIRE(sd_jfsm_feed(&m, prefixes[k], strlen(prefixes[k])) == 0);
        for (int32_t i = 0; i < v.n; i++)
            v.logits[i] = 0;
        t0 = now_ms();
        sd_jmask_apply(v.jm, &m, &v.eos, 1, v.logits, v.n);
        double c = now_ms() - t0;
        cold += c;
        cold_max = c > cold_max ? c : cold_max;
        t0 = now_ms();
        for (int rep = 0; rep < 100; rep++)
            sd_jmask_apply(v.jm, &m, &v.eos, 1, v.logits, v.n);
        warm += (now_ms() - t0) / 100;
        CHECK_MSG(check_state(&v, v.jm, &m), "state '%s'", prefixes[k]);
    }
    double gen_ms = 0;
    int steps = rc == 0 ? generate(&v, 99, 0.01f, 3000, &gen_ms) : 0;
    CHECK(steps > 0);
    fprintf(stderr,
            "  qwen3 (%d tokens): trie build %.1f ms; apply cold %.2f ms mean, %.2f ms max; cached %.1f us; "
            "greedy run %d tokens at %.1f us/token\n",
            v.n, build, cold / n_pre, cold_max, 1e3 * warm / n_pre, steps,
            steps > 0 ? 1e3 * gen_ms / steps : 0);
    vocab_free(&v);
}

static void test_jmask_init_errors(void)
{
    sd_jmask *jm = NULL;
    sd_diag d = {0};
    CHECK(sd_jmask_init(&jm, NULL, &d) == SD_EINVAL && jm == NULL && d.msg[0]);
    sd_jmask_free(NULL);
}

int main(void)
{
    RUN(test_jmask_init_errors);
    RUN(test_jmask_tiny_brute_force);
    RUN(test_jmask_after_complete);
    RUN(test_jmask_can_end);
    RUN(test_jmask_greedy_generation);
    RUN(test_jmask_qwen3);
    return sd_test_done();
}
