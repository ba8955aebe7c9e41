/* safetensors: one mmap'd .safetensors file with a validated header. */
#ifndef SD_SAFETENSORS_H
#define SD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_ST_MAX_DIMS 8
#define SD_ST_MAX_HEADER (100u << 20) /* header JSON larger than this is refused */

typedef struct sd_tensor_view {
    const char *name; /* owned by the file/checkpoint that returned it */
    const char *file; /* path of the file holding the data */
    sd_dtype dtype;
    int ndim;
    int64_t shape[SD_ST_MAX_DIMS];
    const void *data; /* read-only mapping, valid while the owner lives */
    size_t nbytes;    /* == product(shape) * sd_dtype_size(dtype), checked at open */
} sd_tensor_view;

typedef struct sd_st_file sd_st_file;

/* Maps `path` and validates its header: size fits the file, JSON well formed, every
 * tensor's dtype known, offsets in bounds, ordered, non-overlapping and consistent with
 * shape x dtype. Errors name the file and the tensor. */
int sd_st_open(sd_st_file **ret, const char *path, sd_diag *d);
void sd_st_free(sd_st_file *f);

size_t sd_st_count(const sd_st_file *f);
/* i-th tensor in header order; i < sd_st_count(). */
const sd_tensor_view *sd_st_at(const sd_st_file *f, size_t i);
/* NULL if absent. */
const sd_tensor_view *sd_st_find(const sd_st_file *f, const char *name);
/* The "__metadata__" value for key, or NULL. */
const char *sd_st_metadata(const sd_st_file *f, const char *key);

#ifdef __cplusplus
}
#endif
#endif
