/*
 * ztensor_manifest.c - the zTensor manifest: one CBOR map read by the pull decoder
 * (ztensor_cbor.c) straight into the model, no tree built. Its bytes sit just before the footer
 * (ztensor_open.c reads them whole, within the limits, and hands them here):
 *
 *   ... blobs | manifest (N bytes of CBOR)                          | u64 N (LE) | ZTEN1000
 *             | A3                              map of 3 (or indefinite BF ... FF)
 *             |   67 "version"    65 "1.1.0"    text, required (its major number is kept)
 *             |   6A "attributes" A? {...}      map, optional: global metadata
 *             |   67 "objects"    A? {          map, required: name -> object
 *             |     name: A? { "shape": 8? [...], "format": text, "attributes": map,
 *             |                "components": A? { role: A? { "dtype", "offset", "length",
 *             |                                              "encoding", "digest" } } } }
 *
 * Every map may be definite or indefinite; keys are text and unique in their map (a repeat is
 * TBX_E_DUPLICATE naming it); unknown keys are skipped (still checked to be well formed); a
 * definite count is checked against max_tensors (objects), max_metadata_entries (attributes),
 * max_ndim (shape) before anything is sized by it. Missing required keys are named as the field
 * (docs/formats/ztensor.md, "Errors"). Global attributes become metadata entries; each object's
 * map is collected (shape, format, attributes, its components by role) and handed to
 * zt_build_object (ztensor_object.c), which checks it and adds the tensor. Bytes after the map
 * inside the manifest are an error.
 */
#include "ztensor_int.h"

#include <inttypes.h>
#include <stdio.h>


/* Set of the keys of one map, for duplicate detection. */
typedef struct zt_keyset {
    zt_cbor *c;
    zt_str *keys;
    size_t n, cap;
    tbx_names names;
} zt_keyset;

static const char *ks_key_of(const void *ctx, uint64_t i, size_t *len) {
    const zt_keyset *ks = ctx;
    *len = ks->keys[i].n;
    return ks->keys[i].p;
}

static void ks_init(zt_keyset *ks, zt_cbor *c) {
    memset(ks, 0, sizeof *ks);
    ks->c = c;
    tbx_names_init(&ks->names, c->al, ks_key_of, ks);
}

static void ks_free(zt_keyset *ks) {
    for (size_t i = 0; i < ks->n; i++) zt_str_free(ks->c, &ks->keys[i]);
    tbx_free(ks->c->al, ks->keys, ks->cap * sizeof *ks->keys);
    tbx_names_free(&ks->names);
}

/* Takes the key (its allocation too). DUPLICATE when it was seen before. */
static tbx_status ks_add(zt_keyset *ks, zt_str *key, uint64_t off, const char *field,
                         tbx_error *err) {
    if (!tbx_grow(ks->c->al, (void **)&ks->keys, &ks->cap, ks->n + 1, sizeof *ks->keys)) {
        zt_str_free(ks->c, key);
        return tbx_err_nomem(err, "manifest keys");
    }
    ks->keys[ks->n] = *key;
    memset(key, 0, sizeof *key);
    tbx_status st = tbx_names_insert(&ks->names, ks->n, NULL);
    if (st == TBX_E_DUPLICATE) {
        char q[96];
        zt_str *k = &ks->keys[ks->n];
        tbx_quote_bytes(q, sizeof q, k->p, k->n, 64);
        st = tbx_err(err, TBX_E_DUPLICATE, off, field, "%s: duplicate key \"%s\"", field, q);
        zt_str_free(ks->c, k);
        return st;
    }
    if (st != TBX_OK) {
        zt_str_free(ks->c, &ks->keys[ks->n]);
        return tbx_err_nomem(err, "manifest keys");
    }
    ks->n++;
    return TBX_OK;
}

static bool key_is(const zt_str *k, const char *s) {
    size_t n = strlen(s);
    return k->n == n && memcmp(k->p, s, n) == 0;
}

static void parsed_comps_free(zt_parse_ctx *pc, zt_parsed_comp *pcs) {
    for (int r = 0; r < ZT_NROLES; r++) {
        if (pcs[r].digest) tbx_free(&pc->f->al, pcs[r].digest, strlen(pcs[r].digest) + 1);
        pcs[r].digest = NULL;
    }
}

