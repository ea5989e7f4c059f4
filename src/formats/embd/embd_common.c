/*
 * embd_common.c - what the EMBD readers (embd.c, embd_legacy.c) and the writer (embd_write.c)
 * share: the dtype codes, FNV-1a, CRC-32 (libdeflate), the required metadata keys and the
 * vocabulary parsers. It calls none of them.
 */
#include "embd_int.h"

#include <inttypes.h>
#include <libdeflate.h>
#include <stdio.h>
#include <string.h>

const tbx_dtype em_dtypes[EM_NDTYPES] = {
    TBX_DT_F32, TBX_DT_F16, TBX_DT_BF16, TBX_DT_I32, TBX_DT_I16,
    TBX_DT_I8,  TBX_DT_U32, TBX_DT_U16,  TBX_DT_U8,
};

int em_code_of_dtype(tbx_dtype dt) {
    for (unsigned i = 0; i < EM_NDTYPES; i++)
        if (em_dtypes[i] == dt) return (int)i;
    return -1;
}

uint32_t em_fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 16777619u;
    }
    return h;
}

uint32_t em_crc32(uint32_t crc, const void *p, size_t n) {
    return libdeflate_crc32(crc, p, n);
}

/* CRC-32 combination (no CRC is computed here: libdeflate computes them). The CRC of A||B is
 * CRC(A) * x^(8|B|) + CRC(B) in GF(2)[x] modulo the CRC polynomial, the polynomials held
 * bit-reflected (bit 31 = x^0) as the CRC itself is. Used so that the data and the file checksum
 * of EMBD take one pass over the tensor data instead of two (docs/formats/embd.md). */
#define EM_CRC_POLY 0xEDB88320u
#define EM_X0 0x80000000u /* the polynomial 1 */

/* a * b mod P (bit-reflected). */
static uint32_t em_gf2_mul(uint32_t a, uint32_t b) {
    uint32_t prod = 0;
    for (uint32_t bit = EM_X0; bit; bit >>= 1) {
        if (a & bit) prod ^= b;
        b = (b & 1u) ? (b >> 1) ^ EM_CRC_POLY : b >> 1; /* b *= x */
    }
    return prod;
}

/* x^(8 n) mod P, by square-and-multiply. */
static uint32_t em_x_pow_8n(uint64_t n) {
    uint32_t sq = 0x40000000u; /* x^(2^0) = x */
    /* x^8 = x^(2^3): three squarings first */
    for (int i = 0; i < 3; i++) sq = em_gf2_mul(sq, sq);
    uint32_t r = EM_X0;
    for (; n; n >>= 1) {  /* sq = x^(8 * 2^j) at bit j of n */
        if (n & 1u) r = em_gf2_mul(r, sq);
        sq = em_gf2_mul(sq, sq);
    }
    return r;
}

uint32_t em_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    return em_gf2_mul(em_x_pow_8n(len_b), crc_a) ^ crc_b;
}

/* One slice of em_crc32_split, on a worker thread (or the caller's). */
typedef struct em_crc_slice {
    tbx_task task; /* first member */
    const uint8_t *p;
    uint64_t n;
    uint32_t crc;
} em_crc_slice;

static void em_crc_slice_run(tbx_task *t) {
    em_crc_slice *j = (em_crc_slice *)t;
    uint32_t c = 0;
    for (uint64_t pos = 0; pos < j->n;) { /* size_t may be narrower than the slice */
        size_t k = (size_t)(j->n - pos < EM_CRC_STEP ? j->n - pos : EM_CRC_STEP);
        c = em_crc32(c, j->p + pos, k);
        pos += k;
    }
    j->crc = c;
}

uint32_t em_crc32_split(const tbx_alloc *al, const uint8_t *p, uint64_t n, int nth,
                        uint64_t min_parallel) {
    if (nth > EM_CRC_JOBS) nth = EM_CRC_JOBS;
    if (nth < 1 || n < min_parallel || n < (uint64_t)nth) nth = 1;
    em_crc_slice jobs[EM_CRC_JOBS];
    memset(jobs, 0, sizeof jobs);
    const uint64_t per = n / (uint64_t)nth;
    for (int i = 0; i < nth; i++) {
        jobs[i].task.run = em_crc_slice_run;
        jobs[i].p = p + per * (uint64_t)i;
        jobs[i].n = i == nth - 1 ? n - per * (uint64_t)i : per;
    }
    /* nth - 1 workers take the first slices; the calling thread hashes the last one meanwhile
     * (no pool, as when no thread starts: every slice here, in order, the same code; the pool
     * starts at least 2 workers, so with nth 2 one of them stays idle) */
    tbx_pool *pool = nth > 1 ? tbx_pool_start(al, nth - 1 < 2 ? 2 : nth - 1) : NULL;
    for (int i = 0; i < nth - 1; i++) tbx_pool_submit(pool, &jobs[i].task);
    em_crc_slice_run(&jobs[nth - 1].task);
    uint32_t c = 0;
    for (int i = 0; i < nth; i++) {
        if (i < nth - 1) tbx_pool_wait(pool, &jobs[i].task, true);
        c = i == 0 ? jobs[0].crc : em_crc32_combine(c, jobs[i].crc, jobs[i].n);
    }
    tbx_pool_stop(pool);
    return c;
}

