/* tp: the tensor-parallel backend — rank set-up (shard plan, non-blocking NCCL communicator,
 * the rank's CUDA backend), one thread per GPU or one process per GPU, the step hand-off
 * that keeps every rank on the same plan, and a teardown that never waits on a dead peer. */
#include "engine/tp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cuda_backend.h"
#include "engine/cuda_impl.cuh"
#include "engine/model.h"
#include "engine/shard.h"
#include "engine/tp_boot.h"
#include "engine/tp_impl.cuh"

#define TP_PLAN_STEP 1
#define TP_PLAN_QUIT 2
#define TP_HDR_INTS 4 /* op, n_seqs, payload ints, reserved */

typedef struct sd_tp_backend sd_tp_backend;

/* One rank run by this process. */
typedef struct tp_rank_ctx {
    sd_tp_backend *g;
    int rank, device;
    pthread_t th;
    int started;
    sd_backend *rb;    /* the rank's CUDA backend */
    ncclComm_t comm;   /* owned here; the backend holds a copy */
    sd_tp_bg *aborter; /* the abort of comm, on its own thread (NULL: inline) */
    int rc;            /* set-up, then last step */
    sd_diag diag;
} tp_rank_ctx;

struct sd_tp_backend {
    sd_backend base;
    sd_tp_opts o;
    int n_local;    /* rank contexts in this process: world (threads) or 1 (processes) */
    tp_rank_ctx *r; /* [n_local] */
    int dead;       /* the group failed: every later call fails (atomic: sd_tp_failed reads it) */
    /* threads mode: the step hand-off */
    pthread_mutex_t mu;
    pthread_cond_t cv_go, cv_done;
    int sync_ok;
    uint64_t gen;
    int n_done, quit;
    const sd_batch_seq *seqs;
    int n_seqs;
    float *logits;
    /* what the ranks are built from */
    const sd_model *m;
    sd_model_config cfg;
    const char *pattern;
    uint64_t seed;
    sd_backend_opts bo;
    ncclUniqueId id;
    /* processes mode: rank 0 holds a socket per follower, a follower one to rank 0 */
    int *fds;      /* [world], -1 where none */
    int32_t *plan; /* serialized step plan [plan_cap] */
    size_t plan_cap;
};

static void tp_free(sd_backend *b);
static int tp_forward(sd_backend *b, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d);
static int tp_sample(sd_backend *b, const sd_sample_req *reqs, int n, sd_sample_out *out, sd_diag *d);
static const sd_backend_vtbl tp_vtbl = {"cuda-tp", tp_forward, tp_free, tp_sample, 1};

void sd_tp_opts_default(sd_tp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->world = 1;
    o->rank = -1;
    o->timeout_ms = 120000;
}

int sd_tp_is_tp(const sd_backend *b)
{
    return b && b->vt == &tp_vtbl;
}

const sd_backend *sd_tp_local_rank(const sd_backend *b)
{
    return sd_tp_is_tp(b) ? ((const sd_tp_backend *)b)->r[0].rb : NULL;
}

static void set_dead(sd_tp_backend *g)
{
    __atomic_store_n(&g->dead, 1, __ATOMIC_RELEASE);
}

static int is_dead(const sd_tp_backend *g)
{
    return __atomic_load_n(&g->dead, __ATOMIC_ACQUIRE);
}

int sd_tp_failed(const sd_backend *b)
{
    if (!sd_tp_is_tp(b))
        return 0;
    const sd_tp_backend *g = (const sd_tp_backend *)b;
    if (is_dead(g))
        return 1;
    /* rank 0 of the multi-process mode, idle or not: a follower's connection closing means
     * the follower died (they never close it first), so the next step could only fail */
    for (int r = 1; g->o.rank == 0 && g->fds && r < g->o.world; r++)
        if (sd_tp_chan_closed(g->fds[r], 1))
            return 1;
    return 0;
}

