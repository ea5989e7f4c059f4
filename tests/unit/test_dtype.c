/*
 * test_dtype.c - tests of the dtype table: every enum value present with its canonical name,
 * name lookup and aliases, GGUF block geometry, the checked size computations (overflow, block
 * divisibility, packed rounding, scalars), and driver-specific dtypes: their entries and sizes
 * come from the driver that declares them (a test driver here), core has no rule of its own.
 */
#include "tbx_test.h"
#include "tensorbox.h"
#include "api.h"
#include "plain.h"

#include <ctype.h>
#include <stdbool.h>

static const struct { tbx_dtype dt; const char *name; } ALL[] = {
    {TBX_DT_F64, "f64"}, {TBX_DT_F32, "f32"}, {TBX_DT_F16, "f16"}, {TBX_DT_BF16, "bf16"},
    {TBX_DT_F8_E4M3, "f8_e4m3"}, {TBX_DT_F8_E5M2, "f8_e5m2"},
    {TBX_DT_F8_E4M3FNUZ, "f8_e4m3fnuz"}, {TBX_DT_F8_E5M2FNUZ, "f8_e5m2fnuz"},
    {TBX_DT_F8_E8M0, "f8_e8m0"}, {TBX_DT_F6_E2M3, "f6_e2m3"}, {TBX_DT_F6_E3M2, "f6_e3m2"},
    {TBX_DT_F4_E2M1, "f4_e2m1"}, {TBX_DT_C64, "c64"}, {TBX_DT_C128, "c128"},
    {TBX_DT_I8, "i8"}, {TBX_DT_I16, "i16"}, {TBX_DT_I32, "i32"}, {TBX_DT_I64, "i64"},
    {TBX_DT_U8, "u8"}, {TBX_DT_U16, "u16"}, {TBX_DT_U32, "u32"}, {TBX_DT_U64, "u64"},
    {TBX_DT_BOOL, "bool"}, {TBX_DT_BITSET, "bitset"},
    {TBX_DT_I4, "i4"}, {TBX_DT_I2, "i2"}, {TBX_DT_I1, "i1"},
    {TBX_DT_U4, "u4"}, {TBX_DT_U2, "u2"}, {TBX_DT_U1, "u1"}, {TBX_DT_T2, "t2"}, {TBX_DT_T1, "t1"},
    {TBX_DT_Q4_0, "q4_0"}, {TBX_DT_Q4_1, "q4_1"}, {TBX_DT_Q5_0, "q5_0"}, {TBX_DT_Q5_1, "q5_1"},
    {TBX_DT_Q8_0, "q8_0"}, {TBX_DT_Q8_1, "q8_1"}, {TBX_DT_Q2_K, "q2_k"}, {TBX_DT_Q3_K, "q3_k"},
    {TBX_DT_Q4_K, "q4_k"}, {TBX_DT_Q5_K, "q5_k"}, {TBX_DT_Q6_K, "q6_k"}, {TBX_DT_Q8_K, "q8_k"},
    {TBX_DT_IQ2_XXS, "iq2_xxs"}, {TBX_DT_IQ2_XS, "iq2_xs"}, {TBX_DT_IQ3_XXS, "iq3_xxs"},
    {TBX_DT_IQ1_S, "iq1_s"}, {TBX_DT_IQ4_NL, "iq4_nl"}, {TBX_DT_IQ3_S, "iq3_s"},
    {TBX_DT_IQ2_S, "iq2_s"}, {TBX_DT_IQ4_XS, "iq4_xs"}, {TBX_DT_IQ1_M, "iq1_m"},
    {TBX_DT_TQ1_0, "tq1_0"}, {TBX_DT_TQ2_0, "tq2_0"}, {TBX_DT_MXFP4, "mxfp4"},
    {TBX_DT_NVFP4, "nvfp4"}, {TBX_DT_Q1_0, "q1_0"}, {TBX_DT_Q2_0, "q2_0"},
};
#define NALL (sizeof ALL / sizeof ALL[0])

static bool listed(int v) {
    for (size_t i = 0; i < NALL; i++) if ((int)ALL[i].dt == v) return true;
    return false;
}

