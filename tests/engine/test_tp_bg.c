/* test_tp_bg: the bounded background call the tensor-parallel runtime runs ncclCommAbort
 * through (engine/tp_bg.h) — a call that returns is waited for; one that blocks (like an abort
 * held by live CUDA graphs) leaves the caller free and is waited for again later; one start
 * per handle; the owner may let go first and the thread frees the handle. No GPU needed. */
#include "tests/harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "engine/diag.h"
#include "engine/tp_bg.h"

/* A call that blocks until released, counting its runs and returns. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    atomic_int runs, returned;
} gate;

static void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
    atomic_init(&g->runs, 0);
    atomic_init(&g->returned, 0);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_destroy(gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

static void blocking_call(void *arg, int iarg)
{
    gate *g = arg;
    atomic_fetch_add(&g->runs, 1);
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    atomic_fetch_add(&g->returned, 1);
}

static void quick_call(void *arg, int iarg)
{
    atomic_fetch_add((atomic_int *)arg, iarg); /* iarg reaches the call */
}

static void test_returns(void)
{
    sd_tp_bg *b = NULL;
    REQUIRE(sd_tp_bg_init(&b) == 0);
    CHECK(!sd_tp_bg_started(b));
    CHECK(sd_tp_bg_wait(b, 0) == 1); /* nothing started: nothing to wait for */
    atomic_int n;
    atomic_init(&n, 0);
    CHECK(sd_tp_bg_start(b, quick_call, &n, 1, 60000) == 1);
    CHECK(atomic_load(&n) == 1);
    CHECK(sd_tp_bg_started(b));
    /* one start per handle: a second abort of the same communicator does nothing */
    CHECK(sd_tp_bg_start(b, quick_call, &n, 1, 60000) == 1);
    CHECK(atomic_load(&n) == 1);
    sd_tp_bg_free(b);
    sd_tp_bg_free(NULL);
}

static void test_blocks_then_returns(void)
{
    gate g;
    gate_init(&g);
    sd_tp_bg *b = NULL;
    REQUIRE(sd_tp_bg_init(&b) == 0);
    /* the caller gets control back although the call never returns by itself */
    CHECK(sd_tp_bg_start(b, blocking_call, &g, 0, 50) == 0);
    CHECK(atomic_load(&g.returned) == 0);
    CHECK(sd_tp_bg_wait(b, 0) == 0);
    CHECK(sd_tp_bg_start(b, blocking_call, &g, 0, 0) == 0); /* no second run meanwhile */
    gate_open(&g); /* what the teardown does by destroying the graphs */
    CHECK(sd_tp_bg_wait(b, 60000) == 1);
    CHECK(atomic_load(&g.runs) == 1 && atomic_load(&g.returned) == 1);
    sd_tp_bg_free(b);
    gate_destroy(&g);
}

static void test_owner_lets_go_first(void)
{
    gate g;
    gate_init(&g);
    sd_tp_bg *b = NULL;
    REQUIRE(sd_tp_bg_init(&b) == 0);
    CHECK(sd_tp_bg_start(b, blocking_call, &g, 0, 0) == 0);
    sd_tp_bg_free(b); /* the thread keeps the handle until its call returns (ASan: no leak) */
    gate_open(&g);
    for (int i = 0; i < 60000 && !atomic_load(&g.returned); i++)
        usleep(1000);
    CHECK(atomic_load(&g.returned) == 1); /* the call is past its last use of the gate */
    gate_destroy(&g);
}

int main(void)
{
    RUN(test_returns);
    RUN(test_blocks_then_returns);
    RUN(test_owner_lets_go_first);
    return sd_test_done();
}
