/* cuda_tune_cache: the CUDA backend's side of engine/tune_cache.c — this device's key, the cache
 * loaded into the kernels context and the linears' path table at creation, and saved again after
 * each first-use tuning (mm->on_tune), so a restarted process runs the kernels an earlier one
 * chose without timing them. */
#include "engine/cuda_backend_impl.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/nm_spmv.h"

/* GPU, compute capability, driver and runtime, kernels revision: a cache applies only to all of
 * these (another GPU or driver may rank the kernels otherwise; another revision may mean other
 * kernels behind the same codes). */
static int device_key(int device, char *key, size_t n, sd_diag *d)
{
    cudaDeviceProp p;
    int drv = 0, rt = 0;
    SD_CU(d, cudaGetDeviceProperties(&p, device));
    SD_CU(d, cudaDriverGetVersion(&drv));
    SD_CU(d, cudaRuntimeGetVersion(&rt));
    snprintf(key, n, "%.120s|sm_%d%d|%d SMs|driver %d|runtime %d|kernels %d", p.name, p.major, p.minor,
             p.multiProcessorCount, drv, rt, SD_NM_KERNELS_REV);
    return 0;
}

/* Whether one of this backend's linears has that shape and kind (dense, or pattern m): a cache
 * shared by several models or patterns (bench decode writes one for all) holds entries of the
 * others, which would only fill the tables. */
static int own_linear(const sd_cuda_backend *b, int64_t rows, int64_t cols, int dense, int m)
{
    const sd_cu_linear *ls[5] = {&b->w.lm_head, NULL, NULL, NULL, NULL};
    if (b->w.n_layers > 0) {
        const sd_cu_layer *L = &b->w.layers[0];
        ls[1] = &L->qkv, ls[2] = &L->o, ls[3] = &L->gate_up, ls[4] = &L->down;
    }
    for (int i = 0; i < 5; i++)
        if (ls[i] && ls[i]->rows == rows && ls[i]->cols == cols && !ls[i]->bitmask == !!dense &&
            (dense || ls[i]->nm_m == m))
            return 1;
    return 0;
}

/* The loaded entries of this backend's linears into the kernels context and the path table; a
 * kernels entry the launchers do not take (or that would split K in a deterministic context) is
 * skipped, as is a path beyond the table. Returns how many of each went in. */
static void import(sd_cuda_backend *b, sd_tune_cache *c, int *n_k, int *n_p)
{
    *n_k = *n_p = 0;
    int other_k = 0, other_p = 0; /* the other linears' entries, moved to the front of c's arrays */
    for (int i = 0; i < c->n_kernels; i++) {
        const sd_nm_tuned *e = &c->kernels[i];
        if (own_linear(b, e->rows, e->cols, e->dense, e->m))
            *n_k += sd_kernels_ctx_import((sd_kernels_ctx *)b->mm.spmv, e) == 0;
        else
            c->kernels[other_k++] = *e;
    }
    for (int i = 0; i < c->n_paths; i++) {
        const sd_tune_path *p = &c->paths[i];
        if (!own_linear(b, p->rows, p->cols, p->dense, p->m)) {
            c->paths[other_p++] = *p;
            continue;
        }
        if (b->mm.n_tuned < SD_CU_MAX_TUNED && !sd__cu_find_tuned(&b->mm, p)) {
            b->mm.tuned[b->mm.n_tuned++] = *p;
            ++*n_p;
        }
    }
    c->n_kernels = other_k;
    c->n_paths = other_p;
}

/* The file again, under this device's key (b->tune_other.key): this backend's entries (the
 * kernels context and the path table) and, after them, the other linears' entries it loaded. */
