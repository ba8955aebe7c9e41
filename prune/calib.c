/* calib: calibration inputs — prompts (JSONL or lines, chat template for messages), text
 * windows, token sequences (JSONL), and saving sets as JSONL. */
#include "prune/calib.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/chat_template.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "prune/ckptw.h"

#define CALIB_MAX_FILE ((size_t)1 << 30)

void sd_calib_set_clear(sd_calib_set *s)
{
    if (!s)
        return;
    for (int32_t i = 0; i < s->n; i++)
        free(s->seqs[i].tokens);
    free(s->seqs);
    s->seqs = NULL;
    s->n = s->cap = 0;
    s->kept = 0;
}

int sd_calib_set_push(sd_calib_set *s, const int32_t *tokens, int32_t n, int32_t prefill_len, sd_diag *d)
{
    if (s->n == s->cap) {
        int32_t cap = s->cap ? 2 * s->cap : 64;
        sd_calib_seq *ns = realloc(s->seqs, (size_t)cap * sizeof *ns);
        if (!ns)
            return sd_diag_set(d, SD_ENOMEM, "calibration: out of memory");
        s->seqs = ns;
        s->cap = cap;
    }
    int32_t *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    if (!t)
        return sd_diag_set(d, SD_ENOMEM, "calibration: out of memory");
    memcpy(t, tokens, (size_t)n * sizeof *t);
    s->seqs[s->n++] = (sd_calib_seq){t, n, prefill_len};
    s->kept += n - prefill_len;
    return 0;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The next line of buf[0..len) at or after *pos that is not blank, NUL-terminated in place;
 * *pos moves past it and *line counts every line read (blank ones too), 1-based. NULL at the
 * end. buf[len] must be writable (sd__file_read leaves a NUL there). */
static char *next_line(char *buf, size_t len, char **pos, int *line)
{
    while (*pos < buf + len) {
        char *p = *pos, *nl = memchr(p, '\n', (size_t)(buf + len - p));
        if (!nl)
            nl = buf + len;
        *nl = 0;
        *pos = nl + 1;
        (*line)++;
        if (strspn(p, " \t\r") != strlen(p))
            return p;
    }
    return NULL;
}

/* One JSONL prompt object -> token ids (caller frees *ids). */
static int prompt_ids(const sd_tokenizer *tok, const sd_chat_template *tpl, json_t *obj, const char *path,
                      int line, int32_t **ids, size_t *n, sd_diag *d)
{
    json_t *p = json_object_get(obj, "prompt"), *msgs = json_object_get(obj, "messages");
    if (json_is_string(p))
        return sd_tok_encode(tok, json_string_value(p), json_string_length(p), 1, ids, n, d);
    if (!json_is_array(msgs))
        return sd_diag_set(d, SD_EFORMAT, "%s:%d: neither a \"prompt\" string nor a \"messages\" array", path,
                           line);
    if (!tpl)
        return sd_diag_set(d, SD_ENOTFOUND, "%s:%d: \"messages\" need a chat template, the model has none",
                           path, line);
    json_t *norm = NULL, *extra = json_pack("{s:b}", "add_generation_prompt", 1);
    char *text = NULL;
    size_t len = 0;
    int rc = sd_chat_messages_normalize(msgs, &norm, d);
    if (rc == 0)
        rc = sd_chat_template_render(tpl, norm, extra, &text, &len, d);
    /* the template writes the special tokens itself, as apply_chat_template(tokenize=True) */
    if (rc == 0)
        rc = sd_tok_encode(tok, text, len, 0, ids, n, d);
    if (rc != 0)
        sd_diag_wrap(d, rc, "%s:%d", path, line);
    free(text);
    json_decref(norm);
    json_decref(extra);
    return rc;
}

int sd_calib_load_prompts(const sd_model *m, const char *model_dir, const char *path, sd_calib_set *out,
                          sd_diag *d)
{
    const sd_tokenizer *tok = sd_model_tokenizer(m);
    if (!tok)
        return sd_diag_set(d, SD_ENOTFOUND, "prompts: the model has no tokenizer.json");
    char *buf = NULL;
    size_t len = 0;
    int rc = sd__file_read(path, CALIB_MAX_FILE, &buf, &len, d);
    if (rc != 0)
        return rc;
    sd_ckptw_sha256_hex(buf, len, out->input_sha);
    int jsonl = has_suffix(path, ".jsonl");
    sd_chat_template *tpl = NULL;
    if (jsonl) {
        char cfg[4096];
        snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", model_dir);
        sd_chat_template_load(&tpl, cfg, NULL); /* optional: only "messages" prompts need it */
    }
    int line = 0;
    char *pos = buf, *p;
    while (rc == 0 && (p = next_line(buf, len, &pos, &line))) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (jsonl) {
            json_error_t je;
            json_t *obj = json_loads(p, 0, &je);
            if (!json_is_object(obj))
                rc = sd_diag_set(d, SD_EFORMAT, "%s:%d: not a JSON object (%s)", path, line, je.text);
            else
                rc = prompt_ids(tok, tpl, obj, path, line, &ids, &n, d);
            json_decref(obj);
        } else {
            rc = sd_tok_encode(tok, p, strlen(p), 1, &ids, &n, d);
        }
        if (rc == 0 && n == 0)
            rc = sd_diag_set(d, SD_EFORMAT, "%s:%d: empty prompt", path, line);
        if (rc == 0)
            rc = sd_calib_set_push(out, ids, (int32_t)n, (int32_t)n, d);
        free(ids);
    }
    if (rc == 0 && out->n == 0)
        rc = sd_diag_set(d, SD_EFORMAT, "%s: no prompts", path);
    sd_chat_template_free(tpl);
    free(buf);
    return rc;
}

