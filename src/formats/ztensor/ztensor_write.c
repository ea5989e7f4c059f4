/*
 * ztensor_write.c - writing zTensor v1.1 files (the writer hooks of tbx_driver_ztensor and the
 * sparse / quantized_group extras of ztensor.h).
 *
 * Output layout (deterministic: the same calls give the same bytes):
 *
 *   0        8               off_1 (64-aligned)        off_2          pos            end
 *   +--------+---------------+------------------+------+-------+-----+--------------+---------+
 *   |ZTEN1000| 0x00 ... 0x00 | blob 1           | 0x00 | blob 2| ... | CBOR manifest| u64 N   |
 *   |        |               | (raw or zstd)    | pad  |       |     | (N bytes)    | ZTEN1000|
 *   +--------+---------------+------------------+------+-------+-----+--------------+---------+
 *
 * Blobs are appended in the order their bytes arrive: a dense tensor's blob starts at the next
 * 64-aligned offset (opt.alignment may raise that to a larger power of two) when its first byte
 * is written; extras write all their components at once. The manifest follows the last blob
 * directly (not aligned), as the reference writer does. Every byte from 0 to the end is written
 * explicitly (magic, zero padding, blobs, manifest, footer), so nothing stale survives.
 *
 * Compression (opt.compress_level > 0): a dense tensor of at most gather_max bytes
 * (min(buffer_limit / (threads + 1), 32 MiB)) is gathered in a job slot; when it is complete a
 * worker thread (opt.threads) compresses it as one zstd frame carrying the content size, into
 * a buffer of 95% of the raw size (compression that saves less is not kept: the raw bytes are
 * stored), and hashes the stored bytes (opt.digest). The caller's thread writes finished jobs
 * in tensor order, so offsets and bytes do not depend on the thread count. At most threads + 1
 * jobs are held, and no more than opt.buffer_limit raw bytes (1 GiB): memory is about twice
 * that. A larger tensor is compressed as a stream on the caller's thread (zstream_*: bounded
 * buffers, the same bytes). Without compression the bytes stream straight to the file and are
 * hashed as they pass (no buffering).
 *
 * The manifest is canonical CBOR (ztensor_cbor.c): "objects", "version": "1.1.0", then
 * "attributes" (only when there are global attributes). Metadata entries become global
 * attributes, except an entry "ztensor.attributes.<name>" holding a map when an object <name>
 * exists: it becomes that object's attributes (this is how tensorbox reads them).
 */
#include "ztensor_int.h"

#include "ztensor.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>


typedef struct zt_wcomp {
    int role;
    tbx_dtype dtype;
    uint64_t offset, length;
    tbx_encoding enc;
    char digest[80];         /* "" when none (set_digest writes up to 80 bytes) */
} zt_wcomp;

typedef struct zt_wobj {
    char *name;              /* owned */
    size_t name_len;
    uint64_t *shape;         /* owned */
    uint32_t ndim;
    int layout;
    uint32_t ncomp;
    zt_wcomp comp[3];
    tbx_value *attrs;        /* owned MAP or NULL */
} zt_wobj;

/* One dense tensor to compress: gathered by the caller's thread, compressed and hashed by a
 * worker (or inline without workers), written by the caller's thread. */
typedef struct zt_zjob {
    tbx_task task;           /* first member: the pool sees only this */
    const tbx_alloc *al;
    int level, digest;
    ZSTD_CCtx *cctx;         /* the slot's own, reused */
    size_t ti;               /* tensor index */
    uint8_t *raw;            /* the tensor's bytes (raw_len of raw_cap) */
    size_t raw_len, raw_cap;
    uint8_t *z;              /* compressed output (zcap bytes allocated) */
    size_t zlen, zcap;
    size_t zlim;             /* largest output worth keeping: keep_limit(raw_len) */
    bool use_z;              /* compression saved at least 5% */
    char digest_str[80];     /* over the stored bytes; "" without digests */
    tbx_status st;
    tbx_error err;
} zt_zjob;

typedef struct zt_wstate {
    bool begun;              /* options checked, header written */
    uint64_t align;
    int level;               /* zstd level, 0: raw */
    int digest;              /* ZT_H_* */
    uint64_t pos;            /* end of the last blob */
    ZSTD_CCtx *cctx;
    zt_wobj *extras;
    size_t nextras, cap_extras;
    tbx_names extra_names;
    /* The blob of dense tensor i (role "data", the tensor's dtype) starts at tensors[i].offset;
     * it is the raw bytes (tensors[i].nbytes) unless zlen[i] != 0: a zstd frame of that many
     * bytes. zlen exists only when compressing, ddig only with digests: a lossless conversion
     * of a million tensors keeps nothing per tensor here. */
    uint64_t *zlen;
    size_t cap_zlen;
    char (*ddig)[80];        /* its digest string, by index (NULL when digests are off) */
    size_t cap_ddig;
    /* the dense tensor being streamed (raw: straight to the file, hashed on the way) */
    int64_t cur;
    zt_hash raw_hash;
    /* compressing (level > 0): each dense tensor is gathered in a job slot, compressed and
     * hashed on a worker thread, and committed to the file in tensor order */
    tbx_pool *pool;
    zt_zjob *slots;          /* nslots jobs; job number j uses slot j % nslots */
    int nslots;
    uint64_t jobs_begun, jobs_committed;
    uint64_t held;           /* raw bytes held by begun, uncommitted jobs */
    uint64_t buffer_limit;
    uint64_t gather_max;     /* larger dense tensors are streamed (zstream_*), not gathered */
    /* the dense tensor being compressed as a stream on the caller's thread (s->cctx) */
    bool zs_on;
    int zs_mode;             /* ZS_* */
    uint64_t zs_off, zs_n;   /* its blob offset and raw size */
    uint64_t zs_out;         /* compressed bytes drained to the file so far */
    uint8_t *zs_buf;         /* ZS_BUF bytes: zstd's output, then a copy buffer */
    size_t zs_pos;           /* bytes of zs_buf holding output not drained yet */
    zt_hash zs_hash;         /* over the compressed bytes (raw_hash: over the raw bytes) */
    /* quantized_group tensors declared through the generic API (tbx_writer_add_quant_tensor):
     * the tensor's bytes (packed words, scales, zeros one after the other) are gathered whole,
     * then written as three components like tbx_ztensor_writer_add_qgroup's; the manifest
     * lists the tensor as that object (qgs, sorted by tensor index at finish) */
    struct zt_wqg *qgs;
    size_t nqgs, cap_qgs;
    uint8_t *qg_buf;         /* the quantized_group tensor being gathered (qg_cap bytes) */
    size_t qg_cap;
} zt_wstate;

typedef struct zt_wqg {
    size_t ti;               /* the tensor */
    zt_wcomp comp[3];        /* packed_weight, scales, zeros */
    tbx_value *attrs;        /* owned MAP: bits, group_size, packing */
} zt_wqg;

/* Dense tensors gathered whole for the workers are at most this large (and at most
 * buffer_limit / (threads + 1)); larger ones are compressed as a stream. */
#define ZT_GATHER_MAX ((uint64_t)32 << 20)
#define ZS_BUF ((size_t)256 << 10)
enum { ZS_BOTH, ZS_Z, ZS_RAW }; /* outcome open; compressed for sure; raw for sure */

static const char *extra_key_of(const void *ctx, uint64_t i, size_t *len) {
    const zt_wstate *s = ctx;
    *len = s->extras[i].name_len;
    return s->extras[i].name;
}

/* Lazily created state; the options are checked once here. */
static tbx_status wstate(tbx_writer *w, zt_wstate **out, tbx_error *err) {
    if (w->drv_state) { *out = w->drv_state; return TBX_OK; }
    int lvl = w->opt.compress_level;
    if (lvl < 0 || lvl > ZSTD_maxCLevel())
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "compress_level",
                       "zstd level %d is outside 0..%d (0: store raw)", lvl, ZSTD_maxCLevel());
    uint32_t a = w->opt.alignment;
    if (a && (a < ZT_ALIGN || !tbx_is_pow2(a)))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "alignment",
                       "zTensor needs 64-byte aligned components; alignment %u is not a power of "
                       "two of at least 64", a);
    if (w->opt.version > 1)
        return tbx_err(err, TBX_E_BAD_VERSION, TBX_NO_OFFSET, "version",
                       "zTensor version %u cannot be written; tensorbox writes v1 (\"1.1.0\")",
                       w->opt.version);
    zt_wstate *s = tbx_malloc(&w->al, sizeof *s);
    if (!s) return tbx_err_nomem(err, "zTensor writer");
    memset(s, 0, sizeof *s);
    s->align = a ? a : ZT_ALIGN;
    s->level = lvl;
    s->digest = ZT_H_NONE;
    if (w->opt.digest && strcmp(w->opt.digest, "sha256") == 0) s->digest = ZT_H_SHA256;
    if (w->opt.digest && strcmp(w->opt.digest, "crc32c") == 0) s->digest = ZT_H_CRC32C;
    s->cur = -1;
    tbx_names_init(&s->extra_names, &w->al, extra_key_of, s);
    w->drv_state = s;
    *out = s;
    return TBX_OK;
}

/* Options checked, magic written, compressor ready. */
static tbx_status wbegin(tbx_writer *w, zt_wstate **out, tbx_error *err) {
    zt_wstate *s;
    tbx_status st = wstate(w, &s, err);
    if (st != TBX_OK) return st;
    *out = s;
    if (s->begun) return TBX_OK;
    if (s->level > 0) {
        s->cctx = tbx_zstd_cctx_new(&w->al); /* zstd allocates through the writer */
        if (!s->cctx) return tbx_err_nomem(err, "zstd compressor");
        int nth = w->opt.threads ? (int)w->opt.threads : tbx_threads_default();
        s->buffer_limit = w->opt.buffer_limit ? w->opt.buffer_limit : (uint64_t)1 << 30;
        s->pool = tbx_pool_start(&w->al, nth);
        s->nslots = tbx_pool_threads(s->pool) + 1; /* one gathering, the others compressing */
        s->gather_max = s->buffer_limit / (uint64_t)s->nslots;
        if (s->gather_max > ZT_GATHER_MAX) s->gather_max = ZT_GATHER_MAX;
        s->slots = tbx_calloc(&w->al, (size_t)s->nslots, sizeof *s->slots);
        if (!s->slots) return tbx_err_nomem(err, "compression jobs");
        for (int k = 0; k < s->nslots; k++) {
            zt_zjob *j = &s->slots[k];
            j->al = &w->al;
            j->level = s->level;
            j->digest = s->digest;
            j->cctx = tbx_zstd_cctx_new(&w->al);
            if (!j->cctx) return tbx_err_nomem(err, "zstd compressor");
        }
    }
    st = tbx_out_pwrite(&w->out, 0, ZT_MAGIC, 8, err);
    if (st != TBX_OK) return st;
    s->pos = 8;
    s->begun = true;
    return TBX_OK;
}

