/*
 * mcf_quant.c - quantizers of MCF's block (q8 q4) and super-block (k6 k4 k3 k2) families, and
 * the int8 / int4 raw family (quantizer and decoder). Scalar, deterministic, never dispatches.
 *
 * Two methods for q / k (tbx_mcfq_method, see mcfq.h for the payload layout):
 *
 * METHOD_MANTLE reproduces mantle's `quantize` (cmd/mantle/quantize.go at 803be32) byte for byte:
 *   values clamped to [clip_lo, clip_hi] (v < lo -> lo, v > hi -> hi, NaN kept); per block
 *   amax = max |v| (NaN never wins), scale = amax / qmax (qmax = 2^(bits-1) - 1); k: super scale
 *   S = max block scale, u6 = round(32 * scale_b / S) clamped to [1, 63] (0 for an all-zero
 *   block), block scale = S * (u6 / 32); the codes are round(v * (1 / scale)) clamped to
 *   [-qmax, qmax], computed against the UNROUNDED f32 scale, while the stored f16 scale is the
 *   f32 one TRUNCATED (mantle's Float32ToFloat16: mantissa cut, exponents below f16's normal
 *   range -> 0, overflow -> Inf, NaN -> 0x7E00). round is half away from zero in f64 (Go's
 *   math.Round) and the conversion to an integer is Go's on amd64 (NaN and out-of-range values
 *   become INT32_MIN, hence -qmax after the clamp: mantle refuses NaN/Inf tensors itself, and
 *   a subnormal block scale makes its 1/scale infinite). Padding values of a partial block are 0
 *   and go through the same arithmetic, except in q4, where mantle writes code 0 directly.
 *
 * METHOD_BEST (the default) minimises the squared error of what the decoder (mcfq.h: w = q *
 *   f16(scale), subnormal scales flushed to 0) gives back:
 *   q*: per block, candidate f16 scales (amax/qmax rounded to nearest and truncated, a grid of
 *       relative factors 1.06 .. 0.70 of it, then the least-squares refit of the best codes and
 *       the best candidate's f16 neighbours); codes are the nearest ones for the STORED scale.
 *   k*: per super-block, candidate super scales (max block scale rounded to nearest, truncated,
 *       and two smaller ones that give the biggest block a finer u6 step); for each candidate
 *       every block searches u6 over 1..63 (an exact minimum; a candidate is dropped as soon as
 *       its partial error exceeds the best so far); the candidate with the least total error
 *       wins. The truncated candidates contain mantle's choices, so per block the error is never
 *       above mantle's (its codes are nearest for mantle's own stored scale).
 *   Values are clamped like mantle's; NaN values count as 0; f16 scales are capped at 65504.
 *   A block (q) or super-block (k) whose scale amax/qmax is beyond f16 (mantle's truncation
 *   gives Inf: >= 65536) has no finite scale at all: it gets mantle's bytes, so its values
 *   decode as the reference's do (Inf/NaN), never as a silent 0.
 *
 * Every choice is a function of one row's values only, so the bytes do not depend on how rows
 * are split between threads. Ties go to the first candidate in the order above.
 *
 * int8 / int4 (the seed's raw family, see mcfq.h): symmetric (weights domain: zero = 0,
 * scale = max(|clip_lo|, |clip_hi|) / qmax, codes in [-qmax, qmax]) or asymmetric (activations
 * domain: scale = (hi - lo) / (2^bits - 1), zero = round(-2^(bits-1) - lo / scale) so that 0
 * has an exact code, codes in [-2^(bits-1), 2^(bits-1) - 1]); decoded as scale * (q - zero).
 */
#include "mcfq.h"
#include "ggml.h" /* FP_CONTRACT off: the same IEEE operations as the decoders */

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* mantle's Float32ToFloat16 (internal/backend/simd/float16.go): truncating, no subnormals. */
uint16_t tbx_mcfq_f16_trunc(float f) {
    const uint32_t b = f2u(f);
    const uint16_t sign = (uint16_t)((b >> 31) << 15);
    const int exp = (int)((b >> 23) & 0xFFu);
    const uint32_t mant = b & 0x7FFFFFu;
    if (exp == 0) return sign;
    if (exp == 0xFF) return (uint16_t)(sign | 0x7C00u | (mant ? 0x200u : 0u));
    const int e = exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) return sign;
    return (uint16_t)(sign | ((unsigned)e << 10) | (mant >> 13));
}

