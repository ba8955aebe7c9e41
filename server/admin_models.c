/* admin_models: model instances — load beside the one in service, publish (hot swap) from the
 * caller's thread or a swap thread of its own, reap replaced ones once their last request is
 * done; the model's info, the latest swap's state and the metrics. */
#include "server/admin_models.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine/backend.h"
#include "engine/chat_template.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "engine/model_config.h"
#include "engine/tp.h"
#include "engine/warmup.h"
#include "server/log.h"

struct sd_admin_inst {
    sd_admin_models *mm;
    sd_model *model;
    sd_backend *backend;
    sd_model *draft_model; /* speculative decoding's draft model (spec_draft_model), or NULL */
    sd_backend *draft_backend;
    sd_engine *engine;
    sd_chat_template *chat; /* NULL: chat requests get 400 */
    char *dir, *name;
    int32_t max_model_len;
    double loaded_at;    /* unix seconds */
    atomic_int released; /* replaced and no request uses it: may be reaped */
    sd_admin_inst *next; /* mm->retired */
};

typedef enum swap_state { SW_NONE = 0, SW_LOADING, SW_FAILED, SW_DONE } swap_state;
static const char *const swap_names[] = {"none", "loading", "failed", "done"};

/* The latest swap asked for (API or job), for GET /admin/v1/model. dir, name and trigger do
 * not change while it loads, so the loading thread reads them without the lock. */
typedef struct swap_rec {
    swap_state state;
    char *dir, *name;    /* as asked; name NULL: the directory's */
    const char *trigger; /* "api" | "job" */
    double started_at;   /* unix seconds */
    double t0, t1;       /* monotonic start and end */
    char err[SD_DIAG_MSG_MAX];
    json_t *previous; /* done: the replaced model's info */
} swap_rec;

struct sd_admin_models {
    const sd_conf *c;
    sd_http *h;
    void (*wake)(void *);
    void *wake_ud;
    pthread_mutex_t mu; /* guards cur, retired, swaps, busy, sw, th_live */
    pthread_cond_t cv;  /* busy turned 0 */
    sd_admin_inst *cur;
    sd_admin_inst *retired; /* replaced, possibly still finishing requests */
    long long swaps, swaps_failed;
    int busy;          /* a swap is loading (one at a time) */
    atomic_int cancel; /* shutting down: loads stop at their next stage */
    swap_rec sw;       /* the latest swap */
    pthread_t th;      /* the API swap's thread, joined by the next swap_start or stop */
    int th_live;
};

static json_t *swap_json(const sd_admin_models *mm);

int sd_admin_models_init(sd_admin_models **ret, const sd_conf *c, sd_http *h, void (*wake)(void *),
                         void *wake_ud)
{
    sd_admin_models *mm = calloc(1, sizeof *mm);
    if (!mm)
        return SD_ENOMEM;
    mm->c = c;
    mm->h = h;
    mm->wake = wake;
    mm->wake_ud = wake_ud;
    pthread_mutex_init(&mm->mu, NULL);
    pthread_cond_init(&mm->cv, NULL);
    *ret = mm;
    return 0;
}

/* Frees what an instance holds; its engine first (it runs on the backend and model). */
static void inst_free(sd_admin_inst *in)
{
    if (!in)
        return;
    sd_engine_free(in->engine);
    sd_chat_template_free(in->chat);
    sd_backend_free(in->backend);
    sd_model_free(in->model);
    sd_backend_free(in->draft_backend);
    sd_model_free(in->draft_model);
    free(in->dir);
    free(in->name);
    free(in);
}

void sd_admin_models_discard(sd_admin_inst *inst)
{
    inst_free(inst);
}

