/* conf: option table, defaults, JSON config file, flags, validation and printing. */
#include "server/conf.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cuda_backend.h" /* SD_CUDA_MAX_SEQS */
#include "engine/spec.h"
#include "server/log.h"

typedef enum opt_type { OPT_STR, OPT_INT, OPT_DOUBLE, OPT_BOOL, OPT_KEYS } opt_type;

typedef struct opt {
    const char *key;
    opt_type type;
    size_t off;
    const char *def;     /* default as text */
    double lo, hi;       /* numeric range */
    const char *choices; /* "|cpu|cuda|" for enumerated strings, else NULL */
    const char *doc;
} opt;

#define O(k) offsetof(sd_conf, k)
static const opt opts[] = {
    {"model", OPT_STR, O(model), "models/tiny", 0, 0, NULL, "model directory (HF layout, dense or bitmask)"},
    {"served_model_name", OPT_STR, O(served_model_name), "", 0, 0, NULL,
     "model id in the API (default: the model directory's name)"},
    {"host", OPT_STR, O(host), "127.0.0.1", 0, 0, NULL, "address to listen on (IPv4 or IPv6 literal)"},
    {"port", OPT_INT, O(port), "8000", 1, 65535, NULL, "TCP port"},
    {"api_keys", OPT_KEYS, O(api_keys), "", 0, 0, NULL,
     "bearer keys accepted on /v1 (list; none and no key file => no auth). Flag: --api-key KEY"},
    {"api_key_file", OPT_STR, O(api_key_file), "", 0, 0, NULL, "file with one API key per line (# comments)"},
    {"backend", OPT_STR, O(backend), "cpu", 0, 0, "|cpu|cuda|", "compute backend: cpu | cuda"},
    {"device", OPT_INT, O(device), "0", 0, 64, NULL, "GPU ordinal (cuda backend)"},
    {"tensor_parallel", OPT_INT, O(tensor_parallel), "1", 1, 64, NULL,
     "GPUs 0..N-1 the model is sharded over (cuda backend; docs/tensor-parallel.md)"},
    {"tp_rank", OPT_INT, O(tp_rank), "-1", -1, 63, NULL,
     "-1: one process drives GPUs 0..N-1; 0..N-1: this process is that rank of a one-process-per-GPU "
     "group (rank 0 serves HTTP, the others follow it; needs tp_addr)"},
    {"tp_addr", OPT_STR, O(tp_addr), "", 0, 0, NULL,
     "host:port where rank 0 listens for the other ranks (processes mode)"},
    {"tp_timeout", OPT_DOUBLE, O(tp_timeout), "120", 1, 86400, NULL,
     "seconds any wait on the tensor-parallel group may take (joining, NCCL set-up, one step)"},
    {"threads", OPT_INT, O(threads), "0", 0, 4096, NULL, "backend worker threads (0 => all cores)"},
    {"http_threads", OPT_INT, O(http_threads), "1", 1, 64, NULL, "HTTP event-loop threads"},
    {"max_seqs", OPT_INT, O(max_seqs), "16", 1, 4096, NULL, "running sequences at most (batch size)"},
    {"max_batch_tokens", OPT_INT, O(max_batch_tokens), "512", 1, 1 << 20, NULL,
     "tokens per engine step (prefill chunks + decodes)"},
    {"max_queue", OPT_INT, O(max_queue), "256", 0, 1 << 20, NULL,
     "waiting requests at most; beyond it requests get HTTP 429"},
    {"max_model_len", OPT_INT, O(max_model_len), "0", 0, 1 << 24, NULL,
     "prompt + generated tokens at most (0 => the model's max_position_embeddings)"},
    {"kv_blocks", OPT_INT, O(kv_blocks), "0", 0, 1 << 26, NULL, "KV-cache blocks (0 => backend default)"},
    {"prefix_caching", OPT_BOOL, O(prefix_caching), "true", 0, 0, NULL,
     "keep the KV blocks of computed prompts and outputs; a prompt that starts with the same tokens "
     "(system prompt, earlier chat turns) reuses them instead of recomputing"},
    {"spec_tokens", OPT_INT, O(spec_tokens), "0", 0, SD_SPEC_MAX_TOKENS, NULL,
     "speculative decoding by prompt lookup: each step a sequence may also run up to this many draft "
     "tokens copied from where its last tokens occurred before in its prompt or output; the model "
     "keeps those it would have produced itself, so the output is unchanged (0 => off; docs/speculative.md)"},
    {"spec_ngram_min", OPT_INT, O(spec_ngram_min), "2", 1, SD_SPEC_MAX_NGRAM, NULL,
     "speculative decoding: the fewest last tokens that must match an earlier place to draft from it"},
    {"spec_ngram_max", OPT_INT, O(spec_ngram_max), "4", 1, SD_SPEC_MAX_NGRAM, NULL,
     "speculative decoding: the most last tokens matched (longer matches are tried first)"},
    {"spec_max_seqs", OPT_INT, O(spec_max_seqs), "4", 1, SD_SPEC_MAX_ROWS, NULL,
     "speculative decoding: draft only while at most this many sequences run"},
    {"spec_draft_model", OPT_STR, O(spec_draft_model), "", 0, 0, NULL,
     "speculative decoding: a small model directory of the same vocabulary whose greedy picks are the "
     "drafts, instead of the prompt lookup (on the same backend; needs spec_tokens; \"\" => the lookup)"},
    {"warmup", OPT_BOOL, O(warmup), "true", 0, 0, NULL,
     "cuda backend: before the server reports ready, run a step of every batch size up to max_seqs "
     "and every prompt chunk size the kernels tune for, so that no request waits for first-use "
     "kernel tuning or graph capture (engine/warmup.h)"},
    {"deterministic", OPT_BOOL, O(deterministic), "false", 0, 0, NULL,
     "cuda backend: the same batch gives bit-identical logits every time within one process (no "
     "split-K partial sums added by atomics, which arrive in any order); slower where split-K won"},
    {"tune_cache", OPT_STR, O(tune_cache), "", 0, 0, NULL,
     "cuda backend: a file that keeps the kernels first-use tuning chose (per GPU, driver and sparsed "
     "kernels revision), loaded at start-up and rewritten after each new choice, so a restart neither "
     "re-times them nor picks others (\"\" => none)"},
    {"block_size", OPT_INT, O(block_size), "16", 1, 1024, NULL, "tokens per KV-cache block"},
    {"max_connections", OPT_INT, O(max_connections), "1024", 1, 1 << 20, NULL, "concurrent HTTP connections"},
    {"max_connections_per_ip", OPT_INT, O(max_connections_per_ip), "256", 0, 1 << 20, NULL,
     "concurrent HTTP connections from one client address; more are closed at once (0 => no limit)"},
    {"max_body_bytes", OPT_INT, O(max_body_bytes), "1048576", 64, 1 << 30, NULL,
     "largest request body; larger bodies get HTTP 413"},
    {"request_timeout", OPT_DOUBLE, O(request_timeout), "60", 0.1, 86400, NULL,
     "seconds a connection may stay idle (not waiting on the engine) before it is closed"},
    {"drain_timeout", OPT_DOUBLE, O(drain_timeout), "30", 0, 86400, NULL,
     "seconds in-flight requests may take to finish after SIGTERM/SIGINT"},
    {"log_level", OPT_STR, O(log_level), "info", 0, 0, "|debug|info|warn|error|",
     "debug | info | warn | error (reloadable)"},
    {"log_priority_prefix", OPT_BOOL, O(log_priority_prefix), "false", 0, 0, NULL,
     "prefix log lines with <N> syslog priorities for journald (reloadable)"},
    {"web_ui", OPT_BOOL, O(web_ui), "true", 0, 0, NULL, "serve the web console (chat, server, jobs) at /"},
    {"split_reasoning", OPT_BOOL, O(split_reasoning), "true", 0, 0, NULL,
     "chat replies of models whose template thinks (<think> ... </think>): the thinking as "
     "reasoning_content, the rest as content"},
    {"admin_token", OPT_STR, O(admin_token), "", 0, 0, NULL,
     "bearer token of the admin API /admin/v1 (none and no token file => admin API off)"},
    {"admin_token_file", OPT_STR, O(admin_token_file), "", 0, 0, NULL,
     "file whose first non-comment line is the admin token"},
    {"state_dir", OPT_STR, O(state_dir), "state", 0, 0, NULL, "directory of admin job records (<dir>/jobs)"},
    {"admin_listen", OPT_STR, O(admin_listen), "", 0, 0, NULL,
     "HOST:PORT of a second listener that alone serves the admin API (/admin/ then 404s on the main "
     "one; \"\" => the main listener)"},
    {"job_memory_budget", OPT_INT, O(job_memory_budget), "0", 0, 1 << 30, NULL,
     "MiB a prune job may be estimated to need; larger jobs get 400 (0 => no limit)"},
};
#undef O
#define N_OPTS (sizeof opts / sizeof opts[0])

