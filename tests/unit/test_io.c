/*
 * test_io.c - unit tests of the io layer: sources (pread, mmap, memory, callback), the open-input
 * registry, the bounds-checked cursor (window refills, both byte orders, truncation messages)
 * and the atomic output writer (temp file, commit, abort, overwrite rules).
 */
#define _GNU_SOURCE
#include "api.h"
#include "tbx_test.h" /* TBX_TEST_LABEL_THREADS: ctest label "threads", run under TSan too (the pipelined copy) */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Fixtures                                                                                    */
/* ------------------------------------------------------------------------------------------ */
#define BIG_SIZE ((size_t)200 * 1024 + 4093) /* > 200 KiB, not a multiple of anything nice */

static uint8_t pattern_byte(uint64_t i) { return (uint8_t)(i * 131u + (i >> 8) * 7u + 3u); }

static uint8_t *pattern(size_t n) {
    uint8_t *p = (uint8_t *)malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) p[i] = pattern_byte(i);
    return p;
}

static void make_tmpdir(char *dir, size_t cap) {
    tbx_test_tmppath(dir, cap, "tbx_test_io_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(2);
    }
}

static void join(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    if (n && fwrite(data, 1, n, f) != n) exit(2);
    fclose(f);
}

/* Removes every entry of dir and dir itself (flat directories only). */
static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        join(p, sizeof p, dir, e->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Number of entries in dir whose name starts with prefix. */
static int count_prefix(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
    closedir(d);
    return n;
}

static bool contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* Counting allocator: every block carries its size; sizes given back must match. */
typedef struct counting {
    long live;
    long mismatches;
} counting;
static void *c_alloc(void *ud, size_t size) {
    (void)ud;
    unsigned char *p = (unsigned char *)malloc(size + 16);
    if (!p) return NULL;
    memcpy(p, &size, sizeof size);
    ((counting *)ud)->live++;
    return p + 16;
}
static void *c_realloc(void *ud, void *ptr, size_t old_size, size_t new_size) {
    unsigned char *h = (unsigned char *)ptr - 16;
    size_t rec;
    memcpy(&rec, h, sizeof rec);
    if (rec != old_size) ((counting *)ud)->mismatches++;
    unsigned char *p = (unsigned char *)realloc(h, new_size + 16);
    if (!p) return NULL;
    memcpy(p, &new_size, sizeof new_size);
    return p + 16;
}
static void c_free(void *ud, void *ptr, size_t size) {
    unsigned char *h = (unsigned char *)ptr - 16;
    size_t rec;
    memcpy(&rec, h, sizeof rec);
    if (rec != size) ((counting *)ud)->mismatches++;
    ((counting *)ud)->live--;
    free(h);
}

/* ------------------------------------------------------------------------------------------ */
/* Sources                                                                                     */
/* ------------------------------------------------------------------------------------------ */
static void check_source_reads(tbx_source *s, const uint8_t *ref, size_t n) {
    uint8_t buf[300];
    tbx_error e;
    CHECK(s->size == n);
    CHECK_OK(tbx_source_read(s, 0, buf, 16, "head", &e));
    CHECK(memcmp(buf, ref, 16) == 0);
    CHECK_OK(tbx_source_read(s, 65530, buf, 300, "mid", &e));
    CHECK(memcmp(buf, ref + 65530, 300) == 0);
    CHECK_OK(tbx_source_read(s, n - 10, buf, 10, "tail", &e));
    CHECK(memcmp(buf, ref + n - 10, 10) == 0);
    CHECK_OK(tbx_source_read(s, n, buf, 0, "empty", &e));
    CHECK_OK(tbx_source_read(s, n, NULL, 0, "empty", NULL));

    /* Out of range: TBX_E_TRUNCATED naming the field, range and size. */
    memset(&e, 0, sizeof e);
    CHECK_EQ(tbx_source_read(s, n - 4, buf, 8, "footer.crc", &e), TBX_E_TRUNCATED);
    CHECK_EQ(e.code, TBX_E_TRUNCATED);
    CHECK_STR(e.field, "footer.crc");
    CHECK(e.offset == n - 4);
    char want[128];
    snprintf(want, sizeof want, "footer.crc: needs 8 bytes at byte %zu, file has %zu", n - 4, n);
    CHECK_STR(e.message, want);
    CHECK_EQ(tbx_source_read(s, n + 1, buf, 0, "past", &e), TBX_E_TRUNCATED);
    CHECK_EQ(tbx_source_read(s, UINT64_MAX - 1, buf, 4, "wrap", &e), TBX_E_TRUNCATED);
    CHECK(contains(e.message, "wrap: needs 4 bytes at byte 18446744073709551614"));
    CHECK_EQ(tbx_source_read(s, 0, buf, 8, NULL, NULL), TBX_OK);
}

TBX_TEST(source_path_pread_and_mmap) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "big.bin");
    uint8_t *ref = pattern(BIG_SIZE);
    write_file(path, ref, BIG_SIZE);

    tbx_source a, b;
    tbx_error e;
    CHECK_OK(tbx_source_open_path(&a, path, false, &e));
    CHECK_EQ(a.kind, TBX_SRC_FD);
    CHECK(a.fd >= 0);
    CHECK(a.base == NULL);
    CHECK(a.registered);
    CHECK(tbx_source_ptr(&a, 0, 1) == NULL);
    check_source_reads(&a, ref, BIG_SIZE);

    CHECK_OK(tbx_source_open_path(&b, path, true, &e));
    CHECK_EQ(b.kind, TBX_SRC_MMAP);
    CHECK(b.base != NULL);
    CHECK(b.map_len == BIG_SIZE);
    check_source_reads(&b, ref, BIG_SIZE);
    const uint8_t *p = tbx_source_ptr(&b, 1000, 64);
    CHECK(p != NULL && memcmp(p, ref + 1000, 64) == 0);
    CHECK(tbx_source_ptr(&b, BIG_SIZE, 0) != NULL);
    CHECK(tbx_source_ptr(&b, BIG_SIZE - 1, 2) == NULL);
    CHECK(tbx_source_ptr(&b, UINT64_MAX, 2) == NULL);

    /* Registry: reference counted per (dev, ino). */
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    CHECK(a.dev == (uint64_t)sb.st_dev && a.ino == (uint64_t)sb.st_ino);
    CHECK(tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino));
    tbx_source_close(&a);
    CHECK(a.fd == -1);
    CHECK(tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino));
    tbx_source_close(&b);
    CHECK(!tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino));
    tbx_source_close(&b); /* twice is fine */
    tbx_source_close(NULL);

    free(ref);
    remove_tree(dir);
}

