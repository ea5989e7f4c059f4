/*
 * encode.h - the encoders of the library, found by the dtype they write (encode.c): f32 values
 * to the bytes of an output dtype. One table holds them all, so a conversion step never picks
 * a quantizer by hand:
 *   TBX_ENC_FLOAT    f32, f64, f16, bf16: value by value (tbx_encode_float)
 *   TBX_ENC_BLOCK    the ggml block types with a quantizer (q8_0 .. q6_K, tq1_0, tq2_0,
 *                    mxfp4): runs of whole blocks, each block on its own (ggml.h); by default
 *                    ggml_quantize_chunk's bytes; q2_K .. q6_K also have tensorbox's own
 *                    search (`search`, asked for by GGUF's write option quant_method=search)
 *   TBX_ENC_PAYLOAD  MCF's families (q8 q4 k6 k4 k3 k2: mcfq.h; int8 int4): one payload per
 *                    [rows, cols] tensor whose regions are stored one after the other (scales,
 *                    then codes), filled a run of whole rows at a time and written when
 *                    complete; a clip range (the values are clamped to it first) and a method
 * Sizes come from the dtype tables (FLOAT, BLOCK: the core dtype table; PAYLOAD: the layout).
 * Every encoder is deterministic and works on its unit alone (a value, a block, a row), so
 * the bytes do not depend on how the values are cut into runs or spread over threads.
 */
#ifndef TBX_QUANT_ENCODE_H
#define TBX_QUANT_ENCODE_H

#include "mcfq.h"

typedef enum tbx_enc_kind { TBX_ENC_FLOAT = 1, TBX_ENC_BLOCK = 2, TBX_ENC_PAYLOAD = 3 } tbx_enc_kind;

/* A payload encoder's state for one [rows, cols] tensor (begin fills it; read-only after, so
 * several threads may encode rows at once). */
typedef struct tbx_enc_payload {
    tbx_dtype dtype;
    uint64_t rows, cols;
    uint64_t total;              /* payload bytes */
    unsigned method;             /* tbx_mcfq_method (q / k families) */
    float clip_lo, clip_hi;
    float range;                 /* tbx_quant_range of the dtype (INFINITY: none) */
    tbx_mcfq_layout L;           /* q / k families */
    tbx_mcfi_layout I;           /* int8 / int4 */
    float iscale, izero;         /* int8 / int4 parameters of the clip range */
} tbx_enc_payload;

typedef struct tbx_encoder tbx_encoder;
struct tbx_encoder {
    tbx_dtype dtype;
    uint8_t kind;                /* tbx_enc_kind */
    bool clip;                   /* takes a clip range (PAYLOAD) */
    /* FLOAT / BLOCK: encodes n values (a multiple of the dtype's block size) into the dtype's
     * bytes for n values */
    void (*encode)(const tbx_encoder *e, const float *x, uint64_t n, void *out);
    /* PAYLOAD: the layout of a [rows, cols] tensor (TBX_E_OVERFLOW when it does not fit in 64
     * bits) and the state for the clip range and method */
    tbx_status (*begin)(const tbx_encoder *e, uint64_t rows, uint64_t cols, unsigned method,
                        float clip_lo, float clip_hi, tbx_enc_payload *p);
    /* PAYLOAD: the bytes that do not depend on the rows (int8/int4's scale), into the zeroed
     * payload */
    void (*head)(const tbx_enc_payload *p, uint8_t *payload);
    /* PAYLOAD: rows [r0, r0 + n) (x: n * cols values) into their places in the payload, and
     * y (n * cols values) what they decode to. Distinct runs touch distinct bytes when each
     * holds an even number of values. */
    void (*rows)(const tbx_enc_payload *p, const float *x, uint64_t r0, uint64_t n,
                 uint8_t *payload, float *y);
    /* PAYLOAD: the quantization description of a [rows, cols] tensor for the clip range
     * (everything the format records: method, code dtype, scales, domain, clip) */
    tbx_status (*describe)(const tbx_encoder *e, uint64_t rows, uint64_t cols, float clip_lo,
                           float clip_hi, tbx_quant_info *q);
    /* BLOCK q2_K .. q6_K: tensorbox's own search (a lower error than `encode`, ggml's
     * algorithm; other bytes), as `encode`; NULL for the other types */
    void (*search)(const tbx_encoder *e, const float *x, uint64_t n, void *out);
};

/* The encoder writing dtype `dt`, NULL when nothing encodes it. */
const tbx_encoder *tbx_encoder_for(tbx_dtype dt);
/* The table in order (for lists of what can be asked for); NULL past its end. */
const tbx_encoder *tbx_encoder_at(size_t i);
/* What a conversion can be asked for, from the table: a quantization target (a BLOCK or
 * PAYLOAD encoder: tbx_dtype_quantizable) or a cast target (a FLOAT one: tbx_dtype_castable). */
bool tbx_quantizable(tbx_dtype dt);
bool tbx_castable(tbx_dtype dt);
/* BLOCK: the sum (in f64) of the squared differences between the finite values of x (n, whole
 * blocks) and what `bytes` (their encoding in e's dtype) decode to; with bytes NULL, of the
 * encoding `encode` (ggml's algorithm) gives them, made block by block here. */
double tbx_encoder_block_sse(const tbx_encoder *e, const float *x, uint64_t n,
                             const void *bytes);
/* Rows of a PAYLOAD run: about 2^18 values of whole rows, an even number of values (int4's
 * codes share bytes). Fixed by the shape, so the runs (and the error sums taken per run) do
 * not depend on the thread count. */
uint64_t tbx_encoder_payload_rows(uint64_t cols);

#endif /* TBX_QUANT_ENCODE_H */
