/*
 * convert.c - format conversion through the common model.
 *
 * Every metadata entry, section and tensor of the input is handed to a writer of the target
 * format; tensor bytes stream through a bounded buffer. The conversion is lossless unless the
 * caller explicitly allows a lossy step: stringifying or dropping metadata the target cannot
 * type, dropping sections, casting floating-point tensors to another float dtype, quantizing
 * 2-D floating-point tensors to a ggml block type (quant_to), or dequantizing a quantized tensor
 * whose description (tbx_quant_info) the target cannot store (TBX_CONVERT_DEQUANTIZE). A
 * quantized tensor otherwise travels with its description (tbx_writer_add_quant_tensor): the
 * target stores it exactly or the conversion fails naming the tensor.
 */
#include "access.h"
#include "convert_mcfq.h"
#include "plain.h"
#include "ggml.h"
#include "check.h"
#define TBX_EXPERIMENTAL 1 /* tbx_gguf_from_hf: a Hugging Face model to a GGUF for llama.cpp */
#include "tensorbox/gguf.h"

#include <stddef.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void tbx_convert_options_init(tbx_convert_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    tbx_write_options_init(&opt->write);
}

/* ------------------------------------------------------------------------------------------ */
/* Rendering a value as text (for TBX_CONVERT_STRINGIFY_META): strings stay as they are,       */
/* everything else becomes compact JSON.                                                       */
/* ------------------------------------------------------------------------------------------ */
/* (a tbx_membuf: the text without its NUL until sb_take_string) */
static void sb_put(tbx_membuf *b, const char *s, size_t n) { tbx_membuf_put(b, s, n); }
static void sb_str(tbx_membuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_json_string(tbx_membuf *b, const char *s, size_t n) {
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\') { e[0] = '\\'; e[1] = (char)c; sb_put(b, e, 2); }
        else if (c < 0x20) { snprintf(e, sizeof e, "\\u%04x", c); sb_str(b, e); }
        else sb_put(b, (const char *)&s[i], 1);
    }
    sb_put(b, "\"", 1);
}

static void sb_value(tbx_membuf *b, const tbx_value *v, int depth) {
    char tmp[64];
    if (depth > 64) { sb_str(b, "null"); return; }
    switch (v->type) {
    case TBX_V_NULL: sb_str(b, "null"); break;
    case TBX_V_BOOL: sb_str(b, v->v.u ? "true" : "false"); break;
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64:
        snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v->v.u); sb_str(b, tmp); break;
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v->v.i); sb_str(b, tmp); break;
    case TBX_V_F16: case TBX_V_BF16: case TBX_V_F32: case TBX_V_F64:
        if (isnan(v->v.f)) sb_str(b, "\"nan\"");
        else if (isinf(v->v.f)) sb_str(b, v->v.f > 0 ? "\"inf\"" : "\"-inf\"");
        else {
            /* shortest representation that reads back to the same double */
            for (int prec = 1; prec <= 17; prec++) {
                snprintf(tmp, sizeof tmp, "%.*g", prec, v->v.f);
                if (strtod(tmp, NULL) == v->v.f) break;
            }
            sb_str(b, tmp);
        }
        break;
    case TBX_V_STRING: sb_json_string(b, v->v.s.p, v->v.s.n); break;
    case TBX_V_BYTES:
        sb_put(b, "\"", 1);
        for (size_t i = 0; i < v->v.s.n; i++) {
            snprintf(tmp, sizeof tmp, "%02x", (unsigned char)v->v.s.p[i]);
            sb_str(b, tmp);
        }
        sb_put(b, "\"", 1);
        break;
    case TBX_V_ARRAY:
        sb_put(b, "[", 1);
        for (uint64_t i = 0; i < v->v.a.n; i++) {
            if (i) sb_put(b, ",", 1);
            if (v->v.a.soff) { /* compact strings: read in place */
                size_t len;
                const char *sp = tbx_value_str_at(v, i, &len);
                sb_json_string(b, sp, len);
                continue;
            }
            tbx_value pe; /* packed scalars are rendered in place, never materialised */
            const tbx_value *e = tbx_val_packed_get(v, (size_t)i, &pe) ? &pe : tbx_value_at(v, i);
            if (e) sb_value(b, e, depth + 1);
            else b->oom = true;
        }
        sb_put(b, "]", 1);
        break;
    case TBX_V_MAP:
        sb_put(b, "{", 1);
        for (uint64_t i = 0; i < v->v.a.n; i++) {
            if (i) sb_put(b, ",", 1);
            sb_json_string(b, v->v.a.keys[i], v->v.a.key_lens[i]);
            sb_put(b, ":", 1);
            sb_value(b, v->v.a.items[i], depth + 1);
        }
        sb_put(b, "}", 1);
        break;
    case TBX_V_BITSET:
        sb_put(b, "[", 1);
        for (uint64_t i = 0; i < v->v.nd.count; i++)
            sb_str(b, i ? ((v->v.nd.data[i / 8] >> (i % 8)) & 1 ? ",1" : ",0")
                        : ((v->v.nd.data[0] & 1) ? "1" : "0"));
        sb_put(b, "]", 1);
        break;
    case TBX_V_NDARRAY: {
        /* flat list of decoded elements (shape is lost in the string form) */
        const tbx_dtype_info *di = tbx_dtype_get(v->v.nd.dtype);
        sb_put(b, "[", 1);
        for (uint64_t i = 0; di && i < v->v.nd.count; i++) {
            float x;
            if (i) sb_put(b, ",", 1);
            if (di->flags & TBX_DTF_INT && !(di->flags & TBX_DTF_PACKED) && di->bits == 64) {
                uint64_t u; memcpy(&u, v->v.nd.data + i * 8, 8);
                if (di->flags & TBX_DTF_SIGNED) snprintf(tmp, sizeof tmp, "%lld", (long long)u);
                else snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)u);
                sb_str(b, tmp);
                continue;
            }
            if (di->flags & TBX_DTF_PACKED) {
                /* decode the whole prefix is wasteful; decode this element's group */
                x = NAN;
                float grp[8];
                uint64_t g = i - i % 8;
                uint64_t cnt = v->v.nd.count - g < 8 ? v->v.nd.count - g : 8;
                if (tbx_decode_f32(v->v.nd.dtype, v->v.nd.data + g * di->bits / 8,
                                   v->v.nd.nbytes - g * di->bits / 8, cnt, grp) == TBX_OK)
                    x = grp[i - g];
            } else if (tbx_decode_f32(v->v.nd.dtype, v->v.nd.data + i * (di->bits / 8),
                                      di->bits / 8, 1, &x) != TBX_OK) {
                x = NAN;
            }
            tbx_value tv = { .type = TBX_V_F64, .v.f = x };
            sb_value(b, &tv, depth + 1);
        }
        sb_put(b, "]", 1);
        break;
    }
    }
}

