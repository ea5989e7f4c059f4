/*
 * ggml_simd_avx2.c - AVX2 kernels of the ggml block types.
 *
 * Compiled for the baseline target; each kernel carries __attribute__((target("avx2"))) and is
 * only handed out by the dispatchers when the CPU has AVX2 (tbx_ggml_cpu_isa). The kernels do
 * the same IEEE operations in the same order as the scalar ones (explicit mul/sub, no FMA: the
 * target does not even enable it), so their results are bit-identical.
 */
#include "ggml.h"
#include "ggml_tables.h"
#include "core.h"

#include <float.h>
#include <math.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TBX_GGML_NO_SIMD)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

static inline float h2f(const uint8_t *p) { return tbx_f16_to_f32(tbx_ld16(p)); }

/* y[0..7] = float(int8 bytes q[0..7]) * d */
AVX2 static inline void st8_i8(float *y, __m128i q8, __m256 d) {
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d));
}
/* y[0..7] = float(uint8 bytes q[0..7]) * d - m */
AVX2 static inline void st8_u8_affine(float *y, __m128i q8, __m256 d, __m256 m) {
    const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8));
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, q), m));
}
/* y[0..15] from 16 int8 values in a 128-bit register, times d */
AVX2 static inline void st16_i8(float *y, __m128i q, __m256 d) {
    st8_i8(y, q, d);
    st8_i8(y + 8, _mm_srli_si128(q, 8), d);
}
AVX2 static inline void st16_u8_affine(float *y, __m128i q, __m256 d, __m256 m) {
    st8_u8_affine(y, q, d, m);
    st8_u8_affine(y + 8, _mm_srli_si128(q, 8), d, m);
}

AVX2 static void dq_q8_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 34, y += 32) {
        const __m256 d = _mm256_set1_ps(h2f(b));
        st16_i8(y, _mm_loadu_si128((const __m128i *)(b + 2)), d);
        st16_i8(y + 16, _mm_loadu_si128((const __m128i *)(b + 18)), d);
    }
}

AVX2 static void dq_q4_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m128i m4 = _mm_set1_epi8(15), k8 = _mm_set1_epi8(8);
    for (uint64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const __m256 d = _mm256_set1_ps(h2f(b));
        const __m128i q = _mm_loadu_si128((const __m128i *)(b + 2));
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, m4), k8);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), k8);
        st16_i8(y, lo, d);
        st16_i8(y + 16, hi, d);
    }
}

/* 16 uint8 values times d, plus m, where a NaN product wins over a NaN m (add_first_nan in
 * ggml_dequant.c: the operand order numpy's adder gives) */
AVX2 static inline void st8_u8_muladd(float *y, __m128i q8, __m256 d, __m256 m) {
    const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8)), d);
    const __m256 nan = _mm256_cmp_ps(t, t, _CMP_UNORD_Q);
    _mm256_storeu_ps(y, _mm256_blendv_ps(_mm256_add_ps(t, m), t, nan));
}
AVX2 static inline void st16_u8_muladd(float *y, __m128i q, __m256 d, __m256 m) {
    st8_u8_muladd(y, q, d, m);
    st8_u8_muladd(y + 8, _mm_srli_si128(q, 8), d, m);
}

AVX2 static void dq_q4_1(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m128i m4 = _mm_set1_epi8(15);
    for (uint64_t i = 0; i < nb; i++, b += 20, y += 32) {
        const __m256 d = _mm256_set1_ps(h2f(b)), m = _mm256_set1_ps(h2f(b + 2));
        const __m128i q = _mm_loadu_si128((const __m128i *)(b + 4));
        st16_u8_muladd(y, _mm_and_si128(q, m4), d, m);
        st16_u8_muladd(y + 16, _mm_and_si128(_mm_srli_epi16(q, 4), m4), d, m);
    }
}

/* The 32 fifth bits of q5_0/q5_1 (LE u32 qh, bit k for element k) as 0/16 bytes in element order;
 * nibbles: elements 0-15 low nibbles, 16-31 high nibbles of qs[0..15]. */
AVX2 static inline __m256i q5_values(const uint8_t *qh, const uint8_t *qs) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
    __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)tbx_ld32(qh)), shuf);
    h = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), _mm256_set1_epi8(16));
    const __m128i q = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(15);
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    return _mm256_or_si256(nib, h);
}

AVX2 static void dq_q5_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i k16 = _mm256_set1_epi8(16);
    for (uint64_t i = 0; i < nb; i++, b += 22, y += 32) {
        const __m256 d = _mm256_set1_ps(h2f(b));
        const __m256i v = _mm256_sub_epi8(q5_values(b + 2, b + 6), k16);
        st16_i8(y, _mm256_castsi256_si128(v), d);
        st16_i8(y + 16, _mm256_extracti128_si256(v, 1), d);
    }
}

AVX2 static void dq_q5_1(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 24, y += 32) {
        const __m256 d = _mm256_set1_ps(h2f(b)), m = _mm256_set1_ps(h2f(b + 2));
        const __m256i v = q5_values(b + 4, b + 8);
        st16_u8_muladd(y, _mm256_castsi256_si128(v), d, m);
        st16_u8_muladd(y + 16, _mm256_extracti128_si256(v, 1), d, m);
    }
}

static const int8_t kv_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* y = d * kv[nibble], d * float(int8) */
AVX2 static void dq_iq4_nl(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m128i kv = _mm_loadu_si128((const __m128i *)kv_iq4nl), m4 = _mm_set1_epi8(15);
    for (uint64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const __m256 d = _mm256_set1_ps(h2f(b));
        const __m128i q = _mm_loadu_si128((const __m128i *)(b + 2));
        st16_i8(y, _mm_shuffle_epi8(kv, _mm_and_si128(q, m4)), d);
        st16_i8(y + 16, _mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(q, 4), m4)), d);
    }
}

AVX2 static void dq_iq4_xs(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m128i kv = _mm_loadu_si128((const __m128i *)kv_iq4nl), m4 = _mm_set1_epi8(15);
    for (uint64_t i = 0; i < nb; i++, b += 136) {
        const float d = h2f(b);
        const unsigned sh = tbx_ld16(b + 2);
        const uint8_t *sl = b + 4, *qs = b + 8;
        for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
            const int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 15) | (int)(((sh >> (2 * ib)) & 3) << 4);
            const __m256 dl = _mm256_set1_ps(d * (float)(ls - 32));
            const __m128i q = _mm_loadu_si128((const __m128i *)qs);
            st16_i8(y, _mm_shuffle_epi8(kv, _mm_and_si128(q, m4)), dl);
            st16_i8(y + 16, _mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(q, 4), m4)), dl);
        }
    }
}

/* y = d * q: the scalar kernel's d * (float)q, the same product */
AVX2 static void dq_q8_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 292, y += 256) {
        const __m256 d = _mm256_set1_ps(tbx_ldf32(b));
        for (int k = 0; k < 256; k += 16) st16_i8(y + k, _mm_loadu_si128((const __m128i *)(b + 4 + k)), d);
    }
}

/* Scale and min of sub-block j of q4_K/q5_K (as the scalar kernel). */
static inline void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

AVX2 static void dq_q4_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i m4 = _mm256_set1_epi8(15);
    for (uint64_t i = 0; i < nb; i++, b += 144) {
        const float d = h2f(b), dmin = h2f(b + 2);
        const uint8_t *s = b + 4, *q = b + 16;
        for (int g = 0; g < 4; g++, q += 32, y += 64) {
            int sc, m;
            k4_scale_min(s, 2 * g, &sc, &m);
            const __m256 d1 = _mm256_set1_ps(d * (float)sc), m1 = _mm256_set1_ps(dmin * (float)m);
            k4_scale_min(s, 2 * g + 1, &sc, &m);
            const __m256 d2 = _mm256_set1_ps(d * (float)sc), m2 = _mm256_set1_ps(dmin * (float)m);
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

AVX2 static void dq_q5_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    for (uint64_t i = 0; i < nb; i++, b += 176) {
        const float d = h2f(b), dmin = h2f(b + 2);
        const uint8_t *s = b + 4, *q = b + 48;
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
        for (int g = 0; g < 4; g++, q += 32, y += 64) {
            int sc, m;
            k4_scale_min(s, 2 * g, &sc, &m);
            const __m256 d1 = _mm256_set1_ps(d * (float)sc), m1 = _mm256_set1_ps(dmin * (float)m);
            k4_scale_min(s, 2 * g + 1, &sc, &m);
            const __m256 d2 = _mm256_set1_ps(d * (float)sc), m2 = _mm256_set1_ps(dmin * (float)m);
            const __m256i v = _mm256_loadu_si256((const __m256i *)q);
            /* bit 2g (2g+1) of qh[l] is bit 4 of the low (high) quant: shift it to bit 0, mask,
             * then to bit 4 (byte-wise, through 16-bit shifts and a mask) */
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

AVX2 static void dq_q6_K(const void *src, float *y, uint64_t nb) {
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
            /* 6-bit values of the four 32-element groups, minus 32 (int8) */
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
                const float *dk = ds + 8 * h + 2 * k; /* group k: scales is + 2k, is = l/16 */
                st16_i8(y + 32 * k, _mm256_castsi256_si128(q), _mm256_set1_ps(dk[0]));
                st16_i8(y + 32 * k + 16, _mm256_extracti128_si256(q, 1), _mm256_set1_ps(dk[1]));
            }
        }
    }
}

/* ---- ternary and 2-bit types: tq2_0, tq1_0, q2_0 ------------------------------------------ */
/* The scalar kernels compute (float)(level) * d with an integer level in -1..2; here the levels
 * are built as int8 lanes and go through st16_i8 (cvt, then the same single multiply). */

/* tq2_0: 64 bytes of 2-bit fields + f16 d; element 128h + 32l + m is bits 2l of byte 32h + m. */
AVX2 static void dq_tq2_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (uint64_t i = 0; i < nb; i++, b += 66) {
        const __m256 d = _mm256_set1_ps(h2f(b + 64));
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b + 32 * h));
            for (int l = 0; l < 4; l++, y += 32) {
                const __m128i c = _mm_cvtsi32_si128(2 * l);
                const __m256i v = _mm256_sub_epi8(_mm256_and_si256(_mm256_srl_epi16(q, c), m3), one);
                st16_i8(y, _mm256_castsi256_si128(v), d);
                st16_i8(y + 16, _mm256_extracti128_si256(v, 1), d);
            }
        }
    }
}

/* tq1_0 digit of bytes q (already multiplied by 3^n mod 256): ((q * 3) >> 8) - 1, which is
 * -1 + (q >= 86) + (q >= 171); unsigned compares through the sign-flipped signed ones. */