static tbx_status read_uint(zt_parse_ctx *pc, const zt_ev *ev, const char *field, uint64_t *out,
                            tbx_error *err) {
    (void)pc;
    if (ev->k == ZT_EV_UINT) { *out = ev->u; return TBX_OK; }
    if (ev->k == ZT_EV_NEGINT) {
        if (ev->u == UINT64_MAX)
            return tbx_err(err, TBX_E_FORMAT, ev->off, field,
                           "%s: must be a non-negative integer, got -2^64", field);
        return tbx_err(err, TBX_E_FORMAT, ev->off, field,
                       "%s: must be a non-negative integer, got -%" PRIu64, field, ev->u + 1);
    }
    return tbx_err(err, TBX_E_FORMAT, ev->off, field,
                   "%s: must be an unsigned integer, got %s", field, zt_kind_a(ev->k));
}

static tbx_status parse_component(zt_parse_ctx *pc, const zt_ev *mev, zt_parsed_comp *pcmp, const char *tq,
                                  const char *role, tbx_error *err) {
    zt_cbor *c = &pc->c;
    zt_iter it;
    const char *field = "component";
    tbx_status st = zt_iter_begin(c, mev, true, &it, field, err);
    if (st != TBX_OK) return st;
    pcmp->at = mev->off;
    pcmp->enc = TBX_ENC_RAW;
    bool has_dtype = false, has_off = false, has_len = false;
    zt_keyset ks;
    ks_init(&ks, c);
    for (bool more = true; st == TBX_OK;) {
        zt_ev ke, ve;
        st = zt_iter_next(c, &it, &ke, &more, field, err);
        if (st != TBX_OK || !more) break;
        zt_str key;
        st = zt_read_str(c, &ke, ZT_EV_TEXT, &key, "component.key", err);
        if (st != TBX_OK) break;
        int which = key_is(&key, "dtype") ? 0 : key_is(&key, "offset") ? 1 : key_is(&key, "length") ? 2
                  : key_is(&key, "encoding") ? 3 : key_is(&key, "digest") ? 4 : -1;
        st = ks_add(&ks, &key, ke.off, field, err);
        if (st == TBX_OK) st = zt_next(c, &ve, field, err);
        if (st == TBX_OK && ve.k == ZT_EV_BREAK)
            st = tbx_err(err, TBX_E_FORMAT, ve.off, field, "%s: map key without a value", field);
        if (st != TBX_OK) break;
        zt_str s;
        switch (which) {
        case 0:
            st = zt_read_str(c, &ve, ZT_EV_TEXT, &s, "component.dtype", err);
            if (st != TBX_OK) break;
            pcmp->dt = zt_dtype_by_name(s.p, s.n);
            if (!pcmp->dt) {
                char q[64];
                tbx_quote_bytes(q, sizeof q, s.p, s.n, 32);
                st = tbx_err(err, TBX_E_UNSUPPORTED, ve.off, "component.dtype",
                             "tensor \"%s\" component %s: unknown dtype \"%s\"", tq, role, q);
            }
            zt_str_free(c, &s);
            has_dtype = true;
            break;
        case 1:
            st = read_uint(pc, &ve, "component.offset", &pcmp->offset, err);
            has_off = true;
            break;
        case 2:
            st = read_uint(pc, &ve, "component.length", &pcmp->length, err);
            has_len = true;
            break;
        case 3:
            if (ve.k == ZT_EV_NULL) break;
            st = zt_read_str(c, &ve, ZT_EV_TEXT, &s, "component.encoding", err);
            if (st != TBX_OK) break;
            if (key_is(&s, "raw")) pcmp->enc = TBX_ENC_RAW;
            else if (key_is(&s, "zstd")) pcmp->enc = TBX_ENC_ZSTD;
            else {
                char q[64];
                tbx_quote_bytes(q, sizeof q, s.p, s.n, 32);
                st = tbx_err(err, TBX_E_UNSUPPORTED, ve.off, "component.encoding",
                             "tensor \"%s\" component %s: encoding \"%s\" is not supported "
                             "(raw, zstd)", tq, role, q);
            }
            zt_str_free(c, &s);
            break;
        case 4:
            if (ve.k == ZT_EV_NULL) break;
            st = zt_read_str(c, &ve, ZT_EV_TEXT, &s, "component.digest", err);
            if (st != TBX_OK) break;
            if (memchr(s.p, 0, s.n)) {
                st = tbx_err(err, TBX_E_FORMAT, ve.off, "component.digest",
                             "tensor \"%s\" component %s: digest contains a NUL byte", tq, role);
            } else {
                pcmp->digest = tbx_memdup0(&pc->f->al, s.p, s.n);
                if (!pcmp->digest) st = tbx_err_nomem(err, "digest");
            }
            zt_str_free(c, &s);
            break;
        default:
            st = zt_skip(c, &ve, 0, err);
            break;
        }
    }
    ks_free(&ks);
    if (st != TBX_OK) return st;
    /* the field is the missing key (docs/formats/ztensor.md, "Errors") */
    const char *missing = !has_dtype ? "dtype" : !has_off ? "offset" : !has_len ? "length" : NULL;
    if (missing)
        return tbx_err(err, TBX_E_FORMAT, mev->off,
                       !has_dtype ? "component.dtype" : !has_off ? "component.offset"
                                                      : "component.length",
                       "tensor \"%s\" component %s has no \"%s\"", tq, role, missing);
    pcmp->present = true;
    return TBX_OK;
}

