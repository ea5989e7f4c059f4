/*
 * embd_write.c - the EMBD writer (the reading halves of the driver are embd.c, embd_legacy.c).
 *
 * Layout (docs/formats/embd.md): header (64 B) · metadata at 64 · vocabulary (when there is one)
 * 8-aligned · tensor index (descriptors, then names) 8-aligned · tensor data 64-aligned, every
 * tensor 64-aligned (TENSORS_ALIGNED), in the order declared · footer right after the last
 * tensor. CHECKSUM_ENABLED is always set: the header CRC is computed at layout, the data and file
 * CRCs while the tensor bytes stream in (in file order; bytes written out of order are read back
 * at finish), all through libdeflate. Every gap is zero; the bytes depend only on the input.
 *
 * Metadata: STRING values only (as safetensors; others are refused with TBX_E_LOSSY so that
 * tbx_convert can stringify or drop them when asked), keys and values UTF-8 of at most 65535
 * bytes, written in the order given.
 *
 * Vocabulary: a section "vocab" of type 1 (the spec's section, checked and copied), 2 (the
 * legacy layout's, converted: its special ids found by token text) or 3 (a model's token list in
 * the legacy encoding, as src/models' Hugging Face import makes it for the legacy layout: taken
 * as type 2). When a file has a vocabulary it is a model file and the required metadata keys are
 * completed after the caller's: from the tensors and the vocabulary (vocab_size, embedding_dim /
 * hidden_size from embeddings.word_embeddings.weight, num_layers from the encoder.layer.N names,
 * intermediate_size, max_position_emb) and created_at from SOURCE_DATE_EPOCH (else
 * 1970-01-01T00:00:00Z, so that the bytes stay deterministic). A key none of them gives
 * (model_name, model_version, num_attention_heads) fails the write with TBX_E_FORMAT naming it.
 *
 * This writer knows its container only: a Hugging Face directory is imported by src/models
 * (hf_embd.c: tensor names, the vocabulary as the section "vocab", the metadata from
 * config.json), which the conversion façade chooses. The files of such a directory handed over as
 * sections (config.json, tokenizer.json, vocab.txt, ...) are refused with TBX_E_LOSSY naming the
 * import, as any other section EMBD has no place for (docs/formats/embd.md).
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */
#include "embd_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define EW_STATE_TAG 0x454D4257u /* "EMBW" */
#define EW_BUF ((size_t)1 << 20)

typedef struct ew_tensor {
    const char *name;   /* the name written (may point into the writer's tensor name) */
    size_t name_len;
    uint64_t rel;       /* offset from tensor_data_offset */
} ew_tensor;

typedef struct ew_state {
    uint32_t tag;
    ew_tensor *t;
    size_t nt;
    uint64_t tdo, data_end;
    uint32_t fcrc_prefix;  /* CRC of [0, tdo) */
    uint32_t dcrc;         /* running, over [tdo, next) */
    uint64_t next;         /* next byte expected in file order */
    bool in_order;
    /* derived metadata (key, value) pairs written after the caller's */
    char *extra;           /* "key\0value\0" ... */
    size_t extra_len;
} ew_state;

void em_w_free(tbx_writer *w) {
    ew_state *s = w->drv_state;
    if (!s) return;
    if (s->t) tbx_free(&w->al, s->t, s->nt * sizeof *s->t);
    if (s->extra) tbx_free(&w->al, s->extra, s->extra_len);
    tbx_free(&w->al, s, sizeof *s);
    w->drv_state = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Checks                                                                                      */
/* ------------------------------------------------------------------------------------------ */
tbx_status em_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                           tbx_error *err) {
    (void)w;
    char q[96];
    size_t bad = 0;
    tbx_quote_bytes(q, sizeof q, key, key_len, 64);
    if (!v || !tbx_driver_meta_ok(&tbx_driver_embd, v->type))
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": EMBD stores only string values, not %s", q,
                       v ? tbx_value_type_name(v->type) : "(null)");
    if (key_len == 0 || key_len > UINT16_MAX || v->v.s.n > UINT16_MAX)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": EMBD keys take 1..65535 bytes and values at most 65535 "
                       "(key %zu, value %zu bytes)", q, key_len, v->v.s.n);
    if (!tbx_utf8_valid(key, key_len, &bad) || memchr(key, 0, key_len))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata.key",
                       "metadata key \"%s\" is not UTF-8 without NUL", q);
    if (!tbx_utf8_valid(v->v.s.p, v->v.s.n, &bad))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": value is not valid UTF-8 (byte %zu)", q, bad);
    return TBX_OK;
}

