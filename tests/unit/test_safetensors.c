/*
 * test_safetensors.c - unit tests of the safetensors driver (src/formats/safetensors/safetensors.c).
 *
 * - every safetensors dtype name maps to its tbx dtype and size;
 * - files the reference accepts open (padding, unknown entry fields, zero-size tensors, ...);
 * - a table of malformed headers, each rejected with the expected status, field and message;
 * - every truncation of a valid sample fails with TBX_E_TRUNCATED, every one-byte mutation of
 *   it opens or fails cleanly (run under ASan/UBSan too);
 * - limits; round trip through the public writer (chunked writes); writer rejections;
 * - byte identity with the PyPI `safetensors` 0.8.0 serializer on fixed inputs (the expected
 *   files below were produced by safetensors.serialize() from that package).
 */
#define _POSIX_C_SOURCE 200809L
#include "tbx_test.h"
#include "tbx_test_dir.h"

#include "tensorbox.h"

#include <jansson.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */
/* ------------------------------------------------------------------------------------------ */
typedef struct buf {
    uint8_t *p;
    size_t n;
} buf;

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* u64 `declared` + the json bytes + `dlen` data bytes (byte i = i & 0xff). */
static buf mk_raw(uint64_t declared, const char *json, size_t jlen, size_t dlen) {
    buf b;
    b.n = 8 + jlen + dlen;
    b.p = malloc(b.n ? b.n : 1);
    if (!b.p) { fprintf(stderr, "out of memory\n"); exit(2); }
    put_le64(b.p, declared);
    if (jlen) memcpy(b.p + 8, json, jlen);
    for (size_t i = 0; i < dlen; i++) b.p[8 + jlen + i] = (uint8_t)i;
    return b;
}
static buf mk(const char *json, size_t dlen) {
    return mk_raw(strlen(json), json, strlen(json), dlen);
}

static tbx_status open_mem(const uint8_t *p, size_t n, const tbx_limits *lim, tbx_file **out,
                           tbx_error *err) {
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    opt.format = TBX_FORMAT_SAFETENSORS;
    opt.limits = lim;
    memset(err, 0, sizeof *err);
    *out = NULL;
    return tbx_open_memory(out, p, n, &opt, err);
}

/* Opens b, expects failure with `code`, `field` (NULL: any non-empty) and a message containing
 * `needle` (NULL: any non-empty). Returns whether everything matched. */
static bool expect_fail(const char *what, const buf *b, const tbx_limits *lim, tbx_status code,
                        const char *field, const char *needle) {
    tbx_file *f = NULL;
    tbx_error e;
    tbx_status st = open_mem(b->p, b->n, lim, &f, &e);
    bool ok = st == code && f == NULL && e.code == code && e.message[0] != 0 &&
              (field ? strcmp(e.field, field) == 0 : e.field[0] != 0) &&
              (!needle || strstr(e.message, needle) != NULL);
    if (!ok)
        fprintf(stderr, "case \"%s\": got %s (field \"%s\": %s), expected %s field \"%s\" "
                "containing \"%s\"\n", what, tbx_status_name(st), e.field, e.message,
                tbx_status_name(code), field ? field : "*", needle ? needle : "*");
    tbx_close(f);
    return ok;
}

static size_t unhex(const char *hex, uint8_t *out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; hex[i] && hex[i + 1] && n < cap; i += 2) {
        unsigned v;
        char t[3] = {hex[i], hex[i + 1], 0};
        sscanf(t, "%2x", &v);
        out[n++] = (uint8_t)v;
    }
    return n;
}

static void tmp_path(char *dst, size_t cap, const char *name) {
    tbx_test_dir_file(dst, cap, "tbx-st-test", name);
}

/* The valid sample every malformed case is a variation of. */
#define SAMPLE_JSON                                                                          \
    "{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},"                                     \
    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"                        \
    "\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}  "
#define SAMPLE_DATA 12

/* One F32 [1] entry at [0, 4]. */
#define E1 "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"

/* ------------------------------------------------------------------------------------------ */
/* Reading valid files                                                                         */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(opens_valid_sample) {
    buf b = mk(SAMPLE_JSON, SAMPLE_DATA);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(b.p, b.n, NULL, &f, &e));
    CHECK(f != NULL);
    if (f) {
        uint64_t hdr_end = 8 + strlen(SAMPLE_JSON);
        CHECK_EQ(tbx_file_format(f), TBX_FORMAT_SAFETENSORS);
        CHECK_EQ(tbx_file_version(f), 0);
        CHECK_EQ(tbx_file_size(f), b.n);
        CHECK_EQ(tbx_meta_count(f), 2);
        size_t kl = 0, vl = 0;
        CHECK_STR(tbx_meta_key(f, 0, &kl), "format");
        CHECK_STR(tbx_meta_key(f, 1, &kl), "k");
        const tbx_value *v = tbx_meta_find(f, "k");
        CHECK(v && tbx_value_type_of(v) == TBX_V_STRING);
        CHECK_STR(tbx_value_get_str(v, &vl), "v");
        CHECK_EQ(tbx_section_count(f), 0);
        /* file order = ascending data offset: "a" (0..4) before "b" (4..12) */
        CHECK_EQ(tbx_tensor_count(f), 2);
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
        CHECK_STR(ti.name, "a");
        CHECK_EQ(ti.dtype, TBX_DT_F16);
        CHECK_EQ(ti.offset, hdr_end);
        CHECK_EQ(ti.nbytes, 4);
        CHECK_OK(tbx_tensor_info_get(f, 1, &ti));
        CHECK_STR(ti.name, "b");
        CHECK_EQ(ti.dtype, TBX_DT_F32);
        CHECK_EQ(ti.ndim, 1);
        CHECK_EQ(ti.shape[0], 2);
        CHECK_EQ(ti.nelems, 2);
        CHECK_EQ(ti.layout, TBX_LAYOUT_DENSE);
        CHECK_EQ(ti.ncomponents, 1);
        CHECK_EQ(ti.offset, hdr_end + 4);
        tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
        CHECK_OK(tbx_component_info_get(f, 1, 0, &ci));
        CHECK_STR(ci.name, "data");
        CHECK_EQ(ci.stored_bytes, 8);
        CHECK_EQ(ci.nbytes, 8);
        CHECK_EQ(ci.encoding, TBX_ENC_RAW);
        CHECK(ci.digest == NULL);
        uint64_t idx = 99;
        CHECK_OK(tbx_tensor_find(f, "b", &idx));
        CHECK_EQ(idx, 1);
        uint8_t out[8];
        size_t need = 0;
        CHECK_OK(tbx_tensor_read(f, 1, out, sizeof out, &need, &e));
        for (int i = 0; i < 8; i++) CHECK_EQ(out[i], 4 + i);
    }
    tbx_close(f);
    /* format detection picks safetensors from the bytes */
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    f = NULL;
    CHECK_OK(tbx_open_memory(&f, b.p, b.n, &opt, &e));
    CHECK(f && tbx_file_format(f) == TBX_FORMAT_SAFETENSORS);
    tbx_close(f);
    CHECK_EQ(tbx_detect_format(b.p, 64, b.n), TBX_FORMAT_SAFETENSORS);
    free(b.p);
}