/* The decoder's view of an f16 scale: subnormals flushed to (signed) zero. */
float tbx_mcfq_f16_dec(uint16_t h) {
    if ((h & 0x7C00u) == 0) return (h & 0x8000u) ? -0.0f : 0.0f;
    return tbx_f16_to_f32(h);
}

static inline float clampv(float v, float lo, float hi) {
    if (v < lo) return lo;
    if (v > hi) return hi;
    return v;
}

/* Go's int32(math.Round(float64(x))) on amd64, then mantle's clamp to [-qmax, qmax]. */
static inline int32_t mantle_code(float x, int32_t qmax) {
    const double r = round((double)x);
    int32_t q = (r >= -2147483648.0 && r < 2147483648.0) ? (int32_t)r : INT32_MIN;
    if (q > qmax) q = qmax;
    else if (q < -qmax) q = -qmax;
    return q;
}

/* ---- code packing: 8 codes of `bits` bits into `bits` bytes, LSB first ------------------- */
static void pack8(const int32_t *q, uint32_t bits, uint8_t *dst) {
    uint64_t acc = 0;
    const uint64_t mask = ((uint64_t)1 << bits) - 1;
    for (int i = 0; i < 8; i++) acc |= ((uint64_t)(uint32_t)q[i] & mask) << (i * bits);
    for (uint32_t i = 0; i < bits; i++) dst[i] = (uint8_t)(acc >> (8 * i));
}
static void pack32(const int32_t *q, uint32_t bits, uint8_t *dst) {
    for (int g = 0; g < 4; g++) pack8(q + 8 * g, bits, dst + g * bits);
}

/* ---- METHOD_MANTLE ------------------------------------------------------------------------- */
/* Block b of a q row, as mantle's quantize writes it. */
static void mantle_q_block(const tbx_mcfq_layout *L, const float *x, float lo, float hi,
                           uint64_t b, uint8_t *scales, uint8_t *codes) {
    const int32_t qmax = (1 << (L->bits - 1)) - 1;
    const uint64_t cols = L->cols, c0 = b * 32;
    float v[32];
    float amax = 0;
    for (int i = 0; i < 32; i++) {
        v[i] = c0 + i < cols ? clampv(x[c0 + i], lo, hi) : 0.0f;
        const float av = fabsf(v[i]);
        if (av > amax) amax = av;
    }
    const float scale = amax > 0 ? amax / (float)qmax : 0.0f;
    tbx_st16(scales + 2 * b, tbx_mcfq_f16_trunc(scale));
    const float inv = scale != 0 ? 1.0f / scale : 0.0f;
    int32_t q[32];
    for (int i = 0; i < 32; i++) {
        q[i] = 0;
        if (scale == 0) continue;
        if (L->bits == 4 && c0 + i >= cols) continue; /* mantle's q4 path skips padding */
        q[i] = mantle_code(v[i] * inv, qmax);
    }
    pack32(q, L->bits, codes + b * 4 * L->bits);
}

static void mantle_q_row(const tbx_mcfq_layout *L, const float *x, float lo, float hi,
                         uint8_t *scales, uint8_t *codes) {
    for (uint64_t b = 0; b < L->bpr; b++) mantle_q_block(L, x, lo, hi, b, scales, codes);
}

