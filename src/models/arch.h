/*
 * arch.h - what a Hugging Face architecture is to llama.cpp: the rows of the architecture table
 * (arch_llama_cpp.c) and the tensor-name map that reads them. The conversion (hf_gguf.c) takes
 * a row and turns it into metadata and a plan (plan.h); the rows themselves are plain data and
 * this file writes nothing.
 *
 * A row (hf_arch) holds
 *   - its names: config.json's model_type (the row's name, what users see in the supported
 *     list) and the general.architecture it is written as (mixtral is llama.cpp's "llama");
 *   - hyper-parameters: {arch}.KEY from the first config.json field present (hf_hparam);
 *   - the tensor-name map (hf_tmap), each entry one of
 *       HF_MAP_ONE    one HF tensor -> one GGUF tensor, with a transform (llama's q/k rows by
 *                     heads, a scale, an added constant);
 *       HF_MAP_SPLIT  one HF tensor -> several GGUF tensors, each a run of its rows (a fused
 *                     qkv or gate_up: the parts' row counts come from the hyper-parameters,
 *                     hf_part), each part with its own transform;
 *       HF_MAP_STACK  several HF tensors -> one GGUF tensor: '@' in the HF pattern is the
 *                     expert number, the experts 0..n-1 of a layer stacked as [n, rows, cols]
 *                     (MoE: ffn_*_exps);
 *       HF_MAP_INTERLEAVE one HF tensor whose last axis interleaves its parts value by value
 *                     (gpt-oss's gate_up_proj: gate, up, gate, up, ...): part j of n takes
 *                     every n-th value from the j-th, each with its own transform;
 *     a 3-D HF tensor (HF_MAP_ONE, HF_MAP_INTERLEAVE) is experts already stacked, [n, rows,
 *     cols], each expert transformed as a matrix (HF_XF_TRANSPOSE: gpt-oss's experts, stored
 *     [n, in, out] for x @ W, are [n, out, in] in llama.cpp);
 *     a GGUF template may end in its own suffix (".weight", ".bias") for an HF name that has
 *     none (gpt-oss's self_attn.sinks, mlp.experts.down_proj, down_proj_bias);
 *     and the HF names left out (skip) and prefixes dropped before matching;
 *   - the tokenizer kinds it takes (TBX_HF_TOK_*: a row field, not a name test), the rope
 *     scaling variants it accepts (TBX_HF_ROPE_*: what llama.cpp's converter accepts for it),
 *     and flags for keys some architectures have (ARCH_*).
 */
#ifndef TBX_MODELS_ARCH_H
#define TBX_MODELS_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* HP_F32_NZ: an f32 written only when config.json's value is not 0 (convert_hf_to_gguf.py's
 * `if value := hparams.get(...)`: granite's multipliers) */
typedef enum { HP_U32, HP_F32, HP_F32_NZ } hp_kind;

typedef struct hf_hparam {
    const char *key;        /* after "{arch}." */
    hp_kind kind;
    const char *cfg[4];     /* config.json names, the first present one wins; a last entry
                               "=VALUE" is the value when none is present (transformers'
                               config class default, which convert_hf_to_gguf.py reads: it
                               loads config.json through AutoConfig) */
    bool required;
} hf_hparam;

/* Transforms of a map entry or part (the plan's TBX_XF_* with what they need resolved at
 * conversion time: the head count of q or k). */
enum { HF_XF_NONE = 0, HF_XF_PERMUTE_Q = 1, HF_XF_PERMUTE_K = 2, HF_XF_SCALE = 3, HF_XF_ADD = 4,
       HF_XF_TRANSPOSE = 5, /* [rows, cols] written as [cols, rows] (of each expert) */
       /* MXFP4 blocks (uint8 [experts, rows, blocks, 16], the scales beside them: an
        * HF_MAP_SCALES entry) repacked to ggml's MXFP4 as they are, nothing requantized: an
        * HF_MAP_INTERLEAVE entry of them takes its parts' rows apart (axis 1), not values */
       HF_XF_MXFP4 = 6 };

