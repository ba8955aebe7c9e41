/* jobs: the job store (records in memory and on disk), the worker thread that runs prune jobs
 * one at a time, progress and ETA, cancellation, and the start-up recovery of records left
 * queued or running by a previous process. */
#include "server/jobs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/fileio.h"
#include "prune/cancel.h"
#include "server/jobs_impl.h"
#include "server/log.h"

typedef enum job_state { JS_QUEUED = 0, JS_RUNNING, JS_SUCCEEDED, JS_FAILED, JS_CANCELLED, JS_N } job_state;
static const char *const state_names[JS_N] = {"queued", "running", "succeeded", "failed", "cancelled"};

typedef struct job {
    char id[40];
    job_state state;
    json_t *rec;         /* the record, under j->mu */
    sd_jobs__spec spec;  /* jobs of this process until they finish; zeroed for loaded records */
    char *prompts_path;  /* inline prompts written here, removed when the job ends */
    volatile int cancel; /* read by sd_prune_run at its safe points; set through sd_cancel_request */
    double last_persist; /* monotonic seconds */
    int last_phase;
    struct job *next;
} job;

struct sd_jobs {
    pthread_mutex_t mu;      /* guards the list, states and records */
    pthread_mutex_t disk_mu; /* orders record writes (dump + write + rename) */
    pthread_cond_t cv;
    pthread_t worker;
    int worker_started, stopping;
    job *head, *tail; /* oldest first */
    char *dir;        /* <state_dir>/jobs */
    sd_jobs_opts o;
};

static double now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void set_state(job *jb, job_state s)
{
    jb->state = s;
    json_object_set_new(jb->rec, "state", json_string(state_names[s]));
    if (s == JS_RUNNING)
        json_object_set_new(jb->rec, "started_at", json_real(now_wall()));
    if (s >= JS_SUCCEEDED) {
        json_object_set_new(jb->rec, "finished_at", json_real(now_wall()));
        json_object_set_new(jb->rec, "eta_seconds", json_null());
    }
}

static void set_error(job *jb, const char *msg)
{
    json_object_set_new(jb->rec, "error", msg ? json_string(msg) : json_null());
}

/* ---- records on disk -------------------------------------------------------------------- */

/* Writes a job's record (its current state). Failures are logged: the job itself goes on. */
static void persist(sd_jobs *j, job *jb)
{
    char name[64];
    pthread_mutex_lock(&j->disk_mu);
    pthread_mutex_lock(&j->mu);
    char *text = json_dumps(jb->rec, JSON_INDENT(2) | JSON_SORT_KEYS);
    jb->last_persist = now_mono();
    pthread_mutex_unlock(&j->mu);
    snprintf(name, sizeof name, "%s.json", jb->id);
    sd_diag d = {0};
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", j->dir, name);
    if (!text || sd_write_atomic(path, text, &d) < 0)
        sd_log_error(NULL, "admin: job %s: record not saved: %s", jb->id, text ? d.msg : "out of memory");
    pthread_mutex_unlock(&j->disk_mu);
    free(text);
}

/* Removes dir (flat: a checkpoint directory has no subdirectories) and reports success. */
static int rm_flat(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(dp), e->d_name, 0);
    closedir(dp);
    return rmdir(dir);
}

/* Removes "<out>.tmp-*" directories the prune writer left when its process was killed. */
static void remove_partial_outputs(const char *out)
{
    char parent[PATH_MAX], path[PATH_MAX + NAME_MAX + 2];
    snprintf(parent, sizeof parent, "%s", out);
    char *slash = strrchr(parent, '/');
    if (!slash)
        return;
    *slash = 0;
    const char *base = slash + 1;
    char prefix[NAME_MAX + 8];
    snprintf(prefix, sizeof prefix, "%s.tmp-", base);
    DIR *dp = opendir(*parent ? parent : "/");
    if (!dp)
        return;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
            if (rm_flat(path) == 0)
                sd_log_info(NULL, "admin: removed the partial output %s of an interrupted job", path);
            else
                sd_log_warn(NULL, "admin: cannot remove the partial output %s: %s", path, strerror(errno));
        }
    closedir(dp);
}

