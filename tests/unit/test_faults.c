/*
 * test_faults.c - fault injection along the open, validate, read and convert paths.
 *
 * For a small sample of every format (safetensors, GGUF LE and BE, zTensor zstd and digests,
 * OINF v1 and v2, MCF plain / q4 / k3 / int8 / with Hugging Face sections / without tensors,
 * EMBD with its CRC-32s, embd-legacy) and a sharded Hugging Face directory, one "run" is: the
 * validation pass (tbx_validate_callback_; tbx_validate_path for the directory), an open
 * (through a read callback; tbx_open_path for the directory) with digests verified, every
 * component read, the first 4096 values of every tensor decoded to f32, and a conversion to
 * each writable format (zTensor with zstd and a digest, OINF v2, MCF, EMBD, and MCF quantized
 * to k4), then close. A run is repeated with
 *   (a) the Nth allocation failing (a counting allocator given through the open and write
 *       options; one-shot: only the Nth call fails),
 *   (b) the Nth read of the file failing (the read-at callback returns TBX_E_IO; for the
 *       directory, tbx_src_fault_hook_ in src/io/source.c fails the Nth pread with EIO),
 *   (c) the Nth write of an output failing (tbx_out_fault_hook_ in src/io/output.c: EIO),
 * for every N from 1 until a run completes without reaching N. Every call must then end in
 * success or a clean error (its code in err.code, a non-empty message); a conversion that
 * succeeds must write the same bytes as without faults; no temporary file may stay behind; and
 * after close the allocator must hold nothing (no leak, every free given the size allocated).
 * A read or write fault must make some step fail (never silently succeed).
 * Allocations inside jansson, libcbor and OpenSSL do not go through tbx_allocator and are not
 * injected; zstd's are.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "tbx_test.h"
#include "tensorbox.h"
#include "api.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Injection state                                                                             */
/* ------------------------------------------------------------------------------------------ */
enum { F_NONE, F_ALLOC, F_READ, F_WRITE };

typedef struct faults {
    int mode;
    uint64_t fail_at;              /* 1-based; 0: never */
    uint64_t n_alloc, n_read, n_write;
    bool fired;
    int64_t live_blocks, live_bytes;
    bool bad_size;                 /* free/realloc got a size other than the one allocated */
} faults;

static faults FS;

static bool fire(uint64_t *counter, int mode) {
    ++*counter;
    if (FS.mode == mode && *counter == FS.fail_at) {
        FS.fired = true;
        return true;
    }
    return false;
}

#define HDR 16u

static void *fa_alloc(void *ud, size_t size) {
    (void)ud;
    if (fire(&FS.n_alloc, F_ALLOC)) return NULL;
    unsigned char *p = malloc(size + HDR);
    if (!p) return NULL;
    memcpy(p, &size, sizeof size);
    FS.live_blocks++;
    FS.live_bytes += (int64_t)size;
    return p + HDR;
}

static void fa_free(void *ud, void *ptr, size_t size) {
    (void)ud;
    if (!ptr) return;
    size_t was;
    memcpy(&was, (unsigned char *)ptr - HDR, sizeof was);
    if (was != size) { FS.bad_size = true; if (getenv("FA_ABORT")) { fprintf(stderr, "free: was %zu got %zu\n", was, size); abort(); } }
    FS.live_blocks--;
    FS.live_bytes -= (int64_t)was;
    free((unsigned char *)ptr - HDR);
}

static void *fa_realloc(void *ud, void *ptr, size_t old_size, size_t new_size) {
    if (!ptr) return fa_alloc(ud, new_size);
    if (fire(&FS.n_alloc, F_ALLOC)) return NULL;
    size_t was;
    memcpy(&was, (unsigned char *)ptr - HDR, sizeof was);
    if (was != old_size) FS.bad_size = true;
    unsigned char *p = realloc((unsigned char *)ptr - HDR, new_size + HDR);
    if (!p) return NULL;
    memcpy(p, &new_size, sizeof new_size);
    FS.live_bytes += (int64_t)new_size - (int64_t)was;
    return p + HDR;
}

static const tbx_allocator FA = {fa_alloc, fa_realloc, fa_free, NULL};

typedef struct membuf {
    const uint8_t *p;
    size_t n;
} membuf;

