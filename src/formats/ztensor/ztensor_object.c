/*
 * ztensor_object.c - one manifest object becomes one tensor of the model (zt_build_object, called
 * by the manifest parser with the object's shape, format, attributes and components by role).
 *
 * The layouts and what each component holds (elements; the decoded size is elements x dtype
 * size, and a raw component's `length` must be exactly that):
 *
 *   dense            data                                prod(shape)
 *   sparse_csr       values | indices | indptr           nnz | nnz | rows + 1     (2-D only)
 *   sparse_coo       values | coords                     nnz | ndim x nnz
 *   quantized_group  packed_weight | scales | zeros      ceil(prod(shape) / N) | G | G
 *                    (N codes of `bits` bits per word, G = rows x ceil(cols / group_size))
 *
 * In order: the role set is exactly the layout's and each dtype fits its role (indices integer,
 * scales real float, ...); the element count fits 64 bits; sparse shape rules and nnz from the
 * first raw component (values: length / size; indices or coords: length / bytes per entry; CSR
 * indptr: its last element, one small read); quantized_group's attributes (bits 1..64,
 * group_size >= 1, packing "<N>_per_<word dtype>"); placement (64-aligned, after the 8-byte
 * header, before the manifest, within max_tensor_bytes); when every component of a sparse
 * tensor is compressed, nnz is the decoded size of `values`, counted in bounded chunks; then the
 * components' sizes (limits, raw lengths) and their stored ranges for the overlap check at the
 * end of the open. A quantized_group tensor also gets its common quantization description
 * (tbx_tensor_quant_get), and an object's attributes become the metadata entry
 * "ztensor.attributes.<name>". docs/formats/ztensor.md, "Layouts", has every rule.
 */
#include "ztensor_int.h"

#include <inttypes.h>
#include <stdio.h>

/* Integer attribute of an object (U64 or non-negative I64). */
static bool attr_uint(const tbx_value *attrs, const char *key, uint64_t *out, bool *present) {
    *present = false;
    if (!attrs) return true;
    for (size_t i = 0; i < attrs->v.a.n; i++) {
        if (attrs->v.a.key_lens[i] == strlen(key) && memcmp(attrs->v.a.keys[i], key, strlen(key)) == 0) {
            *present = true;
            return tbx_value_get_u64(attrs->v.a.items[i], out) == TBX_OK;
        }
    }
    return true;
}

static const tbx_value *attr_get(const tbx_value *attrs, const char *key) {
    if (!attrs) return NULL;
    for (size_t i = 0; i < attrs->v.a.n; i++)
        if (attrs->v.a.key_lens[i] == strlen(key) && memcmp(attrs->v.a.keys[i], key, strlen(key)) == 0)
            return attrs->v.a.items[i];
    return NULL;
}

/* nnz of a sparse tensor whose components are all zstd-compressed: the decoded size of
 * `values`, counted in bounded chunks (never more than bound bytes). */
static tbx_status count_decoded(tbx_file *f, const tbx_tensor *t, uint32_t c, uint64_t bound,
                                uint64_t *out, tbx_error *err) {
    tbx_zstream r;
    tbx_status st = zt_rd_open(&r, f, t, c, NULL, bound, true, err);
    if (st != TBX_OK) return st;
    uint8_t *buf = tbx_malloc(&f->al, ZT_CHUNK);
    if (!buf) { tbx_zstream_close(&r); return tbx_err_nomem(err, "decode buffer"); }
    for (;;) {
        size_t got = 0;
        st = tbx_zstream_read(&r, buf, ZT_CHUNK, &got, err);
        if (st != TBX_OK || got < ZT_CHUNK) break;
    }
    if (st == TBX_OK && r.produced == bound) st = tbx_zstream_finish(&r, err);
    else if (st == TBX_OK && !r.frame_done) {
        char w[128];
        zt_what(w, sizeof w, t, c);
        st = tbx_err(err, TBX_E_FORMAT, t->comp[c].offset, "component.zstd",
                     "component %s: zstd stream ends inside a frame (truncated data)", w);
    }
    *out = r.produced;
    tbx_free(&f->al, buf, ZT_CHUNK);
    tbx_zstream_close(&r);
    return st;
}

