/* cuda_step: one step of the CUDA backend (engine/cuda_backend.cu) — the layers enqueued on
 * the stream (per layer: add+RMSNorm, qkv linear, q/k/v post-processing + attention — one fused
 * kernel in decode steps —, o linear, add+RMSNorm, gate_up linear, SwiGLU — in the gate_up kernel
 * where it takes it —, down linear), eagerly
 * or replayed from the CUDA graph of a batch-size bucket (on its first capture, optionally
 * refined: each linear's runner-up config tried inside the step), then the logits copied out
 * (gathered over the ranks under tensor parallelism), and sampling on the GPU. */
#include "engine/cuda_backend_impl.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cuda_attn_prefill.h"
#include "engine/cuda_backend.h"
#include "kernels/nm_spmv.h"
#include "kernels/nm_tuned.h"

/* Offsets into the meta buffer for one step. */
typedef struct step_shape {
    int T, R, n_seqs, n_splits;
    const int32_t *tokens, *pos, *tok_seq, *rows, *bt; /* device pointers */
    int n_runs, run_len[SD_CU_MAX_SEQS];               /* host: tokens of each real sequence */
} step_shape;

/* ---- one step on the stream (eager, or recorded into a graph) ---- */

/* Hands the linear input just formed in b->act ([T, cols] bf16) to the calibration hook. Only
 * eager steps get here (sd__cu_backend_forward bypasses graphs while a hook is set); the stream
 * is drained first so the rows are complete, and the hook is done with them when it returns. */
static int capture_input(sd_cuda_backend *b, int li, sd_capture_site site, int64_t cols, const step_shape *s,
                         sd_diag *d)
{
    SD_CU(d, cudaStreamSynchronize(b->st));
    const int32_t *pos = b->h_meta + s->T, *seq = b->h_meta + 2 * (size_t)s->T; /* fill_meta's layout */
    return b->cap_fn(b->cap_ud, li, site, b->act, cols, s->T, pos, seq);
}

/* Layer li's q/k/v post-processing (bias, q/k norm, RoPE, KV write) and attention, from the qkv
 * linear's output in b->mmo into b->act. When every token is its sequence's only one (a decode
 * step, graph padding rows included) and the decode kernel takes them all, one fused kernel does
 * both (engine/cuda_attn_decode.cu; SD_ATTN_FUSED=0 turns it off); otherwise sd__cu_qkv_post,
 * then sd__cu_attn_step. */
static int attn_block(sd_cuda_backend *b, int li, const step_shape *s, sd_diag *d)
{
    const sd_cu_layer *L = &b->w.layers[li];
    sd_cu_qkv_args qa = {};
    qa.qkv = b->mmo;
    qa.bias = L->qkv.bias;
    qa.q_norm = L->q_norm;
    qa.k_norm = L->k_norm;
    qa.inv_freq = b->inv_freq;
    qa.tok_pos = s->pos;
    qa.tok_seq = s->tok_seq;
    qa.block_tables = s->bt;
    qa.max_bt = b->max_bt;
    qa.block_size = b->base.block_size;
    qa.T = s->T;
    qa.n_heads = b->cfg.n_heads;
    qa.n_kv = b->cfg.n_kv_heads;
    qa.head_dim = b->cfg.head_dim;
    qa.eps = b->cfg.rms_eps;
    qa.q_out = b->q;
    qa.k_cache = b->k_cache + (size_t)li * b->layer_kv_elems; /* this layer's */
    qa.v_cache = b->v_cache + (size_t)li * b->layer_kv_elems;
    sd_cu_attn_args aa = {};
    aa.q = b->q;
    aa.k_cache = qa.k_cache;
    aa.v_cache = qa.v_cache;
    aa.tok_pos = s->pos;
    aa.tok_seq = s->tok_seq;
    aa.block_tables = s->bt;
    aa.max_bt = b->max_bt;
    aa.block_size = b->base.block_size;
    aa.T = s->T;
    aa.n_heads = b->cfg.n_heads;
    aa.n_kv = b->cfg.n_kv_heads;
    aa.head_dim = b->cfg.head_dim;
    aa.n_splits = s->n_splits;
    aa.part_acc = b->part_acc;
    aa.part_ml = b->part_ml;
    aa.out = b->act;
    aa.counters = b->attn_cnt;
    aa.min_chunk = b->attn_chunk;
    aa.window = sd_model_config_window(&b->cfg, li); /* 0: full causal; KV left of it stays cached */
    aa.cluster = b->attn_cluster;
    aa.sms = b->sms;
    aa.early = b->attn_early;
    /* the decode kernel takes runs of 1 unless min_run is 1 (then they go tiled) */
    int fused = b->attn_fused && (b->attn_min_run <= 0 || b->attn_min_run > 1);
    for (int i = 0; fused && i < s->n_runs; i++)
        fused = s->run_len[i] == 1;
    if (fused && !(b->skip & SD_SKIP_ATTN)) /* SD_BENCH_SKIP=attn drops the fused kernel */
        return sd__cu_attn_fused(&qa, &aa, b->pdl, b->st, d);
    if (!(b->skip & SD_SKIP_QKVPOST))
        SD_TRY(sd__cu_qkv_post(&qa, b->pdl, b->st, d));
    if (b->skip & SD_SKIP_ATTN)
        return 0;
    return sd__cu_attn_step(&aa, s->run_len, s->n_runs, b->attn_min_run, b->pdl, b->st, d);
}

