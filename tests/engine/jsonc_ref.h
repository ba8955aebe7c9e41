/* jsonc_ref: what the JSON-mode tests share — a seeded generator, an independent checker
 * (recursive descent over the whole text, decoding UTF-8 to code points rather than using the
 * validator's tables) and random valid documents. Used by test_jsonc and test_jsonc_mask. */
#ifndef SD_TEST_JSONC_REF_H
#define SD_TEST_JSONC_REF_H

#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "engine/jsonc.h"
#include "tests/engine/text_util.h"
#include "tests/harness.h"

#define TINY "models/tiny"

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- an independent checker: recursive descent over the whole text, decoding UTF-8 ------- */

struct ref {
    const unsigned char *s;
    size_t n, i;
    int depth;
};

static inline int r_ws(struct ref *r)
{
    size_t start = r->i;
    while (r->i < r->n && r->s[r->i] && strchr(" \t\n\r", r->s[r->i]))
        r->i++;
    return r->i - start <= SD_JFSM_MAX_WS;
}

static inline int r_eat(struct ref *r, int c)
{
    if (r->i >= r->n || r->s[r->i] != c)
        return 0;
    r->i++;
    return 1;
}

static inline int r_hex4(struct ref *r, unsigned *u)
{
    *u = 0;
    for (int k = 0; k < 4; k++, r->i++) {
        if (r->i >= r->n)
            return 0;
        const char *hex = "0123456789abcdef0123456789ABCDEF", *p = strchr(hex, r->s[r->i]);
        if (!p || !r->s[r->i])
            return 0;
        *u = *u * 16 + (unsigned)((p - hex) & 15);
    }
    return 1;
}

