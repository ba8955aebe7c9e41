/* tok_utf8: UTF-8 validation with U+FFFD replacement of maximal invalid subsequences, and
 * the GPT-2 byte-level alphabet (bytes_to_unicode and its inverse). */
#include "tok_impl.h"

#include <string.h>

static int is_cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

int sd__tok_utf8_step(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    int need;
    unsigned char lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        return -1;
    }
    for (int k = 1; k < need; k++) {
        if ((size_t)k >= n)
            return 0;
        unsigned char b = s[k];
        int ok = k == 1 ? (b >= lo && b <= hi) : is_cont(b);
        if (!ok)
            return -k;
    }
    return need;
}

int sd__tok_utf8_lossy(sd__tok_buf *out, const unsigned char *s, size_t n)
{
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    int rc = sd__tok_buf_reserve(out, n);
    if (rc)
        return rc;
    size_t i = 0, run = 0; /* run: start of the pending stretch of valid bytes */
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int k = sd__tok_utf8_step(s + i, n - i);
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        if ((rc = sd__tok_buf_add(out, s + run, i - run)) || (rc = sd__tok_buf_add(out, fffd, 3)))
            return rc;
        i += k == 0 ? n - i : (size_t)-k; /* a truncated character at the end is one subpart */
        run = i;
    }
    return sd__tok_buf_add(out, s + run, n - run);
}

static int printable_byte(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

uint32_t sd__tok_byte_to_cp(unsigned char b)
{
    if (printable_byte(b))
        return b;
    /* The others take 256, 257, ... in byte order. */
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++)
        k += !printable_byte(x);
    return 256 + k;
}

int sd__tok_cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return printable_byte(cp) ? (int)cp : -1;
    uint32_t k = cp - 256;
    for (unsigned x = 0; x < 256; x++)
        if (!printable_byte(x) && k-- == 0)
            return (int)x;
    return -1;
}
