/*
 * oinf_write.c - the OINF writer (the reading half of the driver is oinf.c).
 *
 * The writer reproduces the layout of the reference encoder (openinfer-oinf 0.1.1), so that the
 * same content gives the same bytes:
 *
 *   [header 69 B + 3 zero B][size vars][metadata table][tensor table][metadata payloads][tensor data]
 *   0                      72         align8         align8         align8 = offset_data
 *
 * Size variables, metadata entries and tensors are each sorted by name (byte order); every table
 * starts at the 8-aligned end of the previous one; the data section holds the metadata payloads
 * in key order, then the tensor data in name order (each tensor followed, in version 2, by its
 * quantization payload), every blob 8-aligned and zero padded; file_size is the padded end of
 * the last blob. Tensors without data get offset 0 and size 0. Version 1 is written unless
 * tbx_write_options.version is 2.
 *
 * Metadata types: every scalar type maps to its OINF tag; STRING values must match the name
 * charset; BITSET and NDARRAY map to BITSET and NDARRAY payloads, except that a 0-d NDARRAY of
 * f8_e5m2 or of a packed integer dtype is written as the scalar of that type (that is how the
 * reader represents those scalars); an ARRAY of numeric or bool scalars of one type becomes a 1-D
 * NDARRAY. NULL, BYTES, MAP and other arrays are refused with TBX_E_LOSSY.
 *
 * Version 2 quantization parameters come from tbx_oinf_writer_set_quant() or from metadata
 * entries "<tensor>.quant.<member>" (what the reader produces), which are then consumed instead
 * of being written as metadata. See docs/formats/oinf.md.
 */
#include "oinf_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define OW_STATE_TAG 0x4F494E57u /* "OINW" */

typedef struct ow_sizevar {
    char *name;
    size_t len;
    uint64_t value;
} ow_sizevar;

/* Quantization parameters given with tbx_oinf_writer_set_quant (arrays owned). */
typedef struct ow_quant {
    char *tensor;
    size_t len;
    tbx_oinf_quant q;
    float *scales;
    int32_t *zps;
} ow_quant;

typedef struct ow_state {
    uint32_t tag;
    ow_sizevar *sv;
    size_t nsv, cap_sv;
    ow_quant *qs;
    size_t nq, cap_q;
} ow_state;

/* The version to write: one the row declares writable (tbx_writer_create_ refused any other
 * and replaced 0 by the row's default). */
static uint32_t ow_version(const tbx_writer *w) { return w->opt.version; }

static ow_state *ow_state_get(tbx_writer *w, tbx_error *err) {
    if (w->drv_state) return w->drv_state;
    ow_state *s = tbx_calloc(&w->al, 1, sizeof *s);
    if (!s) { tbx_err_nomem(err, "OINF writer state"); return NULL; }
    s->tag = OW_STATE_TAG;
    w->drv_state = s;
    return s;
}

void oi_w_free(tbx_writer *w) {
    ow_state *s = w->drv_state;
    if (!s) return;
    for (size_t i = 0; i < s->nsv; i++) tbx_free(&w->al, s->sv[i].name, s->sv[i].len + 1);
    tbx_free(&w->al, s->sv, s->cap_sv * sizeof *s->sv);
    for (size_t i = 0; i < s->nq; i++) {
        tbx_free(&w->al, s->qs[i].tensor, s->qs[i].len + 1);
        tbx_free(&w->al, s->qs[i].scales, (size_t)s->qs[i].q.scale_count * sizeof(float));
        tbx_free(&w->al, s->qs[i].zps, (size_t)s->qs[i].q.zp_count * sizeof(int32_t));
    }
    tbx_free(&w->al, s->qs, s->cap_q * sizeof *s->qs);
    tbx_free(&w->al, s, sizeof *s);
    w->drv_state = NULL;
}

/* A name, key or string value must match [A-Za-z0-9._-]+ and fit a u32 length. */
static tbx_status ow_check_name(const char *p, size_t n, const char *field, const char *what,
                                tbx_error *err) {
    char q[96], b[16];
    size_t bad = 0;
    tbx_quote_bytes(q, sizeof q, p, n, 64);
    if (n > UINT32_MAX)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, field,
                       "%s of %zu bytes does not fit OINF's u32 length", what, n);
    if (!oi_charset_ok(p, n, &bad)) {
        if (n == 0)
            return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, field,
                           "%s is empty; OINF strings match [A-Za-z0-9._-]+", what);
        oi_describe_byte(b, (unsigned char)p[bad]);
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, field,
                       "%s \"%s\" has byte %s at position %zu; OINF strings match "
                       "[A-Za-z0-9._-]+", what, q, b, bad);
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata payloads                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* The tag of a scalar value type (numeric or bool), 0 for others. */
static uint32_t ow_scalar_tag(tbx_value_type t) {
    switch (t) {
    case TBX_V_BOOL: return OI_BOOL;
    case TBX_V_U8: return OI_U8;
    case TBX_V_I8: return OI_I8;
    case TBX_V_U16: return OI_U16;
    case TBX_V_I16: return OI_I16;
    case TBX_V_U32: return OI_U32;
    case TBX_V_I32: return OI_I32;
    case TBX_V_U64: return OI_U64;
    case TBX_V_I64: return OI_I64;
    case TBX_V_F16: return OI_F16;
    case TBX_V_BF16: return OI_BF16;
    case TBX_V_F32: return OI_F32;
    case TBX_V_F64: return OI_F64;
    default: return 0;
    }
}

/* Little-endian bytes of a scalar value (its type's size). */
static void ow_put_scalar(uint8_t *dst, const tbx_value *v) {
    switch (v->type) {
    case TBX_V_BOOL: dst[0] = v->v.u != 0; break;
    case TBX_V_U8: dst[0] = (uint8_t)v->v.u; break;
    case TBX_V_I8: dst[0] = (uint8_t)(int8_t)v->v.i; break;
    case TBX_V_U16: tbx_st16(dst, (uint16_t)v->v.u); break;
    case TBX_V_I16: tbx_st16(dst, (uint16_t)(int16_t)v->v.i); break;
    case TBX_V_U32: tbx_st32(dst, (uint32_t)v->v.u); break;
    case TBX_V_I32: tbx_st32(dst, (uint32_t)(int32_t)v->v.i); break;
    case TBX_V_U64: tbx_st64(dst, v->v.u); break;
    case TBX_V_I64: tbx_st64(dst, (uint64_t)v->v.i); break;
    case TBX_V_F16: tbx_st16(dst, tbx_f32_to_f16((float)v->v.f)); break;
    case TBX_V_BF16: tbx_st16(dst, tbx_f32_to_bf16((float)v->v.f)); break;
    case TBX_V_F32: {
        float x = (float)v->v.f;
        uint32_t u;
        memcpy(&u, &x, 4);
        tbx_st32(dst, u);
        break;
    }
    case TBX_V_F64: {
        uint64_t u;
        memcpy(&u, &v->v.f, 8);
        tbx_st64(dst, u);
        break;
    }
    default: break;
    }
}

