/*
 * test_contract.c - the contract between core and the format drivers, seen from the public API:
 *   - the format registry reads only the driver table (names, aliases, extensions, caps):
 *     every format it lists is checked against its own row, with no list of formats here;
 *     values past the last driver have no name;
 *   - the capabilities a driver declares (metadata types, dtypes) agree with what its writer
 *     accepts (one source: the checks use the same data);
 *   - size variables go through the driver hooks (OINF has them, the others refuse);
 *   - versioned structs: a caller passing a shorter struct_size (built against an older header)
 *     gets only its fields written; a shorter tbx_limits keeps the defaults of the fields it
 *     lacks; tbx_read_batch walks an array of shorter requests with their own stride;
 *   - tbx_validate on an open handle: the open's problems plus the data pass;
 *   - the quantization types (tbx_dtype_quantizable, the list --quant and Python's quant= are
 *     made from) are exactly those tbx_convert quantizes to, each written by some format;
 *     tbx_quant_from_name resolves a format's own short names;
 *   - the cast types (tbx_dtype_castable, the list of tbx convert --help) are exactly the
 *     dtypes tbx_convert casts a float tensor to, and the output holds that dtype.
 * Files are written under $TMPDIR (default /tmp).
 */
#include "tbx_test.h"
#include "tensorbox.h"
#include "api.h" /* the rows (tbx_drivers), tbx_encoding_name_in */
#include "ggml.h" /* tbx_ggml_quant_requires_imatrix */

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *temp_path(const char *tag, const char *ext) {
    static int counter;
    char *path = malloc(600);
    tbx_test_tmppath(path, 600, "tbx_test_contract_%d_%s_%d%s", (int)getpid(), tag, counter++, ext);
    unlink(path);
    return path;
}

/* Does the space-separated list `list` hold `word`? */
static int list_has(const char *list, const char *word) {
    size_t wl = strlen(word);
    for (const char *p = list; *p;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        if (n == wl && n && strncmp(p, word, n) == 0) return 1;
        p += n;
    }
    return 0;
}

/* Every format the registry lists, checked against its own row (tbx_format_caps_get): there is
 * no list of formats here, so a new driver is held to the same rules the day its row lands. */
