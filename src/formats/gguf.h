/*
 * gguf.h - what the GGUF driver (src/formats/gguf.c) offers beyond the common driver table:
 * the ggml lint used by `tbx validate --ggml`, and the ggml type-id mapping.
 *
 * Not public API: include it from the CLI or the tests (with src/core on the include path).
 */
#ifndef TBX_GGUF_H
#define TBX_GGUF_H

#include "tensorbox.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Highest ggml type id the driver knows (ids 0..TBX_GGUF_TYPE_MAX, some of them removed). */
#define TBX_GGUF_TYPE_MAX 42u

/* Checks a file opened as GGUF against the extra rules of ggml's own loader (ggml/src/gguf.cpp),
 * which tensorbox's reader does not impose:
 *   - the file is little-endian GGUF v2 or v3 (ggml reads neither v1 nor big-endian files);
 *   - no metadata array has arrays as elements;
 *   - every tensor has a name shorter than 64 bytes, every ne[i] < 2^63 and an element count
 *     below 2^63;
 *   - tensors are packed in info order: offset_0 = 0, offset_i = offset_(i-1) + size_(i-1)
 *     rounded up to the alignment.
 * (A general.alignment that is not a u32 and n_dims > 4 are problems of every validation, so
 * the lint does not repeat them.)
 * Every violation is passed to `cb` (may be NULL) as a tbx_error naming the field, the value and
 * the byte offset. Returns TBX_OK when the file passes, else the code of the first violation;
 * TBX_E_INVALID_ARG when `f` is not a handle opened by the GGUF driver. */
tbx_status tbx_gguf_lint(tbx_file *f, tbx_problem_fn cb, void *ud);

/* The tbx_dtype of a ggml type id; TBX_DT_INVALID for unknown and removed ids. */
tbx_dtype tbx_gguf_type_dtype(uint32_t ggml_type);
/* The ggml type id of a dtype, or -1 when ggml has no such type. */
int32_t tbx_gguf_dtype_type(tbx_dtype dtype);
/* ggml's upper-case name of a type id ("F32", "Q4_K", "Q4_0_4_4" for a removed id), or NULL
 * for an id ggml never had. Static storage. */
const char *tbx_gguf_type_name(uint32_t ggml_type);

#ifdef __cplusplus
}
#endif
#endif /* TBX_GGUF_H */
