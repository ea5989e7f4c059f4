/*
 * ggml_simd_avx2_kref.c - AVX2 kernels of ggml's reference K-quant algorithm (q2_K .. q6_K, the
 * default quantizer of every conversion: ggml_quantize_chunk's bytes without an importance
 * matrix).
 *
 * ggml fits each sub-block on its own (make_qkx2_quants for q2_K/q4_K/q5_K, make_qx_quants for
 * q6_K, make_q3_quants for q3_K; the scalar port is in ggml_quant.c), summing over its values in
 * order. Here the sub-blocks of a super-block are the lanes of a vector: a super-block is
 * transposed (8 sub-blocks of 32 values, or two groups of 8 sub-blocks of 16), and every lane
 * performs the same IEEE operations, in the same order, as the scalar code does for its
 * sub-block: sums accumulate in increasing value index, each multiply and add is rounded on its
 * own (no FMA: ggml.h's pragma, and the target does not enable it), ggml's magic-number rounding
 * is done on the same bits, comparisons become per-lane masks and blends. A candidate's levels
 * are not kept: the winning candidate's (iscale, min) is, and its levels are recomputed by the
 * same expression at the end. So the bytes are identical to the scalar reference
 * (tests/unit/test_ggml_quant.c), hence to ggml's. The per-super-block steps between the fits
 * and the final levels (largest sub-block scale, quantized sub-scales, f16 scales) are a few
 * scalar operations written as ggml_quant.c's reference writes them; the block layouts come
 * from kpack.h (through ggml.h).
 *
 * A super-block holding a NaN or an infinity goes to the scalar reference (the fallback
 * dispatch.c passes in): NaN payloads through the rounding are the one thing a different
 * instruction order could change. Every finite input, subnormals and values beyond the type's
 * range included, is encoded here.
 */
#include "ggml.h"
#include "core.h"

#include <math.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TBX_GGML_NO_SIMD)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

#define KR_EPS 1e-15f /* ggml's GROUP_MAX_EPS of make_qx_quants / make_q3_quants */
#define KR_MAXN 32    /* values per sub-block at most */

AVX2 static inline __m256 kr_abs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

/* tbx_gq_nearest of 8 lanes: the same addition and the same bits of its sum */
AVX2 static inline __m256i kr_nearest(__m256 f) {
    const __m256 v = _mm256_add_ps(f, _mm256_set1_ps(12582912.0f));
    return _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x007fffff)),
                            _mm256_set1_epi32(0x00400000));
}
/* l < lo ? lo : l > hi ? hi : l */
AVX2 static inline __m256i kr_clamp(__m256i l, __m256i lo, __m256i hi) {
    return _mm256_max_epi32(_mm256_min_epi32(l, hi), lo);
}
/* the low bytes of 8 int32 lanes (each 0..255) to p[0..7] */
AVX2 static inline void kr_store8(uint8_t *p, __m256i l) {
    const __m256i w = _mm256_packs_epi32(l, l);
    const __m256i b = _mm256_packus_epi16(w, w);
    _mm_storel_epi64((__m128i *)p, _mm_unpacklo_epi32(_mm256_castsi256_si128(b),
                                                      _mm256_extracti128_si256(b, 1)));
}
AVX2 static inline __m256i kr_load8(const uint8_t *p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* 1 when the 256 values of a super-block are all finite */
AVX2 static int kr_finite(const float *x) {
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 bad = _mm256_setzero_ps();
    for (int k = 0; k < 256; k += 8)
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(kr_abs(_mm256_loadu_ps(x + k)), inf, _CMP_NLT_UQ));
    return _mm256_movemask_ps(bad) == 0;
}

/* ---- the fits: lane j of xt[8*i + j] is value i of sub-block j -------------------------- */
/* make_qkx2_quants of 8 sub-blocks of n values, levels 0..nmax, candidates
 * (rmin + 0.1*is + nmax) / (max - min) for is = 0..nstep. Weights |x| and absolute errors when
 * `mad` (q2_K), else sqrt(sum x^2 / n) + |x| and squared errors (q4_K, q5_K). Out: scale[8],
 * mins[8] (-min), Lt[8*i + j] the levels. */
