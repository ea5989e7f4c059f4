/*
 * read.c - an open file's handle and the public reading API: tbx_component_read, tbx_tensor_read
 * (whole, range, map, f32), sections.
 *
 * The façade's tbx_open_* (src/api/open.c) pick a source (pread, mmap, memory or callback),
 * detect the format from the first bytes, and hand the handle made here (tbx_file_new_) to the
 * format driver, which fills metadata, tensors and sections through tbx_file_add_* (src/core,
 * the layer below drivers); tbx_file_open_done_ ends the open. Reads of tensor bytes then go
 * through the source, or through the driver when data is encoded or a check is pending. Many
 * components at once: batch.c; validation: validate.c.
 */
#include "access_int.h"
#include "plain.h"
#include "split.h"

#include <inttypes.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>


/* The source of component k (an error naming the tensor when the driver set a bad index). */
static const tbx_source *comp_source(const tbx_file *f, const tbx_tensor *t,
                                     const tbx_component *k, tbx_error *err) {
    const tbx_source *s = tbx_file_source(f, k->src);
    if (!s)
        tbx_err(err, TBX_E_STATE, k->offset, t->name, "tensor \"%s\": no source %" PRIu32,
                t->name, k->src);
    return s;
}


/* ------------------------------------------------------------------------------------------ */
/* Opening and closing                                                                         */
/* ------------------------------------------------------------------------------------------ */

void tbx_close(tbx_file *f) {
    if (!f) return;
    if (f->drv && f->drv->close) f->drv->close(f);
    const tbx_alloc al = f->al;
    tbx_file_model_free(f);
    if (f->part_names) {
        for (size_t i = 0; i <= f->nextra_src; i++)
            if (f->part_names[i]) tbx_free(&al, f->part_names[i], strlen(f->part_names[i]) + 1);
        tbx_free(&al, f->part_names, (f->nextra_src + 1) * sizeof *f->part_names);
    }
    for (size_t i = 0; i < f->nextra_src; i++) tbx_source_close(&f->extra_src[i]);
    tbx_free(&al, f->extra_src, f->nextra_src * sizeof *f->extra_src);
    if (f->path) tbx_free(&al, f->path, strlen(f->path) + 1);
    tbx_source_close(&f->src);
    tbx_provider_free(f->prov); /* after its sources */
    tbx_free(&al, f, sizeof *f);
}

/* Allocates a handle with the caller's allocator and options; the source is set by the caller. */
tbx_status tbx_file_new_(tbx_file **out, const tbx_open_options *opt, tbx_error *err) {
    tbx_alloc al;
    tbx_alloc_init(&al, opt ? opt->allocator : NULL);
    tbx_file *f = tbx_malloc(&al, sizeof *f);
    if (!f) return tbx_err_nomem(err, "file handle");
    memset(f, 0, sizeof *f);
    f->al = al;
    f->src.fd = -1;
    tbx_limits_default(&f->limits);
    if (opt && opt->limits) {
        /* a shorter (older) caller's struct: the fields it lacks keep their defaults */
        memcpy(&f->limits, opt->limits, tbx_struct_bytes(opt->limits->struct_size, sizeof f->limits));
        f->limits.struct_size = sizeof f->limits;
    }
    if (opt) {
        f->flags = opt->flags;
        f->format = opt->format;
        f->on_problem = opt->on_problem;
        f->problem_ud = opt->problem_ud;
        /* a caller built against the older, shorter struct has no `threads` */
        if (!opt->struct_size ||
            opt->struct_size >= offsetof(tbx_open_options, threads) + sizeof opt->threads)
            f->threads = opt->threads;
        if (!opt->struct_size ||
            opt->struct_size >= offsetof(tbx_open_options, progress_ud) + sizeof(void *)) {
            f->progress = opt->progress;
            f->progress_ud = opt->progress_ud;
        }
    }
    tbx_file_model_init(f);
    *out = f;
    return TBX_OK;
}

