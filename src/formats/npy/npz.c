/*
 * npz.c - the .npz reader: a zip archive of .npy members (numpy.savez: stored; savez_compressed:
 * deflated), read through libzip (docs/formats/npy.md, "Why libzip").
 *
 * libzip reads the archive through a source of ours over the handle's tbx_source (pread, the
 * guarded mapping, memory or the caller's callback), opened with ZIP_CHECKCONS: every local
 * header is checked against its central directory entry and every member must lie before the
 * directory. Each member is one tensor, named by the member name without ".npy"; its .npy header
 * is parsed by npy.c's parser through the bounded cursor (a deflated member's through a cursor
 * over its decoded bytes, read as a stream).
 *
 * What libzip does not give is where a member's data starts: the reader learns it from the two
 * reads libzip makes when a member is opened (the local header's name and extra lengths at
 * offset+26, then the data) and checks it against the local header itself. A stored member's
 * array is then a raw component like any other format's (maps, range reads and kernel copies
 * straight from the file); a deflated member's is an NPZ_ENC_DEFLATE component (the row's own
 * encoding, "deflate") decoded by libzip
 * (zlib), through up to four decoding cursors per handle so that reading one in order decodes it
 * once.
 *
 * Hostile archives: the entry counts libzip will size its tables by (every end-of-central-
 * directory record in the last 64 KiB, and the Zip64 record one points to) are checked against
 * max_tensors and charged to the amplification budget before libzip allocates anything (it keeps
 * about NPZ_ENTRY_COST bytes per entry); members are checked one by one (directory entries,
 * encryption, methods other than store and deflate, sizes against the .npy header); members
 * whose bytes overlap are refused; a member's declared size bounds its decoding.
 */
#include "npy_int.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <zip.h>

/* libzip 1.7.3's heap per directory entry while an archive is open (entry, dirent, name string,
 * name hash): 256 bytes measured with 5-to-9-byte names (docs/formats/npy.md), plus the name. */
#define NPZ_ENTRY_COST 256u
#define NPZ_CURSORS 4
#define NPZ_LOG 8
#define NPZ_TAIL (65536u + 22u + 20u) /* libzip's end-of-directory search window (CDBUFSIZE) */

/* The libzip source over the handle's bytes. */
typedef struct npz_io {
    const tbx_source *src;
    uint64_t pos;
    zip_error_t zerr;
    bool failed;          /* a read of the source failed: st/err say why */
    tbx_status st;
    tbx_error err;
    uint64_t log_off[NPZ_LOG], log_len[NPZ_LOG]; /* the reads since the last reset */
    unsigned nlog;
    uint64_t last_off, last_len;                 /* the last read */
} npz_io;

typedef struct npz_cur {
    zip_file_t *zf;
    int64_t zidx;
    uint64_t pos;   /* decoded bytes read so far */
    uint64_t used;  /* last use (LRU) */
} npz_cur;

struct npz_zip {
    zip_t *za;
    npz_io io;
    pthread_mutex_t mu;
    npz_cur cur[NPZ_CURSORS];
    uint64_t tick;
    uint64_t charged;
};

