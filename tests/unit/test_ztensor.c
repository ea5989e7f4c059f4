/*
 * test_ztensor.c - the zTensor driver: CRC-32C, canonical CBOR bytes, write/read round trips,
 * sparse and quantized_group tensors, digests, and a table of malformed files.
 *
 * Inputs are built here with a small CBOR writer of the test's own (written from RFC 8949), so
 * the reader is never checked against bytes produced by the code under test; expected values
 * come from the format description, RFC test vectors or independent computation (OpenSSL, zstd).
 */
#define _GNU_SOURCE
#include "tbx_test.h"

#include "crc32c.h"
#include "api.h"
#include "ztensor.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

/* ------------------------------------------------------------------------------------------ */
/* Test-local CBOR writer and file builder                                                     */
/* ------------------------------------------------------------------------------------------ */
typedef struct tb {
    uint8_t *p;
    size_t n, cap;
} tb;

static void tb_raw(tb *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = realloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void tb_u8(tb *b, uint8_t v) { tb_raw(b, &v, 1); }
/* head with the argument always in its shortest form */
static void tb_head(tb *b, unsigned major, uint64_t v) {
    uint8_t m = (uint8_t)(major << 5);
    if (v < 24) tb_u8(b, (uint8_t)(m | v));
    else if (v < 0x100) { tb_u8(b, m | 24); tb_u8(b, (uint8_t)v); }
    else if (v < 0x10000) { tb_u8(b, m | 25); tb_u8(b, (uint8_t)(v >> 8)); tb_u8(b, (uint8_t)v); }
    else if (v < 0x100000000ull) {
        tb_u8(b, m | 26);
        for (int i = 3; i >= 0; i--) tb_u8(b, (uint8_t)(v >> (8 * i)));
    } else {
        tb_u8(b, m | 27);
        for (int i = 7; i >= 0; i--) tb_u8(b, (uint8_t)(v >> (8 * i)));
    }
}
static void tb_text(tb *b, const char *s) { tb_head(b, 3, strlen(s)); tb_raw(b, s, strlen(s)); }
static void tb_map(tb *b, uint64_t n) { tb_head(b, 5, n); }
static void tb_arr(tb *b, uint64_t n) { tb_head(b, 4, n); }
static void tb_uint(tb *b, uint64_t v) { tb_head(b, 0, v); }
static void tb_free(tb *b) { free(b->p); memset(b, 0, sizeof *b); }

/* A component map {dtype, offset, length[, encoding]}. */
static void tb_comp(tb *b, const char *dtype, uint64_t off, uint64_t len, const char *enc) {
    tb_map(b, enc ? 4 : 3);
    tb_text(b, "dtype"); tb_text(b, dtype);
    tb_text(b, "offset"); tb_uint(b, off);
    tb_text(b, "length"); tb_uint(b, len);
    if (enc) { tb_text(b, "encoding"); tb_text(b, enc); }
}

/* A dense object: "name": {shape, format, components: {data: ...}} (key and value). */
static void tb_dense(tb *b, const char *name, const char *dtype, const uint64_t *shape,
                     uint32_t ndim, uint64_t off, uint64_t len, const char *enc) {
    tb_text(b, name);
    tb_map(b, 3);
    tb_text(b, "shape");
    tb_arr(b, ndim);
    for (uint32_t i = 0; i < ndim; i++) tb_uint(b, shape[i]);
    tb_text(b, "format"); tb_text(b, "dense");
    tb_text(b, "components");
    tb_map(b, 1);
    tb_text(b, "data");
    tb_comp(b, dtype, off, len, enc);
}

/* File = magic + area (placed at offset 8, offsets in the manifest are absolute) + manifest +
 * u64 size + magic. */
static uint8_t *zt_file(const uint8_t *area, size_t alen, const tb *man, size_t *out_len) {
    size_t n = 8 + alen + man->n + 16;
    uint8_t *f = calloc(1, n);
    memcpy(f, "ZTEN1000", 8);
    if (alen) memcpy(f + 8, area, alen);
    memcpy(f + 8 + alen, man->p, man->n);
    uint64_t m = man->n;
    for (int i = 0; i < 8; i++) f[8 + alen + man->n + i] = (uint8_t)(m >> (8 * i));
    memcpy(f + n - 8, "ZTEN1000", 8);
    *out_len = n;
    return f;
}

/* One dense f32 tensor "x" of 4 elements at offset 64: the base most cases mutate. */
static const float base_vals[4] = {1.0f, -2.5f, 3.25f, 0.0f};

static uint8_t *base_file(size_t *n) {
    uint8_t area[56 + 16];
    memset(area, 0, sizeof area);
    memcpy(area + 56, base_vals, 16);
    tb m = {0};
    tb_map(&m, 2);
    tb_text(&m, "version"); tb_text(&m, "1.1.0");
    tb_text(&m, "objects");
    tb_map(&m, 1);
    uint64_t shape[1] = {4};
    tb_dense(&m, "x", "f32", shape, 1, 64, 16, NULL);
    uint8_t *f = zt_file(area, sizeof area, &m, n);
    tb_free(&m);
    return f;
}

/* Builds a file from an area of `alen` bytes and a manifest "version + objects(body)". The
 * body callback writes the objects map's entries; nobj is its count. */
static uint8_t *file_with(const uint8_t *area, size_t alen, void (*body)(tb *), uint64_t nobj,
                          size_t *n) {
    tb m = {0};
    tb_map(&m, 2);
    tb_text(&m, "version"); tb_text(&m, "1.1.0");
    tb_text(&m, "objects");
    tb_map(&m, nobj);
    body(&m);
    uint8_t *f = zt_file(area, alen, &m, n);
    tb_free(&m);
    return f;
}

static tbx_status open_mem(const uint8_t *p, size_t n, uint32_t flags, const tbx_limits *lim,
                           tbx_file **f, tbx_error *err) {
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.format = TBX_FORMAT_ZTENSOR;
    o.flags = flags;
    o.limits = lim;
    return tbx_open_memory(f, p, n, &o, err);
}

/* Status of opening p (the handle is closed). */
static tbx_status open_status(const uint8_t *p, size_t n, tbx_error *err) {
    tbx_file *f = NULL;
    tbx_status st = open_mem(p, n, 0, NULL, &f, err);
    tbx_close(f);
    return st;
}

/* Opens, then reads every component; returns the first failing status. */
static tbx_status open_read_all(const uint8_t *p, size_t n, uint32_t flags, tbx_error *err) {
    tbx_file *f = NULL;
    tbx_status st = open_mem(p, n, flags, NULL, &f, err);
    if (st != TBX_OK) return st;
    for (uint64_t i = 0; i < tbx_tensor_count(f) && st == TBX_OK; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(f, i, &ti);
        for (uint32_t c = 0; c < ti.ncomponents && st == TBX_OK; c++) {
            size_t need = 0;
            st = tbx_component_read(f, i, c, NULL, 0, &need, err);
            if (st != TBX_E_BUFFER_TOO_SMALL && st != TBX_OK) break;
            void *buf = malloc(need ? need : 1);
            st = tbx_component_read(f, i, c, buf, need, &need, err);
            free(buf);
        }
    }
    tbx_close(f);
    return st;
}

static char *write_temp(const uint8_t *p, size_t n) {
    static int counter;
    char *path = malloc(600);
    tbx_test_tmppath(path, 600, "tbx_test_zt_%d_%d.zt", (int)getpid(), counter++);
    FILE *fp = fopen(path, "wb");
    if (fp) { fwrite(p, 1, n, fp); fclose(fp); }
    return path;
}

typedef struct probs {
    int n;
    tbx_status codes[16];
    char msgs[4][400];
} probs;

static void collect(void *ud, const tbx_error *e) {
    probs *p = ud;
    if (p->n < 16) p->codes[p->n] = e->code;
    if (p->n < 4) snprintf(p->msgs[p->n], sizeof p->msgs[0], "%s: %s", e->field, e->message);
    p->n++;
}

static tbx_status validate_mem(const uint8_t *p, size_t n, probs *pr) {
    char *path = write_temp(p, n);
    memset(pr, 0, sizeof *pr);
    uint64_t np = 0;
    tbx_status st = tbx_validate_path(path, NULL, collect, pr, &np);
    unlink(path);
    free(path);
    return st;
}

/* The driver must be registered (src/formats/registry.c) for everything below. */
TBX_TEST(driver_registered) {
    uint8_t head[64] = "ZTEN1000";
    tbx_format fmt = tbx_detect_format(head, sizeof head, 4096);
    if (fmt != TBX_FORMAT_ZTENSOR)
        fprintf(stderr, "tbx_driver_ztensor is not registered in src/formats/registry.c: most "
                        "tests below fail for that reason\n");
    CHECK_EQ(fmt, TBX_FORMAT_ZTENSOR);
    CHECK_EQ(tbx_format_from_path("model.zt"), TBX_FORMAT_ZTENSOR);
}

/* ------------------------------------------------------------------------------------------ */
/* CRC-32C                                                                                     */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(crc32c_known_vectors) {
    /* check value of the CRC catalogue, RFC 3720 B.4 vectors, and a classic sentence */
    CHECK_EQ(tbx_crc32c(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ(tbx_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ(tbx_crc32c_hw(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ(tbx_crc32c(0, "", 0), 0u);
    uint8_t b[32];
    memset(b, 0, 32);
    CHECK_EQ(tbx_crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xFF, 32);
    CHECK_EQ(tbx_crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    CHECK_EQ(tbx_crc32c(0, b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)(31 - i);
    CHECK_EQ(tbx_crc32c(0, b, 32), 0x113FDB5Cu);
    const char *fox = "The quick brown fox jumps over the lazy dog";
    CHECK_EQ(tbx_crc32c(0, fox, strlen(fox)), 0x22620404u);
    /* appending: crc(a || b) == crc(crc(a), b) */
    CHECK_EQ(tbx_crc32c(tbx_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
}

TBX_TEST(crc32c_sse42_matches_table) {
    size_t n = (size_t)1 << 20;
    uint8_t *buf = malloc(n + 64);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n + 64; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    int mismatches = 0;
    /* every length and alignment around the 8-byte and 3 x 4096-byte lane boundaries */
    for (size_t off = 0; off < 16; off++)
        for (size_t len = 0; len < 200; len++)
            if (tbx_crc32c_sw(0x1234u, buf + off, len) != tbx_crc32c_hw(0x1234u, buf + off, len))
                mismatches++;
    size_t lens[] = {12287, 12288, 12289, 24576 + 7, 100000, n};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (size_t off = 0; off < 9; off += 3)
            if (tbx_crc32c_sw(0, buf + off, lens[i]) != tbx_crc32c_hw(0, buf + off, lens[i]))
                mismatches++;
    for (int r = 0; r < 300; r++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t off = x % 64, len = (x >> 8) % (n - 64);
        uint32_t seed = (uint32_t)(x >> 40);
        if (tbx_crc32c_sw(seed, buf + off, len) != tbx_crc32c_hw(seed, buf + off, len))
            mismatches++;
    }
    CHECK_EQ(mismatches, 0);
    if (getenv("TBX_CRC_BENCH")) { /* throughput of both paths, for docs/formats/ztensor.md */
        size_t big = (size_t)256 << 20;
        uint8_t *m = malloc(big);
        for (size_t i = 0; i < big; i++) m[i] = (uint8_t)(i * 131u);
        for (int path = 0; path < 2; path++) {
            double best = 1e9;
            for (int rep = 0; rep < 5; rep++) {
                struct timespec t0, t1;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                volatile uint32_t c = path ? tbx_crc32c_hw(0, m, big) : tbx_crc32c_sw(0, m, big);
                (void)c;
                clock_gettime(CLOCK_MONOTONIC, &t1);
                double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
                if (s < best) best = s;
            }
            printf("crc32c %s: %.2f GB/s (best of 5, 256 MiB)\n",
                   path ? "sse4.2 (3 lanes)" : "slice-by-8", (double)big / best / 1e9);
        }
        free(m);
    }
    free(buf);
}

/* ------------------------------------------------------------------------------------------ */
/* Reading hand-built files                                                                    */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(read_base_file) {
    size_t n;
    uint8_t *p = base_file(&n);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(p, n, 0, NULL, &f, &e));
    if (f) {
        CHECK_EQ(tbx_file_format(f), TBX_FORMAT_ZTENSOR);
        CHECK_EQ(tbx_file_version(f), 1);
        CHECK_EQ(tbx_tensor_count(f), 1);
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
        CHECK_STR(ti.name, "x");
        CHECK_EQ(ti.dtype, TBX_DT_F32);
        CHECK_EQ(ti.ndim, 1);
        CHECK_EQ(ti.shape[0], 4);
        CHECK_EQ(ti.offset, 64);
        CHECK_EQ(ti.nbytes, 16);
        float out[4];
        CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 4, out, &e));
        CHECK(memcmp(out, base_vals, 16) == 0);
        float out2[4];
        CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 4, out2, &e));
        CHECK(memcmp(out2, base_vals, 16) == 0);
    }
    tbx_close(f);
    /* detected without forcing the format */
    tbx_open_options o;
    tbx_open_options_init(&o);
    f = NULL;
    CHECK_OK(tbx_open_memory(&f, p, n, &o, &e));
    CHECK(f && tbx_file_format(f) == TBX_FORMAT_ZTENSOR);
    tbx_close(f);
    free(p);
}

/* Manifest with every kind of attribute value, indefinite lengths, unknown keys, half floats. */
TBX_TEST(read_attributes_all_cbor_types) {
    uint8_t area[72];
    memset(area, 0, sizeof area);
    memcpy(area + 56, base_vals, 16);
    tb m = {0};
    tb_u8(&m, 0xBF); /* indefinite root map */
    tb_text(&m, "zzz_unknown"); /* unknown key: skipped (its value nests and has a tag) */
    tb_arr(&m, 2); tb_u8(&m, 0xC1); tb_uint(&m, 5); tb_map(&m, 0);
    tb_text(&m, "attributes");
    tb_map(&m, 12);
    tb_text(&m, "u"); tb_uint(&m, 18446744073709551615ull);
    tb_text(&m, "i"); tb_head(&m, 1, 41); /* -42 */
    tb_text(&m, "h"); tb_u8(&m, 0xF9); tb_u8(&m, 0x3E); tb_u8(&m, 0x00); /* half 1.5 */
    tb_text(&m, "f"); tb_u8(&m, 0xFA); tb_u8(&m, 0x40); tb_u8(&m, 0x49); tb_u8(&m, 0x0F); tb_u8(&m, 0xDB);
    tb_text(&m, "d"); tb_u8(&m, 0xFB); { uint8_t d[8] = {0x3F, 0xB9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9A}; tb_raw(&m, d, 8); }
    tb_text(&m, "s");
    tb_u8(&m, 0x7F); tb_text(&m, "ab"); tb_text(&m, "c\xC3\xA9"); tb_u8(&m, 0xFF); /* "abcé" */
    tb_text(&m, "y"); tb_head(&m, 2, 3); tb_raw(&m, "\x00\x01\xFF", 3);
    tb_text(&m, "a"); tb_arr(&m, 3); tb_uint(&m, 1); tb_uint(&m, 2); tb_uint(&m, 3);
    tb_text(&m, "mix"); tb_u8(&m, 0x9F); tb_uint(&m, 1); tb_text(&m, "x"); tb_u8(&m, 0xF6); tb_u8(&m, 0xFF);
    tb_text(&m, "m"); tb_map(&m, 1); tb_text(&m, "k"); tb_u8(&m, 0xF5);
    tb_text(&m, "n"); tb_u8(&m, 0xF6);
    tb_text(&m, "b"); tb_u8(&m, 0xF4);
    tb_text(&m, "objects");
    tb_map(&m, 1);
    uint64_t shape[1] = {4};
    tb_dense(&m, "x", "f32", shape, 1, 64, 16, "raw");
    tb_text(&m, "version"); tb_text(&m, "1.1.0");
    tb_u8(&m, 0xFF);
    size_t n;
    uint8_t *p = zt_file(area, sizeof area, &m, &n);
    tb_free(&m);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(p, n, 0, NULL, &f, &e));
    if (f) {
        CHECK_EQ(tbx_meta_count(f), 12);
        const tbx_value *v;
        uint64_t u;
        int64_t i;
        double d;
        size_t len;
        v = tbx_meta_find(f, "u");
        CHECK(v && tbx_value_type_of(v) == TBX_V_U64 && tbx_value_get_u64(v, &u) == TBX_OK &&
              u == UINT64_MAX);
        v = tbx_meta_find(f, "i");
        CHECK(v && tbx_value_type_of(v) == TBX_V_I64 && tbx_value_get_i64(v, &i) == TBX_OK && i == -42);
        v = tbx_meta_find(f, "h");
        CHECK(v && tbx_value_type_of(v) == TBX_V_F16 && tbx_value_get_f64(v, &d) == TBX_OK && d == 1.5);
        v = tbx_meta_find(f, "f");
        CHECK(v && tbx_value_type_of(v) == TBX_V_F32 && tbx_value_get_f64(v, &d) == TBX_OK &&
              (float)d == 3.14159274101257324f);
        v = tbx_meta_find(f, "d");
        CHECK(v && tbx_value_type_of(v) == TBX_V_F64 && tbx_value_get_f64(v, &d) == TBX_OK && d == 0.1);
        v = tbx_meta_find(f, "s");
        const char *s = tbx_value_get_str(v, &len);
        CHECK(v && tbx_value_type_of(v) == TBX_V_STRING && len == 5 && memcmp(s, "abc\xC3\xA9", 5) == 0);
        v = tbx_meta_find(f, "y");
        s = tbx_value_get_str(v, &len);
        CHECK(v && tbx_value_type_of(v) == TBX_V_BYTES && len == 3 && memcmp(s, "\x00\x01\xFF", 3) == 0);
        v = tbx_meta_find(f, "a");
        CHECK(v && tbx_value_type_of(v) == TBX_V_ARRAY && tbx_value_len(v) == 3 &&
              tbx_value_elem_type(v) == TBX_V_U64);
        CHECK(v && tbx_value_get_u64(tbx_value_at(v, 2), &u) == TBX_OK && u == 3);
        v = tbx_meta_find(f, "mix");
        CHECK(v && tbx_value_len(v) == 3 && tbx_value_type_of(tbx_value_at(v, 1)) == TBX_V_STRING &&
              tbx_value_type_of(tbx_value_at(v, 2)) == TBX_V_NULL);
        v = tbx_meta_find(f, "m");
        CHECK(v && tbx_value_type_of(v) == TBX_V_MAP && tbx_value_len(v) == 1 &&
              tbx_value_type_of(tbx_value_at(v, 0)) == TBX_V_BOOL);
        CHECK(tbx_value_type_of(tbx_meta_find(f, "n")) == TBX_V_NULL && tbx_meta_find(f, "n"));
        v = tbx_meta_find(f, "b");
        CHECK(v && tbx_value_type_of(v) == TBX_V_BOOL && tbx_value_get_u64(v, &u) == TBX_OK && u == 0);
    }
    tbx_close(f);
    free(p);
}

/* The reference writer's layout for scalars and empty tensors, and an object with attributes. */
static void body_misc(tb *m) {
    uint64_t sh0[1] = {0};
    tb_dense(m, "empty", "f32", sh0, 1, 64, 0, NULL);
    tb_dense(m, "scalar", "i16", NULL, 0, 64, 2, NULL);
    tb_text(m, "withattr");
    tb_map(m, 4);
    tb_text(m, "shape"); tb_arr(m, 1); tb_uint(m, 1);
    tb_text(m, "format"); tb_text(m, "dense");
    tb_text(m, "attributes"); tb_map(m, 1); tb_text(m, "note"); tb_text(m, "hi");
    tb_text(m, "components"); tb_map(m, 1); tb_text(m, "data"); tb_comp(m, "u8", 128, 1, NULL);
}

TBX_TEST(read_scalar_empty_object_attributes) {
    uint8_t area[128 - 8 + 1];
    memset(area, 0, sizeof area);
    area[56] = 0xFE; area[57] = 0xFF; /* i16 -2 */
    area[120] = 7;
    size_t n;
    uint8_t *p = file_with(area, sizeof area, body_misc, 3, &n);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(p, n, 0, NULL, &f, &e));
    if (f) {
        uint64_t idx;
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_find(f, "scalar", &idx));
        CHECK_OK(tbx_tensor_info_get(f, idx, &ti));
        CHECK_EQ(ti.ndim, 0);
        CHECK_EQ(ti.nelems, 1);
        float v = 0;
        CHECK_OK(tbx_tensor_read_f32(f, idx, 0, 1, &v, &e));
        CHECK(v == -2.0f);
        CHECK_OK(tbx_tensor_find(f, "empty", &idx));
        CHECK_OK(tbx_tensor_info_get(f, idx, &ti));
        CHECK_EQ(ti.nelems, 0);
        CHECK_EQ(ti.nbytes, 0);
        const tbx_value *a = tbx_meta_find(f, "ztensor.attributes.withattr");
        CHECK(a && tbx_value_type_of(a) == TBX_V_MAP && tbx_value_len(a) == 1);
        size_t kl;
        CHECK(a && strcmp(tbx_value_key_at(a, 0, &kl), "note") == 0);
    }
    tbx_close(f);
    probs pr;
    CHECK_OK(validate_mem(p, n, &pr));
    CHECK_EQ(pr.n, 0);
    free(p);
}

/* ------------------------------------------------------------------------------------------ */
/* Writing                                                                                     */
/* ------------------------------------------------------------------------------------------ */
static char *temp_path(void) {
    static int counter;
    char *path = malloc(600);
    tbx_test_tmppath(path, 600, "tbx_test_ztw_%d_%d.zt", (int)getpid(), counter++);
    unlink(path);
    return path;
}

static tbx_writer *open_writer(const char *path, int level, const char *digest) {
    tbx_write_options o;
    tbx_write_options_init(&o);
    o.format = TBX_FORMAT_ZTENSOR;
    o.compress_level = level;
    o.digest = digest;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, path, &o, &e) != TBX_OK) {
        fprintf(stderr, "writer_open: %s\n", e.message);
        return NULL;
    }
    return w;
}

