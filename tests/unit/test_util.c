/*
 * test_util.c - unit tests of the core utilities: error records, status names, the allocator
 * indirection, the name hash set, UTF-8 validation and byte quoting.
 */
#define _GNU_SOURCE
#include "api.h"
#include "tbx_test.h"

#include <stdint.h>

/* ------------------------------------------------------------------------------------------ */
/* A counting allocator that checks the sizes given back to it.                                */
/* Each block carries a 16-byte header with the size that was asked for.                      */
/* ------------------------------------------------------------------------------------------ */
typedef struct counting {
    long live_blocks;
    long long live_bytes;
    long allocs, frees, reallocs;
    long size_mismatches;
    long fail_after; /* < 0: never fail; else the number of allocations that still succeed */
} counting;

static void *c_alloc(void *ud, size_t size) {
    counting *c = (counting *)ud;
    if (c->fail_after == 0) return NULL;
    if (c->fail_after > 0) c->fail_after--;
    unsigned char *p = (unsigned char *)malloc(size + 16);
    if (!p) return NULL;
    memcpy(p, &size, sizeof size);
    c->allocs++;
    c->live_blocks++;
    c->live_bytes += (long long)size;
    return p + 16;
}

static void *c_realloc(void *ud, void *ptr, size_t old_size, size_t new_size) {
    counting *c = (counting *)ud;
    unsigned char *h = (unsigned char *)ptr - 16;
    size_t rec;
    memcpy(&rec, h, sizeof rec);
    if (rec != old_size) c->size_mismatches++;
    if (c->fail_after == 0) return NULL;
    if (c->fail_after > 0) c->fail_after--;
    unsigned char *p = (unsigned char *)realloc(h, new_size + 16);
    if (!p) return NULL;
    memcpy(p, &new_size, sizeof new_size);
    c->reallocs++;
    c->live_bytes += (long long)new_size - (long long)rec;
    return p + 16;
}

static void c_free(void *ud, void *ptr, size_t size) {
    counting *c = (counting *)ud;
    unsigned char *h = (unsigned char *)ptr - 16;
    size_t rec;
    memcpy(&rec, h, sizeof rec);
    if (rec != size) c->size_mismatches++;
    c->frees++;
    c->live_blocks--;
    c->live_bytes -= (long long)rec;
    free(h);
}

static tbx_allocator counting_allocator(counting *c) {
    memset(c, 0, sizeof *c);
    c->fail_after = -1;
    tbx_allocator a = {c_alloc, c_realloc, c_free, c};
    return a;
}

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                      */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(error_formats_offset_suffix) {
    tbx_error e;
    memset(&e, 0x55, sizeof e);
    tbx_status st = tbx_err(&e, TBX_E_FORMAT, 12, "header.dtype", "header.dtype: bad value %d", 5);
    CHECK_EQ(st, TBX_E_FORMAT);
    CHECK_EQ(e.code, TBX_E_FORMAT);
    CHECK(e.offset == 12);
    CHECK_STR(e.field, "header.dtype");
    CHECK_STR(e.message, "header.dtype: bad value 5 at byte 12");

    st = tbx_err(&e, TBX_E_LIMIT, TBX_NO_OFFSET, NULL, "too many: %s", "tensors");
    CHECK_EQ(st, TBX_E_LIMIT);
    CHECK(e.offset == TBX_NO_OFFSET);
    CHECK_STR(e.field, "");
    CHECK_STR(e.message, "too many: tensors");

    /* The largest offset that is not TBX_NO_OFFSET. */
    tbx_err(&e, TBX_E_RANGE, UINT64_MAX - 1, "x", "x");
    CHECK_STR(e.message, "x at byte 18446744073709551614");
}

TBX_TEST(error_null_err_returns_code) {
    CHECK_EQ(tbx_err(NULL, TBX_E_TRUNCATED, 3, "f", "f: %d", 1), TBX_E_TRUNCATED);
    CHECK_EQ(tbx_err_nomem(NULL, "tensors"), TBX_E_NOMEM);
    CHECK_EQ(tbx_err(NULL, TBX_OK, TBX_NO_OFFSET, NULL, NULL), TBX_OK);
}

