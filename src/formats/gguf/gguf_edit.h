/*
 * gguf_edit.h - what the GGUF file tools of the façade (src/api/gguf_tools.c: tbx_gguf_set_meta,
 * tbx_gguf_del_meta, tbx_gguf_split, tbx_gguf_merge) ask the GGUF driver, so that they carry no
 * wire rule of their own: whether a file is big-endian, where a metadata entry's value lies (as
 * the reader found it: no second walk of the header) and the bytes a value takes on the wire.
 * Defined in gguf_common.c. Only src/api includes this header (cmake/layers.cmake: the façade
 * sees the format folders); the driver's own files use gguf_int.h.
 *
 * An in-place edit of entry i overwrites [type_at, end) of the file, when the new value's bytes
 * are exactly as many:
 *
 *   entry i                           type_at                                end
 *   v                                 v                                      v
 *   +----------------+----------------+-------------+------------------------+------------------
 *   | u64 key length | key bytes      | u32 type id | value                  | entry i + 1 (the
 *   +----------------+----------------+-------------+------------------------+ last: the first
 *                                     \___ tbx_gguf_kv_value_bytes_(new) ___/   tensor info)
 */
#ifndef TBX_GGUF_EDIT_H
#define TBX_GGUF_EDIT_H

#include "model.h"

/* Is f, a handle the GGUF driver opened, a big-endian file? false for any other handle. */
bool tbx_gguf_big_endian_(const tbx_file *f);

/* Where metadata entry i of f (a handle the GGUF driver opened; entry i of tbx_meta_key) is
 * stored in f's own file: *type_at gets the offset of its value's type id, *end the end of its
 * value. TBX_E_INVALID_ARG when f is not such a handle or has no entry i. */
tbx_status tbx_gguf_kv_span_(const tbx_file *f, uint64_t i, uint64_t *type_at, uint64_t *end,
                             tbx_error *err);

/* The bytes GGUF v2/v3 stores for `v` after a key (its u32 type id, then the value), written to
 * dst when cap is large enough; returns their count (also when dst is NULL or too small, as a
 * size query), or 0 when v is neither a scalar GGUF has nor a string. */
size_t tbx_gguf_kv_value_bytes_(const tbx_value *v, uint8_t *dst, size_t cap);

#endif /* TBX_GGUF_EDIT_H */
