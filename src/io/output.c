/*
 * output.c - the atomic file writer behind every tbx_writer: temporary file, writes, commit.
 *
 * Bytes go to a temporary file ".<name>.tbx-tmp.XXXXXX" created in the destination's directory,
 * so the final rename() is atomic: readers see either the old file or the complete new one, and
 * a failed or abandoned write leaves nothing behind. The temporary file is created with
 * O_CREAT|O_EXCL and mode 0644, so the kernel applies the process umask itself (no racy umask()
 * read in a multi-threaded process). Commit fsyncs the file, renames it and fsyncs the
 * directory (none of that with TBX_OUT_NO_SYNC, nor the early writeback below).
 *
 * Writeback starts as the bytes arrive: every 32 MiB written in one run of adjacent writes is
 * handed to the disk at once (sync_file_range SYNC_FILE_RANGE_WRITE, which does not wait for
 * it), so the disk works while the next bytes are produced and the commit's fsync finds little
 * left to do (1.06 GiB on ext4 here: fsync 0.39 s -> ~1 ms, the whole write 0.84 s -> 0.63 s;
 * docs/formats/gguf.md, Speed).
 *
 * Where the bytes go is decided at open by the destination rules (edit.c: symbolic links,
 * regular files only, never an input, overwrite, the lock of an existing destination and the
 * rules of TBX_OUT_EDIT); bytes that pass unchanged from an input file are copied by
 * tbx_out_copy_fd (copy.c).
 *
 * Temporary files: each live one is entered in a fixed table that tbx_remove_temp_files()
 * (async-signal-safe) walks, so a signal handler can remove them, and each is flocked by its
 * writer while it lives. A process killed outright (SIGKILL) leaves its temporary file behind;
 * the next write to the same destination removes every ".<name>.tbx-tmp.XXXXXX" of the same
 * user on which it can take that lock (nobody is writing it any more).
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "output_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define ZERO_CHUNK ((size_t)64 * 1024)
#define WRITE_CHUNK ((size_t)1 << 30)
#define TMP_ATTEMPTS 256

static const uint8_t zero_bytes[ZERO_CHUNK];

/* ------------------------------------------------------------------------------------------ */
/* Table of live temporary files, for tbx_remove_temp_files (async-signal-safe: it only reads  */
/* lock-free atomics and fixed buffers, and calls open, flock, unlink and close).              */
/* ------------------------------------------------------------------------------------------ */
#define TMP_SLOTS 128 /* a set of shards holds one each until its commit */
#define TMP_SLOT_LEN 4096

/* A slot's name is written while it is BUSY and read by the handler only while it is CREATING
 * (the file of that name is being created: it may not exist yet, or already be ours) or LIVE
 * (the file is ours). A signal that arrives while open() creates the file is handled as open()
 * returns, before the writer could note anything: hence CREATING, set before the attempt. */
enum { SLOT_FREE = 0, SLOT_BUSY = 1, SLOT_LIVE = 2, SLOT_CREATING = 3 };

static struct {
    atomic_int state;
    char path[TMP_SLOT_LEN];
} tmp_slots[TMP_SLOTS];

/* A free slot, BUSY; -1 when the table is full or the name too long (the file is then only
 * removed by the writer itself or as a stale file later). */
static int tmp_slot_take(size_t name_len) {
    if (name_len >= TMP_SLOT_LEN) return -1;
    for (int i = 0; i < TMP_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (atomic_compare_exchange_strong(&tmp_slots[i].state, &expect, SLOT_BUSY)) return i;
    }
    return -1;
}

static void tmp_slot_set(int slot, int state) {
    if (slot >= 0 && slot < TMP_SLOTS) atomic_store(&tmp_slots[slot].state, state);
}

/* The name the next attempt creates (the slot BUSY: that of an earlier attempt is not ours). */
static void tmp_slot_creating(int slot, const char *path) {
    if (slot < 0 || slot >= TMP_SLOTS) return;
    memcpy(tmp_slots[slot].path, path, strlen(path) + 1); /* < TMP_SLOT_LEN: tmp_slot_take */
    atomic_store(&tmp_slots[slot].state, SLOT_CREATING);
}

