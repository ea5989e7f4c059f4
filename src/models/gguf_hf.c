/*
 * gguf_hf.c - the way back: a GGUF model written for llama.cpp as a Hugging Face model
 * directory. Everything is read from the architecture table's rows (arch.h) backwards:
 *   - the row: general.architecture is a row's `arch`; of the rows that share it (llama,
 *     mixtral; bert, xlm-roberta), the first whose name map takes every tensor of the file
 *     and whose tokenizer kinds take tokenizer.ggml.model, else the first that takes the
 *     tensors;
 *   - tensors: each llama.cpp name found in the row's map (tbx_hf_unmap_), its HF name the
 *     entry's template; HF_MAP_ONE gets its transform undone (llama's q/k row order:
 *     TBX_XF_UNPERMUTE_HEADS; a scale: 1/k; an added constant: -k); HF_MAP_SPLIT's parts are
 *     joined back into the fused tensor (the plan's sources in part order); HF_MAP_STACK's
 *     [experts, rows, cols] tensor becomes one tensor per expert (a run of its values each);
 *     HF_MAP_INTERLEAVE's parts are interleaved back on the last axis, matrix by matrix, each
 *     part's transform undone (gpt-oss's gate_up_proj from ffn_gate_exps / ffn_up_exps, each
 *     expert transposed back: the plan's interleaved sources, tbx_plan_src.dstep), and
 *     HF_MAP_ONE's HF_XF_TRANSPOSE is undone per expert (down_proj);
 *     every tensor written in one dtype (f32, f16, bf16), decoded from any ggml type;
 *   - config.json: {arch}.KEY of each hf_hparam as its first config.json name, the
 *     vocabulary size, head_dim, rope scaling (longrope's and llama3's taken back from the
 *     tensors llama.cpp's converter generates from them), tied embeddings, the special token
 *     ids, dtype; Gemma 2 / 3's attention as llama.cpp runs it (gemma_attention); yarn's
 *     betas; gpt-oss's head_dim, fixed layer_types, SwiGLU constants and yarn truncate false;
 *   - the tokenizer: tokenizer.json rebuilt from tokenizer.ggml.* (a byte-level BPE with its
 *     merges and the pre-tokenizer tokenizer.ggml.pre names, as llama.cpp runs it; a WordPiece
 *     for llama.cpp's "bert" vocabulary; XLM-RoBERTa's Unigram and its sentencepiece.bpe.model
 *     for "t5"), tokenizer_config.json with the special tokens and the
 *     chat template; a sentence-transformers model's modules.json and pooling config.
 * What cannot be mapped back (an architecture without a row, a tensor the row does not know,
 * a vocabulary type or pre-tokenizer without an inverse, a rope_freqs whose llama3 parameters
 * the values do not determine) is an
 * error naming it; the weights-only plan writes every tensor under its GGUF name instead.
 * Nothing is written here: the façade (src/api/hf_back.c) writes the files and runs the plan.
 */
#include "models.h"
#include "hf_tokenizer.h"
#include "arch.h"
#include "spm.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* The CLI defines functions named json_string and json_null of its own (src/cli/json.c) that
 * would take the place of jansson's in a call from here: strings go through json_stringn,
 * null through json_pack. */
static json_t *jstr0(const char *s) { return json_stringn(s, strlen(s)); }
static __attribute__((unused)) json_t *jnull(void) { return json_pack("n"); }

/* llama.cpp's token types (gguf.constants.TokenType) */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };
/* llama.cpp's pooling types */
enum { POOL_NONE = 0, POOL_MEAN = 1, POOL_CLS = 2, POOL_LAST = 3 };

#define BACK_FILES_MAX 12
#define BACK_NAME_MAX 160

struct tbx_hf_back {
    tbx_file *in;
    tbx_error *err;
    const tbx_alloc *al;
    const hf_arch *a;
    const char *arch;
    tbx_dtype dtype;
    bool weights_only;
    uint64_t n_head, n_head_kv, n_embd, n_vocab;
    uint64_t pos_off;           /* ARCH_POS_OFFSET: position rows llama.cpp's converter dropped */
    int64_t ugm_mask;           /* a "t5" vocabulary's mask id whose text is restored, or -1 */
    tbx_plan plan;
    struct { char name[64]; char *data; size_t n; } files[BACK_FILES_MAX];
    size_t nfiles;
};

static tbx_status fail(tbx_hf_back *h, tbx_status code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tbx_status fail(tbx_hf_back *h, tbx_status code, const char *field, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tbx_err(h->err, code, TBX_NO_OFFSET, field, "%s", msg);
}

/* ---- metadata --------------------------------------------------------------------------- */
static const tbx_value *meta(tbx_hf_back *h, const char *key) { return tbx_meta_find(h->in, key); }

static const tbx_value *arch_meta(tbx_hf_back *h, const char *key) {
    char k[200];
    snprintf(k, sizeof k, "%s.%s", h->arch, key);
    return meta(h, k);
}

static bool meta_u64(const tbx_value *v, uint64_t *out) {
    return v && tbx_value_type_is_int(tbx_value_type_of(v)) && tbx_value_get_u64(v, out) == TBX_OK;
}

static bool meta_f64(const tbx_value *v, double *out) {
    return v && (tbx_value_type_is_int(tbx_value_type_of(v)) ||
                 tbx_value_type_is_float(tbx_value_type_of(v))) &&
           tbx_value_get_f64(v, out) == TBX_OK;
}

static const char *meta_str(const tbx_value *v) {
    size_t n;
    return v && tbx_value_type_of(v) == TBX_V_STRING ? tbx_value_get_str(v, &n) : NULL;
}

/* Element i of an integer array (packed or not). */
static bool arr_int(const tbx_value *a, uint64_t i, int64_t *out) {
    tbx_value tmp;
    const tbx_value *e = tbx_val_packed_get(a, (size_t)i, &tmp) ? &tmp : tbx_value_at(a, i);
    return e && tbx_value_get_i64(e, out) == TBX_OK;
}

/* A float of the file (f32 in GGUF) as the double whose shortest decimal gives the same f32:
 * 1e-06, not 9.99999997e-07, so config.json reads as the original did. */
static double short_f32(double v) {
    float f = (float)v;
    char buf[40];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

/* ---- JSON helpers ----------------------------------------------------------------------- */
static tbx_status add_file(tbx_hf_back *h, const char *name, json_t *j) {
    if (!j) return tbx_err_nomem(h->err, name);
    char *s = json_dumps(j, JSON_INDENT(2));
    json_decref(j);
    if (!s) return tbx_err_nomem(h->err, name);
    if (h->nfiles >= BACK_FILES_MAX) {
        free(s);
        return fail(h, TBX_E_LIMIT, name, "too many files");
    }
    size_t n = strlen(s);
    char *d = tbx_malloc(h->al, n + 2);
    if (!d) {
        free(s);
        return tbx_err_nomem(h->err, name);
    }
    memcpy(d, s, n);
    d[n++] = '\n';
    d[n] = 0;
    free(s);
    snprintf(h->files[h->nfiles].name, sizeof h->files[h->nfiles].name, "%s", name);
    h->files[h->nfiles].data = d;
    h->files[h->nfiles].n = n;
    h->nfiles++;
    return TBX_OK;
}

/* A file of `n` raw bytes (copied). */
static tbx_status add_blob(tbx_hf_back *h, const char *name, const uint8_t *p, size_t n) {
    if (h->nfiles >= BACK_FILES_MAX) return fail(h, TBX_E_LIMIT, name, "too many files");
    char *d = n < SIZE_MAX ? tbx_malloc(h->al, n + 1) : NULL;
    if (!d) return tbx_err_nomem(h->err, name);
    memcpy(d, p, n);
    d[n] = 0;
    snprintf(h->files[h->nfiles].name, sizeof h->files[h->nfiles].name, "%s", name);
    h->files[h->nfiles].data = d;
    h->files[h->nfiles].n = n;
    h->nfiles++;
    return TBX_OK;
}

/* The SentencePiece model `v` (tbx_spm_write) as the file `name`. */
static tbx_status spm_blob(tbx_hf_back *h, const tbx_spm_vocab *v, const tbx_spm_ids *ids,
                           const char *name) {
    uint8_t *buf = NULL;
    size_t n = 0;
    tbx_status st = tbx_spm_write(v, ids, h->al, &buf, &n, h->err);
    if (st == TBX_OK) st = add_blob(h, name, buf, n);
    tbx_free(h->al, buf, n ? n : 1);
    return st;
}

/* json_stringn, NULL for bytes that are not UTF-8 */
static json_t *jstrn(const char *s, size_t n) { return json_stringn(s, n); }

/* ---- the row ---------------------------------------------------------------------------- */
/* A tensor llama.cpp's converter generates from config.json's rope_scaling (row a takes that
 * scaling): longrope's rope_factors_long/short.weight, llama3's rope_freqs.weight, taken back
 * into rope_scaling by write_config, never written as tensors. */
static bool generated_rope(const hf_arch *a, const char *name) {
    return ((a->rope & TBX_HF_ROPE_LONGROPE) && (!strcmp(name, "rope_factors_long.weight") ||
                                                 !strcmp(name, "rope_factors_short.weight"))) ||
           ((a->rope & TBX_HF_ROPE_LLAMA3) && !strcmp(name, "rope_freqs.weight"));
}

/* Does row a's map take every tensor of the file? (*bad: the first it does not) */
static bool row_takes_all(tbx_hf_back *h, const hf_arch *a, const char **bad) {
    for (uint64_t i = 0; i < h->in->ntensors; i++) {
        hf_unmatch u;
        if (generated_rope(a, h->in->tensors[i].name)) continue;
        if (tbx_hf_unmap_(a, h->in->tensors[i].name, &u) < 0) {
            *bad = h->in->tensors[i].name;
            return false;
        }
    }
    return true;
}

/* The row's steps the way back knows how to undo or that change nothing it writes (Gemma's:
 * tokenizer settings, token_embd trimmed to vocab_size (the GGUF is then a model of that
 * vocabulary); the +1 of its norms is undone by the map's HF_XF_ADD, exactly on the
 * GGUF's values: g - 1 is exact in f32 for g in [0.5, 2], Sterbenz); a row
 * with another (positions dropped, a multimodal config, keys read from other config fields)
 * is refused, naming them, rather than written as a directory that is not the model. */
#define BACK_FLAGS (ARCH_VOCAB_SIZE | ARCH_ROPE_DIM | ARCH_NONCAUSAL | ARCH_POOLING |           \
                    ARCH_TT_COUNT | ARCH_SPACE_PREFIX | ARCH_ADD_SEP | ARCH_NO_HEAD_DIM |       \
                    ARCH_NORM_TOPK | ARCH_NO_SPACE_PREFIX | ARCH_GEMMA_EOT | ARCH_POS_OFFSET |   \
                    ARCH_SWA | ARCH_HIDDEN_ACT | ARCH_CLS_POOLING | ARCH_ROPE_NONE |             \
                    ARCH_FFN_UP_GLU | ARCH_PRE_MODERN_BERT | ARCH_TRIM_VOCAB)
static tbx_status check_row_flags(tbx_hf_back *h) {
    static const struct { unsigned bit; const char *what; } F[] = {
        {ARCH_POS_OFFSET, "position rows dropped (RoBERTa's pad offset)"},
        {ARCH_TEXT_CONFIG, "a multimodal config.json's text_config"},
        {ARCH_SWA, "sliding-window keys"},
        {ARCH_HIDDEN_ACT, "hidden_act from hidden_activation"},
        {ARCH_CLS_POOLING, "classifier pooling"},
        {ARCH_ROPE_NONE, "rope scaling none"},
        {ARCH_FFN_UP_GLU, "a GLU's halves in ffn_up"},
        {ARCH_PRE_MODERN_BERT, "the modern-bert pre-tokenizer"},
        {ARCH_SWIGLU_OAI, "gpt-oss's fixed SwiGLU constants"},
    };
    /* rows whose flags the way back takes but whose tensors or config.json it does not write
     * whole yet (Gemma 2 / 3's attention scale, layer types and class are gemma_attention's
     * and CLASS_NAMES'), each with why; ended by {NULL} */
    static const struct { const char *row, *why; } ROWS[] = {
        {NULL, NULL},
    };
    for (size_t i = 0; ROWS[i].row; i++)
        if (!strcmp(h->a->model_type, ROWS[i].row))
            return fail(h, TBX_E_UNSUPPORTED, "general.architecture", "architecture \"%s\" (row "
                        "%s) cannot be written back as a Hugging Face model yet: %s "
                        "(--weights-only writes the tensors under their GGUF names)", h->arch,
                        h->a->model_type, ROWS[i].why);
    /* Phi-3's (issue 23): partial_rotary_factor from rope.dimension_count (write_config), its
     * added tokens' rules (write_tokenizer), gate_up_proj kept whole in ffn_up (nothing to undo) */
    const unsigned back_dec = ARCH_ROPE_PARTIAL | ARCH_SPM_ADDED | ARCH_FFN_UP_GLU |
                              ARCH_SWIGLU_OAI; /* gpt-oss's constants: write_config */
    const unsigned extra = h->a->flags & ~(unsigned)(BACK_FLAGS | back_dec);
    if (!extra) return TBX_OK;
    char what[256] = "";
    size_t n = 0;
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++)
        if (extra & F[i].bit) {
            int w = snprintf(what + n, sizeof what - n, "%s%s", n ? ", " : "", F[i].what);
            if (w > 0 && n + (size_t)w < sizeof what) n += (size_t)w;
        }
    return fail(h, TBX_E_UNSUPPORTED, "general.architecture", "architecture \"%s\" (row %s) "
                "cannot be written back as a Hugging Face model yet: its conversion has steps "
                "the way back does not undo or check (%s; flags 0x%x; --weights-only writes the "
                "tensors under their GGUF names)", h->arch, h->a->model_type, n ? what : "?",
                extra);
}

/* Does row a take the file's vocabulary kind? (bert and xlm-roberta are both llama.cpp's
 * "bert": a "t5" vocabulary is XLM-RoBERTa's; a file without a vocabulary: any row.) */
static bool row_takes_vocab(tbx_hf_back *h, const hf_arch *a) {
    static const struct { const char *model; unsigned tok; } V[] = {
        {"gpt2", TBX_HF_TOK_BPE}, {"bert", TBX_HF_TOK_WORDPIECE}, {"llama", TBX_HF_TOK_SPM},
        {"t5", TBX_HF_TOK_UGM},
    };
    const char *model = meta_str(meta(h, "tokenizer.ggml.model"));
    for (size_t i = 0; model && i < sizeof V / sizeof V[0]; i++)
        if (!strcmp(model, V[i].model)) return (a->tokenizers & V[i].tok) != 0;
    return true;
}

static tbx_status pick_row(tbx_hf_back *h) {
    const char *bad = NULL;
    /* the first row that takes every tensor and the vocabulary; else the first that takes
     * every tensor (whose tokenizer step names what it cannot write) */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; tbx_hf_arch_at_(i); i++) {
            const hf_arch *a = tbx_hf_arch_at_(i);
            if (strcmp(a->arch, h->arch) != 0) continue;
            if (pass == 0 && !row_takes_vocab(h, a)) continue;
            const char *b = NULL;
            if (row_takes_all(h, a, &b)) {
                h->a = a;
                return check_row_flags(h);
            }
            if (!bad) bad = b;
        }
    char list[256];
    tbx_hf_arch_list_(0, list, sizeof list);
    if (bad) {
        if (strcmp(bad, "rope_freqs.weight") == 0)
            return fail(h, TBX_E_UNSUPPORTED, "rope_freqs.weight", "tensor \"rope_freqs.weight\" "
                        "(llama3 rope scaling's per-frequency factors) cannot be mapped back to "
                        "config.json's rope_scaling yet (--weights-only writes the tensors under "
                        "their GGUF names)");
        return fail(h, TBX_E_UNSUPPORTED, bad, "tensor \"%s\" of architecture \"%s\" has no "
                    "Hugging Face name in tensorbox's architecture table (--weights-only writes "
                    "the tensors under their GGUF names)", bad, h->arch);
    }
    return fail(h, TBX_E_UNSUPPORTED, "general.architecture", "architecture \"%s\" cannot be "
                "written as a Hugging Face model (the architecture table has: %s; "
                "--weights-only writes the tensors under their GGUF names)", h->arch, list);
}

