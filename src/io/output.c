/*
 * output.c - the atomic file writer behind every tbx_writer, and the lock of a file being edited.
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
 * Bytes that pass unchanged from an input file (tbx_out_copy_fd) are copied by the kernel
 * (copy_file_range: they never enter this process, and a file system that shares extents
 * shares them), 32 MiB per call, when the two offsets are congruent modulo 64 KiB. Otherwise
 * in 1 MiB pieces through a buffer (pread + pwrite; from 16 MiB on a second thread reads the
 * next pieces while this one writes): the kernel's copy between offsets that are not congruent
 * is slower than the two copies through a buffer that stays in cache (1.06 GiB on ext4: 0.42 s
 * against 0.27 s congruent, and 0.34-0.43 s pipelined with the writeback included), and
 * extents can be shared only between congruent offsets anyway. Also through the buffer when
 * the kernel cannot copy between the two files.
 *
 * The destination rules, the same for every writer:
 *  - A symbolic link is followed (the whole chain, once, at open): the file it points to is
 *    replaced and the link stays. A dangling link counts as an existing output: it needs
 *    overwrite, which then creates the file the link points to.
 *  - Only a regular file is ever replaced: a directory, FIFO, socket or device is refused with
 *    or without overwrite. Never a file open for reading through this library (checked at open
 *    and again just before the rename), except the file an edit replaces (TBX_OUT_EDIT).
 *  - An existing destination is locked (flock LOCK_EX on the file itself) from the check
 *    through the rename, so two writers replacing the same file, or a writer and an edit
 *    (tbx_edit_lock), take turns; a writer that gets the lock on a file that has meanwhile been
 *    replaced starts over on the new one. Readers never lock.
 *
 * Temporary files: each live one is entered in a fixed table that tbx_remove_temp_files()
 * (async-signal-safe) walks, so a signal handler can remove them, and each is flocked by its
 * writer while it lives. A process killed outright (SIGKILL) leaves its temporary file behind;
 * the next write to the same destination removes every ".<name>.tbx-tmp.XXXXXX" of the same
 * user on which it can take that lock (nobody is writing it any more).
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
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
#define TMP_TAG ".tbx-tmp."
#define TMP_TAG_LEN 9
#define TMP_SUFFIX_LEN 6
#define MAX_LINK_HOPS 40
#define LOCK_RETRIES 1000

static const uint8_t zero_bytes[ZERO_CHUNK];
static atomic_uint_fast64_t tmp_counter;

/* ------------------------------------------------------------------------------------------ */
/* Table of live temporary files, for tbx_remove_temp_files (async-signal-safe: it only reads  */
/* lock-free atomics and fixed buffers, and calls unlink).                                     */
/* ------------------------------------------------------------------------------------------ */
#define TMP_SLOTS 32
#define TMP_SLOT_LEN 4096

enum { SLOT_FREE = 0, SLOT_BUSY = 1, SLOT_LIVE = 2 };

static struct {
    atomic_int state;
    char path[TMP_SLOT_LEN];
} tmp_slots[TMP_SLOTS];

/* Enters a temporary file's name; -1 when the table is full or the name too long (the file is
 * then only removed by the writer itself or as a stale file later). */
static int tmp_register(const char *path) {
    size_t n = strlen(path);
    if (n >= TMP_SLOT_LEN) return -1;
    for (int i = 0; i < TMP_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (atomic_compare_exchange_strong(&tmp_slots[i].state, &expect, SLOT_BUSY)) {
            memcpy(tmp_slots[i].path, path, n + 1);
            atomic_store(&tmp_slots[i].state, SLOT_LIVE);
            return i;
        }
    }
    return -1;
}

static void tmp_unregister(int slot) {
    if (slot >= 0 && slot < TMP_SLOTS) atomic_store(&tmp_slots[slot].state, SLOT_FREE);
}