static int init_backend(const sd_conf *c, sd_admin_inst *in, sd_diag *d)
{
    sd_backend_opts bo;
    sd_tp_opts to;
    sd_conf_engine_opts(c, &bo, &to);
    if (!strcmp(c->backend, "cpu"))
        return sd_backend_cpu_init(&in->backend, in->model, &bo, d);
#if SD_HAVE_CUDA
    /* one thread per GPU (devices 0..N-1), or rank 0 of processes (the followers run
     * sd_tp_follow in server/cmd_serve.c) */
    if (c->tensor_parallel > 1)
        return sd_tp_backend_init(&in->backend, in->model, &bo, &to, d);
    return sd_backend_cuda_init(&in->backend, in->model, &bo, d);
#else
    return sd_diag_set(d, SD_ENOTSUP, "backend 'cuda': this build has no CUDA support");
#endif
}

static int stop_requested(void *ud)
{
    return atomic_load(&((sd_admin_models *)ud)->cancel);
}

/* The GPU backend's first-use tuning and graph captures for every batch size the engine can
 * send (engine/warmup.h), before the model is published, so that no request waits for them. */
static int warm_up(sd_admin_models *mm, const sd_conf *c, sd_admin_inst *in, sd_diag *d)
{
    if (!c->warmup || !sd_backend_wants_warmup(in->backend))
        return 0;
    const int32_t max_pos = sd_model_cfg(in->model)->max_pos;
    sd_warmup_opts o = {c->max_seqs,
                        c->max_batch_tokens,
                        c->max_model_len > 0 ? c->max_model_len : max_pos,
                        stop_requested,
                        mm,
                        c->spec_tokens,
                        c->spec_max_seqs};
    if (o.max_len <= 0)
        o.max_len = c->max_batch_tokens;
    sd_log_info(NULL,
                "warming up %s (batch sizes up to %d, prompt chunks up to %d tokens): kernel tuning and "
                "graph capture before serving",
                in->dir, c->max_seqs, c->max_batch_tokens);
    sd_warmup_stats st;
    const int rc = sd_backend_warmup(in->backend, &o, &st, d);
    if (rc == 0)
        sd_log_info(NULL, "warm-up done: %d steps in %.1f s", st.steps, st.seconds);
    return rc;
}

/* The chat template from tokenizer_config.json, so that it sees the special tokens exactly as
 * transformers passes them. A missing or unusable one is not fatal: chat answers 400. */
static void load_chat(sd_admin_inst *in)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", in->dir);
    sd_diag td = {0};
    int rc = sd_chat_template_load(&in->chat, path, &td);
    if (rc < 0 && rc != SD_ENOTFOUND)
        sd_log_warn(NULL, "chat template of %s unusable: %s", in->dir, sd_diag_str(&td, rc));
    else if (rc < 0)
        sd_log_info(NULL, "%s has no chat template: /v1/chat/completions will answer 400", in->dir);
}

/* Speculative decoding's draft model (spec_draft_model) on a backend of the served one's kind: a
 * KV pool for spec_max_seqs sequences of the longest length, but no more tokens than the served
 * model's pool holds (the drafting sequences live there too), and not a share of free memory (the
 * served model's pool took that); on a GPU its own warm-up. */
