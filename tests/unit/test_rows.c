/*
 * test_rows.c - the core holds every driver to what its row declares, whatever the driver's own
 * code does:
 *   - versions read: after a driver's open, a file whose version the row does not declare
 *     readable is refused (TBX_E_BAD_VERSION naming it); shown with a real driver (OINF) whose
 *     row is copied with one version less, on a real file of that version;
 *   - versions written: every version of every writable format is accepted at the writer's open
 *     exactly when the row declares it, the refusal names the versions the row has, and the
 *     driver writes the version it was given (0: the row's default), read back from the file;
 *   - component bytes a driver transforms (tbx_component.xform: big-endian elements) go through
 *     its read_component, one component at a time: the others of the same file are served
 *     straight from the source (read, range-read, mapped), and a transformed one is never
 *     handed out as stored, even by a driver that forgot its read_component;
 *   - size variables are part of the model (tbx_file_add_sizevar), served by tbx_sizevar_* for
 *     any driver that adds them: order kept, duplicates and the budget refused;
 *   - a format's own write options (tbx_write_options.options) are checked at the writer's
 *     open against the row's table (tbx_format_option_at): unknown keys, wrong types, values
 *     out of range are refused naming the key, also by tbx_writer_check; MCF's dedup does what
 *     it says (shared or separate payloads, read back from the file) and the writer keeps its
 *     own copy of the options.
 * Files are written under $TMPDIR (default /tmp).
 */
#include "tbx_test.h"
#include "tensorbox.h"

#include "api.h"

#include <math.h>
#include <unistd.h>

static char *temp_path(const char *tag, const char *ext) {
    static int counter;
    char *path = malloc(600);
    tbx_test_tmppath(path, 600, "tbx_test_rows_%d_%s_%d%s", (int)getpid(), tag, counter++, ext);
    unlink(path);
    return path;
}

/* A file of `format` at version `version` (0: the default) holding one f32 tensor [2, 32];
 * TBX_OK when the writer accepted it, else its status. */
static tbx_status write_one(const char *path, tbx_format format, uint32_t version, tbx_error *e) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = format;
    wo.version = version;
    tbx_writer *w = NULL;
    tbx_status st = tbx_writer_open(&w, path, &wo, e);
    if (st != TBX_OK) return st;
    static const uint64_t shape[2] = {2, 32};
    float data[64];
    for (int i = 0; i < 64; i++) data[i] = (float)i;
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.name = "t";
    d.dtype = TBX_DT_F32;
    d.ndim = 2;
    d.shape = shape;
    d.has_data = 1;
    st = tbx_writer_add_tensor(w, &d, NULL, e);
    if (st == TBX_OK) st = tbx_writer_write_tensor(w, 0, data, sizeof data, e);
    if (st != TBX_OK) {
        tbx_writer_abort(w);
        return st;
    }
    return tbx_writer_finish(w, e);
}

TBX_TEST(read_version_outside_the_row_is_refused) {
    char *path = temp_path("v2", ".oinf");
    tbx_error e;
    CHECK_OK(write_one(path, TBX_FORMAT_OINF, 2, &e));
    size_t len = 0;
    uint8_t *bytes = tbx_test_slurp(path, &len);
    CHECK(bytes != NULL);
    /* the real driver, its row declaring version 1 only: the driver reads the file (it knows
     * version 2), the core refuses it */
    tbx_driver narrowed = tbx_driver_oinf;
    narrowed.read_versions = 0x2u;
    for (int pass = 0; pass < 2 && bytes; pass++) {
        tbx_file *f = NULL, *out = NULL;
        CHECK_OK(tbx_file_new_(&f, NULL, &e));
        if (!f) break;
        tbx_source_open_memory(&f->src, bytes, len);
        f->format = TBX_FORMAT_OINF;
        f->drv = pass == 0 ? &tbx_driver_oinf : &narrowed;
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_file_open_done_(f, f->drv->open(f, &e), &out, &e);
        if (pass == 0) { /* the row as it is: version 2 is readable */
            CHECK_OK(st);
            CHECK(out != NULL);
            CHECK_EQ(tbx_file_version(out), 2);
            tbx_close(out);
        } else {
            CHECK_EQ(st, TBX_E_BAD_VERSION);
            CHECK(out == NULL);
            CHECK_STR(e.field, "version");
            CHECK(strstr(e.message, "oinf version 2") != NULL);
            CHECK(strstr(e.message, "reads 1)") != NULL);
            CHECK_EQ(e.offset, TBX_NO_OFFSET);
        }
    }
    free(bytes);
    unlink(path);
    free(path);
}