static char **str_at(sd_conf *c, const opt *o)
{
    return (char **)((char *)c + o->off);
}
static int *int_at(sd_conf *c, const opt *o)
{
    return (int *)((char *)c + o->off);
}
static double *dbl_at(sd_conf *c, const opt *o)
{
    return (double *)((char *)c + o->off);
}

void sd_conf_free_keys(char **keys, int n)
{
    for (int i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

static const opt *find_opt(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTS; i++) {
        const char *k = opts[i].key;
        if (strlen(k) != len)
            continue;
        size_t j = 0;
        for (; j < len; j++) {
            char a = name[j] == '-' ? '_' : name[j];
            if (a != k[j])
                break;
        }
        if (j == len)
            return &opts[i];
    }
    return NULL;
}

/* Sets a string option, checking enumerated choices. */
static int set_str(sd_conf *c, const opt *o, const char *v, const char *what, sd_diag *d)
{
    if (o->choices) {
        char pat[64];
        snprintf(pat, sizeof pat, "|%s|", v);
        if (!*v || strchr(v, '|') || !strstr(o->choices, pat))
            return sd_diag_set(d, SD_EINVAL, "%s: '%s' is not one of %s", what, v, o->choices);
    }
    char *s = strdup(v);
    if (!s)
        return SD_ENOMEM;
    free(*str_at(c, o));
    *str_at(c, o) = s;
    return 0;
}

static int set_num(sd_conf *c, const opt *o, double v, const char *what, sd_diag *d)
{
    if (!isfinite(v) || v < o->lo || v > o->hi)
        return sd_diag_set(d, SD_EINVAL, "%s: %g is out of range [%g, %g]", what, v, o->lo, o->hi);
    if (o->type == OPT_INT) {
        if (v != floor(v))
            return sd_diag_set(d, SD_EINVAL, "%s: %g is not an integer", what, v);
        *int_at(c, o) = (int)v;
    } else {
        *dbl_at(c, o) = v;
    }
    return 0;
}

static int set_keys(sd_conf *c, char **keys, int n)
{
    sd_conf_free_keys(c->api_keys, c->n_api_keys);
    c->api_keys = keys;
    c->n_api_keys = n;
    return 0;
}

/* Parses a text value (default or flag) into option o. */
static int set_text(sd_conf *c, const opt *o, const char *v, const char *what, sd_diag *d)
{
    char *end;
    switch (o->type) {
    case OPT_STR:
        return set_str(c, o, v, what, d);
    case OPT_INT:
    case OPT_DOUBLE: {
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno)
            return sd_diag_set(d, SD_EINVAL, "%s: '%s' is not a number", what, v);
        return set_num(c, o, x, what, d);
    }
    case OPT_BOOL:
        if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
            *int_at(c, o) = 1;
        else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
            *int_at(c, o) = 0;
        else
            return sd_diag_set(d, SD_EINVAL, "%s: '%s' is not true/false", what, v);
        return 0;
    case OPT_KEYS: {
        if (!*v)
            return set_keys(c, NULL, 0);
        char **k = malloc(sizeof *k);
        if (!k || !(k[0] = strdup(v))) {
            free(k);
            return SD_ENOMEM;
        }
        return set_keys(c, k, 1);
    }
    }
    return SD_EINVAL;
}

