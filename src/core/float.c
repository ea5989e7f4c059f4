/*
 * float.c - scalar conversions between float32 and the narrow float formats: f16, bf16, the 8-bit
 * formats (E4M3FN, E5M2, E4M3FNUZ, E5M2FNUZ, E8M0) and the 6/4-bit OCP MX formats.
 *
 * Pure bit manipulation (no FP arithmetic, so the FP environment never matters). Encoders round
 * to nearest, ties to even, with exact subnormals.
 */
#include "core.h"

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

#define F32_QNAN 0x7FC00000u

/* A sign-magnitude binary float with an implicit leading bit and subnormals. */
typedef struct minifmt {
    unsigned nbits;   /* total bits (sign is the top one) */
    unsigned mbits;   /* mantissa bits */
    int emin;         /* unbiased exponent of the smallest normal = 1 - bias */
} minifmt;

static const minifmt FMT_F16 = {16, 10, -14};
static const minifmt FMT_E4M3 = {8, 3, -6};
static const minifmt FMT_E5M2 = {8, 2, -14};
static const minifmt FMT_E4M3FNUZ = {8, 3, -7};
static const minifmt FMT_E5M2FNUZ = {8, 2, -15};
static const minifmt FMT_E2M3 = {6, 3, 0};
static const minifmt FMT_E3M2 = {6, 2, -2};
static const minifmt FMT_E2M1 = {4, 1, 0};

/* Finite magnitude code -> f32 bits (exact: every format here fits f32's normal range). */
static uint32_t mini_mag_to_f32(const minifmt *F, uint32_t mag) {
    uint32_t ef = mag >> F->mbits, m = mag & ((1u << F->mbits) - 1);
    if (ef == 0) {
        if (m == 0) return 0;
        unsigned p = 31u - (unsigned)__builtin_clz(m); /* leading bit of the subnormal */
        int e = (int)p + F->emin - (int)F->mbits;
        return ((uint32_t)(e + 127) << 23) | ((m ^ (1u << p)) << (23 - p));
    }
    int e = (int)ef - 1 + F->emin;
    return ((uint32_t)(e + 127) << 23) | (m << (23 - F->mbits));
}

/* |x| (f32 bits, finite) rounded to nearest even as a magnitude code of F. The result may exceed
 * the format's largest finite code; the caller handles overflow. */
static uint32_t mini_round(const minifmt *F, uint32_t a) {
    uint32_t ef = a >> 23, mf = a & 0x7FFFFFu;
    if (ef == 0 && mf == 0) return 0;
    /* |x| = M * 2^E exactly */
    uint64_t M = ef ? (mf | 0x800000u) : mf;
    int E = ef ? (int)ef - 150 : -149;
    /* exponent of the target's quantum: its unbiased exponent (at least emin) minus mbits */
    int et = (ef && (int)ef - 127 > F->emin) ? (int)ef - 127 : F->emin;
    int shift = et - (int)F->mbits - E; /* >= 1 for every format here */
    if (shift > 40) return 0;           /* below a quarter of the smallest step */
    uint64_t q = M >> shift, rem = M & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    /* q includes the implicit bit for normals; adding it to the exponent field handles the
     * subnormal -> normal and mantissa -> exponent carries. */
    return ((uint32_t)(et - F->emin) << F->mbits) + (uint32_t)q;
}

/* ------------------------------------------------------------------------------------------ */
/* f16, bf16                                                                                   */
/* ------------------------------------------------------------------------------------------ */
float tbx_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, mag = h & 0x7FFFu;
    if (mag >= 0x7C00u) return u2f(s | 0x7F800000u | ((mag & 0x3FFu) << 13)); /* Inf / NaN */
    return u2f(s | mini_mag_to_f32(&FMT_F16, mag));
}

uint16_t tbx_f32_to_f16(float f) {
    uint32_t u = f2u(f), s = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(s | 0x7E00u | ((a & 0x7FFFFFu) >> 13)); /* quiet NaN */
    if (a == 0x7F800000u) return (uint16_t)(s | 0x7C00u);
    uint32_t c = mini_round(&FMT_F16, a);
    if (c > 0x7BFFu) c = 0x7C00u; /* overflow -> Inf */
    return (uint16_t)(s | c);
}

float tbx_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t tbx_f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 64u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* ------------------------------------------------------------------------------------------ */
/* 8-bit floats                                                                                */
/* ------------------------------------------------------------------------------------------ */
static float e8m0_to_f32(uint8_t v) {
    if (v == 0xFF) return u2f(F32_QNAN);
    if (v == 0) return u2f(0x00400000u); /* 2^-127 is an f32 subnormal */
    return u2f((uint32_t)v << 23);
}

/* Nearest power of two; a tie (exactly 1.5 * 2^k) rounds up. Zero and values below 2^-127 give
 * 0x00 (2^-127); values from 1.5 * 2^127 and +Inf saturate to 0xFE (2^127); NaN and negative
 * values (but -0) give 0xFF (NaN). */
