/*
 * value.c - metadata values as JSON (tbx info --json) and as human text (tbx info).
 *
 * The mapping: integers exact, floats shortest round-trip in their own precision (non-finite
 * ones as the strings "nan", "inf", "-inf"), bool true/false, null, strings escaped (see
 * json.c), BYTES as a lowercase hex string, ARRAY as a list, MAP as an object in stored order,
 * NDARRAY as nested lists in row-major order, BITSET as a list of 0/1 (LSB first).
 *
 * Arrays of fixed-size scalars are read from their packed storage (tbx_value_data) when the
 * handle has it, so a 150,000-entry array does not materialise 150,000 value objects. Anything a
 * value reports is bounds-checked against the bytes it actually has.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Native-endian loads from possibly unaligned storage. */
static uint16_t ld16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t ld32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t ld64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Byte size of a fixed-size scalar value type, 0 for others. */
static size_t scalar_size(tbx_value_type t) {
    switch (t) {
    case TBX_V_BOOL: case TBX_V_U8: case TBX_V_I8: return 1;
    case TBX_V_U16: case TBX_V_I16: case TBX_V_F16: case TBX_V_BF16: return 2;
    case TBX_V_U32: case TBX_V_I32: case TBX_V_F32: return 4;
    case TBX_V_U64: case TBX_V_I64: case TBX_V_F64: return 8;
    default: return 0;
    }
}

/* One packed scalar of value type t at p. */
static void emit_packed_scalar(json_out *j, tbx_value_type t, const unsigned char *p) {
    switch (t) {
    case TBX_V_BOOL: jout_bool(j, p[0] != 0); break;
    case TBX_V_U8: jout_u64(j, p[0]); break;
    case TBX_V_I8: jout_i64(j, (int8_t)p[0]); break;
    case TBX_V_U16: jout_u64(j, ld16(p)); break;
    case TBX_V_I16: jout_i64(j, (int16_t)ld16(p)); break;
    case TBX_V_U32: jout_u64(j, ld32(p)); break;
    case TBX_V_I32: jout_i64(j, (int32_t)ld32(p)); break;
    case TBX_V_U64: jout_u64(j, ld64(p)); break;
    case TBX_V_I64: jout_i64(j, (int64_t)ld64(p)); break;
    case TBX_V_F16: jout_float(j, tbx_f16_to_f32(ld16(p)), TBX_V_F16); break;
    case TBX_V_BF16: jout_float(j, tbx_bf16_to_f32(ld16(p)), TBX_V_BF16); break;
    case TBX_V_F32: {
        float f;
        memcpy(&f, p, 4);
        jout_float(j, f, TBX_V_F32);
        break;
    }
    case TBX_V_F64: {
        double d;
        memcpy(&d, p, 8);
        jout_float(j, d, TBX_V_F64);
        break;
    }
    default: jout_null(j); break;
    }
}

/* "..." as the last list member when a list was cut. */
static void emit_cut_marker(json_out *j) { jout_raw_value(j, "..."); }

/* Items of a list to show: all, or the style's limit in human output. */
static uint64_t shown_items(const json_out *j, const cli_value_style *st, uint64_t n) {
    if (j->human && st->max_items && n > st->max_items) return st->max_items;
    return n;
}

/* ---- NDARRAY ------------------------------------------------------------------------------ */

typedef struct nd_ctx {
    tbx_dtype dtype;
    const tbx_dtype_info *info;
    const unsigned char *data; /* raw elements, or NULL when `dec` is used */
    size_t esize;              /* bytes per raw element */
    const float *dec;          /* decoded elements (types without a fixed byte size) */
    int dec_int;               /* decoded values are integers */
    uint64_t next;             /* flat index of the next element */
} nd_ctx;

