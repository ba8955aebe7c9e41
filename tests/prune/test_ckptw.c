/* Tests for prune/ckptw.c and prune/ckptw_hash.c: the streaming writer (reserve, start, fill in
 * any order) gives the bytes of the all-at-once writer; SHA-256 against the FIPS 180-2 vectors
 * and, where the CPU has the SHA extensions, the portable code against them on many lengths. */
#include "prune/ckptw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void sha_both(const void *p, size_t n, char ni[65], char port[65])
{
    unsetenv("SD_SHA_PORTABLE");
    sd_ckptw_sha256_hex(p, n, ni);
    setenv("SD_SHA_PORTABLE", "1", 1);
    sd_ckptw_sha256_hex(p, n, port);
    unsetenv("SD_SHA_PORTABLE");
}

static void test_sha_vectors(void)
{
    static const char *msg[] = {"", "abc", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"};
    static const char *want[] = {"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                                 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                                 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"};
    char a[65], b[65];
    for (int i = 0; i < 3; i++) {
        sha_both(msg[i], strlen(msg[i]), a, b);
        CHECK_MSG(strcmp(a, want[i]) == 0, "'%s': %s", msg[i], a);
        CHECK_MSG(strcmp(b, want[i]) == 0, "'%s' (portable): %s", msg[i], b);
    }
    char *mil = malloc(1000000);
    REQUIRE(mil);
    memset(mil, 'a', 1000000);
    sha_both(mil, 1000000, a, b);
    free(mil);
    const char *w = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    CHECK_MSG(strcmp(a, w) == 0, "a million 'a': %s", a);
    CHECK_MSG(strcmp(b, w) == 0, "a million 'a' (portable): %s", b);
}

/* Every length around the block and padding boundaries, random bytes: both implementations agree. */
static void test_sha_lengths(void)
{
    uint64_t s = 5;
    uint8_t buf[1100];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rnd(&s);
    for (size_t n = 0; n <= sizeof buf; n++) {
        char a[65], b[65];
        sha_both(buf, n, a, b);
        CHECK_MSG(strcmp(a, b) == 0, "length %zu: %s vs %s", n, a, b);
    }
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

typedef struct lin {
    const char *base;
    int64_t rows, cols;
    uint16_t *values;
    uint32_t *mask;
} lin;

/* One checkpoint: dense "a", linear 0, dense "b", linear 1; streamed (fill in reverse order) or not. */
static int write_ckpt(const char *out, lin *ls, int stream)
{
    static const float da[3] = {1, 2, 3};
    static const uint16_t db[5] = {7, 8, 9, 10, 11};
    int64_t sa[1] = {3}, sb[1] = {5};
    sd_ckptw *w = NULL;
    int rc = sd_ckptw_open(&w, out, NULL);
    for (int i = 0; rc == 0 && i < 2; i++) {
        rc = i == 0 ? sd_ckptw_add(w, "a", SD_DT_F32, 1, sa, da, sizeof da, NULL)
                    : sd_ckptw_add(w, "b", SD_DT_BF16, 1, sb, db, sizeof db, NULL);
        if (rc)
            break;
        if (stream) {
            rc = sd_ckptw_reserve_bitmask(w, ls[i].base, ls[i].rows, ls[i].cols, "2:4", NULL);
            continue;
        }
        size_t nv = (size_t)(ls[i].rows * ls[i].cols / 2) * 2,
               nm = (size_t)(ls[i].rows * ls[i].cols / 32) * 4;
        uint16_t *v = malloc(nv);
        uint32_t *m = malloc(nm);
        if (!v || !m)
            return -1;
        memcpy(v, ls[i].values, nv);
        memcpy(m, ls[i].mask, nm);
        rc = sd_ckptw_add_bitmask(w, ls[i].base, ls[i].rows, ls[i].cols, v, m, "2:4", NULL);
    }
    if (rc == 0 && stream && (rc = sd_ckptw_start(w, NULL)) == 0) {
        /* adding after the start is refused */
        if (sd_ckptw_add(w, "c", SD_DT_F32, 1, sa, da, sizeof da, NULL) != SD_EINVAL)
            rc = -2;
        for (int i = 1; rc == 0 && i >= 0; i--)
            rc = sd_ckptw_fill_bitmask(w, ls[i].base, ls[i].values, ls[i].mask, NULL);
    }
    if (rc == 0)
        rc = sd_ckptw_commit(w, NULL, NULL);
    sd_ckptw_free(w);
    return rc;
}

static void test_stream_same_bytes(void)
{
    char dir[] = "/tmp/sd_test_ckptw_XXXXXX";
    REQUIRE(mkdtemp(dir));
    uint64_t s = 9;
    lin ls[2] = {{"model.layers.0.mlp.up_proj", 3, 64, NULL, NULL},
                 {"model.layers.1.mlp.up_proj", 2, 96, NULL, NULL}};
    for (int i = 0; i < 2; i++) {
        ls[i].values = malloc((size_t)(ls[i].rows * ls[i].cols / 2) * 2);
        ls[i].mask = malloc((size_t)(ls[i].rows * ls[i].cols / 32) * 4);
        REQUIRE(ls[i].values && ls[i].mask);
        for (int64_t k = 0; k < ls[i].rows * ls[i].cols / 2; k++)
            ls[i].values[k] = (uint16_t)rnd(&s);
        for (int64_t k = 0; k < ls[i].rows * ls[i].cols / 32; k++)
            ls[i].mask[k] = 0x5555aaaau ^ (uint32_t)(k * 0x3c);
    }
    char a[256], b[256], c[256], pa[300], pb[300], pc[300];
    snprintf(a, sizeof a, "%s/all", dir);
    snprintf(b, sizeof b, "%s/stream", dir);
    snprintf(c, sizeof c, "%s/unfilled", dir);
    CHECK(write_ckpt(a, ls, 0) == 0);
    CHECK(write_ckpt(b, ls, 1) == 0);
    snprintf(pa, sizeof pa, "%s/model.safetensors", a);
    snprintf(pb, sizeof pb, "%s/model.safetensors", b);
    size_t na = 0, nb = 0;
    char *fa = slurp(pa, &na), *fb = slurp(pb, &nb);
    CHECK(fa && fb && na == nb && na > 0 && memcmp(fa, fb, na) == 0);
    free(fa);
    free(fb);

    /* a reserved linear never filled: commit fails and no directory is left */
    sd_ckptw *w = NULL;
    REQUIRE(sd_ckptw_open(&w, c, NULL) == 0);
    REQUIRE(sd_ckptw_reserve_bitmask(w, "x", 2, 32, "2:4", NULL) == 0);
    REQUIRE(sd_ckptw_start(w, NULL) == 0);
    sd_diag d = {0};
    CHECK(sd_ckptw_commit(w, NULL, &d) == SD_EINVAL);
    CHECK(strstr(d.msg, "x.nm_values") != NULL);
    sd_ckptw_free(w);
    CHECK(access(c, F_OK) != 0);

    for (int i = 0; i < 2; i++) {
        free(ls[i].values);
        free(ls[i].mask);
    }
    snprintf(pc, sizeof pc, "rm -rf '%s'", dir);
    CHECK(system(pc) == 0);
}

int main(void)
{
    RUN(test_sha_vectors);
    RUN(test_sha_lengths);
    RUN(test_stream_same_bytes);
    return sd_test_done();
}
