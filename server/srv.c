/* srv: libuv main loop, background model load, signals, drain, reload and shutdown. */
#include "server/srv.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "engine/backend.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "server/auth.h"
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/notify.h"

#if __has_include("engine/chat_template.h")
#include "engine/chat_template.h"
#define SD_HAVE_CHAT_TEMPLATE 1
#endif

typedef struct srv {
    uv_loop_t loop;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t reap_timer, drain_timer, watchdog_timer;
    uv_async_t idle_async, wake_async;
    uv_work_t load_work;
    const sd_conf *conf;
    int argc;
    char **argv;
    const char *default_conf;
    sd_conf live; /* the reloadable options in force */
    sd_metrics *metrics;
    sd_auth *auth;
    sd_http *http;
    sd_notifier *notify;
    /* filled by the load worker */
    sd_model *model;
    sd_backend *backend;
    sd_engine *engine;
    void *chat; /* sd_chat_template * */
    char *served_name;
    sd_diag load_diag;
    int load_rc, loading, draining, exit_code, stopping;
} srv;

/* Keys from the config list and the key file. */
static int collect_keys(const sd_conf *c, char ***ret, int *ret_n, sd_diag *d)
{
    char **fk = NULL;
    int nf = 0;
    if (*c->api_key_file) {
        int rc = sd_conf_read_key_file(c->api_key_file, &fk, &nf, d);
        if (rc < 0)
            return rc;
    }
    char **all = calloc((size_t)(c->n_api_keys + nf) + 1, sizeof *all);
    if (!all) {
        sd_conf_free_keys(fk, nf);
        return SD_ENOMEM;
    }
    int n = 0;
    for (int i = 0; i < c->n_api_keys; i++)
        all[n++] = c->api_keys[i];
    for (int i = 0; i < nf; i++)
        all[n++] = fk[i];
    free(fk); /* the file's strings now belong to `all` (freed by free_collected) */
    *ret = all;
    *ret_n = n;
    return nf;
}

static void free_collected(const sd_conf *c, char **all, int n)
{
    for (int i = c->n_api_keys; i < n; i++)
        free(all[i]);
    free(all);
}

static int apply_keys(sd_auth *a, const sd_conf *c, sd_diag *d)
{
    char **all;
    int n, rc = collect_keys(c, &all, &n, d);
    if (rc < 0)
        return rc;
    rc = sd_auth_set_keys(a, all, n);
    free_collected(c, all, n);
    return rc < 0 ? rc : n;
}

static void apply_logging(const sd_conf *c)
{
    sd_log_set_level(sd_log_level_parse(c->log_level));
    sd_log_set_prefix(c->log_priority_prefix);
}

/* ---- model loading (worker thread) ---- */

static void load_work(uv_work_t *w)
{
    srv *s = w->data;
    const sd_conf *c = s->conf;
    sd_diag *d = &s->load_diag;
    int rc = sd_model_open(&s->model, c->model, d);
    if (rc < 0)
        goto out;
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = c->threads;
    bo.block_size = c->block_size;
    bo.kv_blocks = c->kv_blocks;
    bo.max_batch_tokens = c->max_batch_tokens;
    bo.device = c->device;
    if (!strcmp(c->backend, "cpu"))
        rc = sd_backend_cpu_init(&s->backend, s->model, &bo, d);
    else
#if SD_HAVE_CUDA
        rc = sd_backend_cuda_init(&s->backend, s->model, &bo, d);
#else
        rc = sd_diag_set(d, SD_ENOTSUP, "backend 'cuda': this build has no CUDA support");
#endif
    if (rc < 0)
        goto out;
    sd_engine_opts eo;
    sd_engine_opts_default(&eo);
    eo.max_seqs = c->max_seqs;
    eo.max_batch_tokens = c->max_batch_tokens;
    eo.max_waiting = c->max_queue;
    eo.max_model_len = c->max_model_len;
    if ((rc = sd_engine_init(&s->engine, s->model, s->backend, &eo, d)) < 0)
        goto out;
#ifdef SD_HAVE_CHAT_TEMPLATE
    /* Loaded from tokenizer_config.json so the template sees the special tokens (bos_token...)
     * exactly as transformers passes them. */
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", c->model);
    sd_chat_template *ct = NULL;
    sd_diag td = {0};
    int trc = sd_chat_template_load(&ct, path, &td);
    if (trc < 0 && trc != SD_ENOTFOUND) /* completions still work; chat answers 400 */
        sd_log_warn(NULL, "chat template of %s unusable: %s", c->model, sd_diag_str(&td, trc));
    else if (trc < 0)
        sd_log_info(NULL, "%s has no chat template: /v1/chat/completions will answer 400", c->model);
    s->chat = ct;
#endif
out:
    s->load_rc = rc;
}

