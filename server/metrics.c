/* metrics: Prometheus counters/histograms behind one mutex, and the text renderer. */
#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_STATUS 500 /* status codes 100..599 */
#define MAX_BUCKETS 24

typedef struct hist {
    const char *name, *help;
    const double *bounds; /* [n] upper bounds, +Inf implied */
    int n;
    uint64_t counts[MAX_BUCKETS + 1]; /* non-cumulative; last = above every bound */
    double sum;
    uint64_t total;
} hist;

static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                     0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
static const double itl_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
                                    0.1,   0.15,   0.2,   0.3,  0.4,   0.5,  0.75,  1.0,  2.5,  5.0};
static const double e2e_bounds[] = {0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,
                                    10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0};

struct sd_metrics {
    pthread_mutex_t mu;
    uint64_t requests[SD_ROUTE_COUNT][N_STATUS];
    uint64_t prompt_tokens, generation_tokens;
    hist ttft, itl, e2e;
    char *(*extra)(void *); /* sd_metrics_set_extra */
    void *extra_ud;
};

static const char *const route_names[SD_ROUTE_COUNT] = {
    "other",  "/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/ready", "/metrics",
    "/admin", "/tokenize",       "/detokenize"};

static void hist_setup(hist *h, const char *name, const char *help, const double *b, int n)
{
    h->name = name;
    h->help = help;
    h->bounds = b;
    h->n = n;
}

int sd_metrics_init(sd_metrics **ret)
{
    sd_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return SD_ENOMEM;
    pthread_mutex_init(&m->mu, NULL);
    hist_setup(&m->ttft, "sparsed_time_to_first_token_seconds",
               "Time from request arrival to the first token.", ttft_bounds,
               (int)(sizeof ttft_bounds / sizeof *ttft_bounds));
    hist_setup(&m->itl, "sparsed_inter_token_latency_seconds",
               "Time between consecutive tokens of a request.", itl_bounds,
               (int)(sizeof itl_bounds / sizeof *itl_bounds));
    hist_setup(&m->e2e, "sparsed_e2e_request_latency_seconds", "Time from request arrival to its last token.",
               e2e_bounds, (int)(sizeof e2e_bounds / sizeof *e2e_bounds));
    *ret = m;
    return 0;
}

void sd_metrics_free(sd_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void sd_metrics_request(sd_metrics *m, sd_metrics_route route, int status)
{
    if (status < 100 || status > 599 || route < 0 || route >= SD_ROUTE_COUNT)
        return;
    pthread_mutex_lock(&m->mu);
    m->requests[route][status - 100]++;
    pthread_mutex_unlock(&m->mu);
}

void sd_metrics_tokens(sd_metrics *m, uint64_t prompt, uint64_t generated)
{
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->generation_tokens += generated;
    pthread_mutex_unlock(&m->mu);
}

static void hist_add(sd_metrics *m, hist *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->bounds[i])
        i++;
    pthread_mutex_lock(&m->mu);
    h->counts[i]++;
    h->sum += v;
    h->total++;
    pthread_mutex_unlock(&m->mu);
}

void sd_metrics_ttft(sd_metrics *m, double s)
{
    hist_add(m, &m->ttft, s);
}
void sd_metrics_itl(sd_metrics *m, double s)
{
    hist_add(m, &m->itl, s);
}
void sd_metrics_e2e(sd_metrics *m, double s)
{
    hist_add(m, &m->e2e, s);
}

typedef struct buf {
    char *p;
    size_t len, cap;
    int oom;
} buf;

static void bprintf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->cap - b->len, fmt, ap); /* NULL+0 is UB */
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n + 256;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static void render_hist(buf *b, const hist *h)
{
    bprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        bprintf(b, "%s_bucket{le=\"%g\"} %llu\n", h->name, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n];
    bprintf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", h->name, (unsigned long long)cum,
            h->name, h->sum, h->name, (unsigned long long)h->total);
}

static void render_counters(buf *b, const sd_metrics *m)
{
    bprintf(b, "# HELP sparsed_http_requests_total HTTP requests answered, by route and status.\n"
               "# TYPE sparsed_http_requests_total counter\n");
    for (int r = 0; r < SD_ROUTE_COUNT; r++)
        for (int s = 0; s < N_STATUS; s++)
            if (m->requests[r][s])
                bprintf(b, "sparsed_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n", route_names[r],
                        s + 100, (unsigned long long)m->requests[r][s]);
    bprintf(b,
            "# HELP sparsed_prompt_tokens_total Prompt tokens of finished requests.\n"
            "# TYPE sparsed_prompt_tokens_total counter\nsparsed_prompt_tokens_total %llu\n"
            "# HELP sparsed_generation_tokens_total Generated tokens.\n"
            "# TYPE sparsed_generation_tokens_total counter\nsparsed_generation_tokens_total %llu\n",
            (unsigned long long)m->prompt_tokens, (unsigned long long)m->generation_tokens);
}

