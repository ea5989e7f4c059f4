/*
 * test_mcf.c - the MCF driver: a round trip through the writer (every plain dtype, the q/k and
 * int families, sections, ModelInfo metadata), deduplication of identical payloads, decoding of
 * the q/k families in any element range (rows longer than the decoder's chunk, ranges starting
 * mid-row) against the scalar reference applied to the stored bytes, and a malformed-file table
 * (truncation at every offset, header and index fields, QuantInfo, overflow) with the exact
 * (code, field, offset) each must produce, derived from the layout (src/formats/mcf/mcf.c).
 * mantle's own files are checked in tests/python/test_mcf_interop.py.
 */
#include "tbx_test.h"
#include "api.h"
#include "mcfq.h"

#include <math.h>

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }

typedef struct tdesc {
    const char *name;
    tbx_dtype dt;
    uint32_t ndim;
    uint64_t shape[3];
} tdesc;

/* Payload bytes of a tensor: random, with q/k scales set to normal f16 values (so decoding
 * gives finite numbers) and the int scale an f32 0.25. */
static uint8_t *make_payload(const tdesc *d, uint64_t *n) {
    tbx_dtype_nbytes_shape(d->dt, d->shape, d->ndim, n);
    uint8_t *p = malloc(*n ? *n : 1);
    for (uint64_t i = 0; i < *n; i++) p[i] = (uint8_t)rnd();
    if (d->dt >= TBX_DT_MCF_Q8 && d->dt <= TBX_DT_MCF_K2) {
        tbx_mcfq_layout L;
        tbx_mcfq_layout_get((tbx_mcfq_kind)(d->dt - TBX_DT_MCF_Q8), d->shape[0], d->shape[1], &L);
        memset(p, 0, L.codes_off);
        for (uint64_t i = 0; i < L.scales_size / 2; i++)
            tbx_st16(p + 2 * i, (uint16_t)(0x2C00 + rnd() % 0x800));
        for (uint64_t i = 0; i < L.sub_size; i++) p[L.sub_off + i] = (uint8_t)(1 + rnd() % 63);
    } else if (d->dt == TBX_DT_MCF_INT8 || d->dt == TBX_DT_MCF_INT4) {
        memset(p, 0, 64);
        float s = 0.25f;
        memcpy(p, &s, 4);
    }
    return p;
}

static const tdesc g_tensors[] = {
    {"b.f32", TBX_DT_F32, 2, {3, 5}},       {"a.f16", TBX_DT_F16, 1, {7}},
    {"c.bf16", TBX_DT_BF16, 1, {4}},        {"d.f64", TBX_DT_F64, 0, {0}},
    {"e.i8", TBX_DT_I8, 1, {9}},            {"f.u64", TBX_DT_U64, 2, {2, 2}},
    {"g.i16", TBX_DT_I16, 1, {3}},          {"h.zero", TBX_DT_I32, 2, {0, 4}},
    {"q.q8", TBX_DT_MCF_Q8, 2, {3, 40}},    {"q.q4", TBX_DT_MCF_Q4, 2, {2, 300}},
    {"q.k6", TBX_DT_MCF_K6, 2, {2, 600}},   {"q.k4", TBX_DT_MCF_K4, 2, {1, 257}},
    {"q.k3", TBX_DT_MCF_K3, 2, {4, 33}},    {"q.k2", TBX_DT_MCF_K2, 2, {2, 2049}},
    {"r.int8", TBX_DT_MCF_INT8, 2, {2, 3}}, {"r.int4", TBX_DT_MCF_INT4, 1, {7}},
};
#define NT (sizeof g_tensors / sizeof g_tensors[0])
#define NPLAIN 8 /* the plain dtypes come first */

