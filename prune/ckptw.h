/* ckptw: the bitmask checkpoint writer — collects dense and bitmask tensors, writes one
 * model.safetensors (with sparsity.* metadata) plus side files into `<out>.tmp-XXXXXX`,
 * fsyncs every file and the directory, then renames it to `<out>`: a crash never leaves a
 * directory named `<out>` that is half written. Format: docs/checkpoint-format.md. */
#ifndef SD_CKPTW_H
#define SD_CKPTW_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "engine/diag.h"
#include "engine/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_ckptw sd_ckptw;

/* Creates the temporary directory beside `out_dir`. `out_dir` must not exist yet (SD_EINVAL
 * naming it otherwise: a checkpoint is never overwritten in place). */
int sd_ckptw_open(sd_ckptw **ret, const char *out_dir, sd_diag *d);
/* Removes the temporary directory unless committed. NULL is a no-op. */
void sd_ckptw_free(sd_ckptw *w);

/* A tensor written as is. `data` ([shape] of dtype, nbytes) is borrowed: it must stay valid
 * until commit. */
int sd_ckptw_add(sd_ckptw *w, const char *name, sd_dtype dt, int ndim, const int64_t *shape, const void *data,
                 size_t nbytes, sd_diag *d);

/* A pruned linear `base` ("model.layers.0.mlp.up_proj"): values bf16 [rows, cols/2] and mask
 * u32 [rows, cols/32], both malloc'd and owned by the writer from here on (freed even on
 * failure); pattern "2:4" ... or "unstructured" goes to the metadata and sparsity.json. */
int sd_ckptw_add_bitmask(sd_ckptw *w, const char *base, int64_t rows, int64_t cols, uint16_t *values,
                         uint32_t *mask, const char *pattern, sd_diag *d);

/* Streaming (a large job need not hold its pruned linears until the end): reserve each pruned
 * linear in its file place among the sd_ckptw_add calls, then sd_ckptw_start writes the header
 * and every tensor given so far, and sd_ckptw_fill_bitmask writes a reserved linear's bytes in
 * place (any order, before commit; values and mask stay the caller's). Nothing can be added
 * after the start; commit fails if a reserved linear was never filled. The file's bytes are
 * those that sd_ckptw_add_bitmask with the same data would give. */
int sd_ckptw_reserve_bitmask(sd_ckptw *w, const char *base, int64_t rows, int64_t cols, const char *pattern,
                             sd_diag *d);
int sd_ckptw_start(sd_ckptw *w, sd_diag *d);
/* values bf16 [rows, cols/2], mask u32 [rows, cols/32] of the reserved linear `base`. */
int sd_ckptw_fill_bitmask(sd_ckptw *w, const char *base, const uint16_t *values, const uint32_t *mask,
                          sd_diag *d);

/* Copies src_dir/name into the checkpoint; a missing file is skipped unless `required`. */
int sd_ckptw_copy_file(sd_ckptw *w, const char *src_dir, const char *name, int required, sd_diag *d);

/* Writes model.safetensors and sparsity.json (format, tensors, and `provenance`, borrowed),
 * fsyncs, renames to out_dir and fsyncs its parent. */
int sd_ckptw_commit(sd_ckptw *w, json_t *provenance, sd_diag *d);

/* SHA-256 (lowercase hex) over the .safetensors files of `dir` in name order — one file's
 * hash for a single-file checkpoint. Stops with SD_ECANCEL once *stop or *cancel (either may be
 * NULL) is set. */
int sd_ckptw_hash_dir(const char *dir, char hex[65], const volatile int *stop, const volatile int *cancel,
                      sd_diag *d);

/* SHA-256 of a buffer (lowercase hex). */
void sd_ckptw_sha256_hex(const void *data, size_t n, char hex[65]);

#ifdef __cplusplus
}
#endif
#endif
