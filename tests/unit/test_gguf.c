/*
 * test_gguf.c - the GGUF driver: writer -> reader round trips of every metadata type and of
 * tensors, hand-built big-endian and v1 files, validation (padding), the ggml lint, and a table
 * of malformed files, each expected to fail with an exact status and a message naming the field.
 *
 * Files are built byte by byte with a small builder (gb_*), so each hostile case states exactly
 * which bytes it changes.
 */
#define _GNU_SOURCE
#include "tbx_test.h"

#include "api.h"
#define TBX_EXPERIMENTAL 1
#include "tensorbox/gguf.h"
#include "gguf_edit.h" /* what the file tools ask the driver */

#include <stdarg.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Byte builder                                                                                */
/* ------------------------------------------------------------------------------------------ */
typedef struct bb {
    uint8_t *p;
    size_t n, cap;
    int be;  /* big-endian fields */
    int v1;  /* u32 lengths/counts/dims */
} bb;

static void bb_put(bb *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) abort();
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void bb_int(bb *b, uint64_t v, int w) {
    uint8_t t[8];
    for (int i = 0; i < w; i++) {
        int sh = b->be ? (w - 1 - i) * 8 : i * 8;
        t[i] = (uint8_t)(v >> sh);
    }
    bb_put(b, t, (size_t)w);
}
static void bb_u8(bb *b, uint8_t v) { bb_put(b, &v, 1); }
static void bb_u16(bb *b, uint16_t v) { bb_int(b, v, 2); }
static void bb_u32(bb *b, uint32_t v) { bb_int(b, v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_int(b, v, 8); }
static void bb_len(bb *b, uint64_t v) { bb_int(b, v, b->v1 ? 4 : 8); }
static void bb_f32(bb *b, float f) { uint32_t u; memcpy(&u, &f, 4); bb_u32(b, u); }
static void bb_strn(bb *b, const char *s, size_t n) { bb_len(b, n); bb_put(b, s, n); }
static void bb_str(bb *b, const char *s) { bb_strn(b, s, strlen(s)); }
static void bb_pad(bb *b, size_t a) { while (b->n % a) bb_u8(b, 0); }
static void bb_zero(bb *b, size_t n) { while (n--) bb_u8(b, 0); }
static void bb_free(bb *b) { free(b->p); memset(b, 0, sizeof *b); }

static void hdr(bb *b, uint32_t version, uint64_t nt, uint64_t nkv) {
    bb_put(b, "GGUF", 4);
    bb_u32(b, version);
    bb_len(b, nt);
    bb_len(b, nkv);
}
static void kv_key(bb *b, const char *key, uint32_t type) { bb_str(b, key); bb_u32(b, type); }
static void kv_u32(bb *b, const char *key, uint32_t v) { kv_key(b, key, 4); bb_u32(b, v); }
static void kv_s(bb *b, const char *key, const char *s) { kv_key(b, key, 8); bb_str(b, s); }
/* tensor info; ne given fastest first */
static void ti(bb *b, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type,
               uint64_t off) {
    bb_str(b, name);
    bb_u32(b, nd);
    for (uint32_t i = 0; i < nd; i++) bb_len(b, ne[i]);
    bb_u32(b, type);
    bb_u64(b, off);
}
static void ti1(bb *b, const char *name, uint64_t ne0, uint32_t type, uint64_t off) {
    ti(b, name, 1, &ne0, type, off);
}

/* ------------------------------------------------------------------------------------------ */
/* Opening helpers                                                                             */
/* ------------------------------------------------------------------------------------------ */
typedef struct problems {
    int n;
    tbx_status codes[16];
    char msgs[16][320];
} problems;

static void on_problem(void *ud, const tbx_error *e) {
    problems *p = ud;
    if (p->n < 16) {
        p->codes[p->n] = e->code;
        snprintf(p->msgs[p->n], sizeof p->msgs[0], "%s", e->message);
    }
    p->n++;
}

static tbx_status open_mem(tbx_file **f, const bb *b, const tbx_limits *lim, problems *pr,
                           tbx_error *err) {
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.format = TBX_FORMAT_GGUF;
    o.limits = lim;
    if (pr) {
        o.on_problem = on_problem;
        o.problem_ud = pr;
    }
    memset(err, 0, sizeof *err);
    return tbx_open_memory(f, b->p, b->n, &o, err);
}

static char g_tmpdir[512];

static const char *tmp_path(const char *name) {
    static char buf[4][700];
    static int k;
    if (!g_tmpdir[0]) {
        tbx_test_tmppath(g_tmpdir, sizeof g_tmpdir, "tbx_test_gguf_XXXXXX");
        if (!mkdtemp(g_tmpdir)) abort();
    }
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_tmpdir, name);
    return buf[k];
}

static bb read_file(const char *path) {
    bb b = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) return b;
    uint8_t t[4096];
    size_t n;
    while ((n = fread(t, 1, sizeof t, fp)) > 0) bb_put(&b, t, n);
    fclose(fp);
    return b;
}

static void write_file(const char *path, const bb *b) {
    FILE *fp = fopen(path, "wb");
    if (!fp) abort();
    if (b->n) fwrite(b->p, 1, b->n, fp);
    fclose(fp);
}

/* ------------------------------------------------------------------------------------------ */
/* The sample file: 3 KVs, tensors "a" f32 [2, 3] and "b" i8 [5]                               */
/* ------------------------------------------------------------------------------------------ */
static size_t sample_last_end; /* end of the last tensor's data */

static bb sample(int be, int v1, uint32_t version) {
    bb b = {0};
    b.be = be;
    b.v1 = v1;
    hdr(&b, version, 2, 3);
    kv_s(&b, "general.architecture", "llama");
    kv_u32(&b, "x.u32", 5);
    kv_key(&b, "x.arr", 9);
    bb_u32(&b, 5);
    bb_len(&b, 3);
    bb_u32(&b, 1); bb_u32(&b, 2); bb_u32(&b, (uint32_t)-3);
    uint64_t ne[2] = {3, 2};
    ti(&b, "a", 2, ne, 0, 0);
    ti1(&b, "b", 5, 24, 32);
    bb_pad(&b, 32);
    for (int i = 0; i < 6; i++) bb_f32(&b, (float)i + 0.5f);
    bb_pad(&b, 32);
    for (int i = 1; i <= 5; i++) bb_u8(&b, (uint8_t)i);
    sample_last_end = b.n;
    bb_pad(&b, 32);
    return b;
}

TBX_TEST(sample_reads) {
    bb b = sample(0, 0, 3);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(&f, &b, NULL, NULL, &e));
    CHECK(f != NULL);
    if (!f) { bb_free(&b); return; }
    CHECK_EQ(tbx_file_version(f), 3);
    CHECK_EQ(tbx_meta_count(f), 3);
    size_t kl;
    CHECK_STR(tbx_meta_key(f, 0, &kl), "general.architecture");
    const tbx_value *v = tbx_meta_find(f, "x.arr");
    CHECK(v && tbx_value_type_of(v) == TBX_V_ARRAY);
    CHECK_EQ(tbx_value_elem_type(v), TBX_V_I32);
    CHECK_EQ(tbx_value_len(v), 3);
    int64_t i64 = 0;
    CHECK_OK(tbx_value_get_i64(tbx_value_at(v, 2), &i64));
    CHECK_EQ(i64, -3);
    CHECK_EQ(tbx_tensor_count(f), 2);
    tbx_tensor_info ti_ = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(f, 0, &ti_));
    CHECK_STR(ti_.name, "a");
    CHECK_EQ(ti_.ndim, 2);
    CHECK_EQ(ti_.shape[0], 2);
    CHECK_EQ(ti_.shape[1], 3);
    CHECK_EQ(ti_.dtype, TBX_DT_F32);
    CHECK_EQ(ti_.nbytes, 24);
    CHECK_EQ(ti_.offset % 32, 0);
    float fl[6];
    CHECK_OK(tbx_tensor_read(f, 0, fl, sizeof fl, NULL, &e));
    CHECK(fl[5] == 5.5f);
    const void *p;
    size_t pl;
    CHECK_OK(tbx_tensor_map(f, 1, &p, &pl, &e)); /* little-endian files stay zero-copy */
    CHECK_EQ(pl, 5);
    CHECK_EQ(((const uint8_t *)p)[4], 5);
    CHECK_OK(tbx_gguf_lint(f, NULL, NULL));
    tbx_close(f);
    bb_free(&b);
}

TBX_TEST(detect_by_magic) {
    bb b = sample(0, 0, 3);
    CHECK_EQ(tbx_detect_format(b.p, 64, b.n), TBX_FORMAT_GGUF);
    tbx_file *f = NULL;
    tbx_error e;
    tbx_open_options o;
    tbx_open_options_init(&o);
    CHECK_OK(tbx_open_memory(&f, b.p, b.n, &o, &e));
    CHECK_EQ(tbx_file_format(f), TBX_FORMAT_GGUF);
    tbx_close(f);
    bb_free(&b);
}

