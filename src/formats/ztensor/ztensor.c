/*
 * ztensor.c - the zTensor v1.1 reader (pie-project/ztensor, PyPI `ztensor==1.1.1`); the driver
 * table is in ztensor_driver.c, the writer in ztensor_write.c (see ztensor_int.h).
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
 * Opening checks both magics, caps the manifest (1 GiB, max_header_bytes, the bytes between
 * header and footer), parses the CBOR with a pull decoder (ztensor_cbor.c) straight into the
 * model, and checks every component: known dtype, 64-aligned offset, inside [64, M), no overlap
 * with another component, raw length == decoded size, limits. nnz of a sparse tensor comes from
 * its first raw component (or, when all are compressed, from the decoded size of `values`).
 * Validation adds: digests, zero padding between blobs, sparse index rules, bool values 0/1.
 * Reading decodes zstd with the exact output bound (a "bomb" stops at the declared size), in
 * bounded memory: whole reads straight into the caller's buffer, range and f32 reads through
 * decoding cursors kept between calls (parked streams), so that reading a component chunk after
 * chunk decodes it once.
 * Writing lives in ztensor_write.c.
 */
#include "ztensor_int.h"

#include "plain.h"
#include "split.h"
#include "ztensor.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>
#include <zstd_errors.h> /* ZSTD_getErrorCode: a window over the limit is TBX_E_LIMIT */


/* ------------------------------------------------------------------------------------------ */
/* dtypes, roles                                                                               */
/* ------------------------------------------------------------------------------------------ */
/* Components of each layout, in model order. */
static const int zt_layout_roles[4][3] = {
    {ZT_R_DATA, -1, -1},
    {ZT_R_VALUES, ZT_R_INDICES, ZT_R_INDPTR},
    {ZT_R_VALUES, ZT_R_COORDS, -1},
    {ZT_R_PACKED, ZT_R_SCALES, ZT_R_ZEROS},
};
static const uint32_t zt_layout_ncomp[4] = {1, 3, 2, 3};
static const char *const zt_layout_names[4] = {"dense", "sparse_csr", "sparse_coo",
                                               "quantized_group"};

static bool dt_is_int(tbx_dtype dt) {
    return dt == TBX_DT_I8 || dt == TBX_DT_I16 || dt == TBX_DT_I32 || dt == TBX_DT_I64 ||
           dt == TBX_DT_U8 || dt == TBX_DT_U16 || dt == TBX_DT_U32 || dt == TBX_DT_U64;
}
static bool dt_is_signed(tbx_dtype dt) {
    return dt == TBX_DT_I8 || dt == TBX_DT_I16 || dt == TBX_DT_I32 || dt == TBX_DT_I64;
}
static bool dt_is_real_float(tbx_dtype dt) {
    return dt == TBX_DT_F64 || dt == TBX_DT_F32 || dt == TBX_DT_F16 || dt == TBX_DT_BF16 ||
           dt == TBX_DT_F8_E4M3 || dt == TBX_DT_F8_E5M2;
}

/* ------------------------------------------------------------------------------------------ */
/* Per-file and per-tensor driver data                                                         */
/* ------------------------------------------------------------------------------------------ */
enum { ZT_V_UNCHECKED = 0, ZT_V_OK, ZT_V_BAD, ZT_V_SKIP };

typedef struct zt_tdrv {
    uint64_t nnz;            /* sparse: stored entries */
    uint64_t rows, cols;     /* csr / quantized_group */
    uint32_t qbits, qper;    /* quantized_group: bits per code, codes per word */
    uint64_t qgroup, qgpr;   /* group size, groups per row */
    uint8_t vstate[3];       /* digest verification state per component */
} zt_tdrv;

/* Verification state of component c: components are read on several threads at once
 * (tbx_read_batch), each touching only its own state byte, atomically. */
static uint8_t vget(const zt_tdrv *d, uint32_t c) {
    return __atomic_load_n(&d->vstate[c], __ATOMIC_ACQUIRE);
}
static void vset(zt_tdrv *d, uint32_t c, uint8_t v) {
    __atomic_store_n(&d->vstate[c], v, __ATOMIC_RELEASE);
}

typedef struct zt_span {
    uint64_t off, end;
    size_t ti;
    uint32_t ci;
} zt_span;

struct zt_es;

typedef struct zt_state {
    uint64_t manifest_off, manifest_size;
    zt_span *spans;          /* non-empty components sorted by offset */
    size_t nspans, cap_spans;
    /* Decoding cursors kept between reads (ZT_NPARK streams, allocated on first use): a range
     * or f32 read that starts where an earlier one ended continues its stream instead of
     * decoding the component again from its first byte. Used only by the calling thread's
     * reads (tbx_tensor_read_range / read_f32), never by tbx_read_batch's workers. */
    struct zt_es *park;
    uint64_t clock;          /* use stamps for least-recently-used eviction */
    /* Decoder memory budget (zt_budget_take): the windows of the whole-component decoders
     * running at once (tbx_read_batch / validation workers, whole reads) sum to at most `cap`;
     * the parked streams' windows are kept under `cap` too, by eviction (zt_park_evict). */
    pthread_mutex_t bmu;
    pthread_cond_t bcv;
    bool binit;
    uint64_t bused, bcap;
} zt_state;

/* "\"name\"/role" for messages. */
static void zt_what(char *dst, size_t cap, const tbx_tensor *t, uint32_t c) {
    char q[96];
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    snprintf(dst, cap, "\"%s\"/%s", q, c < t->ncomp ? t->comp[c].name : "?");
}

