/* fuzz_tokenizer: encoding arbitrary bytes with a real tokenizer (models/tiny by default,
 * $SD_FUZZ_TOKENIZER to pick another), decoding the ids back, and streaming decode. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/tokenizer.h"
#include "fuzz/fuzz_util.h"

static sd_tokenizer *tok; /* loaded once: the fuzzer's per-process fixture */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *path = sd_fuzz_asset("SD_FUZZ_TOKENIZER", "models/tiny/tokenizer.json");
    sd_diag d;
    if (sd_tok_load(&tok, path, &d) < 0) {
        fprintf(stderr,
                "fuzz_tokenizer: cannot load %s (run from the repository root or set "
                "SD_FUZZ_TOKENIZER)\n",
                path);
        exit(2);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = malloc(n ? n : 1);
    if (!text)
        return 0;
    memcpy(text, data, n);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int32_t vocab = sd_tok_vocab_size(tok);
    if (sd_tok_encode(tok, text, n, n & 1, &ids, &n_ids, NULL) == 0) {
        for (size_t i = 0; i < n_ids; i++)
            if (ids[i] < 0 || ids[i] >= vocab)
                abort(); /* every id must name a vocabulary entry */
        char *out = NULL;
        size_t out_len = 0;
        if (sd_tok_decode(tok, ids, n_ids, n & 2, &out, &out_len, NULL) == 0)
            free(out);
        sd_tok_stream s;
        sd_tok_stream_init(&s, tok, 0);
        char buf[256];
        size_t len;
        for (size_t i = 0; i < n_ids; i++)
            if (sd_tok_stream_push(&s, ids[i], buf, sizeof buf, &len) < 0)
                break;
        (void)sd_tok_stream_flush(&s, buf, sizeof buf, &len);
        free(ids);
    }
    /* Raw bytes read as ids (out-of-range ones must be refused, not indexed). */
    if (n >= 4) {
        size_t k = n / 4;
        int32_t *raw = malloc(k * sizeof *raw);
        if (raw) {
            memcpy(raw, data, k * sizeof *raw);
            char *out = NULL;
            size_t out_len = 0;
            if (sd_tok_decode(tok, raw, k, 0, &out, &out_len, NULL) == 0)
                free(out);
            free(raw);
        }
    }
    free(text);
    return 0;
}