static tbx_status add_span(zt_parse_ctx *pc, uint64_t off, uint64_t end, size_t ti, uint32_t ci,
                           tbx_error *err) {
    zt_state *s = pc->s;
    if (!tbx_grow(&pc->f->al, (void **)&s->spans, &s->cap_spans, s->nspans + 1, sizeof *s->spans))
        return tbx_err_nomem(err, "component table");
    s->spans[s->nspans].off = off;
    s->spans[s->nspans].end = end;
    s->spans[s->nspans].ti = ti;
    s->spans[s->nspans].ci = ci;
    s->nspans++;
    return TBX_OK;
}

/* Everything parsed for one object: check it and add it to the model. */
/* The common quantization description of a quantized_group tensor (tbx_tensor_quant_get):
 * linear, value = (code - zero) * scale per group of a row, codes packed in the packed_weight
 * words, scales and zeros in their own components (model order: packed_weight, scales, zeros). */
static tbx_status zt_describe_qgroup(tbx_file *f, tbx_tensor *t, const zt_tdrv *d,
                                     uint64_t ngroups, tbx_error *err) {
    tbx_quant_info *q = tbx_file_quant_new(f);
    if (!q) return tbx_err_nomem(err, "quantization description");
    q->method = TBX_QUANT_LINEAR;
    q->code_dtype = t->comp[0].dtype;
    q->bits = d->qbits;
    q->code_signed = 0;
    q->block_size = d->qgroup;
    q->scale.scope = q->zero.scope = TBX_QSCOPE_GROUP;
    q->scale.dtype = t->comp[1].dtype;
    q->scale.component = 1;
    q->zero.dtype = t->comp[2].dtype;
    q->zero.component = 2;
    q->scale.count = q->zero.count = ngroups;
    if (tbx_quant_put_u32(f, q, "codes_per_word", d->qper) != TBX_OK)
        return tbx_err_nomem(err, "quantization parameters");
    t->quant = q;
    return TBX_OK;
}

/* One manifest object on its way to the model (zt_build_object and its steps). */
typedef struct zt_obj {
    zt_parse_ctx *pc;
    const zt_str *name;
    uint64_t name_off, obj_off;  /* where the object's name and its map are in the manifest */
    uint32_t ndim;
    const uint64_t *shape;       /* NULL for a scalar */
    int layout;
    zt_parsed_comp *pcs;         /* by role */
    uint64_t nelems;
    char tq[96];                 /* the quoted name, for messages */
    zt_tdrv drv;                 /* the tensor's driver data, as computed */
    uint64_t count[ZT_NROLES];   /* elements of each component */
    bool nnz_known;              /* sparse: stored entries known before decoding */
} zt_obj;

/* The role set is exactly the layout's, each component's dtype fits its role, the element count
 * fits 64 bits. */
static tbx_status obj_check_roles(zt_obj *o, unsigned role_mask, tbx_error *err) {
    const char *tq = o->tq;
    int layout = o->layout;
    zt_parsed_comp *pcs = o->pcs;
    const char *lname = zt_layout_names[layout];
    uint64_t obj_off = o->obj_off;
    unsigned want = 0;
    for (uint32_t i = 0; i < zt_layout_ncomp[layout]; i++) want |= 1u << zt_layout_roles[layout][i];
    for (int r = 0; r < ZT_NROLES; r++) {
        if ((want & (1u << r)) && !(role_mask & (1u << r)))
            return tbx_err(err, TBX_E_FORMAT, obj_off, "object.components",
                           "tensor \"%s\" (%s) has no \"%s\" component", tq, lname, zt_role_names[r]);
        if (!(want & (1u << r)) && (role_mask & (1u << r)))
            return tbx_err(err, TBX_E_FORMAT, pcs[r].at, "object.components",
                           "tensor \"%s\" (%s) has an unexpected \"%s\" component", tq, lname,
                           zt_role_names[r]);
    }
    const uint64_t *shape = o->shape;
    uint32_t ndim = o->ndim;
    uint64_t nelems = 1;
    for (uint32_t d = 0; d < ndim; d++)
        if (!tbx_mul_u64(nelems, shape[d], &nelems))
            return tbx_err(err, TBX_E_OVERFLOW, obj_off, "object.shape",
                           "tensor \"%s\": element count overflows 64 bits at shape[%u]", tq, d);

    o->nelems = nelems;

    /* component dtype rules */
    for (uint32_t i = 0; i < zt_layout_ncomp[layout]; i++) {
        int r = zt_layout_roles[layout][i];
        tbx_dtype dt = pcs[r].dt->dtype;
        bool ok = true;
        const char *need = "";
        if (r == ZT_R_INDICES || r == ZT_R_INDPTR || r == ZT_R_COORDS || r == ZT_R_PACKED) {
            ok = dt_is_int(dt);
            need = "an integer dtype";
        } else if (r == ZT_R_SCALES) {
            ok = dt_is_real_float(dt);
            need = "a real floating-point dtype";
        } else if (r == ZT_R_ZEROS) {
            ok = dt_is_real_float(dt) || dt_is_int(dt);
            need = "a real numeric dtype";
        }
        if (!ok)
            return tbx_err(err, TBX_E_FORMAT, pcs[r].at, "component.dtype",
                           "tensor \"%s\" component %s: dtype %s, expected %s", tq,
                           zt_role_names[r], pcs[r].dt->name, need);
    }

    return TBX_OK;
}

