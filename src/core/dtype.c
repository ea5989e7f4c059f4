/*
 * dtype.c - the dtype table: names, element sizes, block geometry and flags of every tbx_dtype,
 * name lookup, and the stored-size computations every format driver relies on.
 */
#include "internal.h"
#include "plain.h"

#include <ctype.h>

#define F_FLT (TBX_DTF_FLOAT | TBX_DTF_SIGNED | TBX_DTF_DECODE)
#define F_SINT (TBX_DTF_INT | TBX_DTF_SIGNED | TBX_DTF_DECODE)
#define F_UINT (TBX_DTF_INT | TBX_DTF_DECODE)
#define F_CPLX (TBX_DTF_FLOAT | TBX_DTF_SIGNED | TBX_DTF_COMPLEX)
#define F_BLK TBX_DTF_BLOCK
#define F_MCF TBX_DTF_SHAPED

/* bits of a block type: 8 * block_bytes / block_size rounded half up */
#define BLK_BITS(bs, bb) ((8u * (bb) + (bs) / 2u) / (bs))

/* X(id, name, bits, block_size, block_bytes, flags) */
#define TBX_DTYPE_LIST(X)                                                  \
    X(F64, "f64", 64, 1, 8, F_FLT)                                         \
    X(F32, "f32", 32, 1, 4, F_FLT)                                         \
    X(F16, "f16", 16, 1, 2, F_FLT)                                         \
    X(BF16, "bf16", 16, 1, 2, F_FLT)                                       \
    X(F8_E4M3, "f8_e4m3", 8, 1, 1, F_FLT)                                  \
    X(F8_E5M2, "f8_e5m2", 8, 1, 1, F_FLT)                                  \
    X(F8_E4M3FNUZ, "f8_e4m3fnuz", 8, 1, 1, F_FLT)                          \
    X(F8_E5M2FNUZ, "f8_e5m2fnuz", 8, 1, 1, F_FLT)                          \
    X(F8_E8M0, "f8_e8m0", 8, 1, 1, F_FLT)                                  \
    X(F6_E2M3, "f6_e2m3", 6, 1, 0, F_FLT | TBX_DTF_PACKED)                 \
    X(F6_E3M2, "f6_e3m2", 6, 1, 0, F_FLT | TBX_DTF_PACKED)                 \
    X(F4_E2M1, "f4_e2m1", 4, 1, 0, F_FLT | TBX_DTF_PACKED)                 \
    X(C64, "c64", 64, 1, 8, F_CPLX)                                        \
    X(C128, "c128", 128, 1, 16, F_CPLX)                                    \
    X(I8, "i8", 8, 1, 1, F_SINT)                                           \
    X(I16, "i16", 16, 1, 2, F_SINT)                                        \
    X(I32, "i32", 32, 1, 4, F_SINT)                                        \
    X(I64, "i64", 64, 1, 8, F_SINT)                                        \
    X(U8, "u8", 8, 1, 1, F_UINT)                                           \
    X(U16, "u16", 16, 1, 2, F_UINT)                                        \
    X(U32, "u32", 32, 1, 4, F_UINT)                                        \
    X(U64, "u64", 64, 1, 8, F_UINT)                                        \
    X(BOOL, "bool", 8, 1, 1, TBX_DTF_DECODE)                               \
    X(BITSET, "bitset", 8, 1, 1, TBX_DTF_DECODE)                           \
    X(I4, "i4", 4, 1, 0, F_SINT | TBX_DTF_PACKED)                          \
    X(I2, "i2", 2, 1, 0, F_SINT | TBX_DTF_PACKED)                          \
    X(I1, "i1", 1, 1, 0, F_SINT | TBX_DTF_PACKED)                          \
    X(U4, "u4", 4, 1, 0, F_UINT | TBX_DTF_PACKED)                          \
    X(U2, "u2", 2, 1, 0, F_UINT | TBX_DTF_PACKED)                          \
    X(U1, "u1", 1, 1, 0, F_UINT | TBX_DTF_PACKED)                          \
    X(T2, "t2", 2, 1, 0, F_SINT | TBX_DTF_PACKED)                          \
    X(T1, "t1", 1, 1, 0, F_SINT | TBX_DTF_PACKED)                          \
    X(Q4_0, "q4_0", BLK_BITS(32, 18), 32, 18, F_BLK)                       \
    X(Q4_1, "q4_1", BLK_BITS(32, 20), 32, 20, F_BLK)                       \
    X(Q5_0, "q5_0", BLK_BITS(32, 22), 32, 22, F_BLK)                       \
    X(Q5_1, "q5_1", BLK_BITS(32, 24), 32, 24, F_BLK)                       \
    X(Q8_0, "q8_0", BLK_BITS(32, 34), 32, 34, F_BLK)                       \
    X(Q8_1, "q8_1", BLK_BITS(32, 36), 32, 36, F_BLK)                       \
    X(Q2_K, "q2_k", BLK_BITS(256, 84), 256, 84, F_BLK)                     \
    X(Q3_K, "q3_k", BLK_BITS(256, 110), 256, 110, F_BLK)                   \
    X(Q4_K, "q4_k", BLK_BITS(256, 144), 256, 144, F_BLK)                   \
    X(Q5_K, "q5_k", BLK_BITS(256, 176), 256, 176, F_BLK)                   \
    X(Q6_K, "q6_k", BLK_BITS(256, 210), 256, 210, F_BLK)                   \
    X(Q8_K, "q8_k", BLK_BITS(256, 292), 256, 292, F_BLK)                   \
    X(IQ2_XXS, "iq2_xxs", BLK_BITS(256, 66), 256, 66, F_BLK)               \
    X(IQ2_XS, "iq2_xs", BLK_BITS(256, 74), 256, 74, F_BLK)                 \
    X(IQ3_XXS, "iq3_xxs", BLK_BITS(256, 98), 256, 98, F_BLK)               \
    X(IQ1_S, "iq1_s", BLK_BITS(256, 50), 256, 50, F_BLK)                   \
    X(IQ4_NL, "iq4_nl", BLK_BITS(32, 18), 32, 18, F_BLK)                   \
    X(IQ3_S, "iq3_s", BLK_BITS(256, 110), 256, 110, F_BLK)                 \
    X(IQ2_S, "iq2_s", BLK_BITS(256, 82), 256, 82, F_BLK)                   \
    X(IQ4_XS, "iq4_xs", BLK_BITS(256, 136), 256, 136, F_BLK)               \
    X(IQ1_M, "iq1_m", BLK_BITS(256, 56), 256, 56, F_BLK)                   \
    X(TQ1_0, "tq1_0", BLK_BITS(256, 54), 256, 54, F_BLK)                   \
    X(TQ2_0, "tq2_0", BLK_BITS(256, 66), 256, 66, F_BLK)                   \
    X(MXFP4, "mxfp4", BLK_BITS(32, 17), 32, 17, F_BLK)                     \
    X(NVFP4, "nvfp4", BLK_BITS(64, 36), 64, 36, F_BLK)                     \
    X(Q1_0, "q1_0", BLK_BITS(128, 18), 128, 18, F_BLK)                     \
    X(Q2_0, "q2_0", BLK_BITS(64, 18), 64, 18, F_BLK)                       \
    X(MCF_INT8, "mcf_int8", 8, 1, 0, F_MCF)                                \
    X(MCF_INT4, "mcf_int4", 4, 1, 0, F_MCF)                                \
    X(MCF_Q8, "mcf_q8", 8, 1, 0, F_MCF)                                    \
    X(MCF_Q4, "mcf_q4", 4, 1, 0, F_MCF)                                    \
    X(MCF_K6, "mcf_k6", 6, 1, 0, F_MCF)                                    \
    X(MCF_K4, "mcf_k4", 4, 1, 0, F_MCF)                                    \
    X(MCF_K3, "mcf_k3", 3, 1, 0, F_MCF)                                    \
    X(MCF_K2, "mcf_k2", 2, 1, 0, F_MCF)

