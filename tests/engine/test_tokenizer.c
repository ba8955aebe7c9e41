/* test_tokenizer: engine/tokenizer.c on the bundled model's tokenizer (and the shared Llama-3 /
 * Qwen3 ones when present): encodings against ids from HF `tokenizers` stored in
 * tests/fixtures/tokenizer/encodings.json (gen_fixture.py), round trips, streaming that
 * never splits a UTF-8 character, unsupported components and malformed files. */
#include "engine/tokenizer.h"

#include <jansson.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness.h"

#define TINY "models/tiny"
#define FIXTURE "tests/fixtures/tokenizer/encodings.json"

static sd_tokenizer *load_tiny(void)
{
    sd_tokenizer *t = NULL;
    sd_diag d = {0};
    int rc = sd_tok_load(&t, TINY, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    return t;
}

/* Encodes and compares with an expected JSON array of ids. */
static int same_ids(const int32_t *ids, size_t n, const json_t *want)
{
    if (json_array_size(want) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(want, i)) != ids[i])
            return 0;
    return 1;
}

static void check_fixture(const char *name, const char *path)
{
    json_error_t je;
    json_t *fx = json_load_file(FIXTURE, 0, &je);
    REQUIRE(fx != NULL);
    json_t *enc = json_object_get(json_object_get(fx, "encodings"), name);
    json_t *texts = json_object_get(fx, "texts");
    sd_tokenizer *t = NULL;
    sd_diag d = {0};
    int rc = enc ? sd_tok_load(&t, path, &d) : -1;
    CHECK_MSG(enc && rc == 0, "%s: %s", name, enc ? sd_diag_str(&d, rc) : "not in the fixture");
    for (size_t i = 0; t && i < json_array_size(texts); i++) {
        const char *s = json_string_value(json_array_get(texts, i));
        for (int sp = 0; sp < 2; sp++) {
            int32_t *ids = NULL;
            size_t n = 0;
            REQUIRE(sd_tok_encode(t, s, strlen(s), sp, &ids, &n, NULL) == 0);
            const json_t *want =
                json_array_get(json_object_get(enc, sp ? "with_special" : "without_special"), i);
            CHECK_MSG(same_ids(ids, n, want), "%s: text %zu (special=%d) differs from tokenizers", name, i,
                      sp);
            free(ids);
        }
    }
    sd_tok_free(t);
    json_decref(fx);
}

static void test_tiny_matches_fixture(void)
{
    check_fixture("tiny", TINY);
}

static void test_shared_match_fixture(void)
{
    const char *l = sd_test_shared("tokenizers/llama3/tokenizer.json");
    if (!l)
        SKIP("../shared/tokenizers absent");
    char path[4096];
    snprintf(path, sizeof path, "%s", l);
    check_fixture("llama3", path);
    snprintf(path, sizeof path, "%s", sd_test_shared("tokenizers/qwen3/tokenizer.json"));
    check_fixture("qwen3", path);
}

static void test_tiny_metadata(void)
{
    sd_tokenizer *t = load_tiny();
    REQUIRE(t);
    /* models/README.md: 8192 tokens, <|endoftext|> = 0 is BOS and EOS, <|im_end|> = 2 */
    CHECK(sd_tok_vocab_size(t) == 8192);
    CHECK(sd_tok_bos_id(t) == 0 && sd_tok_eos_id(t) == 0);
    CHECK(sd_tok_bos_str(t) && !strcmp(sd_tok_bos_str(t), "<|endoftext|>"));
    CHECK(sd_tok_token_id(t, "<|im_end|>") == 2 && sd_tok_is_special(t, 2));
    CHECK(sd_tok_token_id(t, "no such token at all") == -1);
    CHECK(sd_tok_token_str(t, -1) == NULL && sd_tok_token_str(t, 8192) == NULL);
    /* every byte has a one-byte token, and token strings map back to their ids */
    int bytes_seen[256] = {0};
    for (int32_t id = 0; id < sd_tok_vocab_size(t); id++) {
        const char *s = sd_tok_token_str(t, id);
        size_t n = 0;
        REQUIRE(s && sd_tok_token_bytes(t, id, &n));
        CHECK_MSG(sd_tok_token_id(t, s) == id, "id %d", id);
        if (n == 1)
            bytes_seen[(unsigned char)sd_tok_token_bytes(t, id, &n)[0]] = 1;
    }
    for (int b = 0; b < 256; b++)
        CHECK_MSG(bytes_seen[b], "byte %d has no token", b);
    sd_tok_free(t);
}

