/*
 * ggml_quant.c - quantizers of the ggml block types.
 *
 * 1. q8_0, q4_0, q4_1, q5_0, q5_1, tq1_0, tq2_0, mxfp4: the arithmetic of ggml's
 *    quantize_row_*_ref (which gguf-py's numpy code reproduces), so the bytes are identical to
 *    gguf.quants.quantize for finite input. Conversions to integers clamp first, so non-finite
 *    input is defined behaviour (its bytes are unspecified); where ggml's own conversion of a
 *    finite input's Inf or negative intermediate gives x86's result (blocks of tiny values:
 *    every legacy type, tq1_0, tq2_0, mxfp4), that result is written (ggml_quantize_chunk's
 *    bytes). q8_0, q4_0, q4_1, q5_0, q5_1, mxfp4, tq1_0 and tq2_0 have AVX2 versions
 *    (ggml_simd_avx2.c) that write the same bytes for every input.
 * 2. ggml's reference K-quant algorithm (quantize_row_q{2..6}_K_ref, no importance weights),
 *    re-implemented here: the default of every conversion (tbx_ggml_quant_ref_for, through
 *    tbx_ggml_quant_default_for, which takes its AVX2 kernels, ggml_simd_avx2_kref.c, when the
 *    CPU has AVX2: the same bytes), the same bytes as ggml_quantize_chunk, and the baseline
 *    tensorbox's encoder is measured against.
 * 3. tensorbox's K-quant encoder (asked for explicitly: GGUF's write option
 *    quant_method=search; tbx_ggml_quant_for / tbx_ggml_quant_search_for). Per super-block:
 *      a. per sub-block, least-squares fits (scale, and offset <= 0 for q2_K/q4_K/q5_K) for a
 *         few candidate level assignments plus one Lloyd step (affine), keeping the smallest
 *         squared error: the reconstruction error itself is minimised, unweighted;
 *      b. super-block scale(s) from the largest sub-block scale/offset, f16-rounded (saturated
 *         at the largest finite half), sub-block scales quantized against them;
 *      c. two rounds of: levels for the quantized scales, then a least-squares refit of the
 *         super-block scale(s) and of the sub-block targets; the round with the smaller
 *         decoded error is kept;
 *      d. local search: each quantized sub-block scale (and min) moved by one step if that
 *         lowers the decoded error; final levels.
 *    The per-sub-block work runs on 8 sub-blocks at a time ("lanes", tbx_kq_ops in ggml.h):
 *    the scalar kernels below and the AVX2 ones (ggml_simd_avx2.c) perform the same float
 *    operations lane by lane in the same order, so every CPU path writes the same bytes.
 */
#include "ggml.h"
#include "range.h"
#include "core.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define QK_K 256

static inline uint16_t f2h(float f) { return tbx_f32_to_f16(f); }
static inline float h2f_bits(uint16_t h) { return tbx_f16_to_f32(h); }
/* f16 rounding of a value (round to nearest even), as the decoder will see it. The common case
 * (a normal half) directly on the f32 bits; the rest through the library conversion. */
static inline float f16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a >= 0x38800000u && a < 0x477FF000u) { /* [2^-14, 65520): rounds to a normal half */
        const uint32_t r = ((a + 0x0FFFu + ((a >> 13) & 1u)) & 0xFFFFE000u) | (u & 0x80000000u);
        float g;
        memcpy(&g, &r, 4);
        return g;
    }
    return tbx_f16_to_f32(tbx_f32_to_f16(f));
}

/* Float -> integer in [lo, hi] with C semantics of truncation for in-range finite values and no
 * undefined behaviour otherwise (NaN -> lo). */
static inline int trunc_clamp(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)v;
}
static inline int round_clamp(float v, int lo, int hi) { /* roundf: half away from zero */
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)roundf(v);
}

/* ========================================================================================== */
/* 1. Legacy types (bit-identical with gguf-py / ggml's reference)                            */
/* ========================================================================================== */
static void q_q8_0(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        tbx_st16(b, f2h(d));
        /* a block so small (max |x| below ~3.7e-37) that 1/d overflows: ggml's x * id is +-Inf
         * or NaN, which its float -> int8 conversion turns into 0 on x86 (ggml_quantize_chunk's
         * bytes, tests/python/test_ggml_quant_identical.py); the f16 d is 0 anyway */
        if (isinf(id)) {
            memset(b + 2, 0, 32);
            continue;
        }
        for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)round_clamp(x[j] * id, -128, 127);
    }
}

/* First element of largest magnitude (ggml: `if (amax < fabsf(v))`, numpy: argmax of abs). */
static inline float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static inline void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

