/*
 * embd_legacy_write.c - the writer of "embd-legacy", the layout cpp_embedder's own converter
 * (tools/convert_weights.py) writes and its C++ WeightLoader reads (the reader is
 * embd_legacy.c; docs/formats/embd.md, "The legacy layout"):
 *
 *   +------+---------+-------------+------------------------------------------------------+
 *   | EMBD | u32 = 1 | u32 ntensors| ntensors x { u32 name_len, name, u32 ndim (1..4),     |
 *   |      | version |             |              u32 dims[ndim], f32 data[prod(dims)] }    |
 *   +------+---------+-------------+------------------------------------------------------+
 *   | u32 vocab_count | vocab_count x { u32 len, token bytes }                   (to EOF) |
 *   +-----------------------------------------------------------------------------------------+
 *
 * No alignment, no metadata, no checksums: every byte is determined by the tensors and the
 * vocabulary, so a model the converter accepts comes out as the converter's very bytes.
 *
 * A BERT model (a tensor "embeddings.word_embeddings.weight"; a Hugging Face directory's names,
 * "bert." prefix and LayerNorm gamma/beta, are mapped by src/models' import before they reach
 * this writer) is written as the converter writes it:
 *   - the converter's tensors in its order: the five embedding tensors, then per layer 0..L-1
 *     the sixteen tensors of encoder.layer.N (every one must be there: TBX_E_FORMAT naming the
 *     missing ones). The converter writes exactly six layers; this writer writes every layer
 *     the model has (the same bytes for six);
 *   - the six linear weights of each layer (attention query, key, value, output dense,
 *     intermediate dense, output dense) transposed to [in, out], as the converter has done
 *     since its commit 99df7c6 ("add weight matrix transposition for c++ compatibility"):
 *     cpp_embedder's runtime computes x @ W. The model's orientation is read from the
 *     feed-forward shapes against the intermediate bias: PyTorch's [out, in] is transposed, a
 *     model already [in, out] (a legacy file written since that commit) is copied as it is.
 *     With intermediate size = hidden size a legacy input cannot tell, and is refused;
 *   - the pooler and the buffers embeddings.position_ids / token_type_ids left out, as the
 *     converter leaves them out (cpp_embedder mean-pools; the buffers are not weights); any
 *     other tensor follows the table in the order given, as it is.
 * Any other set of tensors is written in the order given, as it is (a plain container the
 * loader reads just the same).
 *
 * Vocabulary: the "vocab" section (type 1, an EMBD one: its special ids must be those of the
 * tokens [PAD]... that a legacy reader looks up by text, else TBX_E_LOSSY; type 2, a legacy
 * one, copied; type 3, a model's token list, as src/models' Hugging Face import makes it from
 * tokenizer.json or vocab.txt, copied); none: vocab_count 0. The files of a Hugging Face
 * directory handed over as sections are refused (TBX_E_LOSSY), as by the EMBD writer.
 * The origin's loader refuses more than 100,000 tokens and names or tokens above 1 MiB: so
 * does this writer (TBX_E_LIMIT). Metadata has no place (TBX_E_LOSSY: tbx convert
 * --drop-meta); tensors must be f32 (--cast f32), of 1 to 4 dimensions of 1 to 2^32-1 (the
 * loader's Tensor refuses a dimension of 0).
 *
 * Data: straight to its place (pwrite), except the transposed weights, each held in memory
 * until complete, then transposed in 64 x 64 tiles and written (memory: the largest of them).
 */
#include "embd_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define ELW_STATE_TAG 0x454D4C57u /* "EMLW" */
#define ELW_BUF ((size_t)1 << 20)
#define ELW_MAX_VOCAB 100000u            /* WeightLoader::read_vocabulary */
#define ELW_MAX_STRING ((size_t)1 << 20) /* WeightLoader::read_string: length > 1 MiB refused */