/* Sparse layouts: shape rules and, when a raw component tells, the number of stored entries. */
static tbx_status obj_sparse_counts(zt_obj *o, tbx_error *err) {
    const char *tq = o->tq;
    int layout = o->layout;
    zt_parsed_comp *pcs = o->pcs;
    uint64_t obj_off = o->obj_off;
    const uint64_t *shape = o->shape;
    uint32_t ndim = o->ndim;
    zt_tdrv *dr = &o->drv;
    uint64_t *count = o->count;
    bool csr = layout == TBX_LAYOUT_SPARSE_CSR;
    if (csr && ndim != 2)
        return tbx_err(err, TBX_E_FORMAT, obj_off, "object.shape",
                       "tensor \"%s\": sparse_csr needs a 2-D shape, got %u dimensions", tq,
                       ndim);
    if (!csr && ndim == 0)
        return tbx_err(err, TBX_E_FORMAT, obj_off, "object.shape",
                       "tensor \"%s\": sparse_coo needs at least one dimension", tq);
    int ir = csr ? ZT_R_INDICES : ZT_R_COORDS;
    uint64_t vsz = pcs[ZT_R_VALUES].dt->size, isz = pcs[ir].dt->size;
    uint64_t per = csr ? isz : isz * ndim; /* index bytes per stored entry */
    if (csr) {
        dr->rows = shape[0];
        dr->cols = shape[1];
        if (!tbx_add_u64(dr->rows, 1, &count[ZT_R_INDPTR]))
            return tbx_err(err, TBX_E_OVERFLOW, obj_off, "object.shape",
                           "tensor \"%s\": rows + 1 overflows", tq);
    }
    uint64_t nnz = 0;
    int from;
    if (pcs[ZT_R_VALUES].enc == TBX_ENC_RAW) {
        from = ZT_R_VALUES;
        if (pcs[from].length % vsz)
            return tbx_err(err, TBX_E_FORMAT, pcs[from].at, "component.length",
                           "tensor \"%s\" component values: length %" PRIu64
                           " is not a multiple of the %" PRIu64 "-byte %s", tq,
                           pcs[from].length, vsz, pcs[from].dt->name);
        nnz = pcs[from].length / vsz;
    } else if (pcs[ir].enc == TBX_ENC_RAW) {
        from = ir;
        if (pcs[from].length % per)
            return tbx_err(err, TBX_E_FORMAT, pcs[from].at, "component.length",
                           "tensor \"%s\" component %s: length %" PRIu64
                           " is not a multiple of %" PRIu64 " bytes per entry", tq,
                           zt_role_names[ir], pcs[from].length, per);
        nnz = pcs[from].length / per;
    } else if (csr && pcs[ZT_R_INDPTR].enc == TBX_ENC_RAW) {
        from = ZT_R_INDPTR;
        uint64_t need;
        if (!tbx_mul_u64(count[ZT_R_INDPTR], isz, &need) || pcs[from].length != need)
            return tbx_err(err, TBX_E_FORMAT, pcs[from].at, "component.length",
                           "tensor \"%s\" component indptr: length %" PRIu64
                           ", rows + 1 = %" PRIu64 " elements of %s need more", tq,
                           pcs[from].length, count[ZT_R_INDPTR], pcs[from].dt->name);
        /* read by obj_csr_nnz, once obj_check_placement has put the component in the file */
        o->nnz_known = false;
    } else {
        o->nnz_known = false;
    }
    dr->nnz = nnz;
    count[ZT_R_VALUES] = nnz;
    if (csr) count[ZT_R_INDICES] = nnz;
    else if (!tbx_mul_u64(nnz, ndim, &count[ZT_R_COORDS]))
        return tbx_err(err, TBX_E_OVERFLOW, obj_off, "object.shape",
                       "tensor \"%s\": ndim x nnz overflows", tq);
    return TBX_OK;
}

