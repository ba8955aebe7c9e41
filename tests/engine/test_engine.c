/* test_engine: the engine thread — submits from several threads at once give the tokens of
 * solo runs, every request gets exactly one final event (also when the engine is freed with
 * requests running), the waiting-queue bound, cancel through the engine, callbacks that call
 * back into the engine.
 * The ASan build runs it for leaks and races on freed memory. */
#include "engine/engine.h"

#include <pthread.h>

#include "engine/model.h"
#include "engine/tokenizer.h"
#include "tests/harness.h"

#define MODEL_DIR "models/tiny"
#define MAXT 64
#define N_THREADS 4
#define PER_THREAD 3
#define GEN 12

static sd_model *M;

/* Final events and tokens, guarded by one lock: callbacks run on the engine thread, the
 * checks on the test thread. */
static pthread_mutex_t MU = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t CV = PTHREAD_COND_INITIALIZER;

typedef struct out {
    uint64_t id;
    int32_t tok[MAXT];
    int n, n_final, after_final, n_error, code;
    sd_finish finish;
    sd_engine *cancel_self_at; /* when set: cancel itself from its 2nd TOKEN callback */
} out;

static void on_event(void *ud, const sd_event *ev)
{
    out *o = ud;
    if (o->cancel_self_at && ev->type == SD_EV_TOKEN && o->n == 1)
        sd_engine_cancel(o->cancel_self_at, ev->req_id); /* re-entering from the engine thread */
    pthread_mutex_lock(&MU);
    if (o->n_final)
        o->after_final++;
    if (ev->type == SD_EV_TOKEN && o->n < MAXT)
        o->tok[o->n++] = ev->token;
    if (ev->type == SD_EV_DONE || ev->type == SD_EV_ERROR) {
        o->n_final++;
        o->finish = ev->finish;
        o->n_error += ev->type == SD_EV_ERROR;
        o->code = ev->code;
        pthread_cond_broadcast(&CV);
    }
    if (ev->type == SD_EV_TOKEN)
        pthread_cond_broadcast(&CV);
    pthread_mutex_unlock(&MU);
}

static void wait_final(out *o, int n)
{
    pthread_mutex_lock(&MU);
    for (int i = 0; i < n; i++)
        while (!o[i].n_final)
            pthread_cond_wait(&CV, &MU);
    pthread_mutex_unlock(&MU);
}

static void wait_tokens(out *o, int n_tokens)
{
    pthread_mutex_lock(&MU);
    while (o->n < n_tokens && !o->n_final)
        pthread_cond_wait(&CV, &MU);
    pthread_mutex_unlock(&MU);
}

static sd_backend *backend_new(void)
{
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = 2;
    bo.kv_blocks = 128;
    sd_backend *b = NULL;
    return sd_backend_cpu_init(&b, M, &bo, NULL) == 0 ? b : NULL;
}

static const char *PROMPTS[] = {
    "import os\n",     "def main():\n", "The server",         "# README\n", "class Foo:", "return x +",
    "for i in range(", "print(",        "from typing import", "async def",  "with open(", "if __name__",
};
static int32_t *IDS[N_THREADS * PER_THREAD], NIDS[N_THREADS * PER_THREAD];

static void params(sd_request_params *p, int i, int32_t max_tokens)
{
    sd_request_params_default(p);
    p->prompt = IDS[i];
    p->n_prompt = NIDS[i];
    p->max_tokens = max_tokens;
    p->sampling.temperature = 0;
    p->ignore_eos = 1;
}

typedef struct submitter {
    sd_engine *e;
    int first; /* requests [first, first + PER_THREAD) */
    out *outs;
    int rc;
} submitter;

static void *submit_thread(void *arg)
{
    submitter *s = arg;
    for (int k = 0; k < PER_THREAD; k++) {
        int i = s->first + k;
        sd_request_params p;
        params(&p, i, GEN);
        int rc = sd_engine_submit(s->e, &p, on_event, &s->outs[i], &s->outs[i].id, NULL);
        if (rc < 0)
            s->rc = rc;
    }
    return NULL;
}

