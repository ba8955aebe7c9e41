/* fuzz_util: helpers shared by the libFuzzer targets (inputs as files, NUL-terminated copies). */
#ifndef SD_FUZZ_UTIL_H
#define SD_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A loader that only takes a path gets the input through an anonymous memory file:
 * no disk traffic, no temp files left behind if the fuzzer dies. */
typedef struct sd_fuzz_file {
    int fd;
    char path[64]; /* /proc/self/fd/N */
} sd_fuzz_file;

static inline int sd_fuzz_file_open(sd_fuzz_file *f, const uint8_t *data, size_t n)
{
    f->fd = memfd_create("sd-fuzz", 0);
    if (f->fd < 0)
        return -1;
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(f->fd, data + off, n - off);
        if (w <= 0) {
            close(f->fd);
            return -1;
        }
        off += (size_t)w;
    }
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
    return 0;
}

static inline void sd_fuzz_file_close(sd_fuzz_file *f)
{
    close(f->fd);
}

/* A NUL-terminated heap copy, so that an overread past `n` is an ASan report, not luck. */
static inline char *sd_fuzz_strndup(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, data, n);
        s[n] = 0;
    }
    return s;
}

/* Splits the input at its first NUL byte: [0, *n1) and the rest (NULL if no NUL). */
static inline const uint8_t *sd_fuzz_split(const uint8_t *data, size_t n, size_t *n1)
{
    const uint8_t *z = memchr(data, 0, n);
    *n1 = z ? (size_t)(z - data) : n;
    return z ? z + 1 : NULL;
}

/* An asset path from the environment, else a default relative to the repository root. */
static inline const char *sd_fuzz_asset(const char *env, const char *dflt)
{
    const char *p = getenv(env);
    return p && *p ? p : dflt;
}

#endif
