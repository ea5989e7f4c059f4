/*
 * output_int.h - what the atomic output's files share (private to src/io): output.c (the
 * temporary file, writes, commit), copy.c (tbx_out_copy_fd), edit.c (the destination rules
 * and the locks) and tmpname.c (the temporary files' names).
 */
#ifndef TBX_OUTPUT_INT_H
#define TBX_OUTPUT_INT_H

#include "io.h"

#include <sys/stat.h>

static inline bool same_inode(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The temporary file of a destination "<dir>/<base>" is "<dir>/.<base>.tbx-tmp.XXXXXX". */
#define TMP_TAG ".tbx-tmp."
#define TMP_TAG_LEN 9
#define TMP_SUFFIX_LEN 6

/* tmpname.c */
/* The base name of a path (after its last '/'). */
const char *tbx_path_base_(const char *path);
/* The directory of a path, without trailing slash ("." when none, "/" for the root), allocated
 * (NULL when out of memory). */
char *tbx_path_dir_(const tbx_alloc *al, const char *path);
/* Six characters from [A-Za-z0-9] that differ between calls, processes and runs, NUL-ended. */
void tbx_out_tmp_suffix_(char out[TMP_SUFFIX_LEN + 1]);
/* Removes the temporary files of dead writers of `final`: ".<base>.tbx-tmp.XXXXXX" files of
 * this user on which LOCK_EX can be taken at once (a live writer holds it on its own file). */
void tbx_out_remove_stale_(const tbx_alloc *al, const char *final);

/* output.c */
/* TBX_E_STATE "output file is not open". */
tbx_status tbx_out_not_open_(tbx_error *err);
/* [off, off + len) must end at a representable file offset (TBX_E_OVERFLOW otherwise). */
tbx_status tbx_out_check_range_(uint64_t off, uint64_t len, uint64_t *end, tbx_error *err);
/* pwrite of all len bytes at off (the fault hook before every piece; EINTR retried), noted for
 * the early writeback. */
tbx_status tbx_out_write_all_(tbx_out *o, uint64_t off, const void *data, size_t len,
                              tbx_error *err);
/* Bytes [pos, pos + n) of the temporary file were written (the early writeback). */
void tbx_out_wb_note_(tbx_out *o, uint64_t pos, uint64_t n);

/* edit.c */
/* Follows `path` through symbolic links (its last component, as often as it is one): *final
 * gets the name of the file to write (allocated), *via_link whether a link was followed. */
tbx_status tbx_out_resolve_(const tbx_alloc *al, const char *path, char **final,
                            bool *via_link, tbx_error *err);
/* The destination rules at tbx_out_open (see edit.c). */
tbx_status tbx_out_claim_(tbx_out *o, const char *path, const char *final, bool via_link,
                          tbx_error *err);
/* The lock of (dev, ino) is released (taken by tbx_out_claim_ or tbx_edit_lock). */
void tbx_out_held_remove_(uint64_t dev, uint64_t ino);

/* (output.c) A temporary name of this process that tbx_remove_temp_files removes while it is
 * registered (a file of an output set, between its shard's commit and the set's rename):
 * its slot, or -1 when the table is full or the name too long. */
int tbx_tmp_register_(const char *path);
void tbx_tmp_unregister_(int slot);

#endif /* TBX_OUTPUT_INT_H */
