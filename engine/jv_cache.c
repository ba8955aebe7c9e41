/* jv_cache: compiled validators shared by requests asking for the same constraint (jv_cache.h). */
#include "jv_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "jschema.h"
#include "toolcall.h"

struct sd_jvc_entry {
    atomic_int refs;
    sd_jval jv;
    sd_jvc_kind kind;
    sd_tcall_mode mode; /* SD_JVC_TOOLS */
    int parallel;
    sd_jschema *schema; /* SD_JVC_SCHEMA */
    sd_tcall *tcall;    /* SD_JVC_TOOLS */
    uint64_t used;      /* the cache's clock at the last lookup (under the cache's mutex) */
    size_t len;
    char text[]; /* the key: the constraint's text */
};

struct sd_jvc {
    pthread_mutex_t mu;
    sd_jvc_entry **e; /* [cap], NULL where empty */
    int cap;
    uint64_t clock, hits;
};

/* The compiled constraints as sd_jvals: the compiled object is the constant context. */
static int js_step(const void *ctx, void *state, unsigned byte)
{
    return sd_jschema_step((const sd_jschema *)ctx, state, byte);
}

static int js_complete(const void *ctx, const void *state)
{
    return sd_jschema_complete((const sd_jschema *)ctx, state);
}

static int js_can_end(const void *ctx, const void *state)
{
    return sd_jschema_can_end((const sd_jschema *)ctx, state);
}

static int js_plain(const void *ctx, const void *state)
{
    return sd_jschema_in_plain_string((const sd_jschema *)ctx, state);
}

static int tc_step(const void *ctx, void *state, unsigned byte)
{
    return sd_tcall_step((const sd_tcall *)ctx, state, byte);
}

static int tc_complete(const void *ctx, const void *state)
{
    return sd_tcall_complete((const sd_tcall *)ctx, state);
}

static int tc_can_end(const void *ctx, const void *state)
{
    return sd_tcall_can_end((const sd_tcall *)ctx, state);
}

static int tc_plain(const void *ctx, const void *state)
{
    return sd_tcall_in_plain_string((const sd_tcall *)ctx, state);
}

int sd_jvc_init(sd_jvc **ret, int capacity, sd_diag *d)
{
    if (capacity < 1 || capacity > 256)
        return sd_diag_set(d, SD_EINVAL, "validator cache: capacity %d outside 1..256", capacity);
    sd_jvc *c = calloc(1, sizeof *c);
    if (c)
        c->e = calloc((size_t)capacity, sizeof *c->e);
    if (!c || !c->e) {
        free(c);
        return sd_diag_set(d, SD_ENOMEM, "validator cache: out of memory");
    }
    pthread_mutex_init(&c->mu, NULL);
    c->cap = capacity;
    *ret = c;
    return 0;
}

void sd_jvc_free(sd_jvc *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->cap; i++)
        sd_jvc_put(c->e[i]);
    pthread_mutex_destroy(&c->mu);
    free(c->e);
    free(c);
}

void sd_jvc_put(sd_jvc_entry *e)
{
    if (!e || atomic_fetch_sub(&e->refs, 1) != 1)
        return;
    sd_jschema_free(e->schema);
    sd_tcall_free(e->tcall);
    free(e);
}

/* Compiles a new entry (one reference, the caller's). */
static int compile(sd_jvc_kind kind, sd_tcall_mode mode, int parallel, const char *text, size_t len,
                   atomic_ullong *next_id, sd_jvc_entry **ret, sd_diag *d)
{
    sd_jvc_entry *e = calloc(1, sizeof *e + len + 1);
    if (!e)
        return sd_diag_set(d, SD_ENOMEM, "request: out of memory");
    atomic_init(&e->refs, 1);
    e->kind = kind;
    e->mode = mode;
    e->parallel = parallel;
    e->len = len;
    memcpy(e->text, text, len);
    int rc;
    uint64_t id = 1 + atomic_fetch_add(next_id, 1);
    if (kind == SD_JVC_SCHEMA) {
        rc = sd_jschema_compile(&e->schema, text, len, d);
        if (rc == 0)
            e->jv = (sd_jval){e->schema,  id,      sd_jschema_state_size(e->schema), js_step, js_complete,
                              js_can_end, js_plain};
    } else {
        rc = sd_tcall_compile(&e->tcall, text, len, parallel, mode, d);
        if (rc == 0)
            e->jv = (sd_jval){e->tcall,   id,      sd_tcall_state_size(e->tcall), tc_step, tc_complete,
                              tc_can_end, tc_plain};
    }
    if (rc == 0 && (e->jv.size == 0 || e->jv.size > SD_JVAL_MAX_STATE))
        rc = sd_diag_set(d, SD_EINVAL, "the constraint needs a %zu-byte state (at most %d)", e->jv.size,
                         SD_JVAL_MAX_STATE);
    if (rc < 0) {
        sd_jvc_put(e);
        return rc;
    }
    *ret = e;
    return 0;
}

static int same(const sd_jvc_entry *e, sd_jvc_kind kind, sd_tcall_mode mode, int parallel, const char *text,
                size_t len)
{
    return e && e->kind == kind && (kind == SD_JVC_SCHEMA || (e->mode == mode && e->parallel == parallel)) &&
           e->len == len && memcmp(e->text, text, len) == 0;
}

/* The slot to fill: an empty one, else the least recently used. */
static int victim(const sd_jvc *c)
{
    int v = 0;
    for (int i = 0; i < c->cap; i++) {
        if (!c->e[i])
            return i;
        if (c->e[i]->used < c->e[v]->used)
            v = i;
    }
    return v;
}

int sd_jvc_get(sd_jvc *c, sd_jvc_kind kind, sd_tcall_mode mode, int parallel, const char *text,
               atomic_ullong *next_id, sd_jvc_entry **ret, sd_diag *d)
{
    size_t len = strlen(text);
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->cap; i++)
        if (same(c->e[i], kind, mode, parallel, text, len)) {
            c->e[i]->used = ++c->clock;
            c->hits++;
            atomic_fetch_add(&c->e[i]->refs, 1);
            *ret = c->e[i];
            pthread_mutex_unlock(&c->mu);
            return 0;
        }
    pthread_mutex_unlock(&c->mu);
    /* compiled outside the lock: a big tool list takes milliseconds, and other requests wait */
    sd_jvc_entry *e = NULL;
    int rc = compile(kind, mode, parallel, text, len, next_id, &e, d);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&c->mu);
    int v = victim(c);
    sd_jvc_entry *old = c->e[v];
    atomic_fetch_add(&e->refs, 1); /* the cache's */
    e->used = ++c->clock;
    c->e[v] = e;
    pthread_mutex_unlock(&c->mu);
    sd_jvc_put(old);
    *ret = e;
    return 0;
}

const sd_jval *sd_jvc_jval(const sd_jvc_entry *e)
{
    return &e->jv;
}

void sd_jvc_state_init(const sd_jvc_entry *e, void *state)
{
    if (e->kind == SD_JVC_SCHEMA)
        sd_jschema_init(e->schema, state);
    else
        sd_tcall_init(e->tcall, state);
}

uint64_t sd_jvc_hits(sd_jvc *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t h = c->hits;
    pthread_mutex_unlock(&c->mu);
    return h;
}
