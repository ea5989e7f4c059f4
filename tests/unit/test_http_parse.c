/*
 * test_http_parse.c - what the remote layer takes from servers, from bytes (src/io/http_parse.c):
 * header blocks as nginx and S3 stores send them, a table of malformed headers each refused
 * naming the header and the byte of the block it is at, the decision whether an answer is the
 * range asked for, and the Hub's tree listing with a table of malformed listings (field and
 * byte offset of the entry). Every expected offset is found in the bytes the case builds (the
 * position of a marker), never copied from the parser's output.
 */
#define _GNU_SOURCE
#include "tbx_test.h"

#include "io.h"

/* Feeds a header block (lines ending in "\r\n") line by line. */
static tbx_status feed(tbx_http_head *h, const char *block, size_t n) {
    tbx_http_head_reset(h);
    size_t i = 0;
    while (i < n) {
        const char *nl = memchr(block + i, '\n', n - i);
        size_t k = nl ? (size_t)(nl - (block + i)) + 1 : n - i;
        tbx_http_head_line(h, block + i, k);
        i += k;
    }
    return h->err.code;
}

static const char NGINX_206[] =
    "HTTP/1.1 206 Partial Content\r\n"
    "Server: nginx/1.22.1\r\n"
    "Date: Sat, 28 Nov 2026 02:00:00 GMT\r\n"
    "Content-Type: application/octet-stream\r\n"
    "Content-Length: 65536\r\n"
    "Last-Modified: Sat, 28 Nov 2026 01:59:58 GMT\r\n"
    "Connection: keep-alive\r\n"
    "ETag: \"6929c0ce-40000000\"\r\n"
    "Content-Range: bytes 0-65535/1073741824\r\n"
    "\r\n";

TBX_TEST(nginx_answer_is_read) {
    tbx_http_head h;
    CHECK_OK(feed(&h, NGINX_206, sizeof NGINX_206 - 1));
    CHECK_EQ(h.status, 206);
    CHECK(h.cr_ok && !h.cr_star);
    CHECK_EQ(h.cr_a, 0);
    CHECK_EQ(h.cr_b, 65535);
    CHECK_EQ(h.cr_total, 1073741824);
    CHECK(h.has_clen);
    CHECK_EQ(h.clen, 65536);
    CHECK_STR(h.etag, "\"6929c0ce-40000000\"");
    CHECK_STR(h.lastmod, "Sat, 28 Nov 2026 01:59:58 GMT");
    CHECK_EQ(h.nbytes, sizeof NGINX_206 - 1);

    tbx_http_want w = {.probe = true, .off = 0, .len = 65536, .etag = "", .lastmod = ""};
    tbx_http_got g;
    tbx_error e;
    CHECK_OK(tbx_http_check(&h, &w, &g, &e));
    CHECK(g.learn && !g.discard);
    CHECK_EQ(g.len, 65536);
    CHECK_EQ(g.size, 1073741824);
}

TBX_TEST(redirect_chain_keeps_only_the_last_answer) {
    /* a 302 with a malformed Content-Length, then HTTP/2's status line, names in lower case */
    static const char b[] =
        "HTTP/1.1 302 Found\r\n"
        "Location: /cdn/x\r\n"
        "Content-Length: nope\r\n"
        "\r\n"
        "HTTP/2 206\r\n"
        "content-range: bytes 10-19/100\r\n"
        "content-length: 10\r\n"
        "etag: W/\"x\"\r\n"
        "\r\n";
    tbx_http_head h;
    CHECK_OK(feed(&h, b, sizeof b - 1));
    CHECK_EQ(h.status, 206);
    CHECK_EQ(h.cr_a, 10);
    CHECK_EQ(h.cr_b, 19);
    CHECK_EQ(h.cr_total, 100);
    CHECK_STR(h.etag, "W/\"x\"");
    tbx_http_want w = {.off = 10, .len = 10, .size = 100, .etag = "W/\"x\"", .lastmod = ""};
    tbx_http_got g;
    CHECK_OK(tbx_http_check(&h, &w, &g, NULL));
    CHECK_EQ(g.len, 10);
    CHECK(!g.learn);
}

