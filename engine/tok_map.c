/* tok_map: the tokenizer's growable buffers and its two open-addressing hash maps
 * (token string -> id, merge pair -> rank and merged id). */
#include "tok_impl.h"

#include <stdlib.h>
#include <string.h>

int sd__tok_buf_reserve(sd__tok_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return SD_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int sd__tok_buf_add(sd__tok_buf *b, const void *src, size_t n)
{
    int rc = sd__tok_buf_reserve(b, n);
    if (rc)
        return rc;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    b->p[b->len] = 0; /* always NUL-terminated, reserve keeps room */
    return 0;
}

int sd__tok_ids_push(sd__tok_ids *v, int32_t id)
{
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->p, cap * sizeof *p);
        if (!p)
            return SD_ENOMEM;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->len++] = id;
    return 0;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

/* 64-bit mix of a byte string, 8 bytes at a time (tokens are short; quality matters less
 * than speed, the table is at most half full). */
static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
    return h;
}

int sd__tok_strmap_init(sd__tok_strmap *m, size_t expected)
{
    m->cap = pow2_at_least(expected * 2 + 1);
    m->n = 0;
    m->slots = calloc(m->cap, sizeof *m->slots);
    return m->slots ? 0 : SD_ENOMEM;
}

void sd__tok_strmap_free(sd__tok_strmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

static int strmap_grow(sd__tok_strmap *m)
{
    sd__tok_strmap bigger;
    if (sd__tok_strmap_init(&bigger, m->cap))
        return SD_ENOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            sd__tok_strmap_put(&bigger, m->slots[i].key, m->slots[i].len, m->slots[i].val);
    free(m->slots);
    *m = bigger;
    return 0;
}

int sd__tok_strmap_put(sd__tok_strmap *m, const char *key, size_t len, int32_t val)
{
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m))
        return SD_ENOMEM;
    size_t mask = m->cap - 1;
    for (size_t i = hash_bytes(key, len) & mask;; i = (i + 1) & mask) {
        struct sd__tok_strslot *s = &m->slots[i];
        if (!s->key) {
            s->key = key;
            s->len = (uint32_t)len;
            s->val = val;
            m->n++;
            return 0;
        }
        if (s->len == len && !memcmp(s->key, key, len)) {
            s->val = val;
            return 0;
        }
    }
}

int32_t sd__tok_strmap_get(const sd__tok_strmap *m, const char *key, size_t len)
{
    if (!m->cap)
        return -1;
    size_t mask = m->cap - 1;
    for (size_t i = hash_bytes(key, len) & mask;; i = (i + 1) & mask) {
        const struct sd__tok_strslot *s = &m->slots[i];
        if (!s->key)
            return -1;
        if (s->len == len && !memcmp(s->key, key, len))
            return s->val;
    }
}

static uint64_t pair_key(int32_t a, int32_t b)
{
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static size_t pair_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k;
}

int sd__tok_pairmap_init(sd__tok_pairmap *m, size_t expected)
{
    m->cap = pow2_at_least(expected * 2 + 1);
    m->n = 0;
    m->slots = malloc(m->cap * sizeof *m->slots);
    if (!m->slots)
        return SD_ENOMEM;
    for (size_t i = 0; i < m->cap; i++)
        m->slots[i].key = UINT64_MAX;
    return 0;
}

void sd__tok_pairmap_free(sd__tok_pairmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

static int pairmap_grow(sd__tok_pairmap *m)
{
    sd__tok_pairmap bigger;
    if (sd__tok_pairmap_init(&bigger, m->cap))
        return SD_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        uint64_t k = m->slots[i].key;
        if (k != UINT64_MAX)
            sd__tok_pairmap_put(&bigger, (int32_t)(k >> 32), (int32_t)(uint32_t)k, m->slots[i].rank,
                                m->slots[i].id);
    }
    free(m->slots);
    *m = bigger;
    return 0;
}

int sd__tok_pairmap_put(sd__tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id)
{
    if ((m->n + 1) * 2 > m->cap && pairmap_grow(m))
        return SD_ENOMEM;
    uint64_t k = pair_key(a, b);
    size_t mask = m->cap - 1;
    for (size_t i = pair_hash(k) & mask;; i = (i + 1) & mask) {
        struct sd__tok_pairslot *s = &m->slots[i];
        if (s->key == UINT64_MAX)
            m->n++;
        else if (s->key != k)
            continue;
        s->key = k; /* a later duplicate overwrites, as HF's HashMap collect does */
        s->rank = rank;
        s->id = id;
        return 0;
    }
}

int sd__tok_pairmap_get(const sd__tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id)
{
    if (!m->cap)
        return 0;
    uint64_t k = pair_key(a, b);
    size_t mask = m->cap - 1;
    for (size_t i = pair_hash(k) & mask;; i = (i + 1) & mask) {
        const struct sd__tok_pairslot *s = &m->slots[i];
        if (s->key == UINT64_MAX)
            return 0;
        if (s->key == k) {
            *rank = s->rank;
            *id = s->id;
            return 1;
        }
    }
}