/* ------------------------------------------------------------------------------------------ */
/* Digests (computing them: ztensor_common.c)                                                  */
/* ------------------------------------------------------------------------------------------ */

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* 1: parsed; 0: unknown algorithm; -1: known algorithm, malformed value. */
static int zt_digest_parse(const char *s, zt_digest *d) {
    memset(d, 0, sizeof *d);
    const char *colon = strchr(s, ':');
    if (!colon) return 0;
    size_t alen = (size_t)(colon - s);
    const char *v = colon + 1;
    size_t vlen = strlen(v);
    if (alen == 6 && memcmp(s, "crc32c", 6) == 0) {
        if (vlen < 3 || vlen > 10 || v[0] != '0' || (v[1] != 'x' && v[1] != 'X')) return -1;
        uint32_t x = 0;
        for (size_t i = 2; i < vlen; i++) {
            int h = hexval(v[i]);
            if (h < 0) return -1;
            x = (x << 4) | (uint32_t)h;
        }
        d->algo = ZT_H_CRC32C;
        d->crc = x;
        return 1;
    }
    if (alen == 6 && memcmp(s, "sha256", 6) == 0) {
        if (vlen != 64) return -1;
        for (size_t i = 0; i < 32; i++) {
            int hi = hexval(v[2 * i]), lo = hexval(v[2 * i + 1]);
            if (hi < 0 || lo < 0) return -1;
            d->sha[i] = (uint8_t)(hi << 4 | lo);
        }
        d->algo = ZT_H_SHA256;
        return 1;
    }
    return 0;
}

static bool zt_digest_eq(const zt_digest *a, const zt_digest *b) {
    if (a->algo != b->algo) return false;
    if (a->algo == ZT_H_CRC32C) return a->crc == b->crc;
    return memcmp(a->sha, b->sha, 32) == 0;
}

/* ceil(log2(n)), at least 10 */
static unsigned zt_log2_ceil(uint64_t n) {
    unsigned l = 10;
    while (l < 63 && ((uint64_t)1 << l) < n) l++;
    return l;
}

/* ------------------------------------------------------------------------------------------ */
/* Component reader: the decoded bytes of one component, in chunks, never past k->nbytes       */
/* ------------------------------------------------------------------------------------------ */
typedef struct zt_rd {
    tbx_file *f;
    const tbx_tensor *t;
    uint32_t c;
    const tbx_component *k;
    uint64_t in_off, in_end;  /* stored bytes not yet handed to the decoder */
    uint64_t produced;        /* decoded bytes delivered */
    uint64_t bound;           /* decoded bytes allowed */
    ZSTD_DCtx *dctx;
    uint8_t *in;
    size_t in_cap;
    ZSTD_inBuffer zin;
    bool frame_done;
    zt_hash *h;               /* when set, every stored byte is hashed */
    unsigned wlog;            /* the decoder's windowLogMax */
    uint64_t cost;            /* window bytes the current frame makes zstd allocate */
    bool admit;               /* cost taken from the handle's budget (else: a stream's) */
} zt_rd;

/* ------------------------------------------------------------------------------------------ */
/* Decoder memory budget. A zstd decoder allocates its window (up to 128 MiB) when it reads a   */
/* frame header, so a small file can ask for many large windows. Before a decoder starts a      */
/* frame, its header is read (zt_frame_cost) and the window it will allocate is taken from the  */
/* handle's budget: decoders wait while the windows already running would exceed the cap; one   */
/* whose window alone exceeds it runs when no other holds any (so the pass always progresses). */
/* A waiting thread holds no window of its own (a later, larger frame of the same component     */
/* frees its decoder before it waits), so waiting cannot deadlock.                              */
/* ------------------------------------------------------------------------------------------ */

/* The largest window log a decoder of f may use: 27 (128 MiB, zstd's default limit), lowered
 * to max_decode_window. The budget cap is this window. */
static unsigned zt_wmax(const tbx_file *f) {
    unsigned wmax = 10;
    while (wmax < 27 && ((uint64_t)1 << (wmax + 1)) <= f->limits.max_decode_window) wmax++;
    return wmax;
}

static void zt_budget_take(tbx_file *f, uint64_t cost) {
    zt_state *zs = f->drv_state;
    if (!cost || !zs || !zs->binit) return;
    pthread_mutex_lock(&zs->bmu);
    while (zs->bused && zs->bused + cost > zs->bcap) pthread_cond_wait(&zs->bcv, &zs->bmu);
    zs->bused += cost;
    pthread_mutex_unlock(&zs->bmu);
}

static void zt_budget_give(tbx_file *f, uint64_t cost) {
    zt_state *zs = f->drv_state;
    if (!cost || !zs || !zs->binit) return;
    pthread_mutex_lock(&zs->bmu);
    zs->bused -= cost;
    pthread_cond_broadcast(&zs->bcv);
    pthread_mutex_unlock(&zs->bmu);
}

/* *cost: the decoding buffer zstd will allocate for the frame that starts at the decoder's
 * next input byte (its header read from the pending input, or from the source when fewer
 * bytes are pending): 0 when no window will be allocated (skippable frame, a window over the
 * decoder's limit, a header the decoder will reject). */
static tbx_status zt_frame_cost(zt_rd *r, uint64_t *cost, tbx_error *err) {
    *cost = 0;
    uint8_t hb[18]; /* ZSTD_FRAMEHEADERSIZE_MAX */
    size_t pend = r->zin.size - r->zin.pos;
    uint64_t left = r->in_end - r->in_off + pend;
    size_t n = left < sizeof hb ? (size_t)left : sizeof hb;
    const void *p = hb;
    if (n == 0) return TBX_OK; /* no data: the decoder reports it */
    if (pend >= n) {
        /* mapped bytes: a file that shrank gives zeros here (a cost of 0), and the decoder's
         * check of what it consumes reports it (zt_rd_got) */
        p = (const uint8_t *)r->zin.src + r->zin.pos;
    } else {
        tbx_status st = tbx_source_read(&r->f->src, r->in_off - pend, hb, n, r->t->name, err);
        if (st != TBX_OK) return st;
    }
    zt_frame_window_cost(p, n, (uint64_t)1 << r->wlog, cost);
    return TBX_OK;
}

