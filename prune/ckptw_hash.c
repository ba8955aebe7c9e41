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

static void sha_block(sha256 *s, const uint8_t *p)
{
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + K[i] + w[i];
        uint32_t t2 =
            (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof *v);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++)
        s->h[i] += v[i];
}

static void sha_init(sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->len = 0;
    s->fill = 0;
}

static void sha_update(sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->len += n;
    while (n > 0) {
        if (s->fill == 0 && n >= 64) {
            sha_block(s, p);
            p += 64;
            n -= 64;
            continue;
        }
        size_t k = 64 - s->fill < n ? 64 - s->fill : n;
        memcpy(s->buf + s->fill, p, k);
        s->fill += k;
        p += k;
        n -= k;
        if (s->fill == 64) {
            sha_block(s, s->buf);
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
