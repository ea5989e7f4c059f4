/*
 * error.c - filling tbx_error records and naming status codes.
 *
 * tbx_err/tbx_verr format one line of text into a caller's tbx_error: the field involved, the
 * byte offset and a message that ends in " at byte N" when an offset is known. Text that does
 * not fit is shortened (never in the middle of a UTF-8 sequence) so that the offset suffix is
 * always kept. The field and message may alias the record being filled: everything is formatted
 * into local buffers first.
 */
#define _GNU_SOURCE
#include "core.h"

#include <inttypes.h>
#include <stdio.h>

/* Length of the longest prefix of s[0, n) no longer than `max` bytes that does not end inside a
 * UTF-8 multi-byte sequence. */
static size_t utf8_cut(const char *s, size_t n, size_t max) {
    if (n <= max) return n;
    size_t k = max;
    /* s[k] is the first byte left out; if it continues a sequence, drop that sequence's start. */
    while (k > 0 && ((unsigned char)s[k] & 0xC0u) == 0x80u) k--;
    return k;
}

/* Messages are one line: control characters become spaces. */
static void one_line(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20u || *s == 0x7f) *s = ' ';
}

tbx_status tbx_verr(tbx_error *err, tbx_status code, uint64_t offset, const char *field,
                    const char *fmt, va_list ap) {
    if (!err) return code;

    char fld[sizeof err->field];
    size_t flen = field ? strlen(field) : 0;
    flen = utf8_cut(field ? field : "", flen, sizeof fld - 1);
    if (flen) memcpy(fld, field, flen);
    fld[flen] = '\0';

    char text[sizeof err->message];
    bool cut = false;
    if (fmt) {
        int r = vsnprintf(text, sizeof text, fmt, ap);
        if (r < 0) text[0] = '\0';
        cut = r >= (int)sizeof text;
    } else {
        snprintf(text, sizeof text, "%s", tbx_strerror(code));
    }
    one_line(text);

    char suffix[40] = "";
    if (offset != TBX_NO_OFFSET) snprintf(suffix, sizeof suffix, " at byte %" PRIu64, offset);
    size_t slen = strlen(suffix);
    size_t tlen = strlen(text);
    size_t room = sizeof err->message - 1 - slen;
    if (cut || tlen > room) {
        /* Keep the suffix: shorten the text and mark the cut with "...". */
        tlen = utf8_cut(text, tlen, (tlen < room ? tlen : room) - 3);
        memcpy(text + tlen, "...", 3);
        tlen += 3;
    }

    err->code = code;
    err->offset = offset;
    memcpy(err->field, fld, flen + 1);
    memcpy(err->message, text, tlen);
    memcpy(err->message + tlen, suffix, slen + 1);
    return code;
}

tbx_status tbx_err(tbx_error *err, tbx_status code, uint64_t offset, const char *field,
                   const char *fmt, ...) {
    if (!err) return code;
    va_list ap;
    va_start(ap, fmt);
    tbx_status r = tbx_verr(err, code, offset, field, fmt, ap);
    va_end(ap);
    return r;
}

tbx_status tbx_err_nomem(tbx_error *err, const char *what) {
    if (what && *what)
        return tbx_err(err, TBX_E_NOMEM, TBX_NO_OFFSET, what, "out of memory allocating %s", what);
    return tbx_err(err, TBX_E_NOMEM, TBX_NO_OFFSET, NULL, "out of memory");
}

/* One row per status code, indexed by its (stable) numeric value. */
static const struct {
    const char *name;
    const char *text;
} status_table[] = {
    [TBX_OK] = {"TBX_OK", "ok"},
    [TBX_E_INVALID_ARG] = {"TBX_E_INVALID_ARG", "invalid argument"},
    [TBX_E_NOMEM] = {"TBX_E_NOMEM", "out of memory"},
    [TBX_E_IO] = {"TBX_E_IO", "i/o error"},
    [TBX_E_TRUNCATED] = {"TBX_E_TRUNCATED", "truncated"},
    [TBX_E_BAD_MAGIC] = {"TBX_E_BAD_MAGIC", "bad magic"},
    [TBX_E_BAD_VERSION] = {"TBX_E_BAD_VERSION", "unsupported version"},
    [TBX_E_FORMAT] = {"TBX_E_FORMAT", "invalid format"},
    [TBX_E_LIMIT] = {"TBX_E_LIMIT", "limit exceeded"},
    [TBX_E_OVERFLOW] = {"TBX_E_OVERFLOW", "size overflow"},
    [TBX_E_DUPLICATE] = {"TBX_E_DUPLICATE", "duplicate"},
    [TBX_E_RANGE] = {"TBX_E_RANGE", "out of range"},
    [TBX_E_UNSUPPORTED] = {"TBX_E_UNSUPPORTED", "unsupported"},
    [TBX_E_NOT_FOUND] = {"TBX_E_NOT_FOUND", "not found"},
    [TBX_E_CHECKSUM] = {"TBX_E_CHECKSUM", "checksum mismatch"},
    [TBX_E_BUFFER_TOO_SMALL] = {"TBX_E_BUFFER_TOO_SMALL", "buffer too small"},
    [TBX_E_STATE] = {"TBX_E_STATE", "invalid state"},
    [TBX_E_EXISTS] = {"TBX_E_EXISTS", "already exists"},
    [TBX_E_LOSSY] = {"TBX_E_LOSSY", "lossy"},
    [TBX_E_PADDING] = {"TBX_E_PADDING", "non-zero padding"},
    [TBX_E_CANCELLED] = {"TBX_E_CANCELLED", "cancelled"},
};

#define STATUS_COUNT (sizeof status_table / sizeof status_table[0])

const char *tbx_strerror(tbx_status status) {
    unsigned u = (unsigned)status;
    if (u < STATUS_COUNT && status_table[u].text) return status_table[u].text;
    return "unknown error";
}

const char *tbx_status_name(tbx_status status) {
    unsigned u = (unsigned)status;
    if (u < STATUS_COUNT && status_table[u].name) return status_table[u].name;
    return "TBX_E_UNKNOWN";
}

tbx_status tbx_err_at(tbx_error *err, tbx_status code, uint64_t offset, const char *field,
                      const char *fmt, ...) {
    if (!err) return code;
    va_list ap;
    va_start(ap, fmt);
    tbx_verr(err, code, TBX_NO_OFFSET, field, fmt, ap);
    va_end(ap);
    err->offset = offset;
    return code;
}
