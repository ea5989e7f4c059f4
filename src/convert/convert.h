/*
 * convert.h - the conversion layer (src/convert/): the engine that carries out any plan
 * (engine.c), the plain conversion's plan (plain.c: what it does to each tensor) and the
 * copy of metadata, size variables and sections through the writer API (meta.c). It sees
 * everything below the façade but the façade itself: the façade (src/api/conversions.c) decides
 * which plan, opens the writer and hands it down.
 */
#ifndef TBX_CONVERT_H
#define TBX_CONVERT_H

#include "access.h"
#include "plan.h"

/* ------------------------------------------------------------------------------------------ */
/* The engine (engine.c)                                                                       */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_engine_opts {
    tbx_progress_fn progress;          /* input bytes done / total; may be NULL */
    void *ud;                          /* for progress, on_tensor and on_quant */
    tbx_convert_report_fn on_tensor;   /* each output tensor once written; may be NULL */
    /* each tensor of an encoder that reports its error (MCF families): values, sum of the
     * squared errors (in f64, in a fixed order: the same for any thread count) */
    void (*on_quant)(void *ud, uint64_t tensor, uint64_t nvalues, double sse);
    bool strict;                       /* a tensor with value warnings fails (TBX_E_LOSSY) */
    int threads;                       /* 0: tbx_threads_default() */
    uint64_t chunk;                    /* values of a job (tests: small ones); 0: the default */
    /* a run that is part of a larger operation (the shards of a set): progress says base +
     * this run's done, of `whole` (0: this run's own total, base 0) */
    uint64_t base, whole;
} tbx_engine_opts;

/* The input bytes tbx_engine_run of plan p counts as its progress total. */
uint64_t tbx_engine_input_total(tbx_file *in, tbx_plan *p);

/* Carries plan `p` out into `w`, a writer whose metadata and sections are added and whose
 * tensors are not: checks the plan against `in` (TBX_E_INVALID_ARG naming what is wrong),
 * declares every tensor (the writer borrows their names, shapes and descriptions: the plan and
 * `in` must outlive it), then streams each one's values: stored bytes that pass unchanged by
 * the kernel or in 4 MiB range reads; anything else in runs of about 2 MiB of values read on
 * the calling thread and decoded, transformed and encoded on worker threads (the pool of
 * o->threads), written in order, so the bytes do not depend on the thread count; an MCF
 * family's payload built whole in memory (within in->limits.max_tensor_bytes) and written when
 * complete. Reports each tensor after its bytes (o->on_tensor; o->strict: warnings fail).
 * The writer is neither finished nor aborted here. */
tbx_status tbx_engine_run(tbx_file *in, tbx_plan *p, tbx_writer *w, const tbx_engine_opts *o,
                          tbx_error *err);

/* ------------------------------------------------------------------------------------------ */
/* The plain conversion (plain.c, meta.c)                                                      */
/* ------------------------------------------------------------------------------------------ */
/* The options a plain plan applies only with quant_to one of MCF's families (MCF's write
 * options quant_method, quant_clip_min, quant_clip_max: mcfq.h): any of them given with no
 * such quant_to is refused (TBX_E_INVALID_ARG naming "options.KEY"), never applied to nothing.
 * Needs no input: the façade calls it before any work; tbx_plan_plain calls it again. */
tbx_status tbx_plan_plain_check(const tbx_convert_options *o, tbx_error *err);
/* Write option `key` of the conversion (o->write.options), NULL when not given. */
const tbx_value *tbx_convert_wopt(const tbx_convert_options *o, const char *key);
/* MCF's clip range the write options ask for (quant_clip_min, quant_clip_max) as one
 * tbx_quant_info in p's arena, shared by every tensor quantized to an MCF family (plain and
 * preset plans); *clip NULL when none is asked for. */
tbx_status tbx_plan_mcf_clip(const tbx_convert_options *o, tbx_plan *p, tbx_quant_info **clip,
                             tbx_error *err);
/* Options already checked by the façade (cast_to a float dtype, quant_to one an encoder
 * writes; the write options by the writer's open, in the façade's check of the output);
 * `to_fmt` the output format. MCF's quantization method and clip range come from the write
 * options (tbx_plan_plain_check). Fills *p (initialised by the caller) with one tensor per
 * readable input tensor, in order: kept, cast, quantized (with llama-quantize's fallback),
 * dequantized or requantized as the options say (tbx_convert_options in tensorbox.h), and *changed whether any tensor is not
 * kept. The one refusal made here: a tensor quantized to another type than quant_to without
 * TBX_CONVERT_REQUANTIZE or _DEQUANTIZE (TBX_E_LOSSY naming it). */
