/*
 * writer.c - the public writing API.
 *
 * A writer goes through three states: DECLARE (metadata, sections and tensor declarations are
 * collected and checked against what the format can store), DATA (the driver has laid the file
 * out and written its header; tensor bytes stream in, one tensor at a time) and DONE (the driver
 * wrote its trailer and the temporary file was renamed over the destination).
 */
#include "access.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

static const char *wmeta_key_of(const void *ctx, uint64_t i, size_t *len) {
    const tbx_writer *w = ctx;
    *len = w->meta[i].key_len;
    return w->meta[i].key;
}

static const char *wtensor_key_of(const void *ctx, uint64_t i, size_t *len) {
    const tbx_writer *w = ctx;
    *len = w->tensors[i].name_len;
    return w->tensors[i].name;
}

static void wquant_pop(tbx_writer *w) {
    struct tbx_wquant *e = &w->quants[--w->nquants];
    if (e->owned) tbx_quant_clone_free(&w->al, (tbx_quant_info *)e->q);
}

static void writer_free(tbx_writer *w) {
    if (!w) return;
    if (w->drv && w->drv->w_free) w->drv->w_free(w);
    const tbx_alloc al = w->al;
    while (w->nquants) wquant_pop(w);
    tbx_free(&al, w->quants, w->cap_quants * sizeof *w->quants);
    for (size_t i = 0; i < w->nmeta; i++) {
        if (w->meta[i].borrowed) continue;
        tbx_free(&al, w->meta[i].key, w->meta[i].key_len + 1);
        tbx_val_free(w->meta[i].value);
    }
    tbx_free(&al, w->meta, w->cap_meta * sizeof *w->meta);
    for (size_t i = 0; i < w->ntensors && !w->borrow_descs; i++) {
        tbx_free(&al, w->tensors[i].name, w->tensors[i].name_len + 1);
        tbx_free(&al, w->tensors[i].shape, w->tensors[i].ndim * sizeof(uint64_t));
    }
    tbx_free(&al, w->tensors, w->cap_tensors * sizeof *w->tensors);
    for (size_t i = 0; i < w->nsections; i++) {
        tbx_free(&al, w->sections[i].name, strlen(w->sections[i].name) + 1);
        tbx_free(&al, w->sections[i].data, w->sections[i].len);
    }
    tbx_free(&al, w->sections, w->cap_sections * sizeof *w->sections);
    if (w->src_dir) tbx_free(&al, w->src_dir, strlen(w->src_dir) + 1);
    tbx_val_free(w->options);
    tbx_names_free(&w->meta_names);
    tbx_names_free(&w->tensor_names);
    tbx_out_abort(&w->out);
    tbx_free(&al, w, sizeof *w);
}

void tbx_writer_abort(tbx_writer *w) { writer_free(w); }

/* Does the space-separated list `list` hold the `n` bytes of `s`? */
static bool choice_ok(const char *list, const char *s, size_t n) {
    for (const char *p = list ? list : ""; *p;) {
        while (*p == ' ') p++;
        size_t k = strcspn(p, " ");
        if (k && k == n && memcmp(p, s, n) == 0) return true;
        p += k;
    }
    return false;
}

/* The caller's format options against the row's table: a MAP, every key declared, every value
 * of the declared type and in range. */