TBX_TEST(write_versions_come_from_the_row) {
    int written = 0;
    for (size_t i = 0; i < tbx_format_count(); i++) {
        tbx_format fmt = tbx_format_at(i);
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        CHECK_OK(tbx_format_caps_get(fmt, &c));
        if (!(c.flags & TBX_FCAP_WRITE)) continue;
        char *path = temp_path(c.name, c.extensions);
        for (uint32_t v = 0; v < 40; v++) {
            tbx_write_options wo;
            tbx_write_options_init(&wo);
            wo.format = fmt;
            wo.version = v;
            tbx_error e;
            memset(&e, 0, sizeof e);
            tbx_status st = tbx_writer_check(path, &wo, &e);
            int declared = v == 0 || (v < 32 && (c.write_versions >> v & 1u));
            if (declared != (st == TBX_OK))
                fprintf(stderr, "%s: version %u declared %d, writer says %s: %s\n", c.name, v,
                        declared, tbx_status_name(st), e.message);
            CHECK_EQ(declared, st == TBX_OK);
            if (!declared) {
                CHECK_EQ(st, TBX_E_UNSUPPORTED);
                CHECK_STR(e.field, "version");
                CHECK(strstr(e.message, "this library writes") != NULL);
                continue;
            }
            /* the driver writes what it was given: a file it can make of one f32 tensor reads
             * back at that version (the row's default for 0) */
            st = write_one(path, fmt, v, &e);
            if (st != TBX_OK) { /* a format that needs more than one tensor (EMBD: a vocabulary) */
                CHECK(st != TBX_E_UNSUPPORTED || strcmp(e.field, "version") != 0);
                continue;
            }
            tbx_file *f = NULL;
            tbx_open_options oo;
            tbx_open_options_init(&oo);
            oo.format = fmt;
            CHECK_OK(tbx_open_path(&f, path, &oo, &e));
            if (f) {
                uint32_t want = v ? v : c.write_version;
                if (tbx_file_version(f) != want)
                    fprintf(stderr, "%s: written with version %u, reads back %u\n", c.name, v,
                            tbx_file_version(f));
                CHECK_EQ(tbx_file_version(f), want);
                written++;
            }
            tbx_close(f);
            unlink(path);
        }
        free(path);
    }
    /* GGUF 2 and 3 (default), OINF 1 (default) and 2 at least were written and read back */
    CHECK(written >= 4);
}

/* A driver whose read_component inverts every byte (a stand-in for a byte swap). */
static int g_xform_calls;
static tbx_status invert_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                                   tbx_error *err) {
    const tbx_component *k = &t->comp[c];
    g_xform_calls++;
    tbx_status st = tbx_source_read(tbx_file_source(f, k->src), k->offset, buf,
                                    (size_t)k->nbytes, t->name, err);
    for (uint64_t i = 0; st == TBX_OK && i < k->nbytes; i++) ((uint8_t *)buf)[i] ^= 0xFF;
    return st;
}

/* Two u8 tensors of 16 bytes over `bytes`; the second's component transformed. */
static tbx_file *two_tensors(const uint8_t *bytes, const tbx_driver *drv) {
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_file_new_(&f, NULL, &e));
    if (!f) return NULL;
    tbx_source_open_memory(&f->src, bytes, 32);
    f->drv = drv;
    f->format = TBX_FORMAT_GGUF;
    static const uint64_t shape[1] = {16};
    for (int i = 0; i < 2; i++) {
        tbx_tensor *t = NULL;
        CHECK_OK(tbx_file_add_tensor(f, i ? "b" : "a", 1, TBX_DT_U8, shape, 1, 1, 0, &t, &e));
        if (!t) break;
        tbx_comp_set_raw(t, TBX_DT_U8, 16u * (unsigned)i, 16);
        t->comp[0].xform = (uint8_t)i;
    }
    return f;
}

