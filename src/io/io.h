/*
 * io.h - where a file's bytes come from and go to (src/io/): sources (pread, guarded mappings,
 * memory, read callbacks), the providers that find and open the files of a set by name
 * (provider.h), the one bounds-checked cursor every driver parses through, and the atomic
 * output (temporary file + rename) with the locks of edited files. Sees core.h and the records
 * of model.h. Only this layer looks files up or opens them by name (ctest layers.files).
 */
#ifndef TBX_IO_H
#define TBX_IO_H

#include "model.h"
#include "provider.h"

/* ------------------------------------------------------------------------------------------ */
/* Sources (src/io/source.c, src/io/mapguard.c)                                                */
/* ------------------------------------------------------------------------------------------ */
tbx_status tbx_source_open_path(tbx_source *s, const char *path, bool use_mmap, tbx_error *err);
void tbx_source_open_memory(tbx_source *s, const void *data, size_t size);
void tbx_source_open_callback(tbx_source *s, tbx_read_at_fn fn, void *ud, uint64_t size);
void tbx_source_close(tbx_source *s);
/* Reads exactly len bytes at off. Fails with TBX_E_TRUNCATED (naming `field`) when
 * [off, off+len) is not inside the file, or no longer is (the file shrank: pread finds its end,
 * a mapping's check fails), TBX_E_IO on a read error. */
tbx_status tbx_source_read(const tbx_source *s, uint64_t off, void *buf, size_t len,
                           const char *field, tbx_error *err);
/* Tells the source that the reads that follow go on through [off, off+len) (the component of
 * a tensor read in parts): a remote source fetches ahead inside it (never past it); nothing
 * for the other kinds. */
void tbx_source_hint(const tbx_source *s, uint64_t off, uint64_t len);
/* Tells the source where the reads after those under way go: a remote source fetches the
 * start of [off, off+len) in the background; nothing for the other kinds. */
void tbx_source_hint_next(const tbx_source *s, uint64_t off, uint64_t len);
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



/* ------------------------------------------------------------------------------------------ */
/* Remote files (src/io/remote.c): HTTP(S) range requests through libcurl                     */
/* ------------------------------------------------------------------------------------------ */
/* True when `path` is a URL of a remote provider: http://, https://, s3://, hf://. */
bool tbx_remote_is_url(const char *path);
/* How requests are authenticated (every member may be NULL): an OAuth bearer token (sent to
 * the URL's own host only, never after a redirect to another), AWS SigV4 ("aws:amz:REGION:s3"
 * with "KEY:SECRET"), and an extra header line (the session token). Copied at open. */
typedef struct tbx_remote_auth {
    const char *bearer;
    const char *sigv4, *userpwd, *header;
} tbx_remote_auth;
/* Opens `url` as a TBX_SRC_REMOTE source: one range request learns its size, ETag and
 * Last-Modified (and keeps its first bytes); `shown` is how messages name it (never a secret;
 * NULL: the URL without user info and query). A server answering 200 to a range request of
 * a larger file fails (TBX_E_UNSUPPORTED): nothing is read whole behind the caller's back. */
tbx_status tbx_remote_open(tbx_source *s, const tbx_alloc *al, const char *url, const char *shown,
                           const tbx_remote_auth *auth, tbx_error *err);
/* Reads exactly len bytes at off (thread-safe): from the block cache, else by range requests
 * (a growing read-ahead for sequential small reads; parallel ranges for large ones). A file
 * that changed since the open (ETag, Last-Modified, size) fails with TBX_E_IO naming it. */
tbx_status tbx_remote_read(tbx_remote *r, uint64_t off, void *buf, size_t len, const char *field,
                           tbx_error *err);
void tbx_remote_close(tbx_remote *r);
/* The reads that follow go through [off, off+len) (a tensor read in chunks): large ones may
 * fetch ahead inside it, never past it. */
void tbx_remote_hint(tbx_remote *r, uint64_t off, uint64_t len);
/* The reads after those under way go to [off, off+len): a background request fetches its
 * start into the block cache while the reader works (TBX_HTTP_PREFETCH=0: never). */
