/*
 * outdir.c - an output that is a directory (a Hugging Face model directory written from a
 * GGUF file): every file goes into a temporary directory beside the destination,
 * "<parent>/.<base>.tbx-dir.XXXXXX", and the commit renames that directory to the destination,
 * so a reader sees the whole directory or none. The destination must not exist, or be an empty
 * directory (a rename replaces an empty directory; anything else is refused, never merged
 * into). An abort removes what was written (the files and subdirectories this writer created,
 * one level of subdirectories deep, which is all a model directory has).
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "output_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR_TAG ".tbx-dir."

/* The destination without trailing slashes ("/" stays), allocated. */
static char *trim(const tbx_alloc *al, const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    return tbx_memdup0(al, path, n);
}

/* Is directory `path` empty? (-1: cannot tell, errno set) */
static int dir_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int empty = 1;
    for (struct dirent *e; empty && (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(d);
    return empty;
}

static tbx_status check_dest(const char *final, tbx_error *err) {
    struct stat st;
    if (lstat(final, &st) != 0) {
        if (errno == ENOENT) return TBX_OK;
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot examine %s: %s", final,
                       strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                       "%s exists and is not a directory (the output is a model directory)",
                       final);
    int e = dir_empty(final);
    if (e < 0)
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot list %s: %s", final,
                       strerror(errno));
    if (!e)
        return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                       "directory %s is not empty (a model directory is written whole into a "
                       "new or empty directory, never merged into one)", final);
    return TBX_OK;
}

tbx_status tbx_outdir_check(const char *path, tbx_error *err) {
    if (!path || !*path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output path is NULL or "
                       "empty");
    char buf[4096];
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    if (n >= sizeof buf)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output path too long");
    memcpy(buf, path, n);
    buf[n] = 0;
    tbx_status s = check_dest(buf, err);
    if (s != TBX_OK) return s;
    /* its parent must exist */
    const char *slash = strrchr(buf, '/');
    char parent[4096];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == buf) snprintf(parent, sizeof parent, "/");
    else snprintf(parent, sizeof parent, "%.*s", (int)(slash - buf), buf);
    struct stat st;
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "directory %s does not exist",
                       parent);
    return TBX_OK;
}

tbx_status tbx_outdir_open(tbx_outdir *d, const tbx_alloc *al, const char *path, unsigned flags,
                           tbx_error *err) {
    memset(d, 0, sizeof *d);
    d->al = al;
    d->flags = flags;
    tbx_status s = tbx_outdir_check(path, err);
    if (s != TBX_OK) return s;
    d->final = trim(al, path);
    char *dir = d->final ? tbx_path_dir_(al, d->final) : NULL;
    if (!d->final || !dir) {
        tbx_free(al, dir, dir ? strlen(dir) + 1 : 0);
        tbx_outdir_abort(d);
        return tbx_err_nomem(err, "path");
    }
    const char *base = tbx_path_base_(d->final);
    const size_t tl = strlen(dir) + 1 + 1 + strlen(base) + strlen(DIR_TAG) + TMP_SUFFIX_LEN + 1;
    d->tmp = tbx_malloc(al, tl);
    if (!d->tmp) {
        tbx_free(al, dir, strlen(dir) + 1);
        tbx_outdir_abort(d);
        return tbx_err_nomem(err, "path");
    }
    int e = EEXIST;
    for (int tries = 0; tries < 16 && e == EEXIST; tries++) {
        char sfx[TMP_SUFFIX_LEN + 1];
        tbx_out_tmp_suffix_(sfx);
        snprintf(d->tmp, tl, "%s/.%s%s%s", dir, base, DIR_TAG, sfx);
        e = mkdir(d->tmp, 0755) == 0 ? 0 : errno;
    }
    if (e) {
        s = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                    "cannot create a temporary directory in %s: %s", dir, strerror(e));
        tbx_free(al, dir, strlen(dir) + 1);
        tbx_free(al, d->tmp, tl);
        d->tmp = NULL;
        tbx_outdir_abort(d);
        return s;
    }
    d->tmp_cap = tl;
    tbx_free(al, dir, strlen(dir) + 1);
    return TBX_OK;
}