typedef struct reg_job {
    const char *path;
    int failures;
} reg_job;

static void *reg_worker(void *arg) {
    reg_job *j = (reg_job *)arg;
    for (int i = 0; i < 300; i++) {
        tbx_source s;
        if (tbx_source_open_path(&s, j->path, (i & 1) != 0, NULL) != TBX_OK) {
            j->failures++;
            continue;
        }
        if (!tbx_inputs_contains(s.dev, s.ino)) j->failures++;
        tbx_source_close(&s);
    }
    return NULL;
}

TBX_TEST(source_registry_threads) {
    char dir[512], p1[600], p2[600];
    make_tmpdir(dir, sizeof dir);
    join(p1, sizeof p1, dir, "a.bin");
    join(p2, sizeof p2, dir, "b.bin");
    write_file(p1, "aaaa", 4);
    write_file(p2, "bbbb", 4);
    pthread_t th[4];
    reg_job jobs[4] = {{p1, 0}, {p2, 0}, {p1, 0}, {p2, 0}};
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, reg_worker, &jobs[i]) == 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) CHECK_EQ(jobs[i].failures, 0);
    struct stat a, b;
    CHECK(stat(p1, &a) == 0 && stat(p2, &b) == 0);
    CHECK(!tbx_inputs_contains((uint64_t)a.st_dev, (uint64_t)a.st_ino));
    CHECK(!tbx_inputs_contains((uint64_t)b.st_dev, (uint64_t)b.st_ino));
    remove_tree(dir);
}

TBX_TEST(source_path_errors) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    tbx_source s;
    tbx_error e;

    join(path, sizeof path, dir, "missing.bin");
    CHECK_EQ(tbx_source_open_path(&s, path, false, &e), TBX_E_IO);
    CHECK(contains(e.message, path));
    CHECK(contains(e.message, strerror(ENOENT)));
    CHECK(!s.registered);
    tbx_source_close(&s);

    CHECK_EQ(tbx_source_open_path(&s, dir, false, &e), TBX_E_IO);
    CHECK(contains(e.message, "is a directory"));
    CHECK_EQ(tbx_source_open_path(&s, dir, true, &e), TBX_E_IO);

    join(path, sizeof path, dir, "fifo");
    CHECK(mkfifo(path, 0600) == 0);
    CHECK_EQ(tbx_source_open_path(&s, path, false, &e), TBX_E_IO); /* rejected, never blocks */
    CHECK(contains(e.message, "not a regular file"));

    CHECK_EQ(tbx_source_open_path(&s, "", false, &e), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_source_open_path(&s, NULL, false, NULL), TBX_E_INVALID_ARG);

    /* Empty files: no mapping, empty reads only. */
    join(path, sizeof path, dir, "empty.bin");
    write_file(path, "", 0);
    for (int m = 0; m < 2; m++) {
        CHECK_OK(tbx_source_open_path(&s, path, m == 1, &e));
        CHECK(s.size == 0);
        CHECK(s.map_len == 0);
        uint8_t b;
        CHECK_OK(tbx_source_read(&s, 0, &b, 0, "x", &e));
        CHECK_EQ(tbx_source_read(&s, 0, &b, 1, "magic", &e), TBX_E_TRUNCATED);
        CHECK_STR(e.message, "magic: needs 1 bytes at byte 0, file has 0");
        if (m == 1) CHECK(tbx_source_ptr(&s, 0, 0) != NULL);
        tbx_source_close(&s);
    }

    /* A zeroed struct closes nothing (fd 0 stays open). */
    tbx_source z;
    memset(&z, 0, sizeof z);
    tbx_source_close(&z);
    CHECK(fcntl(0, F_GETFD) != -1 || errno != EBADF);

    remove_tree(dir);
}

TBX_TEST(source_path_file_shrinks) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "shrink.bin");
    uint8_t *ref = pattern(4096);
    write_file(path, ref, 4096);
    tbx_source s;
    tbx_error e;
    CHECK_OK(tbx_source_open_path(&s, path, false, &e));
    CHECK(truncate(path, 100) == 0);
    uint8_t buf[200];
    CHECK_EQ(tbx_source_read(&s, 50, buf, 200, "tensor", &e), TBX_E_TRUNCATED);
    CHECK(contains(e.message, "tensor: file ended at byte 100"));
    CHECK(e.offset == 100);
    tbx_source_close(&s);
    free(ref);
    remove_tree(dir);
}

TBX_TEST(source_memory) {
    uint8_t *ref = pattern(BIG_SIZE);
    tbx_source s;
    tbx_source_open_memory(&s, ref, BIG_SIZE);
    CHECK_EQ(s.kind, TBX_SRC_MEMORY);
    CHECK_EQ(s.fd, -1);
    check_source_reads(&s, ref, BIG_SIZE);
    CHECK(tbx_source_ptr(&s, 10, 10) == ref + 10);
    tbx_source_close(&s);
    tbx_source_close(&s);

    tbx_source_open_memory(&s, NULL, 0);
    CHECK(s.size == 0);
    CHECK(tbx_source_ptr(&s, 0, 0) != NULL);
    CHECK_EQ(tbx_source_read(&s, 0, NULL, 1, "x", NULL), TBX_E_TRUNCATED);
    tbx_source_close(&s);
    free(ref);
}

