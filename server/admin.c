/* admin: routing, token check, request bodies and answers of the /admin/v1 API. */
#include "server/admin.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "server/auth.h"
#include "server/log.h"

struct sd_admin {
    sd_auth *token; /* one key: the admin token (constant-time comparison) */
    int enabled;
    sd_jobs *jobs;
    sd_admin_models *models;
};

int sd_admin_init(sd_admin **ret, const sd_admin_opts *o)
{
    sd_admin *a = calloc(1, sizeof *a);
    if (!a)
        return SD_ENOMEM;
    a->jobs = o->jobs;
    a->models = o->models;
    a->enabled = o->token && *o->token;
    char *keys[1] = {(char *)o->token};
    int rc = sd_auth_init(&a->token);
    if (rc == 0 && a->enabled)
        rc = sd_auth_set_keys(a->token, keys, 1);
    if (rc < 0) {
        sd_admin_free(a);
        return rc;
    }
    *ret = a;
    return 0;
}

void sd_admin_free(sd_admin *a)
{
    if (!a)
        return;
    sd_auth_free(a->token);
    free(a);
}

/* A request in progress: what the answer needs. */
typedef struct req {
    sd_admin *a;
    const char *method, *path, *rid;
    const char *sub; /* the path after /admin/v1, without trailing slashes */
    size_t sub_len;
    int status;
    char *body; /* answer */
} req;

static int answer(req *r, int status, json_t *o)
{
    r->status = status;
    r->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return status;
}

static int fail(req *r, int status, const char *param, const char *code, const char *msg)
{
    sd_api_err e;
    sd_api_fail(&e, status, param, code, "%s", msg);
    r->status = status;
    r->body = sd_api_error_json(&e);
    if (status >= 500 || status == 401)
        sd_log_warn(r->rid, "admin: %s %s -> %d: %s", r->method, r->path, status, msg);
    else
        sd_log_info(r->rid, "admin: %s %s -> %d: %s", r->method, r->path, status, msg);
    return status;
}

static int is(const req *r, const char *sub)
{
    return strlen(sub) == r->sub_len && !strncmp(r->sub, sub, r->sub_len);
}

static json_t *parse_body(req *r, const char *body, size_t len)
{
    json_error_t je;
    json_t *o = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        char msg[256];
        snprintf(msg, sizeof msg, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                 je.column);
        fail(r, 400, NULL, "invalid_json", msg);
    } else if (!json_is_object(o)) {
        json_decref(o);
        o = NULL;
        fail(r, 400, NULL, "invalid_request", "the body must be a JSON object");
    }
    return o;
}

/* ---- jobs ----------------------------------------------------------------------------------- */

static int jobs_post(req *r, const char *body, size_t len)
{
    json_t *spec = parse_body(r, body, len);
    if (!spec)
        return r->status;
    char *dir = sd_admin_models_dir(r->a->models);
    json_t *jobrec = NULL;
    const char *param = NULL;
    sd_diag d = {0};
    int rc = sd_jobs_submit(r->a->jobs, spec, dir, &jobrec, &param, &d);
    free(dir);
    if (rc < 0) {
        fail(r, rc == SD_EINVAL ? 400 : 500, param, rc == SD_EINVAL ? "invalid_value" : "internal_error",
             sd_diag_str(&d, rc));
        json_decref(spec);
        return r->status;
    }
    json_decref(spec);
    sd_log_info(r->rid, "admin: job %s queued (%s -> %s)", json_string_value(json_object_get(jobrec, "id")),
                json_string_value(json_object_get(json_object_get(jobrec, "spec"), "model")),
                json_string_value(json_object_get(jobrec, "output")));
    return answer(r, 202, jobrec);
}

static int jobs_route(req *r, const char *body, size_t len)
{
    if (!r->a->jobs)
        return fail(r, 503, NULL, "jobs_unavailable", "admin jobs are unavailable (no usable state_dir)");
    int get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
    if (is(r, "/jobs")) {
        if (get)
            return answer(r, 200, sd_jobs_list(r->a->jobs));
        if (!strcmp(r->method, "POST"))
            return jobs_post(r, body, len);
        return fail(r, 405, NULL, "method_not_allowed", "use GET or POST on /admin/v1/jobs");
    }
    char id[64];
    size_t n = r->sub_len - strlen("/jobs/");
    if (n == 0 || n >= sizeof id || memchr(r->sub + 6, '/', n))
        return fail(r, 404, NULL, "not_found", "no such admin route");
    memcpy(id, r->sub + 6, n);
    id[n] = 0;
    json_t *rec = NULL;
    int rc;
    if (get)
        rc = sd_jobs_get(r->a->jobs, id, &rec);
    else if (!strcmp(r->method, "DELETE"))
        rc = sd_jobs_cancel(r->a->jobs, id, &rec);
    else
        return fail(r, 405, NULL, "method_not_allowed", "use GET or DELETE on /admin/v1/jobs/{id}");
    if (rc == SD_ENOTFOUND)
        return fail(r, 404, "id", "job_not_found", "no job with this id");
    if (rc == SD_EINVAL) {
        char msg[160];
        snprintf(msg, sizeof msg, "job %s has already finished (%s)", id,
                 json_string_value(json_object_get(rec, "state")));
        json_decref(rec);
        return fail(r, 409, "id", "job_finished", msg);
    }
    return answer(r, rc == 0 ? 200 : 500, rec);
}

