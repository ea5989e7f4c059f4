/*
 * plain.c - the plan of a plain conversion: every readable input tensor becomes
 * one output tensor of the same name and shape, its dtype and step decided here once, before
 * anything is written (kept, cast, quantized, fallback, dequantized, requantized; the reason is
 * made for the report when the tensor is written). The engine (engine.c) carries it out.
 */
#include "convert.h"
#include "encode.h"
#include "ggml.h" /* TBX_GGML_OPT_METHOD */
#include "models.h" /* llama.cpp's quantization rules */

#include <stdio.h>

/* ------------------------------------------------------------------------------------------ */
/* What happens to each tensor: decided once, by decide(), before the tensor is declared, and  */
/* reported (tbx_convert_options.on_tensor) once its bytes are written. The plan keeps the     */
/* action and a reason code; the reason's text is made when it is reported.                  */
/* ------------------------------------------------------------------------------------------ */
enum why {
    WHY_NONE = 0,   /* nothing was asked of the tensor */
    WHY_REQUESTED,  /* the requested type or dtype */
    WHY_FALLBACK,   /* its rows cannot take quant_to (llama-quantize's fallback) */
    WHY_ALREADY,    /* it already has the requested dtype */
    WHY_NDIM,       /* quant_to applies to 2-D tensors */
    WHY_EMPTY,      /* a dimension is 0 */
    WHY_LAYOUT,     /* not one dense component */
    WHY_NOT_FLOAT,  /* not a float tensor */
    WHY_DEQUANTIZE, /* TBX_CONVERT_DEQUANTIZE */
    WHY_DECODE_CAST,  /* cast_to asked of a quantized tensor: decoded, then cast */
    WHY_NOT_QUANTIZED,/* TBX_CONVERT_DEQUANTIZE, nothing to dequantize */
    WHY_GGUF_1D       /* cast_to, a 1-D tensor of a GGUF output: kept for llama.cpp */
};

/* One tensor's decision: output dtype, action, reason. */
typedef struct tplan {
    uint16_t to;    /* the output dtype */
    uint8_t action; /* tbx_convert_action */
    uint8_t why;    /* enum why */
} tplan;

static bool plain_float(tbx_dtype dt) {
    return dt == TBX_DT_F32 || dt == TBX_DT_F16 || dt == TBX_DT_BF16 || dt == TBX_DT_F64;
}

static const char *dt_name(tbx_dtype dt) {
    const tbx_dtype_info *di = tbx_dtype_get(dt);
    return di ? di->name : "?";
}

/* Why quant_to does not apply to tensor t's shape and layout (WHY_NONE: it does). A quantized
 * tensor is decoded through tbx_tensor_read_f32, so its layout does not matter. */
static int quant_shape(const tbx_tensor *t, bool payload) {
    if (t->ndim != 2) return WHY_NDIM;
    if (!t->quant && (t->ncomp != 1 || t->layout != TBX_LAYOUT_DENSE)) return WHY_LAYOUT;
    if (t->shape[1] == 0 || (payload && t->shape[0] == 0)) return WHY_EMPTY;
    return WHY_NONE;
}

/* The type tensor t's rows get under quant_to: quant_to itself, or llama-quantize's fallback
 * (another block type, f16) when a ggml type's block does not divide them. */
static tbx_dtype quant_target(const tbx_tensor *t, const tbx_convert_options *o, bool payload) {
    return payload ? o->quant_to : tbx_ggml_quant_fallback(o->quant_to, t->shape[1]);
}

/* Decides what the conversion does with tensor i: the one place where a tensor's output dtype
 * and the step that makes it are chosen. The only refusal made here: a tensor quantized to
 * another type than quant_to, without TBX_CONVERT_REQUANTIZE or TBX_CONVERT_DEQUANTIZE. (Whether
 * the target stores a kept quantization is the writer's answer, when the tensor is declared.) */