TBX_TEST(every_dtype_name_maps) {
    static const struct { const char *name; tbx_dtype dt; unsigned bits; } tab[] = {
        {"BOOL", TBX_DT_BOOL, 8}, {"F4", TBX_DT_F4_E2M1, 4}, {"F6_E2M3", TBX_DT_F6_E2M3, 6},
        {"F6_E3M2", TBX_DT_F6_E3M2, 6}, {"U8", TBX_DT_U8, 8}, {"I8", TBX_DT_I8, 8},
        {"F8_E5M2", TBX_DT_F8_E5M2, 8}, {"F8_E4M3", TBX_DT_F8_E4M3, 8},
        {"F8_E8M0", TBX_DT_F8_E8M0, 8}, {"F8_E4M3FNUZ", TBX_DT_F8_E4M3FNUZ, 8},
        {"F8_E5M2FNUZ", TBX_DT_F8_E5M2FNUZ, 8}, {"I16", TBX_DT_I16, 16},
        {"U16", TBX_DT_U16, 16}, {"F16", TBX_DT_F16, 16}, {"BF16", TBX_DT_BF16, 16},
        {"I32", TBX_DT_I32, 32}, {"U32", TBX_DT_U32, 32}, {"F32", TBX_DT_F32, 32},
        {"C64", TBX_DT_C64, 64}, {"F64", TBX_DT_F64, 64}, {"I64", TBX_DT_I64, 64},
        {"U64", TBX_DT_U64, 64},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        unsigned nbytes = 8 * tab[i].bits / 8; /* shape [8] */
        char json[160];
        snprintf(json, sizeof json,
                 "{\"t\":{\"dtype\":\"%s\",\"shape\":[8],\"data_offsets\":[0,%u]}}",
                 tab[i].name, nbytes);
        buf b = mk(json, nbytes);
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(b.p, b.n, NULL, &f, &e);
        CHECK_OK(st);
        if (st != TBX_OK) fprintf(stderr, "dtype %s: %s\n", tab[i].name, e.message);
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (f && tbx_tensor_info_get(f, 0, &ti) == TBX_OK) {
            CHECK_EQ(ti.dtype, tab[i].dt);
            CHECK_EQ(ti.nbytes, nbytes);
        } else {
            CHECK(0);
        }
        /* the dtype table agrees on the element width */
        const tbx_dtype_info *di = tbx_dtype_get(tab[i].dt);
        CHECK(di && di->bits == tab[i].bits);
        tbx_close(f);
        free(b.p);
    }
}

