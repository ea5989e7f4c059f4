/*
 * npy_write.c - the .npy writer, and the .npy header both writers put before an array's bytes.
 *
 * The header is the one numpy.save writes (numpy/lib/format.py, write_array_header_1_0): the dict
 * "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" with keys sorted, then
 * 21 - len(str(shape[0])) spaces of room to grow the first axis (none for a 0-d array), then
 * spaces up to a multiple of 64 bytes for the whole preamble and a final '\n'. Version 1.0 (a
 * u16 length) unless the caller asks for 2.0 or 3.0 or the header does not fit in 1.0. The
 * tensor's bytes follow unchanged: row-major, little-endian. An .npy file holds one array and no
 * name: a second tensor is refused (write .npz), metadata are refused as lossy.
 */
#include "npy_int.h"

#include <stdio.h>

size_t npy_header_cap(uint32_t ndim) { return 256 + (size_t)ndim * 24; }

size_t npy_header_build(tbx_dtype dt, const uint64_t *shape, uint32_t ndim, unsigned major,
                        uint8_t *buf, size_t cap) {
    const npy_dtype *d = npy_dtype_of(dt);
    if (!d || major < 1 || major > 3) return 0;
    const size_t prefix = major == 1 ? 10 : 12;
    if (cap < prefix + 128) return 0;
    char *p = (char *)buf + prefix, *e = (char *)buf + cap;
    int n = snprintf(p, (size_t)(e - p), "{'descr': '%c%c%u', 'fortran_order': False, 'shape': (",
                     d->size == 1 ? '|' : '<', d->kind, (unsigned)d->size);
    if (n < 0 || n >= e - p) return 0;
    p += n;
    for (uint32_t i = 0; i < ndim; i++) {
        n = snprintf(p, (size_t)(e - p), "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
        if (n < 0 || n >= e - p) return 0;
        p += n;
    }
    n = snprintf(p, (size_t)(e - p), "%s), }", ndim == 1 ? "," : "");
    if (n < 0 || n >= e - p) return 0;
    p += n;
    if (ndim > 0) {
        char digits[24];
        int dl = snprintf(digits, sizeof digits, "%llu", (unsigned long long)shape[0]);
        for (int k = dl; k < NPY_GROWTH_DIGITS; k++) {
            if (p >= e) return 0;
            *p++ = ' ';
        }
    }
    const size_t hlen = (size_t)(p - ((char *)buf + prefix)) + 1; /* + '\n' */
    const size_t pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
    const size_t total = prefix + hlen + pad;
    if (total > cap) return 0;
    if (major == 1 && hlen + pad > 0xffff) return 0;
    memset(p, ' ', pad);
    p[pad] = '\n';
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    if (major == 1) tbx_st16(buf + 8, (uint16_t)(hlen + pad));
    else tbx_st32(buf + 8, (uint32_t)(hlen + pad));
    return total;
}

tbx_status npy_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                            tbx_error *err) {
    (void)v;
    char q[96];
    tbx_quote_bytes(q, sizeof q, key, key_len, 64);
    return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                   "metadata \"%s\": %s files have no metadata", q, w->drv->name);
}

/* What both writers check of every tensor: a dtype numpy has, a shape it can take. */
static tbx_status check_common(const tbx_writer *w, const tbx_wtensor *t, tbx_error *err) {
    char q[96];
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    if (!npy_dtype_of((tbx_dtype)t->dtype)) {
        const tbx_dtype_info *di = tbx_writer_dtype(w, (tbx_dtype)t->dtype);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": numpy has no %s dtype (bool, i8..i64, u8..u64, f16, f32, "
                       "f64, c64, c128)", q, di ? di->name : "such");
    }
    if (t->ndim > NPY_MAX_DIM)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": %u dimensions (numpy takes at most %u)", q,
                       (unsigned)t->ndim, NPY_MAX_DIM);
    return TBX_OK;
}

tbx_status npy_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    if (w->ntensors >= 1) {
        char q[96];
        tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensors",
                       "an .npy file holds one array; tensor \"%s\" would be array number %zu "
                       "(write an .npz archive for several)", q, w->ntensors + 1);
    }
    return check_common(w, t, err);
}

tbx_status npz_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    tbx_status st = check_common(w, t, err);
    if (st != TBX_OK) return st;
    char q[96];
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    size_t bad;
    if (!tbx_utf8_valid(t->name, t->name_len, &bad))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.name",
                       "tensor \"%s\": an .npz member name is text (UTF-8; byte %zu is not)", q,
                       bad);
    if (t->name_len == 0 || t->name_len > 0xffff - 4)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.name",
                       "tensor \"%s\": a zip member name has 1..65531 bytes before \".npy\" "
                       "(this one has %u)", q, (unsigned)t->name_len);
    return TBX_OK;
}

tbx_status npy_w_layout(tbx_writer *w, tbx_error *err) {
    if (w->ntensors != 1)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensors",
                       "an .npy file holds exactly one array; %zu tensors were given", w->ntensors);
    tbx_wtensor *t = &w->tensors[0];
    const size_t cap = npy_header_cap(t->ndim);
    uint8_t *h = tbx_malloc(&w->al, cap);
    if (!h) return tbx_err_nomem(err, "npy header");
    /* the version the row allows, resolved by core (1.0 unless asked for): a header of
     * NPY_MAX_DIM dimensions fits in v1.0's 65,535 bytes, so numpy's own step up to 2.0 for a
     * header too long never happens here */
    const unsigned major = w->opt.version;
    size_t n = npy_header_build((tbx_dtype)t->dtype, t->shape, t->ndim, major, h, cap);
    tbx_status st = TBX_OK;
    if (n == 0)
        st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "version",
                     "the header of tensor \"%s\" does not fit in .npy version %u", t->name, major);
    if (st == TBX_OK) st = tbx_out_pwrite(&w->out, 0, h, n, err);
    tbx_free(&w->al, h, cap);
    if (st != TBX_OK) return st;
    t->offset = n;
    if (!tbx_add_u64(n, t->nbytes, &w->end))
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "file size overflows");
    return TBX_OK;
}
