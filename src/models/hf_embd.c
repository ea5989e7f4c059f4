/*
 * hf_embd.c - a Hugging Face (sentence-transformers) model directory to EMBD, in either layout
 * (docs/formats/embd.md "A Hugging Face sentence-transformers directory"). What a BERT
 * embedder of Hugging Face is to cpp_embedder, said in EMBD's own terms; the EMBD writers
 * (src/formats/embd/) know only their container and never see a Hugging Face file.
 *
 * The input's sections config.json, tokenizer.json, vocab.txt and 1_Pooling/config.json are
 * read here (the other files of such a directory, tokenizer_config.json,
 * special_tokens_map.json, modules.json, sentence_bert_config.json,
 * config_sentence_transformers.json, are consumed without being stored, as before); the
 * writer gets:
 *   - the plan's tensor names (config.json given): a "bert." prefix dropped, LayerNorm
 *     gamma/beta renamed weight/bias; for the specification's layout, tensors outside its
 *     table (embeddings.*, encoder.layer.N.*, pooler.dense.*), such as the buffer
 *     embeddings.position_ids, are left out of the plan. The legacy layout gets every tensor
 *     renamed: its writer leaves out what cpp_embedder's converter leaves out, by name;
 *   - the vocabulary as a section "vocab": of type 1 for EMBD (the specification's section:
 *     tokens with u16 lengths and the ids of [PAD], [UNK], [CLS], [SEP], [MASK], which must be
 *     there), of type 3 for the legacy layout (a token list with u32 lengths, no special ids:
 *     a model's own vocabulary, which its writer tells from a legacy file's, type 2). From
 *     tokenizer.json (model.vocab + added_tokens, ids 0..n-1 without gaps; walked in its text by
 *     hf_tokenizer.c, no tree), else vocab.txt (one token per line, the line number is the id;
 *     a line ends at "\n" with a "\r" before it dropped for EMBD, at "\n", "\r\n" or a lone "\r"
 *     for the legacy layout, as Python's text mode reads it: what cpp_embedder's converter
 *     reads);
 *   - for EMBD, when there is a vocabulary (a model file), the required metadata keys the
 *     caller's metadata lacks, after it, in the specification's order: from config.json /
 *     1_Pooling/config.json first, then the plan's tensors and the vocabulary. created_at (the
 *     last required key) and any key nothing here gives are left to the writer (which sets
 *     created_at from SOURCE_DATE_EPOCH and names a key still missing).
 * Nothing here writes bytes of the output: the façade (src/api/conversions.c) adds the metadata
 * and the section through the writer API and runs the engine on the plan.
 */
#include "hf_tokenizer.h"
#include "models.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* The files of a sentence-transformers directory the import reads or consumes. */
static const char *const he_files[] = {
    "config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json",
    "special_tokens_map.json", "modules.json", "1_Pooling/config.json",
    "sentence_bert_config.json", "config_sentence_transformers.json", NULL,
};