/* Files the reference accepts, including the lenient corners tensorbox follows. */
TBX_TEST(accepts_reference_valid_variants) {
    static const struct {
        const char *what;
        const char *json;
        size_t dlen;
        uint64_t ntensors;
    } ok[] = {
        {"empty header", "{}", 0, 0},
        {"padded empty header", "{}      ", 0, 0},
        {"JSON whitespace padding", "{\"a\":" E1 "}\t\n\r ", 4, 1},
        {"whitespace inside", "{ \"a\" : { \"dtype\" : \"F32\" , \"shape\" : [ 1 ] , "
                              "\"data_offsets\" : [ 0 , 4 ] } }", 4, 1},
        {"unknown entry field ignored", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
                                        "\"data_offsets\":[0,4],\"extra\":{\"x\":[1]}}}", 4, 1},
        {"__metadata__ null", "{\"__metadata__\":null,\"a\":" E1 "}", 4, 1},
        {"__metadata__ empty", "{\"__metadata__\":{},\"a\":" E1 "}", 4, 1},
        {"metadata last", "{\"a\":" E1 ",\"__metadata__\":{\"x\":\"y\"}}", 4, 1},
        {"scalar", "{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}", 8, 1},
        {"zero-size tensors share offsets",
         "{\"z2\":{\"dtype\":\"U8\",\"shape\":[2,0],\"data_offsets\":[4,4]},"
         "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
         "\"z1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 4, 3},
        {"F4 whole bytes",
         "{\"a\":{\"dtype\":\"F4\",\"shape\":[2,2],\"data_offsets\":[0,2]}}", 2, 1},
        {"F6 whole bytes",
         "{\"a\":{\"dtype\":\"F6_E3M2\",\"shape\":[4],\"data_offsets\":[0,3]}}", 3, 1},
        {"non-ASCII name", "{\"\xe6\x97\xa5\\u00e9\":" E1 "}", 4, 1},
        {"escaped name", "{\"a\\\"b\\\\c\\n\\u0041\":" E1 "}", 4, 1},
        {"empty name", "{\"\":" E1 "}", 4, 1},
        {"metadata value with NUL", "{\"__metadata__\":{\"k\":\"x\\u0000y\"}}", 0, 0},
        {"minus zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-0],\"data_offsets\":[0,0]}}", 0, 1},
        {"dimension 2^63-1 with a zero",
         "{\"a\":{\"dtype\":\"U8\",\"shape\":[0,9223372036854775807],"
         "\"data_offsets\":[0,0]}}", 0, 1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        buf b = mk(ok[i].json, ok[i].dlen);
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(b.p, b.n, NULL, &f, &e);
        CHECK_OK(st);
        if (st != TBX_OK) fprintf(stderr, "case \"%s\": %s\n", ok[i].what, e.message);
        if (f) {
            CHECK_EQ(tbx_tensor_count(f), ok[i].ntensors);
            for (uint64_t t = 0; t < tbx_tensor_count(f); t++) {
                tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
                CHECK_OK(tbx_tensor_info_get(f, t, &ti));
                uint8_t tmp[16];
                size_t need = 0;
                CHECK_OK(tbx_tensor_read(f, t, tmp, sizeof tmp, &need, &e));
            }
        }
        tbx_close(f);
        free(b.p);
    }
}

TBX_TEST(file_order_and_details) {
    /* declared out of order; zero-size tensors sort by (begin, end, name) */
    buf b = mk("{\"z2\":{\"dtype\":\"U8\",\"shape\":[2,0],\"data_offsets\":[4,4]},"
               "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
               "\"z1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
               "\"z0\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 4);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(b.p, b.n, NULL, &f, &e));
    const char *want[] = {"z0", "z1", "s", "z2"};
    for (uint64_t i = 0; f && i < 4; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, i, &ti));
        CHECK_STR(ti.name, want[i]);
    }
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    if (f && tbx_tensor_info_get(f, 2, &ti) == TBX_OK) {
        CHECK_EQ(ti.ndim, 0);
        CHECK_EQ(ti.nelems, 1);
        CHECK_EQ(ti.nbytes, 4);
    }
    if (f && tbx_tensor_info_get(f, 3, &ti) == TBX_OK) {
        CHECK_EQ(ti.ndim, 2);
        CHECK_EQ(ti.nelems, 0);
        CHECK_EQ(ti.nbytes, 0);
    }
    tbx_close(f);
    free(b.p);

    /* metadata keeps NUL bytes and file order */
    b = mk("{\"__metadata__\":{\"zz\":\"x\\u0000y\",\"aa\":\"\xc3\xa9\"}}", 0);
    CHECK_OK(open_mem(b.p, b.n, NULL, &f, &e));
    if (f) {
        size_t kl = 0, vl = 0;
        CHECK_STR(tbx_meta_key(f, 0, &kl), "zz");
        const char *s = tbx_value_get_str(tbx_meta_value(f, 0), &vl);
        CHECK_EQ(vl, 3);
        CHECK(s && memcmp(s, "x\0y", 3) == 0);
        CHECK_STR(tbx_meta_key(f, 1, &kl), "aa");
        CHECK_STR(tbx_value_get_str(tbx_meta_value(f, 1), &vl), "\xc3\xa9");
    }
    tbx_close(f);
    free(b.p);
}

/* ------------------------------------------------------------------------------------------ */
/* Malformed files                                                                             */
/* ------------------------------------------------------------------------------------------ */
typedef struct bad_case {
    const char *what;
    const char *json;
    size_t jlen;       /* 0: strlen(json) */
    size_t dlen;
    tbx_status code;
    const char *field;
    const char *needle;
} bad_case;

#define F32E(off) "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":" off "}"

static const bad_case bad_cases[] = {
    /* JSON syntax and encoding */
    {"invalid JSON", "{\"a\":", 0, 0, TBX_E_FORMAT, "header.json", "invalid JSON"},
    {"unterminated string", "{\"a", 0, 0, TBX_E_FORMAT, "header.json", NULL},
    {"trailing comma", "{\"a\":" E1 ",}", 0, 4, TBX_E_FORMAT, "header.json", NULL},
    {"garbage after JSON", "{\"a\":" E1 "} x", 0, 4, TBX_E_FORMAT, "header.json", NULL},
    {"NUL after JSON", "{}\0\0\0\0\0\0", 8, 0, TBX_E_FORMAT, "header.json", NULL},
    {"NUL inside JSON", "{\"a\":\0}", 7, 0, TBX_E_FORMAT, "header.json", NULL},
    {"control char in string", "{\"__metadata__\":{\"k\":\"a\x01\"}}", 0, 0, TBX_E_FORMAT,
     "header.json", NULL},
    {"invalid UTF-8 in name", "{\"a\xff\":" E1 "}", 0, 4, TBX_E_FORMAT, "header", "UTF-8"},
    {"invalid UTF-8 in metadata", "{\"__metadata__\":{\"k\":\"\xc3\"}}", 0, 0, TBX_E_FORMAT,
     "header", "UTF-8"},
    {"overlong UTF-8", "{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}", 0, 0, TBX_E_FORMAT, "header",
     "UTF-8"},
    {"UTF-8 surrogate", "{\"__metadata__\":{\"k\":\"\xed\xa0\x80\"}}", 0, 0, TBX_E_FORMAT,
     "header", "UTF-8"},
    {"lone surrogate escape", "{\"a\\ud800\":" E1 "}", 0, 4, TBX_E_FORMAT, "header.json", NULL},
    {"top-level array", "[]", 0, 0, TBX_E_FORMAT, "header", "'{'"},
    {"top-level string", "\"{}\"", 0, 0, TBX_E_FORMAT, "header", "'{'"},
    {"leading space", " {}", 0, 0, TBX_E_FORMAT, "header", "'{'"},
    {"NUL in tensor name", "{\"a\\u0000b\":" E1 "}", 0, 4, TBX_E_UNSUPPORTED, "header.json",
     "NUL"},
    /* duplicates */
    {"duplicate tensor", "{\"a\":" E1 ",\"a\":" E1 "}", 0, 4, TBX_E_DUPLICATE, "header.json",
     "duplicate"},
    {"duplicate metadata key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, 0,
     TBX_E_DUPLICATE, "header.json", "duplicate"},
    {"duplicate entry field",
     "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
     TBX_E_DUPLICATE, "header.json", "duplicate"},
    {"duplicate __metadata__", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0,
     TBX_E_DUPLICATE, "header.json", "duplicate"},
    /* JSON errors anywhere come before any entry's problem (the header is walked member by
     * member, an entry's problem is held until the end of the object) */
    {"syntax error after a bad entry",
     "{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":[1,}", 0, 4,
     TBX_E_FORMAT, "header.json", "invalid JSON"},
    {"duplicate after a bad entry",
     "{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":" E1 ",\"b\":" E1 "}",
     0, 4, TBX_E_DUPLICATE, "header.json", "\"b\""},
    {"escaped duplicate", "{\"a\":" E1 ",\"\\u0061\":" E1 "}", 0, 4, TBX_E_DUPLICATE,
     "header.json", "duplicate"},
    {"bad entry then garbage", "{\"a\":{\"dtype\":\"F128\"}} x", 0, 0, TBX_E_FORMAT,
     "header.json", NULL},
    /* entry structure */
    {"entry is an array", "{\"a\":[1]}", 0, 0, TBX_E_FORMAT, "tensor", "\"a\""},
    {"entry is a string", "{\"a\":\"F32\"}", 0, 0, TBX_E_FORMAT, "tensor", "got string"},
    {"missing dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, TBX_E_FORMAT,
     "tensor.dtype", "missing field \"dtype\""},
    {"missing shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 0, 4, TBX_E_FORMAT,
     "tensor.shape", "missing field \"shape\""},
    {"missing data_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, 4, TBX_E_FORMAT,
     "tensor.data_offsets", "missing field \"data_offsets\""},
    {"dtype not a string", "{\"a\":{\"dtype\":1,\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
     TBX_E_FORMAT, "tensor.dtype", "must be a string, got integer"},
    {"unknown dtype", "{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
     TBX_E_FORMAT, "tensor.dtype", "unknown dtype \"F128\""},
    {"lower-case dtype", "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
     TBX_E_FORMAT, "tensor.dtype", "unknown dtype \"f32\""},
    {"shape not an array", "{\"a\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 0,
     4, TBX_E_FORMAT, "tensor.shape", "got string"},
    {"negative dimension", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 0,
     4, TBX_E_FORMAT, "tensor.shape", "shape[1] must be a non-negative integer, got -1"},
    {"real dimension", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 0, 4,
     TBX_E_FORMAT, "tensor.shape", "real"},
    {"exponent dimension", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", 0,
     4, TBX_E_FORMAT, "tensor.shape", "real"},
    {"null dimension", "{\"a\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}}", 0, 4,
     TBX_E_FORMAT, "tensor.shape", "got null"},
    {"string dimension", "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 0,
     4, TBX_E_FORMAT, "tensor.shape", "got \"1\""},
    {"dimension 2^63",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[0,9223372036854775808],\"data_offsets\":[0,0]}}", 0, 0,
     TBX_E_OVERFLOW, "header.json", "2^63"},
    {"dimension 2^64",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[0,0]}}", 0, 0,
     TBX_E_OVERFLOW, "header.json", NULL},
    {"huge real", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1e400],\"data_offsets\":[0,0]}}", 0, 0,
     TBX_E_OVERFLOW, "header.json", NULL},
    {"element count overflows",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, 0,
     TBX_E_OVERFLOW, "tensor.shape", "shape [4294967296, 4294967296] overflows"},
    {"overflowing prefix then zero",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}", 0,
     0, TBX_E_OVERFLOW, "tensor.shape", "overflows"},
    {"byte size overflows",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2305843009213693952],\"data_offsets\":[0,4]}}", 0, 4,
     TBX_E_OVERFLOW, "tensor.shape", "size in bits of dtype F32 shape [2305843009213693952]"},
    {"F4 odd count", "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}", 0, 1,
     TBX_E_FORMAT, "tensor.shape", "12 bits, not a whole number of bytes"},
    {"F6 partial byte", "{\"a\":{\"dtype\":\"F6_E2M3\",\"shape\":[3],\"data_offsets\":[0,2]}}", 0,
     2, TBX_E_FORMAT, "tensor.shape", "whole number"},
    {"data_offsets not an array",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"b\":0}}}", 0, 4,
     TBX_E_FORMAT, "tensor.data_offsets", "got object"},
    {"data_offsets one element", "{\"a\":" F32E("[4]") "}", 0, 4, TBX_E_FORMAT,
     "tensor.data_offsets", "array of 1 elements"},
    {"data_offsets three elements", "{\"a\":" F32E("[0,4,8]") "}", 0, 4, TBX_E_FORMAT,
     "tensor.data_offsets", "array of 3 elements"},
    {"negative offset", "{\"a\":" F32E("[-4,0]") "}", 0, 4, TBX_E_FORMAT, "tensor.data_offsets",
     "data_offsets[0] must be a non-negative integer, got -4"},
    {"real offset", "{\"a\":" F32E("[0,4.0]") "}", 0, 4, TBX_E_FORMAT, "tensor.data_offsets",
     "data_offsets[1]"},
    {"end before begin", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]},"
                         "\"b\":" E1 "}", 0, 4, TBX_E_RANGE, "tensor.data_offsets",
     "end before begin"},
    {"size mismatch", "{\"w1\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,40]}}", 0, 40,
     TBX_E_FORMAT, "tensor.data_offsets",
     "tensor \"w1\": data_offsets [0, 40] give 40 bytes, dtype F32 shape [3, 4] needs 48"},
    /* tiling */
    {"out of bounds", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 4,
     TBX_E_TRUNCATED, "tensor.data_offsets", "past the end of the file"},
    {"far out of bounds",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[140737488355328],"
     "\"data_offsets\":[0,140737488355328]}}", 0, 4, TBX_E_TRUNCATED, "tensor.data_offsets",
     "end at file byte 140737488355417"},
    {"tensor beyond max_tensor_bytes",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1152921504606846975],"
     "\"data_offsets\":[0,1152921504606846975]}}", 0, 4, TBX_E_LIMIT, "tensor.data_offsets",
     "max_tensor_bytes"},
    {"bit count overflows",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775807],"
     "\"data_offsets\":[0,9223372036854775807]}}", 0, 4, TBX_E_OVERFLOW, "tensor.shape",
     "size in bits"},
    {"overlap", "{\"a\":" E1 ",\"b\":" F32E("[2,6]") "}", 0, 8, TBX_E_RANGE,
     "tensor.data_offsets", "overlap tensor \"a\""},
    {"same range twice", "{\"a\":" E1 ",\"b\":" E1 "}", 0, 4, TBX_E_RANGE,
     "tensor.data_offsets", "overlap"},
    {"gap", "{\"a\":" E1 ",\"b\":" F32E("[8,12]") "}", 0, 12, TBX_E_RANGE, "tensor.data_offsets",
     "gap of 4 bytes after tensor \"a\""},
    {"first offset not 0", "{\"a\":" F32E("[4,8]") "}", 0, 8, TBX_E_RANGE, "tensor.data_offsets",
     "must begin at 0"},
    {"huge first offset", "{\"a\":" F32E("[9223372036854775800,9223372036854775804]") "}", 0, 4,
     TBX_E_RANGE, "tensor.data_offsets", NULL},
    {"trailing bytes", "{\"a\":" E1 "}", 0, 6, TBX_E_RANGE, "data", "2 trailing bytes"},
    {"data without tensors", "{}", 0, 4, TBX_E_RANGE, "data", "4 trailing bytes"},
    /* metadata */
    {"metadata value integer", "{\"__metadata__\":{\"k\":1}}", 0, 0, TBX_E_FORMAT,
     "header.__metadata__", "__metadata__ \"k\": value must be a string, got integer"},
    {"metadata value object", "{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0, 0, TBX_E_FORMAT,
     "header.__metadata__", "got object"},
    {"metadata value null", "{\"__metadata__\":{\"a\":\"b\",\"k\":null}}", 0, 0, TBX_E_FORMAT,
     "header.__metadata__", "\"k\""},
    {"metadata is an array", "{\"__metadata__\":[\"x\"]}", 0, 0, TBX_E_FORMAT,
     "header.__metadata__", "got array"},
    {"metadata is a string", "{\"__metadata__\":\"x\"}", 0, 0, TBX_E_FORMAT,
     "header.__metadata__", "got string"},
};