static const char *write_sample(char *path, size_t cap, bool dup) {
    tbx_test_tmppath(path, cap, "tbx_mcf_%d_%d.mcf", (int)getpid(), dup);
    unlink(path);
    tbx_writer *w = NULL;
    tbx_error err;
    tbx_write_options opt;
    tbx_write_options_init(&opt);
    opt.format = TBX_FORMAT_MCF;
    if (tbx_writer_open(&w, path, &opt, &err) != TBX_OK) return NULL;
    tbx_value *v = tbx_value_new_uint(TBX_V_U32, 3);
    tbx_writer_add_meta(w, "mcf.arch", 8, v, &err);
    tbx_value_free(v);
    v = tbx_value_new_string("tiny", 4);
    tbx_writer_add_meta(w, "mcf.model_name", 14, v, &err);
    tbx_value_free(v);
    v = tbx_value_new_float(TBX_V_F32, 0.5);
    tbx_writer_add_meta(w, "x.ratio", 7, v, &err);
    tbx_value_free(v);
    tbx_writer_add_section(w, "config.json", 0, "{\"a\":1}", 7, &err);
    tbx_writer_add_section(w, "merges.txt", 0, "a b\n", 4, &err);
    /* with the copy: plain tensors only (files with quantized tensors are laid out as mantle's
     * quantize writes them, without deduplication) */
    const size_t nt = dup ? NPLAIN : NT;
    uint64_t idx[NT + 1];
    for (size_t i = 0; i < nt + (dup ? 1 : 0); i++) {
        const tdesc *g = i < nt ? &g_tensors[i] : &g_tensors[0];
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = i < nt ? g->name : "z.copy"; /* a copy of b.f32 under a later name */
        d.dtype = g->dt;
        d.ndim = g->ndim;
        d.shape = g->shape;
        d.has_data = 1;
        if (tbx_writer_add_tensor(w, &d, &idx[i], &err) != TBX_OK) {
            fprintf(stderr, "add %s: %s\n", d.name, err.message);
            tbx_writer_abort(w);
            return NULL;
        }
    }
    rs = 12345;
    for (size_t i = 0; i < nt + (dup ? 1 : 0); i++) {
        uint64_t n;
        if (i == nt) rs = 12345; /* the same bytes as b.f32 */
        uint8_t *p = make_payload(i < nt ? &g_tensors[i] : &g_tensors[0], &n);
        tbx_writer_write_tensor(w, idx[i], p, (size_t)n, &err);
        free(p);
    }
    if (tbx_writer_finish(w, &err) != TBX_OK) {
        fprintf(stderr, "finish: %s\n", err.message);
        return NULL;
    }
    return path;
}

TBX_TEST(round_trip_every_dtype) {
    char path[512];
    CHECK(write_sample(path, sizeof path, false) != NULL);
    tbx_file *f = NULL;
    tbx_error err;
    CHECK_OK(tbx_open_path(&f, path, NULL, &err));
    if (!f) return;
    CHECK_EQ(tbx_file_format(f), TBX_FORMAT_MCF);
    CHECK_EQ(tbx_tensor_count(f), NT);
    /* tensors come back in name order, with their bytes */
    rs = 12345;
    for (size_t i = 0; i < NT; i++) {
        uint64_t idx, n;
        CHECK_OK(tbx_tensor_find(f, g_tensors[i].name, &idx));
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, idx, &ti));
        CHECK_EQ(ti.dtype, g_tensors[i].dt);
        CHECK_EQ(ti.ndim, g_tensors[i].ndim);
        uint8_t *p = make_payload(&g_tensors[i], &n);
        CHECK_EQ(ti.nbytes, n);
        CHECK_EQ(ti.offset % 64, 0);
        uint8_t *got = malloc(n ? n : 1);
        size_t need;
        CHECK_OK(tbx_tensor_read(f, idx, got, (size_t)n, &need, &err));
        CHECK(n == 0 || memcmp(got, p, (size_t)n) == 0);
        if (g_tensors[i].dt >= TBX_DT_MCF_INT8) {
            tbx_quant_info q = {.struct_size = sizeof q};
            CHECK_OK(tbx_tensor_quant_get(f, idx, &q));
            CHECK_EQ(q.domain, TBX_QDOMAIN_WEIGHTS); /* the writer's records */
            CHECK_EQ(q.has_clip, 1);
            CHECK_EQ(q.super_block_size, g_tensors[i].dt >= TBX_DT_MCF_K6 &&
                                         g_tensors[i].dt <= TBX_DT_MCF_K2 ? 256 : 0);
        }
        if (g_tensors[i].dt == TBX_DT_MCF_INT4) { /* signed nibbles, low first, times 0.25 */
            float o[7];
            CHECK_OK(tbx_tensor_read_f32(f, idx, 0, 7, o, &err));
            for (int k = 0; k < 7; k++) {
                int nib = (p[64 + k / 2] >> (4 * (k & 1))) & 15;
                CHECK(o[k] == (float)(nib >= 8 ? nib - 16 : nib) * 0.25f);
            }
        }
        free(p);
        free(got);
    }
    const tbx_value *v = tbx_meta_find(f, "mcf.arch");
    uint64_t u = 0;
    CHECK(v && tbx_value_get_u64(v, &u) == TBX_OK && u == 3);
    v = tbx_meta_find(f, "x.ratio");
    double d = 0;
    CHECK(v && tbx_value_get_f64(v, &d) == TBX_OK && d == 0.5);
    CHECK_EQ(tbx_section_count(f), 2);
    tbx_close(f);
    /* deterministic: the same input gives the same bytes */
    char path2[512];
    size_t n1, n2;
    uint8_t *a = tbx_test_slurp(path, &n1);
    tbx_test_tmppath(path2, sizeof path2, "tbx_mcf_%d_again.mcf", (int)getpid());
    rename(path, path2);
    CHECK(write_sample(path, sizeof path, false) != NULL);
    uint8_t *b = tbx_test_slurp(path, &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    unlink(path);
    unlink(path2);
}

