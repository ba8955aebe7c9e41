/* admin_models: the served model instances (model + backend + engine + chat template) —
 * loading one beside the one in service, publishing it to the HTTP layer (hot swap), and
 * freeing a replaced one once the last request that started on it has finished.
 *
 * Threading: load/swap run on any thread except the loop thread (they are slow) and are
 * serialised; reap runs on the loop thread after the wake callback; info/metrics anywhere. */
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
/* Load + publish, one swap at a time. On failure the model in service stays and the error is
 * returned. *ret_info (may be NULL): the new model's info plus "previous" and "drained". */
int sd_admin_models_swap(sd_admin_models *mm, const char *dir, const char *name, json_t **ret_info,
                         sd_diag *d);
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

/* Shutdown step: stops every instance's engine (after sd_http_detach_engine). */
void sd_admin_models_stop(sd_admin_models *mm);
/* Frees everything (after sd_http_free). NULL is a no-op. */
void sd_admin_models_free(sd_admin_models *mm);

#endif
