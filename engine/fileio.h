/* fileio: writing a small file so that a crash leaves the old content or the new, never a mix —
 * shared by the admin job records (server/jobs.c) and the tuning cache (engine/tune_cache.c). */
#ifndef SD_FILEIO_H
#define SD_FILEIO_H

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes text to path: a temporary file beside it (".NAME.tmp.PID", so that two writers never
 * share one, and hidden from scans for *.json), fsync, rename over path, fsync of the directory.
 * SD_EIO naming the path and the reason; the temporary file is removed on failure. */
int sd_write_atomic(const char *path, const char *text, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
