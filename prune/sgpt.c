/* sgpt: SparseGPT for one linear — fp64 reverse Cholesky, triangular inverse, and the
 * row-parallel prune-and-update sweep (N:M and per-row unstructured 50%). */
#include "prune/sgpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sd_sgpt_opts_default(sd_sgpt_opts *o)
{
    *o = (sd_sgpt_opts){.n = 2, .m = 4, .damping = 0.01, .block_size = 128, .max_retries = 6};
}

/* Four accumulators, so the loop is not one long dependency chain. */
static double dot(const double *a, const double *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* ---- reverse Cholesky A = R R^T (R upper) ----------------------------------------------- */

typedef struct chol_job {
    double *R; /* [n, n]: A on entry in the upper triangle, R on exit */
    int64_t n, j;
} chol_job;

/* rows [i0, i1) of column j, all above the diagonal */
static void task_chol_col(void *ctx, int64_t i0, int64_t i1, int tid)
{
    const chol_job *c = ctx;
    int64_t n = c->n, j = c->j;
    const double *rj = c->R + j * n;
    for (int64_t i = i0; i < i1; i++) {
        double *ri = c->R + i * n;
        ri[j] = (ri[j] - dot(ri + j + 1, rj + j + 1, n - j - 1)) / rj[j];
    }
}

/* Factorises the upper triangle of R in place, from the last column to the first; returns -1 at
 * a non-positive pivot (not positive definite at this damping). */
static int chol_reverse(sd_cpu_pool *pool, double *R, int64_t n)
{
    int nt = sd_cpu_pool_threads(pool);
    for (int64_t j = n - 1; j >= 0; j--) {
        double *rj = R + j * n;
        double p = rj[j] - dot(rj + j + 1, rj + j + 1, n - j - 1);
        if (!(p > 0) || !isfinite(p))
            return -1;
        rj[j] = sqrt(p);
        chol_job c = {R, n, j};
        int64_t grain = j / (2 * nt) > 32 ? j / (2 * nt) : 32;
        sd_cpu_pool_run(pool, j, grain, task_chol_col, &c);
    }
    return 0;
}

typedef struct inv_job {
    const double *R; /* [n, n] upper */
    double *U;       /* [n, n] upper, R^{-1} */
    int64_t n;
} inv_job;

/* columns [c0, c1) of U = R^{-1}: row i = (e_i - sum_{k>i} R_ik U_k) / R_ii, last row first */
static void task_inv_cols(void *ctx, int64_t c0, int64_t c1, int tid)
{
    const inv_job *v = ctx;
    int64_t n = v->n;
    for (int64_t i = n - 1; i >= 0; i--) {
        const double *ri = v->R + i * n;
        double *ui = v->U + i * n;
        for (int64_t j = c0; j < c1; j++)
            ui[j] = 0;
        if (i >= c0 && i < c1)
            ui[i] = 1;
        for (int64_t k = i + 1; k < c1; k++) {
            const double *uk = v->U + k * n;
            double r = ri[k];
            for (int64_t j = k > c0 ? k : c0; j < c1; j++)
                ui[j] -= r * uk[j];
        }
        for (int64_t j = c0; j < c1; j++)
            ui[j] /= ri[i];
    }
}

/* ---- Hessian clean-up and the damped inverse factor ------------------------------------- */

/* Symmetrises H, zeroes NaN/Inf, marks dead columns (H_jj == 0 -> 1). Returns mean(diag H). */
static double hess_clean(double *H, int64_t n, uint8_t *dead, sd_sgpt_stats *st)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i; j < n; j++) {
            double a = H[i * n + j], b = H[j * n + i];
            if (!isfinite(a)) {
                a = 0;
                st->sanitized++;
            }
            if (!isfinite(b)) {
                b = 0;
                st->sanitized += i != j;
            }
            H[i * n + j] = H[j * n + i] = 0.5 * (a + b);
        }
    double sum = 0;
    for (int64_t j = 0; j < n; j++) {
        int is_dead = H[j * n + j] == 0;
        if (is_dead) {
            H[j * n + j] = 1;
            st->dead_cols++;
        }
        if (dead)
            dead[j] = (uint8_t)is_dead;
        sum += H[j * n + j];
    }
    return sum / (double)n;
}

