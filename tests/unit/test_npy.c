/*
 * test_npy.c - the NumPy driver (.npy and .npz): every dtype both byte orders, Fortran order,
 * round trips through the writers, a malformed-file table with the exact code, field and offset
 * (derived from how each file is built here, from the format description), truncation at every
 * offset, and every allocation failure (tbx_fail_al). The files are built by this test: .npy
 * from the header text numpy writes, .npz from a minimal stored zip writer below (local headers,
 * central directory, end record, a bitwise CRC-32); numpy itself checks both directions in
 * tests/python/test_npy_interop.py.
 */
#include "api.h"
#include "tbx_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The rows' format values (tensorbox.h names neither): found by name, as any caller finds them. */
#define FMT_NPY tbx_format_from_name("npy")
#define FMT_NPZ tbx_format_from_name("npz")

/* ---- building files ---------------------------------------------------------------------- */
typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void put16(buf *b, uint16_t v) { uint8_t t[2] = {(uint8_t)v, (uint8_t)(v >> 8)}; put(b, t, 2); }
static void put32(buf *b, uint32_t v) { put16(b, (uint16_t)v); put16(b, (uint16_t)(v >> 16)); }

/* An .npy stream: magic, version major.0, the header text as given (no padding added), data. */
static buf npy_raw(unsigned major, const char *text, const void *data, size_t n) {
    buf b = {0};
    put(&b, "\x93NUMPY", 6);
    uint8_t v[2] = {(uint8_t)major, 0};
    put(&b, v, 2);
    if (major == 1) put16(&b, (uint16_t)strlen(text));
    else put32(&b, (uint32_t)strlen(text));
    put(&b, text, strlen(text));
    put(&b, data, n);
    return b;
}

/* The header numpy writes for a C-order array (numpy/lib/format.py): the dict, 21 - digits of
 * shape[0] spaces, padding to 64 and '\n'. Written here from that description. */
