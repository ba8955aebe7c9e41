/* http_impl: what server/http.c, http_gen.c and http_prep.c share — the server, generation
 * and per-connection structs and the internal sd_http__* functions. Private to those files. */
#ifndef SD_HTTP_IMPL_H
#define SD_HTTP_IMPL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "server/api.h"
#include "engine/gpu_sensor.h"
#include "server/http.h"
#include "server/reply.h"

typedef struct sd_http__gen sd_http__gen;

/* A published model and the requests using it (hot swap): h->cur holds one reference while it
 * is current, each generation one from its preparation to its end. */
typedef struct sd_http__slot {
    sd_http_model m;
    atomic_int refs;
} sd_http__slot;

typedef struct sd_http__sock sd_http__sock;

struct sd_http {
    struct MHD_Daemon *mhd;
    struct MHD_Daemon *admin_mhd; /* admin_listen's listener, or NULL */
    sd_http_opts o;
    sd_metrics *metrics;
    sd_auth *auth;
    sd_http_model model; /* the current model: valid once `ready` is set; read under engine_lock */
    sd_http__slot *cur;  /* its slot; swapped under engine_lock (write) */
    sd_http_admin_fn admin;
    void *admin_ud;
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
    pthread_mutex_t sensor_mu; /* guards the GPU sensors (http_gpumem.c), opened at the first scrape */
    int sensors_opened;
    sd_gpu_sensor **sensors;  /* [o.gpu_count], an entry NULL where NVML has no reading */
    pthread_mutex_t socks_mu; /* guards socks */
    sd_http__sock *socks;     /* live connections and their request deadlines (http_deadline.c) */
};

typedef struct gen_choice { /* one choice: one engine request */
    sd_http__gen *g;
    int index, prompt_idx;
    uint64_t eng_id;
    int submitted, final, got_prompt;
    char *text; /* [len] echo + generated text, valid UTF-8 */
    size_t len, cap, sent, chars_sent;
    sd_api_tok *toks; /* [n_toks] when logprobs were asked */
    int n_toks, cap_toks, toks_sent;
    const char *finish;
    int finish_sent;
    int32_t n_generated;
    int32_t n_cached; /* prompt tokens the prefix cache supplied (SD_EV_DONE) */
    double t_last;
    sd_reply_pos rpos; /* chat streams: how far reasoning and content went out */
    int err_code;
    char err_msg[256];
} gen_choice;

struct sd_http__gen {
    pthread_mutex_t mu;
    int refs; /* 1 for the HTTP side + 1 per submitted engine request not yet final */
    sd_http *h;
    struct MHD_Connection *conn;
    sd_http__gen *prev, *next; /* h->gens, under h->mu */
    int suspended, closed, peer_gone;
    int wake_queued;         /* on h->wake_head, holding a reference */
    sd_http__gen *wake_next; /* under h->wake_mu */
    sd_api_req req;
    sd_api_meta meta;
    char id[64];
    double t_start;
    int got_first;
    gen_choice *ch; /* [n_ch] */
    int n_ch, n_final;
    int32_t **pids; /* [n_prompts][plen[i]] prompt token ids */
    int32_t *plen;
    int n_pids;
    int64_t prompt_tokens;
    char *out; /* SSE bytes built, [out_off, out_len) not yet handed to MHD */
    size_t out_len, out_cap, out_off;
    int role_sent, done_sent;
    sd_reply_cfg reply; /* chat: how replies split into reasoning, content, tool calls */
    int thinks;         /* chat: the model's template speaks of <think> blocks (a reasoning model) */
    int prompt_thinks;  /* chat: the rendered prompt ends by opening a <think> block */
    const char *rid;
    sd_http__slot *slot; /* the model this request runs on (a reference) */
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

/* http_deadline.c: the whole-request deadline (slowloris); mark receiving=0 once a request is in,
 * 1 when its answer is done; reap shuts down the overdue ones and returns how many. */
void sd_http__deadline_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe);
void sd_http__deadline_mark(sd_http *h, struct MHD_Connection *conn, int receiving);
int sd_http__deadline_reap(sd_http *h);
double sd_http__now(void);
/* The current model with a reference taken (NULL before the first sd_http_set_model), and
 * the release of such a reference (NULL is a no-op). */
sd_http__slot *sd_http__slot_get(sd_http *h);
void sd_http__slot_put(sd_http__slot *s);
/* http_gpumem.c: appends the GPU memory gauges of h->o's GPUs to a rendered /metrics text of
 * *len bytes (realloc'd; returned, *len updated); without GPUs, or on failure, text unchanged. */
char *sd_http__gpu_metrics_append(sd_http *h, char *text, size_t *len);
void sd_http__gpu_sensors_free(sd_http *h);
/* Queues a JSON/text response; returns MHD_YES/NO. Records the status in c. */
enum MHD_Result sd_http__send(struct MHD_Connection *conn, sd_http__conn *c, int status, const char *ctype,
                              char *body_owned, size_t len);
enum MHD_Result sd_http__send_error(struct MHD_Connection *conn, sd_http__conn *c, const sd_api_err *e);

sd_http__gen *sd_http__gen_new(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c);
/* Parses, tokenizes and submits (server/http_prep.c); fills e and returns -1 on failure. */
int sd_http__gen_prepare(sd_http *h, sd_http__gen *g, sd_http__conn *c, sd_api_err *e);
/* Parses and tokenizes only (/tokenize), a body of `kind`; special: a text prompt gets BOS etc. (a
 * chat's template holds its own). */
int sd_http__gen_tokenize(sd_http *h, sd_http__gen *g, sd_http__conn *c, sd_api_kind kind, int special,
                          sd_api_err *e);
/* http_tok.c: POST /tokenize and /detokenize (vLLM's shapes), once the body is in. */
enum MHD_Result sd_http__tok_handle(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c);
/* Engine event callback (ud: the gen_choice). */
void sd_http__on_event(void *ud, const sd_event *ev);
/* Appends text to a choice, replacing invalid UTF-8. */
int sd_http__text_append(gen_choice *c, const char *s, size_t n);
/* HTTP status for an SD_E* code. */
int sd_http__status_of(int code);

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
