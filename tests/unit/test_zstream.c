/* test_zstream.c - compressed (zstd) zTensor components read in ranges and chunks: one
 * decoding pass per sequential read of a component, bounded memory whatever the component
 * declares, digests still verified, tbx_read_batch still correct next to the cursors.
 *
 * Memory and decoder work are observed through a counting allocator (every allocation a handle
 * makes, zstd's included, goes through it): `peak` is the most bytes live at once, `total` the
 * sum of all allocations. Decoding a component again from its first byte creates a new decoder
 * and buffers, so `total` grows with every restart; reading a component chunk after chunk must
 * cost about one decoder, not one per chunk.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "tbx_test.h" /* TBX_TEST_LABEL_THREADS: ctest label "threads", run under TSan too */
#include "tensorbox.h"
#include "ztensor.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct heap {
    size_t live, peak, total, calls;
} heap;

static void heap_add(heap *h, size_t n) {
    size_t live = __atomic_add_fetch(&h->live, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->total, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->calls, 1, __ATOMIC_RELAXED);
    size_t pk = __atomic_load_n(&h->peak, __ATOMIC_RELAXED);
    while (live > pk &&
           !__atomic_compare_exchange_n(&h->peak, &pk, live, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
}
static void *h_alloc(void *ud, size_t n) {
    heap_add(ud, n);
    return malloc(n ? n : 1);
}
static void *h_realloc(void *ud, void *p, size_t o, size_t n) {
    heap *h = ud;
    __atomic_sub_fetch(&h->live, o, __ATOMIC_RELAXED);
    heap_add(h, n);
    return realloc(p, n ? n : 1);
}
static void h_free(void *ud, void *p, size_t n) {
    heap *h = ud;
    __atomic_sub_fetch(&h->live, n, __ATOMIC_RELAXED);
    free(p);
}

static char *temp_path(void) {
    static int counter;
    char *path = malloc(600);
    tbx_test_tmppath(path, 600, "tbx_test_zstream_%d_%d.zt", (int)getpid(), counter++);
    unlink(path);
    return path;
}

static float val_a(uint64_t i) { return (float)(i % 1000) - 500.0f; }
static float val_b(uint64_t i) { return (float)((i * 7) % 613) * 0.25f; }

/* Writes dense f32 tensors "a" and "b" of n elements each (values val_a / val_b), zstd level
 * `level`, with `digest` (NULL: none). */
static int write_two(const char *path, uint64_t n, int level, const char *digest) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_ZTENSOR;
    wo.compress_level = level;
    wo.digest = digest;
    wo.threads = 1;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, path, &wo, &e) != TBX_OK) return -1;
    uint64_t shape[1] = {n}, ia, ib;
    tbx_tensor_desc da = {sizeof(tbx_tensor_desc), "a", 0, TBX_DT_F32, 1, shape, 1}, db = {sizeof(tbx_tensor_desc), "b", 0, TBX_DT_F32, 1, shape, 1};
    int ok = tbx_writer_add_tensor(w, &da, &ia, &e) == TBX_OK &&
             tbx_writer_add_tensor(w, &db, &ib, &e) == TBX_OK;
    const uint64_t chunk = (uint64_t)1 << 18;
    float *buf = malloc(chunk * sizeof(float));
    for (int t = 0; t < 2 && ok; t++)
        for (uint64_t k = 0; k < n && ok; k += chunk) {
            uint64_t m = n - k < chunk ? n - k : chunk;
            for (uint64_t j = 0; j < m; j++) buf[j] = t ? val_b(k + j) : val_a(k + j);
            ok = tbx_writer_write_tensor(w, t ? ib : ia, buf, (size_t)(m * 4), &e) == TBX_OK;
        }
    free(buf);
    if (!ok) { tbx_writer_abort(w); return -1; }
    return tbx_writer_finish(w, &e) == TBX_OK ? 0 : -1;
}

static tbx_file *open_counted(const char *path, heap *h, uint32_t flags,
                              const tbx_limits *lim) {
    static tbx_allocator al;
    al.alloc = h_alloc;
    al.realloc = h_realloc;
    al.free = h_free;
    al.ud = h;
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.allocator = &al;
    o.flags = flags;
    o.limits = lim;
    tbx_file *f = NULL;
    tbx_error e;
    if (tbx_open_path(&f, path, &o, &e) != TBX_OK) {
        fprintf(stderr, "open %s: %s\n", path, e.message);
        return NULL;
    }
    return f;
}

/* 2 x 32 MiB of f32 at zstd level 1, read in 1M-element f32 chunks and 1 MiB byte ranges,
 * the two tensors alternately: every value right, at most a few MiB live, and the byte pass
 * allocating less than one decoded tensor in all (the old code decoded and allocated the whole
 * component for every f32 chunk: 32 MiB live, 16 x 32 MiB in total; and refused range reads of
 * compressed tensors). */
