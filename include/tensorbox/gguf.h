/*
 * tensorbox/gguf.h - experimental API: GGUF extras of libtensorbox.
 *
 *   #define TBX_EXPERIMENTAL
 *   #include <tensorbox/gguf.h>
 *
 * EXPERIMENTAL: the functions and types declared here are exported by libtensorbox but are NOT
 * part of the stable API of tensorbox.h. They may change or disappear in any minor version
 * (0.x -> 0.y); a program that uses them must be rebuilt (and perhaps adapted) against the
 * exact tensorbox version it runs with. Defining TBX_EXPERIMENTAL before the #include is the
 * caller's acknowledgement; without it this header refuses to compile.
 *
 * What is here: the ggml-loader lint (`tbx validate --ggml`), the ggml type-id mapping, and the
 * GGUF file tools (metadata editing, splitting and merging shards; `tbx gguf ...`), and the
 * conversion of a Hugging Face model to a GGUF file for llama.cpp (tbx_gguf_from_hf).
 * docs/formats/gguf.md describes them.
 */
#ifndef TENSORBOX_GGUF_H
#define TENSORBOX_GGUF_H

#ifndef TBX_EXPERIMENTAL
#error "tensorbox/gguf.h is experimental API: #define TBX_EXPERIMENTAL before including it"
#endif

#include "../tensorbox.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * ggml types and ggml's loader rules
 * ------------------------------------------------------------------------------------------- */

/* Highest ggml type id the library knows (ids 0..TBX_GGUF_TYPE_MAX, some of them removed). */
#define TBX_GGUF_TYPE_MAX 42u

/* The tbx_dtype of a ggml type id; TBX_DT_INVALID for unknown and removed ids. */
TBX_API tbx_dtype tbx_gguf_type_dtype(uint32_t ggml_type);
/* The ggml type id of a dtype, or -1 when ggml has no such type. */
TBX_API int32_t tbx_gguf_dtype_type(tbx_dtype dtype);
/* ggml's upper-case name of a type id ("F32", "Q4_K", "Q4_0_4_4" for a removed id), or NULL
 * for an id ggml never had. Static storage. */
TBX_API const char *tbx_gguf_type_name(uint32_t ggml_type);

/* Checks a file opened as GGUF against the extra rules of ggml's own loader (ggml/src/gguf.cpp),
 * which tensorbox's reader does not impose:
 *   - the file is little-endian GGUF v2 or v3 (ggml reads neither v1 nor big-endian files);
 *   - no metadata array has arrays as elements;
 *   - every tensor has a name shorter than 64 bytes, every ne[i] < 2^63 and an element count
 *     below 2^63;
 *   - tensors are packed in info order: offset_0 = 0, offset_i = offset_(i-1) + size_(i-1)
 *     rounded up to the alignment;
 *   - llama.cpp's loader: tokenizer.ggml.tokens, when present, has one token per row (ne[1])
 *     of token_embd.weight and of output.weight (TBX_E_FORMAT at the tokens' offset).
 * (A general.alignment that is not a u32 and n_dims > 4 are problems of every validation, so
 * the lint does not repeat them.)
 * Every violation is passed to `cb` (may be NULL) as a tbx_error naming the field, the value and
 * the byte offset. Returns TBX_OK when the file passes, else the code of the first violation;
 * TBX_E_INVALID_ARG when `f` is not a handle opened by the GGUF driver. */
TBX_API tbx_status tbx_gguf_lint(tbx_file *f, tbx_problem_fn cb, void *ud);

/* ---------------------------------------------------------------------------------------------
 * GGUF file tools: editing metadata, splitting and merging shards.
 * They work on little-endian GGUF files (v1..v3; big-endian files: TBX_E_UNSUPPORTED) and keep
 * every tensor's bytes identical. Destinations, locking and interruption follow the rules of
 * every writer (tensorbox.h, "Destinations", "Concurrency", "Interruption").
 * ------------------------------------------------------------------------------------------- */
