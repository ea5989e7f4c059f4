/*
 * describe.c - the description of an open file (tbx_file_describe): the document `tbx info
 * --json` prints and Python's info() returns (docs/cli.md), built here once from the common
 * model, plus the driver's own member (tbx_driver.describe, under its row's describe_key).
 *
 * The document is handed over piece by piece (tbx_describe_part), never built whole: a member
 * whose size follows from the input (files, size variables, metadata, tensors, sections, a
 * driver's table) comes one item at a time, so describing a file of a million tensors holds
 * one tensor's description at a time. Each piece is a tbx_value built in an arena (bump
 * allocation in chunks taken from the handle's allocator, reset after every piece): no
 * allocation per node, nothing left behind. Metadata values are the handle's own (borrowed);
 * with TBX_DESCRIBE_TYPES each is wrapped as {"type", "elem" | "dtype", "shape", "value"}
 * (the value copied into the arena for that one piece).
 */
#include "model.h"

#include <inttypes.h>
#include <stdio.h>

/* ------------------------------------------------------------------------------------------ */
/* The arena                                                                                   */
/* ------------------------------------------------------------------------------------------ */
#define ARENA_CHUNK ((size_t)64 << 10)
#define ARENA_ALIGN 16u

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t size;   /* bytes of data after the header */
    size_t used;
    size_t last;   /* offset of the last allocation (realloc in place, free of the last) */
} arena_chunk;

#define ARENA_HDR (((sizeof(arena_chunk) + ARENA_ALIGN - 1) / ARENA_ALIGN) * ARENA_ALIGN)

struct tbx_describer {
    const tbx_file *f;
    const tbx_alloc *fal;     /* the handle's allocator: the arena's chunks */
    tbx_alloc al;             /* the arena: every value of a piece is built with it */
    arena_chunk *chunks;      /* current chunk first; the last one is kept across resets */
    uint32_t flags;
    tbx_describe_fn fn;
    void *ud;
    tbx_status sticky;        /* the first failure while building a piece (TBX_E_NOMEM) */
    /* the driver's member (tbx_driver.describe) */
    const char *key;
    bool begun, put;
    tbx_status cb_status;     /* what the caller's callback returned, when it stopped us */
};

static uint8_t *chunk_data(arena_chunk *c) { return (uint8_t *)c + ARENA_HDR; }

static void *arena_alloc(void *ud, size_t n) {
    tbx_describer *d = ud;
    size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need < n) return NULL;
    arena_chunk *c = d->chunks;
    if (!c || c->size - c->used < need) {
        size_t size = need > ARENA_CHUNK ? need : ARENA_CHUNK;
        if (size > SIZE_MAX - ARENA_HDR) return NULL;
        c = tbx_malloc(d->fal, ARENA_HDR + size);
        if (!c) return NULL;
        c->size = size;
        c->used = 0;
        c->last = 0;
        c->next = d->chunks;
        d->chunks = c;
    }
    c->last = c->used;
    c->used += need;
    return chunk_data(c) + c->last;
}

