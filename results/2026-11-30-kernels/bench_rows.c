/* bench_rows: old (word-per-lane gather / tensor-core) vs new (row-per-lane, nm_spmv_rows.cu)
 * bitmask SpMV side by side on the Llama-3.1-8B linears, 4 N:M patterns, B = 1, 2, 4, with our
 * dense GEMV as the reference. Each kernel family's best config is found by quick event timing
 * of every candidate, then timed as 20 launches (weights rotated over copies > 3x L2) captured in
 * a CUDA graph: median of the replays / 20. Built and run by run_rows.sh on the GPU machine. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/bench_util.h"
#include "kernels/nm_spmv.h"

#define L2_BYTES (60.0 * 1024 * 1024)
#define MAXC 48
#define GK 20
#define REPS 30
#define RW_TC 16
#define RW_ROWS 32
#define RW_ROWS3 48
#define RW_SK 64
#define RW_SK3 96

#define CU(call)                                                                                             \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "%s: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__);                  \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static cudaStream_t st;
static cudaEvent_t ev[2 * REPS + 2];

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct job {
    sd_nm_spmv_args a[MAXC];
    int n, dense;
} job;

static int launch(const job *j, int i)
{
    return j->dense ? sd_gemv_bf16_launch(&j->a[i % j->n], st) : sd_nm_spmv_launch(&j->a[i % j->n], st);
}

static void set_cfg(job *j, int rw, int split)
{
    for (int i = 0; i < j->n; i++)
        j->a[i].rows_per_warp = rw, j->a[i].split = split;
}

/* Median of 9 single launches between events (µs), for picking configs; -1 if refused. */
static double quick(const job *j)
{
    float t[9], ms;
    for (int i = 0; i < 11; i++) {
        CU(cudaEventRecord(ev[0], st));
        if (launch(j, i))
            return -1;
        CU(cudaEventRecord(ev[1], st));
        CU(cudaEventSynchronize(ev[1]));
        CU(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        if (i >= 2)
            t[i - 2] = ms;
    }
    qsort(t, 9, sizeof t[0], cmp_f);
    return 1000.0 * t[4];
}

/* Graph-replay timing (µs per launch). */
static double graph_time(const job *j)
{
    for (int i = 0; i < 3; i++)
        if (launch(j, i))
            return -1;
    CU(cudaStreamSynchronize(st));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < GK; i++)
        if (launch(j, i)) {
            fprintf(stderr, "launch failed in capture\n");
            exit(1);
        }
    CU(cudaStreamEndCapture(st, &g));
    CU(cudaGraphInstantiate(&ge, g, 0));
    CU(cudaGraphDestroy(g));
    CU(cudaGraphLaunch(ge, st));
    for (int i = 0; i < REPS; i++) {
        CU(cudaEventRecord(ev[2 + 2 * i], st));
        CU(cudaGraphLaunch(ge, st));
        CU(cudaEventRecord(ev[3 + 2 * i], st));
    }
    CU(cudaStreamSynchronize(st));
    CU(cudaGraphExecDestroy(ge));
    float t[REPS];
    for (int i = 0; i < REPS; i++)
        CU(cudaEventElapsedTime(&t[i], ev[2 + 2 * i], ev[3 + 2 * i]));
    qsort(t, REPS, sizeof t[0], cmp_f);
    return 1000.0 * t[REPS / 2] / GK;
}

/* Best config of a family by quick timing, then its graph time; *rw, *split: the winner. */
static double best_of(job *j, const int *rws, int nrw, int *ret_rw, int *ret_split, FILE *log,
                      const char *tag)
{
    static const int splits[] = {1, 2, 3, 4, 6, 8};
    double best = 1e30;
    for (int r = 0; r < nrw; r++)
        for (int s = 0; s < 6; s++) {
            if (splits[s] > 1 && (j->a[0].cols / 32 / splits[s] < 32 || rws[r] >= RW_SK))
                continue; /* the stream-K kernels ignore split */
            set_cfg(j, rws[r], splits[s]);
            double us = quick(j);
            fprintf(log, "  %s rw=%d split=%d quick %.2f us\n", tag, rws[r], splits[s], us);
            if (us > 0 && us < best)
                best = us, *ret_rw = rws[r], *ret_split = splits[s];
        }
    set_cfg(j, *ret_rw, *ret_split);
    return graph_time(j);
}

