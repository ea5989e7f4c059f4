/*
 * models.h - what a model is to a runtime (src/models/): conversions that know an
 * architecture produce metadata and a plan of tensors (plan.h), never tensor bytes; the
 * engine (src/convert/engine.c) carries the plan out and the façade (src/api/convert.c) opens
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

#endif /* TBX_MODELS_H */
