/* prune_layer: Hessian capture by replay (the backend hook keeps decode-position rows) and the
 * solve of one decoder layer's linears, shared inputs factorised once. */
#include "prune/prune_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dtype.h"
#include "kernels/nm_format.h"
#include "prune/sgpt.h"
#include "prune/wanda.h"

/* ---- capture ------------------------------------------------------------------------------ */

static void cap_begin(void *ud, const int32_t *ids, int n)
{
    sd__cap *c = ud;
    for (int k = 0; k < n && k < SD__CAP_MAX_SEQS; k++)
        c->prefill[k] = c->j->calib.seqs[ids[k]].prefill_len;
}

void sd__prune_cap_begin_live(void *ud, const int32_t *prefill_len, int n)
{
    sd__cap *c = ud;
    for (int k = 0; k < n && k < SD__CAP_MAX_SEQS; k++)
        c->prefill[k] = prefill_len[k];
}

/* The next run [*t0, *t1) of rows at positions >= their sequence's prefill_len, from *t0 on;
 * 0 when there is none. */
static int next_run(const sd__cap *c, int T, const int32_t *pos, const int32_t *seq, int *t0, int *t1)
{
    int t = *t0;
    while (t < T && pos[t] < c->prefill[seq[t]])
        t++;
    if (t >= T)
        return 0;
    int e = t + 1;
    while (e < T && pos[e] >= c->prefill[seq[e]])
        e++;
    *t0 = t;
    *t1 = e;
    return 1;
}

/* The accumulator the hook feeds for (layer, site), or NULL. */
static sd_hess *cap_target(const sd__cap *c, int32_t layer, sd_capture_site site)
{
    return layer < c->lo || layer > c->hi ? NULL : c->j->hess[layer][site];
}

/* The CPU hook: fp32 rows at positions >= their sequence's prefill_len, in contiguous runs. */
static int cap_hook(void *ud, int32_t layer, sd_capture_site site, const float *x, int64_t cols, int T,
                    const int32_t *pos, const int32_t *seq)
{
    sd__cap *c = ud;
    sd__job *j = c->j;
    if (sd_cancel_requested(j->cancel))
        return SD_ECANCEL;
    sd_hess *h = cap_target(c, layer, site);
    int rc = 0;
    for (int t0 = 0, t1 = 0; h && rc == 0 && next_run(c, T, pos, seq, &t0, &t1); t0 = t1)
        rc = sd_hess_add(h, j->pool, x + (int64_t)t0 * cols, cols, t1 - t0, j->d);
    return rc;
}

/* The CUDA hook: the same rows, bf16 in device memory, into the GPU accumulators. */
static int cap_hook_cuda(void *ud, int32_t layer, sd_capture_site site, const void *x, int64_t cols, int T,
                         const int32_t *pos, const int32_t *seq)
{
    sd__cap *c = ud;
    sd__job *j = c->j;
    if (sd_cancel_requested(j->cancel))
        return SD_ECANCEL;
    sd_hess *h = cap_target(c, layer, site);
    const uint16_t *rows = x; /* bf16 [T, cols] */
    int rc = 0;
    for (int t0 = 0, t1 = 0; h && rc == 0 && next_run(c, T, pos, seq, &t0, &t1); t0 = t1)
        rc = sd_hess_add_dev(h, rows + (int64_t)t0 * cols, cols, t1 - t0, j->d);
    return rc;
}

int sd__prune_cap_install(sd__job *j, sd__cap *c, int32_t stop)
{
    if (j->cuda_cap)
        return sd_backend_cuda_set_capture(j->backend, c ? cap_hook_cuda : NULL, c, stop, j->d);
    sd_backend_cpu_set_capture(j->backend, c ? cap_hook : NULL, c, stop);
    return 0;
}

static void cap_tick(void *ud, int64_t done, int64_t total)
{
    sd__cap *c = ud;
    sd__prune_report(c->j, SD_PH_CAPTURE, c->hi, done, total, total ? (double)done / (double)total : 1, NULL);
}