static int init_draft(sd_admin_models *mm, const sd_conf *c, sd_admin_inst *in, sd_diag *d)
{
    if (!*c->spec_draft_model || !c->spec_tokens)
        return 0;
    sd_diag md = {0};
    int rc = sd_model_open(&in->draft_model, c->spec_draft_model, &md);
    if (rc < 0)
        return sd_diag_set(d, rc, "spec_draft_model: %s", sd_diag_str(&md, rc));
    sd_backend_opts bo;
    sd_tp_opts to;
    sd_conf_engine_opts(c, &bo, &to);
    const int32_t max_pos = sd_model_cfg(in->model)->max_pos;
    const int64_t len = c->max_model_len > 0 ? c->max_model_len : max_pos > 0 ? max_pos : 4096;
    int64_t blocks = (int64_t)c->spec_max_seqs * ((len + bo.block_size - 1) / bo.block_size + 1);
    const int64_t served = (int64_t)in->backend->kv_blocks * in->backend->block_size / bo.block_size;
    bo.kv_blocks = (int32_t)(blocks < served + c->spec_max_seqs ? blocks : served + c->spec_max_seqs);
    if (!strcmp(c->backend, "cpu"))
        rc = sd_backend_cpu_init(&in->draft_backend, in->draft_model, &bo, d);
    else
#if SD_HAVE_CUDA
        rc = sd_backend_cuda_init(&in->draft_backend, in->draft_model, &bo, d);
#else
        rc = sd_diag_set(d, SD_ENOTSUP, "backend 'cuda': this build has no CUDA support");
#endif
    if (rc < 0 || !c->warmup || !sd_backend_wants_warmup(in->draft_backend))
        return rc;
    sd_warmup_opts o = {c->spec_max_seqs, c->max_batch_tokens, (int32_t)len, stop_requested, mm, 0, 0};
    sd_warmup_stats st;
    rc = sd_backend_warmup(in->draft_backend, &o, &st, d);
    if (rc == 0)
        sd_log_info(NULL, "draft model %s warmed up: %d steps in %.1f s", c->spec_draft_model, st.steps,
                    st.seconds);
    return rc;
}

/* Between the stages of a load (none of which can be interrupted): stop when shutting down. */
static int stage_end(sd_admin_models *mm, sd_diag *d)
{
    if (!atomic_load(&mm->cancel))
        return 0;
    return sd_diag_set(d, SD_ECANCEL, "the server is shutting down: the model being loaded was discarded");
}

int sd_admin_models_load(sd_admin_models *mm, const char *dir, const char *name, sd_admin_inst **ret,
                         sd_diag *d)
{
    const sd_conf *c = mm->c;
    pthread_mutex_lock(&mm->mu);
    int serving = mm->cur != NULL;
    pthread_mutex_unlock(&mm->mu);
    if (serving && c->tensor_parallel > 1 && c->tp_rank >= 0) /* the followers hold the old model */
        return sd_diag_set(d, SD_ENOTSUP,
                           "loading another model: not supported in the multi-process "
                           "tensor-parallel mode (restart every rank with the new model)");
    sd_admin_inst *in = calloc(1, sizeof *in);
    /* absolute, so that the admin API and job defaults do not depend on the working directory */
    char *abs = realpath(dir, NULL);
    if (!in || !(in->dir = abs ? abs : strdup(dir))) {
        free(abs);
        free(in);
        return SD_ENOMEM;
    }
    in->mm = mm;
    int rc = sd_model_open(&in->model, dir, d);
    if (rc == 0)
        rc = stage_end(mm, d);
    if (rc == 0)
        rc = init_backend(c, in, d);
    if (rc == 0)
        rc = stage_end(mm, d);
    if (rc == 0)
        rc = warm_up(mm, c, in, d);
    if (rc == 0)
        rc = init_draft(mm, c, in, d);
    if (rc == 0) {
        sd_engine_opts eo;
        sd_engine_opts_default(&eo);
        eo.max_seqs = c->max_seqs;
        eo.max_batch_tokens = c->max_batch_tokens;
        eo.max_waiting = c->max_queue;
        eo.max_model_len = c->max_model_len;
        eo.prefix_caching = c->prefix_caching;
        eo.spec = (sd_spec_opts){c->spec_tokens,   c->spec_ngram_min, c->spec_ngram_max,
                                 c->spec_max_seqs, in->draft_model,   in->draft_backend};
        rc = sd_engine_init(&in->engine, in->model, in->backend, &eo, d);
    }
    if (rc == 0 && !(in->name = strdup(name && *name ? name : sd_model_name(in->model))))
        rc = SD_ENOMEM;
    if (rc < 0) {
        inst_free(in);
        return rc;
    }
    load_chat(in);
    const sd_model_config *cfg = sd_model_cfg(in->model);
    in->max_model_len = c->max_model_len > 0 ? c->max_model_len : cfg->max_pos;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    in->loaded_at = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    *ret = in;
    return 0;
}

/* The HTTP layer is done with a replaced instance (any thread, possibly its engine's own):
 * flag it and let the loop thread free it. */
