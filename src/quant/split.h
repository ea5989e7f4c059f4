/*
 * split.h - dequantization of layouts whose codes and parameters live in separate regions:
 * the codes in one array of packed words, the scales (and zero points) in others, per tensor,
 * per channel or per group of a row (tbx_quant_info method TBX_QUANT_LINEAR). The ggml
 * kernels (ggml.h) cover the other kind, self-contained blocks.
 *
 * value = ((float)code - zero) * scale, in float32, in that order (zero = 0 without zero
 * points). Users: zTensor quantized_group (tbx_tensor_read_f32); next, MCF's int8/int4
 * families and OINF's affine parameters.
 *
 * Layering: this file is a kernel (no I/O, no handle); callers read the regions in chunks and
 * pass the slices covering the elements they want.
 */
#ifndef TBX_SPLIT_H
#define TBX_SPLIT_H

#include "tensorbox.h"

#include <stdbool.h>
#include <stdint.h>

/* Geometry of a split layout, everything the kernel needs per element. */
typedef struct tbx_split_geom {
    uint32_t bits;          /* bits per code, 1..64 */
    uint32_t per_word;      /* codes per word, LSB first (>= 1, per_word * bits <= 8 * word_bytes);
                             * codes run on across rows (row-major), the unused high slots of
                             * a word being ignored */
    uint32_t word_bytes;    /* 1, 2, 4 or 8: little-endian words */
    bool code_signed;       /* codes are two's complement of `bits` bits */
    tbx_quant_scope scale_scope, zero_scope; /* TENSOR, CHANNEL or GROUP (zero: also NONE) */
    uint64_t cols;          /* GROUP: row length (the last dimension) */
    uint64_t group;         /* GROUP: elements per group (groups restart at each row) */
    uint64_t groups_per_row;/* GROUP: ceil(cols / group) */
    uint64_t channels;      /* CHANNEL: shape[axis] */
    uint64_t inner;         /* CHANNEL: product of the dimensions after axis (1 for the last) */
} tbx_split_geom;

/* Fills *g from a TBX_QUANT_LINEAR description, the tensor's shape and the codes per word
 * (word size from q->code_dtype). TBX_E_UNSUPPORTED when the description is not one the
 * kernel handles (another method, BLOCK scope, a code dtype that is not a 1/2/4/8-byte integer,
 * more codes than fit a word, a CHANNEL axis outside the shape). */
tbx_status tbx_split_geom_init(tbx_split_geom *g, const tbx_quant_info *q, const uint64_t *shape,
                               uint32_t ndim, uint32_t per_word);

/* Index of the scale (scope s) of element e: 0 (TENSOR), the channel (CHANNEL) or the group
 * (GROUP). */
uint64_t tbx_split_param_index(const tbx_split_geom *g, tbx_quant_scope s, uint64_t e);

/* Dequantizes elements [first, first + count) into dst.
 *   codes:  the words from word first / per_word on (ceil-covering the range);
 *   scales: GROUP: scales[k - tbx_split_param_index(g, GROUP, first)] is the scale of group k
 *           (a slice starting at the first element's group); TENSOR: scales[0]; CHANNEL: all
 *           channels, scales[c];
 *   zeros:  the same for zero_scope; ignored (may be NULL) when zero_scope is NONE. */
typedef void (*tbx_dequant_split_fn)(const tbx_split_geom *g, const uint8_t *codes,
                                     const float *scales, const float *zeros, uint64_t first,
                                     uint64_t count, float *dst);

/* The portable scalar kernel, and the best one for this geometry and CPU (today always the
 * scalar one; SIMD variants plug in here). */
void tbx_dequant_split_scalar(const tbx_split_geom *g, const uint8_t *codes, const float *scales,
                              const float *zeros, uint64_t first, uint64_t count, float *dst);
tbx_dequant_split_fn tbx_dequant_split_for(const tbx_split_geom *g);

/* Linear dequantization of codes already decoded to f32 (x = (float)code), for descriptions
 * whose parameters are few and held apart from the data (tbx_quant_param.values: OINF's
 * per-tensor and per-channel scales and zero points, each with its own axis):
 * x = (x - zero) * scale in float32, in that order, as the kernel above.
 * tbx_affine_geom_init fills the walk geometry of one parameter (p->scope TENSOR, CHANNEL, or
 * NONE for absent zero points: TBX_E_UNSUPPORTED for another scope or an axis outside the
 * shape). tbx_dequant_affine_inplace applies the mapping to elements [first, first + count)
 * held in x; scales / zeros hold every value of their parameter (zeros may be NULL when gz's
 * scope is NONE). */
tbx_status tbx_affine_geom_init(tbx_split_geom *g, const tbx_quant_param *p,
                                const uint64_t *shape, uint32_t ndim);
void tbx_dequant_affine_inplace(const tbx_split_geom *gs, const tbx_split_geom *gz,
                                const float *scales, const float *zeros, uint64_t first,
                                uint64_t count, float *x);

#endif /* TBX_SPLIT_H */
