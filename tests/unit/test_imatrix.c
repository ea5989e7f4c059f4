/*
 * test_imatrix.c - the legacy .dat importance matrix reader (src/models/imatrix.c): a file as
 * llama-imatrix's save_imatrix_legacy writes it gives llama-quantize's vectors (value / ncall),
 * its dataset and chunk count; a table of malformed files, each refused with its status, field
 * and byte offset; every failed allocation is reported without a leak.
 * (The GGUF form and the conversion are tests/python/test_imatrix.py.)
 */
#include "tbx_test.h"
#include "imatrix.h"

#include <math.h>
#include <unistd.h>

/* A .dat built field by field. */
typedef struct dat { uint8_t b[4096]; size_t n; } dat;
static void put32(dat *d, uint32_t v) { tbx_st32(d->b + d->n, v); d->n += 4; }
static void puti(dat *d, int32_t v) { put32(d, (uint32_t)v); }
static void putf(dat *d, float f) { uint32_t u; memcpy(&u, &f, 4); put32(d, u); }
static void puts_(dat *d, const char *s, size_t n) { memcpy(d->b + d->n, s, n); d->n += n; }
static void entry(dat *d, const char *name, int32_t ncall, int32_t nval, float base) {
    puti(d, (int32_t)strlen(name));
    puts_(d, name, strlen(name));
    puti(d, ncall);
    puti(d, nval);
    for (int32_t i = 0; i < nval; i++) putf(d, base + (float)i);
}

static tbx_status rd(const dat *d, const tbx_limits *lim, tbx_imatrix *m, tbx_error *e) {
    tbx_source s;
    tbx_source_open_memory(&s, d->b, d->n);
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    tbx_limits dl;
    tbx_limits_default(&dl);
    return tbx_imatrix_read_dat(&s, &al, lim ? lim : &dl, m, e);
}

/* The file of two entries (written out of order) and the trailer. */
static void good(dat *d) {
    d->n = 0;
    puti(d, 2);
    entry(d, "blk.1.ffn_up.weight", 4, 3, 8.0f);
    entry(d, "blk.0.attn_q.weight", 0, 2, 1.5f);
    puti(d, 37);
    puti(d, 8);
    puts_(d, "data.txt", 8);
}

TBX_TEST(reads_what_llama_imatrix_writes_as_llama_quantize_does) {
    dat d;
    good(&d);
    tbx_imatrix m;
    tbx_error e;
    CHECK_OK(rd(&d, NULL, &m, &e));
    CHECK_EQ(m.n, 2);
    CHECK(m.legacy);
    CHECK_EQ(m.chunk_count, 37);
    CHECK_EQ(m.ndatasets, 1);
    if (m.ndatasets) CHECK_STR(m.datasets[0], "data.txt");
    const tbx_imatrix_entry *a = tbx_imatrix_find(&m, "blk.1.ffn_up.weight", 19);
    const tbx_imatrix_entry *b = tbx_imatrix_find(&m, "blk.0.attn_q.weight", 19);
    CHECK(a && b && !tbx_imatrix_find(&m, "blk.0.attn_q", 12));
    if (a && b) {
        CHECK_EQ(a->n, 3);
        /* value / ncall, in float */
        CHECK(a->v[0] == 8.0f / 4.0f && a->v[1] == 9.0f / 4.0f && a->v[2] == 10.0f / 4.0f);
        CHECK_EQ(b->n, 2); /* ncall 0: the values as they are */
        CHECK(b->v[0] == 1.5f && b->v[1] == 2.5f);
    }
    tbx_imatrix_free(&m);
    tbx_imatrix_free(&m); /* twice: a freed matrix is empty */
    tbx_imatrix_free(NULL);
    /* no trailer, or the chunk count alone: both optional */
    d.n -= 16;
    CHECK_OK(rd(&d, NULL, &m, &e));
    CHECK_EQ(m.chunk_count, 0);
    CHECK_EQ(m.ndatasets, 0);
    tbx_imatrix_free(&m);
    puti(&d, 5);
    CHECK_OK(rd(&d, NULL, &m, &e));
    CHECK_EQ(m.chunk_count, 5);
    tbx_imatrix_free(&m);
    /* a weight named twice: the last one (llama-quantize's map) */
    d.n = 0;
    puti(&d, 3);
    entry(&d, "w", 1, 2, 1.0f);
    entry(&d, "v", 1, 1, 7.0f);
    entry(&d, "w", 2, 4, 10.0f);
    CHECK_OK(rd(&d, NULL, &m, &e));
    CHECK_EQ(m.n, 2);
    a = tbx_imatrix_find(&m, "w", 1);
    CHECK(a && a->n == 4 && a->v[0] == 5.0f);
    tbx_imatrix_free(&m);
}

