/*
 * fuzz_heap.h - what the small fuzz targets share: FZ_CHECK (an invariant that aborts with its
 * file, line and meaning, so libFuzzer keeps the input) and a checking allocator for
 * tbx_alloc_init: every block carries its size in a 16-byte header, a free or resize with
 * another size aborts, and an allocation past `budget` bytes live aborts before it is made (the
 * memory a reader may take is bounded by what the input justifies; budget SIZE_MAX: no bound).
 * `live` counts the bytes allocated and not freed: 0 at the end, or something leaked.
 */
#ifndef TBX_FUZZ_HEAP_H
#define TBX_FUZZ_HEAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FZ_CHECK
#define FZ_CHECK(cond, what)                                                                    \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "%s:%d: %s (%s)\n", __FILE__, __LINE__, what, #cond);              \
            abort();                                                                            \
        }                                                                                       \
    } while (0)
#endif

typedef struct fz_heap { size_t live, budget; } fz_heap;
#define FZ_HDR 16

static inline void *fz_alloc(void *ud, size_t n) {
    fz_heap *h = ud;
    FZ_CHECK(n <= h->budget - h->live, "an allocation within the budget (checked before it)");
    unsigned char *p = malloc(n + FZ_HDR);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    h->live += n;
    return p + FZ_HDR;
}

static inline void fz_dealloc(void *ud, void *ptr, size_t n) {
    if (!ptr) return;
    size_t had;
    memcpy(&had, (unsigned char *)ptr - FZ_HDR, sizeof had);
    FZ_CHECK(had == n, "a block is freed with the size it was allocated with");
    ((fz_heap *)ud)->live -= n;
    free((unsigned char *)ptr - FZ_HDR);
}

static inline void *fz_realloc(void *ud, void *ptr, size_t old_n, size_t n) {
    if (!ptr) return fz_alloc(ud, n);
    fz_heap *h = ud;
    size_t had;
    memcpy(&had, (unsigned char *)ptr - FZ_HDR, sizeof had);
    FZ_CHECK(had == old_n, "a block is resized from the size it was allocated with");
    FZ_CHECK(n <= old_n || n - old_n <= h->budget - h->live, "a growth within the budget");
    unsigned char *p = realloc((unsigned char *)ptr - FZ_HDR, n + FZ_HDR);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    h->live = h->live - old_n + n;
    return p + FZ_HDR;
}

#endif
