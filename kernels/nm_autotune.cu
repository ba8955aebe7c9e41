// nm_autotune: the kernels context (device facts + autotune cache) and the autotuner that times
// candidate (rows per warp, split-K) configs once per (kind, pattern, shape, B, output dtype).
#include "kernels/nm_spmv_impl.h"

#include <stdlib.h>
#include <string.h>

#include <vector>
#include <algorithm>

extern "C" int sd_kernels_ctx_init(sd_kernels_ctx **ret, sd_diag *d)
{
    sd_kernels_ctx *ctx = static_cast<sd_kernels_ctx *>(calloc(1, sizeof *ctx));
    if (!ctx)
        return sd_diag_set(d, SD_ENOMEM, "kernels context: out of memory");
    cudaError_t e = cudaGetDevice(&ctx->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&ctx->n_sm, cudaDevAttrMultiProcessorCount, ctx->device);
    if (e != cudaSuccess) {
        free(ctx);
        return sd_diag_set(d, SD_ECUDA, "kernels context: %s", cudaGetErrorString(e));
    }
    ctx->pdl = 1;
    ctx->tcx = SD_NM_TCX_ALL;
    ctx->c24 = SD_NM_C24_ALL;
    ctx->sp24 = 1;
    ctx->sk = SD_NM_SK_TCX;
    *ret = ctx;
    return 0;
}

extern "C" void sd_kernels_ctx_set_pdl(sd_kernels_ctx *ctx, int on)
{
    if (ctx)
        ctx->pdl = on != 0;
}

extern "C" void sd_kernels_ctx_set_tcx(sd_kernels_ctx *ctx, int mode)
{
    if (ctx && mode >= SD_NM_TCX_NONE && mode <= SD_NM_TCX_NO_1632)
        ctx->tcx = mode;
}

extern "C" void sd_kernels_ctx_set_c24(sd_kernels_ctx *ctx, int mode)
{
    if (ctx && mode >= SD_NM_C24_NONE && mode <= SD_NM_C24_ALL)
        ctx->c24 = mode;
}

extern "C" void sd_kernels_ctx_set_sp24(sd_kernels_ctx *ctx, int on)
{
    if (ctx)
        ctx->sp24 = on != 0;
}

extern "C" void sd_kernels_ctx_set_sk(sd_kernels_ctx *ctx, int mode)
{
    if (ctx && mode >= SD_NM_SK_NEVER && mode <= SD_NM_SK_ALWAYS)
        ctx->sk = mode;
}

extern "C" void sd_kernels_ctx_set_deterministic(sd_kernels_ctx *ctx, int on)
{
    if (ctx)
        ctx->deterministic = on != 0;
}

extern "C" int sd_kernels_ctx_tcx(const sd_kernels_ctx *ctx, int m)
{
    if (!ctx)
        return 1;
    return ctx->tcx == SD_NM_TCX_ALL || (ctx->tcx == SD_NM_TCX_NO_1632 && m != 32);
}

extern "C" void sd_kernels_ctx_free(sd_kernels_ctx *ctx)
{
    free(ctx);
}

static sd_nm_key make_key(const sd_nm_spmv_args *a, int dense)
{
    sd_nm_key k;
    memset(&k, 0, sizeof k);
    k.dense = dense;
    k.n = dense ? 0 : a->n;
    k.m = dense ? 0 : a->m;
    k.B = sd_nm_tune_bucket(a->B);
    k.y_bf16 = a->y_bf16 != 0;
    k.accumulate = a->accumulate != 0;
    k.rows = a->rows;
    k.cols = a->cols;
    return k;
}

static int key_eq(const sd_nm_key *x, const sd_nm_key *y)
{
    return x->dense == y->dense && x->n == y->n && x->m == y->m && x->B == y->B && x->y_bf16 == y->y_bf16 &&
           x->accumulate == y->accumulate && x->rows == y->rows && x->cols == y->cols;
}

