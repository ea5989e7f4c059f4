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
/* For a model import that is not a GGUF (a preset to MCF): after prepare, the checks write
 * makes and the preset's choice of each GGUF tensor's type, with nothing written (no writer);
 * then each GGUF tensor, k < tbx_hf_gguf_out_count (in llama.cpp's order): its name, type (wanted: the preset's type
 * before llama.cpp's fallback for rows its block does not divide), and its input tensors (an
 * expert stack: one per expert; none: generated). Valid until tbx_hf_gguf_free. */
tbx_status tbx_hf_gguf_types(tbx_hf_gguf *h, tbx_error *err);
/* For tbx_diff (--map auto): after prepare, the hyper-parameter metadata the conversion would
 * write (the {arch}.* keys, as write would add them) put into the MAP
 * `meta`, and the names of the tensors it would generate rather than convert (rope_freqs,
 * rope_factors_long/short) pushed onto the ARRAY `derived`; nothing written. Call it instead of
 * write or types, once. */
tbx_status tbx_hf_gguf_expect(tbx_hf_gguf *h, tbx_value *meta, tbx_value *derived,
                              tbx_error *err);
typedef struct tbx_hf_gguf_out {
    const char *name;
    tbx_dtype type, wanted;
    bool fallback;  /* type is llama.cpp's fallback of wanted */
    bool by_preset; /* the preset gave it its type (else: the GGUF's own, unquantized) */
    uint32_t nsrc;
    const uint64_t *src;
} tbx_hf_gguf_out;
size_t tbx_hf_gguf_out_count(const tbx_hf_gguf *h);
void tbx_hf_gguf_out_get(const tbx_hf_gguf *h, size_t k, tbx_hf_gguf_out *o);

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
 * size, else the demoted type (IQ types -> iq4_nl, q2_K/q3_K/tq*_0/q2_0 -> q4_0, q4_K -> q5_0,
 * q5_K -> q5_1, q6_K -> q8_0), else TBX_DT_F16; TBX_DT_INVALID when `want` is no block type. */
tbx_dtype tbx_ggml_quant_fallback(tbx_dtype want, uint64_t cols);
/* llama.cpp's general.file_type value (LLAMA_FTYPE) of a model whose bulk type is `bulk`
 * (llama_quant.c): f32 0, f16 1, q4_0 2, q4_1 3, q8_0 7, ..., bf16 32; a type llama.cpp has
 * no file type for: 1024 (LLAMA_FTYPE_GUESSED). */
uint32_t tbx_llama_ftype(tbx_dtype bulk);

/* llama-quantize's presets (tools/quantize/quantize.cpp's type names): its llama_ftype (what
 * general.file_type records) and default type; alias: the name is another's spelling (Q4_K is
 * Q4_K_M); COPY has no default type (deflt TBX_DT_INVALID: nothing is quantized). */
typedef struct tbx_lq_preset {
    const char *name;
    uint32_t ftype;
    tbx_dtype deflt;
    int alias;
} tbx_lq_preset;
/* The preset named `name` (case-insensitive), NULL when none; the i-th (NULL past the end). */
const tbx_lq_preset *tbx_lq_preset_find(const char *name);
const tbx_lq_preset *tbx_lq_preset_at(size_t i);

/* The model facts the mix depends on ({arch}.block_count, head counts, expert_count). */
typedef struct tbx_lq_model {
    const char *arch;    /* general.architecture */
    uint32_t n_layer, n_head, n_head_kv, n_expert;
    bool is_70b;         /* llama.cpp's LLM_TYPE_70B (llama, 80 layers, grouped-query) */
} tbx_lq_model;

/* Sets m->is_70b from the other facts (llama.cpp's LLM_TYPE_70B of the architectures whose mix
 * it changes: llama with 80 layers and grouped-query attention, qwen2, deci, olmo with 80,
 * jais2 with 68). */
void tbx_lq_model_finish(tbx_lq_model *m);

/* What is asked (llama_model_quantize_params' counterparts). rule_match(ud, r, name): whether
 * --tensor-type rule r matches the tensor name (first match wins); its type rule_types[r]. */
typedef struct tbx_lq_params {
    uint32_t ftype;
    tbx_dtype deflt;
    bool only_copy, pure, has_imatrix, quantize_output;
    tbx_dtype output_type, token_embd_type; /* TBX_DT_INVALID: the mix's */
    size_t nrules;
    const tbx_dtype *rule_types;
    bool (*rule_match)(void *ud, size_t rule, const char *name);
    void *rule_ud;
} tbx_lq_params;

