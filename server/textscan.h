/* textscan: the byte scans the reply parsers share (server/api_tools.c, server/reply.c). */
#ifndef SD_TEXTSCAN_H
#define SD_TEXTSCAN_H

#include <ctype.h>
#include <stddef.h>
#include <string.h>

static inline size_t sd_scan_ws(const char *s, size_t i, size_t len)
{
    while (i < len && isspace((unsigned char)s[i]))
        i++;
    return i;
}

static inline size_t sd_scan_trim_end(const char *s, size_t n)
{
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return n;
}

static inline const char *sd_scan_find(const char *s, size_t len, const char *pat)
{
    size_t m = strlen(pat);
    for (size_t i = 0; i + m <= len; i++)
        if (!memcmp(s + i, pat, m))
            return s + i;
    return NULL;
}

/* The length of the longest end of s[0, len) that begins `pat` without completing it. */
static inline size_t sd_scan_partial_tail(const char *s, size_t len, const char *pat)
{
    size_t m = strlen(pat);
    for (size_t k = m - 1 < len ? m - 1 : len; k > 0; k--)
        if (!memcmp(s + len - k, pat, k))
            return k;
    return 0;
}

#endif