static tbx_status parse_object(zt_parse_ctx *pc, zt_str *name, uint64_t name_off, const zt_ev *mev,
                               tbx_error *err) {
    zt_cbor *c = &pc->c;
    tbx_file *f = pc->f;
    char tq[96];
    tbx_quote_bytes(tq, sizeof tq, name->p, name->n, 64);
    zt_iter it;
    const char *field = "object";
    tbx_status st = zt_iter_begin(c, mev, true, &it, field, err);
    if (st != TBX_OK) return st;
    zt_parsed_comp pcs[ZT_NROLES];
    memset(pcs, 0, sizeof pcs);
    unsigned role_mask = 0;
    int layout = -1;
    uint32_t ndim = 0;
    bool has_shape = false, has_format = false, has_comps = false;
    tbx_value *attrs = NULL;
    zt_keyset ks;
    ks_init(&ks, c);
    for (bool more = true; st == TBX_OK;) {
        zt_ev ke, ve;
        st = zt_iter_next(c, &it, &ke, &more, field, err);
        if (st != TBX_OK || !more) break;
        zt_str key;
        st = zt_read_str(c, &ke, ZT_EV_TEXT, &key, "object.key", err);
        if (st != TBX_OK) break;
        int which = key_is(&key, "shape") ? 0 : key_is(&key, "format") ? 1
                  : key_is(&key, "attributes") ? 2 : key_is(&key, "components") ? 3 : -1;
        st = ks_add(&ks, &key, ke.off, field, err);
        if (st == TBX_OK) st = zt_next(c, &ve, field, err);
        if (st == TBX_OK && ve.k == ZT_EV_BREAK)
            st = tbx_err(err, TBX_E_FORMAT, ve.off, field, "%s: map key without a value", field);
        if (st != TBX_OK) break;
        if (which == 0) {
            zt_iter si;
            st = zt_iter_begin(c, &ve, false, &si, "object.shape", err);
            if (st == TBX_OK && !si.indef && si.left > f->limits.max_ndim)
                st = tbx_err(err, TBX_E_LIMIT, ve.off, "object.shape",
                             "tensor \"%s\": %" PRIu64 " dimensions exceed max_ndim = %u", tq,
                             si.left, f->limits.max_ndim);
            ndim = 0;
            for (bool m2 = true; st == TBX_OK;) {
                zt_ev de;
                st = zt_iter_next(c, &si, &de, &m2, "object.shape", err);
                if (st != TBX_OK || !m2) break;
                if (ndim >= f->limits.max_ndim) {
                    st = tbx_err(err, TBX_E_LIMIT, de.off, "object.shape",
                                 "tensor \"%s\": more than max_ndim = %u dimensions", tq,
                                 f->limits.max_ndim);
                    break;
                }
                uint64_t dim;
                st = read_uint(pc, &de, "object.shape", &dim, err);
                if (st != TBX_OK) break;
                if (!tbx_grow(&f->al, (void **)&pc->shape, &pc->shape_cap, (size_t)ndim + 1,
                              sizeof *pc->shape)) {
                    st = tbx_err_nomem(err, "shape");
                    break;
                }
                pc->shape[ndim++] = dim;
            }
            has_shape = true;
        } else if (which == 1) {
            zt_str s;
            st = zt_read_str(c, &ve, ZT_EV_TEXT, &s, "object.format", err);
            if (st != TBX_OK) break;
            layout = -1;
            for (int l = 0; l < 4; l++)
                if (key_is(&s, zt_layout_names[l])) layout = l;
            if (layout < 0) {
                char q[64];
                tbx_quote_bytes(q, sizeof q, s.p, s.n, 32);
                st = tbx_err(err, TBX_E_UNSUPPORTED, ve.off, "object.format",
                             "tensor \"%s\": format \"%s\" is not supported (dense, sparse_csr, "
                             "sparse_coo, quantized_group)", tq, q);
            }
            zt_str_free(c, &s);
            has_format = true;
        } else if (which == 2) {
            if (ve.k == ZT_EV_NULL) continue;
            if (ve.k != ZT_EV_MAP && ve.k != ZT_EV_MAP_INDEF) {
                st = tbx_err(err, TBX_E_FORMAT, ve.off, "object.attributes",
                             "tensor \"%s\": attributes must be a map, got %s", tq,
                             zt_kind_a(ve.k));
                break;
            }
            st = zt_value(c, &ve, 0, &attrs, err);
        } else if (which == 3) {
            zt_iter ci;
            st = zt_iter_begin(c, &ve, true, &ci, "object.components", err);
            if (st == TBX_OK && !ci.indef && ci.left > ZT_NROLES)
                st = tbx_err(err, TBX_E_FORMAT, ve.off, "object.components",
                             "tensor \"%s\": %" PRIu64 " components, no layout has more than 3",
                             tq, ci.left);
            for (bool m2 = true; st == TBX_OK;) {
                zt_ev re, ce;
                st = zt_iter_next(c, &ci, &re, &m2, "object.components", err);
                if (st != TBX_OK || !m2) break;
                zt_str rs;
                st = zt_read_str(c, &re, ZT_EV_TEXT, &rs, "object.components", err);
                if (st != TBX_OK) break;
                int role = -1;
                for (int r = 0; r < ZT_NROLES; r++)
                    if (key_is(&rs, zt_role_names[r])) role = r;
                if (role < 0) {
                    char q[64];
                    tbx_quote_bytes(q, sizeof q, rs.p, rs.n, 32);
                    st = tbx_err(err, TBX_E_FORMAT, re.off, "object.components",
                                 "tensor \"%s\": unknown component role \"%s\"", tq, q);
                } else if (role_mask & (1u << role)) {
                    st = tbx_err(err, TBX_E_DUPLICATE, re.off, "object.components",
                                 "tensor \"%s\": duplicate component \"%s\"", tq,
                                 zt_role_names[role]);
                }
                zt_str_free(c, &rs);
                if (st == TBX_OK) st = zt_next(c, &ce, "object.components", err);
                if (st == TBX_OK && ce.k == ZT_EV_BREAK)
                    st = tbx_err(err, TBX_E_FORMAT, ce.off, "object.components",
                                 "object.components: map key without a value");
                if (st != TBX_OK) break;
                role_mask |= 1u << role;
                st = parse_component(pc, &ce, &pcs[role], tq, zt_role_names[role], err);
            }
            has_comps = true;
        } else {
            st = zt_skip(c, &ve, 0, err);
        }
    }
    ks_free(&ks);
    if (st == TBX_OK) {
        const char *missing = !has_shape ? "shape" : !has_format ? "format"
                            : !has_comps ? "components" : NULL;
        if (missing)
            st = tbx_err(err, TBX_E_FORMAT, mev->off,
                         !has_shape ? "object.shape" : !has_format ? "object.format"
                                                     : "object.components",
                         "tensor \"%s\" has no \"%s\"", tq, missing);
    }
    if (st == TBX_OK)
        st = zt_build_object(pc, name, name_off, ndim, layout, pcs, role_mask, &attrs, mev->off,
                             err);
    parsed_comps_free(pc, pcs);
    tbx_val_free(attrs);
    return st;
}