AVX2 static inline __m256i tq1_level256(__m256i q) {
    const __m256i x = _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80));
    const __m256i c1 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8((char)(85 ^ 0x80)));
    const __m256i c2 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8((char)(170 ^ 0x80)));
    return _mm256_sub_epi8(_mm256_sub_epi8(_mm256_set1_epi8(-1), c1), c2);
}
AVX2 static inline __m128i tq1_level128(__m128i q) {
    const __m128i x = _mm_xor_si128(q, _mm_set1_epi8((char)0x80));
    const __m128i c1 = _mm_cmpgt_epi8(x, _mm_set1_epi8((char)(85 ^ 0x80)));
    const __m128i c2 = _mm_cmpgt_epi8(x, _mm_set1_epi8((char)(170 ^ 0x80)));
    return _mm_sub_epi8(_mm_sub_epi8(_mm_set1_epi8(-1), c1), c2);
}
/* q * 3 mod 256, byte-wise */
AVX2 static inline __m256i mul3_256(__m256i q) { return _mm256_add_epi8(q, _mm256_add_epi8(q, q)); }
AVX2 static inline __m128i mul3_128(__m128i q) { return _mm_add_epi8(q, _mm_add_epi8(q, q)); }

AVX2 static void dq_tq1_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 54) {
        const __m256 d = _mm256_set1_ps(h2f(b + 52));
        __m256i q = _mm256_loadu_si256((const __m256i *)b); /* qs[0..31], times 3^n */
        for (int n = 0; n < 5; n++, y += 32, q = mul3_256(q)) {
            const __m256i v = tq1_level256(q);
            st16_i8(y, _mm256_castsi256_si128(v), d);
            st16_i8(y + 16, _mm256_extracti128_si256(v, 1), d);
        }
        __m128i r = _mm_loadu_si128((const __m128i *)(b + 32)); /* qs[32..47] */
        for (int n = 0; n < 5; n++, y += 16, r = mul3_128(r)) st16_i8(y, tq1_level128(r), d);
        /* qh[0..3] times 1, 3, 9, 27: dword n of the vector holds the four bytes times 3^n */
        const __m128i h0 = _mm_set1_epi32((int)tbx_ld32(b + 48));
        const __m128i h1 = mul3_128(h0), h2 = mul3_128(h1), h3 = mul3_128(h2);
        const __m128i h = _mm_blend_epi32(_mm_blend_epi32(_mm_blend_epi32(h0, h1, 2), h2, 4), h3, 8);
        st16_i8(y, tq1_level128(h), d);
        y += 16;
    }
}

/* q2_0: f16 d + 16 bytes; element j is bits 2(j%4) of byte j/4. */
AVX2 static void dq_q2_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m128i m3 = _mm_set1_epi8(3), one = _mm_set1_epi8(1);
    for (uint64_t i = 0; i < nb; i++, b += 18, y += 64) {
        const __m256 d = _mm256_set1_ps(h2f(b));
        const __m128i q = _mm_loadu_si128((const __m128i *)(b + 2));
        /* a_l[k] = field l of byte k, minus 1 */
        const __m128i a0 = _mm_sub_epi8(_mm_and_si128(q, m3), one);
        const __m128i a1 = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 2), m3), one);
        const __m128i a2 = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m3), one);
        const __m128i a3 = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 6), m3), one);
        /* interleave to element order 4k + l */
        const __m128i lo01 = _mm_unpacklo_epi8(a0, a1), hi01 = _mm_unpackhi_epi8(a0, a1);
        const __m128i lo23 = _mm_unpacklo_epi8(a2, a3), hi23 = _mm_unpackhi_epi8(a2, a3);
        st16_i8(y, _mm_unpacklo_epi16(lo01, lo23), d);
        st16_i8(y + 16, _mm_unpackhi_epi16(lo01, lo23), d);
        st16_i8(y + 32, _mm_unpacklo_epi16(hi01, hi23), d);
        st16_i8(y + 48, _mm_unpackhi_epi16(hi01, hi23), d);
    }
}

/* ---- iq1_s, iq1_m: y = dl * ((float)grid + delta), as the scalar kernels --------------------- */
/* +-delta without a branch (the sign is random data): the sign bit of neg (bit 31) xored in */
AVX2 static inline __m256 iq1_delta(__m256 pdelta, uint32_t neg) {
    return _mm256_xor_ps(pdelta, _mm256_castsi256_ps(_mm256_set1_epi32((int)(neg & 0x80000000u))));
}
/* 8 outputs from one grid entry (8 int8 in {-1, 0, 1}) */
AVX2 static inline void st8_iq1(float *y, const uint64_t *g, __m256 dl, __m256 delta) {
    const __m128i q = _mm_loadl_epi64((const __m128i *)g);
    const __m256 t = _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), delta);
    _mm256_storeu_ps(y, _mm256_mul_ps(dl, t));
}

AVX2 static void dq_iq1_s(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256 pdelta = _mm256_set1_ps(TBX_IQ1S_DELTA);
    for (uint64_t i = 0; i < nb; i++, b += 50) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2;
        for (int ib = 0; ib < 8; ib++, qs += 4, y += 32) {
            const unsigned qh = tbx_ld16(b + 34 + 2 * ib);
            const __m256 dl = _mm256_set1_ps(d * (float)(2 * ((qh >> 12) & 7) + 1));
            const __m256 delta = iq1_delta(pdelta, (uint32_t)qh << 16);
            for (int l = 0; l < 4; l++)
                st8_iq1(y + 8 * l, &tbx_iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)], dl, delta);
        }
    }
}

AVX2 static void dq_iq1_m(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256 pdelta = _mm256_set1_ps(TBX_IQ1S_DELTA);
    for (uint64_t i = 0; i < nb; i++, b += 56) {
        const uint8_t *qs = b, *qh = b + 32;
        unsigned sc[4];
        for (int k = 0; k < 4; k++) sc[k] = tbx_ld16(b + 48 + 2 * k);
        const uint16_t dbits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                          ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = tbx_f16_to_f32(dbits);
        for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2, y += 32) {
            const unsigned s = sc[ib / 2] >> (6 * (ib % 2));
            const __m256 dl1 = _mm256_set1_ps(d * (float)(2 * (s & 7) + 1));
            const __m256 dl2 = _mm256_set1_ps(d * (float)(2 * ((s >> 3) & 7) + 1));
            for (int l = 0; l < 4; l++) {
                const unsigned hb = l % 2 ? (unsigned)qh[l / 2] >> 4 : qh[l / 2] & 15u;
                st8_iq1(y + 8 * l, &tbx_iq1s_grid[qs[l] | ((hb & 7) << 8)], l < 2 ? dl1 : dl2,
                        iq1_delta(pdelta, (uint32_t)hb << 28));
            }
        }
    }
}

/* The byte shifts above use 16-bit lane shifts followed by masks that drop every bit crossing
 * a byte boundary, so they act as per-byte shifts. */

tbx_dequant_fn tbx_ggml_dequant_avx2_for(tbx_dtype dt) {
    switch (dt) {
    case TBX_DT_Q8_0: return dq_q8_0;
    case TBX_DT_Q4_0: return dq_q4_0;
    case TBX_DT_Q4_K: return dq_q4_K;
    case TBX_DT_Q5_K: return dq_q5_K;
    case TBX_DT_Q6_K: return dq_q6_K;
    case TBX_DT_Q4_1: return dq_q4_1;
    case TBX_DT_Q5_0: return dq_q5_0;
    case TBX_DT_Q5_1: return dq_q5_1;
    case TBX_DT_IQ4_NL: return dq_iq4_nl;
    case TBX_DT_IQ4_XS: return dq_iq4_xs;
    case TBX_DT_Q8_K: return dq_q8_K;
    case TBX_DT_TQ2_0: return dq_tq2_0;
    case TBX_DT_TQ1_0: return dq_tq1_0;
    case TBX_DT_Q2_0: return dq_q2_0;
    case TBX_DT_IQ1_S: return dq_iq1_s;
    case TBX_DT_IQ1_M: return dq_iq1_m;
    default: return NULL;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* K-quant encoder lane kernels: lane j of each __m256 is sub-block j. Operation for operation  */
/* the scalar kernels of ggml_quant.c (see tbx_kq_ops in ggml.h).                              */
/* ------------------------------------------------------------------------------------------ */
/* The scalar kernels round with (v + 1.5*2^23) - 1.5*2^23 (round to nearest even for
 * |v| < 2^22); roundps gives the same integers there, and every use clamps the result to a small
 * range, where both saturate identically for larger |v|, Inf and NaN. */
AVX2 static inline __m256 rnd_ps(__m256 v) {
    return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* xt[8*i + j] = x[j*n + i]: 8x8 transposes of rows j (n a multiple of 8) */
AVX2 static void transpose(const float *x, int n, float *xt) {
    for (int i0 = 0; i0 < n; i0 += 8) {
        __m256 r[8], t[8];
        for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(x + j * n + i0);
        t[0] = _mm256_unpacklo_ps(r[0], r[1]);
        t[1] = _mm256_unpackhi_ps(r[0], r[1]);
        t[2] = _mm256_unpacklo_ps(r[2], r[3]);
        t[3] = _mm256_unpackhi_ps(r[2], r[3]);
        t[4] = _mm256_unpacklo_ps(r[4], r[5]);
        t[5] = _mm256_unpackhi_ps(r[4], r[5]);
        t[6] = _mm256_unpacklo_ps(r[6], r[7]);
        t[7] = _mm256_unpackhi_ps(r[6], r[7]);
        r[0] = _mm256_shuffle_ps(t[0], t[2], 0x44);
        r[1] = _mm256_shuffle_ps(t[0], t[2], 0xEE);
        r[2] = _mm256_shuffle_ps(t[1], t[3], 0x44);
        r[3] = _mm256_shuffle_ps(t[1], t[3], 0xEE);
        r[4] = _mm256_shuffle_ps(t[4], t[6], 0x44);
        r[5] = _mm256_shuffle_ps(t[4], t[6], 0xEE);
        r[6] = _mm256_shuffle_ps(t[5], t[7], 0x44);
        r[7] = _mm256_shuffle_ps(t[5], t[7], 0xEE);
        /* r[k] holds column k of rows 0-3 (low half) and of rows 4-7 of the other 128-bit lane */
        float *o = xt + 8 * i0;
        _mm256_storeu_ps(o + 0, _mm256_permute2f128_ps(r[0], r[4], 0x20));
        _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(r[1], r[5], 0x20));
        _mm256_storeu_ps(o + 16, _mm256_permute2f128_ps(r[2], r[6], 0x20));
        _mm256_storeu_ps(o + 24, _mm256_permute2f128_ps(r[3], r[7], 0x20));
        _mm256_storeu_ps(o + 32, _mm256_permute2f128_ps(r[0], r[4], 0x31));
        _mm256_storeu_ps(o + 40, _mm256_permute2f128_ps(r[1], r[5], 0x31));
        _mm256_storeu_ps(o + 48, _mm256_permute2f128_ps(r[2], r[6], 0x31));
        _mm256_storeu_ps(o + 56, _mm256_permute2f128_ps(r[3], r[7], 0x31));
    }
}

/* One candidate's sums over the rows: l = clamp(round(is * (u + c)), 0, nmax). */
#define AFFINE_SUMS(u_expr)                                                                   \
    for (int i = 0; i < n; i++) {                                                             \
        const __m256 w = _mm256_loadu_ps(u + 8 * i);                                          \
        __m256 l = rnd_ps(_mm256_mul_ps(is, u_expr));                                         \
        l = _mm256_max_ps(_mm256_min_ps(l, vnmax), zero);                                     \
        sl = _mm256_add_ps(sl, l);                                                            \
        sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(l, l));                                        \
        sul = _mm256_add_ps(sul, _mm256_mul_ps(w, l));                                        \
    }

/* L[k*n + i] = Lt[8n(k/8) + 8i + k%8] + add: 8x8 byte transposes */
AVX2 static void untranspose(const uint8_t *Lt, int n, int ngroups, uint8_t add, uint8_t *L) {
    const __m128i va = _mm_set1_epi8((char)add);
    for (int g = 0; g < ngroups; g++) {
        const uint8_t *src = Lt + 8 * n * g;
        uint8_t *dst = L + 8 * n * g;
        for (int i0 = 0; i0 < n; i0 += 8) {
            __m128i r[8];
            for (int r8 = 0; r8 < 8; r8++) r[r8] = _mm_loadl_epi64((const __m128i *)(src + 8 * (i0 + r8)));
            const __m128i a0 = _mm_unpacklo_epi8(r[0], r[1]), a1 = _mm_unpacklo_epi8(r[2], r[3]);
            const __m128i a2 = _mm_unpacklo_epi8(r[4], r[5]), a3 = _mm_unpacklo_epi8(r[6], r[7]);
            const __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1);
            const __m128i b2 = _mm_unpacklo_epi16(a2, a3), b3 = _mm_unpackhi_epi16(a2, a3);
            __m128i c[4];
            c[0] = _mm_add_epi8(_mm_unpacklo_epi32(b0, b2), va); /* columns 0, 1 */
            c[1] = _mm_add_epi8(_mm_unpackhi_epi32(b0, b2), va); /* columns 2, 3 */
            c[2] = _mm_add_epi8(_mm_unpacklo_epi32(b1, b3), va); /* columns 4, 5 */
            c[3] = _mm_add_epi8(_mm_unpackhi_epi32(b1, b3), va); /* columns 6, 7 */
            for (int q = 0; q < 4; q++) {
                _mm_storel_epi64((__m128i *)(dst + (2 * q) * n + i0), c[q]);
                _mm_storel_epi64((__m128i *)(dst + (2 * q + 1) * n + i0), _mm_srli_si128(c[q], 8));
            }
        }
    }
}

