/*
 * fuzz_walk.h - shared by the fuzz targets (header-only, included once per target).
 *
 * fz_walk() drives an open tbx_file through every read-only accessor of the public API:
 * metadata (every value getter, recursively), tensors (info, components, lookups, size query
 * then read, ranged reads, zero-copy maps, bounded f32 decoding) and sections. Along the way it
 * checks the promises tensorbox.h makes and abort()s when one is broken, so that a broken
 * promise is reported by the fuzzer like a crash:
 *   - a failing call fills tbx_error with its code and NUL-terminated field/message;
 *   - names are NUL-terminated with the stated length, lookups find what the walk saw;
 *   - nelems is the product of the shape; stored ranges lie inside the file;
 *   - out-of-range indices are refused; a size query reports the size the read then accepts.
 * Every loop is bounded so that one input cannot run for long.
 *
 * fz_validate() runs the validation pass of tbx_validate_path (open with problems reported,
 * every encoded component decoded, every digest verified, the driver's deep checks) on the
 * input, so that the code only `tbx validate` reaches is fuzzed too.
 */
#ifndef TBX_FUZZ_WALK_H
#define TBX_FUZZ_WALK_H

#include "tensorbox.h"
#include "api.h" /* tbx_validate_memory_: the validation pass on an in-memory input */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_MAX_READ (8u << 20)  /* largest buffer a component/tensor/section is read into */
#define FZ_MAX_DECODE 4096u     /* elements decoded to f32 per tensor */
#define FZ_MAX_VALUES 65536u    /* metadata values visited per file */
#define FZ_MAX_TENSORS 4096u    /* tensors walked per file */
#define FZ_MAX_DEPTH 40         /* nesting followed in metadata values */

