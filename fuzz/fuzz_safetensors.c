/*
 * fuzz_safetensors.c - libFuzzer target: the input is a safetensors file.
 *
 * Opens the bytes with tbx_open_memory, the format forced to safetensors (so every input reaches
 * the parser, whatever its first bytes), small limits, and an allocator that checks the size
 * handed back to free()/realloc() and that nothing is left allocated after tbx_close(). Then
 * walks everything the handle offers (fuzz_walk.h) and closes. Finally runs the validation pass
 * on the input (fz_validate): a file it accepts must have opened.
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
    fz_input(size);
    fz_heap heap = {0, 0};
    tbx_status st;
    tbx_file *f = fz_open_forced(data, size, TBX_FORMAT_SAFETENSORS, 0, &heap, NULL, NULL, &st);
    if (f) {
        fz_walk(f, data, size);
        tbx_close(f);
        FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0,
                 "tbx_close frees everything the handle allocated");
    }
    if (fz_validate(data, size, TBX_FORMAT_SAFETENSORS, &heap) == TBX_OK)
        FZ_CHECK(st == TBX_OK, "a file the validation accepts opens");
    return 0;
}