TBX_TEST(every_enum_value_has_an_entry) {
    CHECK_EQ(NALL, 59); /* the 8 MCF values (90..97) are reserved, not core dtypes */
    for (size_t i = 0; i < NALL; i++) {
        const tbx_dtype_info *e = tbx_dtype_get(ALL[i].dt);
        CHECK(e != NULL);
        if (!e) continue;
        CHECK_EQ(e->dtype, ALL[i].dt);
        CHECK_STR(e->name, ALL[i].name);
    }
    /* gaps and out-of-range values have none; 90..97 are the MCF driver's (shaped) */
    for (int v = -3; v <= TBX_DT_COUNT_ + 3; v++) {
        if (listed(v)) continue;
        if (v >= TBX_DT_MCF_INT8 && v <= TBX_DT_MCF_K2)
            CHECK(tbx_dtype_get((tbx_dtype)v) && (tbx_dtype_get((tbx_dtype)v)->flags & TBX_DTF_SHAPED));
        else
            CHECK(tbx_dtype_get((tbx_dtype)v) == NULL);
    }
}

TBX_TEST(names_round_trip) {
    for (size_t i = 0; i < NALL; i++) {
        const char *n = ALL[i].name;
        CHECK_EQ(tbx_dtype_from_name(n), ALL[i].dt);
        char up[32];
        size_t k = 0;
        for (; n[k] && k < sizeof up - 1; k++) up[k] = (char)toupper((unsigned char)n[k]);
        up[k] = 0;
        CHECK_EQ(tbx_dtype_from_name(up), ALL[i].dt);
        for (size_t j = 0; n[j]; j++) CHECK(!isupper((unsigned char)n[j]));
        for (size_t j = i + 1; j < NALL; j++) CHECK(strcmp(n, ALL[j].name) != 0);
    }
    /* ggml spellings, safetensors spellings and the few aliases */
    CHECK_EQ(tbx_dtype_from_name("q4_K"), TBX_DT_Q4_K);
    CHECK_EQ(tbx_dtype_from_name("IQ2_XXS"), TBX_DT_IQ2_XXS);
    CHECK_EQ(tbx_dtype_from_name("BF16"), TBX_DT_BF16);
    CHECK_EQ(tbx_dtype_from_name("F8_E4M3"), TBX_DT_F8_E4M3);
    CHECK_EQ(tbx_dtype_from_name("F4"), TBX_DT_F4_E2M1);
    CHECK_EQ(tbx_dtype_from_name("f4"), TBX_DT_F4_E2M1);
    CHECK_EQ(tbx_dtype_from_name("complex64"), TBX_DT_C64);
    CHECK_EQ(tbx_dtype_from_name("Complex128"), TBX_DT_C128);
    CHECK_EQ(tbx_dtype_from_name("f8_e4m3fn"), TBX_DT_F8_E4M3);
    CHECK_EQ(tbx_dtype_from_name("F8_E8M0FNU"), TBX_DT_F8_E8M0);
    CHECK_EQ(tbx_dtype_from_name(""), TBX_DT_INVALID);
    CHECK_EQ(tbx_dtype_from_name(NULL), TBX_DT_INVALID);
    CHECK_EQ(tbx_dtype_from_name("float32"), TBX_DT_INVALID);
    CHECK_EQ(tbx_dtype_from_name("f3"), TBX_DT_INVALID);
    CHECK_EQ(tbx_dtype_from_name("f32 "), TBX_DT_INVALID);
    CHECK_EQ(tbx_dtype_from_name("f"), TBX_DT_INVALID);
}

