/*
 * gguf_int.h - the GGUF driver's private header, shared by the files of src/formats/gguf/:
 *
 *   gguf_common.c   the wire rules every half shares: metadata value types (ids, names, sizes,
 *                   tbx value types) and scalar encoding, the ggml type table (ids, names,
 *                   dtypes, big-endian layouts) and its public lookups (tbx_gguf_type_dtype,
 *                   ...), split-set names; and the answers to the file tools (gguf_edit.h)
 *   gguf.c          the reader: probe, open (one file or a split set), big-endian reads,
 *                   validation; it fills gguf_state, the layout every other half reads
 *   gguf_lint.c     tbx_gguf_lint: ggml's loader rules, checked on an open handle's gguf_state
 *   gguf_write.c    the writer (GGUF v3, or v2, little-endian; byte for byte gguf-py's)
 *   gguf_driver.c   the two driver tables (little- and big-endian files): the one file that
 *                   names the reader's and the writer's hooks together
 *
 * The reader and the writer never call each other. Nothing here is used outside the folder;
 * gguf_edit.h (included below) is what the façade's file tools (src/api/gguf_tools.c) may ask.
 */
#ifndef TBX_GGUF_INT_H
#define TBX_GGUF_INT_H

#include "io.h"
#define TBX_EXPERIMENTAL 1 /* the GGUF extras: experimental public API */
#include "tensorbox/gguf.h"
#include "gguf_edit.h" /* what the folder offers the file tools (split sets: the reader's too) */

#define G_DEFAULT_ALIGNMENT 32u
#define G_MAX_NEST 256u   /* hard cap on array nesting, whatever limits.max_depth says */
#define G_CHUNK ((size_t)64 * 1024)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define G_HOST_BE 1
#else
#define G_HOST_BE 0
#endif

/* GGUF metadata value types: the ids of the wire format (gguf_common.c). */
enum {
    GV_U8 = 0, GV_I8 = 1, GV_U16 = 2, GV_I16 = 3, GV_U32 = 4, GV_I32 = 5, GV_F32 = 6,
    GV_BOOL = 7, GV_STRING = 8, GV_ARRAY = 9, GV_U64 = 10, GV_I64 = 11, GV_F64 = 12,
    GV_COUNT = 13
};

/* The tbx value type of each GGUF value type. */
extern const tbx_value_type gguf_value_tbx[GV_COUNT];
/* Byte size of a fixed-size GGUF value type, 0 for string/array (and unknown ids). */
size_t gguf_value_size(uint32_t t);
/* The name of a GGUF value type for messages ("u32", "string"), "?" for an unknown id. */
const char *gguf_value_name(uint32_t t);
/* The GGUF value type of a tbx value type, -1 when GGUF has none. */
int gguf_value_type_of(tbx_value_type t);

/* The bytes of a scalar value as GGUF stores it after its type id (little-endian; a bool as 0 or
 * 1) into out: their count, 0 when v is not a scalar GGUF has (the writer, the in-place edit). */
size_t gguf_scalar_bytes(const tbx_value *v, uint8_t out[8]);

/* Big-endian block layouts: the multi-byte fields of one block that are byte-swapped in a
 * big-endian file ({offset, width, count} runs). `be` 0: no swap needed (all bytes), 1: swap the
 * runs, 2: layout ambiguous on big-endian hosts (read as TBX_E_UNSUPPORTED). Plain types swap
 * every element (width = element size). */
typedef struct gguf_swap_run { uint16_t off; uint8_t width, count; } gguf_swap_run;

typedef struct gguf_type_info {
    const char *name;   /* ggml's name */
    tbx_dtype dt;       /* TBX_DT_INVALID: removed */
    uint8_t be;         /* 0 nothing to swap, 1 swap runs, 2 unsupported */
    gguf_swap_run runs[2];
} gguf_type_info;

/* The ggml types by id (0..TBX_GGUF_TYPE_MAX; removed ids have dt TBX_DT_INVALID). */
extern const gguf_type_info gguf_types[TBX_GGUF_TYPE_MAX + 1];
/* A dtype's name for messages ("(invalid)" for none). */
const char *gguf_dtype_name(tbx_dtype dt);

/* ------------------------------------------------------------------------------------------ */
/* Driver state of an open file                                                                */
/* ------------------------------------------------------------------------------------------ */
/* What the reader (gguf.c) records of each file it parses, for validation, the lint and the
 * big-endian reads: where every tensor info and metadata entry is, the alignment, the data
 * start. f->drv_state of a GGUF handle (tag G_STATE_TAG); a split set's further shards hang
 * off the first shard's state. */
typedef struct gguf_tensor_info {
    uint64_t info_off;   /* byte offset of the tensor info */
    uint64_t ne_off;     /* byte offset of ne[0] */
    uint64_t off_off;    /* byte offset of the offset field */
    uint64_t rel;        /* offset relative to the data start */
    uint64_t size;       /* stored bytes */
    uint64_t max_ne;     /* largest ne[i] (lint: ggml reads ne as int64) */
    uint64_t nelems;
    uint32_t type;       /* ggml type id */
    uint32_t n_dims;
    size_t index;        /* tensor index in f->tensors (file order) */
} gguf_tensor_info;

#define G_STATE_TAG 0x46554747u /* "GGUF" */

typedef struct gguf_state {
    uint32_t tag;
    uint32_t version;
    bool be;
    uint64_t alignment;
    int32_t align_type;   /* GGUF type of general.alignment, -1 when absent */
    uint64_t align_off;   /* byte offset of its KV */
    uint64_t infos_end;
    uint64_t data_start;
    gguf_tensor_info *ti; size_t nti, cap_ti;
    uint64_t *kv_off; size_t nkv, cap_kv; /* byte offset of each KV, in metadata order */
    uint64_t kvs_end;     /* end of the last KV (= the first tensor info) */
    uint32_t src;         /* the file's source: 0 f->src, k f->extra_src[k-1] (split sets) */
    /* Split set (first shard's state only): the states of shards 2..N, shards[k] for source
     * k + 1, and the count of the set. */
    struct gguf_state *shards; size_t nshards;
    uint32_t split_count; /* N of the split set, 0 when the file stands alone */
    /* the quantization description of each block type met so far (shared by its tensors) */
    const tbx_quant_info *quant_of[TBX_GGUF_TYPE_MAX + 1];
} gguf_state;

/* gguf_driver.c: the row (both byte orders: a big-endian file's components are marked
 * transformed, tbx_component.xform, and read through gguf_read_be). */
extern const tbx_driver tbx_driver_gguf;

/* gguf.c: the reader's hooks */
bool gguf_probe(const uint8_t *head, size_t len, uint64_t file_size);
tbx_status gguf_open(tbx_file *f, tbx_error *err);
void gguf_close(tbx_file *f);
tbx_status gguf_read_be(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf, tbx_error *err);
tbx_status gguf_validate(tbx_file *f, tbx_error *err);

/* gguf_write.c: the writer's hooks */
bool gguf_w_dtype_ok(tbx_dtype dt);
tbx_status gguf_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                             tbx_error *err);
tbx_status gguf_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status gguf_w_layout(tbx_writer *w, tbx_error *err);
/* The row's write options: quant_method (ggml.h), applied by a conversion quantizing to a
 * ggml block type and refused by any other writer at layout. */
extern const tbx_format_option gguf_w_options[];
tbx_status gguf_w_finish(tbx_writer *w, tbx_error *err);

#endif /* TBX_GGUF_INT_H */
