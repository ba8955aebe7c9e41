/* auth: the API-key set for /v1 requests ("Authorization: Bearer KEY"), swappable at run
 * time (SIGHUP) while HTTP threads check it. Keys are never logged. */
#ifndef SD_AUTH_H
#define SD_AUTH_H

#include "engine/diag.h"

typedef struct sd_auth sd_auth;

int sd_auth_init(sd_auth **ret);
void sd_auth_free(sd_auth *a);

/* Replaces the key set with copies of keys[0..n). n == 0 turns authentication off. */
int sd_auth_set_keys(sd_auth *a, char *const *keys, int n);
int sd_auth_count(sd_auth *a);
/* 1 if the set is empty (auth off) or `header` is "Bearer <a key>"; 0 otherwise.
 * header may be NULL. Comparison time does not depend on where the key differs. */
int sd_auth_check(sd_auth *a, const char *header);

#endif
