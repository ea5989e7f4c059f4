/*
 * test_float.c - exhaustive tests of the scalar float conversions (f16, bf16, 8/6/4-bit floats)
 * and of tbx_decode_f32 on every plain dtype, against oracles written independently here:
 * values come from sign * 2^(e - bias) * (1 + m / 2^mbits) in double arithmetic, rounding from a
 * nearest-value search, and f16 additionally from the compiler's _Float16 when it has one.
 */
#include "tbx_test.h"
#include "tensorbox.h"
#include "plain.h"

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------ */
/* helpers                                                                                     */
/* ------------------------------------------------------------------------------------------ */
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static bool is_nan_f(float f) { return f != f; }
static bool is_nan_d(double d) { return d != d; }
static float inf_f(void) { return bitsf(0x7F800000u); }

static double p2(int e) {
    double r = 1.0;
    for (; e > 0; e--) r *= 2.0;
    for (; e < 0; e++) r /= 2.0;
    return r;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
/* A random f32: half uniformly random bits, half with an unbiased exponent in [elo, ehi]. */
static float rnd_float(int elo, int ehi) {
    uint64_t r = rnd();
    uint32_t u = (uint32_t)r;
    if (r >> 63) {
        int span = ehi - elo + 1;
        int field = elo + (int)((r >> 32) % (uint64_t)span) + 127;
        field = field < 0 ? 0 : field > 255 ? 255 : field; /* 0: subnormal, 255: Inf/NaN */
        u = (u & 0x807FFFFFu) | ((uint32_t)field << 23);
    }
    return bitsf(u);
}

#define MISMATCH(cnt, ...) do { if ((cnt)++ < 5) { fprintf(stderr, __VA_ARGS__); } } while (0)

/* ------------------------------------------------------------------------------------------ */
/* A small-float description for the oracle                                                    */
/* ------------------------------------------------------------------------------------------ */
enum ovf { OVF_INF, OVF_SAT };
enum nanrule { NAN_IEEE, NAN_ALL_ONES, NAN_FNUZ, NAN_NONE };

typedef struct ref_fmt {
    const char *name;
    unsigned nbits, mbits;
    int bias;
    uint32_t maxcode;   /* largest finite magnitude */
    enum ovf ovf;
    enum nanrule nan;
    float (*dec)(uint32_t);
    uint32_t (*enc)(float);
} ref_fmt;

/* value of a magnitude code; the exponent field is not masked, so maxcode + 1 gives the
 * "next" value past the largest finite one */
static double ref_mag(const ref_fmt *F, uint32_t mag) {
    uint32_t e = mag >> F->mbits, m = mag & ((1u << F->mbits) - 1);
    if (e == 0) return (double)m * p2(1 - F->bias - (int)F->mbits);
    return (1.0 + (double)m / (double)(1u << F->mbits)) * p2((int)e - F->bias);
}

/* expected decode of a full code (NaN as a double NaN) */
static double ref_decode(const ref_fmt *F, uint32_t code) {
    uint32_t sbit = 1u << (F->nbits - 1), mag = code & (sbit - 1);
    bool neg = (code & sbit) != 0;
    switch (F->nan) {
    case NAN_IEEE:
        if ((mag >> F->mbits) == ((1u << (F->nbits - 1 - F->mbits)) - 1)) {
            if (mag & ((1u << F->mbits) - 1)) return (double)bitsf(0x7FC00000u);
            return (double)(neg ? -inf_f() : inf_f());
        }
        break;
    case NAN_ALL_ONES: if (mag == sbit - 1) return (double)bitsf(0x7FC00000u); break;
    case NAN_FNUZ: if (code == sbit) return (double)bitsf(0x7FC00000u); break;
    case NAN_NONE: break;
    }
    double v = ref_mag(F, mag);
    return neg ? -v : v;
}

/* expected encode by a nearest-value search (ties to the even code) */
static uint32_t ref_encode(const ref_fmt *F, float f) {
    uint32_t sbit = 1u << (F->nbits - 1);
    uint32_t inf = F->ovf == OVF_INF ? F->maxcode + 1 : F->maxcode;
    bool neg = (fbits(f) >> 31) != 0;
    uint32_t s = neg ? sbit : 0;
    if (is_nan_f(f)) return 0xFFFFFFFFu; /* checked separately */
    double x = neg ? -(double)f : (double)f;
    uint32_t c;
    if (x >= ref_mag(F, F->maxcode + 1)) c = inf;
    else {
        uint32_t lo = 0, hi = F->maxcode + 1; /* val(lo) <= x < val(hi) */
        while (hi - lo > 1) {
            uint32_t mid = (lo + hi) / 2;
            if (ref_mag(F, mid) <= x) lo = mid; else hi = mid;
        }
        double dl = x - ref_mag(F, lo), dh = ref_mag(F, hi) - x;
        c = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
        if (c > F->maxcode) c = inf;
    }
    if (F->nan == NAN_FNUZ && c == 0) return 0;
    return s | c;
}

/* ---- the formats under test ---- */
static float d_f16(uint32_t c) { return tbx_f16_to_f32((uint16_t)c); }
static uint32_t e_f16(float f) { return tbx_f32_to_f16(f); }
static float d_e4m3(uint32_t c) { return tbx_f8_to_f32(TBX_DT_F8_E4M3, (uint8_t)c); }
static uint32_t e_e4m3(float f) { return tbx_f32_to_f8(TBX_DT_F8_E4M3, f); }
static float d_e5m2(uint32_t c) { return tbx_f8_to_f32(TBX_DT_F8_E5M2, (uint8_t)c); }
static uint32_t e_e5m2(float f) { return tbx_f32_to_f8(TBX_DT_F8_E5M2, f); }
static float d_e4m3fnuz(uint32_t c) { return tbx_f8_to_f32(TBX_DT_F8_E4M3FNUZ, (uint8_t)c); }
static uint32_t e_e4m3fnuz(float f) { return tbx_f32_to_f8(TBX_DT_F8_E4M3FNUZ, f); }
static float d_e5m2fnuz(uint32_t c) { return tbx_f8_to_f32(TBX_DT_F8_E5M2FNUZ, (uint8_t)c); }
static uint32_t e_e5m2fnuz(float f) { return tbx_f32_to_f8(TBX_DT_F8_E5M2FNUZ, f); }
static float d_e2m3(uint32_t c) { return tbx_f6_e2m3_to_f32((uint8_t)c); }
static uint32_t e_e2m3(float f) { return tbx_f32_to_f6_e2m3(f); }
static float d_e3m2(uint32_t c) { return tbx_f6_e3m2_to_f32((uint8_t)c); }
static uint32_t e_e3m2(float f) { return tbx_f32_to_f6_e3m2(f); }
static float d_e2m1(uint32_t c) { return tbx_f4_e2m1_to_f32((uint8_t)c); }
static uint32_t e_e2m1(float f) { return tbx_f32_to_f4_e2m1(f); }

static const ref_fmt FMTS[] = {
    {"f16", 16, 10, 15, 0x7BFF, OVF_INF, NAN_IEEE, d_f16, e_f16},
    {"f8_e4m3", 8, 3, 7, 0x7E, OVF_SAT, NAN_ALL_ONES, d_e4m3, e_e4m3},
    {"f8_e5m2", 8, 2, 15, 0x7B, OVF_INF, NAN_IEEE, d_e5m2, e_e5m2},
    {"f8_e4m3fnuz", 8, 3, 8, 0x7F, OVF_SAT, NAN_FNUZ, d_e4m3fnuz, e_e4m3fnuz},
    {"f8_e5m2fnuz", 8, 2, 16, 0x7F, OVF_SAT, NAN_FNUZ, d_e5m2fnuz, e_e5m2fnuz},
    {"f6_e2m3", 6, 3, 1, 0x1F, OVF_SAT, NAN_NONE, d_e2m3, e_e2m3},
    {"f6_e3m2", 6, 2, 3, 0x1F, OVF_SAT, NAN_NONE, d_e3m2, e_e3m2},
    {"f4_e2m1", 4, 1, 1, 0x7, OVF_SAT, NAN_NONE, d_e2m1, e_e2m1},
};
#define NFMTS (sizeof FMTS / sizeof FMTS[0])

/* ------------------------------------------------------------------------------------------ */
/* generic small-float tests (f16 and every 8/6/4-bit format)                                  */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(small_floats_decode_every_code) {
    for (size_t i = 0; i < NFMTS; i++) {
        const ref_fmt *F = &FMTS[i];
        int bad = 0;
        for (uint32_t c = 0; c < (1u << F->nbits); c++) {
            double want = ref_decode(F, c);
            float got = F->dec(c);
            if (is_nan_d(want) ? !is_nan_f(got) : fbits(got) != fbits((float)want))
                MISMATCH(bad, "%s: decode(0x%X) = %.9g, expected %.9g\n", F->name, c,
                         (double)got, want);
        }
        CHECK_EQ(bad, 0);
    }
}

TBX_TEST(small_floats_known_values) {
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E4M3, 0x7E) == 448.0f);
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E4M3, 0x01) == 0.001953125f); /* 2^-9 */
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E5M2, 0x7B) == 57344.0f);
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E5M2, 0x01) == bitsf(0x37800000u)); /* 2^-16 */
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E4M3FNUZ, 0x7F) == 240.0f);
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E4M3FNUZ, 0x01) == bitsf(0x3A800000u)); /* 2^-10 */
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E5M2FNUZ, 0x7F) == 57344.0f);
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E5M2FNUZ, 0x01) == bitsf(0x37000000u)); /* 2^-17 */
    CHECK(is_nan_f(tbx_f8_to_f32(TBX_DT_F8_E4M3FNUZ, 0x80)));
    CHECK(is_nan_f(tbx_f8_to_f32(TBX_DT_F8_E4M3, 0xFF)));
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E5M2, 0xFC) == -inf_f());
    CHECK(tbx_f6_e2m3_to_f32(0x1F) == 7.5f);
    CHECK(tbx_f6_e2m3_to_f32(0x01) == 0.125f);
    CHECK(tbx_f6_e3m2_to_f32(0x1F) == 28.0f);
    CHECK(tbx_f6_e3m2_to_f32(0x01) == 0.0625f);
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 8; c++) {
        CHECK(tbx_f4_e2m1_to_f32((uint8_t)c) == e2m1[c]);
        CHECK(tbx_f4_e2m1_to_f32((uint8_t)(c | 8)) == -e2m1[c]);
    }
    /* the OINF reference's lost carry: 1.875 must round up to 2.0 in E5M2 */
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2, 1.875f), 0x40);
    /* an invalid dtype */
    CHECK(is_nan_f(tbx_f8_to_f32(TBX_DT_F32, 0x10)));
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F32, 1.0f), 0);
}

