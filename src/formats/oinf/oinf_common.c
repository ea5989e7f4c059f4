/*
 * oinf_common.c - what the OINF reader (oinf.c) and writer (oinf_write.c) share: the ValueType
 * table, the name charset, the quantization rules and little-endian copies. It calls neither.
 */
#include "oinf_int.h"

#include <inttypes.h>
#include <stdio.h>

/* ------------------------------------------------------------------------------------------ */
/* Types, charset, shared checks                                                               */
/* ------------------------------------------------------------------------------------------ */
static const oi_type oi_types[OI_TAG_MAX + 1] = {
    [OI_I8] = {"i8", TBX_DT_I8, TBX_V_I8, 1, 0},
    [OI_I16] = {"i16", TBX_DT_I16, TBX_V_I16, 2, 0},
    [OI_I32] = {"i32", TBX_DT_I32, TBX_V_I32, 4, 0},
    [OI_I64] = {"i64", TBX_DT_I64, TBX_V_I64, 8, 0},
    [OI_U8] = {"u8", TBX_DT_U8, TBX_V_U8, 1, 0},
    [OI_U16] = {"u16", TBX_DT_U16, TBX_V_U16, 2, 0},
    [OI_U32] = {"u32", TBX_DT_U32, TBX_V_U32, 4, 0},
    [OI_U64] = {"u64", TBX_DT_U64, TBX_V_U64, 8, 0},
    [OI_F16] = {"f16", TBX_DT_F16, TBX_V_F16, 2, 0},
    [OI_F32] = {"f32", TBX_DT_F32, TBX_V_F32, 4, 0},
    [OI_F64] = {"f64", TBX_DT_F64, TBX_V_F64, 8, 0},
    [OI_BOOL] = {"bool", TBX_DT_BOOL, TBX_V_BOOL, 1, 0},
    [OI_BITSET] = {"bitset", TBX_DT_BITSET, TBX_V_BITSET, 0, 0},
    [OI_STRING] = {"str", TBX_DT_INVALID, TBX_V_STRING, 0, 0},
    [OI_NDARRAY] = {"ndarray", TBX_DT_INVALID, TBX_V_NDARRAY, 0, 0},
    [OI_BF16] = {"bf16", TBX_DT_BF16, TBX_V_BF16, 2, 0},
    [OI_F8] = {"f8", TBX_DT_F8_E5M2, TBX_V_NULL, 1, 0},
    [OI_I4] = {"i4", TBX_DT_I4, TBX_V_NULL, 1, 4},
    [OI_I2] = {"i2", TBX_DT_I2, TBX_V_NULL, 1, 2},
    [OI_I1] = {"i1", TBX_DT_I1, TBX_V_NULL, 1, 1},
    [OI_U4] = {"u4", TBX_DT_U4, TBX_V_NULL, 1, 4},
    [OI_U2] = {"u2", TBX_DT_U2, TBX_V_NULL, 1, 2},
    [OI_U1] = {"u1", TBX_DT_U1, TBX_V_NULL, 1, 1},
    [OI_T2] = {"t2", TBX_DT_T2, TBX_V_NULL, 1, 2},
    [OI_T1] = {"t1", TBX_DT_T1, TBX_V_NULL, 1, 1},
};

const oi_type *oi_type_of(uint32_t tag) {
    if (tag == 0 || tag > OI_TAG_MAX) return NULL;
    return &oi_types[tag];
}

uint32_t oi_tag_of_dtype(tbx_dtype dt) {
    if (dt == TBX_DT_INVALID) return 0;
    for (uint32_t t = 1; t <= OI_TAG_MAX; t++)
        if (oi_types[t].dtype == dt) return t;
    return 0;
}

bool oi_w_dtype_ok(tbx_dtype dt) { return oi_tensor_tag(oi_tag_of_dtype(dt)); }

