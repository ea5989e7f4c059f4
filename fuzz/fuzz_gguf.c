/*
 * fuzz_gguf.c - libFuzzer target: the input is a GGUF file.
 *
 * The bytes are opened twice with tbx_open_memory, the format forced to GGUF (every input
 * reaches the parser whatever its first bytes) and small limits, through an allocator that
 * checks every size handed back and that nothing stays allocated after tbx_close():
 *   1. strict: the first problem fails the open; a handle that opens is walked through the whole
 *      read API (fuzz_walk.h: every metadata getter, tbx_value_at on every array, every tensor's
 *      info, components and bytes, bounded reads and f32 decoding) and linted (tbx_gguf_lint);
 *   2. lenient: recoverable problems go to a callback and opening continues; the handle must
 *      then be just as walkable, and a strict success must stay a lenient success with the same
 *      counts;
 *   3. the validation pass (fz_validate: what `tbx validate` runs): a file it accepts must have
 *      opened strictly.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_gguf; every build also makes
 * build/fuzz/replay_gguf, which replays files and directories (fuzz/corpus/gguf is the seed
 * corpus, written by fuzz/make_gguf_seeds.py).
 */
#include "fuzz_walk.h"
#define TBX_EXPERIMENTAL 1
#include "tensorbox/gguf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct gz_problems {
    uint64_t n;
} gz_problems;

/* A reported problem must describe itself like any error. */
static void gz_on_problem(void *ud, const tbx_error *e) {
    gz_problems *p = (gz_problems *)ud;
    p->n++;
    FZ_CHECK(e->code != TBX_OK, "a problem has a non-OK code");
    FZ_CHECK(memchr(e->message, 0, sizeof e->message) != NULL, "problem message terminated");
    FZ_CHECK(e->message[0] != '\0', "a problem has a message");
}

static void gz_lint(tbx_file *f) {
    gz_problems lp = {0};
    tbx_status st = tbx_gguf_lint(f, gz_on_problem, &lp);
    FZ_CHECK(st != TBX_E_INVALID_ARG, "lint accepts a GGUF handle");
    FZ_CHECK((st == TBX_OK) == (lp.n == 0), "lint returns OK exactly when it reports nothing");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input(size);
    fz_heap heap = {0, 0};

    /* 1. strict */
    tbx_status st, st2;
    tbx_file *f = fz_open_forced(data, size, TBX_FORMAT_GGUF, 0, &heap, NULL, NULL, &st);
    uint64_t strict_meta = 0, strict_tensors = 0;
    if (f) {
        uint32_t v = tbx_file_version(f);
        FZ_CHECK(v >= 1 && v <= 3, "GGUF version 1..3");
        strict_meta = tbx_meta_count(f);
        strict_tensors = tbx_tensor_count(f);
        fz_walk(f, data, size);
        gz_lint(f);
        tbx_close(f);
        FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0, "tbx_close frees everything");
    }

    /* 2. lenient: recoverable problems reported, opening goes on */
    gz_problems pr = {0};
    f = fz_open_forced(data, size, TBX_FORMAT_GGUF, 0, &heap, gz_on_problem, &pr, &st2);
    if (st == TBX_OK) {
        FZ_CHECK(st2 == TBX_OK, "a strict success is a lenient success");
        FZ_CHECK(pr.n == 0, "a strict success reports no problem");
    }
    if (f) {
        if (st == TBX_OK) {
            FZ_CHECK(tbx_meta_count(f) == strict_meta, "same metadata either way");
            FZ_CHECK(tbx_tensor_count(f) == strict_tensors, "same tensors either way");
        }
        fz_walk(f, data, size);
        gz_lint(f);
        tbx_close(f);
    }
    FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0, "everything freed");

    /* 3. the validation pass */
    if (fz_validate(data, size, TBX_FORMAT_GGUF, &heap) == TBX_OK)
        FZ_CHECK(st == TBX_OK, "a file the validation accepts opens strictly");
    return 0;
}
