/*
 * test_progress.c - tbx_convert_options.progress (tbx_progress_fn), issue 24:
 *
 *  - a conversion calls it with done never decreasing, total fixed and equal to the input
 *    bytes of the tensors written here (a stored copy and a quantization of many jobs), and
 *    the last call says done == total;
 *  - a tensor of many jobs gets calls inside it (done strictly between two tensors' ends);
 *  - a non-zero return cancels: TBX_E_CANCELLED, no output file and no temporary file left
 *    (also when it cancels at the very end, and an existing output is left as it was);
 *  - tbx_diff_options.progress: the same order and end, total = both sides' bytes; a
 *    non-zero return: TBX_E_CANCELLED and no report.
 *  - tbx_open_options.progress (tbx_validate_path): the pass over a zTensor whose components
 *    carry a crc32c digest reports their stored bytes (= the raw tensor bytes written), in
 *    order, ending at the total; a plain safetensors file has nothing to pass over (0 of 0);
 *    a non-zero return: TBX_E_CANCELLED.
 *
 * The input is a safetensors file written here; the expected totals are the byte counts of
 * the tensors written (rows * cols * 4).
 */
#define _GNU_SOURCE /* mkdtemp */
#include "tbx_test.h"
#include "tbx_test_dir.h"
#include "tensorbox.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *tmp(char *buf, size_t cap, const char *name) {
    return tbx_test_dir_file(buf, cap, "tbx_test_progress", name);
}

/* Files of the test directory (a conversion that failed leaves none). */
static int count_files(void) { return tbx_test_dir_count(); }

/* big [BR, BC] f32 (several engine jobs of 2^19 values), small [3, 64] f32 */
#define BR 2048
#define BC 1024
#define IN_BYTES ((uint64_t)BR * BC * 4 + 3 * 64 * 4)

static const char *make_input(char *path, size_t cap) {
    tmp(path, cap, "in.safetensors");
    static int made;
    if (made++) return path;
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, path, &wo, &e) != TBX_OK) abort();
    const uint64_t sb[2] = {BR, BC}, ss[2] = {3, 64};
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.dtype = TBX_DT_F32;
    d.ndim = 2;
    d.has_data = 1;
    d.name = "big";
    d.shape = sb;
    if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK) abort();
    d.name = "small";
    d.shape = ss;
    if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK) abort();
    float *b = malloc((size_t)BR * BC * 4);
    if (!b) abort();
    for (size_t k = 0; k < (size_t)BR * BC; k++) b[k] = (float)((int)(k % 61) - 30) / 8.0f;
    float s[3 * 64];
    for (int k = 0; k < 3 * 64; k++) s[k] = (float)k;
    if (tbx_writer_write_tensor(w, 0, b, (size_t)BR * BC * 4, &e) != TBX_OK ||
        tbx_writer_write_tensor(w, 1, s, sizeof s, &e) != TBX_OK ||
        tbx_writer_finish(w, &e) != TBX_OK)
        abort();
    free(b);
    return path;
}

typedef struct calls {
    int n, bad_order, total_changed, inside;
    uint64_t first_total, last_done, last_total;
    int cancel_at;          /* return 1 on call number cancel_at (1-based; 0: never) */
    int cancel_when_done;   /* return 1 when done == total */
} calls;

static int on_progress(void *ud, uint64_t done, uint64_t total) {
    calls *c = ud;
    c->n++;
    if (c->n == 1) c->first_total = total;
    else if (done < c->last_done) c->bad_order++;
    if (total != c->first_total) c->total_changed++;
    if (done > 0 && done < (uint64_t)BR * BC * 4) c->inside++; /* within "big" */
    c->last_done = done;
    c->last_total = total;
    if (c->cancel_at && c->n == c->cancel_at) return 1;
    if (c->cancel_when_done && done == total) return -1;
    return 0;
}

