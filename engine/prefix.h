/* prefix: automatic prefix caching. Full KV blocks that sequences computed stay in the pool,
 * found by their content — a chain hash of every token up to the end of the block, checked
 * against the block's own tokens — so a prompt that starts with the same tokens (a system prompt,
 * the earlier turns of a chat) takes those blocks instead of recomputing them. The cache holds
 * one reference per block (engine/kv.h) and gives idle blocks back from the cold end of a recency
 * list when the pool runs short. New blocks enter that list as most recent (LRU), or, under
 * SD_PREFIX_ADAPTIVE while that hits less (prompts that cycle through more than the pool holds,
 * long prompts seen once), mostly at the cold end, so that what is cached stays until it hits
 * (engine/prefix_shadow.h).
 * Not thread-safe: the engine thread owns it, like the pool. */
#ifndef SD_PREFIX_H
#define SD_PREFIX_H

#include <stdint.h>

#include "diag.h"
#include "kv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_prefix sd_prefix;

enum {
    SD_PREFIX_LRU = 0,      /* new blocks always enter as most recent */
    SD_PREFIX_ADAPTIVE = 1, /* LRU, or mostly cold entry, by which hits more lately */
};

int sd_prefix_init(sd_prefix **ret, sd_kv *kv, int policy, sd_diag *d);
/* Drops every cached block's reference. NULL is a no-op. */
void sd_prefix_free(sd_prefix *p);

/* Caches the full blocks of tokens [0, n_tokens) whose K/V are in `blocks` (a sequence's table);
 * blocks already cached with that content are left as they are. Allocates nothing: the cache's
 * arrays are sized for the whole pool at init. */
void sd_prefix_insert(sd_prefix *p, const int32_t *tokens, int32_t n_tokens, const int32_t *blocks);

/* The longest run of cached blocks that tokens [0, n_tokens) starts with, at most max_blocks:
 * their ids go to out[] with a reference each for the caller (a sequence's table). */
int32_t sd_prefix_match(sd_prefix *p, const int32_t *tokens, int32_t n_tokens, int32_t max_blocks,
                        int32_t *out);

/* Gives idle cached blocks back to the pool from the cold end of the list, until `need` blocks
 * are free or none is idle. Returns the number freed. */
int32_t sd_prefix_evict(sd_prefix *p, int32_t need);

typedef struct sd_prefix_stats {
    int32_t blocks;                /* cached blocks (idle or in use) */
    uint64_t query_tokens;         /* tokens looked up, every lookup (a retried one again: the */
    uint64_t hit_tokens;           /* scheduler's metrics count admissions instead); found cached */
    uint64_t evicted_blocks;       /* given back to the pool */
    uint64_t cold_inserted_blocks; /* cached at the cold end */
    int cold_rule;                 /* the rule now: new blocks mostly enter cold */
} sd_prefix_stats;
void sd_prefix_stats_get(const sd_prefix *p, sd_prefix_stats *st);

#ifdef __cplusplus
}
#endif
#endif
