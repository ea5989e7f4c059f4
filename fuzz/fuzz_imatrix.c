/*
 * fuzz_imatrix.c - libFuzzer target: the input is a legacy .dat importance matrix (llama-imatrix
 * --output-format dat).
 *
 * Reads the bytes with tbx_imatrix_read_dat (src/models/imatrix.c) through a memory source and
 * an allocator that checks each free's size and refuses any block past a budget of 64 KiB plus
 * 8 times the input's size (the reader checks every declared length against the bytes left
 * before allocating, so a hostile count can never ask for more). Checks what a successful read
 * promises: at least one entry, names sorted and unique, every vector of at least one finite
 * value, at most one dataset; and that a failure is described and leaves nothing allocated.
 * Seeds: fuzz/make_imatrix_seeds.py.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_imatrix; every build also makes
 * build/fuzz/replay_imatrix, which replays fuzz/corpus/imatrix/ (see replay_main.c).
 */
#include "imatrix.h"
#include "fuzz_heap.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_heap heap = {0, (size_t)64 << 10};
    heap.budget += 8 * size;
    tbx_allocator fa = {fz_alloc, fz_realloc, fz_dealloc, &heap};
    tbx_alloc al;
    tbx_alloc_init(&al, &fa);
    tbx_limits lim;
    tbx_limits_default(&lim);
    tbx_source src;
    tbx_source_open_memory(&src, data, size);
    tbx_imatrix m;
    tbx_error err;
    tbx_status st = tbx_imatrix_read_dat(&src, &al, &lim, &m, &err);
    if (st == TBX_OK) {
        FZ_CHECK(m.n >= 1, "at least one entry");
        FZ_CHECK(m.ndatasets <= 1, "at most one dataset");
        for (size_t i = 0; i < m.n; i++) {
            const tbx_imatrix_entry *e = &m.e[i];
            FZ_CHECK(e->n >= 1 && e->name[e->name_len] == 0, "a vector and a terminated name");
            FZ_CHECK(memchr(e->name, 0, e->name_len) == NULL, "no NUL inside a name");
            if (i) {
                const tbx_imatrix_entry *p = &m.e[i - 1];
                const size_t k = p->name_len < e->name_len ? p->name_len : e->name_len;
                const int c = memcmp(p->name, e->name, k);
                FZ_CHECK(c < 0 || (c == 0 && p->name_len < e->name_len), "sorted, unique names");
            }
            FZ_CHECK(tbx_imatrix_find(&m, e->name, e->name_len) == e, "found by its name");
            for (uint64_t j = 0; j < e->n; j++) FZ_CHECK(isfinite(e->v[j]), "finite values");
        }
        tbx_imatrix_free(&m);
    } else {
        FZ_CHECK(err.code == st && err.message[0] != 0, "a failure is described");
        FZ_CHECK(m.n == 0 && m.e == NULL, "a failure leaves an empty matrix");
    }
    FZ_CHECK(heap.live == 0, "nothing left allocated");
    return 0;
}
