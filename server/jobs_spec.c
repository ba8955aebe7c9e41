/* jobs_spec: a prune job's JSON spec checked field by field (errors name the field), turned
 * into an sd_prune_spec, and its memory estimated against the configured budget. */
#include "server/jobs_impl.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/model_config.h"

#define MAX_TOKENS_BUDGET 100000000LL /* beyond this a CPU job would run for days */
#define MAX_PROMPTS 100000

static const char *const known_keys[] = {
    "type",    "model",       "source",  "prompts", "prompts_file", "text_file",      "tokens_budget",
    "pattern", "solver",      "mode",    "output",  "activate",     "max_new_tokens", "seq_len",
    "seed",    "temperature", "threads", "damping", "block_size"};

static int bad(const char **ret_param, const char *param, sd_diag *d, const char *fmt, const char *a,
               const char *b)
{
    *ret_param = param;
    return sd_diag_set(d, SD_EINVAL, fmt, a, b);
}

/* An optional string field; *ret stays untouched when absent. */
static int get_str(json_t *in, const char *key, const char **ret, const char **ret_param, sd_diag *d)
{
    json_t *v = json_object_get(in, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || !*json_string_value(v))
        return bad(ret_param, key, d, "%s: expected a non-empty string%s", key, "");
    *ret = json_string_value(v);
    return 0;
}

/* An optional number in [lo, hi] (integral if `integer`). */
static int get_num(json_t *in, const char *key, double lo, double hi, int integer, double *ret,
                   const char **ret_param, sd_diag *d)
{
    json_t *v = json_object_get(in, key);
    if (!v || json_is_null(v))
        return 0;
    if (integer ? !json_is_integer(v) : !json_is_number(v))
        return bad(ret_param, key, d, "%s: expected %s", key, integer ? "an integer" : "a number");
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) {
        *ret_param = key;
        return sd_diag_set(d, SD_EINVAL, "%s: %g is out of range [%g, %g]", key, x, lo, hi);
    }
    *ret = x;
    return 0;
}

/* The value of `key` if it is one of `choices` ("a|b|c"), else an error naming the key. */
static int get_choice(json_t *in, const char *key, const char *choices, const char **ret,
                      const char **ret_param, sd_diag *d)
{
    const char *v = NULL;
    int rc = get_str(in, key, &v, ret_param, d);
    if (rc < 0 || !v)
        return rc;
    char pat[64];
    char all[128];
    snprintf(pat, sizeof pat, "|%s|", v);
    snprintf(all, sizeof all, "|%s|", choices);
    if (strlen(v) > 32 || strchr(v, '|') || !strstr(all, pat)) {
        *ret_param = key;
        return sd_diag_set(d, SD_EINVAL, "%s: '%.64s' is not one of %s", key, v, choices);
    }
    *ret = v;
    return 0;
}

/* An absolute copy of path (relative paths are taken from the daemon's working directory). */
static char *abs_path(const char *p)
{
    char cwd[PATH_MAX], *r;
    if (p[0] == '/' || !getcwd(cwd, sizeof cwd))
        return strdup(p);
    size_t n = strlen(cwd) + strlen(p) + 2;
    if ((r = malloc(n)))
        snprintf(r, n, "%s/%s", cwd, p);
    return r;
}

static int check_model(const char *dir, const char **ret_param, sd_diag *d)
{
    char p[PATH_MAX];
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return bad(ret_param, "model", d, "model: no checkpoint directory at %s%s", dir, "");
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (access(p, R_OK) != 0)
        return bad(ret_param, "model", d, "model: %s has no readable config.json%s", dir, "");
    snprintf(p, sizeof p, "%s/sparsity.json", dir);
    if (access(p, F_OK) == 0)
        return bad(ret_param, "model", d, "model: %s is already a pruned checkpoint; give the dense one%s",
                   dir, "");
    return 0;
}

/* The output must not exist and its parent must be a writable directory (the temporary
 * directory is created beside it, then renamed). */
