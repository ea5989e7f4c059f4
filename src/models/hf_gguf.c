/*
 * hf_gguf.c - a Hugging Face model (safetensors + side files) to a GGUF file that llama.cpp runs:
 * its metadata and vocabulary, and the plan of its tensors (models.h). It writes no tensor
 * byte: the engine (src/convert/engine.c) carries the plan out.
 *
 * Input: a tbx_file whose tensors carry Hugging Face names ("model.layers.0.self_attn.q_proj.
 * weight") and whose sections are the model directory's side files, named by relative path:
 * config.json (required), tokenizer.json (or, for a row taking SentencePiece, its
 * tokenizer.model, read by spm.c, and added_tokens.json), tokenizer_config.json, modules.json and the pooling
 * config a sentence-transformers model names there (1_Pooling/config.json). Output: a GGUF file
 * with what llama.cpp's loader expects of the architecture:
 *
 *   general.architecture, general.name, general.file_type, general.quantization_version
 *   {arch}.*              hyper-parameters read from config.json (the architecture's row)
 *   tokenizer.ggml.*      model, tokens, scores, token types, merges, special token ids,
 *                         add_* flags
 *   tensors               (the plan) renamed to llama.cpp's names (blk.N.attn_q.weight, ...),
 *                         fused tensors split into row ranges, MoE experts stacked, each with
 *                         the row's transform (the rows of llama-family q/k projections
 *                         reordered for llama.cpp's rotary layout: TBX_XF_PERMUTE_HEADS; a
 *                         scale; an added constant), 1-D tensors in f32, 2-D and 3-D ones as
 *                         asked (kept, cast, or quantized with the fallback rules of
 *                         llama-quantize for rows a block type cannot take), rope_freqs
 *                         generated for llama3 rope scaling
 *
 * The reference for every key, tensor name and rule is llama.cpp itself: the constants shipped
 * in gguf-py (gguf.constants, gguf.tensor_mapping) and the behaviour of convert_hf_to_gguf.py and
 * llama-quantize; tests/python/test_hf_gguf.py checks the output against gguf-py and loads it in
 * llama.cpp. The architectures are the rows of arch_llama_cpp.c (arch.h: hyper-parameters,
 * tensor-name map, tokenizer kinds, rope_scaling variants, flags); a model_type without a row
 * fails with TBX_E_UNSUPPORTED naming it, the row nearest to it (edit distance on model_type)
 * and the rows.
 *
 * Memory: the side files are read whole (each at most tbx_limits.max_side_file_bytes,
 * tbx_section_load_). tokenizer.json is checked and walked in its text (hf_tokenizer.c: no tree
 * of the vocabulary, merges or added tokens): the token arrays are built from it directly, one
 * offsets array and one blob each (tbx_val_str_array), the text is freed once they are, and they
 * are lent to the writer rather than copied. The other JSON files (config.json,
 * tokenizer_config.json, ...) are small and parsed into jansson trees. The engine streams the
 * tensor data in bounded jobs, so a conversion holds the tokenizer's arrays plus a few MiB
 * whatever the model size.
 */
#include "models.h"
#include "ggml.h"
#include "encode.h"
#include "spm.h"
#include "hf_tokenizer.h"
#include "arch.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define HF_NAME_MAX 128
#define HF_VOCAB_MAX ((uint64_t)1 << 22) /* tokens of a tokenizer.model / llama vocabulary */

/* llama.cpp's token types (gguf.constants.TokenType) */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };
/* llama.cpp's pooling types (gguf.constants.PoolingType) */
enum { POOL_NONE = 0, POOL_MEAN = 1, POOL_CLS = 2, POOL_LAST = 3 };

/* ------------------------------------------------------------------------------------------ */
/* The conversion state                                                                        */
/* ------------------------------------------------------------------------------------------ */
#define HF_EXPERTS_MAX 4096 /* experts of one stacked tensor */
#define LLAMA_FTYPE_MXFP4_MOE 38u /* llama_ftype LLAMA_FTYPE_MOSTLY_MXFP4_MOE */

typedef struct hf_out {
    uint64_t src;               /* input tensor index (a stack: expert 0's, once complete);
                                   UINT64_MAX: generated (rope_freqs) */
    char name[HF_NAME_MAX];
    tbx_dtype dtype;
    int xform;                  /* HF_XF_* of every source */
    float k;                    /* HF_XF_SCALE, HF_XF_ADD */
    long layer;                 /* the "blk.N" of the name, -1 for none */
    uint64_t rows, cols;        /* the output's [rows, cols] (of each expert); 1-D: one row
                                   (the source's view, but transposed by HF_XF_TRANSPOSE) */
    uint64_t first;             /* a split part: its first value in the input tensor (an
                                   interleaved part: its place in the interleave) */
    uint64_t nmat, mat;         /* a 3-D input: its experts and the values of each (0: 2-D) */
    uint32_t step;              /* an interleaved part: the parts (its values' distance; of
                                   MXFP4 blocks: its rows') */
    uint64_t aux;               /* MXFP4 blocks (HF_XF_MXFP4): the scales' input tensor */
    const hf_part *part;        /* a split part (rows resolved from the hyper-parameters) */
    uint64_t *exps;             /* a stack: input tensor of expert e (UINT64_MAX: none yet) */
    uint32_t nexp, cap_exp;     /* a stack: experts (highest number + 1), room in exps */
    uint32_t ndim;              /* the output's dimensions (1, 2; a stack: 3) */
    uint64_t shape[3];          /* the plan's shape ([experts,] [rows,] cols) */
    uint8_t action, why;        /* tbx_convert_action and HF_WHY_*, for the report */
    uint8_t gen;                /* src UINT64_MAX: what it is (HF_GEN_*) */
    tbx_dtype wanted;           /* a preset's type (HF_WHY_FALLBACK: the one its rows missed) */
} hf_out;

/* Generated tensors (hf_out.gen) */
enum { HF_GEN_NONE, HF_GEN_ROPE_FREQS, HF_GEN_ROPE_LONG, HF_GEN_ROPE_SHORT };

/* Why a tensor got its dtype (tbx_convert_report.reason) */
enum { HF_WHY_NONE, HF_WHY_REQUESTED, HF_WHY_FALLBACK, HF_WHY_F32, HF_WHY_F64, HF_WHY_GENERATED,
       HF_WHY_MXFP4 };

/* Hyper-parameters checked against the tensors: each one's value and the config.json field
 * that gave it (NULL when config.json has none). */
enum { HPV_EMBD, HPV_LAYERS, HPV_FF, HPV_CTX, HPV_EXPERTS, HPV_FF_EXP, HPV_FF_SHEXP, HPV_HEADS,
       HPV_N };

#define HF_LENT_MAX 8 /* large values lent to the writer (tokens, scores, types, merges) */

typedef struct tbx_hf_gguf hf;
struct tbx_hf_gguf {
    tbx_file *in;
    tbx_error *err;
    const tbx_alloc *al;
    json_t *cfg, *tokcfg, *modules, *pool;
    /* tokenizer.json: its bytes and what hf_tokenizer.c read from them (tok: the settings,
     * tj.small; NULL without a tokenizer.json), kept until the tokenizer is written */
    char *tok_text;
    size_t tok_len;
    tbx_tokj tj;
    json_t *tok;
    /* values the writer holds by pointer (tbx_writer_add_meta_borrowed_): freed after it */
    tbx_value *lent[HF_LENT_MAX];
    size_t nlent;
    const hf_arch *a;
    tbx_writer *w;
    tbx_value *collect;         /* tbx_hf_gguf_expect: metadata gathered here (no writer) */
    hf_out *out;
    size_t nout, cap_out;
    uint64_t n_head, n_head_kv, n_vocab, head_dim;
    uint64_t pos_off;           /* ARCH_POS_OFFSET: position_embd rows dropped (pad_token_id+1) */
    uint64_t hpv[HPV_N];        /* HPV_*: from config.json */
    const char *hpv_cfg[HPV_N];
    const char *head_dim_cfg;   /* "head_dim" when config.json gives it, else NULL */
    size_t embd;                /* h->out index of token_embd.weight (SIZE_MAX: none) */
    tbx_dtype quant, cast;
    const tbx_gguf_hf_options *o; /* the caller's (quant_preset and its refinements) */
    const tbx_lq_preset *preset;  /* NULL: none */
    bool search;  /* GGUF's write option quant_method=search: quant's own K-quant search */
    size_t n_mxfp4; /* outputs repacked from MXFP4 blocks (HF_XF_MXFP4) */
    /* llama3 rope scaling: rope_freqs.weight is generated (head_dim / 2 factors) */
    bool rope_llama3;
    /* longrope: rope_factors_long/short.weight generated from config.json's long_factor and
     * short_factor (rope_nfac values each; NULL: none) */
    float *rope_long, *rope_short;
    size_t rope_nfac;
    double rope_theta, rope_factor, rope_low, rope_high, rope_orig_ctx;
    tbx_plan plan;     /* the tensors, for the engine (names and shapes are h->out's) */
};

static const char *embd_name(hf *h);

