/* kv: the paged KV block allocator — free list, reference counts, sequence block tables. */
#include "engine/kv.h"

#include <stdlib.h>

struct sd_kv {
    int32_t n_blocks, block_size;
    int32_t *free_list; /* [n_blocks] stack of free ids; the top is reused first (warm) */
    int32_t n_free;
    int32_t *refs;   /* [n_blocks] reference counts, 0 = free */
    uint8_t *cached; /* [n_blocks] 1: the prefix cache holds a reference (engine/prefix.c) */
    int32_t n_idle;  /* cached blocks whose only reference is the cache's */
};

int sd_kv_init(sd_kv **ret, int32_t n_blocks, int32_t block_size, sd_diag *d)
{
    if (n_blocks <= 0 || block_size <= 0)
        return sd_diag_set(d, SD_EINVAL, "kv: n_blocks (%d) and block_size (%d) must be positive", n_blocks,
                           block_size);
    sd_kv *kv = calloc(1, sizeof *kv);
    if (!kv)
        return sd_diag_set(d, SD_ENOMEM, "kv: out of memory");
    kv->free_list = malloc((size_t)n_blocks * sizeof *kv->free_list);
    kv->refs = calloc((size_t)n_blocks, sizeof *kv->refs);
    kv->cached = calloc((size_t)n_blocks, 1);
    if (!kv->free_list || !kv->refs || !kv->cached) {
        sd_kv_free(kv);
        return sd_diag_set(d, SD_ENOMEM, "kv: out of memory for %d blocks", n_blocks);
    }
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    /* Push in reverse so that block 0 comes out first: tables read naturally in logs. */
    for (int32_t i = 0; i < n_blocks; i++)
        kv->free_list[i] = n_blocks - 1 - i;
    kv->n_free = n_blocks;
    *ret = kv;
    return 0;
}

void sd_kv_free(sd_kv *kv)
{
    if (!kv)
        return;
    free(kv->free_list);
    free(kv->refs);
    free(kv->cached);
    free(kv);
}

int32_t sd_kv_block_size(const sd_kv *kv)
{
    return kv->block_size;
}

int32_t sd_kv_total(const sd_kv *kv)
{
    return kv->n_blocks;
}

int32_t sd_kv_available(const sd_kv *kv)
{
    return kv->n_free;
}

int32_t sd_kv_used(const sd_kv *kv)
{
    return kv->n_blocks - kv->n_free;
}

int32_t sd_kv_blocks_for(const sd_kv *kv, int32_t n_tokens)
{
    if (n_tokens <= 0)
        return 0;
    return (int32_t)(((int64_t)n_tokens + kv->block_size - 1) / kv->block_size);
}

int sd_kv_alloc(sd_kv *kv, int32_t *ret_block)
{
    if (kv->n_free == 0)
        return SD_EFULL;
    int32_t b = kv->free_list[--kv->n_free];
    kv->refs[b] = 1;
    *ret_block = b;
    return 0;
}

int sd_kv_retain(sd_kv *kv, int32_t block)
{
    if (block < 0 || block >= kv->n_blocks || kv->refs[block] == 0)
        return SD_EINVAL;
    kv->n_idle -= kv->cached[block] && kv->refs[block] == 1;
    kv->refs[block]++;
    return 0;
}

int sd_kv_release(sd_kv *kv, int32_t block)
{
    if (block < 0 || block >= kv->n_blocks || kv->refs[block] == 0)
        return SD_EINVAL;
    if (--kv->refs[block] == 0)
        kv->free_list[kv->n_free++] = block;
    kv->n_idle += kv->cached[block] && kv->refs[block] == 1;
    return 0;
}

int32_t sd_kv_refcount(const sd_kv *kv, int32_t block)
{
    if (block < 0 || block >= kv->n_blocks)
        return -1;
    return kv->refs[block];
}

int sd_kv_set_cached(sd_kv *kv, int32_t block, int on)
{
    if (block < 0 || block >= kv->n_blocks || kv->refs[block] == 0 || kv->cached[block] == !!on)
        return SD_EINVAL;
    kv->cached[block] = (uint8_t) !!on;
    kv->n_idle += (on ? 1 : -1) * (kv->refs[block] == 1);
    return 0;
}

int32_t sd_kv_idle_cached(const sd_kv *kv)
{
    return kv->n_idle;
}

void sd_kv_seq_init(sd_kv_seq *s)
{
    s->blocks = NULL;
    s->n_blocks = s->cap = s->n_tokens = 0;
}

int32_t sd_kv_seq_needed(const sd_kv *kv, const sd_kv_seq *s, int32_t n_new)
{
    int32_t want = sd_kv_blocks_for(kv, s->n_tokens + n_new);
    return want > s->n_blocks ? want - s->n_blocks : 0;
}

int sd_kv_seq_reserve(sd_kv_seq *s, int32_t want)
{
    if (want <= s->cap)
        return 0;
    int32_t cap = s->cap ? s->cap : 4;
    while (cap < want)
        cap *= 2;
    int32_t *nb = realloc(s->blocks, (size_t)cap * sizeof *nb);
    if (!nb)
        return SD_ENOMEM;
    s->blocks = nb;
    s->cap = cap;
    return 0;
}

int sd_kv_seq_append(sd_kv *kv, sd_kv_seq *s, int32_t n_new)
{
    if (n_new < 0 || (int64_t)s->n_tokens + n_new > INT32_MAX)
        return SD_EINVAL;
    int32_t need = sd_kv_seq_needed(kv, s, n_new);
    if (need > kv->n_free)
        return SD_EFULL;
    int rc = sd_kv_seq_reserve(s, s->n_blocks + need);
    if (rc)
        return rc;
    /* Cannot fail now: enough free blocks were checked above. */
    for (int32_t i = 0; i < need; i++)
        sd_kv_alloc(kv, &s->blocks[s->n_blocks++]);
    s->n_tokens += n_new;
    return 0;
}

int sd_kv_seq_truncate(sd_kv *kv, sd_kv_seq *s, int32_t n_tokens)
{
    if (n_tokens < 0 || n_tokens > s->n_tokens)
        return SD_EINVAL;
    int32_t keep = sd_kv_blocks_for(kv, n_tokens);
    while (s->n_blocks > keep)
        sd_kv_release(kv, s->blocks[--s->n_blocks]);
    s->n_tokens = n_tokens;
    return 0;
}

void sd_kv_seq_release(sd_kv *kv, sd_kv_seq *s)
{
    if (!s)
        return;
    for (int32_t i = 0; i < s->n_blocks; i++)
        sd_kv_release(kv, s->blocks[i]);
    free(s->blocks);
    sd_kv_seq_init(s);
}