static void *arena_realloc(void *ud, void *p, size_t old_n, size_t new_n) {
    tbx_describer *d = ud;
    arena_chunk *c = d->chunks;
    if (c && p == chunk_data(c) + c->last) { /* the last allocation: grow or shrink in place */
        size_t need = (new_n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
        if (need >= new_n && need <= c->size - c->last) {
            c->used = c->last + need;
            return p;
        }
    }
    if (new_n <= old_n) return p;
    void *q = arena_alloc(ud, new_n);
    if (q) memcpy(q, p, old_n);
    return q;
}

static void arena_free(void *ud, void *p, size_t n) {
    (void)n;
    tbx_describer *d = ud;
    arena_chunk *c = d->chunks;
    if (c && p == chunk_data(c) + c->last) c->used = c->last; /* the last one: given back */
}

/* After a piece: every chunk but the oldest freed, the oldest emptied. */
static void arena_reset(tbx_describer *d) {
    while (d->chunks && d->chunks->next) {
        arena_chunk *c = d->chunks;
        d->chunks = c->next;
        tbx_free(d->fal, c, ARENA_HDR + c->size);
    }
    if (d->chunks) d->chunks->used = d->chunks->last = 0;
    d->sticky = TBX_OK;
}

static void arena_free_all(tbx_describer *d) {
    arena_reset(d);
    if (d->chunks) tbx_free(d->fal, d->chunks, ARENA_HDR + d->chunks->size);
    d->chunks = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Building values (sticky failure: after one, every helper does nothing)                      */
/* ------------------------------------------------------------------------------------------ */
static tbx_value *oom(tbx_describer *d) {
    d->sticky = TBX_E_NOMEM;
    return NULL;
}

const tbx_alloc *tbx_desc_alloc(tbx_describer *d) { return &d->al; }

tbx_value *tbx_desc_new(tbx_describer *d, tbx_value_type t) {
    if (d->sticky) return NULL;
    tbx_value *v = tbx_val_new(&d->al, t);
    return v ? v : oom(d);
}

tbx_value *tbx_desc_map(tbx_describer *d) { return tbx_desc_new(d, TBX_V_MAP); }

tbx_value *tbx_desc_list(tbx_describer *d) { return tbx_desc_new(d, TBX_V_ARRAY); }

tbx_value *tbx_desc_u64_value(tbx_describer *d, uint64_t u) {
    tbx_value *v = tbx_desc_new(d, TBX_V_U64);
    if (v) v->v.u = u;
    return v;
}

tbx_value *tbx_desc_str_value(tbx_describer *d, const char *s, size_t n) {
    if (d->sticky) return NULL;
    tbx_value *v = tbx_val_string(&d->al, TBX_V_STRING, s ? s : "", s ? n : 0);
    return v ? v : oom(d);
}

/* Room for n more members (MAP) or items (ARRAY) of a pointer container. */
static bool room(tbx_describer *d, tbx_value *c, bool keys) {
    size_t n = c->v.a.n;
    if (n < c->v.a.cap) return true;
    size_t cap = c->v.a.cap ? 2 * c->v.a.cap : 8;
    tbx_value **items = tbx_realloc(&d->al, c->v.a.items, c->v.a.cap * sizeof *items,
                                    cap * sizeof *items);
    if (!items) return false;
    c->v.a.items = items;
    if (keys) {
        char **k = tbx_realloc(&d->al, c->v.a.keys, c->v.a.cap * sizeof *k, cap * sizeof *k);
        if (!k) return false;
        c->v.a.keys = k;
        size_t *kl = tbx_realloc(&d->al, c->v.a.key_lens, c->v.a.cap * sizeof *kl,
                                 cap * sizeof *kl);
        if (!kl) return false;
        c->v.a.key_lens = kl;
    }
    c->v.a.cap = cap;
    return true;
}

/* The keys of a piece are the describer's own, each set once: no duplicate search (a MAP
 * built with tbx_value_map_put searches its keys on every put). */
void tbx_desc_set(tbx_describer *d, tbx_value *map, const char *key, tbx_value *v) {
    if (d->sticky || !map || !v) { /* NULL: a value that could not be made */
        if (!d->sticky) d->sticky = TBX_E_NOMEM;
        return;
    }
    if (map->type != TBX_V_MAP || v->al != &d->al) { /* not the describer's map or value */
        d->sticky = TBX_E_INVALID_ARG;
        return;
    }
    size_t kl = strlen(key);
    char *k = room(d, map, true) ? tbx_memdup0(&d->al, key, kl) : NULL;
    if (!k) {
        oom(d);
        return;
    }
    map->v.a.keys[map->v.a.n] = k;
    map->v.a.key_lens[map->v.a.n] = kl;
    map->v.a.items[map->v.a.n++] = v;
}

void tbx_desc_push(tbx_describer *d, tbx_value *list, tbx_value *v) {
    if (d->sticky || !list || !v) {
        if (!d->sticky) d->sticky = TBX_E_NOMEM;
        return;
    }
    if (list->type != TBX_V_ARRAY || list->elem != TBX_V_NULL || list->v.a.packed ||
        list->v.a.soff || v->al != &d->al) { /* not a list of the describer's values */
        d->sticky = TBX_E_INVALID_ARG;
        return;
    }
    if (!room(d, list, false)) {
        oom(d);
        return;
    }
    list->v.a.items[list->v.a.n++] = v;
}

void tbx_desc_u64(tbx_describer *d, tbx_value *map, const char *key, uint64_t u) {
    tbx_desc_set(d, map, key, tbx_desc_u64_value(d, u));
}

void tbx_desc_str(tbx_describer *d, tbx_value *map, const char *key, const char *s) {
    tbx_desc_set(d, map, key, tbx_desc_str_value(d, s, s ? strlen(s) : 0));
}

static tbx_value *desc_bool(tbx_describer *d, bool b) {
    tbx_value *v = tbx_desc_new(d, TBX_V_BOOL);
    if (v) v->v.u = b;
    return v;
}

static tbx_value *desc_f64(tbx_describer *d, double x) {
    tbx_value *v = tbx_desc_new(d, TBX_V_F64);
    if (v) v->v.f = x;
    return v;
}

/* A copy of a handle's value in the arena (for a piece that must own it). */
static tbx_value *desc_clone(tbx_describer *d, const tbx_value *v) {
    if (d->sticky) return NULL;
    if (!v) return tbx_desc_new(d, TBX_V_NULL);
    tbx_value *c = tbx_val_clone(&d->al, v);
    return c ? c : oom(d);
}

/* ------------------------------------------------------------------------------------------ */
/* Handing pieces over                                                                         */
/* ------------------------------------------------------------------------------------------ */
static tbx_status hand_over(tbx_describer *d, tbx_describe_event ev, tbx_value_type container,
                            const char *key, size_t key_len, const tbx_value *v, tbx_error *err) {
    if (d->sticky) {
        tbx_status st = d->sticky;
        arena_reset(d);
        if (st == TBX_E_NOMEM) return tbx_err_nomem(err, "file description");
        return tbx_err(err, st, TBX_NO_OFFSET, "describe", "the file's description: %s",
                       tbx_strerror(st));
    }
    tbx_describe_part p;
    memset(&p, 0, sizeof p);
    p.event = ev;
    p.container = container;
    p.key = key;
    p.key_len = key ? key_len : 0;
    p.value = v;
    tbx_status st = d->fn(d->ud, &p);
    arena_reset(d);
    if (st != TBX_OK) {
        d->cb_status = st;
        return tbx_err(err, st, TBX_NO_OFFSET, "describe",
                       "the file's description was stopped by its receiver (%s)",
                       tbx_status_name(st));
    }
    return TBX_OK;
}

static tbx_status member(tbx_describer *d, const char *key, const tbx_value *v, tbx_error *err) {
    return hand_over(d, TBX_DESCRIBE_MEMBER, TBX_V_NULL, key, strlen(key), v, err);
}

static tbx_status begin(tbx_describer *d, const char *key, tbx_value_type c, tbx_error *err) {
    return hand_over(d, TBX_DESCRIBE_BEGIN, c, key, strlen(key), NULL, err);
}

static tbx_status item(tbx_describer *d, tbx_value_type c, const char *key, size_t key_len,
                       const tbx_value *v, tbx_error *err) {
    return hand_over(d, TBX_DESCRIBE_ITEM, c, key, key_len, v, err);
}

static tbx_status end(tbx_describer *d, const char *key, tbx_value_type c, tbx_error *err) {
    return hand_over(d, TBX_DESCRIBE_END, c, key, strlen(key), NULL, err);
}

/* The driver's member: one value, or the items of an array. */
tbx_status tbx_desc_put(tbx_describer *d, tbx_value *v, tbx_error *err) {
    if (d->begun || d->put) {
        arena_reset(d);
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "describe",
                       "the %s driver gave its member \"%s\" twice", d->f->drv->name, d->key);
    }
    if (!v && !d->sticky) d->sticky = TBX_E_NOMEM;
    d->put = true;
    return member(d, d->key, v, err);
}

tbx_status tbx_desc_item(tbx_describer *d, tbx_value *v, tbx_error *err) {
    if (d->put) {
        arena_reset(d);
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "describe",
                       "the %s driver gave its member \"%s\" whole and item by item",
                       d->f->drv->name, d->key);
    }
    if (!d->begun) {
        /* the piece being built stays in the arena through BEGIN: keep it */
        tbx_status sticky = d->sticky;
        tbx_describe_part p;
        memset(&p, 0, sizeof p);
        p.event = TBX_DESCRIBE_BEGIN;
        p.container = TBX_V_ARRAY;
        p.key = d->key;
        p.key_len = strlen(d->key);
        tbx_status st = d->fn(d->ud, &p);
        if (st != TBX_OK) {
            arena_reset(d);
            d->cb_status = st;
            return tbx_err(err, st, TBX_NO_OFFSET, "describe",
                           "the file's description was stopped by its receiver (%s)",
                           tbx_status_name(st));
        }
        d->sticky = sticky;
        d->begun = true;
    }
    if (!v && !d->sticky) d->sticky = TBX_E_NOMEM;
    return item(d, TBX_V_ARRAY, NULL, 0, v, err);
}

