/*
 * http_parse.c - what the remote layer takes from servers, parsed from bytes (no network):
 * the header lines of an HTTP answer (status, Content-Range, Content-Length, ETag,
 * Last-Modified, Link's next page), the decision whether an answer is the range that was asked for, and the
 * Hugging Face Hub's tree listing (JSON). remote.c and remote_prov.c feed them what libcurl
 * receives; the fuzz targets fuzz_http_head and fuzz_hf_tree and tests/unit/test_http_parse.c
 * feed them bytes directly.
 *
 * Header lines are read strictly only where tensorbox relies on them: a malformed, repeated
 * (with another value) or oversized Content-Range, Content-Length, ETag or Last-Modified makes
 * the answer unusable, and the error names the header and the byte offset in the answer's
 * header block (its status line is byte 0). Other headers are not looked at.
 */
#define _GNU_SOURCE
#include "io.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* ------------------------------------------------------------------------------------------ */
/* Header lines                                                                                */
/* ------------------------------------------------------------------------------------------ */
void tbx_http_head_reset(tbx_http_head *h) {
    memset(h, 0, sizeof *h);
}

static tbx_status head_bad(tbx_http_head *h, tbx_status code, const char *field, uint64_t at,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static tbx_status head_bad(tbx_http_head *h, tbx_status code, const char *field, uint64_t at,
                           const char *fmt, ...) {
    if (h->err.code != TBX_OK) return h->err.code; /* the first problem is the one reported */
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return tbx_err_at(&h->err, code, at, field, "%s: %s (byte %" PRIu64 " of the answer's "
                      "headers)", field, why, at);
}

static bool is_ows(char c) { return c == ' ' || c == '\t'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* A decimal number of 1..19 digits at p[*i] (no sign, no space); *i moves past it. False when
 * there is none or it exceeds INT64_MAX (a size, offset or length no file has). */
static bool take_num(const char *p, size_t n, size_t *i, uint64_t *v) {
    size_t k = *i;
    uint64_t x = 0;
    while (k < n && is_digit(p[k])) {
        unsigned d = (unsigned)(p[k] - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10) return false;
        x = x * 10 + d;
        k++;
    }
    if (k == *i) return false;
    *i = k;
    *v = x;
    return true;
}

/* The value's shown form in a message (escaped, cut). */
static void shown(char *q, size_t cap, const char *v, size_t n) {
    tbx_quote_bytes(q, cap, v, n, 64);
}

static tbx_status parse_status(tbx_http_head *h, const char *b, size_t n) {
    /* "HTTP/" version SP 3DIGIT [SP reason] */
    while (n && (b[n - 1] == '\n' || b[n - 1] == '\r')) n--;
    size_t i = 5;
    while (i < n && b[i] != ' ') {
        char c = b[i];
        if (!is_digit(c) && c != '.')
            return head_bad(h, TBX_E_FORMAT, "status line", i, "version byte 0x%02x is not a "
                            "digit or '.'", (unsigned char)c);
        i++;
    }
    if (i == 5 || i >= n)
        return head_bad(h, TBX_E_FORMAT, "status line", i, "no version and status code");
    i++;
    if (i + 3 > n || !is_digit(b[i]) || !is_digit(b[i + 1]) || !is_digit(b[i + 2]) ||
        (i + 3 < n && b[i + 3] != ' '))
        return head_bad(h, TBX_E_FORMAT, "status line", i, "the status code is not three digits");
    h->status = (b[i] - '0') * 100 + (b[i + 1] - '0') * 10 + (b[i + 2] - '0');
    if (h->status < 100)
        return head_bad(h, TBX_E_FORMAT, "status line", i, "status code %03ld is below 100",
                        h->status);
    return TBX_OK;
}

static tbx_status parse_content_range(tbx_http_head *h, const char *v, size_t n, uint64_t at) {
    static const char F[] = "Content-Range";
    char q[300];
    shown(q, sizeof q, v, n);
    if (h->cr_seen)
        return head_bad(h, TBX_E_FORMAT, F, at, "sent twice (\"%s\" the second time)", q);
    h->cr_seen = true;
    if (n < 6 || strncasecmp(v, "bytes ", 6) != 0)
        return head_bad(h, TBX_E_FORMAT, F, at, "\"%s\" is not \"bytes FIRST-LAST/SIZE\"", q);
    size_t i = 6;
    uint64_t a = 0, e = 0, t = 0;
    if (i < n && v[i] == '*') {
        i++;
        if (i >= n || v[i] != '/')
            return head_bad(h, TBX_E_FORMAT, F, at + i, "\"%s\": expected '/' after '*'", q);
        i++;
        if (!take_num(v, n, &i, &t) || i != n)
            return head_bad(h, TBX_E_FORMAT, F, at + i, "\"%s\": the size is not a number below "
                            "2^63", q);
        h->cr_star = true;
        h->cr_total = t;
        return TBX_OK;
    }
    if (!take_num(v, n, &i, &a))
        return head_bad(h, TBX_E_FORMAT, F, at + i, "\"%s\": the first byte is not a number "
                        "below 2^63", q);
    if (i >= n || v[i] != '-')
        return head_bad(h, TBX_E_FORMAT, F, at + i, "\"%s\": expected '-' after the first byte",
                        q);
    i++;
    size_t at_last = i;
    if (!take_num(v, n, &i, &e))
        return head_bad(h, TBX_E_FORMAT, F, at + i, "\"%s\": the last byte is not a number "
                        "below 2^63", q);
    if (i >= n || v[i] != '/')
        return head_bad(h, TBX_E_FORMAT, F, at + i, "\"%s\": expected '/' after the last byte",
                        q);
    i++;
    size_t at_total = i;
    if (i < n && v[i] == '*')
        return head_bad(h, TBX_E_UNSUPPORTED, F, at + i, "\"%s\": the server does not say the "
                        "file's size ('*')", q);
    if (!take_num(v, n, &i, &t) || i != n)
        return head_bad(h, TBX_E_FORMAT, F, at + i, "\"%s\": the size is not a number below "
                        "2^63", q);
    if (e < a)
        return head_bad(h, TBX_E_FORMAT, F, at + at_last, "\"%s\": the last byte %" PRIu64
                        " is before the first %" PRIu64, q, e, a);
    if (e >= t)
        return head_bad(h, TBX_E_FORMAT, F, at + at_total, "\"%s\": the last byte %" PRIu64
                        " is past the end of a file of %" PRIu64 " bytes", q, e, t);
    h->cr_ok = true;
    h->cr_a = a;
    h->cr_b = e;
    h->cr_total = t;
    return TBX_OK;
}

static tbx_status parse_content_length(tbx_http_head *h, const char *v, size_t n, uint64_t at) {
    static const char F[] = "Content-Length";
    char q[300];
    shown(q, sizeof q, v, n);
    size_t i = 0;
    uint64_t c = 0;
    if (!take_num(v, n, &i, &c) || i != n)
        return head_bad(h, TBX_E_FORMAT, F, at + i, "\"%s\" is not a number below 2^63", q);
    if (h->has_clen && h->clen != c)
        return head_bad(h, TBX_E_FORMAT, F, at, "sent twice with different values (%" PRIu64
                        " and %" PRIu64 ")", h->clen, c);
    h->has_clen = true;
    h->clen = c;
    return TBX_OK;
}

/* ETag (opaque: visible bytes, no control byte) or Last-Modified (an HTTP date: printable
 * ASCII), kept whole to be compared on every answer. */
static tbx_status parse_tag(tbx_http_head *h, const char *F, char *dst, bool *seen, bool ascii,
                            const char *v, size_t n, uint64_t at) {
    char q[300];
    shown(q, sizeof q, v, n);
    if (n == 0) return head_bad(h, TBX_E_FORMAT, F, at, "is empty");
    if (n >= TBX_HTTP_TAG_MAX)
        return head_bad(h, TBX_E_LIMIT, F, at, "has %zu bytes, more than the %d accepted", n,
                        TBX_HTTP_TAG_MAX - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f || (ascii && c >= 0x80))
            return head_bad(h, TBX_E_FORMAT, F, at + i, "\"%s\": byte 0x%02x is not allowed "
                            "here", q, c);
    }
    if (*seen && (strlen(dst) != n || memcmp(dst, v, n) != 0))
        return head_bad(h, TBX_E_FORMAT, F, at, "sent twice with different values (the second "
                        "\"%s\")", q);
    memcpy(dst, v, n);
    dst[n] = 0;
    *seen = true;
    return TBX_OK;
}

/* Link (RFC 8288): link-values "<URI>; param=value; ..." separated by commas; the URI of the
 * one whose rel (a token or a quoted list of relation types) names "next" is kept. Parsing
 * stops quietly at the first syntax it cannot read before a next link is found (a link the
 * remote layer does not use); a next link is read strictly. */
static bool rel_has_next(const char *r, size_t n) {
    size_t i = 0;
    while (i < n) {
        while (i < n && (r[i] == ' ' || r[i] == '\t')) i++;
        size_t b = i;
        while (i < n && r[i] != ' ' && r[i] != '\t') i++;
        if (i - b == 4 && !strncasecmp(r + b, "next", 4)) return true;
    }
    return false;
}

static tbx_status parse_link(tbx_http_head *h, const char *v, size_t n, uint64_t at) {
    static const char F[] = "Link";
    size_t i = 0;
    while (i < n) {
        while (i < n && (is_ows(v[i]) || v[i] == ',')) i++;
        if (i >= n || v[i] != '<') return TBX_OK;
        size_t u0 = ++i;
        while (i < n && v[i] != '>') i++;
        if (i >= n) return TBX_OK;
        size_t u1 = i++;
        bool next = false;
        /* the parameters, up to the next ',' outside quotes */
        while (i < n && v[i] != ',') {
            while (i < n && is_ows(v[i])) i++;
            if (i < n && v[i] == ',') break;
            if (i >= n || v[i] != ';') return TBX_OK;
            i++;
            while (i < n && is_ows(v[i])) i++;
            size_t k0 = i;
            while (i < n && v[i] != '=' && v[i] != ';' && v[i] != ',' && !is_ows(v[i])) i++;
            size_t k1 = i;
            while (i < n && is_ows(v[i])) i++;
            const char *pv = v + i;
            size_t pn = 0;
            if (i < n && v[i] == '=') {
                i++;
                while (i < n && is_ows(v[i])) i++;
                if (i < n && v[i] == '"') {
                    size_t q0 = ++i;
                    while (i < n && v[i] != '"') i += v[i] == '\\' ? 2 : 1;
                    if (i >= n) return TBX_OK;
                    pv = v + q0;
                    pn = i - q0;
                    i++;
                } else {
                    size_t t0 = i;
                    while (i < n && v[i] != ';' && v[i] != ',' && !is_ows(v[i])) i++;
                    pv = v + t0;
                    pn = i - t0;
                }
            }
            if (k1 - k0 == 3 && !strncasecmp(v + k0, "rel", 3) && rel_has_next(pv, pn))
                next = true;
        }
        if (!next) continue;
        const char *u = v + u0;
        size_t un = u1 - u0;
        if (un == 0) return head_bad(h, TBX_E_FORMAT, F, at + u0, "the next link is empty");
        if (un >= TBX_HTTP_LINK_MAX)
            return head_bad(h, TBX_E_LIMIT, F, at + u0, "the next link has %zu bytes, more than "
                            "the %d accepted", un, TBX_HTTP_LINK_MAX - 1);
        for (size_t k = 0; k < un; k++) {
            unsigned char c = (unsigned char)u[k];
            if (c <= 0x20 || c >= 0x7f)
                return head_bad(h, TBX_E_FORMAT, F, at + u0 + k, "the next link's byte 0x%02x "
                                "is not allowed in a URI", c);
        }
        if (h->next[0] && (strlen(h->next) != un || memcmp(h->next, u, un) != 0))
            return head_bad(h, TBX_E_FORMAT, F, at + u0, "two different next links");
        memcpy(h->next, u, un);
        h->next[un] = 0;
    }
    return TBX_OK;
}

/* The origin of an absolute http(s) URL: its length ("scheme://authority"), 0 when `u` is not
 * one. */
static size_t origin_len(const char *u) {
    size_t s = !strncasecmp(u, "https://", 8) ? 8 : !strncasecmp(u, "http://", 7) ? 7 : 0;
    if (!s) return 0;
    size_t i = s;
    while (u[i] && u[i] != '/' && u[i] != '?' && u[i] != '#') i++;
    return i > s ? i : 0;
}

tbx_status tbx_http_next_url(const char *url, const char *link, char *out, size_t cap,
                             tbx_error *err) {
    size_t ou = origin_len(url), ol = origin_len(link);
    char q[300];
    shown(q, sizeof q, link, strlen(link));
    int w;
    if (ol) {
        if (ol != ou || strncasecmp(url, link, ou) != 0)
            return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "Link", "Link: the next page "
                           "\"%s\" is on another origin than %.*s (credentials are not sent "
                           "elsewhere)", q, (int)(ou < 200 ? ou : 200), url);
        w = snprintf(out, cap, "%s", link);
    } else if (link[0] == '/' && link[1] != '/' && ou) {
        w = snprintf(out, cap, "%.*s%s", (int)ou, url, link);
    } else {
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "Link", "Link: the next page \"%s\" "
                       "is neither an absolute http(s) URL nor a path starting with '/'", q);
    }
    if (w < 0 || (size_t)w >= cap)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "Link", "Link: the next page's URL "
                       "does not fit in %zu bytes", cap);
    return TBX_OK;
}