int sd_calib_load_text(const sd_model *m, const char *path, int32_t seq_len, int64_t budget,
                       sd_calib_set *out, sd_diag *d)
{
    const sd_tokenizer *tok = sd_model_tokenizer(m);
    if (!tok)
        return sd_diag_set(d, SD_ENOTFOUND, "text: the model has no tokenizer.json");
    if (seq_len < 2)
        return sd_diag_set(d, SD_EINVAL, "text: sequence length %d", seq_len);
    char *buf = NULL;
    size_t len = 0;
    int rc = sd__file_read(path, CALIB_MAX_FILE, &buf, &len, d);
    if (rc != 0)
        return rc;
    sd_ckptw_sha256_hex(buf, len, out->input_sha);
    int32_t *ids = NULL;
    size_t n = 0;
    rc = sd_tok_encode(tok, buf, len, 1, &ids, &n, d);
    free(buf);
    if (rc != 0)
        return sd_diag_wrap(d, rc, "%s", path);
    for (size_t off = 0; off < n && (budget <= 0 || out->kept < budget); off += (size_t)seq_len) {
        int64_t take = (int64_t)(n - off) < seq_len ? (int64_t)(n - off) : seq_len;
        if (budget > 0 && take > budget - out->kept)
            take = budget - out->kept;
        if (take < 16 && out->n > 0)
            break;
        if ((rc = sd_calib_set_push(out, ids + off, (int32_t)take, 0, d)) != 0)
            break;
    }
    free(ids);
    if (rc == 0 && out->n == 0)
        rc = sd_diag_set(d, SD_EFORMAT, "%s: no text", path);
    return rc;
}

int sd_calib_load_tokens(const char *path, int32_t vocab, int64_t budget, sd_calib_set *out, sd_diag *d)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = sd__file_read(path, CALIB_MAX_FILE, &buf, &len, d);
    if (rc != 0)
        return rc;
    sd_ckptw_sha256_hex(buf, len, out->input_sha);
    int line = 0;
    int32_t *ids = NULL;
    char *pos = buf, *p;
    while (rc == 0 && (budget <= 0 || out->kept < budget) && (p = next_line(buf, len, &pos, &line))) {
        json_error_t je;
        json_t *obj = json_loads(p, 0, &je), *toks = json_object_get(obj, "tokens");
        json_t *pl = json_object_get(obj, "prefill_len");
        size_t n = json_array_size(toks);
        int64_t pf = pl ? json_integer_value(pl) : 0;
        if (!json_is_array(toks) || n == 0 || (pl && !json_is_integer(pl)) || pf < 0 || pf >= (int64_t)n) {
            rc = sd_diag_set(d, SD_EFORMAT, "%s:%d: want {\"tokens\": [ids], \"prefill_len\": 0 <= n < len}",
                             path, line);
        } else if (!(ids = realloc(ids, n * sizeof *ids))) {
            rc = sd_diag_set(d, SD_ENOMEM, "%s: out of memory", path);
        } else {
            for (size_t i = 0; i < n && rc == 0; i++) {
                json_t *v = json_array_get(toks, i);
                json_int_t id = json_integer_value(v);
                if (!json_is_integer(v) || id < 0 || id >= vocab)
                    rc = sd_diag_set(d, SD_EFORMAT, "%s:%d: token %zu is not an id below %d", path, line, i,
                                     vocab);
                ids[i] = (int32_t)id;
            }
            if (rc == 0)
                rc = sd_calib_set_push(out, ids, (int32_t)n, (int32_t)pf, d);
        }
        json_decref(obj);
    }
    free(ids);
    free(buf);
    if (rc == 0 && out->n == 0)
        rc = sd_diag_set(d, SD_EFORMAT, "%s: no sequences", path);
    return rc;
}

int sd_calib_save_tokens(const sd_calib_set *s, const char *path, sd_diag *d)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return sd_diag_set(d, SD_EIO, "cannot create %s", path);
    for (int32_t i = 0; i < s->n; i++) {
        fputs("{\"tokens\": [", f);
        for (int32_t j = 0; j < s->seqs[i].n; j++)
            fprintf(f, j ? ", %d" : "%d", s->seqs[i].tokens[j]);
        fprintf(f, "], \"prefill_len\": %d}\n", s->seqs[i].prefill_len);
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    return bad ? sd_diag_set(d, SD_EIO, "writing %s", path) : 0;
}
