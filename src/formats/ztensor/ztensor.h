/*
 * ztensor.h - the zTensor driver's extras: the writers of sparse and quantized_group tensors
 * (experimental public API in tensorbox/ztensor.h, included here). Decoding any zTensor tensor
 * to float32 is tbx_tensor_read_f32 (tensorbox.h), which routes non-dense layouts to the
 * driver's read_f32 hook. docs/formats/ztensor.md describes the layouts.
 */
#ifndef TBX_ZTENSOR_H
#define TBX_ZTENSOR_H

#ifndef TBX_EXPERIMENTAL
#define TBX_EXPERIMENTAL 1 /* the library's own code uses its experimental headers */
#endif
#include "tensorbox.h"
#include "tensorbox/ztensor.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif /* TBX_ZTENSOR_H */