void tbx_remove_temp_files(void) {
    for (int i = 0; i < TMP_SLOTS; i++)
        if (atomic_load(&tmp_slots[i].state) == SLOT_LIVE) (void)unlink(tmp_slots[i].path);
}

static void out_reset(tbx_out *o) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->lock_fd = -1;
    o->slot = -1;
}

/* Splits path into directory (without trailing slash; "." when none) and base name. */
static char *dir_of(const tbx_alloc *al, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return tbx_memdup0(al, ".", 1);
    if (slash == path) return tbx_memdup0(al, "/", 1);
    return tbx_memdup0(al, path, (size_t)(slash - path));
}

static const char *base_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool names_a_file(const char *path) {
    const char *base = base_of(path);
    return *base && strcmp(base, ".") != 0 && strcmp(base, "..") != 0;
}

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/* Six characters from [A-Za-z0-9] that differ between calls, processes and runs. */
static void random_suffix(char out[TMP_SUFFIX_LEN + 1]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t mix[4] = {(uint64_t)atomic_fetch_add(&tmp_counter, 1), (uint64_t)getpid(),
                       (uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec};
    uint64_t h = tbx_hash_bytes(mix, sizeof mix);
    for (int i = 0; i < TMP_SUFFIX_LEN; i++) {
        out[i] = alphabet[h % 62];
        h /= 62;
    }
    out[TMP_SUFFIX_LEN] = '\0';
}

static bool same_inode(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* ------------------------------------------------------------------------------------------ */
/* The destination: symbolic links, kind, lock                                                 */
/* ------------------------------------------------------------------------------------------ */
/* Follows `path` through symbolic links (its last component, as often as it is one): *final
 * gets the name of the file to write (allocated), *via_link whether a link was followed. */
static tbx_status resolve_final(const tbx_alloc *al, const char *path, char **final,
                                bool *via_link, tbx_error *err) {
    *final = NULL;
    *via_link = false;
    char *cur = tbx_memdup0(al, path, strlen(path));
    if (!cur) return tbx_err_nomem(err, "output path");
    for (int hops = 0;; hops++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode)) {
            *final = cur;
            return TBX_OK;
        }
        tbx_status st = TBX_OK;
        char buf[4096];
        ssize_t n = hops < MAX_LINK_HOPS ? readlink(cur, buf, sizeof buf - 1) : -1;
        if (hops >= MAX_LINK_HOPS)
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                         "output %s: more than %d symbolic links to follow", path, MAX_LINK_HOPS);
        else if (n < 0 || (size_t)n >= sizeof buf - 1)
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                         "cannot read the symbolic link %s: %s", cur,
                         n < 0 ? strerror(errno) : "target too long");
        char *next = NULL;
        if (st == TBX_OK) {
            buf[n] = '\0';
            /* a relative target is relative to the link's directory */
            size_t dlen = buf[0] == '/' ? 0 : (size_t)(base_of(cur) - cur);
            next = (char *)tbx_malloc(al, dlen + (size_t)n + 1);
            if (!next) {
                st = tbx_err_nomem(err, "output path");
            } else {
                memcpy(next, cur, dlen);
                memcpy(next + dlen, buf, (size_t)n + 1);
            }
        }
        tbx_free(al, cur, strlen(cur) + 1);
        if (st != TBX_OK) return st;
        cur = next;
        *via_link = true;
    }
}

static const char *kind_name(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

/* Only regular files are ever replaced or edited. */
static tbx_status check_kind(const char *path, const struct stat *sb, tbx_error *err) {
    if (S_ISREG(sb->st_mode)) return TBX_OK;
    return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                   "output %s is %s: only a regular file is ever replaced", path,
                   kind_name(sb->st_mode));
}

/* The files this process holds locked (dev, ino). flock locks belong to open file descriptions,
 * so a second writer of the same file in this process would wait for the first forever (in the
 * same thread): it fails instead. */
#define HELD_MAX 64
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uint64_t dev, ino; } held[HELD_MAX];
static size_t held_n;

