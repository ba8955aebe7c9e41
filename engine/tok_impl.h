/* tok_impl: the tokenizer's private structures, shared by engine/tokenizer.c and the
 * engine/tok_*.c files it is split into (loading, maps, splitting, BPE, UTF-8). */
#ifndef SD_TOK_IMPL_H
#define SD_TOK_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "diag.h"
#include "tokenizer.h"

/* ---- growable buffers (per call; nothing global) ---- */

typedef struct sd__tok_buf {
    char *p;
    size_t len, cap;
} sd__tok_buf;

typedef struct sd__tok_ids {
    int32_t *p;
    size_t len, cap;
} sd__tok_ids;

int sd__tok_buf_add(sd__tok_buf *b, const void *src, size_t n);
int sd__tok_buf_reserve(sd__tok_buf *b, size_t extra);
int sd__tok_ids_push(sd__tok_ids *v, int32_t id);

/* ---- hash maps (open addressing, linear probing, power-of-two capacity) ---- */

/* String -> id. Keys are borrowed: they must outlive the map (they point into the
 * tokenizer's string arena). */
typedef struct sd__tok_strmap {
    struct sd__tok_strslot {
        const char *key; /* NULL: empty slot */
        uint32_t len;
        int32_t val;
    } * slots;
    size_t cap, n;
} sd__tok_strmap;

int sd__tok_strmap_init(sd__tok_strmap *m, size_t expected);
void sd__tok_strmap_free(sd__tok_strmap *m);
/* Inserts or overwrites. */
int sd__tok_strmap_put(sd__tok_strmap *m, const char *key, size_t len, int32_t val);
/* The value, or -1. */
int32_t sd__tok_strmap_get(const sd__tok_strmap *m, const char *key, size_t len);

/* (left id, right id) -> (rank, merged id). */
typedef struct sd__tok_pairmap {
    struct sd__tok_pairslot {
        uint64_t key; /* UINT64_MAX: empty slot */
        int32_t rank, id;
    } * slots;
    size_t cap, n;
} sd__tok_pairmap;