TBX_TEST(rejects_malformed_headers) {
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        size_t jl = c->jlen ? c->jlen : strlen(c->json);
        buf b = mk_raw(jl, c->json, jl, c->dlen);
        CHECK(expect_fail(c->what, &b, NULL, c->code, c->field, c->needle));
        free(b.p);
    }
}

TBX_TEST(error_offsets_point_into_the_header) {
    const char *json = "{\"w1\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,40]}}";
    buf b = mk(json, 40);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_EQ(open_mem(b.p, b.n, NULL, &f, &e), TBX_E_FORMAT);
    CHECK_EQ(e.offset, 8 + (uint64_t)(strstr(json, "[0,40]") - json));
    char at[48];
    snprintf(at, sizeof at, " at byte %llu", (unsigned long long)e.offset);
    CHECK(strstr(e.message, at) != NULL);
    free(b.p);

    json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2, -1],\"data_offsets\":[0,4]}}";
    b = mk(json, 4);
    CHECK_EQ(open_mem(b.p, b.n, NULL, &f, &e), TBX_E_FORMAT);
    CHECK_EQ(e.offset, 8 + (uint64_t)(strstr(json, "-1") - json));
    free(b.p);

    json = "{\"__metadata__\":{\"a\":\"b\",\"k\":7}}";
    b = mk(json, 0);
    CHECK_EQ(open_mem(b.p, b.n, NULL, &f, &e), TBX_E_FORMAT);
    CHECK_EQ(e.offset, 8 + (uint64_t)(strstr(json, "7") - json));
    free(b.p);

    json = "{\"a\":" E1 ",\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[9,10]}}";
    b = mk(json, 10);
    CHECK_EQ(open_mem(b.p, b.n, NULL, &f, &e), TBX_E_RANGE);
    CHECK_EQ(e.offset, 8 + (uint64_t)(strstr(json, "[9,10]") - json));
    free(b.p);

    json = "{\"a\":" E1 "}";
    b = mk(json, 7);
    CHECK_EQ(open_mem(b.p, b.n, NULL, &f, &e), TBX_E_RANGE);
    CHECK_EQ(e.offset, 8 + strlen(json) + 4); /* the first trailing byte */
    free(b.p);

    json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":1}";
    b = mk(json, 4);
    CHECK_EQ(open_mem(b.p, b.n, NULL, &f, &e), TBX_E_DUPLICATE);
    CHECK(e.offset >= 8 + (uint64_t)(strrchr(json, 'a') - json - 1));
    CHECK(e.offset <= 8 + strlen(json));
    free(b.p);
}

TBX_TEST(rejects_bad_header_length) {
    uint8_t tiny[5] = {2, 0, 0, 0, 0};
    buf b = {tiny, sizeof tiny};
    CHECK(expect_fail("file shorter than 8 bytes", &b, NULL, TBX_E_TRUNCATED, "header.length",
                      "too short"));
    b.n = 0;
    CHECK(expect_fail("empty file", &b, NULL, TBX_E_TRUNCATED, "header.length", NULL));

    b = mk_raw(0, "{}", 2, 0);
    CHECK(expect_fail("header length 0", &b, NULL, TBX_E_FORMAT, "header.length", "empty"));
    free(b.p);
    b = mk_raw(100000001ull, "{}", 2, 0);
    CHECK(expect_fail("header length > 100 MB", &b, NULL, TBX_E_LIMIT, "header.length",
                      "100000001 exceeds the safetensors maximum"));
    free(b.p);
    b = mk_raw(UINT64_MAX, "{}", 2, 0);
    CHECK(expect_fail("header length 2^64-1", &b, NULL, TBX_E_LIMIT, "header.length", NULL));
    free(b.p);
    b = mk_raw(100000000ull, "{}", 2, 0);
    CHECK(expect_fail("header length 100 MB, past the file", &b, NULL, TBX_E_TRUNCATED,
                      "header.length", "runs past the end of the file"));
    free(b.p);
    b = mk_raw(1000, "{}", 2, 0);
    CHECK(expect_fail("header length > file", &b, NULL, TBX_E_TRUNCATED, "header.length",
                      "1000 runs past"));
    free(b.p);
    b = mk_raw(3, "{}", 2, 0);
    CHECK(expect_fail("header length = file + 1", &b, NULL, TBX_E_TRUNCATED, "header.length",
                      NULL));
    free(b.p);
    b = mk_raw(1, "{}", 2, 0); /* "{" then "}" counted as data */
    CHECK(expect_fail("header cut inside the JSON", &b, NULL, TBX_E_FORMAT, "header.json", NULL));
    free(b.p);
}

TBX_TEST(rejects_deep_nesting) {
    size_t depth = 5000, n = 0;
    char *json = malloc(2 * depth + 16);
    n += (size_t)sprintf(json, "{\"a\":");
    for (size_t i = 0; i < depth; i++) json[n++] = '[';
    for (size_t i = 0; i < depth; i++) json[n++] = ']';
    json[n++] = '}';
    buf b = mk_raw(n, json, n, 0);
    CHECK(expect_fail("deep nesting", &b, NULL, TBX_E_LIMIT, "header.json", "max_depth"));
    tbx_limits lim;
    tbx_limits_default(&lim);
    lim.max_depth = 100000; /* jansson's own depth limit (2048) still applies */
    CHECK(expect_fail("deep nesting, high max_depth", &b, &lim, TBX_E_LIMIT, "header.json",
                      "nested too deeply"));
    free(b.p);
    free(json);
}

