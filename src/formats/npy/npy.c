/*
 * npy.c - the .npy reader: the open of a .npy file (its header parsed by npy_header.c), and
 * the read hooks the .npy and .npz rows share (byte swapping of big-endian arrays, the
 * transposition of Fortran-order arrays to row-major, deflated members through npz.c).
 *
 * A big-endian array ('>f4') is kept as it is stored and swapped on every read; a Fortran-order
 * array is reported with numpy's shape and read in row-major order (the values numpy.load
 * gives, element for element). Such an array's component is marked transformed
 * (tbx_component.xform): it reads through the driver, so no raw byte is ever served
 * untransformed (no maps, no kernel copies), while the other arrays of an archive are served
 * straight from the file.
 */
#include "npy_int.h"

#include <stdio.h>

#define NPY_CHUNK ((size_t)1 << 20)

void npy_close(tbx_file *f) {
    npy_state *s = f->drv_state;
    if (!s) return;
    if (s->zip) npz_zip_free(f, s->zip);
    tbx_free(&f->al, s->rec, (s->nrec ? s->nrec : 1) * sizeof *s->rec);
    tbx_file_uncharge(f, s->charged);
    tbx_free(&f->al, s, sizeof *s);
    f->drv_state = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* .npy files                                                                                  */
/* ------------------------------------------------------------------------------------------ */
bool npy_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    (void)file_size;
    return len >= NPY_MAGIC_LEN + 2 && memcmp(head, NPY_MAGIC, NPY_MAGIC_LEN) == 0;
}

