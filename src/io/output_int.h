/*
 * output_int.h - what output.c, copy.c and edit.c share (private to src/io).
 */
#ifndef TBX_OUTPUT_INT_H
#define TBX_OUTPUT_INT_H

#include "io.h"

#include <sys/stat.h>

#define TMP_TAG ".tbx-tmp."
#define TMP_TAG_LEN 9
#define TMP_SUFFIX_LEN 6
#define MAX_LINK_HOPS 40
#define LOCK_RETRIES 1000

static inline bool same_inode(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

char *dir_of(const tbx_alloc *al, const char *path);
const char *base_of(const char *path);
extern const char alphabet[];
tbx_status not_open(tbx_error *err);
tbx_status write_all(tbx_out *o, uint64_t off, const void *data, size_t len, tbx_error *err);
void wb_note(tbx_out *o, uint64_t pos, uint64_t n);
tbx_status check_range(uint64_t off, uint64_t len, uint64_t *end, tbx_error *err);

tbx_status resolve_final(const tbx_alloc *al, const char *path, char **final, bool *via_link,
                         tbx_error *err);
tbx_status check_kind(const char *path, const struct stat *sb, tbx_error *err);
void held_remove(uint64_t dev, uint64_t ino);
tbx_status lock_existing(const char *path, bool want_write, int *fd_out, struct stat *sb_out,
                         bool *writable, tbx_error *err);
void remove_stale_temps(const tbx_alloc *al, const char *final);

#endif /* TBX_OUTPUT_INT_H */
