/* Tests of the persistent chain of linears (kernels/nm_chain.h). Without a GPU: the refusals of
 * sd_chain_check and the tile sizes. With one (skips otherwise): a chain of dense and 2:4 links
 * of odd row counts, up to the widest columns each takes, against the fp64 CPU reference, launched
 * eagerly and again from a CUDA graph (the counters start over), with the rows shared evenly, in
 * 8-row groups or claimed, from row-major weights or packed ones (sd_chain_pack). Two links read as x the
 * bits of the fp32 output of the link they wait for: their data are small integers, so every sum is exact and
 * the bf16 halves of that output are known (value, then +0), and a link that read x before the other finished
 * would meet the NaNs the output was poisoned with. */
#include "tests/harness.h"

#ifdef SD_HAVE_CUDA
#include <math.h>

#include <cuda_runtime_api.h>

#include "kernels/nm_chain.h"
#include "kernels/nm_spmv_cpu.h"
#include "tests/kernels/nm_test_util.h"

static sd_chain_link fake_link(int dense, int64_t rows, int64_t cols)
{
    static uint64_t buf[64]; /* only the addresses matter to the check */
    sd_chain_link k = {0};
    k.dense = dense, k.rows = rows, k.cols = cols;
    k.values = (const uint16_t *)buf, k.mask = (const uint32_t *)buf, k.x = (const uint16_t *)buf;
    k.y = (float *)buf, k.wait = -1;
    return k;
}

static void test_chain_check(void)
{
    sd_diag d = {0};
    sd_chain_link k[2] = {fake_link(0, 64, 4096), fake_link(1, 64, 4096)};
    CHECK(sd_chain_check(k, 2, &d) == 0);
    CHECK(sd_chain_check(k, 0, &d) == SD_EINVAL);
    const struct {
        int dense;
        int64_t cols;
    } bad_cols[] = {{0, 96}, {0, 4160}, {0, SD_CHAIN_MAX_COLS_24 + 128}, {1, SD_CHAIN_MAX_COLS_DENSE + 128}};
    for (size_t i = 0; i < sizeof bad_cols / sizeof bad_cols[0]; i++) {
        k[1] = fake_link(bad_cols[i].dense, 8, bad_cols[i].cols);
        CHECK_MSG(sd_chain_check(k, 2, &d) == SD_EINVAL && strstr(d.msg, "link 1"), "cols %lld: %s",
                  (long long)bad_cols[i].cols, d.msg);
    }
    k[1] = fake_link(0, 0, 4096);
    CHECK(sd_chain_check(k, 2, &d) == SD_EINVAL);
    k[1] = fake_link(0, 8, 4096);
    k[1].mask = NULL;
    CHECK(sd_chain_check(k, 2, &d) == SD_EINVAL && strstr(d.msg, "NULL"));
    k[1] = fake_link(1, 8, 4096);
    k[1].mask = NULL; /* dense: no mask needed */
    CHECK(sd_chain_check(k, 2, &d) == 0);
    k[1].x = (const uint16_t *)((const char *)k[1].x + 8);
    CHECK(sd_chain_check(k, 2, &d) == SD_EINVAL && strstr(d.msg, "aligned"));
    k[1] = fake_link(0, 8, 4096);
    k[1].wait = 1;
    CHECK(sd_chain_check(k, 2, &d) == SD_EINVAL && strstr(d.msg, "waits"));
    k[1].wait = -2;
    CHECK(sd_chain_check(k, 2, &d) == SD_EINVAL);
    k[1].wait = 0;
    CHECK(sd_chain_check(k, 2, &d) == 0);
    k[1].values = NULL, k[1].mask = NULL; /* packed weights instead */
    CHECK(sd_chain_check(k, 2, &d) == SD_EINVAL);
    k[1].packed = k[0].values;
    CHECK(sd_chain_check(k, 2, &d) == 0);
    k[1].packed = (const char *)k[0].values + 4;
    CHECK(sd_chain_check(k, 2, &d) == SD_EINVAL && strstr(d.msg, "aligned"));
    /* packed bytes: the values and the mask words */
    sd_chain_link pk = fake_link(0, 13, 4096);
    CHECK(sd_chain_packed_bytes(&pk) == 13 * (4096 + 512));
    pk.dense = 1;
    CHECK(sd_chain_packed_bytes(&pk) == 13 * 8192);
    /* tiles: 8 rows of as many columns as fit 40 KB (2:4: 4480, dense: 2560), in even chunks */
    const struct {
        int dense;
        int64_t cols;
        int kc;
    } tiles[] = {{0, 4096, 4096}, {0, 14336, 3584}, {1, 4096, 2048},  {1, 14336, 2432},
                 {0, 128, 128},   {1, 18432, 2304}, {0, 14720, 3712}, {0, 4480, 4480}};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        sd_chain_link t = fake_link(tiles[i].dense, 8, tiles[i].cols);
        CHECK_MSG(sd_chain_tile_cols(&t) == tiles[i].kc, "%lld cols: %d a tile", (long long)tiles[i].cols,
                  sd_chain_tile_cols(&t));
    }
}

