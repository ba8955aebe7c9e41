/* hlru: a recency list and a key table over ids (engine/hlru.h). */
#include "engine/hlru.h"

#include <stdlib.h>

#include "engine/diag.h"

int sd_hlru_init(sd_hlru *l, int32_t n)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)n)
        cap *= 2;
    *l = (sd_hlru){.n = n, .head = SD_HLRU_NONE, .tail = SD_HLRU_NONE, .mask = (uint32_t)(cap - 1)};
    l->key = malloc((size_t)n * sizeof *l->key);
    l->prev = malloc((size_t)n * sizeof *l->prev);
    l->next = malloc((size_t)n * sizeof *l->next);
    l->in = calloc((size_t)n ? (size_t)n : 1, 1);
    l->slots = malloc(cap * sizeof *l->slots);
    if ((n && (!l->key || !l->prev || !l->next)) || !l->in || !l->slots)
        return SD_ENOMEM;
    for (size_t i = 0; i < cap; i++)
        l->slots[i] = SD_HLRU_NONE;
    return 0;
}

void sd_hlru_free(sd_hlru *l)
{
    free(l->key);
    free(l->prev);
    free(l->next);
    free(l->in);
    free(l->slots);
    *l = (sd_hlru){0};
}

static void unlink_id(sd_hlru *l, int32_t id)
{
    int32_t pr = l->prev[id], nx = l->next[id];
    if (pr != SD_HLRU_NONE)
        l->next[pr] = nx;
    else
        l->head = nx;
    if (nx != SD_HLRU_NONE)
        l->prev[nx] = pr;
    else
        l->tail = pr;
}

static void push_head(sd_hlru *l, int32_t id)
{
    l->prev[id] = SD_HLRU_NONE;
    l->next[id] = l->head;
    if (l->head != SD_HLRU_NONE)
        l->prev[l->head] = id;
    l->head = id;
    if (l->tail == SD_HLRU_NONE)
        l->tail = id;
}

static void push_tail(sd_hlru *l, int32_t id)
{
    l->next[id] = SD_HLRU_NONE;
    l->prev[id] = l->tail;
    if (l->tail != SD_HLRU_NONE)
        l->next[l->tail] = id;
    l->tail = id;
    if (l->head == SD_HLRU_NONE)
        l->head = id;
}

void sd_hlru_insert(sd_hlru *l, int32_t id, uint64_t key, int cold)
{
    l->key[id] = key;
    uint32_t i = (uint32_t)key & l->mask;
    while (l->slots[i] != SD_HLRU_NONE)
        i = (i + 1) & l->mask;
    l->slots[i] = id;
    if (cold)
        push_tail(l, id);
    else
        push_head(l, id);
    l->in[id] = 1;
    l->count++;
}

/* Removes id from the table, shifting later entries of its probe run back. */
static void table_del(sd_hlru *l, int32_t id)
{
    uint32_t i = (uint32_t)l->key[id] & l->mask;
    while (l->slots[i] != id)
        i = (i + 1) & l->mask;
    for (uint32_t j = (i + 1) & l->mask; l->slots[j] != SD_HLRU_NONE; j = (j + 1) & l->mask) {
        uint32_t home = (uint32_t)l->key[l->slots[j]] & l->mask;
        /* the entry at j may fill the hole at i when its home is not in (i, j] cyclically */
        if (((j - home) & l->mask) >= ((j - i) & l->mask)) {
            l->slots[i] = l->slots[j];
            i = j;
        }
    }
    l->slots[i] = SD_HLRU_NONE;
}

void sd_hlru_remove(sd_hlru *l, int32_t id)
{
    table_del(l, id);
    unlink_id(l, id);
    l->in[id] = 0;
    l->count--;
}

void sd_hlru_touch(sd_hlru *l, int32_t id)
{
    unlink_id(l, id);
    push_head(l, id);
}

int32_t sd_hlru_find(const sd_hlru *l, uint64_t key, uint32_t *it)
{
    /* *it counts the probes already made from the key's home slot */
    for (uint32_t i = ((uint32_t)key + *it) & l->mask;; i = (i + 1) & l->mask) {
        int32_t id = l->slots[i];
        ++*it;
        if (id == SD_HLRU_NONE) {
            --*it; /* stay on the empty slot: later calls return NONE again */
            return SD_HLRU_NONE;
        }
        if (l->key[id] == key)
            return id;
    }
}
