/* test_toolcall: the tool-call validator (engine/toolcall.h) in its forced form: hand-written calls
 * accepted byte by byte (complete only at their end) or rejected at the right byte; canonical
 * states; compile errors naming the tool; random walks over the allowed bytes that always finish
 * in a call that jansson parses into the expected shape. Lazy mode: test_toolcall_lazy.c. */
#include "tests/engine/toolcall_ref.h"

/* The index of the first byte the validator rejects, or -1 when it takes the whole text; checks
 * that complete and can_end say 1 exactly after the last byte of a whole call. */
static long first_reject(const sd_tcall *t, const char *text, int *ret_complete)
{
    tstate st;
    sd_tcall_init(t, &st);
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i++) {
        if (sd_tcall_complete(t, &st) || sd_tcall_can_end(t, &st)) {
            CHECK_MSG(sd_tcall_step(t, &st, (unsigned char)text[i]) < 0, "a byte after complete");
            return (long)i;
        }
        if (sd_tcall_step(t, &st, (unsigned char)text[i]) < 0)
            return (long)i;
    }
    *ret_complete = sd_tcall_complete(t, &st);
    CHECK(sd_tcall_can_end(t, &st) == *ret_complete);
    return -1;
}

static void check_texts(const sd_tcall *t, const char *const *texts, const long *want, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int complete = 0;
        const char *text = q(texts[k]);
        long at = first_reject(t, text, &complete);
        long got = at >= 0 ? at : complete ? DOC : PREFIX;
        CHECK_MSG(got == want[k], "text %zu (%s): got %ld, want %ld", k, text, got, want[k]);
    }
}

/* ---- one call --------------------------------------------------------------------------------- */

/* Without "strict": true the content assertions jschema lacks are left out (the structure and an
 * integer's bounds are still enforced); with it they are refused. */
static void test_lenient(void)
{
    const char *params =
        "'parameters':{'type':'object','required':['n'],'additionalProperties':{'type':'string'},"
        "'properties':{'n':{'type':'integer','minimum':0,'maximum':9},"
        "'s':{'type':'string','format':'date','pattern':'^2'}}}";
    char spec[512];
    snprintf(spec, sizeof spec, "[{'name':'f',%s}]", params);
    sd_tcall *t = compile_ok(q(spec), 0);
    REQUIRE(t);
    tstate st;
    sd_tcall_init(t, st.w);
    const char *ok = q("{'name': 'f', 'arguments': {'n': 7, 's': 'x'}}");
    CHECK(sd_tcall_feed(t, st.w, ok, strlen(ok)) == 0 && sd_tcall_complete(t, st.w));
    sd_tcall_init(t, st.w);
    const char *big = q("{'name': 'f', 'arguments': {'n': 12"); /* maximum 9: the '2' */
    CHECK(sd_tcall_feed(t, st.w, big, strlen(big) - 1) == 0 && sd_tcall_feed(t, st.w, "2", 1) < 0);
    sd_tcall_init(t, st.w);
    const char *extra = q("{'name': 'f', 'arguments': {'n': 1, 'z': 'x'}}"); /* no extra keys, ever */
    CHECK(sd_tcall_feed(t, st.w, extra, strlen(extra)) < 0);
    sd_tcall_init(t, st.w);
    const char *no_n = q("{'name': 'f', 'arguments': {'s': 'x'}}"); /* required still holds */
    CHECK(sd_tcall_feed(t, st.w, no_n, strlen(no_n)) < 0);
    sd_tcall_free(t);
    snprintf(spec, sizeof spec, "[{'name':'f','strict':true,%s}]", params);
    sd_diag d = {0};
    CHECK(sd_tcall_compile(&t, q(spec), strlen(q(spec)), 0, SD_TCALL_FORCED, &d) == SD_EINVAL);
    CHECK_MSG(strstr(d.msg, "not supported"), "%s", d.msg);
}

