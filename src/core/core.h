/*
 * core.h - the foundation every layer of the library stands on: checked arithmetic,
 * little-endian loads, errors, allocation, byte-string indexes, values, the core dtype table,
 * worker threads and text helpers. It sees nothing above it (src/core/, layer 1 of
 * docs/architecture.md); the common model is in model.h.
 */
#ifndef TBX_CORE_H
#define TBX_CORE_H

#include "tensorbox.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Checked arithmetic: return false on overflow, *out untouched then.                          */
/* ------------------------------------------------------------------------------------------ */
static inline bool tbx_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
static inline bool tbx_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
/* Rounds x up to a multiple of `align` (a power of two or any positive value). */
static inline bool tbx_align_up_u64(uint64_t x, uint64_t align, uint64_t *out) {
    if (align <= 1) { *out = x; return true; }
    uint64_t rem = x % align;
    if (rem == 0) { *out = x; return true; }
    return tbx_add_u64(x, align - rem, out);
}
static inline bool tbx_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* ------------------------------------------------------------------------------------------ */
/* Little-endian loads/stores via memcpy (alignment-safe, strict-aliasing-safe).               */
/* ------------------------------------------------------------------------------------------ */
static inline uint16_t tbx_ld16(const void *p) {
    const uint8_t *b = (const uint8_t *)p;
    return (uint16_t)(b[0] | (b[1] << 8));
}
static inline uint32_t tbx_ld32(const void *p) {
    const uint8_t *b = (const uint8_t *)p;
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}
static inline uint64_t tbx_ld64(const void *p) {
    return (uint64_t)tbx_ld32(p) | ((uint64_t)tbx_ld32((const uint8_t *)p + 4) << 32);
}
static inline void tbx_st16(void *p, uint16_t v) {
    uint8_t *b = (uint8_t *)p; b[0] = (uint8_t)v; b[1] = (uint8_t)(v >> 8);
}
static inline void tbx_st32(void *p, uint32_t v) {
    uint8_t *b = (uint8_t *)p;
    b[0] = (uint8_t)v; b[1] = (uint8_t)(v >> 8); b[2] = (uint8_t)(v >> 16); b[3] = (uint8_t)(v >> 24);
}
static inline void tbx_st64(void *p, uint64_t v) {
    tbx_st32(p, (uint32_t)v); tbx_st32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}
static inline float tbx_ldf32(const void *p) { uint32_t u = tbx_ld32(p); float f; memcpy(&f, &u, 4); return f; }
static inline double tbx_ldf64(const void *p) { uint64_t u = tbx_ld64(p); double d; memcpy(&d, &u, 8); return d; }

/* ------------------------------------------------------------------------------------------ */
/* Errors (src/core/error.c)                                                                   */
/* ------------------------------------------------------------------------------------------ */
/* Fills *err (when not NULL) and returns `code`. `field` may be NULL. The message is formatted
 * from fmt and, when offset != TBX_NO_OFFSET, suffixed with " at byte OFFSET". */
