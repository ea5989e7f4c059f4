/*
 * ztensor_int.h - private declarations shared by the zTensor driver's files:
 *
 *   ztensor_common.c   dtype, role and layout names, digests (reader and writer);
 *   ztensor_cbor.c     the CBOR pull decoder (libcbor's streaming decoder behind it), the builder
 *                      of metadata values and the canonical CBOR encoder (reader and writer);
 *   ztensor_open.c     the file layout (the format description), probe, open, close;
 *   ztensor_manifest.c the manifest's CBOR map, parsed straight into the model;
 *   ztensor_object.c   one manifest object -> one tensor: layout rules, element counts,
 *                      placement of components, nnz of sparse tensors;
 *   ztensor_read.c     digests verified, whole component reads, element streams and the
 *                      parked streams behind range reads;
 *   ztensor_decode.c   f32 decoding of sparse_csr, sparse_coo and quantized_group tensors;
 *   ztensor_validate.c what validation adds: digests, padding, sparse index rules, booleans;
 *   ztensor_write.c    the writer hooks and the sparse / quantized_group writer extras;
 *   ztensor_driver.c   the driver table, the one file that names both reader and writer hooks.
 *
 * zstd streams (decoding cursors, the window budget, compressors) come from src/io/zstream.h.
 * Reader and writer call only down into ztensor_common.c, ztensor_cbor.c and io, never each
 * other.
 *
 * See ztensor_open.c for the format description and docs/formats/ztensor.md for every decision.
 */
#ifndef TBX_ZTENSOR_INT_H
#define TBX_ZTENSOR_INT_H

#include "zstream.h" /* io.h, and zstd streaming (src/io/zstream.c) */

#define ZT_MAGIC "ZTEN1000"
#define ZT_MAGIC_V01 "ZTEN0001"                 /* legacy v0.1: recognised, not supported */
#define ZT_ALIGN 64u                            /* every component offset is a multiple */
#define ZT_MAX_MANIFEST ((uint64_t)1 << 30)     /* the spec's hard cap on manifest_size */
#define ZT_HARD_DEPTH 256u                      /* nesting cap whatever tbx_limits says */
#define ZT_META_OBJ_PREFIX "ztensor.attributes." /* metadata key of an object's attributes */

/* The driver (ztensor_driver.c); declared here too until src/core/internal.h lists it. */
extern const tbx_driver tbx_driver_ztensor;

/* ------------------------------------------------------------------------------------------ */
/* dtypes and component roles                                                                  */
/* ------------------------------------------------------------------------------------------ */
typedef struct zt_dtype {
    const char *name;   /* as the manifest spells it */
    tbx_dtype dtype;
    uint32_t size;      /* bytes per element */
} zt_dtype;

const zt_dtype *zt_dtype_by_name(const char *s, size_t n);
const zt_dtype *zt_dtype_by_tbx(tbx_dtype dt);
/* Metadata value types the writer stores (tbx_driver.meta_types; zt_check_value): every type
 * but NDARRAY and BITSET, which CBOR attributes have no form for. */
#define ZT_META_TYPES                                                                           \
    (((TBX_VBIT(TBX_V_BITSET) << 1) - 1) & ~(TBX_VBIT(TBX_V_NDARRAY) | TBX_VBIT(TBX_V_BITSET)))

enum {
    ZT_R_DATA, ZT_R_VALUES, ZT_R_INDICES, ZT_R_INDPTR, ZT_R_COORDS,
    ZT_R_PACKED, ZT_R_SCALES, ZT_R_ZEROS, ZT_NROLES
};
extern const char *const zt_role_names[ZT_NROLES];

/* ------------------------------------------------------------------------------------------ */
/* Digests (ztensor_common.c): "crc32c:0x%08X" and "sha256:<64 lower-case hex>", stored bytes */
/* ------------------------------------------------------------------------------------------ */
enum { ZT_H_NONE = 0, ZT_H_CRC32C, ZT_H_SHA256 };

typedef struct zt_digest {
    int algo;
    uint32_t crc;
    uint8_t sha[32];
} zt_digest;