static bool held_contains(uint64_t dev, uint64_t ino) {
    bool found = false;
    pthread_mutex_lock(&held_lock);
    for (size_t i = 0; i < held_n && !found; i++) found = held[i].dev == dev && held[i].ino == ino;
    pthread_mutex_unlock(&held_lock);
    return found;
}

static bool held_add(uint64_t dev, uint64_t ino) {
    bool ok = false;
    pthread_mutex_lock(&held_lock);
    if (held_n < HELD_MAX) {
        held[held_n].dev = dev;
        held[held_n].ino = ino;
        held_n++;
        ok = true;
    }
    pthread_mutex_unlock(&held_lock);
    return ok;
}

static void held_remove(uint64_t dev, uint64_t ino) {
    pthread_mutex_lock(&held_lock);
    for (size_t i = 0; i < held_n; i++) {
        if (held[i].dev == dev && held[i].ino == ino) {
            held[i] = held[--held_n];
            break;
        }
    }
    pthread_mutex_unlock(&held_lock);
}

/* Opens the regular file at `path` and takes LOCK_EX on it (waiting for the writer that holds
 * it), then makes sure the name still refers to the locked file: a writer that held the lock
 * may have renamed a new file over it, and then it starts over on that one. *fd gets -1 when
 * nothing exists at `path`. want_write: open read-write when permitted (*writable says). */
static tbx_status lock_existing(const char *path, bool want_write, int *fd_out,
                                struct stat *sb_out, bool *writable, tbx_error *err) {
    *fd_out = -1;
    if (writable) *writable = false;
    for (int tries = 0; tries < LOCK_RETRIES; tries++) {
        struct stat sb;
        if (lstat(path, &sb) != 0) {
            if (errno == ENOENT) return TBX_OK;
            return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot stat %s: %s", path,
                           strerror(errno));
        }
        tbx_status st = check_kind(path, &sb, err);
        if (st != TBX_OK) return st;
        if (held_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino))
            return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "path",
                           "%s is being written or edited by this process already", path);
        const int fl = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
        int fd = -1;
        bool w = false;
        if (want_write && (fd = open(path, O_RDWR | fl)) >= 0) w = true;
        if (fd < 0) fd = open(path, O_RDONLY | fl);
        if (fd < 0) {
            if (errno == ENOENT || errno == ELOOP || errno == EINTR) continue; /* replaced */
            return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot open %s: %s", path,
                           strerror(errno));
        }
        struct stat fs, now;
        int r;
        while ((r = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
        }
        /* A file system without flock (r != 0) still gets the identity checks below. */
        if (fstat(fd, &fs) == 0 && S_ISREG(fs.st_mode) && lstat(path, &now) == 0 &&
            same_inode(&fs, &now)) {
            if (!held_add((uint64_t)fs.st_dev, (uint64_t)fs.st_ino)) {
                close(fd);
                return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "path",
                               "%s: more than %d files locked by this process", path, HELD_MAX);
            }
            int fl2 = fcntl(fd, F_GETFL);
            if (fl2 >= 0) (void)fcntl(fd, F_SETFL, fl2 & ~O_NONBLOCK);
            *fd_out = fd;
            *sb_out = fs;
            if (writable) *writable = w;
            return TBX_OK;
        }
        close(fd);
    }
    return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                   "%s kept being replaced while waiting for its lock", path);
}

/* Removes the temporary files of dead writers of `final`: ".<base>.tbx-tmp.XXXXXX" files of
 * this user on which LOCK_EX can be taken at once (a live writer holds it on its own file). */
