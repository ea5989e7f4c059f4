/*
 * zstream.c - zstd streaming decoding for any driver (declared in zstream.h): the decoding
 * cursor over one range of stored bytes, the window budget a handle's decoders share, zstd's
 * contexts allocated through a tbx_alloc, and frame headers read before a window is allocated.
 *
 * A zstd stream is one or more frames back to back; each frame starts with a header that
 * names the window the decoder must allocate (up to 128 MiB here) and, optionally, the size it
 * decodes to:
 *
 *   +--------------+---------------------------------+-----------+--------------+------
 *   | magic        | frame header (2-14 bytes):       | blocks    | checksum     | next
 *   | 28 B5 2F FD  | descriptor, window descriptor,   | (3-byte   | (optional,   | frame
 *   | (LE u32)     | dictionary id, content size      |  headers) |  4 bytes)    | ...
 *   +--------------+---------------------------------+-----------+--------------+------
 *   skippable frames: magic 0x184D2A5? (LE), u32 size, that many bytes (no window)
 *
 * tensorbox never trusts the header: the window a frame asks for is checked against the
 * decoder's limit (windowLogMax: TBX_E_LIMIT past it) and against the handle's budget before the
 * decoder allocates it, and the decoded size against the caller's bound, whatever the frame
 * says (a "bomb" stops at the bound; more is an error, less too).
 *
 * The cursor (tbx_zstream) gives the decoded bytes of one range in chunks: whole reads into
 * the caller's buffer, or bounded pieces for element streams. Mapped stored bytes are handed
 * to the decoder where they lie and checked to have been the file's as they are consumed (a
 * mapped file that shrank reads as zeros: tbx_source_check); other sources go through an input
 * buffer. An optional hash sees every stored byte in order (digests over the stored bytes).
 * Raw ranges (no zstd) go through the same cursor, so a caller reads both kinds alike.
 */
/* The advanced zstd API (custom allocator, frame headers), when the libzstd we link exports it
 * (CMake check). It must be requested before the first #include <zstd.h> (zstream.h includes
 * it). */
#ifdef TBX_HAVE_ZSTD_ADVANCED
#define ZSTD_STATIC_LINKING_ONLY
#endif
#include "zstream.h"

#include <inttypes.h>
#include <stdio.h>
#include <zstd_errors.h> /* ZSTD_getErrorCode: a window over the limit is TBX_E_LIMIT */

/* ------------------------------------------------------------------------------------------ */
/* zstd through a tbx_alloc (zstd's free() gets no size: keep it in a header)                 */
/* ------------------------------------------------------------------------------------------ */
#define ZHDR 16u

#ifdef TBX_HAVE_ZSTD_ADVANCED
static void *zalloc(void *opaque, size_t size) {
    const tbx_alloc *al = opaque;
    if (size > SIZE_MAX - ZHDR) return NULL;
    uint8_t *p = tbx_malloc(al, size + ZHDR);
    if (!p) return NULL;
    memcpy(p, &size, sizeof size);
    return p + ZHDR;
}

static void zfree(void *opaque, void *addr) {
    if (!addr) return;
    uint8_t *p = (uint8_t *)addr - ZHDR;
    size_t size;
    memcpy(&size, p, sizeof size);
    tbx_free(opaque, p, size + ZHDR);
}
#endif

ZSTD_DCtx *tbx_zstd_dctx_new(const tbx_alloc *al) {
#ifdef TBX_HAVE_ZSTD_ADVANCED
    ZSTD_customMem cm = {zalloc, zfree, (void *)al};
    return ZSTD_createDCtx_advanced(cm);
#else
    (void)al; /* zstd allocates with malloc (see zstream.h) */
    return ZSTD_createDCtx();
#endif
}

ZSTD_CCtx *tbx_zstd_cctx_new(const tbx_alloc *al) {
#ifdef TBX_HAVE_ZSTD_ADVANCED
    ZSTD_customMem cm = {zalloc, zfree, (void *)al};
    return ZSTD_createCCtx_advanced(cm);
#else
    (void)al;
    return ZSTD_createCCtx();
#endif
}