typedef struct cb_ctx {
    const uint8_t *data;
    uint64_t size;
    long calls;
    uint64_t fail_at; /* reads covering this offset fail */
} cb_ctx;

static tbx_status cb_read(void *ud, uint64_t off, void *buf, size_t len) {
    cb_ctx *c = (cb_ctx *)ud;
    c->calls++;
    if (off > c->size || len > c->size - off) return TBX_E_IO; /* never happens: checked first */
    if (c->fail_at >= off && c->fail_at < off + len) return TBX_E_IO;
    memcpy(buf, c->data + off, len);
    return TBX_OK;
}

TBX_TEST(source_callback) {
    uint8_t *ref = pattern(BIG_SIZE);
    cb_ctx ctx = {ref, BIG_SIZE, 0, UINT64_MAX};
    tbx_source s;
    tbx_source_open_callback(&s, cb_read, &ctx, BIG_SIZE);
    CHECK_EQ(s.kind, TBX_SRC_CALLBACK);
    CHECK(tbx_source_ptr(&s, 0, 1) == NULL);
    check_source_reads(&s, ref, BIG_SIZE);
    long calls = ctx.calls;
    uint8_t buf[16];
    tbx_error e;
    /* Out-of-range reads never reach the callback. */
    CHECK_EQ(tbx_source_read(&s, BIG_SIZE - 1, buf, 2, "x", &e), TBX_E_TRUNCATED);
    CHECK_EQ(ctx.calls, calls);
    /* Callback errors are passed on with the field and offset. */
    ctx.fail_at = 100;
    CHECK_EQ(tbx_source_read(&s, 96, buf, 8, "header", &e), TBX_E_IO);
    CHECK_STR(e.field, "header");
    CHECK(e.offset == 96);
    CHECK(contains(e.message, "header: read callback failed for 8 bytes at byte 96"));
    tbx_source_close(&s);
    free(ref);
}

/* ------------------------------------------------------------------------------------------ */
/* Cursor                                                                                      */
/* ------------------------------------------------------------------------------------------ */
static uint64_t ref_load(const uint8_t *ref, uint64_t off, int n, bool big) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) {
        int sh = big ? 8 * (n - 1 - i) : 8 * i;
        v |= (uint64_t)ref[off + (uint64_t)i] << sh;
    }
    return v;
}

/* Walks the whole source with mixed-width reads so that many straddle window boundaries. */
static void walk(const tbx_source *s, const tbx_alloc *al, const uint8_t *ref, size_t n, bool big) {
    tbx_cursor c;
    tbx_error e;
    CHECK_OK(tbx_cursor_init(&c, s, al, 0, n, &e));
    c.big_endian = big;
    static const int widths[] = {1, 2, 4, 8, 3, 8, 4, 2, 8, 8, 1, 4, 0};
    uint8_t scratch[1000];
    int ok = 1;
    unsigned k = 0;
    while (tbx_cursor_remaining(&c) >= 1000) {
        int w = widths[k++ % (sizeof widths / sizeof widths[0])];
        uint64_t at = c.pos;
        if (w == 1) {
            uint8_t v;
            ok &= tbx_cur_u8(&c, &v, "u8", &e) == TBX_OK && v == ref[at];
        } else if (w == 2) {
            uint16_t v;
            ok &= tbx_cur_u16(&c, &v, "u16", &e) == TBX_OK && v == ref_load(ref, at, 2, big);
        } else if (w == 4) {
            uint32_t v;
            ok &= tbx_cur_u32(&c, &v, "u32", &e) == TBX_OK && v == ref_load(ref, at, 4, big);
        } else if (w == 8) {
            uint64_t v;
            ok &= tbx_cur_u64(&c, &v, "u64", &e) == TBX_OK && v == ref_load(ref, at, 8, big);
        } else if (w == 3) {
            size_t len = 1 + (k * 37) % 999;
            ok &= tbx_cur_bytes(&c, scratch, len, "bytes", &e) == TBX_OK &&
                  memcmp(scratch, ref + at, len) == 0;
        } else {
            ok &= tbx_cur_skip(&c, 13, "skip", &e) == TBX_OK;
        }
        ok &= c.pos > at;
    }
    CHECK(ok);
    /* A read larger than the window goes straight through. */
    CHECK_OK(tbx_cur_seek(&c, 1, "seek", &e));
    uint8_t *big_buf = (uint8_t *)malloc(100 * 1024);
    CHECK_OK(tbx_cur_bytes(&c, big_buf, 100 * 1024, "blob", &e));
    CHECK(memcmp(big_buf, ref + 1, 100 * 1024) == 0);
    free(big_buf);
    /* Backwards seek and re-read. */
    CHECK_OK(tbx_cur_seek(&c, 65535, "seek", &e));
    uint32_t v32;
    CHECK_OK(tbx_cur_u32(&c, &v32, "u32", &e));
    CHECK(v32 == ref_load(ref, 65535, 4, big));
    /* The last byte, then nothing. */
    CHECK_OK(tbx_cur_seek(&c, n - 1, "seek", &e));
    uint8_t v8;
    CHECK_OK(tbx_cur_u8(&c, &v8, "last", &e));
    CHECK_EQ(v8, ref[n - 1]);
    CHECK_EQ(tbx_cur_u8(&c, &v8, "after", &e), TBX_E_TRUNCATED);
    CHECK_OK(tbx_cur_need(&c, 0, "none", &e));
    tbx_cursor_free(&c);
    tbx_cursor_free(&c);
}