TBX_TEST(registry_lists_the_drivers) {
    size_t n = tbx_format_count();
    CHECK(n >= 1);
    int last = TBX_FORMAT_UNKNOWN;
    for (size_t i = 0; i < n; i++) {
        tbx_format f = tbx_format_at(i);
        CHECK(f != TBX_FORMAT_UNKNOWN);
        CHECK((int)f > last); /* in order of value, each format once */
        last = (int)f;
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        CHECK_OK(tbx_format_caps_get(f, &c));
        CHECK_EQ(c.format, f);
        CHECK(c.name && c.name[0]);
        if (!c.name || !c.aliases || !c.extensions) continue;
        CHECK_STR(tbx_format_name(f), c.name);
        CHECK_EQ(tbx_format_from_name(c.name), f);
        char up[64];
        size_t k = 0;
        for (; c.name[k] && k + 1 < sizeof up; k++)
            up[k] = (char)(c.name[k] >= 'a' && c.name[k] <= 'z' ? c.name[k] - 32 : c.name[k]);
        up[k] = 0;
        CHECK_EQ(tbx_format_from_name(up), f); /* names are case-insensitive */
        /* no name, alias or extension is another format's */
        for (size_t j = 0; j < n; j++) {
            tbx_format_caps o = TBX_FORMAT_CAPS_INIT;
            if (j == i || tbx_format_caps_get(tbx_format_at(j), &o) != TBX_OK) continue;
            CHECK(strcmp(o.name, c.name) != 0 && !list_has(o.aliases, c.name));
        }
        for (const char *p = c.aliases; *p;) { /* every alias names the format */
            while (*p == ' ') p++;
            size_t an = strcspn(p, " ");
            char a[64];
            if (an && an < sizeof a) {
                memcpy(a, p, an);
                a[an] = 0;
                CHECK_EQ(tbx_format_from_name(a), f);
            }
            p += an;
        }
        for (const char *p = c.extensions; *p;) { /* every extension guesses the format */
            while (*p == ' ') p++;
            size_t en = strcspn(p, " ");
            if (!en) break;
            CHECK(p[0] == '.');
            char path[96];
            snprintf(path, sizeof path, "dir.x/model%.*s", (int)en, p);
            CHECK_EQ(tbx_format_from_path(path), f);
            p += en;
        }
        if (c.flags & TBX_FCAP_READ) CHECK(c.read_versions != 0);
        if (c.flags & TBX_FCAP_WRITE) {
            /* the default written version is one the driver writes */
            CHECK(c.write_version < 32 && (c.write_versions >> c.write_version & 1u));
        } else {
            CHECK_EQ(c.write_versions, 0);
            CHECK_EQ(c.meta_types, 0);
            CHECK_EQ(c.flags & (TBX_FCAP_SECTIONS | TBX_FCAP_NO_DATA | TBX_FCAP_COMPRESSION |
                                TBX_FCAP_DIGESTS | TBX_FCAP_ALIGNMENT), 0);
        }
    }
    CHECK_EQ(tbx_format_at(n), TBX_FORMAT_UNKNOWN);
    CHECK_EQ(tbx_format_at((size_t)-1), TBX_FORMAT_UNKNOWN);
    CHECK_STR(tbx_format_name(TBX_FORMAT_UNKNOWN), "unknown");
    /* values past the last driver: unknown everywhere */
    for (int v = last + 1; v <= last + 2; v++) {
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        CHECK_EQ(tbx_format_caps_get((tbx_format)v, &c), TBX_E_NOT_FOUND);
        CHECK_STR(tbx_format_name((tbx_format)v), "unknown");
    }
    /* the rows themselves: the legacy EMBD layout has no extension of its own, no metadata */
    tbx_format_caps lc = TBX_FORMAT_CAPS_INIT;
    CHECK_OK(tbx_format_caps_get(TBX_FORMAT_EMBD_LEGACY, &lc));
    CHECK_STR(lc.name, "embd-legacy");
    CHECK_STR(lc.extensions, "");
    CHECK_EQ(lc.meta_types, 0);
    CHECK_EQ(tbx_format_from_name("zt"), TBX_FORMAT_ZTENSOR); /* alias from the driver row */
    CHECK_EQ(tbx_format_from_name("ZTensor"), TBX_FORMAT_ZTENSOR);
    CHECK_EQ(tbx_format_from_name("mantle"), TBX_FORMAT_UNKNOWN);
    CHECK_EQ(tbx_format_from_path("a.bin"), TBX_FORMAT_UNKNOWN);
    CHECK_EQ(tbx_format_caps_get(TBX_FORMAT_UNKNOWN, NULL), TBX_E_INVALID_ARG);
    tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
    CHECK_EQ(tbx_format_caps_get(TBX_FORMAT_UNKNOWN, &c), TBX_E_NOT_FOUND);
    /* declared capabilities */
    CHECK_OK(tbx_format_caps_get(TBX_FORMAT_OINF, &c));
    CHECK(c.flags & TBX_FCAP_SIZEVARS);
    CHECK(c.flags & TBX_FCAP_NO_DATA);
    CHECK_EQ(c.read_versions, 0x6);
    CHECK_OK(tbx_format_caps_get(TBX_FORMAT_GGUF, &c));
    CHECK(!(c.flags & TBX_FCAP_SIZEVARS));
    CHECK_EQ(c.read_versions, 0xE);
    CHECK_EQ(c.write_version, 3);
    CHECK_OK(tbx_format_caps_get(TBX_FORMAT_ZTENSOR, &c));
    CHECK(c.flags & TBX_FCAP_COMPRESSION);
    CHECK(c.flags & TBX_FCAP_DIGESTS);
    CHECK_STR(c.aliases, "zt");
    CHECK_OK(tbx_format_caps_get(TBX_FORMAT_SAFETENSORS, &c));
    CHECK_EQ(c.meta_types, (uint64_t)1 << TBX_V_STRING);
}

/* A struct_size shorter than this header's (an older caller) gets only its prefix written. */
TBX_TEST(format_caps_short_struct) {
    tbx_format_caps c;
    memset(&c, 0xAB, sizeof c);
    c.struct_size = (uint32_t)offsetof(tbx_format_caps, extensions);
    CHECK_OK(tbx_format_caps_get(TBX_FORMAT_GGUF, &c));
    CHECK_EQ(c.struct_size, offsetof(tbx_format_caps, extensions));
    CHECK_STR(c.name, "gguf");
    const uint8_t *tail = (const uint8_t *)&c + offsetof(tbx_format_caps, extensions);
    for (size_t k = 0; k < sizeof c - offsetof(tbx_format_caps, extensions); k++)
        CHECK_EQ(tail[k], 0xAB);
}