#define ENTRY(id, nm, b, bs, bb, fl) [TBX_DT_##id] = {TBX_DT_##id, nm, b, bs, bb, fl},
#define ENTRY_DEC(id, nm, b, bs, bb, fl) \
    [TBX_DT_##id] = {TBX_DT_##id, nm, b, bs, bb, (fl) | TBX_DTF_DECODE},

/* Block types get TBX_DTF_DECODE only while a dequantizer is registered for them: the entry is
 * then taken from the second table (both are constant, so lookups stay thread-safe). */
static const tbx_dtype_info table[TBX_DT_COUNT_] = {TBX_DTYPE_LIST(ENTRY)};
static const tbx_dtype_info table_dec[TBX_DT_COUNT_] = {TBX_DTYPE_LIST(ENTRY_DEC)};

const tbx_dtype_info *tbx_dtype_get(tbx_dtype dtype) {
    if ((int)dtype <= 0 || (int)dtype >= TBX_DT_COUNT_) return NULL;
    const tbx_dtype_info *e = &table[dtype];
    if (!e->name) return NULL;
    if ((e->flags & TBX_DTF_BLOCK) && tbx_dequant_for(dtype)) return &table_dec[dtype];
    return e;
}

static bool name_eq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

static const struct { const char *alias; tbx_dtype dt; } aliases[] = {
    {"f4", TBX_DT_F4_E2M1},         {"complex64", TBX_DT_C64},
    {"complex128", TBX_DT_C128},    {"f8_e4m3fn", TBX_DT_F8_E4M3},
    {"f8_e8m0fnu", TBX_DT_F8_E8M0},
};

tbx_dtype tbx_dtype_from_name(const char *name) {
    if (!name) return TBX_DT_INVALID;
    for (int i = 1; i < TBX_DT_COUNT_; i++)
        if (table[i].name && name_eq(name, table[i].name)) return (tbx_dtype)i;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (name_eq(name, aliases[i].alias)) return aliases[i].dt;
    return TBX_DT_INVALID;
}

/* Size of nelems elements of a non-shaped dtype. */
static tbx_status plain_nbytes(const tbx_dtype_info *e, uint64_t nelems, uint64_t *out) {
    uint64_t r;
    if (e->flags & TBX_DTF_PACKED) {
        /* ceil(nelems * bits / 8) without an intermediate that could overflow needlessly */
        if (!tbx_mul_u64(nelems / 8, e->bits, &r) ||
            !tbx_add_u64(r, ((nelems % 8) * e->bits + 7) / 8, out))
            return TBX_E_OVERFLOW;
        return TBX_OK;
    }
    if (nelems % e->block_size != 0) return TBX_E_FORMAT;
    if (!tbx_mul_u64(nelems / e->block_size, e->block_bytes, &r)) return TBX_E_OVERFLOW;
    *out = r;
    return TBX_OK;
}

tbx_status tbx_dtype_nbytes(tbx_dtype dtype, uint64_t nelems, uint64_t *out) {
    const tbx_dtype_info *e = tbx_dtype_get(dtype);
    if (!e || !out) return TBX_E_INVALID_ARG;
    if (e->flags & TBX_DTF_SHAPED) return TBX_E_UNSUPPORTED;
    return plain_nbytes(e, nelems, out);
}

/* Element count of a shape (1 for a scalar); a zero dimension makes it 0 whatever the others. */
static tbx_status shape_nelems(const uint64_t *shape, uint32_t ndim, uint64_t *out) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < ndim; i++)
        if (shape[i] == 0) { *out = 0; return TBX_OK; }
    for (uint32_t i = 0; i < ndim; i++)
        if (!tbx_mul_u64(n, shape[i], &n)) return TBX_E_OVERFLOW;
    *out = n;
    return TBX_OK;
}