static void q_q4_0(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 18) {
        const float d = signed_absmax(x, 32) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        tbx_st16(b, f2h(d));
        if (isinf(id)) { /* as q8_0: ggml's levels are its conversions of Inf/NaN, 0 on x86 */
            memset(b + 2, 0, 16);
            continue;
        }
        for (int j = 0; j < 16; j++) {
            const int q0 = trunc_clamp(x[j] * id + 8.5f, 0, 15);
            const int q1 = trunc_clamp(x[j + 16] * id + 8.5f, 0, 15);
            b[2 + j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q_q4_1(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 20) {
        float mn, mx;
        min_max(x, 32, &mn, &mx);
        const float d = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        tbx_st16(b, f2h(d));
        tbx_st16(b + 2, f2h(mn));
        if (isinf(id)) {
            memset(b + 4, 0, 16);
            continue;
        }
        for (int j = 0; j < 16; j++) {
            const int q0 = trunc_clamp((x[j] - mn) * id + 0.5f, 0, 15);
            const int q1 = trunc_clamp((x[j + 16] - mn) * id + 0.5f, 0, 15);
            b[4 + j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q_q5_0(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    int q[32];
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 22) {
        const float d = signed_absmax(x, 32) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        tbx_st16(b, f2h(d));
        if (isinf(id)) {
            memset(b + 2, 0, 20);
            continue;
        }
        for (int j = 0; j < 32; j++) q[j] = trunc_clamp(x[j] * id + 16.5f, 0, 31);
        tbx_gq_pack_q5(b + 2, b + 6, q);
    }
}

static void q_q5_1(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    int q[32];
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 24) {
        float mn, mx;
        min_max(x, 32, &mn, &mx);
        const float d = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        tbx_st16(b, f2h(d));
        tbx_st16(b + 2, f2h(mn));
        if (isinf(id)) {
            memset(b + 4, 0, 20);
            continue;
        }
        for (int j = 0; j < 32; j++) q[j] = trunc_clamp((x[j] - mn) * id + 0.5f, 0, 31);
        tbx_gq_pack_q5(b + 4, b + 8, q);
    }
}

static inline float absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    return amax;
}

/* ternary level 0, 1, 2 of x * id (lroundf(x * id) + 1) */
static inline int trit(float v) { return round_clamp(v, -1, 1) + 1; }

static void q_tq1_0(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, b += 54) {
        const float d = absmax(x, 256);
        /* 1/d overflowing (max |x| below ~2.9e-39): ggml's lroundf(+-Inf) + 1 is 1 on x86, the
         * zero trit, for every value (ggml_quantize_chunk's bytes) */
        const float id = d != 0.0f && !isinf(1.0f / d) ? 1.0f / d : 0.0f;
        tbx_st16(b + 52, f2h(d));
        /* bytes 0..31: 5 trits each from x[m + 32n]; bytes 32..47: from x[160 + m + 16n];
         * qh 0..3: 4 trits each from x[240 + j + 4m]; first trit most significant, then the
         * byte is scaled to 256/243 (ceiling) so the decoder can read trits off the top. */
        for (int m = 0; m < 32; m++) {
            unsigned q = 0;
            for (int n = 0; n < 5; n++) q = q * 3 + (unsigned)trit(x[m + 32 * n] * id);
            b[m] = (uint8_t)((q * 256 + 242) / 243);
        }
        for (int m = 0; m < 16; m++) {
            unsigned q = 0;
            for (int n = 0; n < 5; n++) q = q * 3 + (unsigned)trit(x[160 + m + 16 * n] * id);
            b[32 + m] = (uint8_t)((q * 256 + 242) / 243);
        }
        for (int j = 0; j < 4; j++) {
            unsigned q = 0;
            for (int m = 0; m < 4; m++) q = q * 3 + (unsigned)trit(x[240 + j + 4 * m] * id);
            q *= 3;
            b[48 + j] = (uint8_t)((q * 256 + 242) / 243);
        }
        x += 256;
    }
}

static void q_tq2_0(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 256, b += 66) {
        const float d = absmax(x, 256);
        /* 1/d overflowing (max |x| below ~2.9e-39): ggml's lroundf(+-Inf) + 1 is 1 on x86, the
         * zero trit, for every value (ggml_quantize_chunk's bytes) */
        const float id = d != 0.0f && !isinf(1.0f / d) ? 1.0f / d : 0.0f;
        tbx_st16(b + 64, f2h(d));
        for (int j = 0; j < 64; j += 32)
            for (int m = 0; m < 32; m++) {
                unsigned q = 0;
                for (int n = 0; n < 4; n++) q |= (unsigned)trit(x[4 * j + m + 32 * n] * id) << (2 * n);
                b[j + m] = (uint8_t)q;
            }
    }
}

static void q_mxfp4(const float *x, void *dst, uint64_t nb) {
    uint8_t *b = (uint8_t *)dst;
    for (uint64_t i = 0; i < nb; i++, x += 32, b += 17) {
        const float amax = absmax(x, 32);
        /* e = floor(log2(amax)) - 2 + 127 (the exponent of amax, exact from its bits) */
        uint8_t e = 0;
        if (amax > 0.0f) {
            const float l2 = floorf(log2f(amax)) - 2.0f + 127.0f;
            /* finite amax: l2 in -24..253; below 0 (max |x| < 2^-125) ggml's float -> uint8
             * conversion wraps on x86 (ggml_quantize_chunk's bytes): the same modulo 256. An
             * Inf amax (unspecified input) keeps 255. */
            e = l2 < 255.0f ? (uint8_t)(int)l2 : 255;
        }
        const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
        float d;
        memcpy(&d, &bits, 4);
        b[0] = e;
        for (int j = 0; j < 16; j++)
            b[1 + j] = (uint8_t)(tbx_gq_best_mxfp4(x[j], d) |
                                 (tbx_gq_best_mxfp4(x[j + 16], d) << 4));
    }
}

/* ========================================================================================== */
/* 2. ggml's reference K-quant algorithm (baseline)                                           */
/* ========================================================================================== */
#define REF_EPS 1e-15f

/* Affine fit of n values to levels 0..nmax (ggml make_qkx2_quants). Returns the scale; *mout
 * gets -min (>= 0). */
static float ref_qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *mout,
                      uint8_t *Laux, float rmin, float rdelta, int nstep, int use_mad) {
    float mn = x[0], mx = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (mn > 0) mn = 0;
    if (mx == mn) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *mout = -mn;
        return 0.0f;
    }
    float iscale = (float)nmax / (mx - mn), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        const int l = tbx_gq_nearest(iscale * (x[i] - mn));
        L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        float diff = scale * L[i] + mn - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (mx - mn);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = tbx_gq_nearest(iscale * (x[i] - mn));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur += w[i] * diff;
            }
            if (cur < best) {
                memcpy(L, Laux, (size_t)n);
                best = cur;
                scale = this_scale;
                mn = this_min;
            }
        }
    }
    *mout = -mn;
    return scale;
}

/* Symmetric fit to levels -nmax..nmax-1 with weights x^2 (ggml make_qx_quants, rmse_type 1).
 * L gets level + nmax. */