TBX_TEST(limits) {
    tbx_limits lim;
    buf b = mk(SAMPLE_JSON, SAMPLE_DATA);
    tbx_limits_default(&lim);
    lim.max_header_bytes = 16;
    CHECK(expect_fail("max_header_bytes", &b, &lim, TBX_E_LIMIT, "header.length",
                      "max_header_bytes"));
    tbx_limits_default(&lim);
    lim.max_tensors = 1;
    CHECK(expect_fail("max_tensors", &b, &lim, TBX_E_LIMIT, "header", "max_tensors"));
    tbx_limits_default(&lim);
    lim.max_tensors = 2; /* 3 members: __metadata__ does not count */
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(b.p, b.n, &lim, &f, &e));
    tbx_close(f);
    tbx_limits_default(&lim);
    lim.max_depth = 2; /* object > entry > shape array is depth 3 */
    CHECK(expect_fail("max_depth", &b, &lim, TBX_E_LIMIT, "header.json", "max_depth = 2"));
    lim.max_depth = 3;
    CHECK_OK(open_mem(b.p, b.n, &lim, &f, &e));
    tbx_close(f);
    tbx_limits_default(&lim);
    lim.max_metadata_entries = 1;
    CHECK(expect_fail("max_metadata_entries", &b, &lim, TBX_E_LIMIT, "header.__metadata__",
                      "max_metadata_entries"));
    tbx_limits_default(&lim);
    lim.max_tensor_bytes = 7;
    CHECK(expect_fail("max_tensor_bytes", &b, &lim, TBX_E_LIMIT, "tensor.data_offsets",
                      "max_tensor_bytes"));
    tbx_limits_default(&lim);
    lim.max_string_len = 1;
    CHECK(expect_fail("max_string_len", &b, &lim, TBX_E_LIMIT, "header.__metadata__",
                      "max_string_len"));
    free(b.p);

    b = mk("{\"abcd\":" E1 "}", 4);
    tbx_limits_default(&lim);
    lim.max_string_len = 3;
    CHECK(expect_fail("max_string_len name", &b, &lim, TBX_E_LIMIT, "tensor.name",
                      "max_string_len"));
    free(b.p);

    b = mk("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1],\"data_offsets\":[0,4]}}", 4);
    tbx_limits_default(&lim);
    lim.max_ndim = 2;
    CHECK(expect_fail("max_ndim", &b, &lim, TBX_E_LIMIT, "tensor.shape", "max_ndim"));
    lim.max_ndim = 3;
    CHECK_OK(open_mem(b.p, b.n, &lim, &f, &e));
    tbx_close(f);
    free(b.p);
}

/* Every proper prefix of a valid file is truncated. */
TBX_TEST(truncation_at_every_offset) {
    buf b = mk(SAMPLE_JSON, SAMPLE_DATA);
    size_t good = 0;
    for (size_t len = 0; len < b.n; len++) {
        uint8_t *copy = malloc(len ? len : 1); /* exact size: ASan sees any over-read */
        memcpy(copy, b.p, len);
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(copy, len, NULL, &f, &e);
        bool ok = st == TBX_E_TRUNCATED && f == NULL && e.message[0] && e.field[0] &&
                  e.offset != TBX_NO_OFFSET;
        if (!ok)
            fprintf(stderr, "prefix %zu: %s field \"%s\": %s\n", len, tbx_status_name(st),
                    e.field, e.message);
        good += ok;
        tbx_close(f);
        free(copy);
    }
    CHECK_EQ(good, b.n);
    free(b.p);
}

/* Every one-byte change of the valid sample either opens (and reads) or fails cleanly. */
TBX_TEST(single_byte_mutations_never_crash) {
    static const uint8_t repl[] = {0x00, 0xff, 0x80, '"', '{', '}', '[', ']', ',', ':', '0',
                                   '9', '-', ' ', '\\', 'e', '.', 0x7f, 0xc3};
    buf b = mk(SAMPLE_JSON, SAMPLE_DATA);
    size_t opened = 0, failed = 0, bad = 0;
    for (size_t pos = 0; pos < b.n; pos++) {
        for (size_t r = 0; r < sizeof repl; r++) {
            uint8_t *copy = malloc(b.n);
            memcpy(copy, b.p, b.n);
            if (copy[pos] == repl[r]) { free(copy); continue; }
            copy[pos] = repl[r];
            tbx_file *f = NULL;
            tbx_error e;
            tbx_status st = open_mem(copy, b.n, NULL, &f, &e);
            if (st == TBX_OK) {
                opened++;
                for (uint64_t t = 0; t < tbx_tensor_count(f); t++) {
                    uint8_t tmp[16];
                    size_t need = 0;
                    if (tbx_tensor_read(f, t, tmp, sizeof tmp, &need, &e) != TBX_OK) bad++;
                }
            } else {
                failed++;
                if (!e.message[0] || !e.field[0] || f != NULL) bad++;
            }
            tbx_close(f);
            free(copy);
        }
    }
    CHECK(opened > 0); /* data bytes and harmless changes */
    CHECK(failed > 0);
    CHECK_EQ(bad, 0);
    free(b.p);
}

/* ------------------------------------------------------------------------------------------ */
/* Writing                                                                                     */
/* ------------------------------------------------------------------------------------------ */
typedef struct wt {
    const char *name;
    size_t name_len; /* 0: strlen */
    tbx_dtype dtype;
    uint32_t ndim;
    uint64_t shape[4];
    size_t nbytes;
} wt;

/* Byte i of a tensor whose name has `nl` bytes (the fixtures below use the same pattern). */
static uint8_t pattern(size_t nl, size_t i) { return (uint8_t)((i * 31 + nl * 7 + 1) & 0xff); }

/* Writes the tensors (data from pattern(), in chunks of `chunk` bytes, in declaration order)
 * and the metadata pairs to `path`. */
static tbx_status write_file(const char *path, const wt *ts, size_t nt, const char *const *meta,
                             size_t nmeta, size_t chunk, tbx_error *e) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    wo.flags = TBX_WRITE_OVERWRITE;
    tbx_writer *w = NULL;
    tbx_status st = tbx_writer_open(&w, path, &wo, e);
    if (st != TBX_OK) return st;
    for (size_t i = 0; i < nmeta; i++) {
        tbx_value *v = tbx_value_new_string(meta[2 * i + 1], strlen(meta[2 * i + 1]));
        st = tbx_writer_add_meta(w, meta[2 * i], strlen(meta[2 * i]), v, e);
        tbx_value_free(v);
        if (st != TBX_OK) { tbx_writer_abort(w); return st; }
    }
    uint64_t idx[32];
    for (size_t i = 0; i < nt; i++) {
        tbx_tensor_desc d = {sizeof(tbx_tensor_desc), ts[i].name, ts[i].name_len, ts[i].dtype, ts[i].ndim, ts[i].shape, 1};
        st = tbx_writer_add_tensor(w, &d, &idx[i], e);
        if (st != TBX_OK) { tbx_writer_abort(w); return st; }
    }
    for (size_t i = 0; i < nt; i++) {
        size_t nl = ts[i].name_len ? ts[i].name_len : strlen(ts[i].name);
        uint8_t data[64];
        for (size_t k = 0; k < ts[i].nbytes; k++) data[k] = pattern(nl, k);
        for (size_t k = 0; k < ts[i].nbytes; k += chunk) {
            size_t len = ts[i].nbytes - k < chunk ? ts[i].nbytes - k : chunk;
            st = tbx_writer_write_tensor(w, idx[i], data + k, len, e);
            if (st != TBX_OK) { tbx_writer_abort(w); return st; }
        }
    }
    return tbx_writer_finish(w, e);
}

