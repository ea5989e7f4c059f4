/*
 * conversions.c - the conversions of the public API (tbx_convert, tbx_gguf_from_hf): the options
 * checked, the output checked before any work (tbx_writer_check), the output format decided
 * once (the options', else the path's extension) and passed down as decided, the plan chosen
 * (a Hugging Face model to GGUF: src/models' plan and metadata; a Hugging Face
 * sentence-transformers directory to EMBD: the plain plan renamed by src/models, which also
 * gives the vocabulary section and metadata in EMBD's terms; to MCF, the plain plan with
 * ModelInfo from config.json given as metadata by src/models; anything else: the plain plan of
 * src/convert/plain.c with the input's metadata, size variables and sections), the writer
 * opened here and handed down, the engine run (src/convert/engine.c), and the writer finished
 * (or aborted: nothing is left behind) once the input is known to be whole.
 */
#include "api.h"
#include "convert.h"
#include "encode.h"
#include "ggml.h"
#include "models.h"
#include "imatrix.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>

const char *tbx_quant_preset_at(size_t i, uint32_t *ftype, tbx_dtype *deflt, int *alias) {
    const tbx_lq_preset *p = tbx_lq_preset_at(i);
    if (!p) return NULL;
    if (ftype) *ftype = p->ftype;
    if (deflt) *deflt = p->deflt;
    if (alias) *alias = p->alias;
    return p->name;
}

void tbx_convert_options_init(tbx_convert_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    tbx_write_options_init(&opt->write);
}

/* An input opened from a model directory (a Hugging Face directory, or the index of a sharded
 * set, read as one file): the writer learns the directory's base name as Go's filepath.Base
 * gives it (trailing slashes dropped; "" -> "."), which MCF's writer uses as mantle's pack does.
 * The provider of the input's path computed it when the input was opened (src/io/provider.h). */
static tbx_status set_source_dir(const tbx_file *in, tbx_writer *w, tbx_error *err) {
    if (!in->prov || !in->part_names || !in->prov->base) return TBX_OK;
    return tbx_writer_set_source_dir_(w, in->prov->base, in->prov->base_len, err);
}

/* What quant_to (kinds BLOCK .. PAYLOAD) or cast_to (FLOAT) may be, from the encoders' table
 * ("q8_0, q4_0, ...; MCF: mcf_q8, ..."; "f32, f64, f16, bf16"). */
static void encoder_list(int first_kind, int last_kind, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int kind = first_kind; kind <= last_kind; kind++) {
        bool first = true;
        for (size_t i = 0; tbx_encoder_at(i); i++) {
            const tbx_encoder *e = tbx_encoder_at(i);
            const tbx_dtype_info *di = tbx_dtype_get(e->dtype);
            if (e->kind != kind || !di || tbx_encoder_for(e->dtype) != e) continue;
            const char *sep = first ? (kind == TBX_ENC_PAYLOAD ? "; MCF: " : "") : ", ";
            int k = snprintf(buf + n, cap - n, "%s%s", sep, di->name);
            if (k < 0 || (size_t)k >= cap - n) return;
            n += (size_t)k;
            first = false;
        }
    }
}

/* ggml refuses to quantize iq2_xxs, iq2_xs and iq1_s without an importance matrix
 * (ggml_quantize_requires_imatrix), and so does a conversion: before anything is written. */
static tbx_status imatrix_check(tbx_dtype quant_to, tbx_error *err) {
    if (quant_to == TBX_DT_INVALID || !tbx_ggml_quant_requires_imatrix(quant_to)) return TBX_OK;
    const tbx_dtype_info *qi = tbx_dtype_get(quant_to);
    return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                   "quantizing to %s needs an importance matrix (llama.cpp: llama-quantize "
                   "--imatrix), and this conversion has none",
                   qi ? qi->name : "?");
}

/* The engine's options from a conversion's. */
static void engine_opts(tbx_engine_opts *eo, tbx_progress_fn progress, void *ud,
                        tbx_convert_report_fn on_tensor, uint32_t flags) {
    memset(eo, 0, sizeof *eo);
    eo->progress = progress;
    eo->ud = ud;
    eo->on_tensor = on_tensor;
    eo->strict = (flags & TBX_CONVERT_STRICT) != 0;
}

/* Ends a writing conversion: an input that shrank before the output is committed fails it,
 * however its bytes were read (every read checks its own bytes; this also covers a shrink
 * that cut only bytes already read); then the writer is finished, or aborted on any error. */
static tbx_status conclude(tbx_file *in, tbx_writer *w, tbx_status st, tbx_error *err) {
    if (st == TBX_OK) st = tbx_file_check_sources(in, err);
    if (st != TBX_OK) tbx_writer_abort(w);
    else st = tbx_writer_finish(w, err);
    return st;
}

/* ---- importance matrices (tbx_convert_options.imatrix) ------------------------------------ */
/* Reads the file at `path` in either of llama-imatrix's forms: GGUF (its magic) through the
 * GGUF reader, else the legacy .dat; with the input's limits and allocator. A matrix of no
 * entry is refused (it would apply to nothing). */
static tbx_status imatrix_load(const tbx_file *in, const char *path, tbx_imatrix *m,
                               tbx_error *err) {
    tbx_source src;
    tbx_status st = tbx_source_open_path(&src, path, false, err);
    if (st != TBX_OK) return st;
    uint8_t magic[4] = {0};
    const bool gguf = src.size >= 4 && tbx_source_read(&src, 0, magic, 4, "magic", err) == TBX_OK &&
                      memcmp(magic, "GGUF", 4) == 0;
    if (!gguf) {
        st = tbx_imatrix_read_dat(&src, &in->al, &in->limits, m, err);
        tbx_source_close(&src);
    } else {
        tbx_source_close(&src);
        tbx_open_options oo;
        tbx_open_options_init(&oo);
        oo.format = TBX_FORMAT_GGUF;
        oo.limits = &in->limits;
        oo.allocator = &in->al.a;
        tbx_file *f = NULL;
        st = tbx_open_path(&f, path, &oo, err);
        if (st == TBX_OK) st = tbx_imatrix_read_gguf(f, m, err);
        tbx_close(f);
    }
    if (st == TBX_OK && m->n == 0) {
        tbx_imatrix_free(m);
        st = tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "imatrix", "the importance matrix has no "
                     "entry (no NAME.in_sum2 / NAME.counts pair)");
    }
    if (st != TBX_OK) {
        char hint[300];
        snprintf(hint, sizeof hint, "importance matrix %s", path);
        tbx_convert_hint(err, hint);
    }
    return st;
}

/* Up to 127 bytes of s (llama-quantize's key values are 128-byte buffers), cut before a UTF-8
 * continuation byte. */