/* ------------------------------------------------------------------------------------------ */
/* What the file tools ask (gguf_edit.h)                                                       */
/* ------------------------------------------------------------------------------------------ */
/* Where each entry's type id and the end of its value are, as the builder put them, in every
 * version and byte order: after a string, arrays of strings and arrays inside an array, and for
 * the last entry (whose end is the first tensor info). */
TBX_TEST(kv_span_as_built) {
    static const struct { int be, v1; uint32_t version; } forms[] = {
        {0, 1, 1}, {0, 0, 2}, {0, 0, 3}, {1, 0, 3}, {1, 1, 1},
    };
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        bb b = {0};
        b.be = forms[k].be;
        b.v1 = forms[k].v1;
        uint64_t type_at[4], end[4];
        hdr(&b, forms[k].version, 1, 4);
        bb_str(&b, "general.architecture");
        type_at[0] = b.n;
        bb_u32(&b, 8);
        bb_str(&b, "llama");
        end[0] = b.n;
        bb_str(&b, "x.nested");
        type_at[1] = b.n;
        bb_u32(&b, 9); /* an array of 2 arrays: of strings, of u32 */
        bb_u32(&b, 9);
        bb_len(&b, 2);
        bb_u32(&b, 8);
        bb_len(&b, 2);
        bb_str(&b, "a");
        bb_str(&b, "bc");
        bb_u32(&b, 4);
        bb_len(&b, 1);
        bb_u32(&b, 7);
        end[1] = b.n;
        bb_str(&b, "x.u16");
        type_at[2] = b.n;
        bb_u32(&b, 2);
        bb_u16(&b, 9);
        end[2] = b.n;
        bb_str(&b, "x.last");
        type_at[3] = b.n;
        bb_u32(&b, 10);
        bb_u64(&b, 1);
        end[3] = b.n;
        ti1(&b, "w", 4, 0, 0);
        bb_pad(&b, 32);
        bb_zero(&b, 16);
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(&f, &b, NULL, NULL, &e);
        CHECK_OK(st);
        if (st != TBX_OK) { bb_free(&b); continue; }
        CHECK_EQ(tbx_file_version(f), forms[k].version);
        CHECK_EQ(tbx_gguf_big_endian_(f), forms[k].be != 0);
        for (uint64_t i = 0; i < 4; i++) {
            uint64_t at = 0, e2 = 0;
            CHECK_OK(tbx_gguf_kv_span_(f, i, &at, &e2, &e));
            CHECK_EQ(at, type_at[i]);
            CHECK_EQ(e2, end[i]);
        }
        uint64_t at, e2;
        CHECK_EQ(tbx_gguf_kv_span_(f, 4, &at, &e2, &e), TBX_E_INVALID_ARG);
        tbx_close(f);
        bb_free(&b);
    }
    /* not a handle of the GGUF driver */
    static const uint8_t st_file[] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    tbx_file *f = NULL;
    tbx_error e;
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.format = TBX_FORMAT_SAFETENSORS;
    CHECK_OK(tbx_open_memory(&f, st_file, sizeof st_file, &o, &e));
    uint64_t at, e2;
    CHECK_EQ(tbx_gguf_kv_span_(f, 0, &at, &e2, &e), TBX_E_INVALID_ARG);
    CHECK(!tbx_gguf_big_endian_(f));
    tbx_close(f);
    CHECK_EQ(tbx_gguf_kv_span_(NULL, 0, &at, &e2, &e), TBX_E_INVALID_ARG);
    CHECK(!tbx_gguf_big_endian_(NULL));
}

/* The bytes of a value after its key, as the specification spells them: u32 type id, then the
 * value little-endian (a string: u64 length + bytes); 0 for kinds an in-place edit never takes. */