TBX_TEST(bits_sizes_and_flags_consistent) {
    for (size_t i = 0; i < NALL; i++) {
        const tbx_dtype_info *e = tbx_dtype_get(ALL[i].dt);
        if (!e) { CHECK(e != NULL); continue; }
        uint32_t f = e->flags;
        int kinds = !!(f & TBX_DTF_PACKED) + !!(f & TBX_DTF_BLOCK) + !!(f & TBX_DTF_SHAPED);
        CHECK(kinds <= 1);
        CHECK(e->bits > 0);
        if (f & TBX_DTF_BLOCK) {
            CHECK(e->block_size > 1 && e->block_bytes > 0);
            CHECK_EQ(e->bits, (8 * e->block_bytes + e->block_size / 2) / e->block_size);
            CHECK(!(f & (TBX_DTF_FLOAT | TBX_DTF_INT)));
            /* TBX_DTF_DECODE exactly when a dequantizer is registered */
            CHECK_EQ(!!(f & TBX_DTF_DECODE), tbx_dequant_for(e->dtype) != NULL);
        } else if (f & TBX_DTF_PACKED) {
            CHECK_EQ(e->block_size, 1);
            CHECK_EQ(e->block_bytes, 0);
            CHECK(e->bits < 8);
            CHECK(f & TBX_DTF_DECODE);
        } else if (f & TBX_DTF_SHAPED) {
            CHECK_EQ(e->block_size, 1);
            CHECK_EQ(e->block_bytes, 0);
            CHECK(!(f & TBX_DTF_DECODE));
        } else {
            CHECK_EQ(e->block_size, 1);
            CHECK_EQ(e->bits, 8 * e->block_bytes);
            CHECK_EQ(!!(f & TBX_DTF_DECODE), !(f & TBX_DTF_COMPLEX));
        }
        if (f & TBX_DTF_FLOAT) CHECK(f & TBX_DTF_SIGNED);
        CHECK(!((f & TBX_DTF_FLOAT) && (f & TBX_DTF_INT)));
        if (f & TBX_DTF_COMPLEX) CHECK(f & TBX_DTF_FLOAT);
    }
    CHECK_EQ(tbx_dtype_get(TBX_DT_F32)->flags, TBX_DTF_FLOAT | TBX_DTF_SIGNED | TBX_DTF_DECODE);
    CHECK_EQ(tbx_dtype_get(TBX_DT_U16)->flags, TBX_DTF_INT | TBX_DTF_DECODE);
    CHECK_EQ(tbx_dtype_get(TBX_DT_I4)->flags,
             TBX_DTF_INT | TBX_DTF_SIGNED | TBX_DTF_PACKED | TBX_DTF_DECODE);
    CHECK_EQ(tbx_dtype_get(TBX_DT_F6_E3M2)->bits, 6);
    CHECK_EQ(tbx_dtype_get(TBX_DT_C128)->bits, 128);
    CHECK_EQ(tbx_dtype_get(TBX_DT_C64)->block_bytes, 8);
    CHECK_EQ(tbx_dtype_get(TBX_DT_BOOL)->block_bytes, 1);
    CHECK_EQ(tbx_dtype_get(TBX_DT_BITSET)->block_bytes, 1);
}

/* The table says TBX_DTF_DECODE for a block type exactly when the quant layer has a dequantizer
 * for it (the table is the foundation and never asks the quant layer itself). */
TBX_TEST(block_decode_flag_matches_the_dequantizers) {
    for (int v = 1; v < TBX_DT_COUNT_; v++) {
        const tbx_dtype_info *e = tbx_dtype_core_get((tbx_dtype)v);
        if (!e || !(e->flags & TBX_DTF_BLOCK)) continue;
        const bool flag = (e->flags & TBX_DTF_DECODE) != 0;
        const bool kernel = tbx_dequant_for((tbx_dtype)v) != NULL;
        if (flag != kernel) fprintf(stderr, "%s: DECODE flag %d, dequantizer %d\n", e->name, flag, kernel);
        CHECK(flag == kernel);
    }
}

