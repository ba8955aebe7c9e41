/* jobs_impl: what server/jobs.c (store, worker, records) and server/jobs_spec.c (spec
 * validation) share. Private to those files. */
#ifndef SD_JOBS_IMPL_H
#define SD_JOBS_IMPL_H

#include <jansson.h>
#include <stdint.h>

#include "prune/prune.h"

/* A validated prune job: the strings the sd_prune_spec points into. */
typedef struct sd_jobs__spec {
    sd_prune_spec ps;  /* points into the strings below */
    char *model, *out; /* absolute paths */
    char *pattern;
    char *input;     /* prompts/text file (inline prompts are written to a file first) */
    json_t *prompts; /* inline prompts, or NULL */
    int activate;
    int64_t mem_estimate; /* bytes */
} sd_jobs__spec;

/* Checks `in` field by field; on success fills *s (free with sd_jobs__spec_free) and returns a
 * normalised copy of the spec (defaults filled in) in *ret_norm. On failure SD_EINVAL with
 * *ret_param naming the field. */
int sd_jobs__spec_parse(json_t *in, const char *default_model, int64_t memory_budget, sd_jobs__spec *s,
                        json_t **ret_norm, const char **ret_param, sd_diag *d);
void sd_jobs__spec_free(sd_jobs__spec *s);

/* Rough peak memory of a prune job on the CPU: fp32 weights, the Hessians held at once, the
 * pruned copies. */
int64_t sd_jobs__mem_estimate(const char *model_dir, int sequential, sd_diag *d);

#endif