TBX_TEST(dense_chunks_decode_once_in_bounded_memory) {
    const uint64_t n = (uint64_t)8 << 20; /* 32 MiB per tensor */
    char *path = temp_path();
    CHECK_EQ(write_two(path, n, 1, NULL), 0);
    heap h = {0, 0, 0, 0};
    tbx_file *f = open_counted(path, &h, 0, NULL);
    CHECK(f != NULL);
    if (!f) { free(path); return; }
    tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
    CHECK_OK(tbx_component_info_get(f, 0, 0, &ci));
    CHECK_EQ(ci.encoding, TBX_ENC_ZSTD);
    const size_t opened = h.total;
    const uint64_t chunk = (uint64_t)1 << 20;
    float *out = malloc(chunk * sizeof(float));
    tbx_error e;
    uint64_t bad = 0;
    for (uint64_t first = 0; first < n; first += chunk)
        for (uint64_t t = 0; t < 2; t++) {
            CHECK_OK(tbx_tensor_read_f32(f, t, first, chunk, out, &e));
            for (uint64_t j = 0; j < chunk; j++)
                bad += out[j] != (t ? val_b(first + j) : val_a(first + j));
        }
    CHECK_EQ(bad, 0);
    /* each f32 call takes a <= 4 MiB buffer for the stored bytes of its chunk (16 calls: about
     * 64 MiB in all); the old code allocated the whole 32 MiB component per call (512 MiB) */
    CHECK(h.peak < ((size_t)12 << 20));
    CHECK(h.total - opened < ((size_t)128 << 20));
    if (h.peak >= ((size_t)12 << 20) || h.total - opened >= ((size_t)128 << 20))
        fprintf(stderr, "f32 pass: peak %zu, allocated %zu\n", h.peak, h.total - opened);

    /* byte ranges, front to back (a new pass: the f32 pass ended at the end), then backwards */
    const size_t total_before = h.total;
    uint8_t *bytes = (uint8_t *)out;
    const size_t step = (size_t)1 << 20;
    for (uint64_t pos = 0; pos < n * 4; pos += step) {
        CHECK_OK(tbx_tensor_read_range(f, 0, pos, bytes, step, &e));
        float v;
        memcpy(&v, bytes + 4 * 1000, 4);
        bad += v != val_a(pos / 4 + 1000);
    }
    CHECK_EQ(bad, 0);
    CHECK(h.total - total_before < ((size_t)12 << 20));
    /* backwards: decodes again from the start, still right */
    CHECK_OK(tbx_tensor_read_range(f, 0, 4 * 12345, bytes, 8, &e));
    float v2[2];
    memcpy(v2, bytes, 8);
    CHECK(v2[0] == val_a(12345) && v2[1] == val_a(12346));
    /* the last byte, and past the end */
    CHECK_OK(tbx_tensor_read_range(f, 1, n * 4 - 4, bytes, 4, &e));
    memcpy(v2, bytes, 4);
    CHECK(v2[0] == val_b(n - 1));
    CHECK_EQ(tbx_tensor_read_range(f, 1, n * 4 - 4, bytes, 5, &e), TBX_E_RANGE);
    CHECK_EQ(tbx_component_read_range(f, 1, 1, 0, bytes, 1, &e), TBX_E_INVALID_ARG);
    tbx_close(f);
    CHECK_EQ(h.live, 0);
    free(out);
    unlink(path);
    free(path);
}

/* With TBX_OPEN_VERIFY_DIGESTS a wrong digest fails the first range read and every f32
 * read, before any byte is handed out; a right one lets chunked reads through. */
