/*
 * test_oinf.c - unit tests of the OINF driver (src/formats/oinf/oinf.c, oinf_write.c).
 *
 * Files are built here byte by byte from the layout in docs/formats/oinf.md (an independent
 * builder, `build()`, that lays files out the way the reference encoder does), then:
 * - opened: every metadata type, every dtype, scalars, tensors without data, size variables,
 *   v2 quantization parameters (accessor and "<tensor>.quant.*" metadata);
 * - compared with what the writer produces for the same content (byte identity, v1 and v2),
 *   including conversions v2 -> v2, v2 -> v1 -> v2;
 * - round trips through the writer of every metadata type and dtype; an exhaustive round trip
 *   of every packed dtype over all its values, odd counts and scalars;
 * - corrupted: truncation at every offset, header offsets decreasing / unaligned / out of bounds,
 *   wrong nbytes per payload kind, bad charset, duplicates, bad type tags, bad quant payloads,
 *   each rejected with the expected status and field; recoverable problems (flags, padding,
 *   bool bytes, t2 codes) reported by tbx_validate_path;
 * - writer refusals (lossy metadata, dtypes, charset, versions).
 */
#define _POSIX_C_SOURCE 200809L
#include "tbx_test.h"
#include "tbx_test_dir.h"

#include "tensorbox.h"
#include "oinf.h"

#undef TBX_TEST
#define TBX_TEST(test_)                                                                   \
    static void test_(void);                                                              \
    __attribute__((constructor)) static void test_##_register(void) {                     \
        if (tbx_ntests_ < 512) { tbx_tests_[tbx_ntests_].name = #test_;                   \
                                 tbx_tests_[tbx_ntests_++].fn = test_; }                  \
    }                                                                                     \
    static void test_(void)

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Byte buffers                                                                                */
/* ------------------------------------------------------------------------------------------ */
typedef struct ob {
    uint8_t *p;
    size_t n, cap;
} ob;

static void ob_put(ob *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) { fprintf(stderr, "out of memory\n"); exit(2); }
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i); }
static void ob_u32(ob *b, uint32_t v) { uint8_t t[4]; put32(t, v); ob_put(b, t, 4); }
static void ob_u64(ob *b, uint64_t v) { uint8_t t[8]; put64(t, v); ob_put(b, t, 8); }
static void ob_zero(ob *b, size_t n) { static const uint8_t z[64]; while (n) { size_t k = n < 64 ? n : 64; ob_put(b, z, k); n -= k; } }
static size_t al8(size_t x) { return (x + 7) / 8 * 8; }
static void ob_pad8(ob *b) { ob_zero(b, al8(b->n) - b->n); }
static void ob_str(ob *b, const char *s) {
    ob_u32(b, (uint32_t)strlen(s));
    ob_put(b, s, strlen(s));
    ob_zero(b, al8(4 + strlen(s)) - 4 - strlen(s));
}

/* ------------------------------------------------------------------------------------------ */
/* The independent file builder                                                                */
/* ------------------------------------------------------------------------------------------ */
typedef struct tsv { const char *name; uint64_t value; } tsv;
typedef struct tmd { const char *key; uint32_t type; ob payload; } tmd;
typedef struct tten {
    const char *name;
    uint32_t dtype, ndim, flags;
    uint64_t dims[4];
    ob data;   /* stored bytes (HAS_DATA) */
    ob quant;  /* quant payload (HAS_QUANT, v2) */
} tten;
typedef struct tfile {
    uint32_t version;
    size_t lead_gap; /* zero bytes between the header and the size variables (a multiple of 8) */
    tsv sv[8];
    size_t nsv;
    tmd md[24];
    size_t nmd;
    tten tn[24];
    size_t ntn;
} tfile;

/* Where things ended up in a built file. */
typedef struct tpos {
    size_t sv[8], md[24], tn[24];           /* start of each table entry */
    size_t md_type[24], tn_dtype[24];       /* the u32 after the name */
    size_t md_payload[24], tn_data[24], tn_quant[24];
    size_t off_sv, off_md, off_tn, off_data, size;
} tpos;

static size_t str_size(const char *s) { return al8(4 + strlen(s)); }

static ob build(const tfile *t, tpos *pos) {
    tpos P;
    memset(&P, 0, sizeof P);
    size_t svs = 0, mds = 0, tns = 0;
    for (size_t i = 0; i < t->nsv; i++) svs += str_size(t->sv[i].name) + 8;
    for (size_t i = 0; i < t->nmd; i++) mds += str_size(t->md[i].key) + 24;
    for (size_t i = 0; i < t->ntn; i++)
        tns += str_size(t->tn[i].name) + 12 + 8 * t->tn[i].ndim + 16 + (t->version >= 2 ? 16 : 0);
    P.off_sv = 72 + t->lead_gap;
    P.off_md = al8(P.off_sv + svs);
    P.off_tn = al8(P.off_md + mds);
    P.off_data = al8(P.off_tn + tns);
    size_t cur = P.off_data;
    for (size_t i = 0; i < t->nmd; i++) { P.md_payload[i] = cur; cur += al8(t->md[i].payload.n); }
    for (size_t i = 0; i < t->ntn; i++) {
        if (t->tn[i].flags & 1) { P.tn_data[i] = cur; cur += al8(t->tn[i].data.n); }
        if (t->tn[i].flags & 2) { P.tn_quant[i] = cur; cur += al8(t->tn[i].quant.n); }
    }
    P.size = cur;
    ob b = {0};
    ob_put(&b, "OINF", 5);
    ob_u32(&b, t->version);
    ob_u32(&b, 0);
    ob_u32(&b, (uint32_t)t->nsv);
    ob_u32(&b, (uint32_t)t->nmd);
    ob_u32(&b, (uint32_t)t->ntn);
    ob_u32(&b, 0);
    ob_u64(&b, P.off_sv);
    ob_u64(&b, P.off_md);
    ob_u64(&b, P.off_tn);
    ob_u64(&b, P.off_data);
    ob_u64(&b, P.size);
    ob_pad8(&b);
    ob_zero(&b, t->lead_gap);
    for (size_t i = 0; i < t->nsv; i++) {
        P.sv[i] = b.n;
        ob_str(&b, t->sv[i].name);
        ob_u64(&b, t->sv[i].value);
    }
    ob_pad8(&b);
    for (size_t i = 0; i < t->nmd; i++) {
        P.md[i] = b.n;
        ob_str(&b, t->md[i].key);
        P.md_type[i] = b.n;
        ob_u32(&b, t->md[i].type);
        ob_u32(&b, 0);
        ob_u64(&b, t->md[i].payload.n);
        ob_u64(&b, P.md_payload[i]);
    }
    ob_pad8(&b);
    for (size_t i = 0; i < t->ntn; i++) {
        const tten *e = &t->tn[i];
        P.tn[i] = b.n;
        ob_str(&b, e->name);
        P.tn_dtype[i] = b.n;
        ob_u32(&b, e->dtype);
        ob_u32(&b, e->ndim);
        ob_u32(&b, e->flags);
        for (uint32_t d = 0; d < e->ndim; d++) ob_u64(&b, e->dims[d]);
        ob_u64(&b, (e->flags & 1) ? e->data.n : 0);
        ob_u64(&b, (e->flags & 1) ? P.tn_data[i] : 0);
        if (t->version >= 2) {
            ob_u64(&b, (e->flags & 2) ? e->quant.n : 0);
            ob_u64(&b, (e->flags & 2) ? P.tn_quant[i] : 0);
        }
    }
    ob_pad8(&b);
    for (size_t i = 0; i < t->nmd; i++) { ob_put(&b, t->md[i].payload.p, t->md[i].payload.n); ob_pad8(&b); }
    for (size_t i = 0; i < t->ntn; i++) {
        if (t->tn[i].flags & 1) { ob_put(&b, t->tn[i].data.p, t->tn[i].data.n); ob_pad8(&b); }
        if (t->tn[i].flags & 2) { ob_put(&b, t->tn[i].quant.p, t->tn[i].quant.n); ob_pad8(&b); }
    }
    if (b.n != P.size) { fprintf(stderr, "builder: size mismatch\n"); exit(2); }
    if (pos) *pos = P;
    return b;
}

static void tfile_free(tfile *t) {
    for (size_t i = 0; i < t->nmd; i++) free(t->md[i].payload.p);
    for (size_t i = 0; i < t->ntn; i++) { free(t->tn[i].data.p); free(t->tn[i].quant.p); }
    memset(t, 0, sizeof *t);
}

/* payload makers */
static ob pl_bytes(const void *p, size_t n) { ob b = {0}; ob_put(&b, p, n); return b; }
static ob pl_u32(uint32_t v) { ob b = {0}; ob_u32(&b, v); return b; }
static ob pl_f32(float f) { uint32_t u; memcpy(&u, &f, 4); return pl_u32(u); }
static ob pl_str(const char *s) { ob b = {0}; ob_str(&b, s); return b; }
static ob pl_bitset(const uint8_t *bits, uint32_t nbits) {
    ob b = {0};
    uint32_t nb = (nbits + 7) / 8;
    ob_u32(&b, nbits);
    ob_u32(&b, nb);
    ob_put(&b, bits, nb);
    ob_pad8(&b);
    return b;
}
static ob pl_nd(uint32_t et, uint32_t ndim, const uint64_t *dims, const void *data, size_t dlen) {
    ob b = {0};
    ob_u32(&b, et);
    ob_u32(&b, ndim);
    for (uint32_t d = 0; d < ndim; d++) ob_u64(&b, dims[d]);
    ob_put(&b, data, dlen);
    ob_pad8(&b);
    return b;
}
static ob pl_quant(uint32_t scheme, uint32_t smode, uint32_t zmode, uint64_t saxis, uint64_t scount,
                   uint64_t zaxis, uint64_t zcount, const float *scales, const int32_t *zps) {
    ob b = {0};
    ob_u32(&b, scheme);
    ob_u32(&b, smode);
    ob_u32(&b, zmode);
    ob_u32(&b, 0);
    ob_u64(&b, saxis);
    ob_u64(&b, scount);
    ob_u64(&b, zaxis);
    ob_u64(&b, zcount);
    for (uint64_t i = 0; i < scount; i++) { uint32_t u; memcpy(&u, &scales[i], 4); ob_u32(&b, u); }
    for (uint64_t i = 0; i < zcount; i++) ob_u32(&b, (uint32_t)zps[i]);
    ob_pad8(&b);
    return b;
}

static void add_sv(tfile *t, const char *n, uint64_t v) { t->sv[t->nsv++] = (tsv){n, v}; }
static void add_md(tfile *t, const char *k, uint32_t type, ob payload) {
    t->md[t->nmd++] = (tmd){k, type, payload};
}
static tten *add_tn(tfile *t, const char *name, uint32_t dtype, uint32_t ndim, const uint64_t *dims,
                    const void *data, size_t dlen, bool has_data) {
    tten *e = &t->tn[t->ntn++];
    memset(e, 0, sizeof *e);
    e->name = name;
    e->dtype = dtype;
    e->ndim = ndim;
    for (uint32_t d = 0; d < ndim; d++) e->dims[d] = dims[d];
    e->flags = has_data ? 1 : 0;
    if (has_data) e->data = pl_bytes(data, dlen);
    return e;
}

/* ------------------------------------------------------------------------------------------ */
/* The two sample files                                                                        */
/* ------------------------------------------------------------------------------------------ */
static const uint8_t BITS9[2] = {0x0D, 0x01};                  /* 1,0,1,1,0,0,0,0,1 */
static const int16_t ND_I16[6] = {0, 1, -2, 300, -32768, 32767};
static const float W4[4] = {1.0f, -2.0f, 0.5f, 3.25f};

/* v1: size variables, one metadata entry of many kinds, several tensor kinds. Entries sorted. */
static void sample_v1(tfile *t) {
    memset(t, 0, sizeof *t);
    t->version = 1;
    add_sv(t, "B", 4);
    add_sv(t, "D", 16);
    uint8_t one = 1, i4 = 0x0D; /* -3 in 4 bits */
    uint64_t nd_dims[2] = {2, 3};
    uint8_t nd[12];
    for (int i = 0; i < 6; i++) { nd[2 * i] = (uint8_t)ND_I16[i]; nd[2 * i + 1] = (uint8_t)((uint16_t)ND_I16[i] >> 8); }
    add_md(t, "alpha", 10, pl_f32(0.5f));
    add_md(t, "bits", 13, pl_bitset(BITS9, 9));
    add_md(t, "flag", 12, pl_bytes(&one, 1));
    add_md(t, "mode", 14, pl_str("clamp_up"));
    add_md(t, "nd", 15, pl_nd(2, 2, nd_dims, nd, 12));
    add_md(t, "q4", 18, pl_bytes(&i4, 1));
    uint64_t d3 = 3, d5 = 5, d44[2] = {4, 4}, d22[2] = {2, 2};
    const uint8_t bools[3] = {1, 0, 1};
    const uint8_t t2[2] = {0x71, 0x00}; /* 1, 0, -1, 1, 0 -> codes 01 00 11 01 | 00 */
    float x = 10.35f;
    add_tn(t, "b", 12, 1, &d3, bools, 3, true);
    add_tn(t, "t", 24, 1, &d5, t2, 2, true);
    add_tn(t, "u", 10, 2, d44, NULL, 0, false);
    add_tn(t, "w", 10, 2, d22, W4, 16, true);
    add_tn(t, "x", 10, 0, NULL, &x, 4, true);
}

