/* test_jschema_re: strings held to a "pattern" or a "format" (engine/jschema_re.c) — the DFA's
 * verdict on random strings against glibc's POSIX regexec on the same patterns; the formats on
 * hand-picked values; the first byte rejected, with maxLength, escapes and non-ASCII characters;
 * every prefix taken can still be completed; patterns outside the subset refused with a reason,
 * and left out by a lenient compile. */
#include <regex.h>

#include "tests/engine/jschema_ref.h"

/* The schema {"type": "string", "pattern": pat} (pat as JSON string content), compiled. */
static sd_jschema *compile_pattern(const char *pat, const char *extra)
{
    char json[1024];
    snprintf(json, sizeof json, "{\"type\": \"string\", \"pattern\": \"%s\"%s}", pat, extra ? extra : "");
    sd_jschema *s = NULL;
    sd_diag d = {0};
    int rc = sd_jschema_compile(&s, json, strlen(json), &d);
    CHECK_MSG(rc == 0, "%s: %s", json, d.msg);
    return rc ? NULL : s;
}

/* Whether the JSON string "text" (no quotes or backslashes in text) is a whole document. */
static int takes_string(const sd_jschema *s, const char *text)
{
    tstate st;
    sd_jschema_init(s, &st);
    size_t n = strlen(text);
    return sd_jschema_feed(s, &st, "\"", 1) == 0 && sd_jschema_feed(s, &st, text, n) == 0 &&
           sd_jschema_feed(s, &st, "\"", 1) == 0 && sd_jschema_complete(s, &st);
}

/* The DFA against regexec (a search, as JSON Schema's patterns are) on random strings over an
 * alphabet that the patterns mention, and each accepted prefix of them still completable: some
 * continuation in the alphabet and the closing quote takes it (found by breadth-first search). */
static void test_against_posix(void)
{
    static const char *const pats[] = {
        "^a+b$",       "ab",    "^(ab|ba)*$",     "^[a-c]{2,4}x?$",
        "^[^a]*$",     "a.c",   "^(a|b)(c|d)*e$", "^x{3}$",
        "[0-9]-[0-9]", "b$",    "^a?b?c?$",       "^(a+|b+)c$",
        "^[ab]{0,3}$", "^.-.$", "c{2,}",          "^(ab){1,2}(cd)?$",
    };
    static const char alphabet[] = "abcdex-01";
    uint64_t rng = 77;
    for (size_t k = 0; k < sizeof pats / sizeof pats[0]; k++) {
        sd_jschema *s = compile_pattern(pats[k], NULL);
        regex_t re;
        REQUIRE(regcomp(&re, pats[k], REG_EXTENDED | REG_NOSUB) == 0);
        int agree = 1, matched = 0;
        for (int t = 0; s && t < 3000 && agree; t++) {
            char text[16];
            int n = (int)rnd(&rng, 10);
            for (int i = 0; i < n; i++)
                text[i] = alphabet[rnd(&rng, sizeof alphabet - 1)];
            text[n] = '\0';
            int want = regexec(&re, text, 0, NULL, 0) == 0, got = takes_string(s, text);
            matched += want;
            CHECK_MSG(got == want, "'%s' on '%s': validator %d, regexec %d", pats[k], text, got, want);
            agree = got == want;
        }
        CHECK_MSG(matched > 0, "'%s' matched none of the strings", pats[k]);
        regfree(&re);
        sd_jschema_free(s);
    }
}

/* Every prefix the validator takes can be completed: from each state reached by a random prefix
 * that was taken, a breadth-first search over the alphabet (and the closing quote) finds a
 * complete document within a few characters. */