TBX_TEST(cursor_all_sources_both_endians) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "big.bin");
    uint8_t *ref = pattern(BIG_SIZE);
    write_file(path, ref, BIG_SIZE);

    counting cnt = {0, 0};
    tbx_allocator a = {c_alloc, c_realloc, c_free, &cnt};
    tbx_alloc al;
    tbx_alloc_init(&al, &a);

    for (int big = 0; big < 2; big++) {
        tbx_source s;
        tbx_error e;
        CHECK_OK(tbx_source_open_path(&s, path, false, &e));
        walk(&s, &al, ref, BIG_SIZE, big != 0);
        tbx_source_close(&s);
        CHECK_OK(tbx_source_open_path(&s, path, true, &e));
        walk(&s, &al, ref, BIG_SIZE, big != 0);
        tbx_source_close(&s);
        tbx_source_open_memory(&s, ref, BIG_SIZE);
        walk(&s, &al, ref, BIG_SIZE, big != 0);
        cb_ctx ctx = {ref, BIG_SIZE, 0, UINT64_MAX};
        tbx_source_open_callback(&s, cb_read, &ctx, BIG_SIZE);
        walk(&s, &al, ref, BIG_SIZE, big != 0);
    }
    CHECK_EQ(cnt.live, 0);
    CHECK_EQ(cnt.mismatches, 0);
    free(ref);
    remove_tree(dir);
}

TBX_TEST(cursor_window_limits_source_calls) {
    uint8_t *ref = pattern(BIG_SIZE);
    cb_ctx ctx = {ref, BIG_SIZE, 0, UINT64_MAX};
    tbx_source s;
    tbx_source_open_callback(&s, cb_read, &ctx, BIG_SIZE);
    tbx_cursor c;
    tbx_error e;
    CHECK_OK(tbx_cursor_init(&c, &s, NULL, 0, BIG_SIZE, &e));
    CHECK(c.buf_cap == 64 * 1024);
    uint8_t v;
    int ok = 1;
    for (size_t i = 0; i < BIG_SIZE; i++) ok &= tbx_cur_u8(&c, &v, "b", &e) == TBX_OK && v == ref[i];
    CHECK(ok);
    CHECK_EQ(ctx.calls, (long)((BIG_SIZE + 65535) / 65536));
    tbx_cursor_free(&c);
    free(ref);
}

TBX_TEST(cursor_big_endian_values) {
    static const uint8_t bytes[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                    0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e};
    tbx_source s;
    tbx_source_open_memory(&s, bytes, sizeof bytes);
    tbx_cursor c;
    CHECK_OK(tbx_cursor_init(&c, &s, NULL, 0, sizeof bytes, NULL));
    uint16_t a;
    uint32_t b;
    uint64_t d;
    c.big_endian = true;
    CHECK_OK(tbx_cur_u16(&c, &a, "a", NULL));
    CHECK_EQ(a, 0x0102);
    CHECK_OK(tbx_cur_u32(&c, &b, "b", NULL));
    CHECK_EQ(b, 0x03040506);
    CHECK_OK(tbx_cur_u64(&c, &d, "d", NULL));
    CHECK(d == 0x0708090a0b0c0d0eull);
    CHECK_OK(tbx_cur_seek(&c, 0, "s", NULL));
    c.big_endian = false;
    CHECK_OK(tbx_cur_u16(&c, &a, "a", NULL));
    CHECK_EQ(a, 0x0201);
    CHECK_OK(tbx_cur_u32(&c, &b, "b", NULL));
    CHECK_EQ(b, 0x06050403);
    CHECK_OK(tbx_cur_u64(&c, &d, "d", NULL));
    CHECK(d == 0x0e0d0c0b0a090807ull);
    tbx_cursor_free(&c);
}

TBX_TEST(cursor_truncation_messages) {
    static const uint8_t ten[10] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 1, 0};
    tbx_source s;
    tbx_source_open_memory(&s, ten, sizeof ten);
    tbx_cursor c;
    tbx_error e;
    CHECK_OK(tbx_cursor_init(&c, &s, NULL, 0, 10, &e));
    uint32_t magic, version;
    CHECK_OK(tbx_cur_u32(&c, &magic, "magic", &e));
    CHECK_OK(tbx_cur_u32(&c, &version, "version", &e));
    CHECK_EQ(version, 3);
    uint64_t count = 77;
    memset(&e, 0, sizeof e);
    CHECK_EQ(tbx_cur_u64(&c, &count, "tensor_count", &e), TBX_E_TRUNCATED);
    CHECK_STR(e.message, "tensor_count: needs 8 bytes at byte 8, file has 10");
    CHECK_STR(e.field, "tensor_count");
    CHECK(e.offset == 8);
    CHECK_EQ(e.code, TBX_E_TRUNCATED);
    CHECK_EQ(count, 77);          /* untouched */
    CHECK(c.pos == 8);            /* not consumed */

    CHECK_EQ(tbx_cur_need(&c, 3, "name", &e), TBX_E_TRUNCATED);
    CHECK_STR(e.message, "name: needs 3 bytes at byte 8, file has 10");
    CHECK_OK(tbx_cur_need(&c, 2, "name", &e));
    CHECK(c.pos == 8);
    CHECK_EQ(tbx_cur_skip(&c, UINT64_MAX, "pad", &e), TBX_E_TRUNCATED);
    CHECK(contains(e.message, "pad: needs 18446744073709551615 bytes at byte 8"));
    uint8_t two[3];
    CHECK_EQ(tbx_cur_bytes(&c, two, 3, "kv.key", &e), TBX_E_TRUNCATED);
    CHECK_OK(tbx_cur_bytes(&c, two, 2, "kv.key", &e));
    CHECK_EQ(tbx_cursor_remaining(&c), 0);

    CHECK_EQ(tbx_cur_seek(&c, 11, "data_offset", &e), TBX_E_TRUNCATED);
    CHECK_STR(e.field, "data_offset");
    CHECK(e.offset == 11);
    CHECK(contains(e.message, "data_offset: offset 11 is past the end of the file (10 bytes)"));
    CHECK_OK(tbx_cur_seek(&c, 10, "data_offset", &e));
    tbx_cursor_free(&c);

    /* A very long field name is shortened in the message; sizes and offsets stay. */
    char longname[400];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_EQ(tbx_cur_u64(&c, &count, longname, &e), TBX_E_TRUNCATED);
    CHECK(contains(e.message, "...: needs 8 bytes at byte 10, file has 10"));
    CHECK_EQ(strlen(e.field), sizeof e.field - 1);
    CHECK_EQ(tbx_source_read(&s, 8, two, 3, longname, &e), TBX_E_TRUNCATED);
    CHECK(contains(e.message, "...: needs 3 bytes at byte 8, file has 10"));

    /* A sub-region: the message names the region end. */
    CHECK_OK(tbx_cursor_init(&c, &s, NULL, 2, 6, &e));
    CHECK(c.pos == 2);
    CHECK_EQ(tbx_cur_u64(&c, &count, "header", &e), TBX_E_TRUNCATED);
    CHECK_STR(e.message, "header: needs 8 bytes at byte 2, region ends at byte 6 (file has 10)");
    CHECK_OK(tbx_cur_seek(&c, 0, "back", &e)); /* [0, end] is allowed */
    tbx_cursor_free(&c);

    /* Region checks at init. */
    CHECK_EQ(tbx_cursor_init(&c, &s, NULL, 0, 11, &e), TBX_E_TRUNCATED);
    tbx_cursor_free(&c);
    CHECK_EQ(tbx_cursor_init(&c, &s, NULL, 7, 6, &e), TBX_E_RANGE);
    tbx_cursor_free(&c);
    tbx_cursor zc;
    memset(&zc, 0, sizeof zc);
    tbx_cursor_free(&zc);
    tbx_cursor_free(NULL);
}