AVX2 static void kr_qkx2(const float *xt, int n, int nmax, float rmin, int nstep, int mad,
                         float *scale_out, float *min_out, uint8_t *Lt) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256i ilo = _mm256_setzero_si256(), ihi = _mm256_set1_epi32(nmax);
    __m256 w[KR_MAXN], la[KR_MAXN];
    if (mad) {
        for (int i = 0; i < n; i++) w[i] = kr_abs(_mm256_loadu_ps(xt + 8 * i));
    } else {
        __m256 s2 = zero;
        for (int i = 0; i < n; i++) {
            const __m256 x = _mm256_loadu_ps(xt + 8 * i);
            s2 = _mm256_add_ps(s2, _mm256_mul_ps(x, x));
        }
        const __m256 av = _mm256_sqrt_ps(_mm256_div_ps(s2, _mm256_set1_ps((float)n)));
        for (int i = 0; i < n; i++) w[i] = _mm256_add_ps(av, kr_abs(_mm256_loadu_ps(xt + 8 * i)));
    }
    /* min, max (the scalar's `if (x < mn) mn = x` is minps(x, mn)), sum w, sum w*x */
    const __m256 x0 = _mm256_loadu_ps(xt);
    __m256 mn = x0, mx = x0, sw = w[0], sx = _mm256_mul_ps(w[0], x0);
    for (int i = 1; i < n; i++) {
        const __m256 x = _mm256_loadu_ps(xt + 8 * i);
        mn = _mm256_min_ps(x, mn);
        mx = _mm256_max_ps(x, mx);
        sw = _mm256_add_ps(sw, w[i]);
        sx = _mm256_add_ps(sx, _mm256_mul_ps(w[i], x));
    }
    mn = _mm256_andnot_ps(_mm256_cmp_ps(mn, zero, _CMP_GT_OQ), mn);
    const __m256 flat = _mm256_cmp_ps(mx, mn, _CMP_EQ_OQ), mn0 = mn;
    /* the first candidate, nmax / (max - min), and its error */
    __m256 iscale = _mm256_div_ps(_mm256_set1_ps((float)nmax), _mm256_sub_ps(mx, mn));
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), iscale), best = zero;
    for (int i = 0; i < n; i++) {
        const __m256 x = _mm256_loadu_ps(xt + 8 * i);
        const __m256i l = kr_clamp(kr_nearest(_mm256_mul_ps(iscale, _mm256_sub_ps(x, mn))), ilo, ihi);
        const __m256 d = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, _mm256_cvtepi32_ps(l)), mn), x);
        best = _mm256_add_ps(best, _mm256_mul_ps(w[i], mad ? kr_abs(d) : _mm256_mul_ps(d, d)));
    }
    __m256 bis = iscale, bmn = mn; /* what the kept levels were computed from */
    for (int is = 0; is <= nstep; is++) {
        const float num = rmin + 0.1f * (float)is + (float)nmax;
        const __m256 isc = _mm256_div_ps(_mm256_set1_ps(num), _mm256_sub_ps(mx, mn));
        __m256 sl = zero, sl2 = zero, sxl = zero;
        for (int i = 0; i < n; i++) {
            const __m256 x = _mm256_loadu_ps(xt + 8 * i);
            const __m256i l = kr_clamp(kr_nearest(_mm256_mul_ps(isc, _mm256_sub_ps(x, mn))), ilo, ihi);
            const __m256 lf = _mm256_cvtepi32_ps(l), wl = _mm256_mul_ps(w[i], lf);
            la[i] = lf;
            sl = _mm256_add_ps(sl, wl);
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(wl, lf));
            sxl = _mm256_add_ps(sxl, _mm256_mul_ps(wl, x));
        }
        const __m256 D = _mm256_sub_ps(_mm256_mul_ps(sw, sl2), _mm256_mul_ps(sl, sl));
        const __m256 pos = _mm256_cmp_ps(D, zero, _CMP_GT_OQ);
        if (!_mm256_movemask_ps(pos)) continue;
        __m256 ts = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sw, sxl), _mm256_mul_ps(sx, sl)), D);
        __m256 tm = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sl2, sx), _mm256_mul_ps(sl, sxl)), D);
        const __m256 mp = _mm256_cmp_ps(tm, zero, _CMP_GT_OQ);
        tm = _mm256_andnot_ps(mp, tm);
        ts = _mm256_blendv_ps(ts, _mm256_div_ps(sxl, sl2), mp);
        __m256 cur = zero;
        for (int i = 0; i < n; i++) {
            const __m256 x = _mm256_loadu_ps(xt + 8 * i);
            const __m256 d = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(ts, la[i]), tm), x);
            cur = _mm256_add_ps(cur, _mm256_mul_ps(w[i], mad ? kr_abs(d) : _mm256_mul_ps(d, d)));
        }
        const __m256 better = _mm256_and_ps(pos, _mm256_cmp_ps(cur, best, _CMP_LT_OQ));
        if (!_mm256_movemask_ps(better)) continue;
        best = _mm256_blendv_ps(best, cur, better);
        scale = _mm256_blendv_ps(scale, ts, better);
        bis = _mm256_blendv_ps(bis, isc, better);
        bmn = _mm256_blendv_ps(bmn, mn, better);
        mn = _mm256_blendv_ps(mn, tm, better);
    }
    /* flat lanes: scale 0, levels 0 (iscale 0 on finite values rounds to 0), -min of the data */
    _mm256_storeu_ps(scale_out, _mm256_andnot_ps(flat, scale));
    _mm256_storeu_ps(min_out, _mm256_xor_ps(_mm256_blendv_ps(mn, mn0, flat), _mm256_set1_ps(-0.0f)));
    bis = _mm256_andnot_ps(flat, bis);
    bmn = _mm256_andnot_ps(flat, bmn);
    for (int i = 0; i < n; i++) {
        const __m256 x = _mm256_loadu_ps(xt + 8 * i);
        kr_store8(Lt + 8 * i, kr_clamp(kr_nearest(_mm256_mul_ps(bis, _mm256_sub_ps(x, bmn))), ilo, ihi));
    }
}

