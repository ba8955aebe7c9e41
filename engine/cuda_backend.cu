/* cuda_backend: the CUDA backend — one GPU runs the whole model over a batch of sequences
 * with a paged bf16 KV cache; all-decode steps replay a CUDA graph captured per batch-size
 * bucket, reading tokens, positions and block tables from device buffers. */
#include "engine/backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda_attn_prefill.h"
#include "engine/cuda_backend.h"
#include "engine/cuda_capture.h"
#include "engine/dtype.h"
#include "engine/cuda_impl.cuh"
#include "engine/cuda_sample.cuh"
#include "engine/model.h"
#include "engine/synthetic.h"
#include "engine/tp_impl.cuh"
#include "kernels/nm_spmv.h"

#define SD_CU_MAX_SEQS 256 /* sequences in one forward call */
#define SD_CU_N_BUCKETS 9  /* graph buckets 1, 2, 4 ... 256 */

typedef struct sd_cuda_backend {
    sd_backend base;
    sd_model_config cfg;
    int device, sms;
    cudaStream_t st;
    sd_cu_weights w;
    sd_cu_mm mm;
    float *inv_freq; /* [head_dim/2] */
    /* KV pool: [n_layers][kv_blocks + 1][n_kv][block_size][head_dim]; the extra last block
     * takes the writes of graph padding rows */
    __nv_bfloat16 *k_cache, *v_cache;
    size_t layer_kv_elems;
    int max_bt;                /* block-table width: blocks of the longest sequence */
    int tmax;                  /* tokens per forward */
    int max_seqs;              /* sequences per forward */
    float *x;                  /* [tmax, hidden] residual stream */
    __nv_bfloat16 *act;        /* [tmax, max(hidden, n_heads*head_dim, intermediate)] linear inputs */
    float *mmo;                /* [tmax, max(qkv rows, 2*intermediate, hidden)] linear outputs */
    float *q;                  /* [tmax, n_heads*head_dim] */
    float *part_acc, *part_ml; /* attention partials, [parts_rows, n_heads, head_dim] / [.., 2] */
    int *attn_cnt;             /* [tmax, n_heads] splits arrived, zeroed once (cuda_attn_decode.cu) */
    int attn_chunk;            /* decode attention: keys per split at least this (SD_ATTN_CHUNK) */
    size_t parts_rows;         /* capacity in (token x split) rows */
    __nv_bfloat16 *lm_in;      /* [tmax, hidden] rows that get logits */
    float *logits;             /* [tmax, vocab] */
    int32_t *d_meta, *h_meta;  /* tokens | pos | tok_seq | rows | block tables; h_meta pinned */
    size_t meta_cap;
    int use_graphs;
    int pdl;  /* programmatic dependent launch of the step's kernels (kernels/pdl.cuh); SD_PDL=0: off */
    int skip; /* SD_BENCH_SKIP (measurement only, wrong logits): 1 the layers' linears, 2 the rest */
    int attn_min_run; /* tiled attention for runs this long; 0: off (engine/cuda_attn_prefill.h) */
    cudaGraphExec_t graphs[SD_CU_N_BUCKETS];
    int64_t replays;
    sd_cu_sampler smp;          /* sampling on the GPU (engine/cuda_sample.cu) */
    int last_rows, last_padded; /* logits rows of the last forward (real, and with graph padding) */
    sd_tp_rank tp;              /* tensor-parallel membership; tp.comm NULL on a single GPU */
    float *gathered;            /* TP: [ranks, rows, vocab_pad] every rank's logits (all-gather) */
    sd_cuda_capture_fn cap_fn;  /* calibration hook (engine/cuda_capture.h) or NULL */
    void *cap_ud;
    int32_t cap_stop; /* with cap_fn: the last layer run, or -1 for all */
} sd_cuda_backend;

/* Offsets into the meta buffer for one step. */
typedef struct step_shape {
    int T, R, n_seqs, n_splits;
    const int32_t *tokens, *pos, *tok_seq, *rows, *bt; /* device pointers */
    int n_runs, run_len[SD_CU_MAX_SEQS];               /* host: tokens of each real sequence */
} step_shape;

