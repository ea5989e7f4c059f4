/*
 * copy.c - tbx_out_copy_fd: bytes that pass unchanged from an input file into an atomic output
 * (output.c), the tensor bytes of a conversion that changes only the container.
 *
 * The bytes are copied by the kernel (copy_file_range: they never enter this process, and a
 * file system that shares extents shares them), 32 MiB per call, when the two offsets are
 * congruent modulo 64 KiB. Otherwise in 1 MiB pieces through a buffer (pread + pwrite; from
 * 16 MiB on a second thread reads the next pieces while this one writes): the kernel's copy
 * between offsets that are not congruent is slower than the two copies through a buffer that
 * stays in cache (1.06 GiB on ext4: 0.42 s against 0.27 s congruent, and 0.34-0.43 s pipelined
 * with the writeback included), and extents can be shared only between congruent offsets
 * anyway. Also through the buffer when the kernel cannot copy between the two files. Either way
 * the bytes written feed the output's early writeback (tbx_out_wb_note_) like any other.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "output_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>

int tbx_out_no_copy_range_;

#define COPY_BOUNCE ((size_t)1 << 20)
#define COPY_PIECE ((size_t)32 << 20)     /* per copy_file_range call */
#define COPY_CONGRUENT ((uint64_t)64 << 10) /* offsets the kernel copies fast (see the top) */

/* May a copy_file_range failure with this errno be retried through the buffer? (The kernel or
 * the file systems cannot copy these files: too old, different file systems, a sandbox.) */
static bool copy_range_unsupported(int e) {
    return e == ENOSYS || e == EXDEV || e == EINVAL || e == EOPNOTSUPP || e == EBADF ||
           e == EPERM || e == ETXTBSY;
}

static tbx_status copy_err(tbx_out *o, uint64_t pos, uint64_t in_off, uint64_t left,
                           const char *why, tbx_error *err) {
    tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "output",
            "copying %" PRIu64 " bytes from byte %" PRIu64 " of the input to byte %" PRIu64
            " of %s failed: %s", left, in_off, pos, o->tmp_path, why);
    if (err) err->offset = pos;
    return TBX_E_IO;
}

