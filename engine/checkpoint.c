/* checkpoint: a model directory's config plus its single or sharded safetensors, indexed by name. */
#include "checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CK_MAX_INDEX (64u << 20) /* model.safetensors.index.json larger than this is refused */

struct sd_ckpt {
    char *dir;
    sd_model_config cfg;
    sd_st_file **shards; /* [n_shards] */
    size_t n_shards;
    const sd_tensor_view **views;  /* [n] in index (or header) order */
    const sd_tensor_view **sorted; /* [n] the same, sorted by name */
    size_t n;
};

static int view_cmp(const void *a, const void *b)
{
    return strcmp((*(const sd_tensor_view *const *)a)->name, (*(const sd_tensor_view *const *)b)->name);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Adds a shard by file name (opened once however many tensors name it); returns its index. */
static int ck_shard(sd_ckpt *c, char **names, const char *fname, size_t *ret, sd_diag *d)
{
    for (size_t i = 0; i < c->n_shards; i++)
        if (strcmp(names[i], fname) == 0) {
            *ret = i;
            return 0;
        }
    if (!fname[0] || strchr(fname, '/') || strchr(fname, '\\') || strcmp(fname, ".") == 0 ||
        strcmp(fname, "..") == 0)
        return sd_diag_set(d, SD_EFORMAT,
                           "%s/model.safetensors.index.json: shard name '%.200s' is not a plain "
                           "file name in the model directory",
                           c->dir, fname);
    char *p = sd__path_join(c->dir, fname);
    if (!p || !(names[c->n_shards] = strdup(fname))) {
        free(p);
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    }
    int rc = sd_st_open(&c->shards[c->n_shards], p, d);
    free(p);
    if (rc) {
        free(names[c->n_shards]);
        return rc;
    }
    *ret = c->n_shards++;
    return 0;
}

static int ck_load_index_map(sd_ckpt *c, json_t *wm, const char *ipath, sd_diag *d)
{
    size_t n = json_object_size(wm);
    char **names = calloc(n + 1, sizeof *names);
    c->shards = calloc(n + 1, sizeof *c->shards);
    c->views = calloc(n + 1, sizeof *c->views);
    int rc = 0;
    if (!names || !c->shards || !c->views) {
        rc = sd_diag_set(d, SD_ENOMEM, "out of memory");
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(wm, k, v)
    {
        size_t si = 0;
        if (!json_is_string(v)) {
            rc = sd_diag_set(d, SD_EFORMAT, "%s: weight_map['%.200s'] is not a file name", ipath, k);
            goto out;
        }
        if ((rc = ck_shard(c, names, json_string_value(v), &si, d)))
            goto out;
        const sd_tensor_view *t = sd_st_find(c->shards[si], k);
        if (!t) {
            rc = sd_diag_set(d, SD_EFORMAT,
                             "%s: tensor '%.200s' is mapped to shard '%.200s', which does not hold it", ipath,
                             k, names[si]);
            goto out;
        }
        c->views[c->n++] = t;
    }
out:
    for (size_t i = 0; names && i < c->n_shards; i++)
        free(names[i]);
    free(names);
    return rc;
}

static int ck_load_index(sd_ckpt *c, const char *ipath, sd_diag *d)
{
    char *buf;
    size_t len;
    int rc = sd__file_read(ipath, CK_MAX_INDEX, &buf, &len, d);
    if (rc)
        return rc;
    json_error_t err;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    free(buf);
    if (!root)
        return sd_diag_set(d, SD_EFORMAT, "%s: JSON error at line %d: %s", ipath, err.line, err.text);
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm))
        rc = sd_diag_set(d, SD_EFORMAT, "%s: \"weight_map\" is missing or not an object", ipath);
    else if (json_object_size(wm) == 0)
        rc = sd_diag_set(d, SD_EFORMAT, "%s: \"weight_map\" is empty", ipath);
    else
        rc = ck_load_index_map(c, wm, ipath, d);
    json_decref(root);
    return rc;
}

static int ck_load_single(sd_ckpt *c, const char *path, sd_diag *d)
{
    c->shards = calloc(1, sizeof *c->shards);
    if (!c->shards)
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    int rc = sd_st_open(&c->shards[0], path, d);
    if (rc)
        return rc;
    c->n_shards = 1;
    size_t n = sd_st_count(c->shards[0]);
    if (!(c->views = calloc(n + 1, sizeof *c->views)))
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        c->views[c->n++] = sd_st_at(c->shards[0], i);
    return 0;
}

