/*
 * ggml_iq4.c - the row quantizers of iq4_nl and iq4_xs (ggml.h, tbx_quant_rows_fn): ggml's
 * algorithm (ggml-quants.c, quantize_iq4_nl / quantize_iq4_xs), written for tensorbox, giving
 * the bytes of ggml_quantize_chunk with and without an importance matrix.
 *
 * Both types store 4-bit indices into the 16 non-linear levels tbx_kvalues_iq4nl (ggml_tables.c)
 * times a scale: iq4_nl one f16 scale per 32 values; iq4_xs per 256 values an f16 super-scale
 * and eight 6-bit signed sub-scales. Per 32 values:
 *   - weights: qw[column] * sqrt(sigma2 + x^2) with an importance matrix, x^2 without; sigma2
 *     is twice the mean square of the (super-)block;
 *   - the scale: the weighted least-squares scale for the nearest levels at scale max/127, then
 *     for the 15 trial inverse scales (k - 127)/max, k = -7..7, keeping the one with the largest
 *     (sum w q x)^2 / sum w q^2;
 *   - iq4_nl: indices again for the chosen scale as stored; iq4_xs: the sub-scales quantized
 *     against the super-scale (-max/32), the indices for each quantized sub-scale.
 * Same float operations in the same order as ggml (no fused multiply-add: ggml.h); checked by
 * tests/unit/test_ggml_rows_vs_ggml.c against llama.cpp's libggml. The per-value work (the scale
 * search and the final indices) runs on kernels over 8 groups of 32 values (tbx_iq4_ops in
 * ggml.h): the scalar ones below, the AVX2 ones in ggml_simd_avx2.c (the same bytes); dispatch.c
 * defines tbx_gq_rows_iq4_nl / _xs with the best of them.
 */
#include "ggml.h"
#include "ggml_tables.h"

#include <math.h>
#include <string.h>

#define IQ4_EPS 1e-15f /* ggml's GROUP_MAX_EPS: a block whose max |x| is below is all zero */