static bool name_is(const char *b, size_t colon, const char *name) {
    return strlen(name) == colon && strncasecmp(b, name, colon) == 0;
}

tbx_status tbx_http_head_line(tbx_http_head *h, const char *b, size_t n) {
    uint64_t at = h->nbytes;
    if (n >= 5 && !memcmp(b, "HTTP/", 5)) { /* a new answer (each of a redirect chain) */
        tbx_http_head_reset(h);
        h->nbytes = n;
        return parse_status(h, b, n);
    }
    h->nbytes += n;
    while (n && (b[n - 1] == '\n' || b[n - 1] == '\r')) n--;
    if (n == 0) { h->last_tracked = false; return TBX_OK; } /* the end of the block */
    if (is_ows(b[0])) {
        /* an obsolete folded continuation of the line before */
        if (h->last_tracked)
            return head_bad(h, TBX_E_FORMAT, h->last_name, at, "continued on a folded line");
        return TBX_OK;
    }
    const char *colon = memchr(b, ':', n);
    h->last_tracked = false;
    if (!colon) return TBX_OK;
    size_t c = (size_t)(colon - b);
    const char *names[5] = {"Content-Range", "Content-Length", "ETag", "Last-Modified", "Link"};
    int which = -1;
    for (int k = 0; k < 5; k++)
        if (name_is(b, c, names[k])) which = k;
    if (which < 0) return TBX_OK;
    h->last_tracked = true;
    h->last_name = names[which];
    size_t i = c + 1, e = n;
    while (i < e && is_ows(b[i])) i++;
    while (e > i && is_ows(b[e - 1])) e--;
    const char *v = b + i;
    size_t vn = e - i;
    uint64_t vat = at + i;
    switch (which) {
    case 0: return parse_content_range(h, v, vn, vat);
    case 1: return parse_content_length(h, v, vn, vat);
    case 2: return parse_tag(h, "ETag", h->etag, &h->has_etag, false, v, vn, vat);
    case 4: return parse_link(h, v, vn, vat);
    default: return parse_tag(h, "Last-Modified", h->lastmod, &h->has_lastmod, true, v, vn, vat);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Is the answer what was asked for?                                                           */
/* ------------------------------------------------------------------------------------------ */
static tbx_status ans_bad(tbx_error *err, tbx_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tbx_status ans_bad(tbx_error *err, tbx_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tbx_status st = tbx_verr(err, code, TBX_NO_OFFSET, "answer", fmt, ap);
    va_end(ap);
    return st;
}

tbx_status tbx_http_check(const tbx_http_head *h, const tbx_http_want *w, tbx_http_got *g,
                          tbx_error *err) {
    memset(g, 0, sizeof *g);
    if (h->err.code != TBX_OK && h->status >= 200 && h->status < 300) {
        if (err) *err = h->err;
        return h->err.code;
    }
    if (w->whole) {
        if (h->status != 200) return ans_bad(err, TBX_E_IO, "HTTP %ld", h->status);
        if (h->has_clen && h->clen > w->max)
            return ans_bad(err, TBX_E_LIMIT, "the document has %" PRIu64 " bytes, more than "
                           "the %zu accepted", h->clen, w->max);
        return TBX_OK;
    }
    if (w->len == 0) return ans_bad(err, TBX_E_INVALID_ARG, "an empty range was asked for");
    uint64_t want_end = w->off + w->len - 1;
    if (h->status == 206) {
        if (!h->cr_ok)
            return ans_bad(err, TBX_E_IO, "HTTP 206 without a valid Content-Range");
        if (w->probe) {
            if (h->cr_a != 0 || h->cr_b > want_end ||
                (h->cr_b < want_end && h->cr_b + 1 != h->cr_total))
                return ans_bad(err, TBX_E_IO, "asked for bytes 0-%" PRIu64 ", the server sent "
                               "bytes %" PRIu64 "-%" PRIu64 " of %" PRIu64, want_end, h->cr_a,
                               h->cr_b, h->cr_total);
            if (h->has_clen && h->clen != h->cr_b + 1)
                return ans_bad(err, TBX_E_IO, "Content-Length %" PRIu64 " is not the %" PRIu64
                               " bytes of its Content-Range", h->clen, h->cr_b + 1);
            g->len = (size_t)(h->cr_b + 1);
            g->size = h->cr_total;
            g->learn = true;
            return TBX_OK;
        }
        if (h->cr_total != w->size)
            return ans_bad(err, TBX_E_IO, "the file changed while it was read: it had %" PRIu64
                           " bytes, now %" PRIu64, w->size, h->cr_total);
        if (h->cr_a != w->off || h->cr_b != want_end)
            return ans_bad(err, TBX_E_IO, "asked for bytes %" PRIu64 "-%" PRIu64 ", the server "
                           "sent bytes %" PRIu64 "-%" PRIu64, w->off, want_end, h->cr_a,
                           h->cr_b);
        if (h->has_clen && h->clen != w->len)
            return ans_bad(err, TBX_E_IO, "Content-Length %" PRIu64 " is not the %zu bytes of "
                           "its Content-Range", h->clen, w->len);
        char a[300], b[300];
        if (w->etag[0] && strcmp(w->etag, h->etag) != 0) {
            tbx_quote_bytes(a, sizeof a, w->etag, strlen(w->etag), 96);
            tbx_quote_bytes(b, sizeof b, h->etag, strlen(h->etag), 96);
            return ans_bad(err, TBX_E_IO, "the file changed while it was read (ETag %s, now %s)",
                           a, h->etag[0] ? b : "none");
        }
        if (!w->etag[0] && w->lastmod[0] && strcmp(w->lastmod, h->lastmod) != 0) {
            tbx_quote_bytes(a, sizeof a, w->lastmod, strlen(w->lastmod), 96);
            tbx_quote_bytes(b, sizeof b, h->lastmod, strlen(h->lastmod), 96);
            return ans_bad(err, TBX_E_IO, "the file changed while it was read (Last-Modified "
                           "%s, now %s)", a, h->lastmod[0] ? b : "none");
        }
        g->len = w->len;
        g->size = w->size;
        return TBX_OK;
    }
    if (h->status == 200) {
        /* the whole file: acceptable only when it is all that was asked for */
        if (w->probe && h->has_clen && h->clen <= w->len) {
            g->len = (size_t)h->clen;
            g->size = h->clen;
            g->learn = true;
            return TBX_OK;
        }
        return ans_bad(err, TBX_E_UNSUPPORTED, "the server ignored the range request (HTTP 200 "
                       "with the whole file instead of 206 Partial Content for bytes %" PRIu64
                       "-%" PRIu64 "): it cannot be read in parts", w->off, want_end);
    }
    /* bytes 0-N can only be unsatisfiable for an empty file (the store may not say so with
     * "Content-Range: bytes *\/0": gofakes3 does not) */
    if (w->probe && h->status == 416 && (!h->cr_star || h->cr_total == 0)) {
        g->discard = true;
        g->learn = true;
        return TBX_OK;
    }
    return ans_bad(err, TBX_E_IO, "HTTP %ld", h->status);
}

/* ------------------------------------------------------------------------------------------ */
/* The Hub's tree listing                                                                      */
/* ------------------------------------------------------------------------------------------ */
/* The offsets of the top-level elements of a JSON array that jansson has accepted (so the
 * text is valid JSON): strings skipped with their escapes, depth counted. */
static size_t next_element(const char *p, size_t n, size_t i) {
    int depth = 0;
    bool in_str = false;
    for (; i < n; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') in_str = true;
        else if (c == '[' || c == '{') depth++;
        else if (c == ']' || c == '}') {
            if (depth == 0) return i; /* the array's end */
            depth--;
        } else if (c == ',' && depth == 0) {
            i++;
            while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
            return i;
        }
    }
    return n;
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const tbx_hf_tree_entry *)a)->name, ((const tbx_hf_tree_entry *)b)->name);
}