const char *const em_required_keys[] = {
    "model_name", "model_version", "embedding_dim", "vocab_size", "num_layers",
    "num_attention_heads", "hidden_size", "intermediate_size", "max_position_emb", "created_at",
    NULL,
};
const char *const em_special_names[5] = {"pad_id", "unk_id", "cls_id", "sep_id", "mask_id"};
const char *const em_special_tokens[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

void em_vocab_free(const tbx_alloc *al, em_vocab *v) {
    if (!v) return;
    if (v->off) tbx_free(al, v->off, ((size_t)v->count + 1) * sizeof *v->off);
    if (v->blob) tbx_free(al, v->blob, v->blob_len ? v->blob_len : 1);
    memset(v, 0, sizeof *v);
}

bool em_vocab_find(const em_vocab *v, const char *tok, uint32_t *id) {
    size_t n = strlen(tok);
    for (uint32_t i = 0; i < v->count; i++)
        if (v->off[i + 1] - v->off[i] == n && memcmp(v->blob + v->off[i], tok, n) == 0) {
            *id = i;
            return true;
        }
    return false;
}

/* Walks `count` tokens of (len_width-byte length, bytes) in p[pos, end): fills off/blob.
 * The caller checked count * len_width <= end - pos. */
static tbx_status em_tokens(const tbx_alloc *al, const uint8_t *p, size_t pos, size_t end,
                            uint32_t count, unsigned len_width, uint64_t base,
                            const char *end_field, em_vocab *v, tbx_error *err) {
    v->count = count;
    v->off = tbx_calloc(al, (size_t)count + 1, sizeof *v->off);
    /* the token bytes are at most the region minus the length fields */
    size_t blob_max = end - pos - (size_t)count * len_width;
    v->blob_len = blob_max;
    v->blob = tbx_malloc(al, blob_max ? blob_max : 1);
    if (!v->off || !v->blob) return tbx_err_nomem(err, "EMBD vocabulary");
    size_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (end - pos < len_width)
            return tbx_err(err, TBX_E_TRUNCATED, base + pos, "vocab.token_length",
                           "token %" PRIu32 " of %" PRIu32 ": its length field runs past the "
                           "token entries (which end at byte %" PRIu64 ")", i, count, base + end);
        uint32_t n = len_width == 2 ? tbx_ld16(p + pos) : tbx_ld32(p + pos);
        /* the bytes left once this and every later token has its length field: the caller
         * checked count * len_width <= end - pos, and each token keeps it true */
        uint64_t room = (uint64_t)(end - pos) - (uint64_t)len_width * (count - i);
        if ((uint64_t)n > room)
            return tbx_err(err, TBX_E_RANGE, base + pos, "vocab.token_length",
                           "token %" PRIu32 " of %" PRIu32 ": %" PRIu32 " bytes run past the "
                           "token entries (%" PRIu64 " bytes remain for it once the %" PRIu32
                           " later tokens have their length fields; the entries end at byte %"
                           PRIu64 ")", i, count, n, room, count - 1 - i, base + end);
        pos += len_width;
        size_t bad = 0;
        if (!tbx_utf8_valid((const char *)p + pos, n, &bad))
            return tbx_err(err, TBX_E_FORMAT, base + pos + bad, "vocab.token",
                           "token %" PRIu32 " is not valid UTF-8 (byte %zu of %" PRIu32 ")", i,
                           bad, n);
        memcpy(v->blob + used, p + pos, n);
        used += n;
        pos += n;
        v->off[i + 1] = (uint32_t)used;
    }
    if (pos != end)
        return tbx_err(err, TBX_E_FORMAT, base + pos, end_field,
                       "the %" PRIu32 " tokens end at byte %" PRIu64 ", but the token entries "
                       "end at byte %" PRIu64 " (%s)", count, base + pos, base + end,
                       len_width == 2 ? "total_size" : "trailing bytes after the vocabulary");
    return TBX_OK;
}

