/*
 * ztensor.h - internal functions of the zTensor driver (src/formats/ztensor*.c) that the unit
 * tests and the fuzzer call directly: decoding any zTensor tensor to float32. Not public API,
 * not exported from the shared library: users call tbx_tensor_read_f32 (tensorbox.h), which
 * routes non-dense layouts to tbx_ztensor_read_f32_range (the driver's read_f32 hook). The
 * writers of sparse and quantized_group tensors are experimental public API in
 * tensorbox/ztensor.h (included here). docs/formats/ztensor.md describes the layouts.
 */
#ifndef TBX_ZTENSOR_H
#define TBX_ZTENSOR_H

#ifndef TBX_EXPERIMENTAL
#define TBX_EXPERIMENTAL 1 /* the library's own code uses its experimental headers */
#endif
#include "tensorbox.h"
#include "tensorbox/ztensor.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------------------------- */

/* Decodes every element of tensor i of a file opened as zTensor to float32, row-major, into
 * `out` (tbx_tensor_info.nelems floats):
 *   dense            as tbx_tensor_read_f32;
 *   sparse_csr/coo   densified: zeros everywhere else, duplicate entries summed; indices are
 *                    checked on the way (TBX_E_FORMAT naming the entry when one is out of range,
 *                    negative, or indptr is not monotonic / does not end at nnz);
 *   quantized_group  value = (q - zero) * scale per group (see docs/formats/ztensor.md).
 * Components are streamed in bounded chunks: memory use does not grow with the tensor.
 * TBX_E_INVALID_ARG when f is not a zTensor handle, TBX_E_UNSUPPORTED for complex dtypes. */
tbx_status tbx_ztensor_read_f32(tbx_file *f, uint64_t i, float *out, tbx_error *err);

/* As tbx_ztensor_read_f32, elements [first, first + count) only (out gets count floats). The
 * shape of tbx_tensor_read_f32, so the core can route non-dense layouts here. */
tbx_status tbx_ztensor_read_f32_range(tbx_file *f, uint64_t i, uint64_t first, uint64_t count,
                                      float *out, tbx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TBX_ZTENSOR_H */