static tbx_status convert(const char *in, const char *out, tbx_format fmt, tbx_dtype quant,
                          calls *c, tbx_error *e) {
    tbx_file *f = NULL;
    if (tbx_open_path(&f, in, NULL, e) != TBX_OK) abort();
    tbx_convert_options o;
    tbx_convert_options_init(&o);
    o.write.format = fmt;
    o.write.flags = TBX_WRITE_OVERWRITE;
    o.quant_to = quant;
    o.progress = on_progress;
    o.progress_ud = c;
    tbx_status st = tbx_convert(f, out, &o, e);
    tbx_close(f);
    return st;
}

static void check_run(tbx_format fmt, tbx_dtype quant, const char *name, bool in_jobs) {
    char in[700], out[700];
    make_input(in, sizeof in);
    tmp(out, sizeof out, name);
    calls c;
    memset(&c, 0, sizeof c);
    tbx_error e;
    CHECK_OK(convert(in, out, fmt, quant, &c, &e));
    CHECK(c.n >= 2);
    CHECK_EQ(c.bad_order, 0);
    CHECK_EQ(c.total_changed, 0);
    CHECK_EQ(c.first_total, IN_BYTES);
    CHECK_EQ(c.last_done, IN_BYTES);
    CHECK_EQ(c.last_total, IN_BYTES);
    if (in_jobs) CHECK(c.inside >= 1); /* quantized, "big" is 4 jobs of 2^19 values */
    unlink(out);
}

TBX_TEST(progress_copy_monotonic_and_complete) {
    check_run(TBX_FORMAT_GGUF, TBX_DT_INVALID, "copy.gguf", false);
}

TBX_TEST(progress_quantize_monotonic_and_complete) {
    check_run(TBX_FORMAT_GGUF, TBX_DT_Q8_0, "q8.gguf", true);
}

static void check_cancel(int at, int when_done, tbx_dtype quant) {
    char in[700], out[700];
    make_input(in, sizeof in);
    tmp(out, sizeof out, "cancelled.gguf");
    unlink(out);
    const int before = count_files();
    calls c;
    memset(&c, 0, sizeof c);
    c.cancel_at = at;
    c.cancel_when_done = when_done;
    tbx_error e;
    CHECK_EQ(convert(in, out, TBX_FORMAT_GGUF, quant, &c, &e), TBX_E_CANCELLED);
    CHECK(strstr(e.message, "cancelled") != NULL);
    if (at) CHECK_EQ(c.n, at); /* no call after the one that cancelled */
    struct stat sb;
    CHECK(stat(out, &sb) != 0);       /* no output */
    CHECK_EQ(count_files(), before);  /* no temporary file */
}

TBX_TEST(progress_cancel_first_call) { check_cancel(1, 0, TBX_DT_Q8_0); }
TBX_TEST(progress_cancel_mid_tensor) { check_cancel(3, 0, TBX_DT_Q8_0); }
TBX_TEST(progress_cancel_copy) { check_cancel(1, 0, TBX_DT_INVALID); }
TBX_TEST(progress_cancel_at_the_end) { check_cancel(0, 1, TBX_DT_Q8_0); }

TBX_TEST(progress_cancel_keeps_existing_output) {
    char in[700], out[700];
    make_input(in, sizeof in);
    tmp(out, sizeof out, "existing.gguf");
    FILE *fp = fopen(out, "wb");
    if (!fp) abort();
    fputs("old contents", fp);
    fclose(fp);
    calls c;
    memset(&c, 0, sizeof c);
    c.cancel_when_done = 1;
    tbx_error e;
    CHECK_EQ(convert(in, out, TBX_FORMAT_GGUF, TBX_DT_Q8_0, &c, &e), TBX_E_CANCELLED);
    char buf[32] = {0};
    fp = fopen(out, "rb");
    CHECK(fp != NULL);
    if (fp) {
        CHECK_EQ(fread(buf, 1, sizeof buf - 1, fp), 12);
        fclose(fp);
    }
    CHECK_STR(buf, "old contents");
    unlink(out);
}

static tbx_status diff_self(calls *c, tbx_value **rep, tbx_error *e) {
    char in[700];
    make_input(in, sizeof in);
    tbx_file *a = NULL, *b = NULL;
    if (tbx_open_path(&a, in, NULL, e) != TBX_OK || tbx_open_path(&b, in, NULL, e) != TBX_OK)
        abort();
    tbx_diff_options o;
    tbx_diff_options_init(&o);
    o.progress = on_progress;
    o.progress_ud = c;
    tbx_status st = tbx_diff(a, b, &o, rep, e);
    tbx_close(a);
    tbx_close(b);
    return st;
}