tbx_status zt_parse_root(zt_parse_ctx *pc, tbx_error *err) {
    zt_cbor *c = &pc->c;
    tbx_file *f = pc->f;
    zt_ev ev;
    tbx_status st = zt_next(c, &ev, "manifest", err);
    if (st != TBX_OK) return st;
    if (ev.k != ZT_EV_MAP && ev.k != ZT_EV_MAP_INDEF)
        return tbx_err(err, TBX_E_FORMAT, ev.off, "manifest",
                       "the manifest must be a CBOR map, got %s", zt_kind_a(ev.k));
    zt_iter it;
    st = zt_iter_begin(c, &ev, true, &it, "manifest", err);
    if (st != TBX_OK) return st;
    zt_keyset ks;
    ks_init(&ks, c);
    for (bool more = true; st == TBX_OK;) {
        zt_ev ke, ve;
        st = zt_iter_next(c, &it, &ke, &more, "manifest", err);
        if (st != TBX_OK || !more) break;
        zt_str key;
        st = zt_read_str(c, &ke, ZT_EV_TEXT, &key, "manifest.key", err);
        if (st != TBX_OK) break;
        int which = key_is(&key, "version") ? 0 : key_is(&key, "attributes") ? 1
                  : key_is(&key, "objects") ? 2 : -1;
        st = ks_add(&ks, &key, ke.off, "manifest", err);
        if (st == TBX_OK) st = zt_next(c, &ve, "manifest", err);
        if (st == TBX_OK && ve.k == ZT_EV_BREAK)
            st = tbx_err(err, TBX_E_FORMAT, ve.off, "manifest", "manifest: map key without a value");
        if (st != TBX_OK) break;
        if (which == 0) {
            zt_str s;
            st = zt_read_str(c, &ve, ZT_EV_TEXT, &s, "manifest.version", err);
            if (st != TBX_OK) break;
            uint32_t major = 0;
            for (size_t i = 0; i < s.n && s.p[i] >= '0' && s.p[i] <= '9' && major < 100000; i++)
                major = major * 10 + (uint32_t)(s.p[i] - '0');
            pc->version_major = major;
            pc->have_version = true;
            zt_str_free(c, &s);
        } else if (which == 1) {
            if (ve.k == ZT_EV_NULL) continue;
            zt_iter ai;
            st = zt_iter_begin(c, &ve, true, &ai, "manifest.attributes", err);
            if (st == TBX_OK && !ai.indef && ai.left > f->limits.max_metadata_entries)
                st = tbx_err(err, TBX_E_LIMIT, ve.off, "manifest.attributes",
                             "attributes: %" PRIu64 " entries exceed max_metadata_entries = %"
                             PRIu64, ai.left, f->limits.max_metadata_entries);
            for (bool m2 = true; st == TBX_OK;) {
                zt_ev ae, av;
                st = zt_iter_next(c, &ai, &ae, &m2, "manifest.attributes", err);
                if (st != TBX_OK || !m2) break;
                zt_str ak;
                st = zt_read_str(c, &ae, ZT_EV_TEXT, &ak, "attributes.key", err);
                if (st != TBX_OK) break;
                st = zt_next(c, &av, "manifest.attributes", err);
                if (st == TBX_OK && av.k == ZT_EV_BREAK)
                    st = tbx_err(err, TBX_E_FORMAT, av.off, "manifest.attributes",
                                 "attributes: map key without a value");
                tbx_value *v = NULL;
                if (st == TBX_OK) st = zt_value(c, &av, 0, &v, err);
                if (st == TBX_OK) st = tbx_file_add_meta(f, ak.p, ak.n, v, ae.off, err);
                zt_str_free(c, &ak);
            }
        } else if (which == 2) {
            zt_iter oi;
            st = zt_iter_begin(c, &ve, true, &oi, "manifest.objects", err);
            if (st == TBX_OK && !oi.indef && oi.left > f->limits.max_tensors)
                st = tbx_err(err, TBX_E_LIMIT, ve.off, "manifest.objects",
                             "objects: %" PRIu64 " tensors exceed max_tensors = %" PRIu64,
                             oi.left, f->limits.max_tensors);
            for (bool m2 = true; st == TBX_OK;) {
                zt_ev ne, oe;
                st = zt_iter_next(c, &oi, &ne, &m2, "manifest.objects", err);
                if (st != TBX_OK || !m2) break;
                zt_str name;
                st = zt_read_str(c, &ne, ZT_EV_TEXT, &name, "object.name", err);
                if (st != TBX_OK) break;
                st = zt_next(c, &oe, "manifest.objects", err);
                if (st == TBX_OK && oe.k == ZT_EV_BREAK)
                    st = tbx_err(err, TBX_E_FORMAT, oe.off, "manifest.objects",
                                 "objects: map key without a value");
                if (st == TBX_OK) st = parse_object(pc, &name, ne.off, &oe, err);
                zt_str_free(c, &name);
            }
            pc->have_objects = true;
        } else {
            st = zt_skip(c, &ve, 0, err);
        }
    }
    ks_free(&ks);
    if (st != TBX_OK) return st;
    if (c->pos != c->len)
        return tbx_err(err, TBX_E_FORMAT, c->base + c->pos, "manifest",
                       "manifest: %zu bytes follow the CBOR map inside the manifest",
                       c->len - c->pos);
    if (!pc->have_version)
        return tbx_err(err, TBX_E_FORMAT, c->base, "manifest.version",
                       "manifest: required key \"version\" is missing");
    if (!pc->have_objects)
        return tbx_err(err, TBX_E_FORMAT, c->base, "manifest.objects",
                       "manifest: required key \"objects\" is missing");
    return TBX_OK;
}