int sd_sgpt_hinv(sd_cpu_pool *pool, double *H, int64_t n, const sd_sgpt_opts *o, double *U, uint8_t *dead,
                 sd_sgpt_stats *st, sd_diag *d)
{
    sd_sgpt_stats local = {0};
    if (!st)
        st = &local;
    double mean = hess_clean(H, n, dead, st);
    double *R = malloc((size_t)(n * n) * sizeof *R);
    if (!R)
        return sd_diag_set(d, SD_ENOMEM, "sparsegpt: out of memory for a %lldx%lld factor", (long long)n,
                           (long long)n);
    double lambda = o->damping * mean;
    for (int attempt = 0; attempt <= o->max_retries; attempt++, lambda *= 10) {
        if (attempt > 0 && lambda == 0)
            lambda = 1e-8 * (mean > 0 ? mean : 1);
        memcpy(R, H, (size_t)(n * n) * sizeof *R);
        for (int64_t j = 0; j < n; j++)
            R[j * n + j] += lambda;
        if (chol_reverse(pool, R, n) != 0)
            continue;
        inv_job v = {R, U, n};
        int nt = sd_cpu_pool_threads(pool);
        int64_t grain = n / (2 * nt) > 32 ? n / (2 * nt) : 32;
        sd_cpu_pool_run(pool, n, grain, task_inv_cols, &v);
        st->retries = attempt;
        st->damp_used = lambda;
        free(R);
        return 0;
    }
    free(R);
    return sd_diag_set(d, SD_ERANGE, "sparsegpt: Hessian [%lld] not positive definite even with damping %g",
                       (long long)n, lambda / 10);
}

/* ---- the sweep ---------------------------------------------------------------------------- */

typedef struct sweep_job {
    float *W;
    int64_t rows, cols;
    const double *U; /* [cols, cols] */
    const sd_sgpt_opts *o;
    uint32_t *keep;
    double *loss; /* [rows] */
} sweep_job;

typedef struct scored {
    double s;
    int64_t j;
} scored;

static int cmp_scored(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->s != y->s)
        return x->s < y->s ? -1 : 1;
    return x->j < y->j ? -1 : (x->j > y->j);
}

/* Marks the k lowest-scoring columns of [j0, j0+cnt) of row w as pruned (ties: lower column). */
static void prune_lowest(const double *w, const double *U, int64_t cols, int64_t j0, int64_t cnt, int64_t k,
                         uint8_t *pruned, scored *tmp)
{
    for (int64_t t = 0; t < cnt; t++) {
        int64_t j = j0 + t;
        double u = U[j * cols + j];
        tmp[t] = (scored){w[j] * w[j] / (u * u), j};
    }
    qsort(tmp, (size_t)cnt, sizeof *tmp, cmp_scored);
    for (int64_t t = 0; t < k; t++)
        pruned[tmp[t].j] = 1;
}

/* One row through the whole algorithm (rows are independent given U). */
static void sweep_row(const sweep_job *s, int64_t r, double *w, uint8_t *pruned, double *err, scored *tmp)
{
    int64_t cols = s->cols, bs = s->o->block_size;
    int n = s->o->n, m = s->o->m;
    const double *U = s->U;
    float *wr = s->W + r * cols;
    double loss = 0;
    if (cols <= 0)
        return;
    for (int64_t j = 0; j < cols; j++)
        w[j] = wr[j];
    memset(pruned, 0, (size_t)cols);
    for (int64_t b0 = 0; b0 < cols; b0 += bs) {
        int64_t b1 = b0 + bs < cols ? b0 + bs : cols;
        if (m == 0)
            prune_lowest(w, U, cols, b0, b1 - b0, (b1 - b0) / 2, pruned, tmp);
        for (int64_t i = b0; i < b1; i++) {
            if (m && (i - b0) % m == 0)
                prune_lowest(w, U, cols, i, m, m - n, pruned, tmp);
            const double *ui = U + i * cols;
            double q = pruned[i] ? 0 : w[i];
            double e = (w[i] - q) / ui[i];
            loss += e * e / 2;
            for (int64_t j = i + 1; j < b1; j++)
                w[j] -= e * ui[j];
            w[i] = q;
            err[i - b0] = e;
        }
        /* lazy update of the columns after the block: w[b1:] -= err . U[b0:b1, b1:] */
        for (int64_t i = b0; i < b1; i++) {
            const double *ui = U + i * cols;
            double e = err[i - b0];
            if (e != 0)
                for (int64_t j = b1; j < cols; j++)
                    w[j] -= e * ui[j];
        }
    }
    uint32_t *kr = s->keep + r * (cols / 32);
    memset(kr, 0, (size_t)(cols / 32) * sizeof *kr);
    for (int64_t j = 0; j < cols; j++) {
        wr[j] = (float)w[j];
        if (!pruned[j])
            kr[j / 32] |= 1u << (j % 32);
    }
    s->loss[r] = loss;
}

