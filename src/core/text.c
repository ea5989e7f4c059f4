/*
 * text.c - strict UTF-8 validation and quoting of possibly binary names for messages.
 *
 * Validation follows the well-formed byte sequences of Unicode (table 3-7): no overlong forms,
 * no surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no truncated sequences. Runs of ASCII
 * are skipped eight bytes at a time. On failure the reported index is the first byte of the
 * ill-formed sequence.
 *
 * Quoting keeps printable ASCII, doubles backslashes (so the output is unambiguous) and writes
 * every other byte as \xNN; `max` == 0 means no input limit (only the buffer capacity), and any
 * cut is marked with "...".
 */
#define _GNU_SOURCE
#include "core.h"

#include <stdio.h>

bool tbx_utf8_valid(const char *p, size_t n, size_t *bad) {
    const uint8_t *s = (const uint8_t *)p;
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            /* ASCII fast path: eight bytes at a time while no high bit is set. */
            while (n - i >= 8) {
                uint64_t w;
                memcpy(&w, s + i, 8);
                if (w & 0x8080808080808080ull) break;
                i += 8;
            }
            continue;
        }
        size_t len;
        uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c == 0xE0) {
            len = 3; lo = 0xA0;        /* no overlong 3-byte forms */
        } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
            len = 3;
        } else if (c == 0xED) {
            len = 3; hi = 0x9F;        /* no surrogates */
        } else if (c == 0xF0) {
            len = 4; lo = 0x90;        /* no overlong 4-byte forms */
        } else if (c >= 0xF1 && c <= 0xF3) {
            len = 4;
        } else if (c == 0xF4) {
            len = 4; hi = 0x8F;        /* nothing above U+10FFFF */
        } else {
            goto fail;                 /* continuation byte, C0/C1 overlong lead, F5..FF */
        }
        if (n - i < len) goto fail;
        if (s[i + 1] < lo || s[i + 1] > hi) goto fail;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) goto fail;
        i += len;
    }
    return true;
fail:
    if (bad) *bad = i;
    return false;
}

/* Bytes needed to show c. */
static size_t quoted_len(unsigned char c) {
    if (c == '\\') return 2;
    if (c >= 0x20 && c < 0x7f) return 1;
    return 4;
}

void tbx_quote_bytes(char *dst, size_t cap, const char *p, size_t n, size_t max) {
    if (!dst || cap == 0) return;
    dst[0] = '\0';
    if (!p) n = 0;
    bool cut = max != 0 && n > max;
    size_t take = cut ? max : n;

    /* Does everything fit? Otherwise keep room for the "..." that marks the cut. */
    size_t total = 0;
    for (size_t i = 0; i < take && total < cap; i++) total += quoted_len((unsigned char)p[i]);
    if (total + (cut ? 3 : 0) + 1 > cap) cut = true;
    size_t limit = cap - 1;                   /* characters available before the NUL */
    if (cut) limit = limit >= 3 ? limit - 3 : 0;

    size_t o = 0;
    for (size_t i = 0; i < take; i++) {
        unsigned char c = (unsigned char)p[i];
        size_t tl = quoted_len(c);
        if (o + tl > limit) break;            /* never split an escape */
        if (tl == 1) {
            dst[o] = (char)c;
        } else if (tl == 2) {
            dst[o] = '\\';
            dst[o + 1] = '\\';
        } else {
            char tmp[5];
            snprintf(tmp, sizeof tmp, "\\x%02x", c);
            memcpy(dst + o, tmp, 4);
        }
        o += tl;
    }
    if (cut)
        for (int k = 0; k < 3 && o + 1 < cap; k++) dst[o++] = '.';
    dst[o] = '\0';
}

void tbx_json_reason(char *dst, size_t cap, const char *jtext, const char *src, size_t n,
                     size_t pos) {
    if (!dst || cap == 0) return;
    /* jansson's own context " near '<token>'" (or " near end of file") is its token buffer
     * printed with %s: cut at a NUL byte, control bytes raw. Keep the reason only. */
    size_t rl = jtext ? strlen(jtext) : 0;
    const char *near = jtext ? strstr(jtext, " near ") : NULL;
    if (near) rl = (size_t)(near - jtext);
    if (pos > n) pos = n;
    size_t lo = pos > 16 ? pos - 16 : 0, hi = n - pos > 16 ? pos + 16 : n;
    char ctx[160];
    tbx_quote_bytes(ctx, sizeof ctx, src ? src + lo : NULL, src ? hi - lo : 0, 0);
    if (hi > lo)
        snprintf(dst, cap, "%.*s near %s\"%s\"%s", (int)rl, jtext ? jtext : "", lo ? "..." : "",
                 ctx, hi < n ? "..." : "");
    else
        snprintf(dst, cap, "%.*s at the end of the text", (int)rl, jtext ? jtext : "");
}
