/*
 * ggml_quant_w.c - the row quantizers of q4_0, q4_1, q5_0, q5_1 and q2_K .. q6_K with an
 * importance matrix (ggml.h, tbx_quant_rows_fn): ggml's weighted algorithms (ggml-quants.c,
 * quantize_row_<type>_impl), written for tensorbox, giving the bytes of ggml_quantize_chunk.
 *
 * Without an importance matrix ggml runs its reference quantizers, block by block: so do these
 * (tbx_ggml_quant_default_for over the rows, the bytes of every conversion before).
 *
 * With one, every value gets a weight w = qw[column] * sqrt(sigma2 + x^2) (q6_K: qw alone),
 * sigma2 the mean square of the whole row (q4_0 .. q5_1) or twice that of the super-block
 * (q3_K .. q5_K; q2_K once), and:
 *   - symmetric types (q4_0, q5_0, q3_K's sub-blocks, q6_K): the scale maximising
 *     (sum w x l)^2 / sum w l^2 over 19 trial inverse scales around -nmax/max (fit_symm);
 *   - affine types (q4_1, q5_1, the sub-blocks of q2_K, q4_K, q5_K): scale and offset by
 *     weighted least squares over 37 trial inverse scales, kept when the weighted squared error
 *     drops (fit_affine);
 *   - the sub-block scales and mins of q2_K, q4_K, q5_K: non-negative levels 0..nmax of a
 *     super-scale, 9 trials then up to 5 rounds of one-level moves (fit_pos), weighted by the
 *     sub-blocks' total weight; q3_K's sub-block scales by fit_symm, q6_K's as the reference.
 * Every operation is the single-precision one ggml performs, in ggml's order (no fused
 * multiply-add: ggml.h), so the bytes are equal; tests/unit/test_ggml_rows_vs_ggml.c checks
 * them against ggml_quantize_chunk of llama.cpp's libggml. fit_symm and fit_affine run eight
 * groups at a time on a kernel when one is given (tbx_wq_symm8_fn / tbx_wq_aff8_fn: the AVX2
 * ones of ggml_simd_avx2.c, the same results; dispatch.c defines the rows of q4_0, q5_0, q3_K,
 * q6_K with the first and of q4_1, q5_1, q2_K, q4_K, q5_K with the second).
 */
#include "ggml.h"

#include <math.h>
#include <string.h>

#define QK_K 256
#define W_EPS 1e-15f /* ggml's GROUP_MAX_EPS: a group whose max |x| is below is all zero */

static inline uint16_t f2h(float f) { return tbx_f32_to_f16(f); }
static inline float h2f(uint16_t h) { return tbx_f16_to_f32(h); }
static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- fits -------------------------------------------------------------------------------- */
/* Symmetric levels -nmax..nmax-1 of n values with weights w: L[i] = level + nmax. Returns the
 * scale (0 for an all-zero group). */