/* Does any source of f read through a mapping? */
static bool file_mapped(const tbx_file *f) {
    if (f->src.kind == TBX_SRC_MMAP) return true;
    for (size_t i = 0; i < f->nextra_src; i++)
        if (f->extra_src[i].kind == TBX_SRC_MMAP) return true;
    return false;
}

/* The end of an open by path: the parse read mapped fields checked only against faults
 * (tbx_source_fast_ok), so a mapped file must still be whole now; and an open that failed on a
 * mapped file that shrank failed on its zeros: the shrink is the error. Closes f on failure. */
/* After the driver's open: the version it found must be one its row declares readable. */
static tbx_status check_read_version(const tbx_file *f, tbx_error *err) {
    if (tbx_driver_reads_version(f->drv, f->version)) return TBX_OK;
    char vs[160];
    tbx_versions_text(f->drv->read_versions, vs, sizeof vs);
    return tbx_err(err, TBX_E_BAD_VERSION, TBX_NO_OFFSET, "version",
                   "%s version %" PRIu32 " cannot be read (this library reads %s)", f->drv->name,
                   f->version, vs);
}

tbx_status tbx_file_open_done_(tbx_file *f, tbx_status st, tbx_file **out, tbx_error *err) {
    if (st == TBX_OK) st = check_read_version(f, err);
    if (st == TBX_OK) {
        if (file_mapped(f)) st = tbx_file_check_sources(f, err);
        if (st == TBX_OK) st = tbx_file_check_shared_data(f, err);
        if (st == TBX_OK) {
            *out = f;
            return TBX_OK;
        }
    } else if (file_mapped(f)) {
        tbx_error shrank;
        if (tbx_file_check_sources(f, &shrank) != TBX_OK) { /* it replaces the open's error */
            if (err) *err = shrank;
            st = TBX_E_TRUNCATED;
        }
    }
    tbx_close(f);
    return st;
}


tbx_status tbx_bad_index_(tbx_error *err, const tbx_file *f, uint64_t i) {
    if (!f) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "file", "NULL file handle");
    return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                   "tensor index %llu out of range (file has %llu tensors)",
                   (unsigned long long)i, (unsigned long long)f->ntensors);
}

/* Does raw component c still need its driver to look at the bytes (a digest to verify)? */
static bool raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c) {
    return f->drv->raw_pending && f->drv->raw_pending(f, t, c);
}

bool tbx_comp_served_raw(const tbx_file *f, const tbx_component *k) {
    (void)f;
    return k->encoding == TBX_ENC_RAW && !k->xform;
}

/* Must a read of component c go through the driver's read_component? */
bool tbx_comp_via_driver_(const tbx_file *f, const tbx_tensor *t, uint32_t c) {
    return f->drv->read_component && (!tbx_comp_served_raw(f, &t->comp[c]) || raw_pending(f, t, c));
}

/* Before raw bytes are handed out without passing through the driver: its pending check. */
static tbx_status run_pending_check(tbx_file *f, const tbx_tensor *t, uint32_t c,
                                    tbx_error *err) {
    if (!raw_pending(f, t, c)) return TBX_OK;
    if (!f->drv->check_component)
        return tbx_err(err, TBX_E_STATE, t->comp[c].offset, "component",
                       "tensor \"%s\": driver has a pending check but no way to run it", t->name);
    return f->drv->check_component(f, t, c, err);
}

/* Reads component c fully into buf (exactly comp->nbytes bytes): raw bytes straight from the
 * source, encoded ones (and raw ones with a pending check) through the driver. */
