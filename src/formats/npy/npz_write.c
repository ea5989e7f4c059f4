/*
 * npz_write.c - the .npz writer: one member "<name>.npy" per tensor, in declaration order, each
 * an .npy file (npy_header_build + the tensor's bytes), stored (the default, numpy.savez) or
 * deflated at compress_level 1..9 (numpy.savez_compressed), written by libzip.
 *
 * libzip writes an archive when it is closed, pulling each member's bytes from a source; the
 * writer receives them from its caller piece by piece. So zip_close runs on a thread of its own,
 * started when the first tensor byte arrives (w_layout), and each member's source hands libzip
 * the caller's pieces as they come (npz_w_data waits until libzip has taken a piece, so nothing
 * is held but libzip's 8 KiB buffers). Tensors must therefore arrive in declaration order, which
 * is what tbx_convert and the Python writer do; another order is refused naming both tensors.
 * libzip writes through a source of ours into the writer's temporary file (pieces gathered into
 * 1 MiB writes), renamed over the destination by the core at the end.
 *
 * Deterministic bytes: every member dated 1980-01-01 00:00:00 (the earliest DOS date; numpy
 * dates its members with the current time), Unix permissions 0600 as Python's zipfile gives
 * them, no extra fields unless a member needs Zip64. An archive without tensors is the 22-byte
 * end of central directory record alone, as numpy writes it: libzip 1.7 removes an archive it
 * would leave empty, so that record is the one piece of zip written here.
 */
#include "npy_int.h"

#include <errno.h>
#include <stdio.h>
#include <zip.h>

#define NPZ_WBUF ((size_t)1 << 20)

typedef struct npz_w npz_w;

typedef struct npz_member {
    npz_w *z;
    size_t index;
    uint64_t pos;     /* bytes handed to libzip */
    uint64_t total;   /* header + data */
    size_t hlen;
} npz_member;

struct npz_w {
    tbx_writer *w;
    zip_t *za;
    npz_member *members;
    size_t nmembers;
    uint8_t *hdr;     /* the header of the member libzip reads (one at a time) */
    size_t hdr_cap;
    /* the archive's output (the zip thread only, while it runs) */
    uint64_t pos, end;
    uint8_t *buf;
    size_t nbuf;
    uint64_t buf_off;
    zip_error_t zerr;
    tbx_status out_st;
    tbx_error out_err;
    /* the hand-over between the caller (npz_w_data) and the zip thread */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool sync_init;
    pthread_t th;
    bool started, finished, abort;
    int zip_rc;
    char zip_msg[200];
    size_t cur;             /* the tensor whose piece is offered */
    const uint8_t *data;
    size_t avail;
    size_t first_pending;   /* tensors before it are done or take no bytes */
};

static tbx_status out_flush(npz_w *z) {
    if (z->nbuf == 0 || z->out_st != TBX_OK) return z->out_st;
    tbx_status st = tbx_out_pwrite(&z->w->out, z->buf_off, z->buf, z->nbuf, &z->out_err);
    if (st != TBX_OK) z->out_st = st;
    z->nbuf = 0;
    return st;
}

static zip_int64_t out_fail(npz_w *z) {
    zip_error_set(&z->zerr, ZIP_ER_WRITE, EIO);
    return -1;
}