static buf npy_numpy(const char *descr, const uint64_t *shape, unsigned nd, const void *data,
                     size_t n) {
    char t[1024];
    int k = snprintf(t, sizeof t, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (unsigned i = 0; i < nd; i++)
        k += snprintf(t + k, sizeof t - (size_t)k, "%s%llu", i ? ", " : "",
                      (unsigned long long)shape[i]);
    k += snprintf(t + k, sizeof t - (size_t)k, "%s), }", nd == 1 ? "," : "");
    if (nd) {
        char d[24];
        int dl = snprintf(d, sizeof d, "%llu", (unsigned long long)shape[0]);
        for (int i = dl; i < 21; i++) t[k++] = ' ';
    }
    size_t hlen = (size_t)k + 1, pad = 64 - (10 + hlen) % 64;
    memset(t + k, ' ', pad);
    t[k + pad] = '\n';
    t[k + pad + 1] = '\0';
    return npy_raw(1, t, data, n);
}

static uint32_t crc32_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

typedef struct zmember {
    const char *name;
    const uint8_t *data;
    size_t n;
    uint16_t method, flags;  /* stored: 0 */
    uint32_t usize;          /* 0: n */
} zmember;

/* A zip archive of stored members (APPNOTE 4.3): local headers, central directory, end record.
 * loc[i] gets member i's local header offset. */
static buf zip_build(const zmember *m, size_t nm, uint64_t *loc) {
    buf b = {0};
    uint64_t off[16];
    for (size_t i = 0; i < nm; i++) {
        off[i] = b.n;
        if (loc) loc[i] = b.n;
        uint32_t crc = crc32_bitwise(m[i].data, m[i].n);
        put32(&b, 0x04034b50u); put16(&b, 20); put16(&b, m[i].flags); put16(&b, m[i].method);
        put16(&b, 0); put16(&b, 0x21); put32(&b, crc); put32(&b, (uint32_t)m[i].n);
        put32(&b, m[i].usize ? m[i].usize : (uint32_t)m[i].n);
        put16(&b, (uint16_t)strlen(m[i].name)); put16(&b, 0);
        put(&b, m[i].name, strlen(m[i].name));
        put(&b, m[i].data, m[i].n);
    }
    uint64_t cd = b.n;
    for (size_t i = 0; i < nm; i++) {
        uint32_t crc = crc32_bitwise(m[i].data, m[i].n);
        put32(&b, 0x02014b50u); put16(&b, 0x031e); put16(&b, 20); put16(&b, m[i].flags);
        put16(&b, m[i].method); put16(&b, 0); put16(&b, 0x21); put32(&b, crc);
        put32(&b, (uint32_t)m[i].n); put32(&b, m[i].usize ? m[i].usize : (uint32_t)m[i].n);
        put16(&b, (uint16_t)strlen(m[i].name)); put16(&b, 0); put16(&b, 0); put16(&b, 0);
        put16(&b, 0); put32(&b, 0600u << 16); put32(&b, (uint32_t)off[i]);
        put(&b, m[i].name, strlen(m[i].name));
    }
    uint64_t cdlen = b.n - cd;
    put32(&b, 0x06054b50u); put16(&b, 0); put16(&b, 0); put16(&b, (uint16_t)nm);
    put16(&b, (uint16_t)nm); put32(&b, (uint32_t)cdlen); put32(&b, (uint32_t)cd); put16(&b, 0);
    return b;
}

static tbx_status open_mem(tbx_file **f, const buf *b, tbx_format fmt, uint32_t flags,
                           const tbx_limits *lim, const tbx_allocator *al, tbx_error *err) {
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.format = fmt;
    o.flags = flags;
    o.limits = lim;
    o.allocator = al;
    return tbx_open_memory(f, b->p, b->n, &o, err);
}

/* ---- dtypes, byte orders, Fortran order ---------------------------------------------------- */
static const struct { const char *descr; tbx_dtype dt; unsigned size, unit; } DT[] = {
    {"|b1", TBX_DT_BOOL, 1, 1}, {"|i1", TBX_DT_I8, 1, 1},   {"<i2", TBX_DT_I16, 2, 2},
    {"<i4", TBX_DT_I32, 4, 4},  {"<i8", TBX_DT_I64, 8, 8},  {"|u1", TBX_DT_U8, 1, 1},
    {"<u2", TBX_DT_U16, 2, 2},  {"<u4", TBX_DT_U32, 4, 4},  {"<u8", TBX_DT_U64, 8, 8},
    {"<f2", TBX_DT_F16, 2, 2},  {"<f4", TBX_DT_F32, 4, 4},  {"<f8", TBX_DT_F64, 8, 8},
    {"<c8", TBX_DT_C64, 8, 4},  {"<c16", TBX_DT_C128, 16, 8},
};

TBX_TEST(every_dtype_both_byte_orders) {
    for (size_t d = 0; d < sizeof DT / sizeof DT[0]; d++) {
        for (int be = 0; be < 2; be++) {
            char descr[8];
            snprintf(descr, sizeof descr, "%s", DT[d].descr);
            if (be && DT[d].size > 1) descr[0] = '>';
            const uint64_t shape[2] = {2, 3};
            uint8_t data[6 * 16], want[6 * 16];
            size_t n = 6 * DT[d].size;
            for (size_t i = 0; i < n; i++) data[i] = (uint8_t)(i * 7 + d);
            memcpy(want, data, n);
            if (be && DT[d].size > 1) /* each unit reversed: the little-endian bytes */
                for (size_t u = 0; u < n; u += DT[d].unit)
                    for (unsigned a = 0; a < DT[d].unit; a++) want[u + a] = data[u + DT[d].unit - 1 - a];
            buf b = npy_numpy(descr, shape, 2, data, n);
            tbx_file *f = NULL;
            tbx_error e;
            CHECK_OK(open_mem(&f, &b, 0, 0, NULL, NULL, &e));
            if (!f) { free(b.p); continue; }
            CHECK_EQ(tbx_file_format(f), FMT_NPY);
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
            CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
            CHECK_EQ(ti.dtype, DT[d].dt);
            CHECK_EQ(ti.ndim, 2);
            CHECK_STR(ti.name, "arr_0");
            uint8_t got[6 * 16];
            size_t need = 0;
            CHECK_OK(tbx_tensor_read(f, 0, got, sizeof got, &need, &e));
            CHECK_EQ(need, n);
            CHECK(memcmp(got, want, n) == 0);
            /* every byte range */
            for (size_t p = 0; p < n; p++)
                for (size_t l = 1; p + l <= n; l += 3) {
                    memset(got, 0xAA, sizeof got);
                    CHECK_OK(tbx_tensor_read_range(f, 0, p, got, l, &e));
                    CHECK(memcmp(got, want + p, l) == 0);
                }
            tbx_close(f);
            free(b.p);
        }
    }
}

/* Fortran order: stored element k of shape (2, 3, 4) is (a, b, c) with k = a + 2 (b + 3 c); read
 * row-major, element (a, b, c) is at a*12 + b*4 + c. */
static void fortran_expect(uint16_t *want) {
    for (unsigned a = 0; a < 2; a++)
        for (unsigned b = 0; b < 3; b++)
            for (unsigned c = 0; c < 4; c++) want[a * 12 + b * 4 + c] = (uint16_t)(1000 + a + 2 * (b + 3 * c));
}

static tbx_status cb_read(void *ud, uint64_t off, void *dst, size_t len) {
    const buf *b = ud;
    if (off > b->n || len > b->n - off) return TBX_E_TRUNCATED;
    memcpy(dst, b->p + off, len);
    return TBX_OK;
}

TBX_TEST(fortran_order_reads_row_major) {
    uint16_t stored[24], want[24], got[24];
    for (unsigned k = 0; k < 24; k++) stored[k] = (uint16_t)(1000 + k);
    fortran_expect(want);
    for (int be = 0; be < 2; be++) {
        uint16_t data[24];
        for (unsigned k = 0; k < 24; k++)
            data[k] = be ? (uint16_t)((stored[k] >> 8) | (stored[k] << 8)) : stored[k];
        char text[160];
        snprintf(text, sizeof text, "{'descr': '%s', 'fortran_order': True, 'shape': (2, 3, 4), }",
                 be ? ">u2" : "<u2");
        buf b = npy_raw(1, text, data, sizeof data);
        for (int how = 0; how < 2; how++) { /* memory (gathered), callback (one pass per read) */
            tbx_file *f = NULL;
            tbx_error e;
            tbx_open_options o;
            tbx_open_options_init(&o);
            if (how == 0) CHECK_OK(tbx_open_memory(&f, b.p, b.n, &o, &e));
            else CHECK_OK(tbx_open_callback(&f, cb_read, &b, b.n, &o, &e));
            if (!f) continue;
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
            CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
            CHECK_EQ(ti.shape[0], 2); CHECK_EQ(ti.shape[1], 3); CHECK_EQ(ti.shape[2], 4);
            CHECK_OK(tbx_tensor_read(f, 0, got, sizeof got, NULL, &e));
            CHECK(memcmp(got, want, sizeof want) == 0);
            for (size_t p = 0; p < sizeof want; p++)
                for (size_t l = 1; p + l <= sizeof want; l += 5) {
                    uint8_t r[48];
                    CHECK_OK(tbx_tensor_read_range(f, 0, p, r, l, &e));
                    CHECK(memcmp(r, (uint8_t *)want + p, l) == 0);
                }
            const void *ptr;
            CHECK_EQ(tbx_tensor_map(f, 0, &ptr, NULL, &e), TBX_E_UNSUPPORTED); /* never raw */
            tbx_close(f);
        }
        free(b.p);
    }
}

/* ---- .npz --------------------------------------------------------------------------------- */
TBX_TEST(npz_stored_members_and_names) {
    const uint64_t s1[1] = {3}, s2[2] = {2, 2};
    const uint8_t d1[3] = {1, 0, 1};
    const float d2[4] = {1.5f, -2.0f, 0.25f, 8.0f};
    buf a = npy_numpy("|b1", s1, 1, d1, sizeof d1);
    buf c = npy_numpy("<f4", s2, 2, d2, sizeof d2);
    zmember m[2] = {{"flags.npy", a.p, a.n, 0, 0, 0}, {"dir/w", c.p, c.n, 0, 0, 0}};
    uint64_t loc[2];
    buf z = zip_build(m, 2, loc);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(&f, &z, 0, TBX_OPEN_VERIFY_DIGESTS, NULL, NULL, &e));
    if (f) {
        CHECK_EQ(tbx_file_format(f), FMT_NPZ);
        CHECK_EQ(tbx_tensor_count(f), 2);
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
        CHECK_STR(ti.name, "flags");   /* ".npy" dropped */
        CHECK_OK(tbx_tensor_info_get(f, 1, &ti));
        CHECK_STR(ti.name, "dir/w");   /* no suffix: the name as it is */
        float got[4];
        CHECK_OK(tbx_tensor_read(f, 1, got, sizeof got, NULL, &e));
        CHECK(memcmp(got, d2, sizeof d2) == 0);
        const void *p;
        size_t len;
        CHECK_OK(tbx_tensor_map(f, 1, &p, &len, &e)); /* a stored member is served raw */
        CHECK(p == z.p + loc[1] + 30 + 5 + (c.n - sizeof d2));
        tbx_close(f);
    }
    /* a flipped byte of the data: caught by the member's CRC-32 when digests are verified */
    z.p[loc[1] + 30 + 5 + c.n - 1] ^= 0x40;
    CHECK_OK(open_mem(&f, &z, 0, TBX_OPEN_VERIFY_DIGESTS, NULL, NULL, &e));
    if (f) {
        float got[4];
        CHECK_EQ(tbx_tensor_read(f, 1, got, sizeof got, NULL, &e), TBX_E_CHECKSUM);
        CHECK_STR(e.field, "member.crc32");
        CHECK_EQ(e.offset, loc[1] + 30 + 5);
        CHECK_EQ(tbx_tensor_read_range(f, 1, 0, got, 4, &e), TBX_E_CHECKSUM);
        tbx_close(f);
    }
    free(a.p); free(c.p); free(z.p);
}