TBX_TEST(kv_value_bytes_as_specified) {
    static const struct { tbx_value_type t; uint64_t u; int64_t i; double f; size_t n;
                          uint8_t want[16]; } cases[] = {
        {TBX_V_U8, 200, 0, 0, 5, {0, 0, 0, 0, 0xc8}},
        {TBX_V_I8, 0, -2, 0, 5, {1, 0, 0, 0, 0xfe}},
        {TBX_V_U16, 0x1234, 0, 0, 6, {2, 0, 0, 0, 0x34, 0x12}},
        {TBX_V_I16, 0, -2, 0, 6, {3, 0, 0, 0, 0xfe, 0xff}},
        {TBX_V_U32, 0xdeadbeef, 0, 0, 8, {4, 0, 0, 0, 0xef, 0xbe, 0xad, 0xde}},
        {TBX_V_I32, 0, -3, 0, 8, {5, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff}},
        {TBX_V_F32, 0, 0, 1.5, 8, {6, 0, 0, 0, 0, 0, 0xc0, 0x3f}},
        {TBX_V_BOOL, 1, 0, 0, 5, {7, 0, 0, 0, 1}},
        {TBX_V_U64, 0x0102030405060708ull, 0, 0, 12, {10, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1}},
        {TBX_V_I64, 0, -2, 0, 12, {11, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
        {TBX_V_F64, 0, 0, -2.0, 12, {12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tbx_value_type t = cases[k].t;
        tbx_value *v = t == TBX_V_BOOL ? tbx_value_new_bool((int)cases[k].u)
                       : t == TBX_V_F32 || t == TBX_V_F64 ? tbx_value_new_float(t, cases[k].f)
                       : t == TBX_V_I8 || t == TBX_V_I16 || t == TBX_V_I32 || t == TBX_V_I64
                           ? tbx_value_new_int(t, cases[k].i)
                           : tbx_value_new_uint(t, cases[k].u);
        CHECK(v != NULL);
        if (!v) continue;
        uint8_t got[16];
        memset(got, 0xAA, sizeof got);
        CHECK_EQ(tbx_gguf_kv_value_bytes_(v, NULL, 0), cases[k].n);      /* size query */
        CHECK_EQ(tbx_gguf_kv_value_bytes_(v, got, cases[k].n - 1), cases[k].n);
        CHECK_EQ(got[0], 0xAA);                                         /* nothing written */
        CHECK_EQ(tbx_gguf_kv_value_bytes_(v, got, sizeof got), cases[k].n);
        CHECK(memcmp(got, cases[k].want, cases[k].n) == 0);
        CHECK_EQ(got[cases[k].n], 0xAA);
        tbx_value_free(v);
    }
    tbx_value *s = tbx_value_new_string("ab", 2);
    uint8_t got[16];
    static const uint8_t want[14] = {8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 'a', 'b'};
    CHECK_EQ(tbx_gguf_kv_value_bytes_(s, got, sizeof got), 14);
    CHECK(memcmp(got, want, 14) == 0);
    tbx_value_free(s);
    tbx_value *a = tbx_value_new_array(TBX_V_U8); /* an array: never in place */
    tbx_value *nd = tbx_value_new_float(TBX_V_F16, 1.0); /* no GGUF type */
    CHECK_EQ(tbx_gguf_kv_value_bytes_(a, got, sizeof got), 0);
    CHECK_EQ(tbx_gguf_kv_value_bytes_(nd, got, sizeof got), 0);
    tbx_value_free(a);
    tbx_value_free(nd);
}

/* Split-set names, as llama.cpp's gguf-split spells them: "{stem}-{k:05}-of-{n:05}.gguf". */
TBX_TEST(split_set_names) {
    char buf[64];
    CHECK_EQ(tbx_gguf_shard_name_(NULL, 0, "dir/m", 5, 2, 3), 25);
    CHECK_EQ(tbx_gguf_shard_name_(buf, sizeof buf, "dir/mXYZ", 5, 2, 3), 25);
    CHECK_STR(buf, "dir/m-00002-of-00003.gguf");
    CHECK_EQ(tbx_gguf_shard_name_(buf, 8, "m", 1, 65535, 65535), 21); /* truncated, NUL-ended */
    CHECK_STR(buf, "m-65535");
    static const struct { const char *name; uint32_t n; size_t stem; } cases[] = {
        {"m-00001-of-00003.gguf", 3, 1},       {"-00001-of-00003.gguf", 3, 0},
        {"a/b.c-00001-of-99999.gguf", 99999, 5}, {"m-00001-of-00001.gguf", 1, 1},
        {"m-00002-of-00003.gguf", 0, 0},       {"m-00001-of-0003.gguf", 0, 0},
        {"m-00001-of-000003.gguf", 0, 0},      {"m-00001-of- 0003.gguf", 0, 0},
        {"m-00001-of-+0003.gguf", 0, 0},       {"m-00001-of-00003.GGUF", 0, 0},
        {"m-00001-of-00000.gguf", 0, 0},       {"m-00001-of-00003.gguf.bak", 0, 0},
        {".gguf", 0, 0},                       {"", 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t stem = 777;
        uint32_t n = tbx_gguf_shard1_count_(cases[k].name, strlen(cases[k].name), &stem);
        CHECK_EQ(n, cases[k].n);
        CHECK_EQ(stem, n ? cases[k].stem : 777);
    }
    CHECK(tbx_gguf_is_split_key_("split.no", 8));
    CHECK(tbx_gguf_is_split_key_("split.anything", 14));
    CHECK(!tbx_gguf_is_split_key_("split", 5));
    CHECK(!tbx_gguf_is_split_key_("splitx.no", 9));
    CHECK_STR(tbx_gguf_split_keys_[0].key, "split.no");
    CHECK_STR(tbx_gguf_split_keys_[1].key, "split.count");
    CHECK_STR(tbx_gguf_split_keys_[2].key, "split.tensors.count");
}

/* ------------------------------------------------------------------------------------------ */
/* Writer -> reader                                                                            */
/* ------------------------------------------------------------------------------------------ */
static tbx_status add_meta(tbx_writer *w, const char *key, tbx_value *v, tbx_error *e) {
    tbx_status st = tbx_writer_add_meta(w, key, strlen(key), v, e);
    tbx_value_free(v);
    return st;
}

static tbx_value *arr_of(tbx_value_type et, int n, ...) {
    tbx_value *a = tbx_value_new_array(et);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) tbx_value_array_push(a, va_arg(ap, tbx_value *));
    va_end(ap);
    return a;
}

TBX_TEST(roundtrip_every_metadata_type) {
    const char *path = tmp_path("meta.gguf");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.flags = TBX_WRITE_OVERWRITE;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    if (!w) return;
    CHECK_OK(add_meta(w, "t.u8", tbx_value_new_uint(TBX_V_U8, 255), &e));
    CHECK_OK(add_meta(w, "t.i8", tbx_value_new_int(TBX_V_I8, -128), &e));
    CHECK_OK(add_meta(w, "t.u16", tbx_value_new_uint(TBX_V_U16, 65535), &e));
    CHECK_OK(add_meta(w, "t.i16", tbx_value_new_int(TBX_V_I16, -32768), &e));
    CHECK_OK(add_meta(w, "t.u32", tbx_value_new_uint(TBX_V_U32, 4294967295u), &e));
    CHECK_OK(add_meta(w, "t.i32", tbx_value_new_int(TBX_V_I32, INT32_MIN), &e));
    CHECK_OK(add_meta(w, "t.u64", tbx_value_new_uint(TBX_V_U64, UINT64_MAX), &e));
    CHECK_OK(add_meta(w, "t.i64", tbx_value_new_int(TBX_V_I64, INT64_MIN), &e));
    CHECK_OK(add_meta(w, "t.f32", tbx_value_new_float(TBX_V_F32, 0.1f), &e));
    CHECK_OK(add_meta(w, "t.f64", tbx_value_new_float(TBX_V_F64, 0.1), &e));
    CHECK_OK(add_meta(w, "t.bool", tbx_value_new_bool(1), &e));
    CHECK_OK(add_meta(w, "t.str", tbx_value_new_string("a\0b", 3), &e));
    CHECK_OK(add_meta(w, "t.empty", tbx_value_new_string("", 0), &e));
    CHECK_OK(add_meta(w, "t.arr_u8", arr_of(TBX_V_U8, 3, tbx_value_new_uint(TBX_V_U8, 1),
                                            tbx_value_new_uint(TBX_V_U8, 2),
                                            tbx_value_new_uint(TBX_V_U8, 255)), &e));
    CHECK_OK(add_meta(w, "t.arr_f32", arr_of(TBX_V_F32, 2, tbx_value_new_float(TBX_V_F32, -1.5),
                                             tbx_value_new_float(TBX_V_F32, 3.25)), &e));
    CHECK_OK(add_meta(w, "t.arr_bool", arr_of(TBX_V_BOOL, 2, tbx_value_new_bool(0),
                                              tbx_value_new_bool(1)), &e));
    CHECK_OK(add_meta(w, "t.arr_u64", arr_of(TBX_V_U64, 1, tbx_value_new_uint(TBX_V_U64, UINT64_MAX)), &e));
    CHECK_OK(add_meta(w, "t.arr_str", arr_of(TBX_V_STRING, 2, tbx_value_new_string("x", 1),
                                             tbx_value_new_string("y\0z", 3)), &e));
    CHECK_OK(add_meta(w, "t.arr_empty", tbx_value_new_array(TBX_V_U32), &e));
    /* untyped array: the element type comes from the items */
    CHECK_OK(add_meta(w, "t.arr_untyped", arr_of(TBX_V_NULL, 2, tbx_value_new_int(TBX_V_I16, 7),
                                                 tbx_value_new_int(TBX_V_I16, -7)), &e));
    tbx_value *nest = arr_of(TBX_V_ARRAY, 2,
                             arr_of(TBX_V_I32, 2, tbx_value_new_int(TBX_V_I32, 1),
                                    tbx_value_new_int(TBX_V_I32, 2)),
                             arr_of(TBX_V_STRING, 1, tbx_value_new_string("deep", 4)));
    CHECK_OK(add_meta(w, "t.nested", nest, &e));
    tbx_value *nest3 = arr_of(TBX_V_ARRAY, 1, arr_of(TBX_V_ARRAY, 1,
                                                     arr_of(TBX_V_F64, 1, tbx_value_new_float(TBX_V_F64, 2.5))));
    CHECK_OK(add_meta(w, "t.nested3", nest3, &e));
    CHECK_OK(tbx_writer_finish(w, &e));

    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    if (!f) return;
    CHECK_EQ(tbx_meta_count(f), 22);
    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    const tbx_value *v;
    v = tbx_meta_find(f, "t.u8"); CHECK_EQ(tbx_value_type_of(v), TBX_V_U8);
    CHECK_OK(tbx_value_get_u64(v, &u)); CHECK_EQ(u, 255);
    v = tbx_meta_find(f, "t.i8"); CHECK_EQ(tbx_value_type_of(v), TBX_V_I8);
    CHECK_OK(tbx_value_get_i64(v, &i)); CHECK_EQ(i, -128);
    v = tbx_meta_find(f, "t.u16"); CHECK_EQ(tbx_value_type_of(v), TBX_V_U16);
    v = tbx_meta_find(f, "t.i16"); CHECK_EQ(tbx_value_type_of(v), TBX_V_I16);
    CHECK_OK(tbx_value_get_i64(v, &i)); CHECK_EQ(i, -32768);
    v = tbx_meta_find(f, "t.u32"); CHECK_OK(tbx_value_get_u64(v, &u)); CHECK_EQ(u, 4294967295u);
    v = tbx_meta_find(f, "t.i32"); CHECK_OK(tbx_value_get_i64(v, &i)); CHECK_EQ(i, INT32_MIN);
    v = tbx_meta_find(f, "t.u64"); CHECK_EQ(tbx_value_type_of(v), TBX_V_U64);
    CHECK_OK(tbx_value_get_u64(v, &u)); CHECK(u == UINT64_MAX);
    v = tbx_meta_find(f, "t.i64"); CHECK_OK(tbx_value_get_i64(v, &i)); CHECK(i == INT64_MIN);
    v = tbx_meta_find(f, "t.f32"); CHECK_EQ(tbx_value_type_of(v), TBX_V_F32);
    CHECK_OK(tbx_value_get_f64(v, &d)); CHECK(d == (double)0.1f);
    v = tbx_meta_find(f, "t.f64"); CHECK_OK(tbx_value_get_f64(v, &d)); CHECK(d == 0.1);
    v = tbx_meta_find(f, "t.bool"); CHECK_EQ(tbx_value_type_of(v), TBX_V_BOOL);
    CHECK_OK(tbx_value_get_u64(v, &u)); CHECK_EQ(u, 1);
    size_t sl = 0;
    const char *s = tbx_value_get_str(tbx_meta_find(f, "t.str"), &sl);
    CHECK_EQ(sl, 3);
    CHECK(s && memcmp(s, "a\0b", 3) == 0);
    s = tbx_value_get_str(tbx_meta_find(f, "t.empty"), &sl);
    CHECK(s != NULL);
    CHECK_EQ(sl, 0);
    v = tbx_meta_find(f, "t.arr_u8");
    size_t nb = 0;
    const uint8_t *pd = tbx_value_data(v, &nb);
    CHECK_EQ(nb, 3);
    CHECK(pd && pd[2] == 255);
    v = tbx_meta_find(f, "t.arr_f32");
    CHECK_EQ(tbx_value_elem_type(v), TBX_V_F32);
    CHECK_OK(tbx_value_get_f64(tbx_value_at(v, 1), &d)); CHECK(d == 3.25);
    v = tbx_meta_find(f, "t.arr_bool");
    CHECK_EQ(tbx_value_elem_type(v), TBX_V_BOOL);
    CHECK_OK(tbx_value_get_u64(tbx_value_at(v, 1), &u)); CHECK_EQ(u, 1);
    v = tbx_meta_find(f, "t.arr_u64");
    CHECK_OK(tbx_value_get_u64(tbx_value_at(v, 0), &u)); CHECK(u == UINT64_MAX);
    v = tbx_meta_find(f, "t.arr_str");
    CHECK_EQ(tbx_value_elem_type(v), TBX_V_STRING);
    s = tbx_value_get_str(tbx_value_at(v, 1), &sl);
    CHECK_EQ(sl, 3);
    CHECK(s && memcmp(s, "y\0z", 3) == 0);
    v = tbx_meta_find(f, "t.arr_empty");
    CHECK_EQ(tbx_value_type_of(v), TBX_V_ARRAY);
    CHECK_EQ(tbx_value_elem_type(v), TBX_V_U32);
    CHECK_EQ(tbx_value_len(v), 0);
    CHECK(tbx_value_at(v, 0) == NULL);
    v = tbx_meta_find(f, "t.arr_untyped");
    CHECK_EQ(tbx_value_elem_type(v), TBX_V_I16);
    CHECK_OK(tbx_value_get_i64(tbx_value_at(v, 1), &i)); CHECK_EQ(i, -7);
    v = tbx_meta_find(f, "t.nested");
    CHECK_EQ(tbx_value_elem_type(v), TBX_V_ARRAY);
    CHECK_EQ(tbx_value_len(v), 2);
    CHECK_EQ(tbx_value_elem_type(tbx_value_at(v, 0)), TBX_V_I32);
    CHECK_OK(tbx_value_get_i64(tbx_value_at(tbx_value_at(v, 0), 1), &i)); CHECK_EQ(i, 2);
    CHECK_EQ(tbx_value_elem_type(tbx_value_at(v, 1)), TBX_V_STRING);
    s = tbx_value_get_str(tbx_value_at(tbx_value_at(v, 1), 0), &sl);
    CHECK(s && sl == 4 && memcmp(s, "deep", 4) == 0);
    v = tbx_meta_find(f, "t.nested3");
    v = tbx_value_at(tbx_value_at(tbx_value_at(v, 0), 0), 0);
    CHECK_OK(tbx_value_get_f64(v, &d)); CHECK(d == 2.5);
    CHECK_EQ(tbx_gguf_lint(f, NULL, NULL), TBX_E_UNSUPPORTED); /* ggml: no nested arrays */
    tbx_close(f);
}

static tbx_status add_tensor(tbx_writer *w, const char *name, tbx_dtype dt, uint32_t nd,
                             const uint64_t *shape, const void *data, size_t len, tbx_error *e) {
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), name, 0, dt, nd, shape, 1};
    uint64_t idx;
    tbx_status st = tbx_writer_add_tensor(w, &d, &idx, e);
    if (st != TBX_OK) return st;
    (void)data;
    (void)len;
    return TBX_OK;
}

TBX_TEST(roundtrip_tensors_and_exact_bytes) {
    const char *path = tmp_path("tensors.gguf");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.flags = TBX_WRITE_OVERWRITE;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    if (!w) return;
    CHECK_OK(add_meta(w, "general.architecture", tbx_value_new_string("llama", 5), &e));
    uint64_t s0[2] = {2, 3}, s1[2] = {2, 32}, s3[2] = {0, 4};
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint8_t q[68];
    for (int k = 0; k < 68; k++) q[k] = (uint8_t)(k * 7);
    int8_t c[3] = {-1, 0, 1};
    float sc = 42.0f;
    CHECK_OK(add_tensor(w, "a", TBX_DT_F32, 2, s0, a, sizeof a, &e));
    CHECK_OK(add_tensor(w, "q", TBX_DT_Q8_0, 2, s1, q, sizeof q, &e));
    CHECK_OK(add_tensor(w, "scalar", TBX_DT_F32, 0, NULL, &sc, 4, &e));
    CHECK_OK(add_tensor(w, "empty", TBX_DT_F16, 2, s3, NULL, 0, &e));
    uint64_t s4[1] = {3};
    CHECK_OK(add_tensor(w, "c", TBX_DT_I8, 1, s4, c, 3, &e));
    /* written out of order, in two chunks for "a" */
    CHECK_OK(tbx_writer_write_tensor(w, 1, q, sizeof q, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 0, a, 8, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 0, (const uint8_t *)a + 8, 16, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 4, c, 3, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 2, &sc, 4, &e));
    CHECK_OK(tbx_writer_finish(w, &e));

    /* The exact bytes, as GGUFWriter lays them out. */
    bb x = {0};
    hdr(&x, 3, 5, 1);
    kv_s(&x, "general.architecture", "llama");
    uint64_t ne0[2] = {3, 2}, ne1[2] = {32, 2}, ne3[2] = {4, 0};
    ti(&x, "a", 2, ne0, 0, 0);
    ti(&x, "q", 2, ne1, 8, 32);
    ti(&x, "scalar", 0, NULL, 0, 32 + 96);
    ti(&x, "empty", 2, ne3, 1, 32 + 96 + 32);
    ti1(&x, "c", 3, 24, 32 + 96 + 32);
    bb_pad(&x, 32);
    bb_put(&x, a, 24); bb_pad(&x, 32);
    bb_put(&x, q, 68); bb_pad(&x, 32);
    bb_put(&x, &sc, 4); bb_pad(&x, 32);
    bb_put(&x, c, 3); bb_pad(&x, 32);
    bb got = read_file(path);
    CHECK_EQ(got.n, x.n);
    CHECK(got.n == x.n && memcmp(got.p, x.p, x.n) == 0);
    bb_free(&got);
    bb_free(&x);

    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    if (!f) return;
    tbx_tensor_info t = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(f, 1, &t));
    CHECK_EQ(t.dtype, TBX_DT_Q8_0);
    CHECK_EQ(t.nbytes, 68);
    CHECK_EQ(t.shape[0], 2);
    CHECK_EQ(t.shape[1], 32);
    uint8_t qb[68];
    CHECK_OK(tbx_tensor_read(f, 1, qb, sizeof qb, NULL, &e));
    CHECK(memcmp(qb, q, 68) == 0);
    CHECK_OK(tbx_tensor_info_get(f, 2, &t));
    CHECK_EQ(t.ndim, 0);
    CHECK_EQ(t.nelems, 1);
    CHECK_OK(tbx_tensor_info_get(f, 3, &t));
    CHECK_EQ(t.nelems, 0);
    CHECK_EQ(t.nbytes, 0);
    CHECK_OK(tbx_gguf_lint(f, NULL, NULL));
    tbx_close(f);
    uint64_t np = 99;
    CHECK_OK(tbx_validate_path(path, NULL, NULL, NULL, &np));
    CHECK_EQ(np, 0);
}

TBX_TEST(writer_custom_alignment) {
    const char *path = tmp_path("align.gguf");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.flags = TBX_WRITE_OVERWRITE;
    wo.alignment = 64;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    if (!w) return;
    uint64_t s[1] = {3};
    float a[3] = {1, 2, 3};
    CHECK_OK(add_tensor(w, "a", TBX_DT_F32, 1, s, a, 12, &e));
    CHECK_OK(add_tensor(w, "b", TBX_DT_F32, 1, s, a, 12, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 0, a, 12, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 1, a, 12, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    if (!f) return;
    const tbx_value *v = tbx_meta_find(f, "general.alignment");
    uint64_t u = 0;
    CHECK(v && tbx_value_type_of(v) == TBX_V_U32);
    CHECK_OK(tbx_value_get_u64(v, &u));
    CHECK_EQ(u, 64);
    tbx_tensor_info t = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(f, 1, &t));
    CHECK_EQ(t.offset % 64, 0);
    CHECK_EQ(tbx_file_size(f) % 64, 0);
    CHECK_OK(tbx_tensor_info_get(f, 0, &t));
    CHECK_EQ(tbx_file_size(f), t.offset + 128);
    CHECK_OK(tbx_gguf_lint(f, NULL, NULL));
    tbx_close(f);

    /* the option and the metadata must agree */
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    CHECK_EQ(add_meta(w, "general.alignment", tbx_value_new_uint(TBX_V_U32, 32), &e),
             TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "disagree") != NULL);
    CHECK_EQ(add_meta(w, "general.alignment", tbx_value_new_uint(TBX_V_U64, 64), &e),
             TBX_E_UNSUPPORTED);
    CHECK_OK(add_meta(w, "general.alignment", tbx_value_new_uint(TBX_V_U32, 64), &e));
    tbx_writer_abort(w);
}

TBX_TEST(writer_refusals) {
    const char *path = tmp_path("refuse.gguf");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.flags = TBX_WRITE_OVERWRITE;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    if (!w) return;
    CHECK_EQ(add_meta(w, "k.f16", tbx_value_new_float(TBX_V_F16, 1.0), &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "k.f16") && strstr(e.message, "f16"));
    CHECK_EQ(add_meta(w, "k.bf16", tbx_value_new_float(TBX_V_BF16, 1.0), &e), TBX_E_LOSSY);
    CHECK_EQ(add_meta(w, "k.bytes", tbx_value_new_bytes("ab", 2), &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "bytes") != NULL);
    CHECK_EQ(add_meta(w, "k.map", tbx_value_new_map(), &e), TBX_E_LOSSY);
    CHECK_EQ(add_meta(w, "k.null", tbx_value_new_null(), &e), TBX_E_LOSSY);
    uint8_t bits = 5;
    CHECK_EQ(add_meta(w, "k.bits", tbx_value_new_bitset(&bits, 3), &e), TBX_E_LOSSY);
    uint64_t sh = 2;
    float nd[2] = {1, 2};
    CHECK_EQ(add_meta(w, "k.nd", tbx_value_new_ndarray(TBX_DT_F32, &sh, 1, nd, 8), &e),
             TBX_E_LOSSY);
    CHECK_EQ(add_meta(w, "k.arr16", arr_of(TBX_V_F16, 1, tbx_value_new_float(TBX_V_F16, 1)), &e),
             TBX_E_LOSSY);
    CHECK_EQ(add_meta(w, "k.untyped_empty", tbx_value_new_array(TBX_V_NULL), &e), TBX_E_LOSSY);
    CHECK_EQ(add_meta(w, "k.mixed", arr_of(TBX_V_NULL, 2, tbx_value_new_uint(TBX_V_U8, 1),
                                           tbx_value_new_string("x", 1)), &e), TBX_E_LOSSY);
    CHECK_EQ(add_meta(w, "", tbx_value_new_uint(TBX_V_U8, 1), &e), TBX_E_UNSUPPORTED);
    uint64_t s[2] = {2, 2}, sq[2] = {1, 33};
    CHECK_EQ(add_tensor(w, "u8", TBX_DT_U8, 2, s, NULL, 0, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "u8") != NULL);
    CHECK_EQ(add_tensor(w, "f8", TBX_DT_F8_E4M3, 2, s, NULL, 0, &e), TBX_E_UNSUPPORTED);
    CHECK_EQ(add_tensor(w, "q", TBX_DT_Q4_0, 2, sq, NULL, 0, &e), TBX_E_FORMAT);
    tbx_tensor_desc nodata = {sizeof(tbx_tensor_desc), "nodata", 0, TBX_DT_F32, 2, s, 0};
    CHECK_EQ(tbx_writer_add_tensor(w, &nodata, NULL, &e), TBX_E_UNSUPPORTED);
    tbx_writer_abort(w);

    /* versions the driver row does not declare writable (v1), and options GGUF has no use
     * for, are refused when the writer opens */
    wo.version = 1;
    CHECK_EQ(tbx_writer_open(&w, path, &wo, &e), TBX_E_UNSUPPORTED);
    CHECK(w == NULL && !strcmp(e.field, "version"));
    wo.version = 0;
    wo.digest = "sha256";
    CHECK_EQ(tbx_writer_open(&w, path, &wo, &e), TBX_E_UNSUPPORTED);
    CHECK(!strcmp(e.field, "digest"));
    wo.digest = "none";
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    tbx_writer_abort(w);
}

TBX_TEST(writer_no_tensors_pads_header) {
    const char *path = tmp_path("empty.gguf");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.flags = TBX_WRITE_OVERWRITE;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    if (!w) return;
    CHECK_OK(add_meta(w, "k", tbx_value_new_uint(TBX_V_U8, 1), &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    bb got = read_file(path);
    bb x = {0};
    hdr(&x, 3, 0, 1);
    bb_str(&x, "k");
    bb_u32(&x, 0);
    bb_u8(&x, 1);
    bb_pad(&x, 32);
    CHECK_EQ(got.n, x.n);
    CHECK(got.n == x.n && memcmp(got.p, x.p, x.n) == 0);
    bb_free(&x);
    bb_free(&got);
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    CHECK_EQ(tbx_tensor_count(f), 0);
    tbx_close(f);
}

/* ------------------------------------------------------------------------------------------ */
/* Big-endian and v1 files                                                                     */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(big_endian_file) {
    bb b = {0};
    b.be = 1;
    hdr(&b, 3, 5, 5);
    kv_key(&b, "be.u16", 2); bb_u16(&b, 0x1234);
    kv_key(&b, "be.f32", 6); bb_f32(&b, 1.5f);
    kv_s(&b, "be.str", "hello");
    kv_key(&b, "be.arr", 9); bb_u32(&b, 4); bb_len(&b, 2); bb_u32(&b, 0x01020304); bb_u32(&b, 7);
    kv_key(&b, "be.i64", 11); bb_u64(&b, (uint64_t)-2);
    ti1(&b, "f32", 3, 0, 0);
    ti1(&b, "f16", 2, 1, 32);
    ti1(&b, "q8", 32, 8, 64);
    ti1(&b, "i8", 2, 24, 128);
    ti1(&b, "iq2", 256, 16, 160);
    bb_pad(&b, 32);
    bb_f32(&b, 1.0f); bb_f32(&b, -2.0f); bb_f32(&b, 3.5f); bb_pad(&b, 32);
    bb_u16(&b, 0x3c00); bb_u16(&b, 0xc000); bb_pad(&b, 32);
    bb_u16(&b, 0x3c00); for (int i = 0; i < 32; i++) bb_u8(&b, (uint8_t)i); bb_pad(&b, 32);
    bb_u8(&b, 0xff); bb_u8(&b, 7); bb_pad(&b, 32);
    bb_zero(&b, 66); bb_pad(&b, 32);

    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(&f, &b, NULL, NULL, &e));
    if (!f) { bb_free(&b); return; }
    CHECK_EQ(tbx_file_version(f), 3);
    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    CHECK_OK(tbx_value_get_u64(tbx_meta_find(f, "be.u16"), &u)); CHECK_EQ(u, 0x1234);
    CHECK_OK(tbx_value_get_f64(tbx_meta_find(f, "be.f32"), &d)); CHECK(d == 1.5);
    size_t sl;
    const char *s = tbx_value_get_str(tbx_meta_find(f, "be.str"), &sl);
    CHECK(s && sl == 5 && memcmp(s, "hello", 5) == 0);
    const tbx_value *a = tbx_meta_find(f, "be.arr");
    CHECK_OK(tbx_value_get_u64(tbx_value_at(a, 0), &u)); CHECK_EQ(u, 0x01020304);
    uint32_t native;
    memcpy(&native, tbx_value_data(a, NULL), 4);
    CHECK_EQ(native, 0x01020304); /* packed storage is native-endian */
    CHECK_OK(tbx_value_get_i64(tbx_meta_find(f, "be.i64"), &i)); CHECK_EQ(i, -2);

    float fl[3];
    CHECK_OK(tbx_tensor_read(f, 0, fl, sizeof fl, NULL, &e));
    CHECK(fl[0] == 1.0f && fl[1] == -2.0f && fl[2] == 3.5f);
    uint8_t h[4];
    CHECK_OK(tbx_tensor_read(f, 1, h, sizeof h, NULL, &e));
    CHECK(h[0] == 0x00 && h[1] == 0x3c && h[2] == 0x00 && h[3] == 0xc0); /* LE now */
    uint8_t q[34];
    CHECK_OK(tbx_tensor_read(f, 2, q, sizeof q, NULL, &e));
    CHECK(q[0] == 0x00 && q[1] == 0x3c && q[2] == 0 && q[33] == 31); /* only d swapped */
    float qf[32];
    if (tbx_dtype_get(TBX_DT_Q8_0)->flags & TBX_DTF_DECODE) {
        CHECK_OK(tbx_tensor_read_f32(f, 2, 0, 32, qf, &e)); /* decodes the swapped block */
        CHECK(qf[5] == 5.0f);
    } else {
        CHECK_EQ(tbx_tensor_read_f32(f, 2, 0, 32, qf, &e), TBX_E_UNSUPPORTED);
    }
    int8_t c[2];
    CHECK_OK(tbx_tensor_read(f, 3, c, 2, NULL, &e));
    CHECK(c[0] == -1 && c[1] == 7);
    uint8_t iq[66];
    CHECK_EQ(tbx_tensor_read(f, 4, iq, sizeof iq, NULL, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "big-endian") && strstr(e.message, "IQ2_XXS"));
    problems pr = {0};
    CHECK_EQ(tbx_gguf_lint(f, on_problem, &pr), TBX_E_BAD_VERSION);
    CHECK_EQ(pr.n, 1);
    CHECK(strstr(pr.msgs[0], "big-endian") != NULL);
    tbx_close(f);
    bb_free(&b);
}

TBX_TEST(version1_file) {
    bb b = {0};
    b.v1 = 1;
    hdr(&b, 1, 1, 2);
    kv_s(&b, "v1.name", "old");
    kv_key(&b, "v1.arr", 9); bb_u32(&b, 8); bb_len(&b, 2); bb_str(&b, "a"); bb_str(&b, "bc");
    uint64_t ne[2] = {2, 2};
    ti(&b, "w", 2, ne, 0, 0);
    bb_pad(&b, 32);
    for (int i = 0; i < 4; i++) bb_f32(&b, (float)i);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(&f, &b, NULL, NULL, &e));
    if (!f) { fprintf(stderr, "%s\n", e.message); bb_free(&b); return; }
    CHECK_EQ(tbx_file_version(f), 1);
    size_t sl;
    const char *s = tbx_value_get_str(tbx_meta_find(f, "v1.name"), &sl);
    CHECK(s && sl == 3 && memcmp(s, "old", 3) == 0);
    const tbx_value *a = tbx_meta_find(f, "v1.arr");
    s = tbx_value_get_str(tbx_value_at(a, 1), &sl);
    CHECK(s && sl == 2 && memcmp(s, "bc", 2) == 0);
    tbx_tensor_info t = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(f, 0, &t));
    CHECK_EQ(t.ndim, 2);
    CHECK_EQ(t.nbytes, 16);
    CHECK_EQ(tbx_gguf_lint(f, NULL, NULL), TBX_E_BAD_VERSION);
    tbx_close(f);
    bb_free(&b);
}

