/*
 * ztensor_validate.c - what tbx_validate adds for zTensor (zt_validate, after the core's pass
 * that decoded every compressed component and verified the digests on worker threads):
 *
 *   - digests not verified yet;
 *   - padding: every byte between the 8-byte magic, the components and the manifest is zero
 *
 *       0      8                                        manifest_off
 *       |magic | 00 .. 00 | blob | 00 .. | blob | 00 .. | manifest ...
 *
 *   - sparse_csr: indptr[0] == 0, non-decreasing, at most nnz, indptr[rows] == nnz; every
 *     indices[k] in [0, cols) (its row named);
 *   - sparse_coo: every coordinate k of dimension d in [0, shape[d]);
 *   - dense bool tensors: every byte 0x00 or 0x01.
 *
 * Each finding is a problem (tbx_file_problem) naming the field and offset; indices are walked
 * through element streams in bounded memory. A decoding failure met during a walk ends it
 * quietly (the core's pass reports it already); I/O and memory errors are returned.
 */
#include "ztensor_int.h"

#include <inttypes.h>
#include <stdio.h>

/* Digests not verified yet (tbx_validate's pass over the data normally did them all). */
static tbx_status validate_digests(tbx_file *f, tbx_error *err) {
    for (size_t i = 0; i < f->ntensors; i++) {
        const tbx_tensor *t = &f->tensors[i];
        for (uint32_t c = 0; c < t->ncomp; c++) {
            if (!t->comp[c].digest || vget(t->drv, c) != ZT_V_UNCHECKED) continue;
            tbx_status st = zt_decode_component(f, t, c, NULL, err);
            if (st != TBX_OK) return st;
        }
    }
    return TBX_OK;
}

/* Bytes of [from, to) not covered by a component must be zero. */
static tbx_status check_gap(tbx_file *f, uint64_t from, uint64_t to, uint8_t *chunk,
                            tbx_error *err) {
    for (uint64_t off = from; off < to;) {
        size_t n = to - off > ZT_CHUNK ? ZT_CHUNK : (size_t)(to - off);
        tbx_status st = tbx_source_read(&f->src, off, chunk, n, "padding", err);
        if (st != TBX_OK) return st;
        for (size_t i = 0; i < n; i++) {
            if (chunk[i]) {
                return tbx_file_problem(f, err, TBX_E_PADDING, off + i, "padding",
                                        "padding: byte 0x%02x in the %" PRIu64
                                        " bytes of padding at [%" PRIu64 ", %" PRIu64
                                        ") is not zero", chunk[i], to - from, from, to);
            }
        }
        off += n;
    }
    return TBX_OK;
}

static tbx_status validate_padding(tbx_file *f, uint8_t *chunk, tbx_error *err) {
    zt_state *s = f->drv_state;
    uint64_t pos = 8;
    for (size_t i = 0; i < s->nspans; i++) {
        if (s->spans[i].off > pos) {
            tbx_status st = check_gap(f, pos, s->spans[i].off, chunk, err);
            if (st != TBX_OK) return st;
        }
        if (s->spans[i].end > pos) pos = s->spans[i].end;
    }
    return pos < s->manifest_off ? check_gap(f, pos, s->manifest_off, chunk, err) : TBX_OK;
}

/* Decode failures met while walking a component (zstd errors, short data) are reported by the
 * core's validation read of every component; here they only end the walk. I/O and memory
 * errors are returned. */
static tbx_status walk_stop(tbx_status st, const tbx_error *e, tbx_error *err) {
    if (st == TBX_E_NOMEM || st == TBX_E_IO) {
        if (err) *err = *e;
        return st;
    }
    return TBX_OK;
}

