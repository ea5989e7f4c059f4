/*
 * spm.c - a bounded protobuf reader for SentencePiece's tokenizer.model, and its writer.
 *
 * Protobuf encodes a message as a sequence of fields, each a varint tag (field number << 3 |
 * wire type) followed by its value: wire type 0 a varint, 1 eight bytes, 2 a varint length and
 * that many bytes (strings, sub-messages), 5 four bytes; 3 and 4 (groups) are obsolete and
 * never used by SentencePiece, so they are refused. A varint is 1..10 bytes of 7 bits each,
 * low group first, the high bit set on every byte but the last.
 *
 *   ModelProto     { 1: repeated SentencePiece (wire type 2), 2: TrainerSpec, 3: NormalizerSpec,
 *                    4, 5: (skipped) }
 *   SentencePiece  { 1: piece (bytes, UTF-8), 2: score (float, wire type 5), 3: type (varint) }
 *   TrainerSpec    { 3: model_type (varint), others skipped }
 *   NormalizerSpec { 2: precompiled_charsmap (bytes), 3: add_dummy_prefix, 4:
 *                    remove_extra_whitespaces (bool varints), others skipped }
 *
 *   tokenizer.model  [0a len [0a len "piece"][15 f32 score][18 type]] [0a len [...]] ... [12 ...]
 *
 * Two passes over the bytes, every byte through the bounds-checked cursor: the first counts the
 * pieces (so the array is sized before it is allocated, at most one entry per two input bytes
 * and at most max_pieces), the second fills it. Inside a piece the cursor's end is the piece's
 * own end, so a field whose length runs past its message fails as truncated, naming the field.
 */
#include "spm.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SPM_FIELD "ModelProto" /* a top-level field */

static tbx_status rd_varint(tbx_cursor *c, uint64_t *v, const char *field, tbx_error *err) {
    uint64_t start = c->pos, r = 0;
    for (int i = 0; i < 10; i++) {
        uint8_t b;
        tbx_status st = tbx_cur_u8(c, &b, field, err);
        if (st != TBX_OK) return st;
        if (i == 9 && b > 1)
            return tbx_err(err, TBX_E_FORMAT, start, field, "%s: varint overflows 64 bits", field);
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) { *v = r; return TBX_OK; }
    }
    return tbx_err(err, TBX_E_FORMAT, start, field, "%s: varint longer than 10 bytes", field);
}

/* Reads a tag: *num the field number (1 .. 2^29-1), *wt the wire type. */
static tbx_status rd_tag(tbx_cursor *c, uint32_t *num, unsigned *wt, const char *field,
                         tbx_error *err) {
    uint64_t start = c->pos, t;
    tbx_status st = rd_varint(c, &t, field, err);
    if (st != TBX_OK) return st;
    if ((t >> 3) == 0 || (t >> 3) > 0x1fffffffu)
        return tbx_err(err, TBX_E_FORMAT, start, field, "%s: field number %llu is not a "
                       "protobuf field number", field, (unsigned long long)(t >> 3));
    *num = (uint32_t)(t >> 3);
    *wt = (unsigned)(t & 7);
    return TBX_OK;
}

/* Skips a field's value of wire type wt (its tag already read at tag_off). */
static tbx_status skip_value(tbx_cursor *c, unsigned wt, uint64_t tag_off, const char *field,
                             tbx_error *err) {
    uint64_t v;
    switch (wt) {
    case 0: return rd_varint(c, &v, field, err);
    case 1: return tbx_cur_skip(c, 8, field, err);
    case 2: {
        tbx_status st = rd_varint(c, &v, field, err);
        return st != TBX_OK ? st : tbx_cur_skip(c, v, field, err);
    }
    case 5: return tbx_cur_skip(c, 4, field, err);
    default:
        return tbx_err(err, TBX_E_FORMAT, tag_off, field, "%s: wire type %u (a protobuf group "
                       "or no wire type; tokenizer.model uses none)", field, wt);
    }
}

/* Reads a length (wire type 2) and checks that many bytes remain; *len the length. */
static tbx_status rd_len(tbx_cursor *c, uint64_t *len, const char *field, tbx_error *err) {
    tbx_status st = rd_varint(c, len, field, err);
    return st != TBX_OK ? st : tbx_cur_need(c, *len, field, err);
}

static tbx_status wrong_wt(tbx_error *err, uint64_t off, const char *field, unsigned wt,
                           unsigned want) {
    return tbx_err(err, TBX_E_FORMAT, off, field, "%s: wire type %u (expected %u)", field, wt,
                   want);
}