tbx_status tbx_err(tbx_error *err, tbx_status code, uint64_t offset, const char *field,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
tbx_status tbx_verr(tbx_error *err, tbx_status code, uint64_t offset, const char *field,
                    const char *fmt, va_list ap);
/* As tbx_err, for a message that already names the offset itself: no " at byte" suffix is
 * added, but err->offset is still set to `offset`. */
tbx_status tbx_err_at(tbx_error *err, tbx_status code, uint64_t offset, const char *field,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Shorthand for TBX_E_NOMEM. */
tbx_status tbx_err_nomem(tbx_error *err, const char *what);

/* ------------------------------------------------------------------------------------------ */
/* Allocation (src/core/alloc.c): every handle allocation goes through its allocator.          */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_alloc {
    tbx_allocator a; /* always fully set (malloc-backed default) */
} tbx_alloc;

void tbx_alloc_init(tbx_alloc *al, const tbx_allocator *user);
void *tbx_malloc(const tbx_alloc *al, size_t n);         /* n == 0 allowed (returns non-NULL) */
void *tbx_calloc(const tbx_alloc *al, size_t count, size_t size); /* checked multiply */
void *tbx_realloc(const tbx_alloc *al, void *p, size_t old_n, size_t new_n);
void tbx_free(const tbx_alloc *al, void *p, size_t n);
char *tbx_memdup0(const tbx_alloc *al, const void *p, size_t n); /* copy + trailing NUL */
/* Grows a dynamic array (*items of *cap elements of `elem` bytes) to hold at least `need`. */
bool tbx_grow(const tbx_alloc *al, void **items, size_t *cap, size_t need, size_t elem);
/* A byte buffer built in memory (a section's bytes, a re-encoded JSON file): p has cap bytes,
 * n used; the owner frees p with tbx_free(al, p, cap). Once a growth fails, oom is set and
 * every later put does nothing, so a builder checks oom once at the end. */
typedef struct tbx_membuf {
    const tbx_alloc *al;
    uint8_t *p;
    size_t n, cap;
    bool oom;
} tbx_membuf;
/* Appends n bytes from p, or n zero bytes when p is NULL. */
void tbx_membuf_put(tbx_membuf *b, const void *p, size_t n);

/* The process-wide default allocator (malloc/realloc/free). */
extern const tbx_allocator tbx_default_allocator;

/* ------------------------------------------------------------------------------------------ */
/* Name index (src/core/names.c): hash set of byte strings -> index, for duplicate detection    */
/* and lookups. Sized by the number of inserted entries (never by declared counts).            */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_names {
    const tbx_alloc *al;
    uint32_t *slots;   /* (index + 1) per slot, 0 = empty; then a 32-bit hash per slot */
    size_t nslots;
    size_t count;
    /* key access: the index refers to caller storage */
    const char *(*key_of)(const void *ctx, uint64_t index, size_t *len);
    const void *ctx;
} tbx_names;

void tbx_names_init(tbx_names *n, const tbx_alloc *al,
                    const char *(*key_of)(const void *ctx, uint64_t index, size_t *len),
                    const void *ctx);
void tbx_names_free(tbx_names *n);
/* Inserts `index` (whose key is key_of(index)). Returns TBX_E_DUPLICATE (and *existing gets the
 * earlier index, when not NULL) if the key is already present; TBX_E_NOMEM on OOM. */
tbx_status tbx_names_insert(tbx_names *n, uint64_t index, uint64_t *existing);
/* Sizes the table for `count` entries at once (no growth before then); TBX_E_NOMEM on OOM.
 * Indices must be below 2^32 - 1 (TBX_E_INVALID_ARG from insert otherwise). */
tbx_status tbx_names_reserve(tbx_names *n, size_t count);
/* Finds a key; returns true and *index when present. */
bool tbx_names_find(const tbx_names *n, const char *key, size_t len, uint64_t *index);
uint64_t tbx_hash_bytes(const void *p, size_t n);

/* ------------------------------------------------------------------------------------------ */
/* Values (src/core/value.c)                                                                   */
/* ------------------------------------------------------------------------------------------ */
struct tbx_value {
    tbx_value_type type;
    tbx_value_type elem;          /* ARRAY: declared element type (TBX_V_NULL: any) */
    union {
        uint64_t u;               /* BOOL, U8..U64 */
        int64_t i;                /* I8..I64 */
        double f;                 /* F16..F64 (F16/BF16/F32 hold the exactly widened value) */
        struct { char *p; size_t n; } s;            /* STRING, BYTES (p NUL-terminated) */
        struct {                                    /* ARRAY, MAP */
            tbx_value **items;    /* ARRAY of non-scalars or MAP values; NULL for packed arrays */
            char **keys;          /* MAP keys (NUL-terminated copies) */
            size_t *key_lens;
            void *packed;         /* ARRAY of fixed-size scalars: native-endian elements */
            size_t n, cap;
            tbx_value **cache;    /* tbx_value_at on packed arrays: materialised on demand */
            /* ARRAY of strings built compactly (tbx_val_str_array): string i is
             * sblob[off(i) .. off(i+1)-1), NUL-terminated; soff has n+1 entries (cap+1
             * allocated) of soff_w bytes (4 when the blob stays below 4 GiB, else 8). items and
             * packed are NULL then. */
            char *sblob;
            size_t sblob_len, sblob_cap;
            void *soff;
            unsigned soff_w;
        } a;
        struct {                                    /* NDARRAY, BITSET */
            tbx_dtype dtype;      /* NDARRAY element dtype */
            uint32_t ndim;
            uint64_t *shape;
            uint8_t *data;
            size_t nbytes;
            uint64_t count;       /* elements (BITSET: bits) */
        } nd;
    } v;
    const tbx_alloc *al;          /* allocator that owns this value */
};

/* Allocator-aware constructors used by drivers (values owned by a handle). */
tbx_value *tbx_val_new(const tbx_alloc *al, tbx_value_type t);
tbx_value *tbx_val_string(const tbx_alloc *al, tbx_value_type t, const void *p, size_t n);
/* A packed ARRAY of `n` fixed-size scalars of type `elem` with storage for them (uninitialised);
 * the caller fills tbx_value_data() bytes in native endianness. */
tbx_value *tbx_val_packed_array(const tbx_alloc *al, tbx_value_type elem, size_t n);
/* A compact ARRAY of strings (elem TBX_V_STRING) with room for `n` strings whose bytes total at
 * most `max_bytes`, holding none yet: one offsets array and one byte blob instead of one value per
 * string. Fill it with tbx_val_str_array_add, then call tbx_val_str_array_done. */
tbx_value *tbx_val_str_array(const tbx_alloc *al, size_t n, uint64_t max_bytes);
/* Appends a string of `len` bytes (at most `n` strings and `max_bytes` in all, as promised at
 * creation): returns where to put its bytes (the NUL after them is already written), NULL on OOM
 * or past the promise. */
char *tbx_val_str_array_add(tbx_value *v, size_t len);
/* Gives back the blob's unused capacity. */
void tbx_val_str_array_done(tbx_value *v);
/* Is v an ARRAY whose items are strings stored compactly? */
static inline bool tbx_val_is_str_array(const tbx_value *v) {
    return v && v->type == TBX_V_ARRAY && v->v.a.soff != NULL;
}
void tbx_val_free(tbx_value *v);
/* Element i of a packed ARRAY as a scalar in *out (no allocation, nothing cached: tbx_value_at
 * keeps a value node per element it is asked for, ~150 bytes for a 1-byte element); false
 * when arr is not a packed array or i is out of range. */
bool tbx_val_packed_get(const tbx_value *arr, size_t i, tbx_value *out);
tbx_value *tbx_val_clone(const tbx_alloc *al, const tbx_value *v);
/* Byte size of a fixed-size scalar value type (BOOL 1, U8 1, ..., F64 8); 0 for others. */
size_t tbx_value_scalar_size(tbx_value_type t);
bool tbx_value_type_is_int(tbx_value_type t);
bool tbx_value_type_is_float(tbx_value_type t);

/* Bytes of a caller's versioned struct this library reads or writes: its struct_size when that
 * is a shorter, older version, else this version's `full` size (0 means all of this version). */
static inline size_t tbx_struct_bytes(uint32_t struct_size, size_t full) {
    return struct_size && struct_size < full ? struct_size : full;
}

/* The bytes a value holds (heap blocks with an allocator's usual overhead, its items, keys and
 * cache), as charged to a budget. */
uint64_t tbx_val_footprint(const tbx_value *v);
/* Bookkeeping bytes of one heap block, added to each block a footprint counts. */
#define TBX_HEAP_OVERHEAD 16u

/* ------------------------------------------------------------------------------------------ */
/* The core dtype table (src/core/dtype.c)                                                     */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_driver tbx_driver;
/* The driver declaring driver-specific dtype `dt` among `drivers` (NULL-terminated), and its
 * entry (*info, may be NULL); NULL when none does (dtype.c). tbx_dtype_get/_nbytes_shape
 * (registry.c) pass tbx_drivers, tbx_file_add_tensor the handle's own driver, tests their own. */
const tbx_driver *tbx_dtype_driver_in(const tbx_driver *const *drivers, tbx_dtype dt,
                                      const tbx_dtype_info **info);
/* The core dtype table (dtype.c, foundation: it never looks at the drivers). The public lookups
 * tbx_dtype_get / _from_name / _nbytes / _nbytes_shape (registry.c) consult it first, then the
 * drivers' dtypes. */
const tbx_dtype_info *tbx_dtype_core_get(tbx_dtype dtype); /* NULL: not a core dtype */
tbx_dtype tbx_dtype_core_from_name(const char *name);      /* core names; INVALID otherwise */
tbx_dtype tbx_dtype_alias_from_name(const char *name);     /* "f4", "complex64", ... */
bool tbx_dtype_name_eq(const char *a, const char *b);      /* ASCII case-insensitive */
/* Size rules of a non-shaped entry: nelems elements; a row-major shape (the last dimension holds
 * whole blocks). TBX_E_UNSUPPORTED for TBX_DTF_SHAPED entries, TBX_E_INVALID_ARG for NULL. */
tbx_status tbx_dtype_info_nbytes(const tbx_dtype_info *e, uint64_t nelems, uint64_t *out);
tbx_status tbx_dtype_info_nbytes_shape(const tbx_dtype_info *e, const uint64_t *shape,
                                       uint32_t ndim, uint64_t *out);
/* The size rules of a core dtype (drivers' reading hooks: they do not look up other drivers).
 * TBX_E_INVALID_ARG when `dt` is not a core dtype. */
tbx_status tbx_dtype_core_nbytes(tbx_dtype dt, uint64_t nelems, uint64_t *out);
tbx_status tbx_dtype_core_nbytes_shape(tbx_dtype dt, const uint64_t *shape, uint32_t ndim,
                                       uint64_t *out);
/* tbx_dtype_get / tbx_dtype_nbytes_shape over an explicit driver list. */
const tbx_dtype_info *tbx_dtype_get_in(const tbx_driver *const *drivers, tbx_dtype dtype);
/* The name of an encoding: the core's (raw, zstd), else the one a driver of `drivers`
 * (NULL-terminated) declares in its row (tbx_driver.encodings); "unknown" otherwise. The
 * registry's tbx_encoding_name passes every row; a handle's description passes its own. */
const char *tbx_encoding_name_in(const tbx_driver *const *drivers, tbx_encoding encoding);
tbx_status tbx_dtype_nbytes_shape_in(const tbx_driver *const *drivers, tbx_dtype dtype,
                                     const uint64_t *shape, uint32_t ndim, uint64_t *out);


/* ------------------------------------------------------------------------------------------ */
/* Narrow floats without a public conversion (src/core/float.c): the 6-bit and 4-bit OCP MX    */
/* floats (no Inf/NaN). Codes use the low 6 (4) bits; higher bits of the argument are ignored.  */
/* Encoders round to nearest even and saturate to +-max; NaN encodes to +0. f6_e2m3: bias 1,    */
/* max 7.5; f6_e3m2: bias 3, max 28; f4_e2m1: bias 1, max 6.                                     */
/* ------------------------------------------------------------------------------------------ */
float tbx_f6_e2m3_to_f32(uint8_t v);
float tbx_f6_e3m2_to_f32(uint8_t v);
float tbx_f4_e2m1_to_f32(uint8_t v);
uint8_t tbx_f32_to_f6_e2m3(float f);
uint8_t tbx_f32_to_f6_e3m2(float f);
uint8_t tbx_f32_to_f4_e2m1(float f);

/* ------------------------------------------------------------------------------------------ */
/* Worker threads (src/core/pool.c)                                                            */
/* ------------------------------------------------------------------------------------------ */
#define TBX_POOL_MAX 64            /* workers a pool starts at most */
#define TBX_THREADS_DEFAULT_MAX 8  /* the default thread count's cap */

/* A unit of work in the caller's memory (embed it as the first member of a job struct). */
typedef struct tbx_task {
    void (*run)(struct tbx_task *task);
    struct tbx_task *next;   /* pool-internal */
    bool done;               /* pool-internal: read it through tbx_pool_wait */
} tbx_task;
typedef struct tbx_pool tbx_pool;

/* Env TBX_THREADS when set (>= 1), else the online CPUs; at most TBX_THREADS_DEFAULT_MAX. */
int tbx_threads_default(void);
/* Starts `nthreads` workers (capped at TBX_POOL_MAX). NULL when nthreads <= 1 or no thread could
 * be started: every function below accepts NULL and then runs tasks inline, serially. */
tbx_pool *tbx_pool_start(const tbx_alloc *al, int nthreads);
int tbx_pool_threads(const tbx_pool *p);
/* Queues t (FIFO); with p NULL runs it before returning. */
void tbx_pool_submit(tbx_pool *p, tbx_task *t);
/* Has t run? block: wait until it has. */
bool tbx_pool_wait(tbx_pool *p, tbx_task *t, bool block);
/* Waits until every submitted task has run. */
void tbx_pool_drain(tbx_pool *p);
/* Drains, joins the workers and frees the pool; accepts NULL. */
void tbx_pool_stop(tbx_pool *p);

/* ------------------------------------------------------------------------------------------ */
/* Small text helpers (src/core/text.c)                                                        */
/* ------------------------------------------------------------------------------------------ */
/* Is [p, p+n) valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF)? On failure *bad gets the
 * index of the first invalid byte. */
bool tbx_utf8_valid(const char *p, size_t n, size_t *bad);
/* snprintf into a fixed buffer of a possibly binary name: printable ASCII kept, others \xNN,
 * truncated with "..." past `max` input bytes. */
void tbx_quote_bytes(char *dst, size_t cap, const char *p, size_t n, size_t max);
/* A JSON parser's error for text src[0, n) as message text: jansson's reason (`jtext`, its
 * " near '...'" token context dropped: jansson prints it cut at a NUL byte, control bytes raw)
 * followed by " near \"...\"": up to 16 bytes of src on each side of `pos` (the parser's
 * position), escaped by tbx_quote_bytes. */
void tbx_json_reason(char *dst, size_t cap, const char *jtext, const char *src, size_t n,
                     size_t pos);

#endif /* TBX_CORE_H */