/* pread exactly n bytes at in_off; 0, an errno, or -1 when the input ended first. */
static int read_full(int in_fd, uint8_t *buf, size_t n, uint64_t in_off, size_t *got) {
    *got = 0;
    while (*got < n) {
        ssize_t r = pread(in_fd, buf + *got, n - *got, (off_t)(in_off + *got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno ? errno : EIO;
        if (r == 0) return -1;
        *got += (size_t)r;
    }
    return 0;
}

static tbx_status read_fail(tbx_out *o, uint64_t pos, uint64_t in_off, uint64_t left, int e,
                            tbx_error *err) {
    if (e > 0) return copy_err(o, pos, in_off, left, strerror(e), err);
    return tbx_err(err, TBX_E_TRUNCATED, in_off, "input",
                   "the input file ended while %" PRIu64 " more bytes were being copied from "
                   "it (it shrank?)", left);
}

/* A long copy through the buffer is a pipeline of COPY_SLOTS pieces: a second thread preads
 * the next pieces while this one pwrites (both are memory copies by the kernel, and writes to
 * one file are serialised by the file system anyway). The pieces are written in order by the
 * calling thread, so the bytes, the errors and the fault hook's calls are those of the serial
 * loop. */
#define COPY_SLOTS 4
#define COPY_PIPELINE_MIN ((uint64_t)16 << 20) /* shorter copies stay on one thread */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int in_fd;
    uint64_t in_off, len;
    uint8_t *buf[COPY_SLOTS];
    size_t n[COPY_SLOTS];
    int state[COPY_SLOTS]; /* 0 free, 1 filled, 2 read failed (e below) */
    int e;                 /* errno of the failed read, or -1: the input ended */
    uint64_t e_at;         /* input offset of that read */
    bool stop;             /* the writer gave up */
} copy_pipe;

static void *copy_reader(void *arg) {
    copy_pipe *cp = arg;
    for (uint64_t p = 0, k = 0; p < cp->len; p += COPY_BOUNCE, k++) {
        const int s = (int)(k % COPY_SLOTS);
        pthread_mutex_lock(&cp->mu);
        while (cp->state[s] != 0 && !cp->stop) pthread_cond_wait(&cp->cv, &cp->mu);
        const bool stop = cp->stop;
        pthread_mutex_unlock(&cp->mu);
        if (stop) break;
        const size_t n = cp->len - p < (uint64_t)COPY_BOUNCE ? (size_t)(cp->len - p) : COPY_BOUNCE;
        size_t got;
        const int e = read_full(cp->in_fd, cp->buf[s], n, cp->in_off + p, &got);
        pthread_mutex_lock(&cp->mu);
        cp->n[s] = n;
        cp->state[s] = e ? 2 : 1;
        if (e) {
            cp->e = e;
            cp->e_at = cp->in_off + p + got;
        }
        pthread_cond_broadcast(&cp->cv);
        pthread_mutex_unlock(&cp->mu);
        if (e) break;
    }
    return NULL;
}

/* The buffer: COPY_SLOTS pieces when pipelined, else one; kept for the next copies. */
static uint8_t *bounce_buf(tbx_out *o, size_t cap, tbx_error *err) {
    if (o->bounce_cap >= cap) return o->bounce;
    tbx_free(o->al, o->bounce, o->bounce_cap);
    o->bounce_cap = 0;
    o->bounce = (uint8_t *)tbx_malloc(o->al, cap);
    if (!o->bounce) {
        tbx_err_nomem(err, "copy buffer");
        return NULL;
    }
    o->bounce_cap = cap;
    return o->bounce;
}

static tbx_status copy_pipelined(tbx_out *o, uint64_t pos, int in_fd, uint64_t in_off,
                                 uint64_t len, bool *ran, tbx_error *err) {
    *ran = false;
    uint8_t *buf = bounce_buf(o, (size_t)COPY_SLOTS * COPY_BOUNCE, err);
    if (!buf) return TBX_E_NOMEM;
    copy_pipe cp;
    memset(&cp, 0, sizeof cp);
    cp.in_fd = in_fd;
    cp.in_off = in_off;
    cp.len = len;
    for (int s = 0; s < COPY_SLOTS; s++) cp.buf[s] = buf + (size_t)s * COPY_BOUNCE;
    if (pthread_mutex_init(&cp.mu, NULL) != 0) return TBX_OK;
    if (pthread_cond_init(&cp.cv, NULL) != 0) {
        pthread_mutex_destroy(&cp.mu);
        return TBX_OK;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, copy_reader, &cp) != 0) { /* the serial loop instead */
        pthread_cond_destroy(&cp.cv);
        pthread_mutex_destroy(&cp.mu);
        return TBX_OK;
    }
    *ran = true;
    tbx_status st = TBX_OK;
    for (uint64_t p = 0, k = 0; st == TBX_OK && p < len; p += COPY_BOUNCE, k++) {
        const int s = (int)(k % COPY_SLOTS);
        pthread_mutex_lock(&cp.mu);
        while (cp.state[s] == 0) pthread_cond_wait(&cp.cv, &cp.mu);
        const int state = cp.state[s];
        pthread_mutex_unlock(&cp.mu);
        if (state == 2) {
            st = read_fail(o, pos + (cp.e_at - in_off), cp.e_at, len - (cp.e_at - in_off), cp.e,
                           err);
            break;
        }
        st = tbx_out_write_all_(o, pos + p, cp.buf[s], cp.n[s], err);
        pthread_mutex_lock(&cp.mu);
        cp.state[s] = 0;
        pthread_cond_broadcast(&cp.cv);
        pthread_mutex_unlock(&cp.mu);
    }
    pthread_mutex_lock(&cp.mu);
    cp.stop = true;
    pthread_cond_broadcast(&cp.cv);
    pthread_mutex_unlock(&cp.mu);
    pthread_join(th, NULL);
    pthread_cond_destroy(&cp.cv);
    pthread_mutex_destroy(&cp.mu);
    return st;
}