/* One SentencePiece message spanning [c->pos, c->end). */
static tbx_status rd_piece(tbx_cursor *c, const tbx_source *src, size_t idx, tbx_spm_piece *p,
                           tbx_error *err) {
    char fld[64];
    uint64_t start = c->pos;
    bool has_text = false;
    p->type = TBX_SPM_NORMAL;
    p->score = 0.0f;
    while (c->pos < c->end) {
        uint64_t off = c->pos;
        uint32_t num;
        unsigned wt;
        snprintf(fld, sizeof fld, "pieces[%zu]", idx);
        tbx_status st = rd_tag(c, &num, &wt, fld, err);
        if (st != TBX_OK) return st;
        if (num == 1) {
            snprintf(fld, sizeof fld, "pieces[%zu].piece", idx);
            if (wt != 2) return wrong_wt(err, off, fld, wt, 2);
            uint64_t len;
            if ((st = rd_len(c, &len, fld, err)) != TBX_OK) return st;
            if (len == 0 || len > UINT32_MAX)
                return tbx_err(err, TBX_E_FORMAT, off, fld, "%s: a piece of %llu bytes", fld,
                               (unsigned long long)len);
            /* the bytes are in memory and rd_len checked they are inside the message */
            const uint8_t *s = tbx_source_ptr(src, c->pos, len);
            size_t bad = 0;
            if (!s) return tbx_err(err, TBX_E_TRUNCATED, c->pos, fld, "%s: %llu bytes past the "
                                   "end", fld, (unsigned long long)len);
            if (!tbx_utf8_valid((const char *)s, (size_t)len, &bad))
                return tbx_err(err, TBX_E_FORMAT, c->pos + bad, fld, "%s: not UTF-8", fld);
            p->text = (const char *)s;
            p->len = (uint32_t)len;
            has_text = true;
            if ((st = tbx_cur_skip(c, len, fld, err)) != TBX_OK) return st;
        } else if (num == 2) {
            snprintf(fld, sizeof fld, "pieces[%zu].score", idx);
            if (wt != 5) return wrong_wt(err, off, fld, wt, 5);
            uint32_t u;
            uint64_t at = c->pos;
            if ((st = tbx_cur_u32(c, &u, fld, err)) != TBX_OK) return st;
            float f;
            memcpy(&f, &u, 4);
            if (!isfinite(f))
                return tbx_err(err, TBX_E_FORMAT, at, fld, "%s: score is not finite", fld);
            p->score = f;
        } else if (num == 3) {
            snprintf(fld, sizeof fld, "pieces[%zu].type", idx);
            if (wt != 0) return wrong_wt(err, off, fld, wt, 0);
            uint64_t t, at = c->pos;
            if ((st = rd_varint(c, &t, fld, err)) != TBX_OK) return st;
            if (t < TBX_SPM_NORMAL || t > TBX_SPM_BYTE)
                return tbx_err(err, TBX_E_FORMAT, at, fld, "%s: type %llu (1..6: normal, "
                               "unknown, control, user-defined, unused, byte)", fld,
                               (unsigned long long)t);
            p->type = (int)t;
        } else if ((st = skip_value(c, wt, off, fld, err)) != TBX_OK) {
            return st;
        }
    }
    if (!has_text) {
        snprintf(fld, sizeof fld, "pieces[%zu].piece", idx);
        return tbx_err(err, TBX_E_FORMAT, start, fld, "%s: the piece has no text", fld);
    }
    return TBX_OK;
}

/* A boolean or enum varint of a spec (wire type 0). */
static tbx_status rd_spec_varint(tbx_cursor *c, unsigned wt, uint64_t off, const char *fld,
                                 uint64_t *v, tbx_error *err) {
    if (wt != 0) return wrong_wt(err, off, fld, wt, 0);
    return rd_varint(c, v, fld, err);
}

/* The trainer spec (num 2) or normalizer spec (num 3) spanning [c->pos, c->end): the fields
 * tbx_spm_vocab keeps, the others skipped. */