static const int8_t QW[6] = {-3, 0, 5, 127, -128, 1};
static const float QW_SCALES[2] = {0.5f, 0.25f};
static const int32_t QW_ZPS[2] = {3, -7};
static const float QS_SCALE[1] = {0.125f};

/* v2: quantized tensors (per channel asymmetric, per tensor symmetric) and a plain one. */
static void sample_v2(tfile *t) {
    memset(t, 0, sizeof *t);
    t->version = 2;
    add_md(t, "name", 14, pl_str("qmodel"));
    uint64_t d23[2] = {2, 3}, d3 = 3, d22[2] = {2, 2};
    const uint8_t u4[2] = {0x21, 0x0F}; /* 1, 2, 15 */
    tten *e = add_tn(t, "qs", 21, 1, &d3, u4, 2, true);
    e->flags |= 2;
    e->quant = pl_quant(1, 1, 0, 0, 1, 0, 0, QS_SCALE, NULL);
    e = add_tn(t, "qw", 1, 2, d23, QW, 6, true);
    e->flags |= 2;
    e->quant = pl_quant(2, 2, 2, 0, 2, 0, 2, QW_SCALES, QW_ZPS);
    add_tn(t, "w", 10, 2, d22, W4, 16, true);
}

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */
/* ------------------------------------------------------------------------------------------ */
static void tmp_path(char *dst, size_t cap, const char *name) {
    tbx_test_dir_file(dst, cap, "tbx-oinf-test", name);
}
static void write_all(const char *path, const uint8_t *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(p, 1, n, fp) != n) { perror(path); exit(2); }
    fclose(fp);
}

static tbx_status open_mem(const uint8_t *p, size_t n, const tbx_limits *lim, tbx_file **out,
                           tbx_error *err) {
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    opt.format = TBX_FORMAT_OINF;
    opt.limits = lim;
    memset(err, 0, sizeof *err);
    *out = NULL;
    return tbx_open_memory(out, p, n, &opt, err);
}

/* Opens b, expects failure with `code`, a field containing `field` and a message containing
 * `needle` (NULL: any). */
static bool expect_fail(const char *what, const uint8_t *p, size_t n, tbx_status code,
                        const char *field, const char *needle) {
    tbx_file *f = NULL;
    tbx_error e;
    tbx_status st = open_mem(p, n, NULL, &f, &e);
    bool ok = st == code && f == NULL && e.code == code && e.message[0] != 0 &&
              (!field || strstr(e.field, field) != NULL) && (!needle || strstr(e.message, needle));
    if (!ok)
        fprintf(stderr, "  case %s: got %s (field \"%s\", message \"%s\"), expected %s/%s/%s\n",
                what, tbx_status_name(st), e.field, e.message, tbx_status_name(code),
                field ? field : "*", needle ? needle : "*");
    tbx_close(f);
    return ok;
}

typedef struct problems {
    int n;
    tbx_status codes[16];
    char fields[16][64];
    char msgs[16][320];
} problems;

static void collect(void *ud, const tbx_error *e) {
    problems *p = ud;
    if (p->n < 16) {
        p->codes[p->n] = e->code;
        snprintf(p->fields[p->n], 64, "%s", e->field);
        snprintf(p->msgs[p->n], 320, "%s", e->message);
    }
    p->n++;
}

/* Writes the bytes to a file and validates it. */
static tbx_status validate_bytes(const uint8_t *p, size_t n, problems *pr) {
    char path[600];
    tmp_path(path, sizeof path, "validate.oinf");
    write_all(path, p, n);
    memset(pr, 0, sizeof *pr);
    uint64_t np = 0;
    tbx_status st = tbx_validate_path(path, NULL, collect, pr, &np);
    unlink(path);
    return st;
}

static bool has_problem(const problems *pr, tbx_status code, const char *field) {
    for (int i = 0; i < pr->n && i < 16; i++)
        if (pr->codes[i] == code && (!field || strstr(pr->fields[i], field))) return true;
    for (int i = 0; i < pr->n && i < 16; i++)
        fprintf(stderr, "  problem %d: %s %s: %s\n", i, tbx_status_name(pr->codes[i]), pr->fields[i],
                pr->msgs[i]);
    return false;
}

static tbx_writer *wopen(const char *name, uint32_t version, char *path, size_t cap) {
    tmp_path(path, cap, name);
    tbx_write_options o;
    tbx_write_options_init(&o);
    o.format = TBX_FORMAT_OINF;
    o.flags = TBX_WRITE_OVERWRITE;
    o.version = version;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, path, &o, &e) != TBX_OK) {
        fprintf(stderr, "writer_open: %s\n", e.message);
        return NULL;
    }
    return w;
}

static tbx_status wtensor(tbx_writer *w, const char *name, tbx_dtype dt, uint32_t ndim,
                          const uint64_t *shape, const void *data, size_t n, bool has_data) {
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), name, 0, dt, ndim, shape, has_data};
    uint64_t idx;
    tbx_error e;
    tbx_status st = tbx_writer_add_tensor(w, &d, &idx, &e);
    if (st != TBX_OK) { fprintf(stderr, "add_tensor %s: %s\n", name, e.message); return st; }
    (void)data; (void)n;
    return TBX_OK;
}

/* Writes the data of tensors declared with wtensor: (index, bytes) pairs. */
static tbx_status wdata(tbx_writer *w, uint64_t idx, const void *data, size_t n) {
    tbx_error e;
    /* two chunks, to exercise partial writes */
    size_t h = n / 2;
    tbx_status st = tbx_writer_write_tensor(w, idx, data, h, &e);
    if (st == TBX_OK) st = tbx_writer_write_tensor(w, idx, (const uint8_t *)data + h, n - h, &e);
    if (st != TBX_OK) fprintf(stderr, "write_tensor: %s\n", e.message);
    return st;
}

static tbx_status wmeta(tbx_writer *w, const char *key, tbx_value *v) {
    tbx_error e;
    tbx_status st = tbx_writer_add_meta(w, key, strlen(key), v, &e);
    if (st != TBX_OK) fprintf(stderr, "add_meta %s: %s\n", key, e.message);
    tbx_value_free(v);
    return st;
}

static tbx_status wfinish(tbx_writer *w) {
    tbx_error e;
    tbx_status st = tbx_writer_finish(w, &e);
    if (st != TBX_OK) fprintf(stderr, "finish: %s\n", e.message);
    return st;
}

static tbx_file *open_path(const char *path) {
    tbx_file *f = NULL;
    tbx_error e;
    if (tbx_open_path(&f, path, NULL, &e) != TBX_OK) {
        fprintf(stderr, "open %s: %s\n", path, e.message);
        return NULL;
    }
    return f;
}

static bool bytes_equal(const char *what, const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    if (an == bn && (an == 0 || memcmp(a, b, an) == 0)) return true;
    size_t i = 0;
    while (i < an && i < bn && a[i] == b[i]) i++;
    fprintf(stderr, "  %s: differ at byte %zu (sizes %zu and %zu)\n", what, i, an, bn);
    return false;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading the samples                                                                         */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(reads_sample_v1) {
    tfile t;
    sample_v1(&t);
    tpos P;
    ob b = build(&t, &P);
    CHECK_EQ(tbx_detect_format(b.p, 64, b.n), TBX_FORMAT_OINF);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(b.p, b.n, NULL, &f, &e));
    if (!f) { fprintf(stderr, "%s\n", e.message); free(b.p); tfile_free(&t); return; }
    CHECK_EQ(tbx_file_format(f), TBX_FORMAT_OINF);
    CHECK_EQ(tbx_file_version(f), 1);
    /* size variables */
    CHECK_EQ(tbx_oinf_sizevar_count(f), 2);
    const char *name = NULL;
    size_t nl = 0;
    uint64_t val = 0;
    CHECK_OK(tbx_oinf_sizevar_get(f, 1, &name, &nl, &val));
    CHECK_STR(name, "D");
    CHECK_EQ(nl, 1);
    CHECK_EQ(val, 16);
    CHECK_EQ(tbx_oinf_sizevar_get(f, 2, &name, &nl, &val), TBX_E_INVALID_ARG);
    /* metadata, in file order, with their types */
    CHECK_EQ(tbx_meta_count(f), 6);
    size_t kl;
    CHECK_STR(tbx_meta_key(f, 0, &kl), "alpha");
    const tbx_value *v = tbx_meta_find(f, "alpha");
    double d = 0;
    CHECK(v && tbx_value_type_of(v) == TBX_V_F32 && tbx_value_get_f64(v, &d) == TBX_OK && d == 0.5);
    v = tbx_meta_find(f, "bits");
    size_t nb = 0;
    CHECK(v && tbx_value_type_of(v) == TBX_V_BITSET && tbx_value_len(v) == 9);
    const uint8_t *bits = tbx_value_data(v, &nb);
    CHECK(bits && nb == 2 && bits[0] == 0x0D && bits[1] == 0x01);
    v = tbx_meta_find(f, "flag");
    uint64_t u = 0;
    CHECK(v && tbx_value_type_of(v) == TBX_V_BOOL && tbx_value_get_u64(v, &u) == TBX_OK && u == 1);
    v = tbx_meta_find(f, "mode");
    size_t sl = 0;
    CHECK(v && tbx_value_type_of(v) == TBX_V_STRING);
    CHECK_STR(tbx_value_get_str(v, &sl), "clamp_up");
    v = tbx_meta_find(f, "nd");
    tbx_dtype dt = TBX_DT_INVALID;
    uint32_t ndim = 0;
    const uint64_t *shape = NULL;
    CHECK(v && tbx_value_type_of(v) == TBX_V_NDARRAY);
    CHECK_OK(tbx_value_ndarray(v, &dt, &ndim, &shape));
    CHECK_EQ(dt, TBX_DT_I16);
    CHECK(ndim == 2 && shape[0] == 2 && shape[1] == 3);
    const int16_t *nd = tbx_value_data(v, &nb);
    CHECK(nd && nb == 12);
    for (int i = 0; nd && i < 6; i++) CHECK_EQ(nd[i], ND_I16[i]);
    v = tbx_meta_find(f, "q4");
    CHECK(v && tbx_value_type_of(v) == TBX_V_NDARRAY);
    CHECK_OK(tbx_value_ndarray(v, &dt, &ndim, &shape));
    CHECK_EQ(dt, TBX_DT_I4);
    CHECK_EQ(ndim, 0);
    CHECK_EQ(tbx_value_len(v), 1);
    /* tensors */
    CHECK_EQ(tbx_tensor_count(f), 5);
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
    CHECK_STR(ti.name, "b");
    CHECK_EQ(ti.dtype, TBX_DT_BOOL);
    CHECK_EQ(ti.offset, P.tn_data[0]);
    CHECK_EQ(ti.nbytes, 3);
    CHECK_OK(tbx_tensor_info_get(f, 1, &ti));
    CHECK_EQ(ti.dtype, TBX_DT_T2);
    CHECK_EQ(ti.nbytes, 2);
    float fv[16];
    CHECK_OK(tbx_tensor_read_f32(f, 1, 0, 5, fv, &e));
    CHECK(fv[0] == 1 && fv[1] == 0 && fv[2] == -1 && fv[3] == 1 && fv[4] == 0);
    CHECK_OK(tbx_tensor_info_get(f, 2, &ti));
    CHECK_STR(ti.name, "u");
    CHECK_EQ(ti.ncomponents, 0);
    CHECK_EQ(ti.offset, 0);
    CHECK_EQ(ti.nbytes, 0);
    CHECK_EQ(ti.nelems, 16);
    CHECK_OK(tbx_tensor_info_get(f, 3, &ti));
    CHECK_OK(tbx_tensor_read_f32(f, 3, 0, 4, fv, &e));
    for (int i = 0; i < 4; i++) CHECK(fv[i] == W4[i]);
    CHECK_OK(tbx_tensor_info_get(f, 4, &ti));
    CHECK_STR(ti.name, "x");
    CHECK_EQ(ti.ndim, 0);
    CHECK_EQ(ti.nelems, 1);
    CHECK_OK(tbx_tensor_read_f32(f, 4, 0, 1, fv, &e));
    CHECK(fv[0] == 10.35f);
    tbx_oinf_quant q;
    CHECK_EQ(tbx_oinf_tensor_quant(f, 3, &q), TBX_E_NOT_FOUND);
    tbx_close(f);
    /* validation finds nothing */
    problems pr;
    CHECK_OK(validate_bytes(b.p, b.n, &pr));
    CHECK_EQ(pr.n, 0);
    free(b.p);
    tfile_free(&t);
}

