/* prefix: automatic prefix caching — a hash table from chain hashes to cached blocks and an
 * LRU list, both indexed by block id (a block holds one content, so it is cached at most once). */
#include "engine/prefix.h"

#include <stdlib.h>
#include <string.h>

#define NONE (-1)

struct sd_prefix {
    sd_kv *kv;
    int32_t n_blocks, bs;
    /* per block id */
    uint8_t *in;        /* [n_blocks] cached */
    uint64_t *hash;     /* [n_blocks] chain hash through the end of the block */
    uint64_t *parent;   /* [n_blocks] the chain hash before it */
    int32_t *toks;      /* [n_blocks, bs] its tokens, to check a hash hit */
    int32_t *lru_prev;  /* [n_blocks] towards the most recent */
    int32_t *lru_next;  /* [n_blocks] towards the least recent */
    int32_t head, tail; /* most / least recently used */
    int32_t count;
    /* open addressing, linear probing: slot -> block id or NONE */
    int32_t *slots;
    uint32_t mask;
    uint64_t query_tokens, hit_tokens;
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The chain hash of a block: its tokens after the hash of everything before. */
static uint64_t chain(uint64_t parent, const int32_t *t, int32_t n)
{
    uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ull);
    for (int32_t i = 0; i < n; i++)
        h = mix64(h ^ (uint32_t)t[i]) + (uint64_t)i;
    return h;
}

int sd_prefix_init(sd_prefix **ret, sd_kv *kv, sd_diag *d)
{
    sd_prefix *p = calloc(1, sizeof *p);
    if (!p)
        return sd_diag_set(d, SD_ENOMEM, "prefix cache: out of memory");
    p->kv = kv;
    p->n_blocks = sd_kv_total(kv);
    p->bs = sd_kv_block_size(kv);
    size_t n = (size_t)p->n_blocks, cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    p->in = calloc(n, 1);
    p->hash = malloc(n * sizeof *p->hash);
    p->parent = malloc(n * sizeof *p->parent);
    p->toks = malloc(n * (size_t)p->bs * sizeof *p->toks);
    p->lru_prev = malloc(n * sizeof *p->lru_prev);
    p->lru_next = malloc(n * sizeof *p->lru_next);
    p->slots = malloc(cap * sizeof *p->slots);
    if (!p->in || !p->hash || !p->parent || !p->toks || !p->lru_prev || !p->lru_next || !p->slots) {
        sd_prefix_free(p);
        return sd_diag_set(d, SD_ENOMEM, "prefix cache: out of memory for %d blocks", (int)n);
    }
    for (size_t i = 0; i < cap; i++)
        p->slots[i] = NONE;
    p->mask = (uint32_t)(cap - 1);
    p->head = p->tail = NONE;
    *ret = p;
    return 0;
}

/* ---- LRU ---- */

static void lru_unlink(sd_prefix *p, int32_t b)
{
    int32_t pr = p->lru_prev[b], nx = p->lru_next[b];
    if (pr != NONE)
        p->lru_next[pr] = nx;
    else
        p->head = nx;
    if (nx != NONE)
        p->lru_prev[nx] = pr;
    else
        p->tail = pr;
}

static void lru_push(sd_prefix *p, int32_t b)
{
    p->lru_prev[b] = NONE;
    p->lru_next[b] = p->head;
    if (p->head != NONE)
        p->lru_prev[p->head] = b;
    p->head = b;
    if (p->tail == NONE)
        p->tail = b;
}

/* Most recent last: called from a chain's end to its start, so a chain's first blocks (which
 * every longer match needs) are evicted after its later ones. */
static void lru_touch(sd_prefix *p, int32_t b)
{
    lru_unlink(p, b);
    lru_push(p, b);
}

/* ---- table ---- */

static int32_t table_find(const sd_prefix *p, uint64_t h, uint64_t parent, const int32_t *t)
{
    for (uint32_t i = (uint32_t)h & p->mask;; i = (i + 1) & p->mask) {
        int32_t b = p->slots[i];
        if (b == NONE)
            return NONE;
        if (p->hash[b] == h && p->parent[b] == parent &&
            !memcmp(p->toks + (size_t)b * p->bs, t, (size_t)p->bs * sizeof *t))
            return b;
    }
}

