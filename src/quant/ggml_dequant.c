/*
 * ggml_dequant.c - portable scalar dequantizers of the ggml block types.
 *
 * Every kernel evaluates, in f32, the formula of ggml's reference dequantizer in the same
 * order (e.g. q4_K: (d*sc)*q - dmin*m, q6_K: (d*sc)*q), so the results are bit-identical to
 * ggml's, including for NaN/Inf/subnormal scales, and to gguf-py's except the sign of a NaN
 * output of the codebook types (see neg_if). Block layouts and formulas:
 * ../shared/specs/NOTES.md (GGUF section) and docs of ggml-common.h.
 */
#include "ggml.h"
#include "ggml_tables.h"
#include "core.h"

#include <string.h>

#define QK_K 256

static inline float h2f(const uint8_t *p) { return tbx_f16_to_f32(tbx_ld16(p)); }
static inline uint8_t grid8(uint64_t g, int j) { return (uint8_t)(g >> (8 * j)); }
static inline uint8_t grid4(uint32_t g, int j) { return (uint8_t)(g >> (8 * j)); }

/* ------------------------------------------------------------------------------------------ */
/* Legacy 32-element blocks                                                                   */
/* ------------------------------------------------------------------------------------------ */
static void dq_q4_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 15) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

/* t + m where, if both are NaN, t's NaN is the result: the first-operand rule of the x86 adder
 * that numpy (gguf-py) gets, made independent of how a compiler orders a commutative add. */
static inline float add_first_nan(float t, float m) { return t != t ? t : t + m; }

static void dq_q4_1(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 20, y += 32) {
        const float d = h2f(b), m = h2f(b + 2);
        const uint8_t *qs = b + 4;
        for (int j = 0; j < 16; j++) {
            y[j] = add_first_nan((float)(qs[j] & 15) * d, m);
            y[j + 16] = add_first_nan((float)(qs[j] >> 4) * d, m);
        }
    }
}