bool tbx_zstd_cctx_progress(ZSTD_CCtx *cctx, uint64_t *produced, uint64_t *consumed) {
#ifdef TBX_HAVE_ZSTD_ADVANCED
    ZSTD_frameProgression fp = ZSTD_getFrameProgression(cctx);
    *produced = fp.produced;
    *consumed = fp.consumed;
    return true;
#else
    (void)cctx;
    *produced = *consumed = 0;
    return false;
#endif
}

bool tbx_zstd_frame_cost(const void *p, size_t n, uint64_t max_window, uint64_t *cost) {
    *cost = 0;
#ifdef TBX_HAVE_ZSTD_ADVANCED
    ZSTD_frameHeader h;
    if (ZSTD_getFrameHeader(&h, p, n) != 0 || h.frameType != ZSTD_frame) return true;
    if (h.windowSize > max_window) return true; /* the decoder refuses it */
    size_t b = ZSTD_decodingBufferSize_min(h.windowSize, h.frameContentSize);
    if (!ZSTD_isError(b)) *cost = b;
    return true;
#else
    (void)p;
    (void)n;
    *cost = max_window; /* unknown: assume the largest window the decoder accepts */
    return false;
#endif
}

unsigned tbx_zstd_wlog_max(uint64_t max_decode_window) {
    unsigned wmax = 10;
    while (wmax < 27 && ((uint64_t)1 << (wmax + 1)) <= max_decode_window) wmax++;
    return wmax;
}

/* ------------------------------------------------------------------------------------------ */
/* The window budget (see zstream.h)                                                          */
/* ------------------------------------------------------------------------------------------ */
tbx_status tbx_zbudget_init(tbx_zbudget *b, uint64_t cap, tbx_error *err) {
    memset(b, 0, sizeof *b);
    if (pthread_mutex_init(&b->mu, NULL) != 0) return tbx_err_nomem(err, "decoder budget");
    if (pthread_cond_init(&b->cv, NULL) != 0) {
        pthread_mutex_destroy(&b->mu);
        return tbx_err_nomem(err, "decoder budget");
    }
    b->init = true;
    b->cap = cap;
    return TBX_OK;
}

void tbx_zbudget_free(tbx_zbudget *b) {
    if (!b || !b->init) return;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    b->init = false;
}

void tbx_zbudget_take(tbx_zbudget *b, uint64_t cost) {
    if (!cost || !b || !b->init) return;
    pthread_mutex_lock(&b->mu);
    while (b->used && b->used + cost > b->cap) pthread_cond_wait(&b->cv, &b->mu);
    b->used += cost;
    pthread_mutex_unlock(&b->mu);
}