/* The exact bytes of a small file, assembled by hand from the format description and the
 * canonical CBOR rules (definite lengths, shortest heads, keys shorter-first then bytewise). */
TBX_TEST(write_canonical_bytes) {
    char *path = temp_path();
    tbx_writer *w = open_writer(path, 0, NULL);
    CHECK(w != NULL);
    if (!w) { free(path); return; }
    tbx_error e;
    tbx_value *v;
    v = tbx_value_new_int(TBX_V_I32, -2); CHECK_OK(tbx_writer_add_meta(w, "a", 1, v, &e)); tbx_value_free(v);
    v = tbx_value_new_float(TBX_V_F64, 1.5); CHECK_OK(tbx_writer_add_meta(w, "cc", 2, v, &e)); tbx_value_free(v);
    v = tbx_value_new_bool(1); CHECK_OK(tbx_writer_add_meta(w, "b", 1, v, &e)); tbx_value_free(v);
    v = tbx_value_new_string("hi", 2); CHECK_OK(tbx_writer_add_meta(w, "s", 1, v, &e)); tbx_value_free(v);
    uint64_t shape[1] = {2}, idx;
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "x", 0, TBX_DT_F32, 1, shape, 1};
    CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &e));
    float vals[2] = {1.0f, 2.0f};
    CHECK_OK(tbx_writer_write_tensor(w, idx, vals, 8, &e));
    CHECK_OK(tbx_writer_finish(w, &e));

    static const uint8_t man[] = {
        0xA3,
        0x67, 'o', 'b', 'j', 'e', 'c', 't', 's', 0xA1,
          0x61, 'x', 0xA3,
            0x65, 's', 'h', 'a', 'p', 'e', 0x81, 0x02,
            0x66, 'f', 'o', 'r', 'm', 'a', 't', 0x65, 'd', 'e', 'n', 's', 'e',
            0x6A, 'c', 'o', 'm', 'p', 'o', 'n', 'e', 'n', 't', 's', 0xA1,
              0x64, 'd', 'a', 't', 'a', 0xA3,
                0x65, 'd', 't', 'y', 'p', 'e', 0x63, 'f', '3', '2',
                0x66, 'l', 'e', 'n', 'g', 't', 'h', 0x08,
                0x66, 'o', 'f', 'f', 's', 'e', 't', 0x18, 0x40,
        0x67, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x65, '1', '.', '1', '.', '0',
        0x6A, 'a', 't', 't', 'r', 'i', 'b', 'u', 't', 'e', 's', 0xA4,
          0x61, 'a', 0x21,
          0x61, 'b', 0xF5,
          0x61, 's', 0x62, 'h', 'i',
          0x62, 'c', 'c', 0xFB, 0x3F, 0xF8, 0, 0, 0, 0, 0, 0,
    };
    size_t want_n = 64 + 8 + sizeof man + 16;
    uint8_t *want = calloc(1, want_n);
    memcpy(want, "ZTEN1000", 8);
    memcpy(want + 64, vals, 8);
    memcpy(want + 72, man, sizeof man);
    want[72 + sizeof man] = (uint8_t)sizeof man;
    memcpy(want + want_n - 8, "ZTEN1000", 8);
    size_t n;
    uint8_t *got = tbx_test_slurp(path, &n);
    CHECK_EQ(n, want_n);
    CHECK(got && n == want_n && memcmp(got, want, n) == 0);
    if (got && n == want_n && memcmp(got, want, n) != 0) {
        for (size_t i = 0; i < n; i++)
            if (got[i] != want[i]) { fprintf(stderr, "first difference at byte %zu\n", i); break; }
    }
    free(got);
    free(want);
    unlink(path);
    free(path);
}