/* The common scalar type of an ARRAY's elements (numeric or bool), or TBX_V_NULL when the array
 * is not a list of such scalars of one type. */
static tbx_value_type ow_array_elem(const tbx_value *v) {
    tbx_value_type t = v->elem;
    uint64_t n = v->v.a.n;
    if (t == TBX_V_NULL) {
        if (n == 0) return TBX_V_NULL;
        const tbx_value *e0 = tbx_value_at(v, 0);
        if (!e0) return TBX_V_NULL;
        t = e0->type;
        for (uint64_t i = 1; i < n; i++) {
            const tbx_value *e = tbx_value_at(v, i);
            if (!e || e->type != t) return TBX_V_NULL;
        }
    }
    return ow_scalar_tag(t) ? t : TBX_V_NULL;
}

/* Writes the NDARRAY header (element tag, ndim, dims) at dst. */
static void ow_nd_head(uint8_t *dst, uint32_t tag, uint32_t ndim, const uint64_t *shape) {
    tbx_st32(dst, tag);
    tbx_st32(dst + 4, ndim);
    for (uint32_t d = 0; d < ndim; d++) tbx_st64(dst + 8 + 8 * (uint64_t)d, shape[d]);
}

/* Sizes (dst == NULL) or encodes (dst of *nbytes zeroed bytes) the payload of metadata value v.
 * `kq` is the quoted key for messages. */
static tbx_status ow_meta(const tbx_value *v, const char *kq, uint8_t *dst, uint32_t *tag,
                          uint64_t *nbytes, tbx_error *err) {
    uint32_t t = ow_scalar_tag(v->type);
    if (t) {
        *tag = t;
        *nbytes = tbx_value_scalar_size(v->type);
        if (dst) ow_put_scalar(dst, v);
        return TBX_OK;
    }
    switch (v->type) {
    case TBX_V_STRING: {
        tbx_status st = ow_check_name(v->v.s.p, v->v.s.n, "metadata", "string value", err);
        if (st != TBX_OK) {
            size_t l = strlen(err ? err->message : "");
            if (err) snprintf(err->message + l, sizeof err->message - l, " (metadata \"%s\")", kq);
            return st;
        }
        *tag = OI_STRING;
        tbx_align_up_u64(4 + (uint64_t)v->v.s.n, OI_ALIGN, nbytes);
        if (dst) {
            tbx_st32(dst, (uint32_t)v->v.s.n);
            memcpy(dst + 4, v->v.s.p, v->v.s.n);
        }
        return TBX_OK;
    }
    case TBX_V_BITSET: {
        uint64_t bits = v->v.nd.count, bytes = bits / 8 + (bits % 8 != 0);
        if (bits > UINT32_MAX || bytes > v->v.nd.nbytes)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": a bitset of %" PRIu64 " bits does not fit OINF's u32 "
                           "bit count", kq, bits);
        *tag = OI_BITSET;
        tbx_align_up_u64(8 + bytes, OI_ALIGN, nbytes);
        if (dst) {
            tbx_st32(dst, (uint32_t)bits);
            tbx_st32(dst + 4, (uint32_t)bytes);
            if (bytes) memcpy(dst + 8, v->v.nd.data, (size_t)bytes);
            if (bits % 8) dst[8 + bytes - 1] &= (uint8_t)((1u << (bits % 8)) - 1);
        }
        return TBX_OK;
    }
    case TBX_V_NDARRAY: {
        const tbx_dtype_info *di = tbx_dtype_core_get(v->v.nd.dtype);
        uint32_t et = oi_tag_of_dtype(v->v.nd.dtype);
        if (!di || !oi_element_tag(et))
            return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": ndarray of %s elements has no OINF type", kq,
                           di ? di->name : "invalid");
        uint64_t data = 0;
        if (tbx_dtype_core_nbytes_shape(v->v.nd.dtype, v->v.nd.shape, v->v.nd.ndim, &data) != TBX_OK ||
            data != v->v.nd.nbytes || v->v.nd.ndim > UINT32_MAX)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": ndarray holds %zu bytes, its shape needs %" PRIu64,
                           kq, v->v.nd.nbytes, data);
        const oi_type *ty = oi_type_of(et);
        if (v->v.nd.ndim == 0 && ty->vtype == TBX_V_NULL) {
            /* f8 / packed scalar */
            *tag = et;
            *nbytes = 1;
            if (dst) dst[0] = ty->bits ? (uint8_t)(v->v.nd.data[0] & ((1u << ty->bits) - 1))
                                       : v->v.nd.data[0];
            return TBX_OK;
        }
        uint64_t head = 8 + 8 * (uint64_t)v->v.nd.ndim, total;
        if (!tbx_add_u64(head, data, &total) || !tbx_align_up_u64(total, OI_ALIGN, &total))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": ndarray size overflows", kq);
        *tag = OI_NDARRAY;
        *nbytes = total;
        if (dst) {
            ow_nd_head(dst, et, v->v.nd.ndim, v->v.nd.shape);
            unsigned width = ty->bits ? 1 : ty->size;
            oi_copy_le(dst + head, v->v.nd.data, ty->bits ? data : v->v.nd.count, width);
            if (ty->bits && data) {
                uint64_t used = v->v.nd.count * ty->bits;
                if (used % 8) dst[head + data - 1] &= (uint8_t)((1u << (used % 8)) - 1);
            }
        }
        return TBX_OK;
    }
    case TBX_V_ARRAY: {
        tbx_value_type et = ow_array_elem(v);
        if (et == TBX_V_NULL) {
            const char *why = v->elem == TBX_V_STRING ? "an array of strings"
                              : v->v.a.n == 0       ? "an empty array without element type"
                                                    : "an array of non-numeric or mixed values";
            return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": OINF cannot store %s (only numeric/bool arrays, as "
                           "a 1-D ndarray)", kq, why);
        }
        uint64_t n = v->v.a.n, es = tbx_value_scalar_size(et), data, total;
        if (!tbx_mul_u64(n, es, &data) || !tbx_add_u64(16, data, &total) ||
            !tbx_align_up_u64(total, OI_ALIGN, &total))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": array size overflows", kq);
        *tag = OI_NDARRAY;
        *nbytes = total;
        if (dst) {
            ow_nd_head(dst, ow_scalar_tag(et), 1, &n);
            uint8_t *p = dst + 16;
            if (v->v.a.packed) {
                oi_copy_le(p, (const uint8_t *)v->v.a.packed, n, (unsigned)es);
                if (et == TBX_V_BOOL)
                    for (uint64_t i = 0; i < n; i++) p[i] = p[i] != 0;
            } else {
                for (uint64_t i = 0; i < n; i++) {
                    const tbx_value *e = tbx_value_at(v, i);
                    if (e) ow_put_scalar(p + i * es, e);
                }
            }
        }
        return TBX_OK;
    }
    default:
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": OINF has no %s type", kq, tbx_value_type_name(v->type));
    }
}

