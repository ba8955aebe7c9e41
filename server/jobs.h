/* jobs: the admin job runner — prune jobs validated from their JSON spec, queued FIFO and run
 * one at a time on a worker thread while the server keeps serving, with progress, ETA,
 * cancellation and a record per job persisted atomically as state_dir/jobs/<id>.json.
 *
 * Threading: every sd_jobs_* call may come from any thread (HTTP threads, the loop thread);
 * one mutex guards the records. The activate hook runs on the worker thread. */
#ifndef SD_JOBS_H
#define SD_JOBS_H

#include <jansson.h>
#include <stdint.h>

#include "engine/diag.h"

typedef struct sd_jobs sd_jobs;

/* Swaps the server to the checkpoint in `dir` (a finished job with "activate": true).
 * Returns 0, or a negative code with a message in d. */
typedef int (*sd_jobs_activate_fn)(void *ud, const char *dir, sd_diag *d);

typedef struct sd_jobs_opts {
    const char *state_dir; /* records go to <state_dir>/jobs (created if missing) */
    int64_t memory_budget; /* bytes a job may be estimated to use; 0 => no limit */
    sd_jobs_activate_fn activate;
    void *activate_ud;
} sd_jobs_opts;

/* Creates the state directory, loads the records of earlier processes (a job found queued or
 * running is marked failed with error "interrupted" and its temporary output removed) and
 * starts the worker thread. */
int sd_jobs_init(sd_jobs **ret, const sd_jobs_opts *o, sd_diag *d);
/* Cancels the running job (recorded as failed, "interrupted: the server shut down"), marks
 * queued ones likewise, joins the worker and frees everything. NULL is a no-op. */
void sd_jobs_free(sd_jobs *j);

/* Validates `spec` (a JSON object; see docs/admin.md) and queues the job. default_model is
 * used when the spec has no "model" (the loaded model's directory; may be NULL).
 * Returns 0 with *ret_job (a new reference to the record), or SD_EINVAL with the offending
 * field in *ret_param (NULL when the body as a whole is wrong) and a message in d. */
int sd_jobs_submit(sd_jobs *j, json_t *spec, const char *default_model, json_t **ret_job,
                   const char **ret_param, sd_diag *d);
/* {"object":"list","data":[records, oldest first]} (new reference). */
json_t *sd_jobs_list(sd_jobs *j);
/* A copy of one record, or SD_ENOTFOUND. */
int sd_jobs_get(sd_jobs *j, const char *id, json_t **ret);
/* Cancels a queued job at once, or asks the running one to stop at its next safe point
 * ("cancel_requested": true; the state turns "cancelled" when it has stopped). SD_ENOTFOUND,
 * or SD_EINVAL when the job has already finished. *ret: the record after the call. */
int sd_jobs_cancel(sd_jobs *j, const char *id, json_t **ret);

/* Prometheus text: jobs by state, the running job's progress (malloc'd, NULL on OOM). */
char *sd_jobs_metrics(sd_jobs *j);

#endif