static tbx_status rd_spec(tbx_cursor *c, const tbx_source *src, uint32_t spec,
                          tbx_spm_vocab *out, tbx_error *err) {
    const char *sfld = spec == 2 ? "trainer_spec" : "normalizer_spec";
    while (c->pos < c->end) {
        uint64_t off = c->pos, v;
        uint32_t num;
        unsigned wt;
        tbx_status st = rd_tag(c, &num, &wt, sfld, err);
        if (st != TBX_OK) return st;
        if (spec == 2 && num == 3) {
            if ((st = rd_spec_varint(c, wt, off, "trainer_spec.model_type", &v, err)) != TBX_OK)
                return st;
            if (v < TBX_SPM_UNIGRAM || v > TBX_SPM_CHAR)
                return tbx_err(err, TBX_E_FORMAT, off, "trainer_spec.model_type",
                               "trainer_spec.model_type: %llu (1..4: unigram, bpe, word, char)",
                               (unsigned long long)v);
            out->model_type = (int)v;
        } else if (spec == 3 && (num == 3 || num == 4)) {
            const char *f = num == 3 ? "normalizer_spec.add_dummy_prefix"
                                     : "normalizer_spec.remove_extra_whitespaces";
            if ((st = rd_spec_varint(c, wt, off, f, &v, err)) != TBX_OK) return st;
            if (num == 3) out->add_dummy_prefix = v != 0;
            else out->remove_extra_ws = v != 0;
        } else if (spec == 3 && num == 2) {
            const char *f = "normalizer_spec.precompiled_charsmap";
            uint64_t len;
            if (wt != 2) return wrong_wt(err, off, f, wt, 2);
            if ((st = rd_len(c, &len, f, err)) != TBX_OK) return st;
            const uint8_t *b = len ? tbx_source_ptr(src, c->pos, len) : NULL;
            if (len && !b)
                return tbx_err(err, TBX_E_TRUNCATED, c->pos, f, "%s: %llu bytes past the end", f,
                               (unsigned long long)len);
            out->charsmap = b;
            out->charsmap_len = (size_t)len;
            if ((st = tbx_cur_skip(c, len, f, err)) != TBX_OK) return st;
        } else if ((st = skip_value(c, wt, off, sfld, err)) != TBX_OK) {
            return st;
        }
    }
    return TBX_OK;
}

/* The next top-level field of the model: a piece (field 1, length-delimited) gets *piece set,
 * its byte offset in *off and its length in *len, the cursor then at its first byte; the
 * trainer and normalizer specs are read into *specs when it is not NULL (else skipped), any
 * other field skipped. */
static tbx_status next_field(tbx_cursor *c, const tbx_source *src, uint64_t *off, uint64_t *len,
                             bool *piece, tbx_spm_vocab *specs, tbx_error *err) {
    uint32_t num;
    unsigned wt;
    *off = c->pos;
    *piece = false;
    tbx_status st = rd_tag(c, &num, &wt, SPM_FIELD, err);
    if (st != TBX_OK) return st;
    if (specs && (num == 2 || num == 3) && wt == 2) {
        uint64_t sl;
        if ((st = rd_len(c, &sl, num == 2 ? "trainer_spec" : "normalizer_spec", err)) != TBX_OK)
            return st;
        uint64_t outer = c->end;
        c->end = c->pos + sl; /* rd_len checked that sl bytes remain */
        st = rd_spec(c, src, num, specs, err);
        c->end = outer;
        return st;
    }
    if (num != 1) return skip_value(c, wt, *off, SPM_FIELD, err);
    if (wt != 2) return wrong_wt(err, *off, "pieces", wt, 2);
    *piece = true;
    return rd_len(c, len, "pieces", err);
}