static void test_roundtrip(void)
{
    sd_tokenizer *t = load_tiny();
    REQUIRE(t);
    const char *texts[] = {"plain text",
                           "  \t\n\r\n mixed   whitespace  ",
                           "unicode: ü ß 漢字 😀👍🏽",
                           "import os\nprint(os.getcwd())\n",
                           "<|im_start|>x<|im_end|>",
                           ""};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        int32_t *ids;
        size_t n, len;
        char *back;
        REQUIRE(sd_tok_encode(t, texts[i], strlen(texts[i]), 0, &ids, &n, NULL) == 0);
        REQUIRE(sd_tok_decode(t, ids, n, 0, &back, &len, NULL) == 0);
        CHECK_MSG(len == strlen(texts[i]) && !strcmp(back, texts[i]), "'%s' came back as '%s'", texts[i],
                  back);
        free(back);
        free(ids);
    }
    /* add_special prepends BOS (the tiny post-processor) */
    int32_t *ids;
    size_t n;
    REQUIRE(sd_tok_encode(t, "x", 1, 1, &ids, &n, NULL) == 0);
    CHECK(n >= 2 && ids[0] == sd_tok_bos_id(t));
    free(ids);
    sd_tok_free(t);
}

/* Invalid UTF-8 encodes as the text with each maximal invalid subsequence -> U+FFFD. */
static void test_invalid_utf8(void)
{
    sd_tokenizer *t = load_tiny();
    REQUIRE(t);
    const char *bad[] = {"a\xff"
                         "b",
                         "a\xf0\x9f\x98"
                         "b",
                         "\xed\xa0\x80", "x\xe2\x82"};
    const char *fixed[] = {"a\xef\xbf\xbd"
                           "b",
                           "a\xef\xbf\xbd"
                           "b",
                           "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", "x\xef\xbf\xbd"};
    for (int i = 0; i < 4; i++) {
        int32_t *a, *b;
        size_t na, nb;
        REQUIRE(sd_tok_encode(t, bad[i], strlen(bad[i]), 0, &a, &na, NULL) == 0);
        REQUIRE(sd_tok_encode(t, fixed[i], strlen(fixed[i]), 0, &b, &nb, NULL) == 0);
        CHECK_MSG(na == nb && !memcmp(a, b, na * sizeof *a), "case %d", i);
        free(a);
        free(b);
    }
    sd_tok_free(t);
}

/* The id of the one-byte token for byte b. */
static int32_t byte_token(const sd_tokenizer *t, unsigned char b)
{
    for (int32_t id = 0; id < sd_tok_vocab_size(t); id++) {
        size_t n = 0;
        const char *s = sd_tok_token_bytes(t, id, &n);
        if (s && n == 1 && (unsigned char)s[0] == b && !sd_tok_is_special(t, id))
            return id;
    }
    return -1;
}

static void test_stream_never_splits_utf8(void)
{
    sd_tokenizer *t = load_tiny();
    REQUIRE(t);
    const unsigned char emoji[4] = {0xF0, 0x9F, 0x98, 0x80}; /* U+1F600 */
    sd_tok_stream s;
    sd_tok_stream_init(&s, t, 0);
    char out[64];
    size_t len;
    for (int i = 0; i < 4; i++) {
        int32_t id = byte_token(t, emoji[i]);
        REQUIRE(id >= 0);
        REQUIRE(sd_tok_stream_push(&s, id, out, sizeof out, &len) == 0);
        if (i < 3)
            CHECK_MSG(len == 0, "byte %d emitted %zu bytes of a partial character", i, len);
        else
            CHECK(len == 4 && !memcmp(out, emoji, 4));
    }
    REQUIRE(sd_tok_stream_flush(&s, out, sizeof out, &len) == 0);
    CHECK(len == 0);
    /* a character cut short is U+FFFD at flush, as the full decode gives */
    REQUIRE(sd_tok_stream_push(&s, byte_token(t, 0xE2), out, sizeof out, &len) == 0);
    CHECK(len == 0);
    REQUIRE(sd_tok_stream_flush(&s, out, sizeof out, &len) == 0);
    CHECK(len == 3 && !memcmp(out, "\xef\xbf\xbd", 3));
    sd_tok_free(t);
}

