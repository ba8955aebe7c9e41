/* test_tp_gpu: the tensor-parallel backend against the single-GPU CUDA backend (its reference)
 * on the bundled tiny model and on random dense, 2:4 and unstructured checkpoints — prefill,
 * decode steps replayed from CUDA graphs, batches; TP over threads (2 and, with 4 GPUs, 4
 * ranks) and over processes (a follower exec'd from this binary); a config that cannot be
 * split; a rank killed mid-run ends the group with an error, not a hang. Skips without 2 GPUs.
 * Run it with NCCL_NVLS_ENABLE=0 (the backend also sets it when unset). */
#include "tests/harness.h"

#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/model.h"
#include "engine/tp.h"
#include "engine/tp_boot.h"
#include "tests/engine/ckpt_writer.h"
#include "tests/engine/logits_util.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"
#endif

#define TINY "models/tiny"
#define KV_BLOCKS 64
#define BS 16
#define PROMPT 37
#define STEPS 12
#define NB 3

static void backend_opts(sd_backend_opts *o, int device)
{
    sd_backend_opts_default(o);
    o->kv_blocks = KV_BLOCKS;
    o->block_size = BS;
    o->max_batch_tokens = 256;
    o->device = device;
}

/* NB sequences: a prefill each (all logits), then STEPS batched decode steps of fixed random
 * tokens (graph buckets). out: [rows_total, V]; returns the rows written, or -1. */
static int run_script(sd_backend *b, int32_t V, float *out)
{
    static const int plen[NB] = {PROMPT, 5, 19};
    int32_t toks[NB][PROMPT + STEPS], bt[NB][8];
    int rows = 0;
    sd_diag d = {0};
    for (int i = 0; i < NB; i++) {
        rand_tokens(toks[i], plen[i] + STEPS, V, 1234 + i);
        for (int k = 0; k < 8; k++)
            bt[i][k] = 8 * i + k;
        sd_batch_seq q = {0, plen[i], toks[i], bt[i], 1};
        int rc = sd_backend_forward(b, &q, 1, out + (size_t)rows * V, &d);
        if (rc)
            return fprintf(stderr, "  prefill: %s\n", sd_diag_str(&d, rc)), -1;
        rows += plen[i];
    }
    for (int s = 0; s < STEPS; s++) {
        sd_batch_seq q[NB];
        for (int i = 0; i < NB; i++)
            q[i] = (sd_batch_seq){plen[i] + s, 1, &toks[i][plen[i] + s], bt[i], 0};
        int rc = sd_backend_forward(b, q, NB, out + (size_t)rows * V, &d);
        if (rc)
            return fprintf(stderr, "  decode step %d: %s\n", s, sd_diag_str(&d, rc)), -1;
        rows += NB;
    }
    return rows;
}

#define MAX_ROWS (PROMPT + 5 + 19 + NB * STEPS)

/* TP logits against the single-GPU reference: the same bf16 kernels, only the order of the
 * fp32 partial sums differs, so the bound is tighter than the CPU-vs-GPU one (1e-2). */
static void compare(const char *what, const float *tp, const float *ref, int rows, int32_t V)
{
    double num = 0, den = 0;
    int mism = 0;
    for (int r = 0; r < rows; r++) {
        const float *a = tp + (size_t)r * V, *b = ref + (size_t)r * V;
        for (int32_t i = 0; i < V; i++) {
            num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
            den += (double)b[i] * b[i];
        }
        int32_t ka = argmax(a, V), kb = argmax(b, V);
        if (ka != kb && !near_tie(b, kb, ka))
            mism++;
    }
    double e = den > 0 ? sqrt(num / den) : 1;
    CHECK_MSG(e <= 5e-3, "%s: logits rel L2 %.3g against one GPU", what, e);
    CHECK_MSG(mism == 0, "%s: %d rows pick another token (not a near-tie)", what, mism);
    fprintf(stderr, "  %s: rel L2 %.2e over %d rows\n", what, e, rows);
}