TBX_TEST(identical_payloads_stored_once) {
    char path[512];
    CHECK(write_sample(path, sizeof path, true) != NULL);
    tbx_file *f = NULL;
    tbx_error err;
    CHECK_OK(tbx_open_path(&f, path, NULL, &err));
    if (!f) return;
    uint64_t a, b;
    CHECK_OK(tbx_tensor_find(f, "b.f32", &a));
    CHECK_OK(tbx_tensor_find(f, "z.copy", &b));
    tbx_tensor_info ta = TBX_TENSOR_INFO_INIT, tb = TBX_TENSOR_INFO_INIT;
    tbx_tensor_info_get(f, a, &ta);
    tbx_tensor_info_get(f, b, &tb);
    CHECK_EQ(ta.offset, tb.offset);
    CHECK_EQ(tb.nbytes, 60);
    /* the copy was the last tensor written: TensorData ends at the previous payload's end,
     * 64-aligned (as pack, which truncates back to the aligned start of the duplicate) */
    uint64_t end = 0;
    for (uint64_t i = 0; i < tbx_tensor_count(f); i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(f, i, &ti);
        if (ti.offset + ti.nbytes > end) end = ti.offset + ti.nbytes;
    }
    float o[15];
    CHECK_OK(tbx_tensor_read_f32(f, b, 0, 15, o, &err));
    tbx_close(f);
    size_t n;
    uint8_t *bytes = tbx_test_slurp(path, &n);
    /* the TensorIndex follows TensorData directly (8-aligned): its dir entry says where */
    uint64_t dir = tbx_ld64(bytes + 16);
    uint32_t cnt = tbx_ld32(bytes + 12);
    uint64_t td_end = 0, ti_off = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        const uint8_t *e = bytes + dir + 24 * i;
        if (tbx_ld32(e) == 4) td_end = tbx_ld64(e + 8) + tbx_ld64(e + 16);
        if (tbx_ld32(e) == 3) ti_off = tbx_ld64(e + 8);
    }
    CHECK_EQ(td_end, (end + 63) / 64 * 64);
    CHECK_EQ(ti_off, td_end);
    free(bytes);
    unlink(path);
}

/* q/k decoding in ranges, against the reference decoder on the stored bytes. */
TBX_TEST(qk_ranges_match_reference) {
    static const tdesc big[] = {
        {"long", TBX_DT_MCF_K3, 2, {2, 300001}}, /* rows longer than the decode chunk */
        {"wide", TBX_DT_MCF_Q4, 2, {70, 4000}},  /* many rows per chunk */
    };
    for (size_t t = 0; t < 2; t++) {
        char path[512];
        tbx_test_tmppath(path, sizeof path, "tbx_mcf_big_%d.mcf", (int)getpid());
        unlink(path);
        tbx_writer *w = NULL;
        tbx_error err;
        tbx_write_options opt;
    tbx_write_options_init(&opt);
        opt.format = TBX_FORMAT_MCF;
        CHECK_OK(tbx_writer_open(&w, path, &opt, &err));
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = big[t].name;
        d.dtype = big[t].dt;
        d.ndim = 2;
        d.shape = big[t].shape;
        d.has_data = 1;
        uint64_t idx, n;
        CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &err));
        uint8_t *p = make_payload(&big[t], &n);
        CHECK_OK(tbx_writer_write_tensor(w, idx, p, (size_t)n, &err));
        CHECK_OK(tbx_writer_finish(w, &err));
        tbx_mcfq_layout L;
        tbx_mcfq_layout_get((tbx_mcfq_kind)(big[t].dt - TBX_DT_MCF_Q8), big[t].shape[0],
                            big[t].shape[1], &L);
        uint64_t ne = L.rows * L.cols;
        float *ref = malloc(ne * 4), *got = malloc(ne * 4);
        tbx_mcfq_dequant_rows_ref(&L, p, L.super ? p + L.sub_off : NULL, p + L.codes_off, L.rows,
                                  ref);
        for (int mmap = 0; mmap < 2; mmap++) {
            tbx_file *f = NULL;
            tbx_open_options oo;
    tbx_open_options_init(&oo);
            oo.flags = mmap ? TBX_OPEN_MMAP : 0;
            CHECK_OK(tbx_open_path(&f, path, &oo, &err));
            if (!f) break;
            CHECK_OK(tbx_tensor_read_f32(f, 0, 0, ne, got, &err));
            CHECK(memcmp(got, ref, ne * 4) == 0);
            for (int k = 0; k < 20; k++) {
                uint64_t a = rnd() % ne, c = 1 + rnd() % (ne - a);
                if (c > 600000) c = 600000;
                CHECK_OK(tbx_tensor_read_f32(f, 0, a, c, got, &err));
                CHECK(memcmp(got, ref + a, c * 4) == 0);
            }
            tbx_close(f);
        }
        free(ref);
        free(got);
        free(p);
        unlink(path);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Malformed files                                                                             */
