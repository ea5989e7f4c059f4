/*
 * test_sections.c - the section path of the model (no format on main stores sections yet; MCF
 * and EMBD will): tbx_file_add_section (what a driver calls while opening), the public reading
 * API (tbx_section_count / _info_get / _read), tbx_writer_add_section with a driver that accepts
 * sections and with one that has none, and tbx_convert's copy_sections (refusal, drop, limits,
 * unreadable bytes).
 *
 * A handle of a real safetensors file gets sections added through the driver-side call, as a
 * driver with sections would; expected bytes are read from the file with stdio, independently
 * of the library.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "tbx_test.h"
#include "tbx_test_dir.h"
#include "api.h"
#include "tensorbox.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* A one-tensor safetensors file ("w", F32 [4] = 1..4) at a fresh path; returns the path. */
static const char *make_input(char *path, size_t cap) {
    tbx_test_dir_file(path, cap, "tbx_test_sections", "in.safetensors");
    unlink(path);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, path, &wo, &e) != TBX_OK) abort();
    const uint64_t shape[1] = {4};
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.name = "w";
    d.dtype = TBX_DT_F32;
    d.ndim = 1;
    d.shape = shape;
    d.has_data = 1;
    const float v[4] = {1, 2, 3, 4};
    if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK ||
        tbx_writer_write_tensor(w, 0, v, sizeof v, &e) != TBX_OK ||
        tbx_writer_finish(w, &e) != TBX_OK)
        abort();
    return path;
}

/* The file's bytes [off, off + n) read with stdio. */
static void file_bytes(const char *path, uint64_t off, uint8_t *out, size_t n) {
    FILE *fp = fopen(path, "rb");
    if (!fp || fseek(fp, (long)off, SEEK_SET) != 0 || fread(out, 1, n, fp) != n) abort();
    fclose(fp);
}

static long file_size(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp || fseek(fp, 0, SEEK_END) != 0) abort();
    long n = ftell(fp);
    fclose(fp);
    return n;
}

/* Opens `path` and adds the sections a driver with sections would: "head" over the 8-byte
 * header length, "tail" over the last 16 bytes (the tensor data). */
static tbx_file *open_with_sections(const char *path) {
    tbx_file *f = NULL;
    tbx_error e;
    if (tbx_open_path(&f, path, NULL, &e) != TBX_OK) abort();
    uint64_t size = (uint64_t)file_size(path);
    char name[8] = "head";
    if (tbx_file_add_section(f, name, 7, 0, 8, &e) != TBX_OK) abort();
    memset(name, 'x', sizeof name - 1); /* the model keeps its own copy of the name */
    if (tbx_file_add_section(f, "tail", 9, size - 16, 16, &e) != TBX_OK) abort();
    return f;
}

TBX_TEST(sections_are_listed_and_read_from_the_file) {
    char path[700];
    make_input(path, sizeof path);
    tbx_file *f = open_with_sections(path);
    CHECK_EQ(tbx_section_count(f), 2);
    CHECK_EQ(tbx_section_count(NULL), 0);

    tbx_section_info si = TBX_SECTION_INFO_INIT;
    CHECK_OK(tbx_section_info_get(f, 0, &si));
    CHECK_STR(si.name, "head");
    CHECK_EQ(si.type, 7);
    CHECK_EQ(si.offset, 0);
    CHECK_EQ(si.size, 8);
    CHECK_OK(tbx_section_info_get(f, 1, &si));
    CHECK_STR(si.name, "tail");
    CHECK_EQ(si.type, 9);
    CHECK_EQ(si.offset, (uint64_t)file_size(path) - 16);
    CHECK_EQ(tbx_section_info_get(f, 2, &si), TBX_E_INVALID_ARG);

    /* size query, short buffer, exact bytes */
    tbx_error e;
    size_t need = 0;
    CHECK_EQ(tbx_section_read(f, 1, NULL, 0, &need, &e), TBX_E_BUFFER_TOO_SMALL);
    CHECK_EQ(need, 16);
    CHECK_STR(e.field, "buffer");
    uint8_t got[16], want[16];
    CHECK_EQ(tbx_section_read(f, 1, got, 15, NULL, &e), TBX_E_BUFFER_TOO_SMALL);
    CHECK_OK(tbx_section_read(f, 1, got, sizeof got, &need, &e));
    file_bytes(path, (uint64_t)file_size(path) - 16, want, 16);
    CHECK(memcmp(got, want, 16) == 0);
    const float v[4] = {1, 2, 3, 4};
    CHECK(memcmp(got, v, 16) == 0); /* the tensor's bytes (little-endian host) */
    CHECK_OK(tbx_section_read(f, 0, got, sizeof got, &need, &e));
    CHECK_EQ(need, 8);
    file_bytes(path, 0, want, 8);
    CHECK(memcmp(got, want, 8) == 0);
    CHECK_EQ(tbx_section_read(f, 2, got, sizeof got, NULL, &e), TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "section");
    tbx_close(f);
}