TBX_TEST(gguf_block_table) {
    static const struct { tbx_dtype dt; uint32_t bs, bb; } B[] = {
        {TBX_DT_Q4_0, 32, 18}, {TBX_DT_Q4_1, 32, 20}, {TBX_DT_Q5_0, 32, 22},
        {TBX_DT_Q5_1, 32, 24}, {TBX_DT_Q8_0, 32, 34}, {TBX_DT_Q8_1, 32, 36},
        {TBX_DT_Q2_K, 256, 84}, {TBX_DT_Q3_K, 256, 110}, {TBX_DT_Q4_K, 256, 144},
        {TBX_DT_Q5_K, 256, 176}, {TBX_DT_Q6_K, 256, 210}, {TBX_DT_Q8_K, 256, 292},
        {TBX_DT_IQ2_XXS, 256, 66}, {TBX_DT_IQ2_XS, 256, 74}, {TBX_DT_IQ3_XXS, 256, 98},
        {TBX_DT_IQ1_S, 256, 50}, {TBX_DT_IQ4_NL, 32, 18}, {TBX_DT_IQ3_S, 256, 110},
        {TBX_DT_IQ2_S, 256, 82}, {TBX_DT_IQ4_XS, 256, 136}, {TBX_DT_IQ1_M, 256, 56},
        {TBX_DT_TQ1_0, 256, 54}, {TBX_DT_TQ2_0, 256, 66}, {TBX_DT_MXFP4, 32, 17},
        {TBX_DT_NVFP4, 64, 36}, {TBX_DT_Q1_0, 128, 18}, {TBX_DT_Q2_0, 64, 18},
    };
    for (size_t i = 0; i < sizeof B / sizeof B[0]; i++) {
        const tbx_dtype_info *e = tbx_dtype_get(B[i].dt);
        if (!e) { CHECK(e != NULL); continue; }
        CHECK_EQ(e->block_size, B[i].bs);
        CHECK_EQ(e->block_bytes, B[i].bb);
        CHECK(e->flags & TBX_DTF_BLOCK);
        uint64_t n = 0;
        CHECK_OK(tbx_dtype_nbytes(B[i].dt, 3 * (uint64_t)B[i].bs, &n));
        CHECK_EQ(n, 3 * (uint64_t)B[i].bb);
        CHECK_EQ(tbx_dtype_nbytes(B[i].dt, B[i].bs + 1, &n), TBX_E_FORMAT);
    }
    CHECK_EQ(tbx_dtype_get(TBX_DT_Q4_0)->bits, 5);  /* 4.5 rounded */
    CHECK_EQ(tbx_dtype_get(TBX_DT_Q8_0)->bits, 9);  /* 8.5 rounded */
    CHECK_EQ(tbx_dtype_get(TBX_DT_Q6_K)->bits, 7);  /* 6.5625 rounded */
    CHECK_EQ(tbx_dtype_get(TBX_DT_IQ1_S)->bits, 2); /* 1.5625 rounded */
}

TBX_TEST(nbytes_plain_and_packed) {
    uint64_t n = 12345;
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_F32, 100, &n)); CHECK_EQ(n, 400);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_C128, 3, &n)); CHECK_EQ(n, 48);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_BOOL, 7, &n)); CHECK_EQ(n, 7);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_BITSET, 9, &n)); CHECK_EQ(n, 9);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_F8_E8M0, 5, &n)); CHECK_EQ(n, 5);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_F32, 0, &n)); CHECK_EQ(n, 0);
    /* packed: ceil(n * bits / 8) */
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_I4, 7, &n)); CHECK_EQ(n, 4);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_U4, 8, &n)); CHECK_EQ(n, 4);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_I2, 5, &n)); CHECK_EQ(n, 2);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_T1, 9, &n)); CHECK_EQ(n, 2);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_U1, 1, &n)); CHECK_EQ(n, 1);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_I1, 0, &n)); CHECK_EQ(n, 0);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_F6_E2M3, 5, &n)); CHECK_EQ(n, 4);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_F6_E3M2, 4, &n)); CHECK_EQ(n, 3);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_F4_E2M1, 3, &n)); CHECK_EQ(n, 2);
    for (uint64_t k = 0; k < 100; k++) {
        for (int dt = TBX_DT_F6_E2M3; dt <= TBX_DT_T1; dt++) {
            const tbx_dtype_info *e = tbx_dtype_get((tbx_dtype)dt);
            if (!e || !(e->flags & TBX_DTF_PACKED)) continue;
            CHECK_OK(tbx_dtype_nbytes((tbx_dtype)dt, k, &n));
            CHECK_EQ(n, (k * e->bits + 7) / 8);
        }
    }
    /* a packed count whose bit count exceeds 64 bits but whose byte count does not */
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_I4, (uint64_t)1 << 62, &n));
    CHECK(n == (uint64_t)1 << 61);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_U1, UINT64_MAX, &n));
    CHECK(n == (uint64_t)1 << 61);
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_F6_E2M3, UINT64_MAX, &n)); /* packed never overflows */
    CHECK(n == (uint64_t)3 << 62);
}