TBX_TEST(transformed_components_one_at_a_time) {
    uint8_t bytes[32];
    for (int i = 0; i < 32; i++) bytes[i] = (uint8_t)i;
    tbx_driver drv = {0};
    drv.format = TBX_FORMAT_GGUF;
    drv.name = "test";
    drv.read_versions = 1;
    drv.read_component = invert_component;
    tbx_file *f = two_tensors(bytes, &drv);
    if (!f) return;
    uint8_t buf[16];
    tbx_error e;
    g_xform_calls = 0;
    CHECK_OK(tbx_tensor_read(f, 0, buf, sizeof buf, NULL, &e)); /* as stored */
    CHECK(memcmp(buf, bytes, 16) == 0);
    CHECK_EQ(g_xform_calls, 0);
    CHECK_OK(tbx_tensor_read(f, 1, buf, sizeof buf, NULL, &e)); /* through the driver */
    for (int i = 0; i < 16; i++) CHECK_EQ(buf[i], (uint8_t)(16 + i) ^ 0xFF);
    CHECK_EQ(g_xform_calls, 1);
    const void *p = NULL;
    size_t len = 0;
    CHECK_OK(tbx_tensor_map(f, 0, &p, &len, &e)); /* the stored bytes are the values: mapped */
    CHECK(p == bytes && len == 16);
    CHECK_EQ(tbx_tensor_map(f, 1, &p, &len, &e), TBX_E_UNSUPPORTED);
    CHECK_OK(tbx_tensor_read_range(f, 0, 4, buf, 4, &e));
    CHECK(memcmp(buf, bytes + 4, 4) == 0);
    CHECK_EQ(tbx_tensor_read_range(f, 1, 4, buf, 4, &e), TBX_E_UNSUPPORTED);
    float v[16];
    CHECK_OK(tbx_tensor_read_f32(f, 1, 0, 16, v, &e)); /* decoding reads the values */
    CHECK(v[0] == (float)(16 ^ 0xFF) && v[15] == (float)(31 ^ 0xFF));
    tbx_close(f);

    /* a driver without read_component: the transformed bytes are refused, never served raw */
    drv.read_component = NULL;
    f = two_tensors(bytes, &drv);
    if (!f) return;
    CHECK_OK(tbx_tensor_read(f, 0, buf, sizeof buf, NULL, &e));
    memset(&e, 0, sizeof e);
    CHECK_EQ(tbx_tensor_read(f, 1, buf, sizeof buf, NULL, &e), TBX_E_UNSUPPORTED);
    CHECK_STR(e.field, "component.encoding");
    tbx_close(f);
}

TBX_TEST(sizevars_are_part_of_the_model) {
    tbx_file *f = NULL;
    tbx_error e;
    tbx_limits lim;
    tbx_limits_default(&lim);
    lim.meta_budget_per_byte = 0;
    lim.meta_budget_base = 400; /* room for a few */
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.limits = &lim;
    CHECK_OK(tbx_file_new_(&f, &o, &e));
    if (!f) return;
    CHECK_EQ(tbx_sizevar_count(f), 0);
    CHECK_OK(tbx_file_add_sizevar(f, "S", 1, 7, 10, &e));
    CHECK_OK(tbx_file_add_sizevar(f, "B", 1, UINT64_MAX, 20, &e));
    memset(&e, 0, sizeof e);
    CHECK_EQ(tbx_file_add_sizevar(f, "S", 1, 8, 30, &e), TBX_E_DUPLICATE);
    CHECK_STR(e.field, "sizevars.name");
    CHECK_EQ(e.offset, 30);
    CHECK(strstr(e.message, "\"S\"") && strstr(e.message, "entry 0"));
    CHECK_EQ(tbx_sizevar_count(f), 2);
    const char *name = NULL;
    size_t nl = 0;
    uint64_t v = 0;
    CHECK_OK(tbx_sizevar_get(f, 0, &name, &nl, &v));
    CHECK(nl == 1 && name && strcmp(name, "S") == 0 && v == 7);
    CHECK_OK(tbx_sizevar_get(f, 1, &name, &nl, &v));
    CHECK(nl == 1 && name && strcmp(name, "B") == 0 && v == UINT64_MAX);
    CHECK_EQ(tbx_sizevar_get(f, 2, &name, &nl, &v), TBX_E_INVALID_ARG);
    /* a long name past the budget: refused naming the field and offset */
    char big[512];
    memset(big, 'x', sizeof big);
    memset(&e, 0, sizeof e);
    CHECK_EQ(tbx_file_add_sizevar(f, big, sizeof big, 1, 40, &e), TBX_E_LIMIT);
    CHECK_STR(e.field, "sizevars.name");
    CHECK_EQ(e.offset, 40);
    CHECK_EQ(tbx_sizevar_count(f), 2);
    tbx_close(f);
    CHECK_EQ(tbx_sizevar_count(NULL), 0);
}