static int run_layer(sd_cuda_backend *b, int li, const step_shape *s, sd_diag *d)
{
    const sd_model_config *c = &b->cfg;
    const sd_cu_layer *L = &b->w.layers[li];
    cudaStream_t st = b->st;
    /* the previous layer's down_proj output, unless it was added into x already */
    const float *resid = li && !b->res_acc ? b->mmo : NULL;
    float *res_out = b->res_acc ? b->x : b->mmo; /* where the o / down projections go */
    const int pdl = b->pdl;
#define SKIPS(part, call) (b->skip & (part) ? 0 : (call))
#define LIN(call) SKIPS(SD_SKIP_LINEARS, call)
    SD_TRY(SKIPS(SD_SKIP_NORM, sd__cu_add_rmsnorm(b->x, resid, L->attn_norm, b->act, s->T, c->hidden,
                                                  c->rms_eps, pdl, st, d)));
    if (b->cap_fn)
        SD_TRY(capture_input(b, li, SD_CAP_QKV, c->hidden, s, d));
    SD_TRY(LIN(sd__cu_linear(&b->mm, &L->qkv, b->act, b->mmo, s->T, 0, st, d)));
    SD_TRY(attn_block(b, li, s, d)); /* q/k/v post-processing, KV write, attention */
    if (b->cap_fn)
        SD_TRY(capture_input(b, li, SD_CAP_O, (int64_t)c->n_heads * c->head_dim, s, d));
    SD_TRY(LIN(sd__cu_linear(&b->mm, &L->o, b->act, res_out, s->T, b->res_acc, st, d)));
    SD_TRY(sd__tp_allreduce_sum(&b->tp, b->mmo, (size_t)s->T * c->hidden, st, d)); /* TP: partial sums */
    SD_TRY(SKIPS(SD_SKIP_NORM, sd__cu_add_rmsnorm(b->x, b->res_acc ? NULL : b->mmo, L->mlp_norm, b->act, s->T,
                                                  c->hidden, c->rms_eps, pdl, st, d)));
    if (b->cap_fn)
        SD_TRY(capture_input(b, li, SD_CAP_GATEUP, c->hidden, s, d));
    /* the SwiGLU in the gate_up kernel's epilogue where its tuned kernel takes it (h into hbuf:
     * the kernel still reads act); not while a calibration hook reads act, nor when skipping */
    int fused = 0;
    if (!b->cap_fn && !(b->skip & (SD_SKIP_LINEARS | SD_SKIP_SWIGLU)))
        SD_TRY(sd__cu_linear_swiglu(&b->mm, &L->gate_up, b->act, b->hbuf, s->T, st, &fused, d));
    if (!fused) {
        SD_TRY(LIN(sd__cu_linear(&b->mm, &L->gate_up, b->act, b->mmo, s->T, 0, st, d)));
        SD_TRY(SKIPS(SD_SKIP_SWIGLU, sd__cu_swiglu(b->mmo, b->act, s->T, c->intermediate, pdl, st, d)));
    }
    if (b->cap_fn)
        SD_TRY(capture_input(b, li, SD_CAP_DOWN, c->intermediate, s, d));
    const __nv_bfloat16 *h = fused ? b->hbuf : b->act;
    SD_TRY(LIN(sd__cu_linear(&b->mm, &L->down, h, res_out, s->T, b->res_acc, st, d)));
#undef LIN
#undef SKIPS
    return sd__tp_allreduce_sum(&b->tp, b->mmo, (size_t)s->T * c->hidden, st, d);
}