TBX_TEST(digest_checked_before_streaming) {
    const uint64_t n = (uint64_t)1 << 20;
    char *path = temp_path();
    CHECK_EQ(write_two(path, n, 3, "sha256"), 0);
    heap h = {0, 0, 0, 0};
    tbx_error e;
    float out[256];
    tbx_file *f = open_counted(path, &h, TBX_OPEN_VERIFY_DIGESTS, NULL);
    CHECK(f != NULL);
    if (f) {
        for (uint64_t first = 0; first < n; first += (uint64_t)1 << 16)
            CHECK_OK(tbx_tensor_read_f32(f, 0, first, 256, out, &e));
        CHECK(out[255] == val_a(n - ((uint64_t)1 << 16) + 255));
        tbx_close(f);
    }
    /* flip one hex digit of tensor a's digest in the manifest */
    size_t len = 0;
    uint8_t *p = tbx_test_slurp(path, &len);
    CHECK(p != NULL);
    uint8_t *d = NULL;
    for (size_t k = 0; p && k + 7 < len; k++)
        if (memcmp(p + k, "sha256:", 7) == 0) { d = p + k + 7; break; }
    CHECK(d != NULL);
    if (d) {
        *d = *d == '0' ? '1' : '0';
        FILE *fp = fopen(path, "wb");
        CHECK(fp != NULL);
        if (fp) { fwrite(p, 1, len, fp); fclose(fp); }
    }
    free(p);
    /* which tensor got the flipped digest: the one whose read fails */
    f = open_counted(path, &h, TBX_OPEN_VERIFY_DIGESTS, NULL);
    CHECK(f != NULL);
    if (f) {
        tbx_status s0 = tbx_tensor_read_range(f, 0, 0, out, 16, &e);
        tbx_status s1 = tbx_tensor_read_range(f, 1, 0, out, 16, &e);
        CHECK((s0 == TBX_E_CHECKSUM) != (s1 == TBX_E_CHECKSUM));
        CHECK(s0 == TBX_OK || s1 == TBX_OK);
        uint64_t bad_t = s0 == TBX_E_CHECKSUM ? 0 : 1;
        CHECK_EQ(tbx_tensor_read_range(f, bad_t, 4096, out, 16, &e), TBX_E_CHECKSUM);
        CHECK_EQ(tbx_tensor_read_f32(f, bad_t, 0, 16, out, &e), TBX_E_CHECKSUM);
        CHECK(strstr(e.message, "digest") != NULL);
        tbx_close(f);
    }
    /* without verification the same bytes read fine */
    f = open_counted(path, &h, 0, NULL);
    CHECK(f != NULL);
    if (f) {
        CHECK_OK(tbx_tensor_read_f32(f, 0, 100, 16, out, &e));
        CHECK(out[0] == val_a(100));
        tbx_close(f);
    }
    CHECK_EQ(h.live, 0);
    unlink(path);
    free(path);
}

/* max_decode_window: a frame that needs a larger window fails with TBX_E_LIMIT naming it. */
TBX_TEST(decode_window_limit) {
    const uint64_t n = (uint64_t)1 << 20; /* 4 MiB: zstd level 3 uses a 2 MiB window */
    char *path = temp_path();
    CHECK_EQ(write_two(path, n, 3, NULL), 0);
    heap h = {0, 0, 0, 0};
    tbx_limits lim;
    tbx_limits_default(&lim);
    CHECK_EQ(lim.max_decode_window, (uint64_t)1 << 27);
    lim.max_decode_window = (uint64_t)1 << 20;
    tbx_error e;
    float out[4];
    tbx_file *f = open_counted(path, &h, 0, &lim);
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ(tbx_tensor_read_f32(f, 0, 0, 4, out, &e), TBX_E_LIMIT);
        CHECK(strstr(e.message, "max_decode_window") != NULL);
        tbx_close(f);
    }
    f = open_counted(path, &h, 0, NULL);
    CHECK(f != NULL);
    if (f) {
        CHECK_OK(tbx_tensor_read_f32(f, 0, n - 4, 4, out, &e));
        CHECK(out[3] == val_a(n - 1));
        tbx_close(f);
    }
    unlink(path);
    free(path);
}

/* Sparse CSR and quantized_group tensors, zstd-compressed, read in chunks that cut rows:
 * values right, and no decoder started per chunk (the old code opened three streams per call
 * and skipped from the first byte: allocations grew with the number of chunks). */