static tbx_status check_options(const tbx_driver *drv, const tbx_value *opts, tbx_error *err) {
    if (!opts) return TBX_OK;
    if (tbx_value_type_of(opts) != TBX_V_MAP)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "options",
                       "the write options are a %s, not a map of option names to values",
                       tbx_value_type_name(tbx_value_type_of(opts)));
    for (uint64_t i = 0, n = tbx_value_len(opts); i < n; i++) {
        size_t kl = 0;
        const char *key = tbx_value_key_at(opts, i, &kl);
        const tbx_value *v = tbx_value_at(opts, i);
        char q[96];
        tbx_quote_bytes(q, sizeof q, key ? key : "", key ? kl : 0, 64);
        char field[64]; /* tbx_error.field's size: a long key is cut */
        snprintf(field, sizeof field, "options.%.55s", q);
        const tbx_format_option *o = NULL;
        for (const tbx_format_option *e = drv->w_options; e && e->key && !o; e++)
            if (key && strlen(e->key) == kl && memcmp(e->key, key, kl) == 0) o = e;
        if (!o) {
            char known[256];
            size_t at = 0;
            known[0] = 0;
            for (const tbx_format_option *e = drv->w_options; e && e->key; e++) {
                int w = snprintf(known + at, sizeof known - at, "%s%s", at ? ", " : "", e->key);
                if (w < 0 || (size_t)w >= sizeof known - at) break;
                at += (size_t)w;
            }
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                           "%s files have no write option \"%s\" (%s%s)", drv->name, q,
                           at ? "theirs: " : "they have none", known);
        }
        tbx_value_type t = tbx_value_type_of(v);
        uint64_t u = 0;
        size_t sl = 0;
        const char *s = NULL;
        switch (o->type) {
        case TBX_V_BOOL:
            if (t != TBX_V_BOOL)
                return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                               "%s write option \"%s\" is a bool, not a %s", drv->name, o->key,
                               tbx_value_type_name(t));
            break;
        case TBX_V_U64:
            if (!tbx_value_type_is_int(t) || tbx_value_get_u64(v, &u) != TBX_OK || u < o->min ||
                u > o->max) {
                int64_t i64 = 0;
                if (tbx_value_type_is_int(t) && tbx_value_get_i64(v, &i64) == TBX_OK && i64 < 0)
                    return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                                   "%s write option \"%s\" is %" PRId64 ", outside %" PRIu64
                                   "..%" PRIu64, drv->name, o->key, i64, o->min, o->max);
                if (tbx_value_type_is_int(t))
                    return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                                   "%s write option \"%s\" is %" PRIu64 ", outside %" PRIu64
                                   "..%" PRIu64, drv->name, o->key, u, o->min, o->max);
                return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                               "%s write option \"%s\" is an integer, not a %s", drv->name,
                               o->key, tbx_value_type_name(t));
            }
            break;
        case TBX_V_F64: {
            double d = 0;
            if ((!tbx_value_type_is_int(t) && !tbx_value_type_is_float(t)) ||
                tbx_value_get_f64(v, &d) != TBX_OK || !isfinite(d))
                return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                               "%s write option \"%s\" is a finite number, not a%s %s",
                               drv->name, o->key, tbx_value_type_is_float(t) ? " non-finite" : "",
                               tbx_value_type_name(t));
            break;
        }
        case TBX_V_STRING:
            s = t == TBX_V_STRING ? tbx_value_get_str(v, &sl) : NULL;
            if (!s || !choice_ok(o->choices, s, sl)) {
                char vq[96];
                tbx_quote_bytes(vq, sizeof vq, s ? s : "", s ? sl : 0, 64);
                return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                               s ? "%s write option \"%s\" is \"%s\", not one of %s"
                                 : "%s write option \"%s\" is a string (%.0s%s), not a %s",
                               drv->name, o->key, vq, o->choices ? o->choices : "",
                               s ? "" : tbx_value_type_name(t));
            }
            break;
        default:
            return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, field,
                           "%s write option \"%s\" is declared with no usable type", drv->name,
                           o->key);
        }
    }
    return TBX_OK;
}