/* The first value of largest |x| per lane (0 when all are 0), and its |x|. */
AVX2 static inline void kr_signed_amax(const float *xt, int n, __m256 *amax, __m256 *max) {
    __m256 a = _mm256_setzero_ps(), m = _mm256_setzero_ps();
    for (int i = 0; i < n; i++) {
        const __m256 x = _mm256_loadu_ps(xt + 8 * i), ax = kr_abs(x);
        const __m256 gt = _mm256_cmp_ps(ax, a, _CMP_GT_OQ);
        a = _mm256_blendv_ps(a, ax, gt);
        m = _mm256_blendv_ps(m, x, gt);
    }
    *amax = a;
    *max = m;
}

/* make_qx_quants (weights x^2) of 8 sub-blocks of n values, levels -nmax..nmax-1: candidates
 * -(nmax + 0.1*is) / max, is = -9..9. Out: scale[8], Lt = level + nmax (0 for a lane whose
 * largest |x| is below KR_EPS: scale 0). */
AVX2 static void kr_qx(const float *xt, int n, int nmax, float *scale_out, uint8_t *Lt) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256i ilo = _mm256_set1_epi32(-nmax), ihi = _mm256_set1_epi32(nmax - 1);
    __m256 amax, max;
    kr_signed_amax(xt, n, &amax, &max);
    const __m256 tiny = _mm256_cmp_ps(amax, _mm256_set1_ps(KR_EPS), _CMP_LT_OQ);
    __m256 bis = _mm256_div_ps(_mm256_set1_ps((float)-nmax), max), scale, best;
    {
        __m256 slx = zero, sl2 = zero;
        for (int i = 0; i < n; i++) {
            const __m256 x = _mm256_loadu_ps(xt + 8 * i), w = _mm256_mul_ps(x, x);
            const __m256 lf = _mm256_cvtepi32_ps(kr_clamp(kr_nearest(_mm256_mul_ps(bis, x)), ilo, ihi));
            slx = _mm256_add_ps(slx, _mm256_mul_ps(_mm256_mul_ps(w, x), lf));
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(w, lf), lf));
        }
        scale = _mm256_and_ps(_mm256_cmp_ps(sl2, zero, _CMP_NEQ_UQ), _mm256_div_ps(slx, sl2));
        best = _mm256_mul_ps(scale, slx);
    }
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        const float num = -((float)nmax + 0.1f * (float)is);
        const __m256 isc = _mm256_div_ps(_mm256_set1_ps(num), max);
        __m256 slx = zero, sl2 = zero;
        for (int i = 0; i < n; i++) {
            const __m256 x = _mm256_loadu_ps(xt + 8 * i), w = _mm256_mul_ps(x, x);
            const __m256 lf = _mm256_cvtepi32_ps(kr_clamp(kr_nearest(_mm256_mul_ps(isc, x)), ilo, ihi));
            slx = _mm256_add_ps(slx, _mm256_mul_ps(_mm256_mul_ps(w, x), lf));
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(w, lf), lf));
        }
        const __m256 ok = _mm256_and_ps(_mm256_cmp_ps(sl2, zero, _CMP_GT_OQ),
                                        _mm256_cmp_ps(_mm256_mul_ps(slx, slx),
                                                      _mm256_mul_ps(best, sl2), _CMP_GT_OQ));
        if (!_mm256_movemask_ps(ok)) continue;
        const __m256 s = _mm256_div_ps(slx, sl2);
        bis = _mm256_blendv_ps(bis, isc, ok);
        scale = _mm256_blendv_ps(scale, s, ok);
        best = _mm256_blendv_ps(best, _mm256_mul_ps(s, slx), ok);
    }
    _mm256_storeu_ps(scale_out, _mm256_andnot_ps(tiny, scale));
    const __m256i keep = _mm256_castps_si256(_mm256_andnot_ps(tiny, _mm256_castsi256_ps(_mm256_set1_epi32(-1))));
    const __m256i off = _mm256_set1_epi32(nmax);
    for (int i = 0; i < n; i++) {
        const __m256 x = _mm256_loadu_ps(xt + 8 * i);
        const __m256i l = kr_clamp(kr_nearest(_mm256_mul_ps(bis, x)), ilo, ihi);
        kr_store8(Lt + 8 * i, _mm256_and_si256(_mm256_add_epi32(l, off), keep));
    }
}

