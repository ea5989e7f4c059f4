/*
 * embd_int.h - the EMBD driver's private header: embd_common.c (defined below, used by both
 * halves), embd.c (reading the spec layout, validation), embd_legacy.c (reading cpp_embedder's
 * legacy layout), embd_write.c (writing) and embd_driver.c (the two driver tables). Nothing here
 * is used outside src/formats/embd*.c. embd_legacy_write.c writes the legacy layout.
 */
#ifndef TBX_EMBD_INT_H
#define TBX_EMBD_INT_H

#include "io.h"

#define TBX_EXPERIMENTAL
#include "tensorbox/embd.h"

#define EM_HEADER_SIZE 64u
#define EM_FOOTER_SIZE 16u
#define EM_DESC_SIZE 32u
#define EM_META_HEAD 8u     /* entry_count, total_size */
#define EM_VOCAB_HEAD 12u   /* token_count, total_size, special_tokens */
#define EM_SPECIAL_SIZE 20u /* pad, unk, cls, sep, mask */
#define EM_SECTION_ALIGN 8u
#define EM_TENSOR_ALIGN 64u
#define EM_HEADER_CRC_LEN 56u
#define EM_VERSION_MAJOR 1u
#define EM_VERSION_MINOR 0u

/* Header flags */
#define EM_F_VOCAB 0x1u      /* VOCAB_EMBEDDED */
#define EM_F_ALIGNED 0x2u    /* TENSORS_ALIGNED */
#define EM_F_CHECKSUM 0x4u   /* CHECKSUM_ENABLED */
#define EM_F_COMPRESSED 0x8u /* COMPRESSED (reserved by the spec; refused) */
#define EM_F_KNOWN 0xFu

/* Section types of the "vocab" section (tbx_section_info.type). */
#define EM_VOCAB_SPEC 1u   /* the spec's vocabulary section, byte for byte */
#define EM_VOCAB_LEGACY 2u /* the legacy layout's vocabulary: u32 count, (u32 len, bytes)... */
#define EM_VOCAB_TOKENS 3u /* a model's token list in the legacy encoding (src/models' Hugging
                              Face import for the legacy layout): read as type 2, but not the
                              vocabulary of a legacy file (whose weights may be [in, out]) */

/* The spec's dtype codes (index) -> core dtypes; EM_NDTYPES entries. */
#define EM_NDTYPES 9u
extern const tbx_dtype em_dtypes[EM_NDTYPES];
/* The code of a core dtype, or -1 when EMBD cannot store it. */
int em_code_of_dtype(tbx_dtype dt);
static inline bool em_w_dtype_ok(tbx_dtype dt) { return em_code_of_dtype(dt) >= 0; }

/* FNV-1a 32 of the name bytes (basis 2166136261, prime 16777619). */
uint32_t em_fnv1a(const void *p, size_t n);
/* CRC-32 (zlib polynomial) through libdeflate; `crc` is the running value (0 to start). */
uint32_t em_crc32(uint32_t crc, const void *p, size_t n);
/* The CRC-32 of A||B from crc_a = CRC(A), crc_b = CRC(B) and len_b = |B| (GF(2) arithmetic,
 * no table): lets one pass over the tensor data give both the data and the file checksum. */
uint32_t em_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
/* The CRC-32 of [p, p + n) in nth slices (at most EM_CRC_JOBS) hashed at once on worker threads
 * (the caller takes the last) and combined in order with em_crc32_combine: the same value as
 * em_crc32(0, p, n) for every n and nth. One slice (no threads) when nth <= 1, n < nth or
 * n < min_parallel. */
#define EM_CRC_JOBS 8
#define EM_CRC_STEP ((size_t)1 << 30) /* bytes per libdeflate call within a slice */
uint32_t em_crc32_split(const tbx_alloc *al, const uint8_t *p, uint64_t n, int nth,
                        uint64_t min_parallel);

/* The required metadata keys of a model file (a file with a vocabulary), NULL-terminated. */
extern const char *const em_required_keys[];
/* Names of the five special tokens, in the order of the special-token block. */
extern const char *const em_special_names[5];   /* "pad_id", ... */
extern const char *const em_special_tokens[5];  /* "[PAD]", ... */

