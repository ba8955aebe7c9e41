/* cuda_cslt: cuSPARSELt through dlopen (cuda_cslt.h). The entry points are typed from the header the
 * build found (decltype), resolved by dlsym once per handle. */
#include "engine/cuda_cslt.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda_impl.cuh" /* SD_CU, SD_TRY */

int sd_cslt_pad_rows(int T)
{
    return (T + SD_CSLT_ROW_STEP - 1) / SD_CSLT_ROW_STEP * SD_CSLT_ROW_STEP;
}

#ifndef SD_HAVE_CSLT

int sd_cslt_built(void)
{
    return 0;
}

static int not_built(sd_diag *d)
{
    return sd_diag_set(d, SD_ENOTSUP,
                       "cuSPARSELt: this build found no cusparseLt.h (Makefile CSLT_DIR; "
                       "pip install nvidia-cusparselt-cu13, then rebuild)");
}

int sd_cslt_probe(char *version, size_t n, sd_diag *d)
{
    if (n)
        version[0] = 0;
    return not_built(d);
}

int sd_cslt_open(sd_cslt **ret, int search, sd_diag *d)
{
    *ret = NULL;
    return not_built(d);
}

void sd_cslt_free(sd_cslt *c)
{
    (void)c;
}

int sd_cslt_add(sd_cslt *c, const void *key, const void *w, int64_t rows, int64_t cols, void *stream,
                sd_diag *d)
{
    return not_built(d);
}

int sd_cslt_has(const sd_cslt *c, const void *key)
{
    return 0;
}

const char *sd_cslt_version(const sd_cslt *c)
{
    return "";
}

size_t sd_cslt_bytes(const sd_cslt *c, int *count)
{
    if (count)
        *count = 0;
    return 0;
}

int sd_cslt_ready(const sd_cslt *c, const void *key, int T)
{
    return 0;
}

int sd_cslt_matmul(sd_cslt *c, const void *key, const void *x, float *y, int T, int acc, void *stream,
                   sd_diag *d)
{
    return not_built(d);
}

#else

#include <cusparseLt.h>

#define SD_CSLT_FNS(X)                                                                                       \
    X(cusparseLtInit)                                                                                        \
    X(cusparseLtDestroy)                                                                                     \
    X(cusparseLtGetProperty)                                                                                 \
    X(cusparseLtGetErrorString)                                                                              \
    X(cusparseLtDenseDescriptorInit)                                                                         \
    X(cusparseLtStructuredDescriptorInit)                                                                    \
    X(cusparseLtMatDescriptorDestroy)                                                                        \
    X(cusparseLtMatmulDescriptorInit)                                                                        \
    X(cusparseLtMatmulAlgSelectionInit)                                                                      \
    X(cusparseLtMatmulAlgSelectionDestroy)                                                                   \
    X(cusparseLtMatmulGetWorkspace)                                                                          \
    X(cusparseLtMatmulPlanInit)                                                                              \
    X(cusparseLtMatmulPlanDestroy)                                                                           \
    X(cusparseLtMatmul)                                                                                      \
    X(cusparseLtMatmulSearch)                                                                                \
    X(cusparseLtSpMMACompressedSize2)                                                                        \
    X(cusparseLtSpMMACompress2)                                                                              \
    X(cusparseLtSpMMAPruneCheck2)

typedef struct cslt_fns {
#define SD__CSLT_FIELD(name) decltype(&::name) name;
    SD_CSLT_FNS(SD__CSLT_FIELD)
#undef SD__CSLT_FIELD
} cslt_fns;

/* A weight shape's structured descriptor (A: the weight, row-major [rows, cols], 2:4 along cols).
 * Heap-allocated one by one, as are plans: a matmul descriptor may keep the addresses of the
 * descriptors it was made from. */
typedef struct cslt_shape {
    int64_t rows, cols;
    cusparseLtMatDescriptor_t a;
} cslt_shape;

