/*
 * imatrix.c - importance matrices (imatrix.h): llama-imatrix's two file forms read into
 * llama-quantize's per-weight vectors, and those vectors attached to a conversion plan.
 */
#include "imatrix.h"
#include "ggml.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void tbx_imatrix_init(tbx_imatrix *m, const tbx_alloc *al) {
    memset(m, 0, sizeof *m);
    m->al = *al;
}

void tbx_imatrix_free(tbx_imatrix *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) {
        tbx_free(&m->al, m->e[i].name, m->e[i].name_len + 1);
        tbx_free(&m->al, m->e[i].v, (size_t)m->e[i].n * sizeof(float));
    }
    tbx_free(&m->al, m->e, m->cap * sizeof *m->e);
    for (size_t i = 0; i < m->ndatasets; i++)
        tbx_free(&m->al, m->datasets[i], strlen(m->datasets[i]) + 1);
    tbx_free(&m->al, m->datasets, m->cap_datasets * sizeof *m->datasets);
    memset(m, 0, sizeof *m);
}

static int name_cmp(const char *a, size_t al, const char *b, size_t bl) {
    const int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al < bl ? -1 : al > bl);
}

const tbx_imatrix_entry *tbx_imatrix_find(const tbx_imatrix *m, const char *name, size_t len) {
    size_t lo = 0, hi = m ? m->n : 0;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const int c = name_cmp(m->e[mid].name, m->e[mid].name_len, name, len);
        if (c == 0) return &m->e[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* Appends an entry taking ownership of name (len + 1 bytes) and v (n floats); on failure both
 * are freed. finish_entries sorts them afterwards. */
static tbx_status put_entry(tbx_imatrix *m, char *name, size_t len, float *v, uint64_t n,
                            tbx_error *err) {
    if (!tbx_grow(&m->al, (void **)&m->e, &m->cap, m->n + 1, sizeof *m->e)) {
        tbx_free(&m->al, name, len + 1);
        tbx_free(&m->al, v, (size_t)n * sizeof(float));
        return tbx_err_nomem(err, "importance matrix entries");
    }
    m->e[m->n].name = name;
    m->e[m->n].name_len = len;
    m->e[m->n].v = v;
    m->e[m->n].n = n;
    m->n++;
    return TBX_OK;
}

/* Sorts by name, then by position in the file, and keeps the last entry of each name, as llama-quantize's map
 * does when a legacy file names a weight twice. */
typedef struct { tbx_imatrix_entry e; size_t seq; } seq_entry;
static int seq_cmp(const void *a, const void *b) {
    const seq_entry *x = a, *y = b;
    const int c = name_cmp(x->e.name, x->e.name_len, y->e.name, y->e.name_len);
    if (c) return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}
static tbx_status finish_entries(tbx_imatrix *m, tbx_error *err) {
    if (m->n < 2) return TBX_OK;
    seq_entry *s = tbx_calloc(&m->al, m->n, sizeof *s);
    if (!s) return tbx_err_nomem(err, "importance matrix entries");
    for (size_t i = 0; i < m->n; i++) s[i].e = m->e[i], s[i].seq = i;
    qsort(s, m->n, sizeof *s, seq_cmp);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (i + 1 < m->n && name_cmp(s[i].e.name, s[i].e.name_len, s[i + 1].e.name,
                                     s[i + 1].e.name_len) == 0) {
            tbx_free(&m->al, s[i].e.name, s[i].e.name_len + 1);
            tbx_free(&m->al, s[i].e.v, (size_t)s[i].e.n * sizeof(float));
            continue;
        }
        m->e[k++] = s[i].e;
    }
    tbx_free(&m->al, s, m->n * sizeof *s);
    m->n = k;
    return TBX_OK;
}

static tbx_status put_dataset(tbx_imatrix *m, const char *s, size_t len, tbx_error *err) {
    char *c = tbx_memdup0(&m->al, s, len);
    if (!c || !tbx_grow(&m->al, (void **)&m->datasets, &m->cap_datasets, m->ndatasets + 1,
                        sizeof *m->datasets)) {
        tbx_free(&m->al, c, c ? len + 1 : 0);
        return tbx_err_nomem(err, "importance matrix datasets");
    }
    m->datasets[m->ndatasets++] = c;
    return TBX_OK;
}

/* llama_model_quantize refuses a matrix holding a non-finite value. */
static tbx_status check_finite(const tbx_imatrix *m, tbx_error *err) {
    for (size_t i = 0; i < m->n; i++)
        for (uint64_t j = 0; j < m->e[i].n; j++)
            if (!isfinite(m->e[i].v[j]))
                return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, m->e[i].name,
                               "importance matrix entry \"%s\": value %" PRIu64 " is %g (every "
                               "value must be finite)", m->e[i].name, j, (double)m->e[i].v[j]);
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Legacy .dat                                                                                 */
/* ------------------------------------------------------------------------------------------ */
static tbx_status cur_i32(tbx_cursor *c, int32_t *v, const char *field, tbx_error *err) {
    uint32_t u;
    tbx_status st = tbx_cur_u32(c, &u, field, err);
    *v = (int32_t)u;
    return st;
}

/* A non-negative i32 length at most `max` with that many bytes left. */
static tbx_status cur_len(tbx_cursor *c, int32_t *v, uint64_t max, uint64_t unit,
                          const char *field, tbx_error *err) {
    const uint64_t at = c->pos;
    tbx_status st = cur_i32(c, v, field, err);
    if (st != TBX_OK) return st;
    if (*v < 0)
        return tbx_err(err, TBX_E_FORMAT, at, field, "%s is negative (%" PRId32 ")", field, *v);
    if ((uint64_t)*v > max)
        return tbx_err(err, TBX_E_LIMIT, at, field, "%s %" PRId32 " exceeds the limit %" PRIu64,
                       field, *v, max);
    return tbx_cur_need(c, (uint64_t)*v * unit, field, err);
}

static tbx_status read_dat(tbx_cursor *c, const tbx_limits *lim, tbx_imatrix *m,
                           tbx_error *err) {
    int32_t n_entries;
    uint64_t at = c->pos;
    tbx_status st = cur_i32(c, &n_entries, "n_entries", err);
    if (st != TBX_OK) return st;
    if (n_entries < 1)
        return tbx_err(err, TBX_E_FORMAT, at, "n_entries", "n_entries is %" PRId32 " (an "
                       "importance matrix has at least one entry)", n_entries);
    if ((uint64_t)n_entries > lim->max_tensors)
        return tbx_err(err, TBX_E_LIMIT, at, "n_entries", "n_entries %" PRId32 " exceeds the "
                       "max_tensors limit %" PRIu64, n_entries, lim->max_tensors);
    /* each entry takes at least 16 bytes (three i32 and one value) */
    if ((st = tbx_cur_need(c, (uint64_t)n_entries * 16, "n_entries", err)) != TBX_OK) return st;
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t len, ncall, nval;
        if ((st = cur_len(c, &len, lim->max_string_len, 1, "name length", err)) != TBX_OK)
            return st;
        at = c->pos;
        char *name = tbx_malloc(&m->al, (size_t)len + 1);
        if (!name) return tbx_err_nomem(err, "importance matrix name");
        st = tbx_cur_bytes(c, name, (size_t)len, "name", err);
        name[len] = 0;
        if (st == TBX_OK && memchr(name, 0, (size_t)len))
            st = tbx_err(err, TBX_E_FORMAT, at, "name", "entry %" PRId32 ": its name holds a NUL "
                         "byte", i);
        if (st == TBX_OK) st = cur_i32(c, &ncall, "ncall", err);
        at = c->pos;
        if (st == TBX_OK) st = cur_len(c, &nval, lim->max_array_len, 4, "nval", err);
        if (st == TBX_OK && nval < 1)
            st = tbx_err(err, TBX_E_FORMAT, at, "nval", "entry \"%s\": nval is 0 (at least one "
                         "value)", name);
        float *v = NULL;
        if (st == TBX_OK && !(v = tbx_malloc(&m->al, (size_t)nval * sizeof(float))))
            st = tbx_err_nomem(err, "importance matrix values");
        for (int32_t j = 0; st == TBX_OK && j < nval; j++) {
            uint32_t u;
            st = tbx_cur_u32(c, &u, "values", err);
            float x;
            memcpy(&x, &u, 4);
            /* what llama-quantize divides by: the count of calls, as a float */
            v[j] = ncall > 0 ? x / (float)ncall : x;
        }
        if (st != TBX_OK) {
            tbx_free(&m->al, name, (size_t)len + 1);
            tbx_free(&m->al, v, v ? (size_t)nval * sizeof(float) : 0);
            return st;
        }
        if ((st = put_entry(m, name, (size_t)len, v, (uint64_t)nval, err)) != TBX_OK) return st;
    }
    /* the optional trailer: the chunk count, then the dataset's name */
    if (tbx_cursor_remaining(c) == 0) return TBX_OK;
    if ((st = cur_i32(c, &m->chunk_count, "chunk_count", err)) != TBX_OK) return st;
    if (tbx_cursor_remaining(c) == 0) return TBX_OK;
    int32_t dlen;
    if ((st = cur_len(c, &dlen, lim->max_string_len, 1, "dataset length", err)) != TBX_OK)
        return st;
    if (dlen > 0) {
        at = c->pos;
        char *d = tbx_malloc(&m->al, (size_t)dlen);
        if (!d) return tbx_err_nomem(err, "importance matrix dataset");
        st = tbx_cur_bytes(c, d, (size_t)dlen, "dataset", err);
        if (st == TBX_OK && memchr(d, 0, (size_t)dlen))
            st = tbx_err(err, TBX_E_FORMAT, at, "dataset", "the dataset name holds a NUL byte");
        if (st == TBX_OK) st = put_dataset(m, d, (size_t)dlen, err);
        tbx_free(&m->al, d, (size_t)dlen);
        if (st != TBX_OK) return st;
    }
    if (tbx_cursor_remaining(c))
        return tbx_err(err, TBX_E_FORMAT, c->pos, "trailer", "%" PRIu64 " bytes follow the "
                       "dataset name (nothing may)", tbx_cursor_remaining(c));
    return TBX_OK;
}