TBX_TEST(reads_sample_v2_quant) {
    tfile t;
    sample_v2(&t);
    ob b = build(&t, NULL);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(b.p, b.n, NULL, &f, &e));
    if (!f) { fprintf(stderr, "%s\n", e.message); free(b.p); tfile_free(&t); return; }
    CHECK_EQ(tbx_file_version(f), 2);
    CHECK_EQ(tbx_tensor_count(f), 3);
    tbx_oinf_quant q;
    CHECK_OK(tbx_oinf_tensor_quant(f, 1, &q)); /* qw */
    CHECK_EQ(q.scheme, 2);
    CHECK_EQ(q.scale_mode, 2);
    CHECK_EQ(q.zp_mode, 2);
    CHECK_EQ(q.scale_count, 2);
    CHECK_EQ(q.zp_count, 2);
    CHECK(q.scales && q.scales[0] == 0.5f && q.scales[1] == 0.25f);
    CHECK(q.zero_points && q.zero_points[0] == 3 && q.zero_points[1] == -7);
    CHECK_OK(tbx_oinf_tensor_quant(f, 0, &q)); /* qs */
    CHECK_EQ(q.scheme, 1);
    CHECK_EQ(q.zp_count, 0);
    CHECK(q.scales[0] == 0.125f);
    CHECK_EQ(tbx_oinf_tensor_quant(f, 2, &q), TBX_E_NOT_FOUND);
    /* the common description (tbx_tensor_quant_get) says the same as the builder wrote */
    tbx_quant_info qi;
    qi.struct_size = sizeof qi;
    CHECK_OK(tbx_tensor_quant_get(f, 1, &qi)); /* qw: i8, asymmetric, per channel on axis 0 */
    CHECK_EQ(qi.method, TBX_QUANT_LINEAR);
    CHECK_EQ(qi.code_dtype, TBX_DT_I8);
    CHECK_EQ(qi.bits, 8);
    CHECK_EQ(qi.code_signed, 1);
    CHECK_EQ(qi.block_size, 0);
    CHECK_EQ(qi.scale.scope, TBX_QSCOPE_CHANNEL);
    CHECK_EQ(qi.scale.axis, 0);
    CHECK_EQ(qi.scale.count, 2);
    CHECK_EQ(qi.scale.dtype, TBX_DT_F32);
    CHECK_EQ(qi.scale.component, -1);
    const float *qsc = qi.scale.values;
    CHECK(qsc && qsc[0] == 0.5f && qsc[1] == 0.25f);
    CHECK_EQ(qi.zero.scope, TBX_QSCOPE_CHANNEL);
    CHECK_EQ(qi.zero.dtype, TBX_DT_I32);
    CHECK_EQ(qi.zero.count, 2);
    const int32_t *qzp = qi.zero.values;
    CHECK(qzp && qzp[0] == 3 && qzp[1] == -7);
    CHECK_EQ(qi.domain, TBX_QDOMAIN_UNSPECIFIED);
    CHECK_EQ(qi.has_clip, 0);
    uint64_t pu = 0;
    CHECK_EQ(tbx_value_type_of(qi.params), TBX_V_MAP);
    CHECK_EQ(tbx_value_len(qi.params), 3);
    CHECK_STR(tbx_value_key_at(qi.params, 0, NULL), "scheme");
    CHECK_OK(tbx_value_get_u64(tbx_value_at(qi.params, 0), &pu));
    CHECK_EQ(pu, 2);
    CHECK_OK(tbx_tensor_quant_get(f, 0, &qi)); /* qs: u4, symmetric, per tensor */
    CHECK_EQ(qi.code_dtype, TBX_DT_U4);
    CHECK_EQ(qi.bits, 4);
    CHECK_EQ(qi.code_signed, 0);
    CHECK_EQ(qi.scale.scope, TBX_QSCOPE_TENSOR);
    CHECK_EQ(qi.scale.count, 1);
    CHECK(qi.scale.values && ((const float *)qi.scale.values)[0] == 0.125f);
    CHECK_EQ(qi.zero.scope, TBX_QSCOPE_NONE);
    CHECK(qi.zero.values == NULL);
    CHECK_EQ(tbx_tensor_quant_get(f, 2, &qi), TBX_E_NOT_FOUND); /* w: plain f32 */
    qi.struct_size = 8;
    CHECK_EQ(tbx_tensor_quant_get(f, 1, &qi), TBX_E_INVALID_ARG);
    /* the stored codes stay readable as they are (the component) ... */
    int8_t raw[6];
    CHECK_OK(tbx_tensor_read(f, 1, raw, sizeof raw, NULL, &e));
    CHECK(memcmp(raw, QW, 6) == 0);
    /* ... and tbx_tensor_read_f32 applies the parameters: value = (code - zp) * scale per
     * channel of axis 0 (rows of 3), in float32, computed here from the builder's constants */
    float fv[6];
    CHECK_OK(tbx_tensor_read_f32(f, 1, 0, 6, fv, &e));
    for (int i = 0; i < 6; i++) {
        float want = ((float)QW[i] - (float)QW_ZPS[i / 3]) * QW_SCALES[i / 3];
        CHECK(fv[i] == want);
    }
    /* a range inside the second row (the walk starts mid-channel) */
    CHECK_OK(tbx_tensor_read_f32(f, 1, 4, 2, fv, &e));
    CHECK(fv[0] == ((float)QW[4] + 7.0f) * 0.25f && fv[1] == ((float)QW[5] + 7.0f) * 0.25f);
    /* qs: u4 codes 1, 2, 15, symmetric, one scale */
    CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 3, fv, &e));
    CHECK(fv[0] == 0.125f && fv[1] == 0.25f && fv[2] == 1.875f);
    /* the parameters are the tensor's description only, not metadata */
    CHECK_EQ(tbx_meta_count(f), 1);
    CHECK(tbx_meta_find(f, "qw.quant.scheme") == NULL);
    tbx_close(f);
    problems pr;
    CHECK_OK(validate_bytes(b.p, b.n, &pr));
    CHECK_EQ(pr.n, 0);
    free(b.p);
    tfile_free(&t);
}

TBX_TEST(empty_file_is_valid) {
    tfile t;
    memset(&t, 0, sizeof t);
    t.version = 1;
    ob b = build(&t, NULL);
    CHECK_EQ(b.n, 72);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(b.p, b.n, NULL, &f, &e));
    CHECK(f && tbx_tensor_count(f) == 0 && tbx_meta_count(f) == 0);
    tbx_close(f);
    free(b.p);
}

/* ------------------------------------------------------------------------------------------ */
/* Writer byte identity                                                                        */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(writer_matches_builder_v1) {
    tfile t;
    sample_v1(&t);
    ob ref = build(&t, NULL);
    char path[600];
    tbx_writer *w = wopen("v1.oinf", 0, path, sizeof path);
    CHECK(w != NULL);
    if (!w) { free(ref.p); tfile_free(&t); return; }
    tbx_error e;
    /* declared out of order: the writer sorts */
    CHECK_OK(tbx_oinf_writer_add_sizevar(w, "D", 16, &e));
    CHECK_OK(tbx_oinf_writer_add_sizevar(w, "B", 4, &e));
    CHECK_EQ(tbx_oinf_writer_add_sizevar(w, "B", 5, &e), TBX_E_DUPLICATE);
    CHECK_EQ(tbx_oinf_writer_add_sizevar(w, "a b", 5, &e), TBX_E_FORMAT);
    CHECK_OK(wmeta(w, "q4", tbx_value_new_ndarray(TBX_DT_I4, NULL, 0, "\x0D", 1)));
    uint64_t nd_dims[2] = {2, 3};
    CHECK_OK(wmeta(w, "nd", tbx_value_new_ndarray(TBX_DT_I16, nd_dims, 2, ND_I16, 12)));
    CHECK_OK(wmeta(w, "mode", tbx_value_new_string("clamp_up", 8)));
    CHECK_OK(wmeta(w, "flag", tbx_value_new_bool(1)));
    CHECK_OK(wmeta(w, "bits", tbx_value_new_bitset(BITS9, 9)));
    CHECK_OK(wmeta(w, "alpha", tbx_value_new_float(TBX_V_F32, 0.5)));
    uint64_t d3 = 3, d5 = 5, d44[2] = {4, 4}, d22[2] = {2, 2};
    CHECK_OK(wtensor(w, "x", TBX_DT_F32, 0, NULL, NULL, 0, true));      /* 0 */
    CHECK_OK(wtensor(w, "w", TBX_DT_F32, 2, d22, NULL, 0, true));       /* 1 */
    CHECK_OK(wtensor(w, "u", TBX_DT_F32, 2, d44, NULL, 0, false));      /* 2 */
    CHECK_OK(wtensor(w, "t", TBX_DT_T2, 1, &d5, NULL, 0, true));        /* 3 */
    CHECK_OK(wtensor(w, "b", TBX_DT_BOOL, 1, &d3, NULL, 0, true));      /* 4 */
    float x = 10.35f;
    const uint8_t bools[3] = {1, 0, 1}, t2[2] = {0x71, 0x00};
    CHECK_OK(wdata(w, 3, t2, 2));
    CHECK_OK(wdata(w, 0, &x, 4));
    CHECK_OK(wdata(w, 1, W4, 16));
    CHECK_OK(wdata(w, 4, bools, 3));
    CHECK_OK(wfinish(w));
    size_t n = 0;
    uint8_t *got = tbx_test_slurp(path, &n);
    CHECK(got && bytes_equal("v1 writer vs builder", got, n, ref.p, ref.n));
    free(got);
    unlink(path);
    free(ref.p);
    tfile_free(&t);
}

TBX_TEST(writer_matches_builder_v2) {
    tfile t;
    sample_v2(&t);
    ob ref = build(&t, NULL);
    char path[600];
    tbx_writer *w = wopen("v2.oinf", 2, path, sizeof path);
    CHECK(w != NULL);
    if (!w) { free(ref.p); tfile_free(&t); return; }
    tbx_error e;
    CHECK_OK(wmeta(w, "name", tbx_value_new_string("qmodel", 6)));
    uint64_t d23[2] = {2, 3}, d3 = 3, d22[2] = {2, 2};
    tbx_oinf_quant qw = {2, 2, 2, 0, 2, 0, 2, QW_SCALES, QW_ZPS};
    tbx_oinf_quant qs = {1, 1, 0, 0, 1, 0, 0, QS_SCALE, NULL};
    CHECK_OK(tbx_oinf_writer_set_quant(w, "qw", &qw, &e)); /* before the tensor is declared */
    CHECK_OK(wtensor(w, "w", TBX_DT_F32, 2, d22, NULL, 0, true));
    CHECK_OK(wtensor(w, "qw", TBX_DT_I8, 2, d23, NULL, 0, true));
    CHECK_OK(wtensor(w, "qs", TBX_DT_U4, 1, &d3, NULL, 0, true));
    CHECK_OK(tbx_oinf_writer_set_quant(w, "qs", &qs, &e));
    CHECK_EQ(tbx_oinf_writer_set_quant(w, "qs", &qs, &e), TBX_E_DUPLICATE);
    const uint8_t u4[2] = {0x21, 0x0F};
    CHECK_OK(wdata(w, 0, W4, 16));
    CHECK_OK(wdata(w, 1, QW, 6));
    CHECK_OK(wdata(w, 2, u4, 2));
    CHECK_OK(wfinish(w));
    size_t n = 0;
    uint8_t *got = tbx_test_slurp(path, &n);
    CHECK(got && bytes_equal("v2 writer vs builder", got, n, ref.p, ref.n));
    free(got);
    unlink(path);

    /* v2 -> v2 through tbx_convert: the descriptions travel with the tensors (same bytes) */
    tbx_file *f = NULL;
    CHECK_OK(open_mem(ref.p, ref.n, NULL, &f, &e));
    char p2[128], p1[128];
    tmp_path(p2, sizeof p2, "conv-v2.oinf");
    tmp_path(p1, sizeof p1, "conv-v1.oinf");
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.format = TBX_FORMAT_OINF;
    co.write.flags = TBX_WRITE_OVERWRITE;
    co.write.version = 2;
    CHECK_OK(tbx_convert(f, p2, &co, &e));
    got = tbx_test_slurp(p2, &n);
    CHECK(got && bytes_equal("v2 -> v2 convert", got, n, ref.p, ref.n));
    free(got);
    /* v2 -> v1: version 1 has no quant payloads: refused, naming the tensor and the option,
     * and no file is left */
    co.write.version = 1;
    CHECK_EQ(tbx_convert(f, p1, &co, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "\"qs\"") != NULL && strstr(e.message, "--dequantize") != NULL);
    CHECK(access(p1, F_OK) != 0);
    /* with TBX_CONVERT_DEQUANTIZE the quantized tensors become f32 values (the formula,
     * computed here), the plain one is copied */
    co.flags = TBX_CONVERT_DEQUANTIZE;
    CHECK_OK(tbx_convert(f, p1, &co, &e));
    tbx_close(f);
    f = open_path(p1);
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ(tbx_file_version(f), 1);
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, 1, &ti));
        CHECK_STR(ti.name, "qw");
        CHECK_EQ(ti.dtype, TBX_DT_F32);
        float v[6];
        CHECK_OK(tbx_tensor_read(f, 1, v, sizeof v, NULL, &e));
        for (int i = 0; i < 6; i++)
            CHECK(v[i] == ((float)QW[i] - (float)QW_ZPS[i / 3]) * QW_SCALES[i / 3]);
        tbx_quant_info qi;
        qi.struct_size = sizeof qi;
        CHECK_EQ(tbx_tensor_quant_get(f, 1, &qi), TBX_E_NOT_FOUND);
        tbx_close(f);
    }
    unlink(p1);
    unlink(p2);
    free(ref.p);
    tfile_free(&t);
}