static tbx_status zt_rd_newdctx(zt_rd *r, tbx_error *err) {
    r->dctx = zt_dctx_new(&r->f->al); /* zstd allocates through the handle */
    if (!r->dctx) return tbx_err_nomem(err, "zstd decoder");
    size_t zr = ZSTD_DCtx_setParameter(r->dctx, ZSTD_d_windowLogMax, (int)r->wlog);
    if (ZSTD_isError(zr)) return tbx_err_nomem(err, "zstd decoder");
    return TBX_OK;
}

/* Before the decoder starts a further frame (the previous one complete, input left): a frame
 * that needs a larger buffer than the decoder holds gets it from the budget first (admitted
 * decoders: the old decoder and its share are released before waiting for the larger one). */
static tbx_status zt_rd_next_frame(zt_rd *r, tbx_error *err) {
    uint64_t cost;
    tbx_status st = zt_frame_cost(r, &cost, err);
    if (st != TBX_OK || cost <= r->cost) return st;
    if (!r->admit) { r->cost = cost; return TBX_OK; }
    ZSTD_freeDCtx(r->dctx);
    r->dctx = NULL;
    zt_budget_give(r->f, r->cost);
    r->cost = cost;
    zt_budget_take(r->f, cost);
    return zt_rd_newdctx(r, err);
}

static void zt_rd_close(zt_rd *r) {
    if (r->dctx) ZSTD_freeDCtx(r->dctx);
    if (r->in) tbx_free(&r->f->al, r->in, r->in_cap);
    if (r->admit) zt_budget_give(r->f, r->cost);
    r->dctx = NULL;
    r->in = NULL;
    r->cost = 0;
}

static tbx_status zt_rd_refill(zt_rd *r, tbx_error *err);

/* After the decoder took input straight from the mapping (no input buffer): were the bytes it
 * consumed still the file's (a mapped file that shrank reads as zeros)? A decoder that failed
 * may have read past what it consumed: then every byte it was given is checked, so that a
 * shrink is reported as such rather than as corrupt data. */
static tbx_status zt_rd_got(zt_rd *r, bool failed, tbx_error *err) {
    size_t n = failed ? r->zin.size : r->zin.pos;
    if (r->in || !n) return TBX_OK;
    return tbx_source_check(&r->f->src, r->in_off - r->zin.size, n, r->t->name, err);
}

/* admit: the decoder's window is taken from the handle's budget (zt_budget_take; may wait for
 * other threads' decoders to finish); else the caller accounts for it (parked streams). */
static tbx_status zt_rd_open(zt_rd *r, tbx_file *f, const tbx_tensor *t, uint32_t c, zt_hash *h,
                             uint64_t bound, bool admit, tbx_error *err) {
    memset(r, 0, sizeof *r);
    r->f = f;
    r->t = t;
    r->c = c;
    r->k = &t->comp[c];
    r->in_off = r->k->offset;
    r->in_end = r->k->offset + r->k->stored_bytes; /* checked at open */
    r->bound = bound;
    r->h = h;
    if (r->k->encoding != TBX_ENC_ZSTD) return TBX_OK;
    /* Window: what the data may need, at least 8 MiB (what compressors use for streams of
     * unknown size up to level 19), at most zstd's default decoder limit of 128 MiB and at
     * most max_decode_window: the decoder's memory is this window plus ~200 KiB whatever the
     * component's decoded size (a frame asking for more fails with TBX_E_LIMIT). */
    unsigned wl = zt_log2_ceil(bound), wmax = zt_wmax(f);
    if (wl < 23) wl = 23;
    if (wl > 27) wl = 27;
    if (wl > wmax) wl = wmax;
    r->wlog = wl;
    uint64_t stored = r->k->stored_bytes;
    if (!tbx_source_ptr(&f->src, r->k->offset, stored)) {
        size_t cap = ZSTD_DStreamInSize();
        r->in_cap = stored < cap ? (size_t)(stored ? stored : 1) : cap;
        r->in = tbx_malloc(&f->al, r->in_cap);
        if (!r->in) { zt_rd_close(r); return tbx_err_nomem(err, "zstd input buffer"); }
    }
    /* the first frame's window, from its header (in the first input chunk), before a decoder
     * exists to allocate it */
    tbx_status st = r->in_off < r->in_end ? zt_rd_refill(r, err) : TBX_OK;
    if (st == TBX_OK) st = zt_frame_cost(r, &r->cost, err);
    if (st != TBX_OK) { zt_rd_close(r); return st; }
    r->admit = admit;
    if (admit) zt_budget_take(f, r->cost);
    st = zt_rd_newdctx(r, err);
    if (st != TBX_OK) { zt_rd_close(r); return st; }
    return TBX_OK;
}

/* Gives the decoder its next chunk of stored bytes (zin is empty, input remains). */
static tbx_status zt_rd_refill(zt_rd *r, tbx_error *err) {
    uint64_t left = r->in_end - r->in_off;
    const uint8_t *p = tbx_source_ptr(&r->f->src, r->in_off, left);
    size_t n;
    if (p) {
        n = left > (uint64_t)(SIZE_MAX / 2) ? SIZE_MAX / 2 : (size_t)left;
    } else {
        n = left < r->in_cap ? (size_t)left : r->in_cap;
        tbx_status st = tbx_source_read(&r->f->src, r->in_off, r->in, n, r->t->name, err);
        if (st != TBX_OK) return st;
        p = r->in;
    }
    /* mapped bytes hashed here are checked as the decoder consumes them (zt_rd_got): the digest
     * is compared only after all of them were */
    zt_hash_update(r->h, p, n);
    r->zin.src = p;
    r->zin.size = n;
    r->zin.pos = 0;
    r->in_off += n;
    return TBX_OK;
}

