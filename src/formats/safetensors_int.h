/*
 * safetensors_int.h - private interface between the safetensors reader (safetensors.c) and its
 * set reader (safetensors_set.c: a Hugging Face model directory, sharded files + index).
 */
#ifndef TBX_SAFETENSORS_INT_H
#define TBX_SAFETENSORS_INT_H

#include "internal.h"

/* The set being opened (safetensors_set.c), seen by the reader of one shard. */
typedef struct st_set st_set;

/* Parses the safetensors file in `src` (f->src or one of f->extra_src) into f: its tensors read
 * from source index `src_idx`. With `set` (a shard of a set): each tensor is first checked
 * against the index (st_set_check_tensor), and a __metadata__ key another shard already gave is
 * merged when its value is the same (TBX_E_DUPLICATE when it differs). */
tbx_status st_open_source(tbx_file *f, const tbx_source *src, uint32_t src_idx, st_set *set,
                          tbx_error *err);

/* Does the index map tensor `name` to the shard of source `src_idx`? (safetensors_set.c) Marks
 * it found; `at` is the entry's offset in the shard, for the message. */
tbx_status st_set_check_tensor(st_set *set, const char *name, size_t len, uint32_t src_idx,
                               uint64_t at, tbx_error *err);

/* Text walkers of the reader (JSON already accepted or checked piece by piece): skip whitespace
 * from i; i at '"': index after the closing quote; i at a value: index after it. Out-of-range or
 * unterminated input gives ST_JS_NONE. */
#define ST_JS_NONE ((size_t)-1)
size_t st_js_ws(const char *p, size_t n, size_t i);
size_t st_js_skip_string(const char *p, size_t n, size_t i);
size_t st_js_skip_value(const char *p, size_t n, size_t i);

/* The set hooks of the driver row (safetensors_set.c). */
bool st_claims_path(const char *path, bool is_dir);
tbx_status st_open_path(tbx_file *f, tbx_error *err);

#endif /* TBX_SAFETENSORS_INT_H */