static void tmp_unregister(int slot) { tmp_slot_set(slot, SLOT_FREE); }

int tbx_tmp_register_(const char *path) {
    int slot = tmp_slot_take(strlen(path));
    if (slot < 0) return -1;
    memcpy(tmp_slots[slot].path, path, strlen(path) + 1);
    tmp_slot_set(slot, SLOT_LIVE);
    return slot;
}

void tbx_tmp_unregister_(int slot) { tmp_unregister(slot); }

/* The file a writer is creating under `path`: removed when nobody holds its lock (the writer
 * has not locked it yet: it is ours); a live writer of another process that holds the name
 * holds its lock (and this process's creation then fails with EEXIST). */
static void remove_if_unlocked(const char *path) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) (void)unlink(path);
    close(fd);
}

void tbx_remove_temp_files(void) {
    for (int i = 0; i < TMP_SLOTS; i++) {
        const int s = atomic_load(&tmp_slots[i].state);
        if (s == SLOT_LIVE) (void)unlink(tmp_slots[i].path);
        else if (s == SLOT_CREATING) remove_if_unlocked(tmp_slots[i].path);
    }
}

static void out_reset(tbx_out *o) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->lock_fd = -1;
    o->slot = -1;
}

static bool names_a_file(const char *path) {
    const char *base = tbx_path_base_(path);
    return *base && strcmp(base, ".") != 0 && strcmp(base, "..") != 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Opening                                                                                     */
/* ------------------------------------------------------------------------------------------ */
tbx_status tbx_out_open(tbx_out *o, const tbx_alloc *al, const char *path, unsigned flags,
                        tbx_error *err) {
    if (!o) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output is NULL");
    out_reset(o);
    o->al = al;
    o->flags = flags;
    if (!path || !*path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output path is NULL or empty");
    if (!names_a_file(path))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path",
                       "output path %s does not name a file", path);
    bool via_link;
    char *final;
    tbx_status st = tbx_out_resolve_(al, path, &final, &via_link, err);
    if (st != TBX_OK) return st;
    o->path = final;
    if (!names_a_file(final)) {
        st = tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path",
                     "output %s leads to %s, which does not name a file", path, final);
        goto fail;
    }
    st = tbx_out_claim_(o, path, final, via_link, err);
    if (st != TBX_OK) goto fail;
    tbx_out_remove_stale_(al, final);

    /* "<dir>/.<base>.tbx-tmp.XXXXXX" */
    const char *base = tbx_path_base_(final);
    size_t dlen = (size_t)(base - final), blen = strlen(base);
    size_t tlen = dlen + 1 + blen + TMP_TAG_LEN + TMP_SUFFIX_LEN;
    o->tmp_path = (char *)tbx_malloc(al, tlen + 1);
    if (!o->tmp_path) {
        st = tbx_err_nomem(err, "output path");
        goto fail;
    }
    memcpy(o->tmp_path, final, dlen);
    o->tmp_path[dlen] = '.';
    memcpy(o->tmp_path + dlen + 1, base, blen);
    memcpy(o->tmp_path + dlen + 1 + blen, TMP_TAG, TMP_TAG_LEN);
    char *xs = o->tmp_path + dlen + 1 + blen + TMP_TAG_LEN;

    int fd = -1;
    int e = 0;
    /* Its slot in the table of temporary files names each attempt before it creates the file
     * (CREATING), and the file once it is ours (LIVE): a signal at any point finds it. */
    o->slot = tmp_slot_take(tlen);
    for (int attempt = 0; attempt < TMP_ATTEMPTS; attempt++) {
        tbx_out_tmp_suffix_(xs);
        tmp_slot_creating(o->slot, o->tmp_path);
        fd = open(o->tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd >= 0 && tbx_out_created_hook_) tbx_out_created_hook_();
        if (fd < 0) {
            e = errno;
            tmp_slot_set(o->slot, SLOT_BUSY); /* the name is not ours */
            if (e != EEXIST && e != EINTR) break;
            continue;
        }
        tmp_slot_set(o->slot, SLOT_LIVE);
        /* Held while the file lives: it is what tells a later writer that this file is not
         * stale. A writer that found it unlocked in the instant before may have removed it. */
        while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && lstat(o->tmp_path, &b) == 0 && same_inode(&a, &b)) break;
        tmp_slot_set(o->slot, SLOT_BUSY); /* the name is no longer our file's */
        close(fd);
        fd = -1;
        e = EEXIST;
    }
    if (fd < 0) {
        tmp_unregister(o->slot);
        o->slot = -1;
        char *dir = tbx_path_dir_(al, final);
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                     "cannot create a temporary file in %s: %s", dir ? dir : final,
                     strerror(e ? e : EEXIST));
        tbx_free(al, dir, dir ? strlen(dir) + 1 : 0);
        /* Nothing was created: forget the temp name before freeing. */
        tbx_free(al, o->tmp_path, tlen + 1);
        o->tmp_path = NULL;
        goto fail;
    }
    o->fd = fd;
    /* an edit keeps the permission bits of the file it replaces */
    if (flags & TBX_OUT_EDIT) (void)fchmod(fd, (mode_t)o->mode);
    return TBX_OK;

