/*
 * plain.h - internal helpers for plain (non-block) element types: f32 to and from every
 * decodable dtype (decode.c), sub-byte bitstream packing, and the registry of block dequantizers.
 */
#ifndef TBX_PLAIN_H
#define TBX_PLAIN_H

#include "core.h"

#include <stdbool.h>
#include <stdint.h>

/* The inverse for the float dtypes: encodes n f32 values as f32, f64, f16 or bf16 (little-
 * endian, round to nearest even); false for any other dtype (src/quant/decode.c). */
bool tbx_encode_float(tbx_dtype dt, const float *src, uint64_t n, uint8_t *dst);
/* tbx_decode_f32 with the dtype's entry already looked up (src/quant/decode.c). */
tbx_status tbx_decode_f32_info(const tbx_dtype_info *e, tbx_dtype dtype, const void *src,
                               size_t src_len, uint64_t nelems, float *dst);

/* Packs n values into one LSB-first bitstream (value k, bit i -> stream bit k*bits + i), each
 * truncated to `bits` (two's complement), bits in 1..8. Writes exactly ceil(n*bits/8) bytes of
 * dst; unused high bits of the last byte are 0. */
void tbx_pack_bits(uint8_t *dst, const int8_t *vals, uint64_t n, unsigned bits);
/* Inverse of tbx_pack_bits: reads n values of `bits` (1..8) bits; sign-extends them when
 * `is_signed`, else returns them as unsigned (an 8-bit unsigned value wraps into int8). */
void tbx_unpack_bits(int8_t *dst, const uint8_t *src, uint64_t n, unsigned bits, bool is_signed);

/* Dequantizes `nblocks` consecutive blocks of a block dtype (tbx_dtype_info block_bytes each) to
 * nblocks * block_size floats. */
typedef void (*tbx_dequant_fn)(const void *src, float *dst, uint64_t nblocks);
/* The dequantizer registered for a block dtype, or NULL (src/quant/registry.c). */
tbx_dequant_fn tbx_dequant_for(tbx_dtype dt);
/* n little-endian f16 values at src (any alignment) to f32, the bits of tbx_f16_to_f32 for
 * every input: the scalar loop, or the AVX2 kernel (decode_simd_avx2.c) when dispatch.c finds
 * AVX2. tbx_f16_row_for() returns the one for this CPU. */
typedef void (*tbx_f16_row_fn)(const uint8_t *src, float *dst, uint64_t n);
void tbx_f16_row_scalar(const uint8_t *src, float *dst, uint64_t n);
void tbx_f16_row_avx2(const uint8_t *src, float *dst, uint64_t n); /* only with AVX2 */
tbx_f16_row_fn tbx_f16_row_for(void);

#endif /* TBX_PLAIN_H */