/* ---- the plan ---------------------------------------------------------------------------- */
static const char *store_name(tbx_hf_back *h, const char *s) {
    size_t n = strlen(s);
    char *d = tbx_plan_alloc(&h->plan, n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* Adds output tensor `name` of `ndim` dims `shape` (copied) with its sources. */
static tbx_status add_out(tbx_hf_back *h, const char *name, uint32_t ndim, const uint64_t *shape,
                          const tbx_plan_src *srcs, uint32_t nsrc) {
    const char *nm = store_name(h, name);
    uint64_t *sh = tbx_plan_alloc(&h->plan, (ndim ? ndim : 1) * sizeof *sh);
    if (!nm || !sh) return tbx_err_nomem(h->err, "tensor plan");
    memcpy(sh, shape, ndim * sizeof *sh);
    bool stored = true, quantized = false;
    for (uint32_t j = 0; j < nsrc; j++) {
        const tbx_tensor *t = &h->in->tensors[srcs[j].tensor];
        const tbx_dtype_info *di = tbx_dtype_get(t->dtype);
        quantized |= di && (di->flags & TBX_DTF_BLOCK);
        stored &= t->dtype == h->dtype && srcs[j].xform != TBX_XF_SCALE &&
                  srcs[j].xform != TBX_XF_ADD && srcs[j].xform != TBX_XF_ZERO;
    }
    tbx_plan_tensor pt;
    memset(&pt, 0, sizeof pt);
    pt.name = nm;
    pt.name_len = (uint32_t)strlen(nm);
    pt.shape = sh;
    pt.ndim = (uint16_t)ndim;
    pt.dtype = (uint16_t)h->dtype;
    pt.enc = stored ? TBX_PENC_STORED : TBX_PENC_ENCODE;
    pt.action = stored ? TBX_CONVERT_KEPT : quantized ? TBX_CONVERT_DEQUANTIZED : TBX_CONVERT_CAST;
    tbx_status st = tbx_plan_add(&h->plan, &pt, NULL, h->err);
    for (uint32_t j = 0; st == TBX_OK && j < nsrc; j++) st = tbx_plan_add_src(&h->plan, &srcs[j], h->err);
    return st;
}

/* A source: the whole of input tensor i as [rows, cols] (cols its last dimension). */
static tbx_plan_src whole_src(const tbx_tensor *t, uint64_t i) {
    tbx_plan_src s;
    memset(&s, 0, sizeof s);
    s.tensor = i;
    s.cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    s.rows = s.cols ? t->nelems / s.cols : 0;
    return s;
}

/* The inverse of a row's transform, onto source s. */
static tbx_status undo_xform(tbx_hf_back *h, int xform, float k, const char *name,
                             tbx_plan_src *s) {
    switch (xform) {
    case HF_XF_NONE: return TBX_OK;
    case HF_XF_PERMUTE_Q: case HF_XF_PERMUTE_K: {
        const uint64_t heads = xform == HF_XF_PERMUTE_Q ? h->n_head : h->n_head_kv;
        if (!heads || s->rows % (2 * heads))
            return fail(h, TBX_E_FORMAT, name, "tensor \"%s\": %llu rows do not split into %llu "
                        "heads of an even size (%s.attention.head_count%s)", name,
                        (unsigned long long)s->rows, (unsigned long long)heads, h->arch,
                        xform == HF_XF_PERMUTE_K ? "_kv" : "");
        s->xform = TBX_XF_UNPERMUTE_HEADS;
        s->heads = (uint32_t)heads;
        return TBX_OK;
    }
    case HF_XF_SCALE:
        if (k == 0.0f) return fail(h, TBX_E_FORMAT, name, "a scale of 0 cannot be undone");
        s->xform = TBX_XF_SCALE;
        s->k = 1.0f / k;
        return TBX_OK;
    case HF_XF_ADD:
        s->xform = TBX_XF_ADD;
        s->k = -k;
        return TBX_OK;
    default:
        return fail(h, TBX_E_UNSUPPORTED, name, "tensor \"%s\": transform %d has no inverse",
                    name, xform);
    }
}

static tbx_status plan_weights_only(tbx_hf_back *h) {
    tbx_status st = TBX_OK;
    for (uint64_t i = 0; st == TBX_OK && i < h->in->ntensors; i++) {
        const tbx_tensor *t = &h->in->tensors[i];
        tbx_plan_src s = whole_src(t, i);
        st = add_out(h, t->name, t->ndim, t->shape, &s, 1);
    }
    return st;
}

/* ARCH_POS_OFFSET (XLM-RoBERTa): llama.cpp's converter keeps position_embeddings' rows from
 * pad_token_id + 1 on (positions of real tokens start there: transformers'
 * create_position_ids_from_input_ids numbers them padding_idx + 1, ...; padding tokens get
 * padding_idx; row 0 .. padding_idx - 1 are never read). The way back puts pos_off rows of +0
 * before the GGUF's: row padding_idx is nn.Embedding(padding_idx=)'s row, zero at
 * initialisation and never updated by training, so +0 is its value; rows below it are not in
 * the file and are not read by transformers' forward pass: +0 too (docs/formats/gguf.md). */
static tbx_status plan_positions(tbx_hf_back *h, const hf_tmap *m, const hf_unmatch *u,
                                 uint64_t i) {
    const tbx_tensor *t = &h->in->tensors[i];
    char name[BACK_NAME_MAX];
    if (t->ndim != 2 || t->shape[0] < h->pos_off)
        return fail(h, TBX_E_FORMAT, t->name, "tensor \"%s\": %u dimensions, %llu rows: the %llu "
                    "padding positions (tokenizer.ggml.padding_token_id + 1) cannot be put "
                    "back", t->name, t->ndim, (unsigned long long)(t->ndim ? t->shape[0] : 0),
                    (unsigned long long)h->pos_off);
    if (!tbx_hf_fill_name_(m->hf, u->layer, -1, u->suffix, name, sizeof name))
        return fail(h, TBX_E_LIMIT, t->name, "name too long");
    tbx_plan_src s[2];
    s[0] = whole_src(t, i);
    s[0].rows = h->pos_off;
    s[0].xform = TBX_XF_ZERO;
    s[1] = whole_src(t, i);
    const uint64_t shape[2] = {t->shape[0] + h->pos_off, t->shape[1]};
    return add_out(h, name, 2, shape, s, 2);
}

/* Source s of a map transform undone on matrix m of input tensor i (its last two dimensions;
 * a 3-D tensor is experts stacked, each a matrix): HF_XF_TRANSPOSE is transposed back, the
 * others are undo_xform's. */
static tbx_status matrix_src(tbx_hf_back *h, const tbx_tensor *t, uint64_t i, uint64_t m,
                             int xform, float k, tbx_plan_src *s) {
    memset(s, 0, sizeof *s);
    s->tensor = i;
    s->cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    s->rows = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
    s->first = m * s->rows * s->cols;
    if (xform == HF_XF_TRANSPOSE) {
        s->xform = TBX_XF_TRANSPOSE;
        return TBX_OK;
    }
    return undo_xform(h, xform, k, t->name, s);
}

/* HF_MAP_ONE with HF_XF_TRANSPOSE (gpt-oss's down_proj: [experts, in, out] for x @ W, which
 * llama.cpp holds as [experts, out, in]): each matrix transposed back. */
static tbx_status plan_transposed(tbx_hf_back *h, const char *name, const tbx_tensor *t,
                                  uint64_t i) {
    if (t->ndim != 2 && t->ndim != 3)
        return fail(h, TBX_E_FORMAT, t->name, "tensor \"%s\": %u dimensions, not a matrix or "
                    "[experts, rows, cols]", t->name, t->ndim);
    const uint64_t nmat = t->ndim == 3 ? t->shape[0] : 1;
    tbx_status st = TBX_OK;
    tbx_plan_src *srcs = tbx_plan_alloc(&h->plan, (size_t)nmat * sizeof *srcs);
    if (!srcs) return tbx_err_nomem(h->err, "tensor plan");
    for (uint64_t m = 0; st == TBX_OK && m < nmat; m++)
        st = matrix_src(h, t, i, m, HF_XF_TRANSPOSE, 0.0f, &srcs[m]);
    uint64_t shape[3] = {nmat, t->shape[t->ndim - 1], t->shape[t->ndim - 2]};
    return st != TBX_OK ? st : add_out(h, name, t->ndim, shape + (3 - t->ndim), srcs,
                                       (uint32_t)nmat);
}

/* HF_MAP_INTERLEAVE, from its first part (gpt-oss's gate_up_proj [experts, hidden, 2 x ff]
 * from ffn_gate_exps and ffn_up_exps [experts, ff, hidden]; its bias [experts, 2 x ff] from
 * theirs [experts, ff]): matrix by matrix, the parts' values (each part's transform undone)
 * interleaved value by value on the last axis, part p's value v at v x nparts + p (the
 * plan's interleaved sources, tbx_plan_src.dstep). */
static tbx_status plan_interleaved(tbx_hf_back *h, const hf_tmap *m, const hf_unmatch *u,
                                   const char *name, const tbx_tensor *t) {
    uint64_t pi[TBX_PLAN_DSTEP_MAX];
    uint32_t np = 0;
    for (int p = 0; m->parts[p].gguf; p++) {
        char pn[BACK_NAME_MAX];
        if (np >= TBX_PLAN_DSTEP_MAX ||
            !tbx_hf_fill_name_(m->parts[p].gguf, u->layer, -1, u->suffix, pn, sizeof pn))
            return fail(h, TBX_E_LIMIT, t->name, "too many parts");
        if (tbx_tensor_find(h->in, pn, &pi[np]) != TBX_OK)
            return fail(h, TBX_E_FORMAT, pn, "interleaved tensor %s: its part %s is missing",
                        name, pn);
        const tbx_tensor *q = &h->in->tensors[pi[np]];
        bool same = q->ndim == t->ndim && t->ndim >= 1 && t->ndim <= 3;
        for (uint32_t d = 0; same && d < t->ndim; d++) same = q->shape[d] == t->shape[d];
        if (!same)
            return fail(h, TBX_E_FORMAT, pn, "interleaved tensor %s: part %s has another shape "
                        "than %s (1 to 3 dimensions, the same)", name, pn, t->name);
        np++;
    }
    const uint64_t nmat = t->ndim == 3 ? t->shape[0] : 1;
    if (np < 2 || nmat > UINT32_MAX / np)
        return fail(h, TBX_E_LIMIT, t->name, "interleaved tensor %s: %u parts of %llu matrices",
                    name, np, (unsigned long long)nmat);
    tbx_plan_src *srcs = tbx_plan_alloc(&h->plan, (size_t)(nmat * np) * sizeof *srcs);
    if (!srcs) return tbx_err_nomem(h->err, "tensor plan");
    tbx_status st = TBX_OK;
    for (uint64_t x = 0; st == TBX_OK && x < nmat; x++)
        for (uint32_t p = 0; st == TBX_OK && p < np; p++) {
            tbx_plan_src *s = &srcs[x * np + p];
            const bool tr = m->parts[p].xform == HF_XF_TRANSPOSE;
            if (tr && t->ndim < 2)
                return fail(h, TBX_E_FORMAT, t->name, "tensor \"%s\": a transposed part of one "
                            "dimension", t->name);
            st = matrix_src(h, &h->in->tensors[pi[p]], pi[p], x, m->parts[p].xform,
                            m->parts[p].k, s);
            s->dstep = (uint8_t)np;
            if (st == TBX_OK && s->xform != srcs[x * np].xform)
                return fail(h, TBX_E_UNSUPPORTED, t->name, "interleaved tensor %s: its parts "
                            "have different transforms", name);
        }
    if (st != TBX_OK) return st;
    /* the shape: a matrix's (transposed back) with np x its columns */
    const bool tr = srcs[0].xform == TBX_XF_TRANSPOSE;
    uint64_t shape[3];
    const uint32_t nd = t->ndim;
    for (uint32_t d = 0; d < nd; d++) shape[d] = t->shape[d];
    if (tr) {
        shape[nd - 2] = t->shape[nd - 1];
        shape[nd - 1] = t->shape[nd - 2];
    }
    shape[nd - 1] *= np;
    return add_out(h, name, nd, shape, srcs, (uint32_t)(nmat * np));
}

static tbx_status plan_tensors(tbx_hf_back *h) {
    tbx_status st = TBX_OK;
    char name[BACK_NAME_MAX];
    for (uint64_t i = 0; st == TBX_OK && i < h->in->ntensors; i++) {
        const tbx_tensor *t = &h->in->tensors[i];
        hf_unmatch u;
        if (generated_rope(h->a, t->name)) continue;
        if (tbx_hf_unmap_(h->a, t->name, &u) < 0)
            return fail(h, TBX_E_UNSUPPORTED, t->name, "tensor \"%s\" has no Hugging Face name "
                        "in row %s", t->name, h->a->model_type);
        const hf_tmap *m = u.m;
        if (h->pos_off && !strcmp(t->name, "position_embd.weight")) {
            if ((st = plan_positions(h, m, &u, i)) != TBX_OK) return st;
            continue;
        }
        if (m->kind == HF_MAP_ONE && m->xform == HF_XF_TRANSPOSE) {
            if (!tbx_hf_fill_name_(m->hf, u.layer, -1, u.suffix, name, sizeof name))
                return fail(h, TBX_E_LIMIT, t->name, "name too long");
            st = plan_transposed(h, name, t, i);
        } else if (m->kind == HF_MAP_ONE) {
            if (!tbx_hf_fill_name_(m->hf, u.layer, -1, u.suffix, name, sizeof name))
                return fail(h, TBX_E_LIMIT, t->name, "name too long");
            tbx_plan_src s = whole_src(t, i);
            if (t->ndim >= 2 && (st = undo_xform(h, m->xform, m->k, t->name, &s)) != TBX_OK)
                return st;
            if (t->ndim < 2 && (m->xform == HF_XF_SCALE || m->xform == HF_XF_ADD) &&
                (st = undo_xform(h, m->xform, m->k, t->name, &s)) != TBX_OK)
                return st;
            st = add_out(h, name, t->ndim, t->shape, &s, 1);
        } else if (m->kind == HF_MAP_STACK) {
            if (t->ndim != 3)
                return fail(h, TBX_E_FORMAT, t->name, "tensor \"%s\": experts stacked as %u "
                            "dimensions, not [experts, rows, cols]", t->name, t->ndim);
            const uint64_t per = t->shape[1] * t->shape[2];
            for (uint64_t e = 0; st == TBX_OK && e < t->shape[0]; e++) {
                if (!tbx_hf_fill_name_(m->hf, u.layer, (long)e, u.suffix, name, sizeof name))
                    return fail(h, TBX_E_LIMIT, t->name, "name too long");
                tbx_plan_src s;
                memset(&s, 0, sizeof s);
                s.tensor = i;
                s.first = e * per;
                s.rows = t->shape[1];
                s.cols = t->shape[2];
                if ((st = undo_xform(h, m->xform, m->k, t->name, &s)) != TBX_OK) return st;
                st = add_out(h, name, 2, t->shape + 1, &s, 1);
            }
        } else if (m->kind == HF_MAP_INTERLEAVE) { /* joined when its first part comes */
            if (u.part != 0) {
                char first[BACK_NAME_MAX];
                uint64_t fi;
                if (!tbx_hf_fill_name_(m->parts[0].gguf, u.layer, -1, u.suffix, first,
                                       sizeof first) ||
                    tbx_tensor_find(h->in, first, &fi) != TBX_OK)
                    return fail(h, TBX_E_FORMAT, t->name, "tensor \"%s\" is a part of an "
                                "interleaved tensor whose first part %s is missing", t->name,
                                first);
                continue;
            }
            if (!tbx_hf_fill_name_(m->hf, u.layer, -1, u.suffix, name, sizeof name))
                return fail(h, TBX_E_LIMIT, t->name, "name too long");
            st = plan_interleaved(h, m, &u, name, t);
        } else { /* HF_MAP_SPLIT: joined when its first part comes */
            if (u.part != 0) {
                char first[BACK_NAME_MAX];
                uint64_t fi;
                if (!tbx_hf_fill_name_(m->parts[0].gguf, u.layer, -1, u.suffix, first,
                                       sizeof first) ||
                    tbx_tensor_find(h->in, first, &fi) != TBX_OK)
                    return fail(h, TBX_E_FORMAT, t->name, "tensor \"%s\" is a part of a fused "
                                "tensor whose first part %s is missing", t->name, first);
                continue;
            }
            if (!tbx_hf_fill_name_(m->hf, u.layer, -1, u.suffix, name, sizeof name))
                return fail(h, TBX_E_LIMIT, t->name, "name too long");
            tbx_plan_src srcs[8];
            uint32_t ns = 0;
            uint64_t rows = 0, cols = t->ndim ? t->shape[t->ndim - 1] : 1;
            for (int p = 0; m->parts[p].gguf; p++) {
                char pn[BACK_NAME_MAX];
                uint64_t pi;
                if (ns >= 8 || !tbx_hf_fill_name_(m->parts[p].gguf, u.layer, -1, u.suffix, pn,
                                                  sizeof pn))
                    return fail(h, TBX_E_LIMIT, t->name, "too many parts");
                if (tbx_tensor_find(h->in, pn, &pi) != TBX_OK)
                    return fail(h, TBX_E_FORMAT, pn, "fused tensor %s: its part %s is missing",
                                name, pn);
                const tbx_tensor *pt = &h->in->tensors[pi];
                tbx_plan_src s = whole_src(pt, pi);
                if (pt->ndim != t->ndim || s.cols != cols)
                    return fail(h, TBX_E_FORMAT, pn, "fused tensor %s: part %s has another "
                                "width than %s", name, pn, t->name);
                if (pt->ndim >= 2 &&
                    (st = undo_xform(h, m->parts[p].xform, m->parts[p].k, pn, &s)) != TBX_OK)
                    return st;
                rows += s.rows;
                srcs[ns++] = s;
            }
            uint64_t shape[2] = {rows, cols};
            if (t->ndim < 2) shape[1] = rows * cols; /* a fused bias: the parts' values */
            st = t->ndim >= 2 ? add_out(h, name, 2, shape, srcs, ns)
                              : add_out(h, name, 1, shape + 1, srcs, ns);
        }
    }
    return st;
}

/* The default dtype: the one most values of the file's unquantized 2-D (and larger) float
 * tensors have; bf16 when every such tensor is quantized. */
static tbx_dtype default_dtype(const tbx_file *in) {
    uint64_t n[3] = {0, 0, 0};
    const tbx_dtype dts[3] = {TBX_DT_F32, TBX_DT_F16, TBX_DT_BF16};
    for (uint64_t i = 0; i < in->ntensors; i++) {
        const tbx_tensor *t = &in->tensors[i];
        if (t->ndim < 2) continue;
        for (int k = 0; k < 3; k++)
            if (t->dtype == dts[k]) n[k] += t->nelems;
    }
    int best = 2;
    if (n[0] > n[best] || (n[0] == n[best] && n[0])) best = 0;
    if (n[1] > n[best]) best = 1;
    if (!n[0] && !n[1] && !n[2]) best = 2;
    return dts[best];
}

static const char *torch_dtype(tbx_dtype d) {
    return d == TBX_DT_F32 ? "float32" : d == TBX_DT_F16 ? "float16" : "bfloat16";
}

/* ---- config.json, generation_config.json ------------------------------------------------ */
static void camel(const char *mt, char *out, size_t cap) {
    size_t n = 0;
    bool up = true;
    for (const char *c = mt; *c && n + 1 < cap; c++) {
        if (*c == '_' || *c == '-') { up = true; continue; }
        out[n++] = up && *c >= 'a' && *c <= 'z' ? (char)(*c - 32) : *c;
        up = false;
    }
    out[n] = 0;
}

static bool has_tensor(tbx_hf_back *h, const char *name) {
    uint64_t i;
    return tbx_tensor_find(h->in, name, &i) == TBX_OK;
}

/* the special tokens llama.cpp keeps: GGUF key suffix, config/tokenizer_config name */
static const struct { const char *key, *name; } SPECIAL[] = {
    {"bos_token_id", "bos"}, {"eos_token_id", "eos"}, {"unknown_token_id", "unk"},
    {"seperator_token_id", "sep"}, {"padding_token_id", "pad"}, {"cls_token_id", "cls"},
    {"mask_token_id", "mask"},
};

static bool special_id(tbx_hf_back *h, const char *key, uint64_t *id) {
    char k[80];
    snprintf(k, sizeof k, "tokenizer.ggml.%s", key);
    return meta_u64(meta(h, k), id) && *id < h->n_vocab;
}

/* ModernBERT's config.json (ModernBertConfig) beyond the row's hyper-parameters: the
 * alternating attention (ARCH_SWA: local_attention = sliding_window, every
 * global_attn_every_n_layers-th layer global, rope_parameters' full_attention /
 * sliding_attention rope_theta = rope.freq_base / freq_base_swa), hidden_activation,
 * classifier_pooling (ARCH_CLS_POOLING), the biases the file has (none in the released
 * models), and the special token ids ModernBertConfig carries (its defaults are
 * ModernBERT-base's ids, not this vocabulary's). The GLU's halves (ARCH_FFN_UP_GLU) stay in one
 * tensor both ways (Wi = ffn_up); rope.scaling.type "none" has nothing to write. */
static void modernbert_config(tbx_hf_back *h, json_t *c) {
    uint64_t u;
    double g, l;
    if (meta_u64(arch_meta(h, "attention.sliding_window"), &u))
        json_object_set_new(c, "local_attention", json_integer((json_int_t)u));
    if (meta_u64(arch_meta(h, "attention.sliding_window_pattern"), &u))
        json_object_set_new(c, "global_attn_every_n_layers", json_integer((json_int_t)u));
    const bool hg = meta_f64(arch_meta(h, "rope.freq_base"), &g);
    const bool hl = meta_f64(arch_meta(h, "rope.freq_base_swa"), &l);
    if (hg || hl) {
        json_t *rp = json_object();
        if (hg) json_object_set_new(rp, "full_attention", json_pack("{s:f,s:s}", "rope_theta",
                                                                    short_f32(g), "rope_type",
                                                                    "default"));
        if (hl) json_object_set_new(rp, "sliding_attention", json_pack("{s:f,s:s}", "rope_theta",
                                                                       short_f32(l), "rope_type",
                                                                       "default"));
        json_object_set_new(c, "rope_parameters", rp);
    }
    const char *act = meta_str(arch_meta(h, "hidden_activation"));
    if (act) json_object_set_new(c, "hidden_activation", jstr0(act));
    if (meta_u64(arch_meta(h, "classifier.pooling_type"), &u) && (u == POOL_CLS || u == POOL_MEAN))
        json_object_set_new(c, "classifier_pooling", jstr0(u == POOL_CLS ? "cls" : "mean"));
    json_object_set_new(c, "attention_bias", json_boolean(has_tensor(h, "blk.0.attn_qkv.bias")));
    json_object_set_new(c, "mlp_bias", json_boolean(has_tensor(h, "blk.0.ffn_up.bias")));
    json_object_set_new(c, "norm_bias", json_boolean(has_tensor(h, "token_embd_norm.bias")));
    static const struct { const char *key, *cfg; } IDS[] = {
        {"padding_token_id", "pad_token_id"}, {"bos_token_id", "bos_token_id"},
        {"eos_token_id", "eos_token_id"}, {"bos_token_id", "cls_token_id"},
        {"seperator_token_id", "sep_token_id"}, {"cls_token_id", "cls_token_id"},
    };
    for (size_t i = 0; i < sizeof IDS / sizeof IDS[0]; i++)
        if (special_id(h, IDS[i].key, &u)) json_object_set_new(c, IDS[i].cfg, json_integer((json_int_t)u));
}

/* Nomic BERT's config.json: nomic's own fields (n_embd, ...: the row's hyper-parameters) with
 * what its architecture fixes and llama.cpp's converter asserts (SwiGLU, post-norm, no biases,
 * the whole head rotated, NEOX order, not causal), n_positions as nomic-embed-text v1 / v1.5
 * have it (8192 beside max_trained_positions 2048; the GGUF does not carry it, and the
 * converter refuses every pair but that one and (2048, 2048); another context gets n_positions
 * = the context, which tensorbox's HF -> GGUF reads and llama.cpp's converter refuses), and
 * the same model in transformers' NomicBertConfig
 * names (hidden_size, ..., rope_parameters with the rope base llama.cpp runs: the file's, else
 * its default 10000), which transformers' NomicBertModel and the converter's AutoConfig read. */
static void enc_config(tbx_hf_back *h, json_t *c) {
    if (!strcmp(h->a->model_type, "modernbert")) {
        modernbert_config(h, c);
        return;
    }
    if (strcmp(h->a->model_type, "nomic_bert") != 0) return;
    static const char *const SAME[][2] = {
        {"n_embd", "hidden_size"}, {"n_layer", "num_hidden_layers"},
        {"n_head", "num_attention_heads"}, {"n_inner", "intermediate_size"},
        {"layer_norm_epsilon", "layer_norm_eps"}, {"max_trained_positions", "max_position_embeddings"},
    };
    for (size_t i = 0; i < sizeof SAME / sizeof SAME[0]; i++) {
        json_t *v = json_object_get(c, SAME[i][0]);
        if (v) json_object_set_new(c, SAME[i][1], json_deep_copy(v));
    }
    json_t *mtp = json_object_get(c, "max_trained_positions");
    if (json_is_integer(mtp))
        json_object_set_new(c, "n_positions", json_integer(json_integer_value(mtp) == 2048
                                                               ? 8192 : json_integer_value(mtp)));
    json_object_set_new(c, "activation_function", jstr0("swiglu"));
    json_object_set_new(c, "hidden_act", jstr0("silu"));
    json_object_set_new(c, "causal", json_false());
    json_object_set_new(c, "prenorm", json_false());
    json_object_set_new(c, "rotary_emb_fraction", json_real(1.0));
    json_object_set_new(c, "rotary_emb_interleaved", json_false());
    json_object_set_new(c, "rotary_emb_scale_base", jnull());
    json_object_set_new(c, "qkv_proj_bias", json_false());
    json_object_set_new(c, "mlp_fc1_bias", json_false());
    json_object_set_new(c, "mlp_fc2_bias", json_false());
    json_object_set_new(c, "use_rms_norm", json_false());
    double base = 10000.0;
    meta_f64(arch_meta(h, "rope.freq_base"), &base);
    base = short_f32(base);
    json_object_set_new(c, "rotary_emb_base", json_real(base));
    json_object_set_new(c, "rope_parameters", json_pack("{s:s,s:f}", "rope_type", "default",
                                                        "rope_theta", base));
    uint64_t pad;
    if (special_id(h, "padding_token_id", &pad))
        json_object_set_new(c, "pad_token_id", json_integer((json_int_t)pad));
}

/* Rows whose transformers class is not their model_type in CamelCase + ForCausalLM */
static const struct { const char *row, *cls; } CLASS_NAMES[] = {
    {"gemma3_text", "Gemma3ForCausalLM"},
    {"xlm-roberta", "XLMRobertaModel"}, {"modernbert", "ModernBertModel"},
};

/* Hyper-parameters written back under another config.json name than the row's first (which
 * the converter tries first: Phi3MiniModel's n_positions is not a Phi3Config field), or left
 * out when 0 (the converter's own default for an absent field: Phi-3's sliding_window 0 is
 * no window, transformers' null). */
static const struct { const char *row, *key, *cfg; bool zero_absent; } HP_BACK[] = {
    {"phi3", "context_length", "max_position_embeddings", false},
    {"phi3", "attention.sliding_window", "sliding_window", true},
};

/* Element i of a bool or integer array (packed or not) as 0 / non-zero. */
static bool arr_u64(const tbx_value *a, uint64_t i, uint64_t *out) {
    tbx_value tmp;
    const tbx_value *e = tbx_val_packed_get(a, (size_t)i, &tmp) ? &tmp : tbx_value_at(a, i);
    return e && tbx_value_get_u64(e, out) == TBX_OK;
}

/* Gemma 2 and 3 as llama.cpp runs them (src/models/gemma2.cpp, gemma3.cpp), in the fields of
 * transformers' Gemma2Config / Gemma3TextConfig, whose defaults are other models' (their
 * query_pre_attn_scalar 256, a 4096 window, rope_theta 1e6 for Gemma 3):
 *   - query_pre_attn_scalar: llama.cpp scales q by 1/sqrt(attention.key_length) (hidden /
 *     heads when the file has none), or by 1/sqrt(hidden / heads) for the 27B models, which it
 *     knows by their layer count (46, 62); transformers by query_pre_attn_scalar^-1/2;
 *   - layer_types: the layers attention.sliding_window_pattern makes local (a per-layer array,
 *     or every n-th layer global, the last of each run; llama.cpp's default n: 2 for Gemma 2,
 *     6 for Gemma 3), all full attention for a Gemma 3 without a window (llama.cpp: none);
 *     sliding_window: the file's (Gemma 2 without one: llama.cpp's 4096);
 *   - rope: rope_theta is llama.cpp's 10000 when the file has no rope.freq_base (Gemma2Model
 *     writes none); Gemma 3's local layers' base is rope.freq_base_swa (llama.cpp's default
 *     10000) without scaling, its global layers' the rope.scaling the generic code writes
 *     (transformers applies rope_scaling to full_attention only, as llama.cpp to the global
 *     layers); Gemma 2's local layers share the global base and scaling in llama.cpp (a file
 *     with another local base is refused: transformers' Gemma 2 has one rope);
 *   - soft-capping: the {arch} keys the row's hyper-parameters write back; Gemma 3's
 *     attention has none in llama.cpp (transformers' default: none). */
static tbx_status gemma_attention(tbx_hf_back *h, json_t *c) {
    static const struct { const char *arch; unsigned pattern; uint64_t layers_27b; } G[] = {
        {"gemma2", 2, 46}, {"gemma3", 6, 62},
    };
    size_t g = 0;
    while (g < sizeof G / sizeof G[0] && strcmp(h->arch, G[g].arch) != 0) g++;
    if (g == sizeof G / sizeof G[0]) return TBX_OK;
    uint64_t nl = 0, kl = 0, win = 0;
    if (!meta_u64(arch_meta(h, "block_count"), &nl) || !nl || nl > 65536 || !h->n_head)
        return fail(h, TBX_E_FORMAT, "block_count", "%s.block_count and "
                    "attention.head_count must be counts (1..65536 layers)", h->arch);
    const uint64_t hd = h->n_embd / h->n_head;
    if (!meta_u64(arch_meta(h, "attention.key_length"), &kl)) kl = hd;
    const uint64_t q = nl == G[g].layers_27b ? hd : kl;
    if (!q) return fail(h, TBX_E_FORMAT, "attention.key_length", "%s: the head size is 0",
                        h->arch);
    json_object_set_new(c, "query_pre_attn_scalar", json_integer((json_int_t)q));
    const bool has_win = meta_u64(arch_meta(h, "attention.sliding_window"), &win);
    const bool swa = g == 0 || (has_win && win > 0);
    if (g == 0 && !has_win) win = 4096;
    const tbx_value *pv = arch_meta(h, "attention.sliding_window_pattern");
    uint64_t every = G[g].pattern;
    const bool per_layer = pv && tbx_value_type_of(pv) == TBX_V_ARRAY;
    if (per_layer && tbx_value_len(pv) < nl)
        return fail(h, TBX_E_FORMAT, "attention.sliding_window_pattern", "%s.attention."
                    "sliding_window_pattern has %llu entries for %llu layers", h->arch,
                    (unsigned long long)tbx_value_len(pv), (unsigned long long)nl);
    if (pv && !per_layer && !meta_u64(pv, &every))
        return fail(h, TBX_E_FORMAT, "attention.sliding_window_pattern", "%s.attention."
                    "sliding_window_pattern is neither a count nor an array", h->arch);
    json_t *lt = json_array();
    for (uint64_t i = 0; i < nl; i++) {
        uint64_t local = 0;
        if (!swa) local = 0;
        else if (per_layer) {
            if (!arr_u64(pv, i, &local)) {
                json_decref(lt);
                return fail(h, TBX_E_FORMAT, "attention.sliding_window_pattern", "%s.attention."
                            "sliding_window_pattern[%llu] is not a bool", h->arch,
                            (unsigned long long)i);
            }
        } else local = every == 0 || i % every < every - 1;
        json_array_append_new(lt, jstr0(local ? "sliding_attention" : "full_attention"));
    }
    json_object_set_new(c, "layer_types", lt);
    json_object_set_new(c, "sliding_window", swa ? json_integer((json_int_t)win) : jnull());
    double base = 10000.0, base_swa = 10000.0;
    const bool has_base = meta_f64(arch_meta(h, "rope.freq_base"), &base);
    const bool has_swa = meta_f64(arch_meta(h, "rope.freq_base_swa"), &base_swa);
    if (!has_base) json_object_set_new(c, "rope_theta", json_real(base));
    if (g == 0 && has_swa && (float)base_swa != (float)base)
        return fail(h, TBX_E_UNSUPPORTED, "rope.freq_base_swa", "%s.rope.freq_base_swa %g is "
                    "not rope.freq_base %g: transformers' Gemma 2 has one rope base for every "
                    "layer", h->arch, base_swa, base);
    if (g == 1 && !has_swa) json_object_set_new(c, "rope_local_base_freq", json_real(base_swa));
    return TBX_OK;
}

/* ARCH_ROPE_PARTIAL (Phi3MiniModel): rope.dimension_count = int(partial_rotary_factor x
 * hidden) / heads; transformers rotates int(head size x partial_rotary_factor) dimensions of a
 * head of hidden / heads. The factor written is rope.dimension_count / head size (none when
 * every dimension rotates), checked to give the file's count back both ways. */
static tbx_status partial_rotary(tbx_hf_back *h, json_t *c) {
    uint64_t nrot;
    if (!meta_u64(arch_meta(h, "rope.dimension_count"), &nrot) || !h->n_head) return TBX_OK;
    const uint64_t hd = h->n_embd / h->n_head;
    if (nrot == hd) return TBX_OK;
    const double f = hd ? (double)nrot / (double)hd : 0;
    if (!hd || nrot > hd || (uint64_t)(f * (double)hd) != nrot ||
        (uint64_t)(f * (double)h->n_embd) / h->n_head != nrot)
        return fail(h, TBX_E_UNSUPPORTED, "rope.dimension_count", "%s.rope.dimension_count %llu "
                    "is no partial_rotary_factor of a head of %llu dimensions", h->arch,
                    (unsigned long long)nrot, (unsigned long long)hd);
    json_object_set_new(c, "partial_rotary_factor", json_real(f));
    return TBX_OK;
}

/* A 1-D f32-decodable tensor of n values as a JSON array of the shortest decimals of its f32
 * values (NULL, an error set, when it is not that). */
static json_t *factors_json(tbx_hf_back *h, const char *name, uint64_t n) {
    uint64_t i;
    if (tbx_tensor_find(h->in, name, &i) != TBX_OK) {
        fail(h, TBX_E_FORMAT, name, "tensor \"%s\" is missing beside its pair", name);
        return NULL;
    }
    const tbx_tensor *t = &h->in->tensors[i];
    if (t->ndim != 1 || t->nelems != n || n > 65536) {
        fail(h, TBX_E_FORMAT, name, "tensor \"%s\" has %llu values, not rope.dimension_count / "
             "2 = %llu", name, (unsigned long long)t->nelems, (unsigned long long)n);
        return NULL;
    }
    float *v = tbx_malloc(h->al, (size_t)(n ? n : 1) * sizeof *v);
    if (!v) {
        tbx_err_nomem(h->err, name);
        return NULL;
    }
    json_t *a = NULL;
    if (tbx_tensor_read_f32(h->in, i, 0, n, v, h->err) == TBX_OK) {
        a = json_array();
        for (uint64_t k = 0; a && k < n; k++) json_array_append_new(a, json_real(short_f32(v[k])));
    }
    tbx_free(h->al, v, (size_t)(n ? n : 1) * sizeof *v);
    if (!a && h->err->code == TBX_OK) tbx_err_nomem(h->err, name);
    return a;
}

/* longrope (Phi3MiniModel): config.json's rope_scaling long_factor / short_factor were written
 * as rope_factors_long/short.weight and its attention factor as rope.scaling.attn_factor
 * (sqrt(1 + ln(s) / ln(original context)) for s = context / original context > 1, else 1:
 * transformers' own default, which is written only when the file's differs). */
static tbx_status longrope_back(tbx_hf_back *h, json_t *c) {
    uint64_t nrot = 0, ctx = 0, orig = 0;
    if (!meta_u64(arch_meta(h, "rope.dimension_count"), &nrot) && h->n_head)
        nrot = h->n_embd / h->n_head;
    if (!meta_u64(arch_meta(h, "context_length"), &ctx) ||
        !meta_u64(arch_meta(h, "rope.scaling.original_context_length"), &orig) || orig < 2)
        return fail(h, TBX_E_FORMAT, "rope.scaling.original_context_length", "longrope factors "
                    "need %s.context_length and rope.scaling.original_context_length > 1",
                    h->arch);
    json_t *lf = factors_json(h, "rope_factors_long.weight", nrot / 2);
    json_t *sf = lf ? factors_json(h, "rope_factors_short.weight", nrot / 2) : NULL;
    if (!lf || !sf) {
        json_decref(lf);
        return h->err->code;
    }
    json_t *rs = json_object();
    json_object_set_new(rs, "rope_type", jstr0("longrope"));
    json_object_set_new(rs, "long_factor", lf);
    json_object_set_new(rs, "short_factor", sf);
    const double scale = (double)ctx / (double)orig;
    const double want = scale > 1.0 ? sqrt(1.0 + log(scale) / log((double)orig)) : 1.0;
    double af;
    if (meta_f64(arch_meta(h, "rope.scaling.attn_factor"), &af) && (float)af != (float)want)
        json_object_set_new(rs, "attention_factor", json_real(short_f32(af)));
    json_object_set_new(c, "rope_scaling", rs);
    return TBX_OK;
}

/* llama3 rope scaling: convert_hf_to_gguf.py's LlamaModel writes config.json's rope_scaling
 * {factor F, low_freq_factor lo, high_freq_factor hi, original_max_position_embeddings L} as
 * rope_freqs.weight only: per rotary frequency f_i = base^(-2i/d), wavelength w_i = 2 pi / f_i,
 * 1 when w_i < L / hi, F when w_i > L / lo, else 1 / ((1 - s) / F + s) with
 * s = (L / w_i - lo) / (hi - lo). Taken back:
 *   - F is the last value (a low-frequency band must exist: without one F is not in the file);
 *   - s of each value of the band between (at least two of them: two unknowns) is linear in
 *     1 / w_i: s = A / w_i + B, A = L / (hi - lo), B = -lo / (hi - lo);
 *   - the file fixes only A and B (L, lo, hi scaled together give the same factors, in llama.cpp
 *     and in transformers alike): L is {arch}.rope.scaling.original_context_length when the
 *     file has it, else lo is 1 (every released Llama 3.x's);
 *   - the values are rounded to the shortest decimals (L an integer) with which the factors
 *     recomputed by the converter's formula are the file's (1 and F exactly, the band within
 *     2^-20 relative: the converter's f32 pow is torch's, not this libm's; the bit-exact proof
 *     against the converter itself is tests/python/test_gguf_to_hf.py's).
 * Anything else (a non-monotone vector, fewer than two values in the band, no value F, no
 * decimals that give the factors back) is refused, naming rope_freqs.weight. */
static bool llama3_check(const float *r, const double *w, uint64_t n, double F, double L,
                         double lo, double hi) {
    if (!(hi > lo) || !(lo > 0) || !(L > 0)) return false;
    for (uint64_t i = 0; i < n; i++) {
        double v;
        if (w[i] < L / hi) v = 1.0;
        else if (w[i] > L / lo) v = F;
        else {
            const double sm = (L / w[i] - lo) / (hi - lo);
            v = 1.0 / ((1.0 - sm) / F + sm);
        }
        const bool edge = r[i] == 1.0f || r[i] == (float)F;
        if (edge ? (float)v != r[i] : fabs(v - r[i]) > fabs((double)r[i]) * 0x1p-20) return false;
    }
    return true;
}

static double round_sig(double v, int p) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.*g", p, v);
    return strtod(buf, NULL);
}

static tbx_status llama3_back(tbx_hf_back *h, json_t *c) {
    uint64_t dim = 0, ti, oc = 0;
    if (!meta_u64(arch_meta(h, "rope.dimension_count"), &dim) &&
        !meta_u64(arch_meta(h, "attention.key_length"), &dim) && h->n_head)
        dim = h->n_embd / h->n_head;
    if (tbx_tensor_find(h->in, "rope_freqs.weight", &ti) != TBX_OK) return TBX_OK;
    const tbx_tensor *t = &h->in->tensors[ti];
    const uint64_t n = t->nelems;
    if (t->ndim != 1 || dim < 4 || n != dim / 2 || n > 65536)
        return fail(h, TBX_E_FORMAT, "rope_freqs.weight", "tensor \"rope_freqs.weight\" has "
                    "%llu values, not half the rotary dimensions (%llu)", (unsigned long long)n,
                    (unsigned long long)dim);
    double base = 10000.0;
    meta_f64(arch_meta(h, "rope.freq_base"), &base);
    const bool has_oc = meta_u64(arch_meta(h, "rope.scaling.original_context_length"), &oc) && oc;
    float *r = tbx_malloc(h->al, (size_t)n * sizeof *r);
    double *w = tbx_malloc(h->al, (size_t)n * sizeof *w);
    tbx_status st = r && w ? tbx_tensor_read_f32(h->in, ti, 0, n, r, h->err)
                           : tbx_err_nomem(h->err, "rope_freqs.weight");
    const char *why = NULL;
    double F = 0, L = 0, lo = 0, hi = 0;
    uint64_t j = n, k = n; /* the first and last index of the band between 1 and F */
    if (st == TBX_OK) {
        F = r[n - 1];
        for (uint64_t i = 0; i < n; i++)
            w[i] = 2.0 * 3.14159265358979323846 * pow(base, (double)(2 * i) / (double)dim);
        int phase = 0; /* 0: ones, 1: the band, 2: F */
        for (uint64_t i = 0; i < n && !why; i++) {
            const int ph = r[i] == 1.0f ? 0 : r[i] == (float)F ? 2 : 1;
            if (!isfinite(r[i]) || ph < phase) why = "its values are not 1, then a band, then "
                                                    "one factor, by rising wavelength";
            phase = ph;
            if (ph == 1) {
                if (j == n) j = i;
                k = i;
            }
        }
        if (!why && !(F > 1.0)) why = "no low-frequency band: the factor is not in the file";
        if (!why && (j == n || j == k)) why = "fewer than two values between 1 and the factor: "
                                              "the frequency band is not in the file";
    }
    if (st == TBX_OK && !why) {
        const double sj = (1.0 / r[j] - 1.0 / F) / (1.0 - 1.0 / F);
        const double sk = (1.0 / r[k] - 1.0 / F) / (1.0 - 1.0 / F);
        const double A = (sj - sk) / (1.0 / w[j] - 1.0 / w[k]), B = sj - A / w[j];
        if (has_oc) {
            L = (double)oc;
            const double span = L / A;
            lo = -B * span;
            hi = lo + span;
        } else {
            lo = 1.0;
            hi = 1.0 - 1.0 / B;
            L = A * (hi - lo);
        }
        bool ok = false;
        const double Lr = has_oc ? L : (double)llround(L);
        for (int p = 1; p <= 9 && !ok; p++) {
            const double lc = has_oc ? round_sig(lo, p) : 1.0, hc = round_sig(hi, p);
            if (llama3_check(r, w, n, F, Lr, lc, hc)) {
                ok = true;
                lo = lc;
                hi = hc;
                L = Lr;
            }
        }
        if (!ok) why = "no llama3 parameters with an integer original context give its values";
    }
    tbx_free(h->al, r, (size_t)n * sizeof *r);
    tbx_free(h->al, w, (size_t)n * sizeof *w);
    if (st != TBX_OK) return st;
    if (why)
        return fail(h, TBX_E_UNSUPPORTED, "rope_freqs.weight", "tensor \"rope_freqs.weight\" "
                    "(llama3 rope scaling's per-frequency factors) cannot be taken back to "
                    "config.json's rope_scaling: %s (--weights-only writes the tensors under "
                    "their GGUF names)", why);
    json_t *rs = json_object();
    json_object_set_new(rs, "rope_type", jstr0("llama3"));
    json_object_set_new(rs, "factor", json_real(short_f32(F)));
    json_object_set_new(rs, "low_freq_factor", json_real(lo));
    json_object_set_new(rs, "high_freq_factor", json_real(hi));
    json_object_set_new(rs, "original_max_position_embeddings", json_integer((json_int_t)L));
    json_object_set_new(c, "rope_scaling", rs);
    return TBX_OK;
}

static tbx_status write_config(tbx_hf_back *h) {
    json_t *c = json_object();
    if (!c) return tbx_err_nomem(h->err, "config.json");
    /* architectures[0]: transformers' class, the model_type in CamelCase + ForCausalLM (an
     * encoder: Model): qwen2_moe -> Qwen2MoeForCausalLM, bert -> BertModel; CLASS_NAMES */
    char cls[96];
    camel(h->a->model_type, cls, sizeof cls - 12);
    strcat(cls, (h->a->flags & ARCH_NONCAUSAL) ? "Model" : "ForCausalLM");
    for (size_t i = 0; i < sizeof CLASS_NAMES / sizeof CLASS_NAMES[0]; i++)
        if (!strcmp(h->a->model_type, CLASS_NAMES[i].row))
            snprintf(cls, sizeof cls, "%s", CLASS_NAMES[i].cls);
    json_t *archs = json_array();
    json_array_append_new(archs, jstr0(cls));
    json_object_set_new(c, "architectures", archs);
    json_object_set_new(c, "model_type", jstr0(h->a->model_type));
    for (const hf_hparam *p = h->a->hp; p->key; p++) {
        const tbx_value *v = arch_meta(h, p->key);
        const char *cname = p->cfg[0];
        bool zero_absent = false;
        for (size_t i = 0; i < sizeof HP_BACK / sizeof HP_BACK[0]; i++)
            if (!strcmp(h->a->model_type, HP_BACK[i].row) && !strcmp(p->key, HP_BACK[i].key)) {
                cname = HP_BACK[i].cfg;
                zero_absent = HP_BACK[i].zero_absent;
            }
        if (!v && p->kind == HP_F32_NZ && !strcmp(p->key, "attention.scale") && h->n_head) {
            /* a multiplier the converter left out (0 in config.json): llama.cpp's graph then
             * scales the attention scores by 1/sqrt(head size), which transformers does
             * when told so (its own 0 would zero the scores) */
            uint64_t hd = h->n_embd / h->n_head;
            if (!(h->a->flags & ARCH_NO_HEAD_DIM)) meta_u64(arch_meta(h, "attention.key_length"), &hd);
            if (hd) json_object_set_new(c, p->cfg[0], json_real(short_f32(1.0 / sqrt((double)hd))));
            continue;
        }
        if (!v) {
            if (p->required) {
                json_decref(c);
                return fail(h, TBX_E_NOT_FOUND, p->key, "the file has no %s.%s (config.json's "
                            "%s)", h->arch, p->key, p->cfg[0]);
            }
            continue;
        }
        if (json_object_get(c, cname)) continue;
        uint64_t u;
        double f;
        if (p->kind == HP_U32 && meta_u64(v, &u)) {
            if (u || !zero_absent) json_object_set_new(c, cname, json_integer((json_int_t)u));
        } else if ((p->kind == HP_F32 || p->kind == HP_F32_NZ) && meta_f64(v, &f))
            json_object_set_new(c, cname, json_real(short_f32(f)));
        else {
            json_decref(c);
            return fail(h, TBX_E_FORMAT, p->key, "%s.%s is not a %s", h->arch, p->key,
                        p->kind == HP_U32 ? "count" : "number");
        }
    }
    tbx_status gst = gemma_attention(h, c);
    if (gst != TBX_OK) {
        json_decref(c);
        return gst;
    }
    json_object_set_new(c, "vocab_size", json_integer((json_int_t)h->n_vocab));
    if (h->pos_off) {
        /* RoBERTa: the positions llama.cpp's converter dropped are config.json's too */
        json_t *mp = json_object_get(c, "max_position_embeddings");
        if (json_is_integer(mp))
            json_object_set_new(c, "max_position_embeddings",
                                json_integer(json_integer_value(mp) + (json_int_t)h->pos_off));
        json_object_set_new(c, "pad_token_id", json_integer((json_int_t)(h->pos_off - 1)));
        uint64_t id;
        if (special_id(h, "bos_token_id", &id)) json_object_set_new(c, "bos_token_id", json_integer((json_int_t)id));
        if (special_id(h, "eos_token_id", &id)) json_object_set_new(c, "eos_token_id", json_integer((json_int_t)id));
    }
    /* the head size, when it is not hidden / heads (ARCH_ROPE_PARTIAL: rope.dimension_count
     * is the rotated part of a head of hidden / heads, partial_rotary_factor) */
    uint64_t hd = 0;
    if (h->a->flags & ARCH_ROPE_PARTIAL) {
        tbx_status pst = partial_rotary(h, c);
        if (pst != TBX_OK) {
            json_decref(c);
            return pst;
        }
    } else if (meta_u64(arch_meta(h, "attention.key_length"), &hd) ||
               (meta_u64(arch_meta(h, "rope.dimension_count"), &hd) && h->n_head &&
                hd != h->n_embd / h->n_head))
        json_object_set_new(c, "head_dim", json_integer((json_int_t)hd));
    if (h->a->flags & ARCH_SWIGLU_OAI) {
        /* gpt-oss: GptOssConfig's head_dim default (64) is no default of the file's: the head
         * size always; llama.cpp's fixed attention pattern (set_swa_pattern(2): every even
         * layer local, every odd one global; the converter refuses any other layer_types) and
         * its experts' SwiGLU constants (the converter refuses others) */
        if (!hd && h->n_head) hd = h->n_embd / h->n_head;
        if (!json_object_get(c, "head_dim") && hd)
            json_object_set_new(c, "head_dim", json_integer((json_int_t)hd));
        uint64_t nl = 0;
        meta_u64(arch_meta(h, "block_count"), &nl);
        json_t *lt = json_array();
        for (uint64_t l = 0; lt && l < nl && l < 100000; l++)
            json_array_append_new(lt, jstr0(l % 2 ? "full_attention" : "sliding_attention"));
        json_object_set_new(c, "layer_types", lt);
        json_object_set_new(c, "swiglu_alpha", json_real(1.702));
        json_object_set_new(c, "swiglu_limit", json_real(7.0));
    }
    if ((h->a->flags & ARCH_TT_COUNT)) {
        uint64_t n;
        if (meta_u64(meta(h, "tokenizer.ggml.token_type_count"), &n))
            json_object_set_new(c, "type_vocab_size", json_integer((json_int_t)n));
    }
    /* rope scaling */
    const char *rt = meta_str(arch_meta(h, "rope.scaling.type"));
    if (rt && strcmp(rt, "none") != 0) {
        double f = 0;
        uint64_t octx = 0;
        unsigned bit = !strcmp(rt, "linear") ? TBX_HF_ROPE_LINEAR : !strcmp(rt, "yarn")
                                                                    ? TBX_HF_ROPE_YARN : 0;
        if (!bit || !(h->a->rope & bit) || !meta_f64(arch_meta(h, "rope.scaling.factor"), &f)) {
            json_decref(c);
            return fail(h, TBX_E_UNSUPPORTED, "rope.scaling.type", "%s.rope.scaling.type \"%s\" "
                        "cannot be written back for %s", h->arch, rt, h->a->model_type);
        }
        json_t *rs = json_object();
        json_object_set_new(rs, "rope_type", jstr0(rt));
        json_object_set_new(rs, "factor", json_real(short_f32(f)));
        if (bit == TBX_HF_ROPE_YARN &&
            meta_u64(arch_meta(h, "rope.scaling.original_context_length"), &octx))
            json_object_set_new(rs, "original_max_position_embeddings",
                                json_integer((json_int_t)octx));
        /* yarn's ramp, when the file has it (TextModel writes rope_parameters' betas) */
        double b;
        if (bit == TBX_HF_ROPE_YARN && meta_f64(arch_meta(h, "rope.scaling.yarn_beta_fast"), &b))
            json_object_set_new(rs, "beta_fast", json_real(short_f32(b)));
        if (bit == TBX_HF_ROPE_YARN && meta_f64(arch_meta(h, "rope.scaling.yarn_beta_slow"), &b))
            json_object_set_new(rs, "beta_slow", json_real(short_f32(b)));
        /* gpt-oss's yarn keeps its correction range fractional (GptOssConfig's and every
         * released gpt-oss's truncate false; the file does not say, and llama.cpp's runtime
         * rounds it whatever the model: docs/formats/gguf.md) */
        if (bit == TBX_HF_ROPE_YARN && (h->a->flags & ARCH_SWIGLU_OAI))
            json_object_set_new(rs, "truncate", json_false());
        json_object_set_new(c, "rope_scaling", rs);
    }
    if ((h->a->rope & TBX_HF_ROPE_LONGROPE) && (has_tensor(h, "rope_factors_long.weight") ||
                                                has_tensor(h, "rope_factors_short.weight"))) {
        tbx_status lst = longrope_back(h, c);
        if (lst != TBX_OK) {
            json_decref(c);
            return lst;
        }
    }
    if ((h->a->rope & TBX_HF_ROPE_LLAMA3) && has_tensor(h, "rope_freqs.weight")) {
        if (json_object_get(c, "rope_scaling")) {
            json_decref(c);
            return fail(h, TBX_E_FORMAT, "rope_freqs.weight", "the file has rope_freqs.weight "
                        "(llama3 rope scaling) and %s.rope.scaling keys of another type",
                        h->arch);
        }
        tbx_status l3 = llama3_back(h, c);
        if (l3 != TBX_OK) {
            json_decref(c);
            return l3;
        }
    }
    /* Phi3Config's pad_token_id defaults to 32000 (Phi-3's <|endoftext|>), which is no token
     * of a smaller vocabulary (transformers then refuses the model): the file's padding token
     * (the tokenizer's), or none */
    if (!strcmp(h->a->model_type, "phi3")) {
        uint64_t pad;
        json_object_set_new(c, "pad_token_id", special_id(h, "padding_token_id", &pad)
                                                   ? json_integer((json_int_t)pad) : jnull());
    }
    /* tied embeddings: a row that maps lm_head, a file without output.weight */
    bool maps_output = false;
    for (const hf_tmap *m = h->a->tmap; m->hf; m++)
        maps_output |= m->gguf && !strcmp(m->gguf, "output");
    if (maps_output)
        json_object_set_new(c, "tie_word_embeddings", json_boolean(!has_tensor(h, "output.weight")));
    for (size_t k = 0; k < sizeof SPECIAL / sizeof SPECIAL[0]; k++) {
        uint64_t id;
        /* a decoder's bos and eos (the padding token is the tokenizer's: tokenizer_config) */
        if (k > 1 || (h->a->flags & ARCH_NONCAUSAL)) continue;
        if (!special_id(h, SPECIAL[k].key, &id)) continue;
        char key[32];
        snprintf(key, sizeof key, "%s_token_id", SPECIAL[k].name);
        json_object_set_new(c, key, json_integer((json_int_t)id));
    }
    /* a row that converts only renormalized experts (qwen3_moe): the GGUF came from a
     * config.json whose norm_topk_prob was true, and llama.cpp's graph renormalizes */
    if (h->a->flags & ARCH_NORM_TOPK) json_object_set_new(c, "norm_topk_prob", json_true());
    json_object_set_new(c, "torch_dtype", jstr0(torch_dtype(h->dtype)));
    enc_config(h, c);
    tbx_status st = add_file(h, "config.json", c);
    if (st != TBX_OK || (h->a->flags & ARCH_NONCAUSAL)) return st;
    json_t *g = json_object();
    if (!g) return tbx_err_nomem(h->err, "generation_config.json");
    uint64_t id;
    if (special_id(h, "bos_token_id", &id)) json_object_set_new(g, "bos_token_id", json_integer((json_int_t)id));
    if (special_id(h, "eos_token_id", &id)) json_object_set_new(g, "eos_token_id", json_integer((json_int_t)id));
    return add_file(h, "generation_config.json", g);
}

/* ---- sentence-transformers -------------------------------------------------------------- */
static tbx_status write_pooling(tbx_hf_back *h) {
    uint64_t pt;
    if (!(h->a->flags & ARCH_POOLING) || !meta_u64(arch_meta(h, "pooling_type"), &pt) ||
        pt == POOL_NONE)
        return TBX_OK;
    if (pt != POOL_MEAN && pt != POOL_CLS && pt != POOL_LAST)
        return fail(h, TBX_E_UNSUPPORTED, "pooling_type", "%s.pooling_type %llu has no "
                    "sentence-transformers pooling mode", h->arch, (unsigned long long)pt);
    json_t *mods = json_array();
    json_t *m0 = json_object(), *m1 = json_object();
    json_object_set_new(m0, "idx", json_integer(0));
    json_object_set_new(m0, "name", jstr0("0"));
    json_object_set_new(m0, "path", jstr0(""));
    json_object_set_new(m0, "type", jstr0("sentence_transformers.models.Transformer"));
    json_object_set_new(m1, "idx", json_integer(1));
    json_object_set_new(m1, "name", jstr0("1"));
    json_object_set_new(m1, "path", jstr0("1_Pooling"));
    json_object_set_new(m1, "type", jstr0("sentence_transformers.models.Pooling"));
    json_array_append_new(mods, m0);
    json_array_append_new(mods, m1);
    tbx_status st = add_file(h, "modules.json", mods);
    if (st != TBX_OK) return st;
    json_t *p = json_object();
    json_object_set_new(p, "word_embedding_dimension", json_integer((json_int_t)h->n_embd));
    json_object_set_new(p, "pooling_mode_cls_token", json_boolean(pt == POOL_CLS));
    json_object_set_new(p, "pooling_mode_mean_tokens", json_boolean(pt == POOL_MEAN));
    json_object_set_new(p, "pooling_mode_max_tokens", json_false());
    json_object_set_new(p, "pooling_mode_mean_sqrt_len_tokens", json_false());
    json_object_set_new(p, "pooling_mode_weightedmean_tokens", json_false());
    json_object_set_new(p, "pooling_mode_lasttoken", json_boolean(pt == POOL_LAST));
    json_object_set_new(p, "include_prompt", json_true());
    if ((st = add_file(h, "1_Pooling/config.json", p)) != TBX_OK) return st;
    json_t *sb = json_object();
    uint64_t ctx = 0;
    if (meta_u64(arch_meta(h, "context_length"), &ctx))
        json_object_set_new(sb, "max_seq_length", json_integer((json_int_t)ctx));
    json_object_set_new(sb, "do_lower_case", json_false());
    return add_file(h, "sentence_bert_config.json", sb);
}

/* ---- tokenizer ---------------------------------------------------------------------------- */
static json_t *added_token(int64_t id, const char *s, size_t n, bool special) {
    json_t *t = json_object();
    json_t *cs = jstrn(s, n);
    if (!t || !cs) {
        json_decref(t);
        json_decref(cs);
        return NULL;
    }
    json_object_set_new(t, "id", json_integer(id));
    json_object_set_new(t, "content", cs);
    json_object_set_new(t, "single_word", json_false());
    json_object_set_new(t, "lstrip", json_false());
    json_object_set_new(t, "rstrip", json_false());
    json_object_set_new(t, "normalized", json_boolean(!special));
    json_object_set_new(t, "special", json_boolean(special));
    return t;
}

/* A template post-processor: [first] $A [last] (pair: [first] $A [last] $B:1 [last]:1, the
 * BERT form; without a last token: [first] $A [first]:1 $B:1). */
static json_t *template_pp(tbx_hf_back *h, const tbx_value *toks, int64_t first, int64_t last) {
    json_t *single = json_array(), *pair = json_array(), *sp = json_object();
    json_t *pp = json_object();
    int64_t ids[2] = {first, last};
    for (int k = 0; k < 2; k++) {
        if (ids[k] < 0) continue;
        size_t n;
        const char *s = tbx_value_str_at(toks, (uint64_t)ids[k], &n);
        json_t *e = json_object();
        json_t *ia = json_array(), *ta = json_array();
        json_array_append_new(ia, json_integer(ids[k]));
        json_array_append_new(ta, jstrn(s, n));
        json_object_set_new(e, "id", jstrn(s, n));
        json_object_set_new(e, "ids", ia);
        json_object_set_new(e, "tokens", ta);
        char key[4096];
        snprintf(key, sizeof key, "%.*s", (int)(n < 4000 ? n : 4000), s);
        json_object_set_new(sp, key, e);
    }
    (void)h;
#define PIECE(arr, kind, idval, type)                                                          \
    do {                                                                                       \
        json_t *o = json_object(), *in = json_object();                                        \
        json_object_set_new(in, "id", idval);                                                  \
        json_object_set_new(in, "type_id", json_integer(type));                                \
        json_object_set_new(o, kind, in);                                                      \
        json_array_append_new(arr, o);                                                         \
    } while (0)
    size_t n = 0;
    const char *fs = first >= 0 ? tbx_value_str_at(toks, (uint64_t)first, &n) : NULL;
    size_t fn = n;
    n = 0;
    const char *ls = last >= 0 ? tbx_value_str_at(toks, (uint64_t)last, &n) : NULL;
    size_t ln = n;
    if (fs) PIECE(single, "SpecialToken", jstrn(fs, fn), 0);
    PIECE(single, "Sequence", jstr0("A"), 0);
    if (ls) PIECE(single, "SpecialToken", jstrn(ls, ln), 0);
    if (fs) PIECE(pair, "SpecialToken", jstrn(fs, fn), 0);
    PIECE(pair, "Sequence", jstr0("A"), 0);
    if (ls) PIECE(pair, "SpecialToken", jstrn(ls, ln), 0);
    if (fs && !ls) PIECE(pair, "SpecialToken", jstrn(fs, fn), 1);
    PIECE(pair, "Sequence", jstr0("B"), 1);
    if (ls) PIECE(pair, "SpecialToken", jstrn(ls, ln), 1);
#undef PIECE
    json_object_set_new(pp, "type", jstr0("TemplateProcessing"));
    json_object_set_new(pp, "single", single);
    json_object_set_new(pp, "pair", pair);
    json_object_set_new(pp, "special_tokens", sp);
    return pp;
}

static json_t *bytelevel(bool prefix, bool trim, bool regex) {
    json_t *b = json_object();
    json_object_set_new(b, "type", jstr0("ByteLevel"));
    json_object_set_new(b, "add_prefix_space", json_boolean(prefix));
    json_object_set_new(b, "trim_offsets", json_boolean(trim));
    json_object_set_new(b, "use_regex", json_boolean(regex));
    return b;
}

static bool meta_bool(const tbx_value *v, bool dflt) {
    uint64_t u;
    if (v && tbx_value_type_of(v) == TBX_V_BOOL && tbx_value_get_u64(v, &u) == TBX_OK) return u != 0;
    return dflt;
}

/* llama.cpp's "llama" vocabulary (SentencePiece BPE, byte fallback) as the tokenizer.json
 * transformers' converter makes of a SentencePiece model: every token in the vocabulary; as
 * merges, every split of a normal token into two tokens, by the merged token's score (the
 * highest first: llama.cpp merges the best-scoring pair first), then the parts' ids; " " as
 * U+2581 and, with tokenizer.ggml.add_space_prefix (llama.cpp's default), one prepended;
 * byte fallback to the <0xNN> tokens; a BOS (add_bos_token, llama.cpp's default) / EOS added. */
typedef struct spm_merge { float score; int64_t a, b; } spm_merge;

static int by_merge(const void *x, const void *y) {
    const spm_merge *p = x, *q = y;
    if (p->score != q->score) return p->score > q->score ? -1 : 1;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

static tbx_status spm_model(tbx_hf_back *h, json_t *root, json_t *mdl, json_t *vocab,
                            const tbx_value *toks, const tbx_value *types, bool has_bos,
                            uint64_t bos, bool has_eos, uint64_t eos) {
    const tbx_value *scores = meta(h, "tokenizer.ggml.scores");
    const uint64_t nt = tbx_value_len(toks);
    if (!scores || tbx_value_len(scores) != nt)
        return fail(h, TBX_E_FORMAT, "tokenizer.ggml.scores", "a llama vocabulary needs one "
                    "score per token (tokenizer.ggml.scores)");
    size_t n = 0, cap = 0;
    spm_merge *m = NULL;
    tbx_status st = TBX_OK;
    for (uint64_t i = 0; st == TBX_OK && i < nt; i++) {
        int64_t ty = TT_NORMAL;
        if (types && !arr_int(types, i, &ty)) ty = TT_NORMAL;
        if (ty != TT_NORMAL) continue;
        size_t len;
        const char *s = tbx_value_str_at(toks, i, &len);
        tbx_value tmp;
        const tbx_value *sv = tbx_val_packed_get(scores, (size_t)i, &tmp) ? &tmp
                                                                         : tbx_value_at(scores, i);
        double sc = 0;
        if (!s || !sv || tbx_value_get_f64(sv, &sc) != TBX_OK)
            return fail(h, TBX_E_FORMAT, "tokenizer.ggml.scores", "token %llu has no score",
                        (unsigned long long)i);
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue; /* inside a character */
            json_t *ja = json_object_getn(vocab, s, k), *jb = json_object_getn(vocab, s + k, len - k);
            if (!ja || !jb) continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 1024;
                spm_merge *nm = tbx_realloc(h->al, m, cap * sizeof *m, nc * sizeof *m);
                if (!nm) { st = tbx_err_nomem(h->err, "merges"); break; }
                m = nm;
                cap = nc;
            }
            m[n++] = (spm_merge){(float)sc, (int64_t)json_integer_value(ja),
                                 (int64_t)json_integer_value(jb)};
        }
    }
    if (st == TBX_OK && n) qsort(m, n, sizeof *m, by_merge);
    json_t *ml = json_array();
    for (size_t i = 0; st == TBX_OK && i < n; i++) {
        size_t la, lb;
        const char *a = tbx_value_str_at(toks, (uint64_t)m[i].a, &la);
        const char *b = tbx_value_str_at(toks, (uint64_t)m[i].b, &lb);
        json_t *pr = json_array();
        json_array_append_new(pr, jstrn(a, la));
        json_array_append_new(pr, jstrn(b, lb));
        json_array_append_new(ml, pr);
    }
    tbx_free(h->al, m, cap * sizeof *m);
    if (st != TBX_OK) {
        json_decref(ml);
        return st;
    }
    json_t *seq = json_array();
    if (meta_bool(meta(h, "tokenizer.ggml.add_space_prefix"), true))
        json_array_append_new(seq, json_pack("{s:s,s:s}", "type", "Prepend", "prepend",
                                             "\xe2\x96\x81"));
    json_array_append_new(seq, json_pack("{s:s,s:{s:s},s:s}", "type", "Replace", "pattern",
                                         "String", " ", "content", "\xe2\x96\x81"));
    json_object_set_new(root, "normalizer", json_pack("{s:s,s:o}", "type", "Sequence",
                                                      "normalizers", seq));
    json_object_set_new(root, "pre_tokenizer", jnull());
    const bool add_bos = has_bos && meta_bool(meta(h, "tokenizer.ggml.add_bos_token"), true);
    const bool add_eos = has_eos && meta_bool(meta(h, "tokenizer.ggml.add_eos_token"), false);
    json_object_set_new(root, "post_processor",
                        template_pp(h, toks, add_bos ? (int64_t)bos : -1,
                                    add_eos ? (int64_t)eos : -1));
    json_object_set_new(root, "decoder", json_pack(
        "{s:s,s:[{s:s,s:{s:s},s:s},{s:s},{s:s},{s:s,s:s,s:i,s:i}]}", "type", "Sequence",
        "decoders", "type", "Replace", "pattern", "String", "\xe2\x96\x81", "content", " ",
        "type", "ByteFallback", "type", "Fuse", "type", "Strip", "content", " ", "start", 1,
        "stop", 0));
    uint64_t unk = 0;
    size_t ul = 0;
    const char *us = special_id(h, "unknown_token_id", &unk) ? tbx_value_str_at(toks, unk, &ul)
                                                             : NULL;
    json_object_set_new(mdl, "type", jstr0("BPE"));
    json_object_set_new(mdl, "dropout", jnull());
    json_object_set_new(mdl, "unk_token", us ? jstrn(us, ul) : jnull());
    json_object_set_new(mdl, "continuing_subword_prefix", jnull());
    json_object_set_new(mdl, "end_of_word_suffix", jnull());
    json_object_set_new(mdl, "fuse_unk", json_true());
    json_object_set_new(mdl, "byte_fallback", json_true());
    json_object_set_new(mdl, "ignore_merges", json_false());
    json_object_set_new(mdl, "vocab", vocab);
    json_object_set_new(mdl, "merges", ml);
    return TBX_OK;
}