/* A writer never writes what its reader refuses: an attribute array of nulls costs the reader a
 * value node (~150 bytes) per one-byte element; past the default amplification budget
 * (tbx_limits.meta_budget_*: 1 x file + 32 MiB) the writer refuses it (TBX_E_LIMIT naming
 * "attributes", no file), and below it the file is written and opens. 300,000 nulls are 45 MB
 * of nodes for a 300 KB file (over), 150,000 are 22 MB (under). */
static tbx_status write_nulls(const char *path, size_t n, tbx_error *e) {
    tbx_writer *w = open_writer(path, 0, NULL);
    if (!w) return TBX_E_IO;
    tbx_value *arr = tbx_value_new_array(TBX_V_NULL);
    for (size_t i = 0; arr && i < n; i++) tbx_value_array_push(arr, tbx_value_new_null());
    tbx_status st = tbx_writer_add_meta(w, "nulls", 5, arr, e);
    tbx_value_free(arr);
    uint64_t shape[1] = {1}, idx;
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "x", 0, TBX_DT_F32, 1, shape, 1};
    float one = 1.0f;
    if (st == TBX_OK) st = tbx_writer_add_tensor(w, &d, &idx, e);
    if (st == TBX_OK) st = tbx_writer_write_tensor(w, idx, &one, 4, e);
    if (st == TBX_OK) return tbx_writer_finish(w, e);
    tbx_writer_abort(w);
    return st;
}

TBX_TEST(writer_refuses_what_reader_refuses) {
    char *path = temp_path();
    tbx_error e;
    CHECK_EQ(write_nulls(path, 300000, &e), TBX_E_LIMIT);
    CHECK(strcmp(e.field, "attributes") == 0);
    CHECK(strstr(e.message, "\"nulls\"") != NULL);
    CHECK(access(path, F_OK) != 0);
    CHECK_OK(write_nulls(path, 150000, &e));
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    const tbx_value *v = f ? tbx_meta_find(f, "nulls") : NULL;
    CHECK(v && tbx_value_len(v) == 150000);
    tbx_close(f);
    unlink(path);
    free(path);
}

typedef struct dt_case { tbx_dtype dt; uint32_t size; } dt_case;
static const dt_case all_dtypes[] = {
    {TBX_DT_F64, 8}, {TBX_DT_F32, 4}, {TBX_DT_F16, 2}, {TBX_DT_BF16, 2},
    {TBX_DT_F8_E4M3, 1}, {TBX_DT_F8_E5M2, 1}, {TBX_DT_C64, 8}, {TBX_DT_C128, 16},
    {TBX_DT_I64, 8}, {TBX_DT_I32, 4}, {TBX_DT_I16, 2}, {TBX_DT_I8, 1},
    {TBX_DT_U64, 8}, {TBX_DT_U32, 4}, {TBX_DT_U16, 2}, {TBX_DT_U8, 1}, {TBX_DT_BOOL, 1},
};
#define N_DT (sizeof all_dtypes / sizeof all_dtypes[0])

/* Every dtype, raw and zstd (compressible and not), with and without digests: the bytes read
 * back are the bytes written; files are valid; the same calls give the same bytes. */
static void round_trip(int level, const char *digest) {
    char *path = temp_path(), *path2 = temp_path();
    uint8_t *data[N_DT];
    size_t nb[N_DT];
    for (int pass = 0; pass < 2; pass++) {
        tbx_writer *w = open_writer(pass ? path2 : path, level, digest);
        CHECK(w != NULL);
        if (!w) break;
        tbx_error e;
        uint64_t x = 12345;
        for (size_t i = 0; i < N_DT; i++) {
            uint64_t shape[2] = {3, 50 + i};
            char name[32];
            snprintf(name, sizeof name, "t%02zu", i);
            tbx_tensor_desc d = {sizeof(tbx_tensor_desc), name, 0, all_dtypes[i].dt, 2, shape, 1};
            uint64_t idx;
            CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &e));
            nb[i] = 3 * (50 + i) * all_dtypes[i].size;
            if (pass == 0) {
                data[i] = malloc(nb[i]);
                for (size_t k = 0; k < nb[i]; k++) {
                    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                    /* half the tensors random (incompressible), half repetitive */
                    data[i][k] = (i % 2) ? (uint8_t)(k % 7) : (uint8_t)x;
                    if (all_dtypes[i].dt == TBX_DT_BOOL) data[i][k] &= 1;
                }
            }
        }
        /* written in reverse order, in two chunks each */
        for (size_t j = N_DT; j-- > 0;) {
            CHECK_OK(tbx_writer_write_tensor(w, j, data[j], nb[j] / 2, &e));
            CHECK_OK(tbx_writer_write_tensor(w, j, data[j] + nb[j] / 2, nb[j] - nb[j] / 2, &e));
        }
        CHECK_OK(tbx_writer_finish(w, &e));
    }
    size_t n1, n2;
    uint8_t *a = tbx_test_slurp(path, &n1), *b = tbx_test_slurp(path2, &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0); /* deterministic */
    tbx_file *f = NULL;
    tbx_error e;
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.flags = TBX_OPEN_VERIFY_DIGESTS;
    CHECK_OK(tbx_open_path(&f, path, &o, &e));
    int zstd_count = 0;
    if (f) {
        CHECK_EQ(tbx_tensor_count(f), N_DT);
        for (size_t i = 0; i < N_DT; i++) {
            char name[32];
            snprintf(name, sizeof name, "t%02zu", i);
            uint64_t idx;
            CHECK_OK(tbx_tensor_find(f, name, &idx));
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
            tbx_tensor_info_get(f, idx, &ti);
            CHECK_EQ(ti.dtype, all_dtypes[i].dt);
            tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
            CHECK_OK(tbx_component_info_get(f, idx, 0, &ci));
            if (ci.encoding == TBX_ENC_ZSTD) {
                zstd_count++;
                CHECK(ci.stored_bytes * 20 <= ci.nbytes * 19); /* kept only when it saves 5% */
            }
            CHECK_EQ(ci.digest != NULL, digest != NULL);
            if (digest && ci.digest) CHECK(strncmp(ci.digest, digest, strlen(digest)) == 0);
            uint8_t *buf = malloc(nb[i]);
            size_t need;
            CHECK_OK(tbx_tensor_read(f, idx, buf, nb[i], &need, &e));
            CHECK(need == nb[i] && memcmp(buf, data[i], nb[i]) == 0);
            free(buf);
        }
    }
    tbx_close(f);
    if (level > 0) CHECK(zstd_count >= (int)N_DT / 2 - 1); /* the repetitive ones compress */
    else CHECK_EQ(zstd_count, 0);
    probs pr;
    memset(&pr, 0, sizeof pr);
    uint64_t np = 0;
    CHECK_OK(tbx_validate_path(path, NULL, collect, &pr, &np));
    CHECK_EQ(np, 0);
    for (size_t i = 0; i < N_DT; i++) free(data[i]);
    free(a);
    free(b);
    unlink(path);
    unlink(path2);
    free(path);
    free(path2);
}

TBX_TEST(round_trip_raw) { round_trip(0, NULL); }
TBX_TEST(round_trip_zstd) { round_trip(3, NULL); }
TBX_TEST(round_trip_zstd_crc32c) { round_trip(5, "crc32c"); }
TBX_TEST(round_trip_raw_sha256) { round_trip(0, "sha256"); }

