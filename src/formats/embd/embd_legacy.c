/*
 * embd_legacy.c - the reader of the legacy layout that cpp_embedder's own converter
 * (tools/convert_weights.py) writes, the format "embd-legacy" (read-only). It has nothing of the
 * specification's structure but the magic:
 *
 *   +------+---------+-------------+------------------------------------------------------+
 *   | EMBD | u32 = 1 | u32 ntensors| ntensors x { u32 name_len, name, u32 ndim (1..4),     |
 *   |      | version |             |              u32 dims[ndim], f32 data[prod(dims)] }    |
 *   +------+---------+-------------+------------------------------------------------------+
 *   | u32 vocab_count | vocab_count x { u32 len, token bytes }                   (to EOF) |
 *   +-----------------------------------------------------------------------------------------+
 *
 * No alignment, no checksums, no metadata, no special-token block. Tensors are reported with the
 * shape and the bytes as stored (the converter writes PyTorch's state_dict arrays, row-major,
 * linear weights [out, in]: see docs/formats/embd.md for what was checked). The vocabulary is
 * the section "vocab" (type 2: its bytes as stored, from vocab_count to the end of the file) and
 * tensorbox/embd.h, whose special-token ids are found by token text ("[PAD]", ...).
 */
#include "embd_int.h"

#include <inttypes.h>
#include <stdio.h>

#define EML_STATE_TAG 0x454D424Cu /* "EMBL" */

typedef struct eml_state {
    uint32_t tag;
    em_vocab vocab;
} eml_state;

void eml_close(tbx_file *f) {
    eml_state *s = f->drv_state;
    if (!s) return;
    em_vocab_free(&f->al, &s->vocab);
    tbx_free(&f->al, s, sizeof *s);
    f->drv_state = NULL;
}

const em_vocab *eml_file_vocab(const tbx_file *f) {
    if (!f || !f->drv || f->drv->format != TBX_FORMAT_EMBD_LEGACY || !f->drv_state) return NULL;
    const eml_state *s = f->drv_state;
    return s->tag == EML_STATE_TAG ? &s->vocab : NULL;
}

bool eml_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    if (len < 12 || memcmp(head, "EMBD", 4) != 0 || tbx_ld32(head + 4) != 1) return false;
    return !em_probe(head, len, file_size);
}

static tbx_status eml_tensor(tbx_file *f, tbx_cursor *c, uint32_t i, uint32_t count,
                             char **name, size_t *cap, tbx_error *err) {
    uint64_t at = c->pos;
    uint32_t nl = 0, ndim = 0;
    tbx_status st = tbx_cur_u32(c, &nl, "tensor.name_length", err);
    if (st != TBX_OK) return st;
    if (nl == 0)
        return tbx_err(err, TBX_E_FORMAT, at, "tensor.name_length",
                       "tensor %" PRIu32 " of %" PRIu32 " has an empty name", i, count);
    if (nl > f->limits.max_string_len)
        return tbx_err(err, TBX_E_LIMIT, at, "tensor.name_length",
                       "tensor name of %" PRIu32 " bytes exceeds max_string_len", nl);
    st = tbx_cur_need(c, nl, "tensor.name", err);
    if (st != TBX_OK) return st;
    char *p = *name;
    if ((size_t)nl + 1 > *cap) {
        p = *name ? tbx_realloc(&f->al, *name, *cap, (size_t)nl + 1)
                  : tbx_malloc(&f->al, (size_t)nl + 1);
        if (!p) return tbx_err_nomem(err, "tensor name");
        *name = p;
        *cap = (size_t)nl + 1;
    }
    st = tbx_cur_bytes(c, p, nl, "tensor.name", err);
    if (st != TBX_OK) return st;
    p[nl] = 0;
    char q[96];
    tbx_quote_bytes(q, sizeof q, p, nl, 64);
    size_t bad = 0;
    if (!tbx_utf8_valid(p, nl, &bad) || memchr(p, 0, nl))
        return tbx_err(err, TBX_E_FORMAT, at + 4 + bad, "tensor.name",
                       "tensor name \"%s\" is not valid UTF-8 without NUL", q);
    uint64_t at_nd = c->pos;
    st = tbx_cur_u32(c, &ndim, "tensor.ndim", err);
    if (st != TBX_OK) return st;
    if (ndim < 1 || ndim > 4)
        return tbx_err(err, TBX_E_FORMAT, at_nd, "tensor.ndim",
                       "tensor \"%s\": ndim is %" PRIu32 ", expected 1..4", q, ndim);
    uint64_t shape[4];
    for (uint32_t k = 0; k < ndim; k++) {
        uint32_t d = 0;
        st = tbx_cur_u32(c, &d, "tensor.dims", err);
        if (st != TBX_OK) return st;
        shape[k] = d;
    }
    uint64_t nbytes = 0;
    if (tbx_dtype_core_nbytes_shape(TBX_DT_F32, shape, ndim, &nbytes) != TBX_OK)
        return tbx_err(err, TBX_E_OVERFLOW, at_nd + 4, "tensor.dims",
                       "tensor \"%s\": its byte size overflows 64 bits", q);
    uint64_t data_at = c->pos;
    st = tbx_cur_need(c, nbytes, "tensor.data", err);
    if (st != TBX_OK) return st;
    st = tbx_cur_skip(c, nbytes, "tensor.data", err);
    if (st != TBX_OK) return st;
    tbx_tensor *t = NULL;
    st = tbx_file_add_tensor(f, p, nl, TBX_DT_F32, shape, ndim, 1, at, &t, err);
    if (st != TBX_OK) return st;
    tbx_comp_set_raw(t, TBX_DT_F32, data_at, nbytes);
    return TBX_OK;
}