/* ------------------------------------------------------------------------------------------ */
/* A small valid file built here byte by byte: header, TensorData (one q8 [1, 32] tensor
 * "w" of 128 bytes at 64 and an f32 [2] "b" at 192), TensorIndex, QuantInfo, directory. */
typedef struct mfile { uint8_t b[1024]; size_t n; size_t ti, qi, dir; } mfile;

static void build(mfile *m) {
    memset(m, 0, sizeof *m);
    /* TensorData [40, 200): w at 64 (scales 2 B, pad to 64, codes 32 B => 96), b at 192 (8) */
    uint8_t *td = m->b;
    tbx_st16(td + 64, 0x3C00);
    for (int i = 0; i < 32; i++) td[64 + 64 + i] = (uint8_t)(i - 16);
    float one = 1.0f, two = 2.0f;
    memcpy(td + 192, &one, 4);
    memcpy(td + 196, &two, 4);
    /* TensorIndex at 200: header 48, 2 entries (80), dims 3 x 8, strings "bw" */
    size_t ti = m->ti = 200;
    uint8_t *h = m->b + ti;
    tbx_st32(h, 1); tbx_st32(h + 4, 3); tbx_st32(h + 8, 2); tbx_st32(h + 12, 3);
    tbx_st64(h + 16, 48); tbx_st64(h + 24, 128); tbx_st64(h + 32, 152); tbx_st64(h + 40, 2);
    uint8_t *e = h + 48; /* "b": f32 [2] */
    tbx_st32(e, 0); tbx_st32(e + 4, 1); tbx_st32(e + 8, 1); tbx_st32(e + 12, 1); tbx_st32(e + 16, 0);
    tbx_st64(e + 24, 192); tbx_st64(e + 32, 8);
    e += 40; /* "w": q8 [1, 32] */
    tbx_st32(e, 1); tbx_st32(e + 4, 1); tbx_st32(e + 8, 0x20); tbx_st32(e + 12, 2); tbx_st32(e + 16, 1);
    tbx_st64(e + 24, 64); tbx_st64(e + 32, 96);
    tbx_st64(h + 128, 2); tbx_st64(h + 136, 1); tbx_st64(h + 144, 32);
    h[152] = 'b'; h[153] = 'w';
    /* QuantInfo at 160 + 200 = 360 (after 154 -> align 8 = 360) */
    size_t qi = m->qi = 360;
    tbx_st32(m->b + qi, 1); tbx_st32(m->b + qi + 4, 1);
    uint8_t *r = m->b + qi + 8;
    tbx_st32(r, 1); r[4] = 0x20; r[5] = 0; tbx_st16(r + 6, 32); tbx_st16(r + 8, 0);
    float lo = -16, hi = 16;
    memcpy(r + 16, &lo, 4); memcpy(r + 20, &hi, 4);
    /* directory at 392: QuantInfo, TensorIndex, TensorData */
    size_t dir = m->dir = 392;
    uint8_t *d = m->b + dir;
    tbx_st32(d, 2); tbx_st32(d + 4, 1); tbx_st64(d + 8, qi); tbx_st64(d + 16, 32);
    tbx_st32(d + 24, 3); tbx_st32(d + 28, 1); tbx_st64(d + 32, ti); tbx_st64(d + 40, 154);
    tbx_st32(d + 48, 4); tbx_st32(d + 52, 1); tbx_st64(d + 56, 40); tbx_st64(d + 64, 160);
    m->n = dir + 72;
    memcpy(m->b, "MCF\0", 4);
    tbx_st16(m->b + 4, 1); tbx_st16(m->b + 6, 1); tbx_st32(m->b + 8, 40); tbx_st32(m->b + 12, 3);
    tbx_st64(m->b + 16, dir); tbx_st64(m->b + 24, m->n); tbx_st64(m->b + 32, 1);
}