/* ---- the model in service ------------------------------------------------------------------ */

static int model_post(req *r, const char *body, size_t len)
{
    json_t *o = parse_body(r, body, len);
    if (!o)
        return r->status;
    json_t *p = json_object_get(o, "path"), *nm = json_object_get(o, "name");
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        if (!strcmp(key, "path") || !strcmp(key, "name"))
            continue;
        char msg[128];
        snprintf(msg, sizeof msg, "%.64s: unknown field (path, name)", key);
        fail(r, 400, NULL, "invalid_value", msg);
        json_decref(o);
        return r->status;
    }
    if (!json_is_string(p) || !*json_string_value(p) || (nm && !json_is_string(nm) && !json_is_null(nm))) {
        int bad_path = !json_is_string(p) || !*json_string_value(p);
        fail(r, 400, bad_path ? "path" : "name", "invalid_value",
             bad_path ? "path: expected the checkpoint directory (a non-empty string)"
                      : "name: expected a string");
        json_decref(o);
        return r->status;
    }
    json_t *swap = NULL;
    sd_diag d = {0};
    int rc = sd_admin_models_swap_start(r->a->models, json_string_value(p), json_string_value(nm), &swap, &d);
    json_decref(o);
    if (rc == SD_EFULL)
        return fail(r, 409, NULL, "swap_in_progress", sd_diag_str(&d, rc));
    if (rc == SD_ECANCEL)
        return fail(r, 503, NULL, "shutting_down", "the server is shutting down");
    if (rc < 0) {
        char msg[SD_DIAG_MSG_MAX + 64];
        snprintf(msg, sizeof msg, "the model was not changed: %s", sd_diag_str(&d, rc));
        int st = rc == SD_ENOMEM ? 500 : 400; /* else: the path or its config.json is at fault */
        return fail(r, st, "path", "model_load_failed", msg);
    }
    sd_log_info(r->rid, "admin: swap to %s started (loading beside the model in service)",
                json_string_value(json_object_get(swap, "path")));
    return answer(r, 202, swap);
}

static int model_route(req *r, const char *body, size_t len)
{
    if (!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD")) {
        json_t *info = sd_admin_models_info(r->a->models);
        if (!info)
            return fail(r, 503, NULL, "model_loading", "the model is still loading");
        return answer(r, 200, info);
    }
    if (!strcmp(r->method, "POST")) {
        json_t *info = sd_admin_models_info(r->a->models);
        if (!info)
            return fail(r, 503, NULL, "model_loading", "the model is still loading");
        json_decref(info);
        return model_post(r, body, len);
    }
    return fail(r, 405, NULL, "method_not_allowed", "use GET or POST on /admin/v1/model");
}

int sd_admin_handle(void *admin, const char *method, const char *path, const char *authz, const char *body,
                    size_t len, const char *rid, char **ret_body)
{
    sd_admin *a = admin;
    req r = {.a = a, .method = method, .path = path, .rid = rid};
    static const char prefix[] = "/admin/v1";
    if (!a->enabled)
        fail(&r, 404, NULL, "admin_disabled",
             "the admin API is disabled: set admin_token or admin_token_file in the config");
    else if (!sd_auth_check(a->token, authz))
        fail(&r, 401, NULL, "invalid_admin_token",
             "a valid admin token is required (Authorization: Bearer); API keys are not admin tokens");
    else if (strncmp(path, prefix, sizeof prefix - 1) ||
             (path[sizeof prefix - 1] && path[sizeof prefix - 1] != '/'))
        fail(&r, 404, NULL, "not_found", "no such admin route");
    else {
        r.sub = path + sizeof prefix - 1;
        r.sub_len = strlen(r.sub);
        while (r.sub_len > 1 && r.sub[r.sub_len - 1] == '/')
            r.sub_len--;
        if (is(&r, "/jobs") || (r.sub_len > 6 && !strncmp(r.sub, "/jobs/", 6)))
            jobs_route(&r, body, len);
        else if (is(&r, "/model"))
            model_route(&r, body, len);
        else
            fail(&r, 404, NULL, "not_found", "no such admin route");
    }
    if (r.status < 400 && strcmp(method, "GET") && strcmp(method, "HEAD"))
        sd_log_info(rid, "admin: %s %s -> %d", method, path, r.status);
    *ret_body = r.body;
    return r.status;
}

char *sd_admin_metrics(void *admin)
{
    sd_admin *a = admin;
    char *m = sd_admin_models_metrics(a->models), *j = a->jobs ? sd_jobs_metrics(a->jobs) : strdup("");
    char *out = NULL;
    if (m && j && (out = malloc(strlen(m) + strlen(j) + 1)))
        strcat(strcpy(out, m), j);
    free(m);
    free(j);
    return out;
}
