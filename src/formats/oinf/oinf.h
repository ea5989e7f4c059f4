/*
 * oinf.h - internal functions of the OINF driver (src/formats/oinf.c, oinf_write.c) that the
 * unit tests and the fuzzer call directly. Not public API, not exported from the shared
 * library: users reach the same data through the generic calls of tensorbox.h
 * (tbx_sizevar_count/get, tbx_writer_add_sizevar, tbx_tensor_quant_get), which these functions
 * implement or duplicate, and set quantization parameters with tbx_oinf_writer_set_quant from
 * the experimental public header tensorbox/oinf.h (included here).
 * Every function checks that the handle belongs to the OINF driver and answers
 * TBX_E_INVALID_ARG (or 0 / NULL) otherwise.
 */
#ifndef TBX_OINF_H
#define TBX_OINF_H

#ifndef TBX_EXPERIMENTAL
#define TBX_EXPERIMENTAL 1 /* the library's own code uses its experimental headers */
#endif
#include "tensorbox.h"
#include "tensorbox/oinf.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Size variables ("B := 4"): named u64 constants, in file order. The driver's sizevar hooks  */
/* behind tbx_sizevar_count/get and tbx_writer_add_sizevar.                                    */
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
/* Quantization parameters of an OINF v2 tensor (tbx_oinf_quant: tensorbox/oinf.h).            */
/* ------------------------------------------------------------------------------------------ */

/* The quantization parameters of tensor i of a file opened as OINF, in OINF's own terms: a thin
 * view of the common description (tbx_tensor_quant_get in tensorbox.h, which every format
 * fills), for the tests. The arrays are owned by the handle. TBX_E_NOT_FOUND when the tensor
 * has none (every v1 tensor), TBX_E_INVALID_ARG when f is not an OINF handle or i is out of
 * range. */
tbx_status tbx_oinf_tensor_quant(const tbx_file *f, uint64_t i, tbx_oinf_quant *q);

#ifdef __cplusplus
}
#endif
#endif /* TBX_OINF_H */
