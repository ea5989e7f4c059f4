/*
 * mcf_interim.c - INTERIM layout arithmetic and scalar reference decoder of mcfq.h, written on
 * branch mcfquant while the MCF driver's own (src/quant/mcf_dequant.c, branch mcf) is not there
 * yet. Delete this file when that one is merged.
 */
#include "mcfq.h"
#include "ggml.h"

tbx_status tbx_mcfq_layout_get(tbx_mcfq_kind kind, uint64_t rows, uint64_t cols,
                               tbx_mcfq_layout *L) {
    static const uint32_t bits[] = { 8, 4, 6, 4, 3, 2 };
    if ((unsigned)kind >= TBX_MCFQ_KIND_COUNT) return TBX_E_INVALID_ARG;
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->bits = bits[kind];
    L->super = kind >= TBX_MCFQ_K6;
    L->rows = rows;
    L->cols = cols;
    L->bpr = cols / 32 + (cols % 32 != 0);
    L->spr = L->super ? L->bpr / 8 + (L->bpr % 8 != 0) : 0;
    L->row_code_bytes = L->bpr * 4 * L->bits; /* cannot overflow: bpr < 2^59 */
    if (rows == 0 || cols == 0) return TBX_OK;
    uint64_t tb, ts, off;
    if (!tbx_mul_u64(rows, L->bpr, &tb)) return TBX_E_OVERFLOW;
    if (!tbx_mul_u64(rows, L->super ? L->spr : L->bpr, &ts) || !tbx_mul_u64(ts, 2, &ts))
        return TBX_E_OVERFLOW;
    L->scales_off = 0;
    L->scales_size = ts;
    if (!tbx_align_up_u64(ts, 64, &off)) return TBX_E_OVERFLOW;
    if (L->super) {
        L->sub_off = off;
        L->sub_size = tb;
        if (!tbx_add_u64(off, tb, &off) || !tbx_align_up_u64(off, 64, &off)) return TBX_E_OVERFLOW;
    }
    L->codes_off = off;
    if (!tbx_mul_u64(rows, L->row_code_bytes, &L->codes_size)) return TBX_E_OVERFLOW;
    if (!tbx_add_u64(off, L->codes_size, &L->total)) return TBX_E_OVERFLOW;
    return TBX_OK;
}

/* Code i (0..31) of a block of 4*bits bytes, sign-extended. */
static int32_t code_at(const uint8_t *blk, uint32_t bits, uint32_t i) {
    uint32_t v = 0;
    for (uint32_t k = 0; k < bits; k++) {
        const uint32_t bit = i * bits + k;
        v |= (uint32_t)((blk[bit >> 3] >> (bit & 7)) & 1u) << k;
    }
    const uint32_t sign = 1u << (bits - 1);
    return (int32_t)(v ^ sign) - (int32_t)sign;
}

void tbx_mcfq_dequant_rows_ref(const tbx_mcfq_layout *L, const uint8_t *scales,
                               const uint8_t *sub, const uint8_t *codes, uint64_t n, float *out) {
    for (uint64_t r = 0; r < n; r++) {
        float *y = out + r * L->cols;
        const uint8_t *c = codes + r * L->row_code_bytes;
        for (uint64_t b = 0; b < L->bpr; b++) {
            float scale;
            if (!L->super) {
                scale = tbx_mcfq_f16_dec(tbx_ld16(scales + 2 * (r * L->bpr + b)));
            } else {
                const float S = tbx_mcfq_f16_dec(tbx_ld16(scales + 2 * (r * L->spr + b / 8)));
                const uint8_t u6 = sub[r * L->bpr + b] & 0x3F;
                scale = (S == 0 || u6 == 0) ? 0.0f : S * ((float)u6 / 32.0f);
            }
            const uint64_t c0 = b * 32, m = L->cols - c0 < 32 ? L->cols - c0 : 32;
            for (uint64_t i = 0; i < m; i++)
                y[c0 + i] = scale == 0 ? 0.0f
                                       : (float)code_at(c + b * 4 * L->bits, L->bits, (uint32_t)i) * scale;
        }
    }
}

void tbx_mcfq_dequant_rows(const tbx_mcfq_layout *L, const uint8_t *scales, const uint8_t *sub,
                           const uint8_t *codes, uint64_t n, float *out) {
    tbx_mcfq_rows_fn f = tbx_mcfq_dequant_simd_for(L->kind);
    (f ? f : tbx_mcfq_dequant_rows_ref)(L, scales, sub, codes, n, out);
}
