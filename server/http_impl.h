/* http_impl: what server/http.c and server/http_gen.c share — the server and per-connection
 * structs and the generation request (sd_http__gen) interface. Private to those two files. */
#ifndef SD_HTTP_IMPL_H
#define SD_HTTP_IMPL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "server/api.h"
#include "server/http.h"

typedef struct sd_http__gen sd_http__gen;

struct sd_http {
    struct MHD_Daemon *mhd;
    sd_http_opts o;
    sd_metrics *metrics;
    sd_auth *auth;
    sd_http_model model; /* valid once `ready` is set (release/acquire) */
    /* Read-held around every engine call from HTTP threads; write-held to detach the engine
     * at shutdown, after which `engine_gone` makes those calls no-ops. */
    pthread_rwlock_t engine_lock;
    int engine_gone;
    atomic_int ready;
    atomic_int draining;
    atomic_int inflight;
    void (*on_idle)(void *);
    void *idle_ud;
    /* Connections to resume, queued by engine events and resumed on the loop thread. */
    pthread_mutex_t wake_mu;
    sd_http__gen *wake_head; /* linked through the generations' wake_next */
    void (*wake)(void *);
    void *wake_ud;
    pthread_mutex_t mu; /* guards gens */
    sd_http__gen *gens; /* doubly linked list of live generations */
    uint64_t id_key;    /* random per process: request ids are unguessable and unique */
    atomic_uint_fast64_t id_ctr;
    int64_t started;
};

/* Per-connection request state (MHD's con_cls). */
typedef struct sd_http__conn {
    sd_metrics_route route;
    char *body; /* [len] request body */
    size_t len, cap;
    int too_big;
    int status; /* status queued, for metrics and the log */
    double t_start;
    sd_http__gen *gen;
    int counted; /* counted in h->inflight */
    char rid[40];
    const char *method, *url;
} sd_http__conn;

double sd_http__now(void);
/* Queues a JSON/text response; returns MHD_YES/NO. Records the status in c. */
enum MHD_Result sd_http__send(struct MHD_Connection *conn, sd_http__conn *c, int status, const char *ctype,
                              char *body_owned, size_t len);
enum MHD_Result sd_http__send_error(struct MHD_Connection *conn, sd_http__conn *c, const sd_api_err *e);

/* Handles the final call of a /v1 generation request (body complete) and the call after a
 * resume. */
enum MHD_Result sd_http__gen_handle(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c);
/* The connection finished (ok or not): cancels unfinished engine work, drops the HTTP
 * side's reference. */
void sd_http__gen_closed(sd_http *h, sd_http__gen *g, int ok);
/* Token counts so far, for the request's log line. */
void sd_http__gen_counts(sd_http__gen *g, int64_t *ret_prompt, int64_t *ret_generated);
void sd_http__gen_cancel(sd_http *h, sd_http__gen *g);
/* 1 if g is suspended and its socket reports the peer gone. Call with h->mu held. */
int sd_http__gen_peer_gone(sd_http__gen *g);

#endif
