/* convert_mcfq.h - quantizing one tensor to an MCF quantized family during a conversion
 * (convert_mcfq.c; used by convert.c). */
#ifndef TBX_CONVERT_MCFQ_H
#define TBX_CONVERT_MCFQ_H

#include "access.h"
#include "mcfq.h"
#include "check.h"

/* Kinds beyond tbx_mcfq_kind: the raw int family (weights domain). */
#define TBX_MCFQ_INT8 ((unsigned)TBX_MCFQ_KIND_COUNT)
#define TBX_MCFQ_INT4 ((unsigned)TBX_MCFQ_KIND_COUNT + 1)

typedef struct tbx_mcfq_request {
    unsigned kind;            /* a tbx_mcfq_kind, TBX_MCFQ_INT8 or TBX_MCFQ_INT4 */
    tbx_mcfq_method method;   /* q / k only */
    bool has_clip;            /* in: clip_lo / clip_hi are given; else computed (out) */
    float clip_lo, clip_hi;   /* the clip range (default: +-max |finite value|) */
    uint64_t nvalues;         /* out: values quantized */
    double sse;               /* out: sum of squared errors of the decoded values (finite inputs;
                               * +Inf when a finite input decodes to Inf or NaN) */
    tbx_value_check chk;      /* out: finite inputs (clipped) that decode to Inf/NaN, or lie
                               * beyond the family's range (tbx_quant_range) */
} tbx_mcfq_request;

/* The default clip range of tensor i: [-m, m], m = the largest |value| among its finite values
 * (0 when there is none), read through tbx_tensor_read_f32 in bounded chunks. */
tbx_status tbx_mcfq_scan_clip(tbx_file *in, size_t i, float *lo, float *hi, tbx_error *err);

/* Quantizes dense 2-D tensor i of `in` (any dtype tbx_tensor_read_f32 decodes) as rq says and
 * hands the payload (tbx_mcfq_layout_get / tbx_mcfi_layout_get bytes, padding zero) to `sink`
 * in order, in pieces of at most 4 MiB. Threaded (tbx_threads_default()); the bytes and rq->sse
 * do not depend on the thread count. TBX_E_LIMIT when the payload exceeds
 * in->limits.max_tensor_bytes; errors of reading or of the sink are returned as they are. */
tbx_status tbx_mcfq_convert_tensor(tbx_file *in, size_t i, tbx_mcfq_request *rq,
                                   tbx_status (*sink)(void *ud, const void *data, size_t len,
                                                      tbx_error *err),
                                   void *ud, tbx_error *err);

#endif
