/*
 * access.h - reading, validating and writing any file through its driver's hooks (src/access/):
 * the machinery behind tbx_tensor_read*, tbx_read_batch, tbx_validate and tbx_writer_*. It sees
 * core, io and quant; it never includes a driver (it calls them through struct tbx_driver) and
 * never the registry (the façade hands it the driver).
 */
#ifndef TBX_ACCESS_H
#define TBX_ACCESS_H

#include "io.h"

/* TBX_OK when every path source of f (f->src and the extra sources) still has the bytes it had
 * when opened and no mapped byte of it was found missing; else TBX_E_TRUNCATED (api/file.c). */
tbx_status tbx_file_check_sources(const tbx_file *f, tbx_error *err);

/* Section i's bytes read whole into a new buffer (*len bytes; give it back with
 * tbx_free(&f->al, *buf, *len ? *len : 1)), after checking the size against
 * f->limits.max_side_file_bytes: a larger section fails with TBX_E_LIMIT naming it, its size and
 * the limit. Every reader of a whole side file (tbx_convert's sections, the Hugging Face ->
 * GGUF conversion) goes through it, so one limit applies everywhere. */
tbx_status tbx_section_load_(tbx_file *f, uint64_t i, void **buf, size_t *len, tbx_error *err);

/* For a caller whose tensor names and shapes outlive the writer (tbx_convert: the input handle
 * stays open until finish or abort): the writer keeps pointers to them instead of copies, and
 * sizes its table for n tensors at once. `names` (may be NULL: the writer builds its own index)
 * is the caller's index of exactly the names it will add, in order (entry i is the i-th tensor
 * added; the names are distinct): the writer then keeps no index of its own and checks no
 * duplicates. Call before the first tensor. */
tbx_status tbx_writer_borrow_descs_(tbx_writer *w, size_t n, const tbx_names *names,
                                    tbx_error *err);
/* Records the base name of the input's model directory (see tbx_writer.src_dir; a copy). Call
 * before the first metadata entry, section or tensor. */
tbx_status tbx_writer_set_source_dir_(tbx_writer *w, const char *name, size_t len, tbx_error *err);
/* Would tbx_writer_add_section take a section of this name, type and length? (its checks, the
 * driver's w_check_section included, without the bytes: tbx_convert asks before reading one) */
tbx_status tbx_writer_check_section_(tbx_writer *w, const char *name, uint32_t type,
                                     size_t len, tbx_error *err);
/* tbx_writer_add_meta for a caller whose key and value outlive the writer (tbx_convert): the
 * writer keeps pointers to them instead of copies. */
tbx_status tbx_writer_add_meta_borrowed_(tbx_writer *w, const char *key, size_t key_len,
                                         const tbx_value *value, tbx_error *err);

/* Tensor bytes that pass unchanged from an input file: tbx_writer_write_tensor's rules and
 * checks, the len bytes of `fd` at fd_off copied by tbx_out_copy_fd (in the kernel). Only for
 * a writer whose driver does not look at the bytes (no w_data: tbx_writer_copies_fd_). */
bool tbx_writer_copies_fd_(const tbx_writer *w);
tbx_status tbx_writer_copy_fd_(tbx_writer *w, uint64_t index, int fd, uint64_t fd_off,
                               uint64_t len, tbx_error *err);
/* Bytes [pos, pos + len) of dense tensor `i` of `in`, as stored, appended to tensor `wi` of `w`
 * (writer.c): copied in the kernel when the input's component is raw bytes of a file with
 * nothing left to check (tbx_comp_served_raw, no pending digest) and the writer takes copies,
 * else read into buf (cap bytes, > 0) piece by piece and written. */
tbx_status tbx_writer_copy_range_(tbx_file *in, uint64_t i, uint64_t pos, uint64_t len,
                                  tbx_writer *w, uint64_t wi, void *buf, size_t cap,
                                  tbx_error *err);
/* The descriptor and file offset of bytes [pos, pos + len) of tensor i when they can be copied
 * from the file as they are: one raw component of a path source, no check pending (file.c). */
bool tbx_file_fd_range_(const tbx_file *in, uint64_t i, uint64_t pos, uint64_t len, int *fd,
                        uint64_t *off);
/* Says that the reads after those under way go to bytes [pos, pos + len) of tensor i's first
 * component (read.c): its source may fetch them meanwhile (a remote one does). Nothing for an
 * encoded component or a range outside it. */
void tbx_tensor_read_next_(tbx_file *f, uint64_t i, uint64_t pos, uint64_t len);


/* The generic steps of every open (the façade's tbx_open_* pick the driver, src/api/open.c):
 * tbx_file_new_ allocates a handle with the caller's allocator, limits and options (no source
 * yet); tbx_file_open_done_ ends an open whose driver returned `st`: a mapped file must still be
 * whole, tensors that share bytes must fit the budget, and an open that failed on a mapped file
 * that shrank reports the shrink, and the version the driver found (f->version) must be one
 * its row declares readable (TBX_E_BAD_VERSION naming it otherwise); it closes f on failure,
 * else sets *out. */
tbx_status tbx_file_new_(tbx_file **out, const tbx_open_options *opt, tbx_error *err);
tbx_status tbx_file_open_done_(tbx_file *f, tbx_status st, tbx_file **out, tbx_error *err);

/* A writer of driver `drv` on `path` (src/access/write.c): `opt` complete (this version's
 * struct), every option checked against what the driver row declares (alignment, compression,
 * digests, versions: refused, never ignored), the temporary file created next to `path`.
 * `known` (the registry's list, or NULL) names the dtypes of other formats in refusals. */
tbx_status tbx_writer_create_(tbx_writer **out, const tbx_driver *drv, const char *path,
                              const tbx_write_options *opt, uint32_t internal_flags,
                              const tbx_driver *const *known, tbx_error *err);

#endif /* TBX_ACCESS_H */
