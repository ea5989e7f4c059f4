/*
 * ztensor_read.c - reading zTensor components: digests, whole reads, element and range streams.
 *
 * Digests cover the stored bytes (compressed ones as stored) and are spelled in the manifest:
 *
 *   "crc32c:0x" 1-8 hex digits ("0X" too)   CRC-32C (Castagnoli)
 *   "sha256:" 64 hex digits                 SHA-256
 *   (hex digits of either case) another algorithm is unknown, not verified; with verification
 *   on, it and a malformed known one are problems reported at open
 *
 * With TBX_OPEN_VERIFY_DIGESTS each component's digest is verified the first time its bytes are
 * read, whichever way (its state byte in zt_tdrv: unchecked, ok, bad, skipped); until then the
 * core routes even raw components through the driver (zt_raw_pending), and a component known
 * bad keeps failing unless a problem callback took the report.
 *
 * Whole reads (zt_decode_component: tbx_component_read, tbx_read_batch's workers, validation)
 * pass the stored bytes through one decoding cursor (src/io/zstream.c) straight into the
 * caller's buffer, hashing them on the way, the cursor's window taken from the handle's budget.
 * Range and f32 reads go through element streams: a cursor plus a 64 KiB buffer, yielding
 * integers, f32 values or bytes; such a stream is parked after a read (ZT_NPARK per handle,
 * least recently used evicted, their windows kept under the budget's cap) so that the next read
 * that starts at or after its position continues it: a component read chunk after chunk is
 * decoded once.
 */
#include "ztensor_int.h"

#include <inttypes.h>
#include <stdio.h>

#include "plain.h"

