/*
 * tensorbox/embd.h - experimental API: EMBD (.weights) extras of libtensorbox.
 *
 *   #define TBX_EXPERIMENTAL
 *   #include <tensorbox/embd.h>
 *
 * EXPERIMENTAL: the functions and types declared here are exported by libtensorbox but are NOT
 * part of the stable API of tensorbox.h. They may change or disappear in any minor version
 * (0.x -> 0.y); a program that uses them must be rebuilt (and perhaps adapted) against the
 * exact tensorbox version it runs with. Defining TBX_EXPERIMENTAL before the #include is the
 * caller's acknowledgement; without it this header refuses to compile.
 *
 * What is here: the fixed header and footer fields of an EMBD file, and its WordPiece
 * vocabulary (tokens in id order, the five special-token ids) for EMBD files and for files of
 * cpp_embedder's legacy layout (format "embd-legacy", which has no special-token block: its ids
 * are found by token text). Through tensorbox.h the vocabulary is also the section "vocab" (the
 * stored bytes; type 1: the spec's section, type 2: the legacy layout's); metadata entries are
 * the file's own, as strings. docs/formats/embd.md describes the format.
 */
#ifndef TENSORBOX_EMBD_H
#define TENSORBOX_EMBD_H

#ifndef TBX_EXPERIMENTAL
#error "tensorbox/embd.h is experimental API: #define TBX_EXPERIMENTAL before including it"
#endif

#include "../tensorbox.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The header (64 bytes) and footer (16 bytes) of an EMBD file, as stored. */
typedef struct tbx_embd_header {
    uint32_t struct_size;          /* set by the caller (TBX_EMBD_HEADER_INIT) */
    uint16_t version_major, version_minor;
    uint32_t flags;                /* TBX_EMBD_F_* */
    uint32_t metadata_offset, metadata_size;
    uint32_t vocab_offset, vocab_size;
    uint32_t tensor_index_offset, tensor_index_count;
    uint32_t tensor_data_offset;
    uint64_t tensor_data_size, total_file_size;
    uint32_t header_checksum, reserved;
    uint32_t data_checksum, file_checksum, footer_reserved;  /* footer */
} tbx_embd_header;
#define TBX_EMBD_HEADER_INIT { .struct_size = sizeof(tbx_embd_header) }
#define TBX_EMBD_F_VOCAB_EMBEDDED 0x1u
#define TBX_EMBD_F_TENSORS_ALIGNED 0x2u
#define TBX_EMBD_F_CHECKSUM_ENABLED 0x4u
#define TBX_EMBD_F_COMPRESSED 0x8u

/* Fills *h from an open EMBD file. TBX_E_INVALID_ARG for a NULL argument, a struct_size that is
 * too small or a handle of another format (embd-legacy files have no such header). */
TBX_API tbx_status tbx_embd_header_get(const tbx_file *f, tbx_embd_header *h);

/* Tokens of the vocabulary of an EMBD or embd-legacy file (0 when it has none). */
TBX_API uint64_t tbx_embd_vocab_count(const tbx_file *f);
/* Token `id`: *p (not NUL-terminated; valid until tbx_close) and *len. TBX_E_INVALID_ARG for a
 * bad handle or id. */
TBX_API tbx_status tbx_embd_token(const tbx_file *f, uint64_t id, const char **p, size_t *len);

/* The special-token ids ([PAD], [UNK], [CLS], [SEP], [MASK]). */
typedef struct tbx_embd_special {
    uint32_t struct_size;          /* set by the caller (TBX_EMBD_SPECIAL_INIT) */
    uint32_t pad_id, unk_id, cls_id, sep_id, mask_id;
} tbx_embd_special;
#define TBX_EMBD_SPECIAL_INIT { .struct_size = sizeof(tbx_embd_special) }
/* TBX_E_NOT_FOUND when the file has no vocabulary, or (embd-legacy) one of the five tokens is
 * not in it; TBX_E_INVALID_ARG for a bad handle or struct_size. */
TBX_API tbx_status tbx_embd_special_get(const tbx_file *f, tbx_embd_special *s);

#ifdef __cplusplus
}
#endif

#endif /* TENSORBOX_EMBD_H */