static void test_concurrent_submits(void)
{
    sd_backend *b = backend_new();
    REQUIRE(b);
    sd_engine_opts o;
    sd_engine_opts_default(&o);
    o.max_seqs = 5;
    o.max_batch_tokens = 16; /* chunked prefill mixed with decodes */
    sd_engine *e = NULL;
    REQUIRE(sd_engine_init(&e, M, b, &o, NULL) == 0);
    enum { N = N_THREADS * PER_THREAD };
    static out solo[N], outs[N];
    memset(solo, 0, sizeof solo);
    memset(outs, 0, sizeof outs);
    for (int i = 0; i < N; i++) { /* one at a time: the reference */
        sd_request_params p;
        params(&p, i, GEN);
        REQUIRE(sd_engine_submit(e, &p, on_event, &solo[i], &solo[i].id, NULL) == 0);
        wait_final(&solo[i], 1);
    }
    pthread_t th[N_THREADS];
    submitter sub[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        sub[t] = (submitter){.e = e, .first = t * PER_THREAD, .outs = outs};
        REQUIRE(pthread_create(&th[t], NULL, submit_thread, &sub[t]) == 0);
    }
    for (int t = 0; t < N_THREADS; t++) {
        pthread_join(th[t], NULL);
        CHECK(sub[t].rc == 0);
    }
    wait_final(outs, N);
    for (int i = 0; i < N; i++) {
        CHECK(outs[i].n_final == 1 && outs[i].after_final == 0 && outs[i].finish == SD_FINISH_LENGTH);
        CHECK(outs[i].n == GEN && solo[i].n == GEN);
        CHECK_MSG(memcmp(outs[i].tok, solo[i].tok, sizeof(int32_t) * GEN) == 0,
                  "request %d differs from solo", i);
        for (int j = 0; j < i; j++)
            CHECK(outs[i].id != outs[j].id);
    }
    sd_engine_stats st;
    sd_engine_stats_get(e, &st);
    CHECK(st.running == 0 && st.waiting == 0 && st.kv_blocks_used == 0);
    CHECK(st.generation_tokens == 2ULL * N * GEN);
    sd_engine_free(e);
    sd_backend_free(b);
}

static void test_free_with_running(void)
{
    sd_backend *b = backend_new();
    REQUIRE(b);
    sd_engine_opts o;
    sd_engine_opts_default(&o);
    o.max_seqs = 3;
    sd_engine *e = NULL;
    REQUIRE(sd_engine_init(&e, M, b, &o, NULL) == 0);
    static out outs[6];
    memset(outs, 0, sizeof outs);
    for (int i = 0; i < 6; i++) {
        sd_request_params p;
        params(&p, i, 1000);
        REQUIRE(sd_engine_submit(e, &p, on_event, &outs[i], NULL, NULL) == 0);
    }
    wait_tokens(&outs[0], 2); /* three running, three waiting */
    sd_engine_free(e);
    for (int i = 0; i < 6; i++) {
        CHECK_MSG(outs[i].n_final == 1 && outs[i].n_error == 1, "request %d: %d final events, %d errors", i,
                  outs[i].n_final, outs[i].n_error);
        CHECK(outs[i].code == SD_ECANCEL && outs[i].after_final == 0);
    }
    CHECK(outs[0].n >= 2 && outs[5].n == 0);
    sd_backend_free(b);
}

static void test_cancel(void)
{
    sd_backend *b = backend_new();
    REQUIRE(b);
    sd_engine *e = NULL;
    REQUIRE(sd_engine_init(&e, M, b, NULL, NULL) == 0);
    static out a, c;
    memset(&a, 0, sizeof a);
    memset(&c, 0, sizeof c);
    sd_request_params p;
    params(&p, 0, 1000);
    uint64_t id = 0;
    REQUIRE(sd_engine_submit(e, &p, on_event, &a, &id, NULL) == 0);
    wait_tokens(&a, 3);
    sd_engine_cancel(e, id);
    sd_engine_cancel(e, id + 1000); /* unknown: ignored */
    wait_final(&a, 1);
    CHECK(a.n_final == 1 && a.n_error == 0 && a.finish == SD_FINISH_ABORT && a.n >= 3 && a.n < 1000);
    /* blocks went back before the final event was sent */
    sd_engine_stats st;
    sd_engine_stats_get(e, &st);
    CHECK(st.kv_blocks_used == 0 && st.running == 0 && st.waiting == 0);

    /* a callback that cancels its own request from the engine thread */
    c.cancel_self_at = e;
    params(&p, 1, 1000);
    REQUIRE(sd_engine_submit(e, &p, on_event, &c, NULL, NULL) == 0);
    wait_final(&c, 1);
    CHECK(c.finish == SD_FINISH_ABORT && c.n >= 2 && c.n < 1000 && c.after_final == 0);
    sd_engine_stats_get(e, &st);
    CHECK(st.kv_blocks_used == 0);
    sd_engine_cancel(e, id); /* finished: ignored */
    sd_engine_free(e);
    sd_backend_free(b);
}

