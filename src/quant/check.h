/* check.h - what a lossy conversion step did to the values: the range each target dtype can
 * hold (range.h) and the count of values it could not (check.c). Shared by the conversion paths
 * (the conversion engine, src/convert/engine.c), which reports the counts per tensor
 * (tbx_convert_options.on_tensor). */
#ifndef TBX_QUANT_CHECK_H
#define TBX_QUANT_CHECK_H

#include "range.h"

#include <stdint.h>

/* Counters of one tensor's converted values. */
typedef struct tbx_value_check {
    uint64_t nonfinite; /* finite inputs whose converted value is Inf or NaN */
    uint64_t beyond;    /* finite inputs of magnitude above tbx_quant_range of the target */
    float max_abs;      /* largest finite |input| seen */
} tbx_value_check;

/* Adds to *c what n converted values did: x[] the inputs, y[] the same values decoded from the
 * output, range the target's tbx_quant_range (INFINITY: not checked). Inputs that are not
 * finite are not counted. */
void tbx_value_check_add(tbx_value_check *c, const float *x, const float *y, uint64_t n,
                         float range);

/* The same for output bytes `out` of dtype `to` holding the n values x[] (n a multiple of its
 * block size): decodes them in pieces (tbx_decode_f32) into a small buffer of its own. */
void tbx_value_check_out(tbx_value_check *c, tbx_dtype to, const float *x, const void *out,
                         uint64_t n);

/* The same for values quantized after clamping to [lo, hi] (MCF's families: y decoded from the
 * payload), with the sum of squared errors: per finite input x[k], its clamped magnitude counts
 * for max_abs and `beyond` (a clamped value is no overflow); a non-finite y[k] counts in
 * nonfinite and makes the sum +Inf, else (y[k] - x[k])^2 is added in f64, in order. Returns the
 * sum of this run (the caller adds runs in a fixed order). */
double tbx_value_check_clip(tbx_value_check *c, const float *x, const float *y, uint64_t n,
                            float lo, float hi, float range);

#endif