/* Sets metadata `key` (key_len 0: strlen) of the GGUF file at `path` to `value` (copied; any
 * value GGUF can store), adding the key at the end when it is absent. When the key exists, the
 * file is v2/v3 and the new value serialises to exactly as many bytes as the old one (a fixed-
 * size scalar of the same size, or a string of equal length) and the key is not
 * general.alignment, the bytes are overwritten in place. Otherwise the whole file is rewritten
 * through a writer to a temporary file next to it, which is then renamed over `path` (the one
 * place tensorbox replaces an input: explicitly, after the new file is fully written).
 * *in_place (may be NULL) gets 1 for an in-place edit, 0 for a rewrite. The file is locked
 * (flock LOCK_EX) before it is read and until the edit is in place, and the in-place bytes go
 * through the descriptor that was locked and checked: concurrent edits of one file take turns
 * and all land. A symbolic link `path` edits the file it points to and stays a link; a rewrite
 * keeps the file's permission bits. */
TBX_API tbx_status tbx_gguf_set_meta(const char *path, const char *key, size_t key_len,
                                     const tbx_value *value, int *in_place, tbx_error *err);
/* Removes metadata `key` from the GGUF file at `path` (always a rewrite, as above).
 * TBX_E_NOT_FOUND when the file has no such key. */
TBX_API tbx_status tbx_gguf_del_meta(const char *path, const char *key, size_t key_len,
                                     tbx_error *err);
/* Splits the GGUF file at `path` into shards "{out_stem}-00001-of-0000N.gguf" ... in tensor
 * order: each shard gets whole tensors whose padded data adds up to at most `max_bytes` (a
 * larger tensor gets a shard of its own). The first shard carries every metadata entry (minus
 * any split.* key of the input); every shard carries split.no (u16, from 0), split.count (u16)
 * and split.tensors.count (i32, total tensors). `flags`: TBX_WRITE_OVERWRITE replaces existing
 * shard files. *nshards (may be NULL) gets N. TBX_E_LIMIT when more than 65535 shards. */
TBX_API tbx_status tbx_gguf_split(const char *path, uint64_t max_bytes, const char *out_stem,
                                  uint32_t flags, uint32_t *nshards, tbx_error *err);
/* Merges a shard set back into one GGUF file: `first_shard` names shard 1
 * ("...-00001-of-0000N.gguf"); the other names follow from it. Checks split.no, split.count and
 * split.tensors.count of every shard; writes the first shard's metadata minus split.* keys and
 * every shard's tensors in order, bytes unchanged. `flags`: TBX_WRITE_OVERWRITE. */
TBX_API tbx_status tbx_gguf_merge(const char *first_shard, const char *out_path, uint32_t flags,
                                  tbx_error *err);

/* ---------------------------------------------------------------------------------------------
 * From a Hugging Face model to a GGUF file that llama.cpp runs (docs/formats/gguf.md, "From a
 * Hugging Face directory").
 * ------------------------------------------------------------------------------------------- */
typedef struct tbx_gguf_hf_options {
    uint32_t struct_size;      /* sizeof(tbx_gguf_hf_options) (tbx_gguf_hf_options_init) */
    tbx_write_options write;   /* writer options; the format is always GGUF */
    tbx_dtype quant_to;        /* TBX_DT_INVALID: none; else a ggml block type for 2-D weights */
    tbx_dtype cast_to;         /* TBX_DT_INVALID: keep (f64 -> f32); f32, f16, bf16 for 2-D */
    tbx_progress_fn progress;  /* may be NULL; input bytes done / total */
    void *progress_ud;
    /* Called (may be NULL; with progress_ud) once per output tensor after its bytes are
     * written, as tbx_convert_options.on_tensor (tensorbox.h); `tensor` and `name` are the
     * output's (llama.cpp's names; some input tensors are dropped, rope_freqs may be added). */
    tbx_convert_report_fn on_tensor;
    uint32_t flags;            /* TBX_CONVERT_STRICT: a tensor with warnings fails the conversion */
    /* llama-quantize's preset and its refinements, as tbx_convert_options' fields of the same
     * names (tensorbox.h; quant_to and cast_to TBX_DT_INVALID with a preset): each tensor gets
     * the type llama_model_quantize gives it in the f32 GGUF of the same directory, and
     * general.file_type the preset's. TBX_PRESET_DRY_RUN is refused here. */
    const char *quant_preset;
    uint32_t preset_flags;
    tbx_dtype output_tensor_type, token_embedding_type;
    const struct tbx_tensor_type_rule *tensor_types;
    size_t n_tensor_types;
} tbx_gguf_hf_options;

