/* results/2026-12-05-s30/cpu: how long sd_jschema_compile takes on adversarial patterns (README there). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "engine/jschema.h"
int main(void) {
    const char *pats[] = {
        "{\"type\":\"string\",\"pattern\":\"(a|b)*a(a|b){12}\"}",
        "{\"type\":\"string\",\"pattern\":\"[a-z0-9]{40}x[a-z0-9]{20}\"}",
        "{\"type\":\"string\",\"pattern\":\"(a[0-9]{60}){30}\"}",
        "{\"type\":\"string\",\"pattern\":\"^(x{64}y{64}){15}$\"}",
        "{\"type\":\"string\",\"pattern\":\"(.{60}a){30}\"}",
        "{\"type\":\"string\",\"pattern\":\"^(a[0-9]{30}){30}$\"}",
        "{\"type\":\"string\",\"pattern\":\"[a-f]{8}-[a-f]{4}-[a-f]{4}-[a-f]{12}\"}",
        "{\"type\":\"string\",\"pattern\":\"^(.{64}){15}$\"}",
    };
    for (int i = 0; i < (int)(sizeof pats / sizeof pats[0]); i++) {
        struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
        sd_jschema *s = NULL; sd_diag d = {0};
        int rc = sd_jschema_compile(&s, pats[i], strlen(pats[i]), &d);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("%s rc %d %.1f ms %s\n", pats[i], rc, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6, d.msg);
        sd_jschema_free(s);
    }
}