static tbx_status open_mem(const uint8_t *p, size_t n, tbx_error *err, tbx_file **out) {
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.format = TBX_FORMAT_MCF;
    tbx_file *f = NULL;
    tbx_status st = tbx_open_memory(&f, p, n, &oo, err);
    if (out) *out = f;
    else tbx_close(f);
    return st;
}

TBX_TEST(hand_built_file_reads) {
    mfile m;
    build(&m);
    tbx_file *f = NULL;
    tbx_error err;
    CHECK_OK(open_mem(m.b, m.n, &err, &f));
    if (!f) { fprintf(stderr, "%s\n", err.message); return; }
    float o[32];
    CHECK_OK(tbx_tensor_read_f32(f, 1, 0, 32, o, &err));
    for (int i = 0; i < 32; i++) CHECK(o[i] == (float)(i - 16));
    CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 2, o, &err));
    CHECK(o[0] == 1.0f && o[1] == 2.0f);
    tbx_close(f);
}

TBX_TEST(truncation_at_every_offset) {
    mfile m;
    build(&m);
    for (size_t n = 0; n < m.n; n++) {
        tbx_error err;
        memset(&err, 0, sizeof err);
        tbx_status st = open_mem(m.b, n, &err, NULL);
        if (n < 40) {
            CHECK_EQ(st, TBX_E_TRUNCATED);
        } else {
            /* the header is whole: file_size names the cut */
            CHECK_EQ(st, TBX_E_FORMAT);
            CHECK_STR(err.field, "header.file_size");
            CHECK_EQ(err.offset, 24);
        }
    }
}

typedef struct mcase {
    const char *name;
    size_t at;        /* byte to patch (relative to a region given by `base`) */
    int base;         /* 0 file, 1 TensorIndex, 2 QuantInfo, 3 directory */
    int width;        /* 1, 2, 4, 8 */
    uint64_t value;
    tbx_status code;
    const char *field;
    size_t off;       /* expected offset, same base */
} mcase;

static const mcase g_cases[] = {
    {"section_count 0", 12, 0, 4, 0, TBX_E_FORMAT, "header.section_count", 12},
    {"section_count huge", 12, 0, 4, 0xFFFFFFFF, TBX_E_RANGE, "header.section_dir_offset", 16},
    {"header_size 8", 8, 0, 4, 8, TBX_E_FORMAT, "header.header_size", 8},
    {"major 0", 4, 0, 2, 0, TBX_E_BAD_VERSION, "header.major", 4},
    {"dir in header", 16, 0, 8, 8, TBX_E_RANGE, "header.section_dir_offset", 16},
    {"section unaligned", 8, 3, 8, 364, TBX_E_RANGE, "section.offset", 8},
    {"section past EOF", 16, 3, 8, 1000, TBX_E_RANGE, "section.size", 16},
    {"section offset huge", 8, 3, 8, UINT64_MAX - 7, TBX_E_RANGE, "section.offset", 8},
    {"count 0", 8, 1, 4, 0, TBX_E_FORMAT, "tensor_index.tensor_count", 8},
    {"dims_count huge", 12, 1, 4, 0xFFFFFFFF, TBX_E_RANGE, "tensor_index.dims_off", 24},
    {"strings wrap", 40, 1, 8, UINT64_MAX - 100, TBX_E_RANGE, "tensor_index.strings_size", 40},
    {"name outside strings", 48 + 0, 1, 4, 2, TBX_E_RANGE, "tensor.name_off", 48},
    {"unsorted", 48 + 40, 1, 4, 0, TBX_E_DUPLICATE, "tensor.name", 88},
    {"dtype 7777", 48 + 8, 1, 4, 7777, TBX_E_FORMAT, "tensor.dtype", 56},
    {"rank past dims", 48 + 12, 1, 4, 4, TBX_E_RANGE, "tensor.dim_off", 64},
    {"dim overflow", 128, 1, 8, UINT64_MAX / 2, TBX_E_OVERFLOW, "tensor.dims", 128},
    {"size mismatch", 48 + 32, 1, 8, 12, TBX_E_FORMAT, "tensor.data_size", 80},
    {"data outside TensorData", 48 + 24, 1, 8, 8, TBX_E_RANGE, "tensor.data_off", 72},
    {"q8 payload unaligned", 88 + 24, 1, 8, 72, TBX_E_RANGE, "tensor.data_off", 112},
    {"record past the index", 8, 2, 4, 2, TBX_E_RANGE, "quant.tensor_index", 8},
    {"record for a plain tensor", 8, 2, 4, 0, TBX_E_FORMAT, "quant.tensor_index", 8},
    {"record method k4", 12, 2, 1, 0x31, TBX_E_FORMAT, "quant.super_size", 16},
    {"record domain 1", 13, 2, 1, 1, TBX_E_FORMAT, "quant.domain", 13},
    {"record count huge", 4, 2, 4, 1000, TBX_E_RANGE, "quant_info.record_count", 4},
};

