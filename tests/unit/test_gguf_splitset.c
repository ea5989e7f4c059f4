/* test_gguf_splitset.c - a GGUF split set written by tbx_gguf_split opens as one model through
 * tbx_open_path on its first shard (src/formats/gguf/gguf.c, docs/formats/gguf.md "Split sets"). */
#define _GNU_SOURCE
#include "tbx_test.h"
#include "tbx_test_dir.h"
#include "tensorbox.h"
#define TBX_EXPERIMENTAL 1
#include "tensorbox/gguf.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NT 7

static const char *tmp_path(const char *name) {
    static char buf[8][700];
    static int k;
    k = (k + 1) % 8;
    return tbx_test_dir_file(buf[k], sizeof buf[k], "tbx_test_splitset", name);
}

static const char *shard_path(const char *stem, unsigned no, unsigned n) {
    static char buf[4][64];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s-%05u-of-%05u.gguf", stem, no, n);
    return tmp_path(buf[k]);
}

/* Tensor i: f32 (i % 3 == 0), f16 (1) or i32 (2), shape [rows, 24 + 8 i]. */
static uint64_t t_rows(int i) { return (uint64_t)(2 + i % 3); }
static uint64_t t_cols(int i) { return (uint64_t)(24 + 8 * i); }
static tbx_dtype t_dtype(int i) {
    return i % 3 == 0 ? TBX_DT_F32 : i % 3 == 1 ? TBX_DT_F16 : TBX_DT_I32;
}
static size_t t_bytes(int i) {
    size_t es = t_dtype(i) == TBX_DT_F16 ? 2 : 4;
    return (size_t)(t_rows(i) * t_cols(i)) * es;
}
static void t_fill(int i, uint8_t *p) {
    size_t n = t_bytes(i);
    for (size_t k = 0; k < n; k++) p[k] = (uint8_t)(k * 13 + (size_t)i * 7 + 1);
    if (t_dtype(i) == TBX_DT_F16) /* keep the halves finite: clear exponent bit 14 */
        for (size_t k = 1; k < n; k += 2) p[k] &= 0x3F;
    if (t_dtype(i) == TBX_DT_F32)
        for (size_t k = 3; k < n; k += 4) p[k] &= 0x3F;
}

/* Writes orig.gguf and splits it into shards of at most `max` data bytes; returns N. */
static unsigned make_set(const char *stem, uint64_t max) {
    const char *orig = tmp_path("orig.gguf");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.flags = TBX_WRITE_OVERWRITE;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, orig, &wo, &e) != TBX_OK) return 0;
    tbx_value *v = tbx_value_new_string("split me", 8);
    tbx_status st = tbx_writer_add_meta(w, "general.name", 12, v, &e);
    tbx_value_free(v);
    for (int i = 0; st == TBX_OK && i < NT; i++) {
        char name[32];
        snprintf(name, sizeof name, "blk.%d.weight", i);
        uint64_t shape[2] = {t_rows(i), t_cols(i)};
        tbx_tensor_desc d = {sizeof(tbx_tensor_desc), name, 0, t_dtype(i), 2, shape, 1};
        st = tbx_writer_add_tensor(w, &d, NULL, &e);
    }
    uint8_t buf[4096];
    for (int i = 0; st == TBX_OK && i < NT; i++) {
        t_fill(i, buf);
        st = tbx_writer_write_tensor(w, (uint64_t)i, buf, t_bytes(i), &e);
    }
    if (st == TBX_OK) st = tbx_writer_finish(w, &e);
    else tbx_writer_abort(w);
    if (st != TBX_OK) { fprintf(stderr, "make_set: %s\n", e.message); return 0; }
    uint32_t n = 0;
    if (tbx_gguf_split(orig, max, tmp_path(stem), TBX_WRITE_OVERWRITE, &n, &e) != TBX_OK) {
        fprintf(stderr, "split: %s\n", e.message);
        return 0;
    }
    return n;
}

static tbx_status open_opts(tbx_file **f, const char *path, uint32_t flags, tbx_error *e) {
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.flags = flags;
    memset(e, 0, sizeof *e);
    return tbx_open_path(f, path, &o, e);
}

