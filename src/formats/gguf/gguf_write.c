/*
 * gguf_write.c - the GGUF writer: GGUF v3 (v2 when asked) little-endian, byte-identical to
 * gguf-py's GGUFWriter for the same content.
 *
 *   "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv x      { u64 key length, key, u32 value type, value }   in insertion order; a
 *               general.alignment u32 entry added at the end when the alignment option is not
 *               the default 32 and the caller gave none
 *   n_tensors x { u64 name length, name, u32 n_dims, u64 ne[n_dims] (ne[0] = the last
 *               dimension), u32 ggml type, u64 offset }                  in declaration order
 *   zeros to the alignment (also when there are no tensors)                   = data start
 *   tensor 0, zeros to the alignment, tensor 1, zeros, ..., the last tensor, zeros
 *
 * w_check_meta / w_check_tensor refuse what GGUF cannot store (value types without a GGUF type,
 * arrays without one element type, dtypes without a ggml type, last dimensions that are not a
 * whole number of blocks); w_layout encodes the header to the output in ~1 MiB pieces (never
 * whole) and places each tensor at data start + offset; the tensor bytes stream in through the
 * common writer; w_finish writes the zero padding after every tensor. The value encoding is
 * the wire format of gguf_common.c.
 */
#include "gguf_int.h"
#include "ggml.h" /* TBX_GGML_OPT_METHOD */

#include <inttypes.h>
#include <stdio.h>

/* GGUF element type of an array value (checked by w_check_value first). */
static tbx_value_type arr_elem(const tbx_value *v) {
    if (v->elem != TBX_V_NULL || v->v.a.packed || v->v.a.soff || v->v.a.n == 0) return v->elem;
    return v->v.a.items[0]->type;
}

static tbx_status w_check_value(const char *q, const tbx_value *v, uint32_t level, tbx_error *err) {
    if (!v) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": NULL value", q);
    if (!tbx_driver_meta_ok(&tbx_driver_gguf, v->type))
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": GGUF cannot store a %s value (it has bool, u8..u64, "
                       "i8..i64, f32, f64, string and arrays)", q, tbx_value_type_name(v->type));
    if (v->type != TBX_V_ARRAY) return TBX_OK;
    if (level > G_MAX_NEST || level > 32)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": arrays nested %" PRIu32 " deep; readers allow 32", q,
                       level);
    tbx_value_type et = v->elem;
    if (et == TBX_V_NULL && !v->v.a.packed) {
        if (v->v.a.n == 0)
            return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": an empty array without an element type cannot be "
                           "stored in GGUF (arrays declare their element type)", q);
        et = v->v.a.items[0] ? v->v.a.items[0]->type : TBX_V_NULL;
    }
    if (!tbx_driver_meta_ok(&tbx_driver_gguf, et))
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": GGUF cannot store an array of %s (it has bool, "
                       "u8..u64, i8..i64, f32, f64, string and arrays)", q,
                       tbx_value_type_name(et));
    if (v->v.a.packed || v->v.a.soff) return TBX_OK;
    for (size_t i = 0; i < v->v.a.n; i++) {
        const tbx_value *it = v->v.a.items[i];
        if (!it || it->type != et)
            return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                           "metadata \"%s\": array element %zu is a %s, the array holds %s; GGUF "
                           "arrays have one element type", q, i,
                           it ? tbx_value_type_name(it->type) : "NULL", tbx_value_type_name(et));
        tbx_status st = w_check_value(q, it, level + 1, err);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}


tbx_status gguf_w_check_meta(tbx_writer *w, const char *key, size_t key_len,
                                 const tbx_value *v, tbx_error *err) {
    char q[96];
    tbx_quote_bytes(q, sizeof q, key, key_len, 64);
    tbx_status st;
    if (key_len == 0)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "metadata.key",
                       "GGUF metadata keys cannot be empty");
    st = w_check_value(q, v, 1, err);
    if (st != TBX_OK) return st;
    if (key_len == 17 && memcmp(key, "general.alignment", 17) == 0) {
        if (v->type != TBX_V_U32)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "metadata",
                           "general.alignment must be a u32 in GGUF, got %s",
                           tbx_value_type_name(v->type));
        if (!tbx_is_pow2(v->v.u))
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "metadata",
                           "general.alignment = %" PRIu64 " is not a non-zero power of two",
                           v->v.u);
        if (w->opt.alignment && w->opt.alignment != v->v.u)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "alignment",
                           "the alignment option (%" PRIu32 ") and general.alignment (%" PRIu64
                           ") disagree", w->opt.alignment, v->v.u);
    }
    return TBX_OK;
}

