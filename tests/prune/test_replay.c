/* test_replay: the replay identity (decode-position inputs of a finished sequence replayed in
 * one causal forward == the inputs captured live during KV-cache decoding, batched or not), the
 * Hessian accumulator against a naive fp64 sum, and a cancelled prune leaving no output. */
#include "tests/harness.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/cpu_capture.h"
#include "engine/model.h"
#include "prune/calib.h"
#include "prune/cancel.h"
#include "prune/hess.h"
#include "prune/prune.h"

#define MODEL "models/tiny"
#define MAX_ROWS 4096

/* Captured rows keyed by (prefill_len, pos, layer, site); prompts have distinct lengths, so
 * prefill_len names the sequence whatever slot or batch it ran in. */
typedef struct row {
    int32_t pf, pos, layer, site, cols;
    float *x;
} row;

typedef struct rows {
    row r[MAX_ROWS];
    int n;
    int32_t prefill[1024];   /* of the forward in flight */
    const sd_calib_set *set; /* replay: maps ids -> prefill */
    int overflow;
} rows;

static void begin_live(void *ud, const int32_t *pf, int n)
{
    rows *R = ud;
    memcpy(R->prefill, pf, (size_t)n * sizeof *pf);
}

static void begin_replay(void *ud, const int32_t *ids, int n)
{
    rows *R = ud;
    for (int k = 0; k < n; k++)
        R->prefill[k] = R->set->seqs[ids[k]].prefill_len;
}

static int hook(void *ud, int32_t layer, sd_capture_site site, const float *x, int64_t cols, int T,
                const int32_t *pos, const int32_t *seq)
{
    rows *R = ud;
    for (int t = 0; t < T; t++) {
        if (pos[t] < R->prefill[seq[t]])
            continue;
        if (R->n == MAX_ROWS) {
            R->overflow = 1;
            return 0;
        }
        row *r = &R->r[R->n++];
        *r = (row){
            R->prefill[seq[t]], pos[t], layer, site, (int32_t)cols, malloc((size_t)cols * sizeof(float))};
        memcpy(r->x, x + t * cols, (size_t)cols * sizeof(float));
    }
    return 0;
}

static void rows_free(rows *R)
{
    for (int i = 0; i < R->n; i++)
        free(R->r[i].x);
    free(R);
}

static const row *find(const rows *R, const row *k)
{
    for (int i = 0; i < R->n; i++) {
        const row *r = &R->r[i];
        if (r->pf == k->pf && r->pos == k->pos && r->layer == k->layer && r->site == k->site)
            return r;
    }
    return NULL;
}

/* Generates from three prompts with `parallel` slots while capturing live, replays the result,
 * and compares every live decode row with its replayed twin. */
