/* cuda_backend: the CUDA backend — one GPU runs the whole model over a batch of sequences
 * with a paged bf16 KV cache; all-decode steps replay a CUDA graph captured per batch-size
 * bucket, reading tokens, positions and block tables from device buffers. This file: create,
 * load, free, the vtable and the hooks; the step itself is in engine/cuda_step.cu. */
#include "engine/backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda_attn_fused.h"
#include "engine/cuda_attn_prefill.h"
#include "engine/cuda_backend.h"
#include "engine/cuda_backend_impl.cuh"
#include "engine/cuda_cslt.h"
#include "engine/dtype.h"
#include "engine/model.h"
#include "engine/synthetic.h"
#include "kernels/nm_spmv.h"

static void cuda_free(sd_backend *b);
static const sd_backend_vtbl cuda_vtbl = {"cuda", sd__cu_backend_forward, cuda_free, sd__cu_backend_sample,
                                          1};

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
    /* act, the linears' input above SD_NM_MAX_B rows: with cuSPARSELt, room for its padded rows
     * (cuda_cslt.h; hbuf is an input only at fused steps of at most SD_NM_MAX_B rows) */
    size_t TL = b->mm.cslt ? (size_t)sd_cslt_pad_rows(b->tmax) : T;
    b->mm.row_cap = (int)TL;
    size_t qkv = (nh + 2 * (size_t)c->n_kv_heads) * hd;
    size_t act = H > nh * hd ? H : nh * hd, mmo = qkv > 2 * I ? qkv : 2 * I;
    act = act > I ? act : I;
    mmo = mmo > H ? mmo : H;
    b->parts_rows = T + 2 * (size_t)b->sms + 1; /* T * sd__cu_attn_splits(T) never exceeds this */
    b->meta_cap = 4 * T + (size_t)b->max_seqs * b->max_bt;
    SD_TRY(alloc_dev((void **)&b->x, T * H * 4, d));
    SD_TRY(alloc_dev((void **)&b->act, TL * act * 2, d));
    SD_TRY(alloc_dev((void **)&b->hbuf, (T < SD_NM_MAX_B ? T : SD_NM_MAX_B) * I * 2, d));
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
/* SD_BENCH_SKIP: a comma-separated list of step parts to drop from every layer, so that `bench
 * decode` can show what each costs in the real graph (kernels/NOTES.md); the logits are wrong.
 * linears, norm (both residual-add + RMSNorms), qkvpost, attn, swiglu; small = the last four. */
/* SD_BENCH_SKIP's comma list as SD_SKIP_* bits; a name it does not know is an error, not a
 * silent no-op (a measurement that skipped nothing would be misread). */
static int parse_skip(const char *s, int *ret, sd_diag *d)
{
    static const struct {
        const char *name;
        int bits;
    } parts[] = {{"linears", SD_SKIP_LINEARS}, {"norm", SD_SKIP_NORM},     {"qkvpost", SD_SKIP_QKVPOST},
                 {"attn", SD_SKIP_ATTN},       {"swiglu", SD_SKIP_SWIGLU}, {"small", SD_SKIP_SMALL}};
    int bits = 0;
    while (s && *s) {
        size_t n = strcspn(s, ","), i = 0;
        while (i < sizeof parts / sizeof parts[0] &&
               !(strlen(parts[i].name) == n && !strncmp(s, parts[i].name, n)))
            i++;
        if (i == sizeof parts / sizeof parts[0])
            return sd_diag_set(
                d, SD_EINVAL,
                "SD_BENCH_SKIP: unknown part '%.*s' (linears, norm, qkvpost, attn, swiglu, small)", (int)n,
                s);
        bits |= parts[i].bits;
        s += n + (s[n] == ',');
    }
    *ret = bits;
    return 0;
}

/* A measurement switch: the environment variable's value when it is one digit 0..max, else def. */
static int env_mode(const char *name, int def, int max)
{
    const char *e = getenv(name);
    return e && e[0] >= '0' && e[0] <= '0' + max && !e[1] ? e[0] - '0' : def;
}

