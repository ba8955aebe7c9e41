/* web: serves the embedded console assets (ETag revalidation, strict CSP) and GET /info. */
#include "server/web.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/model.h"
#include "server/http_impl.h"

/* Scripts, styles, images and fetches only from this origin; nothing inline, no framing. */
#define SD_WEB_CSP                                                                                           \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "    \
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const sd_web_asset *sd_web_find(const char *url)
{
    if (!strcmp(url, "/"))
        url = "/index.html";
    for (int i = 0; i < sd_web_n_assets; i++)
        if (!strcmp(url, sd_web_assets[i].path))
            return &sd_web_assets[i];
    return NULL;
}

/* 1 if the If-None-Match list holds `etag` (or is "*"). */
static int etag_matches(const char *inm, const char *etag)
{
    if (!inm)
        return 0;
    if (!strcmp(inm, "*"))
        return 1;
    size_t n = strlen(etag);
    for (const char *p = strstr(inm, etag); p; p = strstr(p + 1, etag))
        if ((p == inm || p[-1] == ' ' || p[-1] == ',' || p[-1] == '/') &&
            (p[n] == 0 || p[n] == ',' || p[n] == ' '))
            return 1;
    return 0;
}

struct MHD_Response *sd_web_asset_response(const sd_web_asset *a, const char *if_none_match, int *ret_status)
{
    int not_modified = etag_matches(if_none_match, a->etag);
    /* The bytes are static: MHD sends them without a copy. */
    struct MHD_Response *r =
        MHD_create_response_from_buffer(not_modified ? 0 : a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return NULL;
    if (!not_modified)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, a->etag);
    /* Names carry no hash, so clients revalidate each time (a cheap 304). */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy", SD_WEB_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    *ret_status = not_modified ? 304 : 200;
    return r;
}

static enum MHD_Result send_asset(struct MHD_Connection *conn, sd_http__conn *c, const sd_web_asset *a)
{
    int status = 0;
    const char *inm = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    struct MHD_Response *r = sd_web_asset_response(a, inm, &status);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "X-Request-Id", c->rid);
    c->status = status;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

/* The /info document: what the console's Server page shows. Caller holds engine_lock (read). */
static char *info_json(const sd_http *h)
{
    const sd_model *m = h->model.model;
    const sd_model_config *cfg = sd_model_cfg(m);
    const char *sparsity = sd_model_sparsity(m);
    int64_t now = (int64_t)time(NULL);
    /* the whole group's size, also on rank 0 of the one-process-per-GPU mode */
    int tp = h->o.tensor_parallel > 1 ? h->o.tensor_parallel : 1;
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:b}", "model", h->model.name,
        "architecture", cfg->arch_name, "checkpoint", strcmp(sparsity, "dense") ? "bitmask" : "dense",
        "sparsity", sparsity, "n_layers", cfg->n_layers, "hidden_size", cfg->hidden, "vocab_size", cfg->vocab,
        "max_model_len", h->model.max_model_len, "tensor_parallel_size", tp, "started",
        (json_int_t)h->started, "uptime_seconds", (json_int_t)(now - h->started), "web_ui", h->o.web_ui);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static enum MHD_Result send_info(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c)
{
    sd_api_err e;
    if (!sd_auth_check(h->auth, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"))) {
        sd_api_fail(&e, 401, NULL, "invalid_api_key", "a valid API key is required (Authorization: Bearer)");
        return sd_http__send_error(conn, c, &e);
    }
    char *s = NULL;
    pthread_rwlock_rdlock(&h->engine_lock);
    int ready = atomic_load_explicit(&h->ready, memory_order_acquire) && !h->engine_gone;
    if (ready)
        s = info_json(h);
    pthread_rwlock_unlock(&h->engine_lock);
    if (!ready) {
        sd_api_fail(&e, 503, NULL, "model_loading", "the model is still loading");
        return sd_http__send_error(conn, c, &e);
    }
    return sd_http__send(conn, c, 200, "application/json", s, s ? strlen(s) : 0);
}

int sd_web_handle(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c, enum MHD_Result *ret)
{
    if (strcmp(c->method, "GET") && strcmp(c->method, "HEAD"))
        return 0;
    if (!strcmp(c->url, "/info")) {
        *ret = send_info(h, conn, c);
        return 1;
    }
    const sd_web_asset *a = h->o.web_ui ? sd_web_find(c->url) : NULL;
    if (!a)
        return 0;
    *ret = send_asset(conn, c, a);
    return 1;
}
