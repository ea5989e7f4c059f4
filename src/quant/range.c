/*
 * range.c - the largest magnitude each quantized type can hold (range.h).
 *
 * A quantized type stores its values as codes times a scale held in a narrower float (an f16
 * for every ggml block type but mxfp4, and for MCF's q/k families). The largest value it can
 * decode to is bounded: beyond that bound no finite scale exists, and what a quantizer writes
 * instead differs (ggml's q4_0 stores an Inf scale, some of its K-quants a NaN or a zero block;
 * mantle an Inf scale). The bound, per type, is 65504 times the largest |code| (times the
 * largest sub-scale):
 *
 *   q4_0 8, q4_1 16 (d*15 + m), q5_0 16, q5_1 32, q8_0 128, q2_K 45 (3 * 15), q3_K 128
 *   (4 * 32), q4_K 945 (15 * 63), q5_K 1953 (31 * 63), q6_K 4096 (32 * 128), tq1_0 / tq2_0 1,
 *   iq4_nl 127, iq4_xs 4064 (127 * 32), q1_0 1, q2_0 2; nvfp4's scale is UE4M3 (at most 448,
 *   levels up to 6): 2688 itself; mxfp4's E8M0 scale has no bound below f32's;
 *   MCF q8 128, q4 8, k6 63 (32 * 63/32), k4 15.75, k3 7.875, k2 3.9375.
 */
#include "range.h"

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
    case TBX_DT_IQ4_NL: codes = 127; break;
    case TBX_DT_IQ4_XS: codes = 4064; break;
    case TBX_DT_Q1_0: codes = 1; break;
    case TBX_DT_Q2_0: codes = 2; break;
    case TBX_DT_NVFP4: return 2688.0f; /* a UE4M3 scale, not an f16 one: 6 * 448 */
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