/* One big-endian member among little-endian ones: only its component is transformed
 * (tbx_component.xform), so only it reads through the driver; the others stay mappable. */
TBX_TEST(npz_big_endian_member_routes_alone) {
    const uint64_t s1[1] = {4};
    const float le[4] = {1.5f, -2.0f, 0.25f, 8.0f};
    uint8_t be[16];
    for (int i = 0; i < 4; i++) { /* the same values, most significant byte first */
        uint32_t u;
        memcpy(&u, &le[i], 4);
        for (int k = 0; k < 4; k++) be[i * 4 + k] = (uint8_t)(u >> (24 - 8 * k));
    }
    buf a = npy_numpy("<f4", s1, 1, le, sizeof le);
    buf b = npy_numpy(">f4", s1, 1, be, sizeof be);
    zmember m[2] = {{"le.npy", a.p, a.n, 0, 0, 0}, {"be.npy", b.p, b.n, 0, 0, 0}};
    uint64_t loc[2];
    buf z = zip_build(m, 2, loc);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(&f, &z, FMT_NPZ, 0, NULL, NULL, &e));
    if (f) {
        const void *p;
        size_t len;
        CHECK_OK(tbx_tensor_map(f, 0, &p, &len, &e)); /* the little-endian member: raw */
        CHECK(p == z.p + loc[0] + 30 + 6 + (a.n - sizeof le));
        CHECK_EQ(tbx_tensor_map(f, 1, &p, &len, &e), TBX_E_UNSUPPORTED); /* never raw */
        float got[4];
        CHECK_OK(tbx_tensor_read(f, 1, got, sizeof got, NULL, &e));
        CHECK(memcmp(got, le, sizeof le) == 0);
        CHECK_OK(tbx_tensor_read_range(f, 1, 5, got, 6, &e)); /* bytes 5..10 of the values */
        CHECK(memcmp(got, (const uint8_t *)le + 5, 6) == 0);
        tbx_close(f);
    }
    free(a.p); free(b.p); free(z.p);
}

