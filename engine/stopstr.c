/* stopstr: stop strings over streamed text, with hold-back of possible partial matches. */
#include "stopstr.h"

#include <stdlib.h>
#include <string.h>

#include "diag.h"

int sd_stopstr_init(sd_stopstr *s, const char *const *stops, int n)
{
    memset(s, 0, sizeof *s);
    if (n <= 0)
        return 0;
    s->stops = calloc((size_t)n, sizeof *s->stops);
    s->lens = calloc((size_t)n, sizeof *s->lens);
    if (!s->stops || !s->lens)
        return SD_ENOMEM;
    for (int i = 0; i < n; i++) {
        if (!stops[i] || !stops[i][0])
            return SD_EINVAL;
        s->lens[i] = strlen(stops[i]);
        s->stops[i] = strdup(stops[i]);
        if (!s->stops[i])
            return SD_ENOMEM;
        s->n = i + 1;
    }
    return 0;
}

void sd_stopstr_free(sd_stopstr *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        free(s->stops[i]);
    free(s->stops);
    free(s->lens);
    free(s->held);
    free(s->out);
    memset(s, 0, sizeof *s);
}

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    char *p = realloc(*buf, c);
    if (!p)
        return SD_ENOMEM;
    *buf = p;
    *cap = c;
    return 0;
}

/* Earliest start of any stop string in held, or -1. */
static long first_match(const sd_stopstr *s)
{
    long best = -1;
    for (int i = 0; i < s->n; i++) {
        const char *p = memmem(s->held, s->n_held, s->stops[i], s->lens[i]);
        if (p && (best < 0 || p - s->held < best))
            best = p - s->held;
    }
    return best;
}

/* Length of the longest tail of held that is a proper prefix of some stop string. */
static size_t partial_tail(const sd_stopstr *s)
{
    size_t best = 0;
    for (int i = 0; i < s->n; i++) {
        size_t k = s->lens[i] - 1 < s->n_held ? s->lens[i] - 1 : s->n_held;
        for (; k > best; k--) {
            if (memcmp(s->held + s->n_held - k, s->stops[i], k) == 0) {
                best = k;
                break;
            }
        }
    }
    return best;
}

/* Moves the first `n` held bytes to the output buffer. */
static int release(sd_stopstr *s, size_t n, const char **ret_out, size_t *ret_len)
{
    if (grow(&s->out, &s->cap_out, n + 1) < 0)
        return SD_ENOMEM;
    memcpy(s->out, s->held, n);
    s->out[n] = '\0';
    memmove(s->held, s->held + n, s->n_held - n);
    s->n_held -= n;
    *ret_out = s->out;
    *ret_len = n;
    return 0;
}

int sd_stopstr_push(sd_stopstr *s, const char *text, size_t len, int final, const char **ret_out,
                    size_t *ret_len)
{
    *ret_out = "";
    *ret_len = 0;
    if (s->matched)
        return 1;
    if (grow(&s->held, &s->cap_held, s->n_held + len + 1) < 0)
        return SD_ENOMEM;
    memcpy(s->held + s->n_held, text, len);
    s->n_held += len;
    long m = first_match(s);
    if (m >= 0) {
        int rc = release(s, (size_t)m, ret_out, ret_len);
        if (rc < 0)
            return rc;
        s->n_held = 0;
        s->matched = 1;
        return 1;
    }
    size_t keep = final ? 0 : partial_tail(s);
    int rc = release(s, s->n_held - keep, ret_out, ret_len);
    return rc < 0 ? rc : 0;
}
