/* http: the libmicrohttpd front end — routing, auth, body limits, the OpenAI endpoints,
 * SSE streaming with suspend/resume (a waiting stream costs no CPU), readiness/draining,
 * and cancellation of engine requests whose client went away.
 *
 * Threading: MHD runs its own event thread(s); engine events arrive on the engine thread and
 * resume suspended connections; sd_http_* control calls come from the main (libuv) thread. */
#ifndef SD_HTTP_H
#define SD_HTTP_H

#include <stdint.h>

#include "engine/engine.h"
#include "engine/model.h"
#include "server/auth.h"
#include "server/metrics.h"

typedef struct sd_http sd_http;

typedef struct sd_http_opts {
    const char *host;
    int port;
    int threads;
    int max_connections;
    int max_connections_per_ip; /* 0: none; beyond it MHD closes new connections at accept */
    int max_body_bytes;
    double request_timeout;   /* idle seconds */
    int web_ui;               /* serve the web console at / (server/web.c) */
    int split_reasoning;      /* thinking models' chat replies: reasoning_content apart (server/reply.h) */
    int gpu_first, gpu_count; /* the backend's GPUs, reported on /metrics; gpu_count 0: none */
    int tensor_parallel;      /* ranks of the model's tensor-parallel group, on /info (0: 1) */
    /* admin_port > 0: a second listener on admin_host:admin_port serves /admin/ and nothing
     * else, and the main one answers 404 there (admin_listen); 0: /admin/ on the main one.
     * admin_host is read by sd_http_start only. */
    const char *admin_host;
    int admin_port;
} sd_http_opts;

/* What generation requests are served from, published once the model is loaded. The
 * strings and objects must outlive the server (sd_http_free). chat_template is an
 * sd_chat_template * (NULL: chat requests get 400). */
typedef struct sd_http_model {
    const sd_model *model;
    sd_engine *engine;
    const void *chat_template;
    const char *name; /* served model id */
    int32_t max_model_len;
    int max_waiting; /* the engine's queue bound: a request of more sequences can never be admitted */
    /* Called once (from any thread, must not block) when this model has been replaced by a
     * later sd_http_set_model, or the server freed, and no request uses it any more: its
     * owner may then free it. NULL: not told. */
    void (*released)(void *ud);
    void *released_ud;
} sd_http_model;

/* Starts listening. /health answers at once; /ready and /v1 answer 503 until
 * sd_http_set_model. `metrics` and `auth` outlive the server. */
int sd_http_start(sd_http **ret, const sd_http_opts *o, sd_metrics *metrics, sd_auth *auth, sd_diag *d);
/* Stops MHD: closes the listening sockets and every connection (their requests are cancelled).
 * Engine events may still arrive afterwards; free the engine before sd_http_free. */
void sd_http_stop(sd_http *h);
/* Stops (if not yet) and frees everything; NULL is a no-op. */
void sd_http_free(sd_http *h);

/* Engine events never call into MHD: they queue their connection and call `wake` (on the
 * engine thread; e.g. uv_async_send, which coalesces), and the loop thread then calls
 * sd_http_resume_pending to resume every queued connection. Set before sd_http_set_model;
 * without it, events resume connections directly. */
void sd_http_set_waker(sd_http *h, void (*wake)(void *), void *ud);
void sd_http_resume_pending(sd_http *h);
/* Publishes the model: readiness turns true. `m` is copied. A later call replaces it (hot
 * swap): requests prepared from then on use the new model, those already prepared finish on
 * the one they started with, whose `released` hook runs once the last of them is done. */
void sd_http_set_model(sd_http *h, const sd_http_model *m);
/* Routes every request under /admin/ to `fn` (server/admin.h's sd_admin_handle): method, path,
 * Authorization header and body in; status and a malloc'd JSON body out. Without it /admin/
 * answers 404. Set before requests arrive. */
typedef int (*sd_http_admin_fn)(void *ud, const char *method, const char *path, const char *authz,
                                const char *body, size_t len, const char *rid, char **ret_body);
void sd_http_set_admin(sd_http *h, sd_http_admin_fn fn, void *ud);
/* Draining: readiness false, new /v1 requests get 503; in-flight ones continue. `on_idle`
 * is called (from any thread) each time the in-flight count drops to zero while draining. */
void sd_http_set_draining(sd_http *h, void (*on_idle)(void *), void *ud);
/* Generation requests in flight (HTTP requests whose response has not completed). */
int sd_http_inflight(sd_http *h);
/* Cancels the engine requests of every in-flight generation (drain timeout). */
void sd_http_cancel_all(sd_http *h);
/* Cancels the engine work of suspended requests whose client has disconnected (MHD does
 * not watch suspended sockets). Called periodically from the main loop. */
void sd_http_reap_disconnected(sd_http *h);
/* Shutdown step 1: no engine call is made from HTTP threads after this returns (new
 * submissions fail with 503), so the engine can be freed while MHD still runs and its last
 * events can resume their connections. Then sd_http_stop. */
void sd_http_detach_engine(sd_http *h);
/* 1 when the model is loaded and the server is not draining. */
int sd_http_ready(sd_http *h);

#endif
