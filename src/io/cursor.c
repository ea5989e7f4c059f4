/*
 * cursor.c - the one bounds-checked reader that every format driver parses through.
 *
 * A cursor walks a region [start, end) of a source. Mapped and in-memory sources are read in
 * place; pread and callback sources go through a window buffer (64 KiB at most) that is refilled
 * on demand, and reads at least as large as the window bypass it. Every read is checked against
 * the region end before any byte moves, and a failure is TBX_E_TRUNCATED naming the field, its
 * size and the offset where it starts ("tensor_count: needs 8 bytes at byte 8, file has 10").
 * A failed read leaves the position unchanged. A read from a mapping is checked after the copy
 * against the mapping's known loss (tbx_source_fast_ok: one load): bytes in a page found past
 * the end of a file that shrank meanwhile are TBX_E_TRUNCATED, not zeros. The zeros of the page
 * that holds the new end raise no fault; tbx_open_path's check of the file size at the end of
 * the open catches those (cursors parse at open only).
 */
#define _GNU_SOURCE
#include "io.h"

#include <inttypes.h>

#define WINDOW_BYTES ((size_t)64 * 1024)

/* The field as shown in a message: long names (tensor names can be long) are shortened so the
 * rest of the message (sizes, offsets) always fits. */
#define SHOW_MAX 96
static const char *show_name(char buf[SHOW_MAX + 4], const char *field, const char *dflt) {
    if (!field || !*field) return dflt;
    size_t n = strlen(field);
    if (n <= SHOW_MAX) return field;
    n = SHOW_MAX;
    while (n > 0 && ((unsigned char)field[n] & 0xC0u) == 0x80u) n--; /* whole UTF-8 sequences */
    memcpy(buf, field, n);
    memcpy(buf + n, "...", 4);
    return buf;
}

/* The field of n bytes starting at c->pos does not fit before c->end. */
static tbx_status short_read(const tbx_cursor *c, uint64_t n, const char *field, tbx_error *err) {
    char fbuf[SHOW_MAX + 4];
    const char *f = show_name(fbuf, field, "field");
    if (c->end == c->src->size)
        return tbx_err_at(err, TBX_E_TRUNCATED, c->pos, field,
                      "%s: needs %" PRIu64 " bytes at byte %" PRIu64 ", file has %" PRIu64, f, n,
                      c->pos, c->src->size);
    return tbx_err_at(err, TBX_E_TRUNCATED, c->pos, field,
                  "%s: needs %" PRIu64 " bytes at byte %" PRIu64 ", region ends at byte %" PRIu64
                  " (file has %" PRIu64 ")",
                  f, n, c->pos, c->end, c->src->size);
}

tbx_status tbx_cursor_init(tbx_cursor *c, const tbx_source *src, const tbx_alloc *al,
                           uint64_t start, uint64_t end, tbx_error *err) {
    if (!c) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, NULL, "cursor is NULL");
    memset(c, 0, sizeof *c);
    c->al = al;
    if (!src) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, NULL, "cursor source is NULL");
    c->src = src;
    if (end > src->size)
        return tbx_err_at(err, TBX_E_TRUNCATED, end, "region",
                      "region: end at byte %" PRIu64 " is past the end of the file (%" PRIu64
                      " bytes)",
                      end, src->size);
    if (start > end)
        return tbx_err_at(err, TBX_E_RANGE, start, "region",
                      "region: start at byte %" PRIu64 " is after its end at byte %" PRIu64, start,
                      end);
    c->pos = start;
    c->end = end;
    if (!src->base && end > 0) {
        size_t cap = end < (uint64_t)WINDOW_BYTES ? (size_t)end : WINDOW_BYTES;
        c->buf = (uint8_t *)tbx_malloc(al, cap);
        if (!c->buf) return tbx_err_nomem(err, "read window");
        c->buf_cap = cap;
    }
    return TBX_OK;
}

void tbx_cursor_free(tbx_cursor *c) {
    if (!c) return;
    if (c->buf) tbx_free(c->al, c->buf, c->buf_cap);
    c->buf = NULL;
    c->buf_cap = 0;
    c->buf_len = 0;
    c->buf_off = 0;
}