TBX_API void tbx_gguf_hf_options_init(tbx_gguf_hf_options *opt);

/* Writes the Hugging Face model `in` as a GGUF file llama.cpp loads. `in` holds the model's
 * tensors under their Hugging Face names and its side files as sections named by relative path
 * (tbx_open_path of a model directory): config.json (required; its model_type picks the
 * architecture, one of tbx_gguf_hf_arch_at's, else TBX_E_UNSUPPORTED naming it, the nearest
 * of them and listing them), tokenizer.json (WordPiece or BPE, as the architecture takes; for
 * llama-family rows also a SentencePiece tokenizer.model, read first, or a byte_fallback BPE
 * tokenizer.json, both written as llama.cpp's "llama" vocabulary; a tiktoken tokenizer.model
 * beside tokenizer.json is passed over for tokenizer.json),
 * tokenizer_config.json, added_tokens.json, modules.json and the sentence-transformers pooling
 * config. Written: general.architecture/name/file_type/quantization_version, the architecture's
 * hyper-parameters under "{arch}.", the vocabulary under "tokenizer.ggml.", and every tensor
 * under llama.cpp's name (a tensor the architecture table does not know: TBX_E_UNSUPPORTED;
 * pooler and position-id tensors are dropped as convert_hf_to_gguf.py drops them), llama's q/k
 * projection rows reordered for llama.cpp's rotary layout, MoE experts stacked into one
 * tensor per layer and role (mixtral: ffn_*_exps), the rope_scaling types the architecture
 * accepts (llama3: the rope_freqs.weight tensor is generated; linear, yarn: their keys). 1-D
 * tensors and MoE routers are f32;
 * 2-D ones quantized to quant_to (rows it cannot take get llama-quantize's fallback type,
 * position and token-type embeddings stay f32), else cast to cast_to, else kept. Streams the
 * tensors in chunks of whole rows. */
TBX_API tbx_status tbx_gguf_from_hf(tbx_file *in, const char *out_path,
                                    const tbx_gguf_hf_options *opt, tbx_error *err);
/* The Hugging Face architectures tbx_gguf_from_hf converts: the rows of its architecture table
 * (src/models/arch_llama_cpp.c), in the table's order. tbx_gguf_hf_arch_at(i, &arch) returns
 * row i's config.json model_type ("bert", "llama", ...) and sets *arch (may be NULL) to the
 * general.architecture it is written as (mixtral: "llama"); NULL when i >= the count. The
 * strings are static. `tbx convert --help`, the unsupported-architecture error and Python's
 * tensorbox.hf_architectures() list these. */
TBX_API size_t tbx_gguf_hf_arch_count(void);
TBX_API const char *tbx_gguf_hf_arch_at(size_t i, const char **arch);
/* 1 when `in` carries a config.json section (tbx_convert to GGUF then calls tbx_gguf_from_hf
 * unless TBX_CONVERT_RAW is set), else 0. */
TBX_API int tbx_gguf_hf_applies(const tbx_file *in);
/* The ggml type a row of `cols` values gets when `want` is asked (llama-quantize's fallback):
 * `want` when cols is a multiple of its block size; else the IQ types (iq1_s, iq1_m, iq2_*,
 * iq3_*, iq4_xs) -> iq4_nl, q2_K/q3_K/tq1_0/tq2_0/q2_0 -> q4_0, q4_K -> q5_0, q5_K -> q5_1,
 * q6_K -> q8_0 (a 32-block type stays itself), and TBX_DT_F16 when that does not fit either
 * (also for a type of a block larger than 32 llama.cpp has no fallback for, which
 * llama-quantize refuses). TBX_DT_INVALID when `want` is not a block type. */
