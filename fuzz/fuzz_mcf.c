/*
 * fuzz_mcf.c - libFuzzer target: the input is an MCF file.
 *
 * Each input is opened twice with tbx_open_memory, the format forced to MCF (so every input
 * reaches the parser whatever its first bytes), small limits and an allocator that checks the
 * size handed back to free()/realloc() and that nothing is left allocated after tbx_close():
 *   1. strict (no problem callback): the first problem fails the open;
 *   2. tolerant (a problem callback, as tbx_validate uses): recoverable problems are counted and
 *      the open goes on.
 * An open handle is walked through every read-only accessor (fuzz_walk.h: this decodes the
 * q/k/int tensors through the driver's read_f32) and the directory extras of tensorbox/mcf.h,
 * whose promises are checked: entries inside the file, 8-aligned, HF sections named by file
 * name. Then the validation pass runs (fz_validate); a file it accepts must open strictly.
 * A decode starting in the middle of a row is compared with the same values read from row 0.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_mcf; every build also makes
 * build/fuzz/replay_mcf. Seeds: fuzz/corpus/mcf (fuzz/make_mcf_seeds.py: small files of
 * mantle's corpus, tests/data/mcf).
 */
#include "fuzz_walk.h"
#define TBX_EXPERIMENTAL 1
#include "tensorbox/mcf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static void fz_mcf(tbx_file *f, size_t size) {
    uint64_t n = tbx_mcf_section_count(f);
    FZ_CHECK(n > 0, "an open MCF file has a directory");
    for (uint64_t i = 0; i < n; i++) {
        tbx_mcf_section e;
        FZ_CHECK(tbx_mcf_section_get(f, i, &e) == TBX_OK, "directory entry in range");
        FZ_CHECK(e.offset % 8 == 0 && e.offset >= 40, "sections 8-aligned after the header");
        FZ_CHECK(e.offset <= size && e.size <= size - e.offset, "sections inside the file");
        FZ_CHECK(e.name != NULL, "every entry has a name");
    }
    tbx_mcf_section e;
    FZ_CHECK(tbx_mcf_section_get(f, n, &e) != TBX_OK, "directory entry out of range");
    /* row-offset decoding: elements [k, k + m) equal the same elements of a decode from 0 */
    uint64_t nt = tbx_tensor_count(f);
    for (uint64_t i = 0; i < nt && i < 64; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (tbx_tensor_info_get(f, i, &ti) != TBX_OK || ti.nelems < 2 || ti.nelems > 2048) continue;
        if (ti.dtype < TBX_DT_MCF_INT8 || ti.dtype > TBX_DT_MCF_K2) continue;
        float a[2048], b[2048];
        tbx_error err;
        if (tbx_tensor_read_f32(f, i, 0, ti.nelems, a, &err) != TBX_OK) continue;
        uint64_t k = ti.nelems / 3 + 1, m = ti.nelems - k;
        FZ_CHECK(tbx_tensor_read_f32(f, i, k, m, b, &err) == TBX_OK, "a partial decode works");
        FZ_CHECK(memcmp(a + k, b, m * sizeof(float)) == 0, "partial decodes give the same bits");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input(size);
    fz_open_both_and_validate(data, size, TBX_FORMAT_MCF, 0, 1u << 1, fz_mcf);
    return 0;
}