static void remove_stale_temps(const tbx_alloc *al, const char *final) {
    char *dir = dir_of(al, final);
    if (!dir) return;
    const char *base = base_of(final);
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    tbx_free(al, dir, strlen(dir) + 1);
    if (!d) return;
    int dfd = dirfd(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (n[0] != '.' || strncmp(n + 1, base, blen) != 0 ||
            strncmp(n + 1 + blen, TMP_TAG, TMP_TAG_LEN) != 0)
            continue;
        const char *x = n + 1 + blen + TMP_TAG_LEN;
        if (strlen(x) != TMP_SUFFIX_LEN || strspn(x, alphabet) != TMP_SUFFIX_LEN) continue;
        int fd = openat(dfd, n, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat fs, ls;
        if (fstat(fd, &fs) == 0 && S_ISREG(fs.st_mode) && fs.st_uid == geteuid() &&
            flock(fd, LOCK_EX | LOCK_NB) == 0 && fstatat(dfd, n, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
            same_inode(&fs, &ls))
            (void)unlinkat(dfd, n, 0);
        close(fd);
    }
    closedir(d);
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
    tbx_status st = resolve_final(al, path, &final, &via_link, err);
    if (st != TBX_OK) return st;
    o->path = final;
    if (!names_a_file(final)) {
        st = tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path",
                     "output %s leads to %s, which does not name a file", path, final);
        goto fail;
    }
    bool edit = (flags & TBX_OUT_EDIT) != 0, overwrite = edit || (flags & TBX_OUT_OVERWRITE);

    struct stat sb;
    if (lstat(final, &sb) != 0) {
        if (errno != ENOENT) {
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot stat %s: %s", final,
                         strerror(errno));
            goto fail;
        }
        if (edit) {
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "%s no longer exists", final);
            goto fail;
        }
        if (via_link && !overwrite) {
            st = tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                         "output %s is a dangling symbolic link to %s (overwrite not requested; "
                         "with it, %s is created and the link kept)", path, final, final);
            goto fail;
        }
    } else {
        st = check_kind(final, &sb, err);
        if (st != TBX_OK) goto fail;
        if (!edit && tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino)) {
            st = tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                         "refusing to overwrite input file %s", final);
            goto fail;
        }
        if (!overwrite) {
            st = tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                         "output file %s exists (overwrite not requested)", final);
            goto fail;
        }
        if (!edit) { /* an edit's caller holds the lock already (tbx_edit_lock) */
            st = lock_existing(final, false, &o->lock_fd, &sb, NULL, err);
            if (st != TBX_OK) goto fail;
            o->dev = (uint64_t)sb.st_dev; /* what abort unlocks */
            o->ino = (uint64_t)sb.st_ino;
            if (o->lock_fd >= 0 && tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino)) {
                st = tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                             "refusing to overwrite input file %s", final);
                goto fail;
            }
        }
        if (edit || o->lock_fd >= 0) {
            o->existed = true;
            o->dev = (uint64_t)sb.st_dev;
            o->ino = (uint64_t)sb.st_ino;
            o->mode = (unsigned)(sb.st_mode & 07777);
        }
    }
    remove_stale_temps(al, final);

    /* "<dir>/.<base>.tbx-tmp.XXXXXX" */
    const char *base = base_of(final);
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
    for (int attempt = 0; attempt < TMP_ATTEMPTS; attempt++) {
        random_suffix(xs);
        fd = open(o->tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
            e = errno;
            if (e != EEXIST && e != EINTR) break;
            continue;
        }
        /* Held while the file lives: it is what tells a later writer that this file is not
         * stale. A writer that found it unlocked in the instant before may have removed it. */
        while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && lstat(o->tmp_path, &b) == 0 && same_inode(&a, &b)) break;
        close(fd);
        fd = -1;
        e = EEXIST;
    }
    if (fd < 0) {
        char *dir = dir_of(al, final);
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
    o->slot = tmp_register(o->tmp_path);
    /* an edit keeps the permission bits of the file it replaces */
    if (edit) (void)fchmod(fd, (mode_t)o->mode);
    return TBX_OK;

fail:
    tbx_out_abort(o);
    return st;
}

static tbx_status not_open(tbx_error *err) {
    return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "output", "output file is not open");
}