TBX_TEST(cursor_truncation_pread_source) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "ten.bin");
    write_file(path, "0123456789", 10);
    tbx_source s;
    tbx_error e;
    CHECK_OK(tbx_source_open_path(&s, path, false, &e));
    tbx_cursor c;
    CHECK_OK(tbx_cursor_init(&c, &s, NULL, 0, s.size, &e));
    CHECK(c.buf_cap == 10);
    uint64_t v;
    CHECK_OK(tbx_cur_skip(&c, 8, "head", &e));
    CHECK_EQ(tbx_cur_u64(&c, &v, "tensor_count", &e), TBX_E_TRUNCATED);
    CHECK_STR(e.message, "tensor_count: needs 8 bytes at byte 8, file has 10");
    uint16_t w;
    CHECK_OK(tbx_cur_u16(&c, &w, "tail", &e));
    CHECK_EQ(w, '8' | ('9' << 8));
    tbx_cursor_free(&c);
    tbx_source_close(&s);
    remove_tree(dir);
}

/* ------------------------------------------------------------------------------------------ */
/* Output                                                                                      */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(output_abort_removes_temp) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "out.bin");
    tbx_out o;
    tbx_error e;
    CHECK_OK(tbx_out_open(&o, NULL, path, false, &e));
    CHECK_EQ(count_prefix(dir, ".out.bin.tbx-tmp."), 1);
    CHECK(o.tmp_path != NULL && contains(o.tmp_path, "/.out.bin.tbx-tmp."));
    CHECK_OK(tbx_out_pwrite(&o, 0, "hello", 5, &e));
    tbx_out_abort(&o);
    CHECK_EQ(count_prefix(dir, ".out.bin.tbx-tmp."), 0);
    CHECK(access(path, F_OK) != 0);
    CHECK(o.path == NULL && o.tmp_path == NULL && o.fd == -1);
    tbx_out_abort(&o); /* again: nothing */
    tbx_out z;
    memset(&z, 0, sizeof z);
    tbx_out_abort(&z); /* zeroed: must not close fd 0 */
    CHECK(fcntl(0, F_GETFD) != -1 || errno != EBADF);
    tbx_out_abort(NULL);
    CHECK_EQ(tbx_out_pwrite(&z, 0, "x", 1, &e), TBX_E_STATE);
    CHECK_EQ(tbx_out_commit(&z, 1, &e), TBX_E_STATE);
    remove_tree(dir);
}

TBX_TEST(output_commit_exact_bytes_and_gaps) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "model.gguf");
    counting cnt = {0, 0};
    tbx_allocator a = {c_alloc, c_realloc, c_free, &cnt};
    tbx_alloc al;
    tbx_alloc_init(&al, &a);

    tbx_out o;
    tbx_error e;
    CHECK_OK(tbx_out_open(&o, &al, path, false, &e));
    uint8_t *ref = pattern(BIG_SIZE);
    /* Out of order, with gaps, and a zero run. */
    CHECK_OK(tbx_out_pwrite(&o, 100000, ref + 100000, 5000, &e));
    CHECK_OK(tbx_out_pwrite(&o, 0, ref, 1000, &e));
    CHECK_OK(tbx_out_zero(&o, 1000, 70000, &e));
    CHECK(o.size == 105000);
    CHECK_OK(tbx_out_pwrite(&o, 0, NULL, 0, &e));
    CHECK_EQ(tbx_out_pwrite(&o, UINT64_MAX - 2, "abc", 3, &e), TBX_E_OVERFLOW);
    /* Commit extends past the last write: the tail reads as zeros. */
    CHECK_OK(tbx_out_commit(&o, 110000, &e));
    CHECK(o.path == NULL && o.tmp_path == NULL);
    CHECK_EQ(count_prefix(dir, ".model.gguf.tbx-tmp."), 0);
    tbx_out_abort(&o); /* after commit: nothing to do, file stays */

    size_t n = 0;
    uint8_t *got = tbx_test_slurp(path, &n);
    CHECK(got != NULL);
    CHECK_EQ(n, 110000);
    if (got && n == 110000) {
        CHECK(memcmp(got, ref, 1000) == 0);
        int zeros = 1;
        for (size_t i = 1000; i < 100000; i++) zeros &= got[i] == 0;
        for (size_t i = 105000; i < 110000; i++) zeros &= got[i] == 0;
        CHECK(zeros);
        CHECK(memcmp(got + 100000, ref + 100000, 5000) == 0);
    }
    free(got);

    /* Mode 0644 filtered by the umask. */
    mode_t um = umask(022);
    umask(um);
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    CHECK_EQ(sb.st_mode & 0777, 0644 & ~um);

    CHECK_EQ(cnt.live, 0);
    CHECK_EQ(cnt.mismatches, 0);
    free(ref);
    remove_tree(dir);
}