tbx_status tbx_writer_create_(tbx_writer **out, const tbx_driver *drv, const char *path,
                              const tbx_write_options *opt, uint32_t internal_flags,
                              const tbx_driver *const *known, tbx_error *err) {
    *out = NULL;
    const tbx_write_options o = *opt;
    if (o.alignment && !tbx_is_pow2(o.alignment))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "alignment",
                       "alignment %u is not a power of two", o.alignment);
    /* An option the format has no use for is refused, never ignored: the caller asked for
     * something this file would not have. */
    const uint32_t caps = tbx_driver_caps(drv);
    if (o.alignment && !(caps & TBX_FCAP_ALIGNMENT))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "alignment",
                       "%s files have no configurable alignment (alignment %u asked for)",
                       drv->name, o.alignment);
    if (o.compress_level != 0 && !(caps & TBX_FCAP_COMPRESSION))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "compress_level",
                       "%s files are not compressed (compression level %d asked for)",
                       drv->name, o.compress_level);
    if (o.digest && strcmp(o.digest, "none") != 0 && !(caps & TBX_FCAP_DIGESTS))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "digest",
                       "%s files record no digests (digest \"%s\" asked for)",
                       drv->name, o.digest);
    tbx_status ost = check_options(drv, o.options, err);
    if (ost != TBX_OK) return ost;
    if (o.version && !tbx_driver_writes_version(drv, o.version)) {
        char vs[160];
        tbx_versions_text(drv->write_versions, vs, sizeof vs);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "version",
                       "%s version %u cannot be written (this library writes %s)", drv->name,
                       o.version, vs);
    }
    tbx_alloc al;
    tbx_alloc_init(&al, o.allocator);
    tbx_writer *w = tbx_malloc(&al, sizeof *w);
    if (!w) return tbx_err_nomem(err, "writer");
    memset(w, 0, sizeof *w);
    w->al = al;
    w->opt = o;
    w->opt.allocator = NULL; /* copied into w->al */
    w->opt.digest = NULL;    /* the caller's string may not outlive the writer: keep a copy below */
    /* the version to write, checked above against the row: drivers read it from here and
     * check nothing themselves */
    w->opt.version = o.version ? o.version : drv->write_version;
    w->opt.options = NULL; /* the caller's value: a copy is kept (w->options) */
    w->opt.flags |= internal_flags & TBX_WRITE_QUANTIZING_; /* for the driver's layout */
    w->format = drv->format;
    w->known = known;
    w->drv = drv;
    w->current = -1;
    w->out.fd = -1;
    w->out.lock_fd = -1;
    w->out.slot = -1;
    tbx_names_init(&w->meta_names, &w->al, wmeta_key_of, w);
    tbx_names_init(&w->tensor_names, &w->al, wtensor_key_of, w);
    if (o.digest) {
        static const char *const known[] = { "sha256", "crc32c", "none" };
        for (size_t i = 0; i < 3; i++)
            if (strcmp(o.digest, known[i]) == 0) w->opt.digest = known[i];
        if (!w->opt.digest) {
            writer_free(w);
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "digest",
                           "unknown digest algorithm \"%s\" (sha256, crc32c or none)", o.digest);
        }
    }
    if (o.options && tbx_value_len(o.options)) {
        w->options = tbx_val_clone(&w->al, o.options);
        if (!w->options) {
            writer_free(w);
            return tbx_err_nomem(err, "write options");
        }
    }
    if (drv->w_check_options) {
        tbx_status cst = drv->w_check_options(w, err);
        if (cst != TBX_OK) {
            writer_free(w);
            return cst;
        }
    }
    unsigned oflags = ((o.flags & TBX_WRITE_OVERWRITE) ? TBX_OUT_OVERWRITE : 0u) |
                      ((internal_flags & TBX_WRITE_EDIT_) ? TBX_OUT_EDIT : 0u) |
                      ((o.flags & TBX_WRITE_NO_SYNC) ? TBX_OUT_NO_SYNC : 0u);
    tbx_status st = tbx_out_open(&w->out, &w->al, path, oflags, err);
    if (st != TBX_OK) { writer_free(w); return st; }
    *out = w;
    return TBX_OK;
}



_Static_assert(sizeof(void *) != 8 || sizeof(tbx_wtensor) == 40,
               "tbx_wtensor: 40 bytes on 64-bit hosts");

static tbx_status need_declare(tbx_writer *w, tbx_error *err, const char *what) {
    if (!w) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "writer", "NULL writer");
    if (w->state != TBX_WS_DECLARE)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, what,
                       "%s must be added before any tensor data is written", what);
    return TBX_OK;
}

