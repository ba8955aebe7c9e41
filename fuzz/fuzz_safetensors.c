/* fuzz_safetensors: the safetensors header parser and its bounds checks (engine/safetensors.c)
 * on arbitrary files; every tensor of an accepted file is read end to end. */
#include <stdint.h>

#include "engine/safetensors.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    sd_fuzz_file f;
    if (sd_fuzz_file_open(&f, data, n) < 0)
        return 0;
    sd_st_file *st = NULL;
    if (sd_st_open(&st, f.path, NULL) == 0) {
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < sd_st_count(st); i++) {
            const sd_tensor_view *v = sd_st_at(st, i);
            const uint8_t *p = v->data;
            for (size_t b = 0; b < v->nbytes; b++) /* an out-of-bounds view faults here */
                sink ^= p[b];
            if (sd_st_find(st, v->name) == NULL)
                abort();
        }
        (void)sd_st_metadata(st, "format");
        (void)sink;
        sd_st_free(st);
    }
    sd_fuzz_file_close(&f);
    return 0;
}
