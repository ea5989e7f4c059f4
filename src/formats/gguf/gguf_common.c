/*
 * gguf_common.c - the GGUF wire rules every half of the driver shares: the metadata value types
 * and the ggml type table (with its public lookups, tensorbox/gguf.h).
 *
 * A metadata entry (v2, v3; v1 stores every length and count marked u64 as a u32; big-endian
 * files store every field byte-swapped):
 *
 *   +----------------+-----------+-------------+---------------------------------------+
 *   | u64 key length | key bytes | u32 type id | value                                 |
 *   +----------------+-----------+-------------+---------------------------------------+
 *   type id  value                               type id  value
 *   0 u8     1 byte                              7 bool   1 byte, 0 or 1
 *   1 i8     1 byte                              8 string u64 length + bytes (no NUL)
 *   2 u16    2 bytes                             9 array  u32 element type id + u64 count +
 *   3 i16    2 bytes                                      count values without their type id
 *   4 u32    4 bytes                                      (arrays may hold arrays)
 *   5 i32    4 bytes                             10 u64   8 bytes
 *   6 f32    4 bytes (IEEE binary32)             11 i64   8 bytes
 *                                                12 f64   8 bytes (IEEE binary64)
 *
 * A tensor's ggml type id names its element or block type (gguf_types: ggml's name, the dtype,
 * and how a block's multi-byte fields are swapped in a big-endian file). Ids that ggml removed
 * (Q4_2, the Q4_0_4_4 repacks, ...) keep their names and have no dtype.
 */
#include "gguf_int.h"