static tbx_status decide(const tbx_file *in, size_t i, const tbx_convert_options *o, bool payload,
                         tbx_format to_fmt, tplan *p, tbx_error *err) {
    const tbx_tensor *t = &in->tensors[i];
    const bool quant = o->quant_to != TBX_DT_INVALID, cast = o->cast_to != TBX_DT_INVALID;
    /* a GGUF output is a model for llama.cpp: it computes 1-D tensors (norms, biases) in f32
     * and cannot multiply by an f16/bf16 vector, so casts apply to 2+ dimensions, as in
     * llama.cpp's own tools and the Hugging Face -> GGUF import */
    const bool keep_1d = to_fmt == TBX_FORMAT_GGUF && t->ndim < 2;
    const int shape_why = quant ? quant_shape(t, payload) : WHY_NONE;
    p->to = (uint16_t)t->dtype;
    p->action = TBX_CONVERT_KEPT;
    p->why = WHY_NONE;
    if (t->quant) {
        if (quant && shape_why == WHY_NONE) {
            const tbx_dtype want = quant_target(t, o, payload);
            if (want == t->dtype) { /* already what was asked: kept, bytes and all */
                p->why = WHY_ALREADY;
                return TBX_OK;
            }
            if (o->flags & TBX_CONVERT_REQUANTIZE) {
                p->to = (uint16_t)want;
                p->action = TBX_CONVERT_REQUANTIZED;
                p->why = want == o->quant_to ? WHY_REQUESTED : WHY_FALLBACK;
                return TBX_OK;
            }
            if (!(o->flags & TBX_CONVERT_DEQUANTIZE))
                return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, t->name,
                               "tensor \"%s\" is already quantized (%s): quantizing it to %s means "
                               "decoding its values and quantizing them again, which adds the "
                               "errors of both (allow it with --requantize, or write it "
                               "dequantized with --dequantize)", t->name, dt_name(t->dtype),
                               dt_name(want));
        }
        if ((o->flags & TBX_CONVERT_DEQUANTIZE) || cast) {
            p->to = (uint16_t)(cast && !keep_1d ? o->cast_to : TBX_DT_F32);
            p->action = TBX_CONVERT_DEQUANTIZED;
            p->why = (o->flags & TBX_CONVERT_DEQUANTIZE) ? WHY_DEQUANTIZE : WHY_DECODE_CAST;
            return TBX_OK;
        }
        p->why = (uint8_t)shape_why; /* kept with its quantization */
        return TBX_OK;
    }
    if (quant) {
        int why = shape_why;
        if (why == WHY_NONE && !plain_float(t->dtype)) why = WHY_NOT_FLOAT;
        if (why == WHY_NONE) {
            const tbx_dtype want = quant_target(t, o, payload);
            p->to = (uint16_t)want;
            p->why = want == o->quant_to ? WHY_REQUESTED : WHY_FALLBACK;
            /* (an f16 tensor whose fallback is f16 is kept) */
            p->action = want == o->quant_to ? TBX_CONVERT_QUANTIZED
                        : want == t->dtype  ? TBX_CONVERT_KEPT
                                            : TBX_CONVERT_FALLBACK;
            return TBX_OK;
        }
        p->why = (uint8_t)why;
    }
    if (cast) {
        const tbx_dtype_info *di = tbx_dtype_get(t->dtype);
        if (!di || !(di->flags & TBX_DTF_FLOAT) || (di->flags & TBX_DTF_COMPLEX)) {
            p->why = WHY_NOT_FLOAT;
        } else if (keep_1d && t->dtype != o->cast_to) {
            p->why = WHY_GGUF_1D;
        } else if (t->dtype == o->cast_to) {
            p->why = WHY_ALREADY;
        } else {
            p->to = (uint16_t)o->cast_to;
            p->action = TBX_CONVERT_CAST;
            p->why = WHY_REQUESTED;
        }
    }
    if (p->why == WHY_NONE && (o->flags & TBX_CONVERT_DEQUANTIZE)) p->why = WHY_NOT_QUANTIZED;
    return TBX_OK;
}