tbx_status oi_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                           tbx_error *err) {
    (void)w;
    tbx_status st = ow_check_name(key, key_len, "metadata.key", "metadata key", err);
    if (st != TBX_OK) return st;
    char kq[96];
    tbx_quote_bytes(kq, sizeof kq, key, key_len, 64);
    uint32_t tag;
    uint64_t nbytes;
    return ow_meta(v, kq, NULL, &tag, &nbytes, err);
}

tbx_status oi_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    (void)w;
    tbx_status st = ow_check_name(t->name, t->name_len, "tensor.name", "tensor name", err);
    if (st != TBX_OK) return st;
    if (!oi_w_dtype_ok(t->dtype)) {
        const tbx_dtype_info *di = tbx_dtype_core_get(t->dtype);
        char q[96];
        tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": dtype %s has no OINF equivalent", q,
                       di ? di->name : "of another format");
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* oinf.h writer calls                                                                         */
/* ------------------------------------------------------------------------------------------ */
static tbx_status ow_need(tbx_writer *w, const char *what, tbx_error *err) {
    if (!w || w->format != TBX_FORMAT_OINF)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, what,
                       "%s needs a writer of OINF files", what);
    if (w->state != TBX_WS_DECLARE)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, what,
                       "%s must be added before any tensor data is written", what);
    if (w->drv_state && ((ow_state *)w->drv_state)->tag != OW_STATE_TAG)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, what, "corrupt OINF writer state");
    return TBX_OK;
}

tbx_status tbx_oinf_writer_add_sizevar(tbx_writer *w, const char *name, uint64_t value,
                                       tbx_error *err) {
    tbx_status st = ow_need(w, "sizevars", err);
    if (st != TBX_OK) return st;
    if (!name) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "sizevars", "NULL name");
    size_t n = strlen(name);
    st = ow_check_name(name, n, "sizevars.name", "size variable name", err);
    if (st != TBX_OK) return st;
    ow_state *s = ow_state_get(w, err);
    if (!s) return TBX_E_NOMEM;
    for (size_t i = 0; i < s->nsv; i++)
        if (s->sv[i].len == n && memcmp(s->sv[i].name, name, n) == 0)
            return tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "sizevars.name",
                           "duplicate size variable \"%s\"", name);
    if (!tbx_grow(&w->al, (void **)&s->sv, &s->cap_sv, s->nsv + 1, sizeof *s->sv))
        return tbx_err_nomem(err, "size variables");
    char *copy = tbx_memdup0(&w->al, name, n);
    if (!copy) return tbx_err_nomem(err, "size variable");
    s->sv[s->nsv++] = (ow_sizevar){copy, n, value};
    return TBX_OK;
}

tbx_status tbx_oinf_writer_set_quant(tbx_writer *w, const char *tensor, const tbx_oinf_quant *q,
                                     tbx_error *err) {
    tbx_status st = ow_need(w, "quant", err);
    if (st != TBX_OK) return st;
    if (!tensor || !q || (q->scale_count && !q->scales) || (q->zp_count && !q->zero_points))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant", "NULL argument");
    uint32_t ver = ow_version(w);
    if (ver < 2)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                       "tensor \"%s\": quantization parameters need OINF version 2 (the writer "
                       "writes version %" PRIu32 ")", tensor, ver);
    size_t n = strlen(tensor);
    ow_state *s = ow_state_get(w, err);
    if (!s) return TBX_E_NOMEM;
    for (size_t i = 0; i < s->nq; i++)
        if (s->qs[i].len == n && memcmp(s->qs[i].tensor, tensor, n) == 0)
            return tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "quant",
                           "tensor \"%s\" already has quantization parameters", tensor);
    if (q->scale_count > SIZE_MAX / sizeof(float) || q->zp_count > SIZE_MAX / sizeof(int32_t))
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "quant", "too many scales");
    if (!tbx_grow(&w->al, (void **)&s->qs, &s->cap_q, s->nq + 1, sizeof *s->qs))
        return tbx_err_nomem(err, "quant list");
    ow_quant *e = &s->qs[s->nq];
    memset(e, 0, sizeof *e);
    e->q = *q;
    e->tensor = tbx_memdup0(&w->al, tensor, n);
    e->scales = tbx_malloc(&w->al, (size_t)q->scale_count * sizeof(float));
    e->zps = tbx_malloc(&w->al, (size_t)q->zp_count * sizeof(int32_t));
    if (!e->tensor || !e->scales || !e->zps) {
        tbx_free(&w->al, e->tensor, n + 1);
        tbx_free(&w->al, e->scales, (size_t)q->scale_count * sizeof(float));
        tbx_free(&w->al, e->zps, (size_t)q->zp_count * sizeof(int32_t));
        return tbx_err_nomem(err, "quant parameters");
    }
    e->len = n;
    if (q->scale_count) memcpy(e->scales, q->scales, (size_t)q->scale_count * sizeof(float));
    if (q->zp_count) memcpy(e->zps, q->zero_points, (size_t)q->zp_count * sizeof(int32_t));
    e->q.scales = e->scales;
    e->q.zero_points = e->zps;
    s->nq++;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Quantization descriptions given with the tensor (tbx_writer_add_quant_tensor)               */
/* ------------------------------------------------------------------------------------------ */

