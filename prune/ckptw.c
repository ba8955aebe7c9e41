/* ckptw: bitmask checkpoint writer — tensor list, safetensors serialisation, side files,
 * fsync and atomic rename. */
#include "prune/ckptw.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct wtensor {
    char *name;
    sd_dtype dt;
    int ndim;
    int64_t shape[4];
    const void *data;
    size_t nbytes;
    void *owned; /* freed with the writer, or NULL when borrowed */
    int pending; /* reserved: its bytes come with sd_ckptw_fill_bitmask */
    size_t off;  /* from the start of the data section */
} wtensor;

struct sd_ckptw {
    char *out;  /* final directory */
    char *tmp;  /* "<out>.tmp-XXXXXX" while not committed, else NULL */
    wtensor *t; /* [n] in file order */
    size_t n, cap;
    json_t *patterns; /* {"linear": "2:4", ...} */
    int fd;           /* model.safetensors once sd_ckptw_start wrote its header, else -1 */
    size_t data_at;   /* file offset of the data section (8 + header length) */
};

int sd_ckptw_open(sd_ckptw **ret, const char *out_dir, sd_diag *d)
{
    struct stat st;
    if (stat(out_dir, &st) == 0)
        return sd_diag_set(d, SD_EINVAL, "%s already exists; choose a new output directory", out_dir);
    sd_ckptw *w = calloc(1, sizeof *w);
    size_t len = strlen(out_dir);
    if (!w || !(w->out = strdup(out_dir)) || !(w->tmp = malloc(len + 16)) || !(w->patterns = json_object())) {
        sd_ckptw_free(w);
        return sd_diag_set(d, SD_ENOMEM, "checkpoint writer: out of memory");
    }
    w->fd = -1;
    while (len > 1 && w->out[len - 1] == '/')
        w->out[--len] = 0;
    snprintf(w->tmp, len + 16, "%s.tmp-XXXXXX", w->out);
    if (!mkdtemp(w->tmp)) {
        int e = errno;
        free(w->tmp);
        w->tmp = NULL;
        sd_ckptw_free(w);
        return sd_diag_set(d, SD_EIO, "cannot create a temporary directory beside %s: %s", out_dir,
                           strerror(e));
    }
    *ret = w;
    return 0;
}

static void rm_tree_flat(const char *dir)
{
    static const char *files[] = {"model.safetensors",      "sparsity.json",  "config.json",
                                  "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                  "chat_template.jinja"};
    char path[4096];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

void sd_ckptw_free(sd_ckptw *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp)
        rm_tree_flat(w->tmp);
    for (size_t i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].owned);
    }
    free(w->t);
    json_decref(w->patterns);
    free(w->tmp);
    free(w->out);
    free(w);
}

static int push(sd_ckptw *w, const char *name, sd_dtype dt, int ndim, const int64_t *shape, const void *data,
                size_t nbytes, void *owned, sd_diag *d)
{
    if (ndim < 0 || ndim > 4)
        return sd_diag_set(d, SD_EINVAL, "checkpoint writer: %s has %d dims", name, ndim);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t)
            return sd_diag_set(d, SD_ENOMEM, "checkpoint writer: out of memory");
        w->t = t;
        w->cap = cap;
    }
    wtensor *t = &w->t[w->n];
    *t = (wtensor){.dt = dt, .ndim = ndim, .data = data, .nbytes = nbytes, .owned = owned};
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    if (!(t->name = strdup(name)))
        return sd_diag_set(d, SD_ENOMEM, "checkpoint writer: out of memory");
    w->n++;
    return 0;
}

int sd_ckptw_add(sd_ckptw *w, const char *name, sd_dtype dt, int ndim, const int64_t *shape, const void *data,
                 size_t nbytes, sd_diag *d)
{
    if (w->fd >= 0)
        return sd_diag_set(d, SD_EINVAL, "checkpoint writer: %s added after the file was started", name);
    return push(w, name, dt, ndim, shape, data, nbytes, NULL, d);
}

