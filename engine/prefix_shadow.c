/* prefix_shadow: shadow directories for the prefix cache's insertion rule
 * (engine/prefix_shadow.h). */
#include "engine/prefix_shadow.h"

#include <stdlib.h>

#include "engine/diag.h"
#include "engine/hlru.h"

/* A window of ~100 lookups: long enough to see a cycle of prompts come round, short enough to
 * follow a change of workload within a few hundred requests. */
#define SCORE_DECAY 0.99

struct sd_pshadow {
    sd_hlru dir;
    int32_t *free_ids, n_free;
    int cold;
    uint64_t insertions;
    double score;
};

int sd_pshadow_init(sd_pshadow **ret, int32_t n, int cold)
{
    sd_pshadow *s = calloc(1, sizeof *s);
    if (!s)
        return SD_ENOMEM;
    s->cold = cold;
    s->free_ids = malloc(((size_t)n + 1) * sizeof *s->free_ids);
    int rc = s->free_ids ? sd_hlru_init(&s->dir, n) : SD_ENOMEM;
    if (rc) {
        sd_pshadow_free(s);
        return rc;
    }
    for (int32_t i = 0; i < n; i++)
        s->free_ids[s->n_free++] = n - 1 - i;
    *ret = s;
    return 0;
}

void sd_pshadow_free(sd_pshadow *s)
{
    if (!s)
        return;
    sd_hlru_free(&s->dir);
    free(s->free_ids);
    free(s);
}

static int32_t find(const sd_pshadow *s, uint64_t h)
{
    uint32_t it = 0;
    return sd_hlru_find(&s->dir, h, &it);
}

static void evict_one(sd_pshadow *s)
{
    int32_t id = s->dir.tail;
    sd_hlru_remove(&s->dir, id);
    s->free_ids[s->n_free++] = id;
}

static void add_one(sd_pshadow *s, uint64_t h, int cold)
{
    if (s->n_free == 0)
        evict_one(s);
    sd_hlru_insert(&s->dir, s->free_ids[--s->n_free], h, cold);
}

/* Adds h[from, n) that are missing, as the cache inserts: at the head from the chain's end back
 * (its first blocks most recent, evicted last), or cold at the tail from its start on (its end
 * evicted first); then cuts the directory to cap. */
static void add_missing(sd_pshadow *s, const uint64_t *h, int32_t from, int32_t n, int32_t cap)
{
    if (s->cold && sd_pshadow_cold_turn(s->insertions++)) {
        for (int32_t i = from; i < n; i++)
            if (find(s, h[i]) == SD_HLRU_NONE)
                add_one(s, h[i], 1);
    } else {
        for (int32_t i = n - 1; i >= from; i--)
            if (find(s, h[i]) == SD_HLRU_NONE)
                add_one(s, h[i], 0);
    }
    while (s->dir.count > (cap > 0 ? cap : 0))
        evict_one(s);
}

int32_t sd_pshadow_lookup(sd_pshadow *s, const uint64_t *h, int32_t n, int32_t max_hit, int32_t cap)
{
    int32_t k = 0;
    for (; k < n && k < max_hit; k++)
        if (find(s, h[k]) == SD_HLRU_NONE)
            break;
    for (int32_t i = k - 1; i >= 0; i--)
        sd_hlru_touch(&s->dir, find(s, h[i]));
    s->score = s->score * SCORE_DECAY + k;
    add_missing(s, h, k, n, cap);
    return k;
}

void sd_pshadow_add(sd_pshadow *s, const uint64_t *h, int32_t n, int32_t cap)
{
    add_missing(s, h, 0, n, cap);
}

double sd_pshadow_score(const sd_pshadow *s)
{
    return s->score;
}