/* The common description qi of a tensor of dtype `dtype` in OINF's terms, when a v2 quant
 * payload holds it exactly: linear, codes of the tensor's dtype, f32 scales per tensor or per
 * channel and i32 zero points (or none) in the description's values, nothing OINF has no field
 * for. The arrays of *out point into qi. TBX_E_UNSUPPORTED / TBX_E_LOSSY naming the tensor q
 * and the member otherwise. */
static tbx_status ow_quant_from_info(const tbx_quant_info *qi, tbx_dtype dtype, const char *q,
                                     tbx_oinf_quant *out, tbx_error *err) {
    const char *why = NULL, *field = "quant";
    tbx_status code = TBX_E_UNSUPPORTED;
    if (qi->method != TBX_QUANT_LINEAR) {
        why = "OINF stores linear (affine) quantization only";
        field = "quant.method";
    } else if (qi->code_dtype != dtype) {
        why = "its codes are not of the tensor's dtype";
        field = "quant.code_dtype";
    } else if ((qi->scale.scope != TBX_QSCOPE_TENSOR && qi->scale.scope != TBX_QSCOPE_CHANNEL) ||
               !qi->scale.values || qi->scale.dtype != TBX_DT_F32) {
        why = "OINF holds f32 scales per tensor or per channel in its header";
        field = "quant.scale";
    } else if (qi->zero.scope != TBX_QSCOPE_NONE &&
               ((qi->zero.scope != TBX_QSCOPE_TENSOR && qi->zero.scope != TBX_QSCOPE_CHANNEL) ||
                !qi->zero.values || qi->zero.dtype != TBX_DT_I32)) {
        why = "OINF holds i32 zero points per tensor or per channel in its header";
        field = "quant.zero";
    } else if (qi->block_size || qi->super_block_size) {
        why = "OINF has no block or super-block sizes";
        field = "quant.block_size";
    } else if (qi->domain != TBX_QDOMAIN_UNSPECIFIED || qi->has_clip) {
        why = "OINF has no field for the quantization domain or clip range";
        field = qi->has_clip ? "quant.clip" : "quant.domain";
        code = TBX_E_LOSSY;
    }
    if (why)
        return tbx_err(err, code, TBX_NO_OFFSET, field,
                       "tensor \"%s\": OINF cannot store its %s quantization (%s)", q,
                       tbx_quant_method_name(qi->method), why);
    memset(out, 0, sizeof *out);
    out->scheme = qi->zero.scope == TBX_QSCOPE_NONE ? TBX_OINF_SCHEME_SYMMETRIC
                                                    : TBX_OINF_SCHEME_ASYMMETRIC;
    out->scale_mode = qi->scale.scope == TBX_QSCOPE_CHANNEL ? TBX_OINF_MODE_PER_CHANNEL
                                                            : TBX_OINF_MODE_PER_TENSOR;
    out->zp_mode = qi->zero.scope == TBX_QSCOPE_CHANNEL  ? TBX_OINF_MODE_PER_CHANNEL
                   : qi->zero.scope == TBX_QSCOPE_TENSOR ? TBX_OINF_MODE_PER_TENSOR
                                                         : TBX_OINF_MODE_NONE;
    out->scale_axis = qi->scale.scope == TBX_QSCOPE_CHANNEL ? qi->scale.axis : 0;
    out->scale_count = qi->scale.count;
    out->zp_axis = qi->zero.scope == TBX_QSCOPE_CHANNEL ? qi->zero.axis : 0;
    out->zp_count = qi->zero.scope == TBX_QSCOPE_NONE ? 0 : qi->zero.count;
    out->scales = qi->scale.values;
    out->zero_points = out->zp_count ? qi->zero.values : NULL;
    return TBX_OK;
}

tbx_status oi_w_check_quant(tbx_writer *w, tbx_wtensor *t, const tbx_quant_info *qi,
                            tbx_error *err) {
    char q[96];
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    uint32_t ver = ow_version(w);
    if (ver < 2)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                       "tensor \"%s\": quantization parameters need OINF version 2 (the writer "
                       "writes version %" PRIu32 ")", q, ver);
    if (!t->has_data)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                       "tensor \"%s\": OINF stores quantization parameters only for a tensor "
                       "with data", q);
    tbx_oinf_quant oq;
    tbx_status st = ow_quant_from_info(qi, t->dtype, q, &oq, err);
    if (st == TBX_OK) st = oi_quant_check(&oq, t->shape, t->ndim, q, TBX_NO_OFFSET, err);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Layout                                                                                      */
/* ------------------------------------------------------------------------------------------ */
static const char *const ow_qmembers[7] = {OI_QKEY_SCHEME, OI_QKEY_SCALE_MODE, OI_QKEY_SCALE_AXIS,
                                          OI_QKEY_SCALES, OI_QKEY_ZP_MODE, OI_QKEY_ZP_AXIS,
                                          OI_QKEY_ZPS};

/* Per-tensor quantization parameters being assembled for the layout. */
typedef struct ow_tq {
    unsigned have;        /* bit m: member m given as metadata */
    bool explicit_;       /* given with tbx_oinf_writer_set_quant */
    tbx_oinf_quant q;
    float *scales;        /* owned when taken from metadata */
    int32_t *zps;
    uint64_t offset, nbytes;
} ow_tq;

/* Is key "<tensor>.quant.<member>" for a declared tensor? */
static bool ow_quant_key(const tbx_writer *w, const char *key, size_t klen, uint64_t *ti,
                         int *member) {
    size_t pl = strlen(OI_QKEY_PREFIX);
    for (int m = 0; m < 7; m++) {
        size_t ml = strlen(ow_qmembers[m]);
        if (klen <= pl + ml) continue;
        size_t tl = klen - pl - ml;
        if (memcmp(key + tl, OI_QKEY_PREFIX, pl) != 0 || memcmp(key + tl + pl, ow_qmembers[m], ml))
            continue;
        if (tbx_writer_find_tensor_(w, key, tl, ti)) {
            *member = m;
            return true;
        }
    }
    return false;
}