/* Opens a writer of `fmt` with `opts` and returns the status (the writer aborted). */
static tbx_status open_with(tbx_format fmt, const tbx_value *opts, tbx_error *e) {
    char *path = temp_path("opt", ".x");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = fmt;
    wo.options = opts;
    tbx_writer *w = NULL;
    tbx_status st = tbx_writer_open(&w, path, &wo, e);
    tbx_error e2;
    tbx_status st2 = tbx_writer_check(path, &wo, &e2);
    CHECK_EQ(st2, st); /* tbx_writer_check says the same before any work */
    if (st != TBX_OK) CHECK_STR(e2.field, e->field);
    CHECK((st == TBX_OK) == (w != NULL));
    tbx_writer_abort(w);
    free(path);
    return st;
}

static tbx_value *one_option(const char *key, tbx_value *v) {
    tbx_value *m = tbx_value_new_map();
    if (m && tbx_value_map_put(m, key, strlen(key), v) != TBX_OK) {
        tbx_value_free(m);
        return NULL;
    }
    return m;
}

TBX_TEST(write_options_checked_at_open) {
    CHECK(tbx_format_option_at(TBX_FORMAT_UNKNOWN, 0) == NULL);
    int declared = 0;
    for (size_t i = 0; i < tbx_format_count(); i++) {
        tbx_format fmt = tbx_format_at(i);
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        CHECK_OK(tbx_format_caps_get(fmt, &c));
        if (!(c.flags & TBX_FCAP_WRITE)) continue;
        tbx_error e;
        /* no options, an empty map: fine */
        CHECK_OK(open_with(fmt, NULL, &e));
        tbx_value *empty = tbx_value_new_map();
        CHECK_OK(open_with(fmt, empty, &e));
        tbx_value_free(empty);
        /* not a map */
        tbx_value *s = tbx_value_new_string("x", 1);
        CHECK_EQ(open_with(fmt, s, &e), TBX_E_INVALID_ARG);
        CHECK_STR(e.field, "options");
        tbx_value_free(s);
        /* a key the format does not declare */
        tbx_value *m = one_option("no_such_option", tbx_value_new_bool(1));
        CHECK_EQ(open_with(fmt, m, &e), TBX_E_INVALID_ARG);
        CHECK_STR(e.field, "options.no_such_option");
        CHECK(strstr(e.message, c.name) != NULL);
        tbx_value_free(m);
        /* each declared option: a value of its type is taken, another type refused */
        for (size_t k = 0; tbx_format_option_at(fmt, k); k++) {
            const tbx_format_option *o = tbx_format_option_at(fmt, k);
            declared++;
            CHECK(o->key && o->help && o->help[0]);
            char field[64];
            snprintf(field, sizeof field, "options.%s", o->key);
            tbx_value *good = NULL, *bad = NULL, *out_of_range = NULL;
            if (o->type == TBX_V_BOOL) {
                good = tbx_value_new_bool(1);
                bad = tbx_value_new_uint(TBX_V_U8, 1);
            } else if (o->type == TBX_V_U64) {
                good = tbx_value_new_uint(TBX_V_U64, o->min);
                bad = tbx_value_new_string("1", 1);
                if (o->max < UINT64_MAX) out_of_range = tbx_value_new_uint(TBX_V_U64, o->max + 1);
            } else if (o->type == TBX_V_F64) {
                good = tbx_value_new_float(TBX_V_F64, 0.5);
                bad = tbx_value_new_string("1", 1);
                out_of_range = tbx_value_new_float(TBX_V_F64, INFINITY);
            } else {
                CHECK_EQ(o->type, TBX_V_STRING);
                size_t n = strcspn(o->choices, " ");
                good = tbx_value_new_string(o->choices, n);
                bad = tbx_value_new_string("\x01no-such-choice", 15);
            }
            /* the format's number options go in pairs (MCF's clip range): a number is given
             * with every other number option of its format at the same good value, so a row's
             * rule for them together (w_check_options) holds */
            tbx_value *partners = tbx_value_new_map();
            for (size_t j = 0; o->type == TBX_V_F64 && tbx_format_option_at(fmt, j); j++) {
                const tbx_format_option *p = tbx_format_option_at(fmt, j);
                if (p != o && p->type == TBX_V_F64)
                    CHECK_OK(tbx_value_map_put(partners, p->key, strlen(p->key),
                                               tbx_value_new_float(TBX_V_F64, 0.5)));
            }
            tbx_value *gm = one_option(o->key, good);
            for (uint64_t j = 0; j < tbx_value_len(partners); j++) {
                size_t kl = 0;
                const char *k = tbx_value_key_at(partners, j, &kl);
                CHECK_OK(tbx_value_map_put(gm, k, kl, tbx_value_new_float(TBX_V_F64, 0.5)));
            }
            tbx_value_free(partners);
            CHECK_OK(open_with(fmt, gm, &e));
            tbx_value_free(gm);
            tbx_value *bm = one_option(o->key, bad);
            CHECK_EQ(open_with(fmt, bm, &e), TBX_E_INVALID_ARG);
            CHECK_STR(e.field, field);
            tbx_value_free(bm);
            if (out_of_range) {
                tbx_value *rm = one_option(o->key, out_of_range);
                CHECK_EQ(open_with(fmt, rm, &e), TBX_E_INVALID_ARG);
                CHECK_STR(e.field, field);
                tbx_value_free(rm);
            }
        }
    }
    CHECK(declared >= 1); /* MCF's dedup at least */
}