/* ---- llama.cpp's "t5" (Unigram) vocabulary: XLM-RoBERTa's (issue 23, the encoders) ----- */
/* What the GGUF holds (hf_gguf.c's write_ugm_vocab, convert_hf_to_gguf.py's
 * _xlmroberta_set_vocab): the fairseq ids <s> <pad> </s> <unk> at 0..3, sentencepiece piece
 * p >= 3 at id p + 1, then "[PAD<id - 1>]" unused ids up to the embedding's rows, the last of
 * which transformers calls <mask> (its text is not in the file: the mask id names it, and the
 * way back writes XLMRobertaTokenizer's "<mask>" there); scores and types; the normalizer's
 * add_dummy_prefix, remove_extra_whitespaces and precompiled charsmap. Written back:
 *   - tokenizer.json as transformers' XLMRobertaTokenizer builds it: a Unigram model with the
 *     scores (unk_id, byte fallback when the vocabulary has byte tokens), the Precompiled
 *     normalizer with the charsmap, WhitespaceSplit (remove_extra_whitespaces) + Metaspace
 *     (prepend "always" with add_dummy_prefix, else "never"), the <s> $A </s> (pair: </s> </s>
 *     between, with add_sep_token) post-processor, a Metaspace decoder;
 *   - sentencepiece.bpe.model: the ModelProto (protobuf) of the pieces (<unk> <s> </s>, then ids
 *     4 ..), a Unigram trainer_spec and the normalizer_spec with the charsmap;
 *   - tokenizer_config.json with the special tokens. */