static void list_append(sd_jobs *j, job *jb)
{
    if (j->tail)
        j->tail->next = jb;
    else
        j->head = jb;
    j->tail = jb;
}

static void job_free(job *jb)
{
    if (!jb)
        return;
    json_decref(jb->rec);
    sd_jobs__spec_free(&jb->spec);
    free(jb->prompts_path);
    free(jb);
}

static double rec_created(json_t *rec)
{
    return json_number_value(json_object_get(rec, "created_at"));
}

/* Inserts a loaded record in creation order. */
static void list_insert_sorted(sd_jobs *j, job *jb)
{
    job **pp = &j->head, *prev = NULL;
    while (*pp && rec_created((*pp)->rec) <= rec_created(jb->rec)) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    jb->next = *pp;
    *pp = jb;
    if (!jb->next)
        j->tail = jb;
    (void)prev;
}

/* Loads one record; a job a previous process left queued or running is marked failed. */
static void load_record(sd_jobs *j, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", j->dir, name);
    json_error_t je;
    json_t *rec = json_load_file(path, 0, &je);
    const char *id = json_string_value(json_object_get(rec, "id"));
    const char *st = json_string_value(json_object_get(rec, "state"));
    /* the id names the record's file: only what new_id makes */
    int id_ok = id && strlen(id) < sizeof((job *)0)->id &&
                strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(id);
    job *jb = rec && id_ok && st ? calloc(1, sizeof *jb) : NULL;
    if (!jb) {
        sd_log_warn(NULL, "admin: ignoring the unreadable job record %s", path);
        json_decref(rec);
        return;
    }
    snprintf(jb->id, sizeof jb->id, "%s", id);
    jb->rec = rec;
    jb->state = JS_FAILED;
    for (int s = 0; s < JS_N; s++)
        if (!strcmp(st, state_names[s]))
            jb->state = (job_state)s;
    int interrupted = jb->state == JS_QUEUED || jb->state == JS_RUNNING;
    const char *was = state_names[jb->state]; /* st dies with the record's old "state" */
    if (interrupted) {
        const char *out = json_string_value(json_object_get(rec, "output"));
        if (out)
            remove_partial_outputs(out);
        char prompts[PATH_MAX + 64];
        snprintf(prompts, sizeof prompts, "%s/%s.prompts.jsonl", j->dir, jb->id);
        unlink(prompts); /* inline prompts of the dead job, if any */
        set_state(jb, JS_FAILED);
        set_error(jb, "interrupted");
        json_object_set_new(rec, "cancel_requested", json_false());
    }
    list_insert_sorted(j, jb);
    if (interrupted) {
        sd_log_warn(NULL, "admin: job %s was %s when the previous process ended: marked failed (interrupted)",
                    jb->id, was);
        persist(j, jb);
    }
}

static int load_records(sd_jobs *j, sd_diag *d)
{
    DIR *dp = opendir(j->dir);
    if (!dp)
        return sd_diag_set(d, SD_EIO, "state_dir: cannot read %s: %s", j->dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(dp))) {
        size_t n = strlen(e->d_name);
        if (n > 5 && e->d_name[0] != '.' && !strcmp(e->d_name + n - 5, ".json"))
            load_record(j, e->d_name);
    }
    closedir(dp);
    return 0;
}

static int make_dirs(const char *state_dir, char **ret, sd_diag *d)
{
    if (mkdir(state_dir, 0750) != 0 && errno != EEXIST)
        return sd_diag_set(d, SD_EIO, "state_dir: cannot create %s: %s", state_dir, strerror(errno));
    size_t n = strlen(state_dir) + 8;
    char *dir = malloc(n);
    if (!dir)
        return SD_ENOMEM;
    snprintf(dir, n, "%s/jobs", state_dir);
    if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
        int e = errno;
        free(dir);
        return sd_diag_set(d, SD_EIO, "state_dir: cannot create %s/jobs: %s", state_dir, strerror(e));
    }
    if (access(dir, W_OK | X_OK) != 0) {
        int e = errno;
        free(dir);
        return sd_diag_set(d, SD_EIO, "state_dir: %s/jobs is not writable: %s", state_dir, strerror(e));
    }
    *ret = dir;
    return 0;
}

