/* pruned_ckpt: a 2:4 magnitude-pruned copy of a bundled model, written as a bitmask checkpoint
 * (model.safetensors of values + masks for the layers' linears, the rest as they are, and the
 * config), for the GPU tests that compare a pruned model's CUDA and CPU runs. Test code only:
 * static functions, included by one test file each. */
#ifndef SD_TESTS_PRUNED_CKPT_H
#define SD_TESTS_PRUNED_CKPT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/dtype.h"

typedef struct out_tensor {
    char name[160];
    const char *dtype;
    int ndim;
    int64_t shape[2];
    void *data; /* owned */
    size_t nbytes;
} out_tensor;

static int is_pruned_linear(const char *name)
{
    const char *p[] = {"q_proj.weight",    "k_proj.weight",  "v_proj.weight",   "o_proj.weight",
                       "gate_proj.weight", "up_proj.weight", "down_proj.weight"};
    if (strncmp(name, "model.layers.", 13))
        return 0;
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (n > strlen(p[i]) && !strcmp(name + n - strlen(p[i]), p[i]))
            return 1;
    return 0;
}

/* 2:4 by magnitude (ties: lower column), packed as values in column order + mask words. */
static void prune_2of4(const uint16_t *w, int64_t rows, int64_t cols, uint16_t *vals, uint32_t *mask)
{
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *row = w + r * cols;
        int64_t k = 0;
        for (int64_t g = 0; g < cols; g += 4) {
            int keep[4] = {0};
            for (int c = 0; c < 2; c++) {
                int best = -1;
                for (int j = 0; j < 4; j++)
                    if (!keep[j] && (best < 0 || fabsf(sd_bf16_to_f32(row[g + j])) >
                                                     fabsf(sd_bf16_to_f32(row[g + best]))))
                        best = j;
                keep[best] = 1;
            }
            for (int j = 0; j < 4; j++) {
                int64_t c = g + j;
                if (keep[j]) {
                    vals[r * (cols / 2) + k++] = row[c];
                    mask[r * (cols / 32) + c / 32] |= 1u << (c % 32);
                }
            }
        }
    }
}

static int write_safetensors(const char *path, out_tensor *t, int n)
{
    size_t cap = 1 << 20, len = 0, off = 0;
    char *h = malloc(cap);
    len += snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"");
    for (int i = 0; i < n; i++)
        if (strstr(t[i].name, ".nm_values")) {
            len += snprintf(h + len, cap - len, ",\"sparsity.%.*s\":\"2:4\"",
                            (int)(strlen(t[i].name) - strlen(".nm_values")), t[i].name);
        }
    len += snprintf(h + len, cap - len, "}");
    for (int i = 0; i < n; i++) {
        len += snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
        for (int k = 0; k < t[i].ndim; k++)
            len += snprintf(h + len, cap - len, "%s%lld", k ? "," : "", (long long)t[i].shape[k]);
        len += snprintf(h + len, cap - len, "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].nbytes);
        off += t[i].nbytes;
    }
    len += snprintf(h + len, cap - len, "}");
    while (len % 8)
        h[len++] = ' ';
    FILE *f = fopen(path, "wb");
    int ok = f != NULL;
    uint64_t hl = len;
    ok = ok && fwrite(&hl, 8, 1, f) == 1 && fwrite(h, 1, len, f) == len;
    for (int i = 0; ok && i < n; i++)
        ok = fwrite(t[i].data, 1, t[i].nbytes, f) == t[i].nbytes;
    if (f)
        ok = !fclose(f) && ok;
    free(h);
    return ok ? 0 : -1;
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[4096];
    size_t n;
    int ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0)
        ok = fwrite(buf, 1, n, b) == n;
    if (a)
        fclose(a);
    if (b)
        ok = !fclose(b) && ok;
    return ok ? 0 : -1;
}

/* Writes dir/config.json and dir/model.safetensors with every layer linear 2:4-pruned. */
static int make_pruned(const char *src, const char *dir)
{
    sd_ckpt *ck = NULL;
    sd_diag d = {0};
    char p1[4096], p2[4096];
    if (sd_ckpt_open(&ck, src, &d))
        return -1;
    size_t nt = sd_ckpt_count(ck);
    out_tensor *t = calloc(2 * nt, sizeof *t);
    int n = 0, rc = 0;
    for (size_t i = 0; i < nt && !rc; i++) {
        const sd_tensor_view *v = sd_ckpt_at(ck, i);
        if (is_pruned_linear(v->name) && v->dtype == SD_DT_BF16 && v->ndim == 2 && v->shape[1] % 32 == 0) {
            int64_t R = v->shape[0], C = v->shape[1];
            size_t base = strlen(v->name) - strlen(".weight");
            out_tensor *tv = &t[n++], *tm = &t[n++];
            *tv = (out_tensor){.dtype = "BF16",
                               .ndim = 2,
                               .shape = {R, C / 2},
                               .nbytes = (size_t)R * C,
                               .data = malloc((size_t)R * C)};
            snprintf(tv->name, sizeof tv->name, "%.*s.nm_values", (int)base, v->name);
            *tm = (out_tensor){.dtype = "U32",
                               .ndim = 2,
                               .shape = {R, C / 32},
                               .nbytes = (size_t)R * C / 8,
                               .data = calloc(1, (size_t)R * C / 8)};
            snprintf(tm->name, sizeof tm->name, "%.*s.nm_mask", (int)base, v->name);
            prune_2of4(v->data, R, C, tv->data, tm->data);
        } else {
            out_tensor *o = &t[n++];
            snprintf(o->name, sizeof o->name, "%s", v->name);
            o->dtype = sd_dtype_name(v->dtype);
            o->ndim = v->ndim;
            rc = v->ndim > 2 ? -1 : 0;
            for (int k = 0; k < v->ndim && k < 2; k++)
                o->shape[k] = v->shape[k];
            o->nbytes = v->nbytes;
            o->data = malloc(v->nbytes);
            memcpy(o->data, v->data, v->nbytes);
        }
    }
    snprintf(p1, sizeof p1, "%s/model.safetensors", dir);
    if (!rc)
        rc = write_safetensors(p1, t, n);
    snprintf(p1, sizeof p1, "%s/config.json", src);
    snprintf(p2, sizeof p2, "%s/config.json", dir);
    if (!rc)
        rc = copy_file(p1, p2);
    for (int i = 0; i < n; i++)
        free(t[i].data);
    free(t);
    sd_ckpt_free(ck);
    return rc;
}

/* Removes the model.safetensors and config.json a test wrote into dir, and dir. */
static void rm_model_dir(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

#endif
