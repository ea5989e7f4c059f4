/*
 * quant.c - the common description of quantized tensors (tbx_quant_info): storage owned by the
 * handle, the helpers drivers fill it with, and the public accessor tbx_tensor_quant_get.
 *
 * A description is a tbx_quant_rec (model.h): the public struct, the values its scale/zero
 * members point to (OINF keeps them in its header) and the params MAP. The handle's records
 * (f->quants) are made, charged and freed with the handle's other lists in model.c; tensors
 * point at them (t->quant), possibly several tensors at one record (GGUF: one per block type).
 * This file fills them (params), names their enums, checks a description handed to a writer and
 * copies one out of a handle.
 */
#include "model.h"

/* Appends (key, v) to the params MAP. The three arrays are replaced together, each allocated
 * with exactly one more entry, and only once all allocations succeeded, so that a failed
 * allocation leaves the MAP as it was (its arrays sized by cap, as tbx_val_free expects). */
tbx_status tbx_quant_put(tbx_quant_info *q, const char *key, tbx_value *v) {
    if (!v) return TBX_E_NOMEM;
    tbx_value *m = (tbx_value *)q->params;
    const tbx_alloc *al = m->al;
    size_t n = m->v.a.n, klen = strlen(key);
    for (size_t i = 0; i < n; i++)
        if (m->v.a.key_lens[i] == klen && memcmp(m->v.a.keys[i], key, klen) == 0) {
            tbx_val_free(v);
            return TBX_E_DUPLICATE;
        }
    tbx_value **items = tbx_malloc(al, (n + 1) * sizeof *items);
    char **keys = tbx_malloc(al, (n + 1) * sizeof *keys);
    size_t *lens = tbx_malloc(al, (n + 1) * sizeof *lens);
    char *k = tbx_memdup0(al, key, klen);
    if (!items || !keys || !lens || !k) {
        if (items) tbx_free(al, items, (n + 1) * sizeof *items);
        if (keys) tbx_free(al, keys, (n + 1) * sizeof *keys);
        if (lens) tbx_free(al, lens, (n + 1) * sizeof *lens);
        if (k) tbx_free(al, k, klen + 1);
        tbx_val_free(v);
        return TBX_E_NOMEM;
    }
    if (n) {
        memcpy(items, m->v.a.items, n * sizeof *items);
        memcpy(keys, m->v.a.keys, n * sizeof *keys);
        memcpy(lens, m->v.a.key_lens, n * sizeof *lens);
    }
    size_t cap = m->v.a.cap;
    if (m->v.a.items) tbx_free(al, m->v.a.items, cap * sizeof *items);
    if (m->v.a.keys) tbx_free(al, m->v.a.keys, cap * sizeof *keys);
    if (m->v.a.key_lens) tbx_free(al, m->v.a.key_lens, cap * sizeof *lens);
    items[n] = v;
    keys[n] = k;
    lens[n] = klen;
    m->v.a.items = items;
    m->v.a.keys = keys;
    m->v.a.key_lens = lens;
    m->v.a.n = m->v.a.cap = n + 1;
    return TBX_OK;
}

tbx_status tbx_quant_put_u32(tbx_file *f, tbx_quant_info *q, const char *key, uint32_t v) {
    tbx_value *x = tbx_val_new(&f->al, TBX_V_U32);
    if (x) x->v.u = v;
    return tbx_quant_put(q, key, x);
}

const char *tbx_quant_method_name(tbx_quant_method m) {
    switch (m) {
    case TBX_QUANT_NONE: return "none";
    case TBX_QUANT_GGML: return "ggml";
    case TBX_QUANT_LINEAR: return "linear";
    }
    return "?";
}

const char *tbx_quant_scope_name(tbx_quant_scope s) {
    switch (s) {
    case TBX_QSCOPE_NONE: return "none";
    case TBX_QSCOPE_BLOCK: return "block";
    case TBX_QSCOPE_TENSOR: return "tensor";
    case TBX_QSCOPE_CHANNEL: return "channel";
    case TBX_QSCOPE_GROUP: return "group";
    }
    return "?";
}

const char *tbx_quant_domain_name(tbx_quant_domain d) {
    switch (d) {
    case TBX_QDOMAIN_UNSPECIFIED: return "unspecified";
    case TBX_QDOMAIN_WEIGHTS: return "weights";
    case TBX_QDOMAIN_ACTIVATIONS: return "activations";
    }
    return "?";
}

