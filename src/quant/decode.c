/*
 * decode.c - tbx_decode_f32: stored elements of any decodable dtype to float32, plus the
 * sub-byte bitstream pack/unpack helpers shared by the writers.
 *
 * Plain floats widen exactly (f64 rounds to nearest); integers convert as C does (round to
 * nearest, like numpy's astype(float32)); block types go through the dequantizer registry.
 */
#include "core.h"
#include "plain.h"

/* The `bits`-bit field at stream bit `pos` (LSB-first); bits <= 8. */
static inline unsigned get_bits(const uint8_t *s, uint64_t pos, unsigned bits) {
    uint64_t i = pos >> 3;
    unsigned sh = (unsigned)(pos & 7), w = s[i];
    if (sh + bits > 8) w |= (unsigned)s[i + 1] << 8;
    return (w >> sh) & ((1u << bits) - 1);
}

static inline int sign_extend(unsigned v, unsigned bits) {
    return (v & (1u << (bits - 1))) ? (int)v - (1 << bits) : (int)v;
}

void tbx_pack_bits(uint8_t *dst, const int8_t *vals, uint64_t n, unsigned bits) {
    if (bits < 1 || bits > 8) return;
    uint64_t nbits = n * bits, nbytes = nbits / 8 + (nbits % 8 != 0);
    memset(dst, 0, (size_t)nbytes);
    unsigned mask = (1u << bits) - 1;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t pos = k * bits, i = pos >> 3;
        unsigned sh = (unsigned)(pos & 7), v = ((unsigned)(uint8_t)vals[k] & mask) << sh;
        dst[i] |= (uint8_t)v;
        if (sh + bits > 8) dst[i + 1] |= (uint8_t)(v >> 8);
    }
}

void tbx_unpack_bits(int8_t *dst, const uint8_t *src, uint64_t n, unsigned bits, bool is_signed) {
    if (bits < 1 || bits > 8) return;
    for (uint64_t k = 0; k < n; k++) {
        unsigned v = get_bits(src, k * bits, bits);
        dst[k] = (int8_t)(is_signed ? sign_extend(v, bits) : (int)(uint8_t)v);
    }
}

/* Packed sub-byte types: one LSB-first bitstream, element k at bit k*bits. */
static void decode_packed(tbx_dtype dt, unsigned bits, const uint8_t *s, uint64_t n, float *d) {
    for (uint64_t k = 0; k < n; k++) {
        unsigned v = get_bits(s, k * bits, bits);
        float r;
        switch (dt) {
        case TBX_DT_F6_E2M3: r = tbx_f6_e2m3_to_f32((uint8_t)v); break;
        case TBX_DT_F6_E3M2: r = tbx_f6_e3m2_to_f32((uint8_t)v); break;
        case TBX_DT_F4_E2M1: r = tbx_f4_e2m1_to_f32((uint8_t)v); break;
        case TBX_DT_I4: case TBX_DT_I2: case TBX_DT_I1:
        case TBX_DT_T2: /* two's complement; the out-of-domain code 2 decodes as -2 */
            r = (float)sign_extend(v, bits); break;
        case TBX_DT_T1: r = v ? 1.0f : -1.0f; break;
        default: r = (float)v; break; /* U4, U2, U1 */
        }
        d[k] = r;
    }
}

void tbx_f16_row_scalar(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t k = 0; k < n; k++) dst[k] = tbx_f16_to_f32(tbx_ld16(src + 2 * k));
}

bool tbx_encode_float(tbx_dtype dt, const float *src, uint64_t n, uint8_t *dst) {
    uint64_t i;
    switch (dt) {
    case TBX_DT_F32: for (i = 0; i < n; i++) memcpy(dst + 4 * i, &src[i], 4); break;
    case TBX_DT_F64:
        for (i = 0; i < n; i++) {
            const double d = src[i];
            memcpy(dst + 8 * i, &d, 8);
        }
        break;
    case TBX_DT_F16: for (i = 0; i < n; i++) tbx_st16(dst + 2 * i, tbx_f32_to_f16(src[i])); break;
    case TBX_DT_BF16: for (i = 0; i < n; i++) tbx_st16(dst + 2 * i, tbx_f32_to_bf16(src[i])); break;
    default: return false;
    }
    return true;
}