typedef struct head_case {
    const char *what;
    const char *block;   /* lines after the status line "HTTP/1.1 206 Partial Content\r\n" */
    size_t len;          /* 0: strlen */
    tbx_status st;
    const char *field;
    const char *mark;    /* the error is at the first byte of this text (after `after`) */
    const char *after;   /* NULL: the search starts at the block's start */
} head_case;

TBX_TEST(malformed_headers_name_the_header_and_byte) {
    char etag_long[400];
    snprintf(etag_long, sizeof etag_long, "ETag: \"%0300d\"\r\n", 7);
    const head_case cases[] = {
        {"range letters", "Content-Range: bytes 0-x/10\r\n", 0, TBX_E_FORMAT, "Content-Range", "x/10", NULL},
        {"range negative", "Content-Range: bytes -1-5/10\r\n", 0, TBX_E_FORMAT, "Content-Range", "-1-5", NULL},
        {"range plus", "Content-Range: bytes +1-5/10\r\n", 0, TBX_E_FORMAT, "Content-Range", "+1", NULL},
        {"range 2^64", "Content-Range: bytes 0-18446744073709551616/10\r\n", 0, TBX_E_FORMAT, "Content-Range", "18446", NULL},
        {"range 2^63", "Content-Range: bytes 9223372036854775808-1/10\r\n", 0, TBX_E_FORMAT, "Content-Range", "92233", NULL},
        {"range backwards", "Content-Range: bytes 5-4/10\r\n", 0, TBX_E_FORMAT, "Content-Range", "4/10", NULL},
        {"range past size", "Content-Range: bytes 0-10/10\r\n", 0, TBX_E_FORMAT, "Content-Range", "10\r", "/"},
        {"size unknown", "Content-Range: bytes 0-9/*\r\n", 0, TBX_E_UNSUPPORTED, "Content-Range", "*", NULL},
        {"not bytes", "Content-Range: octets 0-1/2\r\n", 0, TBX_E_FORMAT, "Content-Range", "octets", NULL},
        {"no dash", "Content-Range: bytes 0/2\r\n", 0, TBX_E_FORMAT, "Content-Range", "/2", NULL},
        {"trailing", "Content-Range: bytes 0-1/2x\r\n", 0, TBX_E_FORMAT, "Content-Range", "x\r", NULL},
        {"star garbage", "Content-Range: bytes */1 2\r\n", 0, TBX_E_FORMAT, "Content-Range", " 2", "*/1"},
        {"range twice", "Content-Range: bytes 0-1/2\r\nContent-Range: bytes 0-1/2\r\n", 0, TBX_E_FORMAT, "Content-Range", "bytes", "\n"},
        {"folded range", "Content-Range: bytes 0-1/2\r\n  , 5-6/2\r\n", 0, TBX_E_FORMAT, "Content-Range", "  ,", NULL},
        {"length sign", "Content-Length: -5\r\n", 0, TBX_E_FORMAT, "Content-Length", "-5", NULL},
        {"length space", "Content-Length: 1 2\r\n", 0, TBX_E_FORMAT, "Content-Length", " 2", "1"},
        {"length hex", "Content-Length: 0x10\r\n", 0, TBX_E_FORMAT, "Content-Length", "x10", NULL},
        {"length empty", "Content-Length:\r\n", 0, TBX_E_FORMAT, "Content-Length", "\r\n", NULL},
        {"length 2^63", "Content-Length: 9223372036854775808\r\n", 0, TBX_E_FORMAT, "Content-Length", "92233", NULL},
        {"length twice", "Content-Length: 10\r\nContent-Length: 11\r\n", 0, TBX_E_FORMAT, "Content-Length", "11", NULL},
        {"etag control", "ETag: \"ab\x01" "c\"\r\n", 0, TBX_E_FORMAT, "ETag", "\x01", NULL},
        {"etag NUL", "ETag: \"ab\0c\"\r\n", 15, TBX_E_FORMAT, "ETag", "", "ab"},
        {"etag long", etag_long, 0, TBX_E_LIMIT, "ETag", "\"000", NULL},
        {"etag empty", "ETag:   \r\n", 0, TBX_E_FORMAT, "ETag", "\r\n", NULL},
        {"etag twice", "ETag: \"a\"\r\nETag: \"b\"\r\n", 0, TBX_E_FORMAT, "ETag", "\"b\"", NULL},
        {"date 8-bit", "Last-Modified: Sat, 28 Nov 2026 \xc3\xa9\r\n", 0, TBX_E_FORMAT, "Last-Modified", "\xc3", NULL},
        {"date twice", "Last-Modified: a\r\nLast-Modified: b\r\n", 0, TBX_E_FORMAT, "Last-Modified", "b\r", NULL},
    };
    static const char status[] = "HTTP/1.1 206 Partial Content\r\n";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const head_case *c = &cases[i];
        size_t bl = c->len ? c->len : strlen(c->block);
        char buf[1024];
        memcpy(buf, status, sizeof status - 1);
        memcpy(buf + sizeof status - 1, c->block, bl);
        size_t n = sizeof status - 1 + bl;
        const char *from = buf + sizeof status - 1;
        if (c->after) from = (const char *)memmem(from, bl, c->after, strlen(c->after)) + strlen(c->after);
        const char *m = *c->mark ? memmem(from, (size_t)(buf + n - from), c->mark, strlen(c->mark)) : from;
        uint64_t at = (uint64_t)(m - buf);
        tbx_http_head h;
        tbx_status st = feed(&h, buf, n);
        if (st != c->st || h.err.offset != at || strcmp(h.err.field, c->field) != 0)
            fprintf(stderr, "case \"%s\": status %s offset %" PRIu64 " field %s (%s); expected "
                    "%s %" PRIu64 " %s\n", c->what, tbx_status_name(st), h.err.offset,
                    h.err.field, h.err.message, tbx_status_name(c->st), at, c->field);
        CHECK_EQ(st, c->st);
        CHECK_EQ(h.err.offset, at);
        CHECK_STR(h.err.field, c->field);
        CHECK(strstr(h.err.message, c->field) != NULL);
        /* the answer is refused with that error */
        tbx_http_want w = {.probe = true, .len = 65536, .etag = "", .lastmod = ""};
        tbx_http_got g;
        tbx_error e;
        CHECK_EQ(tbx_http_check(&h, &w, &g, &e), c->st);
    }
}

