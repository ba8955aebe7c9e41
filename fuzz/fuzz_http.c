/* fuzz_http: the whole HTTP request path of the daemon (libmicrohttpd parsing, routing, auth,
 * body limits, JSON parsing, tokenizing, the engine and the SSE writer) fed raw bytes over a
 * loopback socket. The server runs in-process on the bundled model with a tiny context so that
 * accepted requests finish quickly. Input: the bytes a client sends; then the client half-closes
 * and reads the answer to the end. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/chat_template.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "fuzz/fuzz_util.h"
#include "server/auth.h"
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"

/* The per-process fixture: one daemon for every input. */
typedef struct fixture {
    sd_model *model;
    sd_backend *backend;
    sd_engine *engine;
    sd_chat_template *chat;
    sd_metrics *metrics;
    sd_auth *auth;
    sd_http *http;
    int port;
} fixture;

static fixture fx;

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) < 0)
        return -1;
    close(s);
    return ntohs(a.sin_port);
}

static int setup(const char *dir)
{
    sd_diag d = {0};
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = 1;
    sd_engine_opts eo;
    sd_engine_opts_default(&eo);
    eo.max_seqs = 4;
    eo.max_waiting = 8;
    eo.max_model_len = 24; /* bounds every generation: inputs stay fast */
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (sd_model_open(&fx.model, dir, &d) < 0 || sd_backend_cpu_init(&fx.backend, fx.model, &bo, &d) < 0 ||
        sd_engine_init(&fx.engine, fx.model, fx.backend, &eo, &d) < 0 || sd_metrics_init(&fx.metrics) < 0 ||
        sd_auth_init(&fx.auth) < 0) {
        fprintf(stderr, "fuzz_http: cannot set up %s: %s\n", dir, d.msg);
        return -1;
    }
    if (sd_chat_template_load(&fx.chat, path, NULL) < 0)
        fx.chat = NULL; /* chat then answers 400, which is still a path to fuzz */
    sd_http_opts ho = {.host = "127.0.0.1",
                       .threads = 1,
                       .max_connections = 64,
                       .max_body_bytes = 65536,
                       .request_timeout = 2};
    for (int tries = 0; tries < 5; tries++) {
        ho.port = fx.port = free_port();
        if (fx.port > 0 && sd_http_start(&fx.http, &ho, fx.metrics, fx.auth, &d) == 0)
            break;
    }
    if (!fx.http) {
        fprintf(stderr, "fuzz_http: cannot listen: %s\n", d.msg);
        return -1;
    }
    sd_http_model hm = {.model = fx.model,
                        .engine = fx.engine,
                        .chat_template = fx.chat,
                        .name = "tiny",
                        .max_model_len = 24};
    sd_http_set_model(fx.http, &hm);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    sd_log_set_level(sd_log_level_parse("error"));
    if (setup(sd_fuzz_asset("SD_FUZZ_MODEL", "models/tiny")) < 0)
        exit(2);
    return 0;
}

/* Reads until the server closes (or 5 s pass: a request still incomplete after the half-close
 * is the server's to time out, not a hang of ours). */
static void drain(int s)
{
    char buf[4096];
    struct pollfd p = {.fd = s, .events = POLLIN};
    while (poll(&p, 1, 5000) > 0) {
        ssize_t n = recv(s, buf, sizeof buf, 0);
        if (n <= 0)
            break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)fx.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s < 0)
        return 0;
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
        size_t off = 0;
        while (off < n) {
            ssize_t w = send(s, data + off, n - off, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        shutdown(s, SHUT_WR);
        drain(s);
    }
    close(s);
    return 0;
}
