/*
 * value.c - typed metadata values.
 *
 * A tbx_value is a tagged union. Arrays of fixed-size scalars (the common case: token scores,
 * token types) are stored packed, one native-endian element after the other, so an array costs
 * what its elements cost in the file and no more; tbx_value_at() materialises single elements on
 * demand into a per-array cache. Arrays of strings that readers build (a GGUF vocabulary) are
 * compact too: one offsets array and one byte blob holding every string followed by its NUL,
 * so 12 million empty strings cost 108 MB rather than one heap value each (about 1.4 GB);
 * tbx_value_str_at() reads them without materialising anything. Arrays built through the public
 * API, arrays of arrays and maps hold pointers to values. Every value remembers the allocator
 * that owns it.
 */
#include "core.h"

#include <stdlib.h>

static const char *const type_names[] = {
    "null", "bool", "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64",
    "f16", "bf16", "f32", "f64", "string", "bytes", "array", "map", "ndarray", "bitset",
};

const char *tbx_value_type_name(tbx_value_type t) {
    if ((unsigned)t < sizeof type_names / sizeof type_names[0]) return type_names[t];
    return "invalid";
}

size_t tbx_value_scalar_size(tbx_value_type t) {
    switch (t) {
    case TBX_V_BOOL: case TBX_V_U8: case TBX_V_I8: return 1;
    case TBX_V_U16: case TBX_V_I16: case TBX_V_F16: case TBX_V_BF16: return 2;
    case TBX_V_U32: case TBX_V_I32: case TBX_V_F32: return 4;
    case TBX_V_U64: case TBX_V_I64: case TBX_V_F64: return 8;
    default: return 0;
    }
}

bool tbx_value_type_is_int(tbx_value_type t) { return t >= TBX_V_U8 && t <= TBX_V_I64; }
bool tbx_value_type_is_float(tbx_value_type t) { return t >= TBX_V_F16 && t <= TBX_V_F64; }
static bool is_unsigned(tbx_value_type t) {
    return t == TBX_V_U8 || t == TBX_V_U16 || t == TBX_V_U32 || t == TBX_V_U64;
}

/* ------------------------------------------------------------------------------------------ */

tbx_value *tbx_val_new(const tbx_alloc *al, tbx_value_type t) {
    tbx_value *v = tbx_malloc(al, sizeof *v);
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    v->type = t;
    v->al = al;
    return v;
}

tbx_value *tbx_val_string(const tbx_alloc *al, tbx_value_type t, const void *p, size_t n) {
    tbx_value *v = tbx_val_new(al, t);
    if (!v) return NULL;
    v->v.s.p = tbx_memdup0(al, p, n);
    if (!v->v.s.p) { tbx_free(al, v, sizeof *v); return NULL; }
    v->v.s.n = n;
    return v;
}

tbx_value *tbx_val_packed_array(const tbx_alloc *al, tbx_value_type elem, size_t n) {
    size_t es = tbx_value_scalar_size(elem);
    if (es == 0) return NULL;
    tbx_value *v = tbx_val_new(al, TBX_V_ARRAY);
    if (!v) return NULL;
    v->elem = elem;
    v->v.a.packed = tbx_calloc(al, n ? n : 1, es);
    if (!v->v.a.packed) { tbx_free(al, v, sizeof *v); return NULL; }
    v->v.a.n = v->v.a.cap = n;
    return v;
}

tbx_value *tbx_val_str_array(const tbx_alloc *al, size_t n, uint64_t max_bytes) {
    uint64_t blob;
    if (n >= SIZE_MAX / 8 || !tbx_add_u64(max_bytes, n, &blob)) return NULL;
    tbx_value *v = tbx_val_new(al, TBX_V_ARRAY);
    if (!v) return NULL;
    v->elem = TBX_V_STRING;
    v->v.a.soff_w = blob <= UINT32_MAX ? 4 : 8;
    v->v.a.soff = tbx_calloc(al, n + 1, v->v.a.soff_w);
    if (!v->v.a.soff) { tbx_free(al, v, sizeof *v); return NULL; }
    v->v.a.cap = n;
    return v;
}

static size_t soff_get(const tbx_value *v, size_t i) {
    if (v->v.a.soff_w == 4) return ((const uint32_t *)v->v.a.soff)[i];
    return (size_t)((const uint64_t *)v->v.a.soff)[i];
}