static void test_single_accepts(void)
{
    static const char *const texts[] = {
        "{'name': 'get', 'arguments': {'id': 5}}",
        "{'name': 'get', 'arguments': { 'id' :\n-12 }}", /* whitespace inside the arguments */
        "{'name': 'get_time', 'arguments': {}}",
        "{'name': 'get_time', 'arguments': {'tz': 'a \\'q\\' \\\\ \\n \\u00e9 \xc3\xa9 \\ud83d\\ude00'}}",
        "{'name': 'get_weather', 'arguments': {'city': 'Oslo', 'unit': 'c'}}",
        "{'name': 'get_weather', 'arguments': {'city': '', 'unit': 'f', 'days': [1, -2, 3], "
        "'opts': {'deep': true}}}",
        "{'name': 'ping', 'arguments': {}}",
        "{'name': 'Z-9', 'arguments': {}}",
        "{'name': 'get_", /* a prefix */
    };
    static const long want[] = {DOC, DOC, DOC, DOC, DOC, DOC, DOC, DOC, PREFIX};
    sd_tcall *t = compile_ok(tools, 0);
    REQUIRE(t);
    size_t size = sd_tcall_state_size(t);
    CHECK_MSG(size % 8 == 0 && size <= SD_TCALL_STATE_MAX && size <= SD_JVAL_MAX_STATE, "size %zu", size);
    check_texts(t, texts, want, sizeof texts / sizeof *texts);
    sd_tcall_free(t);
    sd_tcall_free(NULL);
}

static void test_single_rejects(void)
{
    static const char *const texts[] = {
        "{'name': 'put'",                            /* p of ping, then no name */
        "{'name': 'ge'",                             /* a prefix of names, then its quote */
        "{'name': 'get_'",                           /* the same past a full name */
        "{'name': 'get_timex'",                      /* past the longest match */
        "{'name':'get'",                             /* the literal's space */
        "{'Name': 'get'",                            /* the literal's key */
        " {'name': 'get'",                           /* whitespace before the call */
        "{'name': 'get',  'arguments': {}}",         /* whitespace in a literal */
        "{'name': 'get', 'arguments':  {'id': 1}}",  /* whitespace before the arguments */
        "{'name': 'get', 'arguments': {'id': 1} }",  /* whitespace after them */
        "{'name': 'get', 'arguments': {'id': 1}}\n", /* anything after the call */
        "{'name': 'get', 'arguments': {'id': 1}}x",  /* anything after the call */
        "{'name': 'get', 'arguments': {}}",          /* a required key missing */
        "{'name': 'get', 'arguments': {'id': 'x'}}", /* a wrong type */
        "{'name': 'get', 'arguments': {'id': 1.5}}", /* an integer's fraction */
        "{'name': 'get_weather', 'arguments': {'city': 'Oslo', 'unit': 'k'}}", /* outside the enum */
        "{'name': 'get_weather', 'arguments': {'unit': 'c'}}",                 /* order: city first */
        "{'name': 'ping', 'arguments': {'a': 1}}",                             /* no parameters */
        "{'name': 'ping', 'arguments': null}",                                 /* not an object */
        "{'name': 'ping', 'arguments': {}, 'x': 1}",                           /* an extra key */
        "[{'name': 'ping', 'arguments': {}}]",                                 /* an array */
    };
    static const long want[] = {11, 12, 14, 18, 8,  2,  0,  16, 29, 38, 39,
                                39, 30, 36, 37, 63, 39, 31, 30, 32, 0};
    _Static_assert(sizeof want / sizeof *want == sizeof texts / sizeof *texts, "one index per text");
    sd_tcall *t = compile_ok(tools, 0);
    REQUIRE(t);
    check_texts(t, texts, want, sizeof texts / sizeof *texts);
    sd_tcall_free(t);
}

/* Texts that reach the same place leave equal states: the mask's cache keys on their bytes. */
static void test_canonical_states(void)
{
    static const char *const pairs[][2] = {
        {"{'name': 'get', 'arguments': {'id': 5}", "{'name': 'ping', 'arguments': {}"},
        {"{'name': 'get_time', 'arguments': {'tz': 'a", "{'name': 'get_time', 'arguments': {'tz': 'bcd"},
        {"{'name': 'get_w", "{'name': 'get_we"}, /* a different place: the bytes typed differ */
    };
    static const int equal[] = {1, 1, 0};
    sd_tcall *t = compile_ok(tools, 0);
    REQUIRE(t);
    check_pairs(t, pairs, equal, NULL, sizeof pairs / sizeof *pairs, 0);
    /* feed is all or nothing */
    size_t size = sd_tcall_state_size(t);
    tstate a, b;
    sd_tcall_init(t, &a);
    const char *ok = q("{'name': 'get_time'"), *bad = q(", 'argumentz'");
    REQUIRE(sd_tcall_feed(t, &a, ok, strlen(ok)) == 0);
    memcpy(&b, &a, size);
    CHECK(sd_tcall_feed(t, &a, bad, strlen(bad)) == -1 && memcmp(&a, &b, size) == 0);
    sd_tcall_free(t);
}

