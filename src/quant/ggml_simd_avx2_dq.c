/*
 * ggml_simd_avx2_dq.c - AVX2 dequantizers of the ggml block types that ggml_simd_avx2.c does not
 * cover: q8_1, q2_K, q3_K, the codebook types iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, and
 * mxfp4, nvfp4, q1_0.
 *
 * Same contract as ggml_simd_avx2.c: compiled for the baseline target, every kernel carries
 * __attribute__((target("avx2"))) and is handed out (tbx_ggml_dequant_avx2_dq_for, through
 * dispatch.c) only when the CPU has AVX2; each output is computed by the same IEEE operations
 * in the same order as the scalar kernel of ggml_dequant.c (explicit multiply then subtract, no
 * fused multiply-add), so the bits are the same, NaN payloads and signs included.
 *
 * Techniques: the codebook types read one grid entry per 8 outputs straight into a widening
 * load (vpmovzxbd), multiply, and apply the 8 signs with one xor against a row of kSignMask (the
 * sign bit of each f32 lane for every sign byte), as the scalar kernel's neg_if (ggml's negated
 * product);
 * the K types build all sixteen sub-block scales of a super-block with 8-lane multiplies and
 * decode 32 outputs per shift of a 32-byte code vector; mxfp4 / nvfp4 look their E2M1 levels
 * up with vpshufb; q1_0 selects +-d per bit with the same sign-mask rows.
 */
#include "ggml.h"
#include "ggml_tables.h"
#include "core.h"

#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TBX_GGML_NO_SIMD)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

static inline float h2f(const uint8_t *p) { return tbx_f16_to_f32(tbx_ld16(p)); }

/* kSignMask[s][j]: the f32 sign bit when bit j of s is set, else 0 (8 KiB, one row per byte) */
#define SGN_(x, j) ((((x) >> (j)) & 1) ? 0x80000000u : 0u)
#define SROW_(x) {SGN_(x, 0), SGN_(x, 1), SGN_(x, 2), SGN_(x, 3), SGN_(x, 4), SGN_(x, 5), SGN_(x, 6), SGN_(x, 7)}
#define SROW4_(x) SROW_(x), SROW_((x) + 1), SROW_((x) + 2), SROW_((x) + 3)
#define SROW16_(x) SROW4_(x), SROW4_((x) + 4), SROW4_((x) + 8), SROW4_((x) + 12)
#define SROW64_(x) SROW16_(x), SROW16_((x) + 16), SROW16_((x) + 32), SROW16_((x) + 48)
static const uint32_t kSignMask[256][8] __attribute__((aligned(32))) = {
    SROW64_(0), SROW64_(64), SROW64_(128), SROW64_(192)};
#undef SGN_
#undef SROW_
#undef SROW4_
#undef SROW16_
#undef SROW64_

AVX2 static inline __m256 sign_mask(unsigned s) {
    return _mm256_load_ps((const float *)(const void *)kSignMask[s & 255u]);
}

/* y[0..7] = float(int8 q[0..7]) * d */
AVX2 static inline void st8_i8(float *y, __m128i q8, __m256 d) {
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d));
}
AVX2 static inline void st16_i8(float *y, __m128i q, __m256 d) {
    st8_i8(y, q, d);
    st8_i8(y + 8, _mm_srli_si128(q, 8), d);
}
/* y[0..15] = d * float(uint8 q[0..15]) - m */
AVX2 static inline void st16_u8_affine(float *y, __m128i q, __m256 d, __m256 m) {
    const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
    const __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8)));
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, a), m));
    _mm256_storeu_ps(y + 8, _mm256_sub_ps(_mm256_mul_ps(d, b), m));
}

/* ---- q8_1: q8_0 with a second f16 (the sum, not needed) ----------------------------------- */
AVX2 static void dq_q8_1(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 36, y += 32) {
        const __m256 d = _mm256_set1_ps(h2f(b));
        st16_i8(y, _mm_loadu_si128((const __m128i *)(const void *)(b + 4)), d);
        st16_i8(y + 16, _mm_loadu_si128((const __m128i *)(const void *)(b + 20)), d);
    }
}