/* ------------------------------------------------------------------------------------------ */
/* The document                                                                                */
/* ------------------------------------------------------------------------------------------ */
static const char *dtype_name(const tbx_file *f, tbx_dtype dt) {
    const tbx_dtype_info *in = tbx_file_dtype(f, dt);
    return in && in->name ? in->name : "invalid";
}

/* A metadata value as --types shows it: {"type", "elem" | "dtype" + "shape", "value"}. */
static tbx_value *typed(tbx_describer *d, const tbx_value *v) {
    tbx_value *m = tbx_desc_map(d);
    tbx_value_type t = tbx_value_type_of(v);
    tbx_desc_str(d, m, "type", tbx_value_type_name(t));
    if (t == TBX_V_ARRAY) {
        tbx_desc_str(d, m, "elem", tbx_value_type_name(tbx_value_elem_type(v)));
    } else if (t == TBX_V_NDARRAY) {
        tbx_dtype dt = TBX_DT_INVALID;
        uint32_t ndim = 0;
        const uint64_t *shape = NULL;
        if (tbx_value_ndarray(v, &dt, &ndim, &shape) == TBX_OK) {
            tbx_desc_str(d, m, "dtype", dtype_name(d->f, dt));
            tbx_value *sh = tbx_desc_list(d);
            for (uint32_t k = 0; k < ndim && shape; k++)
                tbx_desc_push(d, sh, tbx_desc_u64_value(d, shape[k]));
            tbx_desc_set(d, m, "shape", sh);
        }
    }
    tbx_desc_set(d, m, "value", desc_clone(d, v));
    return m;
}