/* The most rows a 2:4 .. 16:32 linear sends to the wide kernels, more going to cuBLAS on the expanded
 * weights: up to SD_NM_MAX_B_TILED, above SD_NM_MAX_B_WIDE in tiles (each one launch with the weights
 * read again; first use times them against cuBLAS per shape). On the 8B shapes the tiles ran 1.0-2.2x
 * cuBLAS at 128-192 rows, and the steady load at 128 req/s ran 20% lower TPOT (kernels/NOTES.md v31).
 * SD_NM_TILES=0: the plain wide kernels only (up to SD_NM_MAX_B_WIDE), to measure what tiles bring. */
static int wide_rows(void)
{
    return env_mode("SD_NM_TILES", 1, 1) ? SD_NM_MAX_B_TILED : SD_NM_MAX_B_WIDE;
}

/* The 2:4 linears' GEMMs of more than SD_NM_MAX_B_WIDE rows (prompt chunks) on the sparse tensor
 * cores through cuSPARSELt, from a second copy of each in its layout (cuda_cslt.h). Unset: on, with
 * the library's search for each plan's algorithm config at first use, where the library loads and the
 * copies take at most half the free device memory (they cost KV cache: 1.125 bytes a weight), else
 * off with a line saying why; on the 8B it ran 2:4 chunks of 128-2048 tokens 1.3-2.2x faster than
 * expansion + cuBLAS, 1.0-1.13x dense from 256 (kernels/NOTES.md v31). SD_CUSPARSELT=0: off; =1: on
 * with the default configs; =2: on, searched; with 1 or 2 a library that does not load, or copies
 * that do not fit, fail the backend's creation, and so does any other value. */
