/* tokenizer: the public sd_tok_* API — loading, encoding with the post-processor, decoding,
 * token look-ups and incremental (streaming) decoding. The pieces live in engine/tok_*.c. */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tok_impl.h"

void sd_tok_free(sd_tokenizer *t)
{
    if (!t)
        return;
    free(t->str_off);
    free(t->bytes_off);
    free(t->bytes_len);
    free(t->special);
    free(t->arena);
    sd__tok_strmap_free(&t->vocab);
    sd__tok_strmap_free(&t->added_map);
    sd__tok_pairmap_free(&t->merges);
    for (int i = 0; i < SD__TOK_MAX_STEPS; i++)
        pcre2_code_free(t->pretok[i].re);
    for (int i = 0; t->added && i < t->n_added; i++)
        free(t->added[i].norm);
    free(t->added);
    for (int b = 0; b < 256; b++)
        free(t->added_by_byte[b]);
    free(t->post_prefix);
    free(t->post_suffix);
    free(t->bos_str);
    free(t->eos_str);
    free(t);
}

/* tokenizer_config.json's add_bos_token/add_eos_token, when given, replace the
 * post-processor by [bos] $A [eos], as transformers' update_post_processor does. */
static int apply_config_template(sd_tokenizer *t)
{
    if (t->add_bos_token < 0 && t->add_eos_token < 0)
        return 0;
    t->n_post_prefix = t->n_post_suffix = 0;
    if (t->add_bos_token == 1 && t->bos_id >= 0) {
        free(t->post_prefix);
        if (!(t->post_prefix = malloc(sizeof *t->post_prefix)))
            return SD_ENOMEM;
        t->post_prefix[t->n_post_prefix++] = t->bos_id;
    }
    if (t->add_eos_token == 1 && t->eos_id >= 0) {
        free(t->post_suffix);
        if (!(t->post_suffix = malloc(sizeof *t->post_suffix)))
            return SD_ENOMEM;
        t->post_suffix[t->n_post_suffix++] = t->eos_id;
    }
    return 0;
}

int sd_tok_load(sd_tokenizer **ret, const char *path, sd_diag *d)
{
    if (!ret || !path)
        return sd_diag_set(d, SD_EINVAL, "sd_tok_load: NULL argument");
    struct stat st;
    if (stat(path, &st))
        return sd_diag_set(d, SD_ENOTFOUND, "%s: no such tokenizer file or directory", path);
    size_t n = strlen(path);
    char *json = malloc(n + 32), *config = malloc(n + 32);
    sd_tokenizer *t = calloc(1, sizeof *t);
    int rc = 0;
    if (!json || !config || !t) {
        rc = sd_diag_set(d, SD_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(json, n + 32, "%s/tokenizer.json", path);
        snprintf(config, n + 32, "%s/tokenizer_config.json", path);
    } else { /* a tokenizer.json: its config is the one beside it */
        snprintf(json, n + 32, "%s", path);
        const char *slash = strrchr(path, '/');
        int dir_len = slash ? (int)(slash - path) : 1;
        snprintf(config, n + 32, "%.*s/tokenizer_config.json", dir_len, slash ? path : ".");
    }
    t->bos_id = t->eos_id = t->unk_id = -1;
    t->add_bos_token = t->add_eos_token = -1;
    rc = sd__tok_load_json(t, json, config, d);
    if (!rc)
        rc = apply_config_template(t);
    if (rc == SD_ENOMEM && d && !d->msg[0])
        sd_diag_set(d, rc, "%s: out of memory", json);
done:
    free(json);
    free(config);
    if (rc) {
        sd_tok_free(t);
        return rc;
    }
    *ret = t;
    return 0;
}

int sd_tok_encode(const sd_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ret_ids,
                  size_t *ret_n, sd_diag *d)
{
    if (!t || (!text && len) || !ret_ids || !ret_n)
        return sd_diag_set(d, SD_EINVAL, "sd_tok_encode: NULL argument");
    sd__tok_ids ids = {0};
    int rc = 0;
    for (int i = 0; add_special && i < t->n_post_prefix && !rc; i++)
        rc = sd__tok_ids_push(&ids, t->post_prefix[i]);
    if (!rc)
        rc = sd__tok_encode_text(t, text ? text : "", len, &ids, d);
    for (int i = 0; add_special && i < t->n_post_suffix && !rc; i++)
        rc = sd__tok_ids_push(&ids, t->post_suffix[i]);
    if (!rc && !ids.p && !(ids.p = malloc(sizeof *ids.p)))
        rc = SD_ENOMEM; /* an empty result is still a valid allocation */
    if (rc) {
        free(ids.p);
        return rc == SD_ENOMEM ? sd_diag_set(d, rc, "tokenizer: out of memory while encoding") : rc;
    }
    *ret_ids = ids.p;
    *ret_n = ids.len;
    return 0;
}

/* The bytes id decodes to, or NULL for ids the decoder drops (unknown, or skipped special). */
static const char *decoded_bytes(const sd_tokenizer *t, int32_t id, int skip_special, size_t *n)
{
    if (id < 0 || id >= t->n_ids || t->str_off[id] == UINT32_MAX)
        return NULL; /* HF drops ids it does not know */
    if (skip_special && t->special[id])
        return NULL;
    *n = t->bytes_len[id];
    return t->arena + t->bytes_off[id];
}

int sd_tok_decode(const sd_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **ret_text,
                  size_t *ret_len, sd_diag *d)
{
    if (!t || (!ids && n) || !ret_text)
        return sd_diag_set(d, SD_EINVAL, "sd_tok_decode: NULL argument");
    sd__tok_buf raw = {0}, text = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        size_t nb;
        const char *b = decoded_bytes(t, ids[i], skip_special, &nb);
        if (b)
            rc = sd__tok_buf_add(&raw, b, nb);
    }
    if (!rc)
        rc = sd__tok_utf8_lossy(&text, (const unsigned char *)(raw.p ? raw.p : ""), raw.len);
    free(raw.p);
    if (rc) {
        free(text.p);
        return sd_diag_set(d, rc, "tokenizer: out of memory while decoding");
    }
    *ret_text = text.p;
    if (ret_len)
        *ret_len = text.len;
    return 0;
}