/* Least-squares fit of one candidate from its sums, kept per lane if better (affine_fit in
 * ggml_quant.c, op for op). */
#define AFFINE_PICK(SL, SL2, SUL)                                                               \
    {                                                                                           \
        const __m256 sxl = _mm256_add_ps(SUL, _mm256_mul_ps(mn, SL));                           \
        const __m256 D = _mm256_sub_ps(_mm256_mul_ps(fn, SL2), _mm256_mul_ps(SL, SL));          \
        __m256 s = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(fn, sxl), _mm256_mul_ps(sx, SL)), D); \
        __m256 b = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(SL2, sx), _mm256_mul_ps(SL, sxl)), D); \
        const __m256 bpos = _mm256_cmp_ps(b, zero, _CMP_GT_OQ);                                 \
        s = _mm256_blendv_ps(s, _mm256_div_ps(sxl, SL2), bpos);                                 \
        b = _mm256_blendv_ps(b, zero, bpos);                                                    \
        const __m256 t1 = _mm256_mul_ps(_mm256_mul_ps(two, s), sxl);                            \
        const __m256 t2 = _mm256_mul_ps(_mm256_mul_ps(two, b), sx);                             \
        const __m256 t3 = _mm256_mul_ps(_mm256_mul_ps(s, s), SL2);                              \
        const __m256 t4 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(two, s), b), SL);           \
        const __m256 t5 = _mm256_mul_ps(_mm256_mul_ps(fn, b), b);                               \
        const __m256 e = _mm256_add_ps(                                                         \
            _mm256_add_ps(_mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(sx2, t1), t2), t3), t4), t5); \
        const __m256 ok = _mm256_and_ps(_mm256_cmp_ps(D, zero, _CMP_GT_OQ),                    \
                                        _mm256_cmp_ps(s, zero, _CMP_GT_OQ));                    \
        const __m256 upd = _mm256_and_ps(ok, _mm256_cmp_ps(e, be, _CMP_LT_OQ));                 \
        be = _mm256_blendv_ps(be, e, upd);                                                      \
        bs = _mm256_blendv_ps(bs, s, upd);                                                      \
        bb = _mm256_blendv_ps(bb, b, upd);                                                      \
    }

AVX2 static void search_affine(const float *xt, int n, float nmax, const float *delta, int nd,
                               int nlloyd, float *s_out, float *b_out, float *sx_out) {
    const __m256 zero = _mm256_setzero_ps(), two = _mm256_set1_ps(2.0f), one = _mm256_set1_ps(1.0f);
    const __m256 vnmax = _mm256_set1_ps(nmax), fn = _mm256_set1_ps((float)n);
    float u[8 * 32];
    __m256 mn = _mm256_loadu_ps(xt), mx = mn, sx = zero, sx2 = zero;
    for (int i = 0; i < n; i++) {
        const __m256 v = _mm256_loadu_ps(xt + 8 * i);
        mn = _mm256_min_ps(v, mn);
        mx = _mm256_max_ps(v, mx);
        sx = _mm256_add_ps(sx, v);
        sx2 = _mm256_add_ps(sx2, _mm256_mul_ps(v, v));
    }
    mn = _mm256_min_ps(mn, zero);
    for (int i = 0; i < n; i++) _mm256_storeu_ps(u + 8 * i, _mm256_sub_ps(_mm256_loadu_ps(xt + 8 * i), mn));
    const __m256 rng = _mm256_sub_ps(mx, mn);
    const __m256 pos = _mm256_cmp_ps(rng, zero, _CMP_GT_OQ);
    __m256 bs = zero, bb = mn, be = _mm256_set1_ps(FLT_MAX);
    for (int k = 0; k < nd + nlloyd; k++) {
        __m256 sl = zero, sl2 = zero, sul = zero, slB = zero, sl2B = zero, sulB = zero;
        if (k + 2 < nd) {
            /* three candidates per sweep over the rows (the sums of each in row order) */
            __m256 slC = zero, sl2C = zero, sulC = zero;
            const __m256 is = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(nmax + delta[k]), rng), pos);
            const __m256 isB = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(nmax + delta[k + 1]), rng), pos);
            const __m256 isC = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(nmax + delta[k + 2]), rng), pos);
            for (int i = 0; i < n; i++) {
                const __m256 w = _mm256_loadu_ps(u + 8 * i);
                __m256 l = rnd_ps(_mm256_mul_ps(is, w)), lB = rnd_ps(_mm256_mul_ps(isB, w));
                __m256 lC = rnd_ps(_mm256_mul_ps(isC, w));
                l = _mm256_max_ps(_mm256_min_ps(l, vnmax), zero);
                lB = _mm256_max_ps(_mm256_min_ps(lB, vnmax), zero);
                lC = _mm256_max_ps(_mm256_min_ps(lC, vnmax), zero);
                sl = _mm256_add_ps(sl, l);
                slB = _mm256_add_ps(slB, lB);
                slC = _mm256_add_ps(slC, lC);
                sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(l, l));
                sl2B = _mm256_add_ps(sl2B, _mm256_mul_ps(lB, lB));
                sl2C = _mm256_add_ps(sl2C, _mm256_mul_ps(lC, lC));
                sul = _mm256_add_ps(sul, _mm256_mul_ps(w, l));
                sulB = _mm256_add_ps(sulB, _mm256_mul_ps(w, lB));
                sulC = _mm256_add_ps(sulC, _mm256_mul_ps(w, lC));
            }
            AFFINE_PICK(sl, sl2, sul)
            AFFINE_PICK(slB, sl2B, sulB)
            AFFINE_PICK(slC, sl2C, sulC)
            k += 2;
            continue;
        }
        if (k + 1 < nd) {
            /* two candidates per sweep over the rows (the sums of each in row order) */
            const __m256 is = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(nmax + delta[k]), rng), pos);
            const __m256 isB = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(nmax + delta[k + 1]), rng), pos);
            for (int i = 0; i < n; i++) {
                const __m256 w = _mm256_loadu_ps(u + 8 * i);
                __m256 l = rnd_ps(_mm256_mul_ps(is, w)), lB = rnd_ps(_mm256_mul_ps(isB, w));
                l = _mm256_max_ps(_mm256_min_ps(l, vnmax), zero);
                lB = _mm256_max_ps(_mm256_min_ps(lB, vnmax), zero);
                sl = _mm256_add_ps(sl, l);
                slB = _mm256_add_ps(slB, lB);
                sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(l, l));
                sl2B = _mm256_add_ps(sl2B, _mm256_mul_ps(lB, lB));
                sul = _mm256_add_ps(sul, _mm256_mul_ps(w, l));
                sulB = _mm256_add_ps(sulB, _mm256_mul_ps(w, lB));
            }
            AFFINE_PICK(sl, sl2, sul)
            k++;
            AFFINE_PICK(slB, sl2B, sulB)
            continue;
        }
        if (k < nd) {
            const __m256 is = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(nmax + delta[k]), rng), pos);
            AFFINE_SUMS(w)
        } else {
            const __m256 is = _mm256_and_ps(_mm256_div_ps(one, bs), _mm256_cmp_ps(bs, zero, _CMP_GT_OQ));
            const __m256 c = _mm256_sub_ps(mn, bb);
            AFFINE_SUMS(_mm256_add_ps(w, c))
        }
        AFFINE_PICK(sl, sl2, sul)
    }
    _mm256_storeu_ps(s_out, bs);
    _mm256_storeu_ps(b_out, bb);
    _mm256_storeu_ps(sx_out, sx);
}
#undef AFFINE_SUMS
#undef AFFINE_PICK

AVX2 static void search_symm(const float *xt, int n, float nmax, const float *delta, int nd,
                             float *s_out) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 hi = _mm256_set1_ps(nmax - 1.0f), lo = _mm256_set1_ps(-nmax);
    __m256 am = zero, sm = zero;
    for (int i = 0; i < n; i++) {
        const __m256 v = _mm256_loadu_ps(xt + 8 * i);
        const __m256 a = _mm256_and_ps(v, absmask);
        const __m256 gt = _mm256_cmp_ps(a, am, _CMP_GT_OQ);
        am = _mm256_blendv_ps(am, a, gt);
        sm = _mm256_blendv_ps(sm, v, gt);
    }
    const __m256 pos = _mm256_cmp_ps(am, zero, _CMP_GT_OQ);
    __m256 bn = zero, bd = _mm256_set1_ps(1.0f), bs = zero;
