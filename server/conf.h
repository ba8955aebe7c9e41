/* conf: the daemon's options — defaults, the JSON config file, command-line flags that
 * override it, validation (errors name the key), --help and --print-config output. */
#ifndef SD_CONF_H
#define SD_CONF_H

#include <stdio.h>

#include "engine/backend.h"
#include "engine/diag.h"
#include "engine/tp.h"

typedef struct sd_conf {
    char *model;             /* model directory */
    char *served_model_name; /* "" => the model directory's name */
    char *host;
    int port;
    char **api_keys; /* [n_api_keys] */
    int n_api_keys;
    char *api_key_file; /* "" => none; one key per line */
    char *backend;      /* "cpu" | "cuda" */
    int device;
    /* GPUs 0..N-1 the model is sharded over (cuda backend), 1 => one GPU */
    int tensor_parallel;
    int tp_rank;       /* -1: one process drives every GPU; else this process's rank (processes mode) */
    char *tp_addr;     /* processes mode: rank 0's bootstrap address "host:port" */
    double tp_timeout; /* seconds any wait on the group may take (bootstrap, NCCL set-up, a step) */
    int threads;       /* backend worker threads, 0 => cores */
    int http_threads;  /* HTTP event threads */
    int max_seqs;
    int max_batch_tokens;
    int max_queue;
    int prefix_caching; /* bool: keep computed KV blocks for prompts that start the same */
    int spec_tokens;    /* speculative decoding by prompt lookup: draft tokens a step (0 off) */
    int spec_ngram_min, spec_ngram_max, spec_max_seqs; /* engine/spec.h sd_spec_opts */
    char *spec_draft_model; /* a small model of the same vocabulary drafting instead ("" none) */
    int warmup;             /* bool: GPU backends tune and capture every batch size before serving */
    int deterministic;      /* bool: bit-identical logits run to run on the GPU (no split-K atomics) */
    char *tune_cache;       /* cuda: the tuning-cache file ("" none) */
    int max_model_len;      /* 0 => the model's */
    int kv_blocks;          /* 0 => backend default */
    int block_size;
    int max_connections;
    int max_connections_per_ip; /* 0 => no per-address limit */
    int max_body_bytes;
    double request_timeout; /* idle connection timeout, seconds */
    double drain_timeout;   /* grace period on SIGTERM, seconds */
    char *log_level;
    int log_priority_prefix; /* bool */
    int web_ui;              /* bool: serve the web console at / */
    int split_reasoning; /* bool: chat replies of thinking models: <think> ... </think> as reasoning_content
                          */
    char *admin_token;   /* "" => admin API off unless admin_token_file (server/admin.c) */
    char *admin_token_file; /* "" => none; the first non-comment line is the token */
    char *state_dir;        /* admin job records (<state_dir>/jobs) */
    char *admin_listen;     /* "" => /admin/ on the main listener; else "HOST:PORT" serving only /admin/ */
    int job_memory_budget;  /* MiB a prune job may be estimated to need; 0 => no limit */
} sd_conf;

/* Fills every option with its default (strings malloc'd). */
int sd_conf_init(sd_conf *c);
void sd_conf_free(sd_conf *c);

/* Applies the JSON object in `path` over c. Unknown keys (except ones starting with '_',
 * which are comments), wrong types and out-of-range values are SD_EINVAL naming the key. */
int sd_conf_load_file(sd_conf *c, const char *path, sd_diag *d);

/* Applies flags from argv[0..argc) ("--key value" or "--key=value"; '-' and '_' are
 * interchangeable). --config, --help and --print-config are skipped here (see
 * sd_conf_scan_meta). Unknown flags and bad values are SD_EINVAL naming the flag. */
int sd_conf_apply_flags(sd_conf *c, int argc, char **argv, sd_diag *d);

typedef struct sd_conf_meta {
    const char *config_path; /* --config value or NULL */
    int help, print_config;
} sd_conf_meta;
/* Finds --config/--help/--print-config; SD_EINVAL if --config lacks a value. */
int sd_conf_scan_meta(int argc, char **argv, sd_conf_meta *m, sd_diag *d);

/* Full load: defaults, then the config file (meta path, else `default_path` if it exists),
 * then the flags. On failure c is left initialised (free it). */
int sd_conf_load(sd_conf *c, int argc, char **argv, const char *default_path, sd_diag *d);

/* Cross-field checks done after everything is applied. */
int sd_conf_validate(const sd_conf *c, sd_diag *d);

/* What the config asks of the engine: backend options (threads, KV pool, device) and the
 * tensor-parallel group (world, rank, bootstrap address, timeout), from the defaults up. */
void sd_conf_engine_opts(const sd_conf *c, sd_backend_opts *bo, sd_tp_opts *to);

/* Splits "HOST:PORT" ("[v6]:PORT" for an IPv6 literal) into host (at most hn bytes with its
 * NUL) and port 1..65535; SD_EINVAL naming `what` otherwise. */
int sd_conf_split_listen(const char *s, const char *what, char *host, size_t hn, int *port, sd_diag *d);

void sd_conf_print_help(FILE *f);
/* The effective config as JSON (API keys redacted). */
void sd_conf_print(const sd_conf *c, FILE *f);

/* Reads an API key file: one key per line; blank lines and lines starting with '#' are
 * skipped. *ret_keys (and each key) malloc'd. */
int sd_conf_read_key_file(const char *path, char ***ret_keys, int *ret_n, sd_diag *d);
void sd_conf_free_keys(char **keys, int n);

#endif
