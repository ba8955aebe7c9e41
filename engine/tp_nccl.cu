/* tp_nccl: the collectives of a tensor-parallel rank over a non-blocking NCCL communicator,
 * with deadlines and ncclCommAbort instead of hangs. */
#include "engine/tp_impl.cuh"

#include <time.h>

#include "engine/tp_boot.h"

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(void)
{
    struct timespec ts = {0, 20000}; /* 20 us: short against a decode step */
    nanosleep(&ts, NULL);
}

/* On the aborter's thread: the caller's device first (the abort frees device memory). */
static void abort_comm(void *comm, int device)
{
    if (device >= 0)
        cudaSetDevice(device);
    ncclCommAbort((ncclComm_t)comm);
}

void sd__tp_abort(sd_tp_rank *t)
{
    if (!t || !t->comm || t->aborted)
        return;
    t->aborted = 1;
    /* through the aborter: its abort flags are set at once, the rest may wait for our own
     * graphs (freed later, with the backend); no thread for it: inline, as before */
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess)
        dev = -1;
    if (!t->aborter || sd_tp_bg_start(t->aborter, abort_comm, t->comm, dev, SD_TP_ABORT_WAIT_MS) < 0)
        ncclCommAbort(t->comm);
}

static int fail(sd_tp_rank *t, const char *what, const char *why, sd_diag *d)
{
    sd__tp_abort(t);
    return sd_diag_set(d, SD_ENCCL, "tensor parallel rank %d/%d: %s: %s (group aborted)", t->plan.rank,
                       t->plan.ranks, what, why);
}

/* The deadline and peer watch of one wait. The control connections are polled once a
 * millisecond (a syscall per fd), not on every 20 us nap. */
typedef struct waiter {
    long long deadline, next_watch;
} waiter;

static waiter wait_start(const sd_tp_rank *t)
{
    long long now = now_ms();
    return (waiter){now + t->timeout_ms, now};
}

/* NULL while the wait may go on, else why it must end. */
static const char *wait_over(const sd_tp_rank *t, waiter *w)
{
    long long now = now_ms();
    if (now > w->deadline)
        return "timed out waiting for the other ranks";
    if (t->watch_fds && now >= w->next_watch) {
        w->next_watch = now + 1;
        for (int i = 0; i < t->n_watch; i++)
            if (sd_tp_chan_closed(t->watch_fds[i], t->watch_unread_too))
                return "a peer process closed its connection (it died or quit)";
    }
    return NULL;
}

int sd__tp_wait_comm(sd_tp_rank *t, const char *what, sd_diag *d)
{
    waiter w = wait_start(t);
    for (;;) {
        ncclResult_t st = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(t->comm, &st);
        if (r != ncclSuccess)
            return fail(t, what, ncclGetErrorString(r), d);
        if (st == ncclSuccess)
            return 0;
        if (st != ncclInProgress)
            return fail(t, what, ncclGetErrorString(st), d);
        const char *why = wait_over(t, &w);
        if (why)
            return fail(t, what, why, d);
        nap();
    }
}

/* Checks the return of an enqueue on a non-blocking communicator. */
static int enqueued(sd_tp_rank *t, ncclResult_t r, const char *what, sd_diag *d)
{
    if (r == ncclSuccess)
        return 0;
    if (r == ncclInProgress)
        return sd__tp_wait_comm(t, what, d);
    return fail(t, what, ncclGetErrorString(r), d);
}

static int usable(sd_tp_rank *t, const char *what, sd_diag *d)
{
    if (t->aborted)
        return sd_diag_set(d, SD_ENCCL, "tensor parallel rank %d: %s: the group was aborted earlier",
                           t->plan.rank, what);
    return 0;
}

int sd__tp_allreduce_sum(sd_tp_rank *t, float *buf, size_t n, cudaStream_t st, sd_diag *d)
{
    if (!t->comm)
        return 0;
    int rc = usable(t, "all-reduce", d);
    return rc ? rc
              : enqueued(t, ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, t->comm, st), "all-reduce", d);
}

int sd__tp_allgather(sd_tp_rank *t, const float *in, float *out, size_t n, cudaStream_t st, sd_diag *d)
{
    if (!t->comm)
        return 0;
    int rc = usable(t, "all-gather", d);
    return rc ? rc : enqueued(t, ncclAllGather(in, out, n, ncclFloat32, t->comm, st), "all-gather", d);
}

int sd__tp_bcast_i32(sd_tp_rank *t, int32_t *dev, size_t n, cudaStream_t st, sd_diag *d)
{
    if (!t->comm)
        return 0;
    int rc = usable(t, "broadcast", d);
    return rc ? rc : enqueued(t, ncclBroadcast(dev, dev, n, ncclInt32, 0, t->comm, st), "broadcast", d);
}

int sd__tp_sync(sd_tp_rank *t, cudaStream_t st, sd_diag *d)
{
    if (!t->comm) {
        cudaError_t e = cudaStreamSynchronize(st);
        return e == cudaSuccess ? 0 : sd_diag_set(d, SD_ECUDA, "cuda: step: %s", cudaGetErrorString(e));
    }
    int rc = usable(t, "step", d);
    if (rc)
        return rc;
    waiter w = wait_start(t);
    for (;;) {
        cudaError_t e = cudaStreamQuery(st);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady) {
            sd__tp_abort(t);
            return sd_diag_set(d, SD_ECUDA, "tensor parallel rank %d: step: %s (group aborted)", t->plan.rank,
                               cudaGetErrorString(e));
        }
        ncclResult_t as = ncclSuccess;
        ncclCommGetAsyncError(t->comm, &as);
        if (as != ncclSuccess && as != ncclInProgress)
            return fail(t, "step", ncclGetErrorString(as), d);
        const char *why = wait_over(t, &w);
        if (why)
            return fail(t, "step", why, d);
        nap();
    }
}