#define SYMM_PICK(SL2, SXL)                                                                   \
    {                                                                                          \
        const __m256 num = _mm256_mul_ps(SXL, SXL);                                            \
        const __m256 upd = _mm256_and_ps(                                                      \
            _mm256_cmp_ps(SL2, zero, _CMP_GT_OQ),                                              \
            _mm256_cmp_ps(_mm256_mul_ps(num, bd), _mm256_mul_ps(bn, SL2), _CMP_GT_OQ));        \
        bn = _mm256_blendv_ps(bn, num, upd);                                                   \
        bd = _mm256_blendv_ps(bd, SL2, upd);                                                   \
        bs = _mm256_blendv_ps(bs, _mm256_div_ps(SXL, SL2), upd);                               \
    }
    int k = 0;
    for (; k + 1 < nd; k += 2) { /* two candidates per sweep, each summed in row order */
        const __m256 is = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(-(nmax + delta[k])), sm), pos);
        const __m256 isB = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(-(nmax + delta[k + 1])), sm), pos);
        __m256 sl2 = zero, sxl = zero, sl2B = zero, sxlB = zero;
        for (int i = 0; i < n; i++) {
            const __m256 v = _mm256_loadu_ps(xt + 8 * i);
            __m256 l = rnd_ps(_mm256_mul_ps(is, v)), lB = rnd_ps(_mm256_mul_ps(isB, v));
            l = _mm256_max_ps(_mm256_min_ps(l, hi), lo);
            lB = _mm256_max_ps(_mm256_min_ps(lB, hi), lo);
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(l, l));
            sl2B = _mm256_add_ps(sl2B, _mm256_mul_ps(lB, lB));
            sxl = _mm256_add_ps(sxl, _mm256_mul_ps(v, l));
            sxlB = _mm256_add_ps(sxlB, _mm256_mul_ps(v, lB));
        }
        SYMM_PICK(sl2, sxl)
        SYMM_PICK(sl2B, sxlB)
    }
    for (; k < nd; k++) {
        const __m256 is = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(-(nmax + delta[k])), sm), pos);
        __m256 sl2 = zero, sxl = zero;
        for (int i = 0; i < n; i++) {
            const __m256 v = _mm256_loadu_ps(xt + 8 * i);
            __m256 l = rnd_ps(_mm256_mul_ps(is, v));
            l = _mm256_max_ps(_mm256_min_ps(l, hi), lo);
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(l, l));
            sxl = _mm256_add_ps(sxl, _mm256_mul_ps(v, l));
        }
        SYMM_PICK(sl2, sxl)
    }
#undef SYMM_PICK
    _mm256_storeu_ps(s_out, bs);
}

/* 8 integral floats (in int8 range) -> 8 bytes */
AVX2 static inline void store8_levels(void *dst, __m256 l) {
    const __m256i i32 = _mm256_cvttps_epi32(l);
    const __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
    _mm_storel_epi64((__m128i *)dst, _mm_packs_epi16(i16, i16));
}

/* recip0(d) = d != 0 ? 1/d : 0 (NaN != 0) */
AVX2 static inline __m256 recip0_ps(__m256 d) {
    const __m256 nz = _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    return _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), d), nz);
}
/* max(min(round(v * inv), hi), lo) */
AVX2 static inline __m256 qlane_ps(__m256 v, __m256 inv, __m256 lo, __m256 hi) {
    return _mm256_max_ps(_mm256_min_ps(rnd_ps(_mm256_mul_ps(v, inv)), hi), lo);
}
/* x > 0 ? x : 0 (NaN -> 0) */
AVX2 static inline __m256 pos_or_0(__m256 x) {
    return _mm256_and_ps(x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
}

AVX2 static void requant_affine(const float *xt, int n, const tbx_kq_round *r, float *ap,
                                float *qp, float *err, float *slp, float *sl2p, float *sxlp,
                                float *ts2, float *tm2) {
    const __m256 zero = _mm256_setzero_ps(), vnmax = _mm256_set1_ps(r->nmax);
    const __m256 smax = _mm256_set1_ps(r->smax), fn = _mm256_set1_ps((float)n);
    const __m256 a = qlane_ps(_mm256_loadu_ps(r->ts), _mm256_set1_ps(r->id), zero, smax);
    const __m256 q = qlane_ps(_mm256_loadu_ps(r->tm), _mm256_set1_ps(r->idm), zero, smax);
    const __m256 d1 = _mm256_mul_ps(_mm256_set1_ps(r->d), a);
    const __m256 m1 = _mm256_mul_ps(_mm256_set1_ps(r->dm), q);
    const __m256 id1 = recip0_ps(d1);
    __m256 e2 = zero, sl = zero, sl2 = zero, sxl = zero;
    for (int i = 0; i < n; i++) {
        const __m256 v = _mm256_loadu_ps(xt + 8 * i);
        __m256 l = rnd_ps(_mm256_mul_ps(_mm256_add_ps(v, m1), id1));
        l = _mm256_max_ps(_mm256_min_ps(l, vnmax), zero);
        const __m256 e = _mm256_sub_ps(_mm256_sub_ps(_mm256_mul_ps(d1, l), m1), v);
        e2 = _mm256_add_ps(e2, _mm256_mul_ps(e, e));
        sl = _mm256_add_ps(sl, l);
        sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(l, l));
        sxl = _mm256_add_ps(sxl, _mm256_mul_ps(v, l));
    }
    /* least-squares scale >= 0 and offset <= 0 for these levels */
    const __m256 sx = _mm256_loadu_ps(r->sx);
    const __m256 D = _mm256_sub_ps(_mm256_mul_ps(fn, sl2), _mm256_mul_ps(sl, sl));
    const __m256 iD = recip0_ps(pos_or_0(D));
    const __m256 s2 = _mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(fn, sxl), _mm256_mul_ps(sx, sl)), iD);
    const __m256 b2 = _mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(sl2, sx), _mm256_mul_ps(sl, sxl)), iD);
    const __m256 s1 = _mm256_mul_ps(sxl, recip0_ps(pos_or_0(sl2)));
    const __m256 two = _mm256_andnot_ps(_mm256_cmp_ps(b2, zero, _CMP_GT_OQ),
                                        _mm256_cmp_ps(D, zero, _CMP_GT_OQ));
    const __m256 sk = _mm256_blendv_ps(s1, s2, two);
    const __m256 negb2 = _mm256_xor_ps(b2, _mm256_set1_ps(-0.0f));
    _mm256_storeu_ps(ts2, pos_or_0(sk));
    _mm256_storeu_ps(tm2, _mm256_and_ps(negb2, two));
    _mm256_storeu_ps(ap, a);
    _mm256_storeu_ps(qp, q);
    _mm256_storeu_ps(err, e2);
    _mm256_storeu_ps(slp, sl);
    _mm256_storeu_ps(sl2p, sl2);
    _mm256_storeu_ps(sxlp, sxl);
}

AVX2 static void requant_symm(const float *xt, int n, const tbx_kq_round *r, float *ap,
                              float *err, float *sl2p, float *sxlp, float *ts2) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256 hi = _mm256_set1_ps(r->nmax - 1.0f), lo = _mm256_set1_ps(-r->nmax);
    const __m256 a = qlane_ps(_mm256_loadu_ps(r->ts), _mm256_set1_ps(r->id),
                              _mm256_set1_ps(-r->smax), _mm256_set1_ps(r->smax - 1.0f));
    const __m256 d1 = _mm256_mul_ps(_mm256_set1_ps(r->d), a);
    const __m256 id1 = recip0_ps(d1);
    __m256 e2 = zero, sl2 = zero, sxl = zero;
    for (int i = 0; i < n; i++) {
        const __m256 v = _mm256_loadu_ps(xt + 8 * i);
        __m256 l = rnd_ps(_mm256_mul_ps(v, id1));
        l = _mm256_max_ps(_mm256_min_ps(l, hi), lo);
        const __m256 e = _mm256_sub_ps(_mm256_mul_ps(d1, l), v);
        e2 = _mm256_add_ps(e2, _mm256_mul_ps(e, e));
        sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(l, l));
        sxl = _mm256_add_ps(sxl, _mm256_mul_ps(v, l));
    }
    _mm256_storeu_ps(ts2, _mm256_mul_ps(sxl, recip0_ps(pos_or_0(sl2))));
    _mm256_storeu_ps(ap, a);
    _mm256_storeu_ps(err, e2);
    _mm256_storeu_ps(sl2p, sl2);
    _mm256_storeu_ps(sxlp, sxl);
}

/* One moved (a, q) pair of the local search: its parameters and error accumulator. */
typedef struct lcombo {
    __m256 a, q, d1, m1, id1, e;
} lcombo;

AVX2 static inline lcombo lcombo_make(__m256 a0, __m256 q0, float da, float dq, __m256 vd,
                                      __m256 vdm, __m256 smax) {
    const __m256 zero = _mm256_setzero_ps();
    lcombo c;
    c.a = _mm256_max_ps(_mm256_min_ps(_mm256_add_ps(a0, _mm256_set1_ps(da)), smax), zero);
    c.q = _mm256_max_ps(_mm256_min_ps(_mm256_add_ps(q0, _mm256_set1_ps(dq)), smax), zero);
    c.d1 = _mm256_mul_ps(vd, c.a);
    c.m1 = _mm256_mul_ps(vdm, c.q);
    c.id1 = recip0_ps(c.d1);
    c.e = zero;
    return c;
}

/* squared error of one row for a combo: l = clamp(round((v + m1) * id1)); (d1*l - m1) - v */
#define LCOMBO_ROW(C)                                                                          \
    {                                                                                          \
        __m256 l_ = rnd_ps(_mm256_mul_ps(_mm256_add_ps(v, C.m1), C.id1));                      \
        l_ = _mm256_max_ps(_mm256_min_ps(l_, vnmax), zero);                                    \
        const __m256 t_ = _mm256_sub_ps(_mm256_sub_ps(_mm256_mul_ps(C.d1, l_), C.m1), v);      \
        C.e = _mm256_add_ps(C.e, _mm256_mul_ps(t_, t_));                                       \
    }

AVX2 static void local_affine(const float *xt, int n, float nmax, float smaxf, float d, float dm,
                              const float *e0, float *ap, float *qp, uint8_t *Lt) {
    const __m256 zero = _mm256_setzero_ps(), vnmax = _mm256_set1_ps(nmax), smax = _mm256_set1_ps(smaxf);
    const __m256 a0 = _mm256_loadu_ps(ap), q0 = _mm256_loadu_ps(qp);
    const __m256 vd = _mm256_set1_ps(d), vdm = _mm256_set1_ps(dm);
    /* the kept (a, q) (error e0, from requant) and the four moves, in the scalar kernel's order */
    lcombo c0 = lcombo_make(a0, q0, 0.0f, 0.0f, vd, vdm, smax);
    lcombo c1 = lcombo_make(a0, q0, -1.0f, 0.0f, vd, vdm, smax);
    lcombo c2 = lcombo_make(a0, q0, 1.0f, 0.0f, vd, vdm, smax);
    lcombo c3 = lcombo_make(a0, q0, 0.0f, -1.0f, vd, vdm, smax);
    lcombo c4 = lcombo_make(a0, q0, 0.0f, 1.0f, vd, vdm, smax);
    c0.e = _mm256_loadu_ps(e0);
    for (int i = 0; i < n; i++) {
        const __m256 v = _mm256_loadu_ps(xt + 8 * i);
        LCOMBO_ROW(c1)
        LCOMBO_ROW(c2)
    }
    for (int i = 0; i < n; i++) {
        const __m256 v = _mm256_loadu_ps(xt + 8 * i);
        LCOMBO_ROW(c3)
        LCOMBO_ROW(c4)
    }
    lcombo b = c0;
    const lcombo *cs[4] = {&c1, &c2, &c3, &c4};
    for (int k = 0; k < 4; k++) {
        const __m256 better = _mm256_cmp_ps(cs[k]->e, b.e, _CMP_LT_OQ);
        b.e = _mm256_blendv_ps(b.e, cs[k]->e, better);
        b.a = _mm256_blendv_ps(b.a, cs[k]->a, better);
        b.q = _mm256_blendv_ps(b.q, cs[k]->q, better);
        b.m1 = _mm256_blendv_ps(b.m1, cs[k]->m1, better);
        b.id1 = _mm256_blendv_ps(b.id1, cs[k]->id1, better);
    }
    for (int i = 0; i < n; i++) {
        __m256 l = rnd_ps(_mm256_mul_ps(_mm256_add_ps(_mm256_loadu_ps(xt + 8 * i), b.m1), b.id1));
        store8_levels(Lt + 8 * i, _mm256_max_ps(_mm256_min_ps(l, vnmax), zero));
    }
    _mm256_storeu_ps(ap, b.a);
    _mm256_storeu_ps(qp, b.q);
}
#undef LCOMBO_ROW