/* Files of a Hugging Face sentence-transformers directory: refused with a message naming the
 * import (src/models/hf_embd.c) that reads them. */
static const char *const ew_hf_files[] = {
    "config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json",
    "special_tokens_map.json", "modules.json", "1_Pooling/config.json",
    "sentence_bert_config.json", "config_sentence_transformers.json", NULL,
};

tbx_status em_w_check_section(tbx_writer *w, const char *name, uint32_t type, size_t len,
                              tbx_error *err) {
    (void)w;
    if (strcmp(name, "vocab") == 0) {
        if (type != EM_VOCAB_SPEC && type != EM_VOCAB_LEGACY && type != EM_VOCAB_TOKENS)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "section",
                           "section \"vocab\" of type %" PRIu32 ": EMBD takes type 1 (an EMBD "
                           "vocabulary), 2 (a legacy one) or 3 (a token list)", type);
        if (len > UINT32_MAX)
            return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "section",
                           "section \"vocab\" of %zu bytes exceeds 4 GiB", len);
        return TBX_OK;
    }
    char q[96];
    tbx_quote_bytes(q, sizeof q, name, strlen(name), 64);
    for (size_t i = 0; ew_hf_files[i]; i++)
        if (strcmp(name, ew_hf_files[i]) == 0)
            return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "section",
                           "section \"%s\": the EMBD writer does not read a Hugging Face "
                           "directory's files; a conversion of the directory imports them "
                           "(names, vocabulary, metadata); give the vocabulary as the section "
                           "\"vocab\"", q);
    return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "section",
                   "section \"%s\": EMBD stores a vocabulary (\"vocab\") and no other section", q);
}

#define ew_section em_w_section

tbx_status em_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    char q[96];
    size_t bad = 0;
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    if (!t->has_data)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": EMBD cannot store a tensor without data", q);
    if (!em_w_dtype_ok((tbx_dtype)t->dtype)) {
        const tbx_dtype_info *di = tbx_writer_dtype(w, (tbx_dtype)t->dtype);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": dtype %s has no EMBD equivalent (f32, f16, bf16, i32, i16, "
                       "i8, u32, u16, u8)", q, di ? di->name : "(invalid)");
    }
    if (t->ndim < 1 || t->ndim > 4)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": EMBD stores 1 to 4 dimensions, not %u", q,
                       (unsigned)t->ndim);
    for (unsigned d = 0; d < t->ndim; d++)
        if (t->shape[d] > UINT32_MAX)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": dimension %u is %" PRIu64 ", EMBD stores u32 sizes",
                           q, d, t->shape[d]);
    if (t->name_len == 0 || t->name_len > UINT16_MAX)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.name",
                       "tensor \"%s\": EMBD names take 1..65535 bytes (%" PRIu32 ")", q,
                       t->name_len);
    if (!tbx_utf8_valid(t->name, t->name_len, &bad) || memchr(t->name, 0, t->name_len))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.name",
                       "tensor name \"%s\" is not UTF-8 without NUL", q);
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Sections                                                                                    */
/* ------------------------------------------------------------------------------------------ */
const tbx_wsection *em_w_section(const tbx_writer *w, const char *name) {
    for (size_t i = 0; i < w->nsections; i++)
        if (strcmp(w->sections[i].name, name) == 0) return &w->sections[i];
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Layout                                                                                      */
/* ------------------------------------------------------------------------------------------ */
/* A buffered emitter of the bytes before the tensor data (pieces of at most EW_BUF). */
typedef struct ew_emit {
    tbx_writer *w;
    uint8_t *buf;
    size_t len;
    uint64_t pos;     /* file offset of buf[0] */
    uint32_t crc;
    tbx_status st;
    tbx_error *err;
} ew_emit;

static void ew_flush(ew_emit *e) {
    if (e->st != TBX_OK || e->len == 0) return;
    e->crc = em_crc32(e->crc, e->buf, e->len);
    e->st = tbx_out_pwrite(&e->w->out, e->pos, e->buf, e->len, e->err);
    e->pos += e->len;
    e->len = 0;
}
static void ew_put(ew_emit *e, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n && e->st == TBX_OK) {
        size_t k = EW_BUF - e->len < n ? EW_BUF - e->len : n;
        memcpy(e->buf + e->len, b, k);
        e->len += k;
        b += k;
        n -= k;
        if (e->len == EW_BUF) ew_flush(e);
    }
}
static void ew_u16(ew_emit *e, uint16_t v) { uint8_t b[2]; tbx_st16(b, v); ew_put(e, b, 2); }
static void ew_u32(ew_emit *e, uint32_t v) { uint8_t b[4]; tbx_st32(b, v); ew_put(e, b, 4); }
static void ew_zero_to(ew_emit *e, uint64_t off) {
    static const uint8_t z[64];
    while (e->st == TBX_OK && e->pos + e->len < off) {
        uint64_t gap = off - (e->pos + e->len);
        ew_put(e, z, gap < sizeof z ? (size_t)gap : sizeof z);
    }
}