static bool ugm_pad_name(const char *s, size_t n, uint64_t id) {
    char want[40];
    int w = snprintf(want, sizeof want, "[PAD%llu]", (unsigned long long)(id - 1));
    return w > 0 && (size_t)w == n && !memcmp(s, want, n);
}

/* The text of token i (the restored mask's "<mask>"). */
static const char *ugm_text(tbx_hf_back *h, const tbx_value *toks, uint64_t i, size_t *n) {
    if ((int64_t)i == h->ugm_mask) {
        *n = 6;
        return "<mask>";
    }
    return tbx_value_str_at(toks, i, n);
}

static float arr_f32(const tbx_value *a, uint64_t i) {
    tbx_value tmp;
    const tbx_value *e = tbx_val_packed_get(a, (size_t)i, &tmp) ? &tmp : tbx_value_at(a, i);
    double d = 0;
    if (!e || tbx_value_get_f64(e, &d) != TBX_OK) return NAN;
    return (float)d;
}

/* The bytes of a u8/i8 array value into a new buffer (*n bytes; NULL *b for none). */
static tbx_status arr_bytes(tbx_hf_back *h, const tbx_value *a, uint8_t **b, size_t *n) {
    *b = NULL;
    *n = 0;
    if (!a || tbx_value_type_of(a) != TBX_V_ARRAY || !tbx_value_len(a)) return TBX_OK;
    const uint64_t len = tbx_value_len(a);
    uint8_t *d = tbx_malloc(h->al, (size_t)len);
    if (!d) return tbx_err_nomem(h->err, "tokenizer.ggml.precompiled_charsmap");
    for (uint64_t i = 0; i < len; i++) {
        int64_t v;
        if (!arr_int(a, i, &v) || v < -128 || v > 255) {
            tbx_free(h->al, d, (size_t)len);
            return fail(h, TBX_E_FORMAT, "tokenizer.ggml.precompiled_charsmap", "item %llu is "
                        "not a byte", (unsigned long long)i);
        }
        d[i] = (uint8_t)v;
    }
    *b = d;
    *n = (size_t)len;
    return TBX_OK;
}

