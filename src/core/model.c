/*
 * model.c - building the common model of an open file (used by the drivers while they open):
 * tbx_file_add_meta / _add_tensor / _add_section, problems, and the model's own storage.
 *
 * These helpers enforce what every format shares: limits, duplicate names (src/core/names.c),
 * overflow-checked element counts, names without NUL. They sit below the drivers and above the
 * foundation: they never call a driver, the registry or the reading façade (file.c); a dtype is
 * checked against the core table and the handle's own driver's dtypes only.
 */
#include "model.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

/* ------------------------------------------------------------------------------------------ */
/* Model building (used by drivers)                                                            */
/* ------------------------------------------------------------------------------------------ */

static const char *meta_key_of(const void *ctx, uint64_t i, size_t *len) {
    const tbx_file *f = ctx;
    *len = f->meta[i].key_len;
    return f->meta[i].key;
}

static const char *tensor_key_of(const void *ctx, uint64_t i, size_t *len) {
    const tbx_file *f = ctx;
    *len = f->tensors[i].name_len;
    return f->tensors[i].name;
}

static const char *sizevar_key_of(const void *ctx, uint64_t i, size_t *len) {
    const tbx_file *f = ctx;
    *len = f->sizevars[i].name_len;
    return f->sizevars[i].name;
}

/* ------------------------------------------------------------------------------------------ */
/* The amplification budget                                                                    */
/* ------------------------------------------------------------------------------------------ */
uint64_t tbx_file_budget(const tbx_file *f, uint64_t *declared) {
    uint64_t d = f->src.size, b;
    for (size_t i = 0; i < f->nextra_src; i++)
        if (!tbx_add_u64(d, f->extra_src[i].size, &d)) d = UINT64_MAX;
    if (declared) *declared = d;
    if (!tbx_mul_u64(d, f->limits.meta_budget_per_byte, &b) ||
        !tbx_add_u64(b, f->limits.meta_budget_base, &b))
        b = UINT64_MAX;
    return b;
}

/* Does a total of `total` charged bytes fit? The budget is recomputed only when the last one
 * computed is passed (it only grows: sources are added, never dropped, while a handle opens). */
static bool budget_fits(tbx_file *f, uint64_t total) {
    if (total <= f->budget_cap) return true;
    f->budget_cap = tbx_file_budget(f, NULL);
    return total <= f->budget_cap;
}

static tbx_status budget_err(tbx_file *f, uint64_t need, uint64_t offset, const char *field,
                             tbx_error *err) {
    uint64_t declared, cap = tbx_file_budget(f, &declared);
    return tbx_err(err, TBX_E_LIMIT, offset, field ? field : "metadata",
                   "%s: the metadata, names and tables this input declares need more than its "
                   "budget of %" PRIu64 " bytes (meta_budget_per_byte %" PRIu64 " x %" PRIu64
                   " bytes of input + meta_budget_base %" PRIu64 "): %" PRIu64 " held, %" PRIu64
                   " more needed", field ? field : "metadata", cap,
                   f->limits.meta_budget_per_byte, declared, f->limits.meta_budget_base,
                   f->budget_used + f->budget_pending, need);
}

tbx_status tbx_file_charge(tbx_file *f, uint64_t bytes, uint64_t offset, const char *field,
                           tbx_error *err) {
    uint64_t total;
    if (!tbx_add_u64(f->budget_used, bytes, &total) ||
        !tbx_add_u64(total, f->budget_pending, &total) || !budget_fits(f, total))
        return budget_err(f, bytes, offset, field, err);
    f->budget_used += bytes;
    return TBX_OK;
}

void tbx_file_uncharge(tbx_file *f, uint64_t bytes) {
    f->budget_used = bytes < f->budget_used ? f->budget_used - bytes : 0;
}

tbx_status tbx_file_charge_pending(tbx_file *f, uint64_t bytes, uint64_t offset,
                                   const char *field, tbx_error *err) {
    uint64_t total;
    if (!tbx_add_u64(f->budget_pending, bytes, &total) ||
        !tbx_add_u64(total, f->budget_used, &total) || !budget_fits(f, total))
        return budget_err(f, bytes, offset, field, err);
    f->budget_pending += bytes;
    return TBX_OK;
}