/* Super-block s of a k row, as mantle's quantize writes it. */
static void mantle_k_super(const tbx_mcfq_layout *L, const float *x, float lo, float hi,
                           uint64_t s, uint8_t *supers, uint8_t *sub, uint8_t *codes) {
    const int32_t qmax = (1 << (L->bits - 1)) - 1;
    const uint64_t cols = L->cols;
    float bscale[8] = { 0 };
    float smax = 0;
    for (int j = 0; j < 8; j++) {
        const uint64_t b = s * 8 + (uint64_t)j;
        if (b >= L->bpr) break;
        float amax = 0;
        for (int i = 0; i < 32; i++) {
            const uint64_t c = b * 32 + (uint64_t)i;
            const float av = fabsf(c < cols ? clampv(x[c], lo, hi) : 0.0f);
            if (av > amax) amax = av;
        }
        if (amax == 0) continue;
        bscale[j] = amax / (float)qmax;
        if (bscale[j] > smax) smax = bscale[j];
    }
    const float S = smax;
    tbx_st16(supers + 2 * s, tbx_mcfq_f16_trunc(S));
    for (int j = 0; j < 8; j++) {
        const uint64_t b = s * 8 + (uint64_t)j;
        if (b >= L->bpr) break;
        uint8_t u6 = 0;
        if (bscale[j] > 0 && S > 0) {
            const float ratio = bscale[j] / S;
            const double r = round((double)(ratio * 32.0f));
            int u = (r >= -2147483648.0 && r < 2147483648.0) ? (int)r : INT32_MIN;
            if (u < 1) u = 1;
            else if (u > 63) u = 63;
            u6 = (uint8_t)u;
        }
        sub[b] = u6 & 0x3F;
        float scale = 0;
        if (u6 > 0 && S > 0) scale = S * ((float)u6 / 32.0f);
        const float inv = scale != 0 ? 1 / scale : 0.0f;
        int32_t q[32];
        for (int i = 0; i < 32; i++) {
            const uint64_t c = b * 32 + (uint64_t)i;
            const float v = c < cols ? clampv(x[c], lo, hi) : 0.0f;
            q[i] = scale != 0 ? mantle_code(v * inv, qmax) : 0;
        }
        pack32(q, L->bits, codes + b * 4 * L->bits);
    }
}

static void mantle_k_row(const tbx_mcfq_layout *L, const float *x, float lo, float hi,
                         uint8_t *supers, uint8_t *sub, uint8_t *codes) {
    for (uint64_t s = 0; s < L->spr; s++) mantle_k_super(L, x, lo, hi, s, supers, sub, codes);
}

/* ---- METHOD_BEST --------------------------------------------------------------------------- */
#define F16_MAX 65504.0f

/* Does mantle's f16 conversion of scale s give Inf (s >= 65536)? Such a block has no finite
 * scale: both methods then write mantle's block, whose values decode to Inf/NaN (what the
 * reference gives; the conversion reports them, see src/convert/engine.c). */
static bool f16_overflows(float s) { return (tbx_mcfq_f16_trunc(s) & 0x7FFFu) == 0x7C00u; }

/* Nearest f16 of a non-negative finite scale, capped at the largest finite f16. */
static uint16_t f16_near(float s) { return tbx_f32_to_f16(s < F16_MAX ? s : F16_MAX); }

/* Nearest code of v for a decoded scale d (inv = 1/d), |code| <= qmax. */
static inline int32_t near_code(float v, float inv, float qmax) {
    float t = v * inv;
    if (t > qmax) t = qmax;
    else if (t < -qmax) t = -qmax;
    return (int32_t)(t + (t >= 0 ? 0.5f : -0.5f));
}

/* Codes of 32 values for the decoded scale d (nearest, |code| <= qmax). */
static void block_codes(const float *v, float d, float qmax, int32_t *q) {
    const float inv = 1.0f / d;
    for (int i = 0; i < 32; i++) q[i] = near_code(v[i], inv, qmax);
}

/* Squared error of 32 values for the decoded scale d (INFINITY for a zero or non-finite d),
 * summed in chunks of 8 with an early exit once the sum exceeds `limit` (then the value
 * returned is above limit). The loop body is plain arithmetic the compiler can vectorize;
 * callers pass the values sorted by decreasing magnitude so that a scale too small for the
 * block is dropped after the first chunk. */
static double block_sse(const float *v, float d, float qmax, double limit) {
    if (!(d > 0) || !isfinite(d)) return INFINITY;
    const float inv = 1.0f / d;
    float acc = 0;
    for (int g = 0; g < 32; g += 8) {
        float r2[8];
        for (int i = 0; i < 8; i++) {
            float t = v[g + i] * inv;
            t = t > qmax ? qmax : t;
            t = t < -qmax ? -qmax : t;
            const float c = (float)(int32_t)(t + (t >= 0 ? 0.5f : -0.5f));
            const float r = v[g + i] - c * d;
            r2[i] = r * r;
        }
        acc += ((r2[0] + r2[1]) + (r2[2] + r2[3])) + ((r2[4] + r2[5]) + (r2[6] + r2[7]));
        if ((double)acc > limit) return (double)acc;
    }
    return (double)acc;
}