static int enqueue_step(sd_cuda_backend *b, const step_shape *s, sd_diag *d)
{
    const sd_model_config *c = &b->cfg;
    /* plain launch: the step starts after a host-to-device copy of its metadata, not a kernel */
    if (b->tp.comm) /* the rank's vocabulary rows, summed over the ranks */
        SD_TRY(sd__tp_embed(&b->tp, b->w.embed, s->tokens, b->x, s->T, c->hidden, b->st, d));
    else
        SD_TRY(sd__cu_embed(b->w.embed, s->tokens, b->x, s->T, c->hidden, 0, b->st, d));
    for (int li = 0; li < c->n_layers; li++) {
        SD_TRY(run_layer(b, li, s, d));
        if (b->cap_fn && li == b->cap_stop) /* a calibration replay that needs no later layer */
            return 0;
    }
    const float *resid = c->n_layers && !b->res_acc ? b->mmo : NULL;
    SD_TRY(sd__cu_add_rmsnorm(b->x, resid, b->w.final_norm, b->act, s->T, c->hidden, c->rms_eps, b->pdl,
                              b->st, d));
    /* every token a logits row (decode steps): rows is 0..T-1, so the lm_head reads act as it is;
     * the copy was a ~4 us kernel on the critical path (results/2026-12-02-s14/r2) */
    const __nv_bfloat16 *lm_x = b->act;
    if (s->R != s->T) {
        SD_TRY(sd__cu_gather_rows(b->act, s->rows, b->lm_in, s->R, c->hidden, b->pdl, b->st, d));
        lm_x = b->lm_in;
    }
    SD_TRY(sd__cu_linear(&b->mm, &b->w.lm_head, lm_x, b->logits, s->R, 0, b->st, d));
    return sd__tp_allgather(&b->tp, b->logits, b->gathered, (size_t)s->R * c->vocab, b->st, d);
}

/* ---- forward ---- */

/* Checks the batch against the pool and the buffers; counts tokens and logits rows. */
static int check_batch(const sd_cuda_backend *b, const sd_batch_seq *seqs, int n_seqs, int *T, int *R,
                       sd_diag *d)
{
    int64_t t = 0, r = 0;
    if (n_seqs < 1 || n_seqs > b->max_seqs)
        return sd_diag_set(d, SD_EINVAL, "cuda forward: %d sequences (1..%d)", n_seqs, b->max_seqs);
    for (int i = 0; i < n_seqs; i++) {
        const sd_batch_seq *q = &seqs[i];
        if (q->n_tokens < 1 || q->pos < 0)
            return sd_diag_set(d, SD_EINVAL, "cuda forward: sequence %d: pos %d, %d tokens", i, q->pos,
                               q->n_tokens);
        int64_t end = (int64_t)q->pos + q->n_tokens;
        int64_t nb = (end + b->base.block_size - 1) / b->base.block_size;
        if (nb > b->max_bt)
            return sd_diag_set(d, SD_ERANGE, "cuda forward: sequence %d reaches position %lld (limit %lld)",
                               i, (long long)end, (long long)b->max_bt * b->base.block_size);
        for (int64_t k = 0; k < nb; k++)
            if (q->block_table[k] < 0 || q->block_table[k] >= b->base.kv_blocks)
                return sd_diag_set(d, SD_EINVAL, "cuda forward: sequence %d: block %d out of the pool (%d)",
                                   i, q->block_table[k], b->base.kv_blocks);
        for (int k = 0; k < q->n_tokens; k++)
            if (q->tokens[k] < 0 || q->tokens[k] >= b->base.vocab)
                return sd_diag_set(d, SD_EINVAL, "cuda forward: sequence %d: token %d out of the vocabulary",
                                   i, q->tokens[k]);
        t += q->n_tokens;
        r += q->all_logits ? q->n_tokens : 1;
    }
    if (t > b->tmax)
        return sd_diag_set(d, SD_EINVAL, "cuda forward: %lld tokens (max_batch_tokens %d)", (long long)t,
                           b->tmax);
    *T = (int)t;
    *R = (int)r;
    return 0;
}