tbx_status tbx_tensor_quant_get(const tbx_file *f, uint64_t i, tbx_quant_info *q) {
    if (!f || !q || i >= f->ntensors || q->struct_size < sizeof *q) return TBX_E_INVALID_ARG;
    const tbx_quant_info *src = f->tensors[i].quant;
    if (!src) return TBX_E_NOT_FOUND;
    uint32_t want = q->struct_size;
    memcpy(q, src, sizeof *q); /* this version: everything; a newer caller's tail untouched */
    q->struct_size = want < sizeof *q ? want : (uint32_t)sizeof *q;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Descriptions handed to a writer (tbx_writer_add_quant_tensor)                              */
/* ------------------------------------------------------------------------------------------ */
static tbx_status param_check(const tbx_quant_info *q, const tbx_quant_param *p, bool zero,
                              const uint64_t *shape, uint32_t ndim, const char *tensor,
                              const char *member, uint64_t *values_bytes, tbx_error *err) {
    *values_bytes = 0;
    if (p->scope == TBX_QSCOPE_GROUP) {
        /* rows x ceil(cols / block_size) */
        uint64_t rows = 1, cols = ndim ? shape[ndim - 1] : 1, groups = 0;
        bool ok = q->block_size >= 1;
        for (uint32_t d = 0; ok && d + 1 < ndim; d++) ok = tbx_mul_u64(rows, shape[d], &rows);
        ok = ok && tbx_mul_u64(rows, cols / q->block_size + (cols % q->block_size != 0),
                               &groups);
        if (!ok || p->count != groups)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, member,
                           "tensor \"%s\": quantization %s per group of %llu has count %llu, "
                           "expected %llu", tensor, member, (unsigned long long)q->block_size,
                           (unsigned long long)p->count, (unsigned long long)groups);
    }
    const bool scope_ok = p->scope == TBX_QSCOPE_BLOCK || p->scope == TBX_QSCOPE_TENSOR ||
                          p->scope == TBX_QSCOPE_CHANNEL || p->scope == TBX_QSCOPE_GROUP ||
                          (zero && p->scope == TBX_QSCOPE_NONE);
    if (!scope_ok)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, member,
                       "tensor \"%s\": quantization %s scope %d is not valid", tensor, member,
                       (int)p->scope);
    if (p->scope == TBX_QSCOPE_TENSOR && p->count != 1)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, member,
                       "tensor \"%s\": quantization %s of scope tensor has count %llu, "
                       "expected 1", tensor, member, (unsigned long long)p->count);
    if (p->scope == TBX_QSCOPE_CHANNEL && (p->axis >= ndim || p->count != shape[p->axis]))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, member,
                       "tensor \"%s\": quantization %s per channel of axis %u with count %llu "
                       "does not fit the tensor's %u dimensions", tensor, member, p->axis,
                       (unsigned long long)p->count, ndim);
    if (!p->values) return TBX_OK;
    const tbx_dtype_info *di = tbx_dtype_core_get(p->dtype);
    if (!di || (di->flags & (TBX_DTF_BLOCK | TBX_DTF_PACKED)) || di->bits % 8 ||
        !tbx_mul_u64(p->count, di->bits / 8, values_bytes) || *values_bytes > SIZE_MAX)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, member,
                       "tensor \"%s\": quantization %s values of dtype %d cannot be held "
                       "(a core byte-sized dtype is needed)", tensor, member, (int)p->dtype);
    return TBX_OK;
}

tbx_status tbx_quant_desc_check(const tbx_quant_info *q, const uint64_t *shape, uint32_t ndim,
                                const char *tensor, tbx_error *err) {
    if (q->struct_size < sizeof *q)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant",
                       "tensor \"%s\": quantization description struct_size %u is smaller than "
                       "its first version (%zu)", tensor, q->struct_size, sizeof *q);
    if (q->method != TBX_QUANT_GGML && q->method != TBX_QUANT_LINEAR)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant.method",
                       "tensor \"%s\": quantization method %d is not known", tensor,
                       (int)q->method);
    if (q->params && ((const tbx_value *)q->params)->type != TBX_V_MAP)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant.params",
                       "tensor \"%s\": quantization params must be a MAP", tensor);
    uint64_t nb;
    tbx_status st = param_check(q, &q->scale, false, shape, ndim, tensor, "quant.scale", &nb, err);
    if (st == TBX_OK)
        st = param_check(q, &q->zero, true, shape, ndim, tensor, "quant.zero", &nb, err);
    return st;
}

/* The copy: a tbx_quant_rec made with al instead of a handle's allocator. */
tbx_quant_info *tbx_quant_clone(const tbx_alloc *al, const tbx_quant_info *q) {
    tbx_quant_rec *r = tbx_calloc(al, 1, sizeof *r);
    if (!r) return NULL;
    memcpy(&r->info, q, sizeof r->info);
    r->info.struct_size = (uint32_t)sizeof r->info;
    r->info.params = NULL;
    r->info.scale.values = r->info.zero.values = NULL;
    const tbx_quant_param *src[2] = {&q->scale, &q->zero};
    tbx_quant_param *dst[2] = {&r->info.scale, &r->info.zero};
    bool ok = true;
    for (int k = 0; k < 2 && ok; k++) {
        if (!src[k]->values) continue;
        const tbx_dtype_info *di = tbx_dtype_core_get(src[k]->dtype);
        size_t n = (size_t)src[k]->count * (di->bits / 8); /* checked by tbx_quant_desc_check */
        void *v = tbx_malloc(al, n ? n : 1);
        if (!v) { ok = false; break; }
        if (n) memcpy(v, src[k]->values, n);
        r->values[k] = v;
        r->values_len[k] = n ? n : 1;
        dst[k]->values = v;
    }
    tbx_value *params = ok ? (q->params ? tbx_val_clone(al, q->params)
                                        : tbx_val_new(al, TBX_V_MAP))
                           : NULL;
    r->info.params = params;
    if (!params) {
        tbx_quant_clone_free(al, &r->info);
        return NULL;
    }
    return &r->info;
}

void tbx_quant_clone_free(const tbx_alloc *al, tbx_quant_info *q) {
    if (q) tbx_quant_rec_free(al, (tbx_quant_rec *)q);
}