/* One simple value of each type. */
static tbx_value *sample_value(tbx_value_type t) {
    static const float f2[2] = {1.0f, 2.0f};
    static const uint64_t s2[1] = {2};
    static const uint8_t bits[1] = {5};
    tbx_value *v = NULL;
    switch (t) {
    case TBX_V_NULL: return tbx_value_new_null();
    case TBX_V_BOOL: return tbx_value_new_bool(1);
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64: return tbx_value_new_uint(t, 7);
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: return tbx_value_new_int(t, -7);
    case TBX_V_F16: case TBX_V_BF16: case TBX_V_F32: case TBX_V_F64:
        return tbx_value_new_float(t, 1.5);
    case TBX_V_STRING: return tbx_value_new_string("abc", 3);
    case TBX_V_BYTES: return tbx_value_new_bytes("\x01\x02", 2);
    case TBX_V_ARRAY:
        v = tbx_value_new_array(TBX_V_U32);
        if (v && tbx_value_array_push(v, tbx_value_new_uint(TBX_V_U32, 1)) != TBX_OK) {
            tbx_value_free(v);
            return NULL;
        }
        return v;
    case TBX_V_MAP:
        v = tbx_value_new_map();
        if (v && tbx_value_map_put(v, "k", 1, tbx_value_new_uint(TBX_V_U32, 1)) != TBX_OK) {
            tbx_value_free(v);
            return NULL;
        }
        return v;
    case TBX_V_NDARRAY: return tbx_value_new_ndarray(TBX_DT_F32, s2, 1, f2, sizeof f2);
    case TBX_V_BITSET: return tbx_value_new_bitset(bits, 3);
    }
    return NULL;
}

/* The metadata types and dtypes a driver declares are exactly those its writer takes. */
TBX_TEST(declared_caps_match_the_writers) {
    for (size_t i = 0; i < tbx_format_count(); i++) {
        tbx_format fmt = tbx_format_at(i);
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        CHECK_OK(tbx_format_caps_get(fmt, &c));
        char *path = temp_path(c.name, c.extensions);
        tbx_write_options wo;
        tbx_write_options_init(&wo);
        wo.format = fmt;
        if (!(c.flags & TBX_FCAP_WRITE)) { /* a read-only format (none today): no writer */
            tbx_writer *w = NULL;
            tbx_error e;
            CHECK(tbx_writer_open(&w, path, &wo, &e) != TBX_OK && w == NULL);
            CHECK_EQ(c.meta_types, 0);
            free(path);
            continue;
        }
        for (int t = TBX_V_NULL; t <= TBX_V_BITSET; t++) {
            tbx_writer *w = NULL;
            tbx_error e;
            CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
            if (!w) continue;
            tbx_value *v = sample_value((tbx_value_type)t);
            CHECK(v != NULL);
            tbx_status st = tbx_writer_add_meta(w, "key", 3, v, &e);
            int declared = (int)(c.meta_types >> t & 1u);
            if (declared != (st == TBX_OK))
                fprintf(stderr, "%s: meta type %s declared %d, writer says %s\n", c.name,
                        tbx_value_type_name((tbx_value_type)t), declared, tbx_status_name(st));
            CHECK_EQ(declared, st == TBX_OK);
            if (!declared) CHECK(st == TBX_E_LOSSY || st == TBX_E_UNSUPPORTED);
            tbx_value_free(v);
            tbx_writer_abort(w);
        }
        for (int dt = 1; dt < TBX_DT_COUNT_; dt++) {
            const tbx_dtype_info *di = tbx_dtype_get((tbx_dtype)dt);
            if (!di) {
                CHECK_EQ(tbx_format_writes_dtype(fmt, (tbx_dtype)dt), 0);
                continue;
            }
            tbx_writer *w = NULL;
            tbx_error e;
            CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
            if (!w) continue;
            uint64_t shape[2] = {2, di->block_size > 1 ? di->block_size : 8};
            tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
            d.name = "t";
            d.dtype = (tbx_dtype)dt;
            d.ndim = 2;
            d.shape = shape;
            d.has_data = 1;
            tbx_status st = tbx_writer_add_tensor(w, &d, NULL, &e);
            int declared = tbx_format_writes_dtype(fmt, (tbx_dtype)dt);
            if (declared != (st == TBX_OK))
                fprintf(stderr, "%s: dtype %s declared %d, writer says %s: %s\n", c.name,
                        di->name, declared, tbx_status_name(st), e.message);
            CHECK_EQ(declared, st == TBX_OK);
            tbx_writer_abort(w);
        }
        unlink(path);
        free(path);
    }
}