/* ---- the worker ------------------------------------------------------------------------- */

typedef struct run_ctx {
    sd_jobs *j;
    job *jb;
    double t0;
} run_ctx;

/* sd_prune_run's progress callback (worker thread): the record's progress fields; written
 * to disk on a phase change and at most once a second otherwise. */
static void on_progress(void *ud, const sd_prune_progress *p)
{
    run_ctx *rc = ud;
    job *jb = rc->jb;
    pthread_mutex_lock(&rc->j->mu);
    json_t *r = jb->rec;
    json_object_set_new(r, "phase", json_string(p->phase_name));
    json_object_set_new(r, "layer", p->layer >= 0 ? json_integer(p->layer + 1) : json_null());
    json_object_set_new(r, "n_layers", p->n_layers > 0 ? json_integer(p->n_layers) : json_null());
    json_object_set_new(r, "tokens", json_integer(p->tokens));
    json_object_set_new(r, "tokens_target", json_integer(p->tokens_target));
    json_object_set_new(r, "progress", json_real(p->fraction));
    double eta = p->fraction > 0.01 ? p->elapsed_s * (1 - p->fraction) / p->fraction : -1;
    json_object_set_new(r, "eta_seconds", eta >= 0 ? json_real(eta) : json_null());
    int due = (int)p->phase != jb->last_phase || now_mono() - jb->last_persist >= 1.0;
    jb->last_phase = (int)p->phase;
    pthread_mutex_unlock(&rc->j->mu);
    if (due)
        persist(rc->j, jb);
}

/* Inline prompts become a JSONL file the prune library reads. */
static int write_prompts(sd_jobs *j, job *jb, sd_diag *d)
{
    size_t n = strlen(j->dir) + strlen(jb->id) + 32;
    if (!(jb->prompts_path = malloc(n)))
        return SD_ENOMEM;
    snprintf(jb->prompts_path, n, "%s/%s.prompts.jsonl", j->dir, jb->id);
    FILE *f = fopen(jb->prompts_path, "w");
    if (!f)
        return sd_diag_set(d, SD_EIO, "%s: %s", jb->prompts_path, strerror(errno));
    size_t i;
    json_t *e;
    int ok = 1;
    json_array_foreach(jb->spec.prompts, i, e)
    {
        json_t *line = json_is_string(e) ? json_pack("{s:O}", "prompt", e) : json_incref(e);
        char *s = line ? json_dumps(line, JSON_COMPACT) : NULL;
        ok &= s && fprintf(f, "%s\n", s) > 0;
        free(s);
        json_decref(line);
    }
    ok &= fclose(f) == 0;
    if (!ok)
        return sd_diag_set(d, SD_EIO, "%s: cannot write the prompts", jb->prompts_path);
    jb->spec.ps.input = jb->prompts_path;
    return 0;
}

static void finish(sd_jobs *j, job *jb, int rc, const sd_prune_result *res, const sd_diag *d)
{
    pthread_mutex_lock(&j->mu);
    if (rc == 0) {
        json_object_set_new(jb->rec, "result",
                            json_pack("{s:I, s:i, s:f, s:i, s:f}", "calib_tokens",
                                      (json_int_t)res->calib_tokens, "calib_seqs", res->calib_seqs, "seconds",
                                      res->seconds, "linears", res->linears, "total_loss", res->total_loss));
        json_object_set_new(jb->rec, "progress", json_real(1.0));
        if (jb->spec.activate) /* succeeded once the swap is done too */
            json_object_set_new(jb->rec, "phase", json_string("activate"));
        else
            set_state(jb, JS_SUCCEEDED);
    } else if (rc == SD_ECANCEL && !j->stopping) {
        set_state(jb, JS_CANCELLED);
        set_error(jb, "cancelled");
    } else {
        set_state(jb, JS_FAILED);
        set_error(jb, rc == SD_ECANCEL ? "interrupted: the server shut down" : sd_diag_str(d, rc));
    }
    pthread_mutex_unlock(&j->mu);
    if (jb->prompts_path)
        unlink(jb->prompts_path);
    if (rc == 0)
        sd_log_info(NULL, "admin: job %s succeeded: %s (%d linears, %lld calibration tokens, %.1fs)", jb->id,
                    jb->spec.out, res->linears, (long long)res->calib_tokens, res->seconds);
    else
        sd_log_warn(NULL, "admin: job %s %s: %s", jb->id, rc == SD_ECANCEL ? "stopped" : "failed",
                    sd_diag_str(d, rc));
    persist(j, jb);
}