/* A scale / zero member of "quant". */
static tbx_value *quant_param(tbx_describer *d, uint64_t i, const tbx_quant_param *p) {
    const tbx_file *f = d->f;
    tbx_value *m = tbx_desc_map(d);
    tbx_desc_str(d, m, "scope", tbx_quant_scope_name(p->scope));
    if (p->scope != TBX_QSCOPE_NONE) tbx_desc_str(d, m, "dtype", dtype_name(f, p->dtype));
    if (p->scope == TBX_QSCOPE_CHANNEL) tbx_desc_u64(d, m, "axis", p->axis);
    if (p->count) tbx_desc_u64(d, m, "count", p->count);
    tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
    if (p->component >= 0 && tbx_component_info_get(f, i, (uint32_t)p->component, &ci) == TBX_OK)
        tbx_desc_str(d, m, "component", ci.name ? ci.name : "");
    if (p->values && !d->sticky) {
        /* f32 scales and i32 zero points, packed (4 bytes each, however many the header has);
         * values of another dtype have no rendering: nulls */
        tbx_value *vals;
        if ((p->dtype == TBX_DT_F32 || p->dtype == TBX_DT_I32) && p->count <= SIZE_MAX / 4) {
            vals = tbx_val_packed_array(&d->al, p->dtype == TBX_DT_F32 ? TBX_V_F32 : TBX_V_I32,
                                        (size_t)p->count);
            if (vals && p->count) memcpy(vals->v.a.packed, p->values, (size_t)p->count * 4);
            if (!vals) oom(d);
        } else {
            vals = tbx_desc_list(d);
            for (uint64_t k = 0; k < p->count && !d->sticky; k++)
                tbx_desc_push(d, vals, tbx_desc_new(d, TBX_V_NULL));
        }
        tbx_desc_set(d, m, "values", vals);
    }
    return m;
}