/* ---- parallel calls ----------------------------------------------------------------------------- */

/* n calls of ping in an array, with `tail` after them. */
static const char *ping_array(int n, const char *tail)
{
    static char buf[4096];
    size_t len = 0;
    buf[len++] = '[';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s{\"name\": \"ping\", \"arguments\": {}}",
                                i ? ", " : "");
    snprintf(buf + len, sizeof buf - len, "%s", tail);
    return buf;
}

static void test_parallel(void)
{
    static const char *const texts[] = {
        "[{'name': 'ping', 'arguments': {}}]",
        "[{'name': 'get', 'arguments': {'id': 1}}, {'name': 'get_time', 'arguments': {}}]",
        "[{'name': 'get', 'arguments': {'id': 1}}, {'name': 'get', 'arguments': {'id': 1}}, "
        "{'name': 'get_weather', 'arguments': {'city': 'x', 'unit': 'c', 'opts': {'deep': false}}}]",
        "[{'name': 'ping', 'arguments': {}}, ",
        "[]",                                                                    /* no call */
        "{'name': 'ping', 'arguments': {}}",                                     /* not in an array */
        "[{'name': 'ping', 'arguments': {}},{'name': 'ping', 'arguments': {}}]", /* ", " */
        "[{'name': 'ping', 'arguments': {}} ]",
        "[{'name': 'ping', 'arguments': {}}] ",
        "[{'name': 'ping', 'arguments': {}}]]",
        "[ {'name': 'ping'",
    };
    static const long want[] = {DOC, DOC, DOC, PREFIX, 1, 0, 35, 34, 35, 35, 1};
    _Static_assert(sizeof want / sizeof *want == sizeof texts / sizeof *texts, "one index per text");
    sd_tcall *t = compile_ok(tools, 1);
    REQUIRE(t);
    check_texts(t, texts, want, sizeof texts / sizeof *texts);
    int complete = 0;
    CHECK(first_reject(t, ping_array(SD_TCALL_MAX_CALLS, "]"), &complete) == -1 && complete);
    const char *over = ping_array(SD_TCALL_MAX_CALLS, ", {");
    long at = first_reject(t, over, &complete);
    CHECK_MSG(at == (long)strlen(over) - 3, "the call past the limit: rejected at %ld of %zu", at,
              strlen(over));
    sd_tcall_free(t);
}

/* ---- compile errors ----------------------------------------------------------------------------- */