/* npz's deflate levels (1..9; 0 stores) are checked at the writer's open, before any input. */
TBX_TEST(npz_level_refused_at_open) {
    char p[512];
    tbx_test_tmppath(p, sizeof p, "tbx_npy_lvl_%d.npz", (int)getpid());
    tbx_write_options o;
    tbx_write_options_init(&o);
    o.compress_level = 10;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_EQ(tbx_writer_open(&w, p, &o, &e), TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "compress_level");
    CHECK(w == NULL);
    CHECK(access(p, F_OK) != 0);
    o.compress_level = 9;
    CHECK_OK(tbx_writer_open(&w, p, &o, &e));
    tbx_writer_abort(w);
}

/* ---- the malformed-file table -------------------------------------------------------------- */
typedef struct mcase {
    const char *name;
    buf b;
    tbx_format fmt;
    tbx_status code;
    const char *field;
    uint64_t offset;
    tbx_limits lim;
    bool has_lim;
} mcase;

static mcase mk(const char *name, buf b, tbx_format fmt, tbx_status code, const char *field,
                uint64_t offset) {
    mcase c = {name, b, fmt, code, field, offset, {0}, false};
    return c;
}

static buf hdr(const char *text) { return npy_raw(1, text, "\0\0\0\0\0\0\0\0", 8); }

/* offset of the first occurrence of `needle` in b (the byte the case is about) */
static uint64_t at(const buf *b, const char *needle) {
    size_t nl = strlen(needle);
    for (size_t i = 0; i + nl <= b->n; i++)
        if (memcmp(b->p + i, needle, nl) == 0) return i;
    return (uint64_t)-1;
}