int (*tbx_out_fault_hook_)(void);

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
static void wb_note(tbx_out *o, uint64_t pos, uint64_t n) {
    if (o->flags & TBX_OUT_NO_SYNC) return;
    if (o->wb_hi != pos || o->wb_hi == o->wb_lo) { /* not adjacent to the current run */
        if (o->wb_hi - o->wb_lo >= WB_MIN) wb_start(o);
        o->wb_lo = o->wb_hi = pos;
    }
    o->wb_hi = pos + n;
    if (o->wb_hi - o->wb_lo >= WB_KICK) wb_start(o);
}

static tbx_status write_all(tbx_out *o, uint64_t off, const void *data, size_t len,
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
        wb_note(o, pos, (uint64_t)w);
        p += (size_t)w;
        pos += (uint64_t)w;
        left -= (size_t)w;
    }
    return TBX_OK;
}

/* [off, off + len) must end at a representable file offset. */
static tbx_status check_range(uint64_t off, uint64_t len, uint64_t *end, tbx_error *err) {
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
    if (!o || !o->tmp_path || o->fd < 0) return not_open(err);
    uint64_t end;
    tbx_status st = check_range(off, (uint64_t)len, &end, err);
    if (st != TBX_OK) return st;
    if (len == 0) return TBX_OK;
    if (!data)
        return tbx_err(err, TBX_E_INVALID_ARG, off, "output", "output: NULL data for %zu bytes", len);
    st = write_all(o, off, data, len, err);
    if (st != TBX_OK) return st;
    if (end > o->size) o->size = end;
    return TBX_OK;
}

tbx_status tbx_out_zero(tbx_out *o, uint64_t off, uint64_t n, tbx_error *err) {
    if (!o || !o->tmp_path || o->fd < 0) return not_open(err);
    uint64_t end;
    tbx_status st = check_range(off, n, &end, err);
    if (st != TBX_OK) return st;
    uint64_t pos = off;
    while (pos < end) {
        uint64_t left = end - pos;
        size_t chunk = left < (uint64_t)ZERO_CHUNK ? (size_t)left : ZERO_CHUNK;
        st = write_all(o, pos, zero_bytes, chunk, err);
        if (st != TBX_OK) return st;
        pos += chunk;
    }
    if (n > 0 && end > o->size) o->size = end;
    return TBX_OK;
}

tbx_status tbx_out_pread(tbx_out *o, uint64_t off, void *buf, size_t len, tbx_error *err) {
    if (!o || !o->tmp_path || o->fd < 0) return not_open(err);
    uint64_t end;
    tbx_status st = check_range(off, (uint64_t)len, &end, err);
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

/* ------------------------------------------------------------------------------------------ */
/* Copying bytes of another file (tensor bytes that pass unchanged)                            */
/* ------------------------------------------------------------------------------------------ */
int tbx_out_no_copy_range_;
_Atomic unsigned long tbx_out_syncs_;

#define COPY_BOUNCE ((size_t)1 << 20)
#define COPY_PIECE ((size_t)32 << 20)     /* per copy_file_range call */
#define COPY_CONGRUENT ((uint64_t)64 << 10) /* offsets the kernel copies fast (see the top) */

/* May a copy_file_range failure with this errno be retried through the buffer? (The kernel or
 * the file systems cannot copy these files: too old, different file systems, a sandbox.) */
static bool copy_range_unsupported(int e) {
    return e == ENOSYS || e == EXDEV || e == EINVAL || e == EOPNOTSUPP || e == EBADF ||
           e == EPERM || e == ETXTBSY;
}

static tbx_status copy_err(tbx_out *o, uint64_t pos, uint64_t in_off, uint64_t left,
                           const char *why, tbx_error *err) {
    tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "output",
            "copying %" PRIu64 " bytes from byte %" PRIu64 " of the input to byte %" PRIu64
            " of %s failed: %s", left, in_off, pos, o->tmp_path, why);
    if (err) err->offset = pos;
    return TBX_E_IO;
}

