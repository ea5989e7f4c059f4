/*
 * gguf.c - the GGUF reader (the container of ggml / llama.cpp; PyPI `gguf`): probe, open of one
 * file or of a split set, big-endian tensor reads, validation. The other files of the driver are
 * listed in gguf_int.h.
 *
 * A GGUF file is a fixed header, a list of typed key/value pairs, a list of tensor infos, zero
 * padding up to the data alignment, and the tensor data. Every integer is little-endian, or
 * big-endian in "big-endian GGUF" files (same magic, every field and the tensor data
 * byte-swapped; recognised by a version whose low 16 bits read as zero). Version 1 stored the
 * counts, string/array lengths and dimensions as u32; versions 2 and 3 use u64.
 *
 *   offset 0     4          8                 16 (v1: 12)     24 (v1: 16)
 *          +-----+----------+-----------------+---------------+------------------------------+
 *          |GGUF | u32 ver  | u64 n_tensors   | u64 n_kv      | n_kv x { string key,         |
 *          |     | (1,2,3)  | (v1: u32)       | (v1: u32)     |   u32 type, value }          |
 *          +-----+----------+-----------------+---------------+------------------------------+
 *          | n_tensors x { string name, u32 n_dims, u64 ne[n_dims] (v1: u32; ne[0] fastest), |
 *          |               u32 ggml_type, u64 offset (relative to the data start) }          |
 *          +---------------------------------------------------------------------------------+
 *          | zero padding up to the alignment (general.alignment, u32, default 32)          |
 *          +------------------------------------------------ data start --------------------+
 *          | tensor data, each tensor at data start + offset (a multiple of the alignment)   |
 *          +---------------------------------------------------------------------------------+
 *   string = u64 length (v1: u32) + bytes (no NUL terminator; may contain NUL)
 *   value  = u8 i8 u16 i16 u32 i32 f32 bool(u8 0/1) string | array | u64 i64 f64 (types 0..12)
 *   array  = u32 element type + u64 count (v1: u32) + count untagged values (arrays may nest)
 *
 * Reading is strict and checks every declared count and length against the bytes left and the
 * limits before allocating. Tensor shapes are reported row-major (ne reversed), each tensor has
 * one raw component "data" at its absolute offset. Recoverable problems (a bool that is not 0/1,
 * a general.alignment of the wrong type, a misaligned or overlapping tensor, non-zero padding in
 * validate) go through tbx_file_problem. Big-endian files are served through a second driver
 * table whose read_component (gguf_read_be) swaps tensor elements back to little-endian;
 * little-endian files keep zero-copy access. The layout found (gguf_state: where each metadata
 * entry and tensor info is) serves validation here, ggml's loader rules (gguf_lint.c) and the
 * file tools' in-place edit (tbx_gguf_kv_span_, gguf_edit.h).
 *
 * A split set (llama.cpp's gguf-split) is opened from its first file, by path:
 *
 *   {stem}-00001-of-{N:05}.gguf   split.no = 0, split.count = N, split.tensors.count = T; its
 *                                 metadata is the handle's; the first tensors
 *   {stem}-0000K-of-{N:05}.gguf   split.no = K - 1, split.count = N, split.tensors.count = T;
 *                                 the next tensors (T in all)
 *
 * Shards 2..N are opened through the handle's provider and parsed by the same code (their
 * split.* keys checked, their metadata not added); each tensor's component names its shard as
 * its source.
 *
 * Writing (gguf_write.c) produces GGUF v3 little-endian, byte-identical to gguf-py's GGUFWriter
 * for the same content. docs/formats/gguf.md lists every rule, decision and error.
 */
#include "gguf_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* What the blocks of a ggml type carry (tbx_quant_info of GGUF tensors): nominal code bits,
 * elements per scale, elements per super-block (0: the block stands alone), the dtype of the
 * scales and whether blocks also carry a minimum / offset (zero). */
typedef struct gguf_quant_facts {
    uint8_t bits;
    uint16_t block, super;
    tbx_dtype scale;
    bool min;
} gguf_quant_facts;

static bool gguf_quant_facts_of(tbx_dtype dt, gguf_quant_facts *q) {
#define QF(b, bl, su, sc, mn) do { *q = (gguf_quant_facts){b, bl, su, TBX_DT_##sc, mn}; return true; } while (0)
    switch (dt) {
    case TBX_DT_Q4_0: QF(4, 32, 0, F16, false);
    case TBX_DT_Q4_1: QF(4, 32, 0, F16, true);
    case TBX_DT_Q5_0: QF(5, 32, 0, F16, false);
    case TBX_DT_Q5_1: QF(5, 32, 0, F16, true);
    case TBX_DT_Q8_0: QF(8, 32, 0, F16, false);
    case TBX_DT_Q8_1: QF(8, 32, 0, F16, false);
    case TBX_DT_Q2_K: QF(2, 16, 256, F16, true);
    case TBX_DT_Q3_K: QF(3, 16, 256, F16, false);
    case TBX_DT_Q4_K: QF(4, 32, 256, F16, true);
    case TBX_DT_Q5_K: QF(5, 32, 256, F16, true);
    case TBX_DT_Q6_K: QF(6, 16, 256, F16, false);
    case TBX_DT_Q8_K: QF(8, 256, 0, F32, false);
    case TBX_DT_IQ2_XXS: QF(2, 32, 256, F16, false);
    case TBX_DT_IQ2_XS: QF(2, 16, 256, F16, false);
    case TBX_DT_IQ3_XXS: QF(3, 32, 256, F16, false);
    case TBX_DT_IQ1_S: QF(1, 32, 256, F16, false);
    case TBX_DT_IQ4_NL: QF(4, 32, 0, F16, false);
    case TBX_DT_IQ3_S: QF(3, 32, 256, F16, false);
    case TBX_DT_IQ2_S: QF(2, 16, 256, F16, false);
    case TBX_DT_IQ4_XS: QF(4, 32, 256, F16, false);
    case TBX_DT_IQ1_M: QF(1, 16, 256, F16, false);
    case TBX_DT_TQ1_0: QF(2, 256, 0, F16, false);
    case TBX_DT_TQ2_0: QF(2, 256, 0, F16, false);
    case TBX_DT_MXFP4: QF(4, 32, 0, F8_E8M0, false);
    case TBX_DT_NVFP4: QF(4, 16, 64, F8_E4M3, false);
    case TBX_DT_Q1_0: QF(1, 128, 0, F16, false);
    case TBX_DT_Q2_0: QF(2, 64, 0, F16, false);
    default: return false;
    }
#undef QF
}

/* Attaches the quantization description of ggml type `type` to t (one per type and file). */
static tbx_status gguf_describe_quant(tbx_file *f, gguf_state *s, tbx_tensor *t, uint32_t type,
                                   tbx_error *err) {
    gguf_quant_facts qf;
    if (!gguf_quant_facts_of(t->dtype, &qf)) return TBX_OK; /* a plain type */
    if (!s->quant_of[type]) {
        tbx_quant_info *q = tbx_file_quant_new(f);
        if (!q) return tbx_err_nomem(err, "quantization description");
        const tbx_dtype_info *di = tbx_dtype_core_get(t->dtype);
        q->method = TBX_QUANT_GGML;
        q->code_dtype = t->dtype;
        q->bits = qf.bits;
        q->code_signed = 0;
        q->block_size = qf.block;
        q->super_block_size = qf.super;
        q->scale.scope = TBX_QSCOPE_BLOCK;
        q->scale.dtype = qf.scale;
        if (qf.min) {
            q->zero.scope = TBX_QSCOPE_BLOCK;
            q->zero.dtype = qf.scale;
        }
        if (tbx_quant_put_u32(f, q, "ggml_type", type) != TBX_OK ||
            tbx_quant_put_u32(f, q, "block_bytes", di ? di->block_bytes : 0) != TBX_OK)
            return tbx_err_nomem(err, "quantization parameters");
        s->quant_of[type] = q;
    }
    t->quant = s->quant_of[type];
    return TBX_OK;
}