static void cuda_free(sd_backend *b);
static int cuda_forward(sd_backend *base, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d);
static int cuda_sample(sd_backend *base, const sd_sample_req *reqs, int n, sd_sample_out *out, sd_diag *d);
static const sd_backend_vtbl cuda_vtbl = {"cuda", cuda_forward, cuda_free, cuda_sample};

int sd_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

/* ---- RoPE frequencies (HF rope_init_fn: default and llama3) ---- */

static void rope_inv_freq(const sd_model_config *c, float *out)
{
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        float f = (float)(1.0 / pow(c->rope_theta, (double)(2 * i) / c->head_dim));
        if (c->rope_kind == SD_ROPE_LLAMA3) {
            double old = c->rope_orig_max_pos, lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor;
            double wavelen = 2 * M_PI / f, lo_wl = old / lo, hi_wl = old / hi;
            if (wavelen > lo_wl) {
                f = (float)(f / c->rope_factor);
            } else if (wavelen >= hi_wl) {
                double s = (old / wavelen - lo) / (hi - lo);
                f = (float)((1 - s) * f / c->rope_factor + s * f);
            }
        }
        out[i] = f;
    }
}

/* ---- setup ---- */

static int alloc_dev(void **p, size_t bytes, sd_diag *d)
{
    SD_CU(d, cudaMalloc(p, bytes ? bytes : 1));
    return 0;
}

static int alloc_activations(sd_cuda_backend *b, sd_diag *d)
{
    const sd_model_config *c = &b->cfg;
    size_t T = (size_t)b->tmax, H = c->hidden, hd = c->head_dim, nh = c->n_heads, I = c->intermediate;
    size_t qkv = (nh + 2 * (size_t)c->n_kv_heads) * hd;
    size_t act = H > nh * hd ? H : nh * hd, mmo = qkv > 2 * I ? qkv : 2 * I;
    act = act > I ? act : I;
    mmo = mmo > H ? mmo : H;
    b->parts_rows = T + 2 * (size_t)b->sms + 1; /* T * sd__cu_attn_splits(T) never exceeds this */
    b->meta_cap = 4 * T + (size_t)b->max_seqs * b->max_bt;
    SD_TRY(alloc_dev((void **)&b->x, T * H * 4, d));
    SD_TRY(alloc_dev((void **)&b->act, T * act * 2, d));
    SD_TRY(alloc_dev((void **)&b->mmo, T * mmo * 4, d));
    SD_TRY(alloc_dev((void **)&b->q, T * nh * hd * 4, d));
    SD_TRY(alloc_dev((void **)&b->part_acc, b->parts_rows * nh * hd * 4, d));
    SD_TRY(alloc_dev((void **)&b->part_ml, b->parts_rows * nh * 2 * 4, d));
    SD_TRY(alloc_dev((void **)&b->attn_cnt, T * nh * sizeof(int), d));
    SD_CU(d, cudaMemset(b->attn_cnt, 0, T * nh * sizeof(int)));
    SD_TRY(alloc_dev((void **)&b->lm_in, T * H * 2, d));
    SD_TRY(alloc_dev((void **)&b->logits, T * (size_t)c->vocab * 4, d));
    if (b->tp.comm)
        SD_TRY(alloc_dev((void **)&b->gathered, T * (size_t)c->vocab * 4 * b->tp.plan.ranks, d));
    SD_TRY(alloc_dev((void **)&b->d_meta, b->meta_cap * 4, d));
    SD_CU(d, cudaMallocHost((void **)&b->h_meta, b->meta_cap * 4));
    SD_TRY(alloc_dev((void **)&b->inv_freq, hd / 2 * 4, d));
    float *f = (float *)malloc(hd / 2 * 4);
    if (!f)
        return sd_diag_set(d, SD_ENOMEM, "cuda: rope table");
    rope_inv_freq(c, f);
    cudaError_t e = cudaMemcpy(b->inv_freq, f, hd / 2 * 4, cudaMemcpyHostToDevice);
    free(f);
    SD_CU(d, e);
    return 0;
}