TBX_TEST(malformed_status_lines) {
    const struct { const char *line; const char *mark; } cases[] = {
        {"HTTP/1.1 2x6 Partial\r\n", "2x6"},
        {"HTTP/1.1\r\n", "\r\n"},
        {"HTTP/1.1 20\r\n", "20"},
        {"HTTP/1.1 2066\r\n", "2066"},
        {"HTTP/1.a 206\r\n", "a"},
        {"HTTP/ 206\r\n", " 206"},
        {"HTTP/1.1 099 Low\r\n", "099"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tbx_http_head h;
        size_t n = strlen(cases[i].line);
        tbx_status st = feed(&h, cases[i].line, n);
        CHECK_EQ(st, TBX_E_FORMAT);
        CHECK_STR(h.err.field, "status line");
        uint64_t at = (uint64_t)(strstr(cases[i].line, cases[i].mark) - cases[i].line);
        if (h.err.offset != at)
            fprintf(stderr, "status case %zu: offset %" PRIu64 ", expected %" PRIu64 " (%s)\n",
                    i, h.err.offset, at, h.err.message);
        CHECK_EQ(h.err.offset, at);
    }
    /* exactly sized, no CRLF: nothing is read past the end (ASan) */
    tbx_http_head h;
    char *p = malloc(12);
    memcpy(p, "HTTP/1.1 206", 12);
    tbx_http_head_reset(&h);
    CHECK_OK(tbx_http_head_line(&h, p, 12));
    CHECK_EQ(h.status, 206);
    free(p);
}

/* An answer's block: status, then the lines given. */
static void answer(tbx_http_head *h, const char *status_and_lines) {
    CHECK_OK(feed(h, status_and_lines, strlen(status_and_lines)));
}

TBX_TEST(answers_other_than_the_range_asked_are_refused) {
    tbx_http_head h;
    tbx_http_got g;
    tbx_error e;
    const char *E = "\"v1\"";
    /* the server sends another range */
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 100-199/1000\r\nETag: \"v1\"\r\n\r\n");
    tbx_http_want w = {.off = 200, .len = 100, .size = 1000, .etag = E, .lastmod = ""};
    CHECK_EQ(tbx_http_check(&h, &w, &g, &e), TBX_E_IO);
    CHECK(strstr(e.message, "asked for bytes 200-299") && strstr(e.message, "100-199"));
    /* the file changed: ETag, then size */
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 200-299/1000\r\nETag: \"v2\"\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &w, &g, &e), TBX_E_IO);
    CHECK(strstr(e.message, "changed") && strstr(e.message, "\"v2\""));
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 200-299/1001\r\nETag: \"v1\"\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &w, &g, &e), TBX_E_IO);
    CHECK(strstr(e.message, "1001") != NULL);
    /* Last-Modified when there is no ETag */
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 200-299/1000\r\nLast-Modified: b\r\n\r\n");
    tbx_http_want wl = {.off = 200, .len = 100, .size = 1000, .etag = "", .lastmod = "a"};
    CHECK_EQ(tbx_http_check(&h, &wl, &g, &e), TBX_E_IO);
    CHECK(strstr(e.message, "Last-Modified") != NULL);
    /* the same answer, right */
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 200-299/1000\r\nETag: \"v1\"\r\n"
               "Content-Length: 100\r\n\r\n");
    CHECK_OK(tbx_http_check(&h, &w, &g, &e));
    CHECK_EQ(g.len, 100);
    /* a Content-Length that is not the range's */
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 200-299/1000\r\nETag: \"v1\"\r\n"
               "Content-Length: 1000\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &w, &g, &e), TBX_E_IO);
    CHECK(strstr(e.message, "Content-Length 1000") != NULL);
    /* 206 without Content-Range */
    answer(&h, "HTTP/1.1 206 X\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &w, &g, &e), TBX_E_IO);
    /* 200 (range ignored): only a probe of a file no larger than the probe takes it */
    answer(&h, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &w, &g, &e), TBX_E_UNSUPPORTED);
    tbx_http_want p = {.probe = true, .len = 4096, .etag = "", .lastmod = ""};
    CHECK_OK(tbx_http_check(&h, &p, &g, &e));
    CHECK(g.learn && g.len == 1000 && g.size == 1000);
    tbx_http_want p2 = {.probe = true, .len = 999, .etag = "", .lastmod = ""};
    CHECK_EQ(tbx_http_check(&h, &p2, &g, &e), TBX_E_UNSUPPORTED);
    /* a probe answered with more than asked, or not from byte 0 */
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 0-5000/9000\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &p, &g, &e), TBX_E_IO);
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 1-4096/9000\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &p, &g, &e), TBX_E_IO);
    /* a probe answered with less than asked: only the whole of a short file */
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 0-99/9000\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &p, &g, &e), TBX_E_IO);
    answer(&h, "HTTP/1.1 206 X\r\nContent-Range: bytes 0-99/100\r\n\r\n");
    CHECK_OK(tbx_http_check(&h, &p, &g, &e));
    CHECK(g.len == 100 && g.size == 100);
    /* an empty file: 416 for the probe only */
    answer(&h, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */0\r\n\r\n");
    CHECK_OK(tbx_http_check(&h, &p, &g, &e));
    CHECK(g.discard && g.learn && g.size == 0 && g.len == 0);
    answer(&h, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */7\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &p, &g, &e), TBX_E_IO);
    CHECK_EQ(tbx_http_check(&h, &w, &g, &e), TBX_E_IO);
    /* a document: 200 and at most max bytes */
    tbx_http_want d = {.whole = true, .max = 10, .etag = "", .lastmod = ""};
    answer(&h, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &d, &g, &e), TBX_E_LIMIT);
    answer(&h, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
    CHECK_OK(tbx_http_check(&h, &d, &g, &e));
    answer(&h, "HTTP/1.1 404 Not Found\r\n\r\n");
    CHECK_EQ(tbx_http_check(&h, &d, &g, &e), TBX_E_IO);
}