static int check_output(const char *out, const char **ret_param, sd_diag *d)
{
    struct stat st;
    if (lstat(out, &st) == 0)
        return bad(ret_param, "output", d, "output: %s already exists; choose a new directory%s", out, "");
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", out);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/')
        parent[--n] = 0;
    char *slash = strrchr(parent, '/');
    if (!slash || slash[1] == 0 || !strcmp(slash + 1, ".") || !strcmp(slash + 1, ".."))
        return bad(ret_param, "output", d, "output: '%s' does not name a new directory%s", out, "");
    if (slash == parent)
        slash[1] = 0;
    else
        *slash = 0;
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
        return bad(ret_param, "output", d, "output: the parent directory %s does not exist%s", parent, "");
    if (access(parent, W_OK | X_OK) != 0)
        return bad(ret_param, "output", d, "output: the directory %s is not writable (%s)", parent,
                   strerror(errno));
    return 0;
}

static int check_file(const char *key, const char *path, const char **ret_param, sd_diag *d)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || access(path, R_OK) != 0)
        return bad(ret_param, key, d, "%s: %s is not a readable file", key, path);
    return 0;
}

/* Inline prompts: a non-empty list of strings or {"prompt": s} / {"messages": [...]} objects. */
static int check_prompts(json_t *p, const char **ret_param, sd_diag *d)
{
    size_t n = json_array_size(p);
    if (!json_is_array(p) || n == 0 || n > MAX_PROMPTS) {
        *ret_param = "prompts";
        return sd_diag_set(d, SD_EINVAL, "prompts: expected a list of 1 to %d prompts", MAX_PROMPTS);
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(p, i);
        int ok = (json_is_string(e) && *json_string_value(e)) ||
                 (json_is_object(e) && (json_is_string(json_object_get(e, "prompt")) ||
                                        json_is_array(json_object_get(e, "messages"))));
        if (!ok) {
            *ret_param = "prompts";
            return sd_diag_set(d, SD_EINVAL,
                               "prompts: item %zu is not a non-empty string, {\"prompt\"} or {\"messages\"}",
                               i);
        }
    }
    return 0;
}

static int parse_source(json_t *in, sd_jobs__spec *s, const char **ret_param, sd_diag *d)
{
    const char *src = "decode", *pf = NULL, *tf = NULL;
    int rc;
    if ((rc = get_choice(in, "source", "decode|text", &src, ret_param, d)) < 0 ||
        (rc = get_str(in, "prompts_file", &pf, ret_param, d)) < 0 ||
        (rc = get_str(in, "text_file", &tf, ret_param, d)) < 0)
        return rc;
    json_t *pr = json_object_get(in, "prompts");
    if (pr && json_is_null(pr))
        pr = NULL;
    s->ps.source = src[0] == 'd' ? SD_CALIB_DECODE : SD_CALIB_TEXT;
    if (s->ps.source == SD_CALIB_TEXT) {
        if (pr || pf)
            return bad(ret_param, pr ? "prompts" : "prompts_file", d,
                       "%s: only used with source \"decode\"%s", pr ? "prompts" : "prompts_file", "");
        if (!tf)
            return bad(ret_param, "text_file", d, "text_file: required with source \"text\"%s%s", "", "");
        if ((rc = check_file("text_file", tf, ret_param, d)) < 0)
            return rc;
        return (s->input = abs_path(tf)) ? 0 : SD_ENOMEM;
    }
    if (tf)
        return bad(ret_param, "text_file", d, "text_file: only used with source \"text\"%s%s", "", "");
    if (!pr && !pf)
        return bad(ret_param, "prompts", d, "prompts: source \"decode\" needs prompts or prompts_file%s%s",
                   "", "");
    if (pr && pf)
        return bad(ret_param, "prompts", d, "prompts: give prompts or prompts_file, not both%s%s", "", "");
    if (pf) {
        if ((rc = check_file("prompts_file", pf, ret_param, d)) < 0)
            return rc;
        return (s->input = abs_path(pf)) ? 0 : SD_ENOMEM;
    }
    if ((rc = check_prompts(pr, ret_param, d)) < 0)
        return rc;
    s->prompts = json_incref(pr);
    return 0;
}

