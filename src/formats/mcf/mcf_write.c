/*
 * mcf_write.c - the MCF writer (the reading half of the driver is mcf.c).
 *
 * The writer lays files out as mantle does, so that the same tensors and sections give the
 * same bytes:
 *
 *   plain files (no quantized tensor), as `mantle pack --dedup`:
 *     [header 40][HF sections: config.json, generation_config.json, tokenizer.json, vocab.json,
 *     tokenizer_config.json, merges.txt, then unknown types][ModelInfo][TensorData][TensorIndex]
 *     [directory]
 *   files with quantized tensors, as `mantle quantize`:
 *     [header 40][ModelInfo, HF and unknown sections in type order][TensorData][TensorIndex]
 *     [QuantInfo][directory]
 *
 * A model directory as input (tbx_convert sets w->src_dir: pack mode) is written as pack writes
 * it: chat_template.jinja merged into a re-encoded tokenizer_config.json (mcf_pack.c), ModelInfo
 * always, named after the directory, the shards' "format" tag not kept.
 *
 * Every section starts 8-aligned, every tensor 64-aligned (absolute; opt.alignment for plain
 * files, as pack --tensor-align; TBX_WRITE_NO_DEDUP: no sharing), tensors in byte order of
 * their names; in plain files a tensor whose dtype, shape and bytes equal an earlier one's is
 * not stored again (its index entry points at the earlier payload, as pack's dedup). The
 * directory comes last, sorted by type; the header is written last. Padding is zero.
 *
 * Tensor bytes stream in any order to provisional 64-aligned places; at finish, duplicates are
 * found (a hash per tensor, then a byte comparison of the candidates read back), the payloads
 * after a removed duplicate move down, and the index, QuantInfo, directory and header follow.
 *
 * ModelInfo comes from the metadata "mcf.<field>" (what the reader produces, and what
 * src/models/hf_mcf.c gives a conversion from a Hugging Face config.json as pack fills it: arch,
 * sizes, rope_theta, extras hf.model_type, hf.rope_scaling, hf.config_json_present). Every other
 * metadata entry becomes a KV extra (u32, f32, string). The writer stores a config.json section
 * and does not read it: a caller of tbx_writer gives ModelInfo as metadata.
 * QuantInfo records are made from the dtype (block 32 / super 256) with the domain and clip range
 * of the tensor's quantization description when it has one (tbx_writer_add_quant_tensor: the
 * quantizer's range, or the record of an MCF file converted), else the weights domain and
 * +-max|value| of the decoded payload.
 */
#include "mcf_int.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MW_STATE_TAG 0x4D435657u

typedef struct mw_hash {
    uint64_t h, tail;
    uint8_t ntail;
} mw_hash;

typedef struct mw_state {
    uint32_t tag;
    bool quant_mode;
    size_t nt;
    uint32_t *order;        /* tensor indices sorted by name */
    mw_hash *hash;
    uint64_t *final;        /* final offset per tensor */
    uint32_t *alias;        /* index + 1 of the tensor whose payload it shares, 0: none */
    uint8_t *mi;            /* ModelInfo payload */
    size_t mi_len, mi_cap;
    uint64_t td_start, td_tent_end;
    uint32_t *sec_order;    /* indices of the sections written, in file order (index
                               nsections: the tokenizer_config.json pack makes from the template) */
    uint32_t *sec_type;     /* by index (nsections + 1 entries) */
    size_t nsec;            /* sections written */
    uint64_t align;         /* tensor payload alignment (absolute offsets), 1: none */
    uint8_t *tok;           /* pack's tokenizer_config.json bytes (pack mode), tok_idx: its index */
    size_t tok_len;
    uint32_t tok_idx;
    bool tok_set;
} mw_state;

/* Pack mode: the input is a model directory (tbx_convert sets w->src_dir), so the file is
 * written as mantle's pack writes it (see the header comment). */
static bool mw_pack(const tbx_writer *w) { return w->src_dir != NULL; }
#define MW_TEMPLATE "chat_template.jinja"

/* ------------------------------------------------------------------------------------------ */
/* Checks                                                                                      */
/* ------------------------------------------------------------------------------------------ */
static const mcf_mi_field *mw_field(const char *key, size_t len) {
    for (size_t i = 0; i < mcf_mi_nfields; i++)
        if (strlen(mcf_mi_fields[i].key) == len && memcmp(mcf_mi_fields[i].key, key, len) == 0)
            return &mcf_mi_fields[i];
    return NULL;
}

static bool mw_is(const char *key, size_t len, const char *lit) {
    return strlen(lit) == len && memcmp(key, lit, len) == 0;
}

tbx_status mcf_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                            tbx_error *err) {
    (void)w;
    char q[96];
    tbx_quote_bytes(q, sizeof q, key, key_len, 64);
    if (!tbx_driver_meta_ok(&tbx_driver_mcf, v->type))
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                       "MCF stores u32, f32 and string metadata (ModelInfo), not %s (key \"%s\")",
                       tbx_value_type_name(v->type), q);
    if (key_len == 0 || key_len > UINT32_MAX)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata", "MCF metadata keys are non-empty");
    const mcf_mi_field *fl = mw_field(key, key_len);
    if (fl && v->type != fl->type)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata",
                       "ModelInfo field \"%s\" is %s, not %s", q, tbx_value_type_name(fl->type),
                       tbx_value_type_name(v->type));
    if ((mw_is(key, key_len, MCF_KEY_MODEL_NAME) || mw_is(key, key_len, MCF_KEY_BASE_MODEL)) &&
        v->type != TBX_V_STRING)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata", "\"%s\" must be a string", q);
    if (!fl && v->type == TBX_V_F32 && !isfinite(v->v.f))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "metadata",
                       "ModelInfo extras cannot hold a non-finite f32 (key \"%s\")", q);
    if (fl == NULL && v->type == TBX_V_BYTES &&
        (mw_is(key, key_len, MCF_KEY_MODEL_NAME) || mw_is(key, key_len, MCF_KEY_BASE_MODEL)))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata", "\"%s\" must be a string", q);
    if ((v->type == TBX_V_STRING || v->type == TBX_V_BYTES) && v->v.s.n > UINT32_MAX)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "metadata", "string of \"%s\" too long", q);
    return TBX_OK;
}