/* Map entry kinds */
enum { HF_MAP_ONE = 0, HF_MAP_SPLIT = 1, HF_MAP_STACK = 2, HF_MAP_INTERLEAVE = 3,
       /* the E8M0 scales of the HF_XF_MXFP4 blocks of the same name but "_blocks": no output
        * of their own, they go with their blocks */
       HF_MAP_SCALES = 4 };

/* Dimension symbols, resolved from the hyper-parameters: the rows of a split part, and the
 * [rows, cols] llama.cpp's loader expects of a tensor (hf_gguf.c's shape check). */
enum {
    HD_ONE = 0, /* 1 */
    HD_E,       /* embedding_length */
    HD_V,       /* the vocabulary: the token embedding's rows */
    HD_CTX,     /* context_length */
    HD_TT,      /* token types */
    HD_Q,       /* num_attention_heads x head size */
    HD_K,       /* num_key_value_heads x head size */
    HD_F,       /* feed_forward_length */
    HD_X,       /* expert_count */
    HD_FX,      /* expert_feed_forward_length, else feed_forward_length */
    HD_FS,      /* expert_shared_feed_forward_length, else feed_forward_length */
    HD_F2,      /* 2 x feed_forward_length (ARCH_FFN_UP_GLU's ffn_up) */
    HD_QKV      /* HD_Q + 2 x HD_K: a fused q, k and v kept whole (attn_qkv) */
};

/* A part of an HF_MAP_SPLIT entry: its GGUF name ('#': layer), its row count, its transform
 * (HF_MAP_INTERLEAVE: the parts share the last axis equally; rows is the symbol of the part's
 * length, checked by the shapes as any tensor's). */
typedef struct hf_part {
    const char *gguf;
    uint8_t rows;           /* HD_* */
    uint8_t xform;          /* HF_XF_* */
    float k;                /* HF_XF_SCALE, HF_XF_ADD */
} hf_part;

/* A tensor pattern: HF name without the .weight/.bias suffix ('#': the layer number, '@': the
 * expert number of HF_MAP_STACK) -> llama.cpp name ('#' likewise; NULL for HF_MAP_SPLIT, whose
 * parts name their outputs). */
typedef struct hf_tmap {
    const char *hf, *gguf;
    uint8_t kind;           /* HF_MAP_* */
    uint8_t xform;          /* HF_XF_* (HF_MAP_ONE, HF_MAP_STACK: every source) */
    float k;
    const hf_part *parts;   /* HF_MAP_SPLIT: the parts in row order, ended by {NULL} */
} hf_tmap;

#define ARCH_VOCAB_SIZE   0x01u /* {arch}.vocab_size from config vocab_size */
#define ARCH_ROPE_DIM     0x02u /* {arch}.rope.dimension_count = head_dim (or hidden/heads) */
#define ARCH_NONCAUSAL    0x04u /* {arch}.attention.causal = false */
#define ARCH_POOLING      0x08u /* {arch}.pooling_type from the sentence-transformers config */
#define ARCH_TT_COUNT     0x10u /* tokenizer.ggml.token_type_count from type_vocab_size */
#define ARCH_SPACE_PREFIX 0x20u /* tokenizer.ggml.add_space_prefix from tokenizer_config's
                                   add_prefix_space (convert_hf_to_gguf.py's LlamaModel) */
#define ARCH_NO_HEAD_DIM  0x4000u /* config.json's head_dim ignored: the head size is hidden /
                                   heads and no attention.key_length is written
                                   (convert_hf_to_gguf.py's GraniteModel drops head_dim) */
#define ARCH_NORM_TOPK    0x8000u /* config.json's norm_topk_prob must be true: llama.cpp's
                                   graph always renormalizes the chosen experts' weights
                                   (qwen3moe), so a model that does not is refused */
#define ARCH_ADD_SEP      0x80u /* tokenizer.ggml.add_sep_token from the post-processor's pair
                                   template, as gguf-py's SpecialVocab parses it */
#define ARCH_PRE_MODERN_BERT 0x100u /* a GPT-2-style BPE tokenizer (a lone ByteLevel with its
                                      regex) has tokenizer.ggml.pre "modern-bert", as llama.cpp's
                                      converter names ModernBERT's (the GPT-2 split, and the
                                      lstrip of [MASK]) */