/* Fills h_meta for n_seqs real sequences padded to `padded` sequences of pad_t tokens each (graph
 * buckets; every token a logits row) and sets the device pointers of s. */
static void fill_meta(sd_cuda_backend *b, const sd_batch_seq *seqs, int n_seqs, int T, int R, int padded,
                      int pad_t, step_shape *s)
{
    int32_t *h = b->h_meta, *tok = h, *pos = h + T, *seq = h + 2 * T, *rows = h + 3 * T, *bt = h + 3 * T + R;
    int t = 0, r = 0;
    for (int i = 0; i < n_seqs; i++) {
        const sd_batch_seq *q = &seqs[i];
        int nb = (q->pos + q->n_tokens + b->base.block_size - 1) / b->base.block_size;
        memcpy(bt + (size_t)i * b->max_bt, q->block_table, (size_t)nb * 4);
        for (int k = 0; k < q->n_tokens; k++, t++) {
            tok[t] = q->tokens[k];
            pos[t] = q->pos + k;
            seq[t] = i;
            if (q->all_logits || k == q->n_tokens - 1)
                rows[r++] = t;
        }
    }
    for (int i = n_seqs; i < padded; i++) { /* padding: positions 0.. in the spare block */
        for (int k = 0; k < pad_t; k++, t++, r++) {
            tok[t] = 0;
            pos[t] = k;
            seq[t] = i;
            rows[r] = t;
        }
        for (int k = 0; k <= (pad_t - 1) / b->base.block_size; k++)
            bt[(size_t)i * b->max_bt + k] = b->base.kv_blocks;
    }
    int32_t *dm = b->d_meta;
    *s = (step_shape){T,
                      R,
                      padded > n_seqs ? padded : n_seqs,
                      sd__cu_attn_splits(b->sms, T, b->cfg.n_heads, b->cfg.n_kv_heads),
                      dm,
                      dm + T,
                      dm + 2 * T,
                      dm + 3 * T,
                      dm + 3 * T + R,
                      n_seqs,
                      {0}};
    for (int i = 0; i < n_seqs; i++)
        s->run_len[i] = seqs[i].n_tokens;
}

static size_t meta_len(const sd_cuda_backend *b, const step_shape *s)
{
    return (size_t)(s->bt - b->d_meta) + (size_t)s->n_seqs * b->max_bt;
}

static int bucket_of(int n)
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

/* SD_TUNE_LOG: what a captured step holds, by node type (a memset or memcpy node among the
 * kernels changes how the driver submits the graph). */
static void log_graph_nodes(cudaGraph_t g, int k)
{
    size_t n = 0;
    if (cudaGraphGetNodes(g, NULL, &n) != cudaSuccess || !n)
        return;
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)malloc(n * sizeof *nodes);
    size_t kernel = 0, memset_ = 0, memcpy_ = 0;
    if (nodes && cudaGraphGetNodes(g, nodes, &n) == cudaSuccess)
        for (size_t i = 0; i < n; i++) {
            cudaGraphNodeType t;
            if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess)
                continue;
            kernel += t == cudaGraphNodeTypeKernel;
            memset_ += t == cudaGraphNodeTypeMemset;
            memcpy_ += t == cudaGraphNodeTypeMemcpy;
        }
    free(nodes);
    fprintf(stderr, "graph: bucket %d: %zu nodes (%zu kernels, %zu memsets, %zu memcpys, %zu other)\n",
            1 << k, n, kernel, memset_, memcpy_, n - kernel - memset_ - memcpy_);
}

