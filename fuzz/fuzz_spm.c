/*
 * fuzz_spm.c - libFuzzer target: the input is a SentencePiece tokenizer.model.
 *
 * Parses the bytes with tbx_spm_parse (the bounded protobuf reader behind Hugging Face -> GGUF
 * for Llama-2-style tokenizers, src/formats/gguf_hf_spm.c) with a piece limit, checks what a
 * successful parse promises (every piece inside the input, a known type, a finite score, at
 * least one piece) and frees it. Seeds: fuzz/make_spm_seeds.py.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_spm; every build also makes
 * build/fuzz/replay_spm, which replays files and directories (see replay_main.c).
 */
#include "spm.h"
#include "fuzz_heap.h" /* FZ_CHECK */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A broken promise aborts, so libFuzzer and the replay report it as a crash. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    tbx_spm_vocab v = {0};
    tbx_error err;
    tbx_status st = tbx_spm_parse(data, size, &al, 1u << 16, &v, &err);
    if (st == TBX_OK) {
        FZ_CHECK(v.n >= 1 && v.n <= (1u << 16), "a parsed model has 1..max_pieces pieces");
        for (size_t i = 0; i < v.n; i++) {
            const tbx_spm_piece *p = &v.pieces[i];
            FZ_CHECK((const uint8_t *)p->text >= data &&
                         (const uint8_t *)p->text + p->len <= data + size,
                     "a piece's text lies inside the input");
            FZ_CHECK(p->type >= TBX_SPM_NORMAL && p->type <= TBX_SPM_BYTE, "a known type");
            FZ_CHECK(isfinite(p->score), "a finite score");
        }
    } else {
        FZ_CHECK(err.code == st && err.message[0] != 0, "a failure is described");
    }
    tbx_spm_free(&v, &al);
    return 0;
}