tbx_status tbx_comp_read_into_(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                               tbx_error *err) {
    const tbx_component *k = &t->comp[c];
    if (tbx_comp_via_driver_(f, t, c)) return f->drv->read_component(f, t, c, buf, err);
    if (!tbx_comp_served_raw(f, k))
        return tbx_err(err, TBX_E_UNSUPPORTED, k->offset, "component.encoding",
                       "tensor \"%s\": encoded component cannot be read by this driver", t->name);
    if (k->nbytes > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, k->offset, "tensor", "too large");
    const tbx_source *src = comp_source(f, t, k, err);
    if (!src) return TBX_E_STATE;
    return tbx_source_read(src, k->offset, buf, (size_t)k->nbytes, t->name, err);
}

tbx_status tbx_component_read(tbx_file *f, uint64_t i, uint32_t c, void *buf, size_t cap,
                              size_t *needed, tbx_error *err) {
    if (!f || i >= f->ntensors) return tbx_bad_index_(err, f, i);
    const tbx_tensor *t = &f->tensors[i];
    if (c >= t->ncomp)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "component",
                       "tensor \"%s\" has %u components, no component %u", t->name, t->ncomp, c);
    uint64_t n = t->comp[c].nbytes;
    if (n > SIZE_MAX)
        return tbx_err(err, TBX_E_OVERFLOW, t->comp[c].offset, "tensor",
                       "tensor \"%s\": %llu bytes do not fit in memory", t->name, (unsigned long long)n);
    if (needed) *needed = (size_t)n;
    if (!buf || cap < n)
        return tbx_err(err, TBX_E_BUFFER_TOO_SMALL, TBX_NO_OFFSET, "buffer",
                       "tensor \"%s\" needs a buffer of %llu bytes, got %zu", t->name,
                       (unsigned long long)n, buf ? cap : 0);
    return tbx_comp_read_into_(f, t, c, buf, err);
}

static tbx_status need_dense(tbx_error *err, const tbx_tensor *t) {
    if (t->ncomp == 0)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor", "tensor \"%s\" has no data", t->name);
    if (t->ncomp != 1 || t->layout != TBX_LAYOUT_DENSE)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\" is %s with %u components; read its components", t->name,
                       tbx_layout_name(t->layout), t->ncomp);
    return TBX_OK;
}

tbx_status tbx_tensor_read(tbx_file *f, uint64_t i, void *buf, size_t cap, size_t *needed,
                           tbx_error *err) {
    if (!f || i >= f->ntensors) return tbx_bad_index_(err, f, i);
    tbx_status st = need_dense(err, &f->tensors[i]);
    if (st != TBX_OK) return st;
    return tbx_component_read(f, i, 0, buf, cap, needed, err);
}

/* Bytes [pos, pos + len) of component c (range already checked): raw ones straight from the
 * source, encoded ones through the driver's decoding cursor; any pending check first. */
static tbx_status read_comp_range(tbx_file *f, const tbx_tensor *t, uint32_t c, uint64_t pos,
                                  void *buf, size_t len, tbx_error *err) {
    const tbx_component *k = &t->comp[c];
    tbx_status st;
    if (!tbx_comp_served_raw(f, k)) {
        if (!f->drv->read_component_range)
            return tbx_err(err, TBX_E_UNSUPPORTED, k->offset, "tensor",
                           "tensor \"%s\" is stored encoded and this format cannot read it in "
                           "ranges; read it whole", t->name);
        if ((st = run_pending_check(f, t, c, err)) != TBX_OK) return st;
        return f->drv->read_component_range(f, t, c, pos, buf, len, err);
    }
    const tbx_source *src = comp_source(f, t, k, err);
    if (!src) return TBX_E_STATE;
    if ((st = run_pending_check(f, t, c, err)) != TBX_OK) return st;
    if (len < k->nbytes) tbx_source_hint(src, k->offset, k->nbytes); /* read in parts */
    return tbx_source_read(src, k->offset + pos, buf, len, t->name, err);
}

