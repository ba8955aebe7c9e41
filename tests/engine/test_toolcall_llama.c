/* test_toolcall_llama: the tool-call validator's Llama mode (engine/toolcall.h): a reply that opens
 * with '{' is calls ({"name", "parameters"}, "; " between them with parallel calls), any other
 * reply free text; each accepted or rejected at the right byte, complete and can_end where they
 * belong, the call limits, canonical states, random walks whose calls parse, and its vocabulary
 * mask on the shared Llama 3 tokenizer against brute force, with timings. */
#include "tests/engine/toolcall_vocab.h"

/* The index of the first byte rejected, or DOC / PREFIX (all taken: may end there, or not);
 * checks on the way that can_end is 0 only inside a call (after a leading '{', before its
 * closing brace) and complete never in free text (after it, the want[] of check_llama has the next
 * byte rejected). *ret_complete: complete at the end. */
static long llama_reject(const sd_tcall *t, const char *text, int *ret_complete)
{
    tstate st;
    sd_tcall_init(t, &st);
    size_t n = strlen(text), lead = strspn(text, " \n\t\r");
    int calls = text[lead] == '{'; /* the reply is calls, not free text */
    for (size_t i = 0;; i++) {
        CHECK_MSG(!sd_tcall_complete(t, &st) || calls, "complete in free text: %zu bytes of %s", i, text);
        if (!calls || i <= lead)
            CHECK_MSG(sd_tcall_can_end(t, &st), "can_end 0 after %zu bytes of %s", i, text);
        else if (text[i - 1] != '}')
            CHECK_MSG(!sd_tcall_can_end(t, &st), "can_end 1 inside a call: %zu bytes of %s", i, text);
        if (i == n)
            break;
        if (sd_tcall_step(t, &st, (unsigned char)text[i]) < 0)
            return (long)i;
    }
    *ret_complete = sd_tcall_complete(t, &st);
    return sd_tcall_can_end(t, &st) ? DOC : PREFIX;
}

#define PING "{'name': 'ping', 'parameters': {}}"
#define GET "{'name': 'get', 'parameters': {'id': 7}}"

/* want[k][parallel]: DOC, PREFIX or the index rejected; done[k][parallel]: complete at the end. */
static void check_llama(const char *const *texts, const long (*want)[2], const int (*done)[2], size_t n)
{
    for (int parallel = 0; parallel < 2; parallel++) {
        sd_tcall *t = compile_mode(tools, parallel, LLAMA);
        REQUIRE(t);
        size_t size = sd_tcall_state_size(t);
        CHECK_MSG(size % 8 == 0 && size <= SD_TCALL_STATE_MAX && size <= SD_JVAL_MAX_STATE, "size %zu", size);
        for (size_t k = 0; k < n; k++) {
            int complete = 0;
            const char *text = q(texts[k]);
            long got = llama_reject(t, text, &complete);
            CHECK_MSG(got == want[k][parallel], "parallel %d, text %zu (%s): got %ld, want %ld", parallel, k,
                      text, got, want[k][parallel]);
            if (got < 0)
                CHECK_MSG(complete == done[k][parallel], "parallel %d, text %zu: complete %d", parallel, k,
                          complete);
        }
        sd_tcall_free(t);
    }
}