TBX_TEST(small_floats_finite_codes_roundtrip) {
    for (size_t i = 0; i < NFMTS; i++) {
        const ref_fmt *F = &FMTS[i];
        int bad = 0;
        for (uint32_t c = 0; c < (1u << F->nbits); c++) {
            float v = F->dec(c);
            if (is_nan_f(v)) continue;
            uint32_t back = F->enc(v);
            if (back != c) MISMATCH(bad, "%s: 0x%X -> %.9g -> 0x%X\n", F->name, c, (double)v, back);
        }
        CHECK_EQ(bad, 0);
    }
}

TBX_TEST(small_floats_midpoints_round_to_even) {
    for (size_t i = 0; i < NFMTS; i++) {
        const ref_fmt *F = &FMTS[i];
        uint32_t sbit = 1u << (F->nbits - 1);
        uint32_t ovf = F->ovf == OVF_INF ? F->maxcode + 1 : F->maxcode;
        int bad = 0;
        for (uint32_t c = 0; c <= F->maxcode; c++) {
            double lo = ref_mag(F, c), hi = ref_mag(F, c + 1);
            float mid = (float)((lo + hi) / 2);
            if ((double)mid != (lo + hi) / 2) { MISMATCH(bad, "%s: midpoint inexact\n", F->name); continue; }
            uint32_t even = (c % 2 == 0) ? c : c + 1;
            if (even > F->maxcode) even = ovf;
            uint32_t up = c + 1 > F->maxcode ? ovf : c + 1;
            float above = bitsf(fbits(mid) + 1), below = bitsf(fbits(mid) - 1);
            for (int neg = 0; neg < 2; neg++) {
                uint32_t s = neg ? sbit : 0;
                float m = neg ? -mid : mid, a = neg ? -above : above, b = neg ? -below : below;
                uint32_t we = s | even, wu = s | up, wd = s | c;
                if (F->nan == NAN_FNUZ) { /* no negative zero */
                    if (even == 0) we = 0;
                    if (c == 0) wd = 0;
                }
                if (F->enc(m) != we) MISMATCH(bad, "%s: mid %.9g -> 0x%X, want 0x%X\n", F->name, (double)m, F->enc(m), we);
                if (F->enc(a) != wu) MISMATCH(bad, "%s: above %.9g -> 0x%X, want 0x%X\n", F->name, (double)a, F->enc(a), wu);
                if (F->enc(b) != wd) MISMATCH(bad, "%s: below %.9g -> 0x%X, want 0x%X\n", F->name, (double)b, F->enc(b), wd);
            }
        }
        CHECK_EQ(bad, 0);
    }
}