static void on_released(void *ud)
{
    sd_admin_inst *in = ud;
    atomic_store(&in->released, 1);
    if (in->mm->wake)
        in->mm->wake(in->mm->wake_ud);
}

void sd_admin_models_publish(sd_admin_models *mm, sd_admin_inst *in, sd_http_model *ret_hm)
{
    sd_http_model hm = {.model = in->model,
                        .engine = in->engine,
                        .chat_template = in->chat,
                        .name = in->name,
                        .max_model_len = in->max_model_len,
                        .max_waiting = mm->c->max_queue,
                        .released = on_released,
                        .released_ud = in};
    pthread_mutex_lock(&mm->mu);
    sd_admin_inst *prev = mm->cur;
    mm->cur = in;
    if (prev) {
        prev->next = mm->retired;
        mm->retired = prev;
        mm->swaps++;
    }
    pthread_mutex_unlock(&mm->mu);
    sd_http_set_model(mm->h, &hm); /* prev is released when its last request is done */
    if (ret_hm)
        *ret_hm = hm;
}

void sd_admin_models_reap(sd_admin_models *mm)
{
    sd_admin_inst *done = NULL;
    pthread_mutex_lock(&mm->mu);
    for (sd_admin_inst **pp = &mm->retired; *pp;) {
        sd_admin_inst *in = *pp;
        if (atomic_load(&in->released)) {
            *pp = in->next;
            in->next = done;
            done = in;
        } else {
            pp = &in->next;
        }
    }
    pthread_mutex_unlock(&mm->mu);
    while (done) {
        sd_admin_inst *n = done->next;
        sd_log_info(NULL, "admin: freed the replaced model %s (%s): its last request has finished",
                    done->name, done->dir);
        inst_free(done);
        done = n;
    }
}

static json_t *inst_info(const sd_admin_models *mm, const sd_admin_inst *in)
{
    const sd_model_config *cfg = sd_model_cfg(in->model);
    return json_pack("{s:s, s:s, s:s, s:s, s:f, s:s, s:i, s:i, s:s}", "object", "admin.model", "path",
                     in->dir, "name", in->name, "sparsity", sd_model_sparsity(in->model), "loaded_at",
                     in->loaded_at, "architecture", cfg->arch_name, "n_layers", cfg->n_layers,
                     "max_model_len", in->max_model_len, "backend", mm->c->backend);
}

int sd_admin_models_failed(sd_admin_models *mm)
{
    if (!mm)
        return 0;
    pthread_mutex_lock(&mm->mu);
    int failed = mm->cur && sd_tp_failed(mm->cur->backend);
    pthread_mutex_unlock(&mm->mu);
    return failed;
}

json_t *sd_admin_models_info(sd_admin_models *mm)
{
    pthread_mutex_lock(&mm->mu);
    json_t *o = mm->cur ? inst_info(mm, mm->cur) : NULL;
    if (o) {
        int n = 0;
        for (sd_admin_inst *in = mm->retired; in; in = in->next)
            n++;
        json_object_set_new(o, "swaps", json_integer(mm->swaps));
        json_object_set_new(o, "replaced_still_serving", json_integer(n));
        json_object_set_new(o, "swap", swap_json(mm));
    }
    pthread_mutex_unlock(&mm->mu);
    return o;
}

char *sd_admin_models_dir(sd_admin_models *mm)
{
    pthread_mutex_lock(&mm->mu);
    char *s = mm->cur ? strdup(mm->cur->dir) : NULL;
    pthread_mutex_unlock(&mm->mu);
    return s;
}