/* Captures the step of shape s into b->graphs[k] (k: the slot, SD_CU_MAX_STEP_T), replacing the graph there.
 * A capture that held cuSPARSELt's GEMMs and failed is made again without them (a library version whose
 * kernels do not capture must not stop decoding), and the graphs keep them out from then on. On failure
 * b->graphs[k] stays NULL: cudaGraphInstantiate leaves its output undefined when it fails, and a
 * stale handle there would be replayed (or destroyed) by the next step of this bucket. */
static int capture_graph(sd_cuda_backend *b, const step_shape *s, int k, sd_diag *d)
{
    if (b->graphs[k]) {
        cudaGraphExecDestroy(b->graphs[k]);
        b->graphs[k] = NULL;
    }
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    const int64_t cslt0 = b->mm.cslt_captured;
    SD_CU(d, cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal));
    int rc = enqueue_step(b, s, d);
    cudaError_t e = cudaStreamEndCapture(b->st, &g); /* always: it takes the stream out of capture */
    if (!rc && e == cudaSuccess && b->mm.tune_log)
        log_graph_nodes(g, k);
    if (!rc && e == cudaSuccess)
        e = cudaGraphInstantiate(&ge, g, 0);
    if (g)
        cudaGraphDestroy(g);
    if (!rc && e == cudaSuccess) {
        b->graphs[k] = ge;
        return 0;
    }
    /* the capture's error (an invalidated capture, a refused call) is in rc / e; left as the
     * runtime's last error it would fail the next launch check of a later, sound step */
    cudaGetLastError();
    if (b->mm.cslt_captured > cslt0 && !b->mm.cslt_graph_off) {
        fprintf(stderr,
                "sparsed: a decode graph with cuSPARSELt's GEMMs did not capture (%s); the graphs go on "
                "without them\n",
                rc ? sd_diag_str(d, rc) : cudaGetErrorString(e));
        b->mm.cslt_captured = cslt0;
        b->mm.cslt_graph_off = 1;
        return capture_graph(b, s, k, d);
    }
    if (rc)
        return rc;
    return sd_diag_set(d, SD_ECUDA, "cuda: decode graph of %d sequences of %d tokens: %s",
                       1 << (k % SD_CU_N_BUCKETS), 1 + k / SD_CU_N_BUCKETS, cudaGetErrorString(e));
}

/* ms per replay of graph k: two warm-up launches, then the fastest of three rounds of ten. */
static int time_graph(sd_cuda_backend *b, int k, float *ms, sd_diag *d)
{
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = 0;
    float best = 1e30f;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
        rc = SD_ECUDA;
    for (int i = 0; !rc && i < 2; i++)
        rc = cudaGraphLaunch(b->graphs[k], b->st) == cudaSuccess ? 0 : SD_ECUDA;
    for (int r = 0; !rc && r < 3; r++) {
        float t = 0;
        rc = cudaEventRecord(e0, b->st) == cudaSuccess ? 0 : SD_ECUDA;
        for (int i = 0; !rc && i < 10; i++)
            rc = cudaGraphLaunch(b->graphs[k], b->st) == cudaSuccess ? 0 : SD_ECUDA;
        if (!rc && (cudaEventRecord(e1, b->st) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
                    cudaEventElapsedTime(&t, e0, e1) != cudaSuccess))
            rc = SD_ECUDA;
        if (!rc && t / 10 < best)
            best = t / 10;
    }
    if (rc == SD_ECUDA)
        sd_diag_set(d, rc, "refine: timing graph %d: %s", k, cudaGetErrorString(cudaGetLastError()));
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    *ms = best;
    return rc;
}

/* The refine pass (on unless SD_TUNE_REFINE=0), right after bucket k's first capture: the autotuner ranked
 * each linear's configs by single launches, which can differ from their time inside the step
 * (kernels/NOTES.md v18, v19). So for each problem of this bucket tuned in this process, the
 * step runs with its runner-up config instead (every linear of that shape at once), and keeps it
 * if the whole step replays at least 0.5% faster. The replays repeat this step on the same
 * inputs; a last replay leaves its results from the configs kept. Not under tensor parallelism
 * (every rank would have to decide alike) nor in the deterministic mode (the choice depends on
 * timing). The tuning cache is saved again with the configs kept. */