/* The type a section name is stored as (0: none). */
static uint32_t mw_section_type(const char *name, size_t len) {
    uint32_t t = mcf_hf_type(name, len);
    if (t) return t;
    const char *pre = "mcf.section.0x";
    size_t pl = strlen(pre);
    if (len != pl + 4 || memcmp(name, pre, pl) != 0) return 0;
    char hex[5];
    memcpy(hex, name + pl, 4);
    hex[4] = 0;
    char *end;
    unsigned long v = strtoul(hex, &end, 16);
    if (*end || v <= MCF_SEC_TENSORDATA) return 0;
    return (uint32_t)v;
}

tbx_status mcf_w_check_section(tbx_writer *w, const char *name, uint32_t type, size_t len,
                               tbx_error *err) {
    (void)type;
    (void)len;
    size_t nl = strlen(name);
    if (mw_pack(w) && strcmp(name, MW_TEMPLATE) == 0) return TBX_OK; /* merged, as pack does */
    uint32_t t = mw_section_type(name, nl);
    char q[96];
    tbx_quote_bytes(q, sizeof q, name, nl, 64);
    if (!t)
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "section",
                       "MCF has no section for \"%s\" (it stores config.json, "
                       "generation_config.json, tokenizer.json, tokenizer_config.json, vocab.json, "
                       "merges.txt and mcf.section.0xTTTT)", q);
    /* two sections of one type are found by mcf_w_layout once all are in (a search of the
     * sections per section was quadratic: 200,000 of them took 108 s) */
    return TBX_OK;
}

tbx_status mcf_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    (void)w;
    char q[96];
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    tbx_dtype dt = (tbx_dtype)t->dtype;
    if (!mcf_w_dtype_ok(dt)) {
        const tbx_dtype_info *e = tbx_writer_dtype(w, dt);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": MCF cannot store dtype %s", q, e ? e->name : "?");
    }
    if (!t->has_data)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": MCF tensors always have data", q);
    if (t->name_len == 0)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.name", "MCF tensor names are non-empty");
    const char *why = "";
    uint64_t n;
    tbx_status st = mcf_payload_size(dt, t->shape, t->ndim, MCF_DOMAIN_WEIGHTS, &n, &why);
    if (st != TBX_OK)
        return tbx_err(err, st, TBX_NO_OFFSET, "tensor.shape", "tensor \"%s\": %s", q,
                       st == TBX_E_OVERFLOW ? "size overflows 64 bits" : why);
    t->nbytes = n;
    return TBX_OK;
}

/* A tensor's quantization description (tbx_writer_add_quant_tensor; tbx_convert passes the one
 * of an MCF tensor read, and the MCF quantizer its own): QuantInfo records the domain and the
 * clip range of MCF's quantized dtypes (mcf_w_finish); nothing else has a place in the file. */
tbx_status mcf_w_check_quant(tbx_writer *w, tbx_wtensor *t, const tbx_quant_info *qd,
                             tbx_error *err) {
    (void)w;
    char q[96];
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    tbx_dtype dt = (tbx_dtype)t->dtype;
    if (!mcf_is_quant(dt) || qd->method != TBX_QUANT_LINEAR) {
        const tbx_dtype_info *e = tbx_writer_dtype(w, dt);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                       "tensor \"%s\": MCF stores a quantization description only with its own "
                       "quantized dtypes (mcf_q8 .. mcf_int4), not %s %s", q,
                       tbx_quant_method_name(qd->method), e ? e->name : "?");
    }
    if (qd->domain == TBX_QDOMAIN_ACTIVATIONS) {
        if (mcf_is_qk(dt))
            return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "quant.domain",
                           "tensor \"%s\": MCF's q/k families are for weights only", q);
        const char *why = "";
        uint64_t n;
        tbx_status st = mcf_payload_size(dt, t->shape, t->ndim, MCF_DOMAIN_ACTIVATIONS, &n, &why);
        if (st != TBX_OK) return tbx_err(err, st, TBX_NO_OFFSET, "tensor.shape", "tensor \"%s\": %s", q, why);
        t->nbytes = n;
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* ModelInfo                                                                                   */
/* ------------------------------------------------------------------------------------------ */
typedef tbx_membuf mw_buf;

/* n bytes from p, or n zero bytes when p is NULL */
static void mb_put(mw_buf *b, const void *p, size_t n) { tbx_membuf_put(b, p, n); }
static void mb_align8(mw_buf *b) { if (b->n % 8) mb_put(b, NULL, 8 - b->n % 8); }
static uint64_t mb_blob(mw_buf *b, const void *p, size_t n) {
    mb_align8(b);
    uint64_t off = b->n;
    uint8_t l[4];
    tbx_st32(l, (uint32_t)n);
    mb_put(b, l, 4);
    mb_put(b, p, n);
    mb_align8(b);
    return off;
}
static uint64_t mb_word(mw_buf *b, uint32_t v) {
    mb_align8(b);
    uint64_t off = b->n;
    uint8_t l[4];
    tbx_st32(l, v);
    mb_put(b, l, 4);
    mb_align8(b);
    return off;
}

/* One KV extra: a borrowed key and a value (type, u32 bits or string). */
typedef struct mw_kv {
    const char *key;
    size_t klen;
    uint32_t type;
    uint32_t bits;
    const char *s;
    size_t slen;
    bool blob;      /* BYTES: always a blob, even when empty */
} mw_kv;

