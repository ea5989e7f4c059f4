/*
 * llama_quant.c - llama.cpp's quantization rules as a model file for it records them: the
 * block type a row can take when the requested one does not fit, and the general.file_type of
 * a model by its bulk type (llama-quantize's presets belong here too).
 *
 * A ggml block type quantizes each row in whole blocks (32 values for q4_0..q8_0, 256 for the
 * k-quants), so a row whose length is not a multiple of the block size cannot take it.
 * llama-quantize (llama.cpp, src/llama-quant.cpp, tensor_type_fallback) then demotes the type:
 * q2_K, q3_K, tq1_0, tq2_0 -> q4_0; q4_K -> q5_0; q5_K -> q5_1; q6_K -> q8_0; a 32-block type
 * stays itself; and when the demoted type does not fit either, the row goes to f16. tensorbox
 * follows the same rules (tbx convert --quant, the Hugging Face to GGUF conversion), so a
 * model quantized here gets the types a llama.cpp user expects.
 */
#include "models.h"

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

/* llama.cpp's file type (enum llama_ftype in llama.h, gguf-py's LlamaFileType) of a model whose
 * bulk type is `bulk`: the value convert_hf_to_gguf.py and llama-quantize write to
 * general.file_type ("mostly X": 1-D tensors stay f32), and the one llama.cpp's loader guesses
 * when the key is missing (the K types as their _M mixes). Others: 1024, LLAMA_FTYPE_GUESSED. */
uint32_t tbx_llama_ftype(tbx_dtype bulk) {
    switch (bulk) {
    case TBX_DT_F32: return 0;      /* ALL_F32 */
    case TBX_DT_F16: return 1;
    case TBX_DT_Q4_0: return 2;
    case TBX_DT_Q4_1: return 3;
    case TBX_DT_Q8_0: return 7;
    case TBX_DT_Q5_0: return 8;
    case TBX_DT_Q5_1: return 9;
    case TBX_DT_Q2_K: return 10;
    case TBX_DT_Q3_K: return 12;    /* Q3_K_M */
    case TBX_DT_Q4_K: return 15;    /* Q4_K_M */
    case TBX_DT_Q5_K: return 17;    /* Q5_K_M */
    case TBX_DT_Q6_K: return 18;
    case TBX_DT_IQ2_XXS: return 19;
    case TBX_DT_IQ2_XS: return 20;
    case TBX_DT_IQ3_XXS: return 23;
    case TBX_DT_IQ1_S: return 24;
    case TBX_DT_IQ4_NL: return 25;
    case TBX_DT_IQ3_S: return 26;
    case TBX_DT_IQ2_S: return 28;
    case TBX_DT_IQ4_XS: return 30;
    case TBX_DT_IQ1_M: return 31;
    case TBX_DT_BF16: return 32;
    case TBX_DT_TQ1_0: return 36;
    case TBX_DT_TQ2_0: return 37;
    case TBX_DT_MXFP4: return 38;   /* MXFP4_MOE */
    default: return 1024;
    }
}
