/* log: one-line stderr log events with level filter and optional journald priorities. */
#include "server/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int log_level = SD_LOG_INFO;
static atomic_int log_prefix = 0;

static const char *const level_names[] = {"debug", "info", "warn", "error"};
/* syslog priorities: debug 7, info 6, warning 4, err 3 */
static const int level_prio[] = {7, 6, 4, 3};

int sd_log_level_parse(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, level_names[i]))
            return i;
    if (!strcmp(s, "warning"))
        return SD_LOG_WARN;
    return -1;
}

const char *sd_log_level_name(int level)
{
    return level >= 0 && level < 4 ? level_names[level] : "?";
}

void sd_log_set_level(int level)
{
    if (level >= SD_LOG_DEBUG && level <= SD_LOG_ERROR)
        atomic_store(&log_level, level);
}

int sd_log_get_level(void)
{
    return atomic_load(&log_level);
}

void sd_log_set_prefix(int on)
{
    atomic_store(&log_prefix, on ? 1 : 0);
}

void sd_log(int level, const char *rid, const char *fmt, ...)
{
    if (level < atomic_load(&log_level) || level > SD_LOG_ERROR)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);

    char prio[8] = "";
    if (atomic_load(&log_prefix))
        snprintf(prio, sizeof prio, "<%d>", level_prio[level]);
    /* One fprintf per line: stdio locks the stream, so lines from threads do not interleave. */
    fprintf(stderr, "%s%s.%03ldZ %s%s%s%s %s\n", prio, when, ts.tv_nsec / 1000000L, level_names[level],
            rid ? " [" : "", rid ? rid : "", rid ? "]" : "", msg);
}