void zt_w_free(tbx_writer *w) {
    zt_wstate *s = w->drv_state;
    if (!s) return;
    for (size_t i = 0; i < s->nextras; i++) {
        zt_wobj *o = &s->extras[i];
        tbx_free(&w->al, o->name, o->name_len + 1);
        tbx_free(&w->al, o->shape, o->ndim * sizeof *o->shape);
        tbx_val_free(o->attrs);
    }
    tbx_free(&w->al, s->extras, s->cap_extras * sizeof *s->extras);
    for (size_t i = 0; i < s->nqgs; i++) tbx_val_free(s->qgs[i].attrs);
    tbx_free(&w->al, s->qgs, s->cap_qgs * sizeof *s->qgs);
    tbx_free(&w->al, s->qg_buf, s->qg_cap);
    tbx_names_free(&s->extra_names);
    tbx_free(&w->al, s->zlen, s->cap_zlen * sizeof *s->zlen);
    tbx_free(&w->al, s->ddig, s->cap_ddig * sizeof *s->ddig);
    zt_hash_free(&s->raw_hash);
    zt_hash_free(&s->zs_hash);
    tbx_free(&w->al, s->zs_buf, s->zs_buf ? ZS_BUF : 0);
    tbx_pool_stop(s->pool); /* waits for jobs still running */
    for (int k = 0; s->slots && k < s->nslots; k++) {
        zt_zjob *j = &s->slots[k];
        if (j->cctx) ZSTD_freeCCtx(j->cctx);
        tbx_free(&w->al, j->raw, j->raw_cap);
        tbx_free(&w->al, j->z, j->zcap);
    }
    tbx_free(&w->al, s->slots, (size_t)s->nslots * sizeof *s->slots);
    if (s->cctx) ZSTD_freeCCtx(s->cctx);
    tbx_free(&w->al, s, sizeof *s);
    w->drv_state = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Checks                                                                                      */
/* ------------------------------------------------------------------------------------------ */
tbx_status zt_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                           tbx_error *err) {
    zt_wstate *s;
    tbx_status st = wstate(w, &s, err);
    if (st != TBX_OK) return st;
    char q[96], what[128];
    size_t bad = 0;
    tbx_quote_bytes(q, sizeof q, key, key_len, 64);
    if (!tbx_utf8_valid(key, key_len, &bad))
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata.key",
                       "metadata key \"%s\" is not valid UTF-8 (byte %zu); CBOR text must be", q,
                       bad);
    snprintf(what, sizeof what, "metadata \"%s\"", q);
    return zt_check_value(v, 0, what, err);
}

static bool name_taken(tbx_writer *w, zt_wstate *s, const char *name, size_t n) {
    uint64_t idx;
    return tbx_writer_find_tensor_(w, name, n, &idx) ||
           tbx_names_find(&s->extra_names, name, n, &idx);
}

tbx_status zt_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    zt_wstate *s;
    tbx_status st = wstate(w, &s, err);
    if (st != TBX_OK) return st;
    char q[96];
    size_t bad = 0;
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    if (!t->has_data)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": zTensor cannot store a tensor without data", q);
    const zt_dtype *zd = zt_dtype_by_tbx(t->dtype);
    if (!zd) {
        const tbx_dtype_info *di = tbx_dtype_core_get(t->dtype);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": dtype %s has no zTensor equivalent", q,
                       di ? di->name : "of another format");
    }
    if (!tbx_utf8_valid(t->name, t->name_len, &bad))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.name",
                       "tensor name \"%s\" is not valid UTF-8 (byte %zu)", q, bad);
    uint64_t idx;
    if (tbx_names_find(&s->extra_names, t->name, t->name_len, &idx))
        return tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "tensor.name",
                       "duplicate tensor name \"%s\"", q);
    uint64_t nbytes;
    if (!tbx_mul_u64(tbx_wt_nelems(t), zd->size, &nbytes))
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": byte size overflows 64 bits", q);
    t->nbytes = nbytes;
    return TBX_OK;
}

/* Room for the blob records (and digest strings) of n dense tensors. */
static tbx_status dense_reserve(tbx_writer *w, zt_wstate *s, size_t n, tbx_error *err) {
    if ((s->level > 0 && !tbx_grow(&w->al, (void **)&s->zlen, &s->cap_zlen, n, sizeof *s->zlen)) ||
        (s->digest != ZT_H_NONE &&
         !tbx_grow(&w->al, (void **)&s->ddig, &s->cap_ddig, n, sizeof *s->ddig)))
        return tbx_err_nomem(err, "zTensor tensor table");
    return TBX_OK;
}

/* Records dense tensor ti's blob. */
static void dense_set(tbx_writer *w, zt_wstate *s, size_t ti, uint64_t off, uint64_t len,
                      bool zstd) {
    w->tensors[ti].offset = off;
    if (s->zlen) s->zlen[ti] = zstd ? len : 0; /* raw: len is tensors[ti].nbytes */
}

tbx_status zt_w_layout(tbx_writer *w, tbx_error *err) {
    zt_wstate *s;
    tbx_status st = wbegin(w, &s, err);
    if (st != TBX_OK) return st;
    if (w->nsections)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "sections",
                       "zTensor files cannot hold sections (%zu given)", w->nsections);
    return dense_reserve(w, s, w->ntensors ? w->ntensors : 1, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Blobs                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Next blob offset; writes the zero padding up to it. */
static tbx_status blob_start(tbx_writer *w, zt_wstate *s, uint64_t *off, tbx_error *err) {
    uint64_t o;
    if (!tbx_align_up_u64(s->pos, s->align, &o))
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "offset", "file offset overflows");
    if (o > s->pos) {
        tbx_status st = tbx_out_zero(&w->out, s->pos, o - s->pos, err);
        if (st != TBX_OK) return st;
    }
    *off = o;
    return TBX_OK;
}

/* Compressed size worth keeping: at least 5% smaller than raw. */
static uint64_t keep_limit(uint64_t raw) {
    uint64_t cut = raw / 20 + (raw % 20 != 0);
    return raw - cut; /* raw 0 -> 0: an empty blob is never compressed */
}

/* The digest string of what h hashed into dst (80 bytes; "" for ZT_H_NONE). */
static void set_digest(char *dst, zt_hash *h) {
    if (h->algo == ZT_H_NONE) { dst[0] = 0; return; }
    zt_digest d;
    zt_hash_final(h, &d);
    zt_digest_str(&d, dst, 80);
}

/* The digest string of [p, p+n) with algorithm `algo` into dst (80 bytes). */
static tbx_status digest_of(int algo, const void *p, size_t n, char *dst, tbx_error *err) {
    zt_hash h;
    tbx_status st = zt_hash_init(&h, algo, err);
    if (st != TBX_OK) return st;
    zt_hash_update(&h, p, n);
    set_digest(dst, &h);
    zt_hash_free(&h);
    return TBX_OK;
}

/* Every zstd frame is made the same way, whether its tensor is in memory (compress_keep) or
 * arrives in pieces (streamed tensors, zstream_*): a fresh context at `level` with the content
 * size pledged, every byte but the last fed with ZSTD_e_continue (in any chunking), the last
 * byte alone with ZSTD_e_end. The bytes of such a frame depend only on the level and the
 * input: not on how the input is chunked, nor on the output buffer's size (checked for levels
 * 1..22, sizes across 128 KiB blocks and window sizes, chunks of odd sizes: see
 * docs/formats/ztensor.md). ZSTD_compress2 would not do: past the window size its frames
 * differ from those of streamed input. */
static size_t zc_start(ZSTD_CCtx *cctx, int level, uint64_t len) {
    size_t r = ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setPledgedSrcSize(cctx, len);
    return r;
}

/* Compresses src into dst (capacity: keep_limit(len)) as one frame carrying its content size.
 * *zlen gets the frame's size, or 0 when it would not fit (not worth keeping: store raw). The
 * bytes depend only on level and input, never on the thread that runs this. */
static size_t compress_keep(ZSTD_CCtx *cctx, int level, const void *src, size_t len, void *dst,
                            size_t cap, size_t *zlen) {
    *zlen = 0;
    if (len == 0 || cap == 0) return 0;
    size_t r = zc_start(cctx, level, len);
    if (ZSTD_isError(r)) return r;
    ZSTD_outBuffer out = {dst, cap, 0};
    ZSTD_inBuffer in = {src, len - 1, 0};
    while (in.pos < in.size) {
        size_t before = in.pos;
        r = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_continue);
        if (ZSTD_isError(r)) return r;
        if (out.pos == out.size && in.pos == before) return 0; /* full: does not fit */
    }
    ZSTD_inBuffer last = {(const uint8_t *)src + len - 1, 1, 0};
    do {
        if (out.pos == out.size) return 0; /* the frame is not complete yet: does not fit */
        r = ZSTD_compressStream2(cctx, &out, &last, ZSTD_e_end);
        if (ZSTD_isError(r)) return r;
    } while (r != 0);
    *zlen = out.pos;
    return 0;
}