/* Copies n bytes at c->pos to dst and advances. */
static tbx_status take(tbx_cursor *c, void *dst, size_t n, const char *field, tbx_error *err) {
    if (!c->src) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, field, "cursor is not initialised");
    if (c->pos > c->end || (uint64_t)n > c->end - c->pos) return short_read(c, n, field, err);
    if (n == 0) return TBX_OK;
    const tbx_source *s = c->src;

    if (s->base) {
        memcpy(dst, s->base + c->pos, n);
        /* a mapped file that shrank reads as zeros past its new end: not a value to parse */
        if (!tbx_source_fast_ok(s, c->pos + n)) {
            tbx_status st = tbx_source_check(s, c->pos, n, field ? field : "field", err);
            if (st != TBX_OK) return st;
        }
        c->pos += n;
        return TBX_OK;
    }
    if (!c->buf) {
        /* The region was empty at init and has been widened since: allocate the window now. */
        size_t cap = c->end < (uint64_t)WINDOW_BYTES ? (size_t)c->end : WINDOW_BYTES;
        c->buf = (uint8_t *)tbx_malloc(c->al, cap);
        if (!c->buf) return tbx_err_nomem(err, "read window");
        c->buf_cap = cap;
        c->buf_len = 0;
    }

    /* Inside the current window? */
    if (c->pos >= c->buf_off && c->pos - c->buf_off <= (uint64_t)c->buf_len &&
        (uint64_t)n <= (uint64_t)c->buf_len - (c->pos - c->buf_off)) {
        memcpy(dst, c->buf + (size_t)(c->pos - c->buf_off), n);
        c->pos += n;
        return TBX_OK;
    }
    /* Large reads go straight to the destination. */
    if (n >= c->buf_cap) {
        tbx_status st = tbx_source_read(s, c->pos, dst, n, field ? field : "field", err);
        if (st != TBX_OK) return st;
        c->pos += n;
        return TBX_OK;
    }
    /* Refill the window from c->pos (never past the region end). */
    uint64_t avail = c->end - c->pos;
    size_t want = avail < (uint64_t)c->buf_cap ? (size_t)avail : c->buf_cap;
    c->buf_len = 0;
    tbx_status st = tbx_source_read(s, c->pos, c->buf, want, field ? field : "field", err);
    if (st != TBX_OK) return st;
    c->buf_off = c->pos;
    c->buf_len = want;
    memcpy(dst, c->buf, n);
    c->pos += n;
    return TBX_OK;
}

tbx_status tbx_cur_u8(tbx_cursor *c, uint8_t *v, const char *field, tbx_error *err) {
    uint8_t b[1] = {0};
    tbx_status st = take(c, b, 1, field, err);
    if (st == TBX_OK && v) *v = b[0];
    return st;
}

tbx_status tbx_cur_u16(tbx_cursor *c, uint16_t *v, const char *field, tbx_error *err) {
    uint8_t b[2] = {0};
    tbx_status st = take(c, b, 2, field, err);
    if (st == TBX_OK && v) *v = c->big_endian ? (uint16_t)((b[0] << 8) | b[1]) : tbx_ld16(b);
    return st;
}

tbx_status tbx_cur_u32(tbx_cursor *c, uint32_t *v, const char *field, tbx_error *err) {
    uint8_t b[4] = {0};
    tbx_status st = take(c, b, 4, field, err);
    if (st == TBX_OK && v) {
        uint32_t x = tbx_ld32(b);
        *v = c->big_endian ? __builtin_bswap32(x) : x;
    }
    return st;
}

tbx_status tbx_cur_u64(tbx_cursor *c, uint64_t *v, const char *field, tbx_error *err) {
    uint8_t b[8] = {0};
    tbx_status st = take(c, b, 8, field, err);
    if (st == TBX_OK && v) {
        uint64_t x = tbx_ld64(b);
        *v = c->big_endian ? __builtin_bswap64(x) : x;
    }
    return st;
}

tbx_status tbx_cur_bytes(tbx_cursor *c, void *dst, size_t n, const char *field, tbx_error *err) {
    if (!dst && n) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field, "NULL buffer");
    return take(c, dst, n, field, err);
}

tbx_status tbx_cur_need(tbx_cursor *c, uint64_t n, const char *field, tbx_error *err) {
    if (!c->src) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, field, "cursor is not initialised");
    if (c->pos > c->end || n > c->end - c->pos) return short_read(c, n, field, err);
    return TBX_OK;
}

tbx_status tbx_cur_skip(tbx_cursor *c, uint64_t n, const char *field, tbx_error *err) {
    tbx_status st = tbx_cur_need(c, n, field, err);
    if (st == TBX_OK) c->pos += n;
    return st;
}

tbx_status tbx_cur_seek(tbx_cursor *c, uint64_t pos, const char *field, tbx_error *err) {
    if (!c->src) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, field, "cursor is not initialised");
    if (pos > c->end) {
        char fbuf[SHOW_MAX + 4];
        const char *f = show_name(fbuf, field, "field");
        if (c->end == c->src->size)
            return tbx_err_at(err, TBX_E_TRUNCATED, pos, field,
                          "%s: offset %" PRIu64 " is past the end of the file (%" PRIu64
                          " bytes)",
                          f, pos, c->src->size);
        return tbx_err_at(err, TBX_E_TRUNCATED, pos, field,
                      "%s: offset %" PRIu64 " is past the region end at byte %" PRIu64
                      " (file has %" PRIu64 ")",
                      f, pos, c->end, c->src->size);
    }
    c->pos = pos;
    return TBX_OK;
}