/* make_q3_quants (weights x^2, greedy refinement of one level at a time, up to 5 passes) of
 * `ng` groups of 8 sub-blocks of n values (group g at xt + 8*n*g), levels -nmax..nmax-1. The
 * refinement is a chain of dependent divisions per lane, so the groups run interleaved. A lane
 * whose pass changed nothing would change nothing in a further pass (the same state gives the
 * same decisions), so the passes run while any lane changes. Out: scale[8*g + j], Lt (per
 * group) = level + nmax (0 for a lane whose largest |x| is below KR_EPS: scale 0). */
#define KR_Q3_MAXG 4
AVX2 static inline __attribute__((always_inline)) void
kr_q3(const float *xt, int ng, int n, int nmax, float *scale_out, uint8_t *Lt) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256i ilo = _mm256_set1_epi32(-nmax), ihi = _mm256_set1_epi32(nmax - 1);
    __m256 L[KR_Q3_MAXG][KR_MAXN], slx[KR_Q3_MAXG], sl2[KR_Q3_MAXG], tiny[KR_Q3_MAXG];
    for (int g = 0; g < ng; g++) {
        const float *xg = xt + 8 * n * g;
        __m256 amax, max;
        kr_signed_amax(xg, n, &amax, &max);
        tiny[g] = _mm256_cmp_ps(amax, _mm256_set1_ps(KR_EPS), _CMP_LT_OQ);
        const __m256 iscale = _mm256_div_ps(_mm256_set1_ps((float)-nmax), max);
        __m256 a = zero, b = zero;
        for (int i = 0; i < n; i++) {
            const __m256 x = _mm256_loadu_ps(xg + 8 * i), w = _mm256_mul_ps(x, x);
            const __m256 l = _mm256_cvtepi32_ps(kr_clamp(kr_nearest(_mm256_mul_ps(iscale, x)), ilo, ihi));
            L[g][i] = l;
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_mul_ps(w, x), l));
            b = _mm256_add_ps(b, _mm256_mul_ps(_mm256_mul_ps(w, l), l));
        }
        slx[g] = a;
        sl2[g] = b;
    }
    for (int itry = 0; itry < 5; itry++) {
        __m256 changed = zero;
        for (int i = 0; i < n; i++) {
            for (int g = 0; g < ng; g++) {
                const __m256 x = _mm256_loadu_ps(xt + 8 * n * g + 8 * i), w = _mm256_mul_ps(x, x);
                const __m256 wx = _mm256_mul_ps(w, x), l = L[g][i];
                const __m256 s1 = _mm256_sub_ps(slx[g], _mm256_mul_ps(wx, l));
                const __m256 s2 = _mm256_sub_ps(sl2[g], _mm256_mul_ps(_mm256_mul_ps(w, l), l));
                const __m256 nl = _mm256_cvtepi32_ps(
                    kr_clamp(kr_nearest(_mm256_div_ps(_mm256_mul_ps(x, s2), s1)), ilo, ihi));
                const __m256 c = _mm256_and_ps(_mm256_cmp_ps(s1, zero, _CMP_GT_OQ),
                                               _mm256_cmp_ps(nl, l, _CMP_NEQ_OQ));
                const __m256 s1n = _mm256_add_ps(s1, _mm256_mul_ps(wx, nl));
                const __m256 s2n = _mm256_add_ps(s2, _mm256_mul_ps(_mm256_mul_ps(w, nl), nl));
                const __m256 gain =
                    _mm256_cmp_ps(_mm256_mul_ps(_mm256_mul_ps(s1n, s1n), sl2[g]),
                                  _mm256_mul_ps(_mm256_mul_ps(slx[g], slx[g]), s2n), _CMP_GT_OQ);
                const __m256 take =
                    _mm256_and_ps(c, _mm256_and_ps(_mm256_cmp_ps(s2n, zero, _CMP_GT_OQ), gain));
                L[g][i] = _mm256_blendv_ps(l, nl, take);
                slx[g] = _mm256_blendv_ps(slx[g], s1n, take);
                sl2[g] = _mm256_blendv_ps(sl2[g], s2n, take);
                changed = _mm256_or_ps(changed, take);
            }
        }
        if (!_mm256_movemask_ps(changed)) break;
    }
    const __m256i off = _mm256_set1_epi32(nmax);
    for (int g = 0; g < ng; g++) {
        const __m256 scale = _mm256_and_ps(_mm256_cmp_ps(sl2[g], zero, _CMP_GT_OQ),
                                           _mm256_div_ps(slx[g], sl2[g]));
        _mm256_storeu_ps(scale_out + 8 * g, _mm256_andnot_ps(tiny[g], scale));
        const __m256i keep = _mm256_castps_si256(
            _mm256_andnot_ps(tiny[g], _mm256_castsi256_ps(_mm256_set1_epi32(-1))));
        for (int i = 0; i < n; i++)
            kr_store8(Lt + 8 * n * g + 8 * i,
                      _mm256_and_si256(_mm256_add_epi32(_mm256_cvtps_epi32(L[g][i]), off), keep));
    }
}