AVX2 static void local_symm(const float *xt, int n, float nmax, float smaxf, float d,
                            const float *e0, float *ap, int8_t *Lt) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256 hi = _mm256_set1_ps(nmax - 1.0f), lo = _mm256_set1_ps(-nmax);
    const __m256 shi = _mm256_set1_ps(smaxf - 1.0f), slo = _mm256_set1_ps(-smaxf);
    const __m256 a0 = _mm256_loadu_ps(ap), vd = _mm256_set1_ps(d);
    __m256 ca[3], d1[3], id1[3], e[3];
    static const float da[3] = {0.0f, -1.0f, 1.0f};
    for (int c = 0; c < 3; c++) {
        ca[c] = _mm256_max_ps(_mm256_min_ps(_mm256_add_ps(a0, _mm256_set1_ps(da[c])), shi), slo);
        d1[c] = _mm256_mul_ps(vd, ca[c]);
        id1[c] = recip0_ps(d1[c]);
    }
    __m256 e1 = zero, e2 = zero;
    const __m256 d11 = d1[1], d12 = d1[2], i11 = id1[1], i12 = id1[2];
    for (int i = 0; i < n; i++) {
        const __m256 v = _mm256_loadu_ps(xt + 8 * i);
        __m256 l1 = rnd_ps(_mm256_mul_ps(v, i11)), l2 = rnd_ps(_mm256_mul_ps(v, i12));
        l1 = _mm256_max_ps(_mm256_min_ps(l1, hi), lo);
        l2 = _mm256_max_ps(_mm256_min_ps(l2, hi), lo);
        const __m256 t1 = _mm256_sub_ps(_mm256_mul_ps(d11, l1), v);
        const __m256 t2 = _mm256_sub_ps(_mm256_mul_ps(d12, l2), v);
        e1 = _mm256_add_ps(e1, _mm256_mul_ps(t1, t1));
        e2 = _mm256_add_ps(e2, _mm256_mul_ps(t2, t2));
    }
    e[0] = _mm256_loadu_ps(e0);
    e[1] = e1;
    e[2] = e2;
    __m256 be = e[0], ba = ca[0], bid1 = id1[0];
    for (int c = 1; c < 3; c++) {
        const __m256 better = _mm256_cmp_ps(e[c], be, _CMP_LT_OQ);
        be = _mm256_blendv_ps(be, e[c], better);
        ba = _mm256_blendv_ps(ba, ca[c], better);
        bid1 = _mm256_blendv_ps(bid1, id1[c], better);
    }
    for (int i = 0; i < n; i++) {
        __m256 l = rnd_ps(_mm256_mul_ps(_mm256_loadu_ps(xt + 8 * i), bid1));
        store8_levels(Lt + 8 * i, _mm256_max_ps(_mm256_min_ps(l, hi), lo));
    }
    _mm256_storeu_ps(ap, ba);
}

static const tbx_kq_ops kq_ops = {transpose,      untranspose,  search_affine, search_symm,
                                  requant_affine, requant_symm, local_affine,  local_symm};

const tbx_kq_ops *tbx_kq_ops_avx2(void) { return &kq_ops; }

/* ========================================================================================== */
/* Quantizers of the legacy 32-element types (q8_0, q4_0, q4_1, q5_0, q5_1)                    */
/* ========================================================================================== */
/* The same IEEE operations as q_q8_0 .. q_q5_1 in ggml_quant.c, 8 elements at a time, so the
 * bytes are identical. The reductions (max |x|, min, max) are order-free except for NaN (the
 * scalar loops let a NaN reset or skip the running value) and for ties between +0 and -0 (the
 * scalar loops keep the first); such blocks go to the scalar kernel, one block at a time. */

/* tbx_f32_to_f16 with the common case inline: a value that rounds to a normal half (|f| in
 * [2^-14, 65520)) is rebiased and rounded to nearest even on its bits; the rest (zeros,
 * subnormal halves, overflow, Inf, NaN) through the library conversion. The same bits. */
static inline uint16_t q_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a >= 0x38800000u && a < 0x477FF000u)
        return (uint16_t)(((u >> 16) & 0x8000u) | ((a - 0x38000000u + 0x0FFFu + ((a >> 13) & 1u)) >> 13));
    return tbx_f32_to_f16(f);
}

/* fabs of 8 values (clears the sign bit, as fabsf) */
AVX2 static inline __m256 q_abs(__m256 v) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}
/* 32 values of a block */
typedef struct { __m256 v[4]; } q_blk;
AVX2 static inline q_blk q_load(const float *x) {
    q_blk b;
    for (int k = 0; k < 4; k++) b.v[k] = _mm256_loadu_ps(x + 8 * k);
    return b;
}
/* any NaN among the 32 values */
AVX2 static inline int q_has_nan(const q_blk *b) {
    const __m256 u01 = _mm256_cmp_ps(b->v[0], b->v[1], _CMP_UNORD_Q);
    const __m256 u23 = _mm256_cmp_ps(b->v[2], b->v[3], _CMP_UNORD_Q);
    return _mm256_movemask_ps(_mm256_or_ps(u01, u23)) != 0;
}
/* horizontal max / min of 8 NaN-free values (order-free: no ties of distinct bit patterns are
 * possible among non-negative |x|; callers handle +-0 ties of min/max themselves) */
AVX2 static inline float q_hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
AVX2 static inline float q_hmin(__m256 v) {
    __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    m = _mm_min_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
/* max |x| of a NaN-free block: the scalar `amax = amax > a ? amax : a` from 0 */
AVX2 static inline float q_absmax(const q_blk *b) {
    __m256 m = _mm256_max_ps(_mm256_max_ps(q_abs(b->v[0]), q_abs(b->v[1])),
                             _mm256_max_ps(q_abs(b->v[2]), q_abs(b->v[3])));
    return q_hmax(m);
}
/* 32 int32 lanes (values in -128..127) to 32 bytes in element order */
AVX2 static inline __m256i q_pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i p01 = _mm256_packs_epi32(i0, i1), p23 = _mm256_packs_epi32(i2, i3);
    const __m256i p = _mm256_packs_epi16(p01, p23);
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
/* round_clamp(v, -128, 127) of ggml_quant.c: NaN and v <= -128 -> -128, v >= 127 -> 127, else
 * roundf (half away from zero), as an integral float */
AVX2 static inline __m256 q_round_clamp127(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 f = q_abs(_mm256_sub_ps(v, t)); /* exact for |v| < 2^23 (others are blended) */
    const __m256 one = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                     _mm256_or_ps(_mm256_set1_ps(1.0f),
                                                  _mm256_and_ps(v, _mm256_set1_ps(-0.0f))));
    __m256 r = _mm256_add_ps(t, one);
    r = _mm256_blendv_ps(r, _mm256_set1_ps(127.0f),
                         _mm256_cmp_ps(v, _mm256_set1_ps(127.0f), _CMP_GE_OQ));
    return _mm256_blendv_ps(_mm256_set1_ps(-128.0f), r,
                            _mm256_cmp_ps(v, _mm256_set1_ps(-128.0f), _CMP_GT_OQ));
}
/* trunc_clamp(v, 0, hi): NaN and v <= 0 -> 0, v >= hi -> hi, else truncation */
AVX2 static inline __m256i q_trunc_clamp(__m256 v, __m256 hi) {
    __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    r = _mm256_blendv_ps(r, hi, _mm256_cmp_ps(v, hi, _CMP_GE_OQ));
    r = _mm256_and_ps(r, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
    return _mm256_cvtps_epi32(r);
}

AVX2 static void qa_q8_0(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 34) {
        const q_blk v = q_load(x);
        if (q_has_nan(&v)) { scalar(x, b, 1); continue; }
        const float d = q_absmax(&v) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        if (isinf(id)) { scalar(x, b, 1); continue; } /* 1/d overflows: the scalar's case */
        tbx_st16(b, q_f16(d));
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(q_round_clamp127(_mm256_mul_ps(v.v[k], vid)));
        _mm256_storeu_si256((__m256i *)(b + 2), q_pack32(q[0], q[1], q[2], q[3]));
    }
}

/* signed_absmax of ggml_quant.c for a NaN-free block: the first element of largest |x| */
AVX2 static inline float q_signed_absmax(const float *x, const q_blk *b) {
    const float amax = q_absmax(b);
    if (amax == 0.0f) return 0.0f;
    const __m256 m = _mm256_set1_ps(amax);
    uint32_t bits = 0;
    for (int k = 0; k < 4; k++)
        bits |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(q_abs(b->v[k]), m, _CMP_EQ_OQ)) << (8 * k);
    return x[__builtin_ctz(bits)];
}
/* levels of q4_0/q5_0 (x*id + off, truncated and clamped to 0..hi) or q4_1/q5_1 ((x - mn)*id +
 * 0.5) as 32 bytes in element order */
AVX2 static inline __m256i q_levels(const q_blk *b, float id, float mn, float off, float hi,
                                    int affine) {
    const __m256 vid = _mm256_set1_ps(id), vmn = _mm256_set1_ps(mn), voff = _mm256_set1_ps(off),
                 vhi = _mm256_set1_ps(hi);
    __m256i q[4];
    for (int k = 0; k < 4; k++) {
        const __m256 y = affine ? _mm256_sub_ps(b->v[k], vmn) : b->v[k];
        q[k] = q_trunc_clamp(_mm256_add_ps(_mm256_mul_ps(y, vid), voff), vhi);
    }
    return q_pack32(q[0], q[1], q[2], q[3]);
}
/* 16 bytes: levels j | levels j+16 << 4 (low nibbles only) */
AVX2 static inline __m128i q_nibbles(__m256i q) {
    const __m128i m4 = _mm_set1_epi8(15);
    const __m128i lo = _mm_and_si128(_mm256_castsi256_si128(q), m4);
    const __m128i hi = _mm_and_si128(_mm256_extracti128_si256(q, 1), m4);
    return _mm_or_si128(lo, _mm_slli_epi16(hi, 4));
}
/* bit 4 of each of the 32 levels (0..31) */
AVX2 static inline uint32_t q_bit4(__m256i q) {
    return (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(q, 3));
}