static char *base64(tbx_hf_back *h, const uint8_t *p, size_t n, size_t *cap) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    *cap = (n + 2) / 3 * 4 + 1;
    char *o = tbx_malloc(h->al, *cap), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                           (i + 2 < n ? p[i + 2] : 0);
        *q++ = A[v >> 18 & 63];
        *q++ = A[v >> 12 & 63];
        *q++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? A[v & 63] : '=';
    }
    *q = 0;
    return o;
}

/* sentencepiece.bpe.model: the pieces <unk> <s> </s> (sentencepiece's ids 0..2, the fairseq
 * ids 3, 0, 2 of the GGUF) then the GGUF's ids 4 .. end - 1 (piece p at id p + 1), a Unigram
 * model with sentencepiece's default special ids, the normalizer spec of the file (the
 * charsmap, add_dummy_prefix, remove_extra_whitespaces). */
static tbx_status ugm_spm_model(tbx_hf_back *h, const tbx_value *toks, const tbx_value *types,
                                const tbx_value *scores, uint64_t end, const uint8_t *cmap,
                                size_t cmap_n) {
    static const char *const HEAD[3] = {"<unk>", "<s>", "</s>"};
    const uint64_t np = 3 + (end - 4);
    tbx_spm_vocab v = {0};
    v.pieces = tbx_calloc(h->al, (size_t)np, sizeof *v.pieces);
    if (!v.pieces) return tbx_err_nomem(h->err, "sentencepiece.bpe.model");
    v.n = v.cap = (size_t)np;
    v.model_type = TBX_SPM_UNIGRAM;
    v.add_dummy_prefix = meta_bool(meta(h, "tokenizer.ggml.add_space_prefix"), true);
    v.remove_extra_ws = meta_bool(meta(h, "tokenizer.ggml.remove_extra_whitespaces"), true);
    v.charsmap = cmap;
    v.charsmap_len = cmap_n;
    tbx_status st = TBX_OK;
    for (uint64_t k = 0; st == TBX_OK && k < np; k++) {
        if (k < 3) {
            v.pieces[k] = (tbx_spm_piece){HEAD[k], (uint32_t)strlen(HEAD[k]), 0.0f,
                                          k == 0 ? TBX_SPM_UNKNOWN : TBX_SPM_CONTROL};
            continue;
        }
        size_t n;
        int64_t tt = TT_NORMAL;
        const char *s = tbx_value_str_at(toks, k + 1, &n);
        if (types && !arr_int(types, k + 1, &tt)) tt = TT_NORMAL;
        if (!s || n > UINT32_MAX || tt < TT_NORMAL || tt > TT_BYTE)
            st = fail(h, TBX_E_FORMAT, "tokenizer.ggml.tokens", "token %llu has no text or a "
                      "type outside SentencePiece's (1..6)", (unsigned long long)(k + 1));
        else /* llama.cpp's token types are SentencePiece's numbers */
            v.pieces[k] = (tbx_spm_piece){s, (uint32_t)n, arr_f32(scores, k + 1), (int)tt};
    }
    const tbx_spm_ids ids = {0, 1, 2, -1};
    if (st == TBX_OK) st = spm_blob(h, &v, &ids, "sentencepiece.bpe.model");
    tbx_spm_free(&v, h->al);
    return st;
}