static void render_gauges(buf *b, const sd_engine_stats *st, int ready)
{
    bprintf(b,
            "# HELP sparsed_ready 1 when the model is loaded and the server accepts requests.\n"
            "# TYPE sparsed_ready gauge\nsparsed_ready %d\n",
            ready ? 1 : 0);
    if (!st)
        return;
    double usage = st->kv_blocks_total > 0 ? (double)st->kv_blocks_used / st->kv_blocks_total : 0.0;
    bprintf(
        b,
        "# HELP sparsed_num_requests_running Sequences in the running batch.\n"
        "# TYPE sparsed_num_requests_running gauge\nsparsed_num_requests_running %d\n"
        "# HELP sparsed_num_requests_waiting Sequences waiting to be scheduled.\n"
        "# TYPE sparsed_num_requests_waiting gauge\nsparsed_num_requests_waiting %d\n"
        "# HELP sparsed_kv_cache_usage_ratio Fraction of KV-cache blocks held by sequences.\n"
        "# TYPE sparsed_kv_cache_usage_ratio gauge\nsparsed_kv_cache_usage_ratio %.6f\n"
        "# HELP sparsed_kv_cache_blocks_total KV-cache blocks in the pool.\n"
        "# TYPE sparsed_kv_cache_blocks_total gauge\nsparsed_kv_cache_blocks_total %d\n"
        "# HELP sparsed_engine_steps_total Engine iterations run.\n"
        "# TYPE sparsed_engine_steps_total counter\nsparsed_engine_steps_total %llu\n"
        "# HELP sparsed_preemptions_total Sequences preempted for KV-cache space.\n"
        "# TYPE sparsed_preemptions_total counter\nsparsed_preemptions_total %llu\n"
        "# HELP sparsed_kv_cache_blocks_cached KV-cache blocks only the prefix cache holds (free on "
        "demand).\n"
        "# TYPE sparsed_kv_cache_blocks_cached gauge\nsparsed_kv_cache_blocks_cached %d\n"
        "# HELP sparsed_prefix_cache_queries_total Prompt tokens looked up in the prefix cache.\n"
        "# TYPE sparsed_prefix_cache_queries_total counter\nsparsed_prefix_cache_queries_total %llu\n"
        "# HELP sparsed_prefix_cache_hits_total Prompt tokens found in the prefix cache (not recomputed).\n"
        "# TYPE sparsed_prefix_cache_hits_total counter\nsparsed_prefix_cache_hits_total %llu\n"
        "# HELP sparsed_prefix_cache_evicted_blocks_total Cached KV blocks given back to make room.\n"
        "# TYPE sparsed_prefix_cache_evicted_blocks_total counter\nsparsed_prefix_cache_evicted_blocks_total "
        "%llu\n"
        "# HELP sparsed_prefix_cache_cold_insertion 1 while new cached blocks mostly enter at the eviction "
        "end (prompts cycle through more than the pool holds), 0 under LRU.\n"
        "# TYPE sparsed_prefix_cache_cold_insertion gauge\nsparsed_prefix_cache_cold_insertion %d\n"
        "# HELP sparsed_spec_draft_tokens_total Draft tokens run by speculative decoding.\n"
        "# TYPE sparsed_spec_draft_tokens_total counter\nsparsed_spec_draft_tokens_total %llu\n"
        "# HELP sparsed_spec_accepted_tokens_total Draft tokens the model kept.\n"
        "# TYPE sparsed_spec_accepted_tokens_total counter\nsparsed_spec_accepted_tokens_total %llu\n",
        st->running, st->waiting, usage, (int)st->kv_blocks_total, (unsigned long long)st->steps,
        (unsigned long long)st->preemptions, (int)st->kv_blocks_cached,
        (unsigned long long)st->prefix_query_tokens, (unsigned long long)st->prefix_hit_tokens,
        (unsigned long long)st->prefix_evicted_blocks, st->prefix_cold_rule,
        (unsigned long long)st->spec_draft_tokens, (unsigned long long)st->spec_accepted_tokens);
}

void sd_metrics_set_extra(sd_metrics *m, char *(*fn)(void *ud), void *ud)
{
    m->extra = fn;
    m->extra_ud = ud;
}

char *sd_metrics_render(sd_metrics *m, const sd_engine_stats *st, int ready, size_t *ret_len)
{
    buf b = {0};
    pthread_mutex_lock(&m->mu);
    render_counters(&b, m);
    render_hist(&b, &m->ttft);
    render_hist(&b, &m->itl);
    render_hist(&b, &m->e2e);
    pthread_mutex_unlock(&m->mu);
    render_gauges(&b, st, ready);
    char *extra = m->extra ? m->extra(m->extra_ud) : NULL;
    if (extra)
        bprintf(&b, "%s", extra);
    free(extra);
    if (b.oom || !b.p) {
        free(b.p);
        return NULL;
    }
    *ret_len = b.len;
    return b.p;
}