/* "\"name\"/role" for messages. */
void zt_what(char *dst, size_t cap, const tbx_tensor *t, uint32_t c) {
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
int zt_digest_parse(const char *s, zt_digest *d) {
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

/* ------------------------------------------------------------------------------------------ */
/* Decoding cursors over components (src/io/zstream.c)                                         */
/* ------------------------------------------------------------------------------------------ */
/* The subject of a cursor's messages: `component "name"/role`. */
static void zt_comp_subject(const void *ctx, uint32_t c, char *dst, size_t cap) {
    char w[128];
    zt_what(w, sizeof w, ctx, c);
    snprintf(dst, cap, "component %s", w);
}

static void zt_hash_cb(void *ud, const void *p, size_t n) { zt_hash_update(ud, p, n); }

tbx_status zt_rd_open(tbx_zstream *r, tbx_file *f, const tbx_tensor *t, uint32_t c, zt_hash *h,
                      uint64_t bound, bool admit, tbx_error *err) {
    const tbx_component *k = &t->comp[c];
    zt_state *zs = f->drv_state;
    tbx_zsrc in = {
        .src = &f->src,
        .al = &f->al,
        .offset = k->offset,
        .stored = k->stored_bytes, /* inside the file: checked at open */
        .zstd = k->encoding == TBX_ENC_ZSTD,
        .max_window = f->limits.max_decode_window,
        .budget = zs ? &zs->budget : NULL,
        .read_field = t->name,
        .field = "component",
        .zfield = "component.zstd",
        .name = zt_comp_subject,
        .ctx = t,
        .part = c,
    };
    return tbx_zstream_open(r, &in, bound, admit, h ? zt_hash_cb : NULL, h, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Element streams over a component (bounded chunks), for validation and f32 decoding, and     */
/* byte streams for range reads. A stream reads its component once from the first byte to the  */
/* last; reaching the end checks that the zstd data ends there too (tbx_zstream_finish).      */
/* ------------------------------------------------------------------------------------------ */
void zt_es_close(zt_es *s) {
    if (!s->open) return;
    tbx_file *f = s->f;
    tbx_zstream_close(&s->rd);
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
    s->f = f;
    s->t = t;
    s->c = c;
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

tbx_status zt_es_open(zt_es *s, tbx_file *f, const tbx_tensor *t, uint32_t c, bool f32,
                             tbx_error *err) {
    return zt_es_open_mode(s, f, t, c, f32 ? ZT_ES_F32 : ZT_ES_INT, err);
}

/* Once every decoded byte was delivered: the zstd data must end there (no further bytes, no
 * unfinished frame), or the component is invalid, whichever way it is read. */
static tbx_status zt_es_at_end(zt_es *s, tbx_error *err) {
    if (s->finished || s->rd.produced < s->rd.bound) return TBX_OK;
    s->finished = true;
    return tbx_zstream_finish(&s->rd, err);
}

static tbx_status zt_es_fill(zt_es *s, tbx_error *err) {
    uint64_t want = s->left * s->esize;
    size_t cap = want < ZT_CHUNK ? (size_t)want : ZT_CHUNK;
    tbx_status st = tbx_zstream_full(&s->rd, s->buf, cap, err);
    if (st == TBX_OK) st = zt_es_at_end(s, err);
    if (st != TBX_OK) return st;
    s->len = cap / s->esize;
    s->pos = 0;
    if (s->fbuf) {
        st = tbx_decode_f32_info(tbx_dtype_core_get(s->dt), s->dt, s->buf, cap, s->len, s->fbuf);
        if (st != TBX_OK) {
            char w[128];
            zt_what(w, sizeof w, s->t, s->c);
            const tbx_dtype_info *di = tbx_dtype_core_get(s->dt);
            return tbx_err(err, st == TBX_E_UNSUPPORTED ? TBX_E_UNSUPPORTED : st,
                           s->t->comp[s->c].offset, "component.dtype",
                           "component %s: %s values cannot be decoded to f32", w,
                           di ? di->name : "?");
        }
    }
    return TBX_OK;
}

/* Skips n elements. */
tbx_status zt_es_skip(zt_es *s, uint64_t n, tbx_error *err) {
    if (n > s->left) n = s->left;
    uint64_t inbuf = s->len - s->pos;
    if (n <= inbuf) { s->pos += (size_t)n; s->left -= n; return TBX_OK; }
    n -= inbuf;
    s->left -= inbuf;
    s->pos = s->len;
    if (!s->rd.dctx) { /* raw: seek (the buffer no longer holds the elements before us) */
        s->len = s->pos = 0;
        tbx_zstream_skip_raw(&s->rd, n * s->esize);
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
    tbx_status st = tbx_zstream_full(&s->rd, out + take, n, err);
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
        if (lru < 0 || sum <= zs->budget.cap) return;
        zt_es_close(&zs->park[lru]);
    }
}

/* A stream over component c of t positioned at element `at`: a parked one when there is one
 * at or before `at`, or a little past it with `at` still in its buffer (it is taken out of the
 * park), else a new one; then skipped forward. Any other backwards move starts again from the
 * component's first byte. */
tbx_status zt_es_get(zt_es *s, tbx_file *f, const tbx_tensor *t, uint32_t c, int mode,
                            uint32_t lane, uint64_t at, tbx_error *err) {
    zt_state *zs = f->drv_state;
    s->open = false;
    for (int k = 0; zs->park && k < ZT_NPARK; k++) {
        zt_es *p = &zs->park[k];
        if (!p->open || p->t != t || p->c != c || p->mode != mode || p->lane != lane)
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
void zt_es_put(tbx_file *f, zt_es *s) {
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

void zt_park_free(tbx_file *f) {
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
tbx_status zt_es_int(zt_es *s, uint64_t *u, bool *neg, tbx_error *err) {
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

tbx_status zt_es_f32(zt_es *s, float *v, tbx_error *err) {
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
tbx_status zt_es_word(zt_es *s, uint64_t *u, tbx_error *err) {
    bool neg;
    tbx_status st = zt_es_int(s, u, &neg, err);
    if (st == TBX_OK && s->esize < 8) *u &= ((uint64_t)1 << (8 * s->esize)) - 1;
    return st;
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
        tbx_zstream r;
        st = zt_rd_open(&r, f, t, c, verify ? &h : NULL, k->nbytes, true, err);
        if (st == TBX_OK) st = tbx_zstream_full(&r, buf, k->nbytes, err);
        if (st == TBX_OK) st = tbx_zstream_finish(&r, err);
        tbx_zstream_close(&r);
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
