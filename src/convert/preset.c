/*
 * preset.c - the plan of a llama-quantize preset (tbx_convert_options.quant_preset): a GGUF
 * model (one that names its general.architecture) to a GGUF, each tensor of the type llama.cpp's
 * llama_model_quantize gives it (src/models/llama_quant.c decides), in llama.cpp's order (its
 * loader's: blk.N by N, the others first, then by name), so that the file written is the one
 * llama_model_quantize writes from the same input. The metadata order (general.file_type and
 * general.quantization_version last) is the façade's (tbx_convert_copy_meta, llama order).
 */
#include "convert.h"
#include "encode.h"
#include "models.h"

#include <stdio.h>
#include <stdlib.h>

bool tbx_preset_applies(const tbx_file *in, const tbx_convert_options *o, tbx_format to_fmt) {
    if (!o->quant_preset || to_fmt != TBX_FORMAT_GGUF) return false;
    size_t len = 0;
    const char *arch = tbx_meta_get_str(in, "general.architecture", &len);
    return tbx_lq_arch_known(arch, len);
}

/* ------------------------------------------------------------------------------------------ */
/* The plan                                                                                    */
/* ------------------------------------------------------------------------------------------ */
enum { PW_NONE = 0, PW_PRESET, PW_OPTION, PW_RULE, PW_FALLBACK, PW_ALREADY, PW_NOT_QUANT };

typedef struct preset_ud {
    const tbx_lq_preset *preset;
    const tbx_convert_options *o;
    tbx_lq_choice *choice; /* per plan tensor */
    size_t base;           /* --keep-split: the plan's window starts there */
} preset_ud;

void tbx_plan_preset_window(tbx_plan *p, size_t first) {
    if (p->ud) ((preset_ud *)p->ud)->base = first;
}

static void preset_reason(const tbx_plan *p, const tbx_file *in, size_t k, char *buf,
                          size_t cap) {
    const preset_ud *u = p->ud;
    const tbx_plan_tensor *pt = &p->t[k];
    const tbx_tensor *t = &in->tensors[pt->src];
    const tbx_lq_choice *c = &u->choice[u->base + k];
    const tbx_dtype_info *di = tbx_dtype_get((tbx_dtype)pt->dtype);
    const char *to = di ? di->name : "?";
    buf[0] = 0;
    switch (pt->why) {
    case PW_PRESET:
        snprintf(buf, cap, "llama-quantize %s%s", u->preset->name,
                 u->o->preset_flags & TBX_PRESET_PURE ? " --pure" : "");
        break;
    case PW_OPTION:
        snprintf(buf, cap, "%s", !strcmp(t->name, "output.weight") ? "--output-tensor-type"
                                                                    : "--token-embedding-type");
        break;
    case PW_RULE:
        snprintf(buf, cap, "--tensor-type %s",
                 c->rule < u->o->n_tensor_types ? u->o->tensor_types[c->rule].pattern : "?");
        break;
    case PW_FALLBACK: {
        const tbx_dtype_info *wi = tbx_dtype_get(c->wanted);
        snprintf(buf, cap, "llama-quantize %s: rows of %llu values are not a multiple of "
                 "%s's block of %llu",
                 u->preset->name, (unsigned long long)t->shape[t->ndim - 1],
                 wi ? wi->name : "?", (unsigned long long)(wi ? wi->block_size : 0));
        break;
    }
    case PW_ALREADY: snprintf(buf, cap, "already %s", to); break;
    case PW_NOT_QUANT:
        snprintf(buf, cap, "%s", u->preset->deflt == TBX_DT_INVALID ? "copied (COPY)"
                                 : "not quantized by llama.cpp (1-D, a norm, not a weight, ...)");
        break;
    default: break;
    }
}

static const tbx_file *sort_in; /* qsort has no context argument in C11 */
/* --keep-split: by shard, then by offset in it (the input's order) */
static int by_shard(const void *a, const void *b) {
    const tbx_tensor *x = &sort_in->tensors[*(const size_t *)a];
    const tbx_tensor *y = &sort_in->tensors[*(const size_t *)b];
    const uint32_t sx = x->ncomp ? x->comp[0].src : 0, sy = y->ncomp ? y->comp[0].src : 0;
    if (sx != sy) return sx < sy ? -1 : 1;
    const uint64_t ox = x->ncomp ? x->comp[0].offset : 0, oy = y->ncomp ? y->comp[0].offset : 0;
    return ox < oy ? -1 : ox > oy;
}
static int by_llama_order(const void *a, const void *b) {
    const size_t ia = *(const size_t *)a, ib = *(const size_t *)b;
    const int c = tbx_lq_name_cmp(sort_in->tensors[ia].name, sort_in->tensors[ib].name);
    return c ? c : (ia < ib ? -1 : ia > ib);
}