TBX_TEST(malformed_table) {
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) {
        const mcase *c = &g_cases[i];
        mfile m;
        build(&m);
        size_t base = c->base == 1 ? m.ti : c->base == 2 ? m.qi : c->base == 3 ? m.dir : 0;
        uint8_t *p = m.b + base + c->at;
        if (c->width == 1) *p = (uint8_t)c->value;
        else if (c->width == 2) tbx_st16(p, (uint16_t)c->value);
        else if (c->width == 4) tbx_st32(p, (uint32_t)c->value);
        else tbx_st64(p, c->value);
        tbx_error err;
        memset(&err, 0, sizeof err);
        tbx_status st = open_mem(m.b, m.n, &err, NULL);
        if (st != c->code || strcmp(err.field, c->field) != 0 || err.offset != base + c->off)
            fprintf(stderr, "case \"%s\": got %s %s @%llu (%s)\n", c->name, tbx_status_name(st),
                    err.field, (unsigned long long)err.offset, err.message);
        CHECK_EQ(st, c->code);
        CHECK_STR(err.field, c->field);
        CHECK_EQ(err.offset, base + c->off);
    }
}

/* TensorData's padding (mantle's writer leaves it zero): a non-zero byte before, between or
 * after the payloads, or between the regions of a quantized payload, is one recoverable
 * TBX_E_PADDING of validate naming the byte; the file still opens and reads. The hand-built
 * file: TensorData [40, 200), "w" q8 at 64 (scales [64, 66), codes [128, 160)), "b" at 192. */
typedef struct pad_seen { int n; tbx_status code; char field[64]; uint64_t offset; } pad_seen;

static void pad_problem(void *ud, const tbx_error *e) {
    pad_seen *p = ud;
    if (p->n++ == 0) {
        p->code = e->code;
        snprintf(p->field, sizeof p->field, "%s", e->field);
        p->offset = e->offset;
    }
}

static pad_seen validate_mem(const uint8_t *b, size_t n) {
    pad_seen seen;
    memset(&seen, 0, sizeof seen);
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.format = TBX_FORMAT_MCF;
    oo.on_problem = pad_problem;
    oo.problem_ud = &seen;
    tbx_file *f = NULL;
    tbx_error err;
    if (tbx_open_memory(&f, b, n, &oo, &err) != TBX_OK) {
        seen.n = -1;
        return seen;
    }
    uint64_t np = 0;
    (void)tbx_validate(f, pad_problem, &seen, &np);
    float o[32];
    if (tbx_tensor_read_f32(f, 1, 0, 32, o, &err) != TBX_OK) seen.n = -2;
    tbx_close(f);
    return seen;
}

TBX_TEST(tensor_data_padding_reported) {
    mfile m;
    build(&m);
    pad_seen clean = validate_mem(m.b, m.n);
    CHECK_EQ(clean.n, 0);
    static const struct { size_t at; const char *field; } P[] = {
        {40, "tensor_data.padding"},  {63, "tensor_data.padding"}, /* before the first payload */
        {66, "tensor.padding"},       {127, "tensor.padding"},     /* between scales and codes */
        {160, "tensor_data.padding"}, {191, "tensor_data.padding"}, /* between the payloads */
    };
    for (size_t k = 0; k < sizeof P / sizeof P[0]; k++) {
        build(&m);
        m.b[P[k].at] = 0x5A;
        pad_seen s = validate_mem(m.b, m.n);
        if (s.n != 1 || strcmp(s.field, P[k].field) != 0 || s.offset != P[k].at)
            fprintf(stderr, "padding at %zu: %d problems, %s @%llu\n", P[k].at, s.n, s.field,
                    (unsigned long long)s.offset);
        CHECK_EQ(s.n, 1);
        CHECK_EQ(s.code, TBX_E_PADDING);
        CHECK_STR(s.field, P[k].field);
        CHECK_EQ(s.offset, P[k].at);
    }
    /* the payload bytes themselves are not padding */
    build(&m);
    m.b[64] = 0x01; /* the scale's low byte: another scale */
    CHECK_EQ(validate_mem(m.b, m.n).n, 0);
    build(&m);
    m.b[159] = 0x11; /* the last code */
    CHECK_EQ(validate_mem(m.b, m.n).n, 0);
}

