/* test_tp_bootstrap: the TCP bootstrap of a tensor-parallel group with N processes (fork) on
 * 127.0.0.1 passing random 128-byte ids — a full group, a join that starts before rank 0
 * listens, refused joins (config hash, world size, duplicate rank) and timeouts. No GPU. */
#include "engine/tp_boot.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"

/* What a child rank reports back through its pipe. */
typedef struct child_report {
    int rc;
    char msg[SD_DIAG_MSG_MAX];
    uint8_t id[SD_TP_ID_BYTES];
} child_report;

typedef struct child {
    pid_t pid;
    int fd; /* read end */
} child;

static void random_id(uint8_t *id)
{
    int fd = open("/dev/urandom", O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, id, SD_TP_ID_BYTES) : -1;
    if (fd >= 0)
        close(fd);
    if (n != SD_TP_ID_BYTES) /* fall back to a time-seeded stream */
        for (int i = 0; i < SD_TP_ID_BYTES; i++)
            id[i] = (uint8_t)((uint64_t)time(NULL) * 2654435761u >> (i % 24));
}

/* Forks a rank that joins addr after delay_ms and writes its report to a pipe. */
static child spawn_join(const char *addr, int rank, int world, uint64_t hash, int timeout_ms, int delay_ms)
{
    child c = {-1, -1};
    int p[2];
    if (pipe(p))
        return c;
    fflush(stderr);
    c.pid = fork();
    if (c.pid == 0) {
        close(p[0]);
        if (delay_ms) {
            struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
        child_report r = {0};
        sd_diag d = {0};
        r.rc = sd_tp_boot_join(addr, rank, world, hash, r.id, timeout_ms, &d);
        memcpy(r.msg, d.msg, sizeof r.msg);
        ssize_t w = write(p[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(p[1]);
    c.fd = p[0];
    return c;
}

static int collect(child c, child_report *r)
{
    memset(r, 0, sizeof *r);
    r->rc = 1;
    size_t got = 0;
    while (c.fd >= 0 && got < sizeof *r) {
        ssize_t k = read(c.fd, (char *)r + got, sizeof *r - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    if (c.fd >= 0)
        close(c.fd);
    int st = 0;
    if (c.pid > 0)
        waitpid(c.pid, &st, 0);
    return got == sizeof *r && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int listen_local(sd_tp_listener **l, char *addr, size_t cap)
{
    sd_diag d = {0};
    int rc = sd_tp_boot_listen(l, "127.0.0.1:0", &d);
    if (rc)
        fprintf(stderr, "  listen: %s\n", d.msg);
    else
        snprintf(addr, cap, "127.0.0.1:%d", sd_tp_boot_port(*l));
    return rc;
}

/* A full group of `world` processes: every rank receives rank 0's random id. */
static void group(int world)
{
    sd_tp_listener *l = NULL;
    char addr[64];
    REQUIRE(listen_local(&l, addr, sizeof addr) == 0);
    uint8_t id[SD_TP_ID_BYTES];
    random_id(id);
    uint64_t hash = 0x1234abcd5678ef00ull ^ (uint64_t)world;
    child c[8];
    for (int r = 1; r < world; r++)
        c[r] = spawn_join(addr, r, world, hash, 10000, 0);
    sd_diag d = {0};
    int rc = sd_tp_boot_serve(l, world, hash, id, 10000, &d);
    CHECK_MSG(rc == 0, "serve: %s", d.msg);
    for (int r = 1; r < world; r++) {
        child_report rep;
        CHECK(collect(c[r], &rep) == 0);
        CHECK_MSG(rep.rc == 0, "rank %d: %s", r, rep.msg);
        CHECK_MSG(memcmp(rep.id, id, SD_TP_ID_BYTES) == 0, "rank %d got another id", r);
    }
    sd_tp_boot_close(l);
}

static void test_group_2(void)
{
    group(2);
}

static void test_group_4(void)
{
    group(4);
}

static void test_group_8(void)
{
    group(8);
}

/* A rank started before rank 0 listens keeps retrying until it can connect. */
static void test_join_before_listen(void)
{
    sd_tp_listener *l = NULL;
    char addr[64];
    REQUIRE(listen_local(&l, addr, sizeof addr) == 0);
    sd_tp_boot_close(l); /* the port is free again: the child finds nobody at first */
    child c = spawn_join(addr, 1, 2, 42, 10000, 0);
    struct timespec ts = {0, 300 * 1000000};
    nanosleep(&ts, NULL);
    sd_diag d = {0};
    int rc = sd_tp_boot_listen(&l, addr, &d);
    if (rc) {
        child_report rep;
        collect(c, &rep);
        SKIP("port %s was taken meanwhile: %s", addr, d.msg);
    }
    uint8_t id[SD_TP_ID_BYTES];
    random_id(id);
    CHECK_MSG(sd_tp_boot_serve(l, 2, 42, id, 10000, &d) == 0, "%s", d.msg);
    child_report rep;
    CHECK(collect(c, &rep) == 0);
    CHECK_MSG(rep.rc == 0, "%s", rep.msg);
    CHECK(memcmp(rep.id, id, SD_TP_ID_BYTES) == 0);
    sd_tp_boot_close(l);
}

/* A rank with another config hash is refused with a message saying so; rank 0 then times
 * out naming the missing rank and the refusal; the good rank hears the group is incomplete. */
static void test_refused_hash(void)
{
    sd_tp_listener *l = NULL;
    char addr[64];
    REQUIRE(listen_local(&l, addr, sizeof addr) == 0);
    child good = spawn_join(addr, 1, 3, 7, 10000, 0);
    child bad = spawn_join(addr, 2, 3, 8, 10000, 0);
    uint8_t id[SD_TP_ID_BYTES];
    random_id(id);
    sd_diag d = {0};
    int rc = sd_tp_boot_serve(l, 3, 7, id, 1500, &d);
    CHECK(rc == SD_EIO);
    CHECK_MSG(strstr(d.msg, "rank(s) 2") && strstr(d.msg, "config hash"), "%s", d.msg);
    child_report rep;
    CHECK(collect(bad, &rep) == 0);
    CHECK(rep.rc == SD_EINVAL);
    CHECK_MSG(strstr(rep.msg, "config hash") && strstr(rep.msg, "refused rank 2"), "%s", rep.msg);
    CHECK(collect(good, &rep) == 0);
    CHECK(rep.rc == SD_EIO);
    CHECK_MSG(strstr(rep.msg, "incomplete"), "%s", rep.msg);
    sd_tp_boot_close(l);
}

/* World-size mismatch and a rank joining twice are refused; the group still forms from the
 * ranks that match. */
static void test_refused_world_and_duplicate(void)
{
    sd_tp_listener *l = NULL;
    char addr[64];
    REQUIRE(listen_local(&l, addr, sizeof addr) == 0);
    child wrong = spawn_join(addr, 1, 4, 9, 10000, 0);
    child first = spawn_join(addr, 1, 3, 9, 10000, 0);
    child_report rep;
    uint8_t id[SD_TP_ID_BYTES];
    random_id(id);
    child second = spawn_join(addr, 2, 3, 9, 10000, 400);
    sd_diag d = {0};
    CHECK_MSG(sd_tp_boot_serve(l, 3, 9, id, 10000, &d) == 0, "%s", d.msg);
    CHECK(collect(wrong, &rep) == 0);
    CHECK(rep.rc == SD_EINVAL);
    CHECK_MSG(strstr(rep.msg, "world size 4"), "%s", rep.msg);
    CHECK(collect(first, &rep) == 0);
    CHECK_MSG(rep.rc == 0 && memcmp(rep.id, id, SD_TP_ID_BYTES) == 0, "%s", rep.msg);
    CHECK(collect(second, &rep) == 0);
    CHECK_MSG(rep.rc == 0 && memcmp(rep.id, id, SD_TP_ID_BYTES) == 0, "%s", rep.msg);
    sd_tp_boot_close(l);

    /* the same rank twice: the second is refused, and the group of 2 is already complete */
    REQUIRE(listen_local(&l, addr, sizeof addr) == 0);
    child a = spawn_join(addr, 1, 3, 9, 10000, 0);
    child b = spawn_join(addr, 1, 3, 9, 10000, 300);
    child c2 = spawn_join(addr, 2, 3, 9, 10000, 700);
    CHECK_MSG(sd_tp_boot_serve(l, 3, 9, id, 10000, &d) == 0, "%s", d.msg);
    /* whichever of the two came first joined; the other was refused */
    child_report ra, rb;
    CHECK(collect(a, &ra) == 0 && collect(b, &rb) == 0);
    const child_report *ok = ra.rc == 0 ? &ra : &rb, *no = ra.rc == 0 ? &rb : &ra;
    CHECK(ok->rc == 0 && memcmp(ok->id, id, SD_TP_ID_BYTES) == 0);
    CHECK_MSG(no->rc == SD_EINVAL && strstr(no->msg, "joined twice"), "%d %s", no->rc, no->msg);
    CHECK(collect(c2, &rep) == 0 && rep.rc == 0);
    sd_tp_boot_close(l);
}

/* The kept connections carry messages both ways; a follower waiting without a deadline sees
 * rank 0 close its end as an error (never a hang). */
static void test_channel(void)
{
    sd_tp_listener *l = NULL;
    char addr[64];
    REQUIRE(listen_local(&l, addr, sizeof addr) == 0);
    int world = 3;
    child c[3];
    for (int r = 1; r < world; r++) {
        int p[2];
        REQUIRE(pipe(p) == 0);
        fflush(stderr);
        c[r].pid = fork();
        if (c[r].pid == 0) {
            close(p[0]);
            child_report rep = {0};
            sd_diag d = {0};
            int fd = -1;
            uint8_t msg[64];
            rep.rc = sd_tp_boot_join_keep(addr, r, world, 5, rep.id, 10000, &fd, &d);
            if (!rep.rc)
                rep.rc = sd_tp_chan_recv(fd, msg, sizeof msg, 10000, &d);
            if (!rep.rc)
                rep.rc = sd_tp_chan_send(fd, msg, sizeof msg, 10000, &d);
            /* rank 0 closes after the echo: the wait without deadline must end with an error */
            int last = rep.rc ? rep.rc : sd_tp_chan_recv(fd, msg, 1, -1, &d);
            rep.rc = rep.rc ? rep.rc : (last == SD_EIO && strstr(d.msg, "closed") ? 0 : 99);
            memcpy(rep.msg, d.msg, sizeof rep.msg);
            _exit(write(p[1], &rep, sizeof rep) == (ssize_t)sizeof rep ? 0 : 1);
        }
        close(p[1]);
        c[r].fd = p[0];
    }
    uint8_t id[SD_TP_ID_BYTES], msg[64], back[64];
    random_id(id);
    memcpy(msg, id, sizeof msg);
    int fds[3] = {7, 7, 7};
    sd_diag d = {0};
    REQUIRE(sd_tp_boot_serve_keep(l, world, 5, id, 10000, fds, &d) == 0);
    CHECK(fds[0] == -1 && fds[1] >= 0 && fds[2] >= 0);
    for (int r = 1; r < world; r++) {
        CHECK_MSG(sd_tp_chan_send(fds[r], msg, sizeof msg, 5000, &d) == 0, "%s", d.msg);
        CHECK_MSG(sd_tp_chan_recv(fds[r], back, sizeof back, 5000, &d) == 0, "%s", d.msg);
        CHECK(memcmp(back, msg, sizeof msg) == 0);
        close(fds[r]);
    }
    for (int r = 1; r < world; r++) {
        child_report rep;
        CHECK(collect(c[r], &rep) == 0);
        CHECK_MSG(rep.rc == 0, "rank %d: rc %d %s", r, rep.rc, rep.msg);
        CHECK(memcmp(rep.id, id, SD_TP_ID_BYTES) == 0);
    }
    sd_tp_boot_close(l);
}

/* Polls sd_tp_chan_closed for up to ms; returns its last answer. */
static int closed_within(int fd, int unread_too, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (sd_tp_chan_closed(fd, unread_too))
            return 1;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return sd_tp_chan_closed(fd, unread_too);
}

/* A follower killed with SIGKILL: the kept connection reads as closed on rank 0's side at
 * once (the step waits watch it). A live peer, or one whose last message is still unread
 * (rank 0's quit), does not read as closed. */
static void test_channel_peer_death(void)
{
    sd_tp_listener *l = NULL;
    char addr[64];
    REQUIRE(listen_local(&l, addr, sizeof addr) == 0);
    int p[2];
    REQUIRE(pipe(p) == 0);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        uint8_t id[SD_TP_ID_BYTES], msg[16] = {1, 2, 3};
        int fd = -1;
        int rc = sd_tp_boot_join_keep(addr, 1, 2, 9, id, 10000, &fd, NULL);
        if (!rc)
            rc = sd_tp_chan_send(fd, msg, sizeof msg, 10000, NULL); /* left unread by rank 0 */
        char ok = rc == 0;
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        pause(); /* until killed */
        _exit(0);
    }
    close(p[1]);
    uint8_t id[SD_TP_ID_BYTES];
    random_id(id);
    int fds[2] = {-1, -1};
    sd_diag d = {0};
    int rc = sd_tp_boot_serve_keep(l, 2, 9, id, 10000, fds, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    char ok = 0;
    CHECK(read(p[0], &ok, 1) == 1 && ok == 1);
    close(p[0]);
    uint8_t buf[16];
    if (!rc) {
        CHECK(sd_tp_chan_closed(-1, 0) == 0 && sd_tp_chan_closed(-1, 1) == 0);
        CHECK_MSG(closed_within(fds[1], 0, 50) == 0 && closed_within(fds[1], 1, 50) == 0,
                  "a live peer with unread data reads as closed");
        CHECK(sd_tp_chan_recv(fds[1], buf, sizeof buf, 5000, &d) == 0 && buf[2] == 3);
        CHECK(closed_within(fds[1], 0, 20) == 0);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (!rc) {
        CHECK_MSG(closed_within(fds[1], 0, 2000) == 1 && sd_tp_chan_closed(fds[1], 1) == 1,
                  "the killed peer's connection does not read as closed");
        close(fds[1]);
    }
    sd_tp_boot_close(l);
}

/* A peer that sends a last message and closes (rank 0's quit) reads as closed only once the
 * message has been read: the follower's step must not fail on a quit that is still queued.
 * Rank 0's view of a follower (unread_too) sees the close at once. */
static void test_channel_last_message(void)
{
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    uint8_t msg[8] = {7}, got[8] = {0};
    CHECK(sd_tp_chan_send(sv[1], msg, sizeof msg, 1000, NULL) == 0);
    CHECK(sd_tp_chan_closed(sv[0], 0) == 0 && sd_tp_chan_closed(sv[0], 1) == 0);
    close(sv[1]);
    CHECK_MSG(sd_tp_chan_closed(sv[0], 0) == 0, "a queued last message reads as closed");
    CHECK_MSG(sd_tp_chan_closed(sv[0], 1) == 1, "with unread_too, a close behind a message is not seen");
    CHECK(sd_tp_chan_recv(sv[0], got, sizeof got, 1000, NULL) == 0 && got[0] == 7);
    CHECK_MSG(sd_tp_chan_closed(sv[0], 0) == 1,
              "a closed connection with nothing left does not read as closed");
    close(sv[0]);
}

static void test_timeouts(void)
{
    sd_tp_listener *l = NULL;
    char addr[64];
    REQUIRE(listen_local(&l, addr, sizeof addr) == 0);
    uint8_t id[SD_TP_ID_BYTES];
    random_id(id);
    sd_diag d = {0};
    CHECK(sd_tp_boot_serve(l, 3, 1, id, 300, &d) == SD_EIO);
    CHECK_MSG(strstr(d.msg, "timed out") && strstr(d.msg, "rank(s) 1,2"), "%s", d.msg);
    sd_tp_boot_close(l);
    /* nobody listens on that port any more */
    memset(&d, 0, sizeof d);
    CHECK(sd_tp_boot_join(addr, 1, 2, 1, id, 300, &d) == SD_EIO);
    CHECK_MSG(strstr(d.msg, "timed out") && strstr(d.msg, addr), "%s", d.msg);
    /* rank 0 listens but never serves: the join times out waiting for the id */
    REQUIRE(listen_local(&l, addr, sizeof addr) == 0);
    memset(&d, 0, sizeof d);
    CHECK(sd_tp_boot_join(addr, 1, 2, 1, id, 300, &d) == SD_EIO);
    CHECK_MSG(strstr(d.msg, "group id") && strstr(d.msg, "timed out"), "%s", d.msg);
    sd_tp_boot_close(l);
}

static void test_bad_args(void)
{
    sd_tp_listener *l = NULL;
    uint8_t id[SD_TP_ID_BYTES] = {0};
    sd_diag d = {0};
    CHECK(sd_tp_boot_listen(&l, "localhost", &d) == SD_EINVAL);
    CHECK(sd_tp_boot_listen(&l, "127.0.0.1:70000", &d) == SD_EINVAL);
    CHECK(strstr(d.msg, "70000") != NULL);
    CHECK(sd_tp_boot_join("127.0.0.1:1", 0, 2, 1, id, 100, &d) == SD_EINVAL);
    CHECK(sd_tp_boot_join("127.0.0.1:1", 2, 2, 1, id, 100, &d) == SD_EINVAL);
    sd_tp_boot_close(NULL);
}

static void test_config_hash(void)
{
    sd_model_config a = {.hidden = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16};
    sd_model_config b = a;
    b.n_kv_heads = 4;
    CHECK(sd_tp_config_hash(&a, 2, NULL) == sd_tp_config_hash(&a, 2, NULL));
    CHECK(sd_tp_config_hash(&a, 2, NULL) != sd_tp_config_hash(&a, 4, NULL));
    CHECK(sd_tp_config_hash(&a, 2, NULL) != sd_tp_config_hash(&b, 2, NULL));
    CHECK(sd_tp_config_hash(&a, 2, "2:4") != sd_tp_config_hash(&a, 2, "dense"));
}

int main(void)
{
    RUN(test_group_2);
    RUN(test_group_4);
    RUN(test_group_8);
    RUN(test_join_before_listen);
    RUN(test_refused_hash);
    RUN(test_refused_world_and_duplicate);
    RUN(test_channel);
    RUN(test_channel_peer_death);
    RUN(test_channel_last_message);
    RUN(test_timeouts);
    RUN(test_bad_args);
    RUN(test_config_hash);
    return sd_test_done();
}