/* EMBD's five special tokens, in the order of its special-token block. */
static const char *const he_special[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

#define HE_VOCAB_SPEC 1u   /* docs/formats/embd.md: the section "vocab" of type 1 */
#define HE_VOCAB_TOKENS 3u /* ... of type 3: a model's token list, legacy encoding */

/* The tensors of EMBD's table (docs/formats/embd.md "Tensor names"). */
static const char *const he_top[] = {
    "embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
    "embeddings.LayerNorm.bias", "pooler.dense.weight", "pooler.dense.bias", NULL,
};
static const char *const he_layer[] = {
    "attention.self.query.weight", "attention.self.query.bias",
    "attention.self.key.weight", "attention.self.key.bias",
    "attention.self.value.weight", "attention.self.value.bias",
    "attention.output.dense.weight", "attention.output.dense.bias",
    "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
    "intermediate.dense.weight", "intermediate.dense.bias", "output.dense.weight",
    "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias", NULL,
};

/* A token list: token i is blob[off[i] .. off[i+1]). */
typedef struct he_vocab {
    uint32_t count;
    uint32_t *off;
    char *blob;
    size_t blob_len;
} he_vocab;

struct tbx_hf_embd {
    const tbx_alloc *al;
    tbx_file *in;
    bool legacy;     /* the legacy layout */
    bool hf;         /* config.json given: names mapped */
    bool has_vocab;
    he_vocab v;      /* the tokens, until the section is made */
    uint32_t count;  /* their number */
    json_t *cfg, *pool;
    uint8_t *sec;    /* the "vocab" section's bytes */
    size_t sec_len;
};

bool tbx_hf_embd_applies(const tbx_file *in, tbx_format to) {
    if (!in || (to != TBX_FORMAT_EMBD && to != TBX_FORMAT_EMBD_LEGACY)) return false;
    /* an input with its own vocabulary section (an EMBD file) is not a Hugging Face directory */
    if (tbx_file_find_section(in, "vocab") >= 0) return false;
    return tbx_file_find_section(in, "config.json") >= 0 ||
           tbx_file_find_section(in, "tokenizer.json") >= 0 ||
           tbx_file_find_section(in, "vocab.txt") >= 0;
}

bool tbx_hf_embd_consumes(const char *section) {
    for (size_t i = 0; section && he_files[i]; i++)
        if (strcmp(section, he_files[i]) == 0) return true;
    return false;
}

static void he_vocab_free(const tbx_alloc *al, he_vocab *v) {
    if (v->off) tbx_free(al, v->off, ((size_t)v->count + 1) * sizeof *v->off);
    if (v->blob) tbx_free(al, v->blob, v->blob_len ? v->blob_len : 1);
    memset(v, 0, sizeof *v);
}

void tbx_hf_embd_free(tbx_hf_embd *h) {
    if (!h) return;
    he_vocab_free(h->al, &h->v);
    if (h->sec) tbx_free(h->al, h->sec, h->sec_len ? h->sec_len : 1);
    json_decref(h->cfg);
    json_decref(h->pool);
    tbx_free(h->al, h, sizeof *h);
}

/* Section `name` of the input, loaded whole (*buf NULL when absent). */
static tbx_status he_load(tbx_hf_embd *h, const char *name, void **buf, size_t *n,
                          tbx_error *err) {
    *buf = NULL;
    *n = 0;
    int64_t i = tbx_file_find_section(h->in, name);
    if (i < 0) return TBX_OK;
    return tbx_section_load_(h->in, (uint64_t)i, buf, n, err);
}

static tbx_status he_json(tbx_hf_embd *h, const char *name, json_t **out, tbx_error *err) {
    void *buf;
    size_t n;
    *out = NULL;
    tbx_status st = he_load(h, name, &buf, &n, err);
    if (st != TBX_OK || !buf) return st;
    json_error_t je;
    *out = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    tbx_free(h->al, buf, n ? n : 1);
    if (!*out || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, name,
                       "section \"%s\" is not a JSON object: %s (line %d)", name, je.text,
                       je.line);
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The vocabulary                                                                              */
/* ------------------------------------------------------------------------------------------ */
/* Token i's bytes (valid until the next call), NULL when memory runs out. */
typedef const char *(*he_token_fn)(void *ctx, size_t i, size_t *len);

/* The token list of n tokens, checked: at most 65535 bytes each (EMBD's u16 length, kept for
 * both layouts), UTF-8, 4 GiB in all. */
static tbx_status he_vocab_from(const tbx_alloc *al, he_token_fn get, void *ctx, size_t n,
                                const char *what, he_vocab *v, tbx_error *err) {
    memset(v, 0, sizeof *v);
    if (n > UINT32_MAX / 2)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, what, "%zu tokens are too many", n);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *tok = get(ctx, i, &len);
        if (!tok) return tbx_err_nomem(err, "vocabulary");
        if (len > UINT16_MAX)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, what,
                           "token %zu has %zu bytes; EMBD tokens take at most 65535", i, len);
        size_t bad;
        if (!tbx_utf8_valid(tok, len, &bad))
            return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, what,
                           "token %zu is not valid UTF-8", i);
        total += len;
    }
    if (total > UINT32_MAX)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, what, "the tokens exceed 4 GiB");
    v->count = (uint32_t)n;
    v->off = tbx_calloc(al, n + 1, sizeof *v->off);
    v->blob_len = (size_t)total;
    v->blob = tbx_malloc(al, total ? (size_t)total : 1);
    if (!v->off || !v->blob) { he_vocab_free(al, v); return tbx_err_nomem(err, "vocabulary"); }
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *tok = get(ctx, i, &len);
        if (!tok) { he_vocab_free(al, v); return tbx_err_nomem(err, "vocabulary"); }
        memcpy(v->blob + pos, tok, len);
        pos += len;
        v->off[i + 1] = (uint32_t)pos;
    }
    return TBX_OK;
}

