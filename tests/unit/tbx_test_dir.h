/*
 * tbx_test_dir.h - a unit test's own temporary directory: created on first use under
 * tbx_test_tmpdir() as <prefix>_XXXXXX, emptied (subdirectories too) and removed at exit.
 * tbx_test_dir_file() gives a path in it, tbx_test_dir_count() the files it holds (hidden ones
 * aside: a conversion that failed must leave none). Include after tbx_test.h, in a file that defines _GNU_SOURCE
 * (mkdtemp) before its first include.
 */
#ifndef TBX_TEST_DIR_H
#define TBX_TEST_DIR_H
#include <dirent.h>
#include <string.h>
#include <unistd.h>

static char tbx_test_dir_[512];

/* Remove `dir` and everything under it (hidden names included: a temporary file a failed
 * writer left must not outlive the test). */
static void tbx_test_dir_rm_tree_(const char *dir, int depth) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1024];
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0 && depth < 8) tbx_test_dir_rm_tree_(p, depth + 1);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static void tbx_test_dir_remove_(void) { tbx_test_dir_rm_tree_(tbx_test_dir_, 0); }

/* The directory itself, created on first use. */
static inline const char *tbx_test_dir_path(const char *prefix) {
    if (!tbx_test_dir_[0]) {
        if (!mkdtemp(tbx_test_tmppath(tbx_test_dir_, sizeof tbx_test_dir_, "%s_XXXXXX", prefix)))
            abort();
        atexit(tbx_test_dir_remove_);
    }
    return tbx_test_dir_;
}

static inline const char *tbx_test_dir_file(char *buf, size_t cap, const char *prefix,
                                            const char *name) {
    int n = snprintf(buf, cap, "%s/%s", tbx_test_dir_path(prefix), name);
    if (n < 0 || (size_t)n >= cap) abort(); /* a test's buffer too small for its path */
    return buf;
}

static inline int tbx_test_dir_count(void) {
    DIR *d = opendir(tbx_test_dir_);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}
#endif
