/* notify: sd_notify over an AF_UNIX datagram socket (path or abstract "@name"). */
#include "server/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "engine/diag.h"

struct sd_notifier {
    int fd; /* -1 when NOTIFY_SOCKET is unset */
    struct sockaddr_un addr;
    socklen_t addr_len;
    uint64_t watchdog_usec;
};

static uint64_t watchdog_from_env(void)
{
    const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    if (!us)
        return 0;
    /* WATCHDOG_PID, when set, names the process the watchdog is meant for. */
    if (pid && strtol(pid, NULL, 10) != (long)getpid())
        return 0;
    char *end;
    unsigned long long v = strtoull(us, &end, 10);
    return (*end == '\0' && v > 0) ? (uint64_t)v : 0;
}

int sd_notify_init(sd_notifier **ret)
{
    sd_notifier *n = calloc(1, sizeof *n);
    if (!n)
        return SD_ENOMEM;
    n->fd = -1;
    n->watchdog_usec = watchdog_from_env();
    const char *path = getenv("NOTIFY_SOCKET");
    size_t len = path ? strlen(path) : 0;
    if (len == 0 || len >= sizeof n->addr.sun_path || (path[0] != '/' && path[0] != '@')) {
        *ret = n; /* off: not under systemd (or a socket form we do not speak) */
        return 0;
    }
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, path, len);
    if (path[0] == '@') /* abstract namespace */
        n->addr.sun_path[0] = '\0';
    n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (n->fd < 0) {
        free(n);
        return SD_EIO;
    }
    *ret = n;
    return 0;
}

void sd_notify_free(sd_notifier *n)
{
    if (!n)
        return;
    if (n->fd >= 0)
        close(n->fd);
    free(n);
}

int sd_notify_send(sd_notifier *n, const char *state)
{
    if (!n || n->fd < 0)
        return 0;
    ssize_t r;
    do {
        r = sendto(n->fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&n->addr, n->addr_len);
    } while (r < 0 && errno == EINTR);
    return r < 0 ? SD_EIO : 0;
}

int sd_notify_sendf(sd_notifier *n, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return sd_notify_send(n, buf);
}

uint64_t sd_notify_watchdog_usec(const sd_notifier *n)
{
    return n ? n->watchdog_usec : 0;
}

int sd_notify_enabled(const sd_notifier *n)
{
    return n && n->fd >= 0;
}