tbx_status tbx_file_check_shared_data(tbx_file *f, tbx_error *err) {
    uint64_t declared, cap = tbx_file_budget(f, &declared), limit, sum = 0;
    if (!tbx_add_u64(cap, declared, &limit)) return TBX_OK; /* no budget */
    for (size_t i = 0; i < f->ntensors; i++) {
        const tbx_tensor *t = &f->tensors[i];
        for (uint32_t c = 0; c < t->ncomp; c++) {
            if (tbx_add_u64(sum, t->comp[c].stored_bytes, &sum) && sum <= limit) continue;
            char q[96];
            tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
            return tbx_err(err, TBX_E_LIMIT, t->comp[c].offset, "tensor.data",
                           "tensor \"%s\": the bytes of the tensors up to this one, counted once "
                           "per tensor (tensors share bytes), pass %" PRIu64 " (the input's %"
                           PRIu64 " bytes + the budget of meta_budget_per_byte %" PRIu64 " x them "
                           "+ meta_budget_base %" PRIu64 "): every conversion would copy them",
                           q, limit, declared, f->limits.meta_budget_per_byte,
                           f->limits.meta_budget_base);
        }
    }
    return TBX_OK;
}

/* What one metadata entry costs besides its value: the table slot, the key's copy, its slot in
 * the key index (8 bytes a slot at most 3/4 full, doubled while the table grows). */
static uint64_t meta_entry_cost(size_t key_len) {
    return sizeof(tbx_meta_entry) + (uint64_t)key_len + 1 + TBX_HEAP_OVERHEAD + 16;
}

tbx_status tbx_file_add_meta(tbx_file *f, const char *key, size_t key_len, tbx_value *value,
                             uint64_t offset, tbx_error *err) {
    char q[96];
    /* the value's real footprint replaces what its reader expected it to cost */
    f->budget_pending = 0;
    tbx_status bst = tbx_file_charge(f, meta_entry_cost(key_len) + tbx_val_footprint(value),
                                     offset, "metadata", err);
    if (bst != TBX_OK) {
        tbx_val_free(value);
        return bst;
    }
    if (f->nmeta >= f->limits.max_metadata_entries) {
        tbx_val_free(value);
        return tbx_err(err, TBX_E_LIMIT, offset, "metadata",
                       "more than %llu metadata entries (limit max_metadata_entries)",
                       (unsigned long long)f->limits.max_metadata_entries);
    }
    if (!tbx_grow(&f->al, (void **)&f->meta, &f->cap_meta, f->nmeta + 1, sizeof *f->meta)) {
        tbx_val_free(value);
        return tbx_err_nomem(err, "metadata table");
    }
    char *k = tbx_memdup0(&f->al, key, key_len);
    if (!k) { tbx_val_free(value); return tbx_err_nomem(err, "metadata key"); }
    tbx_meta_entry *e = &f->meta[f->nmeta];
    e->key = k;
    e->key_len = key_len;
    e->value = value;
    e->borrowed = false;
    uint64_t earlier = 0;
    tbx_status st = tbx_names_insert(&f->meta_names, f->nmeta, &earlier);
    if (st != TBX_OK) {
        tbx_free(&f->al, k, key_len + 1);
        tbx_val_free(value);
        if (st == TBX_E_NOMEM) return tbx_err_nomem(err, "metadata index");
        tbx_quote_bytes(q, sizeof q, key, key_len, 64);
        return tbx_err(err, TBX_E_DUPLICATE, offset, "metadata.key",
                       "duplicate metadata key \"%s\" (first defined as entry %llu)", q,
                       (unsigned long long)earlier);
    }
    f->nmeta++;
    return TBX_OK;
}

/* Bytes of a tensor's block: its components (at least one slot), its shape, its name + NUL. */
static size_t tensor_block_size(uint32_t ncomp, uint32_t ndim, size_t name_len) {
    return (ncomp ? ncomp : 1) * sizeof(tbx_component) + (size_t)ndim * sizeof(uint64_t) +
           name_len + 1;
}

/* What a tensor costs the budget: its table slot, its block (8-aligned) and its slot in the
 * name index. */
static uint64_t tensor_cost(size_t block) {
    return sizeof(tbx_tensor) + ((block + 7) & ~(size_t)7) + 16;
}