/* The first id of token `tok`, or false. */
static bool he_vocab_find(const he_vocab *v, const char *tok, uint32_t *id) {
    size_t n = strlen(tok);
    for (uint32_t i = 0; i < v->count; i++)
        if (v->off[i + 1] - v->off[i] == n && memcmp(v->blob + v->off[i], tok, n) == 0) {
            *id = i;
            return true;
        }
    return false;
}

/* tokenizer.json's tokens by id: at[id] is the offset of the token's string in the text. */
typedef struct he_tj_tokens {
    const tbx_tokj *t;
    const uint32_t *at;
    tbx_tokj_buf buf;
} he_tj_tokens;

static const char *he_tj_token(void *ctx, size_t i, size_t *len) {
    he_tj_tokens *x = ctx;
    return tbx_tokj_str(x->t, x->at[i], &x->buf, len);
}

/* tokenizer.json: model.vocab (token -> id) plus added_tokens, ids 0..n-1 exactly; a token is
 * kept as the offset of its string in the text until the list is built. */
static tbx_status he_vocab_tokenizer(tbx_hf_embd *h, const char *text, size_t text_len,
                                     tbx_error *err) {
    const tbx_alloc *al = h->al;
    tbx_tokj t;
    tbx_status st = tbx_tokj_read(&t, al, text, text_len, "tokenizer.json", err);
    if (st != TBX_OK) return st;
    size_t vocab = t.vocab;
    if (tbx_tokj_kind(&t, vocab) != '{') {
        tbx_tokj_free(&t);
        return tbx_err(err, TBX_E_FORMAT, vocab == TBX_TOKJ_NONE ? TBX_NO_OFFSET : vocab,
                       "tokenizer.json", "tokenizer.json has no object model.vocab (a WordPiece "
                       "vocabulary)");
    }
    size_t added = tbx_tokj_kind(&t, t.added) == '[' ? t.added : TBX_TOKJ_NONE;
    size_t n = tbx_tokj_count(&t, vocab) + tbx_tokj_count(&t, added);
    size_t nn = n ? n : 1;
    uint32_t *at = tbx_calloc(al, nn, sizeof *at);   /* 0: no token (never a string) */
    he_tj_tokens tt = {&t, at, {al, NULL, 0}};
    tbx_tokj_buf b2 = {al, NULL, 0};
    size_t maxid = 0, have = 0, it, key, val;
    char q[96];
    const char *s;
    size_t len;
    if (!at) { st = tbx_err_nomem(err, "vocabulary"); goto out; }
    it = vocab;
    while (tbx_tokj_next(&t, &it, &key, &val)) {
        int64_t id;
        if (!tbx_tokj_int(&t, val, &id)) id = -1;
        if (id < 0 || (uint64_t)id >= n || at[id]) {
            s = tbx_tokj_str(&t, key, &tt.buf, &len);
            tbx_quote_bytes(q, sizeof q, s ? s : "", s ? len : 0, 64);
            st = tbx_err(err, TBX_E_FORMAT, val, "tokenizer.json",
                         "model.vocab[\"%s\"]: id %" PRId64 " is not a free id below %zu", q,
                         id, n);
            goto out;
        }
        at[id] = (uint32_t)key;
        have++;
        if ((size_t)id > maxid) maxid = (size_t)id;
    }
    it = added;
    for (size_t i = 0; tbx_tokj_next(&t, &it, &key, &val); i++) {
        size_t cat = tbx_tokj_get(&t, val, "content");
        int64_t id;
        if (!tbx_tokj_int(&t, tbx_tokj_get(&t, val, "id"), &id)) id = -1;
        if (id < 0 || (uint64_t)id >= n || tbx_tokj_kind(&t, cat) != '"') {
            st = tbx_err(err, TBX_E_FORMAT, val, "tokenizer.json",
                         "added_tokens[%zu] has no usable id and content", i);
            goto out;
        }
        if (at[id]) {
            size_t cl;
            const char *c = tbx_tokj_str(&t, cat, &b2, &cl);
            s = tbx_tokj_str(&t, at[id], &tt.buf, &len);
            if (!c || !s) { st = tbx_err_nomem(err, "vocabulary"); goto out; }
            if (len != cl || memcmp(s, c, cl) != 0) {
                tbx_quote_bytes(q, sizeof q, s, len, 64);
                st = tbx_err(err, TBX_E_FORMAT, val, "tokenizer.json",
                             "added_tokens[%zu]: id %" PRId64 " is \"%s\" in model.vocab", i, id,
                             q);
                goto out;
            }
            continue;
        }
        at[id] = (uint32_t)cat;
        have++;
        if ((size_t)id > maxid) maxid = (size_t)id;
    }
    if (have == 0 || maxid + 1 != have) {
        st = tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tokenizer.json",
                     "the vocabulary ids are not 0..%zu without gaps (%zu tokens, largest id %zu)",
                     have ? have - 1 : 0, have, maxid);
        goto out;
    }
    st = he_vocab_from(al, he_tj_token, &tt, have, "tokenizer.json", &h->v, err);