/* The "quant" object of tensor i, NULL (nothing set) when it is not quantized. */
static tbx_value *quant_obj(tbx_describer *d, uint64_t i) {
    const tbx_file *f = d->f;
    tbx_quant_info q;
    memset(&q, 0, sizeof q);
    q.struct_size = sizeof q;
    if (tbx_tensor_quant_get(f, i, &q) != TBX_OK) return NULL;
    tbx_value *m = tbx_desc_map(d);
    tbx_desc_str(d, m, "method", tbx_quant_method_name(q.method));
    tbx_desc_str(d, m, "code_dtype", dtype_name(f, q.code_dtype));
    tbx_desc_u64(d, m, "bits", q.bits);
    tbx_desc_set(d, m, "signed", desc_bool(d, q.code_signed != 0));
    tbx_desc_u64(d, m, "block_size", q.block_size);
    tbx_desc_u64(d, m, "super_block_size", q.super_block_size);
    tbx_desc_set(d, m, "scale", quant_param(d, i, &q.scale));
    tbx_desc_set(d, m, "zero", quant_param(d, i, &q.zero));
    tbx_desc_str(d, m, "domain", tbx_quant_domain_name(q.domain));
    tbx_value *clip;
    if (q.has_clip) {
        clip = tbx_desc_list(d);
        tbx_desc_push(d, clip, desc_f64(d, q.clip_min));
        tbx_desc_push(d, clip, desc_f64(d, q.clip_max));
    } else {
        clip = tbx_desc_new(d, TBX_V_NULL);
    }
    tbx_desc_set(d, m, "clip", clip);
    tbx_desc_set(d, m, "params", !q.params ? tbx_desc_new(d, TBX_V_NULL)
                                 : (d->flags & TBX_DESCRIBE_TYPES) ? typed(d, q.params)
                                                                   : desc_clone(d, q.params));
    return m;
}

/* Is tensor i stored as one raw dense component without a digest, or without data (the
 * five-key object)? */
static bool is_plain(const tbx_file *f, uint64_t i, const tbx_tensor_info *ti) {
    if (ti->layout != TBX_LAYOUT_DENSE) return false;
    if (ti->ncomponents == 0) return true;
    if (ti->ncomponents > 1) return false;
    tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
    if (tbx_component_info_get(f, i, 0, &ci) != TBX_OK) return true;
    return ci.encoding == TBX_ENC_RAW && ci.digest == NULL;
}