int32_t sd_tok_vocab_size(const sd_tokenizer *t)
{
    return t ? t->n_ids : 0;
}

int32_t sd_tok_token_id(const sd_tokenizer *t, const char *tok)
{
    if (!t || !tok)
        return -1;
    size_t n = strlen(tok);
    int32_t id = sd__tok_strmap_get(&t->added_map, tok, n); /* added tokens win, as in HF */
    return id >= 0 ? id : sd__tok_strmap_get(&t->vocab, tok, n);
}

const char *sd_tok_token_str(const sd_tokenizer *t, int32_t id)
{
    if (!t || id < 0 || id >= t->n_ids || t->str_off[id] == UINT32_MAX)
        return NULL;
    return t->arena + t->str_off[id];
}

const char *sd_tok_token_bytes(const sd_tokenizer *t, int32_t id, size_t *ret_len)
{
    size_t n = 0;
    const char *b = t ? decoded_bytes(t, id, 0, &n) : NULL;
    if (b && ret_len)
        *ret_len = n;
    return b;
}

int sd_tok_is_special(const sd_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_ids && t->special[id];
}

int32_t sd_tok_bos_id(const sd_tokenizer *t)
{
    return t ? t->bos_id : -1;
}

int32_t sd_tok_eos_id(const sd_tokenizer *t)
{
    return t ? t->eos_id : -1;
}

const char *sd_tok_bos_str(const sd_tokenizer *t)
{
    return t ? t->bos_str : NULL;
}

const char *sd_tok_eos_str(const sd_tokenizer *t)
{
    return t ? t->eos_str : NULL;
}

/* ---- streaming ---- */

void sd_tok_stream_init(sd_tok_stream *s, const sd_tokenizer *t, int skip_special)
{
    memset(s, 0, sizeof *s);
    s->tok = t;
    s->skip_special = skip_special;
}

/* Decodes buf[0..n) into out (NULL: only counts) up to a trailing incomplete character,
 * whose start is returned through *ret_keep. Returns the output length. */
static size_t stream_decode(const unsigned char *buf, size_t n, char *out, size_t *ret_keep)
{
    size_t i = 0, o = 0;
    while (i < n) {
        int k = sd__tok_utf8_step(buf + i, n - i);
        if (k == 0)
            break; /* may still be completed by the next token */
        if (k > 0) {
            if (out)
                memcpy(out + o, buf + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            if (out)
                memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += (size_t)-k;
        }
    }
    *ret_keep = i;
    return o;
}

int sd_tok_stream_push(sd_tok_stream *s, int32_t id, char *out, size_t out_cap, size_t *ret_len)
{
    if (!s || !s->tok || !out || !ret_len)
        return SD_EINVAL;
    *ret_len = 0;
    size_t nb = 0;
    const char *b = decoded_bytes(s->tok, id, s->skip_special, &nb);
    if (!b)
        nb = 0;
    unsigned char small[256], *buf = small;
    size_t n = (size_t)s->n_pending + nb;
    if (n > sizeof small && !(buf = malloc(n)))
        return SD_ENOMEM;
    memcpy(buf, s->pending, (size_t)s->n_pending);
    if (nb)
        memcpy(buf + s->n_pending, b, nb);
    size_t keep, need = stream_decode(buf, n, NULL, &keep);
    int rc = 0;
    if (need + 1 > out_cap) {
        rc = SD_EFULL; /* nothing consumed: the caller may retry with a bigger buffer */
    } else {
        stream_decode(buf, n, out, &keep);
        out[need] = 0;
        s->n_pending = (int)(n - keep); /* at most 3: a proper prefix of a character */
        memcpy(s->pending, buf + keep, (size_t)s->n_pending);
        *ret_len = need;
    }
    if (buf != small)
        free(buf);
    return rc;
}

int sd_tok_stream_flush(sd_tok_stream *s, char *out, size_t out_cap, size_t *ret_len)
{
    if (!s || !out || !ret_len)
        return SD_EINVAL;
    *ret_len = 0;
    if (!s->n_pending) {
        if (out_cap)
            out[0] = 0;
        return 0;
    }
    if (out_cap < 4)
        return SD_EFULL;
    memcpy(out, "\xEF\xBF\xBD", 4); /* a truncated character is one maximal subpart */
    *ret_len = 3;
    s->n_pending = 0;
    return 0;
}
