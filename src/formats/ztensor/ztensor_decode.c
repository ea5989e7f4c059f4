/*
 * ztensor_decode.c - elements [first, first + count) of a sparse or quantized_group tensor as
 * f32 (the driver's read_f32 hook behind tbx_tensor_read_f32): sparse tensors densified (zeros,
 * then every stored entry added at its flat index: duplicates sum), quantized groups
 * dequantized. The components are read through element streams (ztensor_read.c):
 *
 *   sparse_csr (rows x cols)     indptr  [0, p1, p2, ..., nnz]   row r's entries: [p_r, p_r+1)
 *                                indices [c0, c1, ...]  (nnz)    column of each entry
 *                                values  [v0, v1, ...]  (nnz)
 *   sparse_coo (ndim, nnz)       coords  [d0 of every entry | d1 of every entry | ...]
 *                                values  [v0, v1, ...]  (nnz)
 *   quantized_group              packed_weight: words of N codes, code k at bits
 *                                [k*bits, k*bits + bits), LSB first, codes continuous in
 *                                row-major order; scales, zeros: one per group of group_size
 *                                elements of a row; value = ((float)code - zero) * scale
 *
 * CSR and quantized_group reads use parked streams, so that a tensor read chunk after chunk
 * decodes each component once (a CSR row cut by the end of a chunk is read on a second lane).
 * An index outside its row or dimension, or an indptr that is not monotonic, is an error naming
 * the component; the element streams bypass the digest check, so pending digests are verified
 * first.
 */
#include "ztensor_int.h"

#include <inttypes.h>
#include <stdio.h>

#include "split.h"

static tbx_status entry_error(tbx_error *err, const tbx_tensor *t, uint32_t c, const char *fmt,
                              uint64_t a, uint64_t b) {
    char w[128], msg[160];
    zt_what(w, sizeof w, t, c);
    snprintf(msg, sizeof msg, fmt, a, b);
    return tbx_err(err, TBX_E_FORMAT, t->comp[c].offset, "component", "component %s: %s", w, msg);
}

/* Row r of a CSR tensor: entries [p, q) from the indices and values streams, added into
 * out where their flat index falls in [first, last). */
static tbx_status csr_row(const tbx_tensor *t, uint64_t r, uint64_t p, uint64_t q, zt_es *ix,
                          zt_es *vs, uint64_t first, uint64_t last, float *out, tbx_error *err) {
    const uint64_t cols = ((const zt_tdrv *)t->drv)->cols;
    tbx_status st = TBX_OK;
    for (; p < q && st == TBX_OK; p++) {
        uint64_t col = 0;
        bool neg = false;
        float v = 0;
        st = zt_es_int(ix, &col, &neg, err);
        if (st == TBX_OK) st = zt_es_f32(vs, &v, err);
        if (st != TBX_OK) break;
        if (neg || col >= cols)
            return entry_error(err, t, 1, "indices[%" PRIu64 "] = %" PRIu64
                               " is outside the row", p, col);
        uint64_t flat = r * cols + col;
        if (flat >= first && flat < last) out[flat - first] += v;
    }
    return st;
}

/* indptr[r] = q read from ip, checked against the previous entry p. */
static tbx_status csr_ptr(const tbx_tensor *t, zt_es *ip, uint64_t r, uint64_t p, uint64_t *q,
                          tbx_error *err) {
    const zt_tdrv *d = t->drv;
    bool neg;
    tbx_status st = zt_es_int(ip, q, &neg, err);
    if (st != TBX_OK) return st;
    if (neg || *q < p || *q > d->nnz || (r == d->rows && *q != d->nnz) || (r == 0 && *q != 0))
        return entry_error(err, t, 2, "indptr[%" PRIu64 "] = %" PRIu64
                           " is not monotonic / does not start at 0 / does not end at nnz", r,
                           *q);
    return TBX_OK;
}

/* Rows r0..r1 of a CSR tensor, through parked streams so that reading a tensor chunk after
 * chunk decodes each component once. Lane 0 reads indices and values row after row and stops
 * at the start of a last row that the range cuts (the next read starts there); such a row is
 * read on lane 1, which moves forward from one cut row to the next. */