static tbx_status decode_blocks(const tbx_dtype_info *e, tbx_dequant_fn fn, const uint8_t *s,
                                uint64_t n, float *d) {
    float tmp[256];
    uint64_t full = n / e->block_size, rest = n % e->block_size;
    if (full) fn(s, d, full);
    if (rest) {
        if (e->block_size > sizeof tmp / sizeof tmp[0]) return TBX_E_UNSUPPORTED;
        fn(s + full * e->block_bytes, tmp, 1);
        memcpy(d + full * e->block_size, tmp, (size_t)rest * sizeof(float));
    }
    return TBX_OK;
}

tbx_status tbx_decode_f32_info(const tbx_dtype_info *e, tbx_dtype dtype, const void *src,
                               size_t src_len, uint64_t nelems, float *dst) {
    if (!e) return TBX_E_INVALID_ARG;
    tbx_dequant_fn fn = NULL;
    uint64_t need;
    if (e->flags & TBX_DTF_BLOCK) {
        fn = tbx_dequant_for(dtype);
        if (!fn) return TBX_E_UNSUPPORTED;
        /* a trailing partial block is allowed: it is decoded whole and cut */
        uint64_t nb = nelems / e->block_size + (nelems % e->block_size != 0);
        if (!tbx_mul_u64(nb, e->block_bytes, &need)) return TBX_E_OVERFLOW;
    } else {
        if (!(e->flags & TBX_DTF_DECODE)) return TBX_E_UNSUPPORTED;
        tbx_status st = tbx_dtype_info_nbytes(e, nelems, &need);
        if (st != TBX_OK) return st;
    }
    if ((uint64_t)src_len < need) return TBX_E_TRUNCATED;
    if (nelems == 0) return TBX_OK;
    if (!src || !dst) return TBX_E_INVALID_ARG;

    const uint8_t *s = (const uint8_t *)src;
    float *d = dst;
    uint64_t n = nelems, k;
    if (fn) return decode_blocks(e, fn, s, n, d);
    if (e->flags & TBX_DTF_PACKED) {
        decode_packed(dtype, e->bits, s, n, d);
        return TBX_OK;
    }
    switch (dtype) {
    case TBX_DT_F64: for (k = 0; k < n; k++) d[k] = (float)tbx_ldf64(s + 8 * k); break;
    case TBX_DT_F32: for (k = 0; k < n; k++) d[k] = tbx_ldf32(s + 4 * k); break;
    case TBX_DT_F16: tbx_f16_row_for()(s, d, n); break;
    case TBX_DT_BF16: /* the bits of tbx_bf16_to_f32, inlined (a call per value was most of the
                         decoding's time) */
        for (k = 0; k < n; k++) {
            const uint32_t u = (uint32_t)tbx_ld16(s + 2 * k) << 16;
            memcpy(d + k, &u, 4);
        }
        break;
    case TBX_DT_F8_E4M3: case TBX_DT_F8_E5M2: case TBX_DT_F8_E4M3FNUZ: case TBX_DT_F8_E5M2FNUZ:
    case TBX_DT_F8_E8M0:
        for (k = 0; k < n; k++) d[k] = tbx_f8_to_f32(dtype, s[k]);
        break;
    case TBX_DT_I8: for (k = 0; k < n; k++) d[k] = (float)(int8_t)s[k]; break;
    case TBX_DT_I16: for (k = 0; k < n; k++) d[k] = (float)(int16_t)tbx_ld16(s + 2 * k); break;
    case TBX_DT_I32: for (k = 0; k < n; k++) d[k] = (float)(int32_t)tbx_ld32(s + 4 * k); break;
    case TBX_DT_I64: for (k = 0; k < n; k++) d[k] = (float)(int64_t)tbx_ld64(s + 8 * k); break;
    case TBX_DT_U8: for (k = 0; k < n; k++) d[k] = (float)s[k]; break;
    case TBX_DT_U16: for (k = 0; k < n; k++) d[k] = (float)tbx_ld16(s + 2 * k); break;
    case TBX_DT_U32: for (k = 0; k < n; k++) d[k] = (float)tbx_ld32(s + 4 * k); break;
    case TBX_DT_U64: for (k = 0; k < n; k++) d[k] = (float)tbx_ld64(s + 8 * k); break;
    case TBX_DT_BOOL: for (k = 0; k < n; k++) d[k] = s[k] ? 1.0f : 0.0f; break;
    case TBX_DT_BITSET: for (k = 0; k < n; k++) d[k] = (float)s[k]; break; /* the u8 value */
    default: return TBX_E_UNSUPPORTED;
    }
    return TBX_OK;
}