/* The converter's tables (REQUIRED_EMBEDDING_TENSORS, ENCODER_LAYER_TENSORS), in its order. */
static const char *const elw_embed[] = {
    "embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
    "embeddings.LayerNorm.bias",
};
#define ELW_NEMBED 5u
static const char *const elw_layer[] = {
    "attention.self.query.weight", "attention.self.query.bias",
    "attention.self.key.weight", "attention.self.key.bias",
    "attention.self.value.weight", "attention.self.value.bias",
    "attention.output.dense.weight", "attention.output.dense.bias",
    "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
    "intermediate.dense.weight", "intermediate.dense.bias",
    "output.dense.weight", "output.dense.bias",
    "output.LayerNorm.weight", "output.LayerNorm.bias",
};
#define ELW_NLAYER 16u
/* Entries of elw_layer the converter transposes (should_transpose: a ".weight" of 2 dimensions
 * that is neither an embedding table nor a LayerNorm), and their expected PyTorch shapes in
 * units of H (hidden) and I (intermediate): 'H' or 'I' for [rows, cols]. */
static const struct { unsigned k; char rows, cols; } elw_linear[] = {
    {0, 'H', 'H'}, {2, 'H', 'H'}, {4, 'H', 'H'}, {6, 'H', 'H'}, {10, 'I', 'H'}, {12, 'H', 'I'},
};
#define ELW_NLINEAR 6u
/* Left out of a BERT model, as the converter leaves them out. */
static const char *const elw_skip[] = {
    "pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids",
    "embeddings.token_type_ids", NULL,
};

typedef struct elw_tensor {
    const char *name;  /* the name written (the writer's) */
    uint32_t name_len;
    bool skip;         /* a BERT model's pooler / buffers: not written */
    bool transpose;    /* written as [cols, rows] */
    bool in_table;     /* one of the converter's tensors */
    uint8_t *buf;      /* transpose: the bytes received so far */
} elw_tensor;

typedef struct elw_state {
    uint32_t tag;
    elw_tensor *t;
    size_t nt;
} elw_state;

void eml_w_free(tbx_writer *w) {
    elw_state *s = w->drv_state;
    if (!s) return;
    for (size_t i = 0; s->t && i < s->nt; i++)
        if (s->t[i].buf) tbx_free(&w->al, s->t[i].buf, (size_t)w->tensors[i].nbytes);
    if (s->t) tbx_free(&w->al, s->t, s->nt * sizeof *s->t);
    tbx_free(&w->al, s, sizeof *s);
    w->drv_state = NULL;
}

bool eml_w_dtype_ok(tbx_dtype dt) { return dt == TBX_DT_F32; }

/* ------------------------------------------------------------------------------------------ */
/* Checks                                                                                      */
/* ------------------------------------------------------------------------------------------ */
tbx_status eml_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                            tbx_error *err) {
    (void)w;
    (void)v;
    char q[96];
    tbx_quote_bytes(q, sizeof q, key, key_len, 64);
    return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                   "metadata \"%s\": the legacy EMBD layout has no metadata", q);
}

static bool elw_skipped_name(const char *n, size_t nl) {
    for (size_t i = 0; elw_skip[i]; i++)
        if (strlen(elw_skip[i]) == nl && memcmp(elw_skip[i], n, nl) == 0) return true;
    return false;
}