static int two_gpus(void)
{
#ifdef SD_HAVE_CUDA
    return sd_cuda_device_count() >= 2;
#else
    return 0;
#endif
}

/* Reference logits of dir on GPU 0 alone; malloc'd [MAX_ROWS, V] or NULL. */
static float *reference(sd_model *m, int *rows)
{
    float *out = NULL;
#ifdef SD_HAVE_CUDA
    sd_backend_opts o;
    backend_opts(&o, 0);
    sd_backend *b = NULL;
    sd_diag d = {0};
    int rc = sd_backend_cuda_init(&b, m, &o, &d);
    if (rc) {
        fprintf(stderr, "  single GPU: %s\n", sd_diag_str(&d, rc));
        return NULL;
    }
    out = malloc((size_t)MAX_ROWS * sd_model_cfg(m)->vocab * 4);
    *rows = out ? run_script(b, sd_model_cfg(m)->vocab, out) : -1;
    sd_backend_free(b);
    if (*rows < 0) {
        free(out);
        out = NULL;
    }
#else
    (void)m;
    (void)rows;
#endif
    return out;
}

/* Threads mode, `world` ranks, against the single GPU. */
static void tp_vs_single(const char *dir, int world, const char *what)
{
    sd_model *m = NULL;
    sd_diag d = {0};
    int rc = sd_model_open(&m, dir, &d);
    REQUIRE(rc == 0 || (fprintf(stderr, "  %s\n", sd_diag_str(&d, rc)), 0));
    int32_t V = sd_model_cfg(m)->vocab;
    int rows = 0;
    float *ref = reference(m, &rows), *got = malloc((size_t)MAX_ROWS * V * 4);
    sd_backend *tp = NULL;
    sd_backend_opts o;
    backend_opts(&o, 0);
    sd_tp_opts to;
    sd_tp_opts_default(&to);
    to.world = world;
    to.timeout_ms = 60000;
    if (ref && got && (rc = sd_tp_backend_init(&tp, m, &o, &to, &d)) != 0)
        CHECK_MSG(0, "%s: TP init: %s", what, sd_diag_str(&d, rc));
    if (tp) {
        CHECK(sd_tp_is_tp(tp) && tp->vocab == V && tp->kv_blocks <= KV_BLOCKS);
        memset(got, 0xff, (size_t)MAX_ROWS * V * 4); /* NaN poison: every row must be written */
        int n = run_script(tp, V, got);
        CHECK(n == rows);
        if (n == rows)
            compare(what, got, ref, rows, V);
    }
    CHECK(ref != NULL);
    sd_backend_free(tp);
    free(ref);
    free(got);
    sd_model_free(m);
}

static void test_tiny_tp2(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    tp_vs_single(TINY, 2, "tiny TP=2");
}

static void test_tiny_tp4(void)
{
#ifdef SD_HAVE_CUDA
    if (sd_cuda_device_count() < 4)
        SKIP("needs 4 GPUs");
    tp_vs_single(TINY, 4, "tiny TP=4 (KV heads replicated)");
#else
    SKIP("built without CUDA");
#endif
}

/* Random untied checkpoints (lm_head split by vocabulary with padding: vocab 1001). */
static void random_model(const char *pattern, const char *what)
{
    char dir[256];
    REQUIRE(tw_mkdtemp(dir, sizeof dir) == 0);
    tw_spec sp = tw_spec_default();
    sp.hidden = 128;
    sp.heads = 4;
    sp.kv_heads = 2;
    sp.head_dim = 64;
    sp.inter = 256;
    sp.vocab = 1001;
    sp.tie = 0;
    sp.pattern = pattern;
    REQUIRE(tw_write_model(dir, &sp) == 0);
    tp_vs_single(dir, 2, what);
    tw_rmdir(dir);
}

static void test_random_dense(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    random_model(NULL, "random dense TP=2");
}