/* Index of the level nearest to x (the lower one of two at equal distance), by bisection. */
static int nl_index(float x) {
    const int8_t *v = tbx_kvalues_iq4nl;
    if (x <= (float)v[0]) return 0;
    if (x >= (float)v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < (float)v[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - (float)v[hi - 1] < (float)v[hi] - x ? hi - 1 : hi;
}

/* The best scale of 32 values xb with weights w; Lb gets the indices of the first trial. */
static float block_scale(const float *xb, const float *w, uint8_t *Lb) {
    const int8_t *v = tbx_kvalues_iq4nl;
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        const float ax = fabsf(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < IQ4_EPS) return 0.0f;
    float d = -max / (float)v[0], id = 1 / d, sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        const int l = nl_index(id * xb[j]);
        Lb[j] = (uint8_t)l;
        const float q = (float)v[l];
        sumqx += w[j] * q * xb[j];
        sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int itry = -7; itry <= 7; itry++) {
        id = (float)(itry + v[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            const float q = (float)v[nl_index(id * xb[j])];
            sumqx += w[j] * q * xb[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* ---- the scalar kernels (the reference of the SIMD ones, and their fallback) ------------- */
static bool scales8_scalar(const float *x, const float *w, float *scales) {
    uint8_t Lb[32];
    for (int k = 0; k < 8; k++) scales[k] = block_scale(x + 32 * k, w + 32 * k, Lb);
    return true;
}
static void indices8_scalar(const float *x, const float *id, uint8_t *L) {
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < 32; j++) L[32 * k + j] = (uint8_t)nl_index(id[k] * x[32 * k + j]);
}
static const tbx_iq4_ops iq4_ops_scalar = {scales8_scalar, indices8_scalar};
const tbx_iq4_ops *tbx_iq4_ops_scalar(void) { return &iq4_ops_scalar; }

/* 2 * the mean square of n values, as ggml sums it */
static float iq4_sigma2(const float *x, int n) {
    float sigma2 = 0;
    for (int j = 0; j < n; j++) sigma2 += x[j] * x[j];
    return sigma2 * (2.0f / (float)n);
}
/* the weights of 32 values; qwb: their importance or NULL */
static void iq4_weights(const float *xb, const float *qwb, float sigma2, float *w) {
    for (int j = 0; j < 32; j++) w[j] = qwb ? qwb[j] * sqrtf(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
}
/* the scales of 8 groups of 32: the kernel's, or the scalar one's when it hands them back */
static void iq4_scales8(const tbx_iq4_ops *ops, const float *x, const float *w, float *scales) {
    if (!ops->scales8(x, w, scales)) scales8_scalar(x, w, scales);
}
/* q4 bytes of 32 indices */
static void iq4_pack(uint8_t *q4, const uint8_t *L) {
    for (int j = 0; j < 16; j++) q4[j] = (uint8_t)(L[j] | (L[16 + j] << 4));
}

/* One iq4_xs super-block of 256 values; qw: its importance or NULL. */
static void iq4_xs_block(const tbx_iq4_ops *ops, const float *x, uint8_t *blk, const float *qw) {
    float w[256], scales[8], idl[8];
    uint8_t L[256];
    const float sigma2 = iq4_sigma2(x, 256);
    for (int ib = 0; ib < 8; ib++) iq4_weights(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, w + 32 * ib);
    iq4_scales8(ops, x, w, scales);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 8; ib++) {
        const float a = fabsf(scales[ib]);
        if (a > amax_scale) {
            amax_scale = a;
            max_scale = scales[ib];
        }
    }
    /* d, scales_h (u16), scales_l[4], qs[128] */
    const float d = -max_scale / 32;
    tbx_st16(blk, tbx_f32_to_f16(d));
    const float id = d != 0.0f ? 1 / d : 0.0f;
    uint16_t sh = 0;
    uint8_t *sl = blk + 4;
    for (int ib = 0; ib < 8; ib++) {
        int l = tbx_gq_nearest(id * scales[ib]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        const float dl = d * (float)l;
        idl[ib] = dl != 0.0f ? 1 / dl : 0.0f;
        l += 32;
        if (ib % 2 == 0)
            sl[ib / 2] = (uint8_t)(l & 15);
        else
            sl[ib / 2] |= (uint8_t)((l & 15) << 4);
        sh |= (uint16_t)((l >> 4) << (2 * (ib % 8)));
    }
    tbx_st16(blk + 2, sh);
    ops->indices8(x, idl, L);
    for (int ib = 0; ib < 8; ib++) iq4_pack(blk + 8 + 16 * ib, L + 32 * ib);
}

/* k (1..8) consecutive iq4_nl blocks of 32 values (a group of 8 for the kernels; fewer are
 * padded with zeros, whose results are not written); qw: their importance or NULL. */
static void iq4_nl_blocks(const tbx_iq4_ops *ops, const float *x, uint8_t *blk, const float *qw,
                          int k) {
    float xp[256], w[256], scales[8], id[8];
    uint8_t L[256];
    if (k < 8) {
        memset(xp, 0, sizeof xp);
        memcpy(xp, x, (size_t)k * 32 * sizeof(float));
        x = xp;
    }
    for (int b = 0; b < 8; b++) iq4_weights(x + 32 * b, qw && b < k ? qw + 32 * b : NULL,
                                            iq4_sigma2(x + 32 * b, 32), w + 32 * b);
    iq4_scales8(ops, x, w, scales);
    for (int b = 0; b < 8; b++) id[b] = scales[b] != 0.0f ? 1 / scales[b] : 0.0f;
    ops->indices8(x, id, L);
    for (int b = 0; b < k; b++, blk += 18) {
        tbx_st16(blk, tbx_f32_to_f16(scales[b]));
        iq4_pack(blk + 2, L + 32 * b);
    }
}

void tbx_gq_rows_iq4_nl_with(const tbx_iq4_ops *ops, const float *x, void *dst, int64_t nrows,
                             int64_t n, const float *qw) {
    uint8_t *blk = (uint8_t *)dst;
    const int64_t nb = n / 32;
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < nb; i += 8) {
            const int k = nb - i < 8 ? (int)(nb - i) : 8;
            iq4_nl_blocks(ops, x, blk, qw ? qw + 32 * i : NULL, k);
            x += 32 * k;
            blk += 18 * k;
        }
}

void tbx_gq_rows_iq4_xs_with(const tbx_iq4_ops *ops, const float *x, void *dst, int64_t nrows,
                             int64_t n, const float *qw) {
    uint8_t *blk = (uint8_t *)dst;
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < n / 256; i++, x += 256, blk += 136)
            iq4_xs_block(ops, x, blk, qw ? qw + 256 * i : NULL);
}