int sd_conf_init(sd_conf *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_OPTS; i++) {
        int rc = set_text(c, &opts[i], opts[i].def, opts[i].key, NULL);
        if (rc < 0) {
            sd_conf_free(c);
            return rc;
        }
    }
    return 0;
}

void sd_conf_free(sd_conf *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < N_OPTS; i++)
        if (opts[i].type == OPT_STR)
            free(*str_at(c, &opts[i]));
    sd_conf_free_keys(c->api_keys, c->n_api_keys);
    memset(c, 0, sizeof *c);
}

static int set_json(sd_conf *c, const opt *o, json_t *v, const char *path, sd_diag *d)
{
    char what[160];
    snprintf(what, sizeof what, "%s: key \"%s\"", path, o->key);
    switch (o->type) {
    case OPT_STR:
        if (!json_is_string(v))
            return sd_diag_set(d, SD_EINVAL, "%s: expected a string", what);
        return set_str(c, o, json_string_value(v), what, d);
    case OPT_INT:
    case OPT_DOUBLE:
        if (!json_is_number(v))
            return sd_diag_set(d, SD_EINVAL, "%s: expected a number", what);
        return set_num(c, o, json_number_value(v), what, d);
    case OPT_BOOL:
        if (!json_is_boolean(v))
            return sd_diag_set(d, SD_EINVAL, "%s: expected true or false", what);
        *int_at(c, o) = json_is_true(v);
        return 0;
    case OPT_KEYS: {
        if (!json_is_array(v))
            return sd_diag_set(d, SD_EINVAL, "%s: expected a list of strings", what);
        size_t n = json_array_size(v);
        char **k = calloc(n ? n : 1, sizeof *k);
        if (!k)
            return SD_ENOMEM;
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(v, i);
            if (!json_is_string(e) || !*json_string_value(e)) {
                sd_conf_free_keys(k, (int)i);
                return sd_diag_set(d, SD_EINVAL, "%s: item %zu is not a non-empty string", what, i);
            }
            if (!(k[i] = strdup(json_string_value(e)))) {
                sd_conf_free_keys(k, (int)i);
                return SD_ENOMEM;
            }
        }
        return set_keys(c, k, (int)n);
    }
    }
    return SD_EINVAL;
}