int sd__prune_capture(sd__job *j, int32_t lo, int32_t hi)
{
    sd__cap c = {.j = j, .lo = lo, .hi = hi};
    sd_calib_replay_cb cb = {.begin = cap_begin, .ud = &c};
    int rc = sd__prune_cap_install(j, &c, hi);
    if (rc == 0)
        rc = sd_calib_replay(j->backend, &j->calib, &cb, 0, cap_tick, &c, j->cancel, j->d);
    sd__prune_cap_install(j, NULL, -1);
    if (rc == SD_ECANCEL)
        sd_diag_set(j->d, SD_ECANCEL, "prune: cancelled during capture");
    return rc;
}

/* ---- solving ------------------------------------------------------------------------------ */

static const sd_capture_site lin_site[SD_LIN_N] = {SD_CAP_QKV,    SD_CAP_QKV,    SD_CAP_QKV, SD_CAP_O,
                                                   SD_CAP_GATEUP, SD_CAP_GATEUP, SD_CAP_DOWN};

static const sd_linear *layer_linear(const sd_layer_weights *lw, int which)
{
    const sd_linear *ls[SD_LIN_N] = {&lw->q, &lw->k, &lw->v, &lw->o, &lw->gate, &lw->up, &lw->down};
    return ls[which];
}

#define PACK_BLOCK 16 /* rows per piece of the parallel loops below */

/* Loads and packs a linear by blocks of rows over the job's pool: rows are independent, so the
 * result does not depend on the thread count. */
typedef struct rows_ctx {
    const void *src; /* conversion: the checkpoint's weight [rows, cols] of dtype dt */
    sd_dtype dt;
    float *W; /* fp32 [rows, cols] */
    int64_t cols;
    uint32_t *keep;   /* [rows, cols/32]; pack: also the mask (sd_nm_pack may alias them) */
    uint16_t *values; /* pack: bf16 [rows, cols/2] */
    uint16_t *dense;  /* pack: bf16 [threads, PACK_BLOCK, cols] */
    int n, m;
    int bad; /* validate: some block's mask is broken */
} rows_ctx;

static void to_f32_rows(void *ctx, int64_t begin, int64_t end, int tid)
{
    const rows_ctx *c = ctx;
    size_t es = sd_dtype_size(c->dt);
    sd_dtype_to_f32(c->dt, (const char *)c->src + (size_t)(begin * c->cols) * es, c->W + begin * c->cols,
                    (size_t)((end - begin) * c->cols));
}

static void validate_rows(void *ctx, int64_t begin, int64_t end, int tid)
{
    rows_ctx *c = ctx;
    int64_t words = c->cols / 32;
    if (sd_nm_validate(c->keep + begin * words, end - begin, c->cols, c->n, c->m, NULL) != 0)
        __atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);
}

/* W rounded to bf16 (W keeps the rounded values: what the checkpoint will serve), then packed. */
static void pack_rows(void *ctx, int64_t begin, int64_t end, int tid)
{
    const rows_ctx *c = ctx;
    int64_t cols = c->cols, words = cols / 32;
    uint16_t *dense = c->dense + (int64_t)tid * PACK_BLOCK * cols;
    for (int64_t r = begin; r < end; r += PACK_BLOCK) {
        int64_t nr = end - r < PACK_BLOCK ? end - r : PACK_BLOCK;
        float *W = c->W + r * cols;
        for (int64_t i = 0; i < nr * cols; i++) {
            dense[i] = sd_f32_to_bf16(W[i]);
            W[i] = sd_bf16_to_f32(dense[i]);
        }
        /* counts were validated: this cannot fail */
        sd_nm_pack(dense, c->keep + r * words, nr, cols, c->values + r * (cols / 2), c->keep + r * words,
                   NULL);
    }
}

