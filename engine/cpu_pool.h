/* cpu_pool: a small pthread pool that runs one parallel loop at a time — the caller hands
 * it [0, n) and a chunk size, every worker and the caller take chunks until none is left.
 *
 * Threading: one thread submits at a time (the backend's owner). */
#ifndef SD_CPU_POOL_H
#define SD_CPU_POOL_H

#include <stdint.h>

#include "diag.h"

typedef struct sd_cpu_pool sd_cpu_pool;

/* Runs items [begin, end) on thread `tid` (0 <= tid < sd_cpu_pool_threads). */
typedef void (*sd_cpu_task_fn)(void *ctx, int64_t begin, int64_t end, int tid);

/* n_threads counts the caller: n_threads - 1 workers are started (<= 0 => online cores). */
int sd_cpu_pool_init(sd_cpu_pool **ret, int n_threads, sd_diag *d);
void sd_cpu_pool_free(sd_cpu_pool *p);
int sd_cpu_pool_threads(const sd_cpu_pool *p);

/* Calls fn over [0, n) in chunks of `grain` items and returns when all are done. Runs
 * inline when the pool has one thread or there is a single chunk. */
void sd_cpu_pool_run(sd_cpu_pool *p, int64_t n, int64_t grain, sd_cpu_task_fn fn, void *ctx);

#endif
