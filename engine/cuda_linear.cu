/* cuda_linear: y = x W^T for the CUDA backend's linears. Decode (up to SD_NM_MAX_B rows; 2:4 to 16:32:
 * up to SD_NM_MAX_B_WIDE, or in tiles up to mm->max_wide): the kernels' bitmask SpMV / dense GEMV,
 * reading the weights once for all rows (once a tile). Prefill and larger batches: cuBLAS bf16 GEMM
 * (bitmask weights expanded into a dense scratch first). Each (shape, rows bucket) takes whichever
 * of the two timed faster at its first use. A 2:4 linear with a cuSPARSELt copy adds its sparse
 * GEMM to that choice above SD_NM_MAX_B_WIDE rows, and takes it always above the tiles' rows; a
 * graph capture runs it where an eager use has made its plan (cslt_can). */
#include "engine/cuda_impl.cuh"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/cuda_cslt.h"
#include "engine/tp_impl.cuh"
#include "kernels/nm_gemm.h"
#include "kernels/nm_spmv.h"

static size_t linear_elems(const sd_cu_linear *l)
{
    return l->bitmask ? (size_t)l->rows * (size_t)l->cols : 0;
}

/* Linear k (0 .. 4 n_layers) of w's layers: q/k/v, o, gate/up, down of layer k / 4. */
static const sd_cu_linear *layer_linear(const sd_cu_weights *w, int k)
{
    const sd_cu_layer *L = &w->layers[k / 4];
    const sd_cu_linear *ls[4] = {&L->qkv, &L->o, &L->gate_up, &L->down};
    return ls[k % 4];
}

int sd__cu_mm_init(sd_cu_mm *mm, const sd_cu_weights *w, int max_wide, cudaStream_t st, sd_diag *d)
{
    memset(mm, 0, sizeof *mm);
    if (max_wide < SD_NM_MAX_B_WIDE || max_wide > SD_NM_MAX_B_TILED)
        return sd_diag_set(d, SD_EINVAL, "cuda: %d rows for the wide kernels (%d..%d)", max_wide,
                           SD_NM_MAX_B_WIDE, SD_NM_MAX_B_TILED);
    mm->max_wide = max_wide;
    size_t need = linear_elems(&w->lm_head);
    int64_t max_rows = w->lm_head.rows, max_wide_rows = 0;
    for (int k = 0; k < 4 * w->n_layers; k++) {
        const sd_cu_linear *l = layer_linear(w, k);
        if (linear_elems(l) > need)
            need = linear_elems(l);
        if (l->rows > max_rows)
            max_rows = l->rows;
        if (l->bitmask && sd_nm_tcx_pattern(l->nm_n, l->nm_m) && l->rows > max_wide_rows)
            max_wide_rows = l->rows;
    }
    if (need) {
        SD_CU(d, cudaMalloc((void **)&mm->scratch, need * 2));
        mm->scratch_elems = need;
    }
    size_t tune_elems = (size_t)max_rows * SD_NM_MAX_B;
    if ((size_t)max_wide_rows * (size_t)max_wide > tune_elems)
        tune_elems = (size_t)max_wide_rows * (size_t)max_wide;
    SD_CU(d, cudaMalloc((void **)&mm->tune_y, tune_elems * 4));
    SD_TRY(sd_kernels_ctx_init((sd_kernels_ctx **)&mm->spmv, d));
    SD_CU(d, cudaEventCreate(&mm->ev[0]));
    SD_CU(d, cudaEventCreate(&mm->ev[1]));
    SD_CUBLAS(d, cublasCreate(&mm->blas));
    mm->blas_ws_bytes = 32u << 20;
    SD_CU(d, cudaMalloc(&mm->blas_ws, mm->blas_ws_bytes));
    SD_CUBLAS(d, cublasSetStream(mm->blas, st));
    SD_CUBLAS(d, cublasSetWorkspace(mm->blas, mm->blas_ws, mm->blas_ws_bytes));
    return 0;
}

/* A 2:4 linear cuSPARSELt can take: row-major 2:4 along the columns, both sizes multiples of 64. */
static int cslt_linear(const sd_cu_linear *l)
{
    return l->bitmask && l->nm_n == 2 && l->nm_m == 4 && l->rows % 64 == 0 && l->cols % 64 == 0;
}