static tbx_value *key_str(const char *s) {
    size_t n = strlen(s);
    if (n > 127) {
        n = 127;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    }
    return tbx_value_new_string(s, n);
}

/* The quantize.imatrix.* entries llama-quantize records (tools/quantize: the file as given, the
 * first dataset, the number of entries, the chunk count when positive) into map `mv`, leaving
 * a key the map already has (the caller's own) as it is. */
static tbx_status imatrix_keys(const tbx_imatrix *m, const char *path, tbx_value *mv,
                               tbx_error *err) {
    struct { const char *key; tbx_value *v; } kv[4] = {
        {"quantize.imatrix.file", key_str(path)},
        {"quantize.imatrix.dataset", m->ndatasets ? key_str(m->datasets[0]) : NULL},
        {"quantize.imatrix.entries_count", tbx_value_new_uint(TBX_V_U32, (uint32_t)m->n)},
        {"quantize.imatrix.chunks_count",
         m->chunk_count > 0 ? tbx_value_new_uint(TBX_V_U32, (uint64_t)m->chunk_count) : NULL}};
    tbx_status st = TBX_OK;
    for (int i = 0; i < 4; i++) {
        const bool want = i == 0 || i == 2 || (i == 1 && m->ndatasets) ||
                          (i == 3 && m->chunk_count > 0);
        if (st == TBX_OK && want && !kv[i].v) st = tbx_err_nomem(err, "metadata");
        bool have = false;
        for (uint64_t j = 0; st == TBX_OK && kv[i].v && j < tbx_value_len(mv); j++) {
            size_t kl;
            const char *k = tbx_value_key_at(mv, j, &kl);
            have |= k && kl == strlen(kv[i].key) && memcmp(k, kv[i].key, kl) == 0;
        }
        if (st == TBX_OK && kv[i].v && !have) {
            st = tbx_value_map_put(mv, kv[i].key, strlen(kv[i].key), kv[i].v);
            kv[i].v = NULL;
        }
        tbx_value_free(kv[i].v);
    }
    if (st != TBX_OK && st != TBX_E_NOMEM) st = tbx_err(err, st, TBX_NO_OFFSET, "meta",
                                                        "importance matrix metadata");
    return st;
}

/* A Hugging Face model to GGUF, the output already checked: src/models' metadata and plan. */
static tbx_status gguf_from_hf(tbx_file *in, const char *out_path, const tbx_gguf_hf_options *o,
                               const tbx_imatrix *im, const char *im_path, tbx_error *err) {
    tbx_hf_gguf *h = NULL;
    tbx_status st = tbx_hf_gguf_prepare(in, o, &h, err);
    if (st != TBX_OK) return st;
    tbx_writer *w = NULL;
    /* GGUF's quant_method applies to the conversion's quant_to (TBX_WRITE_QUANTIZING_) */
    st = tbx_writer_open_(&w, out_path, &o->write,
                          o->quant_to != TBX_DT_INVALID || o->quant_preset
                              ? TBX_WRITE_QUANTIZING_ : 0, err);
    tbx_plan *plan = NULL;
    if (st == TBX_OK) st = tbx_hf_gguf_write(h, w, &plan, err);
    if (st == TBX_OK && im) {
        /* after the model's metadata, as llama-quantize adds its keys last */
        tbx_value *mv = tbx_value_new_map();
        st = mv ? imatrix_keys(im, im_path, mv, err) : tbx_err_nomem(err, "metadata");
        for (uint64_t j = 0; st == TBX_OK && j < tbx_value_len(mv); j++) {
            size_t kl;
            const char *key = tbx_value_key_at(mv, j, &kl);
            st = tbx_writer_add_meta(w, key, kl, tbx_value_at(mv, j), err);
        }
        tbx_value_free(mv);
        if (st == TBX_OK) st = tbx_imatrix_attach(im, plan, in, err);
    }
    if (st == TBX_OK) {
        tbx_engine_opts eo;
        engine_opts(&eo, o->progress, o->progress_ud, o->on_tensor, o->flags);
        st = tbx_engine_run(in, plan, w, &eo, err);
    }
    if (w) st = conclude(in, w, st, err);
    tbx_hf_gguf_free(h); /* after the writer: it borrowed the vocabulary and the plan */
    return st;
}

tbx_status tbx_gguf_from_hf(tbx_file *in, const char *out_path, const tbx_gguf_hf_options *opt,
                            tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    if (!in || !out_path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "convert", "NULL argument");
    tbx_gguf_hf_options o;
    tbx_gguf_hf_options_init(&o);
    if (opt) {
        size_t n = tbx_struct_bytes(opt->struct_size, sizeof o);
        memcpy(&o, opt, n);
    }
    o.write.format = TBX_FORMAT_GGUF;
    tbx_status st = imatrix_check(o.quant_to, err);
    if (st != TBX_OK) return st;
    /* the output can be written before the model's JSON files are parsed */
    st = tbx_writer_check(out_path, &o.write, err);
    if (st != TBX_OK) return st;
    return gguf_from_hf(in, out_path, &o, NULL, NULL, err);
}

/* The conversion flags of this release; 0x10 and 0x20 were TBX_CONVERT_QUANT_MANTLE and
 * TBX_CONVERT_QUANT_CLIP (now MCF's write options): refused, never reused. */
#define KNOWN_FLAGS                                                                            \
    (TBX_CONVERT_STRINGIFY_META | TBX_CONVERT_DROP_META | TBX_CONVERT_DROP_SECTIONS |          \
     TBX_CONVERT_DEQUANTIZE | TBX_CONVERT_RAW | TBX_CONVERT_DROP_UNREADABLE |                  \
     TBX_CONVERT_REQUANTIZE | TBX_CONVERT_STRICT)
#define FORMER_QUANT_FLAGS 0x30u

/* A caller's options as this library's struct (a shorter, older struct: the rest defaults). */
static void convert_opts_copy(tbx_convert_options *o, const tbx_convert_options *opt) {
    tbx_convert_options_init(o);
    if (opt) {
        /* callers built against an older, shorter struct leave the newer fields at defaults */
        size_t n = tbx_struct_bytes(opt->struct_size, sizeof *o);
        memcpy(o, opt, n);
        o->struct_size = sizeof *o;
    }
}

/* Everything tbx_convert refuses of its options and output without looking at the input
 * (tbx_convert_check); o->write.format is decided here (the options', else the path's). */
