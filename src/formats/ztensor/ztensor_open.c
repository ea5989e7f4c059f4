/*
 * ztensor_open.c - the zTensor v1.1 file (pie-project/ztensor, PyPI `ztensor==1.1.1`) and its
 * opening: probe, open (footer, manifest bounds, then the manifest parsed into the model), close.
 * The rest of the reader and the writer are listed in ztensor_int.h; the driver table is in
 * ztensor_driver.c.
 *
 * A zTensor file is an 8-byte magic, then component blobs (the stored bytes of tensors), each
 * at a 64-aligned offset with zero padding between them, then a CBOR manifest describing
 * everything, then the manifest's size and the magic again:
 *
 *   offset 0        8            64 (aligned)            M = size - 16 - N       size - 16  size
 *          +--------+------------+-----------+-----+------+---------------------+----------+--------+
 *          |ZTEN1000| 0x00 pad   | blob      | pad | blob | CBOR manifest       | u64 N    |ZTEN1000|
 *          |        | to 64      | (raw or   | 0x00| ...  | (N bytes, map)      | (LE)     |        |
 *          |        |            |  zstd)    |     |      |                     |          |        |
 *          +--------+------------+-----------+-----+------+---------------------+----------+--------+
 *
 *   manifest = { "version": "1.1.0",
 *                "attributes": { key: any CBOR value, ... },              (optional, global)
 *                "objects": { name: { "shape": [d0, d1, ...],
 *                                     "format": "dense" | "sparse_csr" | "sparse_coo"
 *                                               | "quantized_group",
 *                                     "attributes": { ... },              (optional)
 *                                     "components": { role: { "dtype": "f32", "offset": o,
 *                                                             "length": stored bytes,
 *                                                             "encoding": "zstd",  (optional)
 *                                                             "digest": "sha256:..." (opt.) },
 *                                                     ... } }, ... } }
 *
 * Layouts and their components (in the order tensorbox reports them):
 *   dense            data                       prod(shape) elements
 *   sparse_csr       values, indices, indptr    nnz, nnz, rows + 1      (2-D only)
 *   sparse_coo       values, coords             nnz, ndim x nnz (all dim-0 indices, then dim-1...)
 *   quantized_group  packed_weight, scales, zeros  (tensorbox's semantics, docs/formats/ztensor.md)
 * A zstd component holds one or more zstd frames; `length` is the compressed size and the
 * decoded size must be exactly what the layout implies. Digests ("crc32c:0x%08X",
 * "sha256:<hex>") cover the stored bytes.
 *
 * Opening (here) checks both magics, caps the manifest (1 GiB, max_header_bytes, the bytes
 * between header and footer), parses the CBOR with a pull decoder (ztensor_cbor.c) straight into
 * the model (ztensor_manifest.c), and checks every component (ztensor_object.c): known dtype,
 * 64-aligned offset, inside [64, M), raw length == decoded size, limits; then that no two
 * components overlap, and (with TBX_OPEN_VERIFY_DIGESTS) that every digest is one it can verify.
 * nnz of a sparse tensor comes from its first raw component (or, when all are compressed, from
 * the decoded size of `values`).
 * Validation adds (ztensor_validate.c): digests, zero padding between blobs, sparse index
 * rules, bool values 0/1.
 * Reading (ztensor_read.c, ztensor_decode.c) decodes zstd with the exact output bound (a "bomb"
 * stops at the declared size; the decoding cursor is src/io/zstream.c), in bounded memory:
 * whole reads straight into the caller's buffer, range and f32 reads through decoding cursors
 * kept between calls (parked streams), so that reading a component chunk after chunk decodes it
 * once.
 * Writing lives in ztensor_write.c.
 */
#include "ztensor_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------------------------ */
/* Probe                                                                                       */
/* ------------------------------------------------------------------------------------------ */
static const uint8_t zt_magic_v2[8] = {0x89, 'Z', 'T', '2', 0x0D, 0x0A, 0x1A, 0x0A};