/* The digest strings are what an independent computation gives over the stored bytes. */
TBX_TEST(digest_strings_independent) {
    char *path = temp_path();
    for (int alg = 0; alg < 2; alg++) {
        tbx_writer *w = open_writer(path, 0, alg ? "sha256" : "crc32c");
        CHECK(w != NULL);
        if (!w) break;
        tbx_error e;
        uint64_t shape[1] = {9}, idx;
        tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "d", 0, TBX_DT_U8, 1, shape, 1};
        CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &e));
        CHECK_OK(tbx_writer_write_tensor(w, idx, "123456789", 9, &e));
        CHECK_OK(tbx_writer_finish(w, &e));
        tbx_file *f = NULL;
        CHECK_OK(tbx_open_path(&f, path, NULL, &e));
        tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
        if (f && tbx_component_info_get(f, 0, 0, &ci) == TBX_OK) {
            if (!alg) {
                CHECK_STR(ci.digest, "crc32c:0xE3069283");
            } else {
                unsigned char md[32];
                unsigned len = 0;
                EVP_Digest("123456789", 9, md, &len, EVP_sha256(), NULL);
                char want[80] = "sha256:";
                for (int i = 0; i < 32; i++) snprintf(want + 7 + 2 * i, 3, "%02x", md[i]);
                CHECK_STR(ci.digest, want);
            }
        } else {
            CHECK(0);
        }
        tbx_close(f);
        unlink(path);
    }
    free(path);
}