static zip_int64_t io_cb(void *ud, void *data, zip_uint64_t len, zip_source_cmd_t cmd) {
    npz_io *io = ud;
    switch (cmd) {
    case ZIP_SOURCE_OPEN:
        io->pos = 0;
        return 0;
    case ZIP_SOURCE_READ: {
        uint64_t left = io->pos < io->src->size ? io->src->size - io->pos : 0;
        size_t n = (size_t)(len < left ? len : left);
        if (n) {
            tbx_status st = tbx_source_read(io->src, io->pos, data, n, "zip", &io->err);
            if (st != TBX_OK) {
                if (!io->failed) io->st = st;
                io->failed = true;
                zip_error_set(&io->zerr, ZIP_ER_READ, EIO);
                return -1;
            }
        }
        if (io->nlog < NPZ_LOG) {
            io->log_off[io->nlog] = io->pos;
            io->log_len[io->nlog] = n;
            io->nlog++;
        }
        io->last_off = io->pos;
        io->last_len = n;
        io->pos += n;
        return (zip_int64_t)n;
    }
    case ZIP_SOURCE_CLOSE:
        return 0;
    case ZIP_SOURCE_STAT: {
        if (len < sizeof(zip_stat_t)) {
            zip_error_set(&io->zerr, ZIP_ER_INVAL, 0);
            return -1;
        }
        zip_stat_t *st = data;
        zip_stat_init(st);
        st->size = io->src->size;
        st->valid |= ZIP_STAT_SIZE;
        return sizeof(zip_stat_t);
    }
    case ZIP_SOURCE_ERROR:
        return zip_error_to_data(&io->zerr, data, len);
    case ZIP_SOURCE_SEEK: {
        zip_int64_t p = zip_source_seek_compute_offset(io->pos, io->src->size, data, len, &io->zerr);
        if (p < 0) return -1;
        io->pos = (uint64_t)p;
        return 0;
    }
    case ZIP_SOURCE_TELL:
        return (zip_int64_t)io->pos;
    case ZIP_SOURCE_FREE:
        return 0;
    case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE,
                                              ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE,
                                              ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL,
                                              ZIP_SOURCE_SUPPORTS, -1);
    default:
        zip_error_set(&io->zerr, ZIP_ER_OPNOTSUPP, 0);
        return -1;
    }
}

/* A libzip failure as a tbx error: the source's own error when a read failed (a truncated or
 * shrunk file), else libzip's, at the start of the last bytes libzip read. */
static tbx_status zip_fail(npz_io *io, zip_error_t *ze, const char *what, tbx_error *err) {
    if (io->failed) {
        if (err) *err = io->err;
        return io->st;
    }
    int code = ze ? zip_error_code_zip(ze) : ZIP_ER_INTERNAL;
    tbx_status st = code == ZIP_ER_MEMORY        ? TBX_E_NOMEM
                    : code == ZIP_ER_CRC         ? TBX_E_CHECKSUM
                    : code == ZIP_ER_COMPNOTSUPP || code == ZIP_ER_ENCRNOTSUPP ||
                          code == ZIP_ER_MULTIDISK ? TBX_E_UNSUPPORTED
                                                   : TBX_E_FORMAT;
    return tbx_err_at(err, st, io->last_off, "zip",
                      "%s: %s (libzip; it last read bytes %llu..%llu)", what,
                      ze ? zip_error_strerror(ze) : "failed", (unsigned long long)io->last_off,
                      (unsigned long long)(io->last_off + io->last_len));
}

void npz_zip_free(tbx_file *f, struct npz_zip *z) {
    if (!z) return;
    for (int i = 0; i < NPZ_CURSORS; i++)
        if (z->cur[i].zf) zip_fclose(z->cur[i].zf);
    if (z->za) zip_discard(z->za);
    zip_error_fini(&z->io.zerr);
    pthread_mutex_destroy(&z->mu);
    tbx_file_uncharge(f, z->charged);
    tbx_free(&f->al, z, sizeof *z);
}