tbx_status tbx_imatrix_read_dat(const tbx_source *src, const tbx_alloc *al,
                                const tbx_limits *lim, tbx_imatrix *m, tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    tbx_imatrix_init(m, al);
    tbx_cursor c;
    tbx_status st = tbx_cursor_init(&c, src, al, 0, src->size, err);
    if (st != TBX_OK) return st;
    st = read_dat(&c, lim, m, err);
    tbx_cursor_free(&c);
    if (st == TBX_OK) st = finish_entries(m, err);
    if (st == TBX_OK) st = check_finite(m, err);
    if (st != TBX_OK) tbx_imatrix_free(m);
    else m->legacy = true;
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* GGUF                                                                                        */
/* ------------------------------------------------------------------------------------------ */
#define SUMS ".in_sum2"
#define COUNTS ".counts"

static bool ends_with(const char *s, size_t n, const char *suf, size_t *base) {
    const size_t k = strlen(suf);
    if (n < k || memcmp(s + n - k, suf, k) != 0) return false;
    *base = n - k;
    return true;
}

/* *out: the index of the tensor named base + suffix, or UINT64_MAX. */
static tbx_status find_tensor(const tbx_file *f, const tbx_alloc *al, const char *base,
                              size_t blen, const char *suf, uint64_t *out, tbx_error *err) {
    const size_t k = strlen(suf);
    char *key = tbx_malloc(al, blen + k);
    if (!key) return tbx_err_nomem(err, "importance matrix name");
    memcpy(key, base, blen);
    memcpy(key + blen, suf, k);
    if (!tbx_names_find(&f->tensor_names, key, blen + k, out)) *out = UINT64_MAX;
    tbx_free(al, key, blen + k);
    return TBX_OK;
}

static tbx_status key_u32(tbx_file *f, const char *key, uint32_t *out, tbx_error *err) {
    const tbx_value *v = tbx_meta_find(f, key);
    if (!v)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, key, "importance matrix: no key %s "
                       "(llama-quantize requires imatrix.datasets, imatrix.chunk_count and "
                       "imatrix.chunk_size)", key);
    uint64_t u;
    if (tbx_value_type_of(v) != TBX_V_U32 || tbx_value_get_u64(v, &u) != TBX_OK)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, key, "importance matrix: %s is %s, "
                       "not u32", key, tbx_value_type_name(tbx_value_type_of(v)));
    *out = (uint32_t)u;
    return TBX_OK;
}