/* Random id sequences: concatenated stream output == sd_tok_decode, both skip modes. */
static void test_stream_equals_decode(void)
{
    sd_tokenizer *t = load_tiny();
    REQUIRE(t);
    uint64_t rng = 12345;
    for (int iter = 0; iter < 2000; iter++) {
        int32_t ids[24];
        size_t n = (size_t)(iter % 24);
        for (size_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((rng >> 33) % (iter % 2 ? 300 : 8192)); /* bytes often: split chars */
        }
        int skip = iter % 3 == 0;
        char *full;
        size_t full_len, acc_len = 0, len;
        char acc[24 * 256 + 8], out[1024];
        REQUIRE(sd_tok_decode(t, ids, n, skip, &full, &full_len, NULL) == 0);
        sd_tok_stream s;
        sd_tok_stream_init(&s, t, skip);
        for (size_t i = 0; i <= n; i++) {
            int rc = i < n ? sd_tok_stream_push(&s, ids[i], out, sizeof out, &len)
                           : sd_tok_stream_flush(&s, out, sizeof out, &len);
            REQUIRE(rc == 0);
            memcpy(acc + acc_len, out, len);
            acc_len += len;
        }
        CHECK_MSG(acc_len == full_len && !memcmp(acc, full, full_len), "iteration %d", iter);
        free(full);
    }
    sd_tok_free(t);
}

/* ---- unsupported and malformed files ---- */

static char tmpdir[64];

static int write_variant(const json_t *root)
{
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir);
    return json_dump_file(root, path, JSON_COMPACT);
}

static int load_tmp(sd_diag *d)
{
    sd_tokenizer *t = NULL;
    int rc = sd_tok_load(&t, tmpdir, d);
    sd_tok_free(t);
    return rc;
}

static void test_unsupported_types(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sd_tok_XXXXXX");
    REQUIRE(mkdtemp(tmpdir));
    json_t *base = json_load_file(TINY "/tokenizer.json", 0, NULL);
    REQUIRE(base);
    struct {
        const char *key, *sub, *type, *component;
    } cases[] = {
        {"model", "type", "WordPiece", "model"},
        {"normalizer", NULL, "Lowercase", "normalizer"},
        {"pre_tokenizer", NULL, "Metaspace", "pre_tokenizer"},
        {"decoder", NULL, "WordPiece", "decoder"},
        {"post_processor", NULL, "Fancy", "post_processor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *v = json_deep_copy(base);
        if (cases[i].sub)
            json_object_set_new(json_object_get(v, cases[i].key), cases[i].sub, json_string(cases[i].type));
        else
            json_object_set_new(v, cases[i].key, json_pack("{s:s}", "type", cases[i].type));
        REQUIRE(write_variant(v) == 0);
        sd_diag d = {0};
        int rc = load_tmp(&d);
        CHECK_MSG(rc == SD_ENOTSUP, "%s: rc %d", cases[i].type, rc);
        CHECK_MSG(strstr(d.msg, cases[i].component) && strstr(d.msg, cases[i].type), "message: %s", d.msg);
        json_decref(v);
    }
    /* the pristine copy loads: the variants failed for the reason tested */
    REQUIRE(write_variant(base) == 0);
    CHECK(load_tmp(NULL) == 0);
    json_decref(base);
}

static void test_malformed_files(void)
{
    REQUIRE(tmpdir[0]);
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir);
    FILE *src = fopen(TINY "/tokenizer.json", "rb");
    REQUIRE(src);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, src);
    fclose(src);
    /* truncated at several points */
    for (size_t cut = 1; cut < n; cut = cut * 3 + 7) {
        FILE *f = fopen(path, "wb");
        REQUIRE(f);
        fwrite(buf, 1, cut, f);
        fclose(f);
        sd_diag d = {0};
        int rc = load_tmp(&d);
        CHECK_MSG(rc == SD_EFORMAT && d.msg[0], "cut at %zu: rc %d", cut, rc);
    }
    /* wrong types */
    const char *bad[] = {
        "[]",
        "{\"model\": 3}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": [], \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": {}}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[1, 2]]}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": "
        "\"x\"}]}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"ignore_merges\": 1}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
        "{\"type\": \"Split\", \"pattern\": 5, \"behavior\": \"Isolated\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(path, "w");
        REQUIRE(f);
        fputs(bad[i], f);
        fclose(f);
        sd_diag d = {0};
        int rc = load_tmp(&d);
        CHECK_MSG(rc == SD_EFORMAT && d.msg[0], "case %zu: rc %d (%s)", i, rc, d.msg);
    }
    /* tokenizer_config.json: bos as {"content": ...}; a bad type is an error */
    json_t *pristine = json_load_file(TINY "/tokenizer.json", 0, NULL);
    REQUIRE(pristine && write_variant(pristine) == 0);
    json_decref(pristine);
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", tmpdir);
    FILE *f = fopen(cfg, "w");
    REQUIRE(f);
    fputs("{\"bos_token\": {\"content\": \"<|im_start|>\"}, \"eos_token\": \"<|im_end|>\", "
          "\"add_bos_token\": false}",
          f);
    fclose(f);
    sd_tokenizer *t = NULL;
    REQUIRE(sd_tok_load(&t, tmpdir, NULL) == 0);
    CHECK(sd_tok_bos_id(t) == sd_tok_token_id(t, "<|im_start|>") &&
          sd_tok_eos_id(t) == sd_tok_token_id(t, "<|im_end|>"));
    int32_t *ids;
    size_t nid;
    REQUIRE(sd_tok_encode(t, "x", 1, 1, &ids, &nid, NULL) == 0);
    CHECK_MSG(nid == 1, "add_bos_token false: no BOS (got %zu ids)", nid); /* as transformers does */
    free(ids);
    sd_tok_free(t);
    f = fopen(cfg, "w");
    REQUIRE(f);
    fputs("{\"bos_token\": 7}", f);
    fclose(f);
    CHECK(load_tmp(NULL) == SD_EFORMAT);
    CHECK(sd_tok_load(&t, "/nonexistent/tokenizer", NULL) == SD_ENOTFOUND);
    unlink(cfg);
    unlink(path);
    rmdir(tmpdir);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Prints (never asserts) load time and encode throughput. */