/* What the layout and cpp_embedder's loader take of a tensor that is written. */
static tbx_status elw_check(const tbx_wtensor *t, tbx_error *err) {
    char q[96];
    size_t bad = 0;
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    if (!t->has_data)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": the legacy EMBD layout cannot store a tensor without data",
                       q);
    if (!eml_w_dtype_ok((tbx_dtype)t->dtype)) {
        const tbx_dtype_info *di = tbx_dtype_core_get((tbx_dtype)t->dtype);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": the legacy EMBD layout stores f32 only, not %s (convert "
                       "with --cast f32)", q, di ? di->name : "(invalid)");
    }
    if (t->ndim < 1 || t->ndim > 4)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": the legacy EMBD layout stores 1 to 4 dimensions, not %u "
                       "(cpp_embedder's loader refuses others)", q, (unsigned)t->ndim);
    for (unsigned d = 0; d < t->ndim; d++)
        if (t->shape[d] > UINT32_MAX || t->shape[d] == 0)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": dimension %u is %" PRIu64 "; the legacy EMBD layout "
                           "stores u32 sizes and cpp_embedder's loader refuses 0", q, d,
                           t->shape[d]);
    if (t->name_len > ELW_MAX_STRING)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "tensor.name",
                       "tensor \"%s\": a name of %" PRIu32 " bytes; cpp_embedder's loader "
                       "refuses names above 1 MiB", q, t->name_len);
    if (!tbx_utf8_valid(t->name, t->name_len, &bad))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.name",
                       "tensor name \"%s\" is not valid UTF-8", q);
    return TBX_OK;
}