/* ---- swaps ---------------------------------------------------------------------------------- */

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The swap record as JSON (mm->mu held). */
static json_t *swap_json(const sd_admin_models *mm)
{
    const swap_rec *w = &mm->sw;
    if (w->state == SW_NONE)
        return json_null();
    int loading = w->state == SW_LOADING;
    double elapsed = (loading ? now_mono() : w->t1) - w->t0;
    return json_pack("{s:s, s:s, s:s, s:o, s:s, s:f, s:o, s:f, s:o, s:o}", "object", "admin.model_swap",
                     "state", swap_names[w->state], "path", w->dir, "name",
                     w->name ? json_string(w->name) : json_null(), "trigger", w->trigger, "started_at",
                     w->started_at, "finished_at", loading ? json_null() : json_real(w->started_at + elapsed),
                     "elapsed_seconds", elapsed, "error",
                     w->state == SW_FAILED ? json_string(w->err) : json_null(), "previous",
                     w->previous ? json_deep_copy(w->previous) : json_null());
}

json_t *sd_admin_models_swap_info(sd_admin_models *mm)
{
    pthread_mutex_lock(&mm->mu);
    json_t *o = swap_json(mm);
    pthread_mutex_unlock(&mm->mu);
    return o;
}

/* Records a new swap and takes the one swap slot (mm->mu held, slot free). The directory is
 * made absolute (it exists: checked before). */
static int claim(sd_admin_models *mm, const char *dir, const char *name, const char *trigger)
{
    char *abs = realpath(dir, NULL);
    char *dc = abs ? abs : strdup(dir), *nc = name && *name ? strdup(name) : NULL;
    if (!dc || (name && *name && !nc)) {
        free(dc);
        free(nc);
        return SD_ENOMEM;
    }
    swap_rec *w = &mm->sw;
    free(w->dir);
    free(w->name);
    json_decref(w->previous);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *w = (swap_rec){.state = SW_LOADING,
                    .dir = dc,
                    .name = nc,
                    .trigger = trigger,
                    .started_at = (double)ts.tv_sec + ts.tv_nsec * 1e-9,
                    .t0 = now_mono()};
    mm->busy = 1;
    return 0;
}

/* Load + publish of the claimed swap (any thread but the loop's), then its record's end and
 * the slot freed. On failure the model in service stays. *ret_info as for sd_admin_models_swap. */
static int run_swap(sd_admin_models *mm, json_t **ret_info, sd_diag *d)
{
    const char *dir = mm->sw.dir, *name = mm->sw.name; /* fixed while busy */
    json_t *prev = sd_admin_models_info(mm);
    sd_admin_inst *in = NULL;
    int rc = prev ? sd_admin_models_load(mm, dir, name, &in, d)
                  : sd_diag_set(d, SD_ENOTSUP, "the first model is still loading");
    if (rc == 0 && (rc = stage_end(mm, d)) < 0)
        inst_free(in);
    if (rc == 0) {
        sd_admin_models_publish(mm, in, NULL);
        sd_log_info(NULL,
                    "admin: now serving %s from %s (sparsity %s, loaded in %.1fs); the previous model %s "
                    "finishes its requests, then is freed",
                    in->name, dir, sd_model_sparsity(in->model), now_mono() - mm->sw.t0,
                    json_string_value(json_object_get(prev, "name")));
    } else if (rc == SD_ECANCEL) {
        sd_log_info(NULL, "admin: the swap to %s was stopped: %s", dir, sd_diag_str(d, rc));
    } else {
        sd_log_error(NULL, "admin: loading %s failed (the model in service stays): %s", dir,
                     sd_diag_str(d, rc));
    }
    json_object_del(prev, "swap");
    pthread_mutex_lock(&mm->mu);
    swap_rec *w = &mm->sw;
    w->t1 = now_mono();
    w->state = rc == 0 ? SW_DONE : SW_FAILED;
    if (rc < 0) {
        snprintf(w->err, sizeof w->err, "%s", sd_diag_str(d, rc));
        mm->swaps_failed++;
    } else {
        w->previous = json_deep_copy(prev);
    }
    mm->busy = 0;
    pthread_cond_broadcast(&mm->cv);
    pthread_mutex_unlock(&mm->mu);
    json_t *info = rc == 0 && ret_info ? sd_admin_models_info(mm) : NULL;
    if (info) {
        /* Both instances are in memory during the swap: nothing had to drain first. */
        json_object_set_new(info, "previous", prev);
        json_object_set_new(info, "drained", json_false());
        prev = NULL;
    }
    json_decref(prev);
    if (ret_info)
        *ret_info = info;
    return rc;
}