static void fz_fail(const char *file, int line, const char *cond, const char *what) {
    fprintf(stderr, "%s:%d: fuzz invariant broken: %s (%s)\n", file, line, cond, what);
    abort();
}
#define FZ_CHECK(cond, what) \
    do { if (!(cond)) fz_fail(__FILE__, __LINE__, #cond, what); } while (0)

/* Sink for touched bytes, so reads are not optimised away. */
static volatile uint8_t fz_sink;

static void fz_touch(const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) acc ^= b[i];
    fz_sink ^= acc;
}

static void fz_err_reset(tbx_error *err) {
    memset(err, 0xA5, sizeof *err);
}

/* A failed call must have described itself in *err. */
static void fz_check_status(tbx_status st, const tbx_error *err, const char *what) {
    FZ_CHECK(tbx_strerror(st) != NULL, what);
    FZ_CHECK(tbx_status_name(st) != NULL, what);
    if (st == TBX_OK || st == TBX_E_BUFFER_TOO_SMALL) return;
    FZ_CHECK(err->code == st, what);
    FZ_CHECK(memchr(err->field, 0, sizeof err->field) != NULL, what);
    FZ_CHECK(memchr(err->message, 0, sizeof err->message) != NULL, what);
}

typedef struct fz_ctx {
    tbx_file *f;
    const uint8_t *data; /* the input when the file was opened from memory, else NULL */
    size_t size;
    unsigned budget;     /* metadata values left to visit */
} fz_ctx;

static void fz_value(fz_ctx *cx, const tbx_value *v, int depth) {
    if (v == NULL || cx->budget == 0) return;
    cx->budget--;

    tbx_value_type t = tbx_value_type_of(v);
    FZ_CHECK(tbx_value_type_name(t) != NULL, "value type name");

    uint64_t u;
    int64_t i;
    double d;
    (void)tbx_value_get_u64(v, &u);
    (void)tbx_value_get_i64(v, &i);
    (void)tbx_value_get_f64(v, &d);

    size_t slen = 0;
    const char *s = tbx_value_get_str(v, &slen);
    if (t == TBX_V_STRING || t == TBX_V_BYTES) {
        FZ_CHECK(s != NULL, "string value has bytes");
        FZ_CHECK(s[slen] == '\0', "string value is followed by a NUL");
        FZ_CHECK(tbx_value_len(v) == slen, "string length");
        fz_touch(s, slen);
    }

    uint64_t n = tbx_value_len(v);
    if (t == TBX_V_NULL) FZ_CHECK(n == 0, "null has length 0");
    (void)tbx_value_elem_type(v);

    size_t nbytes = 0;
    const void *packed = tbx_value_data(v, &nbytes);
    if (packed != NULL) fz_touch(packed, nbytes);

    if (t == TBX_V_NDARRAY) {
        tbx_dtype dt;
        uint32_t ndim = 0;
        const uint64_t *shape = NULL;
        if (tbx_value_ndarray(v, &dt, &ndim, &shape) == TBX_OK) {
            FZ_CHECK(ndim == 0 || shape != NULL, "ndarray shape");
            if (ndim) fz_touch(shape, (size_t)ndim * sizeof *shape);
        }
    }

    if ((t == TBX_V_ARRAY || t == TBX_V_MAP) && depth < FZ_MAX_DEPTH) {
        for (uint64_t k = 0; k < n && cx->budget > 0; k++) {
            const tbx_value *child = tbx_value_at(v, k);
            FZ_CHECK(child != NULL, "element in range");
            if (t == TBX_V_MAP) {
                size_t klen = 0;
                const char *key = tbx_value_key_at(v, k, &klen);
                FZ_CHECK(key != NULL, "map key in range");
                fz_touch(key, klen);
            }
            fz_value(cx, child, depth + 1);
        }
        FZ_CHECK(tbx_value_at(v, n) == NULL, "element out of range");
        if (t == TBX_V_MAP) {
            size_t klen;
            FZ_CHECK(tbx_value_key_at(v, n, &klen) == NULL, "map key out of range");
        }
    }
}

static void fz_meta(fz_ctx *cx) {
    tbx_file *f = cx->f;
    uint64_t n = tbx_meta_count(f);
    for (uint64_t i = 0; i < n && cx->budget > 0; i++) {
        size_t klen = 0;
        const char *key = tbx_meta_key(f, i, &klen);
        const tbx_value *val = tbx_meta_value(f, i);
        FZ_CHECK(key != NULL, "meta key in range");
        FZ_CHECK(val != NULL, "meta value in range");
        fz_touch(key, klen);
        if (memchr(key, 0, klen) == NULL) {
            char *z = malloc(klen + 1);
            if (z) {
                memcpy(z, key, klen);
                z[klen] = '\0';
                FZ_CHECK(tbx_meta_find(f, z) == val, "meta_find finds the key it listed");
                free(z);
            }
        }
        fz_value(cx, val, 0);
    }
    size_t klen;
    FZ_CHECK(tbx_meta_key(f, n, &klen) == NULL, "meta key out of range");
    FZ_CHECK(tbx_meta_value(f, n) == NULL, "meta value out of range");
    FZ_CHECK(tbx_meta_find(f, "\x01no such key\x02") == NULL, "meta_find of an absent key");
}

/* Is [off, off+len) inside the file? */
static int fz_in_file(const fz_ctx *cx, uint64_t off, uint64_t len) {
    uint64_t size = tbx_file_size(cx->f);
    return off <= size && len <= size - off;
}

/* Size query, then a read into a buffer of exactly that size. `kind` 0: component (c),
 * 1: tensor, 2: section. Returns the buffer (caller frees) or NULL. */
static void *fz_read(fz_ctx *cx, int kind, uint64_t i, uint32_t c, size_t *len) {
    tbx_error err;
    size_t need = 0;
    tbx_status st;
    fz_err_reset(&err);
    if (kind == 0) st = tbx_component_read(cx->f, i, c, NULL, 0, &need, &err);
    else if (kind == 1) st = tbx_tensor_read(cx->f, i, NULL, 0, &need, &err);
    else st = tbx_section_read(cx->f, i, NULL, 0, &need, &err);
    fz_check_status(st, &err, "size query");
    if (st != TBX_OK && st != TBX_E_BUFFER_TOO_SMALL) return NULL;
    if (st == TBX_OK) FZ_CHECK(need == 0, "size query without a buffer succeeds only for 0 bytes");
    if (need > FZ_MAX_READ) return NULL;

    uint8_t *buf = malloc(need ? need : 1);
    if (!buf) return NULL;
    size_t need2 = 0;
    fz_err_reset(&err);
    if (kind == 0) st = tbx_component_read(cx->f, i, c, buf, need, &need2, &err);
    else if (kind == 1) st = tbx_tensor_read(cx->f, i, buf, need, &need2, &err);
    else st = tbx_section_read(cx->f, i, buf, need, &need2, &err);
    fz_check_status(st, &err, "read");
    FZ_CHECK(st != TBX_E_BUFFER_TOO_SMALL, "a buffer of the queried size is big enough");
    if (st != TBX_OK) {
        free(buf);
        return NULL;
    }
    fz_touch(buf, need);
    *len = need;
    return buf;
}

static void fz_decode(fz_ctx *cx, uint64_t i, const tbx_tensor_info *ti, const void *stored,
                      size_t stored_len) {
    const tbx_dtype_info *di = tbx_dtype_get(ti->dtype);
    if (di == NULL) return;
    uint64_t bs = di->block_size ? di->block_size : 1;
    uint64_t n = ti->nelems;
    if (n > FZ_MAX_DECODE) n = FZ_MAX_DECODE - FZ_MAX_DECODE % bs;
    if (n == 0) return;

    float *out = malloc((size_t)n * sizeof(float));
    if (!out) return;
    tbx_error err;
    fz_err_reset(&err);
    tbx_status st = tbx_tensor_read_f32(cx->f, i, 0, n, out, &err);
    fz_check_status(st, &err, "tensor_read_f32");
    if (st == TBX_OK) fz_touch(out, (size_t)n * sizeof(float));

    if (stored != NULL && ti->layout == TBX_LAYOUT_DENSE) {
        st = tbx_decode_f32(ti->dtype, stored, stored_len, n, out);
        (void)st;
    }
    free(out);
}

static void fz_tensor(fz_ctx *cx, uint64_t i) {
    tbx_file *f = cx->f;
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    tbx_status st = tbx_tensor_info_get(f, i, &ti);
    FZ_CHECK(st == TBX_OK, "tensor info in range");
    FZ_CHECK(ti.name != NULL && strlen(ti.name) == ti.name_len, "tensor name NUL-terminated");
    uint64_t idx = UINT64_MAX;
    FZ_CHECK(tbx_tensor_find(f, ti.name, &idx) == TBX_OK && idx == i, "tensor_find");
    FZ_CHECK(tbx_dtype_get(ti.dtype) != NULL, "tensor dtype valid");
    FZ_CHECK(tbx_layout_name(ti.layout) != NULL, "layout name");
    FZ_CHECK(ti.ndim == 0 || ti.shape != NULL, "shape present");
    uint64_t prod = 1;
    int overflow = 0;
    for (uint32_t k = 0; k < ti.ndim; k++) {
        if (ti.shape[k] != 0 && prod > UINT64_MAX / ti.shape[k]) overflow = 1;
        prod *= ti.shape[k];
    }
    FZ_CHECK(!overflow && prod == ti.nelems, "nelems is the product of the shape");

    for (uint32_t c = 0; c < ti.ncomponents; c++) {
        tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
        FZ_CHECK(tbx_component_info_get(f, i, c, &ci) == TBX_OK, "component in range");
        FZ_CHECK(ci.name != NULL, "component name");
        fz_touch(ci.name, strlen(ci.name));
        if (ci.digest) fz_touch(ci.digest, strlen(ci.digest));
        FZ_CHECK(fz_in_file(cx, ci.offset, ci.stored_bytes), "component stored inside the file");
        size_t len = 0;
        void *buf = fz_read(cx, 0, i, c, &len);
        if (buf) FZ_CHECK(len == ci.nbytes, "component read size is its decoded size");
        free(buf);
    }
    {
        tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
        FZ_CHECK(tbx_component_info_get(f, i, ti.ncomponents, &ci) != TBX_OK,
                 "component out of range");
    }

    size_t len = 0;
    void *stored = fz_read(cx, 1, i, 0, &len);

    tbx_error err;
    tbx_component_info c0 = TBX_COMPONENT_INFO_INIT; /* range reads address decoded bytes (compressed data too) */
    uint64_t dn = ti.ncomponents && tbx_component_info_get(f, i, 0, &c0) == TBX_OK ? c0.nbytes : 0;
    if (ti.layout == TBX_LAYOUT_DENSE && dn > 0) {
        uint8_t small[16];
        size_t n = dn < sizeof small ? (size_t)dn : sizeof small;
        fz_err_reset(&err);
        st = tbx_tensor_read_range(f, i, 0, small, n, &err);
        fz_check_status(st, &err, "read_range head");
        fz_err_reset(&err);
        st = tbx_tensor_read_range(f, i, dn - 1, small, 1, &err);
        fz_check_status(st, &err, "read_range tail");
        fz_err_reset(&err);
        st = tbx_tensor_read_range(f, i, dn, small, 1, &err);
        fz_check_status(st, &err, "read_range past the end");
        FZ_CHECK(st != TBX_OK, "read_range past the end fails");
        if (stored && len == dn) {
            fz_err_reset(&err);
            st = tbx_tensor_read_range(f, i, 0, small, n, &err);
            if (st == TBX_OK) FZ_CHECK(memcmp(small, stored, n) == 0, "read_range == read");
        }
    }

    const void *p = NULL;
    size_t plen = 0;
    fz_err_reset(&err);
    st = tbx_tensor_map(f, i, &p, &plen, &err);
    fz_check_status(st, &err, "tensor_map");
    if (st == TBX_OK) {
        FZ_CHECK(plen == 0 || p != NULL, "mapped pointer");
        if (cx->data && plen) {
            const uint8_t *b = (const uint8_t *)p;
            FZ_CHECK(b >= cx->data && plen <= cx->size && (size_t)(b - cx->data) <= cx->size - plen,
                     "mapped range inside the input");
        }
        if (plen) fz_touch(p, plen);
        if (stored && len == plen) FZ_CHECK(memcmp(p, stored, plen) == 0, "map == read");
    }

    fz_decode(cx, i, &ti, stored, len);
    free(stored);
}

static void fz_sections(fz_ctx *cx) {
    tbx_file *f = cx->f;
    uint64_t n = tbx_section_count(f);
    for (uint64_t i = 0; i < n && i < FZ_MAX_TENSORS; i++) {
        tbx_section_info si = TBX_SECTION_INFO_INIT;
        FZ_CHECK(tbx_section_info_get(f, i, &si) == TBX_OK, "section in range");
        FZ_CHECK(si.name != NULL, "section name");
        fz_touch(si.name, strlen(si.name));
        FZ_CHECK(fz_in_file(cx, si.offset, si.size), "section inside the file");
        size_t len = 0;
        void *buf = fz_read(cx, 2, i, 0, &len);
        if (buf) FZ_CHECK(len == si.size, "section read size");
        free(buf);
    }
    tbx_section_info si = TBX_SECTION_INFO_INIT;
    FZ_CHECK(tbx_section_info_get(f, n, &si) != TBX_OK, "section out of range");
}

/* One tbx_read_batch over every component that fits (plus one bad request): each request
 * gets its own status, the call returns the first failure. One thread: the fuzz allocator
 * counts without locks (the threaded paths run under TSan in tests/unit/test_batch.c). */
static void fz_batch(fz_ctx *cx) {
    tbx_file *f = cx->f;
    enum { MAXREQ = 64 };
    tbx_read_req req[MAXREQ + 1];
    size_t n = 0;
    uint64_t nt = tbx_tensor_count(f);
    for (uint64_t i = 0; i < nt && n < MAXREQ; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (tbx_tensor_info_get(f, i, &ti) != TBX_OK) continue;
        for (uint32_t c = 0; c < ti.ncomponents && n < MAXREQ; c++) {
            tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
            if (tbx_component_info_get(f, i, c, &ci) != TBX_OK || ci.nbytes > FZ_MAX_READ)
                continue;
            memset(&req[n], 0, sizeof req[n]);
            req[n].tensor = i;
            req[n].component = c;
            req[n].cap = (size_t)ci.nbytes;
            req[n].buf = malloc(req[n].cap ? req[n].cap : 1);
            if (!req[n].buf) break;
            n++;
        }
    }
    memset(&req[n], 0, sizeof req[n]);
    req[n].tensor = nt; /* out of range */
    tbx_error err;
    fz_err_reset(&err);
    tbx_status st = tbx_read_batch(f, req, n + 1, 1, &err);
    fz_check_status(st, &err, "read_batch");
    FZ_CHECK(st != TBX_OK, "a batch with a bad request fails");
    FZ_CHECK(req[n].status == TBX_E_INVALID_ARG, "the bad request fails alone");
    size_t first_bad = n;
    for (size_t k = 0; k < n; k++) {
        fz_check_status(req[k].status, &req[k].error, "read_batch request");
        if (req[k].status == TBX_OK) fz_touch(req[k].buf, req[k].cap);
        else if (first_bad == n) first_bad = k;
    }
    FZ_CHECK(st == req[first_bad].status, "the call returns the first failed request's status");
    for (size_t k = 0; k < n; k++) free(req[k].buf);
}

/* Walks an open file. `data`/`size`: the input when opened from memory (else NULL/0). */
static void fz_walk(tbx_file *f, const uint8_t *data, size_t size) {
    fz_ctx cx = {f, data, size, FZ_MAX_VALUES};
    FZ_CHECK(tbx_format_name(tbx_file_format(f)) != NULL, "format name");
    (void)tbx_file_version(f);
    if (data) FZ_CHECK(tbx_file_size(f) == size, "file size");

    fz_meta(&cx);

    uint64_t nt = tbx_tensor_count(f);
    for (uint64_t i = 0; i < nt && i < FZ_MAX_TENSORS; i++) fz_tensor(&cx, i);
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    FZ_CHECK(tbx_tensor_info_get(f, nt, &ti) != TBX_OK, "tensor out of range");
    uint64_t idx;
    FZ_CHECK(tbx_tensor_find(f, "\x01no such tensor\x02", &idx) == TBX_E_NOT_FOUND,
             "tensor_find of an absent name");
    fz_batch(&cx);

    fz_sections(&cx);
}

/* Limits small enough that no input makes the library allocate much. The amplification budget
 * keeps its defaults (1 x input + 32 MiB); zstd windows are held to 8 MiB so that the memory
 * bound below is about the metadata, names and tables an input makes the library hold. */
static void fz_limits(tbx_limits *lim) {
    tbx_limits_default(lim);
    lim->max_decode_window = 8u << 20;
    lim->max_header_bytes = 1u << 20;
    lim->max_tensors = 4096;
    lim->max_tensor_bytes = 64u << 20;
    lim->max_metadata_entries = 65536;
    lim->max_string_len = 1u << 20;
    lim->max_array_len = 1u << 20;
}

/* Checking allocator shared by the targets: a 16-byte header before each block records its
 * size, so a free()/realloc() given another size aborts; live_blocks/live_bytes let a target
 * check that tbx_close() (or a failed open) freed everything. */
typedef struct fz_heap {
    uint64_t live_blocks;
    uint64_t live_bytes;
} fz_heap;

#define FZ_HDR 16u

/* The memory bound of issue 19: whatever an input declares, what the library holds through the
 * checking allocator stays within 2 x the input's size + 64 MiB (an amplification the budget
 * misses aborts the run as a find). fz_input() sets the input's size for the current run. */
static uint64_t fz_input_bytes;
static inline void fz_input(size_t size) { fz_input_bytes = size; }
static inline void fz_check_bound(const fz_heap *h, size_t more) {
    uint64_t cap = 2 * fz_input_bytes + (64u << 20);
    FZ_CHECK(h->live_bytes + more <= cap,
             "the library's heap stays within 2 x input + 64 MiB (amplification budget)");
}

static inline void *fz_alloc(void *ud, size_t size) {
    fz_heap *h = (fz_heap *)ud;
    if (size > SIZE_MAX - FZ_HDR) return NULL;
    fz_check_bound(h, size);
    unsigned char *p = malloc(size + FZ_HDR);
    if (!p) return NULL;
    memcpy(p, &size, sizeof size);
    h->live_blocks++;
    h->live_bytes += size;
    return p + FZ_HDR;
}

static inline size_t fz_block_size(void *ptr) {
    size_t size;
    memcpy(&size, (unsigned char *)ptr - FZ_HDR, sizeof size);
    return size;
}

static inline void fz_dealloc(void *ud, void *ptr, size_t size) {
    fz_heap *h = (fz_heap *)ud;
    if (!ptr) return;
    FZ_CHECK(fz_block_size(ptr) == size, "free() gets the size that was allocated");
    h->live_blocks--;
    h->live_bytes -= size;
    free((unsigned char *)ptr - FZ_HDR);
}

static inline void *fz_realloc(void *ud, void *ptr, size_t old_size, size_t new_size) {
    fz_heap *h = (fz_heap *)ud;
    if (!ptr) {
        FZ_CHECK(old_size == 0, "realloc(NULL) has old size 0");
        return fz_alloc(ud, new_size);
    }
    FZ_CHECK(fz_block_size(ptr) == old_size, "realloc() gets the size that was allocated");
    if (new_size > SIZE_MAX - FZ_HDR) return NULL;
    if (new_size > old_size) fz_check_bound(h, new_size - old_size);
    unsigned char *p = realloc((unsigned char *)ptr - FZ_HDR, new_size + FZ_HDR);
    if (!p) return NULL;
    memcpy(p, &new_size, sizeof new_size);
    h->live_bytes = h->live_bytes - old_size + new_size;
    return p + FZ_HDR;
}

static inline tbx_allocator fz_allocator(fz_heap *h) {
    tbx_allocator a = {fz_alloc, fz_realloc, fz_dealloc, h};
    return a;
}

/* Opens the input from memory as `fmt` (TBX_OPEN_* flags), with the fuzz limits and the checking allocator
 * counting into *heap (on_problem may be NULL: strict), and checks the open's contract: the
 * error names its field, a failed open leaves no handle and frees everything, a successful one
 * has the forced format. Returns the handle, or NULL after a failed open. */
static inline tbx_file *fz_open_forced(const uint8_t *data, size_t size, tbx_format fmt,
                                       uint32_t flags, fz_heap *heap, tbx_problem_fn on_problem,
                                       void *ud, tbx_status *status) {
    tbx_allocator alloc = fz_allocator(heap); /* copied into the handle */
    tbx_limits lim;                           /* copied too */
    fz_limits(&lim);
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    opt.format = fmt;
    opt.flags = flags;
    opt.limits = &lim;
    opt.allocator = &alloc;
    opt.on_problem = on_problem;
    opt.problem_ud = ud;
    tbx_file *f = NULL;
    tbx_error err;
    fz_err_reset(&err);
    tbx_status st = tbx_open_memory(&f, data, size, &opt, &err);
    fz_check_status(st, &err, on_problem ? "open (lenient)" : "open");
    if (status) *status = st;
    if (st != TBX_OK) {
        FZ_CHECK(f == NULL, "no handle after a failed open");
        FZ_CHECK(heap->live_blocks == 0, "a failed open frees everything it allocated");
        return NULL;
    }
    FZ_CHECK(f != NULL, "handle after a successful open");
    FZ_CHECK(tbx_file_format(f) == fmt, "forced format");
    return f;
}

/* A problem reported by the validation pass must describe itself like any error. */
static void fz_validate_problem(void *ud, const tbx_error *e) {
    uint64_t *n = (uint64_t *)ud;
    (*n)++;
    FZ_CHECK(e != NULL && e->code != TBX_OK, "a validation problem has a non-OK code");
    FZ_CHECK(memchr(e->field, 0, sizeof e->field) != NULL, "problem field terminated");
    FZ_CHECK(memchr(e->message, 0, sizeof e->message) != NULL, "problem message terminated");
    FZ_CHECK(e->message[0] != '\0', "a validation problem has a message");
}

/* Runs the validation pass (tbx_validate_path's, on the input in memory) as `fmt` (UNKNOWN:
 * detect), with the fuzz limits, the checking allocator counting into *heap and one thread (the
 * allocator counts without locks), and checks its contract: the status is OK exactly when no
 * problem was reported, the count matches the callbacks, everything is freed. Returns the
 * status; a file the validation accepts must also open strictly (the callers check that). */
static inline tbx_status fz_validate(const uint8_t *data, size_t size, tbx_format fmt,
                                     fz_heap *heap) {
    tbx_allocator alloc = fz_allocator(heap);
    tbx_limits lim;
    fz_limits(&lim);
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    opt.format = fmt;
    opt.limits = &lim;
    opt.allocator = &alloc;
    opt.threads = 1;
    uint64_t seen = 0, counted = UINT64_MAX;
    tbx_status st = tbx_validate_memory_(data, size, &opt, fz_validate_problem, &seen, &counted);
    FZ_CHECK(tbx_status_name(st) != NULL, "validation status has a name");
    FZ_CHECK(counted == seen, "nproblems counts the problems reported");
    FZ_CHECK((st == TBX_OK) == (seen == 0), "validation is OK exactly when nothing is reported");
    FZ_CHECK(heap->live_blocks == 0 && heap->live_bytes == 0,
             "the validation pass frees everything it allocated");
    return st;
}

/* A problem reported while a file opens tolerantly: counted, and it must describe itself. */
static void fz_open_problem(void *ud, const tbx_error *e) {
    uint64_t *n = (uint64_t *)ud;
    FZ_CHECK(e && e->code != TBX_OK, "a problem has a code");
    FZ_CHECK(memchr(e->message, 0, sizeof e->message) && e->message[0], "a problem has a message");
    (*n)++;
}

/* What a format's target checks on an open handle beyond fz_walk (its extras). */
typedef void (*fz_format_walk_fn)(tbx_file *f, size_t size);

/* Opens the input as `fmt` (open flags `flags`) strictly (the first problem fails) or tolerantly
 * (problems counted), and on a handle: its version is one of `versions` (bit v set), a strict
 * open reported nothing, fz_walk and `extra` pass, tbx_close frees everything. Returns the
 * open status. */
static inline tbx_status fz_open_walk(const uint8_t *data, size_t size, tbx_format fmt,
                                      uint32_t flags, int tolerant, uint32_t versions,
                                      fz_format_walk_fn extra) {
    fz_heap heap = {0, 0};
    uint64_t nproblems = 0;
    tbx_status st;
    tbx_file *f = fz_open_forced(data, size, fmt, flags, &heap,
                                 tolerant ? fz_open_problem : NULL, &nproblems, &st);
    if (!f) return st;
    uint32_t v = tbx_file_version(f);
    FZ_CHECK(v < 32 && (versions >> v & 1u), "a version the driver reads");
    if (!tolerant) FZ_CHECK(nproblems == 0, "a strict open reports no problem");
    fz_walk(f, data, size);
    if (extra) extra(f, size);
    tbx_close(f);
    FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0,
             "tbx_close frees everything the handle allocated");
    return st;
}

/* The body of a format's target: a strict and a tolerant open (fz_open_walk), then the
 * validation pass, which must not accept a file the strict open refused. */
static inline void fz_open_both_and_validate(const uint8_t *data, size_t size, tbx_format fmt,
                                             uint32_t flags, uint32_t versions,
                                             fz_format_walk_fn extra) {
    tbx_status strict = fz_open_walk(data, size, fmt, flags, 0, versions, extra);
    fz_open_walk(data, size, fmt, flags, 1, versions, extra);
    fz_heap heap = {0, 0};
    if (fz_validate(data, size, fmt, &heap) == TBX_OK)
        FZ_CHECK(strict == TBX_OK, "a file the validation accepts opens strictly");
}

#endif /* TBX_FUZZ_WALK_H */
