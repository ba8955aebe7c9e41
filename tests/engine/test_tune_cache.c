/* test_tune_cache: the tuning-cache file (engine/tune_cache.c) round-trips every field, writes
 * atomically (no temporary left behind, an unwritable place is an error that names it), and
 * refuses what it must not trust — not JSON, another format, a missing, mistyped or out-of-range
 * field — naming the field; a missing file is SD_ENOTFOUND. CPU only. */
#include "tests/harness.h"

#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

#include "engine/tune_cache.h"

static char dir[64];

static void path_in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int bad = fputs(text, f) < 0;
    return fclose(f) != 0 || bad ? -1 : 0;
}

static void sample(sd_tune_cache *c, sd_nm_tuned *k, sd_tune_path *p)
{
    memset(c, 0, sizeof *c);
    snprintf(c->key, sizeof c->key, "NVIDIA H200|sm_90|driver 13000|kernels %d", SD_NM_KERNELS_REV);
    k[0] = (sd_nm_tuned){0, 2, 4, 1, 0, 0, 6144, 4096, 103, 1};
    k[1] = (sd_nm_tuned){1, 0, 0, 16, 0, 1, 4096, 14336, 16, 3};
    k[2] = (sd_nm_tuned){0, 8, 16, 64, 1, 0, (int64_t)1 << 33, 128, 128, 1};
    p[0] = (sd_tune_path){28672, 4096, 1, 0, 4, 0, 0, 0.0354f, 0.2329f, 0, 0.f, 0, 0.f};
    p[1] = (sd_tune_path){6144, 4096, 128, 0, 4, 1, 0, 0.2664f, 0.2545f, 0, 0.1986f, 1, 0.1514f};
    c->kernels = k, c->n_kernels = 3, c->paths = p, c->n_paths = 2;
}

/* Nothing but the files named in keep (a NULL-ended list) in dir. */
static int only_files(const char *const *keep)
{
    DIR *dd = opendir(dir);
    if (!dd)
        return 0;
    int ok = 1;
    for (struct dirent *e; (e = readdir(dd));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int known = 0;
        for (int i = 0; keep[i]; i++)
            known |= !strcmp(e->d_name, keep[i]);
        if (!known) {
            fprintf(stderr, "  unexpected file %s\n", e->d_name);
            ok = 0;
        }
    }
    closedir(dd);
    return ok;
}

static void test_round_trip(void)
{
    sd_tune_cache c, r;
    sd_nm_tuned k[3];
    sd_tune_path p[2];
    sample(&c, k, p);
    char path[128];
    path_in(path, sizeof path, "tune.json");
    sd_diag d = {0};
    REQUIRE(sd_tune_cache_save(path, &c, &d) == 0);
    const char *keep[] = {"tune.json", NULL};
    CHECK_MSG(only_files(keep), "a temporary file was left behind");
    REQUIRE(sd_tune_cache_load(path, &r, &d) == 0);
    CHECK(!strcmp(r.key, c.key));
    REQUIRE(r.n_kernels == 3 && r.n_paths == 2);
    for (int i = 0; i < 3; i++) {
        const sd_nm_tuned *x = &r.kernels[i], *y = &k[i];
        CHECK_MSG(x->dense == y->dense && x->n == y->n && x->m == y->m && x->B == y->B &&
                      x->y_bf16 == y->y_bf16 && x->accumulate == y->accumulate && x->rows == y->rows &&
                      x->cols == y->cols && x->rows_per_warp == y->rows_per_warp && x->split == y->split,
                  "kernel entry %d differs", i);
    }
    for (int i = 0; i < 2; i++) { /* the floats through JSON's decimal text and back: exact */
        const sd_tune_path *x = &r.paths[i], *y = &p[i];
        CHECK_MSG(x->rows == y->rows && x->cols == y->cols && x->B == y->B && x->dense == y->dense &&
                      x->m == y->m && x->acc == y->acc && x->use_blas == y->use_blas &&
                      x->ms_kernel == y->ms_kernel && x->ms_blas == y->ms_blas &&
                      x->use_cslt == y->use_cslt && x->ms_cslt == y->ms_cslt &&
                      x->use_nm_gemm == y->use_nm_gemm && x->ms_nm_gemm == y->ms_nm_gemm,
                  "path %d differs", i);
    }
    sd_tune_cache_free(&r);
    /* a second save replaces the file whole: an empty cache reads back empty */
    c.n_kernels = c.n_paths = 0;
    REQUIRE(sd_tune_cache_save(path, &c, &d) == 0);
    REQUIRE(sd_tune_cache_load(path, &r, &d) == 0);
    CHECK(r.n_kernels == 0 && r.n_paths == 0 && !strcmp(r.key, c.key));
    sd_tune_cache_free(&r);
    unlink(path);
    /* a bare file name: written in the working directory, the temporary beside it */
    char cwd[512];
    REQUIRE(getcwd(cwd, sizeof cwd) && chdir(dir) == 0);
    sample(&c, k, p);
    int rc = sd_tune_cache_save("bare.json", &c, &d), rc2 = rc ? -1 : sd_tune_cache_load("bare.json", &r, &d);
    const char *keep2[] = {"bare.json", NULL};
    int clean = only_files(keep2);
    unlink("bare.json");
    REQUIRE(chdir(cwd) == 0);
    CHECK_MSG(rc == 0 && rc2 == 0 && r.n_kernels == 3 && clean, "bare name: %d %d %s", rc, rc2, d.msg);
    sd_tune_cache_free(&r);
}