static tbx_status zt_rd_zerr(zt_rd *r, const char *why, tbx_error *err) {
    char w[128];
    zt_what(w, sizeof w, r->t, r->c);
    return tbx_err(err, TBX_E_FORMAT, r->k->offset, "component.zstd",
                   "component %s: zstd data is invalid (%s) after %" PRIu64 " decoded bytes", w,
                   why, r->produced);
}

/* A zstd error code as a status: a frame whose window exceeds what the decoder was allowed
 * (max_decode_window) is TBX_E_LIMIT, anything else invalid data. */
static tbx_status zt_rd_zfail(zt_rd *r, size_t code, tbx_error *err) {
    if (ZSTD_getErrorCode(code) != ZSTD_error_frameParameter_windowTooLarge)
        return zt_rd_zerr(r, ZSTD_getErrorName(code), err);
    char w[128];
    zt_what(w, sizeof w, r->t, r->c);
    return tbx_err(err, TBX_E_LIMIT, r->k->offset, "component.zstd",
                   "component %s: zstd frame needs a larger window than max_decode_window = %"
                   PRIu64 " (or the 128 MiB tensorbox allows)", w,
                   r->f->limits.max_decode_window);
}

/* Up to cap decoded bytes (never past the bound); *got < cap only at the end of the data. */
static tbx_status zt_rd_read(zt_rd *r, void *out, size_t cap, size_t *got, tbx_error *err) {
    *got = 0;
    uint64_t room = r->bound - r->produced;
    if ((uint64_t)cap > room) cap = (size_t)room;
    if (cap == 0) return TBX_OK;
    if (!r->dctx) {
        uint64_t left = r->in_end - r->in_off;
        size_t n = left < (uint64_t)cap ? (size_t)left : cap;
        tbx_status st = tbx_source_read(&r->f->src, r->in_off, out, n, r->t->name, err);
        if (st != TBX_OK) return st;
        zt_hash_update(r->h, out, n);
        r->in_off += n;
        r->produced += n;
        *got = n;
        return TBX_OK;
    }
    ZSTD_outBuffer o = {out, cap, 0};
    while (o.pos < o.size) {
        if (r->zin.pos == r->zin.size && r->in_off < r->in_end) {
            tbx_status st = zt_rd_refill(r, err);
            if (st != TBX_OK) return st;
        }
        bool no_input = r->zin.pos == r->zin.size;
        if (no_input && r->frame_done) break; /* a further call would await a next frame */
        if (r->frame_done) {
            tbx_status st = zt_rd_next_frame(r, err);
            if (st != TBX_OK) return st;
        }
        size_t before_out = o.pos, before_in = r->zin.pos;
        size_t ret = ZSTD_decompressStream(r->dctx, &o, &r->zin);
        const bool stuck = o.pos == before_out && r->zin.pos == before_in && !no_input;
        tbx_status gst = zt_rd_got(r, ZSTD_isError(ret) || stuck, err);
        if (gst != TBX_OK) return gst;
        if (ZSTD_isError(ret)) return zt_rd_zfail(r, ret, err);
        r->frame_done = ret == 0;
        if (o.pos == before_out && r->zin.pos == before_in) {
            if (no_input) break; /* everything decoded */
            return zt_rd_zerr(r, "the decoder made no progress", err); /* no progress: never loop */
        }
    }
    r->produced += o.pos;
    *got = o.pos;
    return TBX_OK;
}

/* After the bound was reached: no more decoded bytes, all input consumed, frame complete. */
static tbx_status zt_rd_finish(zt_rd *r, tbx_error *err) {
    char w[128];
    if (!r->dctx) return TBX_OK;
    for (;;) {
        if (r->zin.pos == r->zin.size && r->in_off < r->in_end) {
            tbx_status st = zt_rd_refill(r, err);
            if (st != TBX_OK) return st;
        }
        bool no_input = r->zin.pos == r->zin.size;
        if (no_input && r->frame_done) return TBX_OK;
        if (r->frame_done) {
            tbx_status st = zt_rd_next_frame(r, err);
            if (st != TBX_OK) return st;
        }
        uint8_t probe;
        ZSTD_outBuffer o = {&probe, 1, 0};
        size_t before_in = r->zin.pos;
        size_t ret = ZSTD_decompressStream(r->dctx, &o, &r->zin);
        tbx_status gst = zt_rd_got(r, ZSTD_isError(ret) || o.pos || r->zin.pos == before_in, err);
        if (gst != TBX_OK) return gst;
        if (ZSTD_isError(ret)) return zt_rd_zfail(r, ret, err);
        r->frame_done = ret == 0;
        if (o.pos) {
            zt_what(w, sizeof w, r->t, r->c);
            return tbx_err(err, TBX_E_FORMAT, r->k->offset, "component.zstd",
                           "component %s: zstd data decodes to more than the %" PRIu64
                           " bytes its shape and dtype give", w, r->bound);
        }
        if (r->zin.pos == before_in) {
            if (no_input && r->frame_done) return TBX_OK;
            zt_what(w, sizeof w, r->t, r->c);
            if (!no_input) return zt_rd_zerr(r, "the decoder made no progress", err);
            return tbx_err(err, TBX_E_FORMAT, r->k->offset, "component.zstd",
                           "component %s: zstd stream ends inside a frame (truncated data)", w);
        }
    }
}

