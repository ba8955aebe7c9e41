/* tune_cache: the JSON file of the CUDA backend's tuning decisions (engine/tune_cache.h).
 *
 *   {"format": 1, "key": "...",
 *    "kernels": [{"dense": 0, "n": 2, "m": 4, "B": 1, "y_bf16": 0, "accumulate": 0,
 *                 "rows": 6144, "cols": 4096, "rows_per_warp": 103, "split": 1}, ...],
 *    "paths": [{"rows": 6144, "cols": 4096, "B": 1, "dense": 0, "m": 4, "acc": 0,
 *               "use_blas": 0, "ms_kernel": 0.0117, "ms_blas": 0.0577,
 *               "use_cslt": 0, "ms_cslt": 0, "use_nm_gemm": 0, "ms_nm_gemm": 0}, ...]}
 *
 * "use_cslt" / "ms_cslt" and "use_nm_gemm" / "ms_nm_gemm" came later: a file without a pair reads
 * as 0 (that path not timed).
 *
 * Objects with named fields rather than arrays of numbers: an operator can read the file and
 * see what each problem runs. */
#include "engine/tune_cache.h"

#include "engine/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* ---- writing ---- */

static json_t *kernel_json(const sd_nm_tuned *e)
{
    return json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:i, s:i}", "dense", e->dense, "n", e->n, "m",
                     e->m, "B", e->B, "y_bf16", e->y_bf16, "accumulate", e->accumulate, "rows",
                     (json_int_t)e->rows, "cols", (json_int_t)e->cols, "rows_per_warp", e->rows_per_warp,
                     "split", e->split);
}

static json_t *path_json(const sd_tune_path *p)
{
    return json_pack("{s:I, s:I, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:i, s:f, s:i, s:f}", "rows",
                     (json_int_t)p->rows, "cols", (json_int_t)p->cols, "B", p->B, "dense", p->dense, "m",
                     p->m, "acc", p->acc, "use_blas", p->use_blas, "ms_kernel", (double)p->ms_kernel,
                     "ms_blas", (double)p->ms_blas, "use_cslt", p->use_cslt, "ms_cslt", (double)p->ms_cslt,
                     "use_nm_gemm", p->use_nm_gemm, "ms_nm_gemm", (double)p->ms_nm_gemm);
}

static json_t *cache_json(const sd_tune_cache *c)
{
    json_t *ks = json_array(), *ps = json_array();
    int bad = !ks || !ps;
    for (int i = 0; !bad && i < c->n_kernels; i++)
        bad = json_array_append_new(ks, kernel_json(&c->kernels[i])) != 0;
    for (int i = 0; !bad && i < c->n_paths; i++)
        bad = json_array_append_new(ps, path_json(&c->paths[i])) != 0;
    if (bad) {
        json_decref(ks);
        json_decref(ps);
        return NULL;
    }
    return json_pack("{s:i, s:s, s:o, s:o}", "format", SD_TUNE_CACHE_FORMAT, "key", c->key, "kernels", ks,
                     "paths", ps);
}

int sd_tune_cache_save(const char *path, const sd_tune_cache *c, sd_diag *d)
{
    json_t *j = cache_json(c);
    char *text = j ? json_dumps(j, JSON_INDENT(1)) : NULL;
    json_decref(j);
    if (!text)
        return sd_diag_set(d, SD_ENOMEM, "tune cache %s: out of memory", path);
    int rc = sd_write_atomic(path, text, d);
    free(text);
    return rc;
}

/* ---- reading ---- */

/* Integer field `name` of object o into *v, within [lo, hi]. */
static int get_int(const char *path, const char *what, int i, json_t *o, const char *name, int64_t lo,
                   int64_t hi, int64_t *v, sd_diag *d)
{
    json_t *f = json_object_get(o, name);
    if (!json_is_integer(f) || json_integer_value(f) < lo || json_integer_value(f) > hi)
        return sd_diag_set(d, SD_EFORMAT, "tune cache %s: %s[%d].%s: an integer in [%lld, %lld] expected",
                           path, what, i, name, (long long)lo, (long long)hi);
    *v = json_integer_value(f);
    return 0;
}

static int get_ms(const char *path, int i, json_t *o, const char *name, float *v, sd_diag *d)
{
    json_t *f = json_object_get(o, name);
    if (!json_is_number(f) || json_number_value(f) < 0 || json_number_value(f) > 1e6)
        return sd_diag_set(d, SD_EFORMAT, "tune cache %s: paths[%d].%s: a time in ms expected", path, i,
                           name);
    *v = (float)json_number_value(f);
    return 0;
}

#define I64_MAX_DIM ((int64_t)1 << 40)

static int read_kernel(const char *path, int i, json_t *o, sd_nm_tuned *e, sd_diag *d)
{
    int64_t v[10];
    static const char *names[10] = {"dense",         "n",    "m", "B", "y_bf16", "accumulate", "rows", "cols",
                                    "rows_per_warp", "split"};
    static const int64_t hi[10] = {1, 32, 32, 1 << 20, 1, 1, I64_MAX_DIM, I64_MAX_DIM, 1 << 20, 1 << 20};
    static const int64_t lo[10] = {0, 0, 0, 1, 0, 0, 1, 1, 1, 1};
    for (int k = 0; k < 10; k++)
        SD_TRY(get_int(path, "kernels", i, o, names[k], lo[k], hi[k], &v[k], d));
    *e = (sd_nm_tuned){(int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4],
                       (int)v[5], v[6],      v[7],      (int)v[8], (int)v[9]};
    return 0;
}