void tbx_remote_hint_next(tbx_remote *r, uint64_t off, uint64_t len);
/* One HEAD request (redirects followed): *exists false for 404/410 (and 403 when missing ->
 * forbidden is how S3 answers without list rights, when `forbidden_missing`), *size from its
 * Content-Length. Other failures are errors. */
tbx_status tbx_remote_head(const tbx_alloc *al, const char *url, const char *shown,
                           const tbx_remote_auth *auth, bool forbidden_missing, bool *exists,
                           uint64_t *size, tbx_error *err);
/* One GET of a small document (at most `max` bytes: more is TBX_E_LIMIT), made with `al`
 * (free *len + 1 bytes; NUL-terminated). */
tbx_status tbx_remote_get(const tbx_alloc *al, const char *url, const char *shown,
                          const tbx_remote_auth *auth, size_t max, char **body, size_t *len,
                          tbx_error *err);
/* The same, also giving the answer's next link (tbx_http_head.next: "" when none) in `next`
 * (`cap` bytes, at least TBX_HTTP_LINK_MAX). */
tbx_status tbx_remote_get_page(const tbx_alloc *al, const char *url, const char *shown,
                               const tbx_remote_auth *auth, size_t max, char **body, size_t *len,
                               char *next, size_t cap, tbx_error *err);
/* The URL a next link `link` of the answer to `url` names, in out (`cap` bytes): `link` itself
 * when absolute, else (starting with one '/') the same scheme, host and port as `url` with
 * that path. TBX_E_FORMAT (field "Link") when it names another origin (scheme, host or port:
 * credentials sent to `url` must not go elsewhere), is relative in another way, or does not
 * fit. */
tbx_status tbx_http_next_url(const char *url, const char *link, char *out, size_t cap,
                             tbx_error *err);
/* What servers send, parsed from bytes (src/io/http_parse.c; no network). */
#define TBX_HTTP_TAG_MAX 256
#define TBX_HTTP_LINK_MAX 2048
/* An answer's header block, fed one line at a time (a status line starts a new answer: each
 * of a redirect chain). Content-Range, Content-Length, ETag and Last-Modified are read
 * strictly; the first problem is kept in `err` (field: the header, offset: the byte in the
 * block, the status line being byte 0) and makes a 2xx answer unusable (tbx_http_check). */
typedef struct tbx_http_head {
    long status;
    uint64_t nbytes;                 /* bytes of this answer's block so far */
    bool cr_seen, cr_ok, cr_star;    /* "bytes A-B/T" (cr_ok) or "bytes * /T" (cr_star) */
    uint64_t cr_a, cr_b, cr_total;
    bool has_clen;
    uint64_t clen;
    bool has_etag, has_lastmod;
    char etag[TBX_HTTP_TAG_MAX], lastmod[TBX_HTTP_TAG_MAX];
    /* Link: the URI of the link whose rel names "next" (RFC 8288; the Hub pages its tree
     * listing so), "" when none; a next link that is malformed, too long or sent twice with
     * different URIs is an error of field "Link". Other links are not looked at (a Link
     * header the parser cannot read up to a next link is ignored). */
    char next[TBX_HTTP_LINK_MAX];
    bool last_tracked;               /* the line before was one of the four (folding) */
    const char *last_name;
    tbx_error err;                   /* code TBX_OK while the block is well formed */
} tbx_http_head;
void tbx_http_head_reset(tbx_http_head *h);
/* One header line as received (its CRLF included or not); returns h->err.code. */
tbx_status tbx_http_head_line(tbx_http_head *h, const char *b, size_t n);
/* What a request asked for: a range [off, off+len) of a file of `size` bytes last seen with
 * etag/lastmod ("" when unknown), or the probe that learns them (off 0), or a whole document
 * of at most `max` bytes. */
typedef struct tbx_http_want {
    bool probe, whole;
    uint64_t off;
    size_t len, max;
    uint64_t size;
    const char *etag, *lastmod;
} tbx_http_want;
/* What the answer gives: `len` bytes of the body are the file's (discard: the body is not the
 * file's: an empty file's 416); learn: size, etag, lastmod are the file's from now on. */