static float ref_qx(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < REF_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = tbx_gq_nearest(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = tbx_gq_nearest(iscale * x[i]);
            l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = tbx_gq_nearest(iscale * x[i]);
                l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
                L[i] = (int8_t)(nmax + l);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric fit with greedy level refinement (ggml make_q3_quants, do_rmse). L: level + nmax. */
static float ref_q3(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < REF_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = tbx_gq_nearest(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int nl = tbx_gq_nearest(x[i] * sl2 / slx);
                nl = nl < -nmax ? -nmax : nl > nmax - 1 ? nmax - 1 : nl;
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

static void ref_q2_K(const float *x, void *dst, uint64_t nb) {
    uint8_t *blk = (uint8_t *)dst, L[256], Laux[16];
    float w[16], mins[16], scales[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 84) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = ref_qkx2(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        uint8_t *sc = blk;
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) sc[j] = (uint8_t)tbx_gq_nearest(iscale * scales[j]);
            tbx_st16(blk + 80, f2h(max_scale / 15.0f));
        } else {
            memset(sc, 0, 16);
            tbx_st16(blk + 80, f2h(0.0f));
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++)
                sc[j] |= (uint8_t)((unsigned)tbx_gq_nearest(iscale * mins[j]) << 4);
            tbx_st16(blk + 82, f2h(max_min / 15.0f));
        } else {
            tbx_st16(blk + 82, f2h(0.0f));
        }
        const float dd = h2f_bits(tbx_ld16(blk + 80)), dm = h2f_bits(tbx_ld16(blk + 82));
        for (int j = 0; j < 16; j++) {
            const float d = dd * (sc[j] & 15);
            if (!d) continue;
            const float m = dm * (sc[j] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                int l = tbx_gq_nearest((x[16 * j + ii] + m) / d);
                L[16 * j + ii] = (uint8_t)(l < 0 ? 0 : l > 3 ? 3 : l);
            }
        }
        tbx_gq_pack_q2k_levels(blk + 16, L);
    }
}

static void ref_q3_K(const float *x, void *dst, uint64_t nb) {
    uint8_t *blk = (uint8_t *)dst;
    int8_t L[256];
    float scales[16];
    int ls[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 110) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = ref_q3(16, 4, x + 16 * j, L + 16 * j);
            const float s = fabsf(scales[j]);
            if (s > amax) {
                amax = s;
                max_scale = scales[j];
            }
        }
        float d = 0.0f;
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = (int8_t)tbx_gq_nearest(iscale * scales[j]);
                ls[j] = (l < -32 ? -32 : l > 31 ? 31 : l) + 32;
            }
            d = 1 / iscale;
        } else {
            for (int j = 0; j < 16; j++) ls[j] = 0; /* ggml leaves the scale bytes zero */
        }
        tbx_st16(blk + 108, f2h(d));
        const float dd = h2f_bits(tbx_ld16(blk + 108));
        uint8_t Lu[256];
        for (int j = 0; j < 256; j++) Lu[j] = (uint8_t)L[j];
        for (int j = 0; j < 16; j++) {
            const float dl = dd * (float)(ls[j] - 32);
            if (!dl) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = tbx_gq_nearest(x[16 * j + ii] / dl);
                Lu[16 * j + ii] = (uint8_t)((l < -4 ? -4 : l > 3 ? 3 : l) + 4);
            }
        }
        tbx_gq_pack_q3k(blk, ls, Lu);
    }
}

static void ref_q45_K(const float *x, void *dst, uint64_t nb, int nmax) {
    const int is5 = nmax == 31;
    const size_t bb = is5 ? 176 : 144;
    uint8_t *blk = (uint8_t *)dst, L[256], Laux[32];
    float w[32], mins[8], scales[8];
    int ls[8], lm[8];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += bb) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = is5 ? ref_qkx2(32, 31, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 0)
                            : ref_qkx2(32, 15, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20, 0);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        for (int j = 0; j < 8; j++) {
            const uint8_t a = (uint8_t)tbx_gq_nearest(inv_scale * scales[j]);
            const uint8_t c = (uint8_t)tbx_gq_nearest(inv_min * mins[j]);
            ls[j] = a > 63 ? 63 : a;
            lm[j] = c > 63 ? 63 : c;
        }
        tbx_gq_pack_q4k_scales(blk + 4, ls, lm);
        tbx_st16(blk, f2h(max_scale / 63.0f));
        tbx_st16(blk + 2, f2h(max_min / 63.0f));
        const float dd = h2f_bits(tbx_ld16(blk)), dm = h2f_bits(tbx_ld16(blk + 2));
        for (int j = 0; j < 8; j++) {
            const float d = dd * (float)ls[j];
            if (!d) continue;
            const float m = dm * (float)lm[j];
            for (int ii = 0; ii < 32; ii++) {
                const int l = tbx_gq_nearest((x[32 * j + ii] + m) / d);
                L[32 * j + ii] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
            }
        }
        if (is5)
            tbx_gq_pack_q5k_levels(blk + 16, blk + 48, L);
        else
            tbx_gq_pack_q4k_levels(blk + 16, L);
    }
}
static void ref_q4_K(const float *x, void *dst, uint64_t nb) { ref_q45_K(x, dst, nb, 15); }
static void ref_q5_K(const float *x, void *dst, uint64_t nb) { ref_q45_K(x, dst, nb, 31); }

static void ref_q6_K(const float *x, void *dst, uint64_t nb) {
    uint8_t *blk = (uint8_t *)dst;
    int8_t L[256];
    float scales[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 210) {
        float max_scale = 0, max_abs = 0;
        for (int ib = 0; ib < 16; ib++) {
            scales[ib] = ref_qx(16, 32, x + 16 * ib, L + 16 * ib);
            const float a = fabsf(scales[ib]);
            if (a > max_abs) {
                max_abs = a;
                max_scale = scales[ib];
            }
        }
        if (max_abs < REF_EPS) {
            memset(blk, 0, 210);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        tbx_st16(blk + 208, f2h(1 / iscale));
        int8_t *sc = (int8_t *)(blk + 192);
        for (int ib = 0; ib < 16; ib++) {
            const int l = tbx_gq_nearest(iscale * scales[ib]);
            sc[ib] = (int8_t)(l > 127 ? 127 : l < -128 ? -128 : l);
        }
        const float dd = h2f_bits(tbx_ld16(blk + 208));
        uint8_t Lu[256];
        for (int j = 0; j < 256; j++) Lu[j] = (uint8_t)L[j];
        for (int j = 0; j < 16; j++) {
            const float d = dd * (float)sc[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = tbx_gq_nearest(x[16 * j + ii] / d);
                Lu[16 * j + ii] = (uint8_t)((l < -32 ? -32 : l > 31 ? 31 : l) + 32);
            }
        }
        tbx_gq_pack_q6k(blk, blk + 128, Lu);
    }
}

/* ========================================================================================== */
/* 3. tensorbox's K-quant encoder                                                              */
/* ========================================================================================== */
/* ---- scalar lane kernels (the AVX2 ones in ggml_simd_avx2.c mirror them op for op) -------- */
/* min/max with the semantics of the SSE instructions (second operand when unordered). */
static inline float mn_ps(float a, float b) { return a < b ? a : b; }
static inline float mx_ps(float a, float b) { return a > b ? a : b; }
/* nearest integer (ties to even) through the adder, as a float; exact for |v| < 2^22 */
static inline float rnd_ps(float v) { return (v + 12582912.0f) - 12582912.0f; }
/* 1/d, or 0 for d == 0 */
static inline float recip0(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }
/* round(v * inv) clamped to [lo, hi] */
static inline float qlane(float v, float inv, float lo, float hi) {
    return mx_ps(mn_ps(rnd_ps(v * inv), hi), lo);
}

static void transpose_scalar(const float *x, int n, float *xt) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++) xt[8 * i + j] = x[j * n + i];
}