int sd_conf_load_file(sd_conf *c, const char *path, sd_diag *d)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return sd_diag_set(d, SD_EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = sd_diag_set(d, SD_EINVAL, "%s: the config must be a JSON object", path);
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (key[0] == '_')
            continue; /* "_comment"-style keys are annotations */
        const opt *o = find_opt(key, strlen(key));
        if (!o || strchr(key, '-')) {
            rc = sd_diag_set(d, SD_EINVAL, "%s: unknown key \"%s\"", path, key);
            goto out;
        }
        if ((rc = set_json(c, o, v, path, d)) < 0)
            goto out;
    }
out:
    json_decref(root);
    return rc;
}

static int is_meta(const char *name, size_t len)
{
    return (len == 6 && !strncmp(name, "config", 6)) || (len == 4 && !strncmp(name, "help", 4)) ||
           (len == 12 && (!strncmp(name, "print-config", 12) || !strncmp(name, "print_config", 12)));
}

int sd_conf_scan_meta(int argc, char **argv, sd_conf_meta *m, sd_diag *d)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            m->help = 1;
        else if (!strcmp(a, "--print-config") || !strcmp(a, "--print_config"))
            m->print_config = 1;
        else if (!strncmp(a, "--config=", 9))
            m->config_path = a + 9;
        else if (!strcmp(a, "--config")) {
            if (i + 1 >= argc)
                return sd_diag_set(d, SD_EINVAL, "--config needs a file name");
            m->config_path = argv[++i];
        }
    }
    return 0;
}

int sd_conf_apply_flags(sd_conf *c, int argc, char **argv, sd_diag *d)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h"))
            continue;
        if (strncmp(a, "--", 2) || !a[2])
            return sd_diag_set(d, SD_EINVAL, "unexpected argument '%s' (see --help)", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (is_meta(name, len)) {
            if (len == 6 && !eq)
                i++; /* --config FILE */
            continue;
        }
        const opt *o;
        if (len == 7 && !strncmp(name, "api-key", 7))
            o = find_opt("api_keys", 8);
        else if (len == 8 && !strncmp(name, "api_keys", 8))
            o = NULL; /* only the singular flag form exists */
        else
            o = find_opt(name, len);
        if (!o)
            return sd_diag_set(d, SD_EINVAL, "unknown option '--%.*s' (see --help)", (int)len, name);
        const char *v;
        if (eq)
            v = eq + 1;
        else if (o->type == OPT_BOOL && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)))
            v = "true";
        else if (i + 1 < argc)
            v = argv[++i];
        else
            return sd_diag_set(d, SD_EINVAL, "option '--%.*s' needs a value", (int)len, name);
        char what[96];
        snprintf(what, sizeof what, "option '--%.*s'", (int)len, name);
        int rc = set_text(c, o, v, what, d);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The multi-process tensor-parallel keys: a rank needs the group size, rank 0's address and
 * the cuda backend; an address without a rank is a mistake worth stopping for. */
