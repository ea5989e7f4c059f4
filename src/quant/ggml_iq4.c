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
 * tests/unit/test_ggml_rows_vs_ggml.c against llama.cpp's libggml.
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

/* One block of n = 32 (iq4_nl) or 256 (iq4_xs) values; qw: the block's importance or NULL. */
static void iq4_block(int n, const float *x, uint8_t *blk, const float *qw) {
    float sigma2 = 0, w[32], scales[8];
    uint8_t L[256];
    for (int j = 0; j < n; j++) sigma2 += x[j] * x[j];
    sigma2 *= 2.0f / (float)n;
    const int nsub = n / 32;
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < nsub; ib++) {
        const float *xb = x + 32 * ib;
        for (int j = 0; j < 32; j++)
            w[j] = qw ? qw[32 * ib + j] * sqrtf(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
        scales[ib] = block_scale(xb, w, L + 32 * ib);
        const float a = fabsf(scales[ib]);
        if (a > amax_scale) {
            amax_scale = a;
            max_scale = scales[ib];
        }
    }
    uint8_t *q4;
    if (nsub > 1) { /* iq4_xs: d, scales_h (u16), scales_l[4], qs[128] */
        const float d = -max_scale / 32;
        tbx_st16(blk, tbx_f32_to_f16(d));
        const float id = d != 0.0f ? 1 / d : 0.0f;
        uint16_t sh = 0;
        uint8_t *sl = blk + 4;
        for (int ib = 0; ib < nsub; ib++) {
            int l = tbx_gq_nearest(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * (float)l, idl = dl != 0.0f ? 1 / dl : 0.0f;
            for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)nl_index(idl * x[32 * ib + j]);
            l += 32;
            if (ib % 2 == 0)
                sl[ib / 2] = (uint8_t)(l & 15);
            else
                sl[ib / 2] |= (uint8_t)((l & 15) << 4);
            sh |= (uint16_t)((l >> 4) << (2 * (ib % 8)));
        }
        tbx_st16(blk + 2, sh);
        q4 = blk + 8;
    } else { /* iq4_nl: d, qs[16] */
        tbx_st16(blk, tbx_f32_to_f16(scales[0]));
        const float id = scales[0] != 0.0f ? 1 / scales[0] : 0.0f;
        for (int j = 0; j < 32; j++) L[j] = (uint8_t)nl_index(id * x[j]);
        q4 = blk + 2;
    }
    for (int i = 0; i < nsub; i++)
        for (int j = 0; j < 16; j++)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

static void iq4_rows(int n_block, size_t bb, const float *x, void *dst, int64_t nrows,
                     int64_t n, const float *qw) {
    uint8_t *blk = (uint8_t *)dst;
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < n / n_block; i++, x += n_block, blk += bb)
            iq4_block(n_block, x, blk, qw ? qw + i * n_block : NULL);
}

void tbx_gq_rows_iq4_nl(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw) {
    iq4_rows(32, 18, x, dst, nrows, n, qw);
}

void tbx_gq_rows_iq4_xs(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw) {
    iq4_rows(256, 136, x, dst, nrows, n, qw);
}