static tbx_status add_meta(tbx_writer *w, const char *key, size_t key_len,
                           const tbx_value *value, bool borrow, tbx_error *err) {
    tbx_status st = need_declare(w, err, "metadata");
    if (st != TBX_OK) return st;
    if (!value || (!key && key_len))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "metadata", "NULL key or value");
    if (w->drv->w_check_meta) {
        st = w->drv->w_check_meta(w, key, key_len, value, err);
        if (st != TBX_OK) return st;
    }
    if (!tbx_grow(&w->al, (void **)&w->meta, &w->cap_meta, w->nmeta + 1, sizeof *w->meta))
        return tbx_err_nomem(err, "metadata table");
    tbx_meta_entry *e = &w->meta[w->nmeta];
    e->borrowed = borrow;
    e->key_len = key_len;
    if (borrow) {
        e->key = (char *)key;
        e->value = (tbx_value *)value;
    } else {
        e->key = tbx_memdup0(&w->al, key, key_len);
        e->value = tbx_val_clone(&w->al, value);
    }
    if (!borrow && (!e->key || !e->value)) {
        tbx_free(&w->al, e->key, key_len + 1);
        tbx_val_free(e->value);
        return tbx_err_nomem(err, "metadata");
    }
    uint64_t earlier;
    st = tbx_names_insert(&w->meta_names, w->nmeta, &earlier);
    if (st != TBX_OK) {
        char q[96];
        tbx_quote_bytes(q, sizeof q, key, key_len, 64);
        if (!borrow) {
            tbx_free(&w->al, e->key, key_len + 1);
            tbx_val_free(e->value);
        }
        if (st == TBX_E_NOMEM) return tbx_err_nomem(err, "metadata index");
        return tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "metadata.key",
                       "duplicate metadata key \"%s\"", q);
    }
    w->nmeta++;
    return TBX_OK;
}

tbx_status tbx_writer_add_meta(tbx_writer *w, const char *key, size_t key_len,
                               const tbx_value *value, tbx_error *err) {
    return add_meta(w, key, key_len, value, false, err);
}

tbx_status tbx_writer_add_meta_borrowed_(tbx_writer *w, const char *key, size_t key_len,
                                         const tbx_value *value, tbx_error *err) {
    return add_meta(w, key, key_len, value, true, err);
}

tbx_status tbx_writer_check_section_(tbx_writer *w, const char *name, uint32_t type,
                                     size_t len, tbx_error *err) {
    tbx_status st = need_declare(w, err, "sections");
    if (st != TBX_OK) return st;
    if (!name)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "section", "NULL name or data");
    if (!w->drv->w_check_section)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "section",
                       "%s files cannot hold section \"%s\"", w->drv->name, name);
    return w->drv->w_check_section(w, name, type, len, err);
}

tbx_status tbx_writer_add_section(tbx_writer *w, const char *name, uint32_t type,
                                  const void *data, size_t len, tbx_error *err) {
    if (w && !data && len)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "section", "NULL name or data");
    tbx_status st = tbx_writer_check_section_(w, name, type, len, err);
    if (st != TBX_OK) return st;
    if (!tbx_grow(&w->al, (void **)&w->sections, &w->cap_sections, w->nsections + 1,
                  sizeof *w->sections))
        return tbx_err_nomem(err, "section table");
    tbx_wsection *s = &w->sections[w->nsections];
    s->name = tbx_memdup0(&w->al, name, strlen(name));
    s->data = tbx_malloc(&w->al, len);
    if (!s->name || !s->data) {
        tbx_free(&w->al, s->name, s->name ? strlen(s->name) + 1 : 0);
        tbx_free(&w->al, s->data, len);
        return tbx_err_nomem(err, "section");
    }
    if (len) memcpy(s->data, data, len);
    s->len = len;
    s->type = type;
    w->nsections++;
    return TBX_OK;
}