TBX_TEST(small_floats_overflow_nan_zero) {
    float inf = inf_f(), nan = bitsf(0x7FC00000u), snan = bitsf(0x7F800001u);
    /* f16: overflow -> Inf, NaN stays NaN (quiet) */
    CHECK_EQ(tbx_f32_to_f16(65504.0f), 0x7BFF);
    CHECK_EQ(tbx_f32_to_f16(65519.99f), 0x7BFF);
    CHECK_EQ(tbx_f32_to_f16(65520.0f), 0x7C00);
    CHECK_EQ(tbx_f32_to_f16(1e30f), 0x7C00);
    CHECK_EQ(tbx_f32_to_f16(-1e30f), 0xFC00);
    CHECK_EQ(tbx_f32_to_f16(inf), 0x7C00);
    CHECK_EQ(tbx_f32_to_f16(-inf), 0xFC00);
    CHECK_EQ(tbx_f32_to_f16(-0.0f), 0x8000);
    CHECK_EQ(tbx_f32_to_f16(bitsf(1)), 0);          /* smallest f32 subnormal */
    CHECK_EQ(tbx_f32_to_f16(bitsf(0x80000001u)), 0x8000);
    CHECK_EQ(tbx_f32_to_f16(bitsf(0x33000000u)), 0);      /* 2^-25: tie -> even (0) */
    CHECK_EQ(tbx_f32_to_f16(bitsf(0x33000001u)), 1);
    CHECK_EQ(tbx_f32_to_f16(bitsf(0x33C00000u)), 2);      /* 1.5 * 2^-24: tie -> 2 */
    uint16_t hn = tbx_f32_to_f16(nan), hs = tbx_f32_to_f16(snan);
    CHECK((hn & 0x7C00) == 0x7C00 && (hn & 0x3FF) != 0 && (hn & 0x200));
    CHECK((hs & 0x7C00) == 0x7C00 && (hs & 0x3FF) != 0);
    CHECK(is_nan_f(tbx_f16_to_f32(hs)));
    CHECK(tbx_f32_to_f16(-nan) & 0x8000);
    /* E4M3FN saturates, Inf too; NaN -> S.1111.111 */
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3, 464.0f), 0x7E);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3, 1e9f), 0x7E);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3, -1e9f), 0xFE);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3, inf), 0x7E);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3, -inf), 0xFE);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3, nan), 0x7F);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3, -nan), 0xFF);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3, -0.0f), 0x80);
    /* E5M2: overflow -> Inf */
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2, 57344.0f), 0x7B);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2, 61439.0f), 0x7B);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2, 61440.0f), 0x7C);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2, -1e9f), 0xFC);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2, inf), 0x7C);
    uint8_t e5n = tbx_f32_to_f8(TBX_DT_F8_E5M2, snan);
    CHECK((e5n & 0x7C) == 0x7C && (e5n & 3) != 0);
    /* FNUZ: NaN is 0x80 only; -0 and tiny negatives encode as +0; saturation */
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3FNUZ, nan), 0x80);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3FNUZ, -nan), 0x80);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3FNUZ, -0.0f), 0x00);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3FNUZ, -1e-20f), 0x00);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3FNUZ, 1e9f), 0x7F);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E4M3FNUZ, -inf), 0xFF);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2FNUZ, nan), 0x80);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2FNUZ, -0.0f), 0x00);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2FNUZ, inf), 0x7F);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E5M2FNUZ, -70000.0f), 0xFF);
    /* f6/f4: saturate, NaN -> +0 */
    CHECK_EQ(tbx_f32_to_f6_e2m3(100.0f), 0x1F);
    CHECK_EQ(tbx_f32_to_f6_e2m3(-inf), 0x3F);
    CHECK_EQ(tbx_f32_to_f6_e2m3(nan), 0);
    CHECK_EQ(tbx_f32_to_f6_e3m2(1e9f), 0x1F);
    CHECK_EQ(tbx_f32_to_f6_e3m2(-30.0f), 0x3F);
    CHECK_EQ(tbx_f32_to_f4_e2m1(7.0f), 0x7);
    CHECK_EQ(tbx_f32_to_f4_e2m1(-100.0f), 0xF);
    CHECK_EQ(tbx_f32_to_f4_e2m1(nan), 0);
    CHECK_EQ(tbx_f32_to_f4_e2m1(0.25f), 0);  /* tie between 0 and 0.5 -> 0 */
    CHECK_EQ(tbx_f32_to_f4_e2m1(0.75f), 2);  /* tie between 0.5 and 1 -> 1.0 (even) */
    CHECK_EQ(tbx_f32_to_f4_e2m1(2.5f), 4);   /* tie between 2 and 3 -> 2 (even) */
    CHECK_EQ(tbx_f32_to_f4_e2m1(5.0f), 6);   /* tie between 4 and 6 -> 4 (even) */
    CHECK_EQ(tbx_f32_to_f4_e2m1(-0.0f), 0x8);
    /* high bits of a 6/4-bit argument are ignored */
    CHECK(tbx_f4_e2m1_to_f32(0xF7) == 6.0f);
    CHECK(tbx_f4_e2m1_to_f32(0x3F) == -6.0f);
    CHECK(tbx_f6_e3m2_to_f32(0xC1) == 0.0625f);
}