/* Reads f32 tensor i whole into a new array. */
static tbx_status read_f32(tbx_file *f, tbx_imatrix *m, uint64_t i, float **out,
                           tbx_error *err) {
    const tbx_tensor *t = &f->tensors[i];
    if (t->dtype != TBX_DT_F32)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, t->name, "importance matrix tensor "
                       "\"%s\" is %s (f32 expected)", t->name,
                       tbx_dtype_get(t->dtype) ? tbx_dtype_get(t->dtype)->name : "?");
    if (t->nelems > SIZE_MAX / sizeof(float))
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, t->name, "tensor \"%s\" too large",
                       t->name);
    float *v = tbx_malloc(&m->al, (size_t)t->nelems * sizeof(float));
    if (!v) return tbx_err_nomem(err, "importance matrix values");
    tbx_status st = tbx_tensor_read_f32(f, i, 0, t->nelems, v, err);
    if (st != TBX_OK) {
        tbx_free(&m->al, v, (size_t)t->nelems * sizeof(float));
        return st;
    }
    *out = v;
    return TBX_OK;
}

static tbx_status read_gguf(tbx_file *f, tbx_imatrix *m, tbx_error *err) {
    if (f->ntensors < 1)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensors", "importance matrix: the "
                       "GGUF file has no tensor");
    const tbx_value *ds = tbx_meta_find(f, "imatrix.datasets");
    if (!ds)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "imatrix.datasets", "importance "
                       "matrix: no key imatrix.datasets (llama-quantize requires "
                       "imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size)");
    uint32_t chunks, chunk_size;
    tbx_status st = key_u32(f, "imatrix.chunk_count", &chunks, err);
    if (st == TBX_OK) st = key_u32(f, "imatrix.chunk_size", &chunk_size, err);
    if (st != TBX_OK) return st;
    m->chunk_count = (int32_t)chunks;
    /* the datasets, when they are an array of strings (else none, as llama-quantize) */
    if (tbx_value_type_of(ds) == TBX_V_ARRAY && tbx_value_elem_type(ds) == TBX_V_STRING)
        for (uint64_t i = 0; st == TBX_OK && i < tbx_value_len(ds); i++) {
            size_t len;
            const char *s = tbx_value_str_at(ds, i, &len);
            if (!s) return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "imatrix.datasets",
                                   "imatrix.datasets[%" PRIu64 "] cannot be read", i);
            /* llama.cpp reads it as a C string: up to a NUL byte */
            const char *nul = memchr(s, 0, len);
            st = put_dataset(m, s, nul ? (size_t)(nul - s) : len, err);
        }
    for (uint64_t i = 0; st == TBX_OK && i < f->ntensors; i++) {
        const tbx_tensor *t = &f->tensors[i];
        size_t blen;
        uint64_t is, ic;
        if (ends_with(t->name, t->name_len, SUMS, &blen)) {
            is = i;
            st = find_tensor(f, &m->al, t->name, blen, COUNTS, &ic, err);
        } else if (ends_with(t->name, t->name_len, COUNTS, &blen)) {
            ic = i;
            st = find_tensor(f, &m->al, t->name, blen, SUMS, &is, err);
            if (st == TBX_OK && is != UINT64_MAX) continue; /* read with its sums */
        } else {
            continue; /* neither: not an entry (llama-quantize skips it too) */
        }
        if (st != TBX_OK) break;
        if (blen == 0) continue; /* an empty name: skipped as llama-quantize does */
        if (is == UINT64_MAX || ic == UINT64_MAX)
            return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, t->name, "importance matrix: "
                           "\"%.*s\" has %s but no %s", (int)blen, t->name,
                           is == UINT64_MAX ? COUNTS : SUMS, is == UINT64_MAX ? SUMS : COUNTS);
        const tbx_tensor *ts = &f->tensors[is], *tc = &f->tensors[ic];
        if (tc->nelems == 0 || ts->nelems % tc->nelems)
            return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, ts->name, "importance matrix "
                           "\"%.*s\": %" PRIu64 " sums are not a whole number of rows for %"
                           PRIu64 " counts", (int)blen, t->name, ts->nelems, tc->nelems);
        float *sums = NULL, *counts = NULL;
        st = read_f32(f, m, is, &sums, err);
        if (st == TBX_OK) st = read_f32(f, m, ic, &counts, err);
        if (st == TBX_OK) {
            const uint64_t ne0 = ts->nelems / tc->nelems;
            for (uint64_t j = 0; j < tc->nelems; j++) {
                /* llama.cpp keeps the counts as integers (rounded), then divides as floats */
                const float cnt = (float)(int64_t)lround((double)counts[j]);
                for (uint64_t k = 0; k < ne0; k++)
                    sums[j * ne0 + k] = cnt > 0.0f ? sums[j * ne0 + k] / cnt : 1.0f;
            }
            char *name = tbx_memdup0(&m->al, t->name, blen);
            if (!name) {
                tbx_free(&m->al, sums, (size_t)ts->nelems * sizeof(float));
                st = tbx_err_nomem(err, "importance matrix name");
            } else {
                st = put_entry(m, name, blen, sums, ts->nelems, err);
            }
            sums = NULL;
        }
        tbx_free(&m->al, sums, sums ? (size_t)ts->nelems * sizeof(float) : 0);
        tbx_free(&m->al, counts, counts ? (size_t)tc->nelems * sizeof(float) : 0);
    }
    return st;
}

