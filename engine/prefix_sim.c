/* prefix_sim: the prefix cache on synthetic request streams (engine/prefix_sim.h). */
#include "engine/prefix_sim.h"

#include <stdlib.h>
#include <string.h>

#include "engine/kv.h"
#include "engine/prefix.h"

const char *const sd_prefix_sim_streams[] = {"cycle", "chat",  "chat-zipf", "system+docs",
                                             "zipf",  "mixed", NULL};

enum { S_CYCLE, S_CHAT, S_CHAT_ZIPF, S_SYSDOCS, S_ZIPF, S_MIXED };

#define CHAT_CONVS 60
#define CHAT_TURNS 12
#define SHARED_BASE 100000   /* shared prompt id's tokens: (id + 1) * SHARED_BASE + i */
#define FRESH_BASE 200000000 /* tokens of no other prompt count up from here */

typedef struct tokbuf {
    int32_t *t;
    int32_t n, cap;
} tokbuf;

typedef struct sim {
    const sd_prefix_sim_opts *o;
    uint64_t rng;
    int32_t fresh, cycle;
    tokbuf conv[CHAT_CONVS]; /* each conversation's history: prompt and reply so far */
    int turns[CHAT_CONVS];
    int oom;
} sim;

typedef struct slot {
    int32_t *tok;
    int32_t n_prompt, n_total;
    sd_kv_seq seq;
    int busy;
} slot;

static uint32_t rnd(sim *s)
{
    s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(s->rng >> 33);
}

/* A power law over [0, n): rank r with weight ~ 1/(r+1), drawn by inversion of its tail. */
static int32_t zipf(sim *s, int32_t n)
{
    double u = (rnd(s) + 1.0) / 2147483649.0;
    return (int32_t)(1.0 / u) % n; /* Pareto of index 1, folded */
}

static void push(sim *s, tokbuf *b, int32_t tok)
{
    if (b->n == b->cap) {
        int32_t cap = b->cap ? 2 * b->cap : 256;
        int32_t *t = realloc(b->t, (size_t)cap * sizeof *t);
        if (!t) {
            s->oom = 1;
            return;
        }
        b->t = t;
        b->cap = cap;
    }
    b->t[b->n++] = tok;
}

static void fresh(sim *s, tokbuf *b, int32_t blocks)
{
    for (int32_t i = 0; i < blocks * s->o->block_size; i++)
        push(s, b, FRESH_BASE + s->fresh++);
}

static void shared(sim *s, tokbuf *b, int32_t id, int32_t blocks)
{
    for (int32_t i = 0; i < blocks * s->o->block_size; i++)
        push(s, b, (id + 1) * SHARED_BASE + i);
}

/* The next request of stream k into b: the prompt, then its reply; *n_prompt = the prompt's
 * length. */
static void next_request(sim *s, int k, tokbuf *b, int32_t *n_prompt)
{
    b->n = 0;
    if (k == S_MIXED) {
        static const int pick[3] = {S_CYCLE, S_CHAT, S_SYSDOCS};
        k = pick[rnd(s) % 3];
    }
    int32_t reply = 2;
    if (k == S_CYCLE) {
        shared(s, b, s->cycle++ % 16, 64);
        fresh(s, b, 4);
        reply = 4;
    } else if (k == S_CHAT || k == S_CHAT_ZIPF) {
        int c = k == S_CHAT ? (int)(rnd(s) % CHAT_CONVS) : zipf(s, CHAT_CONVS);
        tokbuf *h = &s->conv[c];
        if (h->n == 0 || s->turns[c] >= CHAT_TURNS) {
            h->n = 0;
            s->turns[c] = 0;
            fresh(s, h, 4);
        }
        for (int32_t i = 0; i < h->n; i++)
            push(s, b, h->t[i]);
        fresh(s, b, 4);
        *n_prompt = b->n;
        fresh(s, b, 4);
        h->n = 0; /* the next turn resends all of this */
        for (int32_t i = 0; i < b->n; i++)
            push(s, h, b->t[i]);
        s->turns[c]++;
        return;
    } else if (k == S_SYSDOCS) {
        shared(s, b, 100 + (int32_t)(rnd(s) % 4), 32);
        fresh(s, b, 20 + (int32_t)(rnd(s) % 101));
    } else {
        shared(s, b, 200 + zipf(s, 100), 32);
        fresh(s, b, 8);
    }
    *n_prompt = b->n;
    fresh(s, b, reply);
}

static int stream_id(const char *name)
{
    for (int i = 0; sd_prefix_sim_streams[i]; i++)
        if (!strcmp(name, sd_prefix_sim_streams[i]))
            return i;
    return -1;
}