/* ------------------------------------------------------------------------------------------ */

/* The target cannot store an item (metadata entry, size variable, section): its type has no
 * equivalent (UNSUPPORTED), storing it would lose information (LOSSY), or its text breaks the
 * target's rules, e.g. OINF's [A-Za-z0-9._-] strings (FORMAT). Such refusals may be overridden
 * only by the explicit drop/stringify options. */
static bool refusal(tbx_status st) {
    return st == TBX_E_UNSUPPORTED || st == TBX_E_LOSSY || st == TBX_E_FORMAT;
}

/* Values made during the conversion (stringified metadata), lent to the writer and freed after
 * it finished or aborted. */
typedef struct kept_values { tbx_value **v; size_t n, cap; } kept_values;

static void kept_free(tbx_file *in, kept_values *k) {
    for (size_t i = 0; i < k->n; i++) tbx_val_free(k->v[i]);
    tbx_free(&in->al, k->v, k->cap * sizeof *k->v);
}

/* The text of b as a STRING value owning b's buffer (no copy); b is consumed. */
static tbx_value *sb_take_string(const tbx_alloc *al, tbx_membuf *b) {
    tbx_membuf_put(b, NULL, 1); /* the NUL */
    if (b->oom) { tbx_free(al, b->p, b->cap); return NULL; }
    uint8_t *p = b->cap == b->n ? b->p : tbx_realloc(al, b->p, b->cap, b->n);
    if (!p) { tbx_free(al, b->p, b->cap); return NULL; }
    tbx_value *s = tbx_val_new(al, TBX_V_STRING);
    if (!s) { tbx_free(al, p, b->n); return NULL; }
    s->v.s.p = (char *)p;
    s->v.s.n = b->n - 1;
    return s;
}

/* Is key one of the caller's own entries (tbx_convert_options.meta, a MAP)? */
static bool given_meta(const tbx_value *m, const char *key, size_t key_len) {
    for (uint64_t i = 0, n = m ? tbx_value_len(m) : 0; i < n; i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(m, i, &kl);
        if (k && kl == key_len && memcmp(k, key, kl) == 0) return true;
    }
    return false;
}