static tbx_status convert_check(tbx_convert_options *o, const char *out_path, tbx_error *err) {
    if (o->flags & FORMER_QUANT_FLAGS)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "flags",
                       "conversion flag 0x%x is no longer a flag: MCF's quantization method and "
                       "clip range are its write options quant_method and quant_clip_min / "
                       "quant_clip_max (tbx_write_options.options)",
                       (unsigned)(o->flags & FORMER_QUANT_FLAGS));
    if (o->flags & ~(uint32_t)KNOWN_FLAGS)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "flags",
                       "unknown conversion flags 0x%x", (unsigned)(o->flags & ~KNOWN_FLAGS));
    if (o->reserved1[0] != 0.0f || o->reserved1[1] != 0.0f)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "reserved1",
                       "tbx_convert_options.reserved1 is not zero (%g, %g): MCF's clip range is "
                       "its write options quant_clip_min / quant_clip_max "
                       "(tbx_write_options.options)",
                       (double)o->reserved1[0], (double)o->reserved1[1]);
    if (o->cast_to != TBX_DT_INVALID && !tbx_castable(o->cast_to)) {
        char list[100];
        encoder_list(TBX_ENC_FLOAT, TBX_ENC_FLOAT, list, sizeof list);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "cast",
                       "casting to %s is not supported (%s)",
                       tbx_dtype_get(o->cast_to) ? tbx_dtype_get(o->cast_to)->name : "?", list);
    }

    if (o->meta && tbx_value_type_of(o->meta) != TBX_V_MAP)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "meta",
                       "extra metadata must be a map value, not %s",
                       tbx_value_type_name(tbx_value_type_of(o->meta)));

    /* quant_to: a dtype an encoder quantizes to (a ggml block type, an MCF family) */
    const tbx_encoder *qe = o->quant_to != TBX_DT_INVALID ? tbx_encoder_for(o->quant_to) : NULL;
    if (o->quant_to != TBX_DT_INVALID && (!qe || qe->kind == TBX_ENC_FLOAT)) {
        const tbx_dtype_info *qi = tbx_dtype_get(o->quant_to);
        char list[400];
        encoder_list(TBX_ENC_BLOCK, TBX_ENC_PAYLOAD, list, sizeof list);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                       "quantizing to %s is not supported (%s)", qi ? qi->name : "?", list);
    }
    /* (with a matrix, each tensor of such a type without an entry is refused when attached) */
    tbx_status ist = o->imatrix ? TBX_OK : imatrix_check(o->quant_to, err);
    if (ist != TBX_OK) return ist;
    /* a step asked of a quantization that is not asked for: refused, never a no-op */
    if ((o->flags & TBX_CONVERT_REQUANTIZE) && o->quant_to == TBX_DT_INVALID && !o->quant_preset)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "flags",
                       "TBX_CONVERT_REQUANTIZE (--requantize) applies to quant_to, the type to "
                       "quantize already-quantized tensors to again, and none is asked for");
    /* an importance matrix weights the quantization to a ggml block type, and nothing else */
    if (o->imatrix && !o->quant_preset && !(qe && qe->kind == TBX_ENC_BLOCK))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "imatrix",
                       "an importance matrix (--imatrix) applies to quantizing to a ggml block "
                       "type (quant_to) or a llama-quantize preset (quant_preset), and none is "
                       "asked for");
    /* quant_method=search asks for tensorbox's own encoder of one type: a preset name that
     * names a type (Q4_K, Q6_K, ...) is read as that type, never as llama.cpp's mix */
    if (o->quant_preset && o->quant_to == TBX_DT_INVALID) {
        const tbx_lq_preset *pr = tbx_lq_preset_find(o->quant_preset);
        const tbx_value *wo = o->write.options;
        bool search = false;
        for (uint64_t i = 0, n = tbx_value_type_of(wo) == TBX_V_MAP ? tbx_value_len(wo) : 0;
             i < n; i++) {
            size_t kl = 0;
            const char *k = tbx_value_key_at(wo, i, &kl);
            const char *v = tbx_value_get_str(tbx_value_at(wo, i), NULL);
            search |= k && kl == 12 && !memcmp(k, "quant_method", 12) && v && !strcmp(v, "search");
        }
        const tbx_dtype_info *di = pr ? tbx_dtype_get(pr->deflt) : NULL;
        if (search && di && (di->flags & TBX_DTF_BLOCK) &&
            (pr->alias || tbx_dtype_from_name(pr->name) == pr->deflt) && !o->preset_flags &&
            o->output_tensor_type == TBX_DT_INVALID && o->token_embedding_type == TBX_DT_INVALID &&
            !o->n_tensor_types) {
            o->quant_to = pr->deflt;
            o->quant_preset = NULL;
        }
    }
    /* llama-quantize's presets and the options that refine one */
    if (o->quant_preset) {
        if (!tbx_lq_preset_find(o->quant_preset))
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant_preset",
                           "'%s' is not one of llama-quantize's types (tbx convert --help "
                           "lists them)", o->quant_preset);
        if (o->quant_to != TBX_DT_INVALID)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant_preset",
                           "quant_preset (%s) and quant_to are two answers to one question: "
                           "give one", o->quant_preset);
        if (o->cast_to != TBX_DT_INVALID)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant_preset",
                           "a llama-quantize preset (%s) decides every tensor's type: cast_to "
                           "would contradict it", o->quant_preset);
    } else if (o->preset_flags || o->output_tensor_type != TBX_DT_INVALID ||
               o->token_embedding_type != TBX_DT_INVALID || o->n_tensor_types) {
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant_preset",
                       "--pure, --dry-run, --tensor-type, --output-tensor-type and "
                       "--token-embedding-type refine a llama-quantize preset (--quant "
                       "Q4_K_M, ...), and none is asked for");
    }
    if (o->preset_flags & ~(uint32_t)(TBX_PRESET_PURE | TBX_PRESET_DRY_RUN | TBX_PRESET_KEEP_SPLIT |
                                      TBX_PRESET_LEAVE_OUTPUT))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "preset_flags",
                       "unknown preset flags 0x%x", (unsigned)o->preset_flags);
    if (o->n_tensor_types && !o->tensor_types)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor_types",
                       "n_tensor_types is %zu and tensor_types NULL", o->n_tensor_types);
    static const char *const tfield[2] = {"output_tensor_type", "token_embedding_type"};
    const tbx_dtype tt[2] = {o->output_tensor_type, o->token_embedding_type};
    for (int i = 0; i < 2; i++) {
        const tbx_dtype_info *di = tbx_dtype_get(tt[i]);
        if (tt[i] != TBX_DT_INVALID &&
            (!di || !(tt[i] == TBX_DT_F32 || tt[i] == TBX_DT_F16 || tt[i] == TBX_DT_BF16 ||
                      (tt[i] >= TBX_DT_Q4_0 && tt[i] <= TBX_DT_Q2_0))))
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, tfield[i],
                           "%s: %s is not a ggml type", tfield[i], di ? di->name : "(none)");
    }
    tbx_status st = tbx_lq_rules_compile(o->tensor_types, o->n_tensor_types, NULL, err);
    if (st != TBX_OK) return st;
    /* MCF's quantization options without an MCF family to apply them to (a preset: as its
     * default type, which it means for an input without a model) */
    /* the output format, decided once: the writer and the plan take it as given */
    if (!o->write.format) o->write.format = tbx_format_from_path(out_path);
    tbx_convert_options po = *o;
    if (o->quant_preset && po.quant_to == TBX_DT_INVALID) {
        const tbx_lq_preset *pr = tbx_lq_preset_find(o->quant_preset);
        const tbx_dtype_info *di = tbx_dtype_get(pr->deflt);
        if (o->write.format == TBX_FORMAT_MCF) /* MCF's families: its options apply */
            po.quant_to = TBX_DT_MCF_K4;
        else if (di && (di->flags & TBX_DTF_BLOCK) && tbx_encoder_for(pr->deflt))
            po.quant_to = pr->deflt;
    }
    st = tbx_plan_plain_check(&po, err);
    if (st != TBX_OK) return st;
    if (o->max_shard_size && o->write.format != TBX_FORMAT_SAFETENSORS &&
        o->write.format != TBX_FORMAT_GGUF)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "max_shard_size",
                       "a sharded output (--max-shard-size) is written as safetensors shards "
                       "with their index or as a GGUF split set, not as %s",
                       tbx_format_name(o->write.format));
    if (o->max_shard_size && (o->preset_flags & TBX_PRESET_KEEP_SPLIT))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "max_shard_size",
                       "--keep-split keeps the input's shards and --max-shard-size makes new "
                       "ones: give one");
    /* the output can be written (its directory exists, ...) and the write options are the
     * format's, before any work is done */
    return tbx_writer_check(out_path, &o->write, err);
}