/* ------------------------------------------------------------------------------------------ */
/* Before libzip allocates: the entry counts it will size its tables by                        */
/* ------------------------------------------------------------------------------------------ */
static tbx_status precheck(tbx_file *f, uint64_t *charge, tbx_error *err) {
    const uint64_t size = f->src.size;
    if (size < 22)
        return tbx_err(err, TBX_E_TRUNCATED, size, "zip.end_of_central_directory",
                       "a zip archive ends with a 22-byte record; the file has %llu bytes",
                       (unsigned long long)size);
    const size_t tail = (size_t)(size < NPZ_TAIL ? size : NPZ_TAIL);
    const uint64_t start = size - tail;
    uint8_t *b = tbx_malloc(&f->al, tail);
    if (!b) return tbx_err_nomem(err, "zip directory search");
    tbx_status st = tbx_source_read(&f->src, start, b, tail, "zip.end_of_central_directory", err);
    uint64_t most = 0, at = size - 22 + 10;
    const uint64_t cap = size / 46 + 1; /* libzip: Zip64 counts above directory size / 46 fail */
    for (size_t p = 0; st == TBX_OK && p + 22 <= tail; p++) {
        if (memcmp(b + p, "PK\5\6", 4) != 0) continue;
        uint64_t n = tbx_ld16(b + p + 10), where = start + p + 10;
        if (p >= 20 && memcmp(b + p - 20, "PK\6\7", 4) == 0) {
            uint64_t off = tbx_ld64(b + p - 20 + 8);
            uint8_t rec[56];
            if (off <= size && size - off >= sizeof rec &&
                tbx_source_read(&f->src, off, rec, sizeof rec, "zip.zip64_end_of_central_directory",
                                err) == TBX_OK &&
                memcmp(rec, "PK\6\6", 4) == 0) {
                uint64_t n64 = tbx_ld64(rec + 32);
                if (n64 > cap) n64 = cap;
                if (n64 > n) { n = n64; where = off + 32; }
            }
        }
        if (n > most) { most = n; at = where; }
    }
    tbx_free(&f->al, b, tail);
    if (st != TBX_OK) return st;
    if (most > f->limits.max_tensors)
        return tbx_err(err, TBX_E_LIMIT, at, "zip.entries",
                       "the archive's directory claims %llu members (max_tensors %llu)",
                       (unsigned long long)most, (unsigned long long)f->limits.max_tensors);
    *charge = most * NPZ_ENTRY_COST + sizeof(struct npz_zip) + 4096;
    return tbx_file_charge(f, *charge, at, "zip.entries", err);
}

/* ------------------------------------------------------------------------------------------ */
/* Decoding deflated members                                                                   */
/* ------------------------------------------------------------------------------------------ */
/* A libzip error of an open member as a tbx error naming the member, at its compressed data. */
static tbx_status zf_fail(struct npz_zip *z, zip_file_t *zf, const npy_rec *r, const char *name,
                          const char *what, tbx_error *err) {
    if (z->io.failed) {
        if (err) *err = z->io.err;
        return z->io.st;
    }
    zip_error_t *ze = zf ? zip_file_get_error(zf) : zip_get_error(z->za);
    int code = zip_error_code_zip(ze);
    tbx_status st = code == ZIP_ER_CRC ? TBX_E_CHECKSUM : code == ZIP_ER_MEMORY ? TBX_E_NOMEM
                                                                                : TBX_E_FORMAT;
    char q[96];
    tbx_quote_bytes(q, sizeof q, name, strlen(name), 64);
    return tbx_err(err, st, r->member_off, code == ZIP_ER_CRC ? "member.crc32" : "member.data",
                   "tensor \"%s\" (deflated member): %s: %s", q, what, zip_error_strerror(ze));
}

/* Reads exactly len decoded bytes from zf (short: TBX_E_FORMAT). */
static tbx_status zf_read(struct npz_zip *z, zip_file_t *zf, const npy_rec *r, const char *name,
                          uint64_t at, void *buf, size_t len, tbx_error *err) {
    size_t done = 0;
    while (done < len) {
        zip_int64_t got = zip_fread(zf, (uint8_t *)buf + done, len - done);
        if (got < 0) return zf_fail(z, zf, r, name, "decoding failed", err);
        if (got == 0) {
            char q[96];
            tbx_quote_bytes(q, sizeof q, name, strlen(name), 64);
            return tbx_err(err, TBX_E_FORMAT, r->member_off, "member.data",
                           "tensor \"%s\": the deflated member ends after %llu decoded bytes, "
                           "before its declared %llu", q, (unsigned long long)(at + done),
                           (unsigned long long)r->member_len);
        }
        done += (size_t)got;
    }
    return TBX_OK;
}

/* At the member's declared end: libzip's end of stream (its CRC-32 and size checked). */
static tbx_status zf_end(struct npz_zip *z, zip_file_t *zf, const npy_rec *r, const char *name,
                         tbx_error *err) {
    uint8_t b;
    zip_int64_t got = zip_fread(zf, &b, 1);
    if (got < 0) return zf_fail(z, zf, r, name, "at the end of the member", err);
    if (got > 0) {
        char q[96];
        tbx_quote_bytes(q, sizeof q, name, strlen(name), 64);
        return tbx_err(err, TBX_E_FORMAT, r->member_off, "member.data",
                       "tensor \"%s\": the deflated member decodes to more than its declared "
                       "%llu bytes", q, (unsigned long long)r->member_len);
    }
    return TBX_OK;
}

