/* safetensors: mmap of one .safetensors file and validation of its untrusted header. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_NAME 1024 /* longer tensor names are refused: no real checkpoint comes close */

typedef struct st_meta {
    char *key, *value;
} st_meta;

struct sd_st_file {
    char *path;
    int fd;
    void *map; /* [map_len] read-only mapping of the whole file */
    size_t map_len;
    sd_tensor_view *tensors; /* [n] in header order */
    size_t n;
    size_t *by_name; /* [n] indices into tensors, sorted by name, for bsearch */
    st_meta *meta;   /* [n_meta] the __metadata__ map */
    size_t n_meta;
    void **copies; /* [n] malloc'd aligned copies of misaligned tensors, else NULL */
};

static int st_fail(sd_diag *d, const char *path, const char *tensor, const char *fmt, const char *what)
{
    if (tensor)
        return sd_diag_set(d, SD_EFORMAT, "%s: tensor '%.200s': %s%s", path, tensor, fmt, what ? what : "");
    return sd_diag_set(d, SD_EFORMAT, "%s: %s%s", path, fmt, what ? what : "");
}

/* Reads a JSON integer in [0, INT64_MAX]; 0 on success. */
static int json_nonneg(const json_t *v, int64_t *ret)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *ret = (int64_t)json_integer_value(v);
    return 0;
}

/* product(shape) * elem_size without overflow; -1 if it does not fit in size_t/int64. */
static int shape_bytes(const int64_t *shape, int ndim, size_t elem, size_t *ret)
{
    uint64_t n = elem;
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) { /* a zero dim makes any other dim harmless */
            *ret = 0;
            return 0;
        }
    for (int i = 0; i < ndim; i++) {
        uint64_t s = (uint64_t)shape[i];
        if (s != 0 && n > (uint64_t)INT64_MAX / s)
            return -1;
        n *= s;
    }
    *ret = (size_t)n;
    return 0;
}

/* Fills t from one header entry; begin/end are the data_offsets. */
static int st_parse_entry(const char *path, const char *name, json_t *e, size_t data_len, sd_tensor_view *t,
                          uint64_t *ret_begin, sd_diag *d)
{
    if (strlen(name) == 0 || strlen(name) > ST_MAX_NAME)
        return st_fail(d, path, NULL, "tensor name empty or longer than 1024 bytes", NULL);
    if (!json_is_object(e))
        return st_fail(d, path, name, "entry is not an object", NULL);
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape");
    json_t *jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd))
        return st_fail(d, path, name, "missing or non-string \"dtype\"", NULL);
    t->dtype = sd_dtype_parse(json_string_value(jd), json_string_length(jd));
    if (t->dtype == SD_DT_INVALID)
        return st_fail(d, path, name, "unknown dtype ", json_string_value(jd));
    if (!json_is_array(js) || json_array_size(js) > SD_ST_MAX_DIMS)
        return st_fail(d, path, name, "\"shape\" is not an array of at most 8 dims", NULL);
    t->ndim = (int)json_array_size(js);
    for (int i = 0; i < t->ndim; i++)
        if (json_nonneg(json_array_get(js, (size_t)i), &t->shape[i]))
            return st_fail(d, path, name, "\"shape\" has a negative or non-integer dim", NULL);
    int64_t b, en;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || json_nonneg(json_array_get(jo, 0), &b) ||
        json_nonneg(json_array_get(jo, 1), &en))
        return st_fail(d, path, name, "\"data_offsets\" is not [begin, end] of non-negative integers", NULL);
    if (b > en)
        return st_fail(d, path, name, "data_offsets begin > end", NULL);
    if ((uint64_t)en > data_len)
        return st_fail(d, path, name, "data_offsets end beyond the end of the file", NULL);
    size_t want;
    if (shape_bytes(t->shape, t->ndim, sd_dtype_size(t->dtype), &want))
        return st_fail(d, path, name, "shape x dtype size overflows", NULL);
    if (want != (uint64_t)(en - b))
        return sd_diag_set(d, SD_EFORMAT,
                           "%s: tensor '%.200s': %lld bytes in data_offsets, shape x dtype needs %zu", path,
                           name, (long long)(en - b), want);
    t->nbytes = want;
    *ret_begin = (uint64_t)b;
    return 0;
}