/* Two identical f32 tensors to MCF with `opts` (`flags`): their payload offsets. */
static tbx_status mcf_pair(const tbx_value *opts, uint32_t flags, uint64_t off[2]) {
    char *path = temp_path("dedup", ".mcf");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_MCF;
    wo.flags = flags;
    tbx_value *copy = opts ? tbx_value_clone(opts) : NULL;
    wo.options = copy;
    tbx_writer *w = NULL;
    tbx_error e;
    tbx_status st = tbx_writer_open(&w, path, &wo, &e);
    tbx_value_free(copy); /* the writer keeps its own */
    if (st != TBX_OK) {
        free(path);
        return st;
    }
    static const uint64_t shape[2] = {4, 16};
    float data[64];
    for (int i = 0; i < 64; i++) data[i] = (float)i * 0.5f;
    for (int i = 0; i < 2; i++) {
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = i ? "b" : "a";
        d.dtype = TBX_DT_F32;
        d.ndim = 2;
        d.shape = shape;
        d.has_data = 1;
        CHECK_OK(tbx_writer_add_tensor(w, &d, NULL, &e));
    }
    for (int i = 0; i < 2; i++) CHECK_OK(tbx_writer_write_tensor(w, (uint64_t)i, data, sizeof data, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    for (int i = 0; f && i < 2; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, (uint64_t)i, &ti));
        off[i] = ti.offset;
    }
    tbx_close(f);
    unlink(path);
    free(path);
    return TBX_OK;
}

TBX_TEST(mcf_dedup_option) {
    const tbx_format_option *o = tbx_format_option_at(TBX_FORMAT_MCF, 0);
    CHECK(o && strcmp(o->key, "dedup") == 0 && o->type == TBX_V_BOOL);
    uint64_t off[2] = {0, 1};
    CHECK_OK(mcf_pair(NULL, 0, off)); /* default: shared, as mantle's pack --dedup */
    CHECK_EQ(off[0], off[1]);
    tbx_value *no = one_option("dedup", tbx_value_new_bool(0));
    off[0] = 0, off[1] = 0;
    CHECK_OK(mcf_pair(no, 0, off));
    CHECK(off[0] != off[1]);
    tbx_value *yes = one_option("dedup", tbx_value_new_bool(1));
    off[0] = 0, off[1] = 1;
    CHECK_OK(mcf_pair(yes, 0, off));
    CHECK_EQ(off[0], off[1]);
    off[0] = 0, off[1] = 0;
    CHECK_OK(mcf_pair(NULL, TBX_WRITE_NO_DEDUP, off)); /* the flag, as before */
    CHECK(off[0] != off[1]);
    CHECK_EQ(mcf_pair(yes, TBX_WRITE_NO_DEDUP, off), TBX_E_INVALID_ARG); /* they disagree */
    tbx_value_free(no);
    tbx_value_free(yes);
}