/* w = v sorted by decreasing |v| (insertion sort of 32). */
static void sort_mag(const float *v, float *w) {
    for (int i = 0; i < 32; i++) {
        const float x = v[i], a = fabsf(x);
        int j = i;
        while (j > 0 && fabsf(w[j - 1]) < a) { w[j] = w[j - 1]; j--; }
        w[j] = x;
    }
}

/* Loads block b of a row: clamped, NaN -> 0, padding 0; returns max |v|. */
static float load_block(const float *x, uint64_t cols, uint64_t b, float lo, float hi, float *v) {
    float amax = 0;
    for (int i = 0; i < 32; i++) {
        const uint64_t c = b * 32 + (uint64_t)i;
        float t = c < cols ? clampv(x[c], lo, hi) : 0.0f;
        if (t != t) t = 0;
        v[i] = t;
        const float a = fabsf(t);
        if (a > amax) amax = a;
    }
    return amax;
}

static void best_q_row(const tbx_mcfq_layout *L, const float *x, float lo, float hi,
                       uint8_t *scales, uint8_t *codes) {
    const float qmax = (float)((1 << (L->bits - 1)) - 1);
    for (uint64_t b = 0; b < L->bpr; b++) {
        float v[32];
        int32_t q[32] = { 0 };
        const float amax = load_block(x, L->cols, b, lo, hi, v);
        if (f16_overflows(amax / qmax)) { /* no finite f16 scale: mantle's block */
            mantle_q_block(L, x, lo, hi, b, scales, codes);
            continue;
        }
        uint16_t best_h = 0;
        if (amax > 0) {
            float w[32];
            sort_mag(v, w);
            const float s = amax / qmax;
            uint16_t cand[20];
            int nc = 0;
            cand[nc++] = f16_near(s);
            cand[nc++] = tbx_mcfq_f16_trunc(s < F16_MAX ? s : F16_MAX);
            cand[nc++] = 0x0400; /* the smallest normal f16 (tiny blocks) */
            for (int j = -2; j <= 10; j++)
                if (j) cand[nc++] = f16_near(s * (1.0f - 0.03f * (float)j));
            double best = INFINITY;
            for (int k = 0; k < nc; k++) {
                const double e = block_sse(w, tbx_mcfq_f16_dec(cand[k]), qmax, best);
                if (e < best) { best = e; best_h = cand[k]; }
            }
            /* least-squares refit of the best codes, then the best one's f16 neighbours */
            if (best < INFINITY) {
                block_codes(v, tbx_mcfq_f16_dec(best_h), qmax, q);
                double sxq = 0, sqq = 0;
                for (int i = 0; i < 32; i++) {
                    sxq += (double)v[i] * q[i];
                    sqq += (double)q[i] * q[i];
                }
                uint16_t more[3];
                int nm = 0;
                if (sqq > 0 && sxq > 0) more[nm++] = f16_near((float)(sxq / sqq));
                if (best_h > 0x0400) more[nm++] = (uint16_t)(best_h - 1);
                if (best_h < 0x7BFF) more[nm++] = (uint16_t)(best_h + 1);
                for (int k = 0; k < nm; k++) {
                    const double e = block_sse(w, tbx_mcfq_f16_dec(more[k]), qmax, best);
                    if (e < best) { best = e; best_h = more[k]; }
                }
                block_codes(v, tbx_mcfq_f16_dec(best_h), qmax, q);
            } else {
                best_h = 0;
            }
        }
        tbx_st16(scales + 2 * b, best_h);
        pack32(q, L->bits, codes + b * 4 * L->bits);
    }
}

/* Best u6 in 1..63 for one block (w: its values sorted by decreasing magnitude, amax = |w[0]|)
 * under the decoded super scale S; its error in *err. Every u6 is tried, starting at the one
 * nearest to amax / qmax and moving outwards alternately, so that the early exit of block_sse
 * drops most of them; limit: give up above it (then *err = INFINITY and 0 is returned). On
 * equal errors the u6 tried first wins. */
