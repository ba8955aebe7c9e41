/* tp_bg: a possibly never-returning call (ncclCommAbort) on its own thread, with bounded
 * waits and a hand-off of the memory to whichever of owner and thread lets go last. */
#include "tp_bg.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "diag.h"

struct sd_tp_bg {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: a wall-clock jump does not stretch a wait */
    int started, done;
    int refs; /* the owner's, plus the thread's while it runs */
    void (*fn)(void *, int);
    void *arg;
    int iarg;
};

int sd_tp_bg_init(sd_tp_bg **ret)
{
    sd_tp_bg *b = calloc(1, sizeof *b);
    if (!b)
        return SD_ENOMEM;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int e = pthread_mutex_init(&b->mu, NULL);
    if (!e && (e = pthread_cond_init(&b->cv, &ca)))
        pthread_mutex_destroy(&b->mu);
    pthread_condattr_destroy(&ca);
    if (e) {
        free(b);
        return SD_ENOMEM;
    }
    b->refs = 1;
    *ret = b;
    return 0;
}

static void destroy(sd_tp_bg *b)
{
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Drops one hold (b->mu held on entry, released here); frees b when it was the last. */
static void unref_unlock(sd_tp_bg *b)
{
    int last = --b->refs == 0;
    pthread_mutex_unlock(&b->mu);
    if (last)
        destroy(b);
}

static void *run(void *arg)
{
    sd_tp_bg *b = arg;
    b->fn(b->arg, b->iarg);
    pthread_mutex_lock(&b->mu);
    b->done = 1;
    pthread_cond_broadcast(&b->cv);
    unref_unlock(b);
    return NULL;
}

/* Waits with b->mu held. */
static int wait_locked(sd_tp_bg *b, int wait_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long long ns = until.tv_nsec + (long long)(wait_ms > 0 ? wait_ms : 0) % 1000 * 1000000;
    until.tv_sec += (wait_ms > 0 ? wait_ms : 0) / 1000 + ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    while (b->started && !b->done)
        if (pthread_cond_timedwait(&b->cv, &b->mu, &until) == ETIMEDOUT)
            break;
    return !b->started || b->done;
}

int sd_tp_bg_start(sd_tp_bg *b, void (*fn)(void *arg, int iarg), void *arg, int iarg, int wait_ms)
{
    pthread_mutex_lock(&b->mu);
    if (!b->started) {
        b->fn = fn;
        b->arg = arg;
        b->iarg = iarg;
        pthread_attr_t at;
        pthread_t th;
        int e = pthread_attr_init(&at);
        if (!e) {
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            b->refs++; /* the thread's, taken before it can run */
            e = pthread_create(&th, &at, run, b);
            if (e)
                b->refs--;
            pthread_attr_destroy(&at);
        }
        if (e) {
            pthread_mutex_unlock(&b->mu);
            return SD_ENOMEM;
        }
        b->started = 1;
    }
    int r = wait_locked(b, wait_ms);
    pthread_mutex_unlock(&b->mu);
    return r;
}

int sd_tp_bg_wait(sd_tp_bg *b, int wait_ms)
{
    pthread_mutex_lock(&b->mu);
    int r = wait_locked(b, wait_ms);
    pthread_mutex_unlock(&b->mu);
    return r;
}

int sd_tp_bg_started(sd_tp_bg *b)
{
    pthread_mutex_lock(&b->mu);
    int s = b->started;
    pthread_mutex_unlock(&b->mu);
    return s;
}

void sd_tp_bg_free(sd_tp_bg *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    unref_unlock(b);
}