/* One (shape, padded rows n) problem: B = x^T [cols, n] and C = D = y^T [rows, n], column-major (so
 * row-major x [n, cols] and y [n, rows]); D in bf16, the one output type cuSPARSELt has for bf16
 * inputs. */
typedef struct cslt_plan {
    const cslt_shape *shape;
    int n;
    cusparseLtMatDescriptor_t b, c;
    cusparseLtMatmulDescriptor_t mm;
    cusparseLtMatmulAlgSelection_t alg;
    cusparseLtMatmulPlan_t plan;
    int have_b, have_c, have_alg, have_plan;
    int searched; /* cusparseLtMatmulSearch has picked its algorithm config (sd_cslt.search) */
    size_t ws_bytes;
} cslt_plan;

typedef struct cslt_mat {
    const void *key;
    cslt_shape *shape;
    void *buf; /* the compressed weight */
    size_t bytes;
} cslt_mat;

struct sd_cslt {
    char version[320]; /* "0.8.0 (path)" */
    void *lib;
    cslt_fns f;
    cusparseLtHandle_t h;
    int have_h;
    cslt_shape **shapes;
    int n_shapes;
    cslt_plan **plans;
    int n_plans;
    cslt_mat *mats;
    int n_mats, cap_mats;
    int search; /* time the algorithm configs at a plan's first use (SD_CUSPARSELT=2) */
    void *ws;   /* the largest workspace any plan asked for */
    size_t ws_bytes;
    __nv_bfloat16 *out; /* D: the product in bf16, [padded rows, rows] of the largest problem yet */
    size_t out_elems;
    size_t bytes;
    /* A graph captured with a matmul holds ws and out: once one was, a larger buffer (at least
     * twice the size) replaces them without freeing them (until sd_cslt_free), as the graph may be
     * replayed later. */
    int captured;
    void **retired;
    int n_retired;
};

#define SD_CSLT_CALL(c, d, call)                                                                             \
    do {                                                                                                     \
        cusparseStatus_t s_ = (c)->f.call;                                                                   \
        if (s_ != CUSPARSE_STATUS_SUCCESS)                                                                   \
            return sd_diag_set((d), SD_ECUDA, "cuSPARSELt: %s: %s", #call,                                   \
                               (c)->f.cusparseLtGetErrorString(s_));                                         \
    } while (0)

int sd_cslt_built(void)
{
    return 1;
}

/* dlopen of $SD_CUSPARSELT_LIB (only that one when set), else the build's directory, else the
 * soname; *path gets the one that loaded (or the last one tried). */
static void *open_lib(const char **path)
{
    const char *env = getenv("SD_CUSPARSELT_LIB");
    if (env && *env) {
        *path = env;
        return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    }
    void *h = NULL;
#ifdef SD_CSLT_LIBDIR
    *path = SD_CSLT_LIBDIR "/libcusparseLt.so.0";
    h = dlopen(*path, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h) {
        *path = "libcusparseLt.so.0";
        h = dlopen(*path, RTLD_NOW | RTLD_LOCAL);
    }
    return h;
}

/* Resolves every entry point and checks the version: the opaque structures' sizes and the enums
 * this file was compiled with are those of the header's major.minor. */