#define CU(call) ((call) == cudaSuccess)

typedef struct tlink {
    int dense, integer, accumulate, wait, x_from; /* x_from: the link whose y bits are x; -1: own x */
    int64_t rows, cols;
} tlink;

static const tlink LINKS[] = {
    {1, 1, 0, -1, -1, 8192, 128},  /* integer outputs for link 1's x */
    {1, 1, 0, 0, 0, 37, 16384},    /* x = link 0's y as bf16 pairs */
    {0, 1, 0, -1, -1, 7168, 128},  /* the same for 2:4 */
    {0, 1, 0, 2, 2, 1001, 14336},  /* x = link 2's y */
    {0, 0, 1, -1, -1, 4099, 4096}, /* y += W x */
    {1, 0, 0, 4, -1, 4097, 4096},  /* waits, own x */
    {0, 0, 1, 3, -1, 13, 256},     /* fewer tiles than blocks */
    {1, 0, 0, -1, -1, 3, 18432},   /* the widest dense row: one row a tile */
    {0, 0, 0, 6, -1, 2, 14720},    /* the widest 2:4 row */
    {1, 0, 1, 8, -1, 1030, 14336}, /* y += W x over 6 chunks a row: claimed a tile at a time */
};
#define N_LINKS ((int)(sizeof LINKS / sizeof LINKS[0]))

typedef struct hlink {
    uint16_t *w;    /* dense weights or 2:4 values */
    uint32_t *mask; /* 2:4 */
    uint16_t *x;    /* own x (bf16) */
    float *y0;      /* y before the launch (accumulating links) */
    double *ref;
    void *d_w, *d_mask, *d_x, *d_packed;
    float *d_y;
} hlink;

static uint16_t small_int_bf16(uint64_t *s)
{
    return sd_f32_to_bf16((float)((int)(nmt_rand(s) % 3) - 1)); /* -1, 0, 1 */
}

static int make_link(const tlink *t, hlink *h, uint64_t *s)
{
    const int64_t nw = t->dense ? t->rows * t->cols : t->rows * t->cols / 2;
    h->w = malloc((size_t)nw * 2), h->x = malloc((size_t)t->cols * 2), h->y0 = malloc((size_t)t->rows * 4);
    h->ref = malloc((size_t)t->rows * 8);
    if (!t->dense)
        h->mask = malloc((size_t)(t->rows * t->cols / 32) * 4);
    if (!h->w || !h->x || !h->y0 || !h->ref || (!t->dense && !h->mask))
        return SD_ENOMEM;
    for (int64_t i = 0; i < nw; i++)
        h->w[i] = t->integer ? small_int_bf16(s) : sd_f32_to_bf16(nmt_uniform(s));
    for (int64_t i = 0; i < t->cols; i++)
        h->x[i] = t->integer ? small_int_bf16(s) : sd_f32_to_bf16(nmt_uniform(s));
    nmt_fill_f32(h->y0, t->rows, s);
    if (!t->dense && nmt_random_mask(h->mask, t->rows, t->cols, 2, 4, s))
        return SD_ENOMEM;
    if (!CU(cudaMalloc(&h->d_w, (size_t)nw * 2)) || !CU(cudaMalloc(&h->d_x, (size_t)t->cols * 2)) ||
        !CU(cudaMalloc((void **)&h->d_y, (size_t)t->rows * 4)) ||
        (!t->dense && !CU(cudaMalloc(&h->d_mask, (size_t)(t->rows * t->cols / 32) * 4))))
        return SD_ECUDA;
    if (!CU(cudaMemcpy(h->d_w, h->w, (size_t)nw * 2, cudaMemcpyHostToDevice)) ||
        !CU(cudaMemcpy(h->d_x, h->x, (size_t)t->cols * 2, cudaMemcpyHostToDevice)) ||
        (!t->dense &&
         !CU(cudaMemcpy(h->d_mask, h->mask, (size_t)(t->rows * t->cols / 32) * 4, cudaMemcpyHostToDevice))))
        return SD_ECUDA;
    return 0;
}

