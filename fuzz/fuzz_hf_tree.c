/*
 * fuzz_hf_tree.c - libFuzzer target: the input is the Hugging Face Hub's tree listing of a
 * repository (api/models/ORG/REPO/tree/REV?recursive=true, a JSON array), as remote_prov.c
 * reads it for hf:// directories (tbx_hf_tree_parse, src/io/http_parse.c).
 *
 * The listing is read for the repository's root and for a subdirectory, through an allocator
 * that checks each free's size and keeps the library within 2 x the input + 1 MiB. Checks: a
 * refusal is described (field tree*, an offset inside the input) and leaves nothing
 * allocated; an accepted listing has at most the bound's entries, each a relative path of
 * plain names (tbx_provider_name_ok), sorted and unique; freeing it frees everything.
 * Seeds: fuzz/make_remote_seeds.py (the Hub's JSON shape: files, LFS files, directories).
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_hf_tree; every build also makes
 * build/fuzz/replay_hf_tree, which replays fuzz/corpus/hf_tree/ (see replay_main.c).
 */
#include "io.h"
#include "provider.h"
#include "fuzz_heap.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_MAX_ENTRIES 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const dirs[2] = {"", "sub/"};
    for (int d = 0; d < 2; d++) {
        fz_heap heap = {0, 2 * size + (1u << 20)};
        tbx_allocator ua = {fz_alloc, fz_realloc, fz_dealloc, &heap};
        tbx_alloc al;
        tbx_alloc_init(&al, &ua);
        tbx_hf_tree t;
        memset(&t, 0, sizeof t);
        tbx_error e;
        memset(&e, 0xA5, sizeof e);
        tbx_status st = tbx_hf_tree_parse(&al, (const char *)data, size, dirs[d], "the listing",
                                          FZ_MAX_ENTRIES, &t, &e);
        if (st != TBX_OK) {
            FZ_CHECK(e.code == st, "a refusal is described");
            FZ_CHECK(memchr(e.field, 0, sizeof e.field) && !strncmp(e.field, "tree", 4),
                     "the field is the tree's");
            FZ_CHECK(memchr(e.message, 0, sizeof e.message) != NULL, "a terminated message");
            FZ_CHECK(st == TBX_E_NOMEM || e.offset <= size, "an offset inside the listing");
        } else {
            FZ_CHECK(t.n <= FZ_MAX_ENTRIES, "at most the bound's entries");
            for (size_t i = 0; i < t.n; i++) {
                FZ_CHECK(tbx_provider_name_ok(t.e[i].name) == NULL, "a plain relative path");
                FZ_CHECK(t.e[i].at < size, "an entry inside the listing");
                if (i) FZ_CHECK(strcmp(t.e[i - 1].name, t.e[i].name) < 0, "sorted, unique");
            }
        }
        tbx_hf_tree_free(&al, &t);
        FZ_CHECK(heap.live == 0, "everything allocated is freed");
    }
    return 0;
}
