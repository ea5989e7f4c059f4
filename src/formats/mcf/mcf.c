/*
 * mcf.c - the MCF reader: open, f32 decoding of the quantized families, validation, and the
 * directory extras (tensorbox/mcf.h).
 *
 * The driver's files: mcf_common.c (dtype codes, payload sizes, section names: used by the
 * reader and the writer), mcf.c (reading), mcf_write.c (writing), mcf_driver.c (the table,
 * which alone refers to both). Reader and writer call only into mcf_common.c.
 *
 * MCF (mantle's Model Container Format; reference: github.com/samcharles93/mantle pkg/mcf) is
 * one little-endian file: a 40-byte header, sections anywhere after it (each 8-aligned), and a
 * directory of 24-byte entries wherever the header points (mantle writes it last, sorted by
 * type). Offsets are absolute unless noted:
 *
 *   0     4       6       8            12             16                 24          32      40
 *   +-----+-------+-------+------------+--------------+------------------+-----------+-------+
 *   |MCF\0| major | minor |header_size |section_count |section_dir_offset| file_size | flags |
 *   |     |  (1)  | (0/1) |   (40)     |    (> 0)     |                  | (= real)  | bit0: |
 *   +-----+-------+-------+------------+--------------+------------------+-----------+aligned64
 *   | sections, 8-aligned: ModelInfo 0x1, QuantInfo 0x2, TensorIndex 0x3, TensorData 0x4,   |
 *   | HF files 0x100 config.json .. 0x105 merges.txt (verbatim), unknown types (kept)       |
 *   | directory @section_dir_offset: { u32 type, u32 version, u64 offset, u64 size } x count |
 *   +---------------------------------------------------------------------------------------+
 *
 *   ModelInfo (section-relative): u32 version 1, u32 flags 0, u32 arch, u32 pad, u32 vocab,
 *     hidden, layers, heads, kv_heads, context, train_context, rope_type, f32 rope_freq_base,
 *     f32 rope_scale, u64 model_name_off, u64 base_model_off (0: absent), u32 kv_count, u32 pad,
 *     u64 kv_off (88 bytes), blobs (u32 len + bytes, 8-aligned), KV table (24-byte entries:
 *     u64 key_off, u32 type 1 u32 / 2 f32 / 3 string, u32 pad, u64 value_off (0: "")).
 *   TensorIndex (section-relative): u32 version 1, u32 flags (bit0 sorted, bit1 UTF-8),
 *     u32 tensor_count, u32 dims_count, u64 entries_off, dims_off, strings_off, strings_size;
 *     entries of 40 bytes: u32 name_off, u32 name_len (in the string table), u32 dtype,
 *     u32 rank, u32 dim_off (index into the u64 dims), u32 0, u64 data_off (ABSOLUTE, inside
 *     TensorData), u64 data_size (the exact payload size of the dtype and shape).
 *   QuantInfo: u32 version 1, u32 record_count, records of 24 bytes: u32 tensor_index, u8
 *     method (= the tensor's dtype code), u8 domain, u16 block, u16 super, u8[6] 0, f32 clip
 *     min, f32 clip max; only for quantized tensors.
 *
 * The model: ModelInfo becomes metadata "mcf.<field>" (u32 / f32; mcf.model_name and
 * mcf.base_model when present) followed by its KV extras under their own keys; the HF sections
 * and sections of unknown types become sections (named by file name, unknown ones
 * "mcf.section.0xTTTT"); TensorIndex the tensors (one raw component each, aliases allowed); a
 * quantized tensor's QuantInfo record its tbx_quant_info. The whole directory is listed by
 * tbx_mcf_section_count/get. Structural violations fail the open with the field and the byte
 * offset; what mantle accepts and docs/formats/mcf.md lets pass (duplicate section types,
 * overlapping sections, quantized tensors without a record, duplicate records, sub-scale bytes
 * with the top bits set, ...) is reported by the validate hook.
 */
#include "mcf_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define MCF_STATE_TAG 0x4D434600u
#define MCF_CHUNK_FLOATS ((uint64_t)1 << 18)
#define MCF_SEG_BLOCKS ((uint64_t)8192)

typedef struct mcf_rec {
    uint64_t at;            /* file offset of the record */
    uint32_t tensor;
    uint8_t method, domain;
    bool reserved_set;
    bool dup;               /* an earlier record names the same tensor */
} mcf_rec;

typedef struct mcf_state {
    uint32_t tag;
    uint16_t major, minor;
    uint32_t header_size;
    uint64_t flags, dir_off;
    tbx_mcf_section *dir;
    size_t ndir;
    mcf_rec *recs;
    size_t nrecs;
    uint32_t *rec_of;       /* per tensor: index + 1 of its (first) record, 0: none */
    size_t nrec_of;
    uint32_t mi_flags;
    uint64_t mi_flags_at;
    uint64_t ti_entries_at; /* absolute offset of TensorIndex entry 0 (entry i = tensor i) */
    uint32_t *first_of;     /* per directory entry: the index of the first entry of its type */
    /* scratch of mcf_open (tensor names); decoding calls have their own (mcf_scr) */
    uint8_t *buf;
    size_t buf_cap;
} mcf_state;

void mcf_close(tbx_file *f) {
    mcf_state *s = f->drv_state;
    if (!s) return;
    tbx_free(&f->al, s->dir, s->ndir * sizeof *s->dir);
    tbx_free(&f->al, s->first_of, s->ndir * sizeof *s->first_of);
    tbx_free(&f->al, s->recs, s->nrecs * sizeof *s->recs);
    tbx_free(&f->al, s->rec_of, s->nrec_of * sizeof *s->rec_of);
    tbx_free(&f->al, s->buf, s->buf_cap);
    tbx_free(&f->al, s, sizeof *s);
    f->drv_state = NULL;
}

static mcf_state *mcf_state_of(const tbx_file *f) {
    if (!f || f->drv != &tbx_driver_mcf || !f->drv_state) return NULL;
    mcf_state *s = f->drv_state;
    return s->tag == MCF_STATE_TAG ? s : NULL;
}

bool mcf_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    (void)file_size;
    return len >= 4 && memcmp(head, "MCF\0", 4) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Header and directory                                                                        */
/* ------------------------------------------------------------------------------------------ */
static tbx_status mcf_read_header(tbx_file *f, mcf_state *s, tbx_cursor *c, uint32_t *count,
                                  tbx_error *err) {
    uint64_t size = f->src.size;
    uint8_t magic[4];
    uint64_t file_size;
    tbx_status st = tbx_cur_bytes(c, magic, 4, "header.magic", err);
    if (st == TBX_OK && memcmp(magic, "MCF\0", 4) != 0)
        return tbx_err(err, TBX_E_BAD_MAGIC, 0, "header.magic", "not an MCF file (magic is not \"MCF\\0\")");
    if (st == TBX_OK) st = tbx_cur_u16(c, &s->major, "header.major", err);
    if (st == TBX_OK) st = tbx_cur_u16(c, &s->minor, "header.minor", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &s->header_size, "header.header_size", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, count, "header.section_count", err);
    if (st == TBX_OK) st = tbx_cur_u64(c, &s->dir_off, "header.section_dir_offset", err);
    if (st == TBX_OK) st = tbx_cur_u64(c, &file_size, "header.file_size", err);
    if (st == TBX_OK) st = tbx_cur_u64(c, &s->flags, "header.flags", err);
    if (st != TBX_OK) return st;
    if (s->major != MCF_MAJOR)
        return tbx_err(err, TBX_E_BAD_VERSION, 4, "header.major",
                       "MCF major version %u is not supported (only 1)", s->major);
    if (s->header_size < MCF_HEADER_SIZE || s->header_size > size)
        return tbx_err(err, TBX_E_FORMAT, 8, "header.header_size",
                       "header_size %" PRIu32 " must be at least 40 and inside the %" PRIu64
                       "-byte file", s->header_size, size);
    if (*count == 0)
        return tbx_err(err, TBX_E_FORMAT, 12, "header.section_count",
                       "section_count is 0 (an MCF file has at least one section)");
    if (file_size != size)
        return tbx_err(err, TBX_E_FORMAT, 24, "header.file_size",
                       "file_size is %" PRIu64 " but the file has %" PRIu64 " bytes", file_size,
                       size);
    uint64_t dir_bytes = (uint64_t)*count * MCF_DIR_ENTRY, dir_end;
    if (s->dir_off < s->header_size)
        return tbx_err(err, TBX_E_RANGE, 16, "header.section_dir_offset",
                       "section directory at %" PRIu64 " starts inside the %" PRIu32
                       "-byte header", s->dir_off, s->header_size);
    if (!tbx_add_u64(s->dir_off, dir_bytes, &dir_end) || dir_end > size)
        return tbx_err(err, TBX_E_RANGE, 16, "header.section_dir_offset",
                       "section directory [%" PRIu64 ", +%" PRIu32 " x 24) runs past the end of "
                       "the %" PRIu64 "-byte file", s->dir_off, *count, size);
    return TBX_OK;
}

