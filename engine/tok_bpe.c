/* tok_bpe: byte-level BPE on one pre-token: merges applied lowest rank first (leftmost on
 * ties) with a min-heap, exactly as HF tokenizers' Word::merge_all does. */
#include "tok_impl.h"

#include <stdlib.h>
#include <string.h>

void sd__tok_bpe_scratch_free(sd__tok_bpe_scratch *s)
{
    if (!s)
        return;
    free(s->id);
    free(s->prev);
    free(s->next);
    free(s->heap);
    free(s->mapped.p);
    memset(s, 0, sizeof *s);
}

static int scratch_reserve(sd__tok_bpe_scratch *s, size_t n)
{
    if (n <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n)
        cap *= 2;
    int32_t *id = realloc(s->id, cap * sizeof *id);
    if (id)
        s->id = id;
    int32_t *prev = realloc(s->prev, cap * sizeof *prev);
    if (prev)
        s->prev = prev;
    int32_t *next = realloc(s->next, cap * sizeof *next);
    if (next)
        s->next = next;
    if (!id || !prev || !next)
        return SD_ENOMEM;
    s->cap = cap;
    return 0;
}

static int heap_push(sd__tok_bpe_scratch *s, int32_t rank, int32_t pos, int32_t id)
{
    if (s->heap_n == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        struct sd__tok_merge *h = realloc(s->heap, cap * sizeof *h);
        if (!h)
            return SD_ENOMEM;
        s->heap = h;
        s->heap_cap = cap;
    }
    struct sd__tok_merge m = {(uint64_t)(uint32_t)rank << 32 | (uint32_t)pos, id};
    size_t i = s->heap_n++;
    while (i > 0 && s->heap[(i - 1) / 2].key > m.key) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = m;
    return 0;
}

static struct sd__tok_merge heap_pop(sd__tok_bpe_scratch *s)
{
    struct sd__tok_merge top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && s->heap[c + 1].key < s->heap[c].key)
            c++;
        if (s->heap[c].key >= last.key)
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n)
        s->heap[i] = last;
    return top;
}

/* Pushes the merge of symbol `pos` with its right neighbour, if the pair is a merge. */
static int push_pair(const sd_tokenizer *t, sd__tok_bpe_scratch *s, int32_t pos)
{
    int32_t rank, id, r = pos >= 0 ? s->next[pos] : -1;
    if (r < 0 || !sd__tok_pairmap_get(&t->merges, s->id[pos], s->id[r], &rank, &id))
        return 0;
    return heap_push(s, rank, pos, id);
}

/* ignore_merges: a pre-token that is itself in the vocab is emitted whole. */
static int32_t whole_word_id(const sd_tokenizer *t, sd__tok_bpe_scratch *s, const unsigned char *w, size_t n)
{
    s->mapped.len = 0;
    if (sd__tok_buf_reserve(&s->mapped, 2 * n))
        return -1; /* on allocation failure fall back to merging, same result */
    for (size_t i = 0; i < n; i++) {
        const unsigned char *u = t->bl_utf8[w[i]];
        memcpy(s->mapped.p + s->mapped.len, u + 1, u[0]);
        s->mapped.len += u[0];
    }
    return sd__tok_strmap_get(&t->vocab, s->mapped.p, s->mapped.len);
}

int sd__tok_bpe(const sd_tokenizer *t, sd__tok_bpe_scratch *s, const unsigned char *w, size_t n,
                sd__tok_ids *out)
{
    if (n == 0)
        return 0;
    if (n == 1 && t->byte_id[w[0]] >= 0)
        return sd__tok_ids_push(out, t->byte_id[w[0]]);
    if (t->ignore_merges) {
        int32_t id = whole_word_id(t, s, w, n);
        if (id >= 0)
            return sd__tok_ids_push(out, id);
    }
    int rc = scratch_reserve(s, n);
    if (rc)
        return rc;
    int32_t m = 0; /* symbols: one per byte whose character is in the vocab */
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id < 0) {
            if (t->unk_id < 0 || (t->fuse_unk && m > 0 && s->id[m - 1] == t->unk_id))
                continue; /* HF drops characters it cannot map when there is no unk token */
            id = t->unk_id;
        }
        s->id[m] = id;
        s->prev[m] = m - 1;
        s->next[m] = m + 1;
        m++;
    }
    if (m == 0)
        return 0;
    s->next[m - 1] = -1;
    s->heap_n = 0;
    for (int32_t i = 0; i + 1 < m; i++)
        if ((rc = push_pair(t, s, i)))
            return rc;
    while (s->heap_n) {
        struct sd__tok_merge top = heap_pop(s);
        int32_t pos = (int32_t)(uint32_t)top.key, r;
        if (s->id[pos] < 0 || (r = s->next[pos]) < 0)
            continue; /* merged away, or now the last symbol */
        int32_t rank, id;
        if (!sd__tok_pairmap_get(&t->merges, s->id[pos], s->id[r], &rank, &id) || id != top.id)
            continue; /* stale: a neighbour changed since this entry was pushed */
        s->id[pos] = id;
        s->id[r] = -1;
        s->next[pos] = s->next[r];
        if (s->next[r] >= 0)
            s->prev[s->next[r]] = pos;
        if ((rc = push_pair(t, s, s->prev[pos])) || (rc = push_pair(t, s, pos)))
            return rc;
    }
    for (int32_t i = 0; i >= 0; i = s->next[i])
        if ((rc = sd__tok_ids_push(out, s->id[i])))
            return rc;
    return 0;
}