static int validate_tp(const sd_conf *c, sd_diag *d)
{
    if (c->tp_rank < 0) {
        if (*c->tp_addr)
            return sd_diag_set(d, SD_EINVAL, "tp_addr: only used with tp_rank (the multi-process mode)");
        return 0;
    }
    if (c->tensor_parallel < 2)
        return sd_diag_set(d, SD_EINVAL, "tp_rank: %d needs tensor_parallel >= 2 (it is %d)", c->tp_rank,
                           c->tensor_parallel);
    if (c->tp_rank >= c->tensor_parallel)
        return sd_diag_set(d, SD_EINVAL, "tp_rank: %d is not a rank of tensor_parallel %d (0..%d)",
                           c->tp_rank, c->tensor_parallel, c->tensor_parallel - 1);
    if (strcmp(c->backend, "cuda"))
        return sd_diag_set(d, SD_EINVAL, "tp_rank: the multi-process mode needs backend cuda (it is %s)",
                           c->backend);
    const char *colon = strrchr(c->tp_addr, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!*c->tp_addr)
        return sd_diag_set(d, SD_EINVAL, "tp_addr: tp_rank %d needs rank 0's address (host:port)",
                           c->tp_rank);
    if (!colon || colon == c->tp_addr || !colon[1] || *end || port < 1 || port > 65535)
        return sd_diag_set(d, SD_EINVAL, "tp_addr: '%s' is not host:port with a port in 1..65535",
                           c->tp_addr);
    return 0;
}

int sd_conf_split_listen(const char *s, const char *what, char *host, size_t hn, int *port, sd_diag *d)
{
    const char *colon = strrchr(s, ':'), *h = s, *he = colon;
    if (*s == '[') { /* [v6]:port */
        const char *rb = strchr(s, ']');
        h = s + 1;
        he = rb;
        if (!rb || rb[1] != ':')
            colon = NULL;
    }
    char *end = NULL;
    long p = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || !he || he <= h || !colon[1] || *end || p < 1 || p > 65535 || (size_t)(he - h) >= hn)
        return sd_diag_set(d, SD_EINVAL, "%s: '%s' is not HOST:PORT with a port in 1..65535", what, s);
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = 0;
    *port = (int)p;
    return 0;
}

/* admin_listen: a second address, only worth having with the admin API on. */
static int validate_admin_listen(const sd_conf *c, sd_diag *d)
{
    char host[256];
    int port;
    if (!*c->admin_listen)
        return 0;
    int rc = sd_conf_split_listen(c->admin_listen, "admin_listen", host, sizeof host, &port, d);
    if (rc < 0)
        return rc;
    if (!*c->admin_token && !*c->admin_token_file)
        return sd_diag_set(d, SD_EINVAL,
                           "admin_listen: needs admin_token or admin_token_file (the admin API is off)");
    if (port == c->port && !strcmp(host, c->host))
        return sd_diag_set(d, SD_EINVAL, "admin_listen: %s is the main listener (host, port)",
                           c->admin_listen);
    return 0;
}

int sd_conf_validate(const sd_conf *c, sd_diag *d)
{
    int rc = validate_tp(c, d);
    if (rc == 0)
        rc = validate_admin_listen(c, d);
    if (rc < 0)
        return rc;
    if (!*c->model)
        return sd_diag_set(d, SD_EINVAL, "model: must name a model directory");
    if (!*c->host)
        return sd_diag_set(d, SD_EINVAL, "host: must not be empty");
    for (int i = 0; i < c->n_api_keys && *c->admin_token; i++)
        if (!strcmp(c->api_keys[i], c->admin_token))
            return sd_diag_set(d, SD_EINVAL, "admin_token: must differ from every API key");
    if (!strcmp(c->backend, "cuda") && c->max_seqs > SD_CUDA_MAX_SEQS)
        return sd_diag_set(d, SD_EINVAL, "max_seqs: at most %d with the cuda backend (a step's sequences)",
                           SD_CUDA_MAX_SEQS);
    if (*c->spec_draft_model && !c->spec_tokens)
        return sd_diag_set(d, SD_EINVAL, "spec_draft_model: needs spec_tokens > 0 (the drafts a step)");
    if (*c->spec_draft_model && c->tensor_parallel > 1)
        return sd_diag_set(d, SD_EINVAL, "spec_draft_model: not with tensor_parallel > 1");
    if (c->spec_ngram_min > c->spec_ngram_max)
        return sd_diag_set(d, SD_EINVAL, "spec_ngram_min: %d is more than spec_ngram_max (%d)",
                           c->spec_ngram_min, c->spec_ngram_max);
    if (c->spec_tokens && c->spec_max_seqs * (1 + c->spec_tokens) > SD_SPEC_MAX_ROWS)
        return sd_diag_set(d, SD_EINVAL, "spec_max_seqs: %d sequences of 1 + %d tokens pass %d rows a step",
                           c->spec_max_seqs, c->spec_tokens, SD_SPEC_MAX_ROWS);
    if (c->max_model_len && c->max_batch_tokens < 1)
        return sd_diag_set(d, SD_EINVAL, "max_batch_tokens: must be >= 1");
    return 0;
}