bool zt_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    (void)file_size;
    if (len < 8) return false;
    return memcmp(head, ZT_MAGIC, 8) == 0 || memcmp(head, ZT_MAGIC_V01, 8) == 0 ||
           memcmp(head, zt_magic_v2, 8) == 0;
}

static int span_cmp(const void *a, const void *b) {
    const zt_span *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    if (x->ti != y->ti) return x->ti < y->ti ? -1 : 1;
    return x->ci < y->ci ? -1 : (x->ci > y->ci);
}

void zt_close(tbx_file *f) {
    for (size_t i = 0; i < f->ntensors; i++) {
        if (f->tensors[i].drv) tbx_free(&f->al, f->tensors[i].drv, sizeof(zt_tdrv));
        f->tensors[i].drv = NULL;
    }
    zt_park_free(f);
    zt_state *s = f->drv_state;
    if (s) {
        tbx_zbudget_free(&s->budget);
        tbx_free(&f->al, s->spans, s->cap_spans * sizeof *s->spans);
        tbx_free(&f->al, s, sizeof *s);
    }
    f->drv_state = NULL;
}

tbx_status zt_open(tbx_file *f, tbx_error *err) {
    uint64_t size = f->src.size;
    if (size < 24)
        return tbx_err(err, TBX_E_TRUNCATED, 0, "footer",
                       "file of %" PRIu64 " bytes is shorter than the 24 bytes of header magic, "
                       "manifest size and footer magic", size);
    uint8_t head[8], foot[16];
    tbx_status st = tbx_source_read(&f->src, 0, head, 8, "magic", err);
    if (st != TBX_OK) return st;
    if (memcmp(head, ZT_MAGIC, 8) != 0) {
        if (memcmp(head, ZT_MAGIC_V01, 8) == 0)
            return tbx_err(err, TBX_E_BAD_VERSION, 0, "magic",
                           "zTensor v0.1 (magic \"ZTEN0001\") is not supported; only v1.1");
        if (memcmp(head, zt_magic_v2, 8) == 0)
            return tbx_err(err, TBX_E_BAD_VERSION, 0, "magic",
                           "zTensor v2 (magic 89 5A 54 32 ...) is not supported yet; only v1.1");
        char q[64];
        tbx_quote_bytes(q, sizeof q, (const char *)head, 8, 8);
        return tbx_err(err, TBX_E_BAD_MAGIC, 0, "magic",
                       "header magic is \"%s\", expected \"ZTEN1000\"", q);
    }
    st = tbx_source_read(&f->src, size - 16, foot, 16, "footer", err);
    if (st != TBX_OK) return st;
    if (memcmp(foot + 8, ZT_MAGIC, 8) != 0) {
        char q[64];
        tbx_quote_bytes(q, sizeof q, (const char *)foot + 8, 8, 8);
        return tbx_err(err, TBX_E_BAD_MAGIC, size - 8, "footer.magic",
                       "footer magic is \"%s\", expected \"ZTEN1000\" (truncated file?)", q);
    }
    uint64_t msize = tbx_ld64(foot);
    if (msize > ZT_MAX_MANIFEST)
        return tbx_err(err, TBX_E_LIMIT, size - 16, "footer.manifest_size",
                       "manifest_size %" PRIu64 " exceeds the 1 GiB the specification allows",
                       msize);
    if (msize > f->limits.max_header_bytes)
        return tbx_err(err, TBX_E_LIMIT, size - 16, "footer.manifest_size",
                       "manifest_size %" PRIu64 " exceeds max_header_bytes = %" PRIu64, msize,
                       f->limits.max_header_bytes);
    if (msize > size - 24)
        return tbx_err(err, TBX_E_TRUNCATED, size - 16, "footer.manifest_size",
                       "manifest_size %" PRIu64 " exceeds the %" PRIu64
                       " bytes between header and footer", msize, size - 24);
    if (msize == 0)
        return tbx_err(err, TBX_E_FORMAT, size - 16, "footer.manifest_size",
                       "manifest_size is 0: the manifest must be a CBOR map");
    uint64_t moff = size - 16 - msize;

    zt_state *s = tbx_malloc(&f->al, sizeof *s);
    if (!s) return tbx_err_nomem(err, "zTensor state");
    memset(s, 0, sizeof *s);
    f->drv_state = s;
    st = tbx_zbudget_init(&s->budget, (uint64_t)1 << tbx_zstd_wlog_max(f->limits.max_decode_window),
                          err);
    if (st != TBX_OK) return st;
    s->manifest_off = moff;
    s->manifest_size = msize;
    f->drv_state = s;

    uint8_t *buf = tbx_malloc(&f->al, (size_t)msize);
    if (!buf) return tbx_err_nomem(err, "manifest");
    tbx_cursor cur;
    st = tbx_cursor_init(&cur, &f->src, &f->al, moff, moff + msize, err);
    if (st == TBX_OK) st = tbx_cur_bytes(&cur, buf, (size_t)msize, "manifest", err);
    tbx_cursor_free(&cur);
    if (st != TBX_OK) { tbx_free(&f->al, buf, (size_t)msize); return st; }

    zt_parse_ctx pc;
    memset(&pc, 0, sizeof pc);
    pc.f = f;
    pc.s = s;
    pc.c.buf = buf;
    pc.c.len = (size_t)msize;
    pc.c.base = moff;
    pc.c.lim = &f->limits;
    pc.c.al = &f->al;
    pc.c.node_budget = msize / 8 > 1000000 ? msize / 8 : 1000000;
    pc.c.f = f;
    st = zt_parse_root(&pc, err);
    tbx_free(&f->al, pc.shape, pc.shape_cap * sizeof *pc.shape);
    tbx_free(&f->al, buf, (size_t)msize);
    if (st != TBX_OK) return st;

    /* no two components share a byte */
    if (s->nspans > 1) qsort(s->spans, s->nspans, sizeof *s->spans, span_cmp);
    for (size_t i = 1; i < s->nspans; i++) {
        const zt_span *a = &s->spans[i - 1], *b = &s->spans[i];
        if (b->off < a->end) {
            char wa[128], wb[128];
            zt_what(wa, sizeof wa, &f->tensors[a->ti], a->ci);
            zt_what(wb, sizeof wb, &f->tensors[b->ti], b->ci);
            return tbx_err(err, TBX_E_RANGE, b->off, "component.offset",
                           "component %s [%" PRIu64 ", %" PRIu64 ") overlaps component %s [%"
                           PRIu64 ", %" PRIu64 ")", wb, b->off, b->end, wa, a->off, a->end);
        }
    }
    f->version = pc.version_major;

    /* digests: with verification on, unknown algorithms and malformed values are problems */
    if (f->flags & TBX_OPEN_VERIFY_DIGESTS) {
        for (size_t i = 0; i < f->ntensors; i++) {
            tbx_tensor *t = &f->tensors[i];
            zt_tdrv *d = t->drv;
            for (uint32_t c = 0; c < t->ncomp; c++) {
                if (!t->comp[c].digest) continue;
                zt_digest dg;
                int r = zt_digest_parse(t->comp[c].digest, &dg);
                if (r == 1) continue;
                vset(d, c, ZT_V_SKIP);
                char w[128], q[96];
                zt_what(w, sizeof w, t, c);
                tbx_quote_bytes(q, sizeof q, t->comp[c].digest, strlen(t->comp[c].digest), 64);
                st = tbx_file_problem(f, err, r == 0 ? TBX_E_UNSUPPORTED : TBX_E_FORMAT,
                                      t->comp[c].offset, "component.digest",
                                      r == 0 ? "component %s: unknown digest algorithm in \"%s\" "
                                               "(not verified; crc32c and sha256 are known)"
                                             : "component %s: malformed digest \"%s\"", w, q);
                if (st != TBX_OK) return st;
            }
        }
    }
    return TBX_OK;
}