tbx_status tbx_plan_plain(tbx_file *in, const tbx_convert_options *o, tbx_format to_fmt,
                          tbx_plan *p, bool *changed, tbx_error *err);
/* llama.cpp's general.file_type of the output of plain plan p (see plain.c). */
uint32_t tbx_plan_plain_ftype(const tbx_plan *p, const tbx_file *in, const tbx_convert_options *o);

/* ------------------------------------------------------------------------------------------ */
/* llama-quantize's presets (preset.c)                                                         */
/* ------------------------------------------------------------------------------------------ */
/* Whether the preset plan applies: o->quant_preset, a GGUF output, and an input naming its
 * general.architecture. */
bool tbx_preset_applies(const tbx_file *in, const tbx_convert_options *o, tbx_format to_fmt);
/* The plan of o->quant_preset over `in` (llama_model_quantize's tensors, types and order) and
 * the general.file_type it writes. Refusals: an already-quantized tensor given another type
 * without TBX_CONVERT_REQUANTIZE (TBX_E_LOSSY), a type needing an importance matrix or one
 * tensorbox has no quantizer for (TBX_E_UNSUPPORTED), each naming the tensor. */
tbx_status tbx_plan_preset(tbx_file *in, const tbx_convert_options *o, tbx_plan *p,
                           uint32_t *ftype, tbx_error *err);
/* --keep-split runs the engine on a window of a preset plan (its tensors from `first`): the
 * reason hook's index base. */
void tbx_plan_preset_window(tbx_plan *p, size_t first);
/* A preset to MCF: input tensor i becomes GGUF tensor c[i].gguf (NULL: none, the tensor is
 * kept as it is) of llama.cpp's type c[i].type (c[i].wanted before llama.cpp's fallback for
 * rows its block does not divide); c lives in the plan's memory (tbx_plan_alloc). */
typedef struct tbx_preset_mcf_in {
    const char *gguf;
    tbx_dtype type, wanted;
    bool by_preset; /* the preset chose the type (else the GGUF's unquantized own) */
} tbx_preset_mcf_in;
/* MCF's dtype for llama.cpp's type t: f32/f16/bf16 themselves, q8_0 mcf_q8, q4_0 mcf_q4, q6_K
 * mcf_k6, q4_K mcf_k4, q3_K mcf_k3, q2_K mcf_k2; TBX_DT_INVALID: MCF has no family for it. */
tbx_dtype tbx_preset_mcf_family(tbx_dtype t);
/* The plan of a preset to MCF: every readable input tensor, in the input's order, stored as
 * MCF's family for the type c gives it (MCF's quantizer, o's method and clip range), cast to
 * f16/bf16/f32 when the preset says so, else kept; refused (TBX_E_UNSUPPORTED naming the
 * tensor, its GGUF name and llama.cpp's type) where MCF has no family. */
tbx_status tbx_plan_preset_mcf(tbx_file *in, const tbx_convert_options *o,
                               const tbx_preset_mcf_in *c, tbx_plan *p, tbx_error *err);

/* Values made during a conversion (stringified metadata, a rewritten file type), lent to the
 * writer and freed after it finished or aborted (tbx_convert_kept_free). */
typedef struct tbx_kept_values { tbx_value **v; size_t n, cap; } tbx_kept_values;
void tbx_convert_kept_free(tbx_file *in, tbx_kept_values *k);
/* The input's metadata into w (lent: the input outlives the writer), then the caller's own
 * (o->meta); refused entries are stringified or dropped when the options allow it, else the
 * error names them and the option that helps. ftype (not NULL): general.file_type is written
 * with this value. */
tbx_status tbx_convert_copy_meta(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                 const uint32_t *ftype, tbx_kept_values *kept, tbx_error *err);
/* The same in llama_model_quantize's order: the input's entries without general.file_type,
 * general.quantization_version and the split keys, then general.quantization_version (2) and
 * general.file_type (ftype), then the caller's own (o->meta). */
tbx_status tbx_convert_copy_meta_llama(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                       uint32_t ftype, tbx_kept_values *kept, tbx_error *err);
/* Size variables (OINF) and sections, refused ones dropped only when the options allow it. */
tbx_status tbx_convert_copy_sizevars(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                     tbx_error *err);
tbx_status tbx_convert_copy_sections(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                     tbx_error *err);
/* The same, leaving out the sections `skip` says another part of the conversion consumed (a
 * model import: tbx_hf_embd_consumes). */
tbx_status tbx_convert_copy_sections_but(tbx_file *in, tbx_writer *w,
                                         const tbx_convert_options *o,
                                         bool (*skip)(const char *name), tbx_error *err);
/* Appends " (hint)" to err's message. */
void tbx_convert_hint(tbx_error *err, const char *hint);

#endif /* TBX_CONVERT_H */