static tbx_status fa_read_at(void *ud, uint64_t off, void *buf, size_t len) {
    const membuf *m = ud;
    if (fire(&FS.n_read, F_READ)) return TBX_E_IO;
    if (off > m->n || len > m->n - off) return TBX_E_TRUNCATED;
    memcpy(buf, m->p + off, len);
    return TBX_OK;
}

static int fa_write_hook(void) { return fire(&FS.n_write, F_WRITE) ? EIO : 0; }
static int fa_pread_hook(void) { return fire(&FS.n_read, F_READ) ? EIO : 0; }

/* ------------------------------------------------------------------------------------------ */
/* One run                                                                                     */
/* ------------------------------------------------------------------------------------------ */
#define NTARGETS 7
static const tbx_format targets[NTARGETS] = {TBX_FORMAT_SAFETENSORS, TBX_FORMAT_GGUF,
                                             TBX_FORMAT_ZTENSOR, TBX_FORMAT_OINF,
                                             TBX_FORMAT_MCF, TBX_FORMAT_EMBD, TBX_FORMAT_MCF};
static const char *const target_ext[NTARGETS] = {"safetensors", "gguf", "zt", "oinf",
                                                 "mcf", "weights", "k4.mcf"};
#define TARGET_MCF_K4 6 /* MCF, 2-D float tensors quantized to k4 */

typedef struct outcome {
    tbx_status validate, open, reads, convert[NTARGETS];
    uint64_t out_hash[NTARGETS];   /* FNV-1a of the converted file when convert succeeded */
    int unclean;                   /* calls that failed without a proper error */
    int left_files;                /* temporary files left behind */
    char what[200];                /* the first unclean call */
} outcome;

static uint64_t fnv_file(const char *path) {
    size_t n;
    uint8_t *p = tbx_test_slurp(path, &n);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; p && i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    free(p);
    return p ? h : 0;
}

static void judge(outcome *o, tbx_status st, const tbx_error *e, const char *what) {
    if (st == TBX_OK) return;
    if (e->code != st || e->message[0] == '\0' || !memchr(e->message, 0, sizeof e->message)) {
        if (!o->unclean++)
            snprintf(o->what, sizeof o->what, "%s: status %s, err.code %s, message \"%.80s\"",
                     what, tbx_status_name(st), tbx_status_name(e->code), e->message);
    }
}

static void on_problem(void *ud, const tbx_error *e) {
    outcome *o = ud;
    judge(o, e->code == TBX_OK ? TBX_E_STATE : e->code, e, "validate problem");
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void clear_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char p[512];
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
}