static tbx_status validate_csr(tbx_file *f, const tbx_tensor *t, const char *tq,
                               tbx_error *err) {
    const zt_tdrv *d = t->drv;
    zt_es ip, ix;
    tbx_error e;
    tbx_status rc = TBX_OK, st = zt_es_open(&ip, f, t, 2, false, &e);
    if (st != TBX_OK) return walk_stop(st, &e, err);
    st = zt_es_open(&ix, f, t, 1, false, &e);
    if (st != TBX_OK) { zt_es_close(&ip); return walk_stop(st, &e, err); }
    uint64_t prev = 0, k = 0;
    for (uint64_t r = 0; r <= d->rows; r++) {
        uint64_t v;
        bool neg;
        st = zt_es_int(&ip, &v, &neg, &e);
        if (st != TBX_OK) { rc = walk_stop(st, &e, err); break; }
        const char *why = neg ? "is negative" : (r == 0 && v != 0) ? "must be 0"
                        : v < prev ? "is smaller than the element before it"
                        : v > d->nnz ? "exceeds nnz" : (r == d->rows && v != d->nnz)
                        ? "is the last element and differs from nnz" : NULL;
        if (why) {
            rc = tbx_file_problem(f, err, TBX_E_FORMAT, t->comp[2].offset, "component.indptr",
                                  "tensor \"%s\": indptr[%" PRIu64 "] = %s%" PRIu64
                                  " %s (nnz %" PRIu64 ")", tq, r, neg ? "-" : "",
                                  neg ? (uint64_t)0 - v : v, why, d->nnz);
            break;
        }
        bool bad = false;
        for (; k < v; k++) {
            uint64_t col;
            st = zt_es_int(&ix, &col, &neg, &e);
            if (st != TBX_OK) { rc = walk_stop(st, &e, err); bad = true; break; }
            if (neg || col >= d->cols) {
                rc = tbx_file_problem(f, err, TBX_E_FORMAT, t->comp[1].offset, "component.indices",
                                      "tensor \"%s\": indices[%" PRIu64 "] = %s%" PRIu64
                                      " (row %" PRIu64 ") is outside [0, %" PRIu64 ")", tq, k,
                                      neg ? "-" : "", neg ? (uint64_t)0 - col : col,
                                      r ? r - 1 : 0, d->cols);
                bad = true;
                break;
            }
        }
        if (bad) break;
        prev = v;
    }
    zt_es_close(&ip);
    zt_es_close(&ix);
    return rc;
}

static tbx_status validate_coo(tbx_file *f, const tbx_tensor *t, const char *tq,
                               tbx_error *err) {
    const zt_tdrv *d = t->drv;
    zt_es cs;
    tbx_error e;
    tbx_status rc = TBX_OK, st = zt_es_open(&cs, f, t, 1, false, &e);
    if (st != TBX_OK) return walk_stop(st, &e, err);
    bool stop = false;
    for (uint32_t dd = 0; dd < t->ndim && !stop; dd++) {
        for (uint64_t k = 0; k < d->nnz; k++) {
            uint64_t v;
            bool neg;
            st = zt_es_int(&cs, &v, &neg, &e);
            if (st != TBX_OK) { rc = walk_stop(st, &e, err); stop = true; break; }
            if (neg || v >= t->shape[dd]) {
                rc = tbx_file_problem(f, err, TBX_E_FORMAT, t->comp[1].offset, "component.coords",
                                      "tensor \"%s\": coordinate %u of entry %" PRIu64 " is %s%"
                                      PRIu64 ", outside [0, %" PRIu64 ")", tq, dd, k,
                                      neg ? "-" : "", neg ? (uint64_t)0 - v : v, t->shape[dd]);
                stop = true;
                break;
            }
        }
    }
    zt_es_close(&cs);
    return rc;
}

static tbx_status validate_bool(tbx_file *f, const tbx_tensor *t, const char *tq,
                                tbx_error *err) {
    zt_es s;
    tbx_error e;
    tbx_status rc = TBX_OK, st = zt_es_open(&s, f, t, 0, false, &e);
    if (st != TBX_OK) return walk_stop(st, &e, err);
    for (uint64_t k = 0; k < t->comp[0].nelems; k++) {
        uint64_t v;
        bool neg;
        st = zt_es_int(&s, &v, &neg, &e);
        if (st != TBX_OK) { rc = walk_stop(st, &e, err); break; }
        if (v > 1) {
            rc = tbx_file_problem(f, err, TBX_E_FORMAT, t->comp[0].offset, "component.data",
                                  "tensor \"%s\": bool element %" PRIu64
                                  " is 0x%02x; booleans are 0x00 or 0x01", tq, k, (unsigned)v);
            break;
        }
    }
    zt_es_close(&s);
    return rc;
}

tbx_status zt_validate(tbx_file *f, tbx_error *err) {
    uint8_t *chunk = tbx_malloc(&f->al, ZT_CHUNK);
    if (!chunk) return tbx_err_nomem(err, "validation buffer");
    tbx_status st = validate_digests(f, err);
    if (st == TBX_OK) st = validate_padding(f, chunk, err);
    tbx_free(&f->al, chunk, ZT_CHUNK);
    for (size_t i = 0; i < f->ntensors && st == TBX_OK; i++) {
        const tbx_tensor *t = &f->tensors[i];
        char tq[96];
        tbx_quote_bytes(tq, sizeof tq, t->name, t->name_len, 64);
        if (t->layout == TBX_LAYOUT_SPARSE_CSR) st = validate_csr(f, t, tq, err);
        else if (t->layout == TBX_LAYOUT_SPARSE_COO) st = validate_coo(f, t, tq, err);
        else if (t->layout == TBX_LAYOUT_DENSE && t->comp[0].dtype == TBX_DT_BOOL)
            st = validate_bool(f, t, tq, err);
    }
    return st;
}