/* ---- final levels for the quantized scales: lanes with d != 0 only ------------------------ */
/* Lt = clamp(nearest((x + m) / d), 0, nmax) */
AVX2 static void kr_levels_affine(const float *xt, int n, const float *d, const float *m, int nmax,
                                  uint8_t *Lt) {
    const __m256 vd = _mm256_loadu_ps(d), vm = _mm256_loadu_ps(m);
    const __m256 upd = _mm256_cmp_ps(vd, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    if (!_mm256_movemask_ps(upd)) return;
    const __m256i ilo = _mm256_setzero_si256(), ihi = _mm256_set1_epi32(nmax), u = _mm256_castps_si256(upd);
    for (int i = 0; i < n; i++) {
        const __m256 x = _mm256_loadu_ps(xt + 8 * i);
        const __m256i l = kr_clamp(kr_nearest(_mm256_div_ps(_mm256_add_ps(x, vm), vd)), ilo, ihi);
        kr_store8(Lt + 8 * i, _mm256_blendv_epi8(kr_load8(Lt + 8 * i), l, u));
    }
}
/* Lt = clamp(nearest(x / d), -nmax, nmax-1) + nmax */
AVX2 static void kr_levels_symm(const float *xt, int n, const float *d, int nmax, uint8_t *Lt) {
    const __m256 vd = _mm256_loadu_ps(d);
    const __m256 upd = _mm256_cmp_ps(vd, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    if (!_mm256_movemask_ps(upd)) return;
    const __m256i ilo = _mm256_set1_epi32(-nmax), ihi = _mm256_set1_epi32(nmax - 1);
    const __m256i off = _mm256_set1_epi32(nmax), u = _mm256_castps_si256(upd);
    for (int i = 0; i < n; i++) {
        const __m256 x = _mm256_loadu_ps(xt + 8 * i);
        const __m256i l = _mm256_add_epi32(kr_clamp(kr_nearest(_mm256_div_ps(x, vd)), ilo, ihi), off);
        kr_store8(Lt + 8 * i, _mm256_blendv_epi8(kr_load8(Lt + 8 * i), l, u));
    }
}

/* ---- the level bytes of the block layouts (kpack.h's, 32 levels at a time) ---------------- */
/* v >> s in each byte, as 0/1 of bit `bit` */
AVX2 static inline __m256i kr_bit(__m256i v, int bit) {
    return _mm256_and_si256(_mm256_srli_epi16(v, bit), _mm256_set1_epi8(1));
}
AVX2 static inline __m256i kr_ld32(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
AVX2 static inline void kr_st32(uint8_t *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }
/* four runs of 32 levels (two bits each) into one 32-byte run: a | b << 2 | c << 4 | d << 6 */
AVX2 static inline __m256i kr_crumbs(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i m3 = _mm256_set1_epi8(3);
    return _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(a, m3), _mm256_slli_epi16(_mm256_and_si256(b, m3), 2)),
        _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(c, m3), 4),
                        _mm256_slli_epi16(_mm256_and_si256(d, m3), 6)));
}
/* bit `bit` of the 8 runs of 32 levels as bit k of byte l (q3_K's hmask, q5_K's qh) */
AVX2 static inline __m256i kr_highbits(const uint8_t *L, int bit) {
    __m256i h = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++) h = _mm256_or_si256(h, _mm256_slli_epi16(kr_bit(kr_ld32(L + 32 * k), bit), k));
    return h;
}
/* two runs of 32 levels (four bits each): a | b << 4 */
AVX2 static inline __m256i kr_nibbles(__m256i a, __m256i b) {
    const __m256i m15 = _mm256_set1_epi8(15);
    return _mm256_or_si256(_mm256_and_si256(a, m15), _mm256_slli_epi16(_mm256_and_si256(b, m15), 4));
}
/* q2_K: levels 0..3 (tbx_gq_pack_q2k_levels) */
AVX2 static void kr_pack_q2k(uint8_t *qs, const uint8_t *L) {
    for (int h = 0; h < 2; h++, L += 128)
        kr_st32(qs + 32 * h, kr_crumbs(kr_ld32(L), kr_ld32(L + 32), kr_ld32(L + 64), kr_ld32(L + 96)));
}
/* q3_K: levels 0..7 (tbx_gq_pack_q3k): bit 2 to hmask, bits 0..1 to qs */
AVX2 static void kr_pack_q3k(uint8_t *blk, const int *ls, const uint8_t *L) {
    kr_st32(blk, kr_highbits(L, 2));
    kr_pack_q2k(blk + 32, L);
    tbx_gq_pack_q3k_scales(blk + 96, ls);
}
/* q4_K: levels 0..15 (tbx_gq_pack_q4k_levels) */
AVX2 static void kr_pack_q4k(uint8_t *q, const uint8_t *L) {
    for (int c = 0; c < 4; c++) kr_st32(q + 32 * c, kr_nibbles(kr_ld32(L + 64 * c), kr_ld32(L + 64 * c + 32)));
}
/* q5_K: levels 0..31 (tbx_gq_pack_q5k_levels): bit 4 to qh, bits 0..3 to ql */
AVX2 static void kr_pack_q5k(uint8_t *qh, uint8_t *ql, const uint8_t *L) {
    kr_st32(qh, kr_highbits(L, 4));
    kr_pack_q4k(ql, L);
}
/* q6_K: levels 0..63 (tbx_gq_pack_q6k) */
AVX2 static void kr_pack_q6k(uint8_t *ql, uint8_t *qh, const uint8_t *L) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++, L += 128, ql += 64, qh += 32) {
        const __m256i a = kr_ld32(L), b = kr_ld32(L + 32), c = kr_ld32(L + 64), d = kr_ld32(L + 96);
        kr_st32(ql, kr_nibbles(a, c));
        kr_st32(ql + 32, kr_nibbles(b, d));
        const __m256i ha = _mm256_and_si256(_mm256_srli_epi16(a, 4), m3);
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(b, 4), m3);
        const __m256i hc = _mm256_and_si256(_mm256_srli_epi16(c, 4), m3);
        const __m256i hd = _mm256_and_si256(_mm256_srli_epi16(d, 4), m3);
        kr_st32(qh, kr_crumbs(ha, hb, hc, hd));
    }
}