typedef struct zt_hash {
    int algo;
    uint32_t crc;
    void *md;            /* EVP_MD_CTX * (SHA-256) */
} zt_hash;

tbx_status zt_hash_init(zt_hash *h, int algo, tbx_error *err);
void zt_hash_update(zt_hash *h, const void *p, size_t n);
void zt_hash_final(zt_hash *h, zt_digest *out);
void zt_hash_free(zt_hash *h);
/* The manifest spelling of a digest (crc32c upper-case hex, sha256 lower-case). cap >= 72. */
void zt_digest_str(const zt_digest *d, char *dst, size_t cap);

/* ------------------------------------------------------------------------------------------ */
/* CBOR pull decoder (ztensor_cbor.c)                                                          */
/* ------------------------------------------------------------------------------------------ */
typedef enum zt_kind {
    ZT_EV_UINT, ZT_EV_NEGINT, ZT_EV_BYTES, ZT_EV_TEXT, ZT_EV_BYTES_INDEF, ZT_EV_TEXT_INDEF,
    ZT_EV_ARRAY, ZT_EV_ARRAY_INDEF, ZT_EV_MAP, ZT_EV_MAP_INDEF, ZT_EV_TAG, ZT_EV_F16,
    ZT_EV_F32, ZT_EV_F64, ZT_EV_NULL, ZT_EV_UNDEF, ZT_EV_BOOL, ZT_EV_BREAK,
    ZT_EV_SIMPLE         /* a simple value other than false/true/null/undefined (u: its value) */
} zt_kind;

typedef struct zt_ev {
    zt_kind k;
    uint64_t u;          /* UINT, NEGINT (value is -1 - u), TAG, SIMPLE, ARRAY/MAP count */
    double f;            /* F16, F32, F64 */
    bool b;              /* BOOL */
    const uint8_t *p;    /* BYTES, TEXT (definite): into the manifest buffer */
    size_t n;
    uint64_t off;        /* absolute file offset of the item's first byte */
} zt_ev;

typedef struct zt_cbor {
    const uint8_t *buf;  /* the manifest */
    size_t len, pos;
    uint64_t base;       /* file offset of buf[0] */
    const tbx_limits *lim;
    const tbx_alloc *al;
    zt_ev ev;            /* filled by the libcbor callbacks */
    bool got;
    uint64_t nodes;      /* metadata value nodes built so far (packed elements excluded) */
    uint64_t node_budget;/* at most this many: see zt_open */
    struct tbx_file *f;  /* the handle whose amplification budget values are charged to
                            (tbx_file_charge_pending), NULL: none */
} zt_cbor;

/* A text or byte string: points into the manifest (definite) or owns an allocation (the
 * concatenated chunks of an indefinite-length string; free with zt_str_free). */
typedef struct zt_str {
    const char *p;
    size_t n;
    char *owned;
    size_t owned_cap;
} zt_str;

const char *zt_kind_name(zt_kind k);
const char *zt_kind_a(zt_kind k); /* with its article: "an array" */
tbx_status zt_next(zt_cbor *c, zt_ev *ev, const char *field, tbx_error *err);
/* ev is the first event of a (text or byte, per `want`) string; reads the whole string. */
tbx_status zt_read_str(zt_cbor *c, const zt_ev *ev, zt_kind want, zt_str *out,
                       const char *field, tbx_error *err);
void zt_str_free(zt_cbor *c, zt_str *s);
/* Skips the item that starts with ev (well-formedness and limits still checked). */
tbx_status zt_skip(zt_cbor *c, const zt_ev *ev, uint32_t depth, tbx_error *err);
/* Builds a metadata value from the item that starts with ev. depth: containers around it. */
tbx_status zt_value(zt_cbor *c, const zt_ev *ev, uint32_t depth, tbx_value **out,
                    tbx_error *err);
/* Map / array iteration over definite and indefinite containers. */
typedef struct zt_iter {
    bool indef;
    uint64_t left;
    uint64_t count;      /* entries seen */
} zt_iter;
tbx_status zt_iter_begin(zt_cbor *c, const zt_ev *ev, bool is_map, zt_iter *it,
                         const char *field, tbx_error *err);
/* Reads the next entry's first event (a map's key or an array's element) into *ev; *more is
 * false at the end of the container. */