const char *tbx_outdir_tmp(const tbx_outdir *d) { return d->tmp; }

tbx_status tbx_outdir_path(const tbx_outdir *d, const char *rel, char *out, size_t cap,
                           tbx_error *err) {
    int w = snprintf(out, cap, "%s/%s", d->tmp, rel);
    if (w < 0 || (size_t)w >= cap)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output path too long");
    return TBX_OK;
}

tbx_status tbx_outdir_mkdir(tbx_outdir *d, const char *rel, tbx_error *err) {
    char p[4096];
    tbx_status s = tbx_outdir_path(d, rel, p, sizeof p, err);
    if (s != TBX_OK) return s;
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot create %s: %s", p,
                       strerror(errno));
    return TBX_OK;
}

tbx_status tbx_outdir_write(tbx_outdir *d, const char *rel, const void *data, size_t n,
                            tbx_error *err) {
    char p[4096];
    tbx_status s = tbx_outdir_path(d, rel, p, sizeof p, err);
    if (s != TBX_OK) return s;
    tbx_out o;
    memset(&o, 0, sizeof o);
    s = tbx_out_open(&o, d->al, p, d->flags & TBX_OUT_NO_SYNC, err);
    if (s == TBX_OK && n) s = tbx_out_pwrite(&o, 0, data, n, err);
    if (s == TBX_OK) s = tbx_out_commit(&o, n, err);
    tbx_out_abort(&o);
    return s;
}

/* Removes the files of directory p and its subdirectories one level deep, then p. */
static void remove_tree(const char *p, int depth) {
    DIR *dd = opendir(p);
    if (dd) {
        for (struct dirent *e; (e = readdir(dd)) != NULL;) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char c[4096];
            if (snprintf(c, sizeof c, "%s/%s", p, e->d_name) >= (int)sizeof c) continue;
            struct stat st;
            if (lstat(c, &st) != 0) continue;
            if (S_ISDIR(st.st_mode)) {
                if (depth < 1) remove_tree(c, depth + 1);
            } else {
                unlink(c);
            }
        }
        closedir(dd);
    }
    rmdir(p);
}

tbx_status tbx_outdir_commit(tbx_outdir *d, tbx_error *err) {
    if (!d->tmp) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "path", "output directory is "
                                "not open");
    /* the destination rules again: it may have changed since the open */
    tbx_status s = check_dest(d->final, err);
    if (s != TBX_OK) return s;
    if (!(d->flags & TBX_OUT_NO_SYNC)) {
        int fd = open(d->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
    }
    if (rename(d->tmp, d->final) != 0)
        return tbx_err(err, errno == ENOTEMPTY || errno == EEXIST ? TBX_E_EXISTS : TBX_E_IO,
                       TBX_NO_OFFSET, "path", "cannot rename %s to %s: %s", d->tmp, d->final,
                       strerror(errno));
    if (!(d->flags & TBX_OUT_NO_SYNC)) {
        char *dir = tbx_path_dir_(d->al, d->final);
        int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
        tbx_free(d->al, dir, dir ? strlen(dir) + 1 : 0);
    }
    tbx_free(d->al, d->tmp, d->tmp_cap);
    d->tmp = NULL;
    tbx_outdir_abort(d);
    return TBX_OK;
}

void tbx_outdir_abort(tbx_outdir *d) {
    if (!d) return;
    if (d->tmp) {
        remove_tree(d->tmp, 0);
        tbx_free(d->al, d->tmp, d->tmp_cap);
        d->tmp = NULL;
    }
    if (d->final) tbx_free(d->al, d->final, strlen(d->final) + 1);
    d->final = NULL;
}
