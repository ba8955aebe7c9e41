/* fuzz_jschema: JSON Schema compiling (engine/jschema.c, with its integer bounds and the regex
 * subset of "pattern": jschema_num.c, jschema_re.c) on arbitrary schemas, strict and lenient, and
 * the validator on arbitrary text. The input is the schema, then a NUL byte, then the text; a
 * compiled schema steps the text byte by byte (each byte on a copy, so a rejected one leaves the
 * state as it was), checking that complete and can_end agree and that nothing follows a complete
 * document. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jschema.h"

static void walk(const sd_jschema *s, const uint8_t *t, size_t n)
{
    uint64_t st[SD_JSCHEMA_STATE_MAX / 8], tmp[SD_JSCHEMA_STATE_MAX / 8];
    size_t size = sd_jschema_state_size(s);
    if (size == 0 || size > sizeof st)
        abort();
    sd_jschema_init(s, st);
    for (size_t i = 0; i < n; i++) {
        memcpy(tmp, st, size);
        if (sd_jschema_step(s, tmp, t[i]) == 0) {
            if (sd_jschema_complete(s, st))
                abort(); /* a complete document takes no more bytes */
            memcpy(st, tmp, size);
        }
        if (sd_jschema_complete(s, st) && !sd_jschema_can_end(s, st))
            abort();
        (void)sd_jschema_in_plain_string(s, st);
        (void)sd_jschema_in_string(s, st);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    const uint8_t *nul = memchr(data, 0, n);
    size_t sn = nul ? (size_t)(nul - data) : n;
    const uint8_t *text = nul ? nul + 1 : data + n;
    size_t tn = nul ? n - sn - 1 : 0;
    for (unsigned flags = 0; flags <= SD_JSCHEMA_LENIENT; flags += SD_JSCHEMA_LENIENT) {
        sd_jschema *s = NULL;
        sd_diag d = {0};
        int rc = sd_jschema_compile_opts(&s, (const char *)data, sn, flags, &d);
        if (rc == 0) {
            walk(s, text, tn);
            sd_jschema_free(s);
        } else if (s || (rc != SD_EINVAL && rc != SD_ENOMEM)) {
            abort(); /* a failed compile names SD_EINVAL (or SD_ENOMEM) and sets nothing */
        }
    }
    return 0;
}
