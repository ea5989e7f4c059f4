/*
 * ggml_rows.c - the row quantizers of the ggml block types (ggml.h, tbx_quant_rows_fn): the
 * contract of ggml_quantize_chunk, rows of n_per_row values and an optional importance matrix.
 *
 *   src  [nrows][n_per_row] f32          qw  [n_per_row] f32 or NULL
 *   dst  [nrows][n_per_row / block_size] blocks of block_bytes
 *
 * Types whose ggml quantizer does not look at the importance matrix (or has no weighted
 * variant in this build yet) run their block quantizer (tbx_ggml_quant_default_for) over the
 * rows, which are contiguous: a row of n_per_row values is n_per_row / block_size blocks.
 */
#include "ggml.h"

/* Block-local types: the rows are one run of blocks; qw is not used. */
#define BLOCKWISE(name, DT)                                                                       \
    static void name(const float *x, void *d, int64_t nrows, int64_t n, const float *qw) {       \
        (void)qw;                                                                                 \
        const tbx_dtype_info *di = tbx_dtype_core_get(DT);                                        \
        tbx_ggml_quant_default_for(DT)(x, d, (uint64_t)nrows * ((uint64_t)n / di->block_size));  \
    }
BLOCKWISE(rq_q8_0, TBX_DT_Q8_0)
BLOCKWISE(rq_tq1_0, TBX_DT_TQ1_0)
BLOCKWISE(rq_tq2_0, TBX_DT_TQ2_0)
BLOCKWISE(rq_mxfp4, TBX_DT_MXFP4)

tbx_quant_rows_fn tbx_ggml_quant_rows_for(tbx_dtype dt) {
    switch (dt) {
    case TBX_DT_Q8_0: return rq_q8_0;
    case TBX_DT_Q4_0: return tbx_gq_rows_q4_0;
    case TBX_DT_Q4_1: return tbx_gq_rows_q4_1;
    case TBX_DT_Q5_0: return tbx_gq_rows_q5_0;
    case TBX_DT_Q5_1: return tbx_gq_rows_q5_1;
    case TBX_DT_Q2_K: return tbx_gq_rows_q2_K;
    case TBX_DT_Q3_K: return tbx_gq_rows_q3_K;
    case TBX_DT_Q4_K: return tbx_gq_rows_q4_K;
    case TBX_DT_Q5_K: return tbx_gq_rows_q5_K;
    case TBX_DT_Q6_K: return tbx_gq_rows_q6_K;
    case TBX_DT_TQ1_0: return rq_tq1_0;
    case TBX_DT_TQ2_0: return rq_tq2_0;
    case TBX_DT_MXFP4: return rq_mxfp4;
    case TBX_DT_IQ4_NL: return tbx_gq_rows_iq4_nl;
    case TBX_DT_IQ4_XS: return tbx_gq_rows_iq4_xs;
    case TBX_DT_NVFP4: return tbx_gq_rows_nvfp4;
    case TBX_DT_Q1_0: return tbx_gq_rows_q1_0;
    case TBX_DT_Q2_0: return tbx_gq_rows_q2_0;
    case TBX_DT_IQ2_XXS: return tbx_iq_rows_iq2_xxs;
    case TBX_DT_IQ2_XS: return tbx_iq_rows_iq2_xs;
    case TBX_DT_IQ2_S: return tbx_iq_rows_iq2_s;
    case TBX_DT_IQ3_XXS: return tbx_iq_rows_iq3_xxs;
    case TBX_DT_IQ3_S: return tbx_iq_rows_iq3_s;
    case TBX_DT_IQ1_S: return tbx_iq_rows_iq1_s;
    case TBX_DT_IQ1_M: return tbx_iq_rows_iq1_m;
    default: return NULL;
    }
}

bool tbx_ggml_quant_requires_imatrix(tbx_dtype dt) {
    return dt == TBX_DT_IQ2_XXS || dt == TBX_DT_IQ2_XS || dt == TBX_DT_IQ1_S;
}