/* An optional (use_X, ms_X) pair of a path entry: both, or neither (0, 0: not timed). */
static int get_opt_path(const char *path, int i, json_t *o, const char *use, const char *ms, int *u, float *t,
                        sd_diag *d)
{
    *u = 0, *t = 0.f;
    if (!json_object_get(o, use) && !json_object_get(o, ms))
        return 0; /* a file from before that path was timed */
    int64_t v = 0;
    SD_TRY(get_int(path, "paths", i, o, use, 0, 1, &v, d));
    *u = (int)v;
    return get_ms(path, i, o, ms, t, d);
}

static int read_path(const char *path, int i, json_t *o, sd_tune_path *p, sd_diag *d)
{
    int64_t v[7];
    static const char *names[7] = {"rows", "cols", "B", "dense", "m", "acc", "use_blas"};
    static const int64_t hi[7] = {I64_MAX_DIM, I64_MAX_DIM, 1 << 20, 1, 32, 1, 1};
    static const int64_t lo[7] = {1, 1, 1, 0, 0, 0, 0};
    for (int k = 0; k < 7; k++)
        SD_TRY(get_int(path, "paths", i, o, names[k], lo[k], hi[k], &v[k], d));
    *p = (sd_tune_path){v[0], v[1], (int)v[2], (int)v[3], (int)v[4], (int)v[5], (int)v[6],
                        0.f,  0.f,  0,         0.f,       0,         0.f};
    SD_TRY(get_ms(path, i, o, "ms_kernel", &p->ms_kernel, d));
    SD_TRY(get_ms(path, i, o, "ms_blas", &p->ms_blas, d));
    SD_TRY(get_opt_path(path, i, o, "use_cslt", "ms_cslt", &p->use_cslt, &p->ms_cslt, d));
    return get_opt_path(path, i, o, "use_nm_gemm", "ms_nm_gemm", &p->use_nm_gemm, &p->ms_nm_gemm, d);
}

/* The array field `name` of root: its length, checked against a sane bound. */
static int get_array(const char *path, json_t *root, const char *name, json_t **arr, int *n, sd_diag *d)
{
    *arr = json_object_get(root, name);
    if (!json_is_array(*arr) || json_array_size(*arr) > 1u << 16)
        return sd_diag_set(d, SD_EFORMAT, "tune cache %s: \"%s\": an array (at most 65536 entries) expected",
                           path, name);
    *n = (int)json_array_size(*arr);
    return 0;
}

static int read_cache(const char *path, json_t *root, sd_tune_cache *c, sd_diag *d)
{
    json_t *fmt = json_object_get(root, "format"), *key = json_object_get(root, "key"), *ks, *ps;
    if (!json_is_integer(fmt) || json_integer_value(fmt) != SD_TUNE_CACHE_FORMAT)
        return sd_diag_set(d, SD_EFORMAT, "tune cache %s: \"format\": %d expected", path,
                           SD_TUNE_CACHE_FORMAT);
    if (!json_is_string(key) || strlen(json_string_value(key)) >= SD_TUNE_KEY_MAX)
        return sd_diag_set(d, SD_EFORMAT, "tune cache %s: \"key\": a string expected", path);
    snprintf(c->key, sizeof c->key, "%s", json_string_value(key));
    int nk, np;
    SD_TRY(get_array(path, root, "kernels", &ks, &nk, d));
    SD_TRY(get_array(path, root, "paths", &ps, &np, d));
    c->kernels = calloc((size_t)nk + 1, sizeof *c->kernels);
    c->paths = calloc((size_t)np + 1, sizeof *c->paths);
    if (!c->kernels || !c->paths)
        return sd_diag_set(d, SD_ENOMEM, "tune cache %s: out of memory", path);
    for (int i = 0; i < nk; i++, c->n_kernels++)
        SD_TRY(read_kernel(path, i, json_array_get(ks, (size_t)i), &c->kernels[i], d));
    for (int i = 0; i < np; i++, c->n_paths++)
        SD_TRY(read_path(path, i, json_array_get(ps, (size_t)i), &c->paths[i], d));
    return 0;
}

int sd_tune_cache_load(const char *path, sd_tune_cache *c, sd_diag *d)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? sd_diag_set(d, SD_ENOTFOUND, "tune cache %s: no such file", path)
                               : sd_diag_set(d, SD_EIO, "tune cache %s: %s", path, strerror(errno));
    json_error_t err;
    json_t *root = json_loadf(f, 0, &err);
    fclose(f);
    if (!root)
        return sd_diag_set(d, SD_EFORMAT, "tune cache %s: line %d: %s", path, err.line, err.text);
    int rc = json_is_object(root) ? read_cache(path, root, c, d)
                                  : sd_diag_set(d, SD_EFORMAT, "tune cache %s: an object expected", path);
    json_decref(root);
    if (rc)
        sd_tune_cache_free(c);
    return rc;
}

void sd_tune_cache_free(sd_tune_cache *c)
{
    if (!c)
        return;
    free(c->kernels);
    free(c->paths);
    memset(c, 0, sizeof *c);
}