/* ---- q2_K: y = (d * (s & 15)) * q - dmin * (s >> 4), 16 outputs per scale byte ------------ */
AVX2 static void dq_q2_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m128i m4 = _mm_set1_epi8(15);
    const __m256i m3 = _mm256_set1_epi8(3);
    float dl[16] __attribute__((aligned(32))), ml[16] __attribute__((aligned(32)));
    for (uint64_t i = 0; i < nb; i++, b += 84) {
        const __m256 d = _mm256_set1_ps(h2f(b + 80)), dmin = _mm256_set1_ps(h2f(b + 82));
        const __m128i s = _mm_loadu_si128((const __m128i *)(const void *)b);
        const __m128i sl = _mm_and_si128(s, m4), sh = _mm_and_si128(_mm_srli_epi16(s, 4), m4);
        _mm256_store_ps(dl, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sl))));
        _mm256_store_ps(dl + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sl, 8)))));
        _mm256_store_ps(ml, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sh))));
        _mm256_store_ps(ml + 8, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sh, 8)))));
        for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(b + 16 + 32 * h));
            for (int j = 0; j < 4; j++, y += 32) {
                const __m256i x = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * j)), m3);
                const int k = 8 * h + 2 * j;
                st16_u8_affine(y, _mm256_castsi256_si128(x), _mm256_broadcast_ss(dl + k),
                               _mm256_broadcast_ss(ml + k));
                st16_u8_affine(y + 16, _mm256_extracti128_si256(x, 1), _mm256_broadcast_ss(dl + k + 1),
                               _mm256_broadcast_ss(ml + k + 1));
            }
        }
    }
}

/* ---- q3_K: y = (d * (sc - 32)) * (q2 - (hbit ? 0 : 4)) ------------------------------------ */
AVX2 static void dq_q3_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i m3 = _mm256_set1_epi8(3), k4 = _mm256_set1_epi8(4), zero = _mm256_setzero_si256();
    float dl[16] __attribute__((aligned(32)));
    int32_t sc[16] __attribute__((aligned(32)));
    for (uint64_t i = 0; i < nb; i++, b += 110) {
        const uint8_t *s = b + 96;
        for (int k = 0; k < 16; k++) {
            const int lo = k < 8 ? s[k] & 15 : s[k - 8] >> 4;
            const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
            sc[k] = (lo | (hi << 4)) - 32;
        }
        const __m256 d = _mm256_set1_ps(h2f(b + 108));
        _mm256_store_ps(dl, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_load_si256((const __m256i *)(const void *)sc))));
        _mm256_store_ps(dl + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_load_si256((const __m256i *)(const void *)(sc + 8)))));
        const __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)b);
        for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(b + 32 + 32 * h));
            for (int j = 0; j < 4; j++, y += 32) {
                const __m256i q2 = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * j)), m3);
                const __m256i hb = _mm256_and_si256(hm, _mm256_set1_epi8((char)(1u << (4 * h + j))));
                const __m256i x = _mm256_sub_epi8(q2, _mm256_and_si256(_mm256_cmpeq_epi8(hb, zero), k4));
                const int k = 8 * h + 2 * j;
                st16_i8(y, _mm256_castsi256_si128(x), _mm256_broadcast_ss(dl + k));
                st16_i8(y + 16, _mm256_extracti128_si256(x, 1), _mm256_broadcast_ss(dl + k + 1));
            }
        }
    }
}

/* ---- codebook types: y = db * grid, its sign bit flipped where the sign flag is set -------- */
/* 8 outputs from 8 unsigned grid bytes at g */
AVX2 static inline void st8_grid8(float *y, const void *g, unsigned signs, __m256 db) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)g)));
    _mm256_storeu_ps(y, _mm256_xor_ps(_mm256_mul_ps(db, v), sign_mask(signs)));
}
/* 8 outputs from two 4-byte grid entries */
AVX2 static inline void st8_grid4(float *y, uint32_t g1, uint32_t g2, unsigned signs, __m256 db) {
    const __m128i g = _mm_unpacklo_epi32(_mm_cvtsi32_si128((int)g1), _mm_cvtsi32_si128((int)g2));
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(g));
    _mm256_storeu_ps(y, _mm256_xor_ps(_mm256_mul_ps(db, v), sign_mask(signs)));
}

