/*
 * tensorbox/ztensor.h - experimental API: zTensor extras of libtensorbox.
 *
 *   #define TBX_EXPERIMENTAL
 *   #include <tensorbox/ztensor.h>
 *
 * EXPERIMENTAL: the functions and types declared here are exported by libtensorbox but are NOT
 * part of the stable API of tensorbox.h. They may change or disappear in any minor version
 * (0.x -> 0.y); a program that uses them must be rebuilt (and perhaps adapted) against the
 * exact tensorbox version it runs with. Defining TBX_EXPERIMENTAL before the #include is the
 * caller's acknowledgement; without it this header refuses to compile.
 *
 * What is here: writing zTensor's sparse (sparse_csr, sparse_coo) and quantized_group tensors.
 * Reading needs nothing extra: tbx_tensor_info tells the layout, tbx_tensor_read_f32 densifies
 * and dequantizes, tbx_tensor_quant_get describes the quantization, the components are read
 * with tbx_component_read*. docs/formats/ztensor.md describes the layouts and every decision.
 */
#ifndef TENSORBOX_ZTENSOR_H
#define TENSORBOX_ZTENSOR_H

#ifndef TBX_EXPERIMENTAL
#error "tensorbox/ztensor.h is experimental API: #define TBX_EXPERIMENTAL before including it"
#endif

#include "../tensorbox.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Writing sparse and quantized tensors (a writer opened for a .zt file / TBX_FORMAT_ZTENSOR)
 *
 * Each call writes the tensor's components at once (appended after whatever was written
 * before, compressed and digested per the writer's options) and records the object for the
 * manifest. Allowed in the declare phase and between dense tensors, never while a dense
 * tensor is half written (TBX_E_STATE). Names share one namespace with dense tensors.
 * Index components are written as u64, as the reference implementation does.
 * TBX_E_INVALID_ARG when w is not a zTensor writer.
 * ------------------------------------------------------------------------------------------- */

/* sparse_csr: a 2-D tensor [rows, cols] with nnz stored values. `values` holds nnz elements of
 * `dtype` (any zTensor dtype), `indices` nnz column indices (< cols), `indptr` rows + 1
 * non-decreasing offsets from 0 to nnz. Checked before anything is written. */
TBX_API tbx_status tbx_ztensor_writer_add_csr(tbx_writer *w, const char *name, tbx_dtype dtype,
                                              const uint64_t shape[2], const void *values,
                                              uint64_t nnz, const uint64_t *indices,
                                              const uint64_t *indptr, tbx_error *err);

/* sparse_coo: an n-D tensor (ndim >= 1) with nnz stored values; `coords` holds ndim x nnz
 * indices, structure of arrays (all indices of dimension 0, then of dimension 1, ...). */
TBX_API tbx_status tbx_ztensor_writer_add_coo(tbx_writer *w, const char *name, tbx_dtype dtype,
                                              const uint64_t *shape, uint32_t ndim,
                                              const void *values, uint64_t nnz,
                                              const uint64_t *coords, tbx_error *err);

/* quantized_group: logical shape `shape` (rows = product of all but the last dimension,
 * cols = the last one), codes of `bits` bits packed LSB-first into words of `word_dtype`
 * (u8/u16/u32/u64/i8/i16/i32/i64), `per_word` codes per word, continuous in row-major order;
 * `scales` and `zeros` hold rows x ceil(cols / group_size) elements of `scale_dtype` (a float
 * dtype; zeros share it). Attributes bits, group_size and packing ("<per_word>_per_<dtype>")
 * are written with the object. value = (q - zero) * scale.
 * (Experimental, so not versioned by struct_size: a later version may change this struct.) */
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

TBX_API tbx_status tbx_ztensor_writer_add_qgroup(tbx_writer *w, const char *name,
                                                 const uint64_t *shape, uint32_t ndim,
                                                 const tbx_ztensor_qgroup *q, tbx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TENSORBOX_ZTENSOR_H */