tbx_status gguf_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    char q[96];
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    tbx_status st;
    (void)w;
    if (!t->has_data)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": GGUF cannot store a tensor without data", q);
    if (!gguf_w_dtype_ok(t->dtype))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": dtype %s has no ggml type (GGUF stores f32, f16, bf16, "
                       "f64, i8..i64 and the ggml block types)", q, gguf_dtype_name(t->dtype));
    if (t->ndim > 64)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": %" PRIu32 " dimensions; readers allow 64", q, t->ndim);
    const tbx_dtype_info *di = tbx_dtype_core_get(t->dtype); /* a ggml type: a core dtype */
    uint64_t ne0 = t->ndim ? t->shape[t->ndim - 1] : 1;
    if (ne0 % di->block_size)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": the last dimension %" PRIu64 " is not a multiple of the "
                       "%s block size %" PRIu32, q, ne0, di->name, di->block_size);
    uint64_t nbytes;
    st = tbx_dtype_info_nbytes_shape(di, t->shape, t->ndim, &nbytes);
    if (st != TBX_OK)
        return tbx_err(err, st, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": cannot size %s data of this shape", q, di->name);
    t->nbytes = nbytes;
    return TBX_OK;
}

/* The header is written to the output in pieces of about GGUF_OUT_FLUSH bytes as it is encoded (the
 * header of a million tensors or of millions of strings is never held whole). */
#define GGUF_OUT_FLUSH ((size_t)1 << 20)

typedef struct gguf_out_buf {
    const tbx_alloc *al;
    uint8_t *p;
    size_t n, cap;
    bool oom;        /* stop: out of memory, or a write failed (wst) */
    tbx_out *out;    /* flushed to out at `base` once GGUF_OUT_FLUSH bytes are held */
    uint64_t base;   /* file offset of p[0] */
    tbx_status wst;
    tbx_error *err;
} gguf_out_buf;

static void gb_flush(gguf_out_buf *b) {
    if (b->oom || b->n == 0) return;
    tbx_status st = tbx_out_pwrite(b->out, b->base, b->p, b->n, b->err);
    if (st != TBX_OK) { b->oom = true; b->wst = st; return; }
    b->base += b->n;
    b->n = 0;
}

