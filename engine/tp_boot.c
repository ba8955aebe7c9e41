/* tp_boot: TCP bootstrap of a multi-process tensor-parallel group (rank 0 hands out the
 * NCCL unique id), with deadlines on every wait. */
#include "tp_boot.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TP_MAGIC 0x50544453u /* "SDTP" */
#define TP_VERSION 1u
#define HELLO_BYTES 24
#define MSG_BYTES 128
#define REPLY_BYTES (8 + SD_TP_ID_BYTES + MSG_BYTES)
#define MAX_WORLD 1024

struct sd_tp_listener {
    int fd;
    int port;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

/* Splits "host:port" (the last colon; "[v6]:port" brackets stripped). */
static int parse_addr(const char *addr, char *host, size_t cap, char *port, size_t pcap, sd_diag *d)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (!colon || colon == addr || !colon[1] || strlen(colon + 1) >= pcap)
        return sd_diag_set(d, SD_EINVAL, "tensor parallel: address '%s' is not host:port", addr ? addr : "");
    const char *h = addr;
    size_t hl = (size_t)(colon - addr);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']')
        h++, hl -= 2;
    if (hl >= cap)
        return sd_diag_set(d, SD_EINVAL, "tensor parallel: host of '%s' is too long", addr);
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535)
        return sd_diag_set(d, SD_EINVAL, "tensor parallel: port of '%s' is not 0..65535", addr);
    memcpy(host, h, hl);
    host[hl] = 0;
    snprintf(port, pcap, "%ld", p);
    return 0;
}

static int resolve(const char *addr, int passive, struct addrinfo **ret, sd_diag *d)
{
    char host[256], port[16];
    int rc = parse_addr(addr, host, sizeof host, port, sizeof port, d);
    if (rc)
        return rc;
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    int g = getaddrinfo(host, port, &hints, ret);
    if (g)
        return sd_diag_set(d, SD_EIO, "tensor parallel: cannot resolve '%s': %s", addr, gai_strerror(g));
    return 0;
}

/* Waits until fd is ready for `events` or the deadline passes: 1 ready, 0 timed out, <0 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* Reads/writes exactly n bytes on a non-blocking fd before the deadline: 0, or SD_EIO. */
static int io_full(int fd, void *buf, size_t n, int writing, int64_t deadline, const char *what, sd_diag *d)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = writing ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL)
                            : recv(fd, (char *)buf + done, n - done, 0);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if (k == 0)
            return sd_diag_set(d, SD_EIO, "tensor parallel: %s: connection closed by the peer", what);
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return sd_diag_set(d, SD_EIO, "tensor parallel: %s: %s", what, strerror(errno));
        int w = wait_fd(fd, writing ? POLLOUT : POLLIN, deadline);
        if (w <= 0)
            return sd_diag_set(d, SD_EIO, "tensor parallel: %s: %s", what, w ? strerror(errno) : "timed out");
    }
    return 0;
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int sd_tp_boot_listen(sd_tp_listener **ret, const char *addr, sd_diag *d)
{
    struct addrinfo *ai = NULL;
    int rc = resolve(addr, 1, &ai, d);
    if (rc)
        return rc;
    int fd = -1, err = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0 && set_nonblock(fd) == 0)
            break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return sd_diag_set(d, SD_EIO, "tensor parallel: cannot listen on %s: %s", addr, strerror(err));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    sd_tp_listener *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        return sd_diag_set(d, SD_ENOMEM, "tensor parallel: listener");
    }
    l->fd = fd;
    l->port = port;
    *ret = l;
    return 0;
}

int sd_tp_boot_port(const sd_tp_listener *l)
{
    return l ? l->port : 0;
}

void sd_tp_boot_close(sd_tp_listener *l)
{
    if (!l)
        return;
    close(l->fd);
    free(l);
}

/* Sends a reply (status 0 with the id, or a refusal with a message); best effort for refusals. */
static int send_reply(int fd, int status, const uint8_t *id, const char *msg, int64_t deadline, sd_diag *d)
{
    uint8_t r[REPLY_BYTES] = {0};
    put_u32(r, TP_MAGIC);
    put_u32(r + 4, (uint32_t)status);
    if (id)
        memcpy(r + 8, id, SD_TP_ID_BYTES);
    if (msg)
        snprintf((char *)r + 8 + SD_TP_ID_BYTES, MSG_BYTES, "%s", msg);
    return io_full(fd, r, sizeof r, 1, deadline, "sending the group id", d);
}

/* Reads one hello and checks it; returns the joining rank (>0) or a negative code, with the
 * refusal reason in why (already sent to the peer when it could be). */