static tbx_status mcf_read_dir(tbx_file *f, mcf_state *s, tbx_cursor *c, uint32_t count,
                               tbx_error *err) {
    uint64_t size = f->src.size, dir_end = s->dir_off + (uint64_t)count * MCF_DIR_ENTRY;
    /* the entries, their first-of-type indices and the sort that finds them (charged: a
     * directory of a million 24-byte entries is a table like any other) */
    tbx_status bst = tbx_file_charge(f, (uint64_t)count * (sizeof *s->dir + sizeof *s->first_of +
                                                          2 * sizeof(uint64_t)),
                                     12, "header.section_count", err);
    if (bst != TBX_OK) return bst;
    s->dir = tbx_calloc(&f->al, count, sizeof *s->dir);
    s->first_of = tbx_calloc(&f->al, count, sizeof *s->first_of);
    if (!s->dir || !s->first_of) {
        tbx_free(&f->al, s->dir, s->dir ? count * sizeof *s->dir : 0);
        tbx_free(&f->al, s->first_of, s->first_of ? count * sizeof *s->first_of : 0);
        s->dir = NULL;
        s->first_of = NULL;
        return tbx_err_nomem(err, "MCF directory");
    }
    s->ndir = count;
    tbx_status st = tbx_cur_seek(c, s->dir_off, "header.section_dir_offset", err);
    for (uint32_t i = 0; i < count && st == TBX_OK; i++) {
        tbx_mcf_section *e = &s->dir[i];
        uint64_t at = c->pos, end;
        st = tbx_cur_u32(c, &e->type, "section.type", err);
        if (st == TBX_OK) st = tbx_cur_u32(c, &e->version, "section.version", err);
        if (st == TBX_OK) st = tbx_cur_u64(c, &e->offset, "section.offset", err);
        if (st == TBX_OK) st = tbx_cur_u64(c, &e->size, "section.size", err);
        if (st != TBX_OK) break;
        e->name = mcf_section_name(e->type);
        if (e->offset > size)
            return tbx_err(err, TBX_E_RANGE, at + 8, "section.offset",
                           "section %" PRIu32 " (%s, type 0x%04" PRIx32 ") at %" PRIu64
                           " starts past the end of the %" PRIu64 "-byte file", i, e->name,
                           e->type, e->offset, size);
        if (!tbx_add_u64(e->offset, e->size, &end) || end > size)
            return tbx_err(err, TBX_E_RANGE, at + 16, "section.size",
                           "section %" PRIu32 " (%s, type 0x%04" PRIx32 ") [%" PRIu64 ", +%" PRIu64
                           ") runs past the end of the %" PRIu64 "-byte file", i, e->name,
                           e->type, e->offset, e->size, size);
        if (e->offset < s->header_size)
            return tbx_err(err, TBX_E_RANGE, at + 8, "section.offset",
                           "section %" PRIu32 " (%s) at %" PRIu64 " starts inside the header",
                           i, e->name, e->offset);
        if (e->offset % MCF_SECTION_ALIGN)
            return tbx_err(err, TBX_E_RANGE, at + 8, "section.offset",
                           "section %" PRIu32 " (%s) at %" PRIu64 " is not 8-byte aligned", i,
                           e->name, e->offset);
        if (e->offset < dir_end && end > s->dir_off && e->size > 0)
            return tbx_err(err, TBX_E_RANGE, e->offset >= s->dir_off ? at + 8 : at + 16,
                           e->offset >= s->dir_off ? "section.offset" : "section.size",
                           "section %" PRIu32 " (%s) [%" PRIu64 ", +%" PRIu64 ") overlaps the "
                           "section directory [%" PRIu64 ", %" PRIu64 ")", i, e->name,
                           e->offset, e->size, s->dir_off, dir_end);
    }
    return st;
}

static int mcf_u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* s->first_of for every entry, in one sort of (type, index) keys: a linear search per entry
 * made a directory of n distinct types cost n^2 / 2 comparisons (40,000 entries: 1.8 s, and
 * quadrupling with every doubling). */
static tbx_status mcf_first_of_type(tbx_file *f, mcf_state *s, tbx_error *err) {
    size_t n = s->ndir;
    if (n == 0) return TBX_OK;
    uint64_t *k = tbx_calloc(&f->al, n, sizeof *k);
    if (!k) return tbx_err_nomem(err, "MCF directory");
    for (size_t i = 0; i < n; i++) k[i] = (uint64_t)s->dir[i].type << 32 | (uint32_t)i;
    qsort(k, n, sizeof *k, mcf_u64_cmp);
    uint32_t first = 0;
    for (size_t j = 0; j < n; j++) {
        if (j == 0 || k[j] >> 32 != k[j - 1] >> 32) first = (uint32_t)k[j];
        s->first_of[(uint32_t)k[j]] = first;
    }
    tbx_free(&f->al, k, n * sizeof *k);
    return TBX_OK;
}