out:
    if (at) tbx_free(al, at, nn * sizeof *at);
    tbx_tokj_buf_free(&tt.buf);
    tbx_tokj_buf_free(&b2);
    tbx_tokj_free(&t);
    return st;
}

/* The end of the line starting at p (before its terminator) and the start of the next one.
 * py_lines: a line ends at "\n", "\r\n" or a lone "\r", as Python's text mode reads it
 * (universal newlines: what cpp_embedder's converter and transformers' vocab loader see);
 * else at "\n", a "\r" before it dropped. */
static const char *he_line(const char *p, const char *end, bool py_lines, const char **next) {
    if (!py_lines) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        *next = nl ? nl + 1 : end;
        return e > p && e[-1] == '\r' ? e - 1 : e;
    }
    const char *e = p;
    while (e < end && *e != '\n' && *e != '\r') e++;
    *next = e == end ? end : e + (*e == '\r' && e + 1 < end && e[1] == '\n' ? 2 : 1);
    return e;
}

typedef struct he_txt_tokens {
    const char *const *tok;
    const size_t *len;
} he_txt_tokens;

static const char *he_txt_token(void *ctx, size_t i, size_t *len) {
    const he_txt_tokens *x = ctx;
    *len = x->len[i];
    return x->tok[i];
}

/* vocab.txt: one token per line, the id is the line number (he_line's rule of lines). */
static tbx_status he_vocab_txt(tbx_hf_embd *h, const char *text, size_t text_len,
                               tbx_error *err) {
    const tbx_alloc *al = h->al;
    const bool py_lines = h->legacy;
    size_t n = 0;
    const char *p = text, *end = p + text_len, *next;
    for (const char *q = p; q < end; q = next, n++) he_line(q, end, py_lines, &next);
    size_t nn = n ? n : 1;
    const char **tok = tbx_calloc(al, nn, sizeof *tok);
    size_t *len = tbx_calloc(al, nn, sizeof *len);
    if (!tok || !len) {
        if (tok) tbx_free(al, (void *)tok, nn * sizeof *tok);
        if (len) tbx_free(al, len, nn * sizeof *len);
        return tbx_err_nomem(err, "vocabulary");
    }
    size_t i = 0;
    for (; p < end; p = next, i++) {
        const char *e = he_line(p, end, py_lines, &next);
        tok[i] = p;
        len[i] = (size_t)(e - p);
    }
    he_txt_tokens x = {tok, len};
    tbx_status st = he_vocab_from(al, he_txt_token, &x, i, "vocab.txt", &h->v, err);
    tbx_free(al, (void *)tok, nn * sizeof *tok);
    tbx_free(al, len, nn * sizeof *len);
    return st;
}

/* The section "vocab" in the target's terms (he_vocab made): type 1 for EMBD (u32 count,
 * u32 total_size, u32 special_tokens = 12 + total_size, count x (u16 length, bytes), five u32
 * ids), type 3 for the legacy layout (u32 count, count x (u32 length, bytes)). */