static zip_file_t *zf_open(struct npz_zip *z, int64_t zidx) {
    return zip_fopen_index(z->za, (zip_uint64_t)zidx, 0);
}

tbx_status npz_read_decoded(tbx_file *f, const npy_rec *r, const char *name, uint64_t pos,
                            void *buf, size_t len, tbx_error *err) {
    npy_state *s = f->drv_state;
    struct npz_zip *z = s ? s->zip : NULL;
    if (!z) return tbx_err(err, TBX_E_STATE, r->member_off, "member", "archive not open");
    pthread_mutex_lock(&z->mu);
    z->io.failed = false;
    npz_cur *c = NULL;
    for (int i = 0; i < NPZ_CURSORS; i++) {
        npz_cur *k = &z->cur[i];
        if (k->zf && k->zidx == r->zidx && k->pos <= pos && (!c || k->pos > c->pos)) c = k;
    }
    tbx_status st = TBX_OK;
    if (!c) {
        c = &z->cur[0];
        for (int i = 1; i < NPZ_CURSORS && c->zf; i++)
            if (!z->cur[i].zf || z->cur[i].used < c->used) c = &z->cur[i];
        if (c->zf) zip_fclose(c->zf);
        c->zf = zf_open(z, r->zidx);
        c->zidx = r->zidx;
        c->pos = 0;
        if (!c->zf) st = zf_fail(z, NULL, r, name, "cannot open the member", err);
    }
    c->used = ++z->tick;
    uint8_t skip[8192];
    while (st == TBX_OK && c->pos < pos) {
        size_t n = (size_t)(pos - c->pos < sizeof skip ? pos - c->pos : sizeof skip);
        st = zf_read(z, c->zf, r, name, c->pos, skip, n, err);
        if (st == TBX_OK) c->pos += n;
    }
    if (st == TBX_OK) st = zf_read(z, c->zf, r, name, c->pos, buf, len, err);
    if (st == TBX_OK) c->pos += len;
    if (st == TBX_OK && c->pos == r->member_len) st = zf_end(z, c->zf, r, name, err);
    if (st != TBX_OK && c->zf) {
        zip_fclose(c->zf);
        c->zf = NULL;
    }
    pthread_mutex_unlock(&z->mu);
    return st;
}

tbx_status npz_check_deflated(tbx_file *f, const npy_rec *r, const char *name, tbx_error *err) {
    npy_state *s = f->drv_state;
    struct npz_zip *z = s ? s->zip : NULL;
    if (!z) return tbx_err(err, TBX_E_STATE, r->member_off, "member", "archive not open");
    pthread_mutex_lock(&z->mu);
    z->io.failed = false;
    tbx_status st = TBX_OK;
    zip_file_t *zf = zf_open(z, r->zidx);
    if (!zf) st = zf_fail(z, NULL, r, name, "cannot open the member", err);
    uint8_t buf[8192];
    for (uint64_t at = 0; st == TBX_OK && at < r->member_len;) {
        size_t n = (size_t)(r->member_len - at < sizeof buf ? r->member_len - at : sizeof buf);
        st = zf_read(z, zf, r, name, at, buf, n, err);
        at += n;
    }
    if (st == TBX_OK) st = zf_end(z, zf, r, name, err);
    if (zf) zip_fclose(zf);
    pthread_mutex_unlock(&z->mu);
    return st;
}

