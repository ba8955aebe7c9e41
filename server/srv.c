/* srv: libuv main loop, background model load, signals, drain, reload and shutdown. */
#include "server/srv.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "engine/backend.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "server/admin.h"
#include "server/admin_models.h"
#include "server/auth.h"
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/notify.h"

typedef struct srv {
    uv_loop_t loop;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t reap_timer, drain_timer, watchdog_timer;
    uv_async_t idle_async, wake_async, models_async;
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
    sd_admin_models *models; /* the model in service and replaced ones still finishing */
    sd_jobs *jobs;           /* NULL when the admin API is off */
    sd_admin *admin;
    sd_admin_inst *inst; /* filled by the load worker */
    sd_diag load_diag;
    int load_rc, loading, draining, exit_code, stopping;
    int failing; /* the tensor-parallel group failed: failing the requests in flight, then exit 1 */
} srv;

/* A failed tensor-parallel group: the requests in flight get their error (every step fails at
 * once) within FAIL_GRACE_MS, or are cancelled; whatever then still hangs the shutdown (a wait
 * on a GPU that never ends) is cut short FAIL_EXIT_S after the failure was seen: exit status 1
 * either way, so that the service manager restarts the group. */
#define FAIL_GRACE_MS 5000
#define FAIL_EXIT_S 15

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
    s->load_rc =
        sd_admin_models_load(s->models, s->conf->model, s->conf->served_model_name, &s->inst, &s->load_diag);
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
    sd_http_model hm;
    sd_admin_models_publish(s->models, s->inst, &hm);
    const sd_model_config *cfg = sd_model_cfg(hm.model);
    sd_log_info(NULL,
                "model %s loaded (%s, %d layers, vocab %d, sparsity %s, backend %s, max_model_len %d); ready",
                hm.name, cfg->arch_name, cfg->n_layers, cfg->vocab, sd_model_sparsity(hm.model),
                s->conf->backend, (int)hm.max_model_len);
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
           strcmp(a->backend, b->backend) || a->tensor_parallel != b->tensor_parallel ||
           a->max_seqs != b->max_seqs || a->max_queue != b->max_queue ||
           a->max_batch_tokens != b->max_batch_tokens || a->max_model_len != b->max_model_len ||
           a->kv_blocks != b->kv_blocks || a->threads != b->threads || a->deterministic != b->deterministic ||
           a->warmup != b->warmup || strcmp(a->tune_cache, b->tune_cache) ||
           a->spec_tokens != b->spec_tokens || a->spec_ngram_min != b->spec_ngram_min ||
           a->spec_ngram_max != b->spec_ngram_max || a->spec_max_seqs != b->spec_max_seqs ||
           strcmp(a->spec_draft_model, b->spec_draft_model) || a->max_body_bytes != b->max_body_bytes ||
           a->request_timeout != b->request_timeout || a->max_connections != b->max_connections ||
           a->max_connections_per_ip != b->max_connections_per_ip || a->drain_timeout != b->drain_timeout ||
           strcmp(a->served_model_name, b->served_model_name) || strcmp(a->admin_token, b->admin_token) ||
           strcmp(a->admin_token_file, b->admin_token_file) || strcmp(a->state_dir, b->state_dir) ||
           strcmp(a->admin_listen, b->admin_listen) || a->job_memory_budget != b->job_memory_budget;
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

/* A replaced model's last request has finished (any thread): free it on the loop thread. */
static void wake_models(void *ud)
{
    srv *s = ud;
    uv_async_send(&s->models_async);
}

static void on_models_async(uv_async_t *a)
{
    srv *s = a->data;
    sd_admin_models_reap(s->models);
}

/* Job worker thread: a job with "activate" finished; swap to its output (on this thread: the
 * job is done once the new model serves). */
static int activate_model(void *ud, const char *dir, sd_diag *d)
{
    srv *s = ud;
    return sd_admin_models_swap(s->models, dir, NULL, NULL, d);
}

/* The last resort of a failed group: whatever the shutdown waits on, the process ends. */
static void *exit_backstop(void *arg)
{
    (void)arg;
    struct timespec ts = {FAIL_EXIT_S, 0};
    while (nanosleep(&ts, &ts) < 0) /* EINTR: sleep the rest */
        ;
    static const char msg[] = "sparsed: the tensor-parallel group failed and the shutdown did not finish "
                              "in time: exiting with status 1\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
    return NULL;
}

/* A failed tensor-parallel group cannot recover: every later step fails at once. Let the
 * requests in flight end with their error event (new ones get 503), then exit non-zero so
 * that the service manager restarts the group. */
static void fail_group(srv *s)
{
    s->failing = 1;
    s->exit_code = 1;
    sd_log_error(NULL,
                 "the tensor-parallel group failed (a rank died or timed out): ending %d request(s) in "
                 "flight, then exiting",
                 sd_http_inflight(s->http));
    sd_notify_send(s->notify, "STOPPING=1\nSTATUS=tensor-parallel group failed");
    pthread_t th;
    pthread_attr_t at;
    if (pthread_attr_init(&at) == 0) {
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, exit_backstop, NULL))
            sd_log_warn(NULL, "no thread to bound the shutdown of the failed group");
        pthread_attr_destroy(&at);
    }
    s->draining = 1; /* a signal now exits without waiting (start_drain) */
    sd_http_set_draining(s->http, http_idle, s);
    uv_timer_start(&s->drain_timer, on_drain_timeout, FAIL_GRACE_MS, 0);
}

