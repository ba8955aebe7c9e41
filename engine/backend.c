/* backend: defaults shared by every backend's options. */
#include "engine/backend.h"

#include <string.h>

void sd_backend_opts_default(sd_backend_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n_threads = 0;   /* all online cores */
    o->block_size = 16; /* tokens per KV block */
    o->kv_blocks = 0;   /* backend picks: see sd_backend_cpu_init / the CUDA backend */
    o->kv_memory_fraction = 0.9;
    o->max_batch_tokens = 2048;
    o->device = 0;
}