TBX_TEST(sparse_and_qgroup_chunks_continue) {
    const uint64_t rows = 2048, cols = 1000, per_row = 5, nnz = rows * per_row;
    uint64_t *ind = malloc(nnz * sizeof *ind), *ptr = malloc((rows + 1) * sizeof *ptr);
    float *val = malloc(nnz * sizeof *val);
    for (uint64_t r = 0; r <= rows; r++) ptr[r] = r * per_row;
    for (uint64_t k = 0; k < nnz; k++) {
        uint64_t r = k / per_row, j = k % per_row;
        ind[k] = (r * 31 + j * 197) % cols; /* distinct within the row, unsorted */
        val[k] = (float)(k % 97) + 0.5f;
    }
    const uint64_t qrows = 512, qcols = 256, group = 32, ngroups = qrows * (qcols / group);
    uint32_t *words = calloc(qrows * qcols / 8, sizeof *words);
    float *sc = malloc(ngroups * sizeof *sc), *zr = malloc(ngroups * sizeof *zr);
    for (uint64_t k = 0; k < qrows * qcols; k++)
        words[k / 8] |= (uint32_t)((k * 5) % 16) << (4 * (k % 8));
    for (uint64_t g = 0; g < ngroups; g++) { sc[g] = 0.5f + (float)(g % 7); zr[g] = (float)(g % 3); }

    char *path = temp_path();
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_ZTENSOR;
    wo.compress_level = 3;
    wo.threads = 1;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    uint64_t cshape[2] = {rows, cols}, qshape[2] = {qrows, qcols};
    CHECK_OK(tbx_ztensor_writer_add_csr(w, "csr", TBX_DT_F32, cshape, val, nnz, ind, ptr, &e));
    tbx_ztensor_qgroup qg = {4, (uint32_t)group, TBX_DT_U32, 0, TBX_DT_F32, words, sc, zr};
    CHECK_OK(tbx_ztensor_writer_add_qgroup(w, "qg", qshape, 2, &qg, &e));
    CHECK_OK(tbx_writer_finish(w, &e));

    heap h = {0, 0, 0, 0};
    tbx_file *f = open_counted(path, &h, 0, NULL);
    CHECK(f != NULL);
    if (f) {
        uint64_t ic = 0, iq = 0;
        CHECK_OK(tbx_tensor_find(f, "csr", &ic));
        CHECK_OK(tbx_tensor_find(f, "qg", &iq));
        /* dense reference of the CSR tensor */
        float *ref = calloc(rows * cols, sizeof *ref);
        for (uint64_t k = 0; k < nnz; k++) ref[(k / per_row) * cols + ind[k]] += val[k];
        const uint64_t chunk = 777; /* cuts rows */
        float *out = malloc(chunk * sizeof *out);
        uint64_t bad = 0, calls_after_first = 0;
        for (uint64_t first = 0; first < rows * cols; first += chunk) {
            uint64_t m = rows * cols - first < chunk ? rows * cols - first : chunk;
            CHECK_OK(tbx_tensor_read_f32(f, ic, first, m, out, &e));
            for (uint64_t j = 0; j < m; j++) bad += out[j] != ref[first + j];
            if (first == 0) calls_after_first = h.calls;
        }
        CHECK_EQ(bad, 0);
        /* 2636 chunks; a few streams started in all (lane 1 for cut rows), not 3 per chunk */
        CHECK(h.calls - calls_after_first < 64);
        if (h.calls - calls_after_first >= 64)
            fprintf(stderr, "csr: %zu allocations after the first chunk\n",
                    h.calls - calls_after_first);
        for (uint64_t first = 0; first < qrows * qcols; first += chunk) {
            uint64_t m = qrows * qcols - first < chunk ? qrows * qcols - first : chunk;
            CHECK_OK(tbx_tensor_read_f32(f, iq, first, m, out, &e));
            for (uint64_t j = 0; j < m; j++) {
                uint64_t k = first + j, g = (k / qcols) * (qcols / group) + (k % qcols) / group;
                bad += out[j] != ((float)((k * 5) % 16) - zr[g]) * sc[g];
            }
            if (first == 0) calls_after_first = h.calls;
        }
        CHECK_EQ(bad, 0);
        CHECK(h.calls - calls_after_first < 64);
        free(out);
        free(ref);
        tbx_close(f);
        CHECK_EQ(h.live, 0);
    }
    unlink(path);
    free(path);
    free(ind); free(ptr); free(val); free(words); free(sc); free(zr);
}

/* tbx_read_batch decodes components on worker threads with decoders of their own: a cursor
 * parked half-way by range reads neither disturbs it nor is disturbed by it. */
TBX_TEST(batch_next_to_parked_cursors) {
    const uint64_t n = (uint64_t)1 << 20;
    char *path = temp_path();
    CHECK_EQ(write_two(path, n, 3, "crc32c"), 0);
    heap h = {0, 0, 0, 0};
    tbx_file *f = open_counted(path, &h, TBX_OPEN_VERIFY_DIGESTS, NULL);
    CHECK(f != NULL);
    if (f) {
        tbx_error e;
        float part[1024];
        CHECK_OK(tbx_tensor_read_range(f, 0, 0, part, sizeof part, &e));
        CHECK_OK(tbx_tensor_read_range(f, 1, 0, part, sizeof part, &e));
        float *wa = malloc(n * 4), *wb = malloc(n * 4);
        tbx_read_req req[2] = {{sizeof(tbx_read_req), 0, 0, wa, n * 4, TBX_OK, {0}},
                               {sizeof(tbx_read_req), 1, 0, wb, n * 4, TBX_OK, {0}}};
        CHECK_OK(tbx_read_batch(f, req, 2, 2, &e));
        uint64_t bad = 0;
        for (uint64_t k = 0; k < n; k++) bad += wa[k] != val_a(k) || wb[k] != val_b(k);
        CHECK_EQ(bad, 0);
        for (uint64_t pos = sizeof part; pos < n * 4; pos += sizeof part) {
            CHECK_OK(tbx_tensor_read_range(f, 1, pos, part, sizeof part, &e));
            bad += part[0] != val_b(pos / 4);
        }
        CHECK_EQ(bad, 0);
        free(wa);
        free(wb);
        tbx_close(f);
        CHECK_EQ(h.live, 0);
    }
    unlink(path);
    free(path);
}