TBX_TEST(error_truncates_long_field_and_message) {
    tbx_error e;
    char field[200];
    memset(field, 'f', sizeof field - 1);
    field[sizeof field - 1] = '\0';
    tbx_err(&e, TBX_E_FORMAT, 7, field, "%s", "m");
    CHECK_EQ(strlen(e.field), sizeof e.field - 1);
    CHECK(strncmp(e.field, field, sizeof e.field - 1) == 0);

    /* A UTF-8 sequence straddling the cut is dropped whole. */
    char uf[80];
    memset(uf, 'a', 62);
    memcpy(uf + 62, "\xc3\xa9\xc3\xa9", 5);
    tbx_err(&e, TBX_E_FORMAT, TBX_NO_OFFSET, uf, "m");
    CHECK_EQ(strlen(e.field), 62);
    CHECK(tbx_utf8_valid(e.field, strlen(e.field), NULL));

    /* A long message keeps its offset suffix and marks the cut. */
    char big[1000];
    memset(big, 'm', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tbx_err(&e, TBX_E_FORMAT, 123456789, "f", "%s", big);
    size_t ml = strlen(e.message);
    CHECK_EQ(ml, sizeof e.message - 1);
    const char *suf = "... at byte 123456789";
    CHECK(ml > strlen(suf) && strcmp(e.message + ml - strlen(suf), suf) == 0);

    /* Without offset: just cut. */
    tbx_err(&e, TBX_E_FORMAT, TBX_NO_OFFSET, "f", "%s", big);
    CHECK_EQ(strlen(e.message), sizeof e.message - 1);
    CHECK_STR(e.message + sizeof e.message - 4, "...");
}

TBX_TEST(error_aliasing_and_one_line) {
    tbx_error e;
    tbx_err(&e, TBX_E_FORMAT, 4, "inner.field", "inner problem");
    /* Re-wrap the error in itself: field and message alias the record. */
    tbx_err(&e, e.code, 9, e.field, "outer: %s", e.message);
    CHECK_STR(e.field, "inner.field");
    CHECK_STR(e.message, "outer: inner problem at byte 4 at byte 9");
    CHECK(e.offset == 9);

    tbx_err(&e, TBX_E_FORMAT, TBX_NO_OFFSET, NULL, "line1\nline2\ttab");
    CHECK_STR(e.message, "line1 line2 tab");

    tbx_err(&e, TBX_E_CHECKSUM, TBX_NO_OFFSET, NULL, NULL);
    CHECK_STR(e.message, "checksum mismatch");
}

TBX_TEST(error_nomem) {
    tbx_error e;
    CHECK_EQ(tbx_err_nomem(&e, "tensor table"), TBX_E_NOMEM);
    CHECK_EQ(e.code, TBX_E_NOMEM);
    CHECK(e.offset == TBX_NO_OFFSET);
    CHECK_STR(e.field, "tensor table");
    CHECK_STR(e.message, "out of memory allocating tensor table");
    CHECK_EQ(tbx_err_nomem(&e, NULL), TBX_E_NOMEM);
    CHECK_STR(e.message, "out of memory");
}

TBX_TEST(status_names_and_strings) {
    static const char *const names[] = {
        "TBX_OK", "TBX_E_INVALID_ARG", "TBX_E_NOMEM", "TBX_E_IO", "TBX_E_TRUNCATED",
        "TBX_E_BAD_MAGIC", "TBX_E_BAD_VERSION", "TBX_E_FORMAT", "TBX_E_LIMIT", "TBX_E_OVERFLOW",
        "TBX_E_DUPLICATE", "TBX_E_RANGE", "TBX_E_UNSUPPORTED", "TBX_E_NOT_FOUND",
        "TBX_E_CHECKSUM", "TBX_E_BUFFER_TOO_SMALL", "TBX_E_STATE", "TBX_E_EXISTS",
        "TBX_E_LOSSY", "TBX_E_PADDING", "TBX_E_CANCELLED"};
    const int n = (int)(sizeof names / sizeof names[0]);
    CHECK_EQ(n, TBX_E_CANCELLED + 1);
    for (int i = 0; i < n; i++) {
        CHECK_STR(tbx_status_name((tbx_status)i), names[i]);
        const char *s = tbx_strerror((tbx_status)i);
        CHECK(s != NULL && *s != '\0');
        CHECK(strcmp(s, "unknown error") != 0);
        for (const char *q = s; *q; q++) CHECK(!(*q >= 'A' && *q <= 'Z'));
        for (int j = 0; j < i; j++) CHECK(strcmp(s, tbx_strerror((tbx_status)j)) != 0);
    }
    CHECK_STR(tbx_strerror(TBX_OK), "ok");
    CHECK_STR(tbx_strerror(TBX_E_TRUNCATED), "truncated");
    CHECK_STR(tbx_strerror(TBX_E_BAD_MAGIC), "bad magic");
    CHECK_STR(tbx_status_name((tbx_status)21), "TBX_E_UNKNOWN");
    CHECK_STR(tbx_status_name((tbx_status)-1), "TBX_E_UNKNOWN");
    CHECK_STR(tbx_status_name((tbx_status)100000), "TBX_E_UNKNOWN");
    CHECK_STR(tbx_strerror((tbx_status)21), "unknown error");
    CHECK_STR(tbx_strerror((tbx_status)-7), "unknown error");
}

/* ------------------------------------------------------------------------------------------ */
/* Allocation                                                                                  */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(alloc_default_and_invalid_user) {
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    CHECK(al.a.alloc == tbx_default_allocator.alloc);
    CHECK(al.a.realloc == tbx_default_allocator.realloc);
    CHECK(al.a.free == tbx_default_allocator.free);

    counting c;
    tbx_allocator a = counting_allocator(&c);
    a.free = NULL;
    tbx_alloc_init(&al, &a); /* incomplete: falls back to the default */
    CHECK(al.a.alloc == tbx_default_allocator.alloc);
    void *p = tbx_malloc(&al, 10);
    CHECK(p != NULL);
    tbx_free(&al, p, 10);
    CHECK_EQ(c.allocs, 0);

    /* A NULL tbx_alloc means the default allocator too. */
    p = tbx_malloc(NULL, 0);
    CHECK(p != NULL);
    tbx_free(NULL, p, 0);
    tbx_free(NULL, NULL, 5);
}

TBX_TEST(alloc_counting_sizes_match) {
    counting c;
    tbx_allocator a = counting_allocator(&c);
    tbx_alloc al;
    tbx_alloc_init(&al, &a);

    void *z = tbx_malloc(&al, 0);
    CHECK(z != NULL);
    z = tbx_realloc(&al, z, 0, 100);
    CHECK(z != NULL);
    memset(z, 1, 100);
    z = tbx_realloc(&al, z, 100, 0);
    CHECK(z != NULL);
    tbx_free(&al, z, 0);

    unsigned char *q = (unsigned char *)tbx_calloc(&al, 10, 7);
    CHECK(q != NULL);
    int zeros = 1;
    for (int i = 0; i < 70; i++) zeros &= q[i] == 0;
    CHECK(zeros);
    tbx_free(&al, q, 70);

    long before = c.allocs;
    CHECK(tbx_calloc(&al, SIZE_MAX / 2, 3) == NULL); /* overflow: never reaches the allocator */
    CHECK_EQ(c.allocs, before);
    void *r = tbx_realloc(&al, NULL, 0, 33); /* NULL pointer: plain allocation */
    CHECK(r != NULL);
    tbx_free(&al, r, 33);

    char *d = tbx_memdup0(&al, "abc\0def", 7);
    CHECK(d != NULL);
    CHECK(memcmp(d, "abc\0def", 8) == 0);
    tbx_free(&al, d, 8);
    d = tbx_memdup0(&al, NULL, 0);
    CHECK(d != NULL && d[0] == '\0');
    tbx_free(&al, d, 1);

    CHECK_EQ(c.size_mismatches, 0);
    CHECK_EQ(c.live_blocks, 0);
    CHECK_EQ(c.live_bytes, 0);
}

TBX_TEST(alloc_grow) {
    counting c;
    tbx_allocator a = counting_allocator(&c);
    tbx_alloc al;
    tbx_alloc_init(&al, &a);

    uint32_t *items = NULL;
    size_t cap = 0;
    void *vp = items;
    CHECK(tbx_grow(&al, &vp, &cap, 1, sizeof *items));
    items = (uint32_t *)vp;
    CHECK(cap >= 1);
    size_t grows = 0, lastcap = cap;
    int grew_ok = 1, geometric = 1;
    for (uint32_t i = 0; i < 100000; i++) {
        vp = items;
        if (!tbx_grow(&al, &vp, &cap, (size_t)i + 1, sizeof *items)) {
            grew_ok = 0;
            break;
        }
        items = (uint32_t *)vp;
        items[i] = i;
        if (cap != lastcap) {
            geometric &= cap >= 2 * lastcap;
            grows++;
            lastcap = cap;
        }
    }
    CHECK(grew_ok);
    CHECK(geometric);
    CHECK(grows < 20);
    int ok = 1;
    for (uint32_t i = 0; i < 100000; i++) ok &= items[i] == i;
    CHECK(ok);
    /* Never shrinks. */
    size_t oldcap = cap;
    vp = items;
    CHECK(tbx_grow(&al, &vp, &cap, 5, sizeof *items));
    CHECK_EQ(cap, oldcap);
    CHECK(vp == items);
    /* Overflowing requests fail and leave the array alone. */
    CHECK(!tbx_grow(&al, &vp, &cap, SIZE_MAX / 2, sizeof *items));
    CHECK_EQ(cap, oldcap);
    CHECK(vp == items);
    tbx_free(&al, items, cap * sizeof *items);

    /* Allocation failure leaves the array alone. */
    void *p2 = NULL;
    size_t cap2 = 0;
    CHECK(tbx_grow(&al, &p2, &cap2, 4, 8));
    c.fail_after = 0;
    void *keep = p2;
    CHECK(!tbx_grow(&al, &p2, &cap2, 1000, 8));
    CHECK(p2 == keep);
    c.fail_after = -1;
    tbx_free(&al, p2, cap2 * 8);

    CHECK_EQ(c.size_mismatches, 0);
    CHECK_EQ(c.live_blocks, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Names                                                                                       */
/* ------------------------------------------------------------------------------------------ */
typedef struct keyset {
    char **keys;
    size_t *lens;
} keyset;

static const char *keyset_key(const void *ctx, uint64_t i, size_t *len) {
    const keyset *k = (const keyset *)ctx;
    *len = k->lens[i];
    return k->keys[i];
}

TBX_TEST(names_many_keys) {
    enum { N = 200000 };
    counting c;
    tbx_allocator a = counting_allocator(&c);
    tbx_alloc al;
    tbx_alloc_init(&al, &a);

    /* Keys 0..N-1 are distinct; keys N..N+999 repeat keys 0, 200, 400, ... */
    keyset ks;
    ks.keys = (char **)calloc(N + 1000, sizeof(char *));
    ks.lens = (size_t *)calloc(N + 1000, sizeof(size_t));
    for (size_t i = 0; i < N + 1000; i++) {
        char tmp[64];
        size_t src = i < N ? i : (i - N) * 200;
        int l = snprintf(tmp, sizeof tmp, "model.layers.%zu.mlp.weight", src);
        ks.keys[i] = (char *)malloc((size_t)l + 1);
        memcpy(ks.keys[i], tmp, (size_t)l + 1);
        ks.lens[i] = (size_t)l;
    }

    tbx_names n;
    tbx_names_init(&n, &al, keyset_key, &ks);
    int all_ok = 1;
    for (size_t i = 0; i < N; i++) all_ok &= tbx_names_insert(&n, i, NULL) == TBX_OK;
    CHECK(all_ok);
    CHECK_EQ(n.count, N);
    CHECK(n.nslots >= 2 * n.count); /* load stays at or below one half */
    CHECK(tbx_is_pow2(n.nslots));

    int dups_ok = 1;
    for (size_t i = N; i < N + 1000; i++) {
        uint64_t prev = UINT64_MAX;
        dups_ok &= tbx_names_insert(&n, i, &prev) == TBX_E_DUPLICATE;
        dups_ok &= prev == (i - N) * 200;
    }
    CHECK(dups_ok);
    CHECK_EQ(n.count, N);

    int hits = 1;
    for (size_t i = 0; i < N; i++) {
        uint64_t idx = UINT64_MAX;
        hits &= tbx_names_find(&n, ks.keys[i], ks.lens[i], &idx) && idx == i;
    }
    CHECK(hits);
    int misses = 1;
    for (size_t i = 0; i < 1000; i++) {
        char tmp[64];
        int l = snprintf(tmp, sizeof tmp, "model.layers.%zu.mlp.bias", i);
        misses &= !tbx_names_find(&n, tmp, (size_t)l, NULL);
    }
    CHECK(misses);
    /* Prefixes are different keys. */
    CHECK(!tbx_names_find(&n, ks.keys[5], ks.lens[5] - 1, NULL));
    CHECK(!tbx_names_find(&n, "", 0, NULL));

    tbx_names_free(&n);
    CHECK(n.slots == NULL);
    CHECK(!tbx_names_find(&n, ks.keys[0], ks.lens[0], NULL));
    tbx_names_free(&n); /* twice is fine */
    CHECK_EQ(c.live_blocks, 0);
    CHECK_EQ(c.size_mismatches, 0);

    for (size_t i = 0; i < N + 1000; i++) free(ks.keys[i]);
    free(ks.keys);
    free(ks.lens);
}

TBX_TEST(names_binary_and_empty_keys) {
    char *keys[] = {(char *)"", (char *)"a\0b", (char *)"a\0c", (char *)"a", (char *)"",
                    (char *)"a\0b"};
    size_t lens[] = {0, 3, 3, 1, 0, 3};
    keyset ks = {keys, lens};
    tbx_names n;
    tbx_names_init(&n, NULL, keyset_key, &ks);
    CHECK(!tbx_names_find(&n, "a", 1, NULL)); /* empty set */
    CHECK_OK(tbx_names_insert(&n, 0, NULL));
    CHECK_OK(tbx_names_insert(&n, 1, NULL));
    CHECK_OK(tbx_names_insert(&n, 2, NULL));
    CHECK_OK(tbx_names_insert(&n, 3, NULL));
    uint64_t prev = 99;
    CHECK_EQ(tbx_names_insert(&n, 4, &prev), TBX_E_DUPLICATE);
    CHECK_EQ(prev, 0);
    CHECK_EQ(tbx_names_insert(&n, 5, &prev), TBX_E_DUPLICATE);
    CHECK_EQ(prev, 1);
    uint64_t idx = 99;
    CHECK(tbx_names_find(&n, "a\0c", 3, &idx));
    CHECK_EQ(idx, 2);
    CHECK(tbx_names_find(&n, "", 0, &idx));
    CHECK_EQ(idx, 0);
    CHECK(tbx_names_find(&n, NULL, 0, &idx));
    CHECK_EQ(idx, 0);
    CHECK(!tbx_names_find(&n, "a\0d", 3, NULL));
    CHECK_EQ(tbx_names_insert(&n, UINT64_MAX, NULL), TBX_E_INVALID_ARG);
    tbx_names_free(&n);

    tbx_names zero;
    memset(&zero, 0, sizeof zero);
    tbx_names_free(&zero);
    tbx_names_free(NULL);
    CHECK(!tbx_names_find(&zero, "a", 1, NULL));
}

/* A table reserved for a known count holds exactly that many keys without growing, in about
 * 4/3 slots per key (8 bytes a slot; not the next power of two), and finds them all. */
TBX_TEST(names_reserved_exact) {
    enum { N = 100000 };
    counting c;
    tbx_allocator a = counting_allocator(&c);
    tbx_alloc al;
    tbx_alloc_init(&al, &a);
    keyset ks;
    ks.keys = (char **)calloc(N, sizeof(char *));
    ks.lens = (size_t *)calloc(N, sizeof(size_t));
    for (size_t i = 0; i < N; i++) {
        char tmp[32];
        int l = snprintf(tmp, sizeof tmp, "t%07zu", i);
        ks.keys[i] = (char *)malloc((size_t)l + 1);
        memcpy(ks.keys[i], tmp, (size_t)l + 1);
        ks.lens[i] = (size_t)l;
    }
    tbx_names n;
    tbx_names_init(&n, &al, keyset_key, &ks);
    CHECK_OK(tbx_names_reserve(&n, N));
    long allocs = c.allocs;
    long long bytes = c.live_bytes;
    CHECK(bytes <= (long long)N * 4 / 3 * 8 + 64);     /* 131,072 slots would be 1 MiB */
    bool all_ok = true, hits = true;
    for (size_t i = 0; i < N; i++) all_ok &= tbx_names_insert(&n, i, NULL) == TBX_OK;
    CHECK(all_ok);
    CHECK_EQ(c.allocs, allocs);                          /* no growth */
    for (size_t i = 0; i < N; i++) {
        uint64_t idx = 0;
        hits &= tbx_names_find(&n, ks.keys[i], ks.lens[i], &idx) && idx == i;
    }
    CHECK(hits);
    CHECK(!tbx_names_find(&n, "t9999999", 8, NULL));
    CHECK_OK(tbx_names_insert(&n, 0, NULL) == TBX_E_DUPLICATE ? TBX_OK : TBX_E_FORMAT);
    tbx_names_free(&n);
    for (size_t i = 0; i < N; i++) free(ks.keys[i]);
    free(ks.keys);
    free(ks.lens);
    CHECK_EQ(c.live_blocks, 0);
}

TBX_TEST(names_oom) {
    counting c;
    tbx_allocator a = counting_allocator(&c);
    tbx_alloc al;
    tbx_alloc_init(&al, &a);
    char *keys[] = {(char *)"k0", (char *)"k1", (char *)"k2", (char *)"k3", (char *)"k4",
                    (char *)"k5", (char *)"k6"};
    size_t lens[] = {2, 2, 2, 2, 2, 2, 2};
    keyset ks = {keys, lens};
    tbx_names n;
    tbx_names_init(&n, &al, keyset_key, &ks);
    for (uint64_t i = 0; i < 6; i++) CHECK_OK(tbx_names_insert(&n, i, NULL));
    c.fail_after = 0; /* the seventh key needs a larger table (8 slots hold 6 at load 3/4) */
    CHECK_EQ(tbx_names_insert(&n, 6, NULL), TBX_E_NOMEM);
    c.fail_after = -1;
    for (uint64_t i = 0; i < 6; i++) CHECK(tbx_names_find(&n, keys[i], 2, NULL));
    CHECK(!tbx_names_find(&n, "k6", 2, NULL));
    CHECK_OK(tbx_names_insert(&n, 6, NULL));
    CHECK(tbx_names_find(&n, "k6", 2, NULL));
    tbx_names_free(&n);
    CHECK_EQ(c.live_blocks, 0);
    CHECK_EQ(c.size_mismatches, 0);
}

TBX_TEST(hash_bytes_properties) {
    CHECK(tbx_hash_bytes("abc", 3) == tbx_hash_bytes("abc", 3));
    CHECK(tbx_hash_bytes("abc", 3) != tbx_hash_bytes("abd", 3));
    CHECK(tbx_hash_bytes("a", 1) != tbx_hash_bytes("a\0", 2));
    CHECK(tbx_hash_bytes("", 0) != tbx_hash_bytes("\0", 1));
    CHECK(tbx_hash_bytes("12345678", 8) != tbx_hash_bytes("123456789", 9));
    CHECK(tbx_hash_bytes(NULL, 0) == tbx_hash_bytes("", 0));
    /* Low bits spread well: 4096 sequential names over 1024 buckets. */
    static unsigned buckets[1024];
    memset(buckets, 0, sizeof buckets);
    for (int i = 0; i < 4096; i++) {
        char tmp[32];
        int l = snprintf(tmp, sizeof tmp, "w%d", i);
        buckets[tbx_hash_bytes(tmp, (size_t)l) & 1023]++;
    }
    unsigned maxb = 0;
    for (int i = 0; i < 1024; i++) maxb = buckets[i] > maxb ? buckets[i] : maxb;
    CHECK(maxb < 20);
}

/* ------------------------------------------------------------------------------------------ */
/* Text                                                                                        */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(utf8_table) {
    static const struct {
        const char *s;
        size_t n;
        int valid;
        size_t bad;
    } cases[] = {
        {"", 0, 1, 0},
        {"plain ascii text that is longer than eight bytes", 48, 1, 0},
        {"\xc3\xa9", 2, 1, 0},                 /* U+00E9 */
        {"\xe2\x82\xac", 3, 1, 0},             /* U+20AC */
        {"\xf0\x9f\x98\x80", 4, 1, 0},         /* U+1F600, 4-byte valid */
        {"\xf4\x8f\xbf\xbf", 4, 1, 0},         /* U+10FFFF */
        {"\xed\x9f\xbf", 3, 1, 0},             /* U+D7FF */
        {"\xee\x80\x80", 3, 1, 0},             /* U+E000 */
        {"\xef\xbf\xbf", 3, 1, 0},             /* U+FFFF */
        {"\xc2\x80", 2, 1, 0},                 /* U+0080, smallest 2-byte */
        {"\xe0\xa0\x80", 3, 1, 0},             /* U+0800, smallest 3-byte */
        {"\xf0\x90\x80\x80", 4, 1, 0},         /* U+10000, smallest 4-byte */
        {"a\0b", 3, 1, 0},                     /* NUL is valid UTF-8 */
        {"\xc0\x80", 2, 0, 0},                 /* overlong NUL */
        {"\xc1\xbf", 2, 0, 0},                 /* overlong */
        {"\xe0\x80\x80", 3, 0, 0},             /* overlong 3-byte */
        {"\xe0\x9f\xbf", 3, 0, 0},             /* overlong 3-byte */
        {"\xf0\x80\x80\x80", 4, 0, 0},         /* overlong 4-byte */
        {"\xf0\x8f\xbf\xbf", 4, 0, 0},         /* overlong 4-byte */
        {"\xed\xa0\x80", 3, 0, 0},             /* U+D800 surrogate */
        {"\xed\xbf\xbf", 3, 0, 0},             /* U+DFFF surrogate */
        {"\xf4\x90\x80\x80", 4, 0, 0},         /* U+110000 */
        {"\xf5\x80\x80\x80", 4, 0, 0},         /* lead byte F5 */
        {"\xff", 1, 0, 0},
        {"\x80", 1, 0, 0},                     /* lone continuation */
        {"abc\xc3", 4, 0, 3},                  /* truncated 2-byte */
        {"abc\xe2\x82", 5, 0, 3},              /* truncated 3-byte */
        {"abcdefghijk\xf0\x9f\x98", 14, 0, 11},/* truncated 4-byte after an ASCII run */
        {"\xc3\x28", 2, 0, 0},                 /* bad continuation */
        {"\xe2\x28\xa1", 3, 0, 0},
        {"\xe2\x82\x28", 3, 0, 0},
        {"\xf0\x9f\x98\x28", 4, 0, 0},
        {"0123456789abcdef\xc3\xa9xyz\xed\xa0\x80", 24, 0, 21},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t bad = 12345;
        bool v = tbx_utf8_valid(cases[i].s, cases[i].n, &bad);
        if ((int)v != cases[i].valid) fprintf(stderr, "utf8 case %zu\n", i);
        CHECK_EQ((int)v, cases[i].valid);
        if (!cases[i].valid) CHECK_EQ(bad, cases[i].bad);
        else CHECK_EQ(bad, 12345); /* untouched */
        CHECK(tbx_utf8_valid(cases[i].s, cases[i].n, NULL) == v);
    }
    CHECK(tbx_utf8_valid(NULL, 0, NULL));
}

TBX_TEST(utf8_every_code_point) {
    /* Encode every scalar value; all must validate. Surrogates encoded naively must not. */
    int all_ok = 1, surrogates_rejected = 1;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        unsigned char b[4];
        size_t n;
        if (cp < 0x80) { b[0] = (unsigned char)cp; n = 1; }
        else if (cp < 0x800) { b[0] = (unsigned char)(0xC0 | (cp >> 6)); b[1] = (unsigned char)(0x80 | (cp & 0x3F)); n = 2; }
        else if (cp < 0x10000) { b[0] = (unsigned char)(0xE0 | (cp >> 12)); b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); b[2] = (unsigned char)(0x80 | (cp & 0x3F)); n = 3; }
        else { b[0] = (unsigned char)(0xF0 | (cp >> 18)); b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F)); b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); b[3] = (unsigned char)(0x80 | (cp & 0x3F)); n = 4; }
        bool v = tbx_utf8_valid((const char *)b, n, NULL);
        if (cp >= 0xD800 && cp <= 0xDFFF) surrogates_rejected &= !v;
        else all_ok &= v;
    }
    CHECK(all_ok);
    CHECK(surrogates_rejected);
}