/* The linear's weight as fp32 W [rows, cols]; its pages of the mapping are dropped after. */
static int load_linear(sd__job *j, const sd_linear *l, float *W)
{
    size_t es = sd_dtype_size(l->dtype);
    if (l->kind != SD_LINEAR_DENSE ||
        (l->dtype != SD_DT_BF16 && l->dtype != SD_DT_F16 && l->dtype != SD_DT_F32 && l->dtype != SD_DT_F64))
        return sd_diag_set(j->d, SD_ENOTSUP, "prune: %s is not a dense float weight", l->name);
    rows_ctx c = {.src = l->w, .dt = l->dtype, .W = W, .cols = l->cols};
    sd_cpu_pool_run(j->pool, l->rows, PACK_BLOCK, to_f32_rows, &c);
    sd__prune_drop_pages(l->w, (size_t)(l->rows * l->cols) * es);
    return 0;
}

/* Rounds pruned fp32 weights to bf16, packs them under keep and writes them into the output
 * checkpoint. W is left holding the bf16-rounded values (what the checkpoint will serve). */
static int pack_linear(sd__job *j, const sd_linear *l, float *W, uint32_t *keep)
{
    int64_t rows = l->rows, cols = l->cols;
    int rc = sd_nm_validate(keep, 0, cols, j->nm_n, j->nm_m, j->d); /* shape and pattern */
    rows_ctx c = {.W = W, .cols = cols, .keep = keep, .n = j->nm_n, .m = j->nm_m};
    if (rc == 0)
        sd_cpu_pool_run(j->pool, rows, PACK_BLOCK, validate_rows, &c);
    if (rc == 0 && c.bad) /* again on one thread, for the message naming the row */
        rc = sd_nm_validate(keep, rows, cols, j->nm_n, j->nm_m, j->d);
    if (rc != 0)
        return sd_diag_wrap(j->d, rc, "prune: %s: solver produced a bad mask", l->name);
    c.dense = malloc((size_t)sd_cpu_pool_threads(j->pool) * PACK_BLOCK * (size_t)cols * sizeof *c.dense);
    c.values = malloc((size_t)(rows * cols / 2) * sizeof *c.values);
    if (!c.dense || !c.values)
        rc = sd_diag_set(j->d, SD_ENOMEM, "prune: out of memory packing %s", l->name);
    if (rc == 0) {
        sd_cpu_pool_run(j->pool, rows, PACK_BLOCK, pack_rows, &c);
        rc = sd_ckptw_fill_bitmask(j->w, l->name, c.values, keep, j->d);
    }
    free(c.dense);
    free(c.values);
    return rc;
}

/* Per site: the fp64 Hessian (or diagonal), and for SparseGPT the factor U and dead columns. */
typedef struct site_state {
    double *H;     /* [cols, cols] or [cols] (Wanda) */
    double *U;     /* [cols, cols] SparseGPT */
    uint8_t *dead; /* [cols] */
    int ready;
} site_state;

static int site_prepare(sd__job *j, int32_t layer, sd_capture_site site, const sd_sgpt_opts *so,
                        site_state *ss)
{
    if (ss->ready || j->spec->solver == SD_SOLVER_MAGNITUDE)
        return 0;
    sd_hess *h = j->hess[layer][site];
    int64_t cols = sd_hess_cols(h);
    int rc = sd_hess_finish(h, j->pool, &ss->H, j->d);
    if (rc != 0)
        return rc;
    if (j->spec->solver == SD_SOLVER_SPARSEGPT && j->gpu) {
        /* the factor stays on the GPU for this site's linears (they come one after another) */
        ss->dead = malloc((size_t)cols);
        if (!ss->dead)
            return sd_diag_set(j->d, SD_ENOMEM, "prune: out of memory");
        sd_sgpt_stats st = {0};
        if ((rc = sd_prune_gpu_hinv(j->gpu, ss->H, cols, so, NULL, ss->dead, &st, j->d)) != 0)
            return sd_diag_wrap(j->d, rc, "layer %d input %d", layer, (int)site);
        j->gpu_site = layer * SD_CAP_N + (int)site;
    } else if (j->spec->solver == SD_SOLVER_SPARSEGPT) {
        ss->U = malloc((size_t)(cols * cols) * sizeof *ss->U);
        ss->dead = malloc((size_t)cols);
        if (!ss->U || !ss->dead)
            return sd_diag_set(j->d, SD_ENOMEM, "prune: out of memory for a %lld-column factor",
                               (long long)cols);
        sd_sgpt_stats st = {0};
        if ((rc = sd_sgpt_hinv(j->pool, ss->H, cols, so, ss->U, ss->dead, &st, j->d)) != 0)
            return sd_diag_wrap(j->d, rc, "layer %d input %d", layer, (int)site);
    }
    ss->ready = 1;
    return 0;
}