typedef struct bad_case {
    const char *what;
    void (*make)(dat *d);
    tbx_status st;
    uint64_t at;
    const char *field;
} bad_case;

static void b_empty(dat *d) { d->n = 0; }
static void b_zero(dat *d) { d->n = 0; puti(d, 0); }
static void b_negative_n(dat *d) { d->n = 0; puti(d, -3); }
static void b_more_entries(dat *d) { good(d); tbx_st32(d->b, 100); }
static void b_neg_len(dat *d) { d->n = 0; puti(d, 1); puti(d, -1); put32(d, 0); put32(d, 0); put32(d, 0); }
static void b_long_name(dat *d) { d->n = 0; puti(d, 1); puti(d, 4000); put32(d, 0); put32(d, 0); put32(d, 0); }
static void b_nul_name(dat *d) {
    d->n = 0;
    puti(d, 1);
    puti(d, 3);
    puts_(d, "a\0b", 3);
    puti(d, 1);
    puti(d, 1);
    putf(d, 1.0f);
}
static void b_nval0(dat *d) { d->n = 0; puti(d, 1); entry(d, "w", 1, 0, 0); put32(d, 0); }
static void b_nval_neg(dat *d) { d->n = 0; puti(d, 1); entry(d, "w", 1, 0, 0); tbx_st32(d->b + 13, (uint32_t)-5); put32(d, 0); }
static void b_values_cut(dat *d) { good(d); d->n = 4 + 4 + 19 + 8 + 8; }
static void b_trailer_cut(dat *d) { good(d); d->n -= 14; }
static void b_dataset_cut(dat *d) { good(d); d->n -= 3; }
static void b_trailing(dat *d) { good(d); puti(d, 0); }
static void b_dataset_nul(dat *d) { good(d); d->b[d->n - 2] = 0; }
static void b_nan(dat *d) { good(d); float f = NAN; memcpy(d->b + 4 + 4 + 19 + 8 + 4, &f, 4); }
static void b_inf(dat *d) { good(d); float f = -INFINITY; memcpy(d->b + d->n - 16 - 4, &f, 4); }

TBX_TEST(malformed_files_are_refused_naming_field_and_byte) {
    const bad_case cases[] = {
        {"empty", b_empty, TBX_E_TRUNCATED, 0, "n_entries"},
        {"no entry", b_zero, TBX_E_FORMAT, 0, "n_entries"},
        {"negative count", b_negative_n, TBX_E_FORMAT, 0, "n_entries"},
        {"more entries than bytes", b_more_entries, TBX_E_TRUNCATED, 4, "n_entries"},
        {"negative name length", b_neg_len, TBX_E_FORMAT, 4, "name length"},
        {"name past the end", b_long_name, TBX_E_TRUNCATED, 8, "name length"},
        {"a NUL in a name", b_nul_name, TBX_E_FORMAT, 8, "name"},
        {"no value", b_nval0, TBX_E_FORMAT, 13, "nval"},
        {"negative values", b_nval_neg, TBX_E_FORMAT, 13, "nval"},
        {"values cut", b_values_cut, TBX_E_TRUNCATED, 35, "nval"},
        {"chunk count cut", b_trailer_cut, TBX_E_TRUNCATED, 0, "chunk_count"},
        {"dataset cut", b_dataset_cut, TBX_E_TRUNCATED, 0, "dataset length"},
        {"bytes after the dataset", b_trailing, TBX_E_FORMAT, 0, "trailer"},
        {"a NUL in the dataset", b_dataset_nul, TBX_E_FORMAT, 0, "dataset"},
        {"a NaN", b_nan, TBX_E_FORMAT, TBX_NO_OFFSET, "blk.1.ffn_up.weight"},
        {"an Inf", b_inf, TBX_E_FORMAT, TBX_NO_OFFSET, "blk.0.attn_q.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        dat d;
        c->make(&d);
        /* offsets of the trailer cases count from the end of the entries of good() */
        uint64_t at = c->at;
        const size_t entries_end = 4 + (4 + 19 + 8 + 12) + (4 + 19 + 8 + 8);
        if (c->make == b_trailer_cut) at = entries_end;
        if (c->make == b_dataset_cut) at = entries_end + 8;
        if (c->make == b_trailing) at = entries_end + 16;
        if (c->make == b_dataset_nul) at = entries_end + 8;
        tbx_imatrix m;
        tbx_error e;
        memset(&e, 0, sizeof e);
        tbx_status st = rd(&d, NULL, &m, &e);
        const int ok = st == c->st && e.offset == at && strcmp(e.field, c->field) == 0 &&
                       m.n == 0 && m.e == NULL;
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "%s: status %d at %llu, field %s: %s\n", c->what, (int)st,
                    (unsigned long long)e.offset, e.field, e.message);
    }
}