/* KV pool from opts.kv_blocks, else kv_memory_fraction of the memory free now. */
static int alloc_kv(sd_cuda_backend *b, const sd_backend_opts *o, sd_diag *d)
{
    const sd_model_config *c = &b->cfg;
    size_t per_block = (size_t)c->n_layers * c->n_kv_heads * b->base.block_size * c->head_dim * 2 * 2;
    int64_t blocks = o->kv_blocks;
    if (blocks <= 0) {
        size_t fr = 0, tot = 0;
        SD_CU(d, cudaMemGetInfo(&fr, &tot));
        double frac = o->kv_memory_fraction > 0 && o->kv_memory_fraction < 1 ? o->kv_memory_fraction : 0.9;
        blocks = (int64_t)(fr * frac / per_block) - 1;
        if (blocks > INT32_MAX - 1)
            blocks = INT32_MAX - 1;
    }
    if (blocks < 1)
        return sd_diag_set(d, SD_ENOMEM, "cuda: no memory left for the KV cache (%zu bytes per block)",
                           per_block);
    b->base.kv_blocks = (int32_t)blocks;
    b->layer_kv_elems = (size_t)(blocks + 1) * c->n_kv_heads * b->base.block_size * c->head_dim;
    size_t bytes = b->layer_kv_elems * c->n_layers * 2;
    cudaError_t e = cudaMalloc((void **)&b->k_cache, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&b->v_cache, bytes);
    if (e != cudaSuccess)
        return sd_diag_set(d, SD_ENOMEM, "cuda: KV cache of %lld blocks (%zu bytes): %s", (long long)blocks,
                           2 * bytes, cudaGetErrorString(e));
    int64_t ctx = (int64_t)blocks * b->base.block_size;
    if ((int64_t)b->max_bt * b->base.block_size > ctx) /* no sequence can outgrow the pool */
        b->max_bt = (int)((ctx + b->base.block_size - 1) / b->base.block_size);
    return 0;
}