AVX2 static void dq_iq2_xxs(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 66) {
        const float d = h2f(b);
        for (int ib = 0; ib < 8; ib++, y += 32) {
            const uint8_t *q = b + 2 + 8 * ib;
            const uint32_t aux = tbx_ld32(q + 4);
            const __m256 db = _mm256_set1_ps(d * (0.5f + (float)(aux >> 28)) * 0.25f);
            for (int l = 0; l < 4; l++)
                st8_grid8(y + 8 * l, &tbx_iq2xxs_grid[q[l]], tbx_ksigns_iq2xs[(aux >> (7 * l)) & 127], db);
        }
    }
}

AVX2 static void dq_iq2_xs(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 74) {
        const float d = h2f(b);
        const uint8_t *scales = b + 66;
        for (int ib = 0; ib < 8; ib++, y += 32) {
            const __m256 db0 = _mm256_set1_ps(d * (0.5f + (float)(scales[ib] & 15)) * 0.25f);
            const __m256 db1 = _mm256_set1_ps(d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f);
            for (int l = 0; l < 4; l++) {
                const unsigned q = tbx_ld16(b + 2 + 2 * (4 * ib + l));
                st8_grid8(y + 8 * l, &tbx_iq2xs_grid[q & 511], tbx_ksigns_iq2xs[q >> 9], l < 2 ? db0 : db1);
            }
        }
    }
}

AVX2 static void dq_iq2_s(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 82) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
        for (int ib = 0; ib < 8; ib++, qs += 4, signs += 4, y += 32) {
            const __m256 db0 = _mm256_set1_ps(d * (0.5f + (float)(scales[ib] & 15)) * 0.25f);
            const __m256 db1 = _mm256_set1_ps(d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f);
            const unsigned h = qh[ib];
            for (int l = 0; l < 4; l++)
                st8_grid8(y + 8 * l, &tbx_iq2s_grid[qs[l] | ((h << (8 - 2 * l)) & 0x300)], signs[l],
                          l < 2 ? db0 : db1);
        }
    }
}

AVX2 static void dq_iq3_xxs(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 98) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *sas = b + 66;
        for (int ib = 0; ib < 8; ib++, qs += 8, y += 32) {
            const uint32_t aux = tbx_ld32(sas + 4 * ib);
            const __m256 db = _mm256_set1_ps(d * (0.5f + (float)(aux >> 28)) * 0.5f);
            for (int l = 0; l < 4; l++)
                st8_grid4(y + 8 * l, tbx_iq3xxs_grid[qs[2 * l]], tbx_iq3xxs_grid[qs[2 * l + 1]],
                          tbx_ksigns_iq2xs[(aux >> (7 * l)) & 127], db);
        }
    }
}

AVX2 static void dq_iq3_s(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 110) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
        for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4, y += 32) {
            const int s = ib % 2 ? scales[ib / 2] >> 4 : scales[ib / 2] & 15;
            const __m256 db = _mm256_set1_ps(d * (float)(1 + 2 * s));
            const unsigned h = qh[ib];
            for (int l = 0; l < 4; l++)
                st8_grid4(y + 8 * l, tbx_iq3s_grid[qs[2 * l] | ((h << (8 - 2 * l)) & 256)],
                          tbx_iq3s_grid[qs[2 * l + 1] | ((h << (7 - 2 * l)) & 256)], signs[l], db);
        }
    }
}

/* ---- mxfp4, nvfp4: y = (float)kvalues[nibble] * d ------------------------------------------ */
/* 2^(e-128), as the scalar e8m0_half (e < 2: f32 subnormals) */
static inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