tbx_status zt_iter_next(zt_cbor *c, zt_iter *it, zt_ev *ev, bool *more, const char *field,
                        tbx_error *err);

/* ------------------------------------------------------------------------------------------ */
/* CBOR encoder (ztensor_cbor.c): canonical (deterministic) encoding                           */
/* ------------------------------------------------------------------------------------------ */
typedef struct zt_buf {
    const tbx_alloc *al;
    uint8_t *p;
    size_t n, cap;
    bool oom;        /* stop: out of memory, or a write failed (wst) */
    /* Optional streaming: with `out` set, the bytes held are written to out at `base` whenever
     * ZT_BUF_FLUSH or more are held (p[0] is then byte `base` of the output), so an encoding
     * of any size holds about ZT_BUF_FLUSH bytes. zt_buf_flush writes the rest. */
    tbx_out *out;
    uint64_t base;
    tbx_status wst;
    tbx_error *err;
} zt_buf;
#define ZT_BUF_FLUSH ((size_t)1 << 20)

void zt_buf_flush(zt_buf *b);

void zt_buf_free(zt_buf *b);
void zt_put_raw(zt_buf *b, const void *p, size_t n);
void zt_put_head(zt_buf *b, unsigned major, uint64_t v);
void zt_put_text(zt_buf *b, const char *s, size_t n);
void zt_put_textz(zt_buf *b, const char *s);
/* Canonical order of text map keys: shorter first, then bytewise (== bytewise order of their
 * CBOR encodings, RFC 7049 §3.9 and RFC 8949 §4.2.1 agree for text keys). */
int zt_key_cmp(const char *a, size_t an, const char *b, size_t bn);
/* Can this value be written? TBX_E_LOSSY naming the problem otherwise. `what` names it. */
tbx_status zt_check_value(const tbx_value *v, uint32_t depth, const char *what, tbx_error *err);
/* Encodes a value (checked with zt_check_value first). Maps get canonical key order. */
tbx_status zt_put_value(zt_buf *b, const tbx_value *v, tbx_error *err);

/* ------------------------------------------------------------------------------------------ */
/* The reader (ztensor_open.c, ztensor_manifest.c, ztensor_object.c, ztensor_read.c,           */
/* ztensor_decode.c, ztensor_validate.c)                                                       */
/* ------------------------------------------------------------------------------------------ */
/* Components of each layout, in model order (ztensor_common.c): dense data; sparse_csr values,
 * indices, indptr; sparse_coo values, coords; quantized_group packed_weight, scales, zeros. */
extern const int zt_layout_roles[4][3];
extern const uint32_t zt_layout_ncomp[4];
extern const char *const zt_layout_names[4];

static inline bool dt_is_int(tbx_dtype dt) {
    return dt == TBX_DT_I8 || dt == TBX_DT_I16 || dt == TBX_DT_I32 || dt == TBX_DT_I64 ||
           dt == TBX_DT_U8 || dt == TBX_DT_U16 || dt == TBX_DT_U32 || dt == TBX_DT_U64;
}
static inline bool dt_is_signed(tbx_dtype dt) {
    return dt == TBX_DT_I8 || dt == TBX_DT_I16 || dt == TBX_DT_I32 || dt == TBX_DT_I64;
}
static inline bool dt_is_real_float(tbx_dtype dt) {
    return dt == TBX_DT_F64 || dt == TBX_DT_F32 || dt == TBX_DT_F16 || dt == TBX_DT_BF16 ||
           dt == TBX_DT_F8_E4M3 || dt == TBX_DT_F8_E5M2;
}

/* Per-tensor driver data (tbx_tensor.drv), filled by ztensor_object.c. */
enum { ZT_V_UNCHECKED = 0, ZT_V_OK, ZT_V_BAD, ZT_V_SKIP };

typedef struct zt_tdrv {
    uint64_t nnz;            /* sparse: stored entries */
    uint64_t rows, cols;     /* csr / quantized_group */
    uint32_t qbits, qper;    /* quantized_group: bits per code, codes per word */
    uint64_t qgroup, qgpr;   /* group size, groups per row */
    uint8_t vstate[3];       /* digest verification state per component */
} zt_tdrv;