TBX_TEST(output_exists_and_overwrite) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "w.safetensors");
    write_file(path, "old", 3);
    tbx_out o;
    tbx_error e;
    CHECK_EQ(tbx_out_open(&o, NULL, path, false, &e), TBX_E_EXISTS);
    CHECK(contains(e.message, path));
    CHECK_EQ(count_prefix(dir, ".w.safetensors.tbx-tmp."), 0);
    tbx_out_abort(&o);

    CHECK_OK(tbx_out_open(&o, NULL, path, true, &e));
    CHECK_OK(tbx_out_pwrite(&o, 0, "new!", 4, &e));
    CHECK_OK(tbx_out_commit(&o, 4, &e));
    size_t n = 0;
    uint8_t *got = tbx_test_slurp(path, &n);
    CHECK(n == 4 && got && memcmp(got, "new!", 4) == 0);
    free(got);

    /* A directory is never an output; a path without a file name is invalid. */
    CHECK_EQ(tbx_out_open(&o, NULL, dir, true, &e), TBX_E_EXISTS);
    char slash[600];
    snprintf(slash, sizeof slash, "%s/", dir);
    CHECK_EQ(tbx_out_open(&o, NULL, slash, true, &e), TBX_E_INVALID_ARG);
    /* A missing directory is an i/o error naming it. */
    char deep[700];
    snprintf(deep, sizeof deep, "%s/nodir/x.bin", dir);
    CHECK_EQ(tbx_out_open(&o, NULL, deep, false, &e), TBX_E_IO);
    CHECK(contains(e.message, "nodir"));
    tbx_out_abort(&o);
    remove_tree(dir);
}

TBX_TEST(output_refuses_open_input) {
    char dir[512], path[600], link_path[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "in.bin");
    join(link_path, sizeof link_path, dir, "hard.bin");
    write_file(path, "input bytes", 11);
    CHECK(link(path, link_path) == 0);

    tbx_source s;
    tbx_error e;
    CHECK_OK(tbx_source_open_path(&s, path, true, &e));
    tbx_out o;
    CHECK_EQ(tbx_out_open(&o, NULL, path, true, &e), TBX_E_EXISTS);
    char want[700];
    snprintf(want, sizeof want, "refusing to overwrite input file %s", path);
    CHECK_STR(e.message, want);
    CHECK_EQ(tbx_out_open(&o, NULL, link_path, true, &e), TBX_E_EXISTS); /* same inode */
    CHECK_EQ(count_prefix(dir, ".in.bin.tbx-tmp."), 0); /* no temp file left behind */

    /* An input opened after the writer started is still protected at commit. */
    tbx_source_close(&s);
    CHECK_OK(tbx_out_open(&o, NULL, path, true, &e));
    CHECK_OK(tbx_out_pwrite(&o, 0, "x", 1, &e));
    CHECK_OK(tbx_source_open_path(&s, path, false, &e));
    CHECK_EQ(tbx_out_commit(&o, 1, &e), TBX_E_EXISTS);
    CHECK_EQ(count_prefix(dir, ".in.bin.tbx-tmp."), 0);
    tbx_out_abort(&o);
    size_t n = 0;
    uint8_t *got = tbx_test_slurp(path, &n);
    CHECK(n == 11 && got && memcmp(got, "input bytes", 11) == 0);
    free(got);
    tbx_source_close(&s);

    /* Closed: replacing is allowed again. */
    CHECK_OK(tbx_out_open(&o, NULL, path, true, &e));
    CHECK_OK(tbx_out_commit(&o, 0, &e));
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 0);
    remove_tree(dir);
}

TBX_TEST(output_relative_path) {
    char dir[64], cwd[512];
    make_tmpdir(dir, sizeof dir);
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK(chdir(dir) == 0);
    tbx_out o;
    tbx_error e;
    CHECK_OK(tbx_out_open(&o, NULL, "rel.bin", false, &e));
    CHECK(o.tmp_path && strncmp(o.tmp_path, ".rel.bin.tbx-tmp.", 17) == 0);
    CHECK_OK(tbx_out_pwrite(&o, 2, "z", 1, &e));
    CHECK_OK(tbx_out_commit(&o, 3, &e));
    size_t n = 0;
    uint8_t *got = tbx_test_slurp("rel.bin", &n);
    CHECK(n == 3 && got && got[0] == 0 && got[1] == 0 && got[2] == 'z');
    free(got);
    CHECK(chdir(cwd) == 0);
    remove_tree(dir);
}

/* A symbolic link is followed: the target is replaced, the link stays; a dangling link needs
 * overwrite, which creates its target. Only regular files are replaced. */
