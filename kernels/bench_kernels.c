/* bench_kernels: 'sparsed bench kernels' — times the bitmask SpMV (every N:M pattern, and the
 * unstructured path), our dense GEMV and cuBLAS on the linears of Llama-3.1-8B, Qwen3-14B/32B,
 * Llama-3.3-70B and their TP=2/4 shards, B in {1,2,4,8,16}; reports effective bandwidth against
 * the read-only-stream and device-copy ceilings measured in the same run. */
#include "kernels/bench_kernels.h"

#include <stdio.h>
#include <string.h>

#ifndef SD_HAVE_CUDA
int sd_bench_kernels(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "sparsed bench kernels: this build has no CUDA support\n");
    return 2;
}
#else
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/bench_util.h"
#include "kernels/nm_spmv.h"

#define BK_L2_BYTES (60.0 * 1024 * 1024)
#define BK_MAX_COPIES 64
#define BK_BLAS_WS ((size_t)32 << 20)
#define BK_MAX_REPS 200
#define BK_NPAT 5 /* 2:4, 4:8, 8:16, 16:32, unstructured (on a 16:32 mask) */

static const int bk_pat[BK_NPAT][2] = {{2, 4}, {4, 8}, {8, 16}, {16, 32}, {0, 0}};

typedef struct bk_shape {
    const char *model, *mat;
    int tp;
    int64_t rows, cols;
} bk_shape;

#define BK_MAX_NB 8

typedef struct bk_res {
    double cublas, gemv, sp[BK_NPAT]; /* µs, 0 = not measured */
    int gemv_rw, gemv_split, sp_rw[BK_NPAT], sp_split[BK_NPAT];
} bk_res;

typedef struct bk {
    int quick, reps, pdl, tcx, c24, sp24;
    const char *model;                 /* --model: only the models whose name contains it (NULL: all) */
    int tp;                            /* --tp: only this tensor-parallel degree (0: all) */
    int batches[BK_MAX_NB], n_batches; /* --batch: these instead of the default list */
    cudaStream_t s;
    cublasHandle_t blas;
    void *blas_ws; /* a fixed cuBLAS workspace, so its calls can be captured in a graph */
    sd_kernels_ctx *ctx;
    cudaEvent_t ev[2 * BK_MAX_REPS];
    double read_gbs, copy_gbs;
    /* the current shape's buffers: ncopy rotation copies of each */
    int nd, ns;
    uint16_t *dw[BK_MAX_COPIES], *sv[BK_MAX_COPIES];
    uint32_t *sm[BK_MAX_COPIES];
    uint16_t *x;
    float *y;
} bk;

#define BK_CU(call)                                                                                          \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "bench kernels: %s: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__,      \
                    __LINE__);                                                                               \
            return -1;                                                                                       \
        }                                                                                                    \
    } while (0)