TBX_TEST(write_metadata_round_trip_and_refusals) {
    char *path = temp_path();
    tbx_writer *w = open_writer(path, 0, NULL);
    CHECK(w != NULL);
    if (!w) { free(path); return; }
    tbx_error e;
    tbx_value *v;
    v = tbx_value_new_float(TBX_V_F16, 0.5); CHECK_OK(tbx_writer_add_meta(w, "half", 4, v, &e)); tbx_value_free(v);
    v = tbx_value_new_float(TBX_V_F32, 0.1); CHECK_OK(tbx_writer_add_meta(w, "single", 6, v, &e)); tbx_value_free(v);
    v = tbx_value_new_uint(TBX_V_U8, 200); CHECK_OK(tbx_writer_add_meta(w, "u8", 2, v, &e)); tbx_value_free(v);
    v = tbx_value_new_int(TBX_V_I64, INT64_MIN); CHECK_OK(tbx_writer_add_meta(w, "min", 3, v, &e)); tbx_value_free(v);
    v = tbx_value_new_bytes("\x00\x01", 2); CHECK_OK(tbx_writer_add_meta(w, "bytes", 5, v, &e)); tbx_value_free(v);
    v = tbx_value_new_null(); CHECK_OK(tbx_writer_add_meta(w, "null", 4, v, &e)); tbx_value_free(v);
    tbx_value *arr = tbx_value_new_array(TBX_V_NULL);
    tbx_value_array_push(arr, tbx_value_new_uint(TBX_V_U32, 7));
    tbx_value_array_push(arr, tbx_value_new_string("x", 1));
    tbx_value *inner = tbx_value_new_map();
    tbx_value_map_put(inner, "z", 1, tbx_value_new_bool(0));
    tbx_value_map_put(inner, "aa", 2, tbx_value_new_int(TBX_V_I8, -1));
    tbx_value_array_push(arr, inner);
    CHECK_OK(tbx_writer_add_meta(w, "arr", 3, arr, &e));
    tbx_value_free(arr);
    /* object attributes through the metadata naming rule */
    tbx_value *oa = tbx_value_new_map();
    tbx_value_map_put(oa, "role", 4, tbx_value_new_string("bias", 4));
    CHECK_OK(tbx_writer_add_meta(w, "ztensor.attributes.t", 20, oa, &e));
    tbx_value_free(oa);
    /* refusals */
    uint64_t sh[1] = {2};
    v = tbx_value_new_ndarray(TBX_DT_U8, sh, 1, "ab", 2);
    CHECK_EQ(tbx_writer_add_meta(w, "nd", 2, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    v = tbx_value_new_bitset((const uint8_t *)"\x05", 3);
    CHECK_EQ(tbx_writer_add_meta(w, "bits", 4, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    v = tbx_value_new_string("\xFF\xFE", 2);
    CHECK_EQ(tbx_writer_add_meta(w, "bad", 3, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    CHECK_EQ(tbx_writer_add_section(w, "s", 0, "x", 1, &e), TBX_E_UNSUPPORTED);
    uint64_t shape[1] = {1}, shape32[1] = {32}, idx;
    tbx_tensor_desc q = {sizeof(tbx_tensor_desc), "q", 0, TBX_DT_Q4_0, 1, shape32, 1};
    CHECK_EQ(tbx_writer_add_tensor(w, &q, &idx, &e), TBX_E_UNSUPPORTED);
    tbx_tensor_desc nd = {sizeof(tbx_tensor_desc), "nodata", 0, TBX_DT_F32, 1, shape, 0};
    CHECK_EQ(tbx_writer_add_tensor(w, &nd, &idx, &e), TBX_E_UNSUPPORTED);
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "t", 0, TBX_DT_U8, 1, shape, 1};
    CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &e));
    CHECK_OK(tbx_writer_write_tensor(w, idx, "\x09", 1, &e));
    CHECK_OK(tbx_writer_finish(w, &e));

    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    if (f) {
        CHECK_EQ(tbx_meta_count(f), 8);
        const tbx_value *x;
        double dd;
        int64_t ii;
        uint64_t uu;
        x = tbx_meta_find(f, "half");
        CHECK(x && tbx_value_type_of(x) == TBX_V_F16 && tbx_value_get_f64(x, &dd) == 0 && dd == 0.5);
        x = tbx_meta_find(f, "single");
        CHECK(x && tbx_value_type_of(x) == TBX_V_F32 && tbx_value_get_f64(x, &dd) == 0 && dd == (double)0.1f);
        x = tbx_meta_find(f, "u8");
        CHECK(x && tbx_value_type_of(x) == TBX_V_U64 && tbx_value_get_u64(x, &uu) == 0 && uu == 200);
        x = tbx_meta_find(f, "min");
        CHECK(x && tbx_value_type_of(x) == TBX_V_I64 && tbx_value_get_i64(x, &ii) == 0 && ii == INT64_MIN);
        x = tbx_meta_find(f, "bytes");
        CHECK(x && tbx_value_type_of(x) == TBX_V_BYTES && tbx_value_len(x) == 2);
        CHECK(tbx_meta_find(f, "null") && tbx_value_type_of(tbx_meta_find(f, "null")) == TBX_V_NULL);
        x = tbx_meta_find(f, "arr");
        CHECK(x && tbx_value_len(x) == 3);
        const tbx_value *im = x ? tbx_value_at(x, 2) : NULL;
        size_t kl;
        CHECK(im && tbx_value_type_of(im) == TBX_V_MAP && tbx_value_len(im) == 2);
        CHECK(im && strcmp(tbx_value_key_at(im, 0, &kl), "z") == 0); /* canonical: shorter first */
        x = tbx_meta_find(f, "ztensor.attributes.t");
        CHECK(x && tbx_value_type_of(x) == TBX_V_MAP && tbx_value_len(x) == 1);
    }
    tbx_close(f);
    /* the object attributes really are inside the object: no "attributes" key at the root
     * holds them (find "role" after "t"'s "attributes" key in the raw bytes) */
    size_t n;
    uint8_t *raw = tbx_test_slurp(path, &n);
    CHECK(raw && memmem(raw, n, "\x6a" "attributes" "\xa1\x64role", 17) != NULL);
    free(raw);
    unlink(path);
    free(path);
}

/* zTensor's ranges of the generic options are checked at the writer's open (and so by
 * tbx_writer_check, before any work), not at the first tensor. */
TBX_TEST(write_options_refused) {
    char *path = temp_path();
    tbx_write_options o;
    tbx_write_options_init(&o);
    o.format = TBX_FORMAT_ZTENSOR;
    o.alignment = 32;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_EQ(tbx_writer_open(&w, path, &o, &e), TBX_E_UNSUPPORTED);
    CHECK(w == NULL);
    CHECK_STR(e.field, "alignment");
    CHECK_EQ(tbx_writer_check(path, &o, &e), TBX_E_UNSUPPORTED);
    CHECK_EQ(access(path, F_OK), -1); /* nothing left behind */
    uint64_t idx;
    o.alignment = 4096; /* a larger power of two is fine */
    CHECK_OK(tbx_writer_open(&w, path, &o, &e));
    uint64_t shape2[1] = {3};
    tbx_tensor_desc d1 = {sizeof(tbx_tensor_desc), "a", 0, TBX_DT_U8, 1, shape2, 1}, d2 = {sizeof(tbx_tensor_desc), "b", 0, TBX_DT_U8, 1, shape2, 1};
    CHECK_OK(tbx_writer_add_tensor(w, &d1, &idx, &e));
    CHECK_OK(tbx_writer_add_tensor(w, &d2, &idx, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 0, "abc", 3, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 1, "def", 3, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    tbx_component_info c0, c1;
    CHECK(f && tbx_component_info_get(f, 0, 0, &c0) == 0 && tbx_component_info_get(f, 1, 0, &c1) == 0);
    if (f) CHECK(c0.offset % 4096 == 0 && c1.offset % 4096 == 0);
    tbx_close(f);
    unlink(path);
    o.alignment = 0;
    o.compress_level = 99;
    CHECK_EQ(tbx_writer_open(&w, path, &o, &e), TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "compress_level");
    CHECK(strstr(e.message, "zstd level 99") != NULL);
    CHECK_EQ(tbx_writer_check(path, &o, &e), TBX_E_INVALID_ARG);
    o.compress_level = -1;
    CHECK_EQ(tbx_writer_check(path, &o, &e), TBX_E_INVALID_ARG);
    free(path);
}

/* ------------------------------------------------------------------------------------------ */
/* Sparse and quantized_group                                                                  */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(sparse_and_qgroup_round_trip) {
    for (int level = 0; level <= 3; level += 3) {
        char *path = temp_path();
        tbx_writer *w = open_writer(path, level, "crc32c");
        CHECK(w != NULL);
        if (!w) { free(path); return; }
        tbx_error e;
        /* dense alongside, to share the file */
        uint64_t dshape[1] = {2}, idx;
        tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "dense", 0, TBX_DT_F32, 1, dshape, 1};
        CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &e));
        /* CSR [3, 4]: row 0: (1, 2.0), row 1: none, row 2: (0, -1.0), (3, 4.5) */
        float cv[3] = {2.0f, -1.0f, 4.5f};
        uint64_t ci[3] = {1, 0, 3}, cp[4] = {0, 1, 1, 3}, cshape[2] = {3, 4};
        CHECK_OK(tbx_ztensor_writer_add_csr(w, "csr", TBX_DT_F32, cshape, cv, 3, ci, cp, &e));
        /* refused: bad CSR input, duplicate name */
        uint64_t badi[3] = {1, 0, 4};
        CHECK_EQ(tbx_ztensor_writer_add_csr(w, "bad", TBX_DT_F32, cshape, cv, 3, badi, cp, &e),
                 TBX_E_INVALID_ARG);
        CHECK_EQ(tbx_ztensor_writer_add_csr(w, "dense", TBX_DT_F32, cshape, cv, 3, ci, cp, &e),
                 TBX_E_DUPLICATE);
        /* COO [2, 2, 3] with 2 entries, i16 values */
        int16_t ov[2] = {7, -3};
        uint64_t oshape[3] = {2, 2, 3}, oc[6] = {1, 0, /* dim 0 */ 0, 1, /* dim 1 */ 2, 0};
        CHECK_OK(tbx_ztensor_writer_add_coo(w, "coo", TBX_DT_I16, oshape, 3, ov, 2, oc, &e));
        /* quantized_group [2, 5], 4-bit codes, 8 per u32, group 2 -> 3 groups per row */
        uint8_t codes[10] = {0, 1, 2, 3, 15, 4, 5, 6, 7, 8};
        uint32_t words[2] = {0, 0};
        for (int k = 0; k < 10; k++) words[k / 8] |= (uint32_t)codes[k] << (4 * (k % 8));
        float scales[6] = {0.5f, 1.0f, 2.0f, 0.25f, -1.0f, 3.0f};
        float zeros[6] = {1.0f, 0.0f, 8.0f, 2.0f, 4.0f, 0.5f};
        tbx_ztensor_qgroup qg = {4, 2, TBX_DT_U32, 0, TBX_DT_F32, words, scales, zeros};
        uint64_t qshape[2] = {2, 5};
        CHECK_OK(tbx_ztensor_writer_add_qgroup(w, "qg", qshape, 2, &qg, &e));
        float dv[2] = {5.0f, 6.0f};
        CHECK_OK(tbx_writer_write_tensor(w, idx, dv, 8, &e));
        CHECK_OK(tbx_writer_finish(w, &e));

        tbx_file *f = NULL;
        tbx_open_options o;
        tbx_open_options_init(&o);
        o.flags = TBX_OPEN_VERIFY_DIGESTS;
        CHECK_OK(tbx_open_path(&f, path, &o, &e));
        if (f) {
            uint64_t i;
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
            float out[12];
            CHECK_OK(tbx_tensor_find(f, "csr", &i));
            CHECK_OK(tbx_tensor_info_get(f, i, &ti));
            CHECK_EQ(ti.layout, TBX_LAYOUT_SPARSE_CSR);
            CHECK_EQ(ti.ncomponents, 3);
            CHECK_OK(tbx_tensor_read_f32(f, i, 0, 12, out, &e));
            const float want_csr[12] = {0, 2, 0, 0, 0, 0, 0, 0, -1, 0, 0, 4.5f};
            CHECK(memcmp(out, want_csr, sizeof want_csr) == 0);
            float part[3];
            CHECK_OK(tbx_tensor_read_f32(f, i, 9, 3, part, &e));
            CHECK(part[0] == 0 && part[1] == 0 && part[2] == 4.5f);
            CHECK_OK(tbx_tensor_find(f, "coo", &i));
            CHECK_OK(tbx_tensor_read_f32(f, i, 0, 12, out, &e));
            float want_coo[12] = {0};
            want_coo[1 * 6 + 0 * 3 + 2] = 7;   /* (1, 0, 2) */
            want_coo[0 * 6 + 1 * 3 + 0] = -3;  /* (0, 1, 0) */
            CHECK(memcmp(out, want_coo, sizeof want_coo) == 0);
            CHECK_OK(tbx_tensor_find(f, "qg", &i));
            CHECK_OK(tbx_tensor_info_get(f, i, &ti));
            CHECK_EQ(ti.layout, TBX_LAYOUT_QUANT_GROUP);
            CHECK_EQ(ti.dtype, TBX_DT_F32);
            CHECK_OK(tbx_tensor_read_f32(f, i, 0, 10, out, &e));
            int bad = 0;
            for (int k = 0; k < 10; k++) {
                int r = k / 5, c = k % 5, g = r * 3 + c / 2;
                float want = ((float)codes[k] - zeros[g]) * scales[g];
                if (out[k] != want) bad++;
            }
            CHECK_EQ(bad, 0);
            CHECK_OK(tbx_tensor_read_f32(f, i, 6, 3, part, &e));
            /* element 6 is row 1, column 1: group 3; element 8 is column 3: group 4 */
            CHECK(part[0] == ((float)codes[6] - zeros[3]) * scales[3]);
            CHECK(part[1] == ((float)codes[7] - zeros[4]) * scales[4]);
            CHECK(part[2] == ((float)codes[8] - zeros[4]) * scales[4]);
            /* the common description: what the qgroup writer was given */
            tbx_quant_info qi;
            qi.struct_size = sizeof qi;
            CHECK_OK(tbx_tensor_quant_get(f, i, &qi));
            CHECK_EQ(qi.method, TBX_QUANT_LINEAR);
            CHECK_EQ(qi.code_dtype, TBX_DT_U32);
            CHECK_EQ(qi.bits, 4);
            CHECK_EQ(qi.code_signed, 0);
            CHECK_EQ(qi.block_size, 2);
            CHECK_EQ(qi.super_block_size, 0);
            CHECK_EQ(qi.scale.scope, TBX_QSCOPE_GROUP);
            CHECK_EQ(qi.scale.dtype, TBX_DT_F32);
            CHECK_EQ(qi.scale.count, 6);
            CHECK(qi.scale.values == NULL);
            tbx_component_info qc;
            CHECK_OK(tbx_component_info_get(f, i, (uint32_t)qi.scale.component, &qc));
            CHECK_STR(qc.name, "scales");
            CHECK_EQ(qi.zero.scope, TBX_QSCOPE_GROUP);
            CHECK_EQ(qi.zero.count, 6);
            CHECK_OK(tbx_component_info_get(f, i, (uint32_t)qi.zero.component, &qc));
            CHECK_STR(qc.name, "zeros");
            uint64_t cpw = 0;
            CHECK_STR(tbx_value_key_at(qi.params, 0, NULL), "codes_per_word");
            CHECK_OK(tbx_value_get_u64(tbx_value_at(qi.params, 0), &cpw));
            CHECK_EQ(cpw, 8);
            /* tensors that are not quantized have none */
            uint64_t j;
            CHECK_OK(tbx_tensor_find(f, "csr", &j));
            CHECK_EQ(tbx_tensor_quant_get(f, j, &qi), TBX_E_NOT_FOUND);
            CHECK_OK(tbx_tensor_find(f, "dense", &j));
            CHECK_EQ(tbx_tensor_quant_get(f, j, &qi), TBX_E_NOT_FOUND);
            const tbx_value *a = tbx_meta_find(f, "ztensor.attributes.qg");
            CHECK(a && tbx_value_len(a) == 3);
            CHECK_OK(tbx_tensor_find(f, "dense", &i));
            CHECK_OK(tbx_tensor_read_f32(f, i, 0, 2, part, &e));
            CHECK(part[0] == 5.0f && part[1] == 6.0f);
        }
        tbx_close(f);
        probs pr;
        memset(&pr, 0, sizeof pr);
        uint64_t np = 0;
        CHECK_OK(tbx_validate_path(path, NULL, collect, &pr, &np));
        CHECK_EQ(np, 0);
        unlink(path);
        free(path);
    }
}

/* Hand-built CSR and COO with bad indices: validate reports them, decoding refuses them. */
static int g_sparse_case;
static void body_sparse(tb *m) {
    tb_text(m, "s");
    tb_map(m, 3);
    tb_text(m, "shape"); tb_arr(m, 2); tb_uint(m, 2); tb_uint(m, 3);
    if (g_sparse_case < 3) {
        tb_text(m, "format"); tb_text(m, "sparse_csr");
        tb_text(m, "components"); tb_map(m, 3);
        tb_text(m, "values"); tb_comp(m, "f32", 64, 8, NULL);
        tb_text(m, "indices"); tb_comp(m, "u32", 128, 8, NULL);
        tb_text(m, "indptr"); tb_comp(m, "i64", 192, 24, NULL);
    } else {
        tb_text(m, "format"); tb_text(m, "sparse_coo");
        tb_text(m, "components"); tb_map(m, 2);
        tb_text(m, "values"); tb_comp(m, "f32", 64, 8, NULL);
        tb_text(m, "coords"); tb_comp(m, "u16", 128, 8, NULL);
    }
}

TBX_TEST(sparse_bad_indices) {
    for (g_sparse_case = 0; g_sparse_case < 5; g_sparse_case++) {
        uint8_t area[216 - 8];
        memset(area, 0, sizeof area);
        float v[2] = {1.5f, 2.5f};
        memcpy(area + 56, v, 8);
        uint32_t ind[2] = {2, 0};
        int64_t ptr[3] = {0, 1, 2};
        uint16_t co[4] = {1, 0, 2, 1};
        if (g_sparse_case == 1) ind[1] = 3;       /* column out of range */
        if (g_sparse_case == 2) ptr[1] = 3;       /* not monotonic / above nnz */
        if (g_sparse_case == 4) co[1] = 2;        /* row coordinate out of range */
        if (g_sparse_case < 3) {
            memcpy(area + 120, ind, 8);
            memcpy(area + 184, ptr, 24);
        } else {
            memcpy(area + 120, co, 8);
        }
        size_t n;
        uint8_t *p = file_with(area, g_sparse_case < 3 ? sizeof area : 136 - 8, body_sparse, 1, &n);
        tbx_file *f = NULL;
        tbx_error e;
        CHECK_OK(open_mem(p, n, 0, NULL, &f, &e));
        float out[6];
        bool good = g_sparse_case == 0 || g_sparse_case == 3;
        tbx_status st = f ? tbx_tensor_read_f32(f, 0, 0, 6, out, &e) : TBX_E_STATE;
        if (good) {
            CHECK_OK(st);
            if (g_sparse_case == 0) CHECK(out[2] == 1.5f && out[3] == 2.5f);
            else CHECK(out[3 + 2] == 1.5f && out[0 + 1] == 2.5f);
        } else {
            CHECK_EQ(st, TBX_E_FORMAT);
        }
        tbx_close(f);
        probs pr;
        tbx_status vs = validate_mem(p, n, &pr);
        if (good) { CHECK_OK(vs); CHECK_EQ(pr.n, 0); }
        else { CHECK_EQ(vs, TBX_E_FORMAT); CHECK(pr.n >= 1); }
        free(p);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* zstd: short, long, truncated, bomb                                                          */
/* ------------------------------------------------------------------------------------------ */
typedef struct peak_heap { size_t live, peak; } peak_heap;
static void *pk_alloc(void *ud, size_t n) {
    peak_heap *h = ud;
    h->live += n;
    if (h->live > h->peak) h->peak = h->live;
    return malloc(n);
}
static void *pk_realloc(void *ud, void *p, size_t o, size_t n) {
    peak_heap *h = ud;
    h->live += n - o;
    if (h->live > h->peak) h->peak = h->live;
    return realloc(p, n);
}
static void pk_free(void *ud, void *p, size_t n) {
    peak_heap *h = ud;
    h->live -= n;
    free(p);
}

static size_t g_zlen;
static void body_zstd(tb *m) {
    uint64_t shape[1] = {16};
    tb_dense(m, "z", "f32", shape, 1, 64, g_zlen, "zstd");
}

/* A file whose one f32[16] tensor (64 bytes) is the given zstd data. */
static uint8_t *zstd_file(const void *z, size_t zlen, size_t *n) {
    uint8_t *area = calloc(1, 56 + zlen);
    memcpy(area + 56, z, zlen);
    g_zlen = zlen;
    uint8_t *p = file_with(area, 56 + zlen, body_zstd, 1, n);
    free(area);
    return p;
}

TBX_TEST(zstd_short_long_truncated_bomb) {
    tbx_error e;
    size_t n;
    uint8_t raw[1 << 16];
    for (size_t i = 0; i < sizeof raw; i++) raw[i] = (uint8_t)(i * 7);
    size_t cap = ZSTD_compressBound(sizeof raw);
    uint8_t *z = malloc(cap);
    /* exact: 64 bytes */
    size_t zl = ZSTD_compress(z, cap, raw, 64, 3);
    uint8_t *p = zstd_file(z, zl, &n);
    CHECK_OK(open_read_all(p, n, 0, &e));
    free(p);
    /* short: 60 bytes */
    zl = ZSTD_compress(z, cap, raw, 60, 3);
    p = zstd_file(z, zl, &n);
    CHECK_EQ(open_read_all(p, n, 0, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "only 60 bytes") != NULL);
    if (!strstr(e.message, "only 60 bytes")) fprintf(stderr, "message: %s\n", e.message);
    free(p);
    /* long: 65 bytes */
    zl = ZSTD_compress(z, cap, raw, 65, 3);
    p = zstd_file(z, zl, &n);
    CHECK_EQ(open_read_all(p, n, 0, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "more than") != NULL);
    free(p);
    /* two frames of 32 bytes each: one stream, accepted */
    size_t z1 = ZSTD_compress(z, cap, raw, 32, 3);
    size_t z2 = ZSTD_compress(z + z1, cap - z1, raw + 32, 32, 3);
    p = zstd_file(z, z1 + z2, &n);
    CHECK_OK(open_read_all(p, n, 0, &e));
    free(p);
    /* truncated frame */
    zl = ZSTD_compress(z, cap, raw, 64, 3);
    p = zstd_file(z, zl - 3, &n);
    CHECK_EQ(open_read_all(p, n, 0, &e), TBX_E_FORMAT);
    free(p);
    /* garbage */
    p = zstd_file("not zstd at all", 15, &n);
    CHECK_EQ(open_read_all(p, n, 0, &e), TBX_E_FORMAT);
    free(p);
    /* bomb: 256 MiB of zeros (streamed, no content size) declared as 64 bytes */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 19);
    uint8_t *zeros = calloc(1, 1 << 20);
    size_t bcap = 1 << 20, blen = 0;
    uint8_t *bomb = malloc(bcap);
    for (int i = 0; i < 256; i++) {
        ZSTD_inBuffer in = {zeros, 1 << 20, 0};
        while (in.pos < in.size) {
            ZSTD_outBuffer o = {bomb + blen, bcap - blen, 0};
            ZSTD_compressStream2(cc, &o, &in, ZSTD_e_continue);
            blen += o.pos;
        }
    }
    for (;;) {
        ZSTD_inBuffer in = {NULL, 0, 0};
        ZSTD_outBuffer o = {bomb + blen, bcap - blen, 0};
        size_t r = ZSTD_compressStream2(cc, &o, &in, ZSTD_e_end);
        blen += o.pos;
        if (r == 0) break;
    }
    ZSTD_freeCCtx(cc);
    p = zstd_file(bomb, blen, &n);
    peak_heap h = {0, 0};
    tbx_allocator al = {pk_alloc, pk_realloc, pk_free, &h};
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.format = TBX_FORMAT_ZTENSOR;
    o.allocator = &al;
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_memory(&f, p, n, &o, &e));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint8_t out[64];
    size_t need;
    CHECK_EQ(f ? tbx_tensor_read(f, 0, out, 64, &need, &e) : TBX_E_STATE, TBX_E_FORMAT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(secs < 0.5);                 /* fails fast: stops right after the 64 bytes */
    CHECK(h.peak < ((size_t)12 << 20)); /* decoder window bounded (8 MiB + buffers) */
    tbx_close(f);
    CHECK_EQ(h.live, 0);
    free(p);
    free(bomb);
    free(zeros);
    free(z);
}

/* ------------------------------------------------------------------------------------------ */
/* Digests, padding                                                                            */
/* ------------------------------------------------------------------------------------------ */
static const char *g_digest;
static void body_digest(tb *m) {
    tb_text(m, "x");
    tb_map(m, 3);
    tb_text(m, "shape"); tb_arr(m, 1); tb_uint(m, 4);
    tb_text(m, "format"); tb_text(m, "dense");
    tb_text(m, "components"); tb_map(m, 1); tb_text(m, "data");
    tb_map(m, 4);
    tb_text(m, "dtype"); tb_text(m, "f32");
    tb_text(m, "offset"); tb_uint(m, 64);
    tb_text(m, "length"); tb_uint(m, 16);
    tb_text(m, "digest"); tb_text(m, g_digest);
}

TBX_TEST(digest_verification) {
    uint8_t area[72];
    memset(area, 0, sizeof area);
    memcpy(area + 56, base_vals, 16);
    char good[40];
    snprintf(good, sizeof good, "crc32c:0x%08X", tbx_crc32c_sw(0, base_vals, 16));
    char lower[40];
    snprintf(lower, sizeof lower, "crc32c:0X%08x", tbx_crc32c_sw(0, base_vals, 16));
    struct { const char *d; tbx_status open_verify, read_verify, validate; } cases[] = {
        {good, TBX_OK, TBX_OK, TBX_OK},
        {lower, TBX_OK, TBX_OK, TBX_OK},
        {"crc32c:0x00000000", TBX_OK, TBX_E_CHECKSUM, TBX_E_CHECKSUM},
        {"sha256:0000000000000000000000000000000000000000000000000000000000000000", TBX_OK,
         TBX_E_CHECKSUM, TBX_E_CHECKSUM},
        {"md5:abcdef", TBX_E_UNSUPPORTED, TBX_E_UNSUPPORTED, TBX_E_UNSUPPORTED},
        {"crc32c:1234", TBX_E_FORMAT, TBX_E_FORMAT, TBX_E_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g_digest = cases[i].d;
        size_t n;
        uint8_t *p = file_with(area, sizeof area, body_digest, 1, &n);
        tbx_error e;
        /* without verification everything opens and reads */
        CHECK_OK(open_read_all(p, n, 0, &e));
        tbx_file *f = NULL;
        CHECK_EQ(open_mem(p, n, TBX_OPEN_VERIFY_DIGESTS, NULL, &f, &e), cases[i].open_verify);
        tbx_close(f);
        CHECK_EQ(open_read_all(p, n, TBX_OPEN_VERIFY_DIGESTS, &e), cases[i].read_verify);
        probs pr;
        CHECK_EQ(validate_mem(p, n, &pr), cases[i].validate);
        CHECK_EQ(pr.n, cases[i].validate == TBX_OK ? 0 : 1); /* reported once */
        free(p);
    }
    /* sha256 over the stored bytes, computed independently */
    unsigned char md[32];
    unsigned len = 0;
    EVP_Digest(base_vals, 16, md, &len, EVP_sha256(), NULL);
    char sha[80] = "sha256:";
    for (int i = 0; i < 32; i++) snprintf(sha + 7 + 2 * i, 3, "%02X", md[i]); /* upper case ok */
    g_digest = sha;
    size_t n;
    uint8_t *p = file_with(area, sizeof area, body_digest, 1, &n);
    tbx_error e;
    CHECK_OK(open_read_all(p, n, TBX_OPEN_VERIFY_DIGESTS, &e));
    free(p);
}

TBX_TEST(padding_must_be_zero) {
    size_t n;
    uint8_t *p = base_file(&n);
    probs pr;
    CHECK_OK(validate_mem(p, n, &pr));
    p[8 + 10] = 0x5A; /* inside the padding before the first blob */
    CHECK_OK(open_status(p, n, NULL)); /* opening ignores padding */
    CHECK_EQ(validate_mem(p, n, &pr), TBX_E_PADDING);
    CHECK_EQ(pr.n, 1);
    CHECK(strstr(pr.msgs[0], "at byte 18") != NULL);
    free(p);
}

TBX_TEST(bool_values_zero_or_one) {
    uint8_t area[56 + 3];
    memset(area, 0, sizeof area);
    area[56] = 1; area[57] = 0; area[58] = 2;
    tb m = {0};
    tb_map(&m, 2);
    tb_text(&m, "version"); tb_text(&m, "1.1.0");
    tb_text(&m, "objects"); tb_map(&m, 1);
    uint64_t shape[1] = {3};
    tb_dense(&m, "b", "bool", shape, 1, 64, 3, NULL);
    size_t n;
    uint8_t *p = zt_file(area, sizeof area, &m, &n);
    tb_free(&m);
    probs pr;
    CHECK_EQ(validate_mem(p, n, &pr), TBX_E_FORMAT);
    CHECK_EQ(pr.n, 1);
    free(p);
}

/* ------------------------------------------------------------------------------------------ */
/* Malformed files                                                                             */
/* ------------------------------------------------------------------------------------------ */
typedef struct mcase {
    const char *name;
    tbx_status want;
    const char *field; /* the field at fault (docs/reliability.md: the rule for which) */
} mcase;

/* Builds malformed file number k (returns NULL past the end). */
static uint8_t *malformed(int k, size_t *n, mcase *mc) {
    uint8_t area[56 + 16 + 64];
    memset(area, 0, sizeof area);
    memcpy(area + 56, base_vals, 16);
    uint64_t shape4[1] = {4};
    tb m = {0};
    uint8_t *p = NULL;
#define CASE(label, code, fld) if (k-- == 0) { mc->name = label; mc->want = code; mc->field = fld;
#define END_CASE }
#define ROOT2() tb_map(&m, 2); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "objects")
    CASE("bad header magic", TBX_E_BAD_MAGIC, "magic")
        p = base_file(n); memcpy(p, "ZTEN2000", 8); return p; END_CASE
    CASE("bad footer magic", TBX_E_BAD_MAGIC, "footer.magic")
        p = base_file(n); p[*n - 1] = 'X'; return p; END_CASE
    CASE("legacy v0.1 magic", TBX_E_BAD_VERSION, "magic")
        p = base_file(n); memcpy(p, "ZTEN0001", 8); return p; END_CASE
    CASE("file shorter than 24 bytes", TBX_E_TRUNCATED, "footer")
        p = calloc(1, 20); memcpy(p, "ZTEN1000", 8); memcpy(p + 12, "ZTEN1000", 8); *n = 20; return p; END_CASE
    CASE("manifest size past the header", TBX_E_TRUNCATED, "footer.manifest_size")
        p = base_file(n); uint64_t big = *n; for (int i = 0; i < 8; i++) p[*n - 16 + i] = (uint8_t)(big >> (8 * i)); return p; END_CASE
    CASE("manifest size over 1 GiB", TBX_E_LIMIT, "footer.manifest_size")
        p = base_file(n); uint64_t big = ((uint64_t)1 << 30) + 1; for (int i = 0; i < 8; i++) p[*n - 16 + i] = (uint8_t)(big >> (8 * i)); return p; END_CASE
    CASE("manifest size 2^64-1", TBX_E_LIMIT, "footer.manifest_size")
        p = base_file(n); memset(p + *n - 16, 0xFF, 8); return p; END_CASE
    CASE("manifest size zero", TBX_E_FORMAT, "footer.manifest_size")
        p = base_file(n); memset(p + *n - 16, 0, 8); return p; END_CASE
    CASE("manifest is not a map", TBX_E_FORMAT, "manifest")
        tb_arr(&m, 0); END_CASE
    CASE("truncated CBOR (map declares 3 entries, has 2)", TBX_E_TRUNCATED, "manifest")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "objects"); tb_map(&m, 1);
        tb_dense(&m, "x", "f32", shape4, 1, 64, 16, NULL); END_CASE
    CASE("truncated CBOR (text runs past the manifest)", TBX_E_TRUNCATED, "manifest.objects")
        ROOT2(); tb_map(&m, 1); tb_head(&m, 3, 40); tb_raw(&m, "short", 5); END_CASE
    CASE("huge declared map count", TBX_E_TRUNCATED, "manifest.objects")
        ROOT2(); tb_head(&m, 5, 0xFFFFFFFFFFull); END_CASE
    CASE("huge declared array count in attributes", TBX_E_TRUNCATED, "attributes")
        ROOT2(); tb_map(&m, 0); tb_text(&m, "attributes"); m.p[0] = 0xA3; tb_map(&m, 1); tb_text(&m, "a"); tb_head(&m, 4, 1ull << 62); END_CASE
    CASE("huge declared string length", TBX_E_TRUNCATED, "manifest.objects")
        ROOT2(); tb_map(&m, 1); tb_head(&m, 3, 0x7FFFFFFFFFFFFFFFull); END_CASE
    CASE("too many tensors for the limit", TBX_E_LIMIT, "manifest.objects")
        ROOT2(); tb_map(&m, 5000); for (int i = 0; i < 10000; i++) tb_u8(&m, 0); END_CASE
    CASE("deep nesting in attributes", TBX_E_LIMIT, "attributes")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "attributes"); tb_map(&m, 1); tb_text(&m, "a");
        for (int i = 0; i < 100; i++) tb_arr(&m, 1);
        tb_uint(&m, 0); tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("deep nesting in an unknown key (100000 levels)", TBX_E_LIMIT, "manifest")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "junk");
        for (int i = 0; i < 100000; i++) tb_u8(&m, 0x81);
        tb_uint(&m, 0); tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("tag chain in an unknown key", TBX_E_LIMIT, "manifest")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "junk");
        for (int i = 0; i < 5000; i++) tb_u8(&m, 0xC0);
        tb_uint(&m, 0); tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("more attribute values than the node budget (1.1 million nulls)", TBX_E_LIMIT, "attributes")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "attributes"); tb_map(&m, 1); tb_text(&m, "a");
        tb_arr(&m, 1100000); for (int i = 0; i < 1100000; i++) tb_u8(&m, 0xF6);
        tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("tag in an attribute value", TBX_E_UNSUPPORTED, "attributes")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "attributes"); tb_map(&m, 1); tb_text(&m, "a");
        tb_u8(&m, 0xC2); tb_head(&m, 2, 1); tb_u8(&m, 1); tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("negative integer below -2^63", TBX_E_UNSUPPORTED, "attributes")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "attributes"); tb_map(&m, 1); tb_text(&m, "a");
        tb_head(&m, 1, 0xFFFFFFFFFFFFFFFFull); tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("reserved additional info (malformed CBOR)", TBX_E_FORMAT, "manifest")
        ROOT2(); tb_u8(&m, 0xBC); END_CASE
    CASE("unexpected break", TBX_E_FORMAT, "manifest")
        ROOT2(); tb_u8(&m, 0xFF); END_CASE
    CASE("invalid UTF-8 in a text key", TBX_E_FORMAT, "object.name")
        ROOT2(); tb_map(&m, 1); tb_head(&m, 3, 2); tb_raw(&m, "\xC3\x28", 2); tb_map(&m, 0); END_CASE
    CASE("non-text map key", TBX_E_FORMAT, "object.name")
        ROOT2(); tb_map(&m, 1); tb_uint(&m, 5); tb_map(&m, 0); END_CASE
    CASE("indefinite text with a byte-string chunk", TBX_E_FORMAT, "object.name")
        ROOT2(); tb_map(&m, 1); tb_u8(&m, 0x7F); tb_head(&m, 2, 1); tb_u8(&m, 'a'); tb_u8(&m, 0xFF); tb_map(&m, 0); END_CASE
    CASE("bytes after the manifest map", TBX_E_FORMAT, "manifest")
        ROOT2(); tb_map(&m, 1); tb_dense(&m, "x", "f32", shape4, 1, 64, 16, NULL); tb_u8(&m, 0); END_CASE
    CASE("missing version", TBX_E_FORMAT, "manifest.version")
        tb_map(&m, 1); tb_text(&m, "objects"); tb_map(&m, 1); tb_dense(&m, "x", "f32", shape4, 1, 64, 16, NULL); END_CASE
    CASE("missing objects", TBX_E_FORMAT, "manifest.objects")
        tb_map(&m, 1); tb_text(&m, "version"); tb_text(&m, "1.1.0"); END_CASE
    CASE("version is an integer", TBX_E_FORMAT, "manifest.version")
        tb_map(&m, 2); tb_text(&m, "version"); tb_uint(&m, 1); tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("objects is an array", TBX_E_FORMAT, "manifest.objects")
        ROOT2(); tb_arr(&m, 0); END_CASE
    CASE("shape is a string", TBX_E_FORMAT, "object.shape")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_text(&m, "4");
        tb_text(&m, "format"); tb_text(&m, "dense"); tb_text(&m, "components"); tb_map(&m, 1); tb_text(&m, "data"); tb_comp(&m, "f32", 64, 16, NULL); END_CASE
    CASE("negative dimension", TBX_E_FORMAT, "object.shape")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_head(&m, 1, 3);
        tb_text(&m, "format"); tb_text(&m, "dense"); tb_text(&m, "components"); tb_map(&m, 1); tb_text(&m, "data"); tb_comp(&m, "f32", 64, 16, NULL); END_CASE
    CASE("too many dimensions", TBX_E_LIMIT, "object.shape")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 100); for (int i = 0; i < 100; i++) tb_uint(&m, 1);
        tb_text(&m, "format"); tb_text(&m, "dense"); tb_text(&m, "components"); tb_map(&m, 1); tb_text(&m, "data"); tb_comp(&m, "f32", 64, 4, NULL); END_CASE
    CASE("shape product overflows", TBX_E_OVERFLOW, "object.shape")
        ROOT2(); tb_map(&m, 1); uint64_t sh[2] = {1ull << 40, 1ull << 40}; tb_dense(&m, "x", "f32", sh, 2, 64, 16, NULL); END_CASE
    CASE("offset is a string", TBX_E_FORMAT, "component.offset")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_uint(&m, 4);
        tb_text(&m, "format"); tb_text(&m, "dense"); tb_text(&m, "components"); tb_map(&m, 1); tb_text(&m, "data");
        tb_map(&m, 3); tb_text(&m, "dtype"); tb_text(&m, "f32"); tb_text(&m, "offset"); tb_text(&m, "64"); tb_text(&m, "length"); tb_uint(&m, 16); END_CASE
    CASE("dtype is an integer", TBX_E_FORMAT, "component.dtype")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_uint(&m, 4);
        tb_text(&m, "format"); tb_text(&m, "dense"); tb_text(&m, "components"); tb_map(&m, 1); tb_text(&m, "data");
        tb_map(&m, 3); tb_text(&m, "dtype"); tb_uint(&m, 1); tb_text(&m, "offset"); tb_uint(&m, 64); tb_text(&m, "length"); tb_uint(&m, 16); END_CASE
    CASE("component missing length", TBX_E_FORMAT, "component.length")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_uint(&m, 4);
        tb_text(&m, "format"); tb_text(&m, "dense"); tb_text(&m, "components"); tb_map(&m, 1); tb_text(&m, "data");
        tb_map(&m, 2); tb_text(&m, "dtype"); tb_text(&m, "f32"); tb_text(&m, "offset"); tb_uint(&m, 64); END_CASE
    CASE("duplicate root key", TBX_E_DUPLICATE, "manifest")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "version"); tb_text(&m, "1.1.0");
        tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("duplicate unknown root key", TBX_E_DUPLICATE, "manifest")
        tb_map(&m, 4); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "zz"); tb_uint(&m, 1); tb_text(&m, "zz"); tb_uint(&m, 2);
        tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("duplicate tensor name", TBX_E_DUPLICATE, "tensor.name")
        ROOT2(); tb_map(&m, 2); tb_dense(&m, "x", "f32", shape4, 1, 64, 16, NULL); tb_dense(&m, "x", "f32", shape4, 1, 64, 16, NULL); END_CASE
    CASE("duplicate component field", TBX_E_DUPLICATE, "component")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_uint(&m, 4);
        tb_text(&m, "format"); tb_text(&m, "dense"); tb_text(&m, "components"); tb_map(&m, 1); tb_text(&m, "data");
        tb_map(&m, 4); tb_text(&m, "dtype"); tb_text(&m, "f32"); tb_text(&m, "offset"); tb_uint(&m, 64); tb_text(&m, "offset"); tb_uint(&m, 64); tb_text(&m, "length"); tb_uint(&m, 16); END_CASE
    CASE("duplicate component role", TBX_E_DUPLICATE, "object.components")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_uint(&m, 4);
        tb_text(&m, "format"); tb_text(&m, "dense"); tb_text(&m, "components"); tb_map(&m, 2); tb_text(&m, "data"); tb_comp(&m, "f32", 64, 16, NULL);
        tb_text(&m, "data"); tb_comp(&m, "f32", 64, 16, NULL); END_CASE
    CASE("duplicate attribute key", TBX_E_DUPLICATE, "metadata.key")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "attributes"); tb_map(&m, 2);
        tb_text(&m, "a"); tb_uint(&m, 1); tb_text(&m, "a"); tb_uint(&m, 2); tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("duplicate key in a nested attribute map", TBX_E_DUPLICATE, "attributes")
        tb_map(&m, 3); tb_text(&m, "version"); tb_text(&m, "1.1.0"); tb_text(&m, "attributes"); tb_map(&m, 1); tb_text(&m, "a");
        tb_map(&m, 2); tb_text(&m, "k"); tb_uint(&m, 1); tb_text(&m, "k"); tb_uint(&m, 2); tb_text(&m, "objects"); tb_map(&m, 0); END_CASE
    CASE("component out of bounds (into the manifest)", TBX_E_RANGE, "component.offset")
        ROOT2(); tb_map(&m, 1); tb_dense(&m, "x", "f32", shape4, 1, 64 + 64 + 64, 16, NULL); END_CASE
    CASE("component offset + length overflows", TBX_E_RANGE, "component.offset")
        ROOT2(); tb_map(&m, 1); uint64_t sh[1] = {1}; tb_dense(&m, "x", "f32", sh, 1, 0xFFFFFFFFFFFFFFC0ull, 4, NULL); END_CASE
    CASE("component misaligned", TBX_E_RANGE, "component.offset")
        ROOT2(); tb_map(&m, 1); tb_dense(&m, "x", "f32", shape4, 1, 68, 16, NULL); END_CASE
    CASE("component at offset 0 (the header)", TBX_E_RANGE, "component.offset")
        ROOT2(); tb_map(&m, 1); uint64_t sh[1] = {1}; tb_dense(&m, "x", "f32", sh, 1, 0, 4, NULL); END_CASE
    CASE("components overlap", TBX_E_RANGE, "component.offset")
        ROOT2(); tb_map(&m, 2); tb_dense(&m, "x", "f32", shape4, 1, 64, 16, NULL); uint64_t sh[1] = {2};
        tb_dense(&m, "y", "f32", sh, 1, 64, 8, NULL); END_CASE
    CASE("raw length differs from shape x dtype", TBX_E_FORMAT, "component.length")
        ROOT2(); tb_map(&m, 1); tb_dense(&m, "x", "f32", shape4, 1, 64, 12, NULL); END_CASE
    CASE("unknown dtype", TBX_E_UNSUPPORTED, "component.dtype")
        ROOT2(); tb_map(&m, 1); tb_dense(&m, "x", "float32", shape4, 1, 64, 16, NULL); END_CASE
    CASE("unknown encoding", TBX_E_UNSUPPORTED, "component.encoding")
        ROOT2(); tb_map(&m, 1); tb_dense(&m, "x", "f32", shape4, 1, 64, 16, "lz4"); END_CASE
    CASE("unknown format", TBX_E_UNSUPPORTED, "object.format")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_uint(&m, 4);
        tb_text(&m, "format"); tb_text(&m, "blocked"); tb_text(&m, "components"); tb_map(&m, 1); tb_text(&m, "data"); tb_comp(&m, "f32", 64, 16, NULL); END_CASE
    CASE("unknown component role", TBX_E_FORMAT, "object.components")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_uint(&m, 4);
        tb_text(&m, "format"); tb_text(&m, "dense"); tb_text(&m, "components"); tb_map(&m, 1); tb_text(&m, "weights"); tb_comp(&m, "f32", 64, 16, NULL); END_CASE
    CASE("sparse_csr without indptr", TBX_E_FORMAT, "object.components")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 2); tb_uint(&m, 2); tb_uint(&m, 2);
        tb_text(&m, "format"); tb_text(&m, "sparse_csr"); tb_text(&m, "components"); tb_map(&m, 2);
        tb_text(&m, "values"); tb_comp(&m, "f32", 64, 8, NULL); tb_text(&m, "indices"); tb_comp(&m, "u64", 128, 16, NULL); END_CASE
    CASE("sparse_csr float indices", TBX_E_FORMAT, "component.dtype")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 2); tb_uint(&m, 1); tb_uint(&m, 2);
        tb_text(&m, "format"); tb_text(&m, "sparse_csr"); tb_text(&m, "components"); tb_map(&m, 3);
        tb_text(&m, "values"); tb_comp(&m, "f32", 64, 4, NULL); tb_text(&m, "indices"); tb_comp(&m, "f32", 128, 4, NULL);
        tb_text(&m, "indptr"); tb_comp(&m, "u32", 192, 8, NULL); END_CASE
    CASE("sparse nnz larger than the shape", TBX_E_FORMAT, "object.components")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_uint(&m, 2);
        tb_text(&m, "format"); tb_text(&m, "sparse_coo"); tb_text(&m, "components"); tb_map(&m, 2);
        tb_text(&m, "values"); tb_comp(&m, "f32", 64, 16, NULL); tb_text(&m, "coords"); tb_comp(&m, "u8", 128, 4, NULL); END_CASE
    CASE("quantized_group without bits", TBX_E_FORMAT, "object.attributes")
        ROOT2(); tb_map(&m, 1); tb_text(&m, "x"); tb_map(&m, 3); tb_text(&m, "shape"); tb_arr(&m, 1); tb_uint(&m, 8);
        tb_text(&m, "format"); tb_text(&m, "quantized_group"); tb_text(&m, "components"); tb_map(&m, 3);
        tb_text(&m, "packed_weight"); tb_comp(&m, "u32", 64, 4, NULL); tb_text(&m, "scales"); tb_comp(&m, "f32", 128, 4, NULL);
        tb_text(&m, "zeros"); tb_comp(&m, "f32", 192, 4, NULL); END_CASE
    CASE("component length over max_tensor_bytes", TBX_E_LIMIT, "component")
        ROOT2(); tb_map(&m, 1); uint64_t sh[1] = {1ull << 40}; tb_dense(&m, "x", "u8", sh, 1, 64, 16, "zstd"); END_CASE