void tbx_hf_tree_free(const tbx_alloc *al, tbx_hf_tree *t) {
    for (size_t i = 0; i < t->n; i++) tbx_free(al, t->e[i].name, strlen(t->e[i].name) + 1);
    tbx_free(al, t->e, t->cap * sizeof *t->e);
    memset(t, 0, sizeof *t);
}

tbx_status tbx_hf_tree_parse(const tbx_alloc *al, const char *body, size_t len, const char *dir,
                             const char *shown_as, size_t max_entries, tbx_hf_tree *t,
                             tbx_error *err) {
    static const char F[] = "tree";
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        size_t at = je.position > 0 ? (size_t)je.position : 0;
        if (at > len) at = len;
        if (json_error_code(&je) == json_error_out_of_memory)
            return tbx_err_nomem(err, "the Hub's tree");
        char why[256];
        tbx_json_reason(why, sizeof why, je.text, body, len, at);
        return tbx_err(err, json_error_code(&je) == json_error_stack_overflow ? TBX_E_LIMIT
                                                                             : TBX_E_FORMAT,
                       at, F, "%s: the Hub's tree is not valid JSON: %s", shown_as, why);
    }
    if (!json_is_array(root)) {
        json_decref(root);
        return tbx_err(err, TBX_E_FORMAT, 0, F, "%s: the Hub's tree is not a JSON array",
                       shown_as);
    }
    /* the first element's offset */
    size_t at = 0;
    while (at < len && body[at] != '[') at++;
    at++;
    while (at < len && (body[at] == ' ' || body[at] == '\t' || body[at] == '\n' ||
                        body[at] == '\r'))
        at++;
    size_t dl = strlen(dir);
    tbx_status st = TBX_OK;
    for (size_t i = 0; i < json_array_size(root) && st == TBX_OK;
         i++, at = next_element(body, len, at)) {
        json_t *e = json_array_get(root, i);
        if (!json_is_object(e)) {
            st = tbx_err(err, TBX_E_FORMAT, at, F, "%s: entry %zu of the Hub's tree is not an "
                         "object", shown_as, i);
            break;
        }
        json_t *jp = json_object_get(e, "path"), *jt = json_object_get(e, "type");
        json_t *js = json_object_get(e, "size");
        if (!json_is_string(jp) || !json_is_string(jt)) {
            st = tbx_err(err, TBX_E_FORMAT, at, !json_is_string(jp) ? "tree.path" : "tree.type",
                         "%s: entry %zu of the Hub's tree has no string \"%s\"", shown_as, i,
                         !json_is_string(jp) ? "path" : "type");
            break;
        }
        const char *type = json_string_value(jt);
        bool is_dir = !strcmp(type, "directory");
        if (!is_dir && strcmp(type, "file") != 0) {
            char q[100];
            tbx_quote_bytes(q, sizeof q, type, json_string_length(jt), 32);
            st = tbx_err(err, TBX_E_FORMAT, at, "tree.type", "%s: entry %zu of the Hub's tree "
                         "has type \"%s\", not \"file\" or \"directory\"", shown_as, i, q);
            break;
        }
        uint64_t size = 0;
        if (js || !is_dir) {
            if (!json_is_integer(js) || json_integer_value(js) < 0) {
                st = tbx_err(err, TBX_E_FORMAT, at, "tree.size", "%s: entry %zu of the Hub's "
                             "tree has no \"size\" that is an integer >= 0", shown_as, i);
                break;
            }
            size = (uint64_t)json_integer_value(js);
        }
        const char *path = json_string_value(jp);
        size_t plen = json_string_length(jp);
        if (strncmp(path, dir, dl) != 0 || plen == dl) continue; /* outside the directory */
        const char *rel = path + dl;
        const char *why = memchr(path, 0, plen) ? "contains a NUL byte"
                                                : tbx_provider_name_ok(rel);
        if (why) {
            char q[300];
            tbx_quote_bytes(q, sizeof q, path, plen, 200);
            st = tbx_err(err, TBX_E_FORMAT, at, "tree.path", "%s: entry %zu of the Hub's tree, "
                         "\"%s\", %s", shown_as, i, q, why);
            break;
        }
        if (t->n >= max_entries) {
            st = tbx_err(err, TBX_E_LIMIT, at, F, "%s: the repository lists more than %zu "
                         "entries", shown_as, max_entries);
            break;
        }
        if (!tbx_grow(al, (void **)&t->e, &t->cap, t->n + 1, sizeof *t->e)) {
            st = tbx_err_nomem(err, "the Hub's tree");
            break;
        }
        tbx_hf_tree_entry *en = &t->e[t->n];
        en->name = tbx_memdup0(al, rel, plen - dl);
        if (!en->name) { st = tbx_err_nomem(err, "the Hub's tree"); break; }
        en->dir = is_dir;
        en->size = size;
        en->at = at;
        en->index = i;
        t->n++;
    }
    json_decref(root);
    if (st != TBX_OK || t->n < 2) return st;
    /* a name listed twice (pages included): sorted, neighbours compared */
    qsort(t->e, t->n, sizeof *t->e, entry_cmp);
    for (size_t k = 1; k < t->n; k++) {
        if (strcmp(t->e[k - 1].name, t->e[k].name) != 0) continue;
        const tbx_hf_tree_entry *d = t->e[k - 1].at > t->e[k].at ? &t->e[k - 1] : &t->e[k];
        char q[300];
        tbx_quote_bytes(q, sizeof q, d->name, strlen(d->name), 200);
        return tbx_err(err, TBX_E_DUPLICATE, d->at, "tree.path", "%s: entry %zu of the Hub's "
                       "tree, \"%s%s\", is listed twice", shown_as, d->index, dir, q);
    }
    return TBX_OK;
}