static int mw_kv_cmp(const void *a, const void *b) {
    const mw_kv *x = a, *y = b;
    size_t m = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, m);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static uint32_t mw_f32_bits(double d) {
    float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static tbx_status mw_model_info(tbx_writer *w, mw_state *s, tbx_error *err) {
    uint8_t fx[MCF_MI_FIXED];
    memset(fx, 0, sizeof fx);
    tbx_st32(fx, 1);
    const tbx_value *name = NULL, *base = NULL;
    bool have_fields = false;
    size_t cap = w->nmeta + 4;
    mw_kv *kv = tbx_calloc(&w->al, cap, sizeof *kv);
    if (!kv) return tbx_err_nomem(err, "ModelInfo extras");
    size_t nkv = 0;
    for (size_t i = 0; i < w->nmeta; i++) {
        const tbx_meta_entry *e = &w->meta[i];
        /* a directory's safetensors "format" tag (pt, tf, ...): pack keeps no shard metadata */
        if (mw_pack(w) && mw_is(e->key, e->key_len, "format")) continue;
        const mcf_mi_field *fl = mw_field(e->key, e->key_len);
        if (fl) {
            have_fields = true;
            tbx_st32(fx + fl->off, fl->type == TBX_V_U32 ? (uint32_t)e->value->v.u
                                                        : mw_f32_bits(e->value->v.f));
            continue;
        }
        if (mw_is(e->key, e->key_len, MCF_KEY_MODEL_NAME)) { name = e->value; have_fields = true; continue; }
        if (mw_is(e->key, e->key_len, MCF_KEY_BASE_MODEL)) { base = e->value; have_fields = true; continue; }
        mw_kv *k = &kv[nkv++];
        k->key = e->key;
        k->klen = e->key_len;
        if (e->value->type == TBX_V_STRING || e->value->type == TBX_V_BYTES) {
            k->type = MCF_KV_STRING;
            k->s = e->value->v.s.p;
            k->slen = e->value->v.s.n;
            k->blob = e->value->type == TBX_V_BYTES;
        } else {
            k->type = e->value->type == TBX_V_U32 ? MCF_KV_U32 : MCF_KV_F32;
            k->bits = e->value->type == TBX_V_U32 ? (uint32_t)e->value->v.u
                                                  : mw_f32_bits(e->value->v.f);
        }
    }
    /* a Hugging Face model's config.json is not read here: the conversion gives ModelInfo as the
     * metadata above (src/models/hf_mcf.c, as mantle's pack fills it) */
    if (!have_fields && nkv == 0 && !mw_pack(w)) { /* nothing to say: no ModelInfo */
        tbx_free(&w->al, kv, cap * sizeof *kv);
        return TBX_OK;
    }
    qsort(kv, nkv, sizeof *kv, mw_kv_cmp);
    mw_buf b = {&w->al, NULL, 0, 0, false};
    mb_put(&b, NULL, MCF_MI_FIXED);
    if (name && name->v.s.n) tbx_st64(fx + 56, mb_blob(&b, name->v.s.p, name->v.s.n));
    else if (!name && mw_pack(w)) /* pack: the directory's name */
        tbx_st64(fx + 56, mb_blob(&b, w->src_dir, strlen(w->src_dir)));
    if (base && base->v.s.n) tbx_st64(fx + 64, mb_blob(&b, base->v.s.p, base->v.s.n));
    uint8_t *ent = nkv ? tbx_calloc(&w->al, nkv, MCF_MI_KV) : NULL;
    if (nkv && !ent) b.oom = true;
    for (size_t i = 0; i < nkv && !b.oom; i++) {
        uint8_t *e = ent + i * MCF_MI_KV;
        tbx_st64(e, mb_blob(&b, kv[i].key, kv[i].klen));
        tbx_st32(e + 8, kv[i].type);
        uint64_t voff = 0;
        if (kv[i].type == MCF_KV_STRING) {
            if (kv[i].slen || kv[i].blob) voff = mb_blob(&b, kv[i].s, kv[i].slen);
        }
        else voff = mb_word(&b, kv[i].bits);
        tbx_st64(e + 16, voff);
    }
    mb_align8(&b);
    tbx_st32(fx + 72, (uint32_t)nkv);
    tbx_st64(fx + 80, b.n);
    if (nkv) mb_put(&b, ent, nkv * MCF_MI_KV);
    tbx_free(&w->al, ent, nkv * MCF_MI_KV);
    tbx_free(&w->al, kv, cap * sizeof *kv);
    if (b.oom) { tbx_free(&w->al, b.p, b.cap); return tbx_err_nomem(err, "ModelInfo"); }
    memcpy(b.p, fx, sizeof fx);
    s->mi = b.p;
    s->mi_len = b.n;
    s->mi_cap = b.cap;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Layout                                                                                      */
/* ------------------------------------------------------------------------------------------ */
static int mw_name_cmp(const tbx_writer *w, uint32_t a, uint32_t b) {
    const tbx_wtensor *x = &w->tensors[a], *y = &w->tensors[b];
    size_t m = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, m);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* merge sort of tensor indices by name (stable, no global state) */
static void mw_sort(const tbx_writer *w, uint32_t *v, uint32_t *tmp, size_t n) {
    if (n < 2) return;
    size_t h = n / 2;
    mw_sort(w, v, tmp, h);
    mw_sort(w, v + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = mw_name_cmp(w, v[i], v[j]) <= 0 ? v[i++] : v[j++];
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static void mw_state_free(tbx_writer *w) {
    mw_state *s = w->drv_state;
    if (!s) return;
    size_t nt = s->nt ? s->nt : 1; /* what mcf_w_layout allocated: one element when none */
    tbx_free(&w->al, s->order, nt * sizeof *s->order);
    tbx_free(&w->al, s->hash, nt * sizeof *s->hash);
    tbx_free(&w->al, s->final, nt * sizeof *s->final);
    tbx_free(&w->al, s->alias, nt * sizeof *s->alias);
    tbx_free(&w->al, s->mi, s->mi_cap);
    tbx_free(&w->al, s->sec_order, (w->nsections + 1) * sizeof *s->sec_order);
    tbx_free(&w->al, s->sec_type, (w->nsections + 1) * sizeof *s->sec_type);
    tbx_free(&w->al, s->tok, s->tok_len);
    tbx_free(&w->al, s, sizeof *s);
    w->drv_state = NULL;
}

void mcf_w_free(tbx_writer *w) { mw_state_free(w); }

/* The writer's own options (tbx_write_options.options). */
const tbx_format_option mcf_w_options[] = {
    {"dedup", TBX_V_BOOL, 0, 0, NULL,
     "store equal tensors (dtype, shape, bytes) once, as mantle's pack --dedup (default true)"},
    /* applied by the conversion that quantizes to MCF's families (mcfq.h) */
    {TBX_MCFQ_OPT_METHOD, TBX_V_STRING, 0, 0, "best mantle",
     "with --quant to an MCF family: best (default: nearest f16 scales, searched sub-scales, "
     "a lower error) or mantle (mantle's quantize, byte for byte)"},
    {TBX_MCFQ_OPT_CLIP_MIN, TBX_V_F64, 0, 0, NULL,
     "with --quant to an MCF family, and quant_clip_max: clamp every tensor to [MIN, MAX] "
     "(mantle quantize's --min-clip; default: each tensor's -max|value|)"},
    {TBX_MCFQ_OPT_CLIP_MAX, TBX_V_F64, 0, 0, NULL,
     "with --quant to an MCF family, and quant_clip_min: the top of the clip range "
     "(mantle quantize's --max-clip; default: each tensor's +max|value|)"},
    {NULL, TBX_V_NULL, 0, 0, NULL, NULL},
};

/* Whether the caller gave option `key` (core checked its type at open). */
static bool mw_opt_given(const tbx_writer *w, const char *key) {
    return tbx_writer_opt_str(w, key, NULL) != NULL || !isnan(tbx_writer_opt_f64(w, key, NAN));
}

tbx_status mcf_w_check_options(tbx_writer *w, tbx_error *err) {
    if ((w->opt.flags & TBX_WRITE_NO_DEDUP) && tbx_writer_opt_bool(w, "dedup", false))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "options.dedup",
                       "the write option dedup=true and the flag TBX_WRITE_NO_DEDUP disagree");
    /* the clip range: both bounds or neither, each an f32, min <= max */
    const bool has_lo = mw_opt_given(w, TBX_MCFQ_OPT_CLIP_MIN);
    const bool has_hi = mw_opt_given(w, TBX_MCFQ_OPT_CLIP_MAX);
    if (has_lo != has_hi)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET,
                       has_lo ? "options." TBX_MCFQ_OPT_CLIP_MAX : "options." TBX_MCFQ_OPT_CLIP_MIN,
                       "MCF write option %s is given without %s: a clip range needs both bounds",
                       has_lo ? TBX_MCFQ_OPT_CLIP_MIN : TBX_MCFQ_OPT_CLIP_MAX,
                       has_lo ? TBX_MCFQ_OPT_CLIP_MAX : TBX_MCFQ_OPT_CLIP_MIN);
    if (has_lo) {
        const double lo = tbx_writer_opt_f64(w, TBX_MCFQ_OPT_CLIP_MIN, 0);
        const double hi = tbx_writer_opt_f64(w, TBX_MCFQ_OPT_CLIP_MAX, 0);
        const double big = lo > FLT_MAX || lo < -FLT_MAX ? lo : hi;
        if (lo > FLT_MAX || lo < -FLT_MAX || hi > FLT_MAX || hi < -FLT_MAX)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET,
                           big == lo ? "options." TBX_MCFQ_OPT_CLIP_MIN
                                     : "options." TBX_MCFQ_OPT_CLIP_MAX,
                           "MCF write option %s is %g, beyond the range of f32 (the clip range "
                           "is recorded as two f32)",
                           big == lo ? TBX_MCFQ_OPT_CLIP_MIN : TBX_MCFQ_OPT_CLIP_MAX, big);
        if (!((float)lo <= (float)hi))
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET,
                           "options." TBX_MCFQ_OPT_CLIP_MIN,
                           "MCF clip range [%g, %g]: %s must not exceed %s", lo, hi,
                           TBX_MCFQ_OPT_CLIP_MIN, TBX_MCFQ_OPT_CLIP_MAX);
    }
    return TBX_OK;
}

