/*
 * embd.c - the EMBD (.weights) reader: open, validation, the read-side extras (tensorbox/embd.h).
 *
 * The driver's files: embd_common.c (dtype codes, FNV-1a, CRC-32, vocabulary parsers: used by
 * the readers and the writer), embd.c (reading the spec layout), embd_legacy.c (reading the
 * legacy layout cpp_embedder writes), embd_write.c (writing), embd_driver.c (the driver tables,
 * which alone refer to both halves).
 *
 * EMBD is the weight file of the cpp_embedder sentence embedder (../shared/specs/embd.md, with
 * the decisions of NOTES.md): one little-endian file of five parts, in this order, each starting
 * 8-aligned (tensor data 64-aligned), every gap zero:
 *
 *   0      4     6     8     12    16    20    24    28    32    36    40      48      56   60  64
 *   +------+-----+-----+-----+-----+-----+-----+-----+-----+-----+-------+-------+----+---+
 *   | EMBD | maj | min |flags|meta_|meta_|voc_ |voc_ |idx_ |idx_ |data_|data_  |total_ |hdr |res|
 *   |      |  1  |  0  |     | off | size| off | size| off |count| off |size   |size   |crc |=0 |
 *   +------+-----+-----+-----+-----+-----+-----+-----+-----+-----+-----+-------+-------+----+---+
 *   | metadata @meta_off: u32 count, u32 total_size, count x (u16 klen, u16 vlen, key, value)  |
 *   | vocab    @voc_off:  u32 count, u32 total_size, u32 special (relative), count x (u16 len, |
 *   |                     bytes), then pad/unk/cls/sep/mask ids (5 x u32)  [VOCAB_EMBEDDED]   |
 *   | index    @idx_off:  count x 32-byte descriptors {u32 fnv1a, u8 dtype, u8 ndim, u16       |
 *   |                     name_len, u32 shape[4], u64 data_offset}, then the names            |
 *   | data     @data_off: tensors at data_off + data_offset (64-aligned when TENSORS_ALIGNED)|
 *   | footer   (16 B):    u32 data_crc, u32 file_crc, "DBME", u32 reserved = 0               |
 *   +--------------------------------------------------------------------------------------------+
 *
 * Sizes in the header cover whole sections (their own header included); total_size fields only
 * the entries. header_crc covers bytes [0, 56), data_crc [data_off, data_off + data_size), file_crc
 * every byte before the footer; with CHECKSUM_ENABLED clear all three are 0. The header checksum
 * is verified at every open; the other two when the handle is opened with TBX_OPEN_VERIFY_DIGESTS
 * (one streaming pass at open), which tbx_validate_path does. Metadata values are UTF-8 strings
 * and are reported as such; the vocabulary is the section "vocab" (type 1, the bytes as stored)
 * and tensorbox/embd.h. Structural violations fail the open with the field and the byte offset;
 * recoverable ones (checksums, name hashes, flags and reserved fields, unaligned or overlapping
 * tensors) go through tbx_file_problem; padding and missing required metadata are checked by
 * validate. Every rule: docs/formats/embd.md.
 */
#include "embd_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define EM_STATE_TAG 0x454D4244u /* "EMBD" */
#define EM_CHUNK ((size_t)1 << 20)

/* The data and file checksums of a handle opened with TBX_OPEN_VERIFY_DIGESTS. */
enum { EM_CRC_PENDING = 0, EM_CRC_OK = 1, EM_CRC_BAD = 2 };

typedef struct em_state {
    uint32_t tag;
    tbx_embd_header h;
    em_vocab vocab;
    bool has_vocab;
    bool crc_done;        /* data and file checksums verified (or disabled) */
    uint64_t names_end;   /* end of the tensor index's name table */
    uint64_t *order;      /* tensor indices sorted by data offset */
    size_t norder;
    /* Deferred verification (a strict, buffered handle: pread or callback source): the data
     * and file CRCs are verified by the first read of tensor bytes, over the bytes it serves
     * (em_deferred_pass); until then every tensor is pending (em_raw_pending) and the core
     * routes its reads through the driver. crc_state is read without the lock; the pass, its
     * result and bad_err are under mu. */
    bool deferred;
    bool mu_init;
    _Atomic int crc_state;
    pthread_mutex_t mu;
    tbx_status bad_st;
    tbx_error bad_err;
} em_state;

void em_close(tbx_file *f) {
    em_state *s = f->drv_state;
    if (!s) return;
    if (s->mu_init) pthread_mutex_destroy(&s->mu);
    em_vocab_free(&f->al, &s->vocab);
    tbx_free(&f->al, s->order, s->norder * sizeof *s->order);
    tbx_free(&f->al, s, sizeof *s);
    f->drv_state = NULL;
}

static const em_state *em_state_of(const tbx_file *f) {
    if (!f || !f->drv || f->drv->format != TBX_FORMAT_EMBD || !f->drv_state) return NULL;
    const em_state *s = f->drv_state;
    return s->tag == EM_STATE_TAG ? s : NULL;
}