void tbx_tensor_read_next_(tbx_file *f, uint64_t i, uint64_t pos, uint64_t len) {
    if (!f || i >= f->ntensors || !f->tensors[i].ncomp) return;
    const tbx_tensor *t = &f->tensors[i];
    const tbx_component *k = &t->comp[0];
    uint64_t end;
    if (!tbx_comp_served_raw(f, k) || !tbx_add_u64(pos, len, &end) || end > k->nbytes) return;
    const tbx_source *src = tbx_file_source(f, k->src);
    if (src) tbx_source_hint_next(src, k->offset + pos, len);
}

tbx_status tbx_component_read_range(tbx_file *f, uint64_t i, uint32_t c, uint64_t pos,
                                    void *buf, size_t len, tbx_error *err) {
    if (!f || i >= f->ntensors) return tbx_bad_index_(err, f, i);
    const tbx_tensor *t = &f->tensors[i];
    if (c >= t->ncomp)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "component",
                       "tensor \"%s\" has %u components, no component %u", t->name, t->ncomp, c);
    const tbx_component *k = &t->comp[c];
    uint64_t end;
    if (!tbx_add_u64(pos, len, &end) || end > k->nbytes)
        return tbx_err(err, TBX_E_RANGE, TBX_NO_OFFSET, "range",
                       "tensor \"%s\" component %u: range [%llu, +%zu) outside its %llu bytes",
                       t->name, c, (unsigned long long)pos, len, (unsigned long long)k->nbytes);
    if (len && !buf)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "buf", "NULL buffer");
    return read_comp_range(f, t, c, pos, buf, len, err);
}

tbx_status tbx_tensor_read_range(tbx_file *f, uint64_t i, uint64_t pos, void *buf, size_t len,
                                 tbx_error *err) {
    if (!f || i >= f->ntensors) return tbx_bad_index_(err, f, i);
    const tbx_tensor *t = &f->tensors[i];
    tbx_status st = need_dense(err, t);
    if (st != TBX_OK) return st;
    const tbx_component *k = &t->comp[0];
    uint64_t end;
    if (!tbx_add_u64(pos, len, &end) || end > k->nbytes)
        return tbx_err(err, TBX_E_RANGE, TBX_NO_OFFSET, "range",
                       "tensor \"%s\": range [%llu, +%zu) outside its %llu bytes", t->name,
                       (unsigned long long)pos, len, (unsigned long long)k->nbytes);
    return tbx_component_read_range(f, i, 0, pos, buf, len, err);
}

tbx_status tbx_tensor_map(tbx_file *f, uint64_t i, const void **ptr, size_t *len, tbx_error *err) {
    if (!f || i >= f->ntensors) return tbx_bad_index_(err, f, i);
    const tbx_tensor *t = &f->tensors[i];
    tbx_status st = need_dense(err, t);
    if (st != TBX_OK) return st;
    const tbx_component *k = &t->comp[0];
    const uint8_t *p = NULL;
    if (tbx_comp_served_raw(f, k))
        p = tbx_source_ptr(tbx_file_source(f, k->src), k->offset, k->nbytes);
    if (!p)
        return tbx_err(err, TBX_E_UNSUPPORTED, k->offset, "tensor",
                       "tensor \"%s\" cannot be mapped (file not mapped or data encoded)", t->name);
    if ((st = run_pending_check(f, t, 0, err)) != TBX_OK) return st;
    /* the file still holds the bytes now (a file that shrank later: see the header) */
    if ((st = tbx_source_check(tbx_file_source(f, k->src), k->offset, k->nbytes, t->name, err)) !=
        TBX_OK)
        return st;
    if (ptr) *ptr = p;
    if (len) *len = (size_t)k->nbytes;
    return TBX_OK;
}