/* The mixed set of the fixtures. */
static const wt mixed[] = {
    {"weight", 0, TBX_DT_F32, 2, {2, 3}, 24},
    {"bias", 0, TBX_DT_F16, 1, {3}, 6},
    {"mask", 0, TBX_DT_BOOL, 1, {4}, 4},
    {"idx", 0, TBX_DT_I64, 1, {2}, 16},
    {"emb", 0, TBX_DT_BF16, 2, {2, 2}, 8},
    {"s", 0, TBX_DT_F32, 0, {0}, 4},
    {"z", 0, TBX_DT_U8, 1, {0}, 0},
    {"q8", 0, TBX_DT_F8_E4M3, 1, {5}, 5},
    {"fp4", 0, TBX_DT_F4_E2M1, 1, {8}, 4},
    {"c", 0, TBX_DT_C64, 1, {1}, 8},
    {"a\"b\\c\n\x01\xc3\xa9/\x7f", 0, TBX_DT_I8, 1, {3}, 3},
    {"u16", 0, TBX_DT_U16, 1, {1}, 2},
    {"i16", 0, TBX_DT_I16, 1, {1}, 2},
    {"\xe6\x97\xa5\xe6\x9c\xac", 0, TBX_DT_F64, 1, {1}, 8},
};
#define NMIXED (sizeof mixed / sizeof mixed[0])

/* safetensors.serialize(..., metadata={"format": "pt"}) of PyPI safetensors 0.8.0 for `mixed`
 * (fp4 passed as float4_e2m1fn_x2 of shape [4], which the package records as F4 [8]). */
static const char fixture_meta_hex[] =
    "58030000000000007b225f5f6d657461646174615f5f223a7b22666f726d6174223a227074227d2c22696478223a"
    "7b226474797065223a22493634222c227368617065223a5b325d2c22646174615f6f666673657473223a5b302c31"
    "365d7d2c22e697a5e69cac223a7b226474797065223a22463634222c227368617065223a5b315d2c22646174615f"
    "6f666673657473223a5b31362c32345d7d2c2263223a7b226474797065223a22433634222c227368617065223a5b"
    "315d2c22646174615f6f666673657473223a5b32342c33325d7d2c2273223a7b226474797065223a22463332222c"
    "227368617065223a5b5d2c22646174615f6f666673657473223a5b33322c33365d7d2c22776569676874223a7b22"
    "6474797065223a22463332222c227368617065223a5b322c335d2c22646174615f6f666673657473223a5b33362c"
    "36305d7d2c22656d62223a7b226474797065223a2242463136222c227368617065223a5b322c325d2c2264617461"
    "5f6f666673657473223a5b36302c36385d7d2c2262696173223a7b226474797065223a22463136222c2273686170"
    "65223a5b335d2c22646174615f6f666673657473223a5b36382c37345d7d2c22753136223a7b226474797065223a"
    "22553136222c227368617065223a5b315d2c22646174615f6f666673657473223a5b37342c37365d7d2c22693136"
    "223a7b226474797065223a22493136222c227368617065223a5b315d2c22646174615f6f666673657473223a5b37"
    "362c37385d7d2c227138223a7b226474797065223a2246385f45344d33222c227368617065223a5b355d2c226461"
    "74615f6f666673657473223a5b37382c38335d7d2c22615c22625c5c635c6e5c7530303031c3a92f7f223a7b2264"
    "74797065223a224938222c227368617065223a5b335d2c22646174615f6f666673657473223a5b38332c38365d7d"
    "2c227a223a7b226474797065223a225538222c227368617065223a5b305d2c22646174615f6f666673657473223a"
    "5b38362c38365d7d2c22667034223a7b226474797065223a224634222c227368617065223a5b385d2c2264617461"
    "5f6f666673657473223a5b38362c39305d7d2c226d61736b223a7b226474797065223a22424f4f4c222c22736861"
    "7065223a5b345d2c22646174615f6f666673657473223a5b39302c39345d7d7d202020201635547392b1d0ef0e2d"
    "4c6b8aa9c8e72b4a6988a7c6e5040827466584a3c2e1082746652b4a6988a7c6e504234261809fbeddfc1b3a5978"
    "97b6d5f41635547392b1d0ef1d3c5b7a99b8163516350f2e4d6c8b4e6d8c163554731d3c5b7a";

/* The same without metadata. */
static const char fixture_nometa_hex[] =
    "38030000000000007b22696478223a7b226474797065223a22493634222c227368617065223a5b325d2c22646174"
    "615f6f666673657473223a5b302c31365d7d2c22e697a5e69cac223a7b226474797065223a22463634222c227368"
    "617065223a5b315d2c22646174615f6f666673657473223a5b31362c32345d7d2c2263223a7b226474797065223a"
    "22433634222c227368617065223a5b315d2c22646174615f6f666673657473223a5b32342c33325d7d2c2273223a"
    "7b226474797065223a22463332222c227368617065223a5b5d2c22646174615f6f666673657473223a5b33322c33"
    "365d7d2c22776569676874223a7b226474797065223a22463332222c227368617065223a5b322c335d2c22646174"
    "615f6f666673657473223a5b33362c36305d7d2c22656d62223a7b226474797065223a2242463136222c22736861"
    "7065223a5b322c325d2c22646174615f6f666673657473223a5b36302c36385d7d2c2262696173223a7b22647479"
    "7065223a22463136222c227368617065223a5b335d2c22646174615f6f666673657473223a5b36382c37345d7d2c"
    "22753136223a7b226474797065223a22553136222c227368617065223a5b315d2c22646174615f6f666673657473"
    "223a5b37342c37365d7d2c22693136223a7b226474797065223a22493136222c227368617065223a5b315d2c2264"
    "6174615f6f666673657473223a5b37362c37385d7d2c227138223a7b226474797065223a2246385f45344d33222c"
    "227368617065223a5b355d2c22646174615f6f666673657473223a5b37382c38335d7d2c22615c22625c5c635c6e"
    "5c7530303031c3a92f7f223a7b226474797065223a224938222c227368617065223a5b335d2c22646174615f6f66"
    "6673657473223a5b38332c38365d7d2c227a223a7b226474797065223a225538222c227368617065223a5b305d2c"
    "22646174615f6f666673657473223a5b38362c38365d7d2c22667034223a7b226474797065223a224634222c2273"
    "68617065223a5b385d2c22646174615f6f666673657473223a5b38362c39305d7d2c226d61736b223a7b22647479"
    "7065223a22424f4f4c222c227368617065223a5b345d2c22646174615f6f666673657473223a5b39302c39345d7d"
    "7d2020201635547392b1d0ef0e2d4c6b8aa9c8e72b4a6988a7c6e5040827466584a3c2e1082746652b4a6988a7c6"
    "e504234261809fbeddfc1b3a597897b6d5f41635547392b1d0ef1d3c5b7a99b8163516350f2e4d6c8b4e6d8c1635"
    "54731d3c5b7a";

static void check_identical(const char *path, const char *hex) {
    size_t n = 0;
    uint8_t *got = tbx_test_slurp(path, &n);
    uint8_t *want = malloc(strlen(hex) / 2 + 1);
    size_t wn = unhex(hex, want, strlen(hex) / 2);
    CHECK(got != NULL);
    CHECK_EQ(n, wn);
    if (got && n == wn) {
        size_t first = n;
        for (size_t i = 0; i < n && first == n; i++)
            if (got[i] != want[i]) first = i;
        CHECK_EQ(first, n);
        if (first != n) fprintf(stderr, "%s differs from the reference at byte %zu\n", path, first);
    }
    free(got);
    free(want);
}

TBX_TEST(writer_matches_pypi_bytes) {
    char path[600];
    tbx_error e;
    static const char *const meta[] = {"format", "pt"};
    tmp_path(path, sizeof path, "mixed_meta.safetensors");
    CHECK_OK(write_file(path, mixed, NMIXED, meta, 1, 3, &e));
    check_identical(path, fixture_meta_hex);
    tmp_path(path, sizeof path, "mixed.safetensors");
    CHECK_OK(write_file(path, mixed, NMIXED, NULL, 0, 1000, &e));
    check_identical(path, fixture_nometa_hex);
    unlink(path);
    tmp_path(path, sizeof path, "mixed_meta.safetensors");
    unlink(path);

    /* the reference crate's own test vectors: no tensors, with and without metadata */
    static const char empty_hex[] = "08000000000000007b7d202020202020";
    static const char empty_meta_hex[] =
        "28000000000000007b225f5f6d657461646174615f5f223a7b226672616d65776f726b223a227074227d7d"
        "2020202020";
    static const char *const fw[] = {"framework", "pt"};
    tmp_path(path, sizeof path, "empty.safetensors");
    CHECK_OK(write_file(path, NULL, 0, NULL, 0, 1, &e));
    check_identical(path, empty_hex);
    CHECK_OK(write_file(path, NULL, 0, fw, 1, 1, &e));
    check_identical(path, empty_meta_hex);
    unlink(path);
}