/* A linear description in the common form (what tbx_tensor_quant_get gives for OINF). */
static tbx_quant_info linear_desc(tbx_dtype code, tbx_quant_scope ss, uint64_t ns,
                                  const float *scales, tbx_quant_scope zs, uint64_t nz,
                                  const int32_t *zps) {
    tbx_quant_info q;
    memset(&q, 0, sizeof q);
    q.struct_size = sizeof q;
    q.method = TBX_QUANT_LINEAR;
    q.code_dtype = code;
    q.scale.scope = ss;
    q.scale.dtype = TBX_DT_F32;
    q.scale.count = ns;
    q.scale.component = -1;
    q.scale.values = scales;
    q.zero.scope = zs;
    q.zero.dtype = zs == TBX_QSCOPE_NONE ? TBX_DT_INVALID : TBX_DT_I32;
    q.zero.count = nz;
    q.zero.component = -1;
    q.zero.values = zps;
    return q;
}

/* tbx_writer_add_quant_tensor: the generic way to hand a writer a tensor's quantization. OINF
 * v2 writes the same bytes as the builder (which tbx_oinf_writer_set_quant also matches);
 * the description is copied; what a format cannot store exactly is refused, nothing declared. */
TBX_TEST(writer_takes_common_quant_descriptions) {
    tfile t;
    sample_v2(&t);
    ob ref = build(&t, NULL);
    char path[600];
    tbx_error e;
    uint64_t d23[2] = {2, 3}, d3 = 3, d22[2] = {2, 2};
    float scales[2] = {0.5f, 0.25f};
    int32_t zps[2] = {3, -7};
    static const float S4[4] = {1, 2, 3, 4};
    tbx_quant_info qw = linear_desc(TBX_DT_I8, TBX_QSCOPE_CHANNEL, 2, scales, TBX_QSCOPE_CHANNEL,
                                    2, zps);
    tbx_quant_info qs = linear_desc(TBX_DT_U4, TBX_QSCOPE_TENSOR, 1, QS_SCALE, TBX_QSCOPE_NONE,
                                    0, NULL);
    tbx_writer *w = wopen("v2q.oinf", 2, path, sizeof path);
    CHECK(w != NULL);
    if (!w) { free(ref.p); tfile_free(&t); return; }
    CHECK_OK(wmeta(w, "name", tbx_value_new_string("qmodel", 6)));
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.has_data = 1;
    d.name = "w"; d.dtype = TBX_DT_F32; d.ndim = 2; d.shape = d22;
    CHECK_OK(tbx_writer_add_quant_tensor(w, &d, NULL, NULL, &e));
    d.name = "qw"; d.dtype = TBX_DT_I8; d.shape = d23;
    CHECK_OK(tbx_writer_add_quant_tensor(w, &d, &qw, NULL, &e));
    scales[0] = 99.0f; /* copied: the caller's arrays may change or go */
    zps[1] = 99;
    d.name = "qs"; d.dtype = TBX_DT_U4; d.ndim = 1; d.shape = &d3;
    CHECK_OK(tbx_writer_add_quant_tensor(w, &d, &qs, NULL, &e));
    const uint8_t u4[2] = {0x21, 0x0F};
    CHECK_OK(wdata(w, 0, W4, 16));
    CHECK_OK(wdata(w, 1, QW, 6));
    CHECK_OK(wdata(w, 2, u4, 2));
    CHECK_OK(wfinish(w));
    size_t n = 0;
    uint8_t *got = tbx_test_slurp(path, &n);
    CHECK(got && bytes_equal("v2 writer (common descriptions) vs builder", got, n, ref.p, ref.n));
    free(got);
    scales[0] = 0.5f;
    zps[1] = -7;

    /* refusals: the status, the field, and the tensor is not declared (its name is free) */
    struct {
        const char *what;
        uint32_t version;
        tbx_status code;
        const char *field;
    } cases[] = {
        {"v1 writer", 1, TBX_E_UNSUPPORTED, "quant"},
        {"domain", 2, TBX_E_LOSSY, "quant.domain"},
        {"clip", 2, TBX_E_LOSSY, "quant.clip"},
        {"group scope", 2, TBX_E_UNSUPPORTED, "quant.scale"},
        {"scales in a component", 2, TBX_E_UNSUPPORTED, "quant.scale"},
        {"f16 scales", 2, TBX_E_UNSUPPORTED, "quant.scale"},
        {"codes of another dtype", 2, TBX_E_UNSUPPORTED, "quant.code_dtype"},
        {"count off the shape", 2, TBX_E_INVALID_ARG, "quant.scale"},
        {"old struct_size", 2, TBX_E_INVALID_ARG, "quant"},
        {"unknown method", 2, TBX_E_INVALID_ARG, "quant.method"},
        {"ggml method", 2, TBX_E_UNSUPPORTED, "quant.method"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tbx_quant_info q = qw;
        switch (k) {
        case 1: q.domain = TBX_QDOMAIN_WEIGHTS; break;
        case 2: q.has_clip = 1; q.clip_min = -1; q.clip_max = 1; break;
        case 3: /* 2 rows of 3 in groups of 2: 4 scales */
            q.scale.scope = TBX_QSCOPE_GROUP; q.block_size = 2; q.scale.count = 4;
            q.scale.values = S4;
            break;
        case 4: q.scale.values = NULL; q.scale.component = 1; break;
        case 5: q.scale.dtype = TBX_DT_F16; break;
        case 6: q.code_dtype = TBX_DT_U8; break;
        case 7: q.scale.count = 3; break;
        case 8: q.struct_size = 16; break;
        case 9: q.method = (tbx_quant_method)7; break;
        case 10: q.method = TBX_QUANT_GGML; q.code_dtype = TBX_DT_I8; break;
        default: break;
        }
        w = wopen("qref.oinf", cases[k].version, path, sizeof path);
        CHECK(w != NULL);
        if (!w) continue;
        d.name = "qw"; d.dtype = TBX_DT_I8; d.ndim = 2; d.shape = d23;
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_writer_add_quant_tensor(w, &d, &q, NULL, &e);
        if (st != cases[k].code || strcmp(e.field, cases[k].field) != 0)
            fprintf(stderr, "%s: %s / %s: %s\n", cases[k].what, tbx_status_name(st), e.field,
                    e.message);
        CHECK_EQ(st, cases[k].code);
        CHECK_STR(e.field, cases[k].field);
        CHECK(strstr(e.message, "\"qw\"") != NULL);
        uint64_t idx = 9;
        CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &e)); /* nothing was declared */
        CHECK_EQ(idx, 0);
        tbx_writer_abort(w);
    }
    /* other formats: safetensors stores no linear description; GGUF takes a ggml one whose
     * code dtype is the block type, and refuses the linear one; zTensor takes linear ones only
     * as quantized_group (unsigned codes in words, scales and zeros per group in components) */
    const struct { tbx_format fmt; const char *ext, *field; } others[] = {
        {TBX_FORMAT_SAFETENSORS, "safetensors", "quant"}, {TBX_FORMAT_GGUF, "gguf", "quant"},
        {TBX_FORMAT_ZTENSOR, "zt", "quant.code_dtype"}};
    for (size_t k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "qref.%s", others[k].ext);
        tmp_path(path, sizeof path, name);
        tbx_write_options o;
        tbx_write_options_init(&o);
        o.format = others[k].fmt;
        o.flags = TBX_WRITE_OVERWRITE;
        CHECK_OK(tbx_writer_open(&w, path, &o, &e));
        d.name = "qw"; d.dtype = TBX_DT_I8; d.ndim = 2; d.shape = d23;
        CHECK_EQ(tbx_writer_add_quant_tensor(w, &d, &qw, NULL, &e), TBX_E_UNSUPPORTED);
        CHECK_STR(e.field, others[k].field);
        CHECK(strstr(e.message, "\"qw\"") != NULL);
        if (others[k].fmt == TBX_FORMAT_GGUF) {
            uint64_t d32[2] = {2, 32};
            tbx_quant_info g;
            memset(&g, 0, sizeof g);
            g.struct_size = sizeof g;
            g.method = TBX_QUANT_GGML;
            g.code_dtype = TBX_DT_Q8_0;
            g.scale.scope = TBX_QSCOPE_BLOCK;
            d.name = "g"; d.dtype = TBX_DT_Q8_0; d.shape = d32;
            CHECK_OK(tbx_writer_add_quant_tensor(w, &d, &g, NULL, &e));
            g.code_dtype = TBX_DT_Q4_0;
            d.name = "g2";
            CHECK_EQ(tbx_writer_add_quant_tensor(w, &d, &g, NULL, &e), TBX_E_INVALID_ARG);
            CHECK_STR(e.field, "quant.code_dtype");
        }
        tbx_writer_abort(w);
    }
    unlink(path);
    free(ref.p);
    tfile_free(&t);
}

TBX_TEST(writer_quant_errors) {
    char path[600];
    tbx_error e;
    uint64_t d23[2] = {2, 3};
    static const float S4[4] = {1, 2, 3, 4};
    tbx_oinf_quant bad_axis = {1, 2, 0, 5, 2, 0, 0, S4, NULL};
    tbx_oinf_quant bad_count = {1, 2, 0, 0, 3, 0, 0, S4, NULL};
    tbx_oinf_quant sym_zp = {1, 1, 1, 0, 1, 0, 1, QW_SCALES, QW_ZPS};
    tbx_oinf_quant asym_nozp = {2, 1, 0, 0, 1, 0, 0, QW_SCALES, NULL};
    const tbx_oinf_quant *cases[] = {&bad_axis, &bad_count, &sym_zp, &asym_nozp};
    const char *fields[] = {"scale_axis", "scale_count", "zp_mode", "zp_mode"};
    for (int i = 0; i < 4; i++) {
        tbx_writer *w = wopen("qerr.oinf", 2, path, sizeof path);
        CHECK(w != NULL);
        if (!w) continue;
        CHECK_OK(wtensor(w, "qw", TBX_DT_I8, 2, d23, NULL, 0, true));
        CHECK_OK(tbx_oinf_writer_set_quant(w, "qw", cases[i], &e));
        CHECK_EQ(tbx_writer_write_tensor(w, 0, QW, 6, &e), TBX_E_FORMAT);
        CHECK(strstr(e.field, fields[i]) != NULL);
        tbx_writer_abort(w);
    }
    /* quant parameters for an undeclared tensor; on a v1 writer */
    tbx_writer *w = wopen("qerr.oinf", 2, path, sizeof path);
    CHECK(w != NULL);
    if (w) {
        tbx_oinf_quant ok = {1, 1, 0, 0, 1, 0, 0, QS_SCALE, NULL};
        CHECK_OK(tbx_oinf_writer_set_quant(w, "nope", &ok, &e));
        CHECK_EQ(tbx_writer_finish(w, &e), TBX_E_NOT_FOUND);
    }
    w = wopen("qerr.oinf", 1, path, sizeof path);
    if (w) {
        tbx_oinf_quant ok = {1, 1, 0, 0, 1, 0, 0, QS_SCALE, NULL};
        CHECK_EQ(tbx_oinf_writer_set_quant(w, "x", &ok, &e), TBX_E_UNSUPPORTED);
        tbx_writer_abort(w);
    }
    /* incomplete quant metadata for a v2 writer */
    w = wopen("qerr.oinf", 2, path, sizeof path);
    if (w) {
        CHECK_OK(wtensor(w, "qw", TBX_DT_I8, 2, d23, NULL, 0, true));
        CHECK_OK(wmeta(w, "qw.quant.scheme", tbx_value_new_uint(TBX_V_U32, 1)));
        CHECK_EQ(tbx_writer_write_tensor(w, 0, QW, 6, &e), TBX_E_FORMAT);
        CHECK(strstr(e.message, "qw.quant.scale_mode") != NULL);
        tbx_writer_abort(w);
    }
    unlink(path);
}