/* ------------------------------------------------------------------------------------------ */
/* Validation and lint                                                                         */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(validate_reports_padding_alignment_overlap) {
    bb b = sample(0, 0, 3);
    size_t data_start = b.n - 64;
    b.p[data_start - 1] = 0x55;    /* padding before the data start */
    b.p[data_start + 24] = 0x66;   /* padding between "a" and "b" */
    const char *path = tmp_path("pad.gguf");
    write_file(path, &b);
    problems pr = {0};
    uint64_t np = 0;
    tbx_open_options o;
    tbx_open_options_init(&o);
    CHECK_EQ(tbx_validate_path(path, &o, on_problem, &pr, &np), TBX_E_PADDING);
    CHECK_EQ(np, 2);
    CHECK_EQ(pr.codes[0], TBX_E_PADDING);
    CHECK(strstr(pr.msgs[0], "0x55") != NULL);
    CHECK(strstr(pr.msgs[1], "after tensor \"a\"") != NULL);
    /* plain open does not look at padding */
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(&f, &b, NULL, NULL, &e));
    tbx_close(f);
    bb_free(&b);

    /* misaligned + overlapping: fatal on open, both reported by validate */
    bb c = {0};
    hdr(&c, 3, 2, 0);
    ti1(&c, "x", 8, 0, 0);
    ti1(&c, "y", 8, 0, 16);
    bb_pad(&c, 32);
    bb_zero(&c, 64);
    CHECK_EQ(open_mem(&f, &c, NULL, NULL, &e), TBX_E_RANGE);
    CHECK(strstr(e.message, "alignment") != NULL);
    pr.n = 0;
    CHECK_OK(open_mem(&f, &c, NULL, &pr, &e));
    CHECK_EQ(pr.n, 2);
    CHECK(strstr(pr.msgs[1], "overlaps") != NULL);
    tbx_close(f);
    bb_free(&c);
}