AVX2 static void qa_q4_0(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 18) {
        const q_blk v = q_load(x);
        if (q_has_nan(&v)) { scalar(x, b, 1); continue; }
        const float d = q_signed_absmax(x, &v) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        if (isinf(id)) { scalar(x, b, 1); continue; }
        tbx_st16(b, q_f16(d));
        _mm_storeu_si128((__m128i *)(b + 2), q_nibbles(q_levels(&v, id, 0.0f, 8.5f, 15.0f, 0)));
    }
}

AVX2 static void qa_q5_0(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 22) {
        const q_blk v = q_load(x);
        if (q_has_nan(&v)) { scalar(x, b, 1); continue; }
        const float d = q_signed_absmax(x, &v) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        if (isinf(id)) { scalar(x, b, 1); continue; }
        tbx_st16(b, q_f16(d));
        const __m256i q = q_levels(&v, id, 0.0f, 16.5f, 31.0f, 0);
        tbx_st32(b + 2, q_bit4(q));
        _mm_storeu_si128((__m128i *)(b + 6), q_nibbles(q));
    }
}

/* min and max of a NaN-free block from FLT_MAX / -FLT_MAX (as min_max in ggml_quant.c); false
 * when either is a zero (the scalar loop keeps the first of +0 and -0: left to it) */
AVX2 static inline int q_min_max(const q_blk *b, float *mn, float *mx) {
    __m256 lo = _mm256_set1_ps(FLT_MAX), hi = _mm256_set1_ps(-FLT_MAX);
    for (int k = 0; k < 4; k++) {
        lo = _mm256_min_ps(b->v[k], lo);
        hi = _mm256_max_ps(b->v[k], hi);
    }
    *mn = q_hmin(lo);
    *mx = q_hmax(hi);
    return *mn != 0.0f && *mx != 0.0f;
}

AVX2 static void qa_q4_1(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 20) {
        const q_blk v = q_load(x);
        float mn, mx;
        if (q_has_nan(&v) || !q_min_max(&v, &mn, &mx)) { scalar(x, b, 1); continue; }
        const float d = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        if (isinf(id)) { scalar(x, b, 1); continue; }
        tbx_st16(b, q_f16(d));
        tbx_st16(b + 2, q_f16(mn));
        _mm_storeu_si128((__m128i *)(b + 4), q_nibbles(q_levels(&v, id, mn, 0.5f, 15.0f, 1)));
    }
}

AVX2 static void qa_q5_1(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 24) {
        const q_blk v = q_load(x);
        float mn, mx;
        if (q_has_nan(&v) || !q_min_max(&v, &mn, &mx)) { scalar(x, b, 1); continue; }
        const float d = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        if (isinf(id)) { scalar(x, b, 1); continue; }
        tbx_st16(b, q_f16(d));
        tbx_st16(b + 2, q_f16(mn));
        const __m256i q = q_levels(&v, id, mn, 0.5f, 31.0f, 1);
        tbx_st32(b + 4, q_bit4(q));
        _mm_storeu_si128((__m128i *)(b + 8), q_nibbles(q));
    }
}

/* mxfp4: the exponent of the block as q_mxfp4 computes it (from the same max |x|, order-free
 * without NaN), then for 8 values at a time the first of the 16 codes of smallest
 * |code * d - x| (best_mxfp4: the same products and differences, strict comparisons in code
 * order). */
AVX2 static void qa_mxfp4(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    static const float kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 17) {
        const q_blk v = q_load(x);
        if (q_has_nan(&v)) { scalar(x, b, 1); continue; }
        const float amax = q_absmax(&v);
        uint8_t e = 0;
        if (amax > 0.0f) {
            const float l2 = floorf(log2f(amax)) - 2.0f + 127.0f;
            e = l2 < 255.0f ? (uint8_t)(int)l2 : 255;
        }
        const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
        float d;
        memcpy(&d, &bits, 4);
        b[0] = e;
        const __m256 vd = _mm256_set1_ps(d);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            __m256 best = q_abs(_mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(kv[0]), vd), v.v[k]));
            __m256i bi = _mm256_setzero_si256();
            for (int c = 1; c < 16; c++) {
                const __m256 err = q_abs(_mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(kv[c]), vd), v.v[k]));
                const __m256 lt = _mm256_cmp_ps(err, best, _CMP_LT_OQ);
                best = _mm256_blendv_ps(best, err, lt);
                bi = _mm256_blendv_epi8(bi, _mm256_set1_epi32(c), _mm256_castps_si256(lt));
            }
            q[k] = bi;
        }
        _mm_storeu_si128((__m128i *)(b + 1), q_nibbles(q_pack32(q[0], q[1], q[2], q[3])));
    }
}

/* tq2_0 and tq1_0: trit(x * id) of ggml_quant.c (round_clamp(v, -1, 1) + 1, NaN -> 0) is
 * (v >= 0.5) + (v > -0.5); d = max |x| of the super-block (order-free without NaN). */
AVX2 static inline __m256i q_trits(__m256 v) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 t = _mm256_add_ps(_mm256_and_ps(_mm256_cmp_ps(v, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one),
                                   _mm256_and_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-0.5f), _CMP_GT_OQ), one));
    return _mm256_cvttps_epi32(t);
}
/* 256 values: NaN-free (else 0) and their max |x| */
AVX2 static inline int q_absmax256(const float *x, float *amax) {
    __m256 m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    for (int k = 0; k < 256; k += 8) {
        const __m256 a = _mm256_loadu_ps(x + k);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
        m = _mm256_max_ps(m, q_abs(a));
    }
    *amax = q_hmax(m);
    return _mm256_movemask_ps(nan) == 0;
}
/* trits of x[0..31] * id as 32 bytes in element order */
AVX2 static inline __m256i q_trits32(const float *x, __m256 id) {
    __m256i t[4];
    for (int k = 0; k < 4; k++) t[k] = q_trits(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), id));
    return q_pack32(t[0], t[1], t[2], t[3]);
}

AVX2 static void qa_tq2_0(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 256, b += 66) {
        float d;
        if (!q_absmax256(x, &d)) { scalar(x, b, 1); continue; }
        const float id = d != 0.0f && !isinf(1.0f / d) ? 1.0f / d : 0.0f;
        tbx_st16(b + 64, q_f16(d));
        const __m256 vid = _mm256_set1_ps(id);
        for (int j = 0; j < 64; j += 32) {
            __m256i q = _mm256_setzero_si256();
            for (int n = 0; n < 4; n++)
                q = _mm256_or_si256(q, _mm256_slli_epi16(q_trits32(x + 4 * j + 32 * n, vid), 2 * n));
            _mm256_storeu_si256((__m256i *)(b + j), q);
        }
    }
}

/* 32 int32 lanes (values in 0..255) to 32 bytes in element order */
AVX2 static inline __m256i q_packu32(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i p01 = _mm256_packs_epi32(i0, i1), p23 = _mm256_packs_epi32(i2, i3);
    const __m256i p = _mm256_packus_epi16(p01, p23);
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
/* tq1_0: 5 (or 4) trits per byte, first most significant, scaled to ceil(q * 256 / 243) */
AVX2 static inline __m256i q_tq1_bytes(__m256i q) { /* q: 8 int32 lanes in 0..242 */
    const __m256 n = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(q, 8), _mm256_set1_epi32(242)));
    return _mm256_cvttps_epi32(_mm256_div_ps(n, _mm256_set1_ps(243.0f))); /* exact: n < 2^16 */
}
AVX2 static inline __m256i q_trits8(const float *x, __m256 id) {
    return q_trits(_mm256_mul_ps(_mm256_loadu_ps(x), id));
}
AVX2 static void qa_tq1_0(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    uint8_t *b = (uint8_t *)dst;
    const __m256i three = _mm256_set1_epi32(3);
    for (uint64_t i = 0; i < nb; i++, x += 256, b += 54) {
        float d;
        if (!q_absmax256(x, &d)) { scalar(x, b, 1); continue; }
        const float id = d != 0.0f && !isinf(1.0f / d) ? 1.0f / d : 0.0f;
        tbx_st16(b + 52, q_f16(d));
        const __m256 vid = _mm256_set1_ps(id);
        /* bytes 0..31 from x[m + 32n], 32..47 from x[160 + m + 16n], n = 0..4 */
        __m256i r[6];
        for (int k = 0; k < 6; k++) {
            const float *base = k < 4 ? x + 8 * k : x + 160 + 8 * (k - 4);
            const int stride = k < 4 ? 32 : 16;
            __m256i q = _mm256_setzero_si256();
            for (int n = 0; n < 5; n++)
                q = _mm256_add_epi32(_mm256_mullo_epi32(q, three), q_trits8(base + stride * n, vid));
            r[k] = q_tq1_bytes(q);
        }
        _mm256_storeu_si256((__m256i *)b, q_packu32(r[0], r[1], r[2], r[3]));
        const __m128i lo = _mm_packus_epi16(_mm_packs_epi32(_mm256_castsi256_si128(r[4]), _mm256_extracti128_si256(r[4], 1)),
                                      _mm_packs_epi32(_mm256_castsi256_si128(r[5]), _mm256_extracti128_si256(r[5], 1)));
        _mm_storeu_si128((__m128i *)(b + 32), lo);
        /* qh 0..3: 4 trits each from x[240 + j + 4m], times 3 */
        __m128i q4 = _mm_setzero_si128();
        for (int m = 0; m < 4; m++) {
            const __m128 xv = _mm_loadu_ps(x + 240 + 4 * m);
            const __m128 vv = _mm_mul_ps(xv, _mm256_castps256_ps128(vid));
            const __m128 one = _mm_set1_ps(1.0f);
            const __m128 t = _mm_add_ps(_mm_and_ps(_mm_cmpge_ps(vv, _mm_set1_ps(0.5f)), one),
                                        _mm_and_ps(_mm_cmpgt_ps(vv, _mm_set1_ps(-0.5f)), one));
            q4 = _mm_add_epi32(_mm_mullo_epi32(q4, _mm_set1_epi32(3)), _mm_cvttps_epi32(t));
        }
        q4 = _mm_mullo_epi32(q4, _mm_set1_epi32(3));
        const __m128i h = _mm256_castsi256_si128(
            q_tq1_bytes(_mm256_inserti128_si256(_mm256_setzero_si256(), q4, 0)));
        const __m128i h8 = _mm_packus_epi16(_mm_packs_epi32(h, h), _mm_setzero_si128());
        tbx_st32(b + 48, (uint32_t)_mm_cvtsi128_si32(h8));
    }
}