#define OK_TAIL "'fortran_order': False, 'shape': (2,), }"
TBX_TEST(malformed_table) {
    mcase cs[64];
    size_t n = 0;
    buf b;
    b = hdr("{'descr': '<f4', " OK_TAIL); b.p[0] = 'X';
    cs[n++] = mk("bad magic", b, FMT_NPY, TBX_E_BAD_MAGIC, "magic", 0);
    b = hdr("{'descr': '<f4', " OK_TAIL); b.p[6] = 4;
    cs[n++] = mk("version 4", b, FMT_NPY, TBX_E_BAD_VERSION, "version", 6);
    b = hdr("{'descr': '<f4', " OK_TAIL); b.p[7] = 1;
    cs[n++] = mk("version 1.1", b, FMT_NPY, TBX_E_BAD_VERSION, "version", 6);
    b = hdr("{'descr': '<f4', " OK_TAIL); b.p[9] = 0x7f;
    cs[n++] = mk("header_len past the end", b, 0, TBX_E_TRUNCATED, "header_len", 8);
    b = hdr("['descr', " OK_TAIL);
    cs[n++] = mk("not a dict", b, 0, TBX_E_FORMAT, "header", 10);
    b = hdr("{'descr': '<f4', 'dtype': 1, " OK_TAIL);
    cs[n++] = mk("unknown key", b, 0, TBX_E_FORMAT, "header", at(&b, "'dtype'"));
    b = hdr("{'descr': '<f4', 'descr': '<f4', " OK_TAIL);
    cs[n++] = mk("duplicate key", b, 0, TBX_E_DUPLICATE, "header", 27);
    b = hdr("{'descr': '<f4', 'fortran_order': False, }");
    cs[n++] = mk("no shape", b, 0, TBX_E_FORMAT, "header", at(&b, "}"));
    b = hdr("{'descr': '|O', " OK_TAIL);
    cs[n++] = mk("object array", b, 0, TBX_E_UNSUPPORTED, "header.descr", at(&b, "'|O'"));
    b = hdr("{'descr': [('a', '<f4')], " OK_TAIL);
    cs[n++] = mk("structured", b, 0, TBX_E_UNSUPPORTED, "header.descr", at(&b, "["));
    b = hdr("{'descr': '<f16', " OK_TAIL);
    cs[n++] = mk("long double", b, 0, TBX_E_UNSUPPORTED, "header.descr", at(&b, "'<f16'"));
    b = hdr("{'descr': '<U3', " OK_TAIL);
    cs[n++] = mk("unicode", b, 0, TBX_E_UNSUPPORTED, "header.descr", at(&b, "'<U3'"));
    b = hdr("{'descr': '<x4', " OK_TAIL);
    cs[n++] = mk("unknown kind", b, 0, TBX_E_FORMAT, "header.descr", at(&b, "'<x4'"));
    b = hdr("{'descr': '<f\\x34', " OK_TAIL);
    cs[n++] = mk("escape", b, 0, TBX_E_FORMAT, "header.descr", at(&b, "\\"));
    b = hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }");
    cs[n++] = mk("shape (2)", b, 0, TBX_E_FORMAT, "header.shape", at(&b, "(2)"));
    b = hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }");
    cs[n++] = mk("negative", b, 0, TBX_E_FORMAT, "header.shape", at(&b, "-"));
    b = hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (02,), }");
    cs[n++] = mk("leading zero", b, 0, TBX_E_FORMAT, "header.shape", at(&b, "02"));
    b = hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }");
    cs[n++] = mk("dimension overflow", b, 0, TBX_E_OVERFLOW, "header.shape", at(&b, "999"));
    b = hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }");
    cs[n++] = mk("count overflow", b, 0, TBX_E_OVERFLOW, "header.shape", 10);
    b = hdr("{'descr': '<f4', 'fortran_order': 1, 'shape': (2,), }");
    cs[n++] = mk("fortran_order 1", b, 0, TBX_E_FORMAT, "header.fortran_order", at(&b, "1,"));
    b = hdr("{'descr': '<f4', " OK_TAIL " # comment");
    cs[n++] = mk("comment", b, 0, TBX_E_FORMAT, "header", at(&b, "#"));
    b = npy_raw(1, "{'descr': '<f4', " OK_TAIL, "\0\0\0\0\0", 5);
    cs[n++] = mk("data cut", b, 0, TBX_E_TRUNCATED, "data", 10 + strlen("{'descr': '<f4', " OK_TAIL));
    b = npy_raw(1, "{'descr': '<f4', " OK_TAIL, "\0\0\0\0\0\0\0\0\0", 9);
    cs[n++] = mk("trailing byte", b, 0, TBX_E_FORMAT, "data", 10 + strlen("{'descr': '<f4', " OK_TAIL) + 8);
    b = hdr("{'descr': '<f4', " OK_TAIL);
    cs[n] = mk("header over the limit", b, 0, TBX_E_LIMIT, "header_len", 8);
    cs[n].has_lim = true; cs[n].lim.max_header_bytes = 16; n++;
    b = hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2), }");
    cs[n] = mk("too many dimensions", b, 0, TBX_E_LIMIT, "header.shape", at(&b, "2)"));
    cs[n].has_lim = true; cs[n].lim.max_ndim = 2; n++;
    b = hdr("{'descr': '<f4', " OK_TAIL);
    cs[n] = mk("data over the limit", b, 0, TBX_E_LIMIT, "header.shape", 10);
    cs[n].has_lim = true; cs[n].lim.max_tensor_bytes = 4; n++;

    /* .npz */
    const uint64_t s2[1] = {2};
    const float d2[2] = {1, 2};
    buf a = npy_numpy("<f4", s2, 1, d2, sizeof d2);
    uint64_t loc[3];
    {   /* member b's local header and array lie inside member a's data: overlapping members */
        zmember inner = {"b.npy", a.p, a.n, 0, 0, 0};
        buf ib = zip_build(&inner, 1, NULL);
        size_t lb = 30 + 5 + a.n; /* b's local header + data */
        uint64_t sh[1] = {lb};
        buf outer = npy_numpy("|u1", sh, 1, ib.p, lb);
        zmember two[2] = {{"a.npy", outer.p, outer.n, 0, 0, 0}, {"b.npy", a.p, a.n, 0, 0, 0}};
        buf z = zip_build(two, 2, loc);
        /* point b's directory entry at the copy inside a's data and drop the real one */
        uint64_t inside = loc[0] + 30 + 5 + (outer.n - lb);
        uint64_t cd = tbx_ld32(z.p + z.n - 6);
        uint64_t second = cd + 46 + 5; /* b's central entry */
        tbx_st32(z.p + second + 42, (uint32_t)inside);
        cs[n++] = mk("overlapping members", z, 0, TBX_E_RANGE, "member", inside);
        free(ib.p); free(outer.p);
    }
    {
        zmember one = {"c.npy", a.p, a.n, 12, 0, 0};
        buf z = zip_build(&one, 1, loc);
        cs[n++] = mk("bzip2 member", z, 0, TBX_E_UNSUPPORTED, "member.compression", loc[0] + 8);
    }
    {
        zmember one = {"c.npy", a.p, a.n, 0, 1, 0};
        buf z = zip_build(&one, 1, loc);
        cs[n++] = mk("encrypted member", z, 0, TBX_E_UNSUPPORTED, "member.flags", loc[0] + 6);
    }
    {
        uint8_t txt[16] = "hello, world...";
        zmember one = {"readme.txt", txt, sizeof txt, 0, 0, 0};
        buf z = zip_build(&one, 1, loc);
        cs[n++] = mk("not an npy member", z, 0, TBX_E_UNSUPPORTED, "magic", loc[0] + 30 + 10);
    }
    {
        zmember one = {"c.npy", a.p, a.n - 4, 0, 0, 0};
        buf z = zip_build(&one, 1, loc);
        cs[n++] = mk("member shorter than its array", z, 0, TBX_E_FORMAT, "member.size", loc[0] + 22);
    }
    {
        zmember three[3] = {{"a.npy", a.p, a.n, 0, 0, 0}, {"b.npy", a.p, a.n, 0, 0, 0},
                            {"c.npy", a.p, a.n, 0, 0, 0}};
        buf z = zip_build(three, 3, NULL);
        cs[n] = mk("more members than max_tensors", z, 0, TBX_E_LIMIT, "zip.entries", z.n - 22 + 10);
        cs[n].has_lim = true; cs[n].lim.max_tensors = 2; n++;
    }
    {
        buf z = {0};
        put(&z, "PK\3\4\0\0\0\0\0\0", 10);
        for (int i = 0; i < 40; i++) put(&z, "x", 1);
        /* libzip reads the whole file (< 64 KiB) once to find the end record: byte 0 */
        cs[n++] = mk("no end record", z, 0, TBX_E_FORMAT, "zip", 0);
    }

    for (size_t i = 0; i < n; i++) {
        tbx_limits lim;
        tbx_limits_default(&lim);
        if (cs[i].has_lim) {
            if (cs[i].lim.max_header_bytes) lim.max_header_bytes = cs[i].lim.max_header_bytes;
            if (cs[i].lim.max_ndim) lim.max_ndim = cs[i].lim.max_ndim;
            if (cs[i].lim.max_tensor_bytes) lim.max_tensor_bytes = cs[i].lim.max_tensor_bytes;
            if (cs[i].lim.max_tensors) lim.max_tensors = cs[i].lim.max_tensors;
        }
        tbx_file *f = NULL;
        tbx_error e;
        memset(&e, 0, sizeof e);
        tbx_status st = open_mem(&f, &cs[i].b, cs[i].fmt, 0, &lim, NULL, &e);
        int good = st == cs[i].code && strcmp(e.field, cs[i].field) == 0 && e.offset == cs[i].offset;
        if (!good)
            fprintf(stderr, "case %s: got %s field %s offset %llu (%s); want %s %s %llu\n",
                    cs[i].name, tbx_status_name(st), e.field, (unsigned long long)e.offset,
                    e.message, tbx_status_name(cs[i].code), cs[i].field,
                    (unsigned long long)cs[i].offset);
        CHECK(good);
        tbx_close(f);
        free(cs[i].b.p);
    }
    free(a.p);
}

