/*
 * gguf_common.c - the GGUF wire rules every half of the driver shares: the metadata value types
 * and the encoding of a scalar value (the writer, the in-place edit), the ggml type table (with
 * its public lookups, tensorbox/gguf.h), llama.cpp's split-set names and keys; and what the
 * file tools of the façade ask the driver (gguf_edit.h: where an entry's value lies in an open
 * file, a value's bytes, the split-set names).
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
#include "gguf_edit.h"

#include <inttypes.h>
#include <stdio.h>

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

size_t gguf_scalar_bytes(const tbx_value *v, uint8_t out[8]) {
    int t = gguf_value_type_of(v->type);
    size_t n = t >= 0 ? gguf_value_size((uint32_t)t) : 0;
    if (n == 0) return 0; /* a string, an array, or no GGUF type */
    uint64_t bits;
    switch (v->type) {
    case TBX_V_BOOL: bits = v->v.u != 0; break;
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: bits = (uint64_t)v->v.i; break;
    case TBX_V_F32: { float x = (float)v->v.f; uint32_t u; memcpy(&u, &x, 4); bits = u; break; }
    case TBX_V_F64: memcpy(&bits, &v->v.f, 8); break;
    default: bits = v->v.u; break; /* the unsigned types */
    }
    for (size_t k = 0; k < n; k++) out[k] = (uint8_t)(bits >> (8 * k));
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* What the file tools ask (gguf_edit.h)                                                       */
/* ------------------------------------------------------------------------------------------ */
/* The driver state of a handle the GGUF driver opened, or NULL. */
static const gguf_state *state_of(const tbx_file *f) {
    if (!f || !f->drv || f->drv->format != TBX_FORMAT_GGUF || !f->drv_state) return NULL;
    const gguf_state *s = f->drv_state;
    return s->tag == G_STATE_TAG ? s : NULL;
}

bool tbx_gguf_big_endian_(const tbx_file *f) {
    const gguf_state *s = state_of(f);
    return s && s->be;
}

tbx_status tbx_gguf_kv_span_(const tbx_file *f, uint64_t i, uint64_t *type_at, uint64_t *end,
                             tbx_error *err) {
    const gguf_state *s = state_of(f);
    if (!s || i >= s->nkv || i >= f->nmeta)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "metadata",
                       "metadata entry %" PRIu64 " is not an entry of a file the GGUF driver "
                       "opened", i);
    /* the key: its length (u32 in v1, else u64), then its bytes */
    *type_at = s->kv_off[i] + (s->version == 1 ? 4 : 8) + f->meta[i].key_len;
    *end = i + 1 < s->nkv ? s->kv_off[i + 1] : s->kvs_end;
    return TBX_OK;
}

size_t tbx_gguf_kv_value_bytes_(const tbx_value *v, uint8_t *dst, size_t cap) {
    uint8_t b[8];
    size_t n = gguf_scalar_bytes(v, b), need;
    if (n) {
        need = 4 + n;
    } else if (v->type == TBX_V_STRING) {
        if (v->v.s.n > SIZE_MAX - 12) return 0;
        need = 12 + v->v.s.n;
    } else {
        return 0;
    }
    if (!dst || cap < need) return need;
    tbx_st32(dst, (uint32_t)gguf_value_type_of(v->type));
    if (n) {
        memcpy(dst + 4, b, n);
    } else {
        tbx_st64(dst + 4, v->v.s.n);
        memcpy(dst + 12, v->v.s.p, v->v.s.n);
    }
    return need;
}

/* ------------------------------------------------------------------------------------------ */
/* Split sets                                                                                  */
/* ------------------------------------------------------------------------------------------ */
const tbx_gguf_split_key tbx_gguf_split_keys_[3] = {
    {"split.no", TBX_V_U16}, {"split.count", TBX_V_U16}, {"split.tensors.count", TBX_V_I32},
};

bool tbx_gguf_is_split_key_(const char *key, size_t len) {
    return len >= 6 && memcmp(key, "split.", 6) == 0;
}

size_t tbx_gguf_shard_name_(char *dst, size_t cap, const char *stem, size_t stem_len, uint32_t k,
                            uint32_t n) {
    int r = snprintf(dst, cap, "%.*s-%05" PRIu32 "-of-%05" PRIu32 ".gguf", (int)stem_len, stem, k,
                     n);
    return r < 0 ? 0 : (size_t)r;
}

uint32_t tbx_gguf_shard1_count_(const char *name, size_t len, size_t *stem_len) {
    static const char first[] = "-00001-of-", ext[] = ".gguf";
    const size_t fl = sizeof first - 1, el = sizeof ext - 1, sl = fl + 5 + el;
    if (len < sl) return 0;
    const char *p = name + len - sl;
    if (memcmp(p, first, fl) != 0 || memcmp(p + fl + 5, ext, el) != 0) return 0;
    uint32_t n = 0;
    for (size_t i = 0; i < 5; i++) {
        char c = p[fl + i];
        if (c < '0' || c > '9') return 0;
        n = n * 10 + (uint32_t)(c - '0');
    }
    if (n && stem_len) *stem_len = len - sl;
    return n;
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