extern "C" int sd__nm_cache_lookup(const sd_kernels_ctx *ctx, const sd_nm_spmv_args *a, int dense, int *rw,
                                   int *split)
{
    if (!ctx)
        return SD_ENOTFOUND;
    sd_nm_key k = make_key(a, dense);
    for (int i = 0; i < ctx->n_entries; i++)
        if (key_eq(&ctx->entries[i].key, &k)) {
            *rw = ctx->entries[i].rows_per_warp;
            *split = ctx->entries[i].split;
            return 0;
        }
    return SD_ENOTFOUND;
}

static void cache_put(sd_kernels_ctx *ctx, const sd_nm_key *k, int rw, int split, int rw2, int split2)
{
    int slot = -1;
    for (int i = 0; i < ctx->n_entries && slot < 0; i++)
        if (key_eq(&ctx->entries[i].key, k))
            slot = i;
    if (slot < 0)
        slot = ctx->n_entries < SD_NM_CACHE_MAX ? ctx->n_entries++ : ctx->next_slot++ % SD_NM_CACHE_MAX;
    ctx->entries[slot] = (sd_nm_entry){*k, rw, split, rw2, split2};
}

extern "C" int sd_kernels_ctx_export(const sd_kernels_ctx *ctx, sd_nm_tuned *out, int max)
{
    if (!ctx)
        return 0;
    for (int i = 0; i < ctx->n_entries && i < max; i++) {
        const sd_nm_entry *e = &ctx->entries[i];
        out[i] = (sd_nm_tuned){e->key.dense,      e->key.n,    e->key.m,    e->key.B,         e->key.y_bf16,
                               e->key.accumulate, e->key.rows, e->key.cols, e->rows_per_warp, e->split};
    }
    return ctx->n_entries;
}

// The rows_per_warp codes sd__nm_launch_cfg takes (nm_spmv.h).
static int known_rw(int rw)
{
    return sd__nm_rw_word(rw) || rw == SD_NM_RW_TC || rw == SD_NM_RW_TCX || sd__nm_rw_tcxw(rw) ||
           sd__nm_rw_sp24(rw) || sd__nm_rw_spg(rw) || sd__nm_rw_rows(rw) ||
           (rw > SD_NM_RW_C24 && rw <= SD_NM_RW_C24 + 3);
}

extern "C" int sd_kernels_ctx_import(sd_kernels_ctx *ctx, const sd_nm_tuned *e)
{
    if (!ctx || !e || !known_rw(e->rows_per_warp) || e->split < 1 || e->split > 64 ||
        (e->split > 1 && (ctx->deterministic || e->y_bf16)) || e->rows < 1 || e->cols < 1 || e->B < 1 ||
        e->B != sd_nm_tune_bucket(e->B) || e->B > SD_NM_MAX_B_TILED)
        return SD_EINVAL;
    sd_nm_key k;
    memset(&k, 0, sizeof k);
    k.dense = e->dense != 0, k.n = e->dense ? 0 : e->n, k.m = e->dense ? 0 : e->m, k.B = e->B;
    k.y_bf16 = e->y_bf16 != 0, k.accumulate = e->accumulate != 0, k.rows = e->rows, k.cols = e->cols;
    cache_put(ctx, &k, e->rows_per_warp, e->split, 0, 0);
    return 0;
}

extern "C" int sd_kernels_ctx_has_runner_up(const sd_kernels_ctx *ctx, int i)
{
    return ctx && i >= 0 && i < ctx->n_entries && ctx->entries[i].rw2 != 0;
}

extern "C" int sd_kernels_ctx_swap_runner_up(sd_kernels_ctx *ctx, int i)
{
    if (!sd_kernels_ctx_has_runner_up(ctx, i))
        return SD_ENOTFOUND;
    sd_nm_entry *e = &ctx->entries[i];
    const int rw = e->rows_per_warp, split = e->split;
    e->rows_per_warp = e->rw2, e->split = e->split2;
    e->rw2 = rw, e->split2 = split;
    return 0;
}

// Whether the autotuner times the 16-row register-expanding kernel for this problem.
static int tcx_candidate(const sd_kernels_ctx *ctx, const sd_nm_spmv_args *a)
{
    return sd_kernels_ctx_tcx(ctx, a->m) && sd__nm_tcx_supported(a);
}

