/*
 * kernels.c - maps block dtypes to their dequantizers. The ggml block types (GGUF) decode through
 * src/quant/ggml_*.c, scalar or SIMD chosen at run time by cpuid. A dtype with a dequantizer gets
 * TBX_DTF_DECODE in the dtype table.
 */
#include "plain.h"
#include "ggml.h"

#include <stddef.h>

tbx_dequant_fn tbx_dequant_for(tbx_dtype dt) {
    return tbx_ggml_dequant_for(dt);
}