struct tbx_chunk {
    struct tbx_chunk *next;
    size_t size;             /* bytes of the chunk, this header included */
};
#define TBX_CHUNK_MIN ((size_t)4 << 10)
#define TBX_CHUNK_MAX ((size_t)1 << 20)

/* `bytes` (8-aligned) from the handle's chunks; NULL on OOM. */
static void *chunk_alloc(tbx_file *f, size_t bytes) {
    bytes = (bytes + 7) & ~(size_t)7;
    if (bytes > f->chunk_left) {
        size_t size = f->chunks ? f->chunks->size * 2 : TBX_CHUNK_MIN;
        if (size > TBX_CHUNK_MAX) size = TBX_CHUNK_MAX;
        size_t hdr = (sizeof(struct tbx_chunk) + 7) & ~(size_t)7;
        if (size - hdr < bytes) size = hdr + bytes;
        struct tbx_chunk *c = tbx_malloc(&f->al, size);
        if (!c) return NULL;
        c->size = size;
        c->next = f->chunks;
        f->chunks = c;
        f->chunk_ptr = (uint8_t *)c + hdr;
        f->chunk_left = size - hdr;
    }
    void *p = f->chunk_ptr;
    f->chunk_ptr += bytes;
    f->chunk_left -= bytes;
    return p;
}

/* Gives back the last chunk_alloc of `bytes` (the tensor was refused). */
static void chunk_unalloc(tbx_file *f, void *p, size_t bytes) {
    bytes = (bytes + 7) & ~(size_t)7;
    if ((uint8_t *)p + bytes == f->chunk_ptr) {
        f->chunk_ptr = p;
        f->chunk_left += bytes;
    }
}

const tbx_dtype_info *tbx_file_dtype(const tbx_file *f, tbx_dtype dtype) {
    const tbx_driver *const own[] = {f->drv, NULL};
    return tbx_dtype_get_in(own, dtype);
}

tbx_status tbx_file_add_tensor(tbx_file *f, const char *name, size_t name_len, tbx_dtype dtype,
                               const uint64_t *shape, uint32_t ndim, uint32_t ncomp,
                               uint64_t offset, tbx_tensor **out, tbx_error *err) {
    char qb[96];
    /* the quoted name is rendered only when an error is reported (it costs on every open) */
#define QNAME (tbx_quote_bytes(qb, sizeof qb, name, name_len, 64), qb)
    if (f->ntensors >= f->limits.max_tensors)
        return tbx_err(err, TBX_E_LIMIT, offset, "tensors",
                       "more than %llu tensors (limit max_tensors)",
                       (unsigned long long)f->limits.max_tensors);
    if (!tbx_file_dtype(f, dtype))
        return tbx_err(err, TBX_E_FORMAT, offset, "tensor.dtype", "tensor \"%s\": invalid dtype %d",
                       QNAME, (int)dtype);
    if (ndim > f->limits.max_ndim)
        return tbx_err(err, TBX_E_LIMIT, offset, "tensor.shape",
                       "tensor \"%s\": %u dimensions exceed the limit max_ndim = %u", QNAME, ndim,
                       f->limits.max_ndim);
    if (ncomp > UINT8_MAX)
        return tbx_err(err, TBX_E_LIMIT, offset, "tensor",
                       "tensor \"%s\": %u components (at most 255)", QNAME, ncomp);
    if (name_len > f->limits.max_string_len || name_len > UINT32_MAX)
        return tbx_err(err, TBX_E_LIMIT, offset, "tensor.name",
                       "tensor name of %zu bytes exceeds max_string_len", name_len);
    if (memchr(name, 0, name_len))
        return tbx_err(err, TBX_E_FORMAT, offset, "tensor.name",
                       "tensor name \"%s\" contains a NUL byte", QNAME);
    uint64_t nelems = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (!tbx_mul_u64(nelems, shape[d], &nelems))
            return tbx_err(err, TBX_E_OVERFLOW, offset, "tensor.shape",
                           "tensor \"%s\": element count overflows 64 bits at dimension %u",
                           QNAME, d);
    }
    /* One block per tensor: components, shape, name (a table of a million tensors pays one
     * allocation's overhead per tensor, not three). */
    size_t bytes = tensor_block_size(ncomp, ndim, name_len);
    tbx_status bst = tbx_file_charge(f, tensor_cost(bytes), offset,
                                     name_len >= (size_t)ndim * 8 ? "tensor.name" : "tensor.shape",
                                     err);
    if (bst != TBX_OK) return bst;
    if (!tbx_grow(&f->al, (void **)&f->tensors, &f->cap_tensors, f->ntensors + 1,
                  sizeof *f->tensors))
        return tbx_err_nomem(err, "tensor table");
    tbx_tensor *t = &f->tensors[f->ntensors];
    memset(t, 0, sizeof *t);
    uint8_t *blk = chunk_alloc(f, bytes);
    if (!blk) return tbx_err_nomem(err, "tensor");
    memset(blk, 0, (ncomp ? ncomp : 1) * sizeof(tbx_component));
    t->comp = (tbx_component *)blk;
    t->shape = (uint64_t *)(blk + (ncomp ? ncomp : 1) * sizeof(tbx_component));
    t->name = (char *)(t->shape + ndim);
    memcpy(t->name, name, name_len);
    t->name[name_len] = 0;
    t->name_len = (uint32_t)name_len;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) memcpy(t->shape, shape, ndim * sizeof(uint64_t));
    t->nelems = nelems;
    t->layout = TBX_LAYOUT_DENSE;
    t->ncomp = (uint8_t)ncomp;
    uint64_t earlier = 0;
    tbx_status st = tbx_names_insert(&f->tensor_names, f->ntensors, &earlier);
    if (st != TBX_OK) {
        chunk_unalloc(f, blk, bytes);
        if (st == TBX_E_NOMEM) return tbx_err_nomem(err, "tensor index");
        return tbx_err(err, TBX_E_DUPLICATE, offset, "tensor.name",
                       "duplicate tensor name \"%s\" (first defined as tensor %llu)", QNAME,
                       (unsigned long long)earlier);
    }
    f->ntensors++;
    if (out) *out = t;
    return TBX_OK;
}
#undef QNAME