static inline int r_utf8(struct ref *r)
{
    unsigned c = r->s[r->i], len, cp, min;
    if ((c & 0xE0) == 0xC0)
        len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (r->i + len > r->n)
        return 0;
    for (unsigned k = 1; k < len; k++) {
        if ((r->s[r->i + k] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (r->s[r->i + k] & 0x3F);
    }
    r->i += len;
    return cp >= min && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
}

static inline int r_string(struct ref *r)
{
    if (!r_eat(r, '"'))
        return 0;
    while (r->i < r->n) {
        unsigned c = r->s[r->i];
        if (c == '"') {
            r->i++;
            return 1;
        }
        if (c < 0x20)
            return 0;
        if (c >= 0x80) {
            if (!r_utf8(r))
                return 0;
            continue;
        }
        r->i++;
        if (c != '\\')
            continue;
        if (r->i >= r->n)
            return 0;
        c = r->s[r->i++];
        unsigned u, lo;
        if (c != 'u') {
            if (!c || !strchr("\"\\/bfnrt", (int)c))
                return 0;
        } else if (!r_hex4(r, &u) || (u >= 0xDC00 && u <= 0xDFFF)) {
            return 0;
        } else if (u >= 0xD800 && u <= 0xDBFF) {
            if (!r_eat(r, '\\') || !r_eat(r, 'u') || !r_hex4(r, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return 0;
        }
    }
    return 0;
}

static inline int r_digits(struct ref *r)
{
    size_t s = r->i;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
        r->i++;
    return r->i > s;
}

static inline int r_number(struct ref *r)
{
    r_eat(r, '-');
    if (r_eat(r, '0')) {
    } else if (r->i < r->n && r->s[r->i] >= '1' && r->s[r->i] <= '9') {
        r_digits(r);
    } else {
        return 0;
    }
    if (r_eat(r, '.') && !r_digits(r))
        return 0;
    if (r_eat(r, 'e') || r_eat(r, 'E')) {
        if (!r_eat(r, '+'))
            r_eat(r, '-');
        return r_digits(r);
    }
    return 1;
}

static inline int r_value(struct ref *r);

/* open, close: '{' '}' or '[' ']'; members of objects are "key": value. */
static inline int r_container(struct ref *r, int open, int close)
{
    if (!r_eat(r, open) || ++r->depth > SD_JFSM_MAX_DEPTH || !r_ws(r))
        return 0;
    for (int first = 1; !r_eat(r, close); first = 0) {
        if (!first && !(r_eat(r, ',') && r_ws(r)))
            return 0;
        if (open == '{' && !(r_string(r) && r_ws(r) && r_eat(r, ':') && r_ws(r)))
            return 0;
        if (!r_value(r) || !r_ws(r))
            return 0;
    }
    r->depth--;
    return 1;
}

static inline int r_lit(struct ref *r, const char *lit)
{
    size_t n = strlen(lit);
    if (r->i + n > r->n || memcmp(r->s + r->i, lit, n))
        return 0;
    r->i += n;
    return 1;
}

static inline int r_value(struct ref *r)
{
    int c = r->i < r->n ? r->s[r->i] : -1;
    if (c == '{' || c == '[')
        return r_container(r, c, c == '{' ? '}' : ']');
    if (c == '"')
        return r_string(r);
    if (c == 't' || c == 'f' || c == 'n')
        return r_lit(r, c == 't' ? "true" : c == 'f' ? "false" : "null");
    return r_number(r);
}

/* 1 if s is exactly one JSON object under the module's extra rules, nothing after it. */
static inline int ref_valid(const char *s, size_t n)
{
    struct ref r = {(const unsigned char *)s, n, 0, 0};
    return r_ws(&r) && r.i < n && s[r.i] == '{' && r_value(&r) && r.i == n;
}

/* ---- random valid documents -------------------------------------------------------------- */

struct gen {
    char b[16384];
    size_t n;
    uint64_t rng;
    int overflow; /* the document did not fit b */
};

static inline void put(struct gen *g, const char *s, size_t n)
{
    if (g->n + n >= sizeof g->b) {
        g->overflow = 1;
        return;
    }
    memcpy(g->b + g->n, s, n);
    g->n += n;
}

static inline void puts_(struct gen *g, const char *s)
{
    put(g, s, strlen(s));
}

static inline void put_utf8(struct gen *g, unsigned cp)
{
    static const unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    unsigned char b[4];
    int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    for (int k = n - 1; k > 0; k--, cp >>= 6)
        b[k] = (unsigned char)(0x80 | (cp & 63));
    b[0] = (unsigned char)(lead[n] | cp);
    put(g, (const char *)b, (size_t)n);
}

static inline void gen_ws(struct gen *g)
{
    unsigned k = rnd(&g->rng, 3) ? 0 : rnd(&g->rng, 10) ? rnd(&g->rng, 4) : rnd(&g->rng, SD_JFSM_MAX_WS + 1);
    for (unsigned i = 0; i < k; i++)
        put(g, &" \t\n\r"[rnd(&g->rng, 4)], 1);
}

static inline void gen_string(struct gen *g)
{
    static const unsigned edges[] = {0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x10FFFF};
    char tmp[16];
    puts_(g, "\"");
    for (unsigned k = rnd(&g->rng, 8); k > 0; k--) {
        unsigned r = rnd(&g->rng, 10);
        if (r < 4) {
            put(g, &"abcXYZ 019_-:,{}[]"[rnd(&g->rng, 18)], 1);
        } else if (r == 4) {
            puts_(g, (const char *[]){"\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r",
                                      "\\t"}[rnd(&g->rng, 8)]);
        } else if (r == 5) {
            unsigned u = rnd(&g->rng, 0xD800);
            snprintf(tmp, sizeof tmp, rnd(&g->rng, 2) ? "\\u%04x" : "\\u%04X", u);
            puts_(g, tmp);
        } else if (r == 6) {
            snprintf(tmp, sizeof tmp, "\\u%04X\\u%04x", 0xD800 + rnd(&g->rng, 0x400),
                     0xDC00 + rnd(&g->rng, 0x400));
            puts_(g, tmp);
        } else if (r == 7) {
            put_utf8(g, edges[rnd(&g->rng, 9)]);
        } else {
            unsigned cp = 0x80 + rnd(&g->rng, 0x10FFFF - 0x80);
            put_utf8(g, cp >= 0xD800 && cp <= 0xDFFF ? cp + 0x800 : cp);
        }
    }
    puts_(g, "\"");
}

static inline void gen_number(struct gen *g)
{
    if (rnd(&g->rng, 2))
        puts_(g, "-");
    if (rnd(&g->rng, 3) == 0)
        puts_(g, "0");
    else
        for (unsigned k = 1 + rnd(&g->rng, 5), first = 1; k > 0; k--, first = 0)
            put(g, &"0123456789"[first ? 1 + rnd(&g->rng, 9) : rnd(&g->rng, 10)], 1);
    if (rnd(&g->rng, 3) == 0) {
        puts_(g, ".");
        for (unsigned k = 1 + rnd(&g->rng, 4); k > 0; k--)
            put(g, &"0123456789"[rnd(&g->rng, 10)], 1);
    }
    if (rnd(&g->rng, 3) == 0) {
        puts_(g, (const char *[]){"e", "E", "e+", "E-", "e-"}[rnd(&g->rng, 5)]);
        for (unsigned k = 1 + rnd(&g->rng, 3); k > 0; k--)
            put(g, &"0123456789"[rnd(&g->rng, 10)], 1);
    }
}

static inline void gen_value(struct gen *g, int depth, int obj);

static inline void gen_container(struct gen *g, int depth, int obj)
{
    puts_(g, obj ? "{" : "[");
    gen_ws(g);
    for (unsigned k = rnd(&g->rng, depth > 4 ? 2 : 5), first = 1; k > 0; k--, first = 0) {
        if (!first) {
            puts_(g, ",");
            gen_ws(g);
        }
        if (obj) {
            gen_string(g);
            gen_ws(g);
            puts_(g, ":");
            gen_ws(g);
        }
        gen_value(g, depth + 1, -1);
        gen_ws(g);
    }
    puts_(g, obj ? "}" : "]");
}

/* obj: 1 an object, -1 any value. */
static inline void gen_value(struct gen *g, int depth, int obj)
{
    /* containers thin out with depth and stop at 20, far inside the limit */
    unsigned r = obj == 1 ? 0 : depth > 20 ? 2 + rnd(&g->rng, 6) : rnd(&g->rng, depth > 6 ? 6 : 8);
    if (r <= 1)
        gen_container(g, depth, r == 0);
    else if (r <= 3)
        gen_string(g);
    else if (r <= 5)
        gen_number(g);
    else
        puts_(g, (const char *[]){"true", "false", "null"}[rnd(&g->rng, 3)]);
}

static inline size_t gen_doc(struct gen *g, uint64_t seed)
{
    g->n = 0;
    g->overflow = 0;
    g->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    gen_ws(g);
    gen_value(g, 1, 1);
    return g->n;
}

#endif