static void test_llama_texts(void)
{
    long semi = (long)strlen(q(PING)), close = semi + 1;
    static const char *const texts[] = {
        "",
        " \n\t",
        "Paris is sunny today.",
        "The call would be " PING, /* free text from its first byte: anything may follow */
        "[" PING,                  /* not a call: only '{' opens one */
        PING,
        "\n\n" GET,
        PING "; " GET,
        "{'name': 'get_weather', 'parameters': {'city': '}; {', 'unit': 'f'}}",
        "{'name': 'get_",
        PING ";",
        "{'name': 'pong'",      /* no such name: 'o' is the byte rejected */
        "{ 'name'",             /* no whitespace inside the fixed parts */
        "{'name': 'ping', 'arguments': {}}", /* Llama's key is "parameters" */
        "{'name': 'get', 'parameters': {'id': 'x'",
        PING " ",               /* nothing after a call but "; " and another */
        PING ";{",
    };
    const long want[][2] = {
        {DOC, DOC},       {DOC, DOC},       {DOC, DOC}, {DOC, DOC},   {DOC, DOC}, {DOC, DOC},
        {DOC, DOC},       {semi, DOC},      {DOC, DOC}, {PREFIX, PREFIX},        {semi, PREFIX},
        {11, 11},         {1, 1},           {18, 18},   {37, 37},    {semi, semi}, {semi, close},
    };
    /* one call at most (parallel 0): complete after it; parallel: never by one call */
    static const int done[][2] = {
        {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {1, 0}, {1, 0}, {0, 0}, {1, 0},
        {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0},
    };
    _Static_assert(sizeof done / sizeof *done == sizeof texts / sizeof *texts, "one flag per text");
    REQUIRE(sizeof want / sizeof *want == sizeof texts / sizeof *texts);
    check_llama(texts, want, done, sizeof texts / sizeof *texts);
}

/* n ping calls, "; " between them. */
static const char *ping_calls(int n)
{
    static char buf[4096];
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "; " : "", q(PING));
    return buf;
}

/* Parallel calls: up to SD_TCALL_MAX_CALLS, complete after the last; a ';' past it is rejected. */
static void test_llama_limits(void)
{
    sd_tcall *t = compile_mode(tools, 1, LLAMA);
    REQUIRE(t);
    tstate st;
    const char *all = ping_calls(SD_TCALL_MAX_CALLS);
    sd_tcall_init(t, &st);
    CHECK(sd_tcall_feed(t, &st, all, strlen(all)) == 0 && sd_tcall_complete(t, &st) && sd_tcall_can_end(t, &st));
    CHECK(sd_tcall_step(t, &st, ';') == -1);
    const char *less = ping_calls(SD_TCALL_MAX_CALLS - 1);
    sd_tcall_init(t, &st);
    CHECK(sd_tcall_feed(t, &st, less, strlen(less)) == 0 && !sd_tcall_complete(t, &st) &&
          sd_tcall_can_end(t, &st) && sd_tcall_step(t, &st, ';') == 0);
    sd_tcall_free(t);
}

/* Equal places, equal bytes (the mask's cache keys on them): all leading whitespace is one place,
 * all free text another; inside the calls as in the forced form. */
static void test_llama_canonical(void)
{
    static const char *const pairs[][2] = {
        {"", " \n \n"},                                  /* before anything */
        {"x", "Hello {'name': \xc3\xa9"},                /* free text */
        {"", "x"},                                       /* not the same place */
        {"{'name': 'get', 'parameters': {'id': 5}", "  {'name': 'ping', 'parameters': {}"},
        {PING, GET},                                     /* one call made */
        {"{'name': 'get_time', 'parameters': {'tz': 'a", "{'name': 'get_time', 'parameters': {'tz': 'bcd"},
    };
    static const int equal[] = {1, 1, 0, 1, 1, 1};
    static const int plain[] = {0, 0, 0, 0, 0, 1}; /* only inside a call's string */
    for (int parallel = 0; parallel < 2; parallel++) {
        sd_tcall *t = compile_mode(tools, parallel, LLAMA);
        REQUIRE(t);
        check_pairs(t, pairs, equal, plain, sizeof pairs / sizeof *pairs, parallel);
        sd_tcall_free(t);
    }
}

/* Random replies: whitespace, then free bytes (a third of them) or calls walked over their
 * allowed bytes, another call after "; " at random while more may come. Each is taken again
 * whole, ends where it may, and its calls parse as the split of server/api_tools.c reads them. */