/* ------------------------------------------------------------------------------------------ */
/* Writer round trips                                                                          */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(roundtrip_every_metadata_type) {
    char path[600];
    tbx_writer *w = wopen("meta.oinf", 0, path, sizeof path);
    CHECK(w != NULL);
    if (!w) return;
    CHECK_OK(wmeta(w, "b0", tbx_value_new_bool(0)));
    CHECK_OK(wmeta(w, "u8", tbx_value_new_uint(TBX_V_U8, 255)));
    CHECK_OK(wmeta(w, "u16", tbx_value_new_uint(TBX_V_U16, 65535)));
    CHECK_OK(wmeta(w, "u32", tbx_value_new_uint(TBX_V_U32, 4000000000u)));
    CHECK_OK(wmeta(w, "u64", tbx_value_new_uint(TBX_V_U64, UINT64_MAX)));
    CHECK_OK(wmeta(w, "i8", tbx_value_new_int(TBX_V_I8, -128)));
    CHECK_OK(wmeta(w, "i16", tbx_value_new_int(TBX_V_I16, -32768)));
    CHECK_OK(wmeta(w, "i32", tbx_value_new_int(TBX_V_I32, INT32_MIN)));
    CHECK_OK(wmeta(w, "i64", tbx_value_new_int(TBX_V_I64, INT64_MIN)));
    CHECK_OK(wmeta(w, "f16", tbx_value_new_float(TBX_V_F16, 65504.0)));
    CHECK_OK(wmeta(w, "bf16", tbx_value_new_float(TBX_V_BF16, -1.5)));
    CHECK_OK(wmeta(w, "f32", tbx_value_new_float(TBX_V_F32, 0.1)));
    CHECK_OK(wmeta(w, "f64", tbx_value_new_float(TBX_V_F64, 1e300)));
    CHECK_OK(wmeta(w, "s", tbx_value_new_string("a.B-9_z", 7)));
    const uint8_t bits[3] = {0xFF, 0x00, 0x05};
    CHECK_OK(wmeta(w, "bs", tbx_value_new_bitset(bits, 19)));
    CHECK_OK(wmeta(w, "bs0", tbx_value_new_bitset(bits, 0)));
    uint8_t f8 = tbx_f32_to_f8(TBX_DT_F8_E5M2, -0.75f);
    CHECK_OK(wmeta(w, "f8", tbx_value_new_ndarray(TBX_DT_F8_E5M2, NULL, 0, &f8, 1)));
    static const tbx_dtype packed[] = {TBX_DT_I4, TBX_DT_I2, TBX_DT_I1, TBX_DT_U4,
                                       TBX_DT_U2, TBX_DT_U1, TBX_DT_T2, TBX_DT_T1};
    static const char *const pk[] = {"p.i4", "p.i2", "p.i1", "p.u4", "p.u2", "p.u1", "p.t2", "p.t1"};
    static const uint8_t pv[] = {0x09, 0x02, 0x01, 0x0F, 0x03, 0x01, 0x03, 0x00};
    for (int i = 0; i < 8; i++)
        CHECK_OK(wmeta(w, pk[i], tbx_value_new_ndarray(packed[i], NULL, 0, &pv[i], 1)));
    /* ndarrays of every element type */
    static const tbx_dtype els[] = {TBX_DT_I8, TBX_DT_I16, TBX_DT_I32, TBX_DT_I64, TBX_DT_U8,
                                    TBX_DT_U16, TBX_DT_U32, TBX_DT_U64, TBX_DT_F16, TBX_DT_F32,
                                    TBX_DT_F64, TBX_DT_BOOL, TBX_DT_BF16, TBX_DT_F8_E5M2,
                                    TBX_DT_I4, TBX_DT_I2, TBX_DT_I1, TBX_DT_U4, TBX_DT_U2,
                                    TBX_DT_U1, TBX_DT_T2, TBX_DT_T1};
    uint8_t raw[128];
    for (int i = 0; i < 128; i++) raw[i] = (uint8_t)(i * 37 + 1);
    uint64_t shape[2] = {3, 5};
    for (size_t i = 0; i < sizeof els / sizeof els[0]; i++) {
        uint64_t nbytes;
        CHECK_OK(tbx_dtype_nbytes_shape(els[i], shape, 2, &nbytes));
        uint8_t data[128];
        memcpy(data, raw, sizeof data);
        if (els[i] == TBX_DT_BOOL) for (int k = 0; k < 15; k++) data[k] &= 1;
        if (els[i] == TBX_DT_T2) memset(data, 0x45, sizeof data); /* codes 1,1,0,1 */
        const tbx_dtype_info *di = tbx_dtype_get(els[i]);
        if (di->flags & TBX_DTF_PACKED) data[nbytes - 1] &= (uint8_t)((1u << ((15 * di->bits) % 8 ? (15 * di->bits) % 8 : 8)) - 1);
        char key[32];
        snprintf(key, sizeof key, "nd.%s", di->name);
        CHECK_OK(wmeta(w, key, tbx_value_new_ndarray(els[i], shape, 2, data, (size_t)nbytes)));
    }
    uint64_t zero_shape[2] = {0, 4};
    CHECK_OK(wmeta(w, "nd.empty", tbx_value_new_ndarray(TBX_DT_F32, zero_shape, 2, NULL, 0)));
    float sc = 2.5f;
    CHECK_OK(wmeta(w, "nd.scalar", tbx_value_new_ndarray(TBX_DT_F32, NULL, 0, &sc, 4)));
    /* arrays of numeric scalars become 1-D ndarrays */
    tbx_value *arr = tbx_value_new_array(TBX_V_U32);
    for (uint32_t k = 0; k < 5; k++) tbx_value_array_push(arr, tbx_value_new_uint(TBX_V_U32, k * 1000));
    CHECK_OK(wmeta(w, "arr.u32", arr));
    arr = tbx_value_new_array(TBX_V_NULL);
    tbx_value_array_push(arr, tbx_value_new_float(TBX_V_F64, 1.5));
    tbx_value_array_push(arr, tbx_value_new_float(TBX_V_F64, -2.25));
    CHECK_OK(wmeta(w, "arr.f64", arr));
    CHECK_OK(wfinish(w));

    tbx_file *f = open_path(path);
    CHECK(f != NULL);
    if (!f) return;
    uint64_t u;
    int64_t i;
    double d;
    const tbx_value *v;
    CHECK((v = tbx_meta_find(f, "b0")) && tbx_value_type_of(v) == TBX_V_BOOL);
    CHECK((v = tbx_meta_find(f, "u8")) && tbx_value_type_of(v) == TBX_V_U8 && !tbx_value_get_u64(v, &u) && u == 255);
    CHECK((v = tbx_meta_find(f, "u16")) && tbx_value_type_of(v) == TBX_V_U16 && !tbx_value_get_u64(v, &u) && u == 65535);
    CHECK((v = tbx_meta_find(f, "u32")) && tbx_value_type_of(v) == TBX_V_U32 && !tbx_value_get_u64(v, &u) && u == 4000000000u);
    CHECK((v = tbx_meta_find(f, "u64")) && tbx_value_type_of(v) == TBX_V_U64 && !tbx_value_get_u64(v, &u) && u == UINT64_MAX);
    CHECK((v = tbx_meta_find(f, "i8")) && tbx_value_type_of(v) == TBX_V_I8 && !tbx_value_get_i64(v, &i) && i == -128);
    CHECK((v = tbx_meta_find(f, "i16")) && tbx_value_type_of(v) == TBX_V_I16 && !tbx_value_get_i64(v, &i) && i == -32768);
    CHECK((v = tbx_meta_find(f, "i32")) && tbx_value_type_of(v) == TBX_V_I32 && !tbx_value_get_i64(v, &i) && i == INT32_MIN);
    CHECK((v = tbx_meta_find(f, "i64")) && tbx_value_type_of(v) == TBX_V_I64 && !tbx_value_get_i64(v, &i) && i == INT64_MIN);
    CHECK((v = tbx_meta_find(f, "f16")) && tbx_value_type_of(v) == TBX_V_F16 && !tbx_value_get_f64(v, &d) && d == 65504.0);
    CHECK((v = tbx_meta_find(f, "bf16")) && tbx_value_type_of(v) == TBX_V_BF16 && !tbx_value_get_f64(v, &d) && d == -1.5);
    CHECK((v = tbx_meta_find(f, "f32")) && tbx_value_type_of(v) == TBX_V_F32 && !tbx_value_get_f64(v, &d) && d == (double)0.1f);
    CHECK((v = tbx_meta_find(f, "f64")) && tbx_value_type_of(v) == TBX_V_F64 && !tbx_value_get_f64(v, &d) && d == 1e300);
    size_t sl;
    CHECK((v = tbx_meta_find(f, "s")) && tbx_value_type_of(v) == TBX_V_STRING);
    CHECK_STR(tbx_value_get_str(v, &sl), "a.B-9_z");
    size_t nb;
    const uint8_t *bp;
    CHECK((v = tbx_meta_find(f, "bs")) && tbx_value_type_of(v) == TBX_V_BITSET && tbx_value_len(v) == 19);
    CHECK((bp = tbx_value_data(v, &nb)) && nb == 3 && bp[0] == 0xFF && bp[1] == 0 && bp[2] == 5);
    CHECK((v = tbx_meta_find(f, "bs0")) && tbx_value_type_of(v) == TBX_V_BITSET && tbx_value_len(v) == 0);
    tbx_dtype dt;
    uint32_t nd;
    const uint64_t *sh;
    CHECK((v = tbx_meta_find(f, "f8")) && !tbx_value_ndarray(v, &dt, &nd, &sh) && dt == TBX_DT_F8_E5M2 && nd == 0);
    CHECK((bp = tbx_value_data(v, &nb)) && nb == 1 && tbx_f8_to_f32(TBX_DT_F8_E5M2, bp[0]) == -0.75f);
    for (int k = 0; k < 8; k++) {
        CHECK((v = tbx_meta_find(f, pk[k])) && !tbx_value_ndarray(v, &dt, &nd, &sh) && dt == packed[k] && nd == 0);
        CHECK((bp = tbx_value_data(v, &nb)) && nb == 1 && bp[0] == pv[k]);
    }
    for (size_t k = 0; k < sizeof els / sizeof els[0]; k++) {
        const tbx_dtype_info *di = tbx_dtype_get(els[k]);
        char key[32];
        snprintf(key, sizeof key, "nd.%s", di->name);
        v = tbx_meta_find(f, key);
        CHECK(v && !tbx_value_ndarray(v, &dt, &nd, &sh) && dt == els[k] && nd == 2 && sh[0] == 3 && sh[1] == 5);
        uint64_t nbytes = 0;
        tbx_dtype_nbytes_shape(els[k], shape, 2, &nbytes);
        CHECK((bp = tbx_value_data(v, &nb)) && nb == nbytes);
        if (bp && els[k] != TBX_DT_BOOL && els[k] != TBX_DT_T2 && nbytes > 1 &&
            memcmp(bp, raw, (size_t)nbytes - 1) != 0) {
            fprintf(stderr, "  ndarray %s differs\n", di->name);
            CHECK(0);
        }
    }
    CHECK((v = tbx_meta_find(f, "nd.empty")) && tbx_value_len(v) == 0);
    CHECK((v = tbx_meta_find(f, "nd.scalar")) && !tbx_value_ndarray(v, &dt, &nd, &sh) && dt == TBX_DT_F32 && nd == 0);
    CHECK((v = tbx_meta_find(f, "arr.u32")) && !tbx_value_ndarray(v, &dt, &nd, &sh) && dt == TBX_DT_U32 && nd == 1 && sh[0] == 5);
    const uint32_t *u32s = tbx_value_data(v, &nb);
    CHECK(u32s && nb == 20 && u32s[4] == 4000);
    CHECK((v = tbx_meta_find(f, "arr.f64")) && !tbx_value_ndarray(v, &dt, &nd, &sh) && dt == TBX_DT_F64 && sh[0] == 2);
    const double *f64s = tbx_value_data(v, &nb);
    CHECK(f64s && f64s[1] == -2.25);
    tbx_close(f);
    /* the file validates */
    uint64_t np = 0;
    CHECK_OK(tbx_validate_path(path, NULL, NULL, NULL, &np));
    CHECK_EQ(np, 0);
    unlink(path);
}

