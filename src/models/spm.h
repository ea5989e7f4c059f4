/*
 * spm.h - the vocabulary of a SentencePiece tokenizer.model, read and written (internal).
 *
 * A tokenizer.model is a serialized protobuf message (SentencePiece's ModelProto). Only its
 * repeated field 1 matters for llama.cpp's "llama" vocabulary: the pieces, each a message
 * {1: piece (bytes), 2: score (float, fixed32), 3: type (enum varint; NORMAL = 1 when absent)};
 * its Unigram ("t5") vocabulary also takes the trainer spec's model type (field 2: {3: varint})
 * and the normalizer spec (field 3: {2: precompiled_charsmap bytes, 3: add_dummy_prefix,
 * 4: remove_extra_whitespaces}). Every other field is skipped by its wire type. See
 * spm.c for the reader and writer and docs/formats/gguf.md for why they are hand-written.
 */
#ifndef TBX_GGUF_HF_SPM_H
#define TBX_GGUF_HF_SPM_H

#include "io.h"

/* SentencePiece piece types (sentencepiece_model.proto; llama.cpp's token types use the same
 * numbers). */
enum { TBX_SPM_NORMAL = 1, TBX_SPM_UNKNOWN = 2, TBX_SPM_CONTROL = 3, TBX_SPM_USER = 4,
       TBX_SPM_UNUSED = 5, TBX_SPM_BYTE = 6 };

typedef struct tbx_spm_piece {
    const char *text; /* points into the caller's buffer; not NUL-terminated */
    uint32_t len;
    float score;
    int type;         /* TBX_SPM_* */
} tbx_spm_piece;

/* SentencePiece model types (TrainerSpec.model_type) */
enum { TBX_SPM_UNIGRAM = 1, TBX_SPM_BPE = 2, TBX_SPM_WORD = 3, TBX_SPM_CHAR = 4 };

typedef struct tbx_spm_vocab {
    tbx_spm_piece *pieces;
    size_t n;
    size_t cap; /* entries allocated */
    /* trainer_spec.model_type (TBX_SPM_UNIGRAM when absent, protobuf's default) */
    int model_type;
    /* normalizer_spec: add_dummy_prefix and remove_extra_whitespaces (true when absent), the
     * precompiled_charsmap's bytes (pointing into the caller's buffer; NULL, 0 when absent) */
    bool add_dummy_prefix, remove_extra_ws;
    const uint8_t *charsmap;
    size_t charsmap_len;
} tbx_spm_vocab;

/* Parses the `n` bytes at `buf` (a tokenizer.model) into *out (pieces in id order, pointing into
 * buf, which must outlive *out). At most `max_pieces` pieces. Errors name the field ("pieces[7]
 * .type") and the byte offset: TBX_E_TRUNCATED (a varint or length past the end), TBX_E_FORMAT
 * (wrong wire type, an over-long varint, field number 0, a piece without text or with invalid
 * UTF-8, an unknown type, a non-finite score, no pieces at all), TBX_E_LIMIT, TBX_E_NOMEM. */
tbx_status tbx_spm_parse(const uint8_t *buf, size_t n, const tbx_alloc *al, uint64_t max_pieces,
                         tbx_spm_vocab *out, tbx_error *err);
/* The same, also reading the trainer spec's model_type and the normalizer spec's fields into
 * *out (a spec whose fields are malformed is TBX_E_FORMAT / TBX_E_TRUNCATED naming
 * "trainer_spec" / "normalizer_spec..."); tbx_spm_parse skips the specs (model_type etc. keep
 * their defaults). */
tbx_status tbx_spm_parse_specs(const uint8_t *buf, size_t n, const tbx_alloc *al,
                               uint64_t max_pieces, tbx_spm_vocab *out, tbx_error *err);
void tbx_spm_free(tbx_spm_vocab *v, const tbx_alloc *al);

/* The special pieces' ids a tokenizer.model's trainer spec names (-1: none). */
typedef struct tbx_spm_ids { int32_t unk, bos, eos, pad; } tbx_spm_ids;

/* Writes `v` as a tokenizer.model that SentencePiece loads: the pieces in id order (text, score,
 * type), the trainer spec (v->model_type, the vocabulary size, byte_fallback when a piece is a
 * BYTE, the special ids of `ids` and their pieces' text) and the normalizer spec
 * (v->add_dummy_prefix, v->remove_extra_ws, whitespace escaped as U+2581, v->charsmap as the
 * precompiled_charsmap, else the "identity" normalizer). *out (allocated with `al`, *n bytes)
 * is the caller's. TBX_E_INVALID_ARG (no piece, a model type outside 1..4), TBX_E_NOMEM. */
tbx_status tbx_spm_write(const tbx_spm_vocab *v, const tbx_spm_ids *ids, const tbx_alloc *al,
                         uint8_t **out, size_t *n, tbx_error *err);

/* Is the `n` bytes at `buf` a tiktoken BPE file (what Llama 3's and gpt-oss's repositories may
 * ship as tokenizer.model: text lines "<base64 token> <rank>") rather than a SentencePiece
 * ModelProto? True when the first 4 KiB hold at least one complete line and every complete line
 * there is one or more base64 characters, one space and one or more decimal digits; a ModelProto starts with a
 * field tag byte (0x0a) that is not base64, so the two never both match. */
bool tbx_spm_is_tiktoken(const uint8_t *buf, size_t n);

#endif