static int parse_numbers(json_t *in, sd_jobs__spec *s, const char **ret_param, sd_diag *d)
{
    sd_prune_spec *p = &s->ps;
    double budget = (double)p->tokens_budget, mnt = p->max_new_tokens, sl = p->seq_len, seed = 0,
           temp = p->temperature, thr = p->threads, damp = p->damping, bs = p->block_size;
    int rc;
    if ((rc = get_num(in, "tokens_budget", 1, (double)MAX_TOKENS_BUDGET, 1, &budget, ret_param, d)) < 0 ||
        (rc = get_num(in, "max_new_tokens", 1, 1 << 20, 1, &mnt, ret_param, d)) < 0 ||
        (rc = get_num(in, "seq_len", 2, 1 << 20, 1, &sl, ret_param, d)) < 0 ||
        (rc = get_num(in, "seed", 0, 9007199254740991.0, 1, &seed, ret_param, d)) < 0 ||
        (rc = get_num(in, "temperature", 0, 100, 0, &temp, ret_param, d)) < 0 ||
        (rc = get_num(in, "threads", 0, 4096, 1, &thr, ret_param, d)) < 0 ||
        (rc = get_num(in, "damping", 0, 10, 0, &damp, ret_param, d)) < 0 ||
        (rc = get_num(in, "block_size", 1, 1 << 16, 1, &bs, ret_param, d)) < 0)
        return rc;
    p->tokens_budget = (int64_t)budget;
    p->max_new_tokens = (int32_t)mnt;
    p->seq_len = (int32_t)sl;
    p->seed = (uint64_t)seed;
    p->temperature = (float)temp;
    p->threads = (int)thr;
    p->damping = damp;
    p->block_size = (int)bs;
    return 0;
}

/* The normalised spec recorded with the job. */
static json_t *normalised(const sd_jobs__spec *s)
{
    const sd_prune_spec *p = &s->ps;
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:b, s:i, s:I, s:f, s:i, s:f, s:i}", "type", "prune",
        "model", s->model, "source", sd_calib_source_name(p->source), "tokens_budget",
        (json_int_t)p->tokens_budget, "pattern", s->pattern, "solver", sd_prune_solver_name(p->solver),
        "mode", p->mode == SD_PRUNE_SEQUENTIAL ? "sequential" : "oneshot", "output", s->out, "activate",
        s->activate, "max_new_tokens", p->max_new_tokens, "seed", (json_int_t)p->seed, "temperature",
        (double)p->temperature, "threads", p->threads, "damping", p->damping, "block_size", p->block_size);
    if (!o)
        return NULL;
    if (p->source == SD_CALIB_TEXT) {
        json_object_set_new(o, "text_file", json_string(s->input));
        json_object_set_new(o, "seq_len", json_integer(p->seq_len));
    } else if (s->prompts) {
        json_object_set(o, "prompts", s->prompts);
    } else {
        json_object_set_new(o, "prompts_file", json_string(s->input));
    }
    return o;
}

static int parse_fields(json_t *in, const char *default_model, sd_jobs__spec *s, const char **ret_param,
                        sd_diag *d)
{
    const char *type = "prune", *model = default_model, *pattern = "2:4", *solver = "sparsegpt",
               *mode = "oneshot", *out = NULL;
    int rc;
    if ((rc = get_choice(in, "type", "prune", &type, ret_param, d)) < 0 ||
        (rc = get_str(in, "model", &model, ret_param, d)) < 0 ||
        (rc = get_choice(in, "pattern", "2:4|4:8|8:16|16:32|unstructured", &pattern, ret_param, d)) < 0 ||
        (rc = get_choice(in, "solver", "sparsegpt|wanda|magnitude", &solver, ret_param, d)) < 0 ||
        (rc = get_choice(in, "mode", "oneshot|sequential", &mode, ret_param, d)) < 0 ||
        (rc = get_str(in, "output", &out, ret_param, d)) < 0)
        return rc;
    json_t *act = json_object_get(in, "activate");
    if (act && !json_is_boolean(act) && !json_is_null(act))
        return bad(ret_param, "activate", d, "activate: expected true or false%s%s", "", "");
    s->activate = json_is_true(act);
    if (!model)
        return bad(ret_param, "model", d, "model: required (no model is loaded)%s%s", "", "");
    if (!out)
        return bad(ret_param, "output", d, "output: required (a new directory for the pruned checkpoint)%s%s",
                   "", "");
    if (!(s->model = abs_path(model)) || !(s->out = abs_path(out)) || !(s->pattern = strdup(pattern)))
        return SD_ENOMEM;
    if ((rc = check_model(s->model, ret_param, d)) < 0 || (rc = check_output(s->out, ret_param, d)) < 0)
        return rc;
    s->ps.solver = (sd_prune_solver)sd_prune_solver_parse(solver);
    s->ps.mode = mode[0] == 's' ? SD_PRUNE_SEQUENTIAL : SD_PRUNE_ONESHOT;
    if ((rc = parse_source(in, s, ret_param, d)) < 0)
        return rc;
    return parse_numbers(in, s, ret_param, d);
}