static uint32_t meta_u32(const tbx_file *in, const char *key_tmpl, uint32_t dflt) {
    const tbx_value *v = tbx_meta_find_arch(in, key_tmpl);
    uint64_t u = 0;
    if (!v) return dflt;
    if (tbx_value_get_u64(v, &u) != TBX_OK) {
        /* an array (per-layer head counts): its first value, as llama.cpp's layer 0 */
        if (tbx_value_type_of(v) == TBX_V_ARRAY && tbx_value_len(v) > 0 &&
            tbx_value_get_u64(tbx_value_at(v, 0), &u) == TBX_OK)
            return u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
        return dflt;
    }
    return u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
}

/* llama.cpp's loader's file type when the input has no general.file_type: the type most
 * tensors have (first to reach the count, in llama.cpp's order), "guessed". */
static uint32_t guessed_ftype(const tbx_file *in, const size_t *order) {
    uint64_t count[256];
    memset(count, 0, sizeof count);
    uint64_t best_n = 0;
    tbx_dtype best = TBX_DT_F32;
    for (size_t k = 0; k < in->ntensors; k++) {
        const tbx_dtype dt = in->tensors[order[k]].dtype;
        if ((unsigned)dt >= 256) continue;
        if (++count[dt] > best_n) {
            best_n = count[dt];
            best = dt;
        }
    }
    uint32_t f = tbx_llama_ftype(best);
    if (f == 1024 || best == TBX_DT_MXFP4) f = 0;
    return f | 1024u;
}