/* Reads exactly n decoded bytes into out (NULL: through a scratch buffer, dropping them);
 * shorter data is an error naming both sizes. While hashing, chunks stay cache-sized so the
 * hash reads bytes the copy just brought in. */
static tbx_status zt_rd_full(zt_rd *r, uint8_t *out, uint64_t n, tbx_error *err) {
    const size_t scap = (size_t)1 << 20;
    uint8_t *scratch = NULL;
    if (!out && n) {
        scratch = tbx_malloc(&r->f->al, scap);
        if (!scratch) return tbx_err_nomem(err, "decode buffer");
    }
    const uint64_t lim = !out ? scap : r->h ? scap : (uint64_t)1 << 30;
    uint64_t done = 0;
    tbx_status st = TBX_OK;
    while (done < n) {
        size_t chunk = n - done > lim ? (size_t)lim : (size_t)(n - done);
        size_t got = 0;
        st = zt_rd_read(r, out ? out + done : scratch, chunk, &got, err);
        if (st != TBX_OK) break;
        done += got;
        if (got < chunk) {
            char w[128];
            zt_what(w, sizeof w, r->t, r->c);
            if (!r->dctx)
                st = tbx_err(err, TBX_E_TRUNCATED, r->k->offset, "component",
                             "component %s: %" PRIu64 " stored bytes, %" PRIu64 " expected", w,
                             done, n);
            else if (!r->frame_done)
                st = tbx_err(err, TBX_E_FORMAT, r->k->offset, "component.zstd",
                             "component %s: zstd stream ends inside a frame after %" PRIu64
                             " decoded bytes (%" PRIu64 " expected)", w, r->produced, n);
            else
                st = tbx_err(err, TBX_E_FORMAT, r->k->offset, "component.zstd",
                             "component %s: zstd data decodes to only %" PRIu64
                             " bytes, its shape and dtype give %" PRIu64, w, r->produced, n);
            break;
        }
    }
    if (scratch) tbx_free(&r->f->al, scratch, scap);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Element streams over a component (bounded chunks), for validation and f32 decoding, and     */
/* byte streams for range reads. A stream reads its component once from the first byte to the  */
/* last; reaching the end checks that the zstd data ends there too (zt_rd_finish).             */
/* ------------------------------------------------------------------------------------------ */
#define ZT_CHUNK ((size_t)64 * 1024)
#define ZT_NPARK 6           /* parked streams per handle (CSR uses 5, quantized_group 3) */

enum { ZT_ES_INT = 0, ZT_ES_F32, ZT_ES_BYTES };

typedef struct zt_es {
    zt_rd rd;
    bool open;
    int mode;             /* ZT_ES_INT, ZT_ES_F32 (values decoded to fbuf), ZT_ES_BYTES */
    tbx_dtype dt;
    uint32_t esize;       /* bytes per element (1 for byte streams) */
    uint64_t total;       /* elements (bytes) in the component */
    uint64_t left;        /* elements not yet returned */
    uint8_t *buf;         /* ZT_CHUNK bytes */
    float *fbuf;          /* ZT_CHUNK / esize floats when decoding values */
    size_t len, pos;      /* elements in buf, next element */
    bool finished;        /* the end of the data was checked */
    uint32_t lane;        /* when parked: key (t, c, mode, lane); two lanes read one component */
    uint64_t stamp;       /* when parked: last use */
} zt_es;

static void zt_es_close(zt_es *s) {
    if (!s->open) return;
    tbx_file *f = s->rd.f;
    zt_rd_close(&s->rd);
    tbx_free(&f->al, s->buf, ZT_CHUNK);
    if (s->fbuf) tbx_free(&f->al, s->fbuf, (ZT_CHUNK / s->esize) * sizeof(float));
    s->open = false;
}

static tbx_status zt_es_open_mode(zt_es *s, tbx_file *f, const tbx_tensor *t, uint32_t c,
                                  int mode, tbx_error *err) {
    memset(s, 0, sizeof *s);
    const tbx_component *k = &t->comp[c];
    s->mode = mode;
    if (mode == ZT_ES_BYTES) {
        s->dt = TBX_DT_U8;
        s->esize = 1;
        s->total = k->nbytes;
    } else {
        const zt_dtype *zd = zt_dtype_by_tbx(k->dtype);
        if (!zd) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "component", "bad dtype");
        s->dt = k->dtype;
        s->esize = zd->size;
        s->total = k->nelems;
    }
    s->left = s->total;
    tbx_status st = zt_rd_open(&s->rd, f, t, c, NULL, k->nbytes, false, err);
    if (st != TBX_OK) return st;
    s->open = true;
    s->buf = tbx_malloc(&f->al, ZT_CHUNK);
    const bool f32 = mode == ZT_ES_F32;
    if (s->buf && f32) s->fbuf = tbx_malloc(&f->al, (ZT_CHUNK / s->esize) * sizeof(float));
    if (!s->buf || (f32 && !s->fbuf)) {
        zt_es_close(s); /* tbx_free accepts NULL */
        return tbx_err_nomem(err, "element stream");
    }
    return TBX_OK;
}

static tbx_status zt_es_open(zt_es *s, tbx_file *f, const tbx_tensor *t, uint32_t c, bool f32,
                             tbx_error *err) {
    return zt_es_open_mode(s, f, t, c, f32 ? ZT_ES_F32 : ZT_ES_INT, err);
}

/* Once every decoded byte was delivered: the zstd data must end there (no further bytes, no
 * unfinished frame), or the component is invalid, whichever way it is read. */
