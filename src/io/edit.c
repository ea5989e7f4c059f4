/*
 * edit.c - the destination of a write and the lock of a file being edited.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "output_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* The destination: symbolic links, kind, lock                                                 */
/* ------------------------------------------------------------------------------------------ */
/* Follows `path` through symbolic links (its last component, as often as it is one): *final
 * gets the name of the file to write (allocated), *via_link whether a link was followed. */
tbx_status resolve_final(const tbx_alloc *al, const char *path, char **final,
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
tbx_status check_kind(const char *path, const struct stat *sb, tbx_error *err) {
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

void held_remove(uint64_t dev, uint64_t ino) {
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
tbx_status lock_existing(const char *path, bool want_write, int *fd_out,
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
void remove_stale_temps(const tbx_alloc *al, const char *final) {
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