TBX_TEST(writer_round_trip) {
    char path[600];
    tbx_error e;
    static const char *const meta[] = {"zeta", "last?", "alpha", "x\ny \"q\" \xc3\xa9", "nul", ""};
    tmp_path(path, sizeof path, "rt.safetensors");
    CHECK_OK(write_file(path, mixed, NMIXED, meta, 3, 5, &e));
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, &opt, &e));
    if (f) {
        CHECK_EQ(tbx_file_format(f), TBX_FORMAT_SAFETENSORS);
        /* metadata in insertion order */
        CHECK_EQ(tbx_meta_count(f), 3);
        size_t kl = 0, vl = 0;
        CHECK_STR(tbx_meta_key(f, 0, &kl), "zeta");
        CHECK_STR(tbx_meta_key(f, 1, &kl), "alpha");
        CHECK_STR(tbx_value_get_str(tbx_meta_find(f, "alpha"), &vl), "x\ny \"q\" \xc3\xa9");
        CHECK_STR(tbx_value_get_str(tbx_meta_find(f, "nul"), &vl), "");
        CHECK_EQ(tbx_tensor_count(f), NMIXED);
        /* file order: descending dtype rank, then name */
        static const char *const order[] = {"idx", "\xe6\x97\xa5\xe6\x9c\xac", "c", "s", "weight",
                                            "emb", "bias", "u16", "i16", "q8",
                                            "a\"b\\c\n\x01\xc3\xa9/\x7f", "z", "fp4", "mask"};
        uint64_t prev_end = 0;
        for (uint64_t i = 0; i < NMIXED; i++) {
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
            CHECK_OK(tbx_tensor_info_get(f, i, &ti));
            CHECK_STR(ti.name, order[i]);
            if (i) CHECK_EQ(ti.offset, prev_end);
            prev_end = ti.offset + ti.nbytes;
        }
        CHECK_EQ(prev_end, tbx_file_size(f));
        for (size_t i = 0; i < NMIXED; i++) {
            uint64_t idx = 0;
            CHECK_OK(tbx_tensor_find(f, mixed[i].name, &idx));
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
            CHECK_OK(tbx_tensor_info_get(f, idx, &ti));
            CHECK_EQ(ti.dtype, mixed[i].dtype);
            CHECK_EQ(ti.ndim, mixed[i].ndim);
            for (uint32_t d = 0; d < ti.ndim && d < 4; d++)
                CHECK_EQ(ti.shape[d], mixed[i].shape[d]);
            CHECK_EQ(ti.nbytes, mixed[i].nbytes);
            uint8_t got[64];
            size_t need = 0;
            CHECK_OK(tbx_tensor_read(f, idx, got, sizeof got, &need, &e));
            CHECK_EQ(need, mixed[i].nbytes);
            size_t nl = strlen(mixed[i].name), badb = 0;
            for (size_t k = 0; k < mixed[i].nbytes; k++) badb += got[k] != pattern(nl, k);
            CHECK_EQ(badb, 0);
        }
    }
    tbx_close(f);
    /* deterministic: a second write gives the same bytes */
    char path2[128];
    tmp_path(path2, sizeof path2, "rt2.safetensors");
    CHECK_OK(write_file(path2, mixed, NMIXED, meta, 3, 64, &e));
    size_t n1 = 0, n2 = 0;
    uint8_t *a = tbx_test_slurp(path, &n1), *b = tbx_test_slurp(path2, &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    /* the header is padded with spaces to a multiple of 8 */
    if (a && n1 >= 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = (n << 8) | a[i];
        CHECK_EQ(n % 8, 0);
        CHECK(n <= n1 - 8);
        CHECK_EQ(a[8], '{');
    }
    free(a);
    free(b);
    unlink(path);
    unlink(path2);
}

static tbx_status add_one(const char *path, const wt *t, const char *mkey, const tbx_value *mval,
                          bool section, tbx_error *e) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    wo.flags = TBX_WRITE_OVERWRITE;
    tbx_writer *w = NULL;
    tbx_status st = tbx_writer_open(&w, path, &wo, e);
    if (st != TBX_OK) return st;
    if (mkey) st = tbx_writer_add_meta(w, mkey, strlen(mkey), mval, e);
    if (st == TBX_OK && t) {
        tbx_tensor_desc d = {sizeof(tbx_tensor_desc), t->name, t->name_len, t->dtype, t->ndim, t->shape, t->nbytes != 0};
        st = tbx_writer_add_tensor(w, &d, NULL, e);
    }
    if (st == TBX_OK && section) st = tbx_writer_add_section(w, "vocab", 0, "abc", 3, e);
    tbx_writer_abort(w);
    return st;
}

TBX_TEST(writer_rejects) {
    char path[600];
    tbx_error e;
    tmp_path(path, sizeof path, "rej.safetensors");
    /* metadata: only strings */
    tbx_value *v = tbx_value_new_uint(TBX_V_U32, 7);
    CHECK_EQ(add_one(path, NULL, "n", v, false, &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "\"n\"") && strstr(e.message, "u32"));
    tbx_value_free(v);
    v = tbx_value_new_bytes("ab", 2);
    CHECK_EQ(add_one(path, NULL, "blob", v, false, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    v = tbx_value_new_string("\xff", 1);
    CHECK_EQ(add_one(path, NULL, "k", v, false, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "UTF-8") != NULL);
    tbx_value_free(v);
    v = tbx_value_new_string("ok", 2);
    CHECK_EQ(add_one(path, NULL, "k\xc0\xaf", v, false, &e), TBX_E_FORMAT);
    tbx_value_free(v);
    /* tensors */
    wt q = {"q", 0, TBX_DT_Q4_0, 1, {32}, 18};
    CHECK_EQ(add_one(path, &q, NULL, NULL, false, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "q4_0") != NULL);
    wt c128 = {"c", 0, TBX_DT_C128, 1, {1}, 16};
    CHECK_EQ(add_one(path, &c128, NULL, NULL, false, &e), TBX_E_UNSUPPORTED);
    wt nodata = {"nd", 0, TBX_DT_F32, 1, {1}, 0};
    CHECK_EQ(add_one(path, &nodata, NULL, NULL, false, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "without data") != NULL);
    wt f4odd = {"f4", 0, TBX_DT_F4_E2M1, 1, {3}, 2};
    CHECK_EQ(add_one(path, &f4odd, NULL, NULL, false, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "whole number of bytes") != NULL);
    wt f6 = {"f6", 0, TBX_DT_F6_E2M3, 1, {5}, 4};
    CHECK_EQ(add_one(path, &f6, NULL, NULL, false, &e), TBX_E_FORMAT);
    wt badname = {"a\xff", 0, TBX_DT_F32, 1, {1}, 4};
    CHECK_EQ(add_one(path, &badname, NULL, NULL, false, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "UTF-8") != NULL);
    wt reserved = {"__metadata__", 0, TBX_DT_F32, 1, {1}, 4};
    CHECK_EQ(add_one(path, &reserved, NULL, NULL, false, &e), TBX_E_FORMAT);
    wt bigdim = {"big", 0, TBX_DT_U8, 2, {0, (uint64_t)1 << 63}, 0};
    bigdim.nbytes = 1; /* has_data */
    CHECK_EQ(add_one(path, &bigdim, NULL, NULL, false, &e), TBX_E_UNSUPPORTED);
    /* sections */
    CHECK_EQ(add_one(path, NULL, NULL, NULL, true, &e), TBX_E_UNSUPPORTED);
    /* nothing was left behind */
    CHECK(access(path, F_OK) != 0);
}

TBX_TEST(writer_valid_edge_shapes) {
    /* F4/F6 with whole bytes, scalars and zero-size tensors round trip */
    static const wt ts[] = {
        {"f4", 0, TBX_DT_F4_E2M1, 2, {3, 2}, 3},
        {"f6", 0, TBX_DT_F6_E3M2, 1, {4}, 3},
        {"scalar", 0, TBX_DT_U64, 0, {0}, 8},
        {"empty", 0, TBX_DT_F32, 3, {2, 0, 5}, 0},
    };
    char path[600];
    tbx_error e;
    tmp_path(path, sizeof path, "edge.safetensors");
    CHECK_OK(write_file(path, ts, 4, NULL, 0, 2, &e));
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, &opt, &e));
    CHECK(f && tbx_tensor_count(f) == 4);
    for (size_t i = 0; f && i < 4; i++) {
        uint64_t idx = 0;
        CHECK_OK(tbx_tensor_find(f, ts[i].name, &idx));
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, idx, &ti));
        CHECK_EQ(ti.nbytes, ts[i].nbytes);
        CHECK_EQ(ti.dtype, ts[i].dtype);
    }
    tbx_close(f);
    unlink(path);
}

