/* chain_bench: the persistent chain of linears (kernels/nm_chain.h) against the same linears as
 * tuned kernels in a CUDA graph (PDL on), and the read-only stream over the same bytes, all in one
 * run: does streaming the weights across the linears' boundaries close the batch-1 step's gap?
 *
 *   chain_bench [LAYERS [ROUNDS]]     (default 32 layers, 20 rounds)
 *
 * For dense bf16 and 2:4: LAYERS layers of Llama-3.1-8B's four linears at batch 1 (qkv 6144 x
 * 4096, o 4096 x 4096 and down 4096 x 14336 added into one fp32 residual, gate_up 28672 x 4096),
 * each linear waiting for the one before it; random weights and valid 2:4 masks. Rounds alternate
 * the six timings (CUDA events around one launch or replay; medians printed):
 *   read    the read-only stream over the weights' bytes: the ceiling
 *   graph   the tuned kernels (sd_nm_autotune per shape), captured once, replayed
 *   packed  the chain on packed weights (sd_chain_pack: two bulk copies a tile), rows shared evenly
 *   claim   the same with the rows' groups claimed as the blocks go (SD_CHAIN_CLAIM)
 *   free, free-claim  those two with no waits (every link's x ready at launch): what waiting costs
 *   compute free, with no weights copied (SD_CHAIN_NO_COPY): how fast the consumers are alone
 * (results/2026-12-06-s34/r1-r4 timed row-major weights too: 2:4 in 8-row groups 81.8% of the read
 * stream, evenly 80.6%, packed 84.4%, on an H100.)
 * The residual and the last gate_up output of packed, claim and free are compared with the graph's
 * (rel L2 < 1e-4, else exit 1: the sums differ only in order; free-claim's blocks may add o and
 * down into one residual row at once). GPU runs only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/bench_util.h"
#include "kernels/nm_chain.h"
#include "kernels/nm_spmv.h"

#define CK(x)                                                                                                \
    do {                                                                                                     \
        cudaError_t e_ = (x);                                                                                \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "chain_bench: %s: %s\n", #x, cudaGetErrorString(e_));                            \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)
#define OK(x)                                                                                                \
    do {                                                                                                     \
        if ((x) != 0) {                                                                                      \
            fprintf(stderr, "chain_bench: %s failed %s\n", #x, diag.msg);                                    \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

enum { N_SHAPES = 4, MAX_ROUNDS = 200 };
static const int64_t ROWS[N_SHAPES] = {6144, 4096, 28672, 4096}, COLS[N_SHAPES] = {4096, 4096, 4096, 14336};
static sd_diag diag;

typedef struct setup {
    int dense, layers;
    uint8_t *slab;            /* every layer's values, then masks */
    size_t bytes;             /* of the slab */
    uint16_t *xh, *xi;        /* bf16 [4096], [14336] */
    float *yqkv, *ygu, *yres; /* fp32 outputs */
    sd_chain_link *links;     /* [layers * 4] */
    sd_nm_spmv_args *args;    /* the same problems for the tuned kernels */
} setup;

static size_t vbytes(int dense, int s)
{
    return (size_t)ROWS[s] * COLS[s] * (dense ? 2 : 1);
}

