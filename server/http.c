/* http: libmicrohttpd daemon, routing, auth/limits, simple endpoints, request completion. */
#include "server/http.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "server/http_impl.h"
#include "server/log.h"
#include "server/web.h"

double sd_http__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_gen_route(sd_metrics_route r)
{
    return r == SD_ROUTE_COMPLETIONS || r == SD_ROUTE_CHAT;
}

/* POST routes with a JSON body, under the API keys: generation and (de)tokenization. */
static int is_post_route(sd_metrics_route r)
{
    return is_gen_route(r) || r == SD_ROUTE_TOKENIZE || r == SD_ROUTE_DETOKENIZE;
}

enum MHD_Result sd_http__send(struct MHD_Connection *conn, sd_http__conn *c, int status, const char *ctype,
                              char *body_owned, size_t len)
{
    struct MHD_Response *r =
        body_owned ? MHD_create_response_from_buffer(len, body_owned, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(body_owned);
        return MHD_NO; /* MHD closes the connection */
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, "X-Request-Id", c->rid);
    if (status == 405 && c->route == SD_ROUTE_ADMIN) /* /admin/v1/jobs/{id}, or a collection */
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
                                strstr(c->url, "/jobs/") ? "GET, HEAD, DELETE" : "GET, HEAD, POST");
    else if (status == 405)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, is_post_route(c->route) ? "POST" : "GET, HEAD");
    if (status == 401)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    c->status = status;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result sd_http__send_error(struct MHD_Connection *conn, sd_http__conn *c, const sd_api_err *e)
{
    char *s = sd_api_error_json(e);
    if (e->status >= 500 || e->status == 429)
        sd_log_warn(c->rid, "%s %s -> %d: %s", c->method, c->url, e->status, e->message);
    else
        sd_log_info(c->rid, "%s %s -> %d: %s", c->method, c->url, e->status, e->message);
    return sd_http__send(conn, c, e->status, "application/json", s, s ? strlen(s) : 0);
}

static enum MHD_Result send_text(struct MHD_Connection *conn, sd_http__conn *c, int status, const char *ctype,
                                 const char *text)
{
    char *s = strdup(text);
    return sd_http__send(conn, c, status, ctype, s, s ? strlen(s) : 0);
}

static sd_metrics_route route_of(const char *url)
{
    static const struct {
        const char *path;
        sd_metrics_route r;
    } routes[] = {{"/v1/completions", SD_ROUTE_COMPLETIONS},
                  {"/v1/chat/completions", SD_ROUTE_CHAT},
                  {"/v1/models", SD_ROUTE_MODELS},
                  {"/health", SD_ROUTE_HEALTH},
                  {"/ready", SD_ROUTE_READY},
                  {"/metrics", SD_ROUTE_METRICS},
                  {"/tokenize", SD_ROUTE_TOKENIZE},
                  {"/detokenize", SD_ROUTE_DETOKENIZE}};
    if (!strncmp(url, "/admin/", 7) || !strcmp(url, "/admin"))
        return SD_ROUTE_ADMIN;
    size_t n = strlen(url);
    while (n > 1 && url[n - 1] == '/') /* tolerate a trailing slash */
        n--;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
        if (strlen(routes[i].path) == n && !strncmp(url, routes[i].path, n))
            return routes[i].r;
    return SD_ROUTE_OTHER;
}