/* A successful job with "activate": swap the server to its output. */
static void activate(sd_jobs *j, job *jb)
{
    sd_diag d = {0};
    int rc = j->o.activate ? j->o.activate(j->o.activate_ud, jb->spec.out, &d)
                           : sd_diag_set(&d, SD_ENOTSUP, "no model to swap");
    pthread_mutex_lock(&j->mu);
    json_object_set_new(jb->rec, "activated", json_boolean(rc == 0));
    if (rc == 0) {
        json_object_set_new(jb->rec, "phase", json_string("done"));
        set_state(jb, JS_SUCCEEDED);
    } else {
        char msg[SD_DIAG_MSG_MAX + 32];
        snprintf(msg, sizeof msg, "activation failed: %s", sd_diag_str(&d, rc));
        set_state(jb, JS_FAILED);
        set_error(jb, msg);
    }
    pthread_mutex_unlock(&j->mu);
    if (rc < 0)
        sd_log_error(NULL, "admin: job %s: activating %s failed: %s", jb->id, jb->spec.out,
                     sd_diag_str(&d, rc));
    persist(j, jb);
}

static void run_job(sd_jobs *j, job *jb)
{
    sd_diag d = {0};
    sd_prune_result res = {0};
    int rc = 0;
    sd_log_info(NULL, "admin: job %s running: %s -> %s (%s, %s, %s)", jb->id, jb->spec.model, jb->spec.out,
                jb->spec.pattern, sd_prune_solver_name(jb->spec.ps.solver),
                sd_calib_source_name(jb->spec.ps.source));
    persist(j, jb);
    if (jb->spec.prompts)
        rc = write_prompts(j, jb, &d);
    run_ctx ctx = {.j = j, .jb = jb, .t0 = now_mono()};
    if (rc == 0)
        rc = sd_prune_run(&jb->spec.ps, on_progress, &ctx, &jb->cancel, &res, &d);
    finish(j, jb, rc, &res, &d);
    if (rc == 0 && jb->spec.activate)
        activate(j, jb);
    pthread_mutex_lock(&j->mu);
    sd_jobs__spec_free(&jb->spec); /* the record keeps what is needed */
    pthread_mutex_unlock(&j->mu);
}

static job *next_queued(sd_jobs *j)
{
    for (job *jb = j->head; jb; jb = jb->next)
        if (jb->state == JS_QUEUED)
            return jb;
    return NULL;
}

