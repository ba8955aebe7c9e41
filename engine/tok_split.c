/* tok_split: text -> ids short of the post-processor: added tokens split out (before and
 * after normalisation, honouring lstrip/rstrip/single_word as HF's AddedVocabulary does),
 * normalisation (libunistring), pre-tokenizer regex splits (PCRE2), then BPE per piece. */
#include "tok_impl.h"

#include <stdlib.h>
#include <string.h>
#include <unictype.h>
#include <uninorm.h>
#include <unistr.h>

typedef struct range {
    size_t a, b; /* [a, b) within the piece being split */
    int match;
} range;

typedef struct depth_state {
    range *r; /* pieces produced at this pre-tokenizer step */
    size_t n, cap;
    sd__tok_buf prefixed; /* the piece with a prefix space (ByteLevel add_prefix_space) */
} depth_state;

typedef struct enc_ctx {
    const sd_tokenizer *t;
    sd__tok_ids *out;
    sd_diag *d;
    sd__tok_bpe_scratch bpe;
    pcre2_match_data *md;
    depth_state depth[SD__TOK_MAX_STEPS];
} enc_ctx;

static int range_push(depth_state *s, size_t a, size_t b, int match)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        range *r = realloc(s->r, cap * sizeof *r);
        if (!r)
            return SD_ENOMEM;
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n++] = (range){a, b, match};
    return 0;
}

/* ---- pre-tokenizer ---- */

/* Finds every match of re in p[0..n) as (gap, match) ranges, as HF's Pattern::find_matches. */
static int regex_ranges(enc_ctx *c, const pcre2_code *re, const char *p, size_t n, int invert, depth_state *s)
{
    size_t start = 0, prev = 0;
    s->n = 0;
    while (start <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)p, n, start, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, (PCRE2_SPTR)p, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return sd_diag_set(c->d, SD_ERANGE, "tokenizer: pre-tokenizer regex failed (PCRE2 error %d)", rc);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t ms = ov[0], me = ov[1];
        if (prev != ms && (rc = range_push(s, prev, ms, invert)))
            return rc;
        if ((rc = range_push(s, ms, me, !invert)))
            return rc;
        prev = me;
        if (me == ms) { /* empty match: step one character to make progress */
            if (me >= n)
                break;
            me++;
            while (me < n && ((unsigned char)p[me] & 0xC0) == 0x80)
                me++;
        }
        start = me;
    }
    if (prev != n)
        return range_push(s, prev, n, invert);
    return 0;
}

/* HF's SplitDelimiterBehavior, folded in place over the (range, is_match) list. */
static void apply_behavior(depth_state *s, int behavior)
{
    size_t k = 0;
    int prev_match = 0;
    if (behavior == SD__SPLIT_MERGED_NEXT) {
        /* Walk backwards; a match joins the piece after it unless that was a match. */
        size_t w = s->n;
        for (size_t i = s->n; i-- > 0;) {
            range r = s->r[i];
            if (r.match && !prev_match && w < s->n)
                s->r[w].a = r.a;
            else
                s->r[--w] = (range){r.a, r.b, 0};
            prev_match = r.match;
        }
        memmove(s->r, s->r + w, (s->n - w) * sizeof *s->r);
        s->n -= w;
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        range r = s->r[i];
        int merge = behavior == SD__SPLIT_MERGED_PREV  ? r.match && !prev_match
                    : behavior == SD__SPLIT_CONTIGUOUS ? r.match == prev_match
                                                       : 0;
        prev_match = r.match;
        if (behavior == SD__SPLIT_REMOVED && r.match)
            continue;
        if (merge && k > 0)
            s->r[k - 1].b = r.b;
        else
            s->r[k++] = (range){r.a, r.b, 0};
    }
    s->n = k;
}

/* Runs pre-tokenizer step `step` (and the later ones) on p[0..n), then BPE on each piece. */
static int pretokenize(enc_ctx *c, int step, const char *p, size_t n)
{
    const sd_tokenizer *t = c->t;
    if (n == 0)
        return 0; /* HF drops empty pieces */
    if (step == t->n_pretok)
        return sd__tok_bpe(t, &c->bpe, (const unsigned char *)p, n, c->out);
    const sd__tok_pretok *st = &t->pretok[step];
    depth_state *ds = &c->depth[step];
    int rc;
    if (st->bytelevel && st->add_prefix_space && p[0] != ' ') {
        ds->prefixed.len = 0;
        if ((rc = sd__tok_buf_add(&ds->prefixed, " ", 1)) || (rc = sd__tok_buf_add(&ds->prefixed, p, n)))
            return rc;
        p = ds->prefixed.p;
        n = ds->prefixed.len;
    }
    if (!st->re)
        return pretokenize(c, step + 1, p, n);
    if ((rc = regex_ranges(c, st->re, p, n, st->invert, ds)))
        return rc;
    apply_behavior(ds, st->behavior);
    /* Later steps reuse only deeper depth states, so ds->r stays valid through the loop. */
    for (size_t i = 0; i < ds->n; i++)
        if ((rc = pretokenize(c, step + 1, p + ds->r[i].a, ds->r[i].b - ds->r[i].a)))
            return rc;
    return 0;
}

/* ---- added tokens ---- */

/* The character ending at s[pos] (pos > 0) and, through *ret_start, where it begins. */
static ucs4_t char_before(const char *s, size_t pos, size_t *ret_start)
{
    ucs4_t c = 0;
    const uint8_t *q = u8_prev(&c, (const uint8_t *)s + pos, (const uint8_t *)s);
    if (ret_start)
        *ret_start = q ? (size_t)(q - (const uint8_t *)s) : pos - 1;
    return c;
}