tbx_status npz_check_stored(tbx_file *f, const npy_rec *r, const char *name, tbx_error *err) {
    uint32_t crc = 0;
    tbx_view v;
    const uint8_t *p = tbx_source_view(&f->src, r->member_off, r->member_len, &v);
    tbx_status st = TBX_OK;
    if (p) {
        for (uint64_t at = 0; at < r->member_len; at += (uint64_t)1 << 30) {
            uint64_t n = r->member_len - at < ((uint64_t)1 << 30) ? r->member_len - at
                                                                  : ((uint64_t)1 << 30);
            crc = libdeflate_crc32(crc, p + at, (size_t)n);
        }
        st = tbx_view_check(&v, r->member_off, r->member_len, name, err);
        tbx_view_release(&v);
    } else {
        const size_t cap = (size_t)1 << 20;
        uint8_t *b = tbx_malloc(&f->al, cap);
        if (!b) return tbx_err_nomem(err, "CRC buffer");
        for (uint64_t at = 0; st == TBX_OK && at < r->member_len;) {
            size_t n = (size_t)(r->member_len - at < cap ? r->member_len - at : cap);
            st = tbx_source_read(&f->src, r->member_off + at, b, n, name, err);
            if (st == TBX_OK) crc = libdeflate_crc32(crc, b, n);
            at += n;
        }
        tbx_free(&f->al, b, cap);
    }
    if (st != TBX_OK) return st;
    if (crc != r->crc) {
        char q[96];
        tbx_quote_bytes(q, sizeof q, name, strlen(name), 64);
        return tbx_err(err, TBX_E_CHECKSUM, r->member_off, "member.crc32",
                       "tensor \"%s\": the member's bytes have CRC-32 %08x, its directory entry "
                       "says %08x", q, crc, r->crc);
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Opening                                                                                     */
/* ------------------------------------------------------------------------------------------ */
bool npz_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    if (len >= 10 && memcmp(head, "PK\3\4", 4) == 0) {
        uint16_t method = tbx_ld16(head + 8);
        return method == 0 || method == 8 || method == 12 || method == 14 || method == 93;
    }
    /* an archive without members: its end of central directory record alone */
    return len >= 22 && memcmp(head, "PK\5\6", 4) == 0 && tbx_ld16(head + 10) == 0 &&
           file_size == 22u + tbx_ld16(head + 20);
}

/* A deflated member's decoded bytes as a read callback, for the header parser's cursor. */
typedef struct hdr_stream {
    struct npz_zip *z;
    const npy_rec *r;
    const char *name;
    zip_file_t *zf;
    uint64_t pos;
    bool failed;
    tbx_status st;
    tbx_error err;
} hdr_stream;

static tbx_status hdr_read(void *ud, uint64_t off, void *buf, size_t len) {
    hdr_stream *h = ud;
    tbx_status st = TBX_OK;
    if (!h->zf || off < h->pos) {
        if (h->zf) zip_fclose(h->zf);
        h->zf = zf_open(h->z, h->r->zidx);
        h->pos = 0;
        if (!h->zf) st = zf_fail(h->z, NULL, h->r, h->name, "cannot open the member", &h->err);
    }
    uint8_t skip[4096];
    while (st == TBX_OK && h->pos < off) {
        size_t n = (size_t)(off - h->pos < sizeof skip ? off - h->pos : sizeof skip);
        st = zf_read(h->z, h->zf, h->r, h->name, h->pos, skip, n, &h->err);
        h->pos += n;
    }
    if (st == TBX_OK) st = zf_read(h->z, h->zf, h->r, h->name, h->pos, buf, len, &h->err);
    if (st == TBX_OK) {
        h->pos += len;
        return TBX_OK;
    }
    h->failed = true;
    h->st = st;
    return st;
}

typedef struct span {
    uint64_t lo, hi; /* the member's bytes: local header to the end of its data */
    size_t tensor;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Where libzip found member i's local header and data: the 4-byte read at offset + 26 (name and
 * extra lengths) and the read of the data that follow zip_fopen_index; checked against the
 * local header itself. */
static tbx_status locate(tbx_file *f, struct npz_zip *z, zip_uint64_t i, uint64_t csize,
                         const char *q, uint64_t *L, uint64_t *D, tbx_error *err) {
    z->io.nlog = 0;
    z->io.failed = false;
    zip_file_t *zf = zip_fopen_index(z->za, i, ZIP_FL_COMPRESSED | ZIP_FL_ENCRYPTED);
    if (!zf) {
        tbx_status st = zip_fail(&z->io, zip_get_error(z->za), "cannot open a member", err);
        return st;
    }
    uint8_t probe[16];
    size_t k = (size_t)(csize < sizeof probe ? csize : sizeof probe);
    zip_int64_t got = zip_fread(zf, probe, k);
    tbx_status st = TBX_OK;
    if (got != (zip_int64_t)k)
        st = zip_fail(&z->io, zip_file_get_error(zf), "cannot read a member", err);
    zip_fclose(zf);
    if (st != TBX_OK) return st;
    unsigned n = z->io.nlog;
    if (n < 2 || z->io.log_len[n - 1] != k || z->io.log_len[n - 2] != 4 ||
        z->io.log_off[n - 2] < 26)
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "member",
                       "member \"%s\": libzip did not read the member as expected; its data "
                       "cannot be located", q);
    *L = z->io.log_off[n - 2] - 26;
    *D = z->io.log_off[n - 1];
    uint8_t lh[30];
    if ((st = tbx_source_read(&f->src, *L, lh, sizeof lh, "member", err)) != TBX_OK) return st;
    if (memcmp(lh, "PK\3\4", 4) != 0 ||
        *L + 30 + tbx_ld16(lh + 26) + tbx_ld16(lh + 28) != *D)
        return tbx_err(err, TBX_E_STATE, *L, "member",
                       "member \"%s\": the local header libzip read does not place the data "
                       "where libzip read it", q);
    return TBX_OK;
}

