/*
 * imatrix.h - importance matrices (src/models/imatrix.c): the files llama.cpp's llama-imatrix
 * writes, read into what llama-quantize hands its quantizer, and applied to a conversion plan.
 *
 * Two forms (docs/formats/imatrix.md):
 *   - GGUF ("general.type" = "imatrix"): per weight NAME two f32 tensors, NAME.in_sum2 (the sums
 *     of the squared activations, [n_mat][n_per_row]) and NAME.counts ([n_mat] values counted),
 *     and the keys imatrix.datasets (array of strings), imatrix.chunk_count and
 *     imatrix.chunk_size (u32). Read through tensorbox's own GGUF reader (an open tbx_file).
 *   - legacy .dat: i32 n_entries >= 1; per entry i32 name length, the name, i32 ncall, i32 nval
 *     >= 1, nval f32 (mean squared activation times ncall); then, optional, i32 chunk count, i32
 *     length and the dataset name. All little-endian. Read with the bounded cursor.
 * The vector of an entry is llama-quantize's (tools/quantize load_imatrix): GGUF, per matrix j,
 * in_sum2 / (float)round(counts[j]), or 1 where the count is not positive; legacy, each value
 * / (float)ncall when ncall > 0, else the value itself. Its length is the weight's columns
 * times its experts (n_mat). A non-finite value anywhere fails the read, as llama_model_quantize
 * refuses it.
 */
#ifndef TBX_IMATRIX_H
#define TBX_IMATRIX_H

#include "access.h"
#include "plan.h"

typedef struct tbx_imatrix_entry {
    char *name;          /* NUL-terminated weight name (the GGUF tensor it applies to) */
    size_t name_len;
    float *v;            /* the vector */
    uint64_t n;
} tbx_imatrix_entry;

typedef struct tbx_imatrix {
    tbx_alloc al;
    tbx_imatrix_entry *e; /* sorted by name (bytes), names unique */
    size_t n, cap;
    char **datasets;     /* NUL-terminated, in the file's order */
    size_t ndatasets, cap_datasets;
    /* imatrix.chunk_count (GGUF, as an i32 like llama-quantize's) or the legacy trailer's chunk
     * count; 0 when absent. quantize.imatrix.chunks_count is recorded only when > 0. */
    int32_t chunk_count;
    bool legacy;
} tbx_imatrix;

/* Legacy .dat limits: entries at most limits->max_tensors, a name at most max_string_len bytes,
 * a vector at most max_array_len values; every declared length is checked against the bytes
 * left before anything is allocated, so the memory held is at most a few times the file's
 * size. Trailing bytes after the dataset name, a negative length, a name holding a NUL byte
 * or a truncated trailer are refused (TBX_E_FORMAT / TBX_E_TRUNCATED naming the field and the
 * byte offset). An entry named twice keeps the last one (as llama-quantize). */
tbx_status tbx_imatrix_read_dat(const tbx_source *src, const tbx_alloc *al,
                                const tbx_limits *lim, tbx_imatrix *m, tbx_error *err);
/* The GGUF form from an open GGUF file `f`. Refused: no tensor, the metadata llama-quantize
 * requires (imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size: all three present; the
 * counts u32), NAME.in_sum2 without NAME.counts or the reverse, either not f32, a counts tensor
 * of no value or a sums tensor whose length is not a multiple of it. */
tbx_status tbx_imatrix_read_gguf(tbx_file *f, tbx_imatrix *m, tbx_error *err);
/* An empty matrix allocating with `al` (copied); free accepts NULL and an empty matrix. */
void tbx_imatrix_init(tbx_imatrix *m, const tbx_alloc *al);
void tbx_imatrix_free(tbx_imatrix *m);
/* The entry of a weight, NULL when there is none. */
const tbx_imatrix_entry *tbx_imatrix_find(const tbx_imatrix *m, const char *name, size_t len);

/* Applies m to plan p (tbx_plan.qw): every tensor the plan quantizes to a ggml block type gets
 * the vector of its output name, checked as llama_model_quantize checks it: its length must be
 * the tensor's columns times its experts (a 3-D [experts, rows, cols] tensor), else the
 * conversion fails (TBX_E_INVALID_ARG naming the tensor and both sizes) except for
 * token_embd.weight and per_layer_token_embd.weight, quantized without it; a tensor of no entry
 * is quantized without one (tbx_plan.qw_why says why, the report's reason too) unless its type
 * needs one (tbx_ggml_quant_requires_imatrix: TBX_E_UNSUPPORTED naming it). A tensor quantized
 * with tensorbox's own K search (GGUF's quant_method=search) is refused: the search uses none. */
tbx_status tbx_imatrix_attach(const tbx_imatrix *m, tbx_plan *p, const tbx_file *in,
                              tbx_error *err);

#endif /* TBX_IMATRIX_H */
