/* admin_models: the served model instances (model + backend + engine + chat template) —
 * loading one beside the one in service, publishing it to the HTTP layer (hot swap), and
 * freeing a replaced one once the last request that started on it has finished. A swap asked
 * through the admin API loads on a thread of its own (sd_admin_models_swap_start), and its
 * state is kept for GET /admin/v1/model.
 *
 * Threading: load/swap run on any thread except the loop thread (they are slow); one swap at
 * a time (swap_start answers SD_EFULL while one loads, swap waits for it); reap runs on the
 * loop thread after the wake callback; info/metrics/swap_start anywhere. */
#ifndef SD_ADMIN_MODELS_H
#define SD_ADMIN_MODELS_H

#include <jansson.h>

#include "server/conf.h"
#include "server/http.h"

typedef struct sd_admin_models sd_admin_models;
typedef struct sd_admin_inst sd_admin_inst;

/* `c` and `h` outlive the set. `wake` is called (from any thread, never blocking) when a
 * replaced instance has become free to reap; the owner then calls sd_admin_models_reap on
 * its loop thread. */
int sd_admin_models_init(sd_admin_models **ret, const sd_conf *c, sd_http *h, void (*wake)(void *),
                         void *wake_ud);

/* Loads a model directory into a new instance with the backend and engine options of the
 * config. name: the served model id (NULL or "": the directory's name). */
int sd_admin_models_load(sd_admin_models *mm, const char *dir, const char *name, sd_admin_inst **ret,
                         sd_diag *d);
/* Publishes inst: the first model, or a swap (new requests go to inst; requests already
 * prepared finish on the instance they started with, which is then reaped). *ret_hm (may be
 * NULL) receives what was published. */
void sd_admin_models_publish(sd_admin_models *mm, sd_admin_inst *inst, sd_http_model *ret_hm);
/* Frees an instance that was never published. */
void sd_admin_models_discard(sd_admin_inst *inst);
/* Load + publish on the calling thread (a job's activation), after waiting for a swap in
 * progress to end. On failure the model in service stays and the error is returned
 * (SD_ECANCEL when the server shuts down meanwhile). *ret_info (may be NULL): the new model's
 * info plus "previous" and "drained". The swap's state is recorded as for swap_start
 * (trigger "job"). */
int sd_admin_models_swap(sd_admin_models *mm, const char *dir, const char *name, json_t **ret_info,
                         sd_diag *d);
/* Starts a swap on a thread of its own and returns at once. Cheap checks first, on the
 * calling thread: the first model is in service, dir is a directory whose config.json parses,
 * the tensor-parallel mode allows a second model (else their code and message; nothing is
 * started). SD_EFULL when a swap is already loading. 0: *ret_swap (may be NULL) receives the
 * swap's record (state "loading"); the model in service keeps serving until the new one is
 * published. */
int sd_admin_models_swap_start(sd_admin_models *mm, const char *dir, const char *name, json_t **ret_swap,
                               sd_diag *d);
/* The latest swap's record: {"object":"admin.model_swap", state: loading|failed|done, path,
 * name, trigger: api|job, started_at, finished_at, elapsed_seconds, error, previous}, or
 * JSON null when none was asked since start-up. */
json_t *sd_admin_models_swap_info(sd_admin_models *mm);
/* Shutdown step 0 (never blocks): a swap in progress stops at the end of its current load
 * stage (checkpoint, backend, engine) and is discarded; later swaps are refused. */
void sd_admin_models_cancel(sd_admin_models *mm);
/* Frees the replaced instances no request uses any more (loop thread). */
void sd_admin_models_reap(sd_admin_models *mm);
/* 1 when the model in service runs on a tensor-parallel group that has failed (every later
 * step fails: the server should exit so that it is restarted). Any thread, never blocks. */
int sd_admin_models_failed(sd_admin_models *mm);

/* The model in service: {"object":"admin.model", path, name, sparsity, loaded_at, ...}, or
 * NULL before the first publish. */
json_t *sd_admin_models_info(sd_admin_models *mm);
/* The directory of the model in service (malloc'd), or NULL. */
char *sd_admin_models_dir(sd_admin_models *mm);
/* Prometheus text: the model in service, swaps done, instances awaiting their last request. */
char *sd_admin_models_metrics(sd_admin_models *mm);

/* Shutdown step: cancels and joins a swap in progress, then stops every instance's engine
 * (after sd_http_detach_engine). */
void sd_admin_models_stop(sd_admin_models *mm);
/* Frees everything (after sd_http_free). NULL is a no-op. */
void sd_admin_models_free(sd_admin_models *mm);

#endif
