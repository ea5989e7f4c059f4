/*
 * tbx_test_dir.h - a unit test's own temporary directory: created on first use under
 * tbx_test_tmpdir() as <prefix>_XXXXXX, emptied and removed at exit. tbx_test_dir_file() gives
 * a path in it, tbx_test_dir_count() the files it holds (hidden ones aside: a conversion that
 * failed must leave none). Include after tbx_test.h, in a file that defines _GNU_SOURCE
 * (mkdtemp) before its first include.
 */
#ifndef TBX_TEST_DIR_H
#define TBX_TEST_DIR_H
#include <dirent.h>
#include <unistd.h>

static char tbx_test_dir_[512];

static void tbx_test_dir_remove_(void) {
    DIR *d = opendir(tbx_test_dir_);
    struct dirent *e;
    char p[800];
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", tbx_test_dir_, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(tbx_test_dir_);
}

static inline const char *tbx_test_dir_file(char *buf, size_t cap, const char *prefix,
                                            const char *name) {
    if (!tbx_test_dir_[0]) {
        if (!mkdtemp(tbx_test_tmppath(tbx_test_dir_, sizeof tbx_test_dir_, "%s_XXXXXX", prefix)))
            abort();
        atexit(tbx_test_dir_remove_);
    }
    snprintf(buf, cap, "%s/%s", tbx_test_dir_, name);
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