/* ---- compressing writer: large tensors stream -------------------------------------------- */

/* Test data of kind k: 0 zeros, 1 random, 2 float-like (random low bytes, few exponents: close
 * to the 5% a frame must save to be kept), 3 repetitive words. */
static void fill_kind(uint8_t *p, size_t n, int kind, uint64_t seed) {
    uint64_t x = seed | 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        switch (kind) {
        case 0: p[i] = 0; break;
        case 1: p[i] = (uint8_t)x; break;
        case 2: p[i] = i % 4 == 3 ? (uint8_t)(0x3c + (x & 3)) : (uint8_t)x; break;
        default: p[i] = (uint8_t)("tensor weight bias layer attn mlp "[(i / 3 + (x & 1)) % 34]);
        }
    }
}

/* Writes one zTensor file of the given u8 tensors, fed in `chunk`-byte pieces; `al` NULL:
 * malloc. Returns 0 on success. */
static int write_zt_u8(const char *path, uint8_t *const *data, const size_t *len, size_t nt,
                       int level, const char *digest, uint32_t threads, uint64_t buffer_limit,
                       size_t chunk, const tbx_allocator *al) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_ZTENSOR;
    wo.compress_level = level;
    wo.digest = digest;
    wo.threads = threads;
    wo.buffer_limit = buffer_limit;
    wo.allocator = al;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, path, &wo, &e) != TBX_OK) return -1;
    int ok = 1;
    for (size_t t = 0; t < nt && ok; t++) {
        char name[32];
        snprintf(name, sizeof name, "t%02zu", t);
        uint64_t shape[1] = {len[t]};
        tbx_tensor_desc d = {sizeof(tbx_tensor_desc), name, 0, TBX_DT_U8, 1, shape, 1};
        ok = tbx_writer_add_tensor(w, &d, NULL, &e) == TBX_OK;
    }
    for (size_t t = 0; t < nt && ok; t++)
        for (size_t k = 0; k < len[t] && ok; k += chunk) {
            size_t m = len[t] - k < chunk ? len[t] - k : chunk;
            ok = tbx_writer_write_tensor(w, t, data[t] + k, m, &e) == TBX_OK;
        }
    if (!ok) { fprintf(stderr, "write: %s\n", e.message); tbx_writer_abort(w); return -1; }
    if (tbx_writer_finish(w, &e) != TBX_OK) { fprintf(stderr, "finish: %s\n", e.message); return -1; }
    return 0;
}

/* A tensor compressed as a stream (buffer_limit 1: every non-empty tensor streams) gives the
 * bytes of the same tensor gathered whole and compressed on a worker, whatever the chunking:
 * sizes around zstd's 128 KiB blocks and past its window (2 MiB at level 3: 3 MiB), data that
 * compresses well (the outcome known early), not at all, or close to the 5% bound; several
 * levels. Every file reads back as the data, digests verified. */
TBX_TEST(streamed_writes_equal_gathered_writes) {
    const size_t sizes[] = {1, 2, 9, 4095, 131071, 131072, 131073, 262145, 1000003,
                            (3u << 20) + 7};
    const size_t ns = sizeof sizes / sizeof *sizes;
    const int levels[] = {1, 3, 9, 19};
    uint8_t *data[4 * 10];
    size_t len[4 * 10];
    size_t nt = 0;
    for (int kind = 0; kind < 4; kind++)
        for (size_t k = 0; k < ns; k++, nt++) {
            len[nt] = sizes[k];
            data[nt] = malloc(sizes[k]);
            fill_kind(data[nt], sizes[k], kind, 0x9E3779B97F4A7C15ull + nt);
        }
    for (size_t li = 0; li < sizeof levels / sizeof *levels; li++) {
        int level = levels[li];
        /* level 19 is slow: without the 3 MiB tensors (they would fill the window) */
        uint8_t *sel[4 * 10];
        size_t sl[4 * 10], use = 0;
        for (size_t t = 0; t < nt; t++)
            if (level < 19 || len[t] < ((size_t)2 << 20)) { sel[use] = data[t]; sl[use++] = len[t]; }
        char *pa = temp_path(), *pb = temp_path(), *pc = temp_path();
        CHECK_OK(write_zt_u8(pa, sel, sl, use, level, "crc32c", 2, (uint64_t)1 << 30, 65536,
                             NULL));
        CHECK_OK(write_zt_u8(pb, sel, sl, use, level, "crc32c", 2, 1, 65537, NULL));
        CHECK_OK(write_zt_u8(pc, sel, sl, use, level, "crc32c", 1, 1, (1u << 20) + 3, NULL));
        size_t na = 0, nb = 0, nc = 0;
        uint8_t *a = tbx_test_slurp(pa, &na), *b = tbx_test_slurp(pb, &nb),
                *c = tbx_test_slurp(pc, &nc);
        CHECK(a && b && c);
        CHECK(na == nb && a && b && memcmp(a, b, na) == 0);
        CHECK(na == nc && a && c && memcmp(a, c, na) == 0);
        if (na != nb || (a && b && memcmp(a, b, na) != 0))
            fprintf(stderr, "level %d: streamed file differs (%zu vs %zu bytes)\n", level, na, nb);
        heap h = {0};
        tbx_file *f = open_counted(pb, &h, TBX_OPEN_VERIFY_DIGESTS, NULL);
        CHECK(f != NULL);
        int nz = 0, nraw = 0;
        for (size_t t = 0; f && t < use; t++) {
            uint8_t *buf = malloc(sl[t] ? sl[t] : 1);
            size_t need = 0;
            tbx_error e;
            CHECK_OK(tbx_tensor_read(f, t, buf, sl[t], &need, &e));
            CHECK(need == sl[t] && memcmp(buf, sel[t], need) == 0);
            tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
            CHECK_OK(tbx_component_info_get(f, t, 0, &ci));
            nz += ci.encoding == TBX_ENC_ZSTD;
            nraw += ci.encoding == TBX_ENC_RAW;
            free(buf);
        }
        CHECK(nz > 0 && nraw > 0); /* both outcomes */
        tbx_close(f);
        free(a); free(b); free(c);
        unlink(pa); unlink(pb); unlink(pc);
        free(pa); free(pb); free(pc);
    }
    for (size_t t = 0; t < nt; t++) free(data[t]);
}

