/* ckptw_hash: SHA-256 (FIPS 180-4) for checkpoint provenance — buffers and a directory's
 * .safetensors files in name order. */
#include "prune/ckptw.h"

#include "prune/cancel.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t fill;
    int ni; /* use the SHA extensions */
} sha256;

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

/* One round with the working variables named, not shifted through an array (a memmove per
 * round made hashing a checkpoint ~4x slower). */
#define SHA_ROUND(a, b, c, d, e, f, g, h, i)                                                                 \
    do {                                                                                                     \
        uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];        \
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));                 \
        d += t1;                                                                                             \
        h = t1 + t2;                                                                                         \
    } while (0)

static void sha_blocks_c(uint32_t h[8], const uint8_t *p, size_t nblocks)
{
    for (; nblocks > 0; nblocks--, p += 64) {
        uint32_t w[64];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
                   p[4 * i + 3];
        for (int i = 16; i < 64; i++) {
            uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
            uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; i += 8) {
            SHA_ROUND(a, b, c, d, e, f, g, hh, i);
            SHA_ROUND(hh, a, b, c, d, e, f, g, i + 1);
            SHA_ROUND(g, hh, a, b, c, d, e, f, i + 2);
            SHA_ROUND(f, g, hh, a, b, c, d, e, i + 3);
            SHA_ROUND(e, f, g, hh, a, b, c, d, i + 4);
            SHA_ROUND(d, e, f, g, hh, a, b, c, i + 5);
            SHA_ROUND(c, d, e, f, g, hh, a, b, i + 6);
            SHA_ROUND(b, c, d, e, f, g, hh, a, i + 7);
        }
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h[4] += e;
        h[5] += f;
        h[6] += g;
        h[7] += hh;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

/* The SHA extensions (x86 SHA-NI: Intel since Ice Lake / Goldmont, AMD since Zen), several times
 * the portable code's speed. Message schedule per group g of 4 words: W[g] = msg2(msg1(W[g-4],
 * W[g-3]) + (W[g-2]:W[g-1] shifted by one word), W[g-1]). */
__attribute__((target("sha,sse4.1"))) static void sha_blocks_ni(uint32_t h[8], const uint8_t *p,
                                                                size_t nblocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* CDAB */
    __m128i st1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* EFGH */
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);                                     /* ABEF */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);                                          /* CDGH */
    for (; nblocks > 0; nblocks--, p += 64) {
        __m128i abef = st0, cdgh = st1, m[4];
        for (int g = 0; g < 16; g++) {
            if (g < 4) {
                m[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
            } else {
                __m128i t = _mm_sha256msg1_epu32(m[g & 3], m[(g + 1) & 3]);
                t = _mm_add_epi32(t, _mm_alignr_epi8(m[(g + 3) & 3], m[(g + 2) & 3], 4));
                m[g & 3] = _mm_sha256msg2_epu32(t, m[(g + 3) & 3]);
            }
            __m128i msg = _mm_add_epi32(m[g & 3], _mm_loadu_si128((const __m128i *)&K[4 * g]));
            st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
            st0 = _mm_sha256rnds2_epu32(st0, st1, _mm_shuffle_epi32(msg, 0x0E));
        }
        st0 = _mm_add_epi32(st0, abef);
        st1 = _mm_add_epi32(st1, cdgh);
    }
    tmp = _mm_shuffle_epi32(st0, 0x1B);    /* FEBA */
    st1 = _mm_shuffle_epi32(st1, 0xB1);    /* DCHG */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0); /* DCBA */
    st1 = _mm_alignr_epi8(st1, tmp, 8);    /* ABEF -> HGFE order as stored */
    _mm_storeu_si128((__m128i *)&h[0], st0);
    _mm_storeu_si128((__m128i *)&h[4], st1);
}

static int have_sha_ni(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    int sha = (b >> 29) & 1;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    return sha && ((c >> 19) & 1) && ((c >> 9) & 1); /* SSE4.1, SSSE3 */
}
#endif

/* nblocks 64-byte blocks into h: SHA-NI when the CPU has it (checked once per hash), else C. */
static void sha_blocks(sha256 *s, const uint8_t *p, size_t nblocks)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (s->ni) {
        sha_blocks_ni(s->h, p, nblocks);
        return;
    }
#endif
    sha_blocks_c(s->h, p, nblocks);
}

static void sha_init(sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->len = 0;
    s->fill = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    const char *e = getenv("SD_SHA_PORTABLE"); /* tests compare both implementations */
    s->ni = have_sha_ni() && !(e && strcmp(e, "1") == 0);
#else
    s->ni = 0;
#endif
}

static void sha_update(sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->len += n;
    while (n > 0) {
        if (s->fill == 0 && n >= 64) {
            sha_blocks(s, p, n / 64);
            p += n / 64 * 64;
            n %= 64;
            continue;
        }
        size_t k = 64 - s->fill < n ? 64 - s->fill : n;
        memcpy(s->buf + s->fill, p, k);
        s->fill += k;
        p += k;
        n -= k;
        if (s->fill == 64) {
            sha_blocks(s, s->buf, 1);
            s->fill = 0;
        }
    }
}

static void sha_final(sha256 *s, char hex[65])
{
    uint64_t bits = s->len * 8;
    uint8_t pad[72] = {0x80};
    size_t padn = (s->fill < 56 ? 56 : 120) - s->fill;
    for (int i = 0; i < 8; i++)
        pad[padn + i] = (uint8_t)(bits >> (56 - 8 * i));
    sha_update(s, pad, padn + 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", s->h[i]);
}

void sd_ckptw_sha256_hex(const void *data, size_t n, char hex[65])
{
    sha256 s;
    sha_init(&s);
    sha_update(&s, data, n);
    sha_final(&s, hex);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int hash_file(sha256 *s, const char *path, const volatile int *stop, const volatile int *cancel,
                     sd_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sd_diag_set(d, SD_EIO, "hashing %s: cannot open", path);
    static const size_t cap = 1 << 20;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return sd_diag_set(d, SD_ENOMEM, "hashing %s: out of memory", path);
    }
    size_t k;
    int stopped = 0;
    while (!stopped && (k = fread(buf, 1, cap, f)) > 0) {
        sha_update(s, buf, k);
        stopped = sd_cancel_requested(stop) || sd_cancel_requested(cancel);
    }
    int bad = ferror(f);
    free(buf);
    fclose(f);
    if (stopped)
        return sd_diag_set(d, SD_ECANCEL, "hashing %s: stopped", path);
    return bad ? sd_diag_set(d, SD_EIO, "hashing %s: read error", path) : 0;
}

int sd_ckptw_hash_dir(const char *dir, char hex[65], const volatile int *stop, const volatile int *cancel,
                      sd_diag *d)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return sd_diag_set(d, SD_EIO, "hashing %s: cannot open the directory", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 12 || strcmp(e->d_name + len - 12, ".safetensors") != 0)
            continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? 2 * cap : 8) * sizeof *nn);
            if (!nn) {
                rc = sd_diag_set(d, SD_ENOMEM, "hashing %s: out of memory", dir);
                goto out;
            }
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = sd_diag_set(d, SD_ENOMEM, "hashing %s: out of memory", dir);
            goto out;
        }
        n++;
    }
    qsort(names, n, sizeof *names, cmp_str);
    sha256 s;
    sha_init(&s);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc = hash_file(&s, path, stop, cancel, d);
    }
    if (rc == 0)
        sha_final(&s, hex);
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(dh);
    return rc;
}