static tbx_status he_vocab_section(tbx_hf_embd *h, const char *what, tbx_error *err) {
    const he_vocab *v = &h->v;
    uint32_t special[5] = {0};
    if (!h->legacy)
        for (unsigned k = 0; k < 5; k++)
            if (!he_vocab_find(v, he_special[k], &special[k]))
                return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, what,
                               "the vocabulary has no token \"%s\" (EMBD stores the ids of "
                               "[PAD], [UNK], [CLS], [SEP] and [MASK])", he_special[k]);
    const uint64_t width = h->legacy ? 4 : 2;
    const uint64_t entries = width * v->count + v->blob_len;
    const uint64_t len = h->legacy ? 4 + entries : 12 + entries + 20;
    if (len > SIZE_MAX || (!h->legacy && entries > UINT32_MAX - 12))
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, what,
                       "the vocabulary takes %" PRIu64 " bytes; EMBD sizes are u32", len);
    uint8_t *p = tbx_malloc(h->al, (size_t)len);
    if (!p) return tbx_err_nomem(err, "vocabulary section");
    size_t pos = 0;
    tbx_st32(p, v->count);
    pos = 4;
    if (!h->legacy) {
        tbx_st32(p + 4, (uint32_t)entries);
        tbx_st32(p + 8, (uint32_t)(12 + entries));
        pos = 12;
    }
    for (uint32_t i = 0; i < v->count; i++) {
        uint32_t l = v->off[i + 1] - v->off[i];
        if (h->legacy) tbx_st32(p + pos, l);
        else tbx_st16(p + pos, (uint16_t)l);
        pos += (size_t)width;
        memcpy(p + pos, v->blob + v->off[i], l);
        pos += l;
    }
    for (unsigned k = 0; !h->legacy && k < 5; k++, pos += 4) tbx_st32(p + pos, special[k]);
    h->sec = p;
    h->sec_len = (size_t)len;
    h->count = v->count;
    return TBX_OK;
}