/* Every link's fp64 reference, in order (x of a link fed by another from that one's reference:
 * exact integers, so the GPU's bits are the same). */
static int reference(hlink *h)
{
    for (int i = 0; i < N_LINKS; i++) {
        const tlink *t = &LINKS[i];
        float *xf = malloc((size_t)t->cols * 4);
        if (!xf)
            return SD_ENOMEM;
        for (int64_t c = 0; c < t->cols; c++) {
            if (t->x_from < 0)
                xf[c] = sd_bf16_to_f32(h[i].x[c]);
            else /* a small integer's float: low half +0, high half its bf16 (little-endian) */
                xf[c] = c % 2 ? (float)h[t->x_from].ref[c / 2] : 0.f;
        }
        if (t->dense)
            sd_gemv_bf16_cpu_f64(h[i].w, t->rows, t->cols, xf, t->cols, 1, h[i].ref, t->rows);
        else
            sd_nm_spmv_cpu_f64(h[i].w, h[i].mask, t->rows, t->cols, xf, t->cols, 1, h[i].ref, t->rows);
        for (int64_t r = 0; t->accumulate && r < t->rows; r++)
            h[i].ref[r] += h[i].y0[r];
        free(xf);
    }
    return 0;
}

/* Accumulating links' y back to y0, the others poisoned with NaN. */
static int reset_outputs(hlink *h)
{
    for (int i = 0; i < N_LINKS; i++) {
        const size_t n = (size_t)LINKS[i].rows * 4;
        if (LINKS[i].accumulate ? !CU(cudaMemcpy(h[i].d_y, h[i].y0, n, cudaMemcpyHostToDevice))
                                : !CU(cudaMemset(h[i].d_y, 0xff, n)))
            return SD_ECUDA;
    }
    return 0;
}

static void check_outputs(const hlink *h, const char *how)
{
    for (int i = 0; i < N_LINKS; i++) {
        const tlink *t = &LINKS[i];
        float *y = malloc((size_t)t->rows * 4);
        if (!y || !CU(cudaMemcpy(y, h[i].d_y, (size_t)t->rows * 4, cudaMemcpyDeviceToHost))) {
            free(y);
            CHECK_MSG(0, "%s: link %d: read back failed", how, i);
            return;
        }
        double num = 0, den = 0;
        int64_t exact = 0;
        for (int64_t r = 0; r < t->rows; r++) {
            double e = y[r] - h[i].ref[r];
            num += e * e, den += h[i].ref[r] * h[i].ref[r];
            exact += y[r] == (float)h[i].ref[r];
        }
        double rel = sqrt(num / (den > 0 ? den : 1));
        if (t->integer)
            CHECK_MSG(exact == t->rows, "%s: link %d: %lld of %lld rows exact", how, i, (long long)exact,
                      (long long)t->rows);
        else
            CHECK_MSG(rel < 1e-5, "%s: link %d (%s %lld x %lld): rel L2 %.3g", how, i,
                      t->dense ? "dense" : "2:4", (long long)t->rows, (long long)t->cols, rel);
        free(y);
    }
}

/* One chain over the links: launched eagerly, then twice from a graph (the counters start over on
 * every replay), its outputs checked after each. SD_ENOTSUP when the device cannot run it. */