tbx_status eml_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    (void)w;
    /* a BERT model's pooler and buffers (embeddings.position_ids, an i64) are left out whatever
     * their dtype; whether the model is one is known at layout, which checks them then */
    if (elw_skipped_name(t->name, t->name_len)) return TBX_OK;
    return elw_check(t, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Layout                                                                                      */
/* ------------------------------------------------------------------------------------------ */
/* The written names, sorted (for lookups and duplicates). */
typedef struct elw_key { const char *name; uint32_t len; uint32_t pad; size_t i; } elw_key;

static int elw_cmp(const char *a, size_t al, const char *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}
static int elw_key_cmp(const void *x, const void *y) {
    const elw_key *a = x, *b = y;
    return elw_cmp(a->name, a->len, b->name, b->len);
}

/* The index of the declared tensor written under name n, or -1. */
static ptrdiff_t elw_find(const elw_key *keys, size_t nk, const char *n) {
    size_t lo = 0, hi = nk, nl = strlen(n);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = elw_cmp(keys[mid].name, keys[mid].len, n, nl);
        if (c == 0) return (ptrdiff_t)keys[mid].i;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

/* "encoder.layer.N.<entry of elw_layer>": N (decimal, no leading zero), else -1. */
static int64_t elw_layer_of(const char *n, size_t nl) {
    if (nl < 16 || memcmp(n, "encoder.layer.", 14) != 0) return -1;
    size_t k = 14;
    uint64_t v = 0;
    while (k < nl && n[k] >= '0' && n[k] <= '9' && k - 14 < 6)
        v = v * 10 + (uint64_t)(n[k++] - '0');
    if (k == 14 || k >= nl || n[k] != '.' || (k - 14 > 1 && n[14] == '0')) return -1;
    for (unsigned e = 0; e < ELW_NLAYER; e++)
        if (strlen(elw_layer[e]) == nl - k - 1 && memcmp(n + k + 1, elw_layer[e], nl - k - 1) == 0)
            return (int64_t)v;
    return -1;
}

/* Written names: the writer's own. */
static void elw_names(tbx_writer *w, elw_state *s) {
    for (size_t i = 0; i < w->ntensors; i++) {
        s->t[i].name = w->tensors[i].name;
        s->t[i].name_len = w->tensors[i].name_len;
    }
}

/* The sorted index of the written names (the writer's, unique: the check is a guard). */
static tbx_status elw_index(tbx_writer *w, const elw_state *s, elw_key *keys, tbx_error *err) {
    for (size_t i = 0; i < w->ntensors; i++)
        keys[i] = (elw_key){s->t[i].name, s->t[i].name_len, 0, i};
    if (w->ntensors > 1) qsort(keys, w->ntensors, sizeof *keys, elw_key_cmp);
    for (size_t j = 1; j < w->ntensors; j++)
        if (elw_key_cmp(&keys[j - 1], &keys[j]) == 0)
            return tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "tensor.name",
                           "tensors \"%s\" and \"%s\" both become \"%.*s\"",
                           w->tensors[keys[j - 1].i].name, w->tensors[keys[j].i].name,
                           (int)keys[j].len, keys[j].name);
    return TBX_OK;
}

/* A BERT model: the converter's order into order[] (n entries), the linear weights marked for
 * transposition, the pooler and buffers skipped. */
static tbx_status elw_bert(tbx_writer *w, elw_state *s, const elw_key *keys, size_t *order,
                           size_t *n, tbx_error *err) {
    int64_t layers = 0;
    for (size_t i = 0; i < w->ntensors; i++) {
        int64_t L = elw_layer_of(s->t[i].name, s->t[i].name_len);
        if (L + 1 > layers) layers = L + 1;
    }
    /* every entry of the table, in its order; the first missing ones named */
    char missing[400] = "";
    size_t nmissing = 0, k = 0;
    char nm[96];
    const uint64_t total = ELW_NEMBED + (uint64_t)layers * ELW_NLAYER;
    for (uint64_t e = 0; e < total && nmissing <= 4; e++) {
        if (e < ELW_NEMBED)
            snprintf(nm, sizeof nm, "%s", elw_embed[e]);
        else
            snprintf(nm, sizeof nm, "encoder.layer.%" PRIu64 ".%s", (e - ELW_NEMBED) / ELW_NLAYER,
                     elw_layer[(e - ELW_NEMBED) % ELW_NLAYER]);
        ptrdiff_t i = elw_find(keys, w->ntensors, nm);
        if (i >= 0) {
            order[k++] = (size_t)i;
            s->t[i].in_table = true;
            continue;
        }
        size_t l = strlen(missing);
        if (nmissing < 4)
            snprintf(missing + l, sizeof missing - l, "%s\"%s\"", nmissing ? ", " : "", nm);
        nmissing++;
    }
    if (nmissing)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor",
                       "a BERT model in the legacy EMBD layout needs every tensor of "
                       "cpp_embedder's table for its %" PRId64 " layer%s (encoder.layer.0-%"
                       PRId64 "); missing: %s%s", layers, layers == 1 ? "" : "s",
                       layers ? layers - 1 : 0, missing, nmissing > 4 ? ", ..." : "");
    /* the orientation of the linear weights: H from the word embeddings, I from the
     * intermediate bias */
    const tbx_wtensor *we = &w->tensors[order[0]];
    const tbx_wtensor *ib = layers ? &w->tensors[order[ELW_NEMBED + 11]] : NULL;
    if (we->ndim != 2 || (ib && ib->ndim != 1))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\" is not 2-D or \"%s\" not 1-D: not a BERT model",
                       we->name, ib ? ib->name : "");
    const uint64_t H = we->shape[1], I = ib ? ib->shape[0] : 0;
    int orient = 0; /* 1: PyTorch [out, in] (transpose), 2: [in, out] already */
    for (int64_t L = 0; L < layers; L++)
        for (unsigned j = 0; j < ELW_NLINEAR; j++) {
            const size_t i = order[ELW_NEMBED + (size_t)L * ELW_NLAYER + elw_linear[j].k];
            const tbx_wtensor *t = &w->tensors[i];
            const uint64_t r = elw_linear[j].rows == 'H' ? H : I;
            const uint64_t c = elw_linear[j].cols == 'H' ? H : I;
            int fits = 0;
            if (t->ndim == 2 && t->shape[0] == r && t->shape[1] == c) fits |= 1;
            if (t->ndim == 2 && t->shape[0] == c && t->shape[1] == r) fits |= 2;
            if (!(fits & (orient ? orient : 3))) {
                char want[96];
                if (orient == 2)
                    snprintf(want, sizeof want, "[%" PRIu64 ", %" PRIu64 "] ([in, out], as the "
                             "model's other linear weights)", c, r);
                else if (orient == 1)
                    snprintf(want, sizeof want, "[%" PRIu64 ", %" PRIu64 "] ([out, in], as the "
                             "model's other linear weights)", r, c);
                else
                    snprintf(want, sizeof want, "[%" PRIu64 ", %" PRIu64 "] or its transpose", r,
                             c);
                return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.shape",
                               "tensor \"%s\" is not %s (hidden size %" PRIu64 ", intermediate "
                               "size %" PRIu64 ")", t->name, want, H, I);
            }
            if (fits != 3) orient = fits;
            s->t[i].transpose = true;
        }
    if (layers && orient == 0) {
        /* square everywhere (I == H): only a legacy file can hold [in, out] */
        const tbx_wsection *sv = em_w_section(w, "vocab");
        if (sv && sv->type == EM_VOCAB_LEGACY)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.shape",
                           "the intermediate size equals the hidden size (%" PRIu64 "), so the "
                           "shapes of this legacy file do not tell whether its linear weights are "
                           "[out, in] (cpp_embedder's converter before commit 99df7c6) or "
                           "[in, out] (since): cannot write it for cpp_embedder", H);
        orient = 1;
    }
    for (size_t i = 0; orient == 2 && i < w->ntensors; i++) s->t[i].transpose = false;
    /* the rest: the pooler and buffers left out, anything else after the table as it is */
    for (size_t i = 0; i < w->ntensors; i++) {
        if (s->t[i].in_table) continue;
        if (elw_skipped_name(s->t[i].name, s->t[i].name_len)) { s->t[i].skip = true; continue; }
        order[k++] = i;
    }
    *n = k;
    return TBX_OK;
}