/* A failure of the group (as opposed to a bad request, which every rank rejects alike). */
static int group_error(int rc)
{
    return rc == SD_ENCCL || rc == SD_ECUDA || rc == SD_EIO;
}

/* ---- one rank ---- */

/* SD_TP_ABORT_INLINE=1 brings back the old inline ncclCommAbort (which, with decode graphs
 * captured, does not return until they are destroyed: a failed step would hang). */
static int abort_inline(void)
{
    const char *v = getenv("SD_TP_ABORT_INLINE");
    return v && !strcmp(v, "1");
}

static int rank_setup(sd_tp_backend *g, tp_rank_ctx *c, sd_diag *d)
{
    sd_tp_rank t;
    memset(&t, 0, sizeof t);
    t.timeout_ms = g->o.timeout_ms;
    if (!abort_inline() && sd_tp_bg_init(&c->aborter))
        return sd_diag_set(d, SD_ENOMEM, "tensor parallel rank %d: aborter", c->rank);
    t.aborter = c->aborter;
    if (g->o.rank >= 0) { /* processes: a peer's death closes its control connection */
        t.watch_fds = g->fds;
        t.n_watch = g->o.world;
        t.watch_unread_too = g->o.rank == 0; /* a follower never closes first */
    }
    /* the plan first: a config that cannot be split fails alike on every rank, before NCCL */
    SD_TRY(sd_shard_plan_init(&t.plan, &g->cfg, g->o.world, c->rank, d));
    cudaError_t e = cudaSetDevice(c->device);
    if (e != cudaSuccess)
        return sd_diag_set(d, SD_ECUDA, "tensor parallel rank %d: device %d: %s", c->rank, c->device,
                           cudaGetErrorString(e));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* every wait is ours, with a deadline */
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, g->o.world, g->id, c->rank, &cfg);
    t.comm = c->comm;
    if (r != ncclSuccess && r != ncclInProgress) {
        if (c->comm)
            ncclCommAbort(c->comm);
        c->comm = NULL;
        return sd_diag_set(d, SD_ENCCL, "tensor parallel rank %d: ncclCommInitRank: %s", c->rank,
                           ncclGetErrorString(r));
    }
    int rc = sd__tp_wait_comm(&t, "ncclCommInitRank", d);
    if (rc) {
        c->comm = NULL; /* aborted by the wait */
        return rc;
    }
    sd_backend_opts bo = g->bo;
    bo.device = c->device;
    return sd__cu_backend_init_rank(&c->rb, g->m, &g->cfg, g->pattern, g->seed, &bo, &t, d);
}

/* Frees the rank's backend, then its communicator: finalized when healthy, aborted otherwise
 * (a finalize could wait on a dead peer). The backend goes first: its CUDA graphs hold NCCL
 * references that an abort (even one started by a failed step) waits for. */
static void rank_teardown(tp_rank_ctx *c, int healthy, int timeout_ms)
{
    int aborted = c->rb && sd__cu_backend_aborted(c->rb);
    sd_backend_free(c->rb);
    c->rb = NULL;
    if (c->comm && !aborted) {
        cudaSetDevice(c->device);
        sd_tp_rank t;
        memset(&t, 0, sizeof t);
        t.comm = c->comm;
        t.timeout_ms = timeout_ms;
        t.aborter = c->aborter;
        ncclResult_t r = healthy ? ncclCommFinalize(c->comm) : ncclInternalError;
        if (r == ncclSuccess || r == ncclInProgress) {
            if (sd__tp_wait_comm(&t, "ncclCommFinalize", NULL) == 0) /* else aborted by the wait */
                ncclCommDestroy(c->comm);
        } else {
            sd__tp_abort(&t);
        }
    }
    c->comm = NULL;
    /* an abort still running (its graphs are gone now) gets a bounded while to finish; past
     * that it keeps its memory and the process goes on exiting */
    if (c->aborter)
        sd_tp_bg_wait(c->aborter, timeout_ms < 10000 ? timeout_ms : 10000);
    sd_tp_bg_free(c->aborter);
    c->aborter = NULL;
}