TBX_TEST(limits_are_checked_before_allocating) {
    dat d;
    good(&d);
    tbx_limits lim;
    tbx_limits_default(&lim);
    tbx_imatrix m;
    tbx_error e;
    lim.max_tensors = 1;
    CHECK_EQ(rd(&d, &lim, &m, &e), TBX_E_LIMIT);
    CHECK_STR(e.field, "n_entries");
    tbx_limits_default(&lim);
    lim.max_string_len = 18;
    CHECK_EQ(rd(&d, &lim, &m, &e), TBX_E_LIMIT);
    CHECK_STR(e.field, "name length");
    CHECK_EQ(e.offset, 4);
    tbx_limits_default(&lim);
    lim.max_array_len = 2;
    CHECK_EQ(rd(&d, &lim, &m, &e), TBX_E_LIMIT);
    CHECK_STR(e.field, "nval");
    CHECK_EQ(e.offset, 31);
    /* a huge declared value count in a small file: refused as truncated, nothing allocated */
    d.n = 0;
    puti(&d, 1);
    entry(&d, "w", 1, 0, 0);
    tbx_st32(d.b + 13, 0x3fffffff);
    putf(&d, 1.0f);
    tbx_fail_al a = {1, 0, 0, 0};
    tbx_allocator fal = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &a};
    tbx_alloc al;
    tbx_alloc_init(&al, &fal);
    tbx_source s;
    tbx_source_open_memory(&s, d.b, d.n);
    tbx_limits_default(&lim);
    CHECK_EQ(tbx_imatrix_read_dat(&s, &al, &lim, &m, &e), TBX_E_TRUNCATED);
    CHECK_STR(e.field, "nval");
    CHECK_EQ(a.live, 0);
}

TBX_TEST(every_failed_allocation_is_reported_without_a_leak) {
    dat d;
    good(&d);
    tbx_source s;
    tbx_source_open_memory(&s, d.b, d.n);
    tbx_limits lim;
    tbx_limits_default(&lim);
    tbx_fail_al count = {1, 0, 0, 0};
    tbx_allocator cal = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &count};
    tbx_alloc al;
    tbx_alloc_init(&al, &cal);
    tbx_imatrix m;
    tbx_error e;
    CHECK_OK(tbx_imatrix_read_dat(&s, &al, &lim, &m, &e));
    tbx_imatrix_free(&m);
    CHECK_EQ(count.live, 0);
    const long total = count.calls;
    CHECK(total >= 6);
    int clean = 1;
    for (long k = 1; k <= total; k++) {
        tbx_fail_al a = {1, 0, k, 0};
        tbx_allocator fal = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &a};
        tbx_alloc_init(&al, &fal);
        tbx_status st = tbx_imatrix_read_dat(&s, &al, &lim, &m, &e);
        if (st != TBX_E_NOMEM || a.live != 0) {
            fprintf(stderr, "allocation %ld failed: status %d, %lld bytes live\n", k, (int)st,
                    a.live);
            clean = 0;
        }
        tbx_imatrix_free(&m);
    }
    CHECK(clean);
}

/* ---- the GGUF form: written here with tensorbox's GGUF writer, read back ---------------- */
static tbx_status put_meta(tbx_writer *w, const char *key, tbx_value *v, tbx_error *e) {
    tbx_status st = tbx_writer_add_meta(w, key, strlen(key), v, e);
    tbx_value_free(v);
    return st;
}

/* An imatrix GGUF: weight "b.w" of 2 experts x 3 columns (counts 2.4 -> 2 and 0), weight "a.w"
 * of 4 columns (count 4), an unrelated tensor; the three keys unless `drop` names one. */