static tbx_status zt_es_at_end(zt_es *s, tbx_error *err) {
    if (s->finished || s->rd.produced < s->rd.bound) return TBX_OK;
    s->finished = true;
    return zt_rd_finish(&s->rd, err);
}

static tbx_status zt_es_fill(zt_es *s, tbx_error *err) {
    uint64_t want = s->left * s->esize;
    size_t cap = want < ZT_CHUNK ? (size_t)want : ZT_CHUNK;
    tbx_status st = zt_rd_full(&s->rd, s->buf, cap, err);
    if (st == TBX_OK) st = zt_es_at_end(s, err);
    if (st != TBX_OK) return st;
    s->len = cap / s->esize;
    s->pos = 0;
    if (s->fbuf) {
        st = tbx_decode_f32_info(tbx_dtype_core_get(s->dt), s->dt, s->buf, cap, s->len, s->fbuf);
        if (st != TBX_OK) {
            char w[128];
            zt_what(w, sizeof w, s->rd.t, s->rd.c);
            const tbx_dtype_info *di = tbx_dtype_core_get(s->dt);
            return tbx_err(err, st == TBX_E_UNSUPPORTED ? TBX_E_UNSUPPORTED : st,
                           s->rd.k->offset, "component.dtype",
                           "component %s: %s values cannot be decoded to f32", w,
                           di ? di->name : "?");
        }
    }
    return TBX_OK;
}

/* Skips n elements. */
static tbx_status zt_es_skip(zt_es *s, uint64_t n, tbx_error *err) {
    if (n > s->left) n = s->left;
    uint64_t inbuf = s->len - s->pos;
    if (n <= inbuf) { s->pos += (size_t)n; s->left -= n; return TBX_OK; }
    n -= inbuf;
    s->left -= inbuf;
    s->pos = s->len;
    if (!s->rd.dctx) { /* raw: seek (the buffer no longer holds the elements before us) */
        s->len = s->pos = 0;
        uint64_t bytes = n * s->esize;
        s->rd.in_off += bytes;
        s->rd.produced += bytes;
        s->left -= n;
        return TBX_OK;
    }
    while (n > 0) {
        tbx_status st = zt_es_fill(s, err);
        if (st != TBX_OK) return st;
        size_t take = n < s->len ? (size_t)n : s->len;
        s->pos = take;
        s->left -= take;
        n -= take;
    }
    return TBX_OK;
}

/* Byte streams: the next n bytes (n <= left) to out; big reads bypass the stream's buffer. */
static tbx_status zt_es_bytes(zt_es *s, uint8_t *out, uint64_t n, tbx_error *err) {
    if (n > s->left) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "component", "past the end");
    size_t inbuf = s->len - s->pos;
    size_t take = n < inbuf ? (size_t)n : inbuf;
    memcpy(out, s->buf + s->pos, take);
    s->pos += take;
    s->left -= take;
    n -= take;
    if (n == 0) return TBX_OK;
    s->len = s->pos = 0; /* read past the buffer: it no longer holds the bytes before us */
    tbx_status st = zt_rd_full(&s->rd, out + take, n, err);
    if (st == TBX_OK) st = zt_es_at_end(s, err);
    if (st == TBX_OK) s->left -= n;
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Parked streams: reads that continue where the previous one ended cost no extra decoding      */
/* ------------------------------------------------------------------------------------------ */

/* Evicts least recently used parked streams until their windows plus `need` fit the handle's
 * budget cap (or none is left: a stream whose window alone exceeds the cap is kept alone). */
static void zt_park_evict(zt_state *zs, uint64_t need) {
    for (;;) {
        uint64_t sum = need;
        int lru = -1;
        for (int k = 0; zs->park && k < ZT_NPARK; k++) {
            if (!zs->park[k].open) continue;
            sum += zs->park[k].rd.cost;
            if (lru < 0 || zs->park[k].stamp < zs->park[lru].stamp) lru = k;
        }
        if (lru < 0 || sum <= zs->bcap) return;
        zt_es_close(&zs->park[lru]);
    }
}

/* A stream over component c of t positioned at element `at`: a parked one when there is one
 * at or before `at`, or a little past it with `at` still in its buffer (it is taken out of the
 * park), else a new one; then skipped forward. Any other backwards move starts again from the
 * component's first byte. */
static tbx_status zt_es_get(zt_es *s, tbx_file *f, const tbx_tensor *t, uint32_t c, int mode,
                            uint32_t lane, uint64_t at, tbx_error *err) {
    zt_state *zs = f->drv_state;
    s->open = false;
    for (int k = 0; zs->park && k < ZT_NPARK; k++) {
        zt_es *p = &zs->park[k];
        if (!p->open || p->rd.t != t || p->rd.c != c || p->mode != mode || p->lane != lane)
            continue;
        uint64_t cur = p->total - p->left;
        if (cur > at && cur - at <= p->pos) { /* rewind inside the buffer */
            p->pos -= (size_t)(cur - at);
            p->left += cur - at;
            cur = at;
        }
        if (cur <= at) {
            *s = *p;
            p->open = false;
        } else {
            zt_es_close(p); /* behind us: of no further use */
        }
        break;
    }
    tbx_status st = TBX_OK;
    if (!s->open) {
        st = zt_es_open_mode(s, f, t, c, mode, err);
        /* room for its window among the parked ones before the decoder allocates it */
        if (st == TBX_OK) zt_park_evict(zs, s->rd.cost);
    }
    s->lane = lane;
    if (st == TBX_OK) st = zt_es_skip(s, at - (s->total - s->left), err);
    if (st != TBX_OK) zt_es_close(s);
    return st;
}

