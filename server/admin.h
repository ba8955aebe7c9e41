/* admin: the admin API under /admin/v1/ — its own bearer token (distinct from the API keys),
 * prune jobs (submit, list, get, cancel) through server/jobs.h and the model in service (get,
 * hot swap) through server/admin_models.h. Independent of libmicrohttpd: the HTTP layer hands
 * it a method, path, Authorization header and body, and sends back the status and JSON.
 *
 * Threading: sd_admin_handle runs on HTTP threads, concurrently, and never waits for a load:
 * a model swap loads on a thread of its own (sd_admin_models_swap_start). */
#ifndef SD_ADMIN_H
#define SD_ADMIN_H

#include <stddef.h>

#include "server/admin_models.h"
#include "server/jobs.h"

typedef struct sd_admin sd_admin;

typedef struct sd_admin_opts {
    const char *token;       /* NULL or "": the admin API is disabled (every route answers 404) */
    sd_jobs *jobs;           /* NULL: job routes answer 503 */
    sd_admin_models *models; /* outlives the admin API */
} sd_admin_opts;

int sd_admin_init(sd_admin **ret, const sd_admin_opts *o);
void sd_admin_free(sd_admin *a);

/* Handles one request whose path starts with /admin/. Returns the HTTP status and a
 * malloc'd JSON body in *ret_body (NULL on allocation failure). rid: the request id for the
 * log (may be NULL). The token is never logged. */
int sd_admin_handle(void *admin, const char *method, const char *path, const char *authz, const char *body,
                    size_t len, const char *rid, char **ret_body);

/* Prometheus text for /metrics: jobs and the model in service (malloc'd; NULL on OOM). */
char *sd_admin_metrics(void *admin);

#endif