fail:
    tbx_out_abort(o);
    return st;
}

tbx_status tbx_out_not_open_(tbx_error *err) {
    return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "output", "output file is not open");
}

int (*tbx_out_fault_hook_)(void);
void (*tbx_out_created_hook_)(void);
_Atomic unsigned long tbx_out_syncs_;

/* ------------------------------------------------------------------------------------------ */
/* Early writeback                                                                             */
/* ------------------------------------------------------------------------------------------ */
#define WB_KICK ((uint64_t)32 << 20) /* adjacent bytes handed to the disk at once */
#define WB_MIN ((uint64_t)1 << 20)   /* a run this long is handed over when the next write jumps */

static void wb_start(tbx_out *o) {
#ifdef __linux__
    /* Best effort: an error here is the commit's fsync's to report. */
    (void)sync_file_range(o->fd, (off_t)o->wb_lo, (off_t)(o->wb_hi - o->wb_lo),
                          SYNC_FILE_RANGE_WRITE);
#endif
    o->wb_lo = o->wb_hi = 0;
}

/* Bytes [pos, pos + n) were written. */
void tbx_out_wb_note_(tbx_out *o, uint64_t pos, uint64_t n) {
    if (o->flags & TBX_OUT_NO_SYNC) return;
    if (o->wb_hi != pos || o->wb_hi == o->wb_lo) { /* not adjacent to the current run */
        if (o->wb_hi - o->wb_lo >= WB_MIN) wb_start(o);
        o->wb_lo = o->wb_hi = pos;
    }
    o->wb_hi = pos + n;
    if (o->wb_hi - o->wb_lo >= WB_KICK) wb_start(o);
}

tbx_status tbx_out_write_all_(tbx_out *o, uint64_t off, const void *data, size_t len,
                            tbx_error *err) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t pos = off;
    size_t left = len;
    while (left > 0) {
        size_t chunk = left < WRITE_CHUNK ? left : WRITE_CHUNK;
        int fault = tbx_out_fault_hook_ ? tbx_out_fault_hook_() : 0;
        if (fault) errno = fault;
        ssize_t w = fault ? -1 : pwrite(o->fd, p, chunk, (off_t)pos);
        if (w < 0) {
            if (errno == EINTR) continue;
            tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "output",
                    "writing %zu bytes at byte %" PRIu64 " of %s failed: %s", left, pos,
                    o->tmp_path, strerror(errno));
            if (err) err->offset = pos;
            return TBX_E_IO;
        }
        if (w == 0) {
            tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "output",
                    "writing %zu bytes at byte %" PRIu64 " of %s made no progress", left, pos,
                    o->tmp_path);
            if (err) err->offset = pos;
            return TBX_E_IO;
        }
        tbx_out_wb_note_(o, pos, (uint64_t)w);
        p += (size_t)w;
        pos += (uint64_t)w;
        left -= (size_t)w;
    }
    return TBX_OK;
}