/* The first directory entry of a type, or NULL. */
static const tbx_mcf_section *mcf_find(const mcf_state *s, uint32_t type) {
    for (size_t i = 0; i < s->ndir; i++)
        if (s->dir[i].type == type) return &s->dir[i];
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* ModelInfo                                                                                   */
/* ------------------------------------------------------------------------------------------ */
/* A blob (u32 length + bytes) at section-relative offset `off`, as a STRING value. */
static tbx_status mcf_blob(tbx_file *f, tbx_cursor *c, const tbx_mcf_section *sec, uint64_t off,
                           uint64_t at, const char *field, tbx_value **out, tbx_error *err) {
    uint32_t len;
    if (off > sec->size || sec->size - off < 4)
        return tbx_err(err, TBX_E_RANGE, at, field,
                       "offset %" PRIu64 " is outside the %" PRIu64 "-byte ModelInfo section",
                       off, sec->size);
    tbx_status st = tbx_cur_seek(c, sec->offset + off, field, err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &len, field, err);
    if (st != TBX_OK) return st;
    if (len > sec->size - off - 4)
        return tbx_err(err, TBX_E_RANGE, sec->offset + off, field,
                       "string of %" PRIu32 " bytes runs past the end of the ModelInfo section",
                       len);
    if (len > f->limits.max_string_len)
        return tbx_err(err, TBX_E_LIMIT, sec->offset + off, field,
                       "string of %" PRIu32 " bytes exceeds max_string_len", len);
    /* Many offsets may name one blob (every KV value the same 4 MB string): each becomes a
     * copy of its own, so each is charged to the budget before it is made. The field and offset
     * named are those of the reference. */
    st = tbx_file_charge_pending(f, (uint64_t)len + 1 + sizeof(tbx_value) + 2 * TBX_HEAP_OVERHEAD,
                                 at, field, err);
    if (st != TBX_OK) return st;
    tbx_value *v = tbx_val_new(&f->al, TBX_V_STRING);
    char *p = v ? tbx_malloc(&f->al, (size_t)len + 1) : NULL;
    if (!p) { tbx_val_free(v); return tbx_err_nomem(err, "ModelInfo string"); }
    v->v.s.p = p;
    v->v.s.n = len;
    p[len] = 0;
    st = tbx_cur_bytes(c, p, len, field, err);
    if (st != TBX_OK) { tbx_val_free(v); return st; }
    *out = v;
    return TBX_OK;
}

static tbx_status mcf_add_u32f32(tbx_file *f, const char *key, size_t kl, tbx_value_type t,
                                 const uint8_t *p, uint64_t at, tbx_error *err) {
    tbx_value *v = tbx_val_new(&f->al, t);
    if (!v) return tbx_err_nomem(err, "ModelInfo value");
    if (t == TBX_V_U32) v->v.u = tbx_ld32(p);
    else v->v.f = (double)tbx_ldf32(p);
    return tbx_file_add_meta(f, key, kl, v, at, err);
}

static tbx_status mcf_model_info(tbx_file *f, mcf_state *s, tbx_cursor *c,
                                 const tbx_mcf_section *sec, tbx_error *err) {
    uint8_t fx[MCF_MI_FIXED];
    uint64_t base = sec->offset;
    if (sec->size < MCF_MI_FIXED)
        return tbx_err(err, TBX_E_TRUNCATED, base, "modelinfo",
                       "ModelInfo section of %" PRIu64 " bytes is shorter than its 88-byte "
                       "fixed part", sec->size);
    tbx_status st = tbx_cur_seek(c, base, "modelinfo", err);
    if (st == TBX_OK) st = tbx_cur_bytes(c, fx, sizeof fx, "modelinfo", err);
    if (st != TBX_OK) return st;
    uint32_t version = tbx_ld32(fx);
    if (version != 1)
        return tbx_err(err, TBX_E_BAD_VERSION, base, "modelinfo.version",
                       "ModelInfo version %" PRIu32 " is not supported (only 1)", version);
    s->mi_flags = tbx_ld32(fx + 4);
    s->mi_flags_at = base + 4;
    for (size_t i = 0; i < mcf_mi_nfields; i++) {
        const mcf_mi_field *fl = &mcf_mi_fields[i];
        st = mcf_add_u32f32(f, fl->key, strlen(fl->key), fl->type, fx + fl->off, base + fl->off,
                            err);
        if (st != TBX_OK) return st;
    }
    static const char *const skeys[2] = {MCF_KEY_MODEL_NAME, MCF_KEY_BASE_MODEL};
    for (int k = 0; k < 2; k++) {
        uint64_t off = tbx_ld64(fx + 56 + 8 * k);
        if (off == 0) continue;
        tbx_value *v = NULL;
        st = mcf_blob(f, c, sec, off, base + 56 + 8 * k,
                      k ? "modelinfo.base_model_off" : "modelinfo.model_name_off", &v, err);
        if (st == TBX_OK) st = tbx_file_add_meta(f, skeys[k], strlen(skeys[k]), v, base + off, err);
        if (st != TBX_OK) return st;
    }
    uint32_t nkv = tbx_ld32(fx + 72);
    uint64_t kv_off = tbx_ld64(fx + 80);
    if (nkv == 0) return TBX_OK;
    if (kv_off > sec->size || (sec->size - kv_off) / MCF_MI_KV < nkv)
        return tbx_err(err, TBX_E_RANGE, kv_off > sec->size ? base + 80 : base + 72,
                       kv_off > sec->size ? "modelinfo.kv_off" : "modelinfo.kv_count",
                       "KV table [%" PRIu64 ", +%" PRIu32 " x 24) runs past the end of the %"
                       PRIu64 "-byte ModelInfo section", kv_off, nkv, sec->size);
    for (uint32_t i = 0; i < nkv; i++) {
        uint8_t e[MCF_MI_KV];
        uint64_t at = base + kv_off + (uint64_t)i * MCF_MI_KV;
        st = tbx_cur_seek(c, at, "modelinfo.kv", err);
        if (st == TBX_OK) st = tbx_cur_bytes(c, e, sizeof e, "modelinfo.kv", err);
        if (st != TBX_OK) return st;
        uint64_t koff = tbx_ld64(e), voff = tbx_ld64(e + 16);
        uint32_t type = tbx_ld32(e + 8);
        if (koff == 0)
            return tbx_err(err, TBX_E_FORMAT, at, "modelinfo.kv.key_off",
                           "KV entry %" PRIu32 " has no key (key_off 0)", i);
        tbx_value *key = NULL, *v = NULL;
        st = mcf_blob(f, c, sec, koff, at, "modelinfo.kv.key_off", &key, err);
        if (st != TBX_OK) return st;
        if (type == MCF_KV_STRING) {
            if (voff == 0) v = tbx_val_string(&f->al, TBX_V_STRING, "", 0);
            else st = mcf_blob(f, c, sec, voff, at + 16, "modelinfo.kv.value_off", &v, err);
            /* an empty blob (mantle's empty []byte) is kept apart from value_off 0 ("") */
            if (st == TBX_OK && v && voff != 0 && v->v.s.n == 0) v->type = TBX_V_BYTES;
            if (st == TBX_OK && !v) st = tbx_err_nomem(err, "ModelInfo value");
        } else if (type == MCF_KV_U32 || type == MCF_KV_F32) {
            uint8_t b[4];
            if (voff > sec->size || sec->size - voff < 4)
                st = tbx_err(err, TBX_E_RANGE, at + 16, "modelinfo.kv.value_off",
                             "value offset %" PRIu64 " is outside the ModelInfo section", voff);
            if (st == TBX_OK) st = tbx_cur_seek(c, base + voff, "modelinfo.kv.value", err);
            if (st == TBX_OK) st = tbx_cur_bytes(c, b, 4, "modelinfo.kv.value", err);
            if (st == TBX_OK) {
                v = tbx_val_new(&f->al, type == MCF_KV_U32 ? TBX_V_U32 : TBX_V_F32);
                if (!v) st = tbx_err_nomem(err, "ModelInfo value");
                else if (type == MCF_KV_U32) v->v.u = tbx_ld32(b);
                else v->v.f = (double)tbx_ldf32(b);
            }
        } else {
            st = tbx_err(err, TBX_E_FORMAT, at + 8, "modelinfo.kv.type",
                         "KV entry %" PRIu32 ": type %" PRIu32 " is not 1 (u32), 2 (f32) or 3 "
                         "(string)", i, type);
        }
        if (st == TBX_OK)
            st = tbx_file_add_meta(f, key->v.s.p, key->v.s.n, v, base + koff, err);
        else tbx_val_free(v);
        tbx_val_free(key);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* QuantInfo                                                                                   */
/* ------------------------------------------------------------------------------------------ */
static tbx_status mcf_quant_records(tbx_file *f, mcf_state *s, tbx_cursor *c,
                                    const tbx_mcf_section *sec, uint32_t ntensors,
                                    tbx_error *err) {
    uint32_t version, n;
    if (sec->size < MCF_QI_HEADER)
        return tbx_err(err, TBX_E_TRUNCATED, sec->offset, "quant_info",
                       "QuantInfo section of %" PRIu64 " bytes is shorter than its 8-byte header",
                       sec->size);
    tbx_status st = tbx_cur_seek(c, sec->offset, "quant_info", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &version, "quant_info.version", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &n, "quant_info.record_count", err);
    if (st != TBX_OK) return st;
    if (version != 1)
        return tbx_err(err, TBX_E_BAD_VERSION, sec->offset, "quant_info.version",
                       "QuantInfo version %" PRIu32 " is not supported (only 1)", version);
    if ((sec->size - MCF_QI_HEADER) / MCF_QI_RECORD < n)
        return tbx_err(err, TBX_E_RANGE, sec->offset + 4, "quant_info.record_count",
                       "%" PRIu32 " records of 24 bytes do not fit in the %" PRIu64
                       "-byte QuantInfo section", n, sec->size);
    s->recs = tbx_calloc(&f->al, n ? n : 1, sizeof *s->recs);
    if (!s->recs) return tbx_err_nomem(err, "QuantInfo records");
    s->nrecs = n ? n : 1;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t r[MCF_QI_RECORD];
        mcf_rec *q = &s->recs[i];
        q->at = c->pos;
        st = tbx_cur_bytes(c, r, sizeof r, "quant.record", err);
        if (st != TBX_OK) return st;
        q->tensor = tbx_ld32(r);
        q->method = r[4];
        q->domain = r[5];
        uint16_t block = tbx_ld16(r + 6), super = tbx_ld16(r + 8);
        for (int k = 10; k < 16; k++) q->reserved_set |= r[k] != 0;
        if (q->tensor >= ntensors)
            return tbx_err(err, TBX_E_RANGE, q->at, "quant.tensor_index",
                           "QuantInfo record %" PRIu32 " names tensor %" PRIu32 " but the index "
                           "has %" PRIu32, i, q->tensor, ntensors);
        tbx_dtype dt = mcf_dtype_from_code(q->method);
        if (!mcf_is_quant(dt))
            return tbx_err(err, TBX_E_FORMAT, q->at + 4, "quant.method",
                           "QuantInfo record %" PRIu32 ": method 0x%02x is not a quantization "
                           "method (0x10 0x11 0x20 0x21 0x30-0x33)", i, q->method);
        if (q->domain > MCF_DOMAIN_ACTIVATIONS ||
            (mcf_is_qk(dt) && q->domain != MCF_DOMAIN_WEIGHTS))
            return tbx_err(err, TBX_E_FORMAT, q->at + 5, "quant.domain",
                           "QuantInfo record %" PRIu32 ": domain %u is not allowed for method "
                           "0x%02x", i, q->domain, q->method);
        uint16_t wb, ws;
        mcf_quant_geometry(dt, &wb, &ws);
        if (block != wb || super != ws)
            return tbx_err(err, TBX_E_FORMAT, block != wb ? q->at + 6 : q->at + 8,
                           block != wb ? "quant.block_size" : "quant.super_size",
                           "QuantInfo record %" PRIu32 ": block/super %u/%u, expected %u/%u for "
                           "method 0x%02x", i, block, super, wb, ws, q->method);
        if (q->reserved_set) {
            st = tbx_file_problem(f, err, TBX_E_PADDING, q->at + 10, "quant.reserved",
                                  "QuantInfo record %" PRIu32 ": reserved bytes are not zero", i);
            if (st != TBX_OK) return st;
        }
        if (s->rec_of[q->tensor]) q->dup = true;
        else s->rec_of[q->tensor] = i + 1;
    }
    s->nrecs = n ? n : 1;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* TensorIndex                                                                                 */
/* ------------------------------------------------------------------------------------------ */
typedef struct mcf_ti {
    uint32_t version, flags, count, ndims;
    uint64_t entries_off, dims_off, strings_off, strings_size;
} mcf_ti;

static tbx_status mcf_ti_header(const tbx_file *f, tbx_cursor *c, const tbx_mcf_section *sec,
                                mcf_ti *h, tbx_error *err) {
    uint64_t b = sec->offset, size = sec->size, end;
    if (size < MCF_TI_HEADER)
        return tbx_err(err, TBX_E_TRUNCATED, b, "tensor_index",
                       "TensorIndex section of %" PRIu64 " bytes is shorter than its 48-byte "
                       "header", size);
    tbx_status st = tbx_cur_seek(c, b, "tensor_index", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->version, "tensor_index.version", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->flags, "tensor_index.flags", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->count, "tensor_index.tensor_count", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->ndims, "tensor_index.dims_count", err);
    if (st == TBX_OK) st = tbx_cur_u64(c, &h->entries_off, "tensor_index.entries_off", err);
    if (st == TBX_OK) st = tbx_cur_u64(c, &h->dims_off, "tensor_index.dims_off", err);
    if (st == TBX_OK) st = tbx_cur_u64(c, &h->strings_off, "tensor_index.strings_off", err);
    if (st == TBX_OK) st = tbx_cur_u64(c, &h->strings_size, "tensor_index.strings_size", err);
    if (st != TBX_OK) return st;
    if (h->version != 1)
        return tbx_err(err, TBX_E_BAD_VERSION, b, "tensor_index.version",
                       "TensorIndex version %" PRIu32 " is not supported (only 1)", h->version);
    if (h->count == 0)
        return tbx_err(err, TBX_E_FORMAT, b + 8, "tensor_index.tensor_count",
                       "tensor_count is 0 (a TensorIndex holds at least one tensor)");
    if (h->count > f->limits.max_tensors)
        return tbx_err(err, TBX_E_LIMIT, b + 8, "tensor_index.tensor_count",
                       "%" PRIu32 " tensors exceed max_tensors = %" PRIu64, h->count,
                       f->limits.max_tensors);
    if (h->entries_off > size || (size - h->entries_off) / MCF_TI_ENTRY < h->count)
        return tbx_err(err, TBX_E_RANGE, b + 16, "tensor_index.entries_off",
                       "entries [%" PRIu64 ", +%" PRIu32 " x 40) run past the end of the %" PRIu64
                       "-byte TensorIndex section", h->entries_off, h->count, size);
    if (h->dims_off > size || (size - h->dims_off) / 8 < h->ndims)
        return tbx_err(err, TBX_E_RANGE, b + 24, "tensor_index.dims_off",
                       "dims [%" PRIu64 ", +%" PRIu32 " x 8) run past the end of the %" PRIu64
                       "-byte TensorIndex section", h->dims_off, h->ndims, size);
    if (!tbx_add_u64(h->strings_off, h->strings_size, &end) || end > size)
        return tbx_err(err, TBX_E_RANGE, b + 40, "tensor_index.strings_size",
                       "string table [%" PRIu64 ", +%" PRIu64 ") runs past the end of the %" PRIu64
                       "-byte TensorIndex section", h->strings_off, h->strings_size, size);
    return TBX_OK;
}

static bool mcf_scratch(tbx_file *f, mcf_state *s, size_t need) {
    if (need <= s->buf_cap) return true;
    size_t cap = s->buf_cap ? s->buf_cap : 256;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *p = tbx_realloc(&f->al, s->buf, s->buf_cap, cap);
    if (!p) return false;
    s->buf = p;
    s->buf_cap = cap;
    return true;
}

/* Reads the payload's scale (and zero) of an int8/int4 tensor into its description. */
static tbx_status mcf_int_params(tbx_file *f, tbx_quant_info *q, uint64_t off, int domain,
                                 tbx_error *err) {
    uint8_t b[4];
    tbx_status st = tbx_source_read(&f->src, off, b, 4, "tensor.scale", err);
    if (st != TBX_OK) return st;
    float *sv = tbx_file_quant_values(f, q, &q->scale, 4);
    if (!sv) return tbx_err_nomem(err, "quantization values");
    *sv = tbx_ldf32(b);
    if (domain != MCF_DOMAIN_ACTIVATIONS) return TBX_OK;
    st = tbx_source_read(&f->src, off + 64, b, 4, "tensor.zero", err);
    if (st != TBX_OK) return st;
    float *zv = tbx_file_quant_values(f, q, &q->zero, 4);
    if (!zv) return tbx_err_nomem(err, "quantization values");
    *zv = tbx_ldf32(b);
    q->zero.scope = TBX_QSCOPE_TENSOR;
    q->zero.dtype = TBX_DT_F32;
    q->zero.count = 1;
    return TBX_OK;
}

static tbx_status mcf_attach_quant(tbx_file *f, mcf_state *s, tbx_tensor *t, uint32_t index,
                                   uint64_t data_off, tbx_error *err) {
    tbx_quant_info *q = tbx_file_quant_new(f);
    if (!q) return tbx_err_nomem(err, "quantization description");
    const mcf_rec *r = s->rec_of && s->rec_of[index] ? &s->recs[s->rec_of[index] - 1] : NULL;
    int domain = r ? r->domain : MCF_DOMAIN_WEIGHTS;
    tbx_dtype dt = t->dtype;
    q->method = TBX_QUANT_LINEAR;
    q->code_signed = 1;
    q->domain = !r ? TBX_QDOMAIN_UNSPECIFIED
                   : domain == MCF_DOMAIN_ACTIVATIONS ? TBX_QDOMAIN_ACTIVATIONS : TBX_QDOMAIN_WEIGHTS;
    tbx_status st = TBX_OK;
    /* the shape was checked against the payload size when the entry was read */
    tbx_mcfq_describe(dt, t->shape[0], t->shape[1], q);
    if (!mcf_is_qk(dt)) st = mcf_int_params(f, q, data_off, domain, err);
    /* tbx_quant_put_* return TBX_E_NOMEM without describing it: describe it here */
    if (st == TBX_OK && tbx_quant_put_u32(f, q, "method", mcf_code_from_dtype(dt)) != TBX_OK)
        st = tbx_err_nomem(err, "quantization parameter \"method\"");
    if (st == TBX_OK && r) {
        uint8_t b[8];
        st = tbx_source_read(&f->src, r->at + 16, b, 8, "quant.min_clip", err);
        if (st == TBX_OK) {
            q->has_clip = 1;
            q->clip_min = tbx_ldf32(b);
            q->clip_max = tbx_ldf32(b + 4);
            if (tbx_quant_put_u32(f, q, "record", s->rec_of[index] - 1) != TBX_OK)
                st = tbx_err_nomem(err, "quantization parameter \"record\"");
        }
    }
    t->quant = q;
    return st;
}

typedef struct mcf_rd {
    tbx_file *f;
    mcf_state *s;
    tbx_cursor ec, dc, sc;   /* entries, dims, strings */
    mcf_ti h;
    const tbx_mcf_section *ti, *td;
    uint64_t *dims;
    uint32_t dims_cap;
    char *prev;              /* the previous name (sorted check) */
    size_t prev_len, prev_cap;
} mcf_rd;

static tbx_status mcf_entry(mcf_rd *rd, uint32_t i, tbx_error *err) {
    tbx_file *f = rd->f;
    mcf_state *s = rd->s;
    const uint64_t tib = rd->ti->offset;
    uint64_t at = tib + rd->h.entries_off + (uint64_t)i * MCF_TI_ENTRY;
    uint8_t e[MCF_TI_ENTRY];
    tbx_status st = tbx_cur_seek(&rd->ec, at, "tensor", err);
    if (st == TBX_OK) st = tbx_cur_bytes(&rd->ec, e, sizeof e, "tensor", err);
    if (st != TBX_OK) return st;
    uint32_t noff = tbx_ld32(e), nlen = tbx_ld32(e + 4), code = tbx_ld32(e + 8);
    uint32_t rank = tbx_ld32(e + 12), doff = tbx_ld32(e + 16);
    uint64_t data_off = tbx_ld64(e + 24), data_size = tbx_ld64(e + 32);
    /* name */
    if ((uint64_t)noff + nlen > rd->h.strings_size)
        return tbx_err(err, TBX_E_RANGE, at, "tensor.name_off",
                       "tensor %" PRIu32 ": name [%" PRIu32 ", +%" PRIu32 ") is outside the %"
                       PRIu64 "-byte string table", i, noff, nlen, rd->h.strings_size);
    if (nlen == 0)
        return tbx_err(err, TBX_E_FORMAT, at + 4, "tensor.name_len",
                       "tensor %" PRIu32 " has an empty name", i);
    if (!mcf_scratch(f, s, nlen)) return tbx_err_nomem(err, "tensor name");
    st = tbx_cur_seek(&rd->sc, tib + rd->h.strings_off + noff, "tensor.name", err);
    if (st == TBX_OK) st = tbx_cur_bytes(&rd->sc, s->buf, nlen, "tensor.name", err);
    if (st != TBX_OK) return st;
    const char *name = (const char *)s->buf;
    char q[96];
    tbx_quote_bytes(q, sizeof q, name, nlen, 64);
    size_t bad;
    if ((rd->h.flags & MCF_TI_UTF8) && !tbx_utf8_valid(name, nlen, &bad))
        return tbx_err(err, TBX_E_FORMAT, tib + rd->h.strings_off + noff + bad, "tensor.name",
                       "tensor %" PRIu32 ": name \"%s\" is not valid UTF-8 (the index flags say "
                       "UTF-8 names)", i, q);
    if ((rd->h.flags & MCF_TI_SORTED) && i > 0) {
        size_t m = rd->prev_len < nlen ? rd->prev_len : nlen;
        int cmp = memcmp(rd->prev, name, m);
        if (cmp > 0 || (cmp == 0 && rd->prev_len >= nlen))
            return tbx_err(err, cmp == 0 && rd->prev_len == nlen ? TBX_E_DUPLICATE : TBX_E_FORMAT,
                           at, "tensor.name",
                           "tensor %" PRIu32 ": name \"%s\" is not after the previous one (the "
                           "index flags say sorted by name)", i, q);
    }
    if (rd->prev_cap < nlen) {
        char *p = tbx_realloc(&f->al, rd->prev, rd->prev_cap, nlen);
        if (!p) return tbx_err_nomem(err, "tensor name");
        rd->prev = p;
        rd->prev_cap = nlen;
    }
    memcpy(rd->prev, name, nlen);
    rd->prev_len = nlen;
    /* dtype, shape */
    tbx_dtype dt = mcf_dtype_from_code(code);
    if (dt == TBX_DT_INVALID)
        return tbx_err(err, TBX_E_FORMAT, at + 8, "tensor.dtype",
                       "tensor \"%s\": dtype code %" PRIu32 " is not an MCF dtype", q, code);
    if (rank > f->limits.max_ndim)
        return tbx_err(err, TBX_E_LIMIT, at + 12, "tensor.rank",
                       "tensor \"%s\": rank %" PRIu32 " exceeds max_ndim = %" PRIu32, q, rank,
                       f->limits.max_ndim);
    if (rank > 0 && (uint64_t)doff + rank > rd->h.ndims)
        return tbx_err(err, TBX_E_RANGE, at + 16, "tensor.dim_off",
                       "tensor \"%s\": dims [%" PRIu32 ", +%" PRIu32 ") are outside the %" PRIu32
                       "-entry dims table", q, doff, rank, rd->h.ndims);
    if (rd->dims_cap < rank) {
        uint64_t *d = tbx_realloc(&f->al, rd->dims, rd->dims_cap * sizeof *d, rank * sizeof *d);
        if (!d) return tbx_err_nomem(err, "tensor shape");
        rd->dims = d;
        rd->dims_cap = rank;
    }
    if (rank > 0) st = tbx_cur_seek(&rd->dc, tib + rd->h.dims_off + 8 * (uint64_t)doff, "tensor.dims", err);
    for (uint32_t d = 0; d < rank && st == TBX_OK; d++)
        st = tbx_cur_u64(&rd->dc, &rd->dims[d], "tensor.dims", err);
    if (st != TBX_OK) return st;
    if (e[20] | e[21] | e[22] | e[23]) {
        st = tbx_file_problem(f, err, TBX_E_FORMAT, at + 20, "tensor.reserved",
                              "tensor \"%s\": reserved field is 0x%08" PRIx32 ", expected 0", q,
                              tbx_ld32(e + 20));
        if (st != TBX_OK) return st;
    }
    /* payload */
    const mcf_rec *r = s->rec_of && s->rec_of[i] ? &s->recs[s->rec_of[i] - 1] : NULL;
    if (r && !mcf_is_quant(dt))
        return tbx_err(err, TBX_E_FORMAT, r->at, "quant.tensor_index",
                       "QuantInfo record for tensor \"%s\", which is not quantized (dtype code "
                       "%" PRIu32 ")", q, code);
    if (r && r->method != code)
        return tbx_err(err, TBX_E_FORMAT, r->at + 4, "quant.method",
                       "QuantInfo record for tensor \"%s\": method 0x%02x, but the tensor's "
                       "dtype is 0x%02" PRIx32, q, r->method, code);
    int domain = r ? r->domain : MCF_DOMAIN_WEIGHTS;
    const uint64_t dims_at = tib + rd->h.dims_off + 8 * (uint64_t)doff;
    if (mcf_is_qk(dt) && rank != 2)
        return tbx_err(err, TBX_E_FORMAT, at + 12, "tensor.rank",
                       "tensor \"%s\": rank %" PRIu32 ", but the q/k families are rank 2 only", q,
                       rank);
    for (uint32_t d = 0; mcf_is_qk(dt) && d < rank; d++)
        if (rd->dims[d] == 0)
            return tbx_err(err, TBX_E_FORMAT, dims_at + 8 * d, "tensor.dims",
                           "tensor \"%s\": dimension %" PRIu32 " is 0 (the q/k families have "
                           "none)", q, d);
    uint64_t want = 0;
    const char *why = "";
    st = mcf_payload_size(dt, rd->dims, rank, domain, &want, &why);
    if (st == TBX_E_OVERFLOW)
        return tbx_err(err, TBX_E_OVERFLOW, dims_at, "tensor.dims",
                       "tensor \"%s\": its size overflows 64 bits", q);
    if (st != TBX_OK)
        return tbx_err(err, TBX_E_FORMAT, at + 12, "tensor.rank", "tensor \"%s\": %s", q, why);
    /* int8/int4 codes alone, without the scale region before them (mantle pack --quant-embed
     * writes its embedding tables so): listed, but its values cannot be read (mcf_bare_error) */
    const bool bare = (dt == TBX_DT_MCF_INT8 || dt == TBX_DT_MCF_INT4) &&
                      data_size == want - mcf_int_codes_off(domain);
    if (data_size != want && !bare)
        return tbx_err(err, TBX_E_FORMAT, at + 32, "tensor.data_size",
                       "tensor \"%s\": data_size is %" PRIu64 ", expected %" PRIu64 " for its "
                       "shape and dtype", q, data_size, want);
    if (want > f->limits.max_tensor_bytes)
        return tbx_err(err, TBX_E_LIMIT, at + 32, "tensor.data_size",
                       "tensor \"%s\": %" PRIu64 " bytes exceed max_tensor_bytes", q, want);
    uint64_t end;
    if (!rd->td || data_off < rd->td->offset || !tbx_add_u64(data_off, data_size, &end) ||
        end > rd->td->offset + rd->td->size)
        return tbx_err(err, TBX_E_RANGE, at + 24, "tensor.data_off",
                       "tensor \"%s\": data [%" PRIu64 ", +%" PRIu64 ") is not inside the "
                       "TensorData section%s", q, data_off, data_size,
                       rd->td ? "" : " (the file has none)");
    if (mcf_is_qk(dt) && data_off % MCF_TENSOR_ALIGN)
        return tbx_err(err, TBX_E_RANGE, at + 24, "tensor.data_off",
                       "tensor \"%s\": quantized payload at %" PRIu64 " is not 64-byte aligned",
                       q, data_off);
    tbx_tensor *t = NULL;
    st = tbx_file_add_tensor(f, name, nlen, dt, rd->dims, rank, 1, at, &t, err);
    if (st != TBX_OK) return st;
    tbx_comp_set_raw(t, dt, data_off, data_size);
    if (bare) {
        t->unreadable = 1; /* no scale to describe its quantization with */
    } else if (mcf_is_quant(dt)) {
        /* a description per quantized tensor, whatever bytes its entry shares with others */
        st = tbx_file_charge_quant(f, at + 8, "tensor.dtype", err);
        if (st == TBX_OK) st = mcf_attach_quant(f, s, t, i, data_off, err);
    }
    return st;
}

static tbx_status mcf_sections(tbx_file *f, mcf_state *s, tbx_error *err) {
    for (size_t i = 0; i < s->ndir; i++) {
        const tbx_mcf_section *e = &s->dir[i];
        if (e->type >= MCF_SEC_MODELINFO && e->type <= MCF_SEC_TENSORDATA) continue;
        if (s->first_of[i] != i) continue; /* a duplicate type: the first one wins */
        char name[32];
        const char *n = e->name;
        if (strcmp(n, "unknown") == 0) {
            snprintf(name, sizeof name, "mcf.section.0x%04" PRIx32, e->type);
            n = name;
        }
        tbx_status st = tbx_file_add_section(f, n, e->type, e->offset, e->size, err);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

tbx_status mcf_open(tbx_file *f, tbx_error *err) {
    mcf_state *s = tbx_calloc(&f->al, 1, sizeof *s);
    if (!s) return tbx_err_nomem(err, "MCF state");
    s->tag = MCF_STATE_TAG;
    f->drv_state = s; /* freed by mcf_close, also when the open fails */
    mcf_rd rd;
    memset(&rd, 0, sizeof rd);
    rd.f = f;
    rd.s = s;
    uint32_t count = 0;
    tbx_cursor c;
    tbx_status st = tbx_cursor_init(&c, &f->src, &f->al, 0, f->src.size, err);
    if (st != TBX_OK) return st;
    st = mcf_read_header(f, s, &c, &count, err);
    if (st == TBX_OK) st = mcf_read_dir(f, s, &c, count, err);
    if (st == TBX_OK) st = mcf_first_of_type(f, s, err);
    if (st == TBX_OK) f->version = s->major;
    const tbx_mcf_section *mi = st == TBX_OK ? mcf_find(s, MCF_SEC_MODELINFO) : NULL;
    if (mi) st = mcf_model_info(f, s, &c, mi, err);
    if (st == TBX_OK) st = mcf_sections(f, s, err);
    rd.ti = st == TBX_OK ? mcf_find(s, MCF_SEC_TENSORINDEX) : NULL;
    rd.td = mcf_find(s, MCF_SEC_TENSORDATA);
    if (rd.ti) {
        st = mcf_ti_header(f, &c, rd.ti, &rd.h, err);
        s->ti_entries_at = rd.ti->offset + rd.h.entries_off;
        if (st == TBX_OK && (rd.h.flags & ~(MCF_TI_SORTED | MCF_TI_UTF8)))
            st = tbx_file_problem(f, err, TBX_E_FORMAT, rd.ti->offset + 4, "tensor_index.flags",
                                  "TensorIndex flags 0x%08" PRIx32 " set unknown bits", rd.h.flags);
        const tbx_mcf_section *qi = mcf_find(s, MCF_SEC_QUANTINFO);
        if (st == TBX_OK) {
            s->rec_of = tbx_calloc(&f->al, rd.h.count, sizeof *s->rec_of);
            if (!s->rec_of) st = tbx_err_nomem(err, "QuantInfo map");
            else s->nrec_of = rd.h.count;
        }
        if (st == TBX_OK && qi) st = mcf_quant_records(f, s, &c, qi, rd.h.count, err);
        if (st == TBX_OK) st = tbx_file_reserve_tensors(f, rd.h.count, err);
        if (st == TBX_OK) st = tbx_cursor_init(&rd.ec, &f->src, &f->al, 0, f->src.size, err);
        if (st == TBX_OK) st = tbx_cursor_init(&rd.dc, &f->src, &f->al, 0, f->src.size, err);
        if (st == TBX_OK) st = tbx_cursor_init(&rd.sc, &f->src, &f->al, 0, f->src.size, err);
        for (uint32_t i = 0; i < rd.h.count && st == TBX_OK; i++) st = mcf_entry(&rd, i, err);
        tbx_cursor_free(&rd.ec);
        tbx_cursor_free(&rd.dc);
        tbx_cursor_free(&rd.sc);
    } else if (st == TBX_OK && (mcf_find(s, MCF_SEC_QUANTINFO) || rd.td)) {
        st = tbx_err(err, TBX_E_FORMAT, 16, "tensor_index",
                     "the file has a %s section but no TensorIndex",
                     rd.td ? "TensorData" : "QuantInfo");
    }
    tbx_cursor_free(&c);
    tbx_free(&f->al, rd.dims, rd.dims_cap * sizeof *rd.dims);
    tbx_free(&f->al, rd.prev, rd.prev_cap);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Tensors listed but unreadable: int8/int4 codes without their scale                          */
/* ------------------------------------------------------------------------------------------ */
/* The error of every read of such a tensor (and its validate problem): TBX_E_FORMAT at its
 * entry's data_size. */
static tbx_status mcf_bare_error(const tbx_file *f, const tbx_tensor *t, tbx_error *err) {
    const mcf_state *s = mcf_state_of(f);
    const uint64_t i = (uint64_t)(t - f->tensors);
    const bool act = t->quant && t->quant->domain == TBX_QDOMAIN_ACTIVATIONS;
    const uint64_t size = t->comp[0].stored_bytes;
    return tbx_err(err, TBX_E_FORMAT, s ? s->ti_entries_at + i * MCF_TI_ENTRY + 32 : TBX_NO_OFFSET,
                   "tensor.data_size",
                   "tensor \"%s\": data_size %" PRIu64 " holds only the %s codes of its %" PRIu64
                   " values, without the f32 scale MCF stores before them (expected %" PRIu64
                   "; mantle pack --quant-embed writes them so): its values cannot be read",
                   t->name, size, t->dtype == TBX_DT_MCF_INT4 ? "int4" : "int8", t->nelems,
                   size + mcf_int_codes_off(act ? MCF_DOMAIN_ACTIVATIONS : 0));
}

/* tbx_driver hooks: only such tensors have a "pending check", which always fails, so that the
 * core sends every read of them (whole, ranges, maps, batches, validation) here. */
bool mcf_raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c) {
    (void)f;
    (void)c;
    return t->unreadable != 0;
}

tbx_status mcf_check_component(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err) {
    (void)c;
    return t->unreadable ? mcf_bare_error(f, t, err) : TBX_OK;
}

tbx_status mcf_read_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                              tbx_error *err) {
    if (t->unreadable) return mcf_bare_error(f, t, err);
    const tbx_component *k = &t->comp[c]; /* not reached: raw components are served raw */
    return tbx_source_read(&f->src, k->offset, buf, (size_t)k->nbytes, t->name, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Decoding to f32                                                                             */
/* ------------------------------------------------------------------------------------------ */
/* The scratch of one decoding call. Every call (mcf_read_f32, mcf_validate) has its own, freed
 * before it returns: tbx_read_batch and tbx_validate decode one handle from several worker
 * threads at once, so nothing of the handle is written while reading. */
typedef struct mcf_scr {
    uint8_t *buf;
    size_t cap;
    float *fbuf;
    size_t fcap;
} mcf_scr;

static void mcf_scr_free(tbx_file *f, mcf_scr *x) {
    tbx_free(&f->al, x->buf, x->cap);
    tbx_free(&f->al, x->fbuf, x->fcap * sizeof(float));
    memset(x, 0, sizeof *x);
}

/* [off, off + len) of the file: a pointer into the mapping or a read into scratch slot k. */
static const uint8_t *mcf_get(tbx_file *f, mcf_scr *x, uint64_t off, uint64_t len, size_t slot,
                              size_t slot_cap, tbx_error *err, tbx_status *st) {
    const uint8_t *p = tbx_source_ptr(&f->src, off, len);
    if (p) return p;
    if (slot_cap * 3 > x->cap) {
        uint8_t *q = tbx_realloc(&f->al, x->buf, x->cap, slot_cap * 3);
        if (!q) { *st = tbx_err_nomem(err, "MCF read buffer"); return NULL; }
        x->buf = q;
        x->cap = slot_cap * 3;
    }
    *st = tbx_source_read(&f->src, off, x->buf + slot * slot_cap, (size_t)len, "tensor.data", err);
    return *st == TBX_OK ? x->buf + slot * slot_cap : NULL;
}

/* After using bytes mcf_get gave: were [off, off + len) of the file still there when read (a
 * mapped file that shrank reads as zeros)? */
static tbx_status mcf_got(tbx_file *f, uint64_t off, uint64_t len, tbx_error *err) {
    return tbx_source_check(&f->src, off, len, "tensor.data", err);
}

static float *mcf_fbuf(tbx_file *f, mcf_scr *x, size_t n) {
    if (n > x->fcap) {
        float *p = tbx_realloc(&f->al, x->fbuf, x->fcap * sizeof(float), n * sizeof(float));
        if (!p) return NULL;
        x->fbuf = p;
        x->fcap = n;
    }
    return x->fbuf;
}

static tbx_status mcf_read_qk(tbx_file *f, mcf_scr *s, const tbx_tensor *t, uint64_t first,
                              uint64_t count, float *out, tbx_error *err) {
    tbx_mcfq_layout L;
    tbx_mcfq_layout_get(mcf_kind(t->dtype), t->shape[0], t->shape[1], &L);
    const uint64_t base = t->comp[0].offset, cols = L.cols, last = first + count;
    const uint64_t nsc = L.super ? L.spr : L.bpr, bb = 4u * L.bits;
    /* the largest pieces one step reads: scales, sub-scales, codes of one chunk */
    uint64_t rows_max = MCF_CHUNK_FLOATS / cols ? MCF_CHUNK_FLOATS / cols : 1;
    if (rows_max > ((uint64_t)4 << 20) / L.row_code_bytes)
        rows_max = ((uint64_t)4 << 20) / L.row_code_bytes ? ((uint64_t)4 << 20) / L.row_code_bytes : 1;
    size_t slot = (size_t)(MCF_SEG_BLOCKS * bb > rows_max * L.row_code_bytes
                               ? MCF_SEG_BLOCKS * bb : rows_max * L.row_code_bytes);
    if (cols > MCF_CHUNK_FLOATS) slot = (size_t)(MCF_SEG_BLOCKS * bb);
    float *tmp = mcf_fbuf(f, s, (size_t)(cols > MCF_CHUNK_FLOATS ? MCF_SEG_BLOCKS * 32
                                                                 : rows_max * cols));
    if (!tmp) return tbx_err_nomem(err, "MCF decode buffer");
    tbx_status st = TBX_OK;
    uint64_t pos = first;
    while (pos < last) {
        uint64_t r = pos / cols, c = pos % cols, n;
        const uint8_t *sc, *sb = NULL, *cd;
        if (c == 0 && cols <= MCF_CHUNK_FLOATS) {
            uint64_t need = (last - pos + cols - 1) / cols, k = need < rows_max ? need : rows_max;
            sc = mcf_get(f, s, base + L.scales_off + r * nsc * 2, k * nsc * 2, 0, slot, err, &st);
            if (sc && L.super)
                sb = mcf_get(f, s, base + L.sub_off + r * L.bpr, k * L.bpr, 1, slot, err, &st);
            cd = st == TBX_OK ? mcf_get(f, s, base + L.codes_off + r * L.row_code_bytes,
                                        k * L.row_code_bytes, 2, slot, err, &st) : NULL;
            if (st != TBX_OK) return st;
            tbx_mcfq_dequant_rows(&L, sc, sb, cd, k, tmp);
            if ((st = mcf_got(f, base + L.scales_off + r * nsc * 2, k * nsc * 2, err)) != TBX_OK ||
                (L.super && (st = mcf_got(f, base + L.sub_off + r * L.bpr, k * L.bpr, err)) != TBX_OK) ||
                (st = mcf_got(f, base + L.codes_off + r * L.row_code_bytes, k * L.row_code_bytes,
                              err)) != TBX_OK)
                return st;
            n = k * cols < last - pos ? k * cols : last - pos;
            memcpy(out + (pos - first), tmp, (size_t)n * sizeof(float));
        } else {
            uint64_t b0 = (c / 256) * 8, nb = L.bpr - b0 < MCF_SEG_BLOCKS ? L.bpr - b0 : MCF_SEG_BLOCKS;
            tbx_mcfq_layout L2 = L;
            L2.cols = nb * 32 < cols - b0 * 32 ? nb * 32 : cols - b0 * 32;
            L2.bpr = nb;
            L2.spr = L.super ? (nb + 7) / 8 : 0;
            L2.row_code_bytes = nb * bb;
            uint64_t s0 = L.super ? r * L.spr + b0 / 8 : r * L.bpr + b0;
            sc = mcf_get(f, s, base + L.scales_off + s0 * 2, (L.super ? L2.spr : nb) * 2, 0, slot,
                         err, &st);
            if (sc && L.super)
                sb = mcf_get(f, s, base + L.sub_off + r * L.bpr + b0, nb, 1, slot, err, &st);
            cd = st == TBX_OK ? mcf_get(f, s, base + L.codes_off + r * L.row_code_bytes + b0 * bb,
                                        nb * bb, 2, slot, err, &st) : NULL;
            if (st != TBX_OK) return st;
            tbx_mcfq_dequant_rows(&L2, sc, sb, cd, 1, tmp);
            if ((st = mcf_got(f, base + L.scales_off + s0 * 2, (L.super ? L2.spr : nb) * 2, err)) !=
                    TBX_OK ||
                (L.super && (st = mcf_got(f, base + L.sub_off + r * L.bpr + b0, nb, err)) != TBX_OK) ||
                (st = mcf_got(f, base + L.codes_off + r * L.row_code_bytes + b0 * bb, nb * bb,
                              err)) != TBX_OK)
                return st;
            uint64_t start = c - b0 * 32;
            n = L2.cols - start < last - pos ? L2.cols - start : last - pos;
            memcpy(out + (pos - first), tmp + start, (size_t)n * sizeof(float));
        }
        pos += n;
    }
    return TBX_OK;
}

static tbx_status mcf_read_int(tbx_file *f, mcf_scr *s, const tbx_tensor *t, uint64_t first,
                               uint64_t count, float *out, tbx_error *err) {
    const tbx_quant_info *q = t->quant;
    bool act = q && q->domain == TBX_QDOMAIN_ACTIVATIONS;
    float sc = q && q->scale.values ? *(const float *)q->scale.values : 0.0f;
    float z = act && q->zero.values ? *(const float *)q->zero.values : 0.0f;
    uint64_t codes = t->comp[0].offset + mcf_int_codes_off(act ? MCF_DOMAIN_ACTIVATIONS : 0);
    bool four = t->dtype == TBX_DT_MCF_INT4;
    const uint64_t step = (uint64_t)1 << 20;
    tbx_status st = TBX_OK;
    for (uint64_t pos = first; pos < first + count;) {
        uint64_t n = first + count - pos < step ? first + count - pos : step;
        uint64_t b0 = four ? pos / 2 : pos, b1 = four ? (pos + n + 1) / 2 : pos + n;
        const uint8_t *p = mcf_get(f, s, codes + b0, b1 - b0, 0, (size_t)step, err, &st);
        if (!p) return st;
        for (uint64_t k = 0; k < n; k++) {
            int v;
            if (four) {
                uint64_t e = pos + k;
                unsigned nib = (p[e / 2 - b0] >> (4 * (e & 1))) & 15u;
                v = (int)nib - ((nib & 8u) ? 16 : 0);
            } else {
                v = (int8_t)p[k];
            }
            out[pos - first + k] = ((float)v - z) * sc;
        }
        if ((st = mcf_got(f, codes + b0, b1 - b0, err)) != TBX_OK) return st;
        pos += n;
    }
    return TBX_OK;
}

tbx_status mcf_read_f32(tbx_file *f, uint64_t i, uint64_t first, uint64_t count, float *out,
                        tbx_error *err) {
    mcf_state *s = mcf_state_of(f);
    if (!s || i >= f->ntensors) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor", "bad handle or index");
    const tbx_tensor *t = &f->tensors[i];
    if (t->unreadable) return mcf_bare_error(f, t, err);
    if (count == 0) return TBX_OK;
    bool qk = mcf_is_qk(t->dtype);
    if (!qk && t->dtype != TBX_DT_MCF_INT8 && t->dtype != TBX_DT_MCF_INT4)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "dtype",
                       "tensor \"%s\": dtype cannot be decoded by the MCF driver", t->name);
    mcf_scr x = {0};
    tbx_status st = qk ? mcf_read_qk(f, &x, t, first, count, out, err)
                       : mcf_read_int(f, &x, t, first, count, out, err);
    mcf_scr_free(f, &x);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Validate: what mantle accepts and tensorbox reports                                         */
/* ------------------------------------------------------------------------------------------ */
static int mcf_dir_cmp(const void *a, const void *b) {
    const tbx_mcf_section *x = *(const tbx_mcf_section *const *)a, *y = *(const tbx_mcf_section *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static uint64_t mcf_dir_at(const mcf_state *s, const tbx_mcf_section *e) {
    return s->dir_off + (uint64_t)(e - s->dir) * MCF_DIR_ENTRY;
}

/* Is every byte of [a, b) zero? Else reports the first other one as padding (TBX_E_PADDING,
 * `field`, its offset) between `after` and `before`. */
static tbx_status mcf_zero_gap(tbx_file *f, mcf_scr *x, uint64_t a, uint64_t b, const char *field,
                               const char *after, const char *before, tbx_error *err) {
    tbx_status st = TBX_OK;
    while (a < b) {
        uint64_t k = b - a < (1u << 16) ? b - a : (1u << 16);
        const uint8_t *p = mcf_get(f, x, a, k, 0, 1u << 16, err, &st);
        if (!p) return st;
        uint64_t j = 0;
        while (j < k && !p[j]) j++;
        const uint8_t bad = j < k ? p[j] : 0;
        if ((st = mcf_got(f, a, j < k ? j + 1 : k, err)) != TBX_OK) return st;
        if (j < k)
            return tbx_file_problem(f, err, TBX_E_PADDING, a + j, field,
                                    "byte 0x%02x in the padding between %s and %s is not zero",
                                    bad, after, before);
        a += k;
    }
    return TBX_OK;
}

/* The bytes no section and no directory entry covers (from header_size to the file size) are
 * padding, which mantle's writer leaves zero: reports the first non-zero byte of each gap. The
 * sections are taken in offset order (v, n entries); overlapping ones cover their union. */
static tbx_status mcf_check_gaps(tbx_file *f, mcf_state *s, const tbx_mcf_section **v, size_t n,
                                 mcf_scr *x, tbx_error *err) {
    uint64_t size = f->src.size, pos = s->header_size;
    uint64_t dir_end = s->dir_off + (uint64_t)s->ndir * MCF_DIR_ENTRY;
    const char *after = "the header";
    bool dir_done = false;
    tbx_status st = TBX_OK;
    for (size_t i = 0; st == TBX_OK; ) {
        uint64_t lo, hi;
        const char *what;
        if (!dir_done && (i == n || s->dir_off <= v[i]->offset)) {
            lo = s->dir_off; hi = dir_end; what = "the directory"; dir_done = true;
        } else if (i < n) {
            lo = v[i]->offset; hi = v[i]->offset + v[i]->size; what = v[i]->name; i++;
        } else {
            lo = hi = size; what = "the end of the file";
        }
        if (lo > size) lo = size;
        if (hi > size) hi = size;
        if (lo > pos) st = mcf_zero_gap(f, x, pos, lo, "section.padding", after, what, err);
        if (hi > pos) { pos = hi; after = what; }
        if (lo == size && i == n && dir_done) break;
    }
    return st;
}

/* A tensor payload in TensorData: [lo, hi), tensor i. */
typedef struct mcf_span { uint64_t lo, hi; size_t i; } mcf_span;

static int mcf_span_cmp(const void *a, const void *b) {
    const mcf_span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : (x->i > y->i) - (x->i < y->i);
}

/* The padding inside one quantized payload at `lo`: between its 64-aligned regions and after
 * its codes (q/k: scales, sub-scales, codes; int8/int4: scale, zero, codes). */
static tbx_status mcf_payload_gaps(tbx_file *f, mcf_scr *x, const tbx_tensor *t, uint64_t lo,
                                   uint64_t hi, tbx_error *err) {
    uint64_t g[3][2];
    int n = 0;
    if (t->unreadable) return TBX_OK; /* bare codes: no regions (reported on their own) */
    if (mcf_is_qk(t->dtype)) {
        tbx_mcfq_layout L;
        if (tbx_mcfq_layout_get(mcf_kind(t->dtype), t->shape[0], t->shape[1], &L) != TBX_OK)
            return TBX_OK; /* refused at open already */
        const uint64_t after_scales = L.super ? L.sub_off : L.codes_off;
        g[n][0] = L.scales_off + L.scales_size; g[n++][1] = after_scales;
        if (L.super) { g[n][0] = L.sub_off + L.sub_size; g[n++][1] = L.codes_off; }
        g[n][0] = L.codes_off + L.codes_size; g[n++][1] = L.total;
    } else if (t->dtype == TBX_DT_MCF_INT8 || t->dtype == TBX_DT_MCF_INT4) {
        const bool act = t->quant && t->quant->domain == TBX_QDOMAIN_ACTIVATIONS;
        const uint64_t codes = t->dtype == TBX_DT_MCF_INT4 ? (t->nelems + 1) / 2 : t->nelems;
        g[n][0] = 4; g[n++][1] = 64;
        if (act) { g[n][0] = 68; g[n++][1] = 128; }
        g[n][0] = mcf_int_codes_off(act ? MCF_DOMAIN_ACTIVATIONS : 0) + codes; g[n++][1] = hi - lo;
    }
    tbx_status st = TBX_OK;
    for (int k = 0; k < n && st == TBX_OK; k++) {
        uint64_t a = lo + g[k][0], b = lo + g[k][1];
        if (b > hi) b = hi;
        if (a < b) {
            char what[64];
            snprintf(what, sizeof what, "the %s of \"%.32s\"",
                     k == 0 ? (mcf_is_qk(t->dtype) ? "scales" : "scale")
                            : k == n - 1 ? "codes" : mcf_is_qk(t->dtype) ? "sub-scales" : "zero",
                     t->name);
            st = mcf_zero_gap(f, x, a, b, "tensor.padding", what,
                              k == n - 1 ? "the payload's end" : "the next region", err);
        }
    }
    return st;
}

/* TensorData's padding, which mantle's writer leaves zero: the bytes no tensor payload covers,
 * and inside each quantized payload the bytes between its regions; in file order, the first
 * non-zero byte of each gap. Payloads stored once for several tensors are checked once. */
static tbx_status mcf_check_tensor_data(tbx_file *f, mcf_state *s, mcf_scr *x, tbx_error *err) {
    const tbx_mcf_section *td = mcf_find(s, MCF_SEC_TENSORDATA);
    if (!td || f->ntensors == 0) return TBX_OK;
    mcf_span *v = tbx_calloc(&f->al, f->ntensors, sizeof *v);
    if (!v) return tbx_err_nomem(err, "tensor payload list");
    size_t n = 0;
    for (size_t i = 0; i < f->ntensors; i++) {
        const tbx_component *c = &f->tensors[i].comp[0];
        if (c->stored_bytes == 0) continue;
        v[n].lo = c->offset;
        v[n].hi = c->offset + c->stored_bytes; /* inside TensorData: checked at open */
        v[n++].i = i;
    }
    qsort(v, n, sizeof *v, mcf_span_cmp);
    tbx_status st = TBX_OK;
    uint64_t pos = td->offset;
    const char *after = "the start of TensorData";
    size_t last = 0; /* the span reaching furthest so far (it ends at pos) */
    for (size_t k = 0; k < n && st == TBX_OK; k++) {
        const tbx_tensor *t = &f->tensors[v[k].i];
        if (v[k].lo > pos)
            st = mcf_zero_gap(f, x, pos, v[k].lo, "tensor_data.padding", after, t->name, err);
        /* a payload shared whole is an alias (pack --dedup); one that starts inside another's
         * and is not that same span covers part of it: mantle reads it, tensorbox reports it */
        if (st == TBX_OK && k > 0 && v[k].lo < pos &&
            !(v[k].lo == v[last].lo && v[k].hi == v[last].hi)) {
            const tbx_tensor *o = &f->tensors[v[last].i];
            st = tbx_file_problem(f, err, TBX_E_RANGE,
                                  s->ti_entries_at + (uint64_t)v[k].i * MCF_TI_ENTRY + 24,
                                  "tensor.data_off",
                                  "tensor \"%s\": payload [%" PRIu64 ", +%" PRIu64 ") overlaps "
                                  "part of tensor \"%s\"'s payload [%" PRIu64 ", +%" PRIu64 ") "
                                  "(tensors may share a whole payload only)", t->name, v[k].lo,
                                  v[k].hi - v[k].lo, o->name, v[last].lo,
                                  v[last].hi - v[last].lo);
        }
        if (st == TBX_OK && (k == 0 || v[k].lo != v[k - 1].lo))
            st = mcf_payload_gaps(f, x, t, v[k].lo, v[k].hi, err);
        if (v[k].hi > pos) { pos = v[k].hi; after = t->name; last = k; }
    }
    if (st == TBX_OK && td->offset + td->size > pos)
        st = mcf_zero_gap(f, x, pos, td->offset + td->size, "tensor_data.padding", after,
                          "the end of TensorData", err);
    tbx_free(&f->al, v, f->ntensors * sizeof *v);
    return st;
}

tbx_status mcf_validate(tbx_file *f, tbx_error *err) {
    mcf_state *s = mcf_state_of(f);
    if (!s) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, NULL, "not an MCF handle");
    tbx_status st = TBX_OK;
    if (s->mi_flags)
        st = tbx_file_problem(f, err, TBX_E_FORMAT, s->mi_flags_at, "modelinfo.flags",
                              "ModelInfo flags 0x%08" PRIx32 ", expected 0", s->mi_flags);
    for (size_t i = 0; i < s->ndir && st == TBX_OK; i++) {
        const tbx_mcf_section *first = &s->dir[s->first_of[i]];
        if (first != &s->dir[i])
            st = tbx_file_problem(f, err, TBX_E_DUPLICATE, mcf_dir_at(s, &s->dir[i]), "section.type",
                                  "section %zu repeats type 0x%04" PRIx32 " (%s) of section %zu; "
                                  "the first one is used", i, s->dir[i].type, s->dir[i].name,
                                  (size_t)(first - s->dir));
    }
    /* overlapping sections (by offset), then the padding between them */
    mcf_scr x = {0};
    if (st == TBX_OK && s->ndir > 0) {
        const tbx_mcf_section **v = tbx_calloc(&f->al, s->ndir, sizeof *v);
        if (!v) return tbx_err_nomem(err, "section list");
        for (size_t i = 0; i < s->ndir; i++) v[i] = &s->dir[i];
        qsort(v, s->ndir, sizeof *v, mcf_dir_cmp);
        uint64_t end = 0;
        const tbx_mcf_section *prev = NULL;
        for (size_t i = 0; i < s->ndir && st == TBX_OK; i++) {
            if (v[i]->size == 0) continue;
            if (prev && v[i]->offset < end)
                st = tbx_file_problem(f, err, TBX_E_RANGE, mcf_dir_at(s, v[i]) + 8, "section.offset",
                                      "section %s [%" PRIu64 ", +%" PRIu64 ") overlaps section %s "
                                      "ending at %" PRIu64, v[i]->name, v[i]->offset, v[i]->size,
                                      prev->name, end);
            if (v[i]->offset + v[i]->size > end) { end = v[i]->offset + v[i]->size; prev = v[i]; }
        }
        if (st == TBX_OK) st = mcf_check_gaps(f, s, v, s->ndir, &x, err);
        tbx_free(&f->al, v, s->ndir * sizeof *v);
    }
    if (st == TBX_OK) st = mcf_check_tensor_data(f, s, &x, err);
    bool qk = false;
    for (size_t i = 0; i < f->ntensors && st == TBX_OK; i++) {
        const tbx_tensor *t = &f->tensors[i];
        if (mcf_is_qk(t->dtype)) qk = true;
        if (mcf_is_quant(t->dtype) && !t->unreadable && (!s->rec_of || !s->rec_of[i]))
            st = tbx_file_problem(f, err, TBX_E_FORMAT, t->comp[0].offset, "quant_info",
                                  "quantized tensor \"%s\" has no QuantInfo record", t->name);
    }
    if (st == TBX_OK && qk && !(s->flags & MCF_FLAG_ALIGNED64))
        st = tbx_file_problem(f, err, TBX_E_FORMAT, 32, "header.flags",
                              "the file holds q/k tensors but header flag bit 0 "
                              "(TensorDataAligned64) is not set");
    for (size_t i = 0; i < s->nrecs && s->recs && st == TBX_OK; i++) {
        const mcf_rec *r = &s->recs[i];
        if (r->at == 0) continue;
        if (r->dup)
            st = tbx_file_problem(f, err, TBX_E_DUPLICATE, r->at, "quant.tensor_index",
                                  "QuantInfo record %zu repeats tensor %" PRIu32 "; the first "
                                  "record is used", i, r->tensor);
    }
    /* sub-scale bytes with the top two bits set (mantle masks them) */
    for (size_t i = 0; i < f->ntensors && st == TBX_OK; i++) {
        const tbx_tensor *t = &f->tensors[i];
        if (!mcf_is_qk(t->dtype) || t->dtype < TBX_DT_MCF_K6) continue;
        tbx_mcfq_layout L;
        tbx_mcfq_layout_get(mcf_kind(t->dtype), t->shape[0], t->shape[1], &L);
        for (uint64_t pos = 0; pos < L.sub_size && st == TBX_OK;) {
            uint64_t n = L.sub_size - pos < (1u << 20) ? L.sub_size - pos : (1u << 20);
            const uint8_t *p = mcf_get(f, &x, t->comp[0].offset + L.sub_off + pos, n, 0, 1u << 20,
                                       err, &st);
            if (!p) { mcf_scr_free(f, &x); return st; }
            uint64_t k = 0;
            while (k < n && !(p[k] & 0xC0)) k++;
            const uint8_t b = k < n ? p[k] : 0;
            st = mcf_got(f, t->comp[0].offset + L.sub_off + pos, k < n ? k + 1 : n, err);
            if (st == TBX_OK && k < n) {
                st = tbx_file_problem(f, err, TBX_E_FORMAT, t->comp[0].offset + L.sub_off + pos + k,
                                      "tensor.sub_scale", "tensor \"%s\": sub-scale byte 0x%02x "
                                      "has its top two bits set (they are ignored)", t->name, b);
                pos = L.sub_size;
            }
            pos += n;
        }
    }
    mcf_scr_free(f, &x);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Extras (tensorbox/mcf.h)                                                                    */
/* ------------------------------------------------------------------------------------------ */
uint64_t tbx_mcf_section_count(const tbx_file *f) {
    const mcf_state *s = mcf_state_of(f);
    return s ? s->ndir : 0;
}

tbx_status tbx_mcf_section_get(const tbx_file *f, uint64_t i, tbx_mcf_section *out) {
    const mcf_state *s = mcf_state_of(f);
    if (!s || !out || i >= s->ndir) return TBX_E_INVALID_ARG;
    *out = s->dir[i];
    return TBX_OK;
}

/* The "mcf_directory" member of the file's description (tbx_file_describe): every directory
 * entry, one item each (a directory may have hundreds of thousands). */
tbx_status mcf_describe(const tbx_file *f, tbx_describer *d, tbx_error *err) {
    const mcf_state *s = mcf_state_of(f);
    tbx_status st = TBX_OK;
    for (size_t i = 0; s && st == TBX_OK && i < s->ndir; i++) {
        const tbx_mcf_section *e = &s->dir[i];
        tbx_value *m = tbx_desc_map(d);
        tbx_desc_u64(d, m, "type", e->type);
        tbx_desc_str(d, m, "name", e->name);
        tbx_desc_u64(d, m, "version", e->version);
        tbx_desc_u64(d, m, "offset", e->offset);
        tbx_desc_u64(d, m, "size", e->size);
        st = tbx_desc_item(d, m, err);
    }
    return st;
}