AVX2 static void dq_mxfp4(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m128i kv = _mm_loadu_si128((const __m128i *)(const void *)tbx_kvalues_mxfp4);
    const __m128i m4 = _mm_set1_epi8(15);
    for (uint64_t i = 0; i < nb; i++, b += 17, y += 32) {
        const __m256 d = _mm256_set1_ps(e8m0_half(b[0]));
        const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 1));
        st16_i8(y, _mm_shuffle_epi8(kv, _mm_and_si128(q, m4)), d);
        st16_i8(y + 16, _mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(q, 4), m4)), d);
    }
}

/* Half of an unsigned E4M3 scale, as the scalar ue4m3_half (0x00 and 0x7F give 0). */
static inline float ue4m3_half(uint8_t x) {
    const uint32_t e = (x >> 3) & 15u, m = x & 7u;
    const uint32_t bits = ((e + 119u) << 23) | (m << 20); /* (1 + m/8) * 2^(e-8), e > 0 */
    float f;
    memcpy(&f, &bits, 4);
    if (e == 0) f = (float)m * (1.0f / 1024.0f);
    return x == 0x7F ? 0.0f : f;
}

AVX2 static void dq_nvfp4(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)tbx_kvalues_mxfp4));
    const __m256i m4 = _mm256_set1_epi8(15);
    for (uint64_t i = 0; i < nb; i++, b += 36, y += 64) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(b + 4));
        const __m256i lo = _mm256_shuffle_epi8(kv, _mm256_and_si256(q, m4));
        const __m256i hi = _mm256_shuffle_epi8(kv, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
        /* sub-block s: its 8 low nibbles, then its 8 high nibbles; lane 0 holds s = 0, 1 */
        const __m256i s02 = _mm256_unpacklo_epi64(lo, hi), s13 = _mm256_unpackhi_epi64(lo, hi);
        st16_i8(y, _mm256_castsi256_si128(s02), _mm256_set1_ps(ue4m3_half(b[0])));
        st16_i8(y + 16, _mm256_castsi256_si128(s13), _mm256_set1_ps(ue4m3_half(b[1])));
        st16_i8(y + 32, _mm256_extracti128_si256(s02, 1), _mm256_set1_ps(ue4m3_half(b[2])));
        st16_i8(y + 48, _mm256_extracti128_si256(s13, 1), _mm256_set1_ps(ue4m3_half(b[3])));
    }
}

/* ---- q1_0: bit set -> d, clear -> -d (the sign bit flipped); d quieted as the scalar -------- */
AVX2 static void dq_q1_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 18, y += 128) {
        uint32_t du;
        const float d0 = h2f(b);
        memcpy(&du, &d0, 4);
        if ((du & 0x7FFFFFFFu) > 0x7F800000u) du |= 0x00400000u;
        const __m256 d = _mm256_castsi256_ps(_mm256_set1_epi32((int)du));
        for (int k = 0; k < 16; k++)
            _mm256_storeu_ps(y + 8 * k, _mm256_xor_ps(d, sign_mask(~(unsigned)b[2 + k])));
    }
}

tbx_dequant_fn tbx_ggml_dequant_avx2_dq_for(tbx_dtype dt) {
    switch (dt) {
    case TBX_DT_Q8_1: return dq_q8_1;
    case TBX_DT_Q2_K: return dq_q2_K;
    case TBX_DT_Q3_K: return dq_q3_K;
    case TBX_DT_IQ2_XXS: return dq_iq2_xxs;
    case TBX_DT_IQ2_XS: return dq_iq2_xs;
    case TBX_DT_IQ2_S: return dq_iq2_s;
    case TBX_DT_IQ3_XXS: return dq_iq3_xxs;
    case TBX_DT_IQ3_S: return dq_iq3_s;
    case TBX_DT_MXFP4: return dq_mxfp4;
    case TBX_DT_NVFP4: return dq_nvfp4;
    case TBX_DT_Q1_0: return dq_q1_0;
    default: return NULL;
    }
}

#else /* no x86 SIMD kernels in this build */

tbx_dequant_fn tbx_ggml_dequant_avx2_dq_for(tbx_dtype dt) {
    (void)dt;
    return NULL;
}

#endif