/* Verification state of component c: components are read on several threads at once
 * (tbx_read_batch), each touching only its own state byte, atomically. */
static inline uint8_t vget(const zt_tdrv *d, uint32_t c) {
    return __atomic_load_n(&d->vstate[c], __ATOMIC_ACQUIRE);
}
static inline void vset(zt_tdrv *d, uint32_t c, uint8_t v) {
    __atomic_store_n(&d->vstate[c], v, __ATOMIC_RELEASE);
}

/* The stored bytes of one component (the overlap check at open, the padding check). */
typedef struct zt_span {
    uint64_t off, end;
    size_t ti;
    uint32_t ci;
} zt_span;

struct zt_es;

/* Per-file driver data (tbx_file.drv_state), made by zt_open. */
typedef struct zt_state {
    uint64_t manifest_off, manifest_size;
    zt_span *spans;          /* non-empty components sorted by offset */
    size_t nspans, cap_spans;
    /* Decoding cursors kept between reads (ZT_NPARK streams, allocated on first use): a range
     * or f32 read that starts where an earlier one ended continues its stream instead of
     * decoding the component again from its first byte. Used only by the calling thread's
     * reads (tbx_tensor_read_range / read_f32), never by tbx_read_batch's workers. */
    struct zt_es *park;
    uint64_t clock;          /* use stamps for least-recently-used eviction */
    /* Decoder memory budget (tbx_zbudget_take): the windows of the whole-component decoders
     * running at once (tbx_read_batch / validation workers, whole reads) sum to at most its
     * cap; the parked streams' windows are kept under the cap too, by eviction (zt_park_evict). */
    tbx_zbudget budget;
} zt_state;

/* ztensor_manifest.c: the manifest parsed straight into the model (zt_open's parse_ctx). */
typedef struct zt_parsed_comp {
    bool present;
    const zt_dtype *dt;
    uint64_t offset, length;
    tbx_encoding enc;
    char *digest;          /* owned (file allocator), NUL-terminated */
    uint64_t at;           /* file offset of the component's map */
} zt_parsed_comp;

typedef struct zt_parse_ctx {
    tbx_file *f;
    zt_state *s;
    zt_cbor c;
    uint64_t *shape;
    size_t shape_cap;
    bool have_version, have_objects;
    uint32_t version_major;
} zt_parse_ctx;

/* The manifest map: version, attributes (metadata) and every object (zt_build_object). */
tbx_status zt_parse_root(zt_parse_ctx *pc, tbx_error *err);

/* ztensor_object.c: one object of the manifest (its map parsed into pcs by role, and its
 * attributes, taken) becomes a tensor of the model, with its layout's rules checked. */
tbx_status zt_build_object(zt_parse_ctx *pc, const zt_str *name, uint64_t name_off,
                           uint32_t ndim, int layout, zt_parsed_comp *pcs, unsigned role_mask,
                           tbx_value **attrs, uint64_t obj_off, tbx_error *err);

/* ztensor_read.c: components */
/* `"name"/role` for messages (dst of 128 bytes holds any). */
void zt_what(char *dst, size_t cap, const tbx_tensor *t, uint32_t c);
/* A manifest digest string: 1 parsed; 0 unknown algorithm; -1 known algorithm, malformed. */
int zt_digest_parse(const char *s, zt_digest *d);
/* A decoding cursor over the stored bytes of component c of t (src/io/zstream.c), hashing them
 * into h when set; admit: its window comes from the handle's budget (else the caller's). */
tbx_status zt_rd_open(tbx_zstream *r, tbx_file *f, const tbx_tensor *t, uint32_t c, zt_hash *h,
                      uint64_t bound, bool admit, tbx_error *err);

/* ztensor_read.c: element streams over one component, in bounded chunks (ZT_CHUNK bytes), read
 * once from the first byte to the last; reaching the end checks that the zstd data ends there
 * too. Parked streams (zt_es_get / zt_es_put) outlive a read, so the next read continues. */
#define ZT_CHUNK ((size_t)64 * 1024)
#define ZT_NPARK 6           /* parked streams per handle (CSR uses 5, quantized_group 3) */