tbx_status tbx_file_check_sources(const tbx_file *f, tbx_error *err) {
    if (!f) return TBX_OK;
    for (size_t i = 0; i <= f->nextra_src; i++) {
        const tbx_source *s = i ? &f->extra_src[i - 1] : &f->src;
        const char *name = f->part_names && f->part_names[i] ? f->part_names[i]
                           : f->path                       ? f->path
                                                           : "file";
        tbx_status st = tbx_source_intact(s, name, err);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

tbx_status tbx_check_input(const tbx_file *f, tbx_error *err) {
    if (!f) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "file", "NULL file handle");
    return tbx_file_check_sources(f, err);
}

/* Elements per byte-aligned group of a dtype and that group's bytes (block types: one block;
 * packed types: the smallest run of elements ending on a byte boundary). */
static void dtype_group(const tbx_dtype_info *di, uint64_t *elems, uint64_t *bytes) {
    if (di->block_bytes) { *elems = di->block_size; *bytes = di->block_bytes; return; }
    uint32_t bits = di->bits, g = 8;
    while (g % bits) g += 8; /* lcm(bits, 8) */
    *elems = g / bits;
    *bytes = g / 8;
}

/* The parameters of a linearly quantized dense tensor as f32 arrays, with their walks. */
typedef struct linear_params {
    tbx_split_geom gs, gz;
    float *scales, *zeros;
    size_t ns, nz;
} linear_params;

static void linear_params_free(tbx_file *f, linear_params *lp) {
    tbx_free(&f->al, lp->scales, lp->ns * sizeof(float));
    tbx_free(&f->al, lp->zeros, lp->nz * sizeof(float));
}

/* Decodes one parameter's values (held by the description) to n f32 values. */
static tbx_status linear_values(tbx_file *f, const tbx_tensor *t, const tbx_quant_param *p,
                                const char *what, float **dst, size_t *n, tbx_error *err) {
    const tbx_dtype_info *vi = tbx_dtype_core_get(p->dtype);
    uint64_t nbytes;
    if (!vi || tbx_dtype_info_nbytes(vi, p->count, &nbytes) != TBX_OK || nbytes > SIZE_MAX ||
        p->count > SIZE_MAX / sizeof(float))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                       "tensor \"%s\": %s of dtype %s cannot be decoded", t->name, what,
                       vi ? vi->name : "?");
    *n = p->count ? (size_t)p->count : 1;
    *dst = tbx_malloc(&f->al, *n * sizeof(float));
    if (!*dst) { *n = 0; return tbx_err_nomem(err, "quantization parameters"); }
    if (p->count && tbx_decode_f32_info(tbx_dtype_core_get(p->dtype), p->dtype, p->values, (size_t)nbytes, p->count, *dst) != TBX_OK)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                       "tensor \"%s\": %s of dtype %s cannot be decoded", t->name, what,
                       vi->name);
    return TBX_OK;
}

/* tbx_tensor_read_f32 of a dense tensor with a linear description: the parameters must be
 * held by the description (values) with a scope the in-place kernel walks. */
static tbx_status linear_params_get(tbx_file *f, const tbx_tensor *t, linear_params *lp,
                                    tbx_error *err) {
    const tbx_quant_info *q = t->quant;
    const bool zero = q->zero.scope != TBX_QSCOPE_NONE;
    if (!q->scale.values || (zero && !q->zero.values) ||
        tbx_affine_geom_init(&lp->gs, &q->scale, t->shape, t->ndim) != TBX_OK ||
        tbx_affine_geom_init(&lp->gz, &q->zero, t->shape, t->ndim) != TBX_OK)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant",
                       "tensor \"%s\": its linear quantization (scale scope %s, zero scope %s) "
                       "cannot be applied to a dense tensor", t->name,
                       tbx_quant_scope_name(q->scale.scope), tbx_quant_scope_name(q->zero.scope));
    tbx_status st = linear_values(f, t, &q->scale, "scales", &lp->scales, &lp->ns, err);
    if (st == TBX_OK && zero)
        st = linear_values(f, t, &q->zero, "zero points", &lp->zeros, &lp->nz, err);
    if (st != TBX_OK) {
        linear_params_free(f, lp);
        memset(lp, 0, sizeof *lp);
    }
    return st;
}

