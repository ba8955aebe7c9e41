/* jsonc_utf8: what the JSON validators (jsonc.c for JSON mode, jschema_step.c for schemas,
 * toolcall.c for tool calls) share about bytes: JSON's whitespace, the \uXXXX surrogate flags and
 * the UTF-8 continuation rules. */
#ifndef SD_JSONC_UTF8_H
#define SD_JSONC_UTF8_H

#include <stdint.h>

/* JSON's four whitespace bytes. */
static inline int json_ws(unsigned c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* \uXXXX flags: the escape must be a low surrogate (it follows a high one); its first digit
 * was D; it is a high surrogate (so a low one must follow). */
enum { SURR_LOW = 1, SURR_D = 2, SURR_HIGH = 4 };

/* Digit i (0..3) of a \uXXXX escape, the escape's surrogate flags in *surr: 0, or -1 when the
 * digit is not hex or breaks the surrogate rules. Surrogates are D800-DBFF (high) and DC00-DFFF
 * (low): the first two digits decide, so the rest of the escape needs no checking. After the
 * fourth digit, SURR_HIGH in *surr says a low surrogate must follow. */
static inline int json_hex_digit(unsigned c, unsigned i, uint8_t *surr)
{
    int v = c >= '0' && c <= '9'                       ? (int)(c - '0')
            : ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') ? (int)((c | 0x20) - 'a' + 10)
                                                       : -1;
    if (v < 0)
        return -1;
    if (i == 0) {
        if (v == 0xD)
            *surr |= SURR_D;
        else if (*surr & SURR_LOW)
            return -1;
    } else if (i == 1 && (*surr & SURR_D)) {
        int low = v >= 0xC;
        if ((*surr & SURR_LOW) ? !low : low)
            return -1; /* a high surrogate without its low half, or a lone low one */
        if (v >= 0x8 && !low)
            *surr |= SURR_HIGH;
    }
    return 0;
}

/* The byte after a backslash, but for 'u': one of the single-character escapes. */
static inline int json_simple_escape(unsigned c)
{
    return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't';
}

/* What the next byte of a UTF-8 character must be. Lead bytes E0, ED, F0 and F4 restrict their
 * second byte to rule out overlong forms, surrogates and > U+10FFFF. */
enum { U_NONE, U_CONT1, U_CONT2, U_CONT3, U_E0, U_ED, U_F0, U_F4 };

static const struct {
    uint8_t lo, hi, next;
} utf8_next[] = {
    [U_CONT1] = {0x80, 0xBF, U_NONE}, [U_CONT2] = {0x80, 0xBF, U_CONT1}, [U_CONT3] = {0x80, 0xBF, U_CONT2},
    [U_E0] = {0xA0, 0xBF, U_CONT1},   [U_ED] = {0x80, 0x9F, U_CONT1},    [U_F0] = {0x90, 0xBF, U_CONT2},
    [U_F4] = {0x80, 0x8F, U_CONT2},
};

/* The pending-continuation code after lead byte c (>= 0x80), U_NONE if c cannot lead. */
static inline uint8_t utf8_lead(unsigned c)
{
    if (c < 0xC2 || c > 0xF4) /* C0, C1: overlong; F5..FF: beyond U+10FFFF */
        return U_NONE;
    if (c < 0xE0)
        return U_CONT1;
    if (c < 0xF0)
        return c == 0xE0 ? U_E0 : c == 0xED ? U_ED : U_CONT2;
    return c == 0xF0 ? U_F0 : c == 0xF4 ? U_F4 : U_CONT3;
}

#endif