static void stop_loop(srv *s);

static void load_done(uv_work_t *w, int status)
{
    srv *s = w->data;
    s->loading = 0;
    if (s->load_rc < 0) {
        sd_log_error(NULL, "loading %s failed: %s", s->conf->model, sd_diag_str(&s->load_diag, s->load_rc));
        sd_notify_sendf(s->notify, "STATUS=loading %s failed: %s", s->conf->model,
                        sd_diag_str(&s->load_diag, s->load_rc));
        s->exit_code = 1;
        stop_loop(s);
        return;
    }
    const sd_model_config *cfg = sd_model_cfg(s->model);
    int32_t mml = s->conf->max_model_len > 0 ? s->conf->max_model_len : cfg->max_pos;
    s->served_name =
        strdup(*s->conf->served_model_name ? s->conf->served_model_name : sd_model_name(s->model));
    sd_http_model hm = {.model = s->model,
                        .engine = s->engine,
                        .chat_template = s->chat,
                        .name = s->served_name ? s->served_name : "model",
                        .max_model_len = mml};
    sd_http_set_model(s->http, &hm);
    sd_log_info(NULL,
                "model %s loaded (%s, %d layers, vocab %d, sparsity %s, backend %s, max_model_len %d); ready",
                hm.name, cfg->arch_name, cfg->n_layers, cfg->vocab, sd_model_sparsity(s->model),
                s->conf->backend, mml);
    sd_notify_sendf(s->notify, "READY=1\nSTATUS=serving %s", hm.name);
    if (s->draining) /* a signal came during the load */
        stop_loop(s);
}

/* ---- signals, drain, reload ---- */

static void on_idle_async(uv_async_t *a)
{
    srv *s = a->data;
    if (s->draining && !s->loading && sd_http_inflight(s->http) == 0) {
        sd_log_info(NULL, "drained: no requests in flight");
        stop_loop(s);
    }
}

/* Called from HTTP threads when the in-flight count reaches zero while draining. */
static void http_idle(void *ud)
{
    srv *s = ud;
    uv_async_send(&s->idle_async);
}

static void on_drain_timeout(uv_timer_t *t)
{
    srv *s = t->data;
    if (s->stopping)
        return;
    int n = sd_http_inflight(s->http);
    if (n == 0) {
        stop_loop(s);
        return;
    }
    if (s->stopping == 0 && s->draining == 1) {
        sd_log_warn(NULL, "drain timeout: cancelling %d request(s) still in flight", n);
        sd_http_cancel_all(s->http);
        s->draining = 2; /* give the cancelled streams a second to close */
        uv_timer_start(&s->drain_timer, on_drain_timeout, 1000, 0);
        return;
    }
    stop_loop(s);
}

static void start_drain(srv *s, const char *why)
{
    if (s->draining) {
        sd_log_warn(NULL, "%s again: exiting without waiting", why);
        stop_loop(s);
        return;
    }
    s->draining = 1;
    sd_log_info(NULL, "%s: draining %d request(s), grace %.1fs", why, sd_http_inflight(s->http),
                s->conf->drain_timeout);
    sd_notify_send(s->notify, "STOPPING=1\nSTATUS=draining");
    sd_http_set_draining(s->http, http_idle, s);
    uv_timer_start(&s->drain_timer, on_drain_timeout, (uint64_t)(s->conf->drain_timeout * 1000.0), 0);
}

static int conf_differs_beyond_reloadable(const sd_conf *a, const sd_conf *b)
{
    return strcmp(a->model, b->model) || strcmp(a->host, b->host) || a->port != b->port ||
           strcmp(a->backend, b->backend) || a->max_seqs != b->max_seqs || a->max_queue != b->max_queue ||
           a->max_batch_tokens != b->max_batch_tokens || a->max_model_len != b->max_model_len ||
           a->kv_blocks != b->kv_blocks || a->threads != b->threads ||
           a->max_body_bytes != b->max_body_bytes || a->request_timeout != b->request_timeout ||
           a->drain_timeout != b->drain_timeout || strcmp(a->served_model_name, b->served_model_name);
}