static void test_missing_and_unwritable(void)
{
    sd_tune_cache c;
    sd_diag d = {0};
    char path[128];
    path_in(path, sizeof path, "absent.json");
    CHECK(sd_tune_cache_load(path, &c, &d) == SD_ENOTFOUND);
    CHECK(c.kernels == NULL && c.n_kernels == 0);
    sd_nm_tuned k[3];
    sd_tune_path p[2];
    sample(&c, k, p);
    path_in(path, sizeof path, "no/such/dir/tune.json");
    CHECK(sd_tune_cache_save(path, &c, &d) == SD_EIO);
    CHECK_MSG(strstr(d.msg, "no/such/dir") != NULL, "message: %s", d.msg);
}

/* Each text must fail to load with SD_EFORMAT and a message that contains `names`. */
static void test_refuses_bad_files(void)
{
    const char *ok_kernel = "{\"dense\":0,\"n\":2,\"m\":4,\"B\":1,\"y_bf16\":0,\"accumulate\":0,\"rows\":64,"
                            "\"cols\":64,\"rows_per_warp\":1,\"split\":1}";
    struct {
        const char *text, *names;
    } cases[] = {
        {"not json", "line 1"},
        {"[1, 2]", "an object expected"},
        {"{\"format\": 2, \"key\": \"k\", \"kernels\": [], \"paths\": []}", "\"format\""},
        {"{\"format\": 1, \"kernels\": [], \"paths\": []}", "\"key\""},
        {"{\"format\": 1, \"key\": \"k\", \"kernels\": {}, \"paths\": []}", "\"kernels\""},
        {"{\"format\": 1, \"key\": \"k\", \"kernels\": []}", "\"paths\""},
        {NULL, "kernels[1].split"},         /* filled below: the second entry lacks "split" */
        {NULL, "kernels[0].rows"},          /* rows 0 */
        {NULL, "paths[0].ms_kernel"},       /* a string where a time goes */
        {NULL, "kernels[0].rows_per_warp"}, /* 2.5 */
        {NULL, "paths[0].use_cslt"},        /* 2 */
        {NULL, "paths[0].ms_nm_gemm"},      /* use_nm_gemm without it */
    };
    char texts[6][512];
    snprintf(texts[0], sizeof texts[0],
             "{\"format\":1,\"key\":\"k\",\"kernels\":[%s,{\"dense\":0,\"n\":2,\"m\":4,\"B\":1,\"y_bf16\":0,"
             "\"accumulate\":0,\"rows\":64,\"cols\":64,\"rows_per_warp\":1}],\"paths\":[]}",
             ok_kernel);
    snprintf(texts[1], sizeof texts[1],
             "{\"format\":1,\"key\":\"k\",\"kernels\":[{\"dense\":0,\"n\":2,\"m\":4,\"B\":1,\"y_bf16\":0,"
             "\"accumulate\":0,\"rows\":0,\"cols\":64,\"rows_per_warp\":1,\"split\":1}],\"paths\":[]}");
    snprintf(
        texts[2], sizeof texts[2],
        "{\"format\":1,\"key\":\"k\",\"kernels\":[],\"paths\":[{\"rows\":1,\"cols\":1,\"B\":1,\"dense\":0,"
        "\"m\":4,\"acc\":0,\"use_blas\":0,\"ms_kernel\":\"fast\",\"ms_blas\":1.0}]}");
    snprintf(texts[3], sizeof texts[3],
             "{\"format\":1,\"key\":\"k\",\"kernels\":[{\"dense\":0,\"n\":2,\"m\":4,\"B\":1,\"y_bf16\":0,"
             "\"accumulate\":0,\"rows\":64,\"cols\":64,\"rows_per_warp\":2.5,\"split\":1}],\"paths\":[]}");
    snprintf(
        texts[4], sizeof texts[4],
        "{\"format\":1,\"key\":\"k\",\"kernels\":[],\"paths\":[{\"rows\":1,\"cols\":1,\"B\":1,\"dense\":0,"
        "\"m\":4,\"acc\":0,\"use_blas\":0,\"ms_kernel\":1.0,\"ms_blas\":1.0,\"use_cslt\":2,\"ms_cslt\":1.0}]"
        "}");
    snprintf(
        texts[5], sizeof texts[5],
        "{\"format\":1,\"key\":\"k\",\"kernels\":[],\"paths\":[{\"rows\":1,\"cols\":1,\"B\":1,\"dense\":0,"
        "\"m\":4,\"acc\":0,\"use_blas\":0,\"ms_kernel\":1.0,\"ms_blas\":1.0,\"use_nm_gemm\":1}]}");
    for (int i = 0; i < 6; i++)
        cases[6 + i].text = texts[i];
    char path[128];
    path_in(path, sizeof path, "bad.json");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        REQUIRE(write_text(path, cases[i].text) == 0);
        sd_tune_cache c;
        sd_diag d = {0};
        int rc = sd_tune_cache_load(path, &c, &d);
        CHECK_MSG(rc == SD_EFORMAT && strstr(d.msg, cases[i].names), "case %zu: rc %d, message: %s", i, rc,
                  d.msg);
        CHECK(c.kernels == NULL && c.paths == NULL); /* nothing half-read is handed back */
    }
    unlink(path);
}

