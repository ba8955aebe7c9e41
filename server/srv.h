/* srv: the daemon's lifecycle on a libuv loop — start listening, load the model in the
 * background (readiness), signals (SIGTERM/SIGINT drain then exit, SIGHUP reload), timers
 * (disconnect reaping, systemd watchdog) and the orderly shutdown. */
#ifndef SD_SRV_H
#define SD_SRV_H

#include "server/conf.h"

/* Runs the daemon until it is told to stop. argc/argv (the serve flags) and default_conf are
 * kept to re-read the config on SIGHUP. Returns the process exit status. */
int sd_srv_run(const sd_conf *c, int argc, char **argv, const char *default_conf);

#endif