tbx_status tbx_file_reserve_tensors(tbx_file *f, size_t n, tbx_error *err) {
    if (n > f->limits.max_tensors) n = (size_t)f->limits.max_tensors; /* add_tensor reports it */
    /* no more room than the budget lets tensors take: add_tensor reports the one that does not
     * fit, with its offset */
    uint64_t cap = tbx_file_budget(f, NULL), used = f->budget_used + f->budget_pending;
    uint64_t fit = cap > used ? (cap - used) / tensor_cost(tensor_block_size(1, 0, 0)) : 0;
    if (n > fit) n = (size_t)fit;
    if (n > f->cap_tensors) {
        size_t bytes;
        if (__builtin_mul_overflow(n, sizeof *f->tensors, &bytes))
            return tbx_err_nomem(err, "tensor table");
        void *p = f->tensors ? tbx_realloc(&f->al, f->tensors, f->cap_tensors * sizeof *f->tensors,
                                           bytes)
                             : tbx_malloc(&f->al, bytes);
        if (!p) return tbx_err_nomem(err, "tensor table");
        f->tensors = p;
        f->cap_tensors = n;
    }
    if (tbx_names_reserve(&f->tensor_names, n) != TBX_OK) return tbx_err_nomem(err, "tensor index");
    return TBX_OK;
}

tbx_status tbx_file_add_sizevar(tbx_file *f, const char *name, size_t name_len, uint64_t value,
                                uint64_t offset, tbx_error *err) {
    /* its record (the array may be twice the records while it grows), name, index slot */
    tbx_status st = tbx_file_charge(f, 2 * sizeof(tbx_sizevar) + (uint64_t)name_len + 1 +
                                           TBX_HEAP_OVERHEAD + 16,
                                    offset, "sizevars.name", err);
    if (st != TBX_OK) return st;
    if (!tbx_grow(&f->al, (void **)&f->sizevars, &f->cap_sizevars, f->nsizevars + 1,
                  sizeof *f->sizevars))
        return tbx_err_nomem(err, "size variables");
    tbx_sizevar *v = &f->sizevars[f->nsizevars];
    v->name = tbx_memdup0(&f->al, name, name_len);
    if (!v->name) return tbx_err_nomem(err, "size variable");
    v->name_len = name_len;
    v->value = value;
    uint64_t earlier = 0;
    st = tbx_names_insert(&f->sizevar_names, f->nsizevars, &earlier);
    if (st != TBX_OK) {
        tbx_free(&f->al, v->name, name_len + 1);
        if (st == TBX_E_NOMEM) return tbx_err_nomem(err, "size variable index");
        char q[96];
        tbx_quote_bytes(q, sizeof q, name, name_len, 64);
        return tbx_err(err, TBX_E_DUPLICATE, offset, "sizevars.name",
                       "duplicate size variable \"%s\" (first defined as entry %" PRIu64 ")", q,
                       earlier);
    }
    f->nsizevars++;
    return TBX_OK;
}