static void test_random_2of4(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    random_model("2:4", "random 2:4 TP=2");
}

static void test_random_unstructured(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    random_model("unstructured", "random unstructured TP=2");
}

static void test_bad_split(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    sd_model_config c = {0};
    c.arch = SD_ARCH_LLAMA;
    c.hidden = 192;
    c.n_layers = 1;
    c.n_heads = 3;
    c.n_kv_heads = 3;
    c.head_dim = 64;
    c.intermediate = 256;
    c.vocab = 512;
    c.max_pos = 256;
    c.rms_eps = 1e-5f;
    c.rope_theta = 10000;
    sd_backend *b = NULL;
    sd_backend_opts o;
    backend_opts(&o, 0);
    sd_tp_opts to;
    sd_tp_opts_default(&to);
    to.world = 2;
    to.timeout_ms = 20000;
    sd_diag d = {0};
    CHECK(sd_tp_backend_init_synthetic(&b, &c, "dense", 1, &o, &to, &d) == SD_EINVAL);
    CHECK_MSG(strstr(d.msg, "num_attention_heads") != NULL, "%s", d.msg);
    CHECK(b == NULL);
#ifdef SD_HAVE_CUDA
    to.world = sd_cuda_device_count() + 1;
    CHECK(sd_tp_backend_init_synthetic(&b, &c, "dense", 1, &o, &to, &d) == SD_ENODEV);
#endif
}

/* ---- processes mode: a follower exec'd from this binary ---- */