tbx_status em_vocab_parse(const tbx_alloc *al, const uint8_t *p, size_t len, uint64_t base,
                          em_vocab *out, tbx_error *err) {
    memset(out, 0, sizeof *out);
    if (len < EM_VOCAB_HEAD + EM_SPECIAL_SIZE)
        return tbx_err(err, TBX_E_TRUNCATED, base, "vocab",
                       "vocabulary section of %zu bytes is shorter than its 12-byte header and "
                       "20-byte special-token block", len);
    uint32_t count = tbx_ld32(p), total = tbx_ld32(p + 4), special = tbx_ld32(p + 8);
    if ((uint64_t)total != len - EM_VOCAB_HEAD - EM_SPECIAL_SIZE)
        return tbx_err(err, TBX_E_FORMAT, base + 4, "vocab.total_size",
                       "total_size is %" PRIu32 ", but the section of %zu bytes leaves %zu bytes "
                       "for token entries (12-byte header, 20-byte special-token block)", total,
                       len, len - EM_VOCAB_HEAD - EM_SPECIAL_SIZE);
    if ((uint64_t)special != EM_VOCAB_HEAD + (uint64_t)total)
        return tbx_err(err, TBX_E_FORMAT, base + 8, "vocab.special_tokens",
                       "special_tokens is %" PRIu32 ", expected %" PRIu64 " (right after the "
                       "token entries, relative to the section start)", special,
                       EM_VOCAB_HEAD + (uint64_t)total);
    if ((uint64_t)count * 2 > total)
        return tbx_err(err, TBX_E_TRUNCATED, base, "vocab.token_count",
                       "%" PRIu32 " tokens need at least %" PRIu64 " bytes, total_size is %" PRIu32,
                       count, (uint64_t)count * 2, total);
    tbx_status st = em_tokens(al, p, EM_VOCAB_HEAD, EM_VOCAB_HEAD + (size_t)total, count, 2, base,
                              "vocab.total_size", out, err);
    if (st != TBX_OK) { em_vocab_free(al, out); return st; }
    for (unsigned k = 0; k < 5; k++) {
        uint32_t id = tbx_ld32(p + special + 4 * k);
        if (id >= count) {
            em_vocab_free(al, out);
            char field[32];
            snprintf(field, sizeof field, "vocab.%s", em_special_names[k]);
            return tbx_err(err, TBX_E_RANGE, base + special + 4 * k, field,
                           "%s is %" PRIu32 ", but the vocabulary has %" PRIu32 " tokens",
                           em_special_names[k], id, count);
        }
        out->special[k] = id;
    }
    out->has_special = true;
    return TBX_OK;
}

tbx_status em_vocab_parse_legacy(const tbx_alloc *al, const uint8_t *p, size_t len,
                                 uint64_t base, em_vocab *out, tbx_error *err) {
    memset(out, 0, sizeof *out);
    if (len < 4)
        return tbx_err(err, TBX_E_TRUNCATED, base, "vocab_count",
                       "the vocabulary count needs 4 bytes, %zu remain", len);
    uint32_t count = tbx_ld32(p);
    if ((uint64_t)count * 4 > len - 4)
        return tbx_err(err, TBX_E_TRUNCATED, base, "vocab_count",
                       "%" PRIu32 " tokens need at least %" PRIu64 " bytes, %zu remain", count,
                       (uint64_t)count * 4, len - 4);
    tbx_status st = em_tokens(al, p, 4, len, count, 4, base, "vocab", out, err);
    if (st != TBX_OK) { em_vocab_free(al, out); return st; }
    out->has_special = true;
    for (unsigned k = 0; k < 5; k++)
        if (!em_vocab_find(out, em_special_tokens[k], &out->special[k])) out->has_special = false;
    return TBX_OK;
}

/* Both drivers probe with it (embd-legacy is what is "EMBD" but not the spec layout). */
bool em_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    if (len < EM_HEADER_SIZE || memcmp(head, "EMBD", 4) != 0) return false;
    /* the legacy layout starts with the same 8 bytes ("EMBD", u32 1 = major 1, minor 0): the
     * spec layout is recognised by its total_file_size or its header checksum */
    return tbx_ld64(head + 48) == file_size ||
           (tbx_ld32(head + 56) != 0 && em_crc32(0, head, EM_HEADER_CRC_LEN) == tbx_ld32(head + 56));
}