static uint64_t ew_align(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Metadata (key, value) of the writer by key, or NULL. */
static const tbx_value *ew_meta(const tbx_writer *w, const char *key) {
    size_t kl = strlen(key);
    for (size_t i = 0; i < w->nmeta; i++)
        if (w->meta[i].key_len == kl && memcmp(w->meta[i].key, key, kl) == 0)
            return w->meta[i].value;
    return NULL;
}

static bool ew_add_extra(const tbx_alloc *al, ew_state *s, const char *key, const char *val) {
    size_t kl = strlen(key) + 1, vl = strlen(val) + 1;
    char *p = s->extra ? tbx_realloc(al, s->extra, s->extra_len, s->extra_len + kl + vl)
                       : tbx_malloc(al, kl + vl);
    if (!p) return false;
    memcpy(p + s->extra_len, key, kl);
    memcpy(p + s->extra_len + kl, val, vl);
    s->extra = p;
    s->extra_len += kl + vl;
    return true;
}

/* A tensor's dimension by name, or false. */
static bool ew_tensor_dim(const tbx_writer *w, const char *name, unsigned d, char *buf,
                          size_t cap) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < w->ntensors; i++) {
        if (w->tensors[i].name_len != nl || memcmp(w->tensors[i].name, name, nl) != 0) continue;
        if (w->tensors[i].ndim <= d) return false;
        snprintf(buf, cap, "%" PRIu64, w->tensors[i].shape[d]);
        return true;
    }
    return false;
}

/* Completes the required metadata of a model file (ew_state.extra) from what the file holds:
 * the vocabulary, the tensors of EMBD's table, SOURCE_DATE_EPOCH. */
static tbx_status ew_required(tbx_writer *w, ew_state *s, const em_vocab *v, tbx_error *err) {
    tbx_status st = TBX_OK;
    char missing[256] = "";  /* every key that cannot be had, for one message */
    size_t nmissing = 0;
    for (size_t k = 0; em_required_keys[k] && st == TBX_OK; k++) {
        const char *key = em_required_keys[k];
        if (ew_meta(w, key)) continue;
        char val[128];
        bool ok = false;
        if (!strcmp(key, "vocab_size")) {
            snprintf(val, sizeof val, "%" PRIu32, v->count);
            ok = true;
        } else if (!strcmp(key, "embedding_dim") || !strcmp(key, "hidden_size")) {
            ok = ew_tensor_dim(w, "embeddings.word_embeddings.weight", 1, val, sizeof val);
        } else if (!strcmp(key, "num_layers")) {
            uint64_t layers = 0;
            for (size_t i = 0; i < w->ntensors; i++) {
                const tbx_wtensor *t = &w->tensors[i];
                if (t->name_len < 15 || strncmp(t->name, "encoder.layer.", 14)) continue;
                uint64_t L = strtoull(t->name + 14, NULL, 10);
                if (L + 1 > layers) layers = L + 1;
            }
            if (layers) { snprintf(val, sizeof val, "%" PRIu64, layers); ok = true; }
        } else if (!strcmp(key, "intermediate_size")) {
            ok = ew_tensor_dim(w, "encoder.layer.0.intermediate.dense.bias", 0, val, sizeof val);
        } else if (!strcmp(key, "max_position_emb")) {
            ok = ew_tensor_dim(w, "embeddings.position_embeddings.weight", 0, val, sizeof val);
        } else if (!strcmp(key, "created_at")) {
            const char *e = getenv("SOURCE_DATE_EPOCH");
            char *endp = NULL;
            long long t = e ? strtoll(e, &endp, 10) : 0;
            if (!e || !*e || *endp || t < 0) t = 0;
            time_t tt = (time_t)t;
            struct tm tm;
            if (gmtime_r(&tt, &tm)) {
                strftime(val, sizeof val, "%Y-%m-%dT%H:%M:%SZ", &tm);
                ok = true;
            }
        }
        if (!ok) {
            size_t l = strlen(missing);
            snprintf(missing + l, sizeof missing - l, "%s\"%s\"", nmissing ? ", " : "", key);
            nmissing++;
        } else if (!ew_add_extra(&w->al, s, key, val)) {
            st = tbx_err_nomem(err, "metadata");
        }
    }
    if (st == TBX_OK && nmissing)
        st = tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata",
                     "required metadata key%s %s %s missing and cannot be derived (an EMBD file "
                     "with a vocabulary is a model file; give %s as metadata, e.g. tbx convert "
                     "--meta KEY=VALUE; tbx convert reads them from a Hugging Face directory's "
                     "config.json)", nmissing > 1 ? "s" : "", missing,
                     nmissing > 1 ? "are" : "is", nmissing > 1 ? "them" : "it");
    return st;
}