/* Parks stream s after a successful read (evicting the least recently used one). */
static void zt_es_put(tbx_file *f, zt_es *s) {
    zt_state *zs = f->drv_state;
    if (!zs->park) {
        zs->park = tbx_calloc(&f->al, ZT_NPARK, sizeof *zs->park);
        if (!zs->park) { zt_es_close(s); return; }
    }
    zt_park_evict(zs, s->rd.cost); /* the parked windows stay under the budget cap */
    int slot = 0;
    for (int k = 0; k < ZT_NPARK; k++) {
        if (!zs->park[k].open) { slot = k; break; }
        if (zs->park[k].stamp < zs->park[slot].stamp) slot = k;
    }
    zt_es_close(&zs->park[slot]);
    s->stamp = ++zs->clock;
    zs->park[slot] = *s;
    s->open = false;
}

static void zt_park_free(tbx_file *f) {
    zt_state *zs = f->drv_state;
    if (!zs || !zs->park) return;
    for (int k = 0; k < ZT_NPARK; k++) zt_es_close(&zs->park[k]);
    tbx_free(&f->al, zs->park, ZT_NPARK * sizeof *zs->park);
    zs->park = NULL;
}

/* The driver's read_component_range: decoded bytes [pos, pos + len) of component c through a
 * parked byte stream (the core checked the range and ran any pending digest check). */
tbx_status zt_read_range(tbx_file *f, const tbx_tensor *t, uint32_t c, uint64_t pos,
                         void *buf, size_t len, tbx_error *err) {
    if (len == 0) return TBX_OK;
    zt_es s;
    tbx_status st = zt_es_get(&s, f, t, c, ZT_ES_BYTES, 0, pos, err);
    if (st != TBX_OK) return st;
    st = zt_es_bytes(&s, buf, len, err);
    if (st == TBX_OK) zt_es_put(f, &s);
    else zt_es_close(&s);
    return st;
}

/* Next element as an integer: *neg set for negative values of signed dtypes. */
static tbx_status zt_es_int(zt_es *s, uint64_t *u, bool *neg, tbx_error *err) {
    if (s->left == 0) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "component", "past the end");
    if (s->pos == s->len) {
        tbx_status st = zt_es_fill(s, err);
        if (st != TBX_OK) return st;
    }
    const uint8_t *p = s->buf + s->pos * s->esize;
    uint64_t v = 0;
    for (uint32_t b = 0; b < s->esize; b++) v |= (uint64_t)p[b] << (8 * b);
    *neg = false;
    if (dt_is_signed(s->dt) && (p[s->esize - 1] & 0x80u)) {
        *neg = true;
        if (s->esize < 8) v |= ~(uint64_t)0 << (8 * s->esize); /* sign-extend */
    }
    *u = v;
    s->pos++;
    s->left--;
    return TBX_OK;
}

static tbx_status zt_es_f32(zt_es *s, float *v, tbx_error *err) {
    if (s->left == 0) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "component", "past the end");
    if (s->pos == s->len) {
        tbx_status st = zt_es_fill(s, err);
        if (st != TBX_OK) return st;
    }
    *v = s->fbuf[s->pos++];
    s->left--;
    return TBX_OK;
}

/* Raw word of the element stream (quantized_group packed words). */
static tbx_status zt_es_word(zt_es *s, uint64_t *u, tbx_error *err) {
    bool neg;
    tbx_status st = zt_es_int(s, u, &neg, err);
    if (st == TBX_OK && s->esize < 8) *u &= ((uint64_t)1 << (8 * s->esize)) - 1;
    return st;
}

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

/* ------------------------------------------------------------------------------------------ */
/* Manifest parsing                                                                            */
/* ------------------------------------------------------------------------------------------ */

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

typedef struct zt_parsed_comp {
    bool present;
    const zt_dtype *dt;
    uint64_t offset, length;
    tbx_encoding enc;
    char *digest;          /* owned (file allocator), NUL-terminated */
    uint64_t at;           /* file offset of the component's map */
} zt_parsed_comp;

typedef struct zt_parse_ctx {
    tbx_file *f;
    zt_state *s;
    zt_cbor c;
    uint64_t *shape;
    size_t shape_cap;
    bool have_version, have_objects;
    uint32_t version_major;
} zt_parse_ctx;

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
    zt_rd r;
    tbx_status st = zt_rd_open(&r, f, t, c, NULL, bound, true, err);
    if (st != TBX_OK) return st;
    uint8_t *buf = tbx_malloc(&f->al, ZT_CHUNK);
    if (!buf) { zt_rd_close(&r); return tbx_err_nomem(err, "decode buffer"); }
    for (;;) {
        size_t got = 0;
        st = zt_rd_read(&r, buf, ZT_CHUNK, &got, err);
        if (st != TBX_OK || got < ZT_CHUNK) break;
    }
    if (st == TBX_OK && r.produced == bound) st = zt_rd_finish(&r, err);
    else if (st == TBX_OK && !r.frame_done) {
        char w[128];
        zt_what(w, sizeof w, t, c);
        st = tbx_err(err, TBX_E_FORMAT, t->comp[c].offset, "component.zstd",
                     "component %s: zstd stream ends inside a frame (truncated data)", w);
    }
    *out = r.produced;
    tbx_free(&f->al, buf, ZT_CHUNK);
    zt_rd_close(&r);
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

/* One manifest object on its way to the model (build_object and its steps). */
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
static tbx_status build_object(zt_parse_ctx *pc, const zt_str *name, uint64_t name_off,
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
        st = build_object(pc, name, name_off, ndim, layout, pcs, role_mask, &attrs, mev->off, err);
    parsed_comps_free(pc, pcs);
    tbx_val_free(attrs);
    return st;
}