static void untranspose_scalar(const uint8_t *Lt, int n, int ngroups, uint8_t add, uint8_t *L) {
    for (int k = 0; k < 8 * ngroups; k++) {
        const uint8_t *src = Lt + 8 * n * (k >> 3) + (k & 7);
        for (int i = 0; i < n; i++) L[k * n + i] = (uint8_t)(src[8 * i] + add);
    }
}

/* Least-squares (s, b) of one affine candidate from its sums and its squared error; returns
 * whether it is usable (D > 0 and s > 0). */
static inline int affine_fit(float fn, float sx, float sx2, float sl, float sl2, float sxl,
                             float *s_out, float *b_out, float *e_out) {
    const float D = fn * sl2 - sl * sl;
    float s = (fn * sxl - sx * sl) / D;
    float b = (sl2 * sx - sl * sxl) / D;
    if (b > 0.0f) {
        b = 0.0f;
        s = sxl / sl2;
    }
    const float t1 = 2.0f * s * sxl, t2 = 2.0f * b * sx, t3 = s * s * sl2;
    const float t4 = 2.0f * s * b * sl, t5 = fn * b * b;
    *s_out = s;
    *b_out = b;
    *e_out = sx2 - t1 - t2 + t3 + t4 + t5;
    return D > 0.0f && s > 0.0f;
}

static void search_affine_scalar(const float *xt, int n, float nmax, const float *delta, int nd,
                                 int nlloyd, float *s_out, float *b_out, float *sx_out) {
    float mn[8], mx[8], sx[8], sx2[8], rng[8], bs[8], bb[8], be[8], u[8 * 32];
    for (int j = 0; j < 8; j++) {
        mn[j] = mx[j] = xt[j];
        sx[j] = sx2[j] = 0.0f;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++) {
            const float v = xt[8 * i + j];
            mn[j] = mn_ps(v, mn[j]);
            mx[j] = mx_ps(v, mx[j]);
            sx[j] = sx[j] + v;
            sx2[j] = sx2[j] + v * v;
        }
    for (int j = 0; j < 8; j++) {
        mn[j] = mn_ps(mn[j], 0.0f);
        rng[j] = mx[j] - mn[j];
        bs[j] = 0.0f;
        bb[j] = mn[j];
        be[j] = FLT_MAX;
    }
    /* u = x - min: levels l = round(iscale * (u + c)), c = 0 for the candidates and min - b for
     * the Lloyd steps; sum x*l = sum u*l + min * sum l */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++) u[8 * i + j] = xt[8 * i + j] - mn[j];
    const float fn = (float)n;
    for (int k = 0; k < nd + nlloyd; k++) {
        float is[8], c[8], sl[8], sl2[8], sul[8];
        for (int j = 0; j < 8; j++) {
            if (k < nd) {
                is[j] = rng[j] > 0.0f ? (nmax + delta[k]) / rng[j] : 0.0f;
                c[j] = 0.0f;
            } else {
                is[j] = bs[j] > 0.0f ? 1.0f / bs[j] : 0.0f;
                c[j] = mn[j] - bb[j];
            }
            sl[j] = sl2[j] = sul[j] = 0.0f;
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < 8; j++) {
                const float w = u[8 * i + j];
                float l = rnd_ps(is[j] * (k < nd ? w : w + c[j]));
                l = mx_ps(mn_ps(l, nmax), 0.0f);
                sl[j] = sl[j] + l;
                sl2[j] = sl2[j] + l * l;
                sul[j] = sul[j] + w * l;
            }
        for (int j = 0; j < 8; j++) {
            float s, b, e;
            const float sxl = sul[j] + mn[j] * sl[j];
            if (affine_fit(fn, sx[j], sx2[j], sl[j], sl2[j], sxl, &s, &b, &e) && e < be[j]) {
                be[j] = e;
                bs[j] = s;
                bb[j] = b;
            }
        }
    }
    for (int j = 0; j < 8; j++) {
        s_out[j] = bs[j];
        b_out[j] = bb[j];
        sx_out[j] = sx[j];
    }
}

static void search_symm_scalar(const float *xt, int n, float nmax, const float *delta, int nd,
                               float *s_out) {
    float am[8], sm[8], bn[8], bd[8], bs[8];
    for (int j = 0; j < 8; j++) am[j] = sm[j] = 0.0f;
    /* the first value of largest magnitude, with its sign */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++) {
            const float v = xt[8 * i + j], a = fabsf(v);
            if (a > am[j]) {
                am[j] = a;
                sm[j] = v;
            }
        }
    for (int j = 0; j < 8; j++) {
        bn[j] = 0.0f; /* best sxl^2 */
        bd[j] = 1.0f; /* best sl2 */
        bs[j] = 0.0f;
    }
    for (int k = 0; k < nd; k++) {
        float is[8], sl2[8], sxl[8];
        for (int j = 0; j < 8; j++) {
            is[j] = am[j] > 0.0f ? -(nmax + delta[k]) / sm[j] : 0.0f;
            sl2[j] = sxl[j] = 0.0f;
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < 8; j++) {
                const float v = xt[8 * i + j];
                float l = rnd_ps(is[j] * v);
                l = mx_ps(mn_ps(l, nmax - 1.0f), -nmax);
                sl2[j] = sl2[j] + l * l;
                sxl[j] = sxl[j] + v * l;
            }
        for (int j = 0; j < 8; j++) {
            /* maximise sxl^2 / sl2 (the error is sum x^2 - sxl^2 / sl2) */
            const float num = sxl[j] * sxl[j];
            if (sl2[j] > 0.0f && num * bd[j] > bn[j] * sl2[j]) {
                bn[j] = num;
                bd[j] = sl2[j];
                bs[j] = sxl[j] / sl2[j];
            }
        }
    }
    for (int j = 0; j < 8; j++) s_out[j] = bs[j];
}