static const char *const gguf_value_names[GV_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const tbx_value_type gguf_value_tbx[GV_COUNT] = {
    TBX_V_U8, TBX_V_I8, TBX_V_U16, TBX_V_I16, TBX_V_U32, TBX_V_I32, TBX_V_F32,
    TBX_V_BOOL, TBX_V_STRING, TBX_V_ARRAY, TBX_V_U64, TBX_V_I64, TBX_V_F64,
};

/* Byte size of a fixed-size GGUF value type, 0 for string/array. */
size_t gguf_value_size(uint32_t t) {
    switch (t) {
    case GV_U8: case GV_I8: case GV_BOOL: return 1;
    case GV_U16: case GV_I16: return 2;
    case GV_U32: case GV_I32: case GV_F32: return 4;
    case GV_U64: case GV_I64: case GV_F64: return 8;
    default: return 0;
    }
}

const char *gguf_value_name(uint32_t t) { return t < GV_COUNT ? gguf_value_names[t] : "?"; }

/* GGUF value type of a tbx value type, -1 when GGUF has none. */
int gguf_value_type_of(tbx_value_type t) {
    switch (t) {
    case TBX_V_U8: return GV_U8;
    case TBX_V_I8: return GV_I8;
    case TBX_V_U16: return GV_U16;
    case TBX_V_I16: return GV_I16;
    case TBX_V_U32: return GV_U32;
    case TBX_V_I32: return GV_I32;
    case TBX_V_F32: return GV_F32;
    case TBX_V_BOOL: return GV_BOOL;
    case TBX_V_STRING: return GV_STRING;
    case TBX_V_ARRAY: return GV_ARRAY;
    case TBX_V_U64: return GV_U64;
    case TBX_V_I64: return GV_I64;
    case TBX_V_F64: return GV_F64;
    default: return -1;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* ggml types                                                                                  */
/* ------------------------------------------------------------------------------------------ */

#define GT(nm, d, be, ...) { nm, TBX_DT_##d, be, { __VA_ARGS__ } }
const gguf_type_info gguf_types[TBX_GGUF_TYPE_MAX + 1] = {
    [0] = GT("F32", F32, 1, {0, 4, 1}),
    [1] = GT("F16", F16, 1, {0, 2, 1}),
    [2] = GT("Q4_0", Q4_0, 1, {0, 2, 1}),
    [3] = GT("Q4_1", Q4_1, 1, {0, 2, 2}),
    [4] = GT("Q4_2", INVALID, 0, {0, 0, 0}),
    [5] = GT("Q4_3", INVALID, 0, {0, 0, 0}),
    [6] = GT("Q5_0", Q5_0, 1, {0, 2, 1}, {2, 4, 1}),
    [7] = GT("Q5_1", Q5_1, 1, {0, 2, 2}, {4, 4, 1}),
    [8] = GT("Q8_0", Q8_0, 1, {0, 2, 1}),
    [9] = GT("Q8_1", Q8_1, 1, {0, 2, 2}),
    [10] = GT("Q2_K", Q2_K, 1, {80, 2, 2}),
    [11] = GT("Q3_K", Q3_K, 1, {108, 2, 1}),
    [12] = GT("Q4_K", Q4_K, 1, {0, 2, 2}),
    [13] = GT("Q5_K", Q5_K, 1, {0, 2, 2}),
    [14] = GT("Q6_K", Q6_K, 1, {208, 2, 1}),
    [15] = GT("Q8_K", Q8_K, 1, {0, 4, 1}, {4 + 256, 2, 16}),
    [16] = GT("IQ2_XXS", IQ2_XXS, 2, {0, 0, 0}),
    [17] = GT("IQ2_XS", IQ2_XS, 1, {0, 2, 33}),
    [18] = GT("IQ3_XXS", IQ3_XXS, 2, {0, 0, 0}),
    [19] = GT("IQ1_S", IQ1_S, 1, {0, 2, 1}, {34, 2, 8}),
    [20] = GT("IQ4_NL", IQ4_NL, 1, {0, 2, 1}),
    [21] = GT("IQ3_S", IQ3_S, 1, {0, 2, 1}),
    [22] = GT("IQ2_S", IQ2_S, 1, {0, 2, 1}),
    [23] = GT("IQ4_XS", IQ4_XS, 1, {0, 2, 2}),
    [24] = GT("I8", I8, 0, {0, 0, 0}),
    [25] = GT("I16", I16, 1, {0, 2, 1}),
    [26] = GT("I32", I32, 1, {0, 4, 1}),
    [27] = GT("I64", I64, 1, {0, 8, 1}),
    [28] = GT("F64", F64, 1, {0, 8, 1}),
    [29] = GT("IQ1_M", IQ1_M, 2, {0, 0, 0}),
    [30] = GT("BF16", BF16, 1, {0, 2, 1}),
    [31] = GT("Q4_0_4_4", INVALID, 0, {0, 0, 0}),
    [32] = GT("Q4_0_4_8", INVALID, 0, {0, 0, 0}),
    [33] = GT("Q4_0_8_8", INVALID, 0, {0, 0, 0}),
    [34] = GT("TQ1_0", TQ1_0, 1, {52, 2, 1}),
    [35] = GT("TQ2_0", TQ2_0, 1, {64, 2, 1}),
    [36] = GT("IQ4_NL_4_4", INVALID, 0, {0, 0, 0}),
    [37] = GT("IQ4_NL_4_8", INVALID, 0, {0, 0, 0}),
    [38] = GT("IQ4_NL_8_8", INVALID, 0, {0, 0, 0}),
    [39] = GT("MXFP4", MXFP4, 0, {0, 0, 0}),
    [40] = GT("NVFP4", NVFP4, 0, {0, 0, 0}),
    [41] = GT("Q1_0", Q1_0, 1, {0, 2, 1}),
    [42] = GT("Q2_0", Q2_0, 1, {0, 2, 1}),
};
#undef GT

tbx_dtype tbx_gguf_type_dtype(uint32_t t) {
    return t <= TBX_GGUF_TYPE_MAX ? gguf_types[t].dt : TBX_DT_INVALID;
}

int32_t tbx_gguf_dtype_type(tbx_dtype dt) {
    if (dt == TBX_DT_INVALID) return -1;
    for (uint32_t t = 0; t <= TBX_GGUF_TYPE_MAX; t++)
        if (gguf_types[t].dt == dt) return (int32_t)t;
    return -1;
}

const char *tbx_gguf_type_name(uint32_t t) { return t <= TBX_GGUF_TYPE_MAX ? gguf_types[t].name : NULL; }

const char *gguf_dtype_name(tbx_dtype dt) {
    const tbx_dtype_info *di = tbx_dtype_core_get(dt);
    return di ? di->name : "(invalid)";
}