static tbx_status spm_parse(const uint8_t *buf, size_t n, const tbx_alloc *al,
                            uint64_t max_pieces, bool specs, tbx_spm_vocab *out,
                            tbx_error *err) {
    out->pieces = NULL;
    out->n = out->cap = 0;
    out->model_type = TBX_SPM_UNIGRAM;
    out->add_dummy_prefix = out->remove_extra_ws = true;
    out->charsmap = NULL;
    out->charsmap_len = 0;
    tbx_source src;
    tbx_source_open_memory(&src, buf, n);
    tbx_cursor c;
    tbx_status st = tbx_cursor_init(&c, &src, al, 0, n, err);
    if (st != TBX_OK) return st;
    /* pass 1: count the pieces */
    uint64_t count = 0;
    while (st == TBX_OK && c.pos < c.end) {
        uint64_t off, len;
        bool piece;
        st = next_field(&c, &src, &off, &len, &piece, specs ? out : NULL, err);
        if (st != TBX_OK || !piece) continue;
        if (++count > max_pieces) {
            st = tbx_err(err, TBX_E_LIMIT, off, "pieces", "more than %llu "
                         "pieces", (unsigned long long)max_pieces);
            break;
        }
        st = tbx_cur_skip(&c, len, "pieces", err);
    }
    if (st == TBX_OK && count == 0)
        st = tbx_err(err, TBX_E_FORMAT, 0, "pieces", "no pieces (not a "
                     "SentencePiece model?)");
    if (st == TBX_OK) {
        out->pieces = tbx_calloc(al, (size_t)count, sizeof *out->pieces);
        if (!out->pieces) st = tbx_err_nomem(err, "tokenizer.model pieces");
        else out->cap = (size_t)count;
    }
    /* pass 2: read them */
    if (st == TBX_OK) st = tbx_cur_seek(&c, 0, SPM_FIELD, err);
    while (st == TBX_OK && c.pos < c.end) {
        uint64_t off, len;
        bool piece;
        st = next_field(&c, &src, &off, &len, &piece, NULL, err);
        if (st != TBX_OK || !piece) continue;
        uint64_t outer = c.end;
        c.end = c.pos + len; /* rd_len checked that len bytes remain */
        st = rd_piece(&c, &src, out->n, &out->pieces[out->n], err);
        c.end = outer;
        if (st == TBX_OK) out->n++;
    }
    tbx_cursor_free(&c);
    if (st != TBX_OK) tbx_spm_free(out, al);
    return st;
}

tbx_status tbx_spm_parse(const uint8_t *buf, size_t n, const tbx_alloc *al, uint64_t max_pieces,
                         tbx_spm_vocab *out, tbx_error *err) {
    return spm_parse(buf, n, al, max_pieces, false, out, err);
}

tbx_status tbx_spm_parse_specs(const uint8_t *buf, size_t n, const tbx_alloc *al,
                               uint64_t max_pieces, tbx_spm_vocab *out, tbx_error *err) {
    return spm_parse(buf, n, al, max_pieces, true, out, err);
}

void tbx_spm_free(tbx_spm_vocab *v, const tbx_alloc *al) {
    if (!v) return;
    tbx_free(al, v->pieces, v->cap * sizeof *v->pieces);
    v->pieces = NULL;
    v->n = v->cap = 0;
}

static bool is_b64(uint8_t c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '/' || c == '=';
}

bool tbx_spm_is_tiktoken(const uint8_t *buf, size_t n) {
    const size_t lim = n < 4096 ? n : 4096;
    size_t i = 0, lines = 0;
    while (i < lim) {
        size_t b = 0, d = 0;
        while (i < lim && is_b64(buf[i])) { i++; b++; }
        if (i == lim) break;              /* a line cut by the 4 KiB window */
        if (!b || buf[i] != ' ') return false;
        i++;
        while (i < lim && buf[i] >= '0' && buf[i] <= '9') { i++; d++; }
        if (i == lim) break;
        if (!d) return false;
        if (buf[i] == '\r' && i + 1 < lim) i++;
        if (buf[i] != '\n') return false;
        i++;
        lines++;
    }
    return lines > 0;
}

/* ---- Writing a tokenizer.model ------------------------------------------------------------ */
/* The same encoding the reader takes, written in two passes: the first (w->p NULL) only counts
 * the bytes, so the buffer is allocated once at its exact size; the second fills it. A
 * sub-message's length precedes it, so each is sized by a counting pass of its own first. */
typedef struct pbw { uint8_t *p; uint64_t n; } pbw;