/* Writes an in-memory blob (extras): compressed when that saves 5%. */
static tbx_status blob_write(tbx_writer *w, zt_wstate *s, const void *data, uint64_t len,
                             zt_wcomp *c, tbx_error *err) {
    uint64_t off;
    tbx_status st = blob_start(w, s, &off, err);
    if (st != TBX_OK) return st;
    if (len > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "too large");
    const void *stored = data;
    uint64_t slen = len;
    uint8_t *zb = NULL;
    size_t zcap = 0;
    c->enc = TBX_ENC_RAW;
    if (s->level > 0 && len > 0) {
        zcap = (size_t)keep_limit(len);
        zb = tbx_malloc(&w->al, zcap);
        if (!zb) return tbx_err_nomem(err, "zstd output");
        size_t zlen = 0;
        size_t r = compress_keep(s->cctx, s->level, data, (size_t)len, zb, zcap, &zlen);
        if (ZSTD_isError(r)) {
            tbx_free(&w->al, zb, zcap);
            return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "zstd", "zstd compression failed: %s",
                           ZSTD_getErrorName(r));
        }
        if (zlen) {
            stored = zb;
            slen = zlen;
            c->enc = TBX_ENC_ZSTD;
        }
    }
    st = digest_of(s->digest, stored, (size_t)slen, c->digest, err);
    if (st == TBX_OK) st = tbx_out_pwrite(&w->out, off, stored, (size_t)slen, err);
    tbx_free(&w->al, zb, zcap);
    if (st != TBX_OK) return st;
    c->offset = off;
    c->length = slen;
    s->pos = off + slen;
    return TBX_OK;
}

/* ---- compressing writes: jobs ------------------------------------------------------------ */

/* The slot of job number `job`. */
static zt_zjob *zslot(const zt_wstate *s, uint64_t job) {
    return &s->slots[job % (uint64_t)s->nslots];
}

/* On a worker: compress (kept when it saves 5%), then hash the stored bytes. */
static void zjob_run(tbx_task *task) {
    zt_zjob *j = (zt_zjob *)task;
    j->use_z = false;
    size_t r = compress_keep(j->cctx, j->level, j->raw, j->raw_len, j->z, j->zlim, &j->zlen);
    if (ZSTD_isError(r)) {
        j->st = tbx_err(&j->err, TBX_E_IO, TBX_NO_OFFSET, "zstd", "zstd compression failed: %s",
                        ZSTD_getErrorName(r));
        return;
    }
    j->use_z = j->zlen != 0;
    j->st = digest_of(j->digest, j->use_z ? j->z : j->raw, j->use_z ? j->zlen : j->raw_len,
                      j->digest_str, &j->err);
}

/* Writes the oldest job's blob (waiting for its worker) and frees its slot. Slots keep buffers
 * of up to 16 MiB for the next tensors; larger ones are given back at once. */
static tbx_status zjob_commit(tbx_writer *w, zt_wstate *s, tbx_error *err) {
    zt_zjob *j = zslot(s, s->jobs_committed);
    tbx_pool_wait(s->pool, &j->task, true);
    s->jobs_committed++;
    s->held -= j->raw_len;
    tbx_status st = j->st;
    if (st != TBX_OK) *err = j->err;
    uint64_t off = 0;
    if (st == TBX_OK) st = blob_start(w, s, &off, err);
    const uint8_t *stored = j->use_z ? j->z : j->raw;
    const size_t slen = j->use_z ? j->zlen : j->raw_len;
    if (st == TBX_OK) st = tbx_out_pwrite(&w->out, off, stored, slen, err);
    if (st == TBX_OK) {
        dense_set(w, s, j->ti, off, slen, j->use_z);
        if (s->ddig) memcpy(s->ddig[j->ti], j->digest_str, sizeof s->ddig[j->ti]);
        w->tensors[j->ti].offset = off;
        s->pos = off + slen;
    }
    const size_t keep = (size_t)16 << 20;
    if (j->raw_cap > keep) { tbx_free(&w->al, j->raw, j->raw_cap); j->raw = NULL; j->raw_cap = 0; }
    if (j->zcap > keep) { tbx_free(&w->al, j->z, j->zcap); j->z = NULL; j->zcap = 0; }
    return st;
}

/* Commits every begun job (before extras, the manifest, or an error return). */
static tbx_status zjobs_flush(tbx_writer *w, zt_wstate *s, tbx_error *err) {
    tbx_status first = TBX_OK;
    /* a job still gathering (never submitted) is not waited for */
    uint64_t submitted = s->jobs_begun - (s->cur >= 0 && !s->zs_on && s->slots ? 1 : 0);
    while (s->slots && s->jobs_committed < submitted) {
        tbx_error e;
        tbx_status st = zjob_commit(w, s, &e);
        if (st != TBX_OK && first == TBX_OK) { first = st; *err = e; }
    }
    return first;
}

/* A buffer of at least n bytes in *p (its contents are not kept); false when out of memory. */
static bool reserve(const tbx_alloc *al, uint8_t **p, size_t *cap, size_t n) {
    if (n <= *cap) return true;
    tbx_free(al, *p, *cap);
    *cap = 0;
    *p = tbx_malloc(al, n);
    if (!*p) return false;
    *cap = n;
    return true;
}

/* Starts gathering tensor t in the next slot, first committing old jobs while all slots are
 * busy or the bytes held would pass the buffer limit. */
static tbx_status zjob_begin(tbx_writer *w, zt_wstate *s, tbx_wtensor *t, tbx_error *err) {
    if (t->nbytes > SIZE_MAX)
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": %" PRIu64 " bytes do not fit in memory", t->name, t->nbytes);
    while (s->jobs_committed < s->jobs_begun &&
           (s->jobs_begun - s->jobs_committed >= (uint64_t)s->nslots ||
            s->held + t->nbytes > s->buffer_limit)) {
        tbx_status st = zjob_commit(w, s, err);
        if (st != TBX_OK) return st;
    }
    zt_zjob *j = zslot(s, s->jobs_begun);
    const size_t n = (size_t)t->nbytes, zc = (size_t)keep_limit(t->nbytes);
    if (!reserve(&w->al, &j->raw, &j->raw_cap, n)) return tbx_err_nomem(err, "tensor buffer");
    if (!reserve(&w->al, &j->z, &j->zcap, zc)) return tbx_err_nomem(err, "zstd output");
    j->task.run = zjob_run;
    j->ti = (size_t)(t - w->tensors);
    j->raw_len = n;
    j->zlim = zc; /* the output capacity is exactly the keep limit: same bytes as blob_write */
    j->st = TBX_OK;
    s->jobs_begun++;
    s->held += n;
    s->cur = (int64_t)j->ti;
    return TBX_OK;
}

/* ---- large tensors: compressed as a stream on the caller's thread ------------------------
 *
 * A dense tensor larger than gather_max is compressed as it arrives, through ZS_BUF bytes of
 * output buffer (plus zstd's own state: its window), and hashed incrementally. Whether its
 * blob will be the frame or the raw bytes (the frame is kept when it is at most
 * keep_limit(n) bytes) is known only at the end, so while it is open both are written to the
 * file: the raw bytes at the blob offset, where they stay when raw wins, and the frame after
 * them (at off + n), copied down to the blob offset when it wins. As soon as the outcome is
 * certain the other copy stops: the frame has passed keep_limit (ZS_RAW: compression stops),
 * or it will fit whatever the rest of the input (ZS_Z: the frame so far is copied down, raw
 * bytes are no longer written and the rest of the frame goes to its place directly). The
 * bytes are those compress_keep makes of the whole tensor (same frame, same choice). */

/* Copies n bytes of the output file from src down to dst (dst < src) through zs_buf. */
static tbx_status zs_copy_down(tbx_writer *w, zt_wstate *s, uint64_t dst, uint64_t src,
                               uint64_t n, tbx_error *err) {
    for (uint64_t done = 0; done < n;) {
        size_t k = n - done < ZS_BUF ? (size_t)(n - done) : ZS_BUF;
        tbx_status st = tbx_out_pread(&w->out, src + done, s->zs_buf, k, err);
        if (st == TBX_OK) st = tbx_out_pwrite(&w->out, dst + done, s->zs_buf, k, err);
        if (st != TBX_OK) return st;
        done += k;
    }
    return TBX_OK;
}

/* Writes the output buffered in zs_buf to its place (hashed), then settles the outcome when
 * it became certain. */
static tbx_status zs_drain(tbx_writer *w, zt_wstate *s, tbx_error *err) {
    const uint64_t keep = keep_limit(s->zs_n);
    if (s->zs_mode == ZS_RAW) { s->zs_pos = 0; return TBX_OK; }
    if (s->zs_out + s->zs_pos > keep) { /* the frame is too large: raw */
        s->zs_mode = ZS_RAW;
        s->zs_pos = 0;
        return TBX_OK;
    }
    if (s->zs_pos) {
        uint64_t at = s->zs_off + (s->zs_mode == ZS_Z ? 0 : s->zs_n) + s->zs_out;
        tbx_status st = tbx_out_pwrite(&w->out, at, s->zs_buf, s->zs_pos, err);
        if (st != TBX_OK) return st;
        zt_hash_update(&s->zs_hash, s->zs_buf, s->zs_pos);
        s->zs_out += s->zs_pos;
        s->zs_pos = 0;
    }
    if (s->zs_mode == ZS_BOTH) {
        /* the rest of the frame is at most the rest of the input plus block headers */
        uint64_t produced, consumed;
        bool known = tbx_zstd_cctx_progress(s->cctx, &produced, &consumed);
        uint64_t made = produced > s->zs_out ? produced : s->zs_out;
        uint64_t rest = consumed < s->zs_n ? s->zs_n - consumed : 0;
        if (known && made + rest + rest / 64 + 4096 <= keep) {
            s->zs_mode = ZS_Z;
            zt_hash_free(&s->raw_hash);
            return zs_copy_down(w, s, s->zs_off, s->zs_off + s->zs_n, s->zs_out, err);
        }
    }
    return TBX_OK;
}

/* Feeds len bytes to the compressor with directive e until they are consumed (and, for
 * ZSTD_e_end, the frame is complete), draining the output buffer as it fills. */
static tbx_status zs_feed(tbx_writer *w, zt_wstate *s, const uint8_t *p, size_t len,
                          ZSTD_EndDirective e, tbx_error *err) {
    ZSTD_inBuffer in = {p, len, 0};
    for (;;) {
        if (s->zs_mode == ZS_RAW) return TBX_OK;
        ZSTD_outBuffer out = {s->zs_buf, ZS_BUF, s->zs_pos};
        size_t r = ZSTD_compressStream2(s->cctx, &out, &in, e);
        if (ZSTD_isError(r))
            return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "zstd", "zstd compression failed: %s",
                           ZSTD_getErrorName(r));
        s->zs_pos = out.pos;
        bool done = e == ZSTD_e_end ? r == 0 : in.pos == in.size;
        if (out.pos == out.size || done) {
            tbx_status st = zs_drain(w, s, err);
            if (st != TBX_OK) return st;
        }
        if (done) return TBX_OK;
    }
}