static void requant_affine_scalar(const float *xt, int n, const tbx_kq_round *r, float *a,
                                  float *q, float *err, float *sl, float *sl2, float *sxl,
                                  float *ts2, float *tm2) {
    float d1[8], m1[8], id1[8];
    const float fn = (float)n;
    for (int j = 0; j < 8; j++) {
        a[j] = qlane(r->ts[j], r->id, 0.0f, r->smax);
        q[j] = qlane(r->tm[j], r->idm, 0.0f, r->smax);
        d1[j] = r->d * a[j];
        m1[j] = r->dm * q[j];
        id1[j] = recip0(d1[j]);
        err[j] = sl[j] = sl2[j] = sxl[j] = 0.0f;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++) {
            const float v = xt[8 * i + j];
            float l = rnd_ps((v + m1[j]) * id1[j]);
            l = mx_ps(mn_ps(l, r->nmax), 0.0f);
            const float e = (d1[j] * l - m1[j]) - v;
            err[j] = err[j] + e * e;
            sl[j] = sl[j] + l;
            sl2[j] = sl2[j] + l * l;
            sxl[j] = sxl[j] + v * l;
        }
    /* least-squares scale >= 0 and offset <= 0 for these levels */
    for (int j = 0; j < 8; j++) {
        const float D = fn * sl2[j] - sl[j] * sl[j];
        const float iD = recip0(D > 0.0f ? D : 0.0f);
        const float s2 = (fn * sxl[j] - r->sx[j] * sl[j]) * iD;
        const float b2 = (sl2[j] * r->sx[j] - sl[j] * sxl[j]) * iD;
        const float s1 = sxl[j] * recip0(sl2[j] > 0.0f ? sl2[j] : 0.0f); /* offset 0 */
        const int two = D > 0.0f && !(b2 > 0.0f);
        const float sk = two ? s2 : s1;
        ts2[j] = sk > 0.0f ? sk : 0.0f;
        tm2[j] = two ? -b2 : 0.0f;
    }
}

static void requant_symm_scalar(const float *xt, int n, const tbx_kq_round *r, float *a,
                                float *err, float *sl2, float *sxl, float *ts2) {
    float d1[8], id1[8];
    for (int j = 0; j < 8; j++) {
        a[j] = qlane(r->ts[j], r->id, -r->smax, r->smax - 1.0f);
        d1[j] = r->d * a[j];
        id1[j] = recip0(d1[j]);
        err[j] = sl2[j] = sxl[j] = 0.0f;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++) {
            const float v = xt[8 * i + j];
            float l = rnd_ps(v * id1[j]);
            l = mx_ps(mn_ps(l, r->nmax - 1.0f), -r->nmax);
            const float e = d1[j] * l - v;
            err[j] = err[j] + e * e;
            sl2[j] = sl2[j] + l * l;
            sxl[j] = sxl[j] + v * l;
        }
    for (int j = 0; j < 8; j++) ts2[j] = sxl[j] * recip0(sl2[j] > 0.0f ? sl2[j] : 0.0f);
}

#define KQ_NLOCAL 5
static const float kLocalDa[KQ_NLOCAL] = {0.0f, -1.0f, 1.0f, 0.0f, 0.0f};
static const float kLocalDq[KQ_NLOCAL] = {0.0f, 0.0f, 0.0f, -1.0f, 1.0f};

static void local_affine_scalar(const float *xt, int n, float nmax, float smax, float d, float dm,
                                const float *e0, float *a, float *q, uint8_t *Lt) {
    float ca[KQ_NLOCAL][8], cq[KQ_NLOCAL][8], d1[KQ_NLOCAL][8], m1[KQ_NLOCAL][8];
    float id1[KQ_NLOCAL][8], e[KQ_NLOCAL][8];
    for (int c = 0; c < KQ_NLOCAL; c++)
        for (int j = 0; j < 8; j++) {
            ca[c][j] = mx_ps(mn_ps(a[j] + kLocalDa[c], smax), 0.0f);
            cq[c][j] = mx_ps(mn_ps(q[j] + kLocalDq[c], smax), 0.0f);
            d1[c][j] = d * ca[c][j];
            m1[c][j] = dm * cq[c][j];
            id1[c][j] = recip0(d1[c][j]);
            e[c][j] = c == 0 ? e0[j] : 0.0f;
        }
    for (int c = 1; c < KQ_NLOCAL; c++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < 8; j++) {
                const float v = xt[8 * i + j];
                float l = rnd_ps((v + m1[c][j]) * id1[c][j]);
                l = mx_ps(mn_ps(l, nmax), 0.0f);
                const float t = (d1[c][j] * l - m1[c][j]) - v;
                e[c][j] = e[c][j] + t * t;
            }
    float be[8], bm1[8], bid1[8];
    for (int j = 0; j < 8; j++) {
        be[j] = e[0][j];
        a[j] = ca[0][j];
        q[j] = cq[0][j];
        bm1[j] = m1[0][j];
        bid1[j] = id1[0][j];
    }
    for (int c = 1; c < KQ_NLOCAL; c++)
        for (int j = 0; j < 8; j++)
            if (e[c][j] < be[j]) {
                be[j] = e[c][j];
                a[j] = ca[c][j];
                q[j] = cq[c][j];
                bm1[j] = m1[c][j];
                bid1[j] = id1[c][j];
            }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++) {
            float l = rnd_ps((xt[8 * i + j] + bm1[j]) * bid1[j]);
            l = mx_ps(mn_ps(l, nmax), 0.0f);
            Lt[8 * i + j] = (uint8_t)(int)l;
        }
}

static void local_symm_scalar(const float *xt, int n, float nmax, float smax, float d,
                              const float *e0, float *a, int8_t *Lt) {
    static const float da[3] = {0.0f, -1.0f, 1.0f};
    float ca[3][8], d1[3][8], id1[3][8], e[3][8];
    for (int c = 0; c < 3; c++)
        for (int j = 0; j < 8; j++) {
            ca[c][j] = mx_ps(mn_ps(a[j] + da[c], smax - 1.0f), -smax);
            d1[c][j] = d * ca[c][j];
            id1[c][j] = recip0(d1[c][j]);
            e[c][j] = c == 0 ? e0[j] : 0.0f;
        }
    for (int c = 1; c < 3; c++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < 8; j++) {
                const float v = xt[8 * i + j];
                float l = rnd_ps(v * id1[c][j]);
                l = mx_ps(mn_ps(l, nmax - 1.0f), -nmax);
                const float t = d1[c][j] * l - v;
                e[c][j] = e[c][j] + t * t;
            }
    float be[8], bid1[8];
    for (int j = 0; j < 8; j++) {
        be[j] = e[0][j];
        a[j] = ca[0][j];
        bid1[j] = id1[0][j];
    }
    for (int c = 1; c < 3; c++)
        for (int j = 0; j < 8; j++)
            if (e[c][j] < be[j]) {
                be[j] = e[c][j];
                a[j] = ca[c][j];
                bid1[j] = id1[c][j];
            }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++) {
            float l = rnd_ps(xt[8 * i + j] * bid1[j]);
            l = mx_ps(mn_ps(l, nmax - 1.0f), -nmax);
            Lt[8 * i + j] = (int8_t)(int)l;
        }
}

