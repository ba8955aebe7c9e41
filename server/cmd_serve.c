/* cmd_serve: the 'serve' subcommand — reads the config and flags, then runs the daemon, or (a
 * rank >= 1 of a multi-process tensor-parallel group) the follower loop that runs the steps
 * rank 0 sends. */
#include "server/cmd.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/model.h"
#include "engine/tp.h"
#include "server/conf.h"
#include "server/log.h"
#include "server/srv.h"

#define SD_DEFAULT_CONFIG "config/sparsed.json"

/* SIGTERM/SIGINT on a follower: rank 0 decides when the group ends (a follower that left
 * first would fail the requests rank 0 is draining), so the first one only says so; a second
 * one exits at once. */
static volatile sig_atomic_t follower_signals;

static void on_follower_signal(int sig)
{
    (void)sig;
    if (follower_signals++)
        _exit(1);
    static const char msg[] = "sparsed: tensor parallel follower: stopping with rank 0 (signal again to "
                              "exit now)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
}

/* A failed follower frees its backend (which waits, with bounds, for its communicator's abort)
 * and exits 1; should a GPU wait still never end, this ends the process after 15 s anyway. */
static void *exit_backstop(void *arg)
{
    (void)arg;
    struct timespec ts = {15, 0};
    while (nanosleep(&ts, &ts) < 0) /* EINTR: sleep the rest */
        ;
    static const char msg[] = "sparsed: tensor parallel follower: the shutdown of the failed group did not "
                              "finish in time: exiting with status 1\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
    return NULL;
}

static void arm_exit_backstop(void)
{
    pthread_t th;
    pthread_attr_t at;
    if (pthread_attr_init(&at))
        return;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, exit_backstop, NULL))
        sd_log_warn(NULL, "no thread to bound the shutdown of the failed group");
    pthread_attr_destroy(&at);
}

/* Rank c->tp_rank >= 1: loads the model, joins rank 0 at c->tp_addr and runs the steps it
 * sends until rank 0 shuts down (exit 0) or the group fails — rank 0 died, a peer timed out
 * (exit 1). The backend options are the ones rank 0 uses (the ranks check they agree). */
static int follow(const sd_conf *c)
{
    sd_log_set_level(sd_log_level_parse(c->log_level));
    sd_log_set_prefix(c->log_priority_prefix);
    signal(SIGPIPE, SIG_IGN); /* a dead rank 0 is an error return, not a signal */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_follower_signal;
    sa.sa_flags = SA_RESTART; /* the blocking waits retry (they also poll with deadlines) */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sd_diag d = {0};
    sd_model *m = NULL;
    sd_backend *b = NULL;
    int rc = sd_model_open(&m, c->model, &d);
    if (rc == 0) {
        sd_backend_opts bo;
        sd_tp_opts to;
        sd_conf_engine_opts(c, &bo, &to);
        sd_log_info(NULL, "tensor parallel rank %d of %d: joining rank 0 at %s (device %d)", c->tp_rank,
                    c->tensor_parallel, c->tp_addr, c->device);
        rc = sd_tp_backend_init(&b, m, &bo, &to, &d);
    }
    if (rc == 0) {
        sd_log_info(NULL, "tensor parallel rank %d of %d: group up, following rank 0", c->tp_rank,
                    c->tensor_parallel);
        rc = sd_tp_follow(b, &d);
    }
    if (rc < 0) {
        sd_log_error(NULL, "tensor parallel rank %d: %s", c->tp_rank, sd_diag_str(&d, rc));
        if (b) /* the group failed after set-up: its teardown must not hold the exit */
            arm_exit_backstop();
    } else
        sd_log_info(NULL, "tensor parallel rank %d: rank 0 shut down; exiting", c->tp_rank);
    sd_backend_free(b);
    sd_model_free(m);
    return rc < 0 ? 1 : 0;
}

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
    rc = c.tp_rank > 0 ? follow(&c) : sd_srv_run(&c, argc, argv, SD_DEFAULT_CONFIG);
    sd_conf_free(&c);
    return rc;
}