static tbx_status read_f32_dense(tbx_file *f, const tbx_tensor *t, const tbx_dtype_info *di,
                                 uint64_t first, uint64_t count, float *out, tbx_error *err);

tbx_status tbx_tensor_read_f32(tbx_file *f, uint64_t i, uint64_t first, uint64_t count,
                               float *out, tbx_error *err) {
    if (!f || i >= f->ntensors) return tbx_bad_index_(err, f, i);
    if (!out && count) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "out", "NULL output");
    const tbx_tensor *t = &f->tensors[i];
    const bool dense = t->ncomp <= 1 && t->layout == TBX_LAYOUT_DENSE;
    tbx_status st;
    if (dense && (st = need_dense(err, t)) != TBX_OK) return st;
    uint64_t last;
    if (!tbx_add_u64(first, count, &last) || last > t->nelems)
        return tbx_err(err, TBX_E_RANGE, TBX_NO_OFFSET, "range",
                       "tensor \"%s\": elements [%llu, +%llu) outside its %llu elements", t->name,
                       (unsigned long long)first, (unsigned long long)count,
                       (unsigned long long)t->nelems);
    /* sparse / grouped layouts decode in their driver, when it can */
    if (!dense) return f->drv->read_f32 ? f->drv->read_f32(f, i, first, count, out, err)
                                        : need_dense(err, t);
    const tbx_dtype_info *di = tbx_file_dtype(f, t->dtype);
    /* a driver-specific dtype (no core decoder: shaped MCF families, block types without a
     * registered dequantizer) goes to the driver that claims it with a read_f32 hook */
    const bool driver_dtype = di && ((di->flags & TBX_DTF_SHAPED) ||
                                     ((di->flags & TBX_DTF_BLOCK) && !tbx_dequant_for(t->dtype)));
    if (driver_dtype && f->drv->read_f32) return f->drv->read_f32(f, i, first, count, out, err);
    if (!di || driver_dtype || (di->flags & TBX_DTF_COMPLEX))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "dtype",
                       "tensor \"%s\": dtype %s cannot be decoded to f32", t->name,
                       di ? di->name : "?");
    /* linear quantization with its parameters held apart (OINF v2): the codes decoded below,
     * then (code - zero) * scale */
    linear_params lp;
    memset(&lp, 0, sizeof lp);
    if (t->quant && t->quant->method == TBX_QUANT_LINEAR &&
        (st = linear_params_get(f, t, &lp, err)) != TBX_OK)
        return st;
    st = count ? read_f32_dense(f, t, di, first, count, out, err) : TBX_OK;
    if (st == TBX_OK && lp.scales && count)
        tbx_dequant_affine_inplace(&lp.gs, &lp.gz, lp.scales, lp.zeros, first, count, out);
    linear_params_free(f, &lp);
    return st;
}