/* ------------------------------------------------------------------------------------------ */
/* The Hub's tree                                                                              */
/* ------------------------------------------------------------------------------------------ */
static const char HUB_TREE[] =
    "[{\"type\":\"file\",\"oid\":\"a6344aac8c09253b3b630fb776ae94478aa0275b\",\"size\":1519,"
    "\"path\":\".gitattributes\"},"
    "{\"type\":\"directory\",\"oid\":\"4e7bd1a6c8d7ff1e4d4ac3a6ab4d0c1b2ff9a3e1\",\"size\":0,"
    "\"path\":\"1_Pooling\"},"
    "{\"type\":\"file\",\"oid\":\"d1514c3162bbe87b343f565fadc62e6c06f04f03\",\"size\":190,"
    "\"path\":\"1_Pooling/config.json\"},"
    "{\"type\":\"file\",\"oid\":\"72b987fd805cfa2b58c4c8c952b274a11bfd5a00\",\"size\":612,"
    "\"path\":\"config.json\"},"
    "{\"type\":\"file\",\"oid\":\"6d1e4bd4b0d1e6b2\",\"size\":90868376,"
    "\"lfs\":{\"oid\":\"53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db\","
    "\"size\":90868376,\"pointerSize\":134},"
    "\"xetHash\":\"4b6f1a\",\"path\":\"model.safetensors\"}]";