static enum MHD_Result handle_get(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c)
{
    int ready = atomic_load_explicit(&h->ready, memory_order_acquire);
    int draining = atomic_load(&h->draining);
    sd_api_err e;
    switch (c->route) {
    case SD_ROUTE_HEALTH:
        return send_text(conn, c, 200, "application/json", "{\"status\":\"ok\"}");
    case SD_ROUTE_READY:
        if (ready && !draining)
            return send_text(conn, c, 200, "application/json", "{\"status\":\"ready\"}");
        return send_text(conn, c, 503, "application/json",
                         draining ? "{\"status\":\"draining\"}" : "{\"status\":\"loading\"}");
    case SD_ROUTE_METRICS: {
        sd_engine_stats st;
        pthread_rwlock_rdlock(&h->engine_lock);
        ready = ready && !h->engine_gone;
        if (ready)
            sd_engine_stats_get(h->model.engine, &st);
        pthread_rwlock_unlock(&h->engine_lock);
        size_t len = 0;
        char *s = sd_metrics_render(h->metrics, ready ? &st : NULL, ready && !draining, &len);
        if (ready) /* once loaded: the backend has made its CUDA context by then */
            s = sd_http__gpu_metrics_append(h, s, &len);
        return sd_http__send(conn, c, 200, "text/plain; version=0.0.4; charset=utf-8", s, len);
    }
    case SD_ROUTE_MODELS: {
        if (!sd_auth_check(h->auth, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"))) {
            sd_api_fail(&e, 401, NULL, "invalid_api_key",
                        "a valid API key is required (Authorization: Bearer)");
            return sd_http__send_error(conn, c, &e);
        }
        if (!ready) {
            sd_api_fail(&e, 503, NULL, "model_loading", "the model is still loading");
            return sd_http__send_error(conn, c, &e);
        }
        pthread_rwlock_rdlock(&h->engine_lock); /* a hot swap may replace h->model */
        char *s = sd_api_models(h->model.name, h->started, h->model.max_model_len);
        pthread_rwlock_unlock(&h->engine_lock);
        return sd_http__send(conn, c, 200, "application/json", s, s ? strlen(s) : 0);
    }
    default:
        sd_api_fail(&e, 404, NULL, "not_found", "no route for %s", c->url);
        return sd_http__send_error(conn, c, &e);
    }
}

/* Checks done once the headers are in, before reading a /v1 body. Returns 1 if it answered. */
static int precheck_gen(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c, enum MHD_Result *ret)
{
    sd_api_err e;
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    const char *clen = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!sd_auth_check(h->auth, auth))
        sd_api_fail(&e, 401, NULL, "invalid_api_key", "a valid API key is required (Authorization: Bearer)");
    else if (atomic_load(&h->draining))
        sd_api_fail(&e, 503, NULL, "shutting_down", "the server is shutting down");
    else if (!atomic_load_explicit(&h->ready, memory_order_acquire))
        sd_api_fail(&e, 503, NULL, "model_loading", "the model is still loading");
    else if (clen && strtoull(clen, NULL, 10) > (unsigned long long)h->o.max_body_bytes)
        sd_api_fail(&e, 413, NULL, "request_too_large", "the request body exceeds %d bytes",
                    h->o.max_body_bytes);
    else
        return 0;
    *ret = sd_http__send_error(conn, c, &e);
    return 1;
}

static int append_body(sd_http *h, sd_http__conn *c, const char *data, size_t n)
{
    if (c->too_big || c->len + n > (size_t)h->o.max_body_bytes) {
        c->too_big = 1; /* keep reading (and dropping) so the 413 reaches the client */
        return 0;
    }
    if (c->len + n + 1 > c->cap) {
        size_t cap = (c->len + n + 1) * 2;
        char *b = realloc(c->body, cap);
        if (!b)
            return -1;
        c->body = b;
        c->cap = cap;
    }
    memcpy(c->body + c->len, data, n);
    c->len += n;
    return 0;
}

static sd_http__conn *conn_new(sd_http *h, const char *method, const char *url)
{
    sd_http__conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->route = route_of(url);
    c->t_start = sd_http__now();
    c->method = method;
    c->url = url;
    uint64_t n = atomic_fetch_add(&h->id_ctr, 1);
    snprintf(c->rid, sizeof c->rid, "%016llx", (unsigned long long)((n * 0x9E3779B97F4A7C15ull) ^ h->id_key));
    return c;
}

/* With admin_listen, /admin/ is served on that listener only, and nothing else is. Returns 1
 * if it answered 404. */