tbx_status tbx_hf_embd_prepare(tbx_file *in, tbx_format to, tbx_hf_embd **out, tbx_error *err) {
    *out = NULL;
    tbx_hf_embd *h = tbx_calloc(&in->al, 1, sizeof *h);
    if (!h) return tbx_err_nomem(err, "Hugging Face import");
    h->al = &in->al;
    h->in = in;
    h->legacy = to == TBX_FORMAT_EMBD_LEGACY;
    h->hf = tbx_file_find_section(in, "config.json") >= 0;
    void *buf = NULL;
    size_t n = 0;
    const char *what = "tokenizer.json";
    tbx_status st = he_load(h, what, &buf, &n, err);
    if (st == TBX_OK && buf) {
        st = he_vocab_tokenizer(h, buf, n, err);
    } else if (st == TBX_OK) {
        what = "vocab.txt";
        st = he_load(h, what, &buf, &n, err);
        if (st == TBX_OK && buf) st = he_vocab_txt(h, buf, n, err);
    }
    h->has_vocab = st == TBX_OK && buf;
    if (buf) tbx_free(h->al, buf, n ? n : 1);
    if (st == TBX_OK && h->has_vocab) st = he_vocab_section(h, what, err);
    he_vocab_free(h->al, &h->v); /* the section holds the tokens now */
    /* the settings of the metadata of a model file (EMBD, with a vocabulary) */
    if (st == TBX_OK && h->has_vocab && !h->legacy) st = he_json(h, "config.json", &h->cfg, err);
    if (st == TBX_OK && h->has_vocab && !h->legacy)
        st = he_json(h, "1_Pooling/config.json", &h->pool, err);
    if (st != TBX_OK) {
        tbx_hf_embd_free(h);
        return st;
    }
    *out = h;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Tensor names                                                                                */
/* ------------------------------------------------------------------------------------------ */
/* The name of Hugging Face tensor n in EMBD (into buf, cap bytes, NUL-terminated): without a
 * "bert." prefix, LayerNorm.gamma / .beta (older checkpoints) as .weight / .bias. false when
 * it does not fit. */
static bool he_name(const char *n, size_t nl, char *buf, size_t cap, size_t *out_len) {
    if (nl >= 5 && memcmp(n, "bert.", 5) == 0) { n += 5; nl -= 5; }
    if (nl + 2 > cap) return false;
    memcpy(buf, n, nl);
    buf[nl] = 0;
    if (nl >= 15 && memcmp(buf + nl - 15, "LayerNorm.gamma", 15) == 0) {
        memcpy(buf + nl - 5, "weight", 7);
        nl += 1;
    } else if (nl >= 14 && memcmp(buf + nl - 14, "LayerNorm.beta", 14) == 0) {
        memcpy(buf + nl - 4, "bias", 5);
    }
    *out_len = nl;
    return true;
}

/* Is (mapped) name n one of EMBD's table? */
static bool he_in_table(const char *n) {
    for (size_t i = 0; he_top[i]; i++)
        if (strcmp(n, he_top[i]) == 0) return true;
    if (strncmp(n, "encoder.layer.", 14) != 0) return false;
    const char *d = n + 14;
    size_t k = 0;
    while (d[k] >= '0' && d[k] <= '9') k++;
    if (k == 0 || k > 6 || d[k] != '.' || (k > 1 && d[0] == '0')) return false;
    for (size_t i = 0; he_layer[i]; i++)
        if (strcmp(d + k + 1, he_layer[i]) == 0) return true;
    return false;
}

typedef struct he_key { const char *name; size_t len, k; } he_key;

static int he_key_cmp(const void *x, const void *y) {
    const he_key *a = x, *b = y;
    int c = memcmp(a->name, b->name, a->len < b->len ? a->len : b->len);
    if (c) return c;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->k < b->k ? -1 : a->k > b->k;
}

tbx_status tbx_hf_embd_plan(tbx_hf_embd *h, tbx_plan *p, tbx_error *err) {
    if (!h->hf) return TBX_OK;
    /* names in the plan's memory; tensors left out compacted away */
    size_t kept = 0;
    for (size_t k = 0; k < p->n; k++) {
        size_t nl;
        const char *n = tbx_plan_name(p, h->in, k, &nl);
        char *buf = tbx_plan_alloc(p, nl + 2);
        size_t ol;
        if (!buf || !he_name(n, nl, buf, nl + 2, &ol)) return tbx_err_nomem(err, "tensor names");
        if (!h->legacy && !he_in_table(buf)) continue;
        p->t[kept] = p->t[k];
        p->t[kept].name = buf;
        p->t[kept].name_len = (uint32_t)ol;
        kept++;
    }
    p->n = kept;
    p->names = NULL; /* no longer the input's own */
    if (kept < 2) return TBX_OK;
    /* two tensors could meet after mapping: named in input order */
    he_key *keys = tbx_calloc(h->al, kept, sizeof *keys);
    if (!keys) return tbx_err_nomem(err, "tensor names");
    for (size_t k = 0; k < kept; k++) keys[k] = (he_key){p->t[k].name, p->t[k].name_len, k};
    qsort(keys, kept, sizeof *keys, he_key_cmp);
    size_t a = SIZE_MAX, b = SIZE_MAX;
    for (size_t j = 1; j < kept; j++)
        if (keys[j].len == keys[j - 1].len &&
            !memcmp(keys[j].name, keys[j - 1].name, keys[j].len) &&
            (a == SIZE_MAX || keys[j - 1].k < a)) {
            a = keys[j - 1].k;
            b = keys[j].k;
        }
    tbx_free(h->al, keys, kept * sizeof *keys);
    if (a == SIZE_MAX) return TBX_OK;
    const tbx_plan_src *sa, *sb;
    tbx_plan_src ta, tb;
    sa = tbx_plan_src_at(p, h->in, a, 0, &ta);
    sb = tbx_plan_src_at(p, h->in, b, 0, &tb);
    return tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "tensor.name",
                   "tensors \"%s\" and \"%s\" both map to \"%s\"", h->in->tensors[sa->tensor].name,
                   h->in->tensors[sb->tensor].name, p->t[a].name);
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata and the vocabulary section                                                         */
/* ------------------------------------------------------------------------------------------ */
static bool he_has_meta(const tbx_writer *w, const char *key) {
    size_t kl = strlen(key);
    for (size_t i = 0; i < w->nmeta; i++)
        if (w->meta[i].key_len == kl && memcmp(w->meta[i].key, key, kl) == 0) return true;
    return false;
}

/* A non-negative integer of a JSON object as text, or false. */
static bool he_json_int(json_t *o, const char *k, char *buf, size_t cap) {
    json_t *v = o ? json_object_get(o, k) : NULL;
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    snprintf(buf, cap, "%" PRId64, (int64_t)json_integer_value(v));
    return true;
}

/* Dimension d of the plan's tensor named `name`, or false. */
static bool he_dim(const tbx_hf_embd *h, const tbx_plan *p, const char *name, unsigned d,
                   char *buf, size_t cap) {
    size_t nl = strlen(name);
    for (size_t k = 0; k < p->n; k++) {
        size_t l;
        const char *n = tbx_plan_name(p, h->in, k, &l);
        if (l != nl || memcmp(n, name, nl) != 0) continue;
        uint32_t nd;
        const uint64_t *shape = tbx_plan_shape(p, h->in, k, &nd);
        if (nd <= d) return false;
        snprintf(buf, cap, "%" PRIu64, shape[d]);
        return true;
    }
    return false;
}

/* The number of layers the plan's names encoder.layer.N.* give (0: none). */
static uint64_t he_layers(const tbx_hf_embd *h, const tbx_plan *p) {
    uint64_t layers = 0;
    for (size_t k = 0; k < p->n; k++) {
        size_t l;
        const char *n = tbx_plan_name(p, h->in, k, &l);
        if (l < 15 || strncmp(n, "encoder.layer.", 14) != 0) continue;
        uint64_t L = strtoull(n + 14, NULL, 10); /* names are NUL-terminated */
        if (L + 1 > layers) layers = L + 1;
    }
    return layers;
}

/* The value of required key `key` (the specification's, docs/formats/embd.md), or false. */
static bool he_value(const tbx_hf_embd *h, const tbx_plan *p, const char *key, char *val,
                     size_t cap) {
    json_t *cfg = h->cfg, *pool = h->pool;
    if (!strcmp(key, "vocab_size")) {
        snprintf(val, cap, "%" PRIu32, h->count);
        return true;
    }
    if (!strcmp(key, "embedding_dim"))
        return he_json_int(pool, "word_embedding_dimension", val, cap) ||
               he_json_int(cfg, "hidden_size", val, cap) ||
               he_dim(h, p, "embeddings.word_embeddings.weight", 1, val, cap);
    if (!strcmp(key, "hidden_size"))
        return he_json_int(cfg, "hidden_size", val, cap) ||
               he_dim(h, p, "embeddings.word_embeddings.weight", 1, val, cap);
    if (!strcmp(key, "num_layers")) {
        if (he_json_int(cfg, "num_hidden_layers", val, cap)) return true;
        uint64_t layers = he_layers(h, p);
        if (layers) snprintf(val, cap, "%" PRIu64, layers);
        return layers != 0;
    }
    if (!strcmp(key, "num_attention_heads"))
        return he_json_int(cfg, "num_attention_heads", val, cap);
    if (!strcmp(key, "intermediate_size"))
        return he_json_int(cfg, "intermediate_size", val, cap) ||
               he_dim(h, p, "encoder.layer.0.intermediate.dense.bias", 0, val, cap);
    if (!strcmp(key, "max_position_emb"))
        return he_json_int(cfg, "max_position_embeddings", val, cap) ||
               he_dim(h, p, "embeddings.position_embeddings.weight", 0, val, cap);
    if (!strcmp(key, "model_name")) {
        json_t *n = cfg ? json_object_get(cfg, "_name_or_path") : NULL;
        if (!json_is_string(n) || json_string_length(n) == 0 || json_string_length(n) >= 128)
            return false;
        snprintf(val, cap, "%s", json_string_value(n));
        return true;
    }
    if (!strcmp(key, "model_version")) {
        if (cfg) snprintf(val, cap, "1.0.0");
        return cfg != NULL;
    }
    return false;
}

tbx_status tbx_hf_embd_write(tbx_hf_embd *h, tbx_writer *w, const tbx_plan *p, tbx_error *err) {
    if (!h->has_vocab) return TBX_OK;
    /* the required keys of a model file, in the specification's order, but created_at (the
     * last: the writer's own, from SOURCE_DATE_EPOCH) */
    static const char *const keys[] = {
        "model_name", "model_version", "embedding_dim", "vocab_size", "num_layers",
        "num_attention_heads", "hidden_size", "intermediate_size", "max_position_emb", NULL,
    };
    tbx_status st = TBX_OK;
    for (size_t k = 0; !h->legacy && keys[k] && st == TBX_OK; k++) {
        char val[128];
        if (he_has_meta(w, keys[k]) || !he_value(h, p, keys[k], val, sizeof val)) continue;
        tbx_value *v = tbx_value_new_string(val, strlen(val));
        if (!v) return tbx_err_nomem(err, "metadata");
        st = tbx_writer_add_meta(w, keys[k], strlen(keys[k]), v, err);
        tbx_value_free(v);
    }
    if (st == TBX_OK)
        st = tbx_writer_add_section(w, "vocab", h->legacy ? HE_VOCAB_TOKENS : HE_VOCAB_SPEC,
                                    h->sec, h->sec_len, err);
    /* the writer holds its copy */
    tbx_free(h->al, h->sec, h->sec_len ? h->sec_len : 1);
    h->sec = NULL;
    h->sec_len = 0;
    return st;
}