void tbx_zbudget_give(tbx_zbudget *b, uint64_t cost) {
    if (!cost || !b || !b->init) return;
    pthread_mutex_lock(&b->mu);
    b->used -= cost;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* ------------------------------------------------------------------------------------------ */
/* The decoding cursor: the decoded bytes of one range, in chunks, never past its bound       */
/* ------------------------------------------------------------------------------------------ */
/* ceil(log2(n)), at least 10 */
static unsigned log2_ceil(uint64_t n) {
    unsigned l = 10;
    while (l < 63 && ((uint64_t)1 << l) < n) l++;
    return l;
}

/* The subject of the cursor's messages: `component "w"/data`. */
static void subject(const tbx_zstream *r, char *dst, size_t cap) {
    r->in.name(r->in.ctx, r->in.part, dst, cap);
}

/* *cost: the decoding buffer zstd will allocate for the frame that starts at the decoder's
 * next input byte (its header read from the pending input, or from the source when fewer
 * bytes are pending): 0 when no window will be allocated (skippable frame, a window over the
 * decoder's limit, a header the decoder will reject). */
static tbx_status frame_cost(tbx_zstream *r, uint64_t *cost, tbx_error *err) {
    *cost = 0;
    uint8_t hb[18]; /* ZSTD_FRAMEHEADERSIZE_MAX */
    size_t pend = r->zin.size - r->zin.pos;
    uint64_t left = r->in_end - r->in_off + pend;
    size_t n = left < sizeof hb ? (size_t)left : sizeof hb;
    const void *p = hb;
    if (n == 0) return TBX_OK; /* no data: the decoder reports it */
    if (pend >= n) {
        /* mapped bytes: a file that shrank gives zeros here (a cost of 0), and the decoder's
         * check of what it consumes reports it (got_input) */
        p = (const uint8_t *)r->zin.src + r->zin.pos;
    } else {
        tbx_status st = tbx_source_read(r->in.src, r->in_off - pend, hb, n, r->in.read_field,
                                        err);
        if (st != TBX_OK) return st;
    }
    tbx_zstd_frame_cost(p, n, (uint64_t)1 << r->wlog, cost);
    return TBX_OK;
}

static tbx_status new_dctx(tbx_zstream *r, tbx_error *err) {
    r->dctx = tbx_zstd_dctx_new(r->in.al); /* zstd allocates through the caller's allocator */
    if (!r->dctx) return tbx_err_nomem(err, "zstd decoder");
    size_t zr = ZSTD_DCtx_setParameter(r->dctx, ZSTD_d_windowLogMax, (int)r->wlog);
    if (ZSTD_isError(zr)) return tbx_err_nomem(err, "zstd decoder");
    return TBX_OK;
}

/* Before the decoder starts a further frame (the previous one complete, input left): a frame
 * that needs a larger buffer than the decoder holds gets it from the budget first (admitted
 * decoders: the old decoder and its share are released before waiting for the larger one). */
static tbx_status next_frame(tbx_zstream *r, tbx_error *err) {
    uint64_t cost;
    tbx_status st = frame_cost(r, &cost, err);
    if (st != TBX_OK || cost <= r->cost) return st;
    if (!r->admit) { r->cost = cost; return TBX_OK; }
    ZSTD_freeDCtx(r->dctx);
    r->dctx = NULL;
    tbx_zbudget_give(r->in.budget, r->cost);
    r->cost = cost;
    tbx_zbudget_take(r->in.budget, cost);
    return new_dctx(r, err);
}

void tbx_zstream_close(tbx_zstream *r) {
    if (r->dctx) ZSTD_freeDCtx(r->dctx);
    if (r->ibuf) tbx_free(r->in.al, r->ibuf, r->ibuf_cap);
    if (r->admit) tbx_zbudget_give(r->in.budget, r->cost);
    r->dctx = NULL;
    r->ibuf = NULL;
    r->cost = 0;
}

static tbx_status refill(tbx_zstream *r, tbx_error *err);

/* After the decoder took input straight from the mapping (no input buffer): were the bytes it
 * consumed still the file's (a mapped file that shrank reads as zeros)? A decoder that failed
 * may have read past what it consumed: then every byte it was given is checked, so that a
 * shrink is reported as such rather than as corrupt data. */
static tbx_status got_input(tbx_zstream *r, bool failed, tbx_error *err) {
    size_t n = failed ? r->zin.size : r->zin.pos;
    if (r->ibuf || !n) return TBX_OK;
    return tbx_source_check(r->in.src, r->in_off - r->zin.size, n, r->in.read_field, err);
}

tbx_status tbx_zstream_open(tbx_zstream *r, const tbx_zsrc *in, uint64_t bound, bool admit,
                            tbx_zhash_fn hash, void *hash_ud, tbx_error *err) {
    memset(r, 0, sizeof *r);
    r->in = *in;
    r->in_off = in->offset;
    r->in_end = in->offset + in->stored; /* inside the source: the caller checked it */
    r->bound = bound;
    r->hash = hash;
    r->hash_ud = hash_ud;
    if (!in->zstd) return TBX_OK;
    /* Window: what the data may need, at least 8 MiB (what compressors use for streams of
     * unknown size up to level 19), at most zstd's default decoder limit of 128 MiB and at
     * most max_decode_window: the decoder's memory is this window plus ~200 KiB whatever the
     * decoded size (a frame asking for more fails with TBX_E_LIMIT). */
    unsigned wl = log2_ceil(bound), wmax = tbx_zstd_wlog_max(in->max_window);
    if (wl < 23) wl = 23;
    if (wl > 27) wl = 27;
    if (wl > wmax) wl = wmax;
    r->wlog = wl;
    uint64_t stored = in->stored;
    if (!tbx_source_ptr(in->src, in->offset, stored)) {
        size_t cap = ZSTD_DStreamInSize();
        r->ibuf_cap = stored < cap ? (size_t)(stored ? stored : 1) : cap;
        r->ibuf = tbx_malloc(in->al, r->ibuf_cap);
        if (!r->ibuf) { tbx_zstream_close(r); return tbx_err_nomem(err, "zstd input buffer"); }
    }
    /* the first frame's window, from its header (in the first input chunk), before a decoder
     * exists to allocate it */
    tbx_status st = r->in_off < r->in_end ? refill(r, err) : TBX_OK;
    if (st == TBX_OK) st = frame_cost(r, &r->cost, err);
    if (st != TBX_OK) { tbx_zstream_close(r); return st; }
    r->admit = admit;
    if (admit) tbx_zbudget_take(in->budget, r->cost);
    st = new_dctx(r, err);
    if (st != TBX_OK) { tbx_zstream_close(r); return st; }
    return TBX_OK;
}

/* Gives the decoder its next chunk of stored bytes (zin is empty, input remains). */
static tbx_status refill(tbx_zstream *r, tbx_error *err) {
    uint64_t left = r->in_end - r->in_off;
    const uint8_t *p = tbx_source_ptr(r->in.src, r->in_off, left);
    size_t n;
    if (p) {
        n = left > (uint64_t)(SIZE_MAX / 2) ? SIZE_MAX / 2 : (size_t)left;
    } else {
        n = left < r->ibuf_cap ? (size_t)left : r->ibuf_cap;
        tbx_status st = tbx_source_read(r->in.src, r->in_off, r->ibuf, n, r->in.read_field, err);
        if (st != TBX_OK) return st;
        p = r->ibuf;
    }
    /* mapped bytes hashed here are checked as the decoder consumes them (got_input): the digest
     * is compared only after all of them were */
    if (r->hash && n) r->hash(r->hash_ud, p, n);
    r->zin.src = p;
    r->zin.size = n;
    r->zin.pos = 0;
    r->in_off += n;
    return TBX_OK;
}

static tbx_status zerr(tbx_zstream *r, const char *why, tbx_error *err) {
    char w[160];
    subject(r, w, sizeof w);
    return tbx_err(err, TBX_E_FORMAT, r->in.offset, r->in.zfield,
                   "%s: zstd data is invalid (%s) after %" PRIu64 " decoded bytes", w, why,
                   r->produced);
}

/* A zstd error code as a status: a frame whose window exceeds what the decoder was allowed
 * (max_decode_window) is TBX_E_LIMIT, anything else invalid data. */
static tbx_status zfail(tbx_zstream *r, size_t code, tbx_error *err) {
    if (ZSTD_getErrorCode(code) != ZSTD_error_frameParameter_windowTooLarge)
        return zerr(r, ZSTD_getErrorName(code), err);
    char w[160];
    subject(r, w, sizeof w);
    return tbx_err(err, TBX_E_LIMIT, r->in.offset, r->in.zfield,
                   "%s: zstd frame needs a larger window than max_decode_window = %" PRIu64
                   " (or the 128 MiB tensorbox allows)", w, r->in.max_window);
}

tbx_status tbx_zstream_read(tbx_zstream *r, void *out, size_t cap, size_t *got, tbx_error *err) {
    *got = 0;
    uint64_t room = r->bound - r->produced;
    if ((uint64_t)cap > room) cap = (size_t)room;
    if (cap == 0) return TBX_OK;
    if (!r->dctx) {
        uint64_t left = r->in_end - r->in_off;
        size_t n = left < (uint64_t)cap ? (size_t)left : cap;
        tbx_status st = tbx_source_read(r->in.src, r->in_off, out, n, r->in.read_field, err);
        if (st != TBX_OK) return st;
        if (r->hash && n) r->hash(r->hash_ud, out, n);
        r->in_off += n;
        r->produced += n;
        *got = n;
        return TBX_OK;
    }
    ZSTD_outBuffer o = {out, cap, 0};
    while (o.pos < o.size) {
        if (r->zin.pos == r->zin.size && r->in_off < r->in_end) {
            tbx_status st = refill(r, err);
            if (st != TBX_OK) return st;
        }
        bool no_input = r->zin.pos == r->zin.size;
        if (no_input && r->frame_done) break; /* a further call would await a next frame */
        if (r->frame_done) {
            tbx_status st = next_frame(r, err);
            if (st != TBX_OK) return st;
        }
        size_t before_out = o.pos, before_in = r->zin.pos;
        size_t ret = ZSTD_decompressStream(r->dctx, &o, &r->zin);
        const bool stuck = o.pos == before_out && r->zin.pos == before_in && !no_input;
        tbx_status gst = got_input(r, ZSTD_isError(ret) || stuck, err);
        if (gst != TBX_OK) return gst;
        if (ZSTD_isError(ret)) return zfail(r, ret, err);
        r->frame_done = ret == 0;
        if (o.pos == before_out && r->zin.pos == before_in) {
            if (no_input) break; /* everything decoded */
            return zerr(r, "the decoder made no progress", err); /* no progress: never loop */
        }
    }
    r->produced += o.pos;
    *got = o.pos;
    return TBX_OK;
}

tbx_status tbx_zstream_finish(tbx_zstream *r, tbx_error *err) {
    char w[160];
    if (!r->dctx) return TBX_OK;
    for (;;) {
        if (r->zin.pos == r->zin.size && r->in_off < r->in_end) {
            tbx_status st = refill(r, err);
            if (st != TBX_OK) return st;
        }
        bool no_input = r->zin.pos == r->zin.size;
        if (no_input && r->frame_done) return TBX_OK;
        if (r->frame_done) {
            tbx_status st = next_frame(r, err);
            if (st != TBX_OK) return st;
        }
        uint8_t probe;
        ZSTD_outBuffer o = {&probe, 1, 0};
        size_t before_in = r->zin.pos;
        size_t ret = ZSTD_decompressStream(r->dctx, &o, &r->zin);
        tbx_status gst = got_input(r, ZSTD_isError(ret) || o.pos || r->zin.pos == before_in, err);
        if (gst != TBX_OK) return gst;
        if (ZSTD_isError(ret)) return zfail(r, ret, err);
        r->frame_done = ret == 0;
        if (o.pos) {
            subject(r, w, sizeof w);
            return tbx_err(err, TBX_E_FORMAT, r->in.offset, r->in.zfield,
                           "%s: zstd data decodes to more than the %" PRIu64
                           " bytes its shape and dtype give", w, r->bound);
        }
        if (r->zin.pos == before_in) {
            if (no_input && r->frame_done) return TBX_OK;
            if (!no_input) return zerr(r, "the decoder made no progress", err);
            subject(r, w, sizeof w);
            return tbx_err(err, TBX_E_FORMAT, r->in.offset, r->in.zfield,
                           "%s: zstd stream ends inside a frame (truncated data)", w);
        }
    }
}

/* While hashing, chunks stay cache-sized so the hash reads bytes the copy just brought in. */
tbx_status tbx_zstream_full(tbx_zstream *r, uint8_t *out, uint64_t n, tbx_error *err) {
    const size_t scap = (size_t)1 << 20;
    uint8_t *scratch = NULL;
    if (!out && n) {
        scratch = tbx_malloc(r->in.al, scap);
        if (!scratch) return tbx_err_nomem(err, "decode buffer");
    }
    const uint64_t lim = !out ? scap : r->hash ? scap : (uint64_t)1 << 30;
    uint64_t done = 0;
    tbx_status st = TBX_OK;
    while (done < n) {
        size_t chunk = n - done > lim ? (size_t)lim : (size_t)(n - done);
        size_t got = 0;
        st = tbx_zstream_read(r, out ? out + done : scratch, chunk, &got, err);
        if (st != TBX_OK) break;
        done += got;
        if (got < chunk) {
            char w[160];
            subject(r, w, sizeof w);
            if (!r->dctx)
                st = tbx_err(err, TBX_E_TRUNCATED, r->in.offset, r->in.field,
                             "%s: %" PRIu64 " stored bytes, %" PRIu64 " expected", w, done, n);
            else if (!r->frame_done)
                st = tbx_err(err, TBX_E_FORMAT, r->in.offset, r->in.zfield,
                             "%s: zstd stream ends inside a frame after %" PRIu64
                             " decoded bytes (%" PRIu64 " expected)", w, r->produced, n);
            else
                st = tbx_err(err, TBX_E_FORMAT, r->in.offset, r->in.zfield,
                             "%s: zstd data decodes to only %" PRIu64
                             " bytes, its shape and dtype give %" PRIu64, w, r->produced, n);
            break;
        }
    }
    if (scratch) tbx_free(r->in.al, scratch, scap);
    return st;
}