/* The handle holds every tensor of the original, in order, with its bytes. */
/* `split_keys`: the split.* keys of shard 1 are there as they are. */
static void check_model(tbx_file *f, bool mapped, bool split_keys) {
    CHECK_EQ(tbx_tensor_count(f), NT);
    uint8_t want[4096], got[4096];
    for (int i = 0; i < NT && (uint64_t)i < tbx_tensor_count(f); i++) {
        char name[32];
        snprintf(name, sizeof name, "blk.%d.weight", i);
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, (uint64_t)i, &ti));
        CHECK_STR(ti.name, name);
        CHECK_EQ(ti.dtype, t_dtype(i));
        CHECK_EQ(ti.ndim, 2);
        CHECK(ti.shape && ti.shape[0] == t_rows(i) && ti.shape[1] == t_cols(i));
        t_fill(i, want);
        size_t need = 0;
        tbx_error e;
        CHECK_OK(tbx_tensor_read(f, (uint64_t)i, got, sizeof got, &need, &e));
        CHECK_EQ(need, t_bytes(i));
        CHECK(memcmp(got, want, t_bytes(i)) == 0);
        /* a range from the middle */
        memset(got, 0, sizeof got);
        CHECK_OK(tbx_tensor_read_range(f, (uint64_t)i, 8, got, 16, &e));
        CHECK(memcmp(got, want + 8, 16) == 0);
        const void *p = NULL;
        size_t len = 0;
        tbx_status st = tbx_tensor_map(f, (uint64_t)i, &p, &len, &e);
        if (mapped) {
            CHECK_OK(st);
            CHECK(p && len == t_bytes(i) && memcmp(p, want, len) == 0);
        } else {
            CHECK_EQ(st, TBX_E_UNSUPPORTED);
        }
        if (t_dtype(i) == TBX_DT_F32) {
            float fv[2];
            CHECK_OK(tbx_tensor_read_f32(f, (uint64_t)i, 1, 2, fv, &e));
            CHECK(memcmp(fv, want + 4, 8) == 0);
        }
    }
    const tbx_value *v = tbx_meta_find(f, "general.name");
    CHECK(v != NULL);
    v = tbx_meta_find(f, "split.no");
    CHECK((v != NULL) == split_keys);
    uint64_t no = 99;
    if (v) { CHECK_OK(tbx_value_get_u64(v, &no)); CHECK_EQ(no, 0); }
}

TBX_TEST(split_set_opens_as_one_model) {
    unsigned n = make_set("a", 600);
    CHECK(n >= 3);
    if (n < 3) return;
    for (int mm = 0; mm < 2; mm++) {
        tbx_file *f = NULL;
        tbx_error e;
        CHECK_OK(open_opts(&f, shard_path("a", 1, n), mm ? TBX_OPEN_MMAP : 0, &e));
        if (!f) { fprintf(stderr, "%s\n", e.message); continue; }
        check_model(f, mm != 0, true);
        const tbx_value *v = tbx_meta_find(f, "split.count");
        uint64_t c = 0;
        CHECK(v && tbx_value_get_u64(v, &c) == TBX_OK && c == n);
        CHECK_OK(tbx_gguf_lint(f, NULL, NULL));
        tbx_close(f);
    }
    uint64_t np = 99;
    CHECK_OK(tbx_validate_path(shard_path("a", 1, n), NULL, NULL, NULL, &np));
    CHECK_EQ(np, 0);
}

TBX_TEST(split_set_converts_to_one_file) {
    unsigned n = make_set("c", 600);
    CHECK(n >= 3);
    if (n < 3) return;
    tbx_file *f = NULL, *g = NULL;
    tbx_error e;
    CHECK_OK(open_opts(&f, shard_path("c", 1, n), 0, &e));
    if (!f) return;
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.flags = TBX_WRITE_OVERWRITE;
    const char *out = tmp_path("whole.gguf");
    CHECK_OK(tbx_convert(f, out, &co, &e));
    tbx_close(f);
    CHECK_OK(open_opts(&g, out, 0, &e));
    if (!g) return;
    /* the model's metadata, without the set's split.* keys: they describe the input's files,
     * and a single file that kept them would claim to be part 1 of N */
    check_model(g, false, false);
    tbx_close(g);
}

