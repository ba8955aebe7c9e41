/* text_util: small helpers the JSON validator tests share: a xorshift generator and q(), which
 * writes JSON with single quotes readable in C strings. Header-only, for tests. */
#ifndef SD_TEST_TEXT_UTIL_H
#define SD_TEST_TEXT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* One or two random edits of b[0, n): a byte of alphabet (n_alpha bytes) replacing, or
 * inserted before, a random byte, or a byte deleted; b holds cap bytes. Returns the new length.
 * For texts near valid documents, where validators differ most easily. */
static inline size_t mutate_text(char *b, size_t n, size_t cap, const char *alphabet, size_t n_alpha,
                                 uint64_t *rng)
{
    for (unsigned e = 1 + rnd(rng, 2); e > 0 && n > 0; e--) {
        size_t at = rnd(rng, (unsigned)n);
        char c = alphabet[rnd(rng, (unsigned)n_alpha)];
        unsigned op = rnd(rng, 3);
        if (op == 0)
            b[at] = c;
        else if (op == 1)
            memmove(b + at, b + at + 1, n - at - 1), n--;
        else if (n + 1 < cap)
            memmove(b + at + 1, b + at, n - at), b[at] = c, n++;
    }
    return n;
}

#endif