char *tbx_val_str_array_add(tbx_value *v, size_t len) {
    if (!tbx_val_is_str_array(v) || v->v.a.n >= v->v.a.cap) return NULL;
    size_t at = v->v.a.sblob_len;
    if (len >= SIZE_MAX - at) return NULL;
    size_t need = at + len + 1;
    if (v->v.a.soff_w == 4 && need > UINT32_MAX) return NULL;
    if (need > v->v.a.sblob_cap) {
        size_t ncap = v->v.a.sblob_cap ? v->v.a.sblob_cap : 64;
        while (ncap < need) ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
        char *p = tbx_realloc(v->al, v->v.a.sblob, v->v.a.sblob_cap, ncap);
        if (!p) return NULL;
        v->v.a.sblob = p;
        v->v.a.sblob_cap = ncap;
    }
    v->v.a.sblob[at + len] = '\0';
    v->v.a.sblob_len = need;
    size_t k = ++v->v.a.n;
    if (v->v.a.soff_w == 4) ((uint32_t *)v->v.a.soff)[k] = (uint32_t)need;
    else ((uint64_t *)v->v.a.soff)[k] = need;
    return v->v.a.sblob + at;
}

void tbx_val_str_array_done(tbx_value *v) {
    if (!tbx_val_is_str_array(v) || v->v.a.sblob_cap == v->v.a.sblob_len) return;
    size_t len = v->v.a.sblob_len;
    if (len == 0) {
        tbx_free(v->al, v->v.a.sblob, v->v.a.sblob_cap);
        v->v.a.sblob = NULL;
        v->v.a.sblob_cap = 0;
        return;
    }
    char *p = tbx_realloc(v->al, v->v.a.sblob, v->v.a.sblob_cap, len);
    if (!p) return; /* keeping the larger block is fine */
    v->v.a.sblob = p;
    v->v.a.sblob_cap = len;
}

uint64_t tbx_val_footprint(const tbx_value *v) {
    if (!v) return 0;
    const uint64_t oh = TBX_HEAP_OVERHEAD;
    uint64_t n = sizeof *v + oh;
    switch (v->type) {
    case TBX_V_STRING: case TBX_V_BYTES:
        n += (uint64_t)v->v.s.n + 1 + oh;
        break;
    case TBX_V_ARRAY: case TBX_V_MAP: {
        uint64_t cap = v->v.a.cap, cnt = v->v.a.n;
        if (v->v.a.items) {
            n += cap * sizeof(tbx_value *) + oh;
            for (size_t i = 0; i < cnt; i++) n += tbx_val_footprint(v->v.a.items[i]);
        }
        if (v->v.a.keys) {
            n += cap * (sizeof(char *) + sizeof(size_t)) + 2 * oh;
            for (size_t i = 0; i < cnt; i++) n += (uint64_t)v->v.a.key_lens[i] + 1 + oh;
        }
        if (v->v.a.packed) n += (cap ? cap : 1) * tbx_value_scalar_size(v->elem) + oh;
        if (v->v.a.soff) n += (cap + 1) * v->v.a.soff_w + oh;
        if (v->v.a.sblob) n += v->v.a.sblob_cap + oh;
        if (v->v.a.cache) {
            n += cnt * sizeof(tbx_value *) + oh;
            for (size_t i = 0; i < cnt; i++) n += tbx_val_footprint(v->v.a.cache[i]);
        }
        break;
    }
    case TBX_V_NDARRAY: case TBX_V_BITSET:
        n += (uint64_t)v->v.nd.ndim * sizeof(uint64_t) + v->v.nd.nbytes + 2 * oh;
        break;
    default:
        break;
    }
    return n;
}

/* String i of a compact string array. */
static const char *str_item(const tbx_value *v, size_t i, size_t *len) {
    size_t a = soff_get(v, i), b = soff_get(v, i + 1);
    if (len) *len = b - a - 1;
    return v->v.a.sblob + a;
}