static int run_chain(hlink *h, const sd_chain_link *links, int flags, const char *how, cudaStream_t st)
{
    sd_chain *c = NULL;
    sd_diag d = {0};
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    char what[64];
    int rc = sd_chain_init(&c, links, N_LINKS, flags, &d);
    if (rc == SD_ENOTSUP)
        return rc;
    CHECK_MSG(rc == 0, "%s: init: %s", how, d.msg);
    if (rc || reset_outputs(h))
        goto done;
    CHECK(sd_chain_blocks(c) > 0);
    CHECK(sd_chain_launch(c, st) == 0 && CU(cudaStreamSynchronize(st)));
    snprintf(what, sizeof what, "%s, eager", how);
    check_outputs(h, what);
    CHECK(CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal)));
    CHECK(sd_chain_launch(c, st) == 0);
    CHECK(CU(cudaStreamEndCapture(st, &g)) && CU(cudaGraphInstantiate(&ge, g, 0)));
    for (int rep = 0; rep < 2 && ge; rep++) {
        CHECK(reset_outputs(h) == 0);
        CHECK(CU(cudaGraphLaunch(ge, st)) && CU(cudaStreamSynchronize(st)));
        snprintf(what, sizeof what, "%s, graph %d", how, rep);
        check_outputs(h, what);
    }
done:
    if (ge)
        cudaGraphExecDestroy(ge);
    if (g)
        cudaGraphDestroy(g);
    sd_chain_free(c);
    return 0;
}

/* Every link's weights packed (sd_chain_pack) into its d_packed; the links then point there only. */
static int pack_links(hlink *h, sd_chain_link *links, cudaStream_t st)
{
    for (int i = 0; i < N_LINKS; i++) {
        if (!CU(cudaMalloc(&h[i].d_packed, (size_t)sd_chain_packed_bytes(&links[i]))) ||
            sd_chain_pack(&links[i], h[i].d_packed, st))
            return SD_ECUDA;
        links[i].packed = h[i].d_packed, links[i].values = NULL, links[i].mask = NULL;
    }
    return CU(cudaStreamSynchronize(st)) ? 0 : SD_ECUDA;
}

static void test_chain_matches(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1)
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    hlink h[N_LINKS];
    sd_chain_link links[N_LINKS];
    memset(h, 0, sizeof h);
    memset(links, 0, sizeof links);
    uint64_t s = 42;
    cudaStream_t st = NULL;
    int notsup = 0;
    for (int i = 0; i < N_LINKS; i++)
        if (make_link(&LINKS[i], &h[i], &s)) {
            CHECK_MSG(0, "link %d: setup failed", i);
            goto done;
        }
    for (int i = 0; i < N_LINKS; i++) {
        const tlink *t = &LINKS[i];
        sd_chain_link *k = &links[i];
        k->dense = t->dense, k->rows = t->rows, k->cols = t->cols, k->accumulate = t->accumulate;
        k->wait = t->wait, k->values = h[i].d_w, k->mask = h[i].d_mask, k->y = h[i].d_y;
        k->x = t->x_from < 0 ? (const uint16_t *)h[i].d_x : (const uint16_t *)h[t->x_from].d_y;
    }
    if (reference(h) || !CU(cudaStreamCreate(&st))) {
        CHECK_MSG(0, "reference or stream failed");
        goto done;
    }
    notsup = run_chain(h, links, 0, "even rows", st) == SD_ENOTSUP;
    if (notsup)
        goto done;
    run_chain(h, links, SD_CHAIN_GROUP_SPLIT, "8-row groups", st);
    run_chain(h, links, SD_CHAIN_CLAIM, "claimed", st);
    CHECK(pack_links(h, links, st) == 0);
    run_chain(h, links, 0, "packed", st);
    run_chain(h, links, SD_CHAIN_GROUP_SPLIT, "packed, 8-row groups", st);
    run_chain(h, links, SD_CHAIN_CLAIM, "packed, claimed", st);
done:
    if (st)
        cudaStreamDestroy(st);
    for (int i = 0; i < N_LINKS; i++) {
        free(h[i].w), free(h[i].mask), free(h[i].x), free(h[i].y0), free(h[i].ref);
        cudaFree(h[i].d_w), cudaFree(h[i].d_mask), cudaFree(h[i].d_x), cudaFree(h[i].d_y),
            cudaFree(h[i].d_packed);
    }
    if (notsup)
        SKIP("the device runs no cooperative launch of the chain's shared memory");
}
#else
static void test_chain_unavailable(void)
{
    SKIP("built without CUDA (SD_HAVE_CUDA unset)");
}
#endif

int main(void)
{
#ifdef SD_HAVE_CUDA
    RUN(test_chain_check);
    RUN(test_chain_matches);
#else
    RUN(test_chain_unavailable);
#endif
    return sd_test_done();
}