static int wrong_listener(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c, enum MHD_Result *ret)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
    int on_admin = ci && ci->daemon == h->admin_mhd;
    if (on_admin == (c->route == SD_ROUTE_ADMIN))
        return 0;
    sd_api_err e;
    if (on_admin)
        sd_api_fail(&e, 404, NULL, "not_found",
                    "no route for %s %s: this listener (admin_listen) serves only /admin/", c->method,
                    c->url);
    else
        sd_api_fail(&e, 404, NULL, "not_found",
                    "no route for %s %s: the admin API is served on its own listener (admin_listen)",
                    c->method, c->url);
    *ret = sd_http__send_error(conn, c, &e);
    return 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    sd_http *h = cls;
    sd_http__conn *c = *con_cls;
    sd_api_err e;
    enum MHD_Result ret;
    /* The whole request is in once the headers of a body-less method or the end of a body arrive. */
    if (c ? *upload_data_size == 0 : strcmp(method, "POST") && strcmp(method, "PUT"))
        sd_http__deadline_mark(h, conn, 0);
    if (!c) { /* first call: headers only */
        if (!(c = conn_new(h, method, url)))
            return MHD_NO;
        *con_cls = c;
        int is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        int is_post = !strcmp(method, "POST");
        if (h->admin_mhd && wrong_listener(h, conn, c, &ret))
            return ret;
        if (c->route == SD_ROUTE_OTHER && sd_web_handle(h, conn, c, &ret))
            return ret; /* the web console's assets and /info */
        if (c->route == SD_ROUTE_OTHER || (c->route == SD_ROUTE_ADMIN && !h->admin)) {
            sd_api_fail(&e, 404, NULL, "not_found", "no route for %s %s", method, url);
            return sd_http__send_error(conn, c, &e);
        }
        if (c->route == SD_ROUTE_ADMIN)
            return MHD_YES; /* any method; answered once the body is in */
        if (is_post_route(c->route) ? !is_post : !is_get) {
            sd_api_fail(&e, 405, NULL, "method_not_allowed", "%s is not allowed on %s", method, url);
            return sd_http__send_error(conn, c, &e);
        }
        if (!is_post_route(c->route))
            return handle_get(h, conn, c);
        if (precheck_gen(h, conn, c, &ret))
            return ret;
        atomic_fetch_add(&h->inflight, 1);
        c->counted = 1;
        return MHD_YES;
    }
    if (c->status) /* answered early (e.g. 413 on Content-Length): drop the rest of the body */
    {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (append_body(h, c, upload_data, *upload_data_size) < 0)
            return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->too_big) {
        sd_api_fail(&e, 413, NULL, "request_too_large", "the request body exceeds %d bytes",
                    h->o.max_body_bytes);
        return sd_http__send_error(conn, c, &e);
    }
    if (c->route == SD_ROUTE_ADMIN) {
        char *out = NULL;
        int st = h->admin(h->admin_ud, c->method, c->url,
                          MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"), c->body,
                          c->len, c->rid, &out);
        return sd_http__send(conn, c, st, "application/json", out, out ? strlen(out) : 0);
    }
    if (!is_gen_route(c->route))
        return sd_http__tok_handle(h, conn, c);
    return sd_http__gen_handle(h, conn, c);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    sd_http *h = cls;
    sd_http__conn *c = *con_cls;
    sd_http__deadline_mark(h, conn, 1); /* the clock now runs for the next request on it */
    if (!c)
        return;
    *con_cls = NULL;
    int ok = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    int64_t np = 0, ng = 0;
    if (c->gen) {
        sd_http__gen_counts(c->gen, &np, &ng);
        sd_http__gen_closed(h, c->gen, ok);
    }
    double dt = sd_http__now() - c->t_start;
    int status = c->status ? c->status : 499; /* 499: client closed before an answer */
    sd_metrics_request(h->metrics, c->route, status);
    if (is_gen_route(c->route))
        sd_log_info(c->rid, "%s %s %d %.3fs prompt_tokens=%lld generated_tokens=%lld%s", c->method, c->url,
                    status, dt, (long long)np, (long long)ng, ok ? "" : " (connection closed early)");
    else
        sd_log_debug(c->rid, "%s %s %d %.3fs", c->method, c->url, status, dt);
    free(c->body);
    int counted = c->counted;
    free(c);
    if (counted && atomic_fetch_sub(&h->inflight, 1) == 1 && atomic_load(&h->draining) && h->on_idle)
        h->on_idle(h->idle_ud);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    sd_log_debug(NULL, "http: %s", msg);
}

static int resolve(const char *host, int port, struct sockaddr_storage *ss, int *v6, sd_diag *d)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc)
        return sd_diag_set(d, SD_EINVAL, "host '%s': %s", host, gai_strerror(rc));
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    return 0;
}

/* One MHD daemon on host:port with the server's callbacks; threads > 1: a thread pool. */
static struct MHD_Daemon *listen_on(sd_http *h, const char *host, int port, int threads, sd_diag *d)
{
    struct sockaddr_storage ss;
    int v6 = 0;
    if (resolve(host, port, &ss, &v6, d) < 0)
        return NULL;
    const sd_http_opts *o = &h->o;
    unsigned flags =
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
    unsigned timeout = (unsigned)(o->request_timeout + 0.999);
    /* The thread-pool option goes last: with one thread it is left out (END stops the list). */
    struct MHD_Daemon *m = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
        MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_CONNECTION_TIMEOUT, timeout ? timeout : 1,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)o->max_connections_per_ip, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, sd_http__deadline_notify, h,
        threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (unsigned)threads, MHD_OPTION_END);
    if (!m)
        sd_diag_set(d, SD_EIO, "cannot listen on %s:%d (address in use or not permitted)", host, port);
    return m;
}

