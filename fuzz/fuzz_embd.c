/*
 * fuzz_embd.c - libFuzzer target: the input is an EMBD .weights file, of the specification's
 * layout or of cpp_embedder's legacy one.
 *
 * Each input is opened with tbx_open_memory as "embd" and as "embd-legacy" (the format forced,
 * so every input reaches both parsers whatever its first bytes), with small limits and an
 * allocator that checks the size handed back to free()/realloc() and that nothing is left
 * allocated after tbx_close(): strict (the first problem fails the open; checksums verified:
 * TBX_OPEN_VERIFY_DIGESTS) and tolerant (a problem callback, as tbx_validate uses). An open
 * handle is walked through every read-only accessor (fuzz_walk.h) and the EMBD ones of
 * tensorbox/embd.h, whose promises are checked: tokens in range, special ids below the token
 * count, the header fields consistent with the file. Then the validation pass runs on the
 * input; a file it accepts must open strictly.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_embd; every build also makes
 * build/fuzz/replay_embd. Seeds: fuzz/corpus/embd (fuzz/make_embd_seeds.py).
 */
#include "fuzz_walk.h"

#define TBX_EXPERIMENTAL
#include "tensorbox/embd.h"

#include <stddef.h>
#include <stdint.h>

static void fz_embd(tbx_file *f, size_t size) {
    uint64_t n = tbx_embd_vocab_count(f);
    for (uint64_t i = 0; i < n && i < FZ_MAX_TENSORS; i++) {
        const char *p = NULL;
        size_t len = 0;
        FZ_CHECK(tbx_embd_token(f, i, &p, &len) == TBX_OK, "token in range");
        FZ_CHECK(len <= size, "a token fits in the file");
        if (len) fz_touch(p, len);
    }
    FZ_CHECK(tbx_embd_token(f, n, NULL, NULL) != TBX_OK, "token out of range");
    tbx_embd_special sp = TBX_EMBD_SPECIAL_INIT;
    tbx_status st = tbx_embd_special_get(f, &sp);
    FZ_CHECK(st == TBX_OK || st == TBX_E_NOT_FOUND, "special ids lookup");
    if (st == TBX_OK)
        FZ_CHECK(sp.pad_id < n && sp.unk_id < n && sp.cls_id < n && sp.sep_id < n && sp.mask_id < n,
                 "special ids are token ids");
    tbx_embd_header h = TBX_EMBD_HEADER_INIT;
    st = tbx_embd_header_get(f, &h);
    if (tbx_file_format(f) == TBX_FORMAT_EMBD) {
        FZ_CHECK(st == TBX_OK, "an EMBD handle has a header");
        FZ_CHECK(h.total_file_size == size, "total_file_size is the file size");
        FZ_CHECK((uint64_t)h.tensor_data_offset + h.tensor_data_size + 16 == size,
                 "the footer follows the tensor data");
        FZ_CHECK(h.version_major == 1, "major version 1");
    } else {
        FZ_CHECK(st == TBX_E_INVALID_ARG, "legacy files have no EMBD header");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input(size);
    fz_open_both_and_validate(data, size, TBX_FORMAT_EMBD, TBX_OPEN_VERIFY_DIGESTS, 1u << 1,
                              fz_embd);
    fz_open_both_and_validate(data, size, TBX_FORMAT_EMBD_LEGACY, TBX_OPEN_VERIFY_DIGESTS,
                              1u << 1, fz_embd);
    return 0;
}