tbx_status tbx_writer_add_sizevar(tbx_writer *w, const char *name, uint64_t value,
                                  tbx_error *err) {
    if (!w) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "writer", "NULL writer");
    if (!w->drv->w_add_sizevar)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "sizevars",
                       "%s files cannot store size variables", w->drv->name);
    return w->drv->w_add_sizevar(w, name, value, err);
}

/* Keeps `quant` for the tensor being declared (index w->ntensors): a checked copy, or the
 * converted file's own description when the writer borrows the descriptors (tbx_convert). */
static tbx_status add_quant(tbx_writer *w, const tbx_tensor_desc *d,
                            const tbx_quant_info *quant, const char *q, tbx_error *err) {
    tbx_status st = tbx_quant_desc_check(quant, d->shape, d->ndim, q, err);
    if (st != TBX_OK) return st;
    if (!tbx_grow(&w->al, (void **)&w->quants, &w->cap_quants, w->nquants + 1,
                  sizeof *w->quants))
        return tbx_err_nomem(err, "quantization table");
    const tbx_quant_info *kept = quant;
    if (!w->borrow_descs && !(kept = tbx_quant_clone(&w->al, quant)))
        return tbx_err_nomem(err, "quantization description");
    w->quants[w->nquants++] = (struct tbx_wquant){w->ntensors, kept, !w->borrow_descs};
    return TBX_OK;
}

/* Does the format store the description exactly? Its w_check_quant decides; without one only
 * a ggml block type (the dtype is the description) passes. Never dropped silently. */
static tbx_status check_quant(tbx_writer *w, tbx_wtensor *t, const tbx_tensor_desc *d,
                              const tbx_quant_info *qi, const char *q, tbx_error *err) {
    if (qi->method == TBX_QUANT_GGML && qi->code_dtype != d->dtype)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant.code_dtype",
                       "tensor \"%s\": a ggml description's code dtype must be the tensor's "
                       "dtype", q);
    if (w->drv->w_check_quant)
        return w->drv->w_check_quant(w, t, tbx_writer_tensor_quant_(w, w->ntensors), err);
    if (qi->method == TBX_QUANT_GGML) return TBX_OK;
    return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                   "tensor \"%s\": %s files cannot store %s quantization parameters", q,
                   w->drv->name, tbx_quant_method_name(qi->method));
}


tbx_status tbx_writer_add_tensor(tbx_writer *w, const tbx_tensor_desc *desc, uint64_t *index,
                                 tbx_error *err) {
    return tbx_writer_add_quant_tensor(w, desc, NULL, index, err);
}