int sd_http_start(sd_http **ret, const sd_http_opts *o, sd_metrics *metrics, sd_auth *auth, sd_diag *d)
{
    sd_http *h = calloc(1, sizeof *h);
    if (!h)
        return SD_ENOMEM;
    h->o = *o;
    h->metrics = metrics;
    h->auth = auth;
    h->started = (int64_t)time(NULL);
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->wake_mu, NULL);
    pthread_mutex_init(&h->socks_mu, NULL);
    pthread_mutex_init(&h->sensor_mu, NULL);
    pthread_rwlock_init(&h->engine_lock, NULL);
    if (getrandom(&h->id_key, sizeof h->id_key, 0) != sizeof h->id_key)
        h->id_key = (uint64_t)h->started * 0x2545F4914F6CDD1Dull ^ (uint64_t)(uintptr_t)h;
    h->mhd = listen_on(h, o->host, o->port, o->threads, d);
    /* admin requests are short (a swap loads on its own thread): one thread serves them */
    if (h->mhd && o->admin_port > 0 && !(h->admin_mhd = listen_on(h, o->admin_host, o->admin_port, 1, d)))
        sd_diag_wrap(d, SD_EIO, "admin_listen");
    if (!h->mhd || (o->admin_port > 0 && !h->admin_mhd)) {
        int rc = d ? d->code : SD_EIO;
        sd_http_free(h);
        return rc < 0 ? rc : SD_EIO;
    }
    h->o.admin_host = NULL; /* the caller's string: only needed to listen */
    *ret = h;
    return 0;
}

void sd_http_stop(sd_http *h)
{
    if (h && h->admin_mhd) {
        MHD_stop_daemon(h->admin_mhd);
        h->admin_mhd = NULL;
    }
    if (h && h->mhd) {
        MHD_stop_daemon(h->mhd);
        h->mhd = NULL;
    }
}

void sd_http_free(sd_http *h)
{
    if (!h)
        return;
    sd_http_stop(h);
    sd_http_resume_pending(h); /* drops references still queued (no resume: MHD is gone) */
    sd_http__slot_put(h->cur); /* its model is told it is released */
    sd_http__gpu_sensors_free(h);
    pthread_mutex_destroy(&h->sensor_mu);
    pthread_mutex_destroy(&h->socks_mu);
    pthread_mutex_destroy(&h->wake_mu);
    pthread_rwlock_destroy(&h->engine_lock);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

sd_http__slot *sd_http__slot_get(sd_http *h)
{
    pthread_rwlock_rdlock(&h->engine_lock);
    sd_http__slot *s = h->cur;
    if (s)
        atomic_fetch_add(&s->refs, 1);
    pthread_rwlock_unlock(&h->engine_lock);
    return s;
}

void sd_http__slot_put(sd_http__slot *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    if (s->m.released)
        s->m.released(s->m.released_ud);
    free(s);
}

void sd_http_set_model(sd_http *h, const sd_http_model *m)
{
    sd_http__slot *s = calloc(1, sizeof *s);
    if (s) {
        s->m = *m;
        atomic_init(&s->refs, 1); /* h->cur's */
    } else {
        sd_log_error(NULL, "out of memory publishing model %s", m->name);
    }
    pthread_rwlock_wrlock(&h->engine_lock);
    sd_http__slot *old = h->cur;
    h->cur = s;
    h->model = *m;
    pthread_rwlock_unlock(&h->engine_lock);
    sd_http__slot_put(old); /* freed once its last request is done */
    atomic_store_explicit(&h->ready, s != NULL, memory_order_release);
}

void sd_http_set_admin(sd_http *h, sd_http_admin_fn fn, void *ud)
{
    h->admin = fn;
    h->admin_ud = ud;
}

void sd_http_set_waker(sd_http *h, void (*wake)(void *), void *ud)
{
    h->wake = wake;
    h->wake_ud = ud;
}

void sd_http_detach_engine(sd_http *h)
{
    pthread_rwlock_wrlock(&h->engine_lock);
    h->engine_gone = 1;
    pthread_rwlock_unlock(&h->engine_lock);
}

int sd_http_ready(sd_http *h)
{
    return atomic_load_explicit(&h->ready, memory_order_acquire) && !atomic_load(&h->draining);
}

void sd_http_set_draining(sd_http *h, void (*on_idle)(void *), void *ud)
{
    h->on_idle = on_idle;
    h->idle_ud = ud;
    atomic_store(&h->draining, 1);
    if (atomic_load(&h->inflight) == 0 && on_idle)
        on_idle(ud);
}

int sd_http_inflight(sd_http *h)
{
    return atomic_load(&h->inflight);
}