/* ---- threads mode ---- */

static void *rank_main(void *arg)
{
    tp_rank_ctx *c = (tp_rank_ctx *)arg;
    sd_tp_backend *g = c->g;
    int rc = rank_setup(g, c, &c->diag);
    pthread_mutex_lock(&g->mu);
    c->rc = rc;
    g->n_done++;
    pthread_cond_broadcast(&g->cv_done);
    uint64_t seen = 0;
    for (;;) {
        while (!g->quit && g->gen == seen)
            pthread_cond_wait(&g->cv_go, &g->mu);
        if (g->quit)
            break;
        seen = g->gen;
        const sd_batch_seq *seqs = g->seqs;
        int n = g->n_seqs;
        float *logits = c->rank == 0 ? g->logits : NULL;
        pthread_mutex_unlock(&g->mu);
        rc = c->rb ? sd_backend_forward(c->rb, seqs, n, logits, &c->diag)
                   : sd_diag_set(&c->diag, SD_ENCCL, "rank %d was never set up", c->rank);
        if (group_error(rc) && c->rb)
            sd__cu_backend_abort(c->rb); /* peers waiting on this rank fail instead of hanging */
        pthread_mutex_lock(&g->mu);
        c->rc = rc;
        g->n_done++;
        pthread_cond_broadcast(&g->cv_done);
    }
    pthread_mutex_unlock(&g->mu);
    rank_teardown(c, !is_dead(g), g->o.timeout_ms);
    return NULL;
}

/* Waits until every local rank has reported since n_done was reset; returns the first error. */
static int wait_ranks(sd_tp_backend *g, sd_diag *d)
{
    while (g->n_done < g->n_local)
        pthread_cond_wait(&g->cv_done, &g->mu);
    for (int i = 0; i < g->n_local; i++)
        if (g->r[i].rc) {
            if (d)
                *d = g->r[i].diag;
            return g->r[i].rc;
        }
    return 0;
}