/* The caller's entries (tbx_convert_options.meta), after the input's: copied, typed as given. */
static tbx_status add_given_meta(tbx_writer *w, const tbx_value *m, tbx_error *err) {
    for (uint64_t i = 0, n = m ? tbx_value_len(m) : 0; i < n; i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(m, i, &kl);
        tbx_status st = tbx_writer_add_meta(w, k, kl, tbx_value_at(m, i), err);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

/* The text --stringify-meta makes of a value (sb_value): a STRING value owning its buffer, or
 * NULL when out of memory. */
static tbx_value *stringify(tbx_file *in, const tbx_value *v) {
    tbx_membuf b = { &in->al, NULL, 0, 0, false };
    sb_value(&b, v, 0);
    return sb_take_string(&in->al, &b);
}

/* Would the target take the text --stringify-meta makes of this entry? (The key may be what it
 * refuses, or the text: OINF's [A-Za-z0-9._-]+ refuses the quotes of a stringified string.) */
static bool stringify_helps(tbx_file *in, tbx_writer *w, const tbx_meta_entry *e) {
    if (!w->drv->w_check_meta) return true;
    tbx_value *s = stringify(in, e->value);
    if (!s) return true; /* cannot tell: keep the usual hint */
    tbx_error e2;
    bool ok = w->drv->w_check_meta(w, e->key, e->key_len, s, &e2) == TBX_OK;
    tbx_val_free(s);
    return ok;
}

static void append_hint(tbx_error *err, const char *hint) {
    size_t l = strlen(err->message);
    snprintf(err->message + l, sizeof err->message - l, " (%s)", hint);
}

/* llama.cpp's key for the file's quantization: rewritten when the conversion changes tensors */
#define FILE_TYPE_KEY "general.file_type"

/* Keeps v (made here) until the writer is done with it; false when out of memory (v freed). */
static bool keep_value(tbx_file *in, kept_values *kept, tbx_value *v) {
    if (!v) return false;
    if (!tbx_grow(&in->al, (void **)&kept->v, &kept->cap, kept->n + 1, sizeof *kept->v)) {
        tbx_val_free(v);
        return false;
    }
    kept->v[kept->n++] = v;
    return true;
}

/* The input's metadata, lent to the writer. ftype: when not NULL (the conversion changes
 * tensors), the input's general.file_type is written with this value (a u32, as llama.cpp and
 * gguf-py write it) so that it describes the output. */
static tbx_status copy_meta(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                            const uint32_t *ftype, kept_values *kept, tbx_error *err) {
    for (size_t i = 0; i < in->nmeta; i++) {
        const tbx_meta_entry *e = &in->meta[i];
        if (given_meta(o->meta, e->key, e->key_len)) continue; /* replaced by the caller's */
        const tbx_value *val = e->value;
        if (ftype && e->key_len == sizeof FILE_TYPE_KEY - 1 &&
            memcmp(e->key, FILE_TYPE_KEY, e->key_len) == 0) {
            tbx_value *v = tbx_val_new(&in->al, TBX_V_U32);
            if (v) v->v.u = *ftype;
            if (!keep_value(in, kept, v)) return tbx_err_nomem(err, "metadata value");
            val = v;
        }
        /* the input handle outlives the writer: its keys and values need no copies */
        tbx_status st = tbx_writer_add_meta_borrowed_(w, e->key, e->key_len, val, err);
        if (st == TBX_OK || !refusal(st)) { if (st) return st; continue; }
        /* stringifying helps only a target that stores strings (embd-legacy has no metadata) */
        const bool strings = tbx_driver_meta_ok(w->drv, TBX_V_STRING);
        if ((o->flags & TBX_CONVERT_STRINGIFY_META) && strings) {
            if (!tbx_grow(&in->al, (void **)&kept->v, &kept->cap, kept->n + 1, sizeof *kept->v))
                return tbx_err_nomem(err, "metadata text");
            tbx_value *s = stringify(in, val);
            if (!s) return tbx_err_nomem(err, "metadata text");
            kept->v[kept->n++] = s; /* the text is lent to the writer, not copied */
            st = tbx_writer_add_meta_borrowed_(w, e->key, e->key_len, s, err);
            if (st == TBX_OK) continue;
            if (!refusal(st)) return st;
            /* its text is refused too: dropped when that is allowed, else say what works */
            if (o->flags & TBX_CONVERT_DROP_META) continue;
            append_hint(err, "its text form is refused too; leave it out with --drop-meta");
            return st;
        } else if (o->flags & TBX_CONVERT_DROP_META) {
            continue;
        } else {
            /* suggest only what works: the target may refuse the stringified text as well */
            tbx_error keep = *err;
            bool s_ok = strings && stringify_helps(in, w, e);
            *err = keep;
            append_hint(err, !strings ? "allow dropping it with --drop-meta"
                             : s_ok   ? "allow it with --stringify-meta or --drop-meta"
                                      : "leave it out with --drop-meta; stringifying cannot "
                                        "help: its text form is refused too");
            return st;
        }
    }
    return add_given_meta(w, o->meta, err);
}

/* Size variables (OINF) travel like metadata: refused ones fail unless dropping is allowed. */
static tbx_status copy_sizevars(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                tbx_error *err) {
    for (uint64_t i = 0; i < tbx_sizevar_count(in); i++) {
        const char *name;
        size_t nl;
        uint64_t value;
        tbx_status st = tbx_sizevar_get(in, i, &name, &nl, &value);
        if (st == TBX_OK) st = tbx_writer_add_sizevar(w, name, value, err);
        if (st == TBX_OK) continue;
        if (refusal(st) && (o->flags & TBX_CONVERT_DROP_META)) continue;
        if (refusal(st)) {
            size_t l = strlen(err->message);
            snprintf(err->message + l, sizeof err->message - l,
                     " (size variable \"%s\"; allow dropping it with --drop-meta)", name);
        }
        return st;
    }
    return TBX_OK;
}

static tbx_status copy_sections(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                tbx_error *err) {
    for (size_t i = 0; i < in->nsections; i++) {
        const tbx_section *s = &in->sections[i];
        /* the writer's answer first (a section it refuses is dropped or named unread), then
         * the bytes, read whole within the one side-file limit (max_side_file_bytes) */
        tbx_status st = tbx_writer_check_section_(w, s->name, s->type,
                                                  s->size > SIZE_MAX ? SIZE_MAX : (size_t)s->size,
                                                  err);
        if (st == TBX_OK) {
            void *buf = NULL;
            size_t n = 0;
            st = tbx_section_load_(in, i, &buf, &n, err);
            if (st != TBX_OK) return st;
            st = tbx_writer_add_section(w, s->name, s->type, buf, n, err);
            tbx_free(&in->al, buf, n ? n : 1);
        }
        if (st == TBX_OK) continue;
        if (refusal(st) && (o->flags & TBX_CONVERT_DROP_SECTIONS)) continue;
        if (refusal(st)) {
            size_t l = strlen(err->message);
            snprintf(err->message + l, sizeof err->message - l, " (allow it with --drop-sections)");
        }
        return st;
    }
    return TBX_OK;
}

/* MCF quantization family of a dtype: a tbx_mcfq_kind, TBX_MCFQ_INT8 / TBX_MCFQ_INT4, or -1. */
static int mcfq_kind_of(tbx_dtype dt) {
    if (dt >= TBX_DT_MCF_Q8 && dt <= TBX_DT_MCF_K2) return (int)(dt - TBX_DT_MCF_Q8);
    if (dt == TBX_DT_MCF_INT8) return (int)TBX_MCFQ_INT8;
    if (dt == TBX_DT_MCF_INT4) return (int)TBX_MCFQ_INT4;
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* What happens to each tensor: decided once, by decide(), before the tensor is declared, and  */
/* reported (tbx_convert_options.on_tensor) once its bytes are written. The plan keeps 4 bytes */
/* a tensor; the reason's text is made when it is reported.                                  */
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
static int quant_shape(const tbx_tensor *t, int mcfq) {
    if (t->ndim != 2) return WHY_NDIM;
    if (!t->quant && (t->ncomp != 1 || t->layout != TBX_LAYOUT_DENSE)) return WHY_LAYOUT;
    if (t->shape[1] == 0 || (mcfq >= 0 && t->shape[0] == 0)) return WHY_EMPTY;
    return WHY_NONE;
}

/* The type tensor t's rows get under quant_to: quant_to itself, or llama-quantize's fallback
 * (another block type, f16) when a ggml type's block does not divide them. */
static tbx_dtype quant_target(const tbx_tensor *t, const tbx_convert_options *o, int mcfq) {
    return mcfq >= 0 ? o->quant_to : tbx_ggml_quant_fallback(o->quant_to, t->shape[1]);
}

/* Decides what the conversion does with tensor i: the one place where a tensor's output dtype
 * and the step that makes it are chosen. The only refusal made here: a tensor quantized to
 * another type than quant_to, without TBX_CONVERT_REQUANTIZE or TBX_CONVERT_DEQUANTIZE. (Whether
 * the target stores a kept quantization is the writer's answer, when the tensor is declared.) */
static tbx_status decide(const tbx_file *in, size_t i, const tbx_convert_options *o, int mcfq,
                         tbx_format to_fmt, tplan *p, tbx_error *err) {
    const tbx_tensor *t = &in->tensors[i];
    const bool quant = o->quant_to != TBX_DT_INVALID, cast = o->cast_to != TBX_DT_INVALID;
    /* a GGUF output is a model for llama.cpp: it computes 1-D tensors (norms, biases) in f32
     * and cannot multiply by an f16/bf16 vector, so casts apply to 2+ dimensions, as in
     * llama.cpp's own tools and tbx_gguf_from_hf */
    const bool keep_1d = to_fmt == TBX_FORMAT_GGUF && t->ndim < 2;
    const int shape_why = quant ? quant_shape(t, mcfq) : WHY_NONE;
    p->to = (uint16_t)t->dtype;
    p->action = TBX_CONVERT_KEPT;
    p->why = WHY_NONE;
    if (t->quant) {
        if (quant && shape_why == WHY_NONE) {
            const tbx_dtype want = quant_target(t, o, mcfq);
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
            const tbx_dtype want = quant_target(t, o, mcfq);
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

/* The reason phrase of a plan (tbx_convert_report.reason). */
static void why_text(const tbx_tensor *t, const tplan *p, const tbx_convert_options *o,
                     char *buf, size_t cap) {
    buf[0] = 0;
    switch (p->why) {
    case WHY_REQUESTED:
        snprintf(buf, cap, p->action == TBX_CONVERT_CAST ? "requested" : "requested type");
        break;
    case WHY_NOT_QUANTIZED: snprintf(buf, cap, "not quantized"); break;
    case WHY_FALLBACK: {
        const tbx_dtype_info *qi = tbx_dtype_get(o->quant_to);
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

/* Declares tensor i as it is (kept), with its quantization when it has one: the target stores
 * it exactly (OINF v2 -> OINF v2, a ggml block type -> GGUF, ...) or refuses it, and the
 * refusal is returned naming the tensor and --dequantize. */
static tbx_status declare_kept_quantized(tbx_file *in, size_t i, tbx_writer *w, tbx_error *err) {
    const tbx_tensor *t = &in->tensors[i];
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.name = t->name;
    d.name_len = t->name_len;
    d.dtype = t->dtype;
    d.ndim = t->ndim;
    d.shape = t->shape;
    d.has_data = t->ncomp >= 1;
    /* the tensor's bytes: its components one after the other (one for a dense tensor) */
    tbx_status st = tbx_writer_add_quant_tensor(w, &d, t->quant, NULL, err);
    if (st == TBX_OK || !refusal(st)) return st;
    size_t l = strlen(err->message);
    snprintf(err->message + l, sizeof err->message - l,
             " (tensor \"%s\" is quantized; allow dequantizing it with --dequantize)", t->name);
    return st;
}

/* Declares tensor i as quantized to MCF family `to` (d: its descriptor): its clip range is
 * scanned now (the writer's QuantInfo records it) and the description, kept in *q until the
 * writer is done (the writer borrows it), goes with it. */
static tbx_status declare_mcfq(tbx_file *in, size_t i, tbx_writer *w, const tbx_tensor_desc *d,
                               const tbx_convert_options *o, tbx_quant_info *q, tbx_error *err) {
    float lo = o->quant_clip_min, hi = o->quant_clip_max;
    if (!(o->flags & TBX_CONVERT_QUANT_CLIP)) {
        tbx_status st = tbx_mcfq_scan_clip(in, i, &lo, &hi, err);
        if (st != TBX_OK) return st;
    }
    memset(q, 0, sizeof *q);
    q->struct_size = sizeof *q;
    q->method = TBX_QUANT_LINEAR;
    q->code_signed = 1;
    q->scale.component = q->zero.component = -1;
    q->zero.scope = TBX_QSCOPE_NONE;
    q->zero.dtype = TBX_DT_INVALID;
    q->domain = TBX_QDOMAIN_WEIGHTS;
    q->has_clip = 1;
    q->clip_min = lo;
    q->clip_max = hi;
    if (tbx_mcfq_describe(d->dtype, d->shape[0], d->shape[1], q) != TBX_OK)
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, in->tensors[i].name,
                       "tensor \"%s\": quantized size overflows", in->tensors[i].name);
    return tbx_writer_add_quant_tensor(w, d, q, NULL, err);
}

/* The writer as the sink of a quantized payload. */
typedef struct wsink { tbx_writer *w; uint64_t i; } wsink;
static tbx_status write_sink(void *ud, const void *data, size_t len, tbx_error *err) {
    const wsink *s = ud;
    return tbx_writer_write_tensor(s->w, s->i, data, len, err);
}

#define CHUNK ((size_t)4 << 20)

/* Unchanged bytes are copied in the kernel in pieces of this size (the progress callback is
 * called between pieces). */
#define COPY_PIECE ((uint64_t)64 << 20)

/* ------------------------------------------------------------------------------------------ */
/* Quantization step: a tensor's elements are cut into chunks of QCHUNK_ELEMS (whole blocks:    */
/* the tensor is [rows, cols] with cols a multiple of the block size). The calling thread reads */
/* chunk after chunk (raw source bytes when the tensor is stored raw, else f32 through          */
/* tbx_tensor_read_f32: file handles are not shared between threads) into a ring of slots;      */
/* worker threads decode the raw bytes to f32 and quantize; the calling thread writes the       */
/* quantized chunks in order. Every block is quantized on its own, so the bytes do not depend   */
/* on the chunking or the thread count. Memory: threads + 2 slots of <= 7 MiB (f32, raw, out). */
/* Threads: tbx_threads_default() (env TBX_THREADS, else the online CPUs, at most 8; 1: none).  */
/* ------------------------------------------------------------------------------------------ */
#define QCHUNK_ELEMS ((uint64_t)1 << 19) /* 2 MiB of f32; a multiple of every block size */
#define QSLOTS_MAX (TBX_THREADS_DEFAULT_MAX + 2)

typedef struct qbufs qbufs;

typedef struct qslot {
    tbx_task task;       /* first member: the pool sees only this */
    qbufs *qb;
    float *f;            /* QCHUNK_ELEMS f32 values */
    uint8_t *q;          /* the quantized chunk (qcap bytes) */
    uint8_t *raw;        /* raw source bytes (grown as needed) */
    size_t raw_cap;
    /* the job: decode src (src_len bytes of dtype src_dt; NULL: f already holds the values),
     * then quantize n values (nblocks blocks) */
    const uint8_t *src;
    size_t src_len;
    tbx_dtype src_dt;
    uint64_t n, nblocks;
    tbx_quant_fn quant;  /* this job's type (tensors may get different fallback types) */
    tbx_dtype to;        /* ... and its dtype, to check what the blocks decode to */
    tbx_status st;       /* decode status */
    tbx_value_check chk; /* what this job's values became */
} qslot;

struct qbufs {
    tbx_pool *pool;          /* NULL: the calling thread does everything */
    int nslots;
    bool started;
    tbx_quant_fn quant;
    size_t qcap;
    uint64_t posted;         /* jobs posted so far; job j is in slot j % nslots */
    qslot slot[QSLOTS_MAX];
};

static void qjob_run(tbx_task *task) {
    qslot *s = (qslot *)task;
    s->st = TBX_OK;
    memset(&s->chk, 0, sizeof s->chk);
    if (s->src) s->st = tbx_decode_f32(s->src_dt, s->src, s->src_len, s->n, s->f);
    if (s->st != TBX_OK) return;
    s->quant(s->f, s->q, s->nblocks);
    tbx_value_check_out(&s->chk, s->to, s->f, s->q, s->n);
}

/* Buffers and threads for quantizing to `to` with `quant` (once per conversion). */
static tbx_status qbufs_start(tbx_file *in, qbufs *qb, tbx_quant_fn quant, tbx_dtype to,
                              tbx_error *err) {
    if (qb->started) return TBX_OK;
    const tbx_dtype_info *qi = tbx_dtype_get(to);
    qb->quant = quant;
    /* room for the requested type and for any fallback type (q8_0 is the widest) */
    const tbx_dtype_info *q8 = tbx_dtype_get(TBX_DT_Q8_0);
    qb->qcap = (size_t)(QCHUNK_ELEMS / qi->block_size * qi->block_bytes);
    if (q8 && (size_t)(QCHUNK_ELEMS / q8->block_size * q8->block_bytes) > qb->qcap)
        qb->qcap = (size_t)(QCHUNK_ELEMS / q8->block_size * q8->block_bytes);
    qb->started = true;
    qb->pool = tbx_pool_start(&in->al, tbx_threads_default());
    const int nth = tbx_pool_threads(qb->pool);
    qb->nslots = nth > 0 ? nth + 2 : 1;
    for (int k = 0; k < qb->nslots; k++) {
        qslot *s = &qb->slot[k];
        s->qb = qb;
        s->task.run = qjob_run;
        s->f = tbx_malloc(&in->al, (size_t)QCHUNK_ELEMS * sizeof(float));
        s->q = tbx_malloc(&in->al, qb->qcap);
        if (!s->f || !s->q) return tbx_err_nomem(err, "quantization buffer");
    }
    return TBX_OK;
}

static void qbufs_free(tbx_file *in, qbufs *qb) {
    tbx_pool_stop(qb->pool);
    for (int k = 0; k < qb->nslots; k++) {
        qslot *s = &qb->slot[k];
        tbx_free(&in->al, s->f, s->f ? (size_t)QCHUNK_ELEMS * sizeof(float) : 0);
        tbx_free(&in->al, s->q, s->q ? qb->qcap : 0);
        tbx_free(&in->al, s->raw, s->raw_cap);
    }
}

/* Hands the job filled in slot s to the workers, or runs it when there are none. */
static void qjob_post(qbufs *qb, qslot *s) {
    qb->posted++;
    tbx_pool_submit(qb->pool, &s->task);
}

/* Quantizes 2-D tensor i ([rows, cols], cols a multiple of the block size) to `to` and
 * streams it to the writer as its tensor wi (see above); what its values became is added to
 * *chk. A dense float tensor stored raw is decoded by the workers; any other (a quantized
 * tensor being requantized) is read as f32 through tbx_tensor_read_f32. */
static tbx_status quantize_tensor(tbx_file *in, size_t i, tbx_writer *w, uint64_t wi,
                                  tbx_quant_fn quant, tbx_dtype to, qbufs *qb,
                                  tbx_value_check *chk, tbx_error *err) {
    const tbx_tensor *t = &in->tensors[i];
    const tbx_dtype_info *qi = tbx_dtype_get(to), *si = tbx_dtype_get(t->dtype);
    tbx_status st = qbufs_start(in, qb, quant, to, err);
    if (st != TBX_OK) return st;
    const uint64_t nelems = t->nelems, nchunks = (nelems + QCHUNK_ELEMS - 1) / QCHUNK_ELEMS;
    const bool plain = !t->quant && t->ncomp == 1 && plain_float(t->dtype);
    const uint64_t esize = plain ? si->bits / 8 : 4; /* f16, bf16, f32, f64; else f32 reads */
    const uint64_t where = t->ncomp ? t->comp[0].offset : TBX_NO_OFFSET;
    /* raw storage: the workers decode (from the mapping when the file is mapped) */
    const bool raw = plain && tbx_comp_served_raw(in, &t->comp[0]);
    const uint8_t *map = NULL;
    if (raw) {
        tbx_error e2;
        const void *p;
        size_t len;
        if (tbx_tensor_map(in, i, &p, &len, &e2) == TBX_OK && len >= nelems * esize) map = p;
    }
    /* chunk c is job base + c: in slot (base + c) % S (no job is pending between tensors) */
    const uint64_t S = (uint64_t)qb->nslots, base = qb->posted;
    uint64_t next_read = 0, next_write = 0;
    while (st == TBX_OK && next_write < nchunks) {
        if (next_read < nchunks && next_read - next_write < S) {
            qslot *s = &qb->slot[(base + next_read) % S];
            const uint64_t e0 = next_read * QCHUNK_ELEMS;
            const uint64_t n = nelems - e0 < QCHUNK_ELEMS ? nelems - e0 : QCHUNK_ELEMS;
            s->n = n;
            s->nblocks = n / qi->block_size;
            s->quant = quant;
            s->to = to;
            s->src_dt = t->dtype;
            s->src_len = (size_t)(n * esize);
            s->src = NULL;
            if (map) {
                s->src = map + e0 * esize;
            } else if (raw) {
                if (s->src_len > s->raw_cap) {
                    tbx_free(&in->al, s->raw, s->raw_cap);
                    s->raw_cap = 0;
                    s->raw = tbx_malloc(&in->al, (size_t)QCHUNK_ELEMS * esize);
                    if (!s->raw) { st = tbx_err_nomem(err, "quantization buffer"); break; }
                    s->raw_cap = (size_t)QCHUNK_ELEMS * esize;
                }
                st = tbx_tensor_read_range(in, i, e0 * esize, s->raw, s->src_len, err);
                s->src = s->raw;
            } else {
                st = tbx_tensor_read_f32(in, i, e0, n, s->f, err);
            }
            if (st != TBX_OK) break;
            qjob_post(qb, s);
            next_read++;
            /* write what is finished already, without waiting */
            if (!tbx_pool_wait(qb->pool, &qb->slot[(base + next_write) % S].task, false)) continue;
        }
        qslot *s = &qb->slot[(base + next_write) % S];
        tbx_pool_wait(qb->pool, &s->task, true);
        if (map) { /* the worker read the mapping: were those bytes still the file's? */
            const tbx_component *k = &t->comp[0];
            st = tbx_source_check(tbx_file_source(in, k->src),
                                  k->offset + next_write * QCHUNK_ELEMS * esize, s->src_len,
                                  t->name, err);
            if (st != TBX_OK) break;
        }
        if (s->st != TBX_OK) {
            st = tbx_err(err, s->st, where == TBX_NO_OFFSET ? where
                                     : where + next_write * QCHUNK_ELEMS * esize, t->name,
                         "tensor \"%s\": cannot decode %s data", t->name, si->name);
            break;
        }
        chk->nonfinite += s->chk.nonfinite;
        chk->beyond += s->chk.beyond;
        if (s->chk.max_abs > chk->max_abs) chk->max_abs = s->chk.max_abs;
        st = tbx_writer_write_tensor(w, wi, s->q, (size_t)(s->nblocks * qi->block_bytes), err);
        next_write++;
    }
    tbx_pool_drain(qb->pool);
    return st;
}

/* An input opened from a model directory (a Hugging Face directory, or the index of a sharded
 * set, read as one file): the writer learns the directory's base name as Go's filepath.Base
 * gives it (trailing slashes dropped; "" -> "."), which MCF's writer uses as mantle's pack does.
 * The provider of the input's path computed it when the input was opened (src/io/provider.h). */
static tbx_status set_source_dir(const tbx_file *in, tbx_writer *w, tbx_error *err) {
    if (!in->prov || !in->part_names || !in->prov->base) return TBX_OK;
    return tbx_writer_set_source_dir_(w, in->prov->base, in->prov->base_len, err);
}

/* The warnings of a checked tensor as one phrase ("" when none). */
static void warn_text(const tbx_convert_report *r, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    if (r->beyond) {
        int k = snprintf(buf, cap, "%llu finite value%s beyond %s's range (+-%g: no finite f16 "
                         "scale reaches %s; the largest is %g)", (unsigned long long)r->beyond,
                         r->beyond == 1 ? "" : "s", dt_name(r->to), r->range,
                         r->beyond == 1 ? "it" : "them", r->max_abs);
        n = k > 0 && (size_t)k < cap ? (size_t)k : cap - 1;
    }
    if (r->nonfinite && n + 2 < cap)
        snprintf(buf + n, cap - n, "%s%llu finite value%s came out as Inf or NaN", n ? "; " : "",
                 (unsigned long long)r->nonfinite, r->nonfinite == 1 ? "" : "s");
}

/* Reports tensor i (tbx_convert_options.on_tensor) once its bytes are written: its plan, why,
 * and what its values became; under TBX_CONVERT_STRICT a warning fails the conversion. */
static tbx_status report_tensor(const tbx_file *in, size_t i, const tplan *p,
                                const tbx_convert_options *o, uint64_t nvalues,
                                const tbx_value_check *c, tbx_error *err) {
    const tbx_tensor *t = &in->tensors[i];
    char why[200];
    tbx_convert_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.tensor = i;
    r.name = t->name;
    r.from = t->dtype;
    r.to = (tbx_dtype)p->to;
    r.action = (tbx_convert_action)p->action;
    why_text(t, p, o, why, sizeof why);
    r.reason = why;
    r.nvalues = nvalues;
    r.nonfinite = c->nonfinite;
    r.beyond = c->beyond;
    r.range = (double)tbx_quant_range(r.to);
    r.max_abs = (double)c->max_abs;
    if (c->nonfinite) r.warnings |= TBX_CONVERT_WARN_NONFINITE;
    if (c->beyond) r.warnings |= TBX_CONVERT_WARN_RANGE;
    if (o->on_tensor) o->on_tensor(o->progress_ud, &r);
    if (r.warnings && (o->flags & TBX_CONVERT_STRICT)) {
        char wt[256];
        warn_text(&r, wt, sizeof wt);
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, t->name,
                       "tensor \"%s\" (%s -> %s): %s; refused under --strict "
                       "(TBX_CONVERT_STRICT)", t->name, dt_name(r.from), dt_name(r.to), wt);
    }
    return TBX_OK;
}

/* llama.cpp's general.file_type (LLAMA_FTYPE) of the output when the conversion changes
 * tensors: with quant_to, the requested type when a tensor got it (what llama-quantize
 * records, whatever fallback types some tensors got); else the dtype most tensors of two or
 * more dimensions have in the output (llama.cpp's "mostly X, except 1-D tensors"; all of them
 * when there is none of 2+ dimensions). Ties: the smaller dtype value. */
static uint32_t llama_file_type(const tbx_file *in, const tplan *plan,
                                const tbx_convert_options *o) {
    uint64_t count[256];
    memset(count, 0, sizeof count);
    bool any_2d = false;
    for (size_t i = 0; i < in->ntensors; i++) {
        if (in->tensors[i].unreadable) continue; /* left out */
        if (o->quant_to != TBX_DT_INVALID && plan[i].to == (uint16_t)o->quant_to &&
            plan[i].action != TBX_CONVERT_KEPT)
            return tbx_llama_ftype(o->quant_to);
        any_2d |= in->tensors[i].ndim >= 2;
    }
    for (size_t i = 0; i < in->ntensors; i++)
        if (!in->tensors[i].unreadable && (!any_2d || in->tensors[i].ndim >= 2) &&
            plan[i].to < 256)
            count[plan[i].to]++;
    size_t best = 0;
    for (size_t d = 1; d < 256; d++)
        if (count[d] > count[best]) best = d;
    return tbx_llama_ftype((tbx_dtype)best);
}

tbx_status tbx_convert(tbx_file *in, const char *out_path, const tbx_convert_options *opt,
                       tbx_error *err) {
    if (!in || !out_path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "convert", "NULL argument");
    tbx_convert_options o;
    tbx_convert_options_init(&o);
    if (opt) {
        /* callers built against an older, shorter struct leave the newer fields at defaults */
        size_t n = tbx_struct_bytes(opt->struct_size, sizeof o);
        memcpy(&o, opt, n);
        o.struct_size = sizeof o;
    }
    tbx_error local;
    if (!err) err = &local;
    if (o.cast_to != TBX_DT_INVALID && o.cast_to != TBX_DT_F32 && o.cast_to != TBX_DT_F16 &&
        o.cast_to != TBX_DT_BF16 && o.cast_to != TBX_DT_F64)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "cast",
                       "casting to %s is not supported (f32, f16, bf16, f64)",
                       tbx_dtype_get(o.cast_to) ? tbx_dtype_get(o.cast_to)->name : "?");

    if (o.meta && tbx_value_type_of(o.meta) != TBX_V_MAP)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "meta",
                       "extra metadata must be a map value, not %s",
                       tbx_value_type_name(tbx_value_type_of(o.meta)));

    tbx_quant_fn quant = NULL;
    const int mcfq = mcfq_kind_of(o.quant_to);
    if (o.quant_to != TBX_DT_INVALID && mcfq < 0) {
        const tbx_dtype_info *qi = tbx_dtype_get(o.quant_to);
        quant = qi && (qi->flags & TBX_DTF_BLOCK) ? tbx_ggml_quant_for(o.quant_to) : NULL;
        if (!quant)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                           "quantizing to %s is not supported (q8_0, q4_0, q4_1, q5_0, q5_1, "
                           "q2_k, q3_k, q4_k, q5_k, q6_k, tq1_0, tq2_0, mxfp4; MCF: mcf_q8, "
                           "mcf_q4, mcf_k6, mcf_k4, mcf_k3, mcf_k2, mcf_int8, mcf_int4)",
                           qi ? qi->name : "?");
    }
    if ((o.flags & TBX_CONVERT_QUANT_CLIP) &&
        (mcfq < 0 || !(o.quant_clip_min <= o.quant_clip_max)))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant_clip",
                       mcfq < 0 ? "a clip range applies to MCF quantization only"
                                : "clip range [%g, %g]: min must not exceed max",
                       (double)o.quant_clip_min, (double)o.quant_clip_max);
    /* the output can be written (its directory exists, ...) before any work is done */
    tbx_status st = tbx_writer_check(out_path, &o.write, err);
    if (st != TBX_OK) return st;

    /* tensors the input lists but cannot read: refused before anything is written, naming the
     * first, unless leaving them out is allowed */
    size_t nbad = 0;
    for (size_t i = 0; i < in->ntensors; i++) nbad += in->tensors[i].unreadable != 0;
    if (nbad && !(o.flags & TBX_CONVERT_DROP_UNREADABLE)) {
        const tbx_tensor *t = in->tensors;
        while (!t->unreadable) t++;
        st = in->drv->check_component ? in->drv->check_component(in, t, 0, err) : TBX_OK;
        if (st == TBX_OK)
            st = tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor",
                         "tensor \"%s\": its values cannot be read", t->name);
        char hint[96];
        if (nbad > 1)
            snprintf(hint, sizeof hint, "and %zu more like it; leave them out with "
                     "--drop-unreadable", nbad - 1);
        else
            snprintf(hint, sizeof hint, "leave it out with --drop-unreadable");
        append_hint(err, hint);
        return st;
    }
    /* a Hugging Face model (its config.json is a section) to GGUF: written for llama.cpp */
    const tbx_format to_fmt = o.write.format ? o.write.format : tbx_format_from_path(out_path);
    if (to_fmt == TBX_FORMAT_GGUF && !(o.flags & TBX_CONVERT_RAW) && tbx_gguf_hf_applies(in)) {
        if (nbad)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                           "%zu tensors cannot be read, and leaving tensors out is not applied "
                           "to a Hugging Face -> GGUF conversion (convert with --raw)", nbad);
        if (o.meta && tbx_value_len(o.meta))
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "meta",
                           "extra metadata is not applied to a Hugging Face -> GGUF conversion "
                           "(set it afterwards with tbx gguf set)");
        /* its tensors are floats: TBX_CONVERT_DEQUANTIZE / _REQUANTIZE have nothing to do */
        tbx_gguf_hf_options ho;
        tbx_gguf_hf_options_init(&ho);
        ho.write = o.write;
        ho.quant_to = o.quant_to;
        ho.cast_to = o.cast_to;
        ho.progress = o.progress;
        ho.progress_ud = o.progress_ud;
        ho.on_tensor = o.on_tensor;
        ho.flags = o.flags & TBX_CONVERT_STRICT;
        return tbx_gguf_from_hf(in, out_path, &ho, err);
    }

    /* what each tensor becomes, decided before anything is written */
    tplan *plan = in->ntensors ? tbx_calloc(&in->al, in->ntensors, sizeof *plan) : NULL;
    if (in->ntensors && !plan) return tbx_err_nomem(err, "conversion plan");
    const size_t plan_len = in->ntensors * sizeof *plan;
    bool changed = false;
    for (size_t i = 0; st == TBX_OK && i < in->ntensors; i++) {
        if (in->tensors[i].unreadable) continue; /* left out: kept in the plan, never written */
        st = decide(in, i, &o, mcfq, to_fmt, &plan[i], err);
        changed |= plan[i].action != TBX_CONVERT_KEPT;
    }
    /* MCF targets: the descriptions handed to the writer (it borrows them), one per tensor */
    tbx_quant_info *mq = NULL;
    const size_t mq_len = mcfq >= 0 ? in->ntensors * sizeof *mq : 0;
    if (st == TBX_OK && mcfq >= 0 && in->ntensors &&
        !(mq = tbx_calloc(&in->al, in->ntensors, sizeof *mq)))
        st = tbx_err_nomem(err, "quantization descriptions");
    tbx_writer *w = NULL;
    if (st == TBX_OK) st = tbx_writer_open(&w, out_path, &o.write, err);
    if (st != TBX_OK) {
        tbx_free(&in->al, mq, mq_len);
        tbx_free(&in->al, plan, plan_len);
        return st;
    }
    kept_values kept = { NULL, 0, 0 };
    const uint32_t ftype = changed ? llama_file_type(in, plan, &o) : 0;
    st = set_source_dir(in, w, err);
    if (st == TBX_OK) st = copy_meta(in, w, &o, changed ? &ftype : NULL, &kept, err);
    if (st == TBX_OK) st = copy_sizevars(in, w, &o, err);
    if (st == TBX_OK) st = copy_sections(in, w, &o, err);
    /* the input handle outlives the writer: its names and shapes need no copies, and its name
     * index (distinct names, tensor i of the writer is tensor i of the input) serves the writer */
    /* (with tensors left out the writer's indexes are not the input's: it keeps its own index) */
    if (st == TBX_OK)
        st = tbx_writer_borrow_descs_(w, in->ntensors - nbad, nbad ? NULL : &in->tensor_names,
                                      err);

    uint64_t total = 0;
    for (size_t i = 0; st == TBX_OK && i < in->ntensors; i++) {
        const tbx_tensor *t = &in->tensors[i];
        if (t->unreadable) continue; /* left out (TBX_CONVERT_DROP_UNREADABLE) */
        const tplan *p = &plan[i];
        if (p->action == TBX_CONVERT_KEPT && t->quant) {
            st = declare_kept_quantized(in, i, w, err);
        } else if (p->action == TBX_CONVERT_KEPT &&
                   (t->ncomp > 1 || t->layout != TBX_LAYOUT_DENSE)) {
            st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                         "tensor \"%s\": %s layout cannot be converted yet", t->name,
                         tbx_layout_name(t->layout));
        } else {
            tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
            d.name = t->name;
            d.name_len = t->name_len;
            d.dtype = (tbx_dtype)p->to;
            d.ndim = t->ndim;
            d.shape = t->shape;
            d.has_data = t->ncomp >= 1;
            if (mcfq >= 0 && d.dtype == o.quant_to && p->action != TBX_CONVERT_KEPT)
                st = declare_mcfq(in, i, w, &d, &o, &mq[i], err);
            else
                st = tbx_writer_add_tensor(w, &d, NULL, err);
        }
        if (st == TBX_OK && t->ncomp >= 1) total += t->comp[0].nbytes;
    }

    qbufs qb;
    memset(&qb, 0, sizeof qb);
    uint8_t *buf = NULL;
    float *fbuf = NULL;
    size_t buf_cap = 0, fbuf_cap = 0;
    uint64_t done = 0, wn = 0;
    for (size_t i = 0; st == TBX_OK && i < in->ntensors; i++) {
        const tbx_tensor *t = &in->tensors[i];
        if (t->unreadable) continue;
        const uint64_t wi = wn++; /* its index in the writer */
        const tplan *p = &plan[i];
        const tbx_dtype to = (tbx_dtype)p->to;
        const tbx_dtype_info *toi = tbx_dtype_get(to);
        tbx_value_check chk;
        memset(&chk, 0, sizeof chk);
        uint64_t nvalues = 0;
        if (t->ncomp == 0) { /* no data: nothing to write */
            st = report_tensor(in, i, p, &o, 0, &chk, err);
            continue;
        }
        const tbx_component *k = &t->comp[0];
        if (p->action != TBX_CONVERT_KEPT && mcfq >= 0 && to == o.quant_to) {
            tbx_mcfq_request rq;
            memset(&rq, 0, sizeof rq);
            rq.kind = (unsigned)mcfq;
            rq.method = (o.flags & TBX_CONVERT_QUANT_MANTLE) ? TBX_MCFQ_METHOD_MANTLE
                                                             : TBX_MCFQ_METHOD_BEST;
            rq.has_clip = true;
            rq.clip_lo = (float)mq[i].clip_min;
            rq.clip_hi = (float)mq[i].clip_max;
            wsink ws = { w, wi };
            st = tbx_mcfq_convert_tensor(in, i, &rq, write_sink, &ws, err);
            if (st == TBX_OK && o.on_quant) o.on_quant(o.progress_ud, i, rq.nvalues, rq.sse);
            chk = rq.chk;
            nvalues = rq.nvalues;
        } else if (p->action != TBX_CONVERT_KEPT && toi && (toi->flags & TBX_DTF_BLOCK)) {
            st = quantize_tensor(in, i, w, wi, tbx_ggml_quant_for(to), to, &qb, &chk, err);
            nvalues = t->nelems;
        } else if (p->action != TBX_CONVERT_KEPT) {
            /* a cast (also llama-quantize's f16 fallback) or a dequantization: decode to f32
             * in chunks, re-encode */
            uint64_t per = CHUNK / 8;
            const tbx_dtype_info *si = tbx_dtype_get(t->dtype);
            if (si && si->block_size > 1) per -= per % si->block_size;
            if (!fbuf) {
                fbuf_cap = (size_t)per;
                fbuf = tbx_malloc(&in->al, fbuf_cap * sizeof(float));
                buf_cap = (size_t)per * 8;
                buf = tbx_malloc(&in->al, buf_cap);
                if (!fbuf || !buf) { st = tbx_err_nomem(err, "convert buffer"); break; }
            }
            for (uint64_t e = 0; st == TBX_OK && e < t->nelems; e += per) {
                uint64_t n = t->nelems - e < per ? t->nelems - e : per;
                st = tbx_tensor_read_f32(in, i, e, n, fbuf, err);
                if (st == TBX_OK && !tbx_encode_float(to, fbuf, n, buf))
                    st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "cast", "cannot cast");
                if (st == TBX_OK) tbx_value_check_out(&chk, to, fbuf, buf, n);
                if (st == TBX_OK)
                    st = tbx_writer_write_tensor(w, wi, buf, (size_t)(n * toi->bits / 8), err);
            }
            nvalues = t->nelems;
        } else if (t->ncomp > 1) {
            /* a quantized tensor kept as such (zTensor quantized_group): its components'
             * decoded bytes one after the other, each in CHUNK pieces */
            if (!buf) {
                buf_cap = CHUNK;
                buf = tbx_malloc(&in->al, buf_cap);
                if (!buf) { st = tbx_err_nomem(err, "convert buffer"); break; }
            }
            for (uint32_t c = 0; st == TBX_OK && c < t->ncomp; c++)
                for (uint64_t q = 0; st == TBX_OK && q < t->comp[c].nbytes; q += buf_cap) {
                    uint64_t left = t->comp[c].nbytes - q;
                    size_t n = (size_t)(left < buf_cap ? left : buf_cap);
                    st = tbx_component_read_range(in, i, c, q, buf, n, err);
                    if (st == TBX_OK) st = tbx_writer_write_tensor(w, wi, buf, n, err);
                }
        } else if (tbx_comp_served_raw(in, k) || in->drv->read_component_range) {
            /* raw bytes from the source, encoded ones through the driver's decoding cursor:
             * one pass in CHUNK pieces, whatever size the tensor declares */
            int fd;
            uint64_t off;
            const bool kernel = tbx_writer_copies_fd_(w) && tbx_file_fd_range_(in, i, 0, k->nbytes, &fd, &off);
            if (!buf && !kernel) {
                buf_cap = CHUNK;
                buf = tbx_malloc(&in->al, buf_cap);
                if (!buf) { st = tbx_err_nomem(err, "convert buffer"); break; }
            }
            const uint64_t piece = kernel ? COPY_PIECE : CHUNK;
            for (uint64_t q = 0; st == TBX_OK && q < k->nbytes; q += piece) {
                uint64_t n = k->nbytes - q < piece ? k->nbytes - q : piece;
                if (kernel) {
                    st = tbx_writer_copy_fd_(w, wi, fd, off + q, n, err);
                } else {
                    st = tbx_tensor_read_range(in, i, q, buf, (size_t)n, err);
                    if (st == TBX_OK) st = tbx_writer_write_tensor(w, wi, buf, (size_t)n, err);
                }
                if (st == TBX_OK && o.progress) o.progress(o.progress_ud, done + q + n, total);
            }
        } else { /* a driver that decodes only whole components (big-endian GGUF) */
            size_t need = 0;
            tbx_tensor_read(in, i, NULL, 0, &need, err);
            uint8_t *whole = tbx_malloc(&in->al, need);
            if (!whole) { st = tbx_err_nomem(err, "tensor buffer"); break; }
            st = tbx_tensor_read(in, i, whole, need, NULL, err);
            if (st == TBX_OK) st = tbx_writer_write_tensor(w, wi, whole, need, err);
            tbx_free(&in->al, whole, need);
        }
        if (st == TBX_OK) st = report_tensor(in, i, p, &o, nvalues, &chk, err);
        done += k->nbytes;
        if (st == TBX_OK && o.progress) o.progress(o.progress_ud, done, total);
    }
    tbx_free(&in->al, buf, buf_cap);
    tbx_free(&in->al, fbuf, fbuf_cap * sizeof(float));
    qbufs_free(in, &qb);
    /* an input that shrank before the output is committed fails the conversion, however its
     * bytes were read (every read checks its own bytes; this also covers a shrink that cut
     * only bytes the conversion had already read) */
    if (st == TBX_OK) st = tbx_file_check_sources(in, err);
    if (st != TBX_OK) tbx_writer_abort(w);
    else st = tbx_writer_finish(w, err);
    tbx_free(&in->al, mq, mq_len);
    tbx_free(&in->al, plan, plan_len);
    kept_free(in, &kept);
    return st;
}