/* A dtype a format does not write is refused as such (TBX_E_UNSUPPORTED naming tensor.dtype),
 * whatever the shape, before anything is sized with rules that are not the format's: a block
 * type of the core table, and (once their driver lands) the driver-specific dtypes of another
 * format, e.g. MCF's 90..97. A value no driver declares is TBX_E_INVALID_ARG. Never OK, never a
 * shape error. */
TBX_TEST(writers_refuse_dtypes_they_do_not_own) {
    for (size_t i = 0; i < tbx_format_count(); i++) {
        tbx_format fmt = tbx_format_at(i);
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        CHECK_OK(tbx_format_caps_get(fmt, &c));
        if (!(c.flags & TBX_FCAP_WRITE)) continue;
        char *path = temp_path(c.name, c.extensions);
        tbx_write_options wo;
        tbx_write_options_init(&wo);
        wo.format = fmt;
        for (int dt = 1; dt < 256; dt++) {
            if (tbx_format_writes_dtype(fmt, (tbx_dtype)dt)) continue;
            tbx_writer *w = NULL;
            tbx_error e;
            CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
            if (!w) continue;
            uint64_t shape[1] = {3}; /* no block type fits: a size rule would fail first */
            tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
            d.name = "t";
            d.dtype = (tbx_dtype)dt;
            d.ndim = 1;
            d.shape = shape;
            d.has_data = 1;
            memset(&e, 0, sizeof e);
            tbx_status st = tbx_writer_add_tensor(w, &d, NULL, &e);
            tbx_status want = tbx_dtype_get((tbx_dtype)dt) ? TBX_E_UNSUPPORTED : TBX_E_INVALID_ARG;
            if (st != want || strcmp(e.field, "tensor.dtype") != 0)
                fprintf(stderr, "%s: dtype %d: %s (%s: %s), expected %s\n", c.name, dt,
                        tbx_status_name(st), e.field, e.message, tbx_status_name(want));
            CHECK_EQ(st, want);
            CHECK_STR(e.field, "tensor.dtype");
            tbx_writer_abort(w);
        }
        unlink(path);
        free(path);
    }
}

/* tbx_writer_add_sizevar / tbx_sizevar_* reach the driver's hooks (OINF), others refuse. */
TBX_TEST(sizevars_through_driver_hooks) {
    char *path = temp_path("sv", ".oinf");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    CHECK_OK(tbx_writer_add_sizevar(w, "B", 4, &e));
    CHECK_EQ(tbx_writer_add_sizevar(w, "B", 5, &e), TBX_E_DUPLICATE);
    CHECK_OK(tbx_writer_finish(w, &e));
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    CHECK_EQ(tbx_sizevar_count(f), 1);
    const char *name = NULL;
    size_t nl = 0;
    uint64_t value = 0;
    CHECK_OK(tbx_sizevar_get(f, 0, &name, &nl, &value));
    CHECK_EQ(nl, 1);
    CHECK_STR(name, "B");
    CHECK_EQ(value, 4);
    CHECK_EQ(tbx_sizevar_get(f, 1, &name, &nl, &value), TBX_E_INVALID_ARG);
    tbx_close(f);
    unlink(path);
    free(path);

    path = temp_path("sv", ".gguf");
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    CHECK_EQ(tbx_writer_add_sizevar(w, "B", 4, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "gguf") != NULL);
    tbx_writer_abort(w);
    free(path);
    CHECK_EQ(tbx_writer_add_sizevar(NULL, "B", 4, &e), TBX_E_INVALID_ARG);
}