static void emit_nd_elem(json_out *j, nd_ctx *c, uint64_t idx) {
    if (c->dec) {
        float f = c->dec[idx];
        if (c->dec_int)
            jout_i64(j, (int64_t)f);
        else
            jout_float(j, f, TBX_V_F32);
        return;
    }
    const unsigned char *p = c->data + idx * c->esize;
    switch (c->dtype) {
    case TBX_DT_F64: emit_packed_scalar(j, TBX_V_F64, p); break;
    case TBX_DT_F32: emit_packed_scalar(j, TBX_V_F32, p); break;
    case TBX_DT_F16: emit_packed_scalar(j, TBX_V_F16, p); break;
    case TBX_DT_BF16: emit_packed_scalar(j, TBX_V_BF16, p); break;
    case TBX_DT_F8_E4M3: case TBX_DT_F8_E5M2: case TBX_DT_F8_E4M3FNUZ:
    case TBX_DT_F8_E5M2FNUZ: case TBX_DT_F8_E8M0:
        jout_float(j, tbx_f8_to_f32(c->dtype, p[0]), TBX_V_F32);
        break;
    case TBX_DT_C64:
        jout_begin_array(j);
        emit_packed_scalar(j, TBX_V_F32, p);
        emit_packed_scalar(j, TBX_V_F32, p + 4);
        jout_end_array(j);
        break;
    case TBX_DT_C128:
        jout_begin_array(j);
        emit_packed_scalar(j, TBX_V_F64, p);
        emit_packed_scalar(j, TBX_V_F64, p + 8);
        jout_end_array(j);
        break;
    case TBX_DT_I8: emit_packed_scalar(j, TBX_V_I8, p); break;
    case TBX_DT_I16: emit_packed_scalar(j, TBX_V_I16, p); break;
    case TBX_DT_I32: emit_packed_scalar(j, TBX_V_I32, p); break;
    case TBX_DT_I64: emit_packed_scalar(j, TBX_V_I64, p); break;
    case TBX_DT_U8: case TBX_DT_BITSET: emit_packed_scalar(j, TBX_V_U8, p); break;
    case TBX_DT_U16: emit_packed_scalar(j, TBX_V_U16, p); break;
    case TBX_DT_U32: emit_packed_scalar(j, TBX_V_U32, p); break;
    case TBX_DT_U64: emit_packed_scalar(j, TBX_V_U64, p); break;
    case TBX_DT_BOOL: emit_packed_scalar(j, TBX_V_BOOL, p); break;
    default: jout_null(j); break;
    }
}

/* Nested lists for dimensions dim.. of the shape; `base` is the flat index of the first element
 * of this sub-array and `stride` the number of elements it holds. */
static void emit_nd_dim(json_out *j, nd_ctx *c, const uint64_t *shape, uint32_t ndim,
                        uint32_t dim, uint64_t base, uint64_t stride,
                        const cli_value_style *st) {
    if (dim == ndim) {
        emit_nd_elem(j, c, base);
        return;
    }
    uint64_t n = shape[dim];
    uint64_t sub = n ? stride / n : 0;
    uint64_t show = shown_items(j, st, n);
    jout_begin_array(j);
    for (uint64_t k = 0; k < show && !ferror(j->fp); k++)
        emit_nd_dim(j, c, shape, ndim, dim + 1, base + k * sub, sub, st);
    if (show < n) emit_cut_marker(j);
    jout_end_array(j);
}

static void emit_ndarray(json_out *j, const tbx_value *v, const cli_value_style *st) {
    tbx_dtype dt = TBX_DT_INVALID;
    uint32_t ndim = 0;
    const uint64_t *shape = NULL;
    size_t nbytes = 0;
    const void *data = tbx_value_data(v, &nbytes);
    if (tbx_value_ndarray(v, &dt, &ndim, &shape) != TBX_OK || (ndim > 0 && !shape)) {
        jout_null(j);
        return;
    }
    uint64_t count = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] != 0 && count > UINT64_MAX / shape[d]) {
            jout_hex(j, data, data ? nbytes : 0);
            return;
        }
        count *= shape[d];
    }
    nd_ctx c;
    memset(&c, 0, sizeof c);
    c.dtype = dt;
    c.info = tbx_dtype_get(dt);
    float *dec = NULL;
    const tbx_dtype_info *in = c.info;
    int fixed = in && in->block_size == 1 && !(in->flags & (TBX_DTF_PACKED | TBX_DTF_SHAPED)) &&
                in->bits >= 8 && in->bits % 8 == 0;
    if (fixed) {
        c.esize = in->bits / 8;
        if (count > 0 && (!data || count > nbytes / c.esize)) fixed = 0; /* too few bytes */
        c.data = (const unsigned char *)data; /* native-endian elements */
    }
    if (!fixed) {
        /* Packed or quantized elements: decode to f32 when the library can, else hex. */
        if (count > 0 && in && (in->flags & TBX_DTF_DECODE) && data &&
            count <= SIZE_MAX / sizeof(float) && count <= (uint64_t)nbytes * 8 &&
            (dec = malloc((size_t)count * sizeof(float))) != NULL &&
            tbx_decode_f32(dt, data, nbytes, count, dec) == TBX_OK) {
            c.dec = dec;
            c.dec_int = (in->flags & TBX_DTF_INT) != 0;
        } else if (count > 0) {
            free(dec);
            jout_hex(j, data, data ? nbytes : 0);
            return;
        }
    }
    if (count == 0 && ndim == 0) { /* cannot happen (a scalar has one element); be safe */
        jout_null(j);
    } else if (count == 0) {
        /* empty: nested lists down to the zero dimension */
        emit_nd_dim(j, &c, shape, ndim, 0, 0, 0, st);
    } else {
        emit_nd_dim(j, &c, shape, ndim, 0, 0, count, st);
    }
    free(dec);
}