/* Everything but the weights, which `load` puts in place. */
static int cuda_create(sd_backend **ret, const sd_model_config *cfg, const sd_backend_opts *opts,
                       int (*load)(sd_cuda_backend *b, const void *arg, sd_diag *d), const void *arg,
                       const sd_tp_rank *tp, sd_diag *d)
{
    sd_backend_opts o;
    if (opts)
        o = *opts;
    else
        sd_backend_opts_default(&o);
    if (cfg->head_dim != 64 && cfg->head_dim != 128 && cfg->head_dim != 256)
        return sd_diag_set(d, SD_ENOTSUP, "cuda backend: head_dim %d (64, 128 or 256 supported)",
                           cfg->head_dim);
    if (cfg->n_kv_heads <= 0 || cfg->n_heads % cfg->n_kv_heads)
        return sd_diag_set(d, SD_EINVAL, "cuda backend: %d heads over %d KV heads", cfg->n_heads,
                           cfg->n_kv_heads);
    int ndev = sd_cuda_device_count();
    if (o.device < 0 || o.device >= ndev)
        return sd_diag_set(d, SD_ENODEV, "cuda backend: device %d requested, %d present", o.device, ndev);
    sd_cuda_backend *b = (sd_cuda_backend *)calloc(1, sizeof *b);
    if (!b)
        return sd_diag_set(d, SD_ENOMEM, "cuda backend");
    b->base.vt = &cuda_vtbl;
    b->base.vocab = tp ? tp->plan.vocab_total : cfg->vocab; /* cfg is the rank's share under TP */
    if (tp)
        b->tp = *tp;
    b->base.block_size = o.block_size > 0 ? o.block_size : 16;
    b->tmax = o.max_batch_tokens > 0 ? o.max_batch_tokens : 2048;
    b->base.max_batch_tokens = b->tmax;
    b->max_seqs = b->tmax < SD_CU_MAX_SEQS ? b->tmax : SD_CU_MAX_SEQS;
    b->cfg = *cfg;
    b->device = o.device;
    b->use_graphs = 1;
    const char *pdl_env = getenv("SD_PDL");
    b->pdl = !(pdl_env && !strcmp(pdl_env, "0"));
    /* SD_BENCH_SKIP=linears|small drops that part of every layer, so `bench decode` can show what
     * each part of the step costs in the real graph (kernels/NOTES.md); the logits are wrong */
    const char *skip = getenv("SD_BENCH_SKIP");
    b->skip = !skip ? 0 : !strcmp(skip, "linears") ? 1 : !strcmp(skip, "small") ? 2 : 0;
    b->attn_min_run = sd_cu_attn_prefill_min_run();
    const char *chunk = getenv("SD_ATTN_CHUNK"); /* measured in results/2026-11-30-s3 */
    b->attn_chunk = chunk && *chunk ? atoi(chunk) : 64;
    /* block-table width, needed to size the meta buffers before the pool is known */
    int64_t ctx = cfg->max_pos > 0 ? cfg->max_pos : 131072;
    if (o.kv_blocks > 0 && (int64_t)o.kv_blocks * b->base.block_size < ctx)
        ctx = (int64_t)o.kv_blocks * b->base.block_size;
    b->max_bt = (int)((ctx + b->base.block_size - 1) / b->base.block_size);
    int rc = 0;
    cudaError_t e = cudaSetDevice(b->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&b->sms, cudaDevAttrMultiProcessorCount, b->device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&b->st, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        rc = sd_diag_set(d, SD_ECUDA, "cuda backend: device %d: %s", b->device, cudaGetErrorString(e));
    if (!rc)
        rc = load(b, arg, d);
    if (!rc)
        rc = sd__cu_mm_init(&b->mm, &b->w, b->st, d);
    if (!rc && b->tp.comm)
        b->mm.tp = &b->tp; /* first-use timing drains the stream under the group's deadline */
    if (!rc)
        sd_kernels_ctx_set_pdl((sd_kernels_ctx *)b->mm.spmv, b->pdl);
    if (!rc)
        rc = alloc_activations(b, d);
    if (!rc)
        rc = alloc_kv(b, &o, d);
    if (rc) {
        cuda_free(&b->base);
        return rc;
    }
    *ret = &b->base;
    return 0;
}

static int load_model(sd_cuda_backend *b, const void *arg, sd_diag *d)
{
    return sd__cu_weights_upload(&b->w, (const sd_model *)arg, d);
}

int sd_backend_cuda_init(sd_backend **ret, const sd_model *m, const sd_backend_opts *o, sd_diag *d)
{
    return cuda_create(ret, sd_model_cfg(m), o, load_model, m, NULL, d);
}

typedef struct synth_arg {
    int n, m;
    uint64_t seed;
} synth_arg;

static int load_synth(sd_cuda_backend *b, const void *arg, sd_diag *d)
{
    const synth_arg *a = (const synth_arg *)arg;
    /* under TP b->cfg is the rank's: vocab_pad rows of embedding and lm_head, its own rows */
    return sd__cu_weights_synthetic(&b->w, &b->cfg, a->n, a->m, a->seed, b->st, d);
}

static int load_model_shard(sd_cuda_backend *b, const void *arg, sd_diag *d)
{
    return sd__cu_weights_upload_shard(&b->w, (const sd_model *)arg, &b->tp.plan, d);
}

int sd__cu_backend_init_rank(sd_backend **ret, const sd_model *m, const sd_model_config *synth_cfg,
                             const char *pattern, uint64_t seed, const sd_backend_opts *o,
                             const sd_tp_rank *tp, sd_diag *d)
{
    sd_model_config lc;
    sd_shard_local_config(&tp->plan, m ? sd_model_cfg(m) : synth_cfg, &lc);
    if (m)
        return cuda_create(ret, &lc, o, load_model_shard, m, tp, d);
    synth_arg a = {0, 0, seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(tp->plan.rank + 1))};
    if (sd_synth_pattern_parse(pattern, &a.n, &a.m))
        return sd_diag_set(d, SD_EINVAL, "synthetic weights: pattern '%s' (dense or N:M with 2N = M, M | 32)",
                           pattern ? pattern : "(null)");
    return cuda_create(ret, &lc, o, load_synth, &a, tp, d);
}