/* pread exactly n bytes at in_off; 0, an errno, or -1 when the input ended first. */
static int read_full(int in_fd, uint8_t *buf, size_t n, uint64_t in_off, size_t *got) {
    *got = 0;
    while (*got < n) {
        ssize_t r = pread(in_fd, buf + *got, n - *got, (off_t)(in_off + *got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno ? errno : EIO;
        if (r == 0) return -1;
        *got += (size_t)r;
    }
    return 0;
}

static tbx_status read_fail(tbx_out *o, uint64_t pos, uint64_t in_off, uint64_t left, int e,
                            tbx_error *err) {
    if (e > 0) return copy_err(o, pos, in_off, left, strerror(e), err);
    return tbx_err(err, TBX_E_TRUNCATED, in_off, "input",
                   "the input file ended while %" PRIu64 " more bytes were being copied from "
                   "it (it shrank?)", left);
}

/* A long copy through the buffer is a pipeline of COPY_SLOTS pieces: a second thread preads
 * the next pieces while this one pwrites (both are memory copies by the kernel, and writes to
 * one file are serialised by the file system anyway). The pieces are written in order by the
 * calling thread, so the bytes, the errors and the fault hook's calls are those of the serial
 * loop. */
#define COPY_SLOTS 4
#define COPY_PIPELINE_MIN ((uint64_t)16 << 20) /* shorter copies stay on one thread */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int in_fd;
    uint64_t in_off, len;
    uint8_t *buf[COPY_SLOTS];
    size_t n[COPY_SLOTS];
    int state[COPY_SLOTS]; /* 0 free, 1 filled, 2 read failed (e below) */
    int e;                 /* errno of the failed read, or -1: the input ended */
    uint64_t e_at;         /* input offset of that read */
    bool stop;             /* the writer gave up */
} copy_pipe;

static void *copy_reader(void *arg) {
    copy_pipe *cp = arg;
    for (uint64_t p = 0, k = 0; p < cp->len; p += COPY_BOUNCE, k++) {
        const int s = (int)(k % COPY_SLOTS);
        pthread_mutex_lock(&cp->mu);
        while (cp->state[s] != 0 && !cp->stop) pthread_cond_wait(&cp->cv, &cp->mu);
        const bool stop = cp->stop;
        pthread_mutex_unlock(&cp->mu);
        if (stop) break;
        const size_t n = cp->len - p < (uint64_t)COPY_BOUNCE ? (size_t)(cp->len - p) : COPY_BOUNCE;
        size_t got;
        const int e = read_full(cp->in_fd, cp->buf[s], n, cp->in_off + p, &got);
        pthread_mutex_lock(&cp->mu);
        cp->n[s] = n;
        cp->state[s] = e ? 2 : 1;
        if (e) {
            cp->e = e;
            cp->e_at = cp->in_off + p + got;
        }
        pthread_cond_broadcast(&cp->cv);
        pthread_mutex_unlock(&cp->mu);
        if (e) break;
    }
    return NULL;
}

/* The buffer: COPY_SLOTS pieces when pipelined, else one; kept for the next copies. */
static uint8_t *bounce_buf(tbx_out *o, size_t cap, tbx_error *err) {
    if (o->bounce_cap >= cap) return o->bounce;
    tbx_free(o->al, o->bounce, o->bounce_cap);
    o->bounce_cap = 0;
    o->bounce = (uint8_t *)tbx_malloc(o->al, cap);
    if (!o->bounce) {
        tbx_err_nomem(err, "copy buffer");
        return NULL;
    }
    o->bounce_cap = cap;
    return o->bounce;
}

static tbx_status copy_pipelined(tbx_out *o, uint64_t pos, int in_fd, uint64_t in_off,
                                 uint64_t len, bool *ran, tbx_error *err) {
    *ran = false;
    uint8_t *buf = bounce_buf(o, (size_t)COPY_SLOTS * COPY_BOUNCE, err);
    if (!buf) return TBX_E_NOMEM;
    copy_pipe cp;
    memset(&cp, 0, sizeof cp);
    cp.in_fd = in_fd;
    cp.in_off = in_off;
    cp.len = len;
    for (int s = 0; s < COPY_SLOTS; s++) cp.buf[s] = buf + (size_t)s * COPY_BOUNCE;
    if (pthread_mutex_init(&cp.mu, NULL) != 0) return TBX_OK;
    if (pthread_cond_init(&cp.cv, NULL) != 0) {
        pthread_mutex_destroy(&cp.mu);
        return TBX_OK;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, copy_reader, &cp) != 0) { /* the serial loop instead */
        pthread_cond_destroy(&cp.cv);
        pthread_mutex_destroy(&cp.mu);
        return TBX_OK;
    }
    *ran = true;
    tbx_status st = TBX_OK;
    for (uint64_t p = 0, k = 0; st == TBX_OK && p < len; p += COPY_BOUNCE, k++) {
        const int s = (int)(k % COPY_SLOTS);
        pthread_mutex_lock(&cp.mu);
        while (cp.state[s] == 0) pthread_cond_wait(&cp.cv, &cp.mu);
        const int state = cp.state[s];
        pthread_mutex_unlock(&cp.mu);
        if (state == 2) {
            st = read_fail(o, pos + (cp.e_at - in_off), cp.e_at, len - (cp.e_at - in_off), cp.e,
                           err);
            break;
        }
        st = write_all(o, pos + p, cp.buf[s], cp.n[s], err);
        pthread_mutex_lock(&cp.mu);
        cp.state[s] = 0;
        pthread_cond_broadcast(&cp.cv);
        pthread_mutex_unlock(&cp.mu);
    }
    pthread_mutex_lock(&cp.mu);
    cp.stop = true;
    pthread_cond_broadcast(&cp.cv);
    pthread_mutex_unlock(&cp.mu);
    pthread_join(th, NULL);
    pthread_cond_destroy(&cp.cv);
    pthread_mutex_destroy(&cp.mu);
    return st;
}

