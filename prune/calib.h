/* calib: calibration sequences — loading prompts (JSONL {"prompt"} / {"messages"} through the
 * chat template, or one prompt per text line), teacher-forced text cut into windows, and
 * pre-generated token sequences (JSONL {"tokens", "prefill_len"}); generation by the dense
 * model on the CPU backend (batched, greedy or sampled); and replay of sequences through a
 * backend in batches (what capture and evaluation run on). */
#ifndef SD_CALIB_H
#define SD_CALIB_H

#include <stdint.h>

#include "engine/backend.h"
#include "engine/diag.h"
#include "engine/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_model sd_model;

/* One sequence; calibration keeps the rows of positions >= prefill_len. */
typedef struct sd_calib_seq {
    int32_t *tokens; /* [n], malloc'd */
    int32_t n;
    int32_t prefill_len; /* 0 for teacher-forced text (every position counts) */
} sd_calib_seq;

typedef struct sd_calib_set {
    sd_calib_seq *seqs; /* [n] */
    int32_t n, cap;
    int64_t kept;       /* sum over sequences of n - prefill_len */
    char input_sha[65]; /* SHA-256 of the input file (prompts, text or tokens) */
} sd_calib_set;

/* Frees the sequences (not the struct); a zeroed set is fine. */
void sd_calib_set_clear(sd_calib_set *s);
/* Appends a copy of tokens[n]. */
int sd_calib_set_push(sd_calib_set *s, const int32_t *tokens, int32_t n, int32_t prefill_len, sd_diag *d);

/* Prompts: a .jsonl file of {"prompt": str} or {"messages": [...]} (rendered with the model's
 * chat template and add_generation_prompt), else a text file, one prompt per non-empty line.
 * Each becomes a sequence with prefill_len = n. model_dir is where tokenizer_config.json lives. */
int sd_calib_load_prompts(const sd_model *m, const char *model_dir, const char *path, sd_calib_set *out,
                          sd_diag *d);

/* Teacher-forced text: BOS + encode(file) cut into non-overlapping windows of seq_len tokens
 * (the last, shorter one kept if at least 16 tokens), until `budget` tokens (0 = all). */
int sd_calib_load_text(const sd_model *m, const char *path, int32_t seq_len, int64_t budget,
                       sd_calib_set *out, sd_diag *d);

/* JSONL {"tokens": [ids], "prefill_len": n} (prefill_len defaults to 0), ids < vocab, until
 * `budget` kept tokens (0 = all). */
int sd_calib_load_tokens(const char *path, int32_t vocab, int64_t budget, sd_calib_set *out, sd_diag *d);

/* Writes a set as JSONL {"tokens": [...], "prefill_len": n} (loadable by sd_calib_load_tokens). */
int sd_calib_save_tokens(const sd_calib_set *s, const char *path, sd_diag *d);

/* Called with the tokens done so far and the target. */
typedef void (*sd_calib_tick_fn)(void *ud, int64_t done, int64_t target);

typedef struct sd_calib_gen_opts {
    int32_t max_new_tokens; /* per sequence */
    int64_t budget;         /* stop once this many tokens were generated in all (0 = one pass) */
    sd_sampling sampling;   /* temperature 0 = greedy; seed + prompt index seeds each sequence */
    int32_t parallel;       /* sequences decoded together (default 16) */
    int stop_at_eos;        /* stop a sequence at an EOS token (kept as its last token) */
    /* Live capture: if set, called before every forward with the prompt length of each of its
     * sequences (forward order), so a capture hook on the backend can keep decode rows only. */
    void (*begin)(void *ud, const int32_t *prefill_len, int n);
    void *begin_ud;
} sd_calib_gen_opts;

void sd_calib_gen_opts_default(sd_calib_gen_opts *o);

/* The model generates from each prompt (prompts are reused in a cycle, with new seeds, only when
 * sampling and the budget is not reached after one pass). Appends prompt + generated tokens to
 * out with prefill_len = prompt length. The backend's KV pool must hold `parallel` sequences of
 * prompt + max_new_tokens. A capture hook on the backend sees the prefill and decode forwards
 * (decode rows: n_tokens 1, positions >= prefill_len). */
int sd_calib_generate(sd_backend *b, const sd_model *m, const sd_calib_set *prompts,
                      const sd_calib_gen_opts *o, sd_calib_tick_fn tick, void *ud, const volatile int *cancel,
                      sd_calib_set *out, sd_diag *d);

/* Replay: every sequence in one causal forward from position 0, batched up to the backend's
 * max_batch_tokens (longer sequences in chunks). begin() is called before each forward with the
 * set's indices of the batch's sequences (ids[k] is forward sequence k, so a capture hook can
 * map seq -> prefill_len); logits() (if want_logits) gets a row for every token of those
 * sequences (chunk by chunk for long ones, with the chunk's first position). */
#define SD_CALIB_REPLAY_MAX_SEQS 1024 /* sequences per replay forward at most */

typedef struct sd_calib_replay_cb {
    void (*begin)(void *ud, const int32_t *ids, int n);
    int (*logits)(void *ud, const int32_t *ids, const int32_t *first_pos, const int32_t *n_rows, int n,
                  const float *logits);
    void *ud;
} sd_calib_replay_cb;

int sd_calib_replay(sd_backend *b, const sd_calib_set *s, const sd_calib_replay_cb *cb, int want_logits,
                    sd_calib_tick_fn tick, void *tick_ud, const volatile int *cancel, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
