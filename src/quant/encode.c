/*
 * encode.c - the table of encoders (encode.h): float casts, ggml block quantizers and MCF's
 * families, by dtype.
 */
#include "encode.h"
#include "ggml.h"
#include "check.h"

#include <math.h>

/* ---- floats ----------------------------------------------------------------------------- */
static void enc_float(const tbx_encoder *e, const float *x, uint64_t n, void *out) {
    tbx_encode_float(e->dtype, x, n, out);
}

/* ---- ggml block types: ggml's bytes (dispatch.c), or tensorbox's K-quant search ------------ */
/* Without an importance matrix every ggml quantizer is block-local, so a run of whole blocks is
 * one "row" of the row quantizer (ggml_rows.c). */
static void enc_block(const tbx_encoder *e, const float *x, uint64_t n, void *out) {
    tbx_quant_rows_fn q = tbx_ggml_quant_rows_for(e->dtype);
    if (q && n) q(x, out, 1, (int64_t)n, NULL);
}

static void enc_search(const tbx_encoder *e, const float *x, uint64_t n, void *out) {
    const tbx_dtype_info *di = tbx_dtype_core_get(e->dtype);
    tbx_quant_fn q = tbx_ggml_quant_search_for(e->dtype);
    if (di && q && di->block_size) q(x, out, n / di->block_size);
}

double tbx_encoder_block_sse(const tbx_encoder *e, const float *x, uint64_t n,
                             const void *bytes) {
    const tbx_dtype_info *di = tbx_dtype_core_get(e->dtype);
    tbx_dequant_fn dq = tbx_ggml_dequant_for(e->dtype);
    tbx_quant_rows_fn q = tbx_ggml_quant_rows_for(e->dtype);
    enum { MAXB = 256 };
    if (!di || !dq || !q || !di->block_size || di->block_size > MAXB ||
        di->block_bytes > 4 * MAXB)
        return 0;
    float y[MAXB];
    uint8_t blk[4 * MAXB];
    double sse = 0;
    const uint64_t bs = di->block_size;
    for (uint64_t b = 0; b < n / bs; b++) {
        const float *xb = x + b * bs;
        const uint8_t *eb = bytes ? (const uint8_t *)bytes + b * di->block_bytes : blk;
        if (!bytes) q(xb, blk, 1, (int64_t)bs, NULL);
        dq(eb, y, 1);
        for (uint64_t i = 0; i < bs; i++)
            if (isfinite(xb[i])) {
                const double d = (double)y[i] - (double)xb[i];
                sse += d * d;
            }
    }
    return sse;
}

/* ---- MCF families ------------------------------------------------------------------------- */
static bool mcf_int(tbx_dtype dt) { return dt == TBX_DT_MCF_INT8 || dt == TBX_DT_MCF_INT4; }

static tbx_status mcf_begin(const tbx_encoder *e, uint64_t rows, uint64_t cols, unsigned method,
                            float lo, float hi, tbx_enc_payload *p) {
    memset(p, 0, sizeof *p);
    p->dtype = e->dtype;
    p->rows = rows;
    p->cols = cols;
    p->method = method;
    p->clip_lo = lo;
    p->clip_hi = hi;
    p->range = tbx_quant_range(e->dtype);
    tbx_status st;
    if (!mcf_int(e->dtype)) {
        st = tbx_mcfq_layout_get((tbx_mcfq_kind)(e->dtype - TBX_DT_MCF_Q8), rows, cols, &p->L);
        p->total = p->L.total;
    } else {
        uint64_t n;
        if (!tbx_mul_u64(rows, cols, &n)) return TBX_E_OVERFLOW;
        st = tbx_mcfi_layout_get(e->dtype == TBX_DT_MCF_INT8 ? 8 : 4, false, n, &p->I);
        p->total = p->I.total;
        if (st == TBX_OK) tbx_mcfi_params(&p->I, lo, hi, &p->iscale, &p->izero);
    }
    return st;
}

static void mcf_head(const tbx_enc_payload *p, uint8_t *payload) {
    if (!mcf_int(p->dtype)) return;
    uint32_t u;
    memcpy(&u, &p->iscale, 4);
    tbx_st32(payload + p->I.scale_off, u);
}

static void mcf_rows(const tbx_enc_payload *p, const float *x, uint64_t r0, uint64_t n,
                     uint8_t *payload, float *y) {
    if (!mcf_int(p->dtype)) {
        const tbx_mcfq_layout *L = &p->L;
        uint8_t *sc = payload + L->scales_off + 2 * r0 * (L->super ? L->spr : L->bpr);
        uint8_t *su = L->super ? payload + L->sub_off + r0 * L->bpr : NULL;
        uint8_t *co = payload + L->codes_off + r0 * L->row_code_bytes;
        tbx_mcfq_quantize_rows(L, (tbx_mcfq_method)p->method, x, n, p->clip_lo, p->clip_hi, sc,
                               su, co);
        tbx_mcfq_dequant_rows(L, sc, su, co, n, y);
        return;
    }
    uint8_t *co = payload + p->I.codes_off;
    const uint64_t e0 = r0 * p->cols, k = n * p->cols;
    tbx_mcfi_quantize(&p->I, p->iscale, p->izero, p->clip_lo, p->clip_hi, x, e0, k, co);
    tbx_mcfi_dequant(&p->I, p->iscale, p->izero, co, e0, k, y);
}