/* The archive's source: writes into the writer's temporary file. */
static zip_int64_t out_cb(void *ud, void *data, zip_uint64_t len, zip_source_cmd_t cmd) {
    npz_w *z = ud;
    switch (cmd) {
    case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(
            ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR,
            ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL, ZIP_SOURCE_SUPPORTS,
            ZIP_SOURCE_BEGIN_WRITE, ZIP_SOURCE_COMMIT_WRITE, ZIP_SOURCE_ROLLBACK_WRITE,
            ZIP_SOURCE_WRITE, ZIP_SOURCE_SEEK_WRITE, ZIP_SOURCE_TELL_WRITE, ZIP_SOURCE_REMOVE, -1);
    case ZIP_SOURCE_STAT: /* a new archive: libzip creates it */
        zip_error_set(&z->zerr, ZIP_ER_READ, ENOENT);
        return -1;
    case ZIP_SOURCE_ERROR:
        return zip_error_to_data(&z->zerr, data, len);
    case ZIP_SOURCE_BEGIN_WRITE:
        z->pos = z->end = 0;
        z->nbuf = 0;
        return 0;
    case ZIP_SOURCE_WRITE: {
        const uint8_t *p = data;
        zip_uint64_t left = len;
        while (left) {
            if (z->nbuf && z->buf_off + z->nbuf != z->pos && out_flush(z) != TBX_OK)
                return out_fail(z);
            if (z->nbuf == 0) z->buf_off = z->pos;
            size_t n = NPZ_WBUF - z->nbuf < left ? NPZ_WBUF - z->nbuf : (size_t)left;
            memcpy(z->buf + z->nbuf, p, n);
            z->nbuf += n;
            p += n;
            left -= n;
            z->pos += n;
            if (z->pos > z->end) z->end = z->pos;
            if (z->nbuf == NPZ_WBUF && out_flush(z) != TBX_OK) return out_fail(z);
        }
        return (zip_int64_t)len;
    }
    case ZIP_SOURCE_SEEK_WRITE: {
        zip_int64_t p = zip_source_seek_compute_offset(z->pos, z->end, data, len, &z->zerr);
        if (p < 0) return -1;
        z->pos = (uint64_t)p;
        return 0;
    }
    case ZIP_SOURCE_TELL_WRITE:
        return (zip_int64_t)z->pos;
    case ZIP_SOURCE_COMMIT_WRITE:
        return out_flush(z) == TBX_OK ? 0 : out_fail(z);
    case ZIP_SOURCE_ROLLBACK_WRITE:
        z->nbuf = 0;
        return 0;
    case ZIP_SOURCE_REMOVE: { /* an archive without members: the end record alone */
        uint8_t eocd[22] = {'P', 'K', 5, 6};
        z->nbuf = 0;
        if (tbx_out_pwrite(&z->w->out, 0, eocd, sizeof eocd, &z->out_err) != TBX_OK) {
            z->out_st = z->out_err.code;
            return out_fail(z);
        }
        z->end = sizeof eocd;
        return 0;
    }
    case ZIP_SOURCE_FREE:
    case ZIP_SOURCE_CLOSE:
        return 0;
    default:
        zip_error_set(&z->zerr, ZIP_ER_OPNOTSUPP, 0);
        return -1;
    }
}

/* A member's source: its .npy header, then the tensor's bytes as the caller hands them over. */
static zip_int64_t member_cb(void *ud, void *data, zip_uint64_t len, zip_source_cmd_t cmd) {
    npz_member *m = ud;
    npz_w *z = m->z;
    const tbx_wtensor *t = &z->w->tensors[m->index];
    switch (cmd) {
    case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE,
                                              ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE,
                                              ZIP_SOURCE_SUPPORTS, -1);
    case ZIP_SOURCE_STAT: {
        if (len < sizeof(zip_stat_t)) return -1;
        zip_stat_t *st = data;
        zip_stat_init(st);
        st->size = m->total;
        st->valid |= ZIP_STAT_SIZE;
        return sizeof(zip_stat_t);
    }
    case ZIP_SOURCE_OPEN:
        m->hlen = npy_header_build((tbx_dtype)t->dtype, t->shape, t->ndim, 1, z->hdr, z->hdr_cap);
        m->pos = 0;
        return 0;
    case ZIP_SOURCE_READ: {
        uint8_t *out = data;
        zip_uint64_t done = 0;
        if (m->pos < m->hlen) {
            size_t n = (size_t)(m->hlen - m->pos < len ? m->hlen - m->pos : len);
            memcpy(out, z->hdr + m->pos, n);
            m->pos += n;
            done = n;
        }
        if (done == len || m->pos == m->total) return (zip_int64_t)done;
        pthread_mutex_lock(&z->mu);
        while (!z->abort && !(z->cur == m->index && z->avail > 0)) pthread_cond_wait(&z->cv, &z->mu);
        if (z->abort) {
            pthread_mutex_unlock(&z->mu);
            zip_error_set(&z->zerr, ZIP_ER_CANCELLED, 0);
            return -1;
        }
        uint64_t want = m->total - m->pos < len - done ? m->total - m->pos : len - done;
        size_t n = (size_t)(want < z->avail ? want : z->avail);
        memcpy(out + done, z->data, n);
        z->data += n;
        z->avail -= n;
        if (z->avail == 0) pthread_cond_broadcast(&z->cv);
        pthread_mutex_unlock(&z->mu);
        m->pos += n;
        return (zip_int64_t)(done + n);
    }
    case ZIP_SOURCE_ERROR:
        return zip_error_to_data(&z->zerr, data, len);
    case ZIP_SOURCE_CLOSE:
    case ZIP_SOURCE_FREE:
        return 0;
    default:
        zip_error_set(&z->zerr, ZIP_ER_OPNOTSUPP, 0);
        return -1;
    }
}