/* The vocabulary, checked against what the loader and a legacy reader take. */
static tbx_status elw_vocab(tbx_writer *w, em_vocab *v, bool *has, tbx_error *err) {
    tbx_status st = em_w_vocab(w, true, v, has, err);
    if (st != TBX_OK || !*has) return st;
    if (v->count > ELW_MAX_VOCAB)
        st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "vocab",
                     "%" PRIu32 " tokens: cpp_embedder's loader refuses more than %u", v->count,
                     ELW_MAX_VOCAB);
    for (uint32_t i = 0; st == TBX_OK && i < v->count; i++)
        if (v->off[i + 1] - v->off[i] > ELW_MAX_STRING)
            st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "vocab",
                         "token %" PRIu32 " has %" PRIu32 " bytes: cpp_embedder's loader refuses "
                         "strings above 1 MiB", i, v->off[i + 1] - v->off[i]);
    const tbx_wsection *sv = em_w_section(w, "vocab");
    if (st == TBX_OK && sv && sv->type == EM_VOCAB_SPEC) {
        /* no special-token block: a reader finds the ids by the tokens' text */
        for (unsigned k = 0; st == TBX_OK && k < 5; k++) {
            uint32_t id;
            if (!em_vocab_find(v, em_special_tokens[k], &id) || id != v->special[k])
                st = tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "vocab",
                             "the vocabulary's %s is %" PRIu32 ", not the id of token \"%s\": the "
                             "legacy EMBD layout has no special-token block and a reader finds "
                             "them by text", em_special_names[k], v->special[k],
                             em_special_tokens[k]);
        }
    }
    if (st != TBX_OK) { em_vocab_free(&w->al, v); *has = false; }
    return st;
}