/* [off, off + len) must end at a representable file offset. */
tbx_status tbx_out_check_range_(uint64_t off, uint64_t len, uint64_t *end, tbx_error *err) {
    if (!tbx_add_u64(off, len, end) || *end > (uint64_t)INT64_MAX) {
        tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "output",
                "output: %" PRIu64 " bytes at byte %" PRIu64 " pass the largest file offset", len,
                off);
        if (err) err->offset = off;
        return TBX_E_OVERFLOW;
    }
    return TBX_OK;
}

tbx_status tbx_out_pwrite(tbx_out *o, uint64_t off, const void *data, size_t len, tbx_error *err) {
    if (!o || !o->tmp_path || o->fd < 0) return tbx_out_not_open_(err);
    uint64_t end;
    tbx_status st = tbx_out_check_range_(off, (uint64_t)len, &end, err);
    if (st != TBX_OK) return st;
    if (len == 0) return TBX_OK;
    if (!data)
        return tbx_err(err, TBX_E_INVALID_ARG, off, "output", "output: NULL data for %zu bytes", len);
    st = tbx_out_write_all_(o, off, data, len, err);
    if (st != TBX_OK) return st;
    if (end > o->size) o->size = end;
    return TBX_OK;
}

tbx_status tbx_out_zero(tbx_out *o, uint64_t off, uint64_t n, tbx_error *err) {
    if (!o || !o->tmp_path || o->fd < 0) return tbx_out_not_open_(err);
    uint64_t end;
    tbx_status st = tbx_out_check_range_(off, n, &end, err);
    if (st != TBX_OK) return st;
    uint64_t pos = off;
    while (pos < end) {
        uint64_t left = end - pos;
        size_t chunk = left < (uint64_t)ZERO_CHUNK ? (size_t)left : ZERO_CHUNK;
        st = tbx_out_write_all_(o, pos, zero_bytes, chunk, err);
        if (st != TBX_OK) return st;
        pos += chunk;
    }
    if (n > 0 && end > o->size) o->size = end;
    return TBX_OK;
}

tbx_status tbx_out_pread(tbx_out *o, uint64_t off, void *buf, size_t len, tbx_error *err) {
    if (!o || !o->tmp_path || o->fd < 0) return tbx_out_not_open_(err);
    uint64_t end;
    tbx_status st = tbx_out_check_range_(off, (uint64_t)len, &end, err);
    if (st != TBX_OK) return st;
    if (end > o->size)
        return tbx_err(err, TBX_E_STATE, off, "output",
                       "output: reading back %zu bytes at byte %" PRIu64 " past the %" PRIu64
                       " bytes written", len, off, o->size);
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t r = pread(o->fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return tbx_err(err, TBX_E_IO, off, "output",
                           "reading back %zu bytes at byte %" PRIu64 " of %s failed: %s", len,
                           off, o->tmp_path, r < 0 ? strerror(errno) : "end of file");
        p += (size_t)r;
        off += (uint64_t)r;
        len -= (size_t)r;
    }
    return TBX_OK;
}