/* A small safetensors file with two tensors, written through the API. */
static char *write_small(void) {
    char *path = temp_path("small", ".safetensors");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    static const uint64_t shape[2] = {2, 3};
    const float data[6] = {1, 2, 3, 4, 5, 6};
    /* a desc from an "older caller": struct_size covers name..shape, not has_data; the missing
     * field takes its default (0), which safetensors refuses: proof it was not read */
    tbx_tensor_desc d;
    memset(&d, 0x01, sizeof d); /* has_data would read as non-zero if it were read */
    d.struct_size = (uint32_t)offsetof(tbx_tensor_desc, has_data);
    d.name = "short";
    d.name_len = 0;
    d.dtype = TBX_DT_F32;
    d.ndim = 2;
    d.shape = shape;
    CHECK_EQ(tbx_writer_add_tensor(w, &d, NULL, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "without data") != NULL);
    tbx_tensor_desc d2 = TBX_TENSOR_DESC_INIT;
    d2.name = "a";
    d2.dtype = TBX_DT_F32;
    d2.ndim = 2;
    d2.shape = shape;
    d2.has_data = 1;
    CHECK_OK(tbx_writer_add_tensor(w, &d2, NULL, &e));
    d2.name = "b";
    d2.struct_size = 0; /* 0: this header's size */
    CHECK_OK(tbx_writer_add_tensor(w, &d2, NULL, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 0, data, sizeof data, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 1, data, sizeof data, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    return path;
}

TBX_TEST(info_structs_shorter_struct_size) {
    char *path = write_small();
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    if (f) {
        /* tensor info: an older caller knows name..ndim only */
        tbx_tensor_info ti;
        memset(&ti, 0xCD, sizeof ti);
        ti.struct_size = (uint32_t)offsetof(tbx_tensor_info, shape);
        CHECK_OK(tbx_tensor_info_get(f, 1, &ti));
        CHECK_EQ(ti.struct_size, offsetof(tbx_tensor_info, shape));
        CHECK_STR(ti.name, "b");
        CHECK_EQ(ti.dtype, TBX_DT_F32);
        CHECK_EQ(ti.ndim, 2);
        const uint8_t *tail = (const uint8_t *)&ti + offsetof(tbx_tensor_info, shape);
        size_t bad = 0;
        for (size_t k = 0; k < sizeof ti - offsetof(tbx_tensor_info, shape); k++) bad += tail[k] != 0xCD;
        CHECK_EQ(bad, 0);
        /* the full struct */
        tbx_tensor_info full = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, 1, &full));
        CHECK_EQ(full.nelems, 6);
        CHECK_EQ(full.nbytes, 24);
        /* component info: up to `offset` */
        tbx_component_info ci;
        memset(&ci, 0xCD, sizeof ci);
        ci.struct_size = (uint32_t)offsetof(tbx_component_info, stored_bytes);
        CHECK_OK(tbx_component_info_get(f, 0, 0, &ci));
        CHECK_EQ(ci.nelems, 6);
        tail = (const uint8_t *)&ci + offsetof(tbx_component_info, stored_bytes);
        bad = 0;
        for (size_t k = 0; k < sizeof ci - offsetof(tbx_component_info, stored_bytes); k++) bad += tail[k] != 0xCD;
        CHECK_EQ(bad, 0);
        /* read requests of an older, shorter layout: the stride is their struct_size */
        enum { OLD = offsetof(tbx_read_req, error) }; /* no error field */
        uint64_t store[(2 * OLD + 16) / 8];
        uint8_t *raw = (uint8_t *)store;
        memset(store, 0xEE, sizeof store);
        float out0[6], out1[6];
        for (int k = 0; k < 2; k++) {
            tbx_read_req r = TBX_READ_REQ_INIT;
            r.struct_size = OLD;
            r.tensor = (uint64_t)k;
            r.buf = k ? out1 : out0;
            r.cap = sizeof out0;
            r.status = TBX_E_STATE;
            memcpy(raw + k * OLD, &r, OLD);
        }
        CHECK_OK(tbx_read_batch(f, (tbx_read_req *)(void *)raw, 2, 1, &e));
        for (int k = 0; k < 2; k++) {
            tbx_read_req r;
            memcpy(&r, raw + k * OLD, OLD);
            CHECK_EQ(r.status, TBX_OK);
            CHECK_EQ(r.tensor, (uint64_t)k);
        }
        size_t bad_tail = 0; /* bytes past the caller's array untouched */
        for (size_t k = 2 * OLD; k < sizeof store; k++) bad_tail += raw[k] != 0xEE;
        CHECK_EQ(bad_tail, 0);
        CHECK(out0[5] == 6.0f && out1[0] == 1.0f);
        /* mixed struct_size in one array is refused */
        tbx_read_req two[2] = {TBX_READ_REQ_INIT, TBX_READ_REQ_INIT};
        two[1].struct_size = 0;
        CHECK_EQ(tbx_read_batch(f, two, 2, 1, &e), TBX_E_INVALID_ARG);
        tbx_close(f);
    }
    unlink(path);
    free(path);
}