void tbx_val_free(tbx_value *v) {
    if (!v) return;
    const tbx_alloc *al = v->al;
    switch (v->type) {
    case TBX_V_STRING: case TBX_V_BYTES:
        tbx_free(al, v->v.s.p, v->v.s.n + 1);
        break;
    case TBX_V_ARRAY: case TBX_V_MAP: {
        size_t n = v->v.a.n;
        if (v->v.a.items)
            for (size_t i = 0; i < n; i++) tbx_val_free(v->v.a.items[i]);
        if (v->v.a.keys)
            for (size_t i = 0; i < n; i++) tbx_free(al, v->v.a.keys[i], v->v.a.key_lens[i] + 1);
        if (v->v.a.cache) {
            for (size_t i = 0; i < n; i++) tbx_val_free(v->v.a.cache[i]);
            tbx_free(al, v->v.a.cache, n * sizeof(tbx_value *));
        }
        size_t cap = v->v.a.cap;
        tbx_free(al, v->v.a.items, cap * sizeof(tbx_value *));
        tbx_free(al, v->v.a.keys, cap * sizeof(char *));
        tbx_free(al, v->v.a.key_lens, cap * sizeof(size_t));
        if (v->v.a.packed) tbx_free(al, v->v.a.packed, (cap ? cap : 1) * tbx_value_scalar_size(v->elem));
        if (v->v.a.soff) tbx_free(al, v->v.a.soff, (cap + 1) * v->v.a.soff_w);
        tbx_free(al, v->v.a.sblob, v->v.a.sblob_cap);
        break;
    }
    case TBX_V_NDARRAY: case TBX_V_BITSET:
        tbx_free(al, v->v.nd.shape, v->v.nd.ndim * sizeof(uint64_t));
        tbx_free(al, v->v.nd.data, v->v.nd.nbytes);
        break;
    default:
        break;
    }
    tbx_free(al, v, sizeof *v);
}

/* ------------------------------------------------------------------------------------------ */
/* Getters                                                                                     */
/* ------------------------------------------------------------------------------------------ */

tbx_value_type tbx_value_type_of(const tbx_value *v) { return v ? v->type : TBX_V_NULL; }

tbx_status tbx_value_get_u64(const tbx_value *v, uint64_t *out) {
    if (!v || !out) return TBX_E_INVALID_ARG;
    if (v->type == TBX_V_BOOL || is_unsigned(v->type)) { *out = v->v.u; return TBX_OK; }
    if (tbx_value_type_is_int(v->type)) {
        if (v->v.i < 0) return TBX_E_OVERFLOW;
        *out = (uint64_t)v->v.i;
        return TBX_OK;
    }
    return TBX_E_INVALID_ARG;
}

tbx_status tbx_value_get_i64(const tbx_value *v, int64_t *out) {
    if (!v || !out) return TBX_E_INVALID_ARG;
    if (v->type == TBX_V_BOOL || is_unsigned(v->type)) {
        if (v->v.u > (uint64_t)INT64_MAX) return TBX_E_OVERFLOW;
        *out = (int64_t)v->v.u;
        return TBX_OK;
    }
    if (tbx_value_type_is_int(v->type)) { *out = v->v.i; return TBX_OK; }
    return TBX_E_INVALID_ARG;
}

tbx_status tbx_value_get_f64(const tbx_value *v, double *out) {
    if (!v || !out) return TBX_E_INVALID_ARG;
    if (tbx_value_type_is_float(v->type)) { *out = v->v.f; return TBX_OK; }
    if (v->type == TBX_V_BOOL || is_unsigned(v->type)) { *out = (double)v->v.u; return TBX_OK; }
    if (tbx_value_type_is_int(v->type)) { *out = (double)v->v.i; return TBX_OK; }
    return TBX_E_INVALID_ARG;
}

const char *tbx_value_get_str(const tbx_value *v, size_t *len) {
    if (!v || (v->type != TBX_V_STRING && v->type != TBX_V_BYTES)) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->v.s.n;
    return v->v.s.p;
}

uint64_t tbx_value_len(const tbx_value *v) {
    if (!v) return 0;
    switch (v->type) {
    case TBX_V_NULL: return 0;
    case TBX_V_STRING: case TBX_V_BYTES: return v->v.s.n;
    case TBX_V_ARRAY: case TBX_V_MAP: return v->v.a.n;
    case TBX_V_NDARRAY: case TBX_V_BITSET: return v->v.nd.count;
    default: return 1;
    }
}