int sd_admin_models_swap(sd_admin_models *mm, const char *dir, const char *name, json_t **ret_info,
                         sd_diag *d)
{
    pthread_mutex_lock(&mm->mu);
    while (mm->busy && !atomic_load(&mm->cancel))
        pthread_cond_wait(&mm->cv, &mm->mu);
    int rc = atomic_load(&mm->cancel) ? stage_end(mm, d) : claim(mm, dir, name, "job");
    pthread_mutex_unlock(&mm->mu);
    if (rc < 0)
        return rc;
    return run_swap(mm, ret_info, d);
}

static void *swap_thread(void *arg)
{
    sd_admin_models *mm = arg;
    sd_diag d = {0};
    run_swap(mm, NULL, &d);
    return NULL;
}

/* What can be checked in milliseconds before a swap starts: a wrong path or a config.json
 * that does not parse is answered at once rather than through the swap's state. */
static int precheck(sd_admin_models *mm, const char *dir, sd_diag *d)
{
    const sd_conf *c = mm->c;
    pthread_mutex_lock(&mm->mu);
    int serving = mm->cur != NULL;
    pthread_mutex_unlock(&mm->mu);
    if (!serving)
        return sd_diag_set(d, SD_ENOTSUP, "the first model is still loading");
    if (c->tensor_parallel > 1 && c->tp_rank >= 0) /* as in sd_admin_models_load */
        return sd_diag_set(d, SD_ENOTSUP,
                           "loading another model: not supported in the multi-process "
                           "tensor-parallel mode (restart every rank with the new model)");
    struct stat st;
    if (stat(dir, &st) != 0)
        return sd_diag_set(d, SD_ENOTFOUND, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return sd_diag_set(d, SD_EINVAL, "%s: not a directory (expected a checkpoint directory)", dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    sd_model_config cfg;
    return sd_model_config_load(&cfg, path, d);
}

int sd_admin_models_swap_start(sd_admin_models *mm, const char *dir, const char *name, json_t **ret_swap,
                               sd_diag *d)
{
    int rc = precheck(mm, dir, d);
    if (rc < 0)
        return rc;
    /* Under mu from the check to the thread's handle, so that sd_admin_models_stop sees
     * either no swap or one it can join. */
    pthread_mutex_lock(&mm->mu);
    if (atomic_load(&mm->cancel)) {
        rc = stage_end(mm, d);
    } else if (mm->busy) {
        rc = sd_diag_set(d, SD_EFULL,
                         "a model swap is already loading (%s, for %.0fs): wait until GET "
                         "/admin/v1/model shows it done or failed",
                         mm->sw.dir, now_mono() - mm->sw.t0);
    } else {
        if (mm->th_live) /* the previous swap's thread has ended or is returning */
            pthread_join(mm->th, NULL);
        mm->th_live = 0;
        rc = claim(mm, dir, name, "api");
        if (rc == 0 && pthread_create(&mm->th, NULL, swap_thread, mm) != 0) {
            mm->sw.state = SW_FAILED;
            mm->sw.t1 = now_mono();
            snprintf(mm->sw.err, sizeof mm->sw.err, "cannot start the swap thread");
            mm->busy = 0;
            rc = sd_diag_set(d, SD_ENOMEM, "cannot start the swap thread");
        } else if (rc == 0) {
            mm->th_live = 1;
        }
    }
    json_t *o = rc == 0 && ret_swap ? swap_json(mm) : NULL;
    pthread_mutex_unlock(&mm->mu);
    if (ret_swap)
        *ret_swap = o;
    return rc;
}

void sd_admin_models_cancel(sd_admin_models *mm)
{
    if (!mm)
        return;
    atomic_store(&mm->cancel, 1);
    pthread_mutex_lock(&mm->mu);
    if (mm->busy)
        sd_log_info(NULL, "shutdown: the model swap to %s is stopped at the end of its current load stage",
                    mm->sw.dir);
    pthread_cond_broadcast(&mm->cv); /* a job's activation waiting for the slot gives up */
    pthread_mutex_unlock(&mm->mu);
}

/* Shutdown: no swap runs once this returns. */
static void join_swap(sd_admin_models *mm)
{
    sd_admin_models_cancel(mm);
    pthread_mutex_lock(&mm->mu);
    while (mm->busy)
        pthread_cond_wait(&mm->cv, &mm->mu);
    int join = mm->th_live;
    mm->th_live = 0;
    pthread_mutex_unlock(&mm->mu);
    if (join)
        pthread_join(mm->th, NULL);
}

/* Appends s to a Prometheus label value with \, " and newlines escaped. */
static void label(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fputc('\\', f);
        if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

char *sd_admin_models_metrics(sd_admin_models *mm)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    pthread_mutex_lock(&mm->mu);
    int n = 0;
    for (sd_admin_inst *in = mm->retired; in; in = in->next)
        n++;
    if (mm->cur) {
        fprintf(f, "# HELP sparsed_model_info The model in service (labels); always 1.\n"
                   "# TYPE sparsed_model_info gauge\nsparsed_model_info{name=\"");
        label(f, mm->cur->name);
        fprintf(f, "\",path=\"");
        label(f, mm->cur->dir);
        fprintf(f, "\",sparsity=\"%s\"} 1\n", sd_model_sparsity(mm->cur->model));
        fprintf(f,
                "# HELP sparsed_model_loaded_timestamp_seconds When the model in service was loaded.\n"
                "# TYPE sparsed_model_loaded_timestamp_seconds gauge\n"
                "sparsed_model_loaded_timestamp_seconds %.3f\n",
                mm->cur->loaded_at);
    }
    fprintf(f,
            "# HELP sparsed_model_swaps_total Hot swaps done since start-up.\n"
            "# TYPE sparsed_model_swaps_total counter\nsparsed_model_swaps_total %lld\n"
            "# HELP sparsed_model_replaced_instances Replaced models still finishing their requests.\n"
            "# TYPE sparsed_model_replaced_instances gauge\nsparsed_model_replaced_instances %d\n"
            "# HELP sparsed_model_swap_loading 1 while a hot swap loads its model.\n"
            "# TYPE sparsed_model_swap_loading gauge\nsparsed_model_swap_loading %d\n"
            "# HELP sparsed_model_swaps_failed_total Hot swaps whose load failed (the model stayed).\n"
            "# TYPE sparsed_model_swaps_failed_total counter\nsparsed_model_swaps_failed_total %lld\n",
            mm->swaps, n, mm->busy, mm->swaps_failed);
    pthread_mutex_unlock(&mm->mu);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

void sd_admin_models_stop(sd_admin_models *mm)
{
    if (!mm)
        return;
    join_swap(mm);
    pthread_mutex_lock(&mm->mu);
    sd_admin_inst *all[2] = {mm->cur, mm->retired};
    pthread_mutex_unlock(&mm->mu);
    for (int k = 0; k < 2; k++)
        for (sd_admin_inst *in = all[k]; in; in = k ? in->next : NULL) {
            sd_engine_free(in->engine);
            in->engine = NULL;
        }
}

void sd_admin_models_free(sd_admin_models *mm)
{
    if (!mm)
        return;
    sd_admin_models_stop(mm);
    inst_free(mm->cur);
    while (mm->retired) {
        sd_admin_inst *n = mm->retired->next;
        inst_free(mm->retired);
        mm->retired = n;
    }
    free(mm->sw.dir);
    free(mm->sw.name);
    json_decref(mm->sw.previous);
    pthread_cond_destroy(&mm->cv);
    pthread_mutex_destroy(&mm->mu);
    free(mm);
}
