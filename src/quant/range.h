/* range.h - the largest magnitude each quantized type can hold (range.c): what the conversion
 * checks (check.h) count values beyond, and where ggml's block quantizers hand a row over to
 * the reference's own bytes (ggml_quant.c). Below everything else of src/quant: it calls
 * nothing. */
#ifndef TBX_QUANT_RANGE_H
#define TBX_QUANT_RANGE_H

#include "tensorbox.h"

/* The largest magnitude a value of a quantized dtype can decode to when every scale it stores
 * is finite: f16's largest finite value (65504) times the largest |code| (times the largest
 * sub-scale) the type encodes; the types whose scale is not an f16 (mxfp4's power of two, MCF
 * int8/int4's f32) and non-quantized dtypes: INFINITY. A finite value beyond it cannot be
 * represented: its block's scale overflows the scale's type. */
float tbx_quant_range(tbx_dtype dt);

#endif /* TBX_QUANT_RANGE_H */