static int take_hello(int fd, int world, uint64_t hash, const int *fds, int64_t deadline, char *why,
                      size_t cap)
{
    uint8_t h[HELLO_BYTES];
    sd_diag d = {0};
    /* A hello must arrive promptly once connected; a silent peer is dropped. */
    int64_t dl = now_ms() + 2000 < deadline ? now_ms() + 2000 : deadline;
    if (io_full(fd, h, sizeof h, 0, dl, "reading a hello", &d)) {
        snprintf(why, cap, "%.200s", d.msg);
        return SD_EIO;
    }
    int rank = (int)get_u32(h + 8), w = (int)get_u32(h + 12);
    uint64_t hh = get_u64(h + 16);
    int code = SD_EINVAL;
    if (get_u32(h) != TP_MAGIC || get_u32(h + 4) != TP_VERSION)
        snprintf(why, cap, "a peer that is not a sparsed rank of protocol version %u", TP_VERSION);
    else if (w != world)
        snprintf(why, cap, "rank %d has world size %d, rank 0 has %d", rank, w, world);
    else if (hh != hash)
        snprintf(why, cap,
                 "rank %d has config hash %016llx, rank 0 has %016llx (a different model or options)", rank,
                 (unsigned long long)hh, (unsigned long long)hash);
    else if (rank < 1 || rank >= world)
        snprintf(why, cap, "rank %d is out of range 1..%d", rank, world - 1);
    else if (fds[rank] >= 0)
        snprintf(why, cap, "rank %d joined twice", rank);
    else
        return rank;
    send_reply(fd, code, NULL, why, dl, NULL);
    return code;
}

/* Names the ranks still missing into buf. */
static void missing_ranks(const int *fds, int world, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = 0;
    for (int r = 1; r < world && o + 12 < cap; r++)
        if (fds[r] < 0)
            o += (size_t)snprintf(buf + o, cap - o, "%s%d", o ? "," : "", r);
}

int sd_tp_boot_serve(sd_tp_listener *l, int world, uint64_t cfg_hash, const uint8_t id[SD_TP_ID_BYTES],
                     int timeout_ms, sd_diag *d)
{
    return sd_tp_boot_serve_keep(l, world, cfg_hash, id, timeout_ms, NULL, d);
}

int sd_tp_boot_serve_keep(sd_tp_listener *l, int world, uint64_t cfg_hash, const uint8_t id[SD_TP_ID_BYTES],
                          int timeout_ms, int *fds_out, sd_diag *d)
{
    if (world < 1 || world > MAX_WORLD)
        return sd_diag_set(d, SD_EINVAL, "tensor parallel: world size %d is not 1..%d", world, MAX_WORLD);
    int *fds = malloc(sizeof *fds * (size_t)world);
    if (!fds)
        return sd_diag_set(d, SD_ENOMEM, "tensor parallel: bootstrap");
    for (int r = 0; r < world; r++)
        fds[r] = -1;
    int64_t deadline = now_ms() + timeout_ms;
    int joined = 1, rc = 0;
    char why[256] = "";
    while (joined < world) {
        int w = wait_fd(l->fd, POLLIN, deadline);
        if (w <= 0)
            break;
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        int rank = take_hello(fd, world, cfg_hash, fds, deadline, why, sizeof why);
        if (rank > 0) {
            fds[rank] = fd;
            joined++;
        } else {
            close(fd);
        }
    }
    if (joined < world) {
        char miss[256];
        missing_ranks(fds, world, miss, sizeof miss);
        rc = sd_diag_set(d, SD_EIO,
                         "tensor parallel: timed out after %d ms waiting for rank(s) %s to join%s%s",
                         timeout_ms, miss, why[0] ? "; last refusal: " : "", why);
    }
    for (int r = 1; r < world; r++) {
        if (fds[r] < 0)
            continue;
        /* Each joined rank gets a short grace to read its reply even at the deadline. */
        int64_t dl = now_ms() + 2000;
        int src = rc ? send_reply(fds[r], SD_EIO, NULL, "rank 0 gave up: the group is incomplete", dl, NULL)
                     : send_reply(fds[r], 0, id, "", dl, d);
        if (src && !rc)
            rc = sd_diag_wrap(d, src, "rank %d", r);
    }
    for (int r = 0; r < world; r++) {
        if (fds_out && !rc) {
            fds_out[r] = fds[r];
        } else if (fds[r] >= 0) {
            close(fds[r]);
        }
    }
    free(fds);
    return rc;
}

/* One connect attempt before the deadline: the fd, or -1 (refused/unreachable: try again). */
static int try_connect(const struct addrinfo *ai, int64_t deadline)
{
    for (const struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            return fd;
        if (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 1) {
            int err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
                return fd;
        }
        close(fd);
    }
    return -1;
}