static json_t *metaspace(bool prefix) {
    return json_pack("{s:s,s:s,s:s,s:b}", "type", "Metaspace", "replacement", "\xe2\x96\x81",
                     "prepend_scheme", prefix ? "always" : "never", "split", 1);
}

static tbx_status ugm_tokenizer(tbx_hf_back *h, const tbx_value *toks, const tbx_value *types) {
    const tbx_value *scores = meta(h, "tokenizer.ggml.scores");
    const uint64_t nt = tbx_value_len(toks);
    if (!scores || tbx_value_len(scores) != nt)
        return fail(h, TBX_E_FORMAT, "tokenizer.ggml.scores", "a t5 (Unigram) vocabulary needs "
                    "one score per token (tokenizer.ggml.scores)");
    static const char *const HEAD[4] = {"<s>", "<pad>", "</s>", "<unk>"};
    for (uint64_t i = 0; i < 4; i++) {
        size_t n;
        const char *s = i < nt ? tbx_value_str_at(toks, i, &n) : NULL;
        if (!s || n != strlen(HEAD[i]) || memcmp(s, HEAD[i], n))
            return fail(h, TBX_E_UNSUPPORTED, "tokenizer.ggml.tokens", "a t5 (Unigram) "
                        "vocabulary is written back as XLM-RoBERTa's, whose ids 0..3 are <s> "
                        "<pad> </s> <unk>; token %llu is not %s", (unsigned long long)i,
                        HEAD[i]);
    }
    /* the converter's padding: the unused "[PAD<id - 1>]" ids at the end */
    uint64_t end = nt;
    while (end > 4) {
        size_t n;
        int64_t tt = TT_NORMAL;
        const char *s = tbx_value_str_at(toks, end - 1, &n);
        if (!types || !arr_int(types, end - 1, &tt) || tt != TT_UNUSED || !s ||
            !ugm_pad_name(s, n, end - 1))
            break;
        end--;
    }
    uint64_t mask;
    if (special_id(h, "mask_token_id", &mask) && mask >= end) h->ugm_mask = (int64_t)mask;
    bool bytes = false;
    json_t *root = json_object(), *added = json_array(), *vocab = json_array();
    tbx_status st = TBX_OK;
    for (uint64_t i = 0; st == TBX_OK && i < nt; i++) {
        size_t n;
        const char *s = ugm_text(h, toks, i, &n);
        int64_t ty = TT_NORMAL;
        if (types && !arr_int(types, i, &ty)) ty = TT_NORMAL;
        const bool restored = (int64_t)i == h->ugm_mask;
        const float sc = restored ? 0.0f : arr_f32(scores, i);
        json_t *js = s ? jstrn(s, n) : NULL;
        if (!js || !isfinite(sc)) {
            json_decref(js);
            st = fail(h, TBX_E_FORMAT, "tokenizer.ggml.tokens", "token %llu is not UTF-8 or has "
                      "no finite score", (unsigned long long)i);
            break;
        }
        bytes |= ty == TT_BYTE;
        json_array_append_new(vocab, json_pack("[o,f]", js, (double)sc));
        if (ty == TT_CONTROL || ty == TT_UNKNOWN || ty == TT_USER || restored) {
            json_t *a = added_token((int64_t)i, s, n, ty != TT_USER);
            if (ty != TT_USER) json_object_set_new(a, "normalized", json_false());
            json_array_append_new(added, a);
        }
    }
    uint8_t *cmap = NULL;
    size_t cmap_n = 0;
    if (st == TBX_OK) st = arr_bytes(h, meta(h, "tokenizer.ggml.precompiled_charsmap"), &cmap, &cmap_n);
    if (st != TBX_OK) {
        json_decref(root); json_decref(added); json_decref(vocab);
        return st;
    }
    const bool prefix = meta_bool(meta(h, "tokenizer.ggml.add_space_prefix"), true);
    const bool rmws = meta_bool(meta(h, "tokenizer.ggml.remove_extra_whitespaces"), true);
    json_object_set_new(root, "version", jstr0("1.0"));
    json_object_set_new(root, "truncation", jnull());
    json_object_set_new(root, "padding", jnull());
    json_object_set_new(root, "added_tokens", added);
    if (cmap_n) {
        size_t bc;
        char *b64 = base64(h, cmap, cmap_n, &bc);
        if (!b64) st = tbx_err_nomem(h->err, "precompiled_charsmap");
        else json_object_set_new(root, "normalizer", json_pack("{s:s,s:s}", "type", "Precompiled",
                                                               "precompiled_charsmap", b64));
        tbx_free(h->al, b64, b64 ? bc : 0);
    } else {
        json_object_set_new(root, "normalizer", jnull());
    }
    json_t *pts = json_array();
    if (rmws) json_array_append_new(pts, json_pack("{s:s}", "type", "WhitespaceSplit"));
    json_array_append_new(pts, metaspace(prefix));
    json_object_set_new(root, "pre_tokenizer", json_pack("{s:s,s:o}", "type", "Sequence",
                                                         "pretokenizers", pts));
    /* <s> $A </s>; pair <s> $A </s> </s> $B </s> (RoBERTa's; every type id 0) */
    uint64_t bos = 0, eos = 0;
    const bool add_bos = special_id(h, "bos_token_id", &bos) &&
                         meta_bool(meta(h, "tokenizer.ggml.add_bos_token"), true);
    const bool add_eos = special_id(h, "eos_token_id", &eos) &&
                         meta_bool(meta(h, "tokenizer.ggml.add_eos_token"), true);
    const bool add_sep = add_eos && meta_bool(meta(h, "tokenizer.ggml.add_sep_token"), false);
    json_t *single = json_array(), *pair = json_array(), *sp = json_object();
#define UGM_PIECE(arr, kind, idv) json_array_append_new(arr, json_pack("{s:{s:o,s:i}}", kind, "id", idv, "type_id", 0))
    size_t bn = 0, en = 0;
    const char *bs = add_bos ? ugm_text(h, toks, bos, &bn) : NULL;
    const char *es = add_eos ? ugm_text(h, toks, eos, &en) : NULL;
    if (bs) UGM_PIECE(single, "SpecialToken", jstrn(bs, bn));
    UGM_PIECE(single, "Sequence", jstr0("A"));
    if (es) UGM_PIECE(single, "SpecialToken", jstrn(es, en));
    if (bs) UGM_PIECE(pair, "SpecialToken", jstrn(bs, bn));
    UGM_PIECE(pair, "Sequence", jstr0("A"));
    if (es) UGM_PIECE(pair, "SpecialToken", jstrn(es, en));
    if (add_sep) UGM_PIECE(pair, "SpecialToken", jstrn(es, en));
    UGM_PIECE(pair, "Sequence", jstr0("B"));
    if (es) UGM_PIECE(pair, "SpecialToken", jstrn(es, en));
#undef UGM_PIECE
    const char *ps[2] = {bs, es};
    const size_t pn[2] = {bn, en};
    const uint64_t pid[2] = {bos, eos};
    for (int k = 0; k < 2; k++) {
        if (!ps[k]) continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(pn[k] < 200 ? pn[k] : 200), ps[k]);
        json_object_set_new(sp, key, json_pack("{s:o,s:[I],s:[o]}", "id", jstrn(ps[k], pn[k]),
                                               "ids", (json_int_t)pid[k], "tokens",
                                               jstrn(ps[k], pn[k])));
    }
    json_object_set_new(root, "post_processor", json_pack("{s:s,s:o,s:o,s:o}", "type",
                                                          "TemplateProcessing", "single", single,
                                                          "pair", pair, "special_tokens", sp));
    json_object_set_new(root, "decoder", metaspace(prefix));
    uint64_t unk = 3;
    special_id(h, "unknown_token_id", &unk);
    json_object_set_new(root, "model", json_pack("{s:s,s:I,s:o,s:b}", "type", "Unigram",
                                                 "unk_id", (json_int_t)unk, "vocab", vocab,
                                                 "byte_fallback", bytes));
    if (st == TBX_OK) st = add_file(h, "tokenizer.json", root);
    else json_decref(root);
    if (st == TBX_OK) st = ugm_spm_model(h, toks, types, scores, end, cmap, cmap_n);
    tbx_free(h->al, cmap, cmap_n);
    if (st != TBX_OK) return st;
    /* tokenizer_config.json */
    json_t *tc = json_object();
    json_object_set_new(tc, "tokenizer_class", jstr0("XLMRobertaTokenizer"));
    json_object_set_new(tc, "add_prefix_space", json_boolean(prefix));
    for (size_t k = 0; k < sizeof SPECIAL / sizeof SPECIAL[0]; k++) {
        uint64_t id;
        size_t n;
        const char *s;
        if (!special_id(h, SPECIAL[k].key, &id) && !(!strcmp(SPECIAL[k].name, "cls") &&
                                                     special_id(h, "bos_token_id", &id)))
            continue; /* XLM-RoBERTa's cls is its bos */
        if (!(s = ugm_text(h, toks, id, &n))) continue;
        char key[32];
        snprintf(key, sizeof key, "%s_token", SPECIAL[k].name);
        json_t *v = jstrn(s, n);
        if (v) json_object_set_new(tc, key, v);
    }
    uint64_t ctx;
    if (meta_u64(arch_meta(h, "context_length"), &ctx))
        json_object_set_new(tc, "model_max_length", json_integer((json_int_t)ctx));
    return add_file(h, "tokenizer_config.json", tc);
}