static tbx_status zstream_begin(tbx_writer *w, zt_wstate *s, tbx_wtensor *t, tbx_error *err) {
    tbx_status st = zjobs_flush(w, s, err); /* the tensors before it go first */
    if (st != TBX_OK) return st;
    if (!s->zs_buf) {
        s->zs_buf = tbx_malloc(&w->al, ZS_BUF);
        if (!s->zs_buf) return tbx_err_nomem(err, "zstd output buffer");
    }
    uint64_t off;
    st = blob_start(w, s, &off, err);
    if (st != TBX_OK) return st;
    size_t r = zc_start(s->cctx, s->level, t->nbytes);
    if (ZSTD_isError(r))
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "zstd", "zstd compression failed: %s",
                       ZSTD_getErrorName(r));
    zt_hash_free(&s->raw_hash);
    zt_hash_free(&s->zs_hash);
    st = zt_hash_init(&s->raw_hash, s->digest, err);
    if (st == TBX_OK) st = zt_hash_init(&s->zs_hash, s->digest, err);
    if (st != TBX_OK) return st;
    t->offset = off;
    s->zs_on = true;
    s->zs_mode = ZS_BOTH;
    s->zs_off = off;
    s->zs_n = t->nbytes;
    s->zs_out = 0;
    s->zs_pos = 0;
    s->cur = t - w->tensors;
    return TBX_OK;
}

static tbx_status zstream_data(tbx_writer *w, zt_wstate *s, tbx_wtensor *t, const void *data,
                               size_t len, tbx_error *err) {
    if (len == 0) return TBX_OK;
    if (s->zs_mode != ZS_Z) { /* the raw bytes, in place */
        tbx_status st = tbx_out_pwrite(&w->out, s->zs_off + w->cur_written, data, len, err);
        if (st != TBX_OK) return st;
        zt_hash_update(&s->raw_hash, data, len);
    }
    const uint8_t *p = data;
    bool ends = w->cur_written + len == t->nbytes;
    tbx_status st = zs_feed(w, s, p, ends ? len - 1 : len, ZSTD_e_continue, err);
    if (st == TBX_OK && ends) st = zs_feed(w, s, p + len - 1, 1, ZSTD_e_end, err);
    return st;
}

static tbx_status zstream_done(tbx_writer *w, zt_wstate *s, tbx_wtensor *t, tbx_error *err) {
    s->zs_on = false;
    bool z = s->zs_mode != ZS_RAW;
    tbx_status st = TBX_OK;
    if (z && s->zs_out > keep_limit(s->zs_n)) /* ZS_Z was promised a frame that fits */
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "zstd",
                       "tensor \"%s\": the zstd frame grew past its bound", t->name);
    if (z && s->zs_mode == ZS_BOTH) /* the frame, from after the raw bytes down to its place */
        st = zs_copy_down(w, s, s->zs_off, s->zs_off + s->zs_n, s->zs_out, err);
    if (st != TBX_OK) return st;
    size_t ti = (size_t)(t - w->tensors);
    dense_set(w, s, ti, s->zs_off, z ? s->zs_out : s->zs_n, z);
    if (s->ddig) set_digest(s->ddig[ti], z ? &s->zs_hash : &s->raw_hash);
    zt_hash_free(&s->raw_hash);
    zt_hash_free(&s->zs_hash);
    s->pos = s->zs_off + (z ? s->zs_out : s->zs_n);
    return TBX_OK;
}

/* ---- raw writes: streamed straight to the file ------------------------------------------- */

static tbx_status dense_begin(tbx_writer *w, zt_wstate *s, tbx_wtensor *t, tbx_error *err) {
    if (s->level > 0 && t->nbytes > s->gather_max) return zstream_begin(w, s, t, err);
    if (s->level > 0) return zjob_begin(w, s, t, err);
    uint64_t off;
    tbx_status st = blob_start(w, s, &off, err);
    if (st != TBX_OK) return st;
    t->offset = off;
    s->cur = t - w->tensors;
    zt_hash_free(&s->raw_hash);
    return zt_hash_init(&s->raw_hash, s->digest, err);
}

static tbx_status qg_data(tbx_writer *w, zt_wstate *s, tbx_wtensor *t, const void *data,
                          size_t len, tbx_error *err);
static tbx_status qg_done(tbx_writer *w, zt_wstate *s, tbx_wtensor *t, tbx_error *err);

tbx_status zt_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                     tbx_error *err) {
    zt_wstate *s;
    tbx_status st = wbegin(w, &s, err);
    if (st != TBX_OK) return st;
    if (tbx_writer_tensor_quant_(w, (uint64_t)(t - w->tensors)))
        return qg_data(w, s, t, data, len, err);
    if (s->cur != t - w->tensors) {
        st = dense_begin(w, s, t, err);
        if (st != TBX_OK) return st;
    }
    if (s->zs_on) return zstream_data(w, s, t, data, len, err);
    if (s->level > 0) { /* gather (the core checked that the bytes fit the tensor) */
        zt_zjob *j = zslot(s, s->jobs_begun - 1);
        if (len) memcpy(j->raw + w->cur_written, data, len); /* raw is NULL for an empty tensor */
        return TBX_OK;
    }
    st = tbx_out_pwrite(&w->out, t->offset + w->cur_written, data, len, err);
    if (st != TBX_OK) return st;
    zt_hash_update(&s->raw_hash, data, len);
    return TBX_OK;
}

