/* log: the daemon's stderr logger — one line per event, level filter, optional journald
 * "<N>" priority prefixes, request ids. The level and prefix switch are the only globals
 * (process-wide by nature; reloaded on SIGHUP), kept in atomics. */
#ifndef SD_LOG_H
#define SD_LOG_H

typedef enum sd_log_level {
    SD_LOG_DEBUG = 0,
    SD_LOG_INFO,
    SD_LOG_WARN,
    SD_LOG_ERROR,
} sd_log_level;

/* Parses "debug" | "info" | "warn" | "error"; returns the level or -1. */
int sd_log_level_parse(const char *s);
const char *sd_log_level_name(int level);

void sd_log_set_level(int level);
int sd_log_get_level(void);
/* 1: prefix every line with a syslog priority "<7>".."<3>" (journald reads it). */
void sd_log_set_prefix(int on);

/* Writes one line "<time> <level> [<rid>] <message>" to stderr if level passes the filter.
 * rid may be NULL. Newlines in the message are replaced so that one event stays one line. */
void sd_log(int level, const char *rid, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define sd_log_debug(rid, ...) sd_log(SD_LOG_DEBUG, rid, __VA_ARGS__)
#define sd_log_info(rid, ...) sd_log(SD_LOG_INFO, rid, __VA_ARGS__)
#define sd_log_warn(rid, ...) sd_log(SD_LOG_WARN, rid, __VA_ARGS__)
#define sd_log_error(rid, ...) sd_log(SD_LOG_ERROR, rid, __VA_ARGS__)

#endif