int sd_tp_boot_join(const char *addr, int rank, int world, uint64_t cfg_hash, uint8_t id_out[SD_TP_ID_BYTES],
                    int timeout_ms, sd_diag *d)
{
    return sd_tp_boot_join_keep(addr, rank, world, cfg_hash, id_out, timeout_ms, NULL, d);
}

int sd_tp_boot_join_keep(const char *addr, int rank, int world, uint64_t cfg_hash,
                         uint8_t id_out[SD_TP_ID_BYTES], int timeout_ms, int *fd_out, sd_diag *d)
{
    if (rank < 1 || rank >= world)
        return sd_diag_set(d, SD_EINVAL, "tensor parallel: rank %d of %d cannot join (rank 0 serves)", rank,
                           world);
    struct addrinfo *ai = NULL;
    int rc = resolve(addr, 0, &ai, d);
    if (rc)
        return rc;
    int64_t deadline = now_ms() + timeout_ms;
    int fd = -1;
    while ((fd = try_connect(ai, deadline)) < 0 && now_ms() < deadline) {
        struct timespec ts = {0, 50 * 1000000}; /* rank 0 may not be listening yet */
        nanosleep(&ts, NULL);
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return sd_diag_set(d, SD_EIO,
                           "tensor parallel: rank %d: timed out after %d ms connecting to rank 0 at %s", rank,
                           timeout_ms, addr);
    uint8_t h[HELLO_BYTES], r[REPLY_BYTES];
    put_u32(h, TP_MAGIC);
    put_u32(h + 4, TP_VERSION);
    put_u32(h + 8, (uint32_t)rank);
    put_u32(h + 12, (uint32_t)world);
    put_u64(h + 16, cfg_hash);
    rc = io_full(fd, h, sizeof h, 1, deadline, "sending the hello to rank 0", d);
    if (!rc)
        rc = io_full(fd, r, sizeof r, 0, deadline, "waiting for rank 0 to send the group id", d);
    if (rc || !fd_out)
        close(fd);
    if (rc)
        return rc;
    int status = (int)get_u32(r + 4);
    r[REPLY_BYTES - 1] = 0;
    if ((get_u32(r) != TP_MAGIC || status) && fd_out)
        close(fd);
    if (get_u32(r) != TP_MAGIC)
        return sd_diag_set(d, SD_EIO, "tensor parallel: %s did not answer as a sparsed rank 0", addr);
    if (status)
        return sd_diag_set(d, status < 0 ? status : SD_EIO, "tensor parallel: rank 0 refused rank %d: %s",
                           rank, (const char *)r + 8 + SD_TP_ID_BYTES);
    memcpy(id_out, r + 8, SD_TP_ID_BYTES);
    if (fd_out)
        *fd_out = fd;
    return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint64_t sd_tp_config_hash(const sd_model_config *cfg, int world, const char *extra)
{
    int32_t f[] = {(int32_t)cfg->arch,
                   cfg->hidden,
                   cfg->n_layers,
                   cfg->n_heads,
                   cfg->n_kv_heads,
                   cfg->head_dim,
                   cfg->intermediate,
                   cfg->vocab,
                   cfg->max_pos,
                   cfg->tie_embeddings,
                   cfg->qkv_bias,
                   cfg->qk_norm,
                   world,
                   (int32_t)cfg->rope_kind,
                   cfg->sliding_window,
                   cfg->window_layer0};
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        uint8_t b[4];
        put_u32(b, (uint32_t)f[i]);
        h = fnv(h, b, 4);
    }
    if (extra)
        h = fnv(h, extra, strlen(extra));
    return h;
}

int sd_tp_chan_send(int fd, const void *buf, size_t n, int timeout_ms, sd_diag *d)
{
    return io_full(fd, (void *)buf, n, 1, now_ms() + timeout_ms, "sending a step plan", d);
}

int sd_tp_chan_recv(int fd, void *buf, size_t n, int timeout_ms, sd_diag *d)
{
    int64_t deadline = timeout_ms < 0 ? INT64_MAX / 2 : now_ms() + timeout_ms;
    return io_full(fd, buf, n, 0, deadline, "receiving a step plan", d);
}

int sd_tp_chan_closed(int fd, int unread_too)
{
    if (fd < 0)
        return 0;
    /* POLLERR: the connection failed (reset); POLLRDHUP/POLLHUP: the peer shut its end, which
     * counts once its last bytes are read (POLLIN is also set at end of stream, so the unread
     * byte count tells a pending message from a bare close). */
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    int r, unread = 0;
    do
        r = poll(&p, 1, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return 0;
    if (p.revents & (POLLERR | POLLNVAL))
        return 1;
    if (!(p.revents & (POLLRDHUP | POLLHUP)))
        return 0;
    return unread_too || (ioctl(fd, FIONREAD, &unread) == 0 && unread == 0);
}