static pid_t spawn_follower(const char *addr, const char *dir, const char *mode)
{
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "test_tp_gpu", "--tp-follower", addr, dir, mode, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The follower's main: rank 1 of 2 on GPU 1, runs the steps until rank 0 quits; mode "die":
 * dies (SIGKILL-like, no teardown) as soon as the group is up, before any step. */
static int follower_main(const char *addr, const char *dir, const char *mode)
{
    sd_model *m = NULL;
    sd_diag d = {0};
    int rc = sd_model_open(&m, dir, &d);
    sd_backend *b = NULL;
    sd_backend_opts o;
    backend_opts(&o, 1);
    sd_tp_opts to;
    sd_tp_opts_default(&to);
    to.world = 2;
    to.rank = 1;
    to.addr = addr;
    to.timeout_ms = 60000;
    if (!rc)
        rc = sd_tp_backend_init(&b, m, &o, &to, &d);
    if (!rc && !strcmp(mode, "die"))
        _exit(9); /* the kernel closes its sockets; its NCCL peers are left waiting */
    if (!rc)
        rc = sd_tp_follow(b, &d);
    if (rc)
        fprintf(stderr, "  follower: %s\n", sd_diag_str(&d, rc));
    sd_backend_free(b);
    sd_model_free(m);
    return rc ? 1 : 0;
}

static int free_addr(char *addr, size_t cap)
{
    sd_tp_listener *l = NULL;
    if (sd_tp_boot_listen(&l, "127.0.0.1:0", NULL))
        return -1;
    snprintf(addr, cap, "127.0.0.1:%d", sd_tp_boot_port(l));
    sd_tp_boot_close(l);
    return 0;
}

static int rank0_init(sd_backend **b, sd_model *m, const char *addr, int timeout_ms, sd_diag *d)
{
    sd_backend_opts o;
    backend_opts(&o, 0);
    sd_tp_opts to;
    sd_tp_opts_default(&to);
    to.world = 2;
    to.rank = 0;
    to.addr = addr;
    to.timeout_ms = timeout_ms;
    return sd_tp_backend_init(b, m, &o, &to, d);
}

static void test_processes(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    sd_model *m = NULL;
    sd_diag d = {0};
    REQUIRE(sd_model_open(&m, TINY, &d) == 0);
    int32_t V = sd_model_cfg(m)->vocab;
    int rows = 0;
    float *ref = reference(m, &rows), *got = malloc((size_t)MAX_ROWS * V * 4);
    char addr[64];
    REQUIRE(ref && got && free_addr(addr, sizeof addr) == 0);
    pid_t pid = spawn_follower(addr, TINY, "follow");
    sd_backend *b = NULL;
    int rc = rank0_init(&b, m, addr, 60000, &d);
    CHECK_MSG(rc == 0, "rank 0: %s", sd_diag_str(&d, rc));
    if (!rc) {
        memset(got, 0xff, (size_t)MAX_ROWS * V * 4);
        int n = run_script(b, V, got);
        CHECK(n == rows);
        if (n == rows)
            compare("tiny TP=2 over processes", got, ref, rows, V);
    }
    sd_backend_free(b); /* tells the follower to quit */
    if (rc)
        kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(rc || (WIFEXITED(st) && WEXITSTATUS(st) == 0), "follower status %d", st);
    free(ref);
    free(got);
    sd_model_free(m);
}

/* A rank killed between two steps: rank 0 sees the group failed even while idle (its closed
 * connection), the next step fails (the peer watch, the closed socket, or the collective's
 * deadline and ncclCommAbort), the group is marked failed, nothing hangs. */
static void test_dead_rank(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    sd_model *m = NULL;
    sd_diag d = {0};
    REQUIRE(sd_model_open(&m, TINY, &d) == 0);
    char addr[64];
    REQUIRE(free_addr(addr, sizeof addr) == 0);
    pid_t pid = spawn_follower(addr, TINY, "follow");
    sd_backend *b = NULL;
    int rc = rank0_init(&b, m, addr, 15000, &d);
    CHECK_MSG(rc == 0, "rank 0: %s", sd_diag_str(&d, rc));
    int32_t V = sd_model_cfg(m)->vocab, toks[4] = {1, 2, 3, 4}, bt[1] = {0};
    float *lg = malloc((size_t)4 * V * 4);
    sd_batch_seq q = {0, 4, toks, bt, 1};
    if (!rc) {
        int r0 = sd_backend_forward(b, &q, 1, lg, &d);
        CHECK_MSG(r0 == 0, "step with both ranks alive: %s", sd_diag_str(&d, r0));
    }
    if (!rc)
        CHECK(sd_tp_failed(b) == 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (!rc) {
        int seen = 0; /* idle: the closed connection shows within moments */
        for (int i = 0; i < 2000 && !seen; i++) {
            seen = sd_tp_failed(b);
            usleep(1000);
        }
        CHECK_MSG(seen, "rank 0 idle does not see its follower's death");
        memset(&d, 0, sizeof d);
        int r1 = sd_backend_forward(b, &q, 1, lg, &d);
        CHECK_MSG(r1 == SD_ENCCL || r1 == SD_EIO || r1 == SD_ECUDA, "first step after the death: %d %s", r1,
                  d.msg);
        memset(&d, 0, sizeof d);
        int r2 = sd_backend_forward(b, &q, 1, lg, &d);
        CHECK_MSG(r2 == SD_ENCCL && strstr(d.msg, "failed earlier"), "%d %s", r2, d.msg);
    }
    free(lg);
    sd_backend_free(b);
    sd_model_free(m);
}

/* A rank dead before the first step: rank 0's first step autotunes its linears (timing with
 * stream synchronisations) right after the embedding's all-reduce, which waits on the dead
 * peer. The tuner drains the stream under the group's deadline and peer watch first, so the
 * step fails with a group error found by the watch (or by NCCL), not by the deadline. */
static void test_dead_before_first_step(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    sd_model *m = NULL;
    sd_diag d = {0};
    REQUIRE(sd_model_open(&m, TINY, &d) == 0);
    char addr[64];
    REQUIRE(free_addr(addr, sizeof addr) == 0);
    pid_t pid = spawn_follower(addr, TINY, "die");
    sd_backend *b = NULL;
    int rc = rank0_init(&b, m, addr, 60000, &d);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 9, "follower status %d", st);
    if (rc) { /* the death may already show during set-up: then the error must name it */
        CHECK_MSG(rc == SD_ENCCL || rc == SD_EIO, "rank 0 set-up: %d %s", rc, d.msg);
    } else {
        int32_t V = sd_model_cfg(m)->vocab, toks[4] = {1, 2, 3, 4}, bt[1] = {0};
        float *lg = malloc((size_t)4 * V * 4);
        sd_batch_seq q = {0, 4, toks, bt, 1};
        memset(&d, 0, sizeof d);
        int r1 = lg ? sd_backend_forward(b, &q, 1, lg, &d) : SD_ENOMEM;
        CHECK_MSG(r1 == SD_ENCCL || r1 == SD_EIO, "first step after the death: %d %s", r1, d.msg);
        CHECK_MSG(!strstr(d.msg, "timed out"), "found by the deadline, not the watch: %s", d.msg);
        CHECK(sd_tp_failed(b) == 1);
        free(lg);
    }
    sd_backend_free(b);
    sd_model_free(m);
}

/* A rank killed after decode steps replayed from CUDA graphs (the server's case, issue #6): the
 * graphs hold NCCL references, and since NCCL 2.26 ncclCommAbort waits until they are destroyed
 * — an inline abort in the failing step never returned (the step hung, and the daemon with it).
 * The step must fail by the peer watch (not the deadline: timeout 60 s) and the teardown must
 * finish; a hang here is the bug (the GPU script runs this binary under a timeout). */
static void test_dead_rank_after_graphs(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    sd_model *m = NULL;
    sd_diag d = {0};
    REQUIRE(sd_model_open(&m, TINY, &d) == 0);
    int32_t V = sd_model_cfg(m)->vocab;
    float *got = malloc((size_t)MAX_ROWS * V * 4);
    char addr[64];
    REQUIRE(got && free_addr(addr, sizeof addr) == 0);
    pid_t pid = spawn_follower(addr, TINY, "follow");
    sd_backend *b = NULL;
    int rc = rank0_init(&b, m, addr, 60000, &d);
    CHECK_MSG(rc == 0, "rank 0: %s", sd_diag_str(&d, rc));
    if (!rc) {
        CHECK(run_script(b, V, got) > 0);
#ifdef SD_HAVE_CUDA
        CHECK_MSG(sd_backend_cuda_graph_replays(sd_tp_local_rank(b)) > 0, "no decode graph was replayed");
#endif
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (!rc) {
        int32_t tok[NB] = {1, 2, 3}, bt[NB][8];
        sd_batch_seq q[NB];
        for (int i = 0; i < NB; i++) {
            for (int k = 0; k < 8; k++)
                bt[i][k] = 8 * i + k;
            q[i] = (sd_batch_seq){PROMPT + STEPS, 1, &tok[i], bt[i], 0};
        }
        fprintf(stderr, "  follower killed; a decode step (graph bucket of %d)...\n", NB);
        memset(&d, 0, sizeof d);
        int r1 = sd_backend_forward(b, q, NB, got, &d);
        fprintf(stderr, "  ...returned %d: %s\n", r1, d.msg);
        CHECK_MSG(r1 == SD_ENCCL || r1 == SD_EIO, "decode step after the death: %d %s", r1, d.msg);
        CHECK_MSG(!strstr(d.msg, "timed out"), "found by the deadline, not the watch: %s", d.msg);
        CHECK(sd_tp_failed(b) == 1);
        memset(&d, 0, sizeof d);
        int r2 = sd_backend_forward(b, q, NB, got, &d);
        CHECK_MSG(r2 == SD_ENCCL && strstr(d.msg, "failed earlier"), "%d %s", r2, d.msg);
    }
    fprintf(stderr, "  freeing the failed group...\n");
    sd_backend_free(b); /* destroys the graphs: the pending abort finishes */
    fprintf(stderr, "  ...freed\n");
    free(got);
    sd_model_free(m);
}

/* The reverse, run as a process exec'd from this binary: rank 0 of 2 on GPU 0 runs the script
 * (graphs captured on both ranks) and dies without a teardown. */
static int rank0_die_main(const char *addr, const char *dir)
{
    sd_model *m = NULL;
    sd_diag d = {0};
    sd_backend *b = NULL;
    int rc = sd_model_open(&m, dir, &d);
    float *got = rc ? NULL : malloc((size_t)MAX_ROWS * sd_model_cfg(m)->vocab * 4);
    if (!rc)
        rc = got ? rank0_init(&b, m, addr, 60000, &d) : SD_ENOMEM;
    if (!rc && run_script(b, sd_model_cfg(m)->vocab, got) <= 0)
        rc = SD_EIO;
    if (rc)
        fprintf(stderr, "  rank 0: %s\n", sd_diag_str(&d, rc));
    _exit(rc ? 1 : 9); /* the kernel closes its sockets; the follower is mid-wait for a plan */
}

/* A follower whose rank 0 died after graph replays must leave (status 1) instead of hanging in
 * the abort of its communicator, which its own decode graphs hold (issue #6, follower side). */
static void test_rank0_dead_after_graphs(void)
{
    if (!two_gpus())
        SKIP("needs 2 GPUs");
    char addr[64];
    REQUIRE(free_addr(addr, sizeof addr) == 0);
    pid_t fpid = spawn_follower(addr, TINY, "follow");
    fflush(stderr);
    pid_t r0 = fork();
    if (r0 == 0) {
        execl("/proc/self/exe", "test_tp_gpu", "--tp-rank0-die", addr, TINY, (char *)NULL);
        _exit(127);
    }
    int st0 = 0, st1 = 0;
    waitpid(r0, &st0, 0);
    CHECK_MSG(WIFEXITED(st0) && WEXITSTATUS(st0) == 9, "rank 0 did not run its steps: status %d", st0);
    pid_t got = 0;
    for (int i = 0; i < 12000 && got == 0; i++) { /* up to 12 s */
        got = waitpid(fpid, &st1, WNOHANG);
        if (!got)
            usleep(1000);
    }
    if (!got) {
        kill(fpid, SIGKILL);
        waitpid(fpid, &st1, 0);
    }
    CHECK_MSG(got == fpid, "the follower still ran 12 s after rank 0 died (a hang)");
    CHECK_MSG(!got || (WIFEXITED(st1) && WEXITSTATUS(st1) == 1), "follower status %d (want exit 1)", st1);
}

/* SD_TP_GPU_ONLY=<part of a case's name> runs only the matching cases (the GPU scripts' short runs). */
#define RUN_SEL(fn)                                                                                          \
    do {                                                                                                     \
        const char *only_ = getenv("SD_TP_GPU_ONLY");                                                        \
        if (!only_ || !*only_ || strstr(#fn, only_))                                                         \
            RUN(fn);                                                                                         \
    } while (0)

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--tp-follower"))
        return follower_main(argv[2], argv[3], argv[4]);
    if (argc == 4 && !strcmp(argv[1], "--tp-rank0-die"))
        return rank0_die_main(argv[2], argv[3]);
    if (access(TINY "/config.json", R_OK)) {
        fprintf(stderr, "  SKIP: run from the repository root (needs %s)\n", TINY);
        sd__t_skip++;
        return sd_test_done();
    }
    RUN_SEL(test_bad_split);
    RUN_SEL(test_tiny_tp2);
    RUN_SEL(test_tiny_tp4);
    RUN_SEL(test_random_dense);
    RUN_SEL(test_random_2of4);
    RUN_SEL(test_random_unstructured);
    RUN_SEL(test_processes);
    RUN_SEL(test_dead_rank);
    RUN_SEL(test_dead_before_first_step);
    RUN_SEL(test_dead_rank_after_graphs);
    RUN_SEL(test_rank0_dead_after_graphs);
    return sd_test_done();
}