typedef struct tbx_http_got {
    size_t len;
    uint64_t size;
    bool discard, learn;
} tbx_http_got;
/* Accepts an answer (its headers complete up to the body) for what `w` asked, or says why
 * not (field "answer" or the malformed header). Never accepts bytes other than those asked. */
tbx_status tbx_http_check(const tbx_http_head *h, const tbx_http_want *w, tbx_http_got *g,
                          tbx_error *err);
/* The Hub's tree listing (api/models/ORG/REPO/tree/REV?recursive=true: a JSON array of
 * {"type": "file"|"directory", "path", "size", ...}): the entries under `dir` ("" or "a/b/")
 * appended to *t, names relative to dir (tbx_provider_name_ok), sorted, no name twice, at
 * most max_entries. Errors name the field (tree, tree.path, tree.type, tree.size) and the
 * byte offset of the entry (or of the JSON syntax error); `shown` names the listing. */
typedef struct tbx_hf_tree_entry {
    char *name;
    uint64_t size;
    bool dir;
    uint64_t at;       /* byte offset of the entry in its page */
    size_t index;      /* its index there */
} tbx_hf_tree_entry;
typedef struct tbx_hf_tree {
    tbx_hf_tree_entry *e;
    size_t n, cap;
} tbx_hf_tree;
tbx_status tbx_hf_tree_parse(const tbx_alloc *al, const char *body, size_t len, const char *dir,
                             const char *shown, size_t max_entries, tbx_hf_tree *t,
                             tbx_error *err);
void tbx_hf_tree_free(const tbx_alloc *al, tbx_hf_tree *t);

/* A provider for a URL (tbx_remote_is_url): http(s) and s3 directories need an index (their
 * listings are the names given and probed); hf:// lists the repository through the Hub's
 * tree API (src/io/remote_prov.c). */
tbx_status tbx_provider_remote(tbx_provider **out, const tbx_alloc *al, const char *url,
                               tbx_error *err);

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
/* Fails with TBX_E_EXISTS when `path` exists and !TBX_OUT_OVERWRITE (a dangling symbolic link
 * counts as existing), when it is not a regular file, or when it names an open input. */
tbx_status tbx_out_open(tbx_out *o, const tbx_alloc *al, const char *path, unsigned flags,
                        tbx_error *err);
/* Writes len bytes at off (positional; unwritten gaps read as zero). */
tbx_status tbx_out_pwrite(tbx_out *o, uint64_t off, const void *data, size_t len, tbx_error *err);
/* (src/io/copy.c) Writes at off the len bytes of file descriptor in_fd that start at in_off
 * (tensor bytes that pass unchanged): copy_file_range when off and in_off are congruent modulo
 * 64 KiB (the bytes never enter this process; a file system that shares extents shares them);
 * otherwise, or when the kernel or the file systems cannot (ENOSYS, EXDEV, EINVAL, EOPNOTSUPP,
 * ...) or tbx_out_no_copy_range_ is set (tests), through 1 MiB pieces (pread + pwrite; from
 * 16 MiB on, a second thread reads the next pieces while this one writes). An input that ends
 * early is TBX_E_TRUNCATED; tbx_out_fault_hook_ is called before every piece. */
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
/* Test hook (tests/unit/test_io.c), NULL otherwise: called the moment a temporary file has been
 * created, where a signal that arrived during its creation is handled (as open() returns). */
extern void (*tbx_out_created_hook_)(void);
/* fsync calls made by commits (the file's and the directory's), for tests of TBX_OUT_NO_SYNC. */
extern _Atomic unsigned long tbx_out_syncs_;
/* The same for reads of path sources (tests/unit/test_faults.c): called before every pread of
 * tbx_source_read; a non-zero return fails that read with that errno. NULL otherwise. */
extern int (*tbx_src_fault_hook_)(void);