/* `m` is the file, or NULL: then `path` is a directory opened by path. */
static void run_once(const membuf *m, const char *path, const char *dir, outcome *o) {
    memset(o, 0, sizeof *o);
    for (int k = 0; k < NTARGETS; k++) o->convert[k] = TBX_E_STATE; /* not attempted */
    clear_dir(dir);
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    opt.allocator = &FA;
    opt.threads = 1;
    tbx_error e;

    /* validation pass */
    uint64_t np = 0;
    if (m)
        o->validate = tbx_validate_callback_(fa_read_at, (void *)m, m->n, &opt, on_problem, o,
                                             &np);
    else
        o->validate = tbx_validate_path(path, &opt, on_problem, o, &np);

    /* open (digests verified), read, convert */
    opt.flags = TBX_OPEN_VERIFY_DIGESTS;
    tbx_file *f = NULL;
    memset(&e, 0, sizeof e);
    if (m)
        o->open = tbx_open_callback(&f, fa_read_at, (void *)m, m->n, &opt, &e);
    else
        o->open = tbx_open_path(&f, path, &opt, &e);
    judge(o, o->open, &e, "open");
    if (o->open != TBX_OK) return;

    for (uint64_t i = 0; i < tbx_tensor_count(f); i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (tbx_tensor_info_get(f, i, &ti) != TBX_OK) continue;
        for (uint32_t c = 0; c < ti.ncomponents; c++) {
            size_t need = 0;
            tbx_status st = tbx_component_read(f, i, c, NULL, 0, &need, &e);
            if (st != TBX_E_BUFFER_TOO_SMALL) { judge(o, st, &e, "size query"); continue; }
            void *buf = malloc(need ? need : 1);
            memset(&e, 0, sizeof e);
            st = tbx_component_read(f, i, c, buf, need, &need, &e);
            judge(o, st, &e, "component read");
            if (st != TBX_OK && o->reads == TBX_OK) o->reads = st;
            free(buf);
        }
        uint64_t n = ti.nelems < 4096 ? ti.nelems : 4096; /* the first values, any dtype */
        if (n && ti.ncomponents) {
            static float out[4096];
            memset(&e, 0, sizeof e);
            tbx_status st = tbx_tensor_read_f32(f, i, 0, n, out, &e);
            judge(o, st, &e, "read_f32");
            if (st != TBX_OK && st != TBX_E_UNSUPPORTED && o->reads == TBX_OK) o->reads = st;
        }
    }

    for (int k = 0; k < NTARGETS; k++) {
        char out[512];
        snprintf(out, sizeof out, "%s/out.%s", dir, target_ext[k]);
        tbx_convert_options co;
        tbx_convert_options_init(&co);
        co.write.format = targets[k];
        co.write.allocator = &FA;
        co.write.threads = 1;
        if (targets[k] == TBX_FORMAT_ZTENSOR) {
            co.write.compress_level = 1;
            co.write.digest = "crc32c";
        }
        if (targets[k] == TBX_FORMAT_OINF) co.write.version = 2; /* quant payloads travel */
        if (k == TARGET_MCF_K4) co.quant_to = TBX_DT_MCF_K4;
        co.flags = TBX_CONVERT_STRINGIFY_META | TBX_CONVERT_DROP_SECTIONS |
                   TBX_CONVERT_DEQUANTIZE;
        memset(&e, 0, sizeof e);
        o->convert[k] = tbx_convert(f, out, &co, &e);
        judge(o, o->convert[k], &e, "convert");
        if (o->convert[k] == TBX_OK) {
            o->out_hash[k] = fnv_file(out);
            unlink(out);
        }
        int left = count_files(dir);
        if (left) o->left_files += left;
        clear_dir(dir);
    }
    tbx_close(f);
}

static bool any_failed(const outcome *o) {
    if (o->validate != TBX_OK || o->open != TBX_OK || o->reads != TBX_OK) return true;
    return false;
}

/* ------------------------------------------------------------------------------------------ */
/* The sweep                                                                                   */
/* ------------------------------------------------------------------------------------------ */
static const char *const samples[] = {
    "fuzz/corpus/safetensors/valid_metadata.safetensors",
    "fuzz/corpus/gguf/valid_all_meta.gguf",
    "fuzz/corpus/gguf/valid_big_endian.gguf",
    "fuzz/corpus/ztensor/ref_zstd.zt",
    "fuzz/corpus/ztensor/hand_digests.zt",
    "fuzz/corpus/oinf/v1_every_kind.oinf",
    "fuzz/corpus/oinf/v2_quant.oinf",
    "fuzz/corpus/mcf/files_plain_dtypes.mcf",
    "fuzz/corpus/mcf/files_quant_edge_q4.mcf",
    "fuzz/corpus/mcf/files_quant_edge_k3.mcf",
    "fuzz/corpus/mcf/int8_activations.mcf",
    "fuzz/corpus/mcf/files_hf_sharded_qwen.mcf",
    "fuzz/corpus/embd/sample.weights",
    "fuzz/corpus/embd/legacy-small.bin",
    "tests/data/mcf/hf/sharded-qwen/", /* a directory: two shards, an index, side files */
    "fuzz/corpus/mcf/files_no_tensors.mcf",
};

static const char *mode_name(int m) {
    return m == F_ALLOC ? "allocation" : m == F_READ ? "read" : "write";
}

