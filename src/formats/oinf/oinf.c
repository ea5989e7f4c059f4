/*
 * oinf.c - the OINF reader: open, validation, the read-side extras (oinf.h).
 *
 * The driver's files: oinf_common.c (type table, charset, quantization rules: used by the
 * reader and the writer), oinf.c (reading), oinf_write.c (writing), oinf_driver.c (the driver
 * table, which alone refers to both). Reader and writer call only into oinf_common.c.
 *
 * OINF ("Open Infer Neural Format", reference: PyPI openinfer-oinf 0.1.1) is one little-endian
 * file: a fixed header, three tables (size variables, metadata, tensor index) and a data section
 * holding every payload the tables point to. Every table and payload starts on an 8-byte boundary
 * and every gap is zero:
 *
 *   0      5       9      13       17       21       25       29      37      45     53    61  69 72
 *   +------+-------+------+--------+--------+--------+--------+-------+-------+------+-----+---+--+
 *   |OINF\0|version|flags |n_size- |n_meta- |n_tens- |reserved|off_   |off_   |off_  |off_ |fi-|00|
 *   |      | 1 | 2 |  0   | vars   | data   | ors    |   0    |sizevar|meta   |tensor|data |le_|  |
 *   +------+-------+------+--------+--------+--------+--------+-------+-------+------+-----+siz+--+
 *   | SizeVarsTable  @off_sizevars : { String name, u64 value } x n_sizevars                     |
 *   | MetadataTable  @off_metadata : { String key, u32 type, u32 flags=0, u64 nbytes, u64 off }  |
 *   | TensorIndex    @off_tensors  : { String name, u32 dtype, u32 ndim, u32 flags,             |
 *   |                                  u64 dims[ndim], u64 nbytes, u64 off                       |
 *   |                                  [v2: u64 quant_nbytes, u64 quant_offset] }                |
 *   | data section   @off_data     : metadata payloads, tensor data (and v2 quant payloads),     |
 *   |                                each 8-aligned, zero padded; file_size = end of file        |
 *   +--------------------------------------------------------------------------------------------+
 *
 * A String is u32 length, that many bytes of [A-Za-z0-9._-] (names, keys and STRING values),
 * zero padding to a multiple of 8 (counting the length field). Payload sizes ("nbytes") are exact
 * for scalars and tensor data and include the padding for STRING, BITSET, NDARRAY and quant
 * payloads. The tables are read in file order; tensors and metadata are reported in that order,
 * size variables through the sizevar hooks (tbx_sizevar_*), v2 quantization parameters as the
 * tensor's tbx_quant_info (tbx_tensor_quant_get; tbx_tensor_read_f32 applies them).
 *
 * Structural violations fail the open with the field, the value and the byte offset. Recoverable
 * ones (non-zero flags/reserved fields and padding, BOOL bytes other than 0/1, T2 codes outside
 * {-1,0,1}) go through tbx_file_problem; the checks that need the data section read (gaps between
 * payloads, tensor values) run in the validate hook. Every rule: docs/formats/oinf.md.
 */
#include "oinf_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------------------------ */
/* Driver state                                                                                */
/* ------------------------------------------------------------------------------------------ */
#define OI_STATE_TAG 0x4F494E46u /* "OINF" */
#define OI_CHUNK ((size_t)1 << 20)

enum { OI_SPAN_META, OI_SPAN_DATA, OI_SPAN_QUANT };

/* A payload in the data section (for the gap check of validate). */
typedef struct oi_span {
    uint64_t off, len;
    uint32_t kind;   /* OI_SPAN_* */
    uint64_t index;  /* metadata entry or tensor index */
} oi_span;

/* Where the quantization payload of a tensor is (tbx_tensor.drv); the parameters themselves
 * are the tensor's common description (t->quant, tbx_tensor_quant_get). */
typedef struct oi_tquant {
    uint64_t offset, nbytes;
} oi_tquant;

typedef struct oi_state {
    uint32_t tag;
    uint32_t version;
    uint64_t off_sv, off_md, off_tn, off_data, file_size;
    uint64_t sv_end, md_end, tn_end; /* where each table's entries end */
    oi_span *spans;
    size_t nspans, cap_spans;
} oi_state;

static void oi_free_quant(const tbx_alloc *al, oi_tquant *tq) {
    if (tq) tbx_free(al, tq, sizeof *tq);
}

void oi_close(tbx_file *f) {
    for (size_t i = 0; i < f->ntensors; i++) {
        oi_free_quant(&f->al, f->tensors[i].drv);
        f->tensors[i].drv = NULL;
    }
    oi_state *s = f->drv_state;
    if (!s) return;
    tbx_free(&f->al, s->spans, s->cap_spans * sizeof *s->spans);
    tbx_free(&f->al, s, sizeof *s);
    f->drv_state = NULL;
}