TBX_TEST(nan_scale_accepted_and_decoded_as_mantle) {
    mfile m;
    build(&m);
    tbx_st16(m.b + 64, 0x7E00); /* NaN scale */
    tbx_file *f = NULL;
    tbx_error err;
    CHECK_OK(open_mem(m.b, m.n, &err, &f));
    float o[32];
    CHECK_OK(tbx_tensor_read_f32(f, 1, 0, 32, o, &err));
    CHECK(isnan(o[0]) && isnan(o[31]));
    tbx_close(f);
    tbx_st16(m.b + 64, 0x0001); /* subnormal: flushed, zeros */
    CHECK_OK(open_mem(m.b, m.n, &err, &f));
    CHECK_OK(tbx_tensor_read_f32(f, 1, 0, 32, o, &err));
    CHECK(o[0] == 0.0f && !signbit(o[0]));
    tbx_close(f);
}

/* pack --quant-embed's bare codes: "w" becomes int8 [1, 32] whose 32 codes (at 128) are its
 * whole payload, without the 64-byte scale region (the record says int8). The file opens, the
 * tensor is listed and flagged; every read of it fails with TBX_E_FORMAT at its entry's
 * data_size; validate reports it once; the other tensor reads; converting refuses it unless
 * told to leave it out. */
static void make_bare(mfile *m) {
    build(m);
    uint8_t *e = m->b + m->ti + 48 + 40;
    tbx_st32(e + 8, 0x10);
    tbx_st64(e + 24, 128);
    tbx_st64(e + 32, 32);
    uint8_t *r = m->b + m->qi + 8;
    r[4] = 0x10;
    tbx_st16(r + 6, 0);
    memset(m->b + 64, 0, 2); /* no scale anywhere: the old q8 scale goes */
}

/* validate_mem without its read of tensor 1 (which fails for a bare tensor) */
static pad_seen validate_only(const uint8_t *b, size_t n) {
    pad_seen seen;
    memset(&seen, 0, sizeof seen);
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.format = TBX_FORMAT_MCF;
    oo.on_problem = pad_problem;
    oo.problem_ud = &seen;
    tbx_file *f = NULL;
    tbx_error err;
    if (tbx_open_memory(&f, b, n, &oo, &err) != TBX_OK) {
        seen.n = -1;
        return seen;
    }
    uint64_t np = 0;
    (void)tbx_validate(f, pad_problem, &seen, &np);
    tbx_close(f);
    return seen;
}

static void bare_fails(tbx_status st, const tbx_error *err, const mfile *m) {
    CHECK_EQ(st, TBX_E_FORMAT);
    CHECK_STR(err->field, "tensor.data_size");
    CHECK_EQ(err->offset, m->ti + 48 + 40 + 32);
    CHECK(strstr(err->message, "tensor \"w\"") != NULL);
    CHECK(strstr(err->message, "without the f32 scale") != NULL);
}

TBX_TEST(bare_int_codes_listed_not_readable) {
    mfile m;
    make_bare(&m);
    tbx_file *f = NULL;
    tbx_error err;
    CHECK_OK(open_mem(m.b, m.n, &err, &f));
    if (!f) { fprintf(stderr, "%s\n", err.message); return; }
    CHECK_EQ(tbx_tensor_count(f), 2);
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(f, 1, &ti));
    CHECK_EQ(ti.dtype, TBX_DT_MCF_INT8);
    CHECK_EQ(ti.nbytes, 32);
    CHECK_EQ(ti.flags, TBX_TENSOR_UNREADABLE);
    CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
    CHECK_EQ(ti.flags, 0);
    float o[32];
    CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 2, o, &err));
    CHECK(o[0] == 1.0f && o[1] == 2.0f);
    uint8_t buf[64];
    const void *p = NULL;
    size_t len = 0;
    bare_fails(tbx_tensor_read_f32(f, 1, 0, 32, o, &err), &err, &m);
    bare_fails(tbx_tensor_read_f32(f, 1, 0, 0, o, &err), &err, &m);
    bare_fails(tbx_tensor_read(f, 1, buf, sizeof buf, NULL, &err), &err, &m);
    bare_fails(tbx_tensor_read_range(f, 1, 4, buf, 8, &err), &err, &m);
    bare_fails(tbx_tensor_map(f, 1, &p, &len, &err), &err, &m);
    CHECK(p == NULL);
    tbx_read_req rq[2];
    memset(rq, 0, sizeof rq);
    rq[0].tensor = 0; rq[0].buf = buf; rq[0].cap = sizeof buf;
    rq[1].tensor = 1; rq[1].buf = buf + 8; rq[1].cap = sizeof buf - 8;
    (void)tbx_read_batch(f, rq, 2, 1, &err);
    CHECK_EQ(rq[0].status, TBX_OK);
    bare_fails(rq[1].status, &rq[1].error, &m);
    tbx_close(f);
    /* validate: that one problem */
    pad_seen s = validate_only(m.b, m.n);
    CHECK_EQ(s.n, 1);
    CHECK_EQ(s.code, TBX_E_FORMAT);
    CHECK_STR(s.field, "tensor.data_size");
    CHECK_EQ(s.offset, m.ti + 48 + 40 + 32);
    /* any other size mismatch is still a refusal of the file */
    tbx_st64(m.b + m.ti + 48 + 40 + 32, 33);
    memset(&err, 0, sizeof err);
    CHECK_EQ(open_mem(m.b, m.n, &err, NULL), TBX_E_FORMAT);
    CHECK_STR(err.field, "tensor.data_size");
}

