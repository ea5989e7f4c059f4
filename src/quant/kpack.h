/*
 * kpack.h - the K-quant block layouts (q2_K .. q6_K) every K-quant quantizer shares: levels and
 * sub-block scales into ggml's block bytes. q4_K/q5_K's 12 scale bytes from eight 6-bit scales
 * and mins (ls, lm: the low 8 bits are used, as ggml's uint8 arithmetic does); q4_K's and q5_K's
 * levels (0..15 / 0..31); q6_K's ql/qh from levels 0..63; a whole q3_K block but d from sixteen
 * scales 0..63 and levels 0..7 (and its scale bytes alone); q2_K's level bytes from levels 0..3.
 * Header-only (static inline, included by ggml.h) so the scalar quantizers (ggml_quant.c,
 * ggml_quant_w.c) and the SIMD ones (ggml_simd_avx2_kref.c, which packs the level bytes 32 at a
 * time and checks them against these) share them without a SIMD file calling a scalar one.
 */
#ifndef TBX_QUANT_KPACK_H
#define TBX_QUANT_KPACK_H

#include <stdint.h>
#include <string.h>

static inline void tbx_gq_pack_q4k_scales(uint8_t *s, const int *ls, const int *lm) {
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = (uint8_t)ls[j];
            s[j + 4] = (uint8_t)lm[j];
        } else {
            s[j + 4] = (uint8_t)((ls[j] & 15) | ((lm[j] & 15) << 4));
            s[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            s[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

static inline void tbx_gq_pack_q4k_levels(uint8_t *q, const uint8_t *L) {
    for (int j = 0; j < 256; j += 64, q += 32)
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

static inline void tbx_gq_pack_q5k_levels(uint8_t *qh, uint8_t *ql, const uint8_t *L) {
    memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < 256; n += 64, ql += 32) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= m1;
            }
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
    }
}

/* L: levels 0..63 (value + 32). */
static inline void tbx_gq_pack_q6k(uint8_t *ql, uint8_t *qh, const uint8_t *L) {
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            const uint8_t q1 = L[j + l] & 15, q2 = L[j + l + 32] & 15;
            const uint8_t q3 = L[j + l + 64] & 15, q4 = L[j + l + 96] & 15;
            ql[l] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                              ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
        }
    }
}

/* the 12 scale bytes of q3_K from sixteen 6-bit scales + 32 (0..63) */
static inline void tbx_gq_pack_q3k_scales(uint8_t *sc, const int *ls) {
    memset(sc, 0, 12);
    for (int j = 0; j < 16; j++) {
        const int l = ls[j];
        if (j < 8)
            sc[j] = (uint8_t)(l & 15);
        else
            sc[j - 8] |= (uint8_t)((l & 15) << 4);
        sc[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
}

/* ls: sixteen 6-bit scales + 32 (0..63); L: levels 0..7 (value + 4). */
static inline void tbx_gq_pack_q3k(uint8_t *blk, const int *ls, const uint8_t *Lin) {
    uint8_t *hmask = blk, *qs = blk + 32;
    uint8_t L[256];
    memcpy(L, Lin, 256);
    tbx_gq_pack_q3k_scales(blk + 96, ls);
    memset(hmask, 0, 32);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < 256; j++) {
        if (L[j] > 3) {
            hmask[m] |= hm;
            L[j] -= 4;
        }
        if (++m == 32) {
            m = 0;
            hm = (uint8_t)(hm << 1);
        }
    }
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
}

static inline void tbx_gq_pack_q2k_levels(uint8_t *qs, const uint8_t *L) {
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
}

#endif /* TBX_QUANT_KPACK_H */
