/*
 * source.c - where a file's bytes come from: a path (pread or mmap), a memory buffer, or a
 * read-at callback.
 *
 * Every read is bounds-checked against the source size with checked arithmetic before anything
 * touches the file. pread loops over short reads and EINTR; a file that ends early (it shrank
 * after open) is reported as truncated, and so is a mapped range found past the end of a file
 * that shrank after it was mapped (the mapping is guarded: src/io/mapguard.c, and every access
 * is followed by tbx_source_check). Path sources are entered in a process-wide registry of
 * open inputs (device, inode, reference count) that the atomic writer consults so it never
 * replaces a file that is being read. The registry is a small mutex-protected list; it is
 * process state, not a handle's, so it uses the default allocator.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Base pointer of empty mapped/memory sources, so that tbx_source_ptr(s, 0, 0) is non-NULL. */
static const uint8_t empty_bytes[1];

/* Largest single pread: Linux transfers at most 0x7ffff000 bytes per call anyway. */
#define READ_CHUNK ((size_t)1 << 30)

/* ------------------------------------------------------------------------------------------ */
/* Registry of open inputs                                                                     */
/* ------------------------------------------------------------------------------------------ */
typedef struct input_entry {
    uint64_t dev, ino;
    uint64_t refs;
} input_entry;

static pthread_mutex_t inputs_lock = PTHREAD_MUTEX_INITIALIZER;
static input_entry *inputs;
static size_t inputs_n, inputs_cap;

static bool inputs_add(uint64_t dev, uint64_t ino) {
    bool ok = true;
    pthread_mutex_lock(&inputs_lock);
    size_t i;
    for (i = 0; i < inputs_n; i++)
        if (inputs[i].dev == dev && inputs[i].ino == ino) break;
    if (i < inputs_n) {
        inputs[i].refs++;
    } else {
        tbx_alloc al;
        tbx_alloc_init(&al, NULL);
        void *items = inputs;
        if (tbx_grow(&al, &items, &inputs_cap, inputs_n + 1, sizeof *inputs)) {
            inputs = (input_entry *)items;
            inputs[inputs_n].dev = dev;
            inputs[inputs_n].ino = ino;
            inputs[inputs_n].refs = 1;
            inputs_n++;
        } else {
            ok = false;
        }
    }
    pthread_mutex_unlock(&inputs_lock);
    return ok;
}

static void inputs_remove(uint64_t dev, uint64_t ino) {
    pthread_mutex_lock(&inputs_lock);
    for (size_t i = 0; i < inputs_n; i++) {
        if (inputs[i].dev != dev || inputs[i].ino != ino) continue;
        if (--inputs[i].refs == 0) {
            inputs[i] = inputs[inputs_n - 1];
            inputs_n--;
        }
        break;
    }
    if (inputs_n == 0 && inputs) {
        tbx_alloc al;
        tbx_alloc_init(&al, NULL);
        tbx_free(&al, inputs, inputs_cap * sizeof *inputs);
        inputs = NULL;
        inputs_cap = 0;
    }
    pthread_mutex_unlock(&inputs_lock);
}

bool tbx_inputs_contains(uint64_t dev, uint64_t ino) {
    bool found = false;
    pthread_mutex_lock(&inputs_lock);
    for (size_t i = 0; i < inputs_n && !found; i++)
        found = inputs[i].dev == dev && inputs[i].ino == ino;
    pthread_mutex_unlock(&inputs_lock);
    return found;
}

/* ------------------------------------------------------------------------------------------ */
/* Opening and closing                                                                         */
/* ------------------------------------------------------------------------------------------ */
static void source_reset(tbx_source *s) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->guard = -1;
}

static size_t page_bytes(void) {
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : 4096;
}

/* The guard's page size, set before the first guarded mapping of a source is made. */
static _Atomic size_t src_page = 4096;