tbx_status tbx_imatrix_read_gguf(tbx_file *f, tbx_imatrix *m, tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    tbx_imatrix_init(m, &f->al);
    tbx_status st = read_gguf(f, m, err);
    if (st == TBX_OK) st = finish_entries(m, err);
    if (st == TBX_OK) st = check_finite(m, err);
    if (st != TBX_OK) tbx_imatrix_free(m);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Applying a matrix to a plan                                                                 */
/* ------------------------------------------------------------------------------------------ */
/* llama.cpp's token embeddings: a matrix of another size is ignored for them (a warning). */
static bool token_embd(const char *name) {
    return strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0;
}

tbx_status tbx_imatrix_attach(const tbx_imatrix *m, tbx_plan *p, const tbx_file *in,
                              tbx_error *err) {
    if (!p->n) return TBX_OK;
    p->qw = tbx_plan_alloc(p, p->n * sizeof *p->qw);
    p->qw_why = tbx_plan_alloc(p, p->n);
    if (!p->qw || !p->qw_why) return tbx_err_nomem(err, "importance matrix plan");
    for (size_t k = 0; k < p->n; k++) {
        const tbx_plan_tensor *t = &p->t[k];
        if (t->enc != TBX_PENC_ENCODE || !tbx_ggml_quant_rows_for((tbx_dtype)t->dtype)) continue;
        size_t nl;
        const char *name = tbx_plan_name(p, in, k, &nl);
        const tbx_dtype_info *di = tbx_dtype_get((tbx_dtype)t->dtype);
        const char *tn = di ? di->name : "?";
        if (t->flags & TBX_PT_SEARCH)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "options.quant_method",
                           "tensor \"%s\": quant_method=search (tensorbox's own %s search) does "
                           "not use an importance matrix; quantize with the default (ggml) to "
                           "apply one", name, tn);
        uint32_t ndim;
        const uint64_t *shape = tbx_plan_shape(p, in, k, &ndim);
        const uint64_t cols = ndim ? shape[ndim - 1] : 1;
        const uint64_t experts = ndim == 3 ? shape[0] : 1;
        const tbx_imatrix_entry *e = tbx_imatrix_find(m, name, nl);
        if (e && (ndim < 2 || ndim > 3 || e->n / experts != cols || e->n % experts)) {
            if (!token_embd(name))
                return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, name, "tensor \"%s\": its "
                               "importance matrix has %" PRIu64 " values, the tensor %" PRIu64
                               " (%" PRIu64 " columns x %" PRIu64 " experts)", name, e->n,
                               cols * experts, cols, experts);
            p->qw_why[k] = TBX_QW_MISMATCH;
            e = NULL;
        } else if (!e) {
            p->qw_why[k] = TBX_QW_MISSING;
        } else {
            p->qw[k] = e->v;
            p->qw_why[k] = TBX_QW_USED;
        }
        if (!e && tbx_ggml_quant_requires_imatrix((tbx_dtype)t->dtype))
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, name, "tensor \"%s\": %s needs "
                           "an importance matrix and the one given has %s for it", name, tn,
                           p->qw_why[k] == TBX_QW_MISMATCH ? "a vector of another size" : "none");
    }
    return TBX_OK;
}