static bool oi_name_char(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

bool oi_charset_ok(const char *p, size_t n, size_t *bad) {
    if (n == 0) { if (bad) *bad = 0; return false; }
    for (size_t i = 0; i < n; i++)
        if (!oi_name_char((unsigned char)p[i])) { if (bad) *bad = i; return false; }
    return true;
}

void oi_describe_byte(char out[16], unsigned char c) {
    if (c > 0x20 && c < 0x7f && c != '\'') snprintf(out, 16, "'%c'", c);
    else if (c == ' ') snprintf(out, 16, "' '");
    else snprintf(out, 16, "0x%02x", c);
}

void oi_copy_le(uint8_t *dst, const uint8_t *src, uint64_t n, unsigned width) {
    if (n == 0) return;
    if (width <= 1 || oi_host_le()) {
        if (dst != src) memmove(dst, src, (size_t)(n * (width ? width : 1)));
        return;
    }
    for (uint64_t i = 0; i < n; i++) { /* element by element: also works in place */
        uint8_t tmp[16];
        memcpy(tmp, src + i * width, width);
        for (unsigned b = 0; b < width; b++) dst[i * width + b] = tmp[width - 1 - b];
    }
}

bool oi_quant_nbytes(uint64_t scale_count, uint64_t zp_count, uint64_t *out) {
    uint64_t a, b, s;
    return tbx_mul_u64(scale_count, 4, &a) && tbx_mul_u64(zp_count, 4, &b) &&
           tbx_add_u64(a, b, &s) && tbx_add_u64(s, OI_QUANT_HEADER, &s) &&
           tbx_align_up_u64(s, OI_ALIGN, out);
}

/* The offset of the quant payload member at byte `k` of the payload starting at `at`. */
static uint64_t oi_qat(uint64_t at, uint64_t k) {
    return at == TBX_NO_OFFSET ? at : at + k;
}

tbx_status oi_quant_check(const tbx_oinf_quant *q, const uint64_t *shape, uint32_t ndim,
                          const char *tensor, uint64_t at, tbx_error *err) {
    if (q->scheme != TBX_OINF_SCHEME_SYMMETRIC && q->scheme != TBX_OINF_SCHEME_ASYMMETRIC)
        return tbx_err(err, TBX_E_FORMAT, at, "tensor.quant.scheme",
                       "tensor \"%s\": quant scheme %" PRIu32 " is neither 1 (symmetric) nor 2 "
                       "(asymmetric)", tensor, q->scheme);
    if (q->scale_mode != TBX_OINF_MODE_PER_TENSOR && q->scale_mode != TBX_OINF_MODE_PER_CHANNEL)
        return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 4), "tensor.quant.scale_mode",
                       "tensor \"%s\": quant scale_mode %" PRIu32 " is neither 1 (per tensor) nor "
                       "2 (per channel)", tensor, q->scale_mode);
    if (q->zp_mode > TBX_OINF_MODE_PER_CHANNEL)
        return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 8), "tensor.quant.zp_mode",
                       "tensor \"%s\": quant zp_mode %" PRIu32 " is not 0 (none), 1 (per tensor) "
                       "or 2 (per channel)", tensor, q->zp_mode);
    if (q->scheme == TBX_OINF_SCHEME_SYMMETRIC && q->zp_mode != TBX_OINF_MODE_NONE)
        return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 8), "tensor.quant.zp_mode",
                       "tensor \"%s\": symmetric quantization has no zero points, but zp_mode is "
                       "%" PRIu32, tensor, q->zp_mode);
    if (q->scheme == TBX_OINF_SCHEME_ASYMMETRIC && q->zp_mode == TBX_OINF_MODE_NONE)
        return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 8), "tensor.quant.zp_mode",
                       "tensor \"%s\": asymmetric quantization needs zero points, but zp_mode is 0",
                       tensor);
    /* scales */
    if (q->scale_mode == TBX_OINF_MODE_PER_TENSOR) {
        if (q->scale_axis != 0)
            return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 16), "tensor.quant.scale_axis",
                           "tensor \"%s\": per-tensor scale_axis is %" PRIu64 ", expected 0",
                           tensor, q->scale_axis);
        if (q->scale_count != 1)
            return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 24), "tensor.quant.scale_count",
                           "tensor \"%s\": per-tensor scale_count is %" PRIu64 ", expected 1",
                           tensor, q->scale_count);
    } else {
        if (q->scale_axis >= ndim)
            return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 16), "tensor.quant.scale_axis",
                           "tensor \"%s\": per-channel scale_axis %" PRIu64 " is not a dimension "
                           "of its %" PRIu32 "-d shape", tensor, q->scale_axis, ndim);
        if (q->scale_count != shape[q->scale_axis])
            return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 24), "tensor.quant.scale_count",
                           "tensor \"%s\": scale_count is %" PRIu64 ", expected shape[%" PRIu64
                           "] = %" PRIu64, tensor, q->scale_count, q->scale_axis,
                           shape[q->scale_axis]);
    }
    /* zero points */
    if (q->zp_mode == TBX_OINF_MODE_NONE || q->zp_mode == TBX_OINF_MODE_PER_TENSOR) {
        uint64_t want = q->zp_mode == TBX_OINF_MODE_NONE ? 0 : 1;
        if (q->zp_axis != 0)
            return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 32), "tensor.quant.zp_axis",
                           "tensor \"%s\": zp_axis is %" PRIu64 " with zp_mode %" PRIu32
                           ", expected 0", tensor, q->zp_axis, q->zp_mode);
        if (q->zp_count != want)
            return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 40), "tensor.quant.zp_count",
                           "tensor \"%s\": zp_count is %" PRIu64 " with zp_mode %" PRIu32
                           ", expected %" PRIu64, tensor, q->zp_count, q->zp_mode, want);
    } else {
        if (q->zp_axis >= ndim)
            return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 32), "tensor.quant.zp_axis",
                           "tensor \"%s\": per-channel zp_axis %" PRIu64 " is not a dimension of "
                           "its %" PRIu32 "-d shape", tensor, q->zp_axis, ndim);
        if (q->zp_count != shape[q->zp_axis])
            return tbx_err(err, TBX_E_FORMAT, oi_qat(at, 40), "tensor.quant.zp_count",
                           "tensor \"%s\": zp_count is %" PRIu64 ", expected shape[%" PRIu64
                           "] = %" PRIu64, tensor, q->zp_count, q->zp_axis, shape[q->zp_axis]);
    }
    return TBX_OK;
}
