/*
 * edit.c - which file a write replaces, and the locks that keep writers and edits of one file
 * from losing each other's work: the destination rules of tbx_out_open (tbx_out_claim_), the
 * lock of a file edited in place or rewritten (tbx_edit_lock: the GGUF editing tools), and the
 * table of the files this process holds locked.
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
 * An edit (tbx_edit_lock) takes that same lock first, on the file the name refers to once the
 * lock is held (read-write when permitted), and keeps it while the caller parses the file and
 * writes it in place through the descriptor, or replaces it through a writer opened with
 * TBX_OUT_EDIT. The rules of TBX_OUT_EDIT (tbx_out_claim_, and tbx_out_commit in output.c):
 * the destination must still exist; it may be an open input (the edited file usually is); no
 * second lock is taken (the edit holds it: this process refuses to lock a file twice, as two
 * flock locks of one process would wait for each other); the replacement keeps the edited
 * file's permission bits; it is renamed over the destination as an overwrite would be.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "output_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINK_HOPS 40
#define LOCK_RETRIES 1000

/* ------------------------------------------------------------------------------------------ */
/* The destination: symbolic links, kind, lock                                                 */
/* ------------------------------------------------------------------------------------------ */
/* Follows `path` through symbolic links (its last component, as often as it is one): *final
 * gets the name of the file to write (allocated), *via_link whether a link was followed. */
tbx_status tbx_out_resolve_(const tbx_alloc *al, const char *path, char **final,
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
            size_t dlen = buf[0] == '/' ? 0 : (size_t)(tbx_path_base_(cur) - cur);
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

void tbx_out_held_remove_(uint64_t dev, uint64_t ino) {
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

/* The destination rules of tbx_out_open (see the top): `final` is `path` with its symbolic
 * links followed (via_link: there were some). Sets o's lock_fd, existed, dev, ino and mode from
 * o->flags and what is at `final`. On failure the caller aborts o, which releases a lock taken
 * here. */
tbx_status tbx_out_claim_(tbx_out *o, const char *path, const char *final, bool via_link,
                          tbx_error *err) {
    const bool edit = (o->flags & TBX_OUT_EDIT) != 0;
    const bool overwrite = edit || (o->flags & TBX_OUT_OVERWRITE);
    struct stat sb;
    if (lstat(final, &sb) != 0) {
        if (errno != ENOENT)
            return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot stat %s: %s", final,
                           strerror(errno));
        if (edit)
            return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "%s no longer exists", final);
        if (via_link && !overwrite)
            return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                           "output %s is a dangling symbolic link to %s (overwrite not requested; "
                           "with it, %s is created and the link kept)", path, final, final);
        return TBX_OK;
    }
    tbx_status st = check_kind(final, &sb, err);
    if (st != TBX_OK) return st;
    if (!edit && tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino))
        return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                       "refusing to overwrite input file %s", final);
    if (!overwrite)
        return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                       "output file %s exists (overwrite not requested)", final);
    if (!edit) { /* an edit's caller holds the lock already (tbx_edit_lock) */
        st = lock_existing(final, false, &o->lock_fd, &sb, NULL, err);
        if (st != TBX_OK) return st;
        o->dev = (uint64_t)sb.st_dev; /* what abort unlocks */
        o->ino = (uint64_t)sb.st_ino;
        if (o->lock_fd >= 0 && tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino))
            return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                           "refusing to overwrite input file %s", final);
    }
    if (edit || o->lock_fd >= 0) {
        o->existed = true;
        o->dev = (uint64_t)sb.st_dev;
        o->ino = (uint64_t)sb.st_ino;
        o->mode = (unsigned)(sb.st_mode & 07777);
    }
    return TBX_OK;
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
    tbx_status st = tbx_out_resolve_(al, path, &e->path, &via_link, err);
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
    tbx_out_remove_stale_(al, e->path);
    return TBX_OK;
}

void tbx_edit_unlock(tbx_edit *e) {
    if (!e) return;
    if (e->fd >= 0) {
        tbx_out_held_remove_(e->dev, e->ino);
        close(e->fd);
    }
    if (e->path) tbx_free(e->al, e->path, strlen(e->path) + 1);
    const tbx_alloc *al = e->al;
    memset(e, 0, sizeof *e);
    e->fd = -1;
    e->al = al;
}
