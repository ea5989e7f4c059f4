/*
 * output.c - the atomic file writer behind every tbx_writer.
 *
 * Bytes go to a temporary file ".<name>.tmp.XXXXXX" created in the destination's directory, so
 * the final rename() is atomic: readers see either the old file or the complete new one, and a
 * failed or abandoned write leaves nothing behind. The temporary file is created with
 * O_CREAT|O_EXCL and mode 0644, so the kernel applies the process umask itself (no racy umask()
 * read in a multi-threaded process). Commit fsyncs the file, renames it and fsyncs the
 * directory. The destination is never a file open for reading through this library (checked at
 * open and again just before the rename), and an existing file is replaced only when asked.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define ZERO_CHUNK ((size_t)64 * 1024)
#define WRITE_CHUNK ((size_t)1 << 30)
#define TMP_ATTEMPTS 256

static const uint8_t zero_bytes[ZERO_CHUNK];
static atomic_uint_fast64_t tmp_counter;

static void out_reset(tbx_out *o) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
}

/* Splits path into directory (without trailing slash; "." when none) and base name. */
static char *dir_of(const tbx_alloc *al, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return tbx_memdup0(al, ".", 1);
    if (slash == path) return tbx_memdup0(al, "/", 1);
    return tbx_memdup0(al, path, (size_t)(slash - path));
}

/* Six characters from [A-Za-z0-9] that differ between calls, processes and runs. */
static void random_suffix(char out[7]) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t mix[4] = {(uint64_t)atomic_fetch_add(&tmp_counter, 1), (uint64_t)getpid(),
                       (uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec};
    uint64_t h = tbx_hash_bytes(mix, sizeof mix);
    for (int i = 0; i < 6; i++) {
        out[i] = alphabet[h % 62];
        h /= 62;
    }
    out[6] = '\0';
}

/* Does `path` name an existing file, and is it an open input? */
static tbx_status check_destination(const char *path, bool overwrite, tbx_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return TBX_OK;
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot stat %s: %s", path,
                       strerror(errno));
    }
    if (tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino))
        return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                       "refusing to overwrite input file %s", path);
    if (S_ISDIR(sb.st_mode))
        return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path", "output %s is a directory", path);
    if (!overwrite)
        return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                       "output file %s exists (overwrite not requested)", path);
    return TBX_OK;
}

tbx_status tbx_out_open(tbx_out *o, const tbx_alloc *al, const char *path, bool overwrite,
                        tbx_error *err) {
    if (!o) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output is NULL");
    out_reset(o);
    o->al = al;
    if (!path || !*path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output path is NULL or empty");
    size_t plen = strlen(path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t blen = strlen(base);
    if (blen == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path",
                       "output path %s does not name a file", path);

    tbx_status st = check_destination(path, overwrite, err);
    if (st != TBX_OK) return st;

    /* "<dir>/.<base>.tmp.XXXXXX": dir prefix + '.' + base + ".tmp." + 6 + NUL */
    size_t dlen = (size_t)(base - path);
    size_t tlen = dlen + 1 + blen + 5 + 6;
    o->path = tbx_memdup0(al, path, plen);
    o->tmp_path = (char *)tbx_malloc(al, tlen + 1);
    if (!o->path || !o->tmp_path) {
        /* The temp name is not filled in yet: free both by their known sizes. */
        tbx_free(al, o->path, plen + 1);
        tbx_free(al, o->tmp_path, tlen + 1);
        out_reset(o);
        o->al = al;
        return tbx_err_nomem(err, "output path");
    }
    memcpy(o->tmp_path, path, dlen);
    o->tmp_path[dlen] = '.';
    memcpy(o->tmp_path + dlen + 1, base, blen);
    memcpy(o->tmp_path + dlen + 1 + blen, ".tmp.", 5);
    char *xs = o->tmp_path + dlen + 1 + blen + 5;

    int fd = -1;
    int e = 0;
    for (int attempt = 0; attempt < TMP_ATTEMPTS; attempt++) {
        random_suffix(xs);
        fd = open(o->tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd >= 0) break;
        e = errno;
        if (e != EEXIST && e != EINTR) break;
    }
    if (fd < 0) {
        char *dir = dir_of(al, path);
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                     "cannot create a temporary file in %s: %s", dir ? dir : path,
                     strerror(e ? e : EEXIST));
        tbx_free(al, dir, dir ? strlen(dir) + 1 : 0);
        /* Nothing was created: forget the temp name before freeing. */
        tbx_free(al, o->tmp_path, tlen + 1);
        o->tmp_path = NULL;
        tbx_out_abort(o);
        return st;
    }
    o->fd = fd;
    return TBX_OK;
}

static tbx_status not_open(tbx_error *err) {
    return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "output", "output file is not open");
}

int (*tbx_out_fault_hook_)(void);

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

/* Best effort: make the rename durable. Some file systems cannot fsync a directory. */
static void sync_dir(const tbx_alloc *al, const char *path) {
    char *dir = dir_of(al, path);
    if (!dir) return;
    int dfd = open(dir, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (dfd >= 0) {
        while (fsync(dfd) != 0 && errno == EINTR) {
        }
        close(dfd);
    }
    tbx_free(al, dir, strlen(dir) + 1);
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
    do {
        r = fsync(o->fd);
    } while (r != 0 && errno == EINTR);
    if (r != 0) {
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "output", "cannot sync %s: %s", o->tmp_path,
                     strerror(errno));
        goto fail;
    }
    int fd = o->fd;
    o->fd = -1;
    if (close(fd) != 0 && errno != EINTR) {
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "output", "cannot close %s: %s", o->tmp_path,
                     strerror(errno));
        goto fail;
    }
    /* An input may have been opened on the destination since tbx_out_open. */
    struct stat sb;
    if (stat(o->path, &sb) == 0 && tbx_inputs_contains((uint64_t)sb.st_dev, (uint64_t)sb.st_ino)) {
        st = tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path",
                     "refusing to overwrite input file %s", o->path);
        goto fail;
    }
    if (rename(o->tmp_path, o->path) != 0) {
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot rename %s to %s: %s",
                     o->tmp_path, o->path, strerror(errno));
        goto fail;
    }
    /* The temporary name is gone: forget it so that abort removes nothing. */
    tbx_free(o->al, o->tmp_path, strlen(o->tmp_path) + 1);
    o->tmp_path = NULL;
    sync_dir(o->al, o->path);
    tbx_out_abort(o); /* frees the destination name; the struct stays safe to abort again */
    o->size = size;
    return TBX_OK;

fail:
    tbx_out_abort(o);
    return st;
}

void tbx_out_abort(tbx_out *o) {
    if (!o) return;
    /* A descriptor is owned only while a temporary file exists: a zeroed struct (fd 0) or a
     * committed one closes nothing. */
    if (o->tmp_path) {
        if (o->fd >= 0) close(o->fd);
        unlink(o->tmp_path);
        tbx_free(o->al, o->tmp_path, strlen(o->tmp_path) + 1);
    }
    if (o->path) tbx_free(o->al, o->path, strlen(o->path) + 1);
    const tbx_alloc *al = o->al;
    out_reset(o);
    o->al = al;
}