enum { ZT_ES_INT = 0, ZT_ES_F32, ZT_ES_BYTES };

typedef struct zt_es {
    tbx_zstream rd;
    tbx_file *f;
    const tbx_tensor *t;
    uint32_t c;           /* component c of t */
    bool open;
    int mode;             /* ZT_ES_INT, ZT_ES_F32 (values decoded to fbuf), ZT_ES_BYTES */
    tbx_dtype dt;
    uint32_t esize;       /* bytes per element (1 for byte streams) */
    uint64_t total;       /* elements (bytes) in the component */
    uint64_t left;        /* elements not yet returned */
    uint8_t *buf;         /* ZT_CHUNK bytes */
    float *fbuf;          /* ZT_CHUNK / esize floats when decoding values */
    size_t len, pos;      /* elements in buf, next element */
    bool finished;        /* the end of the data was checked */
    uint32_t lane;        /* when parked: key (t, c, mode, lane); two lanes read one component */
    uint64_t stamp;       /* when parked: last use */
} zt_es;

/* A new stream (not parked) of integers, or of values decoded to f32. */
tbx_status zt_es_open(zt_es *s, tbx_file *f, const tbx_tensor *t, uint32_t c, bool f32,
                      tbx_error *err);
void zt_es_close(zt_es *s);
/* Skips n elements. */
tbx_status zt_es_skip(zt_es *s, uint64_t n, tbx_error *err);
/* A stream of `mode` over component c positioned at element `at`: a parked one of the same
 * (t, c, mode, lane) when it can get there, else a new one. Park it again with zt_es_put after a
 * successful read, else close it. */
tbx_status zt_es_get(zt_es *s, tbx_file *f, const tbx_tensor *t, uint32_t c, int mode,
                     uint32_t lane, uint64_t at, tbx_error *err);
void zt_es_put(tbx_file *f, zt_es *s);
/* Closes every parked stream (zt_close). */
void zt_park_free(tbx_file *f);
/* The next element: as an integer (*neg for negative values of signed dtypes), as f32 (F32
 * streams), as the raw word (quantized_group packed words). */
tbx_status zt_es_int(zt_es *s, uint64_t *u, bool *neg, tbx_error *err);
tbx_status zt_es_f32(zt_es *s, float *v, tbx_error *err);
tbx_status zt_es_word(zt_es *s, uint64_t *u, tbx_error *err);

/* Reader hooks, listed in tbx_driver_ztensor (ztensor_driver.c): zt_probe, zt_open, zt_close
 * (ztensor_open.c); zt_decode_component, zt_check_component, zt_raw_pending, zt_read_range
 * (ztensor_read.c); zt_read_f32_hook (ztensor_decode.c); zt_validate (ztensor_validate.c). */
bool zt_probe(const uint8_t *head, size_t len, uint64_t file_size);
tbx_status zt_open(tbx_file *f, tbx_error *err);
void zt_close(tbx_file *f);
tbx_status zt_decode_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                               tbx_error *err);
tbx_status zt_read_range(tbx_file *f, const tbx_tensor *t, uint32_t c, uint64_t pos, void *buf,
                         size_t len, tbx_error *err);
bool zt_raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c);
tbx_status zt_check_component(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err);
tbx_status zt_read_f32_hook(tbx_file *f, uint64_t i, uint64_t first, uint64_t count, float *out,
                            tbx_error *err);
tbx_status zt_validate(tbx_file *f, tbx_error *err);

/* Writer hooks (ztensor_write.c), listed in tbx_driver_ztensor (ztensor_driver.c). */
tbx_status zt_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                           tbx_error *err);
tbx_status zt_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status zt_w_check_quant(tbx_writer *w, tbx_wtensor *t, const tbx_quant_info *q,
                            tbx_error *err);
tbx_status zt_w_layout(tbx_writer *w, tbx_error *err);
tbx_status zt_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len, tbx_error *err);
tbx_status zt_w_tensor_done(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status zt_w_finish(tbx_writer *w, tbx_error *err);
void zt_w_free(tbx_writer *w);

#endif /* TBX_ZTENSOR_INT_H */
