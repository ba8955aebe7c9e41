/* hlru: ids 0..n-1 in a recency list, found by a 64-bit key — the bookkeeping under the prefix
 * cache (engine/prefix.c) and its shadow directories (engine/prefix_shadow.c). The list runs from
 * the most recently used (head) to the next to evict (tail); the table is open addressing with
 * linear probing and backward-shift deletion (no tombstones), sized for twice the ids. Several ids
 * may share a key: sd_hlru_find walks them. The struct is embedded by its users; treat its fields
 * as private. Not thread-safe. */
#ifndef SD_HLRU_H
#define SD_HLRU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SD_HLRU_NONE (-1)

typedef struct sd_hlru {
    int32_t n;
    uint64_t *key;        /* [n] */
    int32_t *prev, *next; /* [n] towards the head / the tail */
    uint8_t *in;          /* [n] listed */
    int32_t head, tail, count;
    int32_t *slots; /* [mask + 1] id or SD_HLRU_NONE */
    uint32_t mask;
} sd_hlru;

/* SD_ENOMEM when the arrays do not fit; l is then safe to free. */
int sd_hlru_init(sd_hlru *l, int32_t n);
void sd_hlru_free(sd_hlru *l);

/* Lists id (not listed) under key: at the head, or at the tail when cold. */
void sd_hlru_insert(sd_hlru *l, int32_t id, uint64_t key, int cold);
void sd_hlru_remove(sd_hlru *l, int32_t id);
/* Moves a listed id to the head. */
void sd_hlru_touch(sd_hlru *l, int32_t id);
/* The listed ids under key, one a call: start with *it = 0, then pass it back; SD_HLRU_NONE
 * when no more. */
int32_t sd_hlru_find(const sd_hlru *l, uint64_t key, uint32_t *it);

static inline int sd_hlru_listed(const sd_hlru *l, int32_t id)
{
    return l->in[id];
}

#ifdef __cplusplus
}
#endif
#endif