int sd_ckptw_add_bitmask(sd_ckptw *w, const char *base, int64_t rows, int64_t cols, uint16_t *values,
                         uint32_t *mask, const char *pattern, sd_diag *d)
{
    char name[1100];
    if (w->fd >= 0) {
        free(values);
        free(mask);
        return sd_diag_set(d, SD_EINVAL, "checkpoint writer: %s added after the file was started", base);
    }
    int64_t vs[2] = {rows, cols / 2}, ms[2] = {rows, cols / 32};
    snprintf(name, sizeof name, "%s.nm_values", base);
    int rc = push(w, name, SD_DT_BF16, 2, vs, values, (size_t)(rows * (cols / 2)) * 2, values, d);
    if (rc != 0) {
        free(values);
        free(mask);
        return rc;
    }
    snprintf(name, sizeof name, "%s.nm_mask", base);
    if ((rc = push(w, name, SD_DT_U32, 2, ms, mask, (size_t)(rows * (cols / 32)) * 4, mask, d)) != 0) {
        free(mask);
        return rc;
    }
    if (json_object_set_new(w->patterns, base, json_string(pattern)) != 0)
        return sd_diag_set(d, SD_ENOMEM, "checkpoint writer: out of memory");
    return 0;
}

int sd_ckptw_reserve_bitmask(sd_ckptw *w, const char *base, int64_t rows, int64_t cols, const char *pattern,
                             sd_diag *d)
{
    char name[1100];
    int64_t vs[2] = {rows, cols / 2}, ms[2] = {rows, cols / 32};
    if (w->fd >= 0)
        return sd_diag_set(d, SD_EINVAL, "checkpoint writer: %s reserved after the file was started", base);
    snprintf(name, sizeof name, "%s.nm_values", base);
    int rc = push(w, name, SD_DT_BF16, 2, vs, NULL, (size_t)(rows * (cols / 2)) * 2, NULL, d);
    if (rc != 0)
        return rc;
    w->t[w->n - 1].pending = 1;
    snprintf(name, sizeof name, "%s.nm_mask", base);
    if ((rc = push(w, name, SD_DT_U32, 2, ms, NULL, (size_t)(rows * (cols / 32)) * 4, NULL, d)) != 0)
        return rc;
    w->t[w->n - 1].pending = 1;
    if (json_object_set_new(w->patterns, base, json_string(pattern)) != 0)
        return sd_diag_set(d, SD_ENOMEM, "checkpoint writer: out of memory");
    return 0;
}

/* Writes all of buf to fd, at offset off, or at the file position when off < 0 (large pieces:
 * one call per GiB). */
