/* auth: API-key set behind a mutex, constant-time comparison of bearer tokens. */
#include "server/auth.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct sd_auth {
    pthread_mutex_t mu;
    char **keys; /* [n] */
    int n;
};

int sd_auth_init(sd_auth **ret)
{
    sd_auth *a = calloc(1, sizeof *a);
    if (!a)
        return SD_ENOMEM;
    pthread_mutex_init(&a->mu, NULL);
    *ret = a;
    return 0;
}

static void free_keys(char **k, int n)
{
    for (int i = 0; i < n; i++) {
        if (k[i]) /* wipe secrets before returning memory */
            memset(k[i], 0, strlen(k[i]));
        free(k[i]);
    }
    free(k);
}

void sd_auth_free(sd_auth *a)
{
    if (!a)
        return;
    free_keys(a->keys, a->n);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

int sd_auth_set_keys(sd_auth *a, char *const *keys, int n)
{
    char **k = n > 0 ? calloc((size_t)n, sizeof *k) : NULL;
    if (n > 0 && !k)
        return SD_ENOMEM;
    for (int i = 0; i < n; i++)
        if (!(k[i] = strdup(keys[i]))) {
            free_keys(k, i);
            return SD_ENOMEM;
        }
    pthread_mutex_lock(&a->mu);
    char **old = a->keys;
    int old_n = a->n;
    a->keys = k;
    a->n = n > 0 ? n : 0;
    pthread_mutex_unlock(&a->mu);
    free_keys(old, old_n);
    return 0;
}

int sd_auth_count(sd_auth *a)
{
    pthread_mutex_lock(&a->mu);
    int n = a->n;
    pthread_mutex_unlock(&a->mu);
    return n;
}

/* Compares without an early exit on the first differing byte. */
static int ct_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    unsigned char diff = alen != blen;
    size_t n = alen < blen ? alen : blen;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

int sd_auth_check(sd_auth *a, const char *header)
{
    pthread_mutex_lock(&a->mu);
    int ok = a->n == 0;
    if (!ok && header && !strncasecmp(header, "Bearer ", 7)) {
        const char *tok = header + 7;
        while (*tok == ' ')
            tok++;
        size_t tl = strlen(tok);
        while (tl > 0 && tok[tl - 1] == ' ')
            tl--;
        for (int i = 0; i < a->n; i++)
            ok |= ct_equal(tok, tl, a->keys[i], strlen(a->keys[i]));
    }
    pthread_mutex_unlock(&a->mu);
    return ok;
}
