/* cpu_pool: the CPU backend's worker threads and their chunked parallel loop. */
#include "engine/cpu_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct sd_cpu_pool {
    int n_threads; /* including the caller */
    pthread_t *threads;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t start_cv, done_cv;
    uint64_t generation; /* bumped for every loop; workers wait for a change */
    int stop;
    int busy; /* workers still inside the current loop */
    /* the current loop */
    sd_cpu_task_fn fn;
    void *ctx;
    int64_t n, grain;
    atomic_llong next; /* next chunk start */
};

static void take_chunks(sd_cpu_pool *p, int tid)
{
    for (;;) {
        int64_t b = atomic_fetch_add(&p->next, p->grain);
        if (b >= p->n)
            return;
        int64_t e = b + p->grain < p->n ? b + p->grain : p->n;
        p->fn(p->ctx, b, e, tid);
    }
}

typedef struct worker_arg {
    sd_cpu_pool *p;
    int tid;
} worker_arg;

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    sd_cpu_pool *p = wa->p;
    int tid = wa->tid;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->start_cv, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        take_chunks(p, tid);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int sd_cpu_pool_init(sd_cpu_pool **ret, int n_threads, sd_diag *d)
{
    if (n_threads <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = nc > 0 ? (int)nc : 1;
    }
    if (n_threads > 256)
        n_threads = 256;
    sd_cpu_pool *p = calloc(1, sizeof *p);
    if (!p)
        return sd_diag_set(d, SD_ENOMEM, "cpu pool: out of memory");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        sd_cpu_pool_free(p);
        return sd_diag_set(d, SD_ENOMEM, "cpu pool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa)
            *wa = (worker_arg){p, i};
        if (!wa || pthread_create(&p->threads[p->n_started], NULL, worker_main, wa) != 0) {
            free(wa);
            sd_cpu_pool_free(p);
            return sd_diag_set(d, SD_ENOMEM, "cpu pool: cannot start worker thread %d", i);
        }
        p->n_started++;
    }
    *ret = p;
    return 0;
}

void sd_cpu_pool_free(sd_cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->start_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->start_cv);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}

int sd_cpu_pool_threads(const sd_cpu_pool *p)
{
    return p ? p->n_threads : 1;
}

void sd_cpu_pool_run(sd_cpu_pool *p, int64_t n, int64_t grain, sd_cpu_task_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (!p || p->n_started == 0 || n <= grain) {
        fn(ctx, 0, n, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    atomic_store(&p->next, 0);
    p->busy = p->n_started;
    p->generation++;
    pthread_cond_broadcast(&p->start_cv);
    pthread_mutex_unlock(&p->mu);

    take_chunks(p, 0);

    /* workers read fn/ctx/n until they leave take_chunks: wait for all before returning */
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