static tbx_status write_gguf(const char *path, const char *drop, tbx_dtype counts_dt,
                             tbx_error *e) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.flags = TBX_WRITE_OVERWRITE;
    wo.format = TBX_FORMAT_GGUF;
    tbx_writer *w = NULL;
    tbx_status st = tbx_writer_open(&w, path, &wo, e);
    if (st != TBX_OK) return st;
    tbx_value *ds = tbx_value_new_array(TBX_V_STRING);
    tbx_value_array_push(ds, tbx_value_new_string("first.txt", 9));
    tbx_value_array_push(ds, tbx_value_new_string("second.txt", 10));
    st = put_meta(w, "general.type", tbx_value_new_string("imatrix", 7), e);
    if (st == TBX_OK && strcmp(drop, "imatrix.datasets")) st = put_meta(w, "imatrix.datasets", ds, e);
    else tbx_value_free(ds);
    if (st == TBX_OK && strcmp(drop, "imatrix.chunk_count"))
        st = put_meta(w, "imatrix.chunk_count", tbx_value_new_uint(TBX_V_U32, 12), e);
    if (st == TBX_OK && strcmp(drop, "imatrix.chunk_size"))
        st = put_meta(w, "imatrix.chunk_size", tbx_value_new_uint(TBX_V_U32, 512), e);
    const float a_s[4] = {4, 8, 2, 1}, a_c[1] = {4};
    const float b_s[6] = {1, 2, 3, 4, 5, 6}, b_c[2] = {2.4f, 0};
    const float x[2] = {7, 7};
    const uint16_t b_c16[2] = {0x4000, 0};
    struct { const char *name; uint32_t nd; uint64_t shape[2]; const void *d; size_t n; tbx_dtype dt; } t[] = {
        {"a.w.in_sum2", 2, {1, 4}, a_s, 16, TBX_DT_F32},
        {"a.w.counts", 2, {1, 1}, a_c, 4, TBX_DT_F32},
        {"b.w.in_sum2", 2, {2, 3}, b_s, 24, TBX_DT_F32},
        {"b.w.counts", 2, {2, 1}, counts_dt == TBX_DT_F32 ? (const void *)b_c : (const void *)b_c16,
         counts_dt == TBX_DT_F32 ? 8 : 4, counts_dt},
        {"unrelated", 1, {2, 0}, x, 8, TBX_DT_F32},
    };
    for (size_t i = 0; st == TBX_OK && i < 5; i++) {
        tbx_tensor_desc d = {sizeof(tbx_tensor_desc), t[i].name, 0, t[i].dt, t[i].nd, t[i].shape, 1};
        uint64_t idx;
        st = tbx_writer_add_tensor(w, &d, &idx, e);
    }
    for (size_t i = 0; st == TBX_OK && i < 5; i++)
        st = tbx_writer_write_tensor(w, i, t[i].d, t[i].n, e);
    if (st == TBX_OK) return tbx_writer_finish(w, e);
    tbx_writer_abort(w);
    return st;
}

static tbx_status read_gguf(const char *path, tbx_imatrix *m, tbx_error *e) {
    tbx_file *f = NULL;
    tbx_status st = tbx_open_path(&f, path, NULL, e);
    if (st == TBX_OK) st = tbx_imatrix_read_gguf(f, m, e);
    tbx_close(f);
    return st;
}

TBX_TEST(gguf_form_gives_sums_over_rounded_counts_per_expert) {
    char path[512];
    tbx_test_tmppath(path, sizeof path, "imatrix-%d.gguf", (int)getpid());
    tbx_error e;
    CHECK_OK(write_gguf(path, "", TBX_DT_F32, &e));
    tbx_imatrix m;
    CHECK_OK(read_gguf(path, &m, &e));
    CHECK_EQ(m.n, 2);
    CHECK(!m.legacy);
    CHECK_EQ(m.chunk_count, 12);
    CHECK_EQ(m.ndatasets, 2);
    if (m.ndatasets == 2) {
        CHECK_STR(m.datasets[0], "first.txt");
        CHECK_STR(m.datasets[1], "second.txt");
    }
    const tbx_imatrix_entry *a = tbx_imatrix_find(&m, "a.w", 3), *b = tbx_imatrix_find(&m, "b.w", 3);
    CHECK(a && b && !tbx_imatrix_find(&m, "unrelated", 9));
    if (a) CHECK(a->n == 4 && a->v[0] == 1.0f && a->v[1] == 2.0f && a->v[2] == 0.5f &&
                 a->v[3] == 0.25f);
    /* expert 0: count 2.4 rounds to 2; expert 1: count 0 gives 1s */
    if (b) CHECK(b->n == 6 && b->v[0] == 0.5f && b->v[1] == 1.0f && b->v[2] == 1.5f &&
                 b->v[3] == 1.0f && b->v[4] == 1.0f && b->v[5] == 1.0f);
    tbx_imatrix_free(&m);
    /* what llama-quantize refuses: a key missing, counts not f32 */
    const char *keys[] = {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(write_gguf(path, keys[i], TBX_DT_F32, &e));
        CHECK_EQ(read_gguf(path, &m, &e), TBX_E_FORMAT);
        CHECK_STR(e.field, keys[i]);
        CHECK_EQ(m.n, 0);
    }
    CHECK_OK(write_gguf(path, "", TBX_DT_F16, &e));
    CHECK_EQ(read_gguf(path, &m, &e), TBX_E_FORMAT);
    CHECK_STR(e.field, "b.w.counts");
    unlink(path);
}

TBX_TEST_MAIN()