tbx_status em_w_vocab(tbx_writer *w, bool legacy, em_vocab *v, bool *has, tbx_error *err) {
    *has = false;
    memset(v, 0, sizeof *v);
    const tbx_wsection *sv = ew_section(w, "vocab");
    tbx_status st = TBX_OK;
    if (sv && sv->type == EM_VOCAB_SPEC) {
        st = em_vocab_parse(&w->al, sv->data, sv->len, 0, v, err);
    } else if (sv) {
        st = em_vocab_parse_legacy(&w->al, sv->data, sv->len, 0, v, err);
        if (st == TBX_OK && !v->has_special && !legacy) {
            em_vocab_free(&w->al, v);
            st = tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "vocab",
                         "the legacy vocabulary lacks one of [PAD], [UNK], [CLS], [SEP], [MASK], "
                         "whose ids an EMBD vocabulary stores");
        }
    } else {
        return TBX_OK;
    }
    if (st == TBX_OK) *has = true;
    return st;
}

tbx_status em_w_layout(tbx_writer *w, tbx_error *err) {
    ew_state *s = tbx_calloc(&w->al, 1, sizeof *s);
    if (!s) return tbx_err_nomem(err, "EMBD writer state");
    s->tag = EW_STATE_TAG;
    w->drv_state = s;
    s->nt = w->ntensors ? w->ntensors : 1;
    s->t = tbx_calloc(&w->al, s->nt, sizeof *s->t);
    if (!s->t) return tbx_err_nomem(err, "EMBD tensor table");
    for (size_t i = 0; i < w->ntensors; i++) {
        s->t[i].name = w->tensors[i].name;
        s->t[i].name_len = w->tensors[i].name_len;
    }
    tbx_status st = TBX_OK;
    em_vocab v;
    bool has_vocab = false;
    if (st == TBX_OK) st = em_w_vocab(w, false, &v, &has_vocab, err);
    if (st == TBX_OK && has_vocab) st = ew_required(w, s, &v, err);

    /* sizes */
    uint64_t ms = EM_META_HEAD, vs = 0, names = 0, n = 0;
    for (size_t i = 0; i < w->nmeta; i++) ms += 4 + w->meta[i].key_len + w->meta[i].value->v.s.n;
    for (size_t p = 0; p < s->extra_len;) {
        size_t kl = strlen(s->extra + p), vl = strlen(s->extra + p + kl + 1);
        ms += 4 + kl + vl;
        p += kl + vl + 2;
    }
    if (has_vocab) vs = EM_VOCAB_HEAD + 2 * (uint64_t)v.count + v.blob_len + EM_SPECIAL_SIZE;
    for (size_t i = 0; i < w->ntensors; i++) { names += s->t[i].name_len; n++; }
    uint64_t mo = EM_HEADER_SIZE, vo = has_vocab ? ew_align(mo + ms, 8) : 0;
    uint64_t to = ew_align(has_vocab ? vo + vs : mo + ms, 8);
    uint64_t tdo = ew_align(to + n * EM_DESC_SIZE + names, EM_TENSOR_ALIGN);
    uint64_t rel = 0, tds = 0;
    for (size_t i = 0; i < w->ntensors && st == TBX_OK; i++) {
        rel = ew_align(rel, EM_TENSOR_ALIGN);
        s->t[i].rel = rel;
        w->tensors[i].offset = tdo + rel;
        if (!tbx_add_u64(rel, w->tensors[i].nbytes, &rel))
            st = tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "tensor data overflows");
        tds = rel;
    }
    if (st == TBX_OK && (ms > UINT32_MAX || vs > UINT32_MAX || tdo > UINT32_MAX || n > UINT32_MAX ||
                         w->nmeta + s->extra_len > UINT32_MAX))
        st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "header",
                     "the metadata, vocabulary and tensor index take %" PRIu64 " bytes; EMBD "
                     "offsets are u32 (4 GiB)", tdo);
    uint64_t total = 0;
    if (st == TBX_OK && (!tbx_add_u64(tdo, tds, &total) || !tbx_add_u64(total, 16, &total)))
        st = tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "file size overflows");
    if (st != TBX_OK) {
        if (has_vocab) em_vocab_free(&w->al, &v);
        return st;
    }

    /* header */
    uint8_t h[EM_HEADER_SIZE] = {0};
    memcpy(h, "EMBD", 4);
    tbx_st16(h + 4, EM_VERSION_MAJOR);
    tbx_st16(h + 6, EM_VERSION_MINOR);
    tbx_st32(h + 8, (has_vocab ? EM_F_VOCAB : 0) | EM_F_ALIGNED | EM_F_CHECKSUM);
    tbx_st32(h + 12, (uint32_t)mo);
    tbx_st32(h + 16, (uint32_t)ms);
    tbx_st32(h + 20, (uint32_t)vo);
    tbx_st32(h + 24, (uint32_t)vs);
    tbx_st32(h + 28, (uint32_t)to);
    tbx_st32(h + 32, (uint32_t)n);
    tbx_st32(h + 36, (uint32_t)tdo);
    tbx_st64(h + 40, tds);
    tbx_st64(h + 48, total);
    tbx_st32(h + 56, em_crc32(0, h, EM_HEADER_CRC_LEN));

    ew_emit e = {w, NULL, 0, 0, 0, TBX_OK, err};
    e.buf = tbx_malloc(&w->al, EW_BUF);
    if (!e.buf) e.st = tbx_err_nomem(err, "EMBD header buffer");
    ew_put(&e, h, sizeof h);
    /* metadata: the caller's entries, then the derived ones */
    size_t nextra = 0;
    for (size_t p = 0; p < s->extra_len; nextra++) {
        size_t kl = strlen(s->extra + p);
        p += kl + 1;
        p += strlen(s->extra + p) + 1;
    }
    ew_u32(&e, (uint32_t)(w->nmeta + nextra));
    ew_u32(&e, (uint32_t)(ms - EM_META_HEAD));
    for (size_t i = 0; i < w->nmeta; i++) {
        const tbx_meta_entry *m = &w->meta[i];
        ew_u16(&e, (uint16_t)m->key_len);
        ew_u16(&e, (uint16_t)m->value->v.s.n);
        ew_put(&e, m->key, m->key_len);
        ew_put(&e, m->value->v.s.p, m->value->v.s.n);
    }
    for (size_t p = 0; p < s->extra_len;) {
        const char *k = s->extra + p, *val = k + strlen(k) + 1;
        ew_u16(&e, (uint16_t)strlen(k));
        ew_u16(&e, (uint16_t)strlen(val));
        ew_put(&e, k, strlen(k));
        ew_put(&e, val, strlen(val));
        p += strlen(k) + strlen(val) + 2;
    }
    /* vocabulary */
    if (has_vocab) {
        ew_zero_to(&e, vo);
        uint32_t ttotal = (uint32_t)(2 * (uint64_t)v.count + v.blob_len);
        ew_u32(&e, v.count);
        ew_u32(&e, ttotal);
        ew_u32(&e, EM_VOCAB_HEAD + ttotal);
        for (uint32_t i = 0; i < v.count; i++) {
            uint32_t l = v.off[i + 1] - v.off[i];
            ew_u16(&e, (uint16_t)l);
            ew_put(&e, v.blob + v.off[i], l);
        }
        for (unsigned k = 0; k < 5; k++) ew_u32(&e, v.special[k]);
        em_vocab_free(&w->al, &v);
    }
    /* tensor index */
    ew_zero_to(&e, to);
    for (size_t i = 0; i < w->ntensors; i++) {
        const ew_tensor *t = &s->t[i];
        const tbx_wtensor *wt = &w->tensors[i];
        uint8_t d[EM_DESC_SIZE] = {0};
        tbx_st32(d, em_fnv1a(t->name, t->name_len));
        d[4] = (uint8_t)em_code_of_dtype((tbx_dtype)wt->dtype);
        d[5] = (uint8_t)wt->ndim;
        tbx_st16(d + 6, (uint16_t)t->name_len);
        for (unsigned k = 0; k < wt->ndim; k++) tbx_st32(d + 8 + 4 * k, (uint32_t)wt->shape[k]);
        tbx_st64(d + 24, t->rel);
        ew_put(&e, d, sizeof d);
    }
    for (size_t i = 0; i < w->ntensors; i++) ew_put(&e, s->t[i].name, s->t[i].name_len);
    ew_zero_to(&e, tdo);
    ew_flush(&e);
    tbx_free(&w->al, e.buf, EW_BUF);
    /* the names (the writer's) were needed for the index only */
    for (size_t i = 0; i < w->ntensors; i++) s->t[i].name = NULL;
    if (e.st != TBX_OK) return e.st;
    s->tdo = tdo;
    s->data_end = tdo + tds;
    s->fcrc_prefix = e.crc;
    s->dcrc = 0;
    s->next = tdo;
    s->in_order = true;
    w->end = total;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Data and footer                                                                             */
