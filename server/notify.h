/* notify: the systemd sd_notify datagram protocol (READY=1, STATUS=, WATCHDOG=1, ...),
 * spoken directly over $NOTIFY_SOCKET so the daemon needs no libsystemd. */
#ifndef SD_NOTIFY_H
#define SD_NOTIFY_H

#include <stdint.h>

typedef struct sd_notifier sd_notifier;

/* Reads NOTIFY_SOCKET (absent => a notifier whose sends are no-ops) and WATCHDOG_USEC /
 * WATCHDOG_PID. Returns 0, or a negative SD_E* if the socket cannot be created. */
int sd_notify_init(sd_notifier **ret);
void sd_notify_free(sd_notifier *n);

/* Sends a newline-separated list of assignments, e.g. "READY=1\nSTATUS=serving".
 * Returns 0 (also when notifications are off) or a negative SD_E* on a send failure. */
int sd_notify_send(sd_notifier *n, const char *state);
/* printf-style convenience. */
int sd_notify_sendf(sd_notifier *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Watchdog interval in microseconds asked for by systemd for this process, 0 if none.
 * Ping at half of it. */
uint64_t sd_notify_watchdog_usec(const sd_notifier *n);
int sd_notify_enabled(const sd_notifier *n);

#endif