/* A tbx_limits from an older caller: the fields it lacks keep their defaults. */
TBX_TEST(limits_shorter_struct_size) {
    char *path = write_small();
    tbx_limits lim;
    tbx_limits_default(&lim);
    CHECK_EQ(lim.struct_size, sizeof lim);
    lim.max_tensors = 1; /* the file has 2 */
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.limits = &lim;
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_EQ(tbx_open_path(&f, path, &o, &e), TBX_E_LIMIT);
    /* struct_size ending before max_tensors: the caller's value is not read */
    lim.struct_size = (uint32_t)offsetof(tbx_limits, max_tensors);
    CHECK_OK(tbx_open_path(&f, path, &o, &e));
    tbx_close(f);
    f = NULL;
    /* a short struct whose max_decode_window is garbage: default used */
    tbx_limits_default(&lim);
    lim.max_decode_window = 1;
    lim.struct_size = (uint32_t)offsetof(tbx_limits, max_decode_window);
    CHECK_OK(tbx_open_path(&f, path, &o, &e));
    tbx_close(f);
    f = NULL;
    /* the amplification budget: defaults 1 x input + 32 MiB; a budget of 0 refuses even two
     * tensors (TBX_E_LIMIT naming the field and offset of the first entry); a caller of the
     * struct that ended at max_decode_window (before the budget existed) gets the defaults,
     * whatever lies beyond */
    tbx_limits_default(&lim);
    CHECK_EQ(lim.meta_budget_per_byte, 1);
    CHECK_EQ(lim.meta_budget_base, (uint64_t)32 << 20);
    lim.meta_budget_per_byte = 0;
    lim.meta_budget_base = 0;
    CHECK_EQ(tbx_open_path(&f, path, &o, &e), TBX_E_LIMIT);
    /* the first thing held: the entry of tensor "a", whose key opens the header at byte 9 */
    CHECK(strcmp(e.field, "header.json") == 0);
    CHECK_EQ(e.offset, 9);
    CHECK(strstr(e.message, "meta_budget_base") != NULL);
    CHECK(f == NULL);
    lim.struct_size = (uint32_t)(offsetof(tbx_limits, max_decode_window) +
                                 sizeof lim.max_decode_window);
    CHECK_OK(tbx_open_path(&f, path, &o, &e));
    tbx_close(f);
    f = NULL;
    /* a base just large enough for what the file declares opens */
    tbx_limits_default(&lim);
    lim.meta_budget_per_byte = 0;
    lim.meta_budget_base = 4096;
    CHECK_OK(tbx_open_path(&f, path, &o, &e));
    tbx_close(f);
    unlink(path);
    free(path);
}

typedef struct probs {
    int n;
    tbx_status first;
} probs;
static void count_problem(void *ud, const tbx_error *p) {
    probs *c = ud;
    if (c->n++ == 0) c->first = p->code;
}