static const tbx_kq_ops kq_ops_scalar = {
    transpose_scalar,      untranspose_scalar,  search_affine_scalar, search_symm_scalar,
    requant_affine_scalar, requant_symm_scalar, local_affine_scalar,  local_symm_scalar,
};

/* ---- the encoder (scalar code shared by every path) --------------------------------------- */
/* Lane layout: group g of 8 sub-blocks of n values, Lt[8*n*g + 8*i + j] is the level of value i
 * of sub-block 8g + j. */

#define F16_MAX 65504.0f

/* Candidate level assignments: iscale = (nmax + delta) / range (affine) or
 * -(nmax + delta) / (signed largest value) (symmetric). Chosen by measurement against the
 * reference encoder (tests/unit/test_ggml_quant.c, bench/bench_ggml_quant.c). */
static const float kDeltaQ2[] = {-0.5f, -0.3f, -0.1f, 0.0f, 0.1f, 0.3f, 0.5f, 0.7f, 0.9f};
static const float kDeltaQ3[] = {-1.0f, -0.7f, -0.4f, -0.2f, 0.0f, 0.2f, 0.4f, 0.7f, 1.0f};
static const float kDeltaQ4[] = {-1.0f, -0.6f, -0.2f, 0.2f, 0.6f, 1.0f};
static const float kDeltaQ5[] = {-0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f};
static const float kDeltaQ6[] = {-4.0f, -3.0f, -2.0f, -1.0f, 0.0f, 1.0f, 2.0f};

#define KQ_ITERS 2 /* requantization/refit rounds before the local search */

typedef struct kq_affine_cfg {
    int n;       /* values per sub-block (16, 32) */
    int ngroups; /* groups of 8 sub-blocks (2, 1) */
    int nmax;    /* top level */
    int smax;    /* top quantized sub-scale (15, 63) */
    const float *delta;
    int ndelta;
} kq_affine_cfg;

/* Affine K-quant of one super-block: d, dmin (f16 bits), ls/lm (quantized sub-block scales and
 * mins), L (levels, natural element order). */
static void kq_affine_block(const tbx_kq_ops *ops, const kq_affine_cfg *c, const float *x,
                            uint16_t *dh_out, uint16_t *mh_out, int *ls, int *lm, uint8_t *L) {
    const int n = c->n, nsub = 8 * c->ngroups;
    const float smax = (float)c->smax;
    float xt[256], ts[16], tm[16], sxf[16];
    /* a. per-sub-block fits */
    for (int g = 0; g < c->ngroups; g++) {
        float *xg = xt + 8 * n * g, b[8];
        ops->transpose(x + 8 * n * g, n, xg);
        ops->search_affine(xg, n, (float)c->nmax, c->delta, c->ndelta, 1, ts + 8 * g, b, sxf + 8 * g);
        for (int j = 0; j < 8; j++) tm[8 * g + j] = -b[j];
    }
    /* b. super-block scales (saturated to the largest f16 rather than overflowing to Inf) */
    float max_s = 0.0f, max_m = 0.0f;
    for (int k = 0; k < nsub; k++) {
        max_s = mx_ps(ts[k], max_s);
        max_m = mx_ps(tm[k], max_m);
    }
    float d = f16_round(fminf(max_s / smax, F16_MAX));
    float dm = f16_round(fminf(max_m / smax, F16_MAX));
    float cls[16], clm[16], bls[16], blm[16], be[16];
    uint8_t Lt[256];
    float best_err = FLT_MAX, bd = 0.0f, bdm = 0.0f;
    for (int it = 0; it < KQ_ITERS; it++) {
        /* c. levels for the quantized scales, with the sums of the refits */
        float e[16], sl[16], sl2[16], sxl[16], ts2[16], tm2[16], err = 0.0f;
        for (int g = 0; g < c->ngroups; g++) {
            const tbx_kq_round r = {d, dm, recip0(d), recip0(dm), (float)c->nmax, smax,
                                    ts + 8 * g, tm + 8 * g, sxf + 8 * g};
            ops->requant_affine(xt + 8 * n * g, n, &r, cls + 8 * g, clm + 8 * g, e + 8 * g,
                                sl + 8 * g, sl2 + 8 * g, sxl + 8 * g, ts2 + 8 * g, tm2 + 8 * g);
        }
        for (int k = 0; k < nsub; k++) err += e[k];
        /* the first round is always kept, so a NaN error (NaN/Inf input) still leaves defined
         * scales and levels */
        if (it == 0 || err < best_err) {
            best_err = err;
            bd = d;
            bdm = dm;
            memcpy(bls, cls, sizeof cls);
            memcpy(blm, clm, sizeof clm);
            memcpy(be, e, sizeof e);
        }
        if (it == KQ_ITERS - 1) break;
        /* d. least-squares refit of (d, dmin) for these levels and sub-scales: minimise
         * sum (x - d*a*l + dmin*q)^2, a = ls, q = lm of the element's sub-block */
        double A = 0, B = 0, C = 0, r1 = 0, r2 = 0;
        for (int k = 0; k < nsub; k++) {
            const double a = cls[k], q = clm[k];
            A += a * a * sl2[k];
            B += a * q * sl[k];
            C += q * q * n;
            r1 += a * sxl[k];
            r2 += q * sxf[k];
        }
        const double det = B * B - A * C;
        double nd = d, ndm = dm;
        if (det != 0 && isfinite(det)) {
            nd = (B * r2 - C * r1) / det;
            ndm = (A * r2 - B * r1) / det;
        }
        if (!(nd >= 0) || !(ndm >= 0) || !isfinite(nd) || !isfinite(ndm)) {
            nd = A > 0 ? (r1 + B * dm) / A : d; /* keep dmin, refit d alone */
            ndm = dm;
            if (!(nd >= 0) || !isfinite(nd)) nd = d;
        }
        /* the sub-block targets for the next round; the super-scales must still reach the
         * largest of them */
        float need_s = 0.0f, need_m = 0.0f;
        for (int k = 0; k < nsub; k++) {
            ts[k] = ts2[k];
            tm[k] = tm2[k];
            need_s = mx_ps(ts[k], need_s);
            need_m = mx_ps(tm[k], need_m);
        }
        if (nd * smax < need_s * 0.98) nd = need_s / smax;
        if (ndm * smax < need_m * 0.98) ndm = need_m / smax;
        d = f16_round(fminf((float)nd, F16_MAX));
        dm = f16_round(fminf((float)ndm, F16_MAX));
    }
    /* e. local search on the quantized sub-scales, then the final levels */
    for (int g = 0; g < c->ngroups; g++)
        ops->local_affine(xt + 8 * n * g, n, (float)c->nmax, smax, bd, bdm, be + 8 * g,
                          bls + 8 * g, blm + 8 * g, Lt + 8 * n * g);
    for (int k = 0; k < nsub; k++) {
        ls[k] = (int)bls[k];
        lm[k] = (int)blm[k];
    }
    *dh_out = f2h(bd);
    *mh_out = f2h(bdm);
    ops->untranspose(Lt, n, c->ngroups, 0, L);
}

