/* fuzz_model_config: config.json parsing (engine/model_config.c) on arbitrary text. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/model_config.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *json = malloc(n ? n : 1); /* not NUL-terminated: the parser must honour len */
    if (!json)
        return 0;
    memcpy(json, data, n);
    sd_model_config c;
    sd_diag d;
    (void)sd_model_config_parse(&c, json, n, "fuzz/config.json", &d);
    free(json);
    return 0;
}