static uint8_t best_u6(const float *w, float S, float qmax, double limit, double *err) {
    double best = limit;
    uint8_t bu = 0;
    long u0 = lroundf(32.0f * (fabsf(w[0]) / qmax) / S);
    if (u0 < 1) u0 = 1;
    if (u0 > 63) u0 = 63;
    for (int k = 0; k < 126; k++) {
        const long u = (k & 1) ? u0 + (k + 1) / 2 : u0 - k / 2;
        if (u < 1 || u > 63) continue;
        const double e = block_sse(w, S * ((float)u / 32.0f), qmax, best);
        if (e < best || (bu == 0 && e <= best)) { best = e; bu = (uint8_t)u; }
    }
    *err = bu ? best : INFINITY;
    return bu;
}

static void best_k_row(const tbx_mcfq_layout *L, const float *x, float lo, float hi,
                       uint8_t *supers, uint8_t *sub, uint8_t *codes) {
    const float qmax = (float)((1 << (L->bits - 1)) - 1);
    for (uint64_t s = 0; s < L->spr; s++) {
        float v[8][32], w[8][32];
        float amax[8] = { 0 };
        int nb = 0;
        float smax = 0;
        for (int j = 0; j < 8 && s * 8 + (uint64_t)j < L->bpr; j++, nb++) {
            amax[j] = load_block(x, L->cols, s * 8 + (uint64_t)j, lo, hi, v[j]);
            sort_mag(v[j], w[j]);
            if (amax[j] / qmax > smax) smax = amax[j] / qmax;
        }
        if (f16_overflows(smax)) { /* no finite f16 super scale: mantle's super-block */
            mantle_k_super(L, x, lo, hi, s, supers, sub, codes);
            continue;
        }
        uint16_t best_h = 0;
        uint8_t best_u[8] = { 0 };
        if (smax > 0) {
            uint16_t cand[4];
            cand[0] = f16_near(smax);
            cand[1] = tbx_mcfq_f16_trunc(smax < F16_MAX ? smax : F16_MAX);
            cand[2] = f16_near(smax * (32.0f / 48.0f));
            cand[3] = f16_near(smax * (32.0f / 60.0f));
            double best = INFINITY;
            for (int k = 0; k < 4; k++) {
                bool dup = false;
                for (int m = 0; m < k; m++) dup |= cand[m] == cand[k];
                const float S = tbx_mcfq_f16_dec(cand[k]);
                if (dup || !(S > 0) || !isfinite(S)) continue;
                uint8_t u[8] = { 0 };
                double tot = 0;
                for (int j = 0; j < nb && tot <= best; j++) {
                    if (amax[j] == 0) continue;
                    double e;
                    u[j] = best_u6(w[j], S, qmax, best - tot, &e);
                    tot += e;
                }
                if (tot < best) {
                    best = tot;
                    best_h = cand[k];
                    memcpy(best_u, u, sizeof u);
                }
            }
        }
        tbx_st16(supers + 2 * s, best_h);
        const float S = tbx_mcfq_f16_dec(best_h);
        for (int j = 0; j < nb; j++) {
            const uint64_t b = s * 8 + (uint64_t)j;
            int32_t q[32] = { 0 };
            sub[b] = best_u[j];
            if (best_u[j]) block_codes(v[j], S * ((float)best_u[j] / 32.0f), qmax, q);
            pack32(q, L->bits, codes + b * 4 * L->bits);
        }
    }
}

void tbx_mcfq_quantize_rows(const tbx_mcfq_layout *L, tbx_mcfq_method method, const float *src,
                            uint64_t n, float clip_lo, float clip_hi, uint8_t *scales,
                            uint8_t *sub, uint8_t *codes) {
    for (uint64_t r = 0; r < n; r++) {
        const float *x = src + r * L->cols;
        uint8_t *c = codes + r * L->row_code_bytes;
        if (!L->super) {
            uint8_t *sc = scales + r * L->bpr * 2;
            if (method == TBX_MCFQ_METHOD_MANTLE) mantle_q_row(L, x, clip_lo, clip_hi, sc, c);
            else best_q_row(L, x, clip_lo, clip_hi, sc, c);
        } else {
            uint8_t *sc = scales + r * L->spr * 2, *su = sub + r * L->bpr;
            if (method == TBX_MCFQ_METHOD_MANTLE) mantle_k_row(L, x, clip_lo, clip_hi, sc, su, c);
            else best_k_row(L, x, clip_lo, clip_hi, sc, su, c);
        }
    }
}

