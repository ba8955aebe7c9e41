/* prefix: automatic prefix caching — cached blocks by chain hash in a recency list (engine/hlru.h),
 * indexed by block id (a block holds one content, so it is cached at most once), and the rule
 * for where new blocks enter that list (engine/prefix_shadow.h). */
#include "engine/prefix.h"

#include <stdlib.h>
#include <string.h>

#include "engine/hlru.h"
#include "engine/prefix_shadow.h"

struct sd_prefix {
    sd_kv *kv;
    int32_t n_blocks, bs;
    sd_hlru idx;      /* cached blocks: key = chain hash through the end of the block */
    uint64_t *parent; /* [n_blocks] the chain hash before it */
    int32_t *toks;    /* [n_blocks, bs] its tokens, to check a hash hit */
    uint8_t *cold;    /* [n_blocks] entered at the cold end and not hit since */
    uint64_t *hbuf;   /* [n_blocks] scratch: a prompt's chain hashes */
    /* the insertion rule (SD_PREFIX_ADAPTIVE): the two rules' shadows, the one in force */
    int adaptive, cold_rule;
    sd_pshadow *sh_lru, *sh_cold;
    uint64_t insertions;
    uint64_t last_hash; /* the previous lookup's prompt: its length, its last full block's hash */
    int32_t last_n;
    uint64_t query_tokens, hit_tokens, evicted, cold_inserted;
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

/* The chain hashes of the first n full blocks of tokens into p->hbuf (n <= n_blocks). */
static void hash_blocks(sd_prefix *p, const int32_t *tokens, int32_t n)
{
    uint64_t h = 0;
    for (int32_t i = 0; i < n; i++)
        p->hbuf[i] = h = chain(h, tokens + (size_t)i * p->bs, p->bs);
}

int sd_prefix_init(sd_prefix **ret, sd_kv *kv, int policy, sd_diag *d)
{
    sd_prefix *p = calloc(1, sizeof *p);
    if (!p)
        return sd_diag_set(d, SD_ENOMEM, "prefix cache: out of memory");
    p->kv = kv;
    p->n_blocks = sd_kv_total(kv);
    p->bs = sd_kv_block_size(kv);
    p->adaptive = policy == SD_PREFIX_ADAPTIVE;
    size_t n = (size_t)p->n_blocks;
    int rc = sd_hlru_init(&p->idx, p->n_blocks);
    p->parent = malloc(n * sizeof *p->parent);
    p->toks = malloc(n * (size_t)p->bs * sizeof *p->toks);
    p->cold = calloc(n, 1);
    p->hbuf = malloc(n * sizeof *p->hbuf);
    if (rc == 0 && p->adaptive) {
        rc = sd_pshadow_init(&p->sh_lru, p->n_blocks, 0);
        if (rc == 0)
            rc = sd_pshadow_init(&p->sh_cold, p->n_blocks, 1);
    }
    if (rc || !p->parent || !p->toks || !p->cold || !p->hbuf) {
        sd_prefix_free(p);
        return sd_diag_set(d, SD_ENOMEM, "prefix cache: out of memory for %d blocks", (int)n);
    }
    *ret = p;
    return 0;
}

static int32_t table_find(const sd_prefix *p, uint64_t h, uint64_t parent, const int32_t *t)
{
    uint32_t it = 0;
    for (int32_t b; (b = sd_hlru_find(&p->idx, h, &it)) != SD_HLRU_NONE;)
        if (p->parent[b] == parent && !memcmp(p->toks + (size_t)b * p->bs, t, (size_t)p->bs * sizeof *t))
            return b;
    return SD_HLRU_NONE;
}

static void drop(sd_prefix *p, int32_t b)
{
    sd_hlru_remove(&p->idx, b);
    p->cold[b] = 0;
    sd_kv_set_cached(p->kv, b, 0);
    sd_kv_release(p->kv, b);
}

void sd_prefix_free(sd_prefix *p)
{
    if (!p)
        return;
    if (p->idx.slots)
        while (p->idx.tail != SD_HLRU_NONE)
            drop(p, p->idx.tail);
    sd_hlru_free(&p->idx);
    sd_pshadow_free(p->sh_lru);
    sd_pshadow_free(p->sh_cold);
    free(p->parent);
    free(p->toks);
    free(p->cold);
    free(p->hbuf);
    free(p);
}

/* Blocks the cache could hold now: those it holds and the free ones. */
static int32_t room(const sd_prefix *p)
{
    return p->idx.count + sd_kv_available(p->kv);
}

void sd_prefix_insert(sd_prefix *p, const int32_t *tokens, int32_t n_tokens, const int32_t *blocks)
{
    int32_t n_full = n_tokens / p->bs;
    if (n_full > p->n_blocks)
        n_full = p->n_blocks;
    hash_blocks(p, tokens, n_full);
    /* the cold rule, while its shadow hits more: this insertion's new blocks enter cold */
    const uint8_t cold = p->adaptive && p->cold_rule && sd_pshadow_cold_turn(p->insertions++);
    for (int32_t i = 0; i < n_full; i++) {
        const int32_t *t = tokens + (size_t)i * p->bs;
        uint64_t parent = i ? p->hbuf[i - 1] : 0;
        int32_t b = blocks[i];
        if (table_find(p, p->hbuf[i], parent, t) != SD_HLRU_NONE || sd_hlru_listed(&p->idx, b) ||
            sd_kv_retain(p->kv, b) != 0)
            continue;
        /* cold blocks go to the tail in chain order: the chain's end is evicted first */
        p->cold[b] = cold;
        p->cold_inserted += cold;
        p->parent[b] = parent;
        memcpy(p->toks + (size_t)b * p->bs, t, (size_t)p->bs * sizeof *t);
        sd_hlru_insert(&p->idx, b, p->hbuf[i], p->cold[b]);
        sd_kv_set_cached(p->kv, b, 1);
    }
    for (int32_t i = n_full - 1; i >= 0; i--) /* earlier blocks most recent */
        if (sd_hlru_listed(&p->idx, blocks[i]) && !p->cold[blocks[i]])
            sd_hlru_touch(&p->idx, blocks[i]);
    if (p->adaptive) {
        sd_pshadow_add(p->sh_lru, p->hbuf, n_full, room(p));
        sd_pshadow_add(p->sh_cold, p->hbuf, n_full, room(p));
    }
}

/* Plays the lookup on both shadows and picks the rule for the blocks that follow. */
static void duel(sd_prefix *p, int32_t n_full, int32_t max_hit)
{
    sd_pshadow_lookup(p->sh_lru, p->hbuf, n_full, max_hit, room(p));
    sd_pshadow_lookup(p->sh_cold, p->hbuf, n_full, max_hit, room(p));
    p->cold_rule = sd_pshadow_score(p->sh_cold) > sd_pshadow_score(p->sh_lru);
}

int32_t sd_prefix_match(sd_prefix *p, const int32_t *tokens, int32_t n_tokens, int32_t max_blocks,
                        int32_t *out)
{
    int32_t n_all = n_tokens / p->bs, k = 0;
    if (n_all > p->n_blocks)
        n_all = p->n_blocks;
    int32_t n_full = n_all < max_blocks ? n_all : max_blocks;
    hash_blocks(p, tokens, n_all);
    for (; k < n_full; k++) {
        int32_t b = table_find(p, p->hbuf[k], k ? p->hbuf[k - 1] : 0, tokens + (size_t)k * p->bs);
        if (b == SD_HLRU_NONE || sd_kv_retain(p->kv, b) != 0)
            break;
        out[k] = b;
    }
    for (int32_t i = k - 1; i >= 0; i--) {
        p->cold[out[i]] = 0; /* a hit: in the recency order from now on */
        sd_hlru_touch(&p->idx, out[i]);
    }
    /* A request that could not be admitted is looked up again at every step while it waits at
     * the head of the queue; the shadows see it once (a second lookup would hit the blocks the
     * first just added, in the LRU shadow more than in the cold one, whose new blocks may have
     * been cut: a bias toward LRU just when the pool is short). So is the same prompt sent twice
     * in a row, which changes neither shadow much. */
    uint64_t last = n_all ? p->hbuf[n_all - 1] : 0;
    int again = n_tokens == p->last_n && last == p->last_hash;
    p->last_n = n_tokens;
    p->last_hash = last;
    if (p->adaptive && !again)
        duel(p, n_all, n_full);
    p->query_tokens += (uint64_t)n_tokens;
    p->hit_tokens += (uint64_t)k * (uint64_t)p->bs;
    return k;
}

int32_t sd_prefix_evict(sd_prefix *p, int32_t need)
{
    int32_t freed = 0;
    for (int32_t b = p->idx.tail; b != SD_HLRU_NONE && sd_kv_available(p->kv) < need;) {
        int32_t prev = p->idx.prev[b];
        if (sd_kv_refcount(p->kv, b) == 1) { /* only the cache holds it */
            drop(p, b);
            freed++;
        }
        b = prev;
    }
    p->evicted += (uint64_t)freed;
    return freed;
}

void sd_prefix_stats_get(const sd_prefix *p, sd_prefix_stats *st)
{
    st->blocks = p->idx.count;
    st->query_tokens = p->query_tokens;
    st->hit_tokens = p->hit_tokens;
    st->evicted_blocks = p->evicted;
    st->cold_inserted_blocks = p->cold_inserted;
    st->cold_rule = p->cold_rule;
}