/* ------------------------------------------------------------------------------------------ */
/* Opening speed: entries in the plain form are read without a jansson tree each               */
/* ------------------------------------------------------------------------------------------ */
static size_t g_json_allocs;
static void *count_malloc(size_t n) { g_json_allocs++; return malloc(n); }
static void count_free(void *p) { free(p); }

/* A header of nt F32 [2] entries "t<i>" (each at [8i, 8i+8)); `odd` writes every entry in
 * forms outside the plain one (which go through jansson): an escape in the dtype or a key,
 * another key order with whitespace, an unknown field. */
static buf many_entries(size_t nt, int odd) {
    size_t cap = 64 + nt * 160;
    char *j = malloc(cap);
    if (!j) { fprintf(stderr, "out of memory\n"); exit(2); }
    size_t n = 0;
    n += (size_t)snprintf(j + n, cap - n, "{");
    for (size_t i = 0; i < nt; i++) {
        const char *fmt;
        switch (odd ? i % 4 : 4) {
        case 0: fmt = "%s\"t%zu\":{\"dtype\":\"F\\u00332\",\"shape\":[2],"
                      "\"data_offsets\":[%zu,%zu]}"; break;
        case 1: fmt = "%s\"t%zu\" : { \"data_offsets\" : [ %zu , %zu ] ,\n\"shape\":[ 2 ],"
                      "\t\"dtype\" :\"F32\"\r}"; break;
        case 2: fmt = "%s\"t%zu\":{\"dtype\":\"F32\",\"x\":[{}],\"shape\":[2],"
                      "\"data_offsets\":[%zu,%zu]}"; break;
        case 3: fmt = "%s\"t%zu\":{\"\\u0064type\":\"F32\",\"shape\":[2],"
                      "\"data_offsets\":[%zu,%zu]}"; break;
        default: fmt = "%s\"t%zu\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%zu,%zu]}";
        }
        n += (size_t)snprintf(j + n, cap - n, fmt, i ? "," : "", i, 8 * i, 8 * i + 8);
    }
    n += (size_t)snprintf(j + n, cap - n, "}");
    buf b = mk_raw(n, j, n, 8 * nt);
    free(j);
    return b;
}

TBX_TEST(plain_entries_open_without_a_json_tree_each) {
    /* Before: every entry was parsed into its own jansson tree (about a dozen allocations per
     * entry); the plain form is now read directly. jansson's allocator is counted. */
    const size_t nt = 1000;
    buf b = many_entries(nt, 0);
    json_set_alloc_funcs(count_malloc, count_free);
    g_json_allocs = 0;
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(b.p, b.n, NULL, &f, &e));
    size_t plain_allocs = g_json_allocs;
    CHECK(plain_allocs < nt / 10);
    CHECK(f && tbx_tensor_count(f) == nt);
    /* the same tensors written in other valid forms: read by jansson, same table */
    buf o = many_entries(nt, 1);
    tbx_file *g = NULL;
    g_json_allocs = 0;
    CHECK_OK(open_mem(o.p, o.n, NULL, &g, &e));
    CHECK(g_json_allocs >= nt); /* the odd forms do go through jansson */
    json_set_alloc_funcs(malloc, free);
    CHECK(g && tbx_tensor_count(g) == nt);
    for (uint64_t i = 0; f && g && i < nt; i++) {
        tbx_tensor_info a = TBX_TENSOR_INFO_INIT, c = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, i, &a));
        CHECK_OK(tbx_tensor_info_get(g, i, &c));
        char want[32];
        snprintf(want, sizeof want, "t%zu", (size_t)i);
        CHECK_STR(a.name, want);
        CHECK_STR(c.name, want);
        CHECK(a.dtype == TBX_DT_F32 && c.dtype == TBX_DT_F32);
        CHECK(a.ndim == 1 && c.ndim == 1 && a.shape[0] == 2 && c.shape[0] == 2);
        CHECK_EQ(a.offset - (b.n - 8 * nt), 8 * i);
        CHECK_EQ(c.offset - (o.n - 8 * nt), 8 * i);
        CHECK(a.nbytes == 8 && c.nbytes == 8);
    }
    tbx_close(f);
    tbx_close(g);
    free(b.p);
    free(o.p);
}

/* The edges of the plain form: what it must hand to jansson and the entry checks. */
TBX_TEST(plain_form_edges) {
    static const bad_case edges[] = {
        {"leading zero dimension",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 0, 4,
         TBX_E_FORMAT, "header.json", "invalid JSON"},
        {"leading zero offset", "{\"a\":" F32E("[00,4]") "}", 0, 4, TBX_E_FORMAT, "header.json",
         "invalid JSON"},
        {"trailing comma in shape",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}", 0, 4, TBX_E_FORMAT,
         "header.json", "invalid JSON"},
        {"duplicate shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"shape\":[1],"
                            "\"data_offsets\":[0,4]}}", 0, 4, TBX_E_DUPLICATE, "header.json",
         "duplicate"},
        {"unclosed entry", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]]}", 0,
         4, TBX_E_FORMAT, "header.json", NULL},
        {"19-digit dimension", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1000000000000000000,0],"
                               "\"data_offsets\":[0,4]}}", 0, 4, TBX_E_FORMAT,
         "tensor.data_offsets", "needs 0"},
        {"empty dtype", "{\"a\":{\"dtype\":\"\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
         TBX_E_FORMAT, "tensor.dtype", "unknown dtype"},
        {"17 dimensions, size mismatch",
         "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,2],"
         "\"data_offsets\":[0,4]}}", 0, 4, TBX_E_FORMAT, "tensor.data_offsets", "needs 2"},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        const bad_case *c = &edges[i];
        size_t jl = strlen(c->json);
        buf b = mk_raw(jl, c->json, jl, c->dlen);
        CHECK(expect_fail(c->what, &b, NULL, c->code, c->field, c->needle));
        free(b.p);
    }
    /* valid entries at the edges: 17 dimensions, an 18-digit dimension of a zero-size tensor,
     * whitespace everywhere, -0 (jansson reads the integer 0) */
    static const char *const ok[] = {
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,4],"
        "\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[999999999999999999,0],\"data_offsets\":[0,0]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
        "{ \"a\" :\t{ \"dtype\" : \"F32\" , \"shape\" : [ ] , \"data_offsets\" : [ 0 , 4 ] } }",
        "{\"a\":" F32E("[-0,4]") "}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        buf b = mk(ok[i], 4);
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(b.p, b.n, NULL, &f, &e);
        if (st != TBX_OK) fprintf(stderr, "valid edge %zu: %s\n", i, e.message);
        CHECK_OK(st);
        tbx_close(f);
        free(b.p);
    }
}

TBX_TEST_MAIN()