/* q1_0 (ggml_lowbit.c): d = (sum of |x| in order) / 128, one bit per value set when x >= 0.
 * The sum is one chain of 128 additions per block, so eight blocks run as the lanes of a vector
 * (transposed, the same additions in the same order); the bits are movemasks. Groups holding a
 * NaN (whose payload the sum would carry) and the last blocks short of eight go to the scalar
 * kernel. */
AVX2 static void qa_q1_0(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    uint8_t *b = (uint8_t *)dst;
    float xt[1024], d[8];
    const __m256 zero = _mm256_setzero_ps();
    uint64_t i = 0;
    for (; i + 8 <= nb; i += 8, x += 1024, b += 144) {
        transpose(x, 128, xt);
        __m256 acc = zero, nan = zero;
        for (int j = 0; j < 128; j++) {
            const __m256 v = _mm256_loadu_ps(xt + 8 * j);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            acc = _mm256_add_ps(acc, q_abs(v));
        }
        if (_mm256_movemask_ps(nan)) { scalar(x, b, 8); continue; }
        _mm256_storeu_ps(d, _mm256_div_ps(acc, _mm256_set1_ps(128.0f)));
        for (int k = 0; k < 8; k++) {
            uint8_t *bk = b + 18 * k;
            tbx_st16(bk, q_f16(d[k]));
            for (int m = 0; m < 16; m++)
                bk[2 + m] = (uint8_t)_mm256_movemask_ps(
                    _mm256_cmp_ps(_mm256_loadu_ps(x + 128 * k + 8 * m), zero, _CMP_GE_OQ));
        }
    }
    if (i < nb) scalar(x, b, nb - i);
}

/* q2_0 (ggml_lowbit.c): d = max |x| (order-free without NaN), codes round(x / d) + 1. With a
 * finite 1/d, |x * (1/d)| < 1.5, so the code is (v >= 0.5) + (v > -0.5) (q_trits). A block with
 * a NaN or an infinite 1/d goes to the scalar kernel. */
AVX2 static void qa_q2_0(const float *x, void *dst, uint64_t nb, tbx_quant_fn scalar) {
    uint8_t *b = (uint8_t *)dst;
    const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    for (uint64_t i = 0; i < nb; i++, x += 64, b += 18) {
        __m256 v[8], m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int k = 0; k < 8; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
            m = _mm256_max_ps(m, q_abs(v[k]));
        }
        if (_mm256_movemask_ps(nan)) { scalar(x, b, 1); continue; }
        const float amax = q_hmax(m);
        const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
        if (isinf(id)) { scalar(x, b, 1); continue; }
        tbx_st16(b, q_f16(amax));
        const __m256 vid = _mm256_set1_ps(id);
        for (int k = 0; k < 8; k++) {
            /* four codes per byte, the first in the low bits: shift, then OR each half */
            __m256i q = _mm256_sllv_epi32(q_trits(_mm256_mul_ps(v[k], vid)), shifts);
            q = _mm256_or_si256(q, _mm256_srli_si256(q, 8));
            q = _mm256_or_si256(q, _mm256_srli_si256(q, 4));
            b[2 + 2 * k] = (uint8_t)_mm256_extract_epi32(q, 0);
            b[3 + 2 * k] = (uint8_t)_mm256_extract_epi32(q, 4);
        }
    }
}

/* ---- iq4_nl / iq4_xs kernels (tbx_iq4_ops, ggml.h; the scalar ones in ggml_iq4.c) -------- */
static const float kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};
/* kIq4[i] of 8 indices 0..15 */
AVX2 static inline __m256 iq4_level(__m256i i) {
    const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kIq4), i);
    const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kIq4 + 8), i);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(7))));
}
/* nl_index of ggml_iq4.c for 8 values: 0 at or below the first level, 15 at or above the last
 * (and for NaN, where the scalar bisection ends), else lo = the last level <= x and the nearer of
 * lo and lo + 1 by the same two subtractions (lo on x - v[lo] < v[lo+1] - x). */
AVX2 static inline __m256i iq4_index(__m256 x) {
    __m256i lo = _mm256_setzero_si256();
    for (int k = 1; k < 15; k++)
        lo = _mm256_sub_epi32(lo, _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_set1_ps(kIq4[k]), _CMP_GE_OQ)));
    const __m256i one = _mm256_set1_epi32(1);
    const __m256 d1 = _mm256_sub_ps(x, iq4_level(lo));
    const __m256 d2 = _mm256_sub_ps(iq4_level(_mm256_add_epi32(lo, one)), x);
    __m256i idx = _mm256_add_epi32(lo, _mm256_andnot_si256(_mm256_castps_si256(_mm256_cmp_ps(d1, d2, _CMP_LT_OQ)), one));
    idx = _mm256_andnot_si256(_mm256_castps_si256(_mm256_cmp_ps(x, _mm256_set1_ps(kIq4[0]), _CMP_LE_OQ)), idx);
    const __m256 top = _mm256_or_ps(_mm256_cmp_ps(x, _mm256_set1_ps(kIq4[15]), _CMP_GE_OQ),
                                    _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(idx, _mm256_set1_epi32(15), _mm256_castps_si256(top));
}

/* block_scale of ggml_iq4.c with the 8 groups as lanes (transposed: each lane sums its values in
 * order, as the scalar does): the largest |x| (first one), d = -max / -127, then the weighted
 * least-squares scale for the levels at 1/d and at the 15 trial scales (k - 127) / max. */
AVX2 static bool iq4_scales8(const float *x, const float *w, float *scales) {
    float xt[256], wt[256];
    transpose(x, 32, xt);
    transpose(w, 32, wt);
    const __m256 zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(INFINITY);
    __m256 bad = zero, amax = zero, max = zero;
    for (int j = 0; j < 32; j++) {
        const __m256 v = _mm256_loadu_ps(xt + 8 * j), av = q_abs(v);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(av, inf, _CMP_NLT_UQ));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(q_abs(_mm256_loadu_ps(wt + 8 * j)), inf, _CMP_NLT_UQ));
        const __m256 gt = _mm256_cmp_ps(av, amax, _CMP_GT_OQ);
        amax = _mm256_blendv_ps(amax, av, gt);
        max = _mm256_blendv_ps(max, v, gt);
    }
    if (_mm256_movemask_ps(bad)) return false;
    const __m256 tiny = _mm256_cmp_ps(amax, _mm256_set1_ps(1e-15f), _CMP_LT_OQ);
    const __m256 d0 = _mm256_div_ps(_mm256_xor_ps(max, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(kIq4[0]));
    __m256 id = _mm256_div_ps(_mm256_set1_ps(1.0f), d0), d = zero, best = zero;
    for (int itry = -8; itry <= 7; itry++) {
        if (itry > -8) id = _mm256_div_ps(_mm256_set1_ps((float)(itry - 127)), max);
        __m256 sqx = zero, sq2 = zero;
        for (int j = 0; j < 32; j++) {
            const __m256 v = _mm256_loadu_ps(xt + 8 * j), wj = _mm256_loadu_ps(wt + 8 * j);
            const __m256 q = iq4_level(iq4_index(_mm256_mul_ps(id, v)));
            const __m256 wq = _mm256_mul_ps(wj, q);
            sqx = _mm256_add_ps(sqx, _mm256_mul_ps(wq, v));
            sq2 = _mm256_add_ps(sq2, _mm256_mul_ps(wq, q));
        }
        const __m256 pos = _mm256_cmp_ps(sq2, zero, _CMP_GT_OQ);
        if (itry == -8) { /* the first candidate: d = sumq2 > 0 ? sumqx / sumq2 : 0 */
            d = _mm256_and_ps(pos, _mm256_div_ps(sqx, sq2));
            best = _mm256_mul_ps(d, sqx);
            continue;
        }
        const __m256 ok = _mm256_and_ps(pos, _mm256_cmp_ps(_mm256_mul_ps(sqx, sqx),
                                                           _mm256_mul_ps(best, sq2), _CMP_GT_OQ));
        if (!_mm256_movemask_ps(ok)) continue;
        const __m256 dn = _mm256_div_ps(sqx, sq2);
        d = _mm256_blendv_ps(d, dn, ok);
        best = _mm256_blendv_ps(best, _mm256_mul_ps(dn, sqx), ok);
    }
    _mm256_storeu_ps(scales, _mm256_andnot_ps(tiny, d));
    return true;
}

/* L[32k + j] = nl_index(id[k] * x[32k + j]) */
AVX2 static void iq4_indices8(const float *x, const float *id, uint8_t *L) {
    for (int k = 0; k < 8; k++) {
        const __m256 vid = _mm256_set1_ps(id[k]);
        __m256i q[4];
        for (int m = 0; m < 4; m++) q[m] = iq4_index(_mm256_mul_ps(vid, _mm256_loadu_ps(x + 32 * k + 8 * m)));
        _mm256_storeu_si256((__m256i *)(L + 32 * k), q_packu32(q[0], q[1], q[2], q[3]));
    }
}

static const tbx_iq4_ops iq4_ops_avx2 = {iq4_scales8, iq4_indices8};
const tbx_iq4_ops *tbx_iq4_ops_avx2(void) { return &iq4_ops_avx2; }

/* ---- the weighted symmetric fit of ggml_quant_w.c (tbx_wq_symm8_fn, ggml.h) --------------- */
/* tbx_gq_nearest of 8 lanes (the same addition, the same bits of the sum), clamped */
AVX2 static inline __m256i wq_nearest(__m256 f, __m256i lo, __m256i hi) {
    const __m256 v = _mm256_add_ps(f, _mm256_set1_ps(12582912.0f));
    const __m256i l = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x007fffff)),
                                       _mm256_set1_epi32(0x00400000));
    return _mm256_max_epi32(_mm256_min_epi32(l, hi), lo);
}
/* fit_symm with the 8 groups as lanes (transposed: each lane sums in the scalar's order); the
 * kept candidate's levels recomputed from its inverse scale at the end. */