#undef CASE
#undef END_CASE
#undef ROOT2
    /* the manifest-only cases: wrap the manifest around the base area */
    if (mc->name && !p) p = zt_file(area, sizeof area, &m, n);
    tb_free(&m);
    return p;
}

static uint8_t *malformed_build(int k, size_t *n, mcase *mc) {
    mc->name = NULL;
    return malformed(k, n, mc);
}

TBX_TEST(malformed_table) {
    int ran = 0;
    tbx_limits lim;
    tbx_limits_default(&lim);
    lim.max_tensors = 1000;
    lim.max_tensor_bytes = (uint64_t)1 << 32;
    for (int k = 0;; k++) {
        mcase mc = {NULL, TBX_OK, NULL};
        size_t n = 0;
        uint8_t *p = malformed_build(k, &n, &mc);
        if (!mc.name) break;
        ran++;
        CHECK(p != NULL);
        if (!p) continue;
        tbx_file *f = NULL;
        tbx_error e;
        memset(&e, 0, sizeof e);
        tbx_status st = open_mem(p, n, 0, &lim, &f, &e);
        if (st == TBX_OK) {
            /* structurally fine: the problem shows when reading */
            st = open_read_all(p, n, 0, &e);
        }
        tbx_close(f);
        if (getenv("TBX_TEST_VERBOSE"))
            printf("%-50s %-18s %s: %s\n", mc.name, tbx_status_name(st), e.field, e.message);
        if (st != mc.want)
            fprintf(stderr, "case \"%s\": got %s (%s: %s), want %s\n", mc.name,
                    tbx_status_name(st), e.field, e.message, tbx_status_name(mc.want));
        CHECK_EQ(st, mc.want);
        if (st != TBX_OK) CHECK(e.message[0] != 0 && e.code == st);
        if (strcmp(e.field, mc.field) != 0)
            fprintf(stderr, "case \"%s\": field \"%s\", want \"%s\"\n", mc.name, e.field,
                    mc.field);
        CHECK(strcmp(e.field, mc.field) == 0);
        free(p);
    }
    CHECK(ran >= 50);
}