static void *zip_thread(void *arg) {
    npz_w *z = arg;
    int rc = zip_close(z->za);
    pthread_mutex_lock(&z->mu);
    if (rc == 0) z->za = NULL; /* closed and freed */
    else snprintf(z->zip_msg, sizeof z->zip_msg, "%s", zip_strerror(z->za));
    z->zip_rc = rc;
    z->finished = true;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
    return NULL;
}

/* The zip thread's failure as the caller's error. Called with z->mu held or after the join. */
static tbx_status zip_error_of(npz_w *z, tbx_error *err) {
    if (z->out_st != TBX_OK) {
        if (err) *err = z->out_err;
        return z->out_st;
    }
    return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "zip", "libzip could not write the archive: %s",
                   z->zip_msg[0] ? z->zip_msg : "failed");
}

void npz_w_free(tbx_writer *w) {
    npz_w *z = w->drv_state;
    if (!z) return;
    if (z->started) {
        pthread_mutex_lock(&z->mu);
        z->abort = true;
        pthread_cond_broadcast(&z->cv);
        pthread_mutex_unlock(&z->mu);
        pthread_join(z->th, NULL);
    }
    if (z->za) zip_discard(z->za);
    if (z->sync_init) {
        pthread_cond_destroy(&z->cv);
        pthread_mutex_destroy(&z->mu);
    }
    zip_error_fini(&z->zerr);
    if (z->members) tbx_free(&w->al, z->members, (z->nmembers ? z->nmembers : 1) * sizeof *z->members);
    if (z->hdr) tbx_free(&w->al, z->hdr, z->hdr_cap);
    if (z->buf) tbx_free(&w->al, z->buf, NPZ_WBUF);
    tbx_free(&w->al, z, sizeof *z);
    w->drv_state = NULL;
}

/* At the writer's open (tbx_writer_open, tbx_writer_check): deflate has levels 1..9. */
tbx_status npz_w_check_options(tbx_writer *w, tbx_error *err) {
    if (w->opt.compress_level < 0 || w->opt.compress_level > 9)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "compress_level",
                       "npz members are deflated at levels 1..9 (0: stored); level %d asked for",
                       w->opt.compress_level);
    return TBX_OK;
}