static int write_full(int fd, const void *buf, size_t n, int64_t off)
{
    const char *p = buf;
    while (n > 0) {
        size_t piece = n > (1u << 30) ? (1u << 30) : n;
        ssize_t k = off < 0 ? write(fd, p, piece) : pwrite(fd, p, piece, (off_t)off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
        if (off >= 0)
            off += k;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n)
{
    return write_full(fd, buf, n, -1);
}

static int pwrite_all(int fd, const void *buf, size_t n, size_t off)
{
    return write_full(fd, buf, n, (int64_t)off);
}

/* Creates dir/name with `n` bytes of `data` and fsyncs it. */
static int write_file(const char *dir, const char *name, const void *data, size_t n, sd_diag *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sd_diag_set(d, SD_EIO, "cannot create %s: %s", path, strerror(errno));
    int bad = write_all(fd, data, n) != 0 || fsync(fd) != 0;
    int e = errno;
    bad |= close(fd) != 0;
    return bad ? sd_diag_set(d, SD_EIO, "writing %s: %s", path, strerror(e)) : 0;
}

int sd_ckptw_copy_file(sd_ckptw *w, const char *src_dir, const char *name, int required, sd_diag *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return required ? sd_diag_set(d, SD_ENOTFOUND, "%s is missing", path) : 0;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            char *nb = realloc(buf, cap = cap ? 2 * cap : 1 << 16);
            if (!nb) {
                rc = sd_diag_set(d, SD_ENOMEM, "copying %s: out of memory", path);
                goto out;
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0)
            break;
    }
    if (ferror(f))
        rc = sd_diag_set(d, SD_EIO, "reading %s", path);
    else
        rc = write_file(w->tmp, name, buf, n, d);
out:
    free(buf);
    fclose(f);
    return rc;
}

/* The safetensors header: tensors in list order, contiguous offsets, sparsity.* metadata; padded
 * with spaces to a multiple of 8 bytes as the reference writer does. */
static char *header_json(const sd_ckptw *w, size_t *ret_len)
{
    json_t *root = json_object(), *meta = json_object();
    char *s = NULL;
    if (!root || !meta)
        goto out;
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(meta, "sparsity.format", json_string("nm-bitmask-v1"));
    const char *k;
    json_t *v;
    json_object_foreach(w->patterns, k, v)
    {
        char key[1100];
        snprintf(key, sizeof key, "sparsity.%s", k);
        json_object_set(meta, key, v);
    }
    json_object_set(root, "__metadata__", meta);
    size_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        const wtensor *t = &w->t[i];
        json_t *shape = json_array(), *e = json_object();
        for (int j = 0; j < t->ndim; j++)
            json_array_append_new(shape, json_integer(t->shape[j]));
        json_object_set_new(e, "dtype", json_string(sd_dtype_name(t->dt)));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets",
                            json_pack("[II]", (json_int_t)off, (json_int_t)(off + t->nbytes)));
        json_object_set_new(root, t->name, e);
        off += t->nbytes;
    }
    char *body = json_dumps(root, JSON_PRESERVE_ORDER | JSON_COMPACT);
    if (!body)
        goto out;
    size_t len = strlen(body), padded = (len + 7) & ~(size_t)7;
    if ((s = malloc(padded + 1))) {
        memcpy(s, body, len);
        memset(s + len, ' ', padded - len);
        s[padded] = 0;
        *ret_len = padded;
    }
    free(body);
out:
    json_decref(meta);
    json_decref(root);
    return s;
}

/* Creates model.safetensors in the staging directory and writes its length-prefixed header;
 * the data starts at *ret_data_at. */
static int create_file(const sd_ckptw *w, int *ret_fd, size_t *ret_data_at, sd_diag *d)
{
    size_t hlen = 0;
    char *hdr = header_json(w, &hlen);
    if (!hdr)
        return sd_diag_set(d, SD_ENOMEM, "checkpoint writer: out of memory for the header");
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", w->tmp);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(hdr);
        return sd_diag_set(d, SD_EIO, "cannot create %s: %s", path, strerror(errno));
    }
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    int bad = write_all(fd, le, 8) != 0 || write_all(fd, hdr, hlen) != 0, e = errno;
    free(hdr);
    if (bad) {
        close(fd);
        return sd_diag_set(d, SD_EIO, "writing %s: %s", path, strerror(e));
    }
    *ret_fd = fd;
    *ret_data_at = 8 + hlen;
    return 0;
}

static int write_safetensors(const sd_ckptw *w, sd_diag *d)
{
    int fd;
    size_t data_at;
    int rc = create_file(w, &fd, &data_at, d);
    if (rc)
        return rc;
    int bad = 0;
    for (size_t i = 0; i < w->n && !bad; i++)
        bad = write_all(fd, w->t[i].data, w->t[i].nbytes) != 0;
    bad = bad || fsync(fd) != 0;
    int e = errno;
    bad |= close(fd) != 0;
    return bad ? sd_diag_set(d, SD_EIO, "writing %s/model.safetensors: %s", w->tmp, strerror(e)) : 0;
}

int sd_ckptw_start(sd_ckptw *w, sd_diag *d)
{
    if (!w->tmp || w->fd >= 0)
        return sd_diag_set(d, SD_EINVAL, "checkpoint writer: already started or committed");
    size_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        w->t[i].off = off;
        off += w->t[i].nbytes;
    }
    int rc = create_file(w, &w->fd, &w->data_at, d);
    if (rc)
        return rc;
    /* the final size up front: reserved tensors are filled in any order */
    int bad = ftruncate(w->fd, (off_t)(w->data_at + off)) != 0;
    for (size_t i = 0; i < w->n && !bad; i++)
        if (!w->t[i].pending)
            bad = pwrite_all(w->fd, w->t[i].data, w->t[i].nbytes, w->data_at + w->t[i].off) != 0;
    return bad ? sd_diag_set(d, SD_EIO, "writing %s/model.safetensors: %s", w->tmp, strerror(errno)) : 0;
}