#define BK_RC(call)                                                                                          \
    do {                                                                                                     \
        int r_ = (call);                                                                                     \
        if (r_) {                                                                                            \
            fprintf(stderr, "bench kernels: %s failed (%d) (%s:%d)\n", #call, r_, __FILE__, __LINE__);       \
            return -1;                                                                                       \
        }                                                                                                    \
    } while (0)

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* What one timed launch does: kind 0 = our SpMV, 1 = our GEMV, 2 = cuBLAS. */
typedef struct bk_job {
    int kind;
    sd_nm_spmv_args a[BK_MAX_COPIES];
    int n;
} bk_job;

static int bk_launch(bk *b, const bk_job *j, int i)
{
    const sd_nm_spmv_args *a = &j->a[i % j->n];
    if (j->kind == 0)
        return sd_nm_spmv_launch(a, b->s);
    if (j->kind == 1)
        return sd_gemv_bf16_launch(a, b->s);
    const float one = 1.0f, zero = 0.0f;
    /* y[B, ldy] row-major is column-major [rows, B]; W [rows, cols] row-major is A^T. */
    cublasStatus_t st =
        cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)a->rows, a->B, (int)a->cols, &one, a->values,
                     CUDA_R_16BF, (int)a->cols, a->x, CUDA_R_16BF, (int)a->ldx, &zero, a->y, CUDA_R_32F,
                     (int)a->ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

/* Per-kernel µs: K launches (rotating the copies) captured in a CUDA graph, as the decode step
 * runs them; the median over reps replays (each bracketed by events) divided by K. */
#define BK_GRAPH_K 20
static int bk_time(bk *b, const bk_job *j, double *us)
{
    for (int i = 0; i < 3; i++) /* warm-up outside the capture (module load, attributes) */
        BK_RC(bk_launch(b, j, i));
    BK_CU(cudaStreamSynchronize(b->s));
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    BK_CU(cudaStreamBeginCapture(b->s, cudaStreamCaptureModeRelaxed));
    int rc = 0;
    for (int i = 0; i < BK_GRAPH_K && !rc; i++)
        rc = bk_launch(b, j, i);
    cudaError_t e = cudaStreamEndCapture(b->s, &g);
    if (rc || e != cudaSuccess) {
        fprintf(stderr, "bench kernels: graph capture failed (%d, %s)\n", rc, cudaGetErrorString(e));
        cudaGraphDestroy(g);
        return -1;
    }
    e = cudaGraphInstantiate(&ge, g, 0);
    cudaGraphDestroy(g);
    BK_CU(e);
    for (int i = 0; i < 2; i++)
        BK_CU(cudaGraphLaunch(ge, b->s));
    for (int i = 0; i < b->reps; i++) {
        BK_CU(cudaEventRecord(b->ev[2 * i], b->s));
        BK_CU(cudaGraphLaunch(ge, b->s));
        BK_CU(cudaEventRecord(b->ev[2 * i + 1], b->s));
    }
    BK_CU(cudaStreamSynchronize(b->s));
    cudaGraphExecDestroy(ge);
    float t[BK_MAX_REPS];
    for (int i = 0; i < b->reps; i++)
        BK_CU(cudaEventElapsedTime(&t[i], b->ev[2 * i], b->ev[2 * i + 1]));
    qsort(t, (size_t)b->reps, sizeof t[0], cmp_f);
    *us = 1000.0 * t[b->reps / 2] / BK_GRAPH_K;
    return 0;
}

/* Ceilings: a read-only stream over 4 GiB, and a 2 GiB device-to-device copy (read + write). */
static int bk_ceilings(bk *b)
{
    const size_t n = (size_t)4 << 30;
    void *p = NULL, *q = NULL;
    float *sink = NULL;
    BK_CU(cudaMalloc(&p, n));
    BK_CU(cudaMalloc((void **)&sink, 65536 * sizeof(float)));
    BK_RC(sd_bench_fill_bf16(p, (int64_t)(n / 2), 1, b->s));
    float t[20], ms;
    for (int i = 0; i < 12; i++) {
        BK_CU(cudaEventRecord(b->ev[0], b->s));
        BK_RC(sd_bench_read_launch(p, (int64_t)(n / 16), sink, b->s));
        BK_CU(cudaEventRecord(b->ev[1], b->s));
        BK_CU(cudaEventSynchronize(b->ev[1]));
        BK_CU(cudaEventElapsedTime(&ms, b->ev[0], b->ev[1]));
        t[i] = ms;
    }
    qsort(t + 2, 10, sizeof t[0], cmp_f);
    b->read_gbs = (double)n / (t[2 + 5] * 1e-3) / 1e9;
    BK_CU(cudaMalloc(&q, n / 2));
    for (int i = 0; i < 12; i++) {
        BK_CU(cudaEventRecord(b->ev[0], b->s));
        BK_CU(cudaMemcpyAsync(q, p, n / 2, cudaMemcpyDeviceToDevice, b->s));
        BK_CU(cudaEventRecord(b->ev[1], b->s));
        BK_CU(cudaEventSynchronize(b->ev[1]));
        BK_CU(cudaEventElapsedTime(&ms, b->ev[0], b->ev[1]));
        t[i] = ms;
    }
    qsort(t + 2, 10, sizeof t[0], cmp_f);
    b->copy_gbs = (double)n / (t[2 + 5] * 1e-3) / 1e9; /* n/2 read + n/2 written */
    cudaFree(p), cudaFree(q), cudaFree(sink);
    return 0;
}

static void bk_free_bufs(bk *b)
{
    for (int i = 0; i < BK_MAX_COPIES; i++) {
        cudaFree(b->dw[i]), cudaFree(b->sv[i]), cudaFree(b->sm[i]);
        b->dw[i] = b->sv[i] = NULL, b->sm[i] = NULL;
    }
    cudaFree(b->x), cudaFree(b->y);
    b->x = NULL, b->y = NULL;
}

static int bk_copies(double bytes)
{
    int n = (int)(3.0 * BK_L2_BYTES / bytes) + 1;
    return n < 2 ? 2 : n > BK_MAX_COPIES ? BK_MAX_COPIES : n;
}

static int bk_alloc_shape(bk *b, const bk_shape *sh)
{
    int64_t r = sh->rows, c = sh->cols;
    b->nd = bk_copies((double)r * c * 2);
    b->ns = bk_copies((double)r * c * 1.125);
    for (int i = 0; i < b->nd; i++) {
        BK_CU(cudaMalloc((void **)&b->dw[i], (size_t)(r * c) * 2));
        BK_RC(sd_bench_fill_bf16(b->dw[i], r * c, 100 + i, b->s));
    }
    for (int i = 0; i < b->ns; i++) {
        BK_CU(cudaMalloc((void **)&b->sv[i], (size_t)(r * c / 2) * 2));
        BK_CU(cudaMalloc((void **)&b->sm[i], (size_t)(r * c / 32) * 4));
        BK_RC(sd_bench_fill_bf16(b->sv[i], r * c / 2, 200 + i, b->s));
    }
    BK_CU(cudaMalloc((void **)&b->x, (size_t)(SD_NM_MAX_B * c) * 2));
    BK_CU(cudaMalloc((void **)&b->y, (size_t)(SD_NM_MAX_B * r) * 4));
    BK_RC(sd_bench_fill_bf16(b->x, SD_NM_MAX_B * c, 7, b->s));
    return 0;
}

static void bk_job_fill(bk *b, bk_job *j, int kind, const bk_shape *sh, int B, int n, int m)
{
    j->kind = kind;
    j->n = kind == 0 ? b->ns : b->nd;
    for (int i = 0; i < j->n; i++) {
        sd_nm_spmv_args *a = &j->a[i];
        memset(a, 0, sizeof *a);
        a->ctx = b->ctx, a->n = n, a->m = m, a->rows = sh->rows, a->cols = sh->cols, a->B = B;
        a->values = kind == 0 ? b->sv[i] : b->dw[i];
        a->mask = kind == 0 ? b->sm[i] : NULL;
        a->x = b->x, a->ldx = sh->cols, a->y = b->y, a->ldy = sh->rows;
    }
}

/* Measures every kernel on one shape for every B. */
static int bk_run_shape(bk *b, const bk_shape *sh, const int *Bs, int nB, bk_res *res)
{
    static bk_job j; /* large; one at a time */
    BK_RC(bk_alloc_shape(b, sh));
    sd_diag d = {0};
    for (int bi = 0; bi < nB; bi++) {
        bk_res *r = &res[bi];
        memset(r, 0, sizeof *r);
        bk_job_fill(b, &j, 2, sh, Bs[bi], 0, 0);
        BK_RC(bk_time(b, &j, &r->cublas));
        bk_job_fill(b, &j, 1, sh, Bs[bi], 0, 0);
        if (sd_nm_autotune(b->ctx, j.a, j.n, 1, b->s, &d))
            return fprintf(stderr, "bench kernels: %s\n", d.msg), -1;
        sd_nm_config(&j.a[0], 1, &r->gemv_rw, &r->gemv_split);
        BK_RC(bk_time(b, &j, &r->gemv));
    }
    for (int p = 0; p < BK_NPAT; p++) {
        if (b->quick && p != 0 && p != 3)
            continue;
        int m = bk_pat[p][1] ? bk_pat[p][1] : 32; /* unstructured runs on a 16:32 mask */
        for (int i = 0; i < b->ns; i++)
            BK_RC(sd_bench_fill_nm_mask(b->sm[i], sh->rows * sh->cols / 32, m, 300 + 10 * i + p, b->s));
        for (int bi = 0; bi < nB; bi++) {
            if (p == 4 && Bs[bi] != 1)
                continue;
            bk_res *r = &res[bi];
            bk_job_fill(b, &j, 0, sh, Bs[bi], bk_pat[p][0], bk_pat[p][1]);
            if (sd_nm_autotune(b->ctx, j.a, j.n, 0, b->s, &d))
                return fprintf(stderr, "bench kernels: %s\n", d.msg), -1;
            sd_nm_config(&j.a[0], 0, &r->sp_rw[p], &r->sp_split[p]);
            BK_RC(bk_time(b, &j, &r->sp[p]));
        }
    }
    bk_free_bufs(b);
    return 0;
}

static double bk_bytes(const bk_shape *sh, int B, int sparse)
{
    double w = sparse ? (double)sh->rows * sh->cols * 1.125 : (double)sh->rows * sh->cols * 2.0;
    return w + (double)B * sh->cols * 2.0 + (double)B * sh->rows * 4.0;
}

/* Percent of the read-only ceiling reached on the bytes the kernel must move. */
static double bk_pct(const bk *b, const bk_shape *sh, int B, int sparse, double us)
{
    return us > 0 ? 100.0 * bk_bytes(sh, B, sparse) / (us * 1e-6) / 1e9 / b->read_gbs : 0.0;
}

static void bk_header(FILE *f)
{
    fprintf(f, "| model | matrix | TP | rows | cols | B | cuBLAS µs | GEMV µs (%%rd) | 2:4 µs (%%rd) | 4:8 "
               "µs (%%rd) "
               "| 8:16 µs (%%rd) | 16:32 µs (%%rd) | unstr µs | sparse ×GEMV (min) | ×cuBLAS (min) | "
               "pattern spread |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
}

/* What issue #3 asks of one batch size on the Llama-3.1-8B shapes (TP=1), gathered over its rows:
 * the lowest %rd of each pattern and of our GEMV, the lowest speedups of the slowest pattern
 * over our GEMV and cuBLAS, the widest pattern spread. */
typedef struct bk_goal {
    int rows;
    double sp_rd[4], gemv_rd, x_gemv, x_cublas, spread;
} bk_goal;

static void bk_goal_reset(bk_goal *g)
{
    g->rows = 0;
    for (int p = 0; p < 4; p++)
        g->sp_rd[p] = 1e30;
    g->gemv_rd = g->x_gemv = g->x_cublas = 1e30;
    g->spread = 0;
}

static double bk_min(double a, double b)
{
    return a < b ? a : b;
}

static double bk_max(double a, double b)
{
    return a > b ? a : b;
}

/* The slowest and fastest measured N:M pattern of a row (µs); hi 0 when none was measured. */
static void bk_span(const bk_res *r, double *lo, double *hi)
{
    *lo = 1e30, *hi = 0;
    for (int p = 0; p < 4; p++)
        if (r->sp[p] > 0)
            *lo = bk_min(*lo, r->sp[p]), *hi = bk_max(*hi, r->sp[p]);
}

/* One table row. */
static void bk_row(FILE *f, const bk *b, const bk_shape *sh, int B, const bk_res *r)
{
    double lo, hi;
    bk_span(r, &lo, &hi);
    fprintf(f, "| %s | %s | %d | %lld | %lld | %d | %.1f | %.1f (%.0f%%) |", sh->model, sh->mat, sh->tp,
            (long long)sh->rows, (long long)sh->cols, B, r->cublas, r->gemv, bk_pct(b, sh, B, 0, r->gemv));
    for (int p = 0; p < 4; p++)
        if (r->sp[p] > 0)
            fprintf(f, " %.1f (%.0f%%) |", r->sp[p], bk_pct(b, sh, B, 1, r->sp[p]));
        else
            fprintf(f, " – |");
    if (r->sp[4] > 0)
        fprintf(f, " %.1f |", r->sp[4]);
    else
        fprintf(f, " – |");
    fprintf(f, " %.2f | %.2f | %.1f%% |\n", r->gemv / hi, r->cublas / hi, 100.0 * (hi - lo) / lo);
}

/* A row's share of the targets' worst cases. */
static void bk_goal_add(bk_goal *g, const bk *b, const bk_shape *sh, int B, const bk_res *r)
{
    double lo, hi;
    bk_span(r, &lo, &hi);
    for (int p = 0; p < 4; p++)
        if (r->sp[p] > 0)
            g->sp_rd[p] = bk_min(g->sp_rd[p], bk_pct(b, sh, B, 1, r->sp[p]));
    g->rows++;
    g->gemv_rd = bk_min(g->gemv_rd, bk_pct(b, sh, B, 0, r->gemv));
    g->x_gemv = bk_min(g->x_gemv, r->gemv / hi);
    g->x_cublas = bk_min(g->x_cublas, r->cublas / hi);
    g->spread = bk_max(g->spread, 100.0 * (hi - lo) / lo);
}

/* The targets' table: one line per batch size measured on the Llama-3.1-8B shapes. */
static void bk_goals(FILE *f, const int *Bs, int nB, const bk_goal *g)
{
    fprintf(f, "\nIssue #3's targets on the Llama-3.1-8B shapes (TP=1; each cell the worst of the four "
               "matrices): sparse ≥ 90%% of the read ceiling and dense GEMV ≥ 85%% at B = 1; the slowest "
               "pattern ≥ 1.6× our GEMV at B = 1 and ≥ 1.4× at B = 8; faster than cuBLAS; patterns within "
               "5%% of each other.\n\n");
    fprintf(f, "| B | 2:4 %%rd | 4:8 %%rd | 8:16 %%rd | 16:32 %%rd | GEMV %%rd | sparse ×GEMV | ×cuBLAS | "
               "pattern spread |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int bi = 0; bi < nB; bi++) {
        if (!g[bi].rows)
            continue;
        fprintf(f, "| %d |", Bs[bi]);
        for (int p = 0; p < 4; p++)
            if (g[bi].sp_rd[p] < 1e30)
                fprintf(f, " %.0f%% |", g[bi].sp_rd[p]);
            else
                fprintf(f, " – |");
        fprintf(f, " %.0f%% | %.2f× | %.2f× | %.1f%% |\n", g[bi].gemv_rd, g[bi].x_gemv, g[bi].x_cublas,
                g[bi].spread);
    }
}

static int bk_shapes(bk_shape *out, const bk *b)
{
    const int quick = b->quick;
    /* hidden, q heads*128, kv dim total (k+v), intermediate */
    static const struct {
        const char *name;
        int64_t hidden, q, kv, inter;
    } models[] = {{"Llama-3.1-8B", 4096, 4096, 2048, 14336},
                  {"Qwen3-14B", 5120, 5120, 2048, 17408},
                  {"Qwen3-32B", 5120, 8192, 2048, 25600},
                  {"Llama-3.3-70B", 8192, 8192, 2048, 28672}};
    int n = 0;
    for (int mi = 0; mi < (quick ? 1 : 4); mi++)
        for (int tp = 1; tp <= (quick ? 1 : 4); tp *= 2) {
            if ((b->model && !strcasestr(models[mi].name, b->model)) || (b->tp && tp != b->tp))
                continue;
            int64_t h = models[mi].hidden;
            bk_shape s[4] = {{models[mi].name, "qkv", tp, (models[mi].q + models[mi].kv) / tp, h},
                             {models[mi].name, "o", tp, h, models[mi].q / tp},
                             {models[mi].name, "gate_up", tp, 2 * models[mi].inter / tp, h},
                             {models[mi].name, "down", tp, h, models[mi].inter / tp}};
            for (int i = 0; i < 4; i++)
                out[n++] = s[i];
        }
    return n;
}

static int bk_init(bk *b)
{
    BK_CU(cudaSetDevice(0));
    BK_CU(cudaStreamCreate(&b->s));
    if (cublasCreate(&b->blas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(b->blas, b->s) != CUBLAS_STATUS_SUCCESS)
        return fprintf(stderr, "bench kernels: cuBLAS init failed\n"), -1;
    sd_diag d = {0};
    if (sd_kernels_ctx_init(&b->ctx, &d))
        return fprintf(stderr, "bench kernels: %s\n", d.msg), -1;
    sd_kernels_ctx_set_pdl(b->ctx, b->pdl);
    sd_kernels_ctx_set_tcx(b->ctx, b->tcx ? SD_NM_TCX_ALL : SD_NM_TCX_NONE);
    sd_kernels_ctx_set_c24(b->ctx, b->c24 ? SD_NM_C24_ALL : SD_NM_C24_NONE);
    sd_kernels_ctx_set_sp24(b->ctx, b->sp24);
    for (int i = 0; i < 2 * BK_MAX_REPS; i++)
        BK_CU(cudaEventCreate(&b->ev[i]));
    return 0;
}

static void bk_fini(bk *b)
{
    bk_free_bufs(b);
    for (int i = 0; i < 2 * BK_MAX_REPS; i++)
        if (b->ev[i])
            cudaEventDestroy(b->ev[i]);
    if (b->blas)
        cublasDestroy(b->blas);
    cudaFree(b->blas_ws);
    sd_kernels_ctx_free(b->ctx);
    if (b->s)
        cudaStreamDestroy(b->s);
}

static int bk_main(bk *b, const char *out, const char *cmdline)
{
    struct cudaDeviceProp prop;
    BK_CU(cudaGetDeviceProperties(&prop, 0));
    BK_RC(bk_ceilings(b));
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    FILE *md = out ? fopen(out, "w") : NULL;
    if (out && !md)
        return fprintf(stderr, "bench kernels: cannot write %s\n", out), -1;
    FILE *fs[2] = {stdout, md};
    for (int k = 0; k < 2; k++)
        if (fs[k])
            fprintf(
                fs[k],
                "# sparsed bench kernels\n\n- date: %s\n- GPU: %s (%d SMs, L2 %d MB)\n- command: `%s`\n"
                "- ceilings: read-only stream %.0f GB/s, device copy (read+write) %.0f GB/s\n"
                "- %%rd = effective GB/s on the bytes the kernel must move (weights [+ masks] + x + y fp32) "
                "over the read-only ceiling; per kernel: median of %d replays of a CUDA graph of 20 launches "
                "/ 20, weights rotated over copies > 3× L2; programmatic dependent launch %s; the 2:4 / 4:8 "
                "/ 8:16 / 16:32 "
                "register-expanding tensor-core kernels (cfg 24, 128) %s; the batch-1 2:4 and 4:8 compacting "
                "kernels (cfg 101, 102, 103) %s; the 2:4 sparse tensor-core kernels (cfg 25, 27; 29, 30 from "
                "8 vectors) %s\n\n",
                date, prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, cmdline, b->read_gbs,
                b->copy_gbs, b->reps, b->pdl ? "on (the default)" : "off (--no-pdl)",
                b->tcx ? "among the candidates (the default)" : "not tried (--no-tcx)",
                b->c24 ? "among the candidates (the default)" : "not tried (--no-c24)",
                b->sp24 ? "among the candidates (the default)" : "not tried (--no-sp24)");
    bk_shape shapes[64];
    int ns = bk_shapes(shapes, b); /* not 0: sd_bench_kernels checked */
    const int Bs_full[] = {1, 2, 4, 8, 16}, Bs_quick[] = {1, 8};
    const int *Bs = b->n_batches ? b->batches : b->quick ? Bs_quick : Bs_full;
    int nB = b->n_batches ? b->n_batches : b->quick ? 2 : 5;
    for (int k = 0; k < 2; k++)
        if (fs[k])
            bk_header(fs[k]);
    bk_goal goals[BK_MAX_NB];
    for (int bi = 0; bi < nB; bi++)
        bk_goal_reset(&goals[bi]);
    for (int i = 0; i < ns; i++) {
        bk_res res[BK_MAX_NB];
        if (bk_run_shape(b, &shapes[i], Bs, nB, res)) {
            if (md)
                fclose(md);
            return -1;
        }
        const int named = shapes[i].tp == 1 && !strcmp(shapes[i].model, "Llama-3.1-8B");
        for (int bi = 0; bi < nB; bi++) {
            for (int k = 0; k < 2; k++)
                if (fs[k])
                    bk_row(fs[k], b, &shapes[i], Bs[bi], &res[bi]);
            if (named)
                bk_goal_add(&goals[bi], b, &shapes[i], Bs[bi], &res[bi]);
            fprintf(stderr, "cfg %s %s tp%d B=%d gemv rw=%d split=%d; sparse rw/split:", shapes[i].model,
                    shapes[i].mat, shapes[i].tp, Bs[bi], res[bi].gemv_rw, res[bi].gemv_split);
            for (int p = 0; p < BK_NPAT; p++)
                fprintf(stderr, " %d/%d", res[bi].sp_rw[p], res[bi].sp_split[p]);
            fputc('\n', stderr);
        }
        fflush(stdout);
        if (md)
            fflush(md);
    }
    for (int k = 0; k < 2; k++)
        if (fs[k])
            bk_goals(fs[k], Bs, nB, goals);
    if (md)
        fclose(md);
    return 0;
}

/* "1,2,4": the batch sizes to measure instead of the default list; -1 on a bad list. */
static int bk_parse_batches(bk *b, const char *list)
{
    b->n_batches = 0;
    for (const char *p = list;; p++) { /* a number after every comma: "2," is refused too */
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > SD_NM_MAX_B || b->n_batches == BK_MAX_NB || (*end && *end != ','))
            return -1;
        b->batches[b->n_batches++] = (int)v;
        if (!*end)
            return 0;
        p = end;
    }
}

int sd_bench_kernels(int argc, char **argv)
{
    bk b;
    memset(&b, 0, sizeof b);
    b.reps = 50;
    b.pdl = 1;
    b.tcx = 1;
    b.c24 = 1;
    b.sp24 = 1;
    const char *out = NULL;
    char cmdline[1024] = "sparsed bench";
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(cmdline);
        snprintf(cmdline + l, sizeof cmdline - l, " %s", argv[i]);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            b.quick = 1;
            b.reps = 20;
        } else if (!strcmp(argv[i], "--no-pdl")) {
            b.pdl = 0;
        } else if (!strcmp(argv[i], "--no-tcx")) {
            b.tcx = 0;
        } else if (!strcmp(argv[i], "--no-c24")) {
            b.c24 = 0;
        } else if (!strcmp(argv[i], "--no-sp24")) {
            b.sp24 = 0;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            b.model = argv[++i];
        } else if (!strcmp(argv[i], "--tp") && i + 1 < argc) {
            b.tp = atoi(argv[++i]);
            if (b.tp != 1 && b.tp != 2 && b.tp != 4)
                return fprintf(stderr, "bench kernels: --tp must be 1, 2 or 4\n"), 2;
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            if (bk_parse_batches(&b, argv[++i]))
                return fprintf(stderr,
                               "bench kernels: --batch takes 1 to %d batch sizes of 1..%d, e.g. 1,2,4\n",
                               BK_MAX_NB, SD_NM_MAX_B),
                       2;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            b.reps = atoi(argv[++i]);
            if (b.reps < 1 || b.reps > BK_MAX_REPS)
                return fprintf(stderr, "bench kernels: --reps must be 1..%d\n", BK_MAX_REPS), 2;
        } else {
            fprintf(stderr,
                    "usage: sparsed bench kernels [--quick] [--no-pdl] [--no-tcx] [--no-c24] [--no-sp24] "
                    "[--out FILE] [--reps N] [--batch B1,B2,...] [--model NAME] [--tp 1|2|4]\n");
            return 2;
        }
    }
    bk_shape shapes[64];
    if (bk_shapes(shapes, &b) == 0) /* before the GPU is touched */
        return fprintf(stderr,
                       "bench kernels: no shape of %s at TP=%d (--model: a part of Llama-3.1-8B, Qwen3-14B, "
                       "Qwen3-32B or Llama-3.3-70B%s)\n",
                       b.model ? b.model : "any model", b.tp,
                       b.quick ? "; --quick measures Llama-3.1-8B only" : ""),
               2;
    int rc = bk_init(&b);
    if (!rc)
        rc = bk_main(&b, out, cmdline);
    bk_fini(&b);
    return rc ? 1 : 0;
}
#endif