static size_t llama_walk(const sd_tcall *t, int parallel, uint64_t *rng, char *buf, size_t cap, int *ret_calls)
{
    tstate st;
    unsigned char allowed[256];
    sd_tcall_init(t, &st);
    size_t n = 0;
    for (unsigned ws = rnd(rng, 3); ws > 0; ws--)
        buf[n++] = " \n"[rnd(rng, 2)];
    int free_text = rnd(rng, 3) == 0, calls = 0;
    buf[n++] = free_text ? "xP[\xc3"[rnd(rng, 4)] : '{';
    int ok = sd_tcall_feed(t, &st, buf, n) == 0;
    for (unsigned left = 20 + rnd(rng, 200); ok && free_text && left > 0; left--) {
        buf[n] = (char)(1 + rnd(rng, 255));
        ok = sd_tcall_step(t, &st, (unsigned char)buf[n++]) == 0;
    }
    CHECK_MSG(ok, "the start or free text rejected: %.*s", (int)n, buf);
    if (!ok)
        return 0;
    while (!free_text && n + 4 < cap) {
        if (sd_tcall_can_end(t, &st)) { /* a call closed */
            calls++;
            if (sd_tcall_complete(t, &st) || rnd(rng, 3) == 0)
                break;
            memcpy(buf + n, "; ", 2);
            CHECK(sd_tcall_feed(t, &st, buf + n, 2) == 0);
            n += 2;
            continue;
        }
        int k = allowed_bytes(t, &st, allowed);
        CHECK_MSG(k > 0, "a dead end after %zu bytes", n);
        if (k == 0)
            return 0;
        buf[n] = (char)allowed[rng_next(rng) % (unsigned)k];
        sd_tcall_step(t, &st, (unsigned char)buf[n++]);
    }
    buf[n] = '\0';
    CHECK_MSG(sd_tcall_can_end(t, &st), "inside a call after %zu bytes (parallel %d)", n, parallel);
    *ret_calls = calls;
    return n;
}

/* The calls of a reply that opens with '{', "; " between them; returns how many parse. */
static int parse_calls(const char *text, const char *const *names, int n_names)
{
    size_t i = strspn(text, " \n"), len = strlen(text);
    int n = 0;
    while (i < len) {
        json_error_t je;
        json_t *v = json_loadb(text + i, len - i, JSON_DISABLE_EOF_CHECK | JSON_DECODE_INT_AS_REAL, &je);
        CHECK_MSG(v, "call %d does not parse (%s): %s", n, je.text, text + i);
        if (!v)
            return n;
        check_call_key(v, "parameters", names, n_names, text);
        json_decref(v);
        n++;
        i += (size_t)je.position;
        if (i < len && strncmp(text + i, "; ", 2) != 0)
            CHECK_MSG(0, "after call %d: %s", n, text + i);
        i += 2;
    }
    return n;
}

static void test_llama_random_walks(void)
{
    static const char *const names[] = {"get", "get_time", "get_weather", "ping", "Z-9"};
    static char buf[WALK_MAX];
    uint64_t rng = 0x11A4Aull;
    int total = 0, multi = 0, free_texts = 0;
    for (int parallel = 0; parallel < 2; parallel++) {
        sd_tcall *t = compile_mode(tools, parallel, LLAMA);
        REQUIRE(t);
        for (int w = 0; w < 300; w++) {
            int calls = 0, complete = 0;
            size_t n = llama_walk(t, parallel, &rng, buf, sizeof buf, &calls);
            if (!n)
                break;
            CHECK_MSG(llama_reject(t, buf, &complete) == DOC, "walk %d not taken again: %s", w, buf);
            if (calls)
                CHECK_MSG(parse_calls(buf, names, 5) == calls, "walk %d: %d calls made: %s", w, calls, buf);
            CHECK(calls <= (parallel ? SD_TCALL_MAX_CALLS : 1));
            total += calls;
            multi += calls > 1;
            free_texts += calls == 0;
        }
        sd_tcall_free(t);
    }
    CHECK(total > 300 && multi > 50 && free_texts > 100);
    fprintf(stderr, "  600 Llama walks: %d calls, %d with several, %d free texts\n", total, multi, free_texts);
}

/* ---- over the Llama 3 vocabulary ---------------------------------------------------------------- */