tbx_value_type tbx_value_elem_type(const tbx_value *v) {
    return (v && v->type == TBX_V_ARRAY) ? v->elem : TBX_V_NULL;
}

static void packed_load(const tbx_value *arr, size_t i, tbx_value *e);

bool tbx_val_packed_get(const tbx_value *arr, size_t i, tbx_value *out) {
    if (!arr || arr->type != TBX_V_ARRAY || !arr->v.a.packed || i >= arr->v.a.n) return false;
    memset(out, 0, sizeof *out);
    out->type = arr->elem;
    out->al = arr->al;
    packed_load(arr, i, out);
    return true;
}

/* Reads packed element i of an array (or string i of a compact string array) into a fresh
 * value. */
static tbx_value *materialise(const tbx_value *arr, size_t i) {
    if (arr->v.a.soff) {
        size_t len;
        const char *p = str_item(arr, i, &len);
        return tbx_val_string(arr->al, TBX_V_STRING, p, len);
    }
    tbx_value *e = tbx_val_new(arr->al, arr->elem);
    if (!e) return NULL;
    packed_load(arr, i, e);
    return e;
}

/* Packed element i of arr into the scalar e (of arr's element type). */
static void packed_load(const tbx_value *arr, size_t i, tbx_value *e) {
    size_t es = tbx_value_scalar_size(arr->elem);
    const uint8_t *p = (const uint8_t *)arr->v.a.packed + i * es;
    switch (arr->elem) {
    case TBX_V_BOOL: case TBX_V_U8: e->v.u = p[0]; break;
    case TBX_V_I8: e->v.i = (int8_t)p[0]; break;
    case TBX_V_U16: { uint16_t x; memcpy(&x, p, 2); e->v.u = x; break; }
    case TBX_V_I16: { int16_t x; memcpy(&x, p, 2); e->v.i = x; break; }
    case TBX_V_U32: { uint32_t x; memcpy(&x, p, 4); e->v.u = x; break; }
    case TBX_V_I32: { int32_t x; memcpy(&x, p, 4); e->v.i = x; break; }
    case TBX_V_U64: { uint64_t x; memcpy(&x, p, 8); e->v.u = x; break; }
    case TBX_V_I64: { int64_t x; memcpy(&x, p, 8); e->v.i = x; break; }
    case TBX_V_F16: { uint16_t x; memcpy(&x, p, 2); e->v.f = tbx_f16_to_f32(x); break; }
    case TBX_V_BF16: { uint16_t x; memcpy(&x, p, 2); e->v.f = tbx_bf16_to_f32(x); break; }
    case TBX_V_F32: { float x; memcpy(&x, p, 4); e->v.f = x; break; }
    case TBX_V_F64: { double x; memcpy(&x, p, 8); e->v.f = x; break; }
    default: break;
    }
}

const tbx_value *tbx_value_at(const tbx_value *v, uint64_t i) {
    if (!v || (v->type != TBX_V_ARRAY && v->type != TBX_V_MAP) || i >= v->v.a.n) return NULL;
    if (v->v.a.items) return v->v.a.items[i];
    if (!v->v.a.packed && !v->v.a.soff) return NULL;
    /* Packed or compact string array: materialise element i once, keep it until the array is
     * freed. The cache is logically part of the value's representation, hence the cast. */
    tbx_value *mv = (tbx_value *)v;
    if (!mv->v.a.cache) {
        mv->v.a.cache = tbx_calloc(v->al, v->v.a.n, sizeof(tbx_value *));
        if (!mv->v.a.cache) return NULL;
    }
    if (!mv->v.a.cache[i]) mv->v.a.cache[i] = materialise(v, (size_t)i);
    return mv->v.a.cache[i];
}

const char *tbx_value_str_at(const tbx_value *v, uint64_t i, size_t *len) {
    if (len) *len = 0;
    if (!v || v->type != TBX_V_ARRAY || i >= v->v.a.n) return NULL;
    if (v->v.a.soff) return str_item(v, (size_t)i, len);
    if (!v->v.a.items) return NULL;
    const tbx_value *e = v->v.a.items[i];
    if (!e || e->type != TBX_V_STRING) return NULL;
    return tbx_value_get_str(e, len);
}