TBX_TEST(small_floats_random_vs_oracle) {
    for (size_t i = 0; i < NFMTS; i++) {
        const ref_fmt *F = &FMTS[i];
        int ebias = F->bias;
        int emax = (int)(F->maxcode >> F->mbits) - ebias + 1;
        int bad = 0;
        for (int k = 0; k < 1000000; k++) {
            float f = rnd_float(1 - ebias - (int)F->mbits - 3, emax + 1);
            uint32_t got = F->enc(f);
            if (is_nan_f(f)) {
                bool ok = F->nan == NAN_NONE ? got == 0 : is_nan_f(F->dec(got));
                if (!ok) MISMATCH(bad, "%s: NaN -> 0x%X\n", F->name, got);
                continue;
            }
            uint32_t want = ref_encode(F, f);
            if (got != want) MISMATCH(bad, "%s: enc(%.9g) = 0x%X, want 0x%X\n", F->name, (double)f, got, want);
        }
        CHECK_EQ(bad, 0);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* f16 against the compiler's _Float16 (gcc on x86-64; clang 14 lacks it)                      */
/* ------------------------------------------------------------------------------------------ */
#ifdef __FLT16_MANT_DIG__
__extension__ typedef _Float16 cc_f16; /* the compiler's binary16 */

TBX_TEST(f16_vs_compiler_float16) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t hv = (uint16_t)h;
        cc_f16 x;
        memcpy(&x, &hv, 2);
        float want = (float)x, got = tbx_f16_to_f32(hv);
        if (is_nan_f(want) ? !is_nan_f(got) : fbits(got) != fbits(want))
            MISMATCH(bad, "f16 decode 0x%04X: %.9g vs %.9g\n", h, (double)got, (double)want);
    }
    for (int k = 0; k < 4000000; k++) {
        float f = k < 16 ? (float)k : rnd_float(-26, 17);
        if (is_nan_f(f)) continue;
        cc_f16 x = (cc_f16)f;
        uint16_t want;
        memcpy(&want, &x, 2);
        uint16_t got = tbx_f32_to_f16(f);
        if (got != want) MISMATCH(bad, "f16 encode %.9g: 0x%04X vs 0x%04X\n", (double)f, got, want);
    }
    CHECK_EQ(bad, 0);
}
#endif

/* The f16 row decoders (scalar loop, AVX2 kernel, the one dispatched, and tbx_decode_f32's F16
 * path) give the bits of tbx_f16_to_f32 for all 65,536 inputs, at every alignment of source and
 * destination and for every row length up to 40 (the AVX2 kernel's 8-wide body and its tail). */
static void f16_row_check(tbx_f16_row_fn fn, const char *name, int *bad) {
    static uint8_t src[2 * 65536 + 16];
    static float dst[65536 + 16];
    for (uint32_t h = 0; h < 65536; h++) { src[2 * h] = (uint8_t)h; src[2 * h + 1] = (uint8_t)(h >> 8); }
    fn(src, dst, 65536);
    for (uint32_t h = 0; h < 65536; h++)
        if (fbits(dst[h]) != fbits(tbx_f16_to_f32((uint16_t)h)))
            MISMATCH(*bad, "%s 0x%04X: 0x%08X vs 0x%08X\n", name, h, fbits(dst[h]),
                     fbits(tbx_f16_to_f32((uint16_t)h)));
    for (int so = 0; so < 4; so++)
        for (int dof = 0; dof < 3; dof++)
            for (uint64_t n = 0; n <= 40; n++) {
                uint8_t *s = src + 1 + so; /* odd byte offsets too */
                for (uint64_t k = 0; k < n; k++) {
                    uint16_t h = (uint16_t)(0x7BF0u + k * 977u + (uint64_t)so * 31u);
                    s[2 * k] = (uint8_t)h;
                    s[2 * k + 1] = (uint8_t)(h >> 8);
                }
                for (int k = 0; k < 48; k++) dst[k] = bitsf(0xDEADBEEFu);
                fn(s, dst + dof, n);
                for (uint64_t k = 0; k < n; k++) {
                    uint16_t h = (uint16_t)(s[2 * k] | (s[2 * k + 1] << 8));
                    if (fbits(dst[dof + k]) != fbits(tbx_f16_to_f32(h)))
                        MISMATCH(*bad, "%s n=%d k=%d: 0x%04X\n", name, (int)n, (int)k, h);
                }
                for (uint64_t k = (uint64_t)dof + n; k < 48; k++) /* nothing written past n */
                    if (fbits(dst[k]) != 0xDEADBEEFu) MISMATCH(*bad, "%s n=%d wrote past\n", name, (int)n);
                for (int k = 0; k < dof; k++)
                    if (fbits(dst[k]) != 0xDEADBEEFu) MISMATCH(*bad, "%s n=%d wrote before\n", name, (int)n);
            }
}