TBX_TEST(output_symlinks_and_kinds) {
    char dir[64], target[128], link_path[600], dangling[128], made[128], fifo[128];
    make_tmpdir(dir, sizeof dir);
    join(target, sizeof target, dir, "real.bin");
    join(link_path, sizeof link_path, dir, "link.bin");
    join(dangling, sizeof dangling, dir, "dangling.bin");
    join(made, sizeof made, dir, "made.bin");
    join(fifo, sizeof fifo, dir, "fifo.bin");
    write_file(target, "old", 3);
    CHECK(symlink("real.bin", link_path) == 0);
    CHECK(symlink("made.bin", dangling) == 0);
    CHECK(mkfifo(fifo, 0600) == 0);
    tbx_out o;
    tbx_error e;

    CHECK_EQ(tbx_out_open(&o, NULL, link_path, false, &e), TBX_E_EXISTS);
    CHECK_OK(tbx_out_open(&o, NULL, link_path, true, &e));
    CHECK(contains(o.tmp_path, "/.real.bin.tbx-tmp.")); /* next to the target */
    CHECK_OK(tbx_out_pwrite(&o, 0, "new!", 4, &e));
    CHECK_OK(tbx_out_commit(&o, 4, &e));
    struct stat sb;
    CHECK(lstat(link_path, &sb) == 0 && S_ISLNK(sb.st_mode));
    size_t n = 0;
    uint8_t *got = tbx_test_slurp(target, &n);
    CHECK(n == 4 && got && memcmp(got, "new!", 4) == 0);
    free(got);

    CHECK_EQ(tbx_out_open(&o, NULL, dangling, false, &e), TBX_E_EXISTS);
    CHECK(contains(e.message, "dangling"));
    CHECK(access(made, F_OK) != 0);
    CHECK_OK(tbx_out_open(&o, NULL, dangling, true, &e));
    CHECK_OK(tbx_out_commit(&o, 2, &e));
    CHECK(lstat(dangling, &sb) == 0 && S_ISLNK(sb.st_mode));
    CHECK(stat(made, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 2);

    CHECK_EQ(tbx_out_open(&o, NULL, fifo, true, &e), TBX_E_EXISTS);
    CHECK(contains(e.message, "FIFO"));
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK_EQ(count_prefix(dir, ".real.bin.") + count_prefix(dir, ".made.bin.") +
                 count_prefix(dir, ".fifo.bin."), 0);
    remove_tree(dir);
}

/* Temporary files: tbx_remove_temp_files removes live ones; a later write removes dead ones
 * (unlocked) but never a live writer's (locked). */
TBX_TEST(output_temp_cleanup) {
    char dir[512], path[600], stale[600], other[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "t.bin");
    tbx_out o, o2;
    tbx_error e;
    CHECK_OK(tbx_out_open(&o, NULL, path, false, &e));
    CHECK_EQ(count_prefix(dir, ".t.bin.tbx-tmp."), 1);
    tbx_remove_temp_files();
    CHECK_EQ(count_prefix(dir, ".t.bin.tbx-tmp."), 0);
    CHECK_EQ(tbx_out_commit(&o, 0, &e), TBX_E_IO); /* its file is gone */
    CHECK(access(path, F_OK) != 0);

    /* a dead writer's file (nobody holds its lock), and a look-alike that is not ours */
    snprintf(stale, sizeof stale, "%s/.t.bin.tbx-tmp.AbC123", dir);
    snprintf(other, sizeof other, "%s/.t.bin.tbx-tmp.x", dir);
    write_file(stale, "junk", 4);
    write_file(other, "keep", 4);
    CHECK_OK(tbx_out_open(&o, NULL, path, false, &e));
    CHECK(access(stale, F_OK) != 0);
    CHECK(access(other, F_OK) == 0);
    /* a live writer's file survives a second writer of the same output */
    CHECK_OK(tbx_out_open(&o2, NULL, path, true, &e));
    CHECK(access(o.tmp_path, F_OK) == 0);
    CHECK_OK(tbx_out_commit(&o2, 1, &e));
    /* o was opened without overwrite: the file that appeared meanwhile is not replaced */
    CHECK_EQ(tbx_out_commit(&o, 2, &e), TBX_E_EXISTS);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 1);
    CHECK_EQ(count_prefix(dir, ".t.bin.tbx-tmp."), 1); /* only the look-alike */
    remove_tree(dir);
}

/* A signal that arrives while the temporary file is being created is handled as open() returns,
 * before tbx_out_open has done anything else: tbx_remove_temp_files called by its handler then
 * must still find the file (tbx_out_created_hook_ calls it at exactly that point). tbx_out_open
 * goes on with a new temporary file, as the signal handler would not have returned. */
static char g_created_dir[512];
static int g_created_left = -1;
static void remove_at_creation(void) {
    tbx_out_created_hook_ = NULL; /* once */
    tbx_remove_temp_files();
    g_created_left = count_prefix(g_created_dir, ".c.bin.tbx-tmp.");
}

TBX_TEST(output_temp_removed_by_signal_during_creation) {
    char path[600];
    make_tmpdir(g_created_dir, sizeof g_created_dir);
    join(path, sizeof path, g_created_dir, "c.bin");
    tbx_out o;
    tbx_error e;
    g_created_left = -1;
    tbx_out_created_hook_ = remove_at_creation;
    tbx_status st = tbx_out_open(&o, NULL, path, false, &e);
    tbx_out_created_hook_ = NULL;
    CHECK_EQ(g_created_left, 0); /* the handler's call removed the file being created */
    CHECK_OK(st);
    if (st == TBX_OK) {
        CHECK_EQ(count_prefix(g_created_dir, ".c.bin.tbx-tmp."), 1); /* the next name */
        CHECK_OK(tbx_out_pwrite(&o, 0, "ok", 2, &e));
        CHECK_OK(tbx_out_commit(&o, 2, &e));
    }
    CHECK_EQ(count_prefix(g_created_dir, ".c.bin.tbx-tmp."), 0);
    CHECK(access(path, F_OK) == 0);
    remove_tree(g_created_dir);
}

/* flock locks belong to open file descriptions: a second writer of a file this process holds
 * locked would wait for itself forever; it fails at once instead. */
TBX_TEST(output_same_file_twice_in_one_process) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "same.bin");
    write_file(path, "old", 3);
    tbx_out o, o2;
    tbx_error e;
    CHECK_OK(tbx_out_open(&o, NULL, path, true, &e));
    CHECK_EQ(tbx_out_open(&o2, NULL, path, true, &e), TBX_E_STATE);
    CHECK(contains(e.message, "this process"));
    tbx_edit ed;
    CHECK_EQ(tbx_edit_lock(&ed, NULL, path, &e), TBX_E_STATE);
    CHECK_OK(tbx_out_commit(&o, 1, &e));
    CHECK_OK(tbx_edit_lock(&ed, NULL, path, &e)); /* released by the commit */
    CHECK(ed.writable && ed.fd >= 0);
    CHECK_EQ(tbx_out_open(&o2, NULL, path, true, &e), TBX_E_STATE);
    tbx_edit_unlock(&ed);
    CHECK_OK(tbx_out_open(&o2, NULL, path, true, &e));
    tbx_out_abort(&o2);
    remove_tree(dir);
}