void sd_prefix_sim_defaults(sd_prefix_sim_opts *o)
{
    *o = (sd_prefix_sim_opts){
        .stream = "cycle", .pool = 1000, .block_size = 16, .requests = 2000, .running = 4, .seed = 1};
}

/* A finished request: its prompt and reply stay cached, its table goes. */
static void finish(sd_kv *kv, sd_prefix *p, slot *sl)
{
    if (!sl->busy)
        return;
    sd_prefix_insert(p, sl->tok, sl->n_total, sl->seq.blocks);
    sd_kv_seq_release(kv, &sl->seq);
    sl->busy = 0;
}

/* Admits a request as the scheduler does: the cached blocks its prompt starts with, then room
 * for the rest and its reply (evicting idle cached blocks), then its prompt cached. */
static int admit(sd_kv *kv, sd_prefix *p, slot *sl, int32_t bs)
{
    sd_kv_seq_init(&sl->seq);
    int32_t max = (sl->n_prompt - 1) / bs;
    if (max > 0 && sd_kv_seq_reserve(&sl->seq, max) != 0) {
        sd_kv_seq_release(kv, &sl->seq);
        return SD_ENOMEM;
    }
    int32_t k = max > 0 ? sd_prefix_match(p, sl->tok, sl->n_prompt, max, sl->seq.blocks) : 0;
    sl->seq.n_blocks = k;
    sl->seq.n_tokens = k * bs;
    int32_t need = sd_kv_seq_needed(kv, &sl->seq, sl->n_total - sl->seq.n_tokens);
    if (need > sd_kv_available(kv))
        sd_prefix_evict(p, need);
    if (sd_kv_seq_append(kv, &sl->seq, sl->n_total - sl->seq.n_tokens) != 0) {
        sd_kv_seq_release(kv, &sl->seq);
        return SD_EFULL;
    }
    sd_prefix_insert(p, sl->tok, sl->n_prompt, sl->seq.blocks);
    sl->busy = 1;
    return 0;
}

static int run(const sd_prefix_sim_opts *o, int k, sd_kv *kv, sd_prefix *p, slot *slots,
               sd_prefix_sim_result *res)
{
    sim s = {.o = o, .rng = o->seed};
    tokbuf b = {0};
    int rc = 0;
    for (int32_t r = 0; r < o->requests && rc == 0; r++) {
        slot *sl = &slots[r % o->running];
        finish(kv, p, sl);
        next_request(&s, k, &b, &sl->n_prompt);
        if (s.oom) {
            rc = SD_ENOMEM;
            break;
        }
        free(sl->tok);
        sl->tok = malloc((size_t)b.n * sizeof *sl->tok);
        if (!sl->tok) {
            rc = SD_ENOMEM;
            break;
        }
        memcpy(sl->tok, b.t, (size_t)b.n * sizeof *b.t);
        sl->n_total = b.n;
        int a = admit(kv, p, sl, o->block_size);
        if (a == SD_EFULL)
            res->skipped++;
        else
            rc = a;
    }
    for (int32_t i = 0; i < o->running; i++) {
        finish(kv, p, &slots[i]);
        free(slots[i].tok);
    }
    free(b.t);
    for (int i = 0; i < CHAT_CONVS; i++)
        free(s.conv[i].t);
    return rc;
}

int sd_prefix_sim_run(const sd_prefix_sim_opts *o, int policy, sd_prefix_sim_result *res, sd_diag *d)
{
    int k = stream_id(o->stream);
    if (k < 0)
        return sd_diag_set(d, SD_EINVAL, "prefix sim: unknown stream '%s'", o->stream);
    if (o->pool < 1 || o->block_size < 1 || o->requests < 1 || o->running < 1 || o->running > 4096)
        return sd_diag_set(d, SD_EINVAL,
                           "prefix sim: pool, block size and requests must be positive, running 1-4096");
    *res = (sd_prefix_sim_result){0};
    sd_kv *kv = NULL;
    sd_prefix *p = NULL;
    slot *slots = calloc((size_t)o->running, sizeof *slots);
    int rc = slots ? sd_kv_init(&kv, o->pool, o->block_size, d) : SD_ENOMEM;
    if (rc == 0)
        rc = sd_prefix_init(&p, kv, policy, d);
    if (rc == 0)
        rc = run(o, k, kv, p, slots, res);
    if (rc == 0) {
        sd_prefix_stats st;
        sd_prefix_stats_get(p, &st);
        res->hit_rate = st.query_tokens ? (double)st.hit_tokens / (double)st.query_tokens : 0;
        res->evicted = st.evicted_blocks;
        res->cold = st.cold_inserted_blocks;
    } else if (rc == SD_ENOMEM) {
        sd_diag_set(d, rc, "prefix sim: out of memory");
    }
    sd_prefix_free(p);
    sd_kv_free(kv);
    free(slots);
    return rc;
}