/* ---- the quantizers (one super-block at a time; the steps between the fits as in
 * ggml_quant.c's reference) ------------------------------------------------------------------ */
AVX2 static void kr_q45_K(const float *x, void *dst, uint64_t nb, tbx_quant_fn fallback, int nmax) {
    const tbx_kq_ops *ops = tbx_kq_ops_avx2();
    const int is5 = nmax == 31;
    const size_t bb = is5 ? 176 : 144;
    uint8_t *blk = (uint8_t *)dst, Lt[256], L[256];
    float xt[256], scales[8], mins[8], d[8], m[8];
    int ls[8], lm[8];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += bb) {
        if (!kr_finite(x)) {
            fallback(x, blk, 1);
            continue;
        }
        ops->transpose(x, 32, xt);
        kr_qkx2(xt, 32, nmax, is5 ? -0.5f : -1.0f, is5 ? 15 : 20, 0, scales, mins, Lt);
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
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
        tbx_st16(blk, tbx_f32_to_f16(max_scale / 63.0f));
        tbx_st16(blk + 2, tbx_f32_to_f16(max_min / 63.0f));
        const float dd = tbx_f16_to_f32(tbx_ld16(blk)), dm = tbx_f16_to_f32(tbx_ld16(blk + 2));
        for (int j = 0; j < 8; j++) {
            d[j] = dd * (float)ls[j];
            m[j] = dm * (float)lm[j];
        }
        kr_levels_affine(xt, 32, d, m, nmax, Lt);
        ops->untranspose(Lt, 32, 1, 0, L);
        if (is5)
            kr_pack_q5k(blk + 16, blk + 48, L);
        else
            kr_pack_q4k(blk + 16, L);
    }
}
AVX2 static void kr_q4_K(const float *x, void *dst, uint64_t nb, tbx_quant_fn fallback) {
    kr_q45_K(x, dst, nb, fallback, 15);
}
AVX2 static void kr_q5_K(const float *x, void *dst, uint64_t nb, tbx_quant_fn fallback) {
    kr_q45_K(x, dst, nb, fallback, 31);
}