static void save(void *ud)
{
    sd_cuda_backend *b = (sd_cuda_backend *)ud;
    const sd_tune_cache *o = &b->tune_other;
    sd_tune_cache c;
    sd_diag d = {};
    memset(&c, 0, sizeof c);
    memcpy(c.key, o->key, sizeof c.key);
    int rc = 0;
    c.kernels = (sd_nm_tuned *)malloc((SD_NM_CACHE_CAP + (size_t)o->n_kernels) * sizeof *c.kernels);
    c.paths = (sd_tune_path *)malloc(((size_t)b->mm.n_tuned + (size_t)o->n_paths + 1) * sizeof *c.paths);
    if (!c.kernels || !c.paths)
        rc = sd_diag_set(&d, SD_ENOMEM, "out of memory");
    if (!rc) {
        c.n_kernels = sd_kernels_ctx_export((const sd_kernels_ctx *)b->mm.spmv, c.kernels, SD_NM_CACHE_CAP);
        if (c.n_kernels > SD_NM_CACHE_CAP)
            c.n_kernels = SD_NM_CACHE_CAP;
        memcpy(c.kernels + c.n_kernels, o->kernels, (size_t)o->n_kernels * sizeof *c.kernels);
        c.n_kernels += o->n_kernels;
        memcpy(c.paths, b->mm.tuned, (size_t)b->mm.n_tuned * sizeof *c.paths);
        memcpy(c.paths + b->mm.n_tuned, o->paths, (size_t)o->n_paths * sizeof *c.paths);
        c.n_paths = b->mm.n_tuned + o->n_paths;
        rc = sd_tune_cache_save(b->tune_path, &c, &d);
    }
    if (rc)
        fprintf(stderr, "sparsed: tune cache %s not saved: %s\n", b->tune_path, d.msg);
    free(c.kernels);
    free(c.paths);
}

int sd__cu_tune_cache_open(sd_cuda_backend *b, const char *path, sd_diag *d)
{
    if (!path || !*path)
        return 0;
    size_t n = strlen(path) + 24;
    b->tune_path = (char *)malloc(n);
    if (!b->tune_path)
        return sd_diag_set(d, SD_ENOMEM, "cuda backend: tune cache path");
    if (b->tp.plan.ranks > 1)
        snprintf(b->tune_path, n, "%s.rank%d", path, b->tp.plan.rank);
    else
        snprintf(b->tune_path, n, "%s", path);
    char key[SD_TUNE_KEY_MAX];
    SD_TRY(device_key(b->device, key, sizeof key, d));
    sd_tune_cache c;
    sd_diag ld = {};
    int rc = sd_tune_cache_load(b->tune_path, &c, &ld);
    if (rc && rc != SD_ENOTFOUND)
        fprintf(stderr, "sparsed: %s; tuning afresh, the file will be rewritten\n", ld.msg);
    else if (!rc && strcmp(c.key, key))
        fprintf(stderr,
                "sparsed: tune cache %s is for \"%s\", this is \"%s\"; tuning afresh, the file will be "
                "rewritten\n",
                b->tune_path, c.key, key);
    else if (!rc) {
        int n_k, n_p;
        import(b, &c, &n_k, &n_p);
        b->mm.n_tuned_loaded = b->mm.n_tuned;
        fprintf(stderr, "sparsed: tune cache %s: %d kernel configs and %d linear paths loaded\n",
                b->tune_path, n_k, n_p);
        b->tune_other = c; /* the other linears' entries: written back with every save */
        memset(&c, 0, sizeof c);
    }
    sd_tune_cache_free(&c);
    memcpy(b->tune_other.key, key, sizeof key); /* what every save writes under */
    b->mm.on_tune = save;
    b->mm.on_tune_ud = b;
    return 0;
}

void sd__cu_tune_cache_close(sd_cuda_backend *b)
{
    sd_tune_cache_free(&b->tune_other);
    free(b->tune_path);
    b->tune_path = NULL;
    b->mm.on_tune = NULL;
}

int sd__cu_tuned_here(const sd_cuda_backend *b)
{
    return b->mm.n_tuned - b->mm.n_tuned_loaded;
}
