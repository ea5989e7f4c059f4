/*
 * dtype.c - the dtype table: names, element sizes, block geometry and flags of every core
 * tbx_dtype, name lookup, and the size rules of the core table.
 *
 * This file is part of the foundation: it never calls upward and never reads the global
 * driver table. Driver-specific dtypes (TBX_DTF_SHAPED) have their entries and size rules in the
 * driver that declares them (tbx_driver.dtypes / dtype_nbytes); the *_in functions below look
 * them up in a driver list their caller passes down. The public lookups over every registered
 * driver (tbx_dtype_get, _from_name, _nbytes[_shape], tbx_decode_f32) are in registry.c.
 */
#include "model.h" /* the driver-list lookups read driver rows */

#include <ctype.h>

#define F_FLT (TBX_DTF_FLOAT | TBX_DTF_SIGNED | TBX_DTF_DECODE)
#define F_SINT (TBX_DTF_INT | TBX_DTF_SIGNED | TBX_DTF_DECODE)
#define F_UINT (TBX_DTF_INT | TBX_DTF_DECODE)
#define F_CPLX (TBX_DTF_FLOAT | TBX_DTF_SIGNED | TBX_DTF_COMPLEX)
/* every ggml block type has a dequantizer (src/quant/dispatch.c); tests/unit/test_dtype.c checks
 * that TBX_DTF_DECODE and the dequantizer registry agree */
#define F_BLK (TBX_DTF_BLOCK | TBX_DTF_DECODE)

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
    X(Q2_0, "q2_0", BLK_BITS(64, 18), 64, 18, F_BLK)

#define ENTRY(id, nm, b, bs, bb, fl) [TBX_DT_##id] = {TBX_DT_##id, nm, b, bs, bb, fl},

static const tbx_dtype_info table[TBX_DT_COUNT_] = {TBX_DTYPE_LIST(ENTRY)};

/* The core table's entry, or NULL (driver-specific and unassigned values). */
const tbx_dtype_info *tbx_dtype_core_get(tbx_dtype dtype) {
    if ((int)dtype <= 0 || (int)dtype >= TBX_DT_COUNT_) return NULL;
    const tbx_dtype_info *e = &table[dtype];
    if (!e->name) return NULL;
    return e;
}

bool tbx_dtype_name_eq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

static const struct { const char *alias; tbx_dtype dt; } aliases[] = {
    {"f4", TBX_DT_F4_E2M1},         {"complex64", TBX_DT_C64},
    {"complex128", TBX_DT_C128},    {"f8_e4m3fn", TBX_DT_F8_E4M3},
    {"f8_e8m0fnu", TBX_DT_F8_E8M0},
};

tbx_dtype tbx_dtype_core_from_name(const char *name) {
    for (int i = 1; i < TBX_DT_COUNT_; i++)
        if (table[i].name && tbx_dtype_name_eq(name, table[i].name)) return (tbx_dtype)i;
    return TBX_DT_INVALID;
}

tbx_dtype tbx_dtype_alias_from_name(const char *name) {
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (tbx_dtype_name_eq(name, aliases[i].alias)) return aliases[i].dt;
    return TBX_DT_INVALID;
}

tbx_status tbx_dtype_info_nbytes(const tbx_dtype_info *e, uint64_t nelems, uint64_t *out) {
    if (!e || !out) return TBX_E_INVALID_ARG;
    if (e->flags & TBX_DTF_SHAPED) return TBX_E_UNSUPPORTED;
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

tbx_status tbx_dtype_info_nbytes_shape(const tbx_dtype_info *e, const uint64_t *shape,
                                       uint32_t ndim, uint64_t *out) {
    if (!e || !out || (ndim > 0 && !shape)) return TBX_E_INVALID_ARG;
    if (e->flags & TBX_DTF_SHAPED) return TBX_E_UNSUPPORTED;
    /* Row-wise block rule: the last (fastest) dimension holds whole blocks. */
    uint64_t last = ndim ? shape[ndim - 1] : 1;
    if (last % e->block_size != 0) return TBX_E_FORMAT;
    uint64_t n;
    tbx_status st = shape_nelems(shape, ndim, &n);
    if (st != TBX_OK) return st;
    return tbx_dtype_info_nbytes(e, n, out);
}

/* ------------------------------------------------------------------------------------------ */
/* Driver-specific dtypes, over a driver list the caller passes down (registry.c: tbx_drivers;  */
/* model.c: the handle's own driver; tests: their own). This file never names a driver.         */
/* ------------------------------------------------------------------------------------------ */
const tbx_driver *tbx_dtype_driver_in(const tbx_driver *const *drivers, tbx_dtype dt,
                                      const tbx_dtype_info **info) {
    for (size_t i = 0; drivers && drivers[i]; i++)
        for (size_t k = 0; k < drivers[i]->ndtypes; k++)
            if (drivers[i]->dtypes[k].dtype == dt) {
                if (info) *info = &drivers[i]->dtypes[k];
                return drivers[i];
            }
    return NULL;
}

const tbx_dtype_info *tbx_dtype_get_in(const tbx_driver *const *drivers, tbx_dtype dtype) {
    const tbx_dtype_info *e = tbx_dtype_core_get(dtype);
    if (e || (int)dtype <= 0) return e;
    /* driver-specific dtypes: the entry of the driver that declares it */
    tbx_dtype_driver_in(drivers, dtype, &e);
    return e;
}

tbx_status tbx_dtype_nbytes_shape_in(const tbx_driver *const *drivers, tbx_dtype dtype,
                                     const uint64_t *shape, uint32_t ndim, uint64_t *out) {
    const tbx_dtype_info *e = tbx_dtype_get_in(drivers, dtype);
    if (!e || !out || (ndim > 0 && !shape)) return TBX_E_INVALID_ARG;
    if (e->flags & TBX_DTF_SHAPED) {
        /* driver-specific: its size rule belongs to the driver that declares it */
        const tbx_driver *d = tbx_dtype_driver_in(drivers, dtype, NULL);
        if (!d || !d->dtype_nbytes) return TBX_E_UNSUPPORTED;
        return d->dtype_nbytes(dtype, shape, ndim, out);
    }
    return tbx_dtype_info_nbytes_shape(e, shape, ndim, out);
}

tbx_status tbx_dtype_core_nbytes(tbx_dtype dt, uint64_t nelems, uint64_t *out) {
    return tbx_dtype_info_nbytes(tbx_dtype_core_get(dt), nelems, out);
}

tbx_status tbx_dtype_core_nbytes_shape(tbx_dtype dt, const uint64_t *shape, uint32_t ndim,
                                       uint64_t *out) {
    return tbx_dtype_info_nbytes_shape(tbx_dtype_core_get(dt), shape, ndim, out);
}
