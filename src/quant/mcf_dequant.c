/*
 * mcf_dequant.c - the scalar reference of MCF's block (q8 q4) and super-block (k6 k4 k3 k2)
 * families: payload layout sizes and row decoders (contract: mcfq.h).
 *
 * Decoding follows mantle's row decoder value for value (same f32 bits):
 *   - a scale is an IEEE binary16 read with subnormals flushed to (signed) zero; Inf and NaN
 *     keep their bits (payload shifted into the f32 mantissa, not quieted);
 *   - q family: block scale s; when s == 0 (either sign) the 32 outputs are +0, else
 *     out = (float)q * s;
 *   - k family: super scale S, sub-scale u6 = byte & 0x3F; when S == 0 or u6 == 0 the outputs
 *     are +0, else s = S * ((float)u6 / 32) and out = (float)q * s (two f32 products in that
 *     order: S * (u6/32) first);
 *   - codes: one LSB-first stream, `bits` per value, two's complement sign-extended.
 * Only the first `cols` values of a row's last block are written.
 *
 * Layering: a kernel (no I/O, no handle). The SIMD variants and run-time dispatch belong to
 * the quantization kernels' files (mcf_simd_avx2.c, dispatch.c).
 */
#include "mcfq.h"

static const uint32_t g_bits[TBX_MCFQ_KIND_COUNT] = { 8, 4, 6, 4, 3, 2 };

tbx_status tbx_mcfq_layout_get(tbx_mcfq_kind kind, uint64_t rows, uint64_t cols,
                               tbx_mcfq_layout *L) {
    if (!L || (unsigned)kind >= TBX_MCFQ_KIND_COUNT) return TBX_E_INVALID_ARG;
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->bits = g_bits[kind];
    L->super = kind >= TBX_MCFQ_K6;
    L->rows = rows;
    L->cols = cols;
    if (rows == 0 || cols == 0) return TBX_OK;
    L->bpr = cols / 32 + (cols % 32 != 0);
    L->spr = L->super ? L->bpr / 8 + (L->bpr % 8 != 0) : 0;
    L->row_code_bytes = L->bpr * 4u * L->bits; /* bpr <= 2^59: fits */
    uint64_t tb, scount, off;
    if (!tbx_mul_u64(rows, L->bpr, &tb)) return TBX_E_OVERFLOW;
    if (!tbx_mul_u64(rows, L->row_code_bytes, &L->codes_size)) return TBX_E_OVERFLOW;
    scount = L->super ? 0 : tb;
    if (L->super && !tbx_mul_u64(rows, L->spr, &scount)) return TBX_E_OVERFLOW;
    if (!tbx_mul_u64(scount, 2, &L->scales_size)) return TBX_E_OVERFLOW;
    L->scales_off = 0;
    if (!tbx_align_up_u64(L->scales_size, 64, &off)) return TBX_E_OVERFLOW;
    if (L->super) {
        L->sub_off = off;
        L->sub_size = tb;
        if (!tbx_add_u64(off, tb, &off) || !tbx_align_up_u64(off, 64, &off))
            return TBX_E_OVERFLOW;
    }
    L->codes_off = off;
    if (!tbx_add_u64(off, L->codes_size, &L->total)) return TBX_E_OVERFLOW;
    return TBX_OK;
}

/* binary16 -> binary32 as mantle reads scales: subnormals become signed zero. */
static float mcf_f16_flush(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, u;
    if (exp == 0) u = sign;
    else if (exp == 0x1F) u = sign | 0x7F800000u | (man << 13);
    else u = sign | ((exp + 112u) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The 32 codes of one block (32 * bits / 8 bytes at p), sign-extended. */
static void mcf_block_codes(const uint8_t *p, uint32_t bits, int32_t q[32]) {
    if (bits == 8) {
        for (int i = 0; i < 32; i++) q[i] = (int8_t)p[i];
        return;
    }
    /* 8 values take exactly `bits` bytes: load them as one little-endian word. */
    uint32_t shift = 32u - bits, mask = (1u << bits) - 1u;
    for (int g = 0; g < 4; g++, p += bits) {
        uint64_t w = 0;
        for (uint32_t b = 0; b < bits; b++) w |= (uint64_t)p[b] << (8 * b);
        for (int i = 0; i < 8; i++) {
            uint32_t c = (uint32_t)(w >> (i * bits)) & mask;
            q[g * 8 + i] = (int32_t)(c << shift) >> shift;
        }
    }
}

void tbx_mcfq_dequant_rows_ref(const tbx_mcfq_layout *L, const uint8_t *scales,
                               const uint8_t *sub, const uint8_t *codes, uint64_t n, float *out) {
    const uint64_t cols = L->cols, bpr = L->bpr;
    const uint32_t bbytes = 4u * L->bits;
    int32_t q[32];
    for (uint64_t r = 0; r < n; r++) {
        const uint8_t *rc = codes + r * L->row_code_bytes;
        float *o = out + r * cols;
        for (uint64_t b = 0; b < bpr; b++) {
            uint64_t col = b * 32, m = cols - col < 32 ? cols - col : 32;
            float s;
            if (!L->super) {
                s = mcf_f16_flush(tbx_ld16(scales + 2 * (r * bpr + b)));
            } else {
                float S = mcf_f16_flush(tbx_ld16(scales + 2 * (r * L->spr + b / 8)));
                uint32_t u6 = sub[r * bpr + b] & 0x3Fu;
                s = (S == 0.0f || u6 == 0) ? 0.0f : S * ((float)u6 / 32.0f);
            }
            if (s == 0.0f) {
                for (uint64_t i = 0; i < m; i++) o[col + i] = 0.0f;
                continue;
            }
            mcf_block_codes(rc + b * bbytes, L->bits, q);
            for (uint64_t i = 0; i < m; i++) o[col + i] = (float)q[i] * s;
        }
    }
}

/* tbx_mcfq_dequant_rows (the dispatching entry) is in dispatch.c. */

tbx_status tbx_mcfq_describe(tbx_dtype dt, uint64_t rows, uint64_t cols, tbx_quant_info *q) {
    if (dt >= TBX_DT_MCF_Q8 && dt <= TBX_DT_MCF_K2) {
        tbx_mcfq_layout L;
        tbx_status st = tbx_mcfq_layout_get((tbx_mcfq_kind)(dt - TBX_DT_MCF_Q8), rows, cols, &L);
        if (st != TBX_OK) return st;
        q->code_dtype = dt;
        q->bits = L.bits;
        q->block_size = 32;
        q->super_block_size = L.super ? 256 : 0;
        q->scale.scope = TBX_QSCOPE_GROUP;
        q->scale.dtype = TBX_DT_F16;
        q->scale.count = L.rows * L.bpr;
        return TBX_OK;
    }
    if (dt != TBX_DT_MCF_INT8 && dt != TBX_DT_MCF_INT4) return TBX_E_INVALID_ARG;
    q->code_dtype = dt == TBX_DT_MCF_INT8 ? TBX_DT_I8 : TBX_DT_I4;
    q->bits = dt == TBX_DT_MCF_INT8 ? 8 : 4;
    q->scale.scope = TBX_QSCOPE_TENSOR;
    q->scale.dtype = TBX_DT_F32;
    q->scale.count = 1;
    return TBX_OK;
}