TBX_TEST(bare_int_codes_convert_refused_or_left_out) {
    mfile m;
    make_bare(&m);
    tbx_file *f = NULL;
    tbx_error err;
    CHECK_OK(open_mem(m.b, m.n, &err, &f));
    if (!f) return;
    char out[512];
    tbx_test_tmppath(out, sizeof out, "tbx_mcf_bare_%d.mcf", (int)getpid());
    unlink(out);
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.flags |= TBX_WRITE_NO_SYNC;
    bare_fails(tbx_convert(f, out, &co, &err), &err, &m);
    CHECK(strstr(err.message, "--drop-unreadable") != NULL);
    CHECK(access(out, F_OK) != 0);
    co.flags |= TBX_CONVERT_DROP_UNREADABLE;
    CHECK_OK(tbx_convert(f, out, &co, &err));
    tbx_close(f);
    f = NULL;
    CHECK_OK(tbx_open_path(&f, out, NULL, &err));
    if (f) {
        CHECK_EQ(tbx_tensor_count(f), 1);
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
        CHECK_STR(ti.name, "b");
        float o[2];
        CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 2, o, &err));
        CHECK(o[0] == 1.0f && o[1] == 2.0f);
        uint64_t np = 9;
        CHECK_OK(tbx_validate(f, NULL, NULL, &np));
        CHECK_EQ(np, 0);
        tbx_close(f);
    }
    /* several tensors left out, the writer's indexes shifted: a second file, to safetensors */
    unlink(out);
    tbx_test_tmppath(out, sizeof out, "tbx_mcf_bare_%d.safetensors", (int)getpid());
    unlink(out);
    CHECK_OK(open_mem(m.b, m.n, &err, &f));
    if (f) CHECK_OK(tbx_convert(f, out, &co, &err));
    tbx_close(f);
    f = NULL;
    CHECK_OK(tbx_open_path(&f, out, NULL, &err));
    if (f) {
        CHECK_EQ(tbx_tensor_count(f), 1);
        float o[2];
        CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 2, o, &err));
        CHECK(o[0] == 1.0f && o[1] == 2.0f);
        tbx_close(f);
    }
    unlink(out);
}

/* A payload starting inside another one (not the same span): mantle reads it; tensorbox opens
 * and reads it, and validate reports it once, at its entry's data_off. "b" (f32 [2]) is moved
 * onto the codes of "w" [128, 160); its own old bytes are zeroed (no padding report). */
TBX_TEST(partial_alias_reported) {
    mfile m;
    build(&m);
    memset(m.b + 192, 0, 8);
    tbx_st64(m.b + m.ti + 48 + 24, 136);
    tbx_file *f = NULL;
    tbx_error err;
    CHECK_OK(open_mem(m.b, m.n, &err, &f));
    if (!f) return;
    float o[2], want[2];
    memcpy(want, m.b + 136, 8);
    CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 2, o, &err));
    CHECK(memcmp(o, want, 8) == 0);
    tbx_close(f);
    pad_seen s = validate_mem(m.b, m.n);
    CHECK_EQ(s.n, 1);
    CHECK_EQ(s.code, TBX_E_RANGE);
    CHECK_STR(s.field, "tensor.data_off");
    CHECK_EQ(s.offset, m.ti + 48 + 24);
}

TBX_TEST_MAIN()