/* A super-block holding a value beyond what the type can represent (tbx_quant_range: no finite
 * f16 scale reaches it), or Inf/NaN, is not this encoder's to fit: it gets ggml's reference
 * encoding, so its values decode exactly as ggml's own quantizer makes them (the conversion
 * reports such tensors). */
static bool kq_unrepresentable(const float *x, tbx_dtype dt) {
    const float r = tbx_quant_range(dt);
    bool out = false;
    for (int i = 0; i < 256; i++) out |= !(fabsf(x[i]) <= r);
    return out;
}

static const kq_affine_cfg cfg_q4 = {32, 1, 15, 63, kDeltaQ4, (int)(sizeof kDeltaQ4 / sizeof(float))};
static const kq_affine_cfg cfg_q5 = {32, 1, 31, 63, kDeltaQ5, (int)(sizeof kDeltaQ5 / sizeof(float))};
static const kq_affine_cfg cfg_q2 = {16, 2, 3, 15, kDeltaQ2, (int)(sizeof kDeltaQ2 / sizeof(float))};

static void kq_q4_K(const tbx_kq_ops *ops, const float *x, void *dst, uint64_t nb) {
    uint8_t *blk = (uint8_t *)dst, L[256];
    int ls[16], lm[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 144) {
        if (kq_unrepresentable(x, TBX_DT_Q4_K)) { ref_q4_K(x, blk, 1); continue; }
        uint16_t dh, mh;
        kq_affine_block(ops, &cfg_q4, x, &dh, &mh, ls, lm, L);
        tbx_st16(blk, dh);
        tbx_st16(blk + 2, mh);
        tbx_gq_pack_q4k_scales(blk + 4, ls, lm);
        tbx_gq_pack_q4k_levels(blk + 16, L);
    }
}

static void kq_q5_K(const tbx_kq_ops *ops, const float *x, void *dst, uint64_t nb) {
    uint8_t *blk = (uint8_t *)dst, L[256];
    int ls[16], lm[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 176) {
        if (kq_unrepresentable(x, TBX_DT_Q5_K)) { ref_q5_K(x, blk, 1); continue; }
        uint16_t dh, mh;
        kq_affine_block(ops, &cfg_q5, x, &dh, &mh, ls, lm, L);
        tbx_st16(blk, dh);
        tbx_st16(blk + 2, mh);
        tbx_gq_pack_q4k_scales(blk + 4, ls, lm);
        tbx_gq_pack_q5k_levels(blk + 16, blk + 48, L);
    }
}

static void kq_q2_K(const tbx_kq_ops *ops, const float *x, void *dst, uint64_t nb) {
    uint8_t *blk = (uint8_t *)dst, L[256];
    int ls[16], lm[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 84) {
        if (kq_unrepresentable(x, TBX_DT_Q2_K)) { ref_q2_K(x, blk, 1); continue; }
        uint16_t dh, mh;
        kq_affine_block(ops, &cfg_q2, x, &dh, &mh, ls, lm, L);
        for (int j = 0; j < 16; j++) blk[j] = (uint8_t)(ls[j] | (lm[j] << 4));
        tbx_gq_pack_q2k_levels(blk + 16, L);
        tbx_st16(blk + 80, dh);
        tbx_st16(blk + 82, mh);
    }
}

/* Symmetric K-quant (q3_K, q6_K): 16 sub-blocks of 16, levels -nmax..nmax-1, signed sub-scales
 * in [-smax, smax-1]. Out: d (f16 bits), ls (signed), L (level + nmax, natural order). */
static void kq_symm_block(const tbx_kq_ops *ops, int nmax_i, int smax_i, const float *delta,
                          int nd, const float *x, uint16_t *dh_out, int *ls, uint8_t *L) {
    const float nmax = (float)nmax_i, smax = (float)smax_i;
    float xt[256], ts[16];
    for (int g = 0; g < 2; g++) {
        ops->transpose(x + 128 * g, 16, xt + 128 * g);
        ops->search_symm(xt + 128 * g, 16, nmax, delta, nd, ts + 8 * g);
    }
    /* b. super-scale from the sub-scale of largest magnitude, mapped to -smax (the longer side) */
    float max_s = 0.0f, amax = 0.0f;
    for (int k = 0; k < 16; k++)
        if (fabsf(ts[k]) > amax) {
            amax = fabsf(ts[k]);
            max_s = ts[k];
        }
    float d = amax > 0.0f ? f16_round(fmaxf(fminf(max_s / -smax, F16_MAX), -F16_MAX)) : 0.0f;
    float cls[16], bls[16], be[16];
    int8_t Lt[256];
    float best_err = FLT_MAX, bd = 0.0f;
    for (int it = 0; it < KQ_ITERS; it++) {
        float e[16], sl2[16], sxl[16], ts2[16], err = 0.0f;
        for (int g = 0; g < 2; g++) {
            const tbx_kq_round r = {d, 0.0f, recip0(d), 0.0f, nmax, smax, ts + 8 * g, NULL, NULL};
            ops->requant_symm(xt + 128 * g, 16, &r, cls + 8 * g, e + 8 * g, sl2 + 8 * g,
                              sxl + 8 * g, ts2 + 8 * g);
        }
        for (int k = 0; k < 16; k++) err += e[k];
        if (it == 0 || err < best_err) { /* as in kq_affine_block: NaN errors keep round 0 */
            best_err = err;
            bd = d;
            memcpy(bls, cls, sizeof cls);
            memcpy(be, e, sizeof e);
        }
        if (it == KQ_ITERS - 1) break;
        /* d. refit the super-scale: d = sum x*(ls*l) / sum (ls*l)^2, keeping the largest
         * sub-block target representable (|t| <= smax*|d|, on the -smax side) */
        double A = 0, r = 0;
        for (int k = 0; k < 16; k++) {
            A += (double)cls[k] * cls[k] * sl2[k];
            r += (double)cls[k] * sxl[k];
        }
        double ndd = A > 0 ? r / A : d;
        float need = 0.0f, needs = 0.0f;
        for (int k = 0; k < 16; k++) {
            ts[k] = ts2[k];
            if (fabsf(ts[k]) > need) {
                need = fabsf(ts[k]);
                needs = ts[k];
            }
        }
        if (need > 0 && fabs(ndd) * smax < need * 0.98) ndd = needs / -smax;
        if (!isfinite(ndd)) ndd = d;
        d = f16_round(fmaxf(fminf((float)ndd, F16_MAX), -F16_MAX));
    }
    /* e. local search on the quantized sub-scales, then the final levels */
    for (int g = 0; g < 2; g++)
        ops->local_symm(xt + 128 * g, 16, nmax, smax, bd, be + 8 * g, bls + 8 * g, Lt + 128 * g);
    for (int k = 0; k < 16; k++) ls[k] = (int)bls[k];
    *dh_out = f2h(bd);
    ops->untranspose((const uint8_t *)Lt, 16, 2, (uint8_t)nmax_i, L);
}