/* The quantization options are the conversion's (TBX_WRITE_QUANTIZING_): a writer given them
 * otherwise stores the tensors it is given and would apply them to nothing. */
static tbx_status mw_check_quant_opts(const tbx_writer *w, tbx_error *err) {
    if (w->opt.flags & TBX_WRITE_QUANTIZING_) return TBX_OK;
    const char *key = mw_opt_given(w, TBX_MCFQ_OPT_METHOD)     ? TBX_MCFQ_OPT_METHOD
                      : mw_opt_given(w, TBX_MCFQ_OPT_CLIP_MIN) ? TBX_MCFQ_OPT_CLIP_MIN
                                                                : NULL;
    if (!key) return TBX_OK;
    char field[48];
    snprintf(field, sizeof field, "options.%s", key);
    return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                   "MCF write option %s applies to a conversion quantizing to one of MCF's "
                   "families (tbx_convert with quant_to, tbx convert --quant); this writer "
                   "quantizes nothing: it stores the tensors it is given", key);
}

static uint64_t al8(uint64_t x) { return (x + 7) & ~(uint64_t)7; }
/* x rounded up to a multiple of a (any a >= 1: pack aligns absolute offsets, e.g. to 32) */
static uint64_t mw_al(uint64_t x, uint64_t a) { return x % a ? x + (a - x % a) : x; }

/* A written section's bytes: pack's tokenizer_config.json, or the section given. */
static void mw_sec_bytes(const tbx_writer *w, const mw_state *s, uint32_t k, const void **p,
                         size_t *n) {
    if (s->tok_set && k == s->tok_idx) { *p = s->tok; *n = s->tok_len; return; }
    *p = w->sections[k].data;
    *n = w->sections[k].len;
}

/* Pack mode: tokenizer_config.json as pack writes it (re-encoded, chat_template.jinja merged;
 * mcf_pack.c), made from the two files when the directory has them. */
static tbx_status mw_pack_tokcfg(tbx_writer *w, mw_state *s, tbx_error *err) {
    const tbx_wsection *cfg = NULL, *tpl = NULL;
    uint32_t ci = (uint32_t)w->nsections;
    for (size_t i = 0; i < w->nsections; i++) {
        if (strcmp(w->sections[i].name, "tokenizer_config.json") == 0) { cfg = &w->sections[i]; ci = (uint32_t)i; }
        if (strcmp(w->sections[i].name, MW_TEMPLATE) == 0) tpl = &w->sections[i];
    }
    tbx_status st = mcf_pack_tokcfg(&w->al, cfg ? cfg->data : NULL, cfg ? cfg->len : 0, cfg != NULL,
                                    tpl ? tpl->data : NULL, tpl ? tpl->len : 0, tpl != NULL,
                                    &s->tok, &s->tok_len, err);
    if (st != TBX_OK) return st;
    s->tok_idx = ci;
    s->tok_set = cfg != NULL || s->tok != NULL;
    return TBX_OK;
}