static void f16_decode_f32(const uint8_t *src, float *dst, uint64_t n) {
    (void)tbx_decode_f32(TBX_DT_F16, src, (size_t)(2 * n), n, dst);
}

TBX_TEST(f16_rows_simd_and_scalar_match_every_input) {
    int bad = 0;
    f16_row_check(tbx_f16_row_scalar, "scalar", &bad);
    f16_row_check(tbx_f16_row_for(), "dispatched", &bad);
    f16_row_check(f16_decode_f32, "tbx_decode_f32", &bad);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(TBX_GGML_NO_SIMD)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        f16_row_check(tbx_f16_row_avx2, "avx2", &bad);
        CHECK(tbx_f16_row_for() == tbx_f16_row_avx2);
    } else {
        fprintf(stderr, "note: no AVX2 on this CPU: the AVX2 f16 kernel is not exercised\n");
    }
#endif
    CHECK_EQ(bad, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* bf16                                                                                        */
/* ------------------------------------------------------------------------------------------ */
static double ref_bf16(uint32_t h) { /* magnitude code 0x7F80 is 2^128 (virtual next) */
    uint32_t e = (h >> 7) & 0xFF, m = h & 127;
    double v = e == 0 ? (double)m * p2(-133) : (double)(128 + m) * p2((int)e - 134);
    return (h & 0x8000) ? -v : v;
}

TBX_TEST(bf16_decode_all) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float got = tbx_bf16_to_f32((uint16_t)h);
        uint32_t e = (h >> 7) & 0xFF, m = h & 127;
        if (e == 0xFF) {
            bool ok = m ? is_nan_f(got) : (got == ((h & 0x8000) ? -inf_f() : inf_f()));
            if (!ok) MISMATCH(bad, "bf16 0x%04X special\n", h);
            continue;
        }
        if (fbits(got) != fbits((float)ref_bf16(h)))
            MISMATCH(bad, "bf16 0x%04X: %.9g vs %.9g\n", h, (double)got, ref_bf16(h));
        if (tbx_f32_to_bf16(got) != h) MISMATCH(bad, "bf16 0x%04X does not round-trip\n", h);
    }
    CHECK_EQ(bad, 0);
}

TBX_TEST(bf16_encode_random_vs_double_reference) {
    int bad = 0;
    for (int k = 0; k < 4000000; k++) {
        float f = rnd_float(-135, 127);
        uint32_t u = fbits(f);
        uint16_t got = tbx_f32_to_bf16(f);
        if (is_nan_f(f)) {
            if (got != (uint16_t)((u >> 16) | 0x40) || !is_nan_f(tbx_bf16_to_f32(got)))
                MISMATCH(bad, "bf16 NaN 0x%08X -> 0x%04X\n", u, got);
            continue;
        }
        if ((u & 0x7FFFFFFFu) == 0x7F800000u) {
            if (got != (u >> 16)) MISMATCH(bad, "bf16 Inf\n");
            continue;
        }
        uint32_t lo = u >> 16, hi = lo + 1; /* candidates (same sign, magnitude order) */
        double x = (double)f, vl = ref_bf16(lo), vh = ref_bf16(hi);
        double dl = x > vl ? x - vl : vl - x, dh = x > vh ? x - vh : vh - x;
        uint32_t want = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
        if (got != want) MISMATCH(bad, "bf16 encode %.9g: 0x%04X vs 0x%04X\n", x, got, want);
    }
    /* quieting: a signalling NaN gains the quiet bit, payload kept */
    CHECK_EQ(tbx_f32_to_bf16(bitsf(0x7F800001u)), 0x7FC0);
    CHECK_EQ(tbx_f32_to_bf16(bitsf(0xFF812345u)), 0xFFC1);
    CHECK_EQ(tbx_f32_to_bf16(bitsf(0x7F7FFFFFu)), 0x7F80); /* max f32 rounds to Inf */
    CHECK_EQ(tbx_f32_to_bf16(bitsf(0x3F808000u)), 0x3F80); /* tie -> even */
    CHECK_EQ(tbx_f32_to_bf16(bitsf(0x3F818000u)), 0x3F82); /* tie -> even (up) */
    CHECK_EQ(bad, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* E8M0                                                                                        */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(e8m0_decode_encode) {
    int bad = 0;
    for (uint32_t c = 0; c < 255; c++) {
        float got = tbx_f8_to_f32(TBX_DT_F8_E8M0, (uint8_t)c);
        double want = p2((int)c - 127);
        if ((double)got != want) MISMATCH(bad, "e8m0 0x%02X: %.9g vs %.9g\n", c, (double)got, want);
        if (tbx_f32_to_f8(TBX_DT_F8_E8M0, got) != c) MISMATCH(bad, "e8m0 0x%02X round trip\n", c);
        if (c > 0 && c < 254) {
            float tie = (float)(want * 1.5);
            float below = bitsf(fbits(tie) - 1);
            if (tbx_f32_to_f8(TBX_DT_F8_E8M0, tie) != c + 1) MISMATCH(bad, "e8m0 tie 0x%02X\n", c);
            if (tbx_f32_to_f8(TBX_DT_F8_E8M0, below) != c) MISMATCH(bad, "e8m0 below tie 0x%02X\n", c);
            float nearly2 = bitsf(fbits((float)(want * 2)) - 1);
            if (tbx_f32_to_f8(TBX_DT_F8_E8M0, nearly2) != c + 1) MISMATCH(bad, "e8m0 near 0x%02X\n", c);
        }
    }
    CHECK_EQ(bad, 0);
    CHECK(is_nan_f(tbx_f8_to_f32(TBX_DT_F8_E8M0, 0xFF)));
    CHECK(tbx_f8_to_f32(TBX_DT_F8_E8M0, 127) == 1.0f);
    CHECK_EQ(fbits(tbx_f8_to_f32(TBX_DT_F8_E8M0, 0)), 0x00400000u);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, 0.0f), 0x00);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, -0.0f), 0x00);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, bitsf(1)), 0x00);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, bitsf(0x005FFFFFu)), 0x00);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, bitsf(0x00600000u)), 0x01); /* 1.5 * 2^-127 */
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, -1.0f), 0xFF);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, bitsf(0x7FC00000u)), 0xFF);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, inf_f()), 0xFE);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, bitsf(0x7F7FFFFFu)), 0xFE);
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, 3.0f), 128 + 1);  /* tie 3 = 1.5*2 -> 4 */
    CHECK_EQ(tbx_f32_to_f8(TBX_DT_F8_E8M0, 2.9f), 128);
}