tbx_status tbx_source_open_path(tbx_source *s, const char *path, bool use_mmap, tbx_error *err) {
    if (!s) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "source is NULL");
    source_reset(s);
    if (!path || !*path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "path is NULL or empty");

    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is rejected just below). */
    int fd;
    do {
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot open %s: %s", path,
                       strerror(errno));

    tbx_status st;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot stat %s: %s", path,
                     strerror(errno));
        goto fail;
    }
    if (S_ISDIR(sb.st_mode)) {
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot read %s: is a directory", path);
        goto fail;
    }
    if (!S_ISREG(sb.st_mode) && !S_ISBLK(sb.st_mode)) {
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                     "cannot read %s: not a regular file or block device", path);
        goto fail;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK)) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);

    uint64_t size;
    if (S_ISREG(sb.st_mode)) {
        if (sb.st_size < 0) {
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "%s: negative file size %lld",
                         path, (long long)sb.st_size);
            goto fail;
        }
        size = (uint64_t)sb.st_size;
    } else {
        off_t e = lseek(fd, 0, SEEK_END);
        if (e < 0) {
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot size device %s: %s", path,
                         strerror(errno));
            goto fail;
        }
        size = (uint64_t)e;
    }

    s->fd = fd;
    s->size = size;
    s->kind = TBX_SRC_FD;
    s->dev = (uint64_t)sb.st_dev;
    s->ino = (uint64_t)sb.st_ino;

    if (use_mmap) {
        if (size > (uint64_t)SIZE_MAX) {
            st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "path",
                         "%s: %" PRIu64 " bytes do not fit in the address space", path, size);
            goto fail;
        }
        if (size == 0) {
            s->base = empty_bytes; /* nothing to map */
            s->kind = TBX_SRC_MMAP;
        } else {
            void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (m == MAP_FAILED) {
                st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                             "cannot map %s (%" PRIu64 " bytes): %s", path, size,
                             strerror(errno));
                goto fail;
            }
            /* a mapping that cannot be guarded is not kept: the source reads through pread */
            atomic_store_explicit(&src_page, tbx_mapguard_page(), memory_order_relaxed);
            s->guard = tbx_mapguard_add(m, (size_t)size);
            if (s->guard < 0) {
                munmap(m, (size_t)size);
            } else {
                s->base = (const uint8_t *)m;
                s->map_len = (size_t)size;
                s->valid = tbx_mapguard_valid_ptr(s->guard);
                s->kind = TBX_SRC_MMAP;
            }
        }
    }

    if (!inputs_add(s->dev, s->ino)) {
        st = tbx_err_nomem(err, "open-input registry");
        goto fail;
    }
    s->registered = true;
    return TBX_OK;

fail:
    if (s->map_len) {
        tbx_mapguard_remove(s->guard);
        munmap((void *)(uintptr_t)s->base, s->map_len);
    }
    close(fd);
    source_reset(s);
    return st;
}

void tbx_source_open_memory(tbx_source *s, const void *data, size_t size) {
    if (!s) return;
    source_reset(s);
    s->kind = TBX_SRC_MEMORY;
    /* A NULL buffer holds nothing: size 0 makes every non-empty read a truncation error. */
    s->base = data ? (const uint8_t *)data : empty_bytes;
    s->size = data ? (uint64_t)size : 0;
}

void tbx_source_open_callback(tbx_source *s, tbx_read_at_fn fn, void *ud, uint64_t size) {
    if (!s) return;
    source_reset(s);
    s->kind = TBX_SRC_CALLBACK;
    s->cb = fn;
    s->cb_ud = ud;
    s->size = fn ? size : 0;
}