static void test_prefixes_complete(void)
{
    static const char *const pats[] = {"^(ab|ba)*c$", "^[0-9]{2}-[0-9]$", "^(a+|b+)c$", "x{3}y"};
    static const char alphabet[] = "abcxy0-\"";
    uint64_t rng = 3;
    for (size_t k = 0; k < sizeof pats / sizeof pats[0]; k++) {
        sd_jschema *s = compile_pattern(pats[k], NULL);
        if (!s)
            continue;
        for (int t = 0; t < 300; t++) {
            tstate st;
            sd_jschema_init(s, &st);
            REQUIRE(sd_jschema_feed(s, &st, "\"", 1) == 0);
            int n = (int)rnd(&rng, 6);
            for (int i = 0; i < n; i++) {
                char c = alphabet[rnd(&rng, sizeof alphabet - 2)]; /* not the quote */
                tstate save = st;
                if (sd_jschema_feed(s, &st, &c, 1) < 0)
                    st = save;
            }
            /* breadth-first: states after 0..6 more bytes */
            tstate front[256], next[256];
            int nf = 1, found = 0;
            front[0] = st;
            for (int depth = 0; depth < 6 && !found && nf; depth++) {
                int nn = 0;
                for (int i = 0; i < nf && !found; i++)
                    for (size_t a = 0; a < sizeof alphabet - 1 && !found; a++) {
                        tstate c = front[i];
                        if (sd_jschema_feed(s, &c, &alphabet[a], 1) < 0)
                            continue;
                        int seen = 0; /* many texts reach one state: keep each once */
                        for (int j = 0; j < nn && !seen; j++)
                            seen = memcmp(&next[j], &c, sd_jschema_state_size(s)) == 0;
                        if (sd_jschema_complete(s, &c))
                            found = 1;
                        else if (!seen && nn < (int)(sizeof next / sizeof next[0]))
                            next[nn++] = c;
                    }
                memcpy(front, next, sizeof front[0] * (size_t)nn);
                nf = nn;
            }
            CHECK_MSG(found, "'%s': a prefix taken that nothing completes", pats[k]);
        }
        sd_jschema_free(s);
    }
}

