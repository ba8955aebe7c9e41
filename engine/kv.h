/* kv: the paged KV-cache block allocator — a pool of fixed-size block ids handed out from a
 * free list, reference counts (so a block can be shared, e.g. by a common prefix), and
 * per-sequence block tables that grow as tokens are appended.
 *
 * It only does the bookkeeping: the memory the ids index lives in the backend. Not
 * thread-safe: the engine thread owns it. */
#ifndef SD_KV_H
#define SD_KV_H

#include <stdint.h>

#include "diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_kv sd_kv;

/* A pool of n_blocks blocks of block_size tokens each, all free. */
int sd_kv_init(sd_kv **ret, int32_t n_blocks, int32_t block_size, sd_diag *d);
void sd_kv_free(sd_kv *kv);

int32_t sd_kv_block_size(const sd_kv *kv);
int32_t sd_kv_total(const sd_kv *kv);
int32_t sd_kv_available(const sd_kv *kv); /* free blocks */
int32_t sd_kv_used(const sd_kv *kv);      /* blocks with refcount > 0 */
/* Blocks that n_tokens tokens occupy: ceil(n_tokens / block_size). */
int32_t sd_kv_blocks_for(const sd_kv *kv, int32_t n_tokens);

/* Takes one free block (refcount 1). SD_EFULL when none is left; *ret untouched then. */
int sd_kv_alloc(sd_kv *kv, int32_t *ret_block);
/* Adds a reference to an allocated block (sharing). SD_EINVAL if it is free or out of range. */
int sd_kv_retain(sd_kv *kv, int32_t block);
/* Drops a reference; the block returns to the free list at zero. SD_EINVAL on a free block
 * (a double free) or an out-of-range id: the pool is left unchanged. */
int sd_kv_release(sd_kv *kv, int32_t block);
/* 0 for a free block, -1 for an out-of-range id. */
int32_t sd_kv_refcount(const sd_kv *kv, int32_t block);

/* The prefix cache's mark (engine/prefix.c): a cached block holds one reference of the cache's,
 * set before the cache drops it. SD_EINVAL on a free block or an unchanged mark. */
int sd_kv_set_cached(sd_kv *kv, int32_t block, int on);
/* Cached blocks no sequence uses (only the cache's reference): free once evicted. O(1). */
int32_t sd_kv_idle_cached(const sd_kv *kv);

/* A sequence's block table: blocks[i] holds its tokens [i*block_size, (i+1)*block_size). */
typedef struct sd_kv_seq {
    int32_t *blocks;  /* [n_blocks] block ids, malloc'd */
    int32_t n_blocks; /* entries in use */
    int32_t cap;      /* entries allocated */
    int32_t n_tokens; /* tokens the table covers */
} sd_kv_seq;

void sd_kv_seq_init(sd_kv_seq *s);
/* New blocks sd_kv_seq_append would take for n_new more tokens. */
int32_t sd_kv_seq_needed(const sd_kv *kv, const sd_kv_seq *s, int32_t n_new);
/* Grows the table to cover n_tokens + n_new tokens. All or nothing: SD_EFULL (or SD_ENOMEM)
 * leaves the table and the pool as they were. */
int sd_kv_seq_append(sd_kv *kv, sd_kv_seq *s, int32_t n_new);
/* Makes room for n_blocks entries in the table (no block taken). SD_ENOMEM on failure. */
int sd_kv_seq_reserve(sd_kv_seq *s, int32_t n_blocks);
/* Shrinks the table to cover n_tokens (<= its n_tokens): the blocks past ceil(n_tokens /
 * block_size) are released (speculative tokens that were not kept). SD_EINVAL when n_tokens is
 * negative or more than the table covers; the table is unchanged then. */
int sd_kv_seq_truncate(sd_kv *kv, sd_kv_seq *s, int32_t n_tokens);
/* Releases every block of the table and frees it; the sequence is empty afterwards and
 * may be reused. A NULL or empty sequence is a no-op. */
void sd_kv_seq_release(sd_kv *kv, sd_kv_seq *s);

#ifdef __cplusplus
}
#endif
#endif