int sd_jobs__spec_parse(json_t *in, const char *default_model, int64_t memory_budget, sd_jobs__spec *s,
                        json_t **ret_norm, const char **ret_param, sd_diag *d)
{
    memset(s, 0, sizeof *s);
    sd_prune_spec_default(&s->ps);
    *ret_param = NULL;
    if (!json_is_object(in))
        return sd_diag_set(d, SD_EINVAL, "the request body must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach(in, key, v)
    {
        size_t i = 0, n = sizeof known_keys / sizeof *known_keys;
        while (i < n && strcmp(key, known_keys[i]))
            i++;
        if (i == n) {
            *ret_param = key; /* valid while `in` is: the caller's */
            return sd_diag_set(d, SD_EINVAL, "%.64s: unknown field", key);
        }
    }
    int rc = parse_fields(in, default_model, s, ret_param, d);
    if (rc == 0) {
        s->mem_estimate = sd_jobs__mem_estimate(s->model, s->ps.mode == SD_PRUNE_SEQUENTIAL, d);
        if (s->mem_estimate < 0) {
            *ret_param = "model";
            rc = s->mem_estimate;
        } else if (memory_budget > 0 && s->mem_estimate > memory_budget) {
            *ret_param = "model";
            rc = sd_diag_set(d, SD_EINVAL,
                             "model: the job would need about %lld MiB, over job_memory_budget (%lld MiB)%s",
                             (long long)(s->mem_estimate >> 20), (long long)(memory_budget >> 20),
                             s->ps.mode == SD_PRUNE_ONESHOT ? "; mode \"sequential\" needs less" : "");
        }
    }
    if (rc == 0 && !(*ret_norm = normalised(s)))
        rc = SD_ENOMEM;
    if (rc < 0)
        sd_jobs__spec_free(s);
    else {
        s->ps.model_dir = s->model;
        s->ps.out_dir = s->out;
        s->ps.pattern = s->pattern;
        s->ps.input = s->input;
    }
    return rc;
}

void sd_jobs__spec_free(sd_jobs__spec *s)
{
    if (!s)
        return;
    free(s->model);
    free(s->out);
    free(s->pattern);
    free(s->input);
    json_decref(s->prompts);
    memset(s, 0, sizeof *s);
}

int64_t sd_jobs__mem_estimate(const char *model_dir, int sequential, sd_diag *d)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/config.json", model_dir);
    sd_model_config c;
    int rc = sd_model_config_load(&c, p, d);
    if (rc < 0)
        return sd_diag_wrap(d, SD_EINVAL, "model");
    int64_t h = c.hidden, q = (int64_t)c.n_heads * c.head_dim, kv = (int64_t)c.n_kv_heads * c.head_dim,
            f = c.intermediate, L = c.n_layers;
    int64_t linear = L * (h * q + 2 * h * kv + q * h + 3 * h * f);
    int64_t params = linear + 2 * (int64_t)c.vocab * h;
    /* Hessian accumulators and solver scratch, 16 bytes per entry, per capture site */
    int64_t hess = 16 * (2 * h * h + q * q + f * f);
    return 4 * params + (sequential ? 1 : L) * hess + linear * 9 / 8 + (64LL << 20);
}