AVX2 static bool wq_symm8(const float *x, const float *w, int n, int nmax, float *scales, uint8_t *L) {
    if (n > 32 || n % 8) return false;
    float xt[256], wt[256];
    uint8_t Lt[256];
    transpose(x, n, xt);
    transpose(w, n, wt);
    const __m256 zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(INFINITY);
    const __m256i ilo = _mm256_set1_epi32(-nmax), ihi = _mm256_set1_epi32(nmax - 1);
    __m256 bad = zero, amax = zero, max = zero;
    for (int i = 0; i < n; i++) {
        const __m256 v = _mm256_loadu_ps(xt + 8 * i), av = q_abs(v);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(av, inf, _CMP_NLT_UQ));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(q_abs(_mm256_loadu_ps(wt + 8 * i)), inf, _CMP_NLT_UQ));
        const __m256 gt = _mm256_cmp_ps(av, amax, _CMP_GT_OQ);
        amax = _mm256_blendv_ps(amax, av, gt);
        max = _mm256_blendv_ps(max, v, gt);
    }
    if (_mm256_movemask_ps(bad)) return false;
    const __m256 tiny = _mm256_cmp_ps(amax, _mm256_set1_ps(1e-15f), _CMP_LT_OQ);
    __m256 bis = _mm256_div_ps(_mm256_set1_ps((float)-nmax), max), scale = zero, best = zero;
    for (int is = -10; is <= 9; is++) {
        if (is == 0) continue;
        const __m256 isc = is == -10 ? bis
                                     : _mm256_div_ps(_mm256_set1_ps(-((float)nmax + 0.1f * (float)is)), max);
        __m256 slx = zero, sl2 = zero;
        for (int i = 0; i < n; i++) {
            const __m256 v = _mm256_loadu_ps(xt + 8 * i), wi = _mm256_loadu_ps(wt + 8 * i);
            const __m256 lf = _mm256_cvtepi32_ps(wq_nearest(_mm256_mul_ps(isc, v), ilo, ihi));
            slx = _mm256_add_ps(slx, _mm256_mul_ps(_mm256_mul_ps(wi, v), lf));
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(wi, lf), lf));
        }
        if (is == -10) { /* the first candidate: scale = suml2 != 0 ? sumlx / suml2 : 0 */
            scale = _mm256_and_ps(_mm256_cmp_ps(sl2, zero, _CMP_NEQ_UQ), _mm256_div_ps(slx, sl2));
            best = _mm256_mul_ps(scale, slx);
            continue;
        }
        const __m256 ok = _mm256_and_ps(_mm256_cmp_ps(sl2, zero, _CMP_GT_OQ),
                                        _mm256_cmp_ps(_mm256_mul_ps(slx, slx),
                                                      _mm256_mul_ps(best, sl2), _CMP_GT_OQ));
        if (!_mm256_movemask_ps(ok)) continue;
        const __m256 sn = _mm256_div_ps(slx, sl2);
        bis = _mm256_blendv_ps(bis, isc, ok);
        scale = _mm256_blendv_ps(scale, sn, ok);
        best = _mm256_blendv_ps(best, _mm256_mul_ps(sn, slx), ok);
    }
    _mm256_storeu_ps(scales, _mm256_andnot_ps(tiny, scale));
    const __m256i keep = _mm256_castps_si256(_mm256_cmp_ps(amax, _mm256_set1_ps(1e-15f), _CMP_GE_OQ));
    const __m256i off = _mm256_set1_epi32(nmax);
    for (int i = 0; i < n; i++) {
        const __m256i l = wq_nearest(_mm256_mul_ps(bis, _mm256_loadu_ps(xt + 8 * i)), ilo, ihi);
        const __m256i b = _mm256_and_si256(_mm256_add_epi32(l, off), keep);
        const __m256i p = _mm256_packus_epi16(_mm256_packs_epi32(b, b), _mm256_packs_epi32(b, b));
        _mm_storel_epi64((__m128i *)(Lt + 8 * i), _mm_unpacklo_epi32(_mm256_castsi256_si128(p),
                                                                     _mm256_extracti128_si256(p, 1)));
    }
    untranspose(Lt, n, 1, 0, L);
    /* the compiler left the upper halves dirty across the call above; SSE code after a return
     * with dirty upper halves ran 3-6x slower here (ggml's and tensorbox's scalar quantizers
     * timed after this kernel) */
    _mm256_zeroupper();
    return true;
}
tbx_wq_symm8_fn tbx_wq_symm8_avx2(void) { return wq_symm8; }

/* ---- the weighted affine fit of ggml_quant_w.c (tbx_wq_aff8_fn, ggml.h) ------------------- */
/* fit_affine with the 8 groups as lanes (transposed: each lane sums in the scalar's order). A
 * lane's min moves with every kept candidate, as the scalar's does; the kept candidate's inverse
 * scale and the min its levels were taken from give the final levels at the end. */
AVX2 static bool wq_aff8(const float *x, const float *w, int n, int nmax, float *scales, float *mins,
                         uint8_t *L) {
    if (n > 32 || n % 8) return false;
    float xt[256], wt[256];
    __m256 lv[32];
    uint8_t Lt[256];
    transpose(x, n, xt);
    transpose(w, n, wt);
    const __m256 zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(INFINITY);
    const __m256i ilo = _mm256_setzero_si256(), ihi = _mm256_set1_epi32(nmax);
    __m256 v = _mm256_loadu_ps(xt), wi = _mm256_loadu_ps(wt);
    __m256 bad = _mm256_or_ps(_mm256_cmp_ps(q_abs(v), inf, _CMP_NLT_UQ), _mm256_cmp_ps(q_abs(wi), inf, _CMP_NLT_UQ));
    __m256 min = v, max = v, sw = wi, sx = _mm256_mul_ps(wi, v);
    for (int i = 1; i < n; i++) {
        v = _mm256_loadu_ps(xt + 8 * i);
        wi = _mm256_loadu_ps(wt + 8 * i);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(q_abs(v), inf, _CMP_NLT_UQ));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(q_abs(wi), inf, _CMP_NLT_UQ));
        min = _mm256_min_ps(v, min);
        max = _mm256_max_ps(v, max);
        sw = _mm256_add_ps(sw, wi);
        sx = _mm256_add_ps(sx, _mm256_mul_ps(wi, v));
    }
    if (_mm256_movemask_ps(bad)) return false;
    min = _mm256_blendv_ps(min, zero, _mm256_cmp_ps(min, zero, _CMP_GT_OQ));
    const __m256 flat = _mm256_cmp_ps(max, min, _CMP_LE_OQ);
    __m256 bis = _mm256_div_ps(_mm256_set1_ps((float)nmax), _mm256_sub_ps(max, min));
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), bis), best = zero, bmin = min;
    for (int i = 0; i < n; i++) {
        v = _mm256_loadu_ps(xt + 8 * i);
        const __m256 lf = _mm256_cvtepi32_ps(wq_nearest(_mm256_mul_ps(bis, _mm256_sub_ps(v, min)), ilo, ihi));
        const __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, lf), min), v);
        best = _mm256_add_ps(best, _mm256_mul_ps(_mm256_loadu_ps(wt + 8 * i), _mm256_mul_ps(diff, diff)));
    }
    for (int is = 0; is <= 36; is++) {
        const __m256 isc = _mm256_div_ps(_mm256_set1_ps(-0.9f + 0.05f * (float)is + (float)nmax),
                                         _mm256_sub_ps(max, min));
        __m256 sl = zero, sl2 = zero, sxl = zero;
        for (int i = 0; i < n; i++) {
            v = _mm256_loadu_ps(xt + 8 * i);
            wi = _mm256_loadu_ps(wt + 8 * i);
            const __m256 lf = _mm256_cvtepi32_ps(wq_nearest(_mm256_mul_ps(isc, _mm256_sub_ps(v, min)), ilo, ihi));
            lv[i] = lf;
            const __m256 wl = _mm256_mul_ps(wi, lf);
            sl = _mm256_add_ps(sl, wl);
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(wl, lf));
            sxl = _mm256_add_ps(sxl, _mm256_mul_ps(wl, v));
        }
        const __m256 D = _mm256_sub_ps(_mm256_mul_ps(sw, sl2), _mm256_mul_ps(sl, sl));
        const __m256 dpos = _mm256_andnot_ps(flat, _mm256_cmp_ps(D, zero, _CMP_GT_OQ));
        if (!_mm256_movemask_ps(dpos)) continue;
        __m256 ts = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sw, sxl), _mm256_mul_ps(sx, sl)), D);
        __m256 tm = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sl2, sx), _mm256_mul_ps(sl, sxl)), D);
        const __m256 mpos = _mm256_cmp_ps(tm, zero, _CMP_GT_OQ);
        tm = _mm256_blendv_ps(tm, zero, mpos);
        ts = _mm256_blendv_ps(ts, _mm256_div_ps(sxl, sl2), mpos);
        __m256 err = zero;
        for (int i = 0; i < n; i++) {
            const __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(ts, lv[i]), tm), _mm256_loadu_ps(xt + 8 * i));
            err = _mm256_add_ps(err, _mm256_mul_ps(_mm256_loadu_ps(wt + 8 * i), _mm256_mul_ps(diff, diff)));
        }
        const __m256 ok = _mm256_and_ps(dpos, _mm256_cmp_ps(err, best, _CMP_LT_OQ));
        if (!_mm256_movemask_ps(ok)) continue;
        bis = _mm256_blendv_ps(bis, isc, ok);
        bmin = _mm256_blendv_ps(bmin, min, ok);
        best = _mm256_blendv_ps(best, err, ok);
        scale = _mm256_blendv_ps(scale, ts, ok);
        min = _mm256_blendv_ps(min, tm, ok);
    }
    _mm256_storeu_ps(scales, _mm256_andnot_ps(flat, scale));
    _mm256_storeu_ps(mins, _mm256_xor_ps(min, _mm256_set1_ps(-0.0f)));
    const __m256i keep = _mm256_castps_si256(_mm256_xor_ps(flat, _mm256_castsi256_ps(_mm256_set1_epi32(-1))));
    for (int i = 0; i < n; i++) {
        const __m256 t = _mm256_sub_ps(_mm256_loadu_ps(xt + 8 * i), bmin);
        const __m256i b = _mm256_and_si256(wq_nearest(_mm256_mul_ps(bis, t), ilo, ihi), keep);
        const __m256i p = _mm256_packus_epi16(_mm256_packs_epi32(b, b), _mm256_packs_epi32(b, b));
        _mm_storel_epi64((__m128i *)(Lt + 8 * i), _mm_unpacklo_epi32(_mm256_castsi256_si128(p),
                                                                     _mm256_extracti128_si256(p, 1)));
    }
    untranspose(Lt, n, 1, 0, L);
    _mm256_zeroupper(); /* see wq_symm8 */
    return true;
}
tbx_wq_aff8_fn tbx_wq_aff8_avx2(void) { return wq_aff8; }

tbx_quant_fb_fn tbx_ggml_quant_legacy_avx2_for(tbx_dtype dt) {
    switch (dt) {
    case TBX_DT_Q8_0: return qa_q8_0;
    case TBX_DT_Q4_0: return qa_q4_0;
    case TBX_DT_Q4_1: return qa_q4_1;
    case TBX_DT_Q5_0: return qa_q5_0;
    case TBX_DT_Q5_1: return qa_q5_1;
    case TBX_DT_MXFP4: return qa_mxfp4;
    case TBX_DT_TQ1_0: return qa_tq1_0;
    case TBX_DT_TQ2_0: return qa_tq2_0;
    case TBX_DT_Q1_0: return qa_q1_0;
    case TBX_DT_Q2_0: return qa_q2_0;
    default: return NULL;
    }
}

#else /* no x86 SIMD kernels in this build */

tbx_quant_fb_fn tbx_ggml_quant_legacy_avx2_for(tbx_dtype dt) {
    (void)dt;
    return NULL;
}

tbx_dequant_fn tbx_ggml_dequant_avx2_for(tbx_dtype dt) {
    (void)dt;
    return NULL;
}

const tbx_kq_ops *tbx_kq_ops_avx2(void) { return NULL; }

const tbx_iq4_ops *tbx_iq4_ops_avx2(void) { return NULL; }

tbx_wq_symm8_fn tbx_wq_symm8_avx2(void) { return NULL; }

tbx_wq_aff8_fn tbx_wq_aff8_avx2(void) { return NULL; }

#endif