const em_vocab *em_file_vocab(const tbx_file *f) {
    const em_state *s = em_state_of(f);
    return s && s->has_vocab ? &s->vocab : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Header, footer, section layout                                                              */
/* ------------------------------------------------------------------------------------------ */
static tbx_status em_read_header(tbx_file *f, em_state *s, tbx_cursor *c, tbx_error *err) {
    tbx_embd_header *h = &s->h;
    uint64_t size = f->src.size;
    if (size < EM_HEADER_SIZE + EM_FOOTER_SIZE)
        return tbx_err(err, TBX_E_TRUNCATED, 0, "header",
                       "an EMBD file needs at least %u bytes (64-byte header, 16-byte footer), "
                       "this one has %" PRIu64, EM_HEADER_SIZE + EM_FOOTER_SIZE, size);
    uint8_t magic[4];
    tbx_status st = tbx_cur_bytes(c, magic, 4, "header.magic", err);
    if (st != TBX_OK) return st;
    if (memcmp(magic, "EMBD", 4) != 0)
        return tbx_err(err, TBX_E_BAD_MAGIC, 0, "header.magic", "magic is not \"EMBD\"");
    h->struct_size = sizeof *h;
    st = tbx_cur_u16(c, &h->version_major, "header.version_major", err);
    if (st == TBX_OK) st = tbx_cur_u16(c, &h->version_minor, "header.version_minor", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->flags, "header.flags", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->metadata_offset, "header.metadata_offset", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->metadata_size, "header.metadata_size", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->vocab_offset, "header.vocab_offset", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->vocab_size, "header.vocab_size", err);
    if (st == TBX_OK)
        st = tbx_cur_u32(c, &h->tensor_index_offset, "header.tensor_index_offset", err);
    if (st == TBX_OK)
        st = tbx_cur_u32(c, &h->tensor_index_count, "header.tensor_index_count", err);
    if (st == TBX_OK)
        st = tbx_cur_u32(c, &h->tensor_data_offset, "header.tensor_data_offset", err);
    if (st == TBX_OK) st = tbx_cur_u64(c, &h->tensor_data_size, "header.tensor_data_size", err);
    if (st == TBX_OK) st = tbx_cur_u64(c, &h->total_file_size, "header.total_file_size", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->header_checksum, "header.header_checksum", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->reserved, "header.reserved", err);
    /* footer */
    uint8_t end_magic[4];
    if (st == TBX_OK) st = tbx_cur_seek(c, size - EM_FOOTER_SIZE, "footer", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->data_checksum, "footer.data_checksum", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->file_checksum, "footer.file_checksum", err);
    if (st == TBX_OK) st = tbx_cur_bytes(c, end_magic, 4, "footer.magic_end", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &h->footer_reserved, "footer.reserved", err);
    if (st != TBX_OK) return st;
    f->version = h->version_major;

    if (h->version_major != EM_VERSION_MAJOR)
        return tbx_err(err, TBX_E_BAD_VERSION, 4, "header.version_major",
                       "version %u.%u; this reader knows major version 1",
                       (unsigned)h->version_major, (unsigned)h->version_minor);
    if (h->total_file_size > size)
        return tbx_err(err, TBX_E_TRUNCATED, 48, "header.total_file_size",
                       "total_file_size is %" PRIu64 ", but the file has %" PRIu64
                       " bytes (truncated)", h->total_file_size, size);
    if (h->total_file_size < size)
        return tbx_err(err, TBX_E_FORMAT, 48, "header.total_file_size",
                       "total_file_size is %" PRIu64 ", but the file has %" PRIu64
                       " bytes (trailing bytes)", h->total_file_size, size);
    if (memcmp(end_magic, "DBME", 4) != 0)
        return tbx_err(err, TBX_E_BAD_MAGIC, size - 8, "footer.magic_end",
                       "end magic is not \"DBME\"");
    if (h->flags & EM_F_COMPRESSED)
        return tbx_err(err, TBX_E_UNSUPPORTED, 8, "header.flags",
                       "flags 0x%08" PRIx32 " set COMPRESSED, which the specification reserves "
                       "without defining a compression", h->flags);
    if ((h->flags & ~EM_F_KNOWN) &&
        (st = tbx_file_problem(f, err, TBX_E_FORMAT, 8, "header.flags",
                               "flags 0x%08" PRIx32 " set reserved bits 4-31", h->flags)) != TBX_OK)
        return st;
    if (h->reserved != 0 &&
        (st = tbx_file_problem(f, err, TBX_E_FORMAT, 60, "header.reserved",
                               "reserved is 0x%08" PRIx32 ", expected 0", h->reserved)) != TBX_OK)
        return st;
    if (h->footer_reserved != 0 &&
        (st = tbx_file_problem(f, err, TBX_E_FORMAT, size - 4, "footer.reserved",
                               "reserved is 0x%08" PRIx32 ", expected 0", h->footer_reserved)) !=
            TBX_OK)
        return st;
    if (h->flags & EM_F_CHECKSUM) {
        uint8_t head[EM_HEADER_CRC_LEN];
        st = tbx_source_read(&f->src, 0, head, sizeof head, "header", err);
        if (st != TBX_OK) return st;
        uint32_t crc = em_crc32(0, head, sizeof head);
        if (crc != h->header_checksum &&
            (st = tbx_file_problem(f, err, TBX_E_CHECKSUM, 56, "header.header_checksum",
                                   "header_checksum is 0x%08" PRIx32 ", but the CRC-32 of bytes "
                                   "[0, 56) is 0x%08" PRIx32, h->header_checksum, crc)) != TBX_OK)
            return st;
    } else {
        struct { uint32_t v; uint64_t at; const char *field; } z[3] = {
            {h->header_checksum, 56, "header.header_checksum"},
            {h->data_checksum, size - 16, "footer.data_checksum"},
            {h->file_checksum, size - 12, "footer.file_checksum"},
        };
        for (int i = 0; i < 3; i++)
            if (z[i].v != 0 &&
                (st = tbx_file_problem(f, err, TBX_E_FORMAT, z[i].at, z[i].field,
                                       "is 0x%08" PRIx32 " but CHECKSUM_ENABLED is clear (expected "
                                       "0)", z[i].v)) != TBX_OK)
                return st;
    }
    return TBX_OK;
}

/* Checks that section [off, off + len) starts at or after `min`, 8-aligned, and ends before the
 * footer. */
static tbx_status em_check_section(const tbx_file *f, uint64_t off, uint64_t len, uint64_t min,
                                   uint64_t at_off, uint64_t at_len, const char *foff,
                                   const char *flen, const char *what, tbx_error *err) {
    uint64_t limit = f->src.size - EM_FOOTER_SIZE;
    if (off < min)
        return tbx_err(err, TBX_E_RANGE, at_off, foff,
                       "the %s starts at byte %" PRIu64 ", before byte %" PRIu64 " where the "
                       "previous part ends (sections must not overlap and must be in order)",
                       what, off, min);
    if (off % EM_SECTION_ALIGN)
        return tbx_err(err, TBX_E_RANGE, at_off, foff,
                       "the %s starts at byte %" PRIu64 ", not a multiple of 8", what, off);
    if (off > limit)
        return tbx_err(err, TBX_E_RANGE, at_off, foff,
                       "the %s starts at byte %" PRIu64 ", past the footer at byte %" PRIu64,
                       what, off, limit);
    if (len > limit - off)
        return tbx_err(err, TBX_E_RANGE, at_len, flen,
                       "the %s [%" PRIu64 ", +%" PRIu64 ") runs past the footer at byte %" PRIu64,
                       what, off, len, limit);
    if (len > f->limits.max_header_bytes)
        return tbx_err(err, TBX_E_LIMIT, at_len, flen,
                       "the %s of %" PRIu64 " bytes exceeds max_header_bytes = %" PRIu64, what,
                       len, f->limits.max_header_bytes);
    return TBX_OK;
}

static uint64_t em_align8(uint64_t x) { return (x + 7) & ~(uint64_t)7; }

static tbx_status em_check_layout(tbx_file *f, em_state *s, tbx_error *err) {
    const tbx_embd_header *h = &s->h;
    uint64_t size = f->src.size;
    if (h->metadata_size < EM_META_HEAD)
        return tbx_err(err, TBX_E_FORMAT, 16, "header.metadata_size",
                       "metadata_size is %" PRIu32 ", smaller than the 8-byte metadata header",
                       h->metadata_size);
    tbx_status st = em_check_section(f, h->metadata_offset, h->metadata_size, EM_HEADER_SIZE, 12,
                                     16, "header.metadata_offset", "header.metadata_size",
                                     "metadata section", err);
    if (st != TBX_OK) return st;
    uint64_t prev = (uint64_t)h->metadata_offset + h->metadata_size;
    if (h->flags & EM_F_VOCAB) {
        if (h->vocab_size < EM_VOCAB_HEAD + EM_SPECIAL_SIZE)
            return tbx_err(err, TBX_E_FORMAT, 24, "header.vocab_size",
                           "vocab_size is %" PRIu32 ", smaller than the 12-byte vocabulary header "
                           "and the 20-byte special-token block", h->vocab_size);
        st = em_check_section(f, h->vocab_offset, h->vocab_size, em_align8(prev), 20, 24,
                              "header.vocab_offset", "header.vocab_size", "vocabulary section",
                              err);
        if (st != TBX_OK) return st;
        prev = (uint64_t)h->vocab_offset + h->vocab_size;
    } else if (h->vocab_offset != 0 || h->vocab_size != 0) {
        return tbx_err(err, TBX_E_FORMAT, 20, "header.vocab_offset",
                       "VOCAB_EMBEDDED is clear, but vocab_offset/vocab_size are %" PRIu32 "/%"
                       PRIu32 " (expected 0/0)", h->vocab_offset, h->vocab_size);
    }
    uint64_t n = h->tensor_index_count;
    if (n > f->limits.max_tensors)
        return tbx_err(err, TBX_E_LIMIT, 32, "header.tensor_index_count",
                       "%" PRIu64 " tensors exceed max_tensors = %" PRIu64, n,
                       f->limits.max_tensors);
    st = em_check_section(f, h->tensor_index_offset, n * EM_DESC_SIZE, em_align8(prev), 28, 32,
                          "header.tensor_index_offset", "header.tensor_index_count",
                          "tensor index", err);
    if (st != TBX_OK) return st;
    uint64_t idx_end = h->tensor_index_offset + n * EM_DESC_SIZE;
    uint64_t dalign = (h->flags & EM_F_ALIGNED) ? EM_TENSOR_ALIGN : EM_SECTION_ALIGN;
    if (h->tensor_data_offset < idx_end)
        return tbx_err(err, TBX_E_RANGE, 36, "header.tensor_data_offset",
                       "tensor data starts at byte %" PRIu32 ", inside the tensor index "
                       "(its %" PRIu64 " descriptors end at byte %" PRIu64 ")",
                       h->tensor_data_offset, n, idx_end);
    if (h->tensor_data_offset % dalign)
        return tbx_err(err, TBX_E_RANGE, 36, "header.tensor_data_offset",
                       "tensor data starts at byte %" PRIu32 ", not a multiple of %" PRIu64,
                       h->tensor_data_offset, dalign);
    uint64_t data_end;
    if (!tbx_add_u64(h->tensor_data_offset, h->tensor_data_size, &data_end) ||
        data_end != size - EM_FOOTER_SIZE)
        return tbx_err(err, TBX_E_RANGE, 40, "header.tensor_data_size",
                       "tensor data [%" PRIu32 ", +%" PRIu64 ") must end where the footer starts "
                       "(byte %" PRIu64 ")", h->tensor_data_offset, h->tensor_data_size,
                       size - EM_FOOTER_SIZE);
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata, vocabulary, tensor index                                                          */
/* ------------------------------------------------------------------------------------------ */
static tbx_status em_read_meta(tbx_file *f, em_state *s, tbx_cursor *c, tbx_error *err) {
    const tbx_embd_header *h = &s->h;
    uint64_t mo = h->metadata_offset, end = mo + h->metadata_size;
    c->pos = mo;
    c->end = end;
    uint32_t count = 0, total = 0;
    tbx_status st = tbx_cur_u32(c, &count, "metadata.entry_count", err);
    if (st == TBX_OK) st = tbx_cur_u32(c, &total, "metadata.total_size", err);
    if (st != TBX_OK) return st;
    if ((uint64_t)total != h->metadata_size - EM_META_HEAD)
        return tbx_err(err, TBX_E_FORMAT, mo + 4, "metadata.total_size",
                       "total_size is %" PRIu32 ", but metadata_size %" PRIu32 " leaves %" PRIu32
                       " bytes for entries after the 8-byte header", total, h->metadata_size,
                       h->metadata_size - EM_META_HEAD);
    if ((uint64_t)count * 4 > total)
        return tbx_err(err, TBX_E_TRUNCATED, mo, "metadata.entry_count",
                       "%" PRIu32 " entries need at least %" PRIu64 " bytes, total_size is %"
                       PRIu32, count, (uint64_t)count * 4, total);
    if (count > f->limits.max_metadata_entries)
        return tbx_err(err, TBX_E_LIMIT, mo, "metadata.entry_count",
                       "%" PRIu32 " entries exceed max_metadata_entries = %" PRIu64, count,
                       f->limits.max_metadata_entries);
    /* key (NUL-terminated) then value: each at most 65535 bytes */
    char *key = tbx_malloc(&f->al, 2 * 65536);
    if (!key) return tbx_err_nomem(err, "metadata buffer");
    char *buf = key + 65536;
    for (uint32_t i = 0; i < count && st == TBX_OK; i++) {
        uint64_t at = c->pos;
        uint16_t kl = 0, vl = 0;
        st = tbx_cur_u16(c, &kl, "metadata.key_length", err);
        if (st == TBX_OK) st = tbx_cur_u16(c, &vl, "metadata.value_length", err);
        if (st == TBX_OK) st = tbx_cur_need(c, (uint64_t)kl + vl, "metadata.key_length", err);
        if (st != TBX_OK) break;
        if (kl == 0) {
            st = tbx_err(err, TBX_E_FORMAT, at, "metadata.key_length",
                         "metadata entry %" PRIu32 " has an empty key", i);
            break;
        }
        st = tbx_cur_bytes(c, key, kl, "metadata.key", err);
        if (st != TBX_OK) break;
        size_t bad = 0;
        if (!tbx_utf8_valid(key, kl, &bad)) {
            st = tbx_err(err, TBX_E_FORMAT, at + 4 + bad, "metadata.key",
                         "metadata key %" PRIu32 " is not valid UTF-8", i);
            break;
        }
        key[kl] = 0;
        st = tbx_cur_bytes(c, buf, vl, "metadata.value", err);
        if (st != TBX_OK) break;
        if (!tbx_utf8_valid(buf, vl, &bad)) {
            char q[96];
            tbx_quote_bytes(q, sizeof q, key, kl, 64);
            st = tbx_err(err, TBX_E_FORMAT, at + 4 + kl + bad, "metadata.value",
                         "the value of metadata \"%s\" is not valid UTF-8", q);
            break;
        }
        tbx_value *v = tbx_val_string(&f->al, TBX_V_STRING, buf, vl);
        if (!v) { st = tbx_err_nomem(err, "metadata value"); break; }
        st = tbx_file_add_meta(f, key, kl, v, at, err);
    }
    tbx_free(&f->al, key, 2 * 65536);
    if (st == TBX_OK && c->pos != end)
        st = tbx_err(err, TBX_E_FORMAT, c->pos, "metadata.total_size",
                     "the %" PRIu32 " entries end at byte %" PRIu64 ", but the metadata section "
                     "ends at byte %" PRIu64, count, c->pos, end);
    return st;
}

static tbx_status em_read_vocab(tbx_file *f, em_state *s, tbx_cursor *c, tbx_error *err) {
    const tbx_embd_header *h = &s->h;
    if (!(h->flags & EM_F_VOCAB)) return TBX_OK;
    c->pos = h->vocab_offset;
    c->end = (uint64_t)h->vocab_offset + h->vocab_size;
    /* the section's bytes while they are parsed, then the tokens: a 4-byte offset each (two
     * bytes in the file for an empty token) and their bytes */
    tbx_status st = tbx_file_charge(f, h->vocab_size, h->vocab_offset, "vocab", err);
    if (st != TBX_OK) return st;
    uint8_t *buf = tbx_malloc(&f->al, h->vocab_size);
    if (!buf) return tbx_err_nomem(err, "vocabulary section");
    st = tbx_cur_bytes(c, buf, h->vocab_size, "vocab", err);
    if (st == TBX_OK && h->vocab_size >= 4) {
        uint64_t count = tbx_ld32(buf);
        if (count > h->vocab_size / 2) count = h->vocab_size / 2; /* the parser refuses more */
        st = tbx_file_charge(f, (count + 1) * 4 + h->vocab_size + 2 * TBX_HEAP_OVERHEAD,
                             h->vocab_offset, "vocab.token_count", err);
    }
    if (st == TBX_OK)
        st = em_vocab_parse(&f->al, buf, h->vocab_size, h->vocab_offset, &s->vocab, err);
    tbx_free(&f->al, buf, h->vocab_size);
    tbx_file_uncharge(f, h->vocab_size);
    if (st != TBX_OK) return st;
    s->has_vocab = true;
    return tbx_file_add_section(f, "vocab", EM_VOCAB_SPEC, h->vocab_offset, h->vocab_size, err);
}

/* Tensors by data offset, then index (for the overlap and padding checks). */
typedef struct em_pos { uint64_t off, idx; } em_pos;
static int em_pos_cmp(const void *a, const void *b) {
    const em_pos *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static tbx_status em_read_index(tbx_file *f, em_state *s, tbx_cursor *c, tbx_error *err) {
    const tbx_embd_header *h = &s->h;
    uint64_t n = h->tensor_index_count, to = h->tensor_index_offset, tdo = h->tensor_data_offset;
    c->pos = to;
    c->end = tdo;
    /* the descriptors (n * 32 bytes, inside the file: checked by em_check_layout) */
    size_t dlen = (size_t)(n * EM_DESC_SIZE);
    uint8_t *d = tbx_malloc(&f->al, dlen ? dlen : 1);
    if (!d) return tbx_err_nomem(err, "tensor index");
    tbx_status st = tbx_cur_bytes(c, d, dlen, "tensor_index", err);
    uint64_t names_end = to + n * EM_DESC_SIZE;
    for (uint64_t i = 0; st == TBX_OK && i < n; i++) {
        uint16_t nl = tbx_ld16(d + i * EM_DESC_SIZE + 6);
        if (nl == 0)
            st = tbx_err(err, TBX_E_FORMAT, to + i * EM_DESC_SIZE + 6, "tensor.name_length",
                         "tensor %" PRIu64 " has an empty name", i);
        else if ((names_end += nl) > tdo)
            st = tbx_err(err, TBX_E_RANGE, to + i * EM_DESC_SIZE + 6, "tensor.name_length",
                         "the names of tensors 0..%" PRIu64 " end at byte %" PRIu64 ", past the "
                         "start of tensor data at byte %" PRIu64, i, names_end, tdo);
    }
    s->names_end = names_end;
    if (st == TBX_OK) st = tbx_file_reserve_tensors(f, (size_t)n, err);
    char *name = tbx_malloc(&f->al, 65536);
    if (!name) { tbx_free(&f->al, d, dlen ? dlen : 1); return tbx_err_nomem(err, "tensor name"); }
    uint64_t maxend = 0;
    for (uint64_t i = 0; st == TBX_OK && i < n; i++) {
        const uint8_t *e = d + i * EM_DESC_SIZE;
        uint64_t at = to + i * EM_DESC_SIZE;
        uint32_t hash = tbx_ld32(e);
        uint8_t code = e[4], ndim = e[5];
        uint16_t nl = tbx_ld16(e + 6);
        uint64_t doff = tbx_ld64(e + 24);
        uint64_t name_at = c->pos;
        st = tbx_cur_bytes(c, name, nl, "tensor.name", err);
        if (st != TBX_OK) break;
        name[nl] = 0;
        char q[96];
        tbx_quote_bytes(q, sizeof q, name, nl, 64);
        size_t bad = 0;
        if (!tbx_utf8_valid(name, nl, &bad) || memchr(name, 0, nl)) {
            st = tbx_err(err, TBX_E_FORMAT, name_at, "tensor.name",
                         "the name of tensor %" PRIu64 " (\"%s\") is not valid UTF-8 without NUL",
                         i, q);
            break;
        }
        if (code >= EM_NDTYPES) {
            st = tbx_err(err, TBX_E_FORMAT, at + 4, "tensor.dtype",
                         "tensor \"%s\": dtype code %u is not one of 0..8", q, (unsigned)code);
            break;
        }
        if (ndim < 1 || ndim > 4) {
            st = tbx_err(err, TBX_E_FORMAT, at + 5, "tensor.ndim",
                         "tensor \"%s\": ndim is %u, expected 1..4", q, (unsigned)ndim);
            break;
        }
        uint64_t shape[4];
        for (unsigned k = 0; k < 4 && st == TBX_OK; k++) {
            shape[k] = tbx_ld32(e + 8 + 4 * k);
            if (k >= ndim && shape[k] != 0)
                st = tbx_err(err, TBX_E_FORMAT, at + 8 + 4 * k, "tensor.shape",
                             "tensor \"%s\": shape[%u] is %" PRIu64 " but ndim is %u (expected 0)",
                             q, k, shape[k], (unsigned)ndim);
        }
        if (st != TBX_OK) break;
        uint32_t want = em_fnv1a(name, nl);
        if (hash != want &&
            (st = tbx_file_problem(f, err, TBX_E_CHECKSUM, at, "tensor.name_hash",
                                   "tensor \"%s\": name_hash is 0x%08" PRIx32 ", but the FNV-1a "
                                   "hash of its name is 0x%08" PRIx32, q, hash, want)) != TBX_OK)
            break;
        tbx_dtype dt = em_dtypes[code];
        uint64_t nbytes = 0, end = 0;
        st = tbx_dtype_core_nbytes_shape(dt, shape, ndim, &nbytes);
        if (st != TBX_OK) {
            st = tbx_err(err, TBX_E_OVERFLOW, at + 8, "tensor.shape",
                         "tensor \"%s\": its byte size overflows 64 bits", q);
            break;
        }
        if (!tbx_add_u64(doff, nbytes, &end) || end > h->tensor_data_size) {
            st = tbx_err(err, TBX_E_RANGE, at + 24, "tensor.data_offset",
                         "tensor \"%s\": data [%" PRIu64 ", +%" PRIu64 ") runs past the tensor "
                         "data section of %" PRIu64 " bytes", q, doff, nbytes,
                         h->tensor_data_size);
            break;
        }
        if (nbytes > f->limits.max_tensor_bytes) {
            st = tbx_err(err, TBX_E_LIMIT, at + 8, "tensor.shape",
                         "tensor \"%s\": %" PRIu64 " bytes exceed max_tensor_bytes", q, nbytes);
            break;
        }
        if ((h->flags & EM_F_ALIGNED) && doff % EM_TENSOR_ALIGN &&
            (st = tbx_file_problem(f, err, TBX_E_RANGE, at + 24, "tensor.data_offset",
                                   "tensor \"%s\": data_offset %" PRIu64 " is not a multiple of "
                                   "64, but TENSORS_ALIGNED is set", q, doff)) != TBX_OK)
            break;
        if (end > maxend) maxend = end;
        tbx_tensor *t = NULL;
        st = tbx_file_add_tensor(f, name, nl, dt, shape, ndim, 1, at, &t, err);
        if (st != TBX_OK) break;
        tbx_comp_set_raw(t, dt, tdo + doff, nbytes);
    }
    tbx_free(&f->al, d, dlen ? dlen : 1);
    tbx_free(&f->al, name, 65536);
    if (st != TBX_OK) return st;
    /* overlaps, in offset order: the order kept, and the sort's pairs while they live */
    size_t nt = f->ntensors ? f->ntensors : 1;
    st = tbx_file_charge(f, (uint64_t)nt * (sizeof *s->order + sizeof(em_pos)), to,
                         "tensor_index", err);
    if (st != TBX_OK) return st;
    em_pos *ps = tbx_calloc(&f->al, nt, sizeof *ps);
    s->order = tbx_calloc(&f->al, nt, sizeof *s->order);
    if (s->order) s->norder = nt; /* em_close frees it with this size, even after a failure */
    if (!ps || !s->order) {
        tbx_free(&f->al, ps, ps ? nt * sizeof *ps : 0);
        return tbx_err_nomem(err, "tensor order");
    }
    for (size_t i = 0; i < f->ntensors; i++) ps[i] = (em_pos){f->tensors[i].comp[0].offset, i};
    if (f->ntensors > 1) qsort(ps, f->ntensors, sizeof *ps, em_pos_cmp);
    for (size_t i = 0; i < f->ntensors; i++) s->order[i] = ps[i].idx;
    tbx_free(&f->al, ps, nt * sizeof *ps);
    tbx_file_uncharge(f, (uint64_t)nt * sizeof(em_pos));
    uint64_t reach = 0;
    size_t owner = 0;
    for (size_t j = 0; j < f->ntensors; j++) {
        const tbx_tensor *t = &f->tensors[s->order[j]];
        uint64_t off = t->comp[0].offset, e = off + t->comp[0].nbytes;
        if (j > 0 && off < reach && t->comp[0].nbytes > 0) {
            char q1[96], q2[96];
            const tbx_tensor *o = &f->tensors[owner];
            tbx_quote_bytes(q1, sizeof q1, t->name, t->name_len, 64);
            tbx_quote_bytes(q2, sizeof q2, o->name, o->name_len, 64);
            st = tbx_file_problem(f, err, TBX_E_RANGE, to + s->order[j] * EM_DESC_SIZE + 24,
                                  "tensor.data_offset",
                                  "tensor \"%s\" [%" PRIu64 ", %" PRIu64 ") overlaps tensor \"%s\" "
                                  "(which ends at byte %" PRIu64 ")", q1, off, e, q2, reach);
            if (st != TBX_OK) return st;
        }
        if (e > reach) { reach = e; owner = (size_t)s->order[j]; }
    }
    if (maxend != h->tensor_data_size &&
        (st = tbx_file_problem(f, err, TBX_E_FORMAT, 40, "header.tensor_data_size",
                               "tensor_data_size is %" PRIu64 ", but the last tensor ends %" PRIu64
                               " bytes into the data section", h->tensor_data_size, maxend)) !=
            TBX_OK)
        return st;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Checksums: data and file CRC-32 in one streaming pass                                       */
/* ------------------------------------------------------------------------------------------ */
/* Regions at least this large are hashed in slices on worker threads (em_crc32_split); below,
 * starting threads costs more than it saves. */
#define EM_CRC_PARALLEL_MIN ((uint64_t)8 << 20)

/* The CRC-32 of [p, p + n): in slices on f->threads (default tbx_threads_default()) threads. */
static uint32_t em_crc_region(tbx_file *f, const uint8_t *p, uint64_t n) {
    int nth = f->threads ? (int)f->threads : tbx_threads_default();
    return em_crc32_split(&f->al, p, n, nth, EM_CRC_PARALLEL_MIN);
}

static tbx_status em_crc_report(tbx_file *f, const em_state *s, uint32_t pcrc, uint32_t dcrc,
                                tbx_error *err);

static tbx_status em_verify_crcs(tbx_file *f, em_state *s, tbx_error *err) {
    const tbx_embd_header *h = &s->h;
    if (s->crc_done || !(h->flags & EM_F_CHECKSUM)) { s->crc_done = true; return TBX_OK; }
    /* the file checksum covers [0, d0) and then the data [d0, end): one pass over the data gives
     * the data checksum, combined with the prefix's for the file checksum (em_crc32_combine).
     * Each part is read through a view of the file where one can be had (no copy; the data on
     * worker threads), else in copies of EM_CHUNK (callback sources). */
    uint64_t end = f->src.size - EM_FOOTER_SIZE;
    uint64_t d0 = h->tensor_data_offset;
    uint32_t crcs[2] = {0, 0};  /* prefix, data */
    uint8_t *buf = NULL;
    tbx_status st = TBX_OK;
    for (int part = 0; part < 2 && st == TBX_OK; part++) {
        uint64_t from = part ? d0 : 0, to = part ? end : d0;
        tbx_view view;
        const uint8_t *p = to - from <= SIZE_MAX
                               ? tbx_source_view(&f->src, from, to - from, &view)
                               : NULL;
        if (p || from == to) {
            if (p) {
                crcs[part] = em_crc_region(f, p, to - from);
                /* bytes of a file that shrank meanwhile read as zeros: no CRC verdict on them */
                st = tbx_view_check(&view, from, to - from, part ? "tensor_data" : "header", err);
            }
            tbx_view_release(&view);
            continue;
        }
        for (uint64_t pos = from; pos < to;) {
            size_t n = (size_t)(to - pos < EM_CHUNK ? to - pos : EM_CHUNK);
            if (!buf && !(buf = tbx_malloc(&f->al, EM_CHUNK))) return tbx_err_nomem(err, "CRC buffer");
            st = tbx_source_read(&f->src, pos, buf, n, part ? "tensor_data" : "header", err);
            if (st != TBX_OK) break;
            crcs[part] = em_crc32(crcs[part], buf, n);
            pos += n;
        }
    }
    if (buf) tbx_free(&f->al, buf, EM_CHUNK);
    if (st != TBX_OK) return st;
    s->crc_done = true;
    return em_crc_report(f, s, crcs[0], crcs[1], err);
}

/* Compares the CRCs of the prefix [0, data) and of the data with the footer's: each mismatch a
 * problem naming its byte range. */
static tbx_status em_crc_report(tbx_file *f, const em_state *s, uint32_t pcrc, uint32_t dcrc,
                                tbx_error *err) {
    const tbx_embd_header *h = &s->h;
    uint64_t end = f->src.size - EM_FOOTER_SIZE;
    uint64_t d0 = h->tensor_data_offset;
    tbx_status st;
    uint32_t fcrc = em_crc32_combine(pcrc, dcrc, end - d0);
    if (dcrc != h->data_checksum &&
        (st = tbx_file_problem(f, err, TBX_E_CHECKSUM, end, "footer.data_checksum",
                               "data_checksum is 0x%08" PRIx32 ", but the CRC-32 of bytes [%"
                               PRIu64 ", %" PRIu64 ") is 0x%08" PRIx32, h->data_checksum, d0, end,
                               dcrc)) != TBX_OK)
        return st;
    if (fcrc != h->file_checksum &&
        (st = tbx_file_problem(f, err, TBX_E_CHECKSUM, end + 4, "footer.file_checksum",
                               "file_checksum is 0x%08" PRIx32 ", but the CRC-32 of bytes [0, %"
                               PRIu64 ") is 0x%08" PRIx32, h->file_checksum, end, fcrc)) != TBX_OK)
        return st;
    return TBX_OK;
}

tbx_status em_open(tbx_file *f, tbx_error *err) {
    em_state *s = tbx_calloc(&f->al, 1, sizeof *s);
    if (!s) return tbx_err_nomem(err, "EMBD state");
    s->tag = EM_STATE_TAG;
    f->drv_state = s; /* freed by em_close, also when the open fails */
    tbx_cursor c;
    tbx_status st = tbx_cursor_init(&c, &f->src, &f->al, 0, f->src.size, err);
    if (st != TBX_OK) return st;
    st = em_read_header(f, s, &c, err);
    if (st == TBX_OK) st = em_check_layout(f, s, err);
    if (st == TBX_OK) st = em_read_meta(f, s, &c, err);
    if (st == TBX_OK) st = em_read_vocab(f, s, &c, err);
    if (st == TBX_OK) st = em_read_index(f, s, &c, err);
    tbx_cursor_free(&c);
    if (st != TBX_OK || !(f->flags & TBX_OPEN_VERIFY_DIGESTS)) return st;
    /* A strict handle that copies its bytes out (no mapping) verifies the data where it serves
     * it (em_deferred_pass); a mapped one, or one reporting problems (validation), at once. */
    if ((s->h.flags & EM_F_CHECKSUM) && !f->on_problem &&
        !tbx_source_ptr(&f->src, 0, f->src.size) && pthread_mutex_init(&s->mu, NULL) == 0) {
        s->mu_init = true;
        s->deferred = true;
        atomic_store(&s->crc_state, EM_CRC_PENDING);
        return TBX_OK;
    }
    return em_verify_crcs(f, s, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Deferred verification: the first read verifies, over the very bytes it serves               */
/* ------------------------------------------------------------------------------------------ */
/* Where bytes of the data region go: [off, off + len) of the file into buf. */
typedef struct em_dest {
    uint64_t off, len;
    uint8_t *buf;
} em_dest;

#define EM_BLOCK ((size_t)256 << 10) /* read, then CRC while the block is still in cache */

/* One slice [a, b) of the data region on one thread: every block is read into its place in a
 * caller's buffer (or the scratch block, between requested tensors) and hashed right there. */
typedef struct em_slice {
    tbx_task task; /* first member */
    tbx_file *f;
    const em_dest *d;
    size_t nd;
    uint64_t a, b;
    uint8_t *scratch;
    uint32_t crc;
    tbx_status st;
    tbx_error err;
} em_slice;

static void em_slice_run(tbx_task *task) {
    em_slice *j = (em_slice *)task;
    uint64_t pos = j->a;
    size_t k = 0;
    uint32_t crc = 0;
    while (pos < j->b) {
        while (k < j->nd && j->d[k].off + j->d[k].len <= pos) k++;
        uint64_t lim = j->b;
        uint8_t *dst;
        if (k < j->nd && j->d[k].off <= pos) {
            if (j->d[k].off + j->d[k].len < lim) lim = j->d[k].off + j->d[k].len;
            dst = j->d[k].buf + (pos - j->d[k].off);
        } else {
            if (k < j->nd && j->d[k].off < lim) lim = j->d[k].off;
            dst = j->scratch;
        }
        size_t n = (size_t)(lim - pos < EM_BLOCK ? lim - pos : EM_BLOCK);
        j->st = tbx_source_read(&j->f->src, pos, dst, n, "tensor_data", &j->err);
        if (j->st != TBX_OK) return;
        crc = em_crc32(crc, dst, n);
        pos += n;
    }
    j->crc = crc;
}

/* The verification pass itself: the prefix's CRC, then the data region in slices on worker
 * threads, the requested bytes landing in `d` (sorted by offset, not overlapping). */
static tbx_status em_pass(tbx_file *f, em_state *s, const em_dest *d, size_t nd,
                          uint32_t threads, tbx_error *err) {
    uint64_t end = f->src.size - EM_FOOTER_SIZE, d0 = s->h.tensor_data_offset;
    int nth = threads ? (int)threads : f->threads ? (int)f->threads : tbx_threads_default();
    if (nth > EM_CRC_JOBS) nth = EM_CRC_JOBS;
    if (nth < 1 || f->src.kind == TBX_SRC_CALLBACK || end - d0 < EM_CRC_PARALLEL_MIN) nth = 1;
    em_slice jobs[EM_CRC_JOBS];
    memset(jobs, 0, sizeof jobs);
    uint8_t *scratch = tbx_malloc(&f->al, (size_t)nth * EM_BLOCK);
    if (!scratch) return tbx_err_nomem(err, "CRC buffer");
    tbx_status st = TBX_OK;
    uint32_t pcrc = 0;
    for (uint64_t pos = 0; pos < d0 && st == TBX_OK;) {
        size_t n = (size_t)(d0 - pos < EM_BLOCK ? d0 - pos : EM_BLOCK);
        st = tbx_source_read(&f->src, pos, scratch, n, "header", err);
        if (st == TBX_OK) pcrc = em_crc32(pcrc, scratch, n);
        pos += n;
    }
    uint64_t per = (end - d0) / (uint64_t)nth;
    for (int i = 0; i < nth; i++) {
        em_slice *j = &jobs[i];
        j->task.run = em_slice_run;
        j->f = f;
        j->d = d;
        j->nd = nd;
        j->a = d0 + per * (uint64_t)i;
        j->b = i == nth - 1 ? end : j->a + per;
        j->scratch = scratch + (size_t)i * EM_BLOCK;
    }
    tbx_pool *pool = st == TBX_OK && nth > 1 ? tbx_pool_start(&f->al, nth) : NULL;
    for (int i = 0; st == TBX_OK && i < nth; i++) {
        if (pool) tbx_pool_submit(pool, &jobs[i].task);
        else em_slice_run(&jobs[i].task);
    }
    uint32_t dcrc = 0;
    for (int i = 0; pool && i < nth; i++) tbx_pool_wait(pool, &jobs[i].task, true);
    for (int i = 0; st == TBX_OK && i < nth; i++) {
        if (jobs[i].st != TBX_OK) {
            st = jobs[i].st;
            *err = jobs[i].err;
        }
        dcrc = i == 0 ? jobs[0].crc : em_crc32_combine(dcrc, jobs[i].crc, jobs[i].b - jobs[i].a);
    }
    tbx_pool_stop(pool);
    tbx_free(&f->al, scratch, (size_t)nth * EM_BLOCK);
    if (st != TBX_OK) return st;
    return em_crc_report(f, s, pcrc, dcrc, err);
}

/* Serves `d` (NULL: only checks) from a deferred handle: the first call runs the verification
 * pass with its bytes landing in `d`; later calls read plainly once the checksums matched, or
 * fail as the pass did. */
static tbx_status em_deferred_pass(tbx_file *f, em_state *s, const em_dest *d, size_t nd,
                                   uint32_t threads, tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    pthread_mutex_lock(&s->mu);
    int state = atomic_load(&s->crc_state);
    tbx_status st = TBX_OK;
    if (state == EM_CRC_PENDING) {
        /* most of the region outside the request: hash it in place through a mapping (no
         * copy) and read the request after; else read and hash it where it is served */
        uint64_t want = 0, region = s->h.tensor_data_size;
        for (size_t i = 0; i < nd; i++) want += d[i].len;
        if (want < region / 2 && f->src.kind != TBX_SRC_CALLBACK) {
            st = em_verify_crcs(f, s, err);
            for (size_t i = 0; st == TBX_OK && i < nd; i++)
                st = tbx_source_read(&f->src, d[i].off, d[i].buf, (size_t)d[i].len,
                                     "tensor_data", err);
        } else {
            st = em_pass(f, s, d, nd, threads, err);
        }
        if (st == TBX_OK) {
            atomic_store(&s->crc_state, EM_CRC_OK);
        } else if (st != TBX_E_NOMEM) { /* an I/O error or a mismatch: every later read too */
            s->bad_st = st;
            s->bad_err = *err;
            atomic_store(&s->crc_state, EM_CRC_BAD);
        }
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    if (state == EM_CRC_BAD) {
        *err = s->bad_err;
        st = s->bad_st;
    }
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; st == TBX_OK && i < nd; i++)
        st = tbx_source_read(&f->src, d[i].off, d[i].buf, (size_t)d[i].len, "tensor_data", err);
    return st;
}

bool em_raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c) {
    (void)t;
    (void)c;
    const em_state *s = f->drv_state;
    return s && s->deferred && atomic_load(&((em_state *)s)->crc_state) != EM_CRC_OK;
}

tbx_status em_read_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                             tbx_error *err) {
    em_state *s = f->drv_state;
    em_dest d = {t->comp[c].offset, t->comp[c].nbytes, buf};
    if (!s || !s->deferred)
        return tbx_source_read(&f->src, d.off, buf, (size_t)d.len, "tensor_data", err);
    return em_deferred_pass(f, s, &d, 1, 0, err);
}

tbx_status em_check_component(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err) {
    (void)t;
    (void)c;
    em_state *s = f->drv_state;
    if (!s || !s->deferred) return TBX_OK;
    return em_deferred_pass(f, s, NULL, 0, 0, err);
}

static int em_dest_cmp(const void *a, const void *b) {
    const em_dest *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* tbx_read_batch on a deferred handle: one pass over the data region in file order, every
 * requested tensor read straight into its buffer and hashed there. Declined (the core's usual
 * path, whose first read runs the pass) for requests the core must judge (bad index, component
 * or buffer) and for requests that overlap. */
tbx_status em_read_batch(tbx_file *f, tbx_read_req *r, size_t n, uint32_t threads,
                         bool *handled, tbx_error *err) {
    em_state *s = f->drv_state;
    *handled = false;
    if (!s || !s->deferred || atomic_load(&s->crc_state) == EM_CRC_OK) return TBX_OK;
    em_dest *d = tbx_calloc(&f->al, n, sizeof *d);
    if (!d) return TBX_OK;
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        const tbx_tensor *t = r[i].tensor < f->ntensors ? &f->tensors[r[i].tensor] : NULL;
        ok = t && r[i].component == 0 && t->ncomp == 1 && r[i].buf &&
             r[i].cap >= t->comp[0].nbytes;
        if (ok) d[i] = (em_dest){t->comp[0].offset, t->comp[0].nbytes, r[i].buf};
    }
    if (ok && n > 1) qsort(d, n, sizeof *d, em_dest_cmp);
    for (size_t i = 1; ok && i < n; i++)
        ok = d[i - 1].off + d[i - 1].len <= d[i].off || d[i - 1].len == 0 || d[i].len == 0;
    if (ok) {
        *handled = true;
        tbx_error e;
        memset(&e, 0, sizeof e);
        tbx_status st = em_deferred_pass(f, s, d, n, threads, &e);
        for (size_t i = 0; i < n; i++) {
            r[i].status = st;
            if (st != TBX_OK) r[i].error = e;
        }
    }
    tbx_free(&f->al, d, n * sizeof *d);
    (void)err;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Validate: zero padding, required metadata, checksums                                        */
/* ------------------------------------------------------------------------------------------ */
static tbx_status em_check_zero(tbx_file *f, uint8_t *buf, uint64_t from, uint64_t to,
                                const char *where, tbx_error *err) {
    while (from < to) {
        size_t n = (size_t)(to - from < EM_CHUNK ? to - from : EM_CHUNK);
        tbx_status st = tbx_source_read(&f->src, from, buf, n, "padding", err);
        if (st != TBX_OK) return st;
        for (size_t i = 0; i < n; i++)
            if (buf[i] != 0)
                return tbx_file_problem(f, err, TBX_E_PADDING, from + i, "padding",
                                        "byte is 0x%02x, expected 0 (padding %s, [%" PRIu64 ", %"
                                        PRIu64 "))", (unsigned)buf[i], where, from, to);
        from += n;
    }
    return TBX_OK;
}

tbx_status em_validate(tbx_file *f, tbx_error *err) {
    em_state *s = f->drv_state;
    if (!s) return TBX_OK;
    const tbx_embd_header *h = &s->h;
    tbx_status st = TBX_OK;
    if ((h->flags & EM_F_VOCAB)) {
        for (size_t k = 0; em_required_keys[k] && st == TBX_OK; k++) {
            uint64_t idx;
            if (!tbx_names_find(&f->meta_names, em_required_keys[k], strlen(em_required_keys[k]),
                                &idx))
                st = tbx_file_problem(f, err, TBX_E_FORMAT, h->metadata_offset, "metadata",
                                      "required metadata key \"%s\" is missing",
                                      em_required_keys[k]);
        }
        if (st != TBX_OK) return st;
    }
    uint8_t *buf = tbx_malloc(&f->al, EM_CHUNK);
    if (!buf) return tbx_err_nomem(err, "EMBD validate buffer");
    uint64_t meta_end = (uint64_t)h->metadata_offset + h->metadata_size;
    st = em_check_zero(f, buf, EM_HEADER_SIZE, h->metadata_offset, "after the header", err);
    if (st == TBX_OK && (h->flags & EM_F_VOCAB)) {
        st = em_check_zero(f, buf, meta_end, h->vocab_offset, "after the metadata", err);
        if (st == TBX_OK)
            st = em_check_zero(f, buf, (uint64_t)h->vocab_offset + h->vocab_size,
                               h->tensor_index_offset, "after the vocabulary", err);
    } else if (st == TBX_OK) {
        st = em_check_zero(f, buf, meta_end, h->tensor_index_offset, "after the metadata", err);
    }
    if (st == TBX_OK)
        st = em_check_zero(f, buf, s->names_end, h->tensor_data_offset, "after the tensor index",
                           err);
    uint64_t pos = h->tensor_data_offset;
    for (size_t j = 0; st == TBX_OK && j < f->ntensors; j++) {
        const tbx_tensor *t = &f->tensors[s->order[j]];
        const tbx_component *k = &t->comp[0];
        if (k->offset > pos) {
            char where[160], q[96];
            tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
            snprintf(where, sizeof where, "before tensor \"%s\"", q);
            st = em_check_zero(f, buf, pos, k->offset, where, err);
        }
        if (k->offset + k->nbytes > pos) pos = k->offset + k->nbytes;
    }
    if (st == TBX_OK)
        st = em_check_zero(f, buf, pos, f->src.size - EM_FOOTER_SIZE, "after the last tensor", err);
    tbx_free(&f->al, buf, EM_CHUNK);
    if (st == TBX_OK && s->deferred) return em_deferred_pass(f, s, NULL, 0, 0, err);
    if (st == TBX_OK && (f->flags & TBX_OPEN_VERIFY_DIGESTS)) st = em_verify_crcs(f, s, err);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* tensorbox/embd.h (reading)                                                                  */
/* ------------------------------------------------------------------------------------------ */
tbx_status tbx_embd_header_get(const tbx_file *f, tbx_embd_header *h) {
    const em_state *s = em_state_of(f);
    if (!s || !h || h->struct_size < sizeof *h) return TBX_E_INVALID_ARG;
    uint32_t ss = h->struct_size;
    *h = s->h;
    h->struct_size = ss;
    return TBX_OK;
}

static const em_vocab *em_any_vocab(const tbx_file *f) {
    const em_vocab *v = em_file_vocab(f);
    return v ? v : eml_file_vocab(f);
}

uint64_t tbx_embd_vocab_count(const tbx_file *f) {
    const em_vocab *v = em_any_vocab(f);
    return v ? v->count : 0;
}

tbx_status tbx_embd_token(const tbx_file *f, uint64_t id, const char **p, size_t *len) {
    const em_vocab *v = em_any_vocab(f);
    if (!v || id >= v->count) return TBX_E_INVALID_ARG;
    if (p) *p = v->blob + v->off[id];
    if (len) *len = v->off[id + 1] - v->off[id];
    return TBX_OK;
}

tbx_status tbx_embd_special_get(const tbx_file *f, tbx_embd_special *sp) {
    if (!f || !sp || sp->struct_size < sizeof *sp) return TBX_E_INVALID_ARG;
    if (f->format != TBX_FORMAT_EMBD && f->format != TBX_FORMAT_EMBD_LEGACY)
        return TBX_E_INVALID_ARG;
    const em_vocab *v = em_any_vocab(f);
    if (!v || !v->has_special) return TBX_E_NOT_FOUND;
    sp->pad_id = v->special[0];
    sp->unk_id = v->special[1];
    sp->cls_id = v->special[2];
    sp->sep_id = v->special[3];
    sp->mask_id = v->special[4];
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The "embd" member of the file's description (tbx_file_describe): the header and footer      */
/* fields (EMBD files), the vocabulary size and the special-token ids (both layouts).          */
/* ------------------------------------------------------------------------------------------ */
tbx_status em_describe(const tbx_file *f, tbx_describer *d, tbx_error *err) {
    tbx_value *m = tbx_desc_map(d);
    tbx_embd_header h = TBX_EMBD_HEADER_INIT;
    if (tbx_embd_header_get(f, &h) == TBX_OK) {
        const struct { const char *k; uint64_t v; } fields[] = {
            {"version_major", h.version_major}, {"version_minor", h.version_minor},
            {"flags", h.flags}, {"metadata_offset", h.metadata_offset},
            {"metadata_size", h.metadata_size}, {"vocab_offset", h.vocab_offset},
            {"vocab_size", h.vocab_size}, {"tensor_index_offset", h.tensor_index_offset},
            {"tensor_index_count", h.tensor_index_count},
            {"tensor_data_offset", h.tensor_data_offset}, {"tensor_data_size", h.tensor_data_size},
            {"total_file_size", h.total_file_size}, {"header_checksum", h.header_checksum},
            {"data_checksum", h.data_checksum}, {"file_checksum", h.file_checksum}};
        tbx_value *hm = tbx_desc_map(d);
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            tbx_desc_u64(d, hm, fields[i].k, fields[i].v);
        tbx_desc_set(d, m, "header", hm);
    }
    tbx_desc_u64(d, m, "vocab_tokens", tbx_embd_vocab_count(f));
    tbx_embd_special sp = TBX_EMBD_SPECIAL_INIT;
    if (tbx_embd_special_get(f, &sp) == TBX_OK) {
        tbx_value *sm = tbx_desc_map(d);
        tbx_desc_u64(d, sm, "pad_id", sp.pad_id);
        tbx_desc_u64(d, sm, "unk_id", sp.unk_id);
        tbx_desc_u64(d, sm, "cls_id", sp.cls_id);
        tbx_desc_u64(d, sm, "sep_id", sp.sep_id);
        tbx_desc_u64(d, sm, "mask_id", sp.mask_id);
        tbx_desc_set(d, m, "special_tokens", sm);
    }
    return tbx_desc_put(d, m, err);
}