static bool align64(uint64_t x, uint64_t *out) { return tbx_align_up_u64(x, 64, out); }

/* MCF quantized payloads (see docs/dtypes.md). */
static tbx_status mcf_nbytes(tbx_dtype dtype, uint32_t bits, const uint64_t *shape, uint32_t ndim,
                             uint64_t *out) {
    uint64_t r, t;
    if (dtype == TBX_DT_MCF_INT8 || dtype == TBX_DT_MCF_INT4) {
        /* PROVISIONAL (MCF issue pending): one f32 scale region padded to 64 bytes, then the
         * packed codes: 64 + ceil(nelems * bits / 8). The activations domain adds a second
         * 64-byte region (f32 zero) that the MCF driver accounts for. Any rank is accepted. */
        uint64_t n;
        tbx_status st = shape_nelems(shape, ndim, &n);
        if (st != TBX_OK) return st;
        if (!tbx_mul_u64(n / 8, bits, &r) || !tbx_add_u64(r, ((n % 8) * bits + 7) / 8, &r) ||
            !tbx_add_u64(r, 64, out))
            return TBX_E_OVERFLOW;
        return TBX_OK;
    }
    if (ndim != 2) return TBX_E_FORMAT;
    uint64_t rows = shape[0], cols = shape[1];
    if (rows != 0 && cols > UINT64_MAX / rows) return TBX_E_OVERFLOW; /* element count */
    uint64_t bpr = cols / 32 + (cols % 32 != 0);
    uint64_t tb, data;
    if (!tbx_mul_u64(rows, bpr, &tb)) return TBX_E_OVERFLOW;
    if (!tbx_mul_u64(tb, 4u * bits, &data)) return TBX_E_OVERFLOW; /* TB * 32 * bits / 8 */
    if (dtype == TBX_DT_MCF_Q8 || dtype == TBX_DT_MCF_Q4) {
        if (!tbx_mul_u64(tb, 2, &t) || !align64(t, &t)) return TBX_E_OVERFLOW;
    } else {
        uint64_t spr = bpr / 8 + (bpr % 8 != 0), ts;
        if (!tbx_mul_u64(rows, spr, &ts) || !tbx_mul_u64(ts, 2, &t) || !align64(t, &t) ||
            !tbx_add_u64(t, tb, &t) || !align64(t, &t))
            return TBX_E_OVERFLOW;
    }
    if (!tbx_add_u64(t, data, out)) return TBX_E_OVERFLOW;
    return TBX_OK;
}

tbx_status tbx_dtype_nbytes_shape(tbx_dtype dtype, const uint64_t *shape, uint32_t ndim,
                                  uint64_t *out) {
    const tbx_dtype_info *e = tbx_dtype_get(dtype);
    if (!e || !out || (ndim > 0 && !shape)) return TBX_E_INVALID_ARG;
    if (e->flags & TBX_DTF_SHAPED) return mcf_nbytes(dtype, e->bits, shape, ndim, out);
    /* Row-wise block rule: the last (fastest) dimension holds whole blocks. */
    uint64_t last = ndim ? shape[ndim - 1] : 1;
    if (last % e->block_size != 0) return TBX_E_FORMAT;
    uint64_t n;
    tbx_status st = shape_nelems(shape, ndim, &n);
    if (st != TBX_OK) return st;
    return plain_nbytes(e, n, out);
}