int sd__cu_mm_cslt(sd_cu_mm *mm, const sd_cu_weights *w, int mode, cudaStream_t st, sd_diag *d)
{
    size_t need = 0, fr = 0, tot = 0;
    int n = 0;
    const int search = mode != 1, autom = mode == SD_CU_CSLT_AUTO;
    for (int k = 0; k < 4 * w->n_layers; k++) {
        const sd_cu_linear *l = layer_linear(w, k);
        if (cslt_linear(l)) {
            need += (size_t)l->rows * (size_t)l->cols * 9 / 8; /* bf16 values + metadata */
            n++;
        }
    }
    if (!n) /* dense or another pattern: nothing for cuSPARSELt to take */
        return 0;
    SD_CU(d, cudaMemGetInfo(&fr, &tot));
    const size_t reserve = (size_t)1 << 30; /* activations, workspaces and some KV cache */
    if (autom && need > fr / 2) {
        fprintf(stderr,
                "sparsed: cuSPARSELt left out: a second copy of the %d 2:4 linears (%.2f GB) would take more "
                "than half the %.2f GB of free device memory (SD_CUSPARSELT=2 insists)\n",
                n, need / 1e9, fr / 1e9);
        return 0;
    }
    if (need + reserve > fr)
        return sd_diag_set(d, SD_ENOMEM,
                           "SD_CUSPARSELT: a second copy of the %d 2:4 linears needs ~%.2f GB, %.2f GB of "
                           "device memory are free (1 GB kept for the rest)",
                           n, need / 1e9, fr / 1e9);
    if (autom) {
        sd_diag od = {};
        const int orc = sd_cslt_open(&mm->cslt, search, &od);
        if (orc) {
            fprintf(stderr, "sparsed: cuSPARSELt left out (2:4 prompt chunks on expansion + cuBLAS): %s\n",
                    sd_diag_str(&od, orc));
            return 0;
        }
    } else {
        SD_TRY(sd_cslt_open(&mm->cslt, search, d));
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < 4 * w->n_layers; k++) {
        const sd_cu_linear *l = layer_linear(w, k);
        if (!cslt_linear(l))
            continue;
        SD_TRY(
            sd__cu_expand_bitmask(l->values, l->mask, mm->scratch, l->rows, l->cols, mm->expand_warp, st, d));
        const int rc = sd_cslt_add(mm->cslt, l, mm->scratch, l->rows, l->cols, st, d);
        if (rc)
            return sd_diag_wrap(d, rc, "layer %d linear %d", k / 4, k % 4);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "sparsed: cuSPARSELt %s: %d 2:4 linears copied into its layout, %.2f GB, in %.1f s%s\n",
            sd_cslt_version(mm->cslt), n, sd_cslt_bytes(mm->cslt, NULL) / 1e9,
            (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9,
            search ? " (configs searched at first use)" : "");
    return 0;
}

void sd__cu_mm_free(sd_cu_mm *mm)
{
    if (!mm)
        return;
    sd_cslt_free(mm->cslt);
    if (mm->blas)
        cublasDestroy(mm->blas);
    cudaFree(mm->blas_ws);
    cudaFree(mm->scratch);
    cudaFree(mm->tune_y);
    sd_kernels_ctx_free((sd_kernels_ctx *)mm->spmv);
    for (int i = 0; i < 2; i++)
        if (mm->ev[i])
            cudaEventDestroy(mm->ev[i]);
    memset(mm, 0, sizeof *mm);
}

static void spmv_args(sd_nm_spmv_args *a, const sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in,
                      float *out, int T, int acc)
{
    memset(a, 0, sizeof *a);
    a->ctx = (const sd_kernels_ctx *)mm->spmv;
    a->n = l->nm_n;
    a->m = l->nm_m;
    a->rows = l->rows;
    a->cols = l->cols;
    a->B = T;
    a->values = (const uint16_t *)(l->bitmask ? l->values : l->w);
    a->mask = l->mask;
    a->x = (const uint16_t *)in;
    a->ldx = l->cols;
    a->y = out;
    a->ldy = l->rows;
    a->accumulate = acc;
}

/* The bitmask SpMV / dense GEMV: weights read once for all T rows (T <= SD_NM_MAX_B, or up to
 * mm->max_wide for 2:4 to 16:32: wide_ok). */
static int launch(const sd_cu_linear *l, const sd_nm_spmv_args *a, cudaStream_t st, sd_diag *d)
{
    int rc = l->bitmask ? sd_nm_spmv_launch(a, st) : sd_gemv_bf16_launch(a, st);
    if (rc)
        return sd_diag_set(d, rc, "cuda: %s [%lld, %lld] x %d rows%s: %s",
                           l->bitmask ? "bitmask SpMV" : "GEMV", (long long)l->rows, (long long)l->cols, a->B,
                           a->swiglu ? " with SwiGLU" : "", sd_strerror(rc));
    return 0;
}

static int run_kernel(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, float *out, int T,
                      int acc, cudaStream_t st, sd_diag *d)
{
    sd_nm_spmv_args a;
    spmv_args(&a, mm, l, in, out, T, acc);
    return launch(l, &a, st, d);
}

/* Row-major Y[T, rows] = X[T, cols] W[rows, cols]^T is column-major Y^T = W^T' X^T'. */
int sd__cu_gemm_bf16(cublasHandle_t blas, const __nv_bfloat16 *w, int64_t rows, int64_t cols,
                     const __nv_bfloat16 *in, float *out, int T, int acc, sd_diag *d)
{
    const float one = 1.f, beta = acc ? 1.f : 0.f;
    SD_CUBLAS(d, cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, T, (int)cols, &one, w, CUDA_R_16BF,
                              (int)cols, in, CUDA_R_16BF, (int)cols, &beta, out, CUDA_R_32F, (int)rows,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

static int capturing(cudaStream_t st)
{
    cudaStreamCaptureStatus cs;
    return cudaStreamIsCapturing(st, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone;
}

/* cuSPARSELt may take T rows of a 2:4 linear it holds a copy of: more rows than the plain wide
 * kernels take (SD_NM_MAX_B_WIDE), the operands with room for the padded rows, and inside a graph
 * capture (the decode graphs of 65-256 sequences) only where an eager use of as many padded rows
 * has made and searched its plan. On the 8B linears its searched configs ran 0.6-1.35x dense cuBLAS
 * at 128-512 rows and 1.1-1.35x from 1024 (kernels/NOTES.md v31): against the tiled kernels it
 * is timed (tune), against expansion + cuBLAS it always wins. */
static int cslt_can(const sd_cu_mm *mm, const sd_cu_linear *l, int T, cudaStream_t st)
{
    return mm->cslt && T > SD_NM_MAX_B_WIDE && sd_cslt_pad_rows(T) <= mm->row_cap &&
           sd_cslt_has(mm->cslt, l) &&
           (!capturing(st) || (!mm->cslt_graph_off && sd_cslt_ready(mm->cslt, l, T)));
}

/* The GEMM path: cuBLAS, bitmask weights expanded into the dense scratch first. */
static int run_blas(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, float *out, int T, int acc,
                    cudaStream_t st, sd_diag *d)
{
    if (l->bitmask)
        SD_TRY(
            sd__cu_expand_bitmask(l->values, l->mask, mm->scratch, l->rows, l->cols, mm->expand_warp, st, d));
    return sd__cu_gemm_bf16(mm->blas, l->bitmask ? mm->scratch : l->w, l->rows, l->cols, in, out, T, acc, d);
}

const sd_cu_tuned *sd__cu_find_tuned(const sd_cu_mm *mm, const sd_cu_tuned *p)
{
    for (int i = 0; i < mm->n_tuned; i++) {
        const sd_cu_tuned *t = &mm->tuned[i];
        if (t->rows == p->rows && t->cols == p->cols && t->B == p->B && t->dense == p->dense &&
            t->m == p->m && t->acc == p->acc)
            return t;
    }
    return NULL;
}

static const sd_cu_tuned *find_tuned(const sd_cu_mm *mm, const sd_cu_linear *l, int T, int acc)
{
    const sd_cu_tuned p = {
        l->rows, l->cols, sd_nm_tune_bucket(T), !l->bitmask, l->nm_m, acc, 0, 0.f, 0.f, 0, 0.f, 0, 0.f};
    return sd__cu_find_tuned(mm, &p);
}

/* The N:M GEMM of kernels/nm_gemm.h may take T rows of l: SD_NM_GEMM on (1: it takes them untimed,
 * 2: first use times it beside the other paths), a bitmask linear, more rows than the plain wide
 * kernels take, a problem it supports (the output buffer plays no part in that). */
static int nm_gemm_ok(const sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, int T)
{
    if (!mm->nm_gemm || !l->bitmask || T <= SD_NM_MAX_B_WIDE)
        return 0;
    sd_nm_spmv_args a;
    spmv_args(&a, mm, l, in, mm->tune_y, T, 0);
    return sd_nm_gemm_supported(&a);
}

static int run_nm_gemm(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, float *out, int T,
                       int acc, cudaStream_t st, sd_diag *d)
{
    sd_nm_spmv_args a;
    spmv_args(&a, mm, l, in, out, T, acc);
    const int rc = sd_nm_gemm_launch(&a, 0, st);
    if (rc)
        return sd_diag_set(d, rc, "cuda: N:M GEMM [%lld, %lld] x %d rows: %s", (long long)l->rows,
                           (long long)l->cols, T, sd_strerror(rc));
    return 0;
}

/* t's path from its times: the fastest of those timed (cuSPARSELt, the N:M GEMM: where they were);
 * use_blas keeps the faster of the two paths every process has, the fallback of the others. */
static void choose(sd_cu_tuned *t)
{
    t->use_blas = t->ms_blas < t->ms_kernel;
    float best = t->use_blas ? t->ms_blas : t->ms_kernel;
    t->use_cslt = t->ms_cslt > 0.f && t->ms_cslt < best;
    if (t->use_cslt)
        best = t->ms_cslt;
    t->use_nm_gemm = t->ms_nm_gemm > 0.f && t->ms_nm_gemm < best;
    if (t->use_nm_gemm)
        t->use_cslt = 0;
}

enum { PATH_KERNEL, PATH_BLAS, PATH_CSLT, PATH_NM_GEMM };

static int run_path(sd_cu_mm *mm, int path, const sd_cu_linear *l, const __nv_bfloat16 *in, float *out, int T,
                    int acc, cudaStream_t st, sd_diag *d)
{
    if (path == PATH_CSLT)
        return sd_cslt_matmul(mm->cslt, l, in, out, T, acc, st, d);
    if (path == PATH_NM_GEMM)
        return run_nm_gemm(mm, l, in, out, T, acc, st, d);
    return path == PATH_BLAS ? run_blas(mm, l, in, out, T, acc, st, d)
                             : run_kernel(mm, l, in, out, T, acc, st, d);
}

/* The best of 3 timed runs of one path after a warm-up run (which makes and searches a cuSPARSELt
 * plan), in ms. */
static int time_path(sd_cu_mm *mm, int path, const sd_cu_linear *l, const __nv_bfloat16 *in, float *out,
                     int T, int acc, cudaStream_t st, float *ret_ms, sd_diag *d)
{
    float best = 1e30f;
    for (int r = 0; r < 4; r++) {
        SD_CU(d, cudaEventRecord(mm->ev[0], st));
        SD_TRY(run_path(mm, path, l, in, out, T, acc, st, d));
        SD_CU(d, cudaEventRecord(mm->ev[1], st));
        SD_CU(d, cudaEventSynchronize(mm->ev[1]));
        float ms = 0;
        SD_CU(d, cudaEventElapsedTime(&ms, mm->ev[0], mm->ev[1]));
        if (r && ms < best) /* the first run warms up */
            best = ms;
    }
    *ret_ms = best;
    return 0;
}

/* Times cuSPARSELt for t's problem (T rows of l) and makes it t's path where it beats the others.
 * Eager only; the first run makes and searches the plan that a graph capture of as many rows then
 * finds ready. */
static int tune_cslt(sd_cu_mm *mm, sd_cu_tuned *t, const sd_cu_linear *l, const __nv_bfloat16 *in, int T,
                     int acc, cudaStream_t st, sd_diag *d)
{
    float tc = 0;
    if (mm->tp) /* as in tune: the synchronizations below must wait on this GPU's kernels only */
        SD_TRY(sd__tp_sync(mm->tp, st, d));
    SD_TRY(time_path(mm, PATH_CSLT, l, in, mm->tune_y, T, acc, st, &tc, d));
    t->ms_cslt = tc;
    choose(t);
    return 0;
}

/* First eager use of a (shape, pattern, rows bucket, accumulate) problem: autotune the kernels' config,
 * then time it against cuBLAS (and cuSPARSELt where it may take the rows, the N:M GEMM with
 * SD_NM_GEMM=2) and keep the fastest path (the SpMV wins at small T, GEMM as T grows). The timed runs write
 * mm->tune_y, never the caller's output (which an accumulating linear must find intact). NULL while a graph
 * is being captured (no timing there) or when the table is full. */
static int tune(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, int T, int acc, cudaStream_t st,
                const sd_cu_tuned **ret, sd_diag *d)
{
    *ret = NULL;
    if (capturing(st) || mm->n_tuned == SD_CU_MAX_TUNED)
        return 0;
    /* Tensor parallel: the stream may still hold this step's collectives, which wait on the
     * peers. Drain it under the group's deadline (and peer watch) first, so that the
     * synchronizations of the timing below wait only on this GPU's own kernels. */
    if (mm->tp)
        SD_TRY(sd__tp_sync(mm->tp, st, d));
    sd_nm_spmv_args a;
    float *y = mm->tune_y;
    spmv_args(&a, mm, l, in, y, T, acc);
    SD_TRY(sd_nm_autotune((sd_kernels_ctx *)mm->spmv, &a, 1, !l->bitmask, st, d));
    float tk = 0, tb = 0;
    SD_TRY(time_path(mm, PATH_KERNEL, l, in, y, T, acc, st, &tk, d));
    SD_TRY(time_path(mm, PATH_BLAS, l, in, y, T, acc, st, &tb, d));
    sd_cu_tuned t = {l->rows, l->cols, sd_nm_tune_bucket(T), !l->bitmask, l->nm_m, acc, 0, tk, tb, 0, 0.f,
                     0,       0.f};
    if (mm->nm_gemm == 2 && nm_gemm_ok(mm, l, in, T))
        SD_TRY(time_path(mm, PATH_NM_GEMM, l, in, y, T, acc, st, &t.ms_nm_gemm, d));
    choose(&t);
    if (cslt_can(mm, l, T, st))
        SD_TRY(tune_cslt(mm, &t, l, in, T, acc, st, d));
    mm->tuned[mm->n_tuned] = t;
    *ret = &mm->tuned[mm->n_tuned++];
    if (mm->on_tune)
        mm->on_tune(mm->on_tune_ud);
    if (mm->tune_log) {
        int rw = 0, split = 0;
        char cs[48] = "", ng[48] = "";
        sd_nm_config(&a, !l->bitmask, &rw, &split);
        if (t.ms_cslt > 0)
            snprintf(cs, sizeof cs, ", cuSPARSELt %.1f us", t.ms_cslt * 1e3);
        if (t.ms_nm_gemm > 0)
            snprintf(ng, sizeof ng, ", N:M GEMM %.1f us", t.ms_nm_gemm * 1e3);
        fprintf(stderr,
                "tune: [%lld, %lld] %s%d:%d, %d rows%s: kernel rw=%d split=%d %.1f us, cuBLAS %.1f us%s%s -> "
                "%s\n",
                (long long)l->rows, (long long)l->cols, l->bitmask ? "" : "dense ", l->nm_n, l->nm_m, T,
                acc ? " (accumulate)" : "", rw, split, tk * 1e3, tb * 1e3, cs, ng,
                t.use_cslt      ? "cuSPARSELt"
                : t.use_nm_gemm ? "N:M GEMM"
                : t.use_blas    ? "cuBLAS"
                                : "kernel");
    }
    return 0;
}

/* 17..mm->max_wide rows of a 2:4, 4:8, 8:16 or 16:32 linear may take the wide kernels, above
 * SD_NM_MAX_B_WIDE in tiles (unless SD_NM_TCX=0; first use times them against cuBLAS like any other
 * problem). */
static int wide_ok(const sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, int T)
{
    return sd_kernels_ctx_tcx((const sd_kernels_ctx *)mm->spmv, l->nm_m) && l->bitmask &&
           sd_nm_tcx_pattern(l->nm_n, l->nm_m) && l->cols % 64 == 0 && ((uintptr_t)in & 15) == 0 &&
           T <= mm->max_wide;
}

int sd__cu_linear_swiglu(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, __nv_bfloat16 *out,
                         int T, cudaStream_t st, int *done, sd_diag *d)
{
    *done = 0;
    if (!mm->swiglu || T > SD_NM_MAX_B || l->rows % 2)
        return 0;
    const sd_cu_tuned *t = find_tuned(mm, l, T, 0);
    if (!t)
        SD_TRY(tune(mm, l, in, T, 0, st, &t, d));
    if (!t || t->use_blas)
        return 0;
    sd_nm_spmv_args a;
    spmv_args(&a, mm, l, in, NULL, T, 0);
    /* the config tuned for the plain launch (the cache keys on the output type): the same kernel,
     * so the same sums, as sd__cu_linear would run */
    sd_nm_config(&a, !l->bitmask, &a.rows_per_warp, &a.split);
    a.y = out;
    a.ldy = l->rows / 2;
    a.y_bf16 = 1;
    a.swiglu = 1;
    if (!(mm->swiglu == 2 ? sd_nm_swiglu_ok(&a, !l->bitmask) : sd_nm_swiglu_pays(&a, !l->bitmask)))
        return 0;
    SD_TRY(launch(l, &a, st, d));
    *done = 1;
    mm->swiglu_launches++;
    return 0;
}

static int run_cslt(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, float *out, int T, int acc,
                    cudaStream_t st, sd_diag *d)
{
    if (capturing(st)) {
        mm->cslt_captured++;
        if (mm->cslt_graph_fail) { /* SD_CUSPARSELT_GRAPHS=2: the tests' capture failure, once */
            mm->cslt_graph_fail = 0;
            return sd_diag_set(d, SD_ECUDA,
                               "cuSPARSELt in a graph: a failure injected by SD_CUSPARSELT_GRAPHS=2");
        }
    }
    return sd_cslt_matmul(mm->cslt, l, in, out, T, acc, st, d);
}

int sd__cu_linear(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, float *out, int T, int acc,
                  cudaStream_t st, sd_diag *d)
{
    const int cs = cslt_can(mm, l, T, st), ng = nm_gemm_ok(mm, l, in, T);
    if (ng && !cs && mm->nm_gemm == 1) /* SD_NM_GEMM=1: untimed, in place of the tiles or expansion */
        return run_nm_gemm(mm, l, in, out, T, acc, st, d);
    if (T > SD_NM_MAX_B && !wide_ok(mm, l, in, T))
        return cs ? run_cslt(mm, l, in, out, T, acc, st, d) : run_blas(mm, l, in, out, T, acc, st, d);
    const sd_cu_tuned *t = find_tuned(mm, l, T, acc);
    if (!t)
        SD_TRY(tune(mm, l, in, T, acc, st, &t, d));
    else if (cs && t->ms_cslt <= 0.f && !capturing(st)) { /* tuned without the copies (a cache) */
        SD_TRY(tune_cslt(mm, (sd_cu_tuned *)t, l, in, T, acc, st, d)); /* an entry of mm->tuned */
        if (mm->on_tune)
            mm->on_tune(mm->on_tune_ud);
    }
    if (cs && (!mm->cslt_timed || (t && t->use_cslt)))
        return run_cslt(mm, l, in, out, T, acc, st, d);
    if (ng && t && t->use_nm_gemm)
        return run_nm_gemm(mm, l, in, out, T, acc, st, d);
    return t && t->use_blas ? run_blas(mm, l, in, out, T, acc, st, d)
                            : run_kernel(mm, l, in, out, T, acc, st, d);
}
