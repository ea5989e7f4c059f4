/* MCF block and super-block quantization (mantle's q8 q4 k6 k4 k3 k2): layout, decoders and
 * quantizers. Used by the MCF driver (src/formats/mcf*.c) and the convert path; contract only,
 * the driver never needs to know where the kernels come from.
 *
 * A quantized MCF payload is one rank-2 tensor [rows, cols]. Every row is cut into
 * bpr = ceil(cols / 32) blocks of 32 values (the last one padded with zero codes; blocks never
 * cross a row). TB = rows * bpr blocks in all. The k family groups 8 blocks of a row into a
 * super-block (TS = rows * ceil(bpr / 8); super-blocks never cross a row either).
 *
 *   q8 q4:           [ f16 block scale x TB ] pad64 [ codes ]
 *   k6 k4 k3 k2:     [ f16 super scale x TS ] pad64 [ u6 sub-scale x TB ] pad64 [ codes ]
 *
 * codes: one LSB-first bit stream for the whole tensor, `bits` per value (value n, bit i is
 * stream bit n*bits + i); values are two's complement truncated to `bits`, sign-extended on
 * decode. A row holds bpr*32*bits bits = bpr*4*bits bytes, so every row starts on a byte.
 * Decoding (exactly as mantle's decoder): q: w = q * f16(scale_b); k: w = q * f16(S) * u6 / 32,
 * f16 subnormal scales flushed to 0, u6 = sub-scale byte & 0x3F.
 * Padding between regions and after the codes is zero. Sizes: see tbx_mcfq_layout_get. */
#ifndef TBX_QUANT_MCFQ_H
#define TBX_QUANT_MCFQ_H

#include "../core/internal.h"

typedef enum tbx_mcfq_kind {
    TBX_MCFQ_Q8 = 0, TBX_MCFQ_Q4, TBX_MCFQ_K6, TBX_MCFQ_K4, TBX_MCFQ_K3, TBX_MCFQ_K2,
    TBX_MCFQ_KIND_COUNT
} tbx_mcfq_kind;

typedef struct tbx_mcfq_layout {
    tbx_mcfq_kind kind;
    uint32_t bits;          /* 8 4 6 4 3 2 */
    bool super;             /* k family */
    uint64_t rows, cols;
    uint64_t bpr;           /* blocks per row */
    uint64_t spr;           /* super-blocks per row (k family, else 0) */
    uint64_t row_code_bytes;/* bpr * 4 * bits */
    uint64_t scales_off, scales_size;   /* f16 block scales (q) or super scales (k) */
    uint64_t sub_off, sub_size;         /* u6 sub-scales (k), 0/0 for q */
    uint64_t codes_off, codes_size;
    uint64_t total;         /* payload bytes (the MCF data_size) */
} tbx_mcfq_layout;

/* Fills *L for a [rows, cols] tensor; TBX_E_OVERFLOW when a size does not fit in 64 bits,
 * TBX_E_INVALID_ARG for an unknown kind. rows or cols 0 gives total 0. */
tbx_status tbx_mcfq_layout_get(tbx_mcfq_kind kind, uint64_t rows, uint64_t cols,
                               tbx_mcfq_layout *L);

/* Decodes n rows to n*cols floats. `scales` points at the first scale of the first row
 * (row r's scales start at r*bpr (q) or r*spr (k) f16 entries), `sub` at its first u6 byte
 * (k only; NULL for q), `codes` at its first code byte (row r at r*row_code_bytes). Identical
 * f32 bits to the scalar reference whatever SIMD variant runs (run-time dispatch inside). */
void tbx_mcfq_dequant_rows(const tbx_mcfq_layout *L, const uint8_t *scales, const uint8_t *sub,
                           const uint8_t *codes, uint64_t n, float *out);
/* The scalar reference of the above (tests compare every SIMD variant to it). */
void tbx_mcfq_dequant_rows_ref(const tbx_mcfq_layout *L, const uint8_t *scales,
                               const uint8_t *sub, const uint8_t *codes, uint64_t n, float *out);

typedef enum tbx_mcfq_method {
    TBX_MCFQ_METHOD_BEST = 0,   /* nearest f16 scales, quantize against the stored scale,
                                 * u6 searched: lower error than mantle's */
    TBX_MCFQ_METHOD_MANTLE = 1  /* mantle's quantizer byte for byte */
} tbx_mcfq_method;

/* Quantizes n rows (n*cols floats, values clamped to [clip_lo, clip_hi] first) into the
 * regions at the same row positions as tbx_mcfq_dequant_rows reads them. Deterministic;
 * rows are independent, so callers may split work across threads by rows. */
void tbx_mcfq_quantize_rows(const tbx_mcfq_layout *L, tbx_mcfq_method method, const float *src,
                            uint64_t n, float clip_lo, float clip_hi, uint8_t *scales,
                            uint8_t *sub, uint8_t *codes);

#endif
