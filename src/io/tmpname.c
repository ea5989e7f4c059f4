/*
 * tmpname.c - the names of the atomic output's temporary files (output_int.h): a destination's
 * directory and base name, the random suffix of ".<name>.tbx-tmp.XXXXXX", and the removal of
 * the temporary files dead writers left beside a destination. Shared by the writer (output.c)
 * and the edit lock (edit.c), below both: it calls neither.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "output_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_uint_fast64_t tmp_counter;

char *tbx_path_dir_(const tbx_alloc *al, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return tbx_memdup0(al, ".", 1);
    if (slash == path) return tbx_memdup0(al, "/", 1);
    return tbx_memdup0(al, path, (size_t)(slash - path));
}

const char *tbx_path_base_(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

void tbx_out_tmp_suffix_(char out[TMP_SUFFIX_LEN + 1]) {
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

/* Removes the temporary files of dead writers of `final`: ".<base>.tbx-tmp.XXXXXX" files of
 * this user on which LOCK_EX can be taken at once (a live writer holds it on its own file). */
void tbx_out_remove_stale_(const tbx_alloc *al, const char *final) {
    char *dir = tbx_path_dir_(al, final);
    if (!dir) return;
    const char *base = tbx_path_base_(final);
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