static tbx_status read_csr(tbx_file *f, const tbx_tensor *t, uint64_t first, uint64_t last,
                           float *out, tbx_error *err) {
    const zt_tdrv *d = t->drv;
    const uint64_t cols = d->cols;
    const uint64_t r0 = first / cols, r1 = (last - 1) / cols; /* rows touched, inclusive */
    const bool cut = r1 > r0 && last < (r1 + 1) * cols;       /* row r1 continues after last */
    const uint64_t rend = cut ? r1 : r1 + 1;                   /* rows [r0, rend) on lane 0 */
    zt_es ip, ix, vs, ix1, vs1;
    ip.open = ix.open = vs.open = ix1.open = vs1.open = false;
    uint64_t p = 0, q = 0;
    tbx_status st = zt_es_get(&ip, f, t, 2, ZT_ES_INT, 0, r0, err);
    if (st == TBX_OK) st = csr_ptr(t, &ip, r0, 0, &p, err);
    if (st == TBX_OK) st = zt_es_get(&ix, f, t, 1, ZT_ES_INT, 0, p, err);
    if (st == TBX_OK) st = zt_es_get(&vs, f, t, 0, ZT_ES_F32, 0, p, err);
    for (uint64_t r = r0; r < rend && st == TBX_OK; r++, p = q) {
        st = csr_ptr(t, &ip, r + 1, p, &q, err);
        if (st == TBX_OK) st = csr_row(t, r, p, q, &ix, &vs, first, last, out, err);
    }
    if (cut && st == TBX_OK) {
        st = csr_ptr(t, &ip, r1 + 1, p, &q, err);
        if (st == TBX_OK) st = zt_es_get(&ix1, f, t, 1, ZT_ES_INT, 1, p, err);
        if (st == TBX_OK) st = zt_es_get(&vs1, f, t, 0, ZT_ES_F32, 1, p, err);
        if (st == TBX_OK) st = csr_row(t, r1, p, q, &ix1, &vs1, first, last, out, err);
    }
    zt_es *all[5] = {&ip, &ix, &vs, &ix1, &vs1};
    for (int k = 0; k < 5; k++) {
        if (st == TBX_OK && all[k]->open) zt_es_put(f, all[k]);
        else zt_es_close(all[k]);
    }
    return st;
}

static tbx_status read_coo(tbx_file *f, const tbx_tensor *t, uint64_t first, uint64_t last,
                           float *out, tbx_error *err) {
    const zt_tdrv *d = t->drv;
    uint32_t nd = t->ndim;
    zt_es vs;
    zt_es *cs = tbx_calloc(&f->al, nd, sizeof *cs);
    if (!cs) return tbx_err_nomem(err, "coords streams");
    uint32_t opened = 0;
    bool ovs = false;
    tbx_status st = zt_es_open(&vs, f, t, 0, true, err);
    if (st == TBX_OK) ovs = true;
    for (uint32_t dd = 0; dd < nd && st == TBX_OK; dd++) {
        st = zt_es_open(&cs[dd], f, t, 1, false, err);
        if (st != TBX_OK) break;
        opened++;
        st = zt_es_skip(&cs[dd], (uint64_t)dd * d->nnz, err);
    }
    for (uint64_t k = 0; k < d->nnz && st == TBX_OK; k++) {
        uint64_t flat = 0;
        float v;
        for (uint32_t dd = 0; dd < nd && st == TBX_OK; dd++) {
            uint64_t x;
            bool neg;
            st = zt_es_int(&cs[dd], &x, &neg, err);
            if (st != TBX_OK) break;
            if (neg || x >= t->shape[dd]) {
                st = entry_error(err, t, 1, "coordinate of entry %" PRIu64 " is %" PRIu64
                                 ", outside its dimension", k, x);
                break;
            }
            flat = flat * t->shape[dd] + x; /* < nelems: no overflow */
        }
        if (st == TBX_OK) st = zt_es_f32(&vs, &v, err);
        if (st == TBX_OK && flat >= first && flat < last) out[flat - first] += v;
    }
    for (uint32_t dd = 0; dd < opened; dd++) zt_es_close(&cs[dd]);
    if (ovs) zt_es_close(&vs);
    tbx_free(&f->al, cs, nd * sizeof *cs);
    return st;
}

/* Elements decoded per call of the split kernel (sizes the word / scale / zero buffers, which
 * live on the stack: ~16 KiB, no allocation per call). */
#define ZT_QCHUNK 1024u

/* quantized_group through the split-layout kernel (src/quant/split.h): the packed words, scales
 * and zeros are streamed chunk by chunk into small buffers (a word or group shared by two
 * chunks is carried over, so every stream is read once, in order) and handed to the kernel. */