static int solve_linear(sd__job *j, int32_t layer, int which, const sd_sgpt_opts *so, site_state *ss)
{
    const sd_linear *l = layer_linear(&sd_model_w(j->model)->layers[layer], which);
    int64_t rows = l->rows, cols = l->cols;
    float *W = malloc((size_t)(rows * cols) * sizeof *W);
    uint32_t *keep = malloc((size_t)(rows * (cols / 32)) * sizeof *keep);
    int rc = 0;
    double loss = 0;
    if (!W || !keep) {
        rc = sd_diag_set(j->d, SD_ENOMEM, "prune: out of memory for %s", l->name);
        goto out;
    }
    if ((rc = load_linear(j, l, W)) != 0 || (rc = site_prepare(j, layer, lin_site[which], so, ss)) != 0)
        goto out;
    if (j->spec->solver == SD_SOLVER_SPARSEGPT && j->gpu) {
        sd_sgpt_stats st = {0};
        if (j->gpu_site != layer * SD_CAP_N + (int)lin_site[which])
            rc = sd_diag_set(j->d, SD_EINVAL, "prune: the GPU holds another input's factor");
        else
            rc = sd_prune_gpu_sweep(j->gpu, W, rows, cols, so, keep, &st, j->d);
        loss = st.loss;
    } else if (j->spec->solver == SD_SOLVER_SPARSEGPT) {
        sd_sgpt_stats st = {0};
        rc = sd_sgpt_sweep(j->pool, W, rows, cols, ss->U, ss->dead, so, keep, &st, j->d);
        loss = st.loss;
    } else {
        rc = sd_wanda_prune_pool(j->pool, W, rows, cols, j->spec->solver == SD_SOLVER_WANDA ? ss->H : NULL,
                                 j->nm_n, j->nm_m, keep, j->d);
    }
    if (rc != 0) {
        sd_diag_wrap(j->d, rc, "prune: %s", l->name);
        goto out;
    }
    if ((rc = pack_linear(j, l, W, keep)) != 0)
        goto out;
    if (j->spec->mode == SD_PRUNE_SEQUENTIAL && j->backend) /* magnitude runs no forward: none */
        rc = j->cuda_cap ? sd_backend_cuda_set_linear(j->backend, layer, which, W, j->d)
                         : sd_backend_cpu_set_linear(j->backend, layer, which, W, j->d);
    j->total_loss += loss;
    j->linears++;
    char detail[256];
    snprintf(detail, sizeof detail, "%s pruned (%s, error %.4g)", l->name, j->pattern, loss);
    sd__prune_report(j, SD_PH_SOLVE, layer, 0, 0, (double)(which + 1) / SD_LIN_N, detail);
out:
    free(W);
    free(keep);
    return rc;
}

int sd__prune_layer(sd__job *j, int32_t layer)
{
    sd_sgpt_opts so;
    sd_sgpt_opts_default(&so);
    so.n = j->nm_n;
    so.m = j->nm_m;
    so.damping = j->spec->damping;
    so.block_size = j->spec->block_size;
    site_state ss[SD_CAP_N] = {{0}};
    int rc = 0;
    for (int which = 0; which < SD_LIN_N && rc == 0; which++) {
        if (!(j->spec->modules & (1u << which)))
            continue;
        if (sd_cancel_requested(j->cancel))
            rc = sd_diag_set(j->d, SD_ECANCEL, "prune: cancelled at layer %d", layer);
        else
            rc = solve_linear(j, layer, which, &so, &ss[lin_site[which]]);
    }
    for (int s = 0; s < SD_CAP_N; s++) {
        free(ss[s].H);
        free(ss[s].U);
        free(ss[s].dead);
        sd_hess_free(j->hess[layer][s]);
        j->hess[layer][s] = NULL;
    }
    return rc;
}
