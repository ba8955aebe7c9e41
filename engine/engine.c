/* engine: the engine thread — a locked inbox of submitted requests and cancelled ids, a
 * condition variable it sleeps on when idle, and the scheduler it drives step by step.
 *
 * Lock discipline: `mu` guards the inbox, the cancel list and `stop`; the scheduler is only
 * touched by the engine thread, and callbacks run with `mu` released (so a callback may call
 * sd_engine_submit / sd_engine_cancel). */
#include "engine.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sched.h"

struct sd_engine {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int started;
    int stop;
    int max_waiting;
    uint64_t next_id;
    sd_sched *sched;      /* engine thread only (after init) */
    sd_sched_req **inbox; /* [cap_inbox] submitted, not yet handed to the scheduler */
    int n_inbox, cap_inbox;
    uint64_t *cancels; /* [cap_cancels] ids to cancel */
    int n_cancels, cap_cancels;
};

void sd_engine_opts_default(sd_engine_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_seqs = 32;
    o->max_batch_tokens = 512;
    o->max_waiting = 256;
    o->max_model_len = 0;
    o->prefix_caching = 1;
    o->spec = (sd_spec_opts){0, 2, 4, 4, NULL, NULL};
}

void sd_request_params_default(sd_request_params *p)
{
    memset(p, 0, sizeof *p);
    sd_sampling_default(&p->sampling);
    p->max_tokens = 16;
    p->logprobs = -1;
    p->think_budget = -1;
}

/* Moves the inbox and cancel list into the scheduler. Called with mu held. */
static void drain_locked(sd_engine *e)
{
    for (int i = 0; i < e->n_inbox; i++)
        sd_sched_add(e->sched, e->inbox[i]);
    e->n_inbox = 0;
    for (int i = 0; i < e->n_cancels; i++)
        sd_sched_cancel(e->sched, e->cancels[i]);
    e->n_cancels = 0;
}

static void *engine_main(void *arg)
{
    sd_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        drain_locked(e);
        if (e->stop)
            break;
        if (!sd_sched_has_work(e->sched)) {
            pthread_cond_wait(&e->cv, &e->mu);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        /* A failed forward pass already sent SD_EV_ERROR to the requests of that batch;
         * the engine keeps serving the others. */
        sd_sched_step(e->sched, NULL);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    sd_sched_fail_all(e->sched, SD_ECANCEL, "the engine is shutting down");
    return NULL;
}

int sd_engine_init(sd_engine **ret, const sd_model *m, sd_backend *b, const sd_engine_opts *o, sd_diag *d)
{
    sd_engine_opts def;
    if (!o) {
        sd_engine_opts_default(&def);
        o = &def;
    }
    sd_engine *e = calloc(1, sizeof *e);
    if (!e)
        return sd_diag_set(d, SD_ENOMEM, "engine: out of memory");
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->max_waiting = o->max_waiting > 0 ? o->max_waiting : 1;
    e->next_id = 1;
    int rc = sd_sched_init(&e->sched, m, b, o, d);
    if (rc < 0) {
        sd_engine_free(e);
        return rc;
    }
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        sd_engine_free(e);
        return sd_diag_set(d, SD_ENOMEM, "engine: cannot start the engine thread");
    }
    e->started = 1;
    pthread_setname_np(e->thread, "sd-engine"); /* visible in top -H, gdb, perf */
    *ret = e;
    return 0;
}

void sd_engine_free(sd_engine *e)
{
    if (!e)
        return;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->stop = 1;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    for (int i = 0; i < e->n_inbox; i++) /* only when the thread never started */
        sd_sched_req_free(e->inbox[i]);
    sd_sched_free(e->sched);
    free(e->inbox);
    free(e->cancels);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static int push_inbox_locked(sd_engine *e, sd_sched_req *r)
{
    if (e->n_inbox == e->cap_inbox) {
        int cap = e->cap_inbox ? 2 * e->cap_inbox : 16;
        sd_sched_req **p = realloc(e->inbox, sizeof *p * (size_t)cap);
        if (!p)
            return SD_ENOMEM;
        e->inbox = p;
        e->cap_inbox = cap;
    }
    e->inbox[e->n_inbox++] = r;
    return 0;
}

int sd_engine_submit(sd_engine *e, const sd_request_params *p, sd_event_cb cb, void *ud, uint64_t *ret_id,
                     sd_diag *d)
{
    pthread_mutex_lock(&e->mu);
    uint64_t id = e->next_id++;
    pthread_mutex_unlock(&e->mu);
    sd_sched_req *r = NULL;
    int rc = sd_sched_req_new(e->sched, p, cb, ud, id, &r, d); /* validation outside the lock */
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&e->mu);
    sd_engine_stats st;
    sd_sched_stats(e->sched, &st);
    if (e->stop)
        rc = sd_diag_set(d, SD_ECANCEL, "engine: shutting down");
    else if (e->n_inbox + st.waiting >= e->max_waiting)
        rc = sd_diag_set(d, SD_EFULL, "engine: the waiting queue is full (%d requests)", e->max_waiting);
    else if ((rc = push_inbox_locked(e, r)) < 0)
        sd_diag_set(d, rc, "engine: out of memory");
    if (rc == 0) {
        if (ret_id) /* before the engine can see it: events may arrive before we return */
            *ret_id = id;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    if (rc < 0)
        sd_sched_req_free(r);
    return rc;
}

void sd_engine_cancel(sd_engine *e, uint64_t id)
{
    pthread_mutex_lock(&e->mu);
    if (e->n_cancels == e->cap_cancels) {
        int cap = e->cap_cancels ? 2 * e->cap_cancels : 16;
        uint64_t *p = realloc(e->cancels, sizeof *p * (size_t)cap);
        if (!p) { /* cannot record it: the request runs to its end instead */
            pthread_mutex_unlock(&e->mu);
            return;
        }
        e->cancels = p;
        e->cap_cancels = cap;
    }
    e->cancels[e->n_cancels++] = id;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void sd_engine_stats_get(sd_engine *e, sd_engine_stats *s)
{
    pthread_mutex_lock(&e->mu);
    sd_sched_stats(e->sched, s);
    s->waiting += e->n_inbox;
    pthread_mutex_unlock(&e->mu);
}