static void llama_mask_states(struct qvocab *qv, sd_tcall *const t[2])
{
    const sd_jval v = tcall_jval(t[0], 1), v1 = tcall_jval(t[1], 2);
    int32_t n_plain = 0, n_free = 0, brace = token_of(qv->tok, qv->n, "{\""),
            tag = sd_tok_token_id(qv->tok, "<|start_header_id|>");
    for (int32_t id = 0; id < qv->n; id++) {
        size_t len = 0;
        n_plain += sd_tok_token_bytes(qv->tok, id, &len) && len > 0 && !sd_tok_is_special(qv->tok, id);
    }
    /* Llama 3.1's python tag is a special token as this one is (the shared tokenizer is Llama 3's) */
    CHECK_MSG(brace >= 0 && tag >= 0 && sd_tok_is_special(qv->tok, tag), "tokens {\" %d, special %d", brace, tag);
    tstate st;
    sd_tcall_init(t[0], &st);
    double cold, warm, cold_call, warm_call;
    time_apply(qv, &v, &st, &cold, &warm);
    /* the reply's start: free text's tokens, the call's opening ones, eos; no special token */
    int32_t n = mask_vs_brute(qv, &v, &st, &n_free);
    CHECK_MSG(n_free > n_plain / 100 * 98 && allowed(qv, qv->eos) && allowed(qv, brace) && !allowed(qv, tag),
              "the start: %d of %d tokens, eos %d", n_free, n_plain, allowed(qv, qv->eos));
    REQUIRE(sd_tcall_step(t[0], &st, '{') == 0);
    time_apply(qv, &v, &st, &cold_call, &warm_call);
    int32_t n_call = mask_vs_brute(qv, &v, &st, &n_free);
    CHECK_MSG(n_call > 0 && n_call < 100 && !allowed(qv, qv->eos), "after '{': %d tokens", n_call);
    const char *in_str = "\"name\": \"get_time\", \"parameters\": {\"tz\": \"Europe/";
    REQUIRE(sd_tcall_feed(t[0], &st, in_str, strlen(in_str)) == 0 && sd_tcall_in_plain_string(t[0], &st));
    CHECK(mask_vs_brute(qv, &v, &st, &n_free) > n_plain / 2 && !allowed(qv, qv->eos));
    REQUIRE(sd_tcall_feed(t[0], &st, "\"}}", 3) == 0 && sd_tcall_complete(t[0], &st));
    CHECK_MSG(mask_vs_brute(qv, &v, &st, &n_free) == 1 && allowed(qv, qv->eos), "after the call: %d", n_free);
    /* parallel: after a call, "; " or the end */
    sd_tcall_init(t[1], &st);
    REQUIRE(sd_tcall_feed(t[1], &st, q(PING), strlen(PING)) == 0);
    int32_t n_after = mask_vs_brute(qv, &v1, &st, &n_free);
    CHECK_MSG(n_after > 1 && n_after < 20 && allowed(qv, qv->eos), "after a parallel call: %d", n_after);
    /* free text: everything but the special tokens, eos too */
    sd_tcall_init(t[1], &st);
    REQUIRE(sd_tcall_feed(t[1], &st, "Sure", 4) == 0);
    CHECK(mask_vs_brute(qv, &v1, &st, &n_free) == n_plain + 1 && allowed(qv, qv->eos) && allowed(qv, brace));
    fprintf(stderr,
            "  llama3 (%d tokens, %d non-special): the start allows %d (apply cold %.2f ms, cached %.1f us); "
            "after '{' %d (cold %.2f ms, cached %.1f us); after a parallel call %d\n",
            qv->n, n_plain, n, cold, 1e3 * warm, n_call, cold_call, 1e3 * warm_call, n_after);
}

/* The shared Llama 3 tokenizer: every set the mask computes equals the brute-force one. */
static void test_llama_mask(void)
{
    const char *path = sd_test_shared("tokenizers/llama3/tokenizer.json");
    if (!path)
        SKIP("../shared/tokenizers/llama3 absent");
    struct qvocab qv;
    sd_tcall *t[2] = {compile_mode(tools, 0, LLAMA), compile_mode(tools, 1, LLAMA)};
    if (qvocab_open(&qv, path) == 0 && t[0] && t[1])
        llama_mask_states(&qv, t);
    sd_tcall_free(t[0]);
    sd_tcall_free(t[1]);
    qvocab_close(&qv);
}

int main(void)
{
    RUN(test_llama_texts);
    RUN(test_llama_limits);
    RUN(test_llama_canonical);
    RUN(test_llama_random_walks);
    RUN(test_llama_mask);
    return sd_test_done();
}