/* pack's order of the HF sections: config, generation_config, tokenizer, vocab,
 * tokenizer_config, merges; then unknown types in type order */
static unsigned mw_pack_rank(uint32_t t) {
    switch (t) {
    case MCF_SEC_HF_CONFIG: return 0;
    case MCF_SEC_HF_GENCONFIG: return 1;
    case MCF_SEC_HF_TOKENIZER: return 2;
    case MCF_SEC_HF_VOCAB: return 3;
    case MCF_SEC_HF_TOKCONFIG: return 4;
    case MCF_SEC_HF_MERGES: return 5;
    default: return 6;
    }
}

typedef struct mw_seckey {
    uint64_t key;   /* pack rank << 32 | type */
    uint32_t idx;   /* the section's index */
} mw_seckey;

static int mw_seckey_cmp(const void *a, const void *b) {
    const mw_seckey *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

tbx_status mcf_w_layout(tbx_writer *w, tbx_error *err) {
    tbx_status qst = mw_check_quant_opts(w, err);
    if (qst != TBX_OK) return qst;
    if (w->ntensors > UINT32_MAX)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "tensors", "more than 2^32-1 tensors");
    mw_state *s = tbx_calloc(&w->al, 1, sizeof *s);
    if (!s) return tbx_err_nomem(err, "MCF writer");
    w->drv_state = s;
    s->tag = MW_STATE_TAG;
    size_t nt = s->nt = w->ntensors, ns = w->nsections;
    s->order = tbx_calloc(&w->al, nt ? nt : 1, sizeof *s->order);
    s->hash = tbx_calloc(&w->al, nt ? nt : 1, sizeof *s->hash);
    s->final = tbx_calloc(&w->al, nt ? nt : 1, sizeof *s->final);
    s->alias = tbx_calloc(&w->al, nt ? nt : 1, sizeof *s->alias);
    uint32_t *tmp = tbx_calloc(&w->al, nt ? nt : 1, sizeof *tmp);
    s->sec_order = tbx_calloc(&w->al, ns + 1, sizeof *s->sec_order);
    s->sec_type = tbx_calloc(&w->al, ns + 1, sizeof *s->sec_type);
    if (!s->order || !s->hash || !s->final || !s->alias || !tmp || !s->sec_order || !s->sec_type) {
        tbx_free(&w->al, tmp, (nt ? nt : 1) * sizeof *tmp);
        return tbx_err_nomem(err, "MCF writer");
    }
    s->nt = nt ? nt : 1;
    for (size_t i = 0; i < nt; i++) {
        s->order[i] = (uint32_t)i;
        s->hash[i].h = 0xcbf29ce484222325ull;
        if (mcf_is_quant((tbx_dtype)w->tensors[i].dtype)) s->quant_mode = true;
    }
    mw_sort(w, s->order, tmp, nt);
    tbx_free(&w->al, tmp, (nt ? nt : 1) * sizeof *tmp);
    /* tensor alignment: 64 (mantle's), or --alignment for plain files (pack --tensor-align:
     * 0 is 64, 1 none); quantized files keep 64 (mantle's q/k payloads need it) */
    s->align = 64;
    if (w->opt.alignment && !s->quant_mode) s->align = w->opt.alignment;
    else if (w->opt.alignment && w->opt.alignment != 64)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "alignment",
                       "MCF files with quantized tensors are 64-aligned (alignment %u)",
                       w->opt.alignment);
    tbx_status st = mw_model_info(w, s, err);
    if (st == TBX_OK && mw_pack(w)) st = mw_pack_tokcfg(w, s, err);
    if (st != TBX_OK) return st;
    /* sections: file order (pack mode: the template is merged, not written) */
    s->nsec = 0;
    for (size_t i = 0; i < ns; i++) {
        s->sec_type[i] = mw_section_type(w->sections[i].name, strlen(w->sections[i].name));
        if (s->sec_type[i] == 0) continue;
        if (s->tok_set && i == s->tok_idx && !s->tok) continue; /* pack writes no empty one */
        s->sec_order[s->nsec++] = (uint32_t)i;
    }
    if (s->tok_set && s->tok_idx == ns && s->tok) { /* made from the template alone */
        s->sec_type[ns] = MCF_SEC_HF_TOKCONFIG;
        s->sec_order[s->nsec++] = (uint32_t)ns;
    }
    /* file order: by (pack rank, type) (type alone for quantized files); one type twice is
     * refused, the later of the two named */
    if (s->nsec > 1) {
        mw_seckey *k = tbx_calloc(&w->al, s->nsec, sizeof *k);
        if (!k) return tbx_err_nomem(err, "MCF writer");
        for (size_t i = 0; i < s->nsec; i++) {
            uint32_t t = s->sec_type[s->sec_order[i]];
            unsigned r = s->quant_mode ? 0 : mw_pack_rank(t);
            k[i].key = (uint64_t)r << 32 | t;
            k[i].idx = s->sec_order[i];
        }
        qsort(k, s->nsec, sizeof *k, mw_seckey_cmp);
        tbx_status dst = TBX_OK;
        for (size_t i = 0; i < s->nsec; i++) {
            s->sec_order[i] = k[i].idx;
            if (i > 0 && k[i].key == k[i - 1].key && dst == TBX_OK) {
                uint32_t later = k[i].idx > k[i - 1].idx ? k[i].idx : k[i - 1].idx;
                char q[96];
                const char *nm = later < ns ? w->sections[later].name : "tokenizer_config.json";
                tbx_quote_bytes(q, sizeof q, nm, strlen(nm), 64);
                dst = tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "section",
                              "section \"%s\" given twice", q);
            }
        }
        tbx_free(&w->al, k, s->nsec * sizeof *k);
        if (dst != TBX_OK) return dst;
    }
    /* provisional tensor places: after the sections and ModelInfo, 64-aligned, name order */
    uint64_t pos = MCF_HEADER_SIZE;
    for (size_t i = 0; i < s->nsec; i++) {
        const void *p;
        size_t n;
        mw_sec_bytes(w, s, s->sec_order[i], &p, &n);
        pos = al8(pos) + n;
    }
    if (s->mi) pos = al8(pos) + s->mi_len;
    s->td_start = al8(pos);
    pos = s->td_start;
    for (size_t k = 0; k < nt; k++) {
        tbx_wtensor *t = &w->tensors[s->order[k]];
        pos = mw_al(pos, s->align);
        t->offset = pos;
        if (!tbx_add_u64(pos, t->nbytes, &pos))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "file size overflows");
    }
    s->td_tent_end = pos;
    w->end = pos;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Data                                                                                        */