static const tbx_hf_tree_entry *find(const tbx_hf_tree *t, const char *name) {
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].name, name)) return &t->e[i];
    return NULL;
}

TBX_TEST(hub_tree_is_read) {
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    tbx_hf_tree t = {0};
    tbx_error e;
    CHECK_OK(tbx_hf_tree_parse(&al, HUB_TREE, sizeof HUB_TREE - 1, "", "the listing", 100, &t, &e));
    CHECK_EQ(t.n, 5);
    const tbx_hf_tree_entry *m = find(&t, "model.safetensors");
    CHECK(m && !m->dir && m->size == 90868376);
    const tbx_hf_tree_entry *d = find(&t, "1_Pooling");
    CHECK(d && d->dir);
    CHECK(find(&t, "1_Pooling/config.json") && find(&t, "1_Pooling/config.json")->size == 190);
    for (size_t i = 1; i < t.n; i++) CHECK(strcmp(t.e[i - 1].name, t.e[i].name) < 0);
    tbx_hf_tree_free(&al, &t);
    /* a subdirectory: names relative to it, the rest left out */
    CHECK_OK(tbx_hf_tree_parse(&al, HUB_TREE, sizeof HUB_TREE - 1, "1_Pooling/", "l", 100, &t, &e));
    CHECK_EQ(t.n, 1);
    CHECK_STR(t.e[0].name, "config.json");
    tbx_hf_tree_free(&al, &t);
    CHECK_OK(tbx_hf_tree_parse(&al, " [ ] ", 5, "", "l", 100, &t, &e));
    CHECK_EQ(t.n, 0);
    tbx_hf_tree_free(&al, &t);
}

typedef struct tree_case {
    const char *what, *text;
    tbx_status st;
    const char *field;
    const char *mark;   /* the error is at this text's last occurrence (NULL: offset 0) */
    size_t max;
} tree_case;