/* Takes member m of tensor quant *tq from metadata value v (key kq for messages). */
static tbx_status ow_quant_member(tbx_writer *w, ow_tq *tq, int m, const tbx_value *v,
                                  const char *kq, tbx_error *err) {
    if (m == 3 || m == 6) { /* scales (f32) / zero points (i32): 1-D ndarray or array */
        uint64_t n = 0;
        bool is_nd = v->type == TBX_V_NDARRAY;
        if (is_nd) {
            tbx_dtype want = m == 3 ? TBX_DT_F32 : TBX_DT_I32;
            if (v->v.nd.dtype != want || v->v.nd.ndim != 1)
                return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata",
                               "metadata \"%s\": must be a 1-D %s ndarray", kq,
                               m == 3 ? "f32" : "i32");
            n = v->v.nd.count;
        } else if (v->type == TBX_V_ARRAY) {
            n = v->v.a.n;
        } else {
            return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": must be a 1-D ndarray or an array, not %s", kq,
                           tbx_value_type_name(v->type));
        }
        if (n > SIZE_MAX / 4) return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "metadata", "too long");
        void *buf = tbx_malloc(&w->al, (size_t)n * 4);
        if (!buf) return tbx_err_nomem(err, "quant parameters");
        for (uint64_t i = 0; i < n; i++) {
            if (is_nd) { memcpy((uint8_t *)buf + i * 4, v->v.nd.data + i * 4, 4); continue; }
            const tbx_value *e = tbx_value_at(v, i);
            double d = 0;
            int64_t k = 0;
            bool ok = e && (m == 3 ? tbx_value_get_f64(e, &d) == TBX_OK
                                   : tbx_value_get_i64(e, &k) == TBX_OK && k >= INT32_MIN &&
                                         k <= INT32_MAX);
            if (!ok) {
                tbx_free(&w->al, buf, (size_t)n * 4);
                return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata",
                               "metadata \"%s\": element %" PRIu64 " is not %s", kq, i,
                               m == 3 ? "a number" : "an i32 integer");
            }
            if (m == 3) ((float *)buf)[i] = (float)d;
            else ((int32_t *)buf)[i] = (int32_t)k;
        }
        if (m == 3) { tq->scales = buf; tq->q.scale_count = n; }
        else { tq->zps = buf; tq->q.zp_count = n; }
        return TBX_OK;
    }
    uint64_t u = 0;
    if (tbx_value_get_u64(v, &u) != TBX_OK || v->type == TBX_V_BOOL ||
        ((m == 0 || m == 1 || m == 4) && u > UINT32_MAX))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": must be an unsigned integer%s", kq,
                       (m == 0 || m == 1 || m == 4) ? " below 2^32" : "");
    switch (m) {
    case 0: tq->q.scheme = (uint32_t)u; break;
    case 1: tq->q.scale_mode = (uint32_t)u; break;
    case 2: tq->q.scale_axis = u; break;
    case 4: tq->q.zp_mode = (uint32_t)u; break;
    default: tq->q.zp_axis = u; break;
    }
    return TBX_OK;
}

static void ow_free_tqs(tbx_writer *w, ow_tq *tqs, size_t n) {
    if (!tqs) return;
    for (size_t i = 0; i < n; i++) {
        if (tqs[i].explicit_) continue;
        tbx_free(&w->al, tqs[i].scales, (size_t)tqs[i].q.scale_count * 4);
        tbx_free(&w->al, tqs[i].zps, (size_t)tqs[i].q.zp_count * 4);
    }
    tbx_free(&w->al, tqs, (n ? n : 1) * sizeof *tqs);
}

static int ow_name_cmp(const char *a, size_t al, const char *b, size_t bl) {
    size_t m = al < bl ? al : bl;
    int r = memcmp(a, b, m);
    if (r) return r;
    return al < bl ? -1 : (al > bl);
}

static int ow_meta_cmp(const void *a, const void *b) {
    const tbx_meta_entry *x = *(const tbx_meta_entry *const *)a;
    const tbx_meta_entry *y = *(const tbx_meta_entry *const *)b;
    return ow_name_cmp(x->key, x->key_len, y->key, y->key_len);
}

static int ow_tensor_cmp(const void *a, const void *b) {
    const tbx_wtensor *x = *(const tbx_wtensor *const *)a;
    const tbx_wtensor *y = *(const tbx_wtensor *const *)b;
    return ow_name_cmp(x->name, x->name_len, y->name, y->name_len);
}

static int ow_sv_cmp(const void *a, const void *b) {
    const ow_sizevar *x = a, *y = b;
    return ow_name_cmp(x->name, x->len, y->name, y->len);
}

/* Appends a String to a table buffer at *pos. */
static void ow_put_str(uint8_t *buf, uint64_t *pos, const char *s, size_t n) {
    tbx_st32(buf + *pos, (uint32_t)n);
    memcpy(buf + *pos + 4, s, n);
    uint64_t padded = 0;
    tbx_align_up_u64(4 + (uint64_t)n, OI_ALIGN, &padded);
    *pos += padded; /* the buffer is zeroed: padding stays 0 */
}

static uint64_t ow_str_size(size_t n) {
    uint64_t p = 0;
    tbx_align_up_u64(4 + (uint64_t)n, OI_ALIGN, &p);
    return p;
}

/* Bytes of a tensor's entry in the tensor table. */
static uint64_t ow_tensor_entry_size(const tbx_wtensor *t, uint32_t ver) {
    return ow_str_size(t->name_len) + 12 + 8 * (uint64_t)t->ndim + 16 + (ver >= 2 ? 16 : 0);
}

/* The tensor table is written in pieces of about this size. */
#define OW_FLUSH ((uint64_t)1 << 20)

/* Assembles the quantization parameters of every tensor (explicit ones and, for version 2,
 * metadata entries "<tensor>.quant.*"). consumed[i] marks metadata entries taken. */