TBX_TEST(lint_ggml_rules) {
    bb b = {0};
    hdr(&b, 3, 3, 2);
    kv_key(&b, "general.alignment", 10); bb_u64(&b, 32); /* wrong type: problem */
    kv_key(&b, "nest", 9); bb_u32(&b, 9); bb_len(&b, 1); bb_u32(&b, 0); bb_len(&b, 0);
    uint64_t ne5[5] = {1, 1, 1, 1, 2};
    ti(&b, "five", 5, ne5, 0, 0);
    char longname[80];
    memset(longname, 'n', 70);
    longname[70] = 0;
    ti1(&b, longname, 1, 0, 64);   /* ggml expects 32 */
    ti1(&b, "ok", 1, 0, 96);
    bb_pad(&b, 32);
    bb_zero(&b, 128);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_EQ(open_mem(&f, &b, NULL, NULL, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "general.alignment") != NULL);
    problems pr = {0};
    CHECK_OK(open_mem(&f, &b, NULL, &pr, &e));
    CHECK_EQ(pr.n, 1);
    if (!f) { bb_free(&b); return; }
    problems lp = {0};
    CHECK_EQ(tbx_gguf_lint(f, on_problem, &lp), TBX_E_UNSUPPORTED);
    /* nested, name, 2 offsets; the alignment type and n_dims = 5 are problems of every
     * validation (the open above, the driver's validate), not repeated by the lint */
    CHECK_EQ(lp.n, 4);
    int saw_ndims = 0, saw_align = 0, saw_name = 0, saw_off = 0, saw_nest = 0;
    for (int k = 0; k < lp.n && k < 16; k++) {
        if (strstr(lp.msgs[k], "n_dims = 5")) saw_ndims = 1;
        if (strstr(lp.msgs[k], "general.alignment")) saw_align = 1;
        if (strstr(lp.msgs[k], "name of 70 bytes")) saw_name = 1;
        if (strstr(lp.msgs[k], "ggml expects 32")) saw_off = 1;
        if (strstr(lp.msgs[k], "arrays of arrays")) saw_nest = 1;
    }
    CHECK(!saw_ndims && !saw_align && saw_name && saw_off && saw_nest);
    CHECK_EQ(tbx_gguf_lint(NULL, NULL, NULL), TBX_E_INVALID_ARG);
    tbx_close(f);
    bb_free(&b);
}