const char *tbx_value_key_at(const tbx_value *v, uint64_t i, size_t *len) {
    if (!v || v->type != TBX_V_MAP || i >= v->v.a.n) { if (len) *len = 0; return NULL; }
    if (len) *len = v->v.a.key_lens[i];
    return v->v.a.keys[i];
}

const void *tbx_value_data(const tbx_value *v, size_t *nbytes) {
    if (nbytes) *nbytes = 0;
    if (!v) return NULL;
    if (v->type == TBX_V_ARRAY && v->v.a.packed) {
        if (nbytes) *nbytes = v->v.a.n * tbx_value_scalar_size(v->elem);
        return v->v.a.packed;
    }
    if (v->type == TBX_V_NDARRAY || v->type == TBX_V_BITSET) {
        if (nbytes) *nbytes = v->v.nd.nbytes;
        return v->v.nd.data;
    }
    return NULL;
}

tbx_status tbx_value_ndarray(const tbx_value *v, tbx_dtype *dtype, uint32_t *ndim,
                             const uint64_t **shape) {
    if (!v || v->type != TBX_V_NDARRAY) return TBX_E_INVALID_ARG;
    if (dtype) *dtype = v->v.nd.dtype;
    if (ndim) *ndim = v->v.nd.ndim;
    if (shape) *shape = v->v.nd.shape;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Builders (public; default allocator)                                                        */
/* ------------------------------------------------------------------------------------------ */
/* Values built through the public API use malloc; a constant allocator keeps this free of any
 * initialisation order or race. */
static void *d_alloc(void *ud, size_t n) { (void)ud; return malloc(n); }
static void *d_realloc(void *ud, void *p, size_t o, size_t n) { (void)ud; (void)o; return realloc(p, n); }
static void d_free(void *ud, void *p, size_t n) { (void)ud; (void)n; free(p); }
static const tbx_alloc g_dal = { { d_alloc, d_realloc, d_free, NULL } };
static const tbx_alloc *dal(void) { return &g_dal; }

tbx_value *tbx_value_new_null(void) { return tbx_val_new(dal(), TBX_V_NULL); }

tbx_value *tbx_value_new_bool(int b) {
    tbx_value *v = tbx_val_new(dal(), TBX_V_BOOL);
    if (v) v->v.u = b ? 1 : 0;
    return v;
}

tbx_value *tbx_value_new_uint(tbx_value_type t, uint64_t u) {
    if (!is_unsigned(t)) return NULL;
    uint64_t max = t == TBX_V_U8 ? 0xFFu : t == TBX_V_U16 ? 0xFFFFu : t == TBX_V_U32 ? 0xFFFFFFFFu
                                                                                   : UINT64_MAX;
    if (u > max) return NULL;
    tbx_value *v = tbx_val_new(dal(), t);
    if (v) v->v.u = u;
    return v;
}

tbx_value *tbx_value_new_int(tbx_value_type t, int64_t i) {
    if (!tbx_value_type_is_int(t) || is_unsigned(t)) return NULL;
    int64_t lo = t == TBX_V_I8 ? INT8_MIN : t == TBX_V_I16 ? INT16_MIN : t == TBX_V_I32 ? INT32_MIN : INT64_MIN;
    int64_t hi = t == TBX_V_I8 ? INT8_MAX : t == TBX_V_I16 ? INT16_MAX : t == TBX_V_I32 ? INT32_MAX : INT64_MAX;
    if (i < lo || i > hi) return NULL;
    tbx_value *v = tbx_val_new(dal(), t);
    if (v) v->v.i = i;
    return v;
}

tbx_value *tbx_value_new_float(tbx_value_type t, double f) {
    if (!tbx_value_type_is_float(t)) return NULL;
    tbx_value *v = tbx_val_new(dal(), t);
    if (!v) return NULL;
    /* Store the value exactly as the narrow type represents it. */
    switch (t) {
    case TBX_V_F16: v->v.f = tbx_f16_to_f32(tbx_f32_to_f16((float)f)); break;
    case TBX_V_BF16: v->v.f = tbx_bf16_to_f32(tbx_f32_to_bf16((float)f)); break;
    case TBX_V_F32: v->v.f = (float)f; break;
    default: v->v.f = f; break;
    }
    return v;
}

tbx_value *tbx_value_new_string(const char *s, size_t len) {
    if (!s && len) return NULL;
    return tbx_val_string(dal(), TBX_V_STRING, s, len);
}

tbx_value *tbx_value_new_bytes(const void *p, size_t len) {
    if (!p && len) return NULL;
    return tbx_val_string(dal(), TBX_V_BYTES, p, len);
}

tbx_value *tbx_value_new_array(tbx_value_type elem) {
    if ((unsigned)elem > TBX_V_BITSET) return NULL;
    tbx_value *v = tbx_val_new(dal(), TBX_V_ARRAY);
    if (v) v->elem = elem;
    return v;
}

tbx_value *tbx_value_new_map(void) { return tbx_val_new(dal(), TBX_V_MAP); }

tbx_value *tbx_value_new_ndarray(tbx_dtype dtype, const uint64_t *shape, uint32_t ndim,
                                 const void *data, size_t nbytes) {
    uint64_t need;
    if ((!shape && ndim) || (!data && nbytes)) return NULL;
    /* the core table only (the foundation does not see driver-specific dtypes) */
    if (tbx_dtype_info_nbytes_shape(tbx_dtype_core_get(dtype), shape, ndim, &need) != TBX_OK ||
        need != nbytes)
        return NULL;
    const tbx_alloc *al = dal();
    tbx_value *v = tbx_val_new(al, TBX_V_NDARRAY);
    if (!v) return NULL;
    uint64_t count = 1;
    for (uint32_t d = 0; d < ndim; d++) count *= shape[d]; /* cannot overflow: nbytes_shape ok */
    v->v.nd.dtype = dtype;
    v->v.nd.ndim = ndim;
    v->v.nd.count = count;
    v->v.nd.shape = tbx_malloc(al, ndim * sizeof(uint64_t));
    v->v.nd.data = tbx_malloc(al, nbytes);
    v->v.nd.nbytes = nbytes;
    if (!v->v.nd.shape || !v->v.nd.data) { tbx_val_free(v); return NULL; }
    if (ndim) memcpy(v->v.nd.shape, shape, ndim * sizeof(uint64_t));
    if (nbytes) memcpy(v->v.nd.data, data, nbytes);
    return v;
}

tbx_value *tbx_value_new_bitset(const uint8_t *bits, uint64_t nbits) {
    const tbx_alloc *al = dal();
    uint64_t nbytes = nbits / 8 + (nbits % 8 != 0);
    if (nbytes > SIZE_MAX || (!bits && nbits)) return NULL;
    tbx_value *v = tbx_val_new(al, TBX_V_BITSET);
    if (!v) return NULL;
    v->v.nd.count = nbits;
    v->v.nd.nbytes = (size_t)nbytes;
    v->v.nd.data = tbx_malloc(al, (size_t)nbytes);
    if (!v->v.nd.data) { tbx_val_free(v); return NULL; }
    if (nbytes) memcpy(v->v.nd.data, bits, (size_t)nbytes);
    if (nbits % 8) v->v.nd.data[nbytes - 1] &= (uint8_t)((1u << (nbits % 8)) - 1);
    return v;
}

/* Makes room for one more item in an ARRAY/MAP with pointer items. */
static tbx_status reserve_items(tbx_value *v, bool with_keys) {
    const tbx_alloc *al = v->al;
    if (v->v.a.n < v->v.a.cap) return TBX_OK;
    size_t ncap = v->v.a.cap ? v->v.a.cap * 2 : 4;
    tbx_value **items = tbx_realloc(al, v->v.a.items, v->v.a.cap * sizeof *items, ncap * sizeof *items);
    if (!items) return TBX_E_NOMEM;
    v->v.a.items = items;
    if (with_keys) {
        char **keys = tbx_realloc(al, v->v.a.keys, v->v.a.cap * sizeof *keys, ncap * sizeof *keys);
        if (!keys) return TBX_E_NOMEM;
        v->v.a.keys = keys;
        size_t *kl = tbx_realloc(al, v->v.a.key_lens, v->v.a.cap * sizeof *kl, ncap * sizeof *kl);
        if (!kl) return TBX_E_NOMEM;
        v->v.a.key_lens = kl;
    }
    v->v.a.cap = ncap;
    return TBX_OK;
}

/* Converts a packed or compact string array to pointer items (used when pushing onto an array
 * that a reader built; rare). */
static tbx_status unpack_items(tbx_value *v) {
    size_t n = v->v.a.n, es = tbx_value_scalar_size(v->elem);
    tbx_value **items = tbx_calloc(v->al, n ? n : 1, sizeof *items);
    if (!items) return TBX_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        items[i] = materialise(v, i);
        if (!items[i]) {
            for (size_t j = 0; j < i; j++) tbx_val_free(items[j]);
            tbx_free(v->al, items, (n ? n : 1) * sizeof *items);
            return TBX_E_NOMEM;
        }
    }
    if (v->v.a.cache) {
        for (size_t i = 0; i < n; i++) tbx_val_free(v->v.a.cache[i]);
        tbx_free(v->al, v->v.a.cache, n * sizeof(tbx_value *));
        v->v.a.cache = NULL;
    }
    if (v->v.a.packed) tbx_free(v->al, v->v.a.packed, (v->v.a.cap ? v->v.a.cap : 1) * es);
    v->v.a.packed = NULL;
    if (v->v.a.soff) tbx_free(v->al, v->v.a.soff, (v->v.a.cap + 1) * v->v.a.soff_w);
    tbx_free(v->al, v->v.a.sblob, v->v.a.sblob_cap);
    v->v.a.soff = NULL;
    v->v.a.sblob = NULL;
    v->v.a.sblob_len = v->v.a.sblob_cap = 0;
    /* items was sized n (or 1); record that as the capacity */
    v->v.a.items = items;
    v->v.a.cap = n ? n : 1;
    return TBX_OK;
}