static tbx_status ow_collect_quant(tbx_writer *w, uint32_t ver, ow_tq *tqs, bool *consumed,
                                   tbx_error *err) {
    ow_state *s = w->drv_state;
    for (size_t i = 0; s && i < s->nq; i++) {
        uint64_t ti;
        if (!tbx_writer_find_tensor_(w, s->qs[i].tensor, s->qs[i].len, &ti))
            return tbx_err(err, TBX_E_NOT_FOUND, TBX_NO_OFFSET, "quant",
                           "quantization parameters were given for tensor \"%s\", which was not "
                           "declared", s->qs[i].tensor);
        tqs[ti].explicit_ = true;
        tqs[ti].q = s->qs[i].q;
        tqs[ti].scales = s->qs[i].scales;
        tqs[ti].zps = s->qs[i].zps;
    }
    /* descriptions given with the tensor (tbx_writer_add_quant_tensor; oi_w_check_quant
     * accepted each): the arrays stay the writer's */
    for (size_t i = 0; i < w->nquants; i++) {
        uint64_t ti = w->quants[i].index;
        const tbx_wtensor *t = &w->tensors[ti];
        char q[96];
        tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
        if (tqs[ti].explicit_)
            return tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "quant",
                           "tensor \"%s\" already has quantization parameters", q);
        tbx_status st = ow_quant_from_info(w->quants[i].q, t->dtype, q, &tqs[ti].q, err);
        if (st != TBX_OK) return st;
        tqs[ti].explicit_ = true; /* not owned by the record: not freed with it */
        tqs[ti].scales = (float *)(uintptr_t)tqs[ti].q.scales;
        tqs[ti].zps = (int32_t *)(uintptr_t)tqs[ti].q.zero_points;
    }
    if (ver >= 2) {
        for (size_t i = 0; i < w->nmeta; i++) {
            uint64_t ti;
            int m;
            const tbx_meta_entry *e = &w->meta[i];
            if (!ow_quant_key(w, e->key, e->key_len, &ti, &m)) continue;
            char kq[96];
            tbx_quote_bytes(kq, sizeof kq, e->key, e->key_len, 64);
            if (tqs[ti].explicit_)
                return tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "metadata",
                               "metadata \"%s\" describes quantization parameters that "
                               "tbx_oinf_writer_set_quant also gave", kq);
            tbx_status st = ow_quant_member(w, &tqs[ti], m, e->value, kq, err);
            if (st != TBX_OK) return st;
            tqs[ti].have |= 1u << m;
            consumed[i] = true;
        }
    }
    for (size_t i = 0; i < w->ntensors; i++) {
        ow_tq *tq = &tqs[i];
        const tbx_wtensor *t = &w->tensors[i];
        if (!tq->have && !tq->explicit_) continue;
        char q[96];
        tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
        if (tq->have) {
            unsigned need = 0x1Fu; /* scheme, scale_mode, scale_axis, scales, zp_mode */
            if ((tq->have & (1u << 4)) && tq->q.zp_mode != TBX_OINF_MODE_NONE) need |= 0x60u;
            unsigned missing = need & ~tq->have;
            if (missing) {
                int m = __builtin_ctz(missing);
                return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata",
                               "tensor \"%s\": quantization metadata lacks \"%s%s%s\"", q, q,
                               OI_QKEY_PREFIX, ow_qmembers[m]);
            }
        }
        if (!t->has_data)
            return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "quant",
                           "tensor \"%s\" has quantization parameters but no data", q);
        tbx_status st = oi_quant_check(&tq->q, t->shape, t->ndim, q, TBX_NO_OFFSET, err);
        if (st != TBX_OK) return st;
        if (!oi_quant_nbytes(tq->q.scale_count, tq->q.zp_count, &tq->nbytes))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "quant",
                           "tensor \"%s\": quant payload size overflows", q);
    }
    return TBX_OK;
}

/* Writes a quant payload at off. */
static tbx_status ow_write_quant(tbx_writer *w, const ow_tq *tq, uint64_t off, tbx_error *err) {
    if (tq->nbytes > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, off, "quant", "too large");
    uint8_t *b = tbx_calloc(&w->al, 1, (size_t)tq->nbytes);
    if (!b) return tbx_err_nomem(err, "quant payload");
    tbx_st32(b, tq->q.scheme);
    tbx_st32(b + 4, tq->q.scale_mode);
    tbx_st32(b + 8, tq->q.zp_mode);
    tbx_st64(b + 16, tq->q.scale_axis);
    tbx_st64(b + 24, tq->q.scale_count);
    tbx_st64(b + 32, tq->q.zp_axis);
    tbx_st64(b + 40, tq->q.zp_count);
    uint8_t *p = b + OI_QUANT_HEADER;
    for (uint64_t i = 0; i < tq->q.scale_count; i++, p += 4) {
        uint32_t u;
        memcpy(&u, &tq->scales[i], 4);
        tbx_st32(p, u);
    }
    for (uint64_t i = 0; i < tq->q.zp_count; i++, p += 4) tbx_st32(p, (uint32_t)tq->zps[i]);
    tbx_status st = tbx_out_pwrite(&w->out, off, b, (size_t)tq->nbytes, err);
    tbx_free(&w->al, b, (size_t)tq->nbytes);
    return st;
}

/* The layout of one OINF file being written (oi_w_layout and its steps). */
typedef struct ow_lay {
    tbx_writer *w;
    ow_state *s;
    uint32_t ver;
    size_t nsv, nmd, nt, nm;     /* size variables, metadata given / kept, tensors */
    uint64_t talign;
    ow_tq *tqs;                  /* by tensor, when some tensor has quantization parameters */
    bool *consumed;              /* by metadata entry: read as quantization parameters */
    const tbx_meta_entry **meta; /* the kept metadata, in key order */
    tbx_wtensor **tens;          /* name order, when the tensors were not declared in it */
    uint64_t *moff, *mlen;       /* by kept metadata entry: payload offset and length */
    uint32_t *mtag;
    uint64_t off_sv, off_md, off_tn, off_data, file_size;
} ow_lay;

static tbx_wtensor *ow_lay_tensor(const ow_lay *L, size_t i) {
    return L->tens ? L->tens[i] : &L->w->tensors[i];
}

static const ow_tq *ow_lay_tq(const ow_lay *L, const tbx_wtensor *t) {
    static const ow_tq no_tq;
    return L->tqs ? &L->tqs[t - L->w->tensors] : &no_tq;
}

/* The working arrays: quantization records only when some tensor has parameters, and an order
 * array only when the tensors were not declared in name order: a million tensors need neither. */
