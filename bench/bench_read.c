/*
 * bench_read.c - reads every tensor of a file through the public tensorbox API and reports
 * the time taken. Used by bench/bench_safetensors.py; works on any format tensorbox reads.
 *
 *   bench_read [--mmap] [--batch THREADS] [--verify] [--repeat N] FILE
 *
 * Modes
 *   default  tbx_open_path (pread source) + tbx_tensor_read of every tensor into one reusable
 *            page-aligned buffer (grown on a size query when a tensor is larger).
 *   --mmap   tbx_open_path with TBX_OPEN_MMAP + tbx_tensor_map of every tensor, touching one
 *            byte in every 4096 so that every page is faulted in.
 *   --batch THREADS  one tbx_read_batch call for every component of every tensor, each into its
 *            own place in one buffer as large as the decoded model (allocated and faulted in
 *            before the timed passes), decoding on THREADS worker threads (1: the caller's).
 *   --verify  open with TBX_OPEN_VERIFY_DIGESTS (zTensor digests are checked while reading).
 *
 * Output: one line per repetition,
 *   bench_read mode=pread tensors=N bytes=B seconds=S gbps=G checksum=C
 * (mode: pread, mmap or batchT, with "+verify" appended under --verify)
 * where seconds covers open .. close (everything the library does) and checksum folds one byte
 * per 4096 so the work cannot be optimised away. The pread buffer is sized for the largest
 * tensor and faulted in before the timed passes (like a caller that reuses its buffer). Exit 0 on success, 1 on a library error,
 * 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorbox.h"

#define PAGE 4096u

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--mmap] [--batch THREADS] [--verify] [--repeat N] FILE\n", argv0);
}

static int fail(const char *what, tbx_status st, const tbx_error *err) {
    fprintf(stderr, "bench_read: %s: %s (%s)%s%s\n", what, tbx_strerror(st), tbx_status_name(st),
            err && err->message[0] ? ": " : "", err && err->message[0] ? err->message : "");
    return 1;
}

static uint64_t touch_pages(const unsigned char *p, size_t len) {
    uint64_t sum = 0;
    for (size_t k = 0; k < len; k += PAGE) sum += p[k];
    if (len) sum += p[len - 1];
    return sum;
}

static int alloc_buffer(unsigned char **buf, size_t *cap, size_t size) {
    void *nb = NULL;
    /* Page-aligned: copies into a buffer misaligned by 16 bytes (what a large malloc returns)
     * run several times slower on some CPUs. */
    if (posix_memalign(&nb, PAGE, size ? size : 1) != 0) {
        fprintf(stderr, "bench_read: out of memory (%zu bytes)\n", size);
        return 1;
    }
    memset(nb, 0, size ? size : 1);
    free(*buf);
    *buf = nb;
    *cap = size;
    return 0;
}

static int presize_buffer(const char *path, int batch, unsigned char **buf, size_t *cap) {
    tbx_error err;
    memset(&err, 0, sizeof err);
    tbx_file *f = NULL;
    tbx_status st = tbx_open_path(&f, path, NULL, &err);
    if (st != TBX_OK) return fail(path, st, &err);
    uint64_t max = 0, total = 0;
    for (uint64_t i = 0, n = tbx_tensor_count(f); i < n; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(f, i, &ti);
        for (uint32_t c = 0; c < ti.ncomponents; c++) {
            tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
            tbx_component_info_get(f, i, c, &ci);
            if (ci.nbytes > max) max = ci.nbytes;
            total += ci.nbytes;
        }
    }
    tbx_close(f);
    return alloc_buffer(buf, cap, (size_t)(batch ? total : max));
}

/* --batch: every component of every tensor in one tbx_read_batch call. */
static tbx_status read_batch(tbx_file *f, unsigned char *buf, uint32_t threads, uint64_t *bytes,
                             uint64_t *sum, tbx_error *err) {
    uint64_t n = tbx_tensor_count(f), nreq = 0, off = 0;
    for (uint64_t i = 0; i < n; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(f, i, &ti);
        nreq += ti.ncomponents;
    }
    tbx_read_req *req = calloc(nreq ? nreq : 1, sizeof *req);
    if (!req) return TBX_E_NOMEM;
    for (uint64_t i = 0, k = 0; i < n; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(f, i, &ti);
        for (uint32_t c = 0; c < ti.ncomponents; c++, k++) {
            tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
            tbx_component_info_get(f, i, c, &ci);
            req[k].tensor = i;
            req[k].component = c;
            req[k].buf = buf + off;
            req[k].cap = (size_t)ci.nbytes;
            off += ci.nbytes;
        }
    }
    tbx_status st = tbx_read_batch(f, req, (size_t)nreq, threads, err);
    for (uint64_t k = 0; st == TBX_OK && k < nreq; k++)
        *sum += touch_pages(req[k].buf, req[k].cap);
    *bytes = off;
    free(req);
    return st;
}