/* quantized_group: the attributes (bits, group_size, packing) and the component sizes. */
static tbx_status obj_qgroup_counts(zt_obj *o, const tbx_value *a, tbx_error *err) {
    const char *tq = o->tq;
    zt_parsed_comp *pcs = o->pcs;
    uint64_t obj_off = o->obj_off;
    const uint64_t *shape = o->shape;
    uint32_t ndim = o->ndim;
    uint64_t nelems = o->nelems;
    zt_tdrv *dr = &o->drv;
    uint64_t *count = o->count;
    uint64_t bits = 0, gs = 0, per = 0;
    bool present;
    if (!attr_uint(a, "bits", &bits, &present) || !present || bits < 1 || bits > 64)
        return tbx_err(err, TBX_E_FORMAT, obj_off, "object.attributes",
                       "tensor \"%s\" (quantized_group): attribute \"bits\" must be an "
                       "integer in 1..64", tq);
    if (!attr_uint(a, "group_size", &gs, &present) || !present || gs < 1)
        return tbx_err(err, TBX_E_FORMAT, obj_off, "object.attributes",
                       "tensor \"%s\" (quantized_group): attribute \"group_size\" must be a "
                       "positive integer", tq);
    const zt_dtype *wd = pcs[ZT_R_PACKED].dt;
    uint64_t wbits = 8ull * wd->size;
    const tbx_value *pk = attr_get(a, "packing");
    if (pk && pk->type != TBX_V_NULL) {
        size_t pn = 0;
        const char *ps = tbx_value_get_str(pk, &pn);
        const char *us = ps ? memchr(ps, '_', pn) : NULL;
        bool ok = us != NULL && us > ps;
        per = 0;
        for (const char *q = ps; ok && q < us; q++) {
            if (*q < '0' || *q > '9' || per > 1000000) { ok = false; break; }
            per = per * 10 + (uint64_t)(*q - '0');
        }
        size_t rest = ok ? pn - (size_t)(us - ps) : 0;
        ok = ok && rest == 5 + strlen(wd->name) && memcmp(us, "_per_", 5) == 0 &&
             memcmp(us + 5, wd->name, strlen(wd->name)) == 0;
        if (!ok || per == 0)
            return tbx_err(err, TBX_E_FORMAT, obj_off, "object.attributes",
                           "tensor \"%s\" (quantized_group): attribute \"packing\" must be "
                           "\"<N>_per_%s\"", tq, wd->name);
    } else {
        per = wbits / bits;
    }
    if (per == 0 || per * bits > wbits)
        return tbx_err(err, TBX_E_FORMAT, obj_off, "object.attributes",
                       "tensor \"%s\" (quantized_group): %" PRIu64 " codes of %" PRIu64
                       " bits do not fit a %s word", tq, per, bits, wd->name);
    uint64_t cols = ndim ? shape[ndim - 1] : 1, rows = 1;
    for (uint32_t d = 0; d + 1 < ndim; d++) rows *= shape[d]; /* <= nelems or a 0 dim */
    if (ndim && cols == 0) {
        rows = 1;
        for (uint32_t d = 0; d + 1 < ndim; d++)
            if (!tbx_mul_u64(rows, shape[d], &rows))
                return tbx_err(err, TBX_E_OVERFLOW, obj_off, "object.shape",
                               "tensor \"%s\": row count overflows", tq);
    }
    uint64_t gpr = cols / gs + (cols % gs != 0);
    dr->rows = rows;
    dr->cols = cols;
    dr->qbits = (uint32_t)bits;
    dr->qper = (uint32_t)per;
    dr->qgroup = gs;
    dr->qgpr = gpr;
    count[ZT_R_PACKED] = nelems / per + (nelems % per != 0);
    if (!tbx_mul_u64(rows, gpr, &count[ZT_R_SCALES]))
        return tbx_err(err, TBX_E_OVERFLOW, obj_off, "object.shape",
                       "tensor \"%s\": group count overflows", tq);
    count[ZT_R_ZEROS] = count[ZT_R_SCALES];
    return TBX_OK;
}