/* tbx_out_copy_fd's three ways (kernel copy between offsets congruent modulo 64 KiB; otherwise a
 * 1 MiB buffer, pipelined over two threads for 16 MiB and more, else serial) give the same
 * bytes, and each reports an input that ends early, or a write that fails, at the right byte
 * without hanging or leaking. */
static int copy_fault_after_ = -1; /* the write this many calls from now fails; -1: none */
static int copy_fault_hook(void) {
    if (copy_fault_after_ < 0) return 0;
    return copy_fault_after_-- == 0 ? EIO : 0;
}

TBX_TEST(output_copy_fd_ways) {
    char dir[256], in_path[512], path[512];
    make_tmpdir(dir, sizeof dir);
    join(in_path, sizeof in_path, dir, "in.bin");
    join(path, sizeof path, dir, "out.bin");
    const size_t in_n = ((size_t)40 << 20) + 12345;
    uint8_t *ref = pattern(in_n);
    write_file(in_path, ref, in_n);
    int in_fd = open(in_path, O_RDONLY | O_CLOEXEC);
    CHECK(in_fd >= 0);
    const uint64_t in_off = 4096 + 24, len = ((uint64_t)33 << 20) + 777;
    struct { uint64_t off; const char *threads; int no_kernel; } ways[] = {
        {in_off + ((uint64_t)64 << 10) * 3, "2", 0}, /* congruent: the kernel copies */
        {in_off + ((uint64_t)64 << 10) * 3, "2", 1}, /* congruent, kernel copy refused */
        {1000, "2", 0},                              /* not congruent: pipelined */
        {1000, "1", 0},                              /* not congruent, one thread: serial */
        {4096 + 24 + 4096, "2", 0},                  /* congruent modulo a page only */
    };
    const char *old = getenv("TBX_THREADS");
    char *saved = old ? strdup(old) : NULL;
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        setenv("TBX_THREADS", ways[w].threads, 1);
        tbx_out_no_copy_range_ = ways[w].no_kernel;
        tbx_out o;
        tbx_error e;
        CHECK_OK(tbx_out_open(&o, NULL, path, true, &e));
        CHECK_OK(tbx_out_copy_fd(&o, ways[w].off, in_fd, in_off, len, &e));
        CHECK_OK(tbx_out_pwrite(&o, 0, "head", 4, &e));
        CHECK_EQ(o.size, ways[w].off + len);
        CHECK_OK(tbx_out_commit(&o, ways[w].off + len, &e));
        size_t n = 0;
        uint8_t *got = tbx_test_slurp(path, &n);
        CHECK_EQ(n, ways[w].off + len);
        if (got && n == ways[w].off + len) {
            CHECK(memcmp(got, "head", 4) == 0);
            CHECK(memcmp(got + ways[w].off, ref + in_off, (size_t)len) == 0);
        }
        free(got);

        /* The input ends 5 MiB before the copy would: TBX_E_TRUNCATED at the input's end. */
        CHECK_OK(tbx_out_open(&o, NULL, path, true, &e));
        const uint64_t short_len = in_n - in_off + ((uint64_t)5 << 20);
        CHECK_EQ(tbx_out_copy_fd(&o, ways[w].off, in_fd, in_off, short_len, &e), TBX_E_TRUNCATED);
        CHECK_EQ(e.code, TBX_E_TRUNCATED);
        CHECK_EQ(e.offset, in_n);
        tbx_out_abort(&o);

        /* The second write fails (a kernel copy piece counts as one): TBX_E_IO, no hang. */
        CHECK_OK(tbx_out_open(&o, NULL, path, true, &e));
        tbx_out_fault_hook_ = copy_fault_hook;
        copy_fault_after_ = 1;
        CHECK_EQ(tbx_out_copy_fd(&o, ways[w].off, in_fd, in_off, len, &e), TBX_E_IO);
        CHECK_EQ(e.code, TBX_E_IO);
        tbx_out_fault_hook_ = NULL;
        copy_fault_after_ = -1;
        tbx_out_abort(&o);
        CHECK_EQ(count_prefix(dir, ".out.bin.tbx-tmp."), 0);
    }
    tbx_out_no_copy_range_ = 0;
    if (saved) {
        setenv("TBX_THREADS", saved, 1);
        free(saved);
    } else {
        unsetenv("TBX_THREADS");
    }
    close(in_fd);
    free(ref);
    remove_tree(dir);
}

/* TBX_OUT_NO_SYNC: the same file, renamed into place, without an fsync (tbx_out_syncs_ counts
 * the commits' fsyncs: the file's and its directory's). */
TBX_TEST(output_no_sync) {
    char dir[256], path[512];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "out.bin");
    uint8_t *ref = pattern(BIG_SIZE);
    for (int nosync = 0; nosync < 2; nosync++) {
        tbx_out o;
        tbx_error e;
        CHECK_OK(tbx_out_open(&o, NULL, path, TBX_OUT_OVERWRITE | (nosync ? TBX_OUT_NO_SYNC : 0u),
                              &e));
        CHECK_OK(tbx_out_pwrite(&o, 0, ref, BIG_SIZE, &e));
        const unsigned long before = tbx_out_syncs_;
        CHECK_OK(tbx_out_commit(&o, BIG_SIZE, &e));
        CHECK_EQ(tbx_out_syncs_ - before, nosync ? 0 : 2);
        CHECK_EQ(count_prefix(dir, ".out.bin.tbx-tmp."), 0);
        size_t n = 0;
        uint8_t *got = tbx_test_slurp(path, &n);
        CHECK(got && n == BIG_SIZE && memcmp(got, ref, BIG_SIZE) == 0);
        free(got);
    }
    free(ref);
    remove_tree(dir);
}

TBX_TEST_MAIN()