static tbx_status add_member(tbx_file *f, struct npz_zip *z, zip_uint64_t i, span *sp,
                             bool *any_deflated, tbx_error *err) {
    zip_stat_t zs;
    zip_stat_init(&zs);
    z->io.failed = false;
    if (zip_stat_index(z->za, i, 0, &zs) < 0)
        return zip_fail(&z->io, zip_get_error(z->za), "cannot read a directory entry", err);
    const zip_uint64_t need = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE |
                              ZIP_STAT_COMP_METHOD | ZIP_STAT_CRC | ZIP_STAT_ENCRYPTION_METHOD;
    if ((zs.valid & need) != need || !zs.name)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "member",
                       "member %llu: libzip gave an incomplete directory entry",
                       (unsigned long long)i);
    const char *name = zs.name;
    const size_t nl = strlen(name);
    char q[96], where[128];
    tbx_quote_bytes(q, sizeof q, name, nl, 64);
    snprintf(where, sizeof where, "member \"%s\": ", q);
    if (nl == 0 || name[nl - 1] == '/')
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "member.name",
                       "member \"%s\" is a directory, not a .npy array", q);
    if (zs.comp_size == 0 || zs.size < NPY_PREAMBLE)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "member.size",
                       "member \"%s\" holds %llu bytes: a .npy array has at least %u", q,
                       (unsigned long long)zs.size, NPY_PREAMBLE);
    uint64_t L = 0, D = 0;
    tbx_status st = locate(f, z, i, zs.comp_size, q, &L, &D, err);
    if (st != TBX_OK) return st;
    if (zs.encryption_method != ZIP_EM_NONE)
        return tbx_err(err, TBX_E_UNSUPPORTED, L + 6, "member.flags",
                       "member \"%s\" is encrypted", q);
    if (zs.comp_method != ZIP_CM_STORE && zs.comp_method != ZIP_CM_DEFLATE)
        return tbx_err(err, TBX_E_UNSUPPORTED, L + 8, "member.compression",
                       "member \"%s\": compression method %u (numpy writes 0, stored, and 8, "
                       "deflated)", q, (unsigned)zs.comp_method);
    const bool deflated = zs.comp_method == ZIP_CM_DEFLATE;
    uint64_t dend;
    if (!tbx_add_u64(D, zs.comp_size, &dend) || dend > f->src.size)
        return tbx_err(err, TBX_E_TRUNCATED, L + 18, "member.compressed_size",
                       "member \"%s\": %llu bytes of data at byte %llu run past the end of the "
                       "file", q, (unsigned long long)zs.comp_size, (unsigned long long)D);
    if (!deflated && zs.comp_size != zs.size)
        return tbx_err(err, TBX_E_FORMAT, L + 22, "member.size",
                       "member \"%s\" is stored but its sizes differ (%llu, %llu)", q,
                       (unsigned long long)zs.comp_size, (unsigned long long)zs.size);
    npy_hdr h;
    tbx_cursor c;
    if (!deflated) {
        if ((st = tbx_cursor_init(&c, &f->src, &f->al, D, dend, err)) != TBX_OK) return st;
        st = npy_parse_header(&c, D, &f->limits, where, &h, err);
        tbx_cursor_free(&c);
        if (st == TBX_E_BAD_MAGIC)
            return tbx_err(err, TBX_E_UNSUPPORTED, D, "magic",
                           "member \"%s\" is not a .npy array (numpy reads it as raw bytes)", q);
    } else {
        npy_rec tmp = {.member_off = D, .member_len = zs.size, .zidx = (int64_t)i};
        hdr_stream hs = {.z = z, .r = &tmp, .name = name};
        tbx_source src;
        tbx_source_open_callback(&src, hdr_read, &hs, zs.size);
        st = tbx_cursor_init(&c, &src, &f->al, 0, zs.size, err);
        if (st == TBX_OK) {
            st = npy_parse_header(&c, 0, &f->limits, where, &h, err);
            tbx_cursor_free(&c);
        }
        if (hs.zf) zip_fclose(hs.zf);
        if (st != TBX_OK && hs.failed) {
            if (err) *err = hs.err;
            return hs.st;
        }
        if (st == TBX_E_BAD_MAGIC)
            return tbx_err(err, TBX_E_UNSUPPORTED, D, "magic",
                           "member \"%s\" is not a .npy array (numpy reads it as raw bytes)", q);
        if (st != TBX_OK && err && err->offset != TBX_NO_OFFSET) {
            char m[sizeof err->message + 64];
            int k = snprintf(m, sizeof m, "%s of the decoded member (its deflated data start at "
                             "byte %llu)", err->message, (unsigned long long)D);
            if (k > 0) {
                size_t n = (size_t)k < sizeof err->message ? (size_t)k : sizeof err->message - 1;
                memcpy(err->message, m, n);
                err->message[n] = '\0';
            }
            err->offset = D;
        }
    }
    if (st != TBX_OK) return st;
    uint64_t total;
    if (!tbx_add_u64(h.data_off, h.nbytes, &total) || total != zs.size)
        return tbx_err(err, TBX_E_FORMAT, L + 22, "member.size",
                       "member \"%s\" holds %llu bytes; its .npy header and shape say %llu", q,
                       (unsigned long long)zs.size,
                       (unsigned long long)(h.data_off + (h.nbytes < UINT64_MAX - h.data_off
                                                              ? h.nbytes : 0)));
    size_t kl = nl >= 4 && memcmp(name + nl - 4, ".npy", 4) == 0 ? nl - 4 : nl;
    tbx_tensor *t;
    if ((st = tbx_file_add_tensor(f, name, kl, h.dt->dtype, h.shape, h.ndim, 1, L, &t, err)) !=
        TBX_OK)
        return st;
    npy_state *s = f->drv_state;
    npy_rec *r = &s->rec[f->ntensors - 1];
    if (!deflated) {
        tbx_comp_set_raw(t, h.dt->dtype, D + h.data_off, h.nbytes);
        r->data_off = D + h.data_off;
    } else {
        tbx_comp_set_raw(t, h.dt->dtype, D, h.nbytes);
        t->comp[0].encoding = NPZ_ENC_DEFLATE;
        t->comp[0].stored_bytes = zs.comp_size;
        r->data_off = h.data_off;
        *any_deflated = true;
    }
    r->member_off = D;
    r->member_len = zs.size;
    r->zidx = (int64_t)i;
    r->crc = zs.crc;
    r->elem = h.dt->size;
    r->unit = h.big_endian ? h.dt->unit : 0;
    r->deflated = deflated;
    r->fortran = npy_hdr_transposed(&h);
    /* a big-endian or Fortran-order member reads through the driver, the others as stored */
    t->comp[0].xform = r->unit || r->fortran;
    sp->lo = L;
    sp->hi = dend;
    sp->tensor = f->ntensors - 1;
    return TBX_OK;
}

