/*
 * fuzz_npy.c - libFuzzer target: the input is a NumPy .npy file or an .npz archive (a zip of
 * .npy members, stored or deflated, read through libzip).
 *
 * Each input is opened with tbx_open_memory as "npy" and as "npz" (the format forced, so every
 * input reaches the .npy header parser and libzip's archive reader whatever its first bytes),
 * with small limits and an allocator that checks the size handed back to free()/realloc() and
 * that nothing is left allocated after tbx_close(): strict (the first problem fails the open;
 * the members' CRC-32s verified: TBX_OPEN_VERIFY_DIGESTS) and tolerant (a problem callback). An
 * open handle is walked through every read-only accessor (fuzz_walk.h: whole, range, f32 and
 * batch reads, which reach the byte swapping, the Fortran-order transposition and the deflate
 * cursors). Then the validation pass runs on the input; a file it accepts must open strictly.
 * libzip's own allocations do not go through the tbx allocator (docs/formats/npy.md).
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_npy; every build also makes
 * build/fuzz/replay_npy. Seeds: fuzz/corpus/npy (fuzz/make_npy_seeds.py).
 */
#include "fuzz_walk.h"

#include <stddef.h>
#include <stdint.h>

/* The rows' format values (tensorbox.h names neither): found by name, as any caller finds them. */
#define FMT_NPY tbx_format_from_name("npy")
#define FMT_NPZ tbx_format_from_name("npz")

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input(size);
    fz_open_both_and_validate(data, size, FMT_NPY, TBX_OPEN_VERIFY_DIGESTS, 0xEu, NULL);
    fz_open_both_and_validate(data, size, FMT_NPZ, TBX_OPEN_VERIFY_DIGESTS, 1u, NULL);
    return 0;
}