tbx_status tbx_value_array_push(tbx_value *array, tbx_value *item) {
    if (!array || array->type != TBX_V_ARRAY || !item) { tbx_value_free(item); return TBX_E_INVALID_ARG; }
    if (array->elem != TBX_V_NULL && item->type != array->elem) {
        tbx_value_free(item);
        return TBX_E_INVALID_ARG;
    }
    tbx_status st = TBX_OK;
    if (array->v.a.packed || array->v.a.soff) st = unpack_items(array);
    if (st == TBX_OK) st = reserve_items(array, false);
    if (st != TBX_OK) { tbx_value_free(item); return st; }
    /* The item joins a value that may use another allocator: re-home it by cloning when the
     * allocators differ. */
    if (item->al != array->al) {
        tbx_value *c = tbx_val_clone(array->al, item);
        tbx_value_free(item);
        if (!c) return TBX_E_NOMEM;
        item = c;
    }
    array->v.a.items[array->v.a.n++] = item;
    return TBX_OK;
}

tbx_status tbx_value_map_put(tbx_value *map, const char *key, size_t key_len, tbx_value *item) {
    if (!map || map->type != TBX_V_MAP || !item || (!key && key_len)) {
        tbx_value_free(item);
        return TBX_E_INVALID_ARG;
    }
    for (size_t i = 0; i < map->v.a.n; i++) {
        if (map->v.a.key_lens[i] == key_len && memcmp(map->v.a.keys[i], key, key_len) == 0) {
            tbx_value_free(item);
            return TBX_E_DUPLICATE;
        }
    }
    tbx_status st = reserve_items(map, true);
    if (st != TBX_OK) { tbx_value_free(item); return st; }
    char *k = tbx_memdup0(map->al, key, key_len);
    if (!k) { tbx_value_free(item); return TBX_E_NOMEM; }
    if (item->al != map->al) {
        tbx_value *c = tbx_val_clone(map->al, item);
        tbx_value_free(item);
        if (!c) { tbx_free(map->al, k, key_len + 1); return TBX_E_NOMEM; }
        item = c;
    }
    map->v.a.keys[map->v.a.n] = k;
    map->v.a.key_lens[map->v.a.n] = key_len;
    map->v.a.items[map->v.a.n++] = item;
    return TBX_OK;
}