static void check_identity(int parallel)
{
    sd_model *m = NULL;
    sd_backend *b = NULL;
    sd_diag d = {0};
    REQUIRE(sd_model_open(&m, MODEL, &d) == 0);
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = 2;
    REQUIRE(sd_backend_cpu_init(&b, m, &bo, &d) == 0);
    int32_t p0[] = {0, 400, 17, 90, 33}, p1[] = {0, 1000, 12, 77, 5, 600, 9},
            p2[] = {0, 7, 7, 7, 300, 2000, 45, 81, 3};
    sd_calib_set prompts = {0}, gen = {0};
    REQUIRE(sd_calib_set_push(&prompts, p0, 5, 5, &d) == 0);
    REQUIRE(sd_calib_set_push(&prompts, p1, 7, 7, &d) == 0);
    REQUIRE(sd_calib_set_push(&prompts, p2, 9, 9, &d) == 0);
    rows *live = calloc(1, sizeof *live), *rep = calloc(1, sizeof *rep);
    sd_calib_gen_opts go;
    sd_calib_gen_opts_default(&go);
    go.max_new_tokens = 20;
    go.parallel = parallel;
    go.stop_at_eos = 0;
    go.sampling.temperature = 0.8f; /* sampled tokens: not only the greedy path */
    go.sampling.seed = 5;
    go.begin = begin_live;
    go.begin_ud = live;
    sd_backend_cpu_set_capture(b, hook, live, -1);
    int rc = sd_calib_generate(b, m, &prompts, &go, NULL, NULL, NULL, &gen, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(gen.n == 3);
    rep->set = &gen;
    sd_calib_replay_cb cb = {.begin = begin_replay, .ud = rep};
    sd_backend_cpu_set_capture(b, hook, rep, -1);
    CHECK(sd_calib_replay(b, &gen, &cb, 0, NULL, NULL, NULL, &d) == 0);
    sd_backend_cpu_set_capture(b, NULL, NULL, -1);
    CHECK(!live->overflow && !rep->overflow);
    /* live: 19 fed decode tokens per sequence (the last sampled one is never fed), 4 layers x 4 sites */
    CHECK_MSG(live->n == 3 * 19 * 4 * 4, "live rows %d", live->n);
    CHECK_MSG(rep->n == 3 * 20 * 4 * 4, "replay rows %d", rep->n);
    double worst = 0;
    int missing = 0;
    for (int i = 0; i < live->n; i++) {
        const row *a = &live->r[i], *r = find(rep, a);
        if (!r) {
            missing++;
            continue;
        }
        double num = 0, den = 0;
        for (int32_t c = 0; c < a->cols; c++) {
            double e = (double)a->x[c] - r->x[c];
            num = fabs(e) > num ? fabs(e) : num;
            den = fabs(a->x[c]) > den ? fabs(a->x[c]) : den;
        }
        worst = num / den > worst ? num / den : worst;
    }
    CHECK(missing == 0);
    fprintf(stderr, "  parallel %d: %d live rows, max relative difference to replay %.3g\n", parallel,
            live->n, worst);
    CHECK_MSG(worst <= 1e-5, "replay differs from live decode by %g", worst);
    rows_free(live);
    rows_free(rep);
    sd_calib_set_clear(&prompts);
    sd_calib_set_clear(&gen);
    sd_backend_free(b);
    sd_model_free(m);
}

static void test_replay_identity_single(void)
{
    check_identity(1);
}

static void test_replay_identity_batched(void)
{
    check_identity(3);
}

static void test_hess_matches_naive(void)
{
    sd_cpu_pool *pool = NULL;
    sd_hess *h = NULL, *hd = NULL;
    REQUIRE(sd_cpu_pool_init(&pool, 2, NULL) == 0);
    int64_t C = 160, N = 613; /* not a multiple of the staging chunk or the triangle block */
    float *x = malloc((size_t)(N * C) * sizeof *x);
    uint64_t s = 42;
    for (int64_t i = 0; i < N * C; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * (1 + (float)(i % C) / 16);
    }
    REQUIRE(sd_hess_init(&h, C, 0, NULL) == 0);
    REQUIRE(sd_hess_init(&hd, C, 1, NULL) == 0);
    CHECK(sd_hess_add(h, pool, x, C, 300, NULL) == 0);
    CHECK(sd_hess_add(h, pool, x + 300 * C, C, N - 300, NULL) == 0);
    CHECK(sd_hess_add(hd, pool, x, C, N, NULL) == 0);
    double *H = NULL, *D = NULL, worst = 0;
    REQUIRE(sd_hess_finish(h, pool, &H, NULL) == 0 && sd_hess_finish(hd, pool, &D, NULL) == 0);
    /* errors measured against the entry's natural scale sqrt(H_ii H_jj) (fp32 chunk sums) */
    for (int64_t i = 0; i < C; i++)
        for (int64_t j = 0; j < C; j++) {
            double ref = 0;
            for (int64_t t = 0; t < N; t++)
                ref += (double)x[t * C + i] * x[t * C + j];
            ref *= 2.0 / (double)N;
            double e = fabs(H[i * C + j] - ref) / sqrt(D[i] * D[j]);
            CHECK(H[i * C + j] == H[j * C + i]);
            worst = e > worst ? e : worst;
            if (i == j)
                CHECK(fabs(D[i] - ref) <= 1e-9 * fabs(ref));
        }
    CHECK_MSG(worst < 1e-5, "H differs from the fp64 sum by %g", worst);
    CHECK(sd_hess_rows(h) == N);
    free(H);
    free(D);
    free(x);
    sd_hess_free(h);
    sd_hess_free(hd);
    sd_cpu_pool_free(pool);
}

typedef struct cancel_at {
    volatile int flag;
    sd_prune_phase phase;
} cancel_at;

static void cancel_progress(void *ud, const sd_prune_progress *p)
{
    cancel_at *c = ud;
    if (p->phase == c->phase)
        sd_cancel_request(&c->flag); /* the checkpoint hash thread polls it */
}

/* No directory named like the output, and no temporary one beside it. */
static int leftovers(const char *dir, const char *prefix)
{
    DIR *dh = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (dh && (e = readdir(dh)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (dh)
        closedir(dh);
    return n;
}

static void test_cancel_leaves_nothing(void)
{
    char tmpl[] = "/tmp/sd_prune_test_XXXXXX";
    REQUIRE(mkdtemp(tmpl));
    char out[4200], tok[4200];
    snprintf(out, sizeof out, "%s/pruned", tmpl);
    snprintf(tok, sizeof tok, "%s/seqs.jsonl", tmpl);
    FILE *f = fopen(tok, "w");
    REQUIRE(f);
    for (int i = 0; i < 8; i++) {
        fprintf(f, "{\"tokens\": [0");
        for (int k = 1; k < 64; k++)
            fprintf(f, ", %d", (i * 131 + k * 17) % 8000 + 3);
        fprintf(f, "], \"prefill_len\": 8}\n");
    }
    fclose(f);
    sd_prune_phase phases[] = {SD_PH_CAPTURE, SD_PH_SOLVE};
    for (int k = 0; k < 2; k++) {
        sd_prune_spec s;
        sd_prune_spec_default(&s);
        s.model_dir = MODEL;
        s.out_dir = out;
        s.source = SD_CALIB_TOKENS;
        s.input = tok;
        s.threads = 2;
        cancel_at c = {0, phases[k]};
        sd_diag d = {0};
        int rc = sd_prune_run(&s, cancel_progress, &c, &c.flag, NULL, &d);
        CHECK_MSG(rc == SD_ECANCEL, "phase %d: rc %d (%s)", (int)phases[k], rc, d.msg);
        CHECK(leftovers(tmpl, "pruned") == 0);
    }
    /* the same job uncancelled writes a checkpoint that loads as 2:4 */
    sd_prune_spec s;
    sd_prune_spec_default(&s);
    s.model_dir = MODEL;
    s.out_dir = out;
    s.source = SD_CALIB_TOKENS;
    s.input = tok;
    s.threads = 2;
    sd_prune_result res;
    sd_diag d = {0};
    int rc = sd_prune_run(&s, NULL, NULL, NULL, &res, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK_MSG(res.calib_tokens == 8 * (64 - 8), "rows %lld", (long long)res.calib_tokens);
    CHECK(leftovers(tmpl, "pruned") == 1);
    sd_model *m = NULL;
    rc = sd_model_open(&m, out, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    if (m)
        CHECK(strcmp(sd_model_sparsity(m), "2:4") == 0);
    sd_model_free(m);
    /* an existing output is refused, not overwritten */
    rc = sd_prune_run(&s, NULL, NULL, NULL, NULL, &d);
    CHECK(rc == SD_EINVAL);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    RUN(test_hess_matches_naive);
    RUN(test_replay_identity_single);
    RUN(test_replay_identity_batched);
    RUN(test_cancel_leaves_nothing);
    return sd_test_done();
}