static tbx_status ow_lay_alloc(ow_lay *L, tbx_error *err) {
    tbx_writer *w = L->w;
    size_t nmd = L->nmd, nt = L->nt;
    bool any_quant = (L->s && L->s->nq) || w->nquants;
    for (size_t i = 0; L->ver >= 2 && !any_quant && i < nmd; i++) {
        uint64_t ti;
        int m;
        any_quant = ow_quant_key(w, w->meta[i].key, w->meta[i].key_len, &ti, &m);
    }
    bool sorted = true;
    for (size_t i = 1; sorted && i < nt; i++)
        sorted = ow_name_cmp(w->tensors[i - 1].name, w->tensors[i - 1].name_len,
                             w->tensors[i].name, w->tensors[i].name_len) < 0;
    L->tqs = any_quant ? tbx_calloc(&w->al, nt ? nt : 1, sizeof *L->tqs) : NULL;
    L->consumed = tbx_calloc(&w->al, nmd ? nmd : 1, sizeof *L->consumed);
    L->meta = tbx_calloc(&w->al, nmd ? nmd : 1, sizeof *L->meta);
    L->tens = sorted ? NULL : tbx_calloc(&w->al, nt ? nt : 1, sizeof *L->tens);
    L->moff = tbx_calloc(&w->al, nmd ? nmd : 1, sizeof *L->moff);
    L->mlen = tbx_calloc(&w->al, nmd ? nmd : 1, sizeof *L->mlen);
    L->mtag = tbx_calloc(&w->al, nmd ? nmd : 1, sizeof *L->mtag);
    if ((any_quant && !L->tqs) || !L->consumed || !L->meta || (!sorted && !L->tens) || !L->moff ||
        !L->mlen || !L->mtag)
        return tbx_err_nomem(err, "OINF layout");
    return TBX_OK;
}

static void ow_lay_free(ow_lay *L) {
    tbx_writer *w = L->w;
    size_t nmd = L->nmd, nt = L->nt;
    if (L->tqs) ow_free_tqs(w, L->tqs, nt);
    tbx_free(&w->al, L->consumed, (nmd ? nmd : 1) * sizeof *L->consumed);
    tbx_free(&w->al, (void *)L->meta, (nmd ? nmd : 1) * sizeof *L->meta);
    tbx_free(&w->al, L->tens, L->tens ? (nt ? nt : 1) * sizeof *L->tens : 0);
    tbx_free(&w->al, L->moff, (nmd ? nmd : 1) * sizeof *L->moff);
    tbx_free(&w->al, L->mlen, (nmd ? nmd : 1) * sizeof *L->mlen);
    tbx_free(&w->al, L->mtag, (nmd ? nmd : 1) * sizeof *L->mtag);
}

/* Order: kept metadata by key, tensors by name, size variables by name. */
static void ow_lay_order(ow_lay *L) {
    tbx_writer *w = L->w;
    L->nm = 0;
    for (size_t i = 0; i < L->nmd; i++)
        if (!L->consumed[i]) L->meta[L->nm++] = &w->meta[i];
    qsort((void *)L->meta, L->nm, sizeof *L->meta, ow_meta_cmp);
    if (L->tens) {
        for (size_t i = 0; i < L->nt; i++) L->tens[i] = &w->tensors[i];
        qsort(L->tens, L->nt, sizeof *L->tens, ow_tensor_cmp);
    }
    if (L->nsv) qsort(L->s->sv, L->nsv, sizeof *L->s->sv, ow_sv_cmp);
}

/* Table offsets, then the payload layout: metadata values, tensor data and quant payloads. */
static tbx_status ow_lay_place(ow_lay *L, tbx_error *err) {
    tbx_writer *w = L->w;
    /* table sizes (every term is bounded by in-memory sizes: no overflow) */
    uint64_t sv_size = 0, md_size = 0, tn_size = 0;
    for (size_t i = 0; i < L->nsv; i++) sv_size += ow_str_size(L->s->sv[i].len) + 8;
    for (size_t i = 0; i < L->nm; i++) md_size += ow_str_size(L->meta[i]->key_len) + 24;
    for (size_t i = 0; i < L->nt; i++)
        tn_size += ow_tensor_entry_size(&w->tensors[i], L->ver);
    L->off_sv = OI_HEADER_SIZE;
    L->off_md = L->off_tn = L->off_data = 0;
    tbx_align_up_u64(L->off_sv + sv_size, OI_ALIGN, &L->off_md);
    tbx_align_up_u64(L->off_md + md_size, OI_ALIGN, &L->off_tn);
    tbx_align_up_u64(L->off_tn + tn_size, OI_ALIGN, &L->off_data);

    /* payload layout */
    uint64_t cur = L->off_data;
    for (size_t i = 0; i < L->nm; i++) {
        char kq[96];
        tbx_quote_bytes(kq, sizeof kq, L->meta[i]->key, L->meta[i]->key_len, 64);
        tbx_status st = ow_meta(L->meta[i]->value, kq, NULL, &L->mtag[i], &L->mlen[i], err);
        if (st != TBX_OK) return st;
        L->moff[i] = cur;
        uint64_t e;
        if (!tbx_add_u64(cur, L->mlen[i], &e) || !tbx_align_up_u64(e, OI_ALIGN, &cur))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "metadata", "file size overflows");
    }
    for (size_t i = 0; i < L->nt; i++) {
        tbx_wtensor *t = ow_lay_tensor(L, i);
        ow_tq *tq = L->tqs ? &L->tqs[t - w->tensors] : NULL;
        uint64_t e;
        if (!t->has_data) { t->offset = 0; continue; }
        if (!tbx_align_up_u64(cur, L->talign, &cur) || !tbx_add_u64(cur, t->nbytes, &e) ||
            !tbx_align_up_u64(e, OI_ALIGN, &e))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "file size overflows");
        t->offset = cur;
        cur = e;
        if (tq && tq->nbytes) {
            tq->offset = cur;
            if (!tbx_add_u64(cur, tq->nbytes, &cur))
                return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "quant", "file size overflows");
        }
    }
    L->file_size = cur;
    return TBX_OK;
}

/* Header, size variables and metadata tables, from one buffer. */
static tbx_status ow_lay_write_head(const ow_lay *L, tbx_error *err) {
    tbx_writer *w = L->w;
    if (L->off_tn > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, 0, "header", "tables too large");
    size_t tab_len = (size_t)L->off_tn;
    uint8_t *tab = tbx_calloc(&w->al, 1, tab_len);
    if (!tab) return tbx_err_nomem(err, "OINF tables");
    memcpy(tab, "OINF\0", 5);
    tbx_st32(tab + 5, L->ver);
    tbx_st32(tab + 9, 0);
    tbx_st32(tab + 13, (uint32_t)L->nsv);
    tbx_st32(tab + 17, (uint32_t)L->nm);
    tbx_st32(tab + 21, (uint32_t)L->nt);
    tbx_st32(tab + 25, 0);
    tbx_st64(tab + 29, L->off_sv);
    tbx_st64(tab + 37, L->off_md);
    tbx_st64(tab + 45, L->off_tn);
    tbx_st64(tab + 53, L->off_data);
    tbx_st64(tab + 61, L->file_size);
    uint64_t pos = L->off_sv;
    for (size_t i = 0; i < L->nsv; i++) {
        ow_put_str(tab, &pos, L->s->sv[i].name, L->s->sv[i].len);
        tbx_st64(tab + pos, L->s->sv[i].value);
        pos += 8;
    }
    pos = L->off_md;
    for (size_t i = 0; i < L->nm; i++) {
        ow_put_str(tab, &pos, L->meta[i]->key, L->meta[i]->key_len);
        tbx_st32(tab + pos, L->mtag[i]);
        tbx_st32(tab + pos + 4, 0);
        tbx_st64(tab + pos + 8, L->mlen[i]);
        tbx_st64(tab + pos + 16, L->moff[i]);
        pos += 24;
    }
    tbx_status st = tbx_out_pwrite(&w->out, 0, tab, tab_len, err);
    tbx_free(&w->al, tab, tab_len);
    return st;
}