static void build(setup *u, int dense, int layers)
{
    memset(u, 0, sizeof *u);
    u->dense = dense, u->layers = layers;
    size_t per = 0, per_mask = 0;
    for (int s = 0; s < N_SHAPES; s++)
        per += vbytes(dense, s), per_mask += dense ? 0 : (size_t)ROWS[s] * COLS[s] / 8;
    u->bytes = (per + per_mask) * layers;
    CK(cudaMalloc((void **)&u->slab, u->bytes));
    CK(cudaMalloc((void **)&u->xh, 4096 * 2));
    CK(cudaMalloc((void **)&u->xi, 14336 * 2));
    CK(cudaMalloc((void **)&u->yqkv, 6144 * 4));
    CK(cudaMalloc((void **)&u->ygu, 28672 * 4));
    CK(cudaMalloc((void **)&u->yres, 4096 * 4));
    size_t nvals = per * layers;
    if (sd_bench_fill_bf16((uint16_t *)u->slab, (int64_t)(nvals / 2), 11, 0) ||
        (!dense &&
         sd_bench_fill_nm_mask((uint32_t *)(u->slab + nvals), (int64_t)(per_mask * layers / 4), 4, 12, 0)) ||
        sd_bench_fill_bf16(u->xh, 4096, 13, 0) || sd_bench_fill_bf16(u->xi, 14336, 14, 0)) {
        fprintf(stderr, "chain_bench: fill failed\n");
        exit(1);
    }
    u->links = calloc((size_t)layers * N_SHAPES, sizeof *u->links);
    u->args = calloc((size_t)layers * N_SHAPES, sizeof *u->args);
    if (!u->links || !u->args)
        exit(1);
    uint8_t *v = u->slab, *m = u->slab + nvals;
    float *ys[N_SHAPES] = {u->yqkv, u->yres, u->ygu, u->yres};
    for (int l = 0; l < layers; l++)
        for (int s = 0; s < N_SHAPES; s++) {
            int i = l * N_SHAPES + s;
            sd_chain_link *k = &u->links[i];
            k->dense = dense, k->rows = ROWS[s], k->cols = COLS[s];
            k->values = (const uint16_t *)v, k->mask = dense ? NULL : (const uint32_t *)m;
            k->x = s == 3 ? u->xi : u->xh, k->y = ys[s], k->accumulate = s == 1 || s == 3, k->wait = i - 1;
            sd_nm_spmv_args *a = &u->args[i];
            a->n = dense ? 0 : 2, a->m = dense ? 0 : 4, a->rows = k->rows, a->cols = k->cols, a->B = 1;
            a->values = k->values, a->mask = k->mask, a->x = k->x, a->ldx = k->cols, a->y = k->y,
            a->ldy = k->rows;
            a->accumulate = k->accumulate;
            v += vbytes(dense, s), m += dense ? 0 : (size_t)ROWS[s] * COLS[s] / 8;
        }
}

static int launch_args(const sd_nm_spmv_args *a, int dense, cudaStream_t st)
{
    return dense ? sd_gemv_bf16_launch(a, st) : sd_nm_spmv_launch(a, st);
}

/* Tunes each shape over the layers' copies (rotated: more bytes than L2), then captures every
 * linear of the chain into one graph. */
static cudaGraphExec_t tuned_graph(setup *u, sd_kernels_ctx *ctx, cudaStream_t st)
{
    int n = u->layers * N_SHAPES;
    for (int i = 0; i < n; i++)
        u->args[i].ctx = ctx;
    for (int s = 0; s < N_SHAPES; s++) {
        sd_nm_spmv_args *t = calloc((size_t)u->layers, sizeof *t);
        if (!t)
            exit(1);
        for (int l = 0; l < u->layers; l++)
            t[l] = u->args[l * N_SHAPES + s];
        OK(sd_nm_autotune(ctx, t, u->layers, u->dense, st, &diag));
        free(t);
    }
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; i++)
        if (launch_args(&u->args[i], u->dense, st)) {
            fprintf(stderr, "chain_bench: launch %d failed\n", i);
            exit(1);
        }
    CK(cudaStreamEndCapture(st, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphDestroy(g));
    return ge;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

static double rel_l2(const float *a, const float *b, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++)
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return sqrt(num / (den > 0 ? den : 1));
}

enum { N_MODES = 7 };
static const char *MODES[N_MODES] = {"read", "graph", "packed", "claim", "free", "free-claim", "compute"};

typedef struct runner {
    setup *u;
    cudaGraphExec_t ge;
    sd_chain *ch[N_MODES]; /* modes 2..5 */
    float *sink;
} runner;

static int run_mode(runner *x, int k, cudaStream_t st)
{
    if (k == 0)
        return sd_bench_read_launch(x->u->slab, (int64_t)(x->u->bytes / 16), x->sink, st);
    if (k == 1)
        return cudaGraphLaunch(x->ge, st) != cudaSuccess;
    return sd_chain_launch(x->ch[k], st);
}

/* Residual and last gate_up output after one run of mode k, from a zero residual. */
static void outputs(runner *x, int k, cudaStream_t st, float *res, float *gu)
{
    CK(cudaMemsetAsync(x->u->yres, 0, 4096 * 4, st));
    if (run_mode(x, k, st))
        exit(1);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(res, x->u->yres, 4096 * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gu, x->u->ygu, 28672 * 4, cudaMemcpyDeviceToHost));
}

/* The chains of modes 2..6, all on packed weights (into `packed`): an even share of the rows, and
 * claimed, each with and without the waits; then the consumers alone. */
