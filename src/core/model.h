/*
 * model.h - the common model (src/core/, with core.h): what a driver fills while it opens a
 * file (tbx_file: metadata, tensors and their components, sections, quantization descriptions,
 * the amplification budget), the writer's state a driver lays a file out from (tbx_writer), and
 * the driver contract itself (struct tbx_driver). Where a file's bytes live is recorded here as
 * plain data (tbx_source, tbx_out); the code that reads and writes them is src/io/ (io.h).
 */
#ifndef TBX_MODEL_H
#define TBX_MODEL_H

#include "core.h"

/* ------------------------------------------------------------------------------------------ */
/* Where bytes live: the records src/io/ works on (io.h has the functions).                    */
/* ------------------------------------------------------------------------------------------ */
typedef enum tbx_source_kind { TBX_SRC_FD, TBX_SRC_MMAP, TBX_SRC_MEMORY, TBX_SRC_CALLBACK,
                               TBX_SRC_REMOTE } tbx_source_kind;
/* A remote file read through HTTP range requests (src/io/remote.c), owned by its source. */
typedef struct tbx_remote tbx_remote;

/* Where the files of a set come from (src/io/provider.h): a handle opened by path keeps the
 * provider that found its file, and drivers open sibling files (shards, side files, split
 * parts) only through it. */
typedef struct tbx_provider tbx_provider;
/* What a driver's describe hook adds its member of a file's description through
 * (src/core/describe.c, tbx_desc_*). */
typedef struct tbx_describer tbx_describer;

typedef struct tbx_source {
    tbx_source_kind kind;
    uint64_t size;
    int fd;                   /* TBX_SRC_FD / TBX_SRC_MMAP (-1 otherwise) */
    const uint8_t *base;      /* TBX_SRC_MMAP / TBX_SRC_MEMORY: the whole file */
    size_t map_len;           /* TBX_SRC_MMAP: length to munmap */
    int guard;                /* TBX_SRC_MMAP with map_len: its slot in the guarded mappings
                                 (src/io/mapguard.c) */
    const _Atomic size_t *valid; /* that slot's valid length (tbx_source_fast_ok), else NULL */
    tbx_read_at_fn cb;        /* TBX_SRC_CALLBACK */
    void *cb_ud;
    tbx_remote *remote;       /* TBX_SRC_REMOTE: closed by tbx_source_close */
    uint64_t dev, ino;        /* path sources: identity, for "never overwrite an input" */
    bool registered;          /* in the open-inputs registry */
} tbx_source;

#define TBX_OUT_OVERWRITE 0x1u /* replace an existing (regular) file */
#define TBX_OUT_EDIT      0x2u /* replace the file an edit holds locked (tbx_edit_lock): it must
                                  exist, may be an open input, keeps its permission bits */
#define TBX_OUT_NO_SYNC   0x4u /* no fsync at commit, no early writeback (TBX_WRITE_NO_SYNC) */

typedef struct tbx_out {
    int fd;          /* the temporary file (flocked while it lives) */
    int lock_fd;     /* the existing destination, flocked LOCK_EX; -1: none */
    int slot;        /* entry in the table of live temporary files; -1: none */
    unsigned flags;  /* TBX_OUT_* */
    bool existed;    /* the destination existed at open: (dev, ino) must still be it at commit */
    uint64_t dev, ino;
    unsigned mode;   /* its permission bits */
    char *path;      /* destination, symbolic links resolved */
    char *tmp_path;  /* temporary file in the same directory */
    uint64_t size;   /* highest offset written so far */
    uint64_t wb_lo, wb_hi; /* bytes written since writeback was last started (output.c) */
    uint8_t *bounce;       /* tbx_out_copy_fd's buffer, kept until commit or abort */
    size_t bounce_cap;
    const tbx_alloc *al;
} tbx_out;

/* Internal open flag (never set by callers of the public API): open exactly the file named, not
 * a set it starts (a GGUF split set). The GGUF tools use it to edit/split/merge single shards. */
#define TBX_OPEN_SINGLE_FILE_ 0x80000000u
/* Internal write flag, passed only through tbx_writer_open_ (the public tbx_writer_open
 * refuses every flag but TBX_WRITE_OVERWRITE): the destination is the file of a tbx_edit_lock
 * held by the caller (TBX_OUT_EDIT). */
#define TBX_WRITE_EDIT_ 0x80000000u
/* Internal write flag (tbx_writer_open_, kept in the writer's opt.flags): the writer belongs to a
 * conversion that quantizes to the format's own families and applies the format's
 * quantization options (tbx_convert with quant_to an MCF family: MCF's quant_method and
 * quant_clip_min / quant_clip_max). Without it a writer refuses those options at layout: it
 * stores the tensors it is given and quantizes nothing. */
#define TBX_WRITE_QUANTIZING_ 0x40000000u

/* ------------------------------------------------------------------------------------------ */
/* The common model of an open file (src/api/file.c)                                          */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_meta_entry {
    char *key;           /* NUL-terminated copy */
    size_t key_len;
    tbx_value *value;
    bool borrowed;       /* writer only: key and value are the caller's (not freed) */
} tbx_meta_entry;