/* Every component is 64-aligned, after the magic, before the manifest, within the limits. */
static tbx_status obj_check_placement(zt_obj *o, tbx_error *err) {
    const char *tq = o->tq;
    int layout = o->layout;
    zt_parsed_comp *pcs = o->pcs;
    tbx_file *f = o->pc->f;
    zt_state *s = o->pc->s;
    for (uint32_t i = 0; i < zt_layout_ncomp[layout]; i++) {
        int r = zt_layout_roles[layout][i];
        zt_parsed_comp *p = &pcs[r];
        uint64_t end;
        if (p->offset % ZT_ALIGN)
            return tbx_err(err, TBX_E_RANGE, p->at, "component.offset",
                           "tensor \"%s\" component %s: offset %" PRIu64
                           " is not a multiple of 64", tq, zt_role_names[r], p->offset);
        if (p->offset < 8)
            return tbx_err(err, TBX_E_RANGE, p->at, "component.offset",
                           "tensor \"%s\" component %s: offset %" PRIu64
                           " lies in the 8-byte header", tq, zt_role_names[r], p->offset);
        /* the field at fault: the offset when the component starts past the data area, its
         * length when it starts inside and runs out (the rule of docs/reliability.md) */
        if (p->offset > s->manifest_off || (p->offset == s->manifest_off && p->length > 0))
            return tbx_err(err, TBX_E_RANGE, p->at, "component.offset",
                           "tensor \"%s\" component %s: offset %" PRIu64 " is at or past the "
                           "start of the manifest at byte %" PRIu64, tq, zt_role_names[r],
                           p->offset, s->manifest_off);
        if (!tbx_add_u64(p->offset, p->length, &end) || end > s->manifest_off)
            return tbx_err(err, TBX_E_RANGE, p->at, "component.length",
                           "tensor \"%s\" component %s: [%" PRIu64 ", +%" PRIu64
                           ") runs past the start of the manifest at byte %" PRIu64, tq,
                           zt_role_names[r], p->offset, p->length, s->manifest_off);
        if (p->length > f->limits.max_tensor_bytes)
            return tbx_err(err, TBX_E_LIMIT, p->at, "component.length",
                           "tensor \"%s\" component %s: %" PRIu64
                           " stored bytes exceed max_tensor_bytes = %" PRIu64, tq,
                           zt_role_names[r], p->length, f->limits.max_tensor_bytes);
    }
    return TBX_OK;
}

/* CSR with a raw indptr: the number of stored entries is its last element. */
static tbx_status obj_csr_nnz(zt_obj *o, tbx_error *err) {
    const char *tq = o->tq;
    int layout = o->layout;
    zt_parsed_comp *pcs = o->pcs;
    tbx_file *f = o->pc->f;
    /* CSR with raw indptr: nnz is its last element; otherwise count decoded values below */
    bool csr = layout == TBX_LAYOUT_SPARSE_CSR;
    if (csr && pcs[ZT_R_INDPTR].enc == TBX_ENC_RAW) {
        const zt_parsed_comp *p = &pcs[ZT_R_INDPTR];
        uint32_t isz = p->dt->size;
        uint8_t b[8];
        tbx_status st = tbx_source_read(&f->src, p->offset + p->length - isz, b, isz,
                                        "component.indptr", err);
        if (st != TBX_OK) return st;
        uint64_t v = 0;
        for (uint32_t k = 0; k < isz; k++) v |= (uint64_t)b[k] << (8 * k);
        if (dt_is_signed(p->dt->dtype) && (b[isz - 1] & 0x80u))
            return tbx_err(err, TBX_E_FORMAT, p->offset + p->length - isz, "component.indptr",
                           "tensor \"%s\": the last indptr element (nnz) is negative", tq);
        o->drv.nnz = v;
        o->nnz_known = true;
    }
    return TBX_OK;
}