static void *worker(void *arg)
{
    sd_jobs *j = arg;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        job *jb;
        while (!j->stopping && !(jb = next_queued(j)))
            pthread_cond_wait(&j->cv, &j->mu);
        if (j->stopping)
            break;
        set_state(jb, JS_RUNNING);
        jb->last_phase = -1;
        pthread_mutex_unlock(&j->mu);
        run_job(j, jb);
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* ---- the API ------------------------------------------------------------------------------ */

int sd_jobs_init(sd_jobs **ret, const sd_jobs_opts *o, sd_diag *d)
{
    if (!o->state_dir || !*o->state_dir)
        return sd_diag_set(d, SD_EINVAL, "state_dir: required for admin jobs");
    sd_jobs *j = calloc(1, sizeof *j);
    if (!j)
        return SD_ENOMEM;
    j->o = *o;
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->disk_mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    int rc = make_dirs(o->state_dir, &j->dir, d);
    if (rc == 0)
        rc = load_records(j, d);
    if (rc == 0 && pthread_create(&j->worker, NULL, worker, j) != 0)
        rc = sd_diag_set(d, SD_EIO, "cannot start the job worker thread");
    if (rc < 0) {
        sd_jobs_free(j);
        return rc;
    }
    j->worker_started = 1;
    *ret = j;
    return 0;
}

void sd_jobs_free(sd_jobs *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    j->stopping = 1;
    for (job *jb = j->head; jb; jb = jb->next)
        if (jb->state == JS_RUNNING)
            sd_cancel_request(&jb->cancel);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (j->worker_started)
        pthread_join(j->worker, NULL);
    for (job *jb = j->head; jb; jb = jb->next)
        if (jb->state == JS_QUEUED) {
            set_state(jb, JS_FAILED);
            set_error(jb, "interrupted: the server shut down");
            persist(j, jb);
        }
    while (j->head) {
        job *n = j->head->next;
        job_free(j->head);
        j->head = n;
    }
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->disk_mu);
    pthread_mutex_destroy(&j->mu);
    free(j->dir);
    free(j);
}

/* Another live job already writes to `out`. Call with j->mu held. */
static int output_taken(sd_jobs *j, const char *out)
{
    for (job *jb = j->head; jb; jb = jb->next)
        if ((jb->state == JS_QUEUED || jb->state == JS_RUNNING) && jb->spec.out && !strcmp(jb->spec.out, out))
            return 1;
    return 0;
}

static void new_id(char *buf, size_t n)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
        r = (uint64_t)(now_wall() * 1e6) ^ (uint64_t)(uintptr_t)buf;
    snprintf(buf, n, "job-%012llx", (unsigned long long)(r & 0xffffffffffffull));
}

static json_t *new_record(job *jb, json_t *norm)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:n, s:n, s:n, s:I, s:I, s:f, s:n, s:n, s:f, s:n, s:n, s:O, s:O, "
                     "s:b, s:b, s:n}",
                     "id", jb->id, "object", "admin.job", "type", "prune", "state", "queued", "phase",
                     "layer", "n_layers", "tokens", (json_int_t)0, "tokens_target",
                     (json_int_t)jb->spec.ps.tokens_budget, "progress", 0.0, "eta_seconds", "error",
                     "created_at", now_wall(), "started_at", "finished_at", "spec", norm, "output",
                     json_object_get(norm, "output"), "activated", 0, "cancel_requested", 0, "result");
}

int sd_jobs_submit(sd_jobs *j, json_t *spec, const char *default_model, json_t **ret_job,
                   const char **ret_param, sd_diag *d)
{
    job *jb = calloc(1, sizeof *jb);
    if (!jb)
        return SD_ENOMEM;
    json_t *norm = NULL;
    int rc = sd_jobs__spec_parse(spec, default_model, j->o.memory_budget, &jb->spec, &norm, ret_param, d);
    if (rc < 0) {
        free(jb);
        return rc;
    }
    new_id(jb->id, sizeof jb->id);
    jb->rec = new_record(jb, norm);
    json_decref(norm);
    if (!jb->rec) {
        job_free(jb);
        return SD_ENOMEM;
    }
    json_object_set_new(jb->rec, "memory_estimate_bytes", json_integer(jb->spec.mem_estimate));
    pthread_mutex_lock(&j->mu);
    if (output_taken(j, jb->spec.out)) {
        pthread_mutex_unlock(&j->mu);
        *ret_param = "output";
        rc = sd_diag_set(d, SD_EINVAL, "output: job writing %s is already queued or running", jb->spec.out);
        job_free(jb);
        return rc;
    }
    list_append(j, jb);
    json_t *copy = json_deep_copy(jb->rec);
    pthread_mutex_unlock(&j->mu);
    persist(j, jb);
    pthread_mutex_lock(&j->mu);
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    *ret_job = copy;
    return copy ? 0 : SD_ENOMEM;
}