TBX_TEST(progress_diff) {
    calls c;
    memset(&c, 0, sizeof c);
    tbx_value *rep = NULL;
    tbx_error e;
    CHECK_OK(diff_self(&c, &rep, &e));
    CHECK(rep != NULL);
    tbx_value_free(rep);
    CHECK(c.n >= 3); /* big is 8 MiB of values: several jobs */
    CHECK_EQ(c.bad_order, 0);
    CHECK_EQ(c.total_changed, 0);
    CHECK_EQ(c.first_total, 2 * IN_BYTES);
    CHECK_EQ(c.last_done, 2 * IN_BYTES);
    CHECK_EQ(c.last_total, 2 * IN_BYTES);
}

TBX_TEST(progress_diff_cancel) {
    for (int at = 1; at <= 2; at++) {
        calls c;
        memset(&c, 0, sizeof c);
        c.cancel_at = at == 1 ? 1 : 0;
        c.cancel_when_done = at == 2;
        tbx_value *rep = NULL;
        tbx_error e;
        CHECK_EQ(diff_self(&c, &rep, &e), TBX_E_CANCELLED);
        CHECK(rep == NULL);
        tbx_value_free(rep);
    }
}

/* The input as a zTensor with a crc32c digest per component (stored raw: the stored bytes
 * are the tensor bytes written, IN_BYTES). */
static const char *make_digested(char *path, size_t cap) {
    char in[700];
    make_input(in, sizeof in);
    tmp(path, cap, "digested.zt");
    tbx_file *f = NULL;
    tbx_error e;
    if (tbx_open_path(&f, in, NULL, &e) != TBX_OK) abort();
    tbx_convert_options o;
    tbx_convert_options_init(&o);
    o.write.format = TBX_FORMAT_ZTENSOR;
    o.write.flags = TBX_WRITE_OVERWRITE;
    o.write.digest = "crc32c";
    if (tbx_convert(f, path, &o, &e) != TBX_OK) {
        fprintf(stderr, "%s\n", e.message);
        abort();
    }
    tbx_close(f);
    return path;
}

static tbx_status validate_with(const char *path, calls *c, uint64_t *np) {
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.progress = on_progress;
    o.progress_ud = c;
    return tbx_validate_path(path, &o, NULL, NULL, np);
}

TBX_TEST(progress_validate) {
    char zt[700], st[700];
    make_digested(zt, sizeof zt);
    calls c;
    memset(&c, 0, sizeof c);
    uint64_t np = 99;
    CHECK_OK(validate_with(zt, &c, &np));
    CHECK_EQ(np, 0);
    CHECK(c.n >= 3); /* the start, then each of the two components */
    CHECK_EQ(c.bad_order, 0);
    CHECK_EQ(c.total_changed, 0);
    CHECK_EQ(c.first_total, IN_BYTES);
    CHECK_EQ(c.last_done, IN_BYTES);
    /* nothing to pass over: one call, 0 of 0 */
    make_input(st, sizeof st);
    memset(&c, 0, sizeof c);
    CHECK_OK(validate_with(st, &c, &np));
    CHECK_EQ(c.n, 1);
    CHECK_EQ(c.last_done, 0);
    CHECK_EQ(c.last_total, 0);
    unlink(zt);
}

TBX_TEST(progress_validate_cancel) {
    char zt[700];
    make_digested(zt, sizeof zt);
    for (int at = 1; at <= 2; at++) {
        calls c;
        memset(&c, 0, sizeof c);
        c.cancel_at = at;
        uint64_t np = 0;
        CHECK_EQ(validate_with(zt, &c, &np), TBX_E_CANCELLED);
        CHECK_EQ(np, 1);
        CHECK_EQ(c.n, at); /* no call after the one that cancelled */
    }
    unlink(zt);
}

TBX_TEST_MAIN()