/* A llama-quantize preset from a Hugging Face directory to MCF: the types the preset gives the
 * tensors of the GGUF this directory makes (src/models' import, nothing written), carried back
 * to the input tensors they come from, then MCF's family of each (src/convert/preset.c). An
 * expert stack's type goes to each expert's tensor; a tensor split into several GGUF tensors
 * (a fused qkv) takes their type when they agree, and is refused otherwise. */
static tbx_status preset_mcf_plan(tbx_file *in, const tbx_convert_options *o, tbx_plan *plan,
                                  tbx_error *err) {
    tbx_gguf_hf_options ho;
    tbx_gguf_hf_options_init(&ho);
    ho.quant_preset = o->quant_preset;
    ho.preset_flags = o->preset_flags & (TBX_PRESET_PURE | TBX_PRESET_LEAVE_OUTPUT);
    ho.output_tensor_type = o->output_tensor_type;
    ho.token_embedding_type = o->token_embedding_type;
    ho.tensor_types = o->tensor_types;
    ho.n_tensor_types = o->n_tensor_types;
    tbx_hf_gguf *h = NULL;
    tbx_status st = tbx_hf_gguf_prepare(in, &ho, &h, err);
    if (st == TBX_OK) st = tbx_hf_gguf_types(h, err);
    if (st != TBX_OK)
        tbx_convert_hint(err, "a preset to MCF applies llama.cpp's choice to a Hugging Face "
                              "model that converts to GGUF; MCF's own types are q8 q4 k6 k4 "
                              "k3 k2 int8 int4");
    const size_t n = in->ntensors ? in->ntensors : 1;
    tbx_preset_mcf_in *c = st == TBX_OK ? tbx_plan_alloc(plan, n * sizeof *c) : NULL;
    if (st == TBX_OK && !c) st = tbx_err_nomem(err, "conversion plan");
    for (size_t k = 0, nout = st == TBX_OK ? tbx_hf_gguf_out_count(h) : 0; st == TBX_OK && k < nout;
         k++) {
        tbx_hf_gguf_out g;
        tbx_hf_gguf_out_get(h, k, &g);
        const size_t len = strlen(g.name) + 1;
        char *name = g.nsrc ? tbx_plan_alloc(plan, len) : NULL;
        if (g.nsrc && !name) st = tbx_err_nomem(err, "conversion plan");
        for (uint32_t j = 0; st == TBX_OK && j < g.nsrc; j++) {
            const uint64_t i = g.src[j];
            if (i >= in->ntensors) continue;
            tbx_preset_mcf_in *x = &c[i];
            if (x->gguf && (x->wanted != g.wanted || x->by_preset != g.by_preset)) {
                const tbx_dtype_info *a = tbx_dtype_get(x->wanted), *b = tbx_dtype_get(g.wanted);
                st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, in->tensors[i].name,
                             "tensor \"%s\" becomes %s (%s) and %s (%s) in llama.cpp's model: "
                             "one MCF tensor cannot take both types", in->tensors[i].name,
                             x->gguf, a ? a->name : "?", g.name, b ? b->name : "?");
                break;
            }
            if (!x->gguf) {
                memcpy(name, g.name, len);
                x->gguf = name;
                x->type = g.type;
                x->wanted = g.wanted;
                x->by_preset = g.by_preset;
            }
        }
    }
    tbx_hf_gguf_free(h);
    if (st == TBX_OK) st = tbx_plan_preset_mcf(in, o, c, plan, err);
    return st;
}

/* The bytes of n values of dtype dt as output tensor k of plan p stores them (an MCF family:
 * its payload for the tensor's [rows, cols]); 0 when not known. */
static uint64_t planned_bytes(const tbx_plan *p, const tbx_file *in, size_t k, tbx_dtype dt) {
    uint32_t nd = 0;
    const uint64_t *shape = tbx_plan_shape(p, in, k, &nd);
    uint64_t n = 1, out = 0;
    for (uint32_t d = 0; d < nd; d++)
        if (__builtin_mul_overflow(n, shape[d], &n)) return 0;
    const tbx_encoder *e = tbx_encoder_for(dt);
    if (e && e->kind == TBX_ENC_PAYLOAD) {
        tbx_enc_payload ep;
        memset(&ep, 0, sizeof ep);
        if (nd != 2 || e->begin(e, shape[0], shape[1], 0, -1.0f, 1.0f, &ep) != TBX_OK) return 0;
        return ep.total;
    }
    return tbx_dtype_nbytes(dt, n, &out) == TBX_OK ? out : 0;
}

/* The plan of a preset, reported and not carried out (--dry-run): each output tensor with its
 * type, the reason, and its size in the input and in the output. */