TBX_TEST(quote_bytes) {
    char buf[64];
    tbx_quote_bytes(buf, sizeof buf, "model.weight", 12, 0);
    CHECK_STR(buf, "model.weight");
    tbx_quote_bytes(buf, sizeof buf, "a\0b\n\xff\\", 6, 0);
    CHECK_STR(buf, "a\\x00b\\x0a\\xff\\\\");
    tbx_quote_bytes(buf, sizeof buf, "abcdefgh", 8, 4);
    CHECK_STR(buf, "abcd...");
    tbx_quote_bytes(buf, sizeof buf, "abcd", 4, 4);
    CHECK_STR(buf, "abcd");
    /* Capacity: never split an escape, always terminated. */
    char small[8];
    tbx_quote_bytes(small, sizeof small, "\x01\x02\x03", 3, 0);
    CHECK_STR(small, "\\x01...");
    tbx_quote_bytes(small, sizeof small, "abcdefg", 7, 0);
    CHECK_STR(small, "abcdefg");
    tbx_quote_bytes(small, sizeof small, "abcdefgh", 8, 0);
    CHECK_STR(small, "abcd...");
    char tiny[2];
    tbx_quote_bytes(tiny, sizeof tiny, "xyz", 3, 0);
    CHECK(strlen(tiny) <= 1);
    tbx_quote_bytes(buf, sizeof buf, NULL, 0, 0);
    CHECK_STR(buf, "");
    tbx_quote_bytes(NULL, 0, "abc", 3, 0); /* no buffer: nothing happens */
    CHECK(1);
}