static void w_byte(pbw *w, uint8_t b) {
    if (w->p) w->p[w->n] = b;
    w->n++;
}
static void w_varint(pbw *w, uint64_t v) {
    do {
        w_byte(w, (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
        v >>= 7;
    } while (v);
}
static uint64_t varint_len(uint64_t v) {
    pbw c = {NULL, 0};
    w_varint(&c, v);
    return c.n;
}
static void w_tag(pbw *w, uint32_t num, unsigned wt) { w_varint(w, (uint64_t)num << 3 | wt); }
/* int32 fields: a negative value is its 64-bit two's complement, ten bytes (protobuf's rule) */
static void w_int(pbw *w, uint32_t num, int64_t v) {
    w_tag(w, num, 0);
    w_varint(w, (uint64_t)v);
}
static void w_bytes(pbw *w, uint32_t num, const void *s, uint64_t len) {
    w_tag(w, num, 2);
    w_varint(w, len);
    if (w->p && len) memcpy(w->p + w->n, s, (size_t)len);
    w->n += len;
}
static void w_f32(pbw *w, uint32_t num, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    w_tag(w, num, 5);
    for (int i = 0; i < 4; i++) w_byte(w, (uint8_t)(u >> (8 * i)));
}

static void w_piece(pbw *w, const tbx_spm_piece *p) {
    pbw c = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        pbw *o = pass ? w : &c;
        if (pass) { w_tag(w, 1, 2); w_varint(w, c.n); }
        w_bytes(o, 1, p->text, p->len);
        w_f32(o, 2, p->score);
        if (p->type != TBX_SPM_NORMAL) w_int(o, 3, p->type);
    }
}

static void w_piece_name(pbw *w, uint32_t num, const tbx_spm_vocab *v, int32_t id) {
    if (id >= 0 && (size_t)id < v->n) w_bytes(w, num, v->pieces[id].text, v->pieces[id].len);
}

static void w_trainer(pbw *w, const tbx_spm_vocab *v, const tbx_spm_ids *ids) {
    bool bytes = false;
    for (size_t i = 0; i < v->n && !bytes; i++) bytes = v->pieces[i].type == TBX_SPM_BYTE;
    w_int(w, 3, v->model_type);
    w_int(w, 4, (int64_t)v->n);
    if (bytes) w_int(w, 35, 1);
    w_int(w, 40, ids->unk);
    w_int(w, 41, ids->bos);
    w_int(w, 42, ids->eos);
    w_int(w, 43, ids->pad);
    w_piece_name(w, 45, v, ids->unk);
    w_piece_name(w, 46, v, ids->bos);
    w_piece_name(w, 47, v, ids->eos);
    w_piece_name(w, 48, v, ids->pad);
}

static void w_normalizer(pbw *w, const tbx_spm_vocab *v) {
    if (!v->charsmap_len) w_bytes(w, 1, "identity", 8);
    else w_bytes(w, 2, v->charsmap, v->charsmap_len);
    w_int(w, 3, v->add_dummy_prefix);
    w_int(w, 4, v->remove_extra_ws);
    w_int(w, 5, 1); /* escape_whitespaces: ' ' is U+2581 in the pieces */
}

static void w_spec(pbw *w, uint32_t num, const tbx_spm_vocab *v, const tbx_spm_ids *ids) {
    pbw c = {NULL, 0};
    if (num == 2) w_trainer(&c, v, ids); else w_normalizer(&c, v);
    w_tag(w, num, 2);
    w_varint(w, c.n);
    if (num == 2) w_trainer(w, v, ids); else w_normalizer(w, v);
}

static void w_model(pbw *w, const tbx_spm_vocab *v, const tbx_spm_ids *ids) {
    for (size_t i = 0; i < v->n; i++) w_piece(w, &v->pieces[i]);
    w_spec(w, 2, v, ids);
    w_spec(w, 3, v, ids);
}

tbx_status tbx_spm_write(const tbx_spm_vocab *v, const tbx_spm_ids *ids, const tbx_alloc *al,
                         uint8_t **out, size_t *n, tbx_error *err) {
    *out = NULL;
    *n = 0;
    if (!v->n)
        return tbx_err(err, TBX_E_INVALID_ARG, 0, "pieces", "a tokenizer.model needs at least one "
                       "piece");
    if (v->model_type < TBX_SPM_UNIGRAM || v->model_type > TBX_SPM_CHAR)
        return tbx_err(err, TBX_E_INVALID_ARG, 0, "trainer_spec.model_type", "model type %d is not "
                       "one of SentencePiece's (1..4)", v->model_type);
    /* every piece's length and its message's are far below 2^64: a piece's text lies in the
     * caller's memory, so the sum of lengths is below the address space */
    pbw c = {NULL, 0};
    w_model(&c, v, ids);
    if (c.n > SIZE_MAX - 1 || varint_len(c.n) > 10)
        return tbx_err(err, TBX_E_LIMIT, 0, "tokenizer.model", "%llu bytes do not fit in memory",
                       (unsigned long long)c.n);
    uint8_t *buf = tbx_malloc(al, (size_t)c.n ? (size_t)c.n : 1);
    if (!buf) return tbx_err_nomem(err, "tokenizer.model");
    pbw w = {buf, 0};
    w_model(&w, v, ids);
    *out = buf;
    *n = (size_t)w.n;
    return TBX_OK;
}