tbx_value *tbx_val_clone(const tbx_alloc *al, const tbx_value *v) {
    if (!v) return NULL;
    switch (v->type) {
    case TBX_V_STRING: case TBX_V_BYTES:
        return tbx_val_string(al, v->type, v->v.s.p, v->v.s.n);
    case TBX_V_ARRAY: case TBX_V_MAP: {
        if (v->type == TBX_V_ARRAY && v->v.a.soff) {
            size_t n = v->v.a.n;
            tbx_value *c = tbx_val_str_array(al, n, v->v.a.sblob_len);
            if (!c) return NULL;
            if (v->v.a.sblob_len) {
                c->v.a.sblob = tbx_malloc(al, v->v.a.sblob_len);
                if (!c->v.a.sblob) { tbx_val_free(c); return NULL; }
                memcpy(c->v.a.sblob, v->v.a.sblob, v->v.a.sblob_len);
                c->v.a.sblob_len = c->v.a.sblob_cap = v->v.a.sblob_len;
            }
            for (size_t i = 0; i <= n; i++) {
                size_t o = soff_get(v, i);
                if (c->v.a.soff_w == 4) ((uint32_t *)c->v.a.soff)[i] = (uint32_t)o;
                else ((uint64_t *)c->v.a.soff)[i] = o;
            }
            c->v.a.n = n;
            return c;
        }
        if (v->type == TBX_V_ARRAY && v->v.a.packed) {
            tbx_value *c = tbx_val_packed_array(al, v->elem, v->v.a.n);
            if (c && v->v.a.n) memcpy(c->v.a.packed, v->v.a.packed, v->v.a.n * tbx_value_scalar_size(v->elem));
            return c;
        }
        tbx_value *c = tbx_val_new(al, v->type);
        if (!c) return NULL;
        c->elem = v->elem;
        size_t n = v->v.a.n;
        if (n) {
            c->v.a.items = tbx_calloc(al, n, sizeof(tbx_value *));
            if (!c->v.a.items) { tbx_val_free(c); return NULL; }
            c->v.a.cap = n;
            if (v->type == TBX_V_MAP) {
                c->v.a.keys = tbx_calloc(al, n, sizeof(char *));
                c->v.a.key_lens = tbx_calloc(al, n, sizeof(size_t));
                if (!c->v.a.keys || !c->v.a.key_lens) { tbx_val_free(c); return NULL; }
            }
            for (size_t i = 0; i < n; i++) {
                tbx_value *e = tbx_val_clone(al, v->v.a.items[i]);
                char *k = NULL;
                if (e && v->type == TBX_V_MAP) {
                    k = tbx_memdup0(al, v->v.a.keys[i], v->v.a.key_lens[i]);
                    if (!k) { tbx_val_free(e); e = NULL; }
                }
                if (!e) { tbx_val_free(c); return NULL; }
                if (v->type == TBX_V_MAP) { c->v.a.keys[i] = k; c->v.a.key_lens[i] = v->v.a.key_lens[i]; }
                c->v.a.items[i] = e;
                c->v.a.n = i + 1;
            }
        }
        return c;
    }
    case TBX_V_NDARRAY: case TBX_V_BITSET: {
        tbx_value *c = tbx_val_new(al, v->type);
        if (!c) return NULL;
        c->v.nd = v->v.nd;
        c->v.nd.shape = NULL;
        c->v.nd.data = NULL;
        uint32_t nd = v->v.nd.ndim;
        c->v.nd.ndim = 0;
        c->v.nd.nbytes = 0;
        uint64_t *shape = tbx_malloc(al, nd * sizeof(uint64_t));
        uint8_t *data = tbx_malloc(al, v->v.nd.nbytes);
        if (!shape || !data) {
            tbx_free(al, shape, nd * sizeof(uint64_t));
            tbx_free(al, data, v->v.nd.nbytes);
            tbx_val_free(c);
            return NULL;
        }
        if (nd) memcpy(shape, v->v.nd.shape, nd * sizeof(uint64_t));
        if (v->v.nd.nbytes) memcpy(data, v->v.nd.data, v->v.nd.nbytes);
        c->v.nd.shape = shape;
        c->v.nd.ndim = nd;
        c->v.nd.data = data;
        c->v.nd.nbytes = v->v.nd.nbytes;
        return c;
    }
    default: {
        tbx_value *c = tbx_val_new(al, v->type);
        if (!c) return NULL;
        c->elem = v->elem;
        c->v = v->v;
        return c;
    }
    }
}

tbx_value *tbx_value_clone(const tbx_value *v) { return tbx_val_clone(dal(), v); }

void tbx_value_free(tbx_value *v) { tbx_val_free(v); }