static void dry_run_report(const tbx_file *in, const tbx_plan *plan, const tbx_convert_options *o) {
    for (size_t k = 0; k < plan->n && o->on_tensor; k++) {
        const tbx_plan_tensor *t = &plan->t[k];
        char why[200] = "";
        tbx_convert_report r;
        memset(&r, 0, sizeof r);
        r.struct_size = sizeof r;
        r.tensor = k;
        r.name = tbx_plan_name(plan, in, k, NULL);
        r.from = TBX_DT_F32; /* a generated tensor's values */
        for (uint32_t j = 0; j < (t->flags & TBX_PT_WHOLE ? 1u : t->nsrc); j++) {
            tbx_plan_src tmp;
            const tbx_plan_src *s = tbx_plan_src_at(plan, in, k, j, &tmp);
            const tbx_tensor *x = &in->tensors[s->tensor];
            uint64_t n = 0, b = 0;
            if (j == 0) r.from = x->dtype;
            if (j == 0 && plan->report_input_index) r.tensor = s->tensor;
            if (t->flags & TBX_PT_WHOLE) {
                tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
                if (tbx_tensor_info_get((tbx_file *)in, s->tensor, &ti) == TBX_OK)
                    r.size_in += ti.nbytes;
            } else if (!__builtin_mul_overflow(s->rows, s->cols, &n) &&
                       tbx_dtype_nbytes(x->dtype, n, &b) == TBX_OK) {
                r.size_in += b;
            }
        }
        r.to = (tbx_dtype)t->dtype;
        r.size_out = t->enc == TBX_PENC_STORED && r.to == r.from && (t->flags & TBX_PT_WHOLE)
                         ? r.size_in : planned_bytes(plan, in, k, r.to);
        r.action = (tbx_convert_action)t->action;
        if (plan->reason) plan->reason(plan, in, k, why, sizeof why);
        r.reason = why;
        r.rmse = r.rmse_ggml = NAN;
        o->on_tensor(o->progress_ud, &r);
    }
}

/* llama-quantize --keep-split: the preset's plan (sorted by shard, tbx_plan_preset) written
 * as one file per input shard, OUT's stem + "-%05d-of-%05d.gguf": shard 0 with the metadata,
 * the others with the split keys only (split.no u16, split.count u16, split.tensors.count
 * i32, after the rest, as llama.cpp sets them). Each file is finished before the next. */
/* One shard of a split output: the engine on the plan's current window, its progress counted
 * from *base of `whole` input bytes (one operation across the shards); *base moves past it. */
static tbx_status run_shard(tbx_file *in, tbx_plan *plan, tbx_writer *w,
                            const tbx_convert_options *o, uint64_t *base, uint64_t whole,
                            tbx_error *err) {
    tbx_engine_opts eo;
    engine_opts(&eo, o->progress, o->progress_ud, o->on_tensor, o->flags);
    eo.on_quant = o->on_quant;
    eo.base = *base;
    eo.whole = whole;
    *base += tbx_engine_input_total(in, plan);
    return tbx_engine_run(in, plan, w, &eo, err);
}

static tbx_status keep_split(tbx_file *in, const char *out_path, const tbx_convert_options *o,
                             tbx_plan *plan, uint32_t ftype, tbx_error *err) {
    uint32_t nsplit = 1;
    for (size_t k = 0; k < plan->n; k++) {
        const tbx_tensor *t = &in->tensors[plan->t[k].src];
        if (t->ncomp && t->comp[0].src + 1 > nsplit) nsplit = t->comp[0].src + 1;
    }
    if (nsplit > 65535 || plan->n > INT32_MAX)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "split.count",
                       "%u shards or %zu tensors do not fit GGUF's split keys", nsplit, plan->n);
    size_t len = strlen(out_path);
    if (len >= 5 && !strcmp(out_path + len - 5, ".gguf")) len -= 5;
    tbx_plan_tensor *all = plan->t;
    const size_t nall = plan->n;
    size_t first = 0;
    tbx_status st = TBX_OK;
    /* progress: one operation over every file (done never decreasing, one total) */
    const uint64_t whole = tbx_engine_input_total(in, plan);
    uint64_t base = 0;
    for (uint32_t s = 0; st == TBX_OK && s < nsplit; s++) {
        size_t end = first;
        while (end < nall && in->tensors[all[end].src].ncomp &&
               in->tensors[all[end].src].comp[0].src == s)
            end++;
        char path[4096];
        if (len + 24 >= sizeof path)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output path too long");
        snprintf(path, sizeof path, "%.*s-%05u-of-%05u.gguf", (int)len, out_path, s + 1, nsplit);
        tbx_writer *w = NULL;
        tbx_kept_values kept = {NULL, 0, 0};
        st = tbx_writer_check(path, &o->write, err);
        if (st == TBX_OK) st = tbx_writer_open_(&w, path, &o->write, TBX_WRITE_QUANTIZING_, err);
        if (st != TBX_OK) return st;
        if (s == 0) st = tbx_convert_copy_meta_llama(in, w, o, ftype, &kept, err);
        if (st == TBX_OK && nsplit > 1) {
            tbx_value *v[3] = {tbx_val_new(&in->al, TBX_V_U16), tbx_val_new(&in->al, TBX_V_U16),
                               tbx_val_new(&in->al, TBX_V_I32)};
            static const char *const keys[3] = {"split.no", "split.count", "split.tensors.count"};
            if (v[0]) v[0]->v.u = s;
            if (v[1]) v[1]->v.u = nsplit;
            if (v[2]) v[2]->v.i = (int64_t)nall;
            for (int i = 0; i < 3; i++) {
                if (st == TBX_OK && !v[i]) st = tbx_err_nomem(err, "split keys");
                if (st == TBX_OK)
                    st = tbx_writer_add_meta(w, keys[i], strlen(keys[i]), v[i], err);
            }
            for (int i = 0; i < 3; i++) tbx_val_free(v[i]);
        }
        /* the shard's tensors: a window of the plan (the reason hook knows its base) */
        tbx_plan_preset_window(plan, first);
        plan->t = all + first;
        plan->n = end - first;
        if (st == TBX_OK) st = run_shard(in, plan, w, o, &base, whole, err);
        plan->t = all;
        plan->n = nall;
        tbx_plan_preset_window(plan, 0);
        st = conclude(in, w, st, err);
        tbx_convert_kept_free(in, &kept);
        first = end;
    }
    return st;
}

/* ---- sharded output (tbx_convert_options.max_shard_size) ----------------------------------- */
/* The name of shard s of nsh: OUT's stem (without the format's extension) + "-%05zu-of-%05zu"
 * + the extension; a one-shard safetensors output is OUT itself (huggingface_hub). */