/* tbx_gguf_hf_options.preset_flags, inside the library only (tbx_convert sets it): the
 * conversion quantizes with an importance matrix, so llama-quantize's rules read has_imatrix
 * true. Not a public TBX_PRESET_* flag: the public tbx_gguf_from_hf takes no matrix. */
#define TBX_PRESET_HAS_IMATRIX_ 0x80000000u

/* A tensor as llama.cpp sees it: ne in ggml's order (ne[0] the row length), ndim without
 * trailing 1s (ggml_n_dims), its stored type. */
typedef struct tbx_lq_tensor {
    const char *name;
    uint32_t ndim;
    int64_t ne[4];
    tbx_dtype type;
} tbx_lq_tensor;

enum { TBX_LQ_KEPT = 0, TBX_LQ_PRESET, TBX_LQ_OPTION, TBX_LQ_RULE, TBX_LQ_FALLBACK };
typedef struct tbx_lq_choice {
    tbx_dtype type;        /* its output type (its own when kept) */
    tbx_dtype wanted;      /* TBX_LQ_FALLBACK: the type its rows did not fit */
    uint32_t rule;         /* TBX_LQ_RULE: the rule's index */
    uint8_t why;           /* TBX_LQ_* */
    bool requires_imatrix; /* llama.cpp refuses this type without an importance matrix */
} tbx_lq_choice;

/* Whether llama.cpp would quantize tensor t at all (2+ dims, a "weight", not a norm, ...). */
bool tbx_lq_quantizable(const tbx_lq_model *m, const tbx_lq_params *p, const tbx_lq_tensor *t);
/* The type of each of the n tensors (given in llama.cpp's order, tbx_lq_name_cmp) under the
 * preset: out[i] for t[i]. Errors: an expert model's FFN tensor without a valid layer number,
 * rows no type or fallback fits (TBX_E_FORMAT / TBX_E_UNSUPPORTED naming the tensor). */
tbx_status tbx_lq_types(const tbx_lq_model *m, const tbx_lq_params *p, const tbx_lq_tensor *t,
                        size_t n, tbx_lq_choice *out, tbx_error *err);
/* --tensor-type rules compiled (POSIX extended expressions: the pattern lower-cased, \d \w \s
 * written out; each type f32, f16, bf16 or a ggml block type): TBX_E_INVALID_ARG naming
 * "tensor_types[i]" for a missing pattern, another type or an invalid expression. out NULL:
 * only checked. tbx_lq_rules_use points p's rule fields at them (r may be NULL: none). */
typedef struct tbx_lq_rules tbx_lq_rules;
tbx_status tbx_lq_rules_compile(const tbx_tensor_type_rule *tr, size_t ntr, tbx_lq_rules **out,
                                tbx_error *err);
void tbx_lq_rules_use(tbx_lq_rules *r, tbx_lq_params *p);
void tbx_lq_rules_free(tbx_lq_rules *r);
/* Whether general.architecture `arch` (len bytes) is one llama.cpp's loader knows. */
bool tbx_lq_arch_known(const char *arch, size_t len);
/* llama.cpp's order of tensor names (blk.N by N, the others first; then the name). */
int tbx_lq_name_cmp(const char *a, const char *b);

/* GGUF -> Hugging Face directory (gguf_hf.c): the plan (HF names, one dtype; weights_only:
 * the GGUF names) and the JSON files (config.json, generation_config.json, tokenizer.json,
 * tokenizer_config.json, sentence-transformers files), made from the architecture table's
 * rows read backwards; dtype TBX_DT_INVALID: the file's own (tbx_hf_back_dtype). *out is set
 * even on failure (free it). */
typedef struct tbx_hf_back tbx_hf_back;
tbx_status tbx_hf_back_prepare(tbx_file *in, tbx_dtype dtype, bool weights_only,
                               tbx_hf_back **out, tbx_error *err);
tbx_plan *tbx_hf_back_plan(tbx_hf_back *h);
tbx_dtype tbx_hf_back_dtype(const tbx_hf_back *h);
/* File i (its name relative to the directory, "1_Pooling/config.json"), NULL past the last. */
const char *tbx_hf_back_file(const tbx_hf_back *h, size_t i, const char **data, size_t *n);
void tbx_hf_back_free(tbx_hf_back *h);

#endif /* TBX_MODELS_H */