static const oi_state *oi_state_of(const tbx_file *f) {
    if (!f || !f->drv || f->drv->format != TBX_FORMAT_OINF || !f->drv_state) return NULL;
    const oi_state *s = f->drv_state;
    return s->tag == OI_STATE_TAG ? s : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading helpers                                                                             */
/* ------------------------------------------------------------------------------------------ */
typedef struct oi_rd {
    tbx_file *f;
    oi_state *s;
    tbx_cursor tc;     /* tables */
    tbx_cursor dc;     /* payloads in the data section */
    char *scratch;     /* the last string read (NUL-terminated) */
    size_t scratch_cap;
    uint64_t *dims;
    size_t dims_cap;
    uint64_t at_nbytes; /* the value_nbytes field of the metadata entry being read */
} oi_rd;

/* Points a cursor at [start, end) of the file (end <= file size, checked by the caller). */
static void oi_region(tbx_cursor *c, uint64_t start, uint64_t end) {
    c->pos = start;
    c->end = end;
}

static bool oi_scratch(oi_rd *rd, size_t need) {
    if (need <= rd->scratch_cap) return true;
    size_t cap = rd->scratch_cap ? rd->scratch_cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = tbx_realloc(&rd->f->al, rd->scratch, rd->scratch_cap, cap);
    if (!p) return false;
    rd->scratch = p;
    rd->scratch_cap = cap;
    return true;
}

/* Reads `n` (< 8) padding bytes at the cursor and reports a non-zero one as a problem. */
static tbx_status oi_read_pad(oi_rd *rd, tbx_cursor *c, uint64_t n, const char *field,
                              const char *what, tbx_error *err) {
    uint8_t pad[8];
    uint64_t at = c->pos;
    tbx_status st = tbx_cur_bytes(c, pad, (size_t)n, field, err);
    if (st != TBX_OK) return st;
    for (uint64_t i = 0; i < n; i++)
        if (pad[i] != 0)
            return tbx_file_problem(rd->f, err, TBX_E_PADDING, at + i, field,
                                    "padding byte %" PRIu64 " of %s is 0x%02x, expected 0", i,
                                    what, (unsigned)pad[i]);
    return TBX_OK;
}

/* Reads a String (u32 length, bytes, zero padding) into rd->scratch. `field` names the field,
 * `what` describes it in messages ("metadata key"). *len gets the length, *at the offset of the
 * length field. */
static tbx_status oi_read_str(oi_rd *rd, tbx_cursor *c, const char *field, const char *what,
                              size_t *len, uint64_t *at, tbx_error *err) {
    uint64_t start = c->pos;
    uint32_t n = 0;
    tbx_status st = tbx_cur_u32(c, &n, field, err);
    if (st != TBX_OK) return st;
    if (at) *at = start;
    if (n == 0)
        return tbx_err(err, TBX_E_FORMAT, start, field,
                       "%s is empty (length 0); it must match [A-Za-z0-9._-]+", what);
    if (n > rd->f->limits.max_string_len)
        return tbx_err(err, TBX_E_LIMIT, start, field,
                       "%s of %" PRIu32 " bytes exceeds max_string_len = %" PRIu64, what, n,
                       rd->f->limits.max_string_len);
    uint64_t padded = 0;
    tbx_align_up_u64(4 + (uint64_t)n, OI_ALIGN, &padded); /* n < 2^32: cannot overflow */
    st = tbx_cur_need(c, padded - 4, field, err);
    if (st != TBX_OK) return st;
    if (!oi_scratch(rd, (size_t)n + 1)) return tbx_err_nomem(err, what);
    st = tbx_cur_bytes(c, rd->scratch, n, field, err);
    if (st != TBX_OK) return st;
    rd->scratch[n] = 0;
    size_t bad = 0;
    if (!oi_charset_ok(rd->scratch, n, &bad)) {
        char q[96], b[16];
        tbx_quote_bytes(q, sizeof q, rd->scratch, n, 64);
        oi_describe_byte(b, (unsigned char)rd->scratch[bad]);
        return tbx_err(err, TBX_E_FORMAT, start + 4 + bad, field,
                       "%s \"%s\" has byte %s at position %zu; it must match [A-Za-z0-9._-]+",
                       what, q, b, bad);
    }
    *len = n;
    return oi_read_pad(rd, c, padded - 4 - n, field, what, err);
}

static tbx_status oi_add_span(oi_rd *rd, uint64_t off, uint64_t len, uint32_t kind,
                              uint64_t index, tbx_error *err) {
    oi_state *s = rd->s;
    /* (the array may be twice the spans while it grows) */
    tbx_status st = tbx_file_charge(rd->f, 2 * sizeof *s->spans, off,
                                    kind == OI_SPAN_META ? "metadata.value_offset"
                                    : kind == OI_SPAN_DATA ? "tensor.data_offset"
                                                           : "tensor.quant_offset", err);
    if (st != TBX_OK) return st;
    if (!tbx_grow(&rd->f->al, (void **)&s->spans, &s->cap_spans, s->nspans + 1, sizeof *s->spans))
        return tbx_err_nomem(err, "OINF payload list");
    s->spans[s->nspans++] = (oi_span){off, len, kind, index};
    return TBX_OK;
}

/* Checks that a payload [off, off + n) lies in the data section and starts 8-aligned. */
static tbx_status oi_check_payload(oi_rd *rd, uint64_t off, uint64_t n, uint64_t at_off,
                                   const char *field, const char *owner, tbx_error *err) {
    const oi_state *s = rd->s;
    uint64_t end;
    if (off % OI_ALIGN)
        return tbx_err(err, TBX_E_RANGE, at_off, field,
                       "%s: payload offset %" PRIu64 " is not a multiple of 8", owner, off);
    if (off < s->off_data)
        return tbx_err(err, TBX_E_RANGE, at_off, field,
                       "%s: payload offset %" PRIu64 " precedes the data section at %" PRIu64,
                       owner, off, s->off_data);
    if (!tbx_add_u64(off, n, &end) || end > s->file_size)
        return tbx_err(err, TBX_E_RANGE, at_off, field,
                       "%s: payload [%" PRIu64 ", +%" PRIu64 ") runs past the end of the file "
                       "(%" PRIu64 " bytes)", owner, off, n, s->file_size);
    return TBX_OK;
}

/* Index of the first element whose T2 code is 2 (binary 10, outside {-1, 0, 1}), or n. */
static uint64_t oi_t2_bad(const uint8_t *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (((p[i / 4] >> (2 * (i % 4))) & 3u) == 2u) return i;
    return n;
}

/* The bits of the last byte of a packed stream of n elements of `bits` that lie past the
 * stream (0 when none is set or the stream ends on a byte boundary). */
static unsigned oi_tail_bits(const uint8_t *p, uint64_t nbytes, uint64_t n, unsigned bits) {
    uint64_t used = n * bits; /* n * bits < 8 * nbytes + 8: no overflow for stored data */
    if (nbytes == 0 || used % 8 == 0) return 0;
    return p[nbytes - 1] & (unsigned)(0xFFu << (used % 8)) & 0xFFu;
}

/* Value checks on decoded element bytes (metadata payloads, tensor data chunks). `first` is the
 * index of data[0]'s first element. Reports problems; returns TBX_OK or the problem code when
 * problems are fatal. */
static tbx_status oi_check_elems(tbx_file *f, uint32_t tag, const uint8_t *data, uint64_t nbytes,
                                 uint64_t nelems, bool last_chunk, uint64_t at,
                                 const char *field, const char *owner, tbx_error *err) {
    if (tag == OI_BOOL) {
        for (uint64_t i = 0; i < nbytes; i++)
            if (data[i] > 1)
                return tbx_file_problem(f, err, TBX_E_FORMAT, at + i, field,
                                        "%s: bool element is 0x%02x, expected 0 or 1", owner,
                                        (unsigned)data[i]);
    } else if (tag == OI_T2) {
        uint64_t bad = oi_t2_bad(data, nelems);
        if (bad < nelems)
            return tbx_file_problem(f, err, TBX_E_FORMAT, at + bad / 4, field,
                                    "%s: t2 element %" PRIu64 " of this run has code 2 (binary 10), "
                                    "outside {-1, 0, 1}", owner, bad);
    }
    const oi_type *ty = oi_type_of(tag);
    if (last_chunk && ty && ty->bits) {
        unsigned extra = oi_tail_bits(data, nbytes, nelems, ty->bits);
        if (extra)
            return tbx_file_problem(f, err, TBX_E_PADDING, at + nbytes - 1, field,
                                    "%s: unused high bits of the last %s byte are 0x%02x, expected "
                                    "0", owner, ty->name, extra);
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata payloads                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* A handle-owned NDARRAY value of `dtype` and `shape` with `nbytes` bytes of element storage. */
static tbx_value *oi_new_ndarray(tbx_file *f, tbx_dtype dtype, const uint64_t *shape,
                                 uint32_t ndim, uint64_t count, size_t nbytes) {
    tbx_value *v = tbx_val_new(&f->al, TBX_V_NDARRAY);
    if (!v) return NULL;
    v->v.nd.shape = tbx_malloc(&f->al, (size_t)ndim * sizeof(uint64_t));
    v->v.nd.data = tbx_malloc(&f->al, nbytes);
    if (!v->v.nd.shape || !v->v.nd.data) {
        tbx_free(&f->al, v->v.nd.shape, (size_t)ndim * sizeof(uint64_t));
        v->v.nd.shape = NULL;
        tbx_free(&f->al, v->v.nd.data, nbytes);
        v->v.nd.data = NULL;
        tbx_val_free(v);
        return NULL;
    }
    v->v.nd.dtype = dtype;
    v->v.nd.ndim = ndim;
    if (ndim) memcpy(v->v.nd.shape, shape, (size_t)ndim * sizeof(uint64_t));
    v->v.nd.nbytes = nbytes;
    v->v.nd.count = count;
    return v;
}

static tbx_status oi_meta_scalar(oi_rd *rd, const oi_type *ty, uint32_t tag, const char *key,
                                 uint64_t off, tbx_value **out, tbx_error *err) {
    tbx_file *f = rd->f;
    uint8_t b[8] = {0};
    tbx_status st = tbx_cur_bytes(&rd->dc, b, ty->size, "metadata.value", err);
    if (st != TBX_OK) return st;
    tbx_value *v = NULL;
    if (ty->vtype == TBX_V_NULL) {
        /* F8 and packed scalars: a 0-d NDARRAY of the element dtype (keeps the type) */
        st = oi_check_elems(f, tag, b, 1, 1, true, off, "metadata.value", key, err);
        if (st != TBX_OK) return st;
        v = oi_new_ndarray(f, ty->dtype, NULL, 0, 1, 1);
        if (v) v->v.nd.data[0] = b[0];
    } else {
        v = tbx_val_new(&f->al, ty->vtype);
        if (!v) return tbx_err_nomem(err, "metadata value");
        switch (tag) {
        case OI_I8: v->v.i = (int8_t)b[0]; break;
        case OI_I16: v->v.i = (int16_t)tbx_ld16(b); break;
        case OI_I32: v->v.i = (int32_t)tbx_ld32(b); break;
        case OI_I64: v->v.i = (int64_t)tbx_ld64(b); break;
        case OI_U8: v->v.u = b[0]; break;
        case OI_U16: v->v.u = tbx_ld16(b); break;
        case OI_U32: v->v.u = tbx_ld32(b); break;
        case OI_U64: v->v.u = tbx_ld64(b); break;
        case OI_F16: v->v.f = tbx_f16_to_f32(tbx_ld16(b)); break;
        case OI_BF16: v->v.f = tbx_bf16_to_f32(tbx_ld16(b)); break;
        case OI_F32: v->v.f = tbx_ldf32(b); break;
        case OI_F64: v->v.f = tbx_ldf64(b); break;
        case OI_BOOL:
            v->v.u = b[0] != 0;
            if (b[0] > 1) {
                st = tbx_file_problem(f, err, TBX_E_FORMAT, off, "metadata.value",
                                      "metadata \"%s\": bool byte is 0x%02x, expected 0 or 1", key,
                                      (unsigned)b[0]);
                if (st != TBX_OK) { tbx_val_free(v); return st; }
            }
            break;
        default: break;
        }
    }
    if (!v) return tbx_err_nomem(err, "metadata value");
    *out = v;
    return TBX_OK;
}

static tbx_status oi_meta_string(oi_rd *rd, const char *key, uint64_t off, uint64_t nbytes,
                                 tbx_value **out, tbx_error *err) {
    char what[160], q[96];
    tbx_quote_bytes(q, sizeof q, key, strlen(key), 64);
    snprintf(what, sizeof what, "metadata \"%s\": string value", q);
    if (nbytes < 8)
        return tbx_err(err, TBX_E_FORMAT, rd->at_nbytes, "metadata.value_nbytes",
                       "%s: value_nbytes is %" PRIu64 ", a STRING payload has at least 8", what,
                       nbytes);
    /* peek the length to check the declared size before reading the bytes */
    uint32_t n = 0;
    tbx_status st = tbx_cur_u32(&rd->dc, &n, "metadata.value", err);
    if (st != TBX_OK) return st;
    uint64_t want = 0;
    tbx_align_up_u64(4 + (uint64_t)n, OI_ALIGN, &want);
    if (n != 0 && n <= rd->f->limits.max_string_len && want != nbytes)
        return tbx_err(err, TBX_E_FORMAT, rd->at_nbytes, "metadata.value_nbytes",
                       "%s: value_nbytes is %" PRIu64 ", but a string of %" PRIu32 " bytes "
                       "takes %" PRIu64 " (4 + length, padded to 8)", what, nbytes, n, want);
    rd->dc.pos = off;
    size_t len = 0;
    st = oi_read_str(rd, &rd->dc, "metadata.value", what, &len, NULL, err);
    if (st != TBX_OK) return st;
    tbx_value *v = tbx_val_string(&rd->f->al, TBX_V_STRING, rd->scratch, len);
    if (!v) return tbx_err_nomem(err, "metadata string");
    *out = v;
    return TBX_OK;
}

static tbx_status oi_meta_bitset(oi_rd *rd, const char *key, uint64_t off, uint64_t nbytes,
                                 tbx_value **out, tbx_error *err) {
    tbx_file *f = rd->f;
    if (nbytes < 8)
        return tbx_err(err, TBX_E_FORMAT, rd->at_nbytes, "metadata.value_nbytes",
                       "metadata \"%s\": value_nbytes is %" PRIu64 ", a BITSET payload has at "
                       "least 8", key, nbytes);
    uint32_t bits = 0, count = 0;
    tbx_status st = tbx_cur_u32(&rd->dc, &bits, "metadata.value.bit_count", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->dc, &count, "metadata.value.byte_count", err);
    if (st != TBX_OK) return st;
    uint64_t want_count = (uint64_t)bits / 8 + (bits % 8 != 0), want = 0;
    if (count != want_count)
        return tbx_err(err, TBX_E_FORMAT, off + 4, "metadata.value.byte_count",
                       "metadata \"%s\": bitset byte_count is %" PRIu32 ", expected ceil(%" PRIu32
                       " / 8) = %" PRIu64, key, count, bits, want_count);
    if (bits > f->limits.max_array_len)
        return tbx_err(err, TBX_E_LIMIT, off, "metadata.value.bit_count",
                       "metadata \"%s\": bitset of %" PRIu32 " bits exceeds max_array_len = %"
                       PRIu64, key, bits, f->limits.max_array_len);
    tbx_align_up_u64(8 + (uint64_t)count, OI_ALIGN, &want);
    if (want != nbytes)
        return tbx_err(err, TBX_E_FORMAT, rd->at_nbytes, "metadata.value_nbytes",
                       "metadata \"%s\": value_nbytes is %" PRIu64 ", a bitset of %" PRIu32
                       " bytes takes %" PRIu64 " (8 + bytes, padded to 8)", key, nbytes, count,
                       want);
    tbx_value *v = tbx_val_new(&f->al, TBX_V_BITSET);
    if (!v) return tbx_err_nomem(err, "metadata bitset");
    v->v.nd.data = tbx_malloc(&f->al, count);
    if (!v->v.nd.data) { tbx_val_free(v); return tbx_err_nomem(err, "metadata bitset"); }
    v->v.nd.nbytes = count;
    v->v.nd.count = bits;
    st = tbx_cur_bytes(&rd->dc, v->v.nd.data, count, "metadata.value", err);
    if (st == TBX_OK && bits % 8 && (v->v.nd.data[count - 1] >> (bits % 8)))
        st = tbx_file_problem(f, err, TBX_E_PADDING, off + 8 + count - 1, "metadata.value",
                              "metadata \"%s\": bits past bit_count %" PRIu32 " in the last byte "
                              "are set (0x%02x), expected 0", key, bits,
                              (unsigned)v->v.nd.data[count - 1]);
    if (st == TBX_OK)
        st = oi_read_pad(rd, &rd->dc, nbytes - 8 - count, "metadata.value", "a bitset payload",
                         err);
    if (st != TBX_OK) { tbx_val_free(v); return st; }
    *out = v;
    return TBX_OK;
}

static tbx_status oi_meta_ndarray(oi_rd *rd, const char *key, uint64_t off, uint64_t nbytes,
                                  tbx_value **out, tbx_error *err) {
    tbx_file *f = rd->f;
    if (nbytes < 8)
        return tbx_err(err, TBX_E_FORMAT, rd->at_nbytes, "metadata.value_nbytes",
                       "metadata \"%s\": value_nbytes is %" PRIu64 ", an NDARRAY payload has at "
                       "least 8", key, nbytes);
    uint32_t et = 0, ndim = 0;
    tbx_status st = tbx_cur_u32(&rd->dc, &et, "metadata.value.element_type", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->dc, &ndim, "metadata.value.ndim", err);
    if (st != TBX_OK) return st;
    if (!oi_element_tag(et))
        return tbx_err(err, TBX_E_FORMAT, off, "metadata.value.element_type",
                       "metadata \"%s\": ndarray element type %" PRIu32 " is not a numeric or "
                       "bool type (1-12, 16-25)", key, et);
    if (ndim > f->limits.max_ndim)
        return tbx_err(err, TBX_E_LIMIT, off + 4, "metadata.value.ndim",
                       "metadata \"%s\": ndarray has %" PRIu32 " dimensions, more than max_ndim "
                       "= %" PRIu32, key, ndim, f->limits.max_ndim);
    uint64_t head = 8 + 8 * (uint64_t)ndim;
    if (head > nbytes)
        return tbx_err(err, TBX_E_FORMAT, off + 4, "metadata.value.ndim",
                       "metadata \"%s\": %" PRIu32 " dimensions need %" PRIu64 " bytes, the "
                       "payload has %" PRIu64, key, ndim, head, nbytes);
    if (rd->dims_cap < ndim) {
        uint64_t *d = tbx_realloc(&f->al, rd->dims, rd->dims_cap * sizeof *d,
                                  (size_t)ndim * sizeof *d);
        if (!d) return tbx_err_nomem(err, "ndarray shape");
        rd->dims = d;
        rd->dims_cap = ndim;
    }
    uint64_t count = 1;
    bool zero = false;
    for (uint32_t d = 0; d < ndim; d++) {
        st = tbx_cur_u64(&rd->dc, &rd->dims[d], "metadata.value.dims", err);
        if (st != TBX_OK) return st;
        if (rd->dims[d] == 0) zero = true;
    }
    for (uint32_t d = 0; d < ndim && !zero; d++)
        if (!tbx_mul_u64(count, rd->dims[d], &count))
            return tbx_err(err, TBX_E_OVERFLOW, off + 8 + 8 * (uint64_t)d, "metadata.value.dims",
                           "metadata \"%s\": ndarray element count overflows 64 bits at "
                           "dimension %" PRIu32, key, d);
    if (zero) count = 0;
    if (count > f->limits.max_array_len)
        return tbx_err(err, TBX_E_LIMIT, off + 8, "metadata.value.dims",
                       "metadata \"%s\": ndarray of %" PRIu64 " elements exceeds max_array_len = %"
                       PRIu64, key, count, f->limits.max_array_len);
    const oi_type *ty = oi_type_of(et);
    uint64_t data = 0, want;
    if (tbx_dtype_core_nbytes(ty->dtype, count, &data) != TBX_OK || !tbx_add_u64(head, data, &want) ||
        !tbx_align_up_u64(want, OI_ALIGN, &want))
        return tbx_err(err, TBX_E_OVERFLOW, off, "metadata.value",
                       "metadata \"%s\": ndarray size overflows 64 bits", key);
    if (want != nbytes)
        return tbx_err(err, TBX_E_FORMAT, rd->at_nbytes, "metadata.value_nbytes",
                       "metadata \"%s\": value_nbytes is %" PRIu64 ", an ndarray of %" PRIu64
                       " %s elements in %" PRIu32 " dimensions takes %" PRIu64
                       " (8 + 8 x ndim + data, padded to 8)", key, nbytes, count, ty->name, ndim,
                       want);
    tbx_value *v = oi_new_ndarray(f, ty->dtype, rd->dims, ndim, count, (size_t)data);
    if (!v) return tbx_err_nomem(err, "metadata ndarray");
    uint64_t data_at = off + head;
    st = tbx_cur_bytes(&rd->dc, v->v.nd.data, (size_t)data, "metadata.value", err);
    if (st == TBX_OK && !oi_host_le() && ty->size > 1 && !ty->bits)
        oi_copy_le(v->v.nd.data, v->v.nd.data, count, ty->size); /* in place: per element */
    if (st == TBX_OK)
        st = oi_check_elems(f, et, v->v.nd.data, data, count, true, data_at, "metadata.value",
                            key, err);
    if (st == TBX_OK)
        st = oi_read_pad(rd, &rd->dc, nbytes - head - data, "metadata.value",
                         "an ndarray payload", err);
    if (st != TBX_OK) { tbx_val_free(v); return st; }
    *out = v;
    return TBX_OK;
}

/* One metadata table entry at the table cursor. */
static tbx_status oi_meta_entry(oi_rd *rd, uint64_t index, tbx_error *err) {
    tbx_file *f = rd->f;
    size_t klen = 0;
    uint64_t at = 0;
    tbx_status st = oi_read_str(rd, &rd->tc, "metadata.key", "metadata key", &klen, &at, err);
    if (st != TBX_OK) return st;
    char *key = tbx_memdup0(&f->al, rd->scratch, klen);
    if (!key) return tbx_err_nomem(err, "metadata key");
    uint32_t type = 0, flags = 0;
    uint64_t nbytes = 0, off = 0;
    uint64_t at_type = rd->tc.pos;
    st = tbx_cur_u32(&rd->tc, &type, "metadata.value_type", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->tc, &flags, "metadata.value_flags", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &nbytes, "metadata.value_nbytes", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &off, "metadata.value_offset", err);
    tbx_value *v = NULL;
    const oi_type *ty = oi_type_of(type);
    char owner[128];
    snprintf(owner, sizeof owner, "metadata \"%s\"", key);
    if (st != TBX_OK) goto done;
    if (!ty) {
        st = tbx_err(err, TBX_E_FORMAT, at_type, "metadata.value_type",
                     "metadata \"%s\": value type %" PRIu32 " is not a type of the format "
                     "(1-25)", key, type);
        goto done;
    }
    if (flags != 0) {
        st = tbx_file_problem(f, err, TBX_E_FORMAT, at_type + 4, "metadata.value_flags",
                              "metadata \"%s\": value_flags is 0x%08" PRIx32 ", expected 0", key,
                              flags);
        if (st != TBX_OK) goto done;
    }
    st = oi_check_payload(rd, off, nbytes, at_type + 16, "metadata.value_offset", owner, err);
    if (st != TBX_OK) goto done;
    if (ty->size && nbytes != ty->size) {
        st = tbx_err(err, TBX_E_FORMAT, at_type + 8, "metadata.value_nbytes",
                     "metadata \"%s\": value_nbytes is %" PRIu64 ", a %s value has exactly %u "
                     "byte%s", key, nbytes, ty->name, (unsigned)ty->size, ty->size == 1 ? "" : "s");
        goto done;
    }
    /* Several entries may name one payload: each gets a copy of its own (its value node, the
     * decoded bytes, at most the payload's), charged before it is made, at the offset field */
    st = tbx_file_charge_pending(f, sizeof(tbx_value) + 2 * TBX_HEAP_OVERHEAD + nbytes + 1,
                                 at_type + 16, "metadata.value_offset", err);
    if (st != TBX_OK) goto done;
    oi_region(&rd->dc, off, off + nbytes);
    rd->at_nbytes = at_type + 8; /* a payload of the wrong size is reported at value_nbytes */
    switch (type) {
    case OI_STRING: st = oi_meta_string(rd, key, off, nbytes, &v, err); break;
    case OI_BITSET: st = oi_meta_bitset(rd, key, off, nbytes, &v, err); break;
    case OI_NDARRAY: st = oi_meta_ndarray(rd, key, off, nbytes, &v, err); break;
    default: st = oi_meta_scalar(rd, ty, type, key, off, &v, err); break;
    }
    if (st != TBX_OK) goto done;
    st = oi_add_span(rd, off, nbytes, OI_SPAN_META, index, err);
    if (st != TBX_OK) goto done;
    st = tbx_file_add_meta(f, key, klen, v, at, err);
    v = NULL; /* owned (or freed) by add_meta */
done:
    tbx_val_free(v);
    tbx_free(&f->al, key, klen + 1);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Tensors                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Reads a v2 quantization payload for tensor `name` of `shape`. */
static tbx_status oi_quant_payload(oi_rd *rd, const char *name, tbx_dtype dtype,
                                   const uint64_t *shape, uint32_t ndim, uint64_t off,
                                   uint64_t nbytes, uint64_t at_field, oi_tquant **out,
                                   const tbx_quant_info **qout, tbx_error *err) {
    tbx_file *f = rd->f;
    char owner[128];
    snprintf(owner, sizeof owner, "tensor \"%s\" quant", name);
    tbx_status st = oi_check_payload(rd, off, nbytes, at_field + 8, "tensor.quant_offset", owner,
                                     err);
    if (st != TBX_OK) return st;
    if (nbytes < OI_QUANT_HEADER)
        return tbx_err(err, TBX_E_FORMAT, at_field, "tensor.quant_nbytes",
                       "tensor \"%s\": quant_nbytes is %" PRIu64 ", a quant payload has at least "
                       "%u", name, nbytes, OI_QUANT_HEADER);
    oi_region(&rd->dc, off, off + nbytes);
    uint32_t reserved = 0;
    tbx_oinf_quant q;
    memset(&q, 0, sizeof q);
    st = tbx_cur_u32(&rd->dc, &q.scheme, "tensor.quant.scheme", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->dc, &q.scale_mode, "tensor.quant.scale_mode", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->dc, &q.zp_mode, "tensor.quant.zp_mode", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->dc, &reserved, "tensor.quant.reserved", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->dc, &q.scale_axis, "tensor.quant.scale_axis", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->dc, &q.scale_count, "tensor.quant.scale_count", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->dc, &q.zp_axis, "tensor.quant.zp_axis", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->dc, &q.zp_count, "tensor.quant.zp_count", err);
    if (st != TBX_OK) return st;
    if (reserved != 0) {
        st = tbx_file_problem(f, err, TBX_E_FORMAT, off + 12, "tensor.quant.reserved",
                              "tensor \"%s\": quant reserved field is 0x%08" PRIx32 ", expected 0",
                              name, reserved);
        if (st != TBX_OK) return st;
    }
    st = oi_quant_check(&q, shape, ndim, name, off, err);
    if (st != TBX_OK) return st;
    uint64_t want = 0;
    if (q.scale_count > f->limits.max_array_len || q.zp_count > f->limits.max_array_len)
        return tbx_err(err, TBX_E_LIMIT, off + 24, "tensor.quant.scale_count",
                       "tensor \"%s\": %" PRIu64 " scales / %" PRIu64 " zero points exceed "
                       "max_array_len = %" PRIu64, name, q.scale_count, q.zp_count,
                       f->limits.max_array_len);
    if (!oi_quant_nbytes(q.scale_count, q.zp_count, &want) || want != nbytes)
        return tbx_err(err, TBX_E_FORMAT, at_field, "tensor.quant_nbytes",
                       "tensor \"%s\": quant_nbytes is %" PRIu64 ", %" PRIu64 " scales and %"
                       PRIu64 " zero points take %" PRIu64 " (48 + 4 x counts, padded to 8)",
                       name, nbytes, q.scale_count, q.zp_count, want);
    /* the common description (owned by the handle even when this tensor fails later) and its
     * scales and zero points: several tensors may name one payload, each gets a copy */
    st = tbx_file_charge_quant(f, at_field + 8, "tensor.quant_offset", err);
    if (st == TBX_OK)
        st = tbx_file_charge(f, 4 * (q.scale_count + q.zp_count) + 2 * TBX_HEAP_OVERHEAD +
                                    sizeof(oi_tquant) + TBX_HEAP_OVERHEAD,
                             at_field + 8, "tensor.quant_offset", err);
    if (st != TBX_OK) return st;
    tbx_quant_info *qi = tbx_file_quant_new(f);
    if (!qi) return tbx_err_nomem(err, "quant parameters");
    const tbx_dtype_info *di = tbx_dtype_core_get(dtype);
    qi->method = TBX_QUANT_LINEAR;
    qi->code_dtype = dtype;
    qi->bits = di ? di->bits : 0;
    qi->code_signed = di && (di->flags & TBX_DTF_INT) && (di->flags & TBX_DTF_SIGNED);
    qi->scale.scope = q.scale_mode == TBX_OINF_MODE_PER_CHANNEL ? TBX_QSCOPE_CHANNEL
                                                                : TBX_QSCOPE_TENSOR;
    qi->scale.dtype = TBX_DT_F32;
    qi->scale.axis = (uint32_t)q.scale_axis; /* < ndim <= max_ndim (checked) */
    qi->scale.count = q.scale_count;
    qi->zero.scope = q.zp_mode == TBX_OINF_MODE_PER_CHANNEL  ? TBX_QSCOPE_CHANNEL
                     : q.zp_mode == TBX_OINF_MODE_PER_TENSOR ? TBX_QSCOPE_TENSOR
                                                             : TBX_QSCOPE_NONE;
    qi->zero.dtype = q.zp_count ? TBX_DT_I32 : TBX_DT_INVALID;
    qi->zero.axis = (uint32_t)q.zp_axis;
    qi->zero.count = q.zp_count;
    float *scales = tbx_file_quant_values(f, qi, &qi->scale, (size_t)q.scale_count * sizeof(float));
    int32_t *zps = q.zp_count ? tbx_file_quant_values(f, qi, &qi->zero,
                                                      (size_t)q.zp_count * sizeof(int32_t))
                              : NULL;
    if (!scales || (q.zp_count && !zps) ||
        tbx_quant_put_u32(f, qi, "scheme", q.scheme) != TBX_OK ||
        tbx_quant_put_u32(f, qi, "scale_mode", q.scale_mode) != TBX_OK ||
        tbx_quant_put_u32(f, qi, "zp_mode", q.zp_mode) != TBX_OK)
        return tbx_err_nomem(err, "quant parameters");
    uint8_t b[4];
    for (uint64_t i = 0; st == TBX_OK && i < q.scale_count; i++) {
        st = tbx_cur_bytes(&rd->dc, b, 4, "tensor.quant.scales", err);
        scales[i] = tbx_ldf32(b);
    }
    for (uint64_t i = 0; st == TBX_OK && i < q.zp_count; i++) {
        st = tbx_cur_bytes(&rd->dc, b, 4, "tensor.quant.zero_points", err);
        zps[i] = (int32_t)tbx_ld32(b);
    }
    if (st == TBX_OK)
        st = oi_read_pad(rd, &rd->dc, off + nbytes - rd->dc.pos, "tensor.quant",
                         "a quant payload", err);
    if (st != TBX_OK) return st;
    oi_tquant *tq = tbx_calloc(&f->al, 1, sizeof *tq);
    if (!tq) return tbx_err_nomem(err, "quant parameters");
    tq->offset = off;
    tq->nbytes = nbytes;
    *out = tq;
    *qout = qi;
    return TBX_OK;
}

static tbx_status oi_tensor_entry(oi_rd *rd, tbx_error *err) {
    tbx_file *f = rd->f;
    const oi_state *s = rd->s;
    size_t nlen = 0;
    uint64_t at = 0;
    tbx_status st = oi_read_str(rd, &rd->tc, "tensor.name", "tensor name", &nlen, &at, err);
    if (st != TBX_OK) return st;
    char name[96];
    tbx_quote_bytes(name, sizeof name, rd->scratch, nlen, 64);
    uint32_t tag = 0, ndim = 0, flags = 0;
    uint64_t at_dt = rd->tc.pos;
    st = tbx_cur_u32(&rd->tc, &tag, "tensor.dtype", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->tc, &ndim, "tensor.ndim", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->tc, &flags, "tensor.flags", err);
    if (st != TBX_OK) return st;
    if (!oi_tensor_tag(tag))
        return tbx_err(err, TBX_E_FORMAT, at_dt, "tensor.dtype",
                       "tensor \"%s\": dtype %" PRIu32 " is not a tensor type (1-13, 16-25)", name,
                       tag);
    if (ndim > f->limits.max_ndim)
        return tbx_err(err, TBX_E_LIMIT, at_dt + 4, "tensor.ndim",
                       "tensor \"%s\": %" PRIu32 " dimensions exceed max_ndim = %" PRIu32, name,
                       ndim, f->limits.max_ndim);
    uint64_t rest = 8 * (uint64_t)ndim + 16 + (s->version >= 2 ? 16 : 0);
    st = tbx_cur_need(&rd->tc, rest, "tensor.dims", err);
    if (st != TBX_OK) return st;
    if (rd->dims_cap < ndim) {
        uint64_t *d = tbx_realloc(&f->al, rd->dims, rd->dims_cap * sizeof *d,
                                  (size_t)ndim * sizeof *d);
        if (!d) return tbx_err_nomem(err, "tensor shape");
        rd->dims = d;
        rd->dims_cap = ndim;
    }
    for (uint32_t d = 0; d < ndim && st == TBX_OK; d++)
        st = tbx_cur_u64(&rd->tc, &rd->dims[d], "tensor.dims", err);
    uint64_t nbytes = 0, off = 0, qnbytes = 0, qoff = 0, at_nb = rd->tc.pos;
    if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &nbytes, "tensor.data_nbytes", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &off, "tensor.data_offset", err);
    if (st == TBX_OK && s->version >= 2) {
        st = tbx_cur_u64(&rd->tc, &qnbytes, "tensor.quant_nbytes", err);
        if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &qoff, "tensor.quant_offset", err);
    }
    if (st != TBX_OK) return st;
    uint32_t known = s->version >= 2 ? (OI_HAS_DATA | OI_HAS_QUANT) : OI_HAS_DATA;
    if (flags & ~known) {
        st = tbx_file_problem(f, err, TBX_E_FORMAT, at_dt + 8, "tensor.flags",
                              "tensor \"%s\": flags 0x%08" PRIx32 " set unknown bits 0x%08" PRIx32
                              " (version %" PRIu32 " defines 0x%x)", name, flags, flags & ~known,
                              s->version, known);
        if (st != TBX_OK) return st;
    }
    bool has_data = (flags & OI_HAS_DATA) != 0;
    bool has_quant = s->version >= 2 && (flags & OI_HAS_QUANT) != 0;
    const oi_type *ty = oi_type_of(tag);
    if (!has_data && (nbytes != 0 || off != 0)) /* at the field that is not 0 */
        return tbx_err(err, TBX_E_FORMAT, nbytes != 0 ? at_nb : at_nb + 8,
                       nbytes != 0 ? "tensor.data_nbytes" : "tensor.data_offset",
                       "tensor \"%s\" has no data (HAS_DATA = 0) but data_nbytes = %" PRIu64
                       " and data_offset = %" PRIu64 ", expected 0 and 0", name, nbytes, off);
    if (has_data) {
        uint64_t want = 0;
        tbx_status ns = tbx_dtype_core_nbytes_shape(ty->dtype, rd->dims, ndim, &want);
        if (ns != TBX_OK)
            return tbx_err(err, TBX_E_OVERFLOW, at_dt + 12, "tensor.dims",
                           "tensor \"%s\": byte size of its %s elements overflows 64 bits", name,
                           ty->name);
        if (want > f->limits.max_tensor_bytes)
            return tbx_err(err, TBX_E_LIMIT, at_nb, "tensor.data_nbytes",
                           "tensor \"%s\": %" PRIu64 " bytes of data exceed max_tensor_bytes = %"
                           PRIu64, name, want, f->limits.max_tensor_bytes);
        if (nbytes != want)
            return tbx_err(err, TBX_E_FORMAT, at_nb, "tensor.data_nbytes",
                           "tensor \"%s\": data_nbytes is %" PRIu64 ", expected %" PRIu64
                           " for its shape and dtype %s", name, nbytes, want, ty->name);
        char owner[128];
        snprintf(owner, sizeof owner, "tensor \"%s\"", name);
        st = oi_check_payload(rd, off, nbytes, at_nb + 8, "tensor.data_offset", owner, err);
        if (st != TBX_OK) return st;
    }
    oi_tquant *tq = NULL;
    const tbx_quant_info *qi = NULL;
    if (s->version >= 2 && !has_quant && (qnbytes != 0 || qoff != 0))
        return tbx_err(err, TBX_E_FORMAT, at_nb + 16, "tensor.quant_nbytes",
                       "tensor \"%s\" has no quant parameters (HAS_QUANT = 0) but quant_nbytes = %"
                       PRIu64 " and quant_offset = %" PRIu64 ", expected 0 and 0", name, qnbytes,
                       qoff);
    if (has_quant && !has_data)
        return tbx_err(err, TBX_E_FORMAT, at_dt + 8, "tensor.flags",
                       "tensor \"%s\" has quant parameters (HAS_QUANT) but no data (HAS_DATA = 0)",
                       name);
    if (has_quant) {
        st = oi_quant_payload(rd, name, ty->dtype, rd->dims, ndim, qoff, qnbytes, at_nb + 16,
                              &tq, &qi, err);
        if (st != TBX_OK) return st;
    }
    tbx_tensor *t = NULL;
    st = tbx_file_add_tensor(f, rd->scratch, nlen, ty->dtype, rd->dims, ndim, has_data ? 1 : 0,
                             at, &t, err);
    if (st != TBX_OK) { oi_free_quant(&f->al, tq); return st; }
    t->drv = tq;
    t->quant = qi;
    uint64_t index = f->ntensors - 1;
    if (has_data) {
        tbx_comp_set_raw(t, ty->dtype, off, nbytes);
        st = oi_add_span(rd, off, nbytes, OI_SPAN_DATA, index, err);
    }
    if (st == TBX_OK && tq) st = oi_add_span(rd, qoff, qnbytes, OI_SPAN_QUANT, index, err);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Open                                                                                        */
/* ------------------------------------------------------------------------------------------ */
bool oi_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    (void)file_size;
    return len >= 5 && memcmp(head, "OINF\0", 5) == 0;
}

/* Checks the five header offsets: ordered, aligned, inside the file. */
static tbx_status oi_check_offsets(const oi_state *s, tbx_error *err) {
    static const char *const fields[] = {"header.offset_sizevars", "header.offset_metadata",
                                         "header.offset_tensors", "header.offset_data"};
    const uint64_t off[5] = {s->off_sv, s->off_md, s->off_tn, s->off_data, s->file_size};
    if (s->off_sv < OI_HEADER_SIZE)
        return tbx_err(err, TBX_E_RANGE, 29, fields[0],
                       "offset_sizevars is %" PRIu64 ", inside the %u-byte header", s->off_sv,
                       OI_HEADER_SIZE);
    for (int i = 0; i < 4; i++) {
        uint64_t at = 29 + 8 * (uint64_t)i;
        if (off[i] % OI_ALIGN)
            return tbx_err(err, TBX_E_RANGE, at, fields[i],
                           "%s is %" PRIu64 ", not a multiple of 8", fields[i] + 7, off[i]);
        if (off[i + 1] < off[i])
            return tbx_err(err, TBX_E_RANGE, at + 8, i < 3 ? fields[i + 1] : "header.file_size",
                           "%s is %" PRIu64 ", before %s at %" PRIu64 " (offsets must not "
                           "decrease)", i < 3 ? fields[i + 1] + 7 : "file_size", off[i + 1],
                           fields[i] + 7, off[i]);
    }
    return TBX_OK;
}

/* The 72-byte header: magic, version, counts (n[0..2]: size variables, metadata, tensors),
 * offsets; non-zero flags, reserved field and padding are problems. */
static tbx_status oi_read_header(oi_rd *rd, uint64_t size, uint32_t n[3], tbx_error *err) {
    tbx_file *f = rd->f;
    oi_state *s = rd->s;
    uint8_t magic[5], pad[3];
    uint32_t hflags = 0, reserved = 0;
    tbx_status st = tbx_cur_bytes(&rd->tc, magic, 5, "header.magic", err);
    if (st != TBX_OK) return st;
    if (memcmp(magic, "OINF\0", 5) != 0) {
        char q[40];
        tbx_quote_bytes(q, sizeof q, (const char *)magic, 5, 5);
        return tbx_err(err, TBX_E_BAD_MAGIC, 0, "header.magic",
                       "magic is \"%s\", expected \"OINF\\x00\"", q);
    }
    st = tbx_cur_u32(&rd->tc, &s->version, "header.version", err);
    if (st != TBX_OK) return st;
    if (s->version < 1 || s->version > OI_MAX_VERSION)
        return tbx_err(err, TBX_E_BAD_VERSION, 5, "header.version",
                       "OINF version %" PRIu32 " is not supported (1 or 2)", s->version);
    if (size < OI_HEADER_SIZE)
        return tbx_err(err, TBX_E_TRUNCATED, 0, "header",
                       "header: needs %u bytes, file has %" PRIu64, OI_HEADER_SIZE, size);
    st = tbx_cur_u32(&rd->tc, &hflags, "header.flags", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->tc, &n[0], "header.n_sizevars", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->tc, &n[1], "header.n_metadata", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->tc, &n[2], "header.n_tensors", err);
    if (st == TBX_OK) st = tbx_cur_u32(&rd->tc, &reserved, "header.reserved", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &s->off_sv, "header.offset_sizevars", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &s->off_md, "header.offset_metadata", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &s->off_tn, "header.offset_tensors", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &s->off_data, "header.offset_data", err);
    if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &s->file_size, "header.file_size", err);
    if (st == TBX_OK) st = tbx_cur_bytes(&rd->tc, pad, 3, "header.padding", err);
    if (st != TBX_OK) return st;
    f->version = s->version;
    if (hflags != 0 &&
        (st = tbx_file_problem(f, err, TBX_E_FORMAT, 9, "header.flags",
                               "header flags are 0x%08" PRIx32 ", expected 0", hflags)) != TBX_OK)
        return st;
    if (reserved != 0 &&
        (st = tbx_file_problem(f, err, TBX_E_FORMAT, 25, "header.reserved",
                               "header reserved field is 0x%08" PRIx32 ", expected 0", reserved)) !=
            TBX_OK)
        return st;
    for (unsigned i = 0; i < 3; i++)
        if (pad[i] != 0 &&
            (st = tbx_file_problem(f, err, TBX_E_PADDING, OI_HEADER_PACKED + i, "header.padding",
                                   "header padding byte %u is 0x%02x, expected 0", i,
                                   (unsigned)pad[i])) != TBX_OK)
            return st;
    return TBX_OK;
}

/* The header against the file: file_size, the offsets, the tables' size against
 * max_header_bytes, the declared counts against the limits and the smallest entry sizes. */
static tbx_status oi_check_header(const oi_rd *rd, uint64_t size, const uint32_t n[3],
                                  tbx_error *err) {
    tbx_file *f = rd->f;
    const oi_state *s = rd->s;
    if (s->file_size > size)
        return tbx_err(err, TBX_E_TRUNCATED, 61, "header.file_size",
                       "file_size is %" PRIu64 ", but the file has %" PRIu64 " bytes (truncated)",
                       s->file_size, size);
    if (s->file_size < size)
        return tbx_err(err, TBX_E_FORMAT, 61, "header.file_size",
                       "file_size is %" PRIu64 ", but the file has %" PRIu64 " bytes (trailing "
                       "bytes)", s->file_size, size);
    tbx_status st = oi_check_offsets(s, err);
    if (st != TBX_OK) return st;
    if (s->off_data - OI_HEADER_SIZE > f->limits.max_header_bytes)
        return tbx_err(err, TBX_E_LIMIT, 53, "header.offset_data",
                       "the tables take %" PRIu64 " bytes, more than max_header_bytes = %" PRIu64,
                       s->off_data - OI_HEADER_SIZE, f->limits.max_header_bytes);
    /* declared counts against the limits and the smallest entry sizes */
    struct { uint32_t n; uint64_t limit, min, start, end; const char *field, *what; } tabs[3] = {
        {n[0], f->limits.max_metadata_entries, 16, s->off_sv, s->off_md, "header.n_sizevars",
         "size variables"},
        {n[1], f->limits.max_metadata_entries, 32, s->off_md, s->off_tn, "header.n_metadata",
         "metadata entries"},
        {n[2], f->limits.max_tensors, s->version >= 2 ? 52 : 36, s->off_tn, s->off_data,
         "header.n_tensors", "tensors"},
    };
    for (int i = 0; i < 3; i++) {
        uint64_t at = 13 + 4 * (uint64_t)i;
        if (tabs[i].n > tabs[i].limit)
            return tbx_err(err, TBX_E_LIMIT, at, tabs[i].field,
                           "%" PRIu32 " %s exceed the limit of %" PRIu64, tabs[i].n, tabs[i].what,
                           tabs[i].limit);
        if ((uint64_t)tabs[i].n * tabs[i].min > tabs[i].end - tabs[i].start)
            return tbx_err(err, TBX_E_TRUNCATED, at, tabs[i].field,
                           "%" PRIu32 " %s need at least %" PRIu64 " bytes, their table [%" PRIu64
                           ", %" PRIu64 ") has %" PRIu64, tabs[i].n, tabs[i].what,
                           (uint64_t)tabs[i].n * tabs[i].min, tabs[i].start, tabs[i].end,
                           tabs[i].end - tabs[i].start);
    }
    return TBX_OK;
}

/* The size variable table: nsv names (unique) and values. */
static tbx_status oi_read_sizevars(oi_rd *rd, uint32_t nsv, tbx_error *err) {
    tbx_file *f = rd->f;
    oi_state *s = rd->s;
    tbx_status st;
    oi_region(&rd->tc, s->off_sv, s->off_md);
    for (uint32_t i = 0; i < nsv; i++) {
        size_t len = 0;
        uint64_t at = 0, value = 0;
        st = oi_read_str(rd, &rd->tc, "sizevars.name", "size variable name", &len, &at, err);
        if (st == TBX_OK) st = tbx_cur_u64(&rd->tc, &value, "sizevars.value", err);
        if (st == TBX_OK) st = tbx_file_add_sizevar(f, rd->scratch, len, value, at, err);
        if (st != TBX_OK) return st;
    }
    s->sv_end = rd->tc.pos;
    return TBX_OK;
}

tbx_status oi_open(tbx_file *f, tbx_error *err) {
    uint64_t size = f->src.size;
    oi_state *s = tbx_calloc(&f->al, 1, sizeof *s);
    if (!s) return tbx_err_nomem(err, "OINF state");
    s->tag = OI_STATE_TAG;
    f->drv_state = s; /* freed by oi_close, also when the open fails */

    oi_rd rd;
    memset(&rd, 0, sizeof rd);
    rd.f = f;
    rd.s = s;
    uint32_t n[3] = {0, 0, 0}; /* size variables, metadata entries, tensors */
    tbx_status st = tbx_cursor_init(&rd.tc, &f->src, &f->al, 0, size, err);
    if (st == TBX_OK) st = tbx_cursor_init(&rd.dc, &f->src, &f->al, 0, size, err);
    if (st == TBX_OK) st = oi_read_header(&rd, size, n, err);
    if (st == TBX_OK) st = oi_check_header(&rd, size, n, err);
    if (st == TBX_OK) st = oi_read_sizevars(&rd, n[0], err);
    if (st != TBX_OK) goto done;

    /* metadata */
    oi_region(&rd.tc, s->off_md, s->off_tn);
    for (uint32_t i = 0; i < n[1]; i++) {
        st = oi_meta_entry(&rd, i, err);
        if (st != TBX_OK) goto done;
    }
    s->md_end = rd.tc.pos;

    /* tensors */
    oi_region(&rd.tc, s->off_tn, s->off_data);
    for (uint32_t i = 0; i < n[2]; i++) {
        st = oi_tensor_entry(&rd, err);
        if (st != TBX_OK) goto done;
    }
    s->tn_end = rd.tc.pos;

done:
    tbx_cursor_free(&rd.tc);
    tbx_cursor_free(&rd.dc);
    tbx_free(&f->al, rd.scratch, rd.scratch_cap);
    tbx_free(&f->al, rd.dims, rd.dims_cap * sizeof *rd.dims);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Validate: zero gaps between tables and payloads, tensor value rules                         */
/* ------------------------------------------------------------------------------------------ */
static tbx_status oi_check_zero(tbx_file *f, uint8_t *buf, uint64_t from, uint64_t to,
                                const char *where, tbx_error *err) {
    while (from < to) {
        size_t n = (size_t)(to - from < OI_CHUNK ? to - from : OI_CHUNK);
        tbx_status st = tbx_source_read(&f->src, from, buf, n, "padding", err);
        if (st != TBX_OK) return st;
        for (size_t i = 0; i < n; i++)
            if (buf[i] != 0)
                return tbx_file_problem(f, err, TBX_E_PADDING, from + i, "padding",
                                        "byte %s is 0x%02x, expected 0 (padding [%" PRIu64 ", %"
                                        PRIu64 "))", where, (unsigned)buf[i], from, to);
        from += n;
    }
    return TBX_OK;
}

static int oi_span_cmp(const void *a, const void *b) {
    const oi_span *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return 0;
}

static void oi_span_name(const tbx_file *f, const oi_span *sp, char *buf, size_t cap) {
    char q[80];
    if (sp->kind == OI_SPAN_META) {
        const tbx_meta_entry *e = sp->index < f->nmeta ? &f->meta[sp->index] : NULL;
        tbx_quote_bytes(q, sizeof q, e ? e->key : "?", e ? e->key_len : 1, 48);
        snprintf(buf, cap, "after the value of metadata \"%s\"", q);
    } else {
        const tbx_tensor *t = sp->index < f->ntensors ? &f->tensors[sp->index] : NULL;
        tbx_quote_bytes(q, sizeof q, t ? t->name : "?", t ? t->name_len : 1, 48);
        snprintf(buf, cap, "after the %s of tensor \"%s\"",
                 sp->kind == OI_SPAN_DATA ? "data" : "quant parameters", q);
    }
}

/* Value rules of one tensor's data: bool bytes, t2 codes, unused bits of packed types. */
static tbx_status oi_check_tensor(tbx_file *f, uint8_t *buf, const tbx_tensor *t, tbx_error *err) {
    uint32_t tag = oi_tag_of_dtype(t->dtype);
    const oi_type *ty = oi_type_of(tag);
    if (!ty || t->ncomp == 0 || (tag != OI_BOOL && !ty->bits)) return TBX_OK;
    const tbx_component *c = &t->comp[0];
    /* chunks of whole bytes; for packed types a byte boundary is an element boundary only every
     * lcm(8, bits) bits, which 8 bits always are for 1-, 2- and 4-bit elements */
    uint64_t per_byte = ty->bits ? 8u / ty->bits : 1u;
    char owner[128], q[96];
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    snprintf(owner, sizeof owner, "tensor \"%s\"", q);
    for (uint64_t pos = 0; pos < c->nbytes;) {
        size_t n = (size_t)(c->nbytes - pos < OI_CHUNK ? c->nbytes - pos : OI_CHUNK);
        tbx_status st = tbx_source_read(&f->src, c->offset + pos, buf, n, "tensor.data", err);
        if (st != TBX_OK) return st;
        bool last = pos + n == c->nbytes;
        uint64_t first = pos * per_byte;
        uint64_t nel = last ? t->nelems - first : (uint64_t)n * per_byte;
        st = oi_check_elems(f, tag, buf, n, nel, last, c->offset + pos, "tensor.data", owner, err);
        if (st != TBX_OK) return st;
        pos += n;
    }
    return TBX_OK;
}

tbx_status oi_validate(tbx_file *f, tbx_error *err) {
    oi_state *s = f->drv_state;
    if (!s) return TBX_OK;
    uint8_t *buf = tbx_malloc(&f->al, OI_CHUNK);
    if (!buf) return tbx_err_nomem(err, "OINF validate buffer");
    tbx_status st = oi_check_zero(f, buf, OI_HEADER_SIZE, s->off_sv, "after the header", err);
    if (st == TBX_OK)
        st = oi_check_zero(f, buf, s->sv_end, s->off_md, "after the size variables", err);
    if (st == TBX_OK)
        st = oi_check_zero(f, buf, s->md_end, s->off_tn, "after the metadata table", err);
    if (st == TBX_OK)
        st = oi_check_zero(f, buf, s->tn_end, s->off_data, "after the tensor table", err);
    /* a file without payloads has no span array at all: qsort must not see NULL */
    if (st == TBX_OK && s->nspans > 1) qsort(s->spans, s->nspans, sizeof *s->spans, oi_span_cmp);
    uint64_t pos = s->off_data;
    const oi_span *prev = NULL;
    for (size_t i = 0; st == TBX_OK && i < s->nspans; i++) {
        const oi_span *sp = &s->spans[i];
        if (sp->off > pos) {
            char where[200];
            if (prev) oi_span_name(f, prev, where, sizeof where);
            else snprintf(where, sizeof where, "between the data section start and the first "
                                               "payload");
            st = oi_check_zero(f, buf, pos, sp->off, where, err);
        }
        if (sp->off + sp->len > pos) { pos = sp->off + sp->len; prev = sp; }
    }
    if (st == TBX_OK && pos < s->file_size) {
        char where[200];
        if (prev) oi_span_name(f, prev, where, sizeof where);
        else snprintf(where, sizeof where, "in the empty data section");
        st = oi_check_zero(f, buf, pos, s->file_size, where, err);
    }
    for (size_t i = 0; st == TBX_OK && i < f->ntensors; i++)
        st = oi_check_tensor(f, buf, &f->tensors[i], err);
    tbx_free(&f->al, buf, OI_CHUNK);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* oinf.h accessors (reading)                                                                  */
/* ------------------------------------------------------------------------------------------ */
uint64_t tbx_oinf_sizevar_count(const tbx_file *f) {
    return oi_state_of(f) ? tbx_sizevar_count(f) : 0;
}

tbx_status tbx_oinf_sizevar_get(const tbx_file *f, uint64_t i, const char **name,
                                size_t *name_len, uint64_t *value) {
    if (!oi_state_of(f)) return TBX_E_INVALID_ARG;
    return tbx_sizevar_get(f, i, name, name_len, value);
}

/* A thin view of the common description (tbx_tensor_quant_get) in OINF's own terms. */
tbx_status tbx_oinf_tensor_quant(const tbx_file *f, uint64_t i, tbx_oinf_quant *q) {
    if (!oi_state_of(f) || i >= f->ntensors || !q) return TBX_E_INVALID_ARG;
    tbx_quant_info qi;
    qi.struct_size = sizeof qi;
    tbx_status st = tbx_tensor_quant_get(f, i, &qi);
    if (st != TBX_OK) return st;
    static const uint32_t mode_of[] = {
        [TBX_QSCOPE_NONE] = TBX_OINF_MODE_NONE, [TBX_QSCOPE_BLOCK] = TBX_OINF_MODE_NONE,
        [TBX_QSCOPE_TENSOR] = TBX_OINF_MODE_PER_TENSOR,
        [TBX_QSCOPE_CHANNEL] = TBX_OINF_MODE_PER_CHANNEL, [TBX_QSCOPE_GROUP] = TBX_OINF_MODE_NONE};
    memset(q, 0, sizeof *q);
    /* symmetric <=> no zero points (oi_quant_check enforces it for every file read) */
    q->scheme = qi.zero.scope == TBX_QSCOPE_NONE ? TBX_OINF_SCHEME_SYMMETRIC
                                                 : TBX_OINF_SCHEME_ASYMMETRIC;
    q->scale_mode = mode_of[qi.scale.scope];
    q->zp_mode = mode_of[qi.zero.scope];
    q->scale_axis = qi.scale.axis;
    q->scale_count = qi.scale.count;
    q->zp_axis = qi.zero.axis;
    q->zp_count = qi.zero.count;
    q->scales = qi.scale.values;
    q->zero_points = qi.zero.values;
    return TBX_OK;
}
