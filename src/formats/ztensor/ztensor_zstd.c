/*
 * ztensor_zstd.c - the zTensor reader's zstd decoding cursor over one component.
 */
#include "ztensor_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <zstd.h>
#include <zstd_errors.h>

/* ceil(log2(n)), at least 10 */
static unsigned zt_log2_ceil(uint64_t n) {
    unsigned l = 10;
    while (l < 63 && ((uint64_t)1 << l) < n) l++;
    return l;
}

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
unsigned zt_wmax(const tbx_file *f) {
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

void zt_rd_close(zt_rd *r) {
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
tbx_status zt_rd_open(zt_rd *r, tbx_file *f, const tbx_tensor *t, uint32_t c, zt_hash *h,
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
tbx_status zt_rd_read(zt_rd *r, void *out, size_t cap, size_t *got, tbx_error *err) {
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
tbx_status zt_rd_finish(zt_rd *r, tbx_error *err) {
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
tbx_status zt_rd_full(zt_rd *r, uint8_t *out, uint64_t n, tbx_error *err) {
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