static int refine_graph(sd_cuda_backend *b, const step_shape *s, int k, sd_diag *d)
{
    sd_kernels_ctx *ctx = (sd_kernels_ctx *)b->mm.spmv;
    sd_nm_tuned *e = (sd_nm_tuned *)malloc(SD_NM_CACHE_CAP * sizeof *e);
    if (!e)
        return sd_diag_set(d, SD_ENOMEM, "refine: out of memory");
    const int n = sd_kernels_ctx_export(ctx, e, SD_NM_CACHE_CAP), bucket = sd_nm_tune_bucket(1 << k);
    float best = 0;
    int rc = time_graph(b, k, &best, d), kept = 0;
    for (int i = 0; !rc && i < n; i++) {
        if (e[i].B != bucket || !sd_kernels_ctx_has_runner_up(ctx, i))
            continue;
        if (b->refine == 2 && b->refine_tried > 0) { /* SD_TUNE_REFINE=2: the tests' failure */
            rc = sd_diag_set(d, SD_ECUDA, "refine: a failure injected by SD_TUNE_REFINE=2");
            break;
        }
        float t = 0;
        sd_kernels_ctx_swap_runner_up(ctx, i);
        rc = capture_graph(b, s, k, d);
        if (!rc)
            rc = time_graph(b, k, &t, d);
        const int keep = !rc && t < best * 0.995f;
        b->refine_tried += !rc;
        b->refine_kept += keep;
        if (b->mm.tune_log)
            fprintf(stderr,
                    "refine: [%lld, %lld] %s%d:%d, %d rows%s: runner-up %.3f ms a step against %.3f -> %s\n",
                    (long long)e[i].rows, (long long)e[i].cols, e[i].dense ? "dense " : "", e[i].n, e[i].m,
                    bucket, e[i].accumulate ? " (accumulate)" : "", t, best, keep ? "kept" : "reverted");
        if (keep) {
            best = t, kept++;
            continue;
        }
        sd_kernels_ctx_swap_runner_up(ctx, i);
        int rc2 = capture_graph(b, s, k, d);
        rc = rc ? rc : rc2;
    }
    free(e);
    if (!rc)
        SD_CU(d, cudaGraphLaunch(b->graphs[k], b->st));
    if (!rc && kept && b->mm.on_tune)
        b->mm.on_tune(b->mm.on_tune_ud);
    return rc;
}

/* Adds the last timed replay's GPU time to b->solo_ms (its step has been waited for, or is now). */
static int read_solo(sd_cuda_backend *b, sd_diag *d)
{
    if (!b->tl_pending)
        return 0;
    float ms = 0;
    b->tl_pending = 0;
    SD_CU(d, cudaEventSynchronize(b->tl_ev[1]));
    SD_CU(d, cudaEventElapsedTime(&ms, b->tl_ev[0], b->tl_ev[1]));
    b->solo_ms += ms;
    return 0;
}

/* A replay of graph k with the host's time in cudaGraphLaunch added to b->launch_us and the
 * graph's GPU time, read at the next one, to b->solo_ms (the benchmark's question: how much of a
 * step is the launch, how much the GPU, how much the rest of the host's step). */
