/* fuzz_server_conf: the daemon's JSON config file (server/conf.c) on arbitrary text; an
 * accepted file must also pass or fail validation cleanly and print. */
#include <stdint.h>
#include <stdio.h>

#include "fuzz/fuzz_util.h"
#include "server/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    sd_fuzz_file f;
    if (sd_fuzz_file_open(&f, data, n) < 0)
        return 0;
    sd_conf c;
    sd_diag d;
    if (sd_conf_init(&c) == 0) {
        if (sd_conf_load_file(&c, f.path, &d) == 0 && sd_conf_validate(&c, &d) == 0) {
            FILE *devnull = fopen("/dev/null", "w");
            if (devnull) {
                sd_conf_print(&c, devnull);
                fclose(devnull);
            }
        }
        sd_conf_free(&c);
    }
    sd_fuzz_file_close(&f);
    return 0;
}