TBX_TEST(type_mapping) {
    CHECK_EQ(tbx_gguf_type_dtype(0), TBX_DT_F32);
    CHECK_EQ(tbx_gguf_type_dtype(30), TBX_DT_BF16);
    CHECK_EQ(tbx_gguf_type_dtype(42), TBX_DT_Q2_0);
    CHECK_EQ(tbx_gguf_type_dtype(4), TBX_DT_INVALID);
    CHECK_EQ(tbx_gguf_type_dtype(43), TBX_DT_INVALID);
    CHECK_EQ(tbx_gguf_dtype_type(TBX_DT_Q6_K), 14);
    CHECK_EQ(tbx_gguf_dtype_type(TBX_DT_U8), -1);
    CHECK_STR(tbx_gguf_type_name(31), "Q4_0_4_4");
    CHECK(tbx_gguf_type_name(99) == NULL);
    /* every known id maps both ways and agrees with the dtype table's block geometry */
    static const uint32_t bs[43] = {1, 1, 32, 32, 0, 0, 32, 32, 32, 32, 256, 256, 256, 256, 256,
                                    256, 256, 256, 256, 256, 32, 256, 256, 256, 1, 1, 1, 1, 1,
                                    256, 1, 0, 0, 0, 256, 256, 0, 0, 0, 32, 64, 128, 64};
    static const uint32_t tsz[43] = {4, 2, 18, 20, 0, 0, 22, 24, 34, 36, 84, 110, 144, 176, 210,
                                     292, 66, 74, 98, 50, 18, 110, 82, 136, 1, 2, 4, 8, 8, 56, 2,
                                     0, 0, 0, 54, 66, 0, 0, 0, 17, 36, 18, 18};
    for (uint32_t t = 0; t <= 42; t++) {
        tbx_dtype dt = tbx_gguf_type_dtype(t);
        if (!bs[t]) { CHECK_EQ(dt, TBX_DT_INVALID); continue; }
        const tbx_dtype_info *di = tbx_dtype_get(dt);
        CHECK(di != NULL);
        if (!di) continue;
        CHECK_EQ(tbx_gguf_dtype_type(dt), t);
        CHECK_EQ(di->block_size, bs[t]);
        CHECK_EQ(di->block_bytes, tsz[t]);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Malformed files                                                                             */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(truncation_at_every_offset) {
    bb b = sample(0, 0, 3);
    int bad = 0;
    for (size_t cut = 0; cut < b.n; cut++) {
        bb c = {0};
        bb_put(&c, b.p, cut);
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(&f, &c, NULL, NULL, &e);
        if (cut >= sample_last_end) {
            if (st != TBX_OK) { bad++; fprintf(stderr, "cut %zu: %s\n", cut, e.message); }
        } else if (st != TBX_E_TRUNCATED || !e.message[0] || !e.field[0] || f) {
            bad++;
            fprintf(stderr, "cut %zu: status %s, field \"%s\", message \"%s\"\n", cut,
                    tbx_status_name(st), e.field, e.message);
        }
        tbx_close(f);
        bb_free(&c);
    }
    CHECK_EQ(bad, 0);
    /* the same for v1 and big-endian samples */
    for (int k = 0; k < 2; k++) {
        bb s = k ? sample(1, 0, 3) : sample(0, 1, 1);
        bad = 0;
        for (size_t cut = 0; cut < sample_last_end; cut++) {
            bb c = {0};
            bb_put(&c, s.p, cut);
            tbx_file *f = NULL;
            tbx_error e;
            if (open_mem(&f, &c, NULL, NULL, &e) != TBX_E_TRUNCATED) bad++;
            tbx_close(f);
            bb_free(&c);
        }
        CHECK_EQ(bad, 0);
        bb_free(&s);
    }
    bb_free(&b);
}

typedef struct mcase {
    const char *name;
    void (*build)(bb *b);
    tbx_status want;
    const char *needle;   /* must appear in the message */
    const char *field;    /* must appear in the field (NULL: not checked) */
    int limits;           /* 0 defaults, 1 max_array_len 10, 2 max_header_bytes 48,
                             3 max_tensor_bytes 1024, 4 max_tensor_bytes 2^64-1 */
} mcase;

static void m_bad_magic(bb *b) { bb_put(b, "GGUX", 4); bb_u32(b, 3); bb_u64(b, 0); bb_u64(b, 0); }
static void m_version0(bb *b) { hdr(b, 0, 0, 0); }
static void m_version4(bb *b) { hdr(b, 4, 0, 0); }
static void m_version_be4(bb *b) { hdr(b, 0x04000000u, 0, 0); }
static void m_tiny(bb *b) { bb_put(b, "GG", 2); }
static void m_huge_tensor_count(bb *b) { hdr(b, 3, (uint64_t)1 << 40, 0); }
static void m_huge_kv_count(bb *b) { hdr(b, 3, 0, (uint64_t)1 << 62); }
static void m_count_overflow(bb *b) { hdr(b, 3, UINT64_MAX, UINT64_MAX); }
static void m_huge_key_len(bb *b) { hdr(b, 3, 0, 1); bb_u64(b, (uint64_t)1 << 40); bb_zero(b, 64); }
static void m_huge_string(bb *b) {
    hdr(b, 3, 0, 1); kv_key(b, "s", 8); bb_u64(b, UINT64_MAX - 3); bb_zero(b, 64);
}
static void m_huge_array(bb *b) {
    hdr(b, 3, 0, 1); kv_key(b, "a", 9); bb_u32(b, 0); bb_u64(b, (uint64_t)1 << 40);
    bb_zero(b, 1000);
}
static void m_array_count_wrap(bb *b) {
    hdr(b, 3, 0, 1); kv_key(b, "a", 9); bb_u32(b, 12); bb_u64(b, (uint64_t)1 << 62);
    bb_zero(b, 100);
}
static void m_array_limit(bb *b) {
    hdr(b, 3, 0, 1); kv_key(b, "a", 9); bb_u32(b, 0); bb_u64(b, 100); bb_zero(b, 100);
}
static void m_wide_bomb(bb *b) {
    hdr(b, 3, 0, 1); kv_key(b, "bomb", 9); bb_u32(b, 9); bb_u64(b, (uint64_t)1 << 40);
    bb_zero(b, 1000);
}
static void m_deep_bomb(bb *b) {
    hdr(b, 3, 0, 1); kv_key(b, "deep", 9);
    for (int i = 0; i < 100; i++) { bb_u32(b, 9); bb_u64(b, 1); }
    bb_u32(b, 0); bb_u64(b, 0);
}
static void m_dup_key(bb *b) { hdr(b, 3, 0, 2); kv_u32(b, "k", 1); kv_u32(b, "k", 2); }
static void m_dup_name(bb *b) {
    hdr(b, 3, 2, 0); ti1(b, "t", 8, 0, 0); ti1(b, "t", 8, 0, 32); bb_pad(b, 32); bb_zero(b, 64);
}
static void m_empty_key(bb *b) { hdr(b, 3, 0, 1); kv_u32(b, "", 1); }
static void m_empty_name(bb *b) { hdr(b, 3, 1, 0); ti1(b, "", 8, 0, 0); bb_pad(b, 32); bb_zero(b, 32); }
static void m_bad_vtype(bb *b) { hdr(b, 3, 0, 1); kv_key(b, "k", 13); bb_zero(b, 8); }
static void m_bad_elem_type(bb *b) {
    hdr(b, 3, 0, 1); kv_key(b, "k", 9); bb_u32(b, 99); bb_u64(b, 1); bb_zero(b, 8);
}
static void m_bool2(bb *b) { hdr(b, 3, 0, 1); kv_key(b, "flag", 7); bb_u8(b, 2); }
static void m_bool_arr(bb *b) {
    hdr(b, 3, 0, 1); kv_key(b, "flags", 9); bb_u32(b, 7); bb_u64(b, 3);
    bb_u8(b, 0); bb_u8(b, 1); bb_u8(b, 9);
}
static void m_ndims_huge(bb *b) {
    hdr(b, 3, 1, 0); bb_str(b, "t"); bb_u32(b, 0xFFFFFFFFu); bb_zero(b, 64);
}
static void m_ndims_limit(bb *b) {
    hdr(b, 3, 1, 0);
    uint64_t ne[70];
    for (int i = 0; i < 70; i++) ne[i] = 1;
    ti(b, "t", 70, ne, 0, 0);
    bb_pad(b, 32); bb_zero(b, 32);
}
static void m_ne_overflow(bb *b) {
    hdr(b, 3, 1, 0);
    uint64_t ne[2] = {(uint64_t)1 << 40, (uint64_t)1 << 40};
    ti(b, "blk.0.attn_q.weight", 2, ne, 0, 0);
    bb_pad(b, 32); bb_zero(b, 32);
}
static void m_size_wrap(bb *b) {
    hdr(b, 3, 1, 0); ti1(b, "w", ((uint64_t)1 << 62) - 1, 0, 0); bb_pad(b, 32); bb_zero(b, 32);
}
static void m_size_overflow(bb *b) {
    hdr(b, 3, 1, 0); ti1(b, "w", (uint64_t)1 << 62, 0, 0); bb_pad(b, 32); bb_zero(b, 32);
}
static void m_unaligned(bb *b) {
    hdr(b, 3, 1, 0); ti1(b, "w", 2, 0, 4); bb_pad(b, 32); bb_zero(b, 64);
}
static void m_out_of_file(bb *b) {
    hdr(b, 3, 1, 0); ti1(b, "w", 2, 0, 4096); bb_pad(b, 32); bb_zero(b, 64);
}
static void m_offset_wrap(bb *b) {
    hdr(b, 3, 1, 0); ti1(b, "w", 16, 0, UINT64_MAX - 31); bb_pad(b, 32); bb_zero(b, 64);
}
static void m_overlap(bb *b) {
    hdr(b, 3, 2, 0); ti1(b, "a", 16, 0, 0); ti1(b, "b", 16, 0, 32); bb_pad(b, 32);
    bb_zero(b, 128);
}
static void m_align0(bb *b) {
    hdr(b, 3, 1, 1); kv_u32(b, "general.alignment", 0); ti1(b, "w", 1, 0, 0); bb_zero(b, 64);
}
static void m_align3(bb *b) {
    hdr(b, 3, 1, 1); kv_u32(b, "general.alignment", 3); ti1(b, "w", 1, 0, 0); bb_zero(b, 64);
}
static void m_align_type(bb *b) {
    hdr(b, 3, 1, 1); kv_key(b, "general.alignment", 5); bb_u32(b, 32); ti1(b, "w", 1, 0, 0);
    bb_pad(b, 32); bb_zero(b, 32);
}
static void m_type_unknown(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 1, 43, 0); bb_pad(b, 32); bb_zero(b, 32); }
static void m_type4(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 32, 4, 0); bb_pad(b, 32); bb_zero(b, 64); }
static void m_type5(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 32, 5, 0); bb_pad(b, 32); bb_zero(b, 64); }
static void m_type31(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 32, 31, 0); bb_pad(b, 32); bb_zero(b, 64); }
static void m_type32(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 32, 32, 0); bb_pad(b, 32); bb_zero(b, 64); }
static void m_type33(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 32, 33, 0); bb_pad(b, 32); bb_zero(b, 64); }
static void m_type36(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 32, 36, 0); bb_pad(b, 32); bb_zero(b, 64); }
static void m_type37(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 32, 37, 0); bb_pad(b, 32); bb_zero(b, 64); }
static void m_type38(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 32, 38, 0); bb_pad(b, 32); bb_zero(b, 64); }
static void m_block(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 33, 2, 0); bb_pad(b, 32); bb_zero(b, 64); }
static void m_data_start_past_eof(bb *b) { hdr(b, 3, 1, 0); ti1(b, "w", 0, 0, 0); }
static void m_header_limit(bb *b) { hdr(b, 3, 0, 1); kv_s(b, "k", "0123456789012345678901234567890123456789"); }
static void m_tensor_bytes_limit(bb *b) {
    hdr(b, 3, 1, 0); ti1(b, "w", 1000, 0, 0); bb_pad(b, 32); bb_zero(b, 4000);
}