static int ck_load_tensors(sd_ckpt *c, sd_diag *d)
{
    char *ipath = sd__path_join(c->dir, "model.safetensors.index.json");
    char *spath = sd__path_join(c->dir, "model.safetensors");
    int rc;
    if (!ipath || !spath)
        rc = sd_diag_set(d, SD_ENOMEM, "out of memory");
    else if (access(ipath, F_OK) == 0)
        rc = ck_load_index(c, ipath, d);
    else if (access(spath, F_OK) == 0)
        rc = ck_load_single(c, spath, d);
    else
        rc = sd_diag_set(d, SD_ENOTFOUND,
                         "%s: neither model.safetensors nor model.safetensors.index.json found", c->dir);
    free(ipath);
    free(spath);
    if (rc)
        return rc;
    if (!(c->sorted = malloc((c->n + 1) * sizeof *c->sorted)))
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    memcpy(c->sorted, c->views, c->n * sizeof *c->sorted);
    qsort(c->sorted, c->n, sizeof *c->sorted, view_cmp);
    return 0;
}

int sd_ckpt_open(sd_ckpt **ret, const char *dir, sd_diag *d)
{
    sd_ckpt *c = calloc(1, sizeof *c);
    if (!c)
        return sd_diag_set(d, SD_ENOMEM, "out of memory");
    int rc;
    char *cpath = NULL;
    if (!(c->dir = strdup(dir)) || !(cpath = sd__path_join(dir, "config.json"))) {
        rc = sd_diag_set(d, SD_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = sd_model_config_load(&c->cfg, cpath, d)) || (rc = ck_load_tensors(c, d)))
        goto fail;
    free(cpath);
    *ret = c;
    return 0;
fail:
    free(cpath);
    sd_ckpt_free(c);
    return rc;
}

void sd_ckpt_free(sd_ckpt *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_shards; i++)
        sd_st_free(c->shards[i]);
    free(c->shards);
    free(c->views);
    free(c->sorted);
    free(c->dir);
    free(c);
}

const sd_model_config *sd_ckpt_config(const sd_ckpt *c)
{
    return &c->cfg;
}

const char *sd_ckpt_dir(const sd_ckpt *c)
{
    return c->dir;
}

const sd_tensor_view *sd_ckpt_find(const sd_ckpt *c, const char *name)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(name, c->sorted[mid]->name);
        if (r == 0)
            return c->sorted[mid];
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* "[256, 255]" into buf. */
static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && o < cap; i++) {
        if (shape[i] < 0)
            o += (size_t)snprintf(buf + o, cap - o, "%s*", i ? ", " : "");
        else
            o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    }
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

static void fmt_dtypes(char *buf, size_t cap, unsigned mask)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int dt = SD_DT_BF16; dt <= SD_DT_BOOL && o < cap; dt++)
        if (mask & (1u << dt))
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? "|" : "", sd_dtype_name((sd_dtype)dt));
}

int sd_ckpt_get(const sd_ckpt *c, const char *name, unsigned dtypes, int ndim, const int64_t *shape,
                const sd_tensor_view **ret, sd_diag *d)
{
    const sd_tensor_view *t = sd_ckpt_find(c, name);
    if (!t)
        return sd_diag_set(d, SD_ENOTFOUND, "%s: tensor '%.200s' not found", c->dir, name);
    const char *file = base_name(t->file);
    if (!(dtypes & (1u << t->dtype))) {
        char want[128];
        fmt_dtypes(want, sizeof want, dtypes);
        return sd_diag_set(d, SD_EFORMAT, "%s: tensor '%.200s' has dtype %s, expected %s", file, name,
                           sd_dtype_name(t->dtype), want);
    }
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = shape[i] < 0 || shape[i] == t->shape[i];
    if (!ok) {
        char have[160], want[160];
        fmt_shape(have, sizeof have, t->ndim, t->shape);
        fmt_shape(want, sizeof want, ndim, shape);
        return sd_diag_set(d, SD_EFORMAT, "%s: tensor '%.200s' has shape %s, expected %s", file, name, have,
                           want);
    }
    *ret = t;
    return 0;
}

size_t sd_ckpt_count(const sd_ckpt *c)
{
    return c->n;
}

const sd_tensor_view *sd_ckpt_at(const sd_ckpt *c, size_t i)
{
    return i < c->n ? c->views[i] : NULL;
}

const char *sd_ckpt_metadata(const sd_ckpt *c, const char *key)
{
    for (size_t i = 0; i < c->n_shards; i++) {
        const char *v = sd_st_metadata(c->shards[i], key);
        if (v)
            return v;
    }
    return NULL;
}