/* The reason phrase of a decision (tbx_convert_report.reason). */
static void why_text(const tbx_tensor *t, const tplan *p, tbx_dtype quant_to, char *buf,
                     size_t cap) {
    buf[0] = 0;
    switch (p->why) {
    case WHY_REQUESTED:
        snprintf(buf, cap, p->action == TBX_CONVERT_CAST ? "requested" : "requested type");
        break;
    case WHY_NOT_QUANTIZED: snprintf(buf, cap, "not quantized"); break;
    case WHY_FALLBACK: {
        const tbx_dtype_info *qi = tbx_dtype_get(quant_to);
        snprintf(buf, cap, "rows of %llu values are not a multiple of %s's block of %llu%s",
                 (unsigned long long)t->shape[1], qi ? qi->name : "?",
                 (unsigned long long)(qi ? qi->block_size : 0),
                 p->to == TBX_DT_F16 ? ", nor of its fallback's: f16" : "");
        break;
    }
    case WHY_ALREADY: snprintf(buf, cap, "already %s", dt_name((tbx_dtype)p->to)); break;
    case WHY_NDIM: snprintf(buf, cap, "%u-D, not 2-D", t->ndim); break;
    case WHY_EMPTY: snprintf(buf, cap, "no values (a dimension is 0)"); break;
    case WHY_LAYOUT: snprintf(buf, cap, "%s layout", tbx_layout_name(t->layout)); break;
    case WHY_NOT_FLOAT: snprintf(buf, cap, "not a float tensor"); break;
    case WHY_GGUF_1D:
        snprintf(buf, cap, "%u-D: a GGUF keeps it as it is for llama.cpp (norms and biases "
                 "in f32)", t->ndim);
        break;
    case WHY_DEQUANTIZE: snprintf(buf, cap, "dequantizing requested"); break;
    case WHY_DECODE_CAST:
        snprintf(buf, cap, "cast requested: decoded to %s", dt_name((tbx_dtype)p->to));
        break;
    default: break;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The quantization options: write options of the target's row (MCF, mcfq.h: quant_method,  */
/* quant_clip_min / quant_clip_max; GGUF, ggml.h: quant_method), checked by core and the row  */
/* at the writer's open, applied here to the tensors quantized to quant_to.                   */
/* ------------------------------------------------------------------------------------------ */
/* Option `key` of the conversion's write options, NULL when not given. */
const tbx_value *tbx_convert_wopt(const tbx_convert_options *o, const char *key) {
    const tbx_value *m = o->write.options;
    const size_t kl = strlen(key);
    if (tbx_value_type_of(m) != TBX_V_MAP) return NULL;
    for (uint64_t i = 0, n = tbx_value_len(m); i < n; i++) {
        size_t len = 0;
        const char *k = tbx_value_key_at(m, i, &len);
        if (k && len == kl && memcmp(k, key, kl) == 0) return tbx_value_at(m, i);
    }
    return NULL;
}

tbx_status tbx_plan_mcf_clip(const tbx_convert_options *o, tbx_plan *p, tbx_quant_info **clip,
                             tbx_error *err) {
    *clip = NULL;
    const tbx_value *lo_v = tbx_convert_wopt(o, TBX_MCFQ_OPT_CLIP_MIN);
    const tbx_value *hi_v = tbx_convert_wopt(o, TBX_MCFQ_OPT_CLIP_MAX);
    if (!lo_v && !hi_v) return TBX_OK;
    /* (the writer's open checked them: both, finite f32 bounds, min <= max) */
    double lo = 0, hi = 0;
    if (tbx_value_get_f64(lo_v, &lo) != TBX_OK || tbx_value_get_f64(hi_v, &hi) != TBX_OK)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "options." TBX_MCFQ_OPT_CLIP_MIN,
                       "a clip range needs two numbers, %s and %s", TBX_MCFQ_OPT_CLIP_MIN,
                       TBX_MCFQ_OPT_CLIP_MAX);
    tbx_quant_info *c = tbx_plan_alloc(p, sizeof *c);
    if (!c) return tbx_err_nomem(err, "conversion plan");
    c->struct_size = sizeof *c;
    c->has_clip = 1;
    c->clip_min = (float)lo;
    c->clip_max = (float)hi;
    *clip = c;
    return TBX_OK;
}

/* Whether write option quant_method asks for tensorbox's own K-quant search (a ggml block type;
 * the row validated the value). */
static bool want_search(const tbx_convert_options *o) {
    const char *m = tbx_value_get_str(tbx_convert_wopt(o, TBX_GGML_OPT_METHOD), NULL);
    return m && strcmp(m, TBX_GGML_METHOD_SEARCH) == 0;
}

tbx_status tbx_plan_plain_check(const tbx_convert_options *o, tbx_error *err) {
    static const char *const keys[] = {TBX_MCFQ_OPT_METHOD, TBX_MCFQ_OPT_CLIP_MIN,
                                       TBX_MCFQ_OPT_CLIP_MAX};
    const tbx_encoder *qe = o->quant_to != TBX_DT_INVALID ? tbx_encoder_for(o->quant_to) : NULL;
    if (qe && qe->kind == TBX_ENC_PAYLOAD) return TBX_OK;
    const tbx_dtype_info *qi = tbx_dtype_get(o->quant_to);
    /* a ggml block type takes quant_method (GGUF's: ggml | search); search needs a type that
     * has a search of its own (q2_K .. q6_K), else it would be ggml's bytes under another name */
    const char *m = tbx_value_get_str(tbx_convert_wopt(o, TBX_GGML_OPT_METHOD), NULL);
    if (qe && qe->kind == TBX_ENC_BLOCK && tbx_convert_wopt(o, TBX_GGML_OPT_METHOD) &&
        (!m || (strcmp(m, TBX_GGML_METHOD_GGML) && strcmp(m, TBX_GGML_METHOD_SEARCH))))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "options." TBX_GGML_OPT_METHOD,
                       "the write option " TBX_GGML_OPT_METHOD " of a ggml block type (%s) is "
                       TBX_GGML_METHOD_GGML " or " TBX_GGML_METHOD_SEARCH " (best and mantle are "
                       "MCF's families' methods)", qi ? qi->name : "?");
    if (qe && qe->kind == TBX_ENC_BLOCK && want_search(o) && !qe->search)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "options." TBX_GGML_OPT_METHOD,
                       "the write option " TBX_GGML_OPT_METHOD "=" TBX_GGML_METHOD_SEARCH
                       " applies to q2_k .. q6_k (tensorbox's own scale search), and %s is "
                       "asked for: its only quantizer is ggml's algorithm", qi ? qi->name : "?");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (!tbx_convert_wopt(o, keys[i])) continue;
        if (i == 0 && qe && qe->kind == TBX_ENC_BLOCK) continue;
        char field[48];
        snprintf(field, sizeof field, "options.%s", keys[i]);
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                       "the write option %s applies to quantizing to %s, "
                       "and %s%s is asked for: it would apply to nothing", keys[i],
                       i == 0 ? "a ggml block type (GGUF: ggml | search) or one of MCF's "
                                "families (best | mantle)"
                              : "one of MCF's families (quant_to mcf_q8 .. mcf_int4, tbx "
                                "convert --quant with an MCF output)",
                       qi ? "quantizing to " : "no quantization", qi ? qi->name : "");
    }
    return TBX_OK;
}