static const mcase mcases[] = {
    {"bad magic", m_bad_magic, TBX_E_BAD_MAGIC, "magic \"GGUX\"", "magic", 0},
    {"version 0", m_version0, TBX_E_BAD_VERSION, "version 0", "version", 0},
    {"version 4", m_version4, TBX_E_BAD_VERSION, "version 4", "version", 0},
    {"big-endian version 4", m_version_be4, TBX_E_BAD_VERSION, "big-endian", "version", 0},
    {"2-byte file", m_tiny, TBX_E_TRUNCATED, "too short", "magic", 0},
    {"tensor_count 2^40", m_huge_tensor_count, TBX_E_TRUNCATED, "1099511627776 tensor infos",
     "tensor_count", 0},
    {"kv_count 2^62", m_huge_kv_count, TBX_E_TRUNCATED, "metadata entries", "kv_count", 0},
    /* both counts impossible: the metadata entries alone already overflow */
    {"counts wrap", m_count_overflow, TBX_E_TRUNCATED, "more than", "kv_count", 0},
    {"key length 2^40", m_huge_key_len, TBX_E_TRUNCATED, "1099511627776 bytes", "metadata[0].key", 0},
    {"string length 2^64-4", m_huge_string, TBX_E_TRUNCATED, "string of 18446744073709551612",
     "metadata \"s\"", 0},
    {"array of 2^40 u8", m_huge_array, TBX_E_TRUNCATED, "array of 1099511627776 u8", "metadata \"a\"", 0},
    {"array count wrap", m_array_count_wrap, TBX_E_TRUNCATED, "more than", "metadata \"a\"", 0},
    {"array over max_array_len", m_array_limit, TBX_E_LIMIT, "max_array_len", "metadata \"a\"", 1},
    {"wide nested-array bomb", m_wide_bomb, TBX_E_TRUNCATED, "array elements", "metadata \"bomb\"", 0},
    {"deep nested-array bomb", m_deep_bomb, TBX_E_LIMIT, "max_depth = 32", "metadata \"deep\"", 0},
    {"duplicate key", m_dup_key, TBX_E_DUPLICATE, "duplicate metadata key \"k\"", "metadata.key", 0},
    {"duplicate tensor name", m_dup_name, TBX_E_DUPLICATE, "duplicate tensor name \"t\"", "tensor.name", 0},
    {"empty key", m_empty_key, TBX_E_FORMAT, "empty key", "metadata[0].key", 0},
    {"empty tensor name", m_empty_name, TBX_E_FORMAT, "empty name", "tensor[0].name", 0},
    {"value type 13", m_bad_vtype, TBX_E_FORMAT, "value type 13", "metadata \"k\"", 0},
    {"array element type 99", m_bad_elem_type, TBX_E_FORMAT, "element type 99", "metadata \"k\"", 0},
    {"bool 2", m_bool2, TBX_E_FORMAT, "bool must be 0 or 1, got 2", "metadata \"flag\"", 0},
    {"bool array 9", m_bool_arr, TBX_E_FORMAT, "\"flags\"[2]: bool must be 0 or 1, got 9",
     "metadata \"flags\"", 0},
    {"n_dims 2^32-1", m_ndims_huge, TBX_E_TRUNCATED, "n_dims = 4294967295", "tensor[0].n_dims", 0},
    {"n_dims 70", m_ndims_limit, TBX_E_LIMIT, "max_ndim = 64", "tensor[0].n_dims", 0},
    {"ne overflow [2^40, 2^40]", m_ne_overflow, TBX_E_OVERFLOW,
     "tensor \"blk.0.attn_q.weight\": ne[1] = 1099511627776 makes 2^80 elements (overflow)",
     "tensor[0].ne", 0},
    /* ggml pads 2^64-4 bytes to the alignment and wraps to 0; tensorbox never pads sizes on
     * read and stops at max_tensor_bytes (or, with that raised, at the end of the file) */
    {"padded size wraps (f32 ne0 = 2^62-1)", m_size_wrap, TBX_E_LIMIT,
     "18446744073709551612 bytes exceed max_tensor_bytes", "tensor[0].ne", 0},
    {"padded size wraps, no size limit", m_size_wrap, TBX_E_OVERFLOW,
     "offset 0 + 18446744073709551612 bytes after the data start 64 overflows 64 bits",
     "tensor[0].offset", 4},
    {"byte size overflows (f32 ne0 = 2^62)", m_size_overflow, TBX_E_OVERFLOW,
     "byte size of 4611686018427387904 F32 elements overflows 64 bits", "tensor[0].ne", 0},
    {"unaligned offset", m_unaligned, TBX_E_RANGE, "offset 4 is not a multiple of the alignment 32",
     "tensor[0].offset", 0},
    {"offset past the end", m_out_of_file, TBX_E_TRUNCATED, "runs past the end of the file",
     "tensor[0].offset", 0},
    {"offset + size wraps", m_offset_wrap, TBX_E_OVERFLOW, "overflows 64 bits", "tensor[0].offset", 0},
    {"overlapping tensors", m_overlap, TBX_E_RANGE, "tensor \"b\" at offset 32 overlaps tensor \"a\"",
     "tensor[1].offset", 0},
    {"alignment 0", m_align0, TBX_E_FORMAT, "general.alignment = 0", "metadata \"general.alignment\"", 0},
    {"alignment 3", m_align3, TBX_E_FORMAT, "general.alignment = 3", "metadata \"general.alignment\"", 0},
    {"alignment i32", m_align_type, TBX_E_FORMAT, "must be a u32, got i32",
     "metadata \"general.alignment\"", 0},
    {"type id 43", m_type_unknown, TBX_E_FORMAT, "ggml type id 43 is unknown", "tensor[0].type", 0},
    {"type id 4", m_type4, TBX_E_FORMAT, "ggml type id 4 (Q4_2) was removed", "tensor[0].type", 0},
    {"type id 5", m_type5, TBX_E_FORMAT, "ggml type id 5 (Q4_3) was removed", "tensor[0].type", 0},
    {"type id 31", m_type31, TBX_E_FORMAT, "ggml type id 31 (Q4_0_4_4) was removed", "tensor[0].type", 0},
    {"type id 32", m_type32, TBX_E_FORMAT, "ggml type id 32", "tensor[0].type", 0},
    {"type id 33", m_type33, TBX_E_FORMAT, "ggml type id 33", "tensor[0].type", 0},
    {"type id 36", m_type36, TBX_E_FORMAT, "ggml type id 36 (IQ4_NL_4_4) was removed", "tensor[0].type", 0},
    {"type id 37", m_type37, TBX_E_FORMAT, "ggml type id 37", "tensor[0].type", 0},
    {"type id 38", m_type38, TBX_E_FORMAT, "ggml type id 38", "tensor[0].type", 0},
    {"ne[0] not a multiple of the block", m_block, TBX_E_FORMAT,
     "ne[0] = 33 is not a multiple of the Q4_0 block size 32", "tensor[0].ne", 0},
    {"data start past the end", m_data_start_past_eof, TBX_E_TRUNCATED, "data section starts",
     "data", 0},
    {"header over max_header_bytes", m_header_limit, TBX_E_LIMIT, "max_header_bytes", "metadata \"k\"", 2},
    {"tensor over max_tensor_bytes", m_tensor_bytes_limit, TBX_E_LIMIT, "max_tensor_bytes",
     "tensor[0].ne", 3},
};