static void table_put(sd_prefix *p, int32_t b)
{
    uint32_t i = (uint32_t)p->hash[b] & p->mask;
    while (p->slots[i] != NONE)
        i = (i + 1) & p->mask;
    p->slots[i] = b;
}

/* Removes b, shifting later entries of its probe run back (no tombstones). */
static void table_del(sd_prefix *p, int32_t b)
{
    uint32_t i = (uint32_t)p->hash[b] & p->mask;
    while (p->slots[i] != b)
        i = (i + 1) & p->mask;
    for (uint32_t j = (i + 1) & p->mask; p->slots[j] != NONE; j = (j + 1) & p->mask) {
        uint32_t home = (uint32_t)p->hash[p->slots[j]] & p->mask;
        /* the entry at j may fill the hole at i when its home is not in (i, j] cyclically */
        if (((j - home) & p->mask) >= ((j - i) & p->mask)) {
            p->slots[i] = p->slots[j];
            i = j;
        }
    }
    p->slots[i] = NONE;
}

/* ---- cache ---- */

static void drop(sd_prefix *p, int32_t b)
{
    table_del(p, b);
    lru_unlink(p, b);
    p->in[b] = 0;
    p->count--;
    sd_kv_set_cached(p->kv, b, 0);
    sd_kv_release(p->kv, b);
}

void sd_prefix_free(sd_prefix *p)
{
    if (!p)
        return;
    if (p->slots)
        while (p->tail != NONE)
            drop(p, p->tail);
    free(p->in);
    free(p->hash);
    free(p->parent);
    free(p->toks);
    free(p->lru_prev);
    free(p->lru_next);
    free(p->slots);
    free(p);
}

void sd_prefix_insert(sd_prefix *p, const int32_t *tokens, int32_t n_tokens, const int32_t *blocks)
{
    int32_t n_full = n_tokens / p->bs;
    uint64_t h = 0;
    for (int32_t i = 0; i < n_full; i++) {
        const int32_t *t = tokens + (size_t)i * p->bs;
        uint64_t parent = h;
        h = chain(parent, t, p->bs);
        int32_t b = blocks[i];
        if (table_find(p, h, parent, t) != NONE || p->in[b] || sd_kv_retain(p->kv, b) != 0)
            continue;
        p->in[b] = 1;
        p->hash[b] = h;
        p->parent[b] = parent;
        memcpy(p->toks + (size_t)b * p->bs, t, (size_t)p->bs * sizeof *t);
        table_put(p, b);
        lru_push(p, b);
        sd_kv_set_cached(p->kv, b, 1);
        p->count++;
    }
    for (int32_t i = n_full - 1; i >= 0; i--) /* earlier blocks most recent (lru_touch) */
        if (p->in[blocks[i]])
            lru_touch(p, blocks[i]);
}

int32_t sd_prefix_match(sd_prefix *p, const int32_t *tokens, int32_t n_tokens, int32_t max_blocks,
                        int32_t *out)
{
    int32_t n_full = n_tokens / p->bs, k = 0;
    if (n_full > max_blocks)
        n_full = max_blocks;
    uint64_t h = 0;
    for (; k < n_full; k++) {
        const int32_t *t = tokens + (size_t)k * p->bs;
        uint64_t parent = h;
        h = chain(parent, t, p->bs);
        int32_t b = table_find(p, h, parent, t);
        if (b == NONE || sd_kv_retain(p->kv, b) != 0)
            break;
        out[k] = b;
    }
    for (int32_t i = k - 1; i >= 0; i--)
        lru_touch(p, out[i]);
    p->query_tokens += (uint64_t)n_tokens;
    p->hit_tokens += (uint64_t)k * (uint64_t)p->bs;
    return k;
}

int32_t sd_prefix_evict(sd_prefix *p, int32_t need)
{
    int32_t freed = 0;
    for (int32_t b = p->tail; b != NONE && sd_kv_available(p->kv) < need;) {
        int32_t prev = p->lru_prev[b];
        if (sd_kv_refcount(p->kv, b) == 1) { /* only the cache holds it */
            drop(p, b);
            freed++;
        }
        b = prev;
    }
    return freed;
}

void sd_prefix_stats_get(const sd_prefix *p, sd_prefix_stats *st)
{
    st->blocks = p->count;
    st->query_tokens = p->query_tokens;
    st->hit_tokens = p->hit_tokens;
}