static tbx_status shard_name(const char *out, bool gguf, size_t s, size_t nsh, char *buf,
                             size_t cap, tbx_error *err) {
    const char *ext = gguf ? ".gguf" : ".safetensors";
    size_t len = strlen(out);
    const size_t el = strlen(ext);
    if (len > el && !strcmp(out + len - el, ext)) len -= el;
    const int r = !gguf && nsh == 1 ? snprintf(buf, cap, "%s", out)
                                    : snprintf(buf, cap, "%.*s-%05zu-of-%05zu%s", (int)len, out,
                                               s + 1, nsh, ext);
    if (r < 0 || (size_t)r >= cap)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output path too long");
    return TBX_OK;
}

/* split.no, split.count, split.tensors.count as llama.cpp's gguf-split sets them. */
static tbx_status put_split_keys(tbx_value *m, size_t s, size_t nsh, size_t ntensors,
                                 tbx_error *err) {
    static const char *const keys[3] = {"split.no", "split.count", "split.tensors.count"};
    tbx_value *v[3] = {tbx_value_new_uint(TBX_V_U16, s), tbx_value_new_uint(TBX_V_U16, nsh),
                       tbx_value_new_int(TBX_V_I32, (int64_t)ntensors)};
    tbx_status st = TBX_OK;
    for (int i = 0; i < 3; i++) {
        if (st == TBX_OK && !v[i]) st = tbx_err_nomem(err, "split keys");
        if (st != TBX_OK) {
            tbx_value_free(v[i]);
            continue;
        }
        st = tbx_value_map_put(m, keys[i], strlen(keys[i]), v[i]);
        if (st != TBX_OK)
            st = tbx_err(err, st, TBX_NO_OFFSET, "meta", "%s is the split set's own key: it "
                         "cannot be given as metadata of a split GGUF output", keys[i]);
    }
    return st;
}

/* The plan written as shards (tbx_shards_pack), each a writer of its own under a temporary name
 * of the output set, renamed into place together when every one (and the index) was written. */
static tbx_status write_sharded(tbx_file *in, const char *out_path, const tbx_convert_options *o,
                                tbx_plan *plan, bool preset, uint32_t ftype, bool changed,
                                uint32_t wflags, tbx_error *err) {
    const bool gguf = o->write.format == TBX_FORMAT_GGUF;
    tbx_shards sh;
    tbx_status st = tbx_shards_pack(plan, in, o->max_shard_size,
                                    gguf ? TBX_SHARD_GGUF : TBX_SHARD_HUB, &sh, err);
    if (st != TBX_OK) return st;
    if (gguf && (sh.n > 65535 || plan->n > INT32_MAX))
        st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "split.count", "%zu shards of %zu tensors "
                     "do not fit GGUF's split keys (u16, i32)", sh.n, plan->n);
    char path[4096];
    /* every destination can be written, before anything is */
    for (size_t s = 0; st == TBX_OK && s < sh.n; s++) {
        st = shard_name(out_path, gguf, s, sh.n, path, sizeof path, err);
        if (st == TBX_OK) st = tbx_writer_check(path, &o->write, err);
    }
    tbx_outset set;
    tbx_outset_init(&set, &in->al,
                    ((o->write.flags & TBX_WRITE_NO_SYNC) ? TBX_OUT_NO_SYNC : 0) |
                        ((o->write.flags & TBX_WRITE_OVERWRITE) ? TBX_OUT_OVERWRITE : 0));
    json_t *wm = !gguf && sh.n > 1 ? json_object() : NULL;
    tbx_plan_tensor *all = plan->t;
    const float **qw = plan->qw;
    uint8_t *qw_why = plan->qw_why;
    const size_t nall = plan->n;
    /* progress: one operation over every shard (done never decreasing, one total) */
    const uint64_t whole = tbx_engine_input_total(in, plan);
    uint64_t base = 0;
    for (size_t s = 0; st == TBX_OK && s < sh.n; s++) {
        const size_t first = sh.start[s], end = sh.start[s + 1];
        const char *tmp = NULL;
        st = shard_name(out_path, gguf, s, sh.n, path, sizeof path, err);
        if (st == TBX_OK) st = tbx_outset_add(&set, path, &tmp, err);
        tbx_writer *w = NULL;
        if (st == TBX_OK) st = tbx_writer_open_(&w, tmp, &o->write, wflags, err);
        if (st != TBX_OK) break;
        tbx_kept_values kept = {NULL, 0, 0};
        tbx_value *m = NULL;
        if (gguf) {
            /* the first file: the metadata, the split keys last; the others: the split keys */
            m = s == 0 && o->meta ? tbx_value_clone(o->meta) : tbx_value_new_map();
            st = m ? put_split_keys(m, s, sh.n, nall, err) : tbx_err_nomem(err, "metadata");
            tbx_convert_options o1 = *o;
            o1.meta = m;
            if (st == TBX_OK && s == 0)
                st = preset ? tbx_convert_copy_meta_llama(in, w, &o1, ftype, &kept, err)
                            : tbx_convert_copy_meta(in, w, &o1, changed ? &ftype : NULL, &kept,
                                                    err);
            else if (st == TBX_OK)
                for (uint64_t i = 0; st == TBX_OK && i < tbx_value_len(m); i++) {
                    size_t kl = 0;
                    const char *k = tbx_value_key_at(m, i, &kl);
                    st = tbx_writer_add_meta(w, k, kl, tbx_value_at(m, i), err);
                }
        } else {
            /* each shard has the metadata, as save_pretrained gives each its own */
            st = set_source_dir(in, w, err);
            if (st == TBX_OK)
                st = tbx_convert_copy_meta(in, w, o, changed ? &ftype : NULL, &kept, err);
        }
        if (st == TBX_OK && (s == 0 || !gguf)) st = tbx_convert_copy_sizevars(in, w, o, err);
        if (st == TBX_OK && s == 0) st = tbx_convert_copy_sections_but(in, w, o, NULL, err);
        /* the shard's tensors: a window of the plan */
        if (preset) tbx_plan_preset_window(plan, first);
        plan->t = all + first;
        plan->n = end - first;
        if (qw) plan->qw = qw + first;
        if (qw_why) plan->qw_why = qw_why + first;
        if (st == TBX_OK) st = run_shard(in, plan, w, o, &base, whole, err);
        plan->t = all;
        plan->n = nall;
        plan->qw = qw;
        plan->qw_why = qw_why;
        if (preset) tbx_plan_preset_window(plan, 0);
        st = conclude(in, w, st, err);
        tbx_convert_kept_free(in, &kept);
        tbx_value_free(m);
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        for (size_t k = first; st == TBX_OK && wm && k < end; k++) {
            size_t nl = 0;
            const char *nm = tbx_plan_name(plan, in, k, &nl);
            char *key = tbx_memdup0(&in->al, nm, nl);
            if (!key || json_object_set_new(wm, key, json_stringn(base, strlen(base))) != 0)
                st = tbx_err_nomem(err, "index");
            if (key) tbx_free(&in->al, key, nl + 1);
        }
    }
    if (st == TBX_OK && wm) {
        /* transformers' save_pretrained: total_parameters and huggingface_hub's total_size */
        json_t *idx = json_pack("{s:{s:I,s:I},s:O}", "metadata", "total_parameters",
                                (json_int_t)sh.total_values, "total_size",
                                (json_int_t)sh.total_bytes, "weight_map", wm);
        char *txt = idx ? json_dumps(idx, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(idx);
        if (!txt) st = tbx_err_nomem(err, "index");
        else {
            const size_t tl = strlen(txt);
            txt[tl] = '\n'; /* json_dumps's NUL becomes the last line's end */
            const int r = snprintf(path, sizeof path, "%s.index.json", out_path);
            st = r < 0 || (size_t)r >= sizeof path
                     ? tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output path too long")
                     : tbx_outset_write(&set, path, txt, tl + 1, err);
            free(txt);
        }
    }
    json_decref(wm);
    /* the claim renamed last: the index, or the split set's first file */
    if (st == TBX_OK) st = tbx_outset_commit(&set, gguf ? 0 : set.n - 1, err);
    tbx_outset_abort(&set);
    tbx_shards_free(plan, &sh);
    return st;
}