/* The dense decoding of tbx_tensor_read_f32 (range checked, count > 0). */
static tbx_status read_f32_dense(tbx_file *f, const tbx_tensor *t, const tbx_dtype_info *di,
                                 uint64_t first, uint64_t count, float *out, tbx_error *err) {
    tbx_status st = TBX_OK;
    const uint64_t last = first + count;
    uint64_t ge, gb;
    dtype_group(di, &ge, &gb);
    if ((di->flags & TBX_DTF_BLOCK) && (first % ge || (count % ge && last != t->nelems)))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "range",
                       "tensor \"%s\": %s ranges must start and end on %llu-element blocks",
                       t->name, di->name, (unsigned long long)ge);
    const tbx_component *k = &t->comp[0];
    bool direct = tbx_comp_served_raw(f, k);
    const tbx_source *ksrc = NULL;
    if (direct) {
        ksrc = comp_source(f, t, k, err);
        if (!ksrc) return TBX_E_STATE;
        if ((st = run_pending_check(f, t, 0, err)) != TBX_OK) return st;
    }

    /* Encoded data: chunk after chunk through the driver's decoding cursor (one pass over the
     * component however the caller cuts its reads); a driver without one decodes the whole
     * component (bounded by its declared size). */
    const bool ranged = !direct && f->drv->read_component_range;
    if (ranged && (st = run_pending_check(f, t, 0, err)) != TBX_OK) return st;
    uint8_t *whole = NULL;
    size_t whole_len = 0;
    if (!direct && !ranged) {
        if (k->nbytes > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, k->offset, "tensor", "too large");
        whole_len = (size_t)k->nbytes;
        whole = tbx_malloc(&f->al, whole_len);
        if (!whole) return tbx_err_nomem(err, "tensor buffer");
        st = tbx_comp_read_into_(f, t, 0, whole, err);
        if (st != TBX_OK) { tbx_free(&f->al, whole, whole_len); return st; }
    }

    /* Walk the range in chunks of whole groups; `lead` elements precede `first` in the first
     * group of packed types. */
    const uint64_t chunk_groups = ((uint64_t)4 << 20) / gb + 1;
    uint64_t g0 = first / ge, lead = first % ge;
    uint64_t done = 0;
    uint8_t *bytes = NULL;
    size_t bytes_cap = 0;
    float *tmp = NULL;
    size_t tmp_cap = 0;
    while (done < count && st == TBX_OK) {
        uint64_t want = count - done + lead;              /* elements still wanted incl. lead */
        uint64_t ng = want / ge + (want % ge != 0);
        if (ng > chunk_groups) ng = chunk_groups;
        uint64_t nel = ng * ge;
        if (g0 * ge + nel > t->nelems) nel = t->nelems - g0 * ge;
        uint64_t nb = ng * gb;
        if (g0 * gb + nb > k->nbytes) nb = k->nbytes - g0 * gb;
        const uint8_t *src = direct ? tbx_source_ptr(ksrc, k->offset + g0 * gb, nb) : NULL;
        if ((direct && !src) || ranged) {
            if (nb > bytes_cap) {
                tbx_free(&f->al, bytes, bytes_cap);
                bytes = tbx_malloc(&f->al, (size_t)nb);
                bytes_cap = bytes ? (size_t)nb : 0;
                if (!bytes) { st = tbx_err_nomem(err, "decode buffer"); break; }
            }
            st = direct ? tbx_source_read(ksrc, k->offset + g0 * gb, bytes, (size_t)nb, t->name, err)
                        : f->drv->read_component_range(f, t, 0, g0 * gb, bytes, (size_t)nb, err);
            if (st != TBX_OK) break;
            src = bytes;
        } else if (!direct) {
            src = whole + g0 * gb;
        }
        uint64_t take = nel - lead;
        if (take > count - done) take = count - done;
        if (lead == 0 && take == nel) {
            st = tbx_decode_f32_info(di, t->dtype, src, (size_t)nb, nel, out + done);
        } else {
            if (nel > tmp_cap) {
                tbx_free(&f->al, tmp, tmp_cap * sizeof(float));
                tmp = tbx_malloc(&f->al, (size_t)nel * sizeof(float));
                tmp_cap = tmp ? (size_t)nel : 0;
                if (!tmp) { st = tbx_err_nomem(err, "decode buffer"); break; }
            }
            st = tbx_decode_f32_info(di, t->dtype, src, (size_t)nb, nel, tmp);
            if (st == TBX_OK) memcpy(out + done, tmp + lead, (size_t)take * sizeof(float));
        }
        /* decoded straight from the mapping: were those bytes still the file's? */
        if (direct && src != bytes) {
            tbx_status cs = tbx_source_check(ksrc, k->offset + g0 * gb, nb, t->name, err);
            if (cs != TBX_OK) { st = cs; break; }
        }
        if (st != TBX_OK) {
            st = tbx_err(err, st, k->offset + g0 * gb, t->name, "tensor \"%s\": cannot decode %s data",
                         t->name, di->name);
            break;
        }
        done += take;
        g0 += ng;
        lead = 0;
    }
    tbx_free(&f->al, bytes, bytes_cap);
    tbx_free(&f->al, tmp, tmp_cap * sizeof(float));
    tbx_free(&f->al, whole, whole_len);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Sections                                                                                    */