/* ------------------------------------------------------------------------------------------ */
static void mw_hash_word(mw_hash *h, uint64_t v) {
    h->h = (h->h ^ v) * 0x100000001b3ull;
    h->h ^= h->h >> 29;
}

static void mw_hash_update(mw_hash *h, const uint8_t *p, size_t n) {
    while (n && h->ntail) {
        h->tail |= (uint64_t)*p++ << (8 * h->ntail);
        n--;
        if (++h->ntail == 8) { mw_hash_word(h, h->tail); h->tail = 0; h->ntail = 0; }
    }
    for (; n >= 8; n -= 8, p += 8) mw_hash_word(h, tbx_ld64(p));
    while (n--) {
        h->tail |= (uint64_t)*p++ << (8 * h->ntail);
        h->ntail++;
    }
}

tbx_status mcf_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                      tbx_error *err) {
    mw_state *s = w->drv_state;
    mw_hash_update(&s->hash[t - w->tensors], data, len);
    return tbx_out_pwrite(&w->out, t->offset + w->cur_written, data, len, err);
}

tbx_status mcf_w_tensor_done(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    (void)err;
    mw_state *s = w->drv_state;
    mw_hash *h = &s->hash[t - w->tensors];
    if (h->ntail) mw_hash_word(h, h->tail ^ ((uint64_t)h->ntail << 56));
    h->ntail = 0;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Finish                                                                                      */
/* ------------------------------------------------------------------------------------------ */
#define MW_COPY ((size_t)1 << 20)

static tbx_status mw_same_bytes(tbx_writer *w, uint64_t a, uint64_t b, uint64_t n, uint8_t *buf,
                                bool *same, tbx_error *err) {
    *same = true;
    for (uint64_t d = 0; d < n && *same;) {
        size_t k = n - d < MW_COPY / 2 ? (size_t)(n - d) : MW_COPY / 2;
        tbx_status st = tbx_out_pread(&w->out, a + d, buf, k, err);
        if (st == TBX_OK) st = tbx_out_pread(&w->out, b + d, buf + MW_COPY / 2, k, err);
        if (st != TBX_OK) return st;
        *same = memcmp(buf, buf + MW_COPY / 2, k) == 0;
        d += k;
    }
    return TBX_OK;
}

static bool mw_same_desc(const tbx_wtensor *x, const tbx_wtensor *y) {
    if (x->dtype != y->dtype || x->ndim != y->ndim || x->nbytes != y->nbytes) return false;
    for (uint32_t d = 0; d < x->ndim; d++)
        if (x->shape[d] != y->shape[d]) return false;
    return true;
}

/* max |value| of a quantized tensor's decoded payload (read back from the output) */
static tbx_status mw_maxabs(tbx_writer *w, const tbx_wtensor *t, uint8_t *buf, float *out,
                            tbx_error *err) {
    tbx_dtype dt = (tbx_dtype)t->dtype;
    float m = 0;
    uint64_t base = t->offset;
    if (mcf_is_qk(dt)) {
        tbx_mcfq_layout L;
        tbx_mcfq_layout_get(mcf_kind(dt), t->shape[0], t->shape[1], &L);
        uint64_t nsc = L.super ? L.spr : L.bpr;
        size_t room = MW_COPY / 4; /* scales, sub and codes of one row at most that much each */
        float *row = tbx_malloc(&w->al, (size_t)L.cols * sizeof(float));
        if (!row) return tbx_err_nomem(err, "MCF clip range");
        tbx_status st = TBX_OK;
        uint8_t *big = NULL;
        size_t bigcap = 0;
        for (uint64_t r = 0; r < L.rows && st == TBX_OK; r++) {
            size_t need = (size_t)(nsc * 2 + L.bpr + L.row_code_bytes);
            uint8_t *p = buf;
            if (need > room * 3) {
                if (need > bigcap) {
                    uint8_t *q = tbx_realloc(&w->al, big, bigcap, need);
                    if (!q) { st = tbx_err_nomem(err, "MCF clip range"); break; }
                    big = q;
                    bigcap = need;
                }
                p = big;
            }
            uint8_t *sc = p, *sb = p + nsc * 2, *cd = sb + L.bpr;
            st = tbx_out_pread(&w->out, base + L.scales_off + r * nsc * 2, sc, (size_t)(nsc * 2), err);
            if (st == TBX_OK && L.super)
                st = tbx_out_pread(&w->out, base + L.sub_off + r * L.bpr, sb, (size_t)L.bpr, err);
            if (st == TBX_OK)
                st = tbx_out_pread(&w->out, base + L.codes_off + r * L.row_code_bytes, cd,
                                   (size_t)L.row_code_bytes, err);
            if (st != TBX_OK) break;
            tbx_mcfq_dequant_rows(&L, sc, L.super ? sb : NULL, cd, 1, row);
            for (uint64_t c = 0; c < L.cols; c++)
                if (fabsf(row[c]) > m) m = fabsf(row[c]);
        }
        tbx_free(&w->al, big, bigcap);
        tbx_free(&w->al, row, (size_t)L.cols * sizeof(float));
        if (st != TBX_OK) return st;
    } else {
        uint8_t b[4];
        tbx_status st = tbx_out_pread(&w->out, base, b, 4, err);
        if (st != TBX_OK) return st;
        float sc = fabsf(tbx_ldf32(b));
        uint64_t n = tbx_wt_nelems(t), nb = dt == TBX_DT_MCF_INT8 ? n : (n + 1) / 2;
        int qmax = 0;
        for (uint64_t d = 0; d < nb;) {
            size_t k = nb - d < MW_COPY ? (size_t)(nb - d) : MW_COPY;
            st = tbx_out_pread(&w->out, base + 64 + d, buf, k, err);
            if (st != TBX_OK) return st;
            for (size_t i = 0; i < k; i++) {
                int v;
                if (dt == TBX_DT_MCF_INT8) v = (int8_t)buf[i];
                else {
                    int lo = buf[i] & 15, hi = buf[i] >> 4;
                    lo -= lo & 8 ? 16 : 0;
                    hi -= hi & 8 ? 16 : 0;
                    v = abs(lo) > abs(hi) || (d + i) * 2 + 1 >= n ? lo : hi;
                }
                if (abs(v) > qmax) qmax = abs(v);
            }
            d += k;
        }
        m = (float)qmax * sc;
    }
    *out = m;
    return TBX_OK;
}

tbx_status mcf_w_finish(tbx_writer *w, tbx_error *err) {
    mw_state *s = w->drv_state;
    size_t nt = w->ntensors;
    uint8_t *buf = tbx_malloc(&w->al, MW_COPY);
    if (!buf) return tbx_err_nomem(err, "MCF writer buffer");
    tbx_status st = TBX_OK;
    /* duplicates (plain files): an earlier tensor of the same dtype, shape and bytes */
    if (!s->quant_mode && !(w->opt.flags & TBX_WRITE_NO_DEDUP) &&
        tbx_writer_opt_bool(w, "dedup", true))
        for (size_t k = 1; k < nt && st == TBX_OK; k++) {
            uint32_t j = s->order[k];
            const tbx_wtensor *y = &w->tensors[j];
            for (size_t m = 0; m < k && st == TBX_OK; m++) {
                uint32_t i = s->order[m];
                if (s->alias[i] || s->hash[i].h != s->hash[j].h ||
                    !mw_same_desc(&w->tensors[i], y))
                    continue;
                bool same;
                st = mw_same_bytes(w, w->tensors[i].offset, y->offset, y->nbytes, buf, &same, err);
                if (st == TBX_OK && same) { s->alias[j] = i + 1; break; }
            }
        }
    /* final places; move payloads down over removed duplicates, zero the gaps */
    uint64_t pos = s->td_start, prev_end = s->td_start;
    for (size_t k = 0; k < nt && st == TBX_OK; k++) {
        uint32_t j = s->order[k];
        const tbx_wtensor *t = &w->tensors[j];
        pos = mw_al(pos, s->align);
        if (s->alias[j]) { s->final[j] = s->final[s->alias[j] - 1]; continue; }
        s->final[j] = pos;
        if (pos > prev_end) st = tbx_out_zero(&w->out, prev_end, pos - prev_end, err);
        for (uint64_t d = 0; d < t->nbytes && st == TBX_OK && pos != t->offset;) {
            size_t c = t->nbytes - d < MW_COPY ? (size_t)(t->nbytes - d) : MW_COPY;
            st = tbx_out_pread(&w->out, t->offset + d, buf, c, err);
            if (st == TBX_OK) st = tbx_out_pwrite(&w->out, pos + d, buf, c, err);
            d += c;
        }
        pos += t->nbytes;
        prev_end = pos;
    }
    if (st == TBX_OK && pos > prev_end) st = tbx_out_zero(&w->out, prev_end, pos - prev_end, err);
    uint64_t td_end = pos;
    /* QuantInfo records need the decoded payloads (clip ranges) from their original places */
    uint8_t *qi = NULL;
    size_t nq = 0, qi_len = 0;
    if (st == TBX_OK && s->quant_mode) {
        for (size_t i = 0; i < nt; i++) nq += mcf_is_quant((tbx_dtype)w->tensors[i].dtype);
        qi_len = MCF_QI_HEADER + nq * MCF_QI_RECORD;
        qi = tbx_calloc(&w->al, 1, qi_len);
        if (!qi) st = tbx_err_nomem(err, "QuantInfo");
        if (qi) { tbx_st32(qi, 1); tbx_st32(qi + 4, (uint32_t)nq); }
        size_t r = 0;
        for (size_t k = 0; k < nt && st == TBX_OK; k++) {
            tbx_wtensor *t = &w->tensors[s->order[k]];
            tbx_dtype dt = (tbx_dtype)t->dtype;
            if (!mcf_is_quant(dt)) continue;
            uint64_t keep = t->offset;
            t->offset = s->final[s->order[k]]; /* quant mode: nothing moved */
            /* the clip range and domain of the description given, else +-max|decoded value| */
            const tbx_quant_info *qd = tbx_writer_tensor_quant_(w, s->order[k]);
            float lo, m = 0;
            if (qd && qd->has_clip) {
                lo = (float)qd->clip_min;
                m = (float)qd->clip_max;
            } else {
                st = mw_maxabs(w, t, buf, &m, err);
                lo = -m;
            }
            t->offset = keep;
            uint8_t *e = qi + MCF_QI_HEADER + r++ * MCF_QI_RECORD;
            uint16_t blk, sup;
            mcf_quant_geometry(dt, &blk, &sup);
            tbx_st32(e, (uint32_t)k);
            e[4] = (uint8_t)mcf_code_from_dtype(dt);
            e[5] = qd && qd->domain == TBX_QDOMAIN_ACTIVATIONS ? MCF_DOMAIN_ACTIVATIONS
                                                              : MCF_DOMAIN_WEIGHTS;
            tbx_st16(e + 6, blk);
            tbx_st16(e + 8, sup);
            memcpy(e + 16, &lo, 4);
            memcpy(e + 20, &m, 4);
        }
    }
    /* TensorIndex */
    uint8_t *ti = NULL;
    uint64_t ti_len = 0;
    if (st == TBX_OK && nt) {
        uint64_t ndims = 0, slen = 0;
        for (size_t i = 0; i < nt; i++) { ndims += w->tensors[i].ndim; slen += w->tensors[i].name_len; }
        if (ndims > UINT32_MAX || slen > UINT32_MAX)
            st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "tensor_index",
                         "the TensorIndex holds at most 2^32-1 dims and name bytes");
        ti_len = MCF_TI_HEADER + (uint64_t)nt * MCF_TI_ENTRY + ndims * 8 + slen;
        if (st == TBX_OK && ti_len > SIZE_MAX) st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "tensor_index", "too large");
        if (st == TBX_OK && !(ti = tbx_calloc(&w->al, 1, (size_t)ti_len)))
            st = tbx_err_nomem(err, "TensorIndex");
        if (st == TBX_OK) {
            uint64_t eo = MCF_TI_HEADER, dof = eo + (uint64_t)nt * MCF_TI_ENTRY, so = dof + ndims * 8;
            tbx_st32(ti, 1);
            tbx_st32(ti + 4, MCF_TI_SORTED | MCF_TI_UTF8);
            tbx_st32(ti + 8, (uint32_t)nt);
            tbx_st32(ti + 12, (uint32_t)ndims);
            tbx_st64(ti + 16, eo);
            tbx_st64(ti + 24, dof);
            tbx_st64(ti + 32, so);
            tbx_st64(ti + 40, slen);
            uint64_t dn = 0, sn = 0;
            for (size_t k = 0; k < nt; k++) {
                uint32_t j = s->order[k];
                const tbx_wtensor *t = &w->tensors[j];
                uint8_t *e = ti + eo + k * MCF_TI_ENTRY;
                tbx_st32(e, (uint32_t)sn);
                tbx_st32(e + 4, t->name_len);
                tbx_st32(e + 8, mcf_code_from_dtype((tbx_dtype)t->dtype));
                tbx_st32(e + 12, t->ndim);
                tbx_st32(e + 16, (uint32_t)dn);
                tbx_st64(e + 24, s->final[j]);
                tbx_st64(e + 32, t->nbytes);
                for (uint32_t d = 0; d < t->ndim; d++) tbx_st64(ti + dof + 8 * (dn + d), t->shape[d]);
                memcpy(ti + so + sn, t->name, t->name_len);
                dn += t->ndim;
                sn += t->name_len;
            }
        }
    }
    /* sections in file order, then the directory, then the header */
    tbx_mcf_section dir[16 + 64];
    size_t ndir = 0, cap_dir = sizeof dir / sizeof dir[0];
    uint64_t at = MCF_HEADER_SIZE;
    tbx_mcf_section *dp = dir;
    tbx_mcf_section *heap = NULL;
    if (s->nsec + 5 > cap_dir) {
        cap_dir = s->nsec + 5;
        heap = tbx_calloc(&w->al, cap_dir, sizeof *heap);
        if (!heap && st == TBX_OK) st = tbx_err_nomem(err, "MCF directory");
        dp = heap;
    }
