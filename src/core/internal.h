/*
 * internal.h - the contract shared by core, io, quant and the format drivers.
 *
 * Nothing here is public. Format drivers include only this header (and tensorbox.h); they never
 * include each other. Conversion between formats goes through the common model below.
 */
#ifndef TBX_INTERNAL_H
#define TBX_INTERNAL_H

#include "tensorbox.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Checked arithmetic: return false on overflow, *out untouched then.                          */
/* ------------------------------------------------------------------------------------------ */
static inline bool tbx_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
static inline bool tbx_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
/* Rounds x up to a multiple of `align` (a power of two or any positive value). */
static inline bool tbx_align_up_u64(uint64_t x, uint64_t align, uint64_t *out) {
    if (align <= 1) { *out = x; return true; }
    uint64_t rem = x % align;
    if (rem == 0) { *out = x; return true; }
    return tbx_add_u64(x, align - rem, out);
}
static inline bool tbx_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* ------------------------------------------------------------------------------------------ */
/* Little-endian loads/stores via memcpy (alignment-safe, strict-aliasing-safe).               */
/* ------------------------------------------------------------------------------------------ */
static inline uint16_t tbx_ld16(const void *p) {
    const uint8_t *b = (const uint8_t *)p;
    return (uint16_t)(b[0] | (b[1] << 8));
}
static inline uint32_t tbx_ld32(const void *p) {
    const uint8_t *b = (const uint8_t *)p;
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}
static inline uint64_t tbx_ld64(const void *p) {
    return (uint64_t)tbx_ld32(p) | ((uint64_t)tbx_ld32((const uint8_t *)p + 4) << 32);
}
static inline void tbx_st16(void *p, uint16_t v) {
    uint8_t *b = (uint8_t *)p; b[0] = (uint8_t)v; b[1] = (uint8_t)(v >> 8);
}
static inline void tbx_st32(void *p, uint32_t v) {
    uint8_t *b = (uint8_t *)p;
    b[0] = (uint8_t)v; b[1] = (uint8_t)(v >> 8); b[2] = (uint8_t)(v >> 16); b[3] = (uint8_t)(v >> 24);
}
static inline void tbx_st64(void *p, uint64_t v) {
    tbx_st32(p, (uint32_t)v); tbx_st32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}
static inline float tbx_ldf32(const void *p) { uint32_t u = tbx_ld32(p); float f; memcpy(&f, &u, 4); return f; }
static inline double tbx_ldf64(const void *p) { uint64_t u = tbx_ld64(p); double d; memcpy(&d, &u, 8); return d; }

/* ------------------------------------------------------------------------------------------ */
/* Errors (src/core/error.c)                                                                   */
/* ------------------------------------------------------------------------------------------ */
/* Fills *err (when not NULL) and returns `code`. `field` may be NULL. The message is formatted
 * from fmt and, when offset != TBX_NO_OFFSET, suffixed with " at byte OFFSET". */