void sd__cu_backend_abort(sd_backend *base)
{
    sd__tp_abort(&((sd_cuda_backend *)base)->tp);
}

int sd__cu_backend_aborted(const sd_backend *base)
{
    return ((const sd_cuda_backend *)base)->tp.aborted;
}

int sd_backend_cuda_init_synthetic(sd_backend **ret, const sd_model_config *cfg, const char *pattern,
                                   uint64_t seed, const sd_backend_opts *o, sd_diag *d)
{
    synth_arg a = {0, 0, seed};
    if (sd_synth_pattern_parse(pattern, &a.n, &a.m))
        return sd_diag_set(d, SD_EINVAL, "synthetic weights: pattern '%s' (dense or N:M with 2N = M, M | 32)",
                           pattern ? pattern : "(null)");
    return cuda_create(ret, cfg, o, load_synth, &a, NULL, d);
}

static void cuda_free(sd_backend *base)
{
    sd_cuda_backend *b = (sd_cuda_backend *)base;
    if (!b)
        return;
    cudaSetDevice(b->device);
    for (int i = 0; i < SD_CU_N_BUCKETS; i++)
        if (b->graphs[i])
            cudaGraphExecDestroy(b->graphs[i]);
    sd__cu_mm_free(&b->mm);
    sd__cu_weights_free(&b->w);
    void *bufs[] = {b->x,     b->act,    b->mmo,    b->q,        b->part_acc, b->part_ml, b->attn_cnt,
                    b->lm_in, b->logits, b->d_meta, b->inv_freq, b->k_cache,  b->v_cache, b->gathered};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    cudaFreeHost(b->h_meta);
    sd__cu_sampler_free(&b->smp);
    if (b->st)
        cudaStreamDestroy(b->st);
    cudaGetLastError(); /* leave no sticky error from teardown behind */
    free(b);
}

/* ---- one step on the stream (eager, or recorded into a graph) ---- */

/* Hands the linear input just formed in b->act ([T, cols] bf16) to the calibration hook. Only
 * eager steps get here (cuda_forward bypasses graphs while a hook is set); the stream is drained
 * first so the rows are complete, and the hook is done with them when it returns. */
static int capture_input(sd_cuda_backend *b, int li, sd_capture_site site, int64_t cols, const step_shape *s,
                         sd_diag *d)
{
    SD_CU(d, cudaStreamSynchronize(b->st));
    const int32_t *pos = b->h_meta + s->T, *seq = b->h_meta + 2 * (size_t)s->T; /* fill_meta's layout */
    return b->cap_fn(b->cap_ud, li, site, b->act, cols, s->T, pos, seq);
}