static int st_parse_metadata(sd_st_file *f, json_t *m, sd_diag *d)
{
    if (!json_is_object(m))
        return st_fail(d, f->path, NULL, "__metadata__ is not an object", NULL);
    f->meta = calloc(json_object_size(m) + 1, sizeof *f->meta);
    if (!f->meta)
        return sd_diag_set(d, SD_ENOMEM, "%s: out of memory", f->path);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v)
    {
        if (!json_is_string(v))
            return st_fail(d, f->path, NULL, "__metadata__ value is not a string: key ", k);
        st_meta *e = &f->meta[f->n_meta];
        e->key = strdup(k);
        e->value = strdup(json_string_value(v));
        f->n_meta++;
        if (!e->key || !e->value)
            return sd_diag_set(d, SD_ENOMEM, "%s: out of memory", f->path);
    }
    return 0;
}

typedef struct st_span {
    uint64_t begin, end;
    size_t idx;
} st_span;

static int span_cmp(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Sorting indices by name needs the tensor table; qsort has no context argument, so the
 * indices are sorted through an array of (name, idx) pairs instead of global state. */
typedef struct st_name_idx {
    const char *name;
    size_t idx;
} st_name_idx;

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const st_name_idx *)a)->name, ((const st_name_idx *)b)->name);
}

/* Checks for overlaps between non-empty tensors and builds the by-name index (which
 * also catches duplicate names, in case the JSON parser let one through). */
static int st_check_layout(sd_st_file *f, const uint64_t *begins, sd_diag *d)
{
    int rc = 0;
    st_span *sp = malloc((f->n + 1) * sizeof *sp);
    st_name_idx *ni = malloc((f->n + 1) * sizeof *ni);
    f->by_name = malloc((f->n + 1) * sizeof *f->by_name);
    if (!sp || !ni || !f->by_name) {
        rc = sd_diag_set(d, SD_ENOMEM, "%s: out of memory", f->path);
        goto out;
    }
    for (size_t i = 0; i < f->n; i++) {
        sp[i] = (st_span){begins[i], begins[i] + f->tensors[i].nbytes, i};
        ni[i] = (st_name_idx){f->tensors[i].name, i};
    }
    qsort(sp, f->n, sizeof *sp, span_cmp);
    uint64_t end = 0;
    size_t last = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (sp[i].begin == sp[i].end)
            continue; /* zero-size tensors own no bytes */
        if (sp[i].begin < end) {
            rc = sd_diag_set(d, SD_EFORMAT, "%s: tensors '%.200s' and '%.200s' overlap", f->path,
                             f->tensors[last].name, f->tensors[sp[i].idx].name);
            goto out;
        }
        end = sp[i].end;
        last = sp[i].idx;
    }
    qsort(ni, f->n, sizeof *ni, name_cmp);
    for (size_t i = 0; i < f->n; i++) {
        if (i > 0 && strcmp(ni[i].name, ni[i - 1].name) == 0) {
            rc = st_fail(d, f->path, ni[i].name, "duplicate tensor name", NULL);
            goto out;
        }
        f->by_name[i] = ni[i].idx;
    }
out:
    free(sp);
    free(ni);
    return rc;
}

/* Points each view at its bytes; a tensor not aligned to its element size (legal in the
 * format, rare in practice) gets an aligned heap copy so that readers may cast freely. */
static int st_bind_data(sd_st_file *f, const unsigned char *data, const uint64_t *begins, sd_diag *d)
{
    f->copies = calloc(f->n + 1, sizeof *f->copies);
    if (!f->copies)
        return sd_diag_set(d, SD_ENOMEM, "%s: out of memory", f->path);
    for (size_t i = 0; i < f->n; i++) {
        sd_tensor_view *t = &f->tensors[i];
        const unsigned char *p = data + begins[i];
        if ((uintptr_t)p % sd_dtype_size(t->dtype) != 0) {
            f->copies[i] = malloc(t->nbytes ? t->nbytes : 1);
            if (!f->copies[i])
                return sd_diag_set(d, SD_ENOMEM, "%s: out of memory copying '%.200s'", f->path, t->name);
            memcpy(f->copies[i], p, t->nbytes);
            p = f->copies[i];
        }
        t->data = p;
    }
    return 0;
}