/* ------------------------------------------------------------------------------------------ */
/* (src/io/outdir.c) An output directory written whole: files go into a temporary directory   */
/* "<parent>/.<base>.tbx-dir.XXXXXX"; the commit renames it to the destination, which must be  */
/* absent or an empty directory (anything else: TBX_E_EXISTS, never merged into).             */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_outdir {
    const tbx_alloc *al;
    char *final;     /* the destination, without trailing slashes */
    char *tmp;       /* the temporary directory (NULL once committed or aborted) */
    size_t tmp_cap;
    unsigned flags;  /* TBX_OUT_NO_SYNC */
} tbx_outdir;
/* The destination can be written (absent or an empty directory; its parent exists). */
tbx_status tbx_outdir_check(const char *path, tbx_error *err);
tbx_status tbx_outdir_open(tbx_outdir *d, const tbx_alloc *al, const char *path, unsigned flags,
                           tbx_error *err);
/* The temporary directory's path of `rel` into out (cap bytes). */
tbx_status tbx_outdir_path(const tbx_outdir *d, const char *rel, char *out, size_t cap,
                           tbx_error *err);
/* A subdirectory `rel` of the output. */
tbx_status tbx_outdir_mkdir(tbx_outdir *d, const char *rel, tbx_error *err);
/* File `rel` of the output with these n bytes (temp file + rename inside the directory). */
tbx_status tbx_outdir_write(tbx_outdir *d, const char *rel, const void *data, size_t n,
                            tbx_error *err);
/* Renames the temporary directory to the destination (checked again) and frees. */
tbx_status tbx_outdir_commit(tbx_outdir *d, tbx_error *err);
/* Removes the temporary directory and what it holds (when not committed) and frees; accepts a
 * zeroed struct. */
void tbx_outdir_abort(tbx_outdir *d);

/* ------------------------------------------------------------------------------------------ */
/* (src/io/outset.c) A set of files written whole (shards and their index, a GGUF split set):  */
/* each under "<dir>/.<base>.tbx-set.XXXXXX" until the commit renames them all, the claim last.*/
/* ------------------------------------------------------------------------------------------ */
/* slot: the entry of tmp in the table of temporary files that tbx_remove_temp_files (a signal
 * handler's) removes, from its add until its rename or the abort (-1: none, the table full) */
typedef struct tbx_outset_entry { char *dst, *tmp; bool renamed; int slot; } tbx_outset_entry;
typedef struct tbx_outset {
    const tbx_alloc *al;
    tbx_outset_entry *e;
    size_t n, cap;
    unsigned flags; /* TBX_OUT_NO_SYNC, TBX_OUT_OVERWRITE */
} tbx_outset;
void tbx_outset_init(tbx_outset *s, const tbx_alloc *al, unsigned flags);
/* A file of the set: *tmp (owned by the set) is where to write it (with the atomic writer). */
tbx_status tbx_outset_add(tbx_outset *s, const char *dst, const char **tmp, tbx_error *err);
/* A small file of the set with these n bytes. */
tbx_status tbx_outset_write(tbx_outset *s, const char *dst, const void *data, size_t n,
                            tbx_error *err);
/* (tbx_outset_add: an existing dst is TBX_E_EXISTS unless flags has TBX_OUT_OVERWRITE.)
 * Renames every file to its name, entry `claim` last, and frees; on failure the set stays for
 * tbx_outset_abort to remove (renamed files included). */
tbx_status tbx_outset_commit(tbx_outset *s, size_t claim, tbx_error *err);
/* Removes every file of the set (temporary or renamed) and frees; accepts a zeroed struct. */
void tbx_outset_abort(tbx_outset *s);

/* (src/io/edit.c) The lock of a file edited in place or rewritten (the GGUF editing tools):
 * `path` resolved through symbolic links, opened (read-write when permitted), flocked LOCK_EX
 * and checked to be the file the name refers to once the lock is held. Parse the file only
 * after taking it (and check that the parsed file is (dev, ino)); write in place through `fd`;
 * replace it through a writer opened on `path` with TBX_OUT_EDIT (TBX_WRITE_EDIT_) before
 * unlocking. */
typedef struct tbx_edit {
    int fd;
    bool writable;   /* fd is open read-write */
    uint64_t dev, ino;
    char *path;      /* symbolic links resolved */
    const tbx_alloc *al;
} tbx_edit;
tbx_status tbx_edit_lock(tbx_edit *e, const tbx_alloc *al, const char *path, tbx_error *err);
void tbx_edit_unlock(tbx_edit *e);

#endif /* TBX_IO_H */