/* A parsed vocabulary: token i is blob[off[i] .. off[i+1]). */
typedef struct em_vocab {
    uint32_t count;
    uint32_t *off;   /* count + 1 entries */
    char *blob;
    size_t blob_len;
    uint32_t special[5];
    bool has_special;
} em_vocab;
void em_vocab_free(const tbx_alloc *al, em_vocab *v);

/* Parses a spec vocabulary section of `len` bytes (`p`: in memory). `base` is the section's file
 * offset for messages (0 for a section handed to the writer). Every problem is fatal here; the
 * messages name the field and base + position. */
tbx_status em_vocab_parse(const tbx_alloc *al, const uint8_t *p, size_t len, uint64_t base,
                          em_vocab *out, tbx_error *err);
/* Parses a legacy vocabulary (u32 count, then count x (u32 len, bytes)); no special block: the
 * special ids are looked up by token ("[PAD]", ...), has_special false when one is missing. */
tbx_status em_vocab_parse_legacy(const tbx_alloc *al, const uint8_t *p, size_t len,
                                 uint64_t base, em_vocab *out, tbx_error *err);
/* Finds the id of a token (linear scan); false when absent. */
bool em_vocab_find(const em_vocab *v, const char *tok, uint32_t *id);

/* The driver tables (embd_driver.c). */
extern const tbx_driver tbx_driver_embd;
extern const tbx_driver tbx_driver_embd_legacy;

/* Reader hooks (embd.c). */
bool em_probe(const uint8_t *head, size_t len, uint64_t file_size);
tbx_status em_open(tbx_file *f, tbx_error *err);
tbx_status em_validate(tbx_file *f, tbx_error *err);
void em_close(tbx_file *f);
tbx_status em_describe(const tbx_file *f, tbx_describer *d, tbx_error *err); /* "embd" */
/* Deferred verification of a strict, buffered handle opened with TBX_OPEN_VERIFY_DIGESTS. */
bool em_raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c);
tbx_status em_read_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                             tbx_error *err);
tbx_status em_check_component(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err);
tbx_status em_read_batch(tbx_file *f, tbx_read_req *reqs, size_t n, uint32_t threads,
                         bool *handled, tbx_error *err);

/* Legacy reader hooks (embd_legacy.c). */
bool eml_probe(const uint8_t *head, size_t len, uint64_t file_size);
tbx_status eml_open(tbx_file *f, tbx_error *err);
void eml_close(tbx_file *f);

/* The vocabulary of an open EMBD or legacy file (for tensorbox/embd.h); NULL when none. */
const em_vocab *em_file_vocab(const tbx_file *f);
const em_vocab *eml_file_vocab(const tbx_file *f);

/* Writer hooks (embd_write.c). */
#define EM_META_TYPES (TBX_VBIT(TBX_V_STRING))
tbx_status em_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                           tbx_error *err);
tbx_status em_w_check_section(tbx_writer *w, const char *name, uint32_t type, size_t len,
                              tbx_error *err);
tbx_status em_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status em_w_layout(tbx_writer *w, tbx_error *err);
tbx_status em_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len, tbx_error *err);
tbx_status em_w_finish(tbx_writer *w, tbx_error *err);
void em_w_free(tbx_writer *w);
/* What the two writers share (embd_write.c): the section handed over by that name, or NULL; the
 * vocabulary given as the section "vocab" (type 1, 2 or 3), *has false when none. legacy: for
 * the legacy layout (the five special tokens not required); else for EMBD (the special tokens
 * required). */
const tbx_wsection *em_w_section(const tbx_writer *w, const char *name);
tbx_status em_w_vocab(tbx_writer *w, bool legacy, em_vocab *v, bool *has, tbx_error *err);

/* Legacy writer hooks (embd_legacy_write.c). */
bool eml_w_dtype_ok(tbx_dtype dt);
tbx_status eml_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                            tbx_error *err);
tbx_status eml_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status eml_w_layout(tbx_writer *w, tbx_error *err);
tbx_status eml_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                      tbx_error *err);
tbx_status eml_w_tensor_done(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
void eml_w_free(tbx_writer *w);

#endif /* TBX_EMBD_INT_H */