/* A 96 MiB tensor of zeros (and a 24 MiB random one, kept raw) written compressed: the writer
 * holds a few MiB (its buffers and zstd's state, all through the allocator), not the tensor
 * (the old writer gathered every tensor whole: 96 MiB + a 91 MiB output buffer). */
TBX_TEST(large_tensor_compresses_in_bounded_memory) {
    const size_t big = (size_t)96 << 20, rnd = (size_t)24 << 20, chunk = (size_t)1 << 20;
    uint8_t *zeros = calloc(1, chunk), *r = malloc(rnd);
    fill_kind(r, rnd, 1, 12345);
    heap h = {0};
    tbx_allocator al = {h_alloc, h_realloc, h_free, &h};
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_ZTENSOR;
    wo.compress_level = 3;
    wo.digest = "sha256";
    wo.threads = 2;
    wo.buffer_limit = (uint64_t)16 << 20; /* the random one streams too (> 16 MiB / 3) */
    wo.allocator = &al;
    char *path = temp_path();
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    uint64_t s1[1] = {big}, s2[1] = {rnd};
    tbx_tensor_desc d1 = {sizeof(tbx_tensor_desc), "big", 0, TBX_DT_U8, 1, s1, 1},
                    d2 = {sizeof(tbx_tensor_desc), "rnd", 0, TBX_DT_U8, 1, s2, 1};
    CHECK_OK(tbx_writer_add_tensor(w, &d1, NULL, &e));
    CHECK_OK(tbx_writer_add_tensor(w, &d2, NULL, &e));
    for (size_t k = 0; k < big; k += chunk) CHECK_OK(tbx_writer_write_tensor(w, 0, zeros, chunk, &e));
    for (size_t k = 0; k < rnd; k += chunk) CHECK_OK(tbx_writer_write_tensor(w, 1, r + k, chunk, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    fprintf(stderr, "writer peak %zu KiB\n", h.peak >> 10);
    CHECK(h.peak < ((size_t)12 << 20));
    heap h2 = {0};
    tbx_file *f = open_counted(path, &h2, TBX_OPEN_VERIFY_DIGESTS, NULL);
    CHECK(f != NULL);
    tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
    CHECK_OK(tbx_component_info_get(f, 0, 0, &ci));
    CHECK_EQ(ci.encoding, TBX_ENC_ZSTD);
    CHECK(ci.stored_bytes < 64 * 1024);
    CHECK_OK(tbx_component_info_get(f, 1, 0, &ci));
    CHECK_EQ(ci.encoding, TBX_ENC_RAW);
    uint8_t *buf = malloc(big);
    size_t need = 0;
    CHECK_OK(tbx_tensor_read(f, 0, buf, big, &need, &e));
    CHECK(need == big && buf[0] == 0 && buf[big - 1] == 0 && memchr(buf, 1, big) == NULL);
    CHECK_OK(tbx_tensor_read(f, 1, buf, rnd, &need, &e));
    CHECK(need == rnd && memcmp(buf, r, rnd) == 0);
    free(buf);
    tbx_close(f);
    unlink(path);
    free(path);
    free(zeros);
    free(r);
}

/* ------------------------------------------------------------------------------------------ */
/* Decoder memory budget: a small file whose zstd frames declare large windows                 */
/* ------------------------------------------------------------------------------------------ */
#define WB_N 8                       /* components */
#define WB_WLOG 23                   /* window of the large frames: 8 MiB */
#define WB_SIZE ((size_t)1 << WB_WLOG) /* decoded bytes per component */
#define WB_HEAD ((size_t)1 << 17)    /* decoded bytes of the small first frame (multi-frame) */

/* A zstd frame (RFC 8878) without content size, window 2^wlog, of `n` bytes in RLE blocks of
 * 128 KiB; block k (counted from `k0`) repeats the byte (k & 0xFF). Returns its size. */
static size_t wb_frame(uint8_t *o, unsigned wlog, size_t n, size_t k0) {
    size_t p = 0;
    const uint8_t magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    memcpy(o, magic, 4);
    p = 4;
    o[p++] = 0x00;                          /* no checksum, no dictionary, no content size */
    o[p++] = (uint8_t)((wlog - 10) << 3);   /* window descriptor: exponent, mantissa 0 */
    const size_t bs = (size_t)1 << 17;
    for (size_t k = 0; k * bs < n; k++) {
        size_t size = n - k * bs < bs ? n - k * bs : bs;
        uint32_t h = (uint32_t)(size << 3) | (1u << 1) | ((k + 1) * bs >= n ? 1u : 0u);
        o[p++] = (uint8_t)h;
        o[p++] = (uint8_t)(h >> 8);
        o[p++] = (uint8_t)(h >> 16);
        o[p++] = (uint8_t)((k0 + k) & 0xFF);
    }
    return p;
}

static size_t cb_head(uint8_t *o, unsigned mt, uint64_t v) {
    if (v < 24) { o[0] = (uint8_t)(mt << 5 | v); return 1; }
    if (v < 256) { o[0] = (uint8_t)(mt << 5 | 24); o[1] = (uint8_t)v; return 2; }
    o[0] = (uint8_t)(mt << 5 | 26);
    for (int k = 0; k < 4; k++) o[1 + k] = (uint8_t)(v >> (24 - 8 * k));
    return 5;
}
static size_t cb_str(uint8_t *o, const char *s) {
    size_t n = strlen(s), p = cb_head(o, 3, n);
    memcpy(o + p, s, n);
    return p + n;
}

/* Writes WB_N dense u8 tensors "t0".. of WB_SIZE bytes, each one zstd component: a frame with
 * an 8 MiB window, or (odd tensors, `multi`) a small frame with a 128 KiB window followed by one
 * with an 8 MiB window. The file is a few KiB; byte i of every tensor is (i >> 17) & 0xFF. */
static int write_windows(const char *path, bool multi) {
    uint8_t *b = calloc(1, 1 << 20);
    size_t p = 64, off[WB_N], len[WB_N];
    memcpy(b, "ZTEN1000", 8);
    for (int t = 0; t < WB_N; t++) {
        off[t] = p;
        if (multi && t % 2) {
            p += wb_frame(b + p, 17, WB_HEAD, 0);
            p += wb_frame(b + p, WB_WLOG, WB_SIZE - WB_HEAD, WB_HEAD >> 17);
        } else {
            p += wb_frame(b + p, WB_WLOG, WB_SIZE, 0);
        }
        len[t] = p - off[t];
        p = (p + 63) & ~(size_t)63;
    }
    size_t m0 = p;
    p += cb_head(b + p, 5, 2);
    p += cb_str(b + p, "version");
    p += cb_str(b + p, "1.1.0");
    p += cb_str(b + p, "objects");
    p += cb_head(b + p, 5, WB_N);
    for (int t = 0; t < WB_N; t++) {
        char name[8];
        snprintf(name, sizeof name, "t%d", t);
        p += cb_str(b + p, name);
        p += cb_head(b + p, 5, 3);
        p += cb_str(b + p, "shape");
        p += cb_head(b + p, 4, 1);
        p += cb_head(b + p, 0, WB_SIZE);
        p += cb_str(b + p, "format");
        p += cb_str(b + p, "dense");
        p += cb_str(b + p, "components");
        p += cb_head(b + p, 5, 1);
        p += cb_str(b + p, "data");
        p += cb_head(b + p, 5, 4);
        p += cb_str(b + p, "dtype");
        p += cb_str(b + p, "u8");
        p += cb_str(b + p, "offset");
        p += cb_head(b + p, 0, off[t]);
        p += cb_str(b + p, "length");
        p += cb_head(b + p, 0, len[t]);
        p += cb_str(b + p, "encoding");
        p += cb_str(b + p, "zstd");
    }
    uint64_t msize = p - m0;
    for (int k = 0; k < 8; k++) b[p++] = (uint8_t)(msize >> (8 * k));
    memcpy(b + p, "ZTEN1000", 8);
    p += 8;
    FILE *fp = fopen(path, "wb");
    int ok = fp && fwrite(b, 1, p, fp) == p;
    if (fp) ok = fclose(fp) == 0 && ok;
    free(b);
    return ok ? 0 : -1;
}

static bool wb_pattern_ok(const uint8_t *p, size_t at, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)(((at + i) >> 17) & 0xFF)) return false;
    return true;
}

