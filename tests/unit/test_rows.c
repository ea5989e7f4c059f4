/*
 * test_rows.c - the core holds every driver to what its row declares, whatever the driver's own
 * code does:
 *   - versions read: after a driver's open, a file whose version the row does not declare
 *     readable is refused (TBX_E_BAD_VERSION naming it); shown with a real driver (OINF) whose
 *     row is copied with one version less, on a real file of that version;
 *   - versions written: every version of every writable format is accepted at the writer's open
 *     exactly when the row declares it, the refusal names the versions the row has, and the
 *     driver writes the version it was given (0: the row's default), read back from the file.
 * Files are written under $TMPDIR (default /tmp).
 */
#include "tbx_test.h"
#include "tensorbox.h"

#include "api.h"

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

TBX_TEST_MAIN()