/* tbx_validate on an open handle: open-time problems (to the open's callback) plus the pass. */
TBX_TEST(validate_open_handle) {
    char *path = write_small();
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    uint64_t n = 99;
    CHECK_OK(tbx_validate(f, NULL, NULL, &n));
    CHECK_EQ(n, 0);
    tbx_close(f);
    CHECK_EQ(tbx_validate(NULL, NULL, NULL, &n), TBX_E_INVALID_ARG);
    CHECK_EQ(n, 0);
    unlink(path);
    free(path);

    /* a zTensor file with a wrong digest: the open (verifying) reports it to on_problem, the
     * handle then counts it in tbx_validate; the data pass itself adds nothing new */
    path = temp_path("dg", ".zt");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.digest = "crc32c";
    tbx_writer *w = NULL;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    static const uint64_t shape[1] = {64};
    uint8_t data[64];
    memset(data, 7, sizeof data);
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.name = "x";
    d.dtype = TBX_DT_U8;
    d.ndim = 1;
    d.shape = shape;
    d.has_data = 1;
    CHECK_OK(tbx_writer_add_tensor(w, &d, NULL, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 0, data, sizeof data, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    size_t len = 0;
    uint8_t *bytes = tbx_test_slurp(path, &len);
    CHECK(bytes != NULL && len > 64);
    if (bytes) {
        /* flip one data byte (the 64 bytes of 7s) */
        uint8_t *p = NULL;
        for (size_t k = 0; k + 64 <= len; k++)
            if (bytes[k] == 7 && memcmp(bytes + k, data, 64) == 0) { p = bytes + k; break; }
        CHECK(p != NULL);
        if (p) p[10] ^= 1;
        probs at_open = {0, TBX_OK}, pass = {0, TBX_OK};
        tbx_open_options o;
        tbx_open_options_init(&o);
        o.flags = TBX_OPEN_VERIFY_DIGESTS;
        o.on_problem = count_problem;
        o.problem_ud = &at_open;
        CHECK_OK(tbx_open_memory(&f, bytes, len, &o, &e));
        tbx_status st = tbx_validate(f, count_problem, &pass, &n);
        CHECK_EQ(st, TBX_E_CHECKSUM);
        CHECK_EQ((uint64_t)(at_open.n + pass.n), n);
        CHECK(n >= 1);
        CHECK_EQ(at_open.n ? at_open.first : pass.first, TBX_E_CHECKSUM);
        /* the same result as tbx_validate_path, which opens the file itself */
        FILE *fp = fopen(path, "wb");
        if (fp) {
            fwrite(bytes, 1, len, fp);
            fclose(fp);
        }
        uint64_t n2 = 0;
        CHECK_EQ(tbx_validate_path(path, NULL, NULL, NULL, &n2), TBX_E_CHECKSUM);
        CHECK_EQ(n2, n);
        tbx_close(f);
        free(bytes);
    }
    unlink(path);
    free(path);
}

/* Encodings have names (tbx_encoding_name: what tbx info and Python print); a value this
 * library does not know is "unknown", never another encoding's name. */
TBX_TEST(encoding_names) {
    CHECK_STR(tbx_encoding_name(TBX_ENC_RAW), "raw");
    CHECK_STR(tbx_encoding_name(TBX_ENC_ZSTD), "zstd");
    CHECK_STR(tbx_encoding_name((tbx_encoding)77), "unknown");
    CHECK_STR(tbx_encoding_name((tbx_encoding)-1), "unknown");
    /* encodings the rows declare: each value one row's, neither raw nor zstd, named by it */
    for (size_t i = 0; tbx_drivers[i]; i++)
        for (const tbx_encoding_entry *e = tbx_drivers[i]->encodings; e && e->name; e++) {
            CHECK(e->encoding != TBX_ENC_RAW && e->encoding != TBX_ENC_ZSTD && e->name[0]);
            CHECK_STR(tbx_encoding_name(e->encoding), e->name);
            for (size_t j = 0; tbx_drivers[j]; j++)
                for (const tbx_encoding_entry *o = tbx_drivers[j]->encodings; o && o->name; o++)
                    if (o != e) CHECK(o->encoding != e->encoding && strcmp(o->name, e->name));
        }
    /* the lookup over a list of rows: a row's own encoding, and only in the lists holding it */
    static const tbx_encoding_entry encs[] = {{(tbx_encoding)40, "test-enc"}, {0, NULL}};
    tbx_driver row = {.format = (tbx_format)90, .name = "test", .encodings = encs};
    const tbx_driver *const with[] = {&row, NULL}, *const without[] = {NULL};
    CHECK_STR(tbx_encoding_name_in(with, (tbx_encoding)40), "test-enc");
    CHECK_STR(tbx_encoding_name_in(with, TBX_ENC_ZSTD), "zstd");
    CHECK_STR(tbx_encoding_name_in(with, (tbx_encoding)41), "unknown");
    CHECK_STR(tbx_encoding_name_in(without, (tbx_encoding)40), "unknown");
    CHECK_STR(tbx_encoding_name((tbx_encoding)40), "unknown"); /* not a registered row's */
}

/* A safetensors file with one f32 tensor [2, 256] of varied values. */
static char *float_file(void) {
    char *path = temp_path("q", ".safetensors");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    static const uint64_t shape[2] = {2, 256};
    float data[512];
    for (int i = 0; i < 512; i++) data[i] = (float)((i * 37) % 101 - 50) / 16.0f;
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.name = "w";
    d.dtype = TBX_DT_F32;
    d.ndim = 2;
    d.shape = shape;
    d.has_data = 1;
    CHECK_OK(tbx_writer_add_tensor(w, &d, NULL, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 0, data, sizeof data, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    return path;
}

TBX_TEST(quantization_types_are_what_convert_quantizes_to) {
    char *src = float_file();
    tbx_file *in = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&in, src, NULL, &e));
    int quantizable = 0;
    for (int v = 1; in && v < TBX_DT_COUNT_; v++) {
        tbx_dtype dt = (tbx_dtype)v;
        const tbx_dtype_info *di = tbx_dtype_get(dt);
        if (!di) {
            CHECK_EQ(tbx_dtype_quantizable(dt), 0);
            continue;
        }
        /* the first format that stores it */
        tbx_format fmt = TBX_FORMAT_UNKNOWN;
        for (size_t i = 0; i < tbx_format_count() && fmt == TBX_FORMAT_UNKNOWN; i++)
            if (tbx_format_writes_dtype(tbx_format_at(i), dt)) fmt = tbx_format_at(i);
        int q = tbx_dtype_quantizable(dt);
        quantizable += q;
        if (q) CHECK(fmt != TBX_FORMAT_UNKNOWN); /* a quantization type some format stores */
        if (fmt == TBX_FORMAT_UNKNOWN || !(di->flags & (TBX_DTF_BLOCK | TBX_DTF_SHAPED)))
            continue; /* plain types are cast targets, never quantization types */
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        CHECK_OK(tbx_format_caps_get(fmt, &c));
        char *out = temp_path("qo", c.extensions);
        tbx_convert_options co;
        tbx_convert_options_init(&co);
        co.write.format = fmt;
        co.flags = TBX_CONVERT_DROP_META;
        co.quant_to = dt;
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_convert(in, out, &co, &e);
        if (q && tbx_ggml_quant_requires_imatrix(dt)) {
            /* quantizable, but as ggml only with an importance matrix: refused, saying so,
             * before anything is written */
            CHECK_EQ(st, TBX_E_UNSUPPORTED);
            CHECK(strstr(e.message, "needs an importance matrix") != NULL);
            CHECK(access(out, F_OK) != 0);
            unlink(out);
            free(out);
            continue;
        }
        if (q != (st == TBX_OK))
            fprintf(stderr, "%s -> %s: quantizable %d, tbx_convert says %s: %s\n", di->name,
                    c.name, q, tbx_status_name(st), e.message);
        CHECK_EQ(q, st == TBX_OK);
        if (st == TBX_OK) { /* and the output holds that type */
            tbx_file *f = NULL;
            CHECK_OK(tbx_open_path(&f, out, NULL, &e));
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
            if (f) CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
            CHECK_EQ(ti.dtype, dt);
            tbx_close(f);
        }
        unlink(out);
        free(out);
    }
    CHECK(quantizable >= 10);
    tbx_close(in);
    unlink(src);
    free(src);
    /* names: the dtype's own (any case), a format's own types without its prefix */
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_GGUF, "Q4_K"), TBX_DT_Q4_K);
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_SAFETENSORS, "q8_0"), TBX_DT_Q8_0);
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_MCF, "q4"), TBX_DT_MCF_Q4);
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_MCF, "INT8"), TBX_DT_MCF_INT8);
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_MCF, "mcf_k2"), TBX_DT_MCF_K2);
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_GGUF, "mcf_k2"), TBX_DT_MCF_K2);
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_GGUF, "q4"), TBX_DT_INVALID);
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_MCF, "f16"), TBX_DT_INVALID); /* a cast target */
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_MCF, "q8_1"), TBX_DT_INVALID); /* no quantizer */
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_MCF, ""), TBX_DT_INVALID);
    CHECK_EQ(tbx_quant_from_name(TBX_FORMAT_MCF, NULL), TBX_DT_INVALID);
}