static void sweep(const char *rel) {
    const char *root = getenv("TBX_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    size_t n = 0;
    const bool is_dir = rel[strlen(rel) - 1] == '/';
    uint8_t *data = is_dir ? NULL : tbx_test_slurp(path, &n);
    CHECK(is_dir || data != NULL);
    if (!is_dir && !data) { fprintf(stderr, "cannot read %s\n", path); return; }
    membuf m = {data, n};
    const membuf *mp = is_dir ? NULL : &m;
    /* tmpfs when there is one: every conversion fsyncs its output (tbx_test.h) */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tbx_faults_XXXXXX", tbx_test_fast_tmpdir());
    CHECK(mkdtemp(dir) != NULL);

    /* baseline */
    memset(&FS, 0, sizeof FS);
    FS.mode = F_NONE;
    outcome base;
    run_once(mp, path, dir, &base);
    CHECK_EQ(base.validate, TBX_OK);
    CHECK_EQ(base.open, TBX_OK);
    CHECK_EQ(base.reads, TBX_OK);
    CHECK_EQ(base.unclean, 0);
    CHECK_EQ(FS.live_blocks, 0);
    int converted = 0;
    for (int k = 0; k < NTARGETS; k++) converted += base.convert[k] == TBX_OK;
    CHECK(converted >= 1);
    const uint64_t totals[4] = {0, FS.n_alloc, FS.n_read, FS.n_write};

    for (int mode = F_ALLOC; mode <= F_WRITE; mode++) {
        uint64_t runs = 0, bad = 0;
        for (uint64_t at = 1;; at++) {
            memset(&FS, 0, sizeof FS);
            FS.mode = mode;
            FS.fail_at = at;
            outcome o;
            run_once(mp, path, dir, &o);
            if (!FS.fired) break;
            runs++;
            bool ok = o.unclean == 0 && o.left_files == 0 && FS.live_blocks == 0 &&
                      FS.live_bytes == 0 && !FS.bad_size;
            for (int k = 0; k < NTARGETS; k++)
                if (o.convert[k] == TBX_OK && (base.convert[k] != TBX_OK ||
                                               o.out_hash[k] != base.out_hash[k])) {
                    ok = false; /* a conversion that succeeds writes the same bytes */
                    if (bad < 5)
                        fprintf(stderr, "%s: %s %llu failing: converting to %s succeeded with "
                                "other bytes (baseline %s)\n", rel, mode_name(mode),
                                (unsigned long long)at, target_ext[k],
                                tbx_status_name(base.convert[k]));
                }
            bool failed = any_failed(&o);
            for (int k = 0; k < NTARGETS; k++) failed |= o.convert[k] != base.convert[k];
            if (mode != F_ALLOC && !failed) ok = false; /* an I/O fault never goes unnoticed */
            if (!ok && bad++ < 5)
                fprintf(stderr, "%s: %s %llu failing: unclean %d (%s), files left %d, live "
                        "blocks %lld bytes %lld, bad size %d, noticed %d\n", rel,
                        mode_name(mode), (unsigned long long)at, o.unclean, o.what,
                        o.left_files, (long long)FS.live_blocks, (long long)FS.live_bytes,
                        FS.bad_size, failed);
            if (at > totals[mode] + 1000) break; /* runaway guard */
        }
        CHECK_EQ(bad, 0);
        CHECK(runs >= totals[mode] || mode == F_WRITE);
        printf("%-52s %-10s %5llu injected runs (baseline %llu)\n", rel, mode_name(mode),
               (unsigned long long)runs, (unsigned long long)totals[mode]);
    }
    clear_dir(dir);
    rmdir(dir);
    free(data);
}

TBX_TEST(faults_safetensors) { sweep(samples[0]); }
TBX_TEST(faults_gguf) { sweep(samples[1]); }
TBX_TEST(faults_gguf_big_endian) { sweep(samples[2]); }
TBX_TEST(faults_ztensor_zstd) { sweep(samples[3]); }
TBX_TEST(faults_ztensor_digests) { sweep(samples[4]); }
TBX_TEST(faults_oinf_v1) { sweep(samples[5]); }
TBX_TEST(faults_oinf_v2) { sweep(samples[6]); }
TBX_TEST(faults_mcf_plain) { sweep(samples[7]); }
TBX_TEST(faults_mcf_q4) { sweep(samples[8]); }
TBX_TEST(faults_mcf_k3) { sweep(samples[9]); }
TBX_TEST(faults_mcf_int8) { sweep(samples[10]); }
TBX_TEST(faults_mcf_hf_sections) { sweep(samples[11]); }
TBX_TEST(faults_embd) { sweep(samples[12]); }
TBX_TEST(faults_embd_legacy) { sweep(samples[13]); }
TBX_TEST(faults_hf_directory) { sweep(samples[14]); }
TBX_TEST(faults_mcf_no_tensors) { sweep(samples[15]); }

int main(void) {
    tbx_out_fault_hook_ = fa_write_hook;
    tbx_src_fault_hook_ = fa_pread_hook;
    return tbx_test_main();
}