tbx_status npy_open(tbx_file *f, tbx_error *err) {
    tbx_cursor c;
    tbx_status st = tbx_cursor_init(&c, &f->src, &f->al, 0, f->src.size, err);
    if (st != TBX_OK) return st;
    npy_hdr h;
    st = npy_parse_header(&c, 0, &f->limits, "", &h, err);
    tbx_cursor_free(&c);
    if (st != TBX_OK) return st;
    uint64_t end;
    if (!tbx_add_u64(h.data_off, h.nbytes, &end) || end > f->src.size)
        return tbx_err(err, TBX_E_TRUNCATED, h.data_off, "data",
                       "the array's %llu bytes run past the end of the file (%llu bytes)",
                       (unsigned long long)h.nbytes, (unsigned long long)f->src.size);
    if ((st = npy_state_new(f, 1, 0, err)) != TBX_OK) return st;
    f->version = h.major;
    tbx_tensor *t;
    if ((st = tbx_file_add_tensor(f, "arr_0", 5, h.dt->dtype, h.shape, h.ndim, 1, 0, &t, err)) !=
        TBX_OK)
        return st;
    tbx_comp_set_raw(t, h.dt->dtype, h.data_off, h.nbytes);
    npy_state *s = f->drv_state;
    npy_rec *r = &s->rec[0];
    r->data_off = h.data_off;
    r->zidx = -1;
    r->elem = h.dt->size;
    r->unit = h.big_endian ? h.dt->unit : 0;
    r->fortran = npy_hdr_transposed(&h);
    t->comp[0].xform = r->unit || r->fortran;
    if (end < f->src.size)
        return tbx_file_problem(f, err, TBX_E_FORMAT, end, "data",
                                "%llu bytes after the array's data (the array ends at byte %llu)",
                                (unsigned long long)(f->src.size - end), (unsigned long long)end);
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading through the driver: swapping, transposition, deflated members                      */
/* ------------------------------------------------------------------------------------------ */
static const npy_rec *rec_of(const tbx_file *f, const tbx_tensor *t) {
    const npy_state *s = f->drv_state;
    return &s->rec[t - f->tensors];
}

/* Bytes [pos, pos + len) of the array data as stored (row- or column-major). */
static tbx_status fetch(tbx_file *f, const tbx_tensor *t, const npy_rec *r, uint64_t pos,
                        void *buf, size_t len, tbx_error *err) {
    if (len == 0) return TBX_OK;
    if (r->deflated) return npz_read_decoded(f, r, t->name, r->data_off + pos, buf, len, err);
    return tbx_source_read(&f->src, r->data_off + pos, buf, len, t->name, err);
}

static void swap_units(uint8_t *p, size_t nbytes, unsigned unit) {
    if (unit < 2) return;
    for (size_t i = 0; i + unit <= nbytes; i += unit)
        for (unsigned a = 0, b = unit - 1; a < b; a++, b--) {
            uint8_t tmp = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = tmp;
        }
}

/* Strides of a column-major (fs) and a row-major (cs) layout of the tensor's shape, elements. */
static void strides(const tbx_tensor *t, uint64_t *fs, uint64_t *cs) {
    const uint32_t n = t->ndim;
    uint64_t acc = 1;
    for (uint32_t d = 0; d < n; d++) { fs[d] = acc; acc *= t->shape[d]; }
    acc = 1;
    for (uint32_t d = n; d-- > 0;) { cs[d] = acc; acc *= t->shape[d]; }
}

/* Elements [e, e + n) in row-major order of a column-major array whose stored bytes are all
 * at `base` (a mapping or memory), into dst. */
static void gather(const tbx_tensor *t, unsigned elem, const uint8_t *base, uint64_t e,
                   uint64_t n, uint8_t *dst) {
    uint64_t fs[NPY_MAX_DIM], cs[NPY_MAX_DIM], idx[NPY_MAX_DIM];
    strides(t, fs, cs);
    const uint32_t nd = t->ndim;
    uint64_t foff = 0, rem = e;
    for (uint32_t d = 0; d < nd; d++) {
        idx[d] = rem / cs[d];
        rem %= cs[d];
        foff += idx[d] * fs[d];
    }
    for (uint64_t i = 0; i < n; i++, dst += elem) {
        memcpy(dst, base + foff * elem, elem);
        uint32_t k = nd - 1;
        idx[k]++;
        foff += fs[k];
        while (k > 0 && idx[k] == t->shape[k]) {
            foff -= t->shape[k] * fs[k];
            idx[k] = 0;
            k--;
            idx[k]++;
            foff += fs[k];
        }
    }
}

/* Elements [e, e + n) in row-major order of a column-major array, by one pass over its stored
 * bytes (a deflated member, a callback source): each element read in stored order lands at its
 * row-major place when it is inside the range. */
static tbx_status scatter_pass(tbx_file *f, const tbx_tensor *t, const npy_rec *r, uint64_t e,
                               uint64_t n, uint8_t *dst, tbx_error *err) {
    uint64_t fs[NPY_MAX_DIM], cs[NPY_MAX_DIM], idx[NPY_MAX_DIM];
    strides(t, fs, cs);
    const uint32_t nd = t->ndim;
    const unsigned elem = r->elem;
    memset(idx, 0, nd * sizeof idx[0]);
    uint8_t *chunk = tbx_malloc(&f->al, NPY_CHUNK);
    if (!chunk) return tbx_err_nomem(err, "transposition buffer");
    const uint64_t total = t->nelems, per = NPY_CHUNK / elem;
    uint64_t cidx = 0, done = 0;
    tbx_status st = TBX_OK;
    for (uint64_t f0 = 0; f0 < total && st == TBX_OK && done < n; f0 += per) {
        uint64_t m = total - f0 < per ? total - f0 : per;
        st = fetch(f, t, r, f0 * elem, chunk, (size_t)(m * elem), err);
        for (uint64_t i = 0; i < m && st == TBX_OK; i++) {
            if (cidx >= e && cidx - e < n) {
                memcpy(dst + (cidx - e) * elem, chunk + i * elem, elem);
                done++;
            }
            uint32_t k = 0;
            idx[0]++;
            cidx += cs[0];
            while (k + 1 < nd && idx[k] == t->shape[k]) {
                cidx -= t->shape[k] * cs[k];
                idx[k] = 0;
                k++;
                idx[k]++;
                cidx += cs[k];
            }
        }
    }
    tbx_free(&f->al, chunk, NPY_CHUNK);
    return st;
}

/* Elements [e, e + n) of the tensor in row-major order, little-endian, into dst. */
static tbx_status read_elems(tbx_file *f, const tbx_tensor *t, const npy_rec *r, uint64_t e,
                             uint64_t n, uint8_t *dst, tbx_error *err) {
    const unsigned elem = r->elem;
    tbx_status st = TBX_OK;
    if (n == 0) return TBX_OK;
    if (!r->fortran) {
        st = fetch(f, t, r, e * elem, dst, (size_t)(n * elem), err);
    } else if (!r->deflated) {
        tbx_view v;
        const uint64_t nbytes = t->comp[0].nbytes;
        const uint8_t *p = tbx_source_view(&f->src, r->data_off, nbytes, &v);
        if (p) {
            gather(t, elem, p, e, n, dst);
            st = tbx_view_check(&v, r->data_off, nbytes, t->name, err);
            tbx_view_release(&v);
        } else {
            st = scatter_pass(f, t, r, e, n, dst, err);
        }
    } else {
        st = scatter_pass(f, t, r, e, n, dst, err);
    }
    if (st == TBX_OK) swap_units(dst, (size_t)(n * elem), r->unit);
    return st;
}

/* A pending check (TBX_OPEN_VERIFY_DIGESTS) of a member not yet verified. */
static tbx_status verify_once(tbx_file *f, const tbx_tensor *t, const npy_rec *r,
                              tbx_error *err) {
    const npy_state *s = f->drv_state;
    if (r->zidx < 0 || !s->verify || atomic_load(&r->verified)) return TBX_OK;
    tbx_status st = r->deflated ? npz_check_deflated(f, r, t->name, err)
                                : npz_check_stored(f, r, t->name, err);
    if (st == TBX_OK) atomic_store(&((npy_rec *)r)->verified, 1);
    return st;
}

tbx_status npy_read_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                              tbx_error *err) {
    (void)c;
    const npy_rec *r = rec_of(f, t);
    tbx_status st = verify_once(f, t, r, err);
    if (st != TBX_OK) return st;
    const uint64_t nbytes = t->comp[0].nbytes;
    if (nbytes > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, t->comp[0].offset, t->name, "too large");
    return read_elems(f, t, r, 0, r->elem ? nbytes / r->elem : 0, buf, err);
}

