/* stopstr: stop-string detection over streamed text with hold-back — text that could still
 * be the start of a stop string is kept until it can no longer match.
 *
 * Owned by one request on the engine thread; not thread-safe. */
#ifndef SD_STOPSTR_H
#define SD_STOPSTR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_stopstr {
    char **stops; /* [n] NUL-terminated copies, each non-empty */
    size_t *lens; /* [n] */
    int n;
    char *held; /* [n_held] text not yet released */
    size_t n_held, cap_held;
    char *out; /* [cap_out] the text released by the last push */
    size_t cap_out;
    int matched; /* 1 once a stop string was found; later pushes release nothing */
} sd_stopstr;

/* Copies `n` stop strings (each non-empty). Returns 0, SD_EINVAL for an empty string or
 * SD_ENOMEM; on failure `s` is left freeable. */
int sd_stopstr_init(sd_stopstr *s, const char *const *stops, int n);
void sd_stopstr_free(sd_stopstr *s);

/* Appends `len` bytes of text. *ret_out and *ret_len get the text released now (a pointer into
 * `s`, valid until the next push): everything before the first stop match, or everything
 * except the longest tail that is a proper prefix of some stop string. With `final`, all
 * remaining text is released (after the stop check). Returns 1 when a stop string matched
 * (the stop string and what follows are discarded), 0 otherwise, SD_ENOMEM on failure. */
int sd_stopstr_push(sd_stopstr *s, const char *text, size_t len, int final, const char **ret_out,
                    size_t *ret_len);

#ifdef __cplusplus
}
#endif
#endif