static double read_ceiling(void)
{
    const size_t n = (size_t)4 << 30;
    void *p;
    float *sink;
    CU(cudaMalloc(&p, n));
    CU(cudaMalloc((void **)&sink, 65536 * 4));
    if (sd_bench_fill_bf16(p, (int64_t)(n / 2), 1, st))
        exit(1);
    float t[10], ms;
    for (int i = 0; i < 12; i++) {
        CU(cudaEventRecord(ev[0], st));
        if (sd_bench_read_launch(p, (int64_t)(n / 16), sink, st))
            exit(1);
        CU(cudaEventRecord(ev[1], st));
        CU(cudaEventSynchronize(ev[1]));
        CU(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        if (i >= 2)
            t[i - 2] = ms;
    }
    qsort(t, 10, sizeof t[0], cmp_f);
    cudaFree(p), cudaFree(sink);
    return (double)n / (t[5] * 1e-3) / 1e9;
}

static int copies(double bytes)
{
    int n = (int)(3.0 * L2_BYTES / bytes) + 1;
    return n < 2 ? 2 : n > MAXC ? MAXC : n;
}

/* --one: a few launches of the old (rw 2) and new kernels on qkv 2:4 B=1, for a profiler. */
static int one(void)
{
    const int64_t r = 6144, c = 4096;
    uint16_t *v, *x;
    uint32_t *m;
    float *y;
    CU(cudaMalloc((void **)&v, (size_t)(r * c)));
    CU(cudaMalloc((void **)&m, (size_t)(r * c / 8)));
    CU(cudaMalloc((void **)&x, (size_t)c * 2));
    CU(cudaMalloc((void **)&y, (size_t)r * 4));
    if (sd_bench_fill_bf16(v, r * c / 2, 1, st) || sd_bench_fill_bf16(x, c, 2, st) ||
        sd_bench_fill_nm_mask(m, r * c / 32, 4, 3, st))
        return 1;
    const int rws[] = {2, RW_ROWS, RW_ROWS3, RW_SK};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++) {
            sd_nm_spmv_args a = {0};
            a.n = 2, a.m = 4, a.rows = r, a.cols = c, a.B = 1, a.values = v, a.mask = m, a.x = x, a.ldx = c;
            a.y = y, a.ldy = r, a.rows_per_warp = rws[k], a.split = 1;
            if (sd_nm_spmv_launch(&a, st))
                return 1;
        }
    CU(cudaStreamSynchronize(st));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--one")) {
        CU(cudaSetDevice(0));
        CU(cudaStreamCreate(&st));
        return one();
    }
    const char *out = argc > 1 ? argv[1] : "bench_rows.md";
    FILE *md = fopen(out, "w"), *log = stderr;
    if (!md)
        return 1;
    CU(cudaSetDevice(0));
    CU(cudaStreamCreate(&st));
    for (int i = 0; i < 2 * REPS + 2; i++)
        CU(cudaEventCreate(&ev[i]));
    const double rd = read_ceiling();
    const struct {
        const char *name;
        int64_t rows, cols;
    } shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
    const int pats[4][2] = {{2, 4}, {4, 8}, {8, 16}, {16, 32}}, Bs[3] = {1, 2, 4};
    const int old_rws[] = {1, 2, 4, RW_TC}, new_rws[] = {RW_ROWS, RW_ROWS3, RW_SK, RW_SK3};
    FILE *fs[2] = {stdout, md};
    for (int k = 0; k < 2; k++) {
        fprintf(fs[k], "# bench_rows: old vs row-per-lane SpMV, Llama-3.1-8B shapes\n\n");
        fprintf(fs[k], "- read-only ceiling %.0f GB/s; graph of %d launches, median of %d replays\n\n", rd,
                GK, REPS);
        fprintf(fs[k],
                "| matrix | pattern | B | GEMV µs (%%rd) | old µs (%%rd) [rw/split] | new µs (%%rd) "
                "[rw/split] | new/old | old ×GEMV | new ×GEMV |\n|---|---|---|---|---|---|---|---|---|\n");
    }
    static job j;
    for (int si = 0; si < 4; si++) {
        const int64_t r = shapes[si].rows, c = shapes[si].cols;
        const int nd = copies((double)r * c * 2), ns = copies((double)r * c * 1.125);
        uint16_t *dw[MAXC], *sv[MAXC], *x;
        uint32_t *sm[MAXC];
        float *y;
        for (int i = 0; i < nd; i++) {
            CU(cudaMalloc((void **)&dw[i], (size_t)(r * c) * 2));
            if (sd_bench_fill_bf16(dw[i], r * c, 100 + i, st))
                return 1;
        }
        for (int i = 0; i < ns; i++) {
            CU(cudaMalloc((void **)&sv[i], (size_t)(r * c)));
            CU(cudaMalloc((void **)&sm[i], (size_t)(r * c / 8)));
            if (sd_bench_fill_bf16(sv[i], r * c / 2, 200 + i, st))
                return 1;
        }
        CU(cudaMalloc((void **)&x, (size_t)(16 * c) * 2));
        CU(cudaMalloc((void **)&y, (size_t)(16 * r) * 4));
        if (sd_bench_fill_bf16(x, 16 * c, 7, st))
            return 1;
        double gemv[3];
        for (int bi = 0; bi < 3; bi++) {
            memset(&j, 0, sizeof j);
            j.n = nd, j.dense = 1;
            for (int i = 0; i < nd; i++) {
                sd_nm_spmv_args *a = &j.a[i];
                a->rows = r, a->cols = c, a->B = Bs[bi], a->values = dw[i], a->x = x, a->ldx = c, a->y = y;
                a->ldy = r;
            }
            int rw = 0, sp = 0;
            fprintf(log, "%s gemv B=%d\n", shapes[si].name, Bs[bi]);
            gemv[bi] = best_of(&j, old_rws, 4, &rw, &sp, log, "gemv");
        }
        for (int pi = 0; pi < 4; pi++) {
            for (int i = 0; i < ns; i++)
                if (sd_bench_fill_nm_mask(sm[i], r * c / 32, pats[pi][1], 300 + 10 * i + pi, st))
                    return 1;
            for (int bi = 0; bi < 3; bi++) {
                const int B = Bs[bi];
                memset(&j, 0, sizeof j);
                j.n = ns, j.dense = 0;
                for (int i = 0; i < ns; i++) {
                    sd_nm_spmv_args *a = &j.a[i];
                    a->n = pats[pi][0], a->m = pats[pi][1], a->rows = r, a->cols = c, a->B = B;
                    a->values = sv[i], a->mask = sm[i], a->x = x, a->ldx = c, a->y = y, a->ldy = r;
                }
                int orw = 0, osp = 0, nrw = 0, nsp = 0;
                fprintf(log, "%s %d:%d B=%d\n", shapes[si].name, pats[pi][0], pats[pi][1], B);
                double to = best_of(&j, old_rws, 4, &orw, &osp, log, "old");
                double tn = best_of(&j, new_rws, 4, &nrw, &nsp, log, "new");
                double bytes = (double)r * c * 1.125 + B * c * 2.0 + B * r * 4.0;
                double gbytes = (double)r * c * 2.0 + B * c * 2.0 + B * r * 4.0;
                for (int k = 0; k < 2; k++)
                    fprintf(
                        fs[k],
                        "| %s | %d:%d | %d | %.2f (%.0f%%) | %.2f (%.0f%%) [%d/%d] | %.2f (%.0f%%) [%d/%d] | "
                        "%.2f | %.2f | %.2f |\n",
                        shapes[si].name, pats[pi][0], pats[pi][1], B, gemv[bi],
                        100 * gbytes / (gemv[bi] * 1e3) / rd, to, 100 * bytes / (to * 1e3) / rd, orw, osp, tn,
                        100 * bytes / (tn * 1e3) / rd, nrw, nsp, to / tn, gemv[bi] / to, gemv[bi] / tn);
                fflush(md);
                fflush(stdout);
            }
        }
        for (int i = 0; i < nd; i++)
            cudaFree(dw[i]);
        for (int i = 0; i < ns; i++)
            cudaFree(sv[i]), cudaFree(sm[i]);
        cudaFree(x), cudaFree(y);
    }
    CU(cudaGetLastError());
    fclose(md);
    return 0;
}