/* ARCH_SPM_ADDED (Phi-3): an added token as llama.cpp's vocabulary matches it: on the raw
 * text (normalized false, as Phi-3's files have them), and, when general.name says "phi-3" or
 * "phi3" (any case), with the right strip llama.cpp gives every special token of such a model
 * but <unk>, <s> and <|endoftext|> (llama-vocab.cpp's name rule; </s> has it too). */
static void phi3_added(tbx_hf_back *h, json_t *a, const char *s, size_t n) {
    json_object_set_new(a, "normalized", json_false());
    const char *name = meta_str(meta(h, "general.name"));
    char low[256];
    size_t k = 0;
    for (; name && name[k] && k + 1 < sizeof low; k++)
        low[k] = (char)(name[k] >= 'A' && name[k] <= 'Z' ? name[k] + 32 : name[k]);
    low[k] = 0;
    if (!strstr(low, "phi-3") && !strstr(low, "phi3")) return;
    static const char *const KEEP[] = {"<unk>", "<s>", "<|endoftext|>"};
    bool r = true;
    for (size_t i = 0; i < sizeof KEEP / sizeof KEEP[0]; i++)
        if (n == strlen(KEEP[i]) && !memcmp(s, KEEP[i], n)) r = false;
    json_object_set_new(a, "rstrip", json_boolean(r));
}

/* llama.cpp's "llama" vocabulary as SentencePiece's own tokenizer.model (what LlamaTokenizer,
 * sentencepiece and llama.cpp's converter read): the pieces with their scores and types, a BPE
 * model (llama.cpp merges by score, as SentencePiece's BPE does), byte fallback when there are
 * <0xNN> pieces, the special ids, add_dummy_prefix from tokenizer.ggml.add_space_prefix and
 * remove_extra_whitespaces from tokenizer.ggml.remove_extra_whitespaces (llama.cpp's defaults:
 * true and false), no normalization (llama.cpp applies none to this vocabulary). The piece
 * types are the file's, except the unknown token's, which is always UNKNOWN. */
static tbx_status spm_file(tbx_hf_back *h, const tbx_value *toks, const tbx_value *types) {
    const tbx_value *scores = meta(h, "tokenizer.ggml.scores");
    const uint64_t nt = tbx_value_len(toks);
    if (nt > INT32_MAX)
        return fail(h, TBX_E_LIMIT, "tokenizer.ggml.tokens", "%llu tokens: a tokenizer.model "
                    "holds at most 2^31-1", (unsigned long long)nt);
    tbx_spm_vocab v = {0};
    v.pieces = tbx_calloc(h->al, (size_t)nt ? (size_t)nt : 1, sizeof *v.pieces);
    if (!v.pieces) return tbx_err_nomem(h->err, "tokenizer.model");
    v.n = (size_t)nt;
    v.cap = nt ? (size_t)nt : 1;
    v.model_type = TBX_SPM_BPE;
    v.add_dummy_prefix = meta_bool(meta(h, "tokenizer.ggml.add_space_prefix"), true);
    v.remove_extra_ws = meta_bool(meta(h, "tokenizer.ggml.remove_extra_whitespaces"), false);
    tbx_status st = TBX_OK;
    for (uint64_t i = 0; st == TBX_OK && i < nt; i++) {
        size_t len;
        const char *s = tbx_value_str_at(toks, i, &len);
        tbx_value tmp;
        const tbx_value *sv = tbx_val_packed_get(scores, (size_t)i, &tmp) ? &tmp
                                                                         : tbx_value_at(scores, i);
        double sc = 0;
        int64_t ty = TT_NORMAL;
        if (types && !arr_int(types, i, &ty)) ty = TT_NORMAL;
        if (!s || len > UINT32_MAX || !sv || tbx_value_get_f64(sv, &sc) != TBX_OK)
            st = fail(h, TBX_E_FORMAT, "tokenizer.ggml.scores", "token %llu has no text or no "
                      "score", (unsigned long long)i);
        else if (ty < TT_NORMAL || ty > TT_BYTE)
            st = fail(h, TBX_E_FORMAT, "tokenizer.ggml.token_type", "token %llu has type %lld, "
                      "not one of SentencePiece's (1..6)", (unsigned long long)i, (long long)ty);
        else
            v.pieces[i] = (tbx_spm_piece){s, (uint32_t)len, (float)sc, (int)ty};
    }
    uint64_t id;
    tbx_spm_ids ids = {-1, -1, -1, -1};
    if (special_id(h, "unknown_token_id", &id) && id < nt) ids.unk = (int32_t)id;
    if (special_id(h, "bos_token_id", &id) && id < nt) ids.bos = (int32_t)id;
    if (special_id(h, "eos_token_id", &id) && id < nt) ids.eos = (int32_t)id;
    if (special_id(h, "padding_token_id", &id) && id < nt) ids.pad = (int32_t)id;
    /* the unknown token is SentencePiece's UNKNOWN piece whatever type the file gives it (a
     * GGUF made from a tokenizer.json marks every special token CONTROL) */
    if (st == TBX_OK && ids.unk >= 0) v.pieces[ids.unk].type = TBX_SPM_UNKNOWN;
    if (st == TBX_OK) st = spm_blob(h, &v, &ids, "tokenizer.model");
    tbx_spm_free(&v, h->al);
    return st;
}