static int cslt_mode(int *ret, sd_diag *d)
{
    const char *e = getenv("SD_CUSPARSELT");
    if (!e || !*e) {
        *ret = SD_CU_CSLT_AUTO;
        return 0;
    }
    *ret = e[0] - '0';
    if (e[1] || *ret < 0 || *ret > 2)
        return sd_diag_set(d, SD_EINVAL, "SD_CUSPARSELT: '%s' (0, 1 or 2)", e);
    return 0;
}

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
    int skip = 0, cslt = 0; /* checked before anything is loaded */
    SD_TRY(parse_skip(getenv("SD_BENCH_SKIP"), &skip, d));
    SD_TRY(cslt_mode(&cslt, d));
    int ndev = sd_cuda_device_count();
    if (o.device < 0 || o.device >= ndev)
        return sd_diag_set(d, SD_ENODEV, "cuda backend: device %d requested, %d present", o.device, ndev);
    sd_cuda_backend *b = (sd_cuda_backend *)calloc(1, sizeof *b);
    if (!b)
        return sd_diag_set(d, SD_ENOMEM, "cuda backend");
    b->base.vt = &cuda_vtbl;
    b->skip = skip;
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
    b->base.uniform_spec = 1; /* speculative steps of equal draft lengths replay a graph */
    b->pdl = env_mode("SD_PDL", 1, 1);
    /* The o and down projections add into the residual stream (no separate add, no split-K
     * zeroing); under TP the partial sums go through the all-reduce first. SD_RESID_ACC=0: off. */
    b->res_acc = !b->tp.comm && env_mode("SD_RESID_ACC", 1, 1);
    b->attn_min_run = sd_cu_attn_prefill_min_run();
    b->attn_fused = sd_cu_attn_fused_enabled();
    b->attn_cluster = sd_cu_attn_cluster_mode();
    b->attn_early = sd_cu_attn_early();
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
    int clusters = 0; /* thread-block clusters: compute capability 9.0 and up */
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, b->device);
    if (!clusters)
        b->attn_cluster = SD_ATTN_CLUSTER_NEVER;
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&b->st, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        rc = sd_diag_set(d, SD_ECUDA, "cuda backend: device %d: %s", b->device, cudaGetErrorString(e));
    if (!rc)
        rc = load(b, arg, d);
    if (!rc)
        rc = sd__cu_mm_init(&b->mm, &b->w, wide_rows(), b->st, d);
    /* The bitmask expansion (prompt chunks of 4:8-16:32 and of 2:4 without cuSPARSELt, and
     * cuSPARSELt's copies at load) by the kernel that writes whole sectors: the same bits 1.7x
     * faster (8B shapes on an H100: gate_up 128 us against 216; 8:16 prompt chunks of 512 tokens
     * 21.9 ms against 27.3; kernels/NOTES.md v33). SD_EXPAND_WARP=0: the thread-per-word kernel. */
    b->mm.expand_warp = env_mode("SD_EXPAND_WARP", 1, 1);
    if (!rc && cslt)
        rc = sd__cu_mm_cslt(&b->mm, &b->w, cslt, b->st, d);
    if (!rc && b->mm.cslt) /* a plan per padded row count: the warm-up runs each */
        b->base.gemm_row_step = SD_CSLT_ROW_STEP;
    /* 65-256 rows (a decode batch, a short prompt chunk) take cuSPARSELt where first use timed it
     * faster than the tiles and cuBLAS; SD_CUSPARSELT_TIMED=0: wherever it can, untimed (as before it
     * was timed), to measure what the timing brings. Inside the decode graphs too (batches of
     * 65-256 sequences): captured bit for bit as eager, 2:4 decode steps of 128 / 256 sequences
     * 13.3 / 18.3 ms against 15.0 / 27.8 with the tiles in the graphs (8B on an H100,
     * kernels/NOTES.md v33). SD_CUSPARSELT_GRAPHS=0: graphs without cuSPARSELt; =2 (tests): the
     * first capture with it fails, so the graphs go on without it (cuda_step.cu capture_graph) */
    b->mm.cslt_timed = env_mode("SD_CUSPARSELT_TIMED", 1, 1);
    const int cg = env_mode("SD_CUSPARSELT_GRAPHS", 1, 2);
    b->mm.cslt_graph_off = cg == 0;
    b->mm.cslt_graph_fail = cg == 2;
    /* SD_NM_GEMM=1: bitmask linears of more than 64 rows that cuSPARSELt does not take run the N:M
     * GEMM of kernels/nm_gemm.h, untimed (decode graphs included), to measure it in whole steps;
     * =2: first use times it beside the other paths at 65-256 rows. Off until `bench gemm` and
     * `bench prefill` have timed it (kernels/NOTES.md v32) */
    b->mm.nm_gemm = env_mode("SD_NM_GEMM", 0, 2);
    if (!rc && b->tp.comm)
        b->mm.tp = &b->tp; /* first-use timing drains the stream under the group's deadline */
    if (!rc) {
        sd_kernels_ctx_set_pdl((sd_kernels_ctx *)b->mm.spmv, b->pdl);
        /* SD_NM_TCX=0: without the register-expanding kernels (kernels/NOTES.md v8), to measure
         * what they bring; =2: without the 16:32 one only (v19) */
        sd_kernels_ctx_set_tcx((sd_kernels_ctx *)b->mm.spmv,
                               env_mode("SD_NM_TCX", SD_NM_TCX_ALL, SD_NM_TCX_NO_1632));
        /* SD_NM_C24=0: without the batch-1 kernels that compact x (kernels/NOTES.md v11, v19);
         * =1: the 2:4 one only */
        sd_kernels_ctx_set_c24((sd_kernels_ctx *)b->mm.spmv,
                               env_mode("SD_NM_C24", SD_NM_C24_ALL, SD_NM_C24_ALL));
        /* SD_NM_SP24=0: without the 2:4 kernels on the sparse tensor cores (kernels/nm_spmv_sp.cu),
         * to measure what they bring */
        sd_kernels_ctx_set_sp24((sd_kernels_ctx *)b->mm.spmv, env_mode("SD_NM_SP24", 1, 1));
        /* SD_NM_SK=0 / 2: the stream-K row-per-lane kernel never / always among the autotuner's
         * candidates (the default: where the register-expanding kernels do not take the problem) */
        sd_kernels_ctx_set_sk((sd_kernels_ctx *)b->mm.spmv,
                              env_mode("SD_NM_SK", SD_NM_SK_TCX, SD_NM_SK_ALWAYS));
        sd_kernels_ctx_set_deterministic((sd_kernels_ctx *)b->mm.spmv, o.deterministic);
        /* SD_SWIGLU_FUSE=0: the SwiGLU as its own kernel after the gate_up linear, never in the
         * linear's epilogue; 2: in the epilogue wherever the kernel takes it, also where that
         * measured slower (kernels/NOTES.md v16); to measure what the fusion brings */
        b->mm.swiglu = env_mode("SD_SWIGLU_FUSE", 1, 2);
        b->mm.tune_log = env_mode("SD_TUNE_LOG", 0, 1);
        /* The refine pass: after a bucket's first capture, each linear's runner-up config tried
         * inside the step and kept where the step runs faster (cuda_step.cu refine_graph); on by
         * default (kernels/NOTES.md v26: it narrows the tunings' spread), SD_TUNE_REFINE=0 off;
         * =2 (tests) makes it fail after its first runner-up (cuda_step.cu refine_turn_off) */
        b->refine = o.deterministic ? 0 : env_mode("SD_TUNE_REFINE", 1, 2);
        rc = sd__cu_tune_cache_open(b, o.tune_cache, d); /* after the deterministic flag: it filters */
    }
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