static int threads_step(sd_tp_backend *g, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d)
{
    pthread_mutex_lock(&g->mu);
    g->seqs = seqs;
    g->n_seqs = n_seqs;
    g->logits = logits;
    g->n_done = 0;
    g->gen++;
    pthread_cond_broadcast(&g->cv_go);
    int rc = wait_ranks(g, d);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static int threads_start(sd_tp_backend *g, sd_diag *d)
{
    if (pthread_mutex_init(&g->mu, NULL) || pthread_cond_init(&g->cv_go, NULL) ||
        pthread_cond_init(&g->cv_done, NULL))
        return sd_diag_set(d, SD_ENOMEM, "tensor parallel: thread primitives");
    g->sync_ok = 1;
    ncclResult_t r = ncclGetUniqueId(&g->id);
    if (r != ncclSuccess)
        return sd_diag_set(d, SD_ENCCL, "tensor parallel: ncclGetUniqueId: %s", ncclGetErrorString(r));
    pthread_mutex_lock(&g->mu);
    g->n_done = 0;
    for (int i = 0; i < g->n_local; i++) {
        tp_rank_ctx *c = &g->r[i];
        if (pthread_create(&c->th, NULL, rank_main, c)) {
            g->n_local = i; /* wait only for the ones that run */
            pthread_mutex_unlock(&g->mu);
            return sd_diag_set(d, SD_ENOMEM, "tensor parallel: starting the thread of rank %d", i);
        }
        c->started = 1;
    }
    int rc = wait_ranks(g, d);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

/* ---- processes mode ---- */

/* Serializes the batch: per sequence pos, n_tokens, all_logits, n_blocks, tokens, blocks. */
static int plan_pack(sd_tp_backend *g, const sd_batch_seq *seqs, int n_seqs, size_t *ret_ints, sd_diag *d)
{
    size_t n = TP_HDR_INTS;
    for (int i = 0; i < n_seqs; i++) {
        int64_t nb = ((int64_t)seqs[i].pos + seqs[i].n_tokens + g->base.block_size - 1) / g->base.block_size;
        n += 4 + (size_t)(seqs[i].n_tokens > 0 ? seqs[i].n_tokens : 0) + (size_t)(nb > 0 ? nb : 0);
    }
    if (n > g->plan_cap) {
        int32_t *p = (int32_t *)realloc(g->plan, n * 4);
        if (!p)
            return sd_diag_set(d, SD_ENOMEM, "tensor parallel: step plan of %zu ints", n);
        g->plan = p;
        g->plan_cap = n;
    }
    int32_t *p = g->plan, *o = p + TP_HDR_INTS;
    for (int i = 0; i < n_seqs; i++) {
        const sd_batch_seq *q = &seqs[i];
        int32_t nt = q->n_tokens > 0 ? q->n_tokens : 0;
        int32_t nb = (int32_t)(((int64_t)q->pos + nt + g->base.block_size - 1) / g->base.block_size);
        nb = nb > 0 ? nb : 0;
        *o++ = q->pos;
        *o++ = nt;
        *o++ = q->all_logits;
        *o++ = nb;
        memcpy(o, q->tokens, (size_t)nt * 4);
        o += nt;
        memcpy(o, q->block_table, (size_t)nb * 4);
        o += nb;
    }
    p[0] = TP_PLAN_STEP;
    p[1] = n_seqs;
    p[2] = (int32_t)(n - TP_HDR_INTS);
    p[3] = 0;
    *ret_ints = n;
    return 0;
}

static int proc_step(sd_tp_backend *g, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d)
{
    size_t n = 0;
    SD_TRY(plan_pack(g, seqs, n_seqs, &n, d));
    for (int r = 1; r < g->o.world; r++) {
        int rc = sd_tp_chan_send(g->fds[r], g->plan, n * 4, g->o.timeout_ms, d);
        if (rc)
            return sd_diag_wrap(d, rc, "tensor parallel: rank %d", r);
    }
    return sd_backend_forward(g->r[0].rb, seqs, n_seqs, logits, d);
}

/* Rank 0 learns the smallest KV pool of the group (the scheduler's block ids must be valid on
 * every rank); followers report theirs, or their set-up error, right after set-up. */
static int proc_exchange_pools(sd_tp_backend *g, int setup_rc, sd_diag *d)
{
    if (g->o.rank > 0) {
        int32_t msg[2] = {setup_rc, g->r[0].rb ? g->r[0].rb->kv_blocks : 0};
        int rc = sd_tp_chan_send(g->fds[0], msg, sizeof msg, g->o.timeout_ms, setup_rc ? NULL : d);
        return setup_rc ? setup_rc : rc;
    }
    int rc = setup_rc;
    for (int r = 1; r < g->o.world; r++) {
        int32_t msg[2];
        int k = sd_tp_chan_recv(g->fds[r], msg, sizeof msg, g->o.timeout_ms, rc ? NULL : d);
        if (!rc && k)
            rc = k;
        else if (!rc && msg[0])
            rc = sd_diag_set(d, msg[0], "tensor parallel: rank %d failed to set up (see its log)", r);
        else if (!rc && msg[1] < g->base.kv_blocks)
            g->base.kv_blocks = msg[1];
    }
    return rc;
}

static int proc_start(sd_tp_backend *g, sd_diag *d)
{
    g->fds = (int *)malloc(sizeof(int) * (size_t)g->o.world);
    if (!g->fds)
        return sd_diag_set(d, SD_ENOMEM, "tensor parallel: sockets");
    for (int r = 0; r < g->o.world; r++)
        g->fds[r] = -1;
    /* the ranks must also agree on what shapes the steps: block size (the plans' block
     * tables) and tokens per step (a step one rank refuses would leave the others waiting) */
    char extra[160];
    snprintf(extra, sizeof extra, "%s|block_size=%d|max_batch_tokens=%d",
             g->m ? sd_model_sparsity(g->m) : g->pattern, g->bo.block_size, g->bo.max_batch_tokens);
    uint64_t hash = sd_tp_config_hash(&g->cfg, g->o.world, extra);
    uint8_t id[SD_TP_ID_BYTES];
    int rc;
    if (g->o.rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&g->id);
        if (r != ncclSuccess)
            return sd_diag_set(d, SD_ENCCL, "tensor parallel: ncclGetUniqueId: %s", ncclGetErrorString(r));
        memcpy(id, &g->id, SD_TP_ID_BYTES);
        sd_tp_listener *l = NULL;
        SD_TRY(sd_tp_boot_listen(&l, g->o.addr, d));
        rc = sd_tp_boot_serve_keep(l, g->o.world, hash, id, g->o.timeout_ms, g->fds, d);
        sd_tp_boot_close(l);
    } else {
        rc = sd_tp_boot_join_keep(g->o.addr, g->o.rank, g->o.world, hash, id, g->o.timeout_ms, &g->fds[0], d);
        memcpy(&g->id, id, SD_TP_ID_BYTES);
    }
    if (rc)
        return rc;
    tp_rank_ctx *c = &g->r[0];
    rc = rank_setup(g, c, d);
    if (!rc)
        g->base.kv_blocks = c->rb->kv_blocks;
    return proc_exchange_pools(g, rc, d);
}

int sd_tp_follow(sd_backend *b, sd_diag *d)
{
    if (!sd_tp_is_tp(b) || ((sd_tp_backend *)b)->o.rank <= 0)
        return sd_diag_set(d, SD_EINVAL,
                           "tensor parallel: only ranks 1..N-1 of the multi-process mode follow");
    sd_tp_backend *g = (sd_tp_backend *)b;
    sd_batch_seq *seqs = NULL;
    int rc = 0, cap = 0;
    while (!rc && !is_dead(g)) {
        int32_t hdr[TP_HDR_INTS];
        /* no deadline while idle: rank 0 dying closes the socket, which ends the wait */
        rc = sd_tp_chan_recv(g->fds[0], hdr, sizeof hdr, -1, d);
        if (rc || hdr[0] == TP_PLAN_QUIT)
            break;
        size_t n = TP_HDR_INTS + (size_t)(hdr[2] > 0 ? hdr[2] : 0);
        if (hdr[0] != TP_PLAN_STEP || hdr[1] < 1 || hdr[2] < 4 * hdr[1]) {
            rc = sd_diag_set(d, SD_EIO, "tensor parallel: a malformed step plan from rank 0");
            break;
        }
        if (n > g->plan_cap) {
            int32_t *p = (int32_t *)realloc(g->plan, n * 4);
            if (!p) {
                rc = sd_diag_set(d, SD_ENOMEM, "tensor parallel: step plan");
                break;
            }
            g->plan = p;
            g->plan_cap = n;
        }
        if (hdr[1] > cap) {
            sd_batch_seq *s = (sd_batch_seq *)realloc(seqs, sizeof *s * (size_t)hdr[1]);
            if (!s) {
                rc = sd_diag_set(d, SD_ENOMEM, "tensor parallel: step plan");
                break;
            }
            seqs = s;
            cap = hdr[1];
        }
        rc = sd_tp_chan_recv(g->fds[0], g->plan + TP_HDR_INTS, (n - TP_HDR_INTS) * 4, g->o.timeout_ms, d);
        const int32_t *p = g->plan + TP_HDR_INTS, *end = g->plan + n;
        for (int i = 0; !rc && i < hdr[1]; i++) {
            if (end - p < 4 || p[1] < 0 || p[3] < 0 || end - p - 4 < (int64_t)p[1] + p[3]) {
                rc = sd_diag_set(d, SD_EIO, "tensor parallel: a truncated step plan from rank 0");
                break;
            }
            seqs[i] = (sd_batch_seq){p[0], p[1], p + 4, p + 4 + p[1], p[2]};
            p += 4 + p[1] + p[3];
        }
        if (!rc)
            rc = sd_backend_forward(g->r[0].rb, seqs, hdr[1], NULL, d);
        if (rc && !group_error(rc))
            rc = 0; /* a request error: rank 0 saw the same and carries on */
    }
    free(seqs);
    if (rc) {
        set_dead(g);
        if (g->r[0].rb)
            sd__cu_backend_abort(g->r[0].rb);
    }
    return rc;
}

/* ---- the backend ---- */

static int tp_forward(sd_backend *b, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d)
{
    sd_tp_backend *g = (sd_tp_backend *)b;
    if (is_dead(g))
        return sd_diag_set(d, SD_ENCCL, "tensor parallel: the group failed earlier (restart the server)");
    if (g->o.rank > 0)
        return sd_diag_set(d, SD_EINVAL, "tensor parallel: rank %d follows rank 0 (sd_tp_follow)", g->o.rank);
    int rc = g->o.rank < 0 ? threads_step(g, seqs, n_seqs, logits, d) : proc_step(g, seqs, n_seqs, logits, d);
    if (group_error(rc)) {
        set_dead(g);
        for (int i = 0; i < g->n_local; i++)
            if (g->r[i].rb)
                sd__cu_backend_abort(g->r[i].rb);
    }
    return rc;
}

/* Sampling needs no collective: rank 0 samples from the logits its last step gathered. */
static int tp_sample(sd_backend *b, const sd_sample_req *reqs, int n, sd_sample_out *out, sd_diag *d)
{
    sd_tp_backend *g = (sd_tp_backend *)b;
    if (is_dead(g))
        return sd_diag_set(d, SD_ENCCL, "tensor parallel: the group failed earlier (restart the server)");
    if (g->o.rank > 0)
        return sd_diag_set(d, SD_EINVAL, "tensor parallel: rank %d follows rank 0 (sd_tp_follow)", g->o.rank);
    return sd_backend_sample(g->r[0].rb, reqs, n, out, d);
}

static void tp_free(sd_backend *b)
{
    sd_tp_backend *g = (sd_tp_backend *)b;
    if (!g)
        return;
    if (g->o.rank < 0 && g->sync_ok) {
        pthread_mutex_lock(&g->mu);
        g->quit = 1;
        pthread_cond_broadcast(&g->cv_go);
        pthread_mutex_unlock(&g->mu);
        for (int i = 0; i < g->n_local; i++)
            if (g->r[i].started)
                pthread_join(g->r[i].th, NULL);
    } else if (g->o.rank >= 0) {
        /* a follower already gone (seen by its closed connection, before any step failed) makes
         * the group failed too: no finalize that would wait for it until the deadline */
        if (sd_tp_failed(b))
            set_dead(g);
        int32_t quit[TP_HDR_INTS] = {TP_PLAN_QUIT, 0, 0, 0};
        for (int r = 0; g->fds && r < g->o.world; r++) {
            if (g->fds[r] < 0)
                continue;
            /* a failed group gets no quit: the bare close makes the followers exit non-zero */
            if (g->o.rank == 0 && r > 0 && !is_dead(g))
                sd_tp_chan_send(g->fds[r], quit, sizeof quit, 1000, NULL);
            close(g->fds[r]);
        }
        if (g->n_local)
            rank_teardown(&g->r[0], !is_dead(g), g->o.timeout_ms);
    }
    if (g->sync_ok) {
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv_go);
        pthread_cond_destroy(&g->cv_done);
    }
    free(g->fds);
    free(g->plan);
    free(g->r);
    free(g);
}