/* ------------------------------------------------------------------------------------------ */
/* tbx_decode_f32 on every plain dtype                                                         */
/* ------------------------------------------------------------------------------------------ */
static bool same_floats(const float *a, const float *b, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (fbits(a[i]) != fbits(b[i]) && !(is_nan_f(a[i]) && is_nan_f(b[i]))) {
            fprintf(stderr, "  element %llu: %.9g vs %.9g\n", (unsigned long long)i,
                    (double)a[i], (double)b[i]);
            return false;
        }
    return true;
}

/* Decodes, checks the values, then checks that one byte less is TBX_E_TRUNCATED. */
static void check_decode(tbx_dtype dt, const void *src, size_t len, uint64_t n,
                         const float *want) {
    float out[64];
    memset(out, 0xAB, sizeof out);
    tbx_status st = tbx_decode_f32(dt, src, len, n, out);
    CHECK_OK(st);
    if (st == TBX_OK) {
        bool ok = same_floats(out, want, n);
        if (!ok) fprintf(stderr, "  dtype %s\n", tbx_dtype_get(dt)->name);
        CHECK(ok);
        CHECK_EQ(fbits(out[n]), 0xABABABABu); /* nothing written past n */
    }
    if (len > 0) CHECK_EQ(tbx_decode_f32(dt, src, len - 1, n, out), TBX_E_TRUNCATED);
}

TBX_TEST(decode_plain_floats) {
    uint8_t b[64];
    /* f64 (rounds to nearest f32) */
    double d64[3] = {1.5, -1e300, 0.1};
    for (int i = 0; i < 3; i++) { uint64_t u; memcpy(&u, &d64[i], 8);
        for (int k = 0; k < 8; k++) b[8 * i + k] = (uint8_t)(u >> (8 * k)); }
    float w64[3] = {1.5f, -inf_f(), 0.1f};
    check_decode(TBX_DT_F64, b, 24, 3, w64);
    /* f32 bytes little-endian, at an odd address */
    float w32[2] = {3.25f, -0.0f};
    for (int i = 0; i < 2; i++) { uint32_t u = fbits(w32[i]);
        for (int k = 0; k < 4; k++) b[1 + 4 * i + k] = (uint8_t)(u >> (8 * k)); }
    check_decode(TBX_DT_F32, b + 1, 8, 2, w32);
    /* f16 / bf16 */
    const uint8_t h16[] = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0x00, 0x7C};
    float w16[4] = {1.0f, -2.0f, bitsf(0x33800000u), inf_f()};
    check_decode(TBX_DT_F16, h16, 8, 4, w16);
    const uint8_t hb16[] = {0x80, 0x3F, 0x49, 0x40, 0x00, 0x80};
    float wb16[3] = {1.0f, bitsf(0x40490000u), -0.0f};
    check_decode(TBX_DT_BF16, hb16, 6, 3, wb16);
    /* f8 */
    const uint8_t f8[] = {0x38, 0x7E, 0xFE, 0x01};
    float we4[4] = {1.0f, 448.0f, -448.0f, 0.001953125f};
    check_decode(TBX_DT_F8_E4M3, f8, 4, 4, we4);
    float we5[4] = {0.5f, bitsf(0x7FC00000u), -bitsf(0x7FC00000u), bitsf(0x37800000u)};
    check_decode(TBX_DT_F8_E5M2, f8, 4, 4, we5);
    float wfz[4] = {0.5f, 224.0f, -224.0f, bitsf(0x3A800000u)};
    check_decode(TBX_DT_F8_E4M3FNUZ, f8, 4, 4, wfz);
    float w5fz[4] = {0.25f, 49152.0f, -49152.0f, bitsf(0x37000000u)};
    check_decode(TBX_DT_F8_E5M2FNUZ, f8, 4, 4, w5fz);
    const uint8_t e8[] = {127, 128, 0xFF, 0};
    float we8[4] = {1.0f, 2.0f, bitsf(0x7FC00000u), bitsf(0x00400000u)};
    check_decode(TBX_DT_F8_E8M0, e8, 4, 4, we8);
}