TBX_TEST(a_section_past_the_end_of_the_file_fails_to_read) {
    char path[700];
    make_input(path, sizeof path);
    tbx_file *f = open_with_sections(path);
    tbx_error e;
    uint64_t size = (uint64_t)file_size(path);
    CHECK_OK(tbx_file_add_section(f, "beyond", 1, size - 4, 8, &e));
    uint8_t buf[8];
    CHECK_EQ(tbx_section_read(f, 2, buf, sizeof buf, NULL, &e), TBX_E_TRUNCATED);
    CHECK_STR(e.field, "beyond");
    tbx_close(f);
}

/* A driver whose writer accepts sections (the safetensors driver with a section check). */
static int g_check_calls;
static tbx_status accept_section(tbx_writer *w, const char *name, uint32_t type, size_t len,
                                 tbx_error *err) {
    (void)w;
    g_check_calls++;
    if (strcmp(name, "bad") == 0)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "section", "refused %u %zu", type, len);
    return TBX_OK;
}

TBX_TEST(writer_sections_need_a_driver_that_stores_them) {
    char path[700];
    make_input(path, sizeof path);
    char out[760];
    snprintf(out, sizeof out, "%s.out", path);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    wo.flags |= TBX_WRITE_OVERWRITE;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, out, &wo, &e));
    const uint8_t data[5] = {1, 2, 3, 4, 5};
    /* safetensors has no sections: the core refuses before anything is stored */
    CHECK_EQ(tbx_writer_add_section(w, "s", 1, data, sizeof data, &e), TBX_E_UNSUPPORTED);
    CHECK_STR(e.field, "section");
    CHECK(strstr(e.message, "\"s\"") != NULL);
    CHECK_EQ(w->nsections, 0);

    tbx_driver with_sections = *w->drv;
    with_sections.w_check_section = accept_section;
    const tbx_driver *orig = w->drv;
    w->drv = &with_sections;
    g_check_calls = 0;
    CHECK_OK(tbx_writer_add_section(w, "s", 3, data, sizeof data, &e));
    CHECK_EQ(g_check_calls, 1);
    CHECK_EQ(w->nsections, 1);
    CHECK_STR(w->sections[0].name, "s");
    CHECK_EQ(w->sections[0].type, 3);
    CHECK_EQ(w->sections[0].len, sizeof data);
    CHECK(w->sections[0].data != data && memcmp(w->sections[0].data, data, sizeof data) == 0);
    /* the driver's refusal is returned as is, nothing stored */
    CHECK_EQ(tbx_writer_add_section(w, "bad", 4, data, 2, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "refused 4 2") != NULL);
    CHECK_EQ(w->nsections, 1);
    CHECK_EQ(tbx_writer_add_section(w, NULL, 1, data, 1, &e), TBX_E_INVALID_ARG);
    w->drv = orig;
    tbx_writer_abort(w);
    CHECK(access(out, F_OK) != 0);
}

static tbx_status convert_to(tbx_file *f, const char *out, tbx_format fmt, uint32_t flags,
                             tbx_error *e) {
    tbx_convert_options o;
    tbx_convert_options_init(&o);
    o.write.format = fmt;
    o.write.flags |= TBX_WRITE_OVERWRITE;
    o.flags = flags;
    return tbx_convert(f, out, &o, e);
}