TBX_TEST(cast_types_are_what_convert_casts_to) {
    char *src = float_file();
    tbx_file *in = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&in, src, NULL, &e));
    int castable = 0;
    for (int v = 1; in && v < TBX_DT_COUNT_; v++) {
        tbx_dtype dt = (tbx_dtype)v;
        const tbx_dtype_info *di = tbx_dtype_get(dt);
        int c = tbx_dtype_castable(dt);
        if (!di) {
            CHECK_EQ(c, 0);
            continue;
        }
        castable += c;
        /* safetensors stores every plain dtype: a cast it refuses is the library's refusal */
        char *out = temp_path("co", ".safetensors");
        tbx_convert_options co;
        tbx_convert_options_init(&co);
        co.cast_to = dt;
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_convert(in, out, &co, &e);
        if (c != (st == TBX_OK))
            fprintf(stderr, "cast to %s: castable %d, tbx_convert says %s: %s\n", di->name, c,
                    tbx_status_name(st), e.message);
        CHECK_EQ(c, st == TBX_OK);
        if (st == TBX_OK) { /* and the output holds that dtype */
            tbx_file *f = NULL;
            CHECK_OK(tbx_open_path(&f, out, NULL, &e));
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
            if (f) CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
            CHECK_EQ(ti.dtype, dt);
            tbx_close(f);
        } else if (c == 0 && (di->flags & TBX_DTF_BLOCK) == 0 && dt != TBX_DT_F32) {
            /* the refusal names the cast and lists what can be asked for */
            CHECK(strstr(e.message, di->name) != NULL);
            CHECK(strstr(e.message, "bf16") != NULL);
        }
        unlink(out);
        free(out);
    }
    CHECK(castable >= 4);
    tbx_close(in);
    unlink(src);
    free(src);
}

TBX_TEST_MAIN()