static void test_speed_report(void)
{
    sd_tokenizer *t = load_tiny();
    REQUIRE(t);
    static char text[4 << 20];
    size_t n = 0;
    const char *files[] = {"engine/tok_load.c", "engine/tok_split.c", "docs/architecture.md", FIXTURE};
    for (int rep = 0; n < sizeof text / 2; rep++) {
        FILE *f = fopen(files[rep % 4], "rb");
        if (!f)
            continue;
        n += fread(text + n, 1, sizeof text / 2 - n > 65536 ? 65536 : sizeof text / 2 - n, f);
        fclose(f);
    }
    const char *names[] = {"tiny", "llama3", "qwen3"};
    const char *paths[] = {TINY, "tokenizers/llama3/tokenizer.json", "tokenizers/qwen3/tokenizer.json"};
    for (int k = 0; k < 3; k++) {
        char path[4096];
        const char *p = k ? sd_test_shared(paths[k]) : paths[k];
        if (!p)
            continue;
        snprintf(path, sizeof path, "%s", p);
        sd_tokenizer *tk = NULL;
        double t0 = now_s();
        if (sd_tok_load(&tk, path, NULL))
            continue;
        double t1 = now_s();
        int32_t *ids;
        size_t nid;
        CHECK(sd_tok_encode(tk, text, n, 0, &ids, &nid, NULL) == 0);
        double t2 = now_s();
        printf("tokenizer %-6s: load %.0f ms, encode %.1f MB/s (%zu bytes -> %zu tokens)\n", names[k],
               (t1 - t0) * 1e3, n / (t2 - t1) / 1e6, n, nid);
        free(ids);
        sd_tok_free(tk);
    }
    sd_tok_free(t);
}

int main(void)
{
    RUN(test_tiny_matches_fixture);
    RUN(test_shared_match_fixture);
    RUN(test_tiny_metadata);
    RUN(test_roundtrip);
    RUN(test_invalid_utf8);
    RUN(test_stream_never_splits_utf8);
    RUN(test_stream_equals_decode);
    RUN(test_unsupported_types);
    RUN(test_malformed_files);
    RUN(test_speed_report);
    return sd_test_done();
}