// Whether the autotuner times the stream-K row-per-lane kernel for this problem. Under
// SD_NM_SK_TCX (the default) not where the register-expanding tensor-core kernel takes it: single
// launches rank stream-K first there, and the decode step runs it far slower (8B 8:16 gate_up at
// batch 4: 5.33 ms a step against 4.65 with the expanding kernel), while against the other kernels
// it measured as good in the step as alone (16:32 at batch 4: 5.09 against 5.22 ms; kernels/NOTES.md
// v18, results/2026-12-02-s12/r4).
static int stream_k_candidate(const sd_kernels_ctx *ctx, const sd_nm_spmv_args *a)
{
    if (ctx->sk == SD_NM_SK_NEVER)
        return 0;
    return ctx->sk == SD_NM_SK_ALWAYS || !tcx_candidate(ctx, a);
}

// Whether the autotuner times the 2:4 sparse tensor-core kernels (nm_spmv_sp.cu) for this problem:
// 2-8 vectors. At 16 the register-expanding kernel ran every 8B shape faster (results/
// 2026-12-02-s15/r4: gate_up 55.3 µs against 56.2 and 67.9, down 25.4 against 31.0 and 43.7), and
// one of two decodes took a config that ran its step 18% slower; at 1 the compacting kernel is
// 1.3x faster on every 8B shape (gate_up 31.8 against 41.8 µs), so timing them there only risks a
// misranking (the batch-1 records of r7 ran 2-3% slower than the day before).
static int sp24_candidate(const sd_kernels_ctx *ctx, const sd_nm_spmv_args *a, int dense)
{
    return !dense && ctx->sp24 && a->B >= 2 && a->B <= 8 && sd__nm_sp24_supported(a);
}

// Whether the autotuner times the GEMM-shaped 2:4 sparse tensor-core kernels (nm_spmv_spg.cu): from
// 2 vectors up. On the 8B gate_up and down shapes they beat every other kernel from 2 vectors
// (gate_up at 4: 35.7 us against 45.4; results/2026-12-02-s16/r2); at 1 the compacting kernel
// stays faster on every shape (31.4 against 35.1 us), so they are not timed there.
static int spg_candidate(const sd_kernels_ctx *ctx, const sd_nm_spmv_args *a, int dense)
{
    return !dense && ctx->sp24 && a->B >= 2 && sd__nm_spg_supported(a);
}

// Whether the autotuner times the compacting kernels (nm_spmv_c24.cu) for this problem's pattern.
static int c24_candidate(const sd_kernels_ctx *ctx, const sd_nm_spmv_args *a)
{
    return ctx->c24 == SD_NM_C24_ALL || (ctx->c24 == SD_NM_C24_24 && a->m == 4);
}