/* Element counts and decoded sizes of the tensor's components (checked against the limits and
 * the raw lengths); each stored range joins the overlap check. */
static tbx_status obj_fill_components(zt_obj *o, tbx_tensor *t, size_t ti, tbx_error *err) {
    const char *tq = o->tq;
    int layout = o->layout;
    zt_parsed_comp *pcs = o->pcs;
    tbx_file *f = o->pc->f;
    uint32_t ncomp = zt_layout_ncomp[layout];
    uint64_t *count = o->count;
    uint64_t nbytes[ZT_NROLES] = {0};
    tbx_status st;
    for (uint32_t i = 0; i < ncomp; i++) {
        int r = zt_layout_roles[layout][i];
        tbx_component *k = &t->comp[i];
        k->nelems = count[r];
        if (!tbx_mul_u64(count[r], pcs[r].dt->size, &nbytes[r]))
            return tbx_err(err, TBX_E_OVERFLOW, pcs[r].at, "component",
                           "tensor \"%s\" component %s: %" PRIu64
                           " elements of %s overflow 64 bits", tq, zt_role_names[r], count[r],
                           pcs[r].dt->name);
        k->nbytes = nbytes[r];
        if (k->nbytes > f->limits.max_tensor_bytes)
            return tbx_err(err, TBX_E_LIMIT, pcs[r].at, "component",
                           "tensor \"%s\" component %s: %" PRIu64
                           " decoded bytes exceed max_tensor_bytes = %" PRIu64, tq,
                           zt_role_names[r], k->nbytes, f->limits.max_tensor_bytes);
        if (k->encoding == TBX_ENC_RAW && k->stored_bytes != k->nbytes)
            return tbx_err(err, TBX_E_FORMAT, pcs[r].at, "component.length",
                           "tensor \"%s\" component %s: length %" PRIu64 ", but %" PRIu64
                           " elements of %s are %" PRIu64 " bytes", tq, zt_role_names[r],
                           k->stored_bytes, count[r], pcs[r].dt->name, k->nbytes);
        if (k->stored_bytes) {
            st = add_span(o->pc, k->offset, k->offset + k->stored_bytes, ti, i, err);
            if (st != TBX_OK) return st;
        }
    }
    return TBX_OK;
}