/* ---- truncation at every offset ------------------------------------------------------------ */
TBX_TEST(truncation_at_every_offset) {
    const uint64_t sh[2] = {2, 3};
    uint8_t d[24];
    for (int i = 0; i < 24; i++) d[i] = (uint8_t)i;
    buf a = npy_numpy(">f4", sh, 2, d, sizeof d);
    for (size_t cut = 0; cut < a.n; cut++) {
        buf c = {a.p, cut, cut};
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(&f, &c, FMT_NPY, 0, NULL, NULL, &e);
        CHECK_EQ(st, cut < 6 ? TBX_E_TRUNCATED : TBX_E_TRUNCATED);
        tbx_close(f);
    }
    zmember two[2] = {{"x.npy", a.p, a.n, 0, 0, 0}, {"y.npy", a.p, a.n, 0, 0, 0}};
    buf z = zip_build(two, 2, NULL);
    for (size_t cut = 0; cut < z.n; cut++) {
        buf c = {z.p, cut, cut};
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(&f, &c, FMT_NPZ, 0, NULL, NULL, &e);
        CHECK(st != TBX_OK);
        CHECK(e.message[0] != '\0');
        tbx_close(f);
    }
    free(a.p);
    free(z.p);
}

/* ---- writers ------------------------------------------------------------------------------- */
static tbx_status write_file(const char *path, int level, unsigned version, size_t nt,
                             const tbx_allocator *al, tbx_error *e) {
    tbx_write_options o;
    tbx_write_options_init(&o);
    o.flags = TBX_WRITE_OVERWRITE;
    o.compress_level = level;
    o.version = version;
    o.allocator = al;
    tbx_writer *w = NULL;
    tbx_status st = tbx_writer_open(&w, path, &o, e);
    if (st != TBX_OK) return st;
    for (size_t i = 0; i < nt && st == TBX_OK; i++) {
        size_t d = i % (sizeof DT / sizeof DT[0]);
        const uint64_t shape[3] = {2, 3, i};
        tbx_tensor_desc td = TBX_TENSOR_DESC_INIT;
        char name[16];
        snprintf(name, sizeof name, "t%zu", i);
        td.name = name;
        td.dtype = DT[d].dt;
        td.ndim = (uint32_t)(i % 3 == 0 ? 0 : i % 3 == 1 ? 2 : 3);
        td.shape = shape;
        td.has_data = 1;
        st = tbx_writer_add_tensor(w, &td, NULL, e);
    }
    for (size_t i = 0; i < nt && st == TBX_OK; i++) {
        size_t d = i % (sizeof DT / sizeof DT[0]);
        uint64_t ne = i % 3 == 0 ? 1 : i % 3 == 1 ? 6 : 6 * i;
        uint8_t data[16 * 6 * 64];
        for (size_t k = 0; k < ne * DT[d].size; k++) data[k] = (uint8_t)(k + i);
        st = tbx_writer_write_tensor(w, i, data, (size_t)(ne * DT[d].size), e);
    }
    if (st != TBX_OK) { tbx_writer_abort(w); return st; }
    return tbx_writer_finish(w, e);
}

