/* text_util: small helpers the JSON validator tests share: a xorshift generator and q(), which
 * writes JSON with single quotes readable in C strings. Header-only, for tests. */
#ifndef SD_TEST_TEXT_UTIL_H
#define SD_TEST_TEXT_UTIL_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline unsigned rnd(uint64_t *s, unsigned n)
{
    return (unsigned)(rng_next(s) % n);
}

/* s with every ' turned into " (one of 8 rotating buffers). */
static inline const char *q(const char *s)
{
    static char ring[8][8192];
    static unsigned next;
    char *b = ring[next++ % 8];
    size_t i = 0;
    for (; s[i] && i + 1 < sizeof ring[0]; i++)
        b[i] = s[i] == '\'' ? '"' : s[i];
    b[i] = '\0';
    return b;
}

#endif
