/*
 * gguf_edit.h - what the GGUF file tools of the façade (src/api/gguf_tools.c: tbx_gguf_set_meta,
 * tbx_gguf_del_meta, tbx_gguf_split, tbx_gguf_merge) ask the GGUF driver, so that they carry no
 * wire rule of their own: whether a file is big-endian, where a metadata entry's value lies (as
 * the reader found it: no second walk of the header), the bytes a value takes on the wire, and
 * the names and keys of a split set (llama.cpp's gguf-split; the reader opens such sets with the
 * same rules). Defined in gguf_common.c. Outside the folder only src/api includes this header
 * (cmake/layers.cmake: the façade sees the format folders); the driver's files have it through
 * gguf_int.h.
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

/* Split sets: "{stem}-00001-of-{N:05}.gguf" ... "{stem}-{N:05}-of-{N:05}.gguf", each shard
 * with split.no (u16, from 0), split.count (u16, N) and split.tensors.count (i32, all tensors). */
#define TBX_GGUF_SPLIT_MAX 65535u /* split.count is a u16 */
typedef struct tbx_gguf_split_key {
    const char *key;
    tbx_value_type type; /* as gguf-split writes it (readers take any integer) */
} tbx_gguf_split_key;
/* split.no, split.count, split.tensors.count, in that order. */
extern const tbx_gguf_split_key tbx_gguf_split_keys_[3];
/* Is the key (len bytes) one of the split.* namespace? */
bool tbx_gguf_is_split_key_(const char *key, size_t len);
/* The name of shard k of n of the set `stem` (stem_len bytes), snprintf-style: written to dst
 * (cap bytes, NUL-terminated when cap > 0); returns the name's length. */
size_t tbx_gguf_shard_name_(char *dst, size_t cap, const char *stem, size_t stem_len, uint32_t k,
                            uint32_t n);
/* When `name` (len bytes) is the name of the first shard of a set, "{stem}-00001-of-DDDDD.gguf"
 * (five digits), returns its count (1..99999) and sets *stem_len; else 0. */
uint32_t tbx_gguf_shard1_count_(const char *name, size_t len, size_t *stem_len);

#endif /* TBX_GGUF_EDIT_H */
