/* fuzz_tokenizer_json: tokenizer.json loading (engine/tokenizer*.c) on arbitrary files; an
 * accepted tokenizer also encodes and decodes a fixed text. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/tokenizer.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    sd_fuzz_file f;
    if (sd_fuzz_file_open(&f, data, n) < 0)
        return 0;
    sd_tokenizer *t = NULL;
    if (sd_tok_load(&t, f.path, NULL) == 0) {
        static const char text[] = "Hello, world! def f(x):\n\treturn x  # \xc3\xa9\xe2\x82\xac 123";
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (sd_tok_encode(t, text, sizeof text - 1, 1, &ids, &n_ids, NULL) == 0) {
            char *out = NULL;
            size_t out_len = 0;
            if (sd_tok_decode(t, ids, n_ids, 0, &out, &out_len, NULL) == 0)
                free(out);
            free(ids);
        }
        sd_tok_free(t);
    }
    sd_fuzz_file_close(&f);
    return 0;
}