void tbx_source_close(tbx_source *s) {
    if (!s) return;
    if (s->kind == TBX_SRC_REMOTE) tbx_remote_close(s->remote);
    /* Only a successfully opened path source owns a descriptor: a zeroed struct (fd 0) or a
     * memory/callback source closes nothing. */
    if (s->registered) {
        if (s->map_len) {
            tbx_mapguard_remove(s->guard);
            munmap((void *)(uintptr_t)s->base, s->map_len);
        }
        if (s->fd >= 0) close(s->fd);
        inputs_remove(s->dev, s->ino);
    }
    source_reset(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                     */
/* ------------------------------------------------------------------------------------------ */
/* The field as shown in a message: long names (tensor names can be long) are shortened so the
 * rest of the message (sizes, offsets) always fits. */
#define SHOW_MAX 96
static const char *show_name(char buf[SHOW_MAX + 4], const char *field, const char *dflt) {
    if (!field || !*field) return dflt;
    size_t n = strlen(field);
    if (n <= SHOW_MAX) return field;
    n = SHOW_MAX;
    while (n > 0 && ((unsigned char)field[n] & 0xC0u) == 0x80u) n--; /* whole UTF-8 sequences */
    memcpy(buf, field, n);
    memcpy(buf + n, "...", 4);
    return buf;
}

int (*tbx_src_fault_hook_)(void);

tbx_status tbx_source_read(const tbx_source *s, uint64_t off, void *buf, size_t len,
                           const char *field, tbx_error *err) {
    char fbuf[SHOW_MAX + 4];
    const char *f = show_name(fbuf, field, "data");
    if (!s) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field, "%s: source is NULL", f);
    uint64_t end;
    if (!tbx_add_u64(off, (uint64_t)len, &end) || end > s->size)
        return tbx_err_at(err, TBX_E_TRUNCATED, off, field,
                      "%s: needs %zu bytes at byte %" PRIu64 ", file has %" PRIu64, f, len, off,
                      s->size);
    if (len == 0) return TBX_OK;
    if (!buf) return tbx_err(err, TBX_E_INVALID_ARG, off, field, "%s: NULL read buffer", f);

    switch (s->kind) {
    case TBX_SRC_MMAP:
        memcpy(buf, s->base + off, len);
        return tbx_source_check(s, off, len, field, err);
    case TBX_SRC_MEMORY:
        memcpy(buf, s->base + off, len);
        return TBX_OK;

    case TBX_SRC_REMOTE:
        if (!s->remote)
            return tbx_err(err, TBX_E_STATE, off, field, "%s: remote source is not open", f);
        return tbx_remote_read(s->remote, off, buf, len, f, err);

    case TBX_SRC_CALLBACK: {
        if (!s->cb)
            return tbx_err(err, TBX_E_STATE, off, field, "%s: callback source without callback", f);
        tbx_status st = s->cb(s->cb_ud, off, buf, len);
        if (st == TBX_OK) return TBX_OK;
        return tbx_err_at(err, st, off, field,
                      "%s: read callback failed for %zu bytes at byte %" PRIu64 ": %s", f, len,
                      off, tbx_strerror(st));
    }

    case TBX_SRC_FD: {
        if (s->fd < 0)
            return tbx_err(err, TBX_E_STATE, off, field, "%s: source is not open", f);
        uint8_t *p = (uint8_t *)buf;
        uint64_t pos = off;
        size_t left = len;
        while (left > 0) {
            size_t chunk = left < READ_CHUNK ? left : READ_CHUNK;
            int fault = tbx_src_fault_hook_ ? tbx_src_fault_hook_() : 0;
            if (fault) errno = fault;
            ssize_t r = fault ? -1 : pread(s->fd, p, chunk, (off_t)pos);
            if (r < 0) {
                if (errno == EINTR) continue;
                return tbx_err_at(err, TBX_E_IO, pos, field,
                              "%s: reading %zu bytes at byte %" PRIu64 " failed: %s", f, left,
                              pos, strerror(errno));
            }
            if (r == 0)
                return tbx_err_at(err, TBX_E_TRUNCATED, pos, field,
                              "%s: file ended at byte %" PRIu64 " while reading %zu bytes at "
                              "byte %" PRIu64 " (it had %" PRIu64 " bytes when opened)",
                              f, pos, len, off, s->size);
            p += (size_t)r;
            pos += (uint64_t)r;
            left -= (size_t)r;
        }
        return TBX_OK;
    }
    }
    return tbx_err(err, TBX_E_STATE, off, field, "%s: unknown source kind %d", f, (int)s->kind);
}

void tbx_source_hint(const tbx_source *s, uint64_t off, uint64_t len) {
    if (s && s->kind == TBX_SRC_REMOTE) tbx_remote_hint(s->remote, off, len);
}

void tbx_source_hint_next(const tbx_source *s, uint64_t off, uint64_t len) {
    if (s && s->kind == TBX_SRC_REMOTE) tbx_remote_hint_next(s->remote, off, len);
}

const uint8_t *tbx_source_ptr(const tbx_source *s, uint64_t off, uint64_t len) {
    if (!s || !s->base) return NULL;
    if (s->kind != TBX_SRC_MMAP && s->kind != TBX_SRC_MEMORY) return NULL;
    uint64_t end;
    if (!tbx_add_u64(off, len, &end) || end > s->size) return NULL;
    return s->base + off;
}

/* The file a mapping of fd (opened with `size` bytes) was made from shrank: bytes [off,
 * off+len) are, or may be, zeros. `valid_end`: the file offset below which no fault was seen. */
static tbx_status shrank(int fd, uint64_t size, uint64_t valid_end, uint64_t off, uint64_t len,
                         const char *field, tbx_error *err) {
    char fbuf[SHOW_MAX + 4];
    const char *f = show_name(fbuf, field, "data");
    struct stat sb;
    uint64_t now = valid_end;
    if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size >= 0 && (uint64_t)sb.st_size < now)
        now = (uint64_t)sb.st_size;
    if (now >= off)
        return tbx_err_at(err, TBX_E_TRUNCATED, now, field,
                          "%s: file ended at byte %" PRIu64 " while reading %" PRIu64
                          " bytes at byte %" PRIu64 " (it had %" PRIu64 " bytes when opened; it "
                          "shrank while mapped)", f, now, len, off, size);
    return tbx_err_at(err, TBX_E_TRUNCATED, off, field,
                      "%s: file ended at byte %" PRIu64 ", before the %" PRIu64 " bytes at byte %"
                      PRIu64 " (it had %" PRIu64 " bytes when opened; it shrank while mapped)",
                      f, now, len, off, size);
}