static tbx_status parse_root(zt_parse_ctx *pc, tbx_error *err) {
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
        if (s->binit) {
            pthread_cond_destroy(&s->bcv);
            pthread_mutex_destroy(&s->bmu);
        }
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
    if (pthread_mutex_init(&s->bmu, NULL) != 0) return tbx_err_nomem(err, "decoder budget");
    if (pthread_cond_init(&s->bcv, NULL) != 0) {
        pthread_mutex_destroy(&s->bmu);
        return tbx_err_nomem(err, "decoder budget");
    }
    s->binit = true;
    s->bcap = (uint64_t)1 << zt_wmax(f);
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
    st = parse_root(&pc, err);
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

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                     */
/* ------------------------------------------------------------------------------------------ */
static tbx_status digest_mismatch(tbx_file *f, const tbx_tensor *t, uint32_t c,
                                  const zt_digest *got, tbx_error *err) {
    char w[128], gs[80], q[96];
    zt_what(w, sizeof w, t, c);
    zt_digest_str(got, gs, sizeof gs);
    tbx_quote_bytes(q, sizeof q, t->comp[c].digest, strlen(t->comp[c].digest), 80);
    return tbx_file_problem(f, err, TBX_E_CHECKSUM, t->comp[c].offset, "component.digest",
                            "component %s: stored bytes give %s, manifest says %s", w, gs, q);
}

/* With verification on: a digest still to verify, or one known bad that no problem callback
 * took (reads of it keep failing). The core then routes raw bytes through us. */
bool zt_raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c) {
    if (!(f->flags & TBX_OPEN_VERIFY_DIGESTS) || !t->comp[c].digest) return false;
    uint8_t v = vget(t->drv, c);
    return v == ZT_V_UNCHECKED || (v == ZT_V_BAD && !f->on_problem);
}

static tbx_status hash_stored(tbx_file *f, const tbx_component *k, zt_hash *h, uint8_t *chunk,
                              tbx_error *err);

/* Passes component c's stored bytes through its decoder into buf (NULL: the decoded bytes are
 * dropped, only checked), hashing them on the way when its digest is still to be verified. */
tbx_status zt_decode_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                               tbx_error *err) {
    zt_tdrv *d = t->drv;
    const tbx_component *k = &t->comp[c];
    const bool verify_on = (f->flags & TBX_OPEN_VERIFY_DIGESTS) && k->digest;
    const uint8_t vs = verify_on ? vget(d, c) : ZT_V_SKIP;
    if (vs == ZT_V_BAD && !f->on_problem) {
        char w[128];
        zt_what(w, sizeof w, t, c);
        return tbx_err(err, TBX_E_CHECKSUM, k->offset, "component.digest",
                       "component %s: stored bytes do not match digest %s", w, k->digest);
    }
    zt_digest want;
    const bool verify = vs == ZT_V_UNCHECKED && zt_digest_parse(k->digest, &want) == 1;
    if (!buf && !verify && k->encoding == TBX_ENC_RAW) return TBX_OK; /* nothing to check */
    zt_hash h;
    memset(&h, 0, sizeof h);
    tbx_status st = verify ? zt_hash_init(&h, want.algo, err) : TBX_OK;
    if (st != TBX_OK) return st;
    if (!buf && k->encoding == TBX_ENC_RAW) {
        uint8_t *chunk = tbx_malloc(&f->al, ZT_CHUNK);
        st = chunk ? hash_stored(f, k, &h, chunk, err) : tbx_err_nomem(err, "digest buffer");
        if (chunk) tbx_free(&f->al, chunk, ZT_CHUNK);
    } else {
        zt_rd r;
        st = zt_rd_open(&r, f, t, c, verify ? &h : NULL, k->nbytes, true, err);
        if (st == TBX_OK) st = zt_rd_full(&r, buf, k->nbytes, err);
        if (st == TBX_OK) st = zt_rd_finish(&r, err);
        zt_rd_close(&r);
    }
    if (st == TBX_OK && verify) {
        zt_digest got;
        zt_hash_final(&h, &got);
        if (zt_digest_eq(&got, &want)) {
            vset(d, c, ZT_V_OK);
        } else {
            vset(d, c, ZT_V_BAD);
            st = digest_mismatch(f, t, c, &got, err);
        }
    }
    zt_hash_free(&h);
    return st;
}

tbx_status zt_check_component(tbx_file *f, const tbx_tensor *t, uint32_t c,
                              tbx_error *err) {
    return zt_decode_component(f, t, c, NULL, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Validation                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Hashes the stored bytes of a component in bounded chunks. */
static tbx_status hash_stored(tbx_file *f, const tbx_component *k, zt_hash *h, uint8_t *chunk,
                              tbx_error *err) {
    uint64_t off = k->offset, end = k->offset + k->stored_bytes;
    const uint8_t *p = tbx_source_ptr(&f->src, off, k->stored_bytes);
    if (p) {
        while (off < end) {
            size_t n = end - off > ZT_CHUNK * 16 ? ZT_CHUNK * 16 : (size_t)(end - off);
            zt_hash_update(h, p, n);
            tbx_status st = tbx_source_check(&f->src, off, n, "component", err);
            if (st != TBX_OK) return st;
            p += n;
            off += n;
        }
        return TBX_OK;
    }
    while (off < end) {
        size_t n = end - off > ZT_CHUNK ? ZT_CHUNK : (size_t)(end - off);
        tbx_status st = tbx_source_read(&f->src, off, chunk, n, "component", err);
        if (st != TBX_OK) return st;
        zt_hash_update(h, chunk, n);
        off += n;
    }
    return TBX_OK;
}

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

/* ------------------------------------------------------------------------------------------ */
/* f32 decoding of every layout                                                                */
/* ------------------------------------------------------------------------------------------ */
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