/* What MCF's QuantInfo records of a quantized tensor: linear codes of the weights domain,
 * signed, no zero point, the clip range, and the family's geometry (tbx_mcfq_describe). */
static tbx_status mcf_describe(const tbx_encoder *e, uint64_t rows, uint64_t cols, float lo,
                               float hi, tbx_quant_info *q) {
    memset(q, 0, sizeof *q);
    q->struct_size = sizeof *q;
    q->method = TBX_QUANT_LINEAR;
    q->code_signed = 1;
    q->scale.component = q->zero.component = -1;
    q->zero.scope = TBX_QSCOPE_NONE;
    q->zero.dtype = TBX_DT_INVALID;
    q->domain = TBX_QDOMAIN_WEIGHTS;
    q->has_clip = 1;
    q->clip_min = lo;
    q->clip_max = hi;
    return tbx_mcfq_describe(e->dtype, rows, cols, q);
}

uint64_t tbx_encoder_payload_rows(uint64_t cols) {
    const uint64_t chunk = (uint64_t)1 << 18;
    uint64_t rows = cols >= chunk ? 1 : chunk / (cols ? cols : 1);
    if ((cols & 1) && (rows & 1)) rows++;
    return rows ? rows : 1;
}

/* ---- the table ---------------------------------------------------------------------------- */
#define FLOAT(dt) {dt, TBX_ENC_FLOAT, false, enc_float, NULL, NULL, NULL, NULL, NULL}
#define BLOCK(dt) {dt, TBX_ENC_BLOCK, false, enc_block, NULL, NULL, NULL, NULL, NULL}
#define KBLOCK(dt) {dt, TBX_ENC_BLOCK, false, enc_block, NULL, NULL, NULL, NULL, enc_search}
#define MCF(dt) {dt, TBX_ENC_PAYLOAD, true, NULL, mcf_begin, mcf_head, mcf_rows, mcf_describe, NULL}

static const tbx_encoder ENCODERS[] = {
    FLOAT(TBX_DT_F32), FLOAT(TBX_DT_F16), FLOAT(TBX_DT_BF16), FLOAT(TBX_DT_F64),
    BLOCK(TBX_DT_Q8_0), BLOCK(TBX_DT_Q4_0), BLOCK(TBX_DT_Q4_1), BLOCK(TBX_DT_Q5_0),
    BLOCK(TBX_DT_Q5_1), KBLOCK(TBX_DT_Q2_K), KBLOCK(TBX_DT_Q3_K), KBLOCK(TBX_DT_Q4_K),
    KBLOCK(TBX_DT_Q5_K), KBLOCK(TBX_DT_Q6_K), BLOCK(TBX_DT_TQ1_0), BLOCK(TBX_DT_TQ2_0),
    BLOCK(TBX_DT_MXFP4), BLOCK(TBX_DT_IQ4_NL), BLOCK(TBX_DT_IQ4_XS), BLOCK(TBX_DT_NVFP4),
    BLOCK(TBX_DT_Q1_0), BLOCK(TBX_DT_Q2_0),
    BLOCK(TBX_DT_IQ2_XXS), BLOCK(TBX_DT_IQ2_XS), BLOCK(TBX_DT_IQ2_S), BLOCK(TBX_DT_IQ3_XXS),
    BLOCK(TBX_DT_IQ3_S), BLOCK(TBX_DT_IQ1_S), BLOCK(TBX_DT_IQ1_M),
    MCF(TBX_DT_MCF_Q8), MCF(TBX_DT_MCF_Q4), MCF(TBX_DT_MCF_K6), MCF(TBX_DT_MCF_K4),
    MCF(TBX_DT_MCF_K3), MCF(TBX_DT_MCF_K2), MCF(TBX_DT_MCF_INT8), MCF(TBX_DT_MCF_INT4),
};
#define NENC (sizeof ENCODERS / sizeof ENCODERS[0])

const tbx_encoder *tbx_encoder_for(tbx_dtype dt) {
    for (size_t i = 0; i < NENC; i++)
        if (ENCODERS[i].dtype == dt) {
            /* a block type needs its quantizer in this build */
            if (ENCODERS[i].kind == TBX_ENC_BLOCK && !tbx_ggml_quant_rows_for(dt)) return NULL;
            return &ENCODERS[i];
        }
    return NULL;
}

const tbx_encoder *tbx_encoder_at(size_t i) { return i < NENC ? &ENCODERS[i] : NULL; }

bool tbx_quantizable(tbx_dtype dt) {
    const tbx_encoder *e = tbx_encoder_for(dt);
    return e && e->kind != TBX_ENC_FLOAT;
}

bool tbx_castable(tbx_dtype dt) {
    const tbx_encoder *e = tbx_encoder_for(dt);
    return e && e->kind == TBX_ENC_FLOAT;
}