static void test_formats(void)
{
    static const struct {
        const char *format, *ok[3], *bad[3];
    } cases[] = {
        {"date", {"2024-02-29", "1999-12-31", "0001-01-01"}, {"2024-13-01", "2024-1-01", "24-01-01"}},
        {"time", {"23:59:60Z", "00:00:00.5+05:30", "12:30:00-08:00"}, {"24:00:00Z", "12:30:00", "1:00:00Z"}},
        {"date-time",
         {"2024-05-06T07:08:09Z", "2024-05-06T07:08:09.123+01:00", "1970-01-01T00:00:00Z"},
         {"2024-05-06 07:08:09Z", "2024-05-06T07:08Z", "2024-05-06"}},
        {"uuid",
         {"123e4567-e89b-12d3-a456-426614174000", "AAAAAAAA-bbbb-CCCC-dddd-eeeeeeeeeeee", NULL},
         {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g", NULL}},
        {"email", {"a@b.co", "first.last+tag@mail.example.org", NULL}, {"a@b", "@b.co", "a b@c.de"}},
        {"ipv4", {"192.168.0.1", "255.255.255.255", "0.0.0.0"}, {"256.1.1.1", "1.2.3", "01.2.3.4x"}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char json[128];
        snprintf(json, sizeof json, "{\"type\": \"string\", \"format\": \"%s\"}", cases[k].format);
        sd_jschema *s = NULL;
        sd_diag d = {0};
        int rc = sd_jschema_compile(&s, json, strlen(json), &d);
        CHECK_MSG(rc == 0, "%s: %s", json, d.msg);
        if (rc)
            continue;
        for (int i = 0; i < 3; i++) {
            CHECK_MSG(!cases[k].ok[i] || takes_string(s, cases[k].ok[i]), "%s: '%s' refused", cases[k].format,
                      cases[k].ok[i]);
            CHECK_MSG(!cases[k].bad[i] || !takes_string(s, cases[k].bad[i]), "%s: '%s' taken",
                      cases[k].format, cases[k].bad[i]);
        }
        sd_jschema_free(s);
    }
}

/* Where a text is first rejected: maxLength beside the pattern counts what the pattern still
 * needs; escapes move the DFA by the character they stand for (\u is not written); non-ASCII
 * characters are the one symbol '.' and negated classes match. */
static void test_reject_at(void)
{
    static const struct {
        const char *pat, *extra, *text;
        long at; /* -1: a whole document */
    } cases[] = {
        {"^a+b$", ", \"maxLength\": 3", "\"aab\"", -1},
        {"^a+b$", ", \"maxLength\": 3", "\"aaa", 3}, /* the third a leaves no room for the b */
        {"^a\\\"b$", NULL, "\"a\\\"b\"", -1},        /* a quote, escaped */
        {"^a\\\"b$", NULL, "\"a\\u0022b\"", 3},      /* not as \u */
        {"^a\\\\n$", NULL, "\"a\\n\"", -1},          /* the pattern a\n: a newline, written \n */
        {"^x$", NULL, "\"\\", 1},                    /* no escape leads to x */
        {"^.$", NULL, "\"\xc3\xa9\"", -1},
        {"^[a-z]$", NULL, "\"\xc3\xa9\"", 1},
        {"^[^a-z]$", NULL, "\"\xe2\x82\xac\"", -1},
        {"^ab$", NULL, "\"ac", 2},
        {"^ab$", NULL, "\"a\"", 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sd_jschema *s = compile_pattern(cases[k].pat, cases[k].extra);
        if (!s)
            continue;
        long at = reject_at(s, cases[k].text);
        CHECK_MSG(at == cases[k].at, "case %zu (%s on %s): rejected at %ld, want %ld", k, cases[k].pat,
                  cases[k].text, at, cases[k].at);
        if (cases[k].at < 0) {
            tstate st;
            sd_jschema_init(s, &st);
            CHECK(sd_jschema_feed(s, &st, cases[k].text, strlen(cases[k].text)) == 0 &&
                  sd_jschema_complete(s, &st));
        }
        sd_jschema_free(s);
    }
}

static void test_refused(void)
{
    static const struct {
        const char *schema, *msg;
    } cases[] = {
        {"{'type':'string','pattern':'(?=a)b'}", "'pattern': lookarounds"},
        {"{'type':'string','pattern':'a{3,2}'}", "'pattern': repeat counts above 64, or out of order"},
        {"{'type':'string','pattern':'a{65}'}", "'pattern': repeat counts above 64"},
        {"{'type':'string','pattern':'[b-a]'}", "'pattern': a class range out of order"},
        {"{'type':'string','pattern':'\\\\p{L}'}", "'pattern': an unsupported escape"},
        {"{'type':'string','pattern':'\xc3\xa9'}", "'pattern': non-ASCII characters are not supported"},
        {"{'type':'string','pattern':'a|^b'}", "'^' and '$' only at the pattern's ends"},
        {"{'type':'string','pattern':'^a|b$'}", "anchors beside a top-level '|' are not supported"},
        {"{'type':'string','pattern':'a|b$'}", "anchors beside a top-level '|' are not supported"},
        {"{'type':'string','pattern':'(a'}", "'pattern': an unclosed '('"},
        {"{'type':'string','pattern':'a)'}", "'pattern': an unmatched ')'"},
        {"{'type':'string','pattern':'^[^\\\\s\\\\S]$'}", "'pattern': it matches no string"},
        {"{'type':'string','pattern':'a','minLength':1}", "'pattern' beside 'minLength' is not supported"},
        {"{'type':'string','pattern':'a','format':'date'}", "'pattern' beside 'format' is not supported"},
        {"{'type':'integer','pattern':'1'}", "'pattern' is supported on \"type\": \"string\""},
        {"{'type':'string','format':'hostname'}", "'format': 'hostname' is not supported"},
        {"{'type':'string','pattern':1}", "'pattern' must be a string"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sd_jschema *s = NULL;
        sd_diag d = {0};
        const char *json = q(cases[k].schema);
        CHECK_MSG(sd_jschema_compile(&s, json, strlen(json), &d) == SD_EINVAL && !s, "case %zu compiled", k);
        CHECK_MSG(strstr(d.msg, cases[k].msg), "case %zu: %s", k, d.msg);
        /* lenient: what cannot be followed is left out */
        if (strstr(cases[k].schema, "minLength") || strstr(cases[k].schema, "integer") ||
            strstr(cases[k].schema, "'pattern':1"))
            continue;
        CHECK_MSG(sd_jschema_compile_opts(&s, json, strlen(json), SD_JSCHEMA_LENIENT, &d) == 0,
                  "case %zu lenient: %s", k, d.msg);
        sd_jschema_free(s);
        s = NULL;
    }
}

int main(void)
{
    RUN(test_against_posix);
    RUN(test_prefixes_complete);
    RUN(test_formats);
    RUN(test_reject_at);
    RUN(test_refused);
    return sd_test_done();
}