/* Truncation at every offset, and every single-byte corruption, of a sample with zstd, sparse,
 * quantized_group and attributes: no crash, no leak (ASan build), every failure described. */
TBX_TEST(truncation_and_corruption_of_a_sample) {
    char *path = temp_path();
    tbx_writer *w = open_writer(path, 3, "crc32c");
    CHECK(w != NULL);
    if (!w) { free(path); return; }
    tbx_error e;
    tbx_value *v = tbx_value_new_string("demo", 4);
    tbx_writer_add_meta(w, "name", 4, v, &e);
    tbx_value_free(v);
    uint64_t shape[1] = {64}, idx;
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "w", 0, TBX_DT_F16, 1, shape, 1};
    CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &e));
    uint16_t hv[64];
    for (int i = 0; i < 64; i++) hv[i] = (uint16_t)(0x3C00 + (i % 4));
    float cv[2] = {1, 2};
    uint64_t ci[2] = {0, 1}, cp[3] = {0, 1, 2}, cs[2] = {2, 2};
    CHECK_OK(tbx_ztensor_writer_add_csr(w, "s", TBX_DT_F32, cs, cv, 2, ci, cp, &e));
    uint32_t words[1] = {0x76543210};
    float sc[2] = {1, 2}, zr[2] = {0, 1};
    tbx_ztensor_qgroup qg = {4, 4, TBX_DT_U32, 8, TBX_DT_F32, words, sc, zr};
    uint64_t qs[1] = {8};
    CHECK_OK(tbx_ztensor_writer_add_qgroup(w, "q", qs, 1, &qg, &e));
    CHECK_OK(tbx_writer_write_tensor(w, idx, hv, sizeof hv, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    size_t n;
    uint8_t *p = tbx_test_slurp(path, &n);
    CHECK(p != NULL && n > 100);
    if (!p) { free(path); return; }
    CHECK_OK(open_read_all(p, n, TBX_OPEN_VERIFY_DIGESTS, &e));
    int opened = 0, described = 0, total = 0;
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *q = malloc(cut ? cut : 1);
        memcpy(q, p, cut);
        tbx_status st = open_read_all(q, cut, TBX_OPEN_VERIFY_DIGESTS, &e);
        total++;
        if (st == TBX_OK) opened++;
        else if (e.message[0] && e.code == st) described++;
        free(q);
    }
    CHECK_EQ(opened, 0);           /* no prefix is a valid file (the footer is gone) */
    CHECK_EQ(described, total);
    uint8_t *q = malloc(n);
    int flips_ok = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(q, p, n);
        q[i] ^= 0x41;
        tbx_status st = open_read_all(q, n, TBX_OPEN_VERIFY_DIGESTS, &e);
        if (st != TBX_OK && !(e.message[0] && e.code == st)) flips_ok = -1000000;
        flips_ok++;
        tbx_file *f = NULL;
        if (open_mem(q, n, 0, NULL, &f, &e) == TBX_OK) {
            for (uint64_t t = 0; t < tbx_tensor_count(f); t++) {
                tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
                tbx_tensor_info_get(f, t, &ti);
                if (ti.nelems <= 1024) {
                    float out[1024];
                    (void)tbx_tensor_read_f32(f, t, 0, ti.nelems, out, &e);
                }
            }
        }
        tbx_close(f);
    }
    CHECK_EQ(flips_ok, (int)n);
    free(q);
    free(p);
    unlink(path);
    free(path);
}

TBX_TEST(limits_header_bytes_and_strings) {
    size_t n;
    uint8_t *p = base_file(&n);
    tbx_limits lim;
    tbx_limits_default(&lim);
    lim.max_header_bytes = 10;
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_EQ(open_mem(p, n, 0, &lim, &f, &e), TBX_E_LIMIT);
    tbx_limits_default(&lim);
    lim.max_string_len = 3; /* "version" key is 7 bytes */
    CHECK_EQ(open_mem(p, n, 0, &lim, &f, &e), TBX_E_LIMIT);
    tbx_limits_default(&lim);
    lim.max_tensor_bytes = 8;
    CHECK_EQ(open_mem(p, n, 0, &lim, &f, &e), TBX_E_LIMIT);
    free(p);
}

TBX_TEST_MAIN()
