/*
 * check.c - the values a lossy conversion step could not keep (see check.h): inputs beyond the
 * range the target type can hold (range.c) and outputs that decode to Inf or NaN, whatever the
 * cause (an overflowing scale, a cast of a value beyond f16's range to f16), found by decoding
 * what was written.
 */
#include "check.h"
#include "core.h"
#include "plain.h"

#include <math.h>

void tbx_value_check_add(tbx_value_check *c, const float *x, const float *y, uint64_t n,
                         float range) {
    uint64_t nf = 0, by = 0;
    float m = c->max_abs;
    for (uint64_t k = 0; k < n; k++) {
        if (!isfinite(x[k])) continue; /* NaN or Inf input: nothing to keep */
        const float a = fabsf(x[k]);
        if (a > m) m = a;
        if (a > range) by++;
        if (!isfinite(y[k])) nf++;
    }
    c->nonfinite += nf;
    c->beyond += by;
    c->max_abs = m;
}

void tbx_value_check_out(tbx_value_check *c, tbx_dtype to, const float *x, const void *out,
                         uint64_t n) {
    const tbx_dtype_info *di = tbx_dtype_core_get(to);
    if (!di || !di->bits) return;
    /* pieces of whole blocks: 256 values (a multiple of every ggml block size) */
    const uint64_t bs = di->block_size > 1 ? di->block_size : 1;
    const uint64_t piece = bs > 256 ? bs : 256;
    if (bs > 1024) return;
    float y[1024];
    const float range = tbx_quant_range(to);
    const uint8_t *p = out;
    for (uint64_t e = 0; e < n; e += piece) {
        const uint64_t k = n - e < piece ? n - e : piece;
        uint64_t nb = 0;
        if (tbx_dtype_info_nbytes(di, k, &nb) != TBX_OK || nb > SIZE_MAX) return;
        if (tbx_decode_f32_info(di, to, p, (size_t)nb, k, y) != TBX_OK) return;
        tbx_value_check_add(c, x + e, y, k, range);
        p += nb;
    }
}

double tbx_value_check_clip(tbx_value_check *c, const float *x, const float *y, uint64_t n,
                            float lo, float hi, float range) {
    double e = 0;
    uint64_t nonfinite = 0, beyond = 0;
    float m = 0;
    for (uint64_t k = 0; k < n; k++) {
        if (!isfinite(x[k])) continue; /* non-finite inputs have no error to speak of */
        /* the value asked for: clipped to the range (a clipped value is no overflow) */
        const float a = fabsf(x[k] < lo ? lo : x[k] > hi ? hi : x[k]);
        if (a > m) m = a;
        if (a > range) beyond++;
        if (!isfinite(y[k])) { e = INFINITY; nonfinite++; continue; } /* non-finite decoded */
        const double d = (double)y[k] - (double)x[k];
        e += d * d;
    }
    c->nonfinite += nonfinite;
    c->beyond += beyond;
    if (m > c->max_abs) c->max_abs = m;
    return e;
}
