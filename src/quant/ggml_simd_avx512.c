/*
 * ggml_simd_avx512.c - AVX-512 kernels of the ggml block types.
 *
 * Each kernel carries __attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) and is only
 * handed out when the CPU has all four (tbx_ggml_cpu_isa). Same IEEE operations in the same
 * order as the scalar kernels: explicit multiply then subtract, never a fused multiply-add
 * (ggml.h turns contraction off), so the results are bit-identical.
 */
#include "ggml.h"
#include "core.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TBX_GGML_NO_SIMD)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

/* An f16 scale by VCVTPH2PS, one instruction instead of tbx_f16_to_f32's call and branches. It
 * quiets a signalling NaN, which tbx_f16_to_f32 keeps; every kernel here multiplies the scale,
 * which quiets it anyway, with the same payload: the outputs are the same bits. */
AVX512 static inline float h2f(const uint8_t *p) { return _cvtsh_ss(tbx_ld16(p)); }

/* y[0..15] = float(int8 q[0..15]) * d */
AVX512 static inline void st16_i8(float *y, __m128i q, __m512 d) {
    _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d));
}
/* y[0..15] = d * float(uint8 q[0..15]) - m */
AVX512 static inline void st16_u8_affine(float *y, __m128i q, __m512 d, __m512 m) {
    const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q));
    _mm512_storeu_ps(y, _mm512_sub_ps(_mm512_mul_ps(d, v), m));
}

AVX512 static void dq_q8_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 34, y += 32) {
        const __m512 d = _mm512_set1_ps(h2f(b));
        st16_i8(y, _mm_loadu_si128((const __m128i *)(b + 2)), d);
        st16_i8(y + 16, _mm_loadu_si128((const __m128i *)(b + 18)), d);
    }
}

AVX512 static void dq_q4_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m128i m4 = _mm_set1_epi8(15), k8 = _mm_set1_epi8(8);
    for (uint64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const __m512 d = _mm512_set1_ps(h2f(b));
        const __m128i q = _mm_loadu_si128((const __m128i *)(b + 2));
        st16_i8(y, _mm_sub_epi8(_mm_and_si128(q, m4), k8), d);
        st16_i8(y + 16, _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), k8), d);
    }
}

static inline void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

AVX512 static void dq_q4_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i m4 = _mm256_set1_epi8(15);
    for (uint64_t i = 0; i < nb; i++, b += 144) {
        const float d = h2f(b), dmin = h2f(b + 2);
        const uint8_t *s = b + 4, *q = b + 16;
        for (int g = 0; g < 4; g++, q += 32, y += 64) {
            int sc, m;
            k4_scale_min(s, 2 * g, &sc, &m);
            const __m512 d1 = _mm512_set1_ps(d * (float)sc), m1 = _mm512_set1_ps(dmin * (float)m);
            k4_scale_min(s, 2 * g + 1, &sc, &m);
            const __m512 d2 = _mm512_set1_ps(d * (float)sc), m2 = _mm512_set1_ps(dmin * (float)m);
            const __m256i v = _mm256_loadu_si256((const __m256i *)q);
            const __m256i lo = _mm256_and_si256(v, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            st16_u8_affine(y, _mm256_castsi256_si128(lo), d1, m1);
            st16_u8_affine(y + 16, _mm256_extracti128_si256(lo, 1), d1, m1);
            st16_u8_affine(y + 32, _mm256_castsi256_si128(hi), d2, m2);
            st16_u8_affine(y + 48, _mm256_extracti128_si256(hi, 1), d2, m2);
        }
    }
}

AVX512 static void dq_q5_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    for (uint64_t i = 0; i < nb; i++, b += 176) {
        const float d = h2f(b), dmin = h2f(b + 2);
        const uint8_t *s = b + 4, *q = b + 48;
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
        for (int g = 0; g < 4; g++, q += 32, y += 64) {
            int sc, m;
            k4_scale_min(s, 2 * g, &sc, &m);
            const __m512 d1 = _mm512_set1_ps(d * (float)sc), m1 = _mm512_set1_ps(dmin * (float)m);
            k4_scale_min(s, 2 * g + 1, &sc, &m);
            const __m512 d2 = _mm512_set1_ps(d * (float)sc), m2 = _mm512_set1_ps(dmin * (float)m);
            const __m256i v = _mm256_loadu_si256((const __m256i *)q);
            const __m128i c1 = _mm_cvtsi32_si128(2 * g), c2 = _mm_cvtsi32_si128(2 * g + 1);
            const __m256i h1 = _mm256_and_si256(_mm256_srl_epi16(qh, c1), one);
            const __m256i h2 = _mm256_and_si256(_mm256_srl_epi16(qh, c2), one);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_slli_epi16(h1, 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                               _mm256_slli_epi16(h2, 4));
            st16_u8_affine(y, _mm256_castsi256_si128(lo), d1, m1);
            st16_u8_affine(y + 16, _mm256_extracti128_si256(lo, 1), d1, m1);
            st16_u8_affine(y + 32, _mm256_castsi256_si128(hi), d2, m2);
            st16_u8_affine(y + 48, _mm256_extracti128_si256(hi, 1), d2, m2);
        }
    }
}

AVX512 static void dq_q6_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    for (uint64_t i = 0; i < nb; i++, b += 210) {
        const float d = h2f(b + 208);
        const int8_t *sc = (const int8_t *)(b + 192);
        float ds[16];
        for (int k = 0; k < 16; k++) ds[k] = d * (float)sc[k];
        const uint8_t *ql = b, *qh = b + 128;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, y += 128) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i hv = _mm256_loadu_si256((const __m256i *)qh);
            __m256i v[4];
            v[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(hv, m3), 4));
            v[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2), m3), 4));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 4), m3), 4));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 6), m3), 4));
            for (int k = 0; k < 4; k++) {
                const __m256i q = _mm256_sub_epi8(v[k], k32);
                const float *dk = ds + 8 * h + 2 * k;
                st16_i8(y + 32 * k, _mm256_castsi256_si128(q), _mm512_set1_ps(dk[0]));
                st16_i8(y + 32 * k + 16, _mm256_extracti128_si256(q, 1), _mm512_set1_ps(dk[1]));
            }
        }
    }
}

tbx_dequant_fn tbx_ggml_dequant_avx512_for(tbx_dtype dt) {
    switch (dt) {
    case TBX_DT_Q8_0: return dq_q8_0;
    case TBX_DT_Q4_0: return dq_q4_0;
    case TBX_DT_Q4_K: return dq_q4_K;
    case TBX_DT_Q5_K: return dq_q5_K;
    case TBX_DT_Q6_K: return dq_q6_K;
    default: return NULL;
    }
}

#else /* no x86 SIMD kernels in this build */

tbx_dequant_fn tbx_ggml_dequant_avx512_for(tbx_dtype dt) {
    (void)dt;
    return NULL;
}

#endif