TBX_TEST(json_reason) {
    char buf[256];
    /* jansson's token context (cut at the NUL) is replaced by the text around the position */
    const char src[] = "{\"a\0Zb\":{\"dtype\":\"F32\"}}";
    tbx_json_reason(buf, sizeof buf, "control character 0x0 near '\"a'", src, sizeof src - 1, 3);
    CHECK_STR(buf, "control character 0x0 near \"{\"a\\x00Zb\":{\"dtype\":\"F\"...");
    /* far into the text: "..." before; a reason without context keeps its text */
    const char *t = "0123456789abcdefghijklmnopqrstuvwxyz";
    tbx_json_reason(buf, sizeof buf, "invalid token", t, strlen(t), 20);
    CHECK_STR(buf, "invalid token near ...\"456789abcdefghijklmnopqrstuvwxyz\"");
    tbx_json_reason(buf, sizeof buf, "end of file expected near 'x'", "", 0, 0);
    CHECK_STR(buf, "end of file expected at the end of the text");
    /* a position past the text is clamped; NULL text is no text */
    tbx_json_reason(buf, sizeof buf, NULL, "ab", 2, 99);
    CHECK_STR(buf, " near \"ab\"");
    char tiny[4];
    tbx_json_reason(tiny, sizeof tiny, "long reason", t, strlen(t), 5);
    CHECK(strlen(tiny) == 3);
}

TBX_TEST_MAIN()