static void kq_q6_K(const tbx_kq_ops *ops, const float *x, void *dst, uint64_t nb) {
    uint8_t *blk = (uint8_t *)dst, L[256];
    int ls[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 210) {
        if (kq_unrepresentable(x, TBX_DT_Q6_K)) { ref_q6_K(x, blk, 1); continue; }
        uint16_t dh;
        kq_symm_block(ops, 32, 128, kDeltaQ6, (int)(sizeof kDeltaQ6 / sizeof(float)), x, &dh, ls, L);
        tbx_gq_pack_q6k(blk, blk + 128, L);
        for (int j = 0; j < 16; j++) blk[192 + j] = (uint8_t)(int8_t)ls[j];
        tbx_st16(blk + 208, dh);
    }
}

static void kq_q3_K(const tbx_kq_ops *ops, const float *x, void *dst, uint64_t nb) {
    uint8_t *blk = (uint8_t *)dst, L[256];
    int ls[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 110) {
        if (kq_unrepresentable(x, TBX_DT_Q3_K)) { ref_q3_K(x, blk, 1); continue; }
        uint16_t dh;
        kq_symm_block(ops, 4, 32, kDeltaQ3, (int)(sizeof kDeltaQ3 / sizeof(float)), x, &dh, ls, L);
        for (int j = 0; j < 16; j++) ls[j] += 32;
        tbx_gq_pack_q3k(blk, ls, L);
        tbx_st16(blk + 108, dh);
    }
}

#define KQ_WRAPPERS(suffix, ops_expr)                                                              \
    static void q_q2_K_##suffix(const float *x, void *d, uint64_t nb) { kq_q2_K(ops_expr, x, d, nb); } \
    static void q_q3_K_##suffix(const float *x, void *d, uint64_t nb) { kq_q3_K(ops_expr, x, d, nb); } \
    static void q_q4_K_##suffix(const float *x, void *d, uint64_t nb) { kq_q4_K(ops_expr, x, d, nb); } \
    static void q_q5_K_##suffix(const float *x, void *d, uint64_t nb) { kq_q5_K(ops_expr, x, d, nb); } \
    static void q_q6_K_##suffix(const float *x, void *d, uint64_t nb) { kq_q6_K(ops_expr, x, d, nb); }

KQ_WRAPPERS(scalar, &kq_ops_scalar)

/* ========================================================================================== */
/* Lookup                                                                                      */
/* ========================================================================================== */
static tbx_quant_fn legacy_quant(tbx_dtype dt) {
    switch (dt) {
    case TBX_DT_Q8_0: return q_q8_0;
    case TBX_DT_Q4_0: return q_q4_0;
    case TBX_DT_Q4_1: return q_q4_1;
    case TBX_DT_Q5_0: return q_q5_0;
    case TBX_DT_Q5_1: return q_q5_1;
    case TBX_DT_TQ1_0: return q_tq1_0;
    case TBX_DT_TQ2_0: return q_tq2_0;
    case TBX_DT_MXFP4: return q_mxfp4;
    default: return NULL;
    }
}

tbx_quant_fn tbx_ggml_quant_scalar_for(tbx_dtype dt) {
    switch (dt) {
    case TBX_DT_Q2_K: return q_q2_K_scalar;
    case TBX_DT_Q3_K: return q_q3_K_scalar;
    case TBX_DT_Q4_K: return q_q4_K_scalar;
    case TBX_DT_Q5_K: return q_q5_K_scalar;
    case TBX_DT_Q6_K: return q_q6_K_scalar;
    default: return legacy_quant(dt);
    }
}

const tbx_kq_ops *tbx_kq_ops_scalar(void) { return &kq_ops_scalar; }

void tbx_kq_quantize(tbx_dtype dt, const tbx_kq_ops *ops, const float *x, void *dst,
                     uint64_t nblocks) {
    switch (dt) {
    case TBX_DT_Q2_K: kq_q2_K(ops, x, dst, nblocks); break;
    case TBX_DT_Q3_K: kq_q3_K(ops, x, dst, nblocks); break;
    case TBX_DT_Q4_K: kq_q4_K(ops, x, dst, nblocks); break;
    case TBX_DT_Q5_K: kq_q5_K(ops, x, dst, nblocks); break;
    case TBX_DT_Q6_K: kq_q6_K(ops, x, dst, nblocks); break;
    default: break;
    }
}

tbx_quant_fn tbx_ggml_quant_ref_for(tbx_dtype dt) {
    switch (dt) {
    case TBX_DT_Q2_K: return ref_q2_K;
    case TBX_DT_Q3_K: return ref_q3_K;
    case TBX_DT_Q4_K: return ref_q4_K;
    case TBX_DT_Q5_K: return ref_q5_K;
    case TBX_DT_Q6_K: return ref_q6_K;
    default: return legacy_quant(dt);
    }
}