/* ---- the queue bound, through the engine (its thread held inside a callback) ---- */

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open, finals;
} gate;

static void on_gate(void *ud, const sd_event *ev)
{
    gate *g = ud;
    pthread_mutex_lock(&g->mu);
    if (ev->type == SD_EV_TOKEN && !g->entered) {
        g->entered = 1;
        pthread_cond_broadcast(&g->cv);
        while (!g->open)
            pthread_cond_wait(&g->cv, &g->mu);
    }
    if (ev->type == SD_EV_DONE || ev->type == SD_EV_ERROR) {
        g->finals++;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
}

static void test_queue_full(void)
{
    sd_backend *b = backend_new();
    REQUIRE(b);
    sd_engine_opts o;
    sd_engine_opts_default(&o);
    o.max_seqs = 1;
    o.max_waiting = 2;
    sd_engine *e = NULL;
    REQUIRE(sd_engine_init(&e, M, b, &o, NULL) == 0);
    gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    sd_request_params p;
    params(&p, 0, 4);
    uint64_t id = 0;
    CHECK(sd_engine_submit(e, &p, on_gate, &g, &id, NULL) == 0);
    pthread_mutex_lock(&g.mu);
    while (!g.entered)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    /* the engine thread sits in the first request's callback: nothing leaves the queue */
    sd_diag d = {0};
    CHECK(sd_engine_submit(e, &p, on_gate, &g, &id, &d) == 0);
    CHECK(sd_engine_submit(e, &p, on_gate, &g, &id, &d) == 0);
    uint64_t id_full = 12345;
    CHECK(sd_engine_submit(e, &p, on_gate, &g, &id_full, &d) == SD_EFULL);
    CHECK(id_full == 12345);
    sd_engine_stats st;
    sd_engine_stats_get(e, &st);
    CHECK(st.waiting == 2 && st.running == 1);
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    while (g.finals < 3)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    sd_engine_free(e);
    CHECK(g.finals == 3);
    sd_backend_free(b);
}

static void test_submit_errors(void)
{
    sd_backend *b = backend_new();
    REQUIRE(b);
    sd_engine *e = NULL;
    REQUIRE(sd_engine_init(&e, M, b, NULL, NULL) == 0);
    sd_request_params p;
    params(&p, 0, 1 << 20);
    sd_diag d = {0};
    uint64_t id = 777;
    CHECK(sd_engine_submit(e, &p, on_event, NULL, &id, &d) == SD_EINVAL && id == 777);
    CHECK_MSG(strstr(d.msg, "max_tokens") != NULL, "message: %s", d.msg);
    p.max_tokens = 4;
    p.n_prompt = 0;
    CHECK(sd_engine_submit(e, &p, on_event, NULL, &id, &d) == SD_EINVAL && strstr(d.msg, "prompt"));
    sd_engine_stats st;
    sd_engine_stats_get(e, &st);
    CHECK(st.steps == 0 && st.kv_blocks_total == 128);
    sd_engine_free(e);
    sd_engine_free(NULL);
    sd_backend_free(b);
}

int main(void)
{
    sd_diag d = {0};
    int rc = sd_model_open(&M, MODEL_DIR, &d);
    if (rc < 0 || !sd_model_tokenizer(M)) {
        fprintf(stderr, "  SKIP: %s: %s\n", MODEL_DIR, sd_diag_str(&d, rc));
        sd_model_free(M);
        return sd_test_done();
    }
    for (int i = 0; i < N_THREADS * PER_THREAD; i++) {
        size_t n = 0;
        if (sd_tok_encode(sd_model_tokenizer(M), PROMPTS[i], strlen(PROMPTS[i]), 1, &IDS[i], &n, NULL) < 0)
            return 1;
        NIDS[i] = (int32_t)n;
    }
    RUN(test_concurrent_submits);
    RUN(test_free_with_running);
    RUN(test_cancel);
    RUN(test_queue_full);
    RUN(test_submit_errors);
    for (int i = 0; i < N_THREADS * PER_THREAD; i++)
        free(IDS[i]);
    sd_model_free(M);
    return sd_test_done();
}
