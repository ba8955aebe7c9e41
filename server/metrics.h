/* metrics: the daemon's Prometheus counters and histograms (requests by route and status,
 * token counters, TTFT / inter-token / end-to-end latency), rendered in text format 0.0.4.
 * Every function is thread-safe (HTTP threads and the engine thread record concurrently). */
#ifndef SD_METRICS_H
#define SD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

typedef struct sd_metrics sd_metrics;

typedef enum sd_metrics_route {
    SD_ROUTE_OTHER = 0,
    SD_ROUTE_COMPLETIONS,
    SD_ROUTE_CHAT,
    SD_ROUTE_MODELS,
    SD_ROUTE_HEALTH,
    SD_ROUTE_READY,
    SD_ROUTE_METRICS,
    SD_ROUTE_ADMIN, /* /admin/... (server/admin.c) */
    SD_ROUTE_TOKENIZE,
    SD_ROUTE_DETOKENIZE,
    SD_ROUTE_COUNT
} sd_metrics_route;

int sd_metrics_init(sd_metrics **ret);
void sd_metrics_free(sd_metrics *m);

void sd_metrics_request(sd_metrics *m, sd_metrics_route route, int status);
void sd_metrics_tokens(sd_metrics *m, uint64_t prompt, uint64_t generated);
void sd_metrics_ttft(sd_metrics *m, double seconds);
void sd_metrics_itl(sd_metrics *m, double seconds);
void sd_metrics_e2e(sd_metrics *m, double seconds);

/* Adds text owned by another module (the admin API's job and model gauges) to every render:
 * fn returns a malloc'd string (or NULL) and runs on the rendering thread. Set it before
 * the server starts answering; ud outlives the metrics. */
void sd_metrics_set_extra(sd_metrics *m, char *(*fn)(void *ud), void *ud);

/* Renders everything; `st` (engine gauges) may be NULL before the model is loaded.
 * Returns a malloc'd NUL-terminated text or NULL on allocation failure. */
char *sd_metrics_render(sd_metrics *m, const sd_engine_stats *st, int ready, size_t *ret_len);

#endif