TBX_TEST(convert_refuses_or_drops_sections_the_target_cannot_store) {
    char path[700], out[760];
    make_input(path, sizeof path);
    tbx_file *f = open_with_sections(path);
    tbx_error e;
    const tbx_format targets[] = {TBX_FORMAT_SAFETENSORS, TBX_FORMAT_GGUF, TBX_FORMAT_ZTENSOR,
                                  TBX_FORMAT_OINF};
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        snprintf(out, sizeof out, "%s.%d", path, (int)k);
        unlink(out);
        /* lossless by default: the first section stops the conversion, naming it */
        CHECK_EQ(convert_to(f, out, targets[k], 0, &e), TBX_E_UNSUPPORTED);
        CHECK(strstr(e.message, "\"head\"") != NULL);
        CHECK(strstr(e.message, "(allow it with --drop-sections)") != NULL);
        CHECK(access(out, F_OK) != 0);
        /* dropped on request: the rest is converted */
        CHECK_OK(convert_to(f, out, targets[k], TBX_CONVERT_DROP_SECTIONS, &e));
        tbx_file *g = NULL;
        CHECK_OK(tbx_open_path(&g, out, NULL, &e));
        if (g) {
            CHECK_EQ(tbx_section_count(g), 0);
            CHECK_EQ(tbx_tensor_count(g), 1);
            float v[4] = {0};
            CHECK_OK(tbx_tensor_read_f32(g, 0, 0, 4, v, &e));
            CHECK(v[0] == 1 && v[3] == 4);
            tbx_close(g);
        }
        unlink(out);
    }
    tbx_close(f);
}

/* A section the target takes is read whole within max_side_file_bytes (TBX_E_LIMIT naming it,
 * its size and the limit) and must be readable (TBX_E_TRUNCATED naming it); one the target
 * refuses is dropped on request without being read (issue 19: a side file over a limit is
 * never read only to be dropped, and never dropped without a word). */
TBX_TEST(convert_reads_the_sections_it_offers_within_the_side_file_limit) {
    char path[700], out[760];
    make_input(path, sizeof path);
    snprintf(out, sizeof out, "%s.lim", path);
    tbx_error e;
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    tbx_limits lim;
    tbx_limits_default(&lim);
    lim.max_side_file_bytes = 16;
    oo.limits = &lim;
    tbx_file *f = NULL;
    uint64_t size = (uint64_t)file_size(path);
    /* MCF takes mcf.section.0xTTTT: 17 bytes are over the limit, 16 are read and stored */
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    CHECK_OK(tbx_file_add_section(f, "mcf.section.0x0100", 0x100, 0, 17, &e));
    CHECK_EQ(convert_to(f, out, TBX_FORMAT_MCF, TBX_CONVERT_DROP_SECTIONS, &e), TBX_E_LIMIT);
    CHECK_STR(e.field, "mcf.section.0x0100");
    CHECK(strstr(e.message, "17 bytes") && strstr(e.message, "limit of 16 bytes"));
    CHECK(access(out, F_OK) != 0);
    tbx_close(f);
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    CHECK_OK(tbx_file_add_section(f, "mcf.section.0x0100", 0x100, 0, 16, &e));
    CHECK_OK(convert_to(f, out, TBX_FORMAT_MCF, 0, &e));
    tbx_close(f);
    unlink(out);
    /* GGUF takes no section: dropped on request without reading it, whatever its size or
     * place (bytes past the end of the input included) */
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    CHECK_OK(tbx_file_add_section(f, "big", 1, 0, 17, &e));
    CHECK_OK(tbx_file_add_section(f, "beyond", 1, size - 4, 8, &e));
    CHECK_OK(convert_to(f, out, TBX_FORMAT_GGUF, TBX_CONVERT_DROP_SECTIONS, &e));
    tbx_close(f);
    unlink(out);
    /* bytes past the end of the input, in a section the target takes: the read fails */
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    CHECK_OK(tbx_file_add_section(f, "mcf.section.0x0101", 0x101, size - 4, 8, &e));
    CHECK_EQ(convert_to(f, out, TBX_FORMAT_MCF, TBX_CONVERT_DROP_SECTIONS, &e), TBX_E_TRUNCATED);
    CHECK_STR(e.field, "mcf.section.0x0101");
    CHECK(access(out, F_OK) != 0);
    tbx_close(f);
}

TBX_TEST_MAIN()