static int run_layer(sd_cuda_backend *b, int li, const step_shape *s, sd_diag *d)
{
    const sd_model_config *c = &b->cfg;
    const sd_cu_layer *L = &b->w.layers[li];
    cudaStream_t st = b->st;
    const float *resid = li ? b->mmo : NULL; /* the previous layer's down_proj output */
    const int pdl = b->pdl;
#define LIN(call) (b->skip == 1 ? 0 : (call))
#define SMALL(call) (b->skip == 2 ? 0 : (call))
    SD_TRY(SMALL(
        sd__cu_add_rmsnorm(b->x, resid, L->attn_norm, b->act, s->T, c->hidden, c->rms_eps, pdl, st, d)));
    if (b->cap_fn)
        SD_TRY(capture_input(b, li, SD_CAP_QKV, c->hidden, s, d));
    SD_TRY(LIN(sd__cu_linear(&b->mm, &L->qkv, b->act, b->mmo, s->T, st, d)));
    __nv_bfloat16 *kc = b->k_cache + (size_t)li * b->layer_kv_elems;
    __nv_bfloat16 *vc = b->v_cache + (size_t)li * b->layer_kv_elems;
    sd_cu_qkv_args qa = {b->mmo,
                         L->qkv.bias,
                         L->q_norm,
                         L->k_norm,
                         b->inv_freq,
                         s->pos,
                         s->tok_seq,
                         s->bt,
                         b->max_bt,
                         b->base.block_size,
                         s->T,
                         c->n_heads,
                         c->n_kv_heads,
                         c->head_dim,
                         c->rms_eps,
                         b->q,
                         kc,
                         vc};
    SD_TRY(SMALL(sd__cu_qkv_post(&qa, pdl, st, d)));
    sd_cu_attn_args aa = {b->q,
                          kc,
                          vc,
                          s->pos,
                          s->tok_seq,
                          s->bt,
                          b->max_bt,
                          b->base.block_size,
                          s->T,
                          c->n_heads,
                          c->n_kv_heads,
                          c->head_dim,
                          s->n_splits,
                          b->part_acc,
                          b->part_ml,
                          b->act,
                          b->attn_cnt,
                          b->attn_chunk};
    SD_TRY(SMALL(sd__cu_attn_step(&aa, s->run_len, s->n_runs, b->attn_min_run, pdl, st, d)));
    if (b->cap_fn)
        SD_TRY(capture_input(b, li, SD_CAP_O, (int64_t)c->n_heads * c->head_dim, s, d));
    SD_TRY(LIN(sd__cu_linear(&b->mm, &L->o, b->act, b->mmo, s->T, st, d)));
    SD_TRY(sd__tp_allreduce_sum(&b->tp, b->mmo, (size_t)s->T * c->hidden, st, d)); /* TP: partial sums */
    SD_TRY(SMALL(
        sd__cu_add_rmsnorm(b->x, b->mmo, L->mlp_norm, b->act, s->T, c->hidden, c->rms_eps, pdl, st, d)));
    if (b->cap_fn)
        SD_TRY(capture_input(b, li, SD_CAP_GATEUP, c->hidden, s, d));
    SD_TRY(LIN(sd__cu_linear(&b->mm, &L->gate_up, b->act, b->mmo, s->T, st, d)));
    SD_TRY(SMALL(sd__cu_swiglu(b->mmo, b->act, s->T, c->intermediate, pdl, st, d)));
    if (b->cap_fn)
        SD_TRY(capture_input(b, li, SD_CAP_DOWN, c->intermediate, s, d));
    SD_TRY(LIN(sd__cu_linear(&b->mm, &L->down, b->act, b->mmo, s->T, st, d)));
#undef LIN
#undef SMALL
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
    const float *resid = c->n_layers ? b->mmo : NULL;
    SD_TRY(sd__cu_add_rmsnorm(b->x, resid, b->w.final_norm, b->act, s->T, c->hidden, c->rms_eps, b->pdl,
                              b->st, d));
    SD_TRY(sd__cu_gather_rows(b->act, s->rows, b->lm_in, s->R, c->hidden, b->pdl, b->st, d));
    SD_TRY(sd__cu_linear(&b->mm, &b->w.lm_head, b->lm_in, b->logits, s->R, b->st, d));
    return sd__tp_allgather(&b->tp, b->logits, b->gathered, (size_t)s->R * c->vocab, b->st, d);
}

/* ---- forward ---- */

/* Checks the batch against the pool and the buffers; counts tokens and logits rows. */
static int check_batch(const sd_cuda_backend *b, const sd_batch_seq *seqs, int n_seqs, int *T, int *R,
                       int *all_decode, sd_diag *d)
{
    int64_t t = 0, r = 0;
    int dec = 1;
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
        dec &= q->n_tokens == 1;
    }
    if (t > b->tmax)
        return sd_diag_set(d, SD_EINVAL, "cuda forward: %lld tokens (max_batch_tokens %d)", (long long)t,
                           b->tmax);
    *T = (int)t;
    *R = (int)r;
    *all_decode = dec;
    return 0;
}

/* Fills h_meta for n_seqs real sequences padded to `padded` one-token rows (decode buckets)
 * and sets the device pointers of s. */