#define PUT(type_, ver_, data_, len_)                                                         \
    do {                                                                                      \
        uint64_t o_ = al8(at);                                                                \
        if (st == TBX_OK && o_ > at) st = tbx_out_zero(&w->out, at, o_ - at, err);            \
        if (st == TBX_OK && (len_)) st = tbx_out_pwrite(&w->out, o_, (data_), (size_t)(len_), err); \
        dp[ndir].type = (type_); dp[ndir].version = (ver_); dp[ndir].offset = o_;             \
        dp[ndir].size = (len_); ndir++;                                                       \
        at = o_ + (len_);                                                                     \
    } while (0)
    if (st == TBX_OK) {
        bool mi_done = false;
        for (size_t i = 0; i < s->nsec; i++) {
            uint32_t k = s->sec_order[i];
            if (s->quant_mode && !mi_done && s->mi) { PUT(MCF_SEC_MODELINFO, 1, s->mi, s->mi_len); mi_done = true; }
            const void *sp;
            size_t sn;
            mw_sec_bytes(w, s, k, &sp, &sn);
            PUT(s->sec_type[k], 1, sp, sn);
        }
        if (!mi_done && s->mi) PUT(MCF_SEC_MODELINFO, 1, s->mi, s->mi_len);
        /* TensorData: its bytes are in place (no tensors: no TensorData section) */
        uint64_t o = al8(at);
        if (nt == 0) goto no_data;
        if (st == TBX_OK && o != s->td_start)
            st = tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "layout", "MCF layout mismatch");
        if (st == TBX_OK && o > at) st = tbx_out_zero(&w->out, at, o - at, err);
        dp[ndir].type = MCF_SEC_TENSORDATA; dp[ndir].version = 1; dp[ndir].offset = o;
        dp[ndir].size = td_end - o; ndir++;
        at = td_end;
    no_data:
        if (ti) PUT(MCF_SEC_TENSORINDEX, 1, ti, ti_len);
        if (qi) PUT(MCF_SEC_QUANTINFO, 1, qi, qi_len);
    }