static void on_reap(uv_timer_t *t)
{
    srv *s = t->data;
    sd_http_reap_disconnected(s->http);
    if (!s->stopping && !s->failing && sd_admin_models_failed(s->models))
        fail_group(s);
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
    uv_async_init(&s->loop, &s->models_async, on_models_async);
    s->models_async.data = s;
    return 0;
}

static void close_cb(uv_handle_t *h) {}

static void close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, close_cb);
}

/* The admin API (server/admin.c): on when a token is configured; its jobs need state_dir. */
static int start_admin(srv *s, sd_diag *d)
{
    const sd_conf *c = s->conf;
    char **fk = NULL;
    int nf = 0, rc = 0;
    if (!*c->admin_token && *c->admin_token_file &&
        (rc = sd_conf_read_key_file(c->admin_token_file, &fk, &nf, d)) < 0)
        return sd_diag_wrap(d, rc, "admin_token_file");
    const char *token = *c->admin_token ? c->admin_token : nf > 0 ? fk[0] : NULL;
    if (token) {
        sd_jobs_opts jo = {.state_dir = c->state_dir,
                           .memory_budget = (int64_t)c->job_memory_budget << 20,
                           .activate = activate_model,
                           .activate_ud = s};
        rc = sd_jobs_init(&s->jobs, &jo, d);
    }
    sd_admin_opts ao = {.token = token, .jobs = s->jobs, .models = s->models};
    if (rc == 0)
        rc = sd_admin_init(&s->admin, &ao);
    sd_conf_free_keys(fk, nf);
    if (rc < 0)
        return rc;
    sd_http_set_admin(s->http, sd_admin_handle, s->admin);
    sd_metrics_set_extra(s->metrics, sd_admin_metrics, s->admin);
    if (token && *c->admin_listen)
        sd_log_info(NULL, "admin API on http://%s/admin/v1 only (job records in %s/jobs)", c->admin_listen,
                    c->state_dir);
    else if (token)
        sd_log_info(NULL, "admin API on /admin/v1 (job records in %s/jobs)", c->state_dir);
    else
        sd_log_info(NULL, "admin API off (no admin_token)");
    return 0;
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
                       .max_connections_per_ip = s->conf->max_connections_per_ip,
                       .max_body_bytes = s->conf->max_body_bytes,
                       .request_timeout = s->conf->request_timeout,
                       .web_ui = s->conf->web_ui,
                       .split_reasoning = s->conf->split_reasoning};
    if (!strcmp(s->conf->backend, "cuda")) { /* GPUs 0..N-1 with one-process TP, else `device` */
        ho.gpu_count = s->conf->tp_rank < 0 ? s->conf->tensor_parallel : 1;
        ho.gpu_first = ho.gpu_count > 1 ? 0 : s->conf->device;
        ho.tensor_parallel = s->conf->tensor_parallel; /* both modes: the group's size */
    }
    char admin_host[256];
    if (*s->conf->admin_listen &&
        (rc = sd_conf_split_listen(s->conf->admin_listen, "admin_listen", admin_host, sizeof admin_host,
                                   &ho.admin_port, d)) < 0)
        return rc;
    ho.admin_host = admin_host;
    if ((rc = sd_http_start(&s->http, &ho, s->metrics, s->auth, d)) < 0)
        return rc;
    sd_log_info(NULL, "listening on http://%s:%d (API keys: %d); loading %s", s->conf->host, s->conf->port,
                sd_auth_count(s->auth), s->conf->model);
    if ((rc = uv_loop_init(&s->loop)) < 0)
        return sd_diag_set(d, SD_EIO, "uv_loop_init: %s", uv_strerror(rc));
    if ((rc = init_handles(s)) < 0)
        return sd_diag_set(d, rc, "cannot install signal handlers");
    sd_http_set_waker(s->http, wake_http, s);
    if ((rc = sd_admin_models_init(&s->models, s->conf, s->http, wake_models, s)) < 0 ||
        (rc = start_admin(s, d)) < 0)
        return rc;
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
    sd_admin_models_cancel(s->models); /* a swap loading stops at its next stage */
    sd_jobs_free(s->jobs);             /* then the jobs: their worker may be swapping models */
    if (s->http)
        sd_http_detach_engine(s->http);
    sd_admin_models_stop(s->models);
    if (s->http) /* the loop no longer runs: resume what the last events queued, here */
        sd_http_resume_pending(s->http);
    sd_http_stop(s->http);
    sd_http_free(s->http);
    sd_admin_free(s->admin);
    sd_admin_models_free(s->models); /* after sd_http_free, which releases the current model */
    if (loop_ok) {
        uv_walk(&s->loop, close_walk, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
    }
    sd_notify_free(s->notify);
    sd_auth_free(s->auth);
    sd_metrics_free(s->metrics);
    sd_conf_free(&s->live);
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