static void check_written(const char *path, size_t nt) {
    tbx_file *f = NULL;
    tbx_error e;
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.flags = TBX_OPEN_VERIFY_DIGESTS;
    CHECK_OK(tbx_open_path(&f, path, &o, &e));
    if (!f) return;
    CHECK_EQ(tbx_tensor_count(f), nt);
    for (size_t i = 0; i < tbx_tensor_count(f); i++) {
        size_t d = i % (sizeof DT / sizeof DT[0]);
        uint64_t ne = i % 3 == 0 ? 1 : i % 3 == 1 ? 6 : 6 * i;
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, i, &ti));
        CHECK_EQ(ti.dtype, DT[d].dt);
        CHECK_EQ(ti.nelems, ne);
        uint8_t got[16 * 6 * 64];
        size_t need = 0;
        CHECK_OK(tbx_tensor_read(f, i, got, sizeof got, &need, &e));
        CHECK_EQ(need, ne * DT[d].size);
        for (size_t k = 0; k < need; k++)
            if (got[k] != (uint8_t)(k + i)) { CHECK(!"tensor bytes differ"); break; }
    }
    tbx_close(f);
}

TBX_TEST(writers_round_trip) {
    char p1[512], p2[512], p3[512];
    tbx_test_tmppath(p1, sizeof p1, "tbx_npy_rt_%d.npy", (int)getpid());
    tbx_test_tmppath(p2, sizeof p2, "tbx_npy_rt_%d.npz", (int)getpid());
    tbx_test_tmppath(p3, sizeof p3, "tbx_npy_rt_%d_z.npz", (int)getpid());
    tbx_error e;
    for (unsigned v = 1; v <= 3; v++) {
        CHECK_OK(write_file(p1, 0, v, 2 - 1, NULL, &e));
        check_written(p1, 1);
        size_t n;
        uint8_t *b = tbx_test_slurp(p1, &n);
        CHECK(b && b[6] == v && b[7] == 0);
        CHECK(b && (v == 1 ? 10u + tbx_ld16(b + 8) : 12u + tbx_ld32(b + 8)) % 64 == 0);
        free(b);
    }
    CHECK_OK(write_file(p2, 0, 0, 14, NULL, &e));
    check_written(p2, 14);
    CHECK_OK(write_file(p3, 6, 0, 14, NULL, &e));
    check_written(p3, 14);
    /* deterministic: the same calls, the same bytes */
    size_t n1, n2;
    uint8_t *b1 = tbx_test_slurp(p3, &n1);
    CHECK_OK(write_file(p3, 6, 0, 14, NULL, &e));
    uint8_t *b2 = tbx_test_slurp(p3, &n2);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1); free(b2);
    /* refusals */
    CHECK_EQ(write_file(p1, 0, 0, 2, NULL, &e), TBX_E_UNSUPPORTED);
    CHECK_STR(e.field, "tensors");
    CHECK_EQ(write_file(p2, 12, 0, 1, NULL, &e), TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "compress_level");
    CHECK_EQ(write_file(p1, 3, 0, 1, NULL, &e), TBX_E_UNSUPPORTED); /* npy does not compress */
    unlink(p1); unlink(p2); unlink(p3);
}