static float fit_symm(int n, int nmax, const float *x, int8_t *L, const float *w) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < W_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(tbx_gq_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(tbx_gq_nearest(iscale * x[i]), -nmax, nmax - 1);
            sumlx += w[i] * x[i] * (float)l;
            suml2 += w[i] * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(tbx_gq_nearest(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* fit_symm of 8 consecutive groups of n values (x + n*k, weights w + n*k): the kernel's when
 * given (tbx_wq_symm8_fn, ggml.h) and it takes them, else one group at a time here. */
static void fit_symm8(tbx_wq_symm8_fn symm8, int n, int nmax, const float *x, const float *w,
                      int8_t *L, float *scales) {
    if (symm8 && symm8(x, w, n, nmax, scales, (uint8_t *)L)) return;
    for (int k = 0; k < 8; k++) scales[k] = fit_symm(n, nmax, x + n * k, L + n * k, w + n * k);
}

/* Affine levels 0..nmax, y = scale * l - mn: 37 trial inverse scales
 * (-0.9 + 0.05 k + nmax) / (max - min), weighted least squares for each, kept when the weighted
 * squared error drops. Returns the scale; *mn gets the offset (>= 0). Laux: n bytes of scratch. */
static float fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *mn,
                        uint8_t *Laux) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max <= min) {
        memset(L, 0, (size_t)n);
        *mn = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(tbx_gq_nearest(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * (float)L[i] + min - x[i];
        best += w[i] * (diff * diff);
    }
    for (int is = 0; is <= 36; is++) {
        iscale = (-0.9f + 0.05f * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(tbx_gq_nearest(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                const float diff = this_scale * (float)Laux[i] + this_min - x[i];
                err += w[i] * (diff * diff);
            }
            if (err < best) {
                memcpy(L, Laux, (size_t)n);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *mn = -min;
    return scale;
}

/* fit_affine of 8 consecutive groups of n values (x + n*k, weights w + n*k): the kernel's when
 * given (tbx_wq_aff8_fn, ggml.h) and it takes them, else one group at a time here. */
static void fit_aff8(tbx_wq_aff8_fn aff8, int n, int nmax, const float *x, const float *w,
                     uint8_t *L, float *scales, float *mins) {
    if (aff8 && aff8(x, w, n, nmax, scales, mins, L)) return;
    uint8_t Laux[32];
    for (int k = 0; k < 8; k++)
        scales[k] = fit_affine(n, nmax, x + n * k, w + n * k, L + n * k, &mins[k], Laux);
}

/* Levels 0..nmax of n non-negative values (sub-block scales or mins) with weights w. L keeps
 * ggml's uint8 storage of each level (a negative level, possible only for a negative input,
 * wraps the way ggml's does). Returns the super-scale. */
static float fit_pos(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < W_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)tbx_gq_nearest(iscale * x[i]);
    float scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * (float)L[i];
        best += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * (float)is + (float)nmax) / max, scale_is = 1 / iscale_is;
        float err = 0;
        for (int i = 0; i < n; i++) {
            int l = tbx_gq_nearest(iscale_is * x[i]);
            l = l > nmax ? nmax : l;
            const float diff = x[i] - scale_is * (float)l;
            err += w[i] * diff * diff;
        }
        if (err < best) {
            best = err;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = tbx_gq_nearest(iscale * x[i]);
        l = l > nmax ? nmax : l;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * (float)L[i];
            float sl2 = suml2 - w[i] * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int nl = tbx_gq_nearest(x[i] * sl2 / slx);
                nl = nl > nmax ? nmax : nl;
                if (nl != L[i]) {
                    slx += w[i] * x[i] * (float)nl;
                    sl2 += w[i] * (float)nl * (float)nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- legacy types: 32-value blocks, sigma2 over the whole row ------------------------------ */
static float row_sigma2(const float *x, int64_t n) {
    float s = 0;
    for (int64_t j = 0; j < n; j++) s += x[j] * x[j];
    return s / (float)n;
}

static void weights_of(const float *x, const float *qw, float sigma2, int n, float *w) {
    for (int j = 0; j < n; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* One row of q4_0 / q5_0 (nmax 8 / 16): eight blocks at a time through fit_symm8, the rest one
 * by one. */
static void row_q40_q50(tbx_wq_symm8_fn symm8, const float *x, uint8_t *b, int64_t n,
                        const float *qw, int nmax) {
    const float sigma2 = row_sigma2(x, n);
    const size_t bb = nmax == 8 ? 18 : 22;
    float w[256], scales[8];
    int8_t L[256];
    int q[32];
    const int64_t nb = n / 32;
    for (int64_t ib = 0; ib < nb;) {
        const int k = nb - ib >= 8 ? 8 : 1;
        for (int g = 0; g < k; g++) weights_of(x + 32 * g, qw + 32 * g, sigma2, 32, w + 32 * g);
        if (k == 8)
            fit_symm8(symm8, 32, nmax, x, w, L, scales);
        else
            scales[0] = fit_symm(32, nmax, x, L, w);
        for (int g = 0; g < k; g++, b += bb) {
            const int8_t *Lg = L + 32 * g;
            tbx_st16(b, f2h(scales[g]));
            if (nmax == 8) {
                for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(Lg[j] | (Lg[j + 16] << 4));
            } else {
                for (int j = 0; j < 32; j++) q[j] = Lg[j];
                tbx_gq_pack_q5(b + 2, b + 6, q);
            }
        }
        ib += k, x += 32 * k, qw += 32 * k;
    }
}

/* One row of q4_1 / q5_1 (nmax 15 / 31): eight blocks at a time through fit_aff8, the rest one
 * by one. */
static void row_q41_q51(tbx_wq_aff8_fn aff8, const float *x, uint8_t *b, int64_t n,
                        const float *qw, int nmax) {
    const float sigma2 = row_sigma2(x, n);
    const size_t bb = nmax == 15 ? 20 : 24;
    float w[256], scales[8], mins[8];
    uint8_t L[256], Laux[32];
    int q[32];
    const int64_t nb = n / 32;
    for (int64_t ib = 0; ib < nb;) {
        const int k = nb - ib >= 8 ? 8 : 1;
        for (int g = 0; g < k; g++) weights_of(x + 32 * g, qw + 32 * g, sigma2, 32, w + 32 * g);
        if (k == 8)
            fit_aff8(aff8, 32, nmax, x, w, L, scales, mins);
        else
            scales[0] = fit_affine(32, nmax, x, w, L, &mins[0], Laux);
        for (int g = 0; g < k; g++, b += bb) {
            const uint8_t *Lg = L + 32 * g;
            tbx_st16(b, f2h(scales[g]));
            tbx_st16(b + 2, f2h(-mins[g]));
            if (nmax == 15) {
                for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(Lg[j] | (Lg[j + 16] << 4));
            } else {
                for (int j = 0; j < 32; j++) q[j] = Lg[j];
                tbx_gq_pack_q5(b + 4, b + 8, q);
            }
        }
        ib += k, x += 32 * k, qw += 32 * k;
    }
}

/* ---- K types: 256-value super-blocks ------------------------------------------------------- */
static float sumsq256(const float *x) {
    float s = 0;
    for (int j = 0; j < QK_K; j++) s += x[j] * x[j];
    return s;
}

static void sb_q2_K(tbx_wq_aff8_fn aff8, const float *x, uint8_t *blk, const float *qw) {
    uint8_t L[QK_K], Ls[16], Lm[16];
    float w[QK_K], sw[16], scales[16], mins[16];
    const float sigma2 = sumsq256(x) / QK_K;
    for (int j = 0; j < 16; j++) {
        weights_of(x + 16 * j, qw + 16 * j, sigma2, 16, w + 16 * j);
        sw[j] = 0;
        for (int l = 0; l < 16; l++) sw[j] += w[16 * j + l];
    }
    for (int g = 0; g < 2; g++)
        fit_aff8(aff8, 16, 3, x + 128 * g, w + 128 * g, L + 128 * g, scales + 8 * g, mins + 8 * g);
    const float dm = fit_pos(16, 15, scales, Ls, sw), mm = fit_pos(16, 15, mins, Lm, sw);
    tbx_st16(blk + 80, f2h(dm));
    tbx_st16(blk + 82, f2h(mm));
    const float d_all = h2f(tbx_ld16(blk + 80)), m_all = h2f(tbx_ld16(blk + 82));
    uint8_t *sc = blk;
    for (int j = 0; j < 16; j++) sc[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
    for (int j = 0; j < 16; j++) {
        const float d = d_all * (float)(sc[j] & 15);
        if (!d) continue;
        const float m = m_all * (float)(sc[j] >> 4);
        for (int ii = 0; ii < 16; ii++)
            L[16 * j + ii] = (uint8_t)clampi(tbx_gq_nearest((x[16 * j + ii] + m) / d), 0, 3);
    }
    tbx_gq_pack_q2k_levels(blk + 16, L);
}

static void sb_q3_K(tbx_wq_symm8_fn symm8, const float *x, uint8_t *blk, const float *qw) {
    int8_t L[QK_K], Ls[16];
    float w[QK_K], sw[16], scales[16];
    const float sigma2 = 2 * sumsq256(x) / QK_K;
    for (int j = 0; j < 16; j++) {
        weights_of(x + 16 * j, qw + 16 * j, sigma2, 16, w + 16 * j);
        float s = 0;
        for (int l = 0; l < 16; l++) s += w[16 * j + l];
        sw[j] = s;
    }
    for (int g = 0; g < 2; g++)
        fit_symm8(symm8, 16, 4, x + 128 * g, w + 128 * g, L + 128 * g, scales + 8 * g);
    int ls[16];
    tbx_st16(blk + 108, f2h(fit_symm(16, 32, scales, Ls, sw)));
    for (int j = 0; j < 16; j++) ls[j] = Ls[j];
    const float d_all = h2f(tbx_ld16(blk + 108));
    uint8_t Lu[QK_K];
    for (int j = 0; j < QK_K; j++) Lu[j] = (uint8_t)L[j];
    for (int j = 0; j < 16; j++) {
        const float d = d_all * (float)(ls[j] - 32);
        if (!d) continue;
        for (int ii = 0; ii < 16; ii++)
            Lu[16 * j + ii] = (uint8_t)(clampi(tbx_gq_nearest(x[16 * j + ii] / d), -4, 3) + 4);
    }
    tbx_gq_pack_q3k(blk, ls, Lu);
}

/* q4_K (nmax 15) and q5_K (nmax 31). */
static void sb_q45_K(tbx_wq_aff8_fn aff8, const float *x, uint8_t *blk, const float *qw,
                     int nmax) {
    uint8_t L[QK_K], Ls[8], Lm[8];
    float w[QK_K], sw[8], scales[8], mins[8];
    const float sigma2 = 2 * sumsq256(x) / QK_K;
    for (int j = 0; j < 8; j++) {
        weights_of(x + 32 * j, qw + 32 * j, sigma2, 32, w + 32 * j);
        float s = 0;
        for (int l = 0; l < 32; l++) s += w[32 * j + l];
        sw[j] = s;
    }
    fit_aff8(aff8, 32, nmax, x, w, L, scales, mins);
    const float d_block = fit_pos(8, 63, scales, Ls, sw), m_block = fit_pos(8, 63, mins, Lm, sw);
    int ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = nmax == 31 && Ls[j] > 63 ? 63 : Ls[j];
        lm[j] = nmax == 31 && Lm[j] > 63 ? 63 : Lm[j];
    }
    uint8_t *s = blk + 4;
    tbx_gq_pack_q4k_scales(s, ls, lm);
    tbx_st16(blk, f2h(d_block));
    tbx_st16(blk + 2, f2h(m_block));
    const float d_all = h2f(tbx_ld16(blk)), m_all = h2f(tbx_ld16(blk + 2));
    for (int j = 0; j < 8; j++) {
        /* the 6-bit scale and min as the decoder reads them back */
        const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        const float d = d_all * (float)sc;
        if (!d) continue;
        const float dm = m_all * (float)m;
        for (int ii = 0; ii < 32; ii++)
            L[32 * j + ii] = (uint8_t)clampi(tbx_gq_nearest((x[32 * j + ii] + dm) / d), 0, nmax);
    }
    if (nmax == 31)
        tbx_gq_pack_q5k_levels(blk + 16, blk + 48, L);
    else
        tbx_gq_pack_q4k_levels(blk + 16, L);
}

static void sb_q6_K(tbx_wq_symm8_fn symm8, const float *x, uint8_t *blk, const float *qw) {
    int8_t L[QK_K];
    float scales[16], max_scale = 0, max_abs = 0;
    for (int g = 0; g < 2; g++)
        fit_symm8(symm8, 16, 32, x + 128 * g, qw + 128 * g, L + 128 * g, scales + 8 * g);
    for (int ib = 0; ib < 16; ib++) {
        const float a = fabsf(scales[ib]);
        if (a > max_abs) {
            max_abs = a;
            max_scale = scales[ib];
        }
    }
    if (max_abs < W_EPS) {
        memset(blk, 0, 210);
        return;
    }
    const float iscale = -128.0f / max_scale;
    tbx_st16(blk + 208, f2h(1 / iscale));
    int8_t *sc = (int8_t *)(blk + 192);
    for (int ib = 0; ib < 16; ib++) {
        const int l = tbx_gq_nearest(iscale * scales[ib]);
        sc[ib] = (int8_t)(uint8_t)(l < 127 ? l : 127); /* ggml's int8 store of the int */
    }
    const float d_all = h2f(tbx_ld16(blk + 208));
    uint8_t Lu[QK_K];
    for (int j = 0; j < QK_K; j++) Lu[j] = (uint8_t)L[j];
    for (int j = 0; j < 16; j++) {
        const float d = d_all * (float)sc[j];
        if (!d) continue;
        for (int ii = 0; ii < 16; ii++)
            Lu[16 * j + ii] = (uint8_t)(clampi(tbx_gq_nearest(x[16 * j + ii] / d), -32, 31) + 32);
    }
    tbx_gq_pack_q6k(blk, blk + 128, Lu);
}

/* ---- the row quantizers -------------------------------------------------------------------- */
/* Without an importance matrix: the block quantizer over the rows (one run of blocks). */
static bool unweighted(tbx_dtype dt, const float *x, void *dst, int64_t nrows, int64_t n,
                       const float *qw) {
    if (qw) return false;
    const tbx_dtype_info *di = tbx_dtype_core_get(dt);
    tbx_ggml_quant_default_for(dt)(x, dst, (uint64_t)nrows * ((uint64_t)n / di->block_size));
    return true;
}

/* q4_1 / q5_1 on the given fit_affine kernel (dispatch.c defines tbx_gq_rows_q4_1 / _q5_1) */
#define AFF_ROWS(name, DT, nmax, bb)                                                             \
    void name(tbx_wq_aff8_fn aff8, const float *x, void *dst, int64_t nrows, int64_t n,        \
              const float *qw) {                                                                 \
        if (unweighted(DT, x, dst, nrows, n, qw)) return;                                        \
        uint8_t *b = (uint8_t *)dst;                                                             \
        for (int64_t r = 0; r < nrows; r++, x += n, b += (size_t)(n / 32) * (bb))               \
            row_q41_q51(aff8, x, b, n, qw, nmax);                                                \
    }
/* q4_0 / q5_0 on the given fit_symm kernel (dispatch.c defines tbx_gq_rows_q4_0 / _q5_0) */
#define SYMM_ROWS(name, DT, nmax, bb)                                                            \
    void name(tbx_wq_symm8_fn symm8, const float *x, void *dst, int64_t nrows, int64_t n,      \
              const float *qw) {                                                                 \
        if (unweighted(DT, x, dst, nrows, n, qw)) return;                                        \
        uint8_t *b = (uint8_t *)dst;                                                             \
        for (int64_t r = 0; r < nrows; r++, x += n, b += (size_t)(n / 32) * (bb))               \
            row_q40_q50(symm8, x, b, n, qw, nmax);                                               \
    }
SYMM_ROWS(tbx_gq_rows_q4_0_with, TBX_DT_Q4_0, 8, 18)
SYMM_ROWS(tbx_gq_rows_q5_0_with, TBX_DT_Q5_0, 16, 22)
AFF_ROWS(tbx_gq_rows_q4_1_with, TBX_DT_Q4_1, 15, 20)
AFF_ROWS(tbx_gq_rows_q5_1_with, TBX_DT_Q5_1, 31, 24)

/* K types: super-block by super-block; qw[column] restarts with every row. q2_K / q4_K / q5_K
 * on the given fit_affine kernel (dispatch.c defines tbx_gq_rows_q2_K etc.). */
#define K_ROWS(name, DT, bb, call)                                                               \
    void name(tbx_wq_aff8_fn aff8, const float *x, void *dst, int64_t nrows, int64_t n,        \
              const float *qw) {                                                                 \
        if (unweighted(DT, x, dst, nrows, n, qw)) return;                                        \
        uint8_t *blk = (uint8_t *)dst;                                                           \
        for (int64_t r = 0; r < nrows; r++)                                                      \
            for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, blk += (bb)) {                    \
                const float *w = qw + i * QK_K;                                                  \
                call;                                                                            \
            }                                                                                    \
    }
K_ROWS(tbx_gq_rows_q2_K_with, TBX_DT_Q2_K, 84, sb_q2_K(aff8, x, blk, w))
/* q3_K / q6_K on the given fit_symm kernel (dispatch.c defines tbx_gq_rows_q3_K / _q6_K) */
#define K_ROWS_SYMM(name, DT, bb, sb)                                                            \
    void name(tbx_wq_symm8_fn symm8, const float *x, void *dst, int64_t nrows, int64_t n,      \
              const float *qw) {                                                                 \
        if (unweighted(DT, x, dst, nrows, n, qw)) return;                                        \
        uint8_t *blk = (uint8_t *)dst;                                                           \
        for (int64_t r = 0; r < nrows; r++)                                                      \
            for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, blk += (bb))                      \
                sb(symm8, x, blk, qw + i * QK_K);                                                \
    }
K_ROWS_SYMM(tbx_gq_rows_q3_K_with, TBX_DT_Q3_K, 110, sb_q3_K)
K_ROWS_SYMM(tbx_gq_rows_q6_K_with, TBX_DT_Q6_K, 210, sb_q6_K)
K_ROWS(tbx_gq_rows_q4_K_with, TBX_DT_Q4_K, 144, sb_q45_K(aff8, x, blk, w, 15))
K_ROWS(tbx_gq_rows_q5_K_with, TBX_DT_Q5_K, 176, sb_q45_K(aff8, x, blk, w, 31))