/* The rest of a copy through a buffer: pread from the input, pwrite to the output. */
static tbx_status copy_bounce(tbx_out *o, uint64_t pos, int in_fd, uint64_t in_off, uint64_t left,
                              tbx_error *err) {
    if (left >= COPY_PIPELINE_MIN && tbx_threads_default() > 1) {
        bool ran;
        tbx_status st = copy_pipelined(o, pos, in_fd, in_off, left, &ran, err);
        if (ran || st != TBX_OK) return st;
    }
    const size_t cap = left < (uint64_t)COPY_BOUNCE ? (size_t)left : COPY_BOUNCE;
    uint8_t *buf = bounce_buf(o, cap, err);
    if (!buf) return TBX_E_NOMEM;
    tbx_status st = TBX_OK;
    while (st == TBX_OK && left > 0) {
        size_t n = left < (uint64_t)cap ? (size_t)left : cap, got;
        const int e = read_full(in_fd, buf, n, in_off, &got);
        if (e) return read_fail(o, pos + got, in_off + got, left - got, e, err);
        st = write_all(o, pos, buf, n, err);
        pos += n;
        in_off += n;
        left -= n;
    }
    return st;
}

tbx_status tbx_out_copy_fd(tbx_out *o, uint64_t off, int in_fd, uint64_t in_off, uint64_t len,
                           tbx_error *err) {
    if (!o || !o->tmp_path || o->fd < 0) return not_open(err);
    uint64_t end, in_end;
    tbx_status st = check_range(off, len, &end, err);
    if (st != TBX_OK) return st;
    if (!tbx_add_u64(in_off, len, &in_end) || in_end > (uint64_t)INT64_MAX)
        return tbx_err(err, TBX_E_OVERFLOW, in_off, "input",
                       "input: %" PRIu64 " bytes at byte %" PRIu64 " pass the largest file offset",
                       len, in_off);
    if (len == 0) return TBX_OK;
    if (in_fd < 0)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "input", "input: no descriptor");
    uint64_t pos = off, left = len;