tbx_status npz_w_layout(tbx_writer *w, tbx_error *err) {
    npz_w *z = tbx_malloc(&w->al, sizeof *z);
    if (!z) return tbx_err_nomem(err, "npz writer");
    memset(z, 0, sizeof *z);
    w->drv_state = z;
    z->w = w;
    zip_error_init(&z->zerr);
    uint32_t maxdim = 0;
    for (size_t i = 0; i < w->ntensors; i++)
        if (w->tensors[i].ndim > maxdim) maxdim = w->tensors[i].ndim;
    z->hdr_cap = npy_header_cap(maxdim);
    z->hdr = tbx_malloc(&w->al, z->hdr_cap);
    z->buf = tbx_malloc(&w->al, NPZ_WBUF);
    z->nmembers = w->ntensors;
    z->members = tbx_calloc(&w->al, w->ntensors ? w->ntensors : 1, sizeof *z->members);
    if (!z->hdr || !z->buf || !z->members) return tbx_err_nomem(err, "npz writer");
    if (pthread_mutex_init(&z->mu, NULL) != 0) return tbx_err_nomem(err, "npz writer lock");
    if (pthread_cond_init(&z->cv, NULL) != 0) {
        pthread_mutex_destroy(&z->mu);
        return tbx_err_nomem(err, "npz writer condition");
    }
    z->sync_init = true;

    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_function_create(out_cb, z, &ze);
    if (src) {
        z->za = zip_open_from_source(src, ZIP_CREATE | ZIP_TRUNCATE, &ze);
        if (!z->za) zip_source_free(src);
    }
    if (!z->za) {
        tbx_status st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "zip",
                                "libzip cannot create the archive: %s", zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return st;
    }
    zip_error_fini(&ze);
    char *name = NULL;
    size_t name_cap = 0;
    tbx_status st = TBX_OK;
    for (size_t i = 0; st == TBX_OK && i < w->ntensors; i++) {
        const tbx_wtensor *t = &w->tensors[i];
        npz_member *m = &z->members[i];
        m->z = z;
        m->index = i;
        m->hlen = npy_header_build((tbx_dtype)t->dtype, t->shape, t->ndim, 1, z->hdr, z->hdr_cap);
        if (m->hlen == 0 || !tbx_add_u64(m->hlen, t->nbytes, &m->total)) {
            st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                         "tensor \"%s\": its .npy header cannot be written", t->name);
            break;
        }
        if (t->name_len + 5 > name_cap) {
            if (name) tbx_free(&w->al, name, name_cap);
            name_cap = t->name_len + 5;
            name = tbx_malloc(&w->al, name_cap);
            if (!name) { name_cap = 0; st = tbx_err_nomem(err, "member name"); break; }
        }
        memcpy(name, t->name, t->name_len);
        memcpy(name + t->name_len, ".npy", 5);
        zip_source_t *ms = zip_source_function(z->za, member_cb, m);
        zip_int64_t idx = ms ? zip_file_add(z->za, name, ms, ZIP_FL_ENC_UTF_8) : -1;
        if (ms && idx < 0) zip_source_free(ms);
        if (idx < 0 ||
            zip_file_set_dostime(z->za, (zip_uint64_t)idx, 0, (1 << 5) | 1, 0) < 0 ||
            zip_file_set_external_attributes(z->za, (zip_uint64_t)idx, 0, ZIP_OPSYS_UNIX,
                                             0600u << 16) < 0 ||
            zip_set_file_compression(z->za, (zip_uint64_t)idx,
                                     w->opt.compress_level ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                                     (zip_uint32_t)w->opt.compress_level) < 0) {
            int code = zip_error_code_zip(zip_get_error(z->za));
            st = tbx_err(err, code == ZIP_ER_EXISTS ? TBX_E_DUPLICATE : TBX_E_IO, TBX_NO_OFFSET,
                         "tensor", "tensor \"%s\": libzip cannot add its member: %s", t->name,
                         zip_strerror(z->za));
        }
    }
    if (name) tbx_free(&w->al, name, name_cap);
    if (st != TBX_OK) return st;
    if (pthread_create(&z->th, NULL, zip_thread, z) != 0)
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "writer", "cannot start the zip thread");
    z->started = true;
    return TBX_OK;
}

tbx_status npz_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                      tbx_error *err) {
    npz_w *z = w->drv_state;
    const size_t idx = (size_t)(t - w->tensors);
    while (z->first_pending < w->ntensors && (w->tensors[z->first_pending].done ||
                                              w->tensors[z->first_pending].nbytes == 0))
        z->first_pending++;
    if (idx != z->first_pending && len > 0) {
        const tbx_wtensor *p = &w->tensors[z->first_pending];
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "tensor",
                       "npz members are written in the order the tensors were declared: \"%s\" "
                       "before \"%s\"", p->name, t->name);
    }
    if (len == 0) return TBX_OK;
    pthread_mutex_lock(&z->mu);
    z->cur = idx;
    z->data = data;
    z->avail = len;
    pthread_cond_broadcast(&z->cv);
    while (z->avail > 0 && !z->finished) pthread_cond_wait(&z->cv, &z->mu);
    tbx_status st = TBX_OK;
    if (z->avail > 0) st = zip_error_of(z, err);
    z->data = NULL;
    z->avail = 0;
    pthread_mutex_unlock(&z->mu);
    return st;
}

tbx_status npz_w_finish(tbx_writer *w, tbx_error *err) {
    npz_w *z = w->drv_state;
    if (!z || !z->started) return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "writer", "not laid out");
    pthread_join(z->th, NULL);
    z->started = false;
    if (z->zip_rc != 0) return zip_error_of(z, err);
    w->end = z->end;
    return TBX_OK;
}