static void reload_config(srv *s);

/* systemd sees RELOADING=1 ... READY=1 around a reload, as with Type=notify-reload. */
static void reload(srv *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sd_notify_sendf(s->notify, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading configuration",
                    (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000u);
    reload_config(s);
    sd_notify_sendf(s->notify, "READY=1\nSTATUS=%s", s->loading ? "loading model" : "serving");
}

static void reload_config(srv *s)
{
    sd_conf nc;
    sd_diag d = {0};
    int rc = sd_conf_init(&nc);
    if (rc == 0)
        rc = sd_conf_load(&nc, s->argc, s->argv, s->default_conf, &d);
    if (rc < 0) {
        sd_log_error(NULL, "SIGHUP: config not reloaded: %s", sd_diag_str(&d, rc));
        sd_conf_free(&nc);
        return;
    }
    int before = sd_auth_count(s->auth);
    int n = apply_keys(s->auth, &nc, &d);
    if (n < 0) {
        sd_log_error(NULL, "SIGHUP: API keys not reloaded: %s", sd_diag_str(&d, n));
    } else {
        sd_log_info(NULL, "SIGHUP: API keys reloaded (%d before, %d now%s)", before, n,
                    n ? "" : "; auth off");
    }
    if (strcmp(nc.log_level, s->live.log_level))
        sd_log_info(NULL, "SIGHUP: log_level %s -> %s", s->live.log_level, nc.log_level);
    if (nc.log_priority_prefix != s->live.log_priority_prefix)
        sd_log_info(NULL, "SIGHUP: log_priority_prefix %d -> %d", s->live.log_priority_prefix,
                    nc.log_priority_prefix);
    apply_logging(&nc);
    if (conf_differs_beyond_reloadable(s->conf, &nc))
        sd_log_warn(NULL, "SIGHUP: options other than log_level, log_priority_prefix and API keys changed; "
                          "restart to apply them");
    sd_conf_free(&s->live);
    s->live = nc;
}

static void on_signal(uv_signal_t *h, int signum)
{
    srv *s = h->data;
    if (signum == SIGHUP)
        reload(s);
    else
        start_drain(s, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* Engine thread: connections are waiting to be resumed (uv_async_send coalesces). */
static void wake_http(void *ud)
{
    srv *s = ud;
    uv_async_send(&s->wake_async);
}

static void on_wake_async(uv_async_t *a)
{
    srv *s = a->data;
    sd_http_resume_pending(s->http);
}

static void on_reap(uv_timer_t *t)
{
    srv *s = t->data;
    sd_http_reap_disconnected(s->http);
}

static void on_watchdog(uv_timer_t *t)
{
    srv *s = t->data;
    sd_notify_send(s->notify, "WATCHDOG=1");
}

static void stop_loop(srv *s)
{
    if (s->stopping)
        return;
    s->stopping = 1;
    uv_stop(&s->loop);
}

/* ---- setup and teardown ---- */

static int init_handles(srv *s)
{
    uv_signal_t *sigs[] = {&s->sig_term, &s->sig_int, &s->sig_hup};
    int nums[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&s->loop, sigs[i]);
        sigs[i]->data = s;
        if (uv_signal_start(sigs[i], on_signal, nums[i]) < 0)
            return SD_EIO;
    }
    uv_timer_t *timers[] = {&s->reap_timer, &s->drain_timer, &s->watchdog_timer};
    for (int i = 0; i < 3; i++) {
        uv_timer_init(&s->loop, timers[i]);
        timers[i]->data = s;
    }
    uv_timer_start(&s->reap_timer, on_reap, 1000, 1000);
    uint64_t wd = sd_notify_watchdog_usec(s->notify);
    if (wd)
        uv_timer_start(&s->watchdog_timer, on_watchdog, wd / 2000, wd / 2000);
    uv_async_init(&s->loop, &s->idle_async, on_idle_async);
    s->idle_async.data = s;
    uv_async_init(&s->loop, &s->wake_async, on_wake_async);
    s->wake_async.data = s;
    return 0;
}

static void close_cb(uv_handle_t *h) {}

static void close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, close_cb);
}