typedef struct tbx_component {
    const char *name;        /* static storage (a role name: "data", "indices", ...) */
    tbx_dtype dtype;
    uint32_t src;            /* source holding the bytes: 0 f->src, k > 0 f->extra_src[k-1] */
    uint64_t nelems;
    uint64_t offset;         /* absolute */
    uint64_t stored_bytes;
    uint64_t nbytes;         /* decoded */
    tbx_encoding encoding;
    /* 1: raw (not encoded) but not the decoded bytes either: the driver's read_component
     * transforms them (big-endian elements swapped, a Fortran-order array transposed), so they
     * are never served straight from the source (no maps, range reads or copies of the stored
     * bytes). A driver setting it must have read_component. Per component: one big-endian
     * member of an archive routes only itself through the driver. */
    uint8_t xform;
    char *digest;            /* NULL when none */
} tbx_component;

typedef struct tbx_tensor {
    /* 64 bytes: a handle of a million tensors holds a million of these. */
    char *name;
    uint64_t *shape;         /* row-major */
    uint64_t nelems;
    tbx_component *comp;     /* ncomp entries */
    void *drv;               /* driver-private per tensor data (owned by the driver) */
    /* How the tensor is quantized (tbx_tensor_quant_get), NULL when it is not. Made with
     * tbx_file_quant_new and owned by the handle; several tensors may share one. */
    const tbx_quant_info *quant;
    uint32_t name_len;       /* tbx_file_add_tensor refuses names of 4 GiB or more */
    tbx_dtype dtype;
    uint32_t ndim;
    uint8_t layout;          /* a tbx_layout */
    uint8_t ncomp;           /* tbx_file_add_tensor refuses more than 255 components */
    /* Set by the driver for a tensor it lists but cannot give the values of (MCF int8/int4
     * codes stored without their scale): every read of it fails with the driver's error (its
     * raw_pending/check_component say why), tbx_validate reports it, and tbx_convert refuses
     * it naming it unless TBX_CONVERT_DROP_UNREADABLE leaves it out. */
    uint8_t unreadable;
} tbx_tensor;

/* A size variable (OINF "B := 4"): a named integer the format records for its shapes. */
typedef struct tbx_sizevar {
    char *name;              /* NUL-terminated copy */
    size_t name_len;
    uint64_t value;
} tbx_sizevar;

typedef struct tbx_section {
    char *name;
    uint32_t type;
    uint32_t src;            /* source holding the bytes: 0 f->src, k > 0 f->extra_src[k-1] */
    uint64_t offset;
    uint64_t size;
} tbx_section;


struct tbx_file {
    tbx_alloc al;
    tbx_limits limits;
    uint32_t flags;               /* TBX_OPEN_* */
    tbx_source src;
    char *path;                   /* copy of the path given to tbx_open_path, NULL otherwise */
    tbx_provider *prov;           /* where the path's set lives (src/io/provider.h), owned by
                                     the handle; NULL for memory and callback opens */
    tbx_source *extra_src;        /* further sources owned by the handle (e.g. the other shards */
    size_t nextra_src;            /* of a GGUF split set), closed by tbx_close */
    char **part_names;            /* NULL, or 1 + nextra_src names of f->src and the extra
                                     sources (tbx_file_part_path; NULL entries allowed), made
                                     with f->al, freed by tbx_close */
    const tbx_driver *drv;
    tbx_format format;
    uint32_t version;
    tbx_problem_fn on_problem;    /* may be NULL: problems are then fatal */
    void *problem_ud;
    uint64_t nproblems;           /* problems passed to on_problem so far */
    tbx_status first_problem;     /* the code of the first of them (tbx_validate) */
    void *problem_lock;           /* a pthread mutex while worker threads read (tbx_read_batch) */
    uint32_t threads;             /* tbx_open_options.threads (0: tbx_threads_default()) */
    tbx_progress_fn progress;     /* tbx_open_options.progress: validation's pass */
    void *progress_ud;

    tbx_meta_entry *meta; size_t nmeta, cap_meta; tbx_names meta_names;
    tbx_tensor *tensors;  size_t ntensors, cap_tensors; tbx_names tensor_names;
    tbx_section *sections; size_t nsections, cap_sections;
    tbx_sizevar *sizevars; size_t nsizevars, cap_sizevars; tbx_names sizevar_names;
    /* The amplification budget (tbx_limits.meta_budget_*, model.c): bytes charged so far, bytes
     * of a metadata value being built (settled by tbx_file_add_meta), and the last budget
     * computed (it only grows, as the handle opens more sources). */
    uint64_t budget_used, budget_pending, budget_cap;
    struct tbx_quant_rec **quants; size_t nquants, cap_quants; /* tbx_file_quant_new */
    /* The tensors' blocks (components, shape, name) are carved from chunks (4 KiB doubling to
     * 1 MiB; freed by tbx_close): no allocator overhead per tensor. */
    struct tbx_chunk *chunks;
    uint8_t *chunk_ptr;
    size_t chunk_left;

    void *drv_state;              /* driver-private, freed by drv->close */
};

/* Model building (model.c: below the drivers, above the foundation). */
void tbx_file_model_init(tbx_file *f); /* the name indexes (new handle) */
void tbx_file_model_free(tbx_file *f); /* metadata, tensors, sections, quantization records */
/* Adds a metadata entry; takes ownership of `value` (freed on failure). TBX_E_DUPLICATE with a
 * message naming the key and `offset` when the key exists; TBX_E_LIMIT past max_metadata_entries. */