#undef PUT
    if (st == TBX_OK) {
        for (size_t i = 1; i < ndir; i++) /* stable by type */
            for (size_t j = i; j > 0 && dp[j - 1].type > dp[j].type; j--) {
                tbx_mcf_section x = dp[j - 1];
                dp[j - 1] = dp[j];
                dp[j] = x;
            }
        uint64_t dir_off = al8(at);
        if (dir_off > at) st = tbx_out_zero(&w->out, at, dir_off - at, err);
        for (size_t i = 0; i < ndir && st == TBX_OK; i++) {
            uint8_t e[MCF_DIR_ENTRY];
            tbx_st32(e, dp[i].type);
            tbx_st32(e + 4, dp[i].version);
            tbx_st64(e + 8, dp[i].offset);
            tbx_st64(e + 16, dp[i].size);
            st = tbx_out_pwrite(&w->out, dir_off + i * MCF_DIR_ENTRY, e, sizeof e, err);
        }
        uint64_t file_size = dir_off + ndir * MCF_DIR_ENTRY;
        bool qk = false;
        for (size_t i = 0; i < nt; i++) qk |= mcf_is_qk((tbx_dtype)w->tensors[i].dtype);
        uint8_t h[MCF_HEADER_SIZE];
        memcpy(h, "MCF\0", 4);
        tbx_st16(h + 4, MCF_MAJOR);
        tbx_st16(h + 6, MCF_MINOR);
        tbx_st32(h + 8, MCF_HEADER_SIZE);
        tbx_st32(h + 12, (uint32_t)ndir);
        tbx_st64(h + 16, dir_off);
        tbx_st64(h + 24, file_size);
        tbx_st64(h + 32, nt && (s->quant_mode ? qk : s->align == 64) ? MCF_FLAG_ALIGNED64 : 0);
        if (st == TBX_OK) st = tbx_out_pwrite(&w->out, 0, h, sizeof h, err);
        w->end = file_size;
    }
    tbx_free(&w->al, heap, cap_dir * sizeof *heap);
    tbx_free(&w->al, ti, (size_t)ti_len);
    tbx_free(&w->al, qi, qi_len);
    tbx_free(&w->al, buf, MW_COPY);
    return st;
}