static void dq_q5_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 22, y += 32) {
        const float d = h2f(b);
        const uint32_t qh = tbx_ld32(b + 2);
        const uint8_t *qs = b + 6;
        for (int j = 0; j < 16; j++) {
            const int h0 = (int)(((qh >> j) << 4) & 16u), h1 = (int)((qh >> (j + 12)) & 16u);
            y[j] = (float)(((qs[j] & 15) | h0) - 16) * d;
            y[j + 16] = (float)(((qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

static void dq_q5_1(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 24, y += 32) {
        const float d = h2f(b), m = h2f(b + 2);
        const uint32_t qh = tbx_ld32(b + 4);
        const uint8_t *qs = b + 8;
        for (int j = 0; j < 16; j++) {
            const int h0 = (int)(((qh >> j) << 4) & 16u), h1 = (int)((qh >> (j + 12)) & 16u);
            y[j] = add_first_nan((float)((qs[j] & 15) | h0) * d, m);
            y[j + 16] = add_first_nan((float)((qs[j] >> 4) | h1) * d, m);
        }
    }
}

static void dq_q8_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 34, y += 32) {
        const float d = h2f(b);
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
    }
}

static void dq_q8_1(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 36, y += 32) {
        const float d = h2f(b); /* b + 2: s = d * sum(qs), not needed */
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[4 + j] * d;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* K-quants (super-blocks of 256)                                                             */
/* ------------------------------------------------------------------------------------------ */
static void dq_q2_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 84) {
        const uint8_t *sc = b, *q = b + 16;
        const float d = h2f(b + 80), dmin = h2f(b + 82);
        for (int h = 0; h < 2; h++, q += 32) {
            for (int j = 0; j < 4; j++) {
                for (int half = 0; half < 2; half++) {
                    const uint8_t s = sc[8 * h + 2 * j + half];
                    const float dl = d * (float)(s & 15), ml = dmin * (float)(s >> 4);
                    const uint8_t *qq = q + 16 * half;
                    for (int l = 0; l < 16; l++) *y++ = dl * (float)((qq[l] >> (2 * j)) & 3) - ml;
                }
            }
        }
    }
}

/* The sixteen 6-bit q3_K scales, minus 32. */
static inline void q3k_scales(const uint8_t *s, int sc[16]) {
    for (int k = 0; k < 16; k++) {
        const int lo = k < 8 ? s[k] & 15 : s[k - 8] >> 4;
        const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        sc[k] = (lo | (hi << 4)) - 32;
    }
}

static void dq_q3_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 110) {
        const uint8_t *hm = b, *q = b + 32;
        int sc[16];
        q3k_scales(b + 96, sc);
        const float d = h2f(b + 108);
        for (int h = 0; h < 2; h++, q += 32) {
            for (int j = 0; j < 4; j++) {
                const int shift = 2 * j;
                const uint8_t m = (uint8_t)(1u << (4 * h + j));
                for (int half = 0; half < 2; half++) {
                    const float dl = d * (float)sc[8 * h + 2 * j + half];
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

/* Scale and min of sub-block j (0..7) of q4_K/q5_K. */
static inline void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void dq_q4_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 144) {
        const float d = h2f(b), dmin = h2f(b + 2);
        const uint8_t *s = b + 4, *q = b + 16;
        for (int g = 0; g < 4; g++, q += 32) {
            int sc, m;
            k4_scale_min(s, 2 * g, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            k4_scale_min(s, 2 * g + 1, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 15) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

static void dq_q5_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 176) {
        const float d = h2f(b), dmin = h2f(b + 2);
        const uint8_t *s = b + 4, *qh = b + 16, *q = b + 48;
        for (int g = 0; g < 4; g++, q += 32) {
            int sc, m;
            k4_scale_min(s, 2 * g, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            k4_scale_min(s, 2 * g + 1, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            const uint8_t u1 = (uint8_t)(1u << (2 * g)), u2 = (uint8_t)(2u << (2 * g));
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((q[l] & 15) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((q[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

static void dq_q6_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 210) {
        const float d = h2f(b + 208);
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int h = 0; h < 2; h++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

static void dq_q8_K(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 292, y += 256) {
        const float d = tbx_ldf32(b); /* b + 260: bsums, not needed */
        for (int j = 0; j < 256; j++) y[j] = d * (float)(int8_t)b[4 + j];
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Non-linear and ternary types                                                               */
/* ------------------------------------------------------------------------------------------ */
static void dq_iq4_nl(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2;
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)tbx_kvalues_iq4nl[qs[j] & 15];
            y[j + 16] = d * (float)tbx_kvalues_iq4nl[qs[j] >> 4];
        }
    }
}

static void dq_iq4_xs(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 136) {
        const float d = h2f(b);
        const unsigned sh = tbx_ld16(b + 2);
        const uint8_t *sl = b + 4, *qs = b + 8;
        for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
            const int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 15) | (int)(((sh >> (2 * ib)) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)tbx_kvalues_iq4nl[qs[j] & 15];
                y[j + 16] = dl * (float)tbx_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

/* One base-3 digit: the digit selected by multiplying the byte by 3^n (mod 256), read from the
 * top of the byte ((q * 3) >> 8), as a level -1, 0, 1. */
static inline int tq1_trit(uint8_t byte, unsigned pow3) {
    const uint8_t q = (uint8_t)(byte * pow3);
    return (int)(((unsigned)q * 3u) >> 8) - 1;
}

static void dq_tq1_0(const void *src, float *y, uint64_t nb) {
    static const unsigned pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 54) {
        const uint8_t *qs = b, *qh = b + 48;
        const float d = h2f(b + 52);
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 32; m++) *y++ = (float)tq1_trit(qs[m], pow3[n]) * d;
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 16; m++) *y++ = (float)tq1_trit(qs[32 + m], pow3[n]) * d;
        for (int n = 0; n < 4; n++)
            for (int j = 0; j < 4; j++) *y++ = (float)tq1_trit(qh[j], pow3[n]) * d;
    }
}

static void dq_tq2_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 66) {
        const float d = h2f(b + 64);
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++) *y++ = (float)(((b[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}

/* 2^(e-128) (E8M0 halved, matching the doubled E2M1 levels); e < 2 gives f32 subnormals. */
static inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void dq_mxfp4(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 17, y += 32) {
        const float d = e8m0_half(b[0]);
        const uint8_t *qs = b + 1;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)tbx_kvalues_mxfp4[qs[j] & 15] * d;
            y[j + 16] = (float)tbx_kvalues_mxfp4[qs[j] >> 4] * d;
        }
    }
}

/* Half of an unsigned E4M3 scale (bias 7; bit 7 is ignored except that 0x00 and 0x7F give 0),
 * as ggml's ggml_ue4m3_to_fp32. Every value is exact in f32. */
static inline float ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    const int e = (x >> 3) & 15, m = x & 7;
    /* e == 0: m * 2^-9 * 0.5 = m / 1024 (exact) */
    if (e == 0) return (float)m * (1.0f / 1024.0f);
    /* else (1 + m/8) * 2^(e-7) * 0.5: an f32 with exponent e - 8 and mantissa bits m << 20 */
    const uint32_t bits = ((uint32_t)(e - 8 + 127) << 23) | ((uint32_t)m << 20);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void dq_nvfp4(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 36) {
        for (int s = 0; s < 4; s++, y += 16) {
            const float d = ue4m3_half(b[s]);
            const uint8_t *qs = b + 4 + 8 * s;
            for (int j = 0; j < 8; j++) {
                y[j] = (float)tbx_kvalues_mxfp4[qs[j] & 15] * d;
                y[j + 8] = (float)tbx_kvalues_mxfp4[qs[j] >> 4] * d;
            }
        }
    }
}

static void dq_q1_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 18, y += 128) {
        /* bit set: d, clear: -d (the sign bit flipped, as ggml's -d). ggml's f16 conversion ends
         * in a multiply, which quiets a signalling NaN: d is quieted the same way. */
        const float d = h2f(b);
        uint32_t du;
        memcpy(&du, &d, 4);
        if ((du & 0x7FFFFFFFu) > 0x7F800000u) du |= 0x00400000u;
        for (int k = 0; k < 16; k++) {
            const unsigned q = b[2 + k];
            for (int j = 0; j < 8; j++) {
                const uint32_t u = du ^ ((uint32_t)(~q >> j & 1u) << 31);
                memcpy(&y[8 * k + j], &u, 4);
            }
        }
    }
}

static void dq_q2_0(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 18, y += 64) {
        const float d = h2f(b);
        for (int j = 0; j < 64; j++) y[j] = (float)(((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Codebook (iq) types. ggml writes y = db * grid * (neg ? -1 : 1), which its compiler turns  */
/* into a negation of the product db * grid: the sign bit of the product flipped. That is     */
/* what neg_if does, so a NaN db gives ggml's NaN, its sign flipped where the sign flag is     */
/* set (gguf-py multiplies by -1.0 instead, which keeps a NaN's sign: the only bits in which  */
/* the two differ, and tests/unit/test_ggml_quant.c allows exactly that against gguf-py).     */
/* ------------------------------------------------------------------------------------------ */
/* p with its sign bit flipped when bit j of signs is set */
static inline float neg_if(float p, uint8_t signs, int j) {
    uint32_t u;
    memcpy(&u, &p, 4);
    u ^= (uint32_t)((signs >> j) & 1u) << 31;
    float r;
    memcpy(&r, &u, 4);
    return r;
}

static void dq_iq2_xxs(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 66) {
        const float d = h2f(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            const uint32_t aux = tbx_ld32(q + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g = tbx_iq2xxs_grid[q[l]];
                const uint8_t signs = tbx_ksigns_iq2xs[(aux >> (7 * l)) & 127];
                for (int j = 0; j < 8; j++) y[j] = neg_if(db * (float)grid8(g, j), signs, j);
            }
        }
    }
}

static void dq_iq2_xs(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 74) {
        const float d = h2f(b);
        const uint8_t *scales = b + 66;
        for (int ib = 0; ib < 8; ib++) {
            float db[2];
            db[0] = d * (0.5f + (float)(scales[ib] & 15)) * 0.25f;
            db[1] = d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned q = tbx_ld16(b + 2 + 2 * (4 * ib + l));
                const uint64_t g = tbx_iq2xs_grid[q & 511];
                const uint8_t signs = tbx_ksigns_iq2xs[q >> 9];
                for (int j = 0; j < 8; j++) y[j] = neg_if(db[l / 2] * (float)grid8(g, j), signs, j);
            }
        }
    }
}

static void dq_iq2_s(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 82) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
        for (int ib = 0; ib < 8; ib++, qs += 4, signs += 4) {
            float db[2];
            db[0] = d * (0.5f + (float)(scales[ib] & 15)) * 0.25f;
            db[1] = d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g = tbx_iq2s_grid[qs[l] | (((unsigned)qh[ib] << (8 - 2 * l)) & 0x300)];
                for (int j = 0; j < 8; j++) y[j] = neg_if(db[l / 2] * (float)grid8(g, j), signs[l], j);
            }
        }
    }
}

static void dq_iq3_xxs(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 98) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *sas = b + 66;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            const uint32_t aux = tbx_ld32(sas + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t signs = tbx_ksigns_iq2xs[(aux >> (7 * l)) & 127];
                const uint32_t g1 = tbx_iq3xxs_grid[qs[2 * l]], g2 = tbx_iq3xxs_grid[qs[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    y[j] = neg_if(db * (float)grid4(g1, j), signs, j);
                    y[j + 4] = neg_if(db * (float)grid4(g2, j), signs, j + 4);
                }
            }
        }
    }
}

static void dq_iq3_s(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 110) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
        for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4) {
            const int s = ib % 2 ? scales[ib / 2] >> 4 : scales[ib / 2] & 15;
            const float db = d * (float)(1 + 2 * s);
            const unsigned h = qh[ib];
            for (int l = 0; l < 4; l++, y += 8) {
                const uint32_t g1 = tbx_iq3s_grid[qs[2 * l] | ((h << (8 - 2 * l)) & 256)];
                const uint32_t g2 = tbx_iq3s_grid[qs[2 * l + 1] | ((h << (7 - 2 * l)) & 256)];
                for (int j = 0; j < 4; j++) {
                    y[j] = neg_if(db * (float)grid4(g1, j), signs[l], j);
                    y[j + 4] = neg_if(db * (float)grid4(g2, j), signs[l], j + 4);
                }
            }
        }
    }
}