/* ------------------------------------------------------------------------------------------ */
static void ew_crc_zeros(ew_state *s, uint64_t n) {
    static const uint8_t z[256];
    while (n) {
        size_t k = n < sizeof z ? (size_t)n : sizeof z;
        s->dcrc = em_crc32(s->dcrc, z, k);
        n -= k;
    }
}

tbx_status em_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                     tbx_error *err) {
    ew_state *s = w->drv_state;
    uint64_t pos = t->offset + w->cur_written;
    if (s->in_order) {
        if (pos < s->next) {
            s->in_order = false;
        } else {
            ew_crc_zeros(s, pos - s->next);
            s->dcrc = em_crc32(s->dcrc, data, len);
            s->next = pos + len;
        }
    }
    return tbx_out_pwrite(&w->out, pos, data, len, err);
}

tbx_status em_w_finish(tbx_writer *w, tbx_error *err) {
    ew_state *s = w->drv_state;
    if (!s) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "writer", "EMBD writer not laid out");
    tbx_status st = TBX_OK;
    if (s->in_order && s->next <= s->data_end) {
        ew_crc_zeros(s, s->data_end - s->next);
    } else {
        /* bytes came out of file order: read the data section back (a placeholder footer first,
         * so that trailing padding reads back as zero) */
        st = tbx_out_zero(&w->out, s->data_end, EM_FOOTER_SIZE, err);
        if (st != TBX_OK) return st;
        uint8_t *buf = tbx_malloc(&w->al, EW_BUF);
        if (!buf) return tbx_err_nomem(err, "CRC buffer");
        s->dcrc = 0;
        for (uint64_t pos = s->tdo; pos < s->data_end && st == TBX_OK;) {
            size_t n = (size_t)(s->data_end - pos < EW_BUF ? s->data_end - pos : EW_BUF);
            /* unwritten gaps (padding) read back as zero */
            st = tbx_out_pread(&w->out, pos, buf, n, err);
            if (st != TBX_OK) break;
            s->dcrc = em_crc32(s->dcrc, buf, n);
            pos += n;
        }
        tbx_free(&w->al, buf, EW_BUF);
        if (st != TBX_OK) return st;
    }
    uint8_t f[EM_FOOTER_SIZE] = {0};
    tbx_st32(f, s->dcrc);
    tbx_st32(f + 4, em_crc32_combine(s->fcrc_prefix, s->dcrc, s->data_end - s->tdo));
    memcpy(f + 8, "DBME", 4);
    st = tbx_out_pwrite(&w->out, s->data_end, f, sizeof f, err);
    if (st == TBX_OK) w->end = s->data_end + EM_FOOTER_SIZE;
    return st;
}