tbx_status eml_w_layout(tbx_writer *w, tbx_error *err) {
    /* alignment, compression, digests and versions other than 1: refused at the writer's
     * open from the row (no TBX_FCAP_ALIGNMENT / _COMPRESSION / _DIGESTS, write_versions 1) */
    elw_state *s = tbx_calloc(&w->al, 1, sizeof *s);
    if (!s) return tbx_err_nomem(err, "EMBD legacy writer state");
    s->tag = ELW_STATE_TAG;
    w->drv_state = s;
    s->nt = w->ntensors ? w->ntensors : 1;
    s->t = tbx_calloc(&w->al, s->nt, sizeof *s->t);
    size_t *order = tbx_calloc(&w->al, s->nt, sizeof *order);
    if (!s->t || !order) {
        if (order) tbx_free(&w->al, order, s->nt * sizeof *order);
        return tbx_err_nomem(err, "EMBD legacy tensor table");
    }
    size_t n = 0;
    elw_key *keys = tbx_calloc(&w->al, s->nt, sizeof *keys);
    tbx_status st = keys ? TBX_OK : tbx_err_nomem(err, "EMBD legacy name index");
    if (st == TBX_OK) elw_names(w, s);
    if (st == TBX_OK) st = elw_index(w, s, keys, err);
    if (st == TBX_OK && elw_find(keys, w->ntensors, elw_embed[0]) >= 0) {
        st = elw_bert(w, s, keys, order, &n, err);
    } else if (st == TBX_OK) {
        for (size_t i = 0; i < w->ntensors; i++) order[n++] = i;
    }
    if (keys) tbx_free(&w->al, keys, s->nt * sizeof *keys);
    /* a tensor check_tensor let through by its name only: not a BERT model after all */
    for (size_t i = 0; st == TBX_OK && i < w->ntensors; i++)
        if (!s->t[i].skip && elw_skipped_name(s->t[i].name, s->t[i].name_len))
            st = elw_check(&w->tensors[i], err);
    em_vocab v;
    bool has_vocab = false;
    if (st == TBX_OK) st = elw_vocab(w, &v, &has_vocab, err);

    /* offsets in file order */
    uint64_t pos = 12;
    for (size_t j = 0; st == TBX_OK && j < n; j++) {
        tbx_wtensor *t = &w->tensors[order[j]];
        uint64_t head = 4 + (uint64_t)s->t[order[j]].name_len + 4 + 4 * (uint64_t)t->ndim;
        if (!tbx_add_u64(pos, head, &pos)) break;
        t->offset = pos;
        if (!tbx_add_u64(pos, t->nbytes, &pos)) break;
    }
    const uint64_t vocab_at = pos;
    uint64_t end = pos;
    if (st == TBX_OK && !tbx_add_u64(end, 4, &end)) end = 0;
    if (st == TBX_OK && has_vocab && end &&
        (!tbx_add_u64(end, 4 * (uint64_t)v.count, &end) || !tbx_add_u64(end, v.blob_len, &end)))
        end = 0;
    if (st == TBX_OK && (end == 0 || n > UINT32_MAX))
        st = tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "the file size overflows");

    /* the bytes that are not tensor data: header, each tensor's head, the vocabulary */
    uint8_t *buf = st == TBX_OK ? tbx_malloc(&w->al, ELW_BUF) : NULL;
    if (st == TBX_OK && !buf) st = tbx_err_nomem(err, "EMBD legacy buffer");
    if (st == TBX_OK) {
        memcpy(buf, "EMBD", 4);
        tbx_st32(buf + 4, 1);
        tbx_st32(buf + 8, (uint32_t)n);
        st = tbx_out_pwrite(&w->out, 0, buf, 12, err);
    }
    for (size_t j = 0; st == TBX_OK && j < n; j++) {
        const tbx_wtensor *t = &w->tensors[order[j]];
        const elw_tensor *et = &s->t[order[j]];
        uint64_t head = 4 + (uint64_t)et->name_len + 4 + 4 * (uint64_t)t->ndim;
        uint64_t at = t->offset - head;
        uint8_t h[8 + 16];
        tbx_st32(h, et->name_len);
        st = tbx_out_pwrite(&w->out, at, h, 4, err);
        if (st == TBX_OK) st = tbx_out_pwrite(&w->out, at + 4, et->name, et->name_len, err);
        tbx_st32(h, t->ndim);
        for (unsigned d = 0; d < t->ndim; d++) {
            /* transposed: [cols, rows] */
            unsigned src = et->transpose ? t->ndim - 1 - d : d;
            tbx_st32(h + 4 + 4 * d, (uint32_t)t->shape[src]);
        }
        if (st == TBX_OK)
            st = tbx_out_pwrite(&w->out, at + 4 + et->name_len, h, 4 + 4 * (size_t)t->ndim, err);
    }
    if (st == TBX_OK) {
        /* the vocabulary, through buf in pieces of at most ELW_BUF */
        size_t len = 4;
        uint64_t at = vocab_at;
        tbx_st32(buf, has_vocab ? v.count : 0);
        for (uint32_t i = 0; has_vocab && st == TBX_OK && i < v.count; i++) {
            uint32_t l = v.off[i + 1] - v.off[i];
            const char *p = v.blob + v.off[i];
            uint8_t b4[4];
            tbx_st32(b4, l);
            for (int part = 0; part < 2 && st == TBX_OK; part++) {
                const uint8_t *src = part ? (const uint8_t *)p : b4;
                size_t left = part ? l : 4;
                while (st == TBX_OK && left) {
                    if (len == ELW_BUF) {
                        st = tbx_out_pwrite(&w->out, at, buf, len, err);
                        at += len;
                        len = 0;
                    }
                    size_t k = ELW_BUF - len < left ? ELW_BUF - len : left;
                    memcpy(buf + len, src, k);
                    len += k;
                    src += k;
                    left -= k;
                }
            }
        }
        if (st == TBX_OK && len) st = tbx_out_pwrite(&w->out, at, buf, len, err);
    }
    if (buf) tbx_free(&w->al, buf, ELW_BUF);
    if (has_vocab) em_vocab_free(&w->al, &v);
    tbx_free(&w->al, order, s->nt * sizeof *order);
    if (st == TBX_OK) w->end = end;
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Data                                                                                        */
/* ------------------------------------------------------------------------------------------ */
tbx_status eml_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                      tbx_error *err) {
    elw_state *s = w->drv_state;
    elw_tensor *et = &s->t[t - w->tensors];
    if (et->skip) return TBX_OK;
    if (!et->transpose) return tbx_out_pwrite(&w->out, t->offset + w->cur_written, data, len, err);
    if (!et->buf) {
        if (t->nbytes > SIZE_MAX) return tbx_err_nomem(err, "tensor to transpose");
        et->buf = tbx_malloc(&w->al, (size_t)t->nbytes);
        if (!et->buf) return tbx_err_nomem(err, "tensor to transpose");
    }
    memcpy(et->buf + w->cur_written, data, len);
    return TBX_OK;
}