AVX2 static void kr_q2_K(const float *x, void *dst, uint64_t nb, tbx_quant_fn fallback) {
    const tbx_kq_ops *ops = tbx_kq_ops_avx2();
    uint8_t *blk = (uint8_t *)dst, Lt[256], L[256];
    float xt[256], scales[16], mins[16], d[16], m[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 84) {
        if (!kr_finite(x)) {
            fallback(x, blk, 1);
            continue;
        }
        for (int g = 0; g < 2; g++) {
            ops->transpose(x + 128 * g, 16, xt + 128 * g);
            kr_qkx2(xt + 128 * g, 16, 3, -0.5f, 15, 1, scales + 8 * g, mins + 8 * g, Lt + 128 * g);
        }
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        uint8_t *sc = blk;
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) sc[j] = (uint8_t)tbx_gq_nearest(iscale * scales[j]);
            tbx_st16(blk + 80, tbx_f32_to_f16(max_scale / 15.0f));
        } else {
            memset(sc, 0, 16);
            tbx_st16(blk + 80, tbx_f32_to_f16(0.0f));
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++)
                sc[j] |= (uint8_t)((unsigned)tbx_gq_nearest(iscale * mins[j]) << 4);
            tbx_st16(blk + 82, tbx_f32_to_f16(max_min / 15.0f));
        } else {
            tbx_st16(blk + 82, tbx_f32_to_f16(0.0f));
        }
        const float dd = tbx_f16_to_f32(tbx_ld16(blk + 80)), dm = tbx_f16_to_f32(tbx_ld16(blk + 82));
        for (int j = 0; j < 16; j++) {
            d[j] = dd * (float)(sc[j] & 15);
            m[j] = dm * (float)(sc[j] >> 4);
        }
        for (int g = 0; g < 2; g++)
            kr_levels_affine(xt + 128 * g, 16, d + 8 * g, m + 8 * g, 3, Lt + 128 * g);
        ops->untranspose(Lt, 16, 2, 0, L);
        kr_pack_q2k(blk + 16, L);
    }
}