/* tbx_source_check for bytes [off, off+len) of fd read through mapping slot `guard`, which
 * maps the file from offset map_off. */
static tbx_status guard_check(int guard, int fd, uint64_t size, uint64_t map_off, uint64_t off,
                              uint64_t len, const char *field, tbx_error *err) {
    if (len == 0) return TBX_OK;
    uint64_t end = off + len; /* inside the mapping: no overflow */
    int r = tbx_mapguard_check(guard, (size_t)(end - map_off));
    if (r > 0) return TBX_OK;
    if (r < 0) {
        struct stat sb;
        if (fstat(fd, &sb) == 0 && sb.st_size >= 0 && (uint64_t)sb.st_size >= end) return TBX_OK;
    }
    return shrank(fd, size, map_off + tbx_mapguard_valid(guard), off, len, field, err);
}

tbx_status tbx_source_check(const tbx_source *s, uint64_t off, uint64_t len, const char *field,
                            tbx_error *err) {
    if (!s || !s->valid || len == 0) return TBX_OK;
    uint64_t end;
    if (!tbx_add_u64(off, len, &end) || end > s->size)
        return tbx_err_at(err, TBX_E_TRUNCATED, off, field,
                          "%s: needs %" PRIu64 " bytes at byte %" PRIu64 ", file has %" PRIu64,
                          field ? field : "data", len, off, s->size);
    /* the common case inline; an answer other than "whole" goes the slow way (fstat) */
    if (tbx_mapguard_probe(s->base, s->map_len, s->valid, (size_t)end,
                           atomic_load_explicit(&src_page, memory_order_relaxed)) > 0)
        return TBX_OK;
    return guard_check(s->guard, s->fd, s->size, 0, off, len, field, err);
}

tbx_status tbx_source_intact(const tbx_source *s, const char *field, tbx_error *err) {
    if (!s || !s->registered || s->fd < 0) return TBX_OK;
    const bool mapped = s->kind == TBX_SRC_MMAP && s->map_len;
    uint64_t now = mapped ? tbx_mapguard_valid(s->guard) : s->size;
    struct stat sb;
    if (fstat(s->fd, &sb) == 0 && sb.st_size >= 0 && (uint64_t)sb.st_size < now)
        now = (uint64_t)sb.st_size;
    if (now >= s->size) return TBX_OK;
    return tbx_err_at(err, TBX_E_TRUNCATED, now, field,
                      "%s: file ended at byte %" PRIu64 " (it had %" PRIu64 " bytes when "
                      "opened)%s", field ? field : "file", now, s->size,
                      mapped ? "; its mapped bytes past that read as zeros" : "");
}

const uint8_t *tbx_source_view(const tbx_source *s, uint64_t off, uint64_t len, tbx_view *v) {
    memset(v, 0, sizeof *v);
    v->src = s;
    v->guard = -1;
    const uint8_t *p = tbx_source_ptr(s, off, len);
    if (p || !s || s->kind != TBX_SRC_FD || s->fd < 0 || len == 0) return p;
    uint64_t end;
    if (!tbx_add_u64(off, len, &end) || end > s->size) return NULL;
    uint64_t a = off - off % (uint64_t)page_bytes();
    uint64_t n = end - a;
    if (n > SIZE_MAX) return NULL;
    void *m = mmap(NULL, (size_t)n, PROT_READ, MAP_PRIVATE, s->fd, (off_t)a);
    if (m == MAP_FAILED) return NULL;
    int guard = tbx_mapguard_add(m, (size_t)n);
    if (guard < 0) { /* unguarded, a shrinking file would kill the process: read instead */
        munmap(m, (size_t)n);
        return NULL;
    }
    (void)madvise(m, (size_t)n, MADV_SEQUENTIAL);
    v->map = m;
    v->map_len = (size_t)n;
    v->map_off = a;
    v->guard = guard;
    return (const uint8_t *)m + (off - a);
}

tbx_status tbx_view_check(const tbx_view *v, uint64_t off, uint64_t len, const char *field,
                          tbx_error *err) {
    if (!v->map) return tbx_source_check(v->src, off, len, field, err);
    return guard_check(v->guard, v->src->fd, v->src->size, v->map_off, off, len, field, err);
}

void tbx_view_release(tbx_view *v) {
    if (!v || !v->map) return;
    tbx_mapguard_remove(v->guard);
    munmap(v->map, v->map_len);
    v->map = NULL;
    v->map_len = 0;
    v->guard = -1;
}
