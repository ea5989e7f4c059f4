/*
 * output_int.h - what the atomic output's files share (private to src/io): output.c (the
 * temporary file, writes, commit), copy.c (tbx_out_copy_fd) and edit.c (the destination rules
 * and the locks).
 */
#ifndef TBX_OUTPUT_INT_H
#define TBX_OUTPUT_INT_H

#include "io.h"

#include <sys/stat.h>

static inline bool same_inode(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* output.c */
/* The base name of a path (after its last '/'). */
const char *tbx_path_base_(const char *path);
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
/* Removes the temporary files of dead writers of `final` (those nobody holds locked). */
void tbx_out_remove_stale_(const tbx_alloc *al, const char *final);

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

#endif /* TBX_OUTPUT_INT_H */