/* ---- the general case ---------------------------------------------------------------------- */

static void emit_string_bytes(json_out *j, const char *s, size_t len, const cli_value_style *st) {
    size_t shown = len;
    if (j->human && st->max_bytes) shown = jout_utf8_cut(s, len, st->max_bytes);
    jout_string(j, s, shown);
    if (shown < len) jout_append(j, "...");
}

static void emit_string_value(json_out *j, const tbx_value *v, const cli_value_style *st) {
    size_t len = 0;
    const char *s = tbx_value_get_str(v, &len);
    if (!s) {
        jout_null(j);
        return;
    }
    emit_string_bytes(j, s, len, st);
}

static void emit_bytes_value(json_out *j, const tbx_value *v, const cli_value_style *st) {
    size_t len = 0;
    const char *s = tbx_value_get_str(v, &len);
    if (!s) {
        jout_hex(j, "", 0);
        return;
    }
    size_t shown = len;
    if (j->human && st->max_bytes && len > st->max_bytes) shown = st->max_bytes;
    jout_hex(j, s, shown);
    if (shown < len) jout_append(j, "...");
}

static void emit_array(json_out *j, const tbx_value *v, const cli_value_style *st) {
    uint64_t n = tbx_value_len(v);
    uint64_t show = shown_items(j, st, n);
    tbx_value_type et = tbx_value_elem_type(v);
    size_t es = scalar_size(et);
    size_t nbytes = 0;
    const unsigned char *packed = es ? (const unsigned char *)tbx_value_data(v, &nbytes) : NULL;
    if (packed && (n > nbytes / es)) packed = NULL; /* inconsistent: use tbx_value_at */
    jout_begin_array(j);
    for (uint64_t i = 0; i < show && !ferror(j->fp); i++) {
        if (packed) {
            emit_packed_scalar(j, et, packed + i * es);
        } else if (et == TBX_V_STRING) {
            /* in place: no value materialised per string */
            size_t len = 0;
            const char *s = tbx_value_str_at(v, i, &len);
            if (s)
                emit_string_bytes(j, s, len, st);
            else
                jout_null(j);
        } else {
            const tbx_value *item = tbx_value_at(v, i);
            if (item)
                cli_emit_value(j, item, st);
            else
                jout_null(j);
        }
    }
    if (show < n) emit_cut_marker(j);
    jout_end_array(j);
}

static void emit_map(json_out *j, const tbx_value *v, const cli_value_style *st) {
    uint64_t n = tbx_value_len(v);
    uint64_t show = shown_items(j, st, n);
    jout_begin_object(j);
    for (uint64_t i = 0; i < show && !ferror(j->fp); i++) {
        size_t klen = 0;
        const char *k = tbx_value_key_at(v, i, &klen);
        const tbx_value *item = tbx_value_at(v, i);
        if (!k) {
            k = "";
            klen = 0;
        }
        jout_key(j, k, klen);
        if (item)
            cli_emit_value(j, item, st);
        else
            jout_null(j);
    }
    if (show < n) {
        /* a cut object (human text only): mark it like a list */
        jout_append(j, j->need_comma ? ", ..." : "...");
    }
    jout_end_object(j);
}

static void emit_bitset(json_out *j, const tbx_value *v, const cli_value_style *st) {
    uint64_t n = tbx_value_len(v);
    size_t nbytes = 0;
    const unsigned char *bits = (const unsigned char *)tbx_value_data(v, &nbytes);
    if (!bits) nbytes = 0;
    if (n > (uint64_t)nbytes * 8) n = (uint64_t)nbytes * 8;
    uint64_t show = shown_items(j, st, n);
    jout_begin_array(j);
    for (uint64_t i = 0; i < show && !ferror(j->fp); i++)
        jout_u64(j, (bits[i / 8] >> (i % 8)) & 1u);
    if (show < n) emit_cut_marker(j);
    jout_end_array(j);
}