tbx_status tbx_writer_add_quant_tensor(tbx_writer *w, const tbx_tensor_desc *desc,
                                       const tbx_quant_info *quant, uint64_t *index,
                                       tbx_error *err) {
    /* versioned: fields past a shorter caller's struct_size are 0 */
    tbx_tensor_desc dd, *d = desc ? &dd : NULL;
    if (desc) {
        memset(&dd, 0, sizeof dd);
        size_t n = tbx_struct_bytes(desc->struct_size, sizeof dd);
        memcpy(&dd, desc, n);
    }
    tbx_status st = need_declare(w, err, "tensors");
    if (st != TBX_OK) return st;
    if (!d || !d->name || (d->ndim && !d->shape))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor", "NULL descriptor field");
    size_t nl = d->name_len ? d->name_len : strlen(d->name);
    char q[96];
    tbx_quote_bytes(q, sizeof q, d->name, nl, 64);
    /* The dtype as this format knows it: a core dtype or one of its own driver's. A dtype
     * another driver declares (MCF's quantization families) is not this format's: refused as
     * such before anything is sized with that driver's rules. */
    const tbx_driver *own[2] = {w->drv, NULL};
    const tbx_dtype_info *di = tbx_dtype_get_in(own, d->dtype);
    if (!di) {
        const tbx_dtype_info *other = w->known ? tbx_dtype_get_in(w->known, d->dtype) : NULL;
        if (other)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                           "tensor \"%s\": dtype %s belongs to another format; %s files cannot "
                           "store it", q, other->name, w->drv->name);
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": invalid dtype %d", q, (int)d->dtype);
    }
    bool deferred = w->drv->w_dtype_in_check && di->block_size <= 1 &&
                    !(di->flags & (TBX_DTF_BLOCK | TBX_DTF_SHAPED));
    if (w->drv->w_dtype_ok && !deferred && !w->drv->w_dtype_ok(d->dtype))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": %s files cannot store dtype %s", q,
                       w->drv->name, di->name);
    if (nl == 0 || memchr(d->name, 0, nl))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor.name",
                       "tensor name \"%s\" is empty or contains NUL", q);
    if (d->ndim > UINT16_MAX || (unsigned)d->dtype > UINT8_MAX)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": the writer takes at most 65535 dimensions (%u given) and "
                       "dtype values below 256 (%d)", q, d->ndim, (int)d->dtype);
    if (!tbx_grow(&w->al, (void **)&w->tensors, &w->cap_tensors, w->ntensors + 1,
                  sizeof *w->tensors))
        return tbx_err_nomem(err, "tensor table");
    tbx_wtensor *t = &w->tensors[w->ntensors];
    memset(t, 0, sizeof *t);
    t->dtype = (uint8_t)d->dtype;
    t->ndim = (uint16_t)d->ndim;
    t->has_data = d->has_data != 0;
    if (nl > UINT32_MAX)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "tensor.name",
                       "tensor name \"%s\" of %zu bytes: the writer takes names below 4 GiB", q,
                       nl);
    uint64_t nelems = 1;
    for (uint32_t i = 0; i < d->ndim; i++)
        if (!tbx_mul_u64(nelems, d->shape[i], &nelems))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": element count overflows", q);
    if (t->has_data) {
        st = tbx_dtype_nbytes_shape_in(own, d->dtype, d->shape, d->ndim, &t->nbytes);
        if (st == TBX_E_UNSUPPORTED) t->nbytes = 0; /* the driver must size it */
        else if (st != TBX_OK)
            return tbx_err(err, st, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": shape does not fit dtype %s", q, di->name);
    }
    t->name_len = (uint32_t)nl;
    if (w->borrow_descs) {
        t->name = (char *)d->name;
        t->shape = (uint64_t *)d->shape;
    } else {
        t->name = tbx_memdup0(&w->al, d->name, nl);
        t->shape = tbx_malloc(&w->al, d->ndim * sizeof(uint64_t));
    }
    if (!w->borrow_descs && (!t->name || !t->shape)) {
        tbx_free(&w->al, t->name, nl + 1);
        tbx_free(&w->al, t->shape, d->ndim * sizeof(uint64_t));
        return tbx_err_nomem(err, "tensor");
    }
    if (d->ndim && !w->borrow_descs) memcpy(t->shape, d->shape, d->ndim * sizeof(uint64_t));
    const size_t nq0 = w->nquants;
    if (quant) st = add_quant(w, d, quant, q, err);
    if (st == TBX_OK && w->drv->w_check_tensor) st = w->drv->w_check_tensor(w, t, err);
    if (st == TBX_OK && quant) st = check_quant(w, t, d, quant, q, err);
    uint64_t earlier;
    if (st == TBX_OK && !w->lent_names) {
        st = tbx_names_insert(&w->tensor_names, w->ntensors, &earlier);
        if (st == TBX_E_DUPLICATE)
            st = tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "tensor.name",
                         "duplicate tensor name \"%s\"", q);
        else if (st == TBX_E_NOMEM)
            st = tbx_err_nomem(err, "tensor index");
    }
    if (st != TBX_OK) {
        while (w->nquants > nq0) wquant_pop(w);
        if (!w->borrow_descs) {
            tbx_free(&w->al, t->name, nl + 1);
            tbx_free(&w->al, t->shape, d->ndim * sizeof(uint64_t));
        }
        return st;
    }
    if (index) *index = w->ntensors;
    w->ntensors++;
    return TBX_OK;
}