tbx_status tbx_plan_preset(tbx_file *in, const tbx_convert_options *o, tbx_plan *p,
                           uint32_t *ftype, tbx_error *err) {
    const tbx_lq_preset *pr = tbx_lq_preset_find(o->quant_preset);
    if (!pr)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant_preset",
                       "'%s' is not one of llama-quantize's types", o->quant_preset);
    const size_t n = in->ntensors;
    for (size_t i = 0; i < n; i++)
        if (in->tensors[i].unreadable)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, in->tensors[i].name,
                           "tensor \"%s\" cannot be read, and a llama-quantize preset writes "
                           "every tensor of the model", in->tensors[i].name);
    /* GGUF's quant_method=search would write other bytes than llama.cpp's */
    const tbx_value *wo = o->write.options;
    for (uint64_t i = 0, nw = tbx_value_type_of(wo) == TBX_V_MAP ? tbx_value_len(wo) : 0; i < nw;
         i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(wo, i, &kl);
        const char *v = tbx_value_get_str(tbx_value_at(wo, i), NULL);
        if (k && kl == 12 && !memcmp(k, "quant_method", 12) && v && !strcmp(v, "search"))
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "options.quant_method",
                           "a llama-quantize preset (%s) writes llama.cpp's bytes: "
                           "quant_method=search applies to --quant TYPE of a file that is no "
                           "llama.cpp model", pr->name);
    }
    size_t arch_len = 0;
    const char *arch = tbx_meta_get_str(in, "general.architecture", &arch_len);
    tbx_lq_model m;
    memset(&m, 0, sizeof m);
    char archbuf[64];
    snprintf(archbuf, sizeof archbuf, "%.*s", (int)(arch_len < 63 ? arch_len : 63),
             arch ? arch : "");
    m.arch = archbuf;
    m.n_layer = meta_u32(in, "{arch}.block_count", 0);
    m.n_head = meta_u32(in, "{arch}.attention.head_count", 0);
    m.n_head_kv = meta_u32(in, "{arch}.attention.head_count_kv", m.n_head);
    m.n_expert = meta_u32(in, "{arch}.expert_count", 0);
    tbx_lq_model_finish(&m);

    tbx_lq_rules *rs = NULL;
    tbx_status st = tbx_lq_rules_compile(o->tensor_types, o->n_tensor_types, &rs, err);
    if (st != TBX_OK) return st;
    tbx_lq_params lp;
    memset(&lp, 0, sizeof lp);
    lp.ftype = pr->ftype;
    lp.deflt = pr->deflt;
    lp.only_copy = pr->deflt == TBX_DT_INVALID;
    lp.pure = (o->preset_flags & TBX_PRESET_PURE) != 0;
    lp.has_imatrix = o->imatrix != NULL;
    lp.quantize_output = !(o->preset_flags & TBX_PRESET_LEAVE_OUTPUT);
    lp.output_type = o->output_tensor_type;
    lp.token_embd_type = o->token_embedding_type;
    tbx_lq_rules_use(rs, &lp);

    size_t *order = tbx_plan_alloc(p, (n ? n : 1) * sizeof *order);
    tbx_lq_tensor *lt = tbx_plan_alloc(p, (n ? n : 1) * sizeof *lt);
    preset_ud *ud = tbx_plan_alloc(p, sizeof *ud);
    tbx_lq_choice *ch = tbx_plan_alloc(p, (n ? n : 1) * sizeof *ch);
    if (!order || !lt || !ud || !ch) {
        st = tbx_err_nomem(err, "conversion plan");
        goto done;
    }
    for (size_t i = 0; i < n; i++) order[i] = i;
    sort_in = in;
    qsort(order, n, sizeof *order,
          (o->preset_flags & TBX_PRESET_KEEP_SPLIT) ? by_shard : by_llama_order);
    for (size_t k = 0; k < n; k++) {
        const tbx_tensor *t = &in->tensors[order[k]];
        tbx_lq_tensor *x = &lt[k];
        x->name = t->name;
        x->type = t->dtype;
        x->ne[0] = x->ne[1] = x->ne[2] = x->ne[3] = 1;
        if (t->ndim > 4) {
            st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, t->name,
                         "tensor \"%s\" has %u dimensions, and a GGUF model at most 4",
                         t->name, t->ndim);
            goto done;
        }
        for (uint32_t d = 0; d < t->ndim; d++)
            x->ne[d] = (int64_t)t->shape[t->ndim - 1 - d];
        x->ndim = 1;
        for (uint32_t d = 4; d-- > 1;)
            if (x->ne[d] != 1) { x->ndim = d + 1; break; }
    }
    st = tbx_lq_types(&m, &lp, lt, n, ch, err);
    if (st != TBX_OK) goto done;
    ud->preset = pr;
    ud->o = o;
    ud->choice = ch;
    p->ud = ud;
    p->reason = preset_reason;
    p->report_input_index = true;
    /* llama.cpp refuses a type that needs an importance matrix before anything else */
    for (size_t k = 0; k < n && !(o->preset_flags & TBX_PRESET_DRY_RUN); k++) {
        if (!ch[k].requires_imatrix || ch[k].why == TBX_LQ_KEPT) continue;
        const tbx_dtype_info *to = tbx_dtype_get(ch[k].type);
        st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, lt[k].name,
                     "tensor \"%s\": %s gives it %s, which needs an importance matrix "
                     "(llama.cpp refuses to quantize it without one)", lt[k].name, pr->name,
                     to ? to->name : "?");
        goto done;
    }
    st = tbx_plan_reserve(p, n, 0, err);
    for (size_t k = 0; st == TBX_OK && k < n; k++) {
        const tbx_tensor *t = &in->tensors[order[k]];
        const tbx_lq_choice *c = &ch[k];
        tbx_plan_tensor pt;
        memset(&pt, 0, sizeof pt);
        pt.src = order[k];
        pt.flags = TBX_PT_WHOLE;
        pt.dtype = (uint16_t)c->type;
        /* ggml counts dimensions without trailing 1s: the output's shape says so too */
        if (lt[k].ndim != t->ndim) {
            uint64_t *shape = tbx_plan_alloc(p, lt[k].ndim * sizeof *shape);
            if (!shape) { st = tbx_err_nomem(err, "conversion plan"); break; }
            for (uint32_t d = 0; d < lt[k].ndim; d++)
                shape[d] = (uint64_t)lt[k].ne[lt[k].ndim - 1 - d];
            pt.shape = shape;
            pt.ndim = (uint16_t)lt[k].ndim;
        }
        if (c->type == t->dtype) {
            pt.action = TBX_CONVERT_KEPT;
            pt.why = c->why == TBX_LQ_KEPT ? PW_NOT_QUANT : PW_ALREADY;
            pt.enc = (t->quant || (t->ncomp <= 1 && t->layout == TBX_LAYOUT_DENSE))
                         ? TBX_PENC_STORED : TBX_PENC_REFUSE;
            pt.quant = t->quant;
        } else {
            const tbx_dtype_info *from = tbx_dtype_get(t->dtype), *to = tbx_dtype_get(c->type);
            if (t->quant && !(o->flags & TBX_CONVERT_REQUANTIZE)) {
                st = tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, t->name,
                             "tensor \"%s\" is already quantized (%s): %s gives it %s, which "
                             "means decoding its values and quantizing them again (allow it "
                             "with --requantize, llama-quantize's --allow-requantize)", t->name,
                             from ? from->name : "?", pr->name, to ? to->name : "?");
                break;
            }
            const tbx_encoder *e = tbx_encoder_for(c->type);
            if (!e || e->kind == TBX_ENC_PAYLOAD) {
                st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, t->name,
                             "tensor \"%s\": %s gives it %s, which tensorbox cannot quantize "
                             "to yet", t->name, pr->name, to ? to->name : "?");
                break;
            }
            pt.enc = TBX_PENC_ENCODE;
            pt.action = t->quant ? TBX_CONVERT_REQUANTIZED
                        : c->why == TBX_LQ_FALLBACK ? TBX_CONVERT_FALLBACK
                        : e->kind == TBX_ENC_FLOAT ? TBX_CONVERT_CAST : TBX_CONVERT_QUANTIZED;
            pt.why = c->why == TBX_LQ_OPTION ? PW_OPTION : c->why == TBX_LQ_RULE ? PW_RULE
                     : c->why == TBX_LQ_FALLBACK ? PW_FALLBACK : PW_PRESET;
        }
        st = tbx_plan_add(p, &pt, NULL, err);
    }
    if (st == TBX_OK) {
        uint64_t ft = 0;
        if (lp.only_copy)
            *ftype = tbx_meta_get_u64(in, "general.file_type", &ft) == TBX_OK
                         ? (uint32_t)ft : guessed_ftype(in, order);
        else
            *ftype = pr->ftype;
    }