TBX_TEST(malformed_trees_name_field_and_entry_offset) {
    const tree_case cases[] = {
        {"not an array", "{\"type\":\"file\"}", TBX_E_FORMAT, "tree", NULL, 100},
        {"not an object", "[{\"type\":\"file\",\"path\":\"a\",\"size\":1}, 7]", TBX_E_FORMAT, "tree", "7", 100},
        {"no path", "[ {\"type\":\"file\",\"size\":1}]", TBX_E_FORMAT, "tree.path", "{", 100},
        {"path a number", "[{\"type\":\"file\",\"path\":\"a\",\"size\":1},{\"type\":\"file\",\"path\":5}]", TBX_E_FORMAT, "tree.path", "{", 100},
        {"no type", "[{\"path\":\"a\",\"size\":1}]", TBX_E_FORMAT, "tree.type", "{", 100},
        {"unknown type", "[{\"type\":\"link\",\"path\":\"a\",\"size\":1}]", TBX_E_FORMAT, "tree.type", "{", 100},
        {"file without size", "[{\"type\":\"directory\",\"path\":\"d\"},\n {\"type\":\"file\",\"path\":\"a\"}]", TBX_E_FORMAT, "tree.size", "{", 100},
        {"negative size", "[{\"type\":\"file\",\"path\":\"a\",\"size\":-1}]", TBX_E_FORMAT, "tree.size", "{", 100},
        {"size a string", "[{\"type\":\"file\",\"path\":\"a\",\"size\":\"1\"}]", TBX_E_FORMAT, "tree.size", "{", 100},
        {"size a float", "[{\"type\":\"file\",\"path\":\"a\",\"size\":1.5}]", TBX_E_FORMAT, "tree.size", "{", 100},
        {"path outside", "[{\"type\":\"file\",\"path\":\"../etc/passwd\",\"size\":1}]", TBX_E_FORMAT, "tree.path", "{", 100},
        {"absolute path", "[{\"type\":\"file\",\"path\":\"a\",\"size\":1}, {\"type\":\"file\",\"path\":\"/x\",\"size\":1}]", TBX_E_FORMAT, "tree.path", "{", 100},
        {"empty component", "[{\"type\":\"file\",\"path\":\"a//b\",\"size\":1}]", TBX_E_FORMAT, "tree.path", "{", 100},
        {"duplicate", "[{\"type\":\"file\",\"path\":\"b\",\"size\":1},{\"type\":\"file\",\"path\":\"a\",\"size\":1},{\"type\":\"file\",\"path\":\"b\",\"size\":2}]", TBX_E_DUPLICATE, "tree.path", "{", 100},
        {"too many", "[{\"type\":\"file\",\"path\":\"a\",\"size\":1},{\"type\":\"file\",\"path\":\"b\",\"size\":1},{\"type\":\"file\",\"path\":\"c\",\"size\":1}]", TBX_E_LIMIT, "tree", "{", 2},
        {"strings with brackets", "[{\"type\":\"file\",\"path\":\"a]}\\\"[{,\",\"size\":1},{\"type\":\"x\",\"path\":\"b\"}]", TBX_E_FORMAT, "tree.type", "{", 100},
        {"duplicate key", "[{\"type\":\"file\",\"type\":\"file\",\"path\":\"a\",\"size\":1}]", TBX_E_FORMAT, "tree", "\"type\"", 100},
        {"cut", "[{\"type\":\"file\",\"path\":\"a\"", TBX_E_FORMAT, "tree", "", 100},
        {"NUL escape", "[{\"type\":\"file\",\"path\":\"a\\u0000b\",\"size\":1}]", TBX_E_FORMAT, "tree", "\"a\\u0000b\"", 100},
    };
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const tree_case *c = &cases[i];
        size_t n = strlen(c->text);
        uint64_t at = 0;
        if (c->mark) {
            const char *m = c->text + n;
            if (*c->mark)
                for (const char *q = c->text; (q = strstr(q, c->mark)) != NULL; q++) m = q;
            at = (uint64_t)(m - c->text);
        }
        tbx_hf_tree t = {0};
        tbx_error e;
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_hf_tree_parse(&al, c->text, n, "", "the listing", c->max, &t, &e);
        /* jansson's syntax errors are at the offending token or just past it */
        bool syn = st == TBX_E_FORMAT && !strcmp(c->field, "tree") && c->mark && c->st == st;
        bool at_ok = e.offset == at ||
                     (syn && strcmp(c->what, "not an object") != 0 && e.offset >= at &&
                      e.offset <= at + strlen(c->mark));
        if (st != c->st || !at_ok || strcmp(e.field, c->field) != 0)
            fprintf(stderr, "tree case \"%s\": %s at %" PRIu64 " field %s (%s); expected %s at "
                    "%" PRIu64 " field %s\n", c->what, tbx_status_name(st), e.offset, e.field,
                    e.message, tbx_status_name(c->st), at, c->field);
        CHECK_EQ(st, c->st);
        CHECK(at_ok);
        CHECK_STR(e.field, c->field);
        CHECK(strstr(e.message, "the listing") != NULL);
        tbx_hf_tree_free(&al, &t);
    }
}

/* Link: the next page's URI among other links and parameters (a quoted rel list, a comma
 * inside a quoted parameter, a link the parser cannot read after it); a malformed next link
 * refused naming "Link" and the byte of the URI; a next link resolved against the request's
 * URL only on its origin. */