static int st_parse_header(sd_st_file *f, const char *json, size_t len, size_t data_len, sd_diag *d)
{
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return sd_diag_set(d, SD_EFORMAT, "%s: header JSON: %s (at byte %d)", f->path, err.text,
                           err.position);
    int rc = 0;
    uint64_t *begins = NULL;
    if (!json_is_object(root)) {
        rc = st_fail(d, f->path, NULL, "header is not a JSON object", NULL);
        goto out;
    }
    size_t cap = json_object_size(root) + 1;
    f->tensors = calloc(cap, sizeof *f->tensors);
    begins = calloc(cap, sizeof *begins);
    if (!f->tensors || !begins) {
        rc = sd_diag_set(d, SD_ENOMEM, "%s: out of memory", f->path);
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (strcmp(k, "__metadata__") == 0) {
            if ((rc = st_parse_metadata(f, v, d)))
                goto out;
            continue;
        }
        sd_tensor_view *t = &f->tensors[f->n];
        if ((rc = st_parse_entry(f->path, k, v, data_len, t, &begins[f->n], d)))
            goto out;
        if (!(t->name = strdup(k))) {
            rc = sd_diag_set(d, SD_ENOMEM, "%s: out of memory", f->path);
            goto out;
        }
        t->file = f->path;
        f->n++;
    }
    if ((rc = st_check_layout(f, begins, d)))
        goto out;
    rc = st_bind_data(f, (const unsigned char *)f->map + 8 + len, begins, d);
out:
    free(begins);
    json_decref(root);
    return rc;
}

static int st_map(sd_st_file *f, sd_diag *d)
{
    f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return sd_diag_set(d, errno == ENOENT ? SD_ENOTFOUND : SD_EIO, "%s: %s", f->path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0)
        return sd_diag_set(d, SD_EIO, "%s: %s", f->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return sd_diag_set(d, SD_EIO, "%s: not a regular file", f->path);
    if (st.st_size < 8)
        return st_fail(d, f->path, NULL, "truncated: shorter than the 8-byte header length", NULL);
    f->map_len = (size_t)st.st_size;
    void *p = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, f->fd, 0);
    if (p == MAP_FAILED)
        return sd_diag_set(d, SD_EIO, "%s: mmap: %s", f->path, strerror(errno));
    f->map = p;
    close(f->fd); /* the mapping keeps the file alive */
    f->fd = -1;
    return 0;
}

int sd_st_open(sd_st_file **ret, const char *path, sd_diag *d)
{
    sd_st_file *f = calloc(1, sizeof *f);
    if (!f)
        return sd_diag_set(d, SD_ENOMEM, "%s: out of memory", path);
    f->fd = -1;
    int rc;
    if (!(f->path = strdup(path))) {
        rc = sd_diag_set(d, SD_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if ((rc = st_map(f, d)))
        goto fail;
    const unsigned char *b = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | b[i];
    if (hlen > SD_ST_MAX_HEADER) {
        rc = sd_diag_set(d, SD_EFORMAT, "%s: header length %llu exceeds the %u-byte limit", path,
                         (unsigned long long)hlen, SD_ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > f->map_len - 8) {
        rc = sd_diag_set(d, SD_EFORMAT, "%s: truncated: header length %llu but only %zu bytes follow", path,
                         (unsigned long long)hlen, f->map_len - 8);
        goto fail;
    }
    if ((rc = st_parse_header(f, (const char *)b + 8, (size_t)hlen, f->map_len - 8 - (size_t)hlen, d)))
        goto fail;
    *ret = f;
    return 0;
fail:
    sd_st_free(f);
    return rc;
}

void sd_st_free(sd_st_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; f->tensors && i < f->n; i++)
        free((char *)f->tensors[i].name);
    for (size_t i = 0; f->copies && i < f->n; i++)
        free(f->copies[i]);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->meta);
    free(f->copies);
    free(f->tensors);
    free(f->by_name);
    if (f->map)
        munmap(f->map, f->map_len);
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    free(f);
}

size_t sd_st_count(const sd_st_file *f)
{
    return f->n;
}

const sd_tensor_view *sd_st_at(const sd_st_file *f, size_t i)
{
    return i < f->n ? &f->tensors[i] : NULL;
}

const sd_tensor_view *sd_st_find(const sd_st_file *f, const char *name)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const sd_tensor_view *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *sd_st_metadata(const sd_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0)
            return f->meta[i].value;
    return NULL;
}