/* ---- int8 / int4 ---------------------------------------------------------------------------- */
tbx_status tbx_mcfi_layout_get(uint32_t bits, bool activations, uint64_t nelems,
                               tbx_mcfi_layout *L) {
    if (bits != 8 && bits != 4) return TBX_E_INVALID_ARG;
    memset(L, 0, sizeof *L);
    L->bits = bits;
    L->activations = activations;
    L->nelems = nelems;
    L->scale_off = 0;
    L->zero_off = activations ? 64 : 0;
    L->codes_off = activations ? 128 : 64;
    uint64_t nb;
    if (bits == 8) nb = nelems;
    else nb = nelems / 2 + (nelems & 1);
    L->codes_size = nb;
    if (!tbx_add_u64(L->codes_off, nb, &L->total)) return TBX_E_OVERFLOW;
    return TBX_OK;
}

void tbx_mcfi_params(const tbx_mcfi_layout *L, float clip_lo, float clip_hi, float *scale,
                     float *zero) {
    *scale = 0;
    *zero = 0;
    if (!L->activations) {
        const float qmax = L->bits == 8 ? 127.0f : 7.0f;
        const float a = fabsf(clip_lo) > fabsf(clip_hi) ? fabsf(clip_lo) : fabsf(clip_hi);
        if (a > 0 && isfinite(a)) *scale = a / qmax;
        return;
    }
    const float levels = L->bits == 8 ? 255.0f : 15.0f, qlo = L->bits == 8 ? -128.0f : -8.0f;
    const float range = clip_hi - clip_lo;
    if (!(range > 0) || !isfinite(range)) {
        /* a single value (or nothing usable): code 0 stands for it */
        if (isfinite(clip_lo) && clip_lo != 0) { *scale = fabsf(clip_lo); *zero = clip_lo < 0 ? 1.0f : -1.0f; }
        return;
    }
    *scale = range / levels;
    *zero = roundf(qlo - clip_lo / *scale);
}

void tbx_mcfi_quantize(const tbx_mcfi_layout *L, float scale, float zero, float clip_lo,
                       float clip_hi, const float *src, uint64_t first, uint64_t n,
                       uint8_t *codes) {
    const float qhi = L->bits == 8 ? 127.0f : 7.0f;
    const float qlo = L->activations ? -qhi - 1.0f : -qhi;
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    for (uint64_t i = 0; i < n; i++) {
        float v = clampv(src[i], clip_lo, clip_hi);
        if (v != v) v = 0;
        float t = scale > 0 ? v * inv + zero : 0.0f;
        if (t > qhi) t = qhi;
        else if (t < qlo) t = qlo;
        const int32_t q = (int32_t)roundf(t);
        const uint64_t e = first + i;
        if (L->bits == 8) {
            codes[e] = (uint8_t)(int8_t)q;
        } else {
            uint8_t *p = &codes[e / 2];
            const uint8_t nib = (uint8_t)((uint32_t)q & 0x0Fu);
            *p = (e & 1) ? (uint8_t)((*p & 0x0Fu) | (nib << 4)) : (uint8_t)((*p & 0xF0u) | nib);
        }
    }
}

void tbx_mcfi_dequant(const tbx_mcfi_layout *L, float scale, float zero, const uint8_t *codes,
                      uint64_t first, uint64_t n, float *out) {
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t e = first + i;
        int32_t q;
        if (L->bits == 8) {
            q = (int8_t)codes[e];
        } else {
            const uint32_t nib = (e & 1) ? (uint32_t)(codes[e / 2] >> 4) : (uint32_t)(codes[e / 2] & 0x0Fu);
            q = (int32_t)(nib ^ 8u) - 8;
        }
        out[i] = scale * ((float)q - zero);
    }
}
