/* tokenizer: Hugging Face tokenizer.json byte-level BPE (GPT-2 / Llama-3 / Qwen family):
 * normaliser, pre-tokenizer regex splits, byte-level mapping, merges by rank, added and
 * special tokens, post-processors, decoding and incremental (streaming) decoding. */
#ifndef SD_TOKENIZER_H
#define SD_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_tokenizer sd_tokenizer;

/* Loads `dir`/tokenizer.json and, if present, `dir`/tokenizer_config.json (bos/eos names,
 * add_bos_token). `path` may also name a tokenizer.json file directly. Unsupported model
 * types, normalisers, pre-tokenizers or decoders are SD_ENOTSUP naming the component. */
int sd_tok_load(sd_tokenizer **ret, const char *path, sd_diag *d);
void sd_tok_free(sd_tokenizer *t);

/* Encodes UTF-8 text (invalid sequences are replaced by U+FFFD first). With add_special,
 * the post-processor runs (BOS etc.), as HF's encode(add_special_tokens=True). Special
 * and added tokens in the text are always recognised, as HF does.
 * *ret_ids is malloc'd; the caller frees it. */
int sd_tok_encode(const sd_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ret_ids,
                  size_t *ret_n, sd_diag *d);

/* Decodes ids to UTF-8 (malloc'd, NUL-terminated). skip_special drops special tokens.
 * Byte sequences that are not valid UTF-8 decode to U+FFFD, as HF does. */
int sd_tok_decode(const sd_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **ret_text,
                  size_t *ret_len, sd_diag *d);

int32_t sd_tok_vocab_size(const sd_tokenizer *t);
/* Id of a token string (e.g. "<|im_end|>"), or -1. */
int32_t sd_tok_token_id(const sd_tokenizer *t, const char *tok);
/* The token's string form as in the vocab ("Ġthe"), or NULL if out of range. */
const char *sd_tok_token_str(const sd_tokenizer *t, int32_t id);
/* The raw bytes a token stands for (after byte-level decoding); NULL if out of range. */
const char *sd_tok_token_bytes(const sd_tokenizer *t, int32_t id, size_t *ret_len);
int sd_tok_is_special(const sd_tokenizer *t, int32_t id);
/* From tokenizer_config.json: bos/eos token ids (-1 if none) and their strings (NULL). */
int32_t sd_tok_bos_id(const sd_tokenizer *t);
int32_t sd_tok_eos_id(const sd_tokenizer *t);
const char *sd_tok_bos_str(const sd_tokenizer *t);
const char *sd_tok_eos_str(const sd_tokenizer *t);

/* Incremental decoding for streaming: push ids one at a time; each call appends to `out`
 * only complete UTF-8 characters (never half a character), so the concatenation of all
 * outputs plus sd_tok_stream_flush equals sd_tok_decode of all ids. */
typedef struct sd_tok_stream {
    const sd_tokenizer *tok;
    int skip_special;
    unsigned char pending[8]; /* bytes of an incomplete UTF-8 character */
    int n_pending;
} sd_tok_stream;

void sd_tok_stream_init(sd_tok_stream *s, const sd_tokenizer *t, int skip_special);
/* Appends decoded text for `id` to out (capacity out_cap, at least 64 bytes); *ret_len gets
 * the bytes written. */
int sd_tok_stream_push(sd_tok_stream *s, int32_t id, char *out, size_t out_cap, size_t *ret_len);
/* Emits what is left (an incomplete character as U+FFFD). */
int sd_tok_stream_flush(sd_tok_stream *s, char *out, size_t out_cap, size_t *ret_len);

#ifdef __cplusplus
}
#endif
#endif