static void gb_put(gguf_out_buf *b, const void *s, size_t n) {
    if (b->oom || n == 0) return;
    if (b->n >= GGUF_OUT_FLUSH) gb_flush(b);
    if (b->oom) return;
    if (n > SIZE_MAX - b->n) { b->oom = true; return; }
    size_t need = b->n + n;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        uint8_t *p = tbx_realloc(b->al, b->p, b->cap, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void gb_u8(gguf_out_buf *b, uint8_t v) { gb_put(b, &v, 1); }
static void gb_u16(gguf_out_buf *b, uint16_t v) { uint8_t t[2]; tbx_st16(t, v); gb_put(b, t, 2); }
static void gb_u32(gguf_out_buf *b, uint32_t v) { uint8_t t[4]; tbx_st32(t, v); gb_put(b, t, 4); }
static void gb_u64(gguf_out_buf *b, uint64_t v) { uint8_t t[8]; tbx_st64(t, v); gb_put(b, t, 8); }
static void gb_str(gguf_out_buf *b, const char *s, size_t n) { gb_u64(b, n); gb_put(b, s, n); }

/* One packed native-endian element of value type t, written little-endian. */
static void gb_packed(gguf_out_buf *b, tbx_value_type t, const uint8_t *p) {
    switch (tbx_value_scalar_size(t)) {
    case 1: gb_u8(b, t == TBX_V_BOOL ? (uint8_t)(p[0] != 0) : p[0]); break;
    case 2: { uint16_t x; memcpy(&x, p, 2); gb_u16(b, x); break; }
    case 4: { uint32_t x; memcpy(&x, p, 4); gb_u32(b, x); break; }
    default: { uint64_t x; memcpy(&x, p, 8); gb_u64(b, x); break; }
    }
}

/* A value without its type tag. */
static void gb_value(gguf_out_buf *b, const tbx_value *v) {
    uint8_t sc[8];
    size_t n = gguf_scalar_bytes(v, sc);
    if (n) {
        gb_put(b, sc, n);
        return;
    }
    switch (v->type) {
    case TBX_V_STRING: gb_str(b, v->v.s.p, v->v.s.n); break;
    case TBX_V_ARRAY: {
        tbx_value_type et = arr_elem(v);
        gb_u32(b, (uint32_t)gguf_value_type_of(et));
        gb_u64(b, v->v.a.n);
        if (v->v.a.packed) {
            size_t es = tbx_value_scalar_size(v->elem);
            const uint8_t *p = v->v.a.packed;
            for (size_t i = 0; i < v->v.a.n && !b->oom; i++) gb_packed(b, v->elem, p + i * es);
        } else if (v->v.a.soff) {
            for (size_t i = 0; i < v->v.a.n && !b->oom; i++) {
                size_t len;
                const char *sp = tbx_value_str_at(v, i, &len);
                gb_str(b, sp, len);
            }
        } else {
            for (size_t i = 0; i < v->v.a.n && !b->oom; i++) gb_value(b, v->v.a.items[i]);
        }
        break;
    }
    default: break; /* refused by w_check_value */
    }
}

const tbx_format_option gguf_w_options[] = {
    /* applied by the conversion that quantizes to a ggml block type (src/convert/plain.c,
     * src/models/hf_gguf.c) */
    {TBX_GGML_OPT_METHOD, TBX_V_STRING, 0, 0, TBX_GGML_METHOD_GGML " " TBX_GGML_METHOD_SEARCH,
     "with --quant to a ggml block type: ggml (default: ggml_quantize_chunk's bytes) or search "
     "(q2_k .. q6_k: tensorbox's own scale search, a lower error, its RMSE and ggml's reported "
     "per tensor)"},
    {NULL, TBX_V_NULL, 0, 0, NULL, NULL},
};

tbx_status gguf_w_layout(tbx_writer *w, tbx_error *err) {
    tbx_status st;
    /* the quantization method is the conversion's: a writer that quantizes nothing refuses it */
    if (!(w->opt.flags & TBX_WRITE_QUANTIZING_) &&
        tbx_writer_opt_str(w, TBX_GGML_OPT_METHOD, NULL))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "options." TBX_GGML_OPT_METHOD,
                       "GGUF write option " TBX_GGML_OPT_METHOD " applies to a conversion "
                       "quantizing to a ggml block type (tbx_convert with quant_to, tbx convert "
                       "--quant); this writer quantizes nothing: it stores the tensors it is "
                       "given");
    uint64_t align = w->opt.alignment ? w->opt.alignment : G_DEFAULT_ALIGNMENT;
    bool have_meta = false;
    for (size_t i = 0; i < w->nmeta; i++) {
        const tbx_meta_entry *m = &w->meta[i];
        char q[96];
        tbx_quote_bytes(q, sizeof q, m->key, m->key_len, 64);
        st = gguf_w_check_meta(w, m->key, m->key_len, m->value, err);
        if (st != TBX_OK) return st;
        if (m->key_len == 17 && memcmp(m->key, "general.alignment", 17) == 0) {
            have_meta = true;
            align = m->value->v.u;
        }
    }
    bool add_meta = !have_meta && align != G_DEFAULT_ALIGNMENT;
    gguf_out_buf b = { &w->al, NULL, 0, 0, false, &w->out, 0, TBX_OK, err };
    gb_put(&b, "GGUF", 4);
    gb_u32(&b, w->opt.version); /* one the row declares writable (the writer's open checked) */
    gb_u64(&b, w->ntensors);
    gb_u64(&b, w->nmeta + (add_meta ? 1 : 0));
    for (size_t i = 0; i < w->nmeta && !b.oom; i++) {
        const tbx_meta_entry *m = &w->meta[i];
        gb_str(&b, m->key, m->key_len);
        gb_u32(&b, (uint32_t)gguf_value_type_of(m->value->type));
        gb_value(&b, m->value);
    }
    if (add_meta) {
        gb_str(&b, "general.alignment", 17);
        gb_u32(&b, GV_U32);
        gb_u32(&b, (uint32_t)align);
    }
    uint64_t rel = 0;
    for (size_t i = 0; i < w->ntensors && !b.oom; i++) {
        tbx_wtensor *t = &w->tensors[i];
        gb_str(&b, t->name, t->name_len);
        gb_u32(&b, t->ndim);
        for (uint32_t d = 0; d < t->ndim; d++) gb_u64(&b, t->shape[t->ndim - 1 - d]);
        gb_u32(&b, (uint32_t)tbx_gguf_dtype_type(t->dtype));
        gb_u64(&b, rel);
        t->offset = rel; /* relative for now */
        uint64_t padded;
        if (!tbx_align_up_u64(t->nbytes, align, &padded) || !tbx_add_u64(rel, padded, &rel)) {
            tbx_free(&w->al, b.p, b.cap);
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor",
                           "the data section size overflows 64 bits");
        }
    }
    while (!b.oom && (b.base + b.n) % align) gb_u8(&b, 0);
    gb_flush(&b);
    tbx_free(&w->al, b.p, b.cap);
    if (b.oom) return b.wst != TBX_OK ? b.wst : tbx_err_nomem(err, "GGUF header");
    uint64_t data_start = b.base, end;
    if (!tbx_add_u64(data_start, rel, &end))
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "file size overflows 64 bits");
    for (size_t i = 0; i < w->ntensors; i++) w->tensors[i].offset += data_start;
    w->end = end;
    return TBX_OK;
}

/* Zero padding after every tensor up to the next one (the last: up to the file end). */
tbx_status gguf_w_finish(tbx_writer *w, tbx_error *err) {
    for (size_t i = 0; i < w->ntensors; i++) {
        const tbx_wtensor *t = &w->tensors[i];
        uint64_t next = i + 1 < w->ntensors ? w->tensors[i + 1].offset : w->end;
        uint64_t e = t->offset + t->nbytes;
        if (next > e) {
            tbx_status st = tbx_out_zero(&w->out, e, next - e, err);
            if (st != TBX_OK) return st;
        }
    }
    return TBX_OK;
}


bool gguf_w_dtype_ok(tbx_dtype dt) { return tbx_gguf_dtype_type(dt) >= 0; }