tbx_status zt_w_tensor_done(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    zt_wstate *s;
    tbx_status st = wbegin(w, &s, err);
    if (st != TBX_OK) return st;
    size_t ti = (size_t)(t - w->tensors);
    st = dense_reserve(w, s, ti + 1, err);
    if (st != TBX_OK) return st;
    if (tbx_writer_tensor_quant_(w, ti)) return qg_done(w, s, t, err);
    if (s->cur != (int64_t)ti) { /* no byte arrived: an empty tensor */
        st = dense_begin(w, s, t, err);
        if (st != TBX_OK) return st;
    }
    s->cur = -1;
    if (s->zs_on) return zstream_done(w, s, t, err);
    if (s->level > 0) { /* to a worker; written when committed */
        tbx_pool_submit(s->pool, &zslot(s, s->jobs_begun - 1)->task);
        return TBX_OK;
    }
    dense_set(w, s, ti, t->offset, t->nbytes, false);
    if (s->ddig) set_digest(s->ddig[ti], &s->raw_hash);
    zt_hash_free(&s->raw_hash);
    s->pos = t->offset + t->nbytes;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Manifest                                                                                    */
/* ------------------------------------------------------------------------------------------ */
typedef struct zt_oref {
    const char *name;
    size_t name_len;
    const uint64_t *shape;
    uint32_t ndim;
    int layout;
    uint32_t ncomp;
    const zt_wcomp *comp;        /* extras; NULL for a dense tensor (dense_ti) */
    size_t dense_ti;
    const tbx_value *own_attrs;  /* from the extras (quantized_group) */
    const tbx_value *meta_attrs; /* from a "ztensor.attributes.<name>" metadata map */
} zt_oref;

static int oref_cmp(const void *a, const void *b) {
    const zt_oref *x = a, *y = b;
    return zt_key_cmp(x->name, x->name_len, y->name, y->name_len);
}

static const char *const zt_wlayout_names[4] = {"dense", "sparse_csr", "sparse_coo",
                                                "quantized_group"};

static void put_component(zt_buf *b, const zt_wcomp *c) {
    const zt_dtype *zd = zt_dtype_by_tbx(c->dtype);
    uint64_t n = 3 + (c->digest[0] != 0) + (c->enc == TBX_ENC_ZSTD);
    zt_put_head(b, 5, n);
    zt_put_textz(b, "dtype");
    zt_put_textz(b, zd ? zd->name : "?");
    if (c->digest[0]) {
        zt_put_textz(b, "digest");
        zt_put_textz(b, c->digest);
    }
    zt_put_textz(b, "length");
    zt_put_head(b, 0, c->length);
    zt_put_textz(b, "offset");
    zt_put_head(b, 0, c->offset);
    if (c->enc == TBX_ENC_ZSTD) {
        zt_put_textz(b, "encoding");
        zt_put_textz(b, "zstd");
    }
}

/* ---- what the reader counts ------------------------------------------------------------- */
/* The reader (ztensor_cbor.c, zt_value) charges a budget of max(1000000, manifest bytes / 8)
 * for the attribute values it must keep as value nodes: one per value, one per map key, one
 * per array element that cannot be stored packed (scalars of one wire type) or compactly
 * (an array of only strings), plus the elements already held when an array turns mixed. The
 * writer counts the same on what it encodes and refuses a manifest the reader would refuse. */

/* The scalar type the reader sees for a value of type t encoded by zt_put_value (`neg`: the
 * value is a negative integer); TBX_V_NULL: not a scalar there (null, text, bytes, containers). */
static tbx_value_type wire_scalar(tbx_value_type t, bool neg) {
    switch (t) {
    case TBX_V_BOOL: return TBX_V_BOOL;
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64: return TBX_V_U64;
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64:
        return neg ? TBX_V_I64 : TBX_V_U64;
    case TBX_V_F16: return TBX_V_F16;
    case TBX_V_BF16: case TBX_V_F32: return TBX_V_F32;
    case TBX_V_F64: return TBX_V_F64;
    default: return TBX_V_NULL;
    }
}

/* Is packed element i of array v a negative integer? */
static bool packed_neg(const tbx_value *v, size_t i) {
    const uint8_t *p = (const uint8_t *)v->v.a.packed + i * tbx_value_scalar_size(v->elem);
    switch (v->elem) {
    case TBX_V_I8: { int8_t x; memcpy(&x, p, 1); return x < 0; }
    case TBX_V_I16: { int16_t x; memcpy(&x, p, 2); return x < 0; }
    case TBX_V_I32: { int32_t x; memcpy(&x, p, 4); return x < 0; }
    case TBX_V_I64: { int64_t x; memcpy(&x, p, 8); return x < 0; }
    default: return false;
    }
}

/* Is element i of array v (packed, or `item`) an unsigned value above INT64_MAX? */
static bool elem_big(const tbx_value *v, size_t i, const tbx_value *item) {
    if (item) return (item->type == TBX_V_U64) && item->v.u > (uint64_t)INT64_MAX;
    if (v->elem != TBX_V_U64) return false;
    uint64_t u;
    memcpy(&u, (const uint8_t *)v->v.a.packed + i * 8, 8);
    return u > (uint64_t)INT64_MAX;
}

static uint64_t reader_charge(const tbx_value *v, uint32_t depth) {
    uint64_t n = 1;
    if (depth > ZT_HARD_DEPTH) return n; /* refused by zt_check_value */
    if (v->type == TBX_V_MAP) {
        for (size_t i = 0; i < v->v.a.n; i++) n += 1 + reader_charge(v->v.a.items[i], depth + 1);
        return n;
    }
    if (v->type != TBX_V_ARRAY) return n;
    enum { EMPTY, COMPACT, PACKED, ITEMS } mode = EMPTY;
    tbx_value_type ptype = TBX_V_NULL;
    bool big = false; /* a packed unsigned element above INT64_MAX (no signed one may join) */
    for (size_t i = 0; i < v->v.a.n; i++) {
        const tbx_value *item = NULL;
        bool text;
        tbx_value_type st;
        if (v->v.a.packed) {
            text = false;
            st = wire_scalar(v->elem, packed_neg(v, i));
        } else if (v->v.a.soff) {
            text = true;
            st = TBX_V_NULL;
        } else {
            item = v->v.a.items[i];
            text = item->type == TBX_V_STRING;
            bool sgn = item->type == TBX_V_I8 || item->type == TBX_V_I16 ||
                       item->type == TBX_V_I32 || item->type == TBX_V_I64;
            st = wire_scalar(item->type, sgn && item->v.i < 0);
        }
        if (text && (mode == EMPTY || mode == COMPACT)) { mode = COMPACT; continue; }
        if (mode == COMPACT) { n += i; mode = ITEMS; } /* the strings become value nodes */
        if (st != TBX_V_NULL) {
            /* the reader packs unsigned and negative integers together as I64 while every
             * unsigned one fits (ztensor_cbor.c int_packs) */
            bool eb = st == TBX_V_U64 && elem_big(v, i, item);
            if (mode == PACKED && ptype == TBX_V_I64 && st == TBX_V_U64 && !eb) st = TBX_V_I64;
            if (mode == PACKED && ptype == TBX_V_U64 && st == TBX_V_I64 && !big) ptype = TBX_V_I64;
            if (mode == EMPTY) { mode = PACKED; ptype = st; big = eb; }
            else if (mode == PACKED && ptype == st) big = big || eb;
            else if (!(mode == PACKED && ptype == st)) {
                n += 1 + (mode == PACKED ? i : 0);
                mode = ITEMS;
            }
        } else {
            n += item ? reader_charge(item, depth + 1) : 1;
            mode = ITEMS;
        }
    }
    return n;
}

/* An object's attributes: the union of its own (which win) and the metadata map. *charge gets
 * what the reader counts for them. */
static tbx_status put_attrs(zt_buf *b, const tbx_alloc *al, const zt_oref *o, uint64_t *charge,
                            tbx_error *err) {
    if (!o->meta_attrs) {
        *charge = reader_charge(o->own_attrs, 0);
        return zt_put_value(b, o->own_attrs, err);
    }
    if (!o->own_attrs) {
        *charge = reader_charge(o->meta_attrs, 0);
        return zt_put_value(b, o->meta_attrs, err);
    }
    tbx_value *m = tbx_val_clone(al, o->own_attrs);
    if (!m) return tbx_err_nomem(err, "attributes");
    tbx_status st = TBX_OK;
    const tbx_value *x = o->meta_attrs;
    for (size_t i = 0; i < x->v.a.n && st == TBX_OK; i++) {
        bool have = false;
        for (size_t j = 0; j < o->own_attrs->v.a.n; j++)
            if (zt_key_cmp(x->v.a.keys[i], x->v.a.key_lens[i], o->own_attrs->v.a.keys[j],
                           o->own_attrs->v.a.key_lens[j]) == 0)
                have = true;
        if (have) continue;
        tbx_value *c = tbx_val_clone(al, x->v.a.items[i]);
        st = c ? tbx_value_map_put(m, x->v.a.keys[i], x->v.a.key_lens[i], c) : TBX_E_NOMEM;
    }
    if (st == TBX_OK) {
        *charge = reader_charge(m, 0);
        st = zt_put_value(b, m, err);
    } else {
        st = tbx_err_nomem(err, "attributes");
    }
    tbx_val_free(m);
    return st;
}

static bool is_obj_attr_key(const char *k, size_t n) {
    size_t p = strlen(ZT_META_OBJ_PREFIX);
    return n >= p && memcmp(k, ZT_META_OBJ_PREFIX, p) == 0;
}

typedef struct zt_mref { const tbx_meta_entry *e; } zt_mref;

static int mref_cmp(const void *a, const void *b) {
    const zt_mref *x = a, *y = b;
    return zt_key_cmp(x->e->key, x->e->key_len, y->e->key, y->e->key_len);
}

/* Object i of the manifest, in canonical order: objs[i] when the objects had to be sorted, else
 * dense tensor i itself (its metadata attributes, if any, are the next of `attrs`). */
static int qg_cmp(const void *a, const void *b) {
    const zt_wqg *x = a, *y = b;
    return x->ti < y->ti ? -1 : x->ti > y->ti;
}

static zt_oref obj_at(const tbx_writer *w, const zt_wstate *s, const zt_oref *objs, size_t i) {
    if (objs) return objs[i];
    const tbx_wtensor *t = &w->tensors[i];
    const zt_wqg key = {.ti = i};
    const zt_wqg *qg = s->nqgs ? bsearch(&key, s->qgs, s->nqgs, sizeof *s->qgs, qg_cmp) : NULL;
    if (qg)
        return (zt_oref){t->name, t->name_len, t->shape, t->ndim, TBX_LAYOUT_QUANT_GROUP, 3,
                         qg->comp, i, qg->attrs, NULL};
    return (zt_oref){t->name, t->name_len, t->shape, t->ndim, TBX_LAYOUT_DENSE, 1, NULL, i,
                     NULL, NULL};
}

/* One object of the manifest: name, then its map. */
static tbx_status put_object(zt_buf *b, const tbx_writer *w, const zt_wstate *s,
                             const zt_oref *o, uint64_t *charge, tbx_error *err) {
    zt_wcomp dense;
    const zt_wcomp *comp = o->comp;
    if (!comp) {
        const tbx_wtensor *t = &w->tensors[o->dense_ti];
        const uint64_t zl = s->zlen ? s->zlen[o->dense_ti] : 0;
        memset(&dense, 0, sizeof dense);
        dense.role = ZT_R_DATA;
        dense.dtype = t->dtype;
        dense.offset = t->offset;
        dense.length = zl ? zl : t->nbytes;
        dense.enc = zl ? TBX_ENC_ZSTD : TBX_ENC_RAW;
        if (s->ddig) memcpy(dense.digest, s->ddig[o->dense_ti], sizeof dense.digest);
        comp = &dense;
    }
    zt_put_text(b, o->name, o->name_len);
    bool attrs = o->own_attrs || o->meta_attrs;
    zt_put_head(b, 5, attrs ? 4 : 3);
    zt_put_textz(b, "shape");
    zt_put_head(b, 4, o->ndim);
    for (uint32_t d = 0; d < o->ndim; d++) zt_put_head(b, 0, o->shape[d]);
    zt_put_textz(b, "format");
    zt_put_textz(b, zt_wlayout_names[o->layout]);
    if (attrs) {
        zt_put_textz(b, "attributes");
        tbx_status st = put_attrs(b, &w->al, o, charge, err);
        if (st != TBX_OK) return st;
    }
    zt_put_textz(b, "components");
    /* roles in canonical key order */
    uint32_t idx[3] = {0, 1, 2};
    for (uint32_t x = 1; x < o->ncomp; x++)
        for (uint32_t y = x; y > 0; y--) {
            const char *a = zt_role_names[comp[idx[y - 1]].role];
            const char *c = zt_role_names[comp[idx[y]].role];
            if (zt_key_cmp(a, strlen(a), c, strlen(c)) > 0) {
                uint32_t tmp = idx[y];
                idx[y] = idx[y - 1];
                idx[y - 1] = tmp;
            }
        }
    zt_put_head(b, 5, o->ncomp);
    for (uint32_t x = 0; x < o->ncomp; x++) {
        const zt_wcomp *c = &comp[idx[x]];
        zt_put_textz(b, zt_role_names[c->role]);
        put_component(b, c);
    }
    return TBX_OK;
}

typedef struct zt_aref { size_t ti; const tbx_value *v; } zt_aref;

static int aref_cmp(const void *a, const void *b) {
    const zt_aref *x = a, *y = b;
    return x->ti < y->ti ? -1 : x->ti > y->ti;
}

/* The manifest is encoded straight to the file after the last blob, in pieces (zt_buf with an
 * output): a manifest of a million objects is never held whole. Objects come in canonical key
 * order; when the dense tensors were declared in that order already and there are no extras (a
 * conversion from a sorted file), no table of objects is built. */
tbx_status zt_w_finish(tbx_writer *w, tbx_error *err) {
    zt_wstate *s;
    tbx_status st = wbegin(w, &s, err);
    if (st == TBX_OK) st = zjobs_flush(w, s, err);
    if (st != TBX_OK) return st;
    if (s->nqgs) qsort(s->qgs, s->nqgs, sizeof *s->qgs, qg_cmp);
    size_t nobj = w->ntensors + s->nextras;
    bool sorted = s->nextras == 0;
    for (size_t i = 1; sorted && i < w->ntensors; i++)
        sorted = zt_key_cmp(w->tensors[i - 1].name, w->tensors[i - 1].name_len,
                            w->tensors[i].name, w->tensors[i].name_len) < 0;
    zt_oref *objs = NULL;
    zt_aref *arefs = NULL;
    size_t narefs = 0;
    zt_mref *globals = tbx_calloc(&w->al, w->nmeta ? w->nmeta : 1, sizeof *globals);
    zt_buf b = {.al = &w->al, .out = &w->out, .base = s->pos, .err = err};
    if (!globals) { st = tbx_err_nomem(err, "manifest"); goto done; }
    if (w->ntensors && ((s->level > 0 && s->cap_zlen < w->ntensors) ||
                        (s->digest != ZT_H_NONE && s->cap_ddig < w->ntensors))) {
        st = tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "writer", "tensor table missing");
        goto done;
    }
    if (!sorted) {
        objs = tbx_calloc(&w->al, nobj, sizeof *objs);
        if (!objs) { st = tbx_err_nomem(err, "manifest"); goto done; }
        for (size_t i = 0; i < w->ntensors; i++) objs[i] = obj_at(w, s, NULL, i);
        for (size_t i = 0; i < s->nextras; i++) {
            const zt_wobj *o = &s->extras[i];
            objs[w->ntensors + i] = (zt_oref){o->name, o->name_len, o->shape, o->ndim,
                                              o->layout, o->ncomp, o->comp, 0, o->attrs, NULL};
        }
        qsort(objs, nobj, sizeof *objs, oref_cmp);
    } else {
        arefs = tbx_calloc(&w->al, w->nmeta ? w->nmeta : 1, sizeof *arefs);
        if (!arefs) { st = tbx_err_nomem(err, "manifest"); goto done; }
    }
    /* metadata: object attributes or global attributes */
    size_t nglob = 0;
    size_t plen = strlen(ZT_META_OBJ_PREFIX);
    for (size_t i = 0; i < w->nmeta; i++) {
        const tbx_meta_entry *e = &w->meta[i];
        if (is_obj_attr_key(e->key, e->key_len) && e->value->type == TBX_V_MAP) {
            if (objs) {
                zt_oref key = {.name = e->key + plen, .name_len = e->key_len - plen};
                zt_oref *o = bsearch(&key, objs, nobj, sizeof *objs, oref_cmp);
                if (o) { o->meta_attrs = e->value; continue; }
            } else {
                uint64_t ti;
                if (tbx_writer_find_tensor_(w, e->key + plen, e->key_len - plen, &ti)) {
                    arefs[narefs++] = (zt_aref){(size_t)ti, e->value};
                    continue;
                }
            }
        }
        globals[nglob++].e = e;
    }
    qsort(globals, nglob, sizeof *globals, mref_cmp);
    if (arefs) qsort(arefs, narefs, sizeof *arefs, aref_cmp);

    zt_put_head(&b, 5, nglob ? 3 : 2);
    zt_put_textz(&b, "objects");
    zt_put_head(&b, 5, nobj);
    /* what the reader will count (see reader_charge), and its largest contributor */
    uint64_t charges = 0, top = 0;
    const char *top_name = NULL;
    size_t top_len = 0;
    bool top_obj = false;
    for (size_t i = 0, a = 0; i < nobj && st == TBX_OK && !b.oom; i++) {
        zt_oref o = obj_at(w, s, objs, i);
        if (!objs && a < narefs && arefs[a].ti == i) o.meta_attrs = arefs[a++].v;
        uint64_t c = 0;
        st = put_object(&b, w, s, &o, &c, err);
        charges += c;
        if (c > top) { top = c; top_name = o.name; top_len = o.name_len; top_obj = true; }
    }
    if (st != TBX_OK) goto done;
    zt_put_textz(&b, "version");
    zt_put_textz(&b, "1.1.0");
    if (nglob) {
        zt_put_textz(&b, "attributes");
        zt_put_head(&b, 5, nglob);
        for (size_t i = 0; i < nglob && st == TBX_OK; i++) {
            const tbx_meta_entry *e = globals[i].e;
            zt_put_text(&b, e->key, e->key_len);
            st = zt_put_value(&b, e->value, err);
            uint64_t c = reader_charge(e->value, 0);
            charges += c;
            if (c > top) { top = c; top_name = e->key; top_len = e->key_len; top_obj = false; }
        }
        if (st != TBX_OK) goto done;
    }
    zt_buf_flush(&b);
    if (b.oom) {
        st = b.wst != TBX_OK ? b.wst : tbx_err_nomem(err, "manifest");
        goto done;
    }
    uint64_t mlen = b.base - s->pos;
    if (mlen > ZT_MAX_MANIFEST) {
        st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "manifest",
                     "manifest of %" PRIu64 " bytes exceeds the 1 GiB zTensor allows", mlen);
        goto done;
    }
    const uint64_t budget = mlen / 8 > 1000000 ? mlen / 8 : 1000000; /* the reader's */
    if (charges > budget) {
        char q[96];
        tbx_quote_bytes(q, sizeof q, top_name ? top_name : "", top_len, 64);
        st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "attributes",
                     "%s \"%s\" holds %" PRIu64 " values that cannot be stored packed or "
                     "compactly (%" PRIu64 " in all); zTensor readers keep at most %" PRIu64
                     " for a manifest of %" PRIu64 " bytes (one per 8 bytes beyond the first "
                     "1000000)", top_obj ? "the attributes of tensor" : "metadata", q, top,
                     charges, budget, mlen);
        goto done;
    }
    /* and the reader's amplification budget with the default limits (tbx_limits
     * meta_budget_*): each of those value nodes costs a reader ~150 bytes, whatever its size
     * in the manifest */
    tbx_limits dl;
    tbx_limits_default(&dl);
    uint64_t node_bytes = charges * (sizeof(tbx_value) + TBX_HEAP_OVERHEAD + sizeof(void *));
    uint64_t total = s->pos + mlen + 16;
    if (node_bytes > dl.meta_budget_per_byte * total + dl.meta_budget_base) {
        char q[96];
        tbx_quote_bytes(q, sizeof q, top_name ? top_name : "", top_len, 64);
        st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "attributes",
                     "%s \"%s\" holds %" PRIu64 " values that cannot be stored packed or "
                     "compactly (%" PRIu64 " in all): a reader would hold %" PRIu64 " bytes for "
                     "them, past the default budget of a %" PRIu64 "-byte file (meta_budget_"
                     "per_byte x size + meta_budget_base)", top_obj ? "the attributes of tensor"
                     : "metadata", q, top, charges, node_bytes, total);
        goto done;
    }
    uint8_t foot[16];
    tbx_st64(foot, mlen);
    memcpy(foot + 8, ZT_MAGIC, 8);
    st = tbx_out_pwrite(&w->out, s->pos + mlen, foot, 16, err);
    if (st == TBX_OK) w->end = s->pos + mlen + 16;
