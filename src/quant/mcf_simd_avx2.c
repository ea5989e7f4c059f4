/*
 * mcf_simd_avx2.c - AVX2 row decoders of MCF's q8 q4 k6 k4 k3 k2 payloads (see mcfq.h).
 *
 * Compiled for the baseline target; the kernel carries __attribute__((target("avx2"))) and is
 * handed out by dispatch.c only when the CPU has AVX2. Per block the scale is computed with the
 * same scalar operations as the reference decoder (f16 with subnormals flushed, k: S * (u6/32),
 * a zero scale gives +0 values), then the 32 codes are unpacked into 32-bit lanes (variable
 * shifts of the block's bytes, sign extension by shift left / arithmetic shift right) and
 * multiplied by the broadcast scale: one IEEE multiply per value, as in the reference, so the
 * bits are identical (tests/unit/test_mcf_quant.c checks every kind on random and edge input).
 * A partial last block of a row is decoded into a buffer and its first values copied. This file
 * never calls the scalar decoder.
 */
#include "mcfq.h"
#include "ggml.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TBX_GGML_NO_SIMD)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* f16 -> f32 as the decoder sees it: subnormals flushed to signed zero, Inf/NaN kept with
 * their payload (the same bits as tbx_f16_to_f32 for every other input). */
static inline float h2f_flush(uint16_t h) {
    const uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint32_t u;
    if (e == 0) u = s;
    else if (e == 31) u = s | 0x7F800000u | (m << 13);
    else u = s | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t ld24(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16);
}

AVX2 static inline void st8(float *y, __m256i q, __m256 d) {
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
}

/* 32 codes of one block (4*bits bytes at p) times d into y[0..31]. */
AVX2 static inline void block8(const uint8_t *p, __m256 d, float *y) {
    for (int g = 0; g < 4; g++)
        st8(y + 8 * g, _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p + 8 * g))), d);
}
AVX2 static inline void block4(const uint8_t *p, __m256 d, float *y) {
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)p), m4 = _mm_set1_epi8(0x0F);
    const __m128i s8 = _mm_set1_epi8(8);
    const __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
    /* items 0..15 and 16..31 as signed bytes: (x ^ 8) - 8 */
    const __m128i i0 = _mm_sub_epi8(_mm_xor_si128(_mm_unpacklo_epi8(lo, hi), s8), s8);
    const __m128i i1 = _mm_sub_epi8(_mm_xor_si128(_mm_unpackhi_epi8(lo, hi), s8), s8);
    st8(y, _mm256_cvtepi8_epi32(i0), d);
    st8(y + 8, _mm256_cvtepi8_epi32(_mm_srli_si128(i0, 8)), d);
    st8(y + 16, _mm256_cvtepi8_epi32(i1), d);
    st8(y + 24, _mm256_cvtepi8_epi32(_mm_srli_si128(i1, 8)), d);
}
/* bits 2 and 3: 8 codes in `bits` bytes (<= 24 bits) per group */
AVX2 static inline void block_small(const uint8_t *p, uint32_t bits, __m256 d, float *y) {
    const __m256i sh = bits == 2 ? _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)
                                 : _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
    const __m128i up = _mm_cvtsi32_si128((int)(32 - bits));
    for (int g = 0; g < 4; g++) {
        const uint32_t w = bits == 2 ? (uint32_t)tbx_ld16(p + 2 * g) : ld24(p + 3 * g);
        __m256i v = _mm256_srlv_epi32(_mm256_set1_epi32((int)w), sh);
        v = _mm256_sra_epi32(_mm256_sll_epi32(v, up), up);
        st8(y + 8 * g, v, d);
    }
}
/* bits 6: 8 codes in 6 bytes, two groups of 4 in 3 bytes each */
AVX2 static inline void block6(const uint8_t *p, __m256 d, float *y) {
    const __m256i sh = _mm256_setr_epi32(0, 6, 12, 18, 0, 6, 12, 18);
    for (int g = 0; g < 4; g++) {
        const uint8_t *q = p + 6 * g;
        __m256i v = _mm256_setr_epi32((int)ld24(q), (int)ld24(q), (int)ld24(q), (int)ld24(q),
                                      (int)ld24(q + 3), (int)ld24(q + 3), (int)ld24(q + 3),
                                      (int)ld24(q + 3));
        v = _mm256_srlv_epi32(v, sh);
        v = _mm256_srai_epi32(_mm256_slli_epi32(v, 26), 26);
        st8(y + 8 * g, v, d);
    }
}

AVX2 static inline void block_any(const uint8_t *p, uint32_t bits, float scale, float *y) {
    if (scale == 0) {
        const __m256 z = _mm256_setzero_ps();
        for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 8 * g, z);
        return;
    }
    const __m256 d = _mm256_set1_ps(scale);
    switch (bits) {
    case 8: block8(p, d, y); break;
    case 4: block4(p, d, y); break;
    case 6: block6(p, d, y); break;
    default: block_small(p, bits, d, y); break;
    }
}

AVX2 static void rows_avx2(const tbx_mcfq_layout *L, const uint8_t *scales, const uint8_t *sub,
                           const uint8_t *codes, uint64_t n, float *out) {
    const uint32_t bits = L->bits, bbytes = 4 * bits;
    const uint64_t full = L->cols / 32;
    for (uint64_t r = 0; r < n; r++) {
        float *y = out + r * L->cols;
        const uint8_t *c = codes + r * L->row_code_bytes;
        const uint8_t *sc = scales + 2 * r * (L->super ? L->spr : L->bpr);
        const uint8_t *su = L->super ? sub + r * L->bpr : NULL;
        for (uint64_t b = 0; b < L->bpr; b++) {
            float scale;
            if (!L->super) {
                scale = h2f_flush(tbx_ld16(sc + 2 * b));
            } else {
                const float S = h2f_flush(tbx_ld16(sc + 2 * (b / 8)));
                const uint8_t u6 = su[b] & 0x3F;
                scale = (S == 0 || u6 == 0) ? 0.0f : S * ((float)u6 / 32.0f);
            }
            if (b < full) {
                block_any(c + b * bbytes, bits, scale, y + 32 * b);
            } else {
                float tmp[32];
                block_any(c + b * bbytes, bits, scale, tmp);
                memcpy(y + 32 * b, tmp, (size_t)(L->cols - 32 * b) * sizeof(float));
            }
        }
    }
}

tbx_mcfq_rows_fn tbx_mcfq_dequant_avx2_for(tbx_mcfq_kind kind) {
    return (unsigned)kind < TBX_MCFQ_KIND_COUNT ? rows_avx2 : NULL;
}

#else
tbx_mcfq_rows_fn tbx_mcfq_dequant_avx2_for(tbx_mcfq_kind kind) {
    (void)kind;
    return NULL;
}
#endif
