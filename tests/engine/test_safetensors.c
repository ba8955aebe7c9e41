/* Tests for engine/safetensors.c: real files read back against an independent header parse,
 * files written here (every float dtype, zero-size, metadata, misaligned), and the refusals. */
#include "engine/safetensors.h"

#include "tests/harness.h"
#include "tests/engine/ckpt_writer.h"

/* Checks every tensor of `path` against the header parsed here with jansson and the bytes
 * read with stdio at 8 + N + begin. */
static void check_against_stdio(const char *path)
{
    sd_st_file *f = NULL;
    sd_diag d = {0};
    int rc = sd_st_open(&f, path, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    REQUIRE(rc == 0);
    FILE *fp = fopen(path, "rb");
    REQUIRE(fp);
    unsigned char b8[8];
    size_t got = fread(b8, 1, 8, fp); /* REQUIRE evaluates its argument twice */
    REQUIRE(got == 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | b8[i];
    char *hdr = malloc(n + 1);
    got = fread(hdr, 1, n, fp);
    REQUIRE(got == n);
    json_t *root = json_loadb(hdr, n, 0, NULL);
    REQUIRE(root);
    size_t expect = json_object_size(root) - (json_object_get(root, "__metadata__") ? 1 : 0);
    CHECK_MSG(sd_st_count(f) == expect, "%zu tensors, header has %zu", sd_st_count(f), expect);
    const char *k;
    json_t *v;
    size_t i = 0;
    json_object_foreach(root, k, v)
    {
        if (strcmp(k, "__metadata__") == 0)
            continue;
        const sd_tensor_view *t = sd_st_find(f, k);
        CHECK_MSG(t != NULL, "tensor %s not found", k);
        if (!t)
            continue;
        CHECK(sd_st_at(f, i++) == t); /* header order */
        CHECK(strcmp(sd_dtype_name(t->dtype), json_string_value(json_object_get(v, "dtype"))) == 0);
        json_t *sh = json_object_get(v, "shape");
        CHECK(t->ndim == (int)json_array_size(sh));
        for (int j = 0; j < t->ndim; j++)
            CHECK(t->shape[j] == json_integer_value(json_array_get(sh, (size_t)j)));
        json_int_t b = json_integer_value(json_array_get(json_object_get(v, "data_offsets"), 0));
        json_int_t e = json_integer_value(json_array_get(json_object_get(v, "data_offsets"), 1));
        CHECK(t->nbytes == (size_t)(e - b));
        /* the first and the last 64 bytes */
        unsigned char buf[64];
        size_t m = t->nbytes < 64 ? t->nbytes : 64;
        for (int end = 0; end < 2 && m; end++) {
            size_t off = end ? t->nbytes - m : 0;
            fseek(fp, (long)(8 + n + (uint64_t)b + off), SEEK_SET);
            got = fread(buf, 1, m, fp);
            REQUIRE(got == m);
            CHECK_MSG(memcmp(buf, (const unsigned char *)t->data + off, m) == 0, "bytes of %s differ", k);
        }
        CHECK(strcmp(t->file, path) == 0);
    }
    CHECK(sd_st_find(f, "no.such.tensor") == NULL);
    json_decref(root);
    free(hdr);
    fclose(fp);
    sd_st_free(f);
}

static void test_tiny_model_file(void)
{
    check_against_stdio("models/tiny/model.safetensors");
}

static void test_small_shards(void)
{
    const char *dir = sd_test_shared("models/small/model.safetensors.index.json");
    if (!dir)
        SKIP("../shared/models/small is absent");
    char p[4096];
    for (int i = 1; i <= 4; i++) {
        snprintf(p, sizeof p, "%s/models/small/model-%05d-of-00004.safetensors",
                 getenv("SD_SHARED_DIR") ? getenv("SD_SHARED_DIR") : "../shared", i);
        check_against_stdio(p);
    }
}

static void test_written_dtypes_and_metadata(void)
{
    char dir[64], p[128];
    int made = tw_mkdtemp(dir, sizeof dir);
    REQUIRE(made == 0);
    tw_tensor ts[6];
    tw_tensor_init(&ts[0], "a.bf16", "BF16", 2, (int64_t[]){3, 5});
    tw_tensor_init(&ts[1], "b.f16", "F16", 1, (int64_t[]){7});
    tw_tensor_init(&ts[2], "c.f32", "F32", 3, (int64_t[]){2, 3, 4});
    tw_tensor_init(&ts[3], "d.empty", "F32", 2, (int64_t[]){0, 4});
    tw_tensor_init(&ts[4], "e.u32", "U32", 2, (int64_t[]){4, 2});
    tw_tensor_init(&ts[5], "f.scalar", "I64", 0, NULL);
    const char *meta[] = {"format", "pt", "sparsity.x", "2:4", NULL};
    int wr = tw_write_st(dir, "m.safetensors", ts, 6, meta);
    REQUIRE(wr == 0);
    snprintf(p, sizeof p, "%s/m.safetensors", dir);
    check_against_stdio(p);
    sd_st_file *f = NULL;
    int rc = sd_st_open(&f, p, NULL);
    REQUIRE(rc == 0);
    CHECK(sd_st_count(f) == 6);
    for (int i = 0; i < 6; i++) {
        const sd_tensor_view *t = sd_st_find(f, ts[i].name);
        REQUIRE(t);
        CHECK(t->nbytes == ts[i].nbytes && memcmp(t->data, ts[i].data, ts[i].nbytes) == 0);
    }
    CHECK(sd_st_find(f, "d.empty")->nbytes == 0);
    CHECK(sd_st_find(f, "f.scalar")->ndim == 0 && sd_st_find(f, "f.scalar")->nbytes == 8);
    CHECK(strcmp(sd_st_metadata(f, "format"), "pt") == 0);
    CHECK(strcmp(sd_st_metadata(f, "sparsity.x"), "2:4") == 0);
    CHECK(sd_st_metadata(f, "absent") == NULL);
    sd_st_free(f);
    for (int i = 0; i < 6; i++)
        tw_tensor_free(&ts[i]);
    tw_rmdir(dir);
}

/* A BF16 tensor of odd length followed by an F32 one: the F32 data is not 4-byte aligned in
 * the file, and must still come back aligned and equal. */
static void test_misaligned_tensor(void)
{
    char dir[64], p[128];
    int made = tw_mkdtemp(dir, sizeof dir);
    REQUIRE(made == 0);
    tw_tensor ts[2];
    tw_tensor_init(&ts[0], "odd", "BF16", 1, (int64_t[]){3});
    tw_tensor_init(&ts[1], "f", "F32", 1, (int64_t[]){5});
    int wr = tw_write_st(dir, "m.safetensors", ts, 2, NULL);
    REQUIRE(wr == 0);
    snprintf(p, sizeof p, "%s/m.safetensors", dir);
    sd_st_file *f = NULL;
    int rc = sd_st_open(&f, p, NULL);
    REQUIRE(rc == 0);
    const sd_tensor_view *t = sd_st_find(f, "f");
    REQUIRE(t);
    CHECK((uintptr_t)t->data % 4 == 0);
    CHECK(memcmp(t->data, ts[1].data, 20) == 0);
    sd_st_free(f);
    tw_tensor_free(&ts[0]);
    tw_tensor_free(&ts[1]);
    tw_rmdir(dir);
}

/* Writes `header` + `datalen` bytes and expects SD_EFORMAT with a message containing `needle`. */
static void expect_bad(const char *dir, const char *header, size_t datalen, const char *needle)
{
    char p[128];
    snprintf(p, sizeof p, "%s/bad.safetensors", dir);
    unsigned char *data = calloc(datalen + 1, 1);
    tw_write_raw(p, header, 8, data, datalen);
    free(data);
    sd_st_file *f = NULL;
    sd_diag d = {0};
    int rc = sd_st_open(&f, p, &d);
    CHECK_MSG(rc == SD_EFORMAT, "rc %d for header %s", rc, header);
    CHECK_MSG(f == NULL, "output set on failure");
    CHECK_MSG(strstr(d.msg, p) != NULL, "message '%s' does not name the file", d.msg);
    CHECK_MSG(strstr(d.msg, needle) != NULL, "message '%s' lacks '%s'", d.msg, needle);
    sd_st_free(f);
}

static void test_refusals(void)
{
    char dir[64];
    int made = tw_mkdtemp(dir, sizeof dir);
    REQUIRE(made == 0);
    expect_bad(dir, "{\"t\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,2]}}", 8, "'t'");
    expect_bad(dir, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, "'t'");
    expect_bad(dir, "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "'t'");
    expect_bad(dir, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "'t'");
    expect_bad(dir, "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 8,
               "'t'");
    expect_bad(dir, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,800]}}", 8, "'t'");
    expect_bad(dir, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "'t'");
    expect_bad(dir, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "'t'");
    expect_bad(dir, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[\"0\",8]}}", 8, "'t'");
    expect_bad(dir, "{\"t\":[1,2]}", 8, "'t'");
    expect_bad(dir, "{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'t'");
    /* 2^62 * 2^62 * 4 bytes must not wrap around to a small size */
    expect_bad(dir,
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4611686018427387904,0],"
               "\"data_offsets\":[0,0]},\"u\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],"
               "\"data_offsets\":[0,0]}}",
               8, "'u'");
    expect_bad(dir,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               16, "overlap");
    expect_bad(dir,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
               16, "a");
    expect_bad(dir, "{\"__metadata__\":{\"k\":1}}", 0, "__metadata__");
    expect_bad(dir, "[1,2,3]", 0, "object");
    expect_bad(dir, "{\"t\":", 0, "JSON");
    expect_bad(dir, "{\"\xff\xfe\":{}}", 0, "JSON");
    char xs[1501], longname[2100];
    memset(xs, 'x', 1500);
    xs[1500] = '\0';
    snprintf(longname, sizeof longname, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
             xs);
    expect_bad(dir, longname, 0, "name");
    tw_rmdir(dir);
}

static void test_bad_lengths(void)
{
    char dir[64], p[128];
    int made = tw_mkdtemp(dir, sizeof dir);
    REQUIRE(made == 0);
    snprintf(p, sizeof p, "%s/x.safetensors", dir);
    sd_diag d = {0};
    sd_st_file *f = NULL;
    /* empty, 5 bytes, header length beyond the file, header length beyond the cap */
    static const unsigned char lens[][12] = {{0},
                                             {1, 2, 3, 4, 5},
                                             {0x40, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '},
                                             {0, 0, 0, 0x10, 0, 0, 0, 0, '{', '}'}};
    static const size_t sizes[] = {0, 5, 12, 10};
    for (int i = 0; i < 4; i++) {
        tw_write(dir, "x.safetensors", lens[i], sizes[i]);
        memset(&d, 0, sizeof d);
        CHECK_MSG(sd_st_open(&f, p, &d) == SD_EFORMAT, "case %d", i);
        CHECK(d.msg[0] != '\0' && strstr(d.msg, p));
    }
    snprintf(p, sizeof p, "%s/missing.safetensors", dir);
    CHECK(sd_st_open(&f, p, &d) == SD_ENOTFOUND);
    CHECK(f == NULL);
    tw_rmdir(dir);
}

int main(void)
{
    RUN(test_tiny_model_file);
    RUN(test_small_shards);
    RUN(test_written_dtypes_and_metadata);
    RUN(test_misaligned_tensor);
    RUN(test_refusals);
    RUN(test_bad_lengths);
    return sd_test_done();
}