/* 8 components whose frames each declare an 8 MiB window, max_decode_window 8 MiB, read by
 * tbx_read_batch on 8 threads: every result right and in place, and the decoders' windows
 * never more than the budget (one window) at once: the old code ran 8 decoders side by side,
 * 8 windows live. The odd components start with a small frame and grow at their second. */
TBX_TEST(batch_decoders_share_one_window_budget) {
    for (int multi = 0; multi < 2; multi++) {
        char *path = temp_path();
        CHECK_EQ(write_windows(path, multi), 0);
        heap h = {0, 0, 0, 0};
        tbx_limits lim;
        tbx_limits_default(&lim);
        lim.max_decode_window = WB_SIZE;
        tbx_file *f = open_counted(path, &h, 0, &lim);
        CHECK(f != NULL);
        if (!f) { free(path); continue; }
        CHECK_EQ(tbx_tensor_count(f), WB_N);
        tbx_read_req rq[WB_N];
        for (int t = 0; t < WB_N; t++) {
            rq[t] = (tbx_read_req)TBX_READ_REQ_INIT;
            rq[t].tensor = (uint64_t)t;
            rq[t].buf = malloc(WB_SIZE);
            rq[t].cap = WB_SIZE;
        }
        size_t before = h.live;
        h.peak = h.live;
        tbx_error e;
        CHECK_OK(tbx_read_batch(f, rq, WB_N, 8, &e));
        size_t peak = h.peak - before;
        fprintf(stderr, "batch of %d 8 MiB-window components on 8 threads (multi %d): peak %zu\n",
                WB_N, multi, peak);
        /* one window, plus per decoder its input buffers and state (< 1 MiB each) */
        CHECK(peak < WB_SIZE + 8 * ((size_t)1 << 20));
        for (int t = 0; t < WB_N; t++) {
            CHECK_EQ(rq[t].status, TBX_OK);
            CHECK(wb_pattern_ok(rq[t].buf, 0, WB_SIZE));
            free(rq[t].buf);
        }
        /* validation's pass over the data (8 workers) shares the same budget; each worker
         * also holds a 1 MiB scratch buffer */
        setenv("TBX_THREADS", "8", 1);
        before = h.live;
        h.peak = h.live;
        uint64_t np = 99;
        CHECK_OK(tbx_validate(f, NULL, NULL, &np));
        CHECK_EQ(np, 0);
        peak = h.peak - before;
        fprintf(stderr, "validate on 8 threads (multi %d): peak %zu\n", multi, peak);
        CHECK(peak < WB_SIZE + 16 * ((size_t)1 << 20));
        unsetenv("TBX_THREADS");
        tbx_close(f);
        unlink(path);
        free(path);
    }
}