done:
    tbx_lq_rules_free(rs);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* A preset to MCF                                                                             */
/* ------------------------------------------------------------------------------------------ */
/* MCF's families are symmetric (codes times a scale, no minimum), with blocks of 32 values
 * (k: super-blocks of 256 with a u6 sub-scale per block). A ggml type maps to the family of its
 * code width and scale structure: q8_0 and q4_0 are the q family's geometry (a f16 scale per 32
 * signed codes), the symmetric K-quants q6_K / q3_K and the affine q4_K / q2_K the k family of
 * their width. Types of another width (q5_*), affine 32-blocks (q4_1, q5_1) and the codebook,
 * ternary and FP4 types have none: refused, never replaced by a family of other bits. */
tbx_dtype tbx_preset_mcf_family(tbx_dtype t) {
    switch (t) {
    case TBX_DT_F32: case TBX_DT_F16: case TBX_DT_BF16: return t;
    case TBX_DT_Q8_0: return TBX_DT_MCF_Q8;
    case TBX_DT_Q4_0: return TBX_DT_MCF_Q4;
    case TBX_DT_Q6_K: return TBX_DT_MCF_K6;
    case TBX_DT_Q4_K: return TBX_DT_MCF_K4;
    case TBX_DT_Q3_K: return TBX_DT_MCF_K3;
    case TBX_DT_Q2_K: return TBX_DT_MCF_K2;
    default: return TBX_DT_INVALID;
    }
}

enum { PM_KEPT_NO_GGUF = 1, PM_KEPT, PM_FAMILY, PM_CAST };

typedef struct preset_mcf_ud {
    const tbx_lq_preset *preset;
    const tbx_preset_mcf_in *c; /* per input tensor */
} preset_mcf_ud;

static void preset_mcf_reason(const tbx_plan *p, const tbx_file *in, size_t k, char *buf,
                              size_t cap) {
    const preset_mcf_ud *u = p->ud;
    const tbx_plan_tensor *pt = &p->t[k];
    const tbx_preset_mcf_in *c = &u->c[pt->src];
    (void)in;
    const tbx_dtype_info *want = tbx_dtype_get(c->wanted), *got = tbx_dtype_get(c->type);
    const tbx_dtype_info *to = tbx_dtype_get((tbx_dtype)pt->dtype);
    buf[0] = 0;
    switch (pt->why) {
    case PM_KEPT_NO_GGUF:
        snprintf(buf, cap, "not a tensor of llama.cpp's model: kept");
        break;
    case PM_KEPT:
        snprintf(buf, cap, "llama-quantize %s leaves %s %s", u->preset->name, c->gguf,
                 got ? got->name : "?");
        break;
    case PM_FAMILY: case PM_CAST:
        if (c->type != c->wanted)
            snprintf(buf, cap, "llama-quantize %s gives %s %s (llama.cpp's fallback %s: MCF "
                     "pads a partial block): MCF %s", u->preset->name, c->gguf,
                     want ? want->name : "?", got ? got->name : "?", to ? to->name : "?");
        else
            snprintf(buf, cap, "llama-quantize %s gives %s %s: MCF %s", u->preset->name,
                     c->gguf, want ? want->name : "?", to ? to->name : "?");
        break;
    default: break;
    }
}