tbx_status tbx_file_add_meta(tbx_file *f, const char *key, size_t key_len, tbx_value *value,
                             uint64_t offset, tbx_error *err);
/* Adds a tensor (name copied, shape copied) with `ncomp` zeroed components to fill in; checks
 * duplicates, max_tensors, max_ndim and computes nelems with overflow checks. *out gets the
 * tensor (pointer valid until the next add). */
tbx_status tbx_file_add_tensor(tbx_file *f, const char *name, size_t name_len, tbx_dtype dtype,
                               const uint64_t *shape, uint32_t ndim, uint32_t ncomp,
                               uint64_t offset, tbx_tensor **out, tbx_error *err);
/* Makes component 0 of t (added by tbx_file_add_tensor) the tensor's whole data, stored as it
 * is: "data", `dtype`, t->nelems elements, `nbytes` raw bytes at file `offset` (the component's
 * source stays 0 unless the caller sets it). */
void tbx_comp_set_raw(tbx_tensor *t, tbx_dtype dtype, uint64_t offset, uint64_t nbytes);
/* Room for n tensors in all (table and name index sized at once, no growth slack): for a
 * driver that knows its count before adding. */
tbx_status tbx_file_reserve_tensors(tbx_file *f, size_t n, tbx_error *err);
/* The dtype entry a tensor of this handle may have: the core table's, or the one the handle's
 * own driver declares (never another driver's); NULL otherwise. */
const tbx_dtype_info *tbx_file_dtype(const tbx_file *f, tbx_dtype dtype);
tbx_status tbx_file_add_section(tbx_file *f, const char *name, uint32_t type, uint64_t offset,
                                uint64_t size, tbx_error *err);
/* Adds a size variable (name copied; tbx_sizevar_count/_get serve them in this order); charges
 * the budget (field "sizevars.name" at `offset`); TBX_E_DUPLICATE naming it and the earlier
 * entry when the name exists. The format's own rules for names are its reader's to check. */
tbx_status tbx_file_add_sizevar(tbx_file *f, const char *name, size_t name_len, uint64_t value,
                                uint64_t offset, tbx_error *err);
/* tbx_file_add_section for bytes in source `src` (0: f->src, k: f->extra_src[k-1]). */
tbx_status tbx_file_add_section_in(tbx_file *f, const char *name, uint32_t type, uint32_t src,
                                   uint64_t offset, uint64_t size, tbx_error *err);
/* The source a component's or a section's `src` names (0: f->src, k: f->extra_src[k-1]); NULL
 * when out of range. Tensor and section bytes are read through it. */
const tbx_source *tbx_file_source(const tbx_file *f, uint32_t src);
/* The index of the section named `name` (the first, exact bytes), -1 when f has none. */
int64_t tbx_file_find_section(const tbx_file *f, const char *name);
/* Are component k's decoded bytes its stored bytes, served straight from the source (range
 * reads, maps)? Raw encoding, unless the driver transforms them (k->xform: big-endian GGUF). */
bool tbx_comp_served_raw(const tbx_file *f, const tbx_component *k);
/* The amplification budget (tbx_limits.meta_budget_per_byte and _base): every byte a handle
 * holds decoded from its files (metadata, names, shapes, tables) is charged here, before it is
 * allocated where it can be. tbx_file_add_meta, _add_tensor and _add_section charge what they
 * store (a metadata value by its tbx_val_footprint); a reader charges what it builds on its own
 * (its tables, a value it expands before adding it). Past the budget: TBX_E_LIMIT naming `field`
 * and `offset`. The budget is meta_budget_per_byte x the bytes of every source the handle has
 * opened so far + meta_budget_base (*declared gets those bytes when not NULL). */
uint64_t tbx_file_budget(const tbx_file *f, uint64_t *declared);
tbx_status tbx_file_charge(tbx_file *f, uint64_t bytes, uint64_t offset, const char *field,
                           tbx_error *err);
/* After a driver opened f: the tensors' stored bytes, counted once per tensor, must stay within
 * the input's own bytes plus the budget (tensors that share bytes, as MCF and OINF allow, make
 * every copy, conversion and validation repeat them). TBX_E_LIMIT at the first tensor past it. */
tbx_status tbx_file_check_shared_data(tbx_file *f, tbx_error *err);
/* Gives back `bytes` charged by tbx_file_charge for a table the reader has freed (a table it
 * builds while it reads and drops once the model holds the same facts). */
void tbx_file_uncharge(tbx_file *f, uint64_t bytes);
/* For a metadata value being built: adds `bytes` to what it is expected to cost and fails like
 * tbx_file_charge when that would not fit. tbx_file_add_meta then charges the value's real
 * footprint in its place. */
tbx_status tbx_file_charge_pending(tbx_file *f, uint64_t bytes, uint64_t offset,
                                   const char *field, tbx_error *err);
/* Reports a recoverable problem: with on_problem set it is passed on and TBX_OK returned (the
 * caller continues); without, it is copied to *err and its code returned (the caller stops). */