/* The rest of a copy through a buffer: pread from the input, pwrite to the output. */
static tbx_status copy_bounce(tbx_out *o, uint64_t pos, int in_fd, uint64_t in_off, uint64_t left,
                              tbx_error *err) {
    if (left >= COPY_PIPELINE_MIN && tbx_threads_default() > 1) {
        bool ran;
        tbx_status st = copy_pipelined(o, pos, in_fd, in_off, left, &ran, err);
        if (ran || st != TBX_OK) return st;
    }
    const size_t cap = left < (uint64_t)COPY_BOUNCE ? (size_t)left : COPY_BOUNCE;
    uint8_t *buf = bounce_buf(o, cap, err);
    if (!buf) return TBX_E_NOMEM;
    tbx_status st = TBX_OK;
    while (st == TBX_OK && left > 0) {
        size_t n = left < (uint64_t)cap ? (size_t)left : cap, got;
        const int e = read_full(in_fd, buf, n, in_off, &got);
        if (e) return read_fail(o, pos + got, in_off + got, left - got, e, err);
        st = tbx_out_write_all_(o, pos, buf, n, err);
        pos += n;
        in_off += n;
        left -= n;
    }
    return st;
}

tbx_status tbx_out_copy_fd(tbx_out *o, uint64_t off, int in_fd, uint64_t in_off, uint64_t len,
                           tbx_error *err) {
    if (!o || !o->tmp_path || o->fd < 0) return tbx_out_not_open_(err);
    uint64_t end, in_end;
    tbx_status st = tbx_out_check_range_(off, len, &end, err);
    if (st != TBX_OK) return st;
    if (!tbx_add_u64(in_off, len, &in_end) || in_end > (uint64_t)INT64_MAX)
        return tbx_err(err, TBX_E_OVERFLOW, in_off, "input",
                       "input: %" PRIu64 " bytes at byte %" PRIu64 " pass the largest file offset",
                       len, in_off);
    if (len == 0) return TBX_OK;
    if (in_fd < 0)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "input", "input: no descriptor");
    uint64_t pos = off, left = len;
#ifdef __linux__
    /* In the kernel: the bytes go from the input's page cache to the output's without passing
     * through this process (and a file system that can share extents shares them). */
    const bool congruent = (off - in_off) % COPY_CONGRUENT == 0; /* unsigned: wraps the same */
    while (!tbx_out_no_copy_range_ && congruent && left > 0) {
        size_t piece = left < (uint64_t)COPY_PIECE ? (size_t)left : COPY_PIECE;
        int fault = tbx_out_fault_hook_ ? tbx_out_fault_hook_() : 0;
        if (fault) return copy_err(o, pos, in_off, left, strerror(fault), err);
        loff_t ip = (loff_t)in_off, op = (loff_t)pos;
        ssize_t r = copy_file_range(in_fd, &ip, o->fd, &op, piece, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (copy_range_unsupported(errno)) break; /* the rest through the buffer */
            return copy_err(o, pos, in_off, left, strerror(errno), err);
        }
        if (r == 0) return read_fail(o, pos, in_off, left, -1, err);
        tbx_out_wb_note_(o, pos, (uint64_t)r);
        pos += (uint64_t)r;
        in_off += (uint64_t)r;
        left -= (uint64_t)r;
    }
#endif
    if (left > 0) st = copy_bounce(o, pos, in_fd, in_off, left, err);
    if (st != TBX_OK) return st;
    if (end > o->size) o->size = end;
    return TBX_OK;
}
