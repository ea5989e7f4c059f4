/*
 * fuzz_safetensors.c - libFuzzer target: the input is a safetensors file.
 *
 * Opens the bytes with tbx_open_memory, the format forced to safetensors (so every input reaches
 * the parser, whatever its first bytes), small limits, and an allocator that checks the size
 * handed back to free()/realloc() and that nothing is left allocated after tbx_close(). Then
 * walks everything the handle offers (fuzz_walk.h) and closes.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_safetensors; every build also makes
 * build/fuzz/replay_safetensors, which replays files and directories (see replay_main.c).
 */
#include "fuzz_walk.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_heap heap = {0, 0};
    tbx_allocator alloc = fz_allocator(&heap);
    tbx_limits lim;
    fz_limits(&lim);

    tbx_open_options opt;
    tbx_open_options_init(&opt);
    opt.struct_size = sizeof opt;
    opt.format = TBX_FORMAT_SAFETENSORS;
    opt.limits = &lim;
    opt.allocator = &alloc;

    tbx_file *f = NULL;
    tbx_error err;
    fz_err_reset(&err);
    tbx_status st = tbx_open_memory(&f, data, size, &opt, &err);
    fz_check_status(st, &err, "open safetensors");
    if (st != TBX_OK) {
        FZ_CHECK(f == NULL, "no handle after a failed open");
        FZ_CHECK(heap.live_blocks == 0, "a failed open frees everything it allocated");
        return 0;
    }
    FZ_CHECK(f != NULL, "handle after a successful open");
    FZ_CHECK(tbx_file_format(f) == TBX_FORMAT_SAFETENSORS, "forced format");

    fz_walk(f, data, size);
    tbx_close(f);
    FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0,
             "tbx_close frees everything the handle allocated");
    return 0;
}