TBX_TEST(malformed_table) {
    tbx_limits small[5];
    for (int k = 0; k < 5; k++) tbx_limits_default(&small[k]);
    small[4].max_tensor_bytes = UINT64_MAX;
    small[1].max_array_len = 10;
    small[2].max_header_bytes = 48;
    small[3].max_tensor_bytes = 1024;
    for (size_t k = 0; k < sizeof mcases / sizeof mcases[0]; k++) {
        const mcase *m = &mcases[k];
        bb b = {0};
        m->build(&b);
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(&f, &b, m->limits ? &small[m->limits] : NULL, NULL, &e);
        int ok = st == m->want && f == NULL && strstr(e.message, m->needle) != NULL &&
                 (!m->field || strstr(e.field, m->field) != NULL) &&
                 (e.offset == TBX_NO_OFFSET || e.offset <= b.n + 64);
        if (!ok)
            fprintf(stderr, "case \"%s\": got %s (want %s), field \"%s\", message \"%s\"\n",
                    m->name, tbx_status_name(st), tbx_status_name(m->want), e.field, e.message);
        CHECK(ok);
        tbx_close(f);
        bb_free(&b);
    }
}

/* Every malformed case also goes through validate (problems reported, never a crash). */
TBX_TEST(malformed_validate) {
    for (size_t k = 0; k < sizeof mcases / sizeof mcases[0]; k++) {
        const mcase *m = &mcases[k];
        if (m->limits) continue;
        bb b = {0};
        m->build(&b);
        const char *path = tmp_path("malformed.gguf");
        write_file(path, &b);
        uint64_t np = 0;
        tbx_open_options o;
        tbx_open_options_init(&o);
        o.format = TBX_FORMAT_GGUF;
        tbx_status st = tbx_validate_path(path, &o, NULL, NULL, &np);
        CHECK(st != TBX_OK);
        CHECK(np >= 1);
        bb_free(&b);
    }
}

int main(void) {
    int rc = tbx_test_main();
    if (g_tmpdir[0]) {
        const char *names[] = {"meta.gguf", "tensors.gguf", "align.gguf", "refuse.gguf",
                               "empty.gguf", "pad.gguf", "malformed.gguf"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tmp_path(names[i]));
        rmdir(g_tmpdir);
    }
    return rc;
}