tbx_status npy_read_component_range(tbx_file *f, const tbx_tensor *t, uint32_t c, uint64_t pos,
                                    void *buf, size_t len, tbx_error *err) {
    (void)c;
    const npy_rec *r = rec_of(f, t);
    tbx_status st = verify_once(f, t, r, err);
    if (st != TBX_OK || len == 0) return st;
    if (!r->fortran && !r->unit) return fetch(f, t, r, pos, buf, len, err);
    const unsigned elem = r->elem;
    uint8_t *out = buf, tmp[16];
    uint64_t e = pos / elem;
    size_t head = (size_t)(pos % elem), left = len;
    if (head) {
        if ((st = read_elems(f, t, r, e, 1, tmp, err)) != TBX_OK) return st;
        size_t n = elem - head < left ? elem - head : left;
        memcpy(out, tmp + head, n);
        out += n;
        left -= n;
        e++;
    }
    uint64_t whole = left / elem;
    if (whole) {
        if ((st = read_elems(f, t, r, e, whole, out, err)) != TBX_OK) return st;
        out += whole * elem;
        left -= (size_t)(whole * elem);
        e += whole;
    }
    if (left) {
        if ((st = read_elems(f, t, r, e, 1, tmp, err)) != TBX_OK) return st;
        memcpy(out, tmp, left);
    }
    return TBX_OK;
}

bool npy_raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c) {
    (void)c;
    const npy_state *s = f->drv_state;
    const npy_rec *r = rec_of(f, t);
    return s && s->verify && r->zidx >= 0 && !r->deflated && !atomic_load(&r->verified);
}

tbx_status npy_check_component(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err) {
    (void)c;
    const npy_rec *r = rec_of(f, t);
    if (r->zidx < 0) return TBX_OK;
    if (atomic_load(&r->verified)) return TBX_OK;
    tbx_status st = r->deflated ? npz_check_deflated(f, r, t->name, err)
                                : npz_check_stored(f, r, t->name, err);
    if (st == TBX_OK) atomic_store(&((npy_rec *)r)->verified, 1);
    return st;
}
