/*
 * check.c - the values a lossy conversion step could not keep (see check.h).
 *
 * A quantized type stores its values as codes times a scale held in a narrower float (an f16
 * for every ggml block type but mxfp4, and for MCF's q/k families). The largest value it can
 * decode to is bounded: beyond that bound no finite scale exists, and what a quantizer writes
 * instead differs (ggml's q4_0 stores an Inf scale, some of its K-quants a NaN or a zero block;
 * mantle an Inf scale). The bound, per type, is 65504 times the largest |code| (times the
 * largest sub-scale):
 *
 *   q4_0 8, q4_1 16 (d*15 + m), q5_0 16, q5_1 32, q8_0 128, q2_K 45 (3 * 15), q3_K 128
 *   (4 * 32), q4_K 945 (15 * 63), q5_K 1953 (31 * 63), q6_K 4096 (32 * 128), tq1_0 / tq2_0 1;
 *   MCF q8 128, q4 8, k6 63 (32 * 63/32), k4 15.75, k3 7.875, k2 3.9375.
 *
 * Non-finite outputs are found by decoding what was written, whatever the cause (an overflowing
 * scale, a cast of a value beyond f16's range to f16).
 */
#include "check.h"
#include "core.h"
#include "plain.h"

#include <math.h>

#define F16_MAX 65504.0f

float tbx_quant_range(tbx_dtype dt) {
    float codes;
    switch (dt) {
    case TBX_DT_Q4_0: codes = 8; break;
    case TBX_DT_Q4_1: codes = 16; break;
    case TBX_DT_Q5_0: codes = 16; break;
    case TBX_DT_Q5_1: codes = 32; break;
    case TBX_DT_Q8_0: codes = 128; break;
    case TBX_DT_Q2_K: codes = 45; break;
    case TBX_DT_Q3_K: codes = 128; break;
    case TBX_DT_Q4_K: codes = 945; break;
    case TBX_DT_Q5_K: codes = 1953; break;
    case TBX_DT_Q6_K: codes = 4096; break;
    case TBX_DT_TQ1_0: case TBX_DT_TQ2_0: codes = 1; break;
    case TBX_DT_MCF_Q8: codes = 128; break;
    case TBX_DT_MCF_Q4: codes = 8; break;
    case TBX_DT_MCF_K6: codes = 63; break;
    case TBX_DT_MCF_K4: codes = 15.75f; break;
    case TBX_DT_MCF_K3: codes = 7.875f; break;
    case TBX_DT_MCF_K2: codes = 3.9375f; break;
    default: return INFINITY;
    }
    return codes * F16_MAX;
}

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
