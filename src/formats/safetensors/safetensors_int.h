/*
 * safetensors_int.h - private interface between the safetensors reader (safetensors.c) and its
 * set reader (safetensors_set.c: a Hugging Face model directory, sharded files + index).
 */
#ifndef TBX_SAFETENSORS_INT_H
#define TBX_SAFETENSORS_INT_H

#include "io.h"

/* What the reader of one shard asks the set being opened (safetensors_set.c): does the index map
 * tensor `name` to the shard of source `src_idx`? (marks it found; `at` is the entry's offset in
 * the shard, for the message). The reader calls it through this pointer and never names the set. */
typedef struct st_shard_check {
    tbx_status (*tensor)(void *set, const char *name, size_t len, uint32_t src_idx, uint64_t at,
                         tbx_error *err);
    void *set;
} st_shard_check;

/* Parses the safetensors file in `src` (f->src or one of f->extra_src) into f: its tensors read
 * from source index `src_idx`. With `chk` (a shard of a set): each tensor is first checked
 * against the index, and a __metadata__ key another shard already gave is merged when its value
 * is the same (TBX_E_DUPLICATE when it differs). */
tbx_status st_open_source(tbx_file *f, const tbx_source *src, uint32_t src_idx,
                          const st_shard_check *chk, tbx_error *err);

/* Text walkers (safetensors_common.c; JSON already accepted or checked piece by piece): skip whitespace
 * from i; i at '"': index after the closing quote; i at a value: index after it. Out-of-range or
 * unterminated input gives ST_JS_NONE. */
#define ST_JS_NONE ((size_t)-1)
size_t st_js_ws(const char *p, size_t n, size_t i);
size_t st_js_skip_string(const char *p, size_t n, size_t i);
size_t st_js_skip_value(const char *p, size_t n, size_t i);

/* The reader and writer hooks of the driver row (safetensors.c; the row: safetensors_driver.c). */
bool st_w_dtype_ok(tbx_dtype dt);
bool st_probe(const uint8_t *head, size_t len, uint64_t file_size);
tbx_status st_open(tbx_file *f, tbx_error *err);
void st_close(tbx_file *f);
tbx_status st_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                           tbx_error *err);
tbx_status st_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status st_w_layout(tbx_writer *w, tbx_error *err);

/* The set hooks of the driver row (safetensors_set.c). */
bool st_claims_path(const tbx_provider *p);
tbx_status st_open_path(tbx_file *f, tbx_error *err);

#endif /* TBX_SAFETENSORS_INT_H */