TBX_TEST(writers_never_replace_a_shard_of_an_open_set) {
    unsigned n = make_set("w", 600);
    CHECK(n >= 3);
    if (n < 3) return;
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(open_opts(&f, shard_path("w", 1, n), 0, &e));
    if (!f) return;
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.flags = TBX_WRITE_OVERWRITE;
    for (unsigned k = 1; k <= n; k++) {
        tbx_writer *w = NULL;
        CHECK_EQ(tbx_writer_open(&w, shard_path("w", k, n), &wo, &e), TBX_E_EXISTS);
        if (w) tbx_writer_abort(w);
    }
    tbx_close(f);
    /* once closed, nothing holds them */
    tbx_writer *w = NULL;
    CHECK_OK(tbx_writer_open(&w, shard_path("w", n, n), &wo, &e));
    if (w) tbx_writer_abort(w);
}

TBX_TEST(missing_shard_is_an_io_error_naming_it) {
    unsigned n = make_set("m", 600);
    CHECK(n >= 3);
    if (n < 3) return;
    char moved[700];
    snprintf(moved, sizeof moved, "%s", tmp_path("moved.gguf"));
    char second[700];
    snprintf(second, sizeof second, "%s", shard_path("m", 2, n));
    CHECK(rename(second, moved) == 0);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_EQ(open_opts(&f, shard_path("m", 1, n), 0, &e), TBX_E_IO);
    CHECK(f == NULL);
    char want[64];
    snprintf(want, sizeof want, "-00002-of-%05u.gguf' cannot be opened", n);
    CHECK(strstr(e.message, want) != NULL);
    CHECK(strstr(e.message, "shard 2 of") != NULL);
    CHECK(rename(moved, second) == 0);
    CHECK_OK(open_opts(&f, shard_path("m", 1, n), 0, &e));
    tbx_close(f);
}

TBX_TEST(wrong_split_no_is_rejected) {
    unsigned n = make_set("n", 600);
    CHECK(n >= 3);
    if (n < 3) return;
    tbx_value *v = tbx_value_new_uint(TBX_V_U16, 7);
    int in_place = 0;
    tbx_error e;
    CHECK_OK(tbx_gguf_set_meta(shard_path("n", 3, n), "split.no", 0, v, &in_place, &e));
    tbx_value_free(v);
    CHECK_EQ(in_place, 1);
    tbx_file *f = NULL;
    CHECK_EQ(open_opts(&f, shard_path("n", 1, n), 0, &e), TBX_E_FORMAT);
    CHECK(f == NULL);
    CHECK(strstr(e.message, "split.no is 7, expected 2") != NULL);
    CHECK(strstr(e.message, "shard 3 of") != NULL);
}

TBX_TEST(other_shards_and_other_sources_open_one_file) {
    unsigned n = make_set("o", 600);
    CHECK(n >= 3);
    if (n < 3) return;
    tbx_file *f = NULL;
    tbx_error e;
    /* shard 2 alone */
    CHECK_OK(open_opts(&f, shard_path("o", 2, n), 0, &e));
    if (f) {
        CHECK(tbx_tensor_count(f) > 0 && tbx_tensor_count(f) < NT);
        tbx_close(f);
    }
    /* shard 1 from memory: just its own tensors */
    FILE *fp = fopen(shard_path("o", 1, n), "rb");
    CHECK(fp != NULL);
    if (!fp) return;
    static uint8_t blob[1 << 16];
    size_t len = fread(blob, 1, sizeof blob, fp);
    fclose(fp);
    CHECK_OK(tbx_open_memory(&f, blob, len, NULL, &e));
    if (f) {
        CHECK(tbx_tensor_count(f) > 0 && tbx_tensor_count(f) < NT);
        tbx_close(f);
    }
    /* merge still reads each shard on its own */
    const char *out = tmp_path("merged.gguf");
    CHECK_OK(tbx_gguf_merge(shard_path("o", 1, n), out, TBX_WRITE_OVERWRITE, &e));
    CHECK_OK(open_opts(&f, out, 0, &e));
    if (f) {
        check_model(f, false, false);
        tbx_close(f);
    }
}

TBX_TEST_MAIN()