tbx_status npz_open(tbx_file *f, tbx_error *err) {
    uint64_t charge = 0;
    tbx_status st = precheck(f, &charge, err);
    if (st != TBX_OK) return st;
    struct npz_zip *z = tbx_malloc(&f->al, sizeof *z);
    if (!z) {
        tbx_file_uncharge(f, charge);
        return tbx_err_nomem(err, "zip archive");
    }
    memset(z, 0, sizeof *z);
    z->charged = charge;
    z->io.src = &f->src;
    zip_error_init(&z->io.zerr);
    pthread_mutex_init(&z->mu, NULL);
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *zsrc = zip_source_function_create(io_cb, &z->io, &ze);
    if (!zsrc) {
        zip_error_fini(&ze);
        npz_zip_free(f, z);
        return tbx_err_nomem(err, "zip source");
    }
    z->za = zip_open_from_source(zsrc, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (!z->za) {
        zip_source_free(zsrc);
        st = zip_fail(&z->io, &ze, "not a zip archive libzip accepts", err);
        zip_error_fini(&ze);
        npz_zip_free(f, z);
        return st;
    }
    zip_error_fini(&ze);
    zip_int64_t n = zip_get_num_entries(z->za, 0);
    if (n < 0 || (uint64_t)n > f->limits.max_tensors) {
        npz_zip_free(f, z);
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "zip.entries",
                       "the archive has %lld members (max_tensors %llu)", (long long)n,
                       (unsigned long long)f->limits.max_tensors);
    }
    if ((st = npy_state_new(f, (size_t)n, 0, err)) != TBX_OK) {
        npz_zip_free(f, z);
        return st;
    }
    npy_state *s = f->drv_state;
    s->zip = z;
    if ((st = tbx_file_reserve_tensors(f, (size_t)n, err)) != TBX_OK) return st;
    const uint64_t span_bytes = (uint64_t)(n ? n : 1) * sizeof(span);
    if ((st = tbx_file_charge(f, span_bytes, 0, "zip.entries", err)) != TBX_OK) return st;
    span *sp = tbx_calloc(&f->al, (size_t)(n ? n : 1), sizeof *sp);
    if (!sp) return tbx_err_nomem(err, "member table");
    bool any_deflated = false;
    for (zip_int64_t i = 0; st == TBX_OK && i < n; i++)
        st = add_member(f, z, (zip_uint64_t)i, &sp[i], &any_deflated, err);
    if (st == TBX_OK && n > 1) {
        qsort(sp, (size_t)n, sizeof *sp, span_cmp);
        for (zip_int64_t i = 1; st == TBX_OK && i < n; i++) {
            if (sp[i].lo >= sp[i - 1].hi) continue;
            char a[96], b[96];
            const tbx_tensor *ta = &f->tensors[sp[i - 1].tensor], *tb = &f->tensors[sp[i].tensor];
            tbx_quote_bytes(a, sizeof a, ta->name, ta->name_len, 40);
            tbx_quote_bytes(b, sizeof b, tb->name, tb->name_len, 40);
            st = tbx_err(err, TBX_E_RANGE, sp[i].lo, "member",
                         "the member of \"%s\" (bytes %llu..%llu) overlaps the member of \"%s\" "
                         "(bytes %llu..%llu)", b, (unsigned long long)sp[i].lo,
                         (unsigned long long)sp[i].hi, a, (unsigned long long)sp[i - 1].lo,
                         (unsigned long long)sp[i - 1].hi);
        }
    }
    tbx_free(&f->al, sp, (size_t)(n ? n : 1) * sizeof *sp);
    tbx_file_uncharge(f, span_bytes);
    if (st != TBX_OK) return st;
    if (!any_deflated) { /* nothing is decoded: libzip's tables go */
        npz_zip_free(f, z);
        s->zip = NULL;
    }
    return TBX_OK;
}