tbx_status tbx_err(tbx_error *err, tbx_status code, uint64_t offset, const char *field,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
tbx_status tbx_verr(tbx_error *err, tbx_status code, uint64_t offset, const char *field,
                    const char *fmt, va_list ap);
/* As tbx_err, for a message that already names the offset itself: no " at byte" suffix is
 * added, but err->offset is still set to `offset`. */
tbx_status tbx_err_at(tbx_error *err, tbx_status code, uint64_t offset, const char *field,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Shorthand for TBX_E_NOMEM. */
tbx_status tbx_err_nomem(tbx_error *err, const char *what);

/* ------------------------------------------------------------------------------------------ */
/* Allocation (src/core/alloc.c): every handle allocation goes through its allocator.          */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_alloc {
    tbx_allocator a; /* always fully set (malloc-backed default) */
} tbx_alloc;

void tbx_alloc_init(tbx_alloc *al, const tbx_allocator *user);
void *tbx_malloc(const tbx_alloc *al, size_t n);         /* n == 0 allowed (returns non-NULL) */
void *tbx_calloc(const tbx_alloc *al, size_t count, size_t size); /* checked multiply */
void *tbx_realloc(const tbx_alloc *al, void *p, size_t old_n, size_t new_n);
void tbx_free(const tbx_alloc *al, void *p, size_t n);
char *tbx_memdup0(const tbx_alloc *al, const void *p, size_t n); /* copy + trailing NUL */
/* Grows a dynamic array (*items of *cap elements of `elem` bytes) to hold at least `need`. */
bool tbx_grow(const tbx_alloc *al, void **items, size_t *cap, size_t need, size_t elem);
/* A byte buffer built in memory (a section's bytes, a re-encoded JSON file): p has cap bytes,
 * n used; the owner frees p with tbx_free(al, p, cap). Once a growth fails, oom is set and
 * every later put does nothing, so a builder checks oom once at the end. */
typedef struct tbx_membuf {
    const tbx_alloc *al;
    uint8_t *p;
    size_t n, cap;
    bool oom;
} tbx_membuf;
/* Appends n bytes from p, or n zero bytes when p is NULL. */
void tbx_membuf_put(tbx_membuf *b, const void *p, size_t n);

/* The process-wide default allocator (malloc/realloc/free). */
extern const tbx_allocator tbx_default_allocator;

/* ------------------------------------------------------------------------------------------ */
/* Sources (src/io/source.c): where file bytes come from.                                      */
/* ------------------------------------------------------------------------------------------ */
typedef enum tbx_source_kind { TBX_SRC_FD, TBX_SRC_MMAP, TBX_SRC_MEMORY, TBX_SRC_CALLBACK } tbx_source_kind;

typedef struct tbx_source {
    tbx_source_kind kind;
    uint64_t size;
    int fd;                   /* TBX_SRC_FD / TBX_SRC_MMAP (-1 otherwise) */
    const uint8_t *base;      /* TBX_SRC_MMAP / TBX_SRC_MEMORY: the whole file */
    size_t map_len;           /* TBX_SRC_MMAP: length to munmap */
    int guard;                /* TBX_SRC_MMAP with map_len: its slot in the guarded mappings
                                 (src/io/mapguard.c) */
    const _Atomic size_t *valid; /* that slot's valid length (tbx_source_fast_ok), else NULL */
    tbx_read_at_fn cb;        /* TBX_SRC_CALLBACK */
    void *cb_ud;
    uint64_t dev, ino;        /* path sources: identity, for "never overwrite an input" */
    bool registered;          /* in the open-inputs registry */
} tbx_source;

tbx_status tbx_source_open_path(tbx_source *s, const char *path, bool use_mmap, tbx_error *err);
void tbx_source_open_memory(tbx_source *s, const void *data, size_t size);
void tbx_source_open_callback(tbx_source *s, tbx_read_at_fn fn, void *ud, uint64_t size);
void tbx_source_close(tbx_source *s);
/* Reads exactly len bytes at off. Fails with TBX_E_TRUNCATED (naming `field`) when
 * [off, off+len) is not inside the file, or no longer is (the file shrank: pread finds its end,
 * a mapping's check fails), TBX_E_IO on a read error. */
tbx_status tbx_source_read(const tbx_source *s, uint64_t off, void *buf, size_t len,
                           const char *field, tbx_error *err);
/* Pointer to [off, off+len) when the source is mapped/in memory, else NULL. The bytes of a
 * mapped file read as zeros once the file has shrunk below them (src/io/mapguard.c): after
 * reading them and before using or handing on anything computed from them, call
 * tbx_source_check on the range. */
const uint8_t *tbx_source_ptr(const tbx_source *s, uint64_t off, uint64_t len);
/* TBX_OK when bytes [off, off+len) of the source were still the file's when they were read
 * (always, for sources that are not mapped); TBX_E_TRUNCATED naming `field` and the offset where
 * the file now ends when the file shrank below them (they read as zeros). Call it after the
 * access: a mapped byte past the new end reads as zero, and only afterwards does the check know.
 * Cost: two atomic loads and a read of one byte of the page after the range, or an fstat when
 * that page is outside the mapping. */
tbx_status tbx_source_check(const tbx_source *s, uint64_t off, uint64_t len, const char *field,
                            tbx_error *err);
/* The cursor's per-field check (every field parsed at open): true unless the mapping is known
 * to have lost bytes below `end` (a fault past the new end of the file lowered its valid
 * length). Not exact (bytes past the new end in the page holding it read as zeros without a
 * fault): tbx_open_path completes it by comparing the file's size at the end of the open
 * (tbx_file_check_sources), and turns any failure of the open of a file that shrank into
 * TBX_E_TRUNCATED. Then call tbx_source_check for the message. */
static inline bool tbx_source_fast_ok(const tbx_source *s, uint64_t end) {
    if (!s->valid) return true;
    atomic_thread_fence(memory_order_acquire);
    return end <= (uint64_t)atomic_load_explicit(s->valid, memory_order_acquire);
}
/* TBX_OK when the path source s still has the bytes it had when opened and no mapped byte of
 * it was found missing (one fstat), else TBX_E_TRUNCATED naming `field` and where the file now
 * ends. TBX_OK for memory and callback sources. */
tbx_status tbx_source_intact(const tbx_source *s, const char *field, tbx_error *err);
/* TBX_OK when every path source of f (f->src and the extra sources) still has the bytes it had
 * when opened and no mapped byte of it was found missing; else TBX_E_TRUNCATED (api/file.c). */
tbx_status tbx_file_check_sources(const tbx_file *f, tbx_error *err);

/* A read-only view of [off, off+len) for one pass over bytes that need not be copied (checksums):
 * tbx_source_ptr's pointer for mapped/memory sources; for a pread source a temporary private
 * mapping, guarded as a mapped source's is (release it with tbx_view_release); NULL when neither
 * works (callback sources, mmap failure, no room to guard it): read with tbx_source_read then.
 * Check the bytes with tbx_view_check after the pass and before using its result. */
typedef struct tbx_view {
    const tbx_source *src;
    void *map;               /* a temporary mapping (NULL: the source's own bytes) */
    size_t map_len;
    uint64_t map_off;        /* file offset of map */
    int guard;
} tbx_view;
const uint8_t *tbx_source_view(const tbx_source *s, uint64_t off, uint64_t len, tbx_view *v);
/* tbx_source_check for bytes [off, off+len) read through the view (inside its range). */
tbx_status tbx_view_check(const tbx_view *v, uint64_t off, uint64_t len, const char *field,
                          tbx_error *err);
void tbx_view_release(tbx_view *v);

/* Guarded mappings (src/io/mapguard.c): every mapping of a file the library makes is registered
 * so that a fault past the end of a file that shrank reads zeros instead of killing the process.
 * tbx_mapguard_add: a slot for [base, base+len) (base page-aligned), -1 when none is free or the
 * SIGBUS handler cannot be installed (do not map then). tbx_mapguard_check after an access to
 * [0, end) of the mapping: 1 the bytes were the file's, 0 some were past its end, -1 unknown
 * (compare the file's size). tbx_mapguard_valid: bytes from base not found past the end. */
int tbx_mapguard_add(const void *base, size_t len);
void tbx_mapguard_remove(int slot);
int tbx_mapguard_check(int slot, size_t end);
/* The page size the guard uses (a power of two). */
size_t tbx_mapguard_page(void);
/* tbx_mapguard_check's answer for a mapping [base, base+len) with its `valid` length, inline
 * for the readers' hot paths: 1 when the bytes [0, end) were the file's, 0 or -1 as above. */
static inline int tbx_mapguard_probe(const uint8_t *base, size_t len, const _Atomic size_t *valid,
                                     size_t end, size_t page) {
    if (end == 0) return 1;
    /* the caller's reads of the range come before the loads below */
    atomic_thread_fence(memory_order_acquire);
    size_t v = atomic_load_explicit(valid, memory_order_acquire);
    if (end > v) return 0;
    const size_t probe = (end + page - 1) & ~(page - 1);
    if (probe >= len || probe >= v) return -1;
    (void)*(const volatile uint8_t *)(base + probe); /* faults (and is repaired) when past the end */
    atomic_thread_fence(memory_order_acquire);
    v = atomic_load_explicit(valid, memory_order_acquire);
    if (v > probe) return 1;
    return end > v ? 0 : -1;
}
size_t tbx_mapguard_valid(int slot);
const _Atomic size_t *tbx_mapguard_valid_ptr(int slot);
/* Faults repaired since the process started (tests). */
uint64_t tbx_mapguard_repairs_(void);

/* tbx_validate_path for a file in memory or behind a read callback (same contract; the open
 * options' allocator, limits, format and threads apply). Internal for now: the fuzz targets and
 * the fault-injection test run the validation pass on their inputs through these. */
tbx_status tbx_validate_memory_(const void *data, size_t size, const tbx_open_options *opt,
                                tbx_problem_fn cb, void *ud, uint64_t *nproblems);
tbx_status tbx_validate_callback_(tbx_read_at_fn read_at, void *read_ud, uint64_t size,
                                  const tbx_open_options *opt, tbx_problem_fn cb, void *ud,
                                  uint64_t *nproblems);

/* Internal open flag (never set by callers of the public API): open exactly the file named, not
 * a set it starts (a GGUF split set). The GGUF tools use it to edit/split/merge single shards. */
#define TBX_OPEN_SINGLE_FILE_ 0x80000000u

/* Registry of input files open through tbx_open_path (dev, ino), so that writers never
 * replace one (src/io/source.c). Thread-safe. */
bool tbx_inputs_contains(uint64_t dev, uint64_t ino);

/* ------------------------------------------------------------------------------------------ */
/* Cursor (src/io/cursor.c): the one bounds-checked reader every driver parses through.        */
/* Reads go through a window buffer over the source (or straight from memory when mapped).    */
/* Every read names its field; errors carry the field and the byte offset.                     */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_cursor {
    const tbx_source *src;
    uint64_t pos;            /* absolute file offset of the next byte */
    uint64_t end;            /* reads may not pass this offset (<= src->size) */
    bool big_endian;         /* multi-byte integer reads are byte-swapped when set */
    /* window (pread sources) */
    uint8_t *buf;
    size_t buf_cap;
    uint64_t buf_off;        /* file offset of buf[0] */
    size_t buf_len;          /* valid bytes in buf */
    const tbx_alloc *al;
} tbx_cursor;

/* Initialises a cursor over [start, end) of the source. */
tbx_status tbx_cursor_init(tbx_cursor *c, const tbx_source *src, const tbx_alloc *al,
                           uint64_t start, uint64_t end, tbx_error *err);
void tbx_cursor_free(tbx_cursor *c);
static inline uint64_t tbx_cursor_remaining(const tbx_cursor *c) { return c->end - c->pos; }
tbx_status tbx_cur_u8(tbx_cursor *c, uint8_t *v, const char *field, tbx_error *err);
tbx_status tbx_cur_u16(tbx_cursor *c, uint16_t *v, const char *field, tbx_error *err);
tbx_status tbx_cur_u32(tbx_cursor *c, uint32_t *v, const char *field, tbx_error *err);
tbx_status tbx_cur_u64(tbx_cursor *c, uint64_t *v, const char *field, tbx_error *err);
/* Copies n bytes out. */
tbx_status tbx_cur_bytes(tbx_cursor *c, void *dst, size_t n, const char *field, tbx_error *err);
/* Skips n bytes (checked against end). */
tbx_status tbx_cur_skip(tbx_cursor *c, uint64_t n, const char *field, tbx_error *err);
/* Checks that n more bytes exist without consuming them (TBX_E_TRUNCATED otherwise). Use before
 * allocating anything sized by a declared length. */
tbx_status tbx_cur_need(tbx_cursor *c, uint64_t n, const char *field, tbx_error *err);
/* Moves to absolute offset `pos` (must be <= end). */
tbx_status tbx_cur_seek(tbx_cursor *c, uint64_t pos, const char *field, tbx_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Output (src/io/output.c): atomic file writer. Bytes go to a temporary file created next to  */
/* the destination; tbx_out_commit() fsyncs and renames it over the destination. Symbolic     */
/* links are followed (the target is replaced, the link kept); only regular files are ever   */
/* replaced; an existing destination is flocked (LOCK_EX) from open through the rename.       */
/* ------------------------------------------------------------------------------------------ */
#define TBX_OUT_OVERWRITE 0x1u /* replace an existing (regular) file */
#define TBX_OUT_EDIT      0x2u /* replace the file an edit holds locked (tbx_edit_lock): it must
                                  exist, may be an open input, keeps its permission bits */
#define TBX_OUT_NO_SYNC   0x4u /* no fsync at commit, no early writeback (TBX_WRITE_NO_SYNC) */

typedef struct tbx_out {
    int fd;          /* the temporary file (flocked while it lives) */
    int lock_fd;     /* the existing destination, flocked LOCK_EX; -1: none */
    int slot;        /* entry in the table of live temporary files; -1: none */
    unsigned flags;  /* TBX_OUT_* */
    bool existed;    /* the destination existed at open: (dev, ino) must still be it at commit */
    uint64_t dev, ino;
    unsigned mode;   /* its permission bits */
    char *path;      /* destination, symbolic links resolved */
    char *tmp_path;  /* temporary file in the same directory */
    uint64_t size;   /* highest offset written so far */
    uint64_t wb_lo, wb_hi; /* bytes written since writeback was last started (output.c) */
    uint8_t *bounce;       /* tbx_out_copy_fd's buffer, kept until commit or abort */
    size_t bounce_cap;
    const tbx_alloc *al;
} tbx_out;

/* Fails with TBX_E_EXISTS when `path` exists and !TBX_OUT_OVERWRITE (a dangling symbolic link
 * counts as existing), when it is not a regular file, or when it names an open input. */
tbx_status tbx_out_open(tbx_out *o, const tbx_alloc *al, const char *path, unsigned flags,
                        tbx_error *err);
/* Writes len bytes at off (positional; unwritten gaps read as zero). */
tbx_status tbx_out_pwrite(tbx_out *o, uint64_t off, const void *data, size_t len, tbx_error *err);
/* Writes at off the len bytes of file descriptor in_fd that start at in_off (tensor bytes that
 * pass unchanged): copy_file_range when off and in_off are congruent modulo 64 KiB (the bytes
 * never enter this process; a file system that shares extents shares them); otherwise, or when
 * the kernel or the file systems cannot (ENOSYS, EXDEV, EINVAL, EOPNOTSUPP, ...) or
 * tbx_out_no_copy_range_ is set (tests), through 1 MiB pieces (pread + pwrite; from 16 MiB on, a
 * second thread reads the next pieces while this one writes). An input that
 * ends early is TBX_E_TRUNCATED; tbx_out_fault_hook_ is called before every piece. */
tbx_status tbx_out_copy_fd(tbx_out *o, uint64_t off, int in_fd, uint64_t in_off, uint64_t len,
                           tbx_error *err);
extern int tbx_out_no_copy_range_;
/* Reads back len bytes that were written at off (an error past the highest offset written). */
tbx_status tbx_out_pread(tbx_out *o, uint64_t off, void *buf, size_t len, tbx_error *err);
/* Writes `n` zero bytes at off. */
tbx_status tbx_out_zero(tbx_out *o, uint64_t off, uint64_t n, tbx_error *err);
/* Truncates/extends the temp file to `size` bytes, fsyncs, renames over the destination. */
tbx_status tbx_out_commit(tbx_out *o, uint64_t size, tbx_error *err);
/* Removes the temporary file (when not committed) and frees; accepts a zeroed struct. */
void tbx_out_abort(tbx_out *o);
/* Fault-injection hook for tests (tests/unit/test_faults.c), NULL otherwise: called before every
 * write of tensor/header bytes; a non-zero return fails that write with that errno. */
extern int (*tbx_out_fault_hook_)(void);
/* fsync calls made by commits (the file's and the directory's), for tests of TBX_OUT_NO_SYNC. */
extern _Atomic unsigned long tbx_out_syncs_;
/* The same for reads of path sources (tests/unit/test_faults.c): called before every pread of
 * tbx_source_read; a non-zero return fails that read with that errno. NULL otherwise. */
extern int (*tbx_src_fault_hook_)(void);

/* The lock of a file edited in place or rewritten (the GGUF editing tools): `path` resolved
 * through symbolic links, opened (read-write when permitted), flocked LOCK_EX and checked to be
 * the file the name refers to once the lock is held. Parse the file only after taking it (and
 * check that the parsed file is (dev, ino)); write in place through `fd`; replace it through a
 * writer opened on `path` with TBX_OUT_EDIT (TBX_WRITE_EDIT_) before unlocking. */
typedef struct tbx_edit {
    int fd;
    bool writable;   /* fd is open read-write */
    uint64_t dev, ino;
    char *path;      /* symbolic links resolved */
    const tbx_alloc *al;
} tbx_edit;
tbx_status tbx_edit_lock(tbx_edit *e, const tbx_alloc *al, const char *path, tbx_error *err);
void tbx_edit_unlock(tbx_edit *e);

/* Internal write flag, passed only through tbx_writer_open_ (the public tbx_writer_open
 * refuses every flag but TBX_WRITE_OVERWRITE): the destination is the file of a tbx_edit_lock
 * held by the caller (TBX_OUT_EDIT). */
#define TBX_WRITE_EDIT_ 0x80000000u
/* tbx_writer_open with internal flags (TBX_WRITE_EDIT_). */
tbx_status tbx_writer_open_(tbx_writer **out, const char *path, const tbx_write_options *opt,
                            uint32_t internal_flags, tbx_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Name index (src/core/names.c): hash set of byte strings -> index, for duplicate detection    */
/* and lookups. Sized by the number of inserted entries (never by declared counts).            */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_names {
    const tbx_alloc *al;
    uint32_t *slots;   /* (index + 1) per slot, 0 = empty; then a 32-bit hash per slot */
    size_t nslots;
    size_t count;
    /* key access: the index refers to caller storage */
    const char *(*key_of)(const void *ctx, uint64_t index, size_t *len);
    const void *ctx;
} tbx_names;

void tbx_names_init(tbx_names *n, const tbx_alloc *al,
                    const char *(*key_of)(const void *ctx, uint64_t index, size_t *len),
                    const void *ctx);
void tbx_names_free(tbx_names *n);
/* Inserts `index` (whose key is key_of(index)). Returns TBX_E_DUPLICATE (and *existing gets the
 * earlier index, when not NULL) if the key is already present; TBX_E_NOMEM on OOM. */
tbx_status tbx_names_insert(tbx_names *n, uint64_t index, uint64_t *existing);
/* Sizes the table for `count` entries at once (no growth before then); TBX_E_NOMEM on OOM.
 * Indices must be below 2^32 - 1 (TBX_E_INVALID_ARG from insert otherwise). */
tbx_status tbx_names_reserve(tbx_names *n, size_t count);
/* Finds a key; returns true and *index when present. */
bool tbx_names_find(const tbx_names *n, const char *key, size_t len, uint64_t *index);
uint64_t tbx_hash_bytes(const void *p, size_t n);

/* ------------------------------------------------------------------------------------------ */
/* Values (src/core/value.c)                                                                   */
/* ------------------------------------------------------------------------------------------ */
struct tbx_value {
    tbx_value_type type;
    tbx_value_type elem;          /* ARRAY: declared element type (TBX_V_NULL: any) */
    union {
        uint64_t u;               /* BOOL, U8..U64 */
        int64_t i;                /* I8..I64 */
        double f;                 /* F16..F64 (F16/BF16/F32 hold the exactly widened value) */
        struct { char *p; size_t n; } s;            /* STRING, BYTES (p NUL-terminated) */
        struct {                                    /* ARRAY, MAP */
            tbx_value **items;    /* ARRAY of non-scalars or MAP values; NULL for packed arrays */
            char **keys;          /* MAP keys (NUL-terminated copies) */
            size_t *key_lens;
            void *packed;         /* ARRAY of fixed-size scalars: native-endian elements */
            size_t n, cap;
            tbx_value **cache;    /* tbx_value_at on packed arrays: materialised on demand */
            /* ARRAY of strings built compactly (tbx_val_str_array): string i is
             * sblob[off(i) .. off(i+1)-1), NUL-terminated; soff has n+1 entries (cap+1
             * allocated) of soff_w bytes (4 when the blob stays below 4 GiB, else 8). items and
             * packed are NULL then. */
            char *sblob;
            size_t sblob_len, sblob_cap;
            void *soff;
            unsigned soff_w;
        } a;
        struct {                                    /* NDARRAY, BITSET */
            tbx_dtype dtype;      /* NDARRAY element dtype */
            uint32_t ndim;
            uint64_t *shape;
            uint8_t *data;
            size_t nbytes;
            uint64_t count;       /* elements (BITSET: bits) */
        } nd;
    } v;
    const tbx_alloc *al;          /* allocator that owns this value */
};

/* Allocator-aware constructors used by drivers (values owned by a handle). */
tbx_value *tbx_val_new(const tbx_alloc *al, tbx_value_type t);
tbx_value *tbx_val_string(const tbx_alloc *al, tbx_value_type t, const void *p, size_t n);
/* A packed ARRAY of `n` fixed-size scalars of type `elem` with storage for them (uninitialised);
 * the caller fills tbx_value_data() bytes in native endianness. */
tbx_value *tbx_val_packed_array(const tbx_alloc *al, tbx_value_type elem, size_t n);
/* A compact ARRAY of strings (elem TBX_V_STRING) with room for `n` strings whose bytes total at
 * most `max_bytes`, holding none yet: one offsets array and one byte blob instead of one value per
 * string. Fill it with tbx_val_str_array_add, then call tbx_val_str_array_done. */
tbx_value *tbx_val_str_array(const tbx_alloc *al, size_t n, uint64_t max_bytes);
/* Appends a string of `len` bytes (at most `n` strings and `max_bytes` in all, as promised at
 * creation): returns where to put its bytes (the NUL after them is already written), NULL on OOM
 * or past the promise. */
char *tbx_val_str_array_add(tbx_value *v, size_t len);
/* Gives back the blob's unused capacity. */
void tbx_val_str_array_done(tbx_value *v);
/* Is v an ARRAY whose items are strings stored compactly? */
static inline bool tbx_val_is_str_array(const tbx_value *v) {
    return v && v->type == TBX_V_ARRAY && v->v.a.soff != NULL;
}
void tbx_val_free(tbx_value *v);
/* Element i of a packed ARRAY as a scalar in *out (no allocation, nothing cached: tbx_value_at
 * keeps a value node per element it is asked for, ~150 bytes for a 1-byte element); false
 * when arr is not a packed array or i is out of range. */
bool tbx_val_packed_get(const tbx_value *arr, size_t i, tbx_value *out);
tbx_value *tbx_val_clone(const tbx_alloc *al, const tbx_value *v);
/* Byte size of a fixed-size scalar value type (BOOL 1, U8 1, ..., F64 8); 0 for others. */
size_t tbx_value_scalar_size(tbx_value_type t);
bool tbx_value_type_is_int(tbx_value_type t);
bool tbx_value_type_is_float(tbx_value_type t);

/* ------------------------------------------------------------------------------------------ */
/* The common model of an open file (src/api/file.c)                                          */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_meta_entry {
    char *key;           /* NUL-terminated copy */
    size_t key_len;
    tbx_value *value;
    bool borrowed;       /* writer only: key and value are the caller's (not freed) */
} tbx_meta_entry;

typedef struct tbx_component {
    const char *name;        /* static storage (a role name: "data", "indices", ...) */
    tbx_dtype dtype;
    uint32_t src;            /* source holding the bytes: 0 f->src, k > 0 f->extra_src[k-1] */
    uint64_t nelems;
    uint64_t offset;         /* absolute */
    uint64_t stored_bytes;
    uint64_t nbytes;         /* decoded */
    tbx_encoding encoding;
    char *digest;            /* NULL when none */
} tbx_component;

typedef struct tbx_tensor {
    /* 64 bytes: a handle of a million tensors holds a million of these. */
    char *name;
    uint64_t *shape;         /* row-major */
    uint64_t nelems;
    tbx_component *comp;     /* ncomp entries */
    void *drv;               /* driver-private per tensor data (owned by the driver) */
    /* How the tensor is quantized (tbx_tensor_quant_get), NULL when it is not. Made with
     * tbx_file_quant_new and owned by the handle; several tensors may share one. */
    const tbx_quant_info *quant;
    uint32_t name_len;       /* tbx_file_add_tensor refuses names of 4 GiB or more */
    tbx_dtype dtype;
    uint32_t ndim;
    uint8_t layout;          /* a tbx_layout */
    uint8_t ncomp;           /* tbx_file_add_tensor refuses more than 255 components */
    /* Set by the driver for a tensor it lists but cannot give the values of (MCF int8/int4
     * codes stored without their scale): every read of it fails with the driver's error (its
     * raw_pending/check_component say why), tbx_validate reports it, and tbx_convert refuses
     * it naming it unless TBX_CONVERT_DROP_UNREADABLE leaves it out. */
    uint8_t unreadable;
} tbx_tensor;

typedef struct tbx_section {
    char *name;
    uint32_t type;
    uint32_t src;            /* source holding the bytes: 0 f->src, k > 0 f->extra_src[k-1] */
    uint64_t offset;
    uint64_t size;
} tbx_section;

typedef struct tbx_driver tbx_driver;

struct tbx_file {
    tbx_alloc al;
    tbx_limits limits;
    uint32_t flags;               /* TBX_OPEN_* */
    tbx_source src;
    char *path;                   /* copy of the path given to tbx_open_path, NULL otherwise */
    tbx_source *extra_src;        /* further sources owned by the handle (e.g. the other shards */
    size_t nextra_src;            /* of a GGUF split set), closed by tbx_close */
    char **part_names;            /* NULL, or 1 + nextra_src names of f->src and the extra
                                     sources (tbx_file_part_path; NULL entries allowed), made
                                     with f->al, freed by tbx_close */
    const tbx_driver *drv;
    tbx_format format;
    uint32_t version;
    tbx_problem_fn on_problem;    /* may be NULL: problems are then fatal */
    void *problem_ud;
    uint64_t nproblems;           /* problems passed to on_problem so far */
    tbx_status first_problem;     /* the code of the first of them (tbx_validate) */
    void *problem_lock;           /* a pthread mutex while worker threads read (tbx_read_batch) */
    uint32_t threads;             /* tbx_open_options.threads (0: tbx_threads_default()) */

    tbx_meta_entry *meta; size_t nmeta, cap_meta; tbx_names meta_names;
    tbx_tensor *tensors;  size_t ntensors, cap_tensors; tbx_names tensor_names;
    tbx_section *sections; size_t nsections, cap_sections;
    /* The amplification budget (tbx_limits.meta_budget_*, model.c): bytes charged so far, bytes
     * of a metadata value being built (settled by tbx_file_add_meta), and the last budget
     * computed (it only grows, as the handle opens more sources). */
    uint64_t budget_used, budget_pending, budget_cap;
    struct tbx_quant_rec **quants; size_t nquants, cap_quants; /* tbx_file_quant_new */
    /* The tensors' blocks (components, shape, name) are carved from chunks (4 KiB doubling to
     * 1 MiB; freed by tbx_close): no allocator overhead per tensor. */
    struct tbx_chunk *chunks;
    uint8_t *chunk_ptr;
    size_t chunk_left;

    void *drv_state;              /* driver-private, freed by drv->close */
};

/* Model building (model.c: below the drivers, above the foundation). */
void tbx_file_model_init(tbx_file *f); /* the name indexes (new handle) */
void tbx_file_model_free(tbx_file *f); /* metadata, tensors, sections, quantization records */
/* Adds a metadata entry; takes ownership of `value` (freed on failure). TBX_E_DUPLICATE with a
 * message naming the key and `offset` when the key exists; TBX_E_LIMIT past max_metadata_entries. */
tbx_status tbx_file_add_meta(tbx_file *f, const char *key, size_t key_len, tbx_value *value,
                             uint64_t offset, tbx_error *err);
/* Adds a tensor (name copied, shape copied) with `ncomp` zeroed components to fill in; checks
 * duplicates, max_tensors, max_ndim and computes nelems with overflow checks. *out gets the
 * tensor (pointer valid until the next add). */
tbx_status tbx_file_add_tensor(tbx_file *f, const char *name, size_t name_len, tbx_dtype dtype,
                               const uint64_t *shape, uint32_t ndim, uint32_t ncomp,
                               uint64_t offset, tbx_tensor **out, tbx_error *err);
/* Bytes of a caller's versioned struct this library reads or writes: its struct_size when that
 * is a shorter, older version, else this version's `full` size (0 means all of this version). */
static inline size_t tbx_struct_bytes(uint32_t struct_size, size_t full) {
    return struct_size && struct_size < full ? struct_size : full;
}
/* Makes component 0 of t (added by tbx_file_add_tensor) the tensor's whole data, stored as it
 * is: "data", `dtype`, t->nelems elements, `nbytes` raw bytes at file `offset` (the component's
 * source stays 0 unless the caller sets it). */
void tbx_comp_set_raw(tbx_tensor *t, tbx_dtype dtype, uint64_t offset, uint64_t nbytes);
/* Room for n tensors in all (table and name index sized at once, no growth slack): for a
 * driver that knows its count before adding. */
tbx_status tbx_file_reserve_tensors(tbx_file *f, size_t n, tbx_error *err);
/* The dtype entry a tensor of this handle may have: the core table's, or the one the handle's
 * own driver declares (never another driver's); NULL otherwise. */
const tbx_dtype_info *tbx_file_dtype(const tbx_file *f, tbx_dtype dtype);
tbx_status tbx_file_add_section(tbx_file *f, const char *name, uint32_t type, uint64_t offset,
                                uint64_t size, tbx_error *err);
/* tbx_file_add_section for bytes in source `src` (0: f->src, k: f->extra_src[k-1]). */
tbx_status tbx_file_add_section_in(tbx_file *f, const char *name, uint32_t type, uint32_t src,
                                   uint64_t offset, uint64_t size, tbx_error *err);
/* Section i's bytes read whole into a new buffer (*len bytes; give it back with
 * tbx_free(&f->al, *buf, *len ? *len : 1)), after checking the size against
 * f->limits.max_side_file_bytes: a larger section fails with TBX_E_LIMIT naming it, its size and
 * the limit. Every reader of a whole side file (tbx_convert's sections, the Hugging Face ->
 * GGUF conversion) goes through it, so one limit applies everywhere. */
tbx_status tbx_section_load_(tbx_file *f, uint64_t i, void **buf, size_t *len, tbx_error *err);
/* The source a component's or a section's `src` names (0: f->src, k: f->extra_src[k-1]); NULL
 * when out of range. Tensor and section bytes are read through it. */
const tbx_source *tbx_file_source(const tbx_file *f, uint32_t src);
/* Are component k's decoded bytes its stored bytes, served straight from the source (range
 * reads, maps)? Raw encoding, unless the driver transforms raw bytes (big-endian GGUF). */
bool tbx_comp_served_raw(const tbx_file *f, const tbx_component *k);
/* The amplification budget (tbx_limits.meta_budget_per_byte and _base): every byte a handle
 * holds decoded from its files (metadata, names, shapes, tables) is charged here, before it is
 * allocated where it can be. tbx_file_add_meta, _add_tensor and _add_section charge what they
 * store (a metadata value by its tbx_val_footprint); a reader charges what it builds on its own
 * (its tables, a value it expands before adding it). Past the budget: TBX_E_LIMIT naming `field`
 * and `offset`. The budget is meta_budget_per_byte x the bytes of every source the handle has
 * opened so far + meta_budget_base (*declared gets those bytes when not NULL). */
uint64_t tbx_file_budget(const tbx_file *f, uint64_t *declared);
tbx_status tbx_file_charge(tbx_file *f, uint64_t bytes, uint64_t offset, const char *field,
                           tbx_error *err);
/* After a driver opened f: the tensors' stored bytes, counted once per tensor, must stay within
 * the input's own bytes plus the budget (tensors that share bytes, as MCF and OINF allow, make
 * every copy, conversion and validation repeat them). TBX_E_LIMIT at the first tensor past it. */
tbx_status tbx_file_check_shared_data(tbx_file *f, tbx_error *err);
/* Gives back `bytes` charged by tbx_file_charge for a table the reader has freed (a table it
 * builds while it reads and drops once the model holds the same facts). */
void tbx_file_uncharge(tbx_file *f, uint64_t bytes);
/* For a metadata value being built: adds `bytes` to what it is expected to cost and fails like
 * tbx_file_charge when that would not fit. tbx_file_add_meta then charges the value's real
 * footprint in its place. */
tbx_status tbx_file_charge_pending(tbx_file *f, uint64_t bytes, uint64_t offset,
                                   const char *field, tbx_error *err);
/* The bytes a value holds (heap blocks with an allocator's usual overhead, its items, keys and
 * cache), as charged to a budget. */
uint64_t tbx_val_footprint(const tbx_value *v);
/* Bookkeeping bytes of one heap block, added to each block a footprint counts. */
#define TBX_HEAP_OVERHEAD 16u
/* Reports a recoverable problem: with on_problem set it is passed on and TBX_OK returned (the
 * caller continues); without, it is copied to *err and its code returned (the caller stops). */
tbx_status tbx_file_problem(tbx_file *f, tbx_error *err, tbx_status code, uint64_t offset,
                            const char *field, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Quantization descriptions (src/core/quant.c). Drivers describe a quantized tensor with a
 * tbx_quant_info made here and attach it (t->quant = q); tbx_close frees them all.
 * tbx_file_quant_new: a zeroed description owned by f (struct_size set, scale/zero components
 * -1, params an empty MAP), NULL on OOM. */
tbx_quant_info *tbx_file_quant_new(tbx_file *f);
/* Charges what one description made by tbx_file_quant_new costs (with a few params) to the
 * handle's budget (tbx_file_charge), for a driver that makes one per tensor; the values
 * (tbx_file_quant_values) are the driver's to charge. */
tbx_status tbx_file_charge_quant(tbx_file *f, uint64_t offset, const char *field,
                                 tbx_error *err);
/* Storage for the values of p (a member of q): nbytes bytes owned with q; sets p->values and
 * returns the writable pointer, NULL on OOM. At most one call per member. */
void *tbx_file_quant_values(tbx_file *f, tbx_quant_info *q, tbx_quant_param *p, size_t nbytes);
/* Adds a format-specific parameter to q->params (takes ownership of v, also on failure; v must
 * be made with the handle's allocator). TBX_E_NOMEM / TBX_E_DUPLICATE. */
tbx_status tbx_quant_put(tbx_quant_info *q, const char *key, tbx_value *v);
tbx_status tbx_quant_put_u32(tbx_file *f, tbx_quant_info *q, const char *key, uint32_t v);
void tbx_file_quant_free(tbx_file *f);
/* Checks a caller's description (tbx_writer_add_quant_tensor) of tensor `tensor` (shape, ndim) before a writer keeps it:
 * struct_size at least this version's, a known method, scopes and counts that fit the shape
 * (TENSOR: 1; CHANNEL: shape[axis], axis < ndim; GROUP: rows x ceil(cols / block_size)), values
 * of a core byte-sized dtype when given,
 * params a MAP or NULL. TBX_E_INVALID_ARG naming the member otherwise. */
tbx_status tbx_quant_desc_check(const tbx_quant_info *q, const uint64_t *shape, uint32_t ndim,
                                const char *tensor, tbx_error *err);
/* A deep copy of a checked description (values and params copied; params an empty MAP when q
 * has none), made with al; NULL on OOM. tbx_quant_clone_free frees it (accepts NULL). */
tbx_quant_info *tbx_quant_clone(const tbx_alloc *al, const tbx_quant_info *q);
void tbx_quant_clone_free(const tbx_alloc *al, tbx_quant_info *q);

/* ------------------------------------------------------------------------------------------ */
/* The writer's common state (src/api/writer.c)                                               */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_wtensor {
    /* 40 bytes: a writer of a million tensors holds a million of these. */
    char *name;
    uint64_t *shape;
    uint64_t nbytes;       /* stored bytes expected from the caller */
    uint64_t offset;       /* absolute offset assigned by the driver's layout() */
    uint32_t name_len;     /* tbx_writer_add_tensor refuses names of 4 GiB or more, */
    uint16_t ndim;         /* more than 65535 dimensions */
    uint8_t dtype;         /* (a tbx_dtype) and dtype values above 255 */
    bool has_data : 1;
    bool done : 1;         /* all bytes received and w_tensor_done called */
    /* The bytes received so far are w->cur_written for the tensor being written (w->current),
     * nbytes for a done one, 0 otherwise: only one tensor is ever partly written. */
} tbx_wtensor;

/* A declared tensor's element count (its product was checked for overflow when declared). */
static inline uint64_t tbx_wt_nelems(const tbx_wtensor *t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

typedef struct tbx_wsection {
    char *name;
    uint32_t type;
    uint8_t *data;
    size_t len;
} tbx_wsection;

/* A declared tensor's quantization description (tbx_writer_add_quant_tensor); drivers read
 * w->quants (by increasing index) or tbx_writer_tensor_quant_. */
struct tbx_wquant {
    uint64_t index;            /* the tensor */
    const tbx_quant_info *q;   /* checked (tbx_quant_desc_check) and accepted by the driver */
    bool owned;                /* a copy made by the writer (else the converted file's own) */
};

typedef enum tbx_wstate { TBX_WS_DECLARE, TBX_WS_DATA, TBX_WS_DONE } tbx_wstate;

struct tbx_writer {
    tbx_alloc al;
    tbx_write_options opt;
    tbx_format format;
    const tbx_driver *drv;
    tbx_out out;
    tbx_wstate state;
    tbx_meta_entry *meta; size_t nmeta, cap_meta; tbx_names meta_names;
    tbx_wtensor *tensors; size_t ntensors, cap_tensors; tbx_names tensor_names;
    tbx_wsection *sections; size_t nsections, cap_sections;
    /* Quantization descriptions of declared tensors (tbx_writer_add_quant_tensor), by increasing
     * tensor index; only quantized tensors have an entry (tbx_wtensor stays 40 bytes). */
    struct tbx_wquant *quants; size_t nquants, cap_quants;
    bool borrow_descs;      /* tbx_writer_borrow_descs_: names and shapes are the caller's */
    const tbx_names *lent_names; /* tbx_writer_borrow_descs_: the caller's index of the same
                                    names (tensor i of the writer is entry i); NULL: own index */
    int64_t current;        /* tensor being written, -1 when none */
    uint64_t cur_written;   /* bytes of it received before the chunk being handed over */
    uint64_t end;           /* file size the driver will commit (set by layout/finish) */
    /* tbx_writer_set_source_dir_: the base name of the model directory the tensors come from
     * (tbx_convert of a Hugging Face directory), NUL-terminated; NULL otherwise. A writer that
     * records a model name or follows a directory packer (MCF: mantle's pack) reads it. */
    char *src_dir;
    void *drv_state;
};

/* For a caller whose tensor names and shapes outlive the writer (tbx_convert: the input handle
 * stays open until finish or abort): the writer keeps pointers to them instead of copies, and
 * sizes its table for n tensors at once. `names` (may be NULL: the writer builds its own index)
 * is the caller's index of exactly the names it will add, in order (entry i is the i-th tensor
 * added; the names are distinct): the writer then keeps no index of its own and checks no
 * duplicates. Call before the first tensor. */
tbx_status tbx_writer_borrow_descs_(tbx_writer *w, size_t n, const tbx_names *names,
                                    tbx_error *err);
/* Records the base name of the input's model directory (see tbx_writer.src_dir; a copy). Call
 * before the first metadata entry, section or tensor. */
tbx_status tbx_writer_set_source_dir_(tbx_writer *w, const char *name, size_t len, tbx_error *err);
/* The quantization description given for declared tensor `index` (tbx_writer_add_quant_tensor),
 * NULL when none; valid until the writer is freed. For drivers' w_check_quant / layout. */
const tbx_quant_info *tbx_writer_tensor_quant_(const tbx_writer *w, uint64_t index);
/* Finds a declared tensor of the writer by name (through its own or the lent index). */
bool tbx_writer_find_tensor_(const tbx_writer *w, const char *name, size_t len, uint64_t *index);
/* Would tbx_writer_add_section take a section of this name, type and length? (its checks, the
 * driver's w_check_section included, without the bytes: tbx_convert asks before reading one) */
tbx_status tbx_writer_check_section_(tbx_writer *w, const char *name, uint32_t type,
                                     size_t len, tbx_error *err);
/* tbx_writer_add_meta for a caller whose key and value outlive the writer (tbx_convert): the
 * writer keeps pointers to them instead of copies. */
tbx_status tbx_writer_add_meta_borrowed_(tbx_writer *w, const char *key, size_t key_len,
                                         const tbx_value *value, tbx_error *err);

/* Tensor bytes that pass unchanged from an input file: tbx_writer_write_tensor's rules and
 * checks, the len bytes of `fd` at fd_off copied by tbx_out_copy_fd (in the kernel). Only for
 * a writer whose driver does not look at the bytes (no w_data: tbx_writer_copies_fd_). */
bool tbx_writer_copies_fd_(const tbx_writer *w);
tbx_status tbx_writer_copy_fd_(tbx_writer *w, uint64_t index, int fd, uint64_t fd_off,
                               uint64_t len, tbx_error *err);
/* Bytes [pos, pos + len) of dense tensor `i` of `in`, as stored, appended to tensor `wi` of `w`
 * (writer.c): copied in the kernel when the input's component is raw bytes of a file with
 * nothing left to check (tbx_comp_served_raw, no pending digest) and the writer takes copies,
 * else read into buf (cap bytes, > 0) piece by piece and written. */
tbx_status tbx_writer_copy_range_(tbx_file *in, uint64_t i, uint64_t pos, uint64_t len,
                                  tbx_writer *w, uint64_t wi, void *buf, size_t cap,
                                  tbx_error *err);
/* The descriptor and file offset of bytes [pos, pos + len) of tensor i when they can be copied
 * from the file as they are: one raw component of a path source, no check pending (file.c). */
bool tbx_file_fd_range_(const tbx_file *in, uint64_t i, uint64_t pos, uint64_t len, int *fd,
                        uint64_t *off);

/* ------------------------------------------------------------------------------------------ */
/* Format drivers (src/formats/<fmt>.c). Registered in src/core/registry.c.                    */
/* ------------------------------------------------------------------------------------------ */
/* The contract: everything core knows about a format comes from its row below; a format is
 * its driver files (reader, writer, common helpers, <fmt>_driver.c holding the row) plus one
 * entry in tbx_drivers[] (src/core/registry.c). */
struct tbx_driver {
    /* Identity, read by the registry (tbx_format_name/_from_name/_from_path, tbx_format_caps_get).
     * A format value without a driver is "unknown" everywhere. */
    tbx_format format;
    const char *name;
    const char *aliases;     /* other names for tbx_format_from_name, space-separated; NULL: none */
    const char *extensions;  /* space-separated, e.g. ".safetensors"; the first is the usual one */
    /* Capabilities (tbx_format_caps). TBX_FCAP_READ/WRITE/SECTIONS/SIZEVARS are derived from
     * the hooks (open, w_layout, w_check_section, sizevar_count/w_add_sizevar); `caps` holds
     * the rest (TBX_FCAP_NO_DATA, _COMPRESSION, _DIGESTS). */
    uint32_t caps;
    uint32_t read_versions;  /* bit v: version v can be read (bit 0: unversioned format) */
    uint32_t write_versions; /* bit v: version v can be written */
    uint32_t write_version;  /* the default written version */
    /* Metadata value types the writer stores as such (bit 1 << tbx_value_type); the driver's
     * w_check_meta refuses the others from this same mask (tbx_driver_meta_ok). */
    uint64_t meta_types;
    /* Can the writer store tensors of this dtype (at some shape)? w_check_tensor uses the same
     * function. NULL: read-only format. */
    bool (*w_dtype_ok)(tbx_dtype dtype);
    /* true: tbx_writer_add_tensor leaves the w_dtype_ok refusal of an element dtype (not a block
     * or shaped one, which cannot even be sized) to w_check_tensor, because the
     * writer may accept and drop a tensor it does not store (EMBD from a Hugging Face model
     * drops embeddings.position_ids, an i64 buffer, by name) */
    bool w_dtype_in_check;

    /* Driver-specific dtypes (TBX_DTF_SHAPED): the entries tbx_dtype_get returns for them (the
     * values must be reserved in tensorbox.h) and their stored size, computed from the whole
     * shape (checked arithmetic: TBX_E_OVERFLOW, TBX_E_FORMAT for a shape the dtype cannot
     * have). tbx_dtype_nbytes_shape asks this hook; core has no size rule of its own for them. */
    const tbx_dtype_info *dtypes;
    size_t ndtypes;
    tbx_status (*dtype_nbytes)(tbx_dtype dtype, const uint64_t *shape, uint32_t ndim,
                               uint64_t *out);

    /* Optional: size variables (tbx_sizevar_count/get read them from an open file of this
     * driver; tbx_writer_add_sizevar hands them to its writer). NULL: the format has none. */
    uint64_t (*sizevar_count)(const tbx_file *f);
    tbx_status (*sizevar_get)(const tbx_file *f, uint64_t i, const char **name,
                              size_t *name_len, uint64_t *value);
    tbx_status (*w_add_sizevar)(tbx_writer *w, const char *name, uint64_t value,
                                tbx_error *err);

    /* Reading. probe: does `head` (first `len` bytes, len >= min(64, size)) look like ours? */
    bool (*probe)(const uint8_t *head, size_t len, uint64_t file_size);
    /* Parses the file into f (meta/tensors/sections/version); drv_state as needed. */
    tbx_status (*open)(tbx_file *f, tbx_error *err);
    /* Optional: a model kept as several files and named by a path that is not itself a file of
     * the format: a directory, or a set's index file (the safetensors driver: a Hugging Face
     * model directory, `*.safetensors.index.json`). claims_path looks only at the name and, for
     * a directory (is_dir), at the names of its entries: is this the driver's set? tbx_open_path
     * asks every driver (in registry order, only the forced one when the options name a format)
     * before it opens anything; the first that claims the path gets open_path, with f->path set
     * and f->src not opened: the driver opens f->src (the file whose byte offsets its errors
     * name, e.g. the index) and any extra sources itself, then fills f as open does. */
    bool (*claims_path)(const char *path, bool is_dir);
    tbx_status (*open_path)(tbx_file *f, tbx_error *err);
    /* Optional: read the decoded bytes of an encoded component (buf has exactly comp->nbytes
     * bytes), and of a raw one while raw_pending says it still has a check to pass. Raw
     * components are otherwise served by the core straight from the source (pread, range
     * reads, tbx_tensor_map). May run on several threads at once for distinct components. */
    tbx_status (*read_component)(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                                 tbx_error *err);
    /* Optional: decoded bytes [pos, pos + len) of an encoded component (range checked by the
     * core, any pending check run first), in bounded memory: the driver keeps a decoding
     * cursor per component so that a read starting where the previous one ended continues
     * instead of decoding again from the first byte (a backwards read starts over). Serves
     * tbx_component_read_range / tbx_tensor_read_range and the chunks of tbx_tensor_read_f32.
     * Called only on the thread using the handle, never from tbx_read_batch's workers. NULL:
     * encoded components cannot be range-read (tbx_tensor_read_f32 then decodes them whole). */
    tbx_status (*read_component_range)(tbx_file *f, const tbx_tensor *t, uint32_t c,
                                       uint64_t pos, void *buf, size_t len, tbx_error *err);
    /* Optional: does raw component c still need the driver to look at its bytes (zTensor: a
     * digest to verify)? Full reads then go through read_component (checked while copied);
     * range reads, maps and f32 decoding call check_raw first. NULL: never. */
    bool (*raw_pending)(const tbx_file *f, const tbx_tensor *t, uint32_t c);
    /* Optional: decode and check component c in bounded memory, discarding the bytes (digests,
     * exact decoded size). Called by tbx_validate for encoded and pending components, and
     * before a raw component with a pending check is mapped, range-read or decoded to f32.
     * NULL: tbx_validate reads such components whole. */
    tbx_status (*check_component)(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err);
    /* Optional: tbx_read_batch offers the whole (checked-in-shape) request array here first.
     * The driver may serve it in one pass of its own (EMBD: read the data region in file order
     * into the callers' buffers and verify the data CRC over those very bytes): it then sets
     * *handled, the status (and error) of every request, and returns TBX_OK or an error of the
     * whole call. Leaving *handled false declines: the core reads the requests as usual. */
    tbx_status (*read_batch)(tbx_file *f, tbx_read_req *reqs, size_t n, uint32_t threads,
                             bool *handled, tbx_error *err);
    /* true: read_component transforms raw components too (big-endian GGUF swaps bytes), so raw
     * bytes are never served straight from the source (no maps, no range reads). */
    bool read_transforms_raw;
    /* Optional: decode elements [first, first+count) of tensor i to f32, row-major. The
     * contract: tbx_tensor_read_f32 (index and range already checked, out non-NULL when
     * count > 0) routes here every tensor that is not a single dense component (sparse,
     * quantized group) and every dense tensor whose dtype has no core decoder (TBX_DTF_SHAPED,
     * or TBX_DTF_BLOCK without a registered dequantizer): having the hook claims them, so the
     * driver must decode them or fail with a specific error (TBX_E_UNSUPPORTED naming the
     * dtype), and must not call tbx_tensor_read_f32 on them (that would come back here).
     * Dense tensors of core-decodable dtypes never come here. NULL: such tensors cannot be
     * decoded (TBX_E_UNSUPPORTED). */
    tbx_status (*read_f32)(tbx_file *f, uint64_t i, uint64_t first, uint64_t count, float *out,
                           tbx_error *err);
    /* Optional: deep checks run by tbx_validate after open (every problem via
     * tbx_file_problem). */
    tbx_status (*validate)(tbx_file *f, tbx_error *err);
    void (*close)(tbx_file *f);

    /* Writing. NULL write hooks mean the format is read-only. */
    /* May the format store this metadata value? TBX_E_UNSUPPORTED/TBX_E_LOSSY otherwise. */
    tbx_status (*w_check_meta)(tbx_writer *w, const char *key, size_t key_len,
                               const tbx_value *v, tbx_error *err);
    /* May the format store this section? NULL: the format has no sections. */
    tbx_status (*w_check_section)(tbx_writer *w, const char *name, uint32_t type, size_t len,
                                  tbx_error *err);
    /* May the format store this tensor? Sets t->nbytes when the table cannot. */
    tbx_status (*w_check_tensor)(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
    /* Optional: may the format store the quantization description q of tensor t (given with
     * tbx_writer_add_quant_tensor, called after w_check_tensor accepted t; may change t->nbytes)?
     * TBX_E_UNSUPPORTED / TBX_E_LOSSY naming the tensor and what cannot be stored; TBX_OK
     * means the writer stores q exactly. The writer keeps q (a copy, or the converted file's
     * own description) until w_free: drivers read it back with tbx_writer_tensor_quant_.
     * NULL: the format stores no descriptions; core then accepts only TBX_QUANT_GGML with
     * code_dtype == the tensor's dtype (the block type is the description) and refuses the
     * rest with TBX_E_UNSUPPORTED. */
    tbx_status (*w_check_quant)(tbx_writer *w, tbx_wtensor *t, const tbx_quant_info *q,
                                tbx_error *err);
    /* Called once before the first tensor byte (or at finish): assign every t->offset, write
     * headers, set w->end to the final file size when already known. */
    tbx_status (*w_layout)(tbx_writer *w, tbx_error *err);
    /* Optional: receive tensor data. NULL: pwrite at t->offset + t->written. */
    tbx_status (*w_data)(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                         tbx_error *err);
    /* Optional: a tensor got all its bytes. */
    tbx_status (*w_tensor_done)(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
    /* Optional: write trailers; set w->end. */
    tbx_status (*w_finish)(tbx_writer *w, tbx_error *err);
    /* Optional: free drv_state (and per-tensor drv). */
    void (*w_free)(tbx_writer *w);
};

/* All drivers, in probe order; NULL-terminated. */
extern const tbx_driver *const tbx_drivers[];
const tbx_driver *tbx_driver_for(tbx_format format);
/* Bit of a tbx_value_type in tbx_driver.meta_types / tbx_format_caps.meta_types. */
#define TBX_VBIT(t) ((uint64_t)1 << (t))
/* May driver d's writer store a metadata value of type t (its meta_types mask)? */
static inline bool tbx_driver_meta_ok(const tbx_driver *d, tbx_value_type t) {
    return (unsigned)t < 64 && (d->meta_types >> (unsigned)t & 1u);
}
/* tbx_format_caps.flags of a driver (declared bits plus those its hooks imply). */
uint32_t tbx_driver_caps(const tbx_driver *d);
/* The driver declaring driver-specific dtype `dt` among `drivers` (NULL-terminated), and its
 * entry (*info, may be NULL); NULL when none does (dtype.c). tbx_dtype_get/_nbytes_shape
 * (registry.c) pass tbx_drivers, tbx_file_add_tensor the handle's own driver, tests their own. */
const tbx_driver *tbx_dtype_driver_in(const tbx_driver *const *drivers, tbx_dtype dt,
                                      const tbx_dtype_info **info);
/* The core dtype table (dtype.c, foundation: it never looks at the drivers). The public lookups
 * tbx_dtype_get / _from_name / _nbytes / _nbytes_shape (registry.c) consult it first, then the
 * drivers' dtypes. */
const tbx_dtype_info *tbx_dtype_core_get(tbx_dtype dtype); /* NULL: not a core dtype */
tbx_dtype tbx_dtype_core_from_name(const char *name);      /* core names; INVALID otherwise */
tbx_dtype tbx_dtype_alias_from_name(const char *name);     /* "f4", "complex64", ... */
bool tbx_dtype_name_eq(const char *a, const char *b);      /* ASCII case-insensitive */
/* Size rules of a non-shaped entry: nelems elements; a row-major shape (the last dimension holds
 * whole blocks). TBX_E_UNSUPPORTED for TBX_DTF_SHAPED entries, TBX_E_INVALID_ARG for NULL. */
tbx_status tbx_dtype_info_nbytes(const tbx_dtype_info *e, uint64_t nelems, uint64_t *out);
tbx_status tbx_dtype_info_nbytes_shape(const tbx_dtype_info *e, const uint64_t *shape,
                                       uint32_t ndim, uint64_t *out);
/* The size rules of a core dtype (drivers' reading hooks: they do not look up other drivers).
 * TBX_E_INVALID_ARG when `dt` is not a core dtype. */
tbx_status tbx_dtype_core_nbytes(tbx_dtype dt, uint64_t nelems, uint64_t *out);
tbx_status tbx_dtype_core_nbytes_shape(tbx_dtype dt, const uint64_t *shape, uint32_t ndim,
                                       uint64_t *out);
/* The inverse for the float dtypes: encodes n f32 values as f32, f64, f16 or bf16 (little-
 * endian, round to nearest even); false for any other dtype (src/quant/decode.c). */
bool tbx_encode_float(tbx_dtype dt, const float *src, uint64_t n, uint8_t *dst);
/* tbx_decode_f32 with the dtype's entry already looked up (src/quant/decode.c). */
tbx_status tbx_decode_f32_info(const tbx_dtype_info *e, tbx_dtype dtype, const void *src,
                               size_t src_len, uint64_t nelems, float *dst);
/* tbx_dtype_get / tbx_dtype_nbytes_shape over an explicit driver list. */
const tbx_dtype_info *tbx_dtype_get_in(const tbx_driver *const *drivers, tbx_dtype dtype);
tbx_status tbx_dtype_nbytes_shape_in(const tbx_driver *const *drivers, tbx_dtype dtype,
                                     const uint64_t *shape, uint32_t ndim, uint64_t *out);

/* Drivers */
extern const tbx_driver tbx_driver_safetensors;
extern const tbx_driver tbx_driver_gguf;
extern const tbx_driver tbx_driver_oinf;
extern const tbx_driver tbx_driver_mcf;
extern const tbx_driver tbx_driver_ztensor;
extern const tbx_driver tbx_driver_embd;
extern const tbx_driver tbx_driver_embd_legacy;

/* ------------------------------------------------------------------------------------------ */
/* Worker threads (src/core/pool.c)                                                            */
/* ------------------------------------------------------------------------------------------ */
#define TBX_POOL_MAX 64            /* workers a pool starts at most */
#define TBX_THREADS_DEFAULT_MAX 8  /* the default thread count's cap */

/* A unit of work in the caller's memory (embed it as the first member of a job struct). */
typedef struct tbx_task {
    void (*run)(struct tbx_task *task);
    struct tbx_task *next;   /* pool-internal */
    bool done;               /* pool-internal: read it through tbx_pool_wait */
} tbx_task;
typedef struct tbx_pool tbx_pool;

/* Env TBX_THREADS when set (>= 1), else the online CPUs; at most TBX_THREADS_DEFAULT_MAX. */
int tbx_threads_default(void);
/* Starts `nthreads` workers (capped at TBX_POOL_MAX). NULL when nthreads <= 1 or no thread could
 * be started: every function below accepts NULL and then runs tasks inline, serially. */
tbx_pool *tbx_pool_start(const tbx_alloc *al, int nthreads);
int tbx_pool_threads(const tbx_pool *p);
/* Queues t (FIFO); with p NULL runs it before returning. */
void tbx_pool_submit(tbx_pool *p, tbx_task *t);
/* Has t run? block: wait until it has. */
bool tbx_pool_wait(tbx_pool *p, tbx_task *t, bool block);
/* Waits until every submitted task has run. */
void tbx_pool_drain(tbx_pool *p);
/* Drains, joins the workers and frees the pool; accepts NULL. */
void tbx_pool_stop(tbx_pool *p);

/* ------------------------------------------------------------------------------------------ */
/* Small text helpers (src/core/text.c)                                                        */
/* ------------------------------------------------------------------------------------------ */
/* Is [p, p+n) valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF)? On failure *bad gets the
 * index of the first invalid byte. */
bool tbx_utf8_valid(const char *p, size_t n, size_t *bad);
/* snprintf into a fixed buffer of a possibly binary name: printable ASCII kept, others \xNN,
 * truncated with "..." past `max` input bytes. */
void tbx_quote_bytes(char *dst, size_t cap, const char *p, size_t n, size_t max);
/* A JSON parser's error for text src[0, n) as message text: jansson's reason (`jtext`, its
 * " near '...'" token context dropped: jansson prints it cut at a NUL byte, control bytes raw)
 * followed by " near \"...\"": up to 16 bytes of src on each side of `pos` (the parser's
 * position), escaped by tbx_quote_bytes. */
void tbx_json_reason(char *dst, size_t cap, const char *jtext, const char *src, size_t n,
                     size_t pos);

#endif /* TBX_INTERNAL_H */