done:
    zt_buf_free(&b);
    tbx_free(&w->al, objs, objs ? nobj * sizeof *objs : 0);
    tbx_free(&w->al, arefs, arefs ? (w->nmeta ? w->nmeta : 1) * sizeof *arefs : 0);
    tbx_free(&w->al, globals, (w->nmeta ? w->nmeta : 1) * sizeof *globals);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Extras: sparse and quantized_group tensors                                                  */
/* ------------------------------------------------------------------------------------------ */
static tbx_status extra_check(tbx_writer *w, const char *name, zt_wstate **out, tbx_error *err) {
    if (!w) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "writer", "NULL writer");
    if (w->format != TBX_FORMAT_ZTENSOR)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "writer",
                       "the writer does not write a zTensor file");
    if (w->state == TBX_WS_DONE)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "writer", "writer already finished");
    if (w->current >= 0)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "writer",
                       "tensor \"%s\" is half written; finish it first",
                       w->tensors[w->current].name);
    if (!name || !*name)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor.name", "empty tensor name");
    size_t n = strlen(name), bad = 0;
    char q[96];
    tbx_quote_bytes(q, sizeof q, name, n, 64);
    if (!tbx_utf8_valid(name, n, &bad))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.name",
                       "tensor name \"%s\" is not valid UTF-8 (byte %zu)", q, bad);
    zt_wstate *s;
    tbx_status st = wbegin(w, &s, err);
    if (st == TBX_OK) st = zjobs_flush(w, s, err); /* dense tensors compressing go first */
    if (st != TBX_OK) return st;
    if (name_taken(w, s, name, n))
        return tbx_err(err, TBX_E_DUPLICATE, TBX_NO_OFFSET, "tensor.name",
                       "duplicate tensor name \"%s\"", q);
    *out = s;
    return TBX_OK;
}

/* Adds the object record (copies name and shape; takes attrs). */
static tbx_status extra_add(tbx_writer *w, zt_wstate *s, const char *name, const uint64_t *shape,
                            uint32_t ndim, int layout, const zt_wcomp *comps, uint32_t ncomp,
                            tbx_value *attrs, tbx_error *err) {
    if (!tbx_grow(&w->al, (void **)&s->extras, &s->cap_extras, s->nextras + 1, sizeof *s->extras)) {
        tbx_val_free(attrs);
        return tbx_err_nomem(err, "zTensor object table");
    }
    zt_wobj *o = &s->extras[s->nextras];
    memset(o, 0, sizeof *o);
    o->name_len = strlen(name);
    o->name = tbx_memdup0(&w->al, name, o->name_len);
    o->shape = tbx_malloc(&w->al, ndim * sizeof *shape);
    if (!o->name || !o->shape) {
        tbx_free(&w->al, o->name, o->name_len + 1);
        tbx_free(&w->al, o->shape, ndim * sizeof *shape);
        tbx_val_free(attrs);
        return tbx_err_nomem(err, "zTensor object");
    }
    if (ndim) memcpy(o->shape, shape, ndim * sizeof *shape);
    o->ndim = ndim;
    o->layout = layout;
    o->ncomp = ncomp;
    memcpy(o->comp, comps, ncomp * sizeof *comps);
    o->attrs = attrs;
    tbx_status st = tbx_names_insert(&s->extra_names, s->nextras, NULL);
    if (st != TBX_OK) {
        tbx_free(&w->al, o->name, o->name_len + 1);
        tbx_free(&w->al, o->shape, ndim * sizeof *shape);
        tbx_val_free(attrs);
        return st == TBX_E_NOMEM ? tbx_err_nomem(err, "name index")
                                 : tbx_err(err, st, TBX_NO_OFFSET, "tensor.name", "duplicate name");
    }
    s->nextras++;
    return TBX_OK;
}