/* Every kind of option a row can declare, checked by core at the writer's open: a test row
 * (the safetensors driver with a table of its own). */
static const tbx_format_option test_options[] = {
    {"flag", TBX_V_BOOL, 0, 0, NULL, "a bool"},
    {"level", TBX_V_U64, 1, 9, NULL, "an integer in 1..9"},
    {"ratio", TBX_V_F64, 0, 0, NULL, "a finite number"},
    {"mode", TBX_V_STRING, 0, 0, "fast best", "one of fast, best"},
    {NULL, TBX_V_NULL, 0, 0, NULL, NULL},
};

static tbx_status create_with(const tbx_driver *drv, const char *key, tbx_value *v,
                              tbx_error *e, double *ratio_seen) {
    char *path = temp_path("kinds", ".safetensors");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    tbx_value *m = one_option(key, v);
    wo.options = m;
    tbx_writer *w = NULL;
    memset(e, 0, sizeof *e);
    tbx_status st = tbx_writer_create_(&w, drv, path, &wo, 0, NULL, e);
    tbx_value_free(m); /* the writer has its copy */
    if (w && ratio_seen) *ratio_seen = tbx_writer_opt_f64(w, "ratio", -1);
    tbx_writer_abort(w);
    free(path);
    return st;
}

TBX_TEST(option_kinds_checked_by_core) {
    tbx_driver drv = tbx_driver_safetensors;
    drv.w_options = test_options;
    tbx_error e;
    double seen = 0;
    CHECK_OK(create_with(&drv, "flag", tbx_value_new_bool(0), &e, NULL));
    CHECK_EQ(create_with(&drv, "flag", tbx_value_new_string("true", 4), &e, NULL),
             TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "options.flag");
    CHECK_OK(create_with(&drv, "level", tbx_value_new_int(TBX_V_I32, 9), &e, NULL));
    CHECK_EQ(create_with(&drv, "level", tbx_value_new_uint(TBX_V_U8, 10), &e, NULL),
             TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "10, outside 1..9") != NULL);
    CHECK_EQ(create_with(&drv, "level", tbx_value_new_int(TBX_V_I64, -1), &e, NULL),
             TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "-1, outside 1..9") != NULL);
    CHECK_EQ(create_with(&drv, "level", tbx_value_new_float(TBX_V_F64, 3), &e, NULL),
             TBX_E_INVALID_ARG);
    CHECK_OK(create_with(&drv, "ratio", tbx_value_new_float(TBX_V_F32, 0.5), &e, &seen));
    CHECK(seen == 0.5);
    CHECK_OK(create_with(&drv, "ratio", tbx_value_new_int(TBX_V_I64, -2), &e, &seen));
    CHECK(seen == -2.0);
    CHECK_EQ(create_with(&drv, "ratio", tbx_value_new_float(TBX_V_F64, INFINITY), &e, NULL),
             TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "options.ratio");
    CHECK_OK(create_with(&drv, "mode", tbx_value_new_string("best", 4), &e, NULL));
    CHECK_EQ(create_with(&drv, "mode", tbx_value_new_string("bes", 3), &e, NULL),
             TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "not one of fast best") != NULL);
    CHECK_EQ(create_with(&drv, "mode", tbx_value_new_uint(TBX_V_U8, 1), &e, NULL),
             TBX_E_INVALID_ARG);
    CHECK_EQ(create_with(&drv, "other", tbx_value_new_bool(1), &e, NULL), TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "theirs: flag, level, ratio, mode") != NULL);
}

TBX_TEST_MAIN()