tbx_status eml_open(tbx_file *f, tbx_error *err) {
    eml_state *s = tbx_calloc(&f->al, 1, sizeof *s);
    if (!s) return tbx_err_nomem(err, "EMBD legacy state");
    s->tag = EML_STATE_TAG;
    f->drv_state = s;
    uint64_t size = f->src.size;
    tbx_cursor c;
    tbx_status st = tbx_cursor_init(&c, &f->src, &f->al, 0, size, err);
    if (st != TBX_OK) return st;
    uint8_t magic[4];
    uint32_t version = 0, count = 0;
    st = tbx_cur_bytes(&c, magic, 4, "magic", err);
    if (st == TBX_OK && memcmp(magic, "EMBD", 4) != 0)
        st = tbx_err(err, TBX_E_BAD_MAGIC, 0, "magic", "magic is not \"EMBD\"");
    if (st == TBX_OK) st = tbx_cur_u32(&c, &version, "version", err);
    if (st == TBX_OK && version != 1)
        st = tbx_err(err, TBX_E_BAD_VERSION, 4, "version",
                     "legacy layout version %" PRIu32 "; only version 1 exists", version);
    if (st == TBX_OK) st = tbx_cur_u32(&c, &count, "num_tensors", err);
    if (st == TBX_OK) {
        f->version = 1;
        /* each tensor takes at least 16 bytes (name length, 1 name byte, ndim, 1 dim) */
        if (count > f->limits.max_tensors)
            st = tbx_err(err, TBX_E_LIMIT, 8, "num_tensors",
                         "%" PRIu32 " tensors exceed max_tensors = %" PRIu64, count,
                         f->limits.max_tensors);
        else if ((uint64_t)count * 13 > tbx_cursor_remaining(&c))
            st = tbx_err(err, TBX_E_TRUNCATED, 8, "num_tensors",
                         "%" PRIu32 " tensors need at least %" PRIu64 " bytes, %" PRIu64 " remain",
                         count, (uint64_t)count * 13, tbx_cursor_remaining(&c));
    }
    if (st == TBX_OK) st = tbx_file_reserve_tensors(f, count, err);
    char *name = NULL;
    size_t name_cap = 0;
    for (uint32_t i = 0; st == TBX_OK && i < count; i++)
        st = eml_tensor(f, &c, i, count, &name, &name_cap, err);
    if (name) tbx_free(&f->al, name, name_cap);
    uint64_t vat = c.pos;
    tbx_cursor_free(&c);
    if (st != TBX_OK) return st;
    uint64_t vlen = size - vat;
    if (vlen > f->limits.max_header_bytes)
        return tbx_err(err, TBX_E_LIMIT, vat, "vocab_count",
                       "the vocabulary of %" PRIu64 " bytes exceeds max_header_bytes", vlen);
    /* the bytes while they are parsed, then the tokens (offsets of 4 bytes, at most one per 4
     * bytes of the file, and their bytes) */
    st = tbx_file_charge(f, 2 * vlen + 4 + 2 * TBX_HEAP_OVERHEAD, vat, "vocab_count", err);
    if (st != TBX_OK) return st;
    uint8_t *buf = tbx_malloc(&f->al, (size_t)vlen);
    if (!buf) return tbx_err_nomem(err, "vocabulary");
    st = tbx_source_read(&f->src, vat, buf, (size_t)vlen, "vocab_count", err);
    if (st == TBX_OK) st = em_vocab_parse_legacy(&f->al, buf, (size_t)vlen, vat, &s->vocab, err);
    tbx_free(&f->al, buf, (size_t)vlen);
    tbx_file_uncharge(f, vlen);
    if (st == TBX_OK) st = tbx_file_add_section(f, "vocab", EM_VOCAB_LEGACY, vat, vlen, err);
    return st;
}
