/*
 * decode_simd_avx2.c - AVX2 decoder of f16 rows to f32, bit for bit the scalar tbx_f16_to_f32.
 *
 * Compiled for the baseline target; the kernel carries __attribute__((target("avx2"))) and is
 * handed out by dispatch.c (tbx_f16_row_for) only when the CPU has AVX2. It does not use the
 * F16C conversion instruction, which quiets signalling NaNs: eight values at a time, the f32
 * bits are built with integer operations, one case per class of the magnitude m = h & 0x7FFF:
 *   m >= 0x7C00 (Inf, NaN): 0x7F800000 | (m & 0x3FF) << 13, the payload kept as it is;
 *   m <  0x0400 (zero, subnormal): m * 2^-24 as a float, exact (m < 2^10, a power-of-two scale);
 *   otherwise (normal): (m << 13) + (112 << 23), the exponent rebased from 15 to 127;
 * then the sign bit (h & 0x8000) << 16. tests/unit/test_float.c compares all 65,536 inputs and
 * unaligned rows of every length up to 40 with the scalar function.
 */
#include "plain.h"

#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TBX_GGML_NO_SIMD)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

AVX2 static inline __m256i f16x8_bits(__m128i h16) {
    const __m256i h = _mm256_cvtepu16_epi32(h16);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    const __m256i m = _mm256_and_si256(h, _mm256_set1_epi32(0x7FFF));
    const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(m, 13), _mm256_set1_epi32(112 << 23));
    const __m256i special = _mm256_or_si256(
        _mm256_set1_epi32(0x7F800000),
        _mm256_slli_epi32(_mm256_and_si256(m, _mm256_set1_epi32(0x3FF)), 13));
    const __m256i sub = _mm256_castps_si256(
        _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(1.0f / 16777216.0f)));
    const __m256i is_special = _mm256_cmpgt_epi32(m, _mm256_set1_epi32(0x7BFF));
    const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x400), m);
    __m256i v = _mm256_blendv_epi8(normal, special, is_special);
    v = _mm256_blendv_epi8(v, sub, is_sub);
    return _mm256_or_si256(v, sign);
}

AVX2 void tbx_f16_row_avx2(const uint8_t *src, float *dst, uint64_t n) {
    uint64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * k));
        _mm256_storeu_si256((__m256i *)(void *)(dst + k), f16x8_bits(h));
    }
    if (k < n) { /* the last 1..7 values through a zero-padded vector */
        uint8_t tmp[16] = {0};
        float out[8];
        memcpy(tmp, src + 2 * k, (size_t)(n - k) * 2);
        _mm256_storeu_si256((__m256i *)(void *)out,
                            f16x8_bits(_mm_loadu_si128((const __m128i *)(const void *)tmp)));
        memcpy(dst + k, out, (size_t)(n - k) * sizeof(float));
    }
}
#else
typedef int tbx_decode_simd_avx2_unused_;
#endif