/* a->n, a->m from `pattern` ("dense" or N:M); SD_EINVAL naming it otherwise. */
static int synth_pattern(const char *pattern, synth_arg *a, sd_diag *d)
{
    if (sd_synth_pattern_parse(pattern, &a->n, &a->m))
        return sd_diag_set(d, SD_EINVAL, "synthetic weights: pattern '%s' (dense or N:M with 2N = M, M | 32)",
                           pattern ? pattern : "(null)");
    return 0;
}

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
    SD_TRY(synth_pattern(pattern, &a, d));
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
    SD_TRY(synth_pattern(pattern, &a, d));
    return cuda_create(ret, cfg, o, load_synth, &a, NULL, d);
}

static void cuda_free(sd_backend *base)
{
    sd_cuda_backend *b = (sd_cuda_backend *)base;
    if (!b)
        return;
    cudaSetDevice(b->device);
    for (int i = 0; i < SD_CU_N_GRAPHS; i++)
        if (b->graphs[i])
            cudaGraphExecDestroy(b->graphs[i]);
    for (int i = 0; i < 2; i++)
        if (b->tl_ev[i])
            cudaEventDestroy(b->tl_ev[i]);
    sd__cu_tune_cache_close(b);
    sd__cu_mm_free(&b->mm);
    sd__cu_weights_free(&b->w);
    void *bufs[] = {b->x,        b->act,      b->hbuf,     b->mmo,     b->q,
                    b->part_acc, b->part_ml,  b->attn_cnt, b->lm_in,   b->logits,
                    b->d_meta,   b->inv_freq, b->k_cache,  b->v_cache, b->gathered};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    cudaFreeHost(b->h_meta);
    sd__cu_sampler_free(&b->smp);
    if (b->st)
        cudaStreamDestroy(b->st);
    cudaGetLastError(); /* leave no sticky error from teardown behind */
    free(b);
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

int sd_backend_cuda_cslt(const sd_backend *b, size_t *bytes)
{
    int n = 0;
    size_t by = sd_cslt_bytes(((const sd_cuda_backend *)b)->mm.cslt, &n);
    if (bytes)
        *bytes = by;
    return n;
}

int64_t sd_backend_cuda_cslt_captured(const sd_backend *b)
{
    return ((const sd_cuda_backend *)b)->mm.cslt_captured;
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

void sd_backend_cuda_time_launches(sd_backend *b, int on)
{
    ((sd_cuda_backend *)b)->time_launches = on != 0;
}

void sd_backend_cuda_set_swiglu_fuse(sd_backend *b, int mode)
{
    ((sd_cuda_backend *)b)->mm.swiglu = mode < 0 ? 0 : mode > 2 ? 2 : mode;
}

int64_t sd_backend_cuda_swiglu_fused(const sd_backend *b)
{
    return ((const sd_cuda_backend *)b)->mm.swiglu_launches;
}

int sd_backend_cuda_tuned_here(const sd_backend *b)
{
    return sd__cu_tuned_here((const sd_cuda_backend *)b);
}

void sd_backend_cuda_refined(const sd_backend *b, int *tried, int *kept, int *failed)
{
    const sd_cuda_backend *c = (const sd_cuda_backend *)b;
    *tried = c->refine_tried;
    *kept = c->refine_kept;
    if (failed)
        *failed = c->refine_failed;
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