TBX_API tbx_dtype tbx_gguf_quant_fallback(tbx_dtype want, uint64_t cols);

/* ------------------------------------------------------------------------------------------ */
/* GGUF -> Hugging Face model directory (tbx_hf_from_gguf)                                    */
/* ------------------------------------------------------------------------------------------ */
#define TBX_HF_WEIGHTS_ONLY 0x1u /* only the safetensors, every tensor under its GGUF name */

typedef struct tbx_hf_from_gguf_options {
    uint32_t struct_size;      /* sizeof(tbx_hf_from_gguf_options) (_init) */
    /* every tensor's dtype: TBX_DT_F32, _F16 or _BF16; TBX_DT_INVALID: the dtype most values
     * of the file's unquantized tensors of 2 or more dimensions have, bf16 when all are
     * quantized */
    tbx_dtype dtype;
    /* shards above this many bytes of tensor data (a larger tensor gets a shard of its own);
     * 0: 50 GB, transformers 5's save_pretrained default */
    uint64_t max_shard_size;
    uint32_t flags;            /* TBX_HF_WEIGHTS_ONLY */
    uint32_t write_flags;      /* TBX_WRITE_NO_SYNC */
    tbx_progress_fn progress;  /* may be NULL */
    void *progress_ud;
    tbx_convert_report_fn on_tensor; /* each output tensor once written (HF names); may be NULL */
} tbx_hf_from_gguf_options;

TBX_API void tbx_hf_from_gguf_options_init(tbx_hf_from_gguf_options *opt);
/* The directory `out_dir` can be written: absent, or an empty directory, in a directory that
 * exists (TBX_E_EXISTS / TBX_E_IO otherwise); nothing is created. */
TBX_API tbx_status tbx_hf_from_gguf_check(const char *out_dir, tbx_error *err);
/* Writes the llama.cpp model `in` (a GGUF file or set) as a Hugging Face model directory:
 * config.json (architectures, model_type, the hyper-parameters of its architecture row read
 * back from {arch}.*, vocab_size, head_dim, rope_scaling, tie_word_embeddings, the special
 * token ids, torch_dtype), generation_config.json (decoders), tokenizer.json rebuilt from
 * tokenizer.ggml.* (llama.cpp's "gpt2" vocabulary: byte-level BPE with its merges and the
 * pre-tokenizer tokenizer.ggml.pre names, llama-bpe, qwen2 or gpt-2; "bert": WordPiece;
 * "llama": SentencePiece BPE with byte fallback, also written as SentencePiece's own
 * tokenizer.model), tokenizer_config.json (special tokens, chat_template), for a pooling sentence-transformers
 * model modules.json, 1_Pooling/config.json and sentence_bert_config.json; the tensors under
 * their Hugging Face names with llama.cpp's layout changes undone (llama's q/k row order, fused
 * tensors joined, stacked experts split), each decoded from its type (any ggml block type) and
 * written as opt->dtype, in model.safetensors or shards model-0000I-of-0000N.safetensors with
 * model.safetensors.index.json. The architecture is the row of tensorbox's table
 * (tbx_gguf_hf_arch_at) whose general.architecture the file names and whose name map takes
 * every tensor; anything it cannot map back (architecture, tensor, vocabulary type,
 * pre-tokenizer, a rope_freqs whose llama3 parameters its values do not determine) fails with
 * TBX_E_UNSUPPORTED naming it, before anything
 * is written. TBX_HF_WEIGHTS_ONLY writes only the safetensors, every tensor under its own name.
 * The directory is written whole or not at all (a temporary directory renamed at the end);
 * the input is never written. */
TBX_API tbx_status tbx_hf_from_gguf(tbx_file *in, const char *out_dir,
                                    const tbx_hf_from_gguf_options *opt, tbx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TENSORBOX_GGUF_H */