TBX_TEST(nbytes_errors) {
    uint64_t n = 7;
    CHECK_EQ(tbx_dtype_nbytes(TBX_DT_F32, (uint64_t)1 << 62, &n), TBX_E_OVERFLOW);
    CHECK_EQ(n, 7); /* untouched on failure */
    CHECK_OK(tbx_dtype_nbytes(TBX_DT_F32, ((uint64_t)1 << 62) - 1, &n));
    CHECK_EQ(tbx_dtype_nbytes(TBX_DT_U64, (uint64_t)1 << 61, &n), TBX_E_OVERFLOW);
    CHECK_EQ(tbx_dtype_nbytes(TBX_DT_Q8_K, UINT64_MAX / 256 * 256, &n), TBX_E_OVERFLOW);
    CHECK_EQ(tbx_dtype_nbytes(TBX_DT_Q4_0, 31, &n), TBX_E_FORMAT);
    CHECK_EQ(tbx_dtype_nbytes(TBX_DT_MCF_Q4, 64, &n), TBX_E_UNSUPPORTED); /* shaped (MCF) */
    CHECK_EQ(tbx_dtype_nbytes(TBX_DT_INVALID, 1, &n), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_dtype_nbytes((tbx_dtype)40, 1, &n), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_dtype_nbytes(TBX_DT_F32, 1, NULL), TBX_E_INVALID_ARG);
}

TBX_TEST(nbytes_shape_rules) {
    uint64_t n = 0;
    /* scalars: one element */
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_F32, NULL, 0, &n)); CHECK_EQ(n, 4);
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_I4, NULL, 0, &n)); CHECK_EQ(n, 1);
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_BOOL, NULL, 0, &n)); CHECK_EQ(n, 1);
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_Q4_0, NULL, 0, &n), TBX_E_FORMAT);
    /* plain and packed */
    const uint64_t s234[3] = {2, 3, 4};
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_F16, s234, 3, &n)); CHECK_EQ(n, 48);
    const uint64_t s37[2] = {3, 7};
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_I4, s37, 2, &n)); CHECK_EQ(n, 11); /* 84 bits */
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_F6_E2M3, s37, 2, &n)); CHECK_EQ(n, 16); /* 126 bits */
    /* blocks along the last dimension */
    const uint64_t r3c64[2] = {3, 64}, r64c3[2] = {64, 3}, r1c256[2] = {1, 256};
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_Q4_0, r3c64, 2, &n)); CHECK_EQ(n, 108);
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_Q4_0, r64c3, 2, &n), TBX_E_FORMAT);
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_Q4_K, r1c256, 2, &n)); CHECK_EQ(n, 144);
    const uint64_t q3[3] = {5, 2, 128};
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_Q1_0, q3, 3, &n)); CHECK_EQ(n, 10 * 18);
    const uint64_t mx[1] = {96};
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_MXFP4, mx, 1, &n)); CHECK_EQ(n, 3 * 17);
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_NVFP4, mx, 1, &n), TBX_E_FORMAT);
    /* an empty tensor: any zero dimension, no overflow from the others */
    const uint64_t z[3] = {(uint64_t)1 << 40, (uint64_t)1 << 40, 0};
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_F32, z, 3, &n)); CHECK_EQ(n, 0);
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_Q8_0, z, 3, &n)); CHECK_EQ(n, 0);
    const uint64_t z2[2] = {0, 33};
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_Q8_0, z2, 2, &n), TBX_E_FORMAT);
    /* overflow: element count and byte count */
    const uint64_t big[2] = {(uint64_t)1 << 40, (uint64_t)1 << 40};
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_F32, big, 2, &n), TBX_E_OVERFLOW);
    const uint64_t b62[1] = {(uint64_t)1 << 62};
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_F32, b62, 1, &n), TBX_E_OVERFLOW);
    const uint64_t b62m[1] = {((uint64_t)1 << 62) - 1};
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_F32, b62m, 1, &n));
    CHECK(n == UINT64_MAX - 3);
    const uint64_t qbig[2] = {(uint64_t)1 << 60, 256};
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_Q8_K, qbig, 2, &n), TBX_E_OVERFLOW);
    /* bad arguments */
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_F32, NULL, 2, &n), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_F32, s37, 2, NULL), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_dtype_nbytes_shape(TBX_DT_INVALID, s37, 2, &n), TBX_E_INVALID_ARG);
}