AVX2 static void kr_q6_K(const float *x, void *dst, uint64_t nb, tbx_quant_fn fallback) {
    const tbx_kq_ops *ops = tbx_kq_ops_avx2();
    uint8_t *blk = (uint8_t *)dst, Lt[256], L[256];
    float xt[256], scales[16], d[16];
    for (uint64_t i = 0; i < nb; i++, x += 256, blk += 210) {
        if (!kr_finite(x)) {
            fallback(x, blk, 1);
            continue;
        }
        for (int g = 0; g < 2; g++) {
            ops->transpose(x + 128 * g, 16, xt + 128 * g);
            kr_qx(xt + 128 * g, 16, 32, scales + 8 * g, Lt + 128 * g);
        }
        float max_scale = 0, max_abs = 0;
        for (int j = 0; j < 16; j++) {
            const float a = fabsf(scales[j]);
            if (a > max_abs) {
                max_abs = a;
                max_scale = scales[j];
            }
        }
        if (max_abs < KR_EPS) {
            memset(blk, 0, 210);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        tbx_st16(blk + 208, tbx_f32_to_f16(1 / iscale));
        int8_t *sc = (int8_t *)(blk + 192);
        for (int j = 0; j < 16; j++) {
            const int l = tbx_gq_nearest(iscale * scales[j]);
            sc[j] = (int8_t)(l > 127 ? 127 : l < -128 ? -128 : l);
        }
        const float dd = tbx_f16_to_f32(tbx_ld16(blk + 208));
        for (int j = 0; j < 16; j++) d[j] = dd * (float)sc[j];
        for (int g = 0; g < 2; g++) kr_levels_symm(xt + 128 * g, 16, d + 8 * g, 32, Lt + 128 * g);
        ops->untranspose(Lt, 16, 2, 0, L);
        kr_pack_q6k(blk, blk + 128, L);
    }
}

/* The steps of q3_K after the fits, for one super-block (xt: its two groups, Lt their levels). */
AVX2 static void kr_q3_K_finish(const float *xt, const float *scales, uint8_t *Lt, uint8_t *blk) {
    const tbx_kq_ops *ops = tbx_kq_ops_avx2();
    uint8_t L[256];
    float d[16];
    int ls[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        const float s = fabsf(scales[j]);
        if (s > amax) {
            amax = s;
            max_scale = scales[j];
        }
    }
    float dv = 0.0f;
    if (max_scale != 0.0f) {
        const float iscale = -32.0f / max_scale;
        for (int j = 0; j < 16; j++) {
            const int l = (int8_t)tbx_gq_nearest(iscale * scales[j]);
            ls[j] = (l < -32 ? -32 : l > 31 ? 31 : l) + 32;
        }
        dv = 1 / iscale;
    } else {
        for (int j = 0; j < 16; j++) ls[j] = 0;
    }
    tbx_st16(blk + 108, tbx_f32_to_f16(dv));
    const float dd = tbx_f16_to_f32(tbx_ld16(blk + 108));
    for (int j = 0; j < 16; j++) d[j] = dd * (float)(ls[j] - 32);
    for (int g = 0; g < 2; g++) kr_levels_symm(xt + 128 * g, 16, d + 8 * g, 4, Lt + 128 * g);
    ops->untranspose(Lt, 16, 2, 0, L);
    kr_pack_q3k(blk, ls, L);
}

/* Two super-blocks at a time (four groups: the refinement's dependent divisions of four
 * independent chains overlap), one when a pair is not available or not all finite. */
AVX2 static void kr_q3_K(const float *x, void *dst, uint64_t nb, tbx_quant_fn fallback) {
    const tbx_kq_ops *ops = tbx_kq_ops_avx2();
    uint8_t *blk = (uint8_t *)dst, Lt[512];
    float xt[512], scales[32];
    uint64_t i = 0;
    while (i < nb) {
        const int fa = kr_finite(x);
        if (!fa) {
            fallback(x, blk, 1);
            i++, x += 256, blk += 110;
            continue;
        }
        const int pair = i + 1 < nb && kr_finite(x + 256);
        const int nblk = pair ? 2 : 1;
        for (int g = 0; g < 2 * nblk; g++) ops->transpose(x + 128 * g, 16, xt + 128 * g);
        if (pair)
            kr_q3(xt, 4, 16, 4, scales, Lt);
        else
            kr_q3(xt, 2, 16, 4, scales, Lt);
        for (int k = 0; k < nblk; k++)
            kr_q3_K_finish(xt + 256 * k, scales + 16 * k, Lt + 256 * k, blk + 110 * k);
        i += (uint64_t)nblk, x += 256 * nblk, blk += 110 * nblk;
    }
}

tbx_quant_fb_fn tbx_ggml_quant_kref_avx2_for(tbx_dtype dt) {
    if (!tbx_kq_ops_avx2()) return NULL;
    switch (dt) {
    case TBX_DT_Q2_K: return kr_q2_K;
    case TBX_DT_Q3_K: return kr_q3_K;
    case TBX_DT_Q4_K: return kr_q4_K;
    case TBX_DT_Q5_K: return kr_q5_K;
    case TBX_DT_Q6_K: return kr_q6_K;
    default: return NULL;
    }
}

#else /* no x86 SIMD kernels in this build */

tbx_quant_fb_fn tbx_ggml_quant_kref_avx2_for(tbx_dtype dt) {
    (void)dt;
    return NULL;
}

#endif