/* ------------------------------------------------------------------------------------------ */


tbx_status tbx_section_read(tbx_file *f, uint64_t i, void *buf, size_t cap, size_t *needed,
                            tbx_error *err) {
    if (!f || i >= f->nsections)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "section", "section index out of range");
    const tbx_section *s = &f->sections[i];
    if (s->size > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, s->offset, "section", "too large");
    if (needed) *needed = (size_t)s->size;
    if (!buf || cap < s->size)
        return tbx_err(err, TBX_E_BUFFER_TOO_SMALL, TBX_NO_OFFSET, "buffer",
                       "section \"%s\" needs a buffer of %llu bytes", s->name,
                       (unsigned long long)s->size);
    const tbx_source *src = tbx_file_source(f, s->src);
    if (!src)
        return tbx_err(err, TBX_E_STATE, s->offset, "section", "section \"%s\": no source %" PRIu32,
                       s->name, s->src);
    return tbx_source_read(src, s->offset, buf, (size_t)s->size, s->name, err);
}

tbx_status tbx_section_load_(tbx_file *f, uint64_t i, void **buf, size_t *len, tbx_error *err) {
    *buf = NULL;
    *len = 0;
    if (!f || i >= f->nsections)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "section", "section index out of range");
    const tbx_section *s = &f->sections[i];
    if (s->size > f->limits.max_side_file_bytes || s->size > SIZE_MAX - 1)
        return tbx_err(err, TBX_E_LIMIT, s->offset, s->name,
                       "side file %s is %" PRIu64 " bytes, over the limit of %" PRIu64
                       " bytes (tbx_limits.max_side_file_bytes)", s->name, s->size,
                       f->limits.max_side_file_bytes);
    void *p = tbx_malloc(&f->al, s->size ? (size_t)s->size : 1);
    if (!p) return tbx_err_nomem(err, s->name);
    tbx_status st = tbx_section_read(f, i, p, (size_t)s->size, NULL, err);
    if (st != TBX_OK) {
        tbx_free(&f->al, p, s->size ? (size_t)s->size : 1);
        return st;
    }
    *buf = p;
    *len = (size_t)s->size;
    return TBX_OK;
}


/* The descriptor and file offset of bytes [pos, pos + len) of tensor i when they can be copied
 * from the file as they are: one raw component of a path source, no check pending. */
bool tbx_file_fd_range_(const tbx_file *in, uint64_t i, uint64_t pos, uint64_t len, int *fd,
                        uint64_t *off) {
    if (i >= in->ntensors) return false;
    const tbx_tensor *t = &in->tensors[i];
    if (t->ncomp != 1 || t->layout != TBX_LAYOUT_DENSE) return false;
    const tbx_component *k = &t->comp[0];
    uint64_t end;
    if (!tbx_comp_served_raw(in, k) || (in->drv->raw_pending && in->drv->raw_pending(in, t, 0)) ||
        !tbx_add_u64(pos, len, &end) || end > k->nbytes || !tbx_add_u64(k->offset, pos, off))
        return false;
    const tbx_source *s = tbx_file_source(in, k->src);
    if (!s || (s->kind != TBX_SRC_FD && s->kind != TBX_SRC_MMAP) || s->fd < 0) return false;
    uint64_t fend;
    if (!tbx_add_u64(*off, len, &fend) || fend > s->size) return false;
    *fd = s->fd;
    return true;
}