/* A file from before cuSPARSELt and the N:M GEMM were timed (no use_cslt, ms_cslt, use_nm_gemm,
 * ms_nm_gemm) still loads: not timed, not taken. */
static void test_paths_without_cslt(void)
{
    char path[128];
    path_in(path, sizeof path, "old.json");
    REQUIRE(write_text(path, "{\"format\":1,\"key\":\"k\",\"kernels\":[],\"paths\":[{\"rows\":64,\"cols\":64,"
                             "\"B\":128,\"dense\":0,\"m\":4,\"acc\":1,\"use_blas\":1,\"ms_kernel\":0.5,"
                             "\"ms_blas\":0.25}]}") == 0);
    sd_tune_cache c;
    sd_diag d = {0};
    REQUIRE(sd_tune_cache_load(path, &c, &d) == 0);
    REQUIRE(c.n_paths == 1);
    CHECK(c.paths[0].use_blas == 1 && c.paths[0].B == 128 && c.paths[0].ms_blas == 0.25f);
    CHECK(c.paths[0].use_cslt == 0 && c.paths[0].ms_cslt == 0.f);
    CHECK(c.paths[0].use_nm_gemm == 0 && c.paths[0].ms_nm_gemm == 0.f);
    sd_tune_cache_free(&c);
    unlink(path);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/sd_tune_cache_XXXXXX");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    RUN(test_round_trip);
    RUN(test_missing_and_unwritable);
    RUN(test_refuses_bad_files);
    RUN(test_paths_without_cslt);
    rmdir(dir);
    return sd_test_done();
}