tbx_status tbx_file_problem(tbx_file *f, tbx_error *err, tbx_status code, uint64_t offset,
                            const char *field, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* A quantization description as this library keeps it: the public struct first (a
 * tbx_quant_info * of a record is a tbx_quant_rec *), the values its scale/zero members point
 * to when the record owns them, and (in info.params) the params MAP. */
typedef struct tbx_quant_rec {
    tbx_quant_info info;     /* first member: a tbx_quant_info * is a tbx_quant_rec * */
    void *values[2];         /* scale, zero values (NULL when none) */
    size_t values_len[2];
} tbx_quant_rec;
/* Frees a record and what it owns, with the allocator that made it. */
void tbx_quant_rec_free(const tbx_alloc *al, tbx_quant_rec *r);
/* Quantization descriptions (src/core/quant.c). Drivers describe a quantized tensor with a
 * tbx_quant_info made here and attach it (t->quant = q); tbx_close frees them all.
 * tbx_file_quant_new: a zeroed description owned by f (struct_size set, scale/zero components
 * -1, params an empty MAP), NULL on OOM. */
tbx_quant_info *tbx_file_quant_new(tbx_file *f);
/* Charges what one description made by tbx_file_quant_new costs (with a few params) to the
 * handle's budget (tbx_file_charge), for a driver that makes one per tensor; the values
 * (tbx_file_quant_values) are the driver's to charge. */
tbx_status tbx_file_charge_quant(tbx_file *f, uint64_t offset, const char *field,
                                 tbx_error *err);
/* Storage for the values of p (a member of q): nbytes bytes owned with q; sets p->values and
 * returns the writable pointer, NULL on OOM. At most one call per member. */
void *tbx_file_quant_values(tbx_file *f, tbx_quant_info *q, tbx_quant_param *p, size_t nbytes);
/* Adds a format-specific parameter to q->params (takes ownership of v, also on failure; v must
 * be made with the handle's allocator). TBX_E_NOMEM / TBX_E_DUPLICATE. */
tbx_status tbx_quant_put(tbx_quant_info *q, const char *key, tbx_value *v);
tbx_status tbx_quant_put_u32(tbx_file *f, tbx_quant_info *q, const char *key, uint32_t v);
void tbx_file_quant_free(tbx_file *f);
/* Checks a caller's description (tbx_writer_add_quant_tensor) of tensor `tensor` (shape, ndim) before a writer keeps it:
 * struct_size at least this version's, a known method, scopes and counts that fit the shape
 * (TENSOR: 1; CHANNEL: shape[axis], axis < ndim; GROUP: rows x ceil(cols / block_size)), values
 * of a core byte-sized dtype when given,
 * params a MAP or NULL. TBX_E_INVALID_ARG naming the member otherwise. */
tbx_status tbx_quant_desc_check(const tbx_quant_info *q, const uint64_t *shape, uint32_t ndim,
                                const char *tensor, tbx_error *err);
/* A deep copy of a checked description (values and params copied; params an empty MAP when q
 * has none), made with al; NULL on OOM. tbx_quant_clone_free frees it (accepts NULL). */
tbx_quant_info *tbx_quant_clone(const tbx_alloc *al, const tbx_quant_info *q);
void tbx_quant_clone_free(const tbx_alloc *al, tbx_quant_info *q);

/* ------------------------------------------------------------------------------------------ */
/* The writer's common state (src/api/writer.c)                                               */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_wtensor {
    /* 40 bytes: a writer of a million tensors holds a million of these. */
    char *name;
    uint64_t *shape;
    uint64_t nbytes;       /* stored bytes expected from the caller */
    uint64_t offset;       /* absolute offset assigned by the driver's layout() */
    uint32_t name_len;     /* tbx_writer_add_tensor refuses names of 4 GiB or more, */
    uint16_t ndim;         /* more than 65535 dimensions */
    uint8_t dtype;         /* (a tbx_dtype) and dtype values above 255 */
    bool has_data : 1;
    bool done : 1;         /* all bytes received and w_tensor_done called */
    /* The bytes received so far are w->cur_written for the tensor being written (w->current),
     * nbytes for a done one, 0 otherwise: only one tensor is ever partly written. */
} tbx_wtensor;

/* A declared tensor's element count (its product was checked for overflow when declared). */
static inline uint64_t tbx_wt_nelems(const tbx_wtensor *t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

typedef struct tbx_wsection {
    char *name;
    uint32_t type;
    uint8_t *data;
    size_t len;
} tbx_wsection;

/* A declared tensor's quantization description (tbx_writer_add_quant_tensor); drivers read
 * w->quants (by increasing index) or tbx_writer_tensor_quant_. */
struct tbx_wquant {
    uint64_t index;            /* the tensor */
    const tbx_quant_info *q;   /* checked (tbx_quant_desc_check) and accepted by the driver */
    bool owned;                /* a copy made by the writer (else the converted file's own) */
};

typedef enum tbx_wstate { TBX_WS_DECLARE, TBX_WS_DATA, TBX_WS_DONE } tbx_wstate;

struct tbx_writer {
    tbx_alloc al;
    tbx_write_options opt;
    tbx_format format;
    const tbx_driver *drv;
    const tbx_driver *const *known; /* every driver of the build (the registry's list, handed
                                       down by the façade; NULL: none), to name a dtype that
                                       belongs to another format */
    tbx_out out;
    tbx_wstate state;
    tbx_meta_entry *meta; size_t nmeta, cap_meta; tbx_names meta_names;
    tbx_wtensor *tensors; size_t ntensors, cap_tensors; tbx_names tensor_names;
    tbx_wsection *sections; size_t nsections, cap_sections;
    /* Quantization descriptions of declared tensors (tbx_writer_add_quant_tensor), by increasing
     * tensor index; only quantized tensors have an entry (tbx_wtensor stays 40 bytes). */
    struct tbx_wquant *quants; size_t nquants, cap_quants;
    bool borrow_descs;      /* tbx_writer_borrow_descs_: names and shapes are the caller's */
    const tbx_names *lent_names; /* tbx_writer_borrow_descs_: the caller's index of the same
                                    names (tensor i of the writer is entry i); NULL: own index */
    int64_t current;        /* tensor being written, -1 when none */
    uint64_t cur_written;   /* bytes of it received before the chunk being handed over */
    uint64_t end;           /* file size the driver will commit (set by layout/finish) */
    /* The format's own options (tbx_write_options.options), checked against the row's
     * w_options and copied at the writer's open (NULL: none); drivers read them with
     * tbx_writer_opt_bool / _u64 / _str. */
    tbx_value *options;
    /* tbx_writer_set_source_dir_: the base name of the model directory the tensors come from
     * (tbx_convert of a Hugging Face directory), NUL-terminated; NULL otherwise. A writer that
     * records a model name or follows a directory packer (MCF: mantle's pack) reads it. */
    char *src_dir;
    void *drv_state;
};

/* The quantization description given for declared tensor `index` (tbx_writer_add_quant_tensor),
 * NULL when none; valid until the writer is freed. For drivers' w_check_quant / layout. */
const tbx_quant_info *tbx_writer_tensor_quant_(const tbx_writer *w, uint64_t index);
/* Finds a declared tensor of the writer by name (through its own or the lent index). */
bool tbx_writer_find_tensor_(const tbx_writer *w, const char *name, size_t len, uint64_t *index);
/* The dtype entry of a declared tensor's dtype: the core table's, or the one the writer's own
 * driver declares; NULL otherwise (wstate.c; the writer's tbx_file_dtype). */
const tbx_dtype_info *tbx_writer_dtype(const tbx_writer *w, tbx_dtype dtype);
/* The format's own option `key` as the caller gave it (tbx_write_options.options, checked at
 * open against the row's w_options: of the declared type and range), `dflt` when not given. */
bool tbx_writer_opt_bool(const tbx_writer *w, const char *key, bool dflt);
uint64_t tbx_writer_opt_u64(const tbx_writer *w, const char *key, uint64_t dflt);
double tbx_writer_opt_f64(const tbx_writer *w, const char *key, double dflt);
const char *tbx_writer_opt_str(const tbx_writer *w, const char *key, const char *dflt);

/* ------------------------------------------------------------------------------------------ */
/* Format drivers (src/formats/<fmt>/). Registered in src/formats/registry.h.                  */
/* ------------------------------------------------------------------------------------------ */
/* An encoding a format declares (tbx_driver.encodings): its value and lower-case name. */
typedef struct tbx_encoding_entry {
    tbx_encoding encoding;
    const char *name;
} tbx_encoding_entry;

/* The contract: everything core knows about a format comes from its row below; a format is
 * its folder src/formats/<fmt>/ (reader, writer, common helpers, <fmt>_driver.c holding the
 * row) plus its name in TBX_REGISTRY_ROWS (src/formats/registry.h); the build finds the
 * folder by itself (cmake/layers.cmake). Its format value (and any encoding value of its own)
 * needs no name in tensorbox.h: the row gives it, each value one row's. Core holds every driver to
 * its row: the versions it reads and writes (tbx_file_open_done_, tbx_writer_create_), the
 * metadata types and dtypes its writer takes (meta_types, w_dtype_ok), its write options
 * (w_options). The members, by what they are for (required: every row has them; the others
 * are NULL / 0 when the format has no use for them, with the drivers using each today):
 *
 *   identity        format, name, aliases, extensions              required (aliases optional)
 *   capabilities    caps (the flags hooks cannot imply), read_versions, write_versions,
 *                   write_version, meta_types, w_dtype_ok          required for a writer
 *   own dtypes      dtypes, ndtypes, dtype_nbytes                   dtypes whose size follows
 *                   from the whole shape (TBX_DTF_SHAPED): MCF's families
 *   reading         probe, open, close                              required for a reader
 *   sets            claims_path, open_path                          a model named by a path that
 *                   is not one of its files (a directory, an index): safetensors
 *   component bytes read_component (encoded or transformed components: zTensor zstd, EMBD and
 *                   MCF checks, big-endian GGUF via tbx_component.xform), read_component_range
 *                   (encoded range reads: zTensor), raw_pending + check_component (a check a
 *                   raw component still owes: zTensor digests, EMBD CRCs, MCF scales),
 *                   read_batch (a batch served in one pass: EMBD's data CRC), read_f32 (values
 *                   core cannot decode: MCF's families, zTensor sparse/grouped)
 *   description     describe_key, describe                          the format's own member of
 *                   the info document: EMBD (header, vocabulary), MCF (section directory)
 *   own encodings   encodings                                       component encodings beside
 *                   raw and zstd, named by the row
 *   validation      validate                                        deep checks after open
 *   writing         w_layout (required for a writer), w_check_meta, w_check_tensor,
 *                   w_check_section (sections), w_check_quant (quantization descriptions:
 *                   OINF v2, zTensor, MCF), w_data, w_tensor_done, w_finish, w_free
 *   write options   w_options (the format's own options: MCF's dedup, and quant_method /
 *                   quant_clip_min / quant_clip_max, which its conversion applies),
 *                   w_check_options (the format's ranges of the generic ones at open:
 *                   zTensor's zstd level; options that go together: MCF's clip range)
 *   writer extras   w_add_sizevar (size variables: OINF), w_dtype_in_check (a writer that
 *                   leaves tensors out by name sees an unstorable dtype first: EMBD's
 *                   Hugging Face buffers)
 *
 * Not in the row, on purpose: what the common model holds (size variables are tables of
 * tbx_file filled by the reader: tbx_file_add_sizevar; a component's transformation is its
 * own flag, tbx_component.xform), and what a front end renders (tbx_file_describe builds the
 * info document from the model plus `describe`; the CLI and Python know no format). */
struct tbx_driver {
    /* Identity, read by the registry (tbx_format_name/_from_name/_from_path, tbx_format_caps_get).
     * A format value without a driver is "unknown" everywhere. */
    tbx_format format;
    const char *name;
    const char *aliases;     /* other names for tbx_format_from_name, space-separated; NULL: none */
    const char *extensions;  /* space-separated, e.g. ".safetensors"; the first is the usual one */
    /* Capabilities (tbx_format_caps). TBX_FCAP_READ/WRITE/SECTIONS/SIZEVARS are derived from
     * the hooks (open, w_layout, w_check_section, sizevar_count/w_add_sizevar); `caps` holds
     * the rest (TBX_FCAP_NO_DATA, _COMPRESSION, _DIGESTS). */
    uint32_t caps;
    uint32_t read_versions;  /* bit v: version v can be read (bit 0: unversioned format) */
    uint32_t write_versions; /* bit v: version v can be written */
    uint32_t write_version;  /* the default written version */
    /* Metadata value types the writer stores as such (bit 1 << tbx_value_type); the driver's
     * w_check_meta refuses the others from this same mask (tbx_driver_meta_ok). */
    uint64_t meta_types;
    /* Can the writer store tensors of this dtype (at some shape)? w_check_tensor uses the same
     * function. NULL: read-only format. */
    bool (*w_dtype_ok)(tbx_dtype dtype);
    /* true: tbx_writer_add_tensor leaves the w_dtype_ok refusal of an element dtype (not a block
     * or shaped one, which cannot even be sized) to w_check_tensor, because the
     * writer may accept and drop a tensor it does not store (EMBD from a Hugging Face model
     * drops embeddings.position_ids, an i64 buffer, by name) */
    bool w_dtype_in_check;

    /* Driver-specific dtypes (TBX_DTF_SHAPED): the entries tbx_dtype_get returns for them (the
     * values must be reserved in tensorbox.h) and their stored size, computed from the whole
     * shape (checked arithmetic: TBX_E_OVERFLOW, TBX_E_FORMAT for a shape the dtype cannot
     * have). tbx_dtype_nbytes_shape asks this hook; core has no size rule of its own for them. */
    const tbx_dtype_info *dtypes;
    size_t ndtypes;
    tbx_status (*dtype_nbytes)(tbx_dtype dtype, const uint64_t *shape, uint32_t ndim,
                               uint64_t *out);

    /* Optional: size variables (tbx_sizevar_count/get read them from an open file of this
     * driver; tbx_writer_add_sizevar hands them to its writer). NULL: the format has none. */
    tbx_status (*w_add_sizevar)(tbx_writer *w, const char *name, uint64_t value,
                                tbx_error *err);

    /* Reading. probe: does `head` (first `len` bytes, len >= min(64, size)) look like ours? */
    bool (*probe)(const uint8_t *head, size_t len, uint64_t file_size);
    /* Parses the file into f (meta/tensors/sections/version); drv_state as needed. */
    tbx_status (*open)(tbx_file *f, tbx_error *err);
    /* Optional: a model kept as several files and named by a path that is not itself a file of
     * the format: a directory, or a set's index file (the safetensors driver: a Hugging Face
     * model directory, `*.safetensors.index.json`). claims_path looks only at what the provider
     * of the path says (is_dir, the entry's name, the names it lists; never the file system
     * itself): is this the driver's set? The façade (tbx_open_path, tbx_open_provider_) asks
     * every driver (in registry order, only the forced one when the options name a format)
     * before it opens anything; the first that claims the path gets open_path, with f->path
     * and f->prov set and f->src not opened: the driver opens f->src (the file whose byte
     * offsets its errors name, e.g. the index) and any extra sources itself through f->prov
     * (src/io/provider.h), then fills f as open does. A driver whose files name their siblings
     * (a GGUF split set) opens them through f->prov from open. */
    bool (*claims_path)(const tbx_provider *p);
    tbx_status (*open_path)(tbx_file *f, tbx_error *err);
    /* Optional: read the decoded bytes of an encoded component (buf has exactly comp->nbytes
     * bytes), and of a raw one while raw_pending says it still has a check to pass. Raw
     * components are otherwise served by the core straight from the source (pread, range
     * reads, tbx_tensor_map). May run on several threads at once for distinct components. */
    tbx_status (*read_component)(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                                 tbx_error *err);
    /* Optional: decoded bytes [pos, pos + len) of an encoded component (range checked by the
     * core, any pending check run first), in bounded memory: the driver keeps a decoding
     * cursor per component so that a read starting where the previous one ended continues
     * instead of decoding again from the first byte (a backwards read starts over). Serves
     * tbx_component_read_range / tbx_tensor_read_range and the chunks of tbx_tensor_read_f32.
     * Called only on the thread using the handle, never from tbx_read_batch's workers. NULL:
     * encoded components cannot be range-read (tbx_tensor_read_f32 then decodes them whole). */
    tbx_status (*read_component_range)(tbx_file *f, const tbx_tensor *t, uint32_t c,
                                       uint64_t pos, void *buf, size_t len, tbx_error *err);
    /* Optional: does raw component c still need the driver to look at its bytes (zTensor: a
     * digest to verify)? Full reads then go through read_component (checked while copied);
     * range reads, maps and f32 decoding call check_raw first. NULL: never. */
    bool (*raw_pending)(const tbx_file *f, const tbx_tensor *t, uint32_t c);
    /* Optional: decode and check component c in bounded memory, discarding the bytes (digests,
     * exact decoded size). Called by tbx_validate for encoded and pending components, and
     * before a raw component with a pending check is mapped, range-read or decoded to f32.
     * NULL: tbx_validate reads such components whole. */
    tbx_status (*check_component)(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err);
    /* Optional: tbx_read_batch offers the whole (checked-in-shape) request array here first.
     * The driver may serve it in one pass of its own (EMBD: read the data region in file order
     * into the callers' buffers and verify the data CRC over those very bytes): it then sets
     * *handled, the status (and error) of every request, and returns TBX_OK or an error of the
     * whole call. Leaving *handled false declines: the core reads the requests as usual. */
    tbx_status (*read_batch)(tbx_file *f, tbx_read_req *reqs, size_t n, uint32_t threads,
                             bool *handled, tbx_error *err);
    /* Optional: decode elements [first, first+count) of tensor i to f32, row-major. The
     * contract: tbx_tensor_read_f32 (index and range already checked, out non-NULL when
     * count > 0) routes here every tensor that is not a single dense component (sparse,
     * quantized group) and every dense tensor whose dtype has no core decoder (TBX_DTF_SHAPED,
     * or TBX_DTF_BLOCK without a registered dequantizer): having the hook claims them, so the
     * driver must decode them or fail with a specific error (TBX_E_UNSUPPORTED naming the
     * dtype), and must not call tbx_tensor_read_f32 on them (that would come back here).
     * Dense tensors of core-decodable dtypes never come here. NULL: such tensors cannot be
     * decoded (TBX_E_UNSUPPORTED). */
    tbx_status (*read_f32)(tbx_file *f, uint64_t i, uint64_t first, uint64_t count, float *out,
                           tbx_error *err);
    /* Optional: the format's own member of the file's description (tbx_file_describe), under
     * the key describe_key, after the common members (EMBD's header and vocabulary, MCF's
     * section directory). The hook builds values with the tbx_desc_* helpers below and gives
     * either one value (tbx_desc_put) or the items of an array one at a time (tbx_desc_item: a
     * table whose size follows from the input is never built whole); giving nothing leaves
     * the member out. NULL: the format adds nothing to the common description. */
    const char *describe_key;
    tbx_status (*describe)(const tbx_file *f, tbx_describer *d, tbx_error *err);
    /* Optional: the encodings of the format's own that its reader sets on components
     * (tbx_component.encoding) beside the core's raw and zstd, each a value no other row
     * declares (test_contract), with the name tbx_encoding_name and the description give it;
     * terminated by an entry whose name is NULL. A component in such an encoding is read only
     * through read_component (and read_component_range, check_component when present), never
     * served from the source. NULL: none (npz: "deflate"). */
    const tbx_encoding_entry *encodings;
    /* Optional: deep checks run by tbx_validate after open (every problem via
     * tbx_file_problem). */
    tbx_status (*validate)(tbx_file *f, tbx_error *err);
    void (*close)(tbx_file *f);

    /* Writing. NULL write hooks mean the format is read-only. */
    /* The format's own write options (tbx_write_options.options; tbx_format_option_at lists
     * them), terminated by an entry whose key is NULL; NULL: none. Core checks every option a
     * caller gives against them at the writer's open (unknown key, type, range, choices). */
    const tbx_format_option *w_options;
    /* Optional: the writer's options checked at its open (tbx_writer_open and
     * tbx_writer_check, before anything is written), after core's generic checks and the
     * w_options table: the format's ranges of the generic ones (zTensor: zstd levels, a
     * minimum alignment) and what its options mean together. w->opt and w->options are set;
     * nothing is declared yet. */
    tbx_status (*w_check_options)(tbx_writer *w, tbx_error *err);
    /* May the format store this metadata value? TBX_E_UNSUPPORTED/TBX_E_LOSSY otherwise. */
    tbx_status (*w_check_meta)(tbx_writer *w, const char *key, size_t key_len,
                               const tbx_value *v, tbx_error *err);
    /* May the format store this section? NULL: the format has no sections. */
    tbx_status (*w_check_section)(tbx_writer *w, const char *name, uint32_t type, size_t len,
                                  tbx_error *err);
    /* May the format store this tensor? Sets t->nbytes when the table cannot. */
    tbx_status (*w_check_tensor)(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
    /* Optional: may the format store the quantization description q of tensor t (given with
     * tbx_writer_add_quant_tensor, called after w_check_tensor accepted t; may change t->nbytes)?
     * TBX_E_UNSUPPORTED / TBX_E_LOSSY naming the tensor and what cannot be stored; TBX_OK
     * means the writer stores q exactly. The writer keeps q (a copy, or the converted file's
     * own description) until w_free: drivers read it back with tbx_writer_tensor_quant_.
     * NULL: the format stores no descriptions; core then accepts only TBX_QUANT_GGML with
     * code_dtype == the tensor's dtype (the block type is the description) and refuses the
     * rest with TBX_E_UNSUPPORTED. */
    tbx_status (*w_check_quant)(tbx_writer *w, tbx_wtensor *t, const tbx_quant_info *q,
                                tbx_error *err);
    /* Called once before the first tensor byte (or at finish): assign every t->offset, write
     * headers, set w->end to the final file size when already known. */
    tbx_status (*w_layout)(tbx_writer *w, tbx_error *err);
    /* Optional: receive tensor data. NULL: pwrite at t->offset + t->written. */
    tbx_status (*w_data)(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                         tbx_error *err);
    /* Optional: a tensor got all its bytes. */
    tbx_status (*w_tensor_done)(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
    /* Optional: write trailers; set w->end. */
    tbx_status (*w_finish)(tbx_writer *w, tbx_error *err);
    /* Optional: free drv_state (and per-tensor drv). */
    void (*w_free)(tbx_writer *w);
};
/* Building a driver's member of the description (tbx_driver.describe, src/core/describe.c).
 * Values are made in the describer's arena (freed after each piece is handed over: never free
 * them). A failure is remembered: every helper after it does nothing and the next
 * tbx_desc_put / _item returns TBX_E_NOMEM, so a hook builds without checking each step. */
const tbx_alloc *tbx_desc_alloc(tbx_describer *d);        /* for tbx_val_* constructors */
tbx_value *tbx_desc_new(tbx_describer *d, tbx_value_type t); /* zeroed value of type t */
tbx_value *tbx_desc_map(tbx_describer *d);
tbx_value *tbx_desc_list(tbx_describer *d);               /* array, no declared element type */
tbx_value *tbx_desc_u64_value(tbx_describer *d, uint64_t u);
tbx_value *tbx_desc_str_value(tbx_describer *d, const char *s, size_t n);
void tbx_desc_set(tbx_describer *d, tbx_value *map, const char *key, tbx_value *v);
void tbx_desc_push(tbx_describer *d, tbx_value *list, tbx_value *v);
void tbx_desc_u64(tbx_describer *d, tbx_value *map, const char *key, uint64_t u);
void tbx_desc_str(tbx_describer *d, tbx_value *map, const char *key, const char *s);
/* The driver's member whole (once), or one item of it as an array (any number of times). */
tbx_status tbx_desc_put(tbx_describer *d, tbx_value *v, tbx_error *err);
tbx_status tbx_desc_item(tbx_describer *d, tbx_value *v, tbx_error *err);

/* Bit of a tbx_value_type in tbx_driver.meta_types / tbx_format_caps.meta_types. */
#define TBX_VBIT(t) ((uint64_t)1 << (t))
/* May driver d's writer store a metadata value of type t (its meta_types mask)? */
static inline bool tbx_driver_meta_ok(const tbx_driver *d, tbx_value_type t) {
    return (unsigned)t < 64 && (d->meta_types >> (unsigned)t & 1u);
}
/* tbx_format_caps.flags of a driver (declared bits plus those its hooks imply; model.c). */
uint32_t tbx_driver_caps(const tbx_driver *d);
/* Does the row declare version v readable (read_versions) / writable (write_versions)? The
 * core holds every file and writer to the row: tbx_file_open_done_ refuses a file whose
 * f->version the row does not declare readable (TBX_E_BAD_VERSION), tbx_writer_create_ a
 * version the row does not declare writable (TBX_E_UNSUPPORTED) and gives the writer its
 * version resolved (w->opt.version, never 0 for "default"); drivers check no version list of
 * their own (a reader still stops at a version field it cannot parse, naming its offset). */
bool tbx_driver_reads_version(const tbx_driver *d, uint32_t v);
bool tbx_driver_writes_version(const tbx_driver *d, uint32_t v);
/* A version mask as text ("1, 2, 3"; "0 (unversioned)"; "none") into buf; returns its length. */
size_t tbx_versions_text(uint32_t mask, char *buf, size_t cap);

#endif /* TBX_MODEL_H */