TBX_TEST(decode_sub_byte_floats) {
    /* f4: low nibble first; 5 elements (odd) in 3 bytes */
    const uint8_t f4[] = {0x72, 0xF9, 0x05};
    float w4[5] = {1.0f, 6.0f, -0.5f, -6.0f, 3.0f};
    check_decode(TBX_DT_F4_E2M1, f4, 3, 5, w4);
    /* f6: continuous LSB-first 6-bit stream; 5 elements = 30 bits in 4 bytes */
    uint8_t codes[5] = {0x1F, 0x08, 0x21, 0x3F, 0x00};
    uint8_t s6[4] = {0};
    for (unsigned k = 0; k < 5; k++)
        for (unsigned i = 0; i < 6; i++)
            if (codes[k] >> i & 1) s6[(6 * k + i) / 8] |= (uint8_t)(1u << ((6 * k + i) % 8));
    float w23[5] = {7.5f, 1.0f, -0.125f, -7.5f, 0.0f};
    check_decode(TBX_DT_F6_E2M3, s6, 4, 5, w23);
    float w32[5] = {28.0f, 0.5f, -0.0625f, -28.0f, 0.0f};
    check_decode(TBX_DT_F6_E3M2, s6, 4, 5, w32);
    /* every f6/f4 code through decode matches the scalar helper */
    uint8_t all4[8];
    float want[16];
    for (unsigned c = 0; c < 16; c++) want[c] = tbx_f4_e2m1_to_f32((uint8_t)c);
    for (unsigned i = 0; i < 8; i++) all4[i] = (uint8_t)((2 * i) | ((2 * i + 1) << 4));
    check_decode(TBX_DT_F4_E2M1, all4, 8, 16, want);
}

TBX_TEST(decode_integers) {
    const uint8_t i8[] = {0x00, 0x7F, 0x80, 0xFF};
    float wi8[4] = {0, 127, -128, -1};
    check_decode(TBX_DT_I8, i8, 4, 4, wi8);
    float wu8[4] = {0, 127, 128, 255};
    check_decode(TBX_DT_U8, i8, 4, 4, wu8);
    const uint8_t x16[] = {0x01, 0x00, 0x00, 0x80, 0xFF, 0xFF};
    float wi16[3] = {1, -32768, -1}, wu16[3] = {1, 32768, 65535};
    check_decode(TBX_DT_I16, x16, 6, 3, wi16);
    check_decode(TBX_DT_U16, x16, 6, 3, wu16);
    const uint8_t x32[] = {0xFF, 0xFF, 0xFF, 0x7F, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x80};
    float wi32[3] = {2147483648.0f, 16777216.0f, -2147483648.0f};   /* 2^31-1 rounds to 2^31 */
    float wu32[3] = {2147483648.0f, 16777216.0f, 2147483648.0f};
    check_decode(TBX_DT_I32, x32, 12, 3, wi32);
    check_decode(TBX_DT_U32, x32, 12, 3, wu32);
    /* 2^24 + 1 -> tie -> 2^24 (even); 2^24 + 3 -> 2^24 + 4 */
    const uint8_t x32b[] = {0x01, 0x00, 0x00, 0x01, 0x03, 0x00, 0x00, 0x01};
    float wtie[2] = {16777216.0f, 16777220.0f};
    check_decode(TBX_DT_I32, x32b, 8, 2, wtie);
    uint8_t x64[24];
    uint64_t v64[3] = {UINT64_MAX, (uint64_t)INT64_MIN, 12345};
    for (int i = 0; i < 3; i++) for (int k = 0; k < 8; k++) x64[8 * i + k] = (uint8_t)(v64[i] >> (8 * k));
    float wi64[3] = {-1.0f, -9223372036854775808.0f, 12345.0f};
    float wu64[3] = {18446744073709551616.0f, 9223372036854775808.0f, 12345.0f};
    check_decode(TBX_DT_I64, x64, 24, 3, wi64);
    check_decode(TBX_DT_U64, x64, 24, 3, wu64);
    /* bool: 0 -> 0, any other byte -> 1; bitset: the byte's value */
    const uint8_t bo[] = {0, 1, 2, 0xFF};
    float wbool[4] = {0, 1, 1, 1}, wbits[4] = {0, 1, 2, 255};
    check_decode(TBX_DT_BOOL, bo, 4, 4, wbool);
    check_decode(TBX_DT_BITSET, bo, 4, 4, wbits);
}

TBX_TEST(decode_packed_integers) {
    /* i4/u4: 7 elements (odd) in 4 bytes, low nibble first */
    const uint8_t n4[] = {0x81, 0xF7, 0x30, 0x0A};
    float wi4[7] = {1, -8, 7, -1, 0, 3, -6}, wu4[7] = {1, 8, 7, 15, 0, 3, 10};
    check_decode(TBX_DT_I4, n4, 4, 7, wi4);
    check_decode(TBX_DT_U4, n4, 4, 7, wu4);
    /* i2/u2/t2: 5 elements in 2 bytes; 0b11100100 = codes 0,1,2,3 */
    const uint8_t n2[] = {0xE4, 0x01};
    float wi2[5] = {0, 1, -2, -1, 1}, wu2[5] = {0, 1, 2, 3, 1}, wt2[5] = {0, 1, -2, -1, 1};
    check_decode(TBX_DT_I2, n2, 2, 5, wi2);
    check_decode(TBX_DT_U2, n2, 2, 5, wu2);
    check_decode(TBX_DT_T2, n2, 2, 5, wt2);
    /* i1 (set bit = -1), u1, t1 (0 -> -1, 1 -> +1): 11 elements in 2 bytes */
    const uint8_t n1[] = {0xA5, 0x06};
    float wi1[11] = {-1, 0, -1, 0, 0, -1, 0, -1, 0, -1, -1};
    float wu1[11] = {1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 1};
    float wt1[11] = {1, -1, 1, -1, -1, 1, -1, 1, -1, 1, 1};
    check_decode(TBX_DT_I1, n1, 2, 11, wi1);
    check_decode(TBX_DT_U1, n1, 2, 11, wu1);
    check_decode(TBX_DT_T1, n1, 2, 11, wt1);
    /* a packed scalar occupies one byte */
    float one[1] = {-1};
    check_decode(TBX_DT_T1, n1 + 1, 1, 1, one);
}