static wtensor *find_pending(sd_ckptw *w, const char *base, const char *suffix)
{
    size_t bl = strlen(base);
    for (size_t i = 0; i < w->n; i++)
        if (w->t[i].pending && strncmp(w->t[i].name, base, bl) == 0 && strcmp(w->t[i].name + bl, suffix) == 0)
            return &w->t[i];
    return NULL;
}

int sd_ckptw_fill_bitmask(sd_ckptw *w, const char *base, const uint16_t *values, const uint32_t *mask,
                          sd_diag *d)
{
    if (w->fd < 0)
        return sd_diag_set(d, SD_EINVAL, "checkpoint writer: %s filled before the file was started", base);
    wtensor *v = find_pending(w, base, ".nm_values"), *m = find_pending(w, base, ".nm_mask");
    if (!v || !m)
        return sd_diag_set(d, SD_EINVAL, "checkpoint writer: %s was not reserved (or is already written)",
                           base);
    if (pwrite_all(w->fd, values, v->nbytes, w->data_at + v->off) != 0 ||
        pwrite_all(w->fd, mask, m->nbytes, w->data_at + m->off) != 0)
        return sd_diag_set(d, SD_EIO, "writing %s of %s/model.safetensors: %s", base, w->tmp,
                           strerror(errno));
    v->pending = m->pending = 0;
    return 0;
}

/* A started file: every reserved tensor written, then fsync and close. */
static int finish_started(sd_ckptw *w, sd_diag *d)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->t[i].pending)
            return sd_diag_set(d, SD_EINVAL, "checkpoint writer: %s was reserved but never written",
                               w->t[i].name);
    int bad = fsync(w->fd) != 0;
    int e = errno;
    bad |= close(w->fd) != 0;
    w->fd = -1;
    return bad ? sd_diag_set(d, SD_EIO, "writing %s/model.safetensors: %s", w->tmp, strerror(e)) : 0;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int sd_ckptw_commit(sd_ckptw *w, json_t *provenance, sd_diag *d)
{
    if (!w->tmp)
        return sd_diag_set(d, SD_EINVAL, "checkpoint writer: already committed");
    int rc = w->fd >= 0 ? finish_started(w, d) : write_safetensors(w, d);
    if (rc != 0)
        return rc;
    json_t *sp = json_pack("{s:s, s:O, s:O}", "format", "nm-bitmask-v1", "tensors", w->patterns, "provenance",
                           provenance ? provenance : json_null());
    char *txt = sp ? json_dumps(sp, JSON_PRESERVE_ORDER | JSON_INDENT(2)) : NULL;
    json_decref(sp);
    if (!txt)
        return sd_diag_set(d, SD_ENOMEM, "checkpoint writer: out of memory for sparsity.json");
    size_t len = strlen(txt);
    rc = write_file(w->tmp, "sparsity.json", txt, len, d);
    free(txt);
    if (rc != 0)
        return rc;
    /* mkdtemp made it 0700; a checkpoint is read by the serving user too */
    if (chmod(w->tmp, 0755) != 0)
        return sd_diag_set(d, SD_EIO, "chmod %s: %s", w->tmp, strerror(errno));
    if (fsync_dir(w->tmp) != 0)
        return sd_diag_set(d, SD_EIO, "fsync %s: %s", w->tmp, strerror(errno));
    if (rename(w->tmp, w->out) != 0)
        return sd_diag_set(d, SD_EIO, "renaming %s to %s: %s", w->tmp, w->out, strerror(errno));
    free(w->tmp);
    w->tmp = NULL;
    char *parent = strdup(w->out);
    if (parent) {
        fsync_dir(dirname(parent)); /* the rename itself is durable once the parent is synced */
        free(parent);
    }
    return 0;
}