static void dq_iq1_s(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 50) {
        const float d = h2f(b);
        const uint8_t *qs = b + 2;
        for (int ib = 0; ib < 8; ib++, qs += 4) {
            const unsigned qh = tbx_ld16(b + 34 + 2 * ib);
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = (qh & 0x8000) ? -TBX_IQ1S_DELTA : TBX_IQ1S_DELTA;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g = tbx_iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; j++) y[j] = dl * ((float)(int8_t)grid8(g, j) + delta);
            }
        }
    }
}

static void dq_iq1_m(const void *src, float *y, uint64_t nb) {
    const uint8_t *b = (const uint8_t *)src;
    for (uint64_t i = 0; i < nb; i++, b += 56) {
        const uint8_t *qs = b, *qh = b + 32;
        unsigned sc[4];
        for (int k = 0; k < 4; k++) sc[k] = tbx_ld16(b + 48 + 2 * k);
        /* the f16 super-scale is spread over the top nibbles of the four scale words */
        const uint16_t dbits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                          ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = tbx_f16_to_f32(dbits);
        for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
            const float dl1 = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1);
            const float dl2 = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned hb = l % 2 ? (unsigned)qh[l / 2] >> 4 : qh[l / 2] & 15u;
                const unsigned idx = qs[l] | ((hb & 7) << 8);
                const float delta = (hb & 8) ? -TBX_IQ1S_DELTA : TBX_IQ1S_DELTA;
                const float dl = l < 2 ? dl1 : dl2;
                const uint64_t g = tbx_iq1s_grid[idx];
                for (int j = 0; j < 8; j++) y[j] = dl * ((float)(int8_t)grid8(g, j) + delta);
            }
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Lookup of the scalar kernels (run-time dispatch: dispatch.c)                               */
/* ------------------------------------------------------------------------------------------ */
tbx_dequant_fn tbx_ggml_dequant_scalar_for(tbx_dtype dt) {
    switch (dt) {
    case TBX_DT_Q4_0: return dq_q4_0;
    case TBX_DT_Q4_1: return dq_q4_1;
    case TBX_DT_Q5_0: return dq_q5_0;
    case TBX_DT_Q5_1: return dq_q5_1;
    case TBX_DT_Q8_0: return dq_q8_0;
    case TBX_DT_Q8_1: return dq_q8_1;
    case TBX_DT_Q2_K: return dq_q2_K;
    case TBX_DT_Q3_K: return dq_q3_K;
    case TBX_DT_Q4_K: return dq_q4_K;
    case TBX_DT_Q5_K: return dq_q5_K;
    case TBX_DT_Q6_K: return dq_q6_K;
    case TBX_DT_Q8_K: return dq_q8_K;
    case TBX_DT_IQ2_XXS: return dq_iq2_xxs;
    case TBX_DT_IQ2_XS: return dq_iq2_xs;
    case TBX_DT_IQ3_XXS: return dq_iq3_xxs;
    case TBX_DT_IQ1_S: return dq_iq1_s;
    case TBX_DT_IQ4_NL: return dq_iq4_nl;
    case TBX_DT_IQ3_S: return dq_iq3_s;
    case TBX_DT_IQ2_S: return dq_iq2_s;
    case TBX_DT_IQ4_XS: return dq_iq4_xs;
    case TBX_DT_IQ1_M: return dq_iq1_m;
    case TBX_DT_TQ1_0: return dq_tq1_0;
    case TBX_DT_TQ2_0: return dq_tq2_0;
    case TBX_DT_MXFP4: return dq_mxfp4;
    case TBX_DT_NVFP4: return dq_nvfp4;
    case TBX_DT_Q1_0: return dq_q1_0;
    case TBX_DT_Q2_0: return dq_q2_0;
    default: return NULL;
    }
}