// Median time (ms) of `reps` single launches of one config, rotating over the n_args problems.
// Timing bursts of launches instead (plain, or captured in a graph as the decode step runs them)
// was tried and ranked worse: it picked kernels that ran slower in the benchmark's graphs and in
// the decode step (kernels/NOTES.md, v5).
static int time_cfg(const sd_nm_spmv_args *a, int n_args, int dense, int rw, int split, cudaStream_t s,
                    cudaEvent_t e0, cudaEvent_t e1, float *ret_ms)
{
    const int reps = 15;
    std::vector<float> t;
    for (int i = 0; i < reps + 2; i++) { // two warm-ups
        const sd_nm_spmv_args *ai = &a[i % n_args];
        if (cudaEventRecord(e0, s) != cudaSuccess)
            return SD_ECUDA;
        int rc = sd__nm_launch_cfg(ai, dense, rw, split, s);
        if (rc)
            return rc;
        float ms;
        if (cudaEventRecord(e1, s) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            return SD_ECUDA;
        if (i >= 2)
            t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    *ret_ms = t[t.size() / 2];
    return 0;
}

extern "C" int sd_nm_autotune(sd_kernels_ctx *ctx, const sd_nm_spmv_args *a, int n_args, int dense,
                              cudaStream_t s, sd_diag *d)
{
    if (!ctx || !a || n_args < 1)
        return sd_diag_set(d, SD_EINVAL, "autotune: bad arguments");
    const int unstructured = !dense && a->n == 0 && a->m == 0;
    const int64_t units = dense ? a->cols / 8 : a->cols / 32;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) {
        cudaEventDestroy(e0);
        return sd_diag_set(d, SD_ECUDA, "autotune: cannot create events");
    }
    int best_rw = 0, best_split = 0, rc = 0, next_rw = 0, next_split = 0;
    float best = 1e30f, next = 1e30f;
    // The row-per-lane kernels: split 1-2 (2 stages), split 1 (3 stages, stream-K); the other
    // variants never won on the H200 (kernels/NOTES.md, v4) and would only lengthen the tuning.
    const int rws[] = {1,
                       2,
                       4,
                       SD_NM_RW_TC,
                       SD_NM_RW_TCX,
                       SD_NM_RW_TCXW,
                       SD_NM_RW_TCXW2,
                       SD_NM_RW_SP24,
                       SD_NM_RW_SP24_32,
                       SD_NM_RW_SPG,
                       SD_NM_RW_SPG2,
                       SD_NM_RW_ROWS,
                       SD_NM_RW_ROWS3,
                       SD_NM_RW_ROWS_SK,
                       SD_NM_RW_C24 + 1,
                       SD_NM_RW_C24 + 2,
                       SD_NM_RW_C24 + 3};
    const int splits[] = {1, 2, 3, 4, 6, 8};
    for (int rw : rws)
        for (int split : splits) {
            const int rows_kernel = sd__nm_rw_rows(rw);
            const int stream_k = sd__nm_rw_stream_k(rw);                      // split unused
            const int c24 = rw >= SD_NM_RW_C24 + 1 && rw <= SD_NM_RW_C24 + 3; // not the wide 128
            if ((unstructured && (rw != 1 || split != 1)) ||
                (split > 1 && (a->y_bf16 || ctx->deterministic)) ||
                (rw == SD_NM_RW_TC && !sd__nm_tc_supported(a, dense)) ||
                (rw == SD_NM_RW_TCX && (dense || !tcx_candidate(ctx, a))) ||
                (sd__nm_rw_tcxw(rw) && (dense || !sd__nm_tcx_supported(a) ||
                                        (!sd_kernels_ctx_tcx(ctx, a->m) && a->B <= SD_NM_MAX_B))) ||
                (sd__nm_rw_sp24(rw) && !sp24_candidate(ctx, a, dense)) ||
                (sd__nm_rw_spg(rw) && !spg_candidate(ctx, a, dense)) ||
                (a->B > SD_NM_MAX_B && !sd__nm_rw_tcxw(rw) && !sd__nm_rw_spg(rw)) ||
                (rows_kernel && (dense || !sd__nm_rows_supported(a, rw))) ||
                (stream_k && (split > 1 || !stream_k_candidate(ctx, a))) ||
                (c24 && (dense || !c24_candidate(ctx, a) || !sd__nm_c24_supported(a, rw - SD_NM_RW_C24))) ||
                (rw == SD_NM_RW_ROWS && split > 2) || (rw == SD_NM_RW_ROWS3 && split > 1) ||
                (split > 1 && units / split < 32))
                continue;
            float ms;
            rc = time_cfg(a, n_args, dense, rw, split, s, e0, e1, &ms);
            if (rc) {
                sd_diag_set(d, rc, "autotune %s %lldx%lld B=%d rw=%d split=%d: %s", dense ? "gemv" : "spmv",
                            (long long)a->rows, (long long)a->cols, a->B, rw, split,
                            rc == SD_ECUDA ? cudaGetErrorString(cudaGetLastError()) : "bad arguments");
                goto done;
            }
            if (ms < best) {
                next = best, next_rw = best_rw, next_split = best_split;
                best = ms, best_rw = rw, best_split = split;
            } else if (ms < next) {
                next = ms, next_rw = rw, next_split = split;
            }
        }
    if (!best_rw) { // nothing timed: caching 0 would leave the launch to the untuned heuristic
        rc = sd_diag_set(d, SD_EINVAL, "autotune %s %lldx%lld B=%d: no candidate config takes this problem",
                         dense ? "gemv" : "spmv", (long long)a->rows, (long long)a->cols, a->B);
        goto done;
    }
    {
        sd_nm_key k = make_key(a, dense);
        cache_put(ctx, &k, best_rw, best_split, next_rw, next_split);
    }
done:
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return rc;
}
