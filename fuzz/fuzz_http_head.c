/*
 * fuzz_http_head.c - libFuzzer target: the input is an HTTP answer's header block as a server
 * sends it (src/io/http_parse.c: what remote.c takes from every answer).
 *
 * The first two bytes choose the request the answer is judged for (a probe of the file's
 * first bytes, a range of a file whose size and ETag the probe learnt, or a small document);
 * the rest is fed line by line to tbx_http_head_line, then tbx_http_check decides. Checks: a
 * malformed block names the header in its field and an offset inside the bytes fed; a kept
 * Content-Range is a real range of its size; a tag is NUL-terminated and shorter than
 * TBX_HTTP_TAG_MAX; an accepted answer never gives more bytes than were asked, a range other
 * than the one asked, or a size other than the one known; a refusal is described.
 * Seeds: fuzz/make_remote_seeds.py (nginx's and an S3 store's answers).
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_http_head; every build also makes
 * build/fuzz/replay_http_head, which replays fuzz/corpus/http_head/ (see replay_main.c).
 */
#include "io.h"
#include "fuzz_heap.h" /* FZ_CHECK */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(const tbx_error *e, const char *what) {
    FZ_CHECK(e->code != TBX_OK, what);
    FZ_CHECK(memchr(e->field, 0, sizeof e->field) && e->field[0], what);
    FZ_CHECK(memchr(e->message, 0, sizeof e->message) && e->message[0], what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    unsigned mode = data[0] % 3;
    size_t len = (size_t)1 + (size_t)data[1] * 257;
    const char *b = (const char *)data + 2;
    size_t n = size - 2;

    tbx_http_head h;
    tbx_http_head_reset(&h);
    uint64_t fed = 0;
    size_t i = 0;
    while (i < n) {
        /* lines as libcurl hands them: each up to and including its LF */
        const char *nl = memchr(b + i, '\n', n - i);
        size_t k = nl ? (size_t)(nl - (b + i)) + 1 : n - i;
        if (k >= 5 && !memcmp(b + i, "HTTP/", 5)) fed = 0;
        tbx_status st = tbx_http_head_line(&h, b + i, k);
        (void)st;
        fed += k;
        FZ_CHECK(h.nbytes == fed, "the block's byte count is the bytes fed since its status line");
        i += k;
    }
    if (h.err.code != TBX_OK) {
        check_err(&h.err, "a malformed block is described");
        FZ_CHECK(h.err.offset <= h.nbytes, "the offset is inside the bytes fed");
        FZ_CHECK(strstr(h.err.message, h.err.field) != NULL, "the message names the header");
    } else {
        if (h.cr_ok) FZ_CHECK(h.cr_a <= h.cr_b && h.cr_b < h.cr_total, "a range of its size");
        FZ_CHECK(!(h.cr_ok && h.cr_star), "one form of Content-Range");
        if (h.status) FZ_CHECK(h.status >= 100 && h.status <= 999, "a three-digit status");
    }
    FZ_CHECK(strlen(h.etag) < TBX_HTTP_TAG_MAX && strlen(h.lastmod) < TBX_HTTP_TAG_MAX,
             "tags are NUL-terminated inside their buffers");
    FZ_CHECK(memchr(h.next, 0, sizeof h.next), "the next link is NUL-terminated in its buffer");
    if (h.next[0]) {
        /* a next page is followed only on the request's origin */
        static const char base[] = "https://hf.example:8443/api/models/o/r/tree/main?x=1";
        char out[TBX_HTTP_LINK_MAX + 64];
        tbx_error e;
        memset(&e, 0, sizeof e);
        /* the origin, then the path, the query, the fragment or nothing */
        if (tbx_http_next_url(base, h.next, out, sizeof out, &e) == TBX_OK)
            FZ_CHECK(!strncasecmp(out, "https://hf.example:8443", 23) &&
                         (!out[23] || strchr("/?#", out[23])),
                     "a followed page is on the request's origin");
        else check_err(&e, "a refused next page is described");
    }

    tbx_http_want w;
    memset(&w, 0, sizeof w);
    w.etag = "\"e\"";
    w.lastmod = "";
    if (mode == 0) {
        w.probe = true;
        w.len = len;
        w.etag = "";
    } else if (mode == 1) {
        /* a range of the file the answer itself describes (so that acceptance is reachable) */
        w.off = h.cr_ok ? h.cr_a : 0;
        w.len = h.cr_ok ? (size_t)(h.cr_b - h.cr_a + 1) : len;
        w.size = h.cr_ok ? h.cr_total : w.off + w.len;
        w.etag = h.etag;
    } else {
        w.whole = true;
        w.max = len;
    }
    tbx_http_got g;
    tbx_error e;
    memset(&e, 0, sizeof e);
    tbx_status st = tbx_http_check(&h, &w, &g, &e);
    if (st != TBX_OK) {
        check_err(&e, "a refused answer is described");
        FZ_CHECK(st == e.code, "the status returned is the one described");
        return 0;
    }
    FZ_CHECK(h.err.code == TBX_OK || h.status < 200 || h.status >= 300,
             "a malformed 2xx answer is never accepted");
    if (w.whole) {
        FZ_CHECK(h.status == 200, "a document is a 200");
        FZ_CHECK(!h.has_clen || h.clen <= w.max, "a document within its bound");
        return 0;
    }
    FZ_CHECK(g.len <= w.len, "never more bytes than asked");
    if (g.discard) {
        FZ_CHECK(w.probe && g.learn && g.size == 0 && g.len == 0, "only an empty file's 416");
        return 0;
    }
    if (w.probe) {
        FZ_CHECK(g.learn && g.len <= g.size, "a probe learns a size that holds what it took");
        FZ_CHECK(g.len == w.len || g.len == g.size, "a short probe is the whole file");
        if (h.status == 206) FZ_CHECK(h.cr_a == 0 && h.cr_b + 1 == g.len, "the range from 0");
    } else {
        FZ_CHECK(h.status == 206 && h.cr_a == w.off && h.cr_b + 1 - w.off == w.len,
                 "exactly the range asked");
        FZ_CHECK(h.cr_total == w.size && g.len == w.len && !g.learn, "the file as known");
        FZ_CHECK(!w.etag[0] || !strcmp(w.etag, h.etag), "the same version");
    }
    return 0;
}