static void emit_plain(json_out *j, const tbx_value *v, const cli_value_style *st) {
    tbx_value_type t = tbx_value_type_of(v);
    switch (t) {
    case TBX_V_NULL:
        jout_null(j);
        break;
    case TBX_V_BOOL: {
        uint64_t u = 0;
        tbx_value_get_u64(v, &u);
        jout_bool(j, u != 0);
        break;
    }
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64: {
        uint64_t u = 0;
        tbx_value_get_u64(v, &u);
        jout_u64(j, u);
        break;
    }
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: {
        int64_t i = 0;
        tbx_value_get_i64(v, &i);
        jout_i64(j, i);
        break;
    }
    case TBX_V_F16: case TBX_V_BF16: case TBX_V_F32: case TBX_V_F64: {
        double d = 0;
        tbx_value_get_f64(v, &d);
        jout_float(j, d, t);
        break;
    }
    case TBX_V_STRING: emit_string_value(j, v, st); break;
    case TBX_V_BYTES: emit_bytes_value(j, v, st); break;
    case TBX_V_ARRAY: emit_array(j, v, st); break;
    case TBX_V_MAP: emit_map(j, v, st); break;
    case TBX_V_NDARRAY: emit_ndarray(j, v, st); break;
    case TBX_V_BITSET: emit_bitset(j, v, st); break;
    default: jout_null(j); break;
    }
}

void cli_emit_value(json_out *j, const tbx_value *v, const cli_value_style *st) {
    static const cli_value_style plain_style = {0, 0, 0};
    if (!st) st = &plain_style;
    if (!v) {
        jout_null(j);
        return;
    }
    if (!st->typed) {
        emit_plain(j, v, st);
        return;
    }
    /* Typed wrapper at this level only; nested values stay plain. */
    cli_value_style inner = *st;
    inner.typed = 0;
    tbx_value_type t = tbx_value_type_of(v);
    jout_begin_object(j);
    jout_keyz(j, "type");
    jout_stringz(j, tbx_value_type_name(t));
    if (t == TBX_V_ARRAY) {
        jout_keyz(j, "elem");
        jout_stringz(j, tbx_value_type_name(tbx_value_elem_type(v)));
    } else if (t == TBX_V_NDARRAY) {
        tbx_dtype dt = TBX_DT_INVALID;
        uint32_t ndim = 0;
        const uint64_t *shape = NULL;
        if (tbx_value_ndarray(v, &dt, &ndim, &shape) == TBX_OK) {
            jout_keyz(j, "dtype");
            jout_stringz(j, cli_dtype_name(dt));
            jout_keyz(j, "shape");
            jout_begin_array(j);
            for (uint32_t d = 0; d < ndim && shape; d++) jout_u64(j, shape[d]);
            jout_end_array(j);
        }
    }
    jout_keyz(j, "value");
    emit_plain(j, v, &inner);
    jout_end_object(j);
}

void cli_describe_type(FILE *fp, const tbx_value *v) {
    tbx_value_type t = tbx_value_type_of(v);
    const char *name = tbx_value_type_name(t);
    switch (t) {
    case TBX_V_ARRAY: {
        tbx_value_type et = tbx_value_elem_type(v);
        if (et == TBX_V_NULL)
            fprintf(fp, "array[%" PRIu64 "]", tbx_value_len(v));
        else
            fprintf(fp, "array<%s>[%" PRIu64 "]", tbx_value_type_name(et), tbx_value_len(v));
        break;
    }
    case TBX_V_MAP:
    case TBX_V_BITSET:
    case TBX_V_BYTES:
        fprintf(fp, "%s[%" PRIu64 "]", name, tbx_value_len(v));
        break;
    case TBX_V_NDARRAY: {
        tbx_dtype dt = TBX_DT_INVALID;
        uint32_t ndim = 0;
        const uint64_t *shape = NULL;
        fprintf(fp, "%s", name);
        if (tbx_value_ndarray(v, &dt, &ndim, &shape) == TBX_OK) {
            fprintf(fp, "<%s>[", cli_dtype_name(dt));
            for (uint32_t d = 0; d < ndim && shape; d++)
                fprintf(fp, "%s%" PRIu64, d ? "x" : "", shape[d]);
            fputc(']', fp);
        }
        break;
    }
    default:
        fputs(name ? name : "?", fp);
        break;
    }
}