tbx_status tbx_writer_borrow_descs_(tbx_writer *w, size_t n, const tbx_names *names,
                                    tbx_error *err) {
    tbx_status st = need_declare(w, err, "tensors");
    if (st != TBX_OK) return st;
    if (w->ntensors)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "tensors",
                       "borrowed descriptors must be set before the first tensor");
    w->borrow_descs = true;
    if (n > w->cap_tensors) {
        size_t bytes;
        if (__builtin_mul_overflow(n, sizeof *w->tensors, &bytes))
            return tbx_err_nomem(err, "tensor table");
        void *p = w->tensors ? tbx_realloc(&w->al, w->tensors, w->cap_tensors * sizeof *w->tensors,
                                           bytes)
                             : tbx_malloc(&w->al, bytes);
        if (!p) return tbx_err_nomem(err, "tensor table");
        w->tensors = p;
        w->cap_tensors = n;
    }
    w->lent_names = names;
    if (!names && tbx_names_reserve(&w->tensor_names, n) != TBX_OK)
        return tbx_err_nomem(err, "tensor index");
    return TBX_OK;
}

static tbx_status begin_data(tbx_writer *w, tbx_error *err) {
    if (w->state != TBX_WS_DECLARE) return TBX_OK;
    tbx_status st = w->drv->w_layout(w, err);
    if (st != TBX_OK) return st;
    w->state = TBX_WS_DATA;
    return TBX_OK;
}

static tbx_status tensor_done(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    t->done = true;
    w->current = -1;
    return w->drv->w_tensor_done ? w->drv->w_tensor_done(w, t, err) : TBX_OK;
}

/* The checks every piece of tensor data passes: *end is where the tensor's bytes received
 * will end with these len. */
static tbx_status data_checks(tbx_writer *w, uint64_t index, uint64_t len, uint64_t *written,
                              uint64_t *end, tbx_error *err) {
    if (!w) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "writer", "NULL writer");
    if (w->state == TBX_WS_DONE)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "writer", "writer already finished");
    if (index >= w->ntensors)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                       "tensor index %llu out of range", (unsigned long long)index);
    tbx_wtensor *t = &w->tensors[index];
    if (w->current >= 0 && (uint64_t)w->current != index)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\" is incomplete (%llu of %llu bytes); finish it before \"%s\"",
                       w->tensors[w->current].name,
                       (unsigned long long)w->cur_written,
                       (unsigned long long)w->tensors[w->current].nbytes, t->name);
    if (!t->has_data || t->done)
        return tbx_err(err, TBX_E_RANGE, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\" takes no (more) data", t->name);
    /* not current and not done: nothing of it was received yet */
    *written = w->current >= 0 ? w->cur_written : 0;
    if (!tbx_add_u64(*written, len, end) || *end > t->nbytes)
        return tbx_err(err, TBX_E_RANGE, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": %llu + %llu bytes exceed its size of %llu bytes", t->name,
                       (unsigned long long)*written, (unsigned long long)len,
                       (unsigned long long)t->nbytes);
    return begin_data(w, err);
}

static tbx_status data_received(tbx_writer *w, uint64_t index, uint64_t end, tbx_error *err) {
    tbx_wtensor *t = &w->tensors[index];
    w->cur_written = end;
    w->current = (int64_t)index;
    return end == t->nbytes ? tensor_done(w, t, err) : TBX_OK;
}

tbx_status tbx_writer_write_tensor(tbx_writer *w, uint64_t index, const void *data, size_t len,
                                   tbx_error *err) {
    if (w && !data && len)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "data", "NULL data");
    uint64_t written, end;
    tbx_status st = data_checks(w, index, (uint64_t)len, &written, &end, err);
    if (st != TBX_OK) return st;
    tbx_wtensor *t = &w->tensors[index];
    w->cur_written = written;
    if (w->drv->w_data) st = w->drv->w_data(w, t, data, len, err);
    else st = tbx_out_pwrite(&w->out, t->offset + written, data, len, err);
    if (st != TBX_OK) return st;
    return data_received(w, index, end, err);
}