static int is_space(ucs4_t c)
{
    return uc_is_property_white_space(c);
}

/* HF's single_word test is the Rust regex \w: Alphabetic, marks, Nd, Pc, Join_Control. */
static int is_word(ucs4_t c)
{
    return uc_is_property_alphabetic(c) || uc_is_general_category(c, UC_CATEGORY_M) ||
           uc_is_general_category(c, UC_CATEGORY_Nd) || uc_is_general_category(c, UC_CATEGORY_Pc) ||
           uc_is_property_join_control(c);
}

/* The longest added token (of the `normalized` kind) starting at s[i], or NULL. */
static const sd__tok_added *added_at(const sd_tokenizer *t, const char *s, size_t n, size_t i, int normalized)
{
    const int32_t *l = t->added_by_byte[(unsigned char)s[i]];
    for (; l && *l >= 0; l++) {
        const sd__tok_added *a = &t->added[*l];
        const char *pat = a->norm ? a->norm : a->content;
        uint32_t len = a->norm ? a->norm_len : a->len;
        if (a->normalized == (unsigned)normalized && len <= n - i && !memcmp(s + i, pat, len))
            return a;
    }
    return NULL;
}

typedef int (*segment_fn)(enc_ctx *c, const char *s, size_t n);

/* Splits s on added tokens of one kind (leftmost-longest, non-overlapping, as the
 * Aho-Corasick matcher HF uses), emitting token ids and handing the text between to `fn`. */
static int split_added(enc_ctx *c, const char *s, size_t n, int normalized, segment_fn fn)
{
    const sd_tokenizer *t = c->t;
    size_t done = 0; /* text before this is emitted */
    int rc;
    for (size_t i = 0; i < n;) {
        const sd__tok_added *a = added_at(t, s, n, i, normalized);
        if (!a) {
            i++;
            continue;
        }
        size_t start = i, stop = i + (a->norm ? a->norm_len : a->len);
        i = stop;
        if (a->single_word) {
            ucs4_t after = 0;
            if (stop < n)
                u8_mbtouc(&after, (const uint8_t *)s + stop, n - stop);
            if ((start > 0 && is_word(char_before(s, start, NULL))) || (stop < n && is_word(after)))
                continue;
        }
        if (a->lstrip) {
            size_t before;
            while (start > done && is_space(char_before(s, start, &before)))
                start = before;
        }
        if (a->rstrip) {
            ucs4_t ch;
            int k;
            while (stop < n && (k = u8_mbtouc(&ch, (const uint8_t *)s + stop, n - stop)) > 0 && is_space(ch))
                stop += (size_t)k;
            i = stop;
        }
        if (start > done && (rc = fn(c, s + done, start - done)))
            return rc;
        if ((rc = sd__tok_ids_push(c->out, a->id)))
            return rc;
        done = stop;
    }
    return done < n ? fn(c, s + done, n - done) : 0;
}

static int pretokenize_all(enc_ctx *c, const char *s, size_t n)
{
    return pretokenize(c, 0, s, n);
}

static int is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return 0;
    return 1;
}

int sd__tok_normalize(const sd_tokenizer *t, const char *s, size_t n, char **ret, size_t *ret_n)
{
    const uninorm_t forms[] = {UNINORM_NFC, UNINORM_NFD, UNINORM_NFKC, UNINORM_NFKD};
    uint8_t *cur = NULL;
    size_t cur_n = n;
    if (t->n_norm && !is_ascii(s, n)) { /* ASCII is invariant under every normal form */
        for (int k = 0; k < t->n_norm; k++) {
            size_t len = 0;
            uint8_t *next =
                u8_normalize(forms[t->norm[k]], cur ? cur : (const uint8_t *)s, cur ? cur_n : n, NULL, &len);
            free(cur);
            if (!next)
                return SD_ENOMEM;
            cur = next;
            cur_n = len;
        }
    }
    *ret = (char *)cur;
    *ret_n = cur_n;
    return 0;
}

/* A piece between non-normalised added tokens: normalise, split on normalised added tokens,
 * pre-tokenize. */
static int normalize_segment(enc_ctx *c, const char *s, size_t n)
{
    char *norm;
    size_t norm_n;
    if (sd__tok_normalize(c->t, s, n, &norm, &norm_n))
        return sd_diag_set(c->d, SD_ENOMEM, "tokenizer: normalisation failed");
    int rc = split_added(c, norm ? norm : s, norm_n, 1, pretokenize_all);
    free(norm);
    return rc;
}

int sd__tok_encode_text(const sd_tokenizer *t, const char *text, size_t len, sd__tok_ids *out, sd_diag *d)
{
    enc_ctx c = {.t = t, .out = out, .d = d};
    sd__tok_buf clean = {0};
    int rc = 0;
    for (size_t i = 0; i < len;) { /* the common case: valid UTF-8, used in place */
        int k = sd__tok_utf8_step((const unsigned char *)text + i, len - i);
        if (k <= 0) {
            if ((rc = sd__tok_utf8_lossy(&clean, (const unsigned char *)text, len)))
                return rc;
            text = clean.p;
            len = clean.len;
            break;
        }
        i += (size_t)k;
    }
    c.md = pcre2_match_data_create(1, NULL);
    if (!c.md)
        rc = SD_ENOMEM;
    if (!rc)
        rc = split_added(&c, text, len, 0, normalize_segment);
    pcre2_match_data_free(c.md);
    sd__tok_bpe_scratch_free(&c.bpe);
    for (int i = 0; i < SD__TOK_MAX_STEPS; i++) {
        free(c.depth[i].r);
        free(c.depth[i].prefixed.p);
    }
    free(clean.p);
    return rc;
}
