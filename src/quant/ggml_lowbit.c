/*
 * ggml_lowbit.c - the row quantizers of nvfp4, q1_0 and q2_0 (ggml.h, tbx_quant_rows_fn):
 * ggml's reference algorithms (ggml-quants.c, quantize_row_{nvfp4,q1_0,q2_0}_ref), written for
 * tensorbox, giving the bytes of ggml_quantize_chunk. ggml's quantizers of these types do not
 * look at an importance matrix, so neither do these: every block is quantized on its own.
 *
 *   nvfp4  64 values: four 16-value sub-blocks, each a UE4M3 scale byte (amax / 6, rounded on
 *          its fourth mantissa bit, saturated at 448; ggml decodes it halved) and 4-bit E2M1
 *          indices, the nearest level to x (the first on ties).
 *   q1_0   128 values: f16 d = mean |x|, one bit per value, set when x >= 0.
 *   q2_0   64 values: f16 d = max |x|, 2-bit codes round(x / d) + 1 clamped to 0..3.
 * Checked by tests/unit/test_ggml_rows_vs_ggml.c against llama.cpp's libggml. q1_0 and q2_0 have
 * AVX2 kernels (ggml_simd_avx2.c, the same bytes), which the row quantizers take through
 * tbx_ggml_quant_default_for.
 */
#include "ggml.h"

#include <math.h>
#include <string.h>

/* ---- nvfp4 --------------------------------------------------------------------------------- */
/* A positive scale as UE4M3 (4 exponent bits, bias 7, 3 mantissa bits): 0 for non-positive or
 * NaN, saturated at 0x7E (448); the mantissa rounded half-up on the next bit (a carry moves to
 * the exponent); below 2^-6 a subnormal code round(x * 512) of 1..7, or 0. */
static uint8_t ue4m3_of(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    uint32_t bits;
    memcpy(&bits, &x, 4);
    int e = (int)((bits >> 23) & 0xFF) - 127 + 7;
    if (e <= 0) {
        int man = (int)(x * 512.0f + 0.5f);
        if (man > 7) man = 7;
        return man < 1 ? 0 : (uint8_t)man;
    }
    if (e >= 15) return 0x7E;
    int man = (int)((bits >> 20) & 7) + (int)((bits >> 19) & 1);
    if (man > 7) {
        man = 0;
        if (++e >= 15) return 0x7E;
    }
    return (uint8_t)((e << 3) | man);
}

/* The value ggml decodes a UE4M3 byte to (half the scale, as its E2M1 levels are doubled). */
static float ue4m3_half_value(uint8_t u) {
    if (u == 0 || u == 0x7F) return 0.0f;
    const int e = (u >> 3) & 15, man = u & 7;
    const float raw = e == 0 ? ldexpf((float)man, -9) : ldexpf(1.0f + (float)man / 8.0f, e - 7);
    return raw * 0.5f;
}

static void nvfp4_blocks(const float *x, uint8_t *b, uint64_t nb) {
    for (uint64_t i = 0; i < nb; i++, b += 36)
        for (int s = 0; s < 4; s++, x += 16) {
            float amax = 0;
            for (int j = 0; j < 16; j++)
                if (amax < fabsf(x[j])) amax = fabsf(x[j]);
            const uint8_t u = ue4m3_of(amax / 6.0f);
            b[s] = u;
            const float d = ue4m3_half_value(u);
            for (int j = 0; j < 8; j++)
                b[4 + 8 * s + j] = (uint8_t)(tbx_gq_best_mxfp4(x[j], d) |
                                             (tbx_gq_best_mxfp4(x[j + 8], d) << 4));
        }
}

/* ---- q1_0 ---------------------------------------------------------------------------------- */
void tbx_gq_q1_0_blocks(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 128, b += 18) {
        float sum_abs = 0.0f;
        for (int j = 0; j < 128; j++) sum_abs += fabsf(x[j]);
        tbx_st16(b, tbx_f32_to_f16(sum_abs / 128.0f));
        memset(b + 2, 0, 16);
        for (int j = 0; j < 128; j++)
            if (x[j] >= 0.0f) b[2 + j / 8] |= (uint8_t)(1u << (j % 8));
    }
}

/* ---- q2_0 ---------------------------------------------------------------------------------- */
/* x86's float -> int32 conversion (cvttss2si), which ggml's (int) cast compiles to: truncation,
 * and INT32_MIN for NaN and out-of-range values (a block of values so small that 1/d is Inf). */
static inline int32_t x86_f2i(float r) {
    if (!(r > -2147483648.0f && r < 2147483648.0f)) return INT32_MIN;
    return (int32_t)r;
}

void tbx_gq_q2_0_blocks(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 64, b += 18) {
        float amax = 0.0f;
        for (int j = 0; j < 64; j++) {
            const float a = fabsf(x[j]);
            if (a > amax) amax = a;
        }
        const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
        tbx_st16(b, tbx_f32_to_f16(amax));
        memset(b + 2, 0, 16);
        for (int j = 0; j < 64; j++) {
            const int32_t r = x86_f2i(roundf(x[j] * id));
            const int q = r < -1 ? 0 : r > 2 ? 3 : (int)r + 1;
            b[2 + j / 4] |= (uint8_t)(q << (2 * (j % 4)));
        }
    }
}

/* ---- the row quantizers (block-local: qw is not used, as in ggml) -------------------------- */
#define LOWBIT_ROWS(name, blocks, bs)                                                            \
    void name(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw) {           \
        (void)qw;                                                                                \
        blocks(x, (uint8_t *)dst, (uint64_t)nrows * ((uint64_t)n / (bs)));                      \
    }
LOWBIT_ROWS(tbx_gq_rows_nvfp4, nvfp4_blocks, 64)
/* q1_0, q2_0: the block quantizer dispatch.c picks (AVX2 when the CPU has it, the same bytes) */
LOWBIT_ROWS(tbx_gq_rows_q1_0, tbx_ggml_quant_default_for(TBX_DT_Q1_0), 128)
LOWBIT_ROWS(tbx_gq_rows_q2_0, tbx_ggml_quant_default_for(TBX_DT_Q2_0), 64)