int sd_conf_load(sd_conf *c, int argc, char **argv, const char *default_path, sd_diag *d)
{
    sd_conf_meta m;
    int rc = sd_conf_scan_meta(argc, argv, &m, d);
    if (rc < 0)
        return rc;
    const char *path = m.config_path;
    if (!path && default_path && access(default_path, R_OK) == 0)
        path = default_path;
    if (path && (rc = sd_conf_load_file(c, path, d)) < 0)
        return rc;
    if ((rc = sd_conf_apply_flags(c, argc, argv, d)) < 0)
        return rc;
    return sd_conf_validate(c, d);
}

void sd_conf_print_help(FILE *f)
{
    fprintf(f, "usage: sparsed serve [--config FILE] [--OPTION VALUE ...] [--print-config]\n"
               "Options come from defaults, then the JSON config file (--config FILE, else\n"
               "config/sparsed.json if present), then flags. Flags are the config keys with '-'\n"
               "for '_' (--max-seqs 8 or --max-seqs=8).\n\n"
               "  --config FILE            JSON config file\n"
               "  --print-config           print the effective config as JSON and exit\n"
               "  --help                   this text\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", opts[i].type == OPT_KEYS ? "api_key" : opts[i].key);
        for (char *p = flag + 2; *p; p++)
            if (*p == '_')
                *p = '-';
        fprintf(f, "  %-24s %s", flag, opts[i].doc);
        if (opts[i].type != OPT_KEYS && *opts[i].def)
            fprintf(f, " [%s]", opts[i].def);
        fputc('\n', f);
    }
}

void sd_conf_print(const sd_conf *c, FILE *f)
{
    json_t *o = json_object();
    sd_conf *cc = (sd_conf *)c; /* the accessors are not const-typed; nothing is written */
    for (size_t i = 0; i < N_OPTS; i++) {
        const opt *op = &opts[i];
        json_t *v = NULL;
        switch (op->type) {
        case OPT_STR: /* the admin token is a secret */
            v = json_string(strcmp(op->key, "admin_token") || !**str_at(cc, op) ? *str_at(cc, op)
                                                                                : "<redacted>");
            break;
        case OPT_INT:
            v = json_integer(*int_at(cc, op));
            break;
        case OPT_DOUBLE:
            v = json_real(*dbl_at(cc, op));
            break;
        case OPT_BOOL:
            v = json_boolean(*int_at(cc, op));
            break;
        case OPT_KEYS:
            v = json_array();
            for (int k = 0; k < c->n_api_keys; k++)
                json_array_append_new(v, json_string("<redacted>"));
            break;
        }
        json_object_set_new(o, op->key, v);
    }
    json_dumpf(o, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', f);
    json_decref(o);
}

int sd_conf_read_key_file(const char *path, char ***ret_keys, int *ret_n, sd_diag *d)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return sd_diag_set(d, SD_EIO, "api_key_file %s: %s", path, strerror(errno));
    char **keys = NULL, *line = NULL;
    int n = 0, rc = 0;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                           line[len - 1] == '\t'))
            line[--len] = 0;
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == '#')
            continue;
        char **nk = realloc(keys, (size_t)(n + 1) * sizeof *nk);
        if (!nk || !(nk[n] = strdup(s))) {
            keys = nk ? nk : keys;
            rc = SD_ENOMEM;
            break;
        }
        keys = nk;
        n++;
    }
    free(line);
    fclose(f);
    if (rc < 0) {
        sd_conf_free_keys(keys, n);
        return rc;
    }
    *ret_keys = keys;
    *ret_n = n;
    return 0;
}

void sd_conf_engine_opts(const sd_conf *c, sd_backend_opts *bo, sd_tp_opts *to)
{
    sd_backend_opts_default(bo);
    bo->n_threads = c->threads;
    bo->block_size = c->block_size;
    bo->kv_blocks = c->kv_blocks;
    bo->max_batch_tokens = c->max_batch_tokens;
    bo->device = c->device;
    bo->deterministic = c->deterministic;
    bo->tune_cache = c->tune_cache;
    sd_tp_opts_default(to);
    to->world = c->tensor_parallel;
    to->rank = c->tp_rank;
    to->addr = c->tp_addr;
    to->timeout_ms = (int)(c->tp_timeout * 1000.0);
}