tbx_status tbx_file_add_section(tbx_file *f, const char *name, uint32_t type, uint64_t offset,
                                uint64_t size, tbx_error *err) {
    return tbx_file_add_section_in(f, name, type, 0, offset, size, err);
}

tbx_status tbx_file_add_section_in(tbx_file *f, const char *name, uint32_t type, uint32_t src,
                                   uint64_t offset, uint64_t size, tbx_error *err) {
    tbx_status bst = tbx_file_charge(f, sizeof(tbx_section) + strlen(name) + 1 + TBX_HEAP_OVERHEAD,
                                     offset, "section", err);
    if (bst != TBX_OK) return bst;
    if (!tbx_grow(&f->al, (void **)&f->sections, &f->cap_sections, f->nsections + 1,
                  sizeof *f->sections))
        return tbx_err_nomem(err, "section table");
    tbx_section *s = &f->sections[f->nsections];
    s->name = tbx_memdup0(&f->al, name, strlen(name));
    if (!s->name) return tbx_err_nomem(err, "section name");
    s->type = type;
    s->src = src;
    s->offset = offset;
    s->size = size;
    f->nsections++;
    return TBX_OK;
}

const tbx_source *tbx_file_source(const tbx_file *f, uint32_t src) {
    if (!f) return NULL;
    if (src == 0) return &f->src;
    return (size_t)src <= f->nextra_src ? &f->extra_src[src - 1] : NULL;
}

int64_t tbx_file_find_section(const tbx_file *f, const char *name) {
    for (size_t i = 0; f && name && i < f->nsections; i++)
        if (f->sections[i].name && strcmp(f->sections[i].name, name) == 0) return (int64_t)i;
    return -1;
}

tbx_status tbx_file_problem(tbx_file *f, tbx_error *err, tbx_status code, uint64_t offset,
                            const char *field, const char *fmt, ...) {
    tbx_error e;
    va_list ap;
    va_start(ap, fmt);
    tbx_verr(&e, code, offset, field, fmt, ap);
    va_end(ap);
    if (f->on_problem) {
        pthread_mutex_t *mu = f->problem_lock;
        if (mu) pthread_mutex_lock(mu);
        if (f->nproblems++ == 0) f->first_problem = e.code;
        f->on_problem(f->problem_ud, &e);
        if (mu) pthread_mutex_unlock(mu);
        return TBX_OK;
    }
    if (err) *err = e;
    return code;
}

static void free_component(const tbx_alloc *al, tbx_component *c) {
    if (c->digest) tbx_free(al, c->digest, strlen(c->digest) + 1);
}

void tbx_file_model_init(tbx_file *f) {
    tbx_names_init(&f->meta_names, &f->al, meta_key_of, f);
    tbx_names_init(&f->tensor_names, &f->al, tensor_key_of, f);
    tbx_names_init(&f->sizevar_names, &f->al, sizevar_key_of, f);
}