static int start(srv *s, sd_diag *d)
{
    int rc;
    if ((rc = sd_metrics_init(&s->metrics)) < 0 || (rc = sd_auth_init(&s->auth)) < 0)
        return rc;
    if ((rc = apply_keys(s->auth, s->conf, d)) < 0)
        return rc;
    if (sd_notify_init(&s->notify) < 0)
        sd_log_warn(NULL, "NOTIFY_SOCKET is set but unusable; systemd notifications are off");
    sd_http_opts ho = {.host = s->conf->host,
                       .port = s->conf->port,
                       .threads = s->conf->http_threads,
                       .max_connections = s->conf->max_connections,
                       .max_body_bytes = s->conf->max_body_bytes,
                       .request_timeout = s->conf->request_timeout,
                       .web_ui = s->conf->web_ui};
    if ((rc = sd_http_start(&s->http, &ho, s->metrics, s->auth, d)) < 0)
        return rc;
    sd_log_info(NULL, "listening on http://%s:%d (API keys: %d); loading %s", s->conf->host, s->conf->port,
                sd_auth_count(s->auth), s->conf->model);
    if ((rc = uv_loop_init(&s->loop)) < 0)
        return sd_diag_set(d, SD_EIO, "uv_loop_init: %s", uv_strerror(rc));
    if ((rc = init_handles(s)) < 0)
        return sd_diag_set(d, rc, "cannot install signal handlers");
    sd_http_set_waker(s->http, wake_http, s);
    sd_notify_sendf(s->notify, "STATUS=loading model %s", s->conf->model);
    s->load_work.data = s;
    s->loading = 1;
    if ((rc = uv_queue_work(&s->loop, &s->load_work, load_work, load_done)) < 0)
        return sd_diag_set(d, SD_EIO, "uv_queue_work: %s", uv_strerror(rc));
    return 0;
}

static void teardown(srv *s, int loop_ok)
{
    /* Order: detach the engine from the HTTP threads, stop it (its last events resume and
     * release the generations while MHD still runs), stop HTTP (closing every connection),
     * then free what they pointed at. */
    if (s->http)
        sd_http_detach_engine(s->http);
    sd_engine_free(s->engine);
    if (s->http) /* the loop no longer runs: resume what the last events queued, here */
        sd_http_resume_pending(s->http);
    sd_http_stop(s->http);
#ifdef SD_HAVE_CHAT_TEMPLATE
    sd_chat_template_free(s->chat);
#endif
    sd_backend_free(s->backend);
    sd_model_free(s->model);
    sd_http_free(s->http);
    if (loop_ok) {
        uv_walk(&s->loop, close_walk, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
    }
    sd_notify_free(s->notify);
    sd_auth_free(s->auth);
    sd_metrics_free(s->metrics);
    sd_conf_free(&s->live);
    free(s->served_name);
}

int sd_srv_run(const sd_conf *c, int argc, char **argv, const char *default_conf)
{
    srv *s = calloc(1, sizeof *s);
    if (!s)
        return 1;
    s->conf = c;
    s->argc = argc;
    s->argv = argv;
    s->default_conf = default_conf;
    apply_logging(c);
    signal(SIGPIPE, SIG_IGN);
    sd_diag d = {0};
    int rc = sd_conf_init(&s->live);
    if (rc == 0)
        rc = sd_conf_load(&s->live, argc, argv, default_conf, &d);
    if (rc == 0)
        rc = start(s, &d);
    int loop_ok = s->loop.data != NULL || rc == 0;
    if (rc < 0) {
        sd_log_error(NULL, "start-up failed: %s", sd_diag_str(&d, rc));
        s->exit_code = 1;
    } else {
        uv_run(&s->loop, UV_RUN_DEFAULT);
        /* A model load still running keeps the loop alive: wait for it before freeing. */
        while (s->loading)
            uv_run(&s->loop, UV_RUN_ONCE);
    }
    int code = s->exit_code;
    sd_log_info(NULL, "shutting down (exit %d)", code);
    teardown(s, loop_ok && rc == 0);
    free(s);
    return code;
}
