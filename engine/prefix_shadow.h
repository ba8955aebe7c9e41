/* prefix_shadow: how the prefix cache (engine/prefix.c) picks where new blocks enter its recency
 * list. Least-recently-used order is right while the prompts that come back fit the pool, and as
 * wrong as it can be when they cycle through more than fit: each evicts the next one wanted, and
 * nothing ever hits (README, known limits; 0% in results/2026-12-05-s30/r6). Long prompts seen
 * once (documents) also push shared prefixes out under LRU. There, new blocks should enter cold
 * (at the eviction end), all but every SD_PSHADOW_HOT_EVERY-th insertion's: the blocks already
 * cached stay until they hit (a hit moves a block to the recent end), a few new ones join them,
 * and blocks seen once leave first ("bimodal insertion", Qureshi et al., ISCA 2007). Where
 * prompts do fit, or nearly, that loses hits LRU would have had (a chat's latest turn).
 *
 * So the cache plays both rules on shadow directories — chain hashes only, no blocks, as many
 * entries as the cache could hold — fed the same lookups and insertions. Each counts its hits
 * with a decay (a window of ~100 lookups), and the cache inserts by the rule whose shadow hits
 * more (set dueling, as in adaptive insertion for CPU caches). Not thread-safe. */
#ifndef SD_PREFIX_SHADOW_H
#define SD_PREFIX_SHADOW_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Under the cold rule, one insertion in this many enters as most recent. */
#define SD_PSHADOW_HOT_EVERY 8

typedef struct sd_pshadow sd_pshadow;

/* A directory of at most n entries under LRU insertion, or the cold rule. */
int sd_pshadow_init(sd_pshadow **ret, int32_t n, int cold);
void sd_pshadow_free(sd_pshadow *s);

/* One lookup of a prompt's chain hashes h[0, n): the run found from the start, at most max_hit,
 * counts as hits and becomes most recent; the missing hashes are added by the rule (they are
 * computed next); then the directory is cut to cap entries from its cold end. Returns the hits. */
int32_t sd_pshadow_lookup(sd_pshadow *s, const uint64_t *h, int32_t n, int32_t max_hit, int32_t cap);
/* Adds the missing ones of h[0, n) by the rule (blocks cached without a lookup: a reply's). */
void sd_pshadow_add(sd_pshadow *s, const uint64_t *h, int32_t n, int32_t cap);
/* Hits of the recent lookups, each lookup's weighted by 0.99 per later lookup. */
double sd_pshadow_score(const sd_pshadow *s);

/* Whether the n-th insertion (counting from 0) enters cold under the cold rule. */
static inline int sd_pshadow_cold_turn(uint64_t n)
{
    return n % SD_PSHADOW_HOT_EVERY != 0;
}

#ifdef __cplusplus
}
#endif
#endif