tbx_status tbx_convert_check(const char *out_path, const tbx_convert_options *opt,
                             tbx_error *err) {
    if (!out_path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "convert", "NULL argument");
    tbx_convert_options o;
    convert_opts_copy(&o, opt);
    return convert_check(&o, out_path, err);
}

tbx_status tbx_convert(tbx_file *in, const char *out_path, const tbx_convert_options *opt,
                       tbx_error *err) {
    if (!in || !out_path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "convert", "NULL argument");
    tbx_convert_options o;
    convert_opts_copy(&o, opt);
    tbx_error local;
    if (!err) err = &local;
    tbx_status st = convert_check(&o, out_path, err);
    if (st != TBX_OK) return st;
    const tbx_encoder *qe = o.quant_to != TBX_DT_INVALID ? tbx_encoder_for(o.quant_to) : NULL;

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
        tbx_convert_hint(err, hint);
        return st;
    }
    /* a model import (src/models) applies to a Hugging Face model to GGUF, EMBD or MCF;
     * TBX_CONVERT_RAW leaves it out, and is refused where there is none to leave out (it would
     * say something was done that was not) */
    const tbx_format to_fmt = o.write.format;
    const bool raw = (o.flags & TBX_CONVERT_RAW) != 0;
    const bool hf_gguf = to_fmt == TBX_FORMAT_GGUF && tbx_gguf_hf_applies(in);
    const bool hf_embd = tbx_hf_embd_applies(in, to_fmt);
    const bool hf_mcf = tbx_hf_mcf_applies(in, to_fmt);
    if (raw && !hf_gguf && !hf_embd && !hf_mcf)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "raw",
                       "--raw leaves out the import of a Hugging Face model, and this conversion "
                       "has none (a Hugging Face model directory to GGUF, EMBD or MCF)");
    /* a llama-quantize preset without a model to apply its mix to: a preset that names a
     * type quantizes every 2-D float tensor to it (quant_to), a mix is refused */
    /* a preset from a Hugging Face model to MCF: llama.cpp's choice, in MCF's families */
    const bool preset_mcf = o.quant_preset && hf_mcf && !raw;
    if (preset_mcf && o.imatrix)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "imatrix",
                       "an importance matrix weights ggml's quantizers, and MCF's families "
                       "(the output of %s here) take none", o.quant_preset);
    if (preset_mcf && (o.preset_flags & TBX_PRESET_KEEP_SPLIT))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "preset_flags",
                       "--keep-split writes one GGUF per input GGUF shard, and this output is "
                       "one MCF file");
    if (o.quant_preset && !(hf_gguf && !raw) && !preset_mcf &&
        !tbx_preset_applies(in, &o, to_fmt)) {
        /* the type the name spells (IQ2_S: iq2_s, whose preset's bulk type is iq2_xs; the
         * aliases Q3_K/Q4_K/Q5_K), when it spells one */
        const tbx_lq_preset *pr = tbx_lq_preset_find(o.quant_preset);
        const tbx_dtype named = tbx_dtype_from_name(pr->name);
        const tbx_dtype_info *di = tbx_dtype_get(named);
        const bool names_type = di && (di->flags & TBX_DTF_BLOCK);
        const tbx_dtype_info *bulk = tbx_dtype_get(pr->deflt);
        if (!names_type || o.preset_flags || o.output_tensor_type != TBX_DT_INVALID ||
            o.token_embedding_type != TBX_DT_INVALID || o.n_tensor_types)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant_preset",
                           "%s is llama-quantize's choice of types for a llama.cpp model, and "
                           "this %s: name a type (--quant %s gives every 2-D float tensor that "
                           "type)", pr->name,
                           to_fmt != TBX_FORMAT_GGUF ? "output is not a GGUF"
                                                     : "input names no general.architecture "
                                                       "llama.cpp knows",
                           names_type ? di->name : bulk && (bulk->flags & TBX_DTF_BLOCK)
                                                       ? bulk->name : "q8_0");
        o.quant_to = named;
        o.quant_preset = NULL;
        qe = tbx_encoder_for(o.quant_to);
        if (!qe || qe->kind == TBX_ENC_FLOAT)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                           "quantizing to %s is not supported yet", di->name);
        /* now a plain type: ggml's refusal without an importance matrix applies to it */
        if (!o.imatrix && (st = imatrix_check(o.quant_to, err)) != TBX_OK) return st;
    }
    /* a Hugging Face model (its config.json is a section) to GGUF: written for llama.cpp */
    if (hf_gguf && !raw) {
        if (o.max_shard_size)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "max_shard_size",
                           "a Hugging Face model is converted to one GGUF file; split it "
                           "afterwards (tbx convert OUT.gguf SPLIT.gguf --max-shard-size SIZE)");
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
        ho.quant_preset = o.quant_preset;
        ho.preset_flags = o.preset_flags;
        ho.output_tensor_type = o.output_tensor_type;
        ho.token_embedding_type = o.token_embedding_type;
        ho.tensor_types = o.tensor_types;
        ho.n_tensor_types = o.n_tensor_types;
        if (o.preset_flags & TBX_PRESET_DRY_RUN) {
            /* the plan of the GGUF the directory makes, with the preset's types, reported;
             * nothing is written (no writer: the metadata goes nowhere) */
            ho.preset_flags &= ~(uint32_t)TBX_PRESET_DRY_RUN;
            if (o.imatrix) ho.preset_flags |= TBX_PRESET_HAS_IMATRIX_;
            tbx_hf_gguf *h = NULL;
            tbx_plan *hp = NULL;
            st = tbx_hf_gguf_prepare(in, &ho, &h, err);
            if (st == TBX_OK) st = tbx_hf_gguf_write(h, NULL, &hp, err);
            if (st == TBX_OK) dry_run_report(in, hp, &o);
            tbx_hf_gguf_free(h);
            return st;
        }
        if (!o.imatrix) return gguf_from_hf(in, out_path, &ho, NULL, NULL, err);
        ho.preset_flags |= TBX_PRESET_HAS_IMATRIX_;
        tbx_imatrix im;
        st = imatrix_load(in, o.imatrix, &im, err);
        if (st == TBX_OK) st = gguf_from_hf(in, out_path, &ho, &im, o.imatrix, err);
        tbx_imatrix_free(&im);
        return st;
    }

    /* the importance matrix, read before anything is written; its keys join the caller's
     * metadata (after the input's, as llama-quantize adds them) */
    tbx_imatrix im;
    tbx_imatrix_init(&im, &in->al);
    tbx_value *meta = NULL;
    if (o.imatrix) {
        st = imatrix_load(in, o.imatrix, &im, err);
        if (st == TBX_OK) {
            meta = o.meta ? tbx_value_clone(o.meta) : tbx_value_new_map();
            st = meta ? imatrix_keys(&im, o.imatrix, meta, err)
                      : tbx_err_nomem(err, "metadata");
        }
        if (st != TBX_OK) {
            tbx_value_free(meta);
            tbx_imatrix_free(&im);
            return st;
        }
        o.meta = meta;
    }

    /* what each tensor becomes, decided before anything is written; a Hugging Face
     * sentence-transformers directory to EMBD: the plain plan with src/models' names, its
     * vocabulary and metadata in EMBD's terms */
    tbx_plan plan;
    tbx_plan_init(&plan, &in->al);
    bool changed = false;
    tbx_hf_embd *he = NULL;
    const bool preset = tbx_preset_applies(in, &o, to_fmt);
    uint32_t ftype = 0;
    if (preset) {
        st = tbx_plan_preset(in, &o, &plan, &ftype, err);
        changed = true;
        if (st == TBX_OK && (o.preset_flags & TBX_PRESET_DRY_RUN)) {
            /* the plan, reported; nothing is written */
            dry_run_report(in, &plan, &o);
            tbx_plan_free(&plan);
            return TBX_OK;
        }
    } else if (preset_mcf) {
        st = preset_mcf_plan(in, &o, &plan, err);
        changed = true;
        if (st == TBX_OK && (o.preset_flags & TBX_PRESET_DRY_RUN)) {
            dry_run_report(in, &plan, &o);
            tbx_plan_free(&plan);
            return TBX_OK;
        }
    } else {
        st = tbx_plan_plain(in, &o, to_fmt, &plan, &changed, err);
        ftype = st == TBX_OK && changed ? tbx_plan_plain_ftype(&plan, in, &o) : 0;
    }
    if (st == TBX_OK && hf_embd && !raw) {
        st = tbx_hf_embd_prepare(in, to_fmt, &he, err);
        if (st == TBX_OK) st = tbx_hf_embd_plan(he, &plan, err);
    }
    if (st == TBX_OK && o.imatrix) st = tbx_imatrix_attach(&im, &plan, in, err);
    if (st == TBX_OK && o.max_shard_size) {
        const uint32_t sflags = preset || (qe && qe->kind != TBX_ENC_FLOAT) ? TBX_WRITE_QUANTIZING_ : 0;
        st = write_sharded(in, out_path, &o, &plan, preset, ftype, changed, sflags, err);
        tbx_plan_free(&plan);
        tbx_value_free(meta);
        tbx_imatrix_free(&im);
        return st;
    }
    if (st == TBX_OK && preset && (o.preset_flags & TBX_PRESET_KEEP_SPLIT)) {
        st = keep_split(in, out_path, &o, &plan, ftype, err);
        tbx_plan_free(&plan);
        return st;
    }
    tbx_writer *w = NULL;
    /* a writer given quantization options (MCF's, GGUF's quant_method) applies them only inside
     * a conversion that quantizes (TBX_WRITE_QUANTIZING_) */
    const uint32_t wflags = preset || preset_mcf || (qe && qe->kind != TBX_ENC_FLOAT)
                                ? TBX_WRITE_QUANTIZING_ : 0;
    if (st == TBX_OK) st = tbx_writer_open_(&w, out_path, &o.write, wflags, err);
    if (st != TBX_OK) {
        tbx_hf_embd_free(he);
        tbx_plan_free(&plan);
        tbx_value_free(meta);
        tbx_imatrix_free(&im);
        return st;
    }
    tbx_kept_values kept = { NULL, 0, 0 };
    st = set_source_dir(in, w, err);
    if (st == TBX_OK)
        st = preset ? tbx_convert_copy_meta_llama(in, w, &o, ftype, &kept, err)
                    : tbx_convert_copy_meta(in, w, &o, changed ? &ftype : NULL, &kept, err);
    if (st == TBX_OK) st = tbx_convert_copy_sizevars(in, w, &o, err);
    if (st == TBX_OK)
        st = tbx_convert_copy_sections_but(in, w, &o, he ? tbx_hf_embd_consumes : NULL, err);
    if (st == TBX_OK && he) st = tbx_hf_embd_write(he, w, &plan, err);
    /* a Hugging Face config.json to MCF: ModelInfo as metadata in MCF's terms (src/models) */
    if (st == TBX_OK && hf_mcf && !raw) st = tbx_hf_mcf_write(in, w, err);
    if (st == TBX_OK) {
        tbx_engine_opts eo;
        engine_opts(&eo, o.progress, o.progress_ud, o.on_tensor, o.flags);
        eo.on_quant = o.on_quant;
        st = tbx_engine_run(in, &plan, w, &eo, err);
    }
    st = conclude(in, w, st, err);
    tbx_hf_embd_free(he);
    tbx_plan_free(&plan);
    tbx_convert_kept_free(in, &kept);
    tbx_value_free(meta); /* after the writer, which may have borrowed its entries */
    tbx_imatrix_free(&im);
    return st;
}
