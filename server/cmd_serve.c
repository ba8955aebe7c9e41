/* cmd_serve: the 'serve' subcommand — reads the config and flags, then runs the daemon. */
#include "server/cmd.h"

#include <stdio.h>

#include "server/conf.h"
#include "server/srv.h"

#define SD_DEFAULT_CONFIG "config/sparsed.json"

int sd_cmd_serve(int argc, char **argv)
{
    /* argv[0] is "serve" */
    argc--;
    argv++;
    sd_conf_meta meta;
    sd_diag d = {0};
    if (sd_conf_scan_meta(argc, argv, &meta, &d) < 0) {
        fprintf(stderr, "sparsed serve: %s\n", d.msg);
        return 2;
    }
    if (meta.help) {
        sd_conf_print_help(stdout);
        return 0;
    }
    sd_conf c;
    int rc = sd_conf_init(&c);
    if (rc == 0)
        rc = sd_conf_load(&c, argc, argv, SD_DEFAULT_CONFIG, &d);
    if (rc < 0) {
        fprintf(stderr, "sparsed serve: %s\n", sd_diag_str(&d, rc));
        sd_conf_free(&c);
        return 2;
    }
    if (meta.print_config) {
        sd_conf_print(&c, stdout);
        sd_conf_free(&c);
        return 0;
    }
    rc = sd_srv_run(&c, argc, argv, SD_DEFAULT_CONFIG);
    sd_conf_free(&c);
    return rc;
}
