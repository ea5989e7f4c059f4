/*
 * ggml_fallback.c - the block type a row can take when the requested one does not fit.
 *
 * A ggml block type quantizes each row in whole blocks (32 values for q4_0..q8_0, 256 for the
 * k-quants), so a row whose length is not a multiple of the block size cannot take it.
 * llama-quantize (llama.cpp, src/llama-quant.cpp, tensor_type_fallback) then demotes the type:
 * q2_K, q3_K, tq1_0, tq2_0 -> q4_0; q4_K -> q5_0; q5_K -> q5_1; q6_K -> q8_0; a 32-block type
 * stays itself; and when the demoted type does not fit either, the row goes to f16. tensorbox
 * follows the same rules (tbx convert --quant, the Hugging Face to GGUF conversion), so a
 * model quantized here gets the types a llama.cpp user expects.
 */
#include "ggml.h"
#include "internal.h" /* tbx_dtype_core_get */

tbx_dtype tbx_ggml_quant_fallback(tbx_dtype want, uint64_t cols) {
    const tbx_dtype_info *qi = tbx_dtype_core_get(want);
    if (!qi || qi->block_size == 0 || !(qi->flags & TBX_DTF_BLOCK)) return TBX_DT_INVALID;
    if (cols > 0 && cols % qi->block_size == 0) return want;
    tbx_dtype fb;
    switch (want) {
    case TBX_DT_Q2_K: case TBX_DT_Q3_K: case TBX_DT_TQ1_0: case TBX_DT_TQ2_0:
        fb = TBX_DT_Q4_0; break;
    case TBX_DT_Q4_K: fb = TBX_DT_Q5_0; break;
    case TBX_DT_Q5_K: fb = TBX_DT_Q5_1; break;
    case TBX_DT_Q6_K: fb = TBX_DT_Q8_0; break;
    default: fb = want; break; /* a 32-block type: nothing smaller to demote to */
    }
    const tbx_dtype_info *fi = tbx_dtype_core_get(fb);
    if (!fi || cols == 0 || cols % fi->block_size != 0) return TBX_DT_F16; /* "must use F16" */
    return fb;
}
