/*
 * alloc.c - the allocator indirection every handle allocates through.
 *
 * A tbx_alloc always holds three usable functions: the caller's allocator or the malloc-backed
 * default. Sizes are passed back to `free`/`realloc` exactly as they were asked for; a request
 * for zero bytes is served as one byte (so the result is never NULL on success) and recorded as
 * one byte on the way back, so a size-tracking allocator sees matching sizes. All size products
 * are checked.
 */
#define _GNU_SOURCE
#include "core.h"

#include <stdint.h>
#include <stdlib.h>

static void *default_alloc(void *ud, size_t size) {
    (void)ud;
    return malloc(size);
}

static void *default_realloc(void *ud, void *ptr, size_t old_size, size_t new_size) {
    (void)ud;
    (void)old_size;
    return realloc(ptr, new_size);
}

static void default_free(void *ud, void *ptr, size_t size) {
    (void)ud;
    (void)size;
    free(ptr);
}

const tbx_allocator tbx_default_allocator = {default_alloc, default_realloc, default_free, NULL};

/* The allocator to use: a NULL or zeroed tbx_alloc means the default one. */
static const tbx_allocator *pick(const tbx_alloc *al) {
    if (!al || !al->a.alloc || !al->a.realloc || !al->a.free) return &tbx_default_allocator;
    return &al->a;
}

/* Zero-byte requests are served (and given back) as one byte. */
static size_t real_size(size_t n) { return n ? n : 1; }

void tbx_alloc_init(tbx_alloc *al, const tbx_allocator *user) {
    if (!al) return;
    /* An allocator with a missing member cannot be used safely; callers reject it with
     * TBX_E_INVALID_ARG before getting here, and the fallback keeps this function total. */
    if (user && user->alloc && user->realloc && user->free)
        al->a = *user;
    else
        al->a = tbx_default_allocator;
}

void *tbx_malloc(const tbx_alloc *al, size_t n) {
    const tbx_allocator *a = pick(al);
    return a->alloc(a->ud, real_size(n));
}

void *tbx_calloc(const tbx_alloc *al, size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) return NULL;
    void *p = tbx_malloc(al, total);
    if (p) memset(p, 0, real_size(total));
    return p;
}

void *tbx_realloc(const tbx_alloc *al, void *p, size_t old_n, size_t new_n) {
    if (!p) return tbx_malloc(al, new_n);
    const tbx_allocator *a = pick(al);
    return a->realloc(a->ud, p, real_size(old_n), real_size(new_n));
}

void tbx_free(const tbx_alloc *al, void *p, size_t n) {
    if (!p) return;
    const tbx_allocator *a = pick(al);
    a->free(a->ud, p, real_size(n));
}

char *tbx_memdup0(const tbx_alloc *al, const void *p, size_t n) {
    if (n == SIZE_MAX) return NULL;
    char *d = (char *)tbx_malloc(al, n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

bool tbx_grow(const tbx_alloc *al, void **items, size_t *cap, size_t need, size_t elem) {
    if (!items || !cap) return false;
    if (need <= *cap) return true;
    if (elem == 0) return false;

    size_t newcap = *cap ? *cap : 8;
    while (newcap < need) {
        if (newcap > SIZE_MAX / 2) {
            newcap = need;
            break;
        }
        newcap *= 2;
    }
    size_t bytes;
    if (__builtin_mul_overflow(newcap, elem, &bytes)) {
        /* Doubling overflowed the byte count: try the exact request. */
        newcap = need;
        if (__builtin_mul_overflow(newcap, elem, &bytes)) return false;
    }
    void *p;
    if (*items)
        p = tbx_realloc(al, *items, *cap * elem, bytes);
    else
        p = tbx_malloc(al, bytes);
    if (!p) return false;
    *items = p;
    *cap = newcap;
    return true;
}

void tbx_membuf_put(tbx_membuf *b, const void *p, size_t n) {
    if (b->oom || n == 0) return;
    if (!tbx_grow(b->al, (void **)&b->p, &b->cap, b->n + n, 1)) { b->oom = true; return; }
    if (p) memcpy(b->p + b->n, p, n);
    else memset(b->p + b->n, 0, n);
    b->n += n;
}