void tbx_file_model_free(tbx_file *f) {
    const tbx_alloc al = f->al;
    for (size_t i = 0; i < f->nmeta; i++) {
        tbx_free(&al, f->meta[i].key, f->meta[i].key_len + 1);
        tbx_val_free(f->meta[i].value);
    }
    tbx_free(&al, f->meta, f->cap_meta * sizeof *f->meta);
    for (size_t i = 0; i < f->ntensors; i++) {
        tbx_tensor *t = &f->tensors[i];
        for (uint32_t c = 0; c < t->ncomp; c++) free_component(&al, &t->comp[c]);
    }
    for (struct tbx_chunk *c = f->chunks, *next; c; c = next) {
        next = c->next;
        tbx_free(&al, c, c->size);
    }
    tbx_free(&al, f->tensors, f->cap_tensors * sizeof *f->tensors);
    for (size_t i = 0; i < f->nsections; i++)
        tbx_free(&al, f->sections[i].name, strlen(f->sections[i].name) + 1);
    tbx_free(&al, f->sections, f->cap_sections * sizeof *f->sections);
    for (size_t i = 0; i < f->nsizevars; i++)
        tbx_free(&al, f->sizevars[i].name, f->sizevars[i].name_len + 1);
    tbx_free(&al, f->sizevars, f->cap_sizevars * sizeof *f->sizevars);
    tbx_names_free(&f->sizevar_names);
    tbx_file_quant_free(f);
    tbx_names_free(&f->meta_names);
    tbx_names_free(&f->tensor_names);
}

/* ------------------------------------------------------------------------------------------ */
/* Quantization descriptions the handle owns (their contents: quant.c)                        */
/* ------------------------------------------------------------------------------------------ */
void tbx_quant_rec_free(const tbx_alloc *al, tbx_quant_rec *r) {
    for (int k = 0; k < 2; k++)
        if (r->values[k]) tbx_free(al, r->values[k], r->values_len[k]);
    tbx_val_free((tbx_value *)r->info.params);
    tbx_free(al, r, sizeof *r);
}

tbx_status tbx_file_charge_quant(tbx_file *f, uint64_t offset, const char *field,
                                 tbx_error *err) {
    /* the record, its slot, the params MAP and up to four small params (arrays, key, value) */
    const uint64_t param = 3 * (sizeof(void *) + TBX_HEAP_OVERHEAD) + 16 + TBX_HEAP_OVERHEAD +
                           sizeof(tbx_value) + TBX_HEAP_OVERHEAD;
    return tbx_file_charge(f, sizeof(tbx_quant_rec) + TBX_HEAP_OVERHEAD + sizeof(void *) +
                                  sizeof(tbx_value) + TBX_HEAP_OVERHEAD + 4 * param,
                           offset, field, err);
}

tbx_quant_info *tbx_file_quant_new(tbx_file *f) {
    if (!tbx_grow(&f->al, (void **)&f->quants, &f->cap_quants, f->nquants + 1,
                  sizeof *f->quants))
        return NULL;
    tbx_quant_rec *r = tbx_calloc(&f->al, 1, sizeof *r);
    if (!r) return NULL;
    tbx_value *params = tbx_val_new(&f->al, TBX_V_MAP);
    if (!params) { tbx_free(&f->al, r, sizeof *r); return NULL; }
    r->info.struct_size = (uint32_t)sizeof r->info;
    r->info.scale.component = -1;
    r->info.zero.component = -1;
    r->info.params = params;
    f->quants[f->nquants++] = r;
    return &r->info;
}

void *tbx_file_quant_values(tbx_file *f, tbx_quant_info *q, tbx_quant_param *p, size_t nbytes) {
    tbx_quant_rec *r = (tbx_quant_rec *)q;
    int k = p == &q->zero;
    if (r->values[k]) return NULL;
    void *v = tbx_malloc(&f->al, nbytes);
    if (!v) return NULL;
    r->values[k] = v;
    r->values_len[k] = nbytes;
    p->values = v;
    return v;
}

void tbx_file_quant_free(tbx_file *f) {
    for (size_t i = 0; i < f->nquants; i++) {
        tbx_quant_rec_free(&f->al, f->quants[i]);
    }
    tbx_free(&f->al, f->quants, f->cap_quants * sizeof *f->quants);
    f->quants = NULL;
    f->nquants = f->cap_quants = 0;
}

void tbx_comp_set_raw(tbx_tensor *t, tbx_dtype dtype, uint64_t offset, uint64_t nbytes) {
    tbx_component *k = &t->comp[0];
    k->name = "data";
    k->dtype = dtype;
    k->nelems = t->nelems;
    k->offset = offset;
    k->stored_bytes = nbytes;
    k->nbytes = nbytes;
    k->encoding = TBX_ENC_RAW;
}