static tbx_status hf_fail(hf *h, tbx_status code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tbx_status hf_fail(hf *h, tbx_status code, const char *field, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tbx_status st = tbx_verr(h->err, code, TBX_NO_OFFSET, field, fmt, ap);
    va_end(ap);
    return st;
}

/* Parses section `name` as JSON into *out (NULL when the section is absent and !required).
 * `flags`: jansson's decoding flags beside JSON_REJECT_DUPLICATES. */
static tbx_status load_json(hf *h, const char *name, bool required, size_t flags, json_t **out) {
    *out = NULL;
    int64_t i = tbx_file_find_section(h->in, name);
    if (i < 0) {
        if (!required) return TBX_OK;
        return hf_fail(h, TBX_E_NOT_FOUND, name, "the model has no %s (a Hugging Face model "
                       "directory holds one next to its safetensors)", name);
    }
    void *buf = NULL;
    size_t n = 0;
    tbx_status st = tbx_section_load_(h->in, (uint64_t)i, &buf, &n, h->err);
    if (st != TBX_OK) return st;
    json_error_t je;
    *out = json_loadb(buf, n, JSON_REJECT_DUPLICATES | flags, &je);
    tbx_free(h->al, buf, n ? n : 1);
    if (!*out || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        st = tbx_err(h->err, TBX_E_FORMAT, (uint64_t)(je.position > 0 ? je.position : 0),
                     name, "%s: %s", name, *je.text ? je.text : "not a JSON object");
    }
    return st;
}

/* Reads tokenizer.json when the model has one (hf_tokenizer.c: checked whole, its vocabulary,
 * merges and added tokens left as text to walk). */
static tbx_status load_tokenizer(hf *h) {
    int64_t i = tbx_file_find_section(h->in, "tokenizer.json");
    if (i < 0) return TBX_OK;
    void *buf = NULL;
    size_t n = 0;
    tbx_status st = tbx_section_load_(h->in, (uint64_t)i, &buf, &n, h->err);
    if (st != TBX_OK) return st;
    h->tok_text = buf;
    h->tok_len = n;
    st = tbx_tokj_read(&h->tj, h->al, h->tok_text, n, "tokenizer.json", h->err);
    if (st == TBX_OK) h->tok = h->tj.small;
    return st;
}

/* Frees tokenizer.json's bytes and what was read from them. */
static void drop_tokenizer(hf *h) {
    tbx_tokj_free(&h->tj);
    h->tok = NULL;
    if (h->tok_text) tbx_free(h->al, h->tok_text, h->tok_len ? h->tok_len : 1);
    h->tok_text = NULL;
    h->tok_len = 0;
}

static const char *jstr(json_t *o, const char *key) {
    json_t *v = o ? json_object_get(o, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* config.json's member `name`: for a row reading a multimodal config (ARCH_TEXT_CONFIG), its
 * text_config's member first, then the top level's (convert_hf_to_gguf.py's TextModel merges
 * text_config over the top level). */
static json_t *cfg_get(hf *h, const char *name) {
    json_t *tc = h->a && (h->a->flags & ARCH_TEXT_CONFIG) ? json_object_get(h->cfg, "text_config")
                                                          : NULL;
    json_t *j = json_is_object(tc) ? json_object_get(tc, name) : NULL;
    return j ? j : json_object_get(h->cfg, name);
}

/* config.json's field `name`; rope_theta, which transformers 5 writes inside rope_parameters
 * (not at the top level), is also looked for there, and in its full_attention member (the
 * global layers of Gemma 3, whose local layers' rope_theta, rope_local_base_freq before
 * transformers 5, is its sliding_attention member's); partial_rotary_factor and
 * original_max_position_embeddings are also looked for in rope_parameters or rope_scaling
 * (convert_hf_to_gguf.py's rope_parameters mirrors the top-level ones into them, so either
 * place gives the value). */
static json_t *cfg_field(hf *h, const char *name) {
    json_t *j = cfg_get(h, name);
    const bool global = strcmp(name, "rope_theta") == 0;
    if (!j && (global || strcmp(name, "rope_local_base_freq") == 0)) {
        json_t *rp = cfg_get(h, "rope_parameters");
        if (json_is_object(rp) && global) j = json_object_get(rp, name);
        json_t *sub = json_is_object(rp) && !j
                          ? json_object_get(rp, global ? "full_attention" : "sliding_attention")
                          : NULL;
        if (json_is_object(sub)) j = json_object_get(sub, "rope_theta");
    }
    if (!j && (strcmp(name, "partial_rotary_factor") == 0 ||
               strcmp(name, "original_max_position_embeddings") == 0)) {
        json_t *rp = cfg_get(h, "rope_parameters");
        if (!json_is_object(rp)) rp = cfg_get(h, "rope_scaling");
        if (json_is_object(rp)) j = json_object_get(rp, name);
    }
    return j;
}

/* The first of the config names present: 1 and *v (integer or real), 0 when none is. */
static int cfg_number(hf *h, const char *const *names, double *v, const char **which) {
    for (int k = 0; k < 4 && names[k]; k++) {
        if (names[k][0] == '=') { /* a row's default (arch.h): after the names, none present */
            *v = strtod(names[k] + 1, NULL);
            if (which) *which = names[0];
            return 1;
        }
        json_t *j = cfg_field(h, names[k]);
        if (json_is_number(j)) {
            *v = json_number_value(j);
            if (which) *which = names[k];
            return 1;
        }
        if (j && !json_is_null(j)) {
            hf_fail(h, TBX_E_FORMAT, names[k], "config.json: %s is not a number", names[k]);
            return -1;
        }
    }
    return 0;
}

static tbx_status cfg_u64(hf *h, const char *name, bool required, uint64_t *out) {
    const char *names[2] = {name, NULL};
    double v;
    int r = cfg_number(h, names, &v, NULL);
    if (r < 0) return h->err->code;
    if (r == 0) {
        if (!required) return TBX_E_NOT_FOUND;
        return hf_fail(h, TBX_E_NOT_FOUND, name, "config.json has no %s", name);
    }
    if (v < 0 || v > 4294967295.0 || v != (double)(uint64_t)v)
        return hf_fail(h, TBX_E_FORMAT, name, "config.json: %s = %g is not a count", name, v);
    *out = (uint64_t)v;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata helpers                                                                            */
/* ------------------------------------------------------------------------------------------ */
/* Adds `v` under `key` (the writer copies it; the caller keeps v). */
static tbx_status put_copy(hf *h, const char *key, const tbx_value *v) {
    if (!h->w && h->collect) { /* tbx_hf_gguf_expect */
        tbx_value *c = tbx_val_clone(h->al, v);
        if (!c) return tbx_err_nomem(h->err, key);
        tbx_status st = tbx_value_map_put(h->collect, key, strlen(key), c); /* takes c */
        return st == TBX_OK ? TBX_OK : tbx_err(h->err, st, TBX_NO_OFFSET, key, "%s: not added",
                                               key);
    }
    if (!h->w) return TBX_OK; /* tbx_hf_gguf_types: the checks without a writer */
    return tbx_writer_add_meta(h->w, key, strlen(key), v, h->err);
}
/* Adds `v` (may be NULL: out of memory) under `key` and frees it. */
static tbx_status put(hf *h, const char *key, tbx_value *v) {
    if (!v) return tbx_err_nomem(h->err, key);
    tbx_status st = put_copy(h, key, v);
    tbx_val_free(v);
    return st;
}
/* Adds the large value *v (may be NULL: out of memory) under `key` without a copy: the writer
 * holds a pointer to it, and h frees it after the writer (*v is NULL afterwards). */
static tbx_status put_lent(hf *h, const char *key, tbx_value **v) {
    if (!*v) return tbx_err_nomem(h->err, key);
    if (!h->w) { /* tbx_hf_gguf_types: nothing is written */
        tbx_val_free(*v);
        *v = NULL;
        return TBX_OK;
    }
    if (h->nlent == HF_LENT_MAX) {
        tbx_val_free(*v);
        *v = NULL;
        return hf_fail(h, TBX_E_STATE, key, "more than %d large metadata values", HF_LENT_MAX);
    }
    h->lent[h->nlent++] = *v;
    *v = NULL;
    return tbx_writer_add_meta_borrowed_(h->w, key, strlen(key), h->lent[h->nlent - 1], h->err);
}
static tbx_status put_u32(hf *h, const char *key, uint64_t u) {
    return put(h, key, tbx_value_new_uint(TBX_V_U32, u));
}
static tbx_status put_str(hf *h, const char *key, const char *s) {
    return put(h, key, tbx_value_new_string(s, strlen(s)));
}
static tbx_status put_arch(hf *h, const char *suffix, tbx_value *v) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", h->a->arch, suffix);
    return put(h, key, v);
}

/* ------------------------------------------------------------------------------------------ */
/* Architecture and hyper-parameters                                                           */
/* ------------------------------------------------------------------------------------------ */
static tbx_status pick_arch(hf *h) {
    const char *mt = jstr(h->cfg, "model_type");
    if ((h->a = tbx_hf_arch_find_(mt)) != NULL) return TBX_OK;
    char list[256];
    tbx_hf_arch_list_(0, list, sizeof list);
    json_t *archs = json_object_get(h->cfg, "architectures");
    const char *cls = json_is_array(archs) && json_array_size(archs) > 0 &&
                              json_is_string(json_array_get(archs, 0))
                          ? json_string_value(json_array_get(archs, 0)) : NULL;
    const hf_arch *near = tbx_hf_arch_nearest_(mt);
    return hf_fail(h, TBX_E_UNSUPPORTED, "model_type",
                   "config.json: model_type \"%s\"%s%s%s is not supported for GGUF (%s%s%s"
                   "supported: %s; --raw: the tensors as they are)",
                   mt ? mt : "(missing)", cls ? " (" : "", cls ? cls : "", cls ? ")" : "",
                   near ? "nearest: \"" : "", near ? near->model_type : "", near ? "\"; " : "",
                   list);
}

/* rope.dimension_count: the head size; ARCH_ROPE_PARTIAL: int(partial_rotary_factor x
 * hidden_size) / heads, as Phi3MiniModel (partial_rotary_factor in [0, 1], checked here). */
static uint64_t rope_dims(hf *h, uint64_t hidden) {
    if (!(h->a->flags & ARCH_ROPE_PARTIAL)) return h->head_dim;
    json_t *j = cfg_field(h, "partial_rotary_factor");
    double f = json_is_number(j) ? json_number_value(j) : 1.0;
    if (!(f >= 0.0 && f <= 1.0)) f = 1.0;
    return (uint64_t)(f * (double)hidden) / h->n_head;
}

/* longrope ("su") rope scaling as Phi3MiniModel writes it: when rope_scaling has long_factor,
 * rope.scaling.attn_factor (sqrt(1 + ln(s) / ln(original context)) for s = context /
 * original context > 1, else 1) and the factors, long_factor and short_factor of
 * rope.dimension_count / 2 values each, as rope_factors_long/short.weight. */
static tbx_status rope_longrope(hf *h, json_t *rs, uint64_t hidden) {
    json_t *lf = json_object_get(rs, "long_factor"), *sf = json_object_get(rs, "short_factor");
    if (!lf || json_is_null(lf) || (json_is_array(lf) && json_array_size(lf) == 0))
        return TBX_OK; /* the converter writes nothing without long factors */
    const size_t want = (size_t)(rope_dims(h, hidden) / 2);
    if (!json_is_array(lf) || !json_is_array(sf) || json_array_size(lf) != want ||
        json_array_size(sf) != want)
        return hf_fail(h, TBX_E_FORMAT, "rope_scaling", "config.json: longrope rope_scaling needs "
                       "long_factor and short_factor of %zu numbers each (rope.dimension_count "
                       "/ 2)", want);
    double ctx = 0, orig = 0;
    const char *cn[3] = {"n_positions", "max_position_embeddings", NULL};
    const char *on[2] = {"original_max_position_embeddings", NULL};
    if (cfg_number(h, cn, &ctx, NULL) != 1 || cfg_number(h, on, &orig, NULL) != 1 ||
        !(orig > 1) || !(ctx > 0))
        return hf_fail(h, TBX_E_FORMAT, "original_max_position_embeddings", "config.json: "
                       "longrope rope_scaling needs max_position_embeddings and "
                       "original_max_position_embeddings > 1");
    const double scale = ctx / orig;
    const double attn = scale > 1.0 ? sqrt(1.0 + log(scale) / log(orig)) : 1.0;
    tbx_status st = put_arch(h, "rope.scaling.attn_factor", tbx_value_new_float(TBX_V_F32, attn));
    if (st != TBX_OK) return st;
    h->rope_long = tbx_calloc(h->al, want ? want : 1, sizeof *h->rope_long);
    h->rope_short = tbx_calloc(h->al, want ? want : 1, sizeof *h->rope_short);
    if (!h->rope_long || !h->rope_short) return tbx_err_nomem(h->err, "rope factors");
    h->rope_nfac = want;
    for (size_t i = 0; i < want; i++) {
        json_t *a = json_array_get(lf, i), *b = json_array_get(sf, i);
        if (!json_is_number(a) || !json_is_number(b))
            return hf_fail(h, TBX_E_FORMAT, "rope_scaling", "config.json: longrope factor %zu "
                           "is not a number", i);
        h->rope_long[i] = (float)json_number_value(a);
        h->rope_short[i] = (float)json_number_value(b);
    }
    return TBX_OK;
}

/* A rope_theta of rope_parameters' `kind` (transformers 5: full_attention, sliding_attention),
 * else config.json's `flat` field (older configs: global_rope_theta, local_rope_theta). */
static json_t *rope_theta_of(hf *h, const char *kind, const char *flat) {
    json_t *rp = json_object_get(json_object_get(h->cfg, "rope_parameters"), kind);
    json_t *v = json_is_object(rp) ? json_object_get(rp, "rope_theta") : NULL;
    return json_is_number(v) ? v : json_object_get(h->cfg, flat);
}

/* ARCH_SWA: local attention every layer but every global_attn_every_n_layers-th (ModernBERT),
 * as convert_hf_to_gguf.py's ModernBertModel and TextModel write it. */
static tbx_status write_swa(hf *h) {
    uint64_t win = 0, every = 0;
    tbx_status st = cfg_u64(h, "local_attention", true, &win);
    if (st == TBX_OK) st = put_arch(h, "attention.sliding_window", tbx_value_new_uint(TBX_V_U32, win));
    if (st == TBX_OK && (st = cfg_u64(h, "global_attn_every_n_layers", false, &every)) == TBX_OK)
        st = put_arch(h, "attention.sliding_window_pattern", tbx_value_new_uint(TBX_V_U32, every));
    if (st == TBX_E_NOT_FOUND) st = TBX_OK;
    json_t *g = rope_theta_of(h, "full_attention", "global_rope_theta");
    json_t *l = rope_theta_of(h, "sliding_attention", "local_rope_theta");
    if (st == TBX_OK && g && !json_is_number(g))
        st = hf_fail(h, TBX_E_FORMAT, "rope_theta", "config.json: the global rope_theta is not a "
                     "number");
    if (st == TBX_OK && l && !json_is_number(l))
        st = hf_fail(h, TBX_E_FORMAT, "rope_theta", "config.json: the local rope_theta is not a "
                     "number");
    if (st == TBX_OK && g)
        st = put_arch(h, "rope.freq_base", tbx_value_new_float(TBX_V_F32, json_number_value(g)));
    if (st == TBX_OK && l)
        st = put_arch(h, "rope.freq_base_swa", tbx_value_new_float(TBX_V_F32, json_number_value(l)));
    return st;
}

/* Gemma 2 and 3 in llama.cpp (src/models/gemma2.cpp, gemma3.cpp; and gpt-oss, openai-moe.cpp,
 * for the layer pattern): their local (sliding-window)
 * layers are a fixed pattern, every `pattern`-th layer global (the last of each run), and the
 * queries are scaled by 1/sqrt(head size), or 1/sqrt(hidden / heads) for the 27B model (known
 * by its layer count); convert_hf_to_gguf.py writes neither. A config.json that says otherwise
 * (layer_types, sliding_window_pattern, query_pre_attn_scalar; a Gemma 3
 * attn_logit_softcapping, which the converter refuses) would give a file llama.cpp runs
 * wrongly: TBX_E_UNSUPPORTED naming the field. */
static tbx_status check_gemma_attention(hf *h) {
    static const struct { const char *arch; unsigned pattern; uint64_t layers_27b; } G[] = {
        {"gemma2", 2, 46}, {"gemma3", 6, 62},
        /* gpt-oss (src/models/openai-moe.cpp): every second layer global, no 27B scale */
        {"gpt-oss", 2, 0},
    };
    size_t g = 0;
    while (g < sizeof G / sizeof G[0] && strcmp(h->a->arch, G[g].arch) != 0) g++;
    if (g == sizeof G / sizeof G[0]) return TBX_OK;
    const unsigned n = G[g].pattern;
    json_t *sc = cfg_get(h, "attn_logit_softcapping");
    if (n == 6 && sc && !json_is_null(sc))
        return hf_fail(h, TBX_E_UNSUPPORTED, "attn_logit_softcapping", "config.json: "
                       "attn_logit_softcapping is set, which llama.cpp's gemma3 does not apply");
    json_t *sw = cfg_get(h, "sliding_window");
    if (sw && !json_is_null(sw)) {
        json_t *swp = cfg_get(h, "sliding_window_pattern");
        if (json_is_number(swp) && json_number_value(swp) != (double)n)
            return hf_fail(h, TBX_E_UNSUPPORTED, "sliding_window_pattern", "config.json: "
                           "sliding_window_pattern = %g, llama.cpp's %s has every %u-th layer "
                           "global", json_number_value(swp), h->a->arch, n);
        json_t *lt = cfg_get(h, "layer_types");
        for (size_t i = 0; json_is_array(lt) && i < json_array_size(lt); i++) {
            const char *t = json_string_value(json_array_get(lt, i));
            const char *want = i % n < n - 1 ? "sliding_attention" : "full_attention";
            if (!t || strcmp(t, want) != 0)
                return hf_fail(h, TBX_E_UNSUPPORTED, "layer_types", "config.json: layer_types[%zu]"
                               " = \"%s\", llama.cpp's %s makes that layer %s (every %u-th "
                               "layer global)", i, t ? t : "(not a string)", h->a->arch, want,
                               n);
        }
    }
    double q;
    const char *qn[2] = {"query_pre_attn_scalar", NULL};
    int r = cfg_number(h, qn, &q, NULL);
    if (r < 0) return h->err->code;
    uint64_t hidden = h->hpv[HPV_EMBD];
    const bool big = h->hpv[HPV_LAYERS] == G[g].layers_27b;
    const double want = big ? (double)(hidden / h->n_head) : (double)h->head_dim;
    if (r > 0 && q != want)
        return hf_fail(h, TBX_E_UNSUPPORTED, "query_pre_attn_scalar", "config.json: "
                       "query_pre_attn_scalar = %g, llama.cpp's %s scales queries by 1/sqrt(%g) "
                       "(%s)", q, h->a->arch, want, big ? "hidden_size / num_attention_heads, "
                       "its 27B model" : "the head size");
    return TBX_OK;
}

static tbx_status write_hparams(hf *h) {
    tbx_status st = TBX_OK;
    if (h->a->flags & ARCH_POS_OFFSET) {
        /* RoBERTa numbers positions from pad_token_id + 1 (as convert_hf_to_gguf.py's
         * _xlmroberta_tokenizer_init: none without a pad_token_id) */
        uint64_t pad = 0;
        st = cfg_u64(h, "pad_token_id", false, &pad);
        if (st == TBX_OK) h->pos_off = pad + 1;
        else if (st != TBX_E_NOT_FOUND) return st;
        st = TBX_OK;
    }
    for (const hf_hparam *p = h->a->hp; st == TBX_OK && p->key; p++) {
        double v;
        const char *which = NULL;
        int r = cfg_number(h, p->cfg, &v, &which);
        if (r < 0) return h->err->code;
        if (r == 1 && p->kind == HP_F32_NZ && v == 0) {
            if (p->required)
                return hf_fail(h, TBX_E_FORMAT, which, "config.json: %s is 0 (%s.%s, which "
                               "llama.cpp needs, is written only when not 0)", which,
                               h->a->arch, p->key);
            r = 0;
        }
        if (r == 0) {
            if (p->required)
                return hf_fail(h, TBX_E_NOT_FOUND, p->cfg[0], "config.json has no %s (needed for "
                               "%s.%s)", p->cfg[0], h->a->arch, p->key);
            continue;
        }
        if (p->kind == HP_U32) {
            if (v < 0 || v > 4294967295.0 || v != (double)(uint64_t)v)
                return hf_fail(h, TBX_E_FORMAT, which, "config.json: %s = %g is not a count",
                               which, v);
            if (h->pos_off && strcmp(p->key, "context_length") == 0) {
                if (v <= (double)h->pos_off)
                    return hf_fail(h, TBX_E_FORMAT, which, "config.json: %s = %g leaves no "
                                   "position after the first pad_token_id + 1 = %llu", which, v,
                                   (unsigned long long)h->pos_off);
                v -= (double)h->pos_off;
            }
            static const char *const HPV_KEYS[HPV_N] = {"embedding_length", "block_count",
                                                        "feed_forward_length", "context_length",
                                                        "expert_count",
                                                        "expert_feed_forward_length",
                                                        "expert_shared_feed_forward_length",
                                                        "attention.head_count"};
            for (int k = 0; k < HPV_N; k++)
                if (strcmp(p->key, HPV_KEYS[k]) == 0) {
                    h->hpv[k] = (uint64_t)v;
                    h->hpv_cfg[k] = which;
                }
            st = put_arch(h, p->key, tbx_value_new_uint(TBX_V_U32, (uint64_t)v));
        } else {
            st = put_arch(h, p->key, tbx_value_new_float(TBX_V_F32, v));
        }
    }
    if (st != TBX_OK) return st;
    uint64_t hidden = 0;
    /* the row's own config names when it has them (nomic_bert's n_embd, n_head) */
    if (h->hpv_cfg[HPV_EMBD]) hidden = h->hpv[HPV_EMBD];
    else if ((st = cfg_u64(h, "hidden_size", true, &hidden)) != TBX_OK) return st;
    if (h->hpv_cfg[HPV_HEADS]) h->n_head = h->hpv[HPV_HEADS];
    else if ((st = cfg_u64(h, "num_attention_heads", true, &h->n_head)) != TBX_OK) return st;
    if (h->n_head == 0) return hf_fail(h, TBX_E_FORMAT, "num_attention_heads",
                                       "config.json: num_attention_heads is 0");
    h->n_head_kv = h->n_head;
    st = cfg_u64(h, "num_key_value_heads", false, &h->n_head_kv);
    if (st != TBX_OK && st != TBX_E_NOT_FOUND) return st;
    if (h->n_head_kv == 0) return hf_fail(h, TBX_E_FORMAT, "num_key_value_heads",
                                          "config.json: num_key_value_heads is 0");
    st = TBX_OK;
    if ((h->a->flags & ARCH_NO_HEAD_DIM) ||
        (st = cfg_u64(h, "head_dim", false, &h->head_dim)) == TBX_E_NOT_FOUND) {
        h->head_dim = hidden / h->n_head;
        st = TBX_OK;
    } else if (st == TBX_OK) {
        /* as convert_hf_to_gguf.py: a head size config.json states is written, so llama.cpp
         * does not derive embedding_length / head_count (wrong when they differ) */
        h->head_dim_cfg = "head_dim";
        if ((st = put_arch(h, "attention.key_length",
                           tbx_value_new_uint(TBX_V_U32, h->head_dim))) != TBX_OK ||
            (st = put_arch(h, "attention.value_length",
                           tbx_value_new_uint(TBX_V_U32, h->head_dim))) != TBX_OK)
            return st;
    }
    if (st != TBX_OK) return st;
    if (h->a->rope) { /* the rope_scaling types the row accepts */
        /* transformers names it rope_scaling (rope_parameters since v5) */
        json_t *rs = cfg_get(h, "rope_parameters");
        if (!rs || json_is_null(rs)) rs = cfg_get(h, "rope_scaling");
        /* per attention kind (Gemma 3): the global layers' is the one llama.cpp scales */
        if (json_is_object(rs) && json_is_object(json_object_get(rs, "full_attention")))
            rs = json_object_get(rs, "full_attention");
        const char *t = rs ? (jstr(rs, "rope_type") ? jstr(rs, "rope_type") : jstr(rs, "type")) : NULL;
        json_t *jf = rs ? json_object_get(rs, "factor") : NULL;
        if (rs && !json_is_null(rs) && !json_is_object(rs))
            return hf_fail(h, TBX_E_FORMAT, "rope_scaling", "config.json: rope_scaling is not "
                           "an object");
        if (!t || strcmp(t, "default") == 0) {
            /* no scaling */
        } else if (strcmp(t, "linear") == 0 && (h->a->rope & TBX_HF_ROPE_LINEAR) &&
                   json_is_number(jf)) {
            if ((st = put_arch(h, "rope.scaling.type", tbx_value_new_string("linear", 6))) != TBX_OK ||
                (st = put_arch(h, "rope.scaling.factor",
                               tbx_value_new_float(TBX_V_F32, json_number_value(jf)))) != TBX_OK)
                return st;
        } else if (strcmp(t, "yarn") == 0 && (h->a->rope & TBX_HF_ROPE_YARN) &&
                   json_is_number(jf)) {
            /* as convert_hf_to_gguf.py's Qwen2Model: the factor and the original context */
            uint64_t octx = 0;
            json_t *v = json_object_get(rs, "original_max_position_embeddings");
            double dv = json_is_number(v) ? json_number_value(v) : -1;
            if (!(json_number_value(jf) > 0) || !(dv > 0) || dv > 4294967295.0 ||
                dv != (double)(uint64_t)dv)
                return hf_fail(h, TBX_E_FORMAT, "rope_scaling", "config.json: yarn rope_scaling "
                               "needs factor > 0 and original_max_position_embeddings, a count");
            octx = (uint64_t)dv;
            if ((st = put_arch(h, "rope.scaling.type", tbx_value_new_string("yarn", 4))) != TBX_OK ||
                (st = put_arch(h, "rope.scaling.factor",
                               tbx_value_new_float(TBX_V_F32, json_number_value(jf)))) != TBX_OK ||
                (st = put_arch(h, "rope.scaling.original_context_length",
                               tbx_value_new_uint(TBX_V_U32, octx))) != TBX_OK)
                return st;
            /* and yarn's own parameters when rope_scaling states them (TextModel's
             * set_gguf_parameters: gpt-oss's beta_fast and beta_slow) */
            static const struct { const char *cfg, *alt, *key; } YP[] = {
                {"extrapolation_factor", NULL, "rope.scaling.yarn_ext_factor"},
                {"attention_factor", "attn_factor", "rope.scaling.yarn_attn_factor"},
                {"beta_fast", NULL, "rope.scaling.yarn_beta_fast"},
                {"beta_slow", NULL, "rope.scaling.yarn_beta_slow"},
            };
            for (size_t k = 0; k < sizeof YP / sizeof YP[0]; k++) {
                json_t *yv = json_object_get(rs, YP[k].cfg);
                if (!yv && YP[k].alt) yv = json_object_get(rs, YP[k].alt);
                if (!yv || json_is_null(yv)) continue;
                if (!json_is_number(yv))
                    return hf_fail(h, TBX_E_FORMAT, YP[k].cfg, "config.json: rope_scaling's %s "
                                   "is not a number", YP[k].cfg);
                if ((st = put_arch(h, YP[k].key, tbx_value_new_float(TBX_V_F32,
                                                                     json_number_value(yv)))) != TBX_OK)
                    return st;
            }
        } else if ((strcmp(t, "longrope") == 0 || strcmp(t, "su") == 0) &&
                   (h->a->rope & TBX_HF_ROPE_LONGROPE)) {
            if ((st = rope_longrope(h, rs, hidden)) != TBX_OK) return st;
        } else if (strcmp(t, "llama3") == 0 && (h->a->rope & TBX_HF_ROPE_LLAMA3)) {
            /* defaults as convert_hf_to_gguf.py's */
            json_t *v;
            h->rope_llama3 = true;
            h->rope_factor = json_is_number(jf) ? json_number_value(jf) : 8.0;
            v = json_object_get(rs, "low_freq_factor");
            h->rope_low = json_is_number(v) ? json_number_value(v) : 1.0;
            v = json_object_get(rs, "high_freq_factor");
            h->rope_high = json_is_number(v) ? json_number_value(v) : 4.0;
            v = json_object_get(rs, "original_max_position_embeddings");
            h->rope_orig_ctx = json_is_number(v) ? json_number_value(v) : 8192.0;
            v = json_object_get(rs, "rope_theta");
            if (!json_is_number(v)) v = cfg_get(h, "rope_theta");
            h->rope_theta = json_is_number(v) ? json_number_value(v) : 10000.0;
            if (!(h->rope_factor > 0) || !(h->rope_high > h->rope_low) || !(h->rope_low > 0) ||
                !(h->rope_orig_ctx > 0) || !(h->rope_theta > 0) || h->head_dim < 2 ||
                h->head_dim % 2)
                return hf_fail(h, TBX_E_FORMAT, "rope_scaling", "config.json: llama3 "
                               "rope_scaling needs factor > 0, high_freq_factor > "
                               "low_freq_factor > 0, original_max_position_embeddings > 0 and "
                               "an even head size");
        } else {
            char acc[64];
            tbx_hf_rope_names_(h->a->rope, acc, sizeof acc);
            return hf_fail(h, TBX_E_UNSUPPORTED, "rope_scaling",
                           "config.json: rope_scaling type \"%s\"%s is not supported for %s yet "
                           "(accepted: %s)", t, json_is_number(jf) ? "" : " without a factor",
                           h->a->model_type, acc);
        }
    }
    if ((st = check_gemma_attention(h)) != TBX_OK) return st;
    if (h->a->flags & ARCH_SWIGLU_OAI) {
        static const struct { const char *field; double want; } SW[] = {
            {"swiglu_alpha", 1.702}, {"swiglu_limit", 7.0},
        };
        for (size_t k = 0; k < sizeof SW / sizeof SW[0]; k++) {
            json_t *j = cfg_get(h, SW[k].field);
            if (!j || json_is_null(j)) continue; /* GptOssConfig's default: llama.cpp's value */
            if (!json_is_number(j) || (float)json_number_value(j) != (float)SW[k].want)
                return hf_fail(h, TBX_E_UNSUPPORTED, SW[k].field, "config.json: %s = %g, "
                               "llama.cpp's %s computes its experts' SwiGLU with %g", SW[k].field,
                               json_is_number(j) ? json_number_value(j) : NAN, h->a->arch,
                               SW[k].want);
        }
    }
    /* the vocabulary is the token embedding's rows (check_vocab_rows) */
    if ((h->a->flags & ARCH_VOCAB_SIZE) &&
        (st = put_arch(h, "vocab_size", tbx_value_new_uint(TBX_V_U32, h->n_vocab))) != TBX_OK)
        return st;
    if (h->a->flags & ARCH_ROPE_DIM)
        if ((st = put_arch(h, "rope.dimension_count",
                           tbx_value_new_uint(TBX_V_U32, rope_dims(h, hidden)))) != TBX_OK)
            return st;
    if (h->a->flags & ARCH_NORM_TOPK) {
        json_t *j = json_object_get(h->cfg, "norm_topk_prob");
        if (!json_is_true(j))
            return hf_fail(h, TBX_E_UNSUPPORTED, "norm_topk_prob", "config.json: norm_topk_prob "
                           "is %s: llama.cpp's %s always renormalizes the weights of the experts "
                           "it picks (norm_topk_prob true), so it would not compute this model",
                           j ? (json_is_false(j) ? "false" : "not a boolean") : "absent "
                           "(transformers: false)", h->a->arch);
    }
    if (h->a->flags & ARCH_NONCAUSAL)
        if ((st = put_arch(h, "attention.causal", tbx_value_new_bool(0))) != TBX_OK) return st;
    if ((h->a->flags & ARCH_SWA) && (st = write_swa(h)) != TBX_OK) return st;
    if (h->a->flags & ARCH_ROPE_NONE)
        if ((st = put_arch(h, "rope.scaling.type", tbx_value_new_string("none", 4))) != TBX_OK)
            return st;
    if (h->a->flags & ARCH_HIDDEN_ACT) {
        const char *act = jstr(h->cfg, "hidden_activation");
        if (act && (st = put_arch(h, "hidden_activation",
                                  tbx_value_new_string(act, strlen(act)))) != TBX_OK)
            return st;
    }
    if (h->a->flags & ARCH_CLS_POOLING) {
        const char *cp = jstr(h->cfg, "classifier_pooling");
        if (cp) {
            int mode = !strcmp(cp, "cls") ? POOL_CLS : !strcmp(cp, "mean") ? POOL_MEAN : -1;
            if (mode < 0)
                return hf_fail(h, TBX_E_UNSUPPORTED, "classifier_pooling", "config.json: "
                               "classifier_pooling \"%s\" is not supported (cls, mean)", cp);
            if ((st = put_arch(h, "classifier.pooling_type",
                               tbx_value_new_uint(TBX_V_U32, (uint64_t)mode))) != TBX_OK)
                return st;
        }
    }
    if (h->a->flags & ARCH_POOLING) {
        /* sentence-transformers: modules.json (a JSON array) names the Pooling module's folder */
        int64_t mi = tbx_file_find_section(h->in, "modules.json");
        const char *ppath = NULL;
        json_t *arr = NULL;
        if (mi >= 0) {
            void *buf = NULL;
            size_t n = 0;
            if ((st = tbx_section_load_(h->in, (uint64_t)mi, &buf, &n, h->err)) != TBX_OK)
                return st;
            json_error_t je;
            arr = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
            tbx_free(h->al, buf, n ? n : 1);
            if (!json_is_array(arr)) {
                json_decref(arr);
                return tbx_err(h->err, TBX_E_FORMAT, (uint64_t)(je.position > 0 ? je.position : 0),
                               "modules.json", "modules.json: not a JSON array");
            }
            h->modules = arr;
            for (size_t k = 0; k < json_array_size(arr); k++) {
                const char *ty = jstr(json_array_get(arr, k), "type");
                size_t tl = ty ? strlen(ty) : 0;
                if (tl >= 7 && strcmp(ty + tl - 7, "Pooling") == 0) {
                    ppath = jstr(json_array_get(arr, k), "path");
                    break;
                }
            }
        }
        if (ppath) {
            char pname[512];
            snprintf(pname, sizeof pname, "%s%sconfig.json", ppath, *ppath ? "/" : "");
            if ((st = load_json(h, pname, true, 0, &h->pool)) != TBX_OK) return st;
            int mode = -1;
            const char *pm = jstr(h->pool, "pooling_mode");
            if (json_is_true(json_object_get(h->pool, "pooling_mode_mean_tokens"))) mode = POOL_MEAN;
            else if (json_is_true(json_object_get(h->pool, "pooling_mode_cls_token"))) mode = POOL_CLS;
            else if (json_is_true(json_object_get(h->pool, "pooling_mode_lasttoken"))) mode = POOL_LAST;
            else if (pm && strcmp(pm, "mean") == 0) mode = POOL_MEAN;
            else if (pm && strcmp(pm, "cls") == 0) mode = POOL_CLS;
            else if (pm && strcmp(pm, "lasttoken") == 0) mode = POOL_LAST;
            if (mode < 0)
                return hf_fail(h, TBX_E_UNSUPPORTED, pname, "%s: pooling mode not supported by "
                               "llama.cpp (mean, cls, lasttoken)", pname);
            if ((st = put_arch(h, "pooling_type", tbx_value_new_uint(TBX_V_U32, (uint64_t)mode))) != TBX_OK)
                return st;
        }
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Tokenizer (tokenizer.json: WordPiece -> llama.cpp "bert", BPE -> "gpt2")                     */
/* ------------------------------------------------------------------------------------------ */
/* The flags of tokenizer.json's normalizer llama.cpp takes (gguf-py's SpecialVocab reads them
 * the same way): a Lowercase or StripAccents step sets its flag; a BertNormalizer's lowercase
 * and strip_accents members, when booleans, set theirs (strip_accents null: llama.cpp follows
 * lowercase, as BertNormalizer does); a Sequence's steps in order, a later one winning. */
static void normalizer_flags(json_t *n, int *lower, int *strip, int depth) {
    const char *ty = jstr(n, "type");
    if (!ty || depth > 8) return;
    if (strcmp(ty, "Lowercase") == 0) {
        *lower = 1;
    } else if (strcmp(ty, "StripAccents") == 0) {
        *strip = 1;
    } else if (strcmp(ty, "BertNormalizer") == 0) {
        json_t *l = json_object_get(n, "lowercase"), *s = json_object_get(n, "strip_accents");
        if (json_is_boolean(l)) *lower = json_is_true(l);
        if (json_is_boolean(s)) *strip = json_is_true(s);
    } else if (strcmp(ty, "Sequence") == 0) {
        json_t *steps = json_object_get(n, "normalizers");
        for (size_t i = 0; i < json_array_size(steps); i++)
            normalizer_flags(json_array_get(steps, i), lower, strip, depth + 1);
    }
}

/* tokenizer.ggml.normalizer.lowercase / .strip_accents from the normalizer's flags (-1: the
 * tokenizer does not say; nothing written, llama.cpp's defaults hold). A cased WordPiece
 * (BertNormalizer lowercase false) needs it: llama.cpp lowercases by default. */
static tbx_status put_normalizer(hf *h) {
    int lower = -1, strip = -1;
    json_t *n = h->tok ? json_object_get(h->tok, "normalizer") : NULL;
    if (n) normalizer_flags(n, &lower, &strip, 0);
    tbx_status st = TBX_OK;
    if (lower >= 0)
        st = put(h, "tokenizer.ggml.normalizer.lowercase", tbx_value_new_bool(lower == 1));
    if (st == TBX_OK && strip >= 0)
        st = put(h, "tokenizer.ggml.normalizer.strip_accents", tbx_value_new_bool(strip == 1));
    return st;
}
/* Content of special token `typ` in tokenizer_config.json (a string or {"content": ...}). */
static const char *tokcfg_token(hf *h, const char *typ) {
    char key[32];
    snprintf(key, sizeof key, "%s_token", typ);
    json_t *e = h->tokcfg ? json_object_get(h->tokcfg, key) : NULL;
    if (json_is_string(e)) return json_string_value(e);
    if (json_is_object(e)) return jstr(e, "content");
    return NULL;
}

/* *id: the id of the first added token (tokenizer.json's added_tokens) with this content and
 * an integer id, or -1. */
static tbx_status added_id(hf *h, const char *content, int64_t *id) {
    *id = -1;
    const tbx_tokj *t = &h->tj;
    size_t it = t->added, key, el, cl = content ? strlen(content) : 0;
    if (!content || !h->tok || tbx_tokj_kind(t, it) != '[') return TBX_OK;
    tbx_tokj_buf b = {h->al, NULL, 0};
    tbx_status st = TBX_OK;
    while (*id < 0 && tbx_tokj_next(t, &it, &key, &el)) {
        size_t len;
        int64_t v;
        const char *c = tbx_tokj_str(t, tbx_tokj_get(t, el, "content"), &b, &len);
        if (!c && len == SIZE_MAX) { st = tbx_err_nomem(h->err, "added_tokens"); break; }
        if (c && len == cl && memcmp(c, content, cl) == 0 &&
            tbx_tokj_int(t, tbx_tokj_get(t, el, "id"), &v))
            *id = v;
    }
    tbx_tokj_buf_free(&b);
    return st;
}

/* First and last special tokens of the post-processor's single-sequence template. */
static void template_ends(hf *h, const char **first, const char **last) {
    *first = *last = NULL;
    json_t *pp = json_object_get(h->tok, "post_processor");
    if (!json_is_object(pp)) return;
    json_t *procs = json_object_get(pp, "processors");
    size_t n = json_is_array(procs) ? json_array_size(procs) : 1;
    for (size_t k = 0; k < n; k++) {
        json_t *p = json_is_array(procs) ? json_array_get(procs, k) : pp;
        const char *ty = jstr(p, "type");
        if (!ty || strcmp(ty, "TemplateProcessing") != 0) continue;
        json_t *single = json_object_get(p, "single");
        size_t m = json_array_size(single);
        if (m < 2) continue;
        *first = jstr(json_object_get(json_array_get(single, 0), "SpecialToken"), "id");
        *last = jstr(json_object_get(json_array_get(single, m - 1), "SpecialToken"), "id");
    }
}

/* Whether the post-processor's pair template puts a separator between A and B, as gguf-py's
 * SpecialVocab reads it (1 / 0; -1: no template of that shape): the pair less the single
 * template's first and last special tokens must be A ... B; a separator is its first middle
 * special token when the single template has no last one, or its second, being sep or eos. */
static int pair_add_sep(hf *h, const char *first, const char *last, const char *sep,
                        const char *eos) {
    json_t *pp = json_object_get(h->tok, "post_processor");
    json_t *procs = json_object_get(pp, "processors");
    size_t n = json_is_array(procs) ? json_array_size(procs) : 1;
    int r = -1;
    for (size_t k = 0; json_is_object(pp) && k < n; k++) {
        json_t *p = json_is_array(procs) ? json_array_get(procs, k) : pp;
        const char *ty = jstr(p, "type");
        if (!ty || strcmp(ty, "TemplateProcessing") != 0) continue;
        json_t *pair = json_object_get(p, "pair");
        size_t a = 0, b = json_array_size(pair);
        if (b == 0) continue;
#define SPECIAL_ID(i) jstr(json_object_get(json_array_get(pair, (i)), "SpecialToken"), "id")
#define SEQUENCE_ID(i) jstr(json_object_get(json_array_get(pair, (i)), "Sequence"), "id")
        const char *s0 = SPECIAL_ID(a), *s1 = SPECIAL_ID(b - 1);
        if (first && s0 && !strcmp(s0, first)) a++;
        if (last && b > a && s1 && !strcmp(s1, last)) b--;
        const char *sa = b > a ? SEQUENCE_ID(a) : NULL, *sb = b > a ? SEQUENCE_ID(b - 1) : NULL;
        if (b - a < 3 || !sa || strcmp(sa, "A") || !sb || strcmp(sb, "B")) continue;
        const char *m0 = SPECIAL_ID(a + 1), *m1 = b - a == 4 ? SPECIAL_ID(a + 2) : NULL;
#undef SPECIAL_ID
#undef SEQUENCE_ID
        bool is0 = m0 && ((sep && !strcmp(m0, sep)) || (eos && !strcmp(m0, eos)));
        bool is1 = m1 && ((sep && !strcmp(m1, sep)) || (eos && !strcmp(m1, eos)));
        r = (is0 && !last) || is1;
    }
    return r;
}

/* convert_hf_to_gguf.py's GemmaModel.set_vocab sets fixed ids for CodeGemma's fill-in-the-middle
 * tokens and for <end_of_turn> (107 in Gemma's vocabulary) whatever the vocabulary; of these,
 * gguf-py's writer has a key for <end_of_turn> only (tokenizer.ggml.eot_token_id: the others'
 * names changed and are skipped), which is written here when the vocabulary has that id. */
static tbx_status put_gemma_eot(hf *h) {
    return 107 < h->n_vocab ? put_u32(h, "tokenizer.ggml.eot_token_id", 107) : TBX_OK;
}

/* ---- chat templates (issue 22) ---------------------------------------------------------- */
/* A side file's text as a JSON string (NULL with *st set: absent is TBX_OK, else the error). */
static json_t *section_text(hf *h, const char *name, tbx_status *st) {
    *st = TBX_OK;
    int64_t i = tbx_file_find_section(h->in, name);
    if (i < 0) return NULL;
    void *buf = NULL;
    size_t n = 0, bad = 0;
    if ((*st = tbx_section_load_(h->in, (uint64_t)i, &buf, &n, h->err)) != TBX_OK) return NULL;
    json_t *j = NULL;
    if (!tbx_utf8_valid(buf, n, &bad)) {
        *st = tbx_err(h->err, TBX_E_FORMAT, (uint64_t)bad, name, "%s: not UTF-8 text (byte "
                      "%zu)", name, bad);
    } else {
        /* line ends as Python's text mode reads them (gguf-py opens the .jinja files so):
         * "\r\n" and a lone "\r" become "\n" */
        char *t = buf;
        size_t o = 0;
        for (size_t k = 0; k < n; k++) {
            if (t[k] == '\r') {
                t[o++] = '\n';
                if (k + 1 < n && t[k + 1] == '\n') k++;
            } else {
                t[o++] = t[k];
            }
        }
        if (!(j = json_stringn(buf, o))) *st = tbx_err_nomem(h->err, name);
    }
    tbx_free(h->al, buf, n ? n : 1);
    return j;
}

/* Named templates (an array of {"name", "template"}) as gguf-py's GGUFWriter.add_chat_template
 * writes them: a name's characters other than letters and digits become '_'; "default" is
 * tokenizer.chat_template, every other one tokenizer.chat_template.NAME, their names listed in
 * tokenizer.chat_templates; entries without a name or a template are left out. */
static tbx_status put_chat_templates(hf *h, json_t *list) {
    const size_t n = json_array_size(list);
    tbx_value *names = tbx_val_str_array(h->al, n ? n : 1, 64 * (uint64_t)(n ? n : 1));
    if (!names) return tbx_err_nomem(h->err, "tokenizer.chat_templates");
    size_t nn = 0;
    const char *deflt = NULL;
    tbx_status st = TBX_OK;
    for (size_t i = 0; st == TBX_OK && i < n; i++) {
        json_t *e = json_array_get(list, i);
        const char *nm = jstr(e, "name"), *tpl = jstr(e, "template");
        if (!nm || !*nm || !tpl) continue;
        char clean[64], key[96];
        size_t k = 0;
        for (; nm[k] && k + 1 < sizeof clean; k++)
            clean[k] = isalnum((unsigned char)nm[k]) && !((unsigned char)nm[k] & 0x80) ? nm[k] : '_';
        clean[k] = 0;
        if (nm[k]) {
            st = hf_fail(h, TBX_E_LIMIT, "chat_template", "chat template name \"%.40s...\" is "
                         "longer than %zu bytes", nm, sizeof clean - 1);
            break;
        }
        if (!strcmp(clean, "default")) { deflt = tpl; continue; }
        snprintf(key, sizeof key, "tokenizer.chat_template.%s", clean);
        char *d = tbx_val_str_array_add(names, k);
        if (!d) { st = tbx_err_nomem(h->err, "tokenizer.chat_templates"); break; }
        memcpy(d, clean, k);
        nn++;
        st = put_str(h, key, tpl);
    }
    if (st == TBX_OK && nn) {
        tbx_val_str_array_done(names);
        st = put(h, "tokenizer.chat_templates", names);
        names = NULL;
    }
    tbx_val_free(names);
    if (st == TBX_OK && deflt) st = put_str(h, "tokenizer.chat_template", deflt);
    return st;
}

/* tokenizer.chat_template, as gguf-py's SpecialVocab finds it (only beside a non-empty
 * tokenizer_config.json): tokenizer_config.json's chat_template (a string, or named templates;
 * null: none); else chat_template.jinja (with additional_chat_templates/NAME.jinja: named
 * templates, the first one "default"), else chat_template.json's chat_template. */
static tbx_status put_chat_template(hf *h) {
    if (!h->tokcfg || json_object_size(h->tokcfg) == 0) return TBX_OK;
    json_t *ct = json_object_get(h->tokcfg, "chat_template"), *own = NULL, *file = NULL;
    tbx_status st = TBX_OK;
    if (!ct) {
        if ((own = section_text(h, "chat_template.jinja", &st)) != NULL) {
            json_t *list = json_array();
            json_t *d = json_pack("{s:s,s:O}", "name", "default", "template", own);
            if (!list || !d || json_array_append_new(list, d)) {
                json_decref(list);
                json_decref(own);
                return tbx_err_nomem(h->err, "chat_template");
            }
            static const char dir[] = "additional_chat_templates/";
            for (uint64_t i = 0; st == TBX_OK && i < tbx_section_count(h->in); i++) {
                tbx_section_info si = TBX_SECTION_INFO_INIT;
                if (tbx_section_info_get(h->in, i, &si) != TBX_OK || !si.name) continue;
                size_t nl = strlen(si.name);
                if (nl <= sizeof dir - 1 + 6 || memcmp(si.name, dir, sizeof dir - 1) ||
                    strcmp(si.name + nl - 6, ".jinja") || strchr(si.name + sizeof dir - 1, '/'))
                    continue;
                char stem[128];
                snprintf(stem, sizeof stem, "%.*s", (int)(nl - (sizeof dir - 1) - 6),
                         si.name + sizeof dir - 1);
                json_t *t = section_text(h, si.name, &st);
                if (!t) break;
                json_t *e = json_pack("{s:s,s:o}", "name", stem, "template", t);
                if (!e || json_array_append_new(list, e)) st = tbx_err_nomem(h->err, si.name);
            }
            if (json_array_size(list) > 1) {
                json_decref(own);
                own = list;
            } else {
                json_decref(list);
            }
        } else if (st == TBX_OK && (st = load_json(h, "chat_template.json", false, 0, &file)) ==
                                       TBX_OK && file) {
            ct = json_object_get(file, "chat_template");
        }
        if (own) ct = own;
    }
    if (st == TBX_OK && json_is_string(ct)) st = put_str(h, "tokenizer.chat_template",
                                                         json_string_value(ct));
    else if (st == TBX_OK && json_is_array(ct)) st = put_chat_templates(h, ct);
    json_decref(own);
    json_decref(file);
    return st;
}
/* ---- end of chat templates --------------------------------------------------------------- */

static tbx_status write_special(hf *h) {
    static const struct { const char *typ, *key; } SP[] = {
        {"bos", "tokenizer.ggml.bos_token_id"},   {"eos", "tokenizer.ggml.eos_token_id"},
        {"unk", "tokenizer.ggml.unknown_token_id"}, {"sep", "tokenizer.ggml.seperator_token_id"},
        {"pad", "tokenizer.ggml.padding_token_id"}, {"mask", "tokenizer.ggml.mask_token_id"},
    };
    const char *first, *last;
    template_ends(h, &first, &last);
    const char *bos = tokcfg_token(h, "bos"), *eos = tokcfg_token(h, "eos");
    const char *cls = tokcfg_token(h, "cls"), *sep = tokcfg_token(h, "sep");
    if (h->tokcfg) {
        if (!bos) bos = cls;
        if (!eos) eos = sep;
    } else {
        if (first) bos = first;
        if (last) eos = last;
    }
    tbx_status st = TBX_OK;
    for (size_t k = 0; st == TBX_OK && k < sizeof SP / sizeof SP[0]; k++) {
        const char *content = k == 0 ? bos : k == 1 ? eos : tokcfg_token(h, SP[k].typ);
        int64_t id;
        if ((st = added_id(h, content, &id)) != TBX_OK) break;
        if (id < 0) { /* config.json's {typ}_token_id */
            char key[40];
            snprintf(key, sizeof key, "%s_token_id", SP[k].typ);
            json_t *j = json_object_get(h->cfg, key);
            if (json_is_integer(j)) id = json_integer_value(j);
        }
        if (id >= 0 && (uint64_t)id < h->n_vocab) st = put_u32(h, SP[k].key, (uint64_t)id);
    }
    /* add_bos / add_eos: tokenizer_config's flags, else what the template adds */
    bool has_bos = false, has_eos = false, add_bos = false, add_eos = false;
    json_t *ab = h->tokcfg ? json_object_get(h->tokcfg, "add_bos_token") : NULL;
    json_t *ae = h->tokcfg ? json_object_get(h->tokcfg, "add_eos_token") : NULL;
    if (first) { has_bos = true; add_bos = (bos && strcmp(first, bos) == 0) || (cls && strcmp(first, cls) == 0); }
    if (last) { has_eos = true; add_eos = eos && strcmp(last, eos) == 0; }
    if (json_is_boolean(ab)) { has_bos = true; add_bos = json_is_true(ab); }
    if (json_is_boolean(ae)) { has_eos = true; add_eos = json_is_true(ae); }
    if (st == TBX_OK && has_bos) st = put(h, "tokenizer.ggml.add_bos_token", tbx_value_new_bool(add_bos));
    if (st == TBX_OK && has_eos) st = put(h, "tokenizer.ggml.add_eos_token", tbx_value_new_bool(add_eos));
    if (st == TBX_OK && (h->a->flags & ARCH_GEMMA_EOT)) st = put_gemma_eot(h);
    if (st == TBX_OK) st = put_chat_template(h);
    int sep_flag = (h->a->flags & ARCH_ADD_SEP) ? pair_add_sep(h, first, last, sep, eos) : -1;
    if (st == TBX_OK && sep_flag >= 0)
        st = put(h, "tokenizer.ggml.add_sep_token", tbx_value_new_bool(sep_flag == 1));
    return st;
}

/* llama.cpp's pre-tokenizer name for a BPE tokenizer.json. convert_hf_to_gguf.py recognises
 * a pre-tokenizer by hashing its output on a test text, which needs the tokenizer running;
 * here the split regex itself is compared with the tokenizer.json regexes llama.cpp quotes as
 * the originals of its own pre-tokenizer types (src/llama-vocab.cpp): Llama 3's ("llama-bpe")
 * and Qwen2's ("qwen2"). A lone ByteLevel pre-tokenizer with its built-in regex is GPT-2's
 * (llama.cpp's "gpt-2": its loader refuses "gpt2", issue 19); anything else gets llama.cpp's
 * "default" split. Every tokenizer.ggml.pre written is one of PRE_* and BPE_PRE's names:
 * tests/python/test_hf_gguf.py reads them here and checks each against the names the loader
 * of llama.cpp's own src/llama-vocab.cpp accepts. */
#define PRE_DEFAULT "default"
#define PRE_GPT2 "gpt-2"
#define PRE_MODERN_BERT "modern-bert"
static const struct { const char *regex, *pre; } BPE_PRE[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "llama-bpe"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "qwen2"},
    /* o200k (GPT-4o's, gpt-oss's): llama.cpp's "gpt-4o", the regex its vocabulary loader quotes
     * as tokenizer.json's (convert_hf_to_gguf.py names it by Xenova/gpt-4o's hash) */
    {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
     "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "gpt-4o"},
};

const char *tbx_hf_bpe_pre_regex_(const char *pre) {
    for (size_t i = 0; pre && i < sizeof BPE_PRE / sizeof BPE_PRE[0]; i++)
        if (strcmp(pre, BPE_PRE[i].pre) == 0) return BPE_PRE[i].regex;
    return NULL;
}

static const char *bpe_pre_name(hf *h) {
    json_t *pt = json_object_get(h->tok, "pre_tokenizer");
    const char *ty = jstr(pt, "type");
    if (!ty) return PRE_DEFAULT;
    if (strcmp(ty, "ByteLevel") == 0) {
        json_t *ur = json_object_get(pt, "use_regex");
        return (!ur || json_is_true(ur)) ? PRE_GPT2 : PRE_DEFAULT;
    }
    if (strcmp(ty, "Sequence") != 0) return PRE_DEFAULT;
    json_t *seq = json_object_get(pt, "pretokenizers");
    for (size_t k = 0; k < json_array_size(seq); k++) {
        json_t *p = json_array_get(seq, k);
        const char *pty = jstr(p, "type");
        if (!pty || strcmp(pty, "Split") != 0) continue;
        const char *re = jstr(json_object_get(p, "pattern"), "Regex");
        for (size_t i = 0; re && i < sizeof BPE_PRE / sizeof BPE_PRE[0]; i++)
            if (strcmp(re, BPE_PRE[i].regex) == 0) return BPE_PRE[i].pre;
        return PRE_DEFAULT;
    }
    return PRE_DEFAULT;
}

static tbx_status write_llama_vocab(hf *h, uint8_t *spm, size_t spm_len);

static tbx_status write_ugm_vocab(hf *h);
static tbx_status write_ugm_vocab_json(hf *h);

static tbx_status write_tokenizer(hf *h) {
    if (h->a->tokenizers & TBX_HF_TOK_UGM) return write_ugm_vocab(h);
    char spm_rows[128];
    tbx_hf_arch_list_(TBX_HF_TOK_SPM, spm_rows, sizeof spm_rows);
    if (h->a->tokenizers & TBX_HF_TOK_SPM) {
        /* LlamaModel.set_vocab: tokenizer_config's add_prefix_space, whatever the vocabulary */
        json_t *ap = h->tokcfg ? json_object_get(h->tokcfg, "add_prefix_space") : NULL;
        tbx_status st;
        /* Gemma*Model.set_vocab: no space prefix, whatever the tokenizer says */
        if ((h->a->flags & ARCH_NO_SPACE_PREFIX) &&
            (st = put(h, "tokenizer.ggml.add_space_prefix", tbx_value_new_bool(0))) != TBX_OK)
            return st;
        if ((h->a->flags & ARCH_SPACE_PREFIX) && json_is_boolean(ap) &&
            (st = put(h, "tokenizer.ggml.add_space_prefix",
                      tbx_value_new_bool(json_is_true(ap)))) != TBX_OK)
            return st;
        /* then, as llama.cpp's converter: tokenizer.model first, else a SentencePiece BPE
         * tokenizer.json (byte_fallback), else the byte-level BPE path below. A tokenizer.model
         * that is tiktoken's text (Llama 3 repositories that copy original/tokenizer.model
         * beside tokenizer.json) is no SentencePiece model: tokenizer.json holds the same
         * vocabulary, and is read instead (llama.cpp's converter stops at SentencePiece's
         * parse error there) */
        int64_t mi = tbx_file_find_section(h->in, "tokenizer.model");
        if (mi >= 0) {
            void *raw = NULL;
            size_t rl = 0;
            if ((st = tbx_section_load_(h->in, (uint64_t)mi, &raw, &rl, h->err)) != TBX_OK)
                return st;
            if (!tbx_spm_is_tiktoken(raw, rl)) return write_llama_vocab(h, raw, rl);
            tbx_free(h->al, raw, rl ? rl : 1);
            if (!h->tok)
                return hf_fail(h, TBX_E_UNSUPPORTED, "tokenizer.model", "tokenizer.model is a "
                               "tiktoken BPE file, not a SentencePiece model, and the model has no "
                               "tokenizer.json (the vocabulary tensorbox reads for it)");
        }
        json_t *m = h->tok ? json_object_get(h->tok, "model") : NULL;
        const char *mt = jstr(m, "type");
        if (mt && strcmp(mt, "BPE") == 0 && json_is_true(json_object_get(m, "byte_fallback")))
            return write_llama_vocab(h, NULL, 0);
    }
    if (!h->tok) {
        if (tbx_file_find_section(h->in, "tokenizer.model") >= 0)
            return hf_fail(h, TBX_E_UNSUPPORTED, "tokenizer.model", "a SentencePiece tokenizer."
                           "model is supported for llama-family models (%s), not for %s",
                           spm_rows, h->a->model_type);
        return hf_fail(h, TBX_E_NOT_FOUND, "tokenizer.json", "the model has no tokenizer.json "
                       "(llama.cpp needs the vocabulary; --raw writes the tensors only)");
    }
    const tbx_tokj *t = &h->tj;
    json_t *model = json_object_get(h->tok, "model");
    const char *mtype = jstr(model, "type");
    size_t vocab = t->vocab;
    bool wpm = mtype && strcmp(mtype, "WordPiece") == 0;
    bool bpe = mtype && strcmp(mtype, "BPE") == 0;
    if (!wpm && !bpe)
        return hf_fail(h, TBX_E_UNSUPPORTED, "tokenizer.json", "tokenizer.json: model type "
                       "\"%s\" is not supported (WordPiece, BPE)", mtype ? mtype : "(missing)");
    if (tbx_tokj_kind(t, vocab) != '{')
        return tbx_err(h->err, TBX_E_FORMAT, vocab == TBX_TOKJ_NONE ? TBX_NO_OFFSET : vocab,
                       "tokenizer.json", "tokenizer.json: model.vocab is not an object");
    /* a SentencePiece BPE exported to tokenizer.json (Llama 2, Mistral, TinyLlama: byte
     * fallback, <0xNN> tokens) is llama.cpp's "llama" vocabulary (write_llama_vocab, for
     * llama); written as "gpt2" it would tokenize wrongly, so other architectures refuse it */
    if (bpe && json_is_true(json_object_get(model, "byte_fallback")))
        return hf_fail(h, TBX_E_UNSUPPORTED, "tokenizer.json", "tokenizer.json: a SentencePiece "
                       "BPE (byte_fallback) vocabulary is supported for llama-family models "
                       "(%s), not for %s", spm_rows, h->a->model_type);
    if (!(h->a->tokenizers & (wpm ? TBX_HF_TOK_WORDPIECE : TBX_HF_TOK_BPE)))
        return hf_fail(h, TBX_E_UNSUPPORTED, "tokenizer.json", "tokenizer.json: a %s tokenizer "
                       "for a %s model is not supported", mtype, h->a->model_type);
    /* vocabulary size: the token embedding's rows (check_vocab_rows), every id the tokenizer
     * uses below it; ids without a token are padded. The vocabulary and the added tokens are
     * walked in the text (hf_tokenizer.c), twice: to check every id, then to place each token
     * by its id (a token is kept as the offset of its string in the text). */
    uint64_t nv = h->n_vocab, maxid = 0;
    bool any = false;
    size_t it = vocab, key, val;
    int64_t id;
    char q[96];
    tbx_tokj_buf b1 = {h->al, NULL, 0}, b2 = {h->al, NULL, 0};
    const char *s;
    size_t len;
    while (tbx_tokj_next(t, &it, &key, &val)) {
        if (!tbx_tokj_int(t, val, &id) || id < 0 || id >= (1 << 30)) {
            s = tbx_tokj_str(t, key, &b1, &len);
            tbx_quote_bytes(q, sizeof q, s ? s : "", s ? len : 0, 64);
            tbx_tokj_buf_free(&b1);
            return tbx_err(h->err, TBX_E_FORMAT, val, "tokenizer.json", "tokenizer.json: token "
                           "\"%s\" has a bad id", q);
        }
        if ((uint64_t)id >= maxid) maxid = (uint64_t)id;
        any = true;
    }
    size_t added = tbx_tokj_kind(t, t->added) == '[' ? t->added : TBX_TOKJ_NONE;
    it = added;
    for (size_t i = 0; tbx_tokj_next(t, &it, &key, &val); i++) {
        if (!tbx_tokj_int(t, tbx_tokj_get(t, val, "id"), &id) ||
            tbx_tokj_kind(t, tbx_tokj_get(t, val, "content")) != '"' || id < 0 ||
            id >= (1 << 30))
            return tbx_err(h->err, TBX_E_FORMAT, val, "tokenizer.json", "tokenizer.json: added "
                           "token %zu has no valid id/content", i);
        if ((uint64_t)id >= maxid) maxid = (uint64_t)id;
        any = true;
    }
    if (!any) return hf_fail(h, TBX_E_FORMAT, "tokenizer.json", "tokenizer.json: empty vocabulary");
    tbx_status st = TBX_OK;
    if (maxid >= nv)
        return hf_fail(h, TBX_E_FORMAT, "tokenizer.json", "tokenizer.json uses token id %llu but "
                       "the token embedding (%s) has %llu rows, one per token",
                       (unsigned long long)maxid, embd_name(h), (unsigned long long)nv);
    /* tok_at[id]: offset of the token's string in the text (0: none; the text starts with its
     * '{' or whitespace, never with a string) */
    uint32_t *tok_at = tbx_calloc(h->al, (size_t)nv, sizeof *tok_at);
    tbx_value *types = tbx_val_packed_array(h->al, TBX_V_I32, (size_t)nv);
    tbx_value *list = NULL, *ml = NULL;
    if (!tok_at || !types) { st = tbx_err_nomem(h->err, "vocabulary"); goto done; }
    int32_t *tt = (int32_t *)types->v.a.packed;
    it = vocab;
    while (tbx_tokj_next(t, &it, &key, &val)) {
        tbx_tokj_int(t, val, &id);
        tok_at[id] = (uint32_t)key;
        tt[id] = TT_NORMAL;
    }
    it = added;
    while (tbx_tokj_next(t, &it, &key, &val)) {
        tbx_tokj_int(t, tbx_tokj_get(t, val, "id"), &id);
        tok_at[id] = (uint32_t)tbx_tokj_get(t, val, "content");
        tt[id] = tbx_tokj_true(t, tbx_tokj_get(t, val, "special")) ? TT_CONTROL : TT_USER;
    }
    /* every token is a string of the text (decoded no longer than there), each used once */
    uint64_t blob = (uint64_t)t->n + 16 * nv;
    list = tbx_val_str_array(h->al, (size_t)nv, blob);
    if (!list) { st = tbx_err_nomem(h->err, "vocabulary"); goto done; }
    for (uint64_t i = 0; i < nv; i++) {
        char pad[40];
        if (!tok_at[i]) {
            len = (size_t)snprintf(pad, sizeof pad, "[PAD%llu]", (unsigned long long)i);
            s = pad;
            tt[i] = TT_UNUSED;
        } else if (!(s = tbx_tokj_str(t, tok_at[i], &b1, &len))) {
            st = tbx_err_nomem(h->err, "vocabulary");
            goto done;
        }
        /* llama.cpp's WordPiece vocabulary marks word starts with U+2581 instead of marking
         * continuations with "##" (control tokens stay as they are) */
        const char *prefix = "";
        if (wpm && tt[i] != TT_CONTROL) {
            if (len >= 2 && s[0] == '#' && s[1] == '#') { s += 2; len -= 2; }
            else prefix = "\xe2\x96\x81";
        }
        size_t pl = strlen(prefix);
        char *d = tbx_val_str_array_add(list, pl + len);
        if (!d) { st = tbx_err_nomem(h->err, "vocabulary"); goto done; }
        memcpy(d, prefix, pl);
        memcpy(d + pl, s, len);
    }
    tbx_val_str_array_done(list);
    tbx_free(h->al, tok_at, (size_t)nv * sizeof *tok_at);
    tok_at = NULL;
    if ((st = put_str(h, "tokenizer.ggml.model", wpm ? "bert" : "gpt2")) != TBX_OK) goto done;
    if ((st = put_normalizer(h)) != TBX_OK) goto done;
    /* ModernBERT's GPT-2-style BPE is llama.cpp's "modern-bert" (ARCH_PRE_MODERN_BERT) */
    const bool modern = (h->a->flags & ARCH_PRE_MODERN_BERT) && bpe &&
                        !strcmp(bpe_pre_name(h), PRE_GPT2);
    if ((st = put_str(h, "tokenizer.ggml.pre",
                      modern ? PRE_MODERN_BERT : bpe ? bpe_pre_name(h) : PRE_DEFAULT)) != TBX_OK)
        goto done;
    st = put_lent(h, "tokenizer.ggml.tokens", &list);
    if (st == TBX_OK && (h->a->flags & ARCH_TT_COUNT)) {
        /* type_vocab_size (check_hparams compared it with token_types' rows), else those
         * rows, else 1 */
        uint64_t n = 1;
        for (size_t i = 0; i < h->nout; i++)
            if (!strcmp(h->out[i].name, "token_types.weight")) n = h->out[i].rows;
        st = cfg_u64(h, "type_vocab_size", false, &n);
        if (st == TBX_E_NOT_FOUND) st = TBX_OK;
        if (st == TBX_OK) st = put_u32(h, "tokenizer.ggml.token_type_count", n);
    }
    if (st == TBX_OK) st = put_lent(h, "tokenizer.ggml.token_type", &types);
    if (st == TBX_OK && bpe) {
        /* merges: "a b" strings, or ["a", "b"] pairs (tokenizers >= 0.20 writes those) */
        size_t merges = tbx_tokj_kind(t, t->merges) == '[' ? t->merges : TBX_TOKJ_NONE, nm = 0;
        it = merges;
        while (tbx_tokj_next(t, &it, &key, &val)) {
            size_t it2 = val, k2, v2, parts = 0;
            bool pair = tbx_tokj_kind(t, val) == '[';
            while (pair && tbx_tokj_next(t, &it2, &k2, &v2))
                pair = ++parts <= 2 && tbx_tokj_kind(t, v2) == '"';
            if (tbx_tokj_kind(t, val) != '"' && !(pair && parts == 2)) {
                st = tbx_err(h->err, TBX_E_FORMAT, val, "tokenizer.json", "tokenizer.json: "
                             "merge %zu is neither \"a b\" nor [\"a\", \"b\"]", nm);
                goto done;
            }
            nm++;
        }
        /* a merge is its text (a pair: both parts, a space in one taking 2 bytes) */
        ml = tbx_val_str_array(h->al, nm, 2 * (uint64_t)t->n + 2 * (uint64_t)nm);
        if (!ml) { st = tbx_err_nomem(h->err, "merges"); goto done; }
        it = merges;
        for (size_t i = 0; st == TBX_OK && tbx_tokj_next(t, &it, &key, &val); i++) {
            if (tbx_tokj_kind(t, val) == '"') {
                if (!(s = tbx_tokj_str(t, val, &b1, &len))) {
                    st = tbx_err_nomem(h->err, "merges");
                    break;
                }
                char *d = tbx_val_str_array_add(ml, len);
                if (!d) st = tbx_err_nomem(h->err, "merges");
                else memcpy(d, s, len);
                continue;
            }
            /* a pair: "a b", a space inside a part written as U+0120 (as llama.cpp expects) */
            char tmp[1024];
            size_t n = 0, it2 = val, k2, v2;
            for (int part = 0; part < 2 && st == TBX_OK; part++) {
                tbx_tokj_next(t, &it2, &k2, &v2);
                size_t pl;
                const char *p = tbx_tokj_str(t, v2, &b2, &pl);
                if (!p) { st = tbx_err_nomem(h->err, "merges"); break; }
                if (part) tmp[n++] = ' ';
                for (size_t c = 0; c < pl; c++) {
                    if (n + 3 > sizeof tmp) {
                        st = tbx_err(h->err, TBX_E_LIMIT, val, "tokenizer.json",
                                     "merge %zu too long", i);
                        break;
                    }
                    if (p[c] == ' ') { tmp[n++] = (char)0xC4; tmp[n++] = (char)0xA0; }
                    else tmp[n++] = p[c];
                }
            }
            if (st != TBX_OK) break;
            char *d = tbx_val_str_array_add(ml, n);
            if (!d) st = tbx_err_nomem(h->err, "merges");
            else memcpy(d, tmp, n);
        }
        if (st == TBX_OK) {
            tbx_val_str_array_done(ml);
            st = put_lent(h, "tokenizer.ggml.merges", &ml);
        }
    }
    if (st == TBX_OK) st = write_special(h);
done:
    tbx_tokj_buf_free(&b1);
    tbx_tokj_buf_free(&b2);
    tbx_val_free(list);
    tbx_val_free(types);
    tbx_val_free(ml);
    tbx_free(h->al, tok_at, tok_at ? (size_t)nv * sizeof *tok_at : 0);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Tokenizer: llama.cpp's "llama" (SentencePiece) vocabulary, from tokenizer.model or from a   */
/* SentencePiece BPE tokenizer.json (byte_fallback: Llama 2, Mistral, TinyLlama)               */
/* ------------------------------------------------------------------------------------------ */
/* Added tokens llama.cpp's converter makes control tokens even when they are not marked special
 * (its does_token_look_special). */
static bool looks_special(const char *t) {
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") ||
        !strcmp(t, "[@BOS@]"))
        return true;
    if (n >= 3 && !memcmp(t, "<|", 2) && !memcmp(t + n - 2, "|>", 2)) return true;
    /* the same with U+FF5C (a fullwidth vertical bar) */
    if (n >= 5 && !memcmp(t, "<\xef\xbd\x9c", 4) && !memcmp(t + n - 4, "\xef\xbd\x9c>", 4))
        return true;
    return n >= 8 && !memcmp(t, "<unused", 7) && t[n - 1] == '>';
}

typedef struct lv_tok {
    const char *s;      /* the token's bytes; NULL: `at`, or "[PAD<id>]" when at is 0 */
    uint32_t len : 31;  /* of s */
    uint32_t spaces : 1;/* write U+2581 as ' ' (a user-defined added token, as llama.cpp) */
    uint32_t at;        /* s NULL: offset of the token's string in tokenizer.json (0: none) */
} lv_tok;

static bool lv_has(const lv_tok *t) { return t->s || t->at; }

/* Sets *t to the len bytes at s (refused past 2^31 - 1 bytes, lv_tok's room). */
static tbx_status lv_set(hf *h, lv_tok *t, const char *s, size_t len, bool spaces) {
    if (len > 0x7FFFFFFFu)
        return hf_fail(h, TBX_E_LIMIT, "tokenizer", "a token of %zu bytes (at most 2^31 - 1)",
                       len);
    t->s = s;
    t->len = (uint32_t)len & 0x7FFFFFFFu;
    t->spaces = spaces;
    t->at = 0;
    return TBX_OK;
}

/* A "<0xHH>" byte token? */
static bool is_byte_token(const char *s, size_t n) {
    return n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && isxdigit((unsigned char)s[3]) &&
           isxdigit((unsigned char)s[4]) && s[5] == '>';
}

/* Prefixes the message of a tokenizer.model parse error with the file's name. */
static tbx_status spm_err(hf *h, tbx_status st) {
    char msg[sizeof h->err->message];
    snprintf(msg, sizeof msg, "tokenizer.model: %.300s", h->err->message);
    memcpy(h->err->message, msg, sizeof msg);
    return st;
}

/* The "llama" vocabulary from the spm_len bytes of tokenizer.model at spm (freed here), or
 * from tokenizer.json when spm is NULL. */
static tbx_status write_llama_vocab(hf *h, uint8_t *spm, size_t spm_len) {
    tbx_status st = TBX_OK;
    const bool from_spm = spm != NULL;
    uint8_t *buf = spm;
    size_t blen = spm_len;
    tbx_spm_vocab sv = {0};
    lv_tok *tk = NULL;
    tbx_value *scores = NULL, *types = NULL, *list = NULL;
    uint64_t nv = 0, ntok = 0;   /* nv: vocabulary size written; ntok: tokens of the source */
    json_t *at = NULL; /* added_tokens.json */
    const tbx_tokj *t = &h->tj;
    size_t vocab = TBX_TOKJ_NONE, added = TBX_TOKJ_NONE, it, key, val;
    int64_t id;
    tbx_tokj_buf b = {h->al, NULL, 0};
    if (from_spm) {
        st = tbx_spm_parse(buf, blen, h->al, HF_VOCAB_MAX, &sv, h->err);
        if (st != TBX_OK && st != TBX_E_NOMEM) st = spm_err(h, st);
        ntok = sv.n;
    } else {
        /* tokenizer.json: model.vocab holds ids 0..n-1; added tokens past them follow in
         * order (both walked in the text, hf_tokenizer.c) */
        vocab = t->vocab;
        added = tbx_tokj_kind(t, t->added) == '[' ? t->added : TBX_TOKJ_NONE;
        size_t nb = tbx_tokj_kind(t, vocab) == '{' ? tbx_tokj_count(t, vocab) : 0;
        if (nb == 0)
            return tbx_err(h->err, TBX_E_FORMAT, vocab == TBX_TOKJ_NONE ? TBX_NO_OFFSET : vocab,
                           "tokenizer.json", "tokenizer.json: model.vocab is not a non-empty "
                           "object");
        ntok = nb;
        it = added;
        for (size_t k = 0; tbx_tokj_next(t, &it, &key, &val); k++) {
            if (!tbx_tokj_int(t, tbx_tokj_get(t, val, "id"), &id) || id < 0 ||
                tbx_tokj_kind(t, tbx_tokj_get(t, val, "content")) != '"')
                return tbx_err(h->err, TBX_E_FORMAT, val, "tokenizer.json", "tokenizer.json: "
                               "added token %zu has no valid id/content", k);
            if ((uint64_t)id >= nb) ntok++;
        }
        if (ntok > HF_VOCAB_MAX)
            return hf_fail(h, TBX_E_LIMIT, "tokenizer.json", "tokenizer.json: %llu tokens (at "
                           "most %llu)", (unsigned long long)ntok,
                           (unsigned long long)HF_VOCAB_MAX);
    }
    /* vocabulary size: the token embedding's rows (check_vocab_rows); tokenizer.model pieces
     * past them are left out, as convert_hf_to_gguf.py leaves out those past vocab_size */
    nv = h->n_vocab;
    if (st == TBX_OK && !from_spm && ntok > nv)
        st = hf_fail(h, TBX_E_FORMAT, "tokenizer.json", "tokenizer.json has %llu tokens but the "
                     "token embedding (%s) has %llu rows, one per token",
                     (unsigned long long)ntok, embd_name(h), (unsigned long long)nv);
    if (st == TBX_OK) {
        tk = tbx_calloc(h->al, (size_t)nv, sizeof *tk);
        scores = tbx_val_packed_array(h->al, TBX_V_F32, (size_t)nv);
        types = tbx_val_packed_array(h->al, TBX_V_I32, (size_t)nv);
        if (!tk || !scores || !types) st = tbx_err_nomem(h->err, "vocabulary");
    }
    if (st != TBX_OK) goto done;
    float *sc = (float *)scores->v.a.packed;
    int32_t *tt = (int32_t *)types->v.a.packed;
    /* unfilled ids: "[PAD<id>]", unused (as convert_hf_to_gguf.py) */
    for (uint64_t i = 0; i < nv; i++) { sc[i] = -10000.0f; tt[i] = TT_UNUSED; }
    if (from_spm) {
        /* _create_vocab_sentencepiece: pieces beyond vocab_size are dropped; a user-defined
         * piece stays "normal" (its checks are unknown, control, unused, byte) */
        for (size_t i = 0; i < sv.n && i < nv; i++) {
            const tbx_spm_piece *p = &sv.pieces[i];
            if ((st = lv_set(h, &tk[i], p->text, p->len, false)) != TBX_OK) goto done;
            sc[i] = p->score;
            tt[i] = p->type == TBX_SPM_UNKNOWN   ? TT_UNKNOWN
                  : p->type == TBX_SPM_CONTROL ? TT_CONTROL
                  : p->type == TBX_SPM_UNUSED  ? TT_UNUSED
                  : p->type == TBX_SPM_BYTE    ? TT_BYTE
                                               : TT_NORMAL;
        }
        /* added_tokens.json {"text": id}: user-defined, score -1000 */
        if ((st = load_json(h, "added_tokens.json", false, 0, &at)) != TBX_OK) goto done;
        const char *key;
        json_t *val;
        json_object_foreach(at, key, val) {
            if (!json_is_integer(val) || json_integer_value(val) < 0) {
                st = hf_fail(h, TBX_E_FORMAT, "added_tokens.json", "added_tokens.json: \"%s\" "
                             "has no valid id", key);
                goto done;
            }
            uint64_t aid = (uint64_t)json_integer_value(val);
            if (aid >= nv) continue; /* llama.cpp ignores ids out of range */
            if ((st = lv_set(h, &tk[aid], key, strlen(key), false)) != TBX_OK) goto done;
            sc[aid] = -1000.0f;
            tt[aid] = TT_USER;
        }
        /* tokenizer_config.json added_tokens_decoder {"id": {"content", "special"}} */
        json_t *atd = h->tokcfg ? json_object_get(h->tokcfg, "added_tokens_decoder") : NULL;
        json_object_foreach(atd, key, val) {
            char *end = NULL;
            unsigned long long did = strtoull(key, &end, 10);
            const char *c = jstr(val, "content");
            if (!*key || *end || !c) {
                st = hf_fail(h, TBX_E_FORMAT, "tokenizer_config.json", "tokenizer_config.json: "
                             "added_tokens_decoder entry \"%s\" has no id/content", key);
                goto done;
            }
            if (did >= nv) continue;
            /* ARCH_SPM_ADDED (Phi3MiniModel): the special flag alone, the text as it is */
            const bool phi = (h->a->flags & ARCH_SPM_ADDED) != 0;
            bool ctl = json_is_true(json_object_get(val, "special")) || (!phi && looks_special(c));
            if ((st = lv_set(h, &tk[did], c, strlen(c), !ctl && !phi)) != TBX_OK) goto done;
            sc[did] = -1000.0f;
            tt[did] = ctl ? TT_CONTROL : TT_USER;
        }
        /* ARCH_SPM_ADDED: then tokenizer.json's added tokens, the same way (ids past the
         * vocabulary left out) */
        it = (h->a->flags & ARCH_SPM_ADDED) && h->tok && tbx_tokj_kind(t, t->added) == '['
                 ? t->added : TBX_TOKJ_NONE;
        size_t tkey, tval;
        for (size_t k = 0; tbx_tokj_next(t, &it, &tkey, &tval); k++) {
            size_t cat = tbx_tokj_get(t, tval, "content");
            if (!tbx_tokj_int(t, tbx_tokj_get(t, tval, "id"), &id) || id < 0 ||
                tbx_tokj_kind(t, cat) != '"') {
                st = tbx_err(h->err, TBX_E_FORMAT, tval, "tokenizer.json", "tokenizer.json: "
                             "added token %zu has no valid id/content", k);
                goto done;
            }
            if ((uint64_t)id >= nv) continue;
            tk[id].s = NULL;
            tk[id].len = 0;
            tk[id].spaces = 0;
            tk[id].at = (uint32_t)cat;
            sc[id] = -1000.0f;
            tt[id] = tbx_tokj_true(t, tbx_tokj_get(t, tval, "special")) ? TT_CONTROL : TT_USER;
        }
    } else {
        /* gguf-py's LlamaHfVocab: base tokens typed byte (<0xHH>), control (a special token)
         * or normal; added tokens past the base control when special, else user-defined.
         * Scores: llama.cpp writes -1000 for every token, which leaves its SentencePiece
         * tokenizer no merge priorities (it then merges left to right). A SentencePiece or
         * tokenizers BPE numbers its tokens in merge order, so -id is written instead: the
         * same priorities as tokenizer.model's scores. */
        uint64_t nb = tbx_tokj_count(t, vocab);
        char q[96];
        size_t len;
        const char *s;
        it = vocab;
        while (tbx_tokj_next(t, &it, &key, &val)) {
            if (!tbx_tokj_int(t, val, &id)) id = -1;
            if (id < 0 || (uint64_t)id >= nb || lv_has(&tk[id])) {
                s = tbx_tokj_str(t, key, &b, &len);
                tbx_quote_bytes(q, sizeof q, s ? s : "", s ? len : 0, 64);
                st = tbx_err(h->err, TBX_E_FORMAT, val, "tokenizer.json", "tokenizer.json: "
                             "token \"%s\" has id %lld (the vocabulary's ids must be 0..%llu, "
                             "each once)", q, (long long)id, (unsigned long long)nb - 1);
                goto done;
            }
            if (!(s = tbx_tokj_str(t, key, &b, &len))) {
                st = tbx_err_nomem(h->err, "vocabulary");
                goto done;
            }
            tk[id].at = (uint32_t)key;
            tt[id] = is_byte_token(s, len) ? TT_BYTE : TT_NORMAL;
        }
        const char *named[7];
        static const char *const TYP[7] = {"bos", "eos", "unk", "pad", "sep", "cls", "mask"};
        for (int k = 0; k < 7; k++) named[k] = tokcfg_token(h, TYP[k]);
        it = added;
        while (tbx_tokj_next(t, &it, &key, &val)) {
            tbx_tokj_int(t, tbx_tokj_get(t, val, "id"), &id);
            size_t cat = tbx_tokj_get(t, val, "content");
            bool special = tbx_tokj_true(t, tbx_tokj_get(t, val, "special"));
            if (!(s = tbx_tokj_str(t, cat, &b, &len))) {
                st = tbx_err_nomem(h->err, "vocabulary");
                goto done;
            }
            for (int j = 0; j < 7 && !special; j++)
                special = named[j] && strlen(named[j]) == len && !memcmp(named[j], s, len);
            if ((uint64_t)id < nb) {
                if (special && tt[id] != TT_BYTE) tt[id] = TT_CONTROL;
                continue;
            }
            if ((uint64_t)id >= ntok || lv_has(&tk[id])) {
                tbx_quote_bytes(q, sizeof q, s, len, 64);
                st = tbx_err(h->err, TBX_E_FORMAT, val, "tokenizer.json", "tokenizer.json: added "
                             "token \"%s\" has id %llu (added tokens past the vocabulary must be "
                             "numbered %llu..%llu, each once)", q, (unsigned long long)id,
                             (unsigned long long)nb, (unsigned long long)ntok - 1);
                goto done;
            }
            tk[id].at = (uint32_t)cat;
            tt[id] = special ? TT_CONTROL : TT_USER;
        }
        for (uint64_t i = 0; i < ntok; i++) sc[i] = -(float)i;
    }
    /* the strings (those of tokenizer.json: strings of its text, each used once) */
    uint64_t blob = !from_spm || ((h->a->flags & ARCH_SPM_ADDED) && h->tok) ? (uint64_t)t->n : 0;
    for (uint64_t i = 0; i < nv; i++) blob += (tk[i].s ? tk[i].len : 0) + 24;
    list = tbx_val_str_array(h->al, (size_t)nv, blob);
    if (!list) { st = tbx_err_nomem(h->err, "vocabulary"); goto done; }
    for (uint64_t i = 0; i < nv; i++) {
        char pad[40];
        const char *s = tk[i].s;
        size_t len = tk[i].len;
        if (!s && tk[i].at) {
            if (!(s = tbx_tokj_str(t, tk[i].at, &b, &len))) {
                st = tbx_err_nomem(h->err, "vocabulary");
                goto done;
            }
        } else if (!s) {
            len = (size_t)snprintf(pad, sizeof pad, "[PAD%llu]", (unsigned long long)i);
            s = pad;
        }
        /* a user-defined added token's U+2581 becomes a space (llama.cpp pre-normalizes) */
        size_t out = len;
        for (size_t c = 0; tk[i].spaces && c + 3 <= len; c++)
            if (!memcmp(s + c, "\xe2\x96\x81", 3)) { out -= 2; c += 2; }
        char *d = tbx_val_str_array_add(list, out);
        if (!d) { st = tbx_err_nomem(h->err, "vocabulary"); goto done; }
        for (size_t c = 0, o = 0; c < len; c++) {
            if (tk[i].spaces && c + 3 <= len && !memcmp(s + c, "\xe2\x96\x81", 3)) {
                d[o++] = ' ';
                c += 2;
            } else {
                d[o++] = s[c];
            }
        }
    }
    tbx_val_str_array_done(list);
    if ((st = put_str(h, "tokenizer.ggml.model", "llama")) == TBX_OK &&
        (st = put_str(h, "tokenizer.ggml.pre", PRE_DEFAULT)) == TBX_OK &&
        (st = put_lent(h, "tokenizer.ggml.tokens", &list)) == TBX_OK &&
        (st = put_lent(h, "tokenizer.ggml.scores", &scores)) == TBX_OK &&
        (st = put_lent(h, "tokenizer.ggml.token_type", &types)) == TBX_OK)
        st = write_special(h);
done:
    tbx_tokj_buf_free(&b);
    json_decref(at);
    tbx_val_free(list);
    tbx_val_free(scores);
    tbx_val_free(types);
    tbx_free(h->al, tk, tk ? (size_t)nv * sizeof *tk : 0);
    tbx_spm_free(&sv, h->al);
    tbx_free(h->al, buf, buf ? (blen ? blen : 1) : 0);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Tokenizer: llama.cpp's "t5" (Unigram) vocabulary from XLM-RoBERTa's sentencepiece.bpe.model  */
/* ------------------------------------------------------------------------------------------ */
/* As convert_hf_to_gguf.py's _xlmroberta_set_vocab: the pieces of a Unigram model with their
 * scores and types, realigned to the fairseq ids transformers gives them (<s>, <pad>, </s>,
 * <unk> at 0..3, piece p >= 3 at id p + 1; the ids past the pieces "[PAD<i>]", unused), the
 * normalizer's add_dummy_prefix, remove_extra_whitespaces and precompiled_charsmap, then the
 * special tokens of tokenizer.json / tokenizer_config.json. */
#define UGM_FILE "sentencepiece.bpe.model"

/* The bytes of standard base64 text b64 (n characters, '=' padding at the end only) into
 * out (at least n / 4 * 3 bytes): their count, or SIZE_MAX for text that is no base64. */
static size_t b64_decode(const char *b64, size_t n, uint8_t *out) {
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    size_t pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)b64[i];
        int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
              : c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
        if (c == '=') { pad++; continue; }
        if (v < 0 || pad) return SIZE_MAX;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (n % 4 || pad > 2) return SIZE_MAX;
    return o;
}

/* tokenizer.json's precompiled_charsmap: the normalizer's, or that of a Precompiled member of
 * a Sequence normalizer (transformers 4 wrote XLM-R's as Precompiled then a Replace of space
 * runs; llama.cpp's converter reads only the first form); NULL when there is none. */
static json_t *ugm_charsmap_text(hf *h) {
    json_t *n = json_object_get(h->tok, "normalizer");
    json_t *c = json_is_object(n) ? json_object_get(n, "precompiled_charsmap") : NULL;
    if (json_is_string(c)) return c;
    const char *nt = jstr(n, "type");
    json_t *list = nt && !strcmp(nt, "Sequence") ? json_object_get(n, "normalizers") : NULL;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        const char *et = jstr(e, "type");
        c = json_object_get(e, "precompiled_charsmap");
        if (et && !strcmp(et, "Precompiled") && json_is_string(c)) return c;
    }
    return NULL;
}

/* Does the component `c` of tokenizer.json (a normalizer or pre-tokenizer), or a member of it
 * when it is a Sequence, satisfy `is`? */
static bool ugm_any(json_t *c, const char *list, bool (*is)(json_t *)) {
    if (!json_is_object(c)) return false;
    if (is(c)) return true;
    const char *ct = jstr(c, "type");
    json_t *l = ct && !strcmp(ct, "Sequence") ? json_object_get(c, list) : NULL, *e;
    size_t i;
    json_array_foreach(l, i, e) if (is(e)) return true;
    return false;
}
static bool ugm_ws_split(json_t *c) {
    const char *ct = jstr(c, "type");
    return ct && !strcmp(ct, "WhitespaceSplit");
}
static bool ugm_space_runs(json_t *c) {
    const char *ct = jstr(c, "type");
    json_t *pat = json_object_get(c, "pattern");
    const char *re = jstr(pat, "Regex");
    return ct && !strcmp(ct, "Replace") && re && !strcmp(re, " {2,}");
}

/* The special-token strings of tokenizer_config.json, as transformers' all_special_tokens:
 * bos/eos/unk/sep/pad/cls/mask_token (a string or {"content": ...}; XLMRobertaTokenizer's
 * defaults when the key is absent), then extra_special_tokens / additional_special_tokens. */
#define UGM_SPECIAL_MAX 64
static size_t ugm_special_names(hf *h, const char **names) {
    static const char *const NAMED[7][2] = {
        {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"},
        {"sep_token", "</s>"}, {"pad_token", "<pad>"}, {"cls_token", "<s>"},
        {"mask_token", "<mask>"}};
    size_t n = 0;
    for (size_t i = 0; i < 7; i++) {
        json_t *e = h->tokcfg ? json_object_get(h->tokcfg, NAMED[i][0]) : NULL;
        const char *s = !e ? NAMED[i][1] : json_is_string(e) ? json_string_value(e)
                      : jstr(e, "content");
        if (s) names[n++] = s;
    }
    static const char *const EXTRA[2] = {"extra_special_tokens", "additional_special_tokens"};
    for (size_t k = 0; k < 2 && h->tokcfg; k++) {
        json_t *list = json_object_get(h->tokcfg, EXTRA[k]), *e;
        size_t i;
        json_array_foreach(list, i, e) {
            const char *s = json_is_string(e) ? json_string_value(e) : jstr(e, "content");
            if (s && n < UGM_SPECIAL_MAX) names[n++] = s;
        }
    }
    return n;
}

/* As _xlmroberta_set_vocab's tokenizer.json branch (no sentencepiece.bpe.model; the directory
 * transformers saves): the Unigram pieces of model.vocab at their own ids (tokenizer.json's
 * ids are transformers', no realignment), each shown as transformers' id_to_token shows it
 * (an added token's content over the piece), with model.vocab's score; types: the unknown
 * token (tokenizer_config's unk_token among the added tokens, else model.unk_id, else 3),
 * control for transformers' special tokens, user-defined for the other added tokens, normal
 * for the rest; ids past model.vocab "[PAD<i>]" (unused, -10000). add_space_prefix is
 * tokenizer_config's add_prefix_space (XLMRobertaTokenizer's default true), the charsmap the
 * normalizer's; remove_extra_whitespaces differs from the converter's (below). */
static tbx_status write_ugm_vocab_json(hf *h) {
    const tbx_tokj *t = &h->tj;
    const uint64_t nv = h->n_vocab;
    size_t vocab = t->vocab, it, key, val;
    if (tbx_tokj_kind(t, vocab) != '[')
        return tbx_err(h->err, TBX_E_FORMAT, vocab == TBX_TOKJ_NONE ? TBX_NO_OFFSET : vocab,
                       "tokenizer.json", "tokenizer.json: the Unigram model.vocab is not an "
                       "array of [piece, score]");
    const size_t n = tbx_tokj_count(t, vocab);
    if (n < 1 || n > nv)
        return hf_fail(h, TBX_E_FORMAT, "tokenizer.json", "tokenizer.json has %zu Unigram "
                       "pieces but the token embedding (%s) has %llu rows (1 .. rows pieces)", n,
                       embd_name(h), (unsigned long long)nv);
    const char *names[UGM_SPECIAL_MAX];
    const size_t nnames = ugm_special_names(h, names);
    int64_t spid[UGM_SPECIAL_MAX];
    /* the unknown token: tokenizer_config's unk_token among the added tokens, else
     * model.unk_id (null: none), else 3 */
    int64_t unk = 3;
    json_t *uj = json_object_get(json_object_get(h->tok, "model"), "unk_id");
    if (json_is_null(uj)) unk = -1;
    else if (json_is_integer(uj)) unk = json_integer_value(uj);
    else if (uj) return hf_fail(h, TBX_E_FORMAT, "tokenizer.json", "tokenizer.json: model.unk_id "
                                "is not an integer");
    tbx_status st = TBX_OK;
    {
        int64_t a = -1;
        if ((st = added_id(h, tokcfg_token(h, "unk"), &a)) != TBX_OK) return st;
        if (a >= 0) unk = a;
    }
    for (size_t i = 0; i < nnames; i++)
        if ((st = added_id(h, names[i], &spid[i])) != TBX_OK) return st;
    uint32_t *tok_at = tbx_calloc(h->al, n, sizeof *tok_at);
    uint8_t *added = tbx_calloc(h->al, n, 1);
    tbx_value *list = NULL, *scores = NULL, *types = NULL, *cmap = NULL;
    uint8_t *cm = NULL;
    size_t cml = 0, cmcap = 0;
    tbx_tokj_buf b = {h->al, NULL, 0};
    scores = tbx_val_packed_array(h->al, TBX_V_F32, (size_t)nv);
    types = tbx_val_packed_array(h->al, TBX_V_I32, (size_t)nv);
    list = tbx_val_str_array(h->al, (size_t)nv, (uint64_t)t->n + 24 * nv);
    if (!tok_at || !added || !scores || !types || !list) {
        st = tbx_err_nomem(h->err, "vocabulary");
        goto done;
    }
    float *sc = (float *)scores->v.a.packed;
    int32_t *tt = (int32_t *)types->v.a.packed;
    /* the pieces: [string, number] each; a special name not among the added tokens is looked
     * up here (transformers' token_to_id: the added tokens first, then the model's) */
    it = vocab;
    for (size_t i = 0; tbx_tokj_next(t, &it, &key, &val); i++) {
        size_t it2 = val, k2, p0 = TBX_TOKJ_NONE, p1 = TBX_TOKJ_NONE, parts = 0, len;
        size_t v2;
        while (tbx_tokj_next(t, &it2, &k2, &v2)) {
            if (parts == 0) p0 = v2;
            else if (parts == 1) p1 = v2;
            parts++;
        }
        double d;
        if (tbx_tokj_kind(t, val) != '[' || parts != 2 || tbx_tokj_kind(t, p0) != '"' ||
            !tbx_tokj_real(t, p1, &d)) {
            st = tbx_err(h->err, TBX_E_FORMAT, val, "tokenizer.json", "tokenizer.json: Unigram "
                         "piece %zu is not [piece, score]", i);
            goto done;
        }
        tok_at[i] = (uint32_t)p0;
        sc[i] = (float)d;
        tt[i] = TT_NORMAL;
        const char *s = tbx_tokj_str(t, p0, &b, &len);
        if (!s) { st = tbx_err_nomem(h->err, "vocabulary"); goto done; }
        for (size_t k = 0; k < nnames; k++)
            if (spid[k] < 0 && strlen(names[k]) == len && memcmp(names[k], s, len) == 0)
                spid[k] = (int64_t)i;
    }
    /* the added tokens: their content shown for their id, user-defined */
    it = tbx_tokj_kind(t, t->added) == '[' ? t->added : TBX_TOKJ_NONE;
    while (tbx_tokj_next(t, &it, &key, &val)) {
        int64_t id;
        size_t c = tbx_tokj_get(t, val, "content");
        if (!tbx_tokj_int(t, tbx_tokj_get(t, val, "id"), &id) || tbx_tokj_kind(t, c) != '"' ||
            id < 0)
            continue; /* not an added token transformers would load */
        if ((uint64_t)id < n) {
            tok_at[id] = (uint32_t)c;
            added[id] = 1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if ((int64_t)i == unk) { tt[i] = TT_UNKNOWN; continue; }
        bool special = false;
        for (size_t k = 0; k < nnames && !special; k++) special = spid[k] == (int64_t)i;
        tt[i] = special ? TT_CONTROL : added[i] ? TT_USER : TT_NORMAL;
    }
    for (uint64_t id = 0; id < nv; id++) {
        const char *s;
        size_t len;
        char pad[40];
        if (id < n) {
            if (!(s = tbx_tokj_str(t, tok_at[id], &b, &len))) {
                st = tbx_err_nomem(h->err, "vocabulary");
                goto done;
            }
        } else {
            len = (size_t)snprintf(pad, sizeof pad, "[PAD%llu]", (unsigned long long)id);
            s = pad;
            sc[id] = -10000.0f;
            tt[id] = TT_UNUSED;
        }
        char *d = tbx_val_str_array_add(list, len);
        if (!d) { st = tbx_err_nomem(h->err, "vocabulary"); goto done; }
        memcpy(d, s, len);
    }
    tbx_val_str_array_done(list);
    json_t *cj = ugm_charsmap_text(h);
    if (cj) {
        size_t tl = json_string_length(cj);
        cmcap = tl / 4 * 3 + 1;
        if (!(cm = tbx_malloc(h->al, cmcap))) {
            st = tbx_err_nomem(h->err, "precompiled_charsmap");
            goto done;
        }
        if ((cml = b64_decode(json_string_value(cj), tl, cm)) == SIZE_MAX) {
            cml = 0;
            st = hf_fail(h, TBX_E_FORMAT, "tokenizer.json", "tokenizer.json: the normalizer's "
                         "precompiled_charsmap is not base64");
            goto done;
        }
    }
    json_t *ap = h->tokcfg ? json_object_get(h->tokcfg, "add_prefix_space") : NULL;
    /* remove_extra_whitespaces: true when tokenizer.json drops runs of whitespace itself (a
     * WhitespaceSplit pre-tokenizer, transformers 5's XLM-R form, or a Replace of " {2,}" in
     * the normalizer, transformers 4's), as SentencePiece's remove_extra_whitespaces does in
     * the .model the file was made from. llama.cpp's converter writes tokenizer_config's
     * clean_up_tokenization_spaces there, a decoding setting (false for transformers 5's
     * files): with it llama.cpp keeps "  " runs as extra "\u2581" tokens, which transformers'
     * tokenizer does not give (test_hf_runtime.py's xlm-roberta_tj family) */
    const bool rmws =
        ugm_any(json_object_get(h->tok, "pre_tokenizer"), "pretokenizers", ugm_ws_split) ||
        ugm_any(json_object_get(h->tok, "normalizer"), "normalizers", ugm_space_runs);
    uint64_t ntt = 1; /* hparams.get("type_vocab_size", 1) */
    if ((st = cfg_u64(h, "type_vocab_size", false, &ntt)) == TBX_E_NOT_FOUND) st = TBX_OK;
    if (st == TBX_OK && (st = put_str(h, "tokenizer.ggml.model", "t5")) == TBX_OK &&
        (st = put_str(h, "tokenizer.ggml.pre", PRE_DEFAULT)) == TBX_OK)
        st = put_lent(h, "tokenizer.ggml.tokens", &list);
    if (st == TBX_OK) st = put_lent(h, "tokenizer.ggml.scores", &scores);
    if (st == TBX_OK) st = put_lent(h, "tokenizer.ggml.token_type", &types);
    if (st == TBX_OK)
        st = put(h, "tokenizer.ggml.add_space_prefix",
                 tbx_value_new_bool(json_is_boolean(ap) ? json_is_true(ap) : 1));
    if (st == TBX_OK) st = put_u32(h, "tokenizer.ggml.token_type_count", ntt);
    if (st == TBX_OK)
        st = put(h, "tokenizer.ggml.remove_extra_whitespaces",
                 tbx_value_new_bool(rmws));
    if (st == TBX_OK && cml) {
        if (!(cmap = tbx_val_packed_array(h->al, TBX_V_U8, cml)))
            st = tbx_err_nomem(h->err, "precompiled_charsmap");
        else {
            memcpy(cmap->v.a.packed, cm, cml);
            st = put_lent(h, "tokenizer.ggml.precompiled_charsmap", &cmap);
        }
    }
    if (st == TBX_OK) st = write_special(h);
done:
    tbx_tokj_buf_free(&b);
    tbx_val_free(list);
    tbx_val_free(scores);
    tbx_val_free(types);
    tbx_val_free(cmap);
    tbx_free(h->al, cm, cmcap);
    tbx_free(h->al, tok_at, tok_at ? n * sizeof *tok_at : 0);
    tbx_free(h->al, added, added ? n : 0);
    return st;
}

static tbx_status write_ugm_vocab(hf *h) {
    int64_t si = tbx_file_find_section(h->in, UGM_FILE);
    if (si < 0) {
        const char *mt = jstr(h->tok ? json_object_get(h->tok, "model") : NULL, "type");
        if (mt && strcmp(mt, "Unigram") == 0) return write_ugm_vocab_json(h);
        return hf_fail(h, TBX_E_UNSUPPORTED, UGM_FILE, "%s: the model has neither %s nor a "
                       "Unigram tokenizer.json (model type \"%s\")", h->a->model_type, UGM_FILE,
                       mt ? mt : h->tok ? "(missing)" : "no tokenizer.json");
    }
    void *raw = NULL;
    size_t blen = 0;
    tbx_spm_vocab sv = {0};
    tbx_value *list = NULL, *scores = NULL, *types = NULL, *cmap = NULL;
    tbx_status st = tbx_section_load_(h->in, (uint64_t)si, &raw, &blen, h->err);
    if (st != TBX_OK) return st;
    st = tbx_spm_parse_specs(raw, blen, h->al, HF_VOCAB_MAX, &sv, h->err);
    if (st != TBX_OK && st != TBX_E_NOMEM) {
        char msg[sizeof h->err->message];
        snprintf(msg, sizeof msg, UGM_FILE ": %.280s", h->err->message);
        memcpy(h->err->message, msg, sizeof msg);
    }
    const uint64_t nv = h->n_vocab;
    if (st == TBX_OK && sv.model_type != TBX_SPM_UNIGRAM)
        st = hf_fail(h, TBX_E_UNSUPPORTED, UGM_FILE, UGM_FILE ": model type %d, not a Unigram "
                     "model (1)", sv.model_type);
    /* the vocabulary is max(vocab_size, pieces) in the converter; llama.cpp's loader needs it
     * to be the embedding's rows */
    if (st == TBX_OK && (sv.n > nv || sv.n < 4))
        st = hf_fail(h, TBX_E_FORMAT, UGM_FILE, UGM_FILE " has %zu pieces but the token "
                     "embedding (%s) has %llu rows (4 .. rows pieces)", sv.n, embd_name(h),
                     (unsigned long long)nv);
    if (st != TBX_OK) goto done;
    scores = tbx_val_packed_array(h->al, TBX_V_F32, (size_t)nv);
    types = tbx_val_packed_array(h->al, TBX_V_I32, (size_t)nv);
    uint64_t blob = 0;
    for (size_t i = 0; i < sv.n; i++) blob += sv.pieces[i].len;
    list = tbx_val_str_array(h->al, (size_t)nv, blob + 24 * nv);
    if (!scores || !types || !list) { st = tbx_err_nomem(h->err, "vocabulary"); goto done; }
    float *sc = (float *)scores->v.a.packed;
    int32_t *tt = (int32_t *)types->v.a.packed;
    static const char *const HEAD[4] = {"<s>", "<pad>", "</s>", "<unk>"};
    for (uint64_t id = 0; id < nv; id++) {
        const char *s;
        size_t len;
        char pad[40];
        if (id < 4) {
            s = HEAD[id];
            len = strlen(s);
            sc[id] = 0.0f;
            tt[id] = id == 3 ? TT_UNKNOWN : TT_CONTROL;
        } else if (id - 1 < sv.n) { /* piece id - 1 */
            const tbx_spm_piece *p = &sv.pieces[id - 1];
            s = p->text;
            len = p->len;
            sc[id] = p->score;
            tt[id] = p->type == TBX_SPM_UNKNOWN   ? TT_UNKNOWN
                   : p->type == TBX_SPM_CONTROL ? TT_CONTROL
                   : p->type == TBX_SPM_UNUSED  ? TT_UNUSED
                   : p->type == TBX_SPM_BYTE    ? TT_BYTE
                                                : TT_NORMAL;
        } else { /* the converter's padding, shifted by one as the pieces are */
            len = (size_t)snprintf(pad, sizeof pad, "[PAD%llu]", (unsigned long long)(id - 1));
            s = pad;
            sc[id] = -10000.0f;
            tt[id] = TT_UNUSED;
        }
        char *d = tbx_val_str_array_add(list, len);
        if (!d) { st = tbx_err_nomem(h->err, "vocabulary"); goto done; }
        memcpy(d, s, len);
    }
    tbx_val_str_array_done(list);
    uint64_t ntt = 1; /* hparams.get("type_vocab_size", 1) */
    if ((st = cfg_u64(h, "type_vocab_size", false, &ntt)) == TBX_E_NOT_FOUND) st = TBX_OK;
    if (st == TBX_OK && (st = put_str(h, "tokenizer.ggml.model", "t5")) == TBX_OK &&
        (st = put_str(h, "tokenizer.ggml.pre", PRE_DEFAULT)) == TBX_OK)
        st = put_lent(h, "tokenizer.ggml.tokens", &list);
    if (st == TBX_OK) st = put_lent(h, "tokenizer.ggml.scores", &scores);
    if (st == TBX_OK) st = put_lent(h, "tokenizer.ggml.token_type", &types);
    if (st == TBX_OK)
        st = put(h, "tokenizer.ggml.add_space_prefix", tbx_value_new_bool(sv.add_dummy_prefix));
    if (st == TBX_OK) st = put_u32(h, "tokenizer.ggml.token_type_count", ntt);
    if (st == TBX_OK)
        st = put(h, "tokenizer.ggml.remove_extra_whitespaces",
                 tbx_value_new_bool(sv.remove_extra_ws));
    if (st == TBX_OK && sv.charsmap_len) {
        if (!(cmap = tbx_val_packed_array(h->al, TBX_V_U8, sv.charsmap_len)))
            st = tbx_err_nomem(h->err, "precompiled_charsmap");
        else {
            memcpy(cmap->v.a.packed, sv.charsmap, sv.charsmap_len);
            st = put_lent(h, "tokenizer.ggml.precompiled_charsmap", &cmap);
        }
    }
    if (st == TBX_OK) st = write_special(h);
done:
    tbx_val_free(list);
    tbx_val_free(scores);
    tbx_val_free(types);
    tbx_val_free(cmap);
    tbx_spm_free(&sv, h->al);
    tbx_free(h->al, raw, blen ? blen : 1);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Tensor names and types                                                                      */
/* ------------------------------------------------------------------------------------------ */
/* Tensors llama.cpp wants in f32 whatever the file type (convert_hf_to_gguf.py and
 * llama-quantize agree): 1-D tensors, norms, anything but a .weight (biases), the position
 * and token-type embeddings, which are added to f32 activations, a MoE router (ffn_gate_inp)
 * and the sigmoid gate of a shared expert (ffn_gate_inp_shexp, Qwen2-MoE's [1, hidden]): the
 * tensors convert_hf_to_gguf.py's ModelBase keeps in f32 for every --outtype. */
static bool always_f32(const char *gname, uint32_t ndim) {
    size_t n = strlen(gname);
    if (ndim <= 1) return true;
    if (n >= 12 && strcmp(gname + n - 12, "_norm.weight") == 0) return true;
    if (n < 7 || strcmp(gname + n - 7, ".weight") != 0) return true;
    static const char router[] = ".ffn_gate_inp.weight";
    if (n >= sizeof router - 1 && strcmp(gname + n - (sizeof router - 1), router) == 0) return true;
    static const char shexp_gate[] = ".ffn_gate_inp_shexp.weight";
    if (n >= sizeof shexp_gate - 1 &&
        strcmp(gname + n - (sizeof shexp_gate - 1), shexp_gate) == 0)
        return true;
    return strcmp(gname, "position_embd.weight") == 0 || strcmp(gname, "token_types.weight") == 0;
}

/* The Hugging Face name of output tensor o (its input tensor's), for messages. */
static const char *hf_name_of(hf *h, const hf_out *o) {
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    if (o->src == UINT64_MAX || tbx_tensor_info_get(h->in, o->src, &ti) != TBX_OK) return o->name;
    return ti.name;
}

/* The Hugging Face name of the token embedding (after check_vocab_rows). */
static const char *embd_name(hf *h) {
    return h->embd < h->nout ? hf_name_of(h, &h->out[h->embd]) : "token_embd.weight";
}

/* A new zeroed output at h->out[h->nout] (not counted yet), or NULL (out of memory). */
static hf_out *new_out(hf *h) {
    if (h->nout == h->cap_out) {
        size_t nc = h->cap_out ? 2 * h->cap_out : 16;
        hf_out *no = nc > SIZE_MAX / sizeof *no ? NULL
                   : tbx_realloc(h->al, h->out, h->cap_out * sizeof *no, nc * sizeof *no);
        if (!no) return NULL;
        memset(no + h->cap_out, 0, (nc - h->cap_out) * sizeof *no);
        h->out = no;
        h->cap_out = nc;
    }
    return &h->out[h->nout];
}

/* The dtype of output o (a 2-D or 3-D weight, or f32) from its input dtype `in_dt`: f32 for
 * what llama.cpp computes in f32 (1-D tensors, norms, biases, position and token-type
 * embeddings, routers); else quantized (with fallback), cast, or kept (f64: f32). */
static void choose_dtype(hf *h, hf_out *o, tbx_dtype in_dt) {
    if (always_f32(o->name, o->ndim)) {
        o->dtype = TBX_DT_F32;
        o->why = HF_WHY_F32;
    } else if (h->quant != TBX_DT_INVALID) {
        o->dtype = tbx_ggml_quant_fallback(h->quant, o->cols);
        o->why = o->dtype == h->quant ? HF_WHY_REQUESTED : HF_WHY_FALLBACK;
        o->action = o->dtype == h->quant ? TBX_CONVERT_QUANTIZED : TBX_CONVERT_FALLBACK;
    } else if (h->cast != TBX_DT_INVALID) {
        o->dtype = h->cast;
        o->why = HF_WHY_REQUESTED;
    } else {
        o->dtype = in_dt == TBX_DT_F64 ? TBX_DT_F32 : in_dt;
        o->why = in_dt == TBX_DT_F64 ? HF_WHY_F64 : HF_WHY_NONE;
    }
    if (o->action == TBX_CONVERT_KEPT && o->dtype != in_dt) o->action = TBX_CONVERT_CAST;
    if (o->action == TBX_CONVERT_FALLBACK && o->dtype == in_dt) o->action = TBX_CONVERT_KEPT;
}

/* Expert `x` of stack o is input tensor i (ti): the experts share dtype and shape, each number
 * once. */
static tbx_status stack_add(hf *h, hf_out *o, long x, uint64_t i, const tbx_tensor_info *ti) {
    if (x < 0 || x >= HF_EXPERTS_MAX)
        return hf_fail(h, TBX_E_LIMIT, ti->name, "tensor \"%s\": expert %ld (at most %d experts)",
                       ti->name, x, HF_EXPERTS_MAX);
    if ((uint32_t)x >= o->cap_exp) {
        uint32_t nc = o->cap_exp ? o->cap_exp : 8;
        while (nc <= (uint32_t)x) nc *= 2;
        uint64_t *ne = tbx_realloc(h->al, o->exps, o->cap_exp * sizeof *ne, nc * sizeof *ne);
        if (!ne) return tbx_err_nomem(h->err, "experts");
        for (uint32_t k = o->cap_exp; k < nc; k++) ne[k] = UINT64_MAX;
        o->exps = ne;
        o->cap_exp = nc;
    }
    if (o->exps[x] != UINT64_MAX)
        return hf_fail(h, TBX_E_FORMAT, ti->name, "tensor \"%s\": expert %ld of %s twice",
                       ti->name, x, o->name);
    const uint64_t rows = ti->ndim == 2 ? ti->shape[0] : 1;
    const uint64_t cols = ti->ndim == 2 ? ti->shape[1] : ti->shape[0];
    if (o->nexp == 0) {
        o->rows = rows;
        o->cols = cols;
    } else {
        tbx_tensor_info t0 = TBX_TENSOR_INFO_INIT;
        uint64_t any = UINT64_MAX;
        for (uint32_t k = 0; k < o->cap_exp && any == UINT64_MAX; k++) any = o->exps[k];
        tbx_tensor_info_get(h->in, any, &t0);
        if (rows != o->rows || cols != o->cols || ti->dtype != t0.dtype || ti->ndim != t0.ndim)
            return hf_fail(h, TBX_E_FORMAT, ti->name, "tensor \"%s\" differs from %s in shape or "
                           "dtype: the experts of %s are stacked into one tensor", ti->name,
                           t0.name, o->name);
    }
    o->exps[x] = i;
    if ((uint32_t)x + 1 > o->nexp) o->nexp = (uint32_t)x + 1;
    return TBX_OK;
}

/* MXFP4 blocks ti (input tensor i, entry mt: HF_XF_MXFP4) with their scales (the same name,
 * "_scales"): one output per part, each expert's rows of blocks (an interleave: every
 * nparts-th row), stored as ggml's MXFP4. */
static tbx_status plan_mxfp4(hf *h, uint64_t i, const tbx_tensor_info *ti, const hf_match *mt) {
    const hf_tmap *m = mt->m;
    const size_t tl = strlen(ti->name);
    char sname[HF_NAME_MAX];
    if (tl < 7 || tl >= sizeof sname || strcmp(ti->name + tl - 7, "_blocks"))
        return hf_fail(h, TBX_E_FORMAT, ti->name, "tensor \"%s\": MXFP4 blocks are named "
                       "\"*_blocks\"", ti->name);
    memcpy(sname, ti->name, tl - 7);
    memcpy(sname + tl - 7, "_scales", 8);
    uint64_t si;
    tbx_tensor_info sc = TBX_TENSOR_INFO_INIT;
    if (tbx_tensor_find(h->in, sname, &si) != TBX_OK || tbx_tensor_info_get(h->in, si, &sc) != TBX_OK)
        return hf_fail(h, TBX_E_NOT_FOUND, ti->name, "tensor \"%s\": MXFP4 blocks without "
                       "their scales \"%s\"", ti->name, sname);
    if (ti->dtype != TBX_DT_U8 || ti->ndim != 4 || ti->shape[3] != 16 || !ti->shape[0] ||
        !ti->shape[1] || !ti->shape[2])
        return hf_fail(h, TBX_E_FORMAT, ti->name, "tensor \"%s\": MXFP4 blocks are uint8 "
                       "[experts, rows, blocks, 16] (%u dimensions, dtype %s)", ti->name,
                       ti->ndim, tbx_dtype_get(ti->dtype) ? tbx_dtype_get(ti->dtype)->name : "?");
    if (sc.dtype != TBX_DT_U8 || sc.ndim != 3 || sc.shape[0] != ti->shape[0] ||
        sc.shape[1] != ti->shape[1] || sc.shape[2] != ti->shape[2])
        return hf_fail(h, TBX_E_FORMAT, sname, "tensor \"%s\": MXFP4 scales are uint8 "
                       "[%llu, %llu, %llu], one a block of \"%s\" (%u dimensions, dtype %s)",
                       sname, (unsigned long long)ti->shape[0], (unsigned long long)ti->shape[1],
                       (unsigned long long)ti->shape[2], ti->name, sc.ndim,
                       tbx_dtype_get(sc.dtype) ? tbx_dtype_get(sc.dtype)->name : "?");
    const uint64_t E = ti->shape[0], R = ti->shape[1], C = ti->shape[2];
    if (E > HF_EXPERTS_MAX)
        return hf_fail(h, TBX_E_LIMIT, ti->name, "tensor \"%s\": %llu experts (1 .. %d)",
                       ti->name, (unsigned long long)E, HF_EXPERTS_MAX);
    const hf_part one = {m->gguf, 0, m->xform, m->k};
    const bool multi = m->kind == HF_MAP_INTERLEAVE;
    const hf_part *parts = multi ? m->parts : &one;
    uint32_t nparts = 1;
    if (multi)
        for (nparts = 0; parts[nparts].gguf; nparts++) {}
    if (nparts == 0 || R % nparts)
        return hf_fail(h, TBX_E_FORMAT, ti->name, "tensor \"%s\": %llu rows do not interleave "
                       "%u parts", ti->name, (unsigned long long)R, nparts);
    for (uint32_t j = 0; j < nparts; j++) {
        char name[HF_NAME_MAX];
        if (!tbx_hf_gguf_name_(parts[j].gguf, mt->layer, mt->suffix, name, sizeof name))
            return hf_fail(h, TBX_E_LIMIT, ti->name, "tensor \"%s\": name too long", ti->name);
        hf_out *o = new_out(h);
        if (!o) return tbx_err_nomem(h->err, "tensor plan");
        memcpy(o->name, name, strlen(name) + 1);
        o->src = i;
        o->aux = si;
        o->xform = HF_XF_MXFP4;
        o->layer = strchr(parts[j].gguf, '#') ? mt->layer : -1;
        o->rows = R / nparts;
        o->cols = C * 32; /* C x 16 bytes are in the tensor: no overflow */
        o->ndim = 3;
        o->nmat = E;
        o->mat = R * C;   /* blocks of an expert */
        o->first = j * C; /* its first row's first block */
        o->step = nparts;
        o->dtype = TBX_DT_MXFP4;
        o->why = HF_WHY_MXFP4;
        o->action = TBX_CONVERT_KEPT;
        h->n_mxfp4++;
        h->nout++;
    }
    return TBX_OK;
}

/* Every input tensor's llama.cpp name(s), layer and shape (h->out; nothing written yet): one
 * output per HF_MAP_ONE tensor, one per part of an HF_MAP_SPLIT one (its rows resolved once
 * the hyper-parameters are read: resolve_splits), and one per stack of HF_MAP_STACK ones,
 * placed where its first expert comes. */
static tbx_status plan_tensors(hf *h) {
    uint64_t n = tbx_tensor_count(h->in);
    h->embd = SIZE_MAX;
    for (uint64_t i = 0; i < n; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_status st = tbx_tensor_info_get(h->in, i, &ti);
        if (st != TBX_OK) return hf_fail(h, st, "tensor", "tensor %llu: no info", (unsigned long long)i);
        hf_match mt;
        int r = tbx_hf_map_(h->a, ti.name, &mt);
        if (r == 0) continue;
        const size_t tl = strlen(ti.name);
        if (r < 0 && tl > 7 && (!strcmp(ti.name + tl - 7, "_blocks") ||
                                !strcmp(ti.name + tl - 7, "_scales")))
            return hf_fail(h, TBX_E_UNSUPPORTED, ti.name, "tensor \"%s\": MXFP4 blocks or scales "
                           "of a tensor the %s architecture table does not repack", ti.name,
                           h->a->model_type);
        if (r > 0 && mt.m->kind == HF_MAP_SCALES) { /* they go with their blocks */
            char bname[HF_NAME_MAX];
            uint64_t bi;
            if (tl < 7 || tl >= sizeof bname || strcmp(ti.name + tl - 7, "_scales"))
                return hf_fail(h, TBX_E_FORMAT, ti.name, "tensor \"%s\": MXFP4 scales are "
                               "named \"*_scales\"", ti.name);
            memcpy(bname, ti.name, tl - 7);
            memcpy(bname + tl - 7, "_blocks", 8);
            if (tbx_tensor_find(h->in, bname, &bi) != TBX_OK)
                return hf_fail(h, TBX_E_NOT_FOUND, ti.name, "tensor \"%s\": MXFP4 scales "
                               "without their blocks \"%s\"", ti.name, bname);
            continue;
        }
        if (r > 0 && mt.m->xform == HF_XF_MXFP4) {
            if ((st = plan_mxfp4(h, i, &ti, &mt)) != TBX_OK) return st;
            continue;
        }
        if (r < 0)
            return hf_fail(h, TBX_E_UNSUPPORTED, ti.name, "tensor \"%s\" has no llama.cpp name "
                           "in the %s architecture table", ti.name, h->a->model_type);
        if (ti.dtype != TBX_DT_F32 && ti.dtype != TBX_DT_F16 && ti.dtype != TBX_DT_BF16 &&
            ti.dtype != TBX_DT_F64)
            return hf_fail(h, TBX_E_UNSUPPORTED, ti.name, "tensor \"%s\": dtype %s (float "
                           "tensors only)", ti.name, tbx_dtype_get(ti.dtype) ?
                           tbx_dtype_get(ti.dtype)->name : "?");
        const hf_tmap *m = mt.m;
        /* 3-D: experts stacked already ([n, rows, cols]), by an entry that takes them */
        const bool three = ti.ndim == 3 && (m->kind == HF_MAP_ONE || m->kind == HF_MAP_INTERLEAVE);
        if (ti.ndim == 0 || (ti.ndim > 2 && !three))
            return hf_fail(h, TBX_E_UNSUPPORTED, ti.name, "tensor \"%s\": %u dimensions (1 or 2%s)",
                           ti.name, ti.ndim, m->kind == HF_MAP_ONE || m->kind == HF_MAP_INTERLEAVE
                           ? "; 3: stacked experts" : "");
        uint64_t rows = ti.ndim >= 2 ? ti.shape[ti.ndim - 2] : 1;
        uint64_t cols = ti.shape[ti.ndim - 1];
        if (three && (ti.shape[0] == 0 || ti.shape[0] > HF_EXPERTS_MAX))
            return hf_fail(h, TBX_E_LIMIT, ti.name, "tensor \"%s\": %llu experts (1 .. %d)",
                           ti.name, (unsigned long long)ti.shape[0], HF_EXPERTS_MAX);
        char name[HF_NAME_MAX];
        if (m->kind == HF_MAP_STACK) {
            if (!tbx_hf_gguf_name_(m->gguf, mt.layer, mt.suffix, name, sizeof name))
                return hf_fail(h, TBX_E_LIMIT, ti.name, "tensor \"%s\": name too long", ti.name);
            hf_out *o = NULL;
            for (size_t k = 0; k < h->nout && !o; k++)
                if (h->out[k].exps && strcmp(h->out[k].name, name) == 0) o = &h->out[k];
            if (!o) {
                if (!(o = new_out(h))) return tbx_err_nomem(h->err, "tensor plan");
                memcpy(o->name, name, strlen(name) + 1);
                o->src = UINT64_MAX;
                o->xform = m->xform;
                o->k = m->k;
                o->layer = strchr(m->gguf, '#') ? mt.layer : -1;
                o->ndim = ti.ndim + 1;
                if ((st = stack_add(h, o, mt.expert, i, &ti)) != TBX_OK) {
                    tbx_free(h->al, o->exps, o->cap_exp * sizeof *o->exps);
                    memset(o, 0, sizeof *o);
                    return st;
                }
                choose_dtype(h, o, ti.dtype);
                h->nout++;
            } else if ((st = stack_add(h, o, mt.expert, i, &ti)) != TBX_OK) {
                return st;
            }
            continue;
        }
        const hf_part one = {m->gguf, 0, m->xform, m->k};
        const bool multi = m->kind == HF_MAP_SPLIT || m->kind == HF_MAP_INTERLEAVE;
        const hf_part *parts = multi ? m->parts : &one;
        uint32_t nparts = multi ? 0 : 1, j = 0; /* `one` has no terminator */
        while (multi && parts[nparts].gguf) nparts++;
        if (m->kind == HF_MAP_INTERLEAVE) {
            if (nparts == 0 || cols % nparts)
                return hf_fail(h, TBX_E_FORMAT, ti.name, "tensor \"%s\": %llu values a row do "
                               "not interleave %u parts", ti.name, (unsigned long long)cols,
                               nparts);
            cols /= nparts;
        }
        for (const hf_part *pt = parts; pt->gguf; pt++, j++) {
            if (!tbx_hf_gguf_name_(pt->gguf, mt.layer, mt.suffix, name, sizeof name))
                return hf_fail(h, TBX_E_LIMIT, ti.name, "tensor \"%s\": name too long", ti.name);
            hf_out *o = new_out(h);
            if (!o) return tbx_err_nomem(h->err, "tensor plan");
            memcpy(o->name, name, strlen(name) + 1);
            o->src = i;
            o->xform = pt->xform;
            o->k = pt->k;
            o->layer = strchr(pt->gguf, '#') ? mt.layer : -1;
            const bool tr = pt->xform == HF_XF_TRANSPOSE;
            o->rows = tr ? cols : rows;
            o->cols = tr ? rows : cols;
            o->ndim = ti.ndim;
            if (three) {
                o->nmat = ti.shape[0];
                o->mat = ti.shape[1] * ti.shape[2]; /* the shape's product fits: the tensor's */
            }
            if (m->kind == HF_MAP_INTERLEAVE) {
                o->first = j;
                o->step = nparts;
            }
            if (m->kind == HF_MAP_SPLIT) o->part = pt;
            if (strcmp(o->name, "token_embd.weight") == 0) h->embd = h->nout;
            choose_dtype(h, o, ti.dtype);
            h->nout++;
            if (!multi) break;
        }
    }
    /* every stack holds its experts 0 .. n-1 */
    for (size_t k = 0; k < h->nout; k++) {
        hf_out *o = &h->out[k];
        if (!o->exps) continue;
        for (uint32_t x = 0; x < o->nexp; x++)
            if (o->exps[x] == UINT64_MAX)
                return hf_fail(h, TBX_E_FORMAT, o->name, "%s: the model has experts up to %u "
                               "but no expert %u", o->name, o->nexp - 1, x);
        o->src = o->exps[0];
    }
    return TBX_OK;
}

/* The vocabulary llama.cpp loads has one token per row of token_embd.weight (its loader checks
 * token_embd, and output when present, against [embedding_length, token count] exactly): the
 * vocabulary written is that many tokens (padded with "[PAD<id>]"), and a config.json
 * vocab_size that says otherwise is an error, not a size to fill. */
static tbx_status check_vocab_rows(hf *h) {
    if (h->embd >= h->nout)
        return hf_fail(h, TBX_E_NOT_FOUND, "token_embd", "the model has no token embedding "
                       "(%s): llama.cpp needs token_embd.weight", h->a->tmap[0].hf);
    const hf_out *e = &h->out[h->embd];
    const uint64_t rows = e->rows;
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    tbx_tensor_info_get(h->in, e->src, &ti);
    if (ti.ndim != 2 || rows == 0 || rows > HF_VOCAB_MAX)
        return hf_fail(h, TBX_E_LIMIT, ti.name, "%s: %llu rows (llama.cpp's vocabulary is one "
                       "token per row: 1 .. %llu of a 2-D embedding)", ti.name,
                       (unsigned long long)rows, (unsigned long long)HF_VOCAB_MAX);
    uint64_t nv = 0;
    tbx_status st = cfg_u64(h, "vocab_size", false, &nv);
    if (st == TBX_OK && nv && nv < rows && (h->a->flags & ARCH_TRIM_VOCAB)) {
        /* Gemma3Model.modify_tensors: the rows past the vocabulary (vocab_size tokens, as its
         * SentencePiece vocabulary is long) are left out of token_embd */
        h->out[h->embd].rows = nv;
        h->n_vocab = nv;
        return TBX_OK;
    }
    if (st == TBX_OK && nv != rows)
        return hf_fail(h, TBX_E_FORMAT, "vocab_size", "config.json: vocab_size = %llu "
                       "contradicts the tensors: %s has %llu rows (one per token)",
                       (unsigned long long)nv, ti.name, (unsigned long long)rows);
    if (st != TBX_OK && st != TBX_E_NOT_FOUND) return st;
    h->n_vocab = rows;
    return TBX_OK;
}

/* What llama.cpp's loader expects of each tensor, in terms of the hyper-parameters: symbols
 * for [rows, cols] of a .weight (rows 1: 1-D) and the length of its .bias. */
typedef struct hf_shape {
    const char *base;       /* llama.cpp name without "blk.N." and the suffix */
    uint8_t rows, cols, bias;
} hf_shape;
static const hf_shape SHAPES[] = {
    {"token_embd", HD_V, HD_E, HD_ONE},     {"output", HD_V, HD_E, HD_ONE},
    {"position_embd", HD_CTX, HD_E, HD_ONE}, {"token_types", HD_TT, HD_E, HD_ONE},
    {"token_embd_norm", HD_ONE, HD_E, HD_E}, {"output_norm", HD_ONE, HD_E, HD_E},
    {"attn_norm", HD_ONE, HD_E, HD_E},      {"ffn_norm", HD_ONE, HD_E, HD_E},
    {"attn_output_norm", HD_ONE, HD_E, HD_E}, {"layer_output_norm", HD_ONE, HD_E, HD_E},
    {"attn_q", HD_Q, HD_E, HD_Q},           {"attn_k", HD_K, HD_E, HD_K},
    {"attn_qkv", HD_QKV, HD_E, HD_QKV},
    {"attn_v", HD_K, HD_E, HD_K},           {"attn_output", HD_E, HD_Q, HD_E},
    {"ffn_up", HD_F, HD_E, HD_F},           {"ffn_gate", HD_F, HD_E, HD_F},
    {"ffn_down", HD_E, HD_F, HD_E},
    /* MoE: the router, and each expert of a stack (its [rows, cols]; the count: HD_X) */
    {"ffn_gate_inp", HD_X, HD_E, HD_X},     {"ffn_gate_exps", HD_FX, HD_E, HD_FX},
    {"ffn_up_exps", HD_FX, HD_E, HD_FX},    {"ffn_down_exps", HD_E, HD_FX, HD_E},
    /* a shared expert and its gate (one row) */
    {"ffn_gate_shexp", HD_FS, HD_E, HD_ONE}, {"ffn_up_shexp", HD_FS, HD_E, HD_ONE},
    {"ffn_down_shexp", HD_E, HD_FS, HD_ONE}, {"ffn_gate_inp_shexp", HD_ONE, HD_E, HD_ONE},
};

typedef struct hf_dim {
    uint64_t v;
    const char *field;      /* the config.json field that sets it; NULL: no check */
    uint64_t fv;            /* the field's value (heads: v = fv x the head size) */
    bool heads;
} hf_dim;

/* The value of symbol `sym` and the config field behind it. */
static hf_dim dim_of(hf *h, int sym, uint64_t tt) {
    hf_dim d = {1, NULL, 1, false};
    switch (sym) {
    case HD_E: d.v = d.fv = h->hpv[HPV_EMBD]; d.field = h->hpv_cfg[HPV_EMBD]; break;
    case HD_V: d.v = h->n_vocab; break; /* the embedding's rows: compared by check_output */
    case HD_CTX: d.v = d.fv = h->hpv[HPV_CTX]; d.field = h->hpv_cfg[HPV_CTX]; break;
    case HD_TT: d.v = d.fv = tt; d.field = tt ? "type_vocab_size" : NULL; break;
    case HD_F: d.v = d.fv = h->hpv[HPV_FF]; d.field = h->hpv_cfg[HPV_FF]; break;
    case HD_F2: d.v = 2 * h->hpv[HPV_FF]; d.fv = h->hpv[HPV_FF]; d.field = h->hpv_cfg[HPV_FF]; break;
    case HD_X: d.v = d.fv = h->hpv[HPV_EXPERTS]; d.field = h->hpv_cfg[HPV_EXPERTS]; break;
    case HD_FX: case HD_FS: {
        const int k = sym == HD_FX ? HPV_FF_EXP : HPV_FF_SHEXP;
        const int use = h->hpv_cfg[k] ? k : HPV_FF;
        d.v = d.fv = h->hpv[use];
        d.field = h->hpv_cfg[use];
        break;
    }
    case HD_QKV:
        d.fv = h->n_head_kv;
        d.field = "num_key_value_heads";
        d.heads = true;
        d.v = (h->n_head + 2 * h->n_head_kv) * h->head_dim;
        break;
    case HD_Q: case HD_K:
        d.fv = sym == HD_Q ? h->n_head : h->n_head_kv;
        d.field = sym == HD_Q ? "num_attention_heads" : "num_key_value_heads";
        d.heads = true;
        d.v = d.fv * h->head_dim;
        break;
    default: break;
    }
    return d;
}

/* A dimension of tensor o that differs from the hyper-parameters: an error naming the config
 * field, its value and what the tensor has. */
static tbx_status dim_mismatch(hf *h, const hf_out *o, const hf_dim *d, uint64_t have,
                               const char *what) {
    const char *hn = hf_name_of(h, o);
    if (d->heads)
        return hf_fail(h, TBX_E_FORMAT, d->field, "config.json: %s = %llu (heads of %llu%s: %llu "
                       "%s) contradicts the tensors: %s has %llu %s", d->field,
                       (unsigned long long)d->fv, (unsigned long long)h->head_dim,
                       h->head_dim_cfg ? ", head_dim" : ", hidden_size / num_attention_heads",
                       (unsigned long long)d->v, what, hn, (unsigned long long)have, what);
    return hf_fail(h, TBX_E_FORMAT, d->field, "config.json: %s = %llu contradicts the tensors: %s "
                   "has %llu %s", d->field, (unsigned long long)d->fv, hn,
                   (unsigned long long)have, what);
}

/* ARCH_POS_OFFSET: position_embd keeps its rows from pad_token_id + 1 on (h->pos_off). */
static tbx_status offset_positions(hf *h) {
    for (size_t i = 0; h->pos_off && i < h->nout; i++) {
        hf_out *o = &h->out[i];
        if (strcmp(o->name, "position_embd.weight") != 0) continue;
        if (o->ndim != 2 || o->rows <= h->pos_off)
            return hf_fail(h, TBX_E_FORMAT, hf_name_of(h, o), "%s: %llu rows, but positions "
                           "start at pad_token_id + 1 = %llu", hf_name_of(h, o),
                           (unsigned long long)o->rows, (unsigned long long)h->pos_off);
        o->first = h->pos_off * o->cols;
        o->rows -= h->pos_off;
    }
    return TBX_OK;
}

/* The rows of each split part (hf_part.rows: a symbol of the hyper-parameters): a run of its
 * input's rows after the previous part's (a 1-D input: of its values), the parts covering the
 * input exactly. */
static tbx_status resolve_splits(hf *h) {
    for (size_t i = 0; i < h->nout;) {
        const hf_out *o = &h->out[i];
        if (!o->part) { i++; continue; }
        const bool one_d = o->ndim == 1;
        const uint64_t total = one_d ? o->cols : o->rows, cols = o->cols, src = o->src;
        uint64_t at = 0;
        size_t j = i;
        for (; j < h->nout && h->out[j].part && h->out[j].src == src; j++) {
            hf_out *p = &h->out[j];
            const uint64_t len = dim_of(h, p->part->rows, 0).v;
            if (len == 0 || len > total - at)
                break;
            p->first = one_d ? at : at * cols; /* at < total: within the tensor */
            if (one_d) p->cols = len;
            else p->rows = len;
            at += len;
        }
        if (at != total || (j < h->nout && h->out[j].part && h->out[j].src == src)) {
            char parts[160];
            size_t n = 0;
            parts[0] = 0;
            for (const hf_part *pt = o->part; pt->gguf && n + 1 < sizeof parts; pt++) {
                int w = snprintf(parts + n, sizeof parts - n, "%s%s %llu", n ? ", " : "",
                                 pt->gguf, (unsigned long long)dim_of(h, pt->rows, 0).v);
                if (w > 0) n = n + (size_t)w < sizeof parts ? n + (size_t)w : sizeof parts - 1;
            }
            return hf_fail(h, TBX_E_FORMAT, hf_name_of(h, o), "tensor \"%s\": %llu %s do not "
                           "split into its parts as config.json gives them (%s)",
                           hf_name_of(h, o), (unsigned long long)total,
                           one_d ? "values" : "rows", parts);
        }
        i = j;
    }
    return TBX_OK;
}

/* Every hyper-parameter llama.cpp will check against the tensors, checked here first, so that
 * a config.json that contradicts them (hidden_size 0, num_hidden_layers 4294967295, head counts
 * that do not give the q/k/v rows, ...) is an error naming the field instead of a file
 * llama.cpp refuses: embedding_length against token_embd's columns, then block_count against
 * the layers present, then every tensor's shape against its role (SHAPES), then the heads. */
static tbx_status check_hparams(hf *h) {
    const hf_out *te = &h->out[h->embd];
    hf_dim de = dim_of(h, HD_E, 0);
    if (de.field && te->cols != de.v) return dim_mismatch(h, te, &de, te->cols, "columns");
    /* block_count: layers 0..n-1, each with tensors */
    long maxl = -1;
    for (size_t i = 0; i < h->nout; i++)
        if (h->out[i].layer > maxl) maxl = h->out[i].layer;
    const uint64_t nl = h->hpv[HPV_LAYERS];
    const char *lf = h->hpv_cfg[HPV_LAYERS] ? h->hpv_cfg[HPV_LAYERS] : "num_hidden_layers";
    if (nl != (uint64_t)(maxl + 1)) {
        char held[48] = "no layer";
        if (maxl >= 0) snprintf(held, sizeof held, "layers 0 .. %ld", maxl);
        return hf_fail(h, TBX_E_FORMAT, lf, "config.json: %s = %llu contradicts the tensors: "
                       "they hold %s", lf, (unsigned long long)nl, held);
    }
    for (long l = 0; l <= maxl; l++) {
        size_t i = 0;
        while (i < h->nout && h->out[i].layer != l) i++;
        if (i == h->nout)
            return hf_fail(h, TBX_E_FORMAT, lf, "config.json: %s = %llu, but the tensors hold no "
                           "layer %ld", lf, (unsigned long long)nl, l);
    }
    /* token_type_count: type_vocab_size, else the token_types rows */
    uint64_t tt = 0;
    tbx_status st = cfg_u64(h, "type_vocab_size", false, &tt);
    if (st != TBX_OK && st != TBX_E_NOT_FOUND) return st;
    /* role by role in SHAPES' order (the q rows, which the head count and size give, before
     * the k/v rows, which also need the kv head count), each over the tensors of that role */
    for (size_t k = 0; k < sizeof SHAPES / sizeof SHAPES[0]; k++) {
        const hf_shape *r = &SHAPES[k];
        const size_t bl = strlen(r->base);
        for (size_t i = 0; i < h->nout; i++) {
            const hf_out *o = &h->out[i];
            if (o->src == UINT64_MAX) continue;
            const char *base = o->name;
            if (!strncmp(base, "blk.", 4)) base = strchr(base + 4, '.') + 1;
            const char *dot = strrchr(base, '.');
            if ((size_t)(dot - base) != bl || memcmp(base, r->base, bl) != 0) continue;
            const bool bias = !strcmp(dot, ".bias");
            if (i != h->embd && r->rows == HD_V && !bias && o->rows != h->n_vocab)
                return hf_fail(h, TBX_E_FORMAT, hf_name_of(h, o), "%s has %llu rows but the "
                               "token embedding %s has %llu: llama.cpp takes one vocabulary for "
                               "both", hf_name_of(h, o), (unsigned long long)o->rows,
                               embd_name(h), (unsigned long long)h->n_vocab);
            /* the biases of stacked experts (gpt-oss): [experts, length] */
            const bool xbias = bias && o->ndim == 2 && bl > 5 && !strcmp(r->base + bl - 5, "_exps");
            int rs = bias ? (xbias ? HD_X : HD_ONE) : r->rows, cs = bias ? r->bias : r->cols;
            if ((h->a->flags & ARCH_FFN_UP_GLU) && !strcmp(r->base, "ffn_up")) {
                if (rs == HD_F) rs = HD_F2;
                if (cs == HD_F) cs = HD_F2;
            }
            hf_dim dr = dim_of(h, rs, tt), dc = dim_of(h, cs, tt);
            if (dr.field && o->rows != dr.v) return dim_mismatch(h, o, &dr, o->rows, "rows");
            if (rs == HD_ONE && o->rows != 1)
                return hf_fail(h, TBX_E_FORMAT, hf_name_of(h, o), "%s: [%llu, %llu], llama.cpp "
                               "takes a 1-D tensor", hf_name_of(h, o),
                               (unsigned long long)o->rows, (unsigned long long)o->cols);
            if (dc.field && o->cols != dc.v)
                return dim_mismatch(h, o, &dc, o->cols, rs == HD_ONE ? "values" : "columns");
            hf_dim dx = dim_of(h, HD_X, tt);
            if (o->exps && dx.field && o->nexp != dx.v)
                return dim_mismatch(h, o, &dx, o->nexp, "experts");
            if (o->nmat && dx.field && o->nmat != dx.v)
                return dim_mismatch(h, o, &dx, o->nmat, "experts");
        }
    }
    if (h->n_head % h->n_head_kv)
        return hf_fail(h, TBX_E_FORMAT, "num_key_value_heads", "config.json: "
                       "num_key_value_heads = %llu does not divide num_attention_heads = %llu",
                       (unsigned long long)h->n_head_kv, (unsigned long long)h->n_head);
    /* llama's rotary reordering pairs the rows of each head */
    for (size_t i = 0; i < h->nout; i++) {
        const hf_out *o = &h->out[i];
        if (o->xform != HF_XF_PERMUTE_Q && o->xform != HF_XF_PERMUTE_K) continue;
        uint64_t nh = o->xform == HF_XF_PERMUTE_Q ? h->n_head : h->n_head_kv;
        if (o->rows % (2 * nh) != 0)
            return hf_fail(h, TBX_E_FORMAT, hf_name_of(h, o), "tensor \"%s\": %llu rows do not "
                           "split into %llu heads of an even size", hf_name_of(h, o),
                           (unsigned long long)o->rows, (unsigned long long)nh);
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The plan of the tensors (carried out by the engine, src/convert/engine.c)                    */
/* ------------------------------------------------------------------------------------------ */
/* rope_freqs.weight of llama3 rope scaling, values [first, first + n): per rotary frequency
 * f_i = theta^(-2i/d), with wavelength w = 2 pi / f_i: 1 when w < ctx / high_freq_factor,
 * `factor` when w > ctx / low_freq_factor, else 1 / ((1 - s) / factor + s) with
 * s = (ctx / w - low) / (high - low) (ctx: original_max_position_embeddings). Each step is
 * rounded to f32 as llama.cpp's converter computes it (torch float32 tensors, every Python
 * number taken to f32 where it meets one; theta^x correctly rounded from double), so the bits
 * are the converter's: in double, Llama 3.1's factors 29, 33 and 34 came out 1 ulp away. */
static tbx_status rope_freqs(const tbx_plan *p, size_t k, uint64_t first, uint64_t n,
                             float *out, tbx_error *err) {
    const hf *h = p->ud;
    (void)err;
    const uint8_t gen = h->out[k].gen;
    if (gen == HF_GEN_ROPE_LONG || gen == HF_GEN_ROPE_SHORT) { /* longrope's factors */
        memcpy(out, (gen == HF_GEN_ROPE_LONG ? h->rope_long : h->rope_short) + first,
               (size_t)n * sizeof *out);
        return TBX_OK;
    }
    const float hi_w = (float)(h->rope_orig_ctx / h->rope_high);
    const float lo_w = (float)(h->rope_orig_ctx / h->rope_low);
    const float two_pi = (float)(2 * 3.14159265358979323846), ctx = (float)h->rope_orig_ctx;
    const float low = (float)h->rope_low, span = (float)(h->rope_high - h->rope_low);
    const float factor = (float)h->rope_factor;
    for (uint64_t i = first; i < first + n; i++) {
        const float x = (float)(2 * i) / (float)h->head_dim;
        const float f = 1.0f / (float)pow((double)(float)h->rope_theta, (double)x);
        const float w = two_pi / f;
        float r;
        if (w < hi_w) r = 1.0f;
        else if (w > lo_w) r = factor;
        else {
            const float sm = (ctx / w - low) / span;
            r = 1.0f / ((1.0f - sm) / factor + sm);
        }
        out[i - first] = r;
    }
    return TBX_OK;
}

/* The reason phrase of output tensor k (tbx_convert_report.reason). */
static void hf_reason(const tbx_plan *p, const tbx_file *in, size_t k, char *buf, size_t cap) {
    const hf *h = p->ud;
    const hf_out *o = &h->out[k];
    (void)in;
    const tbx_dtype_info *qi = tbx_dtype_get(h->preset ? o->wanted : h->quant);
    buf[0] = 0;
    switch (o->why) {
    case HF_WHY_REQUESTED:
        if (h->preset)
            snprintf(buf, cap, "llama-quantize %s%s", h->preset->name,
                     (h->o->preset_flags & TBX_PRESET_PURE) ? " --pure" : "");
        else snprintf(buf, cap, "requested type");
        break;
    case HF_WHY_FALLBACK:
        snprintf(buf, cap, "rows of %llu values are not a multiple of %s's block of %llu%s",
                 (unsigned long long)o->cols, qi ? qi->name : "?",
                 (unsigned long long)(qi ? qi->block_size : 0),
                 o->dtype == TBX_DT_F16 ? ", nor of its fallback's: f16" : "");
        break;
    case HF_WHY_F32:
        snprintf(buf, cap, "1-D, norm, or position/token-type embedding: f32 for llama.cpp");
        break;
    case HF_WHY_F64: snprintf(buf, cap, "f64 is written as f32 for llama.cpp"); break;
    case HF_WHY_MXFP4:
        snprintf(buf, cap, "MXFP4 blocks and scales repacked to ggml's MXFP4 as they are (as "
                 "llama.cpp's converter keeps them, whatever the type asked for)");
        break;
    case HF_WHY_GENERATED:
        snprintf(buf, cap, "generated (%s rope scaling)",
                 o->gen == HF_GEN_ROPE_FREQS ? "llama3" : "longrope");
        break;
    default: break;
    }
}

static int by_llama_out(const void *a, const void *b) {
    return tbx_lq_name_cmp(((const hf_out *)a)->name, ((const hf_out *)b)->name);
}

/* The output tensors as a plan (rope_freqs last, when llama3 rope scaling asks): each its
 * input tensor whole, llama's q/k rows reordered by heads, its stored bytes when its dtype
 * stays, else encoded to its dtype (f32, a cast, a ggml block type). */
static tbx_status build_plan(hf *h) {
    static const struct { uint8_t gen; const char *name; } GEN[] = {
        {HF_GEN_ROPE_FREQS, "rope_freqs.weight"},
        {HF_GEN_ROPE_LONG, "rope_factors_long.weight"},
        {HF_GEN_ROPE_SHORT, "rope_factors_short.weight"},
    };
    for (size_t g = 0; g < sizeof GEN / sizeof GEN[0]; g++) {
        /* llama3: llama.cpp divides each rotary frequency by its factor; longrope: its long
         * and short factors */
        if (GEN[g].gen == HF_GEN_ROPE_FREQS ? !h->rope_llama3 : !h->rope_long) continue;
        hf_out *o = new_out(h);
        if (!o) return tbx_err_nomem(h->err, "tensor plan");
        h->nout++;
        o->src = UINT64_MAX;
        o->gen = GEN[g].gen;
        memcpy(o->name, GEN[g].name, strlen(GEN[g].name) + 1);
        o->dtype = TBX_DT_F32;
        o->layer = -1;
        o->why = HF_WHY_GENERATED;
        o->rows = 1;
        o->cols = GEN[g].gen == HF_GEN_ROPE_FREQS ? h->head_dim / 2 : h->rope_nfac;
        o->ndim = 1;
    }
    if (h->preset) { /* llama_model_quantize's order: its loader's (blk.N by N, then name) */
        qsort(h->out, h->nout, sizeof *h->out, by_llama_out);
        h->embd = SIZE_MAX;
        for (size_t i = 0; i < h->nout; i++)
            if (!strcmp(h->out[i].name, "token_embd.weight")) h->embd = i;
    }
    size_t nsrcs = 0;
    for (size_t i = 0; i < h->nout; i++)
        nsrcs += h->out[i].exps ? h->out[i].nexp : h->out[i].nmat ? h->out[i].nmat : 1;
    tbx_plan *p = &h->plan;
    tbx_status st = tbx_plan_reserve(p, h->nout, nsrcs, h->err);
    p->ud = h;
    p->reason = hf_reason;
    p->generate = rope_freqs;
    for (size_t i = 0; st == TBX_OK && i < h->nout; i++) {
        hf_out *o = &h->out[i];
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (o->src != UINT64_MAX) tbx_tensor_info_get(h->in, o->src, &ti);
        uint32_t d = 0;
        if (o->exps) o->shape[d++] = o->nexp;
        else if (o->nmat) o->shape[d++] = o->nmat;
        if (o->ndim == d + 2) o->shape[d++] = o->rows;
        o->shape[d++] = o->cols;
        uint32_t skip = 0; /* a preset's file counts dimensions as ggml does: no outer 1s (Qwen2-MoE's
                              [1, n_embd] ffn_gate_inp_shexp is 1-D in llama_model_quantize's) */
        while (h->preset && d - skip > 1 && o->shape[skip] == 1) skip++;
        tbx_plan_tensor t;
        memset(&t, 0, sizeof t);
        t.name = o->name;
        t.name_len = (uint32_t)strlen(o->name);
        t.dtype = (uint16_t)o->dtype;
        t.ndim = (uint16_t)(d - skip);
        t.shape = o->shape + skip;
        t.action = o->action;
        t.why = o->why;
        if (o->src == UINT64_MAX) {
            t.flags = TBX_PT_GEN;
            t.enc = TBX_PENC_ENCODE;
            st = tbx_plan_add(p, &t, NULL, h->err);
            continue;
        }
        if (o->xform == HF_XF_MXFP4) { /* each expert's rows of blocks, repacked */
            t.enc = TBX_PENC_STORED;
            st = tbx_plan_add(p, &t, NULL, h->err);
            tbx_plan_src s;
            memset(&s, 0, sizeof s);
            s.tensor = o->src;
            s.aux = o->aux;
            s.xform = TBX_XF_MXFP4_HF;
            s.rows = o->rows;
            s.cols = o->cols / 32;
            s.step = o->step;
            for (uint64_t x = 0; st == TBX_OK && x < o->nmat; x++) {
                s.first = o->first + x * o->mat;
                st = tbx_plan_add_src(p, &s, h->err);
            }
            continue;
        }
        /* stored bytes when the dtype stays and no value changes (scale, add) */
        t.enc = ti.dtype == o->dtype && o->xform != HF_XF_SCALE && o->xform != HF_XF_ADD
                    ? TBX_PENC_STORED : TBX_PENC_ENCODE;
        tbx_plan_src s;
        memset(&s, 0, sizeof s);
        s.first = o->first;
        s.rows = o->xform == HF_XF_TRANSPOSE ? o->cols : o->rows; /* the view */
        s.cols = o->xform == HF_XF_TRANSPOSE ? o->rows : o->cols;
        s.step = o->step;
        s.k = o->k;
        switch (o->xform) {
        case HF_XF_PERMUTE_Q: case HF_XF_PERMUTE_K:
            s.xform = TBX_XF_PERMUTE_HEADS;
            s.heads = (uint32_t)(o->xform == HF_XF_PERMUTE_Q ? h->n_head : h->n_head_kv);
            break;
        case HF_XF_SCALE: s.xform = TBX_XF_SCALE; break;
        case HF_XF_ADD: s.xform = TBX_XF_ADD; break;
        case HF_XF_TRANSPOSE: s.xform = TBX_XF_TRANSPOSE; break;
        default: break;
        }
        /* tensorbox's own search for the tensors quantized to the type asked for */
        if (h->search && t.enc == TBX_PENC_ENCODE && o->dtype == h->quant)
            t.flags |= TBX_PT_SEARCH;
        st = tbx_plan_add(p, &t, NULL, h->err);
        /* a stack: its experts in order, each a whole input tensor; a 3-D input: each
         * expert's matrix */
        const uint64_t n = o->exps ? o->nexp : o->nmat ? o->nmat : 1;
        for (uint64_t x = 0; st == TBX_OK && x < n; x++) {
            s.tensor = o->exps ? o->exps[x] : o->src;
            s.first = o->first + (o->nmat ? x * o->mat : 0);
            st = tbx_plan_add_src(p, &s, h->err);
        }
    }
    return st;
}

/* llama-quantize's preset (h->preset): each output tensor gets the type llama_model_quantize
 * gives it in the f32 GGUF tensorbox writes of the same directory (the dtypes chosen so far are
 * that file's), decided in llama.cpp's order of names. */
static const hf *sort_h;
static int by_llama_name(const void *a, const void *b) {
    return tbx_lq_name_cmp(sort_h->out[*(const size_t *)a].name,
                           sort_h->out[*(const size_t *)b].name);
}

static tbx_status apply_preset(hf *h) {
    if (!h->preset) return TBX_OK;
    const tbx_gguf_hf_options *o = h->o;
    const size_t n = h->nout;
    tbx_lq_model m;
    memset(&m, 0, sizeof m);
    m.arch = h->a->arch;
    m.n_layer = (uint32_t)h->hpv[HPV_LAYERS];
    m.n_head = (uint32_t)h->n_head;
    m.n_head_kv = (uint32_t)h->n_head_kv;
    m.n_expert = (uint32_t)h->hpv[HPV_EXPERTS];
    tbx_lq_model_finish(&m);
    tbx_lq_rules *rs = NULL;
    tbx_status st = tbx_lq_rules_compile(o->tensor_types, o->n_tensor_types, &rs, h->err);
    if (st != TBX_OK) return st;
    tbx_lq_params lp;
    memset(&lp, 0, sizeof lp);
    lp.ftype = h->preset->ftype;
    lp.deflt = h->preset->deflt;
    lp.only_copy = h->preset->deflt == TBX_DT_INVALID;
    lp.pure = (o->preset_flags & TBX_PRESET_PURE) != 0;
    lp.has_imatrix = (o->preset_flags & TBX_PRESET_HAS_IMATRIX_) != 0;
    lp.quantize_output = !(o->preset_flags & TBX_PRESET_LEAVE_OUTPUT);
    lp.output_type = o->output_tensor_type;
    lp.token_embd_type = o->token_embedding_type;
    tbx_lq_rules_use(rs, &lp);
    const size_t cap = n ? n : 1;
    size_t *order = tbx_calloc(h->al, cap, sizeof *order);
    tbx_lq_tensor *lt = tbx_calloc(h->al, cap, sizeof *lt);
    tbx_lq_choice *ch = tbx_calloc(h->al, cap, sizeof *ch);
    if (!order || !lt || !ch) st = tbx_err_nomem(h->err, "tensor plan");
    for (size_t i = 0; st == TBX_OK && i < n; i++) order[i] = i;
    if (st == TBX_OK) {
        sort_h = h;
        qsort(order, n, sizeof *order, by_llama_name);
    }
    for (size_t k = 0; st == TBX_OK && k < n; k++) {
        const hf_out *x = &h->out[order[k]];
        tbx_lq_tensor *t = &lt[k];
        t->name = x->name;
        t->type = x->dtype;
        t->ne[0] = (int64_t)x->cols;
        t->ne[1] = x->ndim >= 2 ? (int64_t)x->rows : 1;
        t->ne[2] = x->exps ? (int64_t)x->nexp : x->nmat ? (int64_t)x->nmat : 1;
        t->ne[3] = 1;
        t->ndim = t->ne[2] != 1 ? 3 : t->ne[1] != 1 ? 2 : 1;
    }
    if (st == TBX_OK) st = tbx_lq_types(&m, &lp, lt, n, ch, h->err);
    for (size_t k = 0; st == TBX_OK && k < n; k++) {
        if (!ch[k].requires_imatrix || ch[k].why == TBX_LQ_KEPT) continue;
        const tbx_dtype_info *to = tbx_dtype_get(ch[k].type);
        st = hf_fail(h, TBX_E_UNSUPPORTED, lt[k].name, "tensor \"%s\": %s gives it %s, which "
                     "needs an importance matrix (llama.cpp refuses to quantize it without one)",
                     lt[k].name, h->preset->name, to ? to->name : "?");
    }
    for (size_t k = 0; st == TBX_OK && k < n; k++) {
        hf_out *x = &h->out[order[k]];
        const tbx_lq_choice *c = &ch[k];
        if (c->type == x->dtype) continue;
        if (x->xform == HF_XF_MXFP4) { /* llama-quantize requantizes only when allowed to */
            const tbx_dtype_info *to = tbx_dtype_get(c->type);
            st = hf_fail(h, TBX_E_UNSUPPORTED, x->name, "tensor \"%s\" (MXFP4 blocks of %s): "
                         "%s gives it %s, which would requantize MXFP4 (llama-quantize refuses: "
                         "\"requantizing from type mxfp4 is disabled\"); MXFP4_MOE keeps them",
                         x->name, hf_name_of(h, x), h->preset->name, to ? to->name : "?");
            break;
        }
        const tbx_encoder *e = tbx_encoder_for(c->type);
        const tbx_dtype_info *to = tbx_dtype_get(c->type);
        if (!e || e->kind == TBX_ENC_PAYLOAD) {
            st = hf_fail(h, TBX_E_UNSUPPORTED, x->name, "tensor \"%s\": %s gives it %s, which "
                         "tensorbox cannot quantize to yet", x->name, h->preset->name,
                         to ? to->name : "?");
            break;
        }
        x->dtype = c->type;
        x->action = c->why == TBX_LQ_FALLBACK ? TBX_CONVERT_FALLBACK
                    : e->kind == TBX_ENC_FLOAT ? TBX_CONVERT_CAST : TBX_CONVERT_QUANTIZED;
        x->why = c->why == TBX_LQ_FALLBACK ? HF_WHY_FALLBACK : HF_WHY_REQUESTED;
        x->wanted = c->why == TBX_LQ_FALLBACK ? c->wanted : c->type;
    }
    tbx_free(h->al, order, cap * sizeof *order);
    tbx_free(h->al, lt, cap * sizeof *lt);
    tbx_free(h->al, ch, cap * sizeof *ch);
    tbx_lq_rules_free(rs);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
int tbx_gguf_hf_applies(const tbx_file *in) {
    return in && tbx_file_find_section(in, "config.json") >= 0;
}

tbx_dtype tbx_gguf_quant_fallback(tbx_dtype want, uint64_t cols) {
    return tbx_ggml_quant_fallback(want, cols);
}

void tbx_gguf_hf_options_init(tbx_gguf_hf_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    tbx_write_options_init(&opt->write);
}

void tbx_hf_gguf_free(tbx_hf_gguf *h) {
    if (!h) return;
    tbx_plan_free(&h->plan);
    for (size_t i = 0; i < h->nout; i++)
        tbx_free(h->al, h->out[i].exps, h->out[i].cap_exp * sizeof *h->out[i].exps);
    tbx_free(h->al, h->out, h->cap_out * sizeof *h->out);
    for (size_t i = 0; i < h->nlent; i++) tbx_val_free(h->lent[i]);
    drop_tokenizer(h);
    json_decref(h->cfg);
    json_decref(h->tokcfg);
    json_decref(h->modules);
    json_decref(h->pool);
    tbx_free(h->al, h->rope_long, h->rope_long ? (h->rope_nfac ? h->rope_nfac : 1) * sizeof(float) : 0);
    tbx_free(h->al, h->rope_short, h->rope_short ? (h->rope_nfac ? h->rope_nfac : 1) * sizeof(float) : 0);
    tbx_free(h->al, h, sizeof *h);
}

tbx_status tbx_hf_gguf_prepare(tbx_file *in, const tbx_gguf_hf_options *o, tbx_hf_gguf **out,
                               tbx_error *err) {
    *out = NULL;
    if (o->cast_to != TBX_DT_INVALID && o->cast_to != TBX_DT_F32 && o->cast_to != TBX_DT_F16 &&
        o->cast_to != TBX_DT_BF16)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "cast", "casting to %s is not "
                       "supported for llama.cpp (f32, f16, bf16)",
                       tbx_dtype_get(o->cast_to) ? tbx_dtype_get(o->cast_to)->name : "?");
    if (o->quant_to != TBX_DT_INVALID) {
        const tbx_dtype_info *qi = tbx_dtype_get(o->quant_to);
        const tbx_encoder *qe = tbx_encoder_for(o->quant_to);
        if (!qe || qe->kind != TBX_ENC_BLOCK)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant", "quantizing to %s is "
                           "not supported", qi ? qi->name : "?");
    }
    /* GGUF's write option quant_method (the row checks its value at the writer's open):
     * search applies to a quant_to that has one (q2_K .. q6_K) */
    bool search = false;
    const tbx_value *wo = o->write.options;
    for (uint64_t i = 0, n = tbx_value_type_of(wo) == TBX_V_MAP ? tbx_value_len(wo) : 0; i < n;
         i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(wo, i, &kl);
        if (!k || kl != strlen(TBX_GGML_OPT_METHOD) || memcmp(k, TBX_GGML_OPT_METHOD, kl)) continue;
        const char *m = tbx_value_get_str(tbx_value_at(wo, i), NULL);
        search = m && strcmp(m, TBX_GGML_METHOD_SEARCH) == 0;
        const tbx_encoder *qe =
            o->quant_to != TBX_DT_INVALID ? tbx_encoder_for(o->quant_to) : NULL;
        const tbx_dtype_info *qi = tbx_dtype_get(o->quant_to);
        if (search && !(qe && qe->search))
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET,
                           "options." TBX_GGML_OPT_METHOD, "the write option "
                           TBX_GGML_OPT_METHOD "=" TBX_GGML_METHOD_SEARCH " applies to q2_k .. "
                           "q6_k (tensorbox's own scale search), and %s%s is asked for",
                           qi ? "quantizing to " : "no quantization", qi ? qi->name : "");
    }
    hf *h = tbx_calloc(&in->al, 1, sizeof *h);
    if (!h) return tbx_err_nomem(err, "conversion state");
    h->search = search;
    h->in = in;
    h->err = err;
    h->al = &in->al;
    h->quant = o->quant_to;
    h->cast = o->cast_to;
    h->o = o;
    if (o->quant_preset) {
        h->preset = tbx_lq_preset_find(o->quant_preset);
        if (!h->preset || o->quant_to != TBX_DT_INVALID || o->cast_to != TBX_DT_INVALID ||
            (o->preset_flags & ~(uint32_t)(TBX_PRESET_PURE | TBX_PRESET_HAS_IMATRIX_ |
                                         TBX_PRESET_LEAVE_OUTPUT))) {
            const char *why = !h->preset ? "'%s' is not one of llama-quantize's types"
                              : (o->preset_flags & ~(uint32_t)(TBX_PRESET_PURE |
                                                               TBX_PRESET_HAS_IMATRIX_ |
                                                               TBX_PRESET_LEAVE_OUTPUT))
                                  ? "%s: --dry-run and --keep-split apply to a GGUF input "
                                    "(convert the directory to GGUF first)"
                                  : "%s: a preset decides every tensor's type, with no "
                                    "quant_to or cast_to";
            tbx_free(&in->al, h, sizeof *h);
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant_preset", why,
                           o->quant_preset);
        }
    }
    tbx_plan_init(&h->plan, &in->al);
    tbx_status st = load_json(h, "config.json", true, 0, &h->cfg);
    if (st == TBX_OK) st = load_tokenizer(h);
    /* tokenizer_config.json: transformers writes model_max_length 1e30 as an integer
     * (1000000000000000019884624838656) when a tokenizer has no limit, beyond jansson's
     * integers; nothing read from this file is an integer, so its numbers are decoded as reals */
    if (st == TBX_OK)
        st = load_json(h, "tokenizer_config.json", false, JSON_DECODE_INT_AS_REAL, &h->tokcfg);
    if (st == TBX_OK) st = pick_arch(h);
    if (st == TBX_OK) st = plan_tensors(h);
    if (st == TBX_OK) st = check_vocab_rows(h);
    if (st != TBX_OK) {
        tbx_hf_gguf_free(h);
        return st;
    }
    *out = h;
    return TBX_OK;
}

tbx_status tbx_hf_gguf_expect(tbx_hf_gguf *h, tbx_value *meta, tbx_value *derived,
                              tbx_error *err) {
    h->w = NULL;
    h->err = err;
    h->collect = meta;
    tbx_status st = write_hparams(h);
    h->collect = NULL;
    static const char *const GEN[3] = {"rope_freqs.weight", "rope_factors_long.weight",
                                       "rope_factors_short.weight"};
    for (int g = 0; st == TBX_OK && g < 3; g++) {
        if (g == 0 ? !h->rope_llama3 : !h->rope_long) continue;
        st = tbx_value_array_push(derived, tbx_value_new_string(GEN[g], strlen(GEN[g])));
        if (st != TBX_OK) st = tbx_err_nomem(err, GEN[g]);
    }
    return st;
}

tbx_status tbx_hf_gguf_types(tbx_hf_gguf *h, tbx_error *err) {
    h->w = NULL;
    h->err = err;
    tbx_status st = write_hparams(h); /* (no writer: it sets the hyper-parameters only) */
    if (st == TBX_OK) st = resolve_splits(h);
    if (st == TBX_OK) st = check_hparams(h);
    if (st == TBX_OK) st = apply_preset(h);
    return st;
}

size_t tbx_hf_gguf_out_count(const tbx_hf_gguf *h) { return h->nout; }

void tbx_hf_gguf_out_get(const tbx_hf_gguf *h, size_t k, tbx_hf_gguf_out *o) {
    const hf_out *x = &h->out[k];
    o->name = x->name;
    o->type = x->dtype;
    o->wanted = x->why == HF_WHY_FALLBACK ? x->wanted : x->dtype;
    o->fallback = x->why == HF_WHY_FALLBACK;
    o->by_preset = x->why == HF_WHY_REQUESTED || x->why == HF_WHY_FALLBACK;
    o->nsrc = x->src == UINT64_MAX ? 0 : x->exps ? x->nexp : 1;
    o->src = x->exps ? x->exps : &x->src;
}

tbx_status tbx_hf_gguf_write(tbx_hf_gguf *h, tbx_writer *w, tbx_plan **plan, tbx_error *err) {
    tbx_file *in = h->in;
    h->w = w;
    h->err = err;
    *plan = NULL;
    tbx_status st = put_str(h, "general.architecture", h->a->arch);
    if (st == TBX_OK) {
        const char *nm = jstr(h->cfg, "_name_or_path");
        if (nm && strrchr(nm, '/')) nm = strrchr(nm, '/') + 1;
        if (nm && *nm) st = put_str(h, "general.name", nm);
    }
    if (st == TBX_OK) st = write_hparams(h);
    if (st == TBX_OK) st = resolve_splits(h);
    if (st == TBX_OK) st = offset_positions(h);
    if (st == TBX_OK) st = check_hparams(h);
    if (st == TBX_OK) st = apply_preset(h);
    /* general.file_type: a preset's; else that of the bulk dtype (COPY too: the f32 GGUF's) */
    uint32_t ftype = 0;
    if (st == TBX_OK && h->preset && h->preset->deflt != TBX_DT_INVALID) {
        ftype = h->preset->ftype;
    } else if (st == TBX_OK) {
        tbx_dtype bulk = h->quant != TBX_DT_INVALID ? h->quant : h->cast;
        if (bulk == TBX_DT_INVALID) { /* the dtype of the first 2-D float tensor */
            for (uint64_t i = 0; i < tbx_tensor_count(in) && bulk == TBX_DT_INVALID; i++) {
                tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
                if (tbx_tensor_info_get(in, i, &ti) == TBX_OK && ti.ndim == 2 &&
                    (ti.dtype == TBX_DT_F32 || ti.dtype == TBX_DT_F16 ||
                     ti.dtype == TBX_DT_BF16 || ti.dtype == TBX_DT_F64))
                    bulk = ti.dtype;
            }
            if (bulk == TBX_DT_F64) bulk = TBX_DT_F32;
        }
        ftype = tbx_llama_ftype(bulk);
        /* MXFP4 experts kept: llama.cpp's converter calls an f32/f16/bf16 file MOSTLY_MXFP4_MOE */
        if (h->n_mxfp4 && (bulk == TBX_DT_F32 || bulk == TBX_DT_F16 || bulk == TBX_DT_BF16))
            ftype = LLAMA_FTYPE_MXFP4_MOE;
    }
    /* a preset writes them last, as llama_model_quantize does */
    if (st == TBX_OK && !h->preset) st = put_u32(h, "general.file_type", ftype);
    if (st == TBX_OK && !h->preset) st = put_u32(h, "general.quantization_version", 2);
    if (st == TBX_OK) st = write_tokenizer(h);
    if (st == TBX_OK && h->preset) st = put_u32(h, "general.quantization_version", 2);
    if (st == TBX_OK && h->preset) st = put_u32(h, "general.file_type", ftype);
    drop_tokenizer(h); /* its arrays are built: the text is no longer needed */
    if (st == TBX_OK) st = build_plan(h);
    if (st == TBX_OK) *plan = &h->plan;
    return st;
}
