/*
 * models.h - what a model is to a runtime (src/models/): conversions that know an
 * architecture produce metadata and a plan of tensors (plan.h), never tensor bytes; the
 * engine (src/convert/engine.c) carries the plan out and the façade (src/api/conversions.c) opens
 * and finishes the writer.
 *
 * A Hugging Face model to llama.cpp's GGUF (hf_gguf.c; the public entry is tbx_gguf_from_hf
 * in tensorbox/gguf.h, implemented by the façade):
 *   tbx_hf_gguf_prepare  checks the options, reads config.json, tokenizer.json and
 *                        tokenizer_config.json, picks the architecture and names every tensor
 *                        (nothing written; the writer is not open yet);
 *   tbx_hf_gguf_write    adds the metadata and the vocabulary to w (an open GGUF writer, no
 *                        tensor declared) and returns the plan of the tensors (owned by h);
 *   tbx_hf_gguf_free     after the writer is finished or aborted (it borrows h's values).
 *
 * A Hugging Face sentence-transformers directory to EMBD, either layout (hf_embd.c; chosen by
 * the conversion façade for an .weights / embd-legacy output):
 *   tbx_hf_embd_applies  the output is EMBD or embd-legacy and the input has config.json,
 *                        tokenizer.json or vocab.txt as sections (and no "vocab" of its own);
 *   tbx_hf_embd_consumes the sections the import reads or consumes (not to be copied);
 *   tbx_hf_embd_prepare  reads tokenizer.json / vocab.txt (the vocabulary, made into EMBD's
 *                        section "vocab"), config.json and 1_Pooling/config.json;
 *   tbx_hf_embd_plan     renames the tensors of a plain plan (config.json given: "bert."
 *                        prefix, LayerNorm gamma/beta) and, for EMBD, leaves out those outside
 *                        its table; TBX_E_DUPLICATE when two names meet;
 *   tbx_hf_embd_write    adds EMBD's required metadata keys the writer lacks (after the
 *                        caller's metadata) and the section "vocab" to w;
 *   tbx_hf_embd_free     accepts NULL.
 *
 * A Hugging Face config.json to MCF's ModelInfo (hf_mcf.c; chosen by the conversion façade for an
 * MCF output whose input has config.json as a section): tbx_hf_mcf_write adds the ModelInfo fields
 * and extras as metadata in MCF's terms ("mcf.arch", ..., "hf.model_type", ...) to w, after the
 * input's and the caller's metadata, unless that already holds a ModelInfo field.
 */
#ifndef TBX_MODELS_H
#define TBX_MODELS_H

#include "access.h"
#include "plan.h"
#define TBX_EXPERIMENTAL 1 /* tbx_gguf_hf_options */
#include "tensorbox/gguf.h"

typedef struct tbx_hf_gguf tbx_hf_gguf;

tbx_status tbx_hf_gguf_prepare(tbx_file *in, const tbx_gguf_hf_options *o, tbx_hf_gguf **out,
                               tbx_error *err);
tbx_status tbx_hf_gguf_write(tbx_hf_gguf *h, tbx_writer *w, tbx_plan **plan, tbx_error *err);
void tbx_hf_gguf_free(tbx_hf_gguf *h);

typedef struct tbx_hf_embd tbx_hf_embd;

bool tbx_hf_embd_applies(const tbx_file *in, tbx_format to);
bool tbx_hf_embd_consumes(const char *section);
tbx_status tbx_hf_embd_prepare(tbx_file *in, tbx_format to, tbx_hf_embd **out, tbx_error *err);
tbx_status tbx_hf_embd_plan(tbx_hf_embd *h, tbx_plan *p, tbx_error *err);
tbx_status tbx_hf_embd_write(tbx_hf_embd *h, tbx_writer *w, const tbx_plan *p, tbx_error *err);
void tbx_hf_embd_free(tbx_hf_embd *h);

bool tbx_hf_mcf_applies(const tbx_file *in, tbx_format to);
tbx_status tbx_hf_mcf_write(tbx_file *in, tbx_writer *w, tbx_error *err);

/* llama.cpp's quantization rules (llama_quant.c), used by every conversion that writes a GGUF
 * for it (the plain plan in src/convert too). */
/* The type a row of `cols` values gets when `want` (a ggml block type) does not fit it, by
 * llama-quantize's rules (llama_quant.c): `want` itself when cols is a multiple of its block
 * size, else the demoted type, else TBX_DT_F16; TBX_DT_INVALID when `want` is no block type. */
tbx_dtype tbx_ggml_quant_fallback(tbx_dtype want, uint64_t cols);
/* llama.cpp's general.file_type value (LLAMA_FTYPE) of a model whose bulk type is `bulk`
 * (llama_quant.c): f32 0, f16 1, q4_0 2, q4_1 3, q8_0 7, ..., bf16 32; a type llama.cpp has
 * no file type for: 1024 (LLAMA_FTYPE_GUESSED). */
uint32_t tbx_llama_ftype(tbx_dtype bulk);

#endif /* TBX_MODELS_H */
