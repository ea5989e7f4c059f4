/*
 * ztensor.h - what the zTensor driver (src/formats/ztensor*.c) offers beyond the common driver
 * table: decoding sparse and quantized_group tensors to float32, and writing such tensors.
 *
 * Not public API: include it from the CLI or the tests (with src/core on the include path).
 * docs/formats/ztensor.md describes the layouts and every decision.
 */
#ifndef TBX_ZTENSOR_H
#define TBX_ZTENSOR_H

#include "tensorbox.h"

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

/* ---------------------------------------------------------------------------------------------
 * Writing sparse and quantized tensors (a writer opened for a .zt file / TBX_FORMAT_ZTENSOR)
 *
 * Each call writes the tensor's components at once (appended after whatever was written
 * before, compressed and digested per the writer's options) and records the object for the
 * manifest. Allowed in the declare phase and between dense tensors, never while a dense
 * tensor is half written (TBX_E_STATE). Names share one namespace with dense tensors.
 * Index components are written as u64, as the reference implementation does.
 * ------------------------------------------------------------------------------------------- */

/* sparse_csr: a 2-D tensor [rows, cols] with nnz stored values. `values` holds nnz elements of
 * `dtype` (any zTensor dtype), `indices` nnz column indices (< cols), `indptr` rows + 1
 * non-decreasing offsets from 0 to nnz. Checked before anything is written. */
tbx_status tbx_ztensor_writer_add_csr(tbx_writer *w, const char *name, tbx_dtype dtype,
                                      const uint64_t shape[2], const void *values, uint64_t nnz,
                                      const uint64_t *indices, const uint64_t *indptr,
                                      tbx_error *err);

/* sparse_coo: an n-D tensor (ndim >= 1) with nnz stored values; `coords` holds ndim x nnz
 * indices, structure of arrays (all indices of dimension 0, then of dimension 1, ...). */
tbx_status tbx_ztensor_writer_add_coo(tbx_writer *w, const char *name, tbx_dtype dtype,
                                      const uint64_t *shape, uint32_t ndim, const void *values,
                                      uint64_t nnz, const uint64_t *coords, tbx_error *err);

/* quantized_group: logical shape `shape` (rows = product of all but the last dimension,
 * cols = the last one), codes of `bits` bits packed LSB-first into words of `word_dtype`
 * (u8/u16/u32/u64/i8/i16/i32/i64), `per_word` codes per word, continuous in row-major order;
 * `scales` and `zeros` hold rows x ceil(cols / group_size) elements of `scale_dtype` (a float
 * dtype; zeros share it). Attributes bits, group_size and packing ("<per_word>_per_<dtype>")
 * are written with the object. value = (q - zero) * scale. */
typedef struct tbx_ztensor_qgroup {
    uint32_t bits;           /* 1..32, bits * per_word <= bits of word_dtype */
    uint32_t group_size;     /* >= 1 */
    tbx_dtype word_dtype;
    uint32_t per_word;       /* 0: bits of word_dtype / bits */
    tbx_dtype scale_dtype;   /* f16, bf16, f32 or f64 */
    const void *packed;      /* ceil(nelems / per_word) words */
    const void *scales;
    const void *zeros;
} tbx_ztensor_qgroup;

tbx_status tbx_ztensor_writer_add_qgroup(tbx_writer *w, const char *name, const uint64_t *shape,
                                         uint32_t ndim, const tbx_ztensor_qgroup *q,
                                         tbx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TBX_ZTENSOR_H */