#ifdef __linux__
    /* In the kernel: the bytes go from the input's page cache to the output's without passing
     * through this process (and a file system that can share extents shares them). */
    const bool congruent = (off - in_off) % COPY_CONGRUENT == 0; /* unsigned: wraps the same */
    while (!tbx_out_no_copy_range_ && congruent && left > 0) {
        size_t piece = left < (uint64_t)COPY_PIECE ? (size_t)left : COPY_PIECE;
        int fault = tbx_out_fault_hook_ ? tbx_out_fault_hook_() : 0;
        if (fault) return copy_err(o, pos, in_off, left, strerror(fault), err);
        loff_t ip = (loff_t)in_off, op = (loff_t)pos;
        ssize_t r = copy_file_range(in_fd, &ip, o->fd, &op, piece, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (copy_range_unsupported(errno)) break; /* the rest through the buffer */
            return copy_err(o, pos, in_off, left, strerror(errno), err);
        }
        if (r == 0) return read_fail(o, pos, in_off, left, -1, err);
        wb_note(o, pos, (uint64_t)r);
        pos += (uint64_t)r;
        in_off += (uint64_t)r;
        left -= (uint64_t)r;
    }
#endif
    if (left > 0) st = copy_bounce(o, pos, in_fd, in_off, left, err);
    if (st != TBX_OK) return st;
    if (end > o->size) o->size = end;
    return TBX_OK;
}

/* Best effort: make the rename durable. Some file systems cannot fsync a directory. */
static void sync_dir(const tbx_alloc *al, const char *path) {
    char *dir = dir_of(al, path);
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
    if (!o || !o->tmp_path || o->fd < 0) return not_open(err);
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
            held_remove(o->dev, o->ino);
            close(o->lock_fd);
        }
        tbx_free(o->al, o->path, strlen(o->path) + 1);
    }
    if (o->bounce) tbx_free(o->al, o->bounce, o->bounce_cap);
    const tbx_alloc *al = o->al;
    out_reset(o);
    o->al = al;
}

/* ------------------------------------------------------------------------------------------ */
/* Edits                                                                                       */
/* ------------------------------------------------------------------------------------------ */
tbx_status tbx_edit_lock(tbx_edit *e, const tbx_alloc *al, const char *path, tbx_error *err) {
    if (!e) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "edit is NULL");
    memset(e, 0, sizeof *e);
    e->fd = -1;
    e->al = al;
    if (!path || !*path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "path is NULL or empty");
    bool via_link;
    tbx_status st = resolve_final(al, path, &e->path, &via_link, err);
    if (st != TBX_OK) return st;
    struct stat sb;
    if (lstat(e->path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                     "cannot edit %s: it is %s, not a regular file", e->path,
                     kind_name(sb.st_mode));
        tbx_edit_unlock(e);
        return st;
    }
    st = lock_existing(e->path, true, &e->fd, &sb, &e->writable, err);
    if (st == TBX_OK && e->fd < 0)
        st = via_link ? tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                                "cannot open %s: dangling symbolic link to %s", path, e->path)
                      : tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot open %s: %s", path,
                                strerror(ENOENT));
    if (st != TBX_OK) {
        tbx_edit_unlock(e);
        return st;
    }
    e->dev = (uint64_t)sb.st_dev;
    e->ino = (uint64_t)sb.st_ino;
    remove_stale_temps(al, e->path);
    return TBX_OK;
}

void tbx_edit_unlock(tbx_edit *e) {
    if (!e) return;
    if (e->fd >= 0) {
        held_remove(e->dev, e->ino);
        close(e->fd);
    }
    if (e->path) tbx_free(e->al, e->path, strlen(e->path) + 1);
    const tbx_alloc *al = e->al;
    memset(e, 0, sizeof *e);
    e->fd = -1;
    e->al = al;
}