static void task_sweep(void *ctx, int64_t r0, int64_t r1, int tid)
{
    const sweep_job *s = ctx;
    int64_t cols = s->cols;
    double *w = malloc((size_t)cols * sizeof *w);
    double *err = malloc((size_t)s->o->block_size * sizeof *err);
    uint8_t *pruned = malloc((size_t)cols);
    scored *tmp = malloc((size_t)s->o->block_size * sizeof *tmp);
    if (!w || !err || !pruned || !tmp) {
        for (int64_t r = r0; r < r1; r++)
            s->loss[r] = NAN; /* reported by the caller as out of memory */
    } else {
        for (int64_t r = r0; r < r1; r++)
            sweep_row(s, r, w, pruned, err, tmp);
    }
    free(w);
    free(err);
    free(pruned);
    free(tmp);
}

int sd_sgpt_check(int64_t cols, const sd_sgpt_opts *o, sd_diag *d)
{
    if (cols <= 0 || cols % 32)
        return sd_diag_set(d, SD_EINVAL, "sparsegpt: %lld columns, not a positive multiple of 32",
                           (long long)cols);
    if (o->block_size <= 0 || o->block_size % 32)
        return sd_diag_set(d, SD_EINVAL, "sparsegpt: block size %d is not a positive multiple of 32",
                           o->block_size);
    if (!(o->damping >= 0) || o->max_retries < 0)
        return sd_diag_set(d, SD_EINVAL, "sparsegpt: damping %g / retries %d", o->damping, o->max_retries);
    if (!(o->n == 0 && o->m == 0) && !(o->m > 0 && o->m <= 32 && 32 % o->m == 0 && 2 * o->n == o->m))
        return sd_diag_set(d, SD_EINVAL, "sparsegpt: pattern %d:%d is not a 50%% N:M with M | 32", o->n,
                           o->m);
    return 0;
}

int sd_sgpt_sweep(sd_cpu_pool *pool, float *W, int64_t rows, int64_t cols, const double *U,
                  const uint8_t *dead, const sd_sgpt_opts *o, uint32_t *keep, sd_sgpt_stats *st, sd_diag *d)
{
    int rc = sd_sgpt_check(cols, o, d);
    if (rc != 0)
        return rc;
    double *loss = malloc((size_t)rows * sizeof *loss);
    if (!loss)
        return sd_diag_set(d, SD_ENOMEM, "sparsegpt: out of memory");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            if (dead && dead[j])
                W[r * cols + j] = 0;
    sweep_job s = {W, rows, cols, U, o, keep, loss};
    int nt = sd_cpu_pool_threads(pool);
    int64_t grain = rows / (4 * nt) > 1 ? rows / (4 * nt) : 1;
    sd_cpu_pool_run(pool, rows, grain, task_sweep, &s);
    double sum = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (isnan(loss[r])) {
            free(loss);
            return sd_diag_set(d, SD_ENOMEM, "sparsegpt: out of memory in the row sweep");
        }
        sum += loss[r];
    }
    if (st)
        st->loss = sum;
    free(loss);
    return 0;
}

int sd_sgpt_prune(sd_cpu_pool *pool, float *W, int64_t rows, int64_t cols, double *H, const sd_sgpt_opts *o,
                  uint32_t *keep, sd_sgpt_stats *st, sd_diag *d)
{
    sd_sgpt_stats local = {0};
    if (!st)
        st = &local;
    *st = (sd_sgpt_stats){0};
    int rc = sd_sgpt_check(cols, o, d);
    if (rc != 0)
        return rc;
    double *U = malloc((size_t)(cols * cols) * sizeof *U);
    uint8_t *dead = malloc((size_t)cols);
    if (!U || !dead)
        rc = sd_diag_set(d, SD_ENOMEM, "sparsegpt: out of memory for a [%lld, %lld] linear", (long long)rows,
                         (long long)cols);
    if (rc == 0)
        rc = sd_sgpt_hinv(pool, H, cols, o, U, dead, st, d);
    if (rc == 0)
        rc = sd_sgpt_sweep(pool, W, rows, cols, U, dead, o, keep, st, d);
    free(U);
    free(dead);
    return rc;
}