tbx_status tbx_plan_preset_mcf(tbx_file *in, const tbx_convert_options *o,
                               const tbx_preset_mcf_in *c, tbx_plan *p, tbx_error *err) {
    const tbx_lq_preset *pr = tbx_lq_preset_find(o->quant_preset);
    if (!pr)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant_preset",
                       "'%s' is not one of llama-quantize's types", o->quant_preset);
    /* MCF's clip range and method, as a plain conversion to one of its families takes them */
    tbx_quant_info *clip = NULL;
    tbx_status cst = tbx_plan_mcf_clip(o, p, &clip, err);
    if (cst != TBX_OK) return cst;
    const char *method = tbx_value_get_str(tbx_convert_wopt(o, TBX_MCFQ_OPT_METHOD), NULL);
    const bool mantle = method && !strcmp(method, "mantle");
    preset_mcf_ud *ud = tbx_plan_alloc(p, sizeof *ud);
    if (!ud) return tbx_err_nomem(err, "conversion plan");
    ud->preset = pr;
    ud->c = c;
    p->ud = ud;
    p->reason = preset_mcf_reason;
    p->report_input_index = true;
    size_t nbad = 0;
    for (size_t i = 0; i < in->ntensors; i++) nbad += in->tensors[i].unreadable != 0;
    p->names = nbad ? NULL : &in->tensor_names;
    tbx_status st = tbx_plan_reserve(p, in->ntensors - nbad, 0, err);
    for (size_t i = 0; st == TBX_OK && i < in->ntensors; i++) {
        const tbx_tensor *t = &in->tensors[i];
        if (t->unreadable) continue;
        tbx_plan_tensor pt;
        memset(&pt, 0, sizeof pt);
        pt.src = i;
        pt.flags = TBX_PT_WHOLE;
        pt.dtype = (uint16_t)t->dtype;
        pt.action = TBX_CONVERT_KEPT;
        pt.enc = t->quant || (t->ncomp <= 1 && t->layout == TBX_LAYOUT_DENSE) ? TBX_PENC_STORED
                                                                               : TBX_PENC_REFUSE;
        pt.quant = t->quant;
        pt.why = c[i].gguf ? PM_KEPT : PM_KEPT_NO_GGUF;
        if (c[i].gguf && c[i].by_preset) {
            /* MCF pads a partial block: the preset's own type, not ggml's fallback of it */
            const tbx_dtype fam = tbx_preset_mcf_family(c[i].wanted);
            const tbx_dtype_info *wi = tbx_dtype_get(c[i].wanted);
            const tbx_dtype_info *di = tbx_dtype_get(t->dtype);
            if (fam == TBX_DT_INVALID) {
                st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, t->name,
                             "tensor \"%s\" (llama.cpp's %s): llama-quantize %s gives it %s, "
                             "and MCF has no family for it (MCF stores f32, f16, bf16 and "
                             "q8_0 as q8, q4_0 as q4, q6_K as k6, q4_K as k4, q3_K as k3, q2_K "
                             "as k2; write a GGUF, or pick a preset of those types)", t->name,
                             c[i].gguf, pr->name, wi ? wi->name : "?");
                break;
            }
            if (t->quant || !di || !(di->flags & TBX_DTF_FLOAT) || (di->flags & TBX_DTF_COMPLEX)) {
                st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, t->name,
                             "tensor \"%s\" is %s: a preset to MCF quantizes float tensors",
                             t->name, di ? di->name : "?");
                break;
            }
            if (fam != t->dtype) {
                const tbx_encoder *e = tbx_encoder_for(fam);
                if (!e) {
                    st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, t->name,
                                 "tensor \"%s\": no encoder of %s", t->name, wi->name);
                    break;
                }
                pt.dtype = (uint16_t)fam;
                pt.enc = TBX_PENC_ENCODE;
                pt.quant = NULL;
                if (e->kind == TBX_ENC_PAYLOAD) {
                    if (t->ndim != 2) {
                        st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, t->name,
                                     "tensor \"%s\" has %u dimensions, and MCF's quantized "
                                     "families 2", t->name, t->ndim);
                        break;
                    }
                    pt.action = TBX_CONVERT_QUANTIZED;
                    pt.why = PM_FAMILY;
                    pt.quant = clip;
                    if (!clip) pt.flags |= TBX_PT_CLIP_SCAN;
                    if (mantle) pt.flags |= TBX_PT_MANTLE;
                } else {
                    pt.action = TBX_CONVERT_CAST;
                    pt.why = PM_CAST;
                }
            }
        }
        st = tbx_plan_add(p, &pt, NULL, err);
    }
    return st;
}