static int timed_launch(sd_cuda_backend *b, int k, sd_diag *d)
{
    struct timespec t0, t1;
    for (int i = 0; i < 2; i++)
        if (!b->tl_ev[i])
            SD_CU(d, cudaEventCreate(&b->tl_ev[i]));
    SD_TRY(read_solo(b, d));
    SD_CU(d, cudaEventRecord(b->tl_ev[0], b->st));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    SD_CU(d, cudaGraphLaunch(b->graphs[k], b->st));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    SD_CU(d, cudaEventRecord(b->tl_ev[1], b->st));
    b->tl_pending = 1;
    b->launch_us += (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
    b->replays++;
    return 0;
}

int sd_backend_cuda_launch_times(sd_backend *base, double *host_us, double *gpu_ms, sd_diag *d)
{
    sd_cuda_backend *b = (sd_cuda_backend *)base;
    SD_CU(d, cudaSetDevice(b->device));
    SD_TRY(read_solo(b, d));
    *host_us = b->launch_us;
    *gpu_ms = b->solo_ms;
    return 0;
}

/* The refine pass is an optimisation: when it fails (a CUDA error while it swaps a config, captures
 * or times), the step still answers. Its graph may be missing or half-made and its replays may have
 * left partial results, so the graph is dropped (this bucket's next step captures one without the
 * pass), the pass is off for this backend, and the step runs again eagerly. A configuration it
 * kept stays: every config computes the same products. */
static int refine_turn_off(sd_cuda_backend *b, const step_shape *s, int k, int rc, const sd_diag *rd,
                           sd_diag *d)
{
    fprintf(stderr, "sparsed: the refine pass is off after an error (decoding goes on without it): %s\n",
            sd_diag_str(rd, rc));
    cudaGetLastError(); /* a launch error is not sticky; a sticky one fails the step below */
    if (b->graphs[k]) {
        cudaGraphExecDestroy(b->graphs[k]);
        b->graphs[k] = NULL;
    }
    b->refine = 0;
    b->refine_failed = 1;
    return enqueue_step(b, s, d);
}

/* Replays (or on first use, runs eagerly, captures and, unless SD_TUNE_REFINE=0, refines) the graph
 * of slot k (a batch bucket, and for speculative steps the tokens a sequence). */
static int decode_graph(sd_cuda_backend *b, const step_shape *s, int k, sd_diag *d)
{
    if (b->graphs[k]) {
        if (b->time_launches)
            return timed_launch(b, k, d);
        SD_CU(d, cudaGraphLaunch(b->graphs[k], b->st));
        b->replays++;
        return 0;
    }
    SD_TRY(enqueue_step(b, s, d)); /* this step's results, and any lazy init outside the capture */
    SD_TRY(sd__tp_sync(&b->tp, b->st, d));
    SD_TRY(capture_graph(b, s, k, d));
    if (b->refine && !b->tp.comm && k < SD_CU_N_BUCKETS) { /* decode steps; not the drafts' shapes */
        sd_diag rd = {};
        const int rc = refine_graph(b, s, k, &rd);
        if (rc)
            return refine_turn_off(b, s, k, rc, &rd, d);
    }
    return 0;
}

int sd_backend_cuda_graph_replay_ms(sd_backend *base, int n_seqs, double *ret_ms, sd_diag *d)
{
    sd_cuda_backend *b = (sd_cuda_backend *)base;
    const int k = bucket_of(n_seqs);
    if (b->tp.comm || k >= SD_CU_N_BUCKETS || !b->graphs[k])
        return sd_diag_set(d, SD_ENOTFOUND,
                           "no decode graph of %d sequences to replay (none captured yet, "
                           "or tensor parallel)",
                           n_seqs);
    SD_CU(d, cudaSetDevice(b->device));
    float ms = 0;
    SD_TRY(time_graph(b, k, &ms, d));
    *ret_ms = ms;
    return 0;
}

/* TP: logits [R, vocab] from gathered [ranks, rows, vocab_pad] (rows >= R when padded):
 * rank k's real vocabulary columns land at k * vocab_pad, padding columns dropped. `kind`:
 * to the host, or to a device buffer (sampling on the GPU). */
static int copy_gathered(sd_cuda_backend *b, int rows, int R, float *logits, cudaMemcpyKind kind, sd_diag *d)
{
    const sd_shard_plan *p = &b->tp.plan;
    for (int k = 0; k < p->ranks; k++) {
        int64_t v0 = (int64_t)k * p->vocab_pad, nv = p->vocab_total - v0;
        nv = nv < 0 ? 0 : nv > p->vocab_pad ? p->vocab_pad : nv;
        if (nv)
            SD_CU(d, cudaMemcpy2DAsync(logits + v0, (size_t)p->vocab_total * 4,
                                       b->gathered + (size_t)k * rows * p->vocab_pad,
                                       (size_t)p->vocab_pad * 4, (size_t)nv * 4, (size_t)R, kind, b->st));
    }
    return 0;
}

/* The tokens every sequence of the step carries when a graph can take it: 1 (a decode step), or
 * t <= SD_CU_MAX_STEP_T with a logits row for each (a speculative step of equal drafts); 0 when
 * the sequences differ (prefill chunks, mixed steps). */
static int uniform_tokens(const sd_batch_seq *seqs, int n_seqs)
{
    const int t = seqs[0].n_tokens;
    if (t > SD_CU_MAX_STEP_T)
        return 0;
    for (int i = 0; i < n_seqs; i++)
        if (seqs[i].n_tokens != t || (t > 1 && !seqs[i].all_logits))
            return 0;
    return t;
}

int sd__cu_backend_forward(sd_backend *base, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d)
{
    sd_cuda_backend *b = (sd_cuda_backend *)base;
    int T = 0, R = 0;
    b->last_rows = 0; /* nothing to sample until this step succeeds */
    SD_TRY(check_batch(b, seqs, n_seqs, &T, &R, d));
    SD_CU(d, cudaSetDevice(b->device));
    int k = bucket_of(n_seqs), padded = 1 << k, t = uniform_tokens(seqs, n_seqs);
    int graph = b->use_graphs && !b->cap_fn && t > 0 && k < SD_CU_N_BUCKETS && padded * t <= b->tmax &&
                padded <= b->max_seqs && (t - 1) / b->base.block_size < b->max_bt;
    step_shape s;
    if (graph)
        fill_meta(b, seqs, n_seqs, padded * t, padded * t, padded, t, &s);
    else
        fill_meta(b, seqs, n_seqs, T, R, n_seqs, 1, &s);
    SD_CU(d, cudaMemcpyAsync(b->d_meta, b->h_meta, meta_len(b, &s) * 4, cudaMemcpyHostToDevice, b->st));
    SD_TRY(graph ? decode_graph(b, &s, (t - 1) * SD_CU_N_BUCKETS + k, d) : enqueue_step(b, &s, d));
    if (b->tp.comm) {
        /* wait with a deadline first: a copy to pageable memory would block on a dead peer */
        SD_TRY(sd__tp_sync(&b->tp, b->st, d));
        if (logits)
            SD_TRY(copy_gathered(b, s.R, R, logits, cudaMemcpyDeviceToHost, d));
    } else if (logits)
        SD_CU(d, cudaMemcpyAsync(logits, b->logits, (size_t)R * b->cfg.vocab * 4, cudaMemcpyDeviceToHost,
                                 b->st));
    SD_TRY(sd__tp_sync(&b->tp, b->st, d));
    b->last_rows = R;
    b->last_padded = s.R;
    return 0;
}

/* Samples from the last forward's logits where they are: b->logits, or under TP the rows
 * gathered on this rank, made contiguous first. */
int sd__cu_backend_sample(sd_backend *base, const sd_sample_req *reqs, int n, sd_sample_out *out, sd_diag *d)
{
    sd_cuda_backend *b = (sd_cuda_backend *)base;
    float *rows[SD_CU_MAX_SEQS];
    if (n < 0 || n > SD_CU_MAX_SEQS)
        return sd_diag_set(d, SD_EINVAL, "cuda sample: %d rows (at most %d)", n, SD_CU_MAX_SEQS);
    for (int i = 0; i < n; i++)
        if (reqs[i].row < 0 || reqs[i].row >= b->last_rows)
            return sd_diag_set(d, SD_EINVAL, "cuda sample: row %d of a forward with %d rows",
                               (int)reqs[i].row, b->last_rows);
    if (n == 0)
        return 0;
    SD_CU(d, cudaSetDevice(b->device));
    float *all = b->logits; /* [last_rows, vocab] */
    if (b->tp.comm) {
        SD_TRY(sd__cu_sampler_stage(&b->smp, b->last_rows, b->base.vocab, &all, d));
        SD_TRY(copy_gathered(b, b->last_padded, b->last_rows, all, cudaMemcpyDeviceToDevice, d));
    }
    for (int i = 0; i < n; i++)
        rows[i] = all + (size_t)reqs[i].row * (size_t)b->base.vocab;
    return sd__cu_sample(&b->smp, rows, b->base.vocab, reqs, n, out, b->st, d);
}