static void make_chains(runner *x, uint8_t **packed, cudaStream_t st)
{
    setup *u = x->u;
    int n = u->layers * N_SHAPES;
    CK(cudaMalloc((void **)packed, u->bytes));
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        sd_chain_link *k = &u->links[i];
        OK(sd_chain_pack(k, *packed + at, st));
        k->packed = *packed + at;
        at += (size_t)sd_chain_packed_bytes(k);
    }
    CK(cudaStreamSynchronize(st));
    OK(sd_chain_init(&x->ch[2], u->links, n, 0, &diag));
    OK(sd_chain_init(&x->ch[3], u->links, n, SD_CHAIN_CLAIM, &diag));
    for (int i = 0; i < n; i++)
        u->links[i].wait = -1;
    OK(sd_chain_init(&x->ch[4], u->links, n, 0, &diag));
    OK(sd_chain_init(&x->ch[5], u->links, n, SD_CHAIN_CLAIM, &diag));
    OK(sd_chain_init(&x->ch[6], u->links, n, SD_CHAIN_NO_COPY, &diag));
}

static int run_pattern(int dense, int layers, int rounds, float *sink, cudaStream_t st)
{
    setup u;
    build(&u, dense, layers);
    sd_kernels_ctx *ctx = NULL;
    OK(sd_kernels_ctx_init(&ctx, &diag));
    runner x = {&u, tuned_graph(&u, ctx, st), {NULL}, sink};
    uint8_t *packed = NULL;
    make_chains(&x, &packed, st);

    static float ref_res[4096], ref_gu[28672], got_res[4096], got_gu[28672];
    double err = 0;
    outputs(&x, 1, st, ref_res, ref_gu);
    for (int k = 2; k < 5;
         k++) { /* free-claim races on the residual (o and down at once); compute: garbage */
        outputs(&x, k, st, got_res, got_gu);
        double e = fmax(rel_l2(got_res, ref_res, 4096), rel_l2(got_gu, ref_gu, 28672));
        err = fmax(err, e);
    }

    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    static float t[N_MODES][MAX_ROUNDS];
    for (int r = -3; r < rounds; r++)
        for (int k = 0; k < N_MODES; k++) {
            CK(cudaEventRecord(e0, st));
            int rc = run_mode(&x, k, st);
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            if (rc) {
                fprintf(stderr, "chain_bench: %s failed\n", MODES[k]);
                exit(1);
            }
            if (r >= 0)
                CK(cudaEventElapsedTime(&t[k][r], e0, e1));
        }
    float med[N_MODES];
    for (int k = 0; k < N_MODES; k++)
        med[k] = median(t[k], rounds);
    printf("| %s | %d | %.0f |", dense ? "dense" : "2:4", layers, u.bytes / 1e6);
    for (int k = 0; k < N_MODES; k++)
        printf(" %.3f (%.1f%%) |", med[k], 100.0 * med[0] / med[k]);
    printf(" %.3fx | %.1e |\n", med[1] / med[3], err);
    fflush(stdout);
    for (int k = 2; k < N_MODES; k++)
        sd_chain_free(x.ch[k]);
    sd_kernels_ctx_free(ctx);
    cudaGraphExecDestroy(x.ge);
    cudaFree(packed);
    cudaFree(u.slab), cudaFree(u.xh), cudaFree(u.xi), cudaFree(u.yqkv), cudaFree(u.ygu), cudaFree(u.yres);
    free(u.links), free(u.args);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return err < 1e-4 ? 0 : 1;
}

int main(int argc, char **argv)
{
    int layers = argc > 1 ? atoi(argv[1]) : 32, rounds = argc > 2 ? atoi(argv[2]) : 20;
    if (layers < 1 || layers > SD_CHAIN_MAX_LINKS / N_SHAPES || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: chain_bench [LAYERS (1..%d) [ROUNDS (1..%d)]]\n",
                SD_CHAIN_MAX_LINKS / N_SHAPES, MAX_ROUNDS);
        return 2;
    }
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float *sink;
    CK(cudaMalloc((void **)&sink, 65536 * 4));
    printf("chain_bench: %s, %d SMs; ms medians of %d rounds (%% of the read stream's time)\n\n", p.name,
           p.multiProcessorCount, rounds);
    printf("| pattern | layers | MB |");
    for (int k = 0; k < N_MODES; k++)
        printf(" %s |", MODES[k]);
    printf(" graph/claim | max rel L2 |\n|---|---|---|");
    for (int k = 0; k < N_MODES + 2; k++)
        printf("---|");
    printf("\n");
    int bad = run_pattern(1, layers, rounds, sink, st);
    bad |= run_pattern(0, layers, rounds, sink, st);
    if (bad)
        fprintf(stderr, "chain_bench: chain and graph outputs differ\n");
    return bad;
}