static tbx_value *tensor_obj(tbx_describer *d, uint64_t i) {
    const tbx_file *f = d->f;
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    if (tbx_tensor_info_get(f, i, &ti) != TBX_OK) return NULL;
    tbx_value *m = tbx_desc_map(d);
    tbx_desc_set(d, m, "name", tbx_desc_str_value(d, ti.name, ti.name_len));
    tbx_desc_str(d, m, "dtype", dtype_name(f, ti.dtype));
    tbx_value *sh = tbx_desc_list(d);
    for (uint32_t k = 0; k < ti.ndim && ti.shape; k++)
        tbx_desc_push(d, sh, tbx_desc_u64_value(d, ti.shape[k]));
    tbx_desc_set(d, m, "shape", sh);
    tbx_desc_u64(d, m, "offset", ti.offset);
    tbx_desc_u64(d, m, "nbytes", ti.nbytes);
    if (ti.flags & TBX_TENSOR_UNREADABLE) tbx_desc_set(d, m, "unreadable", desc_bool(d, true));
    if (!is_plain(f, i, &ti)) {
        const char *ln = tbx_layout_name(ti.layout);
        tbx_desc_str(d, m, "layout", ln ? ln : "?");
        tbx_value *comps = tbx_desc_list(d);
        for (uint32_t c = 0; c < ti.ncomponents && !d->sticky; c++) {
            tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
            if (tbx_component_info_get(f, i, c, &ci) != TBX_OK) continue;
            tbx_value *cm = tbx_desc_map(d);
            tbx_desc_str(d, cm, "name", ci.name ? ci.name : "");
            tbx_desc_str(d, cm, "dtype", dtype_name(f, ci.dtype));
            tbx_desc_u64(d, cm, "offset", ci.offset);
            tbx_desc_u64(d, cm, "stored_bytes", ci.stored_bytes);
            tbx_desc_u64(d, cm, "nbytes", ci.nbytes);
            const tbx_driver *const own[] = {f->drv, NULL}; /* its row's encodings */
            tbx_desc_str(d, cm, "encoding", tbx_encoding_name_in(own, ci.encoding));
            if (ci.digest) tbx_desc_str(d, cm, "digest", ci.digest);
            tbx_desc_push(d, comps, cm);
        }
        tbx_desc_set(d, m, "components", comps);
    }
    tbx_value *q = quant_obj(d, i);
    if (q) tbx_desc_set(d, m, "quant", q);
    return m;
}

static tbx_status describer_init(tbx_describer *d, const tbx_file *f, uint32_t flags,
                                 tbx_describe_fn fn, void *ud, tbx_error *err) {
    if (!f || !f->drv || !fn)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, f ? "fn" : "file", "NULL argument");
    if (flags & ~(uint32_t)TBX_DESCRIBE_TYPES)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "flags",
                       "unknown describe flags 0x%" PRIx32, flags & ~(uint32_t)TBX_DESCRIBE_TYPES);
    memset(d, 0, sizeof *d);
    d->f = f;
    d->fal = &f->al;
    d->flags = flags;
    d->fn = fn;
    d->ud = ud;
    const tbx_allocator arena = {arena_alloc, arena_realloc, arena_free, d};
    tbx_alloc_init(&d->al, &arena);
    return TBX_OK;
}

tbx_status tbx_tensor_describe(const tbx_file *f, uint64_t i, uint32_t flags, tbx_describe_fn fn,
                               void *ud, tbx_error *err) {
    tbx_describer d;
    tbx_status st = describer_init(&d, f, flags, fn, ud, err);
    if (st != TBX_OK) return st;
    if (i >= f->ntensors)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                       "tensor index %" PRIu64 " out of range (file has %zu tensors)", i,
                       f->ntensors);
    tbx_value *t = tensor_obj(&d, i);
    st = item(&d, TBX_V_ARRAY, NULL, 0, t, err);
    arena_free_all(&d);
    if (st != TBX_OK && d.cb_status != TBX_OK) return d.cb_status;
    return st;
}

