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

/* Rounds pruned fp32 weights to bf16 and packs them under keep into j->out. W is left holding
 * the bf16-rounded values (what the checkpoint will serve). */
static int pack_linear(sd__job *j, const sd_linear *l, float *W, uint32_t *keep, sd__pruned *out)
{
    int64_t rows = l->rows, cols = l->cols;
    int rc = sd_nm_validate(keep, rows, cols, j->nm_n, j->nm_m, j->d);
    if (rc != 0)
        return sd_diag_wrap(j->d, rc, "prune: %s: solver produced a bad mask", l->name);
    uint16_t *dense = malloc((size_t)(rows * cols) * sizeof *dense);
    out->values = malloc((size_t)(rows * cols / 2) * sizeof *out->values);
    if (!dense || !out->values) {
        free(dense);
        return sd_diag_set(j->d, SD_ENOMEM, "prune: out of memory packing %s", l->name);
    }
    for (int64_t i = 0; i < rows * cols; i++) {
        dense[i] = sd_f32_to_bf16(W[i]);
        W[i] = sd_bf16_to_f32(dense[i]);
    }
    rc = sd_nm_pack(dense, keep, rows, cols, out->values, keep, j->d);
    free(dense);
    if (rc != 0)
        return rc;
    out->mask = keep;
    return 0;
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
    if (l->kind != SD_LINEAR_DENSE || sd_dtype_to_f32(l->dtype, l->w, W, (size_t)(rows * cols)) != 0) {
        rc = sd_diag_set(j->d, SD_ENOTSUP, "prune: %s is not a dense float weight", l->name);
        goto out;
    }
    if ((rc = site_prepare(j, layer, lin_site[which], so, ss)) != 0)
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
        rc = sd_wanda_prune(W, rows, cols, j->spec->solver == SD_SOLVER_WANDA ? ss->H : NULL, j->nm_n,
                            j->nm_m, keep, j->d);
    }
    if (rc != 0) {
        sd_diag_wrap(j->d, rc, "prune: %s", l->name);
        goto out;
    }
    if ((rc = pack_linear(j, l, W, keep, &j->out[layer][which])) != 0)
        goto out;
    keep = NULL; /* owned by j->out now */
    if (j->spec->mode == SD_PRUNE_SEQUENTIAL)
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
