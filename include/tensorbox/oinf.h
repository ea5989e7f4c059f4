/*
 * tensorbox/oinf.h - experimental API: OINF extras of libtensorbox.
 *
 *   #define TBX_EXPERIMENTAL
 *   #include <tensorbox/oinf.h>
 *
 * EXPERIMENTAL: the functions and types declared here are exported by libtensorbox but are NOT
 * part of the stable API of tensorbox.h. They may change or disappear in any minor version
 * (0.x -> 0.y); a program that uses them must be rebuilt (and perhaps adapted) against the
 * exact tensorbox version it runs with. Defining TBX_EXPERIMENTAL before the #include is the
 * caller's acknowledgement; without it this header refuses to compile.
 *
 * What is here: attaching OINF v2 quantization parameters to a tensor being written in OINF's
 * own terms (the generic way, which every format shares, is tbx_writer_add_quant_tensor with
 * a tbx_quant_info). Everything else OINF offers goes through
 * tensorbox.h: size variables with tbx_sizevar_count/get and tbx_writer_add_sizevar, the
 * quantization of a tensor read from a file with tbx_tensor_quant_get (its params MAP holds
 * OINF's scheme, scale_mode and zp_mode codes). docs/formats/oinf.md describes the format.
 */
#ifndef TENSORBOX_OINF_H
#define TENSORBOX_OINF_H

#ifndef TBX_EXPERIMENTAL
#error "tensorbox/oinf.h is experimental API: #define TBX_EXPERIMENTAL before including it"
#endif

#include "../tensorbox.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Quantization parameters of an OINF v2 tensor (tensor flag HAS_QUANT), in OINF's own terms. */
#define TBX_OINF_SCHEME_SYMMETRIC 1u
#define TBX_OINF_SCHEME_ASYMMETRIC 2u
#define TBX_OINF_MODE_NONE 0u        /* zero points only */
#define TBX_OINF_MODE_PER_TENSOR 1u
#define TBX_OINF_MODE_PER_CHANNEL 2u

/* (Experimental, so not versioned by struct_size: a later version may change this struct.) */
typedef struct tbx_oinf_quant {
    uint32_t scheme;          /* TBX_OINF_SCHEME_*: symmetric has no zero points */
    uint32_t scale_mode;      /* PER_TENSOR (one scale) or PER_CHANNEL (one per index of axis) */
    uint32_t zp_mode;         /* NONE, PER_TENSOR or PER_CHANNEL */
    uint64_t scale_axis;      /* 0 unless per channel */
    uint64_t scale_count;     /* 1, or shape[scale_axis] */
    uint64_t zp_axis;         /* 0 unless per channel */
    uint64_t zp_count;        /* 0, 1, or shape[zp_axis] */
    const float *scales;      /* scale_count values */
    const int32_t *zero_points; /* zp_count values (may be NULL when zp_count is 0) */
} tbx_oinf_quant;

/* Attaches quantization parameters to the tensor named `tensor` of an OINF writer (which must
 * write version 2: TBX_E_UNSUPPORTED otherwise). The arrays are copied. The tensor may be
 * declared before or after this call; it must exist when the layout is made (TBX_E_NOT_FOUND).
 * The parameters are checked against the tensor's shape then (TBX_E_FORMAT naming the field).
 * TBX_E_INVALID_ARG when w is not an OINF writer. */
TBX_API tbx_status tbx_oinf_writer_set_quant(tbx_writer *w, const char *tensor,
                                             const tbx_oinf_quant *q, tbx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TENSORBOX_OINF_H */
