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

#include "core.h"

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

/* The write options of MCF's row that choose how a conversion quantizes to MCF's families
 * (tbx_convert with quant_to one of them): the method (a choice "best" / "mantle", q / k
 * families; int8 / int4 have one method, the same bytes under either name) and one clip range
 * for every tensor (two finite numbers, both or neither, min <= max, each within f32's range)
 * instead of each tensor's own +-max|value|. The MCF row declares them (mcf_write.c), core
 * checks them at the writer's open, and the plain plan (src/convert/plain.c) reads them. */
#define TBX_MCFQ_OPT_METHOD   "quant_method"
#define TBX_MCFQ_OPT_CLIP_MIN "quant_clip_min"
#define TBX_MCFQ_OPT_CLIP_MAX "quant_clip_max"

/* Quantizes n rows (n*cols floats, values clamped to [clip_lo, clip_hi] first) into the
 * regions at the same row positions as tbx_mcfq_dequant_rows reads them. Deterministic;
 * rows are independent, so callers may split work across threads by rows. */
void tbx_mcfq_quantize_rows(const tbx_mcfq_layout *L, tbx_mcfq_method method, const float *src,
                            uint64_t n, float clip_lo, float clip_hi, uint8_t *scales,
                            uint8_t *sub, uint8_t *codes);

/* ---- helpers and SIMD variants (mcf_quant.c, mcf_simd_avx2.c, dispatch.c) ----------------- */
/* mantle's f32 -> f16 conversion (truncating; exponents below the normal range -> 0) and the
 * decoder's f16 -> f32 (subnormals flushed to signed zero). */
uint16_t tbx_mcfq_f16_trunc(float f);
float tbx_mcfq_f16_dec(uint16_t h);

/* A row decoder with tbx_mcfq_dequant_rows' contract. */
typedef void (*tbx_mcfq_rows_fn)(const tbx_mcfq_layout *L, const uint8_t *scales,
                                 const uint8_t *sub, const uint8_t *codes, uint64_t n, float *out);
/* The best SIMD row decoder of this CPU for L->kind (dispatch.c: reads cpuid once), or NULL
 * when there is none (then use tbx_mcfq_dequant_rows_ref). */
tbx_mcfq_rows_fn tbx_mcfq_dequant_simd_for(tbx_mcfq_kind kind);
/* The AVX2 row decoder (every kind), or NULL in builds without it; does not check the CPU. */
tbx_mcfq_rows_fn tbx_mcfq_dequant_avx2_for(tbx_mcfq_kind kind);

/* ---- int8 / int4 (the seed's raw family) ---------------------------------------------------
 * Payload of a tensor of `nelems` values (any rank; the codes run over the row-major values):
 *   [ f32 scale ] pad64 [ f32 zero, activations domain only ] pad64 [ codes ]
 * int8: one signed byte per value; int4: signed nibbles, value 2k in the low nibble of byte k,
 * 2k+1 in the high one (ceil(nelems / 2) bytes). Value = scale * (q - zero); zero is 0 in the
 * weights domain (symmetric, codes in [-qmax, qmax]). Padding is zero. */
typedef struct tbx_mcfi_layout {
    uint32_t bits;          /* 8 or 4 */
    bool activations;       /* domain: true = activations (asymmetric, zero region present) */
    uint64_t nelems;
    uint64_t scale_off, zero_off;   /* zero_off meaningful only for activations */
    uint64_t codes_off, codes_size;
    uint64_t total;         /* payload bytes */
} tbx_mcfi_layout;

/* Fills *L; TBX_E_INVALID_ARG for bits other than 8 / 4, TBX_E_OVERFLOW. */
tbx_status tbx_mcfi_layout_get(uint32_t bits, bool activations, uint64_t nelems,
                               tbx_mcfi_layout *L);
/* Scale and zero for a clip range (weights: max(|lo|, |hi|) / qmax and 0; activations:
 * (hi - lo) / (2^bits - 1) and an integer zero so that 0 has an exact code). */
void tbx_mcfi_params(const tbx_mcfi_layout *L, float clip_lo, float clip_hi, float *scale,
                     float *zero);
/* Quantizes values first .. first+n-1 (clamped to the clip range, NaN -> 0, nearest code,
 * saturated) into the codes region `codes` (int4: read-modify-write of the shared byte). */
void tbx_mcfi_quantize(const tbx_mcfi_layout *L, float scale, float zero, float clip_lo,
                       float clip_hi, const float *src, uint64_t first, uint64_t n,
                       uint8_t *codes);
/* Decodes values first .. first+n-1: out[i] = scale * ((float)q - zero). */
void tbx_mcfi_dequant(const tbx_mcfi_layout *L, float scale, float zero, const uint8_t *codes,
                      uint64_t first, uint64_t n, float *out);

/* Fills the geometry of the quantization description of an MCF family tensor of dtype `dt`
 * (TBX_DT_MCF_Q8 .. _K2, _INT8, _INT4) shaped [rows, cols]: code dtype, bits, block and
 * super-block sizes, scale scope, dtype and count (q/k: one f16 scale per block of 32, the k
 * family's per-block sub-scales inside the payload; int8/int4: one f32 scale per tensor). The
 * caller sets method, domain, clip range and zero points. TBX_E_INVALID_ARG for another dtype,
 * TBX_E_OVERFLOW when the layout does not fit in 64 bits. The reader (src/formats/mcf.c) and
 * the quantizing conversion (the encoders of encode.c) describe MCF tensors through this one
 * rule. */
tbx_status tbx_mcfq_describe(tbx_dtype dt, uint64_t rows, uint64_t cols, tbx_quant_info *q);

#endif