/* A driver-specific dtype: declared by a (test) driver, sized by its hook. */
#define TEST_DT ((tbx_dtype)120) /* no driver of the library declares it */
static int hook_calls;
static uint32_t hook_ndim;
static tbx_status test_dtype_nbytes(tbx_dtype dt, const uint64_t *shape, uint32_t ndim,
                                    uint64_t *out) {
    hook_calls++;
    hook_ndim = ndim;
    if (dt != TEST_DT) return TBX_E_INVALID_ARG;
    if (ndim != 2) return TBX_E_FORMAT;
    *out = 1000 + shape[0] * 10 + shape[1]; /* any rule the core could not know */
    return TBX_OK;
}
static const tbx_dtype_info test_dtypes[] = {
    {TEST_DT, "test_k4", 4, 1, 0, TBX_DTF_SHAPED},
};
static const tbx_driver test_driver = {
    .format = (tbx_format)99,
    .name = "testfmt",
    .dtypes = test_dtypes,
    .ndtypes = 1,
    .dtype_nbytes = test_dtype_nbytes,
};
static const tbx_driver test_driver_nohook = {
    .format = (tbx_format)98,
    .name = "testfmt2",
    .dtypes = test_dtypes,
    .ndtypes = 1,
};

TBX_TEST(driver_specific_dtype_sized_by_its_driver) {
    const tbx_driver *const list[] = {&tbx_driver_gguf, &test_driver, NULL};
    const tbx_driver *const list_nohook[] = {&test_driver_nohook, NULL};
    /* 90..97 are the MCF driver's (and only its): shaped entries, sized by its hook */
    for (int v = 90; v <= 97; v++) {
        const tbx_dtype_info *m = tbx_dtype_get((tbx_dtype)v);
        CHECK(m != NULL && (m->flags & TBX_DTF_SHAPED));
        CHECK(tbx_dtype_driver_in(tbx_drivers, (tbx_dtype)v, NULL) == &tbx_driver_mcf);
    }
    const uint64_t q2x40[2] = {2, 40};
    uint64_t qn = 0;
    CHECK_OK(tbx_dtype_nbytes_shape(TBX_DT_MCF_K3, q2x40, 2, &qn));
    CHECK_EQ(qn, 176); /* NOTES: k3 2x40 = 176 */
    uint64_t n = 0;
    const uint64_t s[2] = {3, 7};
    CHECK_EQ(tbx_dtype_nbytes_shape(TEST_DT, s, 2, &n), TBX_E_INVALID_ARG);
    /* with the test driver in the list: its entry, and its size rule */
    const tbx_dtype_info *e = tbx_dtype_get_in(list, TEST_DT);
    CHECK(e == &test_dtypes[0]);
    const tbx_dtype_info *e2 = NULL;
    CHECK(tbx_dtype_driver_in(list, TEST_DT, &e2) == &test_driver);
    CHECK(e2 == &test_dtypes[0]);
    hook_calls = 0;
    CHECK_OK(tbx_dtype_nbytes_shape_in(list, TEST_DT, s, 2, &n));
    CHECK_EQ(hook_calls, 1);
    CHECK_EQ(n, 1037);
    CHECK_EQ(tbx_dtype_nbytes_shape_in(list, TEST_DT, s, 1, &n), TBX_E_FORMAT);
    CHECK_EQ(hook_calls, 2);
    CHECK_EQ(hook_ndim, 1);
    /* core dtypes never reach the hook */
    CHECK_OK(tbx_dtype_nbytes_shape_in(list, TBX_DT_F32, s, 2, &n));
    CHECK_EQ(n, 84);
    CHECK_EQ(hook_calls, 2);
    /* a driver that declares the dtype but has no size hook: unsupported, not a guess */
    CHECK_EQ(tbx_dtype_nbytes_shape_in(list_nohook, TEST_DT, s, 2, &n), TBX_E_UNSUPPORTED);
}

TBX_TEST_MAIN()