#define ARCH_SWA          0x200u /* {arch}.attention.sliding_window from local_attention,
                                   sliding_window_pattern from global_attn_every_n_layers,
                                   rope.freq_base / freq_base_swa from rope_parameters'
                                   full_attention / sliding_attention rope_theta (ModernBERT) */
#define ARCH_HIDDEN_ACT   0x400u /* {arch}.hidden_act from hidden_activation (ModernBERT's
                                   GeGLU or SwiGLU) */
#define ARCH_CLS_POOLING  0x800u /* {arch}.classifier.pooling_type from classifier_pooling
                                   (cls, mean) */
#define ARCH_ROPE_NONE    0x1000u /* {arch}.rope.scaling.type = "none" */
#define ARCH_FFN_UP_GLU   0x2000u /* ffn_up holds a GLU's two halves: 2 x feed_forward_length
                                   rows (ModernBERT's Wi) */
#define ARCH_POS_OFFSET   0x40u /* RoBERTa's positions start at pad_token_id + 1: the first
                                   pad_token_id + 1 rows of position_embd are dropped and
                                   context_length is max_position_embeddings less them
                                   (convert_hf_to_gguf.py's XLMRobertaModel) */
#define ARCH_ROPE_PARTIAL 0x80000u /* with ARCH_ROPE_DIM: rope.dimension_count =
                                   int(partial_rotary_factor x hidden_size) / heads (factor 1
                                   when absent; Phi3MiniModel) */
#define ARCH_SWIGLU_OAI   0x200000u /* gpt-oss's clamped SwiGLU: config.json's swiglu_alpha
                                   and swiglu_limit must be the 1.702 and 7.0 llama.cpp's graph
                                   fixes (LLM_FFN_SWIGLU_OAI_MOE), else refused */
#define ARCH_SPM_ADDED    0x100000u /* SentencePiece vocabulary as Phi3MiniModel.set_vocab: the
                                   added tokens of tokenizer_config's added_tokens_decoder and
                                   of tokenizer.json are control when special, else
                                   user-defined (no look-special test, no U+2581 -> space) */
#define ARCH_TRIM_VOCAB   0x400000u /* config.json's vocab_size below the token embedding's rows:
                                   token_embd keeps its first vocab_size rows and the
                                   vocabulary is vocab_size tokens (convert_hf_to_gguf.py's
                                   Gemma3Model drops the out-of-vocabulary rows); without the
                                   flag that config is refused as contradicting the tensors */
/* Gemma's (issue 22; high bits, clear of the other rows' flags) */
#define ARCH_NO_SPACE_PREFIX 0x10000u /* tokenizer.ggml.add_space_prefix = false whatever the
                                         tokenizer says (convert_hf_to_gguf.py's Gemma*Model) */
#define ARCH_GEMMA_EOT       0x20000u /* the fixed <end_of_turn> id GemmaModel.set_vocab
                                         writes (hf_gguf.c) */
#define ARCH_TEXT_CONFIG     0x40000u /* a multimodal config.json: its text_config's fields
                                         over the top level's (TextModel's merge); the text
                                         tensors only */

/* Tokenizer kinds a row takes (hf_arch.tokenizers) */
#define TBX_HF_TOK_WORDPIECE 0x01u /* tokenizer.json WordPiece -> llama.cpp "bert" */
#define TBX_HF_TOK_BPE       0x02u /* tokenizer.json byte-level BPE -> "gpt2" */
#define TBX_HF_TOK_SPM       0x04u /* tokenizer.model, or a byte_fallback BPE tokenizer.json
                                      -> "llama" (tried first) */
#define TBX_HF_TOK_UGM       0x08u /* a SentencePiece Unigram sentencepiece.bpe.model (XLM-R's,
                                      fairseq ids), else a Unigram tokenizer.json -> llama.cpp
                                      "t5" (its UGM tokenizer) */

/* rope_scaling types a row accepts (hf_arch.rope) */
#define TBX_HF_ROPE_LINEAR 0x01u /* {arch}.rope.scaling.type/factor */
#define TBX_HF_ROPE_LLAMA3 0x02u /* rope_freqs.weight generated */
#define TBX_HF_ROPE_YARN   0x04u /* {arch}.rope.scaling.type/factor/original_context_length */
#define TBX_HF_ROPE_LONGROPE 0x08u /* "longrope" (or "su") with long_factor/short_factor:
                                      rope_factors_long/short.weight generated and
                                      rope.scaling.attn_factor (Phi3MiniModel) */

typedef struct hf_arch {
    const char *model_type;         /* config.json model_type: the row's name */
    const char *arch;               /* general.architecture (llama.cpp's name) */
    const char *prefixes[3];        /* dropped from HF names before matching */
    const hf_hparam *hp;
    const hf_tmap *tmap;
    const char *const *skip;        /* HF names not converted ('#': layer, trailing '*': prefix) */
    unsigned flags;                 /* ARCH_* */
    unsigned tokenizers;            /* TBX_HF_TOK_* */
    unsigned rope;                  /* TBX_HF_ROPE_* */
} hf_arch;

/* The table (arch_llama_cpp.c): n rows; the row whose model_type is `mt`, or NULL. */
size_t tbx_hf_arch_count_(void);
const hf_arch *tbx_hf_arch_at_(size_t i);
const hf_arch *tbx_hf_arch_find_(const char *mt);
/* Tests only (tests/unit/test_hf_arch.c): a row outside the table, found by its model_type
 * when no row of the table has it (listed nowhere); NULL in the library. */
extern const hf_arch *tbx_hf_arch_test_;
/* The row whose model_type is nearest to `mt` (edit distance, ASCII case folded; ties: the
 * first in table order), for the unsupported-architecture error; NULL for a NULL or empty mt. */
const hf_arch *tbx_hf_arch_nearest_(const char *mt);
/* The rope_scaling type names of a TBX_HF_ROPE_* mask, ", "-separated, into buf. */
void tbx_hf_rope_names_(unsigned mask, char *buf, size_t cap);
/* The model_types of the rows whose tokenizers include `tok` (or every row: tok 0),
 * ", "-separated, into buf. */
void tbx_hf_arch_list_(unsigned tok, char *buf, size_t cap);

/* What an HF tensor name is in row a (tbx_hf_map_): the entry, the layer ('#', -1 none), the
 * expert ('@', -1 none) and the suffix (".weight" or ".bias"; HF's .gamma/.beta read as
 * those). */
typedef struct hf_match {
    const hf_tmap *m;
    long layer, expert;
    const char *suffix;
} hf_match;
/* 1 mapped (*out set), 0 a name the row leaves out, -1 unknown. */
int tbx_hf_map_(const hf_arch *a, const char *name, hf_match *out);
/* The llama.cpp name of template `gguf` ('#': layer) with `suffix`, into out (cap bytes):
 * false when it does not fit. */
bool tbx_hf_gguf_name_(const char *gguf, long layer, const char *suffix, char *out, size_t cap);

/* The way back (GGUF -> Hugging Face, gguf_hf.c): what a llama.cpp tensor name is in row a:
 * the entry whose gguf template (or, HF_MAP_SPLIT, whose part's) matches, the part (-1: not a
 * split), the layer ('#', -1 none) and the suffix (".weight", ".bias" or ""). 1 found, -1 not. */
typedef struct hf_unmatch {
    const hf_tmap *m;
    int part;
    long layer;
    const char *suffix;
} hf_unmatch;
int tbx_hf_unmap_(const hf_arch *a, const char *name, hf_unmatch *out);
/* Template `tpl` ('#': layer, '@': expert) with `suffix`, into out (cap bytes): false when it
 * does not fit. */
bool tbx_hf_fill_name_(const char *tpl, long layer, long expert, const char *suffix, char *out,
                       size_t cap);

#endif /* TBX_MODELS_ARCH_H */