TBX_TEST(decode_edge_cases) {
    float out[4] = {0};
    const uint8_t b[32] = {0};
    CHECK_EQ(tbx_decode_f32(TBX_DT_C64, b, 32, 2, out), TBX_E_UNSUPPORTED);
    CHECK_EQ(tbx_decode_f32(TBX_DT_C128, b, 32, 1, out), TBX_E_UNSUPPORTED);
    /* MCF's shaped dtypes: sized and decoded by the driver (whole tensors), not here */
    CHECK_EQ(tbx_decode_f32(TBX_DT_MCF_Q8, b, 32, 1, out), TBX_E_UNSUPPORTED);
    CHECK_EQ(tbx_decode_f32(TBX_DT_INVALID, b, 32, 1, out), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_decode_f32((tbx_dtype)17, b, 32, 1, out), TBX_E_INVALID_ARG);
    /* block types follow the dequantizer registry */
    for (int dt = TBX_DT_Q4_0; dt <= TBX_DT_Q2_0; dt++) {
        tbx_status st = tbx_decode_f32((tbx_dtype)dt, b, 0, 0, out);
        if (tbx_dequant_for((tbx_dtype)dt)) CHECK_OK(st);
        else CHECK_EQ(st, TBX_E_UNSUPPORTED);
    }
    /* zero elements need no bytes and no buffers */
    CHECK_OK(tbx_decode_f32(TBX_DT_F32, NULL, 0, 0, NULL));
    CHECK_OK(tbx_decode_f32(TBX_DT_I4, NULL, 0, 0, NULL));
    CHECK_EQ(tbx_decode_f32(TBX_DT_F32, NULL, 8, 2, out), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_decode_f32(TBX_DT_F32, b, 7, 2, out), TBX_E_TRUNCATED);
    CHECK_EQ(tbx_decode_f32(TBX_DT_F6_E2M3, b, 3, 5, out), TBX_E_TRUNCATED);
    CHECK_OK(tbx_decode_f32(TBX_DT_F6_E2M3, b, 3, 4, out));
    /* sizes whose byte count overflows */
    CHECK_EQ(tbx_decode_f32(TBX_DT_F64, b, 32, UINT64_MAX / 4, out), TBX_E_OVERFLOW);
}

/* ------------------------------------------------------------------------------------------ */
/* bitstream pack/unpack                                                                       */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(pack_bits_vectors) {
    uint8_t out[8];
    const int8_t k3[8] = {1, -1, 2, -3, 0, 3, -2, 1};
    memset(out, 0xEE, sizeof out);
    tbx_pack_bits(out, k3, 8, 3);
    CHECK_EQ(out[0], 0xB9); CHECK_EQ(out[1], 0x8A); CHECK_EQ(out[2], 0x39); CHECK_EQ(out[3], 0xEE);
    const int8_t k6[4] = {1, -1, 31, -31};
    tbx_pack_bits(out, k6, 4, 6);
    CHECK_EQ(out[0], 0xC1); CHECK_EQ(out[1], 0xFF); CHECK_EQ(out[2], 0x85);
    const int8_t k2[4] = {1, -1, 0, 1};
    tbx_pack_bits(out, k2, 4, 2);
    CHECK_EQ(out[0], 0x4D);
    const int8_t k4[2] = {3, -7};
    tbx_pack_bits(out, k4, 2, 4);
    CHECK_EQ(out[0], 0x93);
    /* a partial last byte has zero high bits */
    memset(out, 0xEE, sizeof out);
    const int8_t m1[3] = {-1, -1, -1};
    tbx_pack_bits(out, m1, 3, 1);
    CHECK_EQ(out[0], 0x07); CHECK_EQ(out[1], 0xEE);
    tbx_pack_bits(out, m1, 3, 3);
    CHECK_EQ(out[0], 0xFF); CHECK_EQ(out[1], 0x01); CHECK_EQ(out[2], 0xEE);
}

TBX_TEST(pack_unpack_roundtrip_all_widths) {
    int8_t vals[101], back[101];
    uint8_t buf[128];
    for (unsigned bits = 1; bits <= 8; bits++) {
        int bad = 0;
        for (int pass = 0; pass < 200; pass++) {
            uint64_t n = 1 + rnd() % 101;
            for (uint64_t i = 0; i < n; i++) {
                int lo = -(1 << (bits - 1)), span = 1 << bits;
                vals[i] = (int8_t)(lo + (int)(rnd() % (uint64_t)span));
            }
            memset(buf, 0xCC, sizeof buf);
            tbx_pack_bits(buf, vals, n, bits);
            uint64_t nbytes = (n * bits + 7) / 8;
            if (buf[nbytes] != 0xCC) bad++;
            tbx_unpack_bits(back, buf, n, bits, true);
            if (memcmp(vals, back, (size_t)n) != 0) bad++;
            /* unsigned view: the same codes, zero-extended */
            tbx_unpack_bits(back, buf, n, bits, false);
            for (uint64_t i = 0; i < n; i++)
                if ((uint8_t)back[i] != ((uint8_t)vals[i] & ((1u << bits) - 1))) { bad++; break; }
            /* and tbx_decode_f32 agrees for the OINF widths */
            tbx_dtype dt = bits == 4 ? TBX_DT_I4 : bits == 2 ? TBX_DT_I2 : bits == 1 ? TBX_DT_I1
                                                                          : TBX_DT_INVALID;
            if (dt != TBX_DT_INVALID) {
                float f[101];
                if (tbx_decode_f32(dt, buf, (size_t)nbytes, n, f) != TBX_OK) bad++;
                for (uint64_t i = 0; i < n; i++) if (f[i] != (float)vals[i]) { bad++; break; }
            }
        }
        CHECK_EQ(bad, 0);
    }
}

TBX_TEST_MAIN()