/* Range reads of 8 such components, each left half read: the streams parked for a further
 * read keep their windows under the budget (the oldest are evicted), where the old code kept 6
 * parked decoders with 6 windows. Reading on still gives the right bytes. */
TBX_TEST(parked_streams_share_one_window_budget) {
    char *path = temp_path();
    CHECK_EQ(write_windows(path, true), 0);
    heap h = {0, 0, 0, 0};
    tbx_limits lim;
    tbx_limits_default(&lim);
    lim.max_decode_window = WB_SIZE;
    tbx_file *f = open_counted(path, &h, 0, &lim);
    CHECK(f != NULL);
    if (f) {
        const size_t half = WB_SIZE / 2, piece = (size_t)1 << 16;
        uint8_t *buf = malloc(half);
        tbx_error e;
        size_t before = h.live;
        for (int t = 0; t < WB_N; t++) {
            CHECK_OK(tbx_component_read_range(f, (uint64_t)t, 0, 0, buf, half, &e));
            CHECK(wb_pattern_ok(buf, 0, half));
        }
        size_t kept = h.live - before;
        fprintf(stderr, "parked after 8 half reads: %zu bytes live\n", kept);
        CHECK(kept < WB_SIZE + 6 * ((size_t)1 << 20));
        for (int t = WB_N - 1; t >= 0; t--) {
            CHECK_OK(tbx_component_read_range(f, (uint64_t)t, 0, half, buf, piece, &e));
            CHECK(wb_pattern_ok(buf, half, piece));
        }
        CHECK(h.live - before < WB_SIZE + 6 * ((size_t)1 << 20));
        free(buf);
        tbx_close(f);
    }
    unlink(path);
    free(path);
}

TBX_TEST_MAIN()