TBX_TEST(writer_refuses_lossy_metadata) {
    char path[600];
    tbx_writer *w = wopen("lossy.oinf", 0, path, sizeof path);
    CHECK(w != NULL);
    if (!w) return;
    tbx_error e;
    tbx_value *v = tbx_value_new_null();
    CHECK_EQ(tbx_writer_add_meta(w, "n", 1, v, &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "\"n\"") && strstr(e.message, "null"));
    tbx_value_free(v);
    v = tbx_value_new_bytes("ab", 2);
    CHECK_EQ(tbx_writer_add_meta(w, "by", 2, v, &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "bytes") != NULL);
    tbx_value_free(v);
    v = tbx_value_new_map();
    CHECK_EQ(tbx_writer_add_meta(w, "m", 1, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    v = tbx_value_new_array(TBX_V_STRING);
    tbx_value_array_push(v, tbx_value_new_string("a", 1));
    CHECK_EQ(tbx_writer_add_meta(w, "as", 2, v, &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "strings") != NULL);
    tbx_value_free(v);
    v = tbx_value_new_array(TBX_V_NULL);
    tbx_value_array_push(v, tbx_value_new_uint(TBX_V_U8, 1));
    tbx_value_array_push(v, tbx_value_new_int(TBX_V_I8, 1));
    CHECK_EQ(tbx_writer_add_meta(w, "mixed", 5, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    v = tbx_value_new_array(TBX_V_NULL);
    CHECK_EQ(tbx_writer_add_meta(w, "empty", 5, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    uint64_t s2 = 2;
    const float c64[4] = {1, 2, 3, 4};
    v = tbx_value_new_ndarray(TBX_DT_C64, &s2, 1, c64, 16);
    CHECK_EQ(tbx_writer_add_meta(w, "cplx", 4, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    /* charset: keys and string values */
    v = tbx_value_new_string("has space", 9);
    CHECK_EQ(tbx_writer_add_meta(w, "s", 1, v, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "' '") != NULL);
    CHECK_EQ(tbx_writer_add_meta(w, "k/ey", 4, v, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "'/'") != NULL);
    tbx_value_free(v);
    v = tbx_value_new_string("", 0);
    CHECK_EQ(tbx_writer_add_meta(w, "empty", 5, v, &e), TBX_E_FORMAT);
    CHECK_EQ(tbx_writer_add_meta(w, "", 0, v, &e), TBX_E_FORMAT);
    tbx_value_free(v);
    /* dtypes and names */
    uint64_t d256 = 256;
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "q", 0, TBX_DT_Q4_K, 1, &d256, 1};
    CHECK_EQ(tbx_writer_add_tensor(w, &d, NULL, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "q4_k") != NULL);
    d.dtype = TBX_DT_F8_E4M3;
    CHECK_EQ(tbx_writer_add_tensor(w, &d, NULL, &e), TBX_E_UNSUPPORTED);
    d.dtype = TBX_DT_F32;
    d.name = "bad name";
    CHECK_EQ(tbx_writer_add_tensor(w, &d, NULL, &e), TBX_E_FORMAT);
    CHECK_EQ(tbx_writer_add_section(w, "tok", 0, "x", 1, &e), TBX_E_UNSUPPORTED);
    tbx_writer_abort(w);
    /* unknown version */
    w = wopen("lossy.oinf", 3, path, sizeof path);
    if (w) {
        v = tbx_value_new_bool(1);
        CHECK_EQ(tbx_writer_add_meta(w, "b", 1, v, &e), TBX_E_UNSUPPORTED);
        CHECK_EQ(tbx_writer_finish(w, &e), TBX_E_UNSUPPORTED);
        tbx_value_free(v);
    }
    unlink(path);
    /* writer calls on another format's writer */
    tbx_write_options o;
    tbx_write_options_init(&o);
    o.format = TBX_FORMAT_SAFETENSORS;
    o.flags = TBX_WRITE_OVERWRITE;
    tmp_path(path, sizeof path, "other.safetensors");
    w = NULL;
    CHECK_OK(tbx_writer_open(&w, path, &o, &e));
    CHECK_EQ(tbx_oinf_writer_add_sizevar(w, "B", 1, &e), TBX_E_INVALID_ARG);
    tbx_writer_abort(w);
}

/* Every OINF tensor dtype with data, as a scalar and without data. */
TBX_TEST(roundtrip_every_dtype) {
    static const tbx_dtype dts[] = {TBX_DT_I8, TBX_DT_I16, TBX_DT_I32, TBX_DT_I64, TBX_DT_U8,
                                    TBX_DT_U16, TBX_DT_U32, TBX_DT_U64, TBX_DT_F16, TBX_DT_F32,
                                    TBX_DT_F64, TBX_DT_BOOL, TBX_DT_BITSET, TBX_DT_BF16,
                                    TBX_DT_F8_E5M2, TBX_DT_I4, TBX_DT_I2, TBX_DT_I1, TBX_DT_U4,
                                    TBX_DT_U2, TBX_DT_U1, TBX_DT_T2, TBX_DT_T1};
    enum { ND = sizeof dts / sizeof dts[0] };
    char path[600];
    tbx_writer *w = wopen("dtypes.oinf", 0, path, sizeof path);
    CHECK(w != NULL);
    if (!w) return;
    uint64_t shape[3] = {3, 1, 7};
    uint8_t data[ND][200];
    uint64_t nbytes[ND], sbytes[ND];
    char names[ND][3][32];
    for (int i = 0; i < ND; i++) {
        const tbx_dtype_info *di = tbx_dtype_get(dts[i]);
        CHECK_OK(tbx_dtype_nbytes_shape(dts[i], shape, 3, &nbytes[i]));
        CHECK_OK(tbx_dtype_nbytes_shape(dts[i], NULL, 0, &sbytes[i]));
        for (int k = 0; k < 200; k++) data[i][k] = (uint8_t)(k * 29 + i * 7 + 3);
        if (dts[i] == TBX_DT_BOOL) for (int k = 0; k < 200; k++) data[i][k] &= 1;
        if (dts[i] == TBX_DT_T2) memset(data[i], 0x14, 200); /* 0, 1, 1, 0 */
        if (dts[i] == TBX_DT_F16 || dts[i] == TBX_DT_BF16)
            for (int k = 1; k < 200; k += 2) data[i][k] &= 0x3F; /* finite values */
        if (di->flags & TBX_DTF_PACKED) {
            unsigned used = (unsigned)((21 * di->bits) % 8);
            if (used) data[i][nbytes[i] - 1] &= (uint8_t)((1u << used) - 1);
        }
        snprintf(names[i][0], 32, "t.%s", di->name);
        snprintf(names[i][1], 32, "s.%s", di->name);
        snprintf(names[i][2], 32, "n.%s", di->name);
        CHECK_OK(wtensor(w, names[i][0], dts[i], 3, shape, NULL, 0, true));
        CHECK_OK(wtensor(w, names[i][1], dts[i], 0, NULL, NULL, 0, true));
        CHECK_OK(wtensor(w, names[i][2], dts[i], 3, shape, NULL, 0, false));
    }
    for (int i = 0; i < ND; i++) {
        CHECK_OK(wdata(w, 3 * (uint64_t)i, data[i], (size_t)nbytes[i]));
        uint8_t s[8];
        memcpy(s, data[i], sizeof s);
        const tbx_dtype_info *di = tbx_dtype_get(dts[i]);
        if (di->flags & TBX_DTF_PACKED) s[0] &= (uint8_t)((1u << di->bits) - 1);
        CHECK_OK(wdata(w, 3 * (uint64_t)i + 1, s, (size_t)sbytes[i]));
    }
    CHECK_OK(wfinish(w));
    tbx_file *f = open_path(path);
    CHECK(f != NULL);
    if (!f) return;
    tbx_error e;
    for (int i = 0; i < ND; i++) {
        uint64_t idx;
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_find(f, names[i][0], &idx));
        CHECK_OK(tbx_tensor_info_get(f, idx, &ti));
        CHECK_EQ(ti.dtype, dts[i]);
        CHECK(ti.ndim == 3 && ti.shape[0] == 3 && ti.shape[1] == 1 && ti.shape[2] == 7);
        CHECK_EQ(ti.nbytes, nbytes[i]);
        CHECK_EQ(ti.offset % 8, 0);
        uint8_t got[200];
        size_t need;
        CHECK_OK(tbx_tensor_read(f, idx, got, sizeof got, &need, &e));
        CHECK(need == nbytes[i] && memcmp(got, data[i], need) == 0);
        float fv[21], ref[21];
        CHECK_OK(tbx_tensor_read_f32(f, idx, 0, 21, fv, &e));
        CHECK_OK(tbx_decode_f32(dts[i], data[i], (size_t)nbytes[i], 21, ref));
        CHECK(memcmp(fv, ref, sizeof fv) == 0);
        CHECK_OK(tbx_tensor_find(f, names[i][1], &idx));
        CHECK_OK(tbx_tensor_info_get(f, idx, &ti));
        CHECK(ti.ndim == 0 && ti.nelems == 1 && ti.nbytes == sbytes[i] && ti.nbytes == (tbx_dtype_get(dts[i])->bits + 7) / 8);
        CHECK_OK(tbx_tensor_find(f, names[i][2], &idx));
        CHECK_OK(tbx_tensor_info_get(f, idx, &ti));
        CHECK(ti.ncomponents == 0 && ti.offset == 0 && ti.nbytes == 0 && ti.nelems == 21);
    }
    tbx_close(f);
    uint64_t np = 0;
    CHECK_OK(tbx_validate_path(path, NULL, NULL, NULL, &np));
    CHECK_EQ(np, 0);
    unlink(path);
}

/* Independent packer: LSB-first bitstream, value k at bit k * bits. */
static void ref_pack(uint8_t *dst, const int *vals, size_t n, unsigned bits) {
    memset(dst, 0, (n * bits + 7) / 8);
    for (size_t k = 0; k < n; k++) {
        unsigned code = (unsigned)vals[k] & ((1u << bits) - 1);
        for (unsigned b = 0; b < bits; b++)
            if (code >> b & 1) dst[(k * bits + b) / 8] |= (uint8_t)(1u << ((k * bits + b) % 8));
    }
}

/* Every packed dtype, every representable value at every position, odd counts, scalars, as
 * tensors and as metadata ndarrays. */
TBX_TEST(packed_exhaustive_roundtrip) {
    static const struct { tbx_dtype dt; unsigned bits; int lo, hi; bool t1; } P[] = {
        {TBX_DT_I4, 4, -8, 7, false}, {TBX_DT_I2, 2, -2, 1, false}, {TBX_DT_I1, 1, -1, 0, false},
        {TBX_DT_U4, 4, 0, 15, false}, {TBX_DT_U2, 2, 0, 3, false},  {TBX_DT_U1, 1, 0, 1, false},
        {TBX_DT_T2, 2, -1, 1, false}, {TBX_DT_T1, 1, -1, 1, true},
    };
    for (size_t p = 0; p < sizeof P / sizeof P[0]; p++) {
        int vals[32];
        int nv = 0;
        for (int x = P[p].lo; x <= P[p].hi; x++)
            if (!P[p].t1 || x != 0) vals[nv++] = x;
        char path[600];
        tbx_writer *w = wopen("packed.oinf", 0, path, sizeof path);
        CHECK(w != NULL);
        if (!w) continue;
        /* tensors: counts 1, 3, ..., 37, every rotation of the value list */
        int ncases = 0;
        static int seq[19 * 16][40];
        static uint8_t pk[19 * 16][40];
        static size_t cnt[19 * 16];
        for (int n = 1; n <= 37; n += 2)
            for (int r = 0; r < nv; r++) {
                int c = ncases++;
                cnt[c] = (size_t)n;
                for (int k = 0; k < n; k++) seq[c][k] = vals[(k + r) % nv];
                int codes[40];
                for (int k = 0; k < n; k++) codes[k] = P[p].t1 ? (seq[c][k] > 0) : seq[c][k];
                ref_pack(pk[c], codes, (size_t)n, P[p].bits);
                char name[32];
                snprintf(name, sizeof name, "t%d", c);
                uint64_t shape = (uint64_t)n;
                CHECK_OK(wtensor(w, name, P[p].dt, 1, &shape, NULL, 0, true));
                uint64_t s2 = (uint64_t)n;
                snprintf(name, sizeof name, "m%d", c);
                CHECK_OK(wmeta(w, name, tbx_value_new_ndarray(P[p].dt, &s2, 1, pk[c], ((size_t)n * P[p].bits + 7) / 8)));
            }
        /* scalars: one per value */
        for (int k = 0; k < nv; k++) {
            char name[32];
            snprintf(name, sizeof name, "s%d", k);
            CHECK_OK(wtensor(w, name, P[p].dt, 0, NULL, NULL, 0, true));
        }
        for (int c = 0; c < ncases; c++) CHECK_OK(wdata(w, (uint64_t)c, pk[c], (cnt[c] * P[p].bits + 7) / 8));
        for (int k = 0; k < nv; k++) {
            int code = P[p].t1 ? (vals[k] > 0) : vals[k];
            uint8_t b;
            ref_pack(&b, &code, 1, P[p].bits);
            CHECK_OK(wdata(w, (uint64_t)(ncases + k), &b, 1));
        }
        CHECK_OK(wfinish(w));
        tbx_file *f = open_path(path);
        CHECK(f != NULL);
        if (!f) continue;
        tbx_error e;
        int bad = 0;
        for (int c = 0; c < ncases; c++) {
            char name[32];
            uint64_t idx;
            snprintf(name, sizeof name, "t%d", c);
            if (tbx_tensor_find(f, name, &idx) != TBX_OK) { bad++; continue; }
            uint8_t got[40];
            size_t need;
            if (tbx_tensor_read(f, idx, got, sizeof got, &need, &e) != TBX_OK ||
                need != (cnt[c] * P[p].bits + 7) / 8 || memcmp(got, pk[c], need) != 0)
                bad++;
            float fv[40];
            if (tbx_tensor_read_f32(f, idx, 0, cnt[c], fv, &e) != TBX_OK) bad++;
            for (size_t k = 0; k < cnt[c]; k++)
                if (fv[k] != (float)seq[c][k]) bad++;
            /* ranged reads starting inside a byte */
            if (cnt[c] > 3 && (tbx_tensor_read_f32(f, idx, 1, cnt[c] - 2, fv, &e) != TBX_OK ||
                               fv[0] != (float)seq[c][1] || fv[cnt[c] - 3] != (float)seq[c][cnt[c] - 2]))
                bad++;
            snprintf(name, sizeof name, "m%d", c);
            const tbx_value *v = tbx_meta_find(f, name);
            size_t nb = 0;
            const uint8_t *d = v ? tbx_value_data(v, &nb) : NULL;
            if (!d || nb != (cnt[c] * P[p].bits + 7) / 8 || memcmp(d, pk[c], nb) != 0) bad++;
        }
        for (int k = 0; k < nv; k++) {
            char name[32];
            uint64_t idx;
            float fv;
            snprintf(name, sizeof name, "s%d", k);
            if (tbx_tensor_find(f, name, &idx) != TBX_OK ||
                tbx_tensor_read_f32(f, idx, 0, 1, &fv, &e) != TBX_OK || fv != (float)vals[k])
                bad++;
        }
        if (bad) fprintf(stderr, "  packed %s: %d mismatches\n", tbx_dtype_get(P[p].dt)->name, bad);
        CHECK_EQ(bad, 0);
        tbx_close(f);
        uint64_t np = 0;
        CHECK_OK(tbx_validate_path(path, NULL, NULL, NULL, &np));
        CHECK_EQ(np, 0);
        unlink(path);
    }
}

TBX_TEST(f8_is_e5m2_and_rounds) {
    /* the writer stores what the caller gives; the reader decodes E5M2 */
    tfile t;
    memset(&t, 0, sizeof t);
    t.version = 1;
    uint8_t codes[8] = {0x00, 0x3C, 0x3F, 0x7B, 0x7C, 0xFC, 0x7D, 0x01};
    uint64_t d8 = 8;
    add_tn(&t, "f8", 17, 1, &d8, codes, 8, true);
    ob b = build(&t, NULL);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(b.p, b.n, NULL, &f, &e));
    float fv[8];
    CHECK(f && tbx_tensor_read_f32(f, 0, 0, 8, fv, &e) == TBX_OK);
    CHECK(fv[0] == 0.0f && fv[1] == 1.0f && fv[2] == 1.75f && fv[3] == 57344.0f);
    CHECK(isinf(fv[4]) && fv[4] > 0 && isinf(fv[5]) && fv[5] < 0 && isnan(fv[6]));
    CHECK(fv[7] == ldexpf(1.0f, -16));
    /* nearest-even encoding (the reference loses the carry: 1.875 -> 1.0) */
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2, 1.875f), 0x40);
    tbx_close(f);
    free(b.p);
    tfile_free(&t);
}

/* ------------------------------------------------------------------------------------------ */
/* Malformed files                                                                             */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(truncation_at_every_offset) {
    for (int s = 0; s < 2; s++) {
        tfile t;
        if (s == 0) sample_v1(&t);
        else sample_v2(&t);
        ob b = build(&t, NULL);
        int bad = 0;
        for (size_t n = 0; n < b.n; n++) {
            tbx_file *f = NULL;
            tbx_error e;
            uint8_t *cut = malloc(n ? n : 1);
            memcpy(cut, b.p, n);
            tbx_status st = open_mem(cut, n, NULL, &f, &e);
            if (st == TBX_OK || f != NULL || e.message[0] == 0 ||
                (n >= 5 && st != TBX_E_TRUNCATED)) {
                if (bad++ < 5)
                    fprintf(stderr, "  v%d cut at %zu: %s %s\n", s + 1, n, tbx_status_name(st),
                            e.message);
            }
            tbx_close(f);
            free(cut);
        }
        CHECK_EQ(bad, 0);
        free(b.p);
        tfile_free(&t);
    }
}

TBX_TEST(header_rules) {
    tfile t;
    sample_v1(&t);
    tpos P;
    ob b = build(&t, &P);
    uint8_t *m = malloc(b.n);
#define MUT(what, code, field, needle, stmt)                                                   \
    do {                                                                                        \
        memcpy(m, b.p, b.n);                                                                    \
        stmt;                                                                                   \
        CHECK(expect_fail(what, m, b.n, code, field, needle));                                  \
    } while (0)
    MUT("magic", TBX_E_BAD_MAGIC, "magic", NULL, m[3] = 'X');
    MUT("magic nul", TBX_E_BAD_MAGIC, "magic", NULL, m[4] = 1);
    MUT("version 0", TBX_E_BAD_VERSION, "version", "0", put32(m + 5, 0));
    MUT("version 3", TBX_E_BAD_VERSION, "version", "3", put32(m + 5, 3));
    MUT("file_size big", TBX_E_TRUNCATED, "file_size", NULL, put64(m + 61, b.n + 8));
    MUT("file_size small", TBX_E_FORMAT, "file_size", NULL, put64(m + 61, b.n - 8));
    MUT("sizevars inside header", TBX_E_RANGE, "offset_sizevars", NULL, put64(m + 29, 64));
    MUT("metadata unaligned", TBX_E_RANGE, "offset_metadata", "multiple of 8", put64(m + 37, P.off_md + 4));
    MUT("tensors before metadata", TBX_E_RANGE, "offset_tensors", "decrease", put64(m + 45, P.off_md - 8));
    MUT("data past the end", TBX_E_RANGE, "file_size", NULL, put64(m + 53, b.n + 8));
    MUT("data unaligned", TBX_E_RANGE, "offset_data", NULL, put64(m + 53, P.off_data + 1));
    MUT("too many sizevars", TBX_E_TRUNCATED, "n_sizevars", NULL, put32(m + 13, 1000));
    MUT("too many metadata", TBX_E_LIMIT, "n_metadata", "limit", put32(m + 17, 0xFFFFFFFFu));
    MUT("too many metadata for the table", TBX_E_TRUNCATED, "n_metadata", NULL, put32(m + 17, 100));
    MUT("one more tensor", TBX_E_FORMAT, "tensor.name", "empty", put32(m + 21, 6));
    MUT("sizevar table short", TBX_E_TRUNCATED, "sizevars", NULL, put64(m + 37, P.off_md - 8));
    MUT("one more metadata entry", TBX_E_TRUNCATED, "metadata", NULL, put32(m + 17, 7));
#undef MUT
    /* tensor count above the limit */
    tbx_limits lim;
    tbx_limits_default(&lim);
    lim.max_tensors = 4;
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_EQ(open_mem(b.p, b.n, &lim, &f, &e), TBX_E_LIMIT);
    CHECK(strstr(e.field, "n_tensors") != NULL);
    tbx_limits_default(&lim);
    lim.max_string_len = 4;
    CHECK_EQ(open_mem(b.p, b.n, &lim, &f, &e), TBX_E_LIMIT);
    tbx_limits_default(&lim);
    lim.max_ndim = 1;
    CHECK_EQ(open_mem(b.p, b.n, &lim, &f, &e), TBX_E_LIMIT);
    tbx_limits_default(&lim);
    lim.max_metadata_entries = 5;
    CHECK_EQ(open_mem(b.p, b.n, &lim, &f, &e), TBX_E_LIMIT);
    free(m);
    free(b.p);
    tfile_free(&t);
}

TBX_TEST(table_rules) {
    tfile t;
    sample_v1(&t);
    tpos P;
    ob b = build(&t, &P);
    uint8_t *m = malloc(b.n);
#define MUT(what, code, field, needle, stmt)                                                   \
    do {                                                                                        \
        memcpy(m, b.p, b.n);                                                                    \
        stmt;                                                                                   \
        CHECK(expect_fail(what, m, b.n, code, field, needle));                                  \
    } while (0)
    /* names: charset, empty, duplicates */
    MUT("sizevar charset", TBX_E_FORMAT, "sizevars.name", "' '", m[P.sv[0] + 4] = ' ');
    MUT("sizevar dup", TBX_E_DUPLICATE, "sizevars.name", "\"B\"", m[P.sv[1] + 4] = 'B');
    MUT("sizevar empty", TBX_E_FORMAT, "sizevars.name", "empty", put32(m + P.sv[0], 0));
    MUT("key charset", TBX_E_FORMAT, "metadata.key", "0xff", m[P.md[0] + 4] = 0xFF);
    MUT("key dup", TBX_E_DUPLICATE, "metadata.key", "flag", memcpy(m + P.md[3] + 4, "flag", 4));
    MUT("key length runs past the table", TBX_E_TRUNCATED, "metadata.key", NULL, put32(m + P.md[5], 4000));
    MUT("tensor charset", TBX_E_FORMAT, "tensor.name", "'/'", m[P.tn[0] + 4] = '/');
    MUT("tensor dup", TBX_E_DUPLICATE, "tensor.name", NULL, m[P.tn[1] + 4] = 'b');
    MUT("string value charset", TBX_E_FORMAT, "metadata.value", "'!'", m[P.md_payload[3] + 6] = '!');
    /* type tags */
    MUT("meta type 0", TBX_E_FORMAT, "value_type", NULL, put32(m + P.md_type[0], 0));
    MUT("meta type 26", TBX_E_FORMAT, "value_type", "26", put32(m + P.md_type[0], 26));
    MUT("tensor dtype string", TBX_E_FORMAT, "tensor.dtype", NULL, put32(m + P.tn_dtype[0], 14));
    MUT("tensor dtype ndarray", TBX_E_FORMAT, "tensor.dtype", NULL, put32(m + P.tn_dtype[0], 15));
    MUT("tensor dtype 0", TBX_E_FORMAT, "tensor.dtype", NULL, put32(m + P.tn_dtype[0], 0));
    MUT("tensor dtype 99", TBX_E_FORMAT, "tensor.dtype", NULL, put32(m + P.tn_dtype[0], 99));
    MUT("ndarray element bitset", TBX_E_FORMAT, "element_type", NULL, put32(m + P.md_payload[4], 13));
    MUT("ndarray element string", TBX_E_FORMAT, "element_type", NULL, put32(m + P.md_payload[4], 14));
    MUT("ndarray element 0", TBX_E_FORMAT, "element_type", NULL, put32(m + P.md_payload[4], 0));
    /* payload offsets */
    MUT("meta offset unaligned", TBX_E_RANGE, "value_offset", "multiple of 8", put64(m + P.md_type[0] + 16, P.md_payload[0] + 4));
    MUT("meta offset in tables", TBX_E_RANGE, "value_offset", "precedes", put64(m + P.md_type[0] + 16, P.off_tn));
    MUT("meta offset past end", TBX_E_RANGE, "value_offset", NULL, put64(m + P.md_type[0] + 16, b.n));
    MUT("meta nbytes huge", TBX_E_RANGE, "value_offset", NULL, put64(m + P.md_type[0] + 8, UINT64_MAX));
    size_t w_nb = P.tn_dtype[3] + 12 + 16; /* "w": f32 [2, 2] */
    MUT("data offset unaligned", TBX_E_RANGE, "data_offset", NULL, put64(m + w_nb + 8, P.tn_data[3] + 2));
    MUT("data offset before data", TBX_E_RANGE, "data_offset", NULL, put64(m + w_nb + 8, 8));
    MUT("data past end", TBX_E_RANGE, "data_offset", NULL, put64(m + w_nb + 8, b.n - 8));
    /* nbytes per kind */
    MUT("scalar nbytes", TBX_E_FORMAT, "value_nbytes", "exactly 4", put64(m + P.md_type[0] + 8, 8));
    MUT("bool nbytes", TBX_E_FORMAT, "value_nbytes", "exactly 1", put64(m + P.md_type[2] + 8, 8));
    MUT("packed scalar nbytes", TBX_E_FORMAT, "value_nbytes", NULL, put64(m + P.md_type[5] + 8, 2));
    MUT("string nbytes unpadded", TBX_E_FORMAT, "value_nbytes", "padded", put64(m + P.md_type[3] + 8, 12));
    MUT("string length", TBX_E_FORMAT, "value_nbytes", NULL, put32(m + P.md_payload[3], 13));
    MUT("string length into padding", TBX_E_FORMAT, "metadata.value", "0x00", put32(m + P.md_payload[3], 9));
    MUT("string empty", TBX_E_FORMAT, "metadata.value", "empty", put32(m + P.md_payload[3], 0));
    MUT("bitset nbytes", TBX_E_FORMAT, "value_nbytes", NULL, put64(m + P.md_type[1] + 8, 10));
    MUT("bitset byte_count", TBX_E_FORMAT, "byte_count", NULL, put32(m + P.md_payload[1] + 4, 3));
    MUT("bitset bit_count", TBX_E_FORMAT, "byte_count", NULL, put32(m + P.md_payload[1], 17));
    MUT("ndarray nbytes exact", TBX_E_FORMAT, "value_nbytes", NULL, put64(m + P.md_type[4] + 8, 36));
    MUT("ndarray dims", TBX_E_FORMAT, "value_nbytes", NULL, put64(m + P.md_payload[4] + 8, 3));
    MUT("ndarray ndim", TBX_E_FORMAT, "ndim", NULL, put32(m + P.md_payload[4] + 4, 9));
    MUT("ndarray overflow", TBX_E_OVERFLOW, "dims", NULL,
        (put64(m + P.md_payload[4] + 8, 1ull << 40), put64(m + P.md_payload[4] + 16, 1ull << 40)));
    MUT("tensor nbytes", TBX_E_FORMAT, "data_nbytes", "expected 16", put64(m + w_nb, 12));
    MUT("packed tensor nbytes", TBX_E_FORMAT, "data_nbytes", "expected 2", put64(m + P.tn_dtype[1] + 12 + 8, 5));
    MUT("bool tensor nbytes", TBX_E_FORMAT, "data_nbytes", NULL, put64(m + P.tn_dtype[0] + 12 + 8, 1));
    MUT("no data but offset", TBX_E_FORMAT, "data_offset", "HAS_DATA", put64(m + P.tn_dtype[2] + 12 + 16 + 8, 8));
    MUT("tensor shape overflow", TBX_E_OVERFLOW, "dims",
        NULL, (put64(m + P.tn_dtype[3] + 12, 1ull << 62), put64(m + P.tn_dtype[3] + 20, 1ull << 62)));
    MUT("tensor ndim past table", TBX_E_TRUNCATED, "tensor", NULL, put32(m + P.tn_dtype[4] + 4, 40));
#undef MUT
    free(m);
    free(b.p);
    tfile_free(&t);
}

TBX_TEST(quant_payload_rules) {
    tfile t;
    sample_v2(&t);
    tpos P;
    ob b = build(&t, &P);
    uint8_t *m = malloc(b.n);
    size_t q = P.tn_quant[1];                           /* "qw" payload */
    size_t qnb = P.tn_dtype[1] + 12 + 16 + 16;          /* "qw": u64 quant_nbytes */
#define MUT(what, code, field, needle, stmt)                                                   \
    do {                                                                                        \
        memcpy(m, b.p, b.n);                                                                    \
        stmt;                                                                                   \
        CHECK(expect_fail(what, m, b.n, code, field, needle));                                  \
    } while (0)
    MUT("scheme 3", TBX_E_FORMAT, "quant.scheme", NULL, put32(m + q, 3));
    MUT("scale_mode 0", TBX_E_FORMAT, "quant.scale_mode", NULL, put32(m + q + 4, 0));
    MUT("zp_mode 3", TBX_E_FORMAT, "quant.zp_mode", NULL, put32(m + q + 8, 3));
    MUT("asym without zp", TBX_E_FORMAT, "quant.zp_mode", NULL, put32(m + q + 8, 0));
    MUT("scale axis out of shape", TBX_E_FORMAT, "quant.scale_axis", NULL, put64(m + q + 16, 2));
    MUT("scale count", TBX_E_FORMAT, "quant.scale_count", "shape[0] = 2", put64(m + q + 24, 3));
    MUT("zp axis", TBX_E_FORMAT, "quant.zp_axis", NULL, put64(m + q + 32, 7));
    MUT("zp count", TBX_E_FORMAT, "quant.zp_count", NULL, put64(m + q + 40, 1));
    MUT("zp axis 1 count", TBX_E_FORMAT, "quant.zp_count", "shape[1] = 3", put64(m + q + 32, 1));
    MUT("quant nbytes", TBX_E_FORMAT, "quant_nbytes", "take 64", put64(m + qnb, 72));
    MUT("quant nbytes small", TBX_E_FORMAT, "quant_nbytes", NULL, put64(m + qnb, 16));
    MUT("quant offset unaligned", TBX_E_RANGE, "quant_offset", NULL, put64(m + qnb + 8, q + 4));
    MUT("quant past end", TBX_E_RANGE, "quant_offset", NULL, put64(m + qnb + 8, b.n - 8));
    MUT("quant without data", TBX_E_FORMAT, "data_nbytes", NULL, put32(m + P.tn_dtype[1] + 8, 2));
    MUT("no quant but offset", TBX_E_FORMAT, "quant_nbytes", "HAS_QUANT", put32(m + P.tn_dtype[1] + 8, 1));
    /* per-tensor symmetric "qs": scale count must be 1, zp count 0 */
    size_t qs = P.tn_quant[0];
    MUT("per tensor count", TBX_E_FORMAT, "quant.scale_count", "expected 1", put64(m + qs + 24, 3));
    MUT("per tensor axis", TBX_E_FORMAT, "quant.scale_axis", "expected 0", put64(m + qs + 16, 1));
    MUT("sym with zp", TBX_E_FORMAT, "quant.zp_mode", NULL, put32(m + qs + 8, 1));
    /* huge counts do not allocate: they fail the shape check first */
    MUT("huge scale count", TBX_E_FORMAT, "quant.scale_count", NULL, put64(m + q + 24, 1ull << 60));
    MUT("huge zp count", TBX_E_FORMAT, "quant.zp_count", NULL, put64(m + q + 40, UINT64_MAX));
#undef MUT
    /* v1 files have no quant fields: the v2 flag bit is an unknown flag there */
    tfile t1;
    sample_v1(&t1);
    tpos P1;
    ob b1 = build(&t1, &P1);
    put32(b1.p + P1.tn_dtype[3] + 8, 3);
    CHECK(expect_fail("v1 quant flag", b1.p, b1.n, TBX_E_FORMAT, "tensor.flags", "unknown"));
    problems pr;
    CHECK_EQ(validate_bytes(b1.p, b1.n, &pr), TBX_E_FORMAT);
    CHECK(has_problem(&pr, TBX_E_FORMAT, "tensor.flags"));
    free(b1.p);
    tfile_free(&t1);
    free(m);
    free(b.p);
    tfile_free(&t);
}

/* Recoverable problems: strict open fails, validate reports and goes on. */
TBX_TEST(problems_reported_by_validate) {
    tfile t;
    sample_v1(&t);
    tpos P;
    ob b = build(&t, &P);
    uint8_t *m = malloc(b.n);
    problems pr;
    struct {
        const char *what;
        tbx_status code;
        const char *field;
        size_t at;
        int width;
        uint64_t val;
        bool open_fails;
    } cases[] = {
        {"header flags", TBX_E_FORMAT, "header.flags", 9, 4, 1, true},
        {"header reserved", TBX_E_FORMAT, "header.reserved", 25, 4, 7, true},
        {"header padding", TBX_E_PADDING, "header.padding", 70, 1, 1, true},
        {"value flags", TBX_E_FORMAT, "value_flags", P.md_type[0] + 4, 4, 1, true},
        {"string padding", TBX_E_PADDING, "sizevars.name", P.sv[0] + 6, 1, 9, true},
        {"bool meta byte", TBX_E_FORMAT, "metadata.value", P.md_payload[2], 1, 2, true},
        {"packed meta high bits", TBX_E_PADDING, "metadata.value", P.md_payload[5], 1, 0xFD, true},
        {"bitset high bits", TBX_E_PADDING, "metadata.value", P.md_payload[1] + 9, 1, 0x03, true},
        {"bitset payload padding", TBX_E_PADDING, "metadata.value", P.md_payload[1] + 12, 1, 1, true},
        {"ndarray padding", TBX_E_PADDING, "metadata.value", P.md_payload[4] + 24 + 12 + 1, 1, 1, true},
        {"gap after table", TBX_E_PADDING, "padding", P.off_data - 2, 1, 1, false},
        {"gap after payload", TBX_E_PADDING, "padding", P.md_payload[0] + 5, 1, 1, false},
        {"tail padding", TBX_E_PADDING, "padding", b.n - 1, 1, 1, false},
        {"bool tensor byte", TBX_E_FORMAT, "tensor.data", P.tn_data[0] + 1, 1, 7, false},
        {"t2 code 2", TBX_E_FORMAT, "tensor.data", P.tn_data[1], 1, 0x72, false},
        {"t2 tail bits", TBX_E_PADDING, "tensor.data", P.tn_data[1] + 1, 1, 0x04, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(m, b.p, b.n);
        if (cases[i].width == 1) m[cases[i].at] = (uint8_t)cases[i].val;
        else put32(m + cases[i].at, (uint32_t)cases[i].val);
        tbx_file *f = NULL;
        tbx_error e;
        tbx_status st = open_mem(m, b.n, NULL, &f, &e);
        if (cases[i].open_fails) {
            if (st != cases[i].code) fprintf(stderr, "  %s: open gave %s %s\n", cases[i].what, tbx_status_name(st), e.message);
            CHECK_EQ(st, cases[i].code);
        } else {
            CHECK_OK(st);
        }
        tbx_close(f);
        tbx_status vs = validate_bytes(m, b.n, &pr);
        if (vs != cases[i].code) fprintf(stderr, "  %s: validate gave %s\n", cases[i].what, tbx_status_name(vs));
        CHECK_EQ(vs, cases[i].code);
        CHECK(has_problem(&pr, cases[i].code, cases[i].field));
        if (pr.n == 0 || pr.msgs[0][0] == 0) CHECK(0);
    }
    /* several problems in one file are all reported */
    memcpy(m, b.p, b.n);
    put32(m + 9, 1);
    m[70] = 1;
    m[P.tn_data[0] + 1] = 9;
    CHECK_EQ(validate_bytes(m, b.n, &pr), TBX_E_FORMAT);
    CHECK_EQ(pr.n, 3);
    free(m);
    free(b.p);
    tfile_free(&t);
}

/* One-byte mutations of both samples: open and walk never crash (run under ASan too). */
TBX_TEST(mutations_fail_cleanly) {
    for (int s = 0; s < 2; s++) {
        tfile t;
        if (s == 0) sample_v1(&t);
        else sample_v2(&t);
        ob b = build(&t, NULL);
        uint8_t *m = malloc(b.n);
        static const uint8_t vals[] = {0x00, 0x01, 0x07, 0x08, 0x80, 0xFF};
        int opened = 0, failed = 0;
        for (size_t i = 0; i < b.n; i++)
            for (size_t k = 0; k < sizeof vals; k++) {
                if (b.p[i] == vals[k]) continue;
                memcpy(m, b.p, b.n);
                m[i] = vals[k];
                tbx_file *f = NULL;
                tbx_error e;
                tbx_status st = open_mem(m, b.n, NULL, &f, &e);
                if (st == TBX_OK) {
                    opened++;
                    for (uint64_t j = 0; j < tbx_tensor_count(f); j++) {
                        float fv[64];
                        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
                        tbx_tensor_info_get(f, j, &ti);
                        if (ti.nelems <= 64) tbx_tensor_read_f32(f, j, 0, ti.nelems, fv, &e);
                    }
                } else {
                    failed++;
                    if (e.message[0] == 0) CHECK(0);
                }
                tbx_close(f);
            }
        CHECK(failed > 0 && opened > 0);
        free(m);
        free(b.p);
        tfile_free(&t);
    }
}

TBX_TEST(sizevar_and_quant_accessors_check_the_handle) {
    /* a safetensors handle is not an OINF handle */
    const char *json = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    size_t jl = strlen(json);
    uint8_t buf[128];
    put64(buf, jl);
    memcpy(buf + 8, json, jl);
    buf[8 + jl] = 7;
    tbx_file *f = NULL;
    tbx_error e;
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    CHECK_OK(tbx_open_memory(&f, buf, 8 + jl + 1, &opt, &e));
    CHECK_EQ(tbx_oinf_sizevar_count(f), 0);
    CHECK_EQ(tbx_oinf_sizevar_get(f, 0, NULL, NULL, NULL), TBX_E_INVALID_ARG);
    tbx_oinf_quant q;
    CHECK_EQ(tbx_oinf_tensor_quant(f, 0, &q), TBX_E_INVALID_ARG);
    tbx_close(f);
    CHECK_EQ(tbx_oinf_sizevar_count(NULL), 0);
    CHECK_EQ(tbx_oinf_writer_add_sizevar(NULL, "B", 1, &e), TBX_E_INVALID_ARG);
}

TBX_TEST(gap_after_header) {
    tfile t;
    sample_v1(&t);
    t.lead_gap = 16;
    tpos P;
    ob b = build(&t, &P);
    CHECK_EQ(P.off_sv, 88);
    problems pr;
    CHECK_OK(validate_bytes(b.p, b.n, &pr));
    CHECK_EQ(pr.n, 0);
    b.p[80] = 1;
    CHECK_EQ(validate_bytes(b.p, b.n, &pr), TBX_E_PADDING);
    CHECK(has_problem(&pr, TBX_E_PADDING, "padding") && strstr(pr.msgs[0], "after the header"));
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_mem(b.p, b.n, NULL, &f, &e)); /* a gap needs reading: validate's job */
    tbx_close(f);
    free(b.p);
    tfile_free(&t);
}

TBX_TEST(v2_reader_without_quant_and_gaps) {
    /* a v2 file whose tables are followed by zero gaps larger than the alignment opens; the
     * writer's alignment option places tensor data on larger boundaries */
    char path[600];
    tbx_write_options o;
    tbx_write_options_init(&o);
    o.format = TBX_FORMAT_OINF;
    o.flags = TBX_WRITE_OVERWRITE;
    o.version = 2;
    o.alignment = 64;
    tmp_path(path, sizeof path, "aligned.oinf");
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &o, &e));
    if (!w) return;
    uint64_t d3 = 3;
    CHECK_OK(wmeta(w, "k", tbx_value_new_uint(TBX_V_U8, 1)));
    CHECK_OK(wtensor(w, "a", TBX_DT_U8, 1, &d3, NULL, 0, true));
    CHECK_OK(wtensor(w, "b", TBX_DT_U8, 1, &d3, NULL, 0, true));
    CHECK_OK(wdata(w, 0, "abc", 3));
    CHECK_OK(wdata(w, 1, "def", 3));
    CHECK_OK(wfinish(w));
    tbx_file *f = open_path(path);
    CHECK(f != NULL);
    if (f) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_EQ(tbx_file_version(f), 2);
        CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
        CHECK_EQ(ti.offset % 64, 0);
        CHECK_OK(tbx_tensor_info_get(f, 1, &ti));
        CHECK_EQ(ti.offset % 64, 0);
        tbx_close(f);
    }
    uint64_t np = 0;
    CHECK_OK(tbx_validate_path(path, NULL, NULL, NULL, &np));
    CHECK_EQ(np, 0);
    unlink(path);
}

TBX_TEST_MAIN()