static bool host_le(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* u64 index arrays are written little-endian (converted in chunks on big-endian hosts). */
static tbx_status blob_write_u64(tbx_writer *w, zt_wstate *s, const uint64_t *v, uint64_t n,
                                 zt_wcomp *c, tbx_error *err) {
    uint64_t bytes;
    if (!tbx_mul_u64(n, 8, &bytes) || bytes > SIZE_MAX)
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "index array too large");
    if (host_le() || n == 0) return blob_write(w, s, v, bytes, c, err);
    uint8_t *tmp = tbx_malloc(&w->al, (size_t)bytes);
    if (!tmp) return tbx_err_nomem(err, "index array");
    for (uint64_t i = 0; i < n; i++) tbx_st64(tmp + 8 * i, v[i]);
    tbx_status st = blob_write(w, s, tmp, bytes, c, err);
    tbx_free(&w->al, tmp, (size_t)bytes);
    return st;
}

static tbx_status values_size(const char *q, tbx_dtype dt, uint64_t n, uint64_t *bytes,
                              const zt_dtype **zd, tbx_error *err) {
    *zd = zt_dtype_by_tbx(dt);
    if (!*zd) {
        const tbx_dtype_info *di = tbx_dtype_core_get(dt);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": dtype %s has no zTensor equivalent", q,
                       di ? di->name : "(invalid)");
    }
    if (!tbx_mul_u64(n, (*zd)->size, bytes) || *bytes > SIZE_MAX)
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "tensor \"%s\": too large", q);
    return TBX_OK;
}

tbx_status tbx_ztensor_writer_add_csr(tbx_writer *w, const char *name, tbx_dtype dtype,
                                      const uint64_t shape[2], const void *values, uint64_t nnz,
                                      const uint64_t *indices, const uint64_t *indptr,
                                      tbx_error *err) {
    zt_wstate *s;
    tbx_status st = extra_check(w, name, &s, err);
    if (st != TBX_OK) return st;
    char q[96];
    tbx_quote_bytes(q, sizeof q, name, strlen(name), 64);
    if (!shape || !indptr || (nnz && (!values || !indices)))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": NULL shape, values, indices or indptr", q);
    uint64_t rows = shape[0], cols = shape[1], nelems, vbytes;
    const zt_dtype *zd;
    if (!tbx_mul_u64(rows, cols, &nelems) || rows == UINT64_MAX)
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": shape overflows", q);
    if (nnz > nelems)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": %" PRIu64 " entries exceed %" PRIu64 " elements", q, nnz,
                       nelems);
    st = values_size(q, dtype, nnz, &vbytes, &zd, err);
    if (st != TBX_OK) return st;
    if (indptr[0] != 0 || indptr[rows] != nnz)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "indptr",
                       "tensor \"%s\": indptr must start at 0 and end at nnz = %" PRIu64, q, nnz);
    for (uint64_t r = 0; r < rows; r++)
        if (indptr[r + 1] < indptr[r])
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "indptr",
                           "tensor \"%s\": indptr[%" PRIu64 "] < indptr[%" PRIu64 "]", q, r + 1, r);
    for (uint64_t k = 0; k < nnz; k++)
        if (indices[k] >= cols)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "indices",
                           "tensor \"%s\": indices[%" PRIu64 "] = %" PRIu64 " >= cols %" PRIu64,
                           q, k, indices[k], cols);
    zt_wcomp c[3];
    memset(c, 0, sizeof c);
    c[0].role = ZT_R_VALUES;
    c[0].dtype = dtype;
    c[1].role = ZT_R_INDICES;
    c[1].dtype = TBX_DT_U64;
    c[2].role = ZT_R_INDPTR;
    c[2].dtype = TBX_DT_U64;
    st = blob_write(w, s, values, vbytes, &c[0], err);
    if (st == TBX_OK) st = blob_write_u64(w, s, indices, nnz, &c[1], err);
    if (st == TBX_OK) st = blob_write_u64(w, s, indptr, rows + 1, &c[2], err);
    if (st != TBX_OK) return st;
    return extra_add(w, s, name, shape, 2, TBX_LAYOUT_SPARSE_CSR, c, 3, NULL, err);
}

tbx_status tbx_ztensor_writer_add_coo(tbx_writer *w, const char *name, tbx_dtype dtype,
                                      const uint64_t *shape, uint32_t ndim, const void *values,
                                      uint64_t nnz, const uint64_t *coords, tbx_error *err) {
    zt_wstate *s;
    tbx_status st = extra_check(w, name, &s, err);
    if (st != TBX_OK) return st;
    char q[96];
    tbx_quote_bytes(q, sizeof q, name, strlen(name), 64);
    if (ndim == 0 || !shape || (nnz && (!values || !coords)))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": sparse_coo needs ndim >= 1, a shape, values and coords", q);
    uint64_t nelems = 1, ncoords, vbytes;
    for (uint32_t d = 0; d < ndim; d++)
        if (!tbx_mul_u64(nelems, shape[d], &nelems))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": shape overflows", q);
    if (nnz > nelems || !tbx_mul_u64(nnz, ndim, &ncoords))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": %" PRIu64 " entries exceed %" PRIu64 " elements", q, nnz,
                       nelems);
    const zt_dtype *zd;
    st = values_size(q, dtype, nnz, &vbytes, &zd, err);
    if (st != TBX_OK) return st;
    for (uint32_t d = 0; d < ndim; d++)
        for (uint64_t k = 0; k < nnz; k++)
            if (coords[(uint64_t)d * nnz + k] >= shape[d])
                return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "coords",
                               "tensor \"%s\": coordinate %u of entry %" PRIu64 " is %" PRIu64
                               ", dimension is %" PRIu64, q, d, k, coords[(uint64_t)d * nnz + k],
                               shape[d]);
    zt_wcomp c[2];
    memset(c, 0, sizeof c);
    c[0].role = ZT_R_VALUES;
    c[0].dtype = dtype;
    c[1].role = ZT_R_COORDS;
    c[1].dtype = TBX_DT_U64;
    st = blob_write(w, s, values, vbytes, &c[0], err);
    if (st == TBX_OK) st = blob_write_u64(w, s, coords, ncoords, &c[1], err);
    if (st != TBX_OK) return st;
    return extra_add(w, s, name, shape, ndim, TBX_LAYOUT_SPARSE_COO, c, 2, NULL, err);
}

static tbx_status attr_put_u64(tbx_value *m, const char *k, uint64_t v) {
    tbx_value *x = tbx_val_new(m->al, TBX_V_U64);
    if (!x) return TBX_E_NOMEM;
    x->v.u = v;
    return tbx_value_map_put(m, k, strlen(k), x);
}

tbx_status tbx_ztensor_writer_add_qgroup(tbx_writer *w, const char *name, const uint64_t *shape,
                                         uint32_t ndim, const tbx_ztensor_qgroup *qg,
                                         tbx_error *err) {
    zt_wstate *s;
    tbx_status st = extra_check(w, name, &s, err);
    if (st != TBX_OK) return st;
    char q[96];
    tbx_quote_bytes(q, sizeof q, name, strlen(name), 64);
    if (!qg || (ndim && !shape))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": NULL shape or parameters", q);
    const zt_dtype *wd = zt_dtype_by_tbx(qg->word_dtype), *sd = zt_dtype_by_tbx(qg->scale_dtype);
    bool word_ok = wd && wd->dtype != TBX_DT_BOOL && wd->dtype != TBX_DT_C64 &&
                   wd->dtype != TBX_DT_C128 && (qg->word_dtype == TBX_DT_U8 ||
                   qg->word_dtype == TBX_DT_U16 || qg->word_dtype == TBX_DT_U32 ||
                   qg->word_dtype == TBX_DT_U64 || qg->word_dtype == TBX_DT_I8 ||
                   qg->word_dtype == TBX_DT_I16 || qg->word_dtype == TBX_DT_I32 ||
                   qg->word_dtype == TBX_DT_I64);
    bool scale_ok = sd && (qg->scale_dtype == TBX_DT_F16 || qg->scale_dtype == TBX_DT_BF16 ||
                           qg->scale_dtype == TBX_DT_F32 || qg->scale_dtype == TBX_DT_F64);
    if (!word_ok || !scale_ok)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": word dtype must be an integer, scale dtype a float", q);
    uint64_t wbits = 8ull * wd->size;
    uint64_t per = qg->per_word ? qg->per_word : (qg->bits ? wbits / qg->bits : 0);
    if (qg->bits < 1 || qg->bits > 32 || per == 0 || per * qg->bits > wbits || qg->group_size < 1)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": bits %u x %" PRIu64 " codes do not fit a %s word, or "
                       "group_size is 0", q, qg->bits, per, wd->name);
    uint64_t nelems = 1, rows = 1, cols = ndim ? shape[ndim - 1] : 1;
    for (uint32_t d = 0; d < ndim; d++)
        if (!tbx_mul_u64(nelems, shape[d], &nelems))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": shape overflows", q);
    for (uint32_t d = 0; d + 1 < ndim; d++)
        if (!tbx_mul_u64(rows, shape[d], &rows))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": shape overflows", q);
    uint64_t gpr = cols / qg->group_size + (cols % qg->group_size != 0);
    uint64_t words = nelems / per + (nelems % per != 0), groups, wbytes, sbytes;
    if (!tbx_mul_u64(rows, gpr, &groups) || !tbx_mul_u64(words, wd->size, &wbytes) ||
        !tbx_mul_u64(groups, sd->size, &sbytes) || wbytes > SIZE_MAX || sbytes > SIZE_MAX)
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "tensor \"%s\": too large", q);
    if ((wbytes && !qg->packed) || (sbytes && (!qg->scales || !qg->zeros)))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": NULL packed, scales or zeros", q);
    tbx_value *attrs = tbx_val_new(&w->al, TBX_V_MAP);
    if (!attrs) return tbx_err_nomem(err, "attributes");
    char packing[48];
    snprintf(packing, sizeof packing, "%" PRIu64 "_per_%s", per, wd->name);
    tbx_value *pk = tbx_val_string(&w->al, TBX_V_STRING, packing, strlen(packing));
    st = pk ? tbx_value_map_put(attrs, "packing", 7, pk) : TBX_E_NOMEM;
    if (st == TBX_OK) st = attr_put_u64(attrs, "bits", qg->bits);
    if (st == TBX_OK) st = attr_put_u64(attrs, "group_size", qg->group_size);
    if (st != TBX_OK) { tbx_val_free(attrs); return tbx_err_nomem(err, "attributes"); }
    zt_wcomp c[3];
    memset(c, 0, sizeof c);
    c[0].role = ZT_R_PACKED;
    c[0].dtype = qg->word_dtype;
    c[1].role = ZT_R_SCALES;
    c[1].dtype = qg->scale_dtype;
    c[2].role = ZT_R_ZEROS;
    c[2].dtype = qg->scale_dtype;
    st = blob_write(w, s, qg->packed, wbytes, &c[0], err);
    if (st == TBX_OK) st = blob_write(w, s, qg->scales, sbytes, &c[1], err);
    if (st == TBX_OK) st = blob_write(w, s, qg->zeros, sbytes, &c[2], err);
    if (st != TBX_OK) { tbx_val_free(attrs); return st; }
    return extra_add(w, s, name, shape, ndim, TBX_LAYOUT_QUANT_GROUP, c, 3, attrs, err);
}