/* The object's attributes, as one metadata entry "ztensor.attributes.<name>" (takes *attrs). */
static tbx_status obj_add_attributes(zt_obj *o, tbx_value **attrs, tbx_error *err) {
    tbx_file *f = o->pc->f;
    const zt_str *name = o->name;
    uint64_t obj_off = o->obj_off;
    tbx_status st;
    if (*attrs) {
        size_t plen = strlen(ZT_META_OBJ_PREFIX);
        size_t klen = name->n < SIZE_MAX - plen ? plen + name->n : SIZE_MAX;
        char *key = klen < SIZE_MAX ? tbx_malloc(&f->al, klen) : NULL;
        if (!key) return tbx_err_nomem(err, "attribute key");
        memcpy(key, ZT_META_OBJ_PREFIX, plen);
        memcpy(key + plen, name->p, name->n);
        tbx_value *v = *attrs;
        *attrs = NULL;
        st = tbx_file_add_meta(f, key, klen, v, obj_off, err);
        tbx_free(&f->al, key, klen);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

/* One object of the manifest (its map parsed into pcs / attrs) becomes a tensor of the model. */
tbx_status zt_build_object(zt_parse_ctx *pc, const zt_str *name, uint64_t name_off,
                               uint32_t ndim, int layout, zt_parsed_comp *pcs, unsigned role_mask,
                               tbx_value **attrs, uint64_t obj_off, tbx_error *err) {
    tbx_file *f = pc->f;
    zt_obj o;
    memset(&o, 0, sizeof o);
    o.pc = pc;
    o.name = name;
    o.name_off = name_off;
    o.obj_off = obj_off;
    o.ndim = ndim;
    o.shape = ndim ? pc->shape : NULL;
    o.layout = layout;
    o.pcs = pcs;
    o.nnz_known = true;
    tbx_quote_bytes(o.tq, sizeof o.tq, name->p, name->n, 64);
    const char *tq = o.tq;
    tbx_status st = obj_check_roles(&o, role_mask, err);
    if (st != TBX_OK) return st;
    uint64_t nelems = o.nelems;

    if (layout == TBX_LAYOUT_DENSE) o.count[ZT_R_DATA] = nelems;
    else if (layout == TBX_LAYOUT_SPARSE_CSR || layout == TBX_LAYOUT_SPARSE_COO)
        st = obj_sparse_counts(&o, err);
    else
        st = obj_qgroup_counts(&o, *attrs, err);
    if (st == TBX_OK) st = obj_check_placement(&o, err);
    if (st == TBX_OK && !o.nnz_known) st = obj_csr_nnz(&o, err);
    if (st != TBX_OK) return st;
    if ((layout == TBX_LAYOUT_SPARSE_CSR || layout == TBX_LAYOUT_SPARSE_COO) && o.nnz_known &&
        o.drv.nnz > nelems)
        return tbx_err(err, TBX_E_FORMAT, obj_off, "object.components",
                       "tensor \"%s\": %" PRIu64 " stored entries exceed the %" PRIu64
                       " elements of its shape", tq, o.drv.nnz, nelems);

    /* the tensor */
    uint32_t ncomp = zt_layout_ncomp[layout];
    int r0 = zt_layout_roles[layout][0];
    tbx_dtype tdt = layout == TBX_LAYOUT_QUANT_GROUP ? pcs[ZT_R_SCALES].dt->dtype : pcs[r0].dt->dtype;
    tbx_tensor *t = NULL;
    st = tbx_file_add_tensor(f, name->p, name->n, tdt, o.shape, ndim, ncomp, name_off, &t, err);
    if (st != TBX_OK) return st;
    size_t ti = f->ntensors - 1;
    t->layout = (tbx_layout)layout;
    zt_tdrv *d = tbx_malloc(&f->al, sizeof *d);
    if (!d) return tbx_err_nomem(err, "tensor driver data");
    *d = o.drv;
    t->drv = d;
    for (uint32_t i = 0; i < ncomp; i++) {
        int r = zt_layout_roles[layout][i];
        tbx_component *k = &t->comp[i];
        k->name = zt_role_names[r];
        k->dtype = pcs[r].dt->dtype;
        k->offset = pcs[r].offset;
        k->stored_bytes = pcs[r].length;
        k->encoding = pcs[r].enc;
        k->digest = pcs[r].digest;
        pcs[r].digest = NULL;
    }
    if (!o.nnz_known) {
        /* every component of a sparse tensor is compressed: count the decoded values */
        uint64_t vsz = pcs[ZT_R_VALUES].dt->size, bound, got = 0;
        if (!tbx_mul_u64(nelems, vsz, &bound)) bound = UINT64_MAX;
        if (bound > f->limits.max_tensor_bytes) bound = f->limits.max_tensor_bytes;
        t->comp[0].nbytes = bound;
        st = count_decoded(f, t, 0, bound, &got, err);
        if (st != TBX_OK) return st;
        if (got % vsz) {
            return tbx_err(err, TBX_E_FORMAT, pcs[ZT_R_VALUES].at, "component.values",
                           "tensor \"%s\" component values: decodes to %" PRIu64
                           " bytes, not a multiple of the %" PRIu64 "-byte %s", tq, got, vsz,
                           pcs[ZT_R_VALUES].dt->name);
        }
        d->nnz = got / vsz;
    }
    if (layout == TBX_LAYOUT_SPARSE_CSR || layout == TBX_LAYOUT_SPARSE_COO) {
        o.count[ZT_R_VALUES] = d->nnz;
        if (layout == TBX_LAYOUT_SPARSE_CSR) o.count[ZT_R_INDICES] = d->nnz;
        else if (!tbx_mul_u64(d->nnz, ndim, &o.count[ZT_R_COORDS]))
            return tbx_err(err, TBX_E_OVERFLOW, obj_off, "object.shape",
                           "tensor \"%s\": ndim x nnz overflows", tq);
    }
    st = obj_fill_components(&o, t, ti, err);
    if (st != TBX_OK) return st;
    if (layout == TBX_LAYOUT_QUANT_GROUP) {
        st = zt_describe_qgroup(f, t, d, o.count[ZT_R_SCALES], err);
        if (st != TBX_OK) return st;
    }

    return *attrs ? obj_add_attributes(&o, attrs, err) : TBX_OK;
}