/* The plan's data for its reason hook. */
typedef struct plain_ud {
    tbx_dtype quant_to;
} plain_ud;

static void plain_reason(const tbx_plan *p, const tbx_file *in, size_t k, char *buf,
                         size_t cap) {
    const tbx_plan_tensor *pt = &p->t[k];
    const tbx_tensor *t = &in->tensors[pt->src];
    if (pt->enc == TBX_PENC_REFUSE) { /* a layout the conversion cannot copy */
        snprintf(buf, cap, "%s layout cannot be converted yet", tbx_layout_name(t->layout));
        return;
    }
    const tplan d = {pt->dtype, pt->action, pt->why};
    why_text(t, &d, ((const plain_ud *)p->ud)->quant_to, buf, cap);
}

tbx_status tbx_plan_plain(tbx_file *in, const tbx_convert_options *o, tbx_format to_fmt,
                          tbx_plan *p, bool *changed, tbx_error *err) {
    *changed = false;
    tbx_status cst = tbx_plan_plain_check(o, err);
    if (cst != TBX_OK) return cst;
    const tbx_encoder *qe = o->quant_to != TBX_DT_INVALID ? tbx_encoder_for(o->quant_to) : NULL;
    const bool payload = qe && qe->kind == TBX_ENC_PAYLOAD;
    size_t nbad = 0;
    for (size_t i = 0; i < in->ntensors; i++) nbad += in->tensors[i].unreadable != 0;
    tbx_status st = tbx_plan_reserve(p, in->ntensors - nbad, 0, err);
    plain_ud *ud = st == TBX_OK ? tbx_plan_alloc(p, sizeof *ud) : NULL;
    if (st == TBX_OK && !ud) st = tbx_err_nomem(err, "conversion plan");
    if (st != TBX_OK) return st;
    ud->quant_to = o->quant_to;
    p->ud = ud;
    p->reason = plain_reason;
    p->report_input_index = true;
    /* the input's own name index serves the writer when no tensor is left out */
    p->names = nbad ? NULL : &in->tensor_names;
    /* an MCF family: the clip range asked for, shared by every tensor quantized to it */
    tbx_quant_info *clip = NULL;
    if (payload) {
        tbx_status cst2 = tbx_plan_mcf_clip(o, p, &clip, err);
        if (cst2 != TBX_OK) return cst2;
    }
    const char *method = tbx_value_get_str(tbx_convert_wopt(o, TBX_MCFQ_OPT_METHOD), NULL);
    const bool mantle = method && strcmp(method, "mantle") == 0;
    const bool search = qe && qe->kind == TBX_ENC_BLOCK && qe->search && want_search(o);
    for (size_t i = 0; i < in->ntensors; i++) {
        const tbx_tensor *t = &in->tensors[i];
        if (t->unreadable) continue; /* left out (TBX_CONVERT_DROP_UNREADABLE) */
        tplan d;
        st = decide(in, i, o, payload, to_fmt, &d, err);
        if (st != TBX_OK) return st;
        *changed |= d.action != TBX_CONVERT_KEPT;
        tbx_plan_tensor pt;
        memset(&pt, 0, sizeof pt);
        pt.src = i;
        pt.flags = TBX_PT_WHOLE;
        pt.dtype = d.to;
        pt.action = d.action;
        pt.why = d.why;
        if (d.action == TBX_CONVERT_KEPT) {
            /* its stored bytes, with its quantization when it has one; a layout that is not
             * one dense component cannot be copied otherwise */
            pt.enc = t->quant || (t->ncomp <= 1 && t->layout == TBX_LAYOUT_DENSE)
                         ? TBX_PENC_STORED : TBX_PENC_REFUSE;
            pt.quant = t->quant;
        } else {
            pt.enc = TBX_PENC_ENCODE;
            if (payload && d.to == (uint16_t)o->quant_to) {
                pt.quant = clip;
                if (!clip) pt.flags |= TBX_PT_CLIP_SCAN;
                if (mantle) pt.flags |= TBX_PT_MANTLE;
            }
            /* the search applies to the tensors quant_to's rows fit (not to a fallback type) */
            if (search && d.to == (uint16_t)o->quant_to) pt.flags |= TBX_PT_SEARCH;
        }
        st = tbx_plan_add(p, &pt, NULL, err);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

/* llama.cpp's general.file_type (LLAMA_FTYPE) of the output when the conversion changes
 * tensors: with quant_to, the requested type when a tensor got it (what llama-quantize
 * records, whatever fallback types some tensors got); else the dtype most tensors of two or
 * more dimensions have in the output (llama.cpp's "mostly X, except 1-D tensors"; all of them
 * when there is none of 2+ dimensions). Ties: the smaller dtype value. */
uint32_t tbx_plan_plain_ftype(const tbx_plan *p, const tbx_file *in,
                              const tbx_convert_options *o) {
    uint64_t count[256];
    memset(count, 0, sizeof count);
    bool any_2d = false;
    for (size_t k = 0; k < p->n; k++) { /* (tensors left out are not in the plan) */
        const tbx_plan_tensor *t = &p->t[k];
        if (o->quant_to != TBX_DT_INVALID && t->dtype == (uint16_t)o->quant_to &&
            t->action != TBX_CONVERT_KEPT)
            return tbx_llama_ftype(o->quant_to);
        any_2d |= in->tensors[t->src].ndim >= 2;
    }
    for (size_t k = 0; k < p->n; k++) {
        const tbx_plan_tensor *t = &p->t[k];
        if ((!any_2d || in->tensors[t->src].ndim >= 2) && t->dtype < 256) count[t->dtype]++;
    }
    size_t best = 0;
    for (size_t d = 1; d < 256; d++)
        if (count[d] > count[best]) best = d;
    return tbx_llama_ftype((tbx_dtype)best);
}