TBX_TEST(link_next_page) {
    static const struct { const char *line, *next; } OK[] = {
        {"Link: <https://hf.co/api/models/o/r/tree/main?cursor=abc>; rel=\"next\"\r\n",
         "https://hf.co/api/models/o/r/tree/main?cursor=abc"},
        {"Link: </style.css>; rel=preload; title=\"a, b\", </p/2?x=1,2>; rel=\"last next\"\r\n",
         "/p/2?x=1,2"},
        {"link: </p/3>;REL=NEXT\r\n", "/p/3"},
        {"Link: </p/4>; rel=\"prev\"\r\n", ""},
        {"Link: garbage, </p/5>; rel=next\r\n", ""}, /* unreadable before any next link */
        {"Link: </p/6>; rel=\"nextish\"\r\n", ""},
    };
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++) {
        char block[512];
        int n = snprintf(block, sizeof block, "HTTP/1.1 200 OK\r\n%s\r\n", OK[i].line);
        tbx_http_head h;
        CHECK_EQ(feed(&h, block, (size_t)n), TBX_OK);
        CHECK_STR(h.next, OK[i].next);
    }
    static const struct { const char *line, *mark; tbx_status st; } BAD[] = {
        {"Link: <@>; rel=next\r\n", "@", TBX_E_FORMAT},
        {"Link: <@/a b>; rel=next\r\n", " b>", TBX_E_FORMAT},
        {"Link: <@/a>; rel=next, <@/b>; rel=next\r\n", "@/b", TBX_E_FORMAT},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char block[512];
        int n = snprintf(block, sizeof block, "HTTP/1.1 200 OK\r\nX: 1\r\n%s\r\n", BAD[i].line);
        /* '@' marks where the error is; an empty URI is "<>" */
        char *m = strstr(block, BAD[i].mark);
        uint64_t at = (uint64_t)(m - block);
        if (i == 0) { memmove(m, m + 1, strlen(m)); n--; }
        else *strchr(block, '@') = '/';
        if (i == 2) *strchr(block, '@') = '/';
        tbx_http_head h;
        CHECK_EQ(feed(&h, block, (size_t)n), BAD[i].st);
        CHECK_STR(h.err.field, "Link");
        CHECK_EQ(h.err.offset, at);
    }
    /* too long */
    static char big[TBX_HTTP_LINK_MAX + 64];
    int n = snprintf(big, sizeof big, "HTTP/1.1 200 OK\r\nLink: </");
    memset(big + n, 'a', TBX_HTTP_LINK_MAX);
    n += TBX_HTTP_LINK_MAX;
    n += snprintf(big + n, sizeof big - (size_t)n, ">; rel=next\r\n\r\n");
    tbx_http_head h;
    CHECK_EQ(feed(&h, big, (size_t)n), TBX_E_LIMIT);
    CHECK_STR(h.err.field, "Link");
    /* resolution against the request's URL */
    char out[256];
    tbx_error e;
    const char *base = "http://127.0.0.1:8080/api/models/o/r/tree/main?recursive=true";
    CHECK_OK(tbx_http_next_url(base, "/api/p/2?c=1", out, sizeof out, &e));
    CHECK_STR(out, "http://127.0.0.1:8080/api/p/2?c=1");
    CHECK_OK(tbx_http_next_url(base, "HTTP://127.0.0.1:8080/x", out, sizeof out, &e));
    CHECK_STR(out, "HTTP://127.0.0.1:8080/x");
    static const char *const OTHER[] = {"http://127.0.0.1:8081/x", "https://127.0.0.1:8080/x",
                                        "http://127.0.0.1:80800/x", "http://evil/x",
                                        "//127.0.0.1:8080/x", "p/2", "ftp://127.0.0.1:8080/x"};
    for (size_t i = 0; i < sizeof OTHER / sizeof OTHER[0]; i++) {
        memset(&e, 0, sizeof e);
        CHECK_EQ(tbx_http_next_url(base, OTHER[i], out, sizeof out, &e), TBX_E_FORMAT);
        CHECK_STR(e.field, "Link");
    }
    CHECK_EQ(tbx_http_next_url(base, "/a/b/c/d/e/f", out, 30, &e), TBX_E_LIMIT);
}

TBX_TEST_MAIN()