static void test_compile_errors(void)
{
    static char many[16384];
    size_t len = 0;
    many[len++] = '[';
    for (int i = 0; i <= SD_TCALL_MAX_TOOLS; i++)
        len += (size_t)snprintf(many + len, sizeof many - len, "%s{'name':'t%d'}", i ? "," : "", i);
    snprintf(many + len, sizeof many - len, "]");
    static const struct {
        const char *spec, *msg;
    } cases[] = {
        {"[{'name':", "tools: invalid JSON"},
        {"not json", "tools: invalid JSON"},
        {"[{'name':'a','name':'b'}]", "tools: invalid JSON"},
        {"{'name':'a'}", "tools: must be an array of 1 to 128 tools"},
        {"[]", "tools: must be an array of 1 to 128 tools"},
        {many, "tools: must be an array of 1 to 128 tools"},
        {"[1]", "tools[0]: must be an object"},
        {"[{'parameters':{}}]", "tools[0]: 'name' must be a string"},
        {"[{'name':'a'},{'name':'a b'}]", "tools[1]: 'name' must match [A-Za-z0-9_-]{1,64}"},
        {"[{'name':''}]", "tools[0]: 'name' must match"},
        {"[{'name':'\xc3\xa9'}]", "tools[0]: 'name' must match"},
        {"[{'name':'a\\n'}]", "tools[0]: 'name' must match"},
        {"[{'name':'x1234567890123456789012345678901234567890123456789012345678901234'}]",
         "tools[0]: 'name' must match"},
        {"[{'name':'a'},{'name':'b'},{'name':'a'}]", "tools[2] (a): the name is also tools[0]'s"},
        {"[{'name':'a'},{'name':'f','parameters':{'type':'string'}}]",
         "tools[1] (f): parameters must describe an object"},
        {"[{'name':'f','parameters':{'type':['object','null']}}]",
         "tools[0] (f): parameters must describe an object"},
        {"[{'name':'f','parameters':{'anyOf':[{'type':'object'},{'type':'array','items':{'type':'null'}}]}}]",
         "tools[0] (f): parameters must describe an object"},
        {"[{'name':'x'},{'name':'y'},{'name':'get_weather','strict':true,'parameters':{'type':'object',"
         "'properties':{'x':{'type':'integer','multipleOf':2}}}}]",
         "tools[2] (get_weather): parameters/properties/x: 'multipleOf' is not supported"},
        {"[{'name':'f','parameters':{}}]", "tools[0] (f): parameters: no 'type'"},
        {"[{'name':'f','strict':1}]", "tools[0] (f): 'strict' must be a boolean"},
        /* lenient (no "strict": true) leaves out content assertions, not the structure */
        {"[{'name':'f','parameters':{'type':'object','properties':{'x':{'type':'string','pattern':'a'}},"
         "'patternProperties':{},'not':{}}}]",
         "tools[0] (f): parameters: 'not' is not supported"},
        {"[{'name':'f','parameters':true}]", "tools[0] (f): parameters: a schema must be an object"},
        {"[{'name':'f','parameters':{'type':'object','properties':{'a':{'type':'strin'}}}}]",
         "tools[0] (f): parameters/properties/a: 'type' must be one of"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        sd_tcall *t = (sd_tcall *)&cases; /* must stay untouched */
        sd_diag d = {0};
        const char *json = q(cases[k].spec);
        int rc = sd_tcall_compile(&t, json, strlen(json), k & 1, SD_TCALL_FORCED, &d);
        CHECK_MSG(rc == SD_EINVAL && d.code == SD_EINVAL, "case %zu: rc %d", k, rc);
        CHECK_MSG(strstr(d.msg, cases[k].msg) == d.msg, "case %zu: message '%s', want '%s'", k, d.msg,
                  cases[k].msg);
        CHECK_MSG(t == (sd_tcall *)&cases, "case %zu: *ret written on failure", k);
    }
}

/* A long property path is cut inside jschema's message, never inside a UTF-8 character. */
static void test_long_message(void)
{
    char spec[4096];
    size_t len = (size_t)snprintf(spec, sizeof spec,
                                  "[{'name':'%s','strict':true,'parameters':{'type':'object','properties':{'",
                                  "n123456789012345678901234567890123456789012345678901234567890123");
    for (int i = 0; i < 200; i++)
        len += (size_t)snprintf(spec + len, sizeof spec - len, "\xc3\xa9");
    snprintf(spec + len, sizeof spec - len, "':{'type':'string','format':'%0300d'}}}}]", 0);
    sd_tcall *t = NULL;
    sd_diag d = {0};
    const char *json = q(spec);
    CHECK(sd_tcall_compile(&t, json, strlen(json), 0, SD_TCALL_FORCED, &d) == SD_EINVAL);
    CHECK_MSG(strncmp(d.msg, "tools[0] (n1234", 15) == 0, "%s", d.msg);
    json_t *s = json_string(d.msg); /* NULL for invalid UTF-8 */
    CHECK_MSG(s != NULL, "not UTF-8: %s", d.msg);
    json_decref(s);
}

/* ---- random walks ------------------------------------------------------------------------------ */

/* From the start, random allowed bytes until complete: never a dead end before it, nothing
 * after it. Returns the text's length (0: it failed), the text in buf. */
static size_t walk(const sd_tcall *t, uint64_t *rng, char *buf, size_t cap)
{
    tstate st;
    unsigned char allowed[256];
    sd_tcall_init(t, &st);
    size_t n = 0;
    for (; n < cap - 1; n++) {
        int k = allowed_bytes(t, &st, allowed);
        if (sd_tcall_complete(t, &st)) {
            CHECK_MSG(k == 0, "%d bytes allowed after complete", k);
            break;
        }
        CHECK_MSG(k > 0, "a dead end after %zu bytes: %.*s", n, (int)n, buf);
        if (k == 0)
            return 0;
        buf[n] = (char)allowed[rng_next(rng) % (unsigned)k];
        sd_tcall_step(t, &st, (unsigned char)buf[n]); /* allowed_bytes took it */
    }
    buf[n] = '\0';
    CHECK_MSG(sd_tcall_complete(t, &st), "not finished within %zu bytes", cap - 1);
    return sd_tcall_complete(t, &st) ? n : 0;
}

static void check_walk(const char *text, size_t n, int parallel, const char *const *names, int n_names)
{
    json_error_t je;
    /* random integers outgrow json_int_t: read them as reals */
    json_t *v = json_loadb(text, n, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
    CHECK_MSG(v != NULL, "does not parse (%s): %s", je.text, text);
    if (!v)
        return;
    if (!parallel) {
        check_call(v, names, n_names, text);
    } else {
        CHECK_MSG(json_is_array(v) && json_array_size(v) >= 1 && json_array_size(v) <= SD_TCALL_MAX_CALLS,
                  "array: %s", text);
        for (size_t i = 0; i < json_array_size(v); i++)
            check_call(json_array_get(v, i), names, n_names, text);
    }
    json_decref(v);
}

static void test_random_walks(void)
{
    static const char *const names[] = {"get", "get_time", "get_weather", "ping", "Z-9"};
    static char buf[WALK_MAX];
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    int seen[5] = {0};
    size_t longest = 0;
    for (int parallel = 0; parallel < 2; parallel++) {
        sd_tcall *t = compile_ok(tools, parallel);
        REQUIRE(t);
        for (int w = 0; w < 500; w++) {
            size_t n = walk(t, &rng, buf, sizeof buf);
            if (!n)
                break;
            longest = n > longest ? n : longest;
            check_walk(buf, n, parallel, names, 5);
            for (int i = 0; i < 5; i++) {
                char key[80];
                snprintf(key, sizeof key, "\"name\": \"%s\"", names[i]);
                seen[i] += strstr(buf, key) != NULL;
            }
        }
        sd_tcall_free(t);
    }
    for (int i = 0; i < 5; i++)
        CHECK_MSG(seen[i] > 0, "no walk called %s", names[i]);
    fprintf(stderr, "  1000 walks, the longest %zu bytes\n", longest);
}

/* 128 tools whose names nest as prefixes (t1, t12, t127): walks reach names in the set only. */
static void test_random_walks_many(void)
{
    static char spec[16384], names_buf[SD_TCALL_MAX_TOOLS][8], buf[WALK_MAX];
    const char *names[SD_TCALL_MAX_TOOLS];
    size_t len = 0;
    spec[len++] = '[';
    for (int i = 0; i < SD_TCALL_MAX_TOOLS; i++) {
        snprintf(names_buf[i], sizeof names_buf[i], "t%d", i);
        names[i] = names_buf[i];
        len += (size_t)snprintf(spec + len, sizeof spec - len, "%s{'name':'%s'}", i ? "," : "", names[i]);
    }
    snprintf(spec + len, sizeof spec - len, "]");
    sd_tcall *t = compile_ok(spec, 1);
    REQUIRE(t);
    uint64_t rng = 42;
    for (int w = 0; w < 50; w++) {
        size_t n = walk(t, &rng, buf, sizeof buf);
        if (!n)
            break;
        check_walk(buf, n, 1, names, SD_TCALL_MAX_TOOLS);
    }
    sd_tcall_free(t);
}

int main(void)
{
    RUN(test_lenient);
    RUN(test_single_accepts);
    RUN(test_single_rejects);
    RUN(test_canonical_states);
    RUN(test_parallel);
    RUN(test_compile_errors);
    RUN(test_long_message);
    RUN(test_random_walks);
    RUN(test_random_walks_many);
    return sd_test_done();
}