/* The tensor table, in pieces of about OW_FLUSH bytes, then zeros up to the data start. */
static tbx_status ow_lay_write_tensors(const ow_lay *L, tbx_error *err) {
    tbx_writer *w = L->w;
    uint32_t ver = L->ver;
    size_t nt = L->nt;
    tbx_status st = TBX_OK;
    uint64_t pos = L->off_tn;
    for (size_t i = 0; i < nt;) {
        /* a piece of about OW_FLUSH bytes (at least one entry) */
        size_t j = i;
        uint64_t len = 0;
        while (j < nt &&
               (j == i || len + ow_tensor_entry_size(ow_lay_tensor(L, j), ver) <= OW_FLUSH))
            len += ow_tensor_entry_size(ow_lay_tensor(L, j++), ver);
        if (len > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, pos, "tensor", "too large");
        size_t tab_len = (size_t)len;
        uint8_t *tab = tbx_calloc(&w->al, 1, tab_len);
        if (!tab) return tbx_err_nomem(err, "OINF tensor table");
        uint64_t p = 0;
        for (; i < j; i++) {
            const tbx_wtensor *t = ow_lay_tensor(L, i);
            const ow_tq *tq = ow_lay_tq(L, t);
            uint32_t flags = (t->has_data ? OI_HAS_DATA : 0) | (tq->nbytes ? OI_HAS_QUANT : 0);
            ow_put_str(tab, &p, t->name, t->name_len);
            tbx_st32(tab + p, oi_tag_of_dtype(t->dtype));
            tbx_st32(tab + p + 4, t->ndim);
            tbx_st32(tab + p + 8, flags);
            p += 12;
            for (uint32_t d = 0; d < t->ndim; d++, p += 8) tbx_st64(tab + p, t->shape[d]);
            tbx_st64(tab + p, t->has_data ? t->nbytes : 0);
            tbx_st64(tab + p + 8, t->has_data ? t->offset : 0);
            p += 16;
            if (ver >= 2) {
                tbx_st64(tab + p, tq->nbytes);
                tbx_st64(tab + p + 8, tq->nbytes ? tq->offset : 0);
                p += 16;
            }
        }
        st = tbx_out_pwrite(&w->out, pos, tab, tab_len, err);
        pos += len;
        tbx_free(&w->al, tab, tab_len);
        if (st != TBX_OK) return st;
    }
    if (L->off_data > pos) st = tbx_out_zero(&w->out, pos, L->off_data - pos, err);
    return st;
}

/* Metadata payloads, then quant payloads. */
static tbx_status ow_lay_write_payloads(const ow_lay *L, tbx_error *err) {
    tbx_writer *w = L->w;
    tbx_status st = TBX_OK;
    uint8_t *pay = NULL;
    size_t pay_cap = 0;
    for (size_t i = 0; i < L->nm; i++) {
        uint64_t mlen = L->mlen[i];
        if (mlen > SIZE_MAX) {
            st = tbx_err(err, TBX_E_OVERFLOW, L->moff[i], "metadata", "too large");
            break;
        }
        if (mlen > pay_cap) {
            tbx_free(&w->al, pay, pay_cap);
            pay = tbx_malloc(&w->al, (size_t)mlen);
            pay_cap = pay ? (size_t)mlen : 0;
            if (!pay) { st = tbx_err_nomem(err, "metadata payload"); break; }
        }
        memset(pay, 0, (size_t)mlen);
        char kq[96];
        uint32_t tag;
        uint64_t n;
        tbx_quote_bytes(kq, sizeof kq, L->meta[i]->key, L->meta[i]->key_len, 64);
        st = ow_meta(L->meta[i]->value, kq, pay, &tag, &n, err);
        if (st == TBX_OK) st = tbx_out_pwrite(&w->out, L->moff[i], pay, (size_t)mlen, err);
        if (st != TBX_OK) break;
    }
    tbx_free(&w->al, pay, pay_cap);
    for (size_t i = 0; st == TBX_OK && L->tqs && i < L->nt; i++)
        if (L->tqs[i].nbytes) st = ow_write_quant(w, &L->tqs[i], L->tqs[i].offset, err);
    return st;
}

tbx_status oi_w_layout(tbx_writer *w, tbx_error *err) {
    uint32_t ver = ow_version(w);
    if (w->nsections)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "sections",
                       "OINF files cannot store sections (%zu given)", w->nsections);
    ow_state *s = w->drv_state;
    size_t nsv = s ? s->nsv : 0, nmd = w->nmeta, nt = w->ntensors;
    if (nsv > UINT32_MAX || nmd > UINT32_MAX || nt > UINT32_MAX)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "header",
                       "OINF counts are u32: %zu size variables, %zu metadata entries, %zu tensors",
                       nsv, nmd, nt);
    ow_lay L = {.w = w, .s = s, .ver = ver, .nsv = nsv, .nmd = nmd, .nt = nt};
    L.talign = w->opt.alignment > OI_ALIGN ? w->opt.alignment : OI_ALIGN;

    tbx_status st = ow_lay_alloc(&L, err);
    if (st == TBX_OK && L.tqs) st = ow_collect_quant(w, ver, L.tqs, L.consumed, err);
    if (st == TBX_OK) {
        ow_lay_order(&L);
        st = ow_lay_place(&L, err);
    }
    if (st == TBX_OK) st = ow_lay_write_head(&L, err);
    if (st == TBX_OK) st = ow_lay_write_tensors(&L, err);
    if (st == TBX_OK) st = ow_lay_write_payloads(&L, err);
    if (st == TBX_OK) w->end = L.file_size;
    ow_lay_free(&L);
    return st;
}