static uint8_t f32_to_e8m0(float f) {
    uint32_t u = f2u(f), a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0xFF;
    if (a == 0) return 0x00;
    if (u >> 31) return 0xFF;
    if (a == 0x7F800000u) return 0xFE;
    uint32_t ef = a >> 23, mf = a & 0x7FFFFFu;
    if (ef == 0) return a >= 0x00600000u ? 0x01 : 0x00; /* subnormal: 1.5 * 2^-127 splits */
    /* |x| in [2^(ef-127), 2^(ef-126)): round up when the mantissa is >= 0.5 */
    uint32_t e = ef + (mf >= 0x400000u ? 1u : 0u);
    if (e >= 0xFF) return 0xFE;
    return (uint8_t)e;
}

static float mini_to_f32(const minifmt *F, uint32_t code) {
    uint32_t sbit = 1u << (F->nbits - 1);
    uint32_t s = (code & sbit) ? 0x80000000u : 0;
    return u2f(s | mini_mag_to_f32(F, code & (sbit - 1)));
}

/* Encodes to a format without Inf: out-of-range values and Inf saturate to maxcode. NaN gives
 * `nan` (a full code). With `fnuz`, a result of -0 becomes +0. */
static uint32_t f32_to_mini_sat(const minifmt *F, float f, uint32_t maxcode, uint32_t nan,
                                bool fnuz) {
    uint32_t u = f2u(f), a = u & 0x7FFFFFFFu;
    uint32_t s = (u >> 31) ? 1u << (F->nbits - 1) : 0;
    if (a > 0x7F800000u) return nan;
    uint32_t c = a == 0x7F800000u ? maxcode : mini_round(F, a);
    if (c > maxcode) c = maxcode;
    if (fnuz && c == 0) return 0;
    return s | c;
}

float tbx_f8_to_f32(tbx_dtype dtype, uint8_t v) {
    uint32_t s = (v & 0x80u) ? 0x80000000u : 0, mag = v & 0x7Fu;
    switch (dtype) {
    case TBX_DT_F8_E4M3:
        if (mag == 0x7F) return u2f(s | F32_QNAN);
        return u2f(s | mini_mag_to_f32(&FMT_E4M3, mag));
    case TBX_DT_F8_E5M2:
        if (mag >= 0x7C) return u2f(s | 0x7F800000u | ((mag & 3u) << 21)); /* Inf / NaN */
        return u2f(s | mini_mag_to_f32(&FMT_E5M2, mag));
    case TBX_DT_F8_E4M3FNUZ:
        if (v == 0x80) return u2f(F32_QNAN);
        return u2f(s | mini_mag_to_f32(&FMT_E4M3FNUZ, mag));
    case TBX_DT_F8_E5M2FNUZ:
        if (v == 0x80) return u2f(F32_QNAN);
        return u2f(s | mini_mag_to_f32(&FMT_E5M2FNUZ, mag));
    case TBX_DT_F8_E8M0:
        return e8m0_to_f32(v);
    default:
        return u2f(F32_QNAN);
    }
}

uint8_t tbx_f32_to_f8(tbx_dtype dtype, float f) {
    switch (dtype) {
    case TBX_DT_F8_E4M3: {
        uint32_t s = (f2u(f) >> 31) << 7;
        return (uint8_t)f32_to_mini_sat(&FMT_E4M3, f, 0x7E, s | 0x7F, false);
    }
    case TBX_DT_F8_E5M2: {
        uint32_t u = f2u(f), s = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
        if (a > 0x7F800000u) return (uint8_t)(s | 0x7E); /* quiet NaN */
        if (a == 0x7F800000u) return (uint8_t)(s | 0x7C);
        uint32_t c = mini_round(&FMT_E5M2, a);
        if (c > 0x7B) c = 0x7C; /* overflow -> Inf */
        return (uint8_t)(s | c);
    }
    case TBX_DT_F8_E4M3FNUZ:
        return (uint8_t)f32_to_mini_sat(&FMT_E4M3FNUZ, f, 0x7F, 0x80, true);
    case TBX_DT_F8_E5M2FNUZ:
        return (uint8_t)f32_to_mini_sat(&FMT_E5M2FNUZ, f, 0x7F, 0x80, true);
    case TBX_DT_F8_E8M0:
        return f32_to_e8m0(f);
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* 6-bit and 4-bit OCP MX floats                                                               */
/* ------------------------------------------------------------------------------------------ */
float tbx_f6_e2m3_to_f32(uint8_t v) { return mini_to_f32(&FMT_E2M3, v & 0x3Fu); }
float tbx_f6_e3m2_to_f32(uint8_t v) { return mini_to_f32(&FMT_E3M2, v & 0x3Fu); }
float tbx_f4_e2m1_to_f32(uint8_t v) { return mini_to_f32(&FMT_E2M1, v & 0x0Fu); }

uint8_t tbx_f32_to_f6_e2m3(float f) {
    return (uint8_t)f32_to_mini_sat(&FMT_E2M3, f, 0x1F, 0, false);
}
uint8_t tbx_f32_to_f6_e3m2(float f) {
    return (uint8_t)f32_to_mini_sat(&FMT_E3M2, f, 0x1F, 0, false);
}
uint8_t tbx_f32_to_f4_e2m1(float f) {
    return (uint8_t)f32_to_mini_sat(&FMT_E2M1, f, 0x7, 0, false);
}
