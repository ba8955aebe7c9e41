/* checkpoint: a Hugging Face model directory (config.json + single or sharded
 * safetensors), dense or sparse-bitmask, with name lookup over all its shards. */
#ifndef SD_CHECKPOINT_H
#define SD_CHECKPOINT_H

#include "model_config.h"
#include "safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_ckpt sd_ckpt;

/* Opens `dir`: parses config.json, then model.safetensors.index.json if present (every
 * shard it names must exist and hold the tensors the index says) else model.safetensors.
 * Tensors are mmap'd, not copied. */
int sd_ckpt_open(sd_ckpt **ret, const char *dir, sd_diag *d);
void sd_ckpt_free(sd_ckpt *c);

const sd_model_config *sd_ckpt_config(const sd_ckpt *c);
const char *sd_ckpt_dir(const sd_ckpt *c);

/* NULL if absent. */
const sd_tensor_view *sd_ckpt_find(const sd_ckpt *c, const char *name);

/* Looks a tensor up and checks it: its dtype must be one of the bits in `dtypes`
 * (1u << SD_DT_*), its rank `ndim` and its shape `shape` (entries < 0 match anything).
 * SD_ENOTFOUND / SD_EFORMAT with a message naming the file and tensor otherwise. */
int sd_ckpt_get(const sd_ckpt *c, const char *name, unsigned dtypes, int ndim, const int64_t *shape,
                const sd_tensor_view **ret, sd_diag *d);

size_t sd_ckpt_count(const sd_ckpt *c);
const sd_tensor_view *sd_ckpt_at(const sd_ckpt *c, size_t i);

/* A "__metadata__" value from the first shard that has `key`, or NULL. */
const char *sd_ckpt_metadata(const sd_ckpt *c, const char *key);

#ifdef __cplusplus
}
#endif
#endif