/* One pass: open, read every tensor, close. */
static int run_once(const char *path, int use_mmap, long batch, int verify, unsigned char **buf,
                    size_t *cap, uint64_t *out_bytes, uint64_t *out_tensors, uint64_t *out_sum) {
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    if (use_mmap) opt.flags |= TBX_OPEN_MMAP;
    if (verify) opt.flags |= TBX_OPEN_VERIFY_DIGESTS;
    tbx_error err;
    memset(&err, 0, sizeof err);
    tbx_file *f = NULL;
    tbx_status st = tbx_open_path(&f, path, &opt, &err);
    if (st != TBX_OK) return fail(path, st, &err);

    uint64_t n = tbx_tensor_count(f), bytes = 0, sum = 0;
    if (batch) {
        st = read_batch(f, *buf, (uint32_t)batch, &bytes, &sum, &err);
        if (st != TBX_OK) { tbx_close(f); return fail("tbx_read_batch", st, &err); }
        n = 0; /* the loop below is for the other modes */
        *out_tensors = tbx_tensor_count(f);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (use_mmap) {
            const void *p = NULL;
            size_t len = 0;
            st = tbx_tensor_map(f, i, &p, &len, &err);
            if (st != TBX_OK) { tbx_close(f); return fail("tbx_tensor_map", st, &err); }
            sum += touch_pages((const unsigned char *)p, len);
            bytes += len;
        } else {
            size_t needed = 0;
            st = tbx_tensor_read(f, i, *buf, *cap, &needed, &err);
            if (st == TBX_E_BUFFER_TOO_SMALL) {
                if (alloc_buffer(buf, cap, needed)) { tbx_close(f); return 1; }
                st = tbx_tensor_read(f, i, *buf, *cap, &needed, &err);
            }
            if (st != TBX_OK) { tbx_close(f); return fail("tbx_tensor_read", st, &err); }
            sum += touch_pages(*buf, needed);
            bytes += needed;
        }
    }
    if (!batch) *out_tensors = n;
    tbx_close(f);
    *out_bytes = bytes;
    *out_sum = sum;
    return 0;
}

int main(int argc, char **argv) {
    int use_mmap = 0, verify = 0;
    long repeat = 1, batch = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mmap") == 0) {
            use_mmap = 1;
        } else if (strcmp(argv[i], "--verify") == 0) {
            verify = 1;
        } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            char *end = NULL;
            batch = strtol(argv[++i], &end, 10);
            if (!end || *end || batch < 1 || batch > 64) { usage(argv[0]); return 2; }
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            char *end = NULL;
            repeat = strtol(argv[++i], &end, 10);
            if (!end || *end || repeat < 1 || repeat > 100000) { usage(argv[0]); return 2; }
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            usage(argv[0]);
            return 2;
        } else if (!path) {
            path = argv[i];
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (!path || (use_mmap && batch)) { usage(argv[0]); return 2; }

    unsigned char *buf = NULL;
    size_t cap = 0;
    if (!use_mmap) {
        /* Untimed: size the reusable buffer for the largest tensor and fault its pages in,
         * so the timed passes measure reading, not the kernel zeroing fresh memory. */
        int rc = presize_buffer(path, batch != 0, &buf, &cap);
        if (rc) return rc;
    }
    for (long r = 0; r < repeat; r++) {
        uint64_t bytes = 0, tensors = 0, sum = 0;
        double t0 = now_seconds();
        int rc = run_once(path, use_mmap, batch, verify, &buf, &cap, &bytes, &tensors, &sum);
        double dt = now_seconds() - t0;
        if (rc) { free(buf); return rc; }
        char mode[32];
        if (batch) snprintf(mode, sizeof mode, "batch%ld", batch);
        else snprintf(mode, sizeof mode, "%s", use_mmap ? "mmap" : "pread");
        printf("bench_read mode=%s%s tensors=%" PRIu64 " bytes=%" PRIu64
               " seconds=%.6f gbps=%.3f checksum=%" PRIu64 "\n", mode, verify ? "+verify" : "",
               tensors, bytes, dt,
               dt > 0 ? (double)bytes / dt / 1e9 : 0.0, sum);
        fflush(stdout);
    }
    free(buf);
    return 0;
}
