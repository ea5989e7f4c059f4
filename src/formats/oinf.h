/*
 * oinf.h - what the OINF driver (src/formats/oinf.c, oinf_write.c) offers beyond the common
 * driver table: the file's size variables, the quantization parameters of OINF v2 tensors, and
 * the writer calls that set both (tbx_write_options has no room for them).
 *
 * Not public API: include it from the CLI, the tests or the fuzzers (with src/formats on the
 * include path). Every function checks that the handle belongs to the OINF driver and answers
 * TBX_E_INVALID_ARG (or 0 / NULL) otherwise.
 */
#ifndef TBX_OINF_H
#define TBX_OINF_H

#include "tensorbox.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Size variables ("B := 4"): named u64 constants, in file order.                              */
/* ------------------------------------------------------------------------------------------ */

/* Number of size variables of a file opened as OINF; 0 for any other handle. */
uint64_t tbx_oinf_sizevar_count(const tbx_file *f);
/* Size variable i: *name (NUL-terminated, owned by the handle), *name_len and *value (each may
 * be NULL). TBX_E_INVALID_ARG when f is not an OINF handle or i is out of range. */
tbx_status tbx_oinf_sizevar_get(const tbx_file *f, uint64_t i, const char **name,
                                size_t *name_len, uint64_t *value);

/* Adds a size variable to an OINF writer (before any tensor data is written). The name must
 * match [A-Za-z0-9._-]+ (TBX_E_FORMAT), be new (TBX_E_DUPLICATE); TBX_E_INVALID_ARG when w is
 * not an OINF writer, TBX_E_STATE after the first tensor byte. Size variables are written sorted
 * by name, whatever the order of the calls. */
tbx_status tbx_oinf_writer_add_sizevar(tbx_writer *w, const char *name, uint64_t value,
                                       tbx_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Quantization parameters of an OINF v2 tensor (tensor flag HAS_QUANT).                       */
/* ------------------------------------------------------------------------------------------ */
#define TBX_OINF_SCHEME_SYMMETRIC 1u
#define TBX_OINF_SCHEME_ASYMMETRIC 2u
#define TBX_OINF_MODE_NONE 0u        /* zero points only */
#define TBX_OINF_MODE_PER_TENSOR 1u
#define TBX_OINF_MODE_PER_CHANNEL 2u

typedef struct tbx_oinf_quant {
    uint32_t scheme;          /* TBX_OINF_SCHEME_*: symmetric has no zero points */
    uint32_t scale_mode;      /* PER_TENSOR (one scale) or PER_CHANNEL (one per index of axis) */
    uint32_t zp_mode;         /* NONE, PER_TENSOR or PER_CHANNEL */
    uint64_t scale_axis;      /* 0 unless per channel */
    uint64_t scale_count;     /* 1, or shape[scale_axis] */
    uint64_t zp_axis;         /* 0 unless per channel */
    uint64_t zp_count;        /* 0, 1, or shape[zp_axis] */
    const float *scales;      /* scale_count values */
    const int32_t *zero_points; /* zp_count values (may be NULL when zp_count is 0) */
} tbx_oinf_quant;

/* The quantization parameters of tensor i of a file opened as OINF, in OINF's own terms: a thin
 * view of the common description (tbx_tensor_quant_get in tensorbox.h, which every format
 * fills; prefer it). The arrays are owned by the handle. TBX_E_NOT_FOUND when the tensor has
 * none (every v1 tensor), TBX_E_INVALID_ARG when f is not an OINF handle or i is out of range.
 * (The same values are also metadata entries "<tensor>.quant.*", see docs/formats/oinf.md.) */
tbx_status tbx_oinf_tensor_quant(const tbx_file *f, uint64_t i, tbx_oinf_quant *q);

/* Attaches quantization parameters to the tensor named `tensor` of an OINF writer (which must
 * write version 2: TBX_E_UNSUPPORTED otherwise). The arrays are copied. The tensor may be
 * declared before or after this call; it must exist when the layout is made (TBX_E_NOT_FOUND).
 * The parameters are checked against the tensor's shape then (TBX_E_FORMAT naming the field). */
tbx_status tbx_oinf_writer_set_quant(tbx_writer *w, const char *tensor, const tbx_oinf_quant *q,
                                     tbx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TBX_OINF_H */