/* out[c][r] = in[r][c] for an f32 [rows, cols] matrix, in 64 x 64 tiles. */
static void elw_transpose(const uint8_t *in, uint8_t *out, uint64_t rows, uint64_t cols) {
    enum { TILE = 64 };
    for (uint64_t r0 = 0; r0 < rows; r0 += TILE)
        for (uint64_t c0 = 0; c0 < cols; c0 += TILE) {
            uint64_t r1 = r0 + TILE < rows ? r0 + TILE : rows;
            uint64_t c1 = c0 + TILE < cols ? c0 + TILE : cols;
            for (uint64_t r = r0; r < r1; r++)
                for (uint64_t c = c0; c < c1; c++)
                    memcpy(out + 4 * (c * rows + r), in + 4 * (r * cols + c), 4);
        }
}

tbx_status eml_w_tensor_done(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    elw_state *s = w->drv_state;
    elw_tensor *et = &s->t[t - w->tensors];
    if (et->skip || !et->transpose || t->nbytes == 0) return TBX_OK;
    uint8_t *out = tbx_malloc(&w->al, (size_t)t->nbytes);
    if (!out) return tbx_err_nomem(err, "transposed tensor");
    elw_transpose(et->buf, out, t->shape[0], t->shape[1]);
    tbx_free(&w->al, et->buf, (size_t)t->nbytes);
    et->buf = NULL;
    tbx_status st = tbx_out_pwrite(&w->out, t->offset, out, (size_t)t->nbytes, err);
    tbx_free(&w->al, out, (size_t)t->nbytes);
    return st;
}