static void gguf_state_init(gguf_state *s, uint32_t src) {
    memset(s, 0, sizeof *s);
    s->tag = G_STATE_TAG;
    s->align_type = -1;
    s->alignment = G_DEFAULT_ALIGNMENT;
    s->src = src;
}

static void gguf_state_free_parts(tbx_file *f, gguf_state *s) {
    tbx_free(&f->al, s->ti, s->cap_ti * sizeof *s->ti);
    tbx_free(&f->al, s->kv_off, s->cap_kv * sizeof *s->kv_off);
}

void gguf_close(tbx_file *f) {
    gguf_state *s = f->drv_state;
    if (!s) return;
    for (size_t k = 0; k < s->nshards; k++) gguf_state_free_parts(f, &s->shards[k]);
    tbx_free(&f->al, s->shards, s->nshards * sizeof *s->shards);
    gguf_state_free_parts(f, s);
    tbx_free(&f->al, s, sizeof *s);
    f->drv_state = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Probe                                                                                       */
/* ------------------------------------------------------------------------------------------ */
bool gguf_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    (void)file_size;
    return len >= 4 && memcmp(head, "GGUF", 4) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                     */
/* ------------------------------------------------------------------------------------------ */
typedef struct gguf_reader {
    tbx_file *f;
    gguf_state *s;
    tbx_cursor c;
    bool v1;
    uint32_t max_nest;
    char *scratch; size_t scratch_cap; /* key / name bytes */
} gguf_reader;

/* Path of a metadata value for messages: "general.name", "tokens"[12][3]. Formatted only when
 * an error is reported; `fld` (metadata "key", shortened) is shared by the whole value. */
typedef struct gguf_key_path {
    const struct gguf_key_path *up;
    const char *key;
    size_t key_len;
    uint64_t idx;
    const char *fld;
} gguf_key_path;

static void path_fmt(char *dst, size_t cap, const gguf_key_path *p) {
    if (!p->up) {
        char q[80];
        tbx_quote_bytes(q, sizeof q, p->key, p->key_len, 48);
        snprintf(dst, cap, "\"%s\"", q);
        return;
    }
    path_fmt(dst, cap, p->up);
    size_t l = strlen(dst);
    if (l + 1 < cap) snprintf(dst + l, cap - l, "[%" PRIu64 "]", p->idx);
}

/* A string or array length: u32 in v1, u64 since v2. */
static tbx_status rd_len(gguf_reader *r, uint64_t *out, const char *field, tbx_error *err) {
    if (r->v1) {
        uint32_t v;
        tbx_status st = tbx_cur_u32(&r->c, &v, field, err);
        if (st == TBX_OK) *out = v;
        return st;
    }
    return tbx_cur_u64(&r->c, out, field, err);
}

/* `need` more bytes of header must exist (TBX_E_TRUNCATED; `overflow`: the need itself
 * overflowed) and end within max_header_bytes (TBX_E_LIMIT). On failure the message starts with
 * the description formatted from fmt; `at` is where the item starts. */
static tbx_status rd_room(gguf_reader *r, uint64_t need, bool overflow, uint64_t at, const char *field,
                          tbx_error *err, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static tbx_status rd_room(gguf_reader *r, uint64_t need, bool overflow, uint64_t at, const char *field,
                          tbx_error *err, const char *fmt, ...) {
    uint64_t rem = tbx_cursor_remaining(&r->c);
    bool trunc = overflow || need > rem;
    if (!trunc && r->c.pos + need <= r->f->limits.max_header_bytes) return TBX_OK;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (trunc)
        return tbx_err(err, TBX_E_TRUNCATED, at, field,
                       "%s needs %s%" PRIu64 " bytes, only %" PRIu64 " remain in the file",
                       what, overflow ? "more than " : "", overflow ? UINT64_MAX : need, rem);
    return tbx_err(err, TBX_E_LIMIT, at, field,
                   "%s ends at byte %" PRIu64 ", past max_header_bytes = %" PRIu64, what,
                   r->c.pos + need, r->f->limits.max_header_bytes);
}

/* Reads a string's length and bytes into r->scratch (NUL-terminated). */
static tbx_status rd_str_scratch(gguf_reader *r, size_t *len, const char *field, const char *what,
                                 tbx_error *err) {
    uint64_t at = r->c.pos, n;
    tbx_status st = rd_len(r, &n, field, err);
    if (st != TBX_OK) return st;
    st = rd_room(r, n, false, at, field, err, "%s of %" PRIu64 " bytes", what, n);
    if (st != TBX_OK) return st;
    if (n > r->f->limits.max_string_len)
        return tbx_err(err, TBX_E_LIMIT, at, field,
                       "%s of %" PRIu64 " bytes exceeds max_string_len = %" PRIu64, what, n,
                       r->f->limits.max_string_len);
    if (n + 1 > r->scratch_cap) {
        size_t cap = (size_t)n + 1;
        char *p = tbx_realloc(&r->f->al, r->scratch, r->scratch_cap, cap);
        if (!p) return tbx_err_nomem(err, "GGUF string");
        r->scratch = p;
        r->scratch_cap = cap;
    }
    st = tbx_cur_bytes(&r->c, r->scratch, (size_t)n, field, err);
    if (st != TBX_OK) return st;
    r->scratch[n] = '\0';
    *len = (size_t)n;
    return TBX_OK;
}

/* Swaps `n` elements of `es` bytes in place. */
static void swap_elems(uint8_t *p, size_t n, size_t es) {
    if (es < 2) return;
    for (size_t i = 0; i < n; i++, p += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

static tbx_status rd_value(gguf_reader *r, uint32_t gt, uint32_t level, const gguf_key_path *path,
                           tbx_value **out, tbx_error *err);

/* Reads an array value (its element type, count and elements). `level`: nesting of this array
 * (1 for a top-level array). */
static tbx_status rd_array(gguf_reader *r, uint32_t level, const gguf_key_path *path, tbx_value **out,
                           tbx_error *err) {
    tbx_file *f = r->f;
    const char *fld = path->fld;
    char p[128];
    uint64_t at = r->c.pos, n;
    uint32_t et;
    tbx_status st = tbx_cur_u32(&r->c, &et, fld, err);
    if (st != TBX_OK) return st;
    if (et >= GV_COUNT) {
        path_fmt(p, sizeof p, path);
        return tbx_err(err, TBX_E_FORMAT, at, fld,
                       "metadata %s: array element type %" PRIu32 " is not a GGUF value type "
                       "(0..12)", p, et);
    }
    if (level > r->max_nest) {
        path_fmt(p, sizeof p, path);
        return tbx_err(err, TBX_E_LIMIT, at, fld,
                       "metadata %s: arrays nested %" PRIu32 " deep exceed max_depth = %" PRIu32,
                       p, level, r->max_nest);
    }
    st = rd_len(r, &n, fld, err);
    if (st != TBX_OK) return st;
    size_t es = gguf_value_size(et);
    uint64_t lenw = r->v1 ? 4 : 8;
    uint64_t min = es ? es : et == GV_STRING ? lenw : 4 + lenw;
    uint64_t need = 0;
    bool ovf = !tbx_mul_u64(n, min, &need);
    if (ovf || need > tbx_cursor_remaining(&r->c) ||
        r->c.pos + need > f->limits.max_header_bytes) {
        path_fmt(p, sizeof p, path);
        return rd_room(r, need, ovf, at, fld, err, "metadata %s: array of %" PRIu64 " %s elements",
                       p, n, gguf_value_name(et));
    }
    if (n > f->limits.max_array_len) {
        path_fmt(p, sizeof p, path);
        return tbx_err(err, TBX_E_LIMIT, at, fld,
                       "metadata %s: array of %" PRIu64 " %s elements exceeds max_array_len = "
                       "%" PRIu64, p, n, gguf_value_name(et), f->limits.max_array_len);
    }

    /* Every array becomes a value, and an empty one costs ~170 bytes from 12 in the file (an
     * array of a million empty arrays): charged to the budget before it is made, its strings as
     * they are added (tbx_file_add_meta then charges the value's real footprint) */
    const uint64_t node = sizeof(tbx_value) + 2 * TBX_HEAP_OVERHEAD;
    st = tbx_file_charge_pending(f, node + (es ? (n ? n : 1) * es
                                               : et == GV_STRING ? (n + 1) * 8
                                                                 : n * sizeof(tbx_value *)),
                                 at, fld, err);
    if (st != TBX_OK) return st;
    if (es) {
        tbx_value *v = tbx_val_packed_array(&f->al, gguf_value_tbx[et], (size_t)n);
        if (!v) return tbx_err_nomem(err, "GGUF array");
        uint8_t *d = v->v.a.packed;
        uint64_t data_at = r->c.pos;
        st = tbx_cur_bytes(&r->c, d, (size_t)(n * es), fld, err);
        if (st != TBX_OK) { tbx_val_free(v); return st; }
        if (r->s->be != G_HOST_BE) swap_elems(d, (size_t)n, es);
        if (et == GV_BOOL) {
            /* one problem per array: the first bad element and how many there are */
            size_t first = SIZE_MAX, nbad = 0;
            unsigned val = 0;
            for (size_t i = 0; i < (size_t)n; i++) {
                if (d[i] <= 1) continue;
                if (!nbad++) { first = i; val = d[i]; }
                d[i] = 1;
            }
            if (nbad) {
                path_fmt(p, sizeof p, path);
                st = tbx_file_problem(f, err, TBX_E_FORMAT, data_at + first, fld,
                                      "metadata %s[%zu]: bool must be 0 or 1, got %u (%zu such "
                                      "element%s)", p, first, val, nbad, nbad == 1 ? "" : "s");
                if (st != TBX_OK) { tbx_val_free(v); return st; }
            }
        }
        *out = v;
        return TBX_OK;
    }

    gguf_key_path sub = { path, NULL, 0, 0, fld };
    if (et == GV_STRING) {
        /* compact: one offsets array and one blob (a vocabulary of millions of strings must not
         * cost a heap value each) */
        tbx_value *v = tbx_val_str_array(&f->al, (size_t)n, tbx_cursor_remaining(&r->c));
        if (!v) return tbx_err_nomem(err, "GGUF array");
        for (uint64_t i = 0; i < n; i++) {
            uint64_t sat = r->c.pos, len;
            sub.idx = i;
            st = rd_len(r, &len, fld, err);
            if (st == TBX_OK && (len > tbx_cursor_remaining(&r->c) ||
                                 r->c.pos + len > f->limits.max_header_bytes)) {
                path_fmt(p, sizeof p, &sub);
                st = rd_room(r, len, false, sat, fld, err,
                             "metadata %s: string of %" PRIu64 " bytes", p, len);
            } else if (st == TBX_OK && len > f->limits.max_string_len) {
                path_fmt(p, sizeof p, &sub);
                st = tbx_err(err, TBX_E_LIMIT, sat, fld,
                             "metadata %s: string of %" PRIu64 " bytes exceeds max_string_len = "
                             "%" PRIu64, p, len, f->limits.max_string_len);
            }
            if (st == TBX_OK) st = tbx_file_charge_pending(f, len + 1, sat, fld, err);
            if (st == TBX_OK) {
                char *dst = tbx_val_str_array_add(v, (size_t)len);
                st = dst ? tbx_cur_bytes(&r->c, dst, (size_t)len, fld, err)
                         : tbx_err_nomem(err, "GGUF string");
            }
            if (st != TBX_OK) { tbx_val_free(v); return st; }
        }
        tbx_val_str_array_done(v);
        *out = v;
        return TBX_OK;
    }
    tbx_value *v = tbx_val_new(&f->al, TBX_V_ARRAY);
    if (!v) return tbx_err_nomem(err, "GGUF array");
    v->elem = gguf_value_tbx[et];
    if (n) {
        v->v.a.items = tbx_calloc(&f->al, (size_t)n, sizeof(tbx_value *));
        if (!v->v.a.items) { tbx_val_free(v); return tbx_err_nomem(err, "GGUF array"); }
        v->v.a.cap = (size_t)n;
    }
    for (uint64_t i = 0; i < n; i++) {
        sub.idx = i;
        tbx_value *item = NULL;
        st = rd_value(r, et, level + 1, &sub, &item, err);
        if (st != TBX_OK) { tbx_val_free(v); return st; }
        v->v.a.items[i] = item;
        v->v.a.n = (size_t)i + 1;
    }
    *out = v;
    return TBX_OK;
}

/* Reads one value of GGUF type `gt`. `level`: nesting of the array this value would open. */
static tbx_status rd_value(gguf_reader *r, uint32_t gt, uint32_t level, const gguf_key_path *path,
                           tbx_value **out, tbx_error *err) {
    tbx_file *f = r->f;
    const char *fld = path->fld;
    char p[128];
    uint64_t at = r->c.pos;
    tbx_status st;
    if (gt == GV_ARRAY) return rd_array(r, level, path, out, err);
    if (gt == GV_STRING) {
        uint64_t n;
        st = rd_len(r, &n, fld, err);
        if (st != TBX_OK) return st;
        if (n > tbx_cursor_remaining(&r->c) || r->c.pos + n > f->limits.max_header_bytes) {
            path_fmt(p, sizeof p, path);
            return rd_room(r, n, false, at, fld, err, "metadata %s: string of %" PRIu64 " bytes",
                           p, n);
        }
        if (n > f->limits.max_string_len) {
            path_fmt(p, sizeof p, path);
            return tbx_err(err, TBX_E_LIMIT, at, fld,
                           "metadata %s: string of %" PRIu64 " bytes exceeds max_string_len = "
                           "%" PRIu64, p, n, f->limits.max_string_len);
        }
        tbx_value *v = tbx_val_new(&f->al, TBX_V_STRING);
        if (!v) return tbx_err_nomem(err, "GGUF string");
        char *s = tbx_malloc(&f->al, (size_t)n + 1);
        if (!s) { tbx_val_free(v); return tbx_err_nomem(err, "GGUF string"); }
        v->v.s.p = s;
        v->v.s.n = (size_t)n;
        s[n] = '\0';
        st = tbx_cur_bytes(&r->c, s, (size_t)n, fld, err);
        if (st != TBX_OK) { tbx_val_free(v); return st; }
        *out = v;
        return TBX_OK;
    }
    if (gt >= GV_COUNT) {
        path_fmt(p, sizeof p, path);
        return tbx_err(err, TBX_E_FORMAT, at, fld,
                       "metadata %s: value type %" PRIu32 " is not a GGUF value type (0..12)", p,
                       gt);
    }
    uint8_t b8 = 0;
    uint16_t b16 = 0;
    uint32_t b32 = 0;
    uint64_t b64 = 0;
    switch (gguf_value_size(gt)) {
    case 1: st = tbx_cur_u8(&r->c, &b8, fld, err); break;
    case 2: st = tbx_cur_u16(&r->c, &b16, fld, err); break;
    case 4: st = tbx_cur_u32(&r->c, &b32, fld, err); break;
    default: st = tbx_cur_u64(&r->c, &b64, fld, err); break;
    }
    if (st != TBX_OK) return st;
    tbx_value *v = tbx_val_new(&f->al, gguf_value_tbx[gt]);
    if (!v) return tbx_err_nomem(err, "GGUF value");
    switch (gt) {
    case GV_U8: v->v.u = b8; break;
    case GV_I8: v->v.i = (int8_t)b8; break;
    case GV_U16: v->v.u = b16; break;
    case GV_I16: v->v.i = (int16_t)b16; break;
    case GV_U32: v->v.u = b32; break;
    case GV_I32: v->v.i = (int32_t)b32; break;
    case GV_U64: v->v.u = b64; break;
    case GV_I64: v->v.i = (int64_t)b64; break;
    case GV_F32: { float x; memcpy(&x, &b32, 4); v->v.f = x; break; }
    case GV_F64: { double x; memcpy(&x, &b64, 8); v->v.f = x; break; }
    case GV_BOOL:
        if (b8 > 1) {
            path_fmt(p, sizeof p, path);
            st = tbx_file_problem(f, err, TBX_E_FORMAT, at, fld,
                                  "metadata %s: bool must be 0 or 1, got %u", p, (unsigned)b8);
            if (st != TBX_OK) { tbx_val_free(v); return st; }
        }
        v->v.u = b8 != 0;
        break;
    default: break;
    }
    *out = v;
    return TBX_OK;
}

/* log2 of the product of ne[0..k] for overflow messages. */
static double ne_log2(const uint64_t *ne, uint32_t k) {
    double l = 0;
    for (uint32_t j = 0; j <= k; j++)
        if (ne[j]) l += log2((double)ne[j]);
    return l;
}

/* Reads one tensor info and adds the tensor to the model (offsets are filled in later). */
static tbx_status rd_tensor_info(gguf_reader *r, uint64_t i, uint64_t **ne_buf, size_t *ne_cap,
                                 tbx_error *err) {
    tbx_file *f = r->f;
    gguf_state *s = r->s;
    char fld[64], q[96];
    tbx_status st;
    gguf_tensor_info ti;
    memset(&ti, 0, sizeof ti);
    ti.info_off = r->c.pos;

    snprintf(fld, sizeof fld, "tensor[%" PRIu64 "].name", i);
    size_t name_len = 0;
    st = rd_str_scratch(r, &name_len, fld, "tensor name", err);
    if (st != TBX_OK) return st;
    const char *name = r->scratch;
    tbx_quote_bytes(q, sizeof q, name, name_len, 64);
    if (name_len == 0)
        return tbx_err(err, TBX_E_FORMAT, ti.info_off, fld, "tensor %" PRIu64 " has an empty name",
                       i);
    if (memchr(name, 0, name_len))
        return tbx_err(err, TBX_E_FORMAT, ti.info_off, fld,
                       "tensor name \"%s\" contains a NUL byte", q);

    uint64_t nd_at = r->c.pos;
    snprintf(fld, sizeof fld, "tensor[%" PRIu64 "].n_dims", i);
    st = tbx_cur_u32(&r->c, &ti.n_dims, fld, err);
    if (st != TBX_OK) return st;
    uint64_t w = r->v1 ? 4 : 8, need = 0;
    bool ovf = !tbx_mul_u64(ti.n_dims, w, &need);
    st = rd_room(r, need, ovf, nd_at, fld, err, "tensor \"%s\": n_dims = %" PRIu32 " (dimensions)",
                 q, ti.n_dims);
    if (st != TBX_OK) return st;
    if (ti.n_dims > f->limits.max_ndim)
        return tbx_err(err, TBX_E_LIMIT, nd_at, fld,
                       "tensor \"%s\": n_dims = %" PRIu32 " exceeds max_ndim = %" PRIu32, q,
                       ti.n_dims, f->limits.max_ndim);
    /* ne, then the row-major shape after it (2 * n_dims entries) */
    size_t want = 2 * (size_t)(ti.n_dims ? ti.n_dims : 1);
    if (want > *ne_cap) {
        uint64_t *nb = tbx_realloc(&f->al, *ne_buf, *ne_cap * sizeof(uint64_t),
                                   want * sizeof(uint64_t));
        if (!nb) return tbx_err_nomem(err, "GGUF shape");
        *ne_buf = nb;
        *ne_cap = want;
    }
    uint64_t *ne = *ne_buf, *shape = *ne_buf + ti.n_dims;
    ti.ne_off = r->c.pos;
    snprintf(fld, sizeof fld, "tensor[%" PRIu64 "].ne", i);
    for (uint32_t j = 0; j < ti.n_dims; j++) {
        if (r->v1) {
            uint32_t x;
            st = tbx_cur_u32(&r->c, &x, fld, err);
            ne[j] = x;
        } else {
            st = tbx_cur_u64(&r->c, &ne[j], fld, err);
        }
        if (st != TBX_OK) return st;
        if (ne[j] > ti.max_ne) ti.max_ne = ne[j];
    }
    uint64_t type_at = r->c.pos;
    snprintf(fld, sizeof fld, "tensor[%" PRIu64 "].type", i);
    st = tbx_cur_u32(&r->c, &ti.type, fld, err);
    if (st != TBX_OK) return st;
    ti.off_off = r->c.pos;
    snprintf(fld, sizeof fld, "tensor[%" PRIu64 "].offset", i);
    st = tbx_cur_u64(&r->c, &ti.rel, fld, err);
    if (st != TBX_OK) return st;

    /* type */
    snprintf(fld, sizeof fld, "tensor[%" PRIu64 "].type", i);
    if (ti.type > TBX_GGUF_TYPE_MAX)
        return tbx_err(err, TBX_E_FORMAT, type_at, fld,
                       "tensor \"%s\": ggml type id %" PRIu32 " is unknown (known ids 0..%u)", q,
                       ti.type, TBX_GGUF_TYPE_MAX);
    tbx_dtype dt = gguf_types[ti.type].dt;
    if (dt == TBX_DT_INVALID)
        return tbx_err(err, TBX_E_FORMAT, type_at, fld,
                       "tensor \"%s\": ggml type id %" PRIu32 " (%s) was removed from ggml and "
                       "is not valid in GGUF files", q, ti.type, gguf_types[ti.type].name);
    const tbx_dtype_info *di = tbx_dtype_core_get(dt);
    if (!di)
        return tbx_err(err, TBX_E_UNSUPPORTED, type_at, fld,
                       "tensor \"%s\": ggml type %s has no dtype in this build", q,
                       gguf_types[ti.type].name);

    /* element count: the product of the non-zero ne must fit 64 bits */
    snprintf(fld, sizeof fld, "tensor[%" PRIu64 "].ne", i);
    uint64_t prod = 1;
    bool zero = false;
    for (uint32_t j = 0; j < ti.n_dims; j++) {
        if (ne[j] == 0) { zero = true; continue; }
        if (!tbx_mul_u64(prod, ne[j], &prod)) {
            double l = ne_log2(ne, j);
            return tbx_err(err, TBX_E_OVERFLOW, ti.ne_off + j * w, fld,
                           "tensor \"%s\": ne[%" PRIu32 "] = %" PRIu64 " makes 2^%.*f elements "
                           "(overflow)", q, j, ne[j], l == floor(l) ? 0 : 1, l);
        }
    }
    ti.nelems = zero ? 0 : prod;
    uint64_t ne0 = ti.n_dims ? ne[0] : 1;
    if (ne0 % di->block_size != 0)
        return tbx_err(err, TBX_E_FORMAT, ti.ne_off, fld,
                       "tensor \"%s\": ne[0] = %" PRIu64 " is not a multiple of the %s block "
                       "size %" PRIu32, q, ne0, gguf_types[ti.type].name, di->block_size);
    for (uint32_t j = 0; j < ti.n_dims; j++) shape[j] = ne[ti.n_dims - 1 - j];
    st = tbx_dtype_core_nbytes_shape(dt, shape, ti.n_dims, &ti.size);
    if (st != TBX_OK)
        return tbx_err(err, st == TBX_E_FORMAT ? TBX_E_FORMAT : TBX_E_OVERFLOW, ti.ne_off, fld,
                       "tensor \"%s\": byte size of %" PRIu64 " %s elements %s", q, ti.nelems,
                       gguf_types[ti.type].name,
                       st == TBX_E_FORMAT ? "is not a whole number of blocks"
                                          : "overflows 64 bits");
    if (ti.size > f->limits.max_tensor_bytes)
        return tbx_err(err, TBX_E_LIMIT, ti.ne_off, fld,
                       "tensor \"%s\": %" PRIu64 " bytes exceed max_tensor_bytes = %" PRIu64, q,
                       ti.size, f->limits.max_tensor_bytes);

    tbx_tensor *t = NULL;
    st = tbx_file_add_tensor(f, name, name_len, dt, shape, ti.n_dims, 1, ti.info_off, &t, err);
    if (st != TBX_OK) return st;
    ti.index = f->ntensors - 1;
    /* the offset is placed once the data section is known (gp_place) */
    tbx_comp_set_raw(t, dt, 0, ti.size);
    t->comp[0].src = s->src;
    st = gguf_describe_quant(f, s, t, ti.type, err);
    if (st != TBX_OK) return st;
    /* the layout record kept per tensor (the array may be twice the tensors while it grows) */
    st = tbx_file_charge(f, 2 * sizeof *s->ti, ti.info_off, fld, err);
    if (st != TBX_OK) return st;
    if (!tbx_grow(&f->al, (void **)&s->ti, &s->cap_ti, s->nti + 1, sizeof *s->ti))
        return tbx_err_nomem(err, "GGUF tensor table");
    s->ti[s->nti++] = ti;
    return TBX_OK;
}

static int ti_cmp(const void *a, const void *b) {
    const gguf_tensor_info *x = *(const gguf_tensor_info *const *)a, *y = *(const gguf_tensor_info *const *)b;
    if (x->rel != y->rel) return x->rel < y->rel ? -1 : 1;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* Tensor infos sorted by offset (caller frees n pointers with f->al). */
static const gguf_tensor_info **sorted_infos(tbx_file *f, const gguf_state *s) {
    const gguf_tensor_info **v = tbx_calloc(&f->al, s->nti ? s->nti : 1, sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < s->nti; i++) v[i] = &s->ti[i];
    qsort(v, s->nti, sizeof *v, ti_cmp);
    return v;
}


/* The split.* keys of one file, as read (split.no, split.count, split.tensors.count). */
typedef struct gguf_split_info {
    bool shard;           /* parsing shard 2..N of a set: keys are checked, not added */
    int64_t want[3];      /* shard: the values its split.* keys must have */
    bool has[3];
    int64_t val[3];
} gguf_split_info;

static void gguf_split_note(gguf_split_info *sp, const char *key, size_t klen, const tbx_value *v) {
    for (int k = 0; k < 3; k++) {
        const char *sk = tbx_gguf_split_keys_[k].key;
        if (klen != strlen(sk) || memcmp(key, sk, klen) != 0) continue;
        int64_t x;
        if (v && tbx_value_get_i64(v, &x) == TBX_OK) {
            sp->has[k] = true;
            sp->val[k] = x;
        }
    }
}

/* Magic and version: sets s->be, s->version, r->v1 (and f->version for the first file). */
static tbx_status gp_header(gguf_reader *r, gguf_state *s, const gguf_split_info *sp, uint64_t size,
                            tbx_error *err) {
    tbx_file *f = r->f;
    tbx_status st;
    uint8_t magic[4];
    if (size < 4)
        return tbx_err(err, TBX_E_TRUNCATED, 0, "magic",
                       "file of %" PRIu64 " bytes is too short for the GGUF magic", size);
    st = tbx_cur_bytes(&r->c, magic, 4, "magic", err);
    if (st != TBX_OK) return st;
    if (memcmp(magic, "GGUF", 4) != 0) {
        char qm[32];
        tbx_quote_bytes(qm, sizeof qm, (const char *)magic, 4, 4);
        return tbx_err(err, TBX_E_BAD_MAGIC, 0, "magic",
                       "not a GGUF file: magic \"%s\", expected \"GGUF\"", qm);
    }
    uint32_t ver;
    st = tbx_cur_u32(&r->c, &ver, "version", err);
    if (st != TBX_OK) return st;
    if ((ver & 0xFFFFu) == 0 && ver != 0) {
        s->be = true;
        r->c.big_endian = true;
        ver = __builtin_bswap32(ver);
    }
    if (ver < 1 || ver > 3)
        return tbx_err(err, TBX_E_BAD_VERSION, 4, "version",
                       "GGUF version %" PRIu32 "%s is not supported (1, 2 and 3 are)", ver,
                       s->be ? " (read big-endian)" : "");
    s->version = ver;
    if (!sp->shard) f->version = ver;
    r->v1 = ver == 1;
    return TBX_OK;
}

/* tensor_count and kv_count: read, checked against the bytes left and the limits. */
static tbx_status gp_counts(gguf_reader *r, uint64_t *nt_out, uint64_t *nkv_out, tbx_error *err) {
    tbx_file *f = r->f;
    uint64_t nt, nkv;
    tbx_status st = rd_len(r, &nt, "tensor_count", err);
    if (st == TBX_OK) st = rd_len(r, &nkv, "kv_count", err);
    if (st != TBX_OK) return st;
    uint64_t lw = r->v1 ? 4 : 8;
    uint64_t kv_min = lw + 4 + 1, ti_min = lw + 4 + 4 + 8, a = 0, b = 0, need = 0;
    bool ovf = !tbx_mul_u64(nkv, kv_min, &a) || !tbx_mul_u64(nt, ti_min, &b) ||
               !tbx_add_u64(a, b, &need);
    /* blame kv_count when the metadata entries alone cannot fit, else tensor_count */
    bool kv_alone = !tbx_mul_u64(nkv, kv_min, &a) || a > tbx_cursor_remaining(&r->c);
    st = rd_room(r, need, ovf, kv_alone ? (r->v1 ? 12 : 16) : 8,
                 kv_alone ? "kv_count" : "tensor_count", err,
                 "%" PRIu64 " metadata entries and %" PRIu64 " tensor infos", nkv, nt);
    if (st != TBX_OK) return st;
    if (nt > f->limits.max_tensors)
        return tbx_err(err, TBX_E_LIMIT, 8, "tensor_count",
                       "tensor_count = %" PRIu64 " exceeds max_tensors = %" PRIu64, nt,
                       f->limits.max_tensors);
    if (nkv > f->limits.max_metadata_entries)
        return tbx_err(err, TBX_E_LIMIT, r->v1 ? 12 : 16, "kv_count",
                       "kv_count = %" PRIu64 " exceeds max_metadata_entries = %" PRIu64, nkv,
                       f->limits.max_metadata_entries);
    *nt_out = nt;
    *nkv_out = nkv;
    return TBX_OK;
}

/* Key/value pair i: read, general.alignment and split.* noted, added to f (unless a shard). */
static tbx_status gp_kv(gguf_reader *r, gguf_state *s, gguf_split_info *sp, uint64_t i,
                        tbx_error *err) {
    tbx_file *f = r->f;
    tbx_status st;
    char fld[64];
    uint64_t kv_at = r->c.pos;
    snprintf(fld, sizeof fld, "metadata[%" PRIu64 "].key", i);
    size_t klen = 0;
    st = rd_str_scratch(r, &klen, fld, "metadata key", err);
    if (st != TBX_OK) return st;
    if (klen == 0)
        return tbx_err(err, TBX_E_FORMAT, kv_at, fld, "metadata entry %" PRIu64 " has an empty key",
                       i);
    /* the key is copied out of scratch: nested reads do not touch scratch, but keep it safe */
    char *key = tbx_memdup0(&f->al, r->scratch, klen);
    if (!key) return tbx_err_nomem(err, "GGUF key");
    char vf[64], kq[48];
    tbx_quote_bytes(kq, sizeof kq, key, klen, 32);
    snprintf(vf, sizeof vf, "metadata \"%s\"", kq);
    gguf_key_path root = { NULL, key, klen, 0, vf };
    uint32_t gt;
    uint64_t type_at = r->c.pos;
    tbx_value *v = NULL;
    st = tbx_cur_u32(&r->c, &gt, vf, err);
    if (st == TBX_OK && gt >= GV_COUNT) {
        char q[96];
        tbx_quote_bytes(q, sizeof q, key, klen, 64);
        st = tbx_err(err, TBX_E_FORMAT, type_at, vf,
                     "metadata \"%s\": value type %" PRIu32 " is not a GGUF value type "
                     "(0..12)", q, gt);
    }
    if (st == TBX_OK) st = rd_value(r, gt, 1, &root, &v, err);
    if (st == TBX_OK && r->c.pos > f->limits.max_header_bytes)
        st = tbx_err(err, TBX_E_LIMIT, kv_at, vf,
                     "metadata ends at byte %" PRIu64 ", past max_header_bytes = %" PRIu64,
                     r->c.pos, f->limits.max_header_bytes);
    if (st == TBX_OK && klen == 17 && memcmp(key, "general.alignment", 17) == 0) {
        s->align_type = (int32_t)gt;
        s->align_off = kv_at;
        if (gt != GV_U32) {
            st = tbx_file_problem(f, err, TBX_E_FORMAT, type_at, vf,
                                  "general.alignment must be a u32, got %s (using the "
                                  "default %u)", gguf_value_name(gt), G_DEFAULT_ALIGNMENT);
        } else if (!tbx_is_pow2(v->v.u)) {
            st = tbx_err(err, TBX_E_FORMAT, type_at + 4, vf,
                         "general.alignment = %" PRIu64 " is not a non-zero power of two",
                         v->v.u);
        } else {
            s->alignment = v->v.u;
        }
    }
    if (st == TBX_OK) gguf_split_note(sp, key, klen, v);
    if (st == TBX_OK && !sp->shard) {
        st = tbx_file_add_meta(f, key, klen, v, kv_at, err);
        v = NULL;
    }
    tbx_val_free(v);
    tbx_free(&f->al, key, klen + 1);
    if (st != TBX_OK) return st;
    if (sp->shard) return TBX_OK;
    if (!tbx_grow(&f->al, (void **)&s->kv_off, &s->cap_kv, s->nkv + 1, sizeof *s->kv_off))
        return tbx_err_nomem(err, "GGUF metadata table");
    s->kv_off[s->nkv++] = kv_at;
    return TBX_OK;
}

/* A further shard of a split set: its split.* keys must match before its tensors count. */
static tbx_status gp_check_split(const gguf_split_info *sp, tbx_error *err) {
    for (int j = 0; sp->shard && j < 3; j++) {
        if (sp->has[j] && sp->val[j] == sp->want[j]) continue;
        char got[32] = "missing";
        if (sp->has[j]) snprintf(got, sizeof got, "%" PRId64, sp->val[j]);
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, tbx_gguf_split_keys_[j].key,
                       "%s is %s, expected %" PRId64, tbx_gguf_split_keys_[j].key, got,
                       sp->want[j]);
    }
    return TBX_OK;
}

/* Data start (aligned end of the tensor infos) and each tensor's absolute, in-file placement. */
static tbx_status gp_place(tbx_file *f, gguf_state *s, uint64_t nt, uint64_t size, tbx_error *err) {
    tbx_status st;
    s->data_start = s->infos_end;
    if (nt > 0) {
        uint64_t ds = UINT64_MAX;
        bool ok = tbx_align_up_u64(s->infos_end, s->alignment, &ds);
        if (!ok || ds > size)
            return tbx_err(err, TBX_E_TRUNCATED, s->infos_end, "data",
                           "the data section starts at byte %" PRIu64 " (tensor infos end at "
                           "byte %" PRIu64 ", alignment %" PRIu64 "), past the end of the file "
                           "(%" PRIu64 " bytes)", ds, s->infos_end, s->alignment, size);
        s->data_start = ds;
    }
    for (size_t i = 0; i < s->nti; i++) {
        gguf_tensor_info *ti = &s->ti[i];
        tbx_tensor *t = &f->tensors[ti->index];
        char q[96], fld[64];
        tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
        snprintf(fld, sizeof fld, "tensor[%zu].offset", i);
        uint64_t abs, end;
        if (!tbx_add_u64(s->data_start, ti->rel, &abs) || !tbx_add_u64(abs, ti->size, &end))
            return tbx_err(err, TBX_E_OVERFLOW, ti->off_off, fld,
                           "tensor \"%s\": offset %" PRIu64 " + %" PRIu64 " bytes after the data "
                           "start %" PRIu64 " overflows 64 bits", q, ti->rel, ti->size,
                           s->data_start);
        if (end > size)
            return tbx_err(err, TBX_E_TRUNCATED, ti->off_off, fld,
                           "tensor \"%s\": data [%" PRIu64 ", %" PRIu64 ") (offset %" PRIu64
                           ", %" PRIu64 " bytes) runs past the end of the file (%" PRIu64
                           " bytes)", q, abs, end, ti->rel, ti->size, size);
        if (ti->rel % s->alignment != 0) {
            st = tbx_file_problem(f, err, TBX_E_RANGE, ti->off_off, fld,
                                  "tensor \"%s\": offset %" PRIu64 " is not a multiple of the "
                                  "alignment %" PRIu64, q, ti->rel, s->alignment);
            if (st != TBX_OK) return st;
        }
        t->comp[0].offset = abs;
    }
    return TBX_OK;
}

/* Overlapping tensor data (in offset order): a problem for each. */
static tbx_status gp_overlaps(tbx_file *f, const gguf_state *s, tbx_error *err) {
    tbx_status st = TBX_OK;
    const gguf_tensor_info **order = sorted_infos(f, s);
    if (!order) return tbx_err_nomem(err, "GGUF tensor order");
    const gguf_tensor_info *prev = NULL;
    uint64_t prev_end = 0;
    for (size_t k = 0; k < s->nti; k++) {
        const gguf_tensor_info *ti = order[k];
        if (ti->size == 0) continue;
        if (prev && ti->rel < prev_end) {
            char qa[80], qb[80], fld[64];
            const tbx_tensor *ta = &f->tensors[prev->index], *tb = &f->tensors[ti->index];
            tbx_quote_bytes(qa, sizeof qa, ta->name, ta->name_len, 48);
            tbx_quote_bytes(qb, sizeof qb, tb->name, tb->name_len, 48);
            snprintf(fld, sizeof fld, "tensor[%zu].offset", ti->index);
            st = tbx_file_problem(f, err, TBX_E_RANGE, ti->off_off, fld,
                                  "tensor \"%s\" at offset %" PRIu64 " overlaps tensor \"%s\" "
                                  "[%" PRIu64 ", %" PRIu64 ")", qb, ti->rel, qa, prev->rel,
                                  prev_end);
            if (st != TBX_OK) break;
        }
        if (!prev || ti->rel + ti->size > prev_end) {
            prev = ti;
            prev_end = ti->rel + ti->size;
        }
    }
    tbx_free(&f->al, order, (s->nti ? s->nti : 1) * sizeof *order);
    return st;
}

/* Parses one GGUF file from `src` into f (tensors) and s (layout). With sp->shard the metadata
 * is read and checked but not added to f. */
static tbx_status gguf_parse(tbx_file *f, gguf_state *s, const tbx_source *src, gguf_split_info *sp,
                          tbx_error *err) {
    gguf_reader r;
    memset(&r, 0, sizeof r);
    r.f = f;
    r.s = s;
    r.max_nest = f->limits.max_depth < G_MAX_NEST ? f->limits.max_depth : G_MAX_NEST;
    uint64_t *ne_buf = NULL;
    size_t ne_cap = 0;
    uint64_t size = src->size;
    tbx_status st = tbx_cursor_init(&r.c, src, &f->al, 0, size, err);
    if (st != TBX_OK) return st;

    uint64_t nt = 0, nkv = 0;
    st = gp_header(&r, s, sp, size, err);
    if (st == TBX_OK) st = gp_counts(&r, &nt, &nkv, err);
    for (uint64_t i = 0; st == TBX_OK && i < nkv; i++) st = gp_kv(&r, s, sp, i, err);
    if (st == TBX_OK) {
        s->kvs_end = r.c.pos;
        st = gp_check_split(sp, err);
    }
    for (uint64_t i = 0; st == TBX_OK && i < nt; i++)
        st = rd_tensor_info(&r, i, &ne_buf, &ne_cap, err);
    if (st == TBX_OK) {
        s->infos_end = r.c.pos;
        if (s->infos_end > f->limits.max_header_bytes)
            st = tbx_err(err, TBX_E_LIMIT, 0, "header",
                         "tensor infos end at byte %" PRIu64 ", past max_header_bytes = %" PRIu64,
                         s->infos_end, f->limits.max_header_bytes);
    }
    if (st == TBX_OK) st = gp_place(f, s, nt, size, err);
    if (st == TBX_OK) st = gp_overlaps(f, s, err);

    tbx_free(&f->al, ne_buf, ne_cap * sizeof(uint64_t));
    tbx_free(&f->al, r.scratch, r.scratch_cap);
    tbx_cursor_free(&r.c);
    return st;
}

/* Fills *err from `e` with the message prefixed by "split set: shard K of N 'NAME': ", keeping
 * e's code, field and offset (an offset in that shard). */
static tbx_status shard_err(tbx_error *err, const tbx_error *e, uint32_t k, uint32_t n,
                            const char *name) {
    tbx_status st = tbx_err(err, e->code, TBX_NO_OFFSET, e->field,
                            "split set: shard %" PRIu32 " of %" PRIu32 " '%s': %s", k, n, name,
                            e->message);
    if (err) err->offset = e->offset;
    return st;
}

/* After the first file parsed: when it is shard 1 of a split set opened by a path named
 * "{stem}-00001-of-{N:05}.gguf", opens shards 2..N through the handle's provider (the siblings
 * "{stem}-0000K-of-{N:05}.gguf" of the file the path names, src/io/provider.h), parses each with
 * the same code and adds their tensors (component src = shard index - 1). Otherwise the file
 * stands alone. */
static tbx_status gguf_open_set(tbx_file *f, gguf_state *s, const gguf_split_info *sp, tbx_error *err) {
    const tbx_provider *prov = f->prov;
    if (!prov || !prov->entry || !f->path || (f->flags & TBX_OPEN_SINGLE_FILE_) || !sp->has[0] ||
        !sp->has[1] || sp->val[0] != 0 || sp->val[1] <= 1 || sp->val[1] > TBX_GGUF_SPLIT_MAX)
        return TBX_OK;
    const uint32_t n = (uint32_t)sp->val[1];
    const char *entry = prov->entry;
    size_t len = strlen(entry), stem_len = 0;
    if (tbx_gguf_shard1_count_(entry, len, &stem_len) != n) return TBX_OK;
    if (!sp->has[2] || sp->val[2] < 0)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "split.tensors.count",
                       "split set: shard 1 of %" PRIu32 " '%s' has no valid split.tensors.count",
                       n, f->path);
    const uint64_t total = (uint64_t)sp->val[2];

    f->extra_src = tbx_calloc(&f->al, n - 1, sizeof *f->extra_src);
    s->shards = tbx_calloc(&f->al, n - 1, sizeof *s->shards);
    /* one buffer: the sibling's name in the set, then its name as messages show it (made only
     * for a message) */
    size_t name_cap = len + 16, show_cap = tbx_provider_show(prov, entry, NULL, 0) + 16;
    char *name = tbx_malloc(&f->al, name_cap + show_cap), *shown = name ? name + name_cap : NULL;
    tbx_status st = TBX_OK;
    if (!f->extra_src || !s->shards || !name) {
        /* keep the frees consistent with gguf_close / tbx_close */
        tbx_free(&f->al, f->extra_src, (n - 1) * sizeof *f->extra_src);
        tbx_free(&f->al, s->shards, (n - 1) * sizeof *s->shards);
        f->extra_src = NULL;
        s->shards = NULL;
        tbx_free(&f->al, name, name_cap + show_cap);
        return tbx_err_nomem(err, "GGUF split set");
    }
    /* From here tbx_close / gguf_close own both arrays; unopened entries close as no-ops. */
    s->split_count = n;
    s->nshards = n - 1;
    f->nextra_src = n - 1;
    for (size_t i = 0; i < n - 1; i++) f->extra_src[i].fd = -1;
    /* the shards' names (tbx_file_part_path); a failed allocation only leaves them unnamed */
    f->part_names = tbx_calloc(&f->al, n, sizeof *f->part_names);
    if (f->part_names) f->part_names[0] = tbx_memdup0(&f->al, f->path, strlen(f->path));
    const bool use_mmap = (f->flags & TBX_OPEN_MMAP) != 0;
    for (uint32_t k = 2; k <= n && st == TBX_OK; k++) {
        tbx_error e;
        tbx_gguf_shard_name_(name, name_cap, entry, stem_len, k, n);
        tbx_source *xs = &f->extra_src[k - 2];
        if (f->part_names) f->part_names[k - 1] = tbx_provider_show_dup(prov, name, &f->al);
        st = tbx_provider_open(prov, name, use_mmap, xs, &e);
        if (st == TBX_E_NOMEM) { /* an allocation failure, never a missing shard */
            if (err) *err = e;
            break;
        }
        if (st != TBX_OK) {
            tbx_provider_show(prov, name, shown, show_cap);
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "split",
                         "split set: shard %" PRIu32 " of %" PRIu32 " '%s' cannot be opened: %s",
                         k, n, shown, e.message);
            break;
        }
        gguf_state *ss = &s->shards[k - 2];
        gguf_state_init(ss, k - 1);
        gguf_split_info ssp;
        memset(&ssp, 0, sizeof ssp);
        ssp.shard = true;
        ssp.want[0] = (int64_t)k - 1;
        ssp.want[1] = (int64_t)n;
        ssp.want[2] = (int64_t)total;
        st = gguf_parse(f, ss, xs, &ssp, &e);
        if (st != TBX_OK || ss->be != s->be) tbx_provider_show(prov, name, shown, show_cap);
        if (st != TBX_OK) { st = shard_err(err, &e, k, n, shown); break; }
        if (ss->be != s->be)
            st = tbx_err(err, TBX_E_FORMAT, 4, "version",
                         "split set: shard %" PRIu32 " of %" PRIu32 " '%s' is %s-endian, shard 1 "
                         "is %s-endian", k, n, shown, ss->be ? "big" : "little",
                         s->be ? "big" : "little");
    }
    if (st == TBX_OK && f->ntensors != total)
        st = tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "split.tensors.count",
                     "split set '%s': the %" PRIu32 " shards hold %zu tensors, "
                     "split.tensors.count says %" PRIu64, f->path, n, f->ntensors, total);
    tbx_free(&f->al, name, name_cap + show_cap);
    return st;
}

tbx_status gguf_open(tbx_file *f, tbx_error *err) {
    gguf_state *s = tbx_malloc(&f->al, sizeof *s);
    if (!s) return tbx_err_nomem(err, "GGUF state");
    gguf_state_init(s, 0);
    f->drv_state = s;
    gguf_split_info sp;
    memset(&sp, 0, sizeof sp);
    tbx_status st = gguf_parse(f, s, &f->src, &sp, err);
    if (st == TBX_OK) st = gguf_open_set(f, s, &sp, err);
    if (st == TBX_OK && s->be) f->drv = &gguf_driver_be;
    return st;
}

/* Big-endian files: tensor data back to little-endian. */
tbx_status gguf_read_be(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                            tbx_error *err) {
    const tbx_component *k = &t->comp[c];
    int32_t id = tbx_gguf_dtype_type(t->dtype);
    const gguf_type_info *gt = id >= 0 ? &gguf_types[id] : NULL;
    if (!gt || gt->be == 2)
        return tbx_err(err, TBX_E_UNSUPPORTED, k->offset, t->name,
                       "tensor \"%s\": big-endian %s data cannot be converted to little-endian "
                       "(its block mixes byte and word access)", t->name,
                       gt ? gt->name : gguf_dtype_name(t->dtype));
    if (k->nbytes > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, k->offset, t->name, "too large");
    const tbx_source *src = tbx_file_source(f, k->src);
    if (!src) return tbx_err(err, TBX_E_STATE, k->offset, t->name, "tensor \"%s\": no source", t->name);
    tbx_status st = tbx_source_read(src, k->offset, buf, (size_t)k->nbytes, t->name, err);
    if (st != TBX_OK || gt->be == 0) return st;
    const tbx_dtype_info *di = tbx_dtype_core_get(t->dtype);
    uint8_t *p = buf;
    if (!(di->flags & TBX_DTF_BLOCK)) {
        swap_elems(p, (size_t)(k->nbytes / gt->runs[0].width), gt->runs[0].width);
        return TBX_OK;
    }
    size_t bb = di->block_bytes, nb = (size_t)(k->nbytes / bb);
    for (size_t b = 0; b < nb; b++, p += bb)
        for (int j = 0; j < 2; j++)
            if (gt->runs[j].count)
                swap_elems(p + gt->runs[j].off, gt->runs[j].count, gt->runs[j].width);
    return TBX_OK;
}

/* validate: every padding byte (before the data start and between tensors) must be zero.
 * `shard`: "" for a single file, " in shard K of N" for a split set's files. */
static tbx_status check_zero(tbx_file *f, const gguf_state *s, uint8_t *buf, uint64_t from,
                             uint64_t to, const char *where, const char *shard, tbx_error *err) {
    const tbx_source *src = tbx_file_source(f, s->src);
    while (from < to) {
        size_t n = (size_t)(to - from < G_CHUNK ? to - from : G_CHUNK);
        tbx_status st = tbx_source_read(src, from, buf, n, "padding", err);
        if (st != TBX_OK) return st;
        for (size_t i = 0; i < n; i++) {
            if (buf[i] == 0) continue;
            return tbx_file_problem(f, err, TBX_E_PADDING, from + i, "padding",
                                    "padding byte %s%s is 0x%02x, expected 0 (padding runs "
                                    "[%" PRIu64 ", %" PRIu64 "))", where, shard,
                                    (unsigned)buf[i], from, to);
        }
        from += n;
    }
    return TBX_OK;
}

/* Padding checks of one file (the first, or one shard of a split set). */
/* GGUF caps n_dimensions at 4 ("currently at most 4" in the specification; ggml's
 * GGML_MAX_DIMS, and every ggml runtime refuses the file). tensorbox and gguf-py read more, so
 * this is a validation problem, not an open error (docs/formats/gguf.md). */
#define G_SPEC_MAX_DIMS 4u

static tbx_status check_ndims(tbx_file *f, const gguf_state *s, const char *shard, tbx_error *err) {
    for (size_t i = 0; i < s->nti; i++) {
        const gguf_tensor_info *ti = &s->ti[i];
        if (ti->n_dims <= G_SPEC_MAX_DIMS) continue;
        const tbx_tensor *t = &f->tensors[ti->index];
        char q[96], fld[64];
        tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
        snprintf(fld, sizeof fld, "tensor[%zu].n_dims", i);
        tbx_status st = tbx_file_problem(f, err, TBX_E_LIMIT, ti->ne_off - 4, fld,
                                         "tensor \"%s\"%s: n_dims = %" PRIu32 ", the GGUF "
                                         "specification and ggml allow at most %u", q, shard,
                                         ti->n_dims, G_SPEC_MAX_DIMS);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

static tbx_status validate_file(tbx_file *f, const gguf_state *s, uint8_t *buf, const char *shard,
                                tbx_error *err) {
    tbx_status st0 = check_ndims(f, s, shard, err);
    if (st0 != TBX_OK) return st0;
    const gguf_tensor_info **order = sorted_infos(f, s);
    if (!order) return tbx_err_nomem(err, "GGUF validate buffer");
    tbx_status st = check_zero(f, s, buf, s->infos_end, s->data_start, "before the data start",
                               shard, err);
    uint64_t pos = s->data_start;
    const gguf_tensor_info *prev = NULL;
    for (size_t k = 0; st == TBX_OK && k < s->nti; k++) {
        const gguf_tensor_info *ti = order[k];
        uint64_t a = s->data_start + ti->rel, e = a + ti->size;
        if (ti->size == 0) continue;
        if (a > pos) {
            char where[160], q[80];
            if (prev) {
                const tbx_tensor *t = &f->tensors[prev->index];
                tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 48);
                snprintf(where, sizeof where, "after tensor \"%s\"", q);
            } else {
                snprintf(where, sizeof where, "between the data start and the first tensor");
            }
            st = check_zero(f, s, buf, pos, a, where, shard, err);
        }
        if (e > pos) { pos = e; prev = ti; }
    }
    tbx_free(&f->al, order, (s->nti ? s->nti : 1) * sizeof *order);
    return st;
}

tbx_status gguf_validate(tbx_file *f, tbx_error *err) {
    gguf_state *s = f->drv_state;
    if (!s) return TBX_OK;
    uint8_t *buf = tbx_malloc(&f->al, G_CHUNK);
    if (!buf) return tbx_err_nomem(err, "GGUF validate buffer");
    char shard[64] = "";
    if (s->split_count > 1) snprintf(shard, sizeof shard, " in shard 1 of %" PRIu32, s->split_count);
    tbx_status st = validate_file(f, s, buf, shard, err);
    for (size_t k = 0; st == TBX_OK && k < s->nshards; k++) {
        snprintf(shard, sizeof shard, " in shard %zu of %" PRIu32, k + 2, s->split_count);
        st = validate_file(f, &s->shards[k], buf, shard, err);
    }
    tbx_free(&f->al, buf, G_CHUNK);
    return st;
}