static int tp_create(sd_backend **ret, const sd_model *m, const sd_model_config *cfg, const char *pattern,
                     uint64_t seed, const sd_backend_opts *bo, const sd_tp_opts *opts, sd_diag *d)
{
    sd_tp_opts o;
    if (opts)
        o = *opts;
    else
        sd_tp_opts_default(&o);
    if (o.timeout_ms <= 0)
        o.timeout_ms = 120000;
    if (o.world < 1 || o.rank >= o.world || (o.rank >= 0 && (!o.addr || !o.addr[0])))
        return sd_diag_set(d, SD_EINVAL, "tensor parallel: rank %d of %d%s", o.rank, o.world,
                           o.rank >= 0 && (!o.addr || !o.addr[0]) ? " needs the address of rank 0" : "");
    int ndev = sd_cuda_device_count();
    if (o.rank < 0 && ndev < o.world)
        return sd_diag_set(d, SD_ENODEV, "tensor parallel %d: only %d GPU(s) present", o.world, ndev);
    setenv("NCCL_NVLS_ENABLE", "0", 0); /* NVLink multicast stays off (it fails on these hosts) */
    sd_tp_backend *g = (sd_tp_backend *)calloc(1, sizeof *g);
    if (!g)
        return sd_diag_set(d, SD_ENOMEM, "tensor parallel backend");
    g->base.vt = &tp_vtbl;
    g->base.vocab = cfg->vocab;
    g->o = o;
    g->m = m;
    g->cfg = *cfg;
    g->pattern = pattern;
    g->seed = seed;
    if (bo)
        g->bo = *bo;
    else
        sd_backend_opts_default(&g->bo);
    g->n_local = o.rank < 0 ? o.world : 1;
    g->r = (tp_rank_ctx *)calloc((size_t)g->n_local, sizeof *g->r);
    if (!g->r) {
        free(g);
        return sd_diag_set(d, SD_ENOMEM, "tensor parallel backend");
    }
    for (int i = 0; i < g->n_local; i++) {
        g->r[i].g = g;
        g->r[i].rank = o.rank < 0 ? i : o.rank;
        g->r[i].device = o.rank < 0 ? i : g->bo.device;
    }
    int rc = o.rank < 0 ? threads_start(g, d) : proc_start(g, d);
    if (!rc) {
        const sd_backend *r0 = g->r[0].rb;
        g->base.block_size = r0->block_size;
        g->base.max_batch_tokens = r0->max_batch_tokens;
        g->base.gemm_row_step = r0->gemm_row_step;
        g->base.uniform_spec = r0->uniform_spec; /* the ranks replay graphs of the drafts' shapes */
        if (o.rank < 0) { /* block ids must be valid in every rank's pool */
            g->base.kv_blocks = r0->kv_blocks;
            for (int i = 1; i < g->n_local; i++)
                if (g->r[i].rb->kv_blocks < g->base.kv_blocks)
                    g->base.kv_blocks = g->r[i].rb->kv_blocks;
        }
    }
    if (rc) {
        set_dead(g);
        tp_free(&g->base);
        return rc;
    }
    *ret = &g->base;
    return 0;
}

int sd_tp_backend_init(sd_backend **ret, const sd_model *m, const sd_backend_opts *bo, const sd_tp_opts *o,
                       sd_diag *d)
{
    return tp_create(ret, m, sd_model_cfg(m), NULL, 0, bo, o, d);
}

int sd_tp_backend_init_synthetic(sd_backend **ret, const sd_model_config *cfg, const char *pattern,
                                 uint64_t seed, const sd_backend_opts *bo, const sd_tp_opts *o, sd_diag *d)
{
    return tp_create(ret, NULL, cfg, pattern ? pattern : "dense", seed, bo, o, d);
}
