/* diag: the project's error codes and the detail message that travels with them.
 *
 * Every fallible function returns 0 or a negative SD_E* code. Functions that can say
 * more than a code take an `sd_diag *` (may be NULL) and fill it with a one-line message
 * naming the file, tensor or field at fault. Outputs stay untouched on failure. */
#ifndef SD_DIAG_H
#define SD_DIAG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SD_ERRNO_MAP(X)                                                                                      \
    X(SD_OK, 0, "success")                                                                                   \
    X(SD_ENOMEM, -1, "out of memory")                                                                        \
    X(SD_EIO, -2, "input/output error")                                                                      \
    X(SD_EFORMAT, -3, "malformed file")                                                                      \
    X(SD_EINVAL, -4, "invalid argument")                                                                     \
    X(SD_ENOTSUP, -5, "not supported")                                                                       \
    X(SD_ENOTFOUND, -6, "not found")                                                                         \
    X(SD_ECUDA, -7, "CUDA error")                                                                            \
    X(SD_ENCCL, -8, "NCCL error")                                                                            \
    X(SD_EFULL, -9, "capacity exhausted")                                                                    \
    X(SD_ECANCEL, -10, "cancelled")                                                                          \
    X(SD_ERANGE, -11, "value out of range")                                                                  \
    X(SD_ENODEV, -12, "no GPU device")

enum {
#define SD__ERR_ENUM(name, val, msg) name = val,
    SD_ERRNO_MAP(SD__ERR_ENUM)
#undef SD__ERR_ENUM
};

#define SD_DIAG_MSG_MAX 512

typedef struct sd_diag {
    int code;                  /* the code last set, 0 if none */
    char msg[SD_DIAG_MSG_MAX]; /* one line, no trailing newline */
} sd_diag;

/* Returns a static string for a code; unknown codes give "unknown error". */
const char *sd_strerror(int code);

/* Sets d->code and a printf-formatted message (if d is non-NULL); returns code, so that
 * `return sd_diag_set(d, SD_EFORMAT, "%s: ...", path);` reads naturally. */
int sd_diag_set(sd_diag *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefixes the existing message with a formatted context ("loading X: <old msg>"). */
int sd_diag_wrap(sd_diag *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The message if set, else sd_strerror(code). Never NULL. */
const char *sd_diag_str(const sd_diag *d, int code);

/* Returns from the calling function with `call`'s code when it is not 0. */
#define SD_TRY(call)                                                                                         \
    do {                                                                                                     \
        int rc_ = (call);                                                                                    \
        if (rc_)                                                                                             \
            return rc_;                                                                                      \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
