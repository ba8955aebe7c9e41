/* http_deadline: a deadline for receiving a whole request. libmicrohttpd's connection timeout
 * is an idle timer that every byte resets, so a client trickling header bytes (slowloris) could
 * hold a connection forever. Each connection here records when its current request began; the
 * loop's one-second reaper shuts down the socket of any request still incomplete after
 * `request_timeout`, and libmicrohttpd then closes it as a peer that went away. */
#include "server/http_impl.h"

#include <stdlib.h>
#include <sys/socket.h>

struct sd_http__sock {
    int fd;
    double t0;     /* when the request being received began (or the last one finished) */
    int receiving; /* 1 until the whole request is in; 0 while it is processed/answered */
    int shut;      /* the reaper shut it down already */
    sd_http__sock *prev, *next;
};

void sd_http__deadline_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe)
{
    sd_http *h = cls;
    sd_http__sock *s = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(s = calloc(1, sizeof *s)))
            return; /* untracked: only the idle timeout applies to it */
        s->fd = ci->connect_fd;
        s->t0 = sd_http__now();
        s->receiving = 1;
        pthread_mutex_lock(&h->socks_mu);
        s->next = h->socks;
        if (h->socks)
            h->socks->prev = s;
        h->socks = s;
        pthread_mutex_unlock(&h->socks_mu);
        *socket_context = s;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && s) {
        pthread_mutex_lock(&h->socks_mu);
        if (s->prev)
            s->prev->next = s->next;
        else
            h->socks = s->next;
        if (s->next)
            s->next->prev = s->prev;
        pthread_mutex_unlock(&h->socks_mu);
        free(s);
        *socket_context = NULL;
    }
}

void sd_http__deadline_mark(sd_http *h, struct MHD_Connection *conn, int receiving)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    sd_http__sock *s = ci ? ci->socket_context : NULL;
    if (!s)
        return;
    pthread_mutex_lock(&h->socks_mu);
    if (receiving && !s->receiving)
        s->t0 = sd_http__now();
    s->receiving = receiving;
    pthread_mutex_unlock(&h->socks_mu);
}

int sd_http__deadline_reap(sd_http *h)
{
    double now = sd_http__now(), limit = h->o.request_timeout > 0 ? h->o.request_timeout : 1;
    int n = 0;
    pthread_mutex_lock(&h->socks_mu);
    for (sd_http__sock *s = h->socks; s; s = s->next)
        if (s->receiving && !s->shut && now - s->t0 > limit) {
            shutdown(s->fd, SHUT_RDWR); /* not close: the fd stays libmicrohttpd's to close */
            s->shut = 1;
            n++;
        }
    pthread_mutex_unlock(&h->socks_mu);
    return n;
}