static int load(void **ret_lib, cslt_fns *f, char *version, size_t n, sd_diag *d)
{
    const char *path = NULL;
    void *lib = open_lib(&path);
    if (!lib) {
        const char *why = dlerror();
        return sd_diag_set(d, SD_ENOTFOUND, "cuSPARSELt: cannot load %s: %s (set SD_CUSPARSELT_LIB)", path,
                           why ? why : "?");
    }
#define SD__CSLT_SYM(name)                                                                                   \
    if (!(*(void **)&f->name = dlsym(lib, #name))) {                                                         \
        dlclose(lib);                                                                                        \
        return sd_diag_set(d, SD_ENOTFOUND, "cuSPARSELt: %s has no %s", path, #name);                        \
    }
    SD_CSLT_FNS(SD__CSLT_SYM)
#undef SD__CSLT_SYM
    int v[3] = {-1, -1, -1};
    const libraryPropertyType props[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
    for (int i = 0; i < 3; i++)
        f->cusparseLtGetProperty(props[i], &v[i]);
    if (n)
        snprintf(version, n, "%d.%d.%d (%s)", v[0], v[1], v[2], path);
    if (v[0] != CUSPARSELT_VER_MAJOR || v[1] != CUSPARSELT_VER_MINOR) {
        dlclose(lib);
        return sd_diag_set(d, SD_ENOTSUP,
                           "cuSPARSELt: %s is version %d.%d.%d, sparsed was built against %d.%d", path, v[0],
                           v[1], v[2], CUSPARSELT_VER_MAJOR, CUSPARSELT_VER_MINOR);
    }
    *ret_lib = lib;
    return 0;
}

int sd_cslt_probe(char *version, size_t n, sd_diag *d)
{
    void *lib = NULL;
    cslt_fns f;
    if (n)
        version[0] = 0;
    SD_TRY(load(&lib, &f, version, n, d));
    dlclose(lib);
    return 0;
}

int sd_cslt_open(sd_cslt **ret, int search, sd_diag *d)
{
    *ret = NULL;
    sd_cslt *c = (sd_cslt *)calloc(1, sizeof *c);
    if (!c)
        return sd_diag_set(d, SD_ENOMEM, "cuSPARSELt");
    c->search = search;
    int rc = load(&c->lib, &c->f, c->version, sizeof c->version, d);
    if (!rc) {
        cusparseStatus_t s = c->f.cusparseLtInit(&c->h);
        if (s == CUSPARSE_STATUS_SUCCESS)
            c->have_h = 1;
        else
            rc = sd_diag_set(d, SD_ECUDA, "cuSPARSELt: cusparseLtInit: %s", c->f.cusparseLtGetErrorString(s));
    }
    if (rc) {
        sd_cslt_free(c);
        return rc;
    }
    *ret = c;
    return 0;
}

static void plan_free(const cslt_fns *f, cslt_plan *p)
{
    if (p->have_plan)
        f->cusparseLtMatmulPlanDestroy(&p->plan);
    if (p->have_alg)
        f->cusparseLtMatmulAlgSelectionDestroy(&p->alg);
    if (p->have_c)
        f->cusparseLtMatDescriptorDestroy(&p->c);
    if (p->have_b)
        f->cusparseLtMatDescriptorDestroy(&p->b);
    free(p);
}

void sd_cslt_free(sd_cslt *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_plans; i++)
        plan_free(&c->f, c->plans[i]);
    free(c->plans);
    for (int i = 0; i < c->n_mats; i++)
        cudaFree(c->mats[i].buf);
    free(c->mats);
    for (int i = 0; i < c->n_shapes; i++) {
        c->f.cusparseLtMatDescriptorDestroy(&c->shapes[i]->a);
        free(c->shapes[i]);
    }
    free(c->shapes);
    cudaFree(c->ws);
    cudaFree(c->out);
    for (int i = 0; i < c->n_retired; i++)
        cudaFree(c->retired[i]);
    free(c->retired);
    if (c->have_h)
        c->f.cusparseLtDestroy(&c->h);
    if (c->lib)
        dlclose(c->lib);
    free(c);
}

/* Grows an array of pointers by one slot. */
static int push_ptr(void ***arr, int *n, void *p, sd_diag *d)
{
    void **a = (void **)realloc(*arr, (size_t)(*n + 1) * sizeof *a);
    if (!a)
        return sd_diag_set(d, SD_ENOMEM, "cuSPARSELt");
    a[(*n)++] = p;
    *arr = a;
    return 0;
}

static int get_shape(sd_cslt *c, int64_t rows, int64_t cols, cslt_shape **ret, sd_diag *d)
{
    for (int i = 0; i < c->n_shapes; i++)
        if (c->shapes[i]->rows == rows && c->shapes[i]->cols == cols) {
            *ret = c->shapes[i];
            return 0;
        }
    cslt_shape *s = (cslt_shape *)calloc(1, sizeof *s);
    if (!s)
        return sd_diag_set(d, SD_ENOMEM, "cuSPARSELt");
    s->rows = rows;
    s->cols = cols;
    cusparseStatus_t st = c->f.cusparseLtStructuredDescriptorInit(
        &c->h, &s->a, rows, cols, cols, 16, CUDA_R_16BF, CUSPARSE_ORDER_ROW, CUSPARSELT_SPARSITY_50_PERCENT);
    if (st != CUSPARSE_STATUS_SUCCESS) {
        free(s);
        return sd_diag_set(d, SD_ECUDA, "cuSPARSELt: structured descriptor [%lld, %lld]: %s", (long long)rows,
                           (long long)cols, c->f.cusparseLtGetErrorString(st));
    }
    if (push_ptr((void ***)&c->shapes, &c->n_shapes, s, d)) {
        c->f.cusparseLtMatDescriptorDestroy(&s->a);
        free(s);
        return SD_ENOMEM;
    }
    *ret = s;
    return 0;
}

static const cslt_mat *find_mat(const sd_cslt *c, const void *key)
{
    for (int i = 0; i < c->n_mats; i++)
        if (c->mats[i].key == key)
            return &c->mats[i];
    return NULL;
}

int sd_cslt_has(const sd_cslt *c, const void *key)
{
    return c && find_mat(c, key) != NULL;
}

const char *sd_cslt_version(const sd_cslt *c)
{
    return c ? c->version : "";
}

size_t sd_cslt_bytes(const sd_cslt *c, int *count)
{
    if (count)
        *count = c ? c->n_mats : 0;
    return c ? c->bytes : 0;
}

/* The GPU's verdict on w's 2:4 structure as cuSPARSELt reads it (0: valid). */
static int prune_check(sd_cslt *c, const cslt_shape *s, const void *w, cudaStream_t st, sd_diag *d)
{
    int *d_valid = NULL, valid = -1;
    SD_CU(d, cudaMalloc((void **)&d_valid, sizeof(int)));
    /* zeroed first: the check may only raise the flag (without this one bench gemm row read a failure) */
    cudaError_t e = cudaMemsetAsync(d_valid, 0, sizeof(int), st);
    cusparseStatus_t cs =
        e == cudaSuccess ? c->f.cusparseLtSpMMAPruneCheck2(&c->h, &s->a, 1, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                           w, d_valid, st)
                         : CUSPARSE_STATUS_SUCCESS;
    if (e == cudaSuccess && cs == CUSPARSE_STATUS_SUCCESS)
        e = cudaMemcpyAsync(&valid, d_valid, sizeof(int), cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess && cs == CUSPARSE_STATUS_SUCCESS)
        e = cudaStreamSynchronize(st);
    cudaFree(d_valid);
    if (cs != CUSPARSE_STATUS_SUCCESS)
        return sd_diag_set(d, SD_ECUDA, "cuSPARSELt: cusparseLtSpMMAPruneCheck2: %s",
                           c->f.cusparseLtGetErrorString(cs));
    SD_CU(d, e);
    if (valid != 0)
        return sd_diag_set(d, SD_EINVAL, "cuSPARSELt: the weight [%lld, %lld] is not 2:4 along its rows",
                           (long long)s->rows, (long long)s->cols);
    return 0;
}

int sd_cslt_add(sd_cslt *c, const void *key, const void *w, int64_t rows, int64_t cols, void *stream,
                sd_diag *d)
{
    cudaStream_t st = (cudaStream_t)stream;
    if (rows <= 0 || cols <= 0 || rows % 64 || cols % 64)
        return sd_diag_set(d, SD_EINVAL, "cuSPARSELt: weight [%lld, %lld] (multiples of 64 needed)",
                           (long long)rows, (long long)cols);
    if (find_mat(c, key))
        return sd_diag_set(d, SD_EINVAL, "cuSPARSELt: this weight is compressed already");
    if (c->n_mats == c->cap_mats) {
        int cap = c->cap_mats ? 2 * c->cap_mats : 64;
        cslt_mat *m = (cslt_mat *)realloc(c->mats, (size_t)cap * sizeof *m);
        if (!m)
            return sd_diag_set(d, SD_ENOMEM, "cuSPARSELt");
        c->mats = m;
        c->cap_mats = cap;
    }
    cslt_shape *s = NULL;
    SD_TRY(get_shape(c, rows, cols, &s, d));
    SD_TRY(prune_check(c, s, w, st, d));
    size_t bytes = 0, tmp_bytes = 0;
    SD_CSLT_CALL(c, d, cusparseLtSpMMACompressedSize2(&c->h, &s->a, &bytes, &tmp_bytes));
    void *buf = NULL, *tmp = NULL;
    cudaError_t e = cudaMalloc(&buf, bytes);
    if (e == cudaSuccess && tmp_bytes)
        e = cudaMalloc(&tmp, tmp_bytes);
    cusparseStatus_t cs = CUSPARSE_STATUS_SUCCESS;
    if (e == cudaSuccess)
        cs =
            c->f.cusparseLtSpMMACompress2(&c->h, &s->a, 1, CUSPARSE_OPERATION_NON_TRANSPOSE, w, buf, tmp, st);
    if (e == cudaSuccess && cs == CUSPARSE_STATUS_SUCCESS)
        e = cudaStreamSynchronize(st); /* tmp is freed next */
    cudaFree(tmp);
    if (e != cudaSuccess || cs != CUSPARSE_STATUS_SUCCESS) {
        cudaFree(buf);
        if (e != cudaSuccess)
            return sd_diag_set(d, e == cudaErrorMemoryAllocation ? SD_ENOMEM : SD_ECUDA,
                               "cuSPARSELt: compressing [%lld, %lld] (%zu bytes): %s", (long long)rows,
                               (long long)cols, bytes, cudaGetErrorString(e));
        return sd_diag_set(d, SD_ECUDA, "cuSPARSELt: cusparseLtSpMMACompress2: %s",
                           c->f.cusparseLtGetErrorString(cs));
    }
    c->mats[c->n_mats++] = (cslt_mat){key, s, buf, bytes};
    c->bytes += bytes;
    return 0;
}

/* Descriptors, algorithm and plan of D = A B (+ C) for s with n padded rows. */
static int plan_init(sd_cslt *c, cslt_plan *p, sd_diag *d)
{
    const int64_t rows = p->shape->rows, cols = p->shape->cols, n = p->n;
    SD_CSLT_CALL(
        c, d,
        cusparseLtDenseDescriptorInit(&c->h, &p->b, cols, n, cols, 16, CUDA_R_16BF, CUSPARSE_ORDER_COL));
    p->have_b = 1;
    SD_CSLT_CALL(
        c, d,
        cusparseLtDenseDescriptorInit(&c->h, &p->c, rows, n, rows, 16, CUDA_R_16BF, CUSPARSE_ORDER_COL));
    p->have_c = 1;
    SD_CSLT_CALL(c, d,
                 cusparseLtMatmulDescriptorInit(&c->h, &p->mm, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                CUSPARSE_OPERATION_NON_TRANSPOSE, &p->shape->a, &p->b, &p->c,
                                                &p->c, CUSPARSE_COMPUTE_32F));
    SD_CSLT_CALL(c, d,
                 cusparseLtMatmulAlgSelectionInit(&c->h, &p->alg, &p->mm, CUSPARSELT_MATMUL_ALG_DEFAULT));
    p->have_alg = 1;
    SD_CSLT_CALL(c, d, cusparseLtMatmulPlanInit(&c->h, &p->plan, &p->mm, &p->alg));
    p->have_plan = 1;
    SD_CSLT_CALL(c, d, cusparseLtMatmulGetWorkspace(&c->h, &p->plan, &p->ws_bytes));
    return 0;
}

/* Drops the buffer p that a larger one replaces: freed, or kept until sd_cslt_free where a captured
 * graph may still use it. */
static int retire(sd_cslt *c, void *p, sd_diag *d)
{
    if (!p || !c->captured) {
        cudaFree(p);
        return 0;
    }
    void **a = (void **)realloc(c->retired, (size_t)(c->n_retired + 1) * sizeof *a);
    if (!a) /* kept anyway (lost): freeing it under a graph would be worse */
        return sd_diag_set(d, SD_ENOMEM, "cuSPARSELt: out of memory");
    a[c->n_retired++] = p;
    c->retired = a;
    return 0;
}

/* c->ws of at least `bytes` (first use of a plan only: cudaFree synchronises the device). Once a
 * graph holds the workspace it grows at least twofold, as the product buffer does (out_room), so
 * the retired ones take at most as much again: the plans made after the decode graphs' capture (the
 * warm-up's prompt chunks of 320, 384, ... rows) could otherwise each retire one a little smaller
 * than the next. */
static int ws_room(sd_cslt *c, size_t bytes, sd_diag *d)
{
    if (bytes <= c->ws_bytes)
        return 0;
    if (c->captured && bytes < 2 * c->ws_bytes)
        bytes = 2 * c->ws_bytes;
    void *ws = NULL;
    cudaError_t e = cudaMalloc(&ws, bytes);
    if (e != cudaSuccess)
        return sd_diag_set(d, SD_ENOMEM, "cuSPARSELt: workspace of %zu bytes: %s", bytes,
                           cudaGetErrorString(e));
    void *old = c->ws;
    c->ws = ws;
    c->ws_bytes = bytes;
    return retire(c, old, d);
}

/* The plan of (shape s, n padded rows) if it exists, else NULL. */
static cslt_plan *find_plan(const sd_cslt *c, const cslt_shape *s, int n)
{
    for (int i = 0; i < c->n_plans; i++)
        if (c->plans[i]->shape == s && c->plans[i]->n == n)
            return c->plans[i];
    return NULL;
}

static int get_plan(sd_cslt *c, cslt_shape *s, int n, cslt_plan **ret, sd_diag *d)
{
    if ((*ret = find_plan(c, s, n)))
        return 0;
    cslt_plan *p = (cslt_plan *)calloc(1, sizeof *p);
    if (!p)
        return sd_diag_set(d, SD_ENOMEM, "cuSPARSELt");
    p->shape = s;
    p->n = n;
    int rc = plan_init(c, p, d);
    if (!rc)
        rc = ws_room(c, p->ws_bytes, d);
    if (!rc)
        rc = push_ptr((void ***)&c->plans, &c->n_plans, p, d);
    if (rc) {
        plan_free(&c->f, p);
        return sd_diag_wrap(d, rc, "[%lld, %lld] x %d rows", (long long)s->rows, (long long)s->cols, n);
    }
    *ret = p;
    return 0;
}

/* y[i] (+)= out[i] for i < n (n a multiple of 8: rows are multiples of 64), 8 a thread. */
__global__ void add_out_kernel(float *y, const __nv_bfloat16 *out, size_t n, int acc)
{
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < n;
         i += (size_t)gridDim.x * blockDim.x * 8) {
        const uint4 u = *reinterpret_cast<const uint4 *>(out + i);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
        float v[8];
        for (int k = 0; k < 4; k++) {
            v[2 * k] = __uint_as_float(w[k] << 16);
            v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
        }
        float4 *dst = reinterpret_cast<float4 *>(y + i);
        float4 a = acc ? dst[0] : make_float4(0, 0, 0, 0), b = acc ? dst[1] : make_float4(0, 0, 0, 0);
        dst[0] = make_float4(a.x + v[0], a.y + v[1], a.z + v[2], a.w + v[3]);
        dst[1] = make_float4(b.x + v[4], b.y + v[5], b.z + v[6], b.w + v[7]);
    }
}

/* c->out with room for n bf16 (first use of a larger problem: eager, synchronises the device). Once
 * a graph holds the buffer it grows at least twofold, so the retired ones take at most as much. */
static int out_room(sd_cslt *c, size_t n, sd_diag *d)
{
    if (n <= c->out_elems)
        return 0;
    if (c->captured && n < 2 * c->out_elems)
        n = 2 * c->out_elems;
    __nv_bfloat16 *p = NULL;
    cudaError_t e = cudaMalloc((void **)&p, n * sizeof *p);
    if (e != cudaSuccess)
        return sd_diag_set(d, SD_ENOMEM, "cuSPARSELt: output buffer of %zu bytes: %s", n * sizeof *p,
                           cudaGetErrorString(e));
    void *old = c->out;
    c->out = p;
    c->out_elems = n;
    return retire(c, old, d);
}

int sd_cslt_ready(const sd_cslt *c, const void *key, int T)
{
    const cslt_mat *m = c ? find_mat(c, key) : NULL;
    if (!m || T <= 0)
        return 0;
    const int n = sd_cslt_pad_rows(T);
    const cslt_plan *p = find_plan(c, m->shape, n);
    return p && (p->searched || !c->search) && p->ws_bytes <= c->ws_bytes &&
           (size_t)n * (size_t)m->shape->rows <= c->out_elems;
}

int sd_cslt_matmul(sd_cslt *c, const void *key, const void *x, float *y, int T, int acc, void *stream,
                   sd_diag *d)
{
    const cslt_mat *m = find_mat(c, key);
    if (!m)
        return sd_diag_set(d, SD_ENOTFOUND, "cuSPARSELt: no compressed copy of this weight");
    if (T <= 0 || (((uintptr_t)x | (uintptr_t)y) & 15))
        return sd_diag_set(d, SD_EINVAL,
                           "cuSPARSELt: %d rows, operands at %p and %p (16-byte aligned needed)", T, x,
                           (void *)y);
    const int n = sd_cslt_pad_rows(T);
    cudaStream_t st = (cudaStream_t)stream;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    SD_CU(d, cudaStreamIsCapturing(st, &cs));
    if (cs != cudaStreamCaptureStatusNone) { /* a graph: no plan, search or allocation may happen now */
        if (!sd_cslt_ready(c, key, T))
            return sd_diag_set(d, SD_EINVAL,
                               "cuSPARSELt: [%lld, %lld] x %d rows in a graph capture before any eager use",
                               (long long)m->shape->rows, (long long)m->shape->cols, n);
        c->captured = 1;
    }
    cslt_plan *p = NULL;
    SD_TRY(get_plan(c, m->shape, n, &p, d));
    SD_TRY(out_room(c, (size_t)n * (size_t)m->shape->rows, d));
    const float one = 1.f, zero = 0.f;
    if (c->search && !p->searched) {
        /* runs every algorithm config into the module's own product buffer (beta 0) and keeps the
         * fastest in the plan, whose workspace may then differ */
        SD_CSLT_CALL(
            c, d,
            cusparseLtMatmulSearch(&c->h, &p->plan, &one, m->buf, x, &zero, c->out, c->out, c->ws, &st, 1));
        p->searched = 1;
        SD_CSLT_CALL(c, d, cusparseLtMatmulGetWorkspace(&c->h, &p->plan, &p->ws_bytes));
        SD_TRY(ws_room(c, p->ws_bytes, d));
    }
    SD_CSLT_CALL(c, d,
                 cusparseLtMatmul(&c->h, &p->plan, &one, m->buf, x, &zero, c->out, c->out, c->ws, &st, 1));
    /* bf16 out: the fp32 output (and the residual add) in a pass of our own */
    const size_t elems = (size_t)T * (size_t)m->shape->rows;
    const size_t threads = 256, blocks = (elems / 8 + threads - 1) / threads;
    add_out_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), (unsigned)threads, 0, st>>>(y, c->out, elems,
                                                                                            acc);
    SD_CU(d, cudaGetLastError());
    return 0;
}

#endif
