/*
 * kernels.c - maps block dtypes to their dequantizers. None are registered yet; the GGUF block
 * decoders add their entries here. A registered dtype gets TBX_DTF_DECODE in the dtype table.
 */
#include "plain.h"

#include <stddef.h>

tbx_dequant_fn tbx_dequant_for(tbx_dtype dt) {
    switch (dt) {
    default:
        return NULL;
    }
}