/* ------------------------------------------------------------------------------------------ */
/* quantized_group through the generic API (tbx_writer_add_quant_tensor, tbx_convert)          */
/* ------------------------------------------------------------------------------------------ */

/* The geometry of a quantized_group description the writer stores exactly. */
typedef struct zt_qgeom {
    const zt_dtype *wd, *sd, *zd;
    uint64_t bits, per, group, words, groups;
} zt_qgeom;

static bool qg_word_dtype(tbx_dtype dt) {
    return dt == TBX_DT_U8 || dt == TBX_DT_U16 || dt == TBX_DT_U32 || dt == TBX_DT_U64 ||
           dt == TBX_DT_I8 || dt == TBX_DT_I16 || dt == TBX_DT_I32 || dt == TBX_DT_I64;
}

static bool qg_float_dtype(tbx_dtype dt) {
    return dt == TBX_DT_F16 || dt == TBX_DT_BF16 || dt == TBX_DT_F32 || dt == TBX_DT_F64;
}

/* Can a quantized_group object hold description q of tensor t exactly (what the reader makes
 * of one: linear, unsigned codes packed in integer words, float scales and zeros per group of
 * a row in components 1 and 2, params codes_per_word)? */
static tbx_status qg_geom(const tbx_wtensor *t, const tbx_quant_info *q, const char *tq,
                          zt_qgeom *g, tbx_error *err) {
    const char *why = NULL, *field = "quant";
    tbx_status code = TBX_E_UNSUPPORTED;
    uint64_t per = 0;
    const tbx_value *pv = NULL; /* params "codes_per_word" (docs/formats/ztensor.md) */
    for (uint64_t i = 0; q->params && i < tbx_value_len(q->params); i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(q->params, i, &kl);
        if (k && kl == 14 && memcmp(k, "codes_per_word", 14) == 0) pv = tbx_value_at(q->params, i);
    }
    if (q->method != TBX_QUANT_LINEAR) {
        why = "zTensor stores linear quantization only, as quantized_group";
        field = "quant.method";
    } else if (!qg_word_dtype(q->code_dtype) || q->code_signed || q->bits < 1 || q->bits > 64) {
        why = "quantized_group codes are unsigned, packed in integer words";
        field = "quant.code_dtype";
    } else if (q->scale.scope != TBX_QSCOPE_GROUP || q->scale.component != 1 ||
               !qg_float_dtype(q->scale.dtype) || q->block_size < 1) {
        why = "quantized_group holds float scales per group of a row in component 1";
        field = "quant.scale";
    } else if (q->zero.scope != TBX_QSCOPE_GROUP || q->zero.component != 2 ||
               !qg_float_dtype(q->zero.dtype)) {
        why = "quantized_group holds float zero points per group of a row in component 2";
        field = "quant.zero";
    } else if (q->super_block_size) {
        why = "quantized_group has no super-blocks";
        field = "quant.super_block_size";
    } else if (q->domain != TBX_QDOMAIN_UNSPECIFIED || q->has_clip) {
        why = "quantized_group has no field for the quantization domain or clip range";
        field = q->has_clip ? "quant.clip" : "quant.domain";
        code = TBX_E_LOSSY;
    } else if (pv && (tbx_value_get_u64(pv, &per) != TBX_OK || per == 0)) {
        why = "params codes_per_word must be a positive integer";
        field = "quant.params";
    }
    if (why)
        return tbx_err(err, code, TBX_NO_OFFSET, field,
                       "tensor \"%s\": zTensor cannot store its %s quantization (%s)", tq,
                       tbx_quant_method_name(q->method), why);
    g->wd = zt_dtype_by_tbx(q->code_dtype);
    g->sd = zt_dtype_by_tbx(q->scale.dtype);
    g->zd = zt_dtype_by_tbx(q->zero.dtype);
    g->bits = q->bits;
    g->per = per ? per : 8u * g->wd->size / q->bits;
    g->group = q->block_size;
    if (g->per == 0 || g->per * g->bits > 8u * g->wd->size)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "quant.params",
                       "tensor \"%s\": %" PRIu64 " codes of %" PRIu64 " bits do not fit a %s "
                       "word", tq, g->per, g->bits, g->wd->name);
    uint64_t nelems = tbx_wt_nelems(t), rows = 1, cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    for (uint32_t d = 0; d + 1 < t->ndim; d++)
        if (!tbx_mul_u64(rows, t->shape[d], &rows))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": row count overflows", tq);
    uint64_t gpr = cols / g->group + (cols % g->group != 0);
    g->words = nelems / g->per + (nelems % g->per != 0);
    if (!tbx_mul_u64(rows, gpr, &g->groups))
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": group count overflows", tq);
    if (q->scale.count != g->groups || q->zero.count != g->groups)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "quant.scale",
                       "tensor \"%s\": %" PRIu64 " scales and %" PRIu64 " zero points for %"
                       PRIu64 " groups", tq, q->scale.count, q->zero.count, g->groups);
    return TBX_OK;
}

/* Bytes of the three components, in order. */
static bool qg_sizes(const zt_qgeom *g, uint64_t n[3]) {
    return tbx_mul_u64(g->words, g->wd->size, &n[0]) &&
           tbx_mul_u64(g->groups, g->sd->size, &n[1]) &&
           tbx_mul_u64(g->groups, g->zd->size, &n[2]);
}

tbx_status zt_w_check_quant(tbx_writer *w, tbx_wtensor *t, const tbx_quant_info *q,
                            tbx_error *err) {
    zt_wstate *s;
    tbx_status st = wstate(w, &s, err);
    if (st != TBX_OK) return st;
    char tq[96];
    tbx_quote_bytes(tq, sizeof tq, t->name, t->name_len, 64);
    zt_qgeom g;
    st = qg_geom(t, q, tq, &g, err);
    if (st != TBX_OK) return st;
    uint64_t n[3], total;
    if (!qg_sizes(&g, n) || !tbx_add_u64(n[0], n[1], &total) || !tbx_add_u64(total, n[2], &total))
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": byte size overflows 64 bits", tq);
    t->nbytes = total; /* the tensor's bytes: packed words, scales, zeros */
    return TBX_OK;
}

static tbx_status qg_data(tbx_writer *w, zt_wstate *s, tbx_wtensor *t, const void *data,
                          size_t len, tbx_error *err) {
    if (!s->qg_buf && t->nbytes) {
        if (t->nbytes > SIZE_MAX)
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "tensor too large");
        s->qg_buf = tbx_malloc(&w->al, (size_t)t->nbytes);
        if (!s->qg_buf) return tbx_err_nomem(err, "quantized_group tensor");
        s->qg_cap = (size_t)t->nbytes;
    }
    if (len) memcpy(s->qg_buf + w->cur_written, data, len); /* the core checked the range */
    return TBX_OK;
}

static tbx_status qg_done(tbx_writer *w, zt_wstate *s, tbx_wtensor *t, tbx_error *err) {
    const size_t ti = (size_t)(t - w->tensors);
    const tbx_quant_info *q = tbx_writer_tensor_quant_(w, ti);
    char tq[96];
    tbx_quote_bytes(tq, sizeof tq, t->name, t->name_len, 64);
    zt_qgeom g;
    uint64_t n[3];
    tbx_status st = qg_geom(t, q, tq, &g, err);
    if (st == TBX_OK && !qg_sizes(&g, n)) st = tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor", "too large");
    if (st == TBX_OK) st = zjobs_flush(w, s, err); /* dense tensors compressing go first */
    if (st == TBX_OK && !tbx_grow(&w->al, (void **)&s->qgs, &s->cap_qgs, s->nqgs + 1,
                                  sizeof *s->qgs))
        st = tbx_err_nomem(err, "quantized_group table");
    zt_wqg *e = st == TBX_OK ? &s->qgs[s->nqgs] : NULL;
    if (e) {
        memset(e, 0, sizeof *e);
        e->ti = ti;
        const int roles[3] = {ZT_R_PACKED, ZT_R_SCALES, ZT_R_ZEROS};
        const tbx_dtype dts[3] = {q->code_dtype, q->scale.dtype, q->zero.dtype};
        uint64_t at = 0;
        for (int k = 0; k < 3 && st == TBX_OK; k++) {
            e->comp[k].role = roles[k];
            e->comp[k].dtype = dts[k];
            st = blob_write(w, s, s->qg_buf ? s->qg_buf + at : NULL, n[k], &e->comp[k], err);
            at += n[k];
        }
    }
    tbx_free(&w->al, s->qg_buf, s->qg_cap);
    s->qg_buf = NULL;
    s->qg_cap = 0;
    if (st != TBX_OK) return st;
    tbx_value *attrs = tbx_val_new(&w->al, TBX_V_MAP);
    if (!attrs) return tbx_err_nomem(err, "attributes");
    char packing[48];
    snprintf(packing, sizeof packing, "%" PRIu64 "_per_%s", g.per, g.wd->name);
    tbx_value *pk = tbx_val_string(&w->al, TBX_V_STRING, packing, strlen(packing));
    st = pk ? tbx_value_map_put(attrs, "packing", 7, pk) : TBX_E_NOMEM;
    if (st == TBX_OK) st = attr_put_u64(attrs, "bits", g.bits);
    if (st == TBX_OK) st = attr_put_u64(attrs, "group_size", g.group);
    if (st != TBX_OK) { tbx_val_free(attrs); return tbx_err_nomem(err, "attributes"); }
    e->attrs = attrs;
    s->nqgs++;
    return TBX_OK;
}