json_t *sd_jobs_list(sd_jobs *j)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&j->mu);
    for (job *jb = j->head; jb; jb = jb->next)
        json_array_append_new(arr, json_deep_copy(jb->rec));
    pthread_mutex_unlock(&j->mu);
    return json_pack("{s:s, s:o}", "object", "list", "data", arr);
}

static job *find(sd_jobs *j, const char *id)
{
    for (job *jb = j->head; jb; jb = jb->next)
        if (!strcmp(jb->id, id))
            return jb;
    return NULL;
}

int sd_jobs_get(sd_jobs *j, const char *id, json_t **ret)
{
    pthread_mutex_lock(&j->mu);
    job *jb = find(j, id);
    json_t *copy = jb ? json_deep_copy(jb->rec) : NULL;
    pthread_mutex_unlock(&j->mu);
    if (!jb)
        return SD_ENOTFOUND;
    *ret = copy;
    return copy ? 0 : SD_ENOMEM;
}

int sd_jobs_cancel(sd_jobs *j, const char *id, json_t **ret)
{
    pthread_mutex_lock(&j->mu);
    job *jb = find(j, id);
    int rc = 0, queued = 0;
    if (!jb) {
        rc = SD_ENOTFOUND;
    } else if (jb->state == JS_QUEUED) {
        queued = 1;
        set_state(jb, JS_CANCELLED);
        set_error(jb, "cancelled");
        json_object_set_new(jb->rec, "cancel_requested", json_true());
    } else if (jb->state == JS_RUNNING) {
        sd_cancel_request(&jb->cancel); /* sd_prune_run stops at its next safe point */
        json_object_set_new(jb->rec, "cancel_requested", json_true());
    } else {
        rc = SD_EINVAL;
    }
    json_t *copy = jb ? json_deep_copy(jb->rec) : NULL;
    pthread_mutex_unlock(&j->mu);
    if (jb && rc == 0)
        persist(j, jb);
    if (jb && rc == 0)
        sd_log_info(NULL, "admin: job %s: %s", id, queued ? "cancelled while queued" : "cancel requested");
    *ret = copy;
    return rc;
}

char *sd_jobs_metrics(sd_jobs *j)
{
    int count[JS_N] = {0};
    char running[512] = "";
    pthread_mutex_lock(&j->mu);
    for (job *jb = j->head; jb; jb = jb->next) {
        count[jb->state]++;
        if (jb->state != JS_RUNNING)
            continue;
        const char *ph = json_string_value(json_object_get(jb->rec, "phase"));
        json_t *eta = json_object_get(jb->rec, "eta_seconds");
        snprintf(running, sizeof running,
                 "sparsed_admin_job_progress{job=\"%s\",phase=\"%s\"} %.6f\n"
                 "sparsed_admin_job_eta_seconds{job=\"%s\"} %.3f\n"
                 "sparsed_admin_job_tokens{job=\"%s\"} %lld\n",
                 jb->id, ph ? ph : "start", json_number_value(json_object_get(jb->rec, "progress")), jb->id,
                 json_is_number(eta) ? json_number_value(eta) : -1.0, jb->id,
                 (long long)json_integer_value(json_object_get(jb->rec, "tokens")));
    }
    pthread_mutex_unlock(&j->mu);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    fprintf(f, "# HELP sparsed_admin_jobs Admin jobs known to the server, by state.\n"
               "# TYPE sparsed_admin_jobs gauge\n");
    for (int s = 0; s < JS_N; s++)
        fprintf(f, "sparsed_admin_jobs{state=\"%s\"} %d\n", state_names[s], count[s]);
    fprintf(f,
            "# HELP sparsed_admin_job_progress Fraction done of the running job (absent when none runs).\n"
            "# TYPE sparsed_admin_job_progress gauge\n"
            "# HELP sparsed_admin_job_eta_seconds Estimated seconds left of the running job (-1: unknown).\n"
            "# TYPE sparsed_admin_job_eta_seconds gauge\n"
            "# HELP sparsed_admin_job_tokens Calibration tokens collected by the running job.\n"
            "# TYPE sparsed_admin_job_tokens gauge\n%s",
            running);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}