static tbx_status write_tokenizer(tbx_hf_back *h) {
    const char *model = meta_str(meta(h, "tokenizer.ggml.model"));
    const tbx_value *toks = meta(h, "tokenizer.ggml.tokens");
    const tbx_value *types = meta(h, "tokenizer.ggml.token_type");
    if (!model || !toks || tbx_value_type_of(toks) != TBX_V_ARRAY)
        return fail(h, TBX_E_NOT_FOUND, "tokenizer.ggml.model", "the file has no vocabulary "
                    "(tokenizer.ggml.model and .tokens; --weights-only writes the tensors "
                    "only)");
    const bool bpe = !strcmp(model, "gpt2"), wpm = !strcmp(model, "bert");
    const bool spm = !strcmp(model, "llama");
    if (!strcmp(model, "t5") && (h->a->tokenizers & TBX_HF_TOK_UGM))
        return ugm_tokenizer(h, toks, types);
    const char *pre = meta_str(meta(h, "tokenizer.ggml.pre"));
    const char *regex = NULL;
    if (!bpe && !wpm && !spm)
        return fail(h, TBX_E_UNSUPPORTED, "tokenizer.ggml.model", "vocabulary type \"%s\" "
                    "cannot be written as a tokenizer.json yet (gpt2: byte-level BPE, bert: "
                    "WordPiece, llama: SentencePiece BPE; --weights-only writes the tensors "
                    "only)", model);
    /* ModernBERT's "modern-bert" is GPT-2's split (ARCH_PRE_MODERN_BERT) */
    if (bpe && pre && !strcmp(pre, "modern-bert") && (h->a->flags & ARCH_PRE_MODERN_BERT))
        pre = "gpt-2";
    if (bpe && (!pre || (strcmp(pre, "gpt-2") != 0 && !(regex = tbx_hf_bpe_pre_regex_(pre)))))
        return fail(h, TBX_E_UNSUPPORTED, "tokenizer.ggml.pre", "pre-tokenizer \"%s\" has no "
                    "tokenizer.json form in tensorbox yet (llama-bpe, qwen2, gpt-2; "
                    "--weights-only writes the tensors only)", pre ? pre : "(none)");
    const uint64_t nt = tbx_value_len(toks);
    json_t *root = json_object(), *added = json_array(), *vocab = json_object();
    json_t *mdl = json_object();
    if (!root || !added || !vocab || !mdl) {
        json_decref(root); json_decref(added); json_decref(vocab); json_decref(mdl);
        return tbx_err_nomem(h->err, "tokenizer.json");
    }
    tbx_status st = TBX_OK;
    for (uint64_t i = 0; st == TBX_OK && i < nt; i++) {
        size_t n;
        const char *s = tbx_value_str_at(toks, i, &n);
        int64_t ty = TT_NORMAL;
        if (types && !arr_int(types, i, &ty)) ty = TT_NORMAL;
        if (!s) { st = fail(h, TBX_E_FORMAT, "tokenizer.ggml.tokens", "token %llu is not a "
                            "string", (unsigned long long)i); break; }
        if (ty == TT_UNUSED) continue;
        char key[1024];
        const char *k = s;
        size_t kn = n;
        if (wpm && ty != TT_CONTROL) {
            /* llama.cpp's WordPiece vocabulary: U+2581 marks a word start, a continuation has
             * no mark ("##" in tokenizer.json) */
            if (n >= 3 && !memcmp(s, "\xe2\x96\x81", 3)) { k = s + 3; kn = n - 3; }
            else if (n + 3 <= sizeof key) {
                memcpy(key, "##", 2);
                memcpy(key + 2, s, n);
                k = key;
                kn = n + 2;
            }
        }
        if (ty == TT_CONTROL || ty == TT_USER || (spm && ty == TT_UNKNOWN)) {
            json_t *a = added_token((int64_t)i, s, n, ty != TT_USER);
            if (!a) { st = fail(h, TBX_E_FORMAT, "tokenizer.ggml.tokens", "token %llu is not "
                                "UTF-8", (unsigned long long)i); break; }
            if (h->a->flags & ARCH_SPM_ADDED) phi3_added(h, a, s, n);
            json_array_append_new(added, a);
            if (bpe) continue; /* a byte-level BPE's added tokens live outside its vocabulary */
        }
        char *kz = tbx_memdup0(h->al, k, kn);
        if (!kz) { st = tbx_err_nomem(h->err, "tokenizer.json"); break; }
        if (strlen(kz) != kn || json_object_set_new(vocab, kz, json_integer((json_int_t)i)) != 0)
            st = fail(h, TBX_E_FORMAT, "tokenizer.ggml.tokens", "token %llu cannot be a "
                      "tokenizer.json key (NUL or not UTF-8)", (unsigned long long)i);
        tbx_free(h->al, kz, kn + 1);
    }
    if (st != TBX_OK) {
        json_decref(root); json_decref(added); json_decref(vocab); json_decref(mdl);
        return st;
    }
    uint64_t bos = 0, eos = 0, cls = 0, sep = 0;
    const bool has_bos = special_id(h, "bos_token_id", &bos);
    const bool has_eos = special_id(h, "eos_token_id", &eos);
    json_object_set_new(root, "version", jstr0("1.0"));
    json_object_set_new(root, "truncation", jnull());
    json_object_set_new(root, "padding", jnull());
    json_object_set_new(root, "added_tokens", added);
    if (wpm) {
        json_t *nz = json_object();
        json_object_set_new(nz, "type", jstr0("BertNormalizer"));
        json_object_set_new(nz, "clean_text", json_true());
        json_object_set_new(nz, "handle_chinese_chars", json_true());
        const tbx_value *sa = meta(h, "tokenizer.ggml.normalizer.strip_accents");
        json_object_set_new(nz, "strip_accents", sa ? json_boolean(meta_bool(sa, false)) : jnull());
        json_object_set_new(nz, "lowercase",
                            json_boolean(meta_bool(meta(h, "tokenizer.ggml.normalizer.lowercase"), true)));
        json_object_set_new(root, "normalizer", nz);
        json_t *pt = json_object();
        json_object_set_new(pt, "type", jstr0("BertPreTokenizer"));
        json_object_set_new(root, "pre_tokenizer", pt);
        const bool hc = special_id(h, "cls_token_id", &cls) || (cls = bos, has_bos);
        const bool hs = special_id(h, "seperator_token_id", &sep) || (sep = eos, has_eos);
        json_object_set_new(root, "post_processor",
                            template_pp(h, toks, hc ? (int64_t)cls : -1, hs ? (int64_t)sep : -1));
        json_t *dec = json_object();
        json_object_set_new(dec, "type", jstr0("WordPiece"));
        json_object_set_new(dec, "prefix", jstr0("##"));
        json_object_set_new(dec, "cleanup", json_true());
        json_object_set_new(root, "decoder", dec);
        uint64_t unk = 0;
        size_t un = 0;
        const char *us = special_id(h, "unknown_token_id", &unk) ? tbx_value_str_at(toks, unk, &un)
                                                                 : NULL;
        json_object_set_new(mdl, "type", jstr0("WordPiece"));
        json_object_set_new(mdl, "unk_token", us ? jstrn(us, un) : jstr0("[UNK]"));
        json_object_set_new(mdl, "continuing_subword_prefix", jstr0("##"));
        json_object_set_new(mdl, "max_input_chars_per_word", json_integer(100));
        json_object_set_new(mdl, "vocab", vocab);
    } else if (spm) {
        st = spm_model(h, root, mdl, vocab, toks, types, has_bos, bos, has_eos, eos);
    } else {
        /* qwen2's pre-tokenizer belongs to a tokenizer that composes (NFC) first */
        json_object_set_new(root, "normalizer", pre && !strcmp(pre, "qwen2")
                                                   ? json_pack("{s:s}", "type", "NFC") : jnull());
        if (regex) {
            json_t *seq = json_array(), *split = json_object(), *pat = json_object();
            json_object_set_new(pat, "Regex", jstr0(regex));
            json_object_set_new(split, "type", jstr0("Split"));
            json_object_set_new(split, "pattern", pat);
            json_object_set_new(split, "behavior", jstr0("Isolated"));
            json_object_set_new(split, "invert", json_false());
            json_array_append_new(seq, split);
            json_array_append_new(seq, bytelevel(false, false, false));
            json_t *pt = json_object();
            json_object_set_new(pt, "type", jstr0("Sequence"));
            json_object_set_new(pt, "pretokenizers", seq);
            json_object_set_new(root, "pre_tokenizer", pt);
        } else {
            json_object_set_new(root, "pre_tokenizer", bytelevel(false, true, true));
        }
        /* BOS / EOS as llama.cpp adds them: the file's flags, else its defaults (llama-bpe
         * adds a BOS) */
        const bool add_bos = has_bos && meta_bool(meta(h, "tokenizer.ggml.add_bos_token"),
                                                  pre && !strcmp(pre, "llama-bpe"));
        const bool add_eos = has_eos && meta_bool(meta(h, "tokenizer.ggml.add_eos_token"), false);
        if (add_bos || add_eos)
            json_object_set_new(root, "post_processor",
                                template_pp(h, toks, add_bos ? (int64_t)bos : -1,
                                            add_eos ? (int64_t)eos : -1));
        else
            json_object_set_new(root, "post_processor", bytelevel(false, false, false));
        json_object_set_new(root, "decoder", bytelevel(true, true, true));
        json_object_set_new(mdl, "type", jstr0("BPE"));
        json_object_set_new(mdl, "dropout", jnull());
        json_object_set_new(mdl, "unk_token", jnull());
        json_object_set_new(mdl, "continuing_subword_prefix", jnull());
        json_object_set_new(mdl, "end_of_word_suffix", jnull());
        json_object_set_new(mdl, "fuse_unk", json_false());
        json_object_set_new(mdl, "byte_fallback", json_false());
        /* llama.cpp takes a whole word in the vocabulary before merging for llama-bpe */
        json_object_set_new(mdl, "ignore_merges", json_boolean(pre && !strcmp(pre, "llama-bpe")));
        json_object_set_new(mdl, "vocab", vocab);
        const tbx_value *merges = meta(h, "tokenizer.ggml.merges");
        json_t *ml = json_array();
        for (uint64_t i = 0; st == TBX_OK && i < tbx_value_len(merges); i++) {
            size_t n;
            const char *s = tbx_value_str_at(merges, i, &n);
            const char *sp = s ? memchr(s, ' ', n) : NULL;
            json_t *a = sp ? jstrn(s, (size_t)(sp - s)) : NULL;
            json_t *b = sp ? jstrn(sp + 1, n - (size_t)(sp - s) - 1) : NULL;
            if (!a || !b) {
                json_decref(a);
                json_decref(b);
                st = fail(h, TBX_E_FORMAT, "tokenizer.ggml.merges", "merge %llu is not \"a b\" "
                          "of UTF-8", (unsigned long long)i);
                break;
            }
            json_t *pr = json_array();
            json_array_append_new(pr, a);
            json_array_append_new(pr, b);
            json_array_append_new(ml, pr);
        }
        json_object_set_new(mdl, "merges", ml);
    }
    json_object_set_new(root, "model", mdl);
    if (st != TBX_OK) {
        json_decref(root);
        return st;
    }
    if ((st = add_file(h, "tokenizer.json", root)) != TBX_OK) return st;
    if (spm && (st = spm_file(h, toks, types)) != TBX_OK) return st;

    /* tokenizer_config.json */
    json_t *tc = json_object();
    json_object_set_new(tc, "tokenizer_class",
                        jstr0(wpm ? "BertTokenizer" : "PreTrainedTokenizerFast"));
    if (spm) json_object_set_new(tc, "legacy", json_true());
    for (size_t k = 0; k < sizeof SPECIAL / sizeof SPECIAL[0]; k++) {
        uint64_t id;
        size_t n;
        const char *s;
        /* an encoder's classifier token is its bos when the file names none (llama.cpp's
         * BERT-likes keep [CLS] / <s> as bos_token_id) */
        const bool cls_bos = !strcmp(SPECIAL[k].name, "cls") &&
                             (h->a->flags & ARCH_NONCAUSAL) && special_id(h, "bos_token_id", &id);
        if ((!special_id(h, SPECIAL[k].key, &id) && !cls_bos) ||
            !(s = tbx_value_str_at(toks, id, &n)))
            continue;
        /* an id of an ordinary token is config.json's (gguf-py's SpecialVocab reads
         * pad_token_id there: Olmo2Config's default 1 names '"'), not a token the tokenizer
         * treats as special: left out of tokenizer_config */
        int64_t ty = TT_NORMAL;
        if (types && arr_int(types, id, &ty) && ty == TT_NORMAL && !wpm) continue;
        char key[32];
        snprintf(key, sizeof key, "%s_token", SPECIAL[k].name);
        json_t *v = jstrn(s, n);
        if (v) json_object_set_new(tc, key, v);
    }
    if (wpm)
        json_object_set_new(tc, "do_lower_case",
                            json_boolean(meta_bool(meta(h, "tokenizer.ggml.normalizer.lowercase"), true)));
    uint64_t ctx;
    if (meta_u64(arch_meta(h, "context_length"), &ctx))
        json_object_set_new(tc, "model_max_length", json_integer((json_int_t)ctx));
    json_object_set_new(tc, "clean_up_tokenization_spaces", json_boolean(wpm));
    const char *tmpl = meta_str(meta(h, "tokenizer.chat_template"));
    if (tmpl) json_object_set_new(tc, "chat_template", jstr0(tmpl));
    return add_file(h, "tokenizer_config.json", tc);
}

/* ---- entry points -------------------------------------------------------------------------- */
tbx_status tbx_hf_back_prepare(tbx_file *in, tbx_dtype dtype, bool weights_only,
                               tbx_hf_back **out, tbx_error *err) {
    *out = NULL;
    tbx_hf_back *h = tbx_calloc(&in->al, 1, sizeof *h);
    if (!h) return tbx_err_nomem(err, "conversion");
    h->in = in;
    h->err = err;
    h->al = &in->al;
    h->weights_only = weights_only;
    h->dtype = dtype != TBX_DT_INVALID ? dtype : default_dtype(in);
    tbx_plan_init(&h->plan, &in->al);
    *out = h;
    if (h->dtype != TBX_DT_F32 && h->dtype != TBX_DT_F16 && h->dtype != TBX_DT_BF16)
        return fail(h, TBX_E_INVALID_ARG, "dtype", "a Hugging Face directory is written as f32, "
                    "f16 or bf16");
    for (uint64_t i = 0; i < in->ntensors; i++)
        if (in->tensors[i].unreadable)
            return fail(h, TBX_E_FORMAT, in->tensors[i].name, "tensor \"%s\": its values cannot "
                        "be read", in->tensors[i].name);
    if (weights_only) return plan_weights_only(h);
    h->arch = meta_str(meta(h, "general.architecture"));
    if (!h->arch)
        return fail(h, TBX_E_NOT_FOUND, "general.architecture", "the file names no "
                    "general.architecture (not a llama.cpp model; --weights-only writes the "
                    "tensors under their own names)");
    tbx_status st = pick_row(h);
    if (st != TBX_OK) return st;
    meta_u64(arch_meta(h, "attention.head_count"), &h->n_head);
    h->n_head_kv = h->n_head;
    meta_u64(arch_meta(h, "attention.head_count_kv"), &h->n_head_kv);
    meta_u64(arch_meta(h, "embedding_length"), &h->n_embd);
    uint64_t ei;
    if (tbx_tensor_find(in, "token_embd.weight", &ei) == TBX_OK && in->tensors[ei].ndim == 2)
        h->n_vocab = in->tensors[ei].shape[0];
    else if (!meta_u64(arch_meta(h, "vocab_size"), &h->n_vocab))
        h->n_vocab = tbx_value_len(meta(h, "tokenizer.ggml.tokens"));
    h->ugm_mask = -1;
    if (h->a->flags & ARCH_POS_OFFSET) {
        uint64_t pad;
        if (!special_id(h, "padding_token_id", &pad))
            return fail(h, TBX_E_NOT_FOUND, "tokenizer.ggml.padding_token_id", "a %s model's "
                        "positions start at pad_token_id + 1, and the file names no padding "
                        "token (tokenizer.ggml.padding_token_id): the position rows llama.cpp's "
                        "converter dropped cannot be counted (--weights-only writes the tensors "
                        "under their GGUF names)", h->a->model_type);
        h->pos_off = pad + 1;
    }
    if ((st = plan_tensors(h)) != TBX_OK) return st;
    if ((st = write_config(h)) != TBX_OK) return st;
    if ((st = write_tokenizer(h)) != TBX_OK) return st;
    return write_pooling(h);
}

tbx_plan *tbx_hf_back_plan(tbx_hf_back *h) { return &h->plan; }
tbx_dtype tbx_hf_back_dtype(const tbx_hf_back *h) { return h->dtype; }

const char *tbx_hf_back_file(const tbx_hf_back *h, size_t i, const char **data, size_t *n) {
    if (i >= h->nfiles) return NULL;
    *data = h->files[i].data;
    *n = h->files[i].n;
    return h->files[i].name;
}

void tbx_hf_back_free(tbx_hf_back *h) {
    if (!h) return;
    for (size_t i = 0; i < h->nfiles; i++) tbx_free(h->al, h->files[i].data, h->files[i].n + 1);
    tbx_plan_free(&h->plan);
    tbx_free(h->al, h, sizeof *h);
}