bool tbx_writer_copies_fd_(const tbx_writer *w) {
    return w && !w->drv->w_data && w->state != TBX_WS_DONE;
}

tbx_status tbx_writer_copy_fd_(tbx_writer *w, uint64_t index, int fd, uint64_t fd_off,
                               uint64_t len, tbx_error *err) {
    if (w && w->drv->w_data)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "writer",
                       "the %s writer takes tensor bytes only through tbx_writer_write_tensor",
                       w->drv->name);
    uint64_t written, end;
    tbx_status st = data_checks(w, index, len, &written, &end, err);
    if (st != TBX_OK) return st;
    tbx_wtensor *t = &w->tensors[index];
    w->cur_written = written;
    st = tbx_out_copy_fd(&w->out, t->offset + written, fd, fd_off, len, err);
    if (st != TBX_OK) return st;
    return data_received(w, index, end, err);
}

tbx_status tbx_writer_finish(tbx_writer *w, tbx_error *err) {
    if (!w) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "writer", "NULL writer");
    tbx_status st = begin_data(w, err);
    for (size_t i = 0; st == TBX_OK && i < w->ntensors; i++) {
        tbx_wtensor *t = &w->tensors[i];
        if (!t->has_data || t->done) continue;
        uint64_t written = w->current >= 0 && (size_t)w->current == i ? w->cur_written : 0;
        if (written != t->nbytes)
            st = tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "tensor",
                         "tensor \"%s\" received %llu of its %llu bytes", t->name,
                         (unsigned long long)written, (unsigned long long)t->nbytes);
        else
            st = tensor_done(w, t, err); /* zero-byte tensors */
    }
    if (st == TBX_OK && w->drv->w_finish) st = w->drv->w_finish(w, err);
    if (st == TBX_OK) st = tbx_out_commit(&w->out, w->end, err);
    if (st == TBX_OK) w->state = TBX_WS_DONE;
    writer_free(w);
    return st;
}

tbx_status tbx_writer_set_source_dir_(tbx_writer *w, const char *name, size_t len, tbx_error *err) {
    if (w->nmeta || w->nsections || w->ntensors)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "writer",
                       "the source directory must be set before anything is added");
    if (memchr(name, 0, len))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "writer", "directory name with NUL");
    char *c = tbx_memdup0(&w->al, name, len);
    if (!c) return tbx_err_nomem(err, "source directory");
    if (w->src_dir) tbx_free(&w->al, w->src_dir, strlen(w->src_dir) + 1);
    w->src_dir = c;
    return TBX_OK;
}

/* Copies bytes [pos, pos + len) of input tensor i into writer tensor wi: by the kernel when
 * both sides allow it (tbx_file_fd_range_, tbx_writer_copy_fd_), else through buf. */
tbx_status tbx_writer_copy_range_(tbx_file *in, uint64_t i, uint64_t pos, uint64_t len,
                                  tbx_writer *w, uint64_t wi, void *buf, size_t cap,
                                  tbx_error *err) {
    int fd;
    uint64_t off;
    if (tbx_writer_copies_fd_(w) && tbx_file_fd_range_(in, i, pos, len, &fd, &off))
        return tbx_writer_copy_fd_(w, wi, fd, off, len, err);
    if (!buf || cap == 0)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "buf", "no copy buffer");
    tbx_status st = TBX_OK;
    for (uint64_t p = 0; st == TBX_OK && p < len; p += cap) {
        size_t n = (size_t)(len - p < cap ? len - p : cap);
        st = tbx_tensor_read_range(in, i, pos + p, buf, n, err);
        if (st == TBX_OK) st = tbx_writer_write_tensor(w, wi, buf, n, err);
    }
    return st;
}