TBX_TEST(writer_refusals) {
    char p[512];
    tbx_test_tmppath(p, sizeof p, "tbx_npy_ref_%d.npz", (int)getpid());
    tbx_write_options o;
    tbx_write_options_init(&o);
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, p, &o, &e));
    if (!w) return;
    tbx_value *v = tbx_value_new_string("x", 1);
    CHECK_EQ(tbx_writer_add_meta(w, "k", 1, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    const uint64_t shape[1] = {4};
    tbx_tensor_desc td = TBX_TENSOR_DESC_INIT;
    td.name = "b"; td.dtype = TBX_DT_BF16; td.ndim = 1; td.shape = shape; td.has_data = 1;
    CHECK_EQ(tbx_writer_add_tensor(w, &td, NULL, &e), TBX_E_UNSUPPORTED);
    CHECK_STR(e.field, "tensor.dtype");
    td.dtype = TBX_DT_U8; td.name = "first";
    CHECK_OK(tbx_writer_add_tensor(w, &td, NULL, &e));
    td.name = "second";
    CHECK_OK(tbx_writer_add_tensor(w, &td, NULL, &e));
    const uint8_t four[4] = {1, 2, 3, 4};
    CHECK_EQ(tbx_writer_write_tensor(w, 1, four, 4, &e), TBX_E_STATE); /* out of order */
    CHECK_OK(tbx_writer_write_tensor(w, 0, four, 4, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 1, four, 4, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    unlink(p);
}

/* ---- every allocation failure ------------------------------------------------------------- */
TBX_TEST(every_allocation_failure) {
    const uint64_t sh[2] = {3, 2};
    uint8_t d[48];
    for (int i = 0; i < 48; i++) d[i] = (uint8_t)(i * 3);
    buf a = npy_raw(1, "{'descr': '>f8', 'fortran_order': True, 'shape': (3, 2), }", d, sizeof d);
    buf c = npy_numpy("<i2", sh, 2, d, 12);
    zmember two[2] = {{"a.npy", a.p, a.n, 0, 0, 0}, {"c.npy", c.p, c.n, 0, 0, 0}};
    buf z = zip_build(two, 2, NULL);
    const buf *files[3] = {&a, &c, &z};
    char out[512];
    tbx_test_tmppath(out, sizeof out, "tbx_npy_fa_%d.npz", (int)getpid());
    for (int k = 0; k < 3; k++) {
        long points = 0;
        for (long fail = 1;; fail++) {
            tbx_fail_al fa = {1, 0, fail, 0};
            tbx_allocator al = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &fa};
            tbx_file *f = NULL;
            tbx_error e;
            memset(&e, 0, sizeof e);
            tbx_status st = open_mem(&f, files[k], 0, TBX_OPEN_VERIFY_DIGESTS, NULL, &al, &e);
            for (uint64_t i = 0; st == TBX_OK && i < tbx_tensor_count(f); i++) {
                uint8_t got[64];
                st = tbx_tensor_read(f, i, got, sizeof got, NULL, &e);
                if (st == TBX_OK) st = tbx_tensor_read_range(f, i, 3, got, 5, &e);
            }
            if (st == TBX_OK) {
                tbx_convert_options co;
                tbx_convert_options_init(&co);
                co.write.flags = TBX_WRITE_OVERWRITE;
                co.write.allocator = &al;
                st = tbx_convert(f, out, &co, &e);
            }
            tbx_close(f);
            if (st != TBX_OK) {
                CHECK(e.message[0] != '\0');
                CHECK(st == TBX_E_NOMEM);
            }
            CHECK_EQ(fa.live, 0);
            if (fa.calls < fail) break; /* the run completed without reaching `fail` */
            points++;
        }
        CHECK(points > 5);
    }
    unlink(out);
    free(a.p); free(c.p); free(z.p);
}

TBX_TEST_MAIN()