/* Best effort: make the rename durable. Some file systems cannot fsync a directory. */
static void sync_dir(const tbx_alloc *al, const char *path) {
    char *dir = tbx_path_dir_(al, path);
    if (!dir) return;
    int dfd = open(dir, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (dfd >= 0) {
        tbx_out_syncs_++;
        while (fsync(dfd) != 0 && errno == EINTR) {
        }
        close(dfd);
    }
    tbx_free(al, dir, strlen(dir) + 1);
}

/* Renames the temporary file over the destination; without overwrite, never over a file that
 * appeared meanwhile. */
static int rename_into_place(const tbx_out *o) {
    if (o->flags & (TBX_OUT_OVERWRITE | TBX_OUT_EDIT)) return rename(o->tmp_path, o->path);
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, o->tmp_path, AT_FDCWD, o->path, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
#endif
    /* no RENAME_NOREPLACE here: link() fails with EEXIST as well */
    if (link(o->tmp_path, o->path) == 0) {
        (void)unlink(o->tmp_path);
        return 0;
    }
    if (errno == EEXIST) return -1;
    struct stat sb;
    if (lstat(o->path, &sb) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(o->tmp_path, o->path);
}

tbx_status tbx_out_commit(tbx_out *o, uint64_t size, tbx_error *err) {
    if (!o || !o->tmp_path || o->fd < 0) return tbx_out_not_open_(err);
    tbx_status st;
    if (size > (uint64_t)INT64_MAX) {
        st = tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "output",
                     "output: size %" PRIu64 " is past the largest file offset", size);
        goto fail;
    }
    int r;
    do {
        r = ftruncate(o->fd, (off_t)size);
    } while (r != 0 && errno == EINTR);
    if (r != 0) {
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "output", "cannot set size of %s to %" PRIu64
                     " bytes: %s", o->tmp_path, size, strerror(errno));
        goto fail;
    }
    if (!(o->flags & TBX_OUT_NO_SYNC)) {
        tbx_out_syncs_++;
        do {
            r = fsync(o->fd);
        } while (r != 0 && errno == EINTR);
        if (r != 0) {
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "output", "cannot sync %s: %s",
                         o->tmp_path, strerror(errno));
            goto fail;
        }
    }
    struct stat sb;
    bool present = lstat(o->path, &sb) == 0;
    /* An input may have been opened on the destination since tbx_out_open. */
    if (present && !(o->flags & TBX_OUT_EDIT) &&
        tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino)) {
        st = tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                     "refusing to overwrite input file %s", o->path);
        goto fail;
    }
    /* The file that was checked (and locked) must be the one replaced: anything else means a
     * writer that ignores the lock replaced it meanwhile, and renaming would lose its update. */
    if (o->existed && (!present || (uint64_t)sb.st_dev != o->dev || (uint64_t)sb.st_ino != o->ino)) {
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                     "%s was replaced or removed by another process while this write was in "
                     "progress; nothing was written", o->path);
        goto fail;
    }
    if (rename_into_place(o) != 0) {
        if (errno == EEXIST)
            st = tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                         "output file %s appeared while writing (overwrite not requested)",
                         o->path);
        else
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot rename %s to %s: %s",
                         o->tmp_path, o->path, strerror(errno));
        goto fail;
    }
    /* The temporary name is gone: forget it so that abort removes nothing. */
    tmp_unregister(o->slot);
    o->slot = -1;
    tbx_free(o->al, o->tmp_path, strlen(o->tmp_path) + 1);
    o->tmp_path = NULL;
    /* Closing releases the locks (the new file's and the replaced one's): waiting writers then
     * find the new file under the name. */
    close(o->fd);
    o->fd = -1;
    if (!(o->flags & TBX_OUT_NO_SYNC)) sync_dir(o->al, o->path);
    tbx_out_abort(o); /* closes the lock, frees the destination name; safe to abort again */
    o->size = size;
    return TBX_OK;

fail:
    tbx_out_abort(o);
    return st;
}

void tbx_out_abort(tbx_out *o) {
    if (!o) return;
    /* Descriptors are owned only while a destination name is held: a zeroed struct (fd 0) or a
     * committed one closes nothing. */
    if (o->path) {
        if (o->tmp_path) {
            (void)unlink(o->tmp_path);
            tmp_unregister(o->slot);
            tbx_free(o->al, o->tmp_path, strlen(o->tmp_path) + 1);
        }
        if (o->fd >= 0) close(o->fd);
        if (o->lock_fd >= 0) {
            tbx_out_held_remove_(o->dev, o->ino);
            close(o->lock_fd);
        }
        tbx_free(o->al, o->path, strlen(o->path) + 1);
    }
    if (o->bounce) tbx_free(o->al, o->bounce, o->bounce_cap);
    const tbx_alloc *al = o->al;
    out_reset(o);
    o->al = al;
}
