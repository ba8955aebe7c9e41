/* test_stopstr: the stop-string matcher alone — hold-back of partial matches, matches across
 * pushes, the earliest of several strings, the final flush. */
#include "engine/stopstr.h"

#include "engine/diag.h"
#include "tests/harness.h"

static void test_stopstr(void)
{
    sd_stopstr ss;
    const char *stops[] = {"STOP", "ab"};
    REQUIRE(sd_stopstr_init(&ss, stops, 2) == 0);
    const char *out;
    size_t n;
    CHECK(sd_stopstr_push(&ss, "xyS", 3, 0, &out, &n) == 0 && n == 2 && memcmp(out, "xy", 2) == 0);
    CHECK(sd_stopstr_push(&ss, "T", 1, 0, &out, &n) == 0 && n == 0); /* "ST" may become STOP */
    CHECK(sd_stopstr_push(&ss, "x", 1, 0, &out, &n) == 0 && n == 3 && memcmp(out, "STx", 3) == 0);
    CHECK(sd_stopstr_push(&ss, "a", 1, 0, &out, &n) == 0 && n == 0);
    CHECK(sd_stopstr_push(&ss, "c", 1, 1, &out, &n) == 0 && n == 2 && memcmp(out, "ac", 2) == 0);
    CHECK(sd_stopstr_push(&ss, "1ST", 3, 0, &out, &n) == 0 && n == 1);
    CHECK(sd_stopstr_push(&ss, "OPtail", 6, 0, &out, &n) == 1 && n == 0); /* spans two pushes */
    CHECK(sd_stopstr_push(&ss, "more", 4, 1, &out, &n) == 1 && n == 0);   /* nothing after a stop */
    sd_stopstr_free(&ss);
    /* the earliest match wins, whichever string it is; text before it is released */
    REQUIRE(sd_stopstr_init(&ss, stops, 2) == 0);
    CHECK(sd_stopstr_push(&ss, "12abSTOP", 8, 0, &out, &n) == 1 && n == 2 && memcmp(out, "12", 2) == 0);
    sd_stopstr_free(&ss);
    /* no stop strings: everything passes through at once */
    REQUIRE(sd_stopstr_init(&ss, NULL, 0) == 0);
    CHECK(sd_stopstr_push(&ss, "abc", 3, 0, &out, &n) == 0 && n == 3);
    sd_stopstr_free(&ss);
    const char *bad[] = {""};
    CHECK(sd_stopstr_init(&ss, bad, 1) == SD_EINVAL);
    sd_stopstr_free(&ss);
    sd_stopstr_free(NULL);
}

/* Random texts pushed in random pieces: the released text is always a prefix of the text,
 * and in the end it is the text up to the earliest occurrence of any stop string (computed
 * here with strstr over the whole text), or all of it. */
static void test_stopstr_random(void)
{
    const char *stops[] = {"ab", "bba", "STOP!"};
    const char alpha[] = "abST OP!";
    unsigned x = 12345;
    for (int iter = 0; iter < 2000; iter++) {
        char text[64];
        int n = 1 + (int)(x % 40);
        for (int i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            text[i] = alpha[(x >> 16) % 8];
        }
        text[n] = '\0';
        int n_stop = 1 + iter % 3;
        size_t want = (size_t)n;
        for (int k = 0; k < n_stop; k++) {
            const char *m = strstr(text, stops[k]);
            if (m && (size_t)(m - text) < want)
                want = (size_t)(m - text);
        }
        int want_match = want < (size_t)n;
        sd_stopstr ss;
        REQUIRE(sd_stopstr_init(&ss, stops, n_stop) == 0);
        char got[64];
        size_t n_got = 0;
        int matched = 0;
        for (int pos = 0; pos < n;) {
            x = x * 1103515245u + 12345u;
            int len = 1 + (int)((x >> 16) % 4);
            if (pos + len > n)
                len = n - pos;
            const char *out;
            size_t m;
            int rc = sd_stopstr_push(&ss, text + pos, (size_t)len, pos + len == n, &out, &m);
            REQUIRE(rc >= 0);
            memcpy(got + n_got, out, m);
            n_got += m;
            CHECK(n_got <= (size_t)n && memcmp(got, text, n_got) == 0);
            matched |= rc;
            pos += len;
        }
        CHECK_MSG(matched == want_match && n_got == want, "text \"%s\": released %zu bytes, want %zu", text,
                  n_got, want);
        sd_stopstr_free(&ss);
    }
}

int main(void)
{
    RUN(test_stopstr);
    RUN(test_stopstr_random);
    return sd_test_done();
}
