/*
 * fuzz_detect.c - libFuzzer target: the input is any file; the format is detected.
 *
 * Exercises tbx_detect_format and every driver's probe + open (GGUF, OINF, MCF, zTensor, EMBD,
 * embd-legacy, safetensors; the corpus holds files of each):
 *   1. tbx_open_memory with format detection and default error handling: an open file has the
 *      format tbx_detect_format named;
 *   2. tbx_open_callback over the same bytes (the windowed, pread-like read path), which must
 *      agree with (1) on the outcome and on the counts of what it found;
 *   3. tbx_open_memory with an on_problem callback (recoverable problems reported, opening goes
 *      on) and digest verification;
 *   4. the validation pass of `tbx validate` (fz_validate), format detected: a file it accepts
 *      must have opened in (1).
 * Each handle that opens is walked through the whole read API (fuzz_walk.h) and, for MCF and
 * EMBD, through the driver's own accessors (tensorbox/mcf.h, tensorbox/embd.h).
 */
#include "fuzz_walk.h"
#define TBX_EXPERIMENTAL 1
#include "tensorbox/embd.h"
#include "tensorbox/mcf.h"

#include <stddef.h>
#include <stdint.h>

typedef struct fz_buf {
    const uint8_t *data;
    size_t size;
} fz_buf;

static tbx_status fz_read_at(void *ud, uint64_t offset, void *buf, size_t len) {
    const fz_buf *b = (const fz_buf *)ud;
    FZ_CHECK(offset <= b->size && len <= b->size - offset, "read_at stays inside the file");
    memcpy(buf, b->data + offset, len);
    return TBX_OK;
}

static void fz_on_problem(void *ud, const tbx_error *problem) {
    uint64_t *count = (uint64_t *)ud;
    (*count)++;
    FZ_CHECK(problem != NULL, "problem");
    FZ_CHECK(problem->code != TBX_OK, "a problem has a non-OK code");
    FZ_CHECK(memchr(problem->message, 0, sizeof problem->message) != NULL, "problem message");
    FZ_CHECK(memchr(problem->field, 0, sizeof problem->field) != NULL, "problem field");
}

/* The accessors only MCF and EMBD handles have; on any other handle they must refuse. */
static void fz_extras(tbx_file *f, size_t size) {
    tbx_format fmt = tbx_file_format(f);
    uint64_t n = tbx_mcf_section_count(f);
    FZ_CHECK((fmt == TBX_FORMAT_MCF) == (n > 0), "only an MCF handle has an MCF directory");
    for (uint64_t i = 0; i < n && i < FZ_MAX_TENSORS; i++) {
        tbx_mcf_section e;
        FZ_CHECK(tbx_mcf_section_get(f, i, &e) == TBX_OK, "MCF directory entry in range");
        FZ_CHECK(e.offset <= size && e.size <= size - e.offset, "MCF sections inside the file");
        FZ_CHECK(e.name != NULL, "every MCF entry has a name");
    }
    tbx_mcf_section e;
    FZ_CHECK(tbx_mcf_section_get(f, n, &e) != TBX_OK, "MCF directory entry out of range");
    uint64_t nv = tbx_embd_vocab_count(f);
    if (fmt != TBX_FORMAT_EMBD && fmt != TBX_FORMAT_EMBD_LEGACY)
        FZ_CHECK(nv == 0, "only an EMBD handle has a vocabulary");
    for (uint64_t i = 0; i < nv && i < FZ_MAX_TENSORS; i++) {
        const char *p = NULL;
        size_t len = 0;
        FZ_CHECK(tbx_embd_token(f, i, &p, &len) == TBX_OK, "EMBD token in range");
        FZ_CHECK(len <= size, "an EMBD token fits in the file");
        if (len) fz_touch(p, len);
    }
    FZ_CHECK(tbx_embd_token(f, nv, NULL, NULL) != TBX_OK, "EMBD token out of range");
    tbx_embd_header h = TBX_EMBD_HEADER_INIT;
    tbx_status st = tbx_embd_header_get(f, &h);
    FZ_CHECK((st == TBX_OK) == (fmt == TBX_FORMAT_EMBD), "only an EMBD handle has its header");
    if (st == TBX_OK) FZ_CHECK(h.total_file_size == size, "total_file_size is the file size");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input(size);
    tbx_format detected = tbx_detect_format(data, size < 64 ? size : 64, size);
    FZ_CHECK(tbx_format_name(detected) != NULL, "detected format has a name");

    tbx_limits lim;
    fz_limits(&lim);
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    opt.struct_size = sizeof opt;
    opt.format = TBX_FORMAT_UNKNOWN;
    opt.limits = &lim;

    /* 1. memory */
    tbx_file *f = NULL;
    tbx_error err;
    fz_err_reset(&err);
    tbx_status st = tbx_open_memory(&f, data, size, &opt, &err);
    fz_check_status(st, &err, "open memory");
    const tbx_status strict = st;
    uint64_t nmeta = 0, ntensors = 0, nsections = 0;
    if (st == TBX_OK) {
        FZ_CHECK(f != NULL, "handle");
        FZ_CHECK(tbx_file_format(f) != TBX_FORMAT_UNKNOWN, "an open file has a format");
        FZ_CHECK(tbx_file_format(f) == detected, "the file opens as the format detected");
        nmeta = tbx_meta_count(f);
        ntensors = tbx_tensor_count(f);
        nsections = tbx_section_count(f);
        fz_walk(f, data, size);
        fz_extras(f, size);
        tbx_close(f);
    } else {
        FZ_CHECK(f == NULL, "no handle after a failed open");
    }

    /* 2. callback: same bytes, same outcome */
    fz_buf b = {data, size};
    tbx_file *g = NULL;
    tbx_error err2;
    fz_err_reset(&err2);
    tbx_status st2 = tbx_open_callback(&g, fz_read_at, &b, size, &opt, &err2);
    fz_check_status(st2, &err2, "open callback");
    FZ_CHECK(st2 == st, "memory and callback opens agree");
    if (st2 == TBX_OK) {
        FZ_CHECK(tbx_meta_count(g) == nmeta, "same metadata count");
        FZ_CHECK(tbx_tensor_count(g) == ntensors, "same tensor count");
        FZ_CHECK(tbx_section_count(g) == nsections, "same section count");
        fz_walk(g, NULL, 0);
        fz_extras(g, size);
        tbx_close(g);
    } else {
        FZ_CHECK(g == NULL, "no handle after a failed open");
    }

    /* 3. memory, problems reported and skipped, digests verified */
    uint64_t nproblems = 0;
    opt.on_problem = fz_on_problem;
    opt.problem_ud = &nproblems;
    opt.flags = TBX_OPEN_VERIFY_DIGESTS;
    tbx_file *h = NULL;
    fz_err_reset(&err);
    st = tbx_open_memory(&h, data, size, &opt, &err);
    fz_check_status(st, &err, "open memory with on_problem");
    if (st == TBX_OK) {
        fz_walk(h, data, size);
        tbx_close(h);
    }

    /* 4. the validation pass */
    fz_heap heap = {0, 0};
    if (fz_validate(data, size, TBX_FORMAT_UNKNOWN, &heap) == TBX_OK)
        FZ_CHECK(strict == TBX_OK, "a file the validation accepts opens");
    return 0;
}