tbx_status tbx_file_describe(const tbx_file *f, uint32_t flags, tbx_describe_fn fn, void *ud,
                             tbx_error *err) {
    tbx_describer d;
    tbx_status st = describer_init(&d, f, flags, fn, ud, err);
    if (st != TBX_OK) return st;

    /* format, version */
    st = member(&d, "format", tbx_desc_str_value(&d, f->drv->name, strlen(f->drv->name)), err);
    if (st == TBX_OK) st = member(&d, "version", tbx_desc_u64_value(&d, f->version), err);

    /* a set opened as one file: its files, the first first */
    uint64_t nparts = tbx_file_part_count(f);
    if (st == TBX_OK && nparts > 1) {
        st = begin(&d, "files", TBX_V_ARRAY, err);
        for (uint64_t i = 0; st == TBX_OK && i < nparts; i++) {
            uint64_t size = 0;
            const char *pp = tbx_file_part_path(f, i, &size);
            tbx_value *m = tbx_desc_map(&d);
            tbx_desc_set(&d, m, "path", pp ? tbx_desc_str_value(&d, pp, strlen(pp))
                                           : tbx_desc_new(&d, TBX_V_NULL));
            tbx_desc_u64(&d, m, "size", size);
            st = item(&d, TBX_V_ARRAY, NULL, 0, m, err);
        }
        if (st == TBX_OK) st = end(&d, "files", TBX_V_ARRAY, err);
    }

    /* size variables: for a format that has them (possibly none) and any file that has some */
    if (st == TBX_OK && (f->nsizevars || (tbx_driver_caps(f->drv) & TBX_FCAP_SIZEVARS))) {
        st = begin(&d, "sizevars", TBX_V_MAP, err);
        for (size_t i = 0; st == TBX_OK && i < f->nsizevars; i++) {
            const tbx_sizevar *v = &f->sizevars[i];
            st = item(&d, TBX_V_MAP, v->name, v->name_len, tbx_desc_u64_value(&d, v->value), err);
        }
        if (st == TBX_OK) st = end(&d, "sizevars", TBX_V_MAP, err);
    }

    /* metadata, in file order: the handle's values, or their typed wrappers */
    if (st == TBX_OK) st = begin(&d, "metadata", TBX_V_MAP, err);
    for (size_t i = 0; st == TBX_OK && i < f->nmeta; i++) {
        const tbx_meta_entry *e = &f->meta[i];
        const tbx_value *v = (flags & TBX_DESCRIBE_TYPES) ? typed(&d, e->value) : e->value;
        st = item(&d, TBX_V_MAP, e->key, e->key_len, v, err);
    }
    if (st == TBX_OK) st = end(&d, "metadata", TBX_V_MAP, err);

    /* tensors, in file order */
    if (st == TBX_OK) st = begin(&d, "tensors", TBX_V_ARRAY, err);
    for (uint64_t i = 0; st == TBX_OK && i < f->ntensors; i++) {
        tbx_value *t = tensor_obj(&d, i);
        if (t || d.sticky) st = item(&d, TBX_V_ARRAY, NULL, 0, t, err);
    }
    if (st == TBX_OK) st = end(&d, "tensors", TBX_V_ARRAY, err);

    /* sections */
    if (st == TBX_OK && f->nsections) {
        st = begin(&d, "sections", TBX_V_ARRAY, err);
        for (size_t i = 0; st == TBX_OK && i < f->nsections; i++) {
            const tbx_section *s = &f->sections[i];
            tbx_value *m = tbx_desc_map(&d);
            tbx_desc_str(&d, m, "name", s->name ? s->name : "");
            tbx_desc_u64(&d, m, "type", s->type);
            tbx_desc_u64(&d, m, "offset", s->offset);
            tbx_desc_u64(&d, m, "size", s->size);
            st = item(&d, TBX_V_ARRAY, NULL, 0, m, err);
        }
        if (st == TBX_OK) st = end(&d, "sections", TBX_V_ARRAY, err);
    }

    /* the format's own member, last */
    if (st == TBX_OK && f->drv->describe && f->drv->describe_key) {
        d.key = f->drv->describe_key;
        st = f->drv->describe(f, &d, err);
        if (st == TBX_OK && d.begun) st = end(&d, d.key, TBX_V_ARRAY, err);
    }
    arena_free_all(&d);
    if (st != TBX_OK && d.cb_status != TBX_OK) return d.cb_status;
    return st;
}