static void fill_meta(sd_cuda_backend *b, const sd_batch_seq *seqs, int n_seqs, int T, int R, int padded,
                      step_shape *s)
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
    for (int i = n_seqs; i < padded; i++, t++, r++) { /* padding: position 0 in the spare block */
        tok[t] = pos[t] = 0;
        seq[t] = i;
        rows[r] = t;
        bt[(size_t)i * b->max_bt] = b->base.kv_blocks;
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

/* Replays (or on first use, runs eagerly then captures) the graph of this batch bucket. */
static int decode_graph(sd_cuda_backend *b, const step_shape *s, int k, sd_diag *d)
{
    if (b->graphs[k]) {
        SD_CU(d, cudaGraphLaunch(b->graphs[k], b->st));
        b->replays++;
        return 0;
    }
    SD_TRY(enqueue_step(b, s, d)); /* this step's results, and any lazy init outside the capture */
    SD_TRY(sd__tp_sync(&b->tp, b->st, d));
    cudaGraph_t g = NULL;
    SD_CU(d, cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal));
    int rc = enqueue_step(b, s, d);
    cudaError_t e = cudaStreamEndCapture(b->st, &g);
    if (!rc && e == cudaSuccess)
        e = cudaGraphInstantiate(&b->graphs[k], g, 0);
    if (g)
        cudaGraphDestroy(g);
    if (rc)
        return rc;
    SD_CU(d, e);
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

static int cuda_forward(sd_backend *base, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d)
{
    sd_cuda_backend *b = (sd_cuda_backend *)base;
    int T = 0, R = 0, dec = 0;
    b->last_rows = 0; /* nothing to sample until this step succeeds */
    SD_TRY(check_batch(b, seqs, n_seqs, &T, &R, &dec, d));
    SD_CU(d, cudaSetDevice(b->device));
    int k = bucket_of(n_seqs), padded = 1 << k;
    int graph = b->use_graphs && !b->cap_fn && dec && k < SD_CU_N_BUCKETS && padded <= b->tmax &&
                padded <= b->max_seqs;
    step_shape s;
    if (graph)
        fill_meta(b, seqs, n_seqs, padded, padded, padded, &s);
    else
        fill_meta(b, seqs, n_seqs, T, R, n_seqs, &s);
    SD_CU(d, cudaMemcpyAsync(b->d_meta, b->h_meta, meta_len(b, &s) * 4, cudaMemcpyHostToDevice, b->st));
    SD_TRY(graph ? decode_graph(b, &s, k, d) : enqueue_step(b, &s, d));
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
static int cuda_sample(sd_backend *base, const sd_sample_req *reqs, int n, sd_sample_out *out, sd_diag *d)
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

/* ---- hooks and numbers for tests and benchmarks ---- */

int sd_backend_cuda_set_capture(sd_backend *base, sd_cuda_capture_fn fn, void *ud, int32_t stop_after_layer,
                                sd_diag *d)
{
    if (!base || base->vt != &cuda_vtbl)
        return sd_diag_set(d, SD_EINVAL, "cuda capture: not a CUDA backend");
    sd_cuda_backend *b = (sd_cuda_backend *)base;
    if (fn && b->tp.comm)
        return sd_diag_set(d, SD_ENOTSUP,
                           "cuda capture: a tensor-parallel rank sees only shards of the inputs");
    b->cap_fn = fn;
    b->cap_ud = fn ? ud : NULL;
    b->cap_stop = fn ? stop_after_layer : -1;
    return 0;
}

/* The fused device linear holding linear `which` (SD_LIN_*) of layer li: its first row there
 * and its row count. */
static sd_cu_linear *fused_linear(sd_cuda_backend *b, int li, int which, int64_t *row0, int64_t *rows)
{
    const sd_model_config *c = &b->cfg;
    sd_cu_layer *L = &b->w.layers[li];
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    *row0 = 0;
    *rows = which == SD_LIN_Q                           ? q
            : which <= SD_LIN_V                         ? kv
            : which == SD_LIN_O || which == SD_LIN_DOWN ? c->hidden
                                                        : c->intermediate;
    if (which <= SD_LIN_V) {
        *row0 = which == SD_LIN_Q ? 0 : which == SD_LIN_K ? q : q + kv;
        return &L->qkv;
    }
    if (which == SD_LIN_GATE || which == SD_LIN_UP) {
        *row0 = which == SD_LIN_UP ? c->intermediate : 0;
        return &L->gate_up;
    }
    return which == SD_LIN_O ? &L->o : &L->down;
}

int sd_backend_cuda_set_linear(sd_backend *base, int32_t layer, int which, const float *w, sd_diag *d)
{
    if (!base || base->vt != &cuda_vtbl)
        return sd_diag_set(d, SD_EINVAL, "cuda set_linear: not a CUDA backend");
    sd_cuda_backend *b = (sd_cuda_backend *)base;
    if (layer < 0 || layer >= b->w.n_layers || which < 0 || which >= SD_LIN_N)
        return sd_diag_set(d, SD_EINVAL, "cuda set_linear: layer %d, linear %d", layer, which);
    if (b->tp.comm)
        return sd_diag_set(d, SD_ENOTSUP, "cuda set_linear: a tensor-parallel rank holds shards");
    int64_t row0 = 0, rows = 0;
    sd_cu_linear *l = fused_linear(b, layer, which, &row0, &rows);
    if (l->bitmask || !l->w)
        return sd_diag_set(d, SD_ENOTSUP, "cuda set_linear: layer %d linear %d is not dense", layer, which);
    size_t n = (size_t)rows * (size_t)l->cols;
    uint16_t *h = (uint16_t *)malloc(n * sizeof *h);
    if (!h)
        return sd_diag_set(d, SD_ENOMEM, "cuda set_linear: out of memory");
    for (size_t i = 0; i < n; i++)
        h[i] = sd_f32_to_bf16(w[i]);
    /* on the stream, after whatever step may still read these weights */
    cudaError_t e = cudaSetDevice(b->device);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(l->w + row0 * l->cols, h, n * 2, cudaMemcpyHostToDevice, b->st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->st);
    free(h);
    if (e != cudaSuccess)
        return sd_diag_set(d, SD_ECUDA, "cuda set_linear: %s", cudaGetErrorString(e));
    return 0;
}

int sd_backend_cuda_device(const sd_backend *b)
{
    return ((const sd_cuda_backend *)b)->device;
}

void sd_backend_cuda_set_graphs(sd_backend *b, int enable)
{
    ((sd_cuda_backend *)b)->use_graphs = enable;
}

int64_t sd_backend_cuda_graph_replays(const sd_backend *b)
{
    return ((const sd_cuda_backend *)b)->replays;
}

int64_t sd_backend_cuda_sampled_rows(const sd_backend *b)
{
    return ((const sd_cuda_backend *)b)->smp.rows_sampled;
}

static size_t linear_bytes(const sd_cu_linear *l)
{
    size_t n = (size_t)l->rows * (size_t)l->cols;
    return (l->bitmask ? n + n / 8 : 2 * n) + (l->bias ? (size_t)l->rows * 4 : 0);
}

size_t sd_backend_cuda_step_weight_bytes(const sd_backend *base)
{
    const sd_cuda_backend *b = (const sd_cuda_backend *)base;
    const sd_model_config *c = &b->cfg;
    size_t n = linear_bytes(&b->w.lm_head) + (size_t)c->hidden * 4;
    for (int i = 0; i < b->w.n_layers; i++) {
        const sd_cu_layer *l = &b->w.layers[i];
        n += linear_bytes(&l->qkv) + linear_bytes(&l->o) + linear_bytes(&l->gate_up) + linear_bytes(&l->down);
        n += 2 * (size_t)c->hidden * 4 + (l->q_norm ? 2 * (size_t)c->head_dim * 4 : 0);
    }
    return n;
}

size_t sd_backend_cuda_kv_bytes_per_token(const sd_backend *base)
{
    const sd_cuda_backend *b = (const sd_cuda_backend *)base;
    return (size_t)b->cfg.n_layers * b->cfg.n_kv_heads * b->cfg.head_dim * 2 * 2;
}