static tbx_status read_qgroup(tbx_file *f, const tbx_tensor *t, uint64_t first, uint64_t last,
                              float *out, tbx_error *err) {
    const zt_tdrv *d = t->drv;
    tbx_split_geom g;
    if (!t->quant || tbx_split_geom_init(&g, t->quant, t->shape, t->ndim, d->qper) != TBX_OK)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": quantized_group geometry not decodable", t->name);
    tbx_dequant_split_fn kernel = tbx_dequant_split_for(&g);
    const uint64_t per = d->qper, wb = g.word_bytes;
    uint8_t words[(ZT_QCHUNK + 2) * 8];           /* per >= 1 code per word of <= 8 bytes */
    float scales[ZT_QCHUNK + 2], zeros[ZT_QCHUNK + 2]; /* <= one group per element (+1) */
    zt_es pw, sc, zr;
    pw.open = sc.open = zr.open = false;
    tbx_status st = TBX_OK;
    uint64_t g_first = tbx_split_param_index(&g, TBX_QSCOPE_GROUP, first);
    /* parked streams: the next call continues where this one ends */
    if (st == TBX_OK) st = zt_es_get(&pw, f, t, 0, ZT_ES_INT, 0, first / per, err);
    if (st == TBX_OK) st = zt_es_get(&sc, f, t, 1, ZT_ES_F32, 0, g_first, err);
    if (st == TBX_OK) st = zt_es_get(&zr, f, t, 2, ZT_ES_F32, 0, g_first, err);
    uint64_t w_have = UINT64_MAX, g_have = UINT64_MAX; /* last word / group read */
    uint64_t w_val = 0;
    float s_val = 0, z_val = 0;
    for (uint64_t e0 = first; e0 < last && st == TBX_OK;) {
        uint64_t n = last - e0 < ZT_QCHUNK ? last - e0 : ZT_QCHUNK;
        uint64_t wa = e0 / per, wz = (e0 + n - 1) / per;
        for (uint64_t w = wa; w <= wz && st == TBX_OK; w++) {
            if (w != w_have) {
                st = zt_es_word(&pw, &w_val, err);
                w_have = w;
            }
            for (uint64_t k = 0; k < wb; k++) words[(w - wa) * wb + k] = (uint8_t)(w_val >> (8 * k));
        }
        uint64_t ga = tbx_split_param_index(&g, TBX_QSCOPE_GROUP, e0);
        uint64_t gz = tbx_split_param_index(&g, TBX_QSCOPE_GROUP, e0 + n - 1);
        for (uint64_t k = ga; k <= gz && st == TBX_OK; k++) {
            if (k != g_have) {
                st = zt_es_f32(&sc, &s_val, err);
                if (st == TBX_OK) st = zt_es_f32(&zr, &z_val, err);
                g_have = k;
            }
            scales[k - ga] = s_val;
            zeros[k - ga] = z_val;
        }
        if (st != TBX_OK) break;
        kernel(&g, words, scales, zeros, e0, n, out + (e0 - first));
        e0 += n;
    }
    zt_es *all[3] = {&pw, &sc, &zr};
    for (int k = 0; k < 3; k++) {
        if (st == TBX_OK && all[k]->open) zt_es_put(f, all[k]);
        else zt_es_close(all[k]);
    }
    return st;
}

/* Elements [first, first + count) of a non-dense tensor (range and output checked by the core,
 * tbx_tensor_read_f32): sparse layouts densified, quantized groups dequantized. */
static tbx_status zt_read_f32_range(tbx_file *f, uint64_t i, uint64_t first, uint64_t count,
                                    float *out, tbx_error *err) {
    const tbx_tensor *t = &f->tensors[i];
    const uint64_t last = first + count; /* checked by tbx_tensor_read_f32 */
    for (uint32_t c = 0; c < t->ncomp; c++) {
        const tbx_dtype_info *di = tbx_dtype_core_get(t->comp[c].dtype);
        if (di && (di->flags & TBX_DTF_COMPLEX))
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "dtype",
                           "tensor \"%s\": complex values cannot be decoded to f32", t->name);
    }
    if (count == 0) return TBX_OK;
    /* the element streams below bypass the digests: verify pending ones first */
    for (uint32_t c = 0; c < t->ncomp; c++)
        if (zt_raw_pending(f, t, c)) {
            tbx_status st = zt_decode_component(f, t, c, NULL, err);
            if (st != TBX_OK) return st;
        }
    if (t->layout == TBX_LAYOUT_QUANT_GROUP) return read_qgroup(f, t, first, last, out, err);
    memset(out, 0, (size_t)count * sizeof *out);
    if (t->layout == TBX_LAYOUT_SPARSE_CSR) return read_csr(f, t, first, last, out, err);
    return read_coo(f, t, first, last, out, err);
}

/* The driver's read_f32 hook: non-dense layouts only (zTensor has no dtype without a core
 * decoder, and a dense tensor here would loop back through tbx_tensor_read_f32). */
tbx_status zt_read_f32_hook(tbx_file *f, uint64_t i, uint64_t first, uint64_t count,
                            float *out, tbx_error *err) {
    const tbx_tensor *t = &f->tensors[i];
    if (t->layout == TBX_LAYOUT_DENSE)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "dtype",
                       "tensor \"%s\": dtype %s cannot be decoded to f32", t->name,
                       tbx_dtype_core_get(t->dtype) ? tbx_dtype_core_get(t->dtype)->name : "?");
    return zt_read_f32_range(f, i, first, count, out, err);
}