int sd__tok_pairmap_init(sd__tok_pairmap *m, size_t expected);
void sd__tok_pairmap_free(sd__tok_pairmap *m);
int sd__tok_pairmap_put(sd__tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
/* 1 and the rank/id when found, else 0. */
int sd__tok_pairmap_get(const sd__tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id);

/* ---- UTF-8 and the GPT-2 byte-level alphabet ---- */

/* Appends `s` to `out` with each maximal invalid subsequence replaced by U+FFFD (the rule
 * of Python's bytes.decode("utf-8", "replace") and Rust's from_utf8_lossy). */
int sd__tok_utf8_lossy(sd__tok_buf *out, const unsigned char *s, size_t n);
/* Length of the valid UTF-8 sequence at s (1..4), 0 if s[0..] is a truncated but valid
 * prefix of a character (needs more bytes), or -k when the first k bytes are a maximal
 * invalid subsequence. n >= 1. */
int sd__tok_utf8_step(const unsigned char *s, size_t n);
/* GPT-2 bytes_to_unicode: the code point each byte is shown as. */
uint32_t sd__tok_byte_to_cp(unsigned char b);
/* The byte a code point stands for, or -1 if the code point is not in the alphabet. */
int sd__tok_cp_to_byte(uint32_t cp);

/* ---- the tokenizer ---- */

enum { SD__NORM_NFC, SD__NORM_NFD, SD__NORM_NFKC, SD__NORM_NFKD };

enum {
    SD__SPLIT_ISOLATED,
    SD__SPLIT_REMOVED,
    SD__SPLIT_MERGED_PREV,
    SD__SPLIT_MERGED_NEXT,
    SD__SPLIT_CONTIGUOUS
};

typedef struct sd__tok_pretok {
    int bytelevel;        /* 1: ByteLevel step, 0: Split step */
    int add_prefix_space; /* ByteLevel */
    pcre2_code *re;       /* Split pattern, or the GPT-2 regex for ByteLevel use_regex; may be NULL */
    int behavior;         /* Split: SD__SPLIT_* (ByteLevel splits are Isolated) */
    int invert;
} sd__tok_pretok;

typedef struct sd__tok_added {
    const char *content; /* into the string arena */
    uint32_t len;
    char *norm; /* normalized tokens: the content normalised (what is matched), malloc'd; or NULL */
    uint32_t norm_len;
    int32_t id;
    unsigned special : 1, lstrip : 1, rstrip : 1, single_word : 1, normalized : 1;
} sd__tok_added;

#define SD__TOK_MAX_STEPS 8

struct sd_tokenizer {
    int32_t n_ids;       /* max id + 1 */
    uint32_t *str_off;   /* [n_ids] offset into arena of the token string, UINT32_MAX: no such id */
    uint32_t *bytes_off; /* [n_ids] offset into arena of the decoded bytes */
    uint32_t *bytes_len; /* [n_ids] */
    uint8_t *special;    /* [n_ids] 1 for added tokens marked special */
    char *arena;         /* NUL-terminated strings */
    size_t arena_len, arena_cap;

    sd__tok_strmap vocab; /* the model's vocab: token string -> id */
    sd__tok_pairmap merges;
    int32_t byte_id[256];          /* id of the one-character token of each byte, -1 if absent */
    unsigned char bl_utf8[256][3]; /* each byte's character in the byte-level alphabet: len, bytes */
    int16_t cp_byte[324];          /* inverse: the byte of a code point < 324, -1 if none */
    int ignore_merges;
    int32_t unk_id; /* the model's unk_token, -1 if none */
    int fuse_unk;

    int norm[SD__TOK_MAX_STEPS]; /* SD__NORM_*, applied in order */
    int n_norm;
    sd__tok_pretok pretok[SD__TOK_MAX_STEPS];
    int n_pretok;

    sd__tok_added *added; /* [n_added] */
    int n_added;
    sd__tok_strmap added_map;    /* content -> id, for sd_tok_token_id */
    int32_t *added_by_byte[256]; /* per first byte: indices into added, longest first, -1 ended */

    int32_t *post_prefix, *post_suffix; /* ids the post-processor puts around the sequence */
    int n_post_prefix, n_post_suffix;

    int32_t bos_id, eos_id;
    char *bos_str, *eos_str;
    int add_bos_token, add_eos_token; /* from tokenizer_config.json; -1 when absent */
};

/* Arena: appends n bytes + NUL, returns the offset through *off. */
int sd__tok_arena_add(sd_tokenizer *t, const char *s, size_t n, uint32_t *off);
static inline const char *sd__tok_arena_at(const sd_tokenizer *t, uint32_t off)
{
    return t->arena + off;
}

/* tok_load.c: fills t from the parsed files. */
int sd__tok_load_json(sd_tokenizer *t, const char *json_path, const char *config_path, sd_diag *d);

/* tok_bpe.c: appends the ids of one pre-token (raw bytes) to out. */
typedef struct sd__tok_bpe_scratch {
    int32_t *id, *prev, *next; /* [cap] symbols of the word */
    struct sd__tok_merge {
        uint64_t key; /* rank << 32 | position of the left symbol: the heap's order */
        int32_t id;   /* the merged token */
    } * heap;         /* [heap_cap] min-heap of candidate merges */
    size_t cap, heap_cap, heap_n;
    sd__tok_buf mapped; /* the pre-token in the byte-level alphabet (for ignore_merges) */
} sd__tok_bpe_scratch;

int sd__tok_bpe(const sd_tokenizer *t, sd__tok_bpe_scratch *s, const unsigned char *w, size_t n,
                sd__tok_ids *out);
void sd__tok_bpe_scratch_free(sd__tok_bpe_scratch *s);

/* tok_split.c: the text -> ids pipeline short of the post-processor. */
/* Applies the normalisers to s[0..n): *ret is NULL when s is unchanged (ASCII or no
 * normaliser), else a malloc'd string of *ret_n bytes. */
int sd__tok_normalize(const sd_tokenizer *t, const char *s, size_t n, char **ret, size_t *ret_n);
int sd__tok_encode_text(const sd_tokenizer *t, const char *text, size_t len, sd__tok_ids *out, sd_diag *d);

#endif
